/*
 * Bilinear resize matching ATen's CPU kernels for float32 NCHW tensors.
 *
 * The weight arithmetic deliberately mixes float and double the way ATen's
 * C++ does (float `scale`, a double `i + 0.5`, float `center`, ...), because
 * that is what makes the tables -- and so the outputs -- agree to the last
 * bit or two rather than merely "closely". The references are
 * aten/src/ATen/native/UpSample.h (area_pixel_compute_scale,
 * compute_source_index_and_lambda) and aten/src/ATen/native/cpu/
 * UpSampleKernel.cpp (HelperInterpBase::_compute_indices_min_size_weights_aa,
 * HelperInterpLinear::aa_filter, separable_upsample_generic_Nd_kernel_impl,
 * interpolate_aa_single_dim). Accumulation order per output element follows
 * those loops too: first tap times its weight, then the others added in
 * index order.
 *
 * CK_RESIZE_LANCZOS4 follows OpenCV's cv2.resize(INTER_LANCZOS4) for float32
 * images instead (imgproc/src/resize.cpp: the coordinate and weight tables
 * of resize(), interpolateLanczos4, HResizeLanczos4 / VResizeLanczos4): the
 * source coordinate is computed in double and rounded to float before its
 * floor is taken, the weights are evaluated in double and normalized in
 * float, and edge taps repeat the border pixel.
 */
#include <math.h>
#include <string.h>

#include "core/core.h"
#include "pixel/pixel.h"
#include "core/core.h"
#include "cuda/kernels.h"

/* Round a float count up so the intermediate starts 64-byte aligned relative
 * to the scratch base (helps the vertical pass vectorize). */
static size_t align16(size_t n) { return (n + 15) & ~(size_t)15; }

static int mul3(size_t a, size_t b, size_t c, size_t *out) {
    if (a && b > SIZE_MAX / a) return 0;
    size_t ab = a * b;
    if (ab && c > SIZE_MAX / ab) return 0;
    *out = ab * c;
    return 1;
}

/* ATen area_pixel_compute_scale<float>(in, out, align_corners=false, no scale):
 * static_cast<float>(in) / out, the division done in float. */
static float pixel_scale(int32_t in, int32_t out) { return (float)in / (float)out; }

/* Taps per output of the antialiased filter: ATen's max_interp_size. */
static int32_t aa_taps(int32_t in, int32_t out) {
    const float scale = pixel_scale(in, out);
    /* support = (interp_size * 0.5) * scale on downscale, interp_size * 0.5 on
     * upscale, with interp_size = 2 for bilinear. */
    const float support = scale >= 1.0f ? scale : 1.0f;
    return (int32_t)ceilf(support) * 2 + 1;
}

static int valid_dims(int32_t channels, int32_t in_h, int32_t in_w, int32_t out_h, int32_t out_w) {
    return channels > 0 && in_h > 0 && in_w > 0 && out_h > 0 && out_w > 0 &&
           in_h <= CK_RESIZE_MAX_SIDE && in_w <= CK_RESIZE_MAX_SIDE &&
           out_h <= CK_RESIZE_MAX_SIDE && out_w <= CK_RESIZE_MAX_SIDE;
}

static int32_t taps_for(ck_resize_mode mode, int32_t in, int32_t out) {
    return mode == CK_RESIZE_BILINEAR_AA ? aa_taps(in, out) : mode == CK_RESIZE_LANCZOS4 ? 8 : 2;
}

static int two_pass(ck_resize_mode mode, int32_t in_h, int32_t in_w, int32_t out_h, int32_t out_w) {
    if (mode == CK_RESIZE_BILINEAR_AA) return in_w != out_w && in_h != out_h;
    if (mode == CK_RESIZE_LANCZOS4) return in_w != out_w || in_h != out_h;
    return 0;
}

