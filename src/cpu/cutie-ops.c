/* CPU implementations of Cutie's ops (backend/ops.h, the Cutie block): convs
 * as ckey's GEMM over im2col tiles (the weights packed once per op into the
 * shared scratch), attention, pooling, resizing and the small elementwise
 * pieces of cutie/model. Each op splits its work over the pool; a worker
 * uses its own slice of the workspace bound by set_workspace. */
#include <math.h>
#include <string.h>

#include "backend/cutie-math.h"
#include "cpu/cpu.h"

#define VEC __attribute__((target_clones("avx512f", "avx2", "default")))

enum {
    CONV_PIX = 64 /* output pixels per conv GEMM (the im2col tile's rows) */
};

static size_t al16(size_t n) { return (n + 15) / 16 * 16; }
static size_t packed_floats(int64_t out, int64_t in) { return (size_t)((out + 31) / 32) * 32 * (size_t)in; }

static void needs_floats(const ck_op_needs *n, size_t *per_thread, size_t *shared) {
    size_t pt = al16((size_t)CONV_PIX * (size_t)n->conv_k);
    pt = CK_MAX(pt, al16((size_t)n->attn_keys));
    if (n->mr_n > 0) { /* the top-k path, and the dense one while the memory holds no more than top_k */
        pt = CK_MAX(pt, ck_cpu_memory_read_floats(n->mr_n, n->mr_ck, n->mr_top_k));
        pt = CK_MAX(pt, ck_cpu_memory_read_floats(n->mr_n, n->mr_ck, 0));
    }
    *per_thread = pt;
    /* ceil(Cout / 32) * 32 * K <= Cout * K + 31 K bounds every conv's packed weights */
    *shared = al16((size_t)n->conv_w + 31 * (size_t)n->conv_k);
}

static size_t pairs_floats(const ck_op_needs *n) {
    return n->mr_usage_hw > 0 ? al16(ck_cpu_memory_read_pairs_floats(n->mr_usage_hw, n->mr_top_k)) : 0;
}

size_t ck_cpu_ops_workspace_bytes(const ck_backend_config *bc, const ck_op_needs *n) {
    size_t pt, sh;
    needs_floats(n, &pt, &sh);
    return ((size_t)CK_MAX(bc->threads, 1) * pt + sh + pairs_floats(n)) * sizeof(float);
}

void ck_cpu_set_workspace(ck_cpu *be, void *scratch, const ck_op_needs *n) {
    size_t pt, sh;
    needs_floats(n, &pt, &sh);
    be->scratch = scratch;
    be->per_thread = pt;
    be->shared = be->scratch + (size_t)be->threads * pt;
    be->shared_floats = sh;
    be->mr_pairs = be->shared + sh;
    be->mr_pairs_floats = pairs_floats(n);
}

/* ------------------------------------------------------------------ conv */

typedef struct {
    const ck_conv2d *g;
    const float *in, *W, *b;
    float *out, *Wp;
    int Ho, Wo, in_ld, out_ld, direct;
    int64_t in_map, out_map, K, tiles_per_map;
    ck_cpu *be;
} conv_ctx;

static void conv_pack(void *p, int64_t a, int64_t b, int thread) {
    const conv_ctx *c = p;
    (void)thread;
    for (int64_t it = a; it < b; it++) {
        const int j0 = (int)it * 32;
        ck_sgemm_pack_b(1, CK_MIN(32, c->g->Cout - j0), (int)c->K, c->W + (int64_t)j0 * c->K, c->K,
                        c->Wp + (int64_t)j0 * c->K, (int64_t)32 * c->K);
    }
}

