/*
 * Frame pre/post-processing that must agree with the official PyTorch code to
 * float rounding: resize (torchvision / ATen bilinear, with and without
 * antialias), the sRGB transfer function and ImageNet normalization.
 *
 * Nothing here allocates: every function that needs work memory takes a
 * `scratch` pointer whose size in floats a *_scratch_floats() function gives,
 * so the session can carve it from its arena. Nothing here threads either:
 * the resize is split into passes over independent rows, which the caller may
 * spread over a pool (ck_resize_pass on disjoint row ranges).
 */
#ifndef CK_PIPELINE_H
#define CK_PIPELINE_H

#include <stddef.h>
#include <stdint.h>

#include "ckey.h"

struct ck_pool; /* core/core.h: threads that split work by rows */

/* ------------------------------------------------------------------ resize */

typedef enum ck_resize_mode {
    /*
     * torchvision `TF.resize(img, size, interpolation=BILINEAR)` on a float
     * tensor with the v2 default antialias=True, i.e. ATen
     * `_upsample_bilinear2d_aa(align_corners=False)`: separable, width first
     * then height; a triangle filter whose support widens with the scale on
     * downscale (plain bilinear on upscale, weights renormalized per output).
     * This is what the official engine applies to the plate and hint on the
     * way in, and to alpha/fg on the way out (GPU post-processing path).
     */
    CK_RESIZE_BILINEAR_AA = 0,
    /*
     * `F.interpolate(x, size, mode='bilinear', align_corners=False)` with no
     * antialias: two taps per axis, source index clamped at 0 (the decoder's
     * feature and logit upsampling inside the network).
     */
    CK_RESIZE_BILINEAR = 1,
    /*
     * cv2.resize(src, (w, h), interpolation=INTER_LANCZOS4) on a float32
     * image: what the official CPU post-processing (`_postprocess_opencv`)
     * applies to alpha and fg on the way out. 8 taps per axis around
     * floor(src) - 3 .. floor(src) + 4 with src = (i + 0.5) * (in / out) -
     * 0.5 (no antialias: the support does not widen on downscale), the
     * windowed-sinc weights normalized to sum 1, taps outside the image
     * clamped to the edge pixel (BORDER_REPLICATE). Separable: rows first
     * into a [channels, in_h, out_w] intermediate, then columns. Both sides
     * unchanged is a copy, as cv2.resize.
     */
    CK_RESIZE_LANCZOS4 = 2
} ck_resize_mode;

/* Largest side the resize accepts: indices are kept in float tables, which
 * are exact below 2^24. */
#define CK_RESIZE_MAX_SIDE (1 << 24)

/*
 * A prepared resize of a CHW float image [channels, in_h, in_w] to
 * [channels, out_h, out_w]. The weight tables (and, for the antialiased mode
 * when both sides change, the [channels, in_h, out_w] intermediate) live in
 * the caller's scratch, which must stay valid while the plan is used.
 */
typedef struct ck_resize {
    ck_resize_mode mode;
    int32_t channels, in_h, in_w, out_h, out_w;
    int32_t taps_w, taps_h;   /* floats per table entry after the 2-float header */
    const float *table_w;     /* out_w entries: AA {xmin, xsize, w[taps_w]}; plain {i0, i1, l0, l1};
                                 Lanczos4 {first tap (may be < 0), 0, w[8]} */
    const float *table_h;     /* out_h entries, same layout */
    float *tmp;               /* AA / Lanczos4 intermediate, NULL when one pass suffices */
    int32_t num_passes;       /* 1 or 2 */
} ck_resize;

/* Floats of scratch ck_resize_prepare needs; 0 when the arguments are invalid
 * (non-positive or above CK_RESIZE_MAX_SIDE). */
size_t ck_resize_scratch_floats(int32_t channels, int32_t in_h, int32_t in_w,
                                int32_t out_h, int32_t out_w, ck_resize_mode mode);

/* Compute the weight tables into `scratch`. CKEY_ERR_INVALID_ARG on bad sizes. */
ckey_status ck_resize_prepare(ck_resize *r, int32_t channels, int32_t in_h, int32_t in_w,
                              int32_t out_h, int32_t out_w, ck_resize_mode mode,
                              float *scratch);

/*
 * Pass `pass` (0 .. num_passes-1) covers ck_resize_pass_rows() independent
 * rows; rows [begin, end) of it may run on any thread, and every row of a pass
 * must finish before the next pass starts. Pass 0 reads `src`; the last pass
 * writes `dst`. `src` and `dst` must not overlap.
 */
