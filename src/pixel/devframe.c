/* The frame path on a device session (devframe.h): frame.c's and post.c's
 * steps around the network, queued on the ck_devframe's own stream (the
 * network on the session's). */
#include <stdlib.h>
#include <string.h>

#include "ckey_media.h"
#include "core/core.h"
#include "cuda/kernels.h"
#include "model/session.h"
#include "pixel/devframe.h"
#include "pixel/pixel.h"

/* The four resizes of a frame: plate and hint to S, alpha and fg back. */
enum { RZ_RGB, RZ_HINT, RZ_ALPHA, RZ_FG, RZ_COUNT };

typedef struct dev_resize {
    ck_resize r;   /* its tables point into `host` */
    float *host;   /* the plan's scratch: tables, then room for the intermediate (unused here) */
    float *dev;    /* the device copy: the same tables at the same offsets, and the intermediate */
    size_t floats;
} dev_resize;

struct ck_devframe {
    ckey_session *s;
    void *stream;            /* its own: frames of other ck_devframes overlap it */
    void *wait;              /* a blocking event: the waits on the stream (ck_cuda_wait) */
    int32_t device_index, S;
    ck_resize_mode back;
    int32_t w, h;            /* the plate size the resize plans are for; 0 before the first frame */
    size_t cap;              /* pixels the plate-size buffers hold */
    float *d_rgb, *d_hint;   /* [3, h, w], [h, w]: plate and hint, after the network fg and alpha
                                (d_rgb then the stored processed and comp: ck_devframe_key) */
    float *d_proc, *d_comp;  /* [4, h, w], [3, h, w] */
    void *d_post;            /* ck_post_frame_cuda's scratch */
    size_t d_post_cap;
    float *d_x;              /* [4, S, S]: the network's input */
    void *d_pack;            /* packed plate, then packed hint (ck_devframe_job.*_packed) */
    size_t d_pack_cap;
    dev_resize rz[RZ_COUNT];
};

/* The post scratch, which after the post takes the stored fg and alpha
 * (HALF: 8 bytes a pixel; ck_devframe_key). */
static size_t post_scratch_bytes(int32_t w, int32_t h) {
    const size_t post = ck_post_frame_cuda_device_bytes(h, w), stored = 8 * (size_t)w * (size_t)h;
    return post > stored ? post : stored;
}

int ck_devframe_available(const ckey_session *s) { return ck_session_stream(s) != NULL; }

void ck_devframe_bytes(int32_t w, int32_t h, int32_t S, ck_resize_mode back, int64_t *device, int64_t *host) {
    const size_t rz[RZ_COUNT] = {ck_resize_scratch_floats(3, h, w, S, S, CK_RESIZE_BILINEAR_AA),
                                 ck_resize_scratch_floats(1, h, w, S, S, CK_RESIZE_BILINEAR_AA),
                                 ck_resize_scratch_floats(1, S, S, h, w, back),
                                 ck_resize_scratch_floats(3, S, S, h, w, back)};
    *device = *host = -1;
    if (!rz[0] || !rz[1] || !rz[2] || !rz[3]) return;
    const int64_t F = (int64_t)sizeof(float), P = (int64_t)w * h;
    const int64_t tables = (int64_t)(rz[0] + rz[1] + rz[2] + rz[3]) * F;
    /* prepare_size's buffers: rgb 3 + hint 1 + processed 4 + comp 3 planes */
    /* + the packed staging: a plate and a hint of up to 4 16-bit samples a pixel */
    *device = 11 * P * F + tables + (int64_t)post_scratch_bytes(w, h) + 4 * (int64_t)S * S * F + 16 * P + 256;
    *host = tables;
}

void ck_devframe_free(ck_devframe *df) {
    if (!df) return;
    ck_cuda_set_device(df->device_index, NULL);
    for (int i = 0; i < RZ_COUNT; i++) {
        free(df->rz[i].host);
        ck_cuda_free(df->rz[i].dev);
    }
    ck_cuda_free(df->d_rgb);
    ck_cuda_free(df->d_hint);
    ck_cuda_free(df->d_proc);
    ck_cuda_free(df->d_comp);
    ck_cuda_free(df->d_post);
    ck_cuda_free(df->d_x);
    ck_cuda_free(df->d_pack);
    ck_cuda_event_destroy(df->wait);
    if (df->stream) ck_cuda_stream_destroy(df->stream);
    free(df);
}

