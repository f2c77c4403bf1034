/* CPU implementations of the op table. Parallelism: ck_pool_for over rows,
 * windows or (head, query-block) items; each worker calls the serial GEMM on
 * its own tile and uses its own slice of the session scratch. */
#include <math.h>
#include <string.h>

#include "core/fastmath.h"
#include "cpu/cpu.h"

#define VEC __attribute__((target_clones("avx512f", "avx2", "default")))

enum {
    LIN_ROWS = 256,  /* rows per linear tile */
    MLP_ROWS = 256,  /* tokens per MLP chunk */
    ATT_BQ = 256,    /* query rows per attention item */
    ATT_BK = 512,    /* keys per online-softmax step */
    MU_ROWS = 256,   /* tokens per mask-unit chunk */
    CONV_TILE = 256, /* output pixels per conv GEMM */
    CONV_BAND_MIN = 32 /* rows per in-place conv band (>= max dilation 8) */
};

/* A block's weights as fp32 pointers (the CPU runs the model's own store). */
typedef struct {
    const float *norm1_w, *norm1_b, *proj_w, *proj_b, *qkv_w, *qkv_b, *attn_proj_w, *attn_proj_b;
    const float *norm2_w, *norm2_b, *fc1_w, *fc1_b, *fc2_w, *fc2_b;
} blk32;

static blk32 block_f32(const ck_block_w *w) {
    blk32 b = {ck_wf32(w->norm1_w), ck_wf32(w->norm1_b), ck_wf32(w->proj_w),      ck_wf32(w->proj_b),
               ck_wf32(w->qkv_w),   ck_wf32(w->qkv_b),   ck_wf32(w->attn_proj_w), ck_wf32(w->attn_proj_b),
               ck_wf32(w->norm2_w), ck_wf32(w->norm2_b), ck_wf32(w->fc1_w),       ck_wf32(w->fc1_b),
               ck_wf32(w->fc2_w),   ck_wf32(w->fc2_b)};
    return b;
}

static int conv_band(int threads, int S) {
    int b = CK_MAX(CONV_BAND_MIN, 8 * threads);
    return CK_MIN(b, S);
}

static inline float *thread_scratch(ck_cpu *be, int thread) {
    return be->scratch + (size_t)thread * be->per_thread;
}

/* ------------------------------------------------------------ elementwise */

VEC void ck_vexp(float *restrict x, int64_t n) {
    for (int64_t i = 0; i < n; i++) x[i] = ck_exp_approx(x[i]);
}

static inline float sigmoidf(float v) { return 1.0f / (1.0f + expf(-v)); }

/* Two-pass mean/variance with 16 float lanes (C <= a few thousand, so
 * float partial sums lose nothing that matters; vectorizes). */
VEC static void layernorm_row(const float *restrict x, int C, const float *restrict g,
                              const float *restrict b, float *restrict y) {
    float lane[16] = {0};
    int i = 0;
    for (; i + 16 <= C; i += 16)
        for (int l = 0; l < 16; l++) lane[l] += x[i + l];
    float s = 0;
    for (; i < C; i++) s += x[i];
    for (int l = 0; l < 16; l++) s += lane[l];
    const float mean = s / (float)C;
    float q[16] = {0};
    for (i = 0; i + 16 <= C; i += 16)
        for (int l = 0; l < 16; l++) {
            float d = x[i + l] - mean;
            q[l] += d * d;
        }
    float ss = 0;
    for (; i < C; i++) ss += (x[i] - mean) * (x[i] - mean);
    for (int l = 0; l < 16; l++) ss += q[l];
    const float rstd = 1.0f / sqrtf(ss / (float)C + 1e-6f);
    for (i = 0; i < C; i++) y[i] = (x[i] - mean) * rstd * g[i] + b[i];
}

static inline void add_bias_rows(float *y, int64_t rows, int out, int64_t ldy, const float *b) {
    if (!b) return;
    for (int64_t r = 0; r < rows; r++) {
        float *yr = y + r * ldy;
        for (int o = 0; o < out; o++) yr[o] += b[o];
    }
}

/* ------------------------------------------------------ packed weights */

/* A weight W [out, in] packed once per op (ck_sgemm_pack_b panels) into the
 * shared scratch, for all row chunks and threads: packed per GEMM call, as
 * ck_sgemm does, it would be re-read from L3 or memory and re-packed for
 * every chunk of 64 to 256 rows. */
static size_t packed_w_floats(int out, int in) { return (size_t)((out + 31) / 32) * 32 * in; }

typedef struct {
    const float *W[2];
    int out[2], in[2];
    float *Wp[2];
    int64_t np0;
} wpack_ctx;

static void pack_panels(void *p, int64_t a, int64_t b, int thread) {
    const wpack_ctx *c = p;
    for (int64_t it = a; it < b; it++) {
        const int w = it >= c->np0, j0 = (int)(it - (w ? c->np0 : 0)) * 32, in = c->in[w];
        ck_sgemm_pack_b(1, CK_MIN(32, c->out[w] - j0), in, c->W[w] + (int64_t)j0 * in, in,
                        c->Wp[w] + (int64_t)j0 * in, (int64_t)32 * in);
    }
}

/* Packs W0 (and W1 when given) into be->shared, W1 right after W0. */
static void pack_weights(ck_cpu *be, const float *W0, int out0, int in0, const float *W1, int out1, int in1,
                         float *Wp[2]) {
    wpack_ctx c = {{W0, W1}, {out0, out1}, {in0, in1}, {be->shared, be->shared + packed_w_floats(out0, in0)},
                   (out0 + 31) / 32};
    Wp[0] = c.Wp[0], Wp[1] = c.Wp[1];
    ck_pool_for(be->pool, c.np0 + (W1 ? (out1 + 31) / 32 : 0), 1, pack_panels, &c);
}

/* --------------------------------------------------------------- linear */

typedef struct {
    const float *x, *W, *b;
    float *y;
    int in, out, accumulate, qs;
    int64_t N;
    ck_cpu *be;
    const float *Wp; /* packed W (linear) */
    const ck_ln_map *ln; /* linear_maxpool_map: x is layernorm(ln) of a feature map */
} lin_ctx;

static inline int64_t map_row(int64_t r, int H, int k);

/* Rows [a, a + n) of a linear's input x [N, in]: x's own, or where ln is
 * given (ck_schedule.norm1_from_map) the LayerNorm of the map rows reroll put
 * them in, computed into buf [n, in] (the values layernorm_map stores). */
static const float *input_rows(const float *x, const ck_ln_map *ln, int64_t a, int n, int in, float *buf) {
    if (!ln) return x + a * in;
    const float *map = ck_f32(ln->map), *g = ck_wf32(ln->g), *b = ck_wf32(ln->b);
    for (int i = 0; i < n; i++)
        layernorm_row(map + map_row(a + i, ln->H, ln->k) * in, in, g, b, buf + (int64_t)i * in);
    return buf;
}

static void linear_rows(void *p, int64_t r0, int64_t r1, int thread) {
    const lin_ctx *c = p;
    for (int64_t r = r0; r < r1; r += LIN_ROWS) {
        int rows = (int)CK_MIN(LIN_ROWS, r1 - r);
        float *y = c->y + r * c->out;
        ck_sgemm_packed(0, rows, c->out, c->in, c->x + r * c->in, c->in, c->Wp, (int64_t)32 * c->in,
                        c->accumulate ? 1.0f : 0.0f, y, c->out);
        add_bias_rows(y, rows, c->out, c->out, c->b);
    }
}

static void cpu_linear(ck_cpu *be, const float *x, int64_t N, int in, const float *W, const float *b,
                       float *y, int out, int accumulate) {
    float *Wp[2];
    pack_weights(be, W, out, in, NULL, 0, 0, Wp);
    lin_ctx c = {x, W, b, y, in, out, accumulate, 1, N, be, Wp[0], NULL};
    ck_pool_for(be->pool, N, 32, linear_rows, &c);
}

static void maxpool_rows(void *p, int64_t r0, int64_t r1, int thread) {
    const lin_ctx *c = p;
    float *tmp = thread_scratch(c->be, thread);
    int64_t Nq = c->N / c->qs;
    for (int64_t r = r0; r < r1; r += LIN_ROWS) {
        int rows = (int)CK_MIN(LIN_ROWS, r1 - r);
        float *y = c->y + r * c->out;
        for (int s = 0; s < c->qs; s++) {
            float *dst = s == 0 ? y : tmp;
            const float *x = input_rows(c->x, c->ln, s * Nq + r, rows, c->in, tmp + (size_t)LIN_ROWS * c->out);
            ck_sgemm(1, rows, c->out, c->in, 1.0f, x, c->in, c->W, c->in, 0.0f, dst, c->out);
            if (s > 0)
                for (int64_t i = 0; i < (int64_t)rows * c->out; i++) y[i] = tmp[i] > y[i] ? tmp[i] : y[i];
        }
        add_bias_rows(y, rows, c->out, c->out, c->b);
    }
}

static void cpu_linear_maxpool(ck_cpu *be, const float *x, int64_t N, int in, const float *W,
                               const float *b, float *y, int out, int qs) {
    lin_ctx c = {x, W, b, y, in, out, 0, qs, N, be, NULL, NULL};
    ck_pool_for(be->pool, N / qs, 32, maxpool_rows, &c);
}

/* The same with x = layernorm(ln) of a feature map (ck_ops.linear_maxpool_map). */
static void cpu_linear_maxpool_map(ck_cpu *be, const ck_ln_map *ln, int64_t N, int in, const float *W,
                                   const float *b, float *y, int out, int qs) {
    lin_ctx c = {NULL, W, b, y, in, out, 0, qs, N, be, NULL, ln};
    ck_pool_for(be->pool, N / qs, 32, maxpool_rows, &c);
}

typedef struct {
    const float *x, *g, *b;
    float *y;
    int C;
    int map_H, map_k; /* map_H > 0: x is a feature map (cpu_layernorm_map) */
} ln_ctx;

/* The row of the feature map [H, H, C] that reroll (k strides) puts
 * unrolled token row r in: unroll_index inverted. */
static inline int64_t map_row(int64_t r, int H, int k) {
    const int Hc = H >> k;
    const int64_t cells = (int64_t)Hc * Hc, rem = r % cells;
    int64_t outer = r / cells;
    int y = (int)(rem / Hc) << k, x = (int)(rem % Hc) << k;
    for (int i = k - 1; i >= 0; i--, outer /= 4) { /* the finest level is the most significant digit */
        const int d = (int)(outer % 4);
        y |= (d >> 1) << i, x |= (d & 1) << i;
    }
    return (int64_t)y * H + x;
}

static void ln_rows(void *p, int64_t r0, int64_t r1, int thread) {
    const ln_ctx *c = p;
    for (int64_t r = r0; r < r1; r++) {
        const int64_t src = c->map_H > 0 ? map_row(r, c->map_H, c->map_k) : r;
        layernorm_row(c->x + src * c->C, c->C, c->g, c->b, c->y + r * c->C);
    }
}

