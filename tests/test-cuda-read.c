/* Cutie's memory read on CUDA (src/cuda/memory-read.cu, backend/ops.h
 * memory_read) against an unfused reference of the official computation
 * (similarity column, full sort, top-k softmax, readout) in double
 * precision (support/memread-ref.h) and against the CPU backend's fused
 * op (itself checked against that reference by tests/test-cutie-read.c),
 * on the boundary cases: with
 * and without selection and shrinkage, top_k 1, 64 / 65 (the heaps in
 * shared / device memory), N - 1, N, above N, 0 and -1, N = 1, sizes off
 * the 64 x 64 tiles, more query tiles than CTAs, ties, similarities far
 * outside exp's range, several objects, usage, and a 1080p-sized read.
 * "half" runs the same cases on the tensor-core path (fp16 and bf16
 * operands) against the reference from the same rounded operands. Each
 * case prints its max abs errors; a failure names the case, the quantity
 * and by how much it is off. The device cases skip without a CUDA device;
 * the scratch sizing runs everywhere. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "backend/ops.h"
#include "cpu/cpu.h"
#include "cuda/backend.h"
#include "cuda/kernels.h"
#include "support/memread-ref.h"
#include "support/testutil.h"

/* ------------------------------------------------------------ the ops */

static float *to_device(const float *h, size_t n) {
    void *d = NULL;
    if (!h || n == 0) return NULL;
    if (ck_cuda_malloc(&d, n * sizeof(float), NULL)) return NULL;
    if (ck_cuda_copy(d, h, n * sizeof(float), 1, NULL)) {
        ck_cuda_free(d);
        return NULL;
    }
    return d;
}

/* A case's inputs on the device, and its scratch of exactly
 * ck_cuda_memory_read_bytes for this read. */
typedef struct {
    float *mk, *ms, *qk, *qe, *mv, *out, *usage;
    void *scratch;
    size_t scratch_bytes;
} dcase;

static int dcase_up(dcase *d, const mr_case *c, int usage) {
    memset(d, 0, sizeof *d);
    d->mk = to_device(c->mk, (size_t)(c->N * c->CK));
    d->qk = to_device(c->qk, (size_t)(c->HW * c->CK));
    d->mv = to_device(c->mv, (size_t)(c->N * c->C));
    d->ms = to_device(c->ms, (size_t)c->N);
    d->qe = to_device(c->qe, (size_t)(c->HW * c->CK));
    ck_op_needs n = {0};
    n.mr_n = c->N, n.mr_ck = c->CK, n.mr_top_k = c->top_k, n.mr_usage_hw = usage ? c->HW : 0;
    d->scratch_bytes = ck_cuda_memory_read_bytes(&n);
    int ok = d->mk && d->qk && d->mv && (!c->ms || d->ms) && (!c->qe || d->qe);
    ok = ok && !ck_cuda_malloc((void **)&d->out, (size_t)(c->HW * c->C) * sizeof(float), NULL);
    if (usage) ok = ok && !ck_cuda_malloc((void **)&d->usage, (size_t)c->N * sizeof(float), NULL);
    if (d->scratch_bytes) ok = ok && !ck_cuda_malloc(&d->scratch, d->scratch_bytes, NULL);
    return ok;
}

static void dcase_free(dcase *d) {
    ck_cuda_free(d->mk), ck_cuda_free(d->ms), ck_cuda_free(d->qk), ck_cuda_free(d->qe), ck_cuda_free(d->mv);
    ck_cuda_free(d->out), ck_cuda_free(d->usage), ck_cuda_free(d->scratch);
}

/* The read's precision for a case's operands (mr_case.half). */
static int precision_of(const mr_case *c) {
    return c->half == MR_FP16 ? CKEY_PRECISION_FP16 : c->half == MR_BF16 ? CKEY_PRECISION_BF16 : CKEY_PRECISION_FP32;
}

static const char *half_name(int half) { return half == MR_FP16 ? "fp16" : half == MR_BF16 ? "bf16" : "fp32"; }

/* The CUDA read into host out [HW, C] (and usage [N] when given), at the
 * precision of the case's operands. */
static ckey_status cuda_read(const mr_case *c, dcase *d, float *out, float *usage, ckey_error *err) {
    ckey_status s = ck_cuda_memory_read(d->mk, d->ms, d->qk, d->qe, c->N, c->HW, c->CK, d->mv, c->C, c->top_k, d->out,
                                        usage ? d->usage : NULL, precision_of(c), d->scratch, d->scratch_bytes, NULL,
                                        err);
    if (!s) s = ck_cuda_sync(err);
    if (!s) s = ck_cuda_copy(out, d->out, (size_t)(c->HW * c->C) * sizeof(float), 0, err);
    if (!s && usage) s = ck_cuda_copy(usage, d->usage, (size_t)c->N * sizeof(float), 0, err);
    return s;
}

