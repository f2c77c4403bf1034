/* Cutie's memory read (backend/ops.h memory_read): the unfused
 * double-precision reference of the official computation
 * (support/memread-ref.h), its characterization on hand-computed values,
 * and the CPU backend's fused op against it on random and boundary cases. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "cpu/cpu.h"
#include "support/memread-ref.h"
#include "support/testutil.h"

/* -------------------------------------------------------- the fused op */

/* The CPU backend's op through the op table, on pool, with a scratch of
 * exactly ck_cpu_memory_read_floats a thread (ASan sees any overrun). */
static void fused_read(ck_pool *pool, const mr_case *c, float *out) {
    ck_cpu be;
    memset(&be, 0, sizeof be);
    be.pool = pool;
    be.threads = ck_pool_size(pool);
    be.per_thread = ck_cpu_memory_read_floats(c->N, c->CK, c->top_k);
    be.scratch = malloc(be.per_thread * be.threads * sizeof(float));
    ck_tensor none = ck_tensor_of(NULL, CK_F32);
#define T(p) ck_tensor_of((void *)(p), CK_F32)
    ck_cpu_ops.memory_read(&be.base, T(c->mk), c->ms ? T(c->ms) : none, T(c->qk), c->qe ? T(c->qe) : none, c->N,
                           c->HW, c->CK, T(c->mv), c->C, c->top_k, T(out), none);
#undef T
    free(be.scratch);
}

/* max |got - want| over the queries not marked ambiguous, relative to the
 * largest |value| (the readout is a convex combination of value rows). */
static double rel_err(const mr_case *c, const float *got, const double *want, const unsigned char *ambiguous) {
    double vmax = 0, e = 0;
    for (int64_t i = 0; i < c->N * c->C; i++) vmax = fmax(vmax, fabs(c->mv[i]));
    for (int64_t q = 0; q < c->HW; q++) {
        if (ambiguous && ambiguous[q]) continue;
        for (int ch = 0; ch < c->C; ch++) {
            const double d = fabs((double)got[q * c->C + ch] - want[q * c->C + ch]);
            e = d == d ? fmax(e, d) : INFINITY;
        }
    }
    return vmax > 0 ? e / vmax : e;
}

/* Fused vs reference on one case: the relative error, printed with name.
 * exact: the case's similarities are exact in fp32 (integers and small
 * dyadic numbers), so every query is compared; else queries ambiguous at the
 * top-k boundary are left out and counted into *n_amb. */
static double check_case(ck_pool *pool, const char *name, const mr_case *c, int exact, int64_t *n_amb) {
    float *got = malloc((size_t)(c->HW * c->C) * sizeof(float));
    double *want = malloc((size_t)(c->HW * c->C) * sizeof(double));
    unsigned char *amb = malloc((size_t)c->HW);
    const int64_t amb_here = mr_ref_read(c, mr_rank_low_first, want, amb);
    fused_read(pool, c, got);
    const double e = rel_err(c, got, want, exact ? NULL : amb);
    if (name)
        printf("  %-40s N %4lld HW %4lld CK %2d C %2d top_k %4d%s%s: rel err %.2e", name, (long long)c->N,
               (long long)c->HW, c->CK, c->C, c->top_k, c->qe ? " qe" : "", c->ms ? " ms" : "", e);
    if (name && !exact && amb_here) printf(", %lld ambiguous left out", (long long)amb_here);
    if (name) printf("\n");
    CHECKF(e <= 1e-5, "%s: relative error %.3e", name ? name : "case", e);
    if (n_amb) *n_amb += exact ? 0 : amb_here;
    free(got), free(want), free(amb);
    return e;
}

static ck_pool *pool_of(int threads) {
    ck_pool *p = NULL;
    return ck_pool_create(threads, &p, NULL) == CKEY_OK ? p : NULL;
}

/* ------------------------------------------------- characterization */

/* CK = 1, N = 2, HW = 1, worked by hand from the official formulas:
 * mk = [1, 3], qk = 2, qe = 0.5, ms = [1, 2], mv = [10, 20].
 *   with qe:  s = -qe mk^2 + 2 qe qk mk - qe qk^2 = [-0.5, -0.5]; * ms = [-0.5, -1]
 *   no qe:    s = -mk^2 + 2 qk mk                 = [3, 3];       * ms = [3, 6]
 * sqrt(CK) = 1. Without qe the query's own qk^2 is absent (STCN's form);
 * shrinkage scales the whole similarity, qk^2 term included. */
