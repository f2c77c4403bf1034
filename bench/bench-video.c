/*
 * Video encoding and decoding through libckey's video API
 * (ckey_video_writer, ckey_video_reader: src/media/video.c), not a test:
 * the wall and CPU seconds a frame of each codec `ckey key --video-out`
 * writes or a video plate may come in. FRAMES frames of a W x H plate
 * (examples/plate.png resized with Lanczos4 plus grain at half resolution,
 * bench_grainy_plate, panned 4 pixels a frame so that an inter-frame codec
 * has motion to follow), with its hard-edged green-screen hint as the alpha
 * of ProRes 4444, are encoded to H.264 (.mp4), ProRes 422 HQ and ProRes
 * 4444 (.mov) under /tmp, then decoded back as floats (rgb, and alpha for
 * 4444), each with the encoder's / decoder's threads at 0 (FFmpeg's choice:
 * what ckey key uses) and at 1. Encode: ckey_video_write_frame (the float ->
 * YUV conversion and the encoder) and ckey_video_writer_close (the
 * encoder's flush); decode: ckey_video_reader_open and
 * ckey_video_read_frame (the decoder and the YUV -> float conversion). CPU
 * is the process's CPU time (every thread, FFmpeg's included), less the
 * calling thread's own time spent making the frames. --pool N splits the
 * float -> YUV conversion over a pool of N threads, as `ckey key` does over
 * its runner's pool (ck_video_write_frame_on); 0, the default, converts on
 * the calling thread. --coders N adds rows for the ProRes codecs written as
 * `ckey key --video-out` writes its ProRes (ck_video_writer_open_coded):
 * N threads each convert and code a frame at once (ck_video_code_frame,
 * each with its own encoder context), then the calling thread muxes the N
 * packets in order (ck_video_mux_frame); its "threads" column reads "N
 * cod". Wall seconds a frame there are a round of N frames over N.
 *
 *   build/bench/bench-video [--frames 24] [--size 1920x1080] [--plate examples/plate.png] [--pool N]
 *                           [--coders N]
 */
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "benchutil.h"
#include "ckey_media.h"
#include "core/core.h"
#include "media/video.h"

static double clock_s(clockid_t id) {
    struct timespec t;
    clock_gettime(id, &t);
    return (double)t.tv_sec + 1e-9 * (double)t.tv_nsec;
}

/* Frame k: the plate panned 4 k pixels left (wrapping), into out [3, H, W]. */
static void pan(const float *src, int W, int H, int k, float *out) {
    const int s = (4 * k) % W;
    for (int c = 0; c < 3; c++)
        for (int y = 0; y < H; y++) {
            const float *row = src + ((size_t)c * H + y) * W;
            float *o = out + ((size_t)c * H + y) * W;
            memcpy(o, row + s, (size_t)(W - s) * sizeof(float));
            memcpy(o + (W - s), row, (size_t)s * sizeof(float));
        }
}

typedef struct {
    double wall, cpu; /* seconds for all the frames */
} cost;

static int encode(const char *path, ckey_video_codec codec, int threads, ck_pool *pool, const float *plate,
                  const float *alpha, int W, int H, int frames, float *buf, cost *c) {
    const ckey_video_writer_options o = {codec, W, H, 24, 1, threads};
    ckey_video_writer *w;
    ckey_error err;
    double wall = 0, own = 0;
    const double cpu0 = clock_s(CLOCK_PROCESS_CPUTIME_ID);
    double t = clock_s(CLOCK_MONOTONIC);
    ckey_status st = ckey_video_writer_open(path, &o, &w, &err);
    wall += clock_s(CLOCK_MONOTONIC) - t;
    for (int k = 0; st == CKEY_OK && k < frames; k++) {
        const double m0 = clock_s(CLOCK_THREAD_CPUTIME_ID);
        pan(plate, W, H, k, buf);
        own += clock_s(CLOCK_THREAD_CPUTIME_ID) - m0;
        t = clock_s(CLOCK_MONOTONIC);
        st = ck_video_write_frame_on(w, pool, buf, alpha, &err);
        wall += clock_s(CLOCK_MONOTONIC) - t;
    }
    t = clock_s(CLOCK_MONOTONIC);
    if (st == CKEY_OK) st = ckey_video_writer_close(w, &err);
    else ckey_video_writer_free(w);
    wall += clock_s(CLOCK_MONOTONIC) - t;
    c->wall = wall;
    c->cpu = clock_s(CLOCK_PROCESS_CPUTIME_ID) - cpu0 - own;
    if (st != CKEY_OK) fprintf(stderr, "bench-video: %s\n", err.message);
    return st != CKEY_OK;
}

/* One coder thread's frame of a round: panned into its own buffer (not
 * timed), then converted and coded. */
