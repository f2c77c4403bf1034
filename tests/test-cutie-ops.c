/* Cutie's CPU ops (backend/ops.h, the Cutie block) against plain C formulas
 * in double precision on small random cases: conv2d (kernel, stride,
 * padding, dilation, channel strides, relu in/out, accumulate), pooling,
 * bilinear resize, layer norm, masked multi-head attention, and the small
 * pieces of cutie/model (GRU, channel attention, aggregate, attention mask,
 * summary pooling, positional encoding). */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "cpu/cpu.h"
#include "support/testutil.h"

static uint64_t rng = 88172645463325252ull;
static float frand(void) { /* [-1, 1) */
    rng ^= rng << 13, rng ^= rng >> 7, rng ^= rng << 17;
    return (float)((rng >> 11) * (1.0 / 9007199254740992.0)) * 2.0f - 1.0f;
}
static float *rnd(size_t n) {
    float *p = malloc(n * sizeof(float));
    for (size_t i = 0; i < n; i++) p[i] = frand();
    return p;
}

/* A CPU backend state with a workspace for ops within `needs`. */
typedef struct {
    ck_cpu be;
    void *ws;
} rig;

static void rig_open(rig *r, int threads, const ck_op_needs *n) {
    memset(r, 0, sizeof *r);
    ck_gemm_init();
    if (ck_pool_create(threads, &r->be.pool, NULL) != CKEY_OK) abort();
    r->be.threads = ck_pool_size(r->be.pool);
    ck_backend_config bc = {.threads = r->be.threads};
    r->ws = malloc(ck_cpu_ops_workspace_bytes(&bc, n));
    ck_cpu_set_workspace(&r->be, r->ws, n);
}

static void rig_close(rig *r) {
    ck_pool_free(r->be.pool);
    free(r->ws);
}

static double maxerr(const float *a, const double *b, size_t n) {
    double m = 0;
    for (size_t i = 0; i < n; i++) {
        const double e = fabs(a[i] - b[i]);
        m = e > m || e != e ? e : m;
    }
    return m;
}

/* ------------------------------------------------------------------ conv */

static void conv_case(int n, int H, int W, int Cin, int Cout, int k, int stride, int pad, int dil, int flags,
                      int in_extra, int out_extra, int threads) {
    const int Ho = (H + 2 * pad - dil * (k - 1) - 1) / stride + 1, Wo = (W + 2 * pad - dil * (k - 1) - 1) / stride + 1;
    const int in_ld = Cin + in_extra, out_ld = Cout + out_extra;
    float *in = rnd((size_t)n * H * W * in_ld), *Wt = rnd((size_t)Cout * k * k * Cin), *b = rnd(Cout);
    float *out = rnd((size_t)n * Ho * Wo * out_ld);
    double *want = malloc((size_t)n * Ho * Wo * out_ld * sizeof(double));
    for (size_t i = 0; i < (size_t)n * Ho * Wo * out_ld; i++) want[i] = out[i];
    for (int m = 0; m < n; m++)
        for (int oy = 0; oy < Ho; oy++)
            for (int ox = 0; ox < Wo; ox++)
                for (int co = 0; co < Cout; co++) {
                    double s = b[co];
                    for (int ky = 0; ky < k; ky++)
                        for (int kx = 0; kx < k; kx++) {
                            const int iy = oy * stride - pad + ky * dil, ix = ox * stride - pad + kx * dil;
                            if (iy < 0 || iy >= H || ix < 0 || ix >= W) continue;
                            for (int ci = 0; ci < Cin; ci++) {
                                double v = in[(((size_t)m * H + iy) * W + ix) * in_ld + ci];
                                if (flags & CK_CONV_RELU_IN) v = v > 0 ? v : 0;
                                s += v * Wt[(((size_t)co * k + ky) * k + kx) * Cin + ci];
                            }
                        }
                    double *o = &want[(((size_t)m * Ho + oy) * Wo + ox) * out_ld + co];
                    if (flags & CK_CONV_ACCUMULATE) s += *o;
                    if (flags & CK_CONV_RELU_OUT) s = s > 0 ? s : 0;
                    *o = s;
                }
    ck_op_needs nd = {.conv_k = (int64_t)k * k * Cin, .conv_w = (int64_t)Cout * k * k * Cin};
    rig r;
    rig_open(&r, threads, &nd);
    ck_conv2d g = {n, H, W, Cin, Cout, k, stride, pad, dil, flags, in_ld, out_ld, 0, 0};
    ck_cpu_conv2d(&r.be, &g, in, Wt, b, out);
    const double e = maxerr(out, want, (size_t)n * Ho * Wo * out_ld);
    printf("  conv n%d %dx%d %d->%d k%d s%d p%d d%d flags %d ld +%d/+%d: max err %.2e\n", n, H, W, Cin, Cout, k,
           stride, pad, dil, flags, in_extra, out_extra, e);
    CHECKF(e < 1e-4, "%g", e);
    rig_close(&r);
    free(in), free(Wt), free(b), free(out), free(want);
}

