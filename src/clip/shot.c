/*
 * ckey_shot_run: a shot keyed as a pipeline of R readers, M models (one per
 * session) and K writers (see ckey_clip.h).
 *
 *   reader r   jobs r, r + R, r + 2R, ... (R = opt.readers), in parallel
 *              with the other readers: source->read into the reader's own
 *              images (+ input fixes: linear -> sRGB, auto hint, hint
 *              resize), resize to S + normalize (ck_preprocess) -> in ring  (nin slots)
 *   model m    the network only (ckey_session_forward) on session m of M:
 *              jobs m, m + M, m + 2M, ... (the calling thread is model 0,
 *              one more thread per further session)       -> out ring (K + M slots)
 *   writer w   jobs w, w + K, w + 2K, ... (K = opt.writers):
 *              heavy part, in parallel with the other writers: resize back
 *              (ck_postprocess), ckey_post_passes, and sink->write when the
 *              sink has concurrent_write;
 *              ordered part, when its turn comes (next_to_finish == j), one
 *              writer at a time: sink->write of an ordered sink,
 *              sink->write_ordered, the events                 -> slot freed, turn passed on
 *
 * The device frame path (opt.frame_path DEVICE, or AUTO resolved to it by
 * ckey_shot_frame_path; every session on a GPU;
 * pixel/devframe.h): the readers only decode (+ an auto hint or
 * a hint resized to its plate) into their in slot's own images (the files'
 * own samples when the source has read_packed, in blocks page-locked before
 * the run starts for the first plate: ck_slot_block); the model
 * thread uploads plate and hint and, on its session's stream, resizes to S,
 * runs the network, resizes back and post-processes, and downloads alpha, fg,
 * processed and comp into its out slot (page-locked): as floats, or, for a
 * sink with stored_passes (the pass sink), converted on the GPU to what the
 * files store (HALF, the Comp 8-bit), 19 bytes a pixel instead of 44; the
 * writers only write.
 * Threaded, each session has P model threads (ck_shot_pipelines:
 * opt.device_frames), each with its own ck_devframe and stream, taking every
 * P-th of the session's jobs: one frame's upload, resize to S, post and
 * download overlap the others' network; the network and the resize back out of the session's
 * output take turns under the session's lock (net_mu). Slots are rounded to
 * multiples of the model threads, so a slot still serves one thread's jobs.
 *
 * On the host path the model thread runs nothing but the network, so a GPU is not kept
 * waiting by the plate-size work: the same steps ckey_session_key takes,
 * spread over the threads, so the results are the same bit for bit. The
 * readers are several because decoding is per frame and, at 4K, far slower
 * than a GPU's network; so are the writers (resize back, post passes, the
 * EXR and PNG encoders).
 *
 * The pool. Within a frame, the resizes, the post passes' rows and the
 * sink's files and EXR chunks are split over one pool (ck_pool_for takes
 * jobs from several threads at once): by default a CPU session's own
 * threads, so that a CPU run has no more threads busy than --threads says;
 * else a pool of opt.threads (a GPU run: every CPU). Every split is by rows or chunks whose results do not depend
 * on the split, so the passes do not depend on the pool's size either.
 *
 * Job j (the j-th frame to key) always uses in slot j % nin, out slot
 * j % nout, reader j % R, session j % M and writer j % K, so the stages
 * need no queue bookkeeping beyond a state per slot and two turn counters;
 * one mutex and one condition variable guard every state change (a few per
 * frame, nothing next to the milliseconds a frame takes). nin =
 * max(read_ahead, R) + M lets every reader fill a slot while every model
 * keys from another; nout = K + M lets every model key a frame while all K
 * writers are busy. Both are rounded up to multiples of M, so a slot only
 * ever serves one session's jobs: the model thread that waits for a slot is
 * the one that used it last (it never sees an older job's frame there; a
 * reader waits for the slot's own job, in_slot.job), and the slot is
 * allocated from that session (ckey_session_host_alloc: page-locked for its
 * device). Every session keys a frame as any other would (same model, size
 * and options), so which session keys a frame does not change its passes.
 * The turn next_to_finish makes the events (planned skips, warnings, KEYED /
 * FAILED, stats, next_index) come out in frame order, from one thread at a
 * time, exactly as with one writer; each writer has its own scratch and
 * Processed / Comp planes, so the passes do not depend on K. A source
 * without concurrent_read has its read() calls in frame order, one at a time
 * (the turn next_to_read), while the readers still resize in parallel.
 *
 * Errors. `stop_at` is the first job that will not be written; every stage
 * stops when it reaches it, so the frames before a failing one are still
 * keyed and written, in order. A fatal error at job j lowers stop_at to j and
 * keeps the message of the lowest such job. A write error also sets `abort`:
 * nothing more can be written, so the readers and the model stop at once.
 * A writer whose heavy part fails at job j lowers stop_at to j at once (no
 * later job starts or gets its turn) and still waits for its own turn: the
 * jobs before it finish, its warning comes out before the error. With a
 * concurrent_write sink, later jobs already in another writer's heavy part
 * may have written their files: allowed, since every file is renamed into
 * place whole (a re-run resumes them as complete); they get no event. No
 * frame before a failure is lost. An ordered sink writes nothing past it.
 * Under CKEY_ON_ERROR_SKIP an input fault marks the slot failed instead; it
 * travels down the pipeline so its event comes out in order, and so does a
 * warning (a hint resized to its plate).
 *
 * Cancel. opt.cancel is polled by a reader before it decodes job j and by
 * the model loops before they key job j; either lowers stop_at to j with
 * CKEY_ERR_CANCELLED, so the job being keyed when the flag rises (and every
 * one before it) is still written, and nothing after it starts.
 *
 * Buffers: slots are allocated up front; each reader's plate and hint (the
 * source decodes into them, reusing their pixels when large enough), the
 * model outputs (alpha, fg) per out slot, each writer's processed / comp
 * planes and scratch (resize back, post passes) and each reader's scratch
 * (resize, auto hint, hint resize) grow to the largest plate seen and are
 * then reused: after the first frames of a size, nothing large is allocated.
 */
#include <pthread.h>
#include <sched.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "ckey_clip.h"
#include "ckey.h"
#include "core/core.h"
#include "core/dtype.h"
#include "model/session.h"
#include "clip/shot.h"
#include "pixel/devframe.h"
#include "pixel/pixel.h"
#include "pixel/post.h"

enum { SLOT_EMPTY = 0, SLOT_FULL = 1 };

typedef struct in_slot {
    int state;
    int64_t job;             /* the job that fills it next (or holds it): readers may
                                reach a job before the slot's previous job was read */
    int failed;              /* input fault, skipped (CKEY_ON_ERROR_SKIP) */
    ckey_error err;
    char warn[512];          /* a warning about this frame, "" when none */
    int32_t w, h;            /* the plate's size */
    float *x;                /* [4, S, S]: the network's input (host path) */
    /* the device path: the decoded frame itself, which the model thread uploads */
    ckey_image plate, hint;  /* the source decodes into these */
    const float *hint_px;    /* the hint to key with: hint.data, or hint_buf */
    float *hint_buf;         /* an auto hint or a hint resized to its plate */
    size_t hint_cap;
    int srgb_at_read;        /* the plate is linear: encoded to sRGB at full size on the device */
    /* the device path with a source's read_packed: the files' own samples,
     * in page-locked blocks from the slot's session (ck_slot_block) */
    ckey_packed_image pplate, phint;
    int packed, hint_packed; /* plate (and hint) in pplate (phint), not plate / hint_px */
    ck_slot_block bplate, bhint;
    double t_start;
} in_slot;

typedef struct out_slot {
    int state;
    int failed;
    ckey_error err;
    char warn[512];
    float *net;              /* [4, S, S]: the network's alpha and fg at S */
    float *alpha, *fg;       /* [h, w], [3, h, w]: the host path's, which the writer resizes back into */
    size_t cap;              /* pixels alpha/fg hold */
    /* the device path: the four passes as downloaded, in one block
     * (pass_layout); page-locked up front for the first plate (reserved);
     * a larger plate then takes a pageable block (pageable), no lock, while
     * the page-locked one waits in `pinned` for the end of the run */
    void *block;
    size_t block_cap;        /* bytes */
    int reserved, pageable;
    void *pinned;
    int32_t w, h;
    double t_start, model_s;
    int32_t session;         /* the session that keyed it */
} out_slot;

/* A reader thread's own images and buffers (grown to the largest plate,
 * then reused). */
typedef struct reader {
    struct shot *sh;
    int id;
    ckey_image plate, hint;  /* the source decodes into these */
    float *pre_scratch;      /* ck_preprocess */
    size_t pre_cap;
    float *auto_scratch;     /* ckey_auto_hint */
    size_t auto_cap;
    float *rs_scratch, *rs_out; /* a hint resized to its plate: tables, result */
    size_t rs_cap, rs_out_cap;
    float *hint_f;           /* a packed hint of another size than its plate, as floats */
    size_t hint_f_cap;
    double decode_s, pre_s;
} reader;

/* A writer thread's own buffers (grown to the largest plate, then reused). */
typedef struct writer {
    struct shot *sh;
    int id;
    float *back_scratch;     /* ck_postprocess */
    size_t back_cap;
    float *processed, *comp;
    size_t post_cap;
    void *post_scratch;
    size_t post_scratch_cap;
    double back_s, post_s, sink_s;
} writer;

