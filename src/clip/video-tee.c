/*
 * ckey_sink_open_video_tee: video outputs beside the passes (public API in
 * ckey.h). Each frame goes to the inner sink (the pass files), then to up to
 * two encoders:
 *   fg_alpha  ProRes 4444: RGB = despill(FG) (straight sRGB), A = the
 *             Processed alpha (the despeckled matte);
 *   comp      H.264: the Comp pass; 4:2:0 needs an even size, so an odd
 *             width / height is padded by one column / row repeating the
 *             last (a compositor's preview loses no pixel; cropping would).
 * The tee is a concurrent sink (concurrent_write): the runner's writer
 * threads call write() for several frames at once. write() writes the pass
 * files when the inner sink is concurrent too (else write_ordered() does, in
 * order) and codes the frame's ProRes: ProRes is intra-only, so each frame
 * is converted and coded on an encoder context of its own
 * (ck_video_writer_open_coded) and its packet kept, keyed by the frame (the
 * ckey_shot_frame pointer, the same in both calls). write_ordered(), which
 * the runner calls one frame at a time in frame order, muxes that packet
 * and runs the H.264 encoder, which predicts frames from others and so
 * stays in order. The file is byte for byte what one encoder coding the
 * frames in turn writes. The encoders open at the size of the first frame
 * to come (to write(), or to write_ordered() when the ProRes is not coded
 * in write()); a frame of another size is refused in write_ordered().
 * With one writer (o.writers 1) write_ordered() encodes the ProRes too, on
 * one encoder with FFmpeg's frame threads, which overlap the frames as the
 * writers would (same bytes).
 * The frame's pixel work for the videos (the stored passes' rounding, the
 * despill, RGB -> Y'CbCr) is split over the runner's pool (ckey_shot_passes.
 * pool); the encoders' own threads are FFmpeg's.
 * ckey_video_writer_close renames the files into place in finish().
 *
 * The videos are made from the passes as the pass files store them: the FG
 * and the Processed alpha rounded to HALF (as the EXRs hold them), the Comp
 * truncated to 8 bits (as its PNG holds it). So the videos depend on the
 * pass files alone, and `ckey encode` (ckey_encode_videos), which reads those
 * files back after a clip was keyed in chunks, writes the same bytes as a
 * one-run `ckey key --video-out`. Both roundings are below what the videos
 * keep (HALF has 11 significant bits, the ProRes 10; the H.264 is 8-bit).
 */
#include <pthread.h>
#include <stdlib.h>
#include <string.h>

#include "ckey_clip.h"
#include "ckey.h"
#include "core/core.h"
#include "core/dtype.h"
#include "media/image.h"
#include "media/video.h"
#include "pixel/post.h"

enum { OUT_FG_ALPHA = 0, OUT_COMP = 1, NOUT = 2 };

/* A frame's ProRes input, [4, h, w]: the despilled fg, then the Processed
 * alpha; one per frame being coded at once, reused. */
typedef struct fg_buf {
    float *fg;
    size_t cap;                 /* pixels */
    struct fg_buf *next;        /* the free list */
    struct fg_buf *all;         /* every buffer, for tee_close */
} fg_buf;

typedef struct tee {
    ckey_sink inner;
    char *path[NOUT];           /* NULL: that video is off */
    ckey_video_writer *w[NOUT];
    ckey_video_tee_options o;
    int coded;                  /* the ProRes coded in write() (o.writers != 1) */
    int32_t width, height;      /* of the first frame seen; 0 before it */
    const char *size_plate;     /* that frame's plate (the caller's string) */
    /* guards w[], width, height and size_plate (set by the first write() or
     * write_ordered()) and the fg buffers */
    pthread_mutex_t mu;
    fg_buf *fg_free, *fg_all;
    float *comp;                /* [3, h, w] the Comp as its PNG holds it */
    size_t comp_cap;
    float *pad;                 /* [3, h + h%2, w + w%2] the comp padded to even */
    size_t pad_cap;
} tee;

