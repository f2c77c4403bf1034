/* Cutie's memory read on the CPU (backend/ops.h memory_read), fused: one
 * pass over blocks of MR_BQ query positions, each a pool work item. A worker
 * packs its queries once as the B operand of ckey's GEMM, then walks the
 * memory in tiles of MR_BK positions; for each tile one GEMM gives the
 * similarities transposed, St [MR_BK, MR_BQ] (a row per memory position, the
 * queries along it), and then
 *   top-k:  each value that reaches its query's current k-th best is offered
 *           to that query's bounded heap of top_k (value, position) pairs;
 *           after the last tile the softmax over the kept values weights a
 *           gather of their value rows into out;
 *   dense:  (top_k <= 0 or >= N) the online-softmax recurrence, its running
 *           P . V accumulated in the query block's rows of out.
 * With selection the GEMM has K = 2 CK: memory row [mk, mk^2] against query
 * row [2 qe qk, -qe], minus sum qe qk^2; without, K = CK: mk (read in place)
 * against 2 qk, minus |mk|^2; then times ms[n] / sqrt(CK). Memory positions
 * are the GEMM's rows, so a tile is read where it lies (or copied row by row
 * with its squares), and the packed queries are reused by every tile. What
 * is live besides the inputs and out is the worker's scratch, whose size CK
 * and top_k alone set, and, for a read that gives usage, the kept pairs
 * (HW x top_k). */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "core/fastmath.h"
#include "cpu/cpu.h"

#define VEC __attribute__((target_clones("avx512f", "avx2", "default")))

enum {
    MR_BQ = 64,  /* query positions per work item (two of the GEMM's 32-column panels) */
    MR_BK = 256, /* memory positions per similarity tile */
    MR_NR = 32   /* ck_sgemm_packed's panel width */
};

static size_t al16(size_t n) { return (n + 15) / 16 * 16; }

/* 0: the dense path; else the number kept per query. A read that gives
 * usage keeps min(top_k, N) on the top-k path, so that every kept weight
 * is known per query (the same softmax as the dense path's over N). */
static int kept(int64_t N, int top_k) { return top_k > 0 && top_k < N ? top_k : 0; }
static int kept_usage(int64_t N, int top_k) { return (int)CK_MIN((int64_t)top_k, N); }

/* A worker's scratch, carved from its slice in this order. */
typedef struct {
    float *qp;    /* MR_BQ / 32 panels of [Kd][32]: the block's queries as ck_sgemm_packed's B */
    float *bsq;   /* [MR_BQ] sum_c qe qk^2 (with selection) */
    float *at;    /* [MR_BK, Kd] memory rows [mk, mk^2] (with selection) */
    float *asq;   /* [MR_BK] |mk|^2 (without selection) */
    float *scl;   /* [MR_BK] ms[n] / sqrt(CK) */
    float *st;    /* [MR_BK, MR_BQ] similarities, a row per memory position */
    float *thr;   /* [MR_BQ] what a value must reach to be offered (top-k) */
    uint64_t *hk; /* [MR_BQ, k] heaps of rank keys (top-k) */
    int32_t *hn;  /* [MR_BQ] heap sizes (top-k) */
    float *wt;    /* [k] the softmax weights of one query (top-k) */
    float *m, *l, *corr, *mx; /* [MR_BQ] running max and sum, rescale factor, tile max (dense) */
    float *p;     /* [MR_BQ, MR_BK] exp(S - m), a row per query (dense) */
} mr_scratch;

static size_t carve(float *base, int CK, int k, mr_scratch *w) {
    const size_t kd = 2 * (size_t)CK;
    size_t off = 0;
#define TAKE(field, type, n)                                           \
    do {                                                               \
        if (base) w->field = (type *)(void *)(base + off);             \
        off += al16(n);                                                \
    } while (0)
    TAKE(qp, float, MR_BQ * kd);
    TAKE(bsq, float, MR_BQ);
    TAKE(at, float, MR_BK * kd);
    TAKE(asq, float, MR_BK);
    TAKE(scl, float, MR_BK);
    TAKE(st, float, (size_t)MR_BK * MR_BQ);
    if (k) {
        TAKE(thr, float, MR_BQ);
        TAKE(hk, uint64_t, (size_t)MR_BQ * k * 2);
        TAKE(hn, int32_t, MR_BQ);
        TAKE(wt, float, (size_t)k);
    } else {
        TAKE(m, float, MR_BQ);
        TAKE(l, float, MR_BQ);
        TAKE(corr, float, MR_BQ);
        TAKE(mx, float, MR_BQ);
        TAKE(p, float, (size_t)MR_BQ * MR_BK);
    }
#undef TAKE
    return off;
}

