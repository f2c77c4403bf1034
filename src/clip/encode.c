/*
 * ckey_encode_videos: the videos of a keyed clip made from its pass files
 * (public API in ckey_clip.h), the final step of a clip keyed in chunks.
 *
 * Each frame's FG/<stem>.exr, Processed/<stem>.exr and Comp/<stem>.png are
 * read back and handed to the video tee (ckey_sink_open_video_tee) over a
 * sink that writes nothing: a few frames at once to its write() (the ProRes
 * coded), then, in frame order, to its write_ordered(). The tee makes
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
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

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

/*
 * The frames go through a few workers: worker k reads frames k, k + K, ...,
 * checks them and hands them to the tee's write() (which codes the ProRes,
 * several frames at once), then waits for its turn (`turn`, the next frame
 * in order) for write_ordered() (the ProRes muxed, the H.264 encoded), the
 * cancel poll and the progress report, so these come one at a time, in
 * frame order. A failure at frame i lowers `stop_at` to i: the frames
 * before it are still written, none after it.
 */
typedef struct enc_run {
    const char *pass_dir;
    const ckey_shot_frame *frames;
    int64_t count;
    const ckey_encode_options *o;
    ckey_sink *tee;
    ck_pool *pool;
    int nworkers;
    pthread_mutex_t mu;
    pthread_cond_t cv;
    int64_t turn;               /* the next frame for write_ordered */
    int64_t stop_at;            /* the first frame not written; count when none failed */
    ckey_status st;             /* the failure at stop_at, with its message */
    ckey_error err;
} enc_run;

/* Frame i failed with st / e: the run stops there unless an earlier frame
 * failed already. */
static void fail_at(enc_run *r, int64_t i, ckey_status st, const ckey_error *e) {
    pthread_mutex_lock(&r->mu);
    if (i < r->stop_at) {
        r->stop_at = i;
        r->st = st;
        r->err = *e;
    }
    pthread_cond_broadcast(&r->cv);
    pthread_mutex_unlock(&r->mu);
}

/* Frame i read, checked and handed to the tee's write(). */
static ckey_status frame_write(enc_run *r, int64_t i, ckey_image img[3], ckey_error *err) {
    const ckey_shot_frame *f = &r->frames[i];
    const ckey_encode_options *o = r->o;
    for (int k = 0; k < 3; k++) ckey_image_free(&img[k]);
    ckey_status st = read_frame(r->pass_dir, f, &img[0], &img[1], &img[2], err);
    if (st != CKEY_OK) return st;
    const int32_t w = img[0].width, h = img[0].height;
    const size_t n = (size_t)w * (size_t)h;
    size_t at = 0;
    float diff = 0;
    const float strength = o->video.despill_strength;
    if (o->video.fg_alpha && despill_mismatch(img[0].data, img[1].data, n, strength, &at, &diff))
        return ck_fail(err, CKEY_ERR_INVALID_ARG,
                       "frame %lld: the Processed pass is not the FG pass despilled at strength "
                       "%g (a difference of %.3g at x %zu, y %zu): the clip was keyed with "
                       "another --despill; give the encode the same --despill",
                       (long long)f->number, (double)strength, (double)diff, at % (size_t)w,
                       at / (size_t)w);
    const ckey_shot_passes p = {.width = w, .height = h, .fg = img[0].data,
                                .processed = img[1].data, .comp = img[2].data, .pool = r->pool};
    ckey_error we;
    ck_error_clear(&we);
    st = r->tee->write(r->tee->self, f, &p, &we);
    if (st != CKEY_OK) ck_fail(err, st, "frame %lld: %s", (long long)f->number, we.message);
    return st;
}

/* Frame i's ordered part, on its turn. */
static ckey_status frame_ordered(enc_run *r, int64_t i, ckey_image img[3], ckey_error *err) {
    const ckey_shot_frame *f = &r->frames[i];
    const ckey_encode_options *o = r->o;
    if (o->cancel && o->cancel(o->cancel_user))
        return ck_fail(err, CKEY_ERR_CANCELLED, "interrupted: stopped before frame %lld",
                       (long long)f->number);
    const ckey_shot_passes p = {.width = img[0].width, .height = img[0].height,
                                .fg = img[0].data, .processed = img[1].data,
                                .comp = img[2].data, .pool = r->pool};
    ckey_error we;
    ck_error_clear(&we);
    ckey_status st = r->tee->write_ordered(r->tee->self, f, &p, &we);
    if (st != CKEY_OK) return ck_fail(err, st, "frame %lld: %s", (long long)f->number, we.message);
    if (o->progress) o->progress(o->progress_user, i + 1, r->count);
    return CKEY_OK;
}

