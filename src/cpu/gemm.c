/* ckey's own single-threaded SGEMM. Each pool worker multiplies its own
 * tiles, so the kernel must be reentrant and lock-free: no global buffers,
 * the B panel is packed into a stack buffer.
 *
 * Blocking: K in chunks of KC (a [KC][32] panel stays in L1); for each
 * chunk, B is packed 32 columns at a time (zero padded) and every MR-row
 * strip of A runs the MR x 32 register kernel against that panel. Written with
 * GCC vector extensions: a 14 x 32 AVX-512 path, and a 6 x 16 narrow path
 * compiled for AVX2+FMA and for baseline x86-64; the CPU picks at run time. */
#include <math.h>
#include <string.h>

#include "cpu/cpu.h"

/* The helpers below are always inlined into each clone, so passing 64-byte
 * vectors never crosses a real call boundary. */
#pragma GCC diagnostic ignored "-Wpsabi"

typedef float v16 __attribute__((vector_size(64)));


enum { MR_MAX = 16, NR = 32, KC = 256 };

#ifdef CK_HAVE_OPENBLAS
/* `make BLAS=openblas`: Debian's pthread OpenBLAS, one thread per call (its
 * serial build is not safe to call from several threads at once). Kept for
 * comparison; ckey's own kernel below is the default (docs/design.md
 * compares the two). */
#include <cblas.h>

void ck_gemm_init(void) {
    if (openblas_get_num_threads() != 1) openblas_set_num_threads(1);
}

void ck_sgemm(int b_trans, int M, int N, int K, float alpha, const float *A, int64_t lda, const float *B,
              int64_t ldb, float beta, float *C, int64_t ldc) {
    if (M <= 0 || N <= 0) return;
    cblas_sgemm(CblasRowMajor, CblasNoTrans, b_trans ? CblasTrans : CblasNoTrans, M, N, K, alpha, A,
                (blasint)lda, B, (blasint)ldb, beta, C, (blasint)ldc);
}

/* One path only: both variants are OpenBLAS (test-core compares them). */
void ck_sgemm_variant(int variant, int b_trans, int M, int N, int K, const float *A, int64_t lda,
                      const float *B, int64_t ldb, float beta, float *C, int64_t ldc) {
    (void)variant;
    ck_sgemm(b_trans, M, N, K, 1.0f, A, lda, B, ldb, beta, C, ldc);
}

int ck_flash_t_available(int variant) { (void)variant; return 0; }

void ck_flash_t(const float *q, int nq, const float *K, const float *Vt, int64_t nk, int hd, float *out,
                int64_t ldo, float *work) {
    (void)q, (void)nq, (void)K, (void)Vt, (void)nk, (void)hd, (void)out, (void)ldo, (void)work;
}

void ck_sgemm_packed(int variant, int M, int N, int K, const float *A, int64_t lda, const float *Bp,
                     int64_t panel_stride, float beta, float *C, int64_t ldc) {
    (void)variant;
    for (int j0 = 0; j0 < N; j0 += 32)
        ck_sgemm(0, M, N - j0 < 32 ? N - j0 : 32, K, 1.0f, A, lda, Bp + (int64_t)(j0 / 32) * panel_stride, 32, beta,
                 C + j0, ldc);
}

#else

void ck_gemm_init(void) {}

static inline __attribute__((always_inline)) v16 loadu(const float *p) {
    v16 v;
    memcpy(&v, p, sizeof v);
    return v;
}

static inline __attribute__((always_inline)) void storeu(float *p, v16 v) { memcpy(p, &v, sizeof v); }

/* Row c [nr] (+)= one kernel row's accumulators c0 | c1 (nr <= NR). */
static inline __attribute__((always_inline)) void store_row(float *c, v16 c0, v16 c1, int nr, int accumulate) {
    if (nr == NR) {
        if (accumulate) {
            storeu(c, loadu(c) + c0);
            storeu(c + 16, loadu(c + 16) + c1);
        } else {
            storeu(c, c0);
            storeu(c + 16, c1);
        }
    } else {
        float t[NR];
        memcpy(t, &c0, sizeof c0);
        memcpy(t + 16, &c1, sizeof c1);
        if (accumulate)
            for (int j = 0; j < nr; j++) c[j] += t[j];
        else
            for (int j = 0; j < nr; j++) c[j] = t[j];
    }
}

/* C[mr x nr] (+)= A[mr x kc] . P[kc x 32]; mr <= 8, nr <= 32. */
static inline __attribute__((always_inline)) void kernel(const int mr, int kc, const float *A, int64_t lda,
                                                         const float *P, float *C, int64_t ldc, int nr,
                                                         int accumulate) {
    v16 c0[MR_MAX], c1[MR_MAX];
    for (int i = 0; i < mr; i++) c0[i] = c1[i] = (v16){0};
    const float *a[MR_MAX];
    for (int i = 0; i < mr; i++) a[i] = A + (int64_t)i * lda;
    for (int k = 0; k < kc; k++) {
        const v16 b0 = loadu(P + (int64_t)k * NR), b1 = loadu(P + (int64_t)k * NR + 16);
        for (int i = 0; i < mr; i++) {
            const float x = a[i][k];
            const v16 av = {x, x, x, x, x, x, x, x, x, x, x, x, x, x, x, x};
            c0[i] += av * b0;
            c1[i] += av * b1;
        }
    }
    for (int i = 0; i < mr; i++) store_row(C + (int64_t)i * ldc, c0[i], c1[i], nr, accumulate);
}

