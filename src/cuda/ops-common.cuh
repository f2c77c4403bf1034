// What the network's CUDA-core op files (encoder-ops.cu, decoder-ops.cu,
// refiner-ops.cu) share: bilinear taps, 8-value loads and stores in any
// storage type, and their launchers' grid sizes, launch check and LAUNCH_T.
#ifndef CK_CUDA_OPS_COMMON_CUH
#define CK_CUDA_OPS_COMMON_CUH

#include <cuda_runtime.h>
#include <stdint.h>
#include <stdio.h>

#include "cuda/kernels.h"
#include "cuda/dtype.cuh"
#include "cuda/launch.cuh"

namespace {

// bilinear taps, align_corners=False (PyTorch upsample_bilinear2d)
struct Tap {
    int i0, i1;
    float l0, l1;
};
__device__ __forceinline__ Tap bilinear_tap(int dst, int in, int out) {
    const float scale = (float)in / (float)out;
    float src = scale * ((float)dst + 0.5f) - 0.5f;
    if (src < 0) src = 0;
    Tap t;
    t.i0 = (int)src;
    t.i1 = t.i0 + (t.i0 < in - 1 ? 1 : 0);
    t.l1 = src - (float)t.i0;
    t.l0 = 1.f - t.l1;
    return t;
}

// 16-bit pairs <-> float2, for 8-value loads and stores of either type
template <typename T> struct Half2Of;
template <> struct Half2Of<__half> {
    typedef __half2 P;
    static __device__ __forceinline__ float2 get(P p) { return __half22float2(p); }
    static __device__ __forceinline__ P make(float a, float b) { return __floats2half2_rn(a, b); }
};
template <> struct Half2Of<__nv_bfloat16> {
    typedef __nv_bfloat162 P;
    static __device__ __forceinline__ float2 get(P p) { return __bfloat1622float2(p); }
    static __device__ __forceinline__ P make(float a, float b) { return __floats2bfloat162_rn(a, b); }
};
template <typename T> __device__ __forceinline__ void ld8(const T *p, float (&v)[8]) {
    const uint4 u = *reinterpret_cast<const uint4 *>(p);
    const typename Half2Of<T>::P *h = reinterpret_cast<const typename Half2Of<T>::P *>(&u);
#pragma unroll
    for (int i = 0; i < 4; i++) {
        const float2 f = Half2Of<T>::get(h[i]);
        v[2 * i] = f.x, v[2 * i + 1] = f.y;
    }
}
__device__ __forceinline__ void ld8(const float *p, float (&v)[8]) {
    const float4 a = *reinterpret_cast<const float4 *>(p), b = *reinterpret_cast<const float4 *>(p + 4);
    v[0] = a.x, v[1] = a.y, v[2] = a.z, v[3] = a.w, v[4] = b.x, v[5] = b.y, v[6] = b.z, v[7] = b.w;
}
template <typename T> __device__ __forceinline__ void st8(T *p, const float (&v)[8]) {
    uint4 u;
    typename Half2Of<T>::P *h = reinterpret_cast<typename Half2Of<T>::P *>(&u);
#pragma unroll
    for (int i = 0; i < 4; i++) h[i] = Half2Of<T>::make(v[2 * i], v[2 * i + 1]);
    *reinterpret_cast<uint4 *>(p) = u;
}
__device__ __forceinline__ void st8(float *p, const float (&v)[8]) {
    *reinterpret_cast<float4 *>(p) = make_float4(v[0], v[1], v[2], v[3]);
    *reinterpret_cast<float4 *>(p + 4) = make_float4(v[4], v[5], v[6], v[7]);
}

inline unsigned blocks_for(int64_t n, int t) { return (unsigned)((n + t - 1) / t); }

inline ckey_status launched(ckey_error *err, const char *what) {
    cudaError_t e = cudaGetLastError();
    if (e == cudaSuccess) return CKEY_OK;
    if (err) {
        snprintf(err->message, sizeof err->message, "CUDA: %s: %s", what, cudaGetErrorString(e));
        err->status = CKEY_ERR_DEVICE;
    }
    return CKEY_ERR_DEVICE;
}

} // namespace

// kern<T> launched on stream `st` (a variable of the caller), T the storage
// type of dt.
#define LAUNCH_T(dt, grid, threads, kern, ...)                                                                         \
    CK_DISPATCH(dt, (ck_launch(kern<T>, (grid), (threads), 0, (cudaStream_t)st, __VA_ARGS__)))

#endif