size_t ck_resize_scratch_floats(int32_t channels, int32_t in_h, int32_t in_w,
                                int32_t out_h, int32_t out_w, ck_resize_mode mode) {
    if (!valid_dims(channels, in_h, in_w, out_h, out_w)) return 0;
    if (mode != CK_RESIZE_BILINEAR_AA && mode != CK_RESIZE_BILINEAR && mode != CK_RESIZE_LANCZOS4)
        return 0;
    size_t tw, th, tmp = 0;
    if (!mul3((size_t)out_w, (size_t)(2 + taps_for(mode, in_w, out_w)), 1, &tw)) return 0;
    if (!mul3((size_t)out_h, (size_t)(2 + taps_for(mode, in_h, out_h)), 1, &th)) return 0;
    if (two_pass(mode, in_h, in_w, out_h, out_w) &&
        !mul3((size_t)channels, (size_t)in_h, (size_t)out_w, &tmp))
        return 0;
    size_t total = align16(tw) + align16(th);
    if (tmp > SIZE_MAX - total) return 0;
    return total + tmp;
}

/*
 * One axis of _upsample_bilinear2d_aa: for output i, the first input index,
 * the number of taps and the normalized triangle weights. Entry layout
 * {xmin, xsize, w[taps]}; unused weights are zero.
 */
static void aa_table(int32_t in, int32_t out, int32_t taps, float *table) {
    const float scale = pixel_scale(in, out);
    const float support = scale >= 1.0f ? scale : 1.0f;
    /* invscale = 1.0 / scale in double, stored as float */
    const float invscale = scale >= 1.0f ? (float)(1.0 / (double)scale) : 1.0f;
    for (int32_t i = 0; i < out; i++) {
        float *e = table + (size_t)i * (size_t)(2 + taps);
        float *w = e + 2;
        /* scalar_t center = scale * (i + 0.5): a double product stored as float */
        const float center = (float)((double)scale * ((double)i + 0.5));
        /* static_cast<int64_t> truncates toward zero, then clamp to the image */
        int64_t xmin = (int64_t)((double)(center - support) + 0.5);
        if (xmin < 0) xmin = 0;
        int64_t xmax = (int64_t)((double)(center + support) + 0.5);
        if (xmax > in) xmax = in;
        int64_t xsize = xmax - xmin;
        if (xsize < 0) xsize = 0;
        if (xsize > taps) xsize = taps;  /* ATen clips the rare off-by-one too */
        float total = 0.0f;
        int64_t j = 0;
        for (; j < xsize; j++) {
            /* (j + xmin - center + 0.5) * invscale: the int-minus-float is a
             * float op, the rest double, then narrowed to the filter's float */
            const float d = (float)(j + xmin) - center;
            const float arg = (float)(((double)d + 0.5) * (double)invscale);
            const float a = fabsf(arg);
            const float wj = a < 1.0f ? (float)(1.0 - (double)a) : 0.0f;
            w[j] = wj;
            total += wj;
        }
        if (total != 0.0f)
            for (j = 0; j < xsize; j++) w[j] /= total;
        for (; j < taps; j++) w[j] = 0.0f;
        e[0] = (float)xmin;
        e[1] = (float)xsize;
    }
}

/*
 * One axis of plain bilinear (align_corners=False): {i0, i1, lambda0, lambda1}
 * as compute_source_index_and_lambda<float, float>.
 *
 * `fused`: ATen dispatches small outputs (out_h + out_w <= 128) to its
 * vectorized kernel, which is compiled for AVX2/AVX-512 and there evaluates
 * the source index `scale * (i + 0.5) - 0.5` as one fused multiply-add; the
 * generic kernel used for larger outputs rounds the product first. The
 * difference moves lambda by an ulp of the source index (~1e-6 at index 16),
 * so we follow the same split.
 */
static void bilinear_table(int32_t in, int32_t out, int fused, float *table) {
    const float scale = pixel_scale(in, out);
    for (int32_t i = 0; i < out; i++) {
        float *e = table + (size_t)i * 4;
        if (in == out) {
            e[0] = e[1] = (float)i;
            e[2] = 1.0f;
            e[3] = 0.0f;
            continue;
        }
        float src = fused ? fmaf(scale, (float)i + 0.5f, -0.5f) : scale * ((float)i + 0.5f) - 0.5f;
        if (src < 0.0f) src = 0.0f;  /* OpenCV-style clamp of the left edge */
        int64_t i0 = (int64_t)floorf(src);
        if (i0 > in - 1) i0 = in - 1;
        float l1 = src - (float)i0;
        if (l1 < 0.0f) l1 = 0.0f;
        if (l1 > 1.0f) l1 = 1.0f;
        const int64_t i1 = i0 + (i0 < in - 1 ? 1 : 0);
        e[0] = (float)i0;
        e[1] = (float)i1;
        e[2] = 1.0f - l1;
        e[3] = l1;
    }
}

