/*
 * ckey key: key a clip (an image sequence or a video) into the Matte/, FG/,
 * Processed/ and Comp/ passes, optionally ProRes / H.264 videos. The library's
 * shot runner does the work (ckey_shot_run); this file resolves the paths,
 * plans which frames to key (--frames, resume), reports progress and turns
 * SIGINT / SIGTERM into a clean stop.
 */
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/stat.h>
#include <unistd.h>

#include "ckey_clip.h"
#include "ckey.h"
#include "commands.h"
#include "help.h"
#include "model-path.h"
#include "opts.h"
#include "output.h"
#include "paths.h"

/* ------------------------------------------------------- paths, names */

/* The extensions libckey reads as video (its own list is internal). */
static int is_video_ext(const char *e) {
    static const char *const v[] = {"mp4", "mov", "avi", "mkv", "mxf", "webm", "m4v", "mpg",
                                    "mpeg", "wmv", "flv", "prores"};
    for (size_t i = 0; i < sizeof v / sizeof v[0]; i++)
        if (!strcasecmp(e, v[i])) return 1;
    return 0;
}

/* The name of a clip for its video outputs: the last component of `path`
 * (made absolute first, so "." has a name), without the extension when it
 * is a file. Malloc'd. */
static char *clip_name(const char *path) {
    char *abs = realpath(path, NULL);
    const char *p = abs ? abs : path;
    size_t n = strlen(p);
    while (n > 1 && p[n - 1] == '/') n--;
    size_t b = n;
    while (b > 0 && p[b - 1] != '/') b--;
    char *name = strndup(p + b, n - b);
    free(abs);
    if (!name) return NULL;
    struct stat st;
    char *dot = strrchr(name, '.');
    if (dot && dot != name && stat(path, &st) == 0 && !S_ISDIR(st.st_mode)) *dot = 0;
    if (!*name || !strcmp(name, "/")) {
        free(name);
        name = strdup("clip");
    }
    return name;
}

/* ------------------------------------------------- messages, progress */

/* State of one `key` run shared by its messages and the progress callback. */
typedef struct key_ctx {
    int json, tty;
    int64_t total;   /* frames in the plan (keyed + skipped + failed) */
    int64_t to_key;
    int64_t pos;     /* events so far */
    int64_t warnings; /* CKEY_SHOT_WARNING events */
} key_ctx;

/*
 * SIGINT / SIGTERM during `key`: the handler only records the signal; the
 * shot runner polls it (ckey_shot_options.cancel) and stops after the frame
 * in flight. SA_RESETHAND: a second signal takes the default action at once.
 */
static volatile sig_atomic_t stop_signal;

static void on_stop_signal(int sig) { stop_signal = sig; }

static int stop_requested(void *user) {
    (void)user;
    return stop_signal != 0;
}

static void install_stop_handlers(void) {
    struct sigaction sa;
    memset(&sa, 0, sizeof sa);
    sa.sa_handler = on_stop_signal;
    sigemptyset(&sa.sa_mask);
    sa.sa_flags = SA_RESTART | SA_RESETHAND;
    sigaction(SIGINT, &sa, NULL);
    sigaction(SIGTERM, &sa, NULL);
}

/* Runtime failure of `key`: stderr message, and with --json an error event. */
static int key_fail(const key_ctx *k, ckey_status st, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));
static int key_fail(const key_ctx *k, ckey_status st, const char *fmt, ...) {
    char msg[4600];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof msg, fmt, ap);
    va_end(ap);
    fprintf(stderr, "ckey: error: %s\n", msg);
    if (k->json) {
        printf("{\"event\":\"error\",\"status\":");
        json_str(stdout, ckey_status_name(st));
        printf(",\"message\":");
        json_str(stdout, msg);
        printf("}\n");
        fflush(stdout);
    }
    return EXIT_RUNTIME;
}

