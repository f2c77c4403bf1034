/*
 * Long runs keep flat memory: 1000 frames keyed through a session, and 1000
 * through the shot runner (an in-memory source and a sink that only checks
 * the passes), with the process's peak resident memory (VmHWM) after the
 * first frames equal to the peak after the last within SLACK_KIB (a page or
 * two of thread stack or allocator bookkeeping touched late; a leak of a
 * frame's buffers, or of 64 bytes a frame, is over it), and the same open file
 * descriptors and threads before the session and after it is freed. The
 * sanitizer build runs the same cases (200 frames) for leaks (LeakSanitizer
 * at exit); its allocator quarantine grows the resident set by design, so
 * there the peak comparison is skipped and the leak check stands in for it.
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "ckey.h"
#include "ckey_clip.h"
#include "ckey_media.h"
#include "support/testutil.h"

/* 1000 frames; 200 in the sanitizer build, whose leak check needs no more */
enum { FRAMES = CK_ASAN ? 200 : 1000, W = 96, H = 64, S = 64, SLACK_KIB = 64 };

/* VmHWM of this process in KiB (0 when /proc is not there). */
static long peak_kib(void) {
    FILE *f = fopen("/proc/self/status", "r");
    if (!f) return 0;
    char line[256];
    long v = 0;
    while (fgets(line, sizeof line, f))
        if (!strncmp(line, "VmHWM:", 6)) v = strtol(line + 6, NULL, 10);
    fclose(f);
    return v;
}

/* Threads of this process once every joined thread has left /proc: a joined
 * thread's task entry can outlive pthread_join for a moment (glibc wakes the
 * joiner when the kernel clears the thread id, before the task is reaped), so
 * wait up to a second for the count to come down to want. */
static int settled_threads(int want) {
    int n = ck_count_entries("/proc/self/task");
    for (int i = 0; i < 100 && n > want; i++) {
        nanosleep(&(struct timespec){0, 10 * 1000 * 1000}, NULL);
        n = ck_count_entries("/proc/self/task");
    }
    return n;
}

/* The tiny model and a session on it (S, 2 threads), with the open file
 * descriptors and threads of the process counted before. */
typedef struct longrun {
    ckey_model *m;
    ckey_session *s;
    int fds0, threads0;
} longrun;

/* 1 ready; 0 no tiny model; -1 the session failed (printed; nothing held). */
static int longrun_open(longrun *l) {
    memset(l, 0, sizeof *l);
    char path[512];
    snprintf(path, sizeof path, "%s/tiny/tiny.pth", ck_fixtures_dir());
    ckey_error err;
    if (ckey_model_load(path, &l->m, &err) != CKEY_OK) return 0;
    l->fds0 = ck_count_entries("/proc/self/fd");
    l->threads0 = ck_count_entries("/proc/self/task");
    ckey_session_options o;
    ckey_session_options_default(&o);
    o.size = S;
    o.threads = 2;
    if (ckey_session_create(l->m, &o, &l->s, &err) == CKEY_OK) return 1;
    printf("  ckey_session_create: %s\n", err.message);
    ckey_model_free(l->m);
    return -1;
}

/* Free the session and the model: the same open file descriptors and
 * threads as before them. */
static void longrun_close(longrun *l) {
    ckey_session_free(l->s);
    ckey_model_free(l->m);
    const int fds1 = ck_count_entries("/proc/self/fd"), threads1 = settled_threads(l->threads0);
    printf("  open fds %d -> %d, threads %d -> %d\n", l->fds0, fds1, l->threads0, threads1);
    CHECK(fds1 == l->fds0);
    CHECK(threads1 == l->threads0);
}

/* A plate and hint for frame i: a moving gradient and a moving disc. */
static void make_frame(int64_t i, float *rgb, float *hint) {
    for (int y = 0; y < H; y++)
        for (int x = 0; x < W; x++) {
            const size_t p = (size_t)y * W + x;
            const float t = (float)(i % 97) / 97.0f;
            rgb[p] = (float)x / W * (1 - t) + t * 0.2f;
            rgb[W * H + p] = 0.6f + 0.3f * (float)y / H;
            rgb[2 * W * H + p] = 0.1f + 0.2f * t;
            const float dx = (float)x - (float)(20 + i % 50), dy = (float)y - 32.0f;
            hint[p] = dx * dx + dy * dy < 18.0f * 18.0f ? 1.0f : 0.0f;
        }
}

static void test_session_frames(void) {
    longrun l;
    const int ready = longrun_open(&l);
    if (!ready) SKIP("no tiny model under %s", ck_fixtures_dir());
    REQUIRE(ready == 1);
    ckey_error err;
    float *rgb = malloc(3 * W * H * sizeof(float)), *hint = malloc(W * H * sizeof(float));
    float *alpha = malloc(W * H * sizeof(float)), *fg = malloc(3 * W * H * sizeof(float));
    long after_first = 0;
    double sum = 0;
    for (int64_t i = 0; i < FRAMES; i++) {
        make_frame(i, rgb, hint);
        ckey_frame fr = {W, H, rgb, hint, 0};
        REQUIRE(ckey_session_key(l.s, &fr, alpha, fg, &err) == CKEY_OK);
        sum += alpha[(i * 131) % (W * H)];
        if (i == 7) after_first = peak_kib();
    }
    const long after_last = peak_kib();
    printf("  %d frames: peak %ld KiB after frame 8, %ld KiB after frame %d (alpha sample sum %.4f)\n", FRAMES,
           after_first, after_last, FRAMES, sum);
    CHECK(isfinite(sum));
    if (!CK_ASAN) CHECKF(after_last - after_first <= SLACK_KIB, "peak grew by %ld KiB", after_last - after_first);
    free(rgb), free(hint), free(alpha), free(fg);
    longrun_close(&l);
}

