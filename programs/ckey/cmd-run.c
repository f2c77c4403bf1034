/*
 * ckey run: key one plate with its hint (or an automatic one) and write
 * DIR/alpha.png and DIR/fg.png.
 */
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <unistd.h>

#include "ckey_clip.h"
#include "ckey.h"
#include "commands.h"
#include "help.h"
#include "model-path.h"
#include "opts.h"
#include "output.h"
#include "paths.h"
#include "tempfiles.h"

/* One run: its inputs, outputs and the time each stage took. */
typedef struct run_job {
    opts o;
    ckey_image plate, hint;
    int auto_hint, linear_at_read, test_model;
    int decoded;             /* plate and hint read (else only their headers) */
    int32_t width, height;   /* the plate's size, from its header or decoded */
    ckey_model *model;
    ckey_session *sess;
    ckey_memory_plan plan;
    ckey_run_memory mem;     /* the whole run's plan at width x height */
    ckey_frame frame;
    float *alpha, *fg;
    char *alpha_path, *fg_path;
    double t_read, t_load, t_session, t_key, t_write;
} run_job;

/* --hint auto: a rough chroma-key hint made from the plate itself. */
static int make_auto_hint(run_job *j, ckey_error *err) {
    const ckey_image *plate = &j->plate;
    const size_t sb = ckey_auto_hint_scratch_bytes(plate->width, plate->height);
    void *scratch = malloc(sb);
    j->hint.width = plate->width;
    j->hint.height = plate->height;
    j->hint.channels = 1;
    j->hint.data = malloc((size_t)plate->width * plate->height * sizeof(float));
    if (!scratch || !j->hint.data) {
        free(scratch);
        return fail(j->o.json, CKEY_ERR_NOMEM, "out of memory for the automatic hint");
    }
    const ckey_status st =
        ckey_auto_hint(plate->data, plate->width, plate->height, j->hint.data, scratch, err);
    free(scratch);
    if (st != CKEY_OK) return fail(j->o.json, st, "%s: %s", j->o.image, err->message);
    return CONTINUE;
}

/* An input image from PATH, or from standard input for `-`, read to its
 * end: a pipe or a FIFO is read once, never reopened. */
static ckey_status read_image(const char *path, ckey_image_kind kind, ckey_image *img, ckey_error *err) {
    if (!strcmp(path, "-")) return ckey_image_read_file(stdin, "stdin", kind, img, err);
    return ckey_image_read(path, kind, img, err);
}

static int size_mismatch(const opts *o, int32_t pw, int32_t ph, int32_t hw, int32_t hh) {
    return fail(o->json, CKEY_ERR_INVALID_ARG, "%s is %d x %d but %s is %d x %d: the hint must match the plate",
                o->image, (int)pw, (int)ph, o->hint, (int)hw, (int)hh);
}

/* The plate and its hint, of one size. */
static int read_inputs(run_job *j, ckey_error *err) {
    const opts *o = &j->o;
    const double t0 = now_seconds();
    if (read_image(o->image, CKEY_IMAGE_RGB, &j->plate, err) != CKEY_OK ||
        (!j->auto_hint && read_image(o->hint, CKEY_IMAGE_HINT, &j->hint, err) != CKEY_OK))
        return fail_err(o->json, err);
    /* auto: an EXR plate is linear, converted to sRGB now, at full size, as
     * upstream's reader does by default (linear: after the resize instead) */
    j->linear_at_read = o->space == CKEY_INPUT_LINEAR_AT_READ ||
                        (o->space == CKEY_INPUT_AUTO && !strcasecmp(file_ext(o->image), "exr"));
    if (j->linear_at_read)
        ckey_linear_to_srgb(j->plate.data, 3 * (size_t)j->plate.width * (size_t)j->plate.height);
    if (j->auto_hint) {
        const int rc = make_auto_hint(j, err);
        if (rc != CONTINUE) return rc;
    }
    if (j->plate.width != j->hint.width || j->plate.height != j->hint.height)
        return size_mismatch(o, j->plate.width, j->plate.height, j->hint.width, j->hint.height);
    j->decoded = 1;
    j->width = j->plate.width;
    j->height = j->plate.height;
    j->t_read += now_seconds() - t0;
    return CONTINUE;
}

/*
 * The plate's size before a pixel is decoded, from its header
 * (ckey_image_probe), and the hint's when it is a file too, so that the
 * run's memory is planned, and a plate too large refused, before the image
 * is read. A plate from a pipe or a FIFO cannot be probed without consuming
 * it; it, or a file whose header does not probe, is read now instead (with
 * its hint), so its size is known then and a broken file is reported by its
 * reader before the model is loaded.
 */
