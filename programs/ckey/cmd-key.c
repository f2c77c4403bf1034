/*
 * ckey key: key a clip (an image sequence or a video) into the Matte/, FG/,
 * Processed/ and Comp/ passes, optionally ProRes / H.264 videos. The library's
 * shot runner does the work (ckey_shot_run); this file resolves the paths,
 * plans which frames to key (--frames, resume), reports progress and turns
 * SIGINT / SIGTERM into a clean stop.
 */
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/stat.h>
#include <unistd.h>

#include "ckey_clip.h"
#include "ckey.h"
#include "clip-paths.h"
#include "commands.h"
#include "help.h"
#include "model-path.h"
#include "opts.h"
#include "output.h"
#include "paths.h"
#include "stop.h"
#include "tracking.h"

/* ------------------------------------------------- messages, progress */

/* State of one `key` run shared by its messages and the progress callback. */
typedef struct key_ctx {
    int json, tty;
    int64_t total;   /* frames in the plan (keyed + skipped + failed) */
    int64_t to_key;
    int64_t pos;     /* events so far */
    int64_t warnings; /* CKEY_SHOT_WARNING events */
    int nsess;        /* sessions keying (--device list: several) */
} key_ctx;

/* Runtime failure of `key`: stderr message, and with --json an error event. */
#define key_fail(k, st, ...) event_fail((k)->json, 0, (st), __VA_ARGS__)

static void key_warning(const key_ctx *k, const char *msg) { event_warning(k->json, msg); }

static void key_warning_cb(void *user, const char *msg) { key_warning(user, msg); }

static void fmt_eta(char *buf, size_t cap, double s) {
    if (!(s >= 0) || s > 1e7) {
        snprintf(buf, cap, "--:--");
        return;
    }
    long t = (long)(s + 0.5);
    if (t >= 3600) snprintf(buf, cap, "%ld:%02ld:%02ld", t / 3600, (t / 60) % 60, t % 60);
    else snprintf(buf, cap, "%ld:%02ld", t / 60, t % 60);
}

/* "read (readers 93% busy)": the stage that bounds the run so far and the
 * busy share of its threads; "-" before any time was counted. */
static void fmt_bound(char *buf, size_t cap, const ckey_shot_load *l) {
    if (!l || l->bound < 0 || l->bound_group < 0) {
        snprintf(buf, cap, "-");
        return;
    }
    snprintf(buf, cap, "%s (%s %.0f%% busy)", ckey_shot_stage_name(l->bound), ckey_shot_group_name(l->bound_group),
             100.0 * l->use[l->bound_group]);
}

/* The load as JSON members: "stages":{...},"use":{...},"threads":{...},
 * the network's waits, "bound" and "bound_group" (no braces around). */
static void json_load(FILE *f, const ckey_shot_load *l) {
    fprintf(f, "\"stages\":{");
    for (int k = 0; k < CKEY_SHOT_STAGES; k++)
        fprintf(f, "%s\"%s\":%.6f", k ? "," : "", ckey_shot_stage_name(k), l->stage_seconds[k]);
    fprintf(f, "},\"use\":{");
    for (int g = 0; g < CKEY_SHOT_GROUPS; g++)
        fprintf(f, "%s\"%s\":%.4f", g ? "," : "", ckey_shot_group_name(g), l->use[g]);
    fprintf(f, "},\"threads\":{");
    for (int g = 0; g < CKEY_SHOT_GROUPS; g++)
        fprintf(f, "%s\"%s\":%d", g ? "," : "", ckey_shot_group_name(g), (int)l->threads[g]);
    fprintf(f, "},\"wait_input_seconds\":%.6f,\"wait_output_seconds\":%.6f,\"wait_turn_seconds\":%.6f,\"bound\":",
            l->wait_input_seconds, l->wait_output_seconds, l->wait_turn_seconds);
    if (l->bound >= 0) fprintf(f, "\"%s\",\"bound_group\":\"%s\"", ckey_shot_stage_name(l->bound),
                               ckey_shot_group_name(l->bound_group));
    else fprintf(f, "null,\"bound_group\":null");
}