/* The CPU backend's op on a pool of `threads`. */
static void cpu_read(const mr_case *c, int threads, float *out, float *usage) {
    ck_pool *pool = NULL;
    if (ck_pool_create(threads, &pool, NULL) != CKEY_OK) {
        memset(out, 0xFF, (size_t)(c->HW * c->C) * sizeof(float)); /* NaN: the comparison fails */
        return;
    }
    ck_cpu be;
    memset(&be, 0, sizeof be);
    be.pool = pool;
    be.threads = ck_pool_size(pool);
    be.per_thread = ck_cpu_memory_read_floats(c->N, c->CK, usage ? (int)mr_kept(c) : c->top_k);
    be.scratch = malloc(be.per_thread * (size_t)be.threads * sizeof(float));
    if (usage) {
        be.mr_pairs_floats = ck_cpu_memory_read_pairs_floats(c->HW, (int)mr_kept(c));
        be.mr_pairs = malloc(be.mr_pairs_floats * sizeof(float));
    }
    const ck_tensor none = ck_tensor_of(NULL, CK_F32);
#define T(p) ck_tensor_of((void *)(p), CK_F32)
    ck_cpu_ops.memory_read(&be.base, T(c->mk), c->ms ? T(c->ms) : none, T(c->qk), c->qe ? T(c->qe) : none, c->N,
                           c->HW, c->CK, T(c->mv), c->C, c->top_k, T(out), usage ? T(usage) : none);
#undef T
    free(be.scratch), free(be.mr_pairs);
    ck_pool_free(pool);
}

static double vmax_of(const mr_case *c) {
    double m = 0;
    for (int64_t i = 0; i < c->N * c->C; i++) m = fmax(m, fabs(c->mv[i]));
    return m > 0 ? m : 1;
}

static double absdiff(double a, double b) {
    const double d = fabs(a - b);
    return d == d ? d : INFINITY;
}

/* ------------------------------------------------------------ one case */

typedef struct {
    int usage;     /* read usage too */
    int exact;     /* similarities exact in fp32: every query compared, none ambiguous */
    int64_t every; /* compare with the reference every `every`-th query (1: all) */
} copts;

/* CUDA vs the double reference (the queries not ambiguous at the top-k
 * boundary, relative to max |mv|, bar 1e-5) and vs the CPU backend (max abs
 * error; a query that differs by more than 1e-5 of max |mv| must be one the
 * reference calls ambiguous). With usage, usage vs both (relative to the
 * largest count, bar 1e-4). Prints one line. Returns the worst relative error.
 * A case of 16-bit operands (mr_case.half) runs the read's tensor-core path
 * and is compared with the reference from the same rounded operands only
 * (the CPU op is fp32), at a bar of 1e-4 and with up to 15% of the queries
 * ambiguous: the tensor cores' fp32 sums align and truncate rather than
 * round each addition, so the similarities are off by up to about 1e-5 of
 * their terms' size (the reference's ambiguity margin is 2e-5 of it), and
 * the softmax weights by as much. A wrong rounding of an operand is off by
 * 2^-12 of its term (fp16) or more. */