typedef struct shot {
    ckey_session *const *sess; /* [nsess]: job j is keyed by sess[j % nsess] */
    int nsess;
    ckey_source *src;
    ckey_sink *sink;
    const uint8_t *plan;
    ckey_shot_options opt;
    ckey_shot_event_fn on_event;
    void *user;
    ck_pool *pool;           /* the frame-level threads (the session's or own_pool) */
    ck_pool *own_pool;

    int64_t *jobs, njobs;    /* source indices to key, in order */
    int64_t max_pixels;      /* ckey_session_max_plate_pixels (the least of the sessions') */
    in_slot *in;
    int nin;
    out_slot *out;
    int nout;                /* writers + nsess, rounded up to a multiple of nsess
                                (nsess unthreaded) */
    reader *rd;
    int nrd;
    writer *wr;
    int nwr;

    pthread_mutex_t mu;
    pthread_cond_t cv;
    int64_t stop_at;         /* first job not to write */
    int abort;               /* stop every stage now */
    ckey_error err;          /* the fatal error of job stop_at */
    int64_t next_to_read;    /* the job whose source->read comes next (a source
                                without concurrent_read) */

    int32_t S;               /* the session's network size */
    /* the device frame path (ckey_shot_options.frame_path): one per session,
     * used by its model thread; NULL entries on the host path */
    int dev;
    int stored;              /* the device path downloads the passes as the files store them
                                (the sink's stored_passes), else the floats */
    int npipe;               /* model threads a session (ck_shot_pipelines); nmodel = nsess * npipe */
    int nmodel;
    ck_devframe *df[CKEY_SHOT_MAX_MODELS]; /* model thread t's, of session t % nsess */
    pthread_mutex_t net_mu[CKEY_SHOT_MAX_SESSIONS]; /* a session's network, when npipe > 1 */
    ck_post_options dev_post;
    double dev_pre_s[CKEY_SHOT_MAX_MODELS], dev_post_s[CKEY_SHOT_MAX_MODELS];
    /* owned by the writer whose turn it is (next_to_finish, under mu) */
    int64_t next_to_finish;  /* the job whose events come next */
    int64_t next_index;      /* first source index without an event yet */
    ckey_shot_stats stats;   /* counts and model time */
    double t0;
    /* under mu: every stage's busy seconds by the group of threads it ran
     * on, the model threads' waits, the threads in each group */
    double busy[CKEY_SHOT_GROUPS][CKEY_SHOT_STAGES];
    double wait_in, wait_out, wait_turn;
    int32_t gthreads[CKEY_SHOT_GROUPS];
} shot;

static const char *const stage_names[CKEY_SHOT_STAGES] = {"read", "pre", "upload", "network", "download",
                                                          "back", "post", "encode", "write"};
static const char *const group_names[CKEY_SHOT_GROUPS] = {"readers", "network", "writers", "ordered"};

const char *ckey_shot_stage_name(int stage) {
    return stage >= 0 && stage < CKEY_SHOT_STAGES ? stage_names[stage] : "?";
}

const char *ckey_shot_group_name(int group) {
    return group >= 0 && group < CKEY_SHOT_GROUPS ? group_names[group] : "?";
}

/* Add one frame's busy seconds `sec` of group g's stages (lock not held). */
static void account(shot *sh, int g, const double sec[CKEY_SHOT_STAGES]) {
    pthread_mutex_lock(&sh->mu);
    for (int k = 0; k < CKEY_SHOT_STAGES; k++) sh->busy[g][k] += sec[k] > 0 ? sec[k] : 0;
    pthread_mutex_unlock(&sh->mu);
}

/* The sink's write and write_ordered. */
typedef ckey_status (*sink_write_fn)(void *self, const ckey_shot_frame *f, const ckey_shot_passes *p,
                                     ckey_error *err);

/* One of the sink's write calls on frame f's passes; a failure goes to e
 * naming the frame (the writers name the output file). */
static ckey_status sink_call(shot *sh, sink_write_fn fn, const ckey_shot_frame *f, const ckey_shot_passes *p,
                             ckey_error *e) {
    ckey_error we;
    ck_error_clear(&we);
    const ckey_status st = fn(sh->sink->self, f, p, &we);
    if (st != CKEY_OK) ck_fail(e, st, "frame %lld: %s", (long long)f->number, we.message);
    return st;
}

/* Writer wk's `seconds` in the sink's calls, added to group g's stages in
 * sec: `io` of them writing files, the rest encoding. */
static void account_sink(shot *sh, writer *wk, int g, double sec[CKEY_SHOT_STAGES], double seconds, double io) {
    wk->sink_s += seconds;
    sec[CKEY_STAGE_ENCODE] = seconds - io;
    sec[CKEY_STAGE_WRITE] = io;
    account(sh, g, sec);
}

/* The load so far (ckey_shot_load), `elapsed` seconds into the run (lock held). */
static void load_locked(const shot *sh, double elapsed, ckey_shot_load *l) {
    memset(l, 0, sizeof *l);
    l->elapsed = elapsed;
    l->wait_input_seconds = sh->wait_in;
    l->wait_output_seconds = sh->wait_out;
    l->wait_turn_seconds = sh->wait_turn;
    l->bound = l->bound_group = -1;
    /* busy[g] as the group's threads see it: the ordered part runs on the
     * writers' threads, so the writers' time includes it */
    double b[CKEY_SHOT_GROUPS][CKEY_SHOT_STAGES];
    double best = 0;
    for (int g = 0; g < CKEY_SHOT_GROUPS; g++) {
        double sum = 0;
        for (int k = 0; k < CKEY_SHOT_STAGES; k++) {
            l->stage_seconds[k] += sh->busy[g][k];
            b[g][k] = sh->busy[g][k] + (g == CKEY_GROUP_WRITERS ? sh->busy[CKEY_GROUP_ORDERED][k] : 0);
            sum += b[g][k];
        }
        l->threads[g] = sh->gthreads[g];
        l->use[g] = elapsed > 0 && sh->gthreads[g] > 0 ? sum / (elapsed * sh->gthreads[g]) : 0;
        if (l->use[g] > best) {
            best = l->use[g];
            l->bound_group = g;
        }
    }
    if (l->bound_group >= 0)
        for (int k = 0; k < CKEY_SHOT_STAGES; k++)
            if (l->bound < 0 || b[l->bound_group][k] > b[l->bound_group][l->bound]) l->bound = k;
}

static void load_now(shot *sh, double elapsed, ckey_shot_load *l) {
    pthread_mutex_lock(&sh->mu);
    load_locked(sh, elapsed, l);
    pthread_mutex_unlock(&sh->mu);
}

/* Record a fatal error at job j (lock held). */
static void fail_locked(shot *sh, int64_t j, const ckey_error *e, int abort_now) {
    if (j < sh->stop_at) {
        sh->stop_at = j;
        sh->err = *e;
    }
    if (abort_now) sh->abort = 1;
    pthread_cond_broadcast(&sh->cv);
}

static void fail_at(shot *sh, int64_t j, const ckey_error *e, int abort_now) {
    pthread_mutex_lock(&sh->mu);
    fail_locked(sh, j, e, abort_now);
    pthread_mutex_unlock(&sh->mu);
}

/* Wait until *state == want, or job j is cancelled (returns 0). */
static int wait_state(shot *sh, const int *state, int want, int64_t j) {
    pthread_mutex_lock(&sh->mu);
    while (*state != want && !sh->abort && j < sh->stop_at) pthread_cond_wait(&sh->cv, &sh->mu);
    const int go = !sh->abort && j < sh->stop_at;
    pthread_mutex_unlock(&sh->mu);
    return go;
}

static void set_state(shot *sh, int *state, int v) {
    pthread_mutex_lock(&sh->mu);
    *state = v;
    pthread_cond_broadcast(&sh->cv);
    pthread_mutex_unlock(&sh->mu);
}

/* Input faults are skippable; running out of memory or a broken device is not. */
static int skippable(const shot *sh, ckey_status st) {
    return sh->opt.on_error == CKEY_ON_ERROR_SKIP && st != CKEY_ERR_NOMEM &&
           st != CKEY_ERR_DEVICE && st != CKEY_ERR_INTERNAL;
}

/* Has the caller asked to stop before job j? Then record it (stop_at <= j). */
static int cancelled(shot *sh, int64_t j) {
    if (!sh->opt.cancel || !sh->opt.cancel(sh->opt.cancel_user)) return 0;
    ckey_error e;
    ck_fail(&e, CKEY_ERR_CANCELLED, "interrupted: stopped before frame %lld",
            (long long)sh->src->frames[sh->jobs[j]].number);
    fail_at(sh, j, &e, 0);
    return 1;
}

/* Grow a reader's float buffer to `n` floats (contents not kept); 0 when
 * out of memory. */
static int grow(float **buf, size_t *cap, size_t n) {
    if (n <= *cap) return 1;
    free(*buf);
    *buf = malloc(n * sizeof(float));
    *cap = *buf ? n : 0;
    return *buf != NULL;
}

/*
 * A hint of another size than its plate, resized to the plate as upstream's
 * shot command does (clip_manager.run_inference: cv2.resize(mask, (w, h),
 * interpolation=cv2.INTER_LINEAR) on the float mask): two taps per axis,
 * half-pixel centres, no antialias, edges clamped -- the arithmetic of
 * CK_RESIZE_BILINEAR. The result goes to rd->rs_out; the warning to `warn`.
 */
static ckey_status resize_hint(reader *rd, const ckey_shot_frame *f, const ckey_image *hint, int32_t w,
                               int32_t h, char *warn, size_t cap, ckey_error *err) {
    const int32_t hw = hint->width, hh = hint->height;
    const size_t sf = ck_resize_scratch_floats(1, hh, hw, h, w, CK_RESIZE_BILINEAR);
    if (sf == 0 || hw < 1 || hh < 1)
        return ck_fail(err, CKEY_ERR_INVALID_ARG, "frame %lld: hint %s is %d x %d: cannot resize it",
                       (long long)f->number, f->hint ? f->hint : "-", (int)hw, (int)hh);
    if (!grow(&rd->rs_scratch, &rd->rs_cap, sf) || !grow(&rd->rs_out, &rd->rs_out_cap, (size_t)w * (size_t)h))
        return ck_fail(err, CKEY_ERR_NOMEM, "frame %lld: out of memory to resize the hint", (long long)f->number);
    ck_resize rz;
    ckey_status st = ck_resize_prepare(&rz, 1, hh, hw, h, w, CK_RESIZE_BILINEAR, rd->rs_scratch);
    if (st != CKEY_OK) return ck_fail(err, st, "frame %lld: cannot resize the hint", (long long)f->number);
    ck_resize_run_pool(&rz, hint->data, rd->rs_out, rd->sh->pool);
    snprintf(warn, cap, "frame %lld: hint %s is %d x %d, plate %s %d x %d: hint resized to the "
                        "plate (bilinear, as upstream)",
             (long long)f->number, f->hint ? f->hint : "-", (int)hw, (int)hh, f->plate, (int)w, (int)h);
    return CKEY_OK;
}

