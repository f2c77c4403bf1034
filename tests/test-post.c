/*
 * src/pixel/post.c: hand-computed values and properties that need no
 * golden (despill formula, component filtering, OpenCV's ellipse and Q8
 * Gaussian weights, reflect-101 borders, checkerboard layout, a whole frame).
 * Parity with upstream's cv2 / numpy / torch code: the goldens of
 * tests/fixtures/post (tools/reference/make_post_fixtures.py): the OpenCV
 * post-processing, both despeckle implementations and cv2's Lanczos4 resize.
 */
#include <math.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "core/core.h"
#include "pixel/pixel.h"
#include "pixel/post.h"
#include "support/testutil.h"

#define CK_ARRAY_LEN_T(a) (sizeof(a) / sizeof((a)[0]))

/* ----------------------------------------------------------------- despill */

static void test_despill_known(void) {
    /* Values exact in binary so the expected results are exact too:
     * limit = (0.25 + 0.5) / 2 = 0.375, spill = 0.75 - 0.375 = 0.375. */
    float px[6] = {0.25f, 0.5f, 0.75f, 0.2f, 0.5f, 0.3f}; /* r r g g b b */
    ck_despill(px, 2, 1.0);
    CHECKF(px[0] == 0.4375f, "r %g", px[0]);
    CHECKF(px[2] == 0.375f, "g %g", px[2]);
    CHECKF(px[4] == 0.6875f, "b %g", px[4]);
    /* second pixel: g 0.2 < (0.5 + 0.3) / 2, no spill, untouched */
    CHECK(px[1] == 0.5f && px[3] == 0.2f && px[5] == 0.3f);

    /* strength 0.5 blends half way: r 0.34375, g 0.5625, b 0.59375 */
    float half[3] = {0.25f, 0.75f, 0.5f};
    ck_despill(half, 1, 0.5);
    CHECKF(half[0] == 0.34375f && half[1] == 0.5625f && half[2] == 0.59375f, "%g %g %g",
           half[0], half[1], half[2]);

    /* strength <= 0 returns the input as is, even with spill */
    float none[3] = {0.1f, 0.9f, 0.1f};
    ck_despill(none, 1, 0.0);
    CHECK(none[0] == 0.1f && none[1] == 0.9f && none[2] == 0.1f);

    /* strength 1: green never exceeds the red/blue average afterwards, and
     * r + g + b is preserved (spill moves from g to r and b). */
    float rnd[3 * 64];
    for (int i = 0; i < 64; i++) {
        rnd[i] = (float)((i * 37) % 64) / 64.0f;
        rnd[64 + i] = (float)((i * 11 + 5) % 64) / 64.0f;
        rnd[128 + i] = (float)((i * 23 + 9) % 64) / 64.0f;
    }
    float before[3 * 64];
    memcpy(before, rnd, sizeof rnd);
    ck_despill(rnd, 64, 1.0);
    for (int i = 0; i < 64; i++) {
        CHECK(rnd[64 + i] <= (rnd[i] + rnd[128 + i]) / 2.0f + 1e-6f);
        float s0 = before[i] + before[64 + i] + before[128 + i];
        float s1 = rnd[i] + rnd[64 + i] + rnd[128 + i];
        CHECK(fabsf(s0 - s1) < 1e-6f);
    }
}

/* ---------------------------------------------------- connected components */

static int32_t filter(uint8_t *m, int32_t h, int32_t w, int conn, int64_t min_area) {
    void *s = malloc(ck_components_scratch_bytes(h, w));
    if (!s) return -2;
    int32_t n = ck_components_filter(m, h, w, conn, min_area, s);
    free(s);
    return n;
}

static int count_set(const uint8_t *m, size_t n) {
    int c = 0;
    for (size_t i = 0; i < n; i++) c += m[i] != 0;
    return c;
}

static void test_components(void) {
    enum { H = 8, W = 8 };
    uint8_t m[H * W];

    /* a 3x3 blob (area 9): removed at threshold 10, kept at 9 */
    for (int thr = 9; thr <= 10; thr++) {
        memset(m, 0, sizeof m);
        for (int y = 2; y < 5; y++)
            for (int x = 3; x < 6; x++) m[y * W + x] = 1;
        CHECK(filter(m, H, W, 8, thr) == 1);
        CHECKF(count_set(m, sizeof m) == (thr == 9 ? 9 : 0), "thr %d: %d set", thr,
               count_set(m, sizeof m));
        if (thr == 9) CHECK(m[3 * W + 4] == 255);
    }

    /* two diagonal pixels: one component of area 2 with 8-connectivity (the
     * official setting), two of area 1 with 4-connectivity */
    memset(m, 0, sizeof m);
    m[1 * W + 1] = m[2 * W + 2] = 1;
    CHECK(filter(m, H, W, 8, 2) == 1);
    CHECK(count_set(m, sizeof m) == 2);
    memset(m, 0, sizeof m);
    m[1 * W + 1] = m[2 * W + 2] = 1;
    CHECK(filter(m, H, W, 4, 2) == 2);
    CHECK(count_set(m, sizeof m) == 0);

    /* anti-diagonal (joined only through the NE neighbour) */
    memset(m, 0, sizeof m);
    m[1 * W + 5] = m[2 * W + 4] = m[3 * W + 3] = 1;
    CHECK(filter(m, H, W, 8, 3) == 1);
    CHECK(count_set(m, sizeof m) == 3);

    /* a U whose arms get different provisional labels and merge at the
     * bottom: one component of area 3 + 3 + 3 = 9 (kept at 9), plus an
     * isolated pixel that goes */
    memset(m, 0, sizeof m);
    for (int y = 0; y < 4; y++) m[y * W + 1] = m[y * W + 5] = 1;  /* 8 */
    for (int x = 2; x < 5; x++) m[3 * W + x] = 1;                 /* +3 = 11 */
    m[7 * W + 7] = 1;
    CHECK(filter(m, H, W, 8, 11) == 2);
    CHECKF(count_set(m, sizeof m) == 11, "%d", count_set(m, sizeof m));
    CHECK(m[7 * W + 7] == 0 && m[0] == 0 && m[1] == 255 && m[5] == 255);

    /* worst case for the label table: a full checkerboard under
     * 4-connectivity gives one label per set pixel */
    enum { BH = 9, BW = 7 };
    uint8_t b[BH * BW];
    int set = 0;
    for (int y = 0; y < BH; y++)
        for (int x = 0; x < BW; x++) set += (b[y * BW + x] = (uint8_t)((x + y) % 2 == 0));
    CHECK(filter(b, BH, BW, 4, 1) == set);
    CHECK(count_set(b, sizeof b) == set);
    for (int y = 0; y < BH; y++)
        for (int x = 0; x < BW; x++) b[y * BW + x] = (uint8_t)((x + y) % 2 == 0);
    CHECK(filter(b, BH, BW, 8, 1) == 1); /* all joined diagonally */

    CHECK(ck_components_filter(m, H, W, 6, 1, b) == -1);
}

