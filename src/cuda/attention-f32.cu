// Global attention with q max-pooling, streamed with an online softmax
// (no score matrix exists), on CUDA cores with fp32 arithmetic: one thread
// per query row holding q and the running output in registers, keys and
// values staged through shared memory 64 at a time. The fp32 sessions' path;
// 16-bit sessions take the tensor-core kernels (attention-mma.cu,
// attention-wgmma.cu).
#include <cuda_runtime.h>
#include <math.h>
#include <stdio.h>

#include "cuda/kernels.h"
#include "cuda/dtype.cuh"
#include "cuda/launch.cuh"

namespace {

constexpr int kTile = 64; // keys per shared-memory stage, and queries per block

template <int HD, typename T>
__global__ void attention_kernel(const T *__restrict__ qkv, int64_t N, int D, int qs, float scale,
                                 T *__restrict__ out) {
    ck_pdl_enter();
    __shared__ float ks[kTile][HD];
    __shared__ float vs[kTile][HD];
    const int h = blockIdx.y;
    const int64_t Nq = N / qs;
    const int64_t j = (int64_t)blockIdx.x * kTile + threadIdx.x;
    const int64_t ld = 3 * (int64_t)D;
    const bool active = j < Nq;
    float q[HD], o[HD];
    if (active) {
        // q max-pooled over the qs tokens Nq rows apart (Unroll order), then scaled
        const T *src = qkv + j * ld + (int64_t)h * HD;
        for (int e = 0; e < HD; e++) q[e] = ck_ld(src + e);
        for (int s = 1; s < qs; s++) {
            const T *o2 = src + (int64_t)s * Nq * ld;
            for (int e = 0; e < HD; e++) q[e] = fmaxf(q[e], ck_ld(o2 + e));
        }
        for (int e = 0; e < HD; e++) q[e] *= scale;
    }
    for (int e = 0; e < HD; e++) o[e] = 0.f;
    float m = -INFINITY, l = 0.f;
    for (int64_t k0 = 0; k0 < N; k0 += kTile) {
        const int nk = (int)((N - k0) < kTile ? (N - k0) : kTile);
        __syncthreads();
        for (int idx = threadIdx.x; idx < nk * HD; idx += blockDim.x) {
            const int r = idx / HD, e = idx % HD;
            const T *row = qkv + (k0 + r) * ld + (int64_t)h * HD;
            ks[r][e] = ck_ld(row + D + e);
            vs[r][e] = ck_ld(row + 2 * D + e);
        }
        __syncthreads();
        if (!active) continue;
        for (int r = 0; r < nk; r++) {
            float s = 0.f;
#pragma unroll
            for (int e = 0; e < HD; e++) s += q[e] * ks[r][e];
            if (s > m) {
                const float corr = __expf(m - s); // 0 on the first key
                l *= corr;
#pragma unroll
                for (int e = 0; e < HD; e++) o[e] *= corr;
                m = s;
            }
            const float p = __expf(s - m);
            l += p;
#pragma unroll
            for (int e = 0; e < HD; e++) o[e] += p * vs[r][e];
        }
    }
    if (active) {
        const float inv = 1.f / l;
        T *dst = out + j * D + (int64_t)h * HD;
        for (int e = 0; e < HD; e++) ck_st(dst + e, o[e] * inv);
    }
}

template <int HD>
cudaError_t launch(const void *qkv, int64_t N, int D, int heads, int qs, void *out, ck_dtype dt, cudaStream_t st) {
    const int64_t Nq = N / qs;
    dim3 grid((unsigned)((Nq + kTile - 1) / kTile), (unsigned)heads);
    CK_DISPATCH(dt, (ck_launch(attention_kernel<HD, T>, grid, kTile, 0, (cudaStream_t)st, (const T *)qkv, N, D, qs,
                               1.0f / sqrtf((float)HD), (T *)out)));
    return cudaGetLastError();
}

} // namespace

extern "C" ckey_status ck_cuda_attention_t(const void *qkv, int64_t N, int D, int heads, int qs, void *out,
                                           ck_dtype dt, void *stream, ckey_error *err) {
    if (heads <= 0 || D % heads || qs <= 0 || N % qs) {
        if (err) {
            snprintf(err->message, sizeof err->message, "attention: D %d, heads %d, N %lld, q stride %d do not fit",
                     D, heads, (long long)N, qs);
            err->status = CKEY_ERR_INVALID_ARG;
        }
        return CKEY_ERR_INVALID_ARG;
    }
    const int hd = D / heads;
    cudaStream_t st = (cudaStream_t)stream;
    cudaError_t e;
    switch (hd) {
    case 16: e = launch<16>(qkv, N, D, heads, qs, out, dt, st); break;
    case 32: e = launch<32>(qkv, N, D, heads, qs, out, dt, st); break;
    case 56: e = launch<56>(qkv, N, D, heads, qs, out, dt, st); break;
    case 64: e = launch<64>(qkv, N, D, heads, qs, out, dt, st); break;
    default:
        if (err) {
            snprintf(err->message, sizeof err->message, "attention: head_dim %d has no CUDA kernel (16, 32, 56, 64)", hd);
            err->status = CKEY_ERR_UNSUPPORTED;
        }
        return CKEY_ERR_UNSUPPORTED;
    }
    if (e != cudaSuccess) {
        if (err) {
            snprintf(err->message, sizeof err->message, "CUDA: attention launch: %s", cudaGetErrorString(e));
            err->status = CKEY_ERR_DEVICE;
        }
        return CKEY_ERR_DEVICE;
    }
    return CKEY_OK;
}

extern "C" ckey_status ck_cuda_attention(const float *qkv, int64_t N, int D, int heads, int qs, float *out,
                                         void *stream, ckey_error *err) {
    return ck_cuda_attention_t(qkv, N, D, heads, qs, out, CK_F32, stream, err);
}
