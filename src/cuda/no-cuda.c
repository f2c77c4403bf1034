/* Builds without CUDA: the CUDA entry points report "no device". */
#ifndef CK_HAVE_CUDA
#pragma GCC diagnostic ignored "-Wunused-parameter"
#include <math.h>
#include <stdio.h>

#include "cuda/kernels.h"

static ckey_status no_cuda(ckey_error *err) {
    if (err) {
        snprintf(err->message, sizeof err->message, "this build of ckey has no CUDA support");
        err->status = CKEY_ERR_DEVICE;
    }
    return CKEY_ERR_DEVICE;
}

int ck_cuda_device_count(void) { return 0; }
int64_t ck_cuda_used_bytes(void) { return -1; }
float ck_cuda_gelu_fast_host(float v) {
    (void)v;
    return NAN;
}
ckey_status ck_cuda_device_info(int index, ckey_device_info *info, ckey_error *err) {
    (void)index, (void)info;
    return no_cuda(err);
}
ckey_status ck_cuda_layernorm(const float *x, int64_t N, int C, const float *g, const float *b, float *y,
                              void *stream, ckey_error *err) {
    (void)x, (void)N, (void)C, (void)g, (void)b, (void)y, (void)stream;
    return no_cuda(err);
}
ckey_status ck_cublas_create(ck_cublas **out, ckey_error *err) {
    *out = NULL;
    return no_cuda(err);
}
void ck_cublas_free(ck_cublas *h) { (void)h; }
void ck_cutie_gemm_free(ck_cutie_gemm *g) { (void)g; }
ckey_status ck_cuda_linear(ck_cublas *h, const float *x, int64_t N, int in, const float *W, const float *b,
                           float *y, int out, int accumulate, void *stream, ckey_error *err) {
    (void)h, (void)x, (void)N, (void)in, (void)W, (void)b, (void)y, (void)out, (void)accumulate, (void)stream;
    return no_cuda(err);
}
ckey_status ck_cuda_attention(const float *qkv, int64_t N, int D, int heads, int qs, float *out, void *stream,
                              ckey_error *err) {
    (void)qkv, (void)N, (void)D, (void)heads, (void)qs, (void)out, (void)stream;
    return no_cuda(err);
}
#define NOCUDA_BODY { return no_cuda(err); }
ckey_status ck_cuda_reroll(const float *tok, int H, int W, int k, int C, float *feat, void *st, ckey_error *err) NOCUDA_BODY
ckey_status ck_cuda_maxpool_bias(const float *x, int64_t Nq, int C, int qs, const float *b, float *y, void *st,
                                 ckey_error *err) NOCUDA_BODY
ckey_status ck_cuda_bias_gelu(float *h, int64_t rows, int C, const float *b, void *st, ckey_error *err) NOCUDA_BODY
ckey_status ck_cuda_refiner_input(const float *x, const float *logits, int S, float *rin, void *st, ckey_error *err) NOCUDA_BODY
ckey_status ck_cuda_finalize(const float *logits, int S, float *out, void *st, ckey_error *err) NOCUDA_BODY
ckey_status ck_cuda_affine_relu(float *x, const float *y, int C, int64_t HW, const float *a, const float *b, void *st,
                                ckey_error *err) NOCUDA_BODY
ckey_status ck_cuda_pointwise(const float *x, int C, int64_t HW, const float *W, const float *b, float mult,
                              float *out, int Cout, void *st, ckey_error *err) NOCUDA_BODY
ckey_status ck_cuda_conv3x3(const float *in, int image_in, int Cin, int S, int dil, const float *W, const float *bias,
                            float *out, int Cout, int groups, double *stats, void *st, ckey_error *err) NOCUDA_BODY
ckey_status ck_cuda_groupnorm_affine(const double *stats, int groups, int C, int64_t HW, const float *gamma,
                                     const float *beta, float *a, float *b, void *st, ckey_error *err) NOCUDA_BODY
ckey_status ck_cuda_patch_embed(const float *x, int S, int Cin, int K, int stride, int pad, const float *w,
                                const float *b, const float *pos, int E, int k, float *tok, void *st,
                                ckey_error *err) NOCUDA_BODY
ckey_status ck_cuda_window_attention(const float *qkv, int64_t nw, int T, int qs, int Do, int heads, float *out,
                                     void *st, ckey_error *err) NOCUDA_BODY