size_t ck_slot_packed_bytes(int32_t w, int32_t h, int hint) {
    if (w < 1 || h < 1 || w > CKEY_IMAGE_MAX_SIDE || h > CKEY_IMAGE_MAX_SIDE || (int64_t)w * h > CKEY_IMAGE_MAX_PIXELS)
        return 0;
    return (size_t)w * (size_t)h * (hint ? CK_SLOT_HINT_BYTES : CK_SLOT_PLATE_BYTES);
}

static void *pin_locked(ck_slot_block *b, size_t bytes) {
    if (b->lock) pthread_mutex_lock(b->lock);
    void *p = b->pin(b->pin_user, bytes);
    if (b->lock) pthread_mutex_unlock(b->lock);
    return p;
}

int ck_slot_block_reserve(ck_slot_block *b, size_t bytes) {
    if (b->pinned || bytes == 0) return b->pinned != NULL;
    b->pinned = b->pin(b->pin_user, bytes);
    if (!b->pinned) return 0;
    b->pinned_cap = bytes;
    b->reserved = 1;
    b->pins++;
    return 1;
}

void *ck_slot_block_alloc(void *block, size_t bytes) {
    ck_slot_block *b = block;
    if (b->pinned && bytes <= b->pinned_cap) return b->pinned;
    if (b->reserved) { /* more than the reservation: pageable, no lock */
        b->grows++;
        return malloc(bytes);
    }
    /* no reservation: pin what this read needs (the block it replaces was released) */
    void *p = pin_locked(b, bytes);
    if (p) {
        b->pinned = p;
        b->pinned_cap = bytes;
        b->pins++;
    }
    return p;
}

void ck_slot_block_release(void *block, void *p) {
    ck_slot_block *b = block;
    if (!p) return;
    if (p != b->pinned) {
        free(p);
    } else if (!b->reserved) {
        /* unreserved: the pinned block goes, a larger one follows */
        if (b->lock) pthread_mutex_lock(b->lock);
        b->unpin(b->pin_user, p);
        if (b->lock) pthread_mutex_unlock(b->lock);
        b->pinned = NULL;
        b->pinned_cap = 0;
    } /* else the reserved block stays the slot's until ck_slot_block_free */
}

void ck_slot_block_free(ck_slot_block *b) {
    if (b->pinned) b->unpin(b->pin_user, b->pinned);
    b->pinned = NULL;
    b->pinned_cap = 0;
    b->reserved = 0;
}

static void *sess_pin(void *user, size_t bytes) { return ckey_session_host_alloc(user, bytes); }
static void sess_unpin(void *user, void *p) { ckey_session_host_free(user, p); }

/* ------------------------------------------------------------- stages */

/* source->read of job j into reader rd's images; with a source that reads
 * one frame at a time, in job order (the turn next_to_read). Returns the
 * status, or CKEY_ERR_CANCELLED unset (*stopped = 1) when the run stopped
 * before job j's turn came. */
static ckey_status read_frame(shot *sh, reader *rd, int64_t j, ckey_image *plate, ckey_image *hint, in_slot *packed,
                              ckey_error *err, int *stopped) {
    const int turns = !sh->src->concurrent_read && sh->nrd > 1;
    *stopped = 0;
    if (turns) {
        pthread_mutex_lock(&sh->mu);
        while (sh->next_to_read != j && !sh->abort && j < sh->stop_at) pthread_cond_wait(&sh->cv, &sh->mu);
        *stopped = sh->abort || j >= sh->stop_at;
        pthread_mutex_unlock(&sh->mu);
        if (*stopped) return CKEY_OK;
    }
    const double t = ck_now();
    ckey_status st = CKEY_ERR_UNSUPPORTED;
    if (packed) {
        /* the files' own samples when the source has them, else floats */
        st = sh->src->read_packed(sh->src->self, sh->jobs[j], &packed->pplate, &packed->phint, err);
        packed->packed = st != CKEY_ERR_UNSUPPORTED;
        if (st == CKEY_ERR_UNSUPPORTED) ck_error_clear(err);
    }
    if (st == CKEY_ERR_UNSUPPORTED) st = sh->src->read(sh->src->self, sh->jobs[j], plate, hint, err);
    rd->decode_s += ck_now() - t;
    if (turns) {
        pthread_mutex_lock(&sh->mu);
        sh->next_to_read = j + 1;
        pthread_cond_broadcast(&sh->cv);
        pthread_mutex_unlock(&sh->mu);
    }
    return st;
}

/* A reader's frame j done (decoded since decoded0, its pre-processing since
 * t): the stage times accounted, a failure recorded in the slot or, when
 * the run does not skip it, failing the run (returns 0). */
static int read_done(shot *sh, reader *rd, int64_t j, in_slot *sl, ckey_status st, double decoded0, double t) {
    double sec[CKEY_SHOT_STAGES] = {0};
    sec[CKEY_STAGE_READ] = rd->decode_s - decoded0;
    sec[CKEY_STAGE_PRE] = ck_now() - t;
    rd->pre_s += sec[CKEY_STAGE_PRE];
    account(sh, CKEY_GROUP_READERS, sec);
    if (st != CKEY_OK) {
        if (!skippable(sh, st)) {
            fail_at(sh, j, &sl->err, 0);
            return 0;
        }
        sl->failed = 1;
    }
    return 1;
}

/* The rest of stage_read for a frame read packed (sl->packed): the plate
 * stays packed for the device; so does the hint unless it is of another
 * size, which is made floats (the decoders' v / 255, v / 65535, half) and resized
 * to the plate here. The slot's float images are dropped: a clip of packed
 * frames holds no floats. (Its packed images stay when a frame is read as
 * floats, so a clip that mixes the two, e.g. PNG plates with FLOAT EXR
 * hints, allocates no page-locked memory frame after frame; its slots hold
 * both.) */
static int packed_read(shot *sh, reader *rd, int64_t j, ckey_status st, double decoded0, double t) {
    in_slot *sl = &sh->in[j % sh->nin];
    const ckey_shot_frame *f = &sh->src->frames[sh->jobs[j]];
    ckey_image_free(&sl->plate);
    ckey_image_free(&sl->hint);
    const int32_t w = sl->pplate.width, h = sl->pplate.height;
    sl->w = w;
    sl->h = h;
    if (st == CKEY_OK && (sh->opt.input_space == CKEY_INPUT_LINEAR_AT_READ ||
                          (sh->opt.input_space == CKEY_INPUT_AUTO && f->plate_linear)))
        sl->srgb_at_read = 1;
    if (st == CKEY_OK && ((int64_t)w * h > sh->max_pixels || w > CKEY_IMAGE_MAX_SIDE || h > CKEY_IMAGE_MAX_SIDE))
        st = ck_fail(&sl->err, CKEY_ERR_INVALID_ARG,
                     "frame %lld: plate %s is %d x %d, more than the %lld pixels (%d per side) a session takes",
                     (long long)f->number, f->plate, (int)w, (int)h, (long long)sh->max_pixels,
                     CKEY_IMAGE_MAX_SIDE);
    const ckey_packed_image *ph = &sl->phint;
    if (st == CKEY_OK && ph->width == w && ph->height == h) {
        sl->hint_packed = 1;
        sl->hint_px = NULL;
    } else if (st == CKEY_OK) {
        const size_t hn = (size_t)ph->width * (size_t)ph->height, C = (size_t)ph->channels;
        if (!grow(&rd->hint_f, &rd->hint_f_cap, hn) || !grow(&sl->hint_buf, &sl->hint_cap, (size_t)w * (size_t)h))
            st = ck_fail(&sl->err, CKEY_ERR_NOMEM, "frame %lld: out of memory for the hint", (long long)f->number);
        if (st == CKEY_OK) {
            const size_t c = (size_t)ph->hint_channel;
            if (ph->type == CKEY_SAMPLE_F16)
                for (size_t i = 0; i < hn; i++) rd->hint_f[i] = ck_f16_to_f32(((const uint16_t *)ph->data)[i * C + c]);
            else if (ph->type == CKEY_SAMPLE_U16)
                for (size_t i = 0; i < hn; i++) rd->hint_f[i] = (float)((const uint16_t *)ph->data)[i * C + c] / 65535.0f;
            else
                for (size_t i = 0; i < hn; i++) rd->hint_f[i] = (float)((const uint8_t *)ph->data)[i * C + c] / 255.0f;
            const ckey_image hf = {ph->width, ph->height, 1, ph->type == CKEY_SAMPLE_U8 ? 8 : 16, 0, rd->hint_f, 0};
            st = resize_hint(rd, f, &hf, w, h, sl->warn, sizeof sl->warn, &sl->err);
        }
        if (st == CKEY_OK) {
            memcpy(sl->hint_buf, rd->rs_out, (size_t)w * (size_t)h * sizeof(float));
            sl->hint_px = sl->hint_buf;
        }
    }
    return read_done(sh, rd, j, sl, st, decoded0, t);
}