typedef int32_t v16i __attribute__((vector_size(64)));

/* In-register 16 x 16 transpose: four butterfly stages exchanging blocks of
 * 8, 4, 2 and 1 lanes between rows i and i + d (one two-source permute per
 * output row and stage). */
static inline __attribute__((always_inline)) void transpose16(v16 r[16]) {
    static const v16i lo8 = {0, 1, 2, 3, 4, 5, 6, 7, 16, 17, 18, 19, 20, 21, 22, 23};
    static const v16i hi8 = {8, 9, 10, 11, 12, 13, 14, 15, 24, 25, 26, 27, 28, 29, 30, 31};
    static const v16i lo4 = {0, 1, 2, 3, 16, 17, 18, 19, 8, 9, 10, 11, 24, 25, 26, 27};
    static const v16i hi4 = {4, 5, 6, 7, 20, 21, 22, 23, 12, 13, 14, 15, 28, 29, 30, 31};
    static const v16i lo2 = {0, 1, 16, 17, 4, 5, 20, 21, 8, 9, 24, 25, 12, 13, 28, 29};
    static const v16i hi2 = {2, 3, 18, 19, 6, 7, 22, 23, 10, 11, 26, 27, 14, 15, 30, 31};
    static const v16i lo1 = {0, 16, 2, 18, 4, 20, 6, 22, 8, 24, 10, 26, 12, 28, 14, 30};
    static const v16i hi1 = {1, 17, 3, 19, 5, 21, 7, 23, 9, 25, 11, 27, 13, 29, 15, 31};
    const v16i *lo[4] = {&lo8, &lo4, &lo2, &lo1}, *hi[4] = {&hi8, &hi4, &hi2, &hi1};
    for (int st = 0, d = 8; st < 4; st++, d >>= 1) {
        for (int i = 0; i < 16; i++) {
            if (i & d) continue;
            v16 a = r[i], b = r[i + d];
            r[i] = __builtin_shuffle(a, b, *lo[st]);
            r[i + d] = __builtin_shuffle(a, b, *hi[st]);
        }
    }
}

/* Pack B[k0 .. k0+kc, j0 .. j0+nr] into P[kc][32] (zero padded). b_trans:
 * B is stored [N, K] (a weight matrix W[out, in], or keys). */
static inline __attribute__((always_inline)) void pack_b(int b_trans, const float *B, int64_t ldb, int k0, int kc, int j0, int nr, float *P) {
    if (b_trans) {
        /* 16 x 16 blocks: read 16 rows of B along k, write 16 panel rows. */
        const float *src[NR];
        for (int j = 0; j < NR; j++) src[j] = B + (int64_t)(j0 + (j < nr ? j : 0)) * ldb + k0;
        for (int kb = 0; kb < kc; kb += 16) {
            const int kn = kc - kb < 16 ? kc - kb : 16;
            for (int jb = 0; jb < NR; jb += 16) {
                v16 blk[16];
                float(*bf)[16] = (float(*)[16])(void *)blk;
                for (int j = 0; j < 16; j++) {
                    if (jb + j >= nr) {
                        blk[j] = (v16){0};
                    } else if (kn == 16) {
                        /* weights come from L3 or memory, rows a page or
                         * more apart: fetch four lines ahead */
                        __builtin_prefetch(src[jb + j] + kb + 64);
                        blk[j] = loadu(src[jb + j] + kb); /* one vector, not a rep movs */
                    } else {
                        blk[j] = (v16){0};
                        for (int k = 0; k < kn; k++) bf[j][k] = src[jb + j][kb + k];
                    }
                }
                transpose16(blk);
                for (int k = 0; k < kn; k++) storeu(P + (int64_t)(kb + k) * NR + jb, blk[k]);
            }
        }
    } else {
        if (nr == NR) {
            for (int k = 0; k < kc; k++) {
                const float *src = B + (int64_t)(k0 + k) * ldb + j0;
                *(v16 *)(P + (int64_t)k * NR) = loadu(src);
                *(v16 *)(P + (int64_t)k * NR + 16) = loadu(src + 16);
            }
        } else {
            for (int k = 0; k < kc; k++) {
                float *d = P + (int64_t)k * NR;
                const float *src = B + (int64_t)(k0 + k) * ldb + j0;
                for (int j = 0; j < NR; j++) d[j] = j < nr ? src[j] : 0.0f;
            }
        }
    }
}

