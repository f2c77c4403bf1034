/* CUDA op kernels against the CPU backend (backend-vs-CPU, as ggml's
 * test-backend-ops): same inputs, compare by max abs error. Every case skips
 * with a message on a machine without a CUDA device (CI); `make test-gpu`
 * runs this binary on a machine with an NVIDIA GPU and fails if it skipped. */
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "ckey_debug.h"
#include "cpu/cpu.h"
#include "cuda/backend.h"
#include "model/session.h"
#include "cuda/kernels.h"
#include "core/quantize.h"
#include "media/exr.h"
#include "ckpt/checkpoint.h"
#include "model/ln-fold.h"
#include "model/model.h"
#include "model/session.h"
#include "support/clip.h"
#include "support/testutil.h"
#include "ckey_clip.h"
#include "pixel/pixel.h"
#include "pixel/post.h"


/* fp32 host data as the CPU op table's typed views */
#define T32(p) ck_tensor_of((void *)(p), CK_F32)
#define W32(p) ck_weight_of((p), CK_F32)

static float *random_floats(size_t n, unsigned seed) {
    float *v = malloc(n * sizeof(float));
    for (size_t i = 0; i < n; i++) {
        seed = seed * 1664525u + 1013904223u;
        v[i] = (float)(seed >> 8) / (float)(1u << 24) * 2.0f - 1.0f;
    }
    return v;
}

static float *to_device(const float *h, size_t n) {
    void *d = NULL;
    if (ck_cuda_malloc(&d, n * sizeof(float), NULL)) return NULL;
    if (ck_cuda_copy(d, h, n * sizeof(float), 1, NULL)) {
        ck_cuda_free(d);
        return NULL;
    }
    return d;
}

static void test_devices(void) {
    int n = ck_cuda_device_count();
    printf("  %d CUDA device(s)\n", n);
    if (n == 0) SKIP("no CUDA device on this machine");
    for (int i = 0; i < n; i++) {
        ckey_device_info info;
        ckey_error err;
        CHECKF(ckey_device_get_info(CKEY_DEVICE_CUDA, i, &info, &err) == CKEY_OK, "%s", err.message);
        printf("  cuda:%d %s, sm_%d%d, %d SMs, %.1f GiB (%.1f free)\n", i, info.name, info.compute_major,
               info.compute_minor, info.units, info.memory_total / 1073741824.0, info.memory_free / 1073741824.0);
        CHECK(info.memory_total > 0 && info.units > 0);
    }
}

static void test_layernorm(void) {
    if (ck_cuda_device_count() == 0) SKIP("no CUDA device on this machine");
    const int64_t N = 3000;
    const int Cs[] = {16, 112, 448, 896};
    for (size_t k = 0; k < CK_ARRAY_LEN(Cs); k++) {
        const int C = Cs[k];
        float *x = random_floats((size_t)N * C, 1u + (unsigned)k), *g = random_floats((size_t)C, 7),
              *b = random_floats((size_t)C, 9), *ref = malloc((size_t)N * C * sizeof(float)),
              *got = malloc((size_t)N * C * sizeof(float));
        for (int64_t r = 0; r < N; r++) { /* double-precision reference */
            double s = 0, q = 0;
            for (int i = 0; i < C; i++) s += x[r * C + i];
            double mean = s / C;
            for (int i = 0; i < C; i++) q += (x[r * C + i] - mean) * (x[r * C + i] - mean);
            double rstd = 1.0 / sqrt(q / C + 1e-6);
            for (int i = 0; i < C; i++) ref[r * C + i] = (float)((x[r * C + i] - mean) * rstd * g[i] + b[i]);
        }
        float *dx = to_device(x, (size_t)N * C), *dg = to_device(g, C), *db = to_device(b, C), *dy = NULL;
        REQUIRE(dx && dg && db && ck_cuda_malloc((void **)&dy, (size_t)N * C * sizeof(float), NULL) == CKEY_OK);
        ckey_error err;
        CHECKF(ck_cuda_layernorm(dx, N, C, dg, db, dy, NULL, &err) == CKEY_OK, "%s", err.message);
        REQUIRE(ck_cuda_copy(got, dy, (size_t)N * C * sizeof(float), 0, &err) == CKEY_OK);
        char name[32];
        snprintf(name, sizeof name, "layernorm C=%d", C);
        CHECK(ck_compare(name, got, ref, (size_t)N * C, NULL) < 1e-5);
        ck_cuda_free(dx), ck_cuda_free(dg), ck_cuda_free(db), ck_cuda_free(dy);
        free(x), free(g), free(b), free(ref), free(got);
    }
}

static void test_linear(void) {
    if (ck_cuda_device_count() == 0) SKIP("no CUDA device on this machine");
    ck_cublas *h = NULL;
    ckey_error err;
    REQUIRE(ck_cublas_create(&h, &err) == CKEY_OK);
    const int64_t N = 1000;
    const int in = 448, out = 1344;
    float *x = random_floats((size_t)N * in, 3), *W = random_floats((size_t)out * in, 5),
          *b = random_floats((size_t)out, 11), *ref = random_floats((size_t)N * out, 13),
          *got = malloc((size_t)N * out * sizeof(float));
    float *dx = to_device(x, (size_t)N * in), *dW = to_device(W, (size_t)out * in), *db = to_device(b, out),
          *dy = to_device(ref, (size_t)N * out);
    REQUIRE(dx && dW && db && dy);
    for (int acc = 0; acc < 2; acc++) {
        /* CPU reference: the CPU backend's GEMM + bias (accumulating onto ref's values) */
        ck_sgemm(1, (int)N, out, in, 1.0f, x, in, W, in, acc ? 1.0f : 0.0f, ref, out);
        for (int64_t r = 0; r < N; r++)
            for (int o = 0; o < out; o++) ref[r * out + o] += b[o];
        CHECKF(ck_cuda_linear(h, dx, N, in, dW, db, dy, out, acc, NULL, &err) == CKEY_OK, "%s", err.message);
        REQUIRE(ck_cuda_copy(got, dy, (size_t)N * out * sizeof(float), 0, &err) == CKEY_OK);
        CHECK(ck_compare(acc ? "linear (accumulate)" : "linear", got, ref, (size_t)N * out, NULL) < 1e-4);
    }
    ck_cuda_free(dx), ck_cuda_free(dW), ck_cuda_free(db), ck_cuda_free(dy);
    free(x), free(W), free(b), free(ref), free(got);
    ck_cublas_free(h);
}

/* The CUDA attention kernel against the CPU backend's streamed attention. */
static void test_attention(void) {
    if (ck_cuda_device_count() == 0) SKIP("no CUDA device on this machine");
    ck_config cfg;
    ck_config_default(&cfg);
    size_t per_thread, shared;
    ck_cpu_scratch_floats(&cfg, 256, 2, &(ck_schedule){0}, &per_thread, &shared);
    ck_cpu be;
    memset(&be, 0, sizeof be);
    REQUIRE(ck_pool_create(2, &be.pool, NULL) == CKEY_OK);
    be.threads = 2;
    be.per_thread = per_thread;
    be.scratch = malloc((2 * per_thread + shared) * sizeof(float));
    be.shared = be.scratch + 2 * per_thread;
    const struct { int64_t N; int D, heads, qs; } cases[] = {{1000, 112, 2, 1}, {4096, 448, 8, 1}, {4096, 896, 16, 4}, {256, 32, 2, 4}};
    for (size_t c = 0; c < CK_ARRAY_LEN(cases); c++) {
        const int64_t N = cases[c].N, Nq = N / cases[c].qs;
        const int D = cases[c].D;
        float *qkv = random_floats((size_t)N * 3 * D, 17u + (unsigned)c);
        float *ref = malloc((size_t)Nq * D * sizeof(float)), *got = malloc((size_t)Nq * D * sizeof(float));
        ck_cpu_ops.attention(&be.base, T32(qkv), N, D, cases[c].heads, cases[c].qs, T32(ref));
        float *dq = to_device(qkv, (size_t)N * 3 * D), *dout = NULL;
        REQUIRE(dq && ck_cuda_malloc((void **)&dout, (size_t)Nq * D * sizeof(float), NULL) == CKEY_OK);
        ckey_error err;
        CHECKF(ck_cuda_attention(dq, N, D, cases[c].heads, cases[c].qs, dout, NULL, &err) == CKEY_OK, "%s", err.message);
        REQUIRE(ck_cuda_copy(got, dout, (size_t)Nq * D * sizeof(float), 0, &err) == CKEY_OK);
        char name[64];
        snprintf(name, sizeof name, "attention N=%lld D=%d qs=%d", (long long)N, D, cases[c].qs);
        CHECK(ck_compare(name, got, ref, (size_t)Nq * D, NULL) < 1e-5);
        ck_cuda_free(dq), ck_cuda_free(dout);
        free(qkv), free(ref), free(got);
    }
    free(be.scratch);
    ck_pool_free(be.pool);
}

/* ---- the rest of the op table: each GPU composition against the CPU op ---- */

typedef struct {
    ck_cpu be;
    float *mem;
} cpu_be;

static void cpu_be_init(cpu_be *c, int S) {
    ck_config cfg;
    ck_config_default(&cfg);
    size_t per_thread, shared;
    ck_cpu_scratch_floats(&cfg, S, 2, &(ck_schedule){0}, &per_thread, &shared);
    memset(c, 0, sizeof *c);
    ck_pool_create(2, &c->be.pool, NULL);
    c->be.threads = 2;
    c->be.per_thread = per_thread;
    c->mem = malloc((2 * per_thread + shared) * sizeof(float));
    c->be.scratch = c->mem;
    c->be.shared = c->mem + 2 * per_thread;
    c->be.shared_floats = shared;
}

static void cpu_be_free(cpu_be *c) {
    free(c->mem);
    ck_pool_free(c->be.pool);
}

static float *dev_alloc(size_t n) {
    void *d = NULL;
    return ck_cuda_malloc(&d, n * sizeof(float), NULL) ? NULL : d;
}

static double cmp_dev(const char *name, const float *dev, const float *ref, size_t n) {
    float *h = malloc(n * sizeof(float));
    if (!h || ck_cuda_copy(h, dev, n * sizeof(float), 0, NULL)) {
        free(h);
        return INFINITY;
    }
    double e = ck_compare(name, h, ref, n, NULL);
    free(h);
    return e;
}

static ckey_model *tiny_model(void) {
    char path[512];
    snprintf(path, sizeof path, "%s/tiny/tiny.pth", ck_fixtures_dir());
    ckey_model *m = NULL;
    ckey_error err;
    if (ckey_model_load(path, &m, &err)) printf("  %s\n", err.message);
    return m;
}

static void test_elementwise_ops(void) {
    if (ck_cuda_device_count() == 0) SKIP("no CUDA device on this machine");
    cpu_be cb;
    cpu_be_init(&cb, 128);
    ckey_error err;
    /* reroll */
    {
        const int H = 32, W = 32, k = 2, C = 64;
        float *tok = random_floats((size_t)H * W * C, 21), *ref = malloc((size_t)H * W * C * sizeof(float));
        ck_cpu_ops.reroll(&cb.be.base, T32(tok), H, W, k, C, T32(ref));
        float *dt = to_device(tok, (size_t)H * W * C), *df = dev_alloc((size_t)H * W * C);
        REQUIRE(dt && df && ck_cuda_reroll(dt, H, W, k, C, df, NULL, &err) == CKEY_OK);
        CHECK(cmp_dev("reroll", df, ref, (size_t)H * W * C) == 0.0);
        ck_cuda_free(dt), ck_cuda_free(df), free(tok), free(ref);
    }
    /* refiner input and finalize */
    {
        const int S = 128, G = 32;
        float *x = random_floats(4 * S * S, 23), *lg = random_floats(4 * G * G, 25);
        float *ref = malloc((size_t)7 * S * S * sizeof(float));
        ck_cpu_ops.refiner_input(&cb.be.base, T32(x), T32(lg), S, T32(ref));
        float *dx = to_device(x, 4 * S * S), *dl = to_device(lg, 4 * G * G), *dr = dev_alloc((size_t)7 * S * S);
        REQUIRE(dx && dl && dr && ck_cuda_refiner_input(dx, dl, S, dr, NULL, &err) == CKEY_OK);
        CHECK(cmp_dev("refiner input", dr, ref, (size_t)7 * S * S) < 1e-6);
        float *out = random_floats(4 * S * S, 27);
        float *dout = to_device(out, 4 * S * S);
        ck_cpu_ops.finalize(&cb.be.base, T32(lg), S, T32(out));
        REQUIRE(dout && ck_cuda_finalize(dl, S, dout, NULL, &err) == CKEY_OK);
        CHECK(cmp_dev("finalize", dout, out, 4 * S * S) < 1e-6);
        ck_cuda_free(dx), ck_cuda_free(dl), ck_cuda_free(dr), ck_cuda_free(dout);
        free(x), free(lg), free(ref), free(out);
    }
    /* affine / residual / pointwise on a channels-last map */
    {
        const int C = 64;
        const int64_t HW = 4096;
        float *x = random_floats((size_t)HW * C, 29), *y = random_floats((size_t)HW * C, 31);
        float *a = random_floats(C, 33), *b = random_floats(C, 35);
        float *dx = to_device(x, (size_t)HW * C), *dy = to_device(y, (size_t)HW * C), *da = to_device(a, C),
              *db = to_device(b, C);
        REQUIRE(dx && dy && da && db);
        ck_cpu_ops.affine_relu(&cb.be.base, T32(x), C, HW, a, b);
        REQUIRE(ck_cuda_affine_relu(dx, NULL, C, HW, da, db, NULL, &err) == CKEY_OK);
        CHECK(cmp_dev("affine relu", dx, x, (size_t)HW * C) < 1e-6);
        ck_cpu_ops.residual_affine_relu(&cb.be.base, T32(x), T32(y), C, HW, a, b, NULL, NULL);
        REQUIRE(ck_cuda_affine_relu(dx, dy, C, HW, da, db, NULL, &err) == CKEY_OK);
        CHECK(cmp_dev("residual affine relu", dx, x, (size_t)HW * C) < 1e-6);
        float *Wp = random_floats(4 * C, 37), *bp = random_floats(4, 39), *ref = malloc((size_t)4 * HW * sizeof(float));
        ck_cpu_ops.pointwise_conv(&cb.be.base, T32(x), T32(NULL), NULL, NULL, C, HW, W32(Wp), W32(bp), 10.0f, T32(ref), 4);
        float *dW = to_device(Wp, 4 * C), *dbp = to_device(bp, 4), *dout = dev_alloc((size_t)4 * HW);
        REQUIRE(dW && dbp && dout && ck_cuda_pointwise(dx, C, HW, dW, dbp, 10.0f, dout, 4, NULL, &err) == CKEY_OK);
        CHECK(cmp_dev("pointwise conv", dout, ref, (size_t)4 * HW) < 1e-4);
        /* with the last residual fused (x' = relu(x + a*y + b), not stored on the GPU) */
        REQUIRE(ck_cuda_pointwise_t(dx, dy, da, db, C, HW, dW, dbp, 10.0f, dout, 4, CK_F32, NULL, &err) == CKEY_OK);
        CHECK(cmp_dev("pointwise conv, residual fused: x kept", dx, x, (size_t)HW * C) == 0);
        ck_cpu_ops.pointwise_conv(&cb.be.base, T32(x), T32(y), a, b, C, HW, W32(Wp), W32(bp), 10.0f, T32(ref), 4);
        CHECK(cmp_dev("pointwise conv, residual fused", dout, ref, (size_t)4 * HW) < 1e-4);
        ck_cuda_free(dx), ck_cuda_free(dy), ck_cuda_free(da), ck_cuda_free(db), ck_cuda_free(dW), ck_cuda_free(dbp),
            ck_cuda_free(dout);
        free(x), free(y), free(a), free(b), free(Wp), free(bp), free(ref);
    }
    cpu_be_free(&cb);
}

static void test_conv_and_groupnorm(void) {
    if (ck_cuda_device_count() == 0) SKIP("no CUDA device on this machine");
    const int S = 96, R = 64, groups = 8;
    const int64_t HW = (int64_t)S * S;
    cpu_be cb;
    cpu_be_init(&cb, S);
    ckey_error err;
    float *img = random_floats((size_t)7 * HW, 41), *Ws = random_floats((size_t)R * 7 * 9, 43),
          *bs = random_floats(R, 45), *W = random_floats((size_t)R * R * 9, 47), *bw = random_floats(R, 49);
    for (size_t i = 0; i < (size_t)R * R * 9; i++) W[i] *= 0.125f;
    float *map = malloc((size_t)HW * R * sizeof(float)), *out = malloc((size_t)HW * R * sizeof(float));
    double st[16] = {0}, st2[16] = {0};
    /* stem: image -> map */
    ck_cpu_ops.conv3x3(&cb.be.base, T32(img), 1, 7, S, 1, W32(Ws), W32(bs), NULL, NULL, T32(map), R, groups, st);
    float *dimg = to_device(img, (size_t)7 * HW), *dWs = to_device(Ws, (size_t)R * 63), *dbs = to_device(bs, R);
    float *dmap = dev_alloc((size_t)HW * R), *dout = dev_alloc((size_t)HW * R);
    double *dst = NULL;
    REQUIRE(dimg && dWs && dbs && dmap && dout && ck_cuda_malloc((void **)&dst, 16 * sizeof(double), NULL) == CKEY_OK);
    REQUIRE(ck_cuda_memset(dst, 0, 16 * sizeof(double), &err) == CKEY_OK);
    CHECKF(ck_cuda_conv3x3(dimg, 1, 7, S, 1, dWs, dbs, dmap, R, groups, dst, NULL, &err) == CKEY_OK, "%s", err.message);
    CHECK(cmp_dev("conv3x3 stem", dmap, map, (size_t)HW * R) < 1e-4);
    REQUIRE(ck_cuda_copy(st2, dst, 16 * sizeof(double), 0, &err) == CKEY_OK);
    double worst = 0;
    for (int g = 0; g < 16; g++) worst = fmax(worst, fabs(st[g] - st2[g]) / (1 + fabs(st[g])));
    printf("  stem GroupNorm stats: max relative difference %.3g\n", worst);
    CHECK(worst < 1e-5);
    /* map -> map, dilation 4, and the GroupNorm affine from the stats */
    float *dW = to_device(W, (size_t)R * R * 9), *dbw = to_device(bw, R);
    REQUIRE(dW && dbw);
    memset(st, 0, sizeof st);
    ck_cpu_ops.conv3x3(&cb.be.base, T32(map), 0, R, S, 4, W32(W), W32(bw), NULL, NULL, T32(out), R, groups, st);
    REQUIRE(ck_cuda_memset(dst, 0, 16 * sizeof(double), &err) == CKEY_OK);
    CHECKF(ck_cuda_conv3x3(dmap, 0, R, S, 4, dW, dbw, dout, R, groups, dst, NULL, &err) == CKEY_OK, "%s", err.message);
    CHECK(cmp_dev("conv3x3 dil 4", dout, out, (size_t)HW * R) < 1e-4);
    float *g = random_floats(R, 51), *be = random_floats(R, 53), a[64], b[64];
    ck_cpu_ops.groupnorm_affine(&cb.be.base, st, groups, R, HW, W32(g), W32(be), a, b);
    float *dg = to_device(g, R), *dbe = to_device(be, R), *da = dev_alloc(R), *db = dev_alloc(R);
    REQUIRE(dg && dbe && da && db);
    REQUIRE(ck_cuda_groupnorm_affine(dst, groups, R, HW, dg, dbe, da, db, NULL, &err) == CKEY_OK);
    CHECK(cmp_dev("groupnorm scale", da, a, R) < 1e-4 && cmp_dev("groupnorm shift", db, b, R) < 1e-4);
    ck_cuda_free(dimg), ck_cuda_free(dWs), ck_cuda_free(dbs), ck_cuda_free(dmap), ck_cuda_free(dout), ck_cuda_free(dst);
    ck_cuda_free(dW), ck_cuda_free(dbw), ck_cuda_free(dg), ck_cuda_free(dbe), ck_cuda_free(da), ck_cuda_free(db);
    free(img), free(Ws), free(bs), free(W), free(bw), free(map), free(out), free(g), free(be);
    cpu_be_free(&cb);
}

/* Encoder pieces on the tiny model at S = 128: patch embed, a mask-unit
 * block (plain and expanding), an MLP, and the decoder, each composed from
 * the CUDA building blocks as the CUDA op table composes them, against the
 * CPU op. */
static void test_encoder_decoder_compositions(void) {
    if (ck_cuda_device_count() == 0) SKIP("no CUDA device on this machine");
    ckey_model *m = tiny_model();
    REQUIRE(m);
    const ck_config *c = &m->cfg;
    const int S = 128, G = S / 4, E = c->embed_dim;
    cpu_be cb;
    cpu_be_init(&cb, S);
    ckey_error err;
    ck_cublas *hb = NULL;
    REQUIRE(ck_cublas_create(&hb, &err) == CKEY_OK);
    /* device copy of the weight store; host pointers map by offset */
    float *dstore = to_device(m->store, m->store_floats);
    REQUIRE(dstore);
#define DEV(p) (dstore + (ck_wf32(p) - m->store))
    /* patch embed */
    const int64_t N = (int64_t)G * G;
    float *x = random_floats((size_t)4 * S * S, 61), *tok = malloc((size_t)N * E * sizeof(float));
    ck_cpu_ops.patch_embed(&cb.be.base, c, m->w.patch_w, m->w.patch_b, T32(x), S, m->w.pos_embed, 3, T32(tok));
    float *dx = to_device(x, (size_t)4 * S * S), *dtok = dev_alloc((size_t)N * E);
    REQUIRE(dx && dtok);
    CHECKF(ck_cuda_patch_embed(dx, S, 4, c->patch_kernel, c->patch_stride, c->patch_pad, DEV(m->w.patch_w),
                               DEV(m->w.patch_b), DEV(m->w.pos_embed), E, 3, dtok, NULL, &err) == CKEY_OK, "%s", err.message);
    CHECK(cmp_dev("patch embed", dtok, tok, (size_t)N * E) < 1e-4);
    /* blocks 0 (mask unit, plain) and 1 (mask unit, expanding, q pooled) */
    ck_block_info bi[CK_MAX_BLOCKS];
    ck_config_blocks(c, bi);
    float *cur = tok, *dcur = dtok;
    int64_t n = N;
    for (int i = 0; i < 2; i++) {
        const ck_block_info *b = &bi[i];
        const ck_block_w *w = &m->w.blocks[i];
        const int D = b->dim, Do = b->dim_out, qs = b->q_stride, T = b->window * qs;
        const int64_t Nq = n / qs, nw = n / T;
        float *xo = D != Do ? malloc((size_t)Nq * Do * sizeof(float)) : cur;
        ck_cpu_ops.mask_unit_attention(&cb.be.base, b, w, T32(cur), n, T32(xo));
        float *dxn = dev_alloc((size_t)n * D), *dqkv = dev_alloc((size_t)n * 3 * Do), *datt = dev_alloc((size_t)Nq * Do);
        float *dxo = D != Do ? dev_alloc((size_t)Nq * Do) : dcur;
        REQUIRE(dxn && dqkv && datt && dxo);
        REQUIRE(ck_cuda_layernorm(dcur, n, D, DEV(w->norm1_w), DEV(w->norm1_b), dxn, NULL, &err) == CKEY_OK);
        REQUIRE(ck_cuda_linear(hb, dxn, n, D, DEV(w->qkv_w), DEV(w->qkv_b), dqkv, 3 * Do, 0, NULL, &err) == CKEY_OK);
        if (D != Do) {
            float *dpr = dev_alloc((size_t)n * Do);
            REQUIRE(dpr && ck_cuda_linear(hb, dxn, n, D, DEV(w->proj_w), NULL, dpr, Do, 0, NULL, &err) == CKEY_OK);
            REQUIRE(ck_cuda_maxpool_bias(dpr, Nq, Do, qs, DEV(w->proj_b), dxo, NULL, &err) == CKEY_OK);
            ck_cuda_free(dpr);
        }
        CHECKF(ck_cuda_window_attention(dqkv, nw, T, qs, Do, b->heads, datt, NULL, &err) == CKEY_OK, "%s", err.message);
        REQUIRE(ck_cuda_linear(hb, datt, Nq, Do, DEV(w->attn_proj_w), DEV(w->attn_proj_b), dxo, Do, 1, NULL, &err) == CKEY_OK);
        char name[48];
        snprintf(name, sizeof name, "mask-unit block %d", i);
        CHECK(cmp_dev(name, dxo, xo, (size_t)Nq * Do) < 1e-4);
        /* MLP: layernorm, fc1, bias + GELU, fc2 accumulated onto the tokens */
        const int hid = Do * c->mlp_ratio;
        ck_cpu_ops.mlp(&cb.be.base, T32(xo), Nq, Do, w, hid);
        float *dh = dev_alloc((size_t)Nq * hid);
        REQUIRE(dh);
        REQUIRE(ck_cuda_layernorm(dxo, Nq, Do, DEV(w->norm2_w), DEV(w->norm2_b), dxn, NULL, &err) == CKEY_OK);
        REQUIRE(ck_cuda_linear(hb, dxn, Nq, Do, DEV(w->fc1_w), NULL, dh, hid, 0, NULL, &err) == CKEY_OK);
        REQUIRE(ck_cuda_bias_gelu(dh, Nq, hid, DEV(w->fc1_b), NULL, &err) == CKEY_OK);
        REQUIRE(ck_cuda_linear(hb, dh, Nq, hid, DEV(w->fc2_w), DEV(w->fc2_b), dxo, Do, 1, NULL, &err) == CKEY_OK);
        snprintf(name, sizeof name, "block %d after mlp", i);
        CHECK(cmp_dev(name, dxo, xo, (size_t)Nq * Do) < 1e-4);
        ck_cuda_free(dxn), ck_cuda_free(dqkv), ck_cuda_free(datt), ck_cuda_free(dh);
        if (cur != xo) {
            free(cur);
            ck_cuda_free(dcur);
        }
        cur = xo, dcur = dxo, n = Nq;
    }
    free(cur);
    ck_cuda_free(dcur);
    /* decoder: random features at the four scales */
    {
        int Hs[4], Cs[4], nf = 0;
        int H = G;
        for (int i = 0; i < ck_config_num_blocks(c) && nf < 4; i++) {
            if (bi[i].q_stride > 1) H /= 2;
            if (bi[i].stage_end) Hs[nf] = H, Cs[nf] = bi[i].dim_out, nf++;
        }
        const int D2 = 2 * c->dec_dim;
        float *feat[4], *dfeat[4], *P[3], *dP[3];
        for (int k = 0; k < 4; k++) {
            feat[k] = random_floats((size_t)Hs[k] * Hs[k] * Cs[k], 71u + (unsigned)k);
            dfeat[k] = to_device(feat[k], (size_t)Hs[k] * Hs[k] * Cs[k]);
        }
        for (int k = 1; k < 4; k++) {
            const int64_t nk = (int64_t)Hs[k] * Hs[k];
            P[k - 1] = malloc((size_t)nk * D2 * sizeof(float));
            ck_cpu_ops.linear(&cb.be.base, T32(feat[k]), nk, Cs[k], m->w.dec.scale_w[k], m->w.dec.scale_b[k], T32(P[k - 1]), D2, 0);
            dP[k - 1] = dev_alloc((size_t)nk * D2);
            REQUIRE(dP[k - 1] && ck_cuda_linear(hb, dfeat[k], nk, Cs[k], DEV(m->w.dec.scale_w[k]), DEV(m->w.dec.scale_b[k]),
                                                dP[k - 1], D2, 0, NULL, &err) == CKEY_OK);
        }
        const int Hk[3] = {Hs[1], Hs[2], Hs[3]};
        float *lg = malloc((size_t)4 * G * G * sizeof(float));
        const ck_tensor Pt[3] = {T32(P[0]), T32(P[1]), T32(P[2])};
        ck_cpu_ops.decoder_fuse(&cb.be.base, c, &m->w.dec, T32(feat[0]), G, Cs[0], Pt, Hk, T32(lg));
        float *dh = dev_alloc((size_t)G * G * D2), *dlg = dev_alloc((size_t)4 * G * G);
        REQUIRE(dh && dlg);
        REQUIRE(ck_cuda_linear(hb, dfeat[0], (int64_t)G * G, Cs[0], DEV(m->w.dec.scale_w[0]), NULL, dh, D2, 0, NULL, &err) ==
                CKEY_OK);
        CHECKF(ck_cuda_decoder_epilogue(dh, 0, (int64_t)G * G, G, D2, dP[0], Hk[0], dP[1], Hk[1], dP[2], Hk[2],
                                        DEV(m->w.dec.scale_b[0]), DEV(m->w.dec.cls_w), DEV(m->w.dec.cls_b), dlg, NULL,
                                        &err) == CKEY_OK, "%s", err.message);
        CHECK(cmp_dev("decoder logits", dlg, lg, (size_t)4 * G * G) < 1e-4);
        for (int k = 0; k < 4; k++) free(feat[k]), ck_cuda_free(dfeat[k]);
        for (int k = 0; k < 3; k++) free(P[k]), ck_cuda_free(dP[k]);
        free(lg), ck_cuda_free(dh), ck_cuda_free(dlg);
    }
#undef DEV
    free(x), ck_cuda_free(dx), ck_cuda_free(dstore);
    ck_cublas_free(hb);
    cpu_be_free(&cb);
    ckey_model_free(m);
}

