/*
 * ckey_encode_videos: the videos of a keyed clip made from its pass files
 * (public API in ckey_clip.h), the final step of a clip keyed in chunks.
 *
 * Each frame's FG/<stem>.exr, Processed/<stem>.exr and Comp/<stem>.png are
 * read back and handed, in frame order, to the video tee
 * (ckey_sink_open_video_tee) over a sink that writes nothing. The tee makes
 * its videos from the passes as their files store them (HALF, 8-bit Comp),
 * so this writes the same bytes as a `ckey key --video-out` run that keyed
 * the clip in one go.
 *
 * The ProRes needs the despill strength the clip was keyed with (its RGB is
 * despill(FG)); each frame is checked against its Processed pass, which is
 * srgb_to_linear(despill(FG)) * alpha: a clear mismatch means another
 * strength, and is an error rather than a video with the wrong colours.
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "ckey_clip.h"
#include "ckey.h"
#include "core/core.h"
#include "media/image.h"
#include "pixel/pixel.h"
#include "pixel/post.h"

/* The tee's inner sink: the passes are already on disk. */
static ckey_status null_write(void *self, const ckey_shot_frame *f, const ckey_shot_passes *p,
                              ckey_error *err) {
    (void)self, (void)f, (void)p, (void)err;
    return CKEY_OK;
}

/* The largest difference between the stored Processed RGB and the one
 * recomputed from the stored FG and alpha, above which the strengths
 * differ: the HALF roundings of FG, alpha and Processed account for at most
 * ~2.5e-3 (values up to ~1.2, the slope of srgb_to_linear up to ~2.4). */
#define DESPILL_TOLERANCE (1.0f / 64.0f)

/* Processed RGB against srgb_to_linear(despill(fg)) * alpha, as the post
 * passes compute it; 0 when they agree, else 1 with the worst pixel in *at
 * and its difference (relative above 1) in *diff. */
static int despill_mismatch(const float *fg, const float *processed, size_t n, float strength,
                            size_t *at, float *diff) {
    float worst = 0;
    size_t wi = 0;
    const float *pa = processed + 3 * n;
    for (size_t i = 0; i < n; i++) {
        const float a = pa[i];
        if (!(a > 0.0f)) continue;
        /* ck_despill on one pixel: three planes of one sample */
        float c[3] = {fg[i], fg[n + i], fg[2 * n + i]};
        ck_despill(c, 1, strength);
        for (int ch = 0; ch < 3; ch++) {
            const float want = ck_srgb_to_linear1(c[ch]) * a;
            const float got = processed[(size_t)ch * n + i];
            const float m = fabsf(want) > 1.0f ? fabsf(want) : 1.0f;
            const float d = fabsf(got - want) / m;
            if (!(d <= worst)) {
                worst = d == d ? d : INFINITY;
                wi = i;
            }
        }
    }
    *at = wi;
    *diff = worst;
    return worst > DESPILL_TOLERANCE;
}

/* One frame's passes from pass_dir into the images (freed by the caller). */
static ckey_status read_frame(const char *pass_dir, const ckey_shot_frame *f, ckey_image *fg,
                              ckey_image *processed, ckey_image *comp, ckey_error *err) {
    static const char *const dirs[3] = {"FG", "Processed", "Comp"};
    static const char *const ext[3] = {"exr", "exr", "png"};
    static const ckey_image_kind kinds[3] = {CKEY_IMAGE_RGB, CK_IMAGE_RGBA, CKEY_IMAGE_RGB};
    ckey_image *img[3] = {fg, processed, comp};
    for (int k = 0; k < 3; k++) {
        const size_t cap = strlen(pass_dir) + strlen(dirs[k]) + strlen(f->stem) + 8;
        char *path = malloc(cap);
        if (!path) return ck_fail(err, CKEY_ERR_NOMEM, "out of memory");
        const size_t ol = strlen(pass_dir);
        snprintf(path, cap, "%s%s%s/%s.%s", pass_dir, ol && pass_dir[ol - 1] == '/' ? "" : "/",
                 dirs[k], f->stem, ext[k]);
        ckey_error e;
        ck_error_clear(&e);
        ckey_status st = ck_image_read_path(path, kinds[k], CK_INPUT_TIMEOUT_MS, img[k], &e);
        if (st == CKEY_OK && k > 0 &&
            (img[k]->width != img[0]->width || img[k]->height != img[0]->height))
            st = ck_fail(&e, CKEY_ERR_FORMAT, "%s is %d x %d, but its FG pass is %d x %d", path,
                         (int)img[k]->width, (int)img[k]->height, (int)img[0]->width,
                         (int)img[0]->height);
        free(path);
        /* the readers name the file; add the frame */
        if (st != CKEY_OK) return ck_fail(err, st, "frame %lld: %s", (long long)f->number, e.message);
    }
    return CKEY_OK;
}

