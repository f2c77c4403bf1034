/* CUDA op kernels against the CPU backend (backend-vs-CPU, as ggml's
 * test-backend-ops): same inputs, compare by max abs error. Every case skips
 * with a message on a machine without a CUDA device (CI); `make test-gpu`
 * runs this binary on the GPU machine and fails if it skipped. */
#include <stdlib.h>
#include <string.h>

#include "cpu/cpu.h"
#include "cuda/ck_cuda.h"
#include "support/testutil.h"

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
    ck_cpu_scratch_floats(&cfg, 256, 2, &per_thread, &shared);
    ck_backend be;
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
        ck_cpu_ops.attention(&be, qkv, N, D, cases[c].heads, cases[c].qs, ref);
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

int main(int argc, char **argv) {
    static const ck_test_case cases[] = {
        {"devices", test_devices},
        {"layernorm_vs_cpu", test_layernorm},
        {"linear_vs_cpu", test_linear},
        {"attention_vs_cpu", test_attention},
    };
    return ck_test_main(cases, (int)CK_ARRAY_LEN(cases), argc, argv);
}
