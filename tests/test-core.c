/* Core: memory planner, thread pool, GEMM called from pool threads, and the
 * fast exp / GELU approximations on every kind of float. */
#include <float.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>

#include "core/core.h"
#include "core/fastmath.h"
#include "cpu/cpu.h"
#include "cuda/kernels.h"
#include "support/testutil.h"

/* Random alloc/release sequences: buffers alive at the same time never share
 * a byte, the arena is no larger than the naive sum, replay is exact. */
static void test_planner_random(void) {
    ck_plan *p;
    REQUIRE(ck_plan_create(&p, NULL) == CKEY_OK);
    srand(7);
    for (int trial = 0; trial < 50; trial++) {
        enum { N = 60 };
        size_t sizes[N];
        int rel_after[N]; /* release buffer i after allocating buffer rel_after[i] */
        for (int i = 0; i < N; i++) {
            sizes[i] = (size_t)(rand() % 100000) + 1;
            rel_after[i] = i + rand() % 10;
        }
        /* run the sequence twice: record, then execute */
        unsigned char *arena = NULL;
        void *ptr[N];
        for (int pass = 0; pass < 2; pass++) {
            if (pass == 0) ck_plan_begin_record(p);
            else ck_plan_begin_execute(p, arena);
            for (int i = 0; i < N; i++) {
                ptr[i] = ck_alloc(p, sizes[i], "t");
                if (pass == 1) memset(ptr[i], i, sizes[i]); /* tag the bytes */
                for (int j = 0; j <= i; j++)
                    if (rel_after[j] == i) {
                        if (pass == 1) /* still tagged: nobody overwrote a live buffer */
                            for (size_t b = 0; b < sizes[j]; b++)
                                if (((unsigned char *)ptr[j])[b] != (unsigned char)j) {
                                    CHECKF(0, "trial %d: buffer %d clobbered", trial, j);
                                    break;
                                }
                        ck_release(p, ptr[j]);
                    }
            }
            if (pass == 0) {
                REQUIRE(ck_plan_finish(p, NULL) == CKEY_OK);
                CHECK(ck_plan_arena_bytes(p) <= ck_plan_naive_bytes(p));
                arena = malloc(ck_plan_arena_bytes(p));
                REQUIRE(arena);
            } else {
                CHECK(ck_plan_replay_complete(p));
            }
        }
        free(arena);
    }
    ck_plan_free(p);
}

/* A diverging replay (different size) is detected, not silently used. */
static void test_planner_divergence(void) {
    ck_plan *p;
    REQUIRE(ck_plan_create(&p, NULL) == CKEY_OK);
    ck_plan_begin_record(p);
    void *a = ck_alloc(p, 1000, "a");
    ck_release(p, a);
    void *b = ck_alloc(p, 1000, "b");
    (void)b;
    REQUIRE(ck_plan_finish(p, NULL) == CKEY_OK);
    CHECK(ck_plan_arena_bytes(p) == 1024); /* b reuses a's bytes */
    unsigned char *arena = malloc(ck_plan_arena_bytes(p));
    ck_plan_begin_execute(p, arena);
    CHECK(ck_alloc(p, 1000, "a") == arena);
    CHECK(ck_alloc(p, 5000, "b") == NULL); /* size differs from the record */
    CHECK(!ck_plan_replay_complete(p));
    free(arena);
    ck_plan_free(p);
}

/* ck_shrink: a buffer's tail is free from the shrink on, its head lives on.
 * Random sequences with shrinks: no live byte (a head to its release, a tail
 * to its shrink) is overwritten and replay is exact; a buffer allocated after
 * a shrink reuses the tail's bytes. */