/* Decode job j on reader rd into its in slot. Returns 0 when the run must stop. */
static int stage_read(shot *sh, reader *rd, int64_t j) {
    in_slot *sl = &sh->in[j % sh->nin];
    const int64_t idx = sh->jobs[j];
    const ckey_shot_frame *f = &sh->src->frames[idx];
    /* the host path decodes into the reader's images and resizes here; the
     * device path decodes into the slot's, for the model thread to upload */
    ckey_image *plate = sh->dev ? &sl->plate : &rd->plate, *himg = sh->dev ? &sl->hint : &rd->hint;
    sl->t_start = ck_now();
    sl->failed = 0;
    sl->warn[0] = 0;
    sl->srgb_at_read = 0;
    sl->packed = sl->hint_packed = 0;
    ck_error_clear(&sl->err);
    int stopped = 0;
    const double decoded0 = rd->decode_s;
    ckey_status st = read_frame(sh, rd, j, plate, himg, sh->dev && sh->src->read_packed ? sl : NULL, &sl->err,
                                &stopped);
    if (stopped) return 0;
    const double t = ck_now();
    if (sl->packed) return packed_read(sh, rd, j, st, decoded0, t);
    if (st == CKEY_OK && !plate->data)
        st = ck_fail(&sl->err, CKEY_ERR_INTERNAL, "frame %lld: the source returned no plate",
                     (long long)f->number);
    const int32_t w = plate->width, h = plate->height;
    sl->w = w;
    sl->h = h;
    /* a linear plate read as upstream's default reads an EXR: to sRGB now, at
     * full size, before the resize (and before an auto hint looks at it); the
     * device path does it there when no auto hint needs it first */
    if (st == CKEY_OK && (sh->opt.input_space == CKEY_INPUT_LINEAR_AT_READ ||
                          (sh->opt.input_space == CKEY_INPUT_AUTO && f->plate_linear))) {
        if (sh->dev && himg->data) sl->srgb_at_read = 1;
        else ck_linear_to_srgb_pool(plate->data, 3 * (size_t)w * (size_t)h, sh->pool);
    }
    const float *hint = himg->data;
    if (st == CKEY_OK && !hint) {
        /* no hint from the source: make one from the plate */
        const size_t sb = ckey_auto_hint_scratch_bytes(w, h);
        if (!grow(&rd->auto_scratch, &rd->auto_cap, (sb + sizeof(float) - 1) / sizeof(float) + (size_t)w * (size_t)h))
            st = ck_fail(&sl->err, CKEY_ERR_NOMEM, "frame %lld: out of memory for the auto hint",
                         (long long)f->number);
        else {
            /* the hint, then the auto hint's scratch (float-aligned) after it */
            float *out = rd->auto_scratch;
            if ((st = ckey_auto_hint(plate->data, w, h, out, out + (size_t)w * (size_t)h, &sl->err)) != CKEY_OK) {
                ckey_error e = sl->err;
                ck_fail(&sl->err, st, "frame %lld: %s: %s", (long long)f->number, f->plate, e.message);
            }
            hint = out;
        }
    } else if (st == CKEY_OK && (himg->width != w || himg->height != h)) {
        st = resize_hint(rd, f, himg, w, h, sl->warn, sizeof sl->warn, &sl->err);
        hint = rd->rs_out;
    }
    if (st == CKEY_OK && ((int64_t)w * h > sh->max_pixels || w > CKEY_IMAGE_MAX_SIDE || h > CKEY_IMAGE_MAX_SIDE))
        st = ck_fail(&sl->err, CKEY_ERR_INVALID_ARG,
                     "frame %lld: plate %s is %d x %d, more than the %lld pixels (%d per side) a session takes",
                     (long long)f->number, f->plate, (int)w, (int)h, (long long)sh->max_pixels,
                     CKEY_IMAGE_MAX_SIDE);
    if (st == CKEY_OK && sh->dev) {
        /* the hint the reader made lives in its own buffers: into the slot's */
        sl->hint_px = hint;
        if (hint != himg->data) {
            if (!grow(&sl->hint_buf, &sl->hint_cap, (size_t)w * (size_t)h))
                st = ck_fail(&sl->err, CKEY_ERR_NOMEM, "frame %lld: out of memory for the hint", (long long)f->number);
            else {
                memcpy(sl->hint_buf, hint, (size_t)w * (size_t)h * sizeof(float));
                sl->hint_px = sl->hint_buf;
            }
        }
    } else if (st == CKEY_OK) { /* resize to S and normalize, as ckey_session_key does */
        const size_t need = ck_preprocess_scratch_floats(h, w, sh->S);
        if (need == 0)
            st = ck_fail(&sl->err, CKEY_ERR_INVALID_ARG, "frame %lld: plate %s (%d x %d) cannot be resized to %d",
                         (long long)f->number, f->plate, (int)w, (int)h, (int)sh->S);
        if (st == CKEY_OK && !grow(&rd->pre_scratch, &rd->pre_cap, need))
            st = ck_fail(&sl->err, CKEY_ERR_NOMEM, "frame %lld: out of memory for the resize buffers",
                         (long long)f->number);
        if (st == CKEY_OK &&
            (st = ck_preprocess_pool(plate->data, hint, h, w, sh->S, sh->opt.input_space == CKEY_INPUT_LINEAR,
                                     sl->x, rd->pre_scratch, sh->pool)) != CKEY_OK)
            ck_fail(&sl->err, st, "frame %lld: plate %s (%d x %d): preprocessing failed", (long long)f->number,
                    f->plate, (int)w, (int)h);
    }
    return read_done(sh, rd, j, sl, st, decoded0, t);
}

/*
 * The device path's out slot for n pixels: the offsets of alpha, fg,
 * processed and comp in its block (off may be NULL) and the block's bytes.
 * The passes as floats (44 bytes a pixel) or, for a sink with stored_passes,
 * as the files store them: HALF alpha, fg and processed, 8-bit comp (19
 * bytes a pixel; at 3840 x 2160 a slot is 157.6 MB instead of 365.0 MB).
 * Each part starts 256-byte aligned.
 */
static size_t pass_layout(int stored, size_t n, size_t off[4]) {
    static const size_t per[2][4] = {{4, 12, 16, 12}, {2, 6, 8, 3}};
    size_t at = 0;
    for (int k = 0; k < 4; k++) {
        if (off) off[k] = at;
        at += (per[stored != 0][k] * n + 255) / 256 * 256;
    }
    return at;
}

size_t ck_shot_out_slot_bytes(int stored, int32_t w, int32_t h) {
    if (w < 1 || h < 1) return 0;
    return pass_layout(stored, (size_t)w * (size_t)h, NULL);
}

/* Job's passes for the sink: on the device path those downloaded into out
 * slot o (its frame's size), else o's alpha and fg with writer wk's post
 * passes. */
static void frame_passes(const shot *sh, const out_slot *o, const writer *wk, ckey_shot_passes *p, double *io) {
    if (!sh->dev) {
        *p = (ckey_shot_passes){.width = o->w,
                                .height = o->h,
                                .alpha = o->alpha,
                                .fg = o->fg,
                                .processed = wk->processed,
                                .comp = wk->comp,
                                .pool = sh->pool,
                                .io_seconds = io};
        return;
    }
    size_t off[4];
    pass_layout(sh->stored, (size_t)o->w * (size_t)o->h, off);
    const unsigned char *b = o->block;
    memset(p, 0, sizeof *p);
    p->width = o->w;
    p->height = o->h;
    p->pool = sh->pool;
    p->io_seconds = io;
    if (sh->stored) {
        p->alpha_half = (const uint16_t *)(const void *)(b + off[0]);
        p->fg_half = (const uint16_t *)(const void *)(b + off[1]);
        p->processed_half = (const uint16_t *)(const void *)(b + off[2]);
        p->comp_u8 = b + off[3];
    } else {
        p->alpha = (const float *)(const void *)(b + off[0]);
        p->fg = (const float *)(const void *)(b + off[1]);
        p->processed = (const float *)(const void *)(b + off[2]);
        p->comp = (const float *)(const void *)(b + off[3]);
    }
}

/* Key job j: in slot -> out slot. */
static int stage_key(shot *sh, int64_t j) {
    in_slot *in = &sh->in[j % sh->nin];
    out_slot *o = &sh->out[j % sh->nout];
    const ckey_shot_frame *f = &sh->src->frames[sh->jobs[j]];
    o->t_start = in->t_start;
    o->failed = in->failed;
    o->err = in->err;
    memcpy(o->warn, in->warn, sizeof o->warn);
    o->model_s = 0;
    o->session = (int32_t)(j % sh->nsess);
    if (in->failed) return 1;
    const int32_t w = in->w, h = in->h;
    const size_t n = (size_t)w * (size_t)h;
    ckey_status st = CKEY_OK;
    /* the session's lock: no allocation beside another model thread's graph capture */
    pthread_mutex_t *net_lock = sh->dev && sh->npipe > 1 ? &sh->net_mu[j % sh->nsess] : NULL;
    if (sh->dev) {
        const size_t need = pass_layout(sh->stored, n, NULL);
        if (need > o->block_cap && o->reserved) {
            /* larger than the first plate: pageable (the driver stages the download) */
            if (!o->pageable) o->pinned = o->block;
            else free(o->block);
            o->pageable = 1;
            o->block = malloc(need);
            o->block_cap = o->block ? need : 0;
        } else if (need > o->block_cap) {
            /* the device path downloads into it: page-locked, from the slot's session */
            ckey_session *s = sh->sess[j % sh->nsess];
            if (net_lock) pthread_mutex_lock(net_lock);
            ckey_session_host_free(s, o->block);
            o->block = ckey_session_host_alloc(s, need);
            if (net_lock) pthread_mutex_unlock(net_lock);
            o->block_cap = o->block ? need : 0;
        }
        if (!o->block_cap)
            st = ck_fail(&o->err, CKEY_ERR_NOMEM, "frame %lld: out of memory for a %d x %d plate",
                         (long long)f->number, (int)w, (int)h);
    } else if (n > o->cap) {
        free(o->alpha);
        free(o->fg);
        o->alpha = malloc(n * sizeof(float));
        o->fg = malloc(3 * n * sizeof(float));
        o->cap = o->alpha && o->fg ? n : 0;
        if (!o->cap)
            st = ck_fail(&o->err, CKEY_ERR_NOMEM, "frame %lld: out of memory for a %d x %d plate",
                         (long long)f->number, (int)w, (int)h);
    }
    if (st == CKEY_OK && sh->dev) {
        /* the whole frame on the device: upload, resize, network, resize back, post, download */
        const int m = (int)(j % sh->nmodel); /* the model thread keying job j */
        size_t off[4];
        pass_layout(sh->stored, n, off);
        unsigned char *b = o->block;
        const ck_devframe_job dj = {in->packed ? NULL : in->plate.data,
                                    &in->pplate,
                                    in->hint_packed ? NULL : in->hint_px,
                                    &in->phint,
                                    w,
                                    h,
                                    in->srgb_at_read,
                                    sh->opt.input_space == CKEY_INPUT_LINEAR,
                                    &sh->dev_post,
                                    sh->stored,
                                    b + off[0],
                                    b + off[1],
                                    b + off[2],
                                    b + off[3],
                                    net_lock};
        ckey_error e;
        ck_error_clear(&e);
        double sec[CK_DEVFRAME_STEPS] = {0};
        st = ck_devframe_key(sh->df[m], &dj, sec, &e);
        o->model_s = sec[2];
        sh->dev_pre_s[m] += sec[0] + sec[1];
        sh->dev_post_s[m] += sec[3] + sec[4] + sec[5];
        const double stage[CKEY_SHOT_STAGES] = {
            [CKEY_STAGE_UPLOAD] = sec[0], [CKEY_STAGE_PRE] = sec[1], [CKEY_STAGE_NETWORK] = sec[2],
            [CKEY_STAGE_BACK] = sec[3],   [CKEY_STAGE_POST] = sec[4], [CKEY_STAGE_DOWNLOAD] = sec[5]};
        account(sh, CKEY_GROUP_NETWORK, stage);
        if (st != CKEY_OK) ck_fail(&o->err, st, "frame %lld: %s: %s", (long long)f->number, f->plate, e.message);
    } else if (st == CKEY_OK) {
        /* the network only: the reader resized the plate, the writer resizes back */
        ckey_error e;
        ck_error_clear(&e);
        const double t = ck_now();
        ckey_forward_result r;
        memset(&r, 0, sizeof r);
        /* alpha then fg into o->net */
        st = ckey_session_forward_into(sh->sess[j % sh->nsess], in->x, o->net, &r, &e);
        o->model_s = ck_now() - t;
        /* the transfers as the GPU timed them, the rest of the call the network's */
        double stage[CKEY_SHOT_STAGES] = {0};
        if (st == CKEY_OK) {
            stage[CKEY_STAGE_UPLOAD] = r.upload_seconds;
            stage[CKEY_STAGE_DOWNLOAD] = r.download_seconds;
        }
        stage[CKEY_STAGE_NETWORK] = o->model_s - stage[CKEY_STAGE_UPLOAD] - stage[CKEY_STAGE_DOWNLOAD];
        account(sh, CKEY_GROUP_NETWORK, stage);
        if (st != CKEY_OK) ck_fail(&o->err, st, "frame %lld: %s: %s", (long long)f->number, f->plate, e.message);
    }
    o->w = w;
    o->h = h;
    if (st != CKEY_OK) {
        if (!skippable(sh, st) || st == CKEY_ERR_NOMEM) {
            fail_at(sh, j, &o->err, 0);
            return 0;
        }
        o->failed = 1;
    }
    return 1;
}