static double check_case(const mr_case *c, copts o) {
    const size_t no = (size_t)(c->HW * c->C);
    float *got = malloc(no * sizeof(float)), *cpu = malloc(no * sizeof(float));
    float *ug = o.usage ? malloc((size_t)c->N * sizeof(float)) : NULL;
    float *uc = o.usage ? malloc((size_t)c->N * sizeof(float)) : NULL;
    double *uref = o.usage ? calloc((size_t)c->N, sizeof(double)) : NULL;
    double *row = malloc((size_t)c->C * sizeof(double)), *s = malloc((size_t)c->N * sizeof(double)),
           *mag = malloc((size_t)c->N * sizeof(double));
    mr_ranked *r = malloc((size_t)c->N * sizeof(mr_ranked));
    unsigned char *amb = calloc((size_t)c->HW, 1);
    dcase d;
    ckey_error err = {0};
    double worst = INFINITY;
    if (!dcase_up(&d, c, o.usage)) {
        CHECKF(0, "%s: device allocation failed", c->name);
        goto done;
    }
    const ckey_status st = cuda_read(c, &d, got, ug, &err);
    CHECKF(st == CKEY_OK, "%s: ck_cuda_memory_read: %s", c->name, err.message);
    if (st) goto done;
    const int half = c->half != MR_FP32;
    const double bar = half ? 1e-4 : 1e-5;
    if (!half) cpu_read(c, 0, cpu, uc); /* every core */
    const double vmax = vmax_of(c);
    /* vs the reference */
    double e_ref = 0;
    int64_t n_amb = 0, n_ref = 0;
    int64_t worst_q = -1;
    for (int64_t q = 0; q < c->HW; q++) {
        /* usage needs every query's weights; else every `every`-th and the last */
        if (!o.usage && q % o.every != 0 && q != c->HW - 1) continue;
        amb[q] = (unsigned char)mr_ref_query(c, q, mr_rank_low_first, row, uref, s, mag, r);
        n_ref++;
        if (amb[q] && !o.exact) {
            n_amb++;
            continue;
        }
        for (int ch = 0; ch < c->C; ch++) {
            const double e = absdiff(got[q * c->C + ch], row[ch]) / vmax;
            if (e > e_ref) e_ref = e, worst_q = q;
        }
    }
    /* vs the CPU backend: a query off by more than the bar must be ambiguous */
    double e_cpu = 0;
    int64_t n_off = 0, bad_q = -1;
    for (int64_t q = 0; !half && q < c->HW; q++) {
        double eq = 0;
        for (int ch = 0; ch < c->C; ch++) eq = fmax(eq, absdiff(got[q * c->C + ch], cpu[q * c->C + ch]));
        if (eq / vmax <= 1e-5) {
            e_cpu = fmax(e_cpu, eq);
            continue;
        }
        n_off++;
        if (!(o.usage || q % o.every == 0 || q == c->HW - 1)) /* not looked at yet */
            amb[q] = (unsigned char)mr_ref_query(c, q, mr_rank_low_first, row, NULL, s, mag, r);
        if (!amb[q] || o.exact) {
            if (bad_q < 0) bad_q = q;
            e_cpu = fmax(e_cpu, eq);
        }
    }
    printf("  %-34s %s N %6lld HW %5lld CK %3d C %3d top_k %4d%s%s%s: max abs err vs reference %.2e (rel), ",
           c->name, half_name(c->half), (long long)c->N, (long long)c->HW, c->CK, c->C, c->top_k, c->qe ? " qe" : "",
           c->ms ? " ms" : "", o.usage ? " usage" : "", e_ref);
    if (half) printf("reference from the %s-rounded operands", half_name(c->half));
    else printf("vs CPU %.2e", e_cpu);
    if (n_ref < c->HW) printf(" (reference on %lld queries)", (long long)n_ref);
    if (n_amb || n_off) printf("; %lld ambiguous at the top-k boundary, %lld off the CPU's", (long long)n_amb,
                               (long long)n_off);
    printf("\n");
    CHECKF(e_ref <= bar, "%s (%s): out vs reference: relative error %.3e (query %lld)", c->name, half_name(c->half),
           e_ref, (long long)worst_q);
    CHECKF(bad_q < 0, "%s: out vs CPU: query %lld differs by %.3e and is not ambiguous at the top-k boundary",
           c->name, (long long)bad_q, e_cpu);
    CHECKF(n_amb * (half ? 100 : 20) <= n_ref * (half ? 15 : 1),
           "%s: %lld of %lld queries ambiguous (the case's data should not be)", c->name,
           (long long)n_amb, (long long)n_ref);
    worst = e_ref;
    if (o.usage) {
        double umax = 0, eu_ref = 0, eu_cpu = 0, total = 0;
        for (int64_t n = 0; n < c->N; n++) umax = fmax(umax, uref[n]);
        for (int64_t n = 0; n < c->N; n++) {
            eu_ref = fmax(eu_ref, absdiff(ug[n], uref[n]));
            if (!half) eu_cpu = fmax(eu_cpu, absdiff(ug[n], uc[n]));
            total += ug[n];
        }
        printf("  %-34s usage: max abs err vs reference %.2e, vs CPU %.2e (largest count %.3f, sum %.4f, HW %lld)\n",
               "", eu_ref, eu_cpu, umax, total, (long long)c->HW);
        CHECKF(n_amb == 0, "%s: usage with %lld ambiguous queries (the case's data should have none)", c->name,
               (long long)n_amb);
        CHECKF(eu_ref <= 1e-4 * umax, "%s: usage vs reference: max abs error %.3e, largest count %.3e", c->name,
               eu_ref, umax);
        CHECKF(eu_cpu <= 1e-4 * umax, "%s: usage vs CPU: max abs error %.3e, largest count %.3e", c->name, eu_cpu,
               umax);
        CHECKF(fabs(total - (double)c->HW) <= 1e-4 * (double)c->HW, "%s: usage sums to %.6f, not HW = %lld",
               c->name, total, (long long)c->HW);
    }
done:
    dcase_free(&d);
    free(got), free(cpu), free(ug), free(uc), free(uref), free(row), free(s), free(mag), free(r), free(amb);
    return worst;
}

#define NEED_GPU()                                                                  \
    do {                                                                            \
        if (ck_cuda_device_count() == 0) SKIP("no CUDA device on this machine");    \
    } while (0)

/* ------------------------------------------------------------ cases */