static ckey_status tee_begin(void *self, ckey_error *err) {
    tee *t = self;
    return t->inner.begin ? t->inner.begin(t->inner.self, err) : CKEY_OK;
}

/* The encoders, unless open, at the size of `f` (w x h); the ProRes one
 * codes frames apart from its muxer unless the tee has one writer. With
 * t->mu held. */
static ckey_status open_writers(tee *t, const ckey_shot_frame *f, int32_t w, int32_t h,
                                ckey_error *err) {
    static const ckey_video_codec codec[NOUT] = {CKEY_VIDEO_PRORES_4444, CKEY_VIDEO_H264};
    if (t->width) return CKEY_OK;
    ckey_video_writer *opened[NOUT] = {NULL, NULL};
    ckey_status st = CKEY_OK;
    for (int k = 0; k < NOUT && st == CKEY_OK; k++) {
        if (!t->path[k]) continue;
        ckey_video_writer_options wo;
        memset(&wo, 0, sizeof wo);
        wo.codec = codec[k];
        /* H.264 4:2:0: an odd side gets one more pixel (pad_even) */
        wo.width = k == OUT_COMP ? w + (w & 1) : w;
        wo.height = k == OUT_COMP ? h + (h & 1) : h;
        wo.rate_num = t->o.rate_num;
        wo.rate_den = t->o.rate_den;
        wo.threads = t->o.threads;
        st = k == OUT_FG_ALPHA && t->coded ? ck_video_writer_open_coded(t->path[k], &wo, &opened[k], err)
                                           : ckey_video_writer_open(t->path[k], &wo, &opened[k], err);
    }
    if (st != CKEY_OK) {
        for (int k = 0; k < NOUT; k++) ckey_video_writer_free(opened[k]);
        return st;
    }
    for (int k = 0; k < NOUT; k++) t->w[k] = opened[k];
    t->width = w;
    t->height = h;
    t->size_plate = f->plate;
    return CKEY_OK;
}

/* `src` [3, h, w] into t->pad [3, h + h%2, w + w%2], the last column and row
 * repeated. */
static ckey_status pad_even(tee *t, const float *src, int32_t w, int32_t h, ckey_error *err) {
    const size_t W = (size_t)w + (size_t)(w & 1), H = (size_t)h + (size_t)(h & 1);
    if (W * H > t->pad_cap) {
        free(t->pad);
        t->pad = malloc(3 * W * H * sizeof(float));
        t->pad_cap = t->pad ? W * H : 0;
        if (!t->pad) return ck_fail(err, CKEY_ERR_NOMEM, "out of memory for a %d x %d frame",
                                    (int)W, (int)H);
    }
    for (int c = 0; c < 3; c++)
        for (size_t y = 0; y < H; y++) {
            const float *row = src + ((size_t)c * (size_t)h + (y < (size_t)h ? y : (size_t)h - 1)) * (size_t)w;
            float *dst = t->pad + ((size_t)c * H + y) * W;
            memcpy(dst, row, (size_t)w * sizeof(float));
            if (W > (size_t)w) dst[w] = row[w - 1];
        }
    return CKEY_OK;
}

/* Open the encoders at this frame's size unless open; refuse a frame of
 * another size. */
static ckey_status check_size(tee *t, const ckey_shot_frame *f, int32_t w, int32_t h,
                              ckey_error *err) {
    pthread_mutex_lock(&t->mu);
    ckey_status st = open_writers(t, f, w, h, err);
    if (st == CKEY_OK && (w != t->width || h != t->height))
        st = ck_fail(err, CKEY_ERR_INVALID_ARG,
                     "%s is %d x %d, but the video outputs are %d x %d (the size of %s, the "
                     "first frame they saw): a video keeps one size", f->plate, (int)w, (int)h,
                     (int)t->width, (int)t->height, t->size_plate);
    pthread_mutex_unlock(&t->mu);
    return st;
}