static void cpu_layernorm(ck_cpu *be, const float *x, int64_t N, int C, const float *g, const float *b,
                          float *y) {
    ln_ctx c = {x, g, b, y, C, 0, 0};
    ck_pool_for(be->pool, N, 64, ln_rows, &c);
}

/* y [N, C] in unrolled order (k strides) = layernorm of the feature map
 * [H, H, C] that reroll made of the tokens (ck_schedule.transition_from_map). */
static void cpu_layernorm_map(ck_cpu *be, const float *map, int H, int k, int64_t N, int C, const float *g,
                              const float *b, float *y) {
    ln_ctx c = {map, g, b, y, C, H, k};
    ck_pool_for(be->pool, N, 64, ln_rows, &c);
}

/* ------------------------------------------------------------------ MLP */

typedef struct {
    float *x;
    int C, hidden;
    blk32 w;
    ck_cpu *be;
    const float *W1p, *W2p; /* fc1, fc2 packed */
} mlp_ctx;

VEC static void gelu_inplace(float *restrict h, int64_t n) {
    for (int64_t i = 0; i < n; i++) h[i] = ck_gelu_approx(h[i]);
}

static void mlp_rows(void *p, int64_t r0, int64_t r1, int thread) {
    const mlp_ctx *c = p;
    float *xn = thread_scratch(c->be, thread);
    float *h = xn + (size_t)MLP_ROWS * c->C;
    for (int64_t r = r0; r < r1; r += MLP_ROWS) {
        int rows = (int)CK_MIN(MLP_ROWS, r1 - r);
        float *x = c->x + r * c->C;
        for (int i = 0; i < rows; i++)
            layernorm_row(x + (int64_t)i * c->C, c->C, c->w.norm2_w, c->w.norm2_b, xn + (int64_t)i * c->C);
        ck_sgemm_packed(0, rows, c->hidden, c->C, xn, c->C, c->W1p, (int64_t)32 * c->C, 0.0f, h, c->hidden);
        add_bias_rows(h, rows, c->hidden, c->hidden, c->w.fc1_b);
        gelu_inplace(h, (int64_t)rows * c->hidden);
        ck_sgemm_packed(0, rows, c->C, c->hidden, h, c->hidden, c->W2p, (int64_t)32 * c->hidden, 1.0f, x, c->C);
        add_bias_rows(x, rows, c->C, c->C, c->w.fc2_b);
    }
}

static void cpu_mlp(ck_cpu *be, float *x, int64_t N, int C, const ck_block_w *bw, int hidden) {
    const blk32 w = block_f32(bw);
    float *Wp[2];
    pack_weights(be, w.fc1_w, hidden, C, w.fc2_w, C, hidden, Wp);
    mlp_ctx c = {x, C, hidden, w, be, Wp[0], Wp[1]};
    ck_pool_for(be->pool, N, 16, mlp_rows, &c);
}

/* ------------------------------------------------------------ attention */

/* Row max and (in place) s = exp(s - m) with its sum, on explicit 16-lane
 * vectors (GCC does not vectorize these reductions itself without
 * -ffast-math). The vector helpers are always inlined into each clone. */
#pragma GCC diagnostic ignored "-Wpsabi"
typedef float v16f __attribute__((vector_size(64)));
typedef int32_t v16i __attribute__((vector_size(64)));

static inline __attribute__((always_inline)) v16f v16_load(const float *p) {
    v16f v;
    memcpy(&v, p, sizeof v);
    return v;
}

static inline __attribute__((always_inline)) v16f v16_max(v16f a, v16f b) {
    v16i gt = a > b;
    return (v16f)((gt & (v16i)a) | (~gt & (v16i)b));
}

static inline __attribute__((always_inline)) v16f v16_splat(float x) {
    return (v16f){x, x, x, x, x, x, x, x, x, x, x, x, x, x, x, x};
}

/* ck_exp_approx (core/fastmath.h) on 16 lanes, the same arithmetic: the
 * clamps keep a NaN lane NaN (v16_max would not), the exponents are
 * unsigned. */
typedef uint32_t v16u __attribute__((vector_size(64)));
static inline __attribute__((always_inline)) v16f v16_exp(v16f v) {
    const v16i lo = v < v16_splat(-104.0f), hi = v > v16_splat(89.0f);
    v = (v16f)((lo & (v16i)v16_splat(-104.0f)) | (~lo & (v16i)v));
    v = (v16f)((hi & (v16i)v16_splat(89.0f)) | (~hi & (v16i)v));
    v16f t = v * 1.44269504088896341f + 12582912.0f;
    v16f nf = t - 12582912.0f;
    const v16u nb = (v16u)t - 0x4B400000u + 256u, n1 = nb >> 1, n2 = nb - n1;
    v16f r = v - nf * 0.693145751953125f;
    r = r - nf * 1.428606765330187e-06f;
    v16f p = 1.0f + r * (1.0f + r * (0.5f + r * (0.166666672f + r * (0.0416666679f +
             r * (0.00833333377f + r * 0.00138888892f)))));
    return p * (v16f)((n1 - 1u) << 23) * (v16f)((n2 - 1u) << 23);
}

VEC static float row_max(const float *restrict s, int n) {
    v16f mv = v16_splat(-INFINITY);
    int j = 0;
    for (; j + 16 <= n; j += 16) mv = v16_max(v16_load(s + j), mv);
    float lane[16];
    memcpy(lane, &mv, sizeof lane);
    float mx = -INFINITY;
    for (int l = 0; l < 16; l++) mx = lane[l] > mx ? lane[l] : mx;
    for (; j < n; j++) mx = s[j] > mx ? s[j] : mx;
    return mx;
}

VEC static float exp_shift_sum(float *restrict s, int n, float m) {
    v16f acc = v16_splat(0.0f), mv = v16_splat(m);
    int j = 0;
    for (; j + 16 <= n; j += 16) {
        v16f e = v16_exp(v16_load(s + j) - mv);
        memcpy(s + j, &e, sizeof e);
        acc += e;
    }
    float lane[16];
    memcpy(lane, &acc, sizeof lane);
    float sum = 0;
    for (; j < n; j++) {
        s[j] = ck_exp_approx(s[j] - m);
        sum += s[j];
    }
    for (int l = 0; l < 16; l++) sum += lane[l];
    return sum;
}

/* One online-softmax step on the score tile S [nq, bk]: S becomes
 * exp(S - m_new), the normalizers and the running output O [nq, hd] are
 * rescaled. */
static void softmax_step(float *S, int nq, int bk, float *O, int hd, float *mrow, float *lrow) {
    for (int i = 0; i < nq; i++) {
        float *s = S + (int64_t)i * bk;
        float mx = row_max(s, bk);
        float mnew = mx > mrow[i] ? mx : mrow[i];
        float corr = expf(mrow[i] - mnew); /* 0 on the first step */
        float sum = exp_shift_sum(s, bk, mnew);
        lrow[i] = lrow[i] * corr + sum;
        mrow[i] = mnew;
        if (corr != 1.0f) {
            float *o = O + (int64_t)i * hd;
            for (int d = 0; d < hd; d++) o[d] *= corr;
        }
    }
}

static size_t flash_work(int hd) { return (size_t)ATT_BQ * ATT_BK + (size_t)ATT_BQ * hd + 2 * ATT_BQ; }

/* The state of one online-softmax pass, carved from flash_work(hd) floats:
 * the score tile S [ATT_BQ, ATT_BK], the running output O [ATT_BQ, hd], and
 * each query row's running max and normalizer. */
typedef struct flash_state {
    float *S, *O, *mrow, *lrow;
} flash_state;

static flash_state flash_init(int nq, int hd, float *work) {
    flash_state f;
    f.S = work;
    f.O = f.S + (size_t)ATT_BQ * ATT_BK;
    f.mrow = f.O + (size_t)ATT_BQ * hd;
    f.lrow = f.mrow + ATT_BQ;
    for (int i = 0; i < nq; i++) f.mrow[i] = -INFINITY, f.lrow[i] = 0;
    memset(f.O, 0, (size_t)nq * hd * sizeof(float));
    return f;
}

static void flash_finish(int nq, int hd, const float *O, const float *lrow, float *out, int64_t ldo) {
    for (int i = 0; i < nq; i++) {
        float inv = 1.0f / lrow[i];
        const float *o = O + (int64_t)i * hd;
        float *dst = out + (int64_t)i * ldo;
        for (int d = 0; d < hd; d++) dst[d] = o[d] * inv;
    }
}

/* Online-softmax attention for nq <= ATT_BQ queries (q [nq, hd], already
 * scaled) over nk keys/values with row stride ldkv. out rows stride ldo.
 * work: flash_work(hd) floats. */
static void flash(const float *q, int nq, const float *k, const float *v, int64_t ldkv, int64_t nk,
                  int hd, float *out, int64_t ldo, float *work) {
    const flash_state f = flash_init(nq, hd, work);
    for (int64_t kb = 0; kb < nk; kb += ATT_BK) {
        int bk = (int)CK_MIN(ATT_BK, nk - kb);
        ck_sgemm(1, nq, bk, hd, 1.0f, q, hd, k + kb * ldkv, ldkv, 0.0f, f.S, bk);
        softmax_step(f.S, nq, bk, f.O, hd, f.mrow, f.lrow);
        ck_sgemm(0, nq, hd, bk, 1.0f, f.S, bk, v + kb * ldkv, ldkv, 1.0f, f.O, hd);
    }
    flash_finish(nq, hd, f.O, f.lrow, out, ldo);
}

/* Global attention reads one head's keys and values at a time, for every
 * block of queries: they are copied once per head into K [nk, hd] (rows) and
 * Vt, tiles of CK_FLASH_T_BK keys transposed ([hd][BK] each, contiguous; the
 * layout ck_flash_t takes). Read in place they are rows of 56 floats 3·D
 * apart (a page or more), which the prefetchers do not follow. */
static size_t kv_packed_floats(int64_t nk, int hd) {
    return (size_t)nk * hd + (size_t)((nk + CK_FLASH_T_BK - 1) / CK_FLASH_T_BK) * CK_FLASH_T_BK * hd;
}

/* The portable path on that layout (natural-base softmax, q scaled by
 * 1/sqrt(hd) only). */
static void flash_kvt(const float *q, int nq, const float *K, const float *Vt, int64_t nk, int hd, float *out,
                      int64_t ldo, float *work) {
    const flash_state f = flash_init(nq, hd, work);
    for (int64_t kb = 0; kb < nk; kb += CK_FLASH_T_BK) {
        int bk = (int)CK_MIN(CK_FLASH_T_BK, nk - kb);
        ck_sgemm(1, nq, bk, hd, 1.0f, q, hd, K + kb * hd, hd, 0.0f, f.S, bk);
        softmax_step(f.S, nq, bk, f.O, hd, f.mrow, f.lrow);
        ck_sgemm(1, nq, hd, bk, 1.0f, f.S, bk, Vt + kb * hd, CK_FLASH_T_BK, 1.0f, f.O, hd);
    }
    flash_finish(nq, hd, f.O, f.lrow, out, ldo);
}