static void test_conv2d(void) {
    conv_case(1, 9, 11, 5, 7, 3, 1, 1, 1, 0, 0, 0, 2);
    conv_case(2, 13, 10, 4, 64, 7, 2, 3, 1, 0, 0, 0, 2);  /* the ResNet stem */
    conv_case(1, 12, 12, 33, 40, 3, 2, 1, 1, CK_CONV_RELU_OUT, 0, 0, 1);
    conv_case(3, 8, 6, 16, 35, 1, 1, 0, 1, CK_CONV_ACCUMULATE | CK_CONV_RELU_OUT, 3, 5, 2); /* direct 1x1 */
    conv_case(1, 8, 8, 16, 16, 1, 2, 0, 1, 0, 0, 0, 2);  /* strided 1x1 (downsample) */
    conv_case(2, 10, 9, 12, 9, 3, 1, 2, 2, CK_CONV_RELU_IN | CK_CONV_ACCUMULATE, 2, 0, 2);
    conv_case(1, 1, 17, 20, 24, 1, 1, 0, 1, CK_CONV_RELU_IN, 0, 0, 2); /* a linear layer */
}

/* --------------------------------------------------------- pool + resize */

static void test_pool_resize(void) {
    const int n = 2, H = 11, W = 8, C = 3;
    float *in = rnd((size_t)n * H * W * C);
    ck_op_needs nd = {.conv_k = 1};
    rig r;
    rig_open(&r, 2, &nd);
    /* max pool 3x3/2, padding 1 */
    const int Ho = (H - 1) / 2 + 1, Wo = (W - 1) / 2 + 1;
    float *mp = malloc((size_t)n * Ho * Wo * C * sizeof(float));
    double *w = malloc((size_t)n * 64 * 64 * C * sizeof(double));
    ck_cpu_maxpool3x3s2(&r.be, in, n, H, W, C, mp);
    for (int m = 0; m < n; m++)
        for (int y = 0; y < Ho; y++)
            for (int x = 0; x < Wo; x++)
                for (int c = 0; c < C; c++) {
                    double v = -INFINITY;
                    for (int iy = 2 * y - 1; iy <= 2 * y + 1; iy++)
                        for (int ix = 2 * x - 1; ix <= 2 * x + 1; ix++)
                            if (iy >= 0 && iy < H && ix >= 0 && ix < W)
                                v = fmax(v, in[(((size_t)m * H + iy) * W + ix) * C + c]);
                    w[(((size_t)m * Ho + y) * Wo + x) * C + c] = v;
                }
    double e = maxerr(mp, w, (size_t)n * Ho * Wo * C);
    printf("  maxpool3x3s2: max err %.2e\n", e);
    CHECK(e == 0);
    /* area pooling by 2 into a strided output */
    const int f = 2, Hp = H / f, Wp = W / f;
    float *ap = calloc((size_t)n * Hp * Wp * (C + 1), sizeof(float));
    ck_cpu_avgpool(&r.be, in, n, H, W, C, f, ap, C + 1);
    double worst = 0;
    for (int m = 0; m < n; m++)
        for (int y = 0; y < Hp; y++)
            for (int x = 0; x < Wp; x++)
                for (int c = 0; c < C; c++) {
                    double s = 0;
                    for (int dy = 0; dy < f; dy++)
                        for (int dx = 0; dx < f; dx++) s += in[(((size_t)m * H + y * f + dy) * W + x * f + dx) * C + c];
                    worst = fmax(worst, fabs(ap[(((size_t)m * Hp + y) * Wp + x) * (C + 1) + c] - s / (f * f)));
                }
    printf("  avgpool /2: max err %.2e\n", worst);
    CHECK(worst < 1e-6);
    /* bilinear, align_corners=False, up by 4 and to an odd size, plus add */
    const int sizes[2][2] = {{H * 4, W * 4}, {5, 13}};
    for (int si = 0; si < 2; si++) {
        const int Hr = sizes[si][0], Wr = sizes[si][1];
        float *add = rnd((size_t)Hr * Wr * C), *rs = malloc((size_t)n * Hr * Wr * C * sizeof(float));
        double *rw = malloc((size_t)n * Hr * Wr * C * sizeof(double));
        ck_cpu_resize_bilinear(&r.be, in, n, H, W, C, add, Hr, Wr, rs);
        for (int m = 0; m < n; m++)
            for (int y = 0; y < Hr; y++)
                for (int x = 0; x < Wr; x++) {
                    double sy = fmax(0, (y + 0.5) * H / Hr - 0.5), sx = fmax(0, (x + 0.5) * W / Wr - 0.5);
                    int y0 = (int)sy, x0 = (int)sx;
                    int y1 = y0 + 1 < H ? y0 + 1 : H - 1, x1 = x0 + 1 < W ? x0 + 1 : W - 1;
                    double wy = sy - y0, wx = sx - x0;
                    for (int c = 0; c < C; c++) {
#define P(yy, xx) in[(((size_t)m * H + (yy)) * W + (xx)) * C + c]
                        double v = (1 - wy) * ((1 - wx) * P(y0, x0) + wx * P(y0, x1)) +
                                   wy * ((1 - wx) * P(y1, x0) + wx * P(y1, x1));
#undef P
                        rw[(((size_t)m * Hr + y) * Wr + x) * C + c] = v + add[((size_t)y * Wr + x) * C + c];
                    }
                }
        e = maxerr(rs, rw, (size_t)n * Hr * Wr * C);
        printf("  bilinear %dx%d -> %dx%d: max err %.2e\n", H, W, Hr, Wr, e);
        CHECK(e < 1e-5);
        free(add), free(rs), free(rw);
    }
    rig_close(&r);
    free(in), free(mp), free(w), free(ap);
}