/* The videos' pixels from the stored passes, a span of pixels per call, on
 * the runner's threads: the straight fg that Processed premultiplies (post.c's
 * first steps) from the FG and the alpha as their EXRs store them, despilled;
 * the Comp as its PNG stores it (truncated to 8 bits, read back as /255). */
typedef struct prep_job {
    tee *t;
    const ckey_shot_passes *p;
    size_t n;
    float *fg;                  /* prep_fg's output */
} prep_job;

static void prep_fg(void *ctx, int64_t begin, int64_t end, int thread) {
    (void)thread;
    const prep_job *j = ctx;
    const ckey_shot_passes *p = j->p;
    const size_t n = j->n, b = (size_t)begin, e = (size_t)end;
    float *fg = j->fg;
    for (int c = 0; c < 4; c++) {
        float *dst = fg + (size_t)c * n;
        const size_t off = c < 3 ? (size_t)c * n : 3 * n; /* alpha: Processed's fourth plane */
        if (p->fg_half) {
            const uint16_t *src = c < 3 ? p->fg_half : p->processed_half;
            for (size_t i = b; i < e; i++) dst[i] = ck_f16_to_f32(src[off + i]);
        } else {
            const float *src = c < 3 ? p->fg : p->processed;
            for (size_t i = b; i < e; i++) dst[i] = ck_f16_to_f32(ck_f32_to_f16(src[off + i]));
        }
    }
    ck_despill_span(fg, n, b, e, j->t->o.despill_strength);
}

static void prep_comp(void *ctx, int64_t begin, int64_t end, int thread) {
    (void)thread;
    const prep_job *j = ctx;
    const ckey_shot_passes *p = j->p;
    float *comp = j->t->comp;
    if (p->comp_u8)
        for (int64_t i = begin; i < end; i++) comp[i] = (float)p->comp_u8[i] / 255.0f;
    else
        for (int64_t i = begin; i < end; i++) comp[i] = (float)ck_trunc_u8(p->comp[i]) / 255.0f;
}

/* A fg buffer of at least n pixels from the free list (or a new one). */
static fg_buf *fg_take(tee *t, size_t n) {
    pthread_mutex_lock(&t->mu);
    fg_buf *b = t->fg_free;
    if (b) t->fg_free = b->next;
    pthread_mutex_unlock(&t->mu);
    if (!b) {
        if (!(b = calloc(1, sizeof *b))) return NULL;
        pthread_mutex_lock(&t->mu);
        b->all = t->fg_all; /* the tee owns it from here */
        t->fg_all = b;
        pthread_mutex_unlock(&t->mu);
    }
    if (n > b->cap) {
        free(b->fg);
        b->fg = malloc(4 * n * sizeof(float));
        b->cap = b->fg ? n : 0;
    }
    if (!b->fg) {
        pthread_mutex_lock(&t->mu);
        b->next = t->fg_free;
        t->fg_free = b;
        pthread_mutex_unlock(&t->mu);
        return NULL;
    }
    return b;
}

static void fg_give(tee *t, fg_buf *b) {
    pthread_mutex_lock(&t->mu);
    b->next = t->fg_free;
    t->fg_free = b;
    pthread_mutex_unlock(&t->mu);
}

/* The frame's ProRes pixels (prep_fg) coded into the writer under the key
 * `f`, for tee_write_ordered to mux; on any thread, several at once. */
static ckey_status code_fg(tee *t, ckey_video_writer *w, const ckey_shot_frame *f,
                           const ckey_shot_passes *p, ckey_error *err) {
    const size_t n = (size_t)p->width * (size_t)p->height;
    fg_buf *b = fg_take(t, n);
    if (!b) return ck_fail(err, CKEY_ERR_NOMEM, "out of memory for a %d x %d frame",
                           (int)p->width, (int)p->height);
    ck_pool *pool = (ck_pool *)p->pool; /* NULL: all on this thread */
    prep_job job = {t, p, n, b->fg};
    ck_pool_for(pool, (int64_t)n, 1 << 16, prep_fg, &job);
    ckey_status st = ck_video_code_frame(w, f, pool, b->fg, b->fg + 3 * n, err);
    fg_give(t, b);
    return st;
}