/* Progress: one call per planned frame, in frame order (ckey_shot_run). */
static void key_event(void *user, const ckey_shot_event *ev) {
    key_ctx *k = user;
    const long long fr = (long long)ev->frame->number;
    const long long pos = (long long)++k->pos;
    /* end to end: frames written per second of the run so far; model only:
     * frames per second spent inside the network */
    const double fps = ev->keyed > 0 && ev->elapsed > 0 ? ev->keyed / ev->elapsed : 0.0;
    const double mfps = ev->keyed > 0 && ev->model_total > 0 ? ev->keyed / ev->model_total : 0.0;
    if (ev->kind == CKEY_SHOT_WARNING) {
        /* about the frame whose event follows: not a position of its own */
        k->pos--;
        k->warnings++;
        if (k->json) {
            printf("{\"event\":\"warning\",\"frame\":%lld,\"message\":", fr);
            json_str(stdout, ev->message);
            printf("}\n");
            fflush(stdout);
        } else if (k->warnings <= 3) {
            fprintf(stderr, "%sckey: warning: %s%s\n", k->tty ? "\n" : "", ev->message,
                    k->warnings == 3 ? " (further warnings are counted, not shown; --json lists "
                                       "them all)" : "");
        }
        return;
    }
    if (ev->kind == CKEY_SHOT_SKIPPED) {
        if (k->json)
            printf("{\"event\":\"frame\",\"frame\":%lld,\"status\":\"skipped\",\"seconds\":0}\n", fr);
        else if (!k->tty)
            fprintf(stderr, "frame %lld (%lld/%lld): skipped, outputs complete\n", fr, pos,
                    (long long)k->total);
    } else if (ev->kind == CKEY_SHOT_FAILED) {
        fprintf(stderr, "%sckey: warning: skipped (--on-error skip): %s\n", k->tty ? "\n" : "",
                ev->error->message);
        if (k->json) {
            printf("{\"event\":\"frame\",\"frame\":%lld,\"status\":\"failed\",\"seconds\":0,"
                   "\"error\":", fr);
            json_str(stdout, ckey_status_name(ev->error->status));
            printf(",\"message\":");
            json_str(stdout, ev->error->message);
            printf("}\n");
        }
    } else {
        const int64_t left = k->to_key - ev->keyed - ev->failed;
        char e[32], b[96];
        fmt_eta(e, sizeof e, left / (fps > 0 ? fps : 1e-9));
        fmt_bound(b, sizeof b, ev->load);
        if (k->json) {
            printf("{\"event\":\"frame\",\"frame\":%lld,\"status\":\"keyed\",\"seconds\":%.6f,"
                   "\"model_seconds\":%.6f,\"width\":%d,\"height\":%d,\"index\":%lld,\"total\":%lld,"
                   "\"fps\":%.4f,\"model_fps\":%.4f,\"session\":%d",
                   fr, ev->seconds, ev->model_seconds, (int)ev->width, (int)ev->height, pos,
                   (long long)k->total, fps, mfps, (int)ev->session);
            if (ev->load) {
                printf(",");
                json_load(stdout, ev->load);
            }
            printf("}\n");
        } else if (k->tty) {
            /* short, to stay within a terminal's line: the stage and its group's use */
            char sb[48] = "-";
            if (ev->load && ev->load->bound >= 0 && ev->load->bound_group >= 0)
                snprintf(sb, sizeof sb, "%s %.0f%%", ckey_shot_stage_name(ev->load->bound),
                         100.0 * ev->load->use[ev->load->bound_group]);
            fprintf(stderr, "\rframe %lld/%lld (#%lld)  %.2f fps (model %.2f fps)  bound: %s  ETA %s   ", pos,
                    (long long)k->total, fr, fps, mfps, sb, e);
        } else {
            fprintf(stderr, "frame %lld (%lld/%lld): keyed in %.3f s (model %.3f s), %.2f fps "
                            "(model %.2f fps), bound by %s, ETA %s\n",
                    fr, pos, (long long)k->total, ev->seconds, ev->model_seconds, fps, mfps, b, e);
        }
    }
    if (k->json) fflush(stdout);
}

/* ------------------------------------------------------------ the run */

/* One `key` run: where it reads and writes, the frame plan, and what it holds
 * open. key_job_free releases it all. */
typedef struct key_job {
    opts o;
    key_ctx kc;
    clip_paths cp;           /* where it reads and writes */
    char *video_path[2];     /* OUT/<clip>_fg_alpha.mov, OUT/<clip>_comp.mp4, or NULL */
    ckey_source src;
    ckey_sink sink;
    uint8_t *plan;           /* per source frame: CKEY_SHOT_EXCLUDE, _SKIP or _KEY */
    int64_t first, last;     /* frame numbers of the first and last planned frames */
    ckey_model *model;
    ckey_track_model *track_model; /* --mask: Cutie, for the tracked source */
    int32_t plate_w, plate_h; /* the largest plate to key, from the headers; 0 x 0: unknown */
    int64_t plate_frame;     /* its index in src.frames, -1 when unknown */
    ckey_run_memory mem;     /* the run's plan at that size (when known) */
    char path_why[400];      /* why the run takes its frame path (choose_frame_path) */
    /* one session per --device (one unless a list was given); none when every
     * frame is skipped */
    ckey_session *sess[CKEY_SHOT_MAX_SESSIONS];
    int nsess;
    double setup_s;          /* model load + sessions */
    double cpu_s;            /* the process's CPU seconds (user + system) while the shot ran */
    ckey_error err;
} key_job;

static void key_job_free(key_job *j) {
    fflush(stdout);
    free(j->plan);
    ckey_source_close(&j->src);
    ckey_sink_close(&j->sink);
    for (int i = 0; i < j->nsess; i++) ckey_session_free(j->sess[i]);
    ckey_model_free(j->model);
    ckey_track_model_free(j->track_model);
    clip_paths_free(&j->cp);
    free(j->video_path[0]);
    free(j->video_path[1]);
}