typedef struct {
    int sel, shr, top_k;
    double want;
} hand_case;

static const hand_case hand_cases[] = {
    {1, 1, 1, 10},                                     /* -0.5 > -1: position 0 */
    {1, 1, 0, (10 + 20 * 0.60653065971263342) / (1 + 0.60653065971263342)}, /* weights 1 : e^-0.5 */
    {1, 0, 1, 10},                                     /* a tie at -0.5: the lower position */
    {1, 0, 0, 15},                                     /* equal weights */
    {0, 1, 1, 20},                                     /* 6 > 3 */
    {0, 1, 2, (10 * 0.049787068367863944 + 20) / (1 + 0.049787068367863944)}, /* top_k == N: e^-3 : 1 */
    {0, 0, 1, 10},                                     /* a tie at 3: the lower position */
    {0, 0, 5, 15},                                     /* top_k > N: all */
};

static void hand_data(const hand_case *h, float mk[2], float ms[2], float *qk, float *qe, float mv[2],
                      mr_case *c) {
    mk[0] = 1, mk[1] = 3, ms[0] = 1, ms[1] = 2, *qk = 2, *qe = 0.5f, mv[0] = 10, mv[1] = 20;
    mr_case r = {NULL, 2, 1, 1, 1, h->top_k, mk, h->shr ? ms : NULL, qk, h->sel ? qe : NULL, mv, MR_FP32};
    *c = r;
}

static void test_reference_hand_values(void) {
    for (size_t i = 0; i < CK_ARRAY_LEN(hand_cases); i++) {
        float mk[2], ms[2], qk, qe, mv[2];
        mr_case c;
        hand_data(&hand_cases[i], mk, ms, &qk, &qe, mv, &c);
        double got;
        mr_ref_read(&c, mr_rank_low_first, &got, NULL);
        CHECKF(fabs(got - hand_cases[i].want) < 1e-12, "case %zu: %.15g, by hand %.15g", i, got, hand_cases[i].want);
    }
}

static void test_fused_hand_values(void) {
    ck_pool *pool = pool_of(2);
    REQUIRE(pool);
    for (size_t i = 0; i < CK_ARRAY_LEN(hand_cases); i++) {
        float mk[2], ms[2], qk, qe, mv[2], got;
        mr_case c;
        hand_data(&hand_cases[i], mk, ms, &qk, &qe, mv, &c);
        fused_read(pool, &c, &got);
        CHECKF(fabs(got - hand_cases[i].want) <= 1e-5 * 20, "case %zu: %.9g, by hand %.9g", i, got,
               hand_cases[i].want);
    }
    ck_pool_free(pool);
}

/* ------------------------------------------------ fused vs reference */

/* Random cases over the grid of shapes: N, HW across the op's tile and block
 * edges, CK from 1, several objects, every top_k regime, each combination of
 * selection and shrinkage. */
static void test_random_cases(void) {
    ck_pool *pool = pool_of(2);
    REQUIRE(pool);
    static const int cks[] = {1, 3, 8, 16, 64}, cvs[] = {1, 4, 16};
    uint64_t st = 0x5EEDull;
    double worst = 0;
    int runs = 0;
    int64_t queries = 0, n_amb = 0;
    for (int i = 0; i < 240; i++) {
        const int64_t N = 1 + (int64_t)(mr_next(&st) % 700), HW = 1 + (int64_t)(mr_next(&st) % 150);
        const int CK = cks[mr_next(&st) % CK_ARRAY_LEN(cks)], C = (int)(1 + mr_next(&st) % 3) * cvs[mr_next(&st) % 3];
        const int ks[] = {1, 5, 30, (int)N - 1, (int)N, (int)N + 7, 0, -1};
        const int top_k = ks[mr_next(&st) % CK_ARRAY_LEN(ks)];
        mr_case d;
        mr_case_alloc(&d, NULL, N, HW, CK, C, top_k, i & 1, (i >> 1) & 1);
        mr_case_random(&d, (uint64_t)i + 1);
        worst = fmax(worst, check_case(pool, NULL, &d, 0, &n_amb));
        runs++, queries += HW;
        mr_case_free(&d);
    }
    printf("  %d random cases: worst relative error %.2e; %lld of %lld queries ambiguous at the top-k boundary, left out\n",
           runs, worst, (long long)n_amb, (long long)queries);
    CHECK(n_amb * 50 <= queries); /* at most 2% */
    ck_pool_free(pool);
}