/*
 * The 8 Lanczos-4 weights (a = 4: sinc(d) * sinc(d / 4)) for taps at
 * d = fx + 3 - i, i = 0..7, as OpenCV's interpolateLanczos4. With
 * y = -pi d / 4 the numerator sin(pi d) sin(pi d / 4) is, up to a factor
 * common to all taps (it cancels in the normalization), sin(y0 - 3 pi i / 4)
 * with y0 the angle of tap 0; OpenCV expands that sine with one sin/cos pair
 * of y0 and the exact cosines and sines of the multiples of 3 pi / 4, which
 * is what is evaluated here, in double, each weight then rounded to float,
 * summed in float and scaled by the float reciprocal of the sum. A tap with
 * |d| < 1e-6 would divide by ~0: OpenCV gives it 1e30 so that it takes the
 * whole weight. fx == 0 (a source pixel hit exactly) is an exact one-hot.
 */
static void lanczos4_weights(float fx, float *w) {
    if (fx == 0.0f) {
        for (int i = 0; i < 8; i++) w[i] = i == 3 ? 1.0f : 0.0f;
        return;
    }
    static const double h = 0.70710678118654752440; /* sqrt(2) / 2 */
    static const double cos3[8] = {1, -h, 0, h, -1, h, 0, -h}; /* cos(-3 pi i / 4) */
    static const double sin3[8] = {0, -h, 1, -h, 0, h, -1, h}; /* sin(-3 pi i / 4) */
    const double pi = 3.14159265358979323846;
    const double y0 = -(double)(fx + 3.0f) * pi * 0.25;
    const double s0 = sin(y0), c0 = cos(y0);
    float sum = 0.0f;
    for (int i = 0; i < 8; i++) {
        const float d = fx + (float)(3 - i);
        if (fabsf(d) >= 1e-6f) {
            const double y = -(double)d * pi * 0.25;
            w[i] = (float)((cos3[i] * s0 + sin3[i] * c0) / (y * y));
        } else {
            w[i] = 1e30f;
        }
        sum += w[i];
    }
    const float inv = 1.0f / sum;
    for (int i = 0; i < 8; i++) w[i] *= inv;
}

/*
 * One axis of INTER_LANCZOS4: entry {first tap index (floor(src) - 3, may be
 * negative), 0, w[8]}. scale = 1 / (out / in) in double, as cv2.resize
 * derives it from the inverse scale factor.
 */
static void lanczos4_table(int32_t in, int32_t out, float *table) {
    const double scale = 1.0 / ((double)out / (double)in);
    for (int32_t i = 0; i < out; i++) {
        float *e = table + (size_t)i * 10;
        float fx = (float)(((double)i + 0.5) * scale - 0.5);
        const float sx = floorf(fx);
        fx -= sx;
        e[0] = sx - 3.0f;
        e[1] = 0.0f;
        lanczos4_weights(fx, e + 2);
    }
}