static void emit(shot *sh, ckey_shot_event *ev) {
    ev->keyed = sh->stats.keyed;
    ev->skipped = sh->stats.skipped;
    ev->failed = sh->stats.failed;
    ev->elapsed = ck_now() - sh->t0;
    ev->model_total = sh->stats.model_seconds;
    if (sh->on_event) sh->on_event(sh->user, ev);
}

/* SKIP events for the planned-skip frames before source index `upto`. */
static void emit_skips(shot *sh, int64_t upto) {
    for (; sh->next_index < upto; sh->next_index++) {
        const int64_t i = sh->next_index;
        if (!sh->plan || sh->plan[i] != CKEY_SHOT_SKIP) continue;
        sh->stats.skipped++;
        ckey_shot_event ev;
        memset(&ev, 0, sizeof ev);
        ev.kind = CKEY_SHOT_SKIPPED;
        ev.index = i;
        ev.frame = &sh->src->frames[i];
        emit(sh, &ev);
    }
}

/*
 * Job j's heavy part, on writer `wk`, outside the lock: resize back, the post
 * passes and (a concurrent_write sink) sink->write. Returns the status; an
 * error (naming the frame) in *e. A failed (skipped) slot has nothing to do.
 */
static ckey_status stage_post(shot *sh, writer *wk, int64_t j, ckey_error *e) {
    out_slot *o = &sh->out[j % sh->nout];
    const ckey_shot_frame *f = &sh->src->frames[sh->jobs[j]];
    ck_error_clear(e);
    if (o->failed) return CKEY_OK;
    const double t = ck_now();
    const int32_t w = o->w, h = o->h;
    const size_t n = (size_t)w * (size_t)h;
    ckey_status st = CKEY_OK;
    double sec[CKEY_SHOT_STAGES] = {0}, io = 0;
    if (sh->dev) {
        /* the device path made every pass; the writer only writes them */
        if (sh->sink->concurrent_write) {
            ckey_shot_passes p;
            frame_passes(sh, o, wk, &p, &io);
            st = sink_call(sh, sh->sink->write, f, &p, e);
        }
        account_sink(sh, wk, CKEY_GROUP_WRITERS, sec, ck_now() - t, io);
        return st;
    }
    if (n > wk->post_cap) {
        free(wk->processed);
        free(wk->comp);
        wk->processed = malloc(4 * n * sizeof(float));
        wk->comp = malloc(3 * n * sizeof(float));
        wk->post_cap = wk->processed && wk->comp ? n : 0;
        if (!wk->post_cap)
            st = ck_fail(e, CKEY_ERR_NOMEM, "frame %lld: out of memory for a %d x %d plate",
                         (long long)f->number, (int)w, (int)h);
    }
    const size_t sb = ckey_post_scratch_bytes(w, h, &sh->opt.post);
    if (st == CKEY_OK && sb == SIZE_MAX)
        st = ck_fail(e, CKEY_ERR_INVALID_ARG, "frame %lld: bad plate size %d x %d",
                     (long long)f->number, (int)w, (int)h);
    if (st == CKEY_OK && sb > wk->post_scratch_cap) {
        free(wk->post_scratch);
        wk->post_scratch = malloc(sb);
        wk->post_scratch_cap = wk->post_scratch ? sb : 0;
        if (!wk->post_scratch)
            st = ck_fail(e, CKEY_ERR_NOMEM, "frame %lld: out of memory", (long long)f->number);
    }
    if (st == CKEY_OK) { /* alpha and fg from S back to the plate, as ckey_session_key does */
        const ck_resize_mode back = ck_session_resize_back(sh->sess[0]); /* the same in each */
        const size_t need = ck_postprocess_scratch_floats(sh->S, h, w, back);
        if (need > wk->back_cap) {
            free(wk->back_scratch);
            wk->back_scratch = malloc(need * sizeof(float));
            wk->back_cap = wk->back_scratch ? need : 0;
        }
        const size_t hw = (size_t)sh->S * (size_t)sh->S;
        if (!need || !wk->back_scratch)
            st = ck_fail(e, CKEY_ERR_NOMEM, "frame %lld: out of memory for the resize back", (long long)f->number);
        else if ((st = ck_postprocess_pool(o->net, o->net + hw, sh->S, h, w, back, o->alpha, o->fg,
                                           wk->back_scratch, sh->pool)) != CKEY_OK)
            ck_fail(e, st, "frame %lld: postprocessing failed", (long long)f->number);
    }
    const double t_post = ck_now();
    sec[CKEY_STAGE_BACK] = t_post - t;
    wk->back_s += sec[CKEY_STAGE_BACK];
    if (st == CKEY_OK) {
        st = ck_post_passes_pool(o->alpha, o->fg, w, h, &sh->opt.post, wk->processed, wk->comp, wk->post_scratch,
                                 sh->pool, e);
        if (st != CKEY_OK) {
            ckey_error e2 = *e;
            ck_fail(e, st, "frame %lld: %s", (long long)f->number, e2.message);
        }
    }
    const double t_sink = ck_now();
    sec[CKEY_STAGE_POST] = t_sink - t_post;
    wk->post_s += sec[CKEY_STAGE_POST];
    if (st == CKEY_OK && sh->sink->concurrent_write) {
        ckey_shot_passes p;
        frame_passes(sh, o, wk, &p, &io);
        st = sink_call(sh, sh->sink->write, f, &p, e);
    }
    account_sink(sh, wk, CKEY_GROUP_WRITERS, sec, ck_now() - t_sink, io);
    return st;
}

/*
 * Job j's ordered part, on its writer when its turn has come (every job
 * before it has finished): the events, and the writes that must see the
 * frames in order (sink->write of a sink without concurrent_write, and
 * sink->write_ordered). `st` / `pe` are stage_post's result. Returns 0 when
 * the run must stop.
 */
static int stage_finish(shot *sh, writer *wk, int64_t j, ckey_status st, const ckey_error *pe) {
    out_slot *o = &sh->out[j % sh->nout];
    const int64_t idx = sh->jobs[j];
    const ckey_shot_frame *f = &sh->src->frames[idx];
    emit_skips(sh, idx);
    sh->next_index = idx + 1;
    ckey_shot_event ev;
    memset(&ev, 0, sizeof ev);
    ev.index = idx;
    ev.frame = f;
    if (o->warn[0]) {
        ev.kind = CKEY_SHOT_WARNING;
        ev.message = o->warn;
        emit(sh, &ev);
        ev.message = NULL;
    }
    if (o->failed) {
        sh->stats.failed++;
        ev.kind = CKEY_SHOT_FAILED;
        ev.error = &o->err;
        emit(sh, &ev);
        return 1;
    }
    ckey_error e = *pe;
    const int32_t w = o->w, h = o->h;
    const double t = ck_now();
    double io = 0;
    ckey_shot_passes p;
    frame_passes(sh, o, wk, &p, &io);
    if (st == CKEY_OK && !sh->sink->concurrent_write) st = sink_call(sh, sh->sink->write, f, &p, &e);
    if (st == CKEY_OK && sh->sink->write_ordered) st = sink_call(sh, sh->sink->write_ordered, f, &p, &e);
    const double done = ck_now();
    double sec[CKEY_SHOT_STAGES] = {0};
    account_sink(sh, wk, CKEY_GROUP_ORDERED, sec, done - t, io);
    if (st != CKEY_OK) {
        fail_at(sh, j, &e, 1);
        return 0;
    }
    sh->stats.keyed++;
    sh->stats.model_seconds += o->model_s;
    ev.kind = CKEY_SHOT_KEYED;
    ev.width = w;
    ev.height = h;
    ev.seconds = done - o->t_start;
    ev.model_seconds = o->model_s;
    ev.session = o->session;
    ckey_shot_load load;
    load_now(sh, done - sh->t0, &load);
    ev.load = &load;
    emit(sh, &ev);
    return 1;
}