/* -------------------------------------------------- layer norm, attention */

static void test_layer_norm(void) {
    const int N = 7, C = 40;
    float *x = rnd((size_t)N * C), *g = rnd(C), *b = rnd(C), *y = malloc((size_t)N * C * sizeof(float));
    double *w = malloc((size_t)N * C * sizeof(double));
    for (int i = 0; i < N * C; i++) x[i] = x[i] * 3 + 2;
    for (int r = 0; r < N; r++) {
        double s = 0, ss = 0;
        for (int c = 0; c < C; c++) s += x[r * C + c];
        s /= C;
        for (int c = 0; c < C; c++) ss += (x[r * C + c] - s) * (x[r * C + c] - s);
        ss /= C;
        for (int c = 0; c < C; c++) w[r * C + c] = (x[r * C + c] - s) / sqrt(ss + 1e-5) * g[c] + b[c];
    }
    ck_op_needs nd = {.conv_k = 1};
    rig r;
    rig_open(&r, 2, &nd);
    ck_cpu_layer_norm(&r.be, x, N, C, g, b, 1e-5f, y);
    const double e = maxerr(y, w, (size_t)N * C);
    printf("  layer_norm eps 1e-5: max err %.2e\n", e);
    CHECK(e < 1e-5);
    rig_close(&r);
    free(x), free(g), free(b), free(y), free(w);
}