size_t ck_cpu_memory_read_floats(int64_t N, int CK, int top_k) { return carve(NULL, CK, kept(N, top_k), NULL); }

size_t ck_cpu_memory_read_pairs_floats(int64_t HW, int top_k) { return top_k > 0 ? (size_t)HW * top_k * 2 : 0; }

typedef struct {
    const float *mk, *ms, *qk, *qe, *mv;
    float *out;
    float *pairs; /* with usage: [HW, k] (position as int32 bits, weight) */
    int64_t N, HW;
    int CK, C, k;
    float inv_sqrt_ck;
    ck_cpu *be;
} mr_ctx;

/* ------------------------------------------------------------ the top-k heap
 * The kept pairs are the first top_k of the order "a ranks above b when
 * a.v > b.v, or a.v == b.v and a.n < b.n", whatever order the positions are
 * offered in. That matches torch.topk's CUDA kernel, which fills the places
 * left after every value above the k-th with the equal values of the lowest
 * indices (torch's CPU topk leaves the choice among ties open). A pair is
 * one 64-bit rank key, larger ranking higher: the value's bits mapped to an
 * unsigned order (-0 taken as +0, so they tie as the floats do) above the
 * complement of its position. Each query keeps a bounded min-heap of keys,
 * its root the lowest-ranked pair kept, the one a better pair replaces. */

static inline uint64_t rank_key(float v, int32_t n) {
    uint32_t u;
    v += 0.0f; /* -0 -> +0 */
    memcpy(&u, &v, sizeof u);
    u = u & 0x80000000u ? ~u : u | 0x80000000u;
    return (uint64_t)u << 32 | (uint32_t)~(uint32_t)n;
}

static inline float key_value(uint64_t key) {
    uint32_t u = (uint32_t)(key >> 32);
    u = u & 0x80000000u ? u & 0x7FFFFFFFu : ~u;
    float v;
    memcpy(&v, &u, sizeof v);
    return v;
}

static inline int32_t key_position(uint64_t key) { return (int32_t)~(uint32_t)key; }

/* Offers key x to heap h of *hn (<= k) keys. */
static void heap_offer(uint64_t *h, int32_t *hn, int k, uint64_t x) {
    int i = *hn;
    if (i < k) { /* not full: sift up */
        while (i > 0 && h[(i - 1) / 2] > x) {
            h[i] = h[(i - 1) / 2];
            i = (i - 1) / 2;
        }
        h[i] = x;
        *hn += 1;
        return;
    }
    if (x <= h[0]) return;
    for (i = 0;;) { /* replace the root: sift down */
        int c = 2 * i + 1;
        if (c >= k) break;
        c += c + 1 < k && h[c + 1] < h[c];
        if (h[c] >= x) break;
        h[i] = h[c];
        i = c;
    }
    h[i] = x;
}

/* out [C] += w * v [C]. */
VEC static void axpy(float *restrict out, const float *restrict v, float w, int C) {
    for (int c = 0; c < C; c++) out[c] += w * v[c];
}

/* out [C] = softmax over the n kept values . their rows of mv: the weights
 * from the largest kept value, so exp never overflows and the largest
 * weight's exp is 1. The rows are scattered over mv, so the next one is
 * prefetched while this one is added. w: n floats. */
static void topk_readout(const uint64_t *h, int n, const float *mv, int C, float *out, float *w, float *pairs, int k) {
    memset(out, 0, (size_t)C * sizeof(float));
    if (pairs) /* unfilled places (only NaN values are never kept) weigh 0 at position 0 */
        for (int j = 0; j < k; j++) pairs[2 * j] = 0.0f, pairs[2 * j + 1] = 0.0f;
    if (n == 0) return;
    float mx = -INFINITY, sum = 0;
    for (int j = 0; j < n; j++) mx = CK_MAX(mx, key_value(h[j]));
    for (int j = 0; j < n; j++) sum += w[j] = expf(key_value(h[j]) - mx);
    const float inv = 1.0f / sum;
    if (pairs)
        for (int j = 0; j < n; j++) {
            const int32_t pos = key_position(h[j]);
            memcpy(&pairs[2 * j], &pos, sizeof pos);
            pairs[2 * j + 1] = w[j] * inv;
        }
    for (int j = 0; j < n; j++) {
        if (j + 1 < n) {
            const char *next = (const char *)(mv + (int64_t)key_position(h[j + 1]) * C);
            for (size_t b = 0; b < (size_t)C * sizeof(float); b += 64) __builtin_prefetch(next + b);
        }
        axpy(out, mv + (int64_t)key_position(h[j]) * C, w[j] * inv, C);
    }
}

/* ------------------------------------------------------------- the tiles */

/* The GEMM's B: the block's query rows packed as ck_sgemm_packed's panels
 * of 32 queries, [Kd][32] each (zero past nq), and bsq. */