ckey_status ckey_encode_videos(const char *pass_dir, const ckey_shot_frame *frames, int64_t count,
                               const ckey_encode_options *o, ckey_error *err) {
    if (!pass_dir || !o || count < 1 || !frames)
        return ck_fail(err, CKEY_ERR_INVALID_ARG, "ckey_encode_videos: bad arguments");
    ckey_sink inner, tee;
    memset(&inner, 0, sizeof inner);
    inner.write = null_write;
    ckey_status st = ckey_sink_open_video_tee(&inner, &o->video, &tee, err);
    if (st != CKEY_OK) return st;
    /* the videos' pixel conversions split over every core, as a keying run
     * splits them over its pool (the same frames on any number of threads) */
    ck_pool *pool = NULL;
    st = ck_pool_create(0, &pool, err);
    if (st == CKEY_OK && tee.begin) st = tee.begin(tee.self, err);
    const float strength = o->video.despill_strength;
    ckey_image fg, processed, comp;
    memset(&fg, 0, sizeof fg);
    memset(&processed, 0, sizeof processed);
    memset(&comp, 0, sizeof comp);
    for (int64_t i = 0; st == CKEY_OK && i < count; i++) {
        const ckey_shot_frame *f = &frames[i];
        if (o->cancel && o->cancel(o->cancel_user)) {
            st = ck_fail(err, CKEY_ERR_CANCELLED, "interrupted: stopped before frame %lld",
                         (long long)f->number);
            break;
        }
        ckey_image_free(&fg);
        ckey_image_free(&processed);
        ckey_image_free(&comp);
        st = read_frame(pass_dir, f, &fg, &processed, &comp, err);
        if (st != CKEY_OK) break;
        const int32_t w = fg.width, h = fg.height;
        const size_t n = (size_t)w * (size_t)h;
        size_t at = 0;
        float diff = 0;
        if (o->video.fg_alpha && despill_mismatch(fg.data, processed.data, n, strength, &at, &diff)) {
            st = ck_fail(err, CKEY_ERR_INVALID_ARG,
                         "frame %lld: the Processed pass is not the FG pass despilled at strength "
                         "%g (a difference of %.3g at x %zu, y %zu): the clip was keyed with "
                         "another --despill; give the encode the same --despill",
                         (long long)f->number, (double)strength, (double)diff, at % (size_t)w,
                         at / (size_t)w);
            break;
        }
        const ckey_shot_passes p = {.width = w, .height = h, .fg = fg.data, .processed = processed.data,
                                    .comp = comp.data, .pool = pool};
        ckey_error we;
        ck_error_clear(&we);
        st = tee.write(tee.self, f, &p, &we);
        if (st == CKEY_OK) st = tee.write_ordered(tee.self, f, &p, &we);
        if (st != CKEY_OK) {
            ck_fail(err, st, "frame %lld: %s", (long long)f->number, we.message);
            break;
        }
        if (o->progress) o->progress(o->progress_user, i + 1, count);
    }
    ckey_image_free(&fg);
    ckey_image_free(&processed);
    ckey_image_free(&comp);
    if (st == CKEY_OK && tee.finish) st = tee.finish(tee.self, err);
    ckey_sink_close(&tee); /* unfinished: the temporary files are removed */
    ck_pool_free(pool);
    return st;
}