static void test_planner_shrink(void) {
    ck_plan *p;
    REQUIRE(ck_plan_create(&p, NULL) == CKEY_OK);
    ck_plan_begin_record(p);
    void *a = ck_alloc(p, 4096, "a");
    ck_shrink(p, a, 3000, "a tail");
    void *b = ck_alloc(p, 1024, "b");
    ck_release(p, b);
    ck_release(p, a);
    REQUIRE(ck_plan_finish(p, NULL) == CKEY_OK);
    CHECKF(ck_plan_arena_bytes(p) == 4096, "arena %zu: b belongs in a's tail", ck_plan_arena_bytes(p));
    unsigned char *arena = malloc(4096);
    REQUIRE(arena);
    ck_plan_begin_execute(p, arena);
    CHECK(ck_alloc(p, 4096, "a") == arena);
    ck_shrink(p, arena, 3000, "a tail");
    CHECK(ck_alloc(p, 1024, "b") == arena + 3008); /* the head keeps 3000 rounded up to 64 */
    CHECK(ck_plan_replay_complete(p));
    free(arena);
    srand(11);
    for (int trial = 0; trial < 50; trial++) {
        enum { N = 60 };
        size_t sizes[N], keep[N];
        int rel_after[N], shrink_after[N];
        for (int i = 0; i < N; i++) {
            sizes[i] = (size_t)(rand() % 100000) + 128;
            rel_after[i] = i + rand() % 10;
            shrink_after[i] = rand() % 3 ? -1 : i + rand() % (rel_after[i] - i + 1); /* at or before release */
            keep[i] = (size_t)(rand() % (int)(sizes[i] - 64)) + 1;
            keep[i] = CK_MIN(keep[i], (sizes[i] - 1) / 64 * 64);
            if (keep[i] == 0) shrink_after[i] = -1;
        }
        unsigned char *ar = NULL;
        unsigned char *ptr[N];
        for (int pass = 0; pass < 2; pass++) {
            if (pass == 0) ck_plan_begin_record(p);
            else ck_plan_begin_execute(p, ar);
            for (int i = 0; i < N; i++) {
                ptr[i] = ck_alloc(p, sizes[i], "t");
                if (pass == 1) memset(ptr[i], i, sizes[i]);
                for (int j = 0; j <= i; j++) {
                    const size_t kept = (keep[j] + 63) / 64 * 64;
                    if (shrink_after[j] == i) {
                        if (pass == 1)
                            for (size_t q = 0; q < sizes[j]; q++)
                                if (ptr[j][q] != (unsigned char)j) {
                                    CHECKF(0, "trial %d: buffer %d clobbered before its shrink", trial, j);
                                    break;
                                }
                        ck_shrink(p, ptr[j], keep[j], "tail");
                    }
                    if (rel_after[j] == i) {
                        const size_t live = shrink_after[j] >= 0 ? kept : sizes[j];
                        if (pass == 1)
                            for (size_t q = 0; q < live; q++)
                                if (ptr[j][q] != (unsigned char)j) {
                                    CHECKF(0, "trial %d: buffer %d's head clobbered", trial, j);
                                    break;
                                }
                        ck_release(p, ptr[j]);
                    }
                }
            }
            if (pass == 0) {
                REQUIRE(ck_plan_finish(p, NULL) == CKEY_OK);
                CHECK(ck_plan_arena_bytes(p) <= ck_plan_naive_bytes(p));
                ar = malloc(ck_plan_arena_bytes(p));
                REQUIRE(ar);
            } else {
                CHECK(ck_plan_replay_complete(p));
            }
        }
        free(ar);
    }
    ck_plan_free(p);
}

typedef struct {
    atomic_int *hits;
    atomic_int calls;
} cover_ctx;

static void cover(void *p, int64_t b, int64_t e, int thread) {
    cover_ctx *c = p;
    atomic_fetch_add(&c->calls, 1);
    for (int64_t i = b; i < e; i++) atomic_fetch_add(&c->hits[i], 1);
}

static void test_pool_coverage(void) {
    ck_pool *pool;
    REQUIRE(ck_pool_create(4, &pool, NULL) == CKEY_OK);
    CHECK(ck_pool_size(pool) == 4);
    enum { N = 10007 };
    atomic_int *hits = calloc(N, sizeof *hits);
    for (int round = 0; round < 200; round++) {
        int64_t n = 1 + (round * 97) % N;
        cover_ctx c = {hits, 0};
        for (int64_t i = 0; i < n; i++) atomic_store(&hits[i], 0);
        ck_pool_for(pool, n, 1 + round % 7, cover, &c);
        int64_t bad = 0;
        for (int64_t i = 0; i < n; i++) bad += atomic_load(&hits[i]) != 1;
        CHECKF(bad == 0, "round %d: %lld indices not covered exactly once", round, (long long)bad);
    }
    free(hits);
    ck_pool_free(pool);
    ck_pool_free(NULL);
}

/* One submitter's job: every index covered once, thread indices in range and
 * never two chunks of this job at once on one index; each item of the outer
 * job runs a nested job on the same pool. */
typedef struct {
    ck_pool *pool;
    atomic_int *hits;
    atomic_int *busy; /* per thread index: chunks of this job running */
    atomic_int bad;
    int nested;
} multi_ctx;