static void conv_tiles(void *p, int64_t a, int64_t b, int thread) {
    const conv_ctx *c = p;
    const ck_conv2d *g = c->g;
    const int Cin = g->Cin, Cout = g->Cout, k = g->k, relu_in = g->flags & CK_CONV_RELU_IN;
    float *col = c->be->scratch + (size_t)thread * c->be->per_thread;
    for (int64_t it = a; it < b; it++) {
        const int64_t img = it / c->tiles_per_map, p0 = (it % c->tiles_per_map) * CONV_PIX;
        const int np = (int)CK_MIN(CONV_PIX, (int64_t)c->Ho * c->Wo - p0);
        const float *in = c->in + img * c->in_map;
        float *out = c->out + img * c->out_map + p0 * c->out_ld;
        const float *A = col;
        int64_t lda = c->K;
        if (c->direct) {
            A = in + p0 * c->in_ld;
            lda = c->in_ld;
        } else {
            for (int i = 0; i < np; i++) {
                const int oy = (int)((p0 + i) / c->Wo), ox = (int)((p0 + i) % c->Wo);
                float *dst = col + (int64_t)i * c->K;
                for (int ky = 0; ky < k; ky++) {
                    const int iy = oy * g->stride - g->pad + ky * g->dil;
                    for (int kx = 0; kx < k; kx++, dst += Cin) {
                        const int ix = ox * g->stride - g->pad + kx * g->dil;
                        if (iy < 0 || iy >= g->H || ix < 0 || ix >= g->W) {
                            memset(dst, 0, (size_t)Cin * sizeof(float));
                            continue;
                        }
                        const float *src = in + ((int64_t)iy * g->W + ix) * c->in_ld;
                        if (relu_in)
                            for (int ch = 0; ch < Cin; ch++) dst[ch] = src[ch] > 0 ? src[ch] : 0;
                        else
                            memcpy(dst, src, (size_t)Cin * sizeof(float));
                    }
                }
            }
        }
        ck_sgemm_packed(0, np, Cout, (int)c->K, A, lda, c->Wp, (int64_t)32 * c->K,
                        g->flags & CK_CONV_ACCUMULATE ? 1.0f : 0.0f, out, c->out_ld);
        for (int i = 0; i < np; i++) {
            float *o = out + (int64_t)i * c->out_ld;
            if (c->b)
                for (int j = 0; j < Cout; j++) o[j] += c->b[j];
            if (g->flags & CK_CONV_RELU_OUT)
                for (int j = 0; j < Cout; j++) o[j] = o[j] > 0 ? o[j] : 0;
        }
    }
}

void ck_cpu_conv2d(ck_cpu *be, const ck_conv2d *g, const float *in, const float *W, const float *b, float *out) {
    conv_ctx c = {.g = g, .in = in, .W = W, .b = b, .out = out, .be = be};
    c.Ho = (g->H + 2 * g->pad - g->dil * (g->k - 1) - 1) / g->stride + 1;
    c.Wo = (g->W + 2 * g->pad - g->dil * (g->k - 1) - 1) / g->stride + 1;
    c.in_ld = g->in_ld ? g->in_ld : g->Cin;
    c.out_ld = g->out_ld ? g->out_ld : g->Cout;
    c.in_map = g->in_map ? g->in_map : (int64_t)g->H * g->W * c.in_ld;
    c.out_map = g->out_map ? g->out_map : (int64_t)c.Ho * c.Wo * c.out_ld;
    c.K = (int64_t)g->k * g->k * g->Cin;
    if (c.K > (int64_t)(be->per_thread / CONV_PIX) || packed_floats(g->Cout, c.K) > be->shared_floats) abort();
    c.direct = g->k == 1 && g->stride == 1 && g->pad == 0 && !(g->flags & CK_CONV_RELU_IN);
    c.tiles_per_map = ((int64_t)c.Ho * c.Wo + CONV_PIX - 1) / CONV_PIX;
    c.Wp = be->shared;
    ck_pool_for(be->pool, (g->Cout + 31) / 32, 1, conv_pack, &c);
    ck_pool_for(be->pool, g->n * c.tiles_per_map, 1, conv_tiles, &c);
    if (be->conv_out)
        for (int img = 0; img < g->n; img++)
            be->conv_out(be->conv_out_user, out + img * c.out_map, (int64_t)c.Ho * c.Wo, g->Cout, c.out_ld);
}

void ck_cpu_set_conv_out(ck_backend *be, void (*f)(void *user, float *out, int64_t rows, int C, int64_t ld),
                         void *user) {
    if (!be || be->iface != &ck_cpu_backend) return;
    ck_cpu *c = (ck_cpu *)(void *)be;
    c->conv_out = f, c->conv_out_user = user;
}

/* --------------------------------------------------------------- pooling */

typedef struct {
    const float *in;
    float *out;
    int H, W, C, Ho, Wo, f, out_ld;
    const float *add;
} pool_ctx;