/* A library failure held in j->err. */
static int key_fail_err(const key_job *j) {
    return key_fail(&j->kc, j->err.status, "%s", j->err.message);
}

static int parse_key_opts(int argc, char **argv, opts *o) {
    opts_init_session(o, "key");
    ckey_shot_options shot_defaults;
    ckey_shot_options_default(&shot_defaults);
    o->post = shot_defaults.post; /* despill 0.5, as upstream's shot command */
    ckey_pass_options pass_defaults;
    ckey_pass_options_default(&pass_defaults);
    o->exr = pass_defaults.exr.compression;
    o->comp_png_level = pass_defaults.comp_png_level;
    o->read_ahead = -1;
    return parse_opts(argc, argv,
                      O_MODEL | O_HINT | O_OUT | O_SIZE | O_THREADS | O_STRENGTH | O_LINEAR |
                          O_INPUT_SPACE | O_DEVICE | O_PRECISION | O_BUDGET | O_JSON | O_PLATE |
                          O_DESPILL | O_NO_DESPECKLE | O_DESPECKLE_AREA | O_FRAMES | O_DRY_RUN |
                          O_FORCE | O_EXR_COMPRESSION | O_ON_ERROR | O_READ_AHEAD |
                          O_RESIZE_BACK | O_DESPECKLE_MODE | O_VIDEO_OUT | O_VERBOSE | O_FPS |
                          O_WRITERS | O_EMPTY_OK | O_DEVICE_LIST | O_READERS | O_EXR_LEVEL |
                          O_COMP_PNG | O_TRACKING | O_FRAME_PATH | O_DEVICE_FRAMES,
                      1, help_key, o);
}

/* A video cannot resume or leave gaps: every frame, in one run. */
static int check_video_opts(const opts *o) {
    if (o->video_out && o->have_frames)
        return usage_error(o->cmd, "--video-out encodes the whole clip, and --frames keys a part "
                                   "of it: key each chunk without --video-out, then write the "
                                   "videos from the finished passes with 'ckey encode' (same "
                                   "SHOT_DIR or --plate and --out, --video-out, --despill)");
    if (o->empty_ok && !o->have_frames)
        return usage_error(o->cmd, "--empty-ok goes with --frames A-B (a range that may hold no "
                                   "frame of the clip)");
    if (o->video_out && o->on_error == CKEY_ON_ERROR_SKIP)
        return usage_error(o->cmd, "--video-out needs every frame: it cannot be combined with "
                                   "--on-error skip");
    if (o->mask && o->hint)
        return usage_error(o->cmd, "--mask makes the hints (tracked from the mask): leave out --hint");
    if (!o->mask && (o->nmask_at || o->object || o->track_model || o->track_size >= 0 ||
                     o->track_device != TRACK_DEVICE_UNSET || o->track_precision))
        return usage_error(o->cmd, "--mask-at, --object, --track-model, --track-size, --track-device and "
                                   "--track-precision go with --mask");
    if (o->fps_num && !o->video_out)
        return usage_error(o->cmd, "--fps sets the frame rate of the --video-out videos: add "
                                   "--video-out prores|h264|both");
    return CONTINUE;
}

/* The plate, hint and output paths (clip-paths.h). */
static int resolve_paths(key_job *j) {
    char why[4400];
    const int rc = clip_paths_resolve(&j->o, !j->o.mask, &j->cp, why, sizeof why);
    if (rc == EXIT_RUNTIME) return key_fail(&j->kc, CKEY_ERR_INVALID_ARG, "%s", why);
    return rc;
}

static int open_clip(key_job *j) {
    /* the passes at the fastest settings unless --exr-level / --comp-png
     * say otherwise; zip-fast keeps its level 1 */
    ckey_pass_options po;
    ckey_pass_options_default(&po);
    po.exr.compression = j->o.exr;
    po.exr.level = j->o.exr_level ? j->o.exr_level : j->o.exr == CKEY_EXR_ZIP_FAST ? 0 : po.exr.level;
    po.comp_png_level = j->o.comp_png_level;
    if (ckey_source_open_video(j->cp.plate_dir, j->cp.auto_hint ? NULL : j->cp.hint_dir, 0,
                               key_warning_cb, &j->kc, &j->src, &j->err) != CKEY_OK ||
        ckey_sink_open_passes_opt(j->cp.out_dir, &po, &j->sink, &j->err) != CKEY_OK)
        return key_fail_err(j);
    return CONTINUE;
}

/* The plan: frames within --frames; complete ones skipped (resume). A plate
 * without a hint stops here, before anything is keyed, unless --on-error skip
 * (then that frame fails in its turn). */