int64_t ck_resize_pass_rows(const ck_resize *r, int pass);
void ck_resize_pass(const ck_resize *r, int pass, const float *src, float *dst,
                    int64_t begin, int64_t end);

/* All passes on the calling thread. */
void ck_resize_run(const ck_resize *r, const float *src, float *dst);

/* All passes on a CUDA stream: src, tmp (the intermediate, sized as r->tmp;
 * NULL when one pass suffices) and dst in device memory, table_w / table_h
 * the device copies of r's tables (same sizes). The same arithmetic in the
 * same order as ck_resize_run. */
ckey_status ck_resize_run_cuda(const ck_resize *r, const float *table_w, const float *table_h, const float *src,
                               float *tmp, float *dst, void *stream, ckey_error *err);
/* All passes, each split by rows over `pool` (NULL: the calling thread);
 * the same floats as ck_resize_run. */
void ck_resize_run_pool(const ck_resize *r, const float *src, float *dst, struct ck_pool *pool);

/* ------------------------------------------------------------------- color */

/*
 * The piecewise sRGB transfer function exactly as upstream color_utils:
 * the input is first clamped below at 0 (no upper clamp, so values > 1 follow
 * the power curve), then
 *   linear -> sRGB: x <= 0.0031308 ? 12.92 x : 1.055 x^(1/2.4) - 0.055
 *   sRGB -> linear: x <= 0.04045   ? x / 12.92 : ((x + 0.055) / 1.055)^2.4
 * computed in float32 as PyTorch does for a float32 tensor. NaN stays NaN.
 */
float ck_linear_to_srgb1(float x);
float ck_srgb_to_linear1(float x);
void ck_linear_to_srgb(float *x, size_t n);   /* in place */
void ck_srgb_to_linear(float *x, size_t n);   /* in place */
/* ck_linear_to_srgb split over `pool` (NULL: the calling thread). */
void ck_linear_to_srgb_pool(float *x, size_t n, struct ck_pool *pool);
/* out[i] = powf(t[i], p), the same floats, several times faster (color.c);
 * t and out may be the same array. */
void ck_powf_array(const float *t, float *out, size_t n, float p);

/* ImageNet statistics the network was trained with. */
extern const float ck_imagenet_mean[3];
extern const float ck_imagenet_std[3];

/* In place on a [3, plane] image: (x - mean[c]) / std[c], as TF.normalize
 * (a true division, not a multiply by the reciprocal). */
void ck_imagenet_normalize(float *chw, size_t plane);

/* ----------------------------------------------------- official frame path */

/*
 * Build the network input x [4, S, S] from a plate `rgb` [3, h, w] and a hint
 * [h, w], both in [0, 1], as the official `_preprocess_input`: antialiased
 * bilinear resize of each to S x S, linear -> sRGB after the resize when the
 * plate is linear, ImageNet-normalize channels 0..2, hint into channel 3
 * (not normalized).
 */
size_t ck_preprocess_scratch_floats(int32_t h, int32_t w, int32_t size);
ckey_status ck_preprocess(const float *rgb, const float *hint, int32_t h, int32_t w,
                          int32_t size, int input_is_linear, float *x, float *scratch);
/* The same, each resize split by rows over `pool` (NULL: the calling thread). */
ckey_status ck_preprocess_pool(const float *rgb, const float *hint, int32_t h, int32_t w, int32_t size,
                               int input_is_linear, float *x, float *scratch, struct ck_pool *pool);

/*
 * Resize the network's alpha [S, S] and fg [3, S, S] back to the plate size
 * h x w. `mode` CK_RESIZE_BILINEAR_AA is the official GPU post-processing
 * (`_postprocess_torch`: `TF.resize` bilinear, antialiased when the plate is
 * smaller than S); CK_RESIZE_LANCZOS4 the official CPU post-processing
 * (`_postprocess_opencv`: cv2.resize INTER_LANCZOS4).
 */
/* How a session resizes alpha and fg back to the plate (its resize_back option). */
ck_resize_mode ck_session_resize_back(const ckey_session *s);

size_t ck_postprocess_scratch_floats(int32_t size, int32_t h, int32_t w, ck_resize_mode mode);
ckey_status ck_postprocess(const float *alpha, const float *fg, int32_t size, int32_t h,
                           int32_t w, ck_resize_mode mode, float *alpha_out, float *fg_out,
                           float *scratch);
/* The same, each resize split by rows over `pool` (NULL: the calling thread). */
ckey_status ck_postprocess_pool(const float *alpha, const float *fg, int32_t size, int32_t h, int32_t w,
                                ck_resize_mode mode, float *alpha_out, float *fg_out, float *scratch,
                                struct ck_pool *pool);

#endif