ckey_status ck_cuda_decoder_epilogue(const float *h, int64_t p0, int64_t n, int G, int D2, const float *P2, int H2,
                                     const float *P3, int H3, const float *P4, int H4, const float *b1,
                                     const float *cls_w, const float *cls_b, float *logits, void *st, ckey_error *err) NOCUDA_BODY
ckey_status ck_cuda_memset(void *p, int value, size_t bytes, ckey_error *err) NOCUDA_BODY
ckey_status ck_cuda_attention_tc(const void *qkv, int64_t N, int D, int heads, int qs, void *out, ck_dtype dt,
                                 void *stream, ckey_error *err) NOCUDA_BODY
ckey_status ck_cuda_window_attention_tc(const void *qkv, int64_t nw, int T, int qs, int Do, int heads, void *out,
                                        ck_dtype dt, void *stream, ckey_error *err) NOCUDA_BODY
ckey_status ck_cuda_attention_wgmma(const void *qkv, int64_t N, int D, int heads, int qs, void *out, ck_dtype dt,
                                    void *stream, ckey_error *err) NOCUDA_BODY
ckey_status ck_cuda_attention_wgmma_form(const void *qkv, int64_t N, int D, int heads, int qs, void *out, ck_dtype dt,
                                         ck_attn_wgmma_form form, void *stream, ckey_error *err) NOCUDA_BODY
int ck_cuda_wgmma_ok(void) { return 0; }
int ck_cuda_linear_gelu_ok(int64_t M, int K, int N, ck_dtype dt) {
    (void)M, (void)K, (void)N, (void)dt;
    return 0;
}
ckey_status ck_cuda_linear_gelu(const void *x, int64_t M, int K, const void *W, const float *b, void *y, int N,
                                ck_dtype dt, void *stream, ckey_error *err) NOCUDA_BODY
ckey_status ck_cuda_linear_wgmma(const void *x, int64_t M, int K, const void *W, const void *b, void *y, int N,
                                 int mode, ck_dtype dt, void *stream, ckey_error *err) NOCUDA_BODY
ckey_status ck_cuda_linear_gelu_ln(const void *x, int64_t M, int K, const void *W, const float *b,
                                   const float *colsum, const float *stats, void *y, int N, int mode, ck_dtype dt,
                                   void *stream, ckey_error *err) NOCUDA_BODY
ckey_status ck_cuda_conv3x3_tc(const void *in, int Cin, int S, int dil, const void *W, const float *bias,
                               const float *in_a, const float *in_b, void *out, int Cout, int groups, double *stats,
                               ck_dtype dt, void *stream, ckey_error *err) NOCUDA_BODY
ckey_status ck_cuda_conv3x3_tc_rows(const void *in, int Cin, int S, int dil, const void *W, const float *bias,
                                    const float *in_a, const float *in_b, void *out, int y0, int y1, int Cout,
                                    int groups, double *stats, ck_dtype dt, void *stream, ckey_error *err) NOCUDA_BODY
ckey_status ck_cuda_conv3x3_wgmma_rows(const void *in, int S, int dil, const void *W, const float *bias,
                                       const float *in_a, const float *in_b, void *out, int y0, int y1, int groups,
                                       double *stats, ck_dtype dt, void *stream, ckey_error *err) NOCUDA_BODY
ckey_status ck_cuda_conv3x3_wgmma_inplace(const void *in, int S, int dil, const void *W, const float *bias,
                                          const float *in_a, const float *in_b, int band_rows, int shift_rows,
                                          int *sync, int64_t sync_cap, int groups, double *stats, ck_dtype dt,
                                          void *stream, ckey_error *err) NOCUDA_BODY
size_t ck_conv3x3_tc_weight_bytes(int Cout, int Cin) { return (size_t)9 * Cout * Cin * 2; }
ckey_status ck_conv3x3_tc_pack_weights_host(const float *W_oihw, int Cout, int Cin, ck_dtype dt, void *dst) {
    return CKEY_ERR_DEVICE;
}
ckey_status ck_cuda_conv3x3_tc_pack_weights(const float *W_oihw_host, int Cout, int Cin, ck_dtype dt,
                                            void *W_dev_out, size_t *bytes, ckey_error *err) NOCUDA_BODY
ckey_status ck_cuda_affine_relu_t(void *x, const void *y, int C, int64_t HW, const float *a, const float *b,
                                  ck_dtype dt, void *st, ckey_error *err) NOCUDA_BODY
