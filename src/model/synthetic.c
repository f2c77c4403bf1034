/* The seeded synthetic weights of docs/synthetic-weights.md (bit-identical to
 * tools/reference/synthetic.py), and the bicubic pos-embed resize. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "model/model.h"

static uint64_t fnv1a64(const char *s) {
    uint64_t h = 0xcbf29ce484222325ull;
    for (; *s; s++) {
        h ^= (unsigned char)*s;
        h *= 0x100000001b3ull;
    }
    return h;
}

static float synth_u(uint64_t h, uint64_t i) {
    uint64_t x = h + (i + 1) * 0x9E3779B97F4A7C15ull;
    uint64_t z = x ^ (x >> 30);
    z *= 0xBF58476D1CE4E5B9ull;
    z = z ^ (z >> 27);
    z *= 0x94D049BB133111EBull;
    z = z ^ (z >> 31);
    return (float)((int64_t)(z >> 44) - (1 << 19)) * (1.0f / (1 << 19));
}

static int ends_with(const char *s, const char *suffix) {
    size_t a = strlen(s), b = strlen(suffix);
    return a >= b && strcmp(s + a - b, suffix) == 0;
}

typedef enum { R_POS, R_MEAN, R_VAR, R_FINAL, R_NORM, R_BIAS, R_WEIGHT } rule;

static rule rule_for(const char *key, int ndim) {
    if (ends_with(key, "pos_embed")) return R_POS;
    if (ends_with(key, "running_mean")) return R_MEAN;
    if (ends_with(key, "running_var")) return R_VAR;
    if (strcmp(key, "refiner.final.weight") == 0) return R_FINAL;
    if (ndim == 1 && ends_with(key, ".weight")) return R_NORM;
    if (ends_with(key, ".bias")) return R_BIAS;
    return R_WEIGHT;
}

static float rule_value(rule r, float u, float wscale) {
    switch (r) {
    case R_POS: return u * (1.0f / 32);
    case R_MEAN: return u * 0.5f;
    case R_VAR: return 1.0f + u * 0.5f;
    case R_FINAL: return u * (1.0f / 64);
    case R_NORM: return 1.0f + u * 0.125f;
    case R_BIAS: return u * (1.0f / 16);
    case R_WEIGHT: return u * wscale;
    }
    return 0;
}

static float weight_scale(int ndim, const int64_t *shape) {
    int64_t numel = 1;
    for (int i = 0; i < ndim; i++) numel *= shape[i];
    int64_t fan_in = ndim > 0 && shape[0] > 0 ? numel / shape[0] : 1;
    int bl = 0;
    while (fan_in >> bl) bl++;
    int e = (bl - 1) / 2;
    return ldexpf(1.0f, -e);
}

float ck_synth_value(const char *key, int ndim, const int64_t *shape, uint64_t index) {
    return rule_value(rule_for(key, ndim), synth_u(fnv1a64(key), index), weight_scale(ndim, shape));
}

void ck_synth_input(int S, float *x) {
    uint64_t h = fnv1a64("input");
    int64_t HW = (int64_t)S * S;
    for (int64_t i = 0; i < 4 * HW; i++) {
        float u = synth_u(h, (uint64_t)i);
        x[i] = i < 3 * HW ? 2.0f * u : (u + 1.0f) * 0.5f;
    }
}

static ckey_status synth_read(void *user, const char *name, const int64_t *shape, int ndim, float *dst,
                              ckey_error *err) {
    (void)user;
    (void)err;
    int64_t n = 1;
    for (int i = 0; i < ndim; i++) n *= shape[i];
    rule r = rule_for(name, ndim);
    float ws = weight_scale(ndim, shape);
    uint64_t h = fnv1a64(name);
    for (int64_t i = 0; i < n; i++) dst[i] = rule_value(r, synth_u(h, (uint64_t)i), ws);
    return CKEY_OK;
}

ckey_status ck_model_synthetic(const ck_config *cfg, ckey_model **out, ckey_error *err) {
    ck_tensor_source src = {NULL, "synthetic", synth_read};
    ckey_status st = ck_model_build(cfg, &src, out, err);
    if (st == CKEY_OK) {
        (*out)->source = strdup("synthetic");
        if (!(*out)->source) {
            ckey_model_free(*out);
            *out = NULL;
            return ck_fail(err, CKEY_ERR_NOMEM, "out of memory");
        }
    }
    return st;
}

/* ----------------------------------------------------- bicubic resize */

static float cubic1(float x, float A) { return ((A + 2) * x - (A + 3)) * x * x + 1; }
static float cubic2(float x, float A) { return ((A * x - 5 * A) * x + 8 * A) * x - 4 * A; }

static void cubic_coeffs(float t, float w[4]) {
    const float A = -0.75f;
    w[0] = cubic2(t + 1.0f, A);
    w[1] = cubic1(t, A);
    w[2] = cubic1(1.0f - t, A);
    w[3] = cubic2(2.0f - t, A);
}

void ck_pos_embed_resize(const float *src, int gs, int C, float *dst, int gd) {
    ck_pos_embed_resize_rows(src, gs, C, dst, gd, 0, gd);
}

void ck_pos_embed_resize_rows(const float *src, int gs, int C, float *dst, int gd, int y0, int y1) {
    const float scale = (float)gs / (float)gd;
    for (int y = y0; y < y1; y++) {
        float sy = scale * ((float)y + 0.5f) - 0.5f;
        int iy = (int)floorf(sy);
        float wy[4];
        cubic_coeffs(sy - (float)iy, wy);
        for (int x = 0; x < gd; x++) {
            float sx = scale * ((float)x + 0.5f) - 0.5f;
            int ix = (int)floorf(sx);
            float wx[4];
            cubic_coeffs(sx - (float)ix, wx);
            float *o = dst + ((int64_t)(y - y0) * gd + x) * C;
            for (int ch = 0; ch < C; ch++) {
                float acc = 0;
                for (int a = 0; a < 4; a++) {
                    int yy = CK_MIN(CK_MAX(iy - 1 + a, 0), gs - 1);
                    float row = 0;
                    for (int b = 0; b < 4; b++) {
                        int xx = CK_MIN(CK_MAX(ix - 1 + b, 0), gs - 1);
                        row += wx[b] * src[((int64_t)yy * gs + xx) * C + ch];
                    }
                    acc += wy[a] * row;
                }
                o[ch] = acc;
            }
        }
    }
}