static void multi_cover(void *p, int64_t b, int64_t e, int thread) {
    multi_ctx *c = p;
    if (thread < 0 || thread >= ck_pool_size(c->pool) || atomic_fetch_add(&c->busy[thread], 1) != 0)
        atomic_fetch_add(&c->bad, 1);
    for (int64_t i = b; i < e; i++) {
        atomic_fetch_add(&c->hits[i], 1);
        if (c->nested) {
            atomic_int inner_hits[37];
            atomic_int inner_busy[8];
            for (int k = 0; k < 37; k++) atomic_init(&inner_hits[k], 0);
            for (int k = 0; k < 8; k++) atomic_init(&inner_busy[k], 0);
            multi_ctx in = {c->pool, inner_hits, inner_busy, 0, 0};
            ck_pool_for(c->pool, 37, 1, multi_cover, &in);
            for (int k = 0; k < 37; k++)
                if (atomic_load(&inner_hits[k]) != 1) atomic_fetch_add(&c->bad, 1);
            atomic_fetch_add(&c->bad, atomic_load(&in.bad));
        }
    }
    atomic_fetch_sub(&c->busy[thread < 0 || thread >= 8 ? 0 : thread], 1);
}

typedef struct {
    ck_pool *pool;
    int seed;
    int bad;
} submitter_arg;

static void *submitter(void *p) {
    submitter_arg *a = p;
    enum { N = 3001 };
    atomic_int *hits = calloc(N, sizeof *hits);
    atomic_int busy[8];
    for (int round = 0; round < 150; round++) {
        const int64_t n = 1 + (round * 131 + a->seed * 17) % N;
        for (int64_t i = 0; i < n; i++) atomic_store(&hits[i], 0);
        for (int k = 0; k < 8; k++) atomic_init(&busy[k], 0);
        multi_ctx c = {a->pool, hits, busy, 0, round % 10 == 0};
        ck_pool_for(a->pool, c.nested ? 9 : n, 1 + round % 5, multi_cover, &c);
        for (int64_t i = 0; i < (c.nested ? 9 : n); i++) a->bad += atomic_load(&hits[i]) != 1;
        a->bad += atomic_load(&c.bad);
    }
    free(hits);
    return NULL;
}

/* Several threads submit jobs to one pool at once, some of whose chunks
 * submit nested jobs: each job covers its range exactly once, on valid and
 * distinct thread indices, and every call returns. */
static void test_pool_concurrent_jobs(void) {
    ck_pool *pool;
    REQUIRE(ck_pool_create(4, &pool, NULL) == CKEY_OK);
    enum { T = 4 };
    pthread_t th[T];
    submitter_arg args[T];
    for (int t = 0; t < T; t++) {
        args[t] = (submitter_arg){pool, t, 0};
        REQUIRE(pthread_create(&th[t], NULL, submitter, &args[t]) == 0);
    }
    int bad = 0;
    for (int t = 0; t < T; t++) {
        pthread_join(th[t], NULL);
        bad += args[t].bad;
    }
    CHECKF(bad == 0, "%d coverage or thread-index faults", bad);
    ck_pool_free(pool);
}

typedef struct {
    const float *A, *B;
    float *C;
    int M, N, K;
} gemm_ctx;

static void gemm_tiles(void *p, int64_t b, int64_t e, int thread) {
    const gemm_ctx *g = p;
    for (int64_t t = b; t < e; t++) /* each item: a 64-row tile, its own call */
        ck_sgemm(1, 64, g->N, g->K, 1.0f, g->A + t * 64 * g->K, g->K, g->B, g->K, 0.0f, g->C + t * 64 * g->N, g->N);
}

/* Many concurrent single-threaded GEMMs from pool threads must equal the
 * same products computed one by one (regression: Debian's serial OpenBLAS
 * corrupts ~2% of concurrent calls). */