static int plan_frames(key_job *j) {
    const opts *o = &j->o;
    key_ctx *kc = &j->kc;
    j->plan = calloc((size_t)j->src.count + 1, 1);
    if (!j->plan) return key_fail(kc, CKEY_ERR_NOMEM, "out of memory");
    j->first = j->last = -1;
    for (int64_t i = 0; i < j->src.count; i++) {
        const ckey_shot_frame *f = &j->src.frames[i];
        if (o->have_frames && (f->number < o->frame_first || f->number > o->frame_last)) continue;
        if (!f->hint && o->on_error == CKEY_ON_ERROR_STOP)
            return key_fail(kc, CKEY_ERR_IO, "frame %lld: plate %s has no hint in %s (hints "
                                             "pair with plates by frame number)",
                            (long long)f->number, f->plate, j->cp.hint_dir);
        j->plan[i] = !o->force && j->sink.complete(j->sink.self, f) ? CKEY_SHOT_SKIP : CKEY_SHOT_KEY;
        kc->total++;
        if (j->plan[i] == CKEY_SHOT_KEY) kc->to_key++;
        if (j->first < 0) j->first = f->number;
        j->last = f->number;
    }
    if (kc->total == 0 && !o->empty_ok)
        return key_fail(kc, CKEY_ERR_INVALID_ARG, "no plate in %s has a frame number in %ld-%ld "
                                                  "(--empty-ok: a farm chunk over a gap in the "
                                                  "numbering, nothing to key)",
                        j->cp.plate_dir, o->frame_first, o->frame_last);
    return CONTINUE;
}

/* --video-out: the videos' paths; refused when some frames would be skipped
 * (a video cannot resume). */
static int name_videos(key_job *j) {
    const long long nitems = (long long)j->kc.total, to_key = (long long)j->kc.to_key;
    if (nitems > to_key)
        return key_fail(&j->kc, CKEY_ERR_INVALID_ARG,
                        "%s already holds the passes of %lld of the %lld frames, and "
                        "--video-out encodes the whole clip in one run (a video cannot "
                        "resume): add --force to key every frame again, or leave out "
                        "--video-out to resume the passes, then write the videos from them "
                        "with 'ckey encode'",
                        j->cp.out_dir, nitems - to_key, nitems);
    for (int k = 0; k < 2; k++) {
        if (!(j->o.video_out & (k == 0 ? VIDEO_OUT_PRORES : VIDEO_OUT_H264))) continue;
        j->video_path[k] = clip_video_path(&j->cp, k);
        if (!j->video_path[k]) return key_fail(&j->kc, CKEY_ERR_NOMEM, "out of memory");
    }
    return CONTINUE;
}

/* "cpu" or "cuda:N", as --device names it. */
static void device_name(ckey_device_kind kind, int32_t index, char *buf, size_t cap) {
    if (kind == CKEY_DEVICE_CUDA) snprintf(buf, cap, "cuda:%d", (int)index);
    else snprintf(buf, cap, "cpu");
}

/* --json: the "started" event. */
static void print_started(const key_job *j) {
    const opts *o = &j->o;
    const long long nitems = (long long)j->kc.total, to_key = (long long)j->kc.to_key;
    printf("{\"event\":\"started\",\"frames\":%lld,\"to_key\":%lld,\"to_skip\":%lld,\"first\":%lld,"
           "\"last\":%lld,\"plate_dir\":",
           nitems, to_key, nitems - to_key, (long long)j->first, (long long)j->last);
    json_str(stdout, j->cp.plate_dir);
    printf(",\"hint_dir\":");
    json_str(stdout, j->cp.hint_dir);
    printf(",\"out\":");
    json_str(stdout, j->cp.out_dir);
    printf(",\"model\":");
    json_str(stdout, o->model);
    for (int k = 0; k < 2; k++) {
        printf(k == 0 ? ",\"fg_alpha_video\":" : ",\"comp_video\":");
        if (j->video_path[k]) json_str(stdout, j->video_path[k]);
        else printf("null");
    }
    printf(",\"devices\":[");
    const int nd = o->ndevices ? o->ndevices : 1;
    for (int i = 0; i < nd; i++) {
        char name[32];
        if (o->ndevices) device_name(o->devices[i].kind, o->devices[i].index, name, sizeof name);
        else device_name(o->so.device, o->so.device_index, name, sizeof name);
        printf("%s\"%s\"", i ? "," : "", name);
    }
    printf("],\"size\":%d,\"dry_run\":%s,\"on_error\":\"%s\"}\n", (int)o->so.size,
           o->dry_run ? "true" : "false", o->on_error == CKEY_ON_ERROR_SKIP ? "skip" : "stop");
    fflush(stdout);
}

/* --frames A-B --empty-ok over a gap in the numbering: nothing to key. */
static int report_empty(const key_job *j) {
    if (j->o.json)
        printf("{\"event\":\"done\",\"keyed\":0,\"skipped\":0,\"failed\":0,\"seconds\":0,"
               "\"fps\":0,\"empty\":true}\n");
    else
        printf("no frame of %s has a number in %ld-%ld: nothing to key (--empty-ok)\n",
               j->cp.plate_dir, j->o.frame_first, j->o.frame_last);
    return EXIT_OK;
}

