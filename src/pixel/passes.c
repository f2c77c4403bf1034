/*
 * Public wrapper of the official per-frame post-processing (post.h):
 * ckey_post_passes -> ck_post_frame. The Matte/ and FG/ passes are the raw
 * inputs, so no copies are made here; only Processed and Comp are written.
 */
#include <stdint.h>
#include <string.h>

#include "ckey_clip.h"
#include "ckey.h"
#include "core/core.h"
#include "pixel/post.h"

void ckey_post_options_default(ckey_post_options *o) {
    if (!o) return;
    ck_post_options po;
    ck_post_options_default(&po);
    memset(o, 0, sizeof *o);
    o->despill_strength = (float)po.despill_strength;
    o->despeckle = po.despeckle ? 1 : 0;
    o->despeckle_area = po.despeckle_area;
    o->despeckle_mode = CKEY_DESPECKLE_OPENCV;
}

static int dims_valid(int32_t width, int32_t height) {
    return width > 0 && height > 0 && width <= CKEY_IMAGE_MAX_SIDE && height <= CKEY_IMAGE_MAX_SIDE &&
           (int64_t)width * height <= CKEY_IMAGE_MAX_PIXELS;
}

void ck_post_options_from(const ckey_post_options *o, ck_post_options *po) {
    ck_post_options_default(po);
    po->despill_strength = (double)o->despill_strength;
    po->despeckle = o->despeckle != 0;
    po->despeckle_area = o->despeckle_area;
    po->despeckle_mode = o->despeckle_mode == CKEY_DESPECKLE_TORCH ? CK_DESPECKLE_TORCH : CK_DESPECKLE_OPENCV;
}

size_t ckey_post_scratch_bytes(int32_t width, int32_t height, const ckey_post_options *o) {
    if (!o || !dims_valid(width, height)) return SIZE_MAX;
    ck_post_options po;
    ck_post_options_from(o, &po);
    return ck_post_frame_scratch_bytes(height, width, &po);
}

ckey_status ckey_post_passes(const float *alpha, const float *fg, int32_t width, int32_t height,
                             const ckey_post_options *o, float *processed, float *comp,
                             void *scratch, ckey_error *err) {
    return ck_post_passes_pool(alpha, fg, width, height, o, processed, comp, scratch, NULL, err);
}

ckey_status ck_post_passes_pool(const float *alpha, const float *fg, int32_t width, int32_t height,
                                const ckey_post_options *o, float *processed, float *comp, void *scratch,
                                ck_pool *pool, ckey_error *err) {
    ck_error_clear(err);
    if (!alpha || !fg || !o || !processed)
        return ck_fail(err, CKEY_ERR_INVALID_ARG, "ckey_post_passes: NULL alpha, fg, options or processed");
    if (!dims_valid(width, height))
        return ck_fail(err, CKEY_ERR_INVALID_ARG, "ckey_post_passes: bad size %d x %d", (int)width,
                       (int)height);
    if (!(o->despill_strength >= 0.0f && o->despill_strength <= 1.0f))
        return ck_fail(err, CKEY_ERR_INVALID_ARG,
                       "ckey_post_passes: despill strength %g is outside 0 .. 1",
                       (double)o->despill_strength);
    if (o->despeckle_mode != CKEY_DESPECKLE_OPENCV && o->despeckle_mode != CKEY_DESPECKLE_TORCH)
        return ck_fail(err, CKEY_ERR_INVALID_ARG, "ckey_post_passes: despeckle mode %d is neither OPENCV nor TORCH",
                       (int)o->despeckle_mode);
    if (o->despeckle && o->despeckle_area < 0)
        return ck_fail(err, CKEY_ERR_INVALID_ARG, "ckey_post_passes: negative despeckle area %lld",
                       (long long)o->despeckle_area);
    ck_post_options po;
    ck_post_options_from(o, &po);
    po.pool = pool;
    if (ck_post_frame_scratch_bytes(height, width, &po) > 0 && !scratch)
        return ck_fail(err, CKEY_ERR_INVALID_ARG,
                       "ckey_post_passes: despeckle needs scratch (ckey_post_scratch_bytes)");
    ckey_status st = ck_post_frame(alpha, fg, height, width, &po, NULL, NULL, processed, comp, scratch);
    if (st != CKEY_OK) return ck_fail(err, st, "ckey_post_passes: post-processing failed (%s)",
                                      ckey_status_name(st));
    return CKEY_OK;
}
