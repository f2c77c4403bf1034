/*
 * ckey track: a hint for every frame of a clip from one mask (Cutie mask
 * propagation). The library's tracked source (ckey_source_open_tracked)
 * reads each plate and tracks it; this file writes its hints as files named
 * after the plates, so `ckey key` pairs them with the plates as AlphaHint/,
 * and reports progress. Tracking is sequential: a run always tracks from the
 * first frame, and rewrites every hint (each atomically).
 */
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "ckey_clip.h"
#include "ckey_track.h"
#include "commands.h"
#include "help.h"
#include "model-path.h"
#include "opts.h"
#include "output.h"
#include "paths.h"
#include "stop.h"
#include "tracking.h"

typedef struct track_job {
    opts o;
    int tty;
    char *plate, *out;
    ckey_source src;
    ckey_track_model *m;
    ckey_image plate_img, hint_img;
    char *path;
    ckey_error err;
} track_job;

static void track_job_free(track_job *j) {
    fflush(stdout);
    ckey_source_close(&j->src);
    ckey_track_model_free(j->m);
    ckey_image_free(&j->plate_img);
    ckey_image_free(&j->hint_img);
    free(j->plate);
    free(j->out);
    free(j->path);
}

/* Runtime failure: stderr message (after the open progress line on a
 * terminal), and with --json an error event. */
#define track_fail(j, st, ...) event_fail((j)->o.json, (j)->tty, (st), __VA_ARGS__)

static void track_warning(void *user, const char *msg) { event_warning(((const track_job *)user)->o.json, msg); }

/* SHOT_DIR (Input/ -> AlphaHint/, or --out) or --plate and --out. */
static int resolve(track_job *j) {
    const opts *o = &j->o;
    if (o->npositional == 1) {
        if (o->plate) return usage_error(o->cmd, "give either SHOT_DIR or --plate, not both");
        j->plate = path_join(o->positional[0], "Input");
        j->out = o->out ? strdup(o->out) : path_join(o->positional[0], "AlphaHint");
    } else {
        if (!o->plate || !o->out) return usage_error(o->cmd, "expected SHOT_DIR, or --plate DIR|VIDEO and --out DIR");
        j->plate = strdup(o->plate);
        j->out = strdup(o->out);
    }
    if (!j->plate || !j->out) return track_fail(j, CKEY_ERR_NOMEM, "out of memory");
    if (!o->mask) return usage_error(o->cmd, "missing --mask FILE (the first frame's mask)");
    return CONTINUE;
}

/* The tracked source over the plate: the masks are read and checked here. */
int open_tracked_source(const opts *o, ckey_source *inner, ckey_track_model *m, int hint_bits, ckey_source *out,
                        ckey_error *err) {
    ckey_track_source_options to;
    ckey_track_source_options_default(&to);
    to.mask = o->mask;
    to.mask_at_count = o->nmask_at;
    to.mask_at_frame = o->mask_at_frame;
    to.mask_at = o->mask_at;
    to.object = o->object;
    to.hint_bits = hint_bits;
    to.track.max_internal_size = o->track_size < 0 ? 480 : o->track_size == 0 ? -1 : o->track_size;
    to.track.threads = o->so.threads;
    if (o->track_device != TRACK_DEVICE_UNSET) to.track.device = o->track_device;
    if (o->track_precision) to.track.precision = o->track_precision;
    return ckey_source_open_tracked(inner, m, &to, out, err) == CKEY_OK ? CONTINUE : EXIT_RUNTIME;
}

int load_track_model(const opts *o, ckey_track_model **m, ckey_error *err) {
    if (ckey_track_model_open(o->track_model, NULL, m, err) == CKEY_OK) return CONTINUE;
    if (o->track_model_origin) {
        const size_t n = strlen(err->message);
        snprintf(err->message + n, sizeof err->message - n, " (the Cutie checkpoint %s)", o->track_model_origin);
    }
    return EXIT_RUNTIME;
}