typedef struct coder_job {
    ckey_video_writer *w;
    ck_pool *pool;
    const float *plate, *alpha;
    int W, H, k;
    float *buf;
    double own;  /* CPU seconds of the pan */
    ckey_status st;
    ckey_error err;
} coder_job;

static void *code_job(void *arg) {
    coder_job *j = arg;
    const double m0 = clock_s(CLOCK_THREAD_CPUTIME_ID);
    pan(j->plate, j->W, j->H, j->k, j->buf);
    j->own += clock_s(CLOCK_THREAD_CPUTIME_ID) - m0;
    j->st = ck_video_code_frame(j->w, &j->k, j->pool, j->buf, j->alpha, &j->err);
    return NULL;
}

/* encode() through a coded-mode writer, `coders` frames coded at once. */
static int encode_coded(const char *path, ckey_video_codec codec, int coders, ck_pool *pool, const float *plate,
                        const float *alpha, int W, int H, int frames, cost *c) {
    const ckey_video_writer_options o = {codec, W, H, 24, 1, 0};
    ckey_video_writer *w;
    ckey_error err;
    coder_job *jobs = calloc((size_t)coders, sizeof *jobs);
    pthread_t *th = calloc((size_t)coders, sizeof *th);
    if (!jobs || !th) return 1;
    double wall = 0, own = 0;
    const double cpu0 = clock_s(CLOCK_PROCESS_CPUTIME_ID);
    double t = clock_s(CLOCK_MONOTONIC);
    ckey_status st = ck_video_writer_open_coded(path, &o, &w, &err);
    for (int k = 0; st == CKEY_OK && k < coders; k++) {
        jobs[k] = (coder_job){w, pool, plate, alpha, W, H, 0, malloc(3 * sizeof(float) * (size_t)W * H), 0, CKEY_OK, {0}};
        if (!jobs[k].buf) st = CKEY_ERR_NOMEM;
    }
    for (int k0 = 0; st == CKEY_OK && k0 < frames; k0 += coders) {
        const int m = frames - k0 < coders ? frames - k0 : coders;
        for (int k = 0; k < m; k++) {
            jobs[k].k = k0 + k;
            pthread_create(&th[k], NULL, code_job, &jobs[k]);
        }
        for (int k = 0; k < m; k++) {
            pthread_join(th[k], NULL);
            if (jobs[k].st != CKEY_OK && st == CKEY_OK) {
                st = jobs[k].st;
                err = jobs[k].err;
            }
        }
        for (int k = 0; k < m && st == CKEY_OK; k++) {
            int muxed = 0;
            st = ck_video_mux_frame(w, &jobs[k].k, &muxed, &err);
        }
    }
    if (st == CKEY_OK) st = ckey_video_writer_close(w, &err);
    else ckey_video_writer_free(w);
    wall = clock_s(CLOCK_MONOTONIC) - t;
    for (int k = 0; k < coders; k++) {
        own += jobs[k].own;
        free(jobs[k].buf);
    }
    free(jobs);
    free(th);
    /* the pans' wall time, spread over the coders, is left in: small next to a frame's coding */
    c->wall = wall;
    c->cpu = clock_s(CLOCK_PROCESS_CPUTIME_ID) - cpu0 - own;
    if (st != CKEY_OK) fprintf(stderr, "bench-video: %s\n", err.message);
    return st != CKEY_OK;
}

static int decode(const char *path, int threads, int with_alpha, int W, int H, int frames, float *buf, cost *c) {
    ckey_video_reader *r = NULL;
    ckey_error err;
    const double cpu0 = clock_s(CLOCK_PROCESS_CPUTIME_ID), t = clock_s(CLOCK_MONOTONIC);
    ckey_status st = ckey_video_reader_open(path, threads, &r, &err);
    for (int k = 0; st == CKEY_OK && k < frames; k++)
        st = ckey_video_read_frame(r, k, buf, with_alpha ? buf + 3 * (size_t)W * H : NULL, NULL, &err);
    ckey_video_reader_free(r);
    c->wall = clock_s(CLOCK_MONOTONIC) - t;
    c->cpu = clock_s(CLOCK_PROCESS_CPUTIME_ID) - cpu0;
    if (st != CKEY_OK) fprintf(stderr, "bench-video: %s\n", err.message);
    return st != CKEY_OK;
}

