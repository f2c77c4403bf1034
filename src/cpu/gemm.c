/* GEMM entry point: OpenBLAS or, where the build has no BLAS, a plain
 * blocked fallback.
 *
 * Our thread pool owns the parallelism: each worker multiplies its own tiles
 * with a single-threaded GEMM. Debian's *serial* OpenBLAS is not safe to call
 * from several threads at once (its buffer pool has no lock: a stress test
 * gave ~2% wrong products), so ckey links the pthread build, which locks
 * its buffers, and asks it for one thread per call (ck_gemm_init). That
 * setting is OpenBLAS's own process-wide knob; documented in
 * docs/architecture.md. */
#include <string.h>

#include "cpu/cpu.h"

#ifdef CK_HAVE_OPENBLAS
#include <cblas.h>

void ck_gemm_init(void) {
    if (openblas_get_num_threads() != 1) openblas_set_num_threads(1);
}

void ck_sgemm(int b_trans, int M, int N, int K, float alpha, const float *A, int64_t lda,
              const float *B, int64_t ldb, float beta, float *C, int64_t ldc) {
    if (M <= 0 || N <= 0) return;
    cblas_sgemm(CblasRowMajor, CblasNoTrans, b_trans ? CblasTrans : CblasNoTrans, M, N, K, alpha, A,
                (blasint)lda, B, (blasint)ldb, beta, C, (blasint)ldc);
}

#else

void ck_gemm_init(void) {}

/* Fallback: correct and cache-blocked, several times slower than OpenBLAS. */
__attribute__((target_clones("avx512f", "avx2", "default")))
void ck_sgemm(int b_trans, int M, int N, int K, float alpha, const float *A, int64_t lda,
              const float *B, int64_t ldb, float beta, float *C, int64_t ldc) {
    for (int i = 0; i < M; i++) {
        float *c = C + (int64_t)i * ldc;
        if (beta == 0.0f) memset(c, 0, (size_t)N * sizeof(float));
        else if (beta != 1.0f)
            for (int j = 0; j < N; j++) c[j] *= beta;
    }
    enum { KB = 256, JB = 512 };
    for (int k0 = 0; k0 < K; k0 += KB) {
        int k1 = k0 + KB < K ? k0 + KB : K;
        for (int j0 = 0; j0 < N; j0 += JB) {
            int j1 = j0 + JB < N ? j0 + JB : N;
            for (int i = 0; i < M; i++) {
                const float *a = A + (int64_t)i * lda;
                float *c = C + (int64_t)i * ldc;
                if (b_trans) {
                    for (int j = j0; j < j1; j++) {
                        const float *b = B + (int64_t)j * ldb;
                        float s = 0;
                        for (int k = k0; k < k1; k++) s += a[k] * b[k];
                        c[j] += alpha * s;
                    }
                } else {
                    for (int k = k0; k < k1; k++) {
                        const float av = alpha * a[k];
                        const float *restrict b = B + (int64_t)k * ldb;
                        for (int j = j0; j < j1; j++) c[j] += av * b[j];
                    }
                }
            }
        }
    }
}
#endif