/* The strips of ck_components_filter_pool against one strip on the caller:
 * the same count and the same mask, bit for bit, for masks whose components
 * cross the strips' edges in every way (vertical runs, diagonals that join
 * only through NW / NE, a checkerboard that fills the label table, random
 * noise of several densities), at sizes that give full and short strips. */
static void test_components_strips(void) {
    ck_pool *pool = NULL;
    ckey_error err;
    REQUIRE(ck_pool_create(4, &pool, &err) == CKEY_OK);
    static const int32_t sizes[][2] = {{128, 5}, {200, 97}, {1031, 61}, {4160, 33}, {64, 300}, {129, 1}};
    uint64_t rng = 0x9e3779b97f4a7c15ull;
    int cases = 0;
    for (size_t si = 0; si < sizeof sizes / sizeof sizes[0]; si++) {
        const int32_t h = sizes[si][0], w = sizes[si][1];
        const size_t n = (size_t)h * w;
        uint8_t *a = malloc(n), *b = malloc(n);
        void *sa = malloc(ck_components_scratch_bytes(h, w)), *sb = malloc(ck_components_scratch_bytes(h, w));
        REQUIRE(a && b && sa && sb);
        for (int kind = 0; kind < 7; kind++) {
            ck_cc_test_mask(a, h, w, kind, &rng);
            for (int conn = 4; conn <= 8; conn += 4)
                for (int64_t area = 1; area <= 400; area *= 20) {
                    memcpy(b, a, n);
                    uint8_t *m = malloc(n);
                    REQUIRE(m);
                    memcpy(m, a, n);
                    const int32_t ca = ck_components_filter(m, h, w, conn, area, sa);
                    const int32_t cb = ck_components_filter_pool(b, h, w, conn, area, sb, pool);
                    CHECKF(ca == cb && ca >= 0 && !memcmp(m, b, n),
                           "%dx%d kind %d conn %d area %lld: %d vs %d components, masks %s", h, w, kind, conn,
                           (long long)area, ca, cb, memcmp(m, b, n) ? "differ" : "equal");
                    if (kind == 0) CHECKF(ca == 1 && m[(size_t)(h - 1) * w + w / 2] == (area <= h ? 255 : 0),
                                          "%dx%d: the column is one component", h, w);
                    free(m);
                    cases++;
                }
        }
        free(a), free(b), free(sa), free(sb);
    }
    printf("  %d masks: strips on 4 threads == one strip\n", cases);
    ck_pool_free(pool);
}

/* ---------------------------------------------------- ellipse and dilation */

static void test_ellipse(void) {
    int32_t dx[51];
    ck_ellipse_halfwidths(25, dx);
    /* dx = round(sqrt(625 - dy^2)): dy 25 -> 0, 24 -> 7, 20 -> 15, 15 -> 20,
     * 7 -> 24, 0 -> 25 */
    CHECK(dx[0] == 0 && dx[50] == 0);
    CHECK(dx[1] == 7 && dx[49] == 7);
    CHECK(dx[5] == 15 && dx[10] == 20 && dx[18] == 24 && dx[25] == 25);
    int32_t d1[3], d2[5];
    ck_ellipse_halfwidths(1, d1); /* 3x3 ellipse is a cross */
    CHECK(d1[0] == 0 && d1[1] == 1 && d1[2] == 0);
    ck_ellipse_halfwidths(2, d2); /* round(sqrt(3)) = 2 */
    CHECK(d2[0] == 0 && d2[1] == 2 && d2[2] == 2 && d2[3] == 2 && d2[4] == 0);

    /* one pixel dilated by the official radius: the footprint is exactly the
     * kernel; near a corner it is clipped, never wrapped */
    enum { H = 60, W = 70 };
    uint8_t *m = calloc(H * W, 1);
    int32_t *dist = malloc(sizeof *dist * H * W);
    REQUIRE(m && dist);
    m[30 * W + 35] = 255;
    ck_dilate_ellipse(m, m, H, W, 25, dist);
    int area = 0;
    for (int i = 0; i < 51; i++) area += 2 * dx[i] + 1;
    CHECKF(count_set(m, H * W) == area, "%d vs %d", count_set(m, H * W), area);
    CHECK(m[5 * W + 35] == 255 && m[4 * W + 35] == 0 && m[5 * W + 36] == 0);
    CHECK(m[6 * W + 35 + 7] == 255 && m[6 * W + 35 + 8] == 0); /* dy -24: +-7 */
    CHECK(m[30 * W + 10] == 255 && m[30 * W + 9] == 0);
    memset(m, 0, H * W);
    m[0] = 255;
    ck_dilate_ellipse(m, m, H, W, 25, dist);
    int quarter = 0;
    for (int i = 25; i < 51; i++) quarter += dx[i] + 1;
    CHECK(count_set(m, H * W) == quarter);
    CHECK(m[W - 1] == 0 && m[(H - 1) * W] == 0);
    free(m);
    free(dist);
}