static void test_concurrent_gemm(void) {
    ck_gemm_init();
    const int M = 64 * 256, N = 96, K = 56;
    float *A = malloc(sizeof(float) * M * K), *B = malloc(sizeof(float) * N * K);
    float *C = malloc(sizeof(float) * M * N), *R = malloc(sizeof(float) * M * N);
    for (int i = 0; i < M * K; i++) A[i] = (float)((i * 37) % 101) / 101.0f - 0.5f;
    for (int i = 0; i < N * K; i++) B[i] = (float)((i * 53) % 89) / 89.0f - 0.5f;
    gemm_ctx g = {A, B, R, M, N, K};
    gemm_tiles(&g, 0, M / 64, 0);
    ck_pool *pool;
    REQUIRE(ck_pool_create(4, &pool, NULL) == CKEY_OK);
    g.C = C;
    int bad_rounds = 0;
    for (int round = 0; round < 40; round++) {
        memset(C, 0, sizeof(float) * M * N);
        ck_pool_for(pool, M / 64, 1, gemm_tiles, &g);
        bad_rounds += memcmp(C, R, sizeof(float) * M * N) != 0;
    }
    printf("  %d of 40 rounds of %d concurrent GEMMs differ from the serial products\n", bad_rounds, M / 64);
    CHECK(bad_rounds == 0);
    /* and the product itself is right */
    double maxerr = 0;
    for (int i = 0; i < M; i += 97)
        for (int j = 0; j < N; j++) {
            double s = 0;
            for (int k = 0; k < K; k++) s += (double)A[i * K + k] * B[j * K + k];
            maxerr = fmax(maxerr, fabs(s - R[i * N + j]));
        }
    CHECK(maxerr < 1e-4);
    ck_pool_free(pool);
    free(A), free(B), free(C), free(R);
}

/* Both GEMM paths (AVX-512 where present, and the narrow AVX2/baseline one)
 * against a double-precision reference, over shapes that hit every tail:
 * strip heights 1..30, panel widths 1..70, K across the 256 blocking,
 * transposed or not, overwrite or accumulate, padded leading dimensions. */
static void test_gemm_variants(void) {
    const int Ms[] = {1, 5, 7, 13, 14, 15, 29, 30, 64}, Ns[] = {1, 9, 16, 17, 32, 33, 56, 70}, Ks[] = {1, 7, 56, 255, 257, 600};
    double worst[2] = {0, 0};
    int cases = 0;
    for (size_t a = 0; a < CK_ARRAY_LEN(Ms); a++)
        for (size_t b = 0; b < CK_ARRAY_LEN(Ns); b++)
            for (size_t c = 0; c < CK_ARRAY_LEN(Ks); c++)
                for (int tr = 0; tr < 2; tr++)
                    for (int beta = 0; beta < 2; beta++) {
                        const int M = Ms[a], N = Ns[b], K = Ks[c];
                        const int lda = K + 3, ldb = (tr ? K : N) + 5, ldc = N + 2;
                        float *A = malloc(sizeof(float) * M * lda), *B = malloc(sizeof(float) * (tr ? N : K) * ldb);
                        float *C = malloc(sizeof(float) * M * ldc), *C0 = malloc(sizeof(float) * M * ldc);
                        for (int i = 0; i < M * lda; i++) A[i] = (float)((i * 29) % 83) / 83.0f - 0.5f;
                        for (int i = 0; i < (tr ? N : K) * ldb; i++) B[i] = (float)((i * 31) % 79) / 79.0f - 0.5f;
                        for (int i = 0; i < M * ldc; i++) C0[i] = (float)(i % 11) - 5.0f;
                        for (int v = 0; v < 2; v++) {
                            memcpy(C, C0, sizeof(float) * M * ldc);
                            ck_sgemm_variant(v, tr, M, N, K, A, lda, B, ldb, beta ? 1.0f : 0.0f, C, ldc);
                            for (int i = 0; i < M; i++) {
                                for (int j = 0; j < N; j++) {
                                    double r = beta ? C0[i * ldc + j] : 0.0;
                                    for (int k = 0; k < K; k++)
                                        r += (double)A[i * lda + k] * (tr ? B[j * ldb + k] : B[k * ldb + j]);
                                    worst[v] = fmax(worst[v], fabs(r - C[i * ldc + j]) / (1.0 + sqrt((double)K)));
                                }
                                /* padding columns untouched */
                                for (int j = N; j < ldc; j++)
                                    if (C[i * ldc + j] != C0[i * ldc + j]) worst[v] = INFINITY;
                            }
                        }
                        cases++;
                        free(A), free(B), free(C), free(C0);
                    }
    printf("  %d shapes: max scaled error %.3g (default path), %.3g (narrow path)\n", cases, worst[0], worst[1]);
    CHECK(worst[0] < 1e-5 && worst[1] < 1e-5);
}

