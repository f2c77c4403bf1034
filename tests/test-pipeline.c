/*
 * src/pixel against torch/torchvision goldens (tests/fixtures/pipeline,
 * made by tools/reference/make_pipeline_fixtures.py), plus properties that
 * need no golden: pass splitting, invariants, argument checks.
 */
#include <stdlib.h>
#include <string.h>

#include "pixel/pixel.h"
#include "support/testutil.h"

#define CK_ARRAY_LEN_T(a) (sizeof(a) / sizeof((a)[0]))

/* Same generator as the fixture script: k / 2^24, exact in float32. */
static void gen(uint64_t seed, float *x, size_t n) {
    for (size_t i = 0; i < n; i++) {
        uint64_t h = (uint64_t)(i + 1) * 0x9E3779B97F4A7C15ull + seed * 0xBF58476D1CE4E5B9ull;
        h ^= h >> 31;
        h *= 0x94D049BB133111EBull;
        h ^= h >> 29;
        x[i] = (float)(h >> 40) / 16777216.0f;
    }
}

static float *gen_alloc(uint64_t seed, size_t n) {
    float *x = malloc(n * sizeof *x);
    if (x) gen(seed, x, n);
    return x;
}

/* Load NAME.f32 expecting exactly n floats (little-endian host assumed). */
static float *load_golden(const char *name, size_t n) {
    char path[1024];
    snprintf(path, sizeof path, "%s/pipeline/%s.f32", ck_fixtures_dir(), name);
    size_t size = 0;
    unsigned char *buf = ck_read_file(path, &size);
    if (!buf) {
        fprintf(stderr, "  cannot read %s\n", path);
        return NULL;
    }
    if (size != n * sizeof(float)) {
        fprintf(stderr, "  %s: %zu bytes, expected %zu\n", path, size, n * sizeof(float));
        free(buf);
        return NULL;
    }
    float *f = malloc(n * sizeof *f);
    if (f) memcpy(f, buf, n * sizeof *f);
    free(buf);
    return f;
}

/* Max of |got - want| / max(1, |want|): float32 ops on values up to ~8. */
static double rel_err(const char *name, const float *got, const float *want, size_t n) {
    double worst = 0;
    for (size_t i = 0; i < n; i++) {
        double d = fabs((double)got[i] - (double)want[i]);
        double s = fabs((double)want[i]);
        if (isnan(d)) d = INFINITY;
        d /= s > 1 ? s : 1;
        if (d > worst) worst = d;
    }
    ck_compare(name, got, want, n, NULL);
    return worst;
}

static FILE *open_index(void) {
    char path[1024];
    snprintf(path, sizeof path, "%s/pipeline/index.txt", ck_fixtures_dir());
    FILE *f = fopen(path, "r");
    if (!f) fprintf(stderr, "  cannot open %s\n", path);
    return f;
}

static float *resize_alloc(const float *src, int c, int ih, int iw, int oh, int ow,
                           ck_resize_mode mode) {
    size_t ns = ck_resize_scratch_floats(c, ih, iw, oh, ow, mode);
    float *scratch = malloc(ns * sizeof(float));
    float *dst = malloc((size_t)c * oh * ow * sizeof(float));
    ck_resize r;
    if (!scratch || !dst || ck_resize_prepare(&r, c, ih, iw, oh, ow, mode, scratch) != CKEY_OK) {
        free(scratch);
        free(dst);
        return NULL;
    }
    ck_resize_run(&r, src, dst);
    free(scratch);
    return dst;
}

/* ------------------------------------------------------------- goldens */

/* take on each line of the index; how many lines it took (returned 1), -1
 * without the index (checked). */
static int index_lines(int (*take)(const char *line)) {
    FILE *idx = open_index();
    CHECK(idx != NULL);
    if (!idx) return -1;
    char line[512];
    int cases = 0;
    while (fgets(line, sizeof line, idx)) cases += take(line);
    fclose(idx);
    return cases;
}