/* The AVX-512 driver: 14-row strips against 32-column panels (28 zmm
 * accumulators). */
#define TAILS(MR)                                                                  \
    switch (rest) {                                                                \
    case 15: if (MR > 15) kernel(15, kc, a, lda, P, c, ldc, nr, acc); break;      \
    case 14: if (MR > 14) kernel(14, kc, a, lda, P, c, ldc, nr, acc); break;      \
    case 13: if (MR > 13) kernel(13, kc, a, lda, P, c, ldc, nr, acc); break;      \
    case 12: if (MR > 12) kernel(12, kc, a, lda, P, c, ldc, nr, acc); break;      \
    case 11: if (MR > 11) kernel(11, kc, a, lda, P, c, ldc, nr, acc); break;      \
    case 10: if (MR > 10) kernel(10, kc, a, lda, P, c, ldc, nr, acc); break;      \
    case 9: if (MR > 9) kernel(9, kc, a, lda, P, c, ldc, nr, acc); break;         \
    case 8: if (MR > 8) kernel(8, kc, a, lda, P, c, ldc, nr, acc); break;         \
    case 7: kernel(7, kc, a, lda, P, c, ldc, nr, acc); break;                     \
    case 6: kernel(6, kc, a, lda, P, c, ldc, nr, acc); break;                     \
    case 5: kernel(5, kc, a, lda, P, c, ldc, nr, acc); break;                     \
    case 4: kernel(4, kc, a, lda, P, c, ldc, nr, acc); break;                     \
    case 3: kernel(3, kc, a, lda, P, c, ldc, nr, acc); break;                     \
    case 2: kernel(2, kc, a, lda, P, c, ldc, nr, acc); break;                     \
    case 1: kernel(1, kc, a, lda, P, c, ldc, nr, acc); break;                     \
    default: break;                                                                \
    }

#define SGEMM_BODY(MR)                                                                          \
    if (M <= 0 || N <= 0) return;                                                               \
    if (K <= 0) {                                                                               \
        if (beta == 0.0f)                                                                       \
            for (int i = 0; i < M; i++) memset(C + (int64_t)i * ldc, 0, (size_t)N * sizeof(float)); \
        return;                                                                                 \
    }                                                                                           \
    float P[KC * NR] __attribute__((aligned(64)));                                              \
    for (int k0 = 0; k0 < K; k0 += KC) {                                                        \
        const int kc = K - k0 < KC ? K - k0 : KC;                                               \
        const int acc = beta != 0.0f || k0 > 0;                                                 \
        for (int j0 = 0; j0 < N; j0 += NR) {                                                    \
            const int nr = N - j0 < NR ? N - j0 : NR;                                           \
            pack_b(b_trans, B, ldb, k0, kc, j0, nr, P);                                         \
            int i0 = 0;                                                                         \
            for (; i0 + MR <= M; i0 += MR)                                                      \
                kernel(MR, kc, A + (int64_t)i0 * lda + k0, lda, P, C + (int64_t)i0 * ldc + j0, ldc, nr, acc); \
            const int rest = M - i0;                                                            \
            const float *a = A + (int64_t)i0 * lda + k0;                                        \
            float *c = C + (int64_t)i0 * ldc + j0;                                              \
            TAILS(MR)                                                                           \
        }                                                                                       \
    }

/* The narrow path (AVX2 + FMA, or baseline SSE): 8-lane vectors, a 6 x 16
 * kernel (12 ymm accumulators + 2 panel vectors + 1 broadcast fit the 16
 * ymm registers), 16-column panels packed with scalar copies. */
typedef float v8 __attribute__((vector_size(32)));
enum { NR8 = 16, MR8 = 6 };

static inline __attribute__((always_inline)) v8 loadu8(const float *p) {
    v8 v;
    memcpy(&v, p, sizeof v);
    return v;
}

static inline __attribute__((always_inline)) void storeu8(float *p, v8 v) { memcpy(p, &v, sizeof v); }

/* store_row of the narrow kernel (nr <= NR8). */
static inline __attribute__((always_inline)) void store_row8(float *c, v8 c0, v8 c1, int nr, int accumulate) {
    if (nr == NR8) {
        if (accumulate) {
            storeu8(c, loadu8(c) + c0);
            storeu8(c + 8, loadu8(c + 8) + c1);
        } else {
            storeu8(c, c0);
            storeu8(c + 8, c1);
        }
    } else {
        float t[NR8];
        memcpy(t, &c0, sizeof c0);
        memcpy(t + 8, &c1, sizeof c1);
        if (accumulate)
            for (int j = 0; j < nr; j++) c[j] += t[j];
        else
            for (int j = 0; j < nr; j++) c[j] = t[j];
    }
}