/* ------------------------------------------------------------- threads */

/* Wait until in slot `sl` is free for job j (the job before it in the slot
 * was keyed), or job j is cancelled (returns 0). */
static int wait_in_slot(shot *sh, const in_slot *sl, int64_t j) {
    pthread_mutex_lock(&sh->mu);
    while ((sl->state != SLOT_EMPTY || sl->job != j) && !sh->abort && j < sh->stop_at)
        pthread_cond_wait(&sh->cv, &sh->mu);
    const int go = !sh->abort && j < sh->stop_at;
    pthread_mutex_unlock(&sh->mu);
    return go;
}

/* Reader r of R: jobs r, r + R, r + 2R, ..., each into its in slot. */
static void *reader_main(void *arg) {
    reader *rd = arg;
    shot *sh = rd->sh;
    for (int64_t j = rd->id; j < sh->njobs; j += sh->nrd) {
        in_slot *sl = &sh->in[j % sh->nin];
        if (!wait_in_slot(sh, sl, j)) break;
        if (cancelled(sh, j) || !stage_read(sh, rd, j)) break;
        set_state(sh, &sl->state, SLOT_FULL);
    }
    return NULL;
}

/*
 * Writer w of K: jobs w, w + K, w + 2K, ... Heavy work in parallel with the
 * other writers, then its turn (next_to_finish == j) for the ordered part,
 * then the slot is freed and the turn passes on. A job whose heavy part
 * failed has already lowered stop_at to itself (so later jobs stop), yet
 * still waits for its turn: the frames before it finish, and its warning
 * comes out before the error, as with one writer.
 */
static void *writer_main(void *arg) {
    writer *wk = arg;
    shot *sh = wk->sh;
    for (int64_t j = wk->id; j < sh->njobs; j += sh->nwr) {
        out_slot *o = &sh->out[j % sh->nout];
        if (!wait_state(sh, &o->state, SLOT_FULL, j)) break;
        ckey_error e;
        const ckey_status st = stage_post(sh, wk, j, &e);
        const double t_wait = ck_now();
        pthread_mutex_lock(&sh->mu);
        if (st != CKEY_OK) fail_locked(sh, j, &e, 0);
        /* job j runs on while stop_at > j, or == j through its own failure */
        while (sh->next_to_finish != j && !sh->abort &&
               (j < sh->stop_at || (st != CKEY_OK && j == sh->stop_at)))
            pthread_cond_wait(&sh->cv, &sh->mu);
        sh->wait_turn += ck_now() - t_wait;
        const int turn = sh->next_to_finish == j && !sh->abort &&
                         (j < sh->stop_at || (st != CKEY_OK && j == sh->stop_at));
        pthread_mutex_unlock(&sh->mu);
        if (!turn || !stage_finish(sh, wk, j, st, &e)) break;
        pthread_mutex_lock(&sh->mu);
        sh->next_to_finish = j + 1;
        o->state = SLOT_EMPTY;
        pthread_cond_broadcast(&sh->cv);
        pthread_mutex_unlock(&sh->mu);
    }
    return NULL;
}

/*
 * The device path's out slots, page-locked for a w x h plate (the first
 * frame's, from its header) before the model threads start: a 4K slot's
 * passes are 158 MB to page-lock (365 MB as floats: pass_layout), and in
 * stage_key that holds the session's lock (no allocation beside another
 * thread's graph capture), so the networks would wait for it; here it runs
 * while the readers decode the first frames. No size (0): stage_key page-locks them (under the lock);
 * a larger plate later: stage_key takes pageable buffers (no lock).
 */
static void alloc_out_slots(shot *sh, int32_t w, int32_t h) {
    if (w < 1 || h < 1 || (int64_t)w * h > sh->max_pixels) return;
    const size_t n = (size_t)w * (size_t)h;
    for (int i = 0; i < sh->nout; i++) {
        out_slot *o = &sh->out[i];
        const size_t bytes = pass_layout(sh->stored, n, NULL);
        o->block = ckey_session_host_alloc(sh->sess[i % sh->nsess], bytes);
        o->block_cap = o->block ? bytes : 0;
        o->reserved = o->block_cap > 0;
    }
}

/*
 * The device path's packed in-slot blocks, page-locked for a w x h plate
 * (the first frame's, from its header; ck_slot_packed_bytes) before any
 * thread starts: pinned lazily, each slot's first read would pin under the
 * session's lock (no allocation beside another model thread's graph
 * capture) and keep the networks waiting, frame after frame while the slots
 * are first used. A block that cannot be pinned is left to the reads.
 */
static void reserve_in_slots(shot *sh, int32_t w, int32_t h) {
    for (int i = 0; i < sh->nin; i++) {
        ck_slot_block_reserve(&sh->in[i].bplate, ck_slot_packed_bytes(w, h, 0));
        ck_slot_block_reserve(&sh->in[i].bhint, ck_slot_packed_bytes(w, h, 1));
    }
}

/* Model thread m of T = nsess x npipe: jobs m, m + T, m + 2T, ... with
 * session m % nsess (the same as j % nsess: nsess divides T). */
typedef struct model_arg {
    shot *sh;
    int m;
} model_arg;

static void model_loop(shot *sh, int m) {
    for (int64_t j = m; j < sh->njobs; j += sh->nmodel) {
        in_slot *in = &sh->in[j % sh->nin];
        out_slot *o = &sh->out[j % sh->nout];
        const double t0 = ck_now();
        const int go_in = wait_state(sh, &in->state, SLOT_FULL, j);
        const double t1 = ck_now();
        const int go_out = go_in && wait_state(sh, &o->state, SLOT_EMPTY, j);
        const double t2 = ck_now();
        pthread_mutex_lock(&sh->mu);
        sh->wait_in += t1 - t0;
        sh->wait_out += t2 - t1;
        pthread_mutex_unlock(&sh->mu);
        if (!go_out) break;
        if (cancelled(sh, j) || !stage_key(sh, j)) break;
        pthread_mutex_lock(&sh->mu);
        in->state = SLOT_EMPTY;
        in->job = j + sh->nin;
        o->state = SLOT_FULL;
        pthread_cond_broadcast(&sh->cv);
        pthread_mutex_unlock(&sh->mu);
    }
}

static void *model_main(void *arg) {
    const model_arg *a = arg;
    model_loop(a->sh, a->m);
    return NULL;
}

/* --------------------------------------------------------------- entry */

/* The CPUs this process may run on (taskset), else the online ones. */
static int usable_cpus(void) {
    long n = sysconf(_SC_NPROCESSORS_ONLN);
    cpu_set_t set;
    if (sched_getaffinity(0, sizeof set, &set) == 0 && CPU_COUNT(&set) > 0) n = CPU_COUNT(&set);
    return n < 1 ? 1 : n > 1024 ? 1024 : (int)n;
}

/* max(1, min(8, CPUs - 2)): the readers and the model thread keep a core
 * or two; past 8 the writers mostly wait on the disk. */
static int default_writers(void) {
    const int n = usable_cpus();
    return n - 2 < 1 ? 1 : n - 2 > 8 ? 8 : n - 2;
}

/* The host path: max(1, min(4, CPUs / 4)): a 4K plate decodes in a few
 * tenths of a second, so a few readers keep a fast network fed; each holds
 * a frame's images. The device path: max(1, min(8, 3 CPUs / 8)): its
 * readers only decode and its writers only encode, about 0.24 and 0.42 s
 * of a core a 4K frame, so at 12 frames a second the decoding takes some 3
 * cores and the encoding 5 (on the writers and the pool); six readers on 16
 * CPUs leave room for the heavier 16-bit and EXR plates. Each reader adds
 * an in slot (a plate's samples, page-locked). */
static int default_readers(int device_path) {
    const int c = usable_cpus(), n = device_path ? 3 * c / 8 : c / 4, most = device_path ? 8 : 4;
    return n < 1 ? 1 : n > most ? most : n;
}

static int round_up(int v, int m) { return (v + m - 1) / m * m; }

int ck_shot_pipelines(const ckey_shot_options *o) {
    if (o->read_ahead <= 0 || o->frame_path != CKEY_FRAME_PATH_DEVICE) return 1;
    return o->device_frames > 0 ? o->device_frames : CK_SHOT_DEVICE_FRAMES;
}

void ck_shot_layout(const ckey_shot_options *o, int nsessions, int *nin, int *nout, int *nwr, int *nrd) {
    const int threaded = o->read_ahead > 0, M = nsessions < 1 ? 1 : nsessions;
    const int T = M * ck_shot_pipelines(o); /* the model threads */
    *nrd = threaded ? (o->readers > 0 ? o->readers : default_readers(o->frame_path == CKEY_FRAME_PATH_DEVICE)) : 1;
    *nin = threaded ? round_up((o->read_ahead > *nrd ? o->read_ahead : *nrd) + T, T) : M;
    *nwr = threaded ? (o->writers > 0 ? o->writers : default_writers()) : 1;
    *nout = threaded ? round_up(*nwr + T, T) : M;
}

void ckey_shot_options_default(ckey_shot_options *o) {
    if (!o) return;
    memset(o, 0, sizeof *o);
    ckey_post_options_default(&o->post);
    /* upstream's shot command: clip_manager.InferenceSettings.despill_strength
     * = 0.5 (its CLI prompt's default, 5 of 10); process_frame's own default
     * (ckey_post_options_default) is 1.0 */
    o->post.despill_strength = 0.5f;
    o->input_space = CKEY_INPUT_AUTO;
    o->on_error = CKEY_ON_ERROR_STOP;
    o->read_ahead = 2;
}