/* ck_conv3x3_row, both paths, against a double-precision direct conv: every
 * dilation the refiner uses, widths that leave partial 32-channel panels,
 * segments that start and end inside the zero-padded border, on the whole
 * map and on a band of just the rows read. */
static void test_conv3x3_rows(void) {
    const int Cs[][2] = {{64, 64}, {16, 16}, {40, 24}}, dils[] = {1, 2, 4, 8}, S = 37;
    double worst[2] = {0, 0};
    for (size_t a = 0; a < CK_ARRAY_LEN(Cs); a++)
        for (size_t b = 0; b < CK_ARRAY_LEN(dils); b++) {
            const int Cout = Cs[a][0], Cin = Cs[a][1], d = dils[b];
            float *in = malloc(sizeof(float) * S * S * Cin), *W = malloc(sizeof(float) * Cout * Cin * 9);
            float *bias = malloc(sizeof(float) * Cout), *wp = malloc(sizeof(float) * ck_conv3x3_packed_floats(Cout, Cin));
            float *dst = malloc(sizeof(float) * S * Cout);
            for (int i = 0; i < S * S * Cin; i++) in[i] = (float)((i * 29) % 83) / 83.0f - 0.5f;
            for (int i = 0; i < Cout * Cin * 9; i++) W[i] = (float)((i * 31) % 79) / 79.0f - 0.5f;
            for (int i = 0; i < Cout; i++) bias[i] = (float)(i % 7) - 3.0f;
            ck_conv3x3_pack(Cout, Cin, W, wp);
            const int segs[][2] = {{0, 37}, {3, 30}, {0, 5}, {30, 7}, {9, 1}};
            for (int y = 0; y < S; y += 3)
                for (size_t sg = 0; sg < CK_ARRAY_LEN(segs); sg++)
                    for (int vb = 0; vb < 4; vb++) {
                        /* the whole map, or (vb >= 2) only the rows the output row reads
                         * (a band: rows [r0, r0 + nr), the rest zero padding or not read) */
                        const int v = vb & 1, r0 = vb >= 2 ? CK_MAX(0, y - d) : 0;
                        const int nr = vb >= 2 ? CK_MIN(S, y + d + 1) - r0 : S;
                        const int x0 = segs[sg][0], n = segs[sg][1];
                        ck_conv3x3_row(v, in + (int64_t)r0 * S * Cin, S, r0, nr, Cin, d, y, x0, n, wp, Cout, bias,
                                       dst);
                        for (int i = 0; i < n; i++)
                            for (int co = 0; co < Cout; co++) {
                                double r = bias[co];
                                for (int ky = 0; ky < 3; ky++)
                                    for (int kx = 0; kx < 3; kx++) {
                                        const int iy = y + (ky - 1) * d, ix = x0 + i + (kx - 1) * d;
                                        if (iy < 0 || iy >= S || ix < 0 || ix >= S) continue;
                                        for (int ci = 0; ci < Cin; ci++)
                                            r += (double)in[((int64_t)iy * S + ix) * Cin + ci] * W[(co * Cin + ci) * 9 + ky * 3 + kx];
                                    }
                                worst[v] = fmax(worst[v], fabs(r - dst[i * Cout + co]) / (1.0 + sqrt(9.0 * Cin)));
                            }
                    }
            free(in), free(W), free(bias), free(wp), free(dst);
        }
    printf("  conv3x3 rows: max scaled error %.3g (default path), %.3g (narrow path)\n", worst[0], worst[1]);
    CHECK(worst[0] < 1e-5 && worst[1] < 1e-5);
}

/* ck_flash_t (the AVX-512 attention kernel) against a double-precision
 * softmax: partial 32-query blocks, a partial last key tile, head_dim 56 (the
 * network's) and 16 (the tiny fixtures', a partial 14-row strip). */