static inline __attribute__((always_inline)) void kernel8(const int mr, int kc, const float *A, int64_t lda,
                                                          const float *P, float *C, int64_t ldc, int nr,
                                                          int accumulate) {
    v8 c0[MR8], c1[MR8];
    for (int i = 0; i < mr; i++) c0[i] = c1[i] = (v8){0};
    const float *a[MR8];
    for (int i = 0; i < mr; i++) a[i] = A + (int64_t)i * lda;
    for (int k = 0; k < kc; k++) {
        const v8 b0 = *(const v8 *)(P + (int64_t)k * NR8), b1 = *(const v8 *)(P + (int64_t)k * NR8 + 8);
        for (int i = 0; i < mr; i++) {
            const float x = a[i][k];
            const v8 av = {x, x, x, x, x, x, x, x};
            c0[i] += av * b0;
            c1[i] += av * b1;
        }
    }
    for (int i = 0; i < mr; i++) store_row8(C + (int64_t)i * ldc, c0[i], c1[i], nr, accumulate);
}

static inline __attribute__((always_inline)) void pack_b8(int b_trans, const float *B, int64_t ldb, int k0,
                                                          int kc, int j0, int nr, float *P) {
    for (int k = 0; k < kc; k++) {
        float *d = P + (int64_t)k * NR8;
        if (b_trans)
            for (int j = 0; j < NR8; j++) d[j] = j < nr ? B[(int64_t)(j0 + j) * ldb + k0 + k] : 0.0f;
        else
            for (int j = 0; j < NR8; j++) d[j] = j < nr ? B[(int64_t)(k0 + k) * ldb + j0 + j] : 0.0f;
    }
}

__attribute__((target_clones("arch=x86-64-v3", "default")))
static void sgemm_narrow(int b_trans, int M, int N, int K, const float *A, int64_t lda, const float *B,
                         int64_t ldb, float beta, float *C, int64_t ldc) {
    if (M <= 0 || N <= 0) return;
    if (K <= 0) {
        if (beta == 0.0f)
            for (int i = 0; i < M; i++) memset(C + (int64_t)i * ldc, 0, (size_t)N * sizeof(float));
        return;
    }
    float P[KC * NR8] __attribute__((aligned(64)));
    for (int k0 = 0; k0 < K; k0 += KC) {
        const int kc = K - k0 < KC ? K - k0 : KC;
        const int acc = beta != 0.0f || k0 > 0;
        for (int j0 = 0; j0 < N; j0 += NR8) {
            const int nr = N - j0 < NR8 ? N - j0 : NR8;
            pack_b8(b_trans, B, ldb, k0, kc, j0, nr, P);
            int i0 = 0;
            for (; i0 + MR8 <= M; i0 += MR8)
                kernel8(MR8, kc, A + (int64_t)i0 * lda + k0, lda, P, C + (int64_t)i0 * ldc + j0, ldc, nr, acc);
            const float *a = A + (int64_t)i0 * lda + k0;
            float *c = C + (int64_t)i0 * ldc + j0;
            switch (M - i0) {
            case 5: kernel8(5, kc, a, lda, P, c, ldc, nr, acc); break;
            case 4: kernel8(4, kc, a, lda, P, c, ldc, nr, acc); break;
            case 3: kernel8(3, kc, a, lda, P, c, ldc, nr, acc); break;
            case 2: kernel8(2, kc, a, lda, P, c, ldc, nr, acc); break;
            case 1: kernel8(1, kc, a, lda, P, c, ldc, nr, acc); break;
            default: break;
            }
        }
    }
}

__attribute__((target("arch=x86-64-v4")))
static void sgemm_avx512(int b_trans, int M, int N, int K, const float *A, int64_t lda, const float *B,
                         int64_t ldb, float beta, float *C, int64_t ldc) {
    SGEMM_BODY(14)
}


/* ------------------------------------------- attention, keys as rows
 * Online-softmax attention computed transposed, for blocks of 32 queries:
 *   Sᵀ [bk, 32] = K_tile [bk, hd] . Qᵀ          (rows: keys)
 *   Oᵀ [hd, 32] = Oᵀ . corr + Vᵀ [hd, bk] . exp2(Sᵀ - m)
 * With the queries along the vector lanes the softmax needs no horizontal
 * reductions (the row max and sum become vertical max and add over the
 * tile), Sᵀ is already the [k][32] panel the register kernel multiplies,
 * and hd = 56 is exactly four 14-row strips (the untransposed P.V computes
 * 64 columns for 56). Scores are in log2 units: the caller folds log2(e)
 * into the query scale. Sᵀ (FT_BK x 32) stays in L1; the key and value tiles
 * (each contiguous) are reused from L2 by every 32-query block. */
#include <immintrin.h>

enum { FT_BK = CK_FLASH_T_BK }; /* 18 strips of 14 keys; Sᵀ is 31.5 KiB */