ckey_status ck_resize_prepare(ck_resize *r, int32_t channels, int32_t in_h, int32_t in_w,
                              int32_t out_h, int32_t out_w, ck_resize_mode mode,
                              float *scratch) {
    if (!r || !scratch || !ck_resize_scratch_floats(channels, in_h, in_w, out_h, out_w, mode))
        return CKEY_ERR_INVALID_ARG;
    memset(r, 0, sizeof *r);
    r->mode = mode;
    r->channels = channels;
    r->in_h = in_h;
    r->in_w = in_w;
    r->out_h = out_h;
    r->out_w = out_w;
    r->taps_w = taps_for(mode, in_w, out_w);
    r->taps_h = taps_for(mode, in_h, out_h);
    float *tw = scratch;
    float *th = tw + align16((size_t)out_w * (size_t)(2 + r->taps_w));
    float *tmp = th + align16((size_t)out_h * (size_t)(2 + r->taps_h));
    if (mode == CK_RESIZE_BILINEAR_AA) {
        aa_table(in_w, out_w, r->taps_w, tw);
        aa_table(in_h, out_h, r->taps_h, th);
        /* A side whose size does not change is skipped outright, as ATen's
         * separable kernel does (its weights would be an exact identity). */
        r->num_passes = (in_w != out_w && in_h != out_h) ? 2 : 1;
        r->tmp = r->num_passes == 2 ? tmp : NULL;
    } else if (mode == CK_RESIZE_LANCZOS4) {
        lanczos4_table(in_w, out_w, tw);
        lanczos4_table(in_h, out_h, th);
        r->num_passes = two_pass(mode, in_h, in_w, out_h, out_w) ? 2 : 1;
        r->tmp = r->num_passes == 2 ? tmp : NULL;
    } else {
        const int fused = (int64_t)out_h + out_w <= 128;
        bilinear_table(in_w, out_w, fused, tw);
        bilinear_table(in_h, out_h, fused, th);
        r->num_passes = 1;
    }
    r->table_w = tw;
    r->table_h = th;
    return CKEY_OK;
}

/* What a pass does, derived from the mode and which sides change. */
enum pass_kind { PASS_COPY, PASS_HORIZONTAL, PASS_VERTICAL, PASS_BILINEAR, PASS_L4_H, PASS_L4_V };

static enum pass_kind pass_kind(const ck_resize *r, int pass) {
    if (r->mode == CK_RESIZE_BILINEAR) return PASS_BILINEAR;
    if (r->mode == CK_RESIZE_LANCZOS4) return r->num_passes == 1 ? PASS_COPY : pass == 0 ? PASS_L4_H : PASS_L4_V;
    const int need_w = r->in_w != r->out_w, need_h = r->in_h != r->out_h;
    if (need_w && need_h) return pass == 0 ? PASS_HORIZONTAL : PASS_VERTICAL;
    if (need_w) return PASS_HORIZONTAL;
    if (need_h) return PASS_VERTICAL;
    return PASS_COPY;
}

int64_t ck_resize_pass_rows(const ck_resize *r, int pass) {
    if (pass < 0 || pass >= r->num_passes) return 0;
    switch (pass_kind(r, pass)) {
    case PASS_COPY:
    case PASS_L4_H:
    case PASS_HORIZONTAL: return (int64_t)r->channels * r->in_h;
    case PASS_VERTICAL:
    case PASS_L4_V:
    case PASS_BILINEAR: return (int64_t)r->channels * r->out_h;
    }
    return 0;
}

/* Rows of [channels * in_h] lines of width in_w -> lines of width out_w. */
static void run_horizontal(const ck_resize *r, const float *src, float *dst, int64_t begin,
                           int64_t end) {
    const size_t stride = (size_t)(2 + r->taps_w);
    for (int64_t row = begin; row < end; row++) {
        const float *s = src + (size_t)row * (size_t)r->in_w;
        float *d = dst + (size_t)row * (size_t)r->out_w;
        for (int32_t x = 0; x < r->out_w; x++) {
            const float *e = r->table_w + (size_t)x * stride;
            const float *w = e + 2;
            const float *t = s + (int64_t)e[0];
            const int32_t n = (int32_t)e[1];
            float acc = n > 0 ? t[0] * w[0] : 0.0f;
            for (int32_t j = 1; j < n; j++) acc += t[j] * w[j];
            d[x] = acc;
        }
    }
}

/* Output rows of [channels * out_h], each a weighted sum of whole input rows
 * (of width out_w, already resized horizontally or unchanged). */
static void run_vertical(const ck_resize *r, const float *src, float *dst, int64_t begin,
                         int64_t end) {
    const size_t stride = (size_t)(2 + r->taps_h);
    const size_t w = (size_t)r->out_w;
    for (int64_t row = begin; row < end; row++) {
        const int64_t c = row / r->out_h, y = row % r->out_h;
        const float *plane = src + (size_t)c * (size_t)r->in_h * w;
        const float *e = r->table_h + (size_t)y * stride;
        const float *wt = e + 2;
        const int32_t n = (int32_t)e[1];
        const float *s0 = plane + (size_t)(int64_t)e[0] * w;
        float *restrict d = dst + (size_t)row * w;
        if (n <= 0) {
            memset(d, 0, w * sizeof *d);
            continue;
        }
        const float w0 = wt[0];
        for (size_t x = 0; x < w; x++) d[x] = s0[x] * w0;
        for (int32_t j = 1; j < n; j++) {
            const float *restrict sj = s0 + (size_t)j * w;
            const float wj = wt[j];
            for (size_t x = 0; x < w; x++) d[x] += sj[x] * wj;
        }
    }
}