/* ------------------------------------------------------------ Gaussian blur */

static void test_gaussian_kernel(void) {
    uint32_t k[11];
    REQUIRE(ck_gaussian_kernel_q8(11, 0, k) == 0);
    /* sigma = 0.3 * ((11 - 1) * 0.5 - 1) + 0.8 = 2.0. Weights exp(-x^2/8) for
     * x = 5..1: 0.04394 0.13534 0.32465 0.60653 0.88250, sum with the centre
     * 1: 4.98592; times 256: 2.256 6.949 16.669 31.142 45.311. Error
     * diffusion: 2 (+.256) 7 (+.205) 17 (-.126) 31 (+.016) 45; the centre
     * takes 256 - 2 * 102 = 52 (plain rounding would give 51 and sum 255). */
    static const uint32_t want[11] = {2, 7, 17, 31, 45, 52, 45, 31, 17, 7, 2};
    uint32_t sum = 0;
    for (int i = 0; i < 11; i++) {
        CHECKF(k[i] == want[i], "tap %d: %u vs %u", i, k[i], want[i]);
        sum += k[i];
    }
    CHECK(sum == 256);
    /* the same numbers from the formula, within one Q8 step */
    double s = 0.3 * ((11 - 1) * 0.5 - 1) + 0.8, tot = 0, g[11];
    CHECK(fabs(s - 2.0) < 1e-12);
    for (int i = 0; i < 11; i++) tot += g[i] = exp(-(double)(i - 5) * (i - 5) / (2 * s * s));
    for (int i = 0; i < 11; i++) CHECK(fabs(g[i] / tot * 256.0 - k[i]) <= 1.0);

    uint32_t k3[3], k7[7];
    REQUIRE(ck_gaussian_kernel_q8(3, 0, k3) == 0 && ck_gaussian_kernel_q8(7, 0, k7) == 0);
    CHECK(k3[0] == 64 && k3[1] == 128 && k3[2] == 64);
    CHECK(k7[0] == 8 && k7[3] == 72);
    CHECK(ck_gaussian_kernel_q8(4, 0, k) == -1 && ck_gaussian_kernel_q8(0, 0, k) == -1);
}

static void test_blur_border(void) {
    uint32_t tmp[25];
    /* 1 x 5 row, kernel [64 128 64] / 256 along x (one row: no vertical
     * blur). Reflect-101 mirrors x = 5 to x = 3, so the last pixel gets
     * 255 * 128/256 = 127.5 -> 128 (round half up); BORDER_REFLECT would
     * mirror onto itself and give 191. */
    uint8_t row[5] = {0, 0, 0, 0, 255}, out[5];
    ck_gaussian_blur_u8(row, out, 1, 5, 3, 0, tmp);
    CHECKF(out[4] == 128 && out[3] == 64 && out[2] == 0 && out[0] == 0, "%u %u %u %u %u",
           out[0], out[1], out[2], out[3], out[4]);

    /* 5 x 5 with 255 at the corner: corner = 255 * (128/256)^2 = 63.75 -> 64,
     * (0,1) = 255 * (128 * 64) / 65536 = 31.9 -> 32,
     * (1,1) = 255 * (64 * 64) / 65536 = 15.9 -> 16; in place */
    uint8_t img[25] = {0};
    img[0] = 255;
    ck_gaussian_blur_u8(img, img, 5, 5, 3, 0, tmp);
    CHECKF(img[0] == 64 && img[1] == 32 && img[5] == 32 && img[6] == 16 && img[2] == 0,
           "%u %u %u %u", img[0], img[1], img[5], img[6]);

    /* a flat image stays flat under the official 11-tap kernel, even when it
     * is narrower than the kernel (repeated reflection) */
    uint8_t flat[4 * 3];
    memset(flat, 200, sizeof flat);
    ck_gaussian_blur_u8(flat, flat, 4, 3, 11, 0, tmp);
    for (int i = 0; i < 12; i++) CHECK(flat[i] == 200);
}

/* ------------------------------------------------------------- comp pieces */

