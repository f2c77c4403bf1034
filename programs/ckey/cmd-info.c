/* ckey info: a checkpoint's architecture and the memory plan of a session. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "ckey_clip.h"
#include "ckey_debug.h"
#include "ckey_track.h"
#include "ckey.h"
#include "commands.h"
#include "help.h"
#include "model-path.h"
#include "opts.h"
#include "output.h"

static void print_list(const int32_t *v, int n) {
    for (int i = 0; i < n; i++) printf("%s%d", i ? "/" : "", (int)v[i]);
}

static void json_list(const int32_t *v, int n) {
    putchar('[');
    for (int i = 0; i < n; i++) printf("%s%d", i ? ", " : "", (int)v[i]);
    putchar(']');
}

/* Append the CKEY_PLAN_* steps in bits to buf, each after sep. */
static void streamed_steps(char *buf, size_t cap, int32_t bits, const char *sep) {
    static const struct {
        int32_t bit;
        const char *what;
    } steps[] = {{CKEY_PLAN_POS_STREAMED, "pos-embed resized row by row"},
                 {CKEY_PLAN_QKV_STREAMED, "global attention's qkv streamed"},
                 {CKEY_PLAN_DECODER_BANDS, "decoders in bands"},
                 {CKEY_PLAN_FROM_MAPS, "stage transitions from the maps"},
                 {CKEY_PLAN_NORM1_FROM_MAP, "norm1 from the map"},
                 {CKEY_PLAN_INPUT_RGB, "input hint released"},
                 {CKEY_PLAN_REROLL_IN_PLACE, "maps rerolled in place"},
                 {CKEY_PLAN_ENCODER_BANDS, "mask-unit blocks in bands"},
                 {CKEY_PLAN_OUT_IN_INPUT, "output in the input's buffer"},
                 {CKEY_PLAN_C1_BANDS, "c1 to and from host memory in bands"},
                 {CKEY_PLAN_X_ON_HOST, "input in host memory"},
                 {CKEY_PLAN_OUT_ON_HOST, "output in host memory"}};
    for (size_t i = 0; i < sizeof steps / sizeof steps[0]; i++)
        if (bits & steps[i].bit) {
            const size_t n = strlen(buf);
            snprintf(buf + n, cap - n, "%s%s", sep, steps[i].what);
        }
}

/* What info found: the model's architecture, its plan and the time each took. */
typedef struct info_result {
    ckey_model_info mi;
    ckey_memory_plan plan;
    int have_run;             /* --plate-size: the run's plan below */
    ckey_run_memory run;
    int64_t host_available;   /* ckey_host_memory_available, with --plate-size */
    int have_track;           /* --mask: the tracker key --mask runs beside the keyer */
    ckey_track_memory track;
    int32_t track_objects;    /* objects of the masks, in all */
    double t_load, t_plan;
} info_result;

/* The number of stages the architecture lists hold (at most 4). */
static int stage_count(const ckey_model_info *mi) {
    return mi->num_stages < 0 ? 0 : mi->num_stages > 4 ? 4 : mi->num_stages;
}