static void boundaries_at(int half) {
    static const struct {
        const char *name;
        int64_t N, HW;
        int CK, C, top_k, sel, shr;
    } cs[] = {
        {"selection and shrinkage", 600, 130, 64, 16, 30, 1, 1},
        {"selection, no shrinkage", 600, 130, 64, 16, 30, 1, 0},
        {"shrinkage, no selection", 600, 130, 64, 16, 30, 0, 1},
        {"neither", 600, 130, 64, 16, 30, 0, 0},
        {"top_k = 1", 600, 130, 64, 16, 1, 1, 1},
        {"top_k = 64 (last in shared memory)", 600, 130, 64, 16, 64, 1, 1},
        {"top_k = 65 (heaps in device memory)", 600, 130, 64, 16, 65, 1, 1},
        {"top_k = 200", 600, 130, 32, 8, 200, 1, 1},
        {"top_k = N - 1", 600, 130, 64, 16, 599, 1, 1},
        {"top_k = N", 600, 130, 64, 16, 600, 1, 1},
        {"top_k > N", 600, 130, 64, 16, 1000, 1, 1},
        {"top_k = 0: all N", 600, 130, 64, 16, 0, 1, 1},
        {"top_k = -1: all N", 600, 130, 64, 16, -1, 0, 0},
        {"N = 1", 1, 130, 64, 16, 30, 1, 1},
        {"N = 1, top_k = 0", 1, 130, 64, 16, 0, 1, 1},
        {"N = 63", 63, 70, 16, 8, 30, 1, 1},
        {"N = 65 (one past a tile)", 65, 70, 16, 8, 30, 1, 1},
        {"N = 257, HW = 65", 257, 65, 16, 8, 30, 1, 1},
        {"N = 513, all N", 513, 129, 16, 8, 0, 1, 1},
        {"HW = 1", 300, 1, 64, 8, 30, 1, 1},
        {"HW = 63", 300, 63, 64, 8, 30, 1, 1},
        {"HW = 64", 300, 64, 64, 8, 30, 1, 1},
        {"CK = 1", 300, 70, 1, 8, 30, 1, 1},
        {"CK = 3", 300, 70, 3, 5, 30, 1, 1},
        {"CK = 128", 300, 70, 128, 8, 30, 1, 1},
        {"C = 1", 300, 70, 16, 1, 30, 1, 1},
        {"C = 1, all N", 300, 70, 16, 1, 0, 1, 1},
        {"C = 3 x 256", 700, 100, 64, 768, 30, 1, 1},
        {"C = 3 x 256, all N", 700, 100, 64, 768, 0, 1, 1},
        /* few query tiles and N of 16 memory tiles or more: the memory split into ranges, their
         * heaps merged (memory-read.cu merge_kernel) */
        {"split memory: N 3000, HW 130", 3000, 130, 64, 16, 30, 1, 1},
        {"split memory: top_k 1", 3000, 130, 64, 16, 1, 1, 1},
        {"split memory: top_k 64", 3000, 130, 64, 16, 64, 1, 1},
        {"split memory: no selection", 3000, 130, 64, 16, 30, 0, 1},
        {"split memory: N 2000 + 17, HW 1000", 2017, 1000, 16, 8, 30, 1, 1},
        /* the long-term memory's prototypes (cutie.c): few queries, all N, values of C 256 or 1 */
        {"prototypes: all N, C = 256", 3000, 128, 64, 256, 0, 1, 1},
        {"prototypes: all N, C = 1", 3000, 128, 64, 1, 0, 1, 1},
        /* more query tiles (64 each) than CTAs (264): CTAs take several tiles */
        {"HW = 17000 (several tiles a CTA)", 300, 17000, 8, 4, 30, 1, 1},
        {"HW = 17000, top_k 100", 300, 17000, 8, 4, 100, 1, 1},
        {"HW = 17000, all N", 300, 17000, 8, 4, 0, 1, 1},
    };
    double worst = 0;
    for (size_t i = 0; i < CK_ARRAY_LEN(cs); i++) {
        mr_case c;
        mr_case_alloc(&c, cs[i].name, cs[i].N, cs[i].HW, cs[i].CK, cs[i].C, cs[i].top_k, cs[i].sel, cs[i].shr);
        c.half = half;
        mr_case_random(&c, 100 + i);
        copts o = {0, 0, c.HW > 5000 ? 37 : 1};
        worst = fmax(worst, check_case(&c, o));
        mr_case_free(&c);
    }
    printf("  worst relative error vs the reference: %.2e\n", worst);
}

static void test_boundaries(void) {
    NEED_GPU();
    boundaries_at(MR_FP32);
}

/* Ties, exact in fp32 (small dyadic numbers, CK = 4): "top" positions
 * (n % 50 == 7, mk = qk; 12 of 600, 60 of 3000), "tied" ones below them
 * (other n % 11 == 0, mk = 0), the rest lower. A top_k other than the top
 * group's size cuts a group of equal values, whose kept members span memory
 * tiles of 64 (and at N = 3000 the split memory's ranges): the lowest
 * positions must be kept, and a reference keeping the highest instead must
 * differ. */
