/*
 * sRGB transfer function and ImageNet normalization, in float32 the way
 * PyTorch evaluates upstream color_utils on a float32 tensor: Python scalars
 * (12.92, 1.055, 0.055, the exponents, the thresholds) become float32
 * operands, and each operation rounds to float32.
 *
 * The array forms give the same floats as the one-value forms (libm's powf),
 * eight lanes at a time: on AVX2, four doubles a vector, that is only 1.0 to
 * 1.3 times as fast as glibc's table-driven powf; an AVX-512 clone does eight
 * at once. Their power is evaluated in double precision with a relative
 * error near 1e-15, then rounded to float:
 * that is the correctly rounded power. libm's powf is not correctly rounded
 * (glibc 2.36 differs from it for about 0.06% of inputs), but it misses only
 * where the exact power lies within 0.0021 of a float's spacing from a
 * rounding midpoint. So a lane whose double result lies within 1/256 of the
 * spacing from a midpoint (about 0.8% of them), or whose input is outside
 * [2^-9, 2^6] or not a number, takes powf itself; every other lane's
 * rounding is the one powf makes. test-post checks the identity for every
 * float in that range (pow_array_matches_powf).
 */
#include <math.h>
#include <stdint.h>
#include <string.h>

#include "core/core.h"
#include "pixel/pixel.h"

const float ck_imagenet_mean[3] = {0.485f, 0.456f, 0.406f};
const float ck_imagenet_std[3] = {0.229f, 0.224f, 0.225f};

#define SRGB_GAMMA 2.4f
#define SRGB_INV_GAMMA ((float)(1.0 / 2.4))

float ck_linear_to_srgb1(float x) {
    /* clamp(min=0) first; written so that NaN passes through as in torch */
    if (x < 0.0f) x = 0.0f;
    if (x <= 0.0031308f) return x * 12.92f;
    return 1.055f * powf(x, SRGB_INV_GAMMA) - 0.055f;
}

float ck_srgb_to_linear1(float x) {
    if (x < 0.0f) x = 0.0f;
    if (x <= 0.04045f) return x / 12.92f;
    return powf((x + 0.055f) / 1.055f, SRGB_GAMMA);
}

/* ------------------------------------------------- powf on an array */

typedef double v8d __attribute__((vector_size(64)));
typedef float v8f __attribute__((vector_size(32)));
typedef int32_t v8i __attribute__((vector_size(32)));
typedef int64_t v8l __attribute__((vector_size(64)));
typedef uint64_t v8ul __attribute__((vector_size(64)));

/* Lanes within this part of a float's spacing from a rounding midpoint take
 * powf (see the top of the file). */
#define POW_MARGIN (1.0 / 256)
#define POW_LO 0x1p-9f
#define POW_HI 0x1p6f

/*
 * t^p for blocks of 8 floats, in double, with a relative error below 1e-12
 * (a 4000th of the margin above):
 *   log2 t = e + ln(m) / ln 2 with t = 2^e m, m in [sqrt(1/2), sqrt(2)),
 *     ln m = 2 atanh(s), s = (m - 1) / (m + 1), |s| < 0.1716: 8 terms of
 *     the atanh series (the next is below 4e-14);
 *   2^y = 2^k e^f, k = round(y), f = (y - k) ln 2, |f| < 0.347: e^f by its
 *     Taylor series to degree 10 (the next term is below 3e-13);
 * rounded to float in out[]. redo[i] is set where that float may differ
 * from powf's: near a midpoint, or t[i] outside [POW_LO, POW_HI] or NaN
 * (such lanes are computed on t = 1 and left to the caller). n is a
 * multiple of 8. Arrays, not vector arguments, so the clones share one ABI;
 * selects are written as arithmetic, which every clone keeps in vectors.
 */