/* Named boundaries, one at a time. */
static void test_boundaries(void) {
    ck_pool *pool = pool_of(2);
    REQUIRE(pool);
    static const struct {
        const char *name;
        int64_t N, HW;
        int CK, C, top_k, sel, shr;
    } cases[] = {
        {"selection and shrinkage", 600, 130, 64, 16, 30, 1, 1},
        {"selection, no shrinkage", 600, 130, 64, 16, 30, 1, 0},
        {"shrinkage, no selection", 600, 130, 64, 16, 30, 0, 1},
        {"neither", 600, 130, 64, 16, 30, 0, 0},
        {"top_k = 1", 600, 130, 64, 16, 1, 1, 1},
        {"top_k = N - 1", 600, 130, 64, 16, 599, 1, 1},
        {"top_k = N", 600, 130, 64, 16, 600, 1, 1},
        {"top_k > N", 600, 130, 64, 16, 1000, 1, 1},
        {"top_k = 0: softmax over all N", 600, 130, 64, 16, 0, 1, 1},
        {"N = 1", 1, 130, 64, 16, 30, 1, 1},
        {"N = 1, top_k = 0", 1, 130, 64, 16, 0, 1, 1},
        {"N one past a tile", 257, 65, 16, 8, 30, 1, 1},
        {"N = 2 tiles, HW one block", 512, 64, 16, 8, 30, 1, 1},
        {"HW = 1", 300, 1, 64, 8, 30, 1, 1},
        {"CK = 1", 300, 70, 1, 8, 30, 1, 1},
    };
    for (size_t i = 0; i < CK_ARRAY_LEN(cases); i++) {
        mr_case d;
        mr_case_alloc(&d, NULL, cases[i].N, cases[i].HW, cases[i].CK, cases[i].C, cases[i].top_k, cases[i].sel, cases[i].shr);
        mr_case_random(&d, 100 + i);
        int64_t n_amb = 0;
        check_case(pool, cases[i].name, &d, 0, &n_amb);
        CHECK(n_amb * 20 <= d.HW);
        if (cases[i].N == 1) { /* one position: its weight is 1, out = its value row */
            float *got = malloc((size_t)(d.HW * d.C) * sizeof(float));
            fused_read(pool, &d, got);
            double e = 0;
            for (int64_t q = 0; q < d.HW; q++)
                for (int ch = 0; ch < d.C; ch++) e = fmax(e, fabs(got[q * d.C + ch] - d.mv[ch]));
            CHECKF(e <= 1e-7, "%s: out differs from the one value row by %.3e", cases[i].name, e);
            free(got);
        }
        mr_case_free(&d);
    }
    ck_pool_free(pool);
}

/* Ties, with data whose similarities are exact in fp32 (small dyadic
 * numbers, CK = 4, sqrt(CK) = 2), so equal values are equal bits in the op
 * too. Positions: 12 "top" (n % 50 == 7, mk = qk), 54 "tied" below them
 * (other n % 11 == 0, mk = 0), the rest lower (mk = (0, 1 + n % 3, 0, 0)).
 * top_k = 5 cuts the top group, 13 and 40 and 60 the tied group, whose kept
 * members then span tiles of 256: the lowest positions are kept, and a
 * reference keeping the highest instead differs. */