ckey_status ck_cuda_residual_relu_t(void *x, const void *y, int C, int64_t HW, const float *a, const float *b,
                                    const float *pre_a, const float *pre_b, ck_dtype dt, void *st,
                                    ckey_error *err) NOCUDA_BODY
ckey_status ck_cuda_pointwise_t(const void *x, const void *y, const float *ra, const float *rb, int C, int64_t HW,
                                const float *W, const float *b, float mult, float *out, int Cout, ck_dtype dt, void *st,
                                ckey_error *err) NOCUDA_BODY
ckey_status ck_cuda_malloc(void **p, size_t bytes, ckey_error *err) {
    (void)bytes;
    *p = NULL;
    return no_cuda(err);
}
void ck_cuda_free(void *p) { (void)p; }
ckey_status ck_cuda_copy(void *dst, const void *src, size_t bytes, int to_device, ckey_error *err) {
    (void)dst, (void)src, (void)bytes, (void)to_device;
    return no_cuda(err);
}
ckey_status ck_cuda_sync(ckey_error *err) { return no_cuda(err); }
void ck_cuda_profile(int on) { (void)on; }
ckey_status ck_cuda_set_device(int index, ckey_error *err) NOCUDA_BODY
ckey_status ck_cuda_copy_d2d(void *dst, const void *src, size_t bytes, void *stream, ckey_error *err) NOCUDA_BODY
ckey_status ck_cuda_convert(const void *src, ck_dtype sdt, void *dst, ck_dtype ddt, int64_t n, void *stream,
                            ckey_error *err) NOCUDA_BODY
int ck_cuda_refiner_tc_ok(int R, ck_dtype dt) { return 0; }
ckey_status ck_cuda_resize_pass(int kind, int channels, int in_h, int in_w, int out_h, int out_w, int taps,
                                const float *table_w, const float *table_h, const float *src, float *dst, void *stream,
                                ckey_error *err) NOCUDA_BODY
ckey_status ck_cuda_unpack_pixels(const void *in, ck_pixel_type type, int C, int64_t n, float *rgb, int rgb_ch,
                                  float *hint, int hint_ch, void *stream, ckey_error *err) NOCUDA_BODY
ckey_status ck_cuda_srgb(float *x, int64_t n, int to_linear, void *stream, ckey_error *err) NOCUDA_BODY
ckey_status ck_cuda_to_half(const float *in, uint16_t *out, int64_t n, void *stream, ckey_error *err) NOCUDA_BODY
ckey_status ck_cuda_to_u8_trunc(const float *in, uint8_t *out, int64_t n, void *stream, ckey_error *err) NOCUDA_BODY
ckey_status ck_cuda_threshold_mask(const float *alpha, int64_t n, float t, uint8_t *mask, void *stream,
                                   ckey_error *err) NOCUDA_BODY
ckey_status ck_cuda_components_filter(uint8_t *mask, int h, int w, int64_t min_area, int32_t *labels, uint32_t *area,
                                      void *stream, ckey_error *err) NOCUDA_BODY
ckey_status ck_cuda_matte_finish(const uint8_t *mask, int h, int w, int radius, const int32_t *dx, int nx,
                                 const uint32_t *kx, int ny, const uint32_t *ky, const float *alpha, uint8_t *mask_tmp,
                                 int32_t *dist, uint32_t *sums, float *out, void *stream, ckey_error *err) NOCUDA_BODY
ckey_status ck_cuda_post_pixels(const float *fg, const float *pa, int h, int w, double despill_strength, float bg0,
                                float bg1, int checker, float *processed, float *comp, void *stream,
                                ckey_error *err) NOCUDA_BODY
ckey_status ck_cuda_imagenet_normalize(float *x, int64_t plane, const float mean[3], const float std[3], void *stream,
                                       ckey_error *err) NOCUDA_BODY
ckey_status ck_cuda_memset_async(void *p, int value, size_t bytes, void *stream, ckey_error *err) NOCUDA_BODY
ckey_status ck_cuda_copy2d_d2d(void *dst, size_t dpitch, const void *src, size_t spitch, size_t width, size_t height,
                               void *stream, ckey_error *err) NOCUDA_BODY
ckey_status ck_cuda_copy_async(void *dst, const void *src, size_t bytes, int to_device, void *stream,
                               ckey_error *err) NOCUDA_BODY
