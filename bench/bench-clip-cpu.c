/*
 * The CPU side of keying a clip (not a test): a synthetic clip of 8-bit PNG
 * plates and hints at each size, keyed with a small model at a small S so
 * that the network costs next to nothing, timed
 *   - stage by stage on one frame, on the calling thread: decode (plate +
 *     hint), pre (resize to S, normalize), model, back (Lanczos4 to the
 *     plate), post (despeckle, despill, premultiply, comp), and the
 *     encoding and writing of each pass (Matte, FG, Processed EXR, Comp PNG);
 *   - end to end through ckey_shot_run (the readers, the network, the
 *     writers and the sink as `ckey key` runs them): frames per second and
 *     each stage's time per frame.
 *
 *   build/bench/bench-clip-cpu [--sizes 1920x1080,3840x2160] [--frames 4]
 *       [--model tests/fixtures/tiny/tiny.pth] [--size 64] [--threads 0]
 *       [--readers 0] [--writers 0] [--exr-level 1] [--comp-png rle|N]
 *       [--dir /tmp/ckey-bench-clip] [--runs 1] [--stages-only | --shot-only]
 *
 * The same file builds against an earlier libckey (bench/bench-clip-cpu.sh
 * --before REF does), which has neither the deflate level, the Comp PNG
 * option nor the per-stage statistics: those lines then say so, and the
 * stages run as that version writes its passes (libdeflate level 6, PNG
 * level 3).
 */
#include <math.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "ckey.h"
#include "ckey_clip.h"
#include "ckey_media.h"
#include "media/image.h"
#include "pixel/pixel.h"

#ifdef CKEY_EXR_LEVEL_MAX /* this version: the options and the pool */
#define HAVE_OPTIONS 1
#include "core/core.h"
#include "media/exr.h"
#include "pixel/post.h"
#endif

static double now(void) {
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return t.tv_sec + t.tv_nsec * 1e-9;
}

static double cpu_now(void) {
    struct timespec t;
    clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &t);
    return t.tv_sec + t.tv_nsec * 1e-9;
}

static void die(const char *what, const ckey_error *e) {
    fprintf(stderr, "bench-clip-cpu: %s: %s\n", what, e ? e->message : "failed");
    exit(1);
}

/* snprintf that stops the bench rather than cut a path */
static void fmt(char *buf, size_t cap, const char *f, ...) __attribute__((format(printf, 3, 4)));
static void fmt(char *buf, size_t cap, const char *f, ...) {
    va_list ap;
    va_start(ap, f);
    const int n = vsnprintf(buf, cap, f, ap);
    va_end(ap);
    if (n < 0 || (size_t)n >= cap) die("path too long", NULL);
}

/* ------------------------------------------------------- the clip */

static uint64_t rng_state = 0x9E3779B97F4A7C15ull;

/* roughly normal: the sum of four uniforms, variance 1 */
static float gauss(void) {
    float s = 0;
    for (int k = 0; k < 4; k++) {
        rng_state ^= rng_state << 13;
        rng_state ^= rng_state >> 7;
        rng_state ^= rng_state << 17;
        s += (float)(rng_state >> 40) / 16777216.0f;
    }
    return (s - 2.0f) * 1.7320508f;
}

/* a box blur of radius r, rows then columns, edges repeated */
static void box_blur(float *a, float *t, int w, int h, int r) {
    for (int y = 0; y < h; y++) {
        const float *row = a + (size_t)y * w;
        double acc = 0;
        for (int x = -r - 1; x < r; x++) acc += row[x < 0 ? 0 : x >= w ? w - 1 : x];
        for (int x = 0; x < w; x++) {
            const int xa = x + r, xs = x - r - 1;
            acc += row[xa >= w ? w - 1 : xa] - row[xs < 0 ? 0 : xs];
            t[(size_t)y * w + x] = (float)(acc / (2 * r + 1));
        }
    }
    for (int x = 0; x < w; x++) {
        double acc = 0;
        for (int y = -r - 1; y < r; y++) acc += t[(size_t)(y < 0 ? 0 : y) * w + x];
        for (int y = 0; y < h; y++) {
            const int ya = y + r, ys = y - r - 1;
            acc += t[(size_t)(ya >= h ? h - 1 : ya) * w + x] - t[(size_t)(ys < 0 ? 0 : ys) * w + x];
            a[(size_t)y * w + x] = (float)(acc / (2 * r + 1));
        }
    }
}