static void test_ties(void) {
    ck_pool *pool = pool_of(2);
    REQUIRE(pool);
    const int64_t N = 600, HW = 70;
    const int CK = 4, C = 3;
    static const int ks[] = {1, 5, 12, 13, 40, 60};
    for (int sel = 0; sel < 2; sel++)
        for (int shr = 0; shr < 2; shr++)
            for (size_t ki = 0; ki < CK_ARRAY_LEN(ks); ki++) {
                mr_case d;
                mr_case_alloc(&d, NULL, N, HW, CK, C, ks[ki], sel, shr);
                mr_case_random(&d, 7); /* random value rows; the keys tie */
                mr_case_ties(&d);
                char name[64];
                snprintf(name, sizeof name, "ties, top_k %d", ks[ki]);
                check_case(pool, name, &d, 1, NULL);
                if (ks[ki] == 5 || ks[ki] == 13 || ks[ki] == 40 || ks[ki] == 60) {
                    /* the rule is what the case checks: the other rule's result is far off */
                    float *got = malloc((size_t)(HW * C) * sizeof(float));
                    double *other = malloc((size_t)(HW * C) * sizeof(double));
                    fused_read(pool, &d, got);
                    mr_ref_read(&d, mr_rank_high_first, other, NULL);
                    const double e = rel_err(&d, got, other, NULL);
                    CHECKF(e > 1e-3, "%s: keeping the highest positions gives the same (%.3e)", name, e);
                    free(got), free(other);
                }
                mr_case_free(&d);
            }
    /* every similarity equal: top_k 30 keeps positions 0..29, out = their mean */
    {
        mr_case d;
        mr_case_alloc(&d, NULL, 300, 9, 4, 1, 30, 1, 1);
        mr_case_all_equal(&d);
        float got[9];
        fused_read(pool, &d, got);
        for (int q = 0; q < 9; q++) CHECKF(fabs(got[q] - 14.5) <= 1e-5 * 300, "query %d: %.7g, want 14.5", q, got[q]);
        mr_case_free(&d);
    }
    ck_pool_free(pool);
}

/* Similarities far outside exp's fp32 range, exact in fp32 (integers and
 * quarters, CK = 16, ms powers of two). Without selection they reach
 * thousands (exp overflows past 88.7); with selection keys are far from the
 * queries and every similarity is below -104 (exp underflows to 0, and the
 * official's unshifted exp would divide 0 by 0). The op's softmax starts
 * from the largest kept value, so both stay finite and exact. */
static void test_large_magnitudes(void) {
    ck_pool *pool = pool_of(2);
    REQUIRE(pool);
    const int64_t N = 500, HW = 80;
    const int CK = 16, C = 8;
    for (int sel = 0; sel < 2; sel++)
        for (int dense = 0; dense < 2; dense++) {
            mr_case d;
            mr_case_alloc(&d, NULL, N, HW, CK, C, dense ? 0 : 30, sel, 1);
            mr_case_random(&d, 11);
            mr_case_large(&d);
            double smax = -INFINITY, smin = INFINITY, *s = malloc((size_t)N * sizeof *s);
            for (int64_t q = 0; q < HW; q++) {
                mr_ref_similarity(&d, q, s, NULL);
                for (int64_t n = 0; n < N; n++) smax = fmax(smax, s[n]), smin = fmin(smin, s[n]);
            }
            free(s);
            if (sel) CHECKF(smax < -104, "the case's similarities reach %g", smax);
            else CHECKF(smin > 88.8, "the case's similarities go down to %g", smin);
            char name[64];
            snprintf(name, sizeof name, "large: s in [%.0f, %.0f]%s", smin, smax, dense ? ", all N" : "");
            check_case(pool, name, &d, 1, NULL);
            mr_case_free(&d);
        }
    ck_pool_free(pool);
}

/* Several objects: C = 3 x CV value channels read at once equal each
 * object's read on its own CV channels (with top_k the same weights in the
 * same order: within a float rounding or two, as the readout's vector body
 * and remainder may fuse their multiply-adds differently at another C on an
 * FMA target). */
static void test_objects(void) {
    ck_pool *pool = pool_of(2);
    REQUIRE(pool);
    const int64_t N = 400, HW = 90;
    const int CK = 16, O = 3, CV = 8, C = O * CV;
    for (int dense = 0; dense < 2; dense++) {
        mr_case d;
        mr_case_alloc(&d, NULL, N, HW, CK, C, dense ? 0 : 30, 1, 1);
        mr_case_random(&d, 21);
        int64_t n_amb = 0;
        check_case(pool, dense ? "3 objects, all N" : "3 objects", &d, 0, &n_amb);
        CHECK(n_amb * 20 <= HW);
        float *all = malloc((size_t)(HW * C) * sizeof(float)), *one = malloc((size_t)(HW * CV) * sizeof(float));
        float *mvo = malloc((size_t)(N * CV) * sizeof(float));
        fused_read(pool, &d, all);
        for (int o = 0; o < O; o++) {
            for (int64_t n = 0; n < N; n++) memcpy(mvo + n * CV, d.mv + n * C + o * CV, CV * sizeof(float));
            mr_case c1 = d;
            c1.mv = mvo, c1.C = CV;
            fused_read(pool, &c1, one);
            double e = 0;
            for (int64_t q = 0; q < HW; q++)
                for (int ch = 0; ch < CV; ch++) e = fmax(e, fabs(all[q * C + o * CV + ch] - one[q * CV + ch]));
            CHECKF(e <= (dense ? 1e-6 : 2.5e-7), "object %d read alone differs by %.3e", o, e);
        }
        free(all), free(one), free(mvo);
        mr_case_free(&d);
    }
    ck_pool_free(pool);
}