static void ties_at(int half) {
    const int64_t HW = 70;
    const int CK = 4, C = 3;
    static const int ks_small[] = {1, 5, 12, 13, 40, 60}, ks_big[] = {1, 5, 13, 40, 60, 61, 100};
    for (int big = 0; big < 2; big++)
    for (int sel = 0; sel < 2; sel++)
        for (int shr = 0; shr < 2; shr++)
            for (size_t ki = 0; ki < (big ? CK_ARRAY_LEN(ks_big) : CK_ARRAY_LEN(ks_small)); ki++) {
                const int64_t N = big ? 3000 : 600, top_n = N / 50; /* the top group's size */
                const int *ks = big ? ks_big : ks_small;
                char name[64];
                snprintf(name, sizeof name, "ties, top_k %d%s%s%s", ks[ki], sel ? "" : ", no qe", shr ? "" : ", no ms",
                         big ? ", split" : "");
                mr_case c;
                mr_case_alloc(&c, name, N, HW, CK, C, ks[ki], sel, shr);
                c.half = half;
                mr_case_random(&c, 7);
                mr_case_ties(&c);
                copts o = {0, 1, 1};
                check_case(&c, o);
                if (ks[ki] != top_n) { /* a cut inside a group of equal values */
                    float *got = malloc((size_t)(HW * C) * sizeof(float));
                    double *row = malloc(C * sizeof(double)), *s = malloc(N * sizeof(double)),
                           *mag = malloc(N * sizeof(double));
                    mr_ranked *r = malloc(N * sizeof(mr_ranked));
                    dcase d;
                    ckey_error err;
                    REQUIRE(dcase_up(&d, &c, 0) && cuda_read(&c, &d, got, NULL, &err) == CKEY_OK);
                    double e = 0;
                    for (int64_t q = 0; q < HW; q++) {
                        mr_ref_query(&c, q, mr_rank_high_first, row, NULL, s, mag, r);
                        for (int ch = 0; ch < C; ch++) e = fmax(e, absdiff(got[q * C + ch], row[ch]));
                    }
                    CHECKF(e > 1e-3, "%s: keeping the highest positions gives the same (%.3e)", name, e);
                    dcase_free(&d);
                    free(got), free(row), free(s), free(mag), free(r);
                }
                mr_case_free(&c);
            }
    /* every similarity equal: top_k 30 keeps positions 0..29 (top_k 100 in
     * device memory, 0..99), out = their mean */
    for (int i = 0; i < 2; i++) {
        const int k = i ? 100 : 30;
        mr_case c;
        mr_case_alloc(&c, "all equal", 300, 9, 4, 1, k, 1, 1);
        c.half = half;
        mr_case_all_equal(&c);
        float got[9];
        dcase d;
        ckey_error err;
        REQUIRE(dcase_up(&d, &c, 0) && cuda_read(&c, &d, got, NULL, &err) == CKEY_OK);
        const double want = (k - 1) / 2.0;
        double e = 0;
        for (int q = 0; q < 9; q++) e = fmax(e, fabs(got[q] - want));
        printf("  all similarities equal, top_k %3d: max abs err %.2e from the mean of positions 0..%d\n", k, e, k - 1);
        CHECKF(e <= 1e-5 * 300, "all equal, top_k %d: off the mean %.1f by %.3e", k, want, e);
        dcase_free(&d);
        mr_case_free(&c);
    }
}

static void test_ties(void) {
    NEED_GPU();
    ties_at(MR_FP32);
}

/* Similarities far outside exp's fp32 range, exact in fp32: without
 * selection in the thousands (exp overflows past 88.7), with selection all
 * below -104 (exp underflows). The softmax from the largest stays finite. */
static void large_magnitudes_at(int half) {
    const int64_t N = 500, HW = 80;
    const int CK = 16, C = 8;
    for (int sel = 0; sel < 2; sel++)
        for (int dense = 0; dense < 2; dense++) {
            char name[64];
            snprintf(name, sizeof name, "large, %s%s", sel ? "s < -104" : "s > 88.8", dense ? ", all N" : "");
            mr_case c;
            mr_case_alloc(&c, name, N, HW, CK, C, dense ? 0 : 30, sel, 1);
            c.half = half;
            mr_case_random(&c, 11);
            mr_case_large(&c);
            copts o = {0, 1, 1};
            check_case(&c, o);
            mr_case_free(&c);
        }
}

static void test_large_magnitudes(void) {
    NEED_GPU();
    large_magnitudes_at(MR_FP32);
}

/* Usage: the top-k path, top_k 64 / 65 (shared / device heaps), N <= top_k
 * (a read with usage keeps all N), N = 1, several CTAs' tiles. Usage counts
 * every query's kept set, so the cases have none ambiguous: random data
 * where the reference finds none, else data exact in fp32. */