static void key_warning(const key_ctx *k, const char *msg) {
    fprintf(stderr, "ckey: warning: %s\n", msg);
    if (k->json) {
        printf("{\"event\":\"warning\",\"message\":");
        json_str(stdout, msg);
        printf("}\n");
        fflush(stdout);
    }
}

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
        char e[32];
        fmt_eta(e, sizeof e, left / (fps > 0 ? fps : 1e-9));
        if (k->json)
            printf("{\"event\":\"frame\",\"frame\":%lld,\"status\":\"keyed\",\"seconds\":%.6f,"
                   "\"model_seconds\":%.6f,\"width\":%d,\"height\":%d,\"index\":%lld,\"total\":%lld,"
                   "\"fps\":%.4f,\"model_fps\":%.4f}\n",
                   fr, ev->seconds, ev->model_seconds, (int)ev->width, (int)ev->height, pos,
                   (long long)k->total, fps, mfps);
        else if (k->tty)
            fprintf(stderr, "\rframe %lld/%lld (#%lld)  %.2f fps (model %.2f fps)  ETA %s   ", pos,
                    (long long)k->total, fr, fps, mfps, e);
        else
            fprintf(stderr, "frame %lld (%lld/%lld): keyed in %.3f s (model %.3f s), %.2f fps "
                            "(model %.2f fps), ETA %s\n",
                    fr, pos, (long long)k->total, ev->seconds, ev->model_seconds, fps, mfps, e);
    }
    if (k->json) fflush(stdout);
}

/* ------------------------------------------------------------ the run */

/* One `key` run: where it reads and writes, the frame plan, and what it holds
 * open. key_job_free releases it all. */
typedef struct key_job {
    opts o;
    key_ctx kc;
    int auto_hint;           /* --hint auto: every frame's hint is made from its plate */
    /* plate_dir / hint_dir: a directory of frames, a video, or a directory
     * holding one video (ckey_source_open_video tells them apart) */
    char *plate_dir, *hint_dir, *out_dir;
    char *clip;              /* the clip's name, for its video outputs */
    char *video_path[2];     /* OUT/<clip>_fg_alpha.mov, OUT/<clip>_comp.mp4, or NULL */
    ckey_source src;
    ckey_sink sink;
    uint8_t *plan;           /* per source frame: CKEY_SHOT_EXCLUDE, _SKIP or _KEY */
    int64_t first, last;     /* frame numbers of the first and last planned frames */
    ckey_model *model;
    ckey_session *sess;      /* NULL when every frame is skipped */
    double setup_s;          /* model load + session */
    ckey_error err;
} key_job;

static void key_job_free(key_job *j) {
    fflush(stdout);
    free(j->plan);
    ckey_source_close(&j->src);
    ckey_sink_close(&j->sink);
    ckey_session_free(j->sess);
    ckey_model_free(j->model);
    free(j->plate_dir);
    free(j->hint_dir);
    free(j->out_dir);
    free(j->clip);
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
                          O_WRITERS | O_READERS | O_EXR_LEVEL | O_COMP_PNG,
                      1, help_key, o);
}

/* A video cannot resume or leave gaps: every frame, in one run. */
static int check_video_opts(const opts *o) {
    if (o->video_out && o->have_frames)
        return usage_error(o->cmd, "--video-out encodes the whole clip: it cannot be combined with "
                                   "--frames");
    if (o->video_out && o->on_error == CKEY_ON_ERROR_SKIP)
        return usage_error(o->cmd, "--video-out needs every frame: it cannot be combined with "
                                   "--on-error skip");
    if (o->fps_num && !o->video_out)
        return usage_error(o->cmd, "--fps sets the frame rate of the --video-out videos: add "
                                   "--video-out prores|h264|both");
    return CONTINUE;
}

/* The plate, hint and output paths: SHOT_DIR's Input/, AlphaHint/ and
 * Output/ (--out DIR: the passes under DIR instead), or --plate, --hint and
 * --out. */