/* The result does not depend on the thread count: each query block is one
 * work item with a fixed order of work. */
static void test_threads(void) {
    ck_pool *p1 = pool_of(1), *p3 = pool_of(3);
    REQUIRE(p1 && p3);
    for (int dense = 0; dense < 2; dense++) {
        mr_case d;
        mr_case_alloc(&d, NULL, 700, 300, 32, 16, dense ? 0 : 30, 1, 1);
        mr_case_random(&d, 31);
        float *a = malloc(300 * 16 * sizeof(float)), *b = malloc(300 * 16 * sizeof(float));
        fused_read(p1, &d, a);
        fused_read(p3, &d, b);
        CHECK(memcmp(a, b, 300 * 16 * sizeof(float)) == 0);
        free(a), free(b);
        mr_case_free(&d);
    }
    ck_pool_free(p1), ck_pool_free(p3);
}

/* The scratch depends on CK and top_k, not on HW, and not on N beyond
 * top_k: at Cutie's CK 64 and top_k 30 it is the same for 5 frames of
 * 854 x 480 and of 3840 x 2160 at stride 16. */
static void test_scratch_bound(void) {
    const int64_t small = 5 * 54 * 30, large = 5 * 240 * 135;
    for (int k = 0; k <= 30; k += 30) {
        const size_t a = ck_cpu_memory_read_floats(small, 64, k), b = ck_cpu_memory_read_floats(large, 64, k);
        printf("  CK 64, top_k %2d: %zu bytes a thread at N = %lld, %zu at N = %lld\n", k, a * sizeof(float),
               (long long)small, b * sizeof(float), (long long)large);
        CHECK(a == b);
    }
    /* top_k >= N reads over all N, with the dense path's scratch */
    CHECK(ck_cpu_memory_read_floats(20, 64, 30) == ck_cpu_memory_read_floats(large, 64, 0));
}

/* Usage (the long-term memory's count): usage[n] = sum over the queries of
 * n's weight. The reference reads it off the double read with mv = the
 * N x N identity (out[q][n] = the weight of n for q). The top-k path and
 * N <= top_k (where a read with usage keeps all N), on 1 and 3 threads
 * (summed in query order: the same bits). The values read with usage equal
 * the reference's as without. */
