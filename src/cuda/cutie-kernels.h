/* The CUDA kernels of Cutie's ops (src/cuda/cutie-ops.cu), callable from C;
 * src/cuda/cutie-ops.c composes them (and cuBLAS) into the ck_ops entries
 * of backend/ops.h's Cutie block, whose comments define each op. All fp32,
 * all pointers device memory, `stream` a cudaStream_t. Only in CUDA builds. */
#ifndef CK_CUDA_CUTIE_KERNELS_H
#define CK_CUDA_CUTIE_KERNELS_H

#include <stddef.h>
#include <stdint.h>

#include "ckey.h"

#ifdef __cplusplus
extern "C" {
#endif

/* col [np, k*k*Cin] = the taps of output pixels p0 .. p0+np-1 (raster order
 * over Ho x Wo, Wo given) of one H x W map (pixels in_ld apart), zero
 * outside, relu(in) when relu_in. */
ckey_status ck_cu_im2col(const float *in, int H, int W, int Cin, int in_ld, int k, int stride, int pad, int dil,
                         int relu_in, int Wo, int64_t p0, int64_t np, float *col, void *stream, ckey_error *err);
/* The same with col fp16 (each value rounded to nearest). */
ckey_status ck_cu_im2col_h(const float *in, int H, int W, int Cin, int in_ld, int k, int stride, int pad, int dil,
                           int relu_in, int Wo, int64_t p0, int64_t np, void *col, void *stream, ckey_error *err);
/* out [r * ld + j] = relu?(out + b [j]) over np rows of C (b NULL: none). */
ckey_status ck_cu_bias_relu(float *out, int64_t np, int C, int ld, const float *b, int relu, void *stream,
                            ckey_error *err);
ckey_status ck_cu_maxpool3x3s2(const float *in, int n, int H, int W, int C, float *out, void *stream, ckey_error *err);
ckey_status ck_cu_resize_bilinear(const float *in, int n, int H, int W, int C, const float *add, int Ho, int Wo,
                                  float *out, void *stream, ckey_error *err);
ckey_status ck_cu_avgpool(const float *in, int n, int H, int W, int C, int f, float *out, int out_ld, void *stream,
                          ckey_error *err);
ckey_status ck_cu_layer_norm(const float *x, int64_t N, int C, const float *g, const float *b, float eps, float *y,
                             void *stream, ckey_error *err);
/* mask: bytes (1: blocked) or NULL. part: room for part_floats floats of
 * partial results, which lets few queries split their keys over several
 * warps (NULL: no split). Fails (CKEY_ERR_UNSUPPORTED) for a head over 256
 * dims. */
ckey_status ck_cu_mha(int n, const float *q, int64_t Nq, int q_ld, const float *k, const float *v, int64_t Nk,
                      int kv_ld, int D, int heads, const uint8_t *mask, float *out, float *part, size_t part_floats,
                      void *stream, ckey_error *err);
ckey_status ck_cu_unary(int kind, const float *x, int64_t n, float *y, void *stream, ckey_error *err);
ckey_status ck_cu_add(const float *a, int64_t na, const float *b, int64_t nb, float *y, void *stream, ckey_error *err);
/* Rows in order where dst lies before an overlapping src (rows moving down). */
ckey_status ck_cu_pad_normalize(const float *src, int Hi, int Wi, int pad_t, int pad_l, int Hp, int Wp, float *dst,
                                void *stream, ckey_error *err);
ckey_status ck_cu_copy_channels(const float *src, int64_t n, int C, int src_ld, float *dst, int dst_ld, void *stream,
                                ckey_error *err);
ckey_status ck_cu_masks_with_others(const float *m, int O, int64_t HW, float *dst, int dst_ld, void *stream,
                                    ckey_error *err);
ckey_status ck_cu_gru_update(float *h, const float *v, int64_t HW, int D, void *stream, ckey_error *err);
/* means: n * C floats of device scratch; part: part_doubles doubles for
 * partial sums over row ranges (NULL: one block a channel group and map). */
ckey_status ck_cu_channel_attention(const float *x, int n, int64_t HW, int C, const float *w, int k, const float *r,
                                    float *out, float *means, double *part, size_t part_doubles, void *stream,
                                    ckey_error *err);
ckey_status ck_cu_aggregate(const float *logits, int O, int64_t HW, float *out, void *stream, ckey_error *err);
ckey_status ck_cu_softmax_planes(float *x, int C, int64_t HW, void *stream, ckey_error *err);
/* counts: O ints of device scratch. */
ckey_status ck_cu_object_attn_mask(const float *logits, int O, int64_t HW, int Q, uint8_t *mask, int *counts,
                                   void *stream, ckey_error *err);
ckey_status ck_cu_summary_pool(const float *m, const float *feat, const float *logits, int64_t HW, int E, int Q,
                               float *out, void *stream, ckey_error *err);
ckey_status ck_cu_summary_values(const float *in, int64_t n, int E, float *out, void *stream, ckey_error *err);
ckey_status ck_cu_pos_encoding(int H, int W, int dim, float scale, float temperature, float *out, void *stream,
                               ckey_error *err);

#ifdef __cplusplus
}
#endif

#endif