static int probe_inputs(run_job *j, ckey_error *err) {
    const opts *o = &j->o;
    const double t0 = now_seconds();
    j->auto_hint = !strcmp(o->hint, "auto");
    int32_t w = 0, h = 0, hw = 0, hh = 0;
    ckey_error ignored;
    const int plate_ok = strcmp(o->image, "-") != 0 && ckey_image_probe(o->image, &w, &h, &ignored) == CKEY_OK;
    const int hint_file = !j->auto_hint && strcmp(o->hint, "-") != 0;
    const int hint_ok = !hint_file || ckey_image_probe(o->hint, &hw, &hh, &ignored) == CKEY_OK;
    if (!plate_ok || !hint_ok) return read_inputs(j, err);
    if (hint_file && (hw != w || hh != h)) return size_mismatch(o, w, h, hw, hh);
    j->width = w;
    j->height = h;
    j->t_read = now_seconds() - t0;
    return CONTINUE;
}

/* The checkpoint, and the note a reduced test configuration gets. */
static int load_model(run_job *j, ckey_error *err) {
    const opts *o = &j->o;
    const double t0 = now_seconds();
    if (ckey_model_load(o->model, &j->model, err) != CKEY_OK) {
        note_model_origin(o, err);
        return fail_err(o->json, err);
    }
    j->t_load = now_seconds() - t0;
    ckey_model_info mi;
    memset(&mi, 0, sizeof mi);
    ckey_model_get_info(j->model, &mi);
    j->test_model = is_test_model(&mi);
    if (j->test_model) test_model_notice(o->model, &mi);
    return CONTINUE;
}

/* The whole run's memory at the plate's size (ckey_plan_run_memory): a plate
 * whose buffers do not fit the --budget, or the memory the machine has
 * available, is refused here, before its pixels are decoded (when its
 * header gave the size) and before anything is written. */
static int plan_run(run_job *j, ckey_error *err) {
    const opts *o = &j->o;
    ckey_run_options ro;
    ckey_run_options_default(&ro);
    ro.kind = CKEY_RUN_PLATE;
    ro.width = j->width;
    ro.height = j->height;
    ro.auto_hint = j->auto_hint;
    const ckey_status st = ckey_plan_run_memory(j->model, &o->so, &ro, &j->mem, err);
    if (st == CKEY_ERR_BUDGET)
        return fail(o->json, st, "%s: %s; nothing was written", !strcmp(o->image, "-") ? "stdin" : o->image,
                    err->message);
    if (st != CKEY_OK) return fail_err(o->json, err);
    return CONTINUE;
}

/* Plan a session and key the plate into j->alpha, j->fg. */
static int key_plate(run_job *j, ckey_error *err) {
    const opts *o = &j->o;
    double t0;
    /* The session's worker threads (the CPU pool, the CUDA runtime's) start
     * with SIGINT / SIGTERM blocked, so these signals always reach this
     * thread, whose handler removes the outputs' temporary files with no
     * other thread moving them meanwhile (tempfiles.h). */
    sigset_t stop, old;
    sigemptyset(&stop);
    sigaddset(&stop, SIGINT);
    sigaddset(&stop, SIGTERM);
    t0 = now_seconds();
    pthread_sigmask(SIG_BLOCK, &stop, &old);
    ckey_session_options so = o->so;
    if (j->mem.session_budget > 0) so.memory_budget = j->mem.session_budget; /* the schedule plan_run chose */
    const ckey_status st = ckey_session_create(j->model, &so, &j->sess, err);
    pthread_sigmask(SIG_SETMASK, &old, NULL);
    if (st != CKEY_OK) return fail_err(o->json, err);
    j->t_session = now_seconds() - t0;
    ckey_session_get_plan(j->sess, &j->plan);

    const size_t pixels = (size_t)j->plate.width * (size_t)j->plate.height;
    j->alpha = malloc(pixels * sizeof *j->alpha);
    j->fg = malloc(3 * pixels * sizeof *j->fg);
    if (!j->alpha || !j->fg)
        return fail(o->json, CKEY_ERR_NOMEM, "out of memory for a %d x %d plate",
                    (int)j->plate.width, (int)j->plate.height);
    ckey_frame *frame = &j->frame;
    frame->width = j->plate.width;
    frame->height = j->plate.height;
    frame->rgb = j->plate.data;
    frame->hint = j->hint.data;
    frame->input_is_linear = o->space == CKEY_INPUT_LINEAR;
    t0 = now_seconds();
    if (ckey_session_key(j->sess, frame, j->alpha, j->fg, err) != CKEY_OK)
        return fail_err(o->json, err);
    j->t_key = now_seconds() - t0;
    return CONTINUE;
}