static int resolve_paths(key_job *j) {
    const opts *o = &j->o;
    j->auto_hint = o->hint && !strcmp(o->hint, "auto");
    if (o->npositional == 1) {
        if (o->plate || (o->hint && !j->auto_hint))
            return usage_error(o->cmd, "give either SHOT_DIR or --plate/--hint, not both "
                                       "(with SHOT_DIR, --hint auto and --out DIR are allowed)");
        const char *shot = o->positional[0];
        struct stat st;
        if (stat(shot, &st) == 0 && !S_ISDIR(st.st_mode))
            return key_fail(&j->kc, CKEY_ERR_INVALID_ARG,
                            "%s is not a clip directory (%s); for a video file use --plate %s "
                            "--hint VIDEO|DIR|auto --out DIR",
                            shot, is_video_ext(file_ext(shot)) ? "a video" : "a file", shot);
        j->plate_dir = path_join(shot, "Input");
        j->hint_dir = j->auto_hint ? strdup("auto") : path_join(shot, "AlphaHint");
        j->out_dir = o->out ? strdup(o->out) : path_join(shot, "Output");
        j->clip = clip_name(shot);
    } else {
        if (!o->plate || !o->hint || !o->out)
            return usage_error(o->cmd, "expected SHOT_DIR, or all of --plate DIR, --hint DIR and "
                                       "--out DIR");
        j->plate_dir = strdup(o->plate);
        j->hint_dir = strdup(o->hint);
        j->out_dir = strdup(o->out);
        j->clip = clip_name(o->plate);
    }
    if (!j->plate_dir || !j->hint_dir || !j->out_dir || !j->clip)
        return key_fail(&j->kc, CKEY_ERR_NOMEM, "out of memory");
    return CONTINUE;
}

static int open_clip(key_job *j) {
    /* the passes at the fastest settings unless --exr-level / --comp-png
     * say otherwise; zip-fast keeps its level 1 */
    ckey_pass_options po;
    ckey_pass_options_default(&po);
    po.exr.compression = j->o.exr;
    po.exr.level = j->o.exr_level ? j->o.exr_level : j->o.exr == CKEY_EXR_ZIP_FAST ? 0 : po.exr.level;
    po.comp_png_level = j->o.comp_png_level;
    if (ckey_source_open_video(j->plate_dir, j->auto_hint ? NULL : j->hint_dir, 0, key_warning_cb,
                               &j->kc, &j->src, &j->err) != CKEY_OK ||
        ckey_sink_open_passes_opt(j->out_dir, &po, &j->sink, &j->err) != CKEY_OK)
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
                            (long long)f->number, f->plate, j->hint_dir);
        j->plan[i] = !o->force && j->sink.complete(j->sink.self, f) ? CKEY_SHOT_SKIP : CKEY_SHOT_KEY;
        kc->total++;
        if (j->plan[i] == CKEY_SHOT_KEY) kc->to_key++;
        if (j->first < 0) j->first = f->number;
        j->last = f->number;
    }
    if (kc->total == 0)
        return key_fail(kc, CKEY_ERR_INVALID_ARG, "no plate in %s has a frame number in %ld-%ld",
                        j->plate_dir, o->frame_first, o->frame_last);
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
                        "--video-out to resume the passes",
                        j->out_dir, nitems - to_key, nitems);
    static const char *const suffix[2] = {"_fg_alpha.mov", "_comp.mp4"};
    for (int k = 0; k < 2; k++) {
        if (!(j->o.video_out & (k == 0 ? VIDEO_OUT_PRORES : VIDEO_OUT_H264))) continue;
        const size_t cap = strlen(j->clip) + strlen(suffix[k]) + 1;
        char *name = malloc(cap);
        if (name) snprintf(name, cap, "%s%s", j->clip, suffix[k]);
        j->video_path[k] = name ? path_join(j->out_dir, name) : NULL;
        free(name);
        if (!j->video_path[k]) return key_fail(&j->kc, CKEY_ERR_NOMEM, "out of memory");
    }
    return CONTINUE;
}