static int track_clip(track_job *j) {
    const opts *o = &j->o;
    ckey_source inner;
    memset(&inner, 0, sizeof inner);
    if (ckey_source_open_video(j->plate, NULL, 0, track_warning, j, &inner, &j->err) != CKEY_OK)
        return track_fail(j, j->err.status, "%s", j->err.message);
    const double t0 = now_seconds();
    int rc = load_track_model(o, &j->m, &j->err);
    if (rc == CONTINUE) rc = open_tracked_source(o, &inner, j->m, o->hint_exr ? 0 : 16, &j->src, &j->err);
    ckey_source_close(&inner); /* NULL-safe; zeroed when the tracked source took it */
    if (rc != CONTINUE) return track_fail(j, j->err.status, "%s", j->err.message);
    const double setup_s = now_seconds() - t0;
    char why[4400];
    if (!make_dirs(j->out, why, sizeof why)) return track_fail(j, CKEY_ERR_IO, "%s", why);
    const long long total = (long long)j->src.count;
    if (o->json) {
        printf("{\"event\":\"started\",\"frames\":%lld,\"plate\":", total);
        json_str(stdout, j->plate);
        printf(",\"out\":");
        json_str(stdout, j->out);
        printf(",\"mask\":");
        json_str(stdout, o->mask);
        printf(",\"mask_at\":%d,\"object\":%d,\"format\":\"%s\",\"track_model\":", o->nmask_at, o->object,
               o->hint_exr ? "exr" : "png");
        json_str(stdout, o->track_model);
        printf("}\n");
        fflush(stdout);
    }
    stop_install_handlers();
    const double t_start = now_seconds();
    int64_t done = 0;
    for (int64_t i = 0; i < j->src.count; i++) {
        if (stop_requested(NULL)) {
            const int sig = stop_signal_received();
            if (j->tty) fputc('\n', stderr);
            fprintf(stderr, "ckey: interrupted by %s: %lld of %lld hints written; a re-run tracks "
                            "from the first frame again\n",
                    sig == SIGTERM ? "SIGTERM" : "SIGINT", (long long)done, total);
            if (o->json)
                printf("{\"event\":\"error\",\"status\":\"%s\",\"interrupted\":true,\"tracked\":%lld}\n",
                       ckey_status_name(CKEY_ERR_CANCELLED), (long long)done);
            return 128 + (sig > 0 ? sig : SIGINT);
        }
        const ckey_shot_frame *f = &j->src.frames[i];
        const double tf = now_seconds();
        if (j->src.read(j->src.self, i, &j->plate_img, &j->hint_img, &j->err) != CKEY_OK)
            return track_fail(j, j->err.status, "%s", j->err.message);
        const double track_s = now_seconds() - tf;
        char name[4200];
        snprintf(name, sizeof name, "%s.%s", f->stem, o->hint_exr ? "exr" : "png");
        free(j->path);
        j->path = path_join(j->out, name);
        if (!j->path) return track_fail(j, CKEY_ERR_NOMEM, "out of memory");
        const ckey_image *h = &j->hint_img;
        const ckey_status st = o->hint_exr
                                   ? ckey_image_write_exr(j->path, h->data, 1, h->width, h->height, CKEY_EXR_ZIP, &j->err)
                                   : ckey_image_write_png(j->path, h->data, 1, h->width, h->height, 16, &j->err);
        if (st != CKEY_OK) return track_fail(j, st, "frame %lld: %s", (long long)f->number, j->err.message);
        done++;
        const double el = now_seconds() - t_start, fps = el > 0 ? done / el : 0;
        if (o->json) {
            printf("{\"event\":\"frame\",\"frame\":%lld,\"status\":\"tracked\",\"seconds\":%.6f,"
                   "\"track_seconds\":%.6f,\"width\":%d,\"height\":%d,\"index\":%lld,\"total\":%lld,"
                   "\"fps\":%.4f,\"hint\":",
                   (long long)f->number, now_seconds() - tf, track_s, (int)h->width, (int)h->height,
                   (long long)done, total, fps);
            json_str(stdout, j->path);
            printf("}\n");
            fflush(stdout);
        } else if (j->tty) {
            fprintf(stderr, "\rframe %lld/%lld (#%lld)  %.2f fps   ", (long long)done, total,
                    (long long)f->number, fps);
        } else {
            fprintf(stderr, "frame %lld (%lld/%lld): tracked in %.3f s, %.2f fps\n", (long long)f->number,
                    (long long)done, total, track_s, fps);
        }
    }
    if (j->tty && done) fputc('\n', stderr);
    sync_dir(j->out);
    const double secs = now_seconds() - t_start;
    if (o->json)
        printf("{\"event\":\"done\",\"tracked\":%lld,\"seconds\":%.6f,\"fps\":%.4f,\"setup_seconds\":%.6f,"
               "\"peak_rss_bytes\":%lld,\"out\":",
               (long long)done, secs, secs > 0 ? done / secs : 0.0, setup_s, (long long)peak_rss_bytes());
    else
        printf("tracked %lld frame%s in %.3f s (%.2f fps); model load %.3f s; hints in ", (long long)done,
               done == 1 ? "" : "s", secs, secs > 0 ? done / secs : 0.0, setup_s);
    if (o->json) {
        json_str(stdout, j->out);
        printf("}\n");
    } else {
        printf("%s\n", j->out);
    }
    return EXIT_OK;
}

int cmd_track(int argc, char **argv) {
    track_job j;
    memset(&j, 0, sizeof j);
    opts_init_session(&j.o, "track");
    j.o.so.device = CKEY_DEVICE_CPU;
    int rc = parse_opts(argc, argv,
                        O_PLATE | O_OUT | O_TRACKING | O_HINT_FORMAT | O_THREADS | O_JSON | O_VERBOSE,
                        1, help_track, &j.o);
    if (rc != CONTINUE) return rc;
    ckey_video_set_log_level(j.o.verbose);
    j.tty = !j.o.json && isatty(2);
    rc = resolve(&j);
    if (rc == CONTINUE) rc = find_track_model(&j.o);
    if (rc == CONTINUE) rc = track_clip(&j);
    track_job_free(&j);
    return rc;
}