int main(int argc, char **argv) {
    int frames = 24, W = 1920, H = 1080, pool_threads = 0, coders = 0;
    const char *plate_path = "examples/plate.png";
    for (int i = 1; i + 1 < argc; i += 2) {
        if (!strcmp(argv[i], "--frames")) frames = atoi(argv[i + 1]);
        else if (!strcmp(argv[i], "--size")) {
            if (sscanf(argv[i + 1], "%dx%d", &W, &H) != 2) W = 0;
        } else if (!strcmp(argv[i], "--plate")) plate_path = argv[i + 1];
        else if (!strcmp(argv[i], "--pool")) pool_threads = atoi(argv[i + 1]);
        else if (!strcmp(argv[i], "--coders")) coders = atoi(argv[i + 1]);
        else {
            fprintf(stderr, "bench-video: unknown option %s\n", argv[i]);
            return 2;
        }
    }
    if (frames < 1 || W < 16 || H < 16 || W % 2 || H % 2 || pool_threads < 0 || coders < 0 || coders > 64) {
        fprintf(stderr, "bench-video: bad --frames, --size (even sides, H.264 4:2:0) or --pool\n");
        return 2;
    }
    ck_pool *pool = NULL;
    ckey_error perr;
    if (pool_threads > 0 && ck_pool_create(pool_threads, &pool, &perr) != CKEY_OK) {
        fprintf(stderr, "bench-video: %s\n", perr.message);
        return 1;
    }
    ckey_video_set_log_level(0);
    const size_t n = (size_t)W * H;
    float *plate = bench_grainy_plate(plate_path, W, H, 0.004f), *alpha = malloc(n * sizeof(float));
    float *buf = malloc(4 * n * sizeof(float));
    if (!plate || !alpha || !buf) return 1;
    /* the alpha: the plate's green minus the others, hard-edged */
    for (size_t i = 0; i < n; i++)
        alpha[i] = plate[n + i] - (plate[i] > plate[2 * n + i] ? plate[i] : plate[2 * n + i]) > 0.1f ? 0.0f : 1.0f;

    static const struct {
        const char *name, *ext;
        ckey_video_codec codec;
    } codecs[] = {{"H.264 (CRF 18)", "mp4", CKEY_VIDEO_H264},
                  {"ProRes 422 HQ", "mov", CKEY_VIDEO_PRORES_422HQ},
                  {"ProRes 4444", "mov", CKEY_VIDEO_PRORES_4444}};
    printf("%s resized to %d x %d (grain 0.004, panned), %d frames; %ld online CPUs; conversion on %d thread(s); "
           "seconds a frame\n", plate_path, W, H, frames, sysconf(_SC_NPROCESSORS_ONLN), pool ? pool_threads : 1);
    printf("%-16s %7s %9s %9s %9s %9s %8s\n", "codec", "threads", "enc wall", "enc CPU", "dec wall", "dec CPU", "MiB");
    int bad = 0;
    for (size_t k = 0; k < sizeof codecs / sizeof codecs[0]; k++)
        for (int threads = 0; threads <= 1; threads++) {
            char path[96];
            snprintf(path, sizeof path, "/tmp/bench-video-%d.%s", (int)getpid(), codecs[k].ext);
            cost e = {0, 0}, d = {0, 0};
            const int with_alpha = codecs[k].codec == CKEY_VIDEO_PRORES_4444;
            bad |= encode(path, codecs[k].codec, threads, pool, plate, with_alpha ? alpha : NULL, W, H, frames, buf, &e) ||
                   decode(path, threads, with_alpha, W, H, frames, buf, &d);
            FILE *f = fopen(path, "rb");
            long size = 0;
            if (f && fseek(f, 0, SEEK_END) == 0) size = ftell(f);
            if (f) fclose(f);
            unlink(path);
            printf("%-16s %7s %9.4f %9.4f %9.4f %9.4f %8.1f\n", codecs[k].name, threads ? "1" : "auto",
                   e.wall / frames, e.cpu / frames, d.wall / frames, d.cpu / frames, bench_mib((double)size));
        }
    for (size_t k = 1; coders > 0 && k < sizeof codecs / sizeof codecs[0]; k++) {
        char path[96];
        snprintf(path, sizeof path, "/tmp/bench-video-%d.%s", (int)getpid(), codecs[k].ext);
        cost e = {0, 0};
        const int with_alpha = codecs[k].codec == CKEY_VIDEO_PRORES_4444;
        bad |= encode_coded(path, codecs[k].codec, coders, pool, plate, with_alpha ? alpha : NULL, W, H, frames, &e);
        FILE *f = fopen(path, "rb");
        long size = 0;
        if (f && fseek(f, 0, SEEK_END) == 0) size = ftell(f);
        if (f) fclose(f);
        unlink(path);
        char label[16];
        snprintf(label, sizeof label, "%d cod", coders);
        printf("%-16s %7s %9.4f %9.4f %9s %9s %8.1f\n", codecs[k].name, label, e.wall / frames, e.cpu / frames,
               "-", "-", bench_mib((double)size));
    }
    free(plate), free(alpha), free(buf);
    ck_pool_free(pool);
    return bad;
}