/* The whole network on the GPU (fp32) against the PyTorch fixtures, as
 * tests/test-model.c does on the CPU: final alpha/fg within 1e-4. */
typedef struct {
    const ck_checkpoint *gold;
    int bad;
} gpu_tap_ctx;

static void gpu_tap(void *user, const char *name, const float *data, const int64_t *shape, int32_t ndim) {
    gpu_tap_ctx *t = user;
    const ck_tensor_info *g = ck_checkpoint_find(t->gold, name);
    if (!g) return;
    int64_t n = 1;
    for (int i = 0; i < ndim; i++) n *= shape[i];
    if ((int64_t)g->numel != n) {
        t->bad = 1;
        return;
    }
    float *want = malloc((size_t)n * sizeof(float)), *got = malloc((size_t)n * sizeof(float));
    if (ck_tensor_to_f32(g, want, NULL)) t->bad = 1;
    if (name[0] == 'c' && name[1] >= '1' && name[1] <= '4' && !name[2]) {
        const int64_t H = shape[0], W = shape[1], C = shape[2];
        for (int64_t c = 0; c < C; c++)
            for (int64_t p = 0; p < H * W; p++) got[c * H * W + p] = data[p * C + c];
    } else {
        memcpy(got, data, (size_t)n * sizeof(float));
    }
    char label[48];
    snprintf(label, sizeof label, "gpu %s", name);
    ck_compare(label, got, want, (size_t)n, NULL);
    free(want), free(got);
}

/* PyTorch autocast's error on the same case, [alpha mean, alpha max, fg mean, fg max]
 * (tools/reference/make_fixtures.py, full256-autocast.safetensors). */
static int autocast_error(const char *name, float out[4]) {
    char p[512];
    snprintf(p, sizeof p, "%s/full256-autocast.safetensors", ck_fixtures_dir());
    ck_checkpoint *c = NULL;
    if (ck_checkpoint_open(p, &c, NULL)) return 0;
    const ck_tensor_info *t = ck_checkpoint_find(c, name);
    int ok = t && t->numel == 4 && !ck_tensor_to_f32(t, out, NULL);
    ck_checkpoint_close(c);
    return ok;
}

static double mean_abs(const float *a, const float *b, size_t n) {
    double s = 0;
    for (size_t i = 0; i < n; i++) s += fabs((double)a[i] - (double)b[i]);
    return s / (double)n;
}

static void gpu_network_case(ckey_model *m, const char *gold_rel, int S, const float *x) {
    char gp[512];
    snprintf(gp, sizeof gp, "%s/%s", ck_fixtures_dir(), gold_rel);
    ck_checkpoint *gold = NULL;
    REQUIRE(ck_checkpoint_open(gp, &gold, NULL) == CKEY_OK);
    ckey_session_options o;
    ckey_session_options_default(&o);
    o.size = S;
    o.device = CKEY_DEVICE_CUDA;
    o.precision = CKEY_PRECISION_FP32;
    ckey_session *s = NULL;
    ckey_error err;
    CHECKF(ckey_session_create(m, &o, &s, &err) == CKEY_OK, "%s", err.message);
    if (s) {
        gpu_tap_ctx t = {gold, 0};
        ckey_session_set_tap(s, gpu_tap, &t);
        ckey_forward_result r;
        CHECKF(ckey_session_forward(s, x, &r, &err) == CKEY_OK, "%s", err.message);
        const int64_t HW = (int64_t)S * S;
        float *want = malloc((size_t)4 * HW * sizeof(float));
        const ck_tensor_info *ga = ck_checkpoint_find(gold, "alpha"), *gf = ck_checkpoint_find(gold, "fg");
        if (ga && gf && !ck_tensor_to_f32(ga, want, NULL) && !ck_tensor_to_f32(gf, want + HW, NULL)) {
            ckey_session_set_tap(s, NULL, NULL);
            REQUIRE(ckey_session_forward(s, x, &r, &err) == CKEY_OK);
            double ea = ck_compare("gpu alpha (final)", r.alpha, want, (size_t)HW, NULL);
            double ef = ck_compare("gpu fg (final)", r.fg, want + HW, (size_t)(3 * HW), NULL);
            CHECKF(ea <= 1e-4 && ef <= 1e-4, "alpha %.3g, fg %.3g over 1e-4", ea, ef);
            ckey_memory_plan mp;
            ckey_session_get_plan(s, &mp);
            printf("  S=%d on the GPU: %.3f s, planned device arena %.1f MiB\n", S, r.seconds, mp.arena_bytes / 1048576.0);
        } else {
            CHECK(!"golden alpha/fg readable");
        }
        CHECK(!t.bad);
        free(want);
    }
    ckey_session_free(s);
    ck_checkpoint_close(gold);
}

/* Frames after the first run as a CUDA graph (captured on the second frame,
 * replayed after): the replay must read each frame's new input and give
 * what the eager first frame gave. `first` is frame 1's [4, S, S] output
 * for x; frames 2..4 are x2, x, x2. */
static void graph_replay_check(ckey_session *s, const float *x, const float *first, int S, const char *pname) {
    const int64_t HW = (int64_t)S * S;
    const size_t n = (size_t)4 * HW;
    float *x2 = malloc(n * sizeof(float)), *o2 = malloc(n * sizeof(float));
    REQUIRE(x2 && o2);
    for (int64_t i = 0; i < HW; i++) x2[i] = x[HW - 1 - i]; /* the image, turned 180 degrees */
    for (int c = 1; c < 4; c++)
        for (int64_t i = 0; i < HW; i++) x2[c * HW + i] = x[c * HW + HW - 1 - i];
    ckey_forward_result r;
    ckey_error err;
    int ok = ckey_session_forward(s, x2, &r, &err) == CKEY_OK; /* frame 2: captured, then launched */
    CHECKF(ok, "%s frame 2: %s", pname, err.message);
    if (ok) {
        memcpy(o2, r.alpha, n * sizeof(float));
        double d12 = mean_abs(o2, first, n);
        printf("  %s graph: frame 2 (other input) differs from frame 1 by %.3e (mean)\n", pname, d12);
        CHECKF(d12 > 1e-3, "%s: frame 2 of another input gave frame 1's output", pname);
        ok = ckey_session_forward(s, x, &r, &err) == CKEY_OK; /* frame 3: replay */
        CHECKF(ok, "%s frame 3: %s", pname, err.message);
    }
    if (ok) {
        char l[64];
        snprintf(l, sizeof l, "%s replay (frame 3) vs eager (frame 1)", pname);
        const double e = ck_compare(l, r.alpha, first, n, NULL);
        CHECKF(e <= 2e-3 && mean_abs(r.alpha, first, n) <= 1e-6, "%s: replay differs from eager (max %.3g)", pname, e);
        /* frame 4: replay of the other input, from and into caller-owned page-locked buffers */
        float *hin = ckey_session_host_alloc(s, n * sizeof(float)), *hout = ckey_session_host_alloc(s, n * sizeof(float));
        REQUIRE(hin && hout);
        memcpy(hin, x2, n * sizeof(float));
        ok = ckey_session_forward_into(s, hin, hout, &r, &err) == CKEY_OK;
        CHECKF(ok, "%s frame 4: %s", pname, err.message);
        if (ok) {
            char l4[80];
            snprintf(l4, sizeof l4, "%s replay (frame 4, forward_into) vs captured (frame 2)", pname);
            CHECK(r.alpha == hout && r.fg == hout + HW);
            CHECKF(r.device_seconds > 0 && r.device_seconds <= r.seconds, "device %.6f s, call %.6f s",
                   r.device_seconds, r.seconds);
            const double e4 = ck_compare(l4, hout, o2, n, NULL);
            CHECKF(e4 <= 2e-3 && mean_abs(hout, o2, n) <= 1e-6, "%s: frame 4 differs from frame 2 (max %.3g)", pname,
                   e4);
        }
        ckey_session_host_free(s, hin);
        ckey_session_host_free(s, hout);
    }
    free(x2);
    free(o2);
}

/* fp16 / bf16 sessions on the full-size case against the fp32 PyTorch
 * outputs; bar (SPEC.md): mean abs error <= 1.5x PyTorch autocast's own. */
static void gpu_precision_case(ckey_model *m, const char *gold_rel, int S, const float *x, ckey_precision prec,
                               uint32_t cuda_off) {
    const char *pname = ckey_precision_name(prec);
    char gp[512], key[64];
    snprintf(gp, sizeof gp, "%s/%s", ck_fixtures_dir(), gold_rel);
    snprintf(key, sizeof key, "autocast_%s_err", pname);
    float ac[4];
    if (!autocast_error(key, ac)) {
        CHECK(!"full256-autocast.safetensors readable");
        return;
    }
    ck_checkpoint *gold = NULL;
    REQUIRE(ck_checkpoint_open(gp, &gold, NULL) == CKEY_OK);
    ckey_session_options o;
    ckey_session_options_default(&o);
    o.size = S;
    o.device = CKEY_DEVICE_CUDA;
    o.precision = prec;
    ckey_session *s = NULL;
    ckey_error err;
    CHECKF(ckey_session_create_debug(m, &o, cuda_off, &s, &err) == CKEY_OK, "%s", err.message);
    const int64_t HW = (int64_t)S * S;
    float *want = malloc((size_t)4 * HW * sizeof(float));
    const ck_tensor_info *ga = ck_checkpoint_find(gold, "alpha"), *gf = ck_checkpoint_find(gold, "fg");
    ckey_forward_result r;
    if (s && ga && gf && !ck_tensor_to_f32(ga, want, NULL) && !ck_tensor_to_f32(gf, want + HW, NULL) &&
        ckey_session_forward(s, x, &r, &err) == CKEY_OK) {
        char la[64], lf[64];
        snprintf(la, sizeof la, "gpu %s alpha", pname);
        snprintf(lf, sizeof lf, "gpu %s fg", pname);
        const double xa = ck_compare(la, r.alpha, want, (size_t)HW, NULL);
        const double xf = ck_compare(lf, r.fg, want + HW, (size_t)(3 * HW), NULL);
        const double ma = mean_abs(r.alpha, want, (size_t)HW), mf = mean_abs(r.fg, want + HW, (size_t)(3 * HW));
        printf("  %s: ckey alpha mean %.3e max %.3e | PyTorch autocast alpha mean %.3e max %.3e\n", pname, ma, xa,
               ac[0], ac[1]);
        printf("  %s: ckey fg    mean %.3e max %.3e | PyTorch autocast fg    mean %.3e max %.3e\n", pname, mf, xf,
               ac[2], ac[3]);
        CHECKF(ma <= 1.5 * ac[0] && mf <= 1.5 * ac[2], "%s mean error alpha %.3g fg %.3g over 1.5x autocast's (%.3g, %.3g)",
               pname, ma, mf, ac[0], ac[2]);
        float *first = malloc((size_t)4 * HW * sizeof(float));
        REQUIRE(first);
        memcpy(first, r.alpha, (size_t)4 * HW * sizeof(float));
        graph_replay_check(s, x, first, S, pname);
        free(first);
        /* every linear layer with a bias ran as one cublasLtMatmul, the bias in its epilogue */
        int fused = 0, fallback = 0, bfused = 0, bfallback = 0;
        ck_cuda_backend_blas_plan_counts(ck_session_backend(s), 0, &fused, &fallback);
        ck_cuda_backend_blas_plan_counts(ck_session_backend(s), 1, &bfused, &bfallback);
        printf("  %s cuBLASLt plans: %d with an algorithm, %d without (GEMM + bias pass); with a bias: %d fused, "
               "%d not\n", pname, fused, fallback, bfused, bfallback);
        CHECKF(bfused > 0 && bfallback == 0, "%s: %d of the network's linear layers with a bias not fused", pname,
               bfallback);
        ckey_memory_plan mp;
        ckey_session_get_plan(s, &mp);
        printf("  S=%d %s on the GPU: %.3f s, planned weights %.1f MiB + arena %.1f MiB\n", S, pname, r.seconds,
               mp.weight_bytes / 1048576.0, mp.arena_bytes / 1048576.0);
    } else {
        CHECKF(0, "%s session on the GPU: %s", pname, err.message);
    }
    free(want);
    ckey_session_free(s);
    ck_checkpoint_close(gold);
}

static void test_network_reduced_precision(void) {
    if (ck_cuda_device_count() == 0) SKIP("no CUDA device on this machine");
    ck_config cfg;
    ck_config_default(&cfg);
    ckey_model *m = NULL;
    REQUIRE(ck_model_synthetic(&cfg, &m, NULL) == CKEY_OK);
    float *x = malloc((size_t)4 * 256 * 256 * sizeof(float));
    ck_synth_input(256, x);
    gpu_precision_case(m, "full256.safetensors", 256, x, CKEY_PRECISION_FP16, 0);
    gpu_precision_case(m, "full256.safetensors", 256, x, CKEY_PRECISION_BF16, 0);
    /* the same bars without the LN fold (norm2, then the fused fc1; read at session creation) */
    if (ck_cuda_wgmma_ok()) {
        printf("  without the LN fold (CKEY_DEBUG_CUDA_NO_LN_FOLD):\n");
        gpu_precision_case(m, "full256.safetensors", 256, x, CKEY_PRECISION_FP16, CKEY_DEBUG_CUDA_NO_LN_FOLD);
        gpu_precision_case(m, "full256.safetensors", 256, x, CKEY_PRECISION_BF16, CKEY_DEBUG_CUDA_NO_LN_FOLD);
    }
    free(x);
    ckey_model_free(m);
}

/* The same input keyed again gives the same bits: a GPU run is repeatable
 * (a farm's re-rendered chunk matches the first render), at fp32 and fp16,
 * with another input keyed in between and S = 512 so that the refiner's
 * GroupNorm statistics are gathered from many blocks. */
static void test_network_repeatable(void) {
    if (ck_cuda_device_count() == 0) SKIP("no CUDA device on this machine");
    ckey_model *m = tiny_model();
    REQUIRE(m);
    const int S = 512;
    const size_t HW = (size_t)S * S;
    float *x = random_floats(4 * HW, 7001), *y = random_floats(4 * HW, 7002), *first = malloc(4 * HW * sizeof(float));
    REQUIRE(x && y && first);
    for (size_t i = 0; i < 4 * HW; i++) x[i] = 0.5f + 0.5f * x[i], y[i] = 0.5f + 0.5f * y[i];
    static const ckey_precision prec[2] = {CKEY_PRECISION_FP32, CKEY_PRECISION_FP16};
    for (int k = 0; k < 2; k++) {
        ckey_session_options o;
        ckey_session_options_default(&o);
        o.size = S;
        o.device = CKEY_DEVICE_CUDA;
        o.precision = prec[k];
        ckey_session *s = NULL;
        ckey_error err;
        CHECKF(ckey_session_create(m, &o, &s, &err) == CKEY_OK, "%s", err.message);
        if (!s) continue;
        ckey_forward_result r;
        long differ = 0;
        int runs = 0;
        for (int rep = 0; rep < 4; rep++) {
            const int again = rep > 0;
            CHECKF(ckey_session_forward(s, x, &r, &err) == CKEY_OK, "%s", err.message);
            if (!again) {
                memcpy(first, r.alpha, HW * sizeof(float));
                memcpy(first + HW, r.fg, 3 * HW * sizeof(float));
            } else {
                differ += memcmp(first, r.alpha, HW * sizeof(float)) != 0;
                differ += memcmp(first + HW, r.fg, 3 * HW * sizeof(float)) != 0;
                runs++;
            }
            CHECKF(ckey_session_forward(s, y, &r, &err) == CKEY_OK, "%s", err.message);
        }
        printf("  %s S=%d: %d repeats of the same input, %ld outputs not bit for bit the first run's\n",
               k ? "fp16" : "fp32", S, runs, differ);
        CHECK(differ == 0);
        ckey_session_free(s);
    }
    free(x), free(y), free(first);
    ckey_model_free(m);
}

static void test_network_tiny(void) {
    if (ck_cuda_device_count() == 0) SKIP("no CUDA device on this machine");
    ckey_model *m = tiny_model();
    REQUIRE(m);
    const int sizes[2] = {128, 64};
    const char *golds[2] = {"tiny/tiny_s128.safetensors", "tiny/tiny_s64.safetensors"};
    for (int i = 0; i < 2; i++) {
        char gp[512];
        snprintf(gp, sizeof gp, "%s/%s", ck_fixtures_dir(), golds[i]);
        ck_checkpoint *g = NULL;
        REQUIRE(ck_checkpoint_open(gp, &g, NULL) == CKEY_OK);
        const ck_tensor_info *t = ck_checkpoint_find(g, "x");
        float *x = t ? malloc(t->numel * sizeof(float)) : NULL;
        REQUIRE(x && !ck_tensor_to_f32(t, x, NULL));
        ck_checkpoint_close(g);
        gpu_network_case(m, golds[i], sizes[i], x);
        free(x);
    }
    ckey_model_free(m);
}

static void test_network_full256(void) {
    if (ck_cuda_device_count() == 0) SKIP("no CUDA device on this machine");
    ck_config cfg;
    ck_config_default(&cfg);
    ckey_model *m = NULL;
    REQUIRE(ck_model_synthetic(&cfg, &m, NULL) == CKEY_OK);
    float *x = malloc((size_t)4 * 256 * 256 * sizeof(float));
    ck_synth_input(256, x);
    gpu_network_case(m, "full256.safetensors", 256, x);
    free(x);
    ckey_model_free(m);
}

/* ---- tensor-core attention, fp16 / bf16 storage ----
 * Inputs are rounded to 16 bits on the host; the fp32 CUDA kernels (checked
 * against the CPU above) run on the rounded values, so what remains is the
 * kernel's own error: P rounded to 16 bits before P.V (relative 2^-11 f16,
 * 2^-8 bf16 per weight, mostly averaging out over keys) and the output
 * rounded to 16 bits (half an ulp: <= 2.4e-4 f16, <= 2e-3 bf16 for |out| < 1).
 * Worst case with |v| <= 1 about 1e-3 (f16) and 6e-3 (bf16): bars 2e-3 and
 * 1.5e-2. A dropped or doubled key shows well above them in the short
 * sequences (N = 36, 77). */

static uint16_t f32_to_bf16(float f) {
    uint32_t u;
    memcpy(&u, &f, 4);
    u += 0x7fffu + ((u >> 16) & 1u); /* round to nearest even (no NaN here) */
    return (uint16_t)(u >> 16);
}

static float bf16_to_f32(uint16_t h) {
    uint32_t u = (uint32_t)h << 16;
    float f;
    memcpy(&f, &u, 4);
    return f;
}

static uint16_t f32_to_f16(float f) {
    uint32_t x;
    memcpy(&x, &f, 4);
    const uint32_t sign = (x >> 16) & 0x8000u;
    x &= 0x7fffffffu;
    if (x >= 0x477ff000u) return (uint16_t)(sign | 0x7c00u); /* rounds to >= 65520: inf */
    if (x < 0x38800000u) {                                    /* below 2^-14: subnormal steps of 2^-24 */
        float a;
        memcpy(&a, &x, 4);
        return (uint16_t)(sign | (uint32_t)lrintf(a * 16777216.0f));
    }
    x -= 0x38000000u; /* exponent bias 127 -> 15 */
    x += 0xfffu + ((x >> 13) & 1u);
    return (uint16_t)(sign | (x >> 13));
}

static float f16_to_f32(uint16_t h) {
    const int e = (h >> 10) & 31, m = h & 1023;
    float v = e == 0 ? ldexpf((float)m, -24) : e == 31 ? INFINITY : ldexpf((float)(1024 + m), e - 25);
    return (h & 0x8000u) ? -v : v;
}

static const char *dt_name(ck_dtype dt) { return dt == CK_F16 ? "f16" : "bf16"; }
static double tc_bar(ck_dtype dt) { return dt == CK_F16 ? 2e-3 : 1.5e-2; }

/* Random qkv [rows, 3*D], q and k times 2 (score std ~2: a peaked softmax),
 * rounded to dt in place; returns the 16-bit copy on the device. */
static void *tc_inputs(float *qkv, int64_t rows, int D, ck_dtype dt) {
    const size_t n = (size_t)rows * 3 * D;
    uint16_t *bits = malloc(n * sizeof(uint16_t));
    for (size_t i = 0; i < n; i++) {
        float v = qkv[i] * ((int)(i % (3 * (size_t)D)) < 2 * D ? 2.0f : 1.0f);
        bits[i] = dt == CK_F16 ? f32_to_f16(v) : f32_to_bf16(v);
        qkv[i] = dt == CK_F16 ? f16_to_f32(bits[i]) : bf16_to_f32(bits[i]);
    }
    void *d = NULL;
    if (ck_cuda_malloc(&d, n * 2, NULL) || ck_cuda_copy(d, bits, n * 2, 1, NULL)) {
        ck_cuda_free(d);
        d = NULL;
    }
    free(bits);
    return d;
}

/* Device output of n 16-bit values followed by a guard of 256 bytes set to
 * 0x5a; returns the floats, or NULL if the guard was overwritten. */
static float *tc_download(const void *dev, size_t n, ck_dtype dt) {
    uint8_t *raw = malloc(n * 2 + 256);
    float *f = malloc(n * sizeof(float));
    if (ck_cuda_copy(raw, dev, n * 2 + 256, 0, NULL)) n = 0, raw[n * 2] = 0;
    int guard_ok = 1;
    for (size_t i = 0; i < 256; i++) guard_ok &= raw[n * 2 + i] == 0x5a;
    for (size_t i = 0; i < n; i++) {
        uint16_t h;
        memcpy(&h, raw + 2 * i, 2);
        f[i] = dt == CK_F16 ? f16_to_f32(h) : bf16_to_f32(h);
    }
    free(raw);
    if (!guard_ok || n == 0) {
        printf("  output guard overwritten (or copy failed)\n");
        free(f);
        return NULL;
    }
    return f;
}

static void *tc_out_alloc(size_t n) {
    void *d = NULL;
    if (ck_cuda_malloc(&d, n * 2 + 256, NULL)) return NULL;
    if (ck_cuda_memset(d, 0x5a, n * 2 + 256, NULL)) {
        ck_cuda_free(d);
        return NULL;
    }
    return d;
}

static void tc_check(const char *name, const float *got, const float *ref, size_t n, ck_dtype dt) {
    double mag = 0;
    for (size_t i = 0; i < n; i++) mag = fmax(mag, fabs(ref[i]));
    const double e = ck_compare(name, got, ref, n, NULL);
    printf("    max |ref| %.3f, bar %.1e\n", mag, tc_bar(dt));
    CHECKF(e <= tc_bar(dt), "%s: max abs err %.3g over the bar %.1e", name, e, tc_bar(dt));
}

/* One attention case for the 16-bit kernels: random qkv [N, 3D] (seed),
 * uploaded in dt, and the fp32 CUDA-core kernel's output as the reference
 * (host, [Nq, D]). */
typedef struct attn_case {
    void *d16;  /* qkv in dt, on the device */
    float *ref; /* the fp32 reference, host */
    int64_t Nq;
} attn_case;

/* kgrow > 0: key j's k scaled by 1 + kgrow j / N, so that the scores grow along the keys and a
 * row's running max moves again and again (the wgmma kernel's P check then takes its max path on
 * later tiles, which uniform random keys almost never make it do). */
static void attn_case_make_grow(attn_case *ac, int64_t N, int D, int heads, int qs, unsigned seed, ck_dtype dt,
                                float kgrow) {
    ac->Nq = N / qs;
    float *qkv = random_floats((size_t)N * 3 * D, seed);
    for (int64_t j = 0; kgrow > 0 && j < N; j++)
        for (int d = 0; d < D; d++) qkv[j * 3 * D + D + d] *= 1.0f + kgrow * (float)j / (float)N;
    ac->d16 = tc_inputs(qkv, N, D, dt);
    float *dq = to_device(qkv, (size_t)N * 3 * D), *dref = dev_alloc((size_t)ac->Nq * D);
    ac->ref = malloc((size_t)ac->Nq * D * sizeof(float));
    REQUIRE(ac->d16 && dq && dref && ac->ref);
    ckey_error err;
    REQUIRE(ck_cuda_attention(dq, N, D, heads, qs, dref, NULL, &err) == CKEY_OK);
    REQUIRE(ck_cuda_copy(ac->ref, dref, (size_t)ac->Nq * D * sizeof(float), 0, &err) == CKEY_OK);
    ck_cuda_free(dq), ck_cuda_free(dref);
    free(qkv);
}

static void attn_case_make(attn_case *ac, int64_t N, int D, int heads, int qs, unsigned seed, ck_dtype dt) {
    attn_case_make_grow(ac, N, D, heads, qs, seed, dt, 0.0f);
}

/* A kernel's output for the case (dout, [Nq, D] in dt, launched on the
 * default stream): synchronize, download, check against the reference with
 * tc_check under `name`; dout is freed. */
static void attn_case_check(const attn_case *ac, void *dout, int D, ck_dtype dt, const char *name) {
    ckey_error err;
    CHECKF(ck_cuda_sync(&err) == CKEY_OK, "%s", err.message);
    float *got = tc_download(dout, (size_t)ac->Nq * D, dt);
    CHECK(got != NULL);
    if (got) tc_check(name, got, ac->ref, (size_t)ac->Nq * D, dt);
    ck_cuda_free(dout);
    free(got);
}

static void attn_case_free(attn_case *ac) {
    ck_cuda_free(ac->d16);
    free(ac->ref);
}