static int resize_golden(const char *line) {
    char name[128], mode[32];
    unsigned long long seed;
    int c, ih, iw, oh, ow;
    if (sscanf(line, "resize %127s %31s %llu %d %d %d %d %d", name, mode, &seed, &c, &ih, &iw, &oh, &ow) != 8)
        return 0;
    const ck_resize_mode m = strcmp(mode, "aa") == 0 ? CK_RESIZE_BILINEAR_AA : CK_RESIZE_BILINEAR;
    const size_t n = (size_t)c * oh * ow;
    float *src = gen_alloc(seed, (size_t)c * ih * iw);
    float *want = load_golden(name, n);
    float *got = src ? resize_alloc(src, c, ih, iw, oh, ow, m) : NULL;
    CHECKF(want && got, "%s", name);
    if (want && got) {
        char label[160];
        snprintf(label, sizeof label, "%s %dx%dx%d->%dx%d", name, c, ih, iw, oh, ow);
        double err = ck_compare(label, got, want, n, NULL);
        CHECKF(err <= 1e-6, "%s: max abs err %g", name, err);
    }
    free(src);
    free(want);
    free(got);
    return 1;
}

static void test_resize_goldens(void) {
    const int cases = index_lines(resize_golden);
    CHECKF(cases >= 10, "only %d resize cases in index.txt", cases);
}

static int color_golden(const char *line) {
    char fn[64];
    size_t n;
    if (sscanf(line, "color %63s %zu", fn, &n) != 2) return 0;
    float *x = load_golden("ramp.in", n);
    float *want = load_golden(fn, n);
    float *y = malloc(n * sizeof *y);
    CHECKF(x && want, "%s", fn);
    CHECK(y);
    if (x && want && y) {
        const int to_linear = strcmp(fn, "srgb_to_linear") == 0;
        for (size_t i = 0; i < n; i++) y[i] = to_linear ? ck_srgb_to_linear1(x[i]) : ck_linear_to_srgb1(x[i]);
        /* PyTorch's vectorized pow (Sleef, 1 ulp) vs libm powf */
        double err = rel_err(fn, y, want, n);
        CHECKF(err <= 5e-7, "%s: max rel err %g", fn, err);
        memcpy(y, x, n * sizeof *y);
        if (to_linear) ck_srgb_to_linear(y, n); else ck_linear_to_srgb(y, n);
        for (size_t i = 0; i < n; i++) {
            const float one = to_linear ? ck_srgb_to_linear1(x[i]) : ck_linear_to_srgb1(x[i]);
            if (memcmp(&one, &y[i], sizeof one) != 0) {
                CHECKF(0, "%s: array and scalar forms differ at %zu", fn, i);
                break;
            }
        }
    }
    free(y);
    free(x);
    free(want);
    return 1;
}

static void test_color_goldens(void) { CHECK(index_lines(color_golden) == 2); }

static int normalize_golden(const char *line) {
    char name[128];
    unsigned long long seed;
    size_t plane;
    if (sscanf(line, "normalize %127s %llu %zu", name, &seed, &plane) != 3) return 0;
    float *x = gen_alloc(seed, 3 * plane);
    float *want = load_golden(name, 3 * plane);
    CHECK(x && want);
    if (x && want) {
        ck_imagenet_normalize(x, plane);
        double err = rel_err(name, x, want, 3 * plane);
        CHECKF(err <= 2.5e-7, "%s: max rel err %g", name, err);
    }
    free(x);
    free(want);
    return 1;
}

static void test_normalize_golden(void) { CHECK(index_lines(normalize_golden) == 1); }

static int preprocess_golden(const char *line) {
    char name[128];
    unsigned long long seed;
    int h, w, size, linear;
    if (sscanf(line, "preprocess %127s %llu %d %d %d %d", name, &seed, &h, &w, &size, &linear) != 6) return 0;
    const size_t n = 4 * (size_t)size * size;
    float *rgb = gen_alloc(seed, 3 * (size_t)h * w);
    float *hint = gen_alloc(seed + 1, (size_t)h * w);
    float *want = load_golden(name, n);
    float *x = malloc(n * sizeof *x);
    size_t ns = ck_preprocess_scratch_floats(h, w, size);
    float *scratch = malloc(ns * sizeof *scratch);
    CHECK(ns > 0);
    CHECK(rgb && hint && want && x && scratch);
    if (rgb && hint && want && x && scratch) {
        CHECK(ck_preprocess(rgb, hint, h, w, size, linear, x, scratch) == CKEY_OK);
        char label[160];
        snprintf(label, sizeof label, "%s %dx%d->%d%s", name, h, w, size, linear ? " lin" : "");
        double err = rel_err(label, x, want, n);
        CHECKF(err <= 1e-6, "%s: max rel err %g", name, err);
    }
    free(rgb);
    free(hint);
    free(want);
    free(x);
    free(scratch);
    return 1;
}