/* C [M, 32] (+)= A [M, K] . P [K, 32] in 14-row strips. */
static inline __attribute__((always_inline)) void strips32(int M, int kc, const float *A, int64_t lda,
                                                           const float *P, float *C, int64_t ldc, int acc) {
    const int nr = NR;
    int i0 = 0;
    for (; i0 + 14 <= M; i0 += 14) kernel(14, kc, A + (int64_t)i0 * lda, lda, P, C + (int64_t)i0 * ldc, ldc, nr, acc);
    const int rest = M - i0;
    const float *a = A + (int64_t)i0 * lda;
    float *c = C + (int64_t)i0 * ldc;
    TAILS(14)
}

/* 2^x for x <= 0 (clamped at -126): x = n + f, |f| <= 1/2, a degree-6
 * Taylor polynomial of 2^f (relative error ~1e-7) scaled by 2^n. A NaN
 * gives NaN: max_ps returns its second operand when one is NaN, so x goes
 * second. */
__attribute__((target("arch=x86-64-v4"))) static inline __attribute__((always_inline)) __m512 exp2_512(__m512 x) {
    x = _mm512_max_ps(_mm512_set1_ps(-126.0f), x);
    const __m512 n = _mm512_roundscale_ps(x, _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
    const __m512 f = _mm512_sub_ps(x, n);
    __m512 p = _mm512_set1_ps(1.5403530e-4f);
    p = _mm512_fmadd_ps(p, f, _mm512_set1_ps(1.3333558e-3f));
    p = _mm512_fmadd_ps(p, f, _mm512_set1_ps(9.6181291e-3f));
    p = _mm512_fmadd_ps(p, f, _mm512_set1_ps(5.5504109e-2f));
    p = _mm512_fmadd_ps(p, f, _mm512_set1_ps(2.4022651e-1f));
    p = _mm512_fmadd_ps(p, f, _mm512_set1_ps(6.9314718e-1f));
    p = _mm512_fmadd_ps(p, f, _mm512_set1_ps(1.0f));
    return _mm512_scalef_ps(p, n);
}

__attribute__((target("arch=x86-64-v4")))
static void flash_t_avx512(const float *q, int nq, const float *K, const float *Vt, int64_t nk,
                           int hd, float *out, int64_t ldo, float *work) {
    const int nsb = (nq + 31) / 32;
    const size_t sbf = (size_t)2 * hd * 32 + 64;
    float *ST = work, *blocks = work + (size_t)FT_BK * 32;
    for (int b = 0; b < nsb; b++) {
        float *Qp = blocks + b * sbf, *Ot = Qp + (size_t)hd * 32, *m = Ot + (size_t)hd * 32, *l = m + 32;
        const int nb = CK_MIN(32, nq - b * 32);
        for (int d = 0; d < hd; d++)
            for (int j = 0; j < 32; j++) Qp[d * 32 + j] = j < nb ? q[(int64_t)(b * 32 + j) * hd + d] : 0.0f;
        memset(Ot, 0, (size_t)hd * 32 * sizeof(float));
        for (int j = 0; j < 32; j++) m[j] = -INFINITY, l[j] = 0.0f;
    }
    for (int64_t kb = 0; kb < nk; kb += FT_BK) {
        const int bk = (int)CK_MIN(FT_BK, nk - kb);
        for (int b = 0; b < nsb; b++) {
            float *Qp = blocks + b * sbf, *Ot = Qp + (size_t)hd * 32, *m = Ot + (size_t)hd * 32, *l = m + 32;
            strips32(bk, hd, K + kb * hd, hd, Qp, ST, 32, 0);
            const __m512 m0 = _mm512_loadu_ps(m), m1 = _mm512_loadu_ps(m + 16);
            __m512 x0 = m0, x1 = m1;
            for (int r = 0; r < bk; r++) {
                x0 = _mm512_max_ps(x0, _mm512_loadu_ps(ST + r * 32));
                x1 = _mm512_max_ps(x1, _mm512_loadu_ps(ST + r * 32 + 16));
            }
            __m512 s0 = _mm512_setzero_ps(), s1 = s0, t0 = s0, t1 = s0;
            int r = 0;
            for (; r + 2 <= bk; r += 2) {
                float *p = ST + r * 32;
                const __m512 e0 = exp2_512(_mm512_sub_ps(_mm512_loadu_ps(p), x0));
                const __m512 e1 = exp2_512(_mm512_sub_ps(_mm512_loadu_ps(p + 16), x1));
                const __m512 e2 = exp2_512(_mm512_sub_ps(_mm512_loadu_ps(p + 32), x0));
                const __m512 e3 = exp2_512(_mm512_sub_ps(_mm512_loadu_ps(p + 48), x1));
                _mm512_storeu_ps(p, e0), _mm512_storeu_ps(p + 16, e1);
                _mm512_storeu_ps(p + 32, e2), _mm512_storeu_ps(p + 48, e3);
                s0 = _mm512_add_ps(s0, e0), s1 = _mm512_add_ps(s1, e1);
                t0 = _mm512_add_ps(t0, e2), t1 = _mm512_add_ps(t1, e3);
            }
            for (; r < bk; r++) {
                float *p = ST + r * 32;
                const __m512 e0 = exp2_512(_mm512_sub_ps(_mm512_loadu_ps(p), x0));
                const __m512 e1 = exp2_512(_mm512_sub_ps(_mm512_loadu_ps(p + 16), x1));
                _mm512_storeu_ps(p, e0), _mm512_storeu_ps(p + 16, e1);
                s0 = _mm512_add_ps(s0, e0), s1 = _mm512_add_ps(s1, e1);
            }
            const __m512 c0 = exp2_512(_mm512_sub_ps(m0, x0)), c1 = exp2_512(_mm512_sub_ps(m1, x1));
            _mm512_storeu_ps(l, _mm512_fmadd_ps(_mm512_loadu_ps(l), c0, _mm512_add_ps(s0, t0)));
            _mm512_storeu_ps(l + 16, _mm512_fmadd_ps(_mm512_loadu_ps(l + 16), c1, _mm512_add_ps(s1, t1)));
            _mm512_storeu_ps(m, x0), _mm512_storeu_ps(m + 16, x1);
            for (int d = 0; d < hd; d++) {
                _mm512_storeu_ps(Ot + d * 32, _mm512_mul_ps(_mm512_loadu_ps(Ot + d * 32), c0));
                _mm512_storeu_ps(Ot + d * 32 + 16, _mm512_mul_ps(_mm512_loadu_ps(Ot + d * 32 + 16), c1));
            }
            strips32(hd, bk, Vt + kb * hd, FT_BK, ST, Ot, 32, 1);
        }
    }
    for (int b = 0; b < nsb; b++) {
        const float *Ot = blocks + b * sbf + (size_t)hd * 32, *l = Ot + (size_t)hd * 32 + 32;
        const int nb = CK_MIN(32, nq - b * 32);
        for (int j = 0; j < nb; j++) {
            const float inv = 1.0f / l[j];
            float *o = out + (int64_t)(b * 32 + j) * ldo;
            for (int d = 0; d < hd; d++) o[d] = Ot[d * 32 + j] * inv;
        }
    }
}

/* B already packed by ck_sgemm_pack_b: no packing per call. */
__attribute__((target("arch=x86-64-v4")))
static void sgemm_packed_avx512(int M, int N, int K, const float *A, int64_t lda, const float *Bp,
                                int64_t panel_stride, float beta, float *C, int64_t ldc) {
    if (M <= 0 || N <= 0) return;
    for (int k0 = 0; k0 < K; k0 += KC) {
        const int kc = K - k0 < KC ? K - k0 : KC;
        const int acc = beta != 0.0f || k0 > 0;
        for (int j0 = 0; j0 < N; j0 += NR) {
            const int nr = N - j0 < NR ? N - j0 : NR;
            const float *P = Bp + (int64_t)(j0 / NR) * panel_stride + (int64_t)k0 * NR;
            int i0 = 0;
            for (; i0 + 14 <= M; i0 += 14)
                kernel(14, kc, A + (int64_t)i0 * lda + k0, lda, P, C + (int64_t)i0 * ldc + j0, ldc, nr, acc);
            const int rest = M - i0;
            const float *a = A + (int64_t)i0 * lda + k0;
            float *c = C + (int64_t)i0 * ldc + j0;
            TAILS(14)
        }
    }
}

static int has_avx512(void) {
    return __builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512bw") &&
           __builtin_cpu_supports("avx512dq") && __builtin_cpu_supports("avx512vl");
}

void ck_sgemm_variant(int variant, int b_trans, int M, int N, int K, const float *A, int64_t lda,
                      const float *B, int64_t ldb, float beta, float *C, int64_t ldc) {
    if (variant == 0 && has_avx512())
        sgemm_avx512(b_trans, M, N, K, A, lda, B, ldb, beta, C, ldc);
    else
        sgemm_narrow(b_trans, M, N, K, A, lda, B, ldb, beta, C, ldc);
}

/* ------------------------------------------------ 3x3 convolution rows
 * Channels-last implicit GEMM with all nine taps accumulated in registers:
 * a 14-pixel x 32-channel tile starts from the bias, sweeps K = taps x Cin
 * (the A rows of a tap are the same pixels shifted by (kx - 1) * dil) and is
 * stored once. A GEMM per tap (conv_taps_generic, below) reads and writes
 * the output tile nine times and packs the tap's weights on every call. */

static void conv_taps_generic(int variant, const float *in, int S, int64_t row0, int64_t nrows, int Cin, int d,
                              int64_t y, int xa, int xb, const float *wp, int Cout, const float *bias, float *dst);

/* C[mr x nr] = bias + sum over the valid tap rows and the three kx taps.
 * rows[r]: input row pointer at the strip's first pixel, tap row ky[r]. */
static inline __attribute__((always_inline)) void conv_kernel(const int mr, int nrow, const float *const rows[3],
                                                              const int ky[3], int64_t dC, int Cin,
                                                              const float *P, const float *bias, float *C,
                                                              int ldc, int nr) {
    v16 c0[MR_MAX], c1[MR_MAX];
    v16 b0i, b1i;
    {
        float t[NR] = {0};
        for (int j = 0; j < nr; j++) t[j] = bias[j];
        b0i = loadu(t), b1i = loadu(t + 16);
    }
    for (int i = 0; i < mr; i++) c0[i] = b0i, c1[i] = b1i;
    for (int r = 0; r < nrow; r++)
        for (int kx = 0; kx < 3; kx++) {
            const float *Pk = P + (int64_t)(ky[r] * 3 + kx) * Cin * NR;
            const float *a[MR_MAX];
            for (int i = 0; i < mr; i++) a[i] = rows[r] + (kx - 1) * dC + (int64_t)i * Cin;
            for (int k = 0; k < Cin; k++) {
                const v16 b0 = loadu(Pk + (int64_t)k * NR), b1 = loadu(Pk + (int64_t)k * NR + 16);
                for (int i = 0; i < mr; i++) {
                    const float x = a[i][k];
                    const v16 av = {x, x, x, x, x, x, x, x, x, x, x, x, x, x, x, x};
                    c0[i] += av * b0;
                    c1[i] += av * b1;
                }
            }
        }
    for (int i = 0; i < mr; i++) store_row(C + (int64_t)i * ldc, c0[i], c1[i], nr, 0);
}

__attribute__((target("arch=x86-64-v4")))
static void conv_row_avx512(const float *in, int S, int64_t row0, int64_t nrows, int Cin, int d, int64_t y, int x0, int n, const float *wp,
                            int Cout, const float *bias, float *dst) {
    /* pixels whose three kx taps are all inside the row */
    const int xa = CK_MIN(CK_MAX(x0, d), x0 + n), xb = CK_MAX(CK_MIN(x0 + n, S - d), xa);
    conv_taps_generic(0, in, S, row0, nrows, Cin, d, y, x0, xa, wp, Cout, bias, dst);
    conv_taps_generic(0, in, S, row0, nrows, Cin, d, y, xb, x0 + n, wp, Cout, bias, dst + (int64_t)(xb - x0) * Cout);
    if (xb <= xa) return;
    const float *rows[3];
    int ky[3], nrow = 0;
    for (int k = 0; k < 3; k++) {
        const int64_t iy = y + (k - 1) * d;
        if (iy < row0 || iy >= row0 + nrows) continue;
        rows[nrow] = in + ((iy - row0) * S + xa) * Cin;
        ky[nrow++] = k;
    }
    const int64_t dC = (int64_t)d * Cin;
    for (int p = 0; p * NR < Cout; p++) {
        const int nr = CK_MIN(NR, Cout - p * NR);
        const float *P = wp + (int64_t)p * 9 * Cin * NR;
        float *c = dst + (int64_t)(xa - x0) * Cout + p * NR;
        const float *rr[3] = {rows[0], rows[1], rows[2]};
        int i0 = 0;
        const int M = xb - xa;
        for (; i0 + 14 <= M; i0 += 14) {
            conv_kernel(14, nrow, rr, ky, dC, Cin, P, bias + p * NR, c, Cout, nr);
            for (int r = 0; r < nrow; r++) rr[r] += 14 * (int64_t)Cin;
            c += 14 * (int64_t)Cout;
        }
#define CONV_TAIL(m) case m: conv_kernel(m, nrow, rr, ky, dC, Cin, P, bias + p * NR, c, Cout, nr); break;
        switch (M - i0) {
            CONV_TAIL(13) CONV_TAIL(12) CONV_TAIL(11) CONV_TAIL(10) CONV_TAIL(9) CONV_TAIL(8) CONV_TAIL(7)
            CONV_TAIL(6) CONV_TAIL(5) CONV_TAIL(4) CONV_TAIL(3) CONV_TAIL(2) CONV_TAIL(1)
        default: break;
        }
#undef CONV_TAIL
    }
}

void ck_sgemm_packed(int variant, int M, int N, int K, const float *A, int64_t lda, const float *Bp,
                     int64_t panel_stride, float beta, float *C, int64_t ldc) {
    if (variant == 0 && has_avx512()) {
        sgemm_packed_avx512(M, N, K, A, lda, Bp, panel_stride, beta, C, ldc);
        return;
    }
    if (M <= 0 || N <= 0) return;
    for (int j0 = 0; j0 < N; j0 += NR) /* each panel is a plain [K][32] B */
        sgemm_narrow(0, M, CK_MIN(NR, N - j0), K, A, lda, Bp + (int64_t)(j0 / NR) * panel_stride, NR, beta,
                     C + j0, ldc);
}

int ck_flash_t_available(int variant) { return variant == 0 && has_avx512(); }

void ck_flash_t(const float *q, int nq, const float *K, const float *Vt, int64_t nk, int hd, float *out,
                int64_t ldo, float *work) {
    flash_t_avx512(q, nq, K, Vt, nk, hd, out, ldo, work);
}

void ck_sgemm(int b_trans, int M, int N, int K, float alpha, const float *A, int64_t lda, const float *B,
              int64_t ldb, float beta, float *C, int64_t ldc) {
    (void)alpha; /* always 1 in ckey */
    ck_sgemm_variant(0, b_trans, M, N, K, A, lda, B, ldb, beta, C, ldc);
}

#endif

/* ------------------------------------------- 3x3 convolution, any build */

static void conv_gemm(int variant, int M, int N, int K, const float *A, int64_t lda, const float *B, int64_t ldb,
                      float beta, float *C, int64_t ldc) {
#ifdef CK_HAVE_OPENBLAS
    (void)variant;
    ck_sgemm(0, M, N, K, 1.0f, A, lda, B, ldb, beta, C, ldc);
#else
    ck_sgemm_variant(variant, 0, M, N, K, A, lda, B, ldb, beta, C, ldc);
#endif
}

size_t ck_conv3x3_packed_floats(int Cout, int Cin) { return (size_t)((Cout + NR - 1) / NR) * 9 * Cin * NR; }

void ck_conv3x3_pack(int Cout, int Cin, const float *W, float *wp) {
    const int np = (Cout + NR - 1) / NR;
    for (int p = 0; p < np; p++)
        for (int t = 0; t < 9; t++)
            for (int ci = 0; ci < Cin; ci++) {
                float *d = wp + (((int64_t)p * 9 + t) * Cin + ci) * NR;
                for (int j = 0; j < NR; j++) {
                    const int co = p * NR + j;
                    d[j] = co < Cout ? W[((int64_t)co * Cin + ci) * 9 + t] : 0.0f;
                }
            }
}

/* Pixels [xa, xb) of output row y, one tap GEMM at a time (taps that fall
 * outside the image skip the pixels they would read there: zero padding).
 * Used by the narrow path and for the border pixels of the fast one. */
static void conv_taps_generic(int variant, const float *in, int S, int64_t row0, int64_t nrows, int Cin, int d,
                              int64_t y, int xa, int xb, const float *wp, int Cout, const float *bias, float *dst) {
    if (xb <= xa) return;
    for (int i = xa; i < xb; i++)
        for (int j = 0; j < Cout; j++) dst[(int64_t)(i - xa) * Cout + j] = bias[j];
    const int np = (Cout + NR - 1) / NR;
    for (int ky = 0; ky < 3; ky++) {
        const int64_t iy = y + (ky - 1) * d;
        if (iy < row0 || iy >= row0 + nrows) continue;
        for (int kx = 0; kx < 3; kx++) {
            const int off = (kx - 1) * d;
            const int a = CK_MAX(xa, -off), b = CK_MIN(xb, S - off);
            if (b <= a) continue;
            for (int p = 0; p < np; p++)
                conv_gemm(variant, b - a, CK_MIN(NR, Cout - p * NR), Cin, in + ((iy - row0) * S + a + off) * Cin, Cin,
                                 wp + ((int64_t)p * 9 + ky * 3 + kx) * Cin * NR, NR, 1.0f,
                                 dst + (int64_t)(a - xa) * Cout + p * NR, Cout);
        }
    }
}

void ck_conv3x3_row(int variant, const float *in, int S, int64_t row0, int64_t nrows, int Cin, int dil, int64_t y, int x0,
                    int n, const float *wp, int Cout, const float *bias, float *dst) {
#ifndef CK_HAVE_OPENBLAS
    if (variant == 0 && has_avx512()) {
        conv_row_avx512(in, S, row0, nrows, Cin, dil, y, x0, n, wp, Cout, bias, dst);
        return;
    }
#endif
        conv_taps_generic(1, in, S, row0, nrows, Cin, dil, y, x0, x0 + n, wp, Cout, bias, dst);
}

size_t ck_flash_t_work(int nq, int hd) { return (size_t)CK_FLASH_T_BK * 32 + (size_t)((nq + 31) / 32) * (2 * (size_t)hd * 32 + 64); }

void ck_sgemm_pack_b(int b_trans, int N, int K, const float *B, int64_t ldb, float *Bp, int64_t panel_stride) {
    for (int j0 = 0; j0 < N; j0 += NR) {
        float *P = Bp + (int64_t)(j0 / NR) * panel_stride;
        const int nr = CK_MIN(NR, N - j0);
        if (b_trans) {
            for (int j = 0; j < NR; j++) {
                if (j >= nr) {
                    for (int k = 0; k < K; k++) P[(int64_t)k * NR + j] = 0.0f;
                    continue;
                }
                const float *src = B + (int64_t)(j0 + j) * ldb;
                for (int k = 0; k < K; k++) P[(int64_t)k * NR + j] = src[k];
            }
        } else {
            for (int k = 0; k < K; k++) {
                const float *src = B + (int64_t)k * ldb + j0;
                for (int j = 0; j < NR; j++) P[(int64_t)k * NR + j] = j < nr ? src[j] : 0.0f;
            }
        }
    }
}