static void test_checker_and_comp(void) {
    CHECK(ck_checker_srgb(0, 0) == 0.15f && ck_checker_srgb(127, 127) == 0.15f);
    CHECK(ck_checker_srgb(0, 128) == 0.55f && ck_checker_srgb(128, 0) == 0.55f);
    CHECK(ck_checker_srgb(128, 128) == 0.15f && ck_checker_srgb(255, 383) == 0.55f);
    CHECK(ck_composite_straight1(0.5f, 0.25f, 0.5f) == 0.375f);
    CHECK(ck_composite_straight1(0.8f, 0.1f, 1.0f) == 0.8f);
    CHECK(ck_composite_straight1(0.8f, 0.1f, 0.0f) == 0.1f);

    /* a 130 x 130 frame: fully transparent shows the checkerboard (linear
     * round trip back to sRGB); an opaque grey pixel premultiplies to
     * srgb_to_linear(0.5) = 0.2140411 */
    enum { H = 130, W = 130, N = H * W };
    float *alpha = calloc(N, sizeof *alpha), *fg = malloc(sizeof *fg * 3 * N);
    float *proc = malloc(sizeof *proc * 4 * N), *comp = malloc(sizeof *comp * 3 * N);
    REQUIRE(alpha && fg && proc && comp);
    for (int i = 0; i < 3 * N; i++) fg[i] = 0.5f;
    alpha[1 * W + 1] = 1.0f;
    alpha[2 * W + 2] = 0.25f;
    ck_post_options o;
    ck_post_options_default(&o);
    o.despeckle = 0;
    CHECK(ck_post_frame_scratch_bytes(H, W, &o) == 0);
    REQUIRE(ck_post_frame(alpha, fg, H, W, &o, NULL, NULL, proc, comp, NULL) == CKEY_OK);
    CHECK(fabsf(comp[0] - 0.15f) < 1e-6f);
    CHECK(fabsf(comp[128] - 0.55f) < 1e-6f);
    CHECK(fabsf(comp[128 * W] - 0.55f) < 1e-6f);
    CHECK(fabsf(comp[128 * W + 128] - 0.15f) < 1e-6f);
    CHECK(fabsf(comp[2 * N + 129 * W + 129] - 0.15f) < 1e-6f);
    size_t p = 1 * W + 1;
    for (int c = 0; c < 3; c++) {
        CHECKF(fabsf(proc[c * N + p] - 0.2140411f) < 1e-6f, "%g", proc[c * N + p]);
        CHECK(fabsf(comp[c * N + p] - 0.5f) < 1e-6f);
    }
    CHECK(proc[3 * N + p] == 1.0f && proc[0] == 0.0f && proc[3 * N] == 0.0f);
    /* alpha 0.25 over the dark square: premultiplied = lin * 0.25 and the
     * comp is the linear mix taken back to sRGB */
    size_t q = 2 * W + 2;
    float lin = ck_srgb_to_linear1(0.5f), bg = ck_srgb_to_linear1(0.15f);
    CHECK(proc[q] == lin * 0.25f && proc[3 * N + q] == 0.25f);
    CHECK(comp[q] == ck_linear_to_srgb1(lin * 0.25f + bg * 0.75f));
    free(alpha);
    free(fg);
    free(proc);
    free(comp);
}

/* ------------------------------------------------------------- whole frame */

static void test_frame(void) {
    enum { H = 48, W = 64, N = H * W };
    float *alpha = malloc(sizeof(float) * N), *fg = malloc(sizeof(float) * 3 * N);
    float *matte = malloc(sizeof(float) * N), *fgo = malloc(sizeof(float) * 3 * N);
    float *proc = malloc(sizeof(float) * 4 * N), *comp = malloc(sizeof(float) * 3 * N);
    ck_post_options o;
    ck_post_options_default(&o);
    CHECK(o.despill_strength == 1.0 && o.despeckle && o.despeckle_area == 400);
    void *scratch = malloc(ck_post_frame_scratch_bytes(H, W, &o));
    REQUIRE(alpha && fg && matte && fgo && proc && comp && scratch);

    /* a 22x22 subject (area 484 >= 400) at the top-left with a soft ramp to
     * its right, a 3x3 speck (area 9) at the bottom-right, more than the
     * dilation + blur reach (25 + 5) away; greenish fg with spill */
    for (int y = 0; y < H; y++)
        for (int x = 0; x < W; x++) {
            float a = 0.0f;
            if (y < 22 && x < 22) a = 1.0f;
            else if (y < 22 && x < 26) a = 0.4f - 0.1f * (float)(x - 22);
            if (y >= 42 && y < 45 && x >= 58 && x < 61) a = 0.9f;
            int i = y * W + x;
            alpha[i] = a;
            fg[i] = 0.3f + 0.005f * (float)x;
            fg[N + i] = 0.8f;
            fg[2 * N + i] = 0.2f + 0.005f * (float)y;
        }
    REQUIRE(ck_post_frame(alpha, fg, H, W, &o, matte, fgo, proc, comp, scratch) == CKEY_OK);

    const float *pa = proc + 3 * N;
    /* speck gone, subject kept (interior safe zone is 255/255 = 1 exactly) */
    CHECKF(pa[43 * W + 59] == 0.0f, "%g", pa[43 * W + 59]);
    CHECK(pa[10 * W + 10] == 1.0f && pa[0] == 1.0f);
    /* the ramp below the threshold survives inside the dilated zone */
    CHECK(pa[5 * W + 23] > 0.29f && pa[5 * W + 23] <= 0.3f);
    /* Matte/ and FG/ are the raw prediction, as upstream */
    CHECK(memcmp(matte, alpha, sizeof(float) * N) == 0);
    CHECK(memcmp(fgo, fg, sizeof(float) * 3 * N) == 0);

    int bad = 0;
    for (int i = 0; i < N; i++) {
        if (!(pa[i] >= 0.0f && pa[i] <= alpha[i])) bad++;
        for (int c = 0; c < 3; c++) {
            float v = proc[c * N + i], k = comp[c * N + i];
            if (!(v >= 0.0f && v <= pa[i] * 1.0001f)) bad++;
            if (!(k >= 0.0f && k <= 1.0f)) bad++;
        }
        /* despilled at strength 1: in linear light, green still <= the
         * linearized red/blue average's upper bound max(r, b) */
        if (pa[i] > 0.0f && proc[N + i] > fmaxf(proc[i], proc[2 * N + i]) * 1.0001f) bad++;
    }
    CHECKF(bad == 0, "%d out-of-range values", bad);

    /* despeckle off: the speck stays; processed alpha equals the raw one */
    o.despeckle = 0;
    REQUIRE(ck_post_frame(alpha, fg, H, W, &o, NULL, NULL, proc, NULL, NULL) == CKEY_OK);
    CHECK(memcmp(pa, alpha, sizeof(float) * N) == 0);

    /* threshold 9 keeps the speck (area 9 >= 9) */
    o.despeckle = 1;
    o.despeckle_area = 9;
    REQUIRE(ck_post_frame(alpha, fg, H, W, &o, NULL, NULL, proc, NULL, scratch) == CKEY_OK);
    CHECK(pa[43 * W + 59] == 0.9f);

    /* bad arguments */
    CHECK(ck_post_frame(alpha, fg, H, W, &o, NULL, NULL, NULL, NULL, scratch) == CKEY_ERR_INVALID_ARG);
    CHECK(ck_post_frame(alpha, fg, H, W, &o, NULL, NULL, proc, NULL, NULL) == CKEY_ERR_INVALID_ARG);
    CHECK(ck_post_frame(alpha, fg, 0, W, &o, NULL, NULL, proc, NULL, scratch) == CKEY_ERR_INVALID_ARG);
    CHECK(ck_components_scratch_bytes(-1, 4) == 0);

    free(alpha);
    free(fg);
    free(matte);
    free(fgo);
    free(proc);
    free(comp);
    free(scratch);
}

