/* Cutie's memory read (not a test):
 *   build/bench/bench-memory-read [threads [top_k [sizes]]]
 *   build/bench/bench-memory-read --device cuda [--precision fp32|fp16|bf16] [top_k [sizes]]
 * At the stride-16 feature grids of 854 x 480, 1920 x 1080 and 3840 x 2160
 * (HW = 54 x 30, 120 x 68, 240 x 135; the first `sizes` of them, default
 * all), CK 64, one object of CV 256 and top_k 30 (Cutie's eval_config), it
 * prints the time of one read, the similarity GEMM's rate, the scratch the
 * op works in, the inputs and the output, and the N x HW affinity matrix
 * that it never stores. On the CPU backend (threads 0: every core) with N =
 * 5 memory frames x HW, the best of the runs that fit in about two seconds.
 * On CUDA (device 0) with 5 and with 10 memory frames, each read
 * synchronized, the best and the median of the runs that fit in about a
 * second, without and with usage, and the device scratch bytes
 * (ck_cuda_memory_read_bytes); --precision: the similarity's product in fp32
 * on CUDA cores (default) or on tensor cores from fp16 / bf16 operands
 * (ck_cuda_memory_read's precision). Random keys and values: the time does
 * not depend on the data. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "backend/ops.h"
#include "benchutil.h"
#include "ckey.h"
#include "cpu/cpu.h"
#include "cuda/kernels.h"

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

static int cmp_double(const void *a, const void *b) {
    const double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

static void *device_floats(const float *h, size_t n) {
    void *d = NULL;
    if (ck_cuda_malloc(&d, n * sizeof(float), NULL)) return NULL;
    if (h && ck_cuda_copy(d, h, n * sizeof(float), 1, NULL)) {
        ck_cuda_free(d);
        return NULL;
    }
    return d;
}

/* The CUDA read, synchronized, timed over about a second: best and median
 * seconds, into t[0], t[1]. */
static int time_cuda(const float *mk, const float *ms, const float *qk, const float *qe, int64_t N, int64_t HW, int CK,
                     const float *mv, int C, int top_k, float *out, float *usage, int precision, void *scratch,
                     size_t bytes, double t[2]) {
    enum { MAX_RUNS = 1000 };
    static double ts[MAX_RUNS];
    ckey_error err;
    int runs = 0;
    /* one warm-up read */
    if (ck_cuda_memory_read(mk, ms, qk, qe, N, HW, CK, mv, C, top_k, out, usage, precision, scratch, bytes, NULL,
                                &err) ||
        ck_cuda_sync(&err)) {
        fprintf(stderr, "bench-memory-read: %s\n", err.message);
        return 1;
    }
    const double t_all = ck_now();
    do {
        const double t0 = ck_now();
        if (ck_cuda_memory_read(mk, ms, qk, qe, N, HW, CK, mv, C, top_k, out, usage, precision, scratch, bytes, NULL,
                                &err) ||
            ck_cuda_sync(&err)) {
            fprintf(stderr, "bench-memory-read: %s\n", err.message);
            return 1;
        }
        ts[runs++] = ck_now() - t0;
    } while (runs < MAX_RUNS && (ck_now() - t_all < 1.0 || runs < 3));
    qsort(ts, (size_t)runs, sizeof ts[0], cmp_double);
    t[0] = ts[0], t[1] = ts[runs / 2];
    return 0;
}