/* DIR/Input/plate_NNNNN.png (8-bit RGB) and DIR/AlphaHint/plate_NNNNN.png
 * (8-bit gray), as bench/make_clip.py draws them: a lit green backdrop
 * with grain, a subject (an ellipse with a soft, noisy edge) moving across
 * it, and a coarse hint (the subject's mask, dilated and blurred). Kept
 * when the files are already there. */
static void make_clip(const char *dir, int w, int h, int frames) {
    char p[1024];
    fmt(p, sizeof p, "%s/Input/plate_%05d.png", dir, frames - 1);
    struct stat st;
    if (stat(p, &st) == 0) return;
    mkdir(dir, 0777);
    fmt(p, sizeof p, "%s/Input", dir);
    mkdir(p, 0777);
    fmt(p, sizeof p, "%s/AlphaHint", dir);
    mkdir(p, 0777);
    const size_t n = (size_t)w * h;
    float *img = malloc(3 * n * sizeof(float)), *hint = malloc(n * sizeof(float)), *tmp = malloc(n * sizeof(float));
    if (!img || !hint || !tmp) die("out of memory", NULL);
    for (int i = 0; i < frames; i++) {
        const float cx = w * (0.3f + 0.4f * (float)i / (float)(frames > 1 ? frames - 1 : 1)), cy = h * 0.55f;
        for (int y = 0; y < h; y++)
            for (int x = 0; x < w; x++) {
                const size_t k = (size_t)y * w + x;
                const float dx = (x - w / 2.0f) / w, dy = (y - h / 2.0f) / h;
                const float light = 0.75f + 0.25f * expf(-(dx * dx + dy * dy) * 3);
                const float ex = (x - cx) / (0.18f * w), ey = (y - cy) / (0.38f * h), d = sqrtf(ex * ex + ey * ey);
                float a = (1.0f - d + 0.02f * gauss()) * 25.0f;
                a = a < 0 ? 0 : a > 1 ? 1 : a;
                const float subj[3] = {0.75f - 0.2f * y / h, 0.55f - 0.1f * x / w, 0.45f};
                const float back[3] = {0.10f * light, 0.62f * light, 0.22f * light};
                for (int c = 0; c < 3; c++) img[c * n + k] = a * subj[c] + (1 - a) * back[c] + 0.01f * gauss();
                hint[k] = d < 1.08f ? 1.0f : 0.0f;
            }
        box_blur(hint, tmp, w, h, 12);
        ckey_error err;
        fmt(p, sizeof p, "%s/Input/plate_%05d.png", dir, i);
        if (ckey_image_write_png(p, img, 3, w, h, 8, &err) != CKEY_OK) die(p, &err);
        fmt(p, sizeof p, "%s/AlphaHint/plate_%05d.png", dir, i);
        if (ckey_image_write_png(p, hint, 1, w, h, 8, &err) != CKEY_OK) die(p, &err);
    }
    free(img);
    free(hint);
    free(tmp);
}

/* ------------------------------------------------------- options */

typedef struct bench_opts {
    int sizes[8][2], nsizes;
    int frames, size, threads, readers, writers, runs, stages, shot;
    int exr_level, comp_png; /* -1 / -2: this version's default */
    const char *model, *dir;
} bench_opts;

static void usage(void) {
    fprintf(stderr, "usage: bench-clip-cpu [--sizes WxH,...] [--frames N] [--model M] [--size S] [--threads T] "
                    "[--readers R] [--writers K] [--exr-level L] [--comp-png rle|N] [--dir DIR] [--runs R] "
                    "[--stages-only | --shot-only]\n");
    exit(2);
}