static void usage_at(int half) {
    static const struct {
        const char *name;
        int64_t N, HW;
        int top_k, exact;
    } cs[] = {{"usage, top_k 5", 40, 150, 5, 0},
              {"usage, top_k 65", 400, 300, 65, 0},
              {"usage, N < top_k", 12, 90, 30, 0},
              {"usage, N = 1", 1, 33, 30, 0},
              {"usage, N = 100 < top_k 120", 100, 70, 120, 0},
              {"usage, top_k 30, exact", 400, 300, 30, 1},
              {"usage, top_k 65, exact", 400, 300, 65, 1},
              {"usage, HW 17000, exact", 500, 17000, 30, 1},
              {"usage, split memory, exact", 3000, 300, 30, 1},
              {"usage, HW 17000, top_k 100, exact", 500, 17000, 100, 1}};
    for (size_t i = 0; i < CK_ARRAY_LEN(cs); i++) {
        /* random data cut at a top_k below N has ambiguous queries somewhere at 16-bit sums' error */
        if (half && !cs[i].exact && cs[i].top_k < cs[i].N) continue;
        mr_case c;
        mr_case_alloc(&c, cs[i].name, cs[i].N, cs[i].HW, cs[i].exact ? 16 : 8, 4, cs[i].top_k, 1, 1);
        c.half = half;
        if (cs[i].exact) mr_case_integer(&c, 500 + i);
        else mr_case_random(&c, 500 + i);
        copts o = {1, cs[i].exact, 1};
        check_case(&c, o);
        mr_case_free(&c);
    }
}

static void test_usage(void) {
    NEED_GPU();
    usage_at(MR_FP32);
}

/* Several objects read at once: each object's channels equal that object
 * read alone (bit for bit on the top-k path: the same pairs, the same order). */
static void objects_at(int half) {
    const int64_t N = 400, HW = 90;
    const int O = 3, CV = 8, C = O * CV;
    for (int dense = 0; dense < 2; dense++) {
        mr_case c;
        mr_case_alloc(&c, dense ? "3 objects, all N" : "3 objects", N, HW, 16, C, dense ? 0 : 30, 1, 1);
        c.half = half;
        mr_case_random(&c, 21);
        copts o = {0, 0, 1};
        check_case(&c, o);
        float *all = malloc((size_t)(HW * C) * sizeof(float)), *one = malloc((size_t)(HW * CV) * sizeof(float));
        dcase d;
        ckey_error err;
        REQUIRE(dcase_up(&d, &c, 0) && cuda_read(&c, &d, all, NULL, &err) == CKEY_OK);
        dcase_free(&d);
        for (int ob = 0; ob < O; ob++) {
            mr_case c1 = c;
            c1.C = CV;
            c1.mv = malloc((size_t)(N * CV) * sizeof(float));
            for (int64_t n = 0; n < N; n++) memcpy(c1.mv + n * CV, c.mv + n * C + ob * CV, CV * sizeof(float));
            REQUIRE(dcase_up(&d, &c1, 0) && cuda_read(&c1, &d, one, NULL, &err) == CKEY_OK);
            dcase_free(&d);
            double e = 0;
            for (int64_t q = 0; q < HW; q++)
                for (int ch = 0; ch < CV; ch++) e = fmax(e, absdiff(all[q * C + ob * CV + ch], one[q * CV + ch]));
            printf("  %-34s object %d read alone: max abs err %.2e\n", c.name, ob, e);
            CHECKF(dense ? e <= 1e-6 : e == 0, "%s: object %d read alone differs by %.3e", c.name, ob, e);
            free(c1.mv);
        }
        free(all), free(one);
        mr_case_free(&c);
    }
}

static void test_objects(void) {
    NEED_GPU();
    objects_at(MR_FP32);
}

/* The same read twice: the same bits (out and usage). */
static void deterministic_at(int half) {
    mr_case c;
    mr_case_alloc(&c, "determinism", 3000, 2000, 64, 16, 30, 1, 1);
    c.half = half;
    mr_case_random(&c, 41);
    const size_t no = (size_t)(c.HW * c.C);
    float *a = malloc(no * sizeof(float)), *b = malloc(no * sizeof(float));
    float *ua = malloc((size_t)c.N * sizeof(float)), *ub = malloc((size_t)c.N * sizeof(float));
    dcase d;
    ckey_error err;
    REQUIRE(dcase_up(&d, &c, 1));
    CHECKF(cuda_read(&c, &d, a, ua, &err) == CKEY_OK, "%s", err.message);
    CHECKF(cuda_read(&c, &d, b, ub, &err) == CKEY_OK, "%s", err.message);
    CHECKF(memcmp(a, b, no * sizeof(float)) == 0, "out differs between two runs");
    CHECKF(memcmp(ua, ub, (size_t)c.N * sizeof(float)) == 0, "usage differs between two runs");
    const int same = !memcmp(a, b, no * sizeof(float)) && !memcmp(ua, ub, (size_t)c.N * sizeof(float));
    printf("  two runs of N %lld HW %lld top_k 30 with usage: %s\n", (long long)c.N, (long long)c.HW,
           same ? "the same bits" : "differ");
    dcase_free(&d);
    free(a), free(b), free(ua), free(ub);
    mr_case_free(&c);
}