static int run_cuda(const char *label, int W, int H, int top_k, int frames, int precision) {
    const int CK = 64, C = 256;
    const int64_t HW = (int64_t)W * H, N = frames * HW;
    float *mk = bench_random_floats((size_t)(N * CK), 1, -1, 1);
    float *qk = bench_random_floats((size_t)(HW * CK), 2, -1, 1);
    float *ms = bench_random_floats((size_t)N, 3, 1, 2), *qe = bench_random_floats((size_t)(HW * CK), 4, 0, 1);
    float *mv = bench_random_floats((size_t)(N * C), 5, -1, 1);
    ck_op_needs needs = {0};
    needs.mr_n = N, needs.mr_ck = CK, needs.mr_top_k = top_k, needs.mr_usage_hw = HW;
    const size_t bytes = ck_cuda_memory_read_bytes(&needs);
    needs.mr_usage_hw = 0;
    const size_t bytes_plain = ck_cuda_memory_read_bytes(&needs);
    float *dmk = device_floats(mk, (size_t)(N * CK)), *dqk = device_floats(qk, (size_t)(HW * CK));
    float *dms = device_floats(ms, (size_t)N), *dqe = device_floats(qe, (size_t)(HW * CK));
    float *dmv = device_floats(mv, (size_t)(N * C)), *dout = device_floats(NULL, (size_t)(HW * C));
    float *dus = device_floats(NULL, (size_t)N);
    void *scratch = bytes ? device_floats(NULL, (bytes + 3) / 4) : NULL;
    int rc = 1;
    double t[2], tu[2];
    if (!mk || !qk || !ms || !qe || !mv || !dmk || !dqk || !dms || !dqe || !dmv || !dout || !dus ||
        (bytes && !scratch)) {
        fprintf(stderr, "bench-memory-read: out of memory at %s\n", label);
        goto done;
    }
    if (time_cuda(dmk, dms, dqk, dqe, N, HW, CK, dmv, C, top_k, dout, NULL, precision, scratch, bytes, t) ||
        time_cuda(dmk, dms, dqk, dqe, N, HW, CK, dmv, C, top_k, dout, top_k > 0 ? dus : NULL, precision, scratch,
                  bytes, tu))
        goto done;
    {
        const double flop = 2.0 * (double)HW * (double)N * 2 * CK;
        const double in_bytes = 4.0 * ((double)N * (CK + 1 + C) + (double)HW * 2 * CK);
        printf("%-11s %s %2d frames  HW %6lld  N %7lld  top_k %2d  %7.3f ms (median %7.3f)  %6.0f GFLOP/s  with "
               "usage %7.3f ms  device scratch %zu bytes (%zu with usage)  inputs %7.1f MiB  out %5.1f MiB  (N x HW "
               "affinity: %.1f MiB)\n",
               label, ckey_precision_name((ckey_precision)precision), frames, (long long)HW, (long long)N, top_k,
               t[0] * 1e3, t[1] * 1e3, flop / t[0] / 1e9,
               tu[0] * 1e3, bytes_plain, bytes, bench_mib(in_bytes), bench_mib(4.0 * (double)HW * C),
               bench_mib(4.0 * (double)N * (double)HW));
    }
    rc = 0;
done:
    ck_cuda_free(dmk), ck_cuda_free(dqk), ck_cuda_free(dms), ck_cuda_free(dqe), ck_cuda_free(dmv);
    ck_cuda_free(dout), ck_cuda_free(dus), ck_cuda_free(scratch);
    free(mk), free(qk), free(ms), free(qe), free(mv);
    return rc;
}

int main(int argc, char **argv) {
    ckey_process_init(); /* as the ckey program runs */
    static const struct {
        const char *label;
        int w, h;
    } grid[] = {{"854x480", 54, 30}, {"1920x1080", 120, 68}, {"3840x2160", 240, 135}};
    if (argc > 2 && strcmp(argv[1], "--device") == 0) {
        if (strcmp(argv[2], "cuda") != 0 && strcmp(argv[2], "cpu") != 0) {
            fprintf(stderr, "bench-memory-read: --device cpu or cuda\n");
            return 2;
        }
        const int cuda = strcmp(argv[2], "cuda") == 0;
        argv += 2, argc -= 2;
        if (cuda) {
            int precision = CKEY_PRECISION_FP32;
            if (argc > 2 && strcmp(argv[1], "--precision") == 0) {
                if (!strcmp(argv[2], "fp32")) precision = CKEY_PRECISION_FP32;
                else if (!strcmp(argv[2], "fp16")) precision = CKEY_PRECISION_FP16;
                else if (!strcmp(argv[2], "bf16")) precision = CKEY_PRECISION_BF16;
                else {
                    fprintf(stderr, "bench-memory-read: --precision fp32, fp16 or bf16\n");
                    return 2;
                }
                argv += 2, argc -= 2;
            }
            const int top_k = argc > 1 ? atoi(argv[1]) : 30, sizes = argc > 2 ? atoi(argv[2]) : 3;
            if (ck_cuda_device_count() == 0) {
                fprintf(stderr, "bench-memory-read: no CUDA device\n");
                return 1;
            }
            ckey_device_info info;
            if (ck_cuda_device_info(0, &info, NULL) == CKEY_OK) printf("device: %s\n", info.name);
            int rc = 0;
            for (int i = 0; i < sizes && i < (int)CK_ARRAY_LEN(grid); i++)
                for (int frames = 5; frames <= 10; frames += 5)
                    rc |= run_cuda(grid[i].label, grid[i].w, grid[i].h, top_k, frames, precision);
            return rc;
        }
    }
    const int threads = argc > 1 ? atoi(argv[1]) : 0, top_k = argc > 2 ? atoi(argv[2]) : 30,
              sizes = argc > 3 ? atoi(argv[3]) : 3;
    ck_pool *pool = NULL;
    if (ck_pool_create(threads, &pool, NULL) != CKEY_OK) return 1;
    ck_gemm_init();
    int rc = 0;
    for (int i = 0; i < sizes && i < (int)CK_ARRAY_LEN(grid); i++) rc |= run(pool, grid[i].label, grid[i].w, grid[i].h, top_k);
    ck_pool_free(pool);
    return rc;
}