ckey_status ck_cuda_host_alloc(void **p, size_t bytes, ckey_error *err) NOCUDA_BODY
void ck_cuda_host_free(void *p) {}
ckey_status ck_cuda_stream_create(void **stream, ckey_error *err) NOCUDA_BODY
ckey_status ck_cuda_stream_create_high(void **stream, ckey_error *err) NOCUDA_BODY
void ck_cuda_stream_destroy(void *stream) {}
ckey_status ck_cuda_stream_sync(void *stream, ckey_error *err) NOCUDA_BODY
ckey_status ck_cuda_capture_begin(void *stream, ckey_error *err) NOCUDA_BODY
ckey_status ck_cuda_capture_end(void *stream, void **exec, size_t *nodes, ckey_error *err) NOCUDA_BODY
ckey_status ck_cuda_graph_launch(void *exec, void *stream, ckey_error *err) NOCUDA_BODY
void ck_cuda_graph_free(void *exec) {}
ckey_status ck_cuda_event_create(void **ev, ckey_error *err) NOCUDA_BODY
ckey_status ck_cuda_event_create_blocking(void **ev, ckey_error *err) NOCUDA_BODY
ckey_status ck_cuda_wait(void *ev, void *stream, ckey_error *err) NOCUDA_BODY
void ck_cuda_event_destroy(void *ev) {}
ckey_status ck_cuda_event_record(void *ev, void *stream, ckey_error *err) NOCUDA_BODY
double ck_cuda_event_seconds(void *ev0, void *ev1) { return 0.0; }
ckey_status ck_cublas_set_workspace(ck_cublas *h, void *ws, size_t bytes, ckey_error *err) NOCUDA_BODY
void ck_cublas_plan_counts(const ck_cublas *h, int bias_only, int *fused, int *fallback) { *fused = *fallback = 0; }
void ck_cublas_set_lt(ck_cublas *h, int on) {}
int ck_cublas_last_fused(const ck_cublas *h) { return 0; }
int ck_cublas_tuned(const ck_cublas *h) { return 0; }
void ck_cublas_set_tuned(ck_cublas *h, int on) {}
int ck_cublas_last_pick(const ck_cublas *h) { return 0; }
ckey_status ck_cuda_layernorm_t(const void *x, int64_t N, int C, const float *g, const float *b, void *y,
                                ck_dtype dt, void *stream, ckey_error *err) NOCUDA_BODY
ckey_status ck_cuda_layernorm_stats_t(const void *x, int64_t N, int C, float *stats, ck_dtype dt, void *stream,
                                      ckey_error *err) NOCUDA_BODY
ckey_status ck_cuda_linear_ld_t(ck_cublas *h, const void *x, int64_t N, int in, const void *W, const void *b, void *y,
                                int out, int ldy, int accumulate, ck_dtype dt, void *stream, ckey_error *err) NOCUDA_BODY
ckey_status ck_cuda_linear_ldw_t(ck_cublas *h, const void *x, int64_t N, int in, const void *W, int ldw, const void *b,
                                 void *y, int out, int ldy, int accumulate, ck_dtype dt, void *stream,
                                 ckey_error *err) NOCUDA_BODY
ckey_status ck_cuda_gemm_tf32(ck_cublas *h, const float *x, int64_t N, int in, const float *W, float *y, int out,
                              int ldy, int accumulate, void *stream, ckey_error *err) NOCUDA_BODY
ckey_status ck_cuda_gemm_f16_f32(ck_cublas *h, const void *x, int64_t N, int in, const void *W, float *y, int out,
                                 int ldy, int accumulate, void *stream, ckey_error *err) NOCUDA_BODY
ckey_status ck_cuda_bias_gelu_t(void *h, int64_t rows, int C, const float *b, ck_dtype dt, void *st,
                                ckey_error *err) NOCUDA_BODY
size_t ck_cuda_memory_read_bytes(const struct ck_op_needs *needs) {
    (void)needs;
    return 0;
}
ckey_status ck_cuda_memory_read(const float *mk, const float *ms, const float *qk, const float *qe, int64_t N,
                                int64_t HW, int CK, const float *mv, int C, int top_k, float *out, float *usage,
                                int precision, void *scratch, size_t scratch_bytes, void *stream,
                                ckey_error *err) NOCUDA_BODY
#else
typedef int ck_cuda_none_unused; /* ISO C forbids an empty translation unit */
#endif