static size_t att_work_floats(int hd) { return CK_MAX(flash_work(hd), ck_flash_t_work(ATT_BQ, hd)); }

/* q rows j of a head: max over s of rows (s*Tq + j) * stride (Unroll order:
 * the pooled 2x2 neighbours are Tq rows apart), times the softmax scale. */
static void gather_q(const float *q, int64_t row_stride, int64_t Tq, int qs, int64_t j0, int nq, int hd,
                     float scale, float *dst) {
    for (int i = 0; i < nq; i++) {
        float *d = dst + (int64_t)i * hd;
        const float *src = q + (j0 + i) * row_stride;
        memcpy(d, src, (size_t)hd * sizeof(float));
        for (int s = 1; s < qs; s++) {
            const float *o = src + (int64_t)s * Tq * row_stride;
            for (int e = 0; e < hd; e++) d[e] = o[e] > d[e] ? o[e] : d[e];
        }
        for (int e = 0; e < hd; e++) d[e] *= scale;
    }
}

typedef struct {
    const float *qkv;
    int64_t N, Nq;
    int D, heads, hd, qs, nqb, h0, group;
    float scale;
    float *kv; /* packed K and V of heads h0.. */
    float *out;
    ck_cpu *be;
    /* qkv == NULL: q, k and v computed from xn [N, in] with W [3 * D, in], b,
     * and out += the heads' output . Wp^T (+ bp after the last group) */
    const float *xn, *W, *b, *Wp, *bp;
    int in;
    const ck_ln_map *ln; /* attention_qkv_map: xn is layernorm(ln) of a feature map */
} att_ctx;

/* Floats of a thread's scratch the flash work takes (after the q block). */
static size_t att_work_floats(int hd);

/* Where a thread's rows of xn computed from a map go (att_ctx.ln): after
 * the q block, the flash work and a head's output (attention_items_proj). */
static size_t att_ln_offset(int hd) { return (size_t)ATT_BQ * hd + att_work_floats(hd) + (size_t)ATT_BQ * hd; }

/* n rows of xn (from input_rows) . the columns of block `part` (0 q, 1 k,
 * 2 v) of head h of W^T + b into dst [n, hd] (rows ldd apart): the values
 * qkv's linear computes. */
static void qkv_rows(const att_ctx *c, int part, int h, const float *xn, int n, float *dst, int64_t ldd) {
    const int hd = c->hd;
    const int64_t col = (int64_t)part * c->D + (int64_t)h * hd;
    ck_sgemm(1, n, hd, c->in, 1.0f, xn, c->in, c->W + col * c->in, c->in, 0.0f, dst, ldd);
    add_bias_rows(dst, n, hd, ldd, c->b + col);
}

/* Items: (head in the group, tile of CK_FLASH_T_BK keys); k and v computed
 * from xn, v through the thread's scratch into its transposed tile. */
static void attention_pack_xn(void *p, int64_t i0, int64_t i1, int thread) {
    const att_ctx *c = p;
    const int64_t nt = (c->N + CK_FLASH_T_BK - 1) / CK_FLASH_T_BK;
    const int hd = c->hd;
    float *tmp = thread_scratch(c->be, thread); /* [CK_FLASH_T_BK, hd] <= the q block's ATT_BQ rows */
    for (int64_t it = i0; it < i1; it++) {
        const int g = (int)(it / nt), h = c->h0 + g;
        const int64_t t = it % nt, a = t * CK_FLASH_T_BK;
        const int n = (int)CK_MIN(CK_FLASH_T_BK, c->N - a);
        float *K = c->kv + g * kv_packed_floats(c->N, hd), *vt = K + c->N * hd + t * hd * CK_FLASH_T_BK;
        const float *xn = input_rows(c->xn, c->ln, a, n, c->in, tmp + att_ln_offset(hd));
        qkv_rows(c, 1, h, xn, n, K + a * hd, hd);
        qkv_rows(c, 2, h, xn, n, tmp, hd);
        for (int k = 0; k < n; k++)
            for (int d = 0; d < hd; d++) vt[(int64_t)d * CK_FLASH_T_BK + k] = tmp[(int64_t)k * hd + d];
    }
}

/* Items: (head in the group, chunk of 32 keys). */
static void attention_pack(void *p, int64_t i0, int64_t i1, int thread) {
    const att_ctx *c = p;
    const int64_t ld = 3 * (int64_t)c->D, nc = (c->N + 31) / 32;
    const int hd = c->hd;
    for (int64_t it = i0; it < i1; it++) {
        const int g = (int)(it / nc), h = c->h0 + g;
        const int64_t a = (it % nc) * 32, n = CK_MIN(32, c->N - a);
        float *K = c->kv + g * kv_packed_floats(c->N, hd), *Vt = K + c->N * hd;
        const float *src = c->qkv + a * ld + c->D + (int64_t)h * hd;
        for (int64_t k = 0; k < n; k++) {
            const int64_t key = a + k, t = key / CK_FLASH_T_BK;
            float *vt = Vt + t * hd * CK_FLASH_T_BK + (key - t * CK_FLASH_T_BK);
            memcpy(K + key * hd, src + k * ld, (size_t)hd * sizeof(float));
            for (int d = 0; d < hd; d++) vt[(int64_t)d * CK_FLASH_T_BK] = src[k * ld + c->D + d];
        }
    }
}

/* Items: blocks of ATT_BQ queries (qkv == NULL). Per block, each head of the
 * group in order: q from xn (the max over the qs pooled rows, scaled;
 * computed in work, free until the flash), the head's attention output [nq,
 * hd] in the thread's scratch, out's rows += that . the head's columns of
 * Wp^T; bp after the last head. Head by head, whatever the group size, so
 * every size of the scratch sums the same way. */
static void attention_items_proj(void *p, int64_t i0, int64_t i1, int thread) {
    const att_ctx *c = p;
    const int hd = c->hd, g = CK_MIN(c->group, c->heads - c->h0);
    float *qbuf = thread_scratch(c->be, thread);
    float *work = qbuf + (size_t)ATT_BQ * hd;
    float *ob = work + att_work_floats(hd);
    const int fast = ck_flash_t_available(0);
    const float scale = fast ? c->scale * 1.44269504088896341f : c->scale;
    for (int64_t it = i0; it < i1; it++) {
        const int64_t j0 = it * ATT_BQ;
        const int nq = (int)CK_MIN(ATT_BQ, c->Nq - j0);
        for (int gi = 0; gi < g; gi++) {
            const int h = c->h0 + gi;
            const float *K = c->kv + gi * kv_packed_floats(c->N, hd), *Vt = K + c->N * hd;
            for (int s = 0; s < c->qs; s++) {
                float *dst = s == 0 ? qbuf : work;
                const float *xn = input_rows(c->xn, c->ln, s * c->Nq + j0, nq, c->in, qbuf + att_ln_offset(hd));
                qkv_rows(c, 0, h, xn, nq, dst, hd);
                if (s > 0)
                    for (int64_t i = 0; i < (int64_t)nq * hd; i++) qbuf[i] = work[i] > qbuf[i] ? work[i] : qbuf[i];
            }
            for (int64_t i = 0; i < (int64_t)nq * hd; i++) qbuf[i] *= scale;
            if (fast)
                ck_flash_t(qbuf, nq, K, Vt, c->N, hd, ob, hd, work);
            else
                flash_kvt(qbuf, nq, K, Vt, c->N, hd, ob, hd, work);
            ck_sgemm(1, nq, c->D, hd, 1.0f, ob, hd, c->Wp + (int64_t)h * hd, c->D, 1.0f, c->out + j0 * c->D, c->D);
        }
        if (c->h0 + g >= c->heads) add_bias_rows(c->out + j0 * c->D, nq, c->D, c->D, c->bp);
    }
}

static void attention_items(void *p, int64_t i0, int64_t i1, int thread) {
    const att_ctx *c = p;
    float *qbuf = thread_scratch(c->be, thread);
    float *work = qbuf + (size_t)ATT_BQ * c->hd;
    const int64_t ld = 3 * (int64_t)c->D;
    const int fast = ck_flash_t_available(0);
    /* the fast path's softmax is exp2: log2(e) goes into the query scale */
    const float scale = fast ? c->scale * 1.44269504088896341f : c->scale;
    for (int64_t it = i0; it < i1; it++) {
        int g = (int)(it / c->nqb), h = c->h0 + g;
        int64_t j0 = (it % c->nqb) * ATT_BQ;
        int nq = (int)CK_MIN(ATT_BQ, c->Nq - j0);
        const float *K = c->kv + g * kv_packed_floats(c->N, c->hd), *Vt = K + c->N * c->hd;
        float *o = c->out + j0 * c->D + (int64_t)h * c->hd;
        gather_q(c->qkv + (int64_t)h * c->hd, ld, c->Nq, c->qs, j0, nq, c->hd, scale, qbuf);
        if (fast)
            ck_flash_t(qbuf, nq, K, Vt, c->N, c->hd, o, c->D, work);
        else
            flash_kvt(qbuf, nq, K, Vt, c->N, c->hd, o, c->D, work);
    }
}

/* Heads in groups whose packed K and V fit the shared scratch (the refiner's
 * conv bands, idle during the encoder; sized for at least one head). */
static void attention_run(att_ctx c, ck_cpu *be) {
    const int64_t N = c.N;
    const int heads = c.heads;
    c.nqb = (int)((c.Nq + ATT_BQ - 1) / ATT_BQ);
    c.scale = 1.0f / sqrtf((float)c.hd);
    c.kv = be->shared;
    const size_t per_head = kv_packed_floats(N, c.hd);
    const int group = (int)CK_MAX(1, CK_MIN((size_t)heads, be->shared_floats / per_head));
    c.group = group;
    for (c.h0 = 0; c.h0 < heads; c.h0 += group) {
        const int g = CK_MIN(group, heads - c.h0);
        if (c.qkv) {
            ck_pool_for(be->pool, (int64_t)g * ((N + 31) / 32), 4, attention_pack, &c);
            ck_pool_for(be->pool, (int64_t)g * c.nqb, 1, attention_items, &c);
        } else {
            ck_pool_for(be->pool, (int64_t)g * ((N + CK_FLASH_T_BK - 1) / CK_FLASH_T_BK), 1, attention_pack_xn, &c);
            ck_pool_for(be->pool, c.nqb, 1, attention_items_proj, &c);
        }
    }
}

static void cpu_attention(ck_cpu *be, const float *qkv, int64_t N, int D, int heads, int qs, float *out) {
    att_ctx c = {qkv, N, N / qs, D, heads, D / heads, qs, 0, 0, 0, 0, NULL, out, be, NULL, NULL, NULL, NULL, NULL, 0, NULL};
    attention_run(c, be);
}

/* The same with q, k and v computed from xn as they are needed (no [N, 3 D]
 * qkv): each head's k and v once, into the packed layout; q per block of
 * queries; and attn.proj applied per block of queries and head, out += att_h
 * . Wp_h^T for each head, then bp (no [N/qs, D] attention output).
 * ck_schedule.qkv_streamed. */