/* ------------------------------------------------ parity with the goldens */

static FILE *post_index(void) {
    char path[1024];
    snprintf(path, sizeof path, "%s/post/index.txt", ck_fixtures_dir());
    FILE *f = fopen(path, "r");
    if (!f) fprintf(stderr, "  cannot open %s\n", path);
    return f;
}

/* A fixture file of exactly `bytes` bytes (malloc'd), or NULL. */
static void *post_file(const char *name, const char *suffix, size_t bytes) {
    char path[1024];
    snprintf(path, sizeof path, "%s/post/%s.%s", ck_fixtures_dir(), name, suffix);
    size_t size = 0;
    unsigned char *buf = ck_read_file(path, &size);
    if (!buf) {
        fprintf(stderr, "  cannot read %s\n", path);
        return NULL;
    }
    if (size != bytes) {
        fprintf(stderr, "  %s: %zu bytes, expected %zu\n", path, size, bytes);
        free(buf);
        return NULL;
    }
    return buf;
}

/* Inputs are uint16 codes: value = (u - 2048) / 61439 in float32, the same
 * expression the generator evaluates. */
static float *post_input(const char *name, const char *suffix, size_t n) {
    uint16_t *u = post_file(name, suffix, n * sizeof(uint16_t));
    float *f = u ? malloc(n * sizeof *f) : NULL;
    if (f)
        for (size_t i = 0; i < n; i++) f[i] = ((float)u[i] - 2048.0f) / 61439.0f;
    free(u);
    return f;
}

/* Bars (tests/fixtures/README.md): mattes exact or <= 1e-6, colours <= 1e-5. */
static void test_parity_post(void) {
    FILE *idx = post_index();
    REQUIRE(idx);
    char line[256];
    int cases = 0;
    while (fgets(line, sizeof line, idx)) {
        char name[64];
        int h, w, desp;
        double strength;
        long long area;
        if (sscanf(line, "post %63s %d %d %lf %d %lld", name, &h, &w, &strength, &desp, &area) != 6)
            continue;
        const size_t n = (size_t)h * w;
        float *in = post_input(name, "in.u16", 4 * n);
        float *want_p = post_file(name, "processed.f32", 4 * n * sizeof(float));
        float *want_c = post_file(name, "comp.f32", 3 * n * sizeof(float));
        float *proc = malloc(4 * n * sizeof *proc), *comp = malloc(3 * n * sizeof *comp);
        ck_post_options o;
        ck_post_options_default(&o);
        o.despill_strength = strength;
        o.despeckle = desp;
        o.despeckle_area = area;
        void *scratch = malloc(ck_post_frame_scratch_bytes(h, w, &o) + 1);
        CHECK(in && want_p && want_c && proc && comp && scratch);
        if (in && want_p && want_c && proc && comp && scratch) {
            CHECK(ck_post_frame(in, in + n, h, w, &o, NULL, NULL, proc, comp, scratch) == CKEY_OK);
            char label[96];
            snprintf(label, sizeof label, "%s processed alpha", name);
            const double ea = ck_compare(label, proc + 3 * n, want_p + 3 * n, n, NULL);
            snprintf(label, sizeof label, "%s processed rgb", name);
            const double ep = ck_compare(label, proc, want_p, 3 * n, NULL);
            snprintf(label, sizeof label, "%s comp", name);
            const double ec = ck_compare(label, comp, want_c, 3 * n, NULL);
            CHECKF(ea <= 1e-6 && ep <= 1e-5 && ec <= 1e-5, "%s: alpha %g rgb %g comp %g", name, ea, ep, ec);
        }
        free(in);
        free(want_p);
        free(want_c);
        free(proc);
        free(comp);
        free(scratch);
        cases++;
    }
    fclose(idx);
    CHECKF(cases == 4, "%d post cases", cases);
}