/* Everything the run holds; slot i's buffers came from session i % M. */
static void free_shot(shot *sh, ckey_session *const *sessions, int M) {
    for (int i = 0; sh->in && i < sh->nin; i++)
        if (sh->in[i].x) ckey_session_host_free(sessions[i % M], sh->in[i].x);
    for (int i = 0; sh->in && i < sh->nin; i++) {
        ckey_image_free(&sh->in[i].plate);
        ckey_image_free(&sh->in[i].hint);
        free(sh->in[i].hint_buf);
        /* the model threads have ended and the locks are gone: none needed */
        in_slot *sl = &sh->in[i];
        sl->bplate.lock = sl->bhint.lock = NULL;
        ckey_packed_image_free(&sl->pplate);
        ckey_packed_image_free(&sl->phint);
        ck_slot_block_free(&sl->bplate);
        ck_slot_block_free(&sl->bhint);
    }
    for (int i = 0; sh->out && i < sh->nout; i++) {
        out_slot *o = &sh->out[i];
        if (o->net) ckey_session_host_free(sessions[i % M], o->net);
        if (sh->dev && o->pageable) {
            free(o->block);
            ckey_session_host_free(sessions[i % M], o->pinned);
        } else if (sh->dev) {
            ckey_session_host_free(sessions[i % M], o->block);
        } else {
            free(o->alpha);
            free(o->fg);
        }
    }
    for (int i = 0; i < sh->nmodel; i++) ck_devframe_free(sh->df[i]);
    for (int i = 0; sh->rd && i < sh->nrd; i++) {
        reader *rd = &sh->rd[i];
        ckey_image_free(&rd->plate);
        ckey_image_free(&rd->hint);
        free(rd->pre_scratch);
        free(rd->auto_scratch);
        free(rd->rs_scratch);
        free(rd->rs_out);
        free(rd->hint_f);
    }
    for (int i = 0; sh->wr && i < sh->nwr; i++) {
        free(sh->wr[i].back_scratch);
        free(sh->wr[i].processed);
        free(sh->wr[i].comp);
        free(sh->wr[i].post_scratch);
    }
    ck_pool_free(sh->own_pool);
    free(sh->in);
    free(sh->out);
    free(sh->rd);
    free(sh->wr);
    free(sh->jobs);
    free(sh);
}

ckey_status ckey_shot_run(ckey_session *s, ckey_source *src, ckey_sink *sink,
                          const uint8_t *plan, const ckey_shot_options *o,
                          ckey_shot_event_fn on_event, void *user, ckey_shot_stats *stats,
                          ckey_error *err) {
    ckey_session *const one[1] = {s};
    return ckey_shot_run_multi(one, 1, src, sink, plan, o, on_event, user, stats, err);
}

const char *ckey_frame_path_name(ckey_frame_path p) {
    return p == CKEY_FRAME_PATH_DEVICE ? "device" : p == CKEY_FRAME_PATH_CPU ? "host" : "auto";
}

/* Why the device path cannot post-process with options p, or NULL (a
 * valid set with the OpenCV despeckle or none; invalid options take the
 * host path, which reports them frame by frame). */
static const char *no_device_post(const ckey_post_options *p) {
    if (p->despeckle && p->despeckle_mode != CKEY_DESPECKLE_OPENCV) return "the torch despeckle has no device form";
    if (!(p->despill_strength >= 0.0f && p->despill_strength <= 1.0f) || (p->despeckle && p->despeckle_area < 0) ||
        (p->despeckle_mode != CKEY_DESPECKLE_OPENCV && p->despeckle_mode != CKEY_DESPECKLE_TORCH))
        return "invalid post options";
    return NULL;
}

ckey_frame_path ckey_shot_frame_path(ckey_device_kind device, const ckey_source *src, const uint8_t *plan,
                                     const ckey_shot_options *o, char *why, size_t cap) {
    char none[1];
    if (!why || cap == 0) why = none, cap = sizeof none;
    why[0] = 0;
    ckey_shot_options d;
    if (!o) ckey_shot_options_default(&d), o = &d;
    if (o->frame_path == CKEY_FRAME_PATH_CPU || o->frame_path == CKEY_FRAME_PATH_DEVICE) {
        snprintf(why, cap, "asked for");
        return o->frame_path;
    }
    const char *np = no_device_post(&o->post);
    if (device != CKEY_DEVICE_CUDA) {
        snprintf(why, cap, "the device is the CPU");
        return CKEY_FRAME_PATH_CPU;
    }
    if (np) {
        snprintf(why, cap, "%s", np);
        return CKEY_FRAME_PATH_CPU;
    }
    if (!src || !src->read_packed || !src->packed_frame) {
        snprintf(why, cap, "the frames come as floats (tracked hints or another source without packed "
                           "reads)");
        return CKEY_FRAME_PATH_CPU;
    }
    for (int64_t i = 0; i < src->count; i++) {
        if (plan && plan[i] != CKEY_SHOT_KEY) continue;
        if (!src->packed_frame(src->self, i)) {
            const ckey_shot_frame *f = &src->frames[i];
            snprintf(why, cap, "frame %lld (%s, hint %s) is read as floats: the device path uploads PNG and EXR "
                               "files in their own samples and a video's frames as 16-bit samples",
                     (long long)f->number, f->plate, f->hint ? f->hint : "none");
            return CKEY_FRAME_PATH_CPU;
        }
    }
    snprintf(why, cap, "on a GPU, every plate and hint a PNG or EXR file or a video");
    return CKEY_FRAME_PATH_DEVICE;
}

/*
 * The device frame path (sh->dev) or the host path, as opt.frame_path asks
 * (AUTO resolved by now): the device path needs every session on a device
 * and post options it has. One ck_devframe a model thread.
 */
static ckey_status choose_frame_path(shot *sh, ckey_error *err) {
    const char *why = NULL;
    for (int i = 0; !why && i < sh->nsess; i++)
        if (!ck_devframe_available(sh->sess[i])) why = "the session is not on a GPU";
    if (!why) why = no_device_post(&sh->opt.post);
    if (sh->opt.frame_path != CKEY_FRAME_PATH_DEVICE) return CKEY_OK;
    if (why) return ck_fail(err, CKEY_ERR_UNSUPPORTED, "the device frame path: %s", why);
    ck_post_options_from(&sh->opt.post, &sh->dev_post);
    for (int i = 0; i < sh->nmodel; i++) {
        ckey_status st = ck_devframe_create(sh->sess[i % sh->nsess], &sh->df[i], err);
        if (st) return st;
    }
    sh->dev = 1;
    sh->stored = sh->sink->stored_passes != 0;
    return CKEY_OK;
}

/* Sessions that key a frame alike: one network size and resize back. NULL
 * entries are allowed only when nothing is to be keyed (checked later). */
static ckey_status check_sessions(ckey_session *const *sess, int32_t n, ckey_error *err) {
    if (!sess || n < 1 || n > CKEY_SHOT_MAX_SESSIONS)
        return ck_fail(err, CKEY_ERR_INVALID_ARG, "ckey_shot_run_multi: %d sessions (1 to %d)",
                       (int)n, CKEY_SHOT_MAX_SESSIONS);
    for (int32_t i = 1; i < n; i++) {
        if (!sess[i] || !sess[0]) continue;
        if (ckey_session_size(sess[i]) != ckey_session_size(sess[0]) ||
            ck_session_resize_back(sess[i]) != ck_session_resize_back(sess[0]))
            return ck_fail(err, CKEY_ERR_INVALID_ARG,
                           "ckey_shot_run_multi: session %d keys at S = %d, the first at S = %d "
                           "(or another resize back): the sessions of one run must be alike",
                           (int)i, (int)ckey_session_size(sess[i]), (int)ckey_session_size(sess[0]));
    }
    return CKEY_OK;
}