static void cpu_attention_qkv(ck_cpu *be, const float *xn, int64_t N, int in, const float *W, const float *b, int D,
                              int heads, int qs, const float *Wp, const float *bp, float *out) {
    att_ctx c = {NULL, N, N / qs, D, heads, D / heads, qs, 0, 0, 0, 0, NULL, out, be, xn, W, b, Wp, bp, in, NULL};
    attention_run(c, be);
}

/* The same with xn = layernorm(ln) of a feature map, each run of rows
 * normalized as it is read (ck_ops.attention_qkv_map). */
static void cpu_attention_qkv_map(ck_cpu *be, const ck_ln_map *ln, int64_t N, int in, const float *W, const float *b,
                                  int D, int heads, int qs, const float *Wp, const float *bp, float *out) {
    att_ctx c = {NULL, N, N / qs, D, heads, D / heads, qs, 0, 0, 0, 0, NULL, out, be, NULL, W, b, Wp, bp, in, ln};
    attention_run(c, be);
}

/* Mask-unit block: per chunk of windows, gather the window's tokens
 * (token t of window w sits at row t*nw + w), layernorm, project, attend
 * within the window, project back, add the residual, scatter. */
typedef struct {
    const ck_block_info *bi;
    blk32 w;
    const float *x;
    float *xo;
    int64_t N, nw;
    int T, Tq, cw;
    ck_cpu *be;
    int map_H, map_k; /* map_H > 0: x is the feature map [map_H, map_H, dim] that
                       * reroll makes of the tokens (map_k strides) */
} mu_ctx;

/* Where unrolled token row r (row t * nw + w: token t of window w) sits in x:
 * r itself, or its place in the feature map. */
static inline int64_t mu_src_row(const mu_ctx *c, int64_t r) {
    return c->map_H <= 0 ? r : map_row(r, c->map_H, c->map_k);
}

static void mu_windows(void *p, int64_t w0, int64_t w1, int thread) {
    const mu_ctx *c = p;
    const int D = c->bi->dim, Do = c->bi->dim_out, qs = c->bi->q_stride, heads = c->bi->heads;
    const int hd = Do / heads, T = c->T, Tq = c->Tq;
    const int expand = D != Do;
    const float scale = 1.0f / sqrtf((float)hd);
    float *xn = thread_scratch(c->be, thread);
    float *qkv = xn + (size_t)c->cw * T * D;
    float *pr = qkv + (size_t)c->cw * T * 3 * Do;
    float *res = pr + (expand ? (size_t)c->cw * T * Do : 0);
    float *att = res + (size_t)c->cw * Tq * Do;
    float *qbuf = att + (size_t)c->cw * Tq * Do;
    float *work = qbuf + (size_t)ATT_BQ * hd;
    for (int64_t wb = w0; wb < w1; wb += c->cw) {
        int nwin = (int)CK_MIN(c->cw, w1 - wb);
        int rows = nwin * T, qrows = nwin * Tq;
        for (int wi = 0; wi < nwin; wi++)
            for (int t = 0; t < T; t++)
                layernorm_row(c->x + mu_src_row(c, (int64_t)t * c->nw + wb + wi) * D, D, c->w.norm1_w, c->w.norm1_b,
                              xn + ((int64_t)wi * T + t) * D);
        ck_sgemm(1, rows, 3 * Do, D, 1.0f, xn, D, c->w.qkv_w, D, 0.0f, qkv, 3 * Do);
        add_bias_rows(qkv, rows, 3 * Do, 3 * Do, c->w.qkv_b);
        if (expand) {
            /* residual = maxpool_q(proj(xn)): the pooled tokens are Tq apart */
            ck_sgemm(1, rows, Do, D, 1.0f, xn, D, c->w.proj_w, D, 0.0f, pr, Do);
            for (int wi = 0; wi < nwin; wi++)
                for (int j = 0; j < Tq; j++) {
                    float *r = res + ((int64_t)wi * Tq + j) * Do;
                    const float *s0 = pr + ((int64_t)wi * T + j) * Do;
                    memcpy(r, s0, (size_t)Do * sizeof(float));
                    for (int s = 1; s < qs; s++) {
                        const float *o = s0 + (int64_t)s * Tq * Do;
                        for (int e = 0; e < Do; e++) r[e] = o[e] > r[e] ? o[e] : r[e];
                    }
                    for (int e = 0; e < Do; e++) r[e] += c->w.proj_b[e];
                }
        } else {
            for (int wi = 0; wi < nwin; wi++)
                for (int t = 0; t < T; t++)
                    memcpy(res + ((int64_t)wi * T + t) * Do, c->x + mu_src_row(c, (int64_t)t * c->nw + wb + wi) * D,
                           (size_t)Do * sizeof(float));
        }
        for (int wi = 0; wi < nwin; wi++) {
            const float *wq = qkv + (int64_t)wi * T * 3 * Do;
            for (int h = 0; h < heads; h++) {
                for (int j0 = 0; j0 < Tq; j0 += ATT_BQ) {
                    int nq = CK_MIN(ATT_BQ, Tq - j0);
                    gather_q(wq + (int64_t)h * hd, 3 * Do, Tq, qs, j0, nq, hd, scale, qbuf);
                    flash(qbuf, nq, wq + Do + (int64_t)h * hd, wq + 2 * Do + (int64_t)h * hd, 3 * Do, T, hd,
                          att + ((int64_t)wi * Tq + j0) * Do + (int64_t)h * hd, Do, work);
                }
            }
        }
        ck_sgemm(1, qrows, Do, Do, 1.0f, att, Do, c->w.attn_proj_w, Do, 1.0f, res, Do);
        add_bias_rows(res, qrows, Do, Do, c->w.attn_proj_b);
        for (int wi = 0; wi < nwin; wi++)
            for (int j = 0; j < Tq; j++)
                memcpy(c->xo + ((int64_t)j * c->nw + wb + wi) * Do, res + ((int64_t)wi * Tq + j) * Do,
                       (size_t)Do * sizeof(float));
    }
}

static int mu_chunk(const ck_block_info *bi) {
    int T = bi->window * bi->q_stride;
    int cw = MU_ROWS / T;
    return cw < 1 ? 1 : cw;
}

static void cpu_mask_unit_attention(ck_cpu *be, const ck_block_info *bi, const ck_block_w *w, const float *x,
                                    int64_t N, float *xo) {
    mu_ctx c = {bi, block_f32(w), x, xo, N, 0, bi->window * bi->q_stride, bi->window, mu_chunk(bi), be, 0, 0};
    c.nw = N / c.T;
    ck_pool_for(be->pool, c.nw, c.cw, mu_windows, &c);
}

/* The same block reading its input from the feature map [H, H, dim] that
 * reroll(x, H, H, k) made (ck_schedule.transition_from_map). */
static void cpu_mask_unit_attention_map(ck_cpu *be, const ck_block_info *bi, const ck_block_w *w, const float *map,
                                        int H, int k, int64_t N, float *xo) {
    mu_ctx c = {bi, block_f32(w), map, xo, N, 0, bi->window * bi->q_stride, bi->window, mu_chunk(bi), be, H, k};
    c.nw = N / c.T;
    ck_pool_for(be->pool, c.nw, c.cw, mu_windows, &c);
}

/* -------------------------------------------------------- unroll/reroll */

/* Unrolled index of spatial token (y, x) on an H x W grid with k pending 2x2
 * strides (timm Unroll): the stride digits (sy, sx) of the finest level are
 * the most significant, then the coarse raster position. */
static inline int64_t unroll_index(int y, int x, int H, int W, int k) {
    int64_t outer = 0;
    for (int i = 0; i < k; i++) outer = outer * 4 + (((y >> i) & 1) * 2 + ((x >> i) & 1));
    int Hc = H >> k, Wc = W >> k;
    return outer * ((int64_t)Hc * Wc) + (int64_t)(y >> k) * Wc + (x >> k);
}

typedef struct {
    const float *tokens;
    int H, W, k, C;
    float *feat;
} reroll_ctx;

static void reroll_rows(void *p, int64_t y0, int64_t y1, int thread) {
    const reroll_ctx *c = p;
    for (int64_t y = y0; y < y1; y++)
        for (int x = 0; x < c->W; x++)
            memcpy(c->feat + (y * c->W + x) * c->C,
                   c->tokens + unroll_index((int)y, x, c->H, c->W, c->k) * c->C, (size_t)c->C * sizeof(float));
}

static void cpu_reroll(ck_cpu *be, const float *tokens, int H, int W, int k, int C, float *feat) {
    reroll_ctx c = {tokens, H, W, k, C, feat};
    ck_pool_for(be->pool, H, 1, reroll_rows, &c);
}

/* The bitmap's 32-bit words reroll_inplace takes of thread 0's scratch
 * (one bit a row), then a row of C floats. */
static size_t reroll_inplace_floats(int64_t rows, int C) { return (size_t)(rows + 31) / 32 + (size_t)C; }

/* The same permutation in place (ck_schedule.reroll_in_place): map row d =
 * y * W + x takes token row unroll_index(y, x); each cycle of the
 * permutation is followed once, its first row held aside. Rows are copied,
 * not computed: the values reroll writes. */
static void cpu_reroll_inplace(ck_cpu *be, float *buf, int H, int W, int k, int C) {
    const int64_t n = (int64_t)H * W;
    uint32_t *done = (uint32_t *)(void *)thread_scratch(be, 0);
    float *row = thread_scratch(be, 0) + (n + 31) / 32;
    const size_t rb = (size_t)C * sizeof(float);
    memset(done, 0, (size_t)(n + 31) / 32 * sizeof(uint32_t));
    for (int64_t d0 = 0; d0 < n; d0++) {
        if (done[d0 >> 5] >> (d0 & 31) & 1) continue;
        done[d0 >> 5] |= 1u << (d0 & 31);
        int64_t cur = d0, src = unroll_index((int)(cur / W), (int)(cur % W), H, W, k);
        if (src == d0) continue;
        memcpy(row, buf + d0 * C, rb);
        while (src != d0) {
            memcpy(buf + cur * C, buf + src * C, rb);
            cur = src;
            done[cur >> 5] |= 1u << (cur & 31);
            src = unroll_index((int)(cur / W), (int)(cur % W), H, W, k);
        }
        memcpy(buf + cur * C, row, rb);
    }
}

/* ---------------------------------------------------------- patch embed */

typedef struct {
    const ck_config *cfg;
    const float *w, *b; /* patch_w, patch_b */
    const float *x, *pos;
    int x_r0, x_rows; /* x holds image rows [x_r0, x_r0 + x_rows) of each plane */
    int S, k;
    int ybase, H; /* the tokens are rows [ybase, ybase + H) of the grid, unrolled as H x G */
    float *tokens;
    ck_cpu *be;
} pe_ctx;