static void test_parity_despeckle(void) {
    FILE *idx = post_index();
    REQUIRE(idx);
    char line[256];
    int cases = 0, torch_cases = 0;
    while (fgets(line, sizeof line, idx)) {
        char name[64], mode[16];
        int h, w;
        long long area;
        if (sscanf(line, "despeckle %63s %d %d %15s %lld", name, &h, &w, mode, &area) != 5) continue;
        const size_t n = (size_t)h * w;
        const int torch = !strcmp(mode, "torch");
        float *alpha = post_input(name, "alpha.u16", n);
        float *want = post_file(name, "out.f32", n * sizeof(float));
        uint32_t *labels = torch ? post_file(name, "labels.u32", n * sizeof(uint32_t)) : NULL;
        float *got = malloc(n * sizeof *got);
        const size_t sb = torch ? ck_clean_matte_torch_scratch_bytes(h, w) : ck_clean_matte_scratch_bytes(h, w);
        void *scratch = malloc(sb);
        CHECK(alpha && want && got && scratch && (labels || !torch));
        if (alpha && want && got && scratch && (labels || !torch)) {
            ckey_status st = torch ? ck_clean_matte_torch(alpha, got, h, w, area, CK_DESPECKLE_DILATION,
                                                          CK_DESPECKLE_BLUR, labels, scratch)
                                   : ck_clean_matte(alpha, got, h, w, area, CK_DESPECKLE_DILATION,
                                                    CK_DESPECKLE_BLUR, scratch);
            CHECK(st == CKEY_OK);
            char label[96];
            snprintf(label, sizeof label, "%s (%s)", name, mode);
            /* OpenCV's path is integer up to the last multiply: exact. The
             * torch path's float blur sums in another order than torch's
             * conv2d: a few ulps. */
            const double e = ck_compare(label, got, want, n, NULL);
            CHECKF(torch ? e <= 1e-6 : e == 0.0, "%s: %g", name, e);
            if (torch) {
                /* with ckey's own labels instead of torch's permutation,
                 * every component the rounds fully label gives the same
                 * answer; report how much of the matte differs */
                float *own = malloc(n * sizeof *own);
                REQUIRE(own);
                CHECK(ck_clean_matte_torch(alpha, own, h, w, area, CK_DESPECKLE_DILATION, CK_DESPECKLE_BLUR,
                                           NULL, scratch) == CKEY_OK);
                snprintf(label, sizeof label, "%s (own labels)", name);
                ck_compare(label, own, want, n, NULL);
                free(own);
                torch_cases++;
            }
        }
        free(alpha);
        free(want);
        free(labels);
        free(got);
        free(scratch);
        cases++;
    }
    fclose(idx);
    CHECKF(cases == 4 && torch_cases == 3, "%d despeckle cases, %d torch", cases, torch_cases);
}

static void test_parity_lanczos(void) {
    FILE *idx = post_index();
    REQUIRE(idx);
    char line[256];
    int cases = 0;
    while (fgets(line, sizeof line, idx)) {
        char name[64];
        int c, ih, iw, oh, ow;
        if (sscanf(line, "lanczos %63s %d %d %d %d %d", name, &c, &ih, &iw, &oh, &ow) != 6) continue;
        const size_t ni = (size_t)c * ih * iw, no = (size_t)c * oh * ow;
        float *in = post_input(name, "in.u16", ni);
        float *want = post_file(name, "out.f32", no * sizeof(float));
        float *got = malloc(no * sizeof *got);
        const size_t ns = ck_resize_scratch_floats(c, ih, iw, oh, ow, CK_RESIZE_LANCZOS4);
        float *scratch = malloc(ns * sizeof *scratch);
        CHECK(in && want && got && scratch && ns);
        if (in && want && got && scratch) {
            ck_resize r;
            CHECK(ck_resize_prepare(&r, c, ih, iw, oh, ow, CK_RESIZE_LANCZOS4, scratch) == CKEY_OK);
            ck_resize_run(&r, in, got);
            char label[96];
            snprintf(label, sizeof label, "%s %dx%dx%d->%dx%d", name, c, ih, iw, oh, ow);
            double mean;
            const double e = ck_compare(label, got, want, no, &mean);
            size_t exact = 0;
            for (size_t i = 0; i < no; i++) exact += got[i] == want[i];
            printf("    bit-exact %.1f%%\n", 100.0 * (double)exact / (double)no);
            /* cv2 sums its taps in an order not fully reproduced here (see
             * resize.c): a few float ulps of 1, far inside the matte bar */
            CHECKF(e <= 1e-6, "%s: %g", name, e);
        }
        free(in);
        free(want);
        free(got);
        free(scratch);
        cases++;
    }
    fclose(idx);
    CHECKF(cases == 4, "%d lanczos cases", cases);
}

static void test_lanczos_properties(void) {
    /* Same size: a copy. A constant image stays constant within rounding
     * (weights sum to 1). Upscaling by an integer factor hits source pixels
     * exactly every other output when the phase is 0. */
    enum { H = 6, W = 7 };
    float img[H * W], out[4 * H * W], scratch[4096];
    for (int i = 0; i < H * W; i++) img[i] = (float)(i % 5) * 0.25f;
    ck_resize r;
    REQUIRE(ck_resize_scratch_floats(1, H, W, H, W, CK_RESIZE_LANCZOS4) <= 4096);
    REQUIRE(ck_resize_prepare(&r, 1, H, W, H, W, CK_RESIZE_LANCZOS4, scratch) == CKEY_OK);
    CHECK(r.num_passes == 1);
    ck_resize_run(&r, img, out);
    CHECK(memcmp(img, out, sizeof img) == 0);

    for (int i = 0; i < H * W; i++) img[i] = 0.625f;
    REQUIRE(ck_resize_prepare(&r, 1, H, W, 2 * H + 1, 3, CK_RESIZE_LANCZOS4, scratch) == CKEY_OK);
    ck_resize_run(&r, img, out);
    for (int i = 0; i < (2 * H + 1) * 3; i++) CHECKF(fabsf(out[i] - 0.625f) < 1e-6f, "%d: %g", i, out[i]);

    /* a step edge rings: Lanczos overshoots above the top value (what makes
     * upstream's Matte slightly exceed [0, 1] near hard edges) */
    float step[16], up[64];
    for (int i = 0; i < 16; i++) step[i] = i < 8 ? 0.0f : 1.0f;
    REQUIRE(ck_resize_prepare(&r, 1, 1, 16, 1, 64, CK_RESIZE_LANCZOS4, scratch) == CKEY_OK);
    ck_resize_run(&r, step, up);
    float mx = 0, mn = 1;
    for (int i = 0; i < 64; i++) mx = fmaxf(mx, up[i]), mn = fminf(mn, up[i]);
    CHECKF(mx > 1.01f && mn < -0.01f, "max %g min %g", mx, mn);
}