/* --json: the "started" event. */
static void print_started(const key_job *j) {
    const opts *o = &j->o;
    const long long nitems = (long long)j->kc.total, to_key = (long long)j->kc.to_key;
    printf("{\"event\":\"started\",\"frames\":%lld,\"to_key\":%lld,\"to_skip\":%lld,\"first\":%lld,"
           "\"last\":%lld,\"plate_dir\":",
           nitems, to_key, nitems - to_key, (long long)j->first, (long long)j->last);
    json_str(stdout, j->plate_dir);
    printf(",\"hint_dir\":");
    json_str(stdout, j->hint_dir);
    printf(",\"out\":");
    json_str(stdout, j->out_dir);
    printf(",\"model\":");
    json_str(stdout, o->model);
    for (int k = 0; k < 2; k++) {
        printf(k == 0 ? ",\"fg_alpha_video\":" : ",\"comp_video\":");
        if (j->video_path[k]) json_str(stdout, j->video_path[k]);
        else printf("null");
    }
    printf(",\"size\":%d,\"dry_run\":%s,\"on_error\":\"%s\"}\n", (int)o->so.size,
           o->dry_run ? "true" : "false", o->on_error == CKEY_ON_ERROR_SKIP ? "skip" : "stop");
    fflush(stdout);
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
                   skip ? "skip (outputs complete)" : "key", f->plate, f->hint ? f->hint : "no hint");
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

/* The model and a session, when any frame is to be keyed. */
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
    if (ckey_session_create(j->model, &o->so, &j->sess, &j->err) != CKEY_OK) return key_fail_err(j);
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
    ckey_sink tee;
    if (ckey_sink_open_video_tee(&j->sink, &vo, &tee, &j->err) != CKEY_OK) return key_fail_err(j);
    j->sink = tee;
    return CONTINUE;
}

/* Stopped by SIGINT / SIGTERM: what was written, and exit 128 + the signal. */
static int report_interrupted(const key_job *j, ckey_status st, const ckey_shot_stats *stats) {
    const int sig = (int)stop_signal;
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
               "\"despill\":%g,\"out\":",
               (long long)stats->keyed, (long long)stats->skipped, (long long)stats->failed,
               stats->seconds, fps, stats->model_seconds, mfps, stats->read_seconds,
               stats->write_seconds, stats->decode_seconds, stats->pre_seconds, stats->back_seconds,
               stats->post_seconds, stats->sink_seconds, stats->pass_seconds[0], stats->pass_seconds[1],
               stats->pass_seconds[2], stats->pass_seconds[3], j->setup_s, (int)so->read_ahead,
               (long long)j->kc.warnings, (double)so->post.despill_strength);
        json_str(stdout, j->out_dir);
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
    printf("keyed %lld frame%s, skipped %lld%s, in %.3f s: %.2f fps end to end (read, key, "
           "post, write), %.2f fps model only; model load + session %.3f s; passes in %s\n",
           (long long)stats->keyed, stats->keyed == 1 ? "" : "s", (long long)stats->skipped,
           failed, stats->seconds, fps, mfps, j->setup_s, j->out_dir);
    if (j->kc.warnings > 3) fprintf(stderr, "ckey: %lld warnings in all\n", (long long)j->kc.warnings);
    for (int k = 0; k < 2; k++)
        if (j->video_path[k]) printf("wrote %s\n", j->video_path[k]);
}

/* Key the planned frames (ckey_shot_run) and report how it went. */
static int run_shot(key_job *j) {
    const opts *o = &j->o;
    ckey_shot_options so;
    ckey_shot_options_default(&so);
    so.post = o->post;
    so.input_space = o->space;
    so.on_error = o->on_error;
    so.cancel = stop_requested;
    if (o->read_ahead >= 0) so.read_ahead = o->read_ahead;
    so.writers = o->writers;
    so.readers = o->readers;
    /* --threads: on the CPU the network's threads, which the frame-level work
     * shares; on a GPU the frame-level pool's */
    so.threads = o->so.device == CKEY_DEVICE_CPU ? 0 : o->so.threads > 1024 ? 1024 : o->so.threads;
    ckey_shot_stats stats;
    const ckey_status st =
        ckey_shot_run(j->sess, &j->src, &j->sink, j->plan, &so, key_event, &j->kc, &stats, &j->err);
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
    if (j->o.dry_run) return dry_run(j);

    /* From here a SIGINT / SIGTERM stops the run cleanly (the runner polls it). */
    install_stop_handlers();
    const double t_start = now_seconds();
    rc = load_model(j);
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
    rc = find_model(&j.o);
    if (rc == CONTINUE) rc = check_video_opts(&j.o);
    if (rc == CONTINUE) rc = key_clip(&j);
    key_job_free(&j);
    return rc;
}