static void print_json(const opts *o, const info_result *r) {
    const ckey_model_info *mi = &r->mi;
    const int ns = stage_count(mi);
    printf("{\"ok\": true, \"command\": \"info\", \"model\": ");
    json_str(stdout, o->model);
    printf(", \"test_weights\": %s, \"architecture\": {\"embed_dim\": %d, \"head_dim\": %d, "
           "\"num_blocks\": %d, \"num_stages\": %d, \"stage_blocks\": ",
           is_test_model(mi) ? "true" : "false", (int)mi->embed_dim, (int)mi->head_dim,
           (int)mi->num_blocks, (int)mi->num_stages);
    json_list(mi->stage_blocks, ns);
    printf(", \"stage_dims\": ");
    json_list(mi->stage_dims, ns);
    printf(", \"stage_heads\": ");
    json_list(mi->stage_heads, ns);
    printf(", \"decoder_dim\": %d, \"refiner_dim\": %d, \"refiner_groups\": %d, "
           "\"pos_embed_grid\": %d, \"native_size\": %d}, \"num_params\": %lld, ",
           (int)mi->decoder_dim, (int)mi->refiner_dim, (int)mi->refiner_groups,
           (int)mi->pos_embed_grid, (int)mi->native_size, (long long)mi->num_params);
    printf("\"size\": %d, \"seconds\": {\"load\": %.6f, \"plan\": %.6f}, \"memory\": ",
           (int)o->so.size, r->t_load, r->t_plan);
    print_plan_json(&r->plan);
    if (r->have_run) {
        printf(", \"for\": \"%s\", \"run_memory\": ", o->plan_key ? "key" : "run");
        print_run_memory_json(&r->run, o->plate_w, o->plate_h);
        printf(", \"host_available_bytes\": %lld", (long long)r->host_available);
    }
    if (r->have_track) {
        const ckey_track_memory *t = &r->track;
        printf(", \"track_model\": ");
        json_str(stdout, o->track_model);
        printf(", \"track_memory\": {\"objects\": %d, \"weight_bytes\": %lld, \"bank_bytes\": %lld, "
               "\"sensory_bytes\": %lld, \"frame_bytes\": %lld, \"arena_bytes\": %lld, \"workspace_bytes\": %lld, "
               "\"source_bytes\": %lld, \"total_bytes\": %lld}",
               (int)r->track_objects, (long long)t->weight_bytes, (long long)t->bank_bytes, (long long)t->sensory_bytes,
               (long long)t->frame_bytes, (long long)t->arena_bytes, (long long)t->workspace_bytes,
               (long long)t->source_bytes, (long long)t->total_bytes);
    }
    printf("}\n");
}