typedef struct enc_worker {
    enc_run *r;
    int index;
} enc_worker;

static void *worker_main(void *arg) {
    const enc_worker *wk = arg;
    enc_run *r = wk->r;
    ckey_image img[3];
    memset(img, 0, sizeof img);
    for (int64_t i = wk->index; i < r->count; i += r->nworkers) {
        pthread_mutex_lock(&r->mu);
        const int stopped = i >= r->stop_at;
        pthread_mutex_unlock(&r->mu);
        if (stopped) break;
        ckey_error e;
        ck_error_clear(&e);
        ckey_status st = frame_write(r, i, img, &e);
        if (st != CKEY_OK) {
            fail_at(r, i, st, &e);
            break;
        }
        pthread_mutex_lock(&r->mu);
        while (r->turn < i && i < r->stop_at) pthread_cond_wait(&r->cv, &r->mu);
        const int go = i < r->stop_at;
        pthread_mutex_unlock(&r->mu);
        if (!go) break;
        st = frame_ordered(r, i, img, &e);
        if (st != CKEY_OK) {
            fail_at(r, i, st, &e);
            break;
        }
        pthread_mutex_lock(&r->mu);
        r->turn = i + 1;
        pthread_cond_broadcast(&r->cv);
        pthread_mutex_unlock(&r->mu);
    }
    for (int k = 0; k < 3; k++) ckey_image_free(&img[k]);
    return NULL;
}

/* Workers: a quarter of the cores, 2 to 4 (each holds a frame's passes
 * and its ProRes input), no more than there are frames. */
static int worker_count(int64_t count) {
    const long cpus = sysconf(_SC_NPROCESSORS_ONLN);
    long k = cpus / 4;
    k = k < 2 ? 2 : k > 4 ? 4 : k;
    return (int)(k < count ? k : count);
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
    enc_run r;
    memset(&r, 0, sizeof r);
    r.pass_dir = pass_dir;
    r.frames = frames;
    r.count = count;
    r.o = o;
    r.tee = &tee;
    r.pool = pool;
    r.nworkers = worker_count(count);
    r.stop_at = count;
    enc_worker wk[4];
    pthread_t th[4];
    int started = 0, sync_ready = 0;
    if (st == CKEY_OK) {
        if (pthread_mutex_init(&r.mu, NULL) != 0) {
            st = ck_fail(err, CKEY_ERR_INTERNAL, "cannot create a mutex");
        } else if (pthread_cond_init(&r.cv, NULL) != 0) {
            pthread_mutex_destroy(&r.mu);
            st = ck_fail(err, CKEY_ERR_INTERNAL, "cannot create a condition variable");
        } else {
            sync_ready = 1;
        }
    }
    if (st == CKEY_OK) {
        /* workers 1.. on threads of their own, worker 0 on this one */
        for (int k = 1; k < r.nworkers; k++) {
            wk[k] = (enc_worker){&r, k};
            if (pthread_create(&th[k], NULL, worker_main, &wk[k]) != 0) {
                ckey_error e;
                ck_fail(&e, CKEY_ERR_INTERNAL, "cannot start a thread");
                fail_at(&r, 0, CKEY_ERR_INTERNAL, &e);
                break;
            }
            started = k;
        }
        wk[0] = (enc_worker){&r, 0};
        worker_main(&wk[0]);
        for (int k = 1; k <= started; k++) pthread_join(th[k], NULL);
        if (r.stop_at < count) {
            st = r.st;
            if (err) *err = r.err;
        }
    }
    if (sync_ready) {
        pthread_cond_destroy(&r.cv);
        pthread_mutex_destroy(&r.mu);
    }
    if (st == CKEY_OK && tee.finish) st = tee.finish(tee.self, err);
    ckey_sink_close(&tee); /* unfinished: the temporary files are removed */
    ck_pool_free(pool);
    return st;
}