static void test_preprocess_goldens(void) { CHECK(index_lines(preprocess_golden) == 3); }

static int postprocess_golden(const char *line) {
    char name[128], gname[160];
    unsigned long long seed;
    int size, h, w;
    if (sscanf(line, "postprocess %127s %llu %d %d %d", name, &seed, &size, &h, &w) != 5) return 0;
    const size_t plane = (size_t)h * w;
    float *alpha = gen_alloc(seed, (size_t)size * size);
    float *fg = gen_alloc(seed + 1, 3 * (size_t)size * size);
    snprintf(gname, sizeof gname, "%s.alpha", name);
    float *want_a = load_golden(gname, plane);
    snprintf(gname, sizeof gname, "%s.fg", name);
    float *want_f = load_golden(gname, 3 * plane);
    float *got_a = malloc(plane * sizeof *got_a);
    float *got_f = malloc(3 * plane * sizeof *got_f);
    size_t ns = ck_postprocess_scratch_floats(size, h, w, CK_RESIZE_BILINEAR_AA);
    float *scratch = malloc(ns * sizeof *scratch);
    CHECK(alpha && fg && want_a && want_f && got_a && got_f && scratch);
    if (alpha && fg && want_a && want_f && got_a && got_f && scratch) {
        CHECK(ck_postprocess(alpha, fg, size, h, w, CK_RESIZE_BILINEAR_AA, got_a, got_f, scratch) == CKEY_OK);
        double ea = ck_compare(name, got_a, want_a, plane, NULL);
        double ef = ck_compare(name, got_f, want_f, 3 * plane, NULL);
        CHECKF(ea <= 1e-6 && ef <= 1e-6, "%s: alpha %g fg %g", name, ea, ef);
    }
    free(alpha);
    free(fg);
    free(want_a);
    free(want_f);
    free(got_a);
    free(got_f);
    free(scratch);
    return 1;
}

static void test_postprocess_goldens(void) { CHECK(index_lines(postprocess_golden) == 2); }

/* ---------------------------------------------------------- properties */

/* Running the passes over arbitrary row splits gives the serial result
 * bit for bit (what a thread pool will do). */
static void test_pass_split(void) {
    const int shapes[][5] = {{3, 57, 91, 40, 33}, {2, 20, 30, 61, 17}, {1, 40, 40, 40, 90},
                             {2, 33, 64, 12, 64}, {1, 9, 9, 9, 9}};
    for (size_t k = 0; k < CK_ARRAY_LEN_T(shapes); k++) {
        for (int mode = 0; mode < 2; mode++) {
            const int c = shapes[k][0], ih = shapes[k][1], iw = shapes[k][2];
            const int oh = shapes[k][3], ow = shapes[k][4];
            float *src = gen_alloc(100 + k, (size_t)c * ih * iw);
            float *ref = resize_alloc(src, c, ih, iw, oh, ow, (ck_resize_mode)mode);
            size_t ns = ck_resize_scratch_floats(c, ih, iw, oh, ow, (ck_resize_mode)mode);
            float *scratch = malloc(ns * sizeof *scratch);
            float *dst = calloc((size_t)c * oh * ow, sizeof *dst);
            ck_resize r;
            REQUIRE(src && ref && scratch && dst);
            REQUIRE(ck_resize_prepare(&r, c, ih, iw, oh, ow, (ck_resize_mode)mode, scratch) ==
                    CKEY_OK);
            for (int p = 0; p < r.num_passes; p++) {
                int64_t rows = ck_resize_pass_rows(&r, p), step = 1 + (int64_t)(k * 3 + 2);
                /* back to front, uneven chunks */
                for (int64_t end = rows; end > 0; end -= step) {
                    int64_t begin = end - step < 0 ? 0 : end - step;
                    ck_resize_pass(&r, p, src, dst, begin, end);
                }
            }
            CHECKF(memcmp(dst, ref, (size_t)c * oh * ow * sizeof *dst) == 0,
                   "shape %zu mode %d: split passes differ", k, mode);
            free(src);
            free(ref);
            free(scratch);
            free(dst);
        }
    }
}

