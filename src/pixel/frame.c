/*
 * The official per-frame pre- and post-processing (inference_engine.py
 * `_preprocess_input` and the resize back of `_postprocess_torch` or
 * `_postprocess_opencv`) built from the
 * resize and color primitives. Serial; a threaded caller can use the same
 * steps through ck_resize_pass.
 */
#include "pixel/pixel.h"

static size_t max_size(size_t a, size_t b) { return a > b ? a : b; }

size_t ck_preprocess_scratch_floats(int32_t h, int32_t w, int32_t size) {
    const size_t a = ck_resize_scratch_floats(3, h, w, size, size, CK_RESIZE_BILINEAR_AA);
    const size_t b = ck_resize_scratch_floats(1, h, w, size, size, CK_RESIZE_BILINEAR_AA);
    return a && b ? max_size(a, b) : 0;
}

ckey_status ck_preprocess(const float *rgb, const float *hint, int32_t h, int32_t w,
                          int32_t size, int input_is_linear, float *x, float *scratch) {
    if (!rgb || !hint || !x || !scratch || !ck_preprocess_scratch_floats(h, w, size))
        return CKEY_ERR_INVALID_ARG;
    const size_t plane = (size_t)size * (size_t)size;
    ck_resize r;
    /* The image is resized in whatever space it arrives in; a linear plate
     * is converted to sRGB only afterwards, as upstream does to keep
     * highlights' energy through the filter. */
    ckey_status st = ck_resize_prepare(&r, 3, h, w, size, size, CK_RESIZE_BILINEAR_AA, scratch);
    if (st != CKEY_OK) return st;
    ck_resize_run(&r, rgb, x);
    if (input_is_linear) ck_linear_to_srgb(x, 3 * plane);
    ck_imagenet_normalize(x, plane);
    st = ck_resize_prepare(&r, 1, h, w, size, size, CK_RESIZE_BILINEAR_AA, scratch);
    if (st != CKEY_OK) return st;
    ck_resize_run(&r, hint, x + 3 * plane);
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
    if (!alpha || !fg || !alpha_out || !fg_out || !scratch ||
        !ck_postprocess_scratch_floats(size, h, w, mode))
        return CKEY_ERR_INVALID_ARG;
    /* Upstream resizes the [1, S, S] alpha and the [3, S, S] fg separately
     * (cv2 on HWC arrays: the channels of a pixel share their weights, so
     * planar is the same arithmetic). */
    ck_resize r;
    ckey_status st = ck_resize_prepare(&r, 1, size, size, h, w, mode, scratch);
    if (st != CKEY_OK) return st;
    ck_resize_run(&r, alpha, alpha_out);
    st = ck_resize_prepare(&r, 3, size, size, h, w, mode, scratch);
    if (st != CKEY_OK) return st;
    ck_resize_run(&r, fg, fg_out);
    return CKEY_OK;
}