static void pe_rows(void *p, int64_t y0, int64_t y1, int thread) {
    const pe_ctx *c = p;
    const ck_config *cf = c->cfg;
    const int S = c->S, G = S / cf->patch_stride, E = cf->embed_dim, K = cf->patch_kernel;
    const int Ci = cf->in_chans, KK = Ci * K * K, st = cf->patch_stride, pad = cf->patch_pad;
    float *col = thread_scratch(c->be, thread);
    float *out = col + (size_t)G * KK;
    float *prow = out + (size_t)G * E; /* pos_streamed: row y of the resized pos-embed */
    const int stream = G != cf->pos_grid && c->be->cfg.sched.pos_streamed;
    for (int64_t y = c->ybase + y0; y < c->ybase + y1; y++) {
        if (stream) ck_pos_embed_resize_rows(c->pos, cf->pos_grid, E, prow, G, (int)y, (int)y + 1);
        for (int xo = 0; xo < G; xo++) {
            float *cr = col + (int64_t)xo * KK;
            for (int ci = 0; ci < Ci; ci++)
                for (int ky = 0; ky < K; ky++) {
                    int iy = (int)y * st - pad + ky;
                    float *d = cr + (ci * K + ky) * K;
                    if (iy < 0 || iy >= S) {
                        memset(d, 0, (size_t)K * sizeof(float));
                        continue;
                    }
                    const float *row = c->x + ((int64_t)ci * c->x_rows + iy - c->x_r0) * S;
                    for (int kx = 0; kx < K; kx++) {
                        int ix = xo * st - pad + kx;
                        d[kx] = (ix >= 0 && ix < S) ? row[ix] : 0.0f;
                    }
                }
        }
        ck_sgemm(1, G, E, KK, 1.0f, col, KK, c->w, KK, 0.0f, out, E);
        for (int xo = 0; xo < G; xo++) {
            const float *o = out + (int64_t)xo * E;
            const float *pe = stream ? prow + (int64_t)xo * E : c->pos + (y * G + xo) * E;
            float *t = c->tokens + unroll_index((int)y - c->ybase, xo, c->H, G, c->k) * E;
            for (int e = 0; e < E; e++) t[e] = o[e] + c->b[e] + pe[e];
        }
    }
}

static void cpu_patch_embed(ck_cpu *be, const ck_config *cfg, const float *w, const float *b, const float *x, int S,
                            const float *pos, int k, float *tokens) {
    pe_ctx c = {cfg, w, b, x, pos, 0, S, S, k, 0, S / cfg->patch_stride, tokens, be};
    ck_pool_for(be->pool, S / cfg->patch_stride, 1, pe_rows, &c);
}

/* Token rows [y0, y0 + n) alone, unrolled as an n x G image (n and y0
 * multiples of 2^k: whole mask units). */
static void cpu_patch_embed_rows(ck_cpu *be, const ck_config *cfg, const float *w, const float *b, const float *x,
                                 int x_r0, int x_rows, int S, const float *pos, int k, int y0, int n, float *tokens) {
    pe_ctx c = {cfg, w, b, x, pos, x_r0, x_rows, S, k, y0, n, tokens, be};
    ck_pool_for(be->pool, n, 1, pe_rows, &c);
}

/* -------------------------------------------------------------- decoder */

/* Bilinear source taps, align_corners=False (PyTorch upsample_bilinear2d). */
typedef struct {
    int i0, i1;
    float l0, l1;
} tap2;

static inline tap2 bilinear_tap(int dst, int in, int out) {
    float scale = (float)in / (float)out;
    float src = scale * ((float)dst + 0.5f) - 0.5f;
    if (src < 0) src = 0;
    tap2 t;
    t.i0 = (int)src;
    t.i1 = t.i0 + (t.i0 < in - 1 ? 1 : 0);
    t.l1 = src - (float)t.i0;
    t.l0 = 1.0f - t.l1;
    return t;
}

typedef struct {
    int D2;
    const float *w0, *b0, *cls_w, *cls_b; /* scale_w[0], scale_b[0], the classifier */
    const float *c1; /* rows c1_r0.. of c1 */
    int c1_r0, G, C1;
    const float *const *P;
    const int *Hk;
    const int *r0; /* P[s] holds rows r0[s].. of scale s */
    int y0;        /* the first output row */
    float *logits;
    ck_cpu *be;
} dec_ctx;

static void dec_rows(void *p, int64_t y0, int64_t y1, int thread) {
    const dec_ctx *c = p;
    const int G = c->G, D2 = c->D2;
    float *h = thread_scratch(c->be, thread);
    float *lg = h + (size_t)G * D2;
    for (int64_t y = c->y0 + y0; y < c->y0 + y1; y++) {
        ck_sgemm(1, G, D2, c->C1, 1.0f, c->c1 + (y - c->c1_r0) * G * c->C1, c->C1, c->w0, c->C1, 0.0f, h, D2);
        for (int s = 0; s < 3; s++) {
            const int Hs = c->Hk[s];
            const float *P = c->P[s] - (int64_t)c->r0[s] * Hs * D2;
            tap2 ty = bilinear_tap((int)y, Hs, G);
            for (int x = 0; x < G; x++) {
                tap2 tx = bilinear_tap(x, Hs, G);
                const float *p00 = P + ((int64_t)ty.i0 * Hs + tx.i0) * D2;
                const float *p01 = P + ((int64_t)ty.i0 * Hs + tx.i1) * D2;
                const float *p10 = P + ((int64_t)ty.i1 * Hs + tx.i0) * D2;
                const float *p11 = P + ((int64_t)ty.i1 * Hs + tx.i1) * D2;
                float *hr = h + (int64_t)x * D2;
                for (int e = 0; e < D2; e++)
                    hr[e] += ty.l0 * (tx.l0 * p00[e] + tx.l1 * p01[e]) + ty.l1 * (tx.l0 * p10[e] + tx.l1 * p11[e]);
            }
        }
        const float *b1 = c->b0;
        for (int x = 0; x < G; x++) {
            float *hr = h + (int64_t)x * D2;
            for (int e = 0; e < D2; e++) {
                float v = hr[e] + b1[e];
                hr[e] = v > 0 ? v : 0;
            }
        }
        ck_sgemm(1, G, 4, D2, 1.0f, h, D2, c->cls_w, D2, 0.0f, lg, 4);
        for (int x = 0; x < G; x++)
            for (int o = 0; o < 4; o++)
                c->logits[((int64_t)o * G + y) * G + x] = lg[x * 4 + o] + c->cls_b[o];
    }
}

/* Rows [y0, y0 + n) of the logits; c1 holds the map's rows c1_r0.., P[s]
 * scale s's rows r0[s].. */
static void cpu_decoder_fuse_rows(ck_cpu *be, const ck_config *cfg, const ck_decoder_w *w, const float *c1, int c1_r0,
                                  int H1, int C1, const float *const P[3], const int Hk[3], const int r0[3], int y0,
                                  int n, float *logits) {
    dec_ctx c = {2 * cfg->dec_dim, ck_wf32(w->scale_w[0]), ck_wf32(w->scale_b[0]), ck_wf32(w->cls_w), ck_wf32(w->cls_b),
                 c1, c1_r0, H1, C1, P, Hk, r0, y0, logits, be};
    ck_pool_for(be->pool, n, 1, dec_rows, &c);
}

static void cpu_decoder_fuse(ck_cpu *be, const ck_config *cfg, const ck_decoder_w *w, const float *c1, int H1,
                             int C1, const float *const P[3], const int Hk[3], float *logits) {
    static const int r0[3] = {0, 0, 0};
    cpu_decoder_fuse_rows(be, cfg, w, c1, 0, H1, C1, P, Hk, r0, 0, H1, logits);
}

/* ------------------------------------------------------------- refiner */

typedef struct {
    const float *x, *logits;
    int S;
    float *out;
    int mode; /* 0: refiner input, 1: finalize */
    int y0, n; /* the rows of out: [y0, y0 + n) (whole images: 0, S) */
} up_ctx;

static void up_rows(void *p, int64_t r0, int64_t r1, int thread) {
    const up_ctx *c = p;
    const int S = c->S, G = S / 4;
    const int64_t plane = (int64_t)c->n * S;
    for (int64_t r = r0; r < r1; r++) {
        int ch = (int)(r / c->n), y = c->y0 + (int)(r % c->n);
        const float *L = c->logits + (int64_t)ch * G * G;
        tap2 ty = bilinear_tap(y, G, S);
        const float *l0 = L + (int64_t)ty.i0 * G, *l1 = L + (int64_t)ty.i1 * G;
        float *dst = c->out + (c->mode == 0 ? 3 * plane : 0) + (int64_t)ch * plane + (int64_t)(y - c->y0) * S;
        for (int x = 0; x < S; x++) {
            tap2 tx = bilinear_tap(x, G, S);
            float v = ty.l0 * (tx.l0 * l0[tx.i0] + tx.l1 * l0[tx.i1]) + ty.l1 * (tx.l0 * l1[tx.i0] + tx.l1 * l1[tx.i1]);
            dst[x] = c->mode == 0 ? sigmoidf(v) : sigmoidf(v + dst[x]);
        }
    }
}

static void cpu_refiner_input(ck_cpu *be, const float *x, const float *logits, int S, float *rin) {
    memcpy(rin, x, (size_t)3 * S * S * sizeof(float));
    up_ctx c = {x, logits, S, rin, 0, 0, S};
    ck_pool_for(be->pool, 4 * (int64_t)S, 8, up_rows, &c);
}

/* rin [7, n, S]: rows [y0, y0 + n) of the refiner input; x holds rows
 * x_r0.. of the input, planes x_rows rows apart */
static void cpu_refiner_input_rows(ck_cpu *be, const float *x, int x_r0, int x_rows, const float *logits, int S,
                                   int y0, int n, float *rin) {
    for (int ch = 0; ch < 3; ch++)
        memcpy(rin + (int64_t)ch * n * S, x + ((int64_t)ch * x_rows + y0 - x_r0) * S, (size_t)n * S * sizeof(float));
    up_ctx c = {x, logits, S, rin, 0, y0, n};
    ck_pool_for(be->pool, 4 * (int64_t)n, 8, up_rows, &c);
}

static void cpu_finalize(ck_cpu *be, const float *logits, int S, float *out) {
    up_ctx c = {NULL, logits, S, out, 1, 0, S};
    ck_pool_for(be->pool, 4 * (int64_t)S, 8, up_rows, &c);
}

/* ---- refiner: channels-last maps [S*S, C], convolutions as implicit GEMM.
 * Each 3x3 tap is a GEMM of a run of contiguous input pixels [n, Cin] with
 * that tap's weights [Cout, Cin]: no im2col copy. Out-of-image taps simply
 * skip the pixels they would read from outside (zero padding). */

/* Per-group sum and sum of squares of a channels-last tile [n, C] into st
 * (double lanes; GroupNorm statistics span 2^22+ values per group). */
VEC static void tile_moments(const float *restrict v, int64_t n, int C, int cpg, double *restrict st) {
    double s[64] = {0}, q[64] = {0}; /* per channel, C <= 64 on this path */
    for (int64_t p = 0; p < n; p++) {
        const float *r = v + p * C;
        for (int c = 0; c < C; c++) {
            s[c] += r[c];
            q[c] += (double)r[c] * r[c];
        }
    }
    for (int c = 0; c < C; c++) {
        st[2 * (c / cpg)] += s[c];
        st[2 * (c / cpg) + 1] += q[c];
    }
}