static void test_flash_t(void) {
    if (!ck_flash_t_available(0)) {
        printf("  ck_flash_t not available (no AVX-512, or a BLAS=openblas build)\n");
        return;
    }
    const int hds[] = {56, 16}, nqs[] = {1, 37, 256}, nks[] = {5, 252, 600};
    double worst = 0;
    for (size_t a = 0; a < CK_ARRAY_LEN(hds); a++)
        for (size_t b = 0; b < CK_ARRAY_LEN(nqs); b++)
            for (size_t c = 0; c < CK_ARRAY_LEN(nks); c++) {
                const int hd = hds[a], nq = nqs[b], nk = nks[c], BK = CK_FLASH_T_BK;
                const int tiles = (nk + BK - 1) / BK, ldo = hd + 3;
                float *q = malloc(sizeof(float) * nq * hd), *K = malloc(sizeof(float) * nk * hd);
                float *V = malloc(sizeof(float) * nk * hd), *Vt = calloc((size_t)tiles * BK * hd, sizeof(float));
                float *out = malloc(sizeof(float) * nq * ldo), *work = malloc(sizeof(float) * ck_flash_t_work(nq, hd));
                for (int i = 0; i < nq * hd; i++) q[i] = 3.0f * ((float)((i * 29) % 83) / 83.0f - 0.5f);
                for (int i = 0; i < nk * hd; i++) K[i] = (float)((i * 31) % 79) / 79.0f - 0.5f;
                for (int i = 0; i < nk * hd; i++) V[i] = (float)((i * 37) % 71) / 71.0f - 0.5f;
                for (int k = 0; k < nk; k++)
                    for (int d = 0; d < hd; d++) Vt[(size_t)(k / BK) * BK * hd + (size_t)d * BK + k % BK] = V[k * hd + d];
                ck_flash_t(q, nq, K, Vt, nk, hd, out, ldo, work);
                double *s = malloc(sizeof(double) * nk);
                for (int i = 0; i < nq; i++) {
                    double mx = -INFINITY, sum = 0;
                    for (int k = 0; k < nk; k++) {
                        s[k] = 0;
                        for (int d = 0; d < hd; d++) s[k] += (double)q[i * hd + d] * K[k * hd + d];
                        mx = fmax(mx, s[k]);
                    }
                    for (int k = 0; k < nk; k++) sum += s[k] = exp2(s[k] - mx);
                    for (int d = 0; d < hd; d++) {
                        double r = 0;
                        for (int k = 0; k < nk; k++) r += s[k] * V[k * hd + d];
                        worst = fmax(worst, fabs(r / sum - out[i * ldo + d]));
                    }
                }
                free(s), free(q), free(K), free(V), free(Vt), free(out), free(work);
            }
    printf("  flash_t: max abs error %.3g\n", worst);
    CHECK(worst < 1e-5);
}

/* ck_sgemm_pack_b + ck_sgemm_packed, both paths, against a double-precision
 * reference: partial panels, K across the 256 blocking, both operand layouts,
 * overwrite and accumulate. */
static void test_gemm_packed(void) {
    const int Ms[] = {1, 13, 14, 64}, Ns[] = {1, 33, 56, 70}, Ks[] = {7, 256, 600};
    double worst[2] = {0, 0};
    for (size_t a = 0; a < CK_ARRAY_LEN(Ms); a++)
        for (size_t b = 0; b < CK_ARRAY_LEN(Ns); b++)
            for (size_t c = 0; c < CK_ARRAY_LEN(Ks); c++)
                for (int tr = 0; tr < 2; tr++) {
                    const int M = Ms[a], N = Ns[b], K = Ks[c], lda = K + 1, ldb = (tr ? K : N) + 3, ldc = N + 2;
                    const int64_t ps = (int64_t)K * 32 + 16;
                    float *A = malloc(sizeof(float) * M * lda), *B = malloc(sizeof(float) * (tr ? N : K) * ldb);
                    float *Bp = malloc(sizeof(float) * ps * ((N + 31) / 32)), *C = malloc(sizeof(float) * M * ldc);
                    for (int i = 0; i < M * lda; i++) A[i] = (float)((i * 29) % 83) / 83.0f - 0.5f;
                    for (int i = 0; i < (tr ? N : K) * ldb; i++) B[i] = (float)((i * 31) % 79) / 79.0f - 0.5f;
                    ck_sgemm_pack_b(tr, N, K, B, ldb, Bp, ps);
                    for (int v = 0; v < 2; v++)
                        for (int beta = 0; beta < 2; beta++) {
                            for (int i = 0; i < M * ldc; i++) C[i] = (float)(i % 11) - 5.0f;
                            ck_sgemm_packed(v, M, N, K, A, lda, Bp, ps, beta ? 1.0f : 0.0f, C, ldc);
                            for (int i = 0; i < M; i++)
                                for (int j = 0; j < N; j++) {
                                    double r = beta ? (double)((i * ldc + j) % 11) - 5.0 : 0.0;
                                    for (int k = 0; k < K; k++)
                                        r += (double)A[i * lda + k] * (tr ? B[j * ldb + k] : B[k * ldb + j]);
                                    worst[v] = fmax(worst[v], fabs(r - C[i * ldc + j]) / (1.0 + sqrt((double)K)));
                                }
                        }
                    free(A), free(B), free(Bp), free(C);
                }
    printf("  packed B: max scaled error %.3g (default path), %.3g (narrow path)\n", worst[0], worst[1]);
    CHECK(worst[0] < 1e-5 && worst[1] < 1e-5);
}