static void print_text(const opts *o, const info_result *r) {
    const ckey_model_info *mi = &r->mi;
    const ckey_memory_plan *plan = &r->plan;
    const int ns = stage_count(mi);
    printf("model         %s%s\n", o->model, is_test_model(mi) ? " (reduced test configuration)" : "");
    printf("encoder       hiera: %d stages, blocks ", (int)mi->num_stages);
    print_list(mi->stage_blocks, ns);
    printf(" (%d in all), dims ", (int)mi->num_blocks);
    print_list(mi->stage_dims, ns);
    printf(", heads ");
    print_list(mi->stage_heads, ns);
    printf(", head_dim %d, embed_dim %d\n", (int)mi->head_dim, (int)mi->embed_dim);
    printf("decoders      dim %d; refiner dim %d, %d GroupNorm groups\n", (int)mi->decoder_dim,
           (int)mi->refiner_dim, (int)mi->refiner_groups);
    printf("pos-embed     %d x %d grid (native S = %d)\n", (int)mi->pos_embed_grid,
           (int)mi->pos_embed_grid, (int)mi->native_size);
    printf("parameters    %lld (%.1f M)\n", (long long)mi->num_params, (double)mi->num_params / 1e6);
    const int on_gpu = o->so.device == CKEY_DEVICE_CUDA;
    const ckey_precision prec =
        !on_gpu ? CKEY_PRECISION_FP32
        : o->so.precision == CKEY_PRECISION_DEFAULT ? CKEY_PRECISION_FP16 : o->so.precision;
    char devname[32];
    if (on_gpu) snprintf(devname, sizeof devname, "cuda:%d", (int)o->so.device_index);
    else snprintf(devname, sizeof devname, "the CPU");
    printf("memory plan   at S = %d on %s, %s (%s memory):\n", (int)o->so.size, devname,
           ckey_precision_name(prec), on_gpu ? "device" : "host");
    printf("  weights     %10.1f MiB\n", mib(plan->weight_bytes));
    printf("  arena       %10.1f MiB (of which scratch %s%.1f MiB)\n", mib(plan->arena_bytes),
           on_gpu ? "at most " : "", mib(plan->scratch_bytes));
    if (plan->workspace_bytes > 0)
        printf("  workspace   %10.1f MiB (cuBLAS's, the conv's sync ints)\n", mib(plan->workspace_bytes));
    printf("  peak        %10.1f MiB\n", mib(plan->peak_bytes));
    printf("  buffers     %10d   (without reuse they would take %.1f MiB)\n",
           (int)plan->num_buffers, mib(plan->naive_bytes));
    if (o->memory) {
        /* the most bytes live at once in each stage (the arena may hold more: placement) */
        printf("  live at most: encoder %.1f MiB, decoders %.1f MiB, refiner %.1f MiB\n",
               mib(plan->stage_bytes[0]), mib(plan->stage_bytes[1]), mib(plan->stage_bytes[2]));
    }
    char chunks[320] = "";
    if (plan->encoder_chunks > 1)
        snprintf(chunks, sizeof chunks, "; encoder attention in %d chunks of windows%s", (int)plan->encoder_chunks,
                 plan->c1_on_host ? "; c1 in host memory" : "");
    streamed_steps(chunks, sizeof chunks, plan->streamed, "; ");
    if (plan->refiner_band)
        printf("  schedule    refiner in bands of %d rows, recomputed per GroupNorm (refiner work x%.1f)%s\n",
               (int)plan->refiner_band, plan->relative_work, chunks);
    else
        printf("  schedule    refiner on whole maps%s\n", chunks[0] ? chunks : " (the fastest)");
    char lean[320];
    if (plan->min_budget_band) snprintf(lean, sizeof lean, "bands of %d rows", (int)plan->min_budget_band);
    else snprintf(lean, sizeof lean, "whole maps");
    if (plan->min_budget_chunks > 1)
        snprintf(lean + strlen(lean), sizeof lean - strlen(lean), ", encoder in %d chunks%s",
                 (int)plan->min_budget_chunks, plan->min_budget_c1_on_host ? ", c1 in host memory" : "");
    streamed_steps(lean, sizeof lean, plan->min_budget_streamed, ", ");
    printf("  smallest budget %.1f MiB (%lld bytes; refiner on %s)\n", mib(plan->min_budget_bytes),
           (long long)plan->min_budget_bytes, lean);
    if (r->have_run) {
        char b[32];
        if (o->plan_key)
            printf("run plan      ckey key on %d x %d plates (%d frames in flight, %d writer%s):\n",
                   (int)o->plate_w, (int)o->plate_h, (int)r->run.frames_in_flight, (int)r->run.writers,
                   r->run.writers == 1 ? "" : "s");
        else
            printf("run plan      ckey run on a %d x %d plate:\n", (int)o->plate_w, (int)o->plate_h);
        print_run_memory_text(&r->run, "  ");
        printf("  host memory available now %s; run and key refuse a plate past 90 %% of it\n",
               ckey_format_bytes(b, sizeof b, r->host_available));
    }
    if (r->have_track) {
        const ckey_track_memory *t = &r->track;
        printf("tracker plan  Cutie %s on %d x %d frames, %d object%s, --track-size %d (host memory):\n",
               o->track_model, (int)o->plate_w, (int)o->plate_h, (int)r->track_objects, r->track_objects == 1 ? "" : "s",
               o->track_size < 0 ? 480 : o->track_size);
        static const char *const what[] = {"weights", "memory bank", "sensory", "frame", "arena", "workspace",
                                           "source"};
        static const char *const note[] = {
            "fp32, shared by the run", "working (and long-term) memory: keys, shrinkages, values",
            "sensory and object memory", "the frame, its features, the probabilities",
            "the largest part's temporaries", "the ops' per-thread workspace",
            "the tracked source's frame, probabilities and masks"};
        const int64_t v[] = {t->weight_bytes, t->bank_bytes,      t->sensory_bytes, t->frame_bytes,
                             t->arena_bytes,  t->workspace_bytes, t->source_bytes};
        char b[32];
        for (size_t k = 0; k < sizeof v / sizeof v[0]; k++)
            printf("  %-14s %11s  %s\n", what[k], ckey_format_bytes(b, sizeof b, v[k]), note[k]);
        printf("  %-14s %11s  (in the run plan's total)\n", "total", ckey_format_bytes(b, sizeof b, t->total_bytes));
    }
    printf("time          load %.3f s, plan %.3f s\n", r->t_load, r->t_plan);
}