/* --dry-run: list the plan; nothing is loaded or written. */
static int dry_run(const key_job *j) {
    const int json = j->o.json;
    const long long nitems = (long long)j->kc.total, to_key = (long long)j->kc.to_key;
    for (int64_t i = 0; i < j->src.count; i++) {
        if (j->plan[i] == CKEY_SHOT_EXCLUDE) continue;
        const ckey_shot_frame *f = &j->src.frames[i];
        const int skip = j->plan[i] == CKEY_SHOT_SKIP;
        if (json)
            printf("{\"event\":\"frame\",\"frame\":%lld,\"status\":\"%s\",\"seconds\":0}\n",
                   (long long)f->number, skip ? "skipped" : "would_key");
        else
            printf("frame %lld: %s  (%s + %s)\n", (long long)f->number,
                   skip ? "skip (outputs complete)" : "key", f->plate,
                   j->o.mask ? "tracked hint" : f->hint ? f->hint : "no hint");
    }
    if (json)
        printf("{\"event\":\"done\",\"keyed\":0,\"skipped\":%lld,\"would_key\":%lld,\"seconds\":0,"
               "\"fps\":0,\"dry_run\":true}\n",
               nitems - to_key, to_key);
    else
        printf("dry run: %lld frame%s would be keyed, %lld skipped; nothing written\n", to_key,
               to_key == 1 ? "" : "s", nitems - to_key);
    for (int k = 0; k < 2 && !json; k++)
        if (j->video_path[k]) printf("would write %s\n", j->video_path[k]);
    return EXIT_OK;
}

/* The runner's options from the command line. */
static void shot_options(const opts *o, ckey_shot_options *so) {
    ckey_shot_options_default(so);
    so->post = o->post;
    so->input_space = o->space;
    so->on_error = o->on_error;
    so->cancel = stop_requested; /* SIGINT / SIGTERM: stop after the frames in flight */
    if (o->read_ahead >= 0) so->read_ahead = o->read_ahead;
    so->writers = o->writers;
    so->readers = o->readers;
    so->frame_path = o->frame_path;
    so->device_frames = o->device_frames;
    /* --threads: on the CPU the network's threads, which the frame-level work
     * shares; on a GPU the frame-level pool's */
    so->threads = o->so.device == CKEY_DEVICE_CPU ? 0 : o->so.threads > 1024 ? 1024 : o->so.threads;
}

/*
 * The frame path (ckey_shot_frame_path) for the devices of --device, fixed
 * in j->o.frame_path from here on, and why in j->path_why; plan_run may
 * still move an automatic device path to the host when its buffers do not
 * fit.
 */
static ckey_frame_path choose_frame_path(key_job *j) {
    opts *o = &j->o;
    ckey_device_kind dk = o->ndevices ? CKEY_DEVICE_CUDA : o->so.device; /* a list: all of them GPUs? */
    for (int i = 0; i < o->ndevices; i++)
        if (o->devices[i].kind != CKEY_DEVICE_CUDA) dk = CKEY_DEVICE_CPU;
    ckey_shot_options so;
    shot_options(o, &so);
    const ckey_frame_path asked = o->frame_path;
    o->frame_path = ckey_shot_frame_path(dk, &j->src, j->plan, &so, j->path_why, sizeof j->path_why);
    if (asked != CKEY_FRAME_PATH_AUTO)
        snprintf(j->path_why, sizeof j->path_why, "--frame-path %s", ckey_frame_path_name(asked));
    return asked;
}

/*
 * The whole run's memory at the largest plate to key, read from the frames'
 * headers (a video's stream) before any is decoded (ckey_plan_run_memory):
 * a clip whose buffers do not fit the --budget, or the memory the machine
 * has available, is refused here, naming that plate, with nothing written.
 * Printed before keying (--json: a "plan" event).
 */