ckey_status ck_devframe_create(ckey_session *s, ck_devframe **out, ckey_error *err) {
    *out = NULL;
    if (!ck_devframe_available(s))
        return ck_fail(err, CKEY_ERR_UNSUPPORTED, "the device frame path needs a GPU session");
    ck_devframe *df = calloc(1, sizeof *df);
    if (!df) return ck_fail(err, CKEY_ERR_NOMEM, "out of memory");
    df->s = s;
    df->device_index = ck_session_options(s)->device_index;
    df->S = ckey_session_size(s);
    df->back = ck_session_resize_back(s);
    ckey_status st = ck_cuda_set_device(df->device_index, err);
    if (!st) st = ck_cuda_stream_create(&df->stream, err);
    if (!st) st = ck_cuda_event_create_blocking(&df->wait, err);
    if (!st) st = ck_cuda_malloc((void **)&df->d_x, (size_t)4 * (size_t)df->S * (size_t)df->S * sizeof(float), err);
    if (st) {
        ck_devframe_free(df);
        return st;
    }
    *out = df;
    return CKEY_OK;
}

/* Device memory of at least `bytes` at *p (contents not kept). */
static ckey_status dev_grow(void **p, size_t *cap, size_t bytes, ckey_error *err) {
    if (bytes <= *cap) return CKEY_OK;
    ck_cuda_free(*p);
    *p = NULL;
    *cap = 0;
    ckey_status st = ck_cuda_malloc(p, bytes, err);
    if (!st) *cap = bytes;
    return st;
}

/* The resize plans and buffers for a w x h plate (kept while the size stays). */
static ckey_status prepare_size(ck_devframe *df, int32_t w, int32_t h, ckey_error *err) {
    if (w == df->w && h == df->h) return CKEY_OK;
    df->w = df->h = 0;
    const int32_t S = df->S;
    const struct {
        int32_t ch, ih, iw, oh, ow;
        ck_resize_mode mode;
    } spec[RZ_COUNT] = {{3, h, w, S, S, CK_RESIZE_BILINEAR_AA},
                        {1, h, w, S, S, CK_RESIZE_BILINEAR_AA},
                        {1, S, S, h, w, df->back},
                        {3, S, S, h, w, df->back}};
    ckey_status st;
    for (int i = 0; i < RZ_COUNT; i++) {
        dev_resize *z = &df->rz[i];
        const size_t f = ck_resize_scratch_floats(spec[i].ch, spec[i].ih, spec[i].iw, spec[i].oh, spec[i].ow,
                                                  spec[i].mode);
        if (f == 0) return ck_fail(err, CKEY_ERR_INVALID_ARG, "plate %d x %d: cannot be resized to %d", w, h, S);
        if (f > z->floats) {
            free(z->host);
            z->host = malloc(f * sizeof(float));
            size_t cap = 0;
            ck_cuda_free(z->dev);
            z->dev = NULL;
            z->floats = 0;
            if (!z->host) return ck_fail(err, CKEY_ERR_NOMEM, "out of memory for the resize tables");
            if ((st = dev_grow((void **)&z->dev, &cap, f * sizeof(float), err))) return st;
            z->floats = f;
        }
        if ((st = ck_resize_prepare(&z->r, spec[i].ch, spec[i].ih, spec[i].iw, spec[i].oh, spec[i].ow, spec[i].mode,
                                    z->host)))
            return ck_fail(err, st, "plate %d x %d: cannot be resized to %d", w, h, S);
        /* the tables come first in the scratch, the intermediate after them; no
         * frame is in flight here (each ends with its stream synchronized) */
        const size_t tables = z->r.tmp ? (size_t)(z->r.tmp - z->host) : f;
        if ((st = ck_cuda_copy(z->dev, z->host, tables * sizeof(float), 1, err))) return st;
    }
    const size_t n = (size_t)w * (size_t)h;
    if (n > df->cap) {
        size_t c0 = 0, c1 = 0, c2 = 0, c3 = 0;
        ck_cuda_free(df->d_rgb), ck_cuda_free(df->d_hint), ck_cuda_free(df->d_proc), ck_cuda_free(df->d_comp);
        df->d_rgb = df->d_hint = df->d_proc = df->d_comp = NULL;
        df->cap = 0;
        if ((st = dev_grow((void **)&df->d_rgb, &c0, 3 * n * sizeof(float), err)) ||
            (st = dev_grow((void **)&df->d_hint, &c1, n * sizeof(float), err)) ||
            (st = dev_grow((void **)&df->d_proc, &c2, 4 * n * sizeof(float), err)) ||
            (st = dev_grow((void **)&df->d_comp, &c3, 3 * n * sizeof(float), err)))
            return st;
        df->cap = n;
    }
    if ((st = dev_grow(&df->d_post, &df->d_post_cap, post_scratch_bytes(w, h), err))) return st;
    df->w = w;
    df->h = h;
    return CKEY_OK;
}