/* F.interpolate bilinear: out = h0 * (w0*a + w1*b) + h1 * (w0*c + w1*d). */
static void run_bilinear(const ck_resize *r, const float *src, float *dst, int64_t begin,
                         int64_t end) {
    const size_t in_w = (size_t)r->in_w;
    for (int64_t row = begin; row < end; row++) {
        const int64_t c = row / r->out_h, y = row % r->out_h;
        const float *plane = src + (size_t)c * (size_t)r->in_h * in_w;
        const float *eh = r->table_h + (size_t)y * 4;
        const float *r0 = plane + (size_t)(int64_t)eh[0] * in_w;
        const float *r1 = plane + (size_t)(int64_t)eh[1] * in_w;
        const float h0 = eh[2], h1 = eh[3];
        float *d = dst + (size_t)row * (size_t)r->out_w;
        for (int32_t x = 0; x < r->out_w; x++) {
            const float *ew = r->table_w + (size_t)x * 4;
            const int64_t x0 = (int64_t)ew[0], x1 = (int64_t)ew[1];
            const float w0 = ew[2], w1 = ew[3];
            const float t0 = r0[x0] * w0 + r0[x1] * w1;
            const float t1 = r1[x0] * w0 + r1[x1] * w1;
            d[x] = t0 * h0 + t1 * h1;
        }
    }
}

/* Lanczos-4 rows: 8 taps, summed from the first in order (OpenCV's
 * horizontal pass); taps outside [0, in_w) read the edge pixel. */
static void run_lanczos_h(const ck_resize *r, const float *src, float *dst, int64_t begin,
                          int64_t end) {
    const int32_t in_w = r->in_w;
    for (int64_t row = begin; row < end; row++) {
        const float *s = src + (size_t)row * (size_t)in_w;
        float *d = dst + (size_t)row * (size_t)r->out_w;
        for (int32_t x = 0; x < r->out_w; x++) {
            const float *e = r->table_w + (size_t)x * 10;
            const float *w = e + 2;
            const int32_t x0 = (int32_t)e[0];
            float acc;
            if (x0 >= 0 && x0 + 7 < in_w) {
                const float *t = s + x0;
                acc = t[0] * w[0];
                for (int j = 1; j < 8; j++) acc += t[j] * w[j];
            } else {
                acc = 0.0f;
                for (int j = 0; j < 8; j++) {
                    int32_t xi = x0 + j;
                    xi = xi < 0 ? 0 : xi >= in_w ? in_w - 1 : xi;
                    acc += s[xi] * w[j];
                }
            }
            d[x] = acc;
        }
    }
}

/* Lanczos-4 columns over the horizontally resized rows (width out_w): the
 * 8 weighted rows are summed from the last tap back to the first, the order
 * of OpenCV's vectorized vertical pass (a chain of multiply-adds ending in
 * tap 0), which is the one that agrees most often with cv2 bit for bit. */
static void run_lanczos_v(const ck_resize *r, const float *src, float *dst, int64_t begin,
                          int64_t end) {
    const size_t w = (size_t)r->out_w;
    for (int64_t row = begin; row < end; row++) {
        const int64_t c = row / r->out_h, y = row % r->out_h;
        const float *plane = src + (size_t)c * (size_t)r->in_h * w;
        const float *e = r->table_h + (size_t)y * 10;
        const float *wt = e + 2;
        const int32_t y0 = (int32_t)e[0];
        const float *rows[8];
        for (int k = 0; k < 8; k++) {
            int32_t yi = y0 + k;
            yi = yi < 0 ? 0 : yi >= r->in_h ? r->in_h - 1 : yi;
            rows[k] = plane + (size_t)yi * w;
        }
        float *restrict d = dst + (size_t)row * w;
        for (size_t x = 0; x < w; x++) d[x] = rows[7][x] * wt[7];
        for (int k = 6; k >= 0; k--) {
            const float *restrict sk = rows[k];
            const float wk = wt[k];
            for (size_t x = 0; x < w; x++) d[x] = sk[x] * wk + d[x];
        }
    }
}