static void query_panels(const mr_ctx *c, int64_t q0, int nq, mr_scratch *w) {
    const int CK = c->CK, kd = c->qe ? 2 * CK : CK, nqp = (nq + MR_NR - 1) / MR_NR * MR_NR;
    for (int i = 0; i < nqp; i++) {
        float *p = w->qp + (size_t)(i / MR_NR) * kd * MR_NR + i % MR_NR;
        if (i >= nq) {
            for (int ch = 0; ch < kd; ch++) p[(size_t)ch * MR_NR] = 0.0f;
            continue;
        }
        const float *k = c->qk + (q0 + i) * CK;
        if (c->qe) {
            const float *e = c->qe + (q0 + i) * CK;
            float b = 0;
            for (int ch = 0; ch < CK; ch++) {
                p[(size_t)ch * MR_NR] = 2.0f * e[ch] * k[ch];
                p[(size_t)(CK + ch) * MR_NR] = -e[ch];
                b += e[ch] * k[ch] * k[ch];
            }
            w->bsq[i] = b;
        } else {
            for (int ch = 0; ch < CK; ch++) p[(size_t)ch * MR_NR] = 2.0f * k[ch];
        }
    }
}

/* The GEMM's A for memory positions n0..n0+bk: with selection the rows
 * [mk, mk^2] copied into at (returned), without mk in place; and each
 * position's |mk|^2 and scale. */
VEC static const float *memory_rows(const mr_ctx *c, int64_t n0, int bk, mr_scratch *w) {
    const int CK = c->CK;
    for (int j = 0; j < bk; j++) {
        const float *k = c->mk + (n0 + j) * CK;
        float *a = w->at + (size_t)j * 2 * CK, sum = 0;
        if (c->qe)
            for (int ch = 0; ch < CK; ch++) a[ch] = k[ch], a[CK + ch] = k[ch] * k[ch];
        else
            for (int ch = 0; ch < CK; ch++) sum += k[ch] * k[ch];
        w->asq[j] = sum;
        w->scl[j] = (c->ms ? c->ms[n0 + j] : 1.0f) * c->inv_sqrt_ck;
    }
    return c->qe ? w->at : c->mk + n0 * CK;
}

/* St [bk, nq] = (G - bsq[i]) * scl[j] with selection, (G - asq[j]) * scl[j]
 * without (row j: memory position n0 + j; column i: query q0 + i). */
VEC static void finish_tile(float *restrict st, int bk, int nq, const float *restrict bsq,
                            const float *restrict asq, const float *restrict scl) {
    for (int j = 0; j < bk; j++) {
        float *r = st + (size_t)j * MR_BQ;
        const float a = asq[j], sc = scl[j];
        if (bsq)
            for (int i = 0; i < nq; i++) r[i] = (r[i] - bsq[i]) * sc;
        else
            for (int i = 0; i < nq; i++) r[i] = (r[i] - a) * sc;
    }
}

/* Whether any r[i] >= thr[i] (vectorized: most rows offer nothing). */
VEC static int row_reaches(const float *restrict r, const float *restrict thr, int nq) {
    int any = 0;
    for (int i = 0; i < nq; i++) any |= r[i] >= thr[i];
    return any;
}

/* Offers the tile's values to the queries' heaps. thr[i] is what a value
 * must reach to be offered: -Inf while query i's heap fills, then its
 * root's value (a value below it cannot rank above the root). A NaN is
 * never offered. */
static void offer_tile(const float *st, int bk, int nq, int64_t n0, const mr_scratch *w, int k) {
    float *restrict thr = w->thr;
    for (int j = 0; j < bk; j++) {
        const float *r = st + (size_t)j * MR_BQ;
        if (!row_reaches(r, thr, nq)) continue;
        for (int i = 0; i < nq; i++) {
            if (!(r[i] >= thr[i])) continue;
            uint64_t *h = w->hk + (size_t)i * k;
            heap_offer(h, w->hn + i, k, rank_key(r[i], (int32_t)(n0 + j)));
            if (w->hn[i] == k) thr[i] = key_value(h[0]);
        }
    }
}

/* One online-softmax step over the tile: per query i, m[i] becomes the max
 * so far, corr[i] = exp(m_old - m_new) rescales what was accumulated, and
 * the tile becomes p [nq, bk] = exp(St - m)ᵀ (rows: queries, the A of P.V),
 * its row sums added to l. */
