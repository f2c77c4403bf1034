/* Builds without CUDA: the CUDA entry points report "no device". */
#ifndef CK_HAVE_CUDA
#include <stdio.h>

#include "cuda/ck_cuda.h"

static ckey_status no_cuda(ckey_error *err) {
    if (err) {
        snprintf(err->message, sizeof err->message, "this build of ckey has no CUDA support");
        err->status = CKEY_ERR_DEVICE;
    }
    return CKEY_ERR_DEVICE;
}

int ck_cuda_device_count(void) { return 0; }
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
#else
typedef int ck_cuda_none_unused; /* ISO C forbids an empty translation unit */
#endif