static void maxpool_rows(void *p, int64_t a, int64_t b, int thread) {
    const pool_ctx *c = p;
    (void)thread;
    for (int64_t r = a; r < b; r++) { /* r = map * Ho + oy */
        const int64_t img = r / c->Ho;
        const int oy = (int)(r % c->Ho);
        const float *in = c->in + img * c->H * c->W * c->C;
        for (int ox = 0; ox < c->Wo; ox++) {
            float *o = c->out + (r * c->Wo + ox) * c->C;
            for (int ch = 0; ch < c->C; ch++) o[ch] = -INFINITY;
            for (int dy = 0; dy < 3; dy++) {
                const int iy = 2 * oy - 1 + dy;
                if (iy < 0 || iy >= c->H) continue;
                for (int dx = 0; dx < 3; dx++) {
                    const int ix = 2 * ox - 1 + dx;
                    if (ix < 0 || ix >= c->W) continue;
                    const float *s = in + ((int64_t)iy * c->W + ix) * c->C;
                    for (int ch = 0; ch < c->C; ch++) o[ch] = s[ch] > o[ch] ? s[ch] : o[ch];
                }
            }
        }
    }
}

void ck_cpu_maxpool3x3s2(ck_cpu *be, const float *in, int n, int H, int W, int C, float *out) {
    pool_ctx c = {in, out, H, W, C, (H - 1) / 2 + 1, (W - 1) / 2 + 1, 2, C, NULL};
    ck_pool_for(be->pool, (int64_t)n * c.Ho, 1, maxpool_rows, &c);
}

static void avgpool_rows(void *p, int64_t a, int64_t b, int thread) {
    const pool_ctx *c = p;
    (void)thread;
    const float inv = 1.0f / (float)(c->f * c->f);
    for (int64_t r = a; r < b; r++) {
        const int64_t img = r / c->Ho;
        const int oy = (int)(r % c->Ho);
        const float *in = c->in + img * c->H * c->W * c->C;
        for (int ox = 0; ox < c->Wo; ox++) {
            float *o = c->out + (r * c->Wo + ox) * c->out_ld;
            for (int ch = 0; ch < c->C; ch++) {
                float s = 0;
                for (int dy = 0; dy < c->f; dy++)
                    for (int dx = 0; dx < c->f; dx++)
                        s += in[((int64_t)(oy * c->f + dy) * c->W + ox * c->f + dx) * c->C + ch];
                o[ch] = s * inv;
            }
        }
    }
}

void ck_cpu_avgpool(ck_cpu *be, const float *in, int n, int H, int W, int C, int f, float *out, int out_ld) {
    pool_ctx c = {in, out, H, W, C, H / f, W / f, f, out_ld ? out_ld : C, NULL};
    ck_pool_for(be->pool, (int64_t)n * c.Ho, 1, avgpool_rows, &c);
}

static void resize_rows(void *p, int64_t a, int64_t b, int thread) {
    const pool_ctx *c = p;
    (void)thread;
    for (int64_t r = a; r < b; r++) {
        const int64_t img = r / c->Ho;
        const int oy = (int)(r % c->Ho);
        int y0, y1;
        float wy;
        ck_bilinear_tap(oy, c->H, c->Ho, &y0, &y1, &wy);
        const float *in = c->in + img * c->H * c->W * c->C;
        for (int ox = 0; ox < c->Wo; ox++) {
            int x0, x1;
            float wx;
            ck_bilinear_tap(ox, c->W, c->Wo, &x0, &x1, &wx);
            const float *p00 = in + ((int64_t)y0 * c->W + x0) * c->C, *p01 = in + ((int64_t)y0 * c->W + x1) * c->C;
            const float *p10 = in + ((int64_t)y1 * c->W + x0) * c->C, *p11 = in + ((int64_t)y1 * c->W + x1) * c->C;
            float *o = c->out + (r * c->Wo + ox) * c->C;
            const float *ad = c->add ? c->add + ((int64_t)oy * c->Wo + ox) * c->C : NULL;
            for (int ch = 0; ch < c->C; ch++) {
                const float v = ck_bilinear(p00[ch], p01[ch], p10[ch], p11[ch], wx, wy);
                o[ch] = ad ? v + ad[ch] : v;
            }
        }
    }
}