/*
 * Concurrent (the tee always is): the inner sink's write when it is
 * concurrent too, then (coded) the frame's ProRes, the encoders opened at
 * its size by the first call to come. A frame of another size is left to
 * tee_write_ordered, which refuses it in its turn.
 */
static ckey_status tee_write(void *self, const ckey_shot_frame *f, const ckey_shot_passes *p,
                             ckey_error *err) {
    tee *t = self;
    ckey_status st = CKEY_OK;
    if (t->inner.concurrent_write) st = t->inner.write(t->inner.self, f, p, err);
    if (st != CKEY_OK || !t->path[OUT_FG_ALPHA] || !t->coded) return st;
    pthread_mutex_lock(&t->mu);
    st = open_writers(t, f, p->width, p->height, err);
    ckey_video_writer *w =
        p->width == t->width && p->height == t->height ? t->w[OUT_FG_ALPHA] : NULL;
    pthread_mutex_unlock(&t->mu);
    if (st != CKEY_OK) return st;
    return w ? code_fg(t, w, f, p, err) : CKEY_OK;
}

/* In frame order: the size check (before an ordered inner sink writes the
 * frame's passes, so that a size the encoders refuse stops the run with
 * nothing written), the inner sink's ordered writes, the ProRes packet
 * muxed (coded here when write() did not), the H.264 encoded. */
static ckey_status tee_write_ordered(void *self, const ckey_shot_frame *f, const ckey_shot_passes *p,
                                     ckey_error *err) {
    tee *t = self;
    const int32_t w = p->width, h = p->height;
    ckey_status st = check_size(t, f, w, h, err);
    if (st != CKEY_OK) return st;
    if (!t->inner.concurrent_write && (st = t->inner.write(t->inner.self, f, p, err)) != CKEY_OK)
        return st;
    if (t->inner.write_ordered && (st = t->inner.write_ordered(t->inner.self, f, p, err)) != CKEY_OK)
        return st;
    const size_t n = (size_t)w * (size_t)h;
    ck_pool *pool = (ck_pool *)p->pool; /* NULL: all on this thread */
    prep_job job = {t, p, n, NULL};
    if (t->w[OUT_FG_ALPHA] && t->coded) {
        int muxed = 0;
        st = ck_video_mux_frame(t->w[OUT_FG_ALPHA], f, &muxed, err);
        if (st == CKEY_OK && !muxed) {
            st = code_fg(t, t->w[OUT_FG_ALPHA], f, p, err);
            if (st == CKEY_OK) st = ck_video_mux_frame(t->w[OUT_FG_ALPHA], f, &muxed, err);
        }
        if (st != CKEY_OK) return st;
    } else if (t->w[OUT_FG_ALPHA]) {
        /* one caller: the encoder's own frame threads overlap the frames */
        fg_buf *b = fg_take(t, n);
        if (!b) return ck_fail(err, CKEY_ERR_NOMEM, "out of memory for a %d x %d frame", (int)w, (int)h);
        job.fg = b->fg;
        ck_pool_for(pool, (int64_t)n, 1 << 16, prep_fg, &job);
        st = ck_video_write_frame_on(t->w[OUT_FG_ALPHA], pool, b->fg, b->fg + 3 * n, err);
        fg_give(t, b);
        if (st != CKEY_OK) return st;
    }
    if (t->w[OUT_COMP]) {
        if (n > t->comp_cap) {
            free(t->comp);
            t->comp = malloc(3 * n * sizeof(float));
            t->comp_cap = t->comp ? n : 0;
            if (!t->comp) return ck_fail(err, CKEY_ERR_NOMEM, "out of memory for a %d x %d frame",
                                         (int)w, (int)h);
        }
        ck_pool_for(pool, (int64_t)(3 * n), 1 << 16, prep_comp, &job);
        const float *comp = t->comp;
        if ((w | h) & 1) {
            if ((st = pad_even(t, t->comp, w, h, err)) != CKEY_OK) return st;
            comp = t->pad;
        }
        st = ck_video_write_frame_on(t->w[OUT_COMP], pool, comp, NULL, err);
    }
    return st;
}

