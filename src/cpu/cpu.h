#ifndef CK_CPU_H
#define CK_CPU_H

#include "backend/backend.h"

/* The CPU backend: its interface (backend.c), its op table (ops.c), and its
 * state (thread pool + scratch). */
extern const ck_backend_i ck_cpu_backend;
extern const ck_ops ck_cpu_ops;

typedef struct ck_cpu {
    ck_backend base;
    ck_pool *pool;
    int threads;
    float *scratch;          /* threads * per_thread floats, then shared */
    size_t per_thread;       /* floats per thread */
    float *shared;           /* in-place conv bands */
    size_t shared_floats;
    float *mr_pairs;         /* memory_read with usage: HW x top_k (position, weight) pairs */
    size_t mr_pairs_floats;
    /* the lifecycle's (backend.c; a test may build ops-only state without them) */
    ck_backend_config cfg;
    const ck_config *mcfg;   /* the model's */
    ck_weights w;            /* the model's fp32 weights, pos_embed resized to S/4 when needed
                              * (the stored grid under ck_schedule.pos_streamed) */
    float *pos_resized;
    void *arena;
    ck_plan *plan;
    /* for tests: called on each map of every conv2d's output once it is
     * written ([rows, C] floats, rows ld apart); NULL: none */
    void (*conv_out)(void *user, float *out, int64_t rows, int C, int64_t ld);
    void *conv_out_user;
} ck_cpu;

/* Sets a CPU backend's conv2d output hook (ck_cpu.conv_out); a test's way
 * to perturb every conv's output as another summation order would. */
void ck_cpu_set_conv_out(ck_backend *be, void (*f)(void *user, float *out, int64_t rows, int C, int64_t ld),
                         void *user);

/* Scratch the CPU ops need for this config and S (per thread and shared). */
void ck_cpu_scratch_floats(const ck_config *c, int S, int threads, const ck_schedule *sched, size_t *per_thread,
                           size_t *shared);

/* Row-major C[M, N] = A[M, K] . op(B) (beta == 0) or C += A . op(B) (beta
 * != 0); op(B) = B^T when b_trans (B stored [N, K]), else B [K, N]. alpha is
 * ignored (always 1 in ckey). Single-threaded and reentrant: parallelism is
 * the caller's (each pool thread multiplies its own tiles). */
void ck_sgemm(int b_trans, int M, int N, int K, float alpha, const float *A, int64_t lda,
              const float *B, int64_t ldb, float beta, float *C, int64_t ldc);

/* Test hook: variant 0 is the path ck_sgemm takes (AVX-512 where present),
 * variant 1 forces the narrow path (AVX2 or baseline clone). */
void ck_sgemm_variant(int variant, int b_trans, int M, int N, int K, const float *A, int64_t lda,
                      const float *B, int64_t ldb, float beta, float *C, int64_t ldc);

/* B packed once for many products: panels of 32 columns of op(B), each
 * [K][32] (zero padded), panel p at Bp + p * panel_stride (>= K * 32).
 * ck_sgemm_packed is ck_sgemm(op(B)) with beta 0 or 1 on such a B. */
void ck_sgemm_pack_b(int b_trans, int N, int K, const float *B, int64_t ldb, float *Bp, int64_t panel_stride);
void ck_sgemm_packed(int variant, int M, int N, int K, const float *A, int64_t lda, const float *Bp,
                     int64_t panel_stride, float beta, float *C, int64_t ldc);

/* Online-softmax attention of nq queries q [nq, hd] (already scaled, in
 * log2 units: the softmax is exp2) over nk keys K [nk, hd] (rows) and values
 * transposed in tiles of CK_FLASH_T_BK keys: tile t is [hd][CK_FLASH_T_BK] at
 * Vt + t * hd * CK_FLASH_T_BK (the last one partly used). out [nq, hd], rows
 * ldo apart. work: ck_flash_t_work(nq, hd) floats. Only where
 * ck_flash_t_available(variant) (the AVX-512 build of ckey's kernel). */
enum { CK_FLASH_T_BK = 252 };
int ck_flash_t_available(int variant);
size_t ck_flash_t_work(int nq, int hd);
void ck_flash_t(const float *q, int nq, const float *K, const float *Vt, int64_t nk, int hd, float *out,
                int64_t ldo, float *work);

/* 3x3 convolution (padding = dilation) of a channels-last map in [nr, S, Cin]
 * holding image rows [r0, r0 + nr) of an S x S map (the whole map: 0, S; rows
 * outside read as zero) for output row y, pixels [x0, x0 + n):
 * dst[n, Cout] = bias + conv. wp holds
 * the weights W[Cout][Cin][3][3] as packed by ck_conv3x3_pack
 * (ck_conv3x3_packed_floats of them). variant as for ck_sgemm_variant. */
