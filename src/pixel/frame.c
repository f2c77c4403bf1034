/*
 * The official per-frame pre- and post-processing (inference_engine.py
 * `_preprocess_input` and the resize back of `_postprocess_torch` or
 * `_postprocess_opencv`) built from the
 * resize and color primitives, each split by rows over an optional pool.
 */
#include "core/core.h"
#include "pixel/pixel.h"

static size_t max_size(size_t a, size_t b) { return a > b ? a : b; }

size_t ck_preprocess_scratch_floats(int32_t h, int32_t w, int32_t size) {
    const size_t a = ck_resize_scratch_floats(3, h, w, size, size, CK_RESIZE_BILINEAR_AA);
    const size_t b = ck_resize_scratch_floats(1, h, w, size, size, CK_RESIZE_BILINEAR_AA);
    return a && b ? max_size(a, b) : 0;
}

ckey_status ck_preprocess(const float *rgb, const float *hint, int32_t h, int32_t w,
                          int32_t size, int input_is_linear, float *x, float *scratch) {
    return ck_preprocess_pool(rgb, hint, h, w, size, input_is_linear, x, scratch, NULL);
}

ckey_status ck_preprocess_pool(const float *rgb, const float *hint, int32_t h, int32_t w, int32_t size,
                               int input_is_linear, float *x, float *scratch, ck_pool *pool) {
    if (!rgb || !hint || !x || !scratch || !ck_preprocess_scratch_floats(h, w, size))
        return CKEY_ERR_INVALID_ARG;
    const size_t plane = (size_t)size * (size_t)size;
    ck_resize r;
    /* The image is resized in whatever space it arrives in; a linear plate
     * is converted to sRGB only afterwards, as upstream does to keep
     * highlights' energy through the filter. */
    ckey_status st = ck_resize_prepare(&r, 3, h, w, size, size, CK_RESIZE_BILINEAR_AA, scratch);
    if (st != CKEY_OK) return st;
    ck_resize_run_pool(&r, rgb, x, pool);
    if (input_is_linear) ck_linear_to_srgb_pool(x, 3 * plane, pool);
    ck_imagenet_normalize(x, plane);
    st = ck_resize_prepare(&r, 1, h, w, size, size, CK_RESIZE_BILINEAR_AA, scratch);
    if (st != CKEY_OK) return st;
    ck_resize_run_pool(&r, hint, x + 3 * plane, pool);
    return CKEY_OK;
}

size_t ck_postprocess_scratch_floats(int32_t size, int32_t h, int32_t w, ck_resize_mode mode) {
    if (mode != CK_RESIZE_BILINEAR_AA && mode != CK_RESIZE_LANCZOS4) return 0;
    const size_t a = ck_resize_scratch_floats(3, size, size, h, w, mode);
    const size_t b = ck_resize_scratch_floats(1, size, size, h, w, mode);
    return a && b ? max_size(a, b) : 0;
}

ckey_status ck_postprocess(const float *alpha, const float *fg, int32_t size, int32_t h,
                           int32_t w, ck_resize_mode mode, float *alpha_out, float *fg_out,
                           float *scratch) {
    return ck_postprocess_pool(alpha, fg, size, h, w, mode, alpha_out, fg_out, scratch, NULL);
}

ckey_status ck_postprocess_pool(const float *alpha, const float *fg, int32_t size, int32_t h, int32_t w,
                                ck_resize_mode mode, float *alpha_out, float *fg_out, float *scratch,
                                ck_pool *pool) {
    if (!alpha || !fg || !alpha_out || !fg_out || !scratch ||
        !ck_postprocess_scratch_floats(size, h, w, mode))
        return CKEY_ERR_INVALID_ARG;
    /* Upstream resizes the [1, S, S] alpha and the [3, S, S] fg separately
     * (cv2 on HWC arrays: the channels of a pixel share their weights, so
     * planar is the same arithmetic). */
    ck_resize r;
    ckey_status st = ck_resize_prepare(&r, 1, size, size, h, w, mode, scratch);
    if (st != CKEY_OK) return st;
    ck_resize_run_pool(&r, alpha, alpha_out, pool);
    st = ck_resize_prepare(&r, 3, size, size, h, w, mode, scratch);
    if (st != CKEY_OK) return st;
    ck_resize_run_pool(&r, fg, fg_out, pool);
    return CKEY_OK;
}