static void test_usage(void) {
    static const struct {
        int64_t N, HW;
        int top_k;
    } cs[] = {{40, 150, 5}, {40, 70, 30}, {12, 90, 30}, {1, 33, 30}};
    ck_pool *p1 = pool_of(1), *p3 = pool_of(3);
    REQUIRE(p1 && p3);
    for (size_t i = 0; i < CK_ARRAY_LEN(cs); i++) {
        const int64_t N = cs[i].N, HW = cs[i].HW;
        mr_case d;
        mr_case_alloc(&d, NULL, N, HW, 8, (int)N, cs[i].top_k, 1, 1);
        mr_case_random(&d, 500 + i);
        for (int64_t a = 0; a < N; a++)
            for (int64_t b = 0; b < N; b++) d.mv[a * N + b] = a == b ? 1.0f : 0.0f;
        double *ref = malloc((size_t)(HW * N) * sizeof *ref), *uref = calloc((size_t)d.N, sizeof *uref);
        unsigned char *amb = calloc((size_t)HW, 1);
        const int64_t n_amb = mr_ref_read(&d, mr_rank_low_first, ref, amb);
        for (int64_t q = 0; q < HW; q++)
            for (int64_t n = 0; n < N; n++) uref[n] += ref[q * N + n];
        float *usage[2], *out = malloc((size_t)(HW * N) * sizeof(float));
        double worst = 0;
        for (int r = 0; r < 2; r++) {
            ck_pool *pool = r ? p3 : p1;
            ck_cpu be;
            memset(&be, 0, sizeof be);
            be.pool = pool;
            be.threads = ck_pool_size(pool);
            be.per_thread = ck_cpu_memory_read_floats(N, 8, cs[i].top_k);
            be.scratch = malloc(be.per_thread * be.threads * sizeof(float));
            be.mr_pairs_floats = ck_cpu_memory_read_pairs_floats(HW, (int)CK_MIN(N, cs[i].top_k));
            be.mr_pairs = malloc(be.mr_pairs_floats * sizeof(float));
            usage[r] = malloc((size_t)N * sizeof(float));
#define T(x) ck_tensor_of((void *)(x), CK_F32)
            ck_cpu_ops.memory_read(&be.base, T(d.mk), T(d.ms), T(d.qk), T(d.qe), N, HW, 8, T(d.mv), (int)N,
                                   cs[i].top_k, T(out), T(usage[r]));
#undef T
            free(be.scratch), free(be.mr_pairs);
            if (r == 0) worst = rel_err(&d, out, ref, amb);
        }
        double ue = 0, total = 0;
        for (int64_t n = 0; n < N; n++) ue = fmax(ue, fabs(usage[0][n] - uref[n])), total += usage[0][n];
        printf("  N %3lld HW %3lld top_k %2d: usage max abs err %.2e (sum %.4f = HW), values %.2e, %lld ambiguous\n",
               (long long)N, (long long)HW, cs[i].top_k, ue, total, worst, (long long)n_amb);
        CHECK(n_amb == 0);
        CHECK(ue <= 1e-5 * HW);
        CHECK(fabs(total - HW) <= 1e-4 * HW);
        CHECK(worst <= 1e-5);
        CHECK(memcmp(usage[0], usage[1], (size_t)N * sizeof(float)) == 0);
        free(usage[0]), free(usage[1]), free(out), free(ref), free(uref), free(amb);
        mr_case_free(&d);
    }
    ck_pool_free(p1), ck_pool_free(p3);
}

/* What a tracker binds for the read at 1080p (cutie-base: CK 64, top_k 30,
 * h x w = 68 x 120 at stride 16) on 16 threads, with 5 and with 10 memory
 * frames, with and without the long-term memory's usage: the same bytes
 * for both memory sizes, and far below the N x HW fp32 affinity a plain read
 * would hold (1.3 GiB at 5 frames). */
static void test_workspace_1080p(void) {
    const int64_t hw = 68 * 120;
    const ck_backend_config bc = {.threads = 16, .act = CK_F32};
    for (int usage = 0; usage <= 1; usage++) {
        size_t bytes[2];
        for (int i = 0; i < 2; i++) {
            const int64_t N = (i ? 10 : 5) * hw;
            ck_op_needs n = {0};
            n.mr_n = N, n.mr_ck = 64, n.mr_top_k = 30, n.mr_usage_hw = usage ? hw : 0;
            bytes[i] = ck_cpu_ops_workspace_bytes(&bc, &n);
            const double affinity = (double)N * hw * sizeof(float);
            printf("  1080p, %2d frames (N %lld x HW %lld)%s: %.2f MiB planned for the read, the affinity %.0f MiB "
                   "(%.0fx)\n",
                   i ? 10 : 5, (long long)N, (long long)hw, usage ? " with usage" : "", bytes[i] / 1048576.0,
                   affinity / 1048576.0, affinity / bytes[i]);
            CHECK(bytes[i] * 100 < affinity);
        }
        CHECK(bytes[0] == bytes[1]);
    }
}

int main(int argc, char **argv) {
    static const ck_test_case cases[] = {
        {"reference_hand_values", test_reference_hand_values},
        {"fused_hand_values", test_fused_hand_values},
        {"random_cases", test_random_cases},
        {"boundaries", test_boundaries},
        {"ties", test_ties},
        {"large_magnitudes", test_large_magnitudes},
        {"objects", test_objects},
        {"threads", test_threads},
        {"scratch_bound", test_scratch_bound},
        {"usage", test_usage},
        {"workspace_1080p", test_workspace_1080p},
    };
    return ck_test_main(cases, (int)CK_ARRAY_LEN(cases), argc, argv);
}