static int plan_run(key_job *j) {
    const opts *o = &j->o;
    const ckey_frame_path asked = choose_frame_path(j);
    if (ckey_source_plate_size(&j->src, j->plan, &j->plate_w, &j->plate_h, &j->plate_frame, &j->err) != CKEY_OK)
        return key_fail_err(j);
    if (j->plate_frame < 0) return CONTINUE; /* no header read: each frame's read reports why */
    ckey_run_options ro;
    ckey_run_options_default(&ro);
    ro.kind = CKEY_RUN_SHOT;
    ro.width = j->plate_w;
    ro.height = j->plate_h;
    ro.auto_hint = j->cp.auto_hint;
    ro.sessions = o->ndevices > 1 ? o->ndevices : 1;
    ro.video_in = j->src.videos;
    ro.video_out = (o->video_out & VIDEO_OUT_PRORES ? CKEY_RUN_VIDEO_PRORES : 0) |
                   (o->video_out & VIDEO_OUT_H264 ? CKEY_RUN_VIDEO_H264 : 0);
    shot_options(o, &ro.shot);
    if (o->mask) { /* --mask: the tracker is resident beside the keyer */
        ckey_track_memory tm;
        if (ckey_source_tracked_memory(&j->src, &tm, &j->err) != CKEY_OK) return key_fail_err(j);
        ro.track_bytes = tm.total_bytes;
        ro.track_device_bytes = tm.total_bytes - tm.host_bytes;
    }
    ckey_status st = ckey_plan_run_memory(j->model, &o->so, &ro, &j->mem, &j->err);
    /* the device path's default frames in flight, as many as fit: fewer
     * before refusing (each holds a frame's device and page-locked buffers) */
    for (int n = 1; st == CKEY_ERR_BUDGET && o->device_frames == 0 && ro.shot.frame_path == CKEY_FRAME_PATH_DEVICE &&
                    n >= 1;
         n--) {
        ro.shot.device_frames = n;
        if ((st = ckey_plan_run_memory(j->model, &o->so, &ro, &j->mem, &j->err)) == CKEY_OK)
            j->o.device_frames = n;
    }
    if (st == CKEY_ERR_BUDGET && asked == CKEY_FRAME_PATH_AUTO && ro.shot.frame_path == CKEY_FRAME_PATH_DEVICE) {
        /* the automatic device path does not fit: the host path, if it does */
        /* the reason, short: "... needs 5.1 GiB", without the parts, then what it is over */
        char msg[sizeof j->err.message];
        snprintf(msg, sizeof msg, "%s", j->err.message);
        char *cut = strstr(msg, " (");
        const char *over = strstr(j->err.message, "over the budget") ? "over --budget" : "over the memory available";
        if (cut) snprintf(cut, sizeof msg - (size_t)(cut - msg), ", %s", over);
        ro.shot.frame_path = CKEY_FRAME_PATH_CPU;
        ro.shot.device_frames = o->device_frames;
        if ((st = ckey_plan_run_memory(j->model, &o->so, &ro, &j->mem, &j->err)) == CKEY_OK) {
            j->o.frame_path = CKEY_FRAME_PATH_CPU;
            snprintf(j->path_why, sizeof j->path_why, "the device path does not fit: %.300s", msg);
        }
    }
    if (st == CKEY_ERR_BUDGET)
        return key_fail(&j->kc, st, "%s: %s; nothing was written", j->src.frames[j->plate_frame].plate,
                        j->err.message);
    if (st != CKEY_OK) return key_fail_err(j);
    if (o->json) {
        printf("{\"event\":\"plan\",\"plate\":");
        json_str(stdout, j->src.frames[j->plate_frame].plate);
        printf(",\"memory\":");
        print_run_memory_json(&j->mem, j->plate_w, j->plate_h);
        printf(",\"frame_path\":\"%s\",\"frame_path_reason\":", ckey_frame_path_name(o->frame_path));
        json_str(stdout, j->path_why);
        printf("}\n");
    } else {
        char parts[320], peak[32];
        ckey_run_memory_parts(&j->mem, parts, sizeof parts);
        printf("planned peak %s for %d x %d plates (%d frames in flight, %d writer%s): %s\n",
               ckey_format_bytes(peak, sizeof peak, j->mem.total_bytes), (int)j->plate_w, (int)j->plate_h,
               (int)j->mem.frames_in_flight, (int)j->mem.writers, j->mem.writers == 1 ? "" : "s", parts);
        printf("frame path: %s (%s)\n", ckey_frame_path_name(o->frame_path), j->path_why);
    }
    fflush(stdout);
    return CONTINUE;
}

/* The model, its run's plan and a session, when any frame is to be keyed. */
static int load_model(key_job *j) {
    const opts *o = &j->o;
    if (j->kc.to_key == 0) return CONTINUE;
    if (ckey_model_load(o->model, &j->model, &j->err) != CKEY_OK) {
        note_model_origin(o, &j->err);
        return key_fail_err(j);
    }
    ckey_model_info mi;
    memset(&mi, 0, sizeof mi);
    ckey_model_get_info(j->model, &mi);
    if (is_test_model(&mi)) {
        if (o->json) {
            char msg[1200];
            snprintf(msg, sizeof msg, "%s is a reduced test configuration (embed_dim %d); its "
                     "mattes are not meaningful", o->model, (int)mi.embed_dim);
            key_warning(&j->kc, msg);
        } else {
            test_model_notice(o->model, &mi);
        }
    }
    const int rc = plan_run(j);
    if (rc != CONTINUE) return rc;
    /* one session per device of --device (a list: several, keying in parallel) */
    const int nd = o->ndevices ? o->ndevices : 1;
    for (int i = 0; i < nd; i++) {
        ckey_session_options so = o->so;
        if (j->mem.session_budget > 0) so.memory_budget = j->mem.session_budget; /* the schedule plan_run chose */
        if (o->ndevices) {
            so.device = o->devices[i].kind;
            so.device_index = o->devices[i].index;
        }
        if (ckey_session_create(j->model, &so, &j->sess[i], &j->err) != CKEY_OK) {
            if (nd > 1) {
                char name[32], msg[sizeof j->err.message];
                device_name(so.device, so.device_index, name, sizeof name);
                snprintf(msg, sizeof msg, "%s", j->err.message);
                return key_fail(&j->kc, j->err.status, "session %d of %d (%s): %s", i + 1, nd, name,
                                msg);
            }
            return key_fail_err(j);
        }
        j->nsess = i + 1;
    }
    return CONTINUE;
}