static void test_attention_tc(void) {
    if (ck_cuda_device_count() == 0) SKIP("no CUDA device on this machine");
    const struct { int64_t N; int D, heads, qs; } cases[] = {
        {1000, 32, 2, 1},  {300, 64, 2, 1},     {77, 56, 1, 1},  {1000, 112, 2, 1}, {200, 64, 1, 1},
        {520, 128, 2, 4},  {36, 32, 1, 4},      {4096, 448, 8, 1}, {4096, 896, 16, 4}, {2050, 448, 8, 1},
    };
    for (size_t c = 0; c < CK_ARRAY_LEN(cases); c++)
        for (int k = 0; k < 2; k++) {
            const ck_dtype dt = k ? CK_BF16 : CK_F16;
            const int64_t N = cases[c].N;
            const int D = cases[c].D, heads = cases[c].heads, qs = cases[c].qs;
            attn_case ac;
            attn_case_make(&ac, N, D, heads, qs, 101u + (unsigned)c, dt);
            void *dout = tc_out_alloc((size_t)ac.Nq * D);
            REQUIRE(dout);
            ckey_error err;
            CHECKF(ck_cuda_attention_tc(ac.d16, N, D, heads, qs, dout, dt, NULL, &err) == CKEY_OK, "%s", err.message);
            char name[96];
            snprintf(name, sizeof name, "attention_tc %s N=%lld D=%d h=%d qs=%d", dt_name(dt), (long long)N, D, heads,
                     qs);
            attn_case_check(&ac, dout, D, dt, name);
            attn_case_free(&ac);
        }
}

/* The forms of the Hopper wgmma attention (ck_attn_wgmma_form), by name. */
static const char *wgmma_form_name(int f) {
    static const char *const names[CK_ATTN_WGMMA_FORMS] = {"auto", "tma128", "tma64", "no-tma"};
    return f >= 0 && f < CK_ATTN_WGMMA_FORMS ? names[f] : "?";
}

/* The Hopper wgmma kernel (head_dim 56 only), in each form the production
 * dispatch may take and in its own choice (auto), against the fp32 kernel:
 * same bars as attention_tc; odd N (tiles of 64 / 128 keys with tails, query
 * tiles of 128 / 256 rows with tails) and qs > 1. */
static void test_attention_wgmma(void) {
    if (ck_cuda_device_count() == 0) SKIP("no CUDA device on this machine");
    if (!ck_cuda_wgmma_ok()) SKIP("the device is not compute capability 9.0 (wgmma is sm_90a only)");
    const struct { int64_t N; int D, heads, qs; float kgrow; } cases[] = {
        {77, 56, 1, 1, 0},     {1000, 112, 2, 1, 0}, {1, 56, 1, 1, 0},      {36, 56, 1, 4, 0},
        {200, 56, 1, 1, 0},    {520, 224, 4, 4, 0},  {129, 112, 2, 1, 0},   {4096, 448, 8, 1, 0},
        {4096, 896, 16, 4, 0}, {2050, 448, 8, 1, 0}, {1030, 448, 8, 2, 0},
        /* scores growing along the keys: the running max moves on later tiles */
        {4096, 448, 8, 1, 30}, {1030, 448, 8, 2, 30}, {2050, 224, 4, 1, 12},
    };
    for (size_t c = 0; c < CK_ARRAY_LEN(cases); c++)
        for (int k = 0; k < 2; k++) {
            const ck_dtype dt = k ? CK_BF16 : CK_F16;
            const int64_t N = cases[c].N;
            const int D = cases[c].D, heads = cases[c].heads, qs = cases[c].qs;
            attn_case ac;
            attn_case_make_grow(&ac, N, D, heads, qs, 101u + (unsigned)c, dt, cases[c].kgrow);
            const int64_t Nq = ac.Nq;
            ckey_error err;
            for (int f = 0; f < CK_ATTN_WGMMA_FORMS; f++) {
                void *dout = tc_out_alloc((size_t)Nq * D);
                REQUIRE(dout);
                CHECKF(ck_cuda_attention_wgmma_form(ac.d16, N, D, heads, qs, dout, dt, (ck_attn_wgmma_form)f, NULL,
                                                    &err) == CKEY_OK,
                       "%s", err.message);
                char name[96];
                snprintf(name, sizeof name, "attention_wgmma %s %s N=%lld D=%d h=%d qs=%d%s", wgmma_form_name(f),
                         dt_name(dt), (long long)N, D, heads, qs, cases[c].kgrow > 0 ? " (keys growing)" : "");
                attn_case_check(&ac, dout, D, dt, name);
            }
            attn_case_free(&ac);
        }
    /* head_dim other than 56: refused, not wrong; so is a form outside the enum */
    ckey_error err;
    CHECK(ck_cuda_attention_wgmma(NULL, 64, 64, 1, 1, NULL, CK_F16, NULL, &err) == CKEY_ERR_UNSUPPORTED);
    CHECK(ck_cuda_attention_wgmma_form(NULL, 64, 56, 1, 1, NULL, CK_F16, CK_ATTN_WGMMA_FORMS, NULL, &err) ==
          CKEY_ERR_INVALID_ARG);
}

static void test_window_attention_tc(void) {
    if (ck_cuda_device_count() == 0) SKIP("no CUDA device on this machine");
    /* stage 1-2 shapes of the real model (blocks 0-1, 2, 3-4, 5) and odd ones */
    const struct { int64_t nw; int T, qs, Do, heads; } cases[] = {
        {64, 64, 1, 112, 2}, {64, 64, 4, 224, 4}, {64, 16, 1, 224, 4}, {64, 16, 4, 448, 8}, {37, 64, 1, 32, 2},
        {37, 16, 1, 64, 2},  {9, 256, 4, 128, 2}, {11, 20, 1, 128, 2}, {5, 200, 2, 112, 2}, {7, 8, 2, 112, 2},
    };
    for (size_t c = 0; c < CK_ARRAY_LEN(cases); c++)
        for (int k = 0; k < 2; k++) {
            const ck_dtype dt = k ? CK_BF16 : CK_F16;
            const int64_t nw = cases[c].nw, rows = nw * cases[c].T, nq = rows / cases[c].qs;
            const int T = cases[c].T, qs = cases[c].qs, Do = cases[c].Do, heads = cases[c].heads;
            float *qkv = random_floats((size_t)rows * 3 * Do, 301u + (unsigned)c);
            void *d16 = tc_inputs(qkv, rows, Do, dt), *dout = tc_out_alloc((size_t)nq * Do);
            float *dq = to_device(qkv, (size_t)rows * 3 * Do), *dref = dev_alloc((size_t)nq * Do);
            REQUIRE(d16 && dout && dq && dref);
            ckey_error err;
            REQUIRE(ck_cuda_window_attention(dq, nw, T, qs, Do, heads, dref, NULL, &err) == CKEY_OK);
            CHECKF(ck_cuda_window_attention_tc(d16, nw, T, qs, Do, heads, dout, dt, NULL, &err) == CKEY_OK, "%s",
                   err.message);
            CHECKF(ck_cuda_sync(&err) == CKEY_OK, "%s", err.message);
            float *ref = malloc((size_t)nq * Do * sizeof(float)), *got = tc_download(dout, (size_t)nq * Do, dt);
            REQUIRE(ck_cuda_copy(ref, dref, (size_t)nq * Do * sizeof(float), 0, &err) == CKEY_OK);
            CHECK(got != NULL);
            char name[96];
            snprintf(name, sizeof name, "window_attention_tc %s nw=%lld T=%d qs=%d Do=%d h=%d", dt_name(dt),
                     (long long)nw, T, qs, Do, heads);
            if (got) tc_check(name, got, ref, (size_t)nq * Do, dt);
            ck_cuda_free(d16), ck_cuda_free(dout), ck_cuda_free(dq), ck_cuda_free(dref);
            free(qkv), free(ref), free(got);
        }
}