static void test_deterministic(void) {
    NEED_GPU();
    deterministic_at(MR_FP32);
}

/* The op table's entry: the state's stream and mr_scratch; a failure is the
 * pass's status (no abort). */
static void test_op_table(void) {
    NEED_GPU();
#ifdef CK_HAVE_CUDA
    REQUIRE(ck_cuda_ops.memory_read != NULL);
    mr_case c;
    mr_case_alloc(&c, "op table", 700, 300, 64, 16, 100, 1, 1);
    mr_case_random(&c, 51);
    const size_t no = (size_t)(c.HW * c.C);
    float *a = malloc(no * sizeof(float)), *b = malloc(no * sizeof(float)), *ua = malloc(700 * sizeof(float)),
          *ub = malloc(700 * sizeof(float));
    dcase d;
    ckey_error err;
    REQUIRE(dcase_up(&d, &c, 1));
    REQUIRE(d.scratch_bytes > 0); /* top_k 100: heaps in device memory */
    CHECKF(cuda_read(&c, &d, a, ua, &err) == CKEY_OK, "%s", err.message);
    ck_cuda_state *s = calloc(1, sizeof *s);
    s->mr_scratch = d.scratch, s->mr_scratch_bytes = d.scratch_bytes;
#define T(p) ck_tensor_of((void *)(p), CK_F32)
    ck_cuda_ops.memory_read(&s->base, T(d.mk), T(d.ms), T(d.qk), T(d.qe), c.N, c.HW, c.CK, T(d.mv), c.C, c.top_k,
                            T(d.out), T(d.usage));
    CHECKF(s->status == CKEY_OK, "op table entry: %s", s->err.message);
    REQUIRE(ck_cuda_sync(NULL) == CKEY_OK);
    REQUIRE(ck_cuda_copy(b, d.out, no * sizeof(float), 0, NULL) == CKEY_OK);
    REQUIRE(ck_cuda_copy(ub, d.usage, 700 * sizeof(float), 0, NULL) == CKEY_OK);
    CHECKF(memcmp(a, b, no * sizeof(float)) == 0 && memcmp(ua, ub, 700 * sizeof(float)) == 0,
           "the op table's entry differs from ck_cuda_memory_read");
    /* a workspace one byte short: refused, named, nothing launched */
    s->mr_scratch_bytes = d.scratch_bytes - 1;
    ck_cuda_ops.memory_read(&s->base, T(d.mk), T(d.ms), T(d.qk), T(d.qe), c.N, c.HW, c.CK, T(d.mv), c.C, c.top_k,
                            T(d.out), T(d.usage));
    printf("  op table: the same bits as the direct call; a short workspace: \"%s\"\n", s->err.message);
    CHECK(s->status == CKEY_ERR_INVALID_ARG);
    /* the backend's precision reaches the read: at fp16 the same bits as the direct fp16 call,
     * which differ from the fp32 read; at tf32 the fp32 read (matmuls stay off TF32) */
    static const int precs[] = {CKEY_PRECISION_FP16, CKEY_PRECISION_TF32};
    for (size_t i = 0; i < CK_ARRAY_LEN(precs); i++) {
        const int p = precs[i], half = p == CKEY_PRECISION_FP16;
        mr_case ch = c;
        ch.half = half ? MR_FP16 : MR_FP32;
        float *h = malloc(no * sizeof(float)), *uh = malloc(700 * sizeof(float));
        REQUIRE(h && uh);
        CHECKF(cuda_read(&ch, &d, h, uh, &err) == CKEY_OK, "%s", err.message);
        s->status = CKEY_OK, s->mr_scratch_bytes = d.scratch_bytes, s->cfg.conv_precision = p;
        ck_cuda_ops.memory_read(&s->base, T(d.mk), T(d.ms), T(d.qk), T(d.qe), c.N, c.HW, c.CK, T(d.mv), c.C,
                                c.top_k, T(d.out), T(d.usage));
        CHECKF(s->status == CKEY_OK, "op table entry at %s: %s", half ? "fp16" : "tf32", s->err.message);
        REQUIRE(ck_cuda_sync(NULL) == CKEY_OK);
        REQUIRE(ck_cuda_copy(b, d.out, no * sizeof(float), 0, NULL) == CKEY_OK);
        REQUIRE(ck_cuda_copy(ub, d.usage, 700 * sizeof(float), 0, NULL) == CKEY_OK);
        const int same = !memcmp(h, b, no * sizeof(float)) && !memcmp(uh, ub, 700 * sizeof(float));
        const int as_fp32 = !memcmp(a, b, no * sizeof(float));
        printf("  op table at %s: %s the direct %s read; %s the fp32 read\n", half ? "fp16" : "tf32",
               same ? "the same bits as" : "differs from", half ? "fp16" : "fp32",
               as_fp32 ? "the same bits as" : "differs from");
        CHECKF(same, "op table at %s: differs from ck_cuda_memory_read at %s", half ? "fp16" : "tf32",
               half ? "fp16" : "fp32");
        CHECKF(half ? !as_fp32 : as_fp32, "op table at %s: %s the fp32 read", half ? "fp16" : "tf32",
               half ? "the same bits as" : "differs from");
        free(h), free(uh);
    }
    s->cfg.conv_precision = 0;
    /* fp16 tensors are refused */
    s->status = CKEY_OK, s->mr_scratch_bytes = d.scratch_bytes;
    ck_cuda_ops.memory_read(&s->base, ck_tensor_of(d.mk, CK_F16), T(d.ms), T(d.qk), T(d.qe), c.N, c.HW, c.CK,
                            T(d.mv), c.C, c.top_k, T(d.out), T(d.usage));
    CHECK(s->status == CKEY_ERR_UNSUPPORTED);
#undef T
    free(s);
    dcase_free(&d);
    free(a), free(b), free(ua), free(ub);
    mr_case_free(&c);
#endif
}