typedef struct {
    const float *in, *W, *bias;
    const float *wt;     /* weights packed by ck_conv3x3_pack (map input) */
    int Cin, S, dil, Cout, groups, image_in;
    float *out;          /* destination rows [.., S, Cout] */
    int64_t row0;        /* first image row held by the destination */
    ck_cpu *be;
    int64_t in_r0, in_n; /* image rows held by in: [in_r0, in_r0 + in_n) */
} conv_ctx;

/* Per-thread stats live at the end of each thread's scratch. */
static double *thread_stats(ck_cpu *be, int thread, int groups) {
    float *end = thread_scratch(be, thread) + be->per_thread;
    return (double *)(void *)(end - 4 * groups);
}

static void conv_rows(void *p, int64_t y0, int64_t y1, int thread) {
    const conv_ctx *c = p;
    const int S = c->S, Cin = c->Cin, Co = c->Cout, d = c->dil;
    float *col = thread_scratch(c->be, thread);
    double *st = thread_stats(c->be, thread, c->groups);
    const int cpg = Co / c->groups;
    /* Column stripes outermost: consecutive rows of a stripe reuse the same
     * input rows while they are still in this core's cache. */
    for (int x0 = 0; x0 < S; x0 += CONV_TILE) {
        const int n = CK_MIN(CONV_TILE, S - x0);
        for (int64_t y = y0; y < y1; y++) {
            float *dst = c->out + ((y - c->row0) * S + x0) * Co;
            if (c->image_in) {
                /* stem: [Cin, S, S] image -> rows of (ci, ky, kx) per pixel, one GEMM */
                const int K = Cin * 9;
                for (int i = 0; i < n; i++) {
                    float *r = col + (int64_t)i * K;
                    for (int ci = 0; ci < Cin; ci++)
                        for (int ky = 0; ky < 3; ky++) {
                            const int64_t iy = y + (ky - 1) * d;
                            for (int kx = 0; kx < 3; kx++) {
                                const int ix = x0 + i + (kx - 1) * d;
                                r[ci * 9 + ky * 3 + kx] =
                                    (iy >= c->in_r0 && iy < c->in_r0 + c->in_n && ix >= 0 && ix < S)
                                        ? c->in[((int64_t)ci * c->in_n + iy - c->in_r0) * S + ix] : 0.0f;
                            }
                        }
                }
                ck_sgemm(1, n, Co, K, 1.0f, col, K, c->W, K, 0.0f, dst, Co);
                add_bias_rows(dst, n, Co, Co, c->bias);
            } else {
                ck_conv3x3_row(0, c->in, S, c->in_r0, c->in_n, Cin, d, y, x0, n, c->wt, Co, c->bias, dst);
            }
            tile_moments(dst, n, Co, cpg, st);
        }
    }
}

static void conv_rows_offset(void *p, int64_t a, int64_t b, int thread) {
    const conv_ctx *c = p;
    conv_rows(p, a + c->row0, b + c->row0, thread);
}

typedef struct {
    float *x;
    const float *y, *a, *b, *pa, *pb;
    int C;
} aff_ctx;

/* x = relu(a*x + b) or, with y, relu(x' + a*y + b), x' = x or, with pa / pb,
 * relu(pa*x + pb); channels-last [n, C]. */
VEC static void affine_pixels(void *p, int64_t p0, int64_t p1, int thread) {
    const aff_ctx *c = p;
    const int C = c->C;
    const float *restrict a = c->a, *restrict b = c->b;
    float *restrict x = c->x + p0 * C;
    const int64_t n = (p1 - p0) * C;
    if (c->y && c->pa) {
        const float *restrict y = c->y + p0 * C, *restrict pa = c->pa, *restrict pb = c->pb;
        for (int64_t i = 0; i < n; i += C)
            for (int ch = 0; ch < C; ch++) {
                const float u = pa[ch] * x[i + ch] + pb[ch];
                float v = (u > 0 ? u : 0) + (a[ch] * y[i + ch] + b[ch]);
                x[i + ch] = v > 0 ? v : 0;
            }
    } else if (c->y) {
        const float *restrict y = c->y + p0 * C;
        for (int64_t i = 0; i < n; i += C)
            for (int ch = 0; ch < C; ch++) {
                float v = x[i + ch] + (a[ch] * y[i + ch] + b[ch]);
                x[i + ch] = v > 0 ? v : 0;
            }
    } else {
        for (int64_t i = 0; i < n; i += C)
            for (int ch = 0; ch < C; ch++) {
                float v = a[ch] * x[i + ch] + b[ch];
                x[i + ch] = v > 0 ? v : 0;
            }
    }
}

static void cpu_affine_relu(ck_cpu *be, float *x, int C, int64_t HW, const float *a, const float *b) {
    aff_ctx c = {x, NULL, a, b, NULL, NULL, C};
    ck_pool_for(be->pool, HW, 4096, affine_pixels, &c);
}

static void cpu_residual_affine_relu(ck_cpu *be, float *x, const float *y, int C, int64_t HW,
                                     const float *a, const float *b, const float *pre_a, const float *pre_b) {
    aff_ctx c = {x, y, a, b, pre_a, pre_b, C};
    ck_pool_for(be->pool, HW, 4096, affine_pixels, &c);
}

typedef struct {
    float *dst;
    const float *src;
    int64_t n;
} copy_ctx;

static void copy_range(void *p, int64_t a, int64_t b, int thread) {
    const copy_ctx *c = p;
    memcpy(c->dst + a, c->src + a, (size_t)(b - a) * sizeof(float));
}

static void cpu_conv3x3(ck_cpu *be, const float *in, int image_in, int Cin, int S, int dil,
                        const float *W, const float *bias, const float *in_a, const float *in_b, float *out,
                        int Cout, int groups, double *stats) {
    const int T = be->threads;
    const int64_t HW = (int64_t)S * S;
    for (int t = 0; t < T; t++) memset(thread_stats(be, t, groups), 0, (size_t)2 * groups * sizeof(double));
    /* A pending GroupNorm + ReLU is applied to the input first (it is then
     * overwritten by this conv, or owned by the caller for that purpose). */
    if (in_a) cpu_affine_relu(be, (float *)in, Cin, HW, in_a, in_b);
    /* weights packed once per conv for ck_conv3x3_row */
    float *wt = be->shared;
    if (!image_in) ck_conv3x3_pack(Cout, Cin, W, wt);
    conv_ctx c = {in, W, bias, wt, Cin, S, dil, Cout, groups, image_in, out, 0, be, 0, S};
    if (out != in) {
        ck_pool_for(be->pool, S, 1, conv_rows, &c);
    } else {
        /* In place: band b goes to a side buffer; band b-1 is written back once
         * band b is done, since no later band reads above its own start - dil. */
        /* Bands of ~8 rows per thread: each worker then reads few input rows
         * beyond its own (dilation 8 adds 16), instead of 2 rows' work for
         * 18 rows read. */
        const int B = conv_band(be->threads, S);
        const size_t wpf = ck_conv3x3_packed_floats(Cout, Cin);
        float *band[2] = {be->shared + wpf, be->shared + wpf + (size_t)Cout * B * S};
        int nbands = (S + B - 1) / B;
        for (int b = 0; b <= nbands; b++) {
            if (b < nbands) {
                c.out = band[b & 1];
                c.row0 = (int64_t)b * B;
                int rows = CK_MIN(B, S - b * B);
                ck_pool_for(be->pool, rows, CK_MAX(1, rows / be->threads), conv_rows_offset, &c);
            }
            if (b > 0) {
                int pb = b - 1, rows = CK_MIN(B, S - pb * B);
                copy_ctx cc = {out + (int64_t)pb * B * S * Cout, band[pb & 1], (int64_t)rows * S * Cout};
                ck_pool_for(be->pool, cc.n, 65536, copy_range, &cc);
            }
        }
    }
    for (int t = 0; t < T; t++) {
        const double *st = thread_stats(be, t, groups);
        for (int g = 0; g < 2 * groups; g++) stats[g] += st[g];
    }
}

/* A band: in holds image rows [in_r0, in_r0 + in_n), out receives rows
 * [out_r0, out_r0 + out_n) (backend/ops.h conv3x3_rows). */
static void cpu_conv3x3_rows(ck_cpu *be, const float *in, int image_in, int Cin, int S, int dil, int in_r0,
                             int in_n, const float *W, const float *bias, float *out, int out_r0, int out_n, int Cout,
                             int groups, double *stats) {
    const int T = be->threads;
    for (int t = 0; t < T; t++) memset(thread_stats(be, t, groups), 0, (size_t)2 * groups * sizeof(double));
    float *wt = be->shared;
    if (!image_in) ck_conv3x3_pack(Cout, Cin, W, wt);
    conv_ctx c = {in, W, bias, wt, Cin, S, dil, Cout, groups, image_in, out, out_r0, be, in_r0, in_n};
    ck_pool_for(be->pool, out_n, CK_MAX(1, out_n / (4 * T)), conv_rows_offset, &c);
    if (!stats) return;
    for (int t = 0; t < T; t++) {
        const double *st = thread_stats(be, t, groups);
        for (int g = 0; g < 2 * groups; g++) stats[g] += st[g];
    }
}

typedef struct {
    const float *x, *W, *b;
    int C, Cout;
    int64_t HW; /* out's channel stride */
    float mult;
    float *out;
} pw_ctx;

/* channels-last x [HW, C] -> out [Cout, HW] (channel-major for the finalize) */
VEC static void pw_pixels(void *p, int64_t p0, int64_t p1, int thread) {
    const pw_ctx *c = p;
    for (int64_t q = p0; q < p1; q++) {
        const float *restrict x = c->x + q * c->C;
        for (int o = 0; o < c->Cout; o++) {
            const float *restrict w = c->W + (int64_t)o * c->C;
            float acc = 0;
            for (int ch = 0; ch < c->C; ch++) acc += w[ch] * x[ch];
            c->out[(int64_t)o * c->HW + q] = c->mult * (acc + c->b[o]);
        }
    }
}

static void cpu_pointwise_conv(ck_cpu *be, const float *x, const float *y, const float *ra, const float *rb,
                               int C, int64_t HW, const float *W, const float *b, float mult, float *out, int Cout) {
    if (y) cpu_residual_affine_relu(be, (float *)x, y, C, HW, ra, rb, NULL, NULL); /* x' into x */
    pw_ctx c = {x, W, b, C, Cout, HW, mult, out};
    ck_pool_for(be->pool, HW, 4096, pw_pixels, &c);
}

static void cpu_pointwise_conv_rows(ck_cpu *be, const float *x, int C, int S, int y0, int n, const float *W,
                                    const float *b, float mult, float *out, int out_r0, int out_rows, int Cout) {
    pw_ctx c = {x, W, b, C, Cout, (int64_t)out_rows * S, mult, out + (int64_t)(y0 - out_r0) * S};
    ck_pool_for(be->pool, (int64_t)n * S, 4096, pw_pixels, &c);
}