__attribute__((target_clones("avx512f", "arch=x86-64-v3", "default")))
static void pow_lanes(const float *tin, float *out, unsigned char *redo, int n, double p) {
    for (int b = 0; b < n; b += 8) {
        v8f t;
        memcpy(&t, tin + b, sizeof t);
        const v8i in_range = (t >= POW_LO) & (t <= POW_HI);
        /* t = 2^e m with m in [sqrt(1/2), sqrt(2)): e is the exponent of t / sqrt(1/2) */
        const v8i tb = ((v8i)t & in_range) | (0x3f800000 & ~in_range);
        const v8i off = tb - 0x3f3504f3;
        const v8d e = __builtin_convertvector(off >> 23, v8d);
        const v8d m = __builtin_convertvector((v8f)((off & 0x7fffff) + 0x3f3504f3), v8d);
        const v8d s = (m - 1.0) / (m + 1.0), u = s * s;
        /* sum of u^i / (2i + 1), i = 0 .. 7, in Estrin's order (short
         * dependency chains, so that independent lanes overlap) */
        const v8d u2 = u * u, u4 = u2 * u2;
        const v8d a0 = u * (1.0 / 3) + 1.0, a1 = u * (1.0 / 7) + 1.0 / 5;
        const v8d a2 = u * (1.0 / 11) + 1.0 / 9, a3 = u * (1.0 / 15) + 1.0 / 13;
        const v8d q = (a1 * u2 + a0) + (a3 * u2 + a2) * u4;
        const v8d y = p * (e + (2.0 * s * q) * 1.4426950408889634074);
        /* k = round(y): adding 1.5 * 2^52 leaves no fraction bits, and the
         * sum's low bits hold k */
        const v8d yk = y + 0x1.8p52;
        const v8d kd = yk - 0x1.8p52;
        const v8d f = (y - kd) * 0.69314718055994530942;
        /* e^f: sum of f^i / i!, i = 0 .. 10, in Estrin's order */
        const v8d f2 = f * f, f4 = f2 * f2, f8 = f4 * f4;
        const v8d p0 = f + 1.0, p1 = f * (1.0 / 6) + 0.5, p2 = f * (1.0 / 120) + 1.0 / 24;
        const v8d p3 = f * (1.0 / 5040) + 1.0 / 720, p4 = f * (1.0 / 362880) + 1.0 / 40320;
        const v8d r = ((p1 * f2 + p0) + (p3 * f2 + p2) * f4) + (f2 * (1.0 / 3628800) + p4) * f8;
        const v8l k = (v8l)yk - 0x4338000000000000LL;
        const v8d z = r * (v8d)((k + 1023) << 52);
        const v8f rf = __builtin_convertvector(z, v8f);
        const v8d rd = __builtin_convertvector(rf, v8d);
        /* the float spacing at rd; below a power of two it is half as wide */
        const v8l rbits = (v8l)rd;
        const v8l at_pow2 = (rbits & 0x000fffffffffffffLL) == 0;
        const v8d spacing = (v8d)(rbits & 0x7ff0000000000000LL) * 0x1p-23;
        const v8d narrow = spacing - spacing * (v8d)(at_pow2 & 0x3fe0000000000000LL);
        const v8l abs_bits = {INT64_MAX, INT64_MAX, INT64_MAX, INT64_MAX,
                              INT64_MAX, INT64_MAX, INT64_MAX, INT64_MAX};
        const v8d dist = (v8d)((v8l)(z - rd) & abs_bits);
        /* the sign bit of (0.5 - margin) spacing - dist: set near a midpoint */
        const v8ul flag = (v8ul)((0.5 - POW_MARGIN) * narrow - dist) |
                          (v8ul)~__builtin_convertvector(in_range, v8l);
        memcpy(out + b, &rf, sizeof rf);
        uint64_t fl[8];
        memcpy(fl, &flag, sizeof fl);
        const uint64_t any = (fl[0] | fl[1] | fl[2] | fl[3]) | (fl[4] | fl[5] | fl[6] | fl[7]);
        memset(redo + b, 0, 8);
        if (any >> 63)
            for (int i = 0; i < 8; i++) redo[b + i] = (unsigned char)(fl[i] >> 63);
    }
}

/* out[i] = powf(t[i], p) for n <= 64 values. */
static void pow_block(const float *t, float *out, int n, float p) {
    float tp[64], op[64];
    unsigned char redo[64];
    const int n8 = (n + 7) & ~7;
    memcpy(tp, t, (size_t)n * sizeof(float));
    for (int i = n; i < n8; i++) tp[i] = 1.0f;
    pow_lanes(tp, op, redo, n8, (double)p);
    for (int i = 0; i < n; i++) out[i] = redo[i] ? powf(t[i], p) : op[i];
}

void ck_powf_array(const float *t, float *out, size_t n, float p) {
    for (size_t i = 0; i < n; i += 64) pow_block(t + i, out + i, n - i < 64 ? (int)(n - i) : 64, p);
}

/* ---------------------------------------------------- the conversions */

void ck_linear_to_srgb(float *x, size_t n) {
    float t[64], pw[64];
    for (size_t i0 = 0; i0 < n; i0 += 64) {
        const int m = n - i0 < 64 ? (int)(n - i0) : 64;
        float *xs = x + i0;
        for (int i = 0; i < m; i++) t[i] = xs[i] < 0.0f ? 0.0f : xs[i];
        pow_block(t, pw, m, SRGB_INV_GAMMA);
        /* the branches of ck_linear_to_srgb1; NaN takes the power's */
        for (int i = 0; i < m; i++)
            xs[i] = t[i] <= 0.0031308f ? t[i] * 12.92f : 1.055f * pw[i] - 0.055f;
    }
}

typedef struct srgb_job {
    float *x;
} srgb_job;

static void to_srgb_part(void *ctx, int64_t b, int64_t e, int thread) {
    (void)thread;
    ck_linear_to_srgb(((srgb_job *)ctx)->x + b, (size_t)(e - b));
}

void ck_linear_to_srgb_pool(float *x, size_t n, ck_pool *pool) {
    srgb_job j = {x};
    ck_pool_for(pool, (int64_t)n, 65536, to_srgb_part, &j);
}

void ck_srgb_to_linear(float *x, size_t n) {
    float c[64], t[64], pw[64];
    for (size_t i0 = 0; i0 < n; i0 += 64) {
        const int m = n - i0 < 64 ? (int)(n - i0) : 64;
        float *xs = x + i0;
        for (int i = 0; i < m; i++) {
            c[i] = xs[i] < 0.0f ? 0.0f : xs[i];
            t[i] = (c[i] + 0.055f) / 1.055f;
        }
        pow_block(t, pw, m, SRGB_GAMMA);
        for (int i = 0; i < m; i++) xs[i] = c[i] <= 0.04045f ? c[i] / 12.92f : pw[i];
    }
}

void ck_imagenet_normalize(float *chw, size_t plane) {
    for (int c = 0; c < 3; c++) {
        float *p = chw + (size_t)c * plane;
        const float m = ck_imagenet_mean[c], s = ck_imagenet_std[c];
        for (size_t i = 0; i < plane; i++) p[i] = (p[i] - m) / s;
    }
}

void ckey_linear_to_srgb(float *data, size_t count) {
    if (data) ck_linear_to_srgb(data, count);
}