void ck_cpu_resize_bilinear(ck_cpu *be, const float *in, int n, int H, int W, int C, const float *add, int Ho,
                            int Wo, float *out) {
    pool_ctx c = {in, out, H, W, C, Ho, Wo, 0, C, add};
    ck_pool_for(be->pool, (int64_t)n * Ho, 1, resize_rows, &c);
}

/* ------------------------------------------------------------- layer norm */

typedef struct {
    const float *x, *g, *b;
    float *y;
    int C;
    float eps;
} ln_ctx;

static void ln_rows(void *p, int64_t a, int64_t b, int thread) {
    const ln_ctx *c = p;
    (void)thread;
    for (int64_t r = a; r < b; r++) {
        const float *x = c->x + r * c->C;
        float *y = c->y + r * c->C;
        double s = 0, ss = 0;
        for (int i = 0; i < c->C; i++) s += x[i];
        const double mean = s / c->C;
        for (int i = 0; i < c->C; i++) ss += (x[i] - mean) * (x[i] - mean);
        const float m = (float)mean, rstd = (float)(1.0 / sqrt(ss / c->C + c->eps));
        for (int i = 0; i < c->C; i++) y[i] = (x[i] - m) * rstd * c->g[i] + c->b[i];
    }
}

void ck_cpu_layer_norm(ck_cpu *be, const float *x, int64_t N, int C, const float *g, const float *b, float eps,
                       float *y) {
    ln_ctx c = {x, g, b, y, C, eps};
    ck_pool_for(be->pool, N, 16, ln_rows, &c);
}

/* ------------------------------------------------------------- attention */

typedef struct {
    const float *q, *k, *v;
    const uint8_t *mask;
    float *out;
    int64_t Nq, Nk;
    int q_ld, kv_ld, D, heads;
    ck_cpu *be;
} mha_ctx;

VEC static float dot(const float *restrict a, const float *restrict b, int n) {
    float s = 0;
    for (int i = 0; i < n; i++) s += a[i] * b[i];
    return s;
}

VEC static void axpy(float *restrict y, const float *restrict x, float w, int n) {
    for (int i = 0; i < n; i++) y[i] += w * x[i];
}

/* Item = (batch, head, query). */
static void mha_items(void *p, int64_t a, int64_t b, int thread) {
    const mha_ctx *c = p;
    const int hd = c->D / c->heads;
    const float scale = 1.0f / sqrtf((float)hd);
    float *s = c->be->scratch + (size_t)thread * c->be->per_thread;
    for (int64_t it = a; it < b; it++) {
        const int64_t qi = it % c->Nq, bh = it / c->Nq;
        const int h = (int)(bh % c->heads);
        const int64_t bi = bh / c->heads;
        const float *q = c->q + (bi * c->Nq + qi) * c->q_ld + h * hd;
        const float *K = c->k + bi * c->Nk * c->kv_ld + h * hd, *V = c->v + bi * c->Nk * c->kv_ld + h * hd;
        const uint8_t *m = c->mask ? c->mask + (bi * c->Nq + qi) * c->Nk : NULL;
        float mx = -INFINITY;
        for (int64_t j = 0; j < c->Nk; j++) {
            s[j] = m && m[j] ? -INFINITY : dot(q, K + j * c->kv_ld, hd) * scale;
            mx = s[j] > mx ? s[j] : mx;
        }
        float sum = 0;
        for (int64_t j = 0; j < c->Nk; j++) sum += s[j] = s[j] == -INFINITY ? 0.0f : expf(s[j] - mx);
        float *o = c->out + (bi * c->Nq + qi) * c->D + h * hd;
        memset(o, 0, (size_t)hd * sizeof(float));
        const float inv = 1.0f / sum;
        for (int64_t j = 0; j < c->Nk; j++)
            if (s[j] != 0) axpy(o, V + j * c->kv_ld, s[j] * inv, hd);
    }
}