ckey_status ckey_shot_run_multi(ckey_session *const *sessions, int32_t nsessions, ckey_source *src,
                                ckey_sink *sink, const uint8_t *plan, const ckey_shot_options *o,
                                ckey_shot_event_fn on_event, void *user, ckey_shot_stats *stats,
                                ckey_error *err) {
    if (stats) memset(stats, 0, sizeof *stats);
    if (!src || !src->read || (src->count > 0 && !src->frames) || src->count < 0 || !sink ||
        !sink->write)
        return ck_fail(err, CKEY_ERR_INVALID_ARG, "ckey_shot_run: bad source or sink");
    ckey_status cs = check_sessions(sessions, nsessions, err);
    if (cs != CKEY_OK) return cs;
    ckey_shot_options opt;
    if (o) opt = *o;
    else ckey_shot_options_default(&opt);
    if (opt.read_ahead < 0 || opt.read_ahead > 8 || opt.input_space < CKEY_INPUT_AUTO ||
        opt.input_space > CKEY_INPUT_LINEAR_AT_READ ||
        (opt.on_error != CKEY_ON_ERROR_STOP && opt.on_error != CKEY_ON_ERROR_SKIP) ||
        opt.writers < 0 || opt.writers > 64 || opt.readers < 0 || opt.readers > 16 || opt.threads < 0 ||
        opt.threads > 1024 || opt.frame_path < CKEY_FRAME_PATH_AUTO || opt.frame_path > CKEY_FRAME_PATH_DEVICE ||
        opt.device_frames < 0 || opt.device_frames > CK_SHOT_MAX_PIPELINES)
        return ck_fail(err, CKEY_ERR_INVALID_ARG, "ckey_shot_run: bad options");

    if (opt.frame_path == CKEY_FRAME_PATH_AUTO) { /* before the layout: the path sets the model threads */
        int gpu = 1;
        for (int i = 0; i < nsessions; i++)
            if (!sessions[i] || !ck_devframe_available(sessions[i])) gpu = 0;
        opt.frame_path = ckey_shot_frame_path(gpu ? CKEY_DEVICE_CUDA : CKEY_DEVICE_CPU, src, plan, &opt, NULL, 0);
    }
    shot *sh = calloc(1, sizeof *sh);
    if (!sh) return ck_fail(err, CKEY_ERR_NOMEM, "out of memory");
    sh->sess = sessions;
    sh->nsess = nsessions;
    sh->src = src;
    sh->sink = sink;
    sh->plan = plan;
    sh->opt = opt;
    sh->on_event = on_event;
    sh->user = user;
    sh->t0 = ck_now();
    const int threaded = opt.read_ahead > 0;
    const int M = nsessions;
    ck_shot_layout(&opt, M, &sh->nin, &sh->nout, &sh->nwr, &sh->nrd);
    sh->npipe = ck_shot_pipelines(&opt);
    sh->nmodel = M * sh->npipe;
    /* unthreaded, the calling thread runs every stage */
    sh->gthreads[CKEY_GROUP_READERS] = sh->nrd;
    sh->gthreads[CKEY_GROUP_NETWORK] = threaded ? sh->nmodel : 1;
    sh->gthreads[CKEY_GROUP_WRITERS] = sh->nwr;
    sh->gthreads[CKEY_GROUP_ORDERED] = 1;
    ckey_status st = CKEY_OK;
    sh->jobs = malloc(((size_t)src->count + 1) * sizeof *sh->jobs);
    sh->in = calloc((size_t)sh->nin, sizeof *sh->in);
    sh->out = calloc((size_t)sh->nout, sizeof *sh->out);
    sh->rd = calloc((size_t)sh->nrd, sizeof *sh->rd);
    sh->wr = calloc((size_t)sh->nwr, sizeof *sh->wr);
    if (!sh->jobs || !sh->in || !sh->out || !sh->rd || !sh->wr) st = ck_fail(err, CKEY_ERR_NOMEM, "out of memory");
    for (int i = 0; st == CKEY_OK && i < sh->nin; i++) sh->in[i].job = i;
    for (int i = 0; st == CKEY_OK && i < sh->nrd; i++) {
        sh->rd[i].sh = sh;
        sh->rd[i].id = i;
    }
    for (int i = 0; st == CKEY_OK && i < sh->nwr; i++) {
        sh->wr[i].sh = sh;
        sh->wr[i].id = i;
    }
    for (int64_t i = 0; st == CKEY_OK && i < src->count; i++)
        if (!plan || plan[i] == CKEY_SHOT_KEY) sh->jobs[sh->njobs++] = i;
    for (int i = 0; st == CKEY_OK && sh->njobs > 0 && i < M; i++)
        if (!sessions[i])
            st = ck_fail(err, CKEY_ERR_INVALID_ARG, "ckey_shot_run: frames to key but no session");
    if (st == CKEY_OK && sh->njobs > 0) sh->S = ckey_session_size(sessions[0]);
    if (st == CKEY_OK && sh->njobs > 0) st = choose_frame_path(sh, err);
    for (int i = 0; st == CKEY_OK && sh->dev && i < sh->nin; i++) {
        /* slot i serves session i % M's jobs: page-locked from that session */
        in_slot *sl = &sh->in[i];
        ck_slot_block *b[2] = {&sl->bplate, &sl->bhint};
        ckey_packed_image *pk[2] = {&sl->pplate, &sl->phint};
        for (int k = 0; k < 2; k++) {
            b[k]->pin = sess_pin;
            b[k]->unpin = sess_unpin;
            b[k]->pin_user = sessions[i % M];
            b[k]->lock = sh->npipe > 1 ? &sh->net_mu[i % M] : NULL;
            pk[k]->alloc = ck_slot_block_alloc;
            pk[k]->release = ck_slot_block_release;
            pk[k]->alloc_user = b[k];
        }
    }
    if (st == CKEY_OK && sh->njobs > 0 && !sh->dev) { /* the network's input and output per slot, [4, S, S] each */
        const size_t bytes = (size_t)4 * (size_t)sh->S * (size_t)sh->S * sizeof(float);
        /* from the session whose jobs use the slot (slot i: jobs i mod nin, a
         * multiple of M, so session i % M): page-locked on a GPU, so that it
         * uploads and downloads them directly (ckey_session_forward_into) */
        for (int i = 0; st == CKEY_OK && i < sh->nin; i++)
            if (!(sh->in[i].x = ckey_session_host_alloc(sessions[i % M], bytes)))
                st = ck_fail(err, CKEY_ERR_NOMEM, "out of memory for the input ring");
        for (int i = 0; st == CKEY_OK && i < sh->nout; i++)
            if (!(sh->out[i].net = ckey_session_host_alloc(sessions[i % M], bytes)))
                st = ck_fail(err, CKEY_ERR_NOMEM, "out of memory for the output ring");
    }
    if (st == CKEY_OK && sh->njobs > 0) {
        sh->max_pixels = ckey_session_max_plate_pixels(sessions[0]);
        for (int i = 1; i < M; i++) {
            const int64_t mp = ckey_session_max_plate_pixels(sessions[i]);
            if (mp < sh->max_pixels) sh->max_pixels = mp;
        }
        /* the first CPU session's own threads, else a pool of opt.threads
         * (all CPUs) */
        for (int i = 0; opt.threads == 0 && !sh->pool && i < M; i++) sh->pool = ck_session_pool(sessions[i]);
        if (!sh->pool) {
            st = ck_pool_create(opt.threads > 0 ? opt.threads : usable_cpus(), &sh->own_pool, err);
            sh->pool = sh->own_pool;
        }
        sh->dev_post.pool = sh->pool; /* the device path's connected components */
    }
    int32_t w0 = 0, h0 = 0; /* the device path: the first plate's size, probed before any read */
    if (st == CKEY_OK && sh->dev) {
        ckey_error pe;
        if (!src->probe || src->probe(src->self, sh->jobs[0], &w0, &h0, &pe) != CKEY_OK || w0 < 1 || h0 < 1 ||
            (int64_t)w0 * h0 > sh->max_pixels)
            w0 = h0 = 0;
        /* packed blocks only for a clip whose first frame is read packed */
        if (w0 > 0 && src->read_packed && (!src->packed_frame || src->packed_frame(src->self, sh->jobs[0])))
            reserve_in_slots(sh, w0, h0);
    }
    if (st == CKEY_OK && sh->njobs > 0 && sink->begin) st = sink->begin(sink->self, err);
    sh->stop_at = sh->njobs;

    if (st == CKEY_OK && sh->njobs > 0) {
        pthread_mutex_init(&sh->mu, NULL);
        pthread_cond_init(&sh->cv, NULL);
        for (int i = 0; i < M; i++) pthread_mutex_init(&sh->net_mu[i], NULL);
        if (threaded) {
            pthread_t rd[16], wr[64], md[CKEY_SHOT_MAX_MODELS];
            model_arg ma[CKEY_SHOT_MAX_MODELS];
            const int T = sh->nmodel;
            int have_rd = 0, have_wr = 0, have_md = 1; /* model 0 is this thread */
            while (have_rd < sh->nrd && pthread_create(&rd[have_rd], NULL, reader_main, &sh->rd[have_rd]) == 0)
                have_rd++;
            if (sh->dev) alloc_out_slots(sh, w0, h0);
            while (have_rd == sh->nrd && have_wr < sh->nwr &&
                   pthread_create(&wr[have_wr], NULL, writer_main, &sh->wr[have_wr]) == 0)
                have_wr++;
            while (have_wr == sh->nwr && have_md < T) {
                ma[have_md].sh = sh;
                ma[have_md].m = have_md;
                if (pthread_create(&md[have_md], NULL, model_main, &ma[have_md]) != 0) break;
                have_md++;
            }
            if (have_rd == sh->nrd && have_wr == sh->nwr && have_md == T) {
                model_loop(sh, 0);
            } else {
                ckey_error e;
                ck_fail(&e, CKEY_ERR_NOMEM, "cannot start the reader, model and writer threads");
                fail_at(sh, 0, &e, 1);
            }
            for (int i = 0; i < have_rd; i++) pthread_join(rd[i], NULL);
            for (int i = 1; i < have_md; i++) pthread_join(md[i], NULL);
            for (int i = 0; i < have_wr; i++) pthread_join(wr[i], NULL);
        } else {
            for (int64_t j = 0; j < sh->njobs; j++) {
                if (cancelled(sh, j) || !stage_read(sh, &sh->rd[0], j) || !stage_key(sh, j)) break;
                ckey_error e;
                const ckey_status pst = stage_post(sh, &sh->wr[0], j, &e);
                if (!stage_finish(sh, &sh->wr[0], j, pst, &e)) break;
            }
        }
        for (int i = 0; i < M; i++) pthread_mutex_destroy(&sh->net_mu[i]);
        pthread_cond_destroy(&sh->cv);
        pthread_mutex_destroy(&sh->mu);
        if (sh->stop_at < sh->njobs) {
            st = sh->err.status != CKEY_OK ? sh->err.status : CKEY_ERR_INTERNAL;
            if (err) *err = sh->err;
            if (err) err->status = st;
        }
    }
    if (st == CKEY_OK) {
        emit_skips(sh, src->count);
        if (sh->njobs > 0 && sink->finish) st = sink->finish(sink->self, err);
    }
    sh->stats.seconds = ck_now() - sh->t0;
    for (int i = 0; sh->rd && i < sh->nrd; i++) {
        sh->stats.decode_seconds += sh->rd[i].decode_s;
        sh->stats.pre_seconds += sh->rd[i].pre_s;
    }
    for (int i = 0; sh->wr && i < sh->nwr; i++) {
        sh->stats.back_seconds += sh->wr[i].back_s;
        sh->stats.post_seconds += sh->wr[i].post_s;
        sh->stats.sink_seconds += sh->wr[i].sink_s;
    }
    sh->stats.read_seconds = sh->stats.decode_seconds + sh->stats.pre_seconds;
    sh->stats.write_seconds = sh->stats.back_seconds + sh->stats.post_seconds + sh->stats.sink_seconds;
    for (int i = 0; i < sh->nmodel; i++) { /* the device path's, on the model threads (not in read / write) */
        sh->stats.pre_seconds += sh->dev_pre_s[i];
        sh->stats.post_seconds += sh->dev_post_s[i];
    }
    /* every thread has ended: no lock needed */
    load_locked(sh, sh->stats.seconds, &sh->stats.load);
    sh->stats.frame_path = sh->dev ? CKEY_FRAME_PATH_DEVICE : CKEY_FRAME_PATH_CPU;
    if (sink->pass_seconds) sink->pass_seconds(sink->self, sh->stats.pass_seconds);
    if (stats) *stats = sh->stats;
    free_shot(sh, sessions, M);
    return st;
}