/* DIR (created if needed)/alpha.png, 16-bit gray, and DIR/fg.png, 16-bit
 * RGB, as a pair: both are written under temporary names in DIR
 * (<name>.ckey-<pid>.tmp, and ckey_image_write_png's own temporary name for
 * that, ckey_temp_path, on the way) and renamed into place only once both are complete. A failed write
 * (a full disk, ...) or SIGINT / SIGTERM removes the temporary files and
 * leaves an older pair in DIR as it was (tempfiles.h). */
static int write_outputs(run_job *j, ckey_error *err) {
    const opts *o = &j->o;
    char why[4400];
    if (!make_dirs(o->out, why, sizeof why)) return fail(o->json, CKEY_ERR_IO, "%s", why);
    j->alpha_path = path_join(o->out, "alpha.png");
    j->fg_path = path_join(o->out, "fg.png");
    if (!j->alpha_path || !j->fg_path) return fail(o->json, CKEY_ERR_NOMEM, "out of memory");
    const char *final[2] = {j->alpha_path, j->fg_path};
    char tmp[2][4096], lib_tmp[2][4096];
    for (int i = 0; i < 2; i++) {
        const int n = snprintf(tmp[i], sizeof tmp[i], "%s.ckey-%ld.tmp", final[i], (long)getpid());
        /* the writer's own temporary name (this thread writes both) */
        char *lt = n < 0 || (size_t)n >= sizeof tmp[i] ? NULL : ckey_temp_path(tmp[i]);
        const int m = lt ? snprintf(lib_tmp[i], sizeof lib_tmp[i], "%s", lt) : -1;
        free(lt);
        if (m < 0 || (size_t)m >= sizeof lib_tmp[i])
            return fail(o->json, CKEY_ERR_INVALID_ARG, "%s: output path too long", o->out);
    }
    /* in the order a file moves (the library renames lib_tmp to tmp) */
    const char *temps[4] = {lib_tmp[0], tmp[0], lib_tmp[1], tmp[1]};
    char what[2048];
    snprintf(what, sizeof what, "%.900s and %.900s not written (temporary files removed)", final[0], final[1]);
    if (!temps_arm(temps, 4, what)) return fail(o->json, CKEY_ERR_INTERNAL, "cannot arm the temporary files");
    const int32_t w = j->plate.width, h = j->plate.height;
    const double t0 = now_seconds();
    ckey_status st = ckey_image_write_png(tmp[0], j->alpha, 1, w, h, 16, err);
    const int failed = st == CKEY_OK; /* the output that failed, if one does: alpha (0) or fg (1) */
    if (st == CKEY_OK) st = ckey_image_write_png(tmp[1], j->fg, 3, w, h, 16, err);
    if (st != CKEY_OK) {
        temps_discard();
        return fail(o->json, st, "cannot write %s: %s; nothing was replaced in %s", final[failed],
                    err->message[0] ? err->message : ckey_status_name(st), o->out);
    }
    /* fg, then alpha: both files are complete, only the renames remain */
    const char *from[2] = {tmp[1], tmp[0]}, *to[2] = {final[1], final[0]};
    if (!temps_commit(from, to, 2, why, sizeof why)) return fail(o->json, CKEY_ERR_IO, "%s", why);
    sync_dir(o->out);
    j->t_write = now_seconds() - t0;
    return CONTINUE;
}