/* --plate-size and the options that shape a run's plan (--for, and for key
 * --read-ahead, --readers, --writers, --video-out, --hint auto) go together. */
static int check_run_opts(opts *o) {
    if (o->mask) { /* a run of key --mask, on plates of the mask's size unless --plate-size says */
        if (o->have_for && !o->plan_key)
            return usage_error(o->cmd, "--mask plans ckey key --mask: leave out --for run");
        o->plan_key = 1;
    } else if (o->nmask_at || o->track_model || o->track_size >= 0) {
        return usage_error(o->cmd, "--mask-at, --track-model and --track-size go with --mask");
    }
    const int have_plate = o->plate_w > 0 || o->mask;
    if (!have_plate && (o->have_for || o->hint || o->read_ahead >= 0 || o->readers || o->writers || o->video_out))
        return usage_error(o->cmd, "--for, --hint, --read-ahead, --readers, --writers and --video-out describe the "
                                   "run a plate is planned for: add --plate-size WxH");
    if (o->hint && strcmp(o->hint, "auto") != 0)
        return usage_error(o->cmd, "--hint '%s': info plans with --hint auto only (a hint file is the "
                                   "plate's size)", o->hint);
    if (!o->plan_key && (o->read_ahead >= 0 || o->readers || o->writers || o->video_out))
        return usage_error(o->cmd, "--read-ahead, --readers, --writers and --video-out shape a clip: add --for key");
    return CONTINUE;
}

/* The whole run's plan at --plate-size (ckey_plan_run_memory), checked
 * against --budget only: info describes runs for other machines too. */
static ckey_status plan_run(const opts *o, const ckey_model *model, info_result *r, ckey_error *err) {
    ckey_run_options ro;
    ckey_run_options_default(&ro);
    ro.kind = o->plan_key ? CKEY_RUN_SHOT : CKEY_RUN_PLATE;
    ro.width = o->plate_w;
    ro.height = o->plate_h;
    ro.auto_hint = o->hint != NULL;
    ro.video_out = (o->video_out & VIDEO_OUT_PRORES ? CKEY_RUN_VIDEO_PRORES : 0) |
                   (o->video_out & VIDEO_OUT_H264 ? CKEY_RUN_VIDEO_H264 : 0);
    if (o->read_ahead >= 0) ro.shot.read_ahead = o->read_ahead;
    ro.shot.writers = o->writers;
    ro.shot.readers = o->readers;
    ro.host_limit = -1;
    ro.track_bytes = r->have_track ? r->track.total_bytes : 0;
    ro.track_device_bytes = r->have_track ? r->track.total_bytes - r->track.host_bytes : 0;
    r->have_run = 1;
    r->host_available = ckey_host_memory_available();
    return ckey_plan_run_memory(model, &o->so, &ro, &r->run, err);
}

/* --mask: the tracker and tracked source of key --mask on the mask's
 * frames (its size is the plates' unless --plate-size says), for the objects
 * of --mask and every --mask-at (ckey_track_source_plan_memory). */