/* A constant image stays constant (weights sum to one after normalizing). */
static void test_constant(void) {
    const int c = 2, ih = 123, iw = 77, oh = 16, ow = 200;
    float *src = malloc((size_t)c * ih * iw * sizeof *src);
    REQUIRE(src);
    for (int i = 0; i < c * ih * iw; i++) src[i] = 0.7f;
    for (int mode = 0; mode < 2; mode++) {
        float *dst = resize_alloc(src, c, ih, iw, oh, ow, (ck_resize_mode)mode);
        REQUIRE(dst);
        double worst = 0;
        for (int i = 0; i < c * oh * ow; i++) worst = fmax(worst, fabs(dst[i] - 0.7));
        CHECKF(worst < 2e-7, "mode %d: constant drifts by %g", mode, worst);
        free(dst);
    }
    free(src);
}

static void test_bad_args(void) {
    CHECK(ck_resize_scratch_floats(0, 4, 4, 4, 4, CK_RESIZE_BILINEAR_AA) == 0);
    CHECK(ck_resize_scratch_floats(1, -4, 4, 4, 4, CK_RESIZE_BILINEAR_AA) == 0);
    CHECK(ck_resize_scratch_floats(1, 4, 4, 4, CK_RESIZE_MAX_SIDE + 1, CK_RESIZE_BILINEAR) == 0);
    CHECK(ck_resize_scratch_floats(1, 4, 4, 4, 4, (ck_resize_mode)7) == 0);
    float scratch[64];
    ck_resize r;
    CHECK(ck_resize_prepare(&r, 1, 4, 0, 4, 4, CK_RESIZE_BILINEAR, scratch) == CKEY_ERR_INVALID_ARG);
    CHECK(ck_resize_prepare(&r, 1, 4, 4, 4, 4, CK_RESIZE_BILINEAR, NULL) == CKEY_ERR_INVALID_ARG);
    CHECK(ck_preprocess_scratch_floats(0, 10, 64) == 0);
    CHECK(ck_postprocess_scratch_floats(64, 10, 0, CK_RESIZE_BILINEAR_AA) == 0);
    CHECK(ck_postprocess_scratch_floats(64, 10, 10, CK_RESIZE_BILINEAR) == 0);
    /* An extreme downscale stays bounded: taps grow with the ratio, tables
     * with the output. */
    size_t n = ck_resize_scratch_floats(1, 1, 100000, 1, 1, CK_RESIZE_BILINEAR_AA);
    CHECKF(n > 0 && n < 300000, "%zu", n);
}

static void test_srgb_roundtrip(void) {
    double worst = 0;
    for (int i = 0; i <= 1000; i++) {
        float v = (float)i / 1000.0f;
        worst = fmax(worst, fabs(ck_srgb_to_linear1(ck_linear_to_srgb1(v)) - v));
    }
    printf("  srgb round trip on [0,1]: max abs err %.3g\n", worst);
    CHECK(worst < 1e-6);
    CHECK(ck_linear_to_srgb1(-1.0f) == 0.0f);
    CHECK(ck_srgb_to_linear1(-0.25f) == 0.0f);
    CHECK(isnan(ck_linear_to_srgb1(NAN)));
}

int main(int argc, char **argv) {
    static const ck_test_case cases[] = {
        {"resize_goldens", test_resize_goldens},
        {"color_goldens", test_color_goldens},
        {"normalize_golden", test_normalize_golden},
        {"preprocess_goldens", test_preprocess_goldens},
        {"postprocess_goldens", test_postprocess_goldens},
        {"pass_split", test_pass_split},
        {"constant", test_constant},
        {"bad_args", test_bad_args},
        {"srgb_roundtrip", test_srgb_roundtrip},
    };
    return ck_test_main(cases, (int)CK_ARRAY_LEN_T(cases), argc, argv);
}
