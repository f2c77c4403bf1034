// LayerNorm and the cuBLAS-backed linear layer, for every storage type
// (dtype.cuh). fp32 sessions keep TF32 off, so results track the CPU backend
// to fp32 rounding; 16-bit sessions run cuBLAS on tensor cores with fp32
// accumulation.
#include <cublas_v2.h>
#include <cuda_runtime.h>
#include <stdio.h>
#include <stdlib.h>

#include "cuda/ck_cuda.h"
#include "cuda/dtype.cuh"

extern "C" {

static ckey_status fail_cuda(ckey_error *err, cudaError_t e, const char *what) {
    if (err) {
        snprintf(err->message, sizeof err->message, "CUDA: %s: %s", what, cudaGetErrorString(e));
        err->status = CKEY_ERR_DEVICE;
    }
    return CKEY_ERR_DEVICE;
}

static ckey_status fail_blas(ckey_error *err, cublasStatus_t s, const char *what) {
    if (err) {
        snprintf(err->message, sizeof err->message, "cuBLAS: %s: status %d", what, (int)s);
        err->status = CKEY_ERR_DEVICE;
    }
    return CKEY_ERR_DEVICE;
}

}  // extern "C"

// ---- LayerNorm: one warp per row; two passes over the row held in registers
// would need C <= 32*K; rows here are <= 3584 floats, read twice from L1/L2.
template <typename T>
__global__ void layernorm_kernel(const T *__restrict__ x, int64_t N, int C, const float *__restrict__ g,
                                 const float *__restrict__ b, T *__restrict__ y) {
    const int64_t row = (int64_t)blockIdx.x * (blockDim.x / 32) + threadIdx.x / 32;
    const int lane = threadIdx.x % 32;
    if (row >= N) return;
    const T *xr = x + row * C;
    float s = 0.f;
    for (int i = lane; i < C; i += 32) s += ck_ld(xr + i);
    for (int o = 16; o > 0; o >>= 1) s += __shfl_xor_sync(0xffffffffu, s, o);
    const float mean = s / (float)C;
    float q = 0.f;
    for (int i = lane; i < C; i += 32) {
        const float d = ck_ld(xr + i) - mean;
        q += d * d;
    }
    for (int o = 16; o > 0; o >>= 1) q += __shfl_xor_sync(0xffffffffu, q, o);
    const float rstd = rsqrtf(q / (float)C + 1e-6f);
    T *yr = y + row * C;
    for (int i = lane; i < C; i += 32) ck_st(yr + i, (ck_ld(xr + i) - mean) * rstd * g[i] + b[i]);
}

template <typename T>
__global__ void add_bias_kernel(T *__restrict__ y, int64_t N, int out, int ldy, const float *__restrict__ b) {
    const int64_t i = (int64_t)blockIdx.x * blockDim.x + threadIdx.x;
    if (i >= N * out) return;
    T *p = y + (i / out) * ldy + i % out;
    ck_st(p, ck_ld(p) + b[i % out]);
}

template <typename S, typename D>
__global__ void convert_kernel(const S *__restrict__ src, D *__restrict__ dst, int64_t n) {
    const int64_t i = (int64_t)blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) ck_st(dst + i, ck_ld(src + i));
}