static ckey_status run_resize(ck_devframe *df, int i, const float *src, float *dst, ckey_error *err) {
    const dev_resize *z = &df->rz[i];
    const ck_resize *r = &z->r;
    return ck_resize_run_cuda(r, z->dev + (r->table_w - z->host), z->dev + (r->table_h - z->host), src,
                              r->tmp ? z->dev + (r->tmp - z->host) : NULL, dst, df->stream, err);
}

static ck_pixel_type pixel_type(ckey_sample_type t) {
    return t == CKEY_SAMPLE_U8 ? CK_PIXEL_U8 : t == CKEY_SAMPLE_U16 ? CK_PIXEL_U16 : CK_PIXEL_F16;
}

ckey_status ck_devframe_key(ck_devframe *df, const ck_devframe_job *job, double seconds[CK_DEVFRAME_STEPS],
                            ckey_error *err) {
    if (!df || !job || !(job->rgb || job->rgb_packed) || !(job->hint || job->hint_packed) || !job->post ||
        !job->alpha || !job->fg || !job->processed)
        return ck_fail(err, CKEY_ERR_INVALID_ARG, "ck_devframe_key: NULL argument");
    const int32_t w = job->width, h = job->height, S = df->S;
    const ckey_packed_image *pp = job->rgb ? NULL : job->rgb_packed, *hp = job->hint ? NULL : job->hint_packed;
    if ((pp && (pp->width != w || pp->height != h || pp->channels < 3 || pp->channels > 4 || !pp->data)) ||
        (hp && (hp->width != w || hp->height != h || hp->channels < 1 || hp->channels > 4 || !hp->data ||
                hp->hint_channel < 0 || hp->hint_channel >= hp->channels)))
        return ck_fail(err, CKEY_ERR_INVALID_ARG, "ck_devframe_key: packed images not of a %d x %d plate", w, h);
    if (w < 1 || h < 1 || w > CKEY_IMAGE_MAX_SIDE || h > CKEY_IMAGE_MAX_SIDE || (int64_t)w * h > CKEY_IMAGE_MAX_PIXELS)
        return ck_fail(err, CKEY_ERR_INVALID_ARG, "plate %d x %d: outside 1..%d per side, %lld pixels", w, h,
                       CKEY_IMAGE_MAX_SIDE, (long long)CKEY_IMAGE_MAX_PIXELS);
    pthread_mutex_t *lock = job->net_lock;
    ckey_status st = ck_cuda_set_device(df->device_index, err);
    if (st) return st;
    /* a new size's plans and buffers (df's own state: no lock to look at
     * it); the lock only around the allocations, so that a frame of the
     * usual size uploads while the other ck_devframe's network runs */
    const size_t n = (size_t)w * (size_t)h;
    /* the packed samples' staging: the plate's, then the hint's (256-byte aligned) */
    const size_t pbytes = pp ? n * (size_t)pp->channels * (pp->type == CKEY_SAMPLE_U8 ? 1 : 2) : 0;
    const size_t hoff = (pbytes + 255) / 256 * 256;
    const size_t pack = hoff + (hp ? n * (size_t)hp->channels * (hp->type == CKEY_SAMPLE_U8 ? 1 : 2) : 0);
    const int new_size = w != df->w || h != df->h || pack > df->d_pack_cap;
    if (new_size && lock) pthread_mutex_lock(lock);
    const double t0 = ck_now();
    if (new_size && (w != df->w || h != df->h)) st = prepare_size(df, w, h, err);
    if (!st && pack > df->d_pack_cap) st = dev_grow(&df->d_pack, &df->d_pack_cap, pack, err);
    const double t_prep = ck_now();
    if (new_size && lock) pthread_mutex_unlock(lock);
    if (st) return st;
    void *stream = df->stream;
    const int64_t plane = (int64_t)S * S;
    /* in: the steps of ck_preprocess (and the reader's full-size sRGB encode);
     * packed samples unpacked to the decoders' floats */
    const double t_in = ck_now();
    unsigned char *d_pack = df->d_pack;
    if (pp) {
        if ((st = ck_cuda_copy_async(d_pack, pp->data, pbytes, 1, stream, err)) ||
            (st = ck_cuda_unpack_pixels(d_pack, pixel_type(pp->type),
                                        pp->channels, (int64_t)n, df->d_rgb, 3, NULL, 0, stream, err)))
            return st;
    } else if ((st = ck_cuda_copy_async(df->d_rgb, job->rgb, 3 * n * sizeof(float), 1, stream, err))) {
        return st;
    }
    if (hp) {
        if ((st = ck_cuda_copy_async(d_pack + hoff, hp->data, pack - hoff, 1, stream, err)) ||
            (st = ck_cuda_unpack_pixels(d_pack + hoff, pixel_type(hp->type),
                                        hp->channels, (int64_t)n, NULL, 0, df->d_hint, hp->hint_channel, stream,
                                        err)))
            return st;
    } else if ((st = ck_cuda_copy_async(df->d_hint, job->hint, n * sizeof(float), 1, stream, err))) {
        return st;
    }
    if ((st = ck_cuda_wait(df->wait, stream, err))) return st;
    const double t_up = ck_now();
    if (job->srgb_at_read && (st = ck_cuda_srgb(df->d_rgb, 3 * (int64_t)n, 0, stream, err))) return st;
    if ((st = run_resize(df, RZ_RGB, df->d_rgb, df->d_x, err))) return st;
    if (job->input_is_linear && (st = ck_cuda_srgb(df->d_x, 3 * plane, 0, stream, err))) return st;
    if ((st = ck_cuda_imagenet_normalize(df->d_x, plane, ck_imagenet_mean, ck_imagenet_std, stream, err)) ||
        (st = run_resize(df, RZ_HINT, df->d_hint, df->d_x + 3 * plane, err)) ||
        (st = ck_cuda_wait(df->wait, stream, err)))
        return st;
    const double t_pre = ck_now();
    /* the network on the session's stream, and the resize back out of its
     * output (which the session's next run rewrites), under the lock */
    if (lock) pthread_mutex_lock(lock);
    const double t1 = ck_now();
    ckey_forward_result r;
    st = ck_session_run_device(df->s, df->d_x, &r, err);
    const double t2 = ck_now();
    /* out: ck_postprocess, then ck_post_frame, into the plate's buffers */
    float *d_alpha = df->d_hint, *d_fg = df->d_rgb;
    if (!st) st = run_resize(df, RZ_ALPHA, r.alpha, d_alpha, err);
    if (!st) st = run_resize(df, RZ_FG, r.fg, d_fg, err);
    if (!st) st = ck_cuda_wait(df->wait, stream, err);
    const double t_back = ck_now();
    if (lock) pthread_mutex_unlock(lock);
    if (st) return st;
    if ((st = ck_post_frame_cuda(d_alpha, d_fg, h, w, job->post, df->d_proc, job->comp ? df->d_comp : NULL, df->d_post,
                                 stream, err)))
        return st;
    /* the passes to download: the floats, or the samples the files store,
     * converted into buffers free after the post, in stream order: fg and
     * alpha into the post scratch (6 + 2 bytes a pixel: post_scratch_bytes),
     * then processed and comp over the plate's buffer (8 + 3 of its 12),
     * whose fg is converted by then */
    const void *out[4] = {d_alpha, d_fg, df->d_proc, df->d_comp};
    size_t bytes[4] = {n * sizeof(float), 3 * n * sizeof(float), 4 * n * sizeof(float), 3 * n * sizeof(float)};
    if (job->stored) {
        uint16_t *h_fg = df->d_post, *h_alpha = h_fg + 3 * n, *h_proc = (uint16_t *)(void *)df->d_rgb;
        uint8_t *q_comp = (uint8_t *)(h_proc + 4 * n);
        if ((st = ck_cuda_to_half(d_fg, h_fg, 3 * (int64_t)n, stream, err)) ||
            (st = ck_cuda_to_half(d_alpha, h_alpha, (int64_t)n, stream, err)) ||
            (st = ck_cuda_to_half(df->d_proc, h_proc, 4 * (int64_t)n, stream, err)) ||
            (job->comp && (st = ck_cuda_to_u8_trunc(df->d_comp, q_comp, 3 * (int64_t)n, stream, err))))
            return st;
        out[0] = h_alpha, out[1] = h_fg, out[2] = h_proc, out[3] = q_comp;
        bytes[0] = 2 * n, bytes[1] = 6 * n, bytes[2] = 8 * n, bytes[3] = 3 * n;
    }
    if ((st = ck_cuda_wait(df->wait, stream, err))) return st;
    const double t_post = ck_now();
    void *dst[4] = {job->alpha, job->fg, job->processed, job->comp};
    for (int k = 0; k < 4; k++)
        if (dst[k] && (st = ck_cuda_copy_async(dst[k], out[k], bytes[k], 0, stream, err))) return st;
    if ((st = ck_cuda_wait(df->wait, stream, err))) return st;
    if (seconds) {
        seconds[0] = (t_prep - t0) + (t_up - t_in); /* a new size's tables count with the upload */
        seconds[1] = t_pre - t_up;
        seconds[2] = t2 - t1;
        seconds[3] = t_back - t2;
        seconds[4] = t_post - t_back;
        seconds[5] = ck_now() - t_post;
    }
    return CKEY_OK;
}