/* --mask: the hints tracked from the mask as the plates are read (Cutie). */
static int open_tracking(key_job *j) {
    int rc = load_track_model(&j->o, &j->track_model, &j->err);
    ckey_source tracked;
    if (rc == CONTINUE) rc = open_tracked_source(&j->o, &j->src, j->track_model, 16, &tracked, &j->err);
    if (rc == EXIT_RUNTIME) return key_fail_err(j);
    if (rc != CONTINUE) return rc;
    j->src = tracked;
    return CONTINUE;
}

/* --video-out: the passes sink inside a tee that also encodes the videos. */
static int open_video_tee(key_job *j) {
    const opts *o = &j->o;
    ckey_video_tee_options vo;
    memset(&vo, 0, sizeof vo);
    vo.fg_alpha = j->video_path[0];
    vo.comp = j->video_path[1];
    /* --fps, else the plate video's rate; 0/0 (a sequence) is 24 */
    vo.rate_num = o->fps_num ? o->fps_num : j->src.rate_num;
    vo.rate_den = o->fps_num ? o->fps_den : j->src.rate_den;
    vo.despill_strength = o->post.despill_strength;
    vo.writers = j->mem.writers; /* 1: the ProRes on one frame-threaded encoder; 0 when not planned */
    ckey_sink tee;
    if (ckey_sink_open_video_tee(&j->sink, &vo, &tee, &j->err) != CKEY_OK) return key_fail_err(j);
    j->sink = tee;
    return CONTINUE;
}

/* Stopped by SIGINT / SIGTERM: what was written, and exit 128 + the signal. */
static int report_interrupted(const key_job *j, ckey_status st, const ckey_shot_stats *stats) {
    const int sig = stop_signal_received();
    const char *sname = sig == SIGTERM ? "SIGTERM" : sig == SIGINT ? "SIGINT" : "signal";
    fprintf(stderr, "ckey: interrupted by %s: %s; %lld frame%s written%s, a re-run resumes "
                    "from there\n",
            sname, j->err.message, (long long)stats->keyed, stats->keyed == 1 ? "" : "s",
            j->o.video_out ? " (no video kept)" : "");
    if (j->o.json) {
        printf("{\"event\":\"error\",\"status\":\"%s\",\"interrupted\":true,\"signal\":\"%s\","
               "\"keyed\":%lld,\"skipped\":%lld,\"failed\":%lld,\"seconds\":%.6f,\"message\":",
               ckey_status_name(st), sname, (long long)stats->keyed, (long long)stats->skipped,
               (long long)stats->failed, stats->seconds);
        json_str(stdout, j->err.message);
        printf("}\n");
    }
    return 128 + (sig > 0 ? sig : SIGINT);
}

/* The summary: the "done" event, or a line with both rates. */
static void report_done(const key_job *j, const ckey_shot_options *so, const ckey_shot_stats *stats) {
    const double fps = stats->keyed > 0 && stats->seconds > 0 ? stats->keyed / stats->seconds : 0.0;
    const double mfps =
        stats->keyed > 0 && stats->model_seconds > 0 ? stats->keyed / stats->model_seconds : 0.0;
    if (j->o.json) {
        printf("{\"event\":\"done\",\"keyed\":%lld,\"skipped\":%lld,\"failed\":%lld,\"seconds\":%.6f,"
               "\"fps\":%.4f,\"model_seconds\":%.6f,\"model_fps\":%.4f,\"read_seconds\":%.6f,"
               "\"write_seconds\":%.6f,\"decode_seconds\":%.6f,\"pre_seconds\":%.6f,\"back_seconds\":%.6f,"
               "\"post_seconds\":%.6f,\"sink_seconds\":%.6f,\"pass_seconds\":{\"matte\":%.6f,\"fg\":%.6f,"
               "\"processed\":%.6f,\"comp\":%.6f},\"setup_seconds\":%.6f,\"read_ahead\":%d,\"warnings\":%lld,"
               "\"despill\":%g,\"sessions\":%d,\"cpu_seconds\":%.3f,\"peak_rss_bytes\":%lld,\"frame_path\":\"%s\",\"frame_path_reason\":",
               (long long)stats->keyed, (long long)stats->skipped, (long long)stats->failed,
               stats->seconds, fps, stats->model_seconds, mfps, stats->read_seconds,
               stats->write_seconds, stats->decode_seconds, stats->pre_seconds, stats->back_seconds,
               stats->post_seconds, stats->sink_seconds, stats->pass_seconds[0], stats->pass_seconds[1],
               stats->pass_seconds[2], stats->pass_seconds[3], j->setup_s, (int)so->read_ahead,
               (long long)j->kc.warnings, (double)so->post.despill_strength, j->nsess > 0 ? j->nsess : 1,
               j->cpu_s, (long long)peak_rss_bytes(), ckey_frame_path_name(stats->frame_path));
        json_str(stdout, j->path_why);
        printf(",\"out\":");
        json_str(stdout, j->cp.out_dir);
        printf(",");
        json_load(stdout, &stats->load);
        printf(",\"videos\":[");
        for (int k = 0, n = 0; k < 2; k++)
            if (j->video_path[k]) {
                if (n++) printf(",");
                json_str(stdout, j->video_path[k]);
            }
        printf("]}\n");
        return;
    }
    char failed[64] = "";
    if (stats->failed) snprintf(failed, sizeof failed, ", FAILED %lld", (long long)stats->failed);
    char sessions[32] = "session";
    if (j->nsess > 1) snprintf(sessions, sizeof sessions, "%d sessions", j->nsess);
    char b[96];
    fmt_bound(b, sizeof b, &stats->load);
    printf("keyed %lld frame%s, skipped %lld%s, in %.3f s: %.2f fps end to end (read, key, "
           "post, write), %.2f fps model only, bound by %s, %s frame path; model load + %s %.3f s; passes in %s\n",
           (long long)stats->keyed, stats->keyed == 1 ? "" : "s", (long long)stats->skipped,
           failed, stats->seconds, fps, mfps, b, ckey_frame_path_name(stats->frame_path), sessions, j->setup_s,
           j->cp.out_dir);
    if (j->kc.warnings > 3) fprintf(stderr, "ckey: %lld warnings in all\n", (long long)j->kc.warnings);
    for (int k = 0; k < 2; k++)
        if (j->video_path[k]) printf("wrote %s\n", j->video_path[k]);
}

