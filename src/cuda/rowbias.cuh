// Per-column bias over the rows of a row-major [N, C] matrix (rows ld
// elements apart), optionally followed by the GELU 0.5 v (1 + erf(v / sqrt 2)),
// computed in fp32 (erff for fp32 storage; for 16-bit storage a GELU good to
// 1e-6, ck_gelu_fast). Shared by the linear
// layer's bias pass (layernorm-linear.cu; the bias in the storage type B = T, as
// cuBLASLt's fused bias takes it) and bias + GELU (encoder-ops.cu; B = float).
//
// Layout of the launch (rowbias_launch): threadIdx.x / blockIdx.x walk the
// row's vectors of V elements (V = 16 bytes / sizeof(T) when C and ld are
// multiples of V and y is 16-byte aligned, else V = 1), threadIdx.y /
// blockIdx.y walk rows with a grid stride. Each thread loads its V bias
// values once and applies them to every row it visits: no division or
// modulo per element, one 16-byte load and store per vector.
#ifndef CK_CUDA_ROWBIAS_CUH
#define CK_CUDA_ROWBIAS_CUH

#include <cuda_runtime.h>
#include <math.h>
#include <stdint.h>

#include "core/fastmath.h"
#include "cuda/dtype.cuh"
#include "cuda/launch.cuh"

// FAST: the 16-bit storage types (ck_gelu_fast, core/fastmath.h); fp32 storage, the parity
// path, keeps erff.
template <bool GELU, bool FAST = false>
__device__ __forceinline__ float ck_rowbias_apply(float v) {
    if (GELU) return FAST ? ck_gelu_fast(v) : 0.5f * v * (1.f + erff(v * 0.70710678118654752f));
    return v;
}

// nv: vectors per row (C / V); ld: elements between rows.
template <typename T, typename B, int V, bool GELU, int ROWS = 2>
__global__ void ck_rowbias_kernel(T *__restrict__ y, int64_t N, int nv, int64_t ld, const B *__restrict__ b) {
    ck_pdl_enter();
    const int c = blockIdx.x * blockDim.x + threadIdx.x;
    if (c >= nv) return;
    const int64_t stride = (int64_t)gridDim.y * blockDim.y;
    if constexpr (V == 1) {
        const float bc = b ? ck_ld(b + c) : 0.f;
        for (int64_t r = (int64_t)blockIdx.y * blockDim.y + threadIdx.y; r < N; r += stride) {
            T *p = y + r * ld + c;
            ck_st(p, ck_rowbias_apply<GELU, sizeof(T) == 2>(ck_ld(p) + bc));
        }
    } else {
        static_assert(V * sizeof(T) == 16, "one 16-byte vector");
        float bv[V];
#pragma unroll
        for (int e = 0; e < V; e++) bv[e] = b ? ck_ld(b + c * V + e) : 0.f;
        // ROWS rows a step, their loads issued together (memory-level parallelism)
        int64_t r = (int64_t)blockIdx.y * blockDim.y + threadIdx.y;
        for (; r + (ROWS - 1) * stride < N; r += ROWS * stride) {
            uint4 v[ROWS];
#pragma unroll
            for (int k = 0; k < ROWS; k++) v[k] = *(reinterpret_cast<const uint4 *>(y + (r + k * stride) * ld) + c);
#pragma unroll
            for (int k = 0; k < ROWS; k++) {
                T *e8 = reinterpret_cast<T *>(&v[k]);
#pragma unroll
                for (int e = 0; e < V; e++)
                    ck_st(e8 + e, ck_rowbias_apply<GELU, sizeof(T) == 2>(ck_ld(e8 + e) + bv[e]));
                *(reinterpret_cast<uint4 *>(y + (r + k * stride) * ld) + c) = v[k];
            }
        }
        for (; r < N; r += stride) {
            uint4 *p = reinterpret_cast<uint4 *>(y + r * ld) + c;
            uint4 v = *p;
            T *e8 = reinterpret_cast<T *>(&v);
#pragma unroll
            for (int e = 0; e < V; e++) ck_st(e8 + e, ck_rowbias_apply<GELU, sizeof(T) == 2>(ck_ld(e8 + e) + bv[e]));
            *p = v;
        }
    }
}

// y[r, c] = f(y[r, c] + b[c]) for r < N, c < C (b NULL: no bias). Returns
// the launch's cudaGetLastError().
template <typename T, bool GELU, typename B>
static cudaError_t ck_rowbias_launch(T *y, int64_t N, int C, int64_t ld, const B *b, cudaStream_t st) {
    if (N <= 0 || C <= 0) return cudaSuccess;
    constexpr int VV = (int)(16 / sizeof(T));
    const bool vec = C % VV == 0 && ld % VV == 0 && ((uintptr_t)y & 15) == 0;
    const int nv = vec ? C / VV : C;
    int tx = 1; /* a power of two >= the row's vectors, at most 256 */
    while (tx < nv && tx < 256) tx *= 2;
    const int ty = 256 / tx;
    const unsigned gx = (unsigned)((nv + tx - 1) / tx);
    int64_t gy = (N + ty - 1) / ty;
    /* at most 4096 blocks (the rest is the grid stride), each thread taking
     * its rows two at a time (ROWS): the fastest of 2048-16384 blocks and one
     * to four rows at a time (S = 2048 fp16, H200: bias + GELU of a frame
     * 1.063 ms, against 1.136 with 8192 blocks a row at a time) */
    const int64_t gy_max = gx >= 4096 ? 1 : 4096 / (int64_t)gx;
    if (gy > gy_max) gy = gy_max;
    const dim3 block((unsigned)tx, (unsigned)ty), grid(gx, (unsigned)gy);
    if (vec)
        ck_launch(ck_rowbias_kernel<T, B, VV, GELU>, grid, block, 0, (cudaStream_t)st, y, N, nv, ld, b);
    else
        ck_launch(ck_rowbias_kernel<T, B, 1, GELU>, grid, block, 0, (cudaStream_t)st, y, N, nv, ld, b);
    return cudaGetLastError();
}

#endif