void ck_cpu_mha(ck_cpu *be, int n, const float *q, int64_t Nq, int q_ld, const float *k, const float *v, int64_t Nk,
                int kv_ld, int D, int heads, const uint8_t *mask, float *out) {
    if ((size_t)Nk > be->per_thread) abort();
    mha_ctx c = {q, k, v, mask, out, Nq, Nk, q_ld, kv_ld, D, heads, be};
    ck_pool_for(be->pool, (int64_t)n * heads * Nq, 8, mha_items, &c);
}

/* ----------------------------------------------------------- elementwise */

typedef struct {
    const float *x, *b;
    float *y;
    int64_t nb;
    int kind;
} ew_ctx;

static void unary_range(void *p, int64_t a, int64_t b, int thread) {
    const ew_ctx *c = p;
    (void)thread;
    for (int64_t i = a; i < b; i++) c->y[i] = ck_unary_map(c->kind, c->x[i]);
}

void ck_cpu_unary(ck_cpu *be, int kind, const float *x, int64_t n, float *y) {
    ew_ctx c = {x, NULL, y, 0, kind};
    ck_pool_for(be->pool, n, 4096, unary_range, &c);
}

static void add_range(void *p, int64_t a, int64_t b, int thread) {
    const ew_ctx *c = p;
    (void)thread;
    for (int64_t i = a; i < b; i++) c->y[i] = c->x[i] + c->b[i % c->nb];
}

void ck_cpu_add(ck_cpu *be, const float *a, int64_t na, const float *b, int64_t nb, float *y) {
    ew_ctx c = {a, b, y, nb, 0};
    ck_pool_for(be->pool, na, 4096, add_range, &c);
}

void ck_cpu_copy_channels(ck_cpu *be, const float *src, int64_t n, int C, int src_ld, float *dst, int dst_ld) {
    (void)be;
    for (int64_t p = 0; p < n; p++) memcpy(dst + p * dst_ld, src + p * src_ld, (size_t)C * sizeof(float));
}

void ck_cpu_pad_normalize(ck_cpu *be, const float *src, int Hi, int Wi, int pad_t, int pad_l, int Hp, int Wp,
                          float *dst) {
    (void)be;
    for (int y = 0; y < Hp; y++)
        for (int x = 0; x < Wp; x++)
            for (int c = 0; c < 3; c++)
                dst[((int64_t)y * Wp + x) * 3 + c] = ck_cutie_pad_normalize_at(src, Hi, Wi, pad_t, pad_l, y, x, c);
}

void ck_cpu_masks_with_others(ck_cpu *be, const float *m, int O, int64_t HW, float *dst, int dst_ld) {
    (void)be;
    for (int64_t p = 0; p < HW; p++) ck_masks_with_others_pixel(m, O, HW, p, dst, dst_ld);
}

typedef struct {
    float *h;
    const float *v;
    int D;
} gru_ctx;

static void gru_rows(void *p, int64_t a, int64_t b, int thread) {
    const gru_ctx *c = p;
    (void)thread;
    for (int64_t r = a; r < b; r++) {
        float *h = c->h + r * c->D;
        const float *v = c->v + r * 3 * c->D;
        for (int i = 0; i < c->D; i++) h[i] = ck_gru_cell(h[i], v[i], v[c->D + i], v[2 * c->D + i]);
    }
}

void ck_cpu_gru_update(ck_cpu *be, float *h, const float *v, int64_t HW, int D) {
    gru_ctx c = {h, v, D};
    ck_pool_for(be->pool, HW, 64, gru_rows, &c);
}

void ck_cpu_channel_attention(ck_cpu *be, const float *x, int n, int64_t HW, int C, const float *w, int k,
                              const float *r, float *out) {
    float *mean = be->scratch, *gate = be->scratch + C; /* thread 0's slice: the pool is idle */
    if ((size_t)2 * C > be->per_thread) abort();
    for (int b = 0; b < n; b++) {
        const float *xb = x + (int64_t)b * HW * C;
        for (int ch = 0; ch < C; ch++) mean[ch] = 0;
        double acc[64];
        for (int c0 = 0; c0 < C; c0 += 64) { /* sums in double: HW may be large */
            const int nc = CK_MIN(64, C - c0);
            for (int j = 0; j < nc; j++) acc[j] = 0;
            for (int64_t p = 0; p < HW; p++)
                for (int j = 0; j < nc; j++) acc[j] += xb[p * C + c0 + j];
            for (int j = 0; j < nc; j++) mean[c0 + j] = (float)(acc[j] / (double)HW);
        }
        for (int ch = 0; ch < C; ch++) gate[ch] = ck_channel_gate(w, k, mean, C, ch);
        const float *rb = r ? r + (int64_t)b * HW * C : NULL;
        float *ob = out + (int64_t)b * HW * C;
        for (int64_t p = 0; p < HW; p++)
            for (int ch = 0; ch < C; ch++) {
                const float v = xb[p * C + ch] * gate[ch];
                ob[p * C + ch] = rb ? v + rb[p * C + ch] : v;
            }
    }
}