/* Key the planned frames (ckey_shot_run) and report how it went. */
static int run_shot(key_job *j) {
    const opts *o = &j->o;
    ckey_shot_options so;
    shot_options(o, &so);
    ckey_shot_stats stats;
    const double cpu0 = cpu_seconds();
    const ckey_status st = ckey_shot_run_multi(j->sess, j->nsess > 0 ? j->nsess : 1, &j->src,
                                               &j->sink, j->plan, &so, key_event, &j->kc, &stats,
                                               &j->err);
    j->cpu_s = cpu_seconds() - cpu0;
    if (j->kc.tty && j->kc.pos > 0) fputc('\n', stderr);
    if (st == CKEY_ERR_CANCELLED) return report_interrupted(j, st, &stats);
    if (st != CKEY_OK) {
        const int rc = key_fail_err(j);
        if (!o->json)
            fprintf(stderr, "ckey: %lld frame%s written before the error; a re-run resumes from "
                            "there\n", (long long)stats.keyed, stats.keyed == 1 ? "" : "s");
        return rc;
    }
    report_done(j, &so, &stats);
    return stats.failed ? EXIT_PARTIAL : EXIT_OK;
}

/* Open, plan, key: the steps after the options, each CONTINUE or an exit code. */
static int key_clip(key_job *j) {
    int rc = resolve_paths(j);
    if (rc == CONTINUE) rc = open_clip(j);
    if (rc == CONTINUE) rc = plan_frames(j);
    if (rc == CONTINUE && j->o.video_out) rc = name_videos(j);
    if (rc != CONTINUE) return rc;
    if (j->o.json) print_started(j);
    if (j->kc.total == 0) return report_empty(j);
    if (j->o.dry_run) return dry_run(j);

    /* From here a SIGINT / SIGTERM stops the run cleanly (the runner polls it). */
    stop_install_handlers();
    const double t_start = now_seconds();
    /* the tracked source first: the run's plan counts its tracker */
    rc = j->o.mask && j->kc.to_key > 0 ? open_tracking(j) : CONTINUE;
    if (rc == CONTINUE) rc = load_model(j);
    if (rc != CONTINUE) return rc;
    j->setup_s = now_seconds() - t_start;
    if (j->o.video_out) {
        rc = open_video_tee(j);
        if (rc != CONTINUE) return rc;
    }
    return run_shot(j);
}

int cmd_key(int argc, char **argv) {
    key_job j;
    memset(&j, 0, sizeof j);
    int rc = parse_key_opts(argc, argv, &j.o);
    if (rc != CONTINUE) return rc;
    /* FFmpeg's log level is process-wide: set once, before any thread decodes */
    ckey_video_set_log_level(j.o.verbose);
    j.kc.json = j.o.json;
    j.kc.tty = !j.o.json && isatty(2);
    j.kc.nsess = j.o.ndevices ? j.o.ndevices : 1;
    rc = find_model(&j.o);
    if (rc == CONTINUE) rc = check_video_opts(&j.o);
    if (rc == CONTINUE && j.o.mask) rc = find_track_model(&j.o);
    if (rc == CONTINUE) rc = key_clip(&j);
    key_job_free(&j);
    return rc;
}
