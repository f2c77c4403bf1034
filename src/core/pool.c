/* A small persistent thread pool: one job at a time, chunks claimed with an
 * atomic counter so uneven chunks balance themselves. */
#include <pthread.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <unistd.h>

#include "core/core.h"

struct ck_pool {
    int nthreads; /* including the caller */
    pthread_t *threads;
    pthread_mutex_t mu;
    pthread_cond_t wake, done;
    uint64_t generation;
    int quit;
    int busy; /* workers still inside the current job */
    /* current job */
    ck_range_fn fn;
    void *ctx;
    int64_t n, chunk, nchunks;
    atomic_int_fast64_t next;
};

typedef struct {
    ck_pool *p;
    int index;
} worker_arg;

static void run_chunks(ck_pool *p, int thread) {
    for (;;) {
        int64_t c = atomic_fetch_add(&p->next, 1);
        if (c >= p->nchunks) break;
        int64_t b = c * p->chunk;
        int64_t e = CK_MIN(p->n, b + p->chunk);
        p->fn(p->ctx, b, e, thread);
    }
}

static void *worker_main(void *arg) {
    worker_arg wa = *(worker_arg *)arg;
    free(arg);
    ck_pool *p = wa.p;
    uint64_t seen = 0;
    pthread_mutex_lock(&p->mu);
    for (;;) {
        while (!p->quit && p->generation == seen) pthread_cond_wait(&p->wake, &p->mu);
        if (p->quit) break;
        seen = p->generation;
        pthread_mutex_unlock(&p->mu);
        run_chunks(p, wa.index);
        pthread_mutex_lock(&p->mu);
        if (--p->busy == 0) pthread_cond_signal(&p->done);
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
    atomic_init(&p->next, 0);
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
    int64_t target = (int64_t)p->nthreads * 4;
    int64_t chunk = (n + target - 1) / target;
    if (chunk < grain) chunk = grain;
    pthread_mutex_lock(&p->mu);
    p->fn = fn;
    p->ctx = ctx;
    p->n = n;
    p->chunk = chunk;
    p->nchunks = (n + chunk - 1) / chunk;
    atomic_store(&p->next, 0);
    p->busy = p->nthreads - 1;
    p->generation++;
    pthread_cond_broadcast(&p->wake);
    pthread_mutex_unlock(&p->mu);
    run_chunks(p, 0);
    pthread_mutex_lock(&p->mu);
    while (p->busy > 0) pthread_cond_wait(&p->done, &p->mu);
    pthread_mutex_unlock(&p->mu);
}
