/*
 * A small persistent thread pool that several threads may use at once.
 *
 * Each ck_pool_for call is a job: a range cut into chunks that are claimed
 * with an atomic counter, so uneven chunks balance themselves. The job lives
 * on its caller's stack and is queued (FIFO) for the workers; the caller
 * claims chunks of its own job too, and returns once every chunk is done.
 * A worker takes the job at the head of the queue and claims its chunks until
 * none is left, then the next job. Jobs from several callers (the network's
 * ops on the model thread, a writer's post-processing and EXR chunks) thus
 * share the same workers, in the order they were submitted, without more
 * threads than cores.
 *
 * Thread indices: within a job, the caller runs as thread 0 and worker k as
 * thread k (1 .. nthreads-1), so a job's fn may index per-thread scratch by
 * it. Two jobs that run at once have their own index spaces.
 *
 * Lifetime: a worker attaches to a job under the lock before it touches it
 * and detaches under the lock after its last chunk; the caller returns only
 * when no worker is attached, so a job is never touched after its caller's
 * frame is gone. A caller waits only for chunks already running, never for
 * other jobs, so calls from inside a chunk (nested jobs) cannot deadlock.
 */
#include <pthread.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <unistd.h>

#include "core/core.h"

typedef struct pool_job {
    ck_range_fn fn;
    void *ctx;
    int64_t n, chunk, nchunks;
    atomic_int_fast64_t next; /* the next chunk to claim */
    int attached;             /* workers inside this job (under mu) */
    struct pool_job *link;    /* the queue */
} pool_job;

struct ck_pool {
    int nthreads; /* including the caller */
    pthread_t *threads;
    pthread_mutex_t mu;
    pthread_cond_t wake, done;
    int quit;
    pool_job *head, *tail; /* jobs that may have chunks left */
};

typedef struct {
    ck_pool *p;
    int index;
} worker_arg;

static void run_chunks(pool_job *j, int thread) {
    for (;;) {
        const int64_t c = atomic_fetch_add(&j->next, 1);
        if (c >= j->nchunks) break;
        const int64_t b = c * j->chunk;
        j->fn(j->ctx, b, CK_MIN(j->n, b + j->chunk), thread);
    }
}

/* Take `j` off the queue if it is still there (lock held). */
static void unqueue(ck_pool *p, pool_job *j) {
    pool_job **at = &p->head, *prev = NULL;
    while (*at && *at != j) prev = *at, at = &(*at)->link;
    if (!*at) return;
    *at = j->link;
    if (p->tail == j) p->tail = prev;
    j->link = NULL;
}

static void *worker_main(void *arg) {
    worker_arg wa = *(worker_arg *)arg;
    free(arg);
    ck_pool *p = wa.p;
    pthread_mutex_lock(&p->mu);
    for (;;) {
        while (!p->quit && !p->head) pthread_cond_wait(&p->wake, &p->mu);
        if (p->quit) break;
        pool_job *j = p->head;
        j->attached++;
        pthread_mutex_unlock(&p->mu);
        run_chunks(j, wa.index);
        pthread_mutex_lock(&p->mu);
        unqueue(p, j); /* no chunk left to claim */
        if (--j->attached == 0) pthread_cond_broadcast(&p->done);
    }
    pthread_mutex_unlock(&p->mu);
    return NULL;
}

ckey_status ck_pool_create(int threads, ck_pool **out, ckey_error *err) {
    *out = NULL;
    if (threads <= 0) {
        long n = sysconf(_SC_NPROCESSORS_ONLN);
        threads = n > 0 ? (int)n : 1;
    }
    if (threads > 1024) return ck_fail(err, CKEY_ERR_INVALID_ARG, "threads: %d is more than 1024", threads);
    ck_pool *p = calloc(1, sizeof *p);
    if (!p) return ck_fail(err, CKEY_ERR_NOMEM, "thread pool: out of memory");
    p->nthreads = threads;
    pthread_mutex_init(&p->mu, NULL);
    pthread_cond_init(&p->wake, NULL);
    pthread_cond_init(&p->done, NULL);
    if (threads > 1) {
        p->threads = calloc((size_t)threads - 1, sizeof *p->threads);
        if (!p->threads) {
            ck_pool_free(p);
            return ck_fail(err, CKEY_ERR_NOMEM, "thread pool: out of memory");
        }
        for (int i = 1; i < threads; i++) {
            worker_arg *wa = malloc(sizeof *wa);
            if (wa) {
                wa->p = p;
                wa->index = i;
            }
            if (!wa || pthread_create(&p->threads[i - 1], NULL, worker_main, wa) != 0) {
                free(wa);
                p->nthreads = i; /* only i-1 workers exist */
                ck_pool_free(p);
                return ck_fail(err, CKEY_ERR_NOMEM, "thread pool: could not start thread %d", i);
            }
        }
    }
    *out = p;
    return CKEY_OK;
}

void ck_pool_free(ck_pool *p) {
    if (!p) return;
    pthread_mutex_lock(&p->mu);
    p->quit = 1;
    pthread_cond_broadcast(&p->wake);
    pthread_mutex_unlock(&p->mu);
    for (int i = 1; i < p->nthreads; i++) pthread_join(p->threads[i - 1], NULL);
    free(p->threads);
    pthread_mutex_destroy(&p->mu);
    pthread_cond_destroy(&p->wake);
    pthread_cond_destroy(&p->done);
    free(p);
}

int ck_pool_size(const ck_pool *p) { return p ? p->nthreads : 1; }

void ck_pool_for(ck_pool *p, int64_t n, int64_t grain, ck_range_fn fn, void *ctx) {
    if (n <= 0) return;
    if (grain < 1) grain = 1;
    if (!p || p->nthreads == 1 || n <= grain) {
        fn(ctx, 0, n, 0);
        return;
    }
    /* About 4 chunks per thread balances load without much overhead. */
    const int64_t target = (int64_t)p->nthreads * 4;
    int64_t chunk = (n + target - 1) / target;
    if (chunk < grain) chunk = grain;
    pool_job j = {.fn = fn, .ctx = ctx, .n = n, .chunk = chunk, .nchunks = (n + chunk - 1) / chunk};
    atomic_init(&j.next, 0);
    pthread_mutex_lock(&p->mu);
    if (p->tail) p->tail->link = &j;
    else p->head = &j;
    p->tail = &j;
    pthread_cond_broadcast(&p->wake);
    pthread_mutex_unlock(&p->mu);
    run_chunks(&j, 0);
    pthread_mutex_lock(&p->mu);
    unqueue(p, &j);
    while (j.attached > 0) pthread_cond_wait(&p->done, &p->mu);
    pthread_mutex_unlock(&p->mu);
}