static void test_mha(void) {
    const int nb = 2, Nq = 5, Nk = 37, D = 24, heads = 3, hd = D / heads, q_ld = D + 4, kv_ld = D + 2;
    float *q = rnd((size_t)nb * Nq * q_ld), *k = rnd((size_t)nb * Nk * kv_ld), *v = rnd((size_t)nb * Nk * kv_ld);
    uint8_t *mask = malloc((size_t)nb * Nq * Nk);
    for (int i = 0; i < nb * Nq * Nk; i++) mask[i] = frand() > 0.3f;
    for (int i = 0; i < nb * Nq; i++) mask[(size_t)i * Nk + i % Nk] = 0; /* no row all blocked */
    float *out = malloc((size_t)nb * Nq * D * sizeof(float));
    double *w = malloc((size_t)nb * Nq * D * sizeof(double)), s[64];
    ck_op_needs nd = {.conv_k = 1, .attn_keys = Nk};
    rig r;
    rig_open(&r, 2, &nd);
    for (int use_mask = 0; use_mask < 2; use_mask++) {
        for (int bi = 0; bi < nb; bi++)
            for (int h = 0; h < heads; h++)
                for (int i = 0; i < Nq; i++) {
                    double mx = -INFINITY, sum = 0;
                    for (int j = 0; j < Nk; j++) {
                        double d = 0;
                        for (int c = 0; c < hd; c++)
                            d += (double)q[((size_t)bi * Nq + i) * q_ld + h * hd + c] *
                                 k[((size_t)bi * Nk + j) * kv_ld + h * hd + c];
                        s[j] = use_mask && mask[((size_t)bi * Nq + i) * Nk + j] ? -INFINITY : d / sqrt(hd);
                        mx = fmax(mx, s[j]);
                    }
                    for (int j = 0; j < Nk; j++) sum += s[j] = exp(s[j] - mx);
                    for (int c = 0; c < hd; c++) {
                        double o = 0;
                        for (int j = 0; j < Nk; j++) o += s[j] / sum * v[((size_t)bi * Nk + j) * kv_ld + h * hd + c];
                        w[((size_t)bi * Nq + i) * D + h * hd + c] = o;
                    }
                }
        ck_cpu_mha(&r.be, nb, q, Nq, q_ld, k, v, Nk, kv_ld, D, heads, use_mask ? mask : NULL, out);
        const double e = maxerr(out, w, (size_t)nb * Nq * D);
        printf("  mha %s: max err %.2e\n", use_mask ? "masked" : "unmasked", e);
        CHECK(e < 1e-5);
    }
    rig_close(&r);
    free(q), free(k), free(v), free(mask), free(out), free(w);
}

/* ------------------------------------------------------ Cutie's pieces */

static double sig(double x) { return 1 / (1 + exp(-x)); }
static double agg(double q) {
    q = fmin(fmax(q, 1e-7), 1 - 1e-7);
    return log(q / (1 - q));
}