static void test_vexp(void) {
    float x[2048], y[2048];
    double worst = 0;
    for (int i = 0; i < 2048; i++) x[i] = y[i] = -87.0f + 87.0f * (float)i / 2047.0f;
    ck_vexp(y, 2048);
    for (int i = 0; i < 2048; i++) {
        double r = exp((double)x[i]);
        worst = fmax(worst, fabs(y[i] - r) / r);
    }
    printf("  vexp max relative error %.3g on [-87, 0]\n", worst);
    CHECK(worst < 5e-7);
}

/* Inputs for the special-value sweep: NaNs, the infinities, the extremes of
 * the finite range, the edges of exp's range, denormals and zeros, then
 * 4 values a decade from 1e-45 to 1e38, both signs. */
static int special_inputs(float *v, int cap) {
    static const float fixed[] = {
        0.0f, -0.0f, FLT_MAX, -FLT_MAX, FLT_MIN, -FLT_MIN, FLT_TRUE_MIN, -FLT_TRUE_MIN, 1e-40f, -1e-40f,
        1e30f, -1e30f, 1e10f, -1e10f, 1000.0f, -1000.0f, 200.0f, -200.0f, 104.0f, -104.0f, 103.9f, -103.9f,
        103.0f, -103.0f, 100.0f, -100.0f, 89.0f, -89.0f, 88.8f, 88.7228394f, 88.7228317f, 88.72283f, 88.7f,
        88.5f, 88.1f, 88.0f, 87.5f, -87.0f, -87.3f, -87.5f, -88.0f, -88.7f, -95.0f, -102.5f, 20.0f, -20.0f,
        12.0f, -12.0f, 10.0f, -10.0f, 8.0f, -8.0f, 6.0f, -6.0f, 5.7f, -5.7f, 5.69f, -5.69f, 3.0f, -3.0f,
        1.0f, -1.0f, 0.5f, -0.5f, 1e-3f, -1e-3f, 1e-20f, -1e-20f,
    };
    int n = 0;
    v[n++] = NAN;
    v[n++] = -NAN;
    const uint32_t nan_bits[3] = {0x7fc00001u, 0xffffffffu, 0x7f800001u /* signalling */};
    for (int i = 0; i < 3; i++) memcpy(&v[n++], &nan_bits[i], sizeof(float));
    v[n++] = INFINITY;
    v[n++] = -INFINITY;
    for (size_t i = 0; i < CK_ARRAY_LEN(fixed) && n < cap; i++) v[n++] = fixed[i];
    for (int e = -45; e <= 38 && n + 8 <= cap; e++)
        for (int m = 1; m <= 7; m += 2) {
            const double d = m * pow(10.0, e);
            if (d > FLT_MAX) continue;
            const float x = (float)d;
            v[n++] = x;
            v[n++] = -x;
        }
    return n;
}

/* |a - b| in units in the last place, for finite a and b of one sign */
static int within_ulp(float a, float b, int ulps) {
    if (!isfinite(a) || !isfinite(b) || (a < 0) != (b < 0)) return 0;
    int32_t ia, ib;
    memcpy(&ia, &a, sizeof ia), memcpy(&ib, &b, sizeof ib);
    return llabs((long long)ia - ib) <= ulps;
}

static int same_float(float a, float b) {
    return (isnan(a) && isnan(b)) || a == b;
}

/*
 * ck_exp_approx, the CPU ops' erf GELU (ck_gelu_approx) and the CUDA 16-bit
 * paths' GELU (ck_gelu_fast, host build) on every kind of float, against
 * double exp / erf: NaN gives NaN, the infinities give their limits (exp:
 * +Inf, 0; GELU: +Inf, 0), results past the float range overflow to +Inf
 * or underflow towards 0 as exp does, finite results are within the
 * approximations' bounds. Run under UBSan by `make test`, which would stop
 * on undefined arithmetic (shifts, conversions) on any of these inputs.
 * ck_vexp (the vectorized loop of the ops) gives the scalar's value within
 * one ulp (its clone for an FMA target may fuse the polynomial's
 * multiply-adds where the scalar build does not).
 */