static void cpu_groupnorm_affine(ck_cpu *be, const double *stats, int groups, int C, int64_t HW,
                                 const float *gamma, const float *beta, float *a, float *b) {
    const int cpg = C / groups;
    const double n = (double)cpg * (double)HW;
    for (int g = 0; g < groups; g++) {
        double mean = stats[2 * g] / n;
        double var = stats[2 * g + 1] / n - mean * mean;
        if (var < 0) var = 0;
        double rstd = 1.0 / sqrt(var + 1e-5);
        for (int ch = g * cpg; ch < (g + 1) * cpg; ch++) {
            a[ch] = (float)(gamma[ch] * rstd);
            b[ch] = (float)(beta[ch] - mean * gamma[ch] * rstd);
        }
    }
}

static void cpu_zero_stats(ck_cpu *be, double *stats, int n) { memset(stats, 0, (size_t)n * sizeof(double)); }

void ck_cpu_scratch_floats(const ck_config *c, int S, int threads, const ck_schedule *sched, size_t *per_thread,
                           size_t *shared) {
    const int G = S / c->patch_stride;
    size_t need = (size_t)G * c->in_chans * c->patch_kernel * c->patch_kernel +
                  (size_t)G * c->embed_dim * (sched->pos_streamed ? 2 : 1);
    ck_block_info bi[CK_MAX_BLOCKS];
    ck_config_blocks(c, bi);
    int nb = ck_config_num_blocks(c);
    for (int i = 0; i < nb; i++) {
        const ck_block_info *b = &bi[i];
        const int D = b->dim, Do = b->dim_out, hd = Do / b->heads;
        size_t s;
        if (b->mask_unit_attn) {
            size_t cw = (size_t)mu_chunk(b), T = (size_t)b->window * b->q_stride, Tq = (size_t)b->window;
            s = cw * T * D + cw * T * 3 * Do + (D != Do ? cw * T * Do : 0) + 2 * cw * Tq * Do +
                (size_t)ATT_BQ * hd + flash_work(hd);
        } else {
            s = (size_t)ATT_BQ * hd + att_work_floats(hd);
            /* qkv_streamed: a head's output for a block of queries */
            if (sched->qkv_streamed) s += (size_t)ATT_BQ * hd;
            /* norm1_from_map: a block of xn's rows after it */
            if (sched->norm1_from_map) s = att_ln_offset(hd) + (size_t)ATT_BQ * D;
            if (D != Do) s = CK_MAX(s, (size_t)LIN_ROWS * Do + (sched->norm1_from_map ? (size_t)LIN_ROWS * D : 0));
        }
        need = CK_MAX(need, s);
        need = CK_MAX(need, (size_t)MLP_ROWS * (Do + (size_t)Do * c->mlp_ratio));
    }
    need = CK_MAX(need, (size_t)G * 2 * c->dec_dim + (size_t)G * 4);
    /* reroll_in_place: a bit per token of stage 1 and a row (the widest transition's) */
    if (sched->reroll_in_place) need = CK_MAX(need, reroll_inplace_floats((int64_t)G * G, 8 * c->embed_dim));
    size_t conv = (size_t)7 * 9 * CONV_TILE; /* the stem's pixel rows */
    need = CK_MAX(need, conv);
    need += 4 * (size_t)c->ref_groups; /* per-thread GroupNorm partial sums (doubles) */
    need = (need + 15) / 16 * 16;      /* keep each thread's slice 64-byte aligned */
    *per_thread = need;
    /* packed conv weights, and the whole-map schedule's in-place conv bands */
    *shared = ck_conv3x3_packed_floats(c->ref_dim, c->ref_dim) +
              (sched->refiner_band ? 0 : 2 * (size_t)c->ref_dim * conv_band(threads, S) * S);
    /* global attention: at least one head's packed keys and values */
    int64_t tokens = (int64_t)G * G; /* keys of block i: its input tokens */
    for (int i = 0; i < nb; i++) {
        const int D = bi[i].dim, Do = bi[i].dim_out, hidden = Do * c->mlp_ratio;
        if (!bi[i].mask_unit_attn) *shared = CK_MAX(*shared, kv_packed_floats(tokens, Do / bi[i].heads));
        tokens /= bi[i].q_stride;
        /* packed weights: qkv, attn.proj, fc1 + fc2, the decoder's projection of this width */
        *shared = CK_MAX(*shared, packed_w_floats(3 * Do, D));
        *shared = CK_MAX(*shared, packed_w_floats(Do, Do));
        *shared = CK_MAX(*shared, packed_w_floats(hidden, Do) + packed_w_floats(Do, hidden));
        *shared = CK_MAX(*shared, packed_w_floats(2 * c->dec_dim, Do));
    }
}

/* ---------------------------------------------------------- the table */

/* The table's entries: typed views in, fp32 pointers to the functions above
 * (every CPU tensor and weight is fp32; ck_f32 aborts on any other type). */
#define CPU(b) ((ck_cpu *)(void *)(b))
#define F(t) ck_f32(t)
#define WF(w) ck_wf32(w)

static void t_read(ck_backend *be, ck_tensor t, int64_t n, float *host) {
    memcpy(host, F(t), (size_t)n * sizeof(float));
}
static void t_write(ck_backend *be, ck_tensor t, int64_t n, const float *host) {
    memcpy(F(t), host, (size_t)n * sizeof(float));
}
static void t_patch_embed(ck_backend *be, const ck_config *c, ck_weight w, ck_weight b, ck_tensor x, int S,
                          ck_weight pos, int k, ck_tensor tokens) {
    cpu_patch_embed(CPU(be), c, WF(w), WF(b), F(x), S, WF(pos), k, F(tokens));
}
static void t_patch_embed_rows(ck_backend *be, const ck_config *c, ck_weight w, ck_weight b, ck_tensor x, int x_r0,
                               int x_rows, int S, ck_weight pos, int k, int y0, int n, ck_tensor tokens) {
    cpu_patch_embed_rows(CPU(be), c, WF(w), WF(b), F(x), x_r0, x_rows, S, WF(pos), k, y0, n, F(tokens));
}
static void t_copy_rows(ck_backend *be, ck_tensor src, int64_t ss, int64_t so, ck_tensor dst, int64_t ds,
                        int64_t do_, int parts, int64_t n, int C) {
    for (int p = 0; p < parts; p++)
        memmove(F(dst) + (p * ds + do_) * C, F(src) + (p * ss + so) * C, (size_t)(n * C) * sizeof(float));
}
static void t_mask_unit_attention(ck_backend *be, const ck_block_info *bi, const ck_block_w *w, ck_tensor x,
                                  int64_t N, ck_tensor xo) {
    cpu_mask_unit_attention(CPU(be), bi, w, F(x), N, F(xo));
}
static void t_mask_unit_attention_map(ck_backend *be, const ck_block_info *bi, const ck_block_w *w, ck_tensor map,
                                      int H, int k, int64_t N, ck_tensor xo) {
    cpu_mask_unit_attention_map(CPU(be), bi, w, F(map), H, k, N, F(xo));
}
static void t_layernorm(ck_backend *be, ck_tensor x, int64_t N, int C, ck_weight g, ck_weight b, ck_tensor y) {
    cpu_layernorm(CPU(be), F(x), N, C, WF(g), WF(b), F(y));
}
static void t_layernorm_map(ck_backend *be, ck_tensor map, int H, int k, int64_t N, int C, ck_weight g, ck_weight b,
                            ck_tensor y) {
    cpu_layernorm_map(CPU(be), F(map), H, k, N, C, WF(g), WF(b), F(y));
}
static void t_linear(ck_backend *be, ck_tensor x, int64_t N, int in, ck_weight W, ck_weight b, ck_tensor y, int out,
                     int accumulate) {
    cpu_linear(CPU(be), F(x), N, in, WF(W), WF(b), F(y), out, accumulate);
}
static void t_linear_maxpool(ck_backend *be, ck_tensor x, int64_t N, int in, ck_weight W, ck_weight b, ck_tensor y,
                             int out, int qs) {
    cpu_linear_maxpool(CPU(be), F(x), N, in, WF(W), WF(b), F(y), out, qs);
}
static void t_attention(ck_backend *be, ck_tensor qkv, int64_t N, int D, int heads, int qs, ck_tensor out) {
    cpu_attention(CPU(be), F(qkv), N, D, heads, qs, F(out));
}
static void t_attention_qkv(ck_backend *be, ck_tensor xn, int64_t N, int in, ck_weight W, ck_weight b, int D,
                            int heads, int qs, ck_weight Wp, ck_weight bp, ck_tensor out) {
    cpu_attention_qkv(CPU(be), F(xn), N, in, WF(W), WF(b), D, heads, qs, WF(Wp), WF(bp), F(out));
}
static void t_linear_maxpool_map(ck_backend *be, const ck_ln_map *ln, int64_t N, int in, ck_weight W, ck_weight b,
                                 ck_tensor y, int out, int qs) {
    cpu_linear_maxpool_map(CPU(be), ln, N, in, WF(W), WF(b), F(y), out, qs);
}
static void t_attention_qkv_map(ck_backend *be, const ck_ln_map *ln, int64_t N, int in, ck_weight W, ck_weight b,
                                int D, int heads, int qs, ck_weight Wp, ck_weight bp, ck_tensor out) {
    cpu_attention_qkv_map(CPU(be), ln, N, in, WF(W), WF(b), D, heads, qs, WF(Wp), WF(bp), F(out));
}
static void t_mlp(ck_backend *be, ck_tensor x, int64_t N, int C, const ck_block_w *w, int hidden) {
    cpu_mlp(CPU(be), F(x), N, C, w, hidden);
}
static void t_reroll(ck_backend *be, ck_tensor tokens, int H, int W, int k, int C, ck_tensor feat) {
    cpu_reroll(CPU(be), F(tokens), H, W, k, C, F(feat));
}
static void t_reroll_inplace(ck_backend *be, ck_tensor x, int H, int W, int k, int C) {
    cpu_reroll_inplace(CPU(be), F(x), H, W, k, C);
}
static void t_decoder_fuse(ck_backend *be, const ck_config *c, const ck_decoder_w *w, ck_tensor c1, int H1, int C1,
                           const ck_tensor P[3], const int Hk[3], ck_tensor logits) {
    const float *const p[3] = {F(P[0]), F(P[1]), F(P[2])};
    cpu_decoder_fuse(CPU(be), c, w, F(c1), H1, C1, p, Hk, F(logits));
}
static void t_decoder_fuse_rows(ck_backend *be, const ck_config *c, const ck_decoder_w *w, ck_tensor c1, int c1_r0,
                                int H1, int C1, const ck_tensor P[3], const int Hk[3], const int r0[3], int y0, int n,
                                ck_tensor logits) {
    const float *const p[3] = {F(P[0]), F(P[1]), F(P[2])};
    cpu_decoder_fuse_rows(CPU(be), c, w, F(c1), c1_r0, H1, C1, p, Hk, r0, y0, n, F(logits));
}
static void t_refiner_input(ck_backend *be, ck_tensor x, ck_tensor logits, int S, ck_tensor rin) {
    cpu_refiner_input(CPU(be), F(x), F(logits), S, F(rin));
}
static void t_conv3x3(ck_backend *be, ck_tensor in, int in_is_image, int Cin, int S, int dil, ck_weight W,
                      ck_weight bias, const float *in_a, const float *in_b, ck_tensor out, int Cout, int groups,
                      double *stats) {
    cpu_conv3x3(CPU(be), F(in), in_is_image, Cin, S, dil, WF(W), WF(bias), in_a, in_b, F(out), Cout, groups, stats);
}
static void t_affine_relu(ck_backend *be, ck_tensor x, int C, int64_t HW, const float *a, const float *b) {
    cpu_affine_relu(CPU(be), F(x), C, HW, a, b);
}
static void t_residual_affine_relu(ck_backend *be, ck_tensor x, ck_tensor y, int C, int64_t HW, const float *a,
                                   const float *b, const float *pre_a, const float *pre_b) {
    cpu_residual_affine_relu(CPU(be), F(x), F(y), C, HW, a, b, pre_a, pre_b);
}
static void t_pointwise_conv(ck_backend *be, ck_tensor x, ck_tensor y, const float *ra, const float *rb, int C,
                             int64_t HW, ck_weight W, ck_weight b, float mult, ck_tensor out, int Cout) {
    cpu_pointwise_conv(CPU(be), F(x), F(y), ra, rb, C, HW, WF(W), WF(b), mult, F(out), Cout);
}
static void t_refiner_input_rows(ck_backend *be, ck_tensor x, int x_r0, int x_rows, ck_tensor logits, int S, int y0,
                                 int n, ck_tensor rin) {
    cpu_refiner_input_rows(CPU(be), F(x), x_r0, x_rows, F(logits), S, y0, n, F(rin));
}
static void t_conv3x3_rows(ck_backend *be, ck_tensor in, int in_is_image, int Cin, int S, int dil, int in_r0, int in_n,
                           ck_weight W, ck_weight bias, ck_tensor out, int out_r0, int out_n, int Cout, int groups,
                           double *stats) {
    cpu_conv3x3_rows(CPU(be), F(in), in_is_image, Cin, S, dil, in_r0, in_n, WF(W), WF(bias), F(out), out_r0, out_n,
                     Cout, groups, stats);
}
static void t_pointwise_conv_rows(ck_backend *be, ck_tensor x, int C, int S, int y0, int n, ck_weight W, ck_weight b,
                                  float mult, ck_tensor out, int out_r0, int out_rows, int Cout) {
    cpu_pointwise_conv_rows(CPU(be), F(x), C, S, y0, n, WF(W), WF(b), mult, F(out), out_r0, out_rows, Cout);
}
static void t_finalize(ck_backend *be, ck_tensor logits, int S, ck_tensor out) {
    cpu_finalize(CPU(be), F(logits), S, F(out));
}
static void t_groupnorm_affine(ck_backend *be, const double *stats, int groups, int C, int64_t HW, ck_weight gamma,
                               ck_weight beta, float *a, float *b) {
    cpu_groupnorm_affine(CPU(be), stats, groups, C, HW, WF(gamma), WF(beta), a, b);
}
static void t_zero_stats(ck_backend *be, double *stats, int n) { cpu_zero_stats(CPU(be), stats, n); }
static void t_memory_read(ck_backend *be, ck_tensor mk, ck_tensor ms, ck_tensor qk, ck_tensor qe, int64_t N,
                          int64_t HW, int CK, ck_tensor mv, int C, int top_k, ck_tensor out, ck_tensor usage) {
    ck_cpu_memory_read(CPU(be), F(mk), F(ms), F(qk), F(qe), N, HW, CK, F(mv), C, top_k, F(out), F(usage));
}