static void report(const run_job *j) {
    const opts *o = &j->o;
    if (o->json) {
        printf("{\"ok\": true, \"command\": \"run\", \"model\": ");
        json_str(stdout, o->model);
        printf(", \"image\": ");
        json_str(stdout, o->image);
        printf(", \"hint\": ");
        json_str(stdout, o->hint);
        printf(", \"width\": %d, \"height\": %d, \"size\": %d, \"threads\": %d, "
               "\"refiner_strength\": %g, \"input_is_linear\": %s, \"linear_at_read\": %s, "
               "\"test_weights\": %s, ",
               (int)j->plate.width, (int)j->plate.height, (int)o->so.size, (int)o->so.threads,
               (double)o->so.refiner_strength, j->frame.input_is_linear ? "true" : "false",
               j->linear_at_read ? "true" : "false", j->test_model ? "true" : "false");
        printf("\"seconds\": {\"read\": %.6f, \"load\": %.6f, \"session\": %.6f, \"key\": %.6f, "
               "\"write\": %.6f}, \"memory\": ",
               j->t_read, j->t_load, j->t_session, j->t_key, j->t_write);
        print_plan_json(&j->plan);
        printf(", \"run_memory\": ");
        print_run_memory_json(&j->mem, j->width, j->height);
        printf(", \"peak_rss_bytes\": %lld", (long long)peak_rss_bytes());
        printf(", \"outputs\": {\"alpha\": ");
        json_str(stdout, j->alpha_path);
        printf(", \"fg\": ");
        json_str(stdout, j->fg_path);
        printf("}}\n");
        return;
    }
    printf("ckey run: %s (%d x %d) + %s, model %s%s, S = %d\n", o->image, (int)j->plate.width,
           (int)j->plate.height, o->hint, o->model, j->test_model ? " (test weights)" : "",
           (int)o->so.size);
    printf("  read     %8.3f s\n", j->t_read);
    printf("  load     %8.3f s\n", j->t_load);
    printf("  session  %8.3f s   network %.1f MiB (weights %.1f MiB + arena %.1f MiB", j->t_session,
           mib(j->plan.peak_bytes), mib(j->plan.weight_bytes), mib(j->plan.arena_bytes));
    if (j->plan.workspace_bytes > 0) printf(" + workspace %.1f MiB", mib(j->plan.workspace_bytes));
    printf(")");
    /* a budget chose bands: the refiner computes more to fit */
    if (j->plan.refiner_band)
        printf(", refiner in bands of %d rows (work x%.1f)", (int)j->plan.refiner_band, j->plan.relative_work);
    printf("\n");
    printf("  key      %8.3f s\n", j->t_key);
    printf("  write    %8.3f s\n", j->t_write);
    char parts[256], peak[32];
    ckey_run_memory_parts(&j->mem, parts, sizeof parts);
    printf("  memory   planned peak %s for the %d x %d plate: %s\n",
           ckey_format_bytes(peak, sizeof peak, j->mem.total_bytes), (int)j->width, (int)j->height, parts);
    printf("  wrote %s (16-bit gray) and %s (16-bit RGB)\n", j->alpha_path, j->fg_path);
}

int cmd_run(int argc, char **argv) {
    run_job j;
    memset(&j, 0, sizeof j);
    opts *o = &j.o;
    opts_init_session(o, "run");
    const int rc = parse_opts(argc, argv,
                              O_MODEL | O_IMAGE | O_HINT | O_OUT | O_SIZE | O_THREADS | O_STRENGTH |
                                  O_LINEAR | O_INPUT_SPACE | O_DEVICE | O_BUDGET | O_JSON |
                                  O_RESIZE_BACK | O_PRECISION,
                              0, help_run, o);
    if (rc != CONTINUE) return rc;
    if (!require(o, o->image, "--image") || !require(o, o->hint, "--hint") ||
        !require(o, o->out, "--out"))
        return EXIT_USAGE;
    const int found = find_model(o);
    if (found != CONTINUE) return found;
    if (!strcmp(o->image, "-") && !strcmp(o->hint, "-"))
        return usage_error("run", "only one of --image and --hint can be - (standard input)");

    ckey_error err;
    memset(&err, 0, sizeof err);
    int exit_code = probe_inputs(&j, &err);
    if (exit_code == CONTINUE) exit_code = load_model(&j, &err);
    if (exit_code == CONTINUE) exit_code = plan_run(&j, &err);
    if (exit_code == CONTINUE && !j.decoded) {
        const int32_t w = j.width, h = j.height;
        exit_code = read_inputs(&j, &err);
        /* the decoder has the last word on the size */
        if (exit_code == CONTINUE && (j.width != w || j.height != h)) exit_code = plan_run(&j, &err);
    }
    if (exit_code == CONTINUE) exit_code = key_plate(&j, &err);
    if (exit_code == CONTINUE) exit_code = write_outputs(&j, &err);
    if (exit_code == CONTINUE) {
        report(&j);
        exit_code = EXIT_OK;
    }
    free(j.alpha_path);
    free(j.fg_path);
    free(j.alpha);
    free(j.fg);
    ckey_session_free(j.sess);
    ckey_model_free(j.model);
    ckey_image_free(&j.plate);
    ckey_image_free(&j.hint);
    return exit_code;
}
