/* The CUDA side of libckey, callable from C. Everything here degrades to
 * "no device" when the build has no CUDA (CK_HAVE_CUDA undefined) or the
 * machine has no driver or GPU. */
#ifndef CK_CUDA_H
#define CK_CUDA_H

#include <stddef.h>
#include <stdint.h>

#include "ckey.h"
#include "core/dtype.h"

#ifdef __cplusplus
extern "C" {
#endif

/* Storage type of device activations and matrix weights (ck_dtype: CK_F32,
 * CK_F16 or CK_BF16). Math is fp32 throughout; the 16-bit types store 16
 * bits and accumulate in fp32. */

/* Number of usable CUDA devices (0 without driver, GPU or CUDA build). */
int ck_cuda_device_count(void);

/* Device memory in use on the current device, all processes' (cudaMemGetInfo's
 * total less free; -1: unknown). For tracing what a session takes. */
int64_t ck_cuda_used_bytes(void);

/* Make `index` the calling thread's current device. */
ckey_status ck_cuda_set_device(int index, ckey_error *err);

/* Name, memory and compute capability of device `index`. */
ckey_status ck_cuda_device_info(int index, ckey_device_info *info, ckey_error *err);

/* ---- op kernels (the CUDA op table grows from these; see docs/design.md).
 * All pointers are device memory; `stream` is a cudaStream_t (NULL: default). */

/* y [N, C] = layernorm(x) * g + b, eps 1e-6; one warp per row. */
ckey_status ck_cuda_layernorm(const float *x, int64_t N, int C, const float *g, const float *b, float *y,
                              void *stream, ckey_error *err);

/* y [N, out] (+)= x [N, in] . W^T + b with cuBLAS (fp32, no TF32). */
typedef struct ck_cublas ck_cublas;
ckey_status ck_cublas_create(ck_cublas **out, ckey_error *err);
void ck_cublas_free(ck_cublas *h);
ckey_status ck_cuda_linear(ck_cublas *h, const float *x, int64_t N, int in, const float *W, const float *b,
                           float *y, int out, int accumulate, void *stream, ckey_error *err);

/* Global attention, q max-pooled by qs: qkv [N, 3*D] (q | k | v, head-major
 * inside each), out [N/qs, D]; online softmax, no score matrix. */
ckey_status ck_cuda_attention(const float *qkv, int64_t N, int D, int heads, int qs, float *out, void *stream,
                              ckey_error *err);

/* Tensor-core versions (src/cuda/attention-mma.cu): qkv and out in storage
 * type dt (CK_F16 or CK_BF16), fp32 accumulation and softmax; same layouts
 * and pooling as ck_cuda_attention / ck_cuda_window_attention. head_dim
 * 16, 32, 56 or 64; qkv 16-byte aligned. */
ckey_status ck_cuda_attention_tc(const void *qkv, int64_t N, int D, int heads, int qs, void *out, ck_dtype dt,
                                 void *stream, ckey_error *err);
ckey_status ck_cuda_window_attention_tc(const void *qkv, int64_t nw, int T, int qs, int Do, int heads, void *out,
                                        ck_dtype dt, void *stream, ckey_error *err);
/* The same with out's rows ldo elements apart (one head's columns of a wider out). */
ckey_status ck_cuda_window_attention_tc_ld(const void *qkv, int64_t nw, int T, int qs, int Do, int heads, void *out,
                                           int ldo, ck_dtype dt, void *stream, ckey_error *err);

/* Hopper version of ck_cuda_attention_tc (src/cuda/attention-wgmma.cu,
 * wgmma.mma_async, built for sm_90a only): same arguments, layouts and
 * pooling; head_dim 56 only (else CKEY_ERR_UNSUPPORTED); dt CK_F16 or
 * CK_BF16. Call it only where ck_cuda_wgmma_ok() says so. */
ckey_status ck_cuda_attention_wgmma(const void *qkv, int64_t N, int D, int heads, int qs, void *out, ck_dtype dt,
                                    void *stream, ckey_error *err);
/* 1 if the current device is compute capability 9.0 (sm_90a code runs). */
int ck_cuda_wgmma_ok(void);
/* The forms ck_cuda_attention_wgmma takes (attention-wgmma.cu says why each). */
typedef enum {
    CK_ATTN_WGMMA_AUTO,    /* ck_cuda_attention_wgmma's choice among the three below */
    CK_ATTN_WGMMA_TMA_128, /* K / V by TMA, 4 warpgroups a CTA, 128-key tiles: where its CTAs fill every SM */
    CK_ATTN_WGMMA_TMA_64,  /* K / V by TMA, 2 warpgroups a CTA, 64-key tiles: smaller grids */
    CK_ATTN_WGMMA_NO_TMA,  /* K / V by cp.async: where the driver has no tensor-map encoder */
    CK_ATTN_WGMMA_FORMS    /* the number of forms */
} ck_attn_wgmma_form;
/* ck_cuda_attention_wgmma in a given form, so that tests reach each one
 * (CKEY_ERR_INVALID_ARG for a form outside the enum; a TMA form where the
 * driver has no tensor-map encoder fails with CKEY_ERR_DEVICE). */
ckey_status ck_cuda_attention_wgmma_form(const void *qkv, int64_t N, int D, int heads, int qs, void *out, ck_dtype dt,
                                         ck_attn_wgmma_form form, void *stream, ckey_error *err);

/* y [M, N] = gelu(x [M, K] . W [N, K]^T + b) in one Hopper kernel (src/cuda/linear-gelu-wgmma.cu,
 * sm_90a): fp16 / bf16 x, W and y, fp32 b and accumulation, the erf GELU of
 * ck_cuda_bias_gelu_t on the fp32 sum. ck_cuda_linear_gelu_ok says whether
 * the shape, type and device are supported (K and N multiples of 8); x, W, y
 * 16-byte aligned, b 8-byte. */
int ck_cuda_linear_gelu_ok(int64_t M, int K, int N, ck_dtype dt);
ckey_status ck_cuda_linear_gelu(const void *x, int64_t M, int K, const void *W, const float *b, void *y, int N,
                                ck_dtype dt, void *stream, ckey_error *err);
/* The same kernel with the GELU (mode CK_LINEAR_GELU, fp32 b) or bias only (mode 0: fp32 b;
 * CK_LINEAR_BIAS16: b in dt, as the linears' biases are on the device). The
 * tile width (128 or 256 output columns) is the kernel's pick for the shape
 * unless CK_LINEAR_TILE_N128 / _N256 asks for one, and so is the clustering
 * unless CK_LINEAR_CLUSTER1 / 2 asks (tests, timings). */
enum {
    CK_LINEAR_GELU = 1,
    CK_LINEAR_BIAS16 = 2,
    CK_LINEAR_TILE_N128 = 4,
    CK_LINEAR_TILE_N256 = 8,
    CK_LINEAR_CLUSTER1 = 16, /* CTAs on their own (no W multicast) */
    CK_LINEAR_CLUSTER2 = 32, /* clusters of two CTAs sharing W tiles */
    /* timings only (fp16, GELU, no clusters; y is not written): the K loop without the epilogue, or
     * the loads alone, so that a test can say what the kernel's time is made of */
    CK_LINEAR_PROBE_MAINLOOP = 64,
    CK_LINEAR_PROBE_LOADS = 128
};
ckey_status ck_cuda_linear_wgmma(const void *x, int64_t M, int K, const void *W, const void *b, void *y, int N,
                                 int mode, ck_dtype dt, void *stream, ckey_error *err);
/* The same kernel's GELU with the LayerNorm before it folded in (the LN fold,
 * src/model/ln-fold.h): y = gelu(rstd_r (x_r . W_c - mean_r colsum_c) + b_c)
 * for x un-normalized, W = W0 diag(g), b = b0 + W0 beta (fp32), colsum [N]
 * the row sums of the 16-bit W as stored, stats [M, 2] each row's mean and
 * 1 / sqrt(var + eps) (ck_cuda_layernorm_stats_t). mode: the tile and cluster
 * bits of ck_cuda_linear_wgmma. b, colsum, stats 8-byte aligned. */
ckey_status ck_cuda_linear_gelu_ln(const void *x, int64_t M, int K, const void *W, const float *b,
                                   const float *colsum, const float *stats, void *y, int N, int mode, ck_dtype dt,
                                   void *stream, ckey_error *err);

/* The rest of the op table's building blocks, on CUDA cores (src/cuda/encoder-ops.cu,
 * decoder-ops.cu, refiner-ops.cu). */
ckey_status ck_cuda_reroll(const float *tok, int H, int W, int k, int C, float *feat, void *st, ckey_error *err);
ckey_status ck_cuda_maxpool_bias(const float *x, int64_t Nq, int C, int qs, const float *b, float *y, void *st,
                                 ckey_error *err);
ckey_status ck_cuda_bias_gelu(float *h, int64_t rows, int C, const float *b, void *st, ckey_error *err);
/* The 16-bit paths' GELU (ck_gelu_fast, core/fastmath.h) built for the host, with
 * exact rcp and exp2 in place of the GPU's approximate ones: the tests check
 * its formula against erf on any machine. NAN in a build without CUDA. */
float ck_cuda_gelu_fast_host(float v);
ckey_status ck_cuda_refiner_input(const float *x, const float *logits, int S, float *rin, void *st, ckey_error *err);
ckey_status ck_cuda_finalize(const float *logits, int S, float *out, void *st, ckey_error *err);
/* ck_cuda_finalize on rows y0 .. y0 + n - 1: out [4, n, S] holds those rows. */
ckey_status ck_cuda_finalize_rows(const float *logits, int S, int y0, int n, float *out, void *st, ckey_error *err);
ckey_status ck_cuda_affine_relu(float *x, const float *y, int C, int64_t HW, const float *a, const float *b, void *st,
                                ckey_error *err);
ckey_status ck_cuda_pointwise(const float *x, int C, int64_t HW, const float *W, const float *b, float mult,
                              float *out, int Cout, void *st, ckey_error *err);
ckey_status ck_cuda_conv3x3(const float *in, int image_in, int Cin, int S, int dil, const float *W, const float *bias,
                            float *out, int Cout, int groups, double *stats, void *st, ckey_error *err);
ckey_status ck_cuda_groupnorm_affine(const double *stats, int groups, int C, int64_t HW, const float *gamma,
                                     const float *beta, float *a, float *b, void *st, ckey_error *err);
ckey_status ck_cuda_patch_embed(const float *x, int S, int Cin, int K, int stride, int pad, const float *w,
                                const float *b, const float *pos, int E, int k, float *tok, void *st,
                                ckey_error *err);
ckey_status ck_cuda_window_attention(const float *qkv, int64_t nw, int T, int qs, int Do, int heads, float *out,
                                     void *st, ckey_error *err);
ckey_status ck_cuda_decoder_epilogue(const float *h, int64_t p0, int64_t n, int G, int D2, const float *P2, int H2,
                                     const float *P3, int H3, const float *P4, int H4, const float *b1,
                                     const float *cls_w, const float *cls_b, float *logits, void *st, ckey_error *err);
ckey_status ck_cuda_memset(void *p, int value, size_t bytes, ckey_error *err);

/* The same ops for any storage type (dtype.cuh): activations `void *` of
 * type dt; weights of linear layers in dt; vectors, logits, outputs fp32.
 * The fp32 entry points above are these with dt = CK_F32. */
ckey_status ck_cuda_layernorm_t(const void *x, int64_t N, int C, const float *g, const float *b, void *y,
                                ck_dtype dt, void *stream, ckey_error *err);
/* The LayerNorm's row statistics only: stats [N, 2] = mean, 1 / sqrt(var + 1e-6) of x's rows (dt
 * storage), computed as ck_cuda_layernorm_t computes them; stats 8-byte aligned. */
ckey_status ck_cuda_layernorm_stats_t(const void *x, int64_t N, int C, float *stats, ck_dtype dt, void *stream,
                                      ckey_error *err);
/* y (+)= x W^T + b. The bias b (or NULL) is fp32 when dt is CK_F32, else in
 * dt like W (cuBLASLt fuses a bias of the output's type only): 16-bit
 * sessions keep 16-bit copies of these biases (session.c, upload_weights). */
ckey_status ck_cuda_linear_t(ck_cublas *h, const void *x, int64_t N, int in, const void *W, const void *b, void *y,
                             int out, int accumulate, ck_dtype dt, void *stream, ckey_error *err);
/* The same with y's rows ldy elements apart (a column block of a wider y). */
ckey_status ck_cuda_linear_ld_t(ck_cublas *h, const void *x, int64_t N, int in, const void *W, const void *b, void *y,
                                int out, int ldy, int accumulate, ck_dtype dt, void *stream, ckey_error *err);
/* The same with W's rows ldw elements apart (W [out, in] a column block of a wider matrix). */
ckey_status ck_cuda_linear_ldw_t(ck_cublas *h, const void *x, int64_t N, int in, const void *W, int ldw, const void *b,
                                 void *y, int out, int ldy, int accumulate, ck_dtype dt, void *stream,
                                 ckey_error *err);
/* y[N, out] (rows ldy apart; += with accumulate) = x[N, in] W[out, in]^T, all
 * fp32 in memory, on TF32 tensor cores: cublasGemmEx with
 * CUBLAS_COMPUTE_32F_FAST_TF32 given per call, so the handle's math mode
 * (no TF32: ck_cublas_create), which every other GEMM runs under, is left
 * as it is. No bias. */
ckey_status ck_cuda_gemm_tf32(ck_cublas *h, const float *x, int64_t N, int in, const float *W, float *y, int out,
                              int ldy, int accumulate, void *stream, ckey_error *err);
/* The same with x and W fp16 (y fp32, fp32 accumulation: cublasGemmEx,
 * CUBLAS_COMPUTE_32F). */
ckey_status ck_cuda_gemm_f16_f32(ck_cublas *h, const void *x, int64_t N, int in, const void *W, float *y, int out,
                                 int ldy, int accumulate, void *stream, ckey_error *err);
ckey_status ck_cuda_attention_t(const void *qkv, int64_t N, int D, int heads, int qs, void *out, ck_dtype dt,
                                void *stream, ckey_error *err);
ckey_status ck_cuda_convert(const void *src, ck_dtype sdt, void *dst, ck_dtype ddt, int64_t n, void *stream,
                            ckey_error *err);
ckey_status ck_cuda_reroll_t(const void *tok, int H, int W, int k, int C, void *feat, ck_dtype dt, void *st,
                             ckey_error *err);
/* Rows y0 .. y0+rows-1 of ck_cuda_reroll_t's feature map into feat [rows, W, C]. */
ckey_status ck_cuda_reroll_rows_t(const void *tok, int H, int W, int k, int C, int y0, int rows, void *feat,
                                  ck_dtype dt, void *st, ckey_error *err);
ckey_status ck_cuda_maxpool_bias_t(const void *x, int64_t Nq, int C, int qs, const float *b, void *y, ck_dtype dt,
                                   void *st, ckey_error *err);
ckey_status ck_cuda_bias_gelu_t(void *h, int64_t rows, int C, const float *b, ck_dtype dt, void *st, ckey_error *err);
ckey_status ck_cuda_refiner_input_t(const void *x, const float *logits, int S, void *rin, ck_dtype dt, void *st,
                                    ckey_error *err);
ckey_status ck_cuda_affine_relu_t(void *x, const void *y, int C, int64_t HW, const float *a, const float *b,
                                  ck_dtype dt, void *st, ckey_error *err);
/* The same with y, x' = relu(pre_a*x + pre_b) in place of x when pre_a is
 * given (the residual after a conv that applied a pending GroupNorm + ReLU
 * to x as it loaded): x = relu(x' + a*y + b). */
ckey_status ck_cuda_residual_relu_t(void *x, const void *y, int C, int64_t HW, const float *a, const float *b,
                                    const float *pre_a, const float *pre_b, ck_dtype dt, void *st, ckey_error *err);
/* out [Cout, HW] = mult * (W x' + b), x' = x or, with y, relu(x + ra*y + rb)
 * rounded to dt (the residual pass's value, not stored). */
ckey_status ck_cuda_pointwise_t(const void *x, const void *y, const float *ra, const float *rb, int C, int64_t HW,
                                const float *W, const float *b, float mult, float *out, int Cout, ck_dtype dt, void *st,
                                ckey_error *err);
ckey_status ck_cuda_conv3x3_t(const void *in, int image_in, int Cin, int S, int dil, const float *W,
                              const float *bias, void *out, int Cout, int groups, double *stats, ck_dtype dt, void *st,
                              ckey_error *err);
/* Output rows y0..y1-1 only, into out (row y0 first): the in-place refiner
 * conv runs band by band (backend.c). */
ckey_status ck_cuda_conv3x3_rows_t(const void *in, int image_in, int Cin, int S, int dil, const float *W,
                                   const float *bias, void *out, int y0, int y1, int Cout, int groups, double *stats,
                                   ck_dtype dt, void *st, ckey_error *err);
/* The same from a band of the input: in holds image rows in_r0 .. in_r0 +
 * in_n - 1 (image_in: planes [Cin, in_n, S]; else [in_n * S, Cin]), and every
 * in-image row the outputs read lies in it (the banded refiner). Each value
 * and each term of the sums is the whole-map call's. */
ckey_status ck_cuda_conv3x3_band_t(const void *in, int image_in, int Cin, int S, int dil, int in_r0, int in_n,
                                   const float *W, const float *bias, void *out, int y0, int y1, int Cout, int groups,
                                   double *stats, ck_dtype dt, void *st, ckey_error *err);
/* Rows y0 .. y0 + n - 1 of ck_cuda_refiner_input_t's rin into a band: planes
 * [7, n, S], or (packed) pixels [n * S, 8] with channel 7 zero, the layout
 * ck_cuda_refiner_stem_input makes of a whole map (16-byte aligned). */
ckey_status ck_cuda_refiner_input_rows_t(const void *x, int x_r0, int x_rows, const float *logits, int S, int y0, int n,
                                         int packed,
                                         void *rin, ck_dtype dt, void *st, ckey_error *err);
/* Rows y0 .. y0 + n - 1 of out [Cout, S, S] = mult * (W x + b), x a band
 * [n * S, C] holding those rows: ck_cuda_pointwise_t's values there. out
 * holds image rows out_r0 .. out_r0 + out_rows - 1 of each plane. */
ckey_status ck_cuda_pointwise_rows_t(const void *x, int C, int S, int y0, int n, const float *W, const float *b,
                                     float mult, float *out, int out_r0, int out_rows, int Cout, ck_dtype dt, void *st,
                                     ckey_error *err);
/* Patch embed as im2col + GEMM + epilogue (16-bit sessions), for output
 * pixels p0 .. p0+n-1 of the (S/stride)^2 grid: col [n, Cin*K*K]; then
 * tok[unroll(p)] = y[p - p0] + b + pos[p - pos_p0] with y [n, E] = col . W^T
 * (pos: from pixel pos_p0 on; 0: the whole grid). ck_cuda_patch_embed_t:
 * the direct conv for the same pixels. */
ckey_status ck_cuda_im2col_patch_t(const void *x, int S, int Cin, int K, int stride, int pad, int64_t p0, int64_t n,
                                   void *col, ck_dtype dt, void *st, ckey_error *err);
ckey_status ck_cuda_patch_epilogue_t(const void *y, int G, int E, int k, int64_t p0, int64_t n, const float *b,
                                     const float *pos, int64_t pos_p0, void *tok, ck_dtype dt, void *st,
                                     ckey_error *err);
ckey_status ck_cuda_patch_embed_t(const void *x, int S, int Cin, int K, int stride, int pad, const float *w,
                                  const float *b, const float *pos, int64_t pos_p0, int E, int k, int64_t p0,
                                  int64_t n, void *tok, ck_dtype dt, void *st, ckey_error *err);
/* The same on a band (ck_schedule.encoder_band): x holds image rows x_r0 ..
 * x_r0 + x_rows - 1 of each plane; the tokens are grid rows ty0 .. ty0 + th - 1
 * unrolled as a th x G image of their own (p0, n: pixels of the whole grid,
 * within those rows). */
typedef struct ck_patch_band {
    int x_r0, x_rows, ty0, th;
} ck_patch_band;
ckey_status ck_cuda_im2col_patch_band_t(const void *x, const ck_patch_band *pb, int S, int Cin, int K, int stride,
                                        int pad, int64_t p0, int64_t n, void *col, ck_dtype dt, void *st,
                                        ckey_error *err);
ckey_status ck_cuda_patch_epilogue_band_t(const void *y, const ck_patch_band *pb, int G, int E, int k, int64_t p0,
                                          int64_t n, const float *b, const float *pos, int64_t pos_p0, void *tok,
                                          ck_dtype dt, void *st, ckey_error *err);
ckey_status ck_cuda_patch_embed_band_t(const void *x, const ck_patch_band *pb, int S, int Cin, int K, int stride,
                                       int pad, const float *w, const float *b, const float *pos, int64_t pos_p0, int E,
                                       int k, int64_t p0, int64_t n, void *tok, ck_dtype dt, void *st,
                                       ckey_error *err);
/* dst [n, C] fp32: raster pixels p0 .. p0+n-1 of the pos-embed src [gs^2, C]
 * resized to gd x gd, ck_pos_embed_resize_rows's values to the bit
 * (ck_schedule.pos_streamed). */
ckey_status ck_cuda_pos_embed_rows(const float *src, int gs, int C, int gd, int64_t p0, int64_t n, float *dst,
                                   void *st, ckey_error *err);
ckey_status ck_cuda_window_attention_t(const void *qkv, int64_t nw, int Tw, int qs, int Do, int heads, void *out,
                                       ck_dtype dt, void *st, ckey_error *err);
/* The same with out's rows ldo elements apart (one head's columns of a wider out). */
ckey_status ck_cuda_window_attention_ld_t(const void *qkv, int64_t nw, int Tw, int qs, int Do, int heads, void *out,
                                          int ldo, ck_dtype dt, void *st, ckey_error *err);
ckey_status ck_cuda_decoder_epilogue_t(const void *h, int64_t p0, int64_t n, int G, int D2, const void *P2, int H2,
                                       const void *P3, int H3, const void *P4, int H4, const float *b1,
                                       const float *cls_w, const float *cls_b, float *logits, ck_dtype dt, void *st,
                                       ckey_error *err);

/* ---- the refiner on 16-bit storage (src/cuda/refiner-mma.cu) ----
 * Maps are channels-last [S*S, C] in storage dt (CK_F16 or CK_BF16), math fp32.
 *
 * 3x3 conv, padding = dilation, as implicit GEMM on tensor cores:
 * out [S*S, Cout] = conv(in' [S*S, Cin]) + bias, stored in dt, where
 * in' = relu(in_a[c] * in + in_b[c]) when in_a/in_b are given (a pending
 * GroupNorm + ReLU, fp32 math, rounded to dt once) and in' = in otherwise;
 * out-of-image taps contribute 0 (padding comes after the transform).
 * stats (may be NULL): per group g of Cout/groups channels, the sum and sum of
 * squares of the fp32 bias-added outputs (before rounding to dt, as the fp32
 * reference) are ADDED to stats[2g], stats[2g+1] (zero them first).
 * W: the weights packed by ck_cuda_conv3x3_tc_pack_weights. Cin in {8, 16,
 * 32, 48, 64} (8: the stem's 7 image channels padded, its taps paired in k16
 * steps), Cout in {16, 32, 48, 64} (else CKEY_ERR_UNSUPPORTED); dt F16 or
 * BF16; out must not alias in. */
ckey_status ck_cuda_conv3x3_tc(const void *in, int Cin, int S, int dil, const void *W, const float *bias,
                               const float *in_a, const float *in_b, void *out, int Cout, int groups, double *stats,
                               ck_dtype dt, void *stream, ckey_error *err);
/* The same for output rows y0 .. y1-1 only, stored from `out` on (row y0
 * first; in is the whole map): for the in-place refiner conv, band by band.
 * Each output value is bitwise the whole-image call's; stats get the band's
 * sums. */
ckey_status ck_cuda_conv3x3_tc_rows(const void *in, int Cin, int S, int dil, const void *W, const float *bias,
                                    const float *in_a, const float *in_b, void *out, int y0, int y1, int Cout,
                                    int groups, double *stats, ck_dtype dt, void *stream, ckey_error *err);
/* The same from a band of the input: in [in_n * S, Cin] holds image rows
 * in_r0 .. (every in-image row the outputs read among them; the banded
 * refiner). Values and statistics as the whole-map call's. */
ckey_status ck_cuda_conv3x3_tc_band(const void *in, int in_r0, int Cin, int S, int dil, const void *W,
                                    const float *bias, const float *in_a, const float *in_b, void *out, int y0, int y1,
                                    int Cout, int groups, double *stats, ck_dtype dt, void *stream, ckey_error *err);
/* Hopper version of ck_cuda_conv3x3_tc_rows for Cin = Cout = 64
 * (src/cuda/refiner-wgmma.cu, wgmma.mma_async, built for sm_90a only): same
 * arguments, weights, results and statistics; dilations up to 8 (shared
 * memory; CKEY_ERR_UNSUPPORTED above). Call it only where ck_cuda_wgmma_ok()
 * says so. */
ckey_status ck_cuda_conv3x3_wgmma_rows(const void *in, int S, int dil, const void *W, const float *bias,
                                       const float *in_a, const float *in_b, void *out, int y0, int y1, int groups,
                                       double *stats, ck_dtype dt, void *stream, ckey_error *err);
/* ... and from a band of the input, as ck_cuda_conv3x3_tc_band. */
ckey_status ck_cuda_conv3x3_wgmma_band(const void *in, int in_r0, int S, int dil, const void *W, const float *bias,
                                       const float *in_a, const float *in_b, void *out, int y0, int y1, int groups,
                                       double *stats, ck_dtype dt, void *stream, ckey_error *err);
/* The whole image in place in one launch: output row y lands shift_rows rows
 * before input row y (out = in - shift_rows rows, the margin allocated with
 * in), as the backend's banded conv2 does in bands of band_rows, but the
 * bands' items overlap: an item waits only for the earlier items that read
 * the rows it overwrites. band_rows and shift_rows multiples of dil, shift_rows
 * >= band_rows + dil; sync: a device buffer of sync_cap ints (zeroed by the
 * call, in stream order); CKEY_ERR_UNSUPPORTED when the items would not fit. */
ckey_status ck_cuda_conv3x3_wgmma_inplace(const void *in, int S, int dil, const void *W, const float *bias,
                                          const float *in_a, const float *in_b, int band_rows, int shift_rows,
                                          int *sync, int64_t sync_cap, int groups, double *stats, ck_dtype dt,
                                          void *stream, ckey_error *err);
/* Whether the refiner of width R runs on the tensor-core conv in storage dt
 * (16-bit, R in {16, 32, 48, 64}); then the stem's input goes through
 * ck_cuda_refiner_stem_input and its weights are padded to 8 channels. */
int ck_cuda_refiner_tc_ok(int R, ck_dtype dt);
/* rin [7, S, S] (image layout) -> map [S*S, 8], channel 7 zero. */
ckey_status ck_cuda_refiner_stem_input(const void *rin, int S, void *map, ck_dtype dt, void *stream, ckey_error *err);
/* Bytes of packed weights: 9 * Cout * Cin 16-bit values (Cin = 8: 5 * Cout * 16). */
size_t ck_conv3x3_tc_weight_bytes(int Cout, int Cin);
/* Pack a PyTorch conv weight [Cout, Cin, 3, 3] fp32 (host) into the layout
 * [tap = ky*3 + kx][Cout][Cin] in dt (round to nearest even), into host
 * memory `dst` of ck_conv3x3_tc_weight_bytes bytes; for Cin = 8
 * [step][Cout][16], element c of step j being channel c % 8 of tap
 * 2j + c / 8 (zero for tap 9). */
ckey_status ck_conv3x3_tc_pack_weights_host(const float *W_oihw, int Cout, int Cin, ck_dtype dt, void *dst);
/* The same, uploaded to device memory W_dev_out (synchronous copy). *bytes
 * (if not NULL) receives the size; W_dev_out NULL: size query only. */
ckey_status ck_cuda_conv3x3_tc_pack_weights(const float *W_oihw_host, int Cout, int Cin, ck_dtype dt,
                                            void *W_dev_out, size_t *bytes, ckey_error *err);

/* ---- Cutie's memory read (src/cuda/memory-read.cu): backend/ops.h
 * memory_read on device pointers, fp32 tensors, CK <= 128 (else
 * CKEY_ERR_UNSUPPORTED), queued on `stream`. ms, qe, usage may be NULL.
 * precision CKEY_PRECISION_FP16 or _BF16: the similarity's product on
 * tensor cores from operands rounded to that type as autocast rounds them
 * (qk, qe, mk; then 2 qe qk and mk^2 from the rounded values, rounded
 * again; sum qe qk^2 in fp32 from the rounded values), fp32 accumulation;
 * any other value: fp32 on CUDA cores. Top-k, softmax and readout are fp32
 * either way.
 * scratch: scratch_bytes of device memory, at least
 * ck_cuda_memory_read_bytes(needs) for needs covering this read (N <=
 * mr_n, top_k <= mr_top_k, usage only where mr_usage_hw > 0); it depends on
 * top_k alone (264 x 64 x (8 top_k + 4) bytes; 4 MiB at top_k 30; none for
 * top_k <= 0), plus N x 8 bytes for a read that gives usage (HW below
 * 2^23). usage is summed
 * in 64-bit fixed point (2^-40 units) with integer atomics: the same bits on
 * every run, within HW x 2^-41 of the exact sum of the fp32 weights. */
struct ck_op_needs;
size_t ck_cuda_memory_read_bytes(const struct ck_op_needs *needs);
ckey_status ck_cuda_memory_read(const float *mk, const float *ms, const float *qk, const float *qe, int64_t N,
                                int64_t HW, int CK, const float *mv, int C, int top_k, float *out, float *usage,
                                int precision, void *scratch, size_t scratch_bytes, void *stream, ckey_error *err);

/* Device memory helpers for tests and the future backend. */
ckey_status ck_cuda_malloc(void **p, size_t bytes, ckey_error *err);
void ck_cuda_free(void *p);
ckey_status ck_cuda_copy(void *dst, const void *src, size_t bytes, int to_device, ckey_error *err);
ckey_status ck_cuda_sync(ckey_error *err);
/* Opens (1) or closes (0) the range a profiler started with profiling off
 * records (ncu --profile-from-start off): the benchmarks mark one frame. */
void ck_cuda_profile(int on);
/* Streams, pinned host memory, async copies and CUDA graphs (device.cu). */
ckey_status ck_cuda_memset_async(void *p, int value, size_t bytes, void *stream, ckey_error *err);
/* height rows of width bytes, device to device, rows dpitch / spitch bytes
 * apart, queued on stream. */
ckey_status ck_cuda_copy2d_d2d(void *dst, size_t dpitch, const void *src, size_t spitch, size_t width, size_t height,
                               void *stream, ckey_error *err);
ckey_status ck_cuda_copy_async(void *dst, const void *src, size_t bytes, int to_device, void *stream,
                               ckey_error *err);
ckey_status ck_cuda_host_alloc(void **p, size_t bytes, ckey_error *err);
void ck_cuda_host_free(void *p);
ckey_status ck_cuda_stream_create(void **stream, ckey_error *err);
/* A stream of the device's greatest priority (a session's network: its blocks
 * are scheduled before those of the frame path's streams beside it). */
ckey_status ck_cuda_stream_create_high(void **stream, ckey_error *err);
void ck_cuda_stream_destroy(void *stream);
ckey_status ck_cuda_stream_sync(void *stream, ckey_error *err);
/* Record what is issued on `stream` until capture_end, then instantiate it. */
ckey_status ck_cuda_capture_begin(void *stream, ckey_error *err);
/* *nodes (may be NULL): the graph's node count. */
ckey_status ck_cuda_capture_end(void *stream, void **exec, size_t *nodes, ckey_error *err);
ckey_status ck_cuda_graph_launch(void *exec, void *stream, ckey_error *err);
void ck_cuda_graph_free(void *exec);
/* Events, to time work on a stream; seconds between two completed events (0 on failure). */
ckey_status ck_cuda_event_create(void **ev, ckey_error *err);
void ck_cuda_event_destroy(void *ev);
ckey_status ck_cuda_event_record(void *ev, void *stream, ckey_error *err);
double ck_cuda_event_seconds(void *ev0, void *ev1);
/* A wait without a spinning core: ck_cuda_wait records `ev` (made by
 * ck_cuda_event_create_blocking: cudaEventBlockingSync, no timing) on
 * `stream` and blocks the calling thread until the work queued before it
 * is done. cudaStreamSynchronize spins a core for the whole wait (the
 * default schedule while a process has fewer contexts than CPUs): the frame
 * path's model threads would take cores from the readers and writers. */
ckey_status ck_cuda_event_create_blocking(void **ev, ckey_error *err);
ckey_status ck_cuda_wait(void *ev, void *stream, ckey_error *err);
/* cuBLAS's workspace, so that GEMMs allocate nothing (needed in a capture). */
ckey_status ck_cublas_set_workspace(ck_cublas *h, void *ws, size_t bytes, ckey_error *err);
/* cuBLASLt plans cached so far for 16-bit linear layers (bias_only: those
 * with a bias only): *fused with an algorithm (one cublasLtMatmul, the bias
 * in its epilogue), *fallback without one (cuBLAS GEMM + bias pass). For
 * tests and profiling. */
void ck_cublas_plan_counts(const ck_cublas *h, int bias_only, int *fused, int *fallback);
/* on = 0: 16-bit linear layers skip cuBLASLt (every one takes the GEMM + bias
 * pass); for tests and A/B runs. */
void ck_cublas_set_lt(ck_cublas *h, int on);
/* Whether the last ck_cuda_linear_ld_t ran as one cublasLtMatmul (bias fused). */
int ck_cublas_last_fused(const ck_cublas *h);
/* The measured cuBLASLt picks (lt-tuned.h): whether a table is in use for
 * this GPU and cuBLASLt version; on = 0 / 1 turns it off / back on (cached
 * plans are dropped); the last linear's pick (its index in the heuristic's
 * ranking, 0 = the heuristic's first). For tests and A/B runs. */
int ck_cublas_tuned(const ck_cublas *h);
void ck_cublas_set_tuned(ck_cublas *h, int on);
int ck_cublas_last_pick(const ck_cublas *h);
/* Cutie's conv GEMMs with the bias and ReLU in cuBLASLt's epilogue
 * (cutie-gemm.cu): y[N, ldy] = relu?(x[N, K] W[Cout, K]^T (+ y) (+ b)), y
 * and b fp32; x and W fp32 (prec FP32: fp32 math; TF32: TF32 tensor cores)
 * or fp16 (FP16, fp32 accumulation). A plan per shape is made on the
 * shape's first call and kept (descriptors and the heuristic's first
 * algorithm); ws (ws_bytes, device) is cuBLASLt's workspace, in the
 * stream's order. *done = 0 when the shape has no cuBLASLt algorithm or the
 * table is full: the caller runs its GEMM and bias pass. */
typedef struct ck_cutie_gemm ck_cutie_gemm;
ckey_status ck_cutie_gemm_create(void *ws, size_t ws_bytes, ck_cutie_gemm **out, ckey_error *err);
void ck_cutie_gemm_free(ck_cutie_gemm *g);
ckey_status ck_cutie_gemm_run(ck_cutie_gemm *g, ckey_precision prec, const void *x, int64_t N, int K, const void *W,
                              const float *bias, int relu, float *y, int Cout, int ldy, int acc, void *stream, int *done,
                              ckey_error *err);
/* Device-to-device copy on a stream. */
ckey_status ck_cuda_copy_d2d(void *dst, const void *src, size_t bytes, void *stream, ckey_error *err);

/* ---- the frame path's pixel kernels (frame-ops.cu) */

/* One pass of a resize (src/pixel/resize.c's passes, the same tables in
 * device memory): AA rows / columns, plain bilinear (both tables), Lanczos-4
 * rows / columns, or a copy. Rows and columns as the CPU pass: rows read
 * [channels * in_h, in_w] and write width out_w; columns read
 * [channels, in_h, out_w] and write [channels, out_h, out_w]. */
enum { CK_CUDA_RESIZE_COPY, CK_CUDA_RESIZE_H, CK_CUDA_RESIZE_V, CK_CUDA_RESIZE_BILINEAR, CK_CUDA_RESIZE_L4_H,
       CK_CUDA_RESIZE_L4_V };
ckey_status ck_cuda_resize_pass(int kind, int channels, int in_h, int in_w, int out_h, int out_w, int taps,
                                const float *table_w, const float *table_h, const float *src, float *dst, void *stream,
                                ckey_error *err);
/* Interleaved pixels [n, C] -> float planes rgb [rgb_ch, n] (8-bit / 255, 16-bit
 * / 65535, half as is) and, when hint is not NULL, channel hint_ch into hint [n]. */
typedef enum ck_pixel_type { CK_PIXEL_U8, CK_PIXEL_U16, CK_PIXEL_F16 } ck_pixel_type;
ckey_status ck_cuda_unpack_pixels(const void *in, ck_pixel_type type, int C, int64_t n, float *rgb, int rgb_ch,
                                  float *hint, int hint_ch, void *stream, ckey_error *err);
/* The sRGB curves of src/pixel/color.c in place (to_linear: decode, else encode). */
ckey_status ck_cuda_srgb(float *x, int64_t n, int to_linear, void *stream, ckey_error *err);
/* The passes as their files store them (core/quantize.h): out[i] =
 * ck_half_of_bits(in[i]) (HALF as the EXR writer rounds floats), or
 * ck_trunc_u8(in[i]) (the Comp PNG's 8 bits). */
ckey_status ck_cuda_to_half(const float *in, uint16_t *out, int64_t n, void *stream, ckey_error *err);
ckey_status ck_cuda_to_u8_trunc(const float *in, uint8_t *out, int64_t n, void *stream, ckey_error *err);
/* x [3, plane] = (x - mean[c]) / std[c]. */
ckey_status ck_cuda_imagenet_normalize(float *x, int64_t plane, const float mean[3], const float std[3], void *stream,
                                       ckey_error *err);

/* Post-processing (src/pixel/post.c on the device). mask [n] = alpha > t ? 255 : 0. */
ckey_status ck_cuda_threshold_mask(const float *alpha, int64_t n, float t, uint8_t *mask, void *stream,
                                   ckey_error *err);
/* ck_components_filter(mask, h, w, 8, min_area) on the device (components.cu):
 * the 8-connected components of the non-0 pixels of mask [h, w], in place:
 * pixels of components of at least min_area pixels set to 255, all others 0.
 * Device scratch: labels [n] int32 and area [n] uint32 (n = h w < 2^31 - 2). */
ckey_status ck_cuda_components_filter(uint8_t *mask, int h, int w, int64_t min_area, int32_t *labels, uint32_t *area,
                                      void *stream, ckey_error *err);
/* The clean matte after its connected components are filtered: dilate the 0/255
 * mask [h, w] with the ellipse of half-widths dx[0 .. 2 radius] (radius <= 64;
 * 0: none), blur it with the Q8 taps kx[nx] along rows and ky[ny] along columns
 * (<= 64 each; 0: no blur), and out =
 * alpha * mask / 255, as ck_clean_matte. Device scratch: mask_tmp [n] bytes,
 * dist [n] and sums [n] 32-bit. */
ckey_status ck_cuda_matte_finish(const uint8_t *mask, int h, int w, int radius, const int32_t *dx, int nx,
                                 const uint32_t *kx, int ny, const uint32_t *ky, const float *alpha, uint8_t *mask_tmp,
                                 int32_t *dist, uint32_t *sums, float *out, void *stream, ckey_error *err);
/* ck_post_frame's per-pixel part: despill fg [3, h, w] (sRGB), to linear,
 * processed [3, h, w] = lin * pa, comp [3, h, w] (or NULL) over the checkerboard
 * of squares `checker` px with linear values bg0 (even) / bg1 (odd). */
ckey_status ck_cuda_post_pixels(const float *fg, const float *pa, int h, int w, double despill_strength, float bg0,
                                float bg1, int checker, float *processed, float *comp, void *stream, ckey_error *err);

#ifdef __cplusplus
}
#endif
#endif