size_t ck_conv3x3_packed_floats(int Cout, int Cin);
void ck_conv3x3_pack(int Cout, int Cin, const float *W, float *wp);
void ck_conv3x3_row(int variant, const float *in, int S, int64_t r0, int64_t nr, int Cin, int dil, int64_t y, int x0,
                    int n, const float *wp, int Cout, const float *bias, float *dst);

/* Cutie's memory read (backend/ops.h memory_read) on the pool, each thread in
 * its slice of be->scratch, which must hold ck_cpu_memory_read_floats(N,
 * CK, top_k) floats (be->per_thread; a smaller slice aborts). That count
 * depends on CK and top_k only, on N only through whether top_k < N, never
 * on HW. ms and qe may be NULL. */
size_t ck_cpu_memory_read_floats(int64_t N, int CK, int top_k);
/* With usage (NULL: none; top_k > 0), the read keeps min(top_k, N) per
 * query and needs be->mr_pairs of ck_cpu_memory_read_pairs_floats(HW,
 * top_k) floats (less aborts). */
size_t ck_cpu_memory_read_pairs_floats(int64_t HW, int top_k);
void ck_cpu_memory_read(ck_cpu *be, const float *mk, const float *ms, const float *qk, const float *qe, int64_t N,
                        int64_t HW, int CK, const float *mv, int C, int top_k, float *out, float *usage);

/* Cutie's ops (backend/ops.h, the Cutie block; src/cpu/cutie-ops.c). The
 * workspace: threads slices of the per-thread floats `needs` asks for, then
 * the packed conv weights. */
size_t ck_cpu_ops_workspace_bytes(const ck_backend_config *bc, const ck_op_needs *needs);
void ck_cpu_set_workspace(ck_cpu *be, void *scratch, const ck_op_needs *needs);
void ck_cpu_conv2d(ck_cpu *be, const ck_conv2d *g, const float *in, const float *W, const float *b, float *out);
void ck_cpu_maxpool3x3s2(ck_cpu *be, const float *in, int n, int H, int W, int C, float *out);
void ck_cpu_avgpool(ck_cpu *be, const float *in, int n, int H, int W, int C, int f, float *out, int out_ld);
void ck_cpu_resize_bilinear(ck_cpu *be, const float *in, int n, int H, int W, int C, const float *add, int Ho,
                            int Wo, float *out);
void ck_cpu_layer_norm(ck_cpu *be, const float *x, int64_t N, int C, const float *g, const float *b, float eps,
                       float *y);
void ck_cpu_mha(ck_cpu *be, int n, const float *q, int64_t Nq, int q_ld, const float *k, const float *v, int64_t Nk,
                int kv_ld, int D, int heads, const uint8_t *mask, float *out);
void ck_cpu_unary(ck_cpu *be, int kind, const float *x, int64_t n, float *y);
void ck_cpu_add(ck_cpu *be, const float *a, int64_t na, const float *b, int64_t nb, float *y);
void ck_cpu_copy_channels(ck_cpu *be, const float *src, int64_t n, int C, int src_ld, float *dst, int dst_ld);
void ck_cpu_pad_normalize(ck_cpu *be, const float *src, int Hi, int Wi, int pad_t, int pad_l, int Hp, int Wp,
                          float *dst);
void ck_cpu_masks_with_others(ck_cpu *be, const float *m, int O, int64_t HW, float *dst, int dst_ld);
void ck_cpu_gru_update(ck_cpu *be, float *h, const float *v, int64_t HW, int D);
void ck_cpu_channel_attention(ck_cpu *be, const float *x, int n, int64_t HW, int C, const float *w, int k,
                              const float *r, float *out);
void ck_cpu_aggregate(ck_cpu *be, const float *logits, int O, int64_t HW, float *out);
void ck_cpu_softmax_planes(ck_cpu *be, float *x, int C, int64_t HW);
void ck_cpu_object_attn_mask(ck_cpu *be, const float *logits, int O, int64_t HW, int Q, uint8_t *mask);
void ck_cpu_summary_pool(ck_cpu *be, const float *m, const float *feat, const float *logits, int64_t HW, int E,
                         int Q, float *out);
void ck_cpu_summary_values(ck_cpu *be, const float *in, int64_t n, int E, float *out);
void ck_cpu_pos_encoding(ck_cpu *be, int H, int W, int dim, float scale, float temperature, float *out);

/* Make the GEMM library single-threaded per call (our pool parallelizes). */
void ck_gemm_init(void);

/* exp(x) for x <= 88 (vectorizable, ~1 ulp); in place over n values. */
void ck_vexp(float *x, int64_t n);

#endif