static double wall_s(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

/* Timings at S = 2048 shapes (printed, not asserted): host clock around
 * synchronized batches of 20 launches, after 3 warm-up launches. */
static void test_attention_tc_timing(void) {
    if (ck_cuda_device_count() == 0) SKIP("no CUDA device on this machine");
    ckey_error err;
    const int reps = 20;
    const struct { int64_t N; int D, heads, qs; } g[] = {{16384, 448, 8, 1}, {16384, 896, 16, 4}, {4096, 896, 16, 1}};
    for (size_t c = 0; c < CK_ARRAY_LEN(g); c++)
        for (int k = 0; k < 2; k++) {
            const ck_dtype dt = k ? CK_BF16 : CK_F16;
            const int64_t N = g[c].N, Nq = N / g[c].qs;
            const int D = g[c].D;
            float *qkv = random_floats((size_t)N * 3 * D, 7u);
            void *d16 = tc_inputs(qkv, N, D, dt), *dout = tc_out_alloc((size_t)Nq * D);
            REQUIRE(d16 && dout);
            for (int r = 0; r < 3; r++) CHECK(ck_cuda_attention_tc(d16, N, D, g[c].heads, g[c].qs, dout, dt, NULL, &err) == CKEY_OK);
            REQUIRE(ck_cuda_sync(&err) == CKEY_OK);
            const double t0 = wall_s();
            for (int r = 0; r < reps; r++) ck_cuda_attention_tc(d16, N, D, g[c].heads, g[c].qs, dout, dt, NULL, &err);
            REQUIRE(ck_cuda_sync(&err) == CKEY_OK);
            const double ms = (wall_s() - t0) * 1e3 / reps, flop = 4.0 * (double)Nq * (double)N * D;
            printf("  timing attention_tc %-4s N=%lld D=%d heads=%d qs=%d: %.3f ms, %.1f TFLOP/s\n", dt_name(dt),
                   (long long)N, D, g[c].heads, g[c].qs, ms, flop / (ms * 1e-3) / 1e12);
            for (int f = 0; ck_cuda_wgmma_ok() && f < CK_ATTN_WGMMA_FORMS; f++) {
                const ck_attn_wgmma_form form = (ck_attn_wgmma_form)f;
                for (int r = 0; r < 3; r++)
                    CHECK(ck_cuda_attention_wgmma_form(d16, N, D, g[c].heads, g[c].qs, dout, dt, form, NULL, &err) ==
                          CKEY_OK);
                REQUIRE(ck_cuda_sync(&err) == CKEY_OK);
                const double tw = wall_s();
                for (int r = 0; r < reps; r++)
                    ck_cuda_attention_wgmma_form(d16, N, D, g[c].heads, g[c].qs, dout, dt, form, NULL, &err);
                REQUIRE(ck_cuda_sync(&err) == CKEY_OK);
                const double msw = (wall_s() - tw) * 1e3 / reps;
                printf("  timing attention_wgmma %-6s %-4s N=%lld D=%d heads=%d qs=%d: %.3f ms, %.1f TFLOP/s\n",
                       wgmma_form_name(f), dt_name(dt), (long long)N, D, g[c].heads, g[c].qs, msw,
                       flop / (msw * 1e-3) / 1e12);
            }
            if (c == 0 && k == 0) { /* the fp32 CUDA-core kernel, once, for scale */
                float *dq = to_device(qkv, (size_t)N * 3 * D), *dref = dev_alloc((size_t)Nq * D);
                REQUIRE(dq && dref);
                const double t1 = wall_s();
                CHECK(ck_cuda_attention(dq, N, D, g[c].heads, g[c].qs, dref, NULL, &err) == CKEY_OK);
                REQUIRE(ck_cuda_sync(&err) == CKEY_OK);
                const double ms32 = (wall_s() - t1) * 1e3;
                printf("  timing attention (fp32 CUDA cores, one launch): %.3f ms, %.1f TFLOP/s\n", ms32,
                       flop / (ms32 * 1e-3) / 1e12);
                ck_cuda_free(dq), ck_cuda_free(dref);
            }
            ck_cuda_free(d16), ck_cuda_free(dout);
            free(qkv);
        }
    const struct { int64_t nw; int T, qs, Do, heads; } w[] = {
        {4096, 64, 1, 112, 2}, {4096, 64, 4, 224, 4}, {4096, 16, 1, 224, 4}, {4096, 16, 4, 448, 8}};
    for (size_t c = 0; c < CK_ARRAY_LEN(w); c++)
        for (int k = 0; k < 2; k++) {
            const ck_dtype dt = k ? CK_BF16 : CK_F16;
            const int64_t rows = w[c].nw * w[c].T, nq = rows / w[c].qs;
            const int Do = w[c].Do;
            float *qkv = random_floats((size_t)rows * 3 * Do, 9u);
            void *d16 = tc_inputs(qkv, rows, Do, dt), *dout = tc_out_alloc((size_t)nq * Do);
            REQUIRE(d16 && dout);
            for (int r = 0; r < 3; r++)
                CHECK(ck_cuda_window_attention_tc(d16, w[c].nw, w[c].T, w[c].qs, Do, w[c].heads, dout, dt, NULL, &err) == CKEY_OK);
            REQUIRE(ck_cuda_sync(&err) == CKEY_OK);
            const double t0 = wall_s();
            for (int r = 0; r < reps; r++)
                ck_cuda_window_attention_tc(d16, w[c].nw, w[c].T, w[c].qs, Do, w[c].heads, dout, dt, NULL, &err);
            REQUIRE(ck_cuda_sync(&err) == CKEY_OK);
            const double ms = (wall_s() - t0) * 1e3 / reps, bytes = 2.0 * (double)(rows * 3 + nq) * Do;
            printf("  timing window_attention_tc %-4s nw=%lld T=%d qs=%d Do=%d heads=%d: %.3f ms, %.0f GB/s\n",
                   dt_name(dt), (long long)w[c].nw, w[c].T, w[c].qs, Do, w[c].heads, ms, bytes / (ms * 1e-3) / 1e9);
            ck_cuda_free(d16), ck_cuda_free(dout);
            free(qkv);
        }
}

/* ---- the refiner on 16-bit storage (src/cuda/refiner-mma.cu) ---- */

/* (fp16 / bf16 <-> float: the helpers above, round to nearest even) */
static uint16_t to16(float v, ck_dtype dt) { return dt == CK_F16 ? f32_to_f16(v) : f32_to_bf16(v); }
static float from16(uint16_t v, ck_dtype dt) { return dt == CK_F16 ? f16_to_f32(v) : bf16_to_f32(v); }
static float round16(float v, ck_dtype dt) { return from16(to16(v, dt), dt); }
/* unit roundoff of the storage type: |round(v) - v| <= u |v| (normal range) */
static double unit_roundoff(ck_dtype dt) { return dt == CK_F16 ? ldexp(1, -11) : ldexp(1, -8); }

static void *to_device_bytes(const void *h, size_t bytes) {
    void *d = NULL;
    if (ck_cuda_malloc(&d, bytes, NULL)) return NULL;
    if (ck_cuda_copy(d, h, bytes, 1, NULL)) {
        ck_cuda_free(d);
        return NULL;
    }
    return d;
}

/* Device 16-bit array -> floats; counts |got - ref| > u|ref| + abs_tol and
 * prints max/mean abs error and the largest |ref|. Returns the count. */
static size_t cmp_dev16(const char *name, const void *dev, ck_dtype dt, const float *ref, size_t n, double abs_tol) {
    uint16_t *h = malloc(n * 2);
    float *got = malloc(n * sizeof(float));
    size_t bad = n;
    if (h && got && ck_cuda_copy(h, dev, n * 2, 0, NULL) == CKEY_OK) {
        const double u = unit_roundoff(dt);
        double amax = 0;
        bad = 0;
        for (size_t i = 0; i < n; i++) {
            got[i] = from16(h[i], dt);
            const double d = fabs((double)got[i] - ref[i]);
            if (!(d <= u * fabs(ref[i]) + abs_tol)) bad++;
            amax = fmax(amax, fabs(ref[i]));
        }
        ck_compare(name, got, ref, n, NULL);
        printf("    max |ref| %.3g; %zu of %zu over the bound %.3g |ref| + %.1g\n", amax, bad, n, u, abs_tol);
    }
    free(h), free(got);
    return bad;
}

/* GroupNorm mean / variance from sums: worst |d mean| / std and |d var| / var */
static double stats_diff(const double *got, const double *ref, int groups, double n) {
    double worst = 0;
    for (int g = 0; g < groups; g++) {
        const double m0 = ref[2 * g] / n, v0 = ref[2 * g + 1] / n - m0 * m0;
        const double m1 = got[2 * g] / n, v1 = got[2 * g + 1] / n - m1 * m1;
        worst = fmax(worst, fabs(m1 - m0) / sqrt(v0));
        worst = fmax(worst, fabs(v1 - v0) / v0);
        if (isnan(m1) || isnan(v1)) worst = INFINITY;
    }
    return worst;
}

/* The tensor-core conv against the CPU conv op on the same 16-bit-rounded
 * data. The reference input is what the kernel must convolve: the rounded
 * map, or round16(relu(a x + b)) with a pending GroupNorm + ReLU. The only
 * expected differences are fp32 summation order and the output's rounding to
 * 16 bits: |err| <= u |ref| + 1e-4 (u = 2^-11 fp16, 2^-8 bf16; so fp16 stays
 * under 1e-2 for |out| < 20). GN statistics are of the fp32 values. */
/* The backend's shifted conv (ops.c conv3x3_shifted) by hand: the input
 * `shift` = band + 8 rows into a buffer, bands of `band` rows written from the
 * buffer's start in order, so that with band 8 (shift 16) the band at row 16
 * starts exactly at the input, over rows earlier bands have read; returns
 * the values that differ from `want` (the whole-image call's output on the
 * device), or -1 when a call fails. wg: the wgmma kernel, else mma.sync. */
static long conv_shifted_diff(int wg, const uint16_t *x16, int Cin, int S, int dil, const void *dW, const float *dbias,
                              const float *da, const float *db, int groups, double *dst, ck_dtype dt, int band,
                              const void *want) {
    const int shift = band + 8;
    const size_t row = (size_t)S * Cin * 2, n = (size_t)S * S * Cin;
    void *buf = NULL;
    ckey_error err;
    long diff = -1;
    uint16_t *h1 = malloc(n * 2), *h2 = malloc(n * 2);
    if (!h1 || !h2 || ck_cuda_malloc(&buf, (size_t)(S + shift) * row, NULL) != CKEY_OK) goto done;
    if (ck_cuda_copy((char *)buf + (size_t)shift * row, x16, (size_t)S * row, 1, &err) != CKEY_OK) goto done;
    for (int y0 = 0; y0 < S; y0 += band) {
        const int y1 = y0 + band < S ? y0 + band : S;
        void *in = (char *)buf + (size_t)shift * row, *out = (char *)buf + (size_t)y0 * row;
        const ckey_status st =
            wg ? ck_cuda_conv3x3_wgmma_rows(in, S, dil, dW, dbias, da, db, out, y0, y1, groups, dst, dt, NULL, &err)
               : ck_cuda_conv3x3_tc_rows(in, Cin, S, dil, dW, dbias, da, db, out, y0, y1, Cin, groups, dst, dt, NULL,
                                         &err);
        if (st != CKEY_OK) {
            printf("    shifted band at row %d: %s\n", y0, err.message);
            goto done;
        }
    }
    if (ck_cuda_copy(h1, want, n * 2, 0, &err) != CKEY_OK || ck_cuda_copy(h2, buf, n * 2, 0, &err) != CKEY_OK)
        goto done;
    diff = 0;
    for (size_t i = 0; i < n; i++) diff += h1[i] != h2[i];
done:
    ck_cuda_free(buf);
    free(h1), free(h2);
    return diff;
}

static void test_conv3x3_tc(void) {
    if (ck_cuda_device_count() == 0) SKIP("no CUDA device on this machine");
    const struct { int S, Cin, Cout, dil, affine; ck_dtype dt; } cases[] = {
        {100, 64, 64, 1, 0, CK_F16},  {100, 64, 64, 2, 1, CK_F16},  {128, 64, 64, 4, 1, CK_F16},
        {37, 64, 64, 8, 0, CK_F16},   {37, 64, 64, 1, 1, CK_BF16},  {128, 64, 64, 2, 0, CK_BF16},
        {100, 64, 64, 4, 0, CK_BF16}, {100, 64, 64, 8, 1, CK_BF16}, {300, 64, 64, 8, 1, CK_F16},
        {257, 64, 64, 1, 0, CK_BF16}, {37, 16, 16, 1, 1, CK_F16},   {100, 16, 16, 8, 0, CK_BF16},
        {128, 16, 16, 4, 1, CK_BF16}, {200, 16, 16, 2, 1, CK_F16},  {64, 32, 48, 2, 1, CK_F16},
        {130, 48, 32, 8, 1, CK_BF16},
        /* Cin 8: the stem's path, taps paired in k16 steps */
        {100, 8, 64, 1, 0, CK_F16},   {37, 8, 16, 1, 0, CK_BF16},   {130, 8, 32, 2, 1, CK_F16},
        {300, 8, 48, 4, 0, CK_BF16},  {257, 8, 64, 8, 1, CK_BF16},
        /* more work items (dil x ceil(ceil(S/dil)/32) x ceil(S/128) = 144)
         * than an H200 has SMs: blocks walk several */
        {700, 64, 64, 8, 1, CK_F16},  {700, 16, 16, 4, 0, CK_BF16},
    };
    const int groups = 8;
    cpu_be cb;
    cpu_be_init(&cb, 700);
    ckey_error err;
    for (size_t k = 0; k < CK_ARRAY_LEN(cases); k++) {
        const int S = cases[k].S, Cin = cases[k].Cin, Cout = cases[k].Cout, dil = cases[k].dil;
        const ck_dtype dt = cases[k].dt;
        const int64_t HW = (int64_t)S * S;
        const unsigned seed = 100u + 10u * (unsigned)k;
        float *x = random_floats((size_t)HW * Cin, seed), *W = random_floats((size_t)Cout * Cin * 9, seed + 1),
              *bias = random_floats((size_t)Cout, seed + 2), *a = random_floats((size_t)Cin, seed + 3),
              *b = random_floats((size_t)Cin, seed + 4), *ref = malloc((size_t)HW * Cout * sizeof(float));
        uint16_t *x16 = malloc((size_t)HW * Cin * 2);
        const float ws = 4.0f / sqrtf((float)Cin);
        for (size_t i = 0; i < (size_t)Cout * Cin * 9; i++) W[i] = round16(W[i] * ws, dt);
        for (int64_t i = 0; i < HW * Cin; i++) {
            x16[i] = to16(x[i], dt);
            x[i] = from16(x16[i], dt);
            if (cases[k].affine) x[i] = round16(fmaxf(fmaf(a[i % Cin], x[i], b[i % Cin]), 0.f), dt);
        }
        double st_ref[128] = {0}, st_got[128] = {0};
        ck_cpu_ops.conv3x3(&cb.be.base, T32(x), 0, Cin, S, dil, W32(W), W32(bias), NULL, NULL, T32(ref), Cout, groups, st_ref);
        size_t wbytes = 0;
        REQUIRE(ck_cuda_conv3x3_tc_pack_weights(W, Cout, Cin, dt, NULL, &wbytes, &err) == CKEY_OK);
        void *dW = NULL, *dout = NULL, *dx = to_device_bytes(x16, (size_t)HW * Cin * 2);
        float *dbias = to_device(bias, Cout), *da = to_device(a, Cin), *db = to_device(b, Cin);
        double *dst = NULL;
        REQUIRE(dx && dbias && da && db && ck_cuda_malloc(&dW, wbytes, NULL) == CKEY_OK &&
                ck_cuda_malloc(&dout, (size_t)HW * Cout * 2, NULL) == CKEY_OK &&
                ck_cuda_malloc((void **)&dst, 128 * sizeof(double), NULL) == CKEY_OK);
        REQUIRE(ck_cuda_conv3x3_tc_pack_weights(W, Cout, Cin, dt, dW, NULL, &err) == CKEY_OK);
        REQUIRE(ck_cuda_memset(dst, 0, 128 * sizeof(double), &err) == CKEY_OK);
        REQUIRE(ck_cuda_memset(dout, 0xff, (size_t)HW * Cout * 2, &err) == CKEY_OK); /* NaN: catches holes */
        ckey_status s = ck_cuda_conv3x3_tc(dx, Cin, S, dil, dW, dbias, cases[k].affine ? da : NULL,
                                           cases[k].affine ? db : NULL, dout, Cout, groups, dst, dt, NULL, &err);
        CHECKF(s == CKEY_OK, "%s", err.message);
        if (s == CKEY_OK) s = ck_cuda_sync(&err);
        CHECKF(s == CKEY_OK, "%s", err.message);
        char name[96];
        snprintf(name, sizeof name, "conv3x3 tc %s S=%d %d->%d dil %d%s", dt_name(dt), S, Cin, Cout, dil,
                 cases[k].affine ? " +gn/relu in" : "");
        CHECK(cmp_dev16(name, dout, dt, ref, (size_t)HW * Cout, 1e-4) == 0);
        REQUIRE(ck_cuda_copy(st_got, dst, 2 * groups * sizeof(double), 0, &err) == CKEY_OK);
        const double sd = stats_diff(st_got, st_ref, groups, (double)HW * (Cout / groups));
        printf("    GroupNorm stats: worst |d mean|/std, |d var|/var %.3g\n", sd);
        CHECK(sd <= 1e-4);
        /* the same in three bands of rows (the in-place path): bitwise equal
         * outputs, and the bands' statistics add up to the whole image's */
        {
            const int cut[4] = {0, S / 3, S / 3 + 1 + (S / 5), S};
            void *dout2 = NULL;
            REQUIRE(ck_cuda_malloc(&dout2, (size_t)HW * Cout * 2, NULL) == CKEY_OK);
            REQUIRE(ck_cuda_memset(dst, 0, 128 * sizeof(double), &err) == CKEY_OK);
            for (int bnd = 0; bnd < 3; bnd++) {
                s = ck_cuda_conv3x3_tc_rows(dx, Cin, S, dil, dW, dbias, cases[k].affine ? da : NULL,
                                            cases[k].affine ? db : NULL,
                                            (char *)dout2 + (size_t)cut[bnd] * S * Cout * 2, cut[bnd], cut[bnd + 1],
                                            Cout, groups, dst, dt, NULL, &err);
                CHECKF(s == CKEY_OK, "%s", err.message);
            }
            uint16_t *h1 = malloc((size_t)HW * Cout * 2), *h2 = malloc((size_t)HW * Cout * 2);
            REQUIRE(h1 && h2 && ck_cuda_copy(h1, dout, (size_t)HW * Cout * 2, 0, &err) == CKEY_OK &&
                    ck_cuda_copy(h2, dout2, (size_t)HW * Cout * 2, 0, &err) == CKEY_OK);
            size_t diff = 0;
            for (size_t i = 0; i < (size_t)HW * Cout; i++) diff += h1[i] != h2[i];
            REQUIRE(ck_cuda_copy(st_got, dst, 2 * groups * sizeof(double), 0, &err) == CKEY_OK);
            const double sb = stats_diff(st_got, st_ref, groups, (double)HW * (Cout / groups));
            printf("    in 3 bands of rows: %zu values differ from the whole-image call; stats %.3g\n", diff, sb);
            CHECK(diff == 0 && sb <= 1e-4);
            free(h1), free(h2), ck_cuda_free(dout2);
        }
        if (Cin == Cout) {
            const long shd = conv_shifted_diff(0, x16, Cin, S, dil, dW, dbias, cases[k].affine ? da : NULL,
                                              cases[k].affine ? db : NULL, groups, dst, dt, 8, dout);
            printf("    shifted in place, 8-row bands 16 rows before the input: %ld values differ\n", shd);
            CHECK(shd == 0);
        }
        /* the Hopper wgmma kernel (64 -> 64): the same bars, whole and in three bands */
        for (int pass = 0; pass < 2 && Cin == 64 && Cout == 64 && ck_cuda_wgmma_ok(); pass++) {
            const int cut[4] = {0, S / 3, S / 3 + 1 + (S / 5), S};
            REQUIRE(ck_cuda_memset(dst, 0, 128 * sizeof(double), &err) == CKEY_OK);
            REQUIRE(ck_cuda_memset(dout, 0xff, (size_t)HW * Cout * 2, &err) == CKEY_OK);
            const int banded = pass;
            for (int bnd = 0; bnd < (banded ? 3 : 1); bnd++) {
                const int y0 = banded ? cut[bnd] : 0, y1 = banded ? cut[bnd + 1] : S;
                s = ck_cuda_conv3x3_wgmma_rows(dx, S, dil, dW, dbias, cases[k].affine ? da : NULL,
                                               cases[k].affine ? db : NULL, (char *)dout + (size_t)y0 * S * Cout * 2,
                                               y0, y1, groups, dst, dt, NULL, &err);
                CHECKF(s == CKEY_OK, "%s", err.message);
            }
            if (s == CKEY_OK) s = ck_cuda_sync(&err);
            CHECKF(s == CKEY_OK, "%s", err.message);
            snprintf(name, sizeof name, "conv3x3 wgmma %s S=%d dil %d%s%s", dt_name(dt), S, dil,
                     cases[k].affine ? " +gn/relu in" : "", banded ? " (3 bands)" : "");
            CHECK(cmp_dev16(name, dout, dt, ref, (size_t)HW * Cout, 1e-4) == 0);
            REQUIRE(ck_cuda_copy(st_got, dst, 2 * groups * sizeof(double), 0, &err) == CKEY_OK);
            const double sw = stats_diff(st_got, st_ref, groups, (double)HW * (Cout / groups));
            printf("    GroupNorm stats: worst |d mean|/std, |d var|/var %.3g\n", sw);
            CHECK(sw <= 1e-4);
            if (pass == 1) {
                const long shd = conv_shifted_diff(1, x16, Cin, S, dil, dW, dbias, cases[k].affine ? da : NULL,
                                                  cases[k].affine ? db : NULL, groups, dst, dt, 8, dout);
                printf("    wgmma shifted in place, 8-row bands: %ld values differ\n", shd);
                CHECK(shd == 0);
            }
        }
        /* ... and in place in one launch over bands (the backend's conv2 unless CKEY_DEBUG_CUDA_NO_CONV_ONE_LAUNCH):
         * the input after a margin of band + 8 rows, the output from the margin's start, bitwise what
         * the banded call above wrote; twice, so that the counter and flags are reset by the call */
        if (Cin == 64 && Cout == 64 && ck_cuda_wgmma_ok()) {
            const int band = S / 4 / 8 * 8 > 8 ? S / 4 / 8 * 8 : 8, shift = band + 8;
            const size_t row = (size_t)S * Cout * 2;
            void *buf = NULL;
            int *sync = NULL;
            uint16_t *h1 = malloc((size_t)HW * Cout * 2), *h2 = malloc((size_t)HW * Cout * 2);
            REQUIRE(h1 && h2 && ck_cuda_malloc(&buf, (size_t)(S + shift) * row, NULL) == CKEY_OK &&
                    ck_cuda_malloc((void **)&sync, 16384 * sizeof(int), NULL) == CKEY_OK);
            REQUIRE(ck_cuda_copy(h1, dout, (size_t)HW * Cout * 2, 0, &err) == CKEY_OK);
            for (int rep = 0; rep < 2; rep++) {
                REQUIRE(ck_cuda_copy((char *)buf + (size_t)shift * row, x16, (size_t)S * row, 1, &err) == CKEY_OK);
                REQUIRE(ck_cuda_memset(dst, 0, 128 * sizeof(double), &err) == CKEY_OK);
                s = ck_cuda_conv3x3_wgmma_inplace((char *)buf + (size_t)shift * row, S, dil, dW, dbias,
                                                  cases[k].affine ? da : NULL, cases[k].affine ? db : NULL, band,
                                                  shift, sync, 16384, groups, dst, dt, NULL, &err);
                CHECKF(s == CKEY_OK, "%s", err.message);
                if (s == CKEY_OK) s = ck_cuda_sync(&err);
                CHECKF(s == CKEY_OK, "%s", err.message);
                REQUIRE(ck_cuda_copy(h2, buf, (size_t)HW * Cout * 2, 0, &err) == CKEY_OK);
                size_t diff = 0;
                for (size_t i = 0; i < (size_t)HW * Cout; i++) diff += h1[i] != h2[i];
                REQUIRE(ck_cuda_copy(st_got, dst, 2 * groups * sizeof(double), 0, &err) == CKEY_OK);
                const double sw = stats_diff(st_got, st_ref, groups, (double)HW * (Cout / groups));
                printf("    in place, one launch over %d-row bands (run %d): %zu values differ from the banded "
                       "call; stats %.3g\n",
                       band, rep + 1, diff, sw);
                CHECK(diff == 0 && sw <= 1e-4);
            }
            ck_cuda_free(buf), ck_cuda_free(sync);
            free(h1), free(h2);
        }
        ck_cuda_free(dx), ck_cuda_free(dW), ck_cuda_free(dout), ck_cuda_free(dst);
        ck_cuda_free(dbias), ck_cuda_free(da), ck_cuda_free(db);
        free(x), free(W), free(bias), free(a), free(b), free(ref), free(x16);
    }
    /* refusals: the stem's Cin = 7, fp32 storage, in-place */
    CHECK(ck_cuda_conv3x3_tc((void *)16, 7, 64, 1, (void *)16, NULL, NULL, NULL, (void *)32, 64, 8, NULL, CK_F16, NULL,
                             &err) == CKEY_ERR_UNSUPPORTED);
    CHECK(ck_cuda_conv3x3_tc((void *)16, 64, 64, 1, (void *)16, NULL, NULL, NULL, (void *)32, 64, 8, NULL, CK_F32, NULL,
                             &err) == CKEY_ERR_UNSUPPORTED);
    CHECK(ck_cuda_conv3x3_tc((void *)16, 64, 64, 1, (void *)16, NULL, NULL, NULL, (void *)16, 64, 8, NULL, CK_F16, NULL,
                             &err) == CKEY_ERR_INVALID_ARG);
    /* the wgmma conv: dilations over 8 (its row copies are unrolled for 8) */
    if (ck_cuda_wgmma_ok())
        CHECK(ck_cuda_conv3x3_wgmma_rows((void *)16, 64, 16, (void *)16, NULL, NULL, NULL, (void *)32, 0, 64, 8, NULL,
                                         CK_F16, NULL, &err) == CKEY_ERR_UNSUPPORTED);
    cpu_be_free(&cb);
}

/* Timing at full size (reported, not asserted): S = 2048, 64 -> 64, dil 4. */
static double now_s(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

static void test_conv3x3_tc_timing(void) {
    if (ck_cuda_device_count() == 0) SKIP("no CUDA device on this machine");
    const int S = 2048, C = 64, groups = 8, reps = 10;
    const int64_t HW = (int64_t)S * S;
    const size_t n = (size_t)HW * C, blk = 1u << 20;
    ckey_error err;
    float *W = random_floats((size_t)C * C * 9, 901), *bias = random_floats(C, 902), *a = random_floats(C, 903),
          *b = random_floats(C, 904), *xs = random_floats(blk, 905);
    uint16_t *x16 = malloc(n * 2);
    REQUIRE(x16);
    const ck_dtype dts[2] = {CK_F16, CK_BF16};
    for (int d = 0; d < 2; d++) {
        const ck_dtype dt = dts[d];
        for (size_t i = 0; i < blk; i++) x16[i] = to16(xs[i], dt);
        for (size_t i = blk; i < n; i += blk) memcpy(x16 + i, x16, (n - i < blk ? n - i : blk) * 2);
        void *dx = to_device_bytes(x16, n * 2), *dW = NULL, *dout = NULL;
        float *dbias = to_device(bias, C), *da = to_device(a, C), *db = to_device(b, C);
        double *dst = NULL;
        REQUIRE(dx && dbias && da && db && ck_cuda_malloc(&dW, ck_conv3x3_tc_weight_bytes(C, C), NULL) == CKEY_OK &&
                ck_cuda_malloc(&dout, n * 2, NULL) == CKEY_OK &&
                ck_cuda_malloc((void **)&dst, 2 * groups * sizeof(double), NULL) == CKEY_OK);
        REQUIRE(ck_cuda_conv3x3_tc_pack_weights(W, C, C, dt, dW, NULL, &err) == CKEY_OK);
        /* mode 0: plain; 1: pending GroupNorm + ReLU fused into the load;
         * 2: the same as a separate in-place 16-bit pass, then the plain conv */
        static const char *const mode_name[3] = {"", " +gn/relu fused", " +gn/relu as a separate pass"};
        for (int mode = 0; mode < 3; mode++) {
            ckey_status s = CKEY_OK;
            double t0 = 0;
            for (int r = 0; r <= reps && s == CKEY_OK; r++) {
                if (r == 1) {
                    s = ck_cuda_sync(&err);
                    t0 = now_s();
                }
                if (s == CKEY_OK && mode == 2) s = ck_cuda_affine_relu_t(dx, NULL, C, HW, da, db, dt, NULL, &err);
                if (s == CKEY_OK)
                    s = ck_cuda_conv3x3_tc(dx, C, S, 4, dW, dbias, mode == 1 ? da : NULL, mode == 1 ? db : NULL, dout,
                                           C, groups, dst, dt, NULL, &err);
            }
            if (s == CKEY_OK) s = ck_cuda_sync(&err);
            CHECKF(s == CKEY_OK, "%s", err.message);
            if (s == CKEY_OK) {
                const double ms = (now_s() - t0) * 1e3 / reps;
                printf("  conv3x3 tc %s S=%d 64->64 dil 4%s: %.3f ms, %.1f TFLOP/s\n", dt_name(dt), S, mode_name[mode],
                       ms, 2.0 * 9 * C * C * (double)HW / (ms * 1e-3) / 1e12);
            }
        }
        for (int fused = 0; fused < 2 && ck_cuda_wgmma_ok(); fused++) { /* the wgmma kernel, plain and fused */
            ckey_status s = CKEY_OK;
            double t0 = 0;
            for (int r = 0; r <= reps && s == CKEY_OK; r++) {
                if (r == 1) {
                    s = ck_cuda_sync(&err);
                    t0 = now_s();
                }
                if (s == CKEY_OK)
                    s = ck_cuda_conv3x3_wgmma_rows(dx, S, 4, dW, dbias, fused ? da : NULL, fused ? db : NULL, dout, 0, S,
                                                   groups, dst, dt, NULL, &err);
            }
            if (s == CKEY_OK) s = ck_cuda_sync(&err);
            CHECKF(s == CKEY_OK, "%s", err.message);
            if (s == CKEY_OK) {
                const double ms = (now_s() - t0) * 1e3 / reps;
                printf("  conv3x3 wgmma %s S=%d 64->64 dil 4%s: %.3f ms, %.1f TFLOP/s\n", dt_name(dt), S,
                       mode_name[fused], ms, 2.0 * 9 * C * C * (double)HW / (ms * 1e-3) / 1e12);
            }
        }
        ck_cuda_free(dx), ck_cuda_free(dW), ck_cuda_free(dout), ck_cuda_free(dst);
        ck_cuda_free(dbias), ck_cuda_free(da), ck_cuda_free(db);
    }
    free(W), free(bias), free(a), free(b), free(xs), free(x16);
}

/* 16-bit affine / residual / final 1x1 conv against the CPU ops on the
 * rounded data: one rounding of the fp32 result (elementwise), fp32 (1x1). */
/* x = the n 16-bit values at dx, widened (what the next step reads); 0 on
 * a failed copy. */
static int download16(float *x, const void *dx, size_t n, ck_dtype dt) {
    uint16_t *xr = malloc(n * 2);
    const int ok = xr && ck_cuda_copy(xr, dx, n * 2, 0, NULL) == CKEY_OK;
    for (size_t i = 0; ok && i < n; i++) x[i] = from16(xr[i], dt);
    free(xr);
    return ok;
}

static void test_refiner_elementwise_16bit(void) {
    if (ck_cuda_device_count() == 0) SKIP("no CUDA device on this machine");
    cpu_be cb;
    cpu_be_init(&cb, 128);
    ckey_error err;
    const int64_t HW = 4099;
    const int Cs[2] = {64, 12};
    const ck_dtype dts[2] = {CK_F16, CK_BF16};
    for (int ci = 0; ci < 2; ci++)
        for (int d = 0; d < 2; d++) {
            const int C = Cs[ci];
            const ck_dtype dt = dts[d];
            const size_t n = (size_t)HW * C;
            float *x = random_floats(n, 501u + (unsigned)ci), *y = random_floats(n, 503u + (unsigned)ci);
            float *a = random_floats(C, 505), *b = random_floats(C, 507);
            uint16_t *x16 = malloc(n * 2), *y16 = malloc(n * 2);
            for (size_t i = 0; i < n; i++) {
                x16[i] = to16(x[i] * 4.0f, dt), x[i] = from16(x16[i], dt);
                y16[i] = to16(y[i] * 4.0f, dt), y[i] = from16(y16[i], dt);
            }
            void *dx = to_device_bytes(x16, n * 2), *dy = to_device_bytes(y16, n * 2);
            float *da = to_device(a, C), *db = to_device(b, C);
            REQUIRE(dx && dy && da && db);
            char name[64];
            ck_cpu_ops.affine_relu(&cb.be.base, T32(x), C, HW, a, b);
            CHECKF(ck_cuda_affine_relu_t(dx, NULL, C, HW, da, db, dt, NULL, &err) == CKEY_OK, "%s", err.message);
            snprintf(name, sizeof name, "affine relu %s C=%d", dt_name(dt), C);
            CHECK(cmp_dev16(name, dx, dt, x, n, 1e-5) == 0);
            /* the residual reads the device's rounded x, as the next step would */
            REQUIRE(download16(x, dx, n, dt));
            ck_cpu_ops.residual_affine_relu(&cb.be.base, T32(x), T32(y), C, HW, a, b, NULL, NULL);
            CHECKF(ck_cuda_affine_relu_t(dx, dy, C, HW, da, db, dt, NULL, &err) == CKEY_OK, "%s", err.message);
            snprintf(name, sizeof name, "residual affine relu %s C=%d", dt_name(dt), C);
            CHECK(cmp_dev16(name, dx, dt, x, n, 1e-5) == 0);
            REQUIRE(download16(x, dx, n, dt));
            /* the same with a GroupNorm + ReLU still pending on x (the stem's,
             * in the first residual block): here relu(b*x + a) */
            ck_cpu_ops.residual_affine_relu(&cb.be.base, T32(x), T32(y), C, HW, a, b, b, a);
            CHECKF(ck_cuda_residual_relu_t(dx, dy, C, HW, da, db, db, da, dt, NULL, &err) == CKEY_OK, "%s",
                   err.message);
            snprintf(name, sizeof name, "residual, pending affine %s C=%d", dt_name(dt), C);
            CHECK(cmp_dev16(name, dx, dt, x, n, 1e-5) == 0);
            REQUIRE(download16(x, dx, n, dt));
            /* again with the coefficients 4 bytes past 16-byte alignment (the kernel reads them as
             * scalars, which beats float4 loads there and takes any alignment) */
            {
                float *a1 = malloc((size_t)(C + 1) * sizeof(float)), *b1 = malloc((size_t)(C + 1) * sizeof(float));
                REQUIRE(a1 && b1);
                memcpy(a1 + 1, a, (size_t)C * sizeof(float)), memcpy(b1 + 1, b, (size_t)C * sizeof(float));
                a1[0] = b1[0] = 0.f;
                float *da1 = to_device(a1, (size_t)C + 1), *db1 = to_device(b1, (size_t)C + 1);
                REQUIRE(da1 && db1);
                ck_cpu_ops.residual_affine_relu(&cb.be.base, T32(x), T32(y), C, HW, a, b, b, a);
                CHECKF(ck_cuda_residual_relu_t(dx, dy, C, HW, da1 + 1, db1 + 1, db1 + 1, da1 + 1, dt, NULL, &err) ==
                           CKEY_OK,
                       "%s", err.message);
                snprintf(name, sizeof name, "residual, pending affine, unaligned coefficients %s C=%d", dt_name(dt), C);
                CHECK(cmp_dev16(name, dx, dt, x, n, 1e-5) == 0);
                REQUIRE(download16(x, dx, n, dt));
                ck_cuda_free(da1), ck_cuda_free(db1), free(a1), free(b1);
            }
            float *Wp = random_floats(4 * (size_t)C, 509), *bp = random_floats(4, 511),
                  *ref = malloc((size_t)4 * HW * sizeof(float));
            ck_cpu_ops.pointwise_conv(&cb.be.base, T32(x), T32(NULL), NULL, NULL, C, HW, W32(Wp), W32(bp), 10.0f, T32(ref), 4);
            float *dW = to_device(Wp, 4 * (size_t)C), *dbp = to_device(bp, 4), *dout = dev_alloc((size_t)4 * HW);
            REQUIRE(dW && dbp && dout);
            CHECKF(ck_cuda_pointwise_t(dx, NULL, NULL, NULL, C, HW, dW, dbp, 10.0f, dout, 4, dt, NULL, &err) == CKEY_OK,
                   "%s", err.message);
            snprintf(name, sizeof name, "pointwise %s C=%d", dt_name(dt), C);
            CHECK(cmp_dev(name, dout, ref, (size_t)4 * HW) < 1e-4 * C);
            /* the last residual fused into the conv: bit for bit the residual
             * pass (into a copy of x) followed by the conv, x itself untouched */
            {
                void *dx2 = NULL;
                float *dout2 = dev_alloc((size_t)4 * HW);
                REQUIRE(ck_cuda_malloc(&dx2, n * 2, NULL) == CKEY_OK && dout2 &&
                        ck_cuda_copy_d2d(dx2, dx, n * 2, NULL, &err) == CKEY_OK);
                CHECKF(ck_cuda_pointwise_t(dx, dy, da, db, C, HW, dW, dbp, 10.0f, dout, 4, dt, NULL, &err) == CKEY_OK,
                       "%s", err.message);
                CHECKF(ck_cuda_residual_relu_t(dx2, dy, C, HW, da, db, NULL, NULL, dt, NULL, &err) == CKEY_OK, "%s",
                       err.message);
                CHECKF(ck_cuda_pointwise_t(dx2, NULL, NULL, NULL, C, HW, dW, dbp, 10.0f, dout2, 4, dt, NULL, &err) ==
                           CKEY_OK,
                       "%s", err.message);
                float *h1 = malloc((size_t)16 * HW), *h2 = malloc((size_t)16 * HW), *xk = malloc(n * sizeof(float));
                REQUIRE(h1 && h2 && xk && ck_cuda_copy(h1, dout, (size_t)16 * HW, 0, &err) == CKEY_OK &&
                        ck_cuda_copy(h2, dout2, (size_t)16 * HW, 0, &err) == CKEY_OK && download16(xk, dx, n, dt));
                snprintf(name, sizeof name, "pointwise, residual fused %s C=%d", dt_name(dt), C);
                CHECKF(memcmp(h1, h2, (size_t)16 * HW) == 0, "%s: differs from residual pass + conv", name);
                CHECKF(memcmp(xk, x, n * sizeof(float)) == 0, "%s: x was written", name);
                /* (against the CPU: the residual and the conv are each checked above; the
                 * fused op's 16-bit rounding of x' is what the CPU's fp32 op does not do) */
                ck_cuda_free(dx2), ck_cuda_free(dout2);
                free(h1), free(h2), free(xk);
            }
            ck_cuda_free(dx), ck_cuda_free(dy), ck_cuda_free(da), ck_cuda_free(db), ck_cuda_free(dW),
                ck_cuda_free(dbp), ck_cuda_free(dout);
            free(x), free(y), free(a), free(b), free(x16), free(y16), free(Wp), free(bp), free(ref);
        }
    cpu_be_free(&cb);
}

/* Device copy of n values rounded to dt (h receives the rounded values). */
static void *dev16_rounded(float *h, size_t n, ck_dtype dt) {
    uint16_t *bits = malloc(n * 2);
    for (size_t i = 0; i < n; i++) bits[i] = to16(h[i], dt), h[i] = from16(bits[i], dt);
    void *d = to_device_bytes(bits, n * 2);
    free(bits);
    return d;
}

/* 16-bit linear layers against a double reference on the rounded inputs
 * (x, W, y0 and the bias, which is in dt like W: cuBLASLt fuses a bias of
 * the output's type only), each case run twice: through cuBLASLt (the bias in
 * the GEMM's epilogue) and with cuBLASLt off (cuBLAS GEMM + the bias pass).
 * y is a column block of a wider matrix (ldy != out), with and without bias
 * and accumulation, aligned and unaligned (odd out, bias at +1 element), and
 * the network's shapes (`net`: mask-unit qkv per head with the bias at a head's
 * row offset, attn.proj, mlp.fc2, the decoder's scale layer), where the fused
 * path must be taken.
 *
 * Bound per element, with ref = x W^T + y0 + b (y0 = 0 without accumulation)
 * and fp32 accumulation inside 1e-5 of sum |x w| + |y0| + |b|:
 *  - fused: D = round(acc + y0 + b) in fp32, one rounding: u |ref|;
 *  - GEMM + bias pass: t = round(acc + y0), then round(t + b): the first
 *    rounding is at most u |ref - b| <= u (|ref| + |b|), so u (2|ref| + |b|).
 * Both are checked against the second (the larger). Split-K partial sums
 * reduced in the 16-bit output type break it (each partial is rounded, errors
 * of u |partial| while y0 may cancel x W^T, so that |ref| is small): layernorm-linear.cu
 * forbids that reduction (cuBLASLt's reduction-scheme mask, cuBLAS's
 * CUBLAS_MATH_DISALLOW_REDUCED_PRECISION_REDUCTION). For diagnosis the counts
 * over the one-rounding bound (informative on the fallback path) and over the
 * bound plus one more rounding of x W^T are printed too. Columns outside the
 * block must keep their bits. */
/* The 16-bit patch embedding's kernels, bit for bit against the host: the
 * im2col rows of a chunk from the middle of the token range (K = 7, the
 * model's, on its compile-time path, and K = 5 on the generic one), and the
 * epilogue (bias + position, scattered to the unrolled order), vectorized
 * (E = 112) and scalar (E = 100); tokens outside the chunk stay untouched. */
static int64_t host_unroll(int y, int x, int H, int W, int k) {
    int64_t outer = 0;
    for (int i = 0; i < k; i++) outer = outer * 4 + (((y >> i) & 1) * 2 + ((x >> i) & 1));
    return outer * ((int64_t)(H >> k) * (W >> k)) + (int64_t)(y >> k) * (W >> k) + (x >> k);
}

static void test_patch_embed_16bit(void) {
    if (ck_cuda_device_count() == 0) SKIP("no CUDA device on this machine");
    ckey_error err;
    const int S = 64, Cin = 4, st = 4, G = S / st, unroll = 2;
    const int64_t p0 = 37, n = 150;
    const ck_dtype dts[2] = {CK_F16, CK_BF16};
    for (int d = 0; d < 2; d++) {
        const ck_dtype dt = dts[d];
        float *x = random_floats((size_t)Cin * S * S, 71u + (unsigned)d);
        uint16_t *xb = malloc((size_t)Cin * S * S * 2);
        REQUIRE(x && xb);
        for (size_t i = 0; i < (size_t)Cin * S * S; i++) xb[i] = to16(x[i], dt);
        void *dx = to_device_bytes(xb, (size_t)Cin * S * S * 2);
        REQUIRE(dx);
        for (int K = 5; K <= 7; K += 2) {
            const int pad = K / 2, KK = Cin * K * K;
            void *dcol = NULL;
            uint16_t *got = malloc((size_t)n * KK * 2);
            REQUIRE(got && ck_cuda_malloc(&dcol, (size_t)n * KK * 2, NULL) == CKEY_OK);
            CHECKF(ck_cuda_im2col_patch_t(dx, S, Cin, K, st, pad, p0, n, dcol, dt, NULL, &err) == CKEY_OK, "%s",
                   err.message);
            REQUIRE(ck_cuda_sync(&err) == CKEY_OK);
            REQUIRE(ck_cuda_copy(got, dcol, (size_t)n * KK * 2, 0, &err) == CKEY_OK);
            int64_t bad = 0;
            for (int64_t pl = 0; pl < n; pl++)
                for (int k = 0; k < KK; k++) {
                    const int64_t p = p0 + pl;
                    const int ci = k / (K * K), ky = (k / K) % K, kx = k % K;
                    const int iy = (int)(p / G) * st - pad + ky, ix = (int)(p % G) * st - pad + kx;
                    const uint16_t want = iy >= 0 && iy < S && ix >= 0 && ix < S ? xb[((size_t)ci * S + iy) * S + ix] : 0;
                    bad += got[pl * KK + k] != want;
                }
            printf("  im2col %s K=%d: %lld of %lld values differ\n", dt_name(dt), K, (long long)bad, (long long)(n * KK));
            CHECK(bad == 0);
            ck_cuda_free(dcol), free(got);
        }
        for (int E = 100; E <= 112; E += 12) {
            float *y = random_floats((size_t)n * E, 81u + (unsigned)E), *b = random_floats((size_t)E, 82u),
                  *pos = random_floats((size_t)G * G * E, 83u);
            uint16_t *yb = malloc((size_t)n * E * 2), *tok = malloc((size_t)G * G * E * 2);
            REQUIRE(y && b && pos && yb && tok);
            for (size_t i = 0; i < (size_t)n * E; i++) yb[i] = to16(y[i], dt);
            memset(tok, 0x5a, (size_t)G * G * E * 2);
            void *dy = to_device_bytes(yb, (size_t)n * E * 2), *dtok = to_device_bytes(tok, (size_t)G * G * E * 2);
            float *db = to_device(b, (size_t)E), *dpos = to_device(pos, (size_t)G * G * E);
            REQUIRE(dy && dtok && db && dpos);
            CHECKF(ck_cuda_patch_epilogue_t(dy, G, E, unroll, p0, n, db, dpos, 0, dtok, dt, NULL, &err) == CKEY_OK, "%s",
                   err.message);
            REQUIRE(ck_cuda_sync(&err) == CKEY_OK);
            REQUIRE(ck_cuda_copy(tok, dtok, (size_t)G * G * E * 2, 0, &err) == CKEY_OK);
            int64_t bad = 0, stray = 0;
            char *in_chunk = calloc((size_t)G * G, 1);
            REQUIRE(in_chunk);
            for (int64_t pl = 0; pl < n; pl++) {
                const int64_t p = p0 + pl, t = host_unroll((int)(p / G), (int)(p % G), G, G, unroll);
                in_chunk[t] = 1;
                for (int e = 0; e < E; e++) {
                    float v = from16(yb[pl * E + e], dt) + b[e];
                    v = v + pos[p * E + e];
                    bad += tok[t * E + e] != to16(v, dt);
                }
            }
            for (int64_t t = 0; t < (int64_t)G * G; t++)
                for (int e = 0; e < E && !in_chunk[t]; e++) stray += tok[t * E + e] != 0x5a5a;
            printf("  patch epilogue %s E=%d: %lld of %lld values differ, %lld written outside the chunk\n", dt_name(dt),
                   E, (long long)bad, (long long)(n * E), (long long)stray);
            CHECK(bad == 0 && stray == 0);
            ck_cuda_free(dy), ck_cuda_free(dtok), ck_cuda_free(db), ck_cuda_free(dpos);
            free(y), free(b), free(pos), free(yb), free(tok), free(in_chunk);
        }
        ck_cuda_free(dx), free(x), free(xb);
    }
}

/* The network's 16-bit data-movement kernels against the host: reroll and
 * the stage transition's max-pool + bias (16-byte vectors for C % 8 == 0,
 * the scalar kernels else), the refiner input and the stem's channels-last
 * repacking (a thread per pixel, a partial last block), bit for bit where the
 * arithmetic is exact; the decoder epilogue (16-byte vectors, a warp a
 * pixel) against a double reference on a chunk from the middle of the map,
 * D2 = 512 (the model's: two channel groups a lane) and 64 (lanes without
 * channels), pixels outside the chunk untouched. */
static void host_tap(int dst, int in, int out, int *i0, int *i1, double *l1) {
    double src = (double)(float)((float)in / (float)out * ((float)dst + 0.5f) - 0.5f);
    if (src < 0) src = 0;
    *i0 = (int)src;
    *i1 = *i0 + (*i0 < in - 1 ? 1 : 0);
    *l1 = src - *i0;
}

static void test_net_dataflow_16bit(void) {
    if (ck_cuda_device_count() == 0) SKIP("no CUDA device on this machine");
    cpu_be cb;
    cpu_be_init(&cb, 128);
    ckey_error err;
    const ck_dtype dts[2] = {CK_F16, CK_BF16};
    for (int d = 0; d < 2; d++) {
        const ck_dtype dt = dts[d];
        char name[80];
        /* reroll, C = 112 (vectors) and 100 (scalar) */
        for (int C = 100; C <= 112; C += 12) {
            const int H = 32, W = 32, k = 2;
            const size_t n = (size_t)H * W * C;
            float *tok = random_floats(n, 601u + (unsigned)C), *ref = malloc(n * sizeof(float));
            void *dtok = dev16_rounded(tok, n, dt), *df = NULL;
            REQUIRE(ref && dtok && ck_cuda_malloc(&df, n * 2, NULL) == CKEY_OK);
            ck_cpu_ops.reroll(&cb.be.base, T32(tok), H, W, k, C, T32(ref));
            CHECKF(ck_cuda_reroll_t(dtok, H, W, k, C, df, dt, NULL, &err) == CKEY_OK, "%s", err.message);
            snprintf(name, sizeof name, "reroll %s C=%d", dt_name(dt), C);
            CHECK(cmp_dev16(name, df, dt, ref, n, 0.0) == 0);
            ck_cuda_free(dtok), ck_cuda_free(df), free(tok), free(ref);
        }
        /* max-pool over qs = 4 planes + bias */
        for (int C = 100; C <= 112; C += 12) {
            const int64_t Nq = 300;
            const int qs = 4;
            const size_t n = (size_t)Nq * C;
            float *x = random_floats(n * qs, 611u + (unsigned)C), *b = random_floats((size_t)C, 613u),
                  *ref = malloc(n * sizeof(float));
            void *dx = dev16_rounded(x, n * qs, dt), *dy = NULL;
            float *db = to_device(b, (size_t)C);
            REQUIRE(ref && dx && db && ck_cuda_malloc(&dy, n * 2, NULL) == CKEY_OK);
            for (size_t i = 0; i < n; i++) {
                float m = x[i];
                for (int s = 1; s < qs; s++) m = fmaxf(m, x[i + (size_t)s * n]);
                ref[i] = round16(m + b[i % (size_t)C], dt);
            }
            CHECKF(ck_cuda_maxpool_bias_t(dx, Nq, C, qs, db, dy, dt, NULL, &err) == CKEY_OK, "%s", err.message);
            snprintf(name, sizeof name, "maxpool+bias %s C=%d", dt_name(dt), C);
            CHECK(cmp_dev16(name, dy, dt, ref, n, 0.0) == 0);
            ck_cuda_free(dx), ck_cuda_free(dy), ck_cuda_free(db), free(x), free(b), free(ref);
        }
        /* refiner input [7, S, S] and the stem's [S*S, 8] repacking */
        {
            const int S = 96, G = S / 4;
            const size_t HW = (size_t)S * S;
            float *x = random_floats(4 * HW, 621u), *lg = random_floats((size_t)4 * G * G, 623u),
                  *ref = malloc(7 * HW * sizeof(float)), *ref8 = malloc(8 * HW * sizeof(float));
            void *dx = dev16_rounded(x, 4 * HW, dt), *drin = NULL, *dmap = NULL;
            float *dl = to_device(lg, (size_t)4 * G * G);
            REQUIRE(ref && ref8 && dx && dl && ck_cuda_malloc(&drin, 7 * HW * 2, NULL) == CKEY_OK &&
                    ck_cuda_malloc(&dmap, 8 * HW * 2, NULL) == CKEY_OK);
            ck_cpu_ops.refiner_input(&cb.be.base, T32(x), T32(lg), S, T32(ref));
            CHECKF(ck_cuda_refiner_input_t(dx, dl, S, drin, dt, NULL, &err) == CKEY_OK, "%s", err.message);
            snprintf(name, sizeof name, "refiner input %s", dt_name(dt));
            /* one rounding of the fp32 sigmoid (the device's expf may differ in the last fp32 bit) */
            CHECK(cmp_dev16(name, drin, dt, ref, 7 * HW, 1e-6) == 0);
            float *rin = malloc(7 * HW * sizeof(float));
            REQUIRE(rin && download16(rin, drin, 7 * HW, dt));
            for (size_t p = 0; p < HW; p++)
                for (int c = 0; c < 8; c++) ref8[p * 8 + c] = c < 7 ? rin[(size_t)c * HW + p] : 0.f;
            CHECKF(ck_cuda_refiner_stem_input(drin, S, dmap, dt, NULL, &err) == CKEY_OK, "%s", err.message);
            snprintf(name, sizeof name, "stem input %s", dt_name(dt));
            CHECK(cmp_dev16(name, dmap, dt, ref8, 8 * HW, 0.0) == 0);
            ck_cuda_free(dx), ck_cuda_free(drin), ck_cuda_free(dmap), ck_cuda_free(dl);
            free(x), free(lg), free(ref), free(ref8), free(rin);
        }
        /* decoder epilogue: a chunk of odd bounds (the pixel-a-warp kernels), chunks
         * of whole row pairs (the quad kernel), and maps not a power of two coarser */
        const struct { int G, H[3]; int64_t p0, n; } dcases[] = {
            {32, {16, 8, 4}, 37, 301}, {32, {16, 8, 4}, 128, 320}, {32, {16, 8, 4}, 0, 1024}, {30, {15, 8, 4}, 60, 840},
            {30, {30, 11, 1}, 0, 900}};
        for (size_t dc = 0; dc < CK_ARRAY_LEN(dcases); dc++)
        for (int D2 = 64; D2 <= 512; D2 *= 8) {
            const int G = dcases[dc].G, Hk[3] = {dcases[dc].H[0], dcases[dc].H[1], dcases[dc].H[2]};
            const int64_t p0 = dcases[dc].p0, n = dcases[dc].n;
            float *h = random_floats((size_t)n * D2, 631u), *P[3], *b1 = random_floats((size_t)D2, 633u),
                  *cw = random_floats((size_t)4 * D2, 635u), *cb_ = random_floats(4, 637u);
            void *dh = dev16_rounded(h, (size_t)n * D2, dt), *dP[3];
            for (int s = 0; s < 3; s++) {
                P[s] = random_floats((size_t)Hk[s] * Hk[s] * D2, 641u + (unsigned)s);
                dP[s] = dev16_rounded(P[s], (size_t)Hk[s] * Hk[s] * D2, dt);
                REQUIRE(dP[s]);
            }
            float *lg = malloc((size_t)4 * G * G * sizeof(float)), *got = malloc((size_t)4 * G * G * sizeof(float));
            REQUIRE(lg && got && dh);
            for (size_t i = 0; i < (size_t)4 * G * G; i++) lg[i] = 12345.f;
            float *db1 = to_device(b1, (size_t)D2), *dcw = to_device(cw, (size_t)4 * D2), *dcb = to_device(cb_, 4),
                  *dlg = to_device(lg, (size_t)4 * G * G);
            REQUIRE(db1 && dcw && dcb && dlg);
            CHECKF(ck_cuda_decoder_epilogue_t(dh, p0, n, G, D2, dP[0], Hk[0], dP[1], Hk[1], dP[2], Hk[2], db1, dcw, dcb,
                                              dlg, dt, NULL, &err) == CKEY_OK,
                   "%s", err.message);
            REQUIRE(ck_cuda_copy(got, dlg, (size_t)4 * G * G * sizeof(float), 0, &err) == CKEY_OK);
            int64_t bad = 0, stray = 0;
            double worst = 0;
            for (int64_t p = 0; p < (int64_t)G * G; p++) {
                const int y = (int)(p / G), xx = (int)(p % G);
                if (p < p0 || p >= p0 + n) {
                    for (int o = 0; o < 4; o++) stray += got[(size_t)o * G * G + p] != 12345.f;
                    continue;
                }
                double acc[4] = {0, 0, 0, 0}, mag[4] = {0, 0, 0, 0};
                for (int e = 0; e < D2; e++) {
                    double v = (double)h[(p - p0) * D2 + e] + b1[e], a = fabs(v);
                    for (int s = 0; s < 3; s++) {
                        int y0, y1, x0, x1;
                        double ly, lx;
                        host_tap(y, Hk[s], G, &y0, &y1, &ly);
                        host_tap(xx, Hk[s], G, &x0, &x1, &lx);
                        const float *Q = P[s];
                        const int Hs = Hk[s];
                        const double q00 = Q[((size_t)y0 * Hs + x0) * D2 + e], q01 = Q[((size_t)y0 * Hs + x1) * D2 + e],
                                     q10 = Q[((size_t)y1 * Hs + x0) * D2 + e], q11 = Q[((size_t)y1 * Hs + x1) * D2 + e];
                        v += (1 - ly) * ((1 - lx) * q00 + lx * q01) + ly * ((1 - lx) * q10 + lx * q11);
                        a += fabs(q00) + fabs(q01) + fabs(q10) + fabs(q11);
                    }
                    v = v > 0 ? v : 0;
                    for (int o = 0; o < 4; o++) acc[o] += cw[o * D2 + e] * v, mag[o] += fabs(cw[o * D2 + e]) * a;
                }
                for (int o = 0; o < 4; o++) {
                    const double want = acc[o] + cb_[o], g = got[(size_t)o * G * G + p];
                    const double tol = 1e-5 * (mag[o] + fabs(cb_[o])) + 1e-6;
                    worst = fmax(worst, fabs(g - want) / tol);
                    bad += !(fabs(g - want) <= tol);
                }
            }
            printf("  decoder epilogue %s D2=%d G=%d maps %d/%d/%d pixels %lld+%lld: %lld of %lld logits over the "
                   "bound (worst %.3g of it), %lld written outside the chunk\n",
                   dt_name(dt), D2, G, Hk[0], Hk[1], Hk[2], (long long)p0, (long long)n, (long long)bad,
                   (long long)(4 * n), worst, (long long)stray);
            CHECK(bad == 0 && stray == 0);
            ck_cuda_free(dh), ck_cuda_free(db1), ck_cuda_free(dcw), ck_cuda_free(dcb), ck_cuda_free(dlg);
            for (int s = 0; s < 3; s++) free(P[s]), ck_cuda_free(dP[s]);
            free(h), free(b1), free(cw), free(cb_), free(lg), free(got);
        }
    }
    cpu_be_free(&cb);
}

static void test_linear_16bit(void) {
    if (ck_cuda_device_count() == 0) SKIP("no CUDA device on this machine");
    ck_cublas *h = NULL;
    ckey_error err;
    REQUIRE(ck_cublas_create(&h, &err) == CKEY_OK);
    void *ws = NULL;
    const size_t ws_bytes = (size_t)16 << 20;
    REQUIRE(ck_cuda_malloc(&ws, ws_bytes, NULL) == CKEY_OK);
    REQUIRE(ck_cublas_set_workspace(h, ws, ws_bytes, &err) == CKEY_OK);
    const struct {
        int64_t N;
        int in, out, blocks, col, bias, acc, boff, net;
    } cases[] = {
        {1000, 448, 224, 3, 1, 1, 1, 0, 0}, /* bias + accumulate, y the middle block of [N, 672] */
        {1000, 448, 224, 1, 0, 1, 0, 0, 0}, /* bias, ldy == out */
        {777, 896, 112, 2, 1, 0, 1, 0, 0},  /* accumulate, no bias */
        {513, 224, 56, 3, 2, 1, 0, 0, 0},   /* qkv-like: head_dim 56 of a 3*56 row */
        {300, 112, 100, 2, 1, 1, 1, 1, 0},  /* out not a multiple of 8, bias at +1 element */
        {4096, 112, 56, 3, 1, 1, 0, 56, 1}, /* mask-unit qkv, head 1's k rows: bias + 112 bytes */
        {2048, 224, 224, 1, 0, 1, 1, 0, 1}, /* attn.proj: bias + residual */
        {512, 1792, 448, 1, 0, 1, 1, 0, 1}, /* mlp.fc2: bias + residual, deep K */
        {512, 896, 512, 1, 0, 1, 0, 0, 1},  /* decoder scale layer (stage 4 -> 2 * dec_dim) */
    };
    const ck_dtype dts[2] = {CK_F16, CK_BF16};
    for (size_t ci = 0; ci < CK_ARRAY_LEN(cases); ci++)
        for (int d = 0; d < 2; d++) {
            const ck_dtype dt = dts[d];
            const int64_t N = cases[ci].N;
            const int in = cases[ci].in, out = cases[ci].out, ldy = out * cases[ci].blocks;
            const int col = out * cases[ci].col, boff = cases[ci].boff;
            const size_t ny = (size_t)N * ldy, nb = (size_t)out + (size_t)boff;
            const unsigned sd = 16u * (unsigned)ci;
            float *x = random_floats((size_t)N * in, 1601u + sd), *W = random_floats((size_t)out * in, 2603u + sd),
                  *b = random_floats(nb, 3605u + sd), *y0 = random_floats(ny, 4607u + sd);
            for (size_t i = 0; i < ny; i++) y0[i] *= 4.0f;
            void *dx = dev16_rounded(x, (size_t)N * in, dt), *dW = dev16_rounded(W, (size_t)out * in, dt),
                 *db = dev16_rounded(b, nb, dt), *dy = NULL;
            uint16_t *y0b = malloc(ny * 2), *got = malloc(ny * 2);
            double *ref = malloc((size_t)N * out * sizeof(double)), *sabs = malloc((size_t)N * out * sizeof(double)),
                   *pabs = malloc((size_t)N * out * sizeof(double));
            REQUIRE(dx && dW && db && y0b && got && ref && sabs && pabs);
            for (size_t i = 0; i < ny; i++) y0b[i] = to16(y0[i], dt), y0[i] = from16(y0b[i], dt);
            const float *bb = cases[ci].bias ? b + boff : NULL;
            for (int64_t r = 0; r < N; r++)
                for (int o = 0; o < out; o++) {
                    double acc = 0, sa = 0;
                    for (int k = 0; k < in; k++) {
                        const double p = (double)x[r * in + k] * W[(size_t)o * in + k];
                        acc += p, sa += fabs(p);
                    }
                    const double bo = bb ? bb[o] : 0.0, yo = cases[ci].acc ? y0[(size_t)r * ldy + col + o] : 0.0;
                    const size_t j = (size_t)r * out + o;
                    ref[j] = acc + bo + yo, sabs[j] = sa + fabs(bo) + fabs(yo), pabs[j] = fabs(acc);
                }
            const double u = unit_roundoff(dt);
            for (int path = 0; path < 2; path++) { /* 0: cuBLASLt allowed, 1: GEMM + bias pass */
                dy = to_device_bytes(y0b, ny * 2);
                REQUIRE(dy);
                ck_cublas_set_lt(h, path == 0);
                CHECKF(ck_cuda_linear_ld_t(h, dx, N, in, dW, cases[ci].bias ? (uint16_t *)db + boff : NULL,
                                           (uint16_t *)dy + col, out, ldy, cases[ci].acc, dt, NULL, &err) == CKEY_OK,
                       "%s", err.message);
                const int fused = ck_cublas_last_fused(h);
                REQUIRE(ck_cuda_copy(got, dy, ny * 2, 0, &err) == CKEY_OK);
                size_t bad = 0, over1 = 0, over3 = 0, moved = 0;
                double emax = 0;
                for (int64_t r = 0; r < N; r++)
                    for (int c = 0; c < ldy; c++) {
                        const size_t i = (size_t)r * ldy + c;
                        if (c < col || c >= col + out) {
                            moved += got[i] != y0b[i];
                            continue;
                        }
                        const int o = c - col;
                        const size_t j = (size_t)r * out + o;
                        const double bo = bb ? fabs(bb[o]) : 0.0, fp32 = 1e-5 * sabs[j];
                        const double e = fabs((double)from16(got[i], dt) - ref[j]);
                        emax = fmax(emax, e);
                        over1 += !(e <= u * fabs(ref[j]) + fp32);
                        bad += !(e <= u * (2 * fabs(ref[j]) + bo) + fp32);
                        over3 += !(e <= u * (2 * fabs(ref[j]) + bo + pabs[j]) + fp32);
                    }
                printf("  linear %-4s N=%lld in=%d out=%d ldy=%d%s%s%s: %s: max abs err %.3g, %zu over the bound "
                       "(%zu over one rounding, %zu over one more rounding of x W^T), %zu outside the block "
                       "changed\n",
                       dt_name(dt), (long long)N, in, out, ldy, bb ? " bias" : "", cases[ci].acc ? " accumulate" : "",
                       boff == 1 ? " (bias +1)" : boff ? " (bias at a head's rows)" : "",
                       fused ? "cuBLASLt, fused" : path ? "GEMM + bias pass (cuBLASLt off)" : "GEMM + bias pass "
                       "(no cuBLASLt algorithm)", emax, bad, over1, over3, moved);
                /* With accumulation, cuBLAS's epilogue (on both paths) rounds
                 * x W^T to 16 bits before it adds y, one rounding more than the
                 * bound (PyTorch's `x + linear(...)` under autocast rounds the
                 * same way), so those cases are held to the bound plus that
                 * rounding. */
                CHECK((cases[ci].acc ? over3 : bad) == 0 && moved == 0);
                CHECK(path == 1 ? !fused : !cases[ci].net || fused); /* the network's shapes run fused */
                ck_cuda_free(dy);
            }
            ck_cublas_set_lt(h, 1);
            ck_cuda_free(dx), ck_cuda_free(dW), ck_cuda_free(db);
            free(x), free(W), free(b), free(y0), free(y0b), free(got), free(ref), free(sabs), free(pabs);
        }
    int fused = 0, fallback = 0, bfused = 0, bfallback = 0;
    ck_cublas_plan_counts(h, 0, &fused, &fallback);
    ck_cublas_plan_counts(h, 1, &bfused, &bfallback);
    printf("  cuBLASLt plans: %d with an algorithm, %d without (GEMM + bias pass); with a bias: %d fused, %d not\n",
           fused, fallback, bfused, bfallback);
    ck_cublas_free(h);
    ck_cuda_free(ws);
}

/* 16-bit LayerNorm (vector kernel: C a multiple of 8, 16-byte aligned;
 * generic otherwise) and bias + exact GELU (16-byte vectors or scalar)
 * against double references on the rounded inputs: one final rounding plus
 * fp32 arithmetic. */
/* The fused linear + bias + erf GELU (linear-gelu-wgmma.cu) against a double
 * reference on the 16-bit-rounded x and W: the MLP's fc1 shapes (K = 112,
 * 224, 448, 896 into 4K) and small ones (K under one 64-wide step, N under
 * one 128-wide tile), M with partial tiles; rows past M untouched. Bound per
 * value: the output's 16-bit rounding (u |ref|) plus the fp32 accumulation
 * (2e-5 of sum |x w|, GELU's slope at most 1.13) and the erf approximation. */
static void test_linear_gelu_16bit(void) {
    if (ck_cuda_device_count() == 0) SKIP("no CUDA device on this machine");
    if (!ck_cuda_wgmma_ok()) SKIP("the device is not compute capability 9.0 (wgmma is sm_90a only)");
    ckey_error err;
    const struct { int64_t M; int K, N; } cases[] = {{300, 112, 448}, {257, 224, 896}, {129, 448, 1792},
                                                     {77, 896, 3584},  {64, 40, 24},   {1000, 8, 136},
                                                     {4500, 72, 1032}, /* 324 / 162 tiles: more than a CTA each */
                                                     {1500, 448, 1800}}; /* N past a 256-wide tile by 8 */
    const ck_dtype dts[2] = {CK_F16, CK_BF16};
    /* the kernel's forms by request (tile width, clusters), then its default pick */
    enum { NF = 5 };
    const int forms[NF] = {CK_LINEAR_TILE_N128 | CK_LINEAR_CLUSTER1, CK_LINEAR_TILE_N256 | CK_LINEAR_CLUSTER1,
                           CK_LINEAR_TILE_N128 | CK_LINEAR_CLUSTER2, CK_LINEAR_TILE_N256 | CK_LINEAR_CLUSTER2, 0};
    const char *const form_name[NF] = {"128-wide tiles", "256-wide tiles", "128-wide tiles, clusters of 2",
                                       "256-wide tiles, clusters of 2", "default form"};
    for (size_t c = 0; c < CK_ARRAY_LEN(cases); c++)
        for (int d = 0; d < 2; d++)
            for (int mode = 0; mode < 2; mode++) { /* bias + GELU (fp32 bias); bias only (bias in dt) */
                const ck_dtype dt = dts[d];
                const int64_t M = cases[c].M;
                const int K = cases[c].K, N = cases[c].N;
                REQUIRE(ck_cuda_linear_gelu_ok(M, K, N, dt));
                float *x = random_floats((size_t)M * K, 801u + (unsigned)c), *w = random_floats((size_t)N * K, 803u),
                      *b = random_floats((size_t)N, 805u);
                for (size_t i = 0; i < (size_t)M * K; i++) x[i] *= 2.0f;
                for (size_t i = 0; i < (size_t)N * K; i++) w[i] *= 2.0f / sqrtf((float)K);
                void *dx = dev16_rounded(x, (size_t)M * K, dt), *dw = dev16_rounded(w, (size_t)N * K, dt), *dy = NULL;
                void *db = mode ? dev16_rounded(b, (size_t)N, dt) : (void *)to_device(b, (size_t)N);
                const size_t ny = (size_t)(M + 2) * N; /* two rows past M: must stay as they are */
                uint16_t *got[NF];
                for (int f = 0; f < NF; f++) got[f] = malloc(ny * 2);
                REQUIRE(dx && dw && db && ck_cuda_malloc(&dy, ny * 2, NULL) == CKEY_OK);
                /* the default form of the GELU through ck_cuda_linear_gelu, as the MLP calls it */
                for (int f = 0; f < NF; f++) {
                    REQUIRE(got[f]);
                    for (size_t i = 0; i < ny; i++) got[f][i] = 0x7BCDu;
                    REQUIRE(ck_cuda_copy(dy, got[f], ny * 2, 1, &err) == CKEY_OK);
                    if (forms[f] == 0 && mode == 0)
                        CHECKF(ck_cuda_linear_gelu(dx, M, K, dw, db, dy, N, dt, NULL, &err) == CKEY_OK, "%s",
                               err.message);
                    else
                        CHECKF(ck_cuda_linear_wgmma(dx, M, K, dw, db, dy, N,
                                                    (mode ? CK_LINEAR_BIAS16 : CK_LINEAR_GELU) | forms[f], dt, NULL,
                                                    &err) == CKEY_OK,
                               "%s", err.message);
                    REQUIRE(ck_cuda_sync(&err) == CKEY_OK);
                    REQUIRE(ck_cuda_copy(got[f], dy, ny * 2, 0, &err) == CKEY_OK);
                }
                const double u = dt == CK_F16 ? 1.0 / 2048 : 1.0 / 256;
                int64_t bad[NF] = {0}, stray[NF] = {0};
                double worst[NF] = {0};
                for (int64_t r = 0; r < M; r++)
                    for (int n = 0; n < N; n++) {
                        double s = b[n], mag = fabs(b[n]);
                        for (int k = 0; k < K; k++) {
                            const double p = (double)x[r * K + k] * w[(size_t)n * K + k];
                            s += p, mag += fabs(p);
                        }
                        const double want = mode ? s : 0.5 * s * (1.0 + erf(s / sqrt(2.0)));
                        const double tol = u * fabs(want) + 1.13 * 2e-5 * mag + 1e-6 * (1.0 + fabs(s));
                        for (int f = 0; f < NF; f++) {
                            const double g = from16(got[f][r * N + n], dt);
                            worst[f] = fmax(worst[f], fabs(g - want) / tol);
                            bad[f] += !(fabs(g - want) <= tol);
                        }
                    }
                for (int f = 0; f < NF; f++) {
                    for (size_t i = (size_t)M * N; i < ny; i++) stray[f] += got[f][i] != 0x7BCDu;
                    printf("  linear %s %s M=%lld K=%d N=%d, %s: %lld of %lld over the bound (worst %.3g of it), "
                           "%lld written past M\n",
                           mode ? "+ bias (16-bit)" : "+ GELU", dt_name(dt), (long long)M, K, N,
                           form_name[f], (long long)bad[f],
                           (long long)(M * N), worst[f], (long long)stray[f]);
                    CHECK(bad[f] == 0 && stray[f] == 0);
                }
                ck_cuda_free(dx), ck_cuda_free(dw), ck_cuda_free(db), ck_cuda_free(dy);
                free(x), free(w), free(b);
                for (int f = 0; f < NF; f++) free(got[f]);
            }
    /* K or N not a multiple of 8: refused by _ok and by the call */
    CHECK(!ck_cuda_linear_gelu_ok(100, 12, 448, CK_F16) && !ck_cuda_linear_gelu_ok(100, 112, 100, CK_F16));
    CHECK(ck_cuda_linear_gelu(NULL, 100, 12, NULL, NULL, NULL, 448, CK_F16, NULL, &err) == CKEY_ERR_UNSUPPORTED);

    /* timings at S = 2048's fc1 shapes (printed, not asserted): the fused kernel against cuBLASLt's
     * GEMM + the bias + GELU pass, 20 launches after 3 */
    const struct { int64_t M; int K, N, gelu; } t[] = {{32768, 112, 448, 1},    {32768, 224, 896, 1},
                                                       {16384, 448, 1792, 1},   {4096, 896, 3584, 1},
                                                       {262144, 112, 336, 0},   {262144, 112, 672, 0},
                                                       {16384, 448, 1344, 0}};
    ck_cublas *blas = NULL;
    void *ws = NULL; /* the session's cuBLAS workspace size */
    REQUIRE(ck_cublas_create(&blas, &err) == CKEY_OK && ck_cuda_malloc(&ws, 16u << 20, NULL) == CKEY_OK &&
            ck_cublas_set_workspace(blas, ws, 16u << 20, &err) == CKEY_OK);
    for (size_t c = 0; c < CK_ARRAY_LEN(t); c++) {
        const int64_t M = t[c].M;
        const int K = t[c].K, N = t[c].N;
        float *x = random_floats((size_t)M * K, 811u), *w = random_floats((size_t)N * K, 813u), *b = random_floats(N, 815u);
        void *dx = dev16_rounded(x, (size_t)M * K, CK_F16), *dw = dev16_rounded(w, (size_t)N * K, CK_F16), *dy = NULL;
        float *db = to_device(b, N);
        void *db16 = dev16_rounded(b, N, CK_F16); /* cuBLASLt's fused bias is in the output's type */
        REQUIRE(dx && dw && db && db16 && ck_cuda_malloc(&dy, (size_t)M * N * 2, NULL) == CKEY_OK);
        double ms[NF];
        for (int v = 0; v < NF; v++) { /* the forms as above, then cuBLASLt */
            for (int r = 0; r < 23; r++) {
                if (r == 3) {
                    REQUIRE(ck_cuda_sync(&err) == CKEY_OK);
                    ms[v] = wall_s();
                }
                if (v < NF - 1)
                    CHECK(ck_cuda_linear_wgmma(dx, M, K, dw, t[c].gelu ? (const void *)db : db16, dy, N,
                                               (t[c].gelu ? CK_LINEAR_GELU : CK_LINEAR_BIAS16) | forms[v], CK_F16,
                                               NULL, &err) == CKEY_OK);
                else if (t[c].gelu) {
                    CHECK(ck_cuda_linear_t(blas, dx, M, K, dw, NULL, dy, N, 0, CK_F16, NULL, &err) == CKEY_OK);
                    CHECK(ck_cuda_bias_gelu_t(dy, M, N, db, CK_F16, NULL, &err) == CKEY_OK);
                } else /* cuBLASLt with its bias in the epilogue (16-bit: the session's copies) */
                    CHECK(ck_cuda_linear_t(blas, dx, M, K, dw, db16, dy, N, 0, CK_F16, NULL, &err) == CKEY_OK);
            }
            REQUIRE(ck_cuda_sync(&err) == CKEY_OK);
            ms[v] = (wall_s() - ms[v]) * 1e3 / 20;
        }
        printf("  timing linear%s f16 M=%lld K=%d N=%d, wgmma kernel:", t[c].gelu ? " + GELU" : " + bias",
               (long long)M, K, N);
        for (int v = 0; v < NF - 1; v++)
            printf("%s %s %.1f us (%.0f TFLOP/s)", v ? ";" : "", form_name[v], ms[v] * 1e3,
                   2.0 * M * K * N / (ms[v] * 1e-3) / 1e12);
        printf("; cuBLASLt%s %.1f us\n", t[c].gelu ? " + the pass" : "", ms[NF - 1] * 1e3);
        if (t[c].gelu) { /* what the time is made of: the K loop without the epilogue, the loads alone */
            const int probe[4] = {CK_LINEAR_TILE_N128 | CK_LINEAR_PROBE_MAINLOOP, CK_LINEAR_TILE_N128 | CK_LINEAR_PROBE_LOADS,
                                  CK_LINEAR_TILE_N256 | CK_LINEAR_PROBE_MAINLOOP, CK_LINEAR_TILE_N256 | CK_LINEAR_PROBE_LOADS};
            double pm[4];
            for (int v = 0; v < 4; v++) {
                for (int r = 0; r < 23; r++) {
                    if (r == 3) {
                        REQUIRE(ck_cuda_sync(&err) == CKEY_OK);
                        pm[v] = wall_s();
                    }
                    CHECK(ck_cuda_linear_wgmma(dx, M, K, dw, db, dy, N, CK_LINEAR_GELU | probe[v], CK_F16, NULL, &err) ==
                          CKEY_OK);
                }
                REQUIRE(ck_cuda_sync(&err) == CKEY_OK);
                pm[v] = (wall_s() - pm[v]) * 1e6 / 20;
            }
            printf("    probes: 128-wide tiles, K loop alone %.1f us, loads alone %.1f us; 256-wide %.1f / %.1f us\n",
                   pm[0], pm[1], pm[2], pm[3]);
        }
        ck_cuda_free(dx), ck_cuda_free(dw), ck_cuda_free(db), ck_cuda_free(db16), ck_cuda_free(dy);
        free(x), free(w), free(b);
    }
    ck_cublas_free(blas);
    ck_cuda_free(ws);
}

/* The fused fc1 with its LayerNorm folded in (ln-fold.h; ck_cuda_layernorm_stats_t +
 * ck_cuda_linear_gelu_ln) against a double reference of LayerNorm -> linear
 * -> GELU on the 16-bit-rounded x: rows with mean offsets up to 16 times
 * their spread (the fold subtracts mean colsum after the GEMM), g and beta
 * random, each tile form and the default. Bound per value: the output's
 * rounding, W diag(g)'s 16-bit rounding on the centred part (u_w rstd
 * sum |W g (x - mean)|), the fp32 accumulation of the uncentred products
 * (2e-5 rstd sum |W' x|), the stats' fp32 error and the GELU's 1e-6. The
 * stats are checked against double too (mean within 1e-6 of the row's
 * magnitude, rstd within 1e-5 relative), and rows past M stay as they were. */
static void test_linear_gelu_ln_fold_16bit(void) {
    if (ck_cuda_device_count() == 0) SKIP("no CUDA device on this machine");
    if (!ck_cuda_wgmma_ok()) SKIP("the device is not compute capability 9.0 (wgmma is sm_90a only)");
    ckey_error err;
    const struct { int64_t M; int K, N; } cases[] = {{300, 112, 448}, {257, 224, 896},  {129, 448, 1792},
                                                     {77, 896, 3584},  {1000, 40, 136}, {4500, 72, 1032}};
    const ck_dtype dts[2] = {CK_F16, CK_BF16};
    const int forms[3] = {CK_LINEAR_TILE_N128, CK_LINEAR_TILE_N256, 0};
    for (size_t c = 0; c < CK_ARRAY_LEN(cases); c++)
        for (int d = 0; d < 2; d++) {
            const ck_dtype dt = dts[d];
            const int64_t M = cases[c].M;
            const int K = cases[c].K, N = cases[c].N;
            REQUIRE(ck_cuda_linear_gelu_ok(M, K, N, dt));
            float *x = random_floats((size_t)M * K, 901u + (unsigned)c), *w = random_floats((size_t)N * K, 903u),
                  *b = random_floats((size_t)N, 905u), *g = random_floats((size_t)K, 907u),
                  *beta = random_floats((size_t)K, 909u), *off = random_floats((size_t)M, 911u);
            float *wf = malloc((size_t)N * K * sizeof(float)), *bf = malloc((size_t)N * sizeof(float)),
                  *cs = malloc((size_t)N * sizeof(float)), *st = malloc((size_t)M * 2 * sizeof(float));
            uint16_t *wq = malloc((size_t)N * K * 2);
            REQUIRE(wf && bf && cs && st && wq);
            for (int64_t r = 0; r < M; r++) /* spread 0.5 .. 2, offsets up to 16 spreads */
                for (int k = 0; k < K; k++) {
                    const float spread = 1.25f + 0.75f * off[(r + 7) % M];
                    x[r * K + k] = spread * (x[r * K + k] + 16.f * off[r]);
                }
            for (int k = 0; k < K; k++) g[k] = 1.f + 0.5f * g[k];
            for (size_t i = 0; i < (size_t)N * K; i++) w[i] *= 2.0f / sqrtf((float)K);
            ck_lnfold_weights(w, g, beta, b, N, K, wf, bf);
            void *dx = dev16_rounded(x, (size_t)M * K, dt), *dw = dev16_rounded(wf, (size_t)N * K, dt), *dy = NULL;
            REQUIRE(dx && dw && ck_cuda_copy(wq, dw, (size_t)N * K * 2, 0, &err) == CKEY_OK);
            ck_lnfold_colsum16(wq, dt, N, K, cs);
            float *dbf = to_device(bf, (size_t)N), *dcs = to_device(cs, (size_t)N), *dst = NULL;
            const size_t ny = (size_t)(M + 2) * N;
            uint16_t *got = malloc(ny * 2);
            REQUIRE(dbf && dcs && got && ck_cuda_malloc(&dy, ny * 2, NULL) == CKEY_OK &&
                    ck_cuda_malloc((void **)&dst, (size_t)M * 2 * sizeof(float), NULL) == CKEY_OK);
            CHECKF(ck_cuda_layernorm_stats_t(dx, M, K, dst, dt, NULL, &err) == CKEY_OK, "%s", err.message);
            REQUIRE(ck_cuda_sync(&err) == CKEY_OK && ck_cuda_copy(st, dst, (size_t)M * 2 * sizeof(float), 0, &err) == CKEY_OK);
            /* double reference: stats, then LayerNorm -> linear -> GELU on the rounded x (w, g, beta, b unrounded) */
            double *mu = malloc((size_t)M * sizeof(double)), *rs = malloc((size_t)M * sizeof(double));
            REQUIRE(mu && rs);
            int64_t bad_stats = 0;
            for (int64_t r = 0; r < M; r++) { /* fp32 sums of K terms: the mean within 2u sum |x|, rstd (K + 4) u */
                double sum = 0, q = 0, sabs = 0;
                for (int k = 0; k < K; k++) sum += x[r * K + k], sabs += fabs(x[r * K + k]);
                mu[r] = sum / K;
                for (int k = 0; k < K; k++) q += (x[r * K + k] - mu[r]) * (x[r * K + k] - mu[r]);
                rs[r] = 1.0 / sqrt(q / K + 1e-6);
                bad_stats += !(fabs(st[2 * r] - mu[r]) <= ldexp(sabs, -23) &&
                               fabs(st[2 * r + 1] - rs[r]) <= (K + 4) * ldexp(rs[r], -24));
            }
            const double u = unit_roundoff(dt);
            for (int f = 0; f < 3; f++) {
                for (size_t i = 0; i < ny; i++) got[i] = 0x7BCDu;
                REQUIRE(ck_cuda_copy(dy, got, ny * 2, 1, &err) == CKEY_OK);
                CHECKF(ck_cuda_linear_gelu_ln(dx, M, K, dw, dbf, dcs, dst, dy, N, forms[f], dt, NULL, &err) == CKEY_OK,
                       "%s", err.message);
                REQUIRE(ck_cuda_sync(&err) == CKEY_OK && ck_cuda_copy(got, dy, ny * 2, 0, &err) == CKEY_OK);
                int64_t bad = 0, stray = 0;
                double worst = 0;
                for (int64_t r = 0; r < M; r++)
                    for (int n = 0; n < N; n++) {
                        double s0 = b[n], cen = 0, unc = 0, wabs = 0;
                        for (int k = 0; k < K; k++) {
                            const double xc = x[r * K + k] - mu[r], wk = w[(size_t)n * K + k];
                            s0 += wk * (xc * rs[r] * g[k] + beta[k]);
                            cen += fabs(wk * g[k] * xc);
                            unc += fabs((double)wf[(size_t)n * K + k] * x[r * K + k]);
                            wabs += fabs(wf[(size_t)n * K + k]);
                        }
                        const double want = 0.5 * s0 * (1.0 + erf(s0 / sqrt(2.0)));
                        /* the kernel's stats' own errors (checked above) enter through mean colsum and rstd */
                        const double dmu = fabs(st[2 * r] - mu[r]), drs = fabs(st[2 * r + 1] - rs[r]);
                        const double tol = u * fabs(want) +
                                           1.13 * (u * rs[r] * cen + 2e-5 * rs[r] * unc + dmu * rs[r] * wabs +
                                                   drs * cen + 1e-6 * fabs(s0)) +
                                           1e-6 * (1.0 + fabs(s0));
                        const double gv = from16(got[r * N + n], dt);
                        worst = fmax(worst, fabs(gv - want) / tol);
                        bad += !(fabs(gv - want) <= tol);
                    }
                for (size_t i = (size_t)M * N; i < ny; i++) stray += got[i] != 0x7BCDu;
                printf("  linear + GELU, LayerNorm folded, %s M=%lld K=%d N=%d, %s: %lld of %lld over the bound "
                       "(worst %.3g of it), %lld written past M; stats: %lld rows off\n",
                       dt_name(dt), (long long)M, K, N,
                       f == 0 ? "128-wide tiles" : f == 1 ? "256-wide tiles" : "default form", (long long)bad,
                       (long long)(M * N), worst, (long long)stray, (long long)bad_stats);
                CHECK(bad == 0 && stray == 0 && bad_stats == 0);
            }
            ck_cuda_free(dx), ck_cuda_free(dw), ck_cuda_free(dy), ck_cuda_free(dbf), ck_cuda_free(dcs), ck_cuda_free(dst);
            free(x), free(w), free(b), free(g), free(beta), free(off), free(wf), free(bf), free(cs), free(st), free(wq);
            free(mu), free(rs), free(got);
        }
}

static void test_layernorm_gelu_16bit(void) {
    if (ck_cuda_device_count() == 0) SKIP("no CUDA device on this machine");
    ckey_error err;
    const int64_t N = 1001;
    const int Cs[] = {112, 224, 448, 896, 40, 100, 3584};
    const ck_dtype dts[2] = {CK_F16, CK_BF16};
    for (size_t k = 0; k < CK_ARRAY_LEN(Cs); k++)
        for (int d = 0; d < 2; d++) {
            const int C = Cs[k];
            const ck_dtype dt = dts[d];
            const size_t n = (size_t)N * C;
            float *x = random_floats(n + 8, 701u + (unsigned)k), *g = random_floats(C + 1, 703),
                  *b = random_floats(C + 1, 705), *ref = malloc(n * sizeof(float));
            for (size_t i = 0; i < n + 8; i++) x[i] = 3.0f * x[i] + 0.5f;
            void *dx = dev16_rounded(x, n + 8, dt), *dy = NULL;
            /* g and b at +1 float for C = 224 (scalar weight loads), 16-byte aligned else */
            const int wo = C == 224 ? 1 : 0;
            float *dg0 = to_device(g, C + 1), *db0 = to_device(b, C + 1);
            float *dg = dg0 ? dg0 + wo : NULL, *db = db0 ? db0 + wo : NULL;
            g += wo, b += wo;
            REQUIRE(dx && dg && db && ck_cuda_malloc(&dy, n * 2, NULL) == CKEY_OK);
            char name[64];
            if (C <= 896) {
                for (int64_t r = 0; r < N; r++) {
                    const float *xr = x + r * C;
                    double s = 0, q = 0;
                    for (int i = 0; i < C; i++) s += xr[i];
                    const double mean = s / C;
                    for (int i = 0; i < C; i++) q += (xr[i] - mean) * (xr[i] - mean);
                    const double rstd = 1.0 / sqrt(q / C + 1e-6);
                    for (int i = 0; i < C; i++) ref[r * C + i] = (float)((xr[i] - mean) * rstd * g[i] + b[i]);
                }
                CHECKF(ck_cuda_layernorm_t(dx, N, C, dg, db, dy, dt, NULL, &err) == CKEY_OK, "%s", err.message);
                snprintf(name, sizeof name, "layernorm %s C=%d", dt_name(dt), C);
                CHECK(cmp_dev16(name, dy, dt, ref, n, 1e-4) == 0);
            }
            /* bias + GELU in place: aligned (16-byte vectors when C % 8 == 0) and at +1 element (scalar) */
            for (int off = 0; off < 2; off++) {
                for (size_t i = 0; i < n; i++) {
                    const double v = (double)x[i + off] + b[i % C];
                    ref[i] = (float)(0.5 * v * (1.0 + erf(v / sqrt(2.0))));
                }
                uint16_t *hp = (uint16_t *)dx + off;
                CHECKF(ck_cuda_bias_gelu_t(hp, N, C, db, dt, NULL, &err) == CKEY_OK, "%s", err.message);
                snprintf(name, sizeof name, "bias+gelu %s C=%d%s", dt_name(dt), C, off ? " (+1 element)" : "");
                CHECK(cmp_dev16(name, hp, dt, ref, n, 1e-5) == 0);
                ck_cuda_free(dx); /* fresh input (x holds the rounded values) for the next round */
                dx = dev16_rounded(x, n + 8, dt);
                REQUIRE(dx);
            }
            ck_cuda_free(dx), ck_cuda_free(dy), ck_cuda_free(dg0), ck_cuda_free(db0);
            free(x), free(g - wo), free(b - wo), free(ref);
        }
}

/* The measured cuBLASLt picks (src/cuda/lt-tuned.h): on the GPU and
 * cuBLASLt version they were measured on, three of the table's keys (fp16
 * and bf16; with and without accumulation and bias) run with their pick, not
 * the heuristic's first, and agree with the heuristic's first to within the
 * 16-bit rounding of either result (both sum in fp32, in different orders):
 * |tuned - first| <= 2u max(|tuned|, |first|) + 1e-3. Elsewhere: skipped. */
static void test_linear_tuned_picks(void) {
    if (ck_cuda_device_count() == 0) SKIP("no CUDA device on this machine");
    ck_cublas *h = NULL;
    ckey_error err;
    REQUIRE(ck_cublas_create(&h, &err) == CKEY_OK);
    void *ws = NULL;
    REQUIRE(ck_cuda_malloc(&ws, (size_t)16 << 20, NULL) == CKEY_OK);
    REQUIRE(ck_cublas_set_workspace(h, ws, (size_t)16 << 20, &err) == CKEY_OK); /* the session's size */
    if (!ck_cublas_tuned(h)) {
        ck_cublas_free(h), ck_cuda_free(ws);
        SKIP("no measured cuBLASLt picks for this GPU and cuBLASLt version");
    }
    static const struct {
        int N, in, out, acc, bias;
        ck_dtype dt;
    } cases[] = {{4096, 896, 896, 1, 1, CK_F16}, {16384, 448, 1792, 0, 0, CK_F16}, {4096, 896, 2688, 0, 1, CK_BF16}};
    for (int ci = 0; ci < 3; ci++) {
        const int N = cases[ci].N, in = cases[ci].in, out = cases[ci].out;
        const ck_dtype dt = cases[ci].dt;
        const size_t nx = (size_t)N * in, nw = (size_t)in * out, ny = (size_t)N * out;
        float *x = random_floats(nx, 701u + (unsigned)ci), *w = random_floats(nw, 703u), *y0 = random_floats(ny, 705u),
              *b = random_floats((size_t)out, 707u), *got[2];
        void *dx = dev16_rounded(x, nx, dt), *dw = dev16_rounded(w, nw, dt), *db = dev16_rounded(b, (size_t)out, dt);
        REQUIRE(dx && dw && db);
        int picks[2];
        for (int t = 0; t < 2; t++) { /* t = 0: the table's pick; 1: the heuristic's first */
            ck_cublas_set_tuned(h, t == 0);
            void *dy = dev16_rounded(y0, ny, dt);
            got[t] = malloc(ny * sizeof(float));
            REQUIRE(dy && got[t]);
            CHECKF(ck_cuda_linear_t(h, dx, N, in, dw, cases[ci].bias ? db : NULL, dy, out, cases[ci].acc, dt, NULL,
                                    &err) == CKEY_OK,
                   "%s", err.message);
            picks[t] = ck_cublas_last_pick(h);
            REQUIRE(ck_cublas_last_fused(h) && download16(got[t], dy, ny, dt));
            ck_cuda_free(dy);
        }
        const double u = unit_roundoff(dt);
        size_t bad = 0;
        double maxd = 0;
        for (size_t i = 0; i < ny; i++) {
            const double d = fabs((double)got[0][i] - got[1][i]);
            maxd = fmax(maxd, d);
            bad += !(d <= 2 * u * fmax(fabs(got[0][i]), fabs(got[1][i])) + 1e-3);
        }
        printf("  %s N=%d %d->%d%s%s: pick %d (heuristic's first: %d), max |diff| %.3g, %zu of %zu over the bound\n",
               dt_name(dt), N, in, out, cases[ci].acc ? " accumulate" : "", cases[ci].bias ? " bias" : "", picks[0],
               picks[1], maxd, bad, ny);
        CHECK(picks[0] > 0 && picks[1] == 0 && bad == 0);
        ck_cuda_free(dx), ck_cuda_free(dw), ck_cuda_free(db);
        free(x), free(w), free(y0), free(b), free(got[0]), free(got[1]);
    }
    ck_cublas_set_tuned(h, 1);
    ck_cublas_free(h);
    ck_cuda_free(ws);
}


/* ---- the frame path: resize, unpack, sRGB, normalization against src/pixel ---- */

/* One resize on the GPU (ck_resize_run_cuda) against ck_resize_run: *e_out the max abs error. */
static void resize_gpu_vs_cpu(int C, int ih, int iw, int oh, int ow, ck_resize_mode mode, unsigned seed,
                              double *e_out) {
    *e_out = INFINITY;
    const size_t nin = (size_t)C * ih * iw, nout = (size_t)C * oh * ow;
    float *src = random_floats(nin, seed), *ref = malloc(nout * sizeof(float)), *got = malloc(nout * sizeof(float));
    for (size_t i = 0; i < nin; i++) src[i] = 0.5f + 0.5f * src[i]; /* [0, 1] like pixels */
    const size_t sc = ck_resize_scratch_floats(C, ih, iw, oh, ow, mode);
    float *scratch = malloc(sc * sizeof(float));
    ck_resize r;
    REQUIRE(sc && ck_resize_prepare(&r, C, ih, iw, oh, ow, mode, scratch) == CKEY_OK);
    ck_resize_run(&r, src, ref);
    /* the tables (and the intermediate) live in scratch: copy it whole, then aim at the same offsets */
    float *dscr = to_device(scratch, sc), *dsrc = to_device(src, nin), *ddst = NULL;
    REQUIRE(dscr && dsrc && ck_cuda_malloc((void **)&ddst, nout * sizeof(float), NULL) == CKEY_OK);
    const float *tw = dscr + (r.table_w - scratch), *th = dscr + (r.table_h - scratch);
    float *tmp = r.tmp ? dscr + (r.tmp - scratch) : NULL;
    ckey_error err;
    CHECKF(ck_resize_run_cuda(&r, tw, th, dsrc, tmp, ddst, NULL, &err) == CKEY_OK, "%s", err.message);
    REQUIRE(ck_cuda_copy(got, ddst, nout * sizeof(float), 0, &err) == CKEY_OK);
    double e = 0;
    for (size_t i = 0; i < nout; i++) e = fmax(e, fabs((double)got[i] - ref[i]));
    ck_cuda_free(dscr), ck_cuda_free(dsrc), ck_cuda_free(ddst);
    free(src), free(ref), free(got), free(scratch);
    *e_out = e;
}

static void test_frame_resize(void) {
    if (ck_cuda_device_count() == 0) SKIP("no CUDA device on this machine");
    static const struct { int C, ih, iw, oh, ow; } sz[] = {
        {3, 1080, 1920, 256, 256}, {1, 2160, 3840, 512, 512}, {3, 256, 256, 1080, 1920}, {1, 256, 256, 2160, 3840},
        {3, 300, 200, 300, 128}, {1, 123, 77, 64, 77}, {3, 64, 64, 64, 64}, {4, 17, 900, 33, 31}};
    static const ck_resize_mode modes[] = {CK_RESIZE_BILINEAR_AA, CK_RESIZE_BILINEAR, CK_RESIZE_LANCZOS4};
    static const char *const names[] = {"bilinear aa", "bilinear", "lanczos4"};
    for (size_t m = 0; m < CK_ARRAY_LEN(modes); m++)
        for (size_t k = 0; k < CK_ARRAY_LEN(sz); k++) {
            double e;
            resize_gpu_vs_cpu(sz[k].C, sz[k].ih, sz[k].iw, sz[k].oh, sz[k].ow, modes[m], 100u + (unsigned)(m * 16 + k),
                              &e);
            printf("  %-12s %d x %4d x %4d -> %4d x %4d  max abs err %.3g\n", names[m], sz[k].C, sz[k].ih, sz[k].iw,
                   sz[k].oh, sz[k].ow, e);
            CHECK(e <= 2e-6);
        }
}

/* Plate and hint as interleaved 8-bit, 16-bit and half pixels, unpacked,
 * resized, encoded to sRGB (linear plates) and normalized on the GPU, against
 * ck_preprocess on the same floats. */
static void test_frame_preprocess(void) {
    if (ck_cuda_device_count() == 0) SKIP("no CUDA device on this machine");
    const int h = 540, w = 960, S = 256;
    const int64_t n = (int64_t)h * w, plane = (int64_t)S * S;
    for (int type = 0; type < 3; type++) {
        for (int linear = 0; linear < 2; linear++) {
            /* RGBA pixels: alpha channel carries the hint */
            const size_t es = type == CK_PIXEL_U8 ? 1 : 2;
            unsigned char *px = malloc((size_t)n * 4 * es);
            float *rgb = malloc((size_t)n * 3 * sizeof(float)), *hint = malloc((size_t)n * sizeof(float));
            unsigned seed = 7u + (unsigned)(type * 2 + linear);
            for (int64_t p = 0; p < n; p++)
                for (int c = 0; c < 4; c++) {
                    seed = seed * 1664525u + 1013904223u;
                    float v;
                    if (type == CK_PIXEL_U8) {
                        px[p * 4 + c] = (unsigned char)(seed >> 24);
                        v = px[p * 4 + c] / 255.0f;
                    } else if (type == CK_PIXEL_U16) {
                        uint16_t u = (uint16_t)(seed >> 16);
                        memcpy(px + (p * 4 + c) * 2, &u, 2);
                        v = u / 65535.0f;
                    } else {
                        uint16_t u = ck_f32_to_f16((float)(seed >> 8) / (float)(1u << 24) * 1.5f);
                        memcpy(px + (p * 4 + c) * 2, &u, 2);
                        v = ck_f16_to_f32(u);
                    }
                    if (c < 3) rgb[c * n + p] = v;
                    else hint[p] = v;
                }
            float *x = malloc((size_t)4 * plane * sizeof(float)), *got = malloc((size_t)4 * plane * sizeof(float));
            float *scratch = malloc(ck_preprocess_scratch_floats(h, w, S) * sizeof(float));
            REQUIRE(ck_preprocess(rgb, hint, h, w, S, linear, x, scratch) == CKEY_OK);
            /* the GPU path */
            ckey_error err;
            void *dpx = NULL;
            float *dplanes = NULL, *dx = NULL;
            REQUIRE(ck_cuda_malloc(&dpx, (size_t)n * 4 * es, NULL) == CKEY_OK);
            REQUIRE(ck_cuda_copy(dpx, px, (size_t)n * 4 * es, 1, NULL) == CKEY_OK);
            REQUIRE(ck_cuda_malloc((void **)&dplanes, (size_t)n * 4 * sizeof(float), NULL) == CKEY_OK);
            REQUIRE(ck_cuda_malloc((void **)&dx, (size_t)4 * plane * sizeof(float), NULL) == CKEY_OK);
            CHECKF(ck_cuda_unpack_pixels(dpx, (ck_pixel_type)type, 4, n, dplanes, 3, dplanes + 3 * n, 3, NULL, &err) ==
                       CKEY_OK, "%s", err.message);
            for (int c = 0; c < 2; c++) { /* rgb (3 channels), then the hint */
                const int ch = c == 0 ? 3 : 1;
                const size_t sc = ck_resize_scratch_floats(ch, h, w, S, S, CK_RESIZE_BILINEAR_AA);
                float *hs = malloc(sc * sizeof(float));
                ck_resize r;
                REQUIRE(ck_resize_prepare(&r, ch, h, w, S, S, CK_RESIZE_BILINEAR_AA, hs) == CKEY_OK);
                float *ds = to_device(hs, sc);
                REQUIRE(ds);
                CHECKF(ck_resize_run_cuda(&r, ds + (r.table_w - hs), ds + (r.table_h - hs), dplanes + (c ? 3 * n : 0),
                                          r.tmp ? ds + (r.tmp - hs) : NULL, dx + (c ? 3 * plane : 0), NULL, &err) ==
                           CKEY_OK, "%s", err.message);
                ck_cuda_free(ds);
                free(hs);
            }
            if (linear) CHECK(ck_cuda_srgb(dx, 3 * plane, 0, NULL, &err) == CKEY_OK);
            CHECK(ck_cuda_imagenet_normalize(dx, plane, ck_imagenet_mean, ck_imagenet_std, NULL, &err) == CKEY_OK);
            REQUIRE(ck_cuda_copy(got, dx, (size_t)4 * plane * sizeof(float), 0, &err) == CKEY_OK);
            char name[64];
            snprintf(name, sizeof name, "preprocess %s%s", type == 0 ? "8-bit" : type == 1 ? "16-bit" : "half",
                     linear ? " linear" : "");
            CHECK(ck_compare(name, got, x, (size_t)4 * plane, NULL) <= 1e-5);
            ck_cuda_free(dpx), ck_cuda_free(dplanes), ck_cuda_free(dx);
            free(px), free(rgb), free(hint), free(x), free(got), free(scratch);
        }
    }
    /* the sRGB decode against the CPU's, over [-0.1, 1.5] */
    const int64_t m = 1 << 16;
    float *v = malloc(m * sizeof(float)), *ref = malloc(m * sizeof(float));
    for (int64_t i = 0; i < m; i++) v[i] = ref[i] = -0.1f + 1.6f * (float)i / (float)m;
    ck_srgb_to_linear(ref, (size_t)m);
    float *dv = to_device(v, (size_t)m);
    ckey_error err;
    REQUIRE(dv && ck_cuda_srgb(dv, m, 1, NULL, &err) == CKEY_OK);
    REQUIRE(ck_cuda_copy(v, dv, (size_t)m * sizeof(float), 0, &err) == CKEY_OK);
    CHECK(ck_compare("srgb -> linear", v, ref, (size_t)m, NULL) <= 1e-6);
    ck_cuda_free(dv);
    free(v), free(ref);
}


/* The stored passes' conversions on the device (ck_cuda_to_half,
 * ck_cuda_to_u8_trunc) against the host's (the EXR writer's
 * ck_half_from_float, the Comp PNG's ck_trunc_u8), bit for bit: zeros,
 * float and half denormals, each rounding's ties, 65504 .. 65536, the
 * infinities, NaNs with payloads (one that truncates to 0), every k / 255
 * and its neighbours, each also negative, and a spread of float bit patterns. */
static void test_frame_stored(void) {
    if (ck_cuda_device_count() == 0) SKIP("no CUDA device on this machine");
    static const uint32_t edge[] = {
        0x00000000u, 0x00000001u, 0x007fffffu, 0x00800000u,               /* zero, float denormals */
        0x32ffffffu, 0x33000000u, 0x33000001u, 0x33800000u, 0x33c00000u, /* 2^-25 (a tie to 0), 2^-24, 1.5 2^-24 */
        0x34200000u, 0x387fc000u, 0x387fe000u, 0x387fffffu, 0x38800000u, /* 2.5 2^-24, half denormals' top, 2^-14 */
        0x3f800fffu, 0x3f801000u, 0x3f801001u, 0x3f803000u, 0x3f800000u, /* ties at 1 + 2^-11, 1 + 3 2^-11 */
        0x477fe000u, 0x477fefffu, 0x477ff000u, 0x47800000u, 0x501502f9u, /* 65504, 65519.99, 65520, 65536, 1e10 */
        0x7f7fffffu, 0x7f800000u, 0x7fc00000u, 0x7f800001u, 0x7f802000u, /* FLT_MAX, Inf, NaNs */
        0x7fffffffu, 0x7fa00000u, 0x3f7fffffu, 0x3f800001u, 0x40000000u, /* NaNs, 1 - ulp, 1 + ulp, 2 */
    };
    const size_t ne = sizeof edge / sizeof edge[0], nk = 3 * 256, nr = (size_t)1 << 20;
    const size_t n = 2 * ne + 2 * nk + nr;
    float *v = malloc(n * sizeof(float));
    uint16_t *hh = malloc(n * sizeof(uint16_t)), *dh = malloc(n * sizeof(uint16_t));
    uint8_t *hq = malloc(n), *dq = malloc(n);
    REQUIRE(v && hh && dh && hq && dq);
    size_t i = 0;
    for (size_t k = 0; k < ne; k++)
        for (uint32_t sign = 0; sign < 2; sign++) {
            const uint32_t b = edge[k] | (sign << 31);
            memcpy(&v[i++], &b, sizeof b);
        }
    for (int k = 0; k < 256; k++)
        for (int sign = 0; sign < 2; sign++) {
            const float q = (float)k / 255.0f * (sign ? -1.0f : 1.0f);
            v[i++] = q, v[i++] = nextafterf(q, -2.0f), v[i++] = nextafterf(q, 2.0f);
        }
    uint32_t x = 2024u;
    for (size_t k = 0; k < nr; k++) {
        x = x * 1664525u + 1013904223u;
        memcpy(&v[i++], &x, sizeof x);
    }
    REQUIRE(i == n);
    ck_half_from_float(v, hh, n);
    for (size_t k = 0; k < n; k++) hq[k] = (uint8_t)ck_trunc_u8(v[k]);
    float *dv = to_device(v, n);
    void *dout = NULL;
    REQUIRE(dv && ck_cuda_malloc(&dout, n * sizeof(uint16_t), NULL) == CKEY_OK);
    ckey_error err;
    CHECKF(ck_cuda_to_half(dv, dout, (int64_t)n, NULL, &err) == CKEY_OK, "%s", err.message);
    REQUIRE(ck_cuda_copy(dh, dout, n * sizeof(uint16_t), 0, &err) == CKEY_OK);
    CHECKF(ck_cuda_to_u8_trunc(dv, dout, (int64_t)n, NULL, &err) == CKEY_OK, "%s", err.message);
    REQUIRE(ck_cuda_copy(dq, dout, n, 0, &err) == CKEY_OK);
    size_t bad_h = 0, bad_q = 0;
    for (size_t k = 0; k < n; k++) {
        uint32_t b;
        memcpy(&b, &v[k], sizeof b);
        if (dh[k] != hh[k] && bad_h++ < 5)
            printf("  float 0x%08x: device HALF 0x%04x, host 0x%04x\n", (unsigned)b, dh[k], hh[k]);
        if (dq[k] != hq[k] && bad_q++ < 5)
            printf("  float 0x%08x: device 8-bit %u, host %u\n", (unsigned)b, dq[k], hq[k]);
    }
    printf("  %zu floats (%zu edge values): %zu HALF and %zu 8-bit samples differ from the host's\n", n,
           2 * ne + 2 * nk, bad_h, bad_q);
    CHECK(bad_h == 0 && bad_q == 0);
    CHECK(ck_cuda_to_half(dv, dout, 0, NULL, &err) == CKEY_OK); /* nothing to convert */
    ck_cuda_free(dv), ck_cuda_free(dout);
    free(v), free(hh), free(dh), free(hq), free(dq);
}

/* ck_cuda_components_filter against ck_components_filter_pool (8-connected),
 * mask for mask, byte for byte. The masks: those of test-post's
 * components_strips (areas 1, 20 and 400), then shapes chosen against a tiled
 * labelling at sizes on and off the tile grid (1 x 1 to 4K, 1 x N and N x 1):
 * empty and full, both checkerboards (one component with 8-connectivity),
 * one-pixel diagonal and anti-diagonal chains, diagonal random walks, pairs
 * of pixels meeting only at a corner of every 8 x 8 cell, a square spiral
 * and serpentines (one long component through many tiles), noise at the
 * 8-connected percolation density, values other than 0 and 255, and squares
 * of 1 to 1600 pixels (400 among them). Each
 * with the areas 0 .. 3, 20, 400 and the count of set pixels and one more
 * (the whole component of a one-component mask: kept, then removed). */
enum { CC_KINDS = 14 };

static void cc_shape(int kind, int h, int w, uint64_t *rng, uint8_t *m) {
    const size_t n = (size_t)h * w;
    memset(m, 0, n);
    switch (kind) {
    case 0: return; /* empty */
    case 1: memset(m, 255, n); return;
    case 6: { /* square spiral from the top-left corner inwards, walls 1 px apart */
        int y = 0, x = 0, dir = 0;
        const int dy[4] = {0, 1, 0, -1}, dx[4] = {1, 0, -1, 0};
        m[0] = 255;
        for (int seg = 0;; seg++, dir = (dir + 1) % 4) {
            const int shrink = seg < 3 ? 0 : 2 * ((seg - 1) / 2);
            const int len = (dir % 2 == 0 ? w : h) - 1 - shrink;
            if (len < 1) break;
            for (int k = 0; k < len; k++) {
                y += dy[dir], x += dx[dir];
                m[(size_t)y * w + x] = 255;
            }
        }
        return;
    }
    case 7: /* diagonal random walks */
        for (int walk = 0; walk < 8; walk++) {
            *rng = *rng * 6364136223846793005ull + 1442695040888963407ull;
            int y = (int)((*rng >> 33) % (uint64_t)h), x = (int)((*rng >> 13) % (uint64_t)w);
            for (size_t step = 0; step < n / 16 + 1; step++) {
                m[(size_t)y * w + x] = 255;
                *rng = *rng * 6364136223846793005ull + 1442695040888963407ull;
                const int sy = (*rng >> 40) & 1 ? 1 : -1, sx = (*rng >> 41) & 1 ? 1 : -1;
                if (y + sy >= 0 && y + sy < h) y += sy;
                if (x + sx >= 0 && x + sx < w) x += sx;
            }
        }
        return;
    case 8: /* corner pairs: (Y - 1, X - 1)-(Y, X) or (Y - 1, X)-(Y, X - 1) at every multiple of 8 */
        for (int Y = 8; Y < h; Y += 8)
            for (int X = 8; X < w; X += 8) {
                const int anti = (Y / 8 + X / 8) % 2;
                m[(size_t)(Y - 1) * w + X - (anti ? 0 : 1)] = 255;
                m[(size_t)Y * w + X - (anti ? 1 : 0)] = 255;
            }
        return;
    default: break;
    }
    for (int y = 0; y < h; y++)
        for (int x = 0; x < w; x++) {
            *rng = *rng * 6364136223846793005ull + 1442695040888963407ull;
            const unsigned r = (unsigned)(*rng >> 33) % 1000;
            uint8_t v = 0;
            switch (kind) {
            case 2: v = (x + y) % 2 == 0; break;
            case 3: v = (x + y) % 2 == 1; break;
            case 4: v = (x - y + 5 * h) % 5 == 0; break;       /* diagonal chains */
            case 5: v = (x + y) % 5 == 0; break;               /* anti-diagonal chains */
            case 9: v = r < 407; break;                        /* percolation density */
            case 10: v = r < 500 ? (uint8_t)(1 + r % 254) : 0; break;
            case 11: v = y % 2 == 0 || x == ((y % 4 == 1) ? w - 1 : 0); break; /* serpentine by rows */
            case 12: v = x % 2 == 0 || y == ((x % 4 == 1) ? h - 1 : 0); break; /* by columns */
            default: { /* squares of side 1 .. 40 on a 48-pixel grid, 20 x 20 = 400 among them */
                const int side = 1 + (y / 48 * 7 + x / 48 * 13) % 40;
                v = y % 48 < side && x % 48 < side;
            }
            }
            m[(size_t)y * w + x] = v;
        }
}

typedef struct cc_run {
    uint8_t *dmask;
    int32_t *dlab;
    uint32_t *darea;
    uint8_t *ref, *got;
    void *scratch;
    ck_pool *pool;
    int cases, bad;
    size_t pixels;
    double seconds;
} cc_run;

/* One mask through both; the first few differences printed. c->seconds: the
 * device's time (the filter and a sync, not the copies). */
static void cc_compare(cc_run *c, const uint8_t *m, int h, int w, int64_t area, const char *what) {
    const size_t n = (size_t)h * w;
    ckey_error err;
    memcpy(c->ref, m, n);
    REQUIRE(ck_components_filter_pool(c->ref, h, w, 8, area, c->scratch, c->pool) >= 0);
    REQUIRE(ck_cuda_copy(c->dmask, m, n, 1, &err) == CKEY_OK);
    REQUIRE(ck_cuda_sync(&err) == CKEY_OK);
    const double t0 = ck_now();
    CHECKF(ck_cuda_components_filter(c->dmask, h, w, area, c->dlab, c->darea, NULL, &err) == CKEY_OK, "%s",
           err.message);
    REQUIRE(ck_cuda_sync(&err) == CKEY_OK);
    c->seconds = ck_now() - t0;
    REQUIRE(ck_cuda_copy(c->got, c->dmask, n, 0, &err) == CKEY_OK);
    size_t diff = 0, first = 0;
    for (size_t i = 0; i < n; i++)
        if (c->got[i] != c->ref[i] && !diff++) first = i;
    c->cases++;
    c->pixels += n;
    if (diff && c->bad++ < 8)
        printf("  %s %dx%d area %lld: %zu pixels differ, first (y %zu, x %zu): device %u, host %u\n", what, h, w,
               (long long)area, diff, first / (size_t)w, first % (size_t)w, c->got[first], c->ref[first]);
}

static void test_frame_components(void) {
    if (ck_cuda_device_count() == 0) SKIP("no CUDA device on this machine");
    const size_t cap = (size_t)2160 * 3840;
    cc_run c = {0};
    uint8_t *m = malloc(cap);
    c.ref = malloc(cap), c.got = malloc(cap), c.scratch = malloc(ck_components_scratch_bytes(2160, 3840));
    REQUIRE(m && c.ref && c.got && c.scratch && ck_pool_create(8, &c.pool, NULL) == CKEY_OK);
    REQUIRE(ck_cuda_malloc((void **)&c.dmask, cap, NULL) == CKEY_OK &&
            ck_cuda_malloc((void **)&c.dlab, cap * sizeof(int32_t), NULL) == CKEY_OK &&
            ck_cuda_malloc((void **)&c.darea, cap * sizeof(uint32_t), NULL) == CKEY_OK);

    /* test-post's components_strips masks, its generator and order */
    static const int32_t strips[][2] = {{128, 5}, {200, 97}, {1031, 61}, {4160, 33}, {64, 300}, {129, 1}};
    uint64_t rng = 0x9e3779b97f4a7c15ull;
    for (size_t si = 0; si < CK_ARRAY_LEN(strips); si++) {
        const int h = strips[si][0], w = strips[si][1];
        for (int kind = 0; kind < 7; kind++) {
            ck_cc_test_mask(m, h, w, kind, &rng);
            for (int64_t area = 1; area <= 400; area *= 20) cc_compare(&c, m, h, w, area, "strips");
        }
    }
    const int strip_cases = c.cases;

    static const int sizes[][2] = {{1, 1},     {1, 5000},  {5000, 1},  {16, 32},    {17, 33},
                                   {15, 31},   {2, 2},     {64, 64},   {100, 333},  {517, 389},
                                   {1080, 1920}, {2160, 3840}};
    for (size_t si = 0; si < CK_ARRAY_LEN(sizes); si++) {
        const int h = sizes[si][0], w = sizes[si][1];
        const size_t n = (size_t)h * w;
        for (int kind = 0; kind < CC_KINDS; kind++) {
            cc_shape(kind, h, w, &rng, m);
            int64_t set = 0;
            for (size_t i = 0; i < n; i++) set += m[i] != 0;
            const int64_t areas[] = {0, 1, 2, 3, 20, 400, set, set + 1};
            char what[32];
            snprintf(what, sizeof what, "shape %d", kind);
            double worst = 0.0;
            for (size_t ai = 0; ai < CK_ARRAY_LEN(areas); ai++) {
                cc_compare(&c, m, h, w, areas[ai], what);
                worst = c.seconds > worst ? c.seconds : worst;
            }
            if (n >= 1000000) printf("  %dx%d shape %2d: %.2f ms at most on the device\n", w, h, kind, worst * 1e3);
        }
    }
    printf("  %d masks (%d of test-post's components_strips), %.1f Mpixels: %d differ from "
           "ck_components_filter_pool\n",
           c.cases, strip_cases, (double)c.pixels / 1e6, c.bad);
    CHECK(c.bad == 0);

    /* the result of a one-component mask is known outright: the spiral kept whole at its own area */
    cc_shape(6, 517, 389, &rng, m);
    int64_t set = 0;
    for (size_t i = 0; i < (size_t)517 * 389; i++) set += m[i] != 0;
    cc_compare(&c, m, 517, 389, set, "spiral");
    CHECK(!memcmp(c.got, m, (size_t)517 * 389));
    ckey_error err;
    CHECK(ck_cuda_components_filter(c.dmask, 0, 5, 1, c.dlab, c.darea, NULL, &err) == CKEY_ERR_INVALID_ARG);
    ck_cuda_free(c.dmask), ck_cuda_free(c.dlab), ck_cuda_free(c.darea);
    ck_pool_free(c.pool);
    free(m), free(c.ref), free(c.got), free(c.scratch);
}

/* ck_post_frame_cuda against ck_post_frame: blobs of many sizes (so the
 * components filter removes some), despeckle on and off, despill strength 1
 * and 0.5; the Processed alpha is exact, the colours within float rounding.
 * At 3840 x 2160 it also times both. */
static void test_frame_post(void) {
    if (ck_cuda_device_count() == 0) SKIP("no CUDA device on this machine");
    static const struct { int h, w; } sz[] = {{540, 960}, {1, 300}, {77, 1}, {2160, 3840}};
    for (size_t k = 0; k < CK_ARRAY_LEN(sz); k++) {
        const int h = sz[k].h, w = sz[k].w;
        const size_t n = (size_t)h * w;
        float *alpha = malloc(n * sizeof(float)), *fg = random_floats(3 * n, 300u + (unsigned)k);
        for (size_t i = 0; i < 3 * n; i++) fg[i] = 0.5f + 0.5f * fg[i];
        unsigned seed = 11u + (unsigned)k;
        for (int y = 0; y < h; y++)
            for (int x = 0; x < w; x++) {
                /* blobs on a grid: squares of side 3..40, some below the 400-pixel area */
                const int cy = y / 48, cx = x / 48, side = 3 + (cy * 7 + cx * 13) % 38;
                const int in = (y % 48) < side && (x % 48) < side;
                seed = seed * 1664525u + 1013904223u;
                alpha[(size_t)y * w + x] = in ? 0.6f + 0.4f * (float)(seed >> 8) / 16777216.0f
                                              : 0.4f * (float)(seed >> 8) / 16777216.0f;
            }
        float *dalpha = to_device(alpha, n), *dfg = to_device(fg, 3 * n), *dproc = dev_alloc(4 * n),
              *dcomp = dev_alloc(3 * n);
        void *dscr = NULL;
        REQUIRE(dalpha && dfg && dproc && dcomp &&
                ck_cuda_malloc(&dscr, ck_post_frame_cuda_device_bytes(h, w), NULL) == CKEY_OK);
        float *proc = malloc(4 * n * sizeof(float)), *comp = malloc(3 * n * sizeof(float));
        float *gproc = malloc(4 * n * sizeof(float)), *gcomp = malloc(3 * n * sizeof(float));
        void *cscr = malloc(ck_clean_matte_scratch_bytes(h, w));
        /* variant 3: 8-bit, 16-bit and half samples, read packed on the device path */
    for (int variant = 0; variant < 4; variant++) {
            ck_post_options o;
            ck_post_options_default(&o);
            o.despeckle = variant != 1;
            o.despill_strength = variant == 2 ? 0.5 : 1.0;
            double t0 = ck_now();
            REQUIRE(ck_post_frame(alpha, fg, h, w, &o, NULL, NULL, proc, comp, cscr) == CKEY_OK);
            const double cpu_s = ck_now() - t0;
            ckey_error err;
            t0 = ck_now();
            CHECKF(ck_post_frame_cuda(dalpha, dfg, h, w, &o, dproc, dcomp, dscr, NULL, &err) == CKEY_OK, "%s",
                   err.message);
            REQUIRE(ck_cuda_sync(&err) == CKEY_OK);
            const double gpu_s = ck_now() - t0;
            REQUIRE(ck_cuda_copy(gproc, dproc, 4 * n * sizeof(float), 0, &err) == CKEY_OK);
            REQUIRE(ck_cuda_copy(gcomp, dcomp, 3 * n * sizeof(float), 0, &err) == CKEY_OK);
            char name[96];
            snprintf(name, sizeof name, "post %dx%d %s processed alpha", w, h,
                     variant == 0 ? "despeckle" : variant == 1 ? "plain" : "despill 0.5");
            CHECK(ck_compare(name, gproc + 3 * n, proc + 3 * n, n, NULL) == 0.0);
            snprintf(name, sizeof name, "post %dx%d processed rgb", w, h);
            CHECK(ck_compare(name, gproc, proc, 3 * n, NULL) <= 2e-6);
            snprintf(name, sizeof name, "post %dx%d comp", w, h);
            CHECK(ck_compare(name, gcomp, comp, 3 * n, NULL) <= 2e-6);
            if (n >= 1000000) printf("  %dx%d: ck_post_frame %.1f ms on one core, on the GPU %.1f ms\n", w, h,
                                     cpu_s * 1e3, gpu_s * 1e3);
        }
        ck_cuda_free(dalpha), ck_cuda_free(dfg), ck_cuda_free(dproc), ck_cuda_free(dcomp), ck_cuda_free(dscr);
        free(alpha), free(fg), free(proc), free(comp), free(gproc), free(gcomp), free(cscr);
    }
}

/* ---- the device frame path of the shot runner ----
 * A synthetic clip keyed through ckey_shot_run on one CUDA session twice:
 * the host path (resizes and post on the CPU) and the device path
 * (pixel/devframe.c). Frames of two sizes (a plate larger and one smaller
 * than S), a linear plate (encoded to sRGB on the device), an auto hint and
 * a hint of another size (both made on the CPU, uploaded). Compared: alpha
 * and fg (the whole chain: resize, network, resize back) within the GPU
 * network's bar; the device's Processed and Comp against ck_post_passes run
 * on the CPU over the device's own alpha and fg (the post bars); and against
 * the host path's. */
enum { FP_FRAMES = 6 };

typedef struct {
    ckey_shot_frame frames[FP_FRAMES];
    char stems[FP_FRAMES][16];
    int packed; /* samples of 8 bits (even frames), 16 (1, 3) or half (5), read packed where fp_read_packed can */
    int small_first; /* the sizes swapped: frame 0 is the smallest, so later frames outgrow the slots
                        the device path reserved for it */
} fp_source;

static ckey_status fp_read_float(void *self, int64_t k, ckey_image *plate, ckey_image *hint, ckey_error *err);

static void fp_size(const fp_source *ms, int64_t k, int *w, int *h) {
    const int small = (k % 2 != 0) != (ms->small_first != 0);
    *w = small ? 96 : 320;
    *h = small ? 64 : 180;
}

static int fp_image(ckey_image *im, int w, int h, int c) {
    if (!im->data || im->capacity < (size_t)w * h * c) {
        ckey_image_free(im);
        im->data = malloc((size_t)w * h * c * sizeof(float));
        im->capacity = im->data ? (size_t)w * h * c : 0;
    }
    im->width = w, im->height = h, im->channels = c, im->bit_depth = 16;
    return im->data != NULL;
}

/* Frame k's sample type, the sample nearest v and the float a decoder makes of it. */
static ckey_sample_type fp_type(int64_t k) { return k == 5 ? CKEY_SAMPLE_F16 : k % 2 ? CKEY_SAMPLE_U16 : CKEY_SAMPLE_U8; }
static unsigned fp_sample(float v, ckey_sample_type t) {
    if (t == CKEY_SAMPLE_F16) return ck_f32_to_f16(v);
    const unsigned max = t == CKEY_SAMPLE_U16 ? 65535u : 255u;
    v = v < 0.0f ? 0.0f : v > 1.0f ? 1.0f : v;
    return (unsigned)(v * (float)max + 0.5f);
}
static float fp_value(unsigned s, ckey_sample_type t) {
    return t == CKEY_SAMPLE_F16 ? ck_f16_to_f32((uint16_t)s) : (float)s / (t == CKEY_SAMPLE_U16 ? 65535.0f : 255.0f);
}

static ckey_status fp_read(void *self, int64_t k, ckey_image *plate, ckey_image *hint, ckey_error *err) {
    ckey_status st = fp_read_float(self, k, plate, hint, err);
    const fp_source *ms = self;
    if (st != CKEY_OK || !ms->packed) return st;
    /* the floats a decoder makes of the samples fp_read_packed packs */
    const ckey_sample_type t = fp_type(k);
    for (size_t i = 0; i < 3 * (size_t)plate->width * plate->height; i++)
        plate->data[i] = fp_value(fp_sample(plate->data[i], t), t);
    for (size_t i = 0; hint->data && i < (size_t)hint->width * hint->height; i++)
        hint->data[i] = fp_value(fp_sample(hint->data[i], t), t);
    return CKEY_OK;
}

/* Frames 0, 3, 4 and 5 packed (3: RGBA plate, the hint the alpha of an RGBA
 * image; 4: a hint of half the size); 1 (linear) and 2 (auto hint) not. */
static int fp_pack(ckey_packed_image *pk, const float *planes, int w, int h, int C, int from, int nch, int at,
                   ckey_sample_type t) {
    const size_t es = t == CKEY_SAMPLE_U8 ? 1 : 2, n = (size_t)w * h, bytes = n * (size_t)C * es;
    const unsigned one = fp_sample(1.0f, t);
    if (bytes > pk->capacity) {
        if (pk->data) pk->release(pk->alloc_user, pk->data);
        pk->data = pk->alloc(pk->alloc_user, bytes);
        pk->capacity = pk->data ? bytes : 0;
        if (!pk->data) return 0;
    }
    for (size_t p = 0; p < n; p++)
        for (int c = 0; c < C; c++) {
            const int src = c - at + from;
            const unsigned v = c >= at && c < at + nch ? fp_sample(planes[(size_t)src * n + p], t) : one;
            if (es == 2) ((uint16_t *)pk->data)[p * C + c] = (uint16_t)v;
            else ((uint8_t *)pk->data)[p * C + c] = (uint8_t)v;
        }
    pk->width = w, pk->height = h, pk->channels = C;
    pk->type = t;
    return 1;
}

static ckey_status fp_read_packed(void *self, int64_t k, ckey_packed_image *plate, ckey_packed_image *hint,
                                  ckey_error *err) {
    const fp_source *ms = self;
    if (!ms->packed || k == 1 || k == 2) return CKEY_ERR_UNSUPPORTED;
    ckey_image p = {0}, hi = {0};
    ckey_status st = fp_read_float(self, k, &p, &hi, err);
    const ckey_sample_type t = fp_type(k);
    if (st == CKEY_OK && (!fp_pack(plate, p.data, p.width, p.height, k == 3 ? 4 : 3, 0, 3, 0, t) ||
                          !fp_pack(hint, hi.data, hi.width, hi.height, k == 3 ? 4 : 1, 0, 1, k == 3 ? 3 : 0, t)))
        st = CKEY_ERR_NOMEM;
    plate->hint_channel = -1;
    hint->hint_channel = k == 3 ? 3 : 0;
    ckey_image_free(&p);
    ckey_image_free(&hi);
    return st;
}

static ckey_status fp_read_float(void *self, int64_t k, ckey_image *plate, ckey_image *hint, ckey_error *err) {
    (void)self, (void)err;
    int w, h;
    fp_size(self, k, &w, &h);
    float *full = malloc((size_t)w * h * sizeof(float));
    if (!full || !fp_image(plate, w, h, 3)) {
        free(full);
        return CKEY_ERR_NOMEM;
    }
    ck_synth_frame((int)k, w, h, plate->data, full);
    if (k == 1) /* a linear plate (plate_linear): the runner encodes it back */
        ck_srgb_to_linear(plate->data, 3 * (size_t)w * h);
    if (k == 2) { /* no hint: the runner makes one (auto hint) */
        ckey_image_free(hint);
    } else if (k == 4) { /* a hint of half the size: resized to the plate */
        const int hw = w / 2, hh = h / 2;
        if (!fp_image(hint, hw, hh, 1)) return free(full), CKEY_ERR_NOMEM;
        for (int y = 0; y < hh; y++)
            for (int x = 0; x < hw; x++) hint->data[(size_t)y * hw + x] = full[(size_t)(2 * y) * w + 2 * x];
    } else {
        if (!fp_image(hint, w, h, 1)) return free(full), CKEY_ERR_NOMEM;
        memcpy(hint->data, full, (size_t)w * h * sizeof(float));
    }
    free(full);
    return CKEY_OK;
}

static void fp_close(void *self) { (void)self; }

/* The sizes up front: the device path page-locks its out slots for frame 0's */
static ckey_status fp_probe(void *self, int64_t k, int32_t *w, int32_t *h, ckey_error *err) {
    (void)err;
    int iw, ih;
    fp_size(self, k, &iw, &ih);
    *w = iw, *h = ih;
    return CKEY_OK;
}

/* Every pass of every frame, copied as the sink receives them. */
typedef struct {
    float *pass[FP_FRAMES][4];
    int w[FP_FRAMES], h[FP_FRAMES];
    int bad;
} fp_sink;

static ckey_status fp_write(void *self, const ckey_shot_frame *f, const ckey_shot_passes *p, ckey_error *err) {
    (void)err;
    fp_sink *k = self;
    const int64_t i = f->number;
    if (i < 0 || i >= FP_FRAMES || k->pass[i][0]) return k->bad++, CKEY_OK;
    const size_t n = (size_t)p->width * p->height;
    const float *src[4] = {p->alpha, p->fg, p->processed, p->comp};
    const size_t ch[4] = {1, 3, 4, 3};
    for (int q = 0; q < 4; q++) {
        k->pass[i][q] = malloc(ch[q] * n * sizeof(float));
        if (!k->pass[i][q] || !src[q]) return CKEY_ERR_NOMEM;
        memcpy(k->pass[i][q], src[q], ch[q] * n * sizeof(float));
    }
    k->w[i] = p->width, k->h[i] = p->height;
    return CKEY_OK;
}

static void fp_sink_clear(fp_sink *k) {
    for (int i = 0; i < FP_FRAMES; i++)
        for (int q = 0; q < 4; q++) free(k->pass[i][q]);
    memset(k, 0, sizeof *k);
}

/* The frames fp_read_packed takes (packed sources: all but 1 and 2). */
static int32_t fp_packed_frame(void *self, int64_t k) {
    const fp_source *ms = self;
    return ms->packed && k != 1 && k != 2;
}

/* packed: bit 0 the packed reads, bit 1 the sizes swapped (fp_source.small_first);
 * plan: ckey_shot_run's (NULL: every frame keyed); the passes to `sink` */
static ckey_status fp_run_sink(ckey_session *s, ckey_frame_path path, int read_ahead, int packed, const uint8_t *plan,
                               const ckey_post_options *post, ckey_sink *sink, ckey_shot_stats *st, ckey_error *err) {
    static fp_source ms;
    ms.packed = packed & 1;
    ms.small_first = (packed & 2) != 0;
    for (int i = 0; i < FP_FRAMES; i++) {
        snprintf(ms.stems[i], sizeof ms.stems[i], "f_%04d", i);
        ms.frames[i] = (ckey_shot_frame){i, ms.stems[i], ms.stems[i], i == 2 ? "auto" : "memory", i == 1};
    }
    ckey_source src = {.self = &ms, .count = FP_FRAMES, .frames = ms.frames, .read = fp_read, .close = fp_close,
                       .concurrent_read = 1, .read_packed = fp_read_packed, .probe = fp_probe,
                       .packed_frame = fp_packed_frame};
    ckey_shot_options so;
    ckey_shot_options_default(&so);
    so.post = *post;
    so.frame_path = path;
    so.read_ahead = read_ahead;
    so.readers = 2;
    so.writers = 2;
    return ckey_shot_run(s, &src, sink, plan, &so, NULL, NULL, st, err);
}

/* The passes as floats into `out`. */
static ckey_status fp_run_plan(ckey_session *s, ckey_frame_path path, int read_ahead, int packed, const uint8_t *plan,
                               const ckey_post_options *post, fp_sink *out, ckey_shot_stats *st, ckey_error *err) {
    ckey_sink sink = {.self = out, .write = fp_write};
    return fp_run_sink(s, path, read_ahead, packed, plan, post, &sink, st, err);
}

/* A pass sink behind a sink that counts the form each frame's passes came in
 * and takes the stored samples or not (its own stored_passes). */
typedef struct {
    ckey_sink inner;
    int stored, floats, mixed;
} fp_fwd;

static ckey_status fp_fwd_begin(void *self, ckey_error *err) {
    fp_fwd *f = self;
    return f->inner.begin(f->inner.self, err);
}

static ckey_status fp_fwd_write(void *self, const ckey_shot_frame *fr, const ckey_shot_passes *p, ckey_error *err) {
    fp_fwd *f = self;
    const int h = p->alpha_half && p->fg_half && p->processed_half && p->comp_u8;
    const int fl = p->alpha && p->fg && p->processed && p->comp;
    /* counted under no lock: the pass sink is concurrent, so this one is not */
    f->stored += h && !fl, f->floats += fl && !h, f->mixed += h == fl;
    return f->inner.write(f->inner.self, fr, p, err);
}

static ckey_status fp_run(ckey_session *s, ckey_frame_path path, int read_ahead, int packed,
                          const ckey_post_options *post, fp_sink *out, ckey_shot_stats *st, ckey_error *err) {
    return fp_run_plan(s, path, read_ahead, packed, NULL, post, out, st, err);
}

/* The stages' busy times of a shot on the GPU (ckey_shot_load): the
 * transfers timed on both frame paths, the plate-size steps on the threads
 * of their path, the bound one of the stages that ran. */
static void fp_check_load(const char *what, int device, const ckey_shot_stats *st) {
    const ckey_shot_load *l = &st->load;
    const double *sec = l->stage_seconds;
    printf("  %s:", what);
    for (int k = 0; k < CKEY_SHOT_STAGES; k++) printf(" %s %.4f", ckey_shot_stage_name(k), sec[k]);
    printf("; bound by %s (%s %.0f%%)\n", ckey_shot_stage_name(l->bound), ckey_shot_group_name(l->bound_group),
           l->bound_group >= 0 ? 100 * l->use[l->bound_group] : 0.0);
    /* every stage ran: the test sink has no file I/O, so "write" alone is 0 */
    for (int k = 0; k < CKEY_SHOT_STAGES; k++)
        if (k != CKEY_STAGE_WRITE)
            CHECKF(sec[k] > 0, "%s: stage %s took %g s (the stats miss it)", what, ckey_shot_stage_name(k), sec[k]);
    CHECKF(sec[CKEY_STAGE_WRITE] == 0, "%s: write %g s from a sink that reports no I/O", what, sec[CKEY_STAGE_WRITE]);
    CHECKF(fabs(sec[CKEY_STAGE_ENCODE] - st->sink_seconds) <= 1e-9 + 1e-9 * st->sink_seconds,
           "%s: encode %g, sink %g", what, sec[CKEY_STAGE_ENCODE], st->sink_seconds);
    /* model_seconds: the host path's forward call (upload, network, download
     * within it), the device path's network alone */
    const double model = device ? sec[CKEY_STAGE_NETWORK]
                                : sec[CKEY_STAGE_UPLOAD] + sec[CKEY_STAGE_NETWORK] + sec[CKEY_STAGE_DOWNLOAD];
    CHECKF(fabs(model - st->model_seconds) <= 1e-9 + 1e-9 * st->model_seconds,
           "%s: upload %g, network %g, download %g against model_seconds %g", what, sec[CKEY_STAGE_UPLOAD],
           sec[CKEY_STAGE_NETWORK], sec[CKEY_STAGE_DOWNLOAD], st->model_seconds);
    for (int g = 0; g < CKEY_SHOT_GROUPS; g++)
        CHECKF(l->use[g] >= 0 && l->use[g] <= 1 + 1e-6, "%s: %s use %g", what, ckey_shot_group_name(g), l->use[g]);
    CHECKF(l->bound >= 0 && l->bound_group >= 0, "%s: no bound (%d, %d)", what, (int)l->bound, (int)l->bound_group);
}

/* The frame path tests' session: the tiny model on the GPU at S = 128, fp32
 * (NULL when it cannot be made; *m the model, for ckey_model_free). */
static ckey_session *fp_session(ckey_model **m) {
    *m = tiny_model();
    if (!*m) return NULL;
    ckey_session_options o;
    ckey_session_options_default(&o);
    o.size = 128;
    o.device = CKEY_DEVICE_CUDA;
    o.precision = CKEY_PRECISION_FP32;
    ckey_session *s = NULL;
    ckey_error err;
    if (ckey_session_create(*m, &o, &s, &err) != CKEY_OK) {
        printf("  session: %s\n", err.message);
        return NULL;
    }
    return s;
}

/* ck_synth_frame as a video: the plate (alpha NULL) or, with alpha, a hint
 * video whose alpha is the hint (its picture the plate). */
static void fp_video_frame(void *user, int k, float *rgb, float *alpha) {
    const int *wh = user;
    float *hint = malloc((size_t)wh[0] * wh[1] * sizeof(float));
    if (!hint) return;
    ck_synth_frame(k, wh[0], wh[1], rgb, hint);
    if (alpha) memcpy(alpha, hint, (size_t)wh[0] * wh[1] * sizeof(float));
    free(hint);
}

/* A source over another that reads its frames as floats and rounds them to
 * 16 bits, as the video source's packed read does: the host path then keys
 * the very samples the device path uploads. */
static ckey_status vq_read(void *self, int64_t k, ckey_image *plate, ckey_image *hint, ckey_error *err) {
    const ckey_source *in = self;
    const ckey_status st = in->read(in->self, k, plate, hint, err);
    if (st != CKEY_OK) return st;
    for (size_t i = 0; i < 3 * (size_t)plate->width * plate->height; i++)
        plate->data[i] = (float)(uint16_t)(plate->data[i] * 65535.0f + 0.5f) / 65535.0f;
    for (size_t i = 0; hint->data && i < (size_t)hint->width * hint->height; i++)
        hint->data[i] = (float)(uint16_t)(hint->data[i] * 65535.0f + 0.5f) / 65535.0f;
    return CKEY_OK;
}

static ckey_status vq_probe(void *self, int64_t k, int32_t *w, int32_t *h, ckey_error *err) {
    const ckey_source *in = self;
    return in->probe(in->self, k, w, h, err);
}

/* A video plate (H.264 4:2:0) and a hint video (ProRes 4444, the hint in its
 * alpha): AUTO takes the device frame path (the frames read as 16-bit samples,
 * ck_video_read_packed), and its passes agree with the host path's on the
 * same samples (vq_read) within the bars of frame_path_shot_vs_host. */
static void test_frame_path_video(void) {
    if (ck_cuda_device_count() == 0) SKIP("no CUDA device on this machine");
#ifndef CK_HAVE_FFMPEG
    SKIP("built without FFmpeg");
#endif
    ckey_error err;
    char dir[256], plate[320], hint[320];
    REQUIRE(ck_make_temp_dir(dir, sizeof dir, "fpvideo"));
    snprintf(plate, sizeof plate, "%s/plate.mp4", dir);
    snprintf(hint, sizeof hint, "%s/hint.mov", dir);
    int wh[2] = {160, 96};
    REQUIRE(ck_write_video(plate, CKEY_VIDEO_H264, wh[0], wh[1], FP_FRAMES, 0, fp_video_frame, wh) == CKEY_OK);
    REQUIRE(ck_write_video(hint, CKEY_VIDEO_PRORES_4444, wh[0], wh[1], FP_FRAMES, 1, fp_video_frame, wh) == CKEY_OK);
    ckey_model *m = NULL;
    ckey_session *s = fp_session(&m);
    REQUIRE(s);
    static fp_sink out[2];
    ckey_shot_stats st[2];
    for (int k = 0; k < 2; k++) {
        ckey_source src, q;
        REQUIRE(ckey_source_open_video(plate, hint, 0, NULL, NULL, &src, &err) == CKEY_OK);
        CHECK(src.read_packed && src.packed_frame && src.packed_frame(src.self, 0));
        q = src;
        q.self = &src, q.read = vq_read, q.probe = vq_probe, q.close = NULL;
        q.read_packed = NULL, q.packed_frame = NULL;
        ckey_shot_options so;
        ckey_shot_options_default(&so);
        so.post.despeckle = 0; /* no threshold flips between the paths */
        so.frame_path = k ? CKEY_FRAME_PATH_AUTO : CKEY_FRAME_PATH_CPU;
        so.read_ahead = 2;
        so.readers = 2;
        so.writers = 2;
        ckey_sink sink = {.self = &out[k], .write = fp_write};
        CHECKF(ckey_shot_run(s, k ? &src : &q, &sink, NULL, &so, NULL, NULL, &st[k], &err) == CKEY_OK, "%s",
               err.message);
        ckey_source_close(&src);
    }
    CHECKF(st[1].frame_path == CKEY_FRAME_PATH_DEVICE, "auto ran %s", ckey_frame_path_name(st[1].frame_path));
    double worst[4] = {0};
    for (int i = 0; i < FP_FRAMES; i++) {
        if (!out[0].pass[i][0] || !out[1].pass[i][0]) {
            CHECKF(0, "frame %d not written", i);
            continue;
        }
        const size_t n = (size_t)wh[0] * wh[1];
        static const size_t ch[4] = {1, 3, 4, 3};
        for (int q = 0; q < 4; q++) {
            char name[64];
            snprintf(name, sizeof name, "video frame %d pass %d", i, q);
            const double e = ck_compare(name, out[1].pass[i][q], out[0].pass[i][q], ch[q] * n, NULL);
            worst[q] = e > worst[q] ? e : worst[q];
        }
    }
    printf("  video plate + hint: device path vs host path on its samples: alpha %.3g, fg %.3g, processed %.3g, "
           "comp %.3g\n",
           worst[0], worst[1], worst[2], worst[3]);
    CHECK(worst[0] <= 1e-4 && worst[1] <= 1e-4 && worst[2] <= 1e-4 && worst[3] <= 1e-4);
    fp_sink_clear(&out[0]);
    fp_sink_clear(&out[1]);
    ckey_session_free(s);
    ckey_model_free(m);
    ck_remove_tree(dir);
}

static void test_frame_path_shot(void) {
    if (ck_cuda_device_count() == 0) SKIP("no CUDA device on this machine");
    ckey_model *m = NULL;
    ckey_session *s = fp_session(&m);
    REQUIRE(s);
    ckey_error err;
    /* 3: the packed sources of fp_run; 4: the same with frame 0 the smallest, so that the
     * frames after it outgrow the in slots reserved for it (pageable growth) and the out slots */
    for (int variant = 0; variant < 5; variant++) {
        ckey_post_options post;
        ckey_post_options_default(&post);
        post.despill_strength = variant == 2 ? 0.5f : 1.0f;
        post.despeckle = variant != 1;
        post.despeckle_area = 40; /* the tiny plates' blobs: some go, some stay */
        const int read_ahead = variant == 1 ? 0 : 2; /* variant 1: every stage on the calling thread */
        static fp_sink host, dev;
        ckey_shot_stats sth, std;
        const int packed = variant == 3 ? 1 : variant == 4 ? 3 : 0;
        CHECKF(fp_run(s, CKEY_FRAME_PATH_CPU, read_ahead, packed, &post, &host, &sth, &err) == CKEY_OK, "%s",
               err.message);
        CHECKF(fp_run(s, CKEY_FRAME_PATH_DEVICE, read_ahead, packed, &post, &dev, &std, &err) == CKEY_OK, "%s",
               err.message);
        char what[64];
        snprintf(what, sizeof what, "variant %d, host frame path", variant);
        fp_check_load(what, 0, &sth);
        snprintf(what, sizeof what, "variant %d, device frame path", variant);
        fp_check_load(what, 1, &std);
        CHECK(!host.bad && !dev.bad);
        for (int i = 0; i < FP_FRAMES; i++) {
            if (!host.pass[i][0] || !dev.pass[i][0]) {
                CHECKF(0, "frame %d not written", i);
                continue;
            }
            const int w = dev.w[i], h = dev.h[i];
            const size_t n = (size_t)w * h;
            CHECK(host.w[i] == w && host.h[i] == h);
            char name[96];
            snprintf(name, sizeof name, "variant %d frame %d (%dx%d) alpha", variant, i, w, h);
            const double ea = ck_compare(name, dev.pass[i][0], host.pass[i][0], n, NULL);
            snprintf(name, sizeof name, "variant %d frame %d fg", variant, i);
            const double ef = ck_compare(name, dev.pass[i][1], host.pass[i][1], 3 * n, NULL);
            CHECKF(ea <= 1e-4 && ef <= 1e-4, "alpha %.3g, fg %.3g over 1e-4", ea, ef);
            /* the device's post against the CPU's over the same alpha and fg */
            float *proc = malloc(4 * n * sizeof(float)), *comp = malloc(3 * n * sizeof(float));
            void *scr = malloc(ckey_post_scratch_bytes(w, h, &post) + 1);
            REQUIRE(proc && comp && scr);
            REQUIRE(ckey_post_passes(dev.pass[i][0], dev.pass[i][1], w, h, &post, proc, comp, scr, &err) == CKEY_OK);
            snprintf(name, sizeof name, "variant %d frame %d post: processed alpha", variant, i);
            const double pa = ck_compare(name, dev.pass[i][2] + 3 * n, proc + 3 * n, n, NULL);
            snprintf(name, sizeof name, "variant %d frame %d post: processed rgb", variant, i);
            const double pr = ck_compare(name, dev.pass[i][2], proc, 3 * n, NULL);
            snprintf(name, sizeof name, "variant %d frame %d post: comp", variant, i);
            const double pc = ck_compare(name, dev.pass[i][3], comp, 3 * n, NULL);
            CHECKF(pa <= 1e-6 && pr <= 1e-5 && pc <= 1e-5, "post: alpha %g rgb %g comp %g", pa, pr, pc);
            /* and the whole chain against the host path's passes: the same bar as alpha and fg
             * where both alphas give despeckle the same mask (a pixel within float rounding of
             * the 0.5 threshold may fall on either side; the check above covers the post) */
            int flips = 0;
            for (size_t p = 0; post.despeckle && p < n; p++)
                flips += (dev.pass[i][0][p] > CK_DESPECKLE_THRESHOLD) != (host.pass[i][0][p] > CK_DESPECKLE_THRESHOLD);
            snprintf(name, sizeof name, "variant %d frame %d vs host: processed", variant, i);
            const double hp = ck_compare(name, dev.pass[i][2], host.pass[i][2], 4 * n, NULL);
            snprintf(name, sizeof name, "variant %d frame %d vs host: comp", variant, i);
            const double hc = ck_compare(name, dev.pass[i][3], host.pass[i][3], 3 * n, NULL);
            if (flips) printf("  %d pixel(s) on the other side of the despeckle threshold: not compared\n", flips);
            else CHECKF(hp <= 1e-4 && hc <= 1e-4, "vs host: processed %.3g, comp %.3g over 1e-4", hp, hc);
            free(proc), free(comp), free(scr);
        }
        fp_sink_clear(&host);
        fp_sink_clear(&dev);
    }
    /* AUTO: the device path when every frame to key is read packed (the packed source reads
     * frames 1 and 2 as floats, so the plan skips them), the same passes bit for bit as asking
     * for it; the host path when some frames to key come as floats */
    ckey_post_options post;
    ckey_post_options_default(&post);
    uint8_t plan[FP_FRAMES];
    for (int i = 0; i < FP_FRAMES; i++) plan[i] = i == 1 || i == 2 ? CKEY_SHOT_SKIP : CKEY_SHOT_KEY;
    {
        static fp_sink a, d;
        ckey_shot_stats sa, sd;
        CHECKF(fp_run_plan(s, CKEY_FRAME_PATH_DEVICE, 2, 1, plan, &post, &d, &sd, &err) == CKEY_OK, "%s",
               err.message);
        CHECKF(fp_run_plan(s, CKEY_FRAME_PATH_AUTO, 2, 1, plan, &post, &a, &sa, &err) == CKEY_OK, "%s", err.message);
        CHECKF(sa.frame_path == CKEY_FRAME_PATH_DEVICE && sd.frame_path == CKEY_FRAME_PATH_DEVICE, "auto ran %s",
               ckey_frame_path_name(sa.frame_path));
        static const size_t ch[4] = {1, 3, 4, 3};
        int same = 0;
        for (int i = 0; i < FP_FRAMES; i++)
            for (int q = 0; q < 4; q++)
                same += a.pass[i][q] && d.pass[i][q] && a.w[i] == d.w[i] && a.h[i] == d.h[i] &&
                        !memcmp(a.pass[i][q], d.pass[i][q], ch[q] * (size_t)a.w[i] * a.h[i] * sizeof(float));
        CHECKF(same == 4 * (FP_FRAMES - 2) && !a.pass[1][0] && !a.pass[2][0],
               "auto vs device: %d of %d passes bit for bit", same, 4 * (FP_FRAMES - 2));
        fp_sink_clear(&a);
        fp_sink_clear(&d);
        /* frames 1 and 2 come as floats: the host path */
        CHECKF(fp_run(s, CKEY_FRAME_PATH_AUTO, 2, 0, &post, &a, &sa, &err) == CKEY_OK, "%s", err.message);
        CHECKF(sa.frame_path == CKEY_FRAME_PATH_CPU, "auto ran %s", ckey_frame_path_name(sa.frame_path));
        printf("  auto: packed frames on the device path (%d passes as asking for it), float frames on the host "
               "path\n", same);
        fp_sink_clear(&a);
    }
    /* the pass files: for a sink with stored_passes (the pass sink) the device path converts
     * the passes to HALF and 8 bits on the GPU and downloads those alone; the same files, byte
     * for byte, as when it downloads the floats and the writers convert them (a sink without
     * stored_passes in front of the pass sink). Packed plates with PXR24, float ones with ZIP. */
    if (CK_BUILT_EXR && CK_BUILT_PNG) {
        char dir[512];
        REQUIRE(ck_make_temp_dir(dir, sizeof dir, "stored"));
        post.despeckle = 1;
        post.despeckle_area = 40;
        for (int c = 0; c < 2; c++) {
            const ckey_exr_compression comp = c ? CKEY_EXR_ZIP : CKEY_EXR_PXR24;
            char out[2][600];
            fp_fwd fwd[2];
            memset(fwd, 0, sizeof fwd);
            for (int stored = 0; stored < 2; stored++) {
                snprintf(out[stored], sizeof out[stored], "%s/%d-%s", dir, c, stored ? "stored" : "floats");
                REQUIRE(ckey_sink_open_passes(out[stored], comp, &fwd[stored].inner, &err) == CKEY_OK);
                ckey_sink sink = {.self = &fwd[stored], .begin = fp_fwd_begin, .write = fp_fwd_write,
                                  .stored_passes = stored};
                ckey_shot_stats sst;
                CHECKF(fp_run_sink(s, CKEY_FRAME_PATH_DEVICE, 2, c ? 0 : 1, NULL, &post, &sink, &sst, &err) ==
                           CKEY_OK, "%s", err.message);
                ckey_sink_close(&fwd[stored].inner);
            }
            CHECKF(fwd[1].stored == FP_FRAMES && fwd[1].floats == 0 && fwd[0].floats == FP_FRAMES &&
                       fwd[0].stored == 0 && !fwd[0].mixed && !fwd[1].mixed,
                   "passes: stored sink %d stored / %d float, float sink %d / %d", fwd[1].stored, fwd[1].floats,
                   fwd[0].stored, fwd[0].floats);
            int same = 0;
            for (int i = 0; i < FP_FRAMES; i++)
                for (int q = 0; q < 4; q++) {
                    char pf[700], ps[700];
                    snprintf(pf, sizeof pf, "%s/%s/f_%04d.%s", out[0], ck_pass_names[q], i, q == 3 ? "png" : "exr");
                    snprintf(ps, sizeof ps, "%s/%s/f_%04d.%s", out[1], ck_pass_names[q], i, q == 3 ? "png" : "exr");
                    size_t nf = 0, ns = 0;
                    unsigned char *bf = ck_read_file(pf, &nf), *bs = ck_read_file(ps, &ns);
                    const int eq = bf && bs && nf == ns && memcmp(bf, bs, nf) == 0;
                    CHECKF(eq, "%s: not the bytes of %s", ps, pf);
                    same += eq;
                    free(bf), free(bs);
                }
            printf("  %s, %s plates: %d of %d pass files the same from the device's HALF / 8-bit passes as from "
                   "its floats\n", c ? "ZIP" : "PXR24", c ? "float" : "packed", same, 4 * FP_FRAMES);
        }
        ck_remove_tree(dir);
    }
    /* the torch despeckle has no device form: AUTO takes the host path, DEVICE refuses */
    post.despeckle_mode = CKEY_DESPECKLE_TORCH;
    static fp_sink k;
    ckey_shot_stats stk;
    CHECK(fp_run_plan(s, CKEY_FRAME_PATH_AUTO, 2, 1, plan, &post, &k, &stk, &err) == CKEY_OK &&
          stk.frame_path == CKEY_FRAME_PATH_CPU);
    fp_sink_clear(&k);
    CHECK(fp_run(s, CKEY_FRAME_PATH_DEVICE, 2, 0, &post, &k, NULL, &err) == CKEY_ERR_UNSUPPORTED);
    printf("  torch despeckle, --frame-path device: %s\n", err.message);
    fp_sink_clear(&k);
    ckey_session_free(s);
    ckey_model_free(m);
}

int main(int argc, char **argv) {
    static const ck_test_case cases[] = {
        {"devices", test_devices},
        {"layernorm_vs_cpu", test_layernorm},
        {"linear_vs_cpu", test_linear},
        {"attention_vs_cpu", test_attention},
        {"elementwise_ops_vs_cpu", test_elementwise_ops},
        {"conv3x3_groupnorm_vs_cpu", test_conv_and_groupnorm},
        {"encoder_decoder_compositions_vs_cpu", test_encoder_decoder_compositions},
        {"network_tiny_vs_pytorch", test_network_tiny},
        {"network_repeatable", test_network_repeatable},
        {"network_full256_vs_pytorch", test_network_full256},
        {"network_fp16_bf16_vs_pytorch_autocast", test_network_reduced_precision},
        {"attention_tc_vs_fp32", test_attention_tc},
        {"window_attention_tc_vs_fp32", test_window_attention_tc},
        {"attention_wgmma_vs_fp32", test_attention_wgmma},
        {"attention_tc_timing", test_attention_tc_timing},
        {"conv3x3_tc_vs_cpu", test_conv3x3_tc},
        {"refiner_elementwise_16bit_vs_cpu", test_refiner_elementwise_16bit},
        {"linear_16bit_vs_cpu", test_linear_16bit},
        {"linear_tuned_picks_16bit", test_linear_tuned_picks},
        {"patch_embed_16bit_vs_host", test_patch_embed_16bit},
        {"net_dataflow_16bit_vs_host", test_net_dataflow_16bit},
        {"linear_gelu_ln_fold_16bit_vs_host", test_linear_gelu_ln_fold_16bit},
        {"layernorm_gelu_16bit_vs_cpu", test_layernorm_gelu_16bit},
        {"linear_gelu_16bit_vs_host", test_linear_gelu_16bit},
        {"conv3x3_tc_timing", test_conv3x3_tc_timing},
        {"frame_resize_vs_cpu", test_frame_resize},
        {"frame_preprocess_vs_cpu", test_frame_preprocess},
        {"frame_components_vs_cpu", test_frame_components},
        {"frame_post_vs_cpu", test_frame_post},
        {"frame_stored_vs_host", test_frame_stored},
        {"frame_path_shot_vs_host", test_frame_path_shot},
        {"frame_path_video_vs_host", test_frame_path_video},
    };
    return ck_test_main(cases, (int)CK_ARRAY_LEN(cases), argc, argv);
}