extern "C" {

ckey_status ck_cuda_layernorm_t(const void *x, int64_t N, int C, const float *g, const float *b, void *y,
                                ck_dtype dt, void *stream, ckey_error *err) {
    if (N <= 0) return CKEY_OK;
    const int warps = 8;
    const unsigned blocks = (unsigned)((N + warps - 1) / warps);
    CK_DISPATCH(dt, (layernorm_kernel<T><<<blocks, warps * 32, 0, (cudaStream_t)stream>>>((const T *)x, N, C, g, b,
                                                                                           (T *)y)));
    cudaError_t e = cudaGetLastError();
    return e == cudaSuccess ? CKEY_OK : fail_cuda(err, e, "layernorm launch");
}

ckey_status ck_cuda_layernorm(const float *x, int64_t N, int C, const float *g, const float *b, float *y,
                              void *stream, ckey_error *err) {
    return ck_cuda_layernorm_t(x, N, C, g, b, y, CK_F32, stream, err);
}

ckey_status ck_cuda_convert(const void *src, ck_dtype sdt, void *dst, ck_dtype ddt, int64_t n, void *stream,
                            ckey_error *err) {
    if (n <= 0) return CKEY_OK;
    const unsigned blocks = (unsigned)((n + 255) / 256);
    cudaStream_t st = (cudaStream_t)stream;
    if (sdt == CK_F32) {
        CK_DISPATCH(ddt, (convert_kernel<float, T><<<blocks, 256, 0, st>>>((const float *)src, (T *)dst, n)));
    } else if (ddt == CK_F32) {
        CK_DISPATCH(sdt, (convert_kernel<T, float><<<blocks, 256, 0, st>>>((const T *)src, (float *)dst, n)));
    } else {
        if (err) {
            snprintf(err->message, sizeof err->message, "convert: 16-bit to 16-bit is not supported");
            err->status = CKEY_ERR_INVALID_ARG;
        }
        return CKEY_ERR_INVALID_ARG;
    }
    cudaError_t e = cudaGetLastError();
    return e == cudaSuccess ? CKEY_OK : fail_cuda(err, e, "convert launch");
}

struct ck_cublas {
    cublasHandle_t h;
};

ckey_status ck_cublas_create(ck_cublas **out, ckey_error *err) {
    *out = NULL;
    ck_cublas *c = (ck_cublas *)calloc(1, sizeof *c);
    if (!c) {
        if (err) {
            snprintf(err->message, sizeof err->message, "cuBLAS: out of memory");
            err->status = CKEY_ERR_NOMEM;
        }
        return CKEY_ERR_NOMEM;
    }
    cublasStatus_t s = cublasCreate(&c->h);
    if (s != CUBLAS_STATUS_SUCCESS) {
        free(c);
        return fail_blas(err, s, "cublasCreate");
    }
    cublasSetMathMode(c->h, CUBLAS_DEFAULT_MATH); /* fp32 GEMMs stay fp32 (no TF32) */
    *out = c;
    return CKEY_OK;
}

ckey_status ck_cublas_set_workspace(ck_cublas *c, void *ws, size_t bytes, ckey_error *err) {
    cublasStatus_t s = cublasSetWorkspace(c->h, ws, bytes);
    return s == CUBLAS_STATUS_SUCCESS ? CKEY_OK : fail_blas(err, s, "cublasSetWorkspace");
}

void ck_cublas_free(ck_cublas *c) {
    if (!c) return;
    cublasDestroy(c->h);
    free(c);
}

// Row-major y[N, out] = x[N, in] . W^T is column-major y^T[out, N] = W[out, in] . x^T:
// with W stored [out, in] row-major = column-major [in, out], that is op(A) = A^T.
ckey_status ck_cuda_linear_t(ck_cublas *c, const void *x, int64_t N, int in, const void *W, const float *b, void *y,
                             int out, int accumulate, ck_dtype dt, void *stream, ckey_error *err) {
    return ck_cuda_linear_ld_t(c, x, N, in, W, b, y, out, out, accumulate, dt, stream, err);
}

ckey_status ck_cuda_linear_ld_t(ck_cublas *c, const void *x, int64_t N, int in, const void *W, const float *b, void *y,
                                int out, int ldy, int accumulate, ck_dtype dt, void *stream, ckey_error *err) {
    if (N <= 0) return CKEY_OK;
    if (N > 0x7fffffff) {
        if (err) {
            snprintf(err->message, sizeof err->message, "linear: %lld rows exceed cuBLAS's int range", (long long)N);
            err->status = CKEY_ERR_INVALID_ARG;
        }
        return CKEY_ERR_INVALID_ARG;
    }
    cublasSetStream(c->h, (cudaStream_t)stream);
    const float one = 1.f, beta = accumulate ? 1.f : 0.f;
    cublasStatus_t s;
    if (dt == CK_F32) {
        s = cublasSgemm(c->h, CUBLAS_OP_T, CUBLAS_OP_N, out, (int)N, in, &one, (const float *)W, in, (const float *)x,
                        in, &beta, (float *)y, ldy);
    } else {
        const cudaDataType_t ty = dt == CK_F16 ? CUDA_R_16F : CUDA_R_16BF;
        s = cublasGemmEx(c->h, CUBLAS_OP_T, CUBLAS_OP_N, out, (int)N, in, &one, W, ty, in, x, ty, in, &beta, y, ty, ldy,
                         CUBLAS_COMPUTE_32F, CUBLAS_GEMM_DEFAULT);
    }
    if (s != CUBLAS_STATUS_SUCCESS) return fail_blas(err, s, dt == CK_F32 ? "cublasSgemm" : "cublasGemmEx");
    if (b) {
        const int64_t total = N * out;
        CK_DISPATCH(dt, (add_bias_kernel<T><<<(unsigned)((total + 255) / 256), 256, 0, (cudaStream_t)stream>>>(
                            (T *)y, N, out, ldy, b)));
        cudaError_t e = cudaGetLastError();
        if (e != cudaSuccess) return fail_cuda(err, e, "bias launch");
    }
    return CKEY_OK;
}

ckey_status ck_cuda_linear(ck_cublas *c, const float *x, int64_t N, int in, const float *W, const float *b,
                           float *y, int out, int accumulate, void *stream, ckey_error *err) {
    return ck_cuda_linear_t(c, x, N, in, W, b, y, out, accumulate, CK_F32, stream, err);
}

}  // extern "C"
