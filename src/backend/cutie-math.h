/* Cutie's per-element formulas, shared by the CPU ops (src/cpu/cutie-ops.c)
 * and the CUDA kernels (src/cuda/cutie-ops.cu), so that both backends
 * evaluate the same float expressions (the ops themselves are defined in
 * backend/ops.h's Cutie block). C11 and CUDA C++ alike (CK_HD, core/hd.h). */
#ifndef CK_BACKEND_CUTIE_MATH_H
#define CK_BACKEND_CUTIE_MATH_H

#include <math.h>
#include <stdint.h>

#include "core/hd.h"


/* The elementwise maps of ck_ops.unary. */
enum { CK_UNARY_SIGMOID, CK_UNARY_RELU, CK_UNARY_SQUARE_PLUS_1 };

CK_HD float ck_sigmoid(float v) { return 1.0f / (1.0f + expf(-v)); }

/* The frame's ImageNet normalization (Cutie's im_normalization): channel c of
 * a padded frame's pixel, v its value (0 in the padding). */
CK_HD float ck_cutie_normalize(float v, int c) {
    const float mean = c == 0 ? 0.485f : c == 1 ? 0.456f : 0.406f;
    const float stdv = c == 0 ? 0.229f : c == 1 ? 0.224f : 0.225f;
    return (v - mean) / stdv;
}

/* The value of pixel (y, x), channel c, of the frame src [Hi, Wi, 3] padded
 * to Hp x Wp (pad_t rows above, pad_l columns left), normalized. */
CK_HD float ck_cutie_pad_normalize_at(const float *src, int Hi, int Wi, int pad_t, int pad_l, int y, int x, int c) {
    const int sy = y - pad_t, sx = x - pad_l;
    const float v = sy >= 0 && sy < Hi && sx >= 0 && sx < Wi ? src[((int64_t)sy * Wi + sx) * 3 + c] : 0.0f;
    return ck_cutie_normalize(v, c);
}

/* unary: sigmoid (the key's selection), relu, or v^2 + 1 (its shrinkage) */
CK_HD float ck_unary_map(int kind, float v) {
    return kind == CK_UNARY_SIGMOID ? ck_sigmoid(v) : kind == CK_UNARY_RELU ? (v > 0 ? v : 0) : v * v + 1;
}

/* PyTorch's bilinear source index (align_corners=False): the two taps and
 * the weight of the second, for output index d of `out` from `in`. */
CK_HD void ck_bilinear_tap(int d, int in, int out, int *i0, int *i1, float *w1) {
    float s = ((float)d + 0.5f) * ((float)in / (float)out) - 0.5f;
    if (s < 0) s = 0;
    int i = (int)s;
    if (i > in - 1) i = in - 1;
    *i0 = i;
    *i1 = i < in - 1 ? i + 1 : i;
    *w1 = s - (float)i;
}

/* The bilinear blend of the four taps (rows y0 / y1, columns x0 / x1). */
CK_HD float ck_bilinear(float p00, float p01, float p10, float p11, float wx, float wy) {
    return (1 - wy) * ((1 - wx) * p00 + wx * p01) + wy * ((1 - wx) * p10 + wx * p11);
}

/* masks_with_others at pixel p of the O masks m [O, HW]: object o's pair
 * (its mask, the others' sum clamped to [0, 1]) at dst + (o HW + p) dst_ld. */
CK_HD void ck_masks_with_others_pixel(const float *m, int O, int64_t HW, int64_t p, float *dst, int dst_ld) {
    float sum = 0;
    for (int o = 0; o < O; o++) sum += m[o * HW + p];
    for (int o = 0; o < O; o++) {
        const float v = m[o * HW + p], r = sum - v;
        float *d = dst + (o * HW + p) * dst_ld;
        d[0] = v;
        d[1] = r < 0 ? 0 : r > 1 ? 1 : r;
    }
}

/* gru_update's cell from the forget, update and new gates' inputs:
 * sigmoid(f) h (1 - sigmoid(u)) + sigmoid(u) tanh(n). */
CK_HD float ck_gru_cell(float h, float f, float u, float n) {
    const float fs = ck_sigmoid(f), us = ck_sigmoid(u), nv = tanhf(n);
    return fs * h * (1 - us) + us * nv;
}

/* channel_attention's gate of channel ch: sigmoid of the k-tap conv1d
 * (zero-padded) of the C channel means. */
CK_HD float ck_channel_gate(const float *w, int k, const float *mean, int C, int ch) {
    float s = 0;
    for (int t = 0; t < k; t++) {
        const int i = ch + t - (k - 1) / 2;
        if (i >= 0 && i < C) s += w[t] * mean[i];
    }
    return ck_sigmoid(s);
}

/* aggregate's logit of a probability clamped to [1e-7, 1 - 1e-7]. */
CK_HD float ck_agg_logit(float q) {
    q = q < 1e-7f ? 1e-7f : q > 1 - 1e-7f ? 1 - 1e-7f : q;
    return logf(q / (1 - q));
}

/* aggregate at pixel p of O logit planes [O, HW]: out [O + 1, HW], plane 0
 * the background (the product of 1 - p over the objects). */
CK_HD void ck_aggregate_pixel(const float *logits, int O, int64_t HW, int64_t p, float *out) {
    float bg = 1;
    for (int o = 0; o < O; o++) {
        const float pr = ck_sigmoid(logits[o * HW + p]);
        bg *= 1 - pr;
        out[(o + 1) * HW + p] = ck_agg_logit(pr);
    }
    out[p] = ck_agg_logit(bg);
}

/* Whether object o is pixel p's largest aggregated logit (ties to the
 * object): object_attn_mask's foreground. */
CK_HD int ck_is_fg(const float *logits, int O, int64_t HW, int o, int64_t p) {
    float bg = 1, mine = 0;
    for (int j = 0; j < O; j++) {
        const float pr = ck_sigmoid(logits[j * HW + p]);
        bg *= 1 - pr;
        if (j == o) mine = ck_agg_logit(pr);
    }
    float mx = ck_agg_logit(bg);
    for (int j = 0; j < O; j++) {
        const float a = ck_agg_logit(ck_sigmoid(logits[j * HW + p]));
        mx = a > mx ? a : mx;
    }
    return mine >= mx;
}

/* softmax_planes at pixel p: over the C planes of x [C, HW], in place. */
CK_HD void ck_softmax_planes_pixel(float *x, int C, int64_t HW, int64_t p) {
    float mx = -INFINITY, s = 0;
    for (int c = 0; c < C; c++) mx = x[c * HW + p] > mx ? x[c * HW + p] : mx;
    for (int c = 0; c < C; c++) s += x[c * HW + p] = expf(x[c * HW + p] - mx);
    for (int c = 0; c < C; c++) x[c * HW + p] /= s;
}

/* summary_pool's weight of pixel p for query q of Q: sigmoid(logit) times
 * the mask m for the first Q / 2 queries, 1 - m for the rest. */
CK_HD float ck_summary_weight(float logit, int q, int Q, float m) {
    return ck_sigmoid(logit) * (q < Q / 2 ? m : 1 - m);
}

#endif