static ckey_status tee_finish(void *self, ckey_error *err) {
    tee *t = self;
    ckey_status st = t->inner.finish ? t->inner.finish(t->inner.self, err) : CKEY_OK;
    for (int k = 0; k < NOUT; k++) {
        if (!t->w[k]) continue;
        ckey_video_writer *w = t->w[k];
        t->w[k] = NULL;
        if (st == CKEY_OK) st = ckey_video_writer_close(w, err); /* frees w */
        else ckey_video_writer_free(w);
    }
    return st;
}

static void tee_pass_seconds(void *self, double seconds[4]) {
    const tee *t = self;
    t->inner.pass_seconds(t->inner.self, seconds);
}

static void tee_close(void *self) {
    tee *t = self;
    if (!t) return;
    for (int k = 0; k < NOUT; k++) {
        ckey_video_writer_free(t->w[k]); /* unfinished: removes the temporary file */
        free(t->path[k]);
    }
    ckey_sink_close(&t->inner);
    for (fg_buf *b = t->fg_all, *next; b; b = next) {
        next = b->all;
        free(b->fg);
        free(b);
    }
    pthread_mutex_destroy(&t->mu);
    free(t->comp);
    free(t->pad);
    free(t);
}

ckey_status ckey_sink_open_video_tee(ckey_sink *inner, const ckey_video_tee_options *o,
                                     ckey_sink *out, ckey_error *err) {
    if (!inner || !inner->write || !o || !out || out == inner || (!o->fg_alpha && !o->comp) ||
        o->rate_num < 0 || o->rate_den < 0 || o->threads < 0 || o->writers < 0 ||
        !(o->despill_strength >= 0.0f && o->despill_strength <= 1.0f))
        return ck_fail(err, CKEY_ERR_INVALID_ARG, "ckey_sink_open_video_tee: bad arguments");
    tee *t = calloc(1, sizeof *t);
    if (!t) return ck_fail(err, CKEY_ERR_NOMEM, "out of memory");
    if (pthread_mutex_init(&t->mu, NULL) != 0) {
        free(t);
        return ck_fail(err, CKEY_ERR_INTERNAL, "cannot create a mutex");
    }
    t->o = *o;
    t->o.fg_alpha = t->o.comp = NULL;
    t->coded = o->writers != 1;
    const char *paths[NOUT] = {o->fg_alpha, o->comp};
    for (int k = 0; k < NOUT; k++)
        if (paths[k] && !(t->path[k] = strdup(paths[k]))) {
            tee_close(t);
            return ck_fail(err, CKEY_ERR_NOMEM, "out of memory");
        }
    t->inner = *inner;
    memset(inner, 0, sizeof *inner);
    memset(out, 0, sizeof *out);
    out->self = t;
    out->complete = NULL; /* a video cannot resume */
    out->begin = tee_begin;
    out->write = tee_write;
    out->write_ordered = tee_write_ordered;
    out->concurrent_write = 1; /* tee_write keeps the inner sink's order */
    out->stored_passes = t->inner.stored_passes; /* the videos are made from the stored passes either way */
    out->finish = tee_finish;
    out->close = tee_close;
    if (t->inner.pass_seconds) out->pass_seconds = tee_pass_seconds;
    return CKEY_OK;
}