static void test_torch_labels(void) {
    /* ck_torch_label is a permutation of 1 .. n */
    const uint32_t sizes[] = {1, 2, 3, 5, 64, 1000, 4097};
    for (size_t k = 0; k < CK_ARRAY_LEN_T(sizes); k++) {
        const uint32_t n = sizes[k];
        uint8_t *seen = calloc(n + 1, 1);
        REQUIRE(seen);
        int ok = 1;
        for (uint32_t i = 0; i < n; i++) {
            uint32_t v = ck_torch_label(i, n);
            if (v < 1 || v > n || seen[v]) ok = 0;
            else seen[v] = 1;
        }
        CHECKF(ok, "n %u", n);
        free(seen);
    }
    float k[11];
    REQUIRE(ck_gaussian_kernel_torch(11, k) == 0);
    double sum = 0;
    for (int i = 0; i < 11; i++) sum += k[i];
    CHECK(fabs(sum - 1.0) < 1e-6 && k[5] > k[4] && k[0] == k[10]);
    /* sigma 2: k[5] / k[4] = exp(1 / 8) */
    CHECK(fabs(k[5] / k[4] - exp(0.125)) < 1e-6);
    CHECK(ck_gaussian_kernel_torch(4, k) == -1);

    /* a lone 3x3 island is removed, a 30x30 block kept, and two 10x10
     * blocks 3 px apart count as one component (area 200 >= 150) */
    enum { H = 64, W = 80, N = H * W };
    float *a = calloc(N, sizeof *a), *o = malloc(N * sizeof *o);
    void *s = malloc(ck_clean_matte_torch_scratch_bytes(H, W));
    REQUIRE(a && o && s);
    for (int y = 2; y < 5; y++)
        for (int x = 70; x < 73; x++) a[y * W + x] = 0.9f;
    for (int y = 30; y < 40; y++)
        for (int x = 2; x < 12; x++) a[y * W + x] = a[y * W + x + 13] = 0.6f;
    REQUIRE(ck_clean_matte_torch(a, o, H, W, 150, 0, 0, NULL, s) == CKEY_OK);
    CHECK(o[3 * W + 71] == 0.0f && o[35 * W + 5] == 0.6f && o[35 * W + 20] == 0.6f);
    REQUIRE(ck_clean_matte_torch(a, o, H, W, 101, 0, 0, NULL, s) == CKEY_OK);
    CHECK(o[35 * W + 5] == 0.6f);
    /* 0.2 is under the torch threshold (0.25) */
    for (int i = 0; i < N; i++) a[i] = a[i] > 0 ? 0.2f : 0.0f;
    REQUIRE(ck_clean_matte_torch(a, o, H, W, 1, 0, 0, NULL, s) == CKEY_OK);
    CHECK(o[35 * W + 5] == 0.0f);
    free(a);
    free(o);
    free(s);
}

/* ------------------------------------------- array powers, threaded frame */

static uint32_t fbits(float f) {
    uint32_t u;
    memcpy(&u, &f, sizeof u);
    return u;
}

static float bitsf(uint32_t u) {
    float f;
    memcpy(&f, &u, sizeof f);
    return f;
}

/* ck_powf_array gives libm's powf bit for bit, for the two sRGB exponents,
 * on every float the conversions hand it in the fast path's range (every
 * 29th one under the sanitizers, which make powf slow), and on specials. */
static void test_pow_array_matches_powf(void) {
    const uint32_t stride = CK_ASAN ? 29 : 1;
    static const float exps[2] = {2.4f, (float)(1.0 / 2.4)};
    /* t from srgb_to_linear: (x + 0.055) / 1.055 > 0.0905 for x > 0.04045;
     * from linear_to_srgb: x > 0.0031308 */
    static const float from[2] = {0.0905f, 0.0031308f};
    enum { B = 4096 };
    float *t = malloc(B * sizeof *t), *o = malloc(B * sizeof *o);
    REQUIRE(t && o);
    for (int k = 0; k < 2; k++) {
        long n = 0, bad = 0;
        uint32_t u = fbits(from[k]);
        const uint32_t end = fbits(64.0f) + 4096; /* a little past the fast range */
        while (u <= end) {
            int m = 0;
            for (; m < B && u <= end; m++, u += stride) t[m] = bitsf(u);
            ck_powf_array(t, o, (size_t)m, exps[k]);
            for (int i = 0; i < m; i++)
                if (fbits(o[i]) != fbits(powf(t[i], exps[k])) && bad++ < 5)
                    printf("    powf(%a, %a) = %a, ck_powf_array %a\n", (double)t[i], (double)exps[k],
                           (double)powf(t[i], exps[k]), (double)o[i]);
            n += m;
        }
        printf("  exponent %.9g: %ld floats from %g to 64, %ld differ from powf\n", (double)exps[k], n,
               (double)from[k], bad);
        CHECK(bad == 0);
    }
    static const float special[] = {0.0f, -0.0f, 1e-30f, 0x1p-9f, 0x1p6f, 1e30f, -1.0f, INFINITY, -INFINITY, NAN};
    const int ns = (int)CK_ARRAY_LEN_T(special);
    for (int k = 0; k < 2; k++) {
        ck_powf_array(special, o, (size_t)ns, exps[k]);
        for (int i = 0; i < ns; i++) {
            const float want = powf(special[i], exps[k]);
            CHECKF(fbits(o[i]) == fbits(want) || (isnan(o[i]) && isnan(want)), "powf(%g)", (double)special[i]);
        }
    }
    free(t);
    free(o);
}