void ck_resize_pass(const ck_resize *r, int pass, const float *src, float *dst,
                    int64_t begin, int64_t end) {
    if (pass < 0 || pass >= r->num_passes) return;
    const int last = pass == r->num_passes - 1;
    const float *in = pass == 0 ? src : r->tmp;
    float *out = last ? dst : r->tmp;
    switch (pass_kind(r, pass)) {
    case PASS_COPY: {
        const size_t w = (size_t)r->in_w;
        memcpy(out + (size_t)begin * w, in + (size_t)begin * w,
               (size_t)(end - begin) * w * sizeof(float));
        break;
    }
    case PASS_HORIZONTAL: run_horizontal(r, in, out, begin, end); break;
    case PASS_VERTICAL: run_vertical(r, in, out, begin, end); break;
    case PASS_BILINEAR: run_bilinear(r, in, out, begin, end); break;
    case PASS_L4_H: run_lanczos_h(r, in, out, begin, end); break;
    case PASS_L4_V: run_lanczos_v(r, in, out, begin, end); break;
    }
}

ckey_status ck_resize_run_cuda(const ck_resize *r, const float *table_w, const float *table_h, const float *src,
                               float *tmp, float *dst, void *stream, ckey_error *err) {
    for (int p = 0; p < r->num_passes; p++) {
        const int last = p == r->num_passes - 1;
        const float *in = p == 0 ? src : tmp;
        float *out = last ? dst : tmp;
        if (!last && !tmp) return ck_fail(err, CKEY_ERR_INVALID_ARG, "resize: two passes need an intermediate");
        int kind = CK_CUDA_RESIZE_COPY, taps = 0;
        switch (pass_kind(r, p)) {
        case PASS_COPY: kind = CK_CUDA_RESIZE_COPY; break;
        case PASS_HORIZONTAL: kind = CK_CUDA_RESIZE_H, taps = r->taps_w; break;
        case PASS_VERTICAL: kind = CK_CUDA_RESIZE_V, taps = r->taps_h; break;
        case PASS_BILINEAR: kind = CK_CUDA_RESIZE_BILINEAR; break;
        case PASS_L4_H: kind = CK_CUDA_RESIZE_L4_H; break;
        case PASS_L4_V: kind = CK_CUDA_RESIZE_L4_V; break;
        }
        /* rows of a vertical pass are out_w wide when a horizontal pass came first */
        const int w_in = p == 0 ? r->in_w : r->out_w;
        const int w_out = kind == CK_CUDA_RESIZE_V || kind == CK_CUDA_RESIZE_L4_V ? w_in : r->out_w;
        ckey_status st = ck_cuda_resize_pass(kind, r->channels, r->in_h, w_in, r->out_h, w_out, taps, table_w,
                                             table_h, in, out, stream, err);
        if (st) return st;
    }
    return CKEY_OK;
}

void ck_resize_run(const ck_resize *r, const float *src, float *dst) {
    for (int p = 0; p < r->num_passes; p++)
        ck_resize_pass(r, p, src, dst, 0, ck_resize_pass_rows(r, p));
}

typedef struct resize_job {
    const ck_resize *r;
    int pass;
    const float *src;
    float *dst;
} resize_job;

static void resize_rows(void *ctx, int64_t b, int64_t e, int thread) {
    (void)thread;
    const resize_job *j = ctx;
    ck_resize_pass(j->r, j->pass, j->src, j->dst, b, e);
}

void ck_resize_run_pool(const ck_resize *r, const float *src, float *dst, ck_pool *pool) {
    for (int p = 0; p < r->num_passes; p++) {
        resize_job j = {r, p, src, dst};
        ck_pool_for(pool, ck_resize_pass_rows(r, p), 16, resize_rows, &j);
    }
}