static void t_set_workspace(ck_backend *be, void *s, const ck_op_needs *n) { ck_cpu_set_workspace(CPU(be), s, n); }
static void t_conv2d(ck_backend *be, const ck_conv2d *g, ck_tensor in, ck_weight W, ck_weight b, ck_tensor out) {
    ck_cpu_conv2d(CPU(be), g, F(in), WF(W), WF(b), F(out));
}
static void t_maxpool3x3s2(ck_backend *be, ck_tensor in, int n, int H, int W, int C, ck_tensor out) {
    ck_cpu_maxpool3x3s2(CPU(be), F(in), n, H, W, C, F(out));
}
static void t_resize_bilinear(ck_backend *be, ck_tensor in, int n, int H, int W, int C, ck_tensor add, int Ho,
                              int Wo, ck_tensor out) {
    ck_cpu_resize_bilinear(CPU(be), F(in), n, H, W, C, F(add), Ho, Wo, F(out));
}
static void t_avgpool(ck_backend *be, ck_tensor in, int n, int H, int W, int C, int f, ck_tensor out, int out_ld) {
    ck_cpu_avgpool(CPU(be), F(in), n, H, W, C, f, F(out), out_ld);
}
static void t_layer_norm(ck_backend *be, ck_tensor x, int64_t N, int C, ck_weight g, ck_weight b, float eps,
                         ck_tensor y) {
    ck_cpu_layer_norm(CPU(be), F(x), N, C, WF(g), WF(b), eps, F(y));
}
static void t_mha(ck_backend *be, int n, ck_tensor q, int64_t Nq, int q_ld, ck_tensor k, ck_tensor v, int64_t Nk,
                  int kv_ld, int D, int heads, ck_tensor mask, ck_tensor out) {
    if (mask.data && mask.type != CK_U8) abort();
    ck_cpu_mha(CPU(be), n, F(q), Nq, q_ld, F(k), F(v), Nk, kv_ld, D, heads, mask.data, F(out));
}
static void t_unary(ck_backend *be, int kind, ck_tensor x, int64_t n, ck_tensor y) {
    ck_cpu_unary(CPU(be), kind, F(x), n, F(y));
}
static void t_add(ck_backend *be, ck_tensor a, int64_t na, ck_tensor b, int64_t nb, ck_tensor y) {
    ck_cpu_add(CPU(be), F(a), na, F(b), nb, F(y));
}
static void t_copy_channels(ck_backend *be, ck_tensor src, int64_t n, int C, int src_ld, ck_tensor dst, int dst_ld) {
    ck_cpu_copy_channels(CPU(be), F(src), n, C, src_ld, F(dst), dst_ld);
}
static void t_pad_normalize(ck_backend *be, ck_tensor src, int Hi, int Wi, int pad_t, int pad_l, int Hp, int Wp,
                            ck_tensor dst) {
    ck_cpu_pad_normalize(CPU(be), F(src), Hi, Wi, pad_t, pad_l, Hp, Wp, F(dst));
}
static void t_masks_with_others(ck_backend *be, ck_tensor m, int O, int64_t HW, ck_tensor dst, int dst_ld) {
    ck_cpu_masks_with_others(CPU(be), F(m), O, HW, F(dst), dst_ld);
}
static void t_gru_update(ck_backend *be, ck_tensor h, ck_tensor v, int64_t HW, int D) {
    ck_cpu_gru_update(CPU(be), F(h), F(v), HW, D);
}
static void t_channel_attention(ck_backend *be, ck_tensor x, int n, int64_t HW, int C, ck_weight w, int k,
                                ck_tensor r, ck_tensor out) {
    ck_cpu_channel_attention(CPU(be), F(x), n, HW, C, WF(w), k, F(r), F(out));
}
static void t_aggregate(ck_backend *be, ck_tensor logits, int O, int64_t HW, ck_tensor out) {
    ck_cpu_aggregate(CPU(be), F(logits), O, HW, F(out));
}
static void t_softmax_planes(ck_backend *be, ck_tensor x, int C, int64_t HW) {
    ck_cpu_softmax_planes(CPU(be), F(x), C, HW);
}
static void t_object_attn_mask(ck_backend *be, ck_tensor logits, int O, int64_t HW, int Q, ck_tensor mask) {
    if (mask.type != CK_U8) abort();
    ck_cpu_object_attn_mask(CPU(be), F(logits), O, HW, Q, mask.data);
}
static void t_summary_pool(ck_backend *be, ck_tensor m, ck_tensor feat, ck_tensor logits, int64_t HW, int E, int Q,
                           ck_tensor out) {
    ck_cpu_summary_pool(CPU(be), F(m), F(feat), F(logits), HW, E, Q, F(out));
}
static void t_summary_values(ck_backend *be, ck_tensor in, int64_t n, int E, ck_tensor out) {
    ck_cpu_summary_values(CPU(be), F(in), n, E, F(out));
}
static void t_pos_encoding(ck_backend *be, int H, int W, int dim, float scale, float temperature, ck_tensor out) {
    ck_cpu_pos_encoding(CPU(be), H, W, dim, scale, temperature, F(out));
}

const ck_ops ck_cpu_ops = {
    .read = t_read,
    .write = t_write,
    .patch_embed = t_patch_embed,
    .patch_embed_rows = t_patch_embed_rows,
    .copy_rows = t_copy_rows,
    .mask_unit_attention = t_mask_unit_attention,
    .mask_unit_attention_map = t_mask_unit_attention_map,
    .layernorm = t_layernorm,
    .layernorm_map = t_layernorm_map,
    .linear = t_linear,
    .linear_maxpool = t_linear_maxpool,
    .attention = t_attention,
    .attention_qkv = t_attention_qkv,
    .linear_maxpool_map = t_linear_maxpool_map,
    .attention_qkv_map = t_attention_qkv_map,
    .mlp = t_mlp,
    .reroll = t_reroll,
    .reroll_inplace = t_reroll_inplace,
    .decoder_fuse = t_decoder_fuse,
    .decoder_fuse_rows = t_decoder_fuse_rows,
    .refiner_input = t_refiner_input,
    .conv3x3 = t_conv3x3,
    .affine_relu = t_affine_relu,
    .residual_affine_relu = t_residual_affine_relu,
    .pointwise_conv = t_pointwise_conv,
    .finalize = t_finalize,
    .groupnorm_affine = t_groupnorm_affine,
    .zero_stats = t_zero_stats,
    .refiner_input_rows = t_refiner_input_rows,
    .conv3x3_rows = t_conv3x3_rows,
    .pointwise_conv_rows = t_pointwise_conv_rows,
    .memory_read = t_memory_read,
    .set_workspace = t_set_workspace,
    .conv2d = t_conv2d,
    .maxpool3x3s2 = t_maxpool3x3s2,
    .resize_bilinear = t_resize_bilinear,
    .avgpool = t_avgpool,
    .layer_norm = t_layer_norm,
    .mha = t_mha,
    .unary = t_unary,
    .add = t_add,
    .copy_channels = t_copy_channels,
    .pad_normalize = t_pad_normalize,
    .masks_with_others = t_masks_with_others,
    .gru_update = t_gru_update,
    .channel_attention = t_channel_attention,
    .aggregate = t_aggregate,
    .softmax_planes = t_softmax_planes,
    .object_attn_mask = t_object_attn_mask,
    .summary_pool = t_summary_pool,
    .summary_values = t_summary_values,
    .pos_encoding = t_pos_encoding,
};