static void test_pieces(void) {
    ck_op_needs nd = {.conv_k = 8};
    rig r;
    rig_open(&r, 2, &nd);
    /* GRU */
    const int HW = 13, D = 6;
    float *h = rnd((size_t)HW * D), *val = rnd((size_t)HW * 3 * D);
    double *w = malloc((size_t)HW * 64 * sizeof(double));
    for (int p = 0; p < HW; p++)
        for (int i = 0; i < D; i++) {
            const float *vv = val + (size_t)p * 3 * D;
            double f = sig(vv[i]), u = sig(vv[D + i]), nv = tanh(vv[2 * D + i]);
            w[p * D + i] = f * h[p * D + i] * (1 - u) + u * nv;
        }
    ck_cpu_gru_update(&r.be, h, val, HW, D);
    double e = maxerr(h, w, (size_t)HW * D);
    printf("  gru_update: max err %.2e\n", e);
    CHECK(e < 1e-6);
    /* channel attention: conv1d k=5 over the channel means */
    const int C = 9, kk = 5, n = 2;
    float *x = rnd((size_t)n * HW * C), *res = rnd((size_t)n * HW * C), *cw = rnd(kk);
    float *out = malloc((size_t)n * HW * C * sizeof(float));
    double *cwant = malloc((size_t)n * HW * C * sizeof(double));
    for (int b = 0; b < n; b++) {
        double mean[16], gate[16];
        for (int c = 0; c < C; c++) {
            mean[c] = 0;
            for (int p = 0; p < HW; p++) mean[c] += x[((size_t)b * HW + p) * C + c];
            mean[c] /= HW;
        }
        for (int c = 0; c < C; c++) {
            double s = 0;
            for (int t = 0; t < kk; t++)
                if (c + t - 2 >= 0 && c + t - 2 < C) s += cw[t] * mean[c + t - 2];
            gate[c] = sig(s);
        }
        for (int p = 0; p < HW; p++)
            for (int c = 0; c < C; c++) {
                const size_t i = ((size_t)b * HW + p) * C + c;
                cwant[i] = x[i] * gate[c] + res[i];
            }
    }
    ck_cpu_channel_attention(&r.be, x, n, HW, C, cw, kk, res, out);
    e = maxerr(out, cwant, (size_t)n * HW * C);
    printf("  channel_attention: max err %.2e\n", e);
    CHECK(e < 1e-6);
    /* aggregate + softmax over planes; others */
    const int O = 3;
    float *lg = rnd((size_t)O * HW), *ag = malloc((size_t)(O + 1) * HW * sizeof(float));
    for (int i = 0; i < O * HW; i++) lg[i] *= 8;
    ck_cpu_aggregate(&r.be, lg, O, HW, ag);
    double aw[4 * 13];
    for (int p = 0; p < HW; p++) {
        double bg = 1;
        for (int o = 0; o < O; o++) bg *= 1 - sig(lg[o * HW + p]), aw[(o + 1) * HW + p] = agg(sig(lg[o * HW + p]));
        aw[p] = agg(bg);
    }
    e = maxerr(ag, aw, (size_t)(O + 1) * HW);
    printf("  aggregate: max err %.2e\n", e);
    CHECK(e < 1e-4);
    ck_cpu_softmax_planes(&r.be, ag, O + 1, HW);
    for (int p = 0; p < HW; p++) {
        double mx = -INFINITY, s = 0;
        for (int c = 0; c <= O; c++) mx = fmax(mx, aw[c * HW + p]);
        for (int c = 0; c <= O; c++) s += aw[c * HW + p] = exp(aw[c * HW + p] - mx);
        for (int c = 0; c <= O; c++) aw[c * HW + p] /= s;
    }
    e = maxerr(ag, aw, (size_t)(O + 1) * HW);
    printf("  softmax_planes: max err %.2e\n", e);
    CHECK(e < 1e-5);
    float *m = rnd((size_t)O * HW), mo[3 * 13 * 3];
    for (int i = 0; i < O * HW; i++) m[i] = fabsf(m[i]);
    ck_cpu_masks_with_others(&r.be, m, O, HW, mo, 3);
    double worst = 0;
    for (int o = 0; o < O; o++)
        for (int p = 0; p < HW; p++) {
            double s = 0;
            for (int j = 0; j < O; j++) s += j == o ? 0 : m[j * HW + p];
            worst = fmax(worst, fabs(mo[(o * HW + p) * 3] - m[o * HW + p]));
            worst = fmax(worst, fabs(mo[(o * HW + p) * 3 + 1] - fmin(fmax(s, 0), 1)));
        }
    printf("  masks_with_others: max err %.2e\n", worst);
    CHECK(worst < 1e-6);
    /* attention mask: foreground where an object's aggregate is the largest */
    const int Q = 4;
    uint8_t *am = malloc((size_t)O * Q * HW);
    lg[0 * HW + 0] = 20, lg[1 * HW + 0] = -20, lg[2 * HW + 0] = -20; /* pixel 0: object 0 */
    for (int p = 0; p < HW; p++) lg[2 * HW + p] = -30;               /* object 2: nowhere */
    ck_cpu_object_attn_mask(&r.be, lg, O, HW, Q, am);
    int bad = 0;
    for (int o = 0; o < O; o++) {
        int nfg = 0, fgp[13];
        for (int p = 0; p < HW; p++) {
            double best = 0, bgp = 1;
            for (int j = 0; j < O; j++) bgp *= 1 - sig(lg[j * HW + p]);
            best = agg(bgp);
            for (int j = 0; j < O; j++) best = fmax(best, agg(sig(lg[j * HW + p])));
            fgp[p] = agg(sig(lg[o * HW + p])) >= best;
            nfg += fgp[p];
        }
        for (int q = 0; q < Q; q++)
            for (int p = 0; p < HW; p++) {
                int want = q < Q / 2 ? !fgp[p] : fgp[p];
                if ((q < Q / 2 && nfg == 0) || (q >= Q / 2 && nfg == HW)) want = 0;
                bad += am[((size_t)o * Q + q) * HW + p] != want;
            }
    }
    printf("  object_attn_mask: %d wrong of %d (object 2 has no foreground)\n", bad, O * Q * HW);
    CHECK(bad == 0);
    CHECK(am[0] == 0 && am[(size_t)(Q / 2) * HW] == 1);
    /* summary pooling */
    const int E = 5;
    float *feat = rnd((size_t)HW * E), *sl = rnd((size_t)HW * Q), sp[4 * 6];
    double sw[4 * 6];
    ck_cpu_summary_pool(&r.be, m, feat, sl, HW, E, Q, sp);
    for (int q = 0; q < Q; q++) {
        for (int i = 0; i <= E; i++) sw[q * (E + 1) + i] = 0;
        for (int p = 0; p < HW; p++) {
            double wt = sig(sl[p * Q + q]) * (q < Q / 2 ? m[p] : 1 - m[p]);
            for (int i = 0; i < E; i++) sw[q * (E + 1) + i] += wt * feat[p * E + i];
            sw[q * (E + 1) + E] += wt;
        }
    }
    e = maxerr(sp, sw, (size_t)Q * (E + 1));
    printf("  summary_pool: max err %.2e\n", e);
    CHECK(e < 1e-5);
    /* positional encoding at 3 x 4, dim 10 -> d = 6 per axis, 12 channels */
    float pe[3 * 4 * 12];
    ck_cpu_pos_encoding(&r.be, 3, 4, 10, 32, 128, pe);
    worst = 0;
    for (int y = 0; y < 3; y++)
        for (int xx = 0; xx < 4; xx++)
            for (int i = 0; i < 3; i++) {
                const double inv = 1 / pow(128, 2.0 * i / 6), py = y / (2 + 1e-6) * 32, px = xx / (3 + 1e-6) * 32;
                const float *o = pe + (y * 4 + xx) * 12;
                worst = fmax(worst, fabs(o[2 * i] - sin(px * inv)));
                worst = fmax(worst, fabs(o[2 * i + 1] - cos(px * inv)));
                worst = fmax(worst, fabs(o[6 + 2 * i] - sin(py * inv)));
                worst = fmax(worst, fabs(o[6 + 2 * i + 1] - cos(py * inv)));
            }
    printf("  pos_encoding: max err %.2e\n", worst);
    CHECK(worst < 1e-4);
    /* unary, add */
    float u[6] = {-2, -0.5f, 0, 0.5f, 2, 3}, uo[6], ab[2] = {10, 20};
    ck_cpu_unary(&r.be, CK_UNARY_SQUARE_PLUS_1, u, 6, uo);
    CHECK(uo[0] == 5 && uo[2] == 1);
    ck_cpu_unary(&r.be, CK_UNARY_SIGMOID, u, 6, uo);
    CHECK(fabs(uo[4] - sig(2)) < 1e-7);
    ck_cpu_unary(&r.be, CK_UNARY_RELU, u, 6, uo);
    CHECK(uo[0] == 0 && uo[5] == 3);
    ck_cpu_add(&r.be, u, 6, ab, 2, uo);
    CHECK(uo[0] == 8 && uo[1] == 19.5f && uo[5] == 23);
    rig_close(&r);
    free(h), free(val), free(w), free(x), free(res), free(cw), free(out), free(cwant), free(lg), free(ag), free(m),
        free(am), free(feat), free(sl);
}

int main(int argc, char **argv) {
    static const ck_test_case cases[] = {
        {"conv2d", test_conv2d},   {"pool_resize", test_pool_resize}, {"layer_norm", test_layer_norm},
        {"mha", test_mha},         {"pieces", test_pieces},
    };
    return ck_test_main(cases, (int)CK_ARRAY_LEN(cases), argc, argv);
}
