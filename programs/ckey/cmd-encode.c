/*
 * ckey encode: the final step of a clip keyed in chunks. Checks that every
 * frame of the clip has its four passes, removes the temporary files that
 * killed tasks left in the pass folders, and writes the ProRes / H.264
 * videos from the finished passes (ckey_encode_videos): the same bytes a
 * one-run `ckey key --video-out` writes.
 */
#include <dirent.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "ckey_clip.h"
#include "ckey.h"
#include "clip-paths.h"
#include "commands.h"
#include "help.h"
#include "opts.h"
#include "output.h"
#include "paths.h"
#include "stop.h"

typedef struct encode_job {
    opts o;
    clip_paths cp;
    ckey_source src;
    ckey_sink passes;        /* for its completeness check only */
    char *video_path[2];
    int tty;
    ckey_error err;
} encode_job;

static void encode_job_free(encode_job *j) {
    ckey_source_close(&j->src);
    ckey_sink_close(&j->passes);
    clip_paths_free(&j->cp);
    free(j->video_path[0]);
    free(j->video_path[1]);
}

/* Frame numbers as ranges, "3-5, 9, 12-14", into buf[cap] (cut with "..."
 * when long). */
static void format_ranges(const int64_t *num, int64_t n, char *buf, size_t cap) {
    size_t len = 0;
    buf[0] = 0;
    for (int64_t i = 0; i < n;) {
        int64_t k = i;
        while (k + 1 < n && num[k + 1] == num[k] + 1) k++;
        char item[64];
        if (k > i) snprintf(item, sizeof item, "%s%lld-%lld", i ? ", " : "", (long long)num[i],
                            (long long)num[k]);
        else snprintf(item, sizeof item, "%s%lld", i ? ", " : "", (long long)num[i]);
        if (len + strlen(item) + 8 >= cap) {
            snprintf(buf + len, cap - len, ", ...");
            return;
        }
        len += (size_t)snprintf(buf + len, cap - len, "%s", item);
        i = k + 1;
    }
}

/* Every frame complete, or a failure listing the incomplete ones. */
static int check_complete(encode_job *j) {
    int64_t *missing = malloc(((size_t)j->src.count + 1) * sizeof *missing);
    if (!missing) return fail(j->o.json, CKEY_ERR_NOMEM, "out of memory");
    int64_t n = 0;
    for (int64_t i = 0; i < j->src.count; i++)
        if (!j->passes.complete(j->passes.self, &j->src.frames[i]))
            missing[n++] = j->src.frames[i].number;
    if (n == 0) {
        free(missing);
        return CONTINUE;
    }
    char ranges[2048];
    format_ranges(missing, n, ranges, sizeof ranges);
    const int json = j->o.json;
    fprintf(stderr, "ckey: error: %lld of the %lld frames of %s are not complete in %s (a pass "
                    "missing): frames %s. Key them (ckey key ... --frames A-B resumes a chunk), "
                    "then run ckey encode again\n",
            (long long)n, (long long)j->src.count, j->cp.plate_dir, j->cp.out_dir, ranges);
    if (json) {
        printf("{\"ok\": false, \"command\": \"encode\", \"status\": \"CKEY_ERR_IO\", \"message\": ");
        char msg[2300];
        snprintf(msg, sizeof msg, "%lld of %lld frames are not complete: %s", (long long)n,
                 (long long)j->src.count, ranges);
        json_str(stdout, msg);
        printf(", \"frames\": %lld, \"missing\": [", (long long)j->src.count);
        for (int64_t i = 0; i < n; i++) printf("%s%lld", i ? ", " : "", (long long)missing[i]);
        printf("]}\n");
    }
    free(missing);
    return EXIT_RUNTIME;
}

/*
 * Temporary files that killed writers left in the pass folders
 * ("<file>.ckey-<host>-<pid>-<tid>.tmp", ckey_temp_path): with every frame
 * complete no chunk is writing any more, so they belong to no one. Returns
 * how many were removed.
 */
static long remove_temps(const char *out_dir) {
    static const char *const dirs[4] = {"Matte", "FG", "Processed", "Comp"};
    long removed = 0;
    for (int k = 0; k < 4; k++) {
        char *d = path_join(out_dir, dirs[k]);
        DIR *dir = d ? opendir(d) : NULL;
        for (struct dirent *e; dir && (e = readdir(dir));) {
            const size_t l = strlen(e->d_name);
            if (l < 4 || strcmp(e->d_name + l - 4, ".tmp") || !strstr(e->d_name, ".ckey-")) continue;
            char *p = path_join(d, e->d_name);
            if (p && unlink(p) == 0) removed++;
            free(p);
        }
        if (dir) closedir(dir);
        free(d);
    }
    return removed;
}

static void progress(void *user, int64_t done, int64_t total) {
    const encode_job *j = user;
    if (j->o.json) return;
    if (j->tty)
        fprintf(stderr, "\rencoded %lld/%lld   ", (long long)done, (long long)total);
    else if (done == total || done % 100 == 0)
        fprintf(stderr, "encoded %lld/%lld frames\n", (long long)done, (long long)total);
}