static void parse(int argc, char **argv, bench_opts *o) {
    memset(o, 0, sizeof *o);
    o->sizes[0][0] = 1920, o->sizes[0][1] = 1080, o->sizes[1][0] = 3840, o->sizes[1][1] = 2160, o->nsizes = 2;
    o->frames = 4, o->size = 64, o->runs = 1, o->stages = 1, o->shot = 1;
    o->exr_level = -1, o->comp_png = -2;
    o->model = "tests/fixtures/tiny/tiny.pth";
    o->dir = "/tmp/ckey-bench-clip";
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i], *v = i + 1 < argc ? argv[i + 1] : NULL;
        if (!strcmp(a, "--stages-only")) o->shot = 0;
        else if (!strcmp(a, "--shot-only")) o->stages = 0;
        else if (!v) usage();
        else if (!strcmp(a, "--sizes")) {
            o->nsizes = 0;
            for (const char *p = v; *p && o->nsizes < 8;) {
                int w, h, n = 0;
                if (sscanf(p, "%dx%d%n", &w, &h, &n) != 2 || w < 1 || h < 1) usage();
                o->sizes[o->nsizes][0] = w, o->sizes[o->nsizes][1] = h, o->nsizes++;
                p += n;
                if (*p == ',') p++;
            }
            i++;
        } else if (!strcmp(a, "--frames")) o->frames = atoi(v), i++;
        else if (!strcmp(a, "--model")) o->model = v, i++;
        else if (!strcmp(a, "--size")) o->size = atoi(v), i++;
        else if (!strcmp(a, "--threads")) o->threads = atoi(v), i++;
        else if (!strcmp(a, "--readers")) o->readers = atoi(v), i++;
        else if (!strcmp(a, "--writers")) o->writers = atoi(v), i++;
        else if (!strcmp(a, "--exr-level")) o->exr_level = atoi(v), i++;
        else if (!strcmp(a, "--comp-png")) o->comp_png = !strcmp(v, "rle") ? -1 : atoi(v), i++;
        else if (!strcmp(a, "--dir")) o->dir = v, i++;
        else if (!strcmp(a, "--runs")) o->runs = atoi(v), i++;
        else usage();
    }
    if (o->frames < 1 || o->runs < 1) usage();
}

/* ------------------------------------------------------- stages */

/* One frame's stages, each on the calling thread (and, where this version
 * can, the encoders again at its fastest settings and on a pool). */
