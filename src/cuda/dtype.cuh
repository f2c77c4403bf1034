// Storage types on the device. Activations and matrix weights are stored as
// T (float, __half or __nv_bfloat16, chosen per session: ck_dtype); every
// kernel loads T, computes in fp32 and stores T. Small per-channel vectors
// (biases, norms, GroupNorm affines), logits and the network's output stay
// fp32 whatever T is, except the biases of the linear layers whose bias
// goes through cuBLASLt's epilogue (ck_cuda_linear_ld_t), which are T: its
// fused bias is in the output's type, as under PyTorch's fp16 autocast.
#ifndef CK_CUDA_DTYPE_CUH
#define CK_CUDA_DTYPE_CUH

#include <cuda_bf16.h>
#include <cuda_fp16.h>

#include "cuda/kernels.h"

__device__ __forceinline__ float ck_ld(const float *p) { return *p; }
__device__ __forceinline__ float ck_ld(const __half *p) { return __half2float(*p); }
__device__ __forceinline__ float ck_ld(const __nv_bfloat16 *p) { return __bfloat162float(*p); }
__device__ __forceinline__ void ck_st(float *p, float v) { *p = v; }
__device__ __forceinline__ void ck_st(__half *p, float v) { *p = __float2half_rn(v); }
__device__ __forceinline__ void ck_st(__nv_bfloat16 *p, float v) { *p = __float2bfloat16_rn(v); }

// Run `body` with T bound to the storage type of `dt`.
#define CK_DISPATCH(dt, body)                 \
    do {                                      \
        switch (dt) {                         \
        case CK_F16: {                        \
            typedef __half T;                 \
            body;                             \
        } break;                              \
        case CK_BF16: {                       \
            typedef __nv_bfloat16 T;          \
            body;                             \
        } break;                              \
        default: {                            \
            typedef float T;                  \
            body;                             \
        } break;                              \
        }                                     \
    } while (0)

#endif