VEC static void dense_tile(const float *restrict st, int bk, int nq, float *restrict m, float *restrict l,
                           float *restrict corr, float *restrict mx, float *restrict p) {
    for (int i = 0; i < nq; i++) mx[i] = m[i];
    for (int j = 0; j < bk; j++) {
        const float *r = st + (size_t)j * MR_BQ;
        for (int i = 0; i < nq; i++) mx[i] = r[i] > mx[i] ? r[i] : mx[i];
    }
    for (int i = 0; i < nq; i++) {
        corr[i] = m[i] == -INFINITY ? 0.0f : ck_exp_approx(m[i] - mx[i]);
        m[i] = mx[i];
        l[i] *= corr[i];
    }
    for (int j = 0; j < bk; j++) {
        const float *r = st + (size_t)j * MR_BQ;
        for (int i = 0; i < nq; i++) {
            const float e = ck_exp_approx(r[i] - m[i]);
            p[(size_t)i * MR_BK + j] = e;
            l[i] += e;
        }
    }
}

static void read_blocks(void *p, int64_t b0, int64_t b1, int thread) {
    const mr_ctx *c = p;
    mr_scratch w = {0};
    carve(c->be->scratch + (size_t)thread * c->be->per_thread, c->CK, c->k, &w);
    const int kd = c->qe ? 2 * c->CK : c->CK, k = c->k, C = c->C;
    for (int64_t b = b0; b < b1; b++) {
        const int64_t q0 = b * MR_BQ;
        const int nq = (int)CK_MIN(MR_BQ, c->HW - q0);
        float *out = c->out + q0 * C;
        query_panels(c, q0, nq, &w);
        for (int i = 0; i < nq; i++) {
            if (k) w.hn[i] = 0, w.thr[i] = -INFINITY;
            else w.m[i] = -INFINITY, w.l[i] = 0;
        }
        for (int64_t n0 = 0; n0 < c->N; n0 += MR_BK) {
            const int bk = (int)CK_MIN(MR_BK, c->N - n0);
            const float *a = memory_rows(c, n0, bk, &w);
            ck_sgemm_packed(0, bk, nq, kd, a, kd, w.qp, (int64_t)kd * MR_NR, 0.0f, w.st, MR_BQ);
            finish_tile(w.st, bk, nq, c->qe ? w.bsq : NULL, w.asq, w.scl);
            if (k) {
                offer_tile(w.st, bk, nq, n0, &w, k);
                continue;
            }
            dense_tile(w.st, bk, nq, w.m, w.l, w.corr, w.mx, w.p);
            if (n0 > 0)
                for (int i = 0; i < nq; i++)
                    for (int ch = 0; ch < C; ch++) out[(size_t)i * C + ch] *= w.corr[i];
            /* out rows (+)= P [nq, bk] . mv [bk, C] */
            ck_sgemm(0, nq, C, bk, 1.0f, w.p, MR_BK, c->mv + n0 * C, C, n0 > 0 ? 1.0f : 0.0f, out, C);
        }
        if (k) {
            for (int i = 0; i < nq; i++)
                topk_readout(w.hk + (size_t)i * k, w.hn[i], c->mv, C, out + (size_t)i * C, w.wt,
                             c->pairs ? c->pairs + (size_t)(q0 + i) * k * 2 : NULL, k);
        } else {
            for (int i = 0; i < nq; i++) {
                const float inv = 1.0f / w.l[i];
                for (int ch = 0; ch < C; ch++) out[(size_t)i * C + ch] *= inv;
            }
        }
    }
}

void ck_cpu_memory_read(ck_cpu *be, const float *mk, const float *ms, const float *qk, const float *qe, int64_t N,
                        int64_t HW, int CK, const float *mv, int C, int top_k, float *out, float *usage) {
    if (usage && N > 0) memset(usage, 0, (size_t)N * sizeof(float));
    if (HW <= 0 || C <= 0) return;
    if (N <= 0) {
        memset(out, 0, (size_t)HW * C * sizeof(float));
        return;
    }
    /* positions are int32 in the heaps; the slice must hold this op's scratch */
    const int k = usage ? kept_usage(N, top_k) : kept(N, top_k);
    if (N > INT32_MAX || be->per_thread < carve(NULL, CK, k, NULL)) abort();
    if (usage && (top_k <= 0 || be->mr_pairs_floats < ck_cpu_memory_read_pairs_floats(HW, k))) abort();
    mr_ctx c = {mk, ms, qk, qe, mv, out, usage ? be->mr_pairs : NULL, N, HW, CK, C, k, 1.0f / sqrtf((float)CK), be};
    ck_pool_for(be->pool, (HW + MR_BQ - 1) / MR_BQ, 1, read_blocks, &c);
    if (usage) /* summed in query order: the same for any thread count */
        for (int64_t i = 0; i < HW * k; i++) {
            int32_t pos;
            memcpy(&pos, &c.pairs[2 * i], sizeof pos);
            usage[pos] += c.pairs[2 * i + 1];
        }
}