static void stages(const bench_opts *o, ckey_session *s, const char *clip, int w, int h) {
    char plate_path[1024], hint_path[1024], out[1024], p[1100];
    fmt(plate_path, sizeof plate_path, "%s/Input/plate_00000.png", clip);
    fmt(hint_path, sizeof hint_path, "%s/AlphaHint/plate_00000.png", clip);
    fmt(out, sizeof out, "%s/stages-out", clip);
    mkdir(out, 0777);
    ckey_error err;
    ckey_image plate, hint;
    double t = now();
    if (ckey_image_read(plate_path, CKEY_IMAGE_RGB, &plate, &err) != CKEY_OK) die(plate_path, &err);
    if (ckey_image_read(hint_path, CKEY_IMAGE_HINT, &hint, &err) != CKEY_OK) die(hint_path, &err);
    const double t_decode = now() - t;
    /* the sRGB transfer function both ways on the plate's three planes:
     * three times what the post passes convert a frame */
    float *planes = malloc(3 * (size_t)w * h * sizeof(float));
    if (!planes) die("out of memory", NULL);
    memcpy(planes, plate.data, 3 * (size_t)w * h * sizeof(float));
    t = now();
    ck_srgb_to_linear(planes, 3 * (size_t)w * h);
    const double t_lin = now() - t;
    t = now();
    ck_linear_to_srgb(planes, 3 * (size_t)w * h);
    const double t_srgb = now() - t;
    free(planes);
    const int S = ckey_session_size(s);
    const size_t n = (size_t)w * h, ss = (size_t)S * S;
    float *x = malloc(4 * ss * sizeof(float)), *net = malloc(4 * ss * sizeof(float));
    float *pre = malloc(ck_preprocess_scratch_floats(h, w, S) * sizeof(float));
    float *back = malloc(ck_postprocess_scratch_floats(S, h, w, CK_RESIZE_LANCZOS4) * sizeof(float));
    float *alpha = malloc(n * sizeof(float)), *fg = malloc(3 * n * sizeof(float));
    float *proc = malloc(4 * n * sizeof(float)), *comp = malloc(3 * n * sizeof(float));
    ckey_post_options po;
    ckey_post_options_default(&po);
    po.despill_strength = 0.5f;
    void *post_scratch = malloc(ckey_post_scratch_bytes(w, h, &po));
    if (!x || !net || !pre || !back || !alpha || !fg || !proc || !comp || !post_scratch) die("out of memory", NULL);
    t = now();
    if (ck_preprocess(plate.data, hint.data, h, w, S, 0, x, pre) != CKEY_OK) die("preprocess", NULL);
    const double t_pre = now() - t;
    t = now();
    ckey_forward_result r;
    if (ckey_session_forward_into(s, x, net, &r, &err) != CKEY_OK) die("forward", &err);
    const double t_model = now() - t;
    t = now();
    if (ck_postprocess(net, net + ss, S, h, w, CK_RESIZE_LANCZOS4, alpha, fg, back) != CKEY_OK) die("back", NULL);
    const double t_back = now() - t;
    t = now();
    if (ckey_post_passes(alpha, fg, w, h, &po, proc, comp, post_scratch, &err) != CKEY_OK) die("post", &err);
    const double t_post = now() - t;
    const float *data[3] = {alpha, fg, proc};
    static const int ch[3] = {1, 3, 4};
    static const char *const names[4] = {"Matte", "FG", "Processed", "Comp"};
    double t_enc[4];
    for (int k = 0; k < 3; k++) {
        fmt(p, sizeof p, "%s/%s.exr", out, names[k]);
        t = now();
        if (ckey_image_write_exr(p, data[k], ch[k], w, h, CKEY_EXR_PXR24, &err) != CKEY_OK) die(p, &err);
        t_enc[k] = now() - t;
    }
    fmt(p, sizeof p, "%s/Comp.png", out);
    t = now();
#ifdef HAVE_OPTIONS
    if (ck_image_write_png_q(p, comp, 3, w, h, 8, CK_PNG_TRUNCATE, 3, &err) != CKEY_OK) die(p, &err);
#else
    if (ck_image_write_png_q(p, comp, 3, w, h, 8, CK_PNG_TRUNCATE, &err) != CKEY_OK) die(p, &err);
#endif
    t_enc[3] = now() - t;
    printf("  stages of one frame, one thread (s):  decode %.3f  pre %.3f  model %.3f  back %.3f  post %.3f\n",
           t_decode, t_pre, t_model, t_back, t_post);
    printf("  sRGB -> linear, linear -> sRGB on the plate's 3 planes, one thread (s):  %.3f  %.3f\n", t_lin, t_srgb);
    printf("  encode + write, PXR24 deflate level 6, PNG level 3 (s):  Matte %.3f  FG %.3f  Processed %.3f  "
           "Comp %.3f  all %.3f\n",
           t_enc[0], t_enc[1], t_enc[2], t_enc[3], t_enc[0] + t_enc[1] + t_enc[2] + t_enc[3]);
#ifdef HAVE_OPTIONS
    /* this version's fastest encoders, on one thread, then on a pool */
    const ckey_exr_options fast = {CKEY_EXR_PXR24, 1};
    ck_pool *pool = NULL;
    if (ck_pool_create(o->threads, &pool, &err) != CKEY_OK) die("pool", &err);
    for (int pass = 0; pass < 2; pass++) {
        ck_pool *use = pass ? pool : NULL;
        for (int k = 0; k < 3; k++) {
            fmt(p, sizeof p, "%s/%s.exr", out, names[k]);
            t = now();
            if (ck_exr_write(NULL, use, p, data[k], ch[k], w, h, &fast, &err) != CKEY_OK) die(p, &err);
            t_enc[k] = now() - t;
        }
        fmt(p, sizeof p, "%s/Comp.png", out);
        t = now();
        if (ck_image_write_png_q(p, comp, 3, w, h, 8, CK_PNG_TRUNCATE, CK_PNG_LEVEL_RLE, &err) != CKEY_OK)
            die(p, &err);
        t_enc[3] = now() - t;
        printf("  encode + write, PXR24 level 1 (%s), PNG rle, %s (s):  Matte %.3f  FG %.3f  Processed %.3f  "
               "Comp %.3f  all %.3f\n",
               ck_exr_deflater(1), pass ? "the chunks on a pool" : "one thread", t_enc[0], t_enc[1], t_enc[2],
               t_enc[3], t_enc[0] + t_enc[1] + t_enc[2] + t_enc[3]);
    }
    po.despill_strength = 0.5f;
    t = now();
    if (ck_post_passes_pool(alpha, fg, w, h, &po, proc, comp, post_scratch, pool, &err) != CKEY_OK)
        die("post", &err);
    printf("  post on a pool of %d: %.3f s\n", ck_pool_size(pool), now() - t);
    ck_pool_free(pool);
#else
    (void)o;
    printf("  (this version has no deflate level, Comp PNG option or pool)\n");
#endif
    ckey_image_free(&plate);
    ckey_image_free(&hint);
    free(x), free(net), free(pre), free(back), free(alpha), free(fg), free(proc), free(comp), free(post_scratch);
}

