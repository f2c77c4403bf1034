/* Cutie's memory read on the CPU backend (not a test):
 *   build/bench/bench-memory-read [threads [top_k [sizes]]]
 * At the stride-16 feature grids of 854 x 480, 1920 x 1080 and 3840 x 2160
 * (HW = 54 x 30, 120 x 68, 240 x 135; the first `sizes` of them, default
 * all; threads 0: every core), with N = 5 memory frames x HW, CK 64,
 * one object of CV 256 and top_k 30 (Cutie's eval_config), it prints the
 * time of one read (the best of the runs that fit in about two seconds), the
 * similarity GEMM's rate, the scratch the op works in, the inputs and the
 * output, and the N x HW affinity matrix that it never stores. Random keys
 * and values: the time does not depend on the data. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cpu/cpu.h"

static float *random_floats(size_t n, uint64_t seed, float lo, float hi) {
    float *p = malloc(n * sizeof(float));
    uint64_t s = seed * 0x9E3779B97F4A7C15ull + 1;
    for (size_t i = 0; p && i < n; i++) {
        s ^= s << 13, s ^= s >> 7, s ^= s << 17;
        p[i] = lo + (hi - lo) * (float)((s >> 40) * (1.0 / 16777216.0));
    }
    return p;
}

static double mib(double bytes) { return bytes / 1048576.0; }

static int run(ck_pool *pool, const char *label, int W, int H, int top_k) {
    const int CK = 64, C = 256, frames = 5;
    const int64_t HW = (int64_t)W * H, N = frames * HW;
    float *mk = random_floats((size_t)(N * CK), 1, -1, 1), *qk = random_floats((size_t)(HW * CK), 2, -1, 1);
    float *ms = random_floats((size_t)N, 3, 1, 2), *qe = random_floats((size_t)(HW * CK), 4, 0, 1);
    float *mv = random_floats((size_t)(N * C), 5, -1, 1), *out = malloc((size_t)(HW * C) * sizeof(float));
    ck_cpu be;
    memset(&be, 0, sizeof be);
    be.pool = pool;
    be.threads = ck_pool_size(pool);
    be.per_thread = ck_cpu_memory_read_floats(N, CK, top_k);
    be.scratch = malloc(be.per_thread * be.threads * sizeof(float));
    if (!mk || !qk || !ms || !qe || !mv || !out || !be.scratch) {
        fprintf(stderr, "bench-memory-read: out of memory at %s\n", label);
        return 1;
    }
#define T(p) ck_tensor_of((void *)(p), CK_F32)
    double best = 1e30, t_all = ck_now();
    int runs = 0;
    do {
        const double t0 = ck_now();
        ck_cpu_ops.memory_read(&be.base, T(mk), T(ms), T(qk), T(qe), N, HW, CK, T(mv), C, top_k, T(out),
                               ck_tensor_of(NULL, CK_F32));
        const double t = ck_now() - t0;
        best = t < best ? t : best;
        runs++;
    } while (ck_now() - t_all < 2.0);
#undef T
    const double flop = 2.0 * (double)HW * (double)N * 2 * CK;
    const double in_bytes = 4.0 * ((double)N * (CK + 1 + C) + (double)HW * 2 * CK);
    printf("%-11s HW %6lld  N %7lld  top_k %2d  %8.3f s (best of %d)  %6.1f GFLOP/s  scratch %4.0f KiB x %d threads = "
           "%.2f MiB  inputs %7.1f MiB  out %6.1f MiB  (N x HW affinity: %.1f MiB)\n",
           label, (long long)HW, (long long)N, top_k, best, runs, flop / best / 1e9,
           be.per_thread * sizeof(float) / 1024.0, be.threads, mib((double)be.per_thread * be.threads * sizeof(float)),
           mib(in_bytes), mib(4.0 * (double)HW * C), mib(4.0 * (double)N * (double)HW));
    free(mk), free(qk), free(ms), free(qe), free(mv), free(out), free(be.scratch);
    return 0;
}

int main(int argc, char **argv) {
    const int threads = argc > 1 ? atoi(argv[1]) : 0, top_k = argc > 2 ? atoi(argv[2]) : 30,
              sizes = argc > 3 ? atoi(argv[3]) : 3;
    static const struct {
        const char *label;
        int w, h;
    } grid[] = {{"854x480", 54, 30}, {"1920x1080", 120, 68}, {"3840x2160", 240, 135}};
    ck_pool *pool = NULL;
    if (ck_pool_create(threads, &pool, NULL) != CKEY_OK) return 1;
    ck_gemm_init();
    int rc = 0;
    for (int i = 0; i < sizes && i < (int)CK_ARRAY_LEN(grid); i++) rc |= run(pool, grid[i].label, grid[i].w, grid[i].h, top_k);
    ck_pool_free(pool);
    return rc;
}
