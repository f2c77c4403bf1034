/* Keying one frame on a session: the official pre-processing to S x S, the
 * network, and the resize back to the plate (frame.c's steps around
 * ck_session_run). */
#include "ckey_media.h"
#include "model/session.h"
#include "pixel/pixel.h"

ck_resize_mode ck_session_resize_back(const ckey_session *s) {
    return ck_session_options(s)->resize_back == CKEY_RESIZE_BACK_BILINEAR ? CK_RESIZE_BILINEAR_AA
                                                                            : CK_RESIZE_LANCZOS4;
}

int64_t ckey_session_max_plate_pixels(const ckey_session *s) {
    (void)s;
    return CKEY_IMAGE_MAX_PIXELS;
}

ckey_status ckey_session_key(ckey_session *s, const ckey_frame *fr, float *alpha_out, float *fg_out,
                             ckey_error *err) {
    if (!s || !fr || !fr->rgb || !fr->hint || !alpha_out || !fg_out)
        return ck_fail(err, CKEY_ERR_INVALID_ARG, "ckey_session_key: NULL argument");
    const int32_t w = fr->width, h = fr->height, S = ckey_session_size(s);
    if (w < 1 || h < 1 || w > CKEY_IMAGE_MAX_SIDE || h > CKEY_IMAGE_MAX_SIDE ||
        (int64_t)w * h > CKEY_IMAGE_MAX_PIXELS)
        return ck_fail(err, CKEY_ERR_INVALID_ARG, "plate %d x %d: outside 1..%d per side, %lld pixels", w, h,
                       CKEY_IMAGE_MAX_SIDE, (long long)CKEY_IMAGE_MAX_PIXELS);
    /* The work buffers depend on the plate size: the first frame of a shot
     * sizes them, every later frame of that size reuses them. */
    const ck_resize_mode back = ck_session_resize_back(s);
    size_t need = CK_MAX(ck_preprocess_scratch_floats(h, w, S), ck_postprocess_scratch_floats(S, h, w, back));
    if (need == 0) return ck_fail(err, CKEY_ERR_INVALID_ARG, "plate %d x %d: cannot be resized to %d", w, h, S);
    float *work = ck_session_work(s, need, err);
    if (!work) return CKEY_ERR_NOMEM;
    float *x = ck_session_input(s);
    ckey_status st = ck_preprocess_pool(fr->rgb, fr->hint, h, w, S, fr->input_is_linear, x, work, ck_session_pool(s));
    if (st) return ck_fail(err, st, "plate %d x %d: preprocessing failed", w, h);
    ckey_forward_result r;
    if ((st = ck_session_run(s, &r, err))) return st;
    st = ck_postprocess_pool(r.alpha, r.fg, S, h, w, back, alpha_out, fg_out, work, ck_session_pool(s));
    if (st) return ck_fail(err, st, "plate %d x %d: postprocessing failed", w, h);
    return CKEY_OK;
}
