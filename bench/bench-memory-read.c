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

#include "benchutil.h"
#include "cpu/cpu.h"

static int run(ck_pool *pool, const char *label, int W, int H, int top_k) {
    const int CK = 64, C = 256, frames = 5;
    const int64_t HW = (int64_t)W * H, N = frames * HW;
    bench_read_time r;
    if (bench_memory_read(pool, N, HW, CK, C, top_k, 1, 2.0, &r)) {
        fprintf(stderr, "bench-memory-read: out of memory at %s\n", label);
        return 1;
    }
    const double flop = 2.0 * (double)HW * (double)N * 2 * CK;
    const double in_bytes = 4.0 * ((double)N * (CK + 1 + C) + (double)HW * 2 * CK);
    printf("%-11s HW %6lld  N %7lld  top_k %2d  %8.3f s (best of %d)  %6.1f GFLOP/s  scratch %4.0f KiB x %d threads = "
           "%.2f MiB  inputs %7.1f MiB  out %6.1f MiB  (N x HW affinity: %.1f MiB)\n",
           label, (long long)HW, (long long)N, top_k, r.best_s, r.runs, flop / r.best_s / 1e9,
           r.scratch_floats * sizeof(float) / 1024.0, r.threads,
           bench_mib((double)r.scratch_floats * r.threads * sizeof(float)), bench_mib(in_bytes),
           bench_mib(4.0 * (double)HW * C), bench_mib(4.0 * (double)N * (double)HW));
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