static void test_fastmath_special_values(void) {
    float v[1024], ve[1024];
    const int n = special_inputs(v, 1024);
    int bad_exp = 0, bad_gelu = 0, bad_fast = 0, bad_vec = 0;
    memcpy(ve, v, (size_t)n * sizeof(float));
    ck_vexp(ve, n);
    for (int i = 0; i < n; i++) {
        const float x = v[i];
        /* exp: within 5e-7 relative where the result is normal, else within
         * a denormal step of the double reference rounded to float */
        const float e = ck_exp_approx(x);
        const double re = exp((double)x);
        const float rf = re > FLT_MAX ? INFINITY : (float)re;
        int ok;
        if (isnan(x)) ok = isnan(e);
        else if (isinf(rf)) ok = isinf(e) && e > 0;
        else if (rf >= FLT_MIN) ok = fabs((double)e - re) <= 5e-7 * re;
        else ok = e >= 0 && fabs((double)e - re) <= 2.0 * FLT_TRUE_MIN;
        if (!ok) printf("    exp(%.9g) = %.9g, want %.9g\n", (double)x, (double)e, (double)rf);
        bad_exp += !ok;
        if (!same_float(ve[i], e) && !within_ulp(ve[i], e, 1)) {
            printf("    ck_vexp(%.9g) = %.9g, the scalar %.9g\n", (double)x, (double)ve[i], (double)e);
            bad_vec++;
        }
        /* GELU: 0.5 v (1 + erf(v / sqrt 2)), GELU(+Inf) = +Inf, GELU(-Inf) = 0;
         * error bound: erf's approximation error (times |v| / 2, |v| capped
         * where GELU is v or 0 to float precision) plus 8 roundings */
        const double rg = isinf(x) ? (x > 0 ? INFINITY : 0.0) : 0.5 * x * (1.0 + erf(x / sqrt(2.0)));
        const double cap = fmin(fabs((double)x), 8.0);
        const double bound = 0.5 * cap * 1.5e-7 + 8.0 * ldexp(1.0, -24) * (fabs(rg) + cap) + 2.0 * FLT_TRUE_MIN;
        const float g[2] = {ck_gelu_approx(x), ck_gelu_fast(x)};
        for (int k = 0; k < 2; k++) {
            if (isnan(x)) ok = isnan(g[k]);
            else if (isinf(rg)) ok = g[k] == (float)rg;
            else ok = fabs((double)g[k] - rg) <= bound;
            if (!ok)
                printf("    %s(%.9g) = %.9g, want %.9g\n", k ? "ck_gelu_fast" : "ck_gelu_approx", (double)x,
                       (double)g[k], rg);
            if (k) bad_fast += !ok;
            else bad_gelu += !ok;
        }
        /* nvcc's host build of the same header gives the same bits */
        const float gh = ck_cuda_gelu_fast_host(x);
        if (!isnan(ck_cuda_gelu_fast_host(0.f)) && !same_float(gh, g[1])) {
            printf("    ck_cuda_gelu_fast_host(%.9g) = %.9g, the C build %.9g\n", (double)x, (double)gh,
                   (double)g[1]);
            bad_fast++;
        }
    }
    printf("  %d inputs: exp %d wrong (ck_vexp %d differs), gelu %d wrong, gelu_fast %d wrong\n", n, bad_exp,
           bad_vec, bad_gelu, bad_fast);
    CHECK(bad_exp == 0 && bad_vec == 0 && bad_gelu == 0 && bad_fast == 0);
}

int main(int argc, char **argv) {
    static const ck_test_case cases[] = {
        {"planner_random", test_planner_random},
        {"planner_divergence", test_planner_divergence},
        {"planner_shrink", test_planner_shrink},
        {"pool_coverage", test_pool_coverage},
        {"pool_concurrent_jobs", test_pool_concurrent_jobs},
        {"concurrent_gemm", test_concurrent_gemm},
        {"gemm_variants", test_gemm_variants},
        {"gemm_packed", test_gemm_packed},
        {"conv3x3_rows", test_conv3x3_rows},
        {"flash_t", test_flash_t},
        {"vexp", test_vexp},
        {"fastmath_special_values", test_fastmath_special_values},
    };
    return ck_test_main(cases, (int)CK_ARRAY_LEN(cases), argc, argv);
}