void ck_cpu_aggregate(ck_cpu *be, const float *logits, int O, int64_t HW, float *out) {
    (void)be;
    for (int64_t p = 0; p < HW; p++) ck_aggregate_pixel(logits, O, HW, p, out);
}

void ck_cpu_softmax_planes(ck_cpu *be, float *x, int C, int64_t HW) {
    (void)be;
    for (int64_t p = 0; p < HW; p++) ck_softmax_planes_pixel(x, C, HW, p);
}

void ck_cpu_object_attn_mask(ck_cpu *be, const float *logits, int O, int64_t HW, int Q, uint8_t *mask) {
    (void)be;
    if (HW <= 0) return;
    for (int o = 0; o < O; o++) {
        uint8_t *fg = mask + (int64_t)o * Q * HW, *bgm = fg + (int64_t)(Q / 2) * HW;
        int64_t nfg = 0;
        for (int64_t p = 0; p < HW; p++) {
            const int is_fg = ck_is_fg(logits, O, HW, o, p);
            nfg += is_fg;
            fg[p] = (uint8_t)!is_fg;
            bgm[p] = (uint8_t)is_fg;
        }
        /* rows blocked everywhere are cleared: no foreground blocks every
         * foreground query, all foreground every background query */
        if (nfg == 0) memset(fg, 0, (size_t)HW);
        if (nfg == HW) memset(bgm, 0, (size_t)HW);
        for (int q = 1; q < Q / 2; q++) {
            memcpy(fg + q * HW, fg, (size_t)HW);
            memcpy(bgm + q * HW, bgm, (size_t)HW);
        }
    }
}

void ck_cpu_summary_pool(ck_cpu *be, const float *m, const float *feat, const float *logits, int64_t HW, int E,
                         int Q, float *out) {
    (void)be;
    double acc[1024 + 1];
    if (E > 1024) abort();
    for (int q = 0; q < Q; q++) {
        for (int e = 0; e <= E; e++) acc[e] = 0;
        for (int64_t p = 0; p < HW; p++) {
            const float w = ck_summary_weight(logits[p * Q + q], q, Q, m[p]);
            const float *f = feat + p * E;
            for (int e = 0; e < E; e++) acc[e] += (double)w * f[e];
            acc[E] += w;
        }
        for (int e = 0; e <= E; e++) out[(int64_t)q * (E + 1) + e] = (float)acc[e];
    }
}

void ck_cpu_pos_encoding(ck_cpu *be, int H, int W, int dim, float scale, float temperature, float *out) {
    (void)be;
    const int d = (dim + 3) / 4 * 2, nf = d / 2;
    const float ey = (float)(H - 1) + 1e-6f, ex = (float)(W - 1) + 1e-6f;
    for (int y = 0; y < H; y++)
        for (int x = 0; x < W; x++) {
            float *o = out + ((int64_t)y * W + x) * 2 * d;
            const float py = (float)y / ey * scale, px = (float)x / ex * scale;
            for (int i = 0; i < nf; i++) {
                const float inv = 1.0f / powf(temperature, (float)(2 * i) / (float)d);
                o[2 * i] = sinf(px * inv), o[2 * i + 1] = cosf(px * inv);
                o[d + 2 * i] = sinf(py * inv), o[d + 2 * i + 1] = cosf(py * inv);
            }
        }
}

void ck_cpu_summary_values(ck_cpu *be, const float *in, int64_t n, int E, float *out) {
    (void)be;
    for (int64_t i = 0; i < n; i++)
        for (int e = 0; e < E; e++) out[i * E + e] = in[i * (E + 1) + e] / (in[i * (E + 1) + E] + 1e-4f);
}