/* At 1080p (cutie-base: CK 64, one object of CV 256, top_k 30, HW = 68 x
 * 120 at stride 16) with 5 memory frames (N = 40800): vs the CPU backend on
 * every query, vs the reference on every 97th (and with usage). */
static void read_1080p_at(int half) {
    const int64_t HW = 68 * 120;
    mr_case c;
    mr_case_alloc(&c, "1080p, 5 frames", 5 * HW, HW, 64, 256, 30, 1, 1);
    c.half = half;
    mr_case_random(&c, 61);
    copts o = {0, 0, 97};
    check_case(&c, o);
    mr_case_free(&c);
}

static void test_1080p(void) {
    NEED_GPU();
    read_1080p_at(MR_FP32);
}

/* The tensor-core path (fp16 and bf16 operands, memory-read.cu) on the
 * same cases as the fp32 one, against the reference from the same rounded
 * operands: boundaries, ties and large magnitudes (exact in both types, so
 * ties stay ties), usage, several objects, determinism and 1080p. */
static void test_half(void) {
    NEED_GPU();
    for (int h = MR_FP16; h <= MR_BF16; h++) {
        printf("  -- %s operands\n", half_name(h));
        boundaries_at(h);
        ties_at(h);
        large_magnitudes_at(h);
        usage_at(h);
        objects_at(h);
        deterministic_at(h);
        read_1080p_at(h);
    }
}

/* The scratch depends on top_k alone (264 CTAs' x 64 queries' kept keys
 * and counts), plus N x 8 bytes with usage; never on HW. Host only. */
static void test_scratch_bytes(void) {
    const int64_t hw = 68 * 120;
    for (int k = 0; k <= 100; k += 30) {
        size_t b[2];
        for (int i = 0; i < 2; i++) {
            ck_op_needs n = {0};
            n.mr_n = (i ? 10 : 5) * hw * (i ? 16 : 1), n.mr_ck = 64, n.mr_top_k = k;
            b[i] = ck_cuda_memory_read_bytes(&n);
        }
        printf("  CK 64, top_k %3d: %zu bytes of device scratch at N = %lld and at N = %lld\n", k, b[0],
               (long long)(5 * hw), (long long)(160 * hw));
        CHECKF(b[0] == b[1], "top_k %d: the scratch depends on N (%zu, %zu)", k, b[0], b[1]);
#ifdef CK_HAVE_CUDA
        const size_t bound = k ? (size_t)264 * 64 * (k * 8 + 4) + 512 : 0;
        CHECKF(b[0] <= bound, "top_k %d: %zu bytes, above %zu", k, b[0], bound);
#endif
    }
    ck_op_needs n = {0};
    n.mr_n = 10 * hw, n.mr_ck = 64, n.mr_top_k = 30, n.mr_usage_hw = hw;
    const size_t u = ck_cuda_memory_read_bytes(&n);
    printf("  1080p, 10 frames, with usage: %zu bytes (the N x HW affinity: %.0f MiB)\n", u,
           10.0 * hw * hw * 4 / 1048576.0);
#ifdef CK_HAVE_CUDA
    n.mr_usage_hw = 0;
    const size_t plain = ck_cuda_memory_read_bytes(&n);
    CHECKF(u >= plain + (size_t)n.mr_n * 8 && u <= plain + (size_t)n.mr_n * 8 + 256,
           "usage at N = %lld: %zu bytes, %zu without", (long long)n.mr_n, u, plain);
#endif
}

int main(int argc, char **argv) {
    static const ck_test_case cases[] = {
        {"scratch_bytes", test_scratch_bytes},
        {"boundaries", test_boundaries},
        {"ties", test_ties},
        {"large_magnitudes", test_large_magnitudes},
        {"usage", test_usage},
        {"objects", test_objects},
        {"deterministic", test_deterministic},
        {"op_table", test_op_table},
        {"1080p", test_1080p},
        {"half", test_half},
    };
    return ck_test_main(cases, (int)CK_ARRAY_LEN(cases), argc, argv);
}