/* The frame with a pool, and without one, against the per-pixel form of the
 * same steps (libm's powf on each value): the same bits, also where the
 * alpha is zero (the blocks that skip the powers), on colours above 1 and
 * below 0, a NaN, and a plate whose width is not a multiple of the blocks. */
static void test_frame_threads_and_reference(void) {
    enum { H = 301, W = 263, N = H * W };
    float *alpha = malloc(sizeof(float) * N), *fg = malloc(sizeof(float) * 3 * N);
    float *want_p = malloc(sizeof(float) * 4 * N), *want_c = malloc(sizeof(float) * 3 * N);
    float *proc = malloc(sizeof(float) * 4 * N), *comp = malloc(sizeof(float) * 3 * N);
    REQUIRE(alpha && fg && want_p && want_c && proc && comp);
    uint32_t r = 7;
    for (int y = 0; y < H; y++)
        for (int x = 0; x < W; x++) {
            const int i = y * W + x;
            r = r * 1664525u + 1013904223u;
            const float u = (float)(r >> 8) / 16777216.0f;
            const float d = hypotf((float)x - 120.0f, (float)y - 150.0f);
            alpha[i] = d < 60.0f ? 1.0f : d < 90.0f ? (90.0f - d) / 30.0f + 0.05f * u : 0.0f;
            if (x > 250 && y < 10) alpha[i] = 0.7f; /* a small island */
            fg[i] = 0.2f + 0.6f * u;
            fg[N + i] = x < 20 ? 5.0f : 0.7f + 0.2f * u; /* above 4: the full path */
            fg[2 * N + i] = y < 5 ? -0.25f : 0.3f * u;
        }
    fg[N + 7 * W + 200] = NAN;
    for (int despeckle = 0; despeckle < 2; despeckle++) {
        ck_post_options o;
        ck_post_options_default(&o);
        o.despeckle = despeckle;
        o.despill_strength = 0.5;
        void *scratch = despeckle ? malloc(ck_post_frame_scratch_bytes(H, W, &o)) : NULL;
        REQUIRE(!despeckle || scratch);
        /* the reference: the Processed alpha from the serial frame, then
         * every pixel as ck_post_frame computed it one value at a time */
        REQUIRE(ck_post_frame(alpha, fg, H, W, &o, NULL, NULL, want_p, want_c, scratch) == CKEY_OK);
        const float *pa = want_p + 3 * N;
        const float bg[2] = {ck_srgb_to_linear1(CK_CHECKER_DARK), ck_srgb_to_linear1(CK_CHECKER_LIGHT)};
        long bad = 0, zero_px = 0;
        for (int y = 0; y < H; y++)
            for (int x = 0; x < W; x++) {
                const int i = y * W + x;
                /* ck_despill on planes of one value: this pixel's despill */
                float three[3] = {fg[i], fg[N + i], fg[2 * N + i]};
                ck_despill(three, 1, 0.5);
                zero_px += pa[i] == 0.0f;
                const float b = bg[((x / CK_CHECKER_SIZE) + (y / CK_CHECKER_SIZE)) & 1];
                for (int ch = 0; ch < 3; ch++) {
                    const float lin = ck_srgb_to_linear1(three[ch]);
                    const float p = lin * pa[i], k = ck_linear_to_srgb1(ck_composite_straight1(lin, b, pa[i]));
                    if (fbits(p) != fbits(want_p[ch * N + i]) && !(isnan(p) && isnan(want_p[ch * N + i]))) bad++;
                    if (fbits(k) != fbits(want_c[ch * N + i]) && !(isnan(k) && isnan(want_c[ch * N + i]))) bad++;
                }
            }
        printf("  despeckle %d: %ld of %d pixels with alpha 0, %ld values differ from the per-pixel form\n",
               despeckle, zero_px, N, bad);
        CHECK(bad == 0 && zero_px > N / 4);
        for (int threads = 1; threads <= 3; threads += 2) {
            ck_pool *pool = NULL;
            REQUIRE(ck_pool_create(threads, &pool, NULL) == CKEY_OK);
            o.pool = pool;
            memset(proc, 0xff, sizeof(float) * 4 * N);
            REQUIRE(ck_post_frame(alpha, fg, H, W, &o, NULL, NULL, proc, comp, scratch) == CKEY_OK);
            CHECKF(memcmp(proc, want_p, sizeof(float) * 4 * N) == 0 &&
                       memcmp(comp, want_c, sizeof(float) * 3 * N) == 0,
                   "despeckle %d, %d threads: the passes differ", despeckle, threads);
            ck_pool_free(pool);
        }
        free(scratch);
    }
    free(alpha);
    free(fg);
    free(want_p);
    free(want_c);
    free(proc);
    free(comp);
}

int main(int argc, char **argv) {
    static const ck_test_case cases[] = {
        {"despill_known", test_despill_known},
        {"components", test_components},
        {"components_strips", test_components_strips},
        {"ellipse_dilate", test_ellipse},
        {"gaussian_kernel", test_gaussian_kernel},
        {"blur_border", test_blur_border},
        {"checker_and_comp", test_checker_and_comp},
        {"frame", test_frame},
        {"parity_post", test_parity_post},
        {"parity_despeckle", test_parity_despeckle},
        {"parity_lanczos", test_parity_lanczos},
        {"lanczos_properties", test_lanczos_properties},
        {"torch_labels", test_torch_labels},
        {"pow_array_matches_powf", test_pow_array_matches_powf},
        {"frame_threads_and_reference", test_frame_threads_and_reference},
    };
    return ck_test_main(cases, (int)CK_ARRAY_LEN_T(cases), argc, argv);
}