static int encode_clip(encode_job *j) {
    const opts *o = &j->o;
    char why[4400];
    int rc = clip_paths_resolve(o, 0, &j->cp, why, sizeof why);
    if (rc == EXIT_RUNTIME) return fail(o->json, CKEY_ERR_INVALID_ARG, "%s", why);
    if (rc != CONTINUE) return rc;
    if (ckey_source_open_video(j->cp.plate_dir, NULL, 0, NULL, NULL, &j->src, &j->err) != CKEY_OK ||
        ckey_sink_open_passes(j->cp.out_dir, CKEY_EXR_PXR24, &j->passes, &j->err) != CKEY_OK)
        return fail_err(o->json, &j->err);
    rc = check_complete(j);
    if (rc != CONTINUE) return rc;
    const long removed = remove_temps(j->cp.out_dir);

    const double t0 = now_seconds();
    if (o->video_out) {
        ckey_encode_options eo;
        memset(&eo, 0, sizeof eo);
        for (int k = 0; k < 2; k++) {
            if (!(o->video_out & (k == 0 ? VIDEO_OUT_PRORES : VIDEO_OUT_H264))) continue;
            if (!(j->video_path[k] = clip_video_path(&j->cp, k)))
                return fail(o->json, CKEY_ERR_NOMEM, "out of memory");
        }
        eo.video.fg_alpha = j->video_path[0];
        eo.video.comp = j->video_path[1];
        /* --fps, else the plate video's rate; 0/0 (a sequence) is 24 */
        eo.video.rate_num = o->fps_num ? o->fps_num : j->src.rate_num;
        eo.video.rate_den = o->fps_num ? o->fps_den : j->src.rate_den;
        eo.video.despill_strength = o->post.despill_strength;
        /* SIGINT / SIGTERM: the encoder stops before the next frame, leaving
         * no video (its temporary files are removed) */
        eo.cancel = stop_requested;
        eo.progress = progress;
        eo.progress_user = j;
        stop_install_handlers();
        const ckey_status st =
            ckey_encode_videos(j->cp.out_dir, j->src.frames, j->src.count, &eo, &j->err);
        if (j->tty && !o->json) fputc('\n', stderr);
        if (st == CKEY_ERR_CANCELLED) {
            const int sig = stop_signal_received() ? stop_signal_received() : SIGINT;
            fprintf(stderr, "ckey: interrupted by %s: no video written\n",
                    sig == SIGTERM ? "SIGTERM" : "SIGINT");
            if (o->json)
                printf("{\"ok\": false, \"command\": \"encode\", \"status\": \"CKEY_ERR_CANCELLED\", "
                       "\"interrupted\": true}\n");
            return 128 + sig;
        }
        if (st != CKEY_OK) return fail_err(o->json, &j->err);
    }
    const double secs = now_seconds() - t0;
    if (o->json) {
        printf("{\"ok\": true, \"command\": \"encode\", \"frames\": %lld, \"out\": ",
               (long long)j->src.count);
        json_str(stdout, j->cp.out_dir);
        printf(", \"videos\": [");
        for (int k = 0, n = 0; k < 2; k++)
            if (j->video_path[k]) {
                printf("%s", n++ ? ", " : "");
                json_str(stdout, j->video_path[k]);
            }
        printf("], \"removed_temporary_files\": %ld, \"seconds\": %.6f}\n", removed, secs);
        return EXIT_OK;
    }
    printf("all %lld frames complete in %s", (long long)j->src.count, j->cp.out_dir);
    if (removed) printf("; removed %ld temporary file%s left by killed tasks", removed,
                        removed == 1 ? "" : "s");
    printf("\n");
    for (int k = 0; k < 2; k++)
        if (j->video_path[k]) printf("wrote %s\n", j->video_path[k]);
    if (o->video_out) printf("encoded in %.3f s\n", secs);
    return EXIT_OK;
}

int cmd_encode(int argc, char **argv) {
    encode_job j;
    memset(&j, 0, sizeof j);
    opts_init(&j.o, "encode");
    ckey_shot_options shot_defaults;
    ckey_shot_options_default(&shot_defaults);
    j.o.post = shot_defaults.post; /* despill 0.5, as `ckey key` */
    j.o.video_out = VIDEO_OUT_PRORES | VIDEO_OUT_H264;
    int rc = parse_opts(argc, argv, O_OUT | O_PLATE | O_VIDEO_OUT | O_FPS | O_DESPILL | O_JSON | O_VERBOSE,
                        1, help_encode, &j.o);
    if (rc != CONTINUE) return rc;
    if (j.o.fps_num && !j.o.video_out)
        return usage_error(j.o.cmd, "--fps sets the frame rate of the videos: it cannot be combined "
                                    "with --video-out none");
    ckey_video_set_log_level(j.o.verbose);
    j.tty = isatty(2);
    rc = encode_clip(&j);
    encode_job_free(&j);
    return rc;
}