/* ------------------------------------------------------- the shot */

static void shot(const bench_opts *o, ckey_session *s, const char *clip, int nthreads) {
    char plates[1024], hints[1024], out[1024];
    fmt(plates, sizeof plates, "%s/Input", clip);
    fmt(hints, sizeof hints, "%s/AlphaHint", clip);
    fmt(out, sizeof out, "%s/Output", clip);
    for (int run = 0; run < o->runs; run++) {
        ckey_error err;
        ckey_source src;
        ckey_sink sink;
        if (ckey_source_open_sequence(plates, hints, NULL, NULL, &src, &err) != CKEY_OK) die(plates, &err);
#ifdef HAVE_OPTIONS
        ckey_pass_options pso;
        ckey_pass_options_default(&pso);
        if (o->exr_level >= 0) pso.exr.level = o->exr_level;
        if (o->comp_png >= -1) pso.comp_png_level = o->comp_png;
        if (ckey_sink_open_passes_opt(out, &pso, &sink, &err) != CKEY_OK) die(out, &err);
#else
        if (ckey_sink_open_passes(out, CKEY_EXR_PXR24, &sink, &err) != CKEY_OK) die(out, &err);
#endif
        ckey_shot_options so;
        ckey_shot_options_default(&so);
        so.writers = o->writers;
#ifdef HAVE_OPTIONS
        so.readers = o->readers;
#endif
        ckey_shot_stats st;
        const double c0 = cpu_now();
        if (ckey_shot_run(s, &src, &sink, NULL, &so, NULL, NULL, &st, &err) != CKEY_OK) die("ckey_shot_run", &err);
        const double cpu = cpu_now() - c0;
        const double f = (double)st.keyed;
        printf("  shot, run %d: %lld frames in %.2f s: %.3f fps end to end; CPU %.2f s a frame (%d threads)\n",
               run + 1, (long long)st.keyed, st.seconds, f / st.seconds, cpu / f, nthreads);
#ifdef HAVE_OPTIONS
        printf("    per frame (s): decode %.3f  pre %.3f  model %.3f  back %.3f  post %.3f  sink %.3f "
               "(Matte %.3f  FG %.3f  Processed %.3f  Comp %.3f)\n",
               st.decode_seconds / f, st.pre_seconds / f, st.model_seconds / f, st.back_seconds / f,
               st.post_seconds / f, st.sink_seconds / f, st.pass_seconds[0] / f, st.pass_seconds[1] / f,
               st.pass_seconds[2] / f, st.pass_seconds[3] / f);
#else
        printf("    per frame (s): read %.3f  model %.3f  write %.3f (back, post and the sink)\n",
               st.read_seconds / f, st.model_seconds / f, st.write_seconds / f);
#endif
        ckey_sink_close(&sink);
        ckey_source_close(&src);
    }
}

int main(int argc, char **argv) {
    ckey_process_init(); /* as the ckey program runs */
    bench_opts o;
    parse(argc, argv, &o);
    ckey_error err;
    ckey_model *m = NULL;
    if (ckey_model_load(o.model, &m, &err) != CKEY_OK) die(o.model, &err);
    ckey_session_options so;
    ckey_session_options_default(&so);
    so.device = CKEY_DEVICE_CPU;
    so.size = o.size;
    so.threads = o.threads;
    ckey_session *s = NULL;
    if (ckey_session_create(m, &so, &s, &err) != CKEY_OK) die("session", &err);
    const int nthreads = o.threads > 0 ? o.threads : (int)sysconf(_SC_NPROCESSORS_ONLN);
    mkdir(o.dir, 0777);
    for (int i = 0; i < o.nsizes; i++) {
        const int w = o.sizes[i][0], h = o.sizes[i][1];
        char clip[1024];
        fmt(clip, sizeof clip, "%s/%dx%d-%d", o.dir, w, h, o.frames);
        make_clip(clip, w, h, o.frames);
        printf("%d x %d: %d frames of 8-bit PNG plates (%s), %s at S = %d on the CPU, %d threads\n", w, h,
               o.frames, clip, o.model, o.size, nthreads);
        if (o.stages) stages(&o, s, clip, w, h);
        if (o.shot) shot(&o, s, clip, nthreads);
        fflush(stdout);
    }
    ckey_session_free(s);
    ckey_model_free(m);
    return 0;
}