static ckey_status plan_tracker(opts *o, info_result *r, ckey_error *err) {
    uint8_t seen[256] = {0}, objects[255];
    int32_t count = 0, first = 0, mw = 0, mh = 0;
    for (int k = -1; k < o->nmask_at; k++) {
        const char *path = k < 0 ? o->mask : o->mask_at[k];
        uint8_t *labels = NULL;
        int32_t w = 0, h = 0, n = 0;
        ckey_status st = ckey_track_read_mask(path, &labels, &w, &h, objects, &n, err);
        free(labels);
        if (st != CKEY_OK) return st;
        if (k < 0) mw = w, mh = h;
        else if (w != mw || h != mh) {
            err->status = CKEY_ERR_INVALID_ARG;
            snprintf(err->message, sizeof err->message, "%s: the mask is %d x %d, the first mask (%s) %d x %d", path,
                     (int)w, (int)h, o->mask, (int)mw, (int)mh);
            return err->status;
        }
        for (int i = 0; i < n; i++) count += !seen[objects[i]], seen[objects[i]] = 1;
        if (k < 0) first = count;
    }
    if (o->plate_w <= 0) o->plate_w = mw, o->plate_h = mh;
    ckey_track_model *m = NULL;
    ckey_status st = ckey_track_model_open(o->track_model, NULL, &m, err);
    if (st != CKEY_OK) return st;
    ckey_track_options to;
    ckey_track_options_default(&to);
    to.max_internal_size = o->track_size < 0 ? 480 : o->track_size == 0 ? -1 : o->track_size; /* as key --mask */
    to.threads = o->so.threads;
    st = ckey_track_source_plan_memory(m, o->plate_w, o->plate_h, count, first, o->nmask_at, &to, &r->track, err);
    ckey_track_model_free(m);
    r->have_track = st == CKEY_OK;
    r->track_objects = count;
    return st;
}

int cmd_info(int argc, char **argv) {
    opts o;
    opts_init_session(&o, "info");
    o.read_ahead = -1;
    int rc = parse_opts(argc, argv,
                        O_MODEL | O_SIZE | O_THREADS | O_DEVICE | O_PRECISION | O_BUDGET | O_JSON |
                            O_MEMORY | O_PLATE_SIZE | O_FOR | O_HINT | O_READ_AHEAD | O_READERS | O_WRITERS |
                            O_VIDEO_OUT | O_RESIZE_BACK | O_MASK | O_MASK_AT | O_TRACK_MODEL | O_TRACK_SIZE,
                        0, help_info, &o);
    if (rc == CONTINUE) rc = check_run_opts(&o);
    if (rc != CONTINUE) return rc;
    int found = find_model(&o);
    if (found == CONTINUE && o.mask) found = find_track_model(&o);
    if (found != CONTINUE) return found;

    ckey_error err;
    memset(&err, 0, sizeof err);
    info_result r;
    memset(&r, 0, sizeof r);
    ckey_model *model = NULL;
    double t0 = now_seconds();
    if (ckey_model_load(o.model, &model, &err) != CKEY_OK) {
        note_model_origin(&o, &err);
        return fail_err(o.json, &err);
    }
    r.t_load = now_seconds() - t0;
    ckey_model_get_info(model, &r.mi);
    /* without --size: the size the checkpoint was trained at */
    if (!o.have_size && r.mi.native_size > 0) o.so.size = r.mi.native_size;
    t0 = now_seconds();
    ckey_status st = ckey_plan_memory(model, &o.so, &r.plan, &err);
    if (st == CKEY_OK && o.mask) st = plan_tracker(&o, &r, &err);
    if (st == CKEY_OK && o.plate_w > 0) st = plan_run(&o, model, &r, &err);
    r.t_plan = now_seconds() - t0;
    if (st == CKEY_OK && o.memory && !o.json) {
        printf("planned buffers (tag, size, offset in the arena, lifetime in op events; -1 = to the end):\n");
        st = ckey_plan_memory_print(model, &o.so, stdout, &err);
        printf("\n");
    }
    ckey_model_free(model);
    if (st != CKEY_OK) return fail_err(o.json, &err);
    if (o.json) print_json(&o, &r);
    else print_text(&o, &r);
    if (is_test_model(&r.mi)) test_model_notice(o.model, &r.mi);
    return EXIT_OK;
}
