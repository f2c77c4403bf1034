/* Single-threaded SGEMM throughput on ckey's shapes (not a test):
 *   build/bench/bench-gemm [M N K trans]...
 * With no arguments it runs the shapes the network uses most. The default
 * build measures ckey's kernel; `make BLAS=openblas bench` measures OpenBLAS
 * through the same entry point. */
#include <stdio.h>
#include <stdlib.h>

#include "cpu/cpu.h"

static void run(int M, int N, int K, int tr) {
    float *A = malloc(sizeof(float) * (size_t)M * K), *B = malloc(sizeof(float) * (size_t)N * K),
          *C = malloc(sizeof(float) * (size_t)M * N);
    for (long i = 0; i < (long)M * K; i++) A[i] = (float)(i % 7) - 3.0f;
    for (long i = 0; i < (long)N * K; i++) B[i] = (float)(i % 5) - 2.0f;
    ck_gemm_init();
    int it = 0;
    double t0 = ck_now();
    while (ck_now() - t0 < 1.0) {
        ck_sgemm(tr, M, N, K, 1.0f, A, K, B, tr ? K : N, 0.0f, C, N);
        it++;
    }
    double t = (ck_now() - t0) / it;
    printf("%5d x %5d x %5d %s: %6.1f GFLOP/s  (%s)\n", M, N, K, tr ? "B^T" : "B  ", 2.0 * M * N * K / t / 1e9,
           ckey_version());
    free(A), free(B), free(C);
}

int main(int argc, char **argv) {
    if (argc > 1) {
        for (int i = 1; i + 3 < argc; i += 4) run(atoi(argv[i]), atoi(argv[i + 1]), atoi(argv[i + 2]), atoi(argv[i + 3]));
        return 0;
    }
    run(256, 448, 448, 1);   /* stage-2 linear */
    run(256, 1792, 448, 1);  /* stage-2 fc1 */
    run(256, 512, 56, 1);    /* attention scores */
    run(256, 56, 512, 0);    /* attention values */
    run(256, 64, 64, 1);     /* refiner conv tap */
    return 0;
}