/* ---- the shot runner */

typedef struct {
    ckey_shot_frame frames[FRAMES];
    char stems[FRAMES][16];
} mem_source;

static ckey_status src_read(void *self, int64_t index, ckey_image *plate, ckey_image *hint, ckey_error *err) {
    (void)self, (void)err;
    if (!plate->data || plate->width != W || plate->height != H) {
        ckey_image_free(plate);
        plate->data = malloc(3 * W * H * sizeof(float));
        plate->width = W, plate->height = H, plate->channels = 3, plate->bit_depth = 8;
    }
    if (!hint->data || hint->width != W || hint->height != H) {
        ckey_image_free(hint);
        hint->data = malloc(W * H * sizeof(float));
        hint->width = W, hint->height = H, hint->channels = 1, hint->bit_depth = 8;
    }
    if (!plate->data || !hint->data) return CKEY_ERR_NOMEM;
    make_frame(index, plate->data, hint->data);
    return CKEY_OK;
}

static void src_close(void *self) { (void)self; }

typedef struct {
    int64_t written;
    long peak_early, peak_late; /* after frame 8 (the pipeline full) and frame FRAMES - 8 (before it drains) */
    double sum;
    int bad;
} count_sink;

static ckey_status sink_begin(void *self, ckey_error *err) {
    (void)self, (void)err;
    return CKEY_OK;
}

static ckey_status sink_write(void *self, const ckey_shot_frame *f, const ckey_shot_passes *p, ckey_error *err) {
    (void)err;
    count_sink *k = self;
    if (p->width != W || p->height != H || !p->alpha || !p->processed) k->bad++;
    if (f->number != k->written) k->bad++;
    k->sum += p->alpha[(k->written * 131) % (W * H)];
    /* a few frames in: every buffer of the pipeline has been made */
    if (++k->written == 8) k->peak_early = peak_kib();
    if (k->written == FRAMES - 8) k->peak_late = peak_kib();
    return CKEY_OK;
}

static ckey_status sink_finish(void *self, ckey_error *err) {
    (void)self, (void)err;
    return CKEY_OK;
}

static void sink_close(void *self) { (void)self; }

static void test_shot_frames(void) {
    longrun l;
    const int ready = longrun_open(&l);
    if (!ready) SKIP("no tiny model under %s", ck_fixtures_dir());
    REQUIRE(ready == 1);
    ckey_error err;
    static mem_source ms;
    for (int i = 0; i < FRAMES; i++) {
        snprintf(ms.stems[i], sizeof ms.stems[i], "f_%04d", i);
        ms.frames[i] = (ckey_shot_frame){i, ms.stems[i], ms.stems[i], "memory", 0};
    }
    ckey_source src = {.self = &ms, .count = FRAMES, .frames = ms.frames, .read = src_read, .close = src_close};
    count_sink cs = {0, 0, 0, 0, 0};
    ckey_sink sink = {.self = &cs, .begin = sink_begin, .write = sink_write, .finish = sink_finish,
                      .close = sink_close};
    ckey_shot_options so;
    ckey_shot_options_default(&so);
    so.writers = 2;
    ckey_shot_stats stats;
    CHECKF(ckey_shot_run(l.s, &src, &sink, NULL, &so, NULL, NULL, &stats, &err) == CKEY_OK, "%s", err.message);
    const long peak_end = peak_kib();
    printf("  shot of %d frames: %lld written, peak %ld KiB after 8 frames, %ld KiB after %d, %ld KiB at the end\n",
           FRAMES, (long long)cs.written, cs.peak_early, cs.peak_late, FRAMES - 8, peak_end);
    CHECK(cs.written == FRAMES);
    CHECK(cs.bad == 0);
    CHECK(isfinite(cs.sum));
    /* steady state: no growth from frame to frame; the end of the clip (the
     * reader past the last frame, the pipeline draining) may touch a few more
     * pages once, never per frame */
    if (!CK_ASAN) {
        CHECKF(cs.peak_late - cs.peak_early <= SLACK_KIB, "peak grew by %ld KiB over the clip",
               cs.peak_late - cs.peak_early);
        CHECKF(peak_end - cs.peak_early <= 1024, "peak grew by %ld KiB at the end", peak_end - cs.peak_early);
    }
    longrun_close(&l);
}

int main(int argc, char **argv) {
    static const ck_test_case cases[] = {
        {"session_frames_flat", test_session_frames},
        {"shot_frames_flat", test_shot_frames},
    };
    return ck_test_main(cases, (int)(sizeof cases / sizeof cases[0]), argc, argv);
}
