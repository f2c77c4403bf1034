// Hopper warpgroup MMA (wgmma.mma_async, sm_90a) wrappers shared by the
// wgmma kernels (attention-wgmma.cu, refiner-wgmma.cu, linear-gelu-wgmma.cu):
// synchronization, shared-memory matrix descriptors and the MMA instructions
// themselves, one specialization per operand type, N and operand source (PTX
// ISA, "Asynchronous Warpgroup Level Matrix Multiply-Accumulate"), and the
// host side's tensor-map encoding for the TMA loads. Included by .cu files
// built for sm_90a only; everything is inline and file-local.
#ifndef CK_CUDA_WGMMA_CUH
#define CK_CUDA_WGMMA_CUH

#include <cuda.h> // CUtensorMap and its enums (types only: no libcuda link)
#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cuda_runtime.h>
#include <stdint.h>

#include <type_traits>

namespace {

// Generic-proxy writes to shared memory (st.shared, cp.async) become
// visible to the MMA's async proxy.
__device__ __forceinline__ void fence_proxy_async() { asm volatile("fence.proxy.async.shared::cta;\n" ::: "memory"); }

__device__ __forceinline__ void wgmma_fence() { asm volatile("wgmma.fence.sync.aligned;\n" ::: "memory"); }
__device__ __forceinline__ void wgmma_commit() { asm volatile("wgmma.commit_group.sync.aligned;\n" ::: "memory"); }
template <int N> __device__ __forceinline__ void wgmma_wait() {
    asm volatile("wgmma.wait_group.sync.aligned %0;\n" ::"n"(N) : "memory");
}
// Pin the compiler's view of registers that a wgmma in flight reads or
// writes: no ordinary instruction touching them moves across this point.
template <int N> __device__ __forceinline__ void reg_fence(float (&r)[N]) {
#pragma unroll
    for (int i = 0; i < N; i++) asm volatile("" : "+f"(r[i])::"memory");
}
template <int N> __device__ __forceinline__ void reg_fence(uint32_t (&r)[N][4]) {
#pragma unroll
    for (int i = 0; i < N; i++)
#pragma unroll
        for (int j = 0; j < 4; j++) asm volatile("" : "+r"(r[i][j])::"memory");
}

// Shared-memory mbarriers (PTX ISA, "Parallel Synchronization and
// Communication Instructions: mbarrier") and the TMA tile load that
// completes on one. init once before a __syncthreads; a phase completes when
// `count` arrivals and every expected transaction byte have landed; waiters
// poll the parity of the phase they wait for.
__device__ __forceinline__ void mbar_init(uint32_t bar, int count) {
    asm volatile("mbarrier.init.shared::cta.b64 [%0], %1;\n" ::"r"(bar), "r"(count) : "memory");
}
// the inits visible to the async proxy (TMA's complete_tx) as well
__device__ __forceinline__ void mbar_init_fence() { asm volatile("fence.mbarrier_init.release.cluster;\n" ::: "memory"); }
__device__ __forceinline__ void mbar_arrive(uint32_t bar) {
    asm volatile("mbarrier.arrive.shared::cta.b64 _, [%0];\n" ::"r"(bar) : "memory");
}
// one arrival that also announces `bytes` of transactions (the TMA loads)
__device__ __forceinline__ void mbar_arrive_tx(uint32_t bar, uint32_t bytes) {
    asm volatile("mbarrier.arrive.expect_tx.shared::cta.b64 _, [%0], %1;\n" ::"r"(bar), "r"(bytes) : "memory");
}
__device__ __forceinline__ void mbar_wait(uint32_t bar, uint32_t parity) {
    asm volatile("{\n.reg .pred p;\nCK_MBAR_WAIT_%=:\n"
                 "mbarrier.try_wait.parity.shared::cta.b64 p, [%0], %1;\n"
                 "@!p bra CK_MBAR_WAIT_%=;\n}\n" ::"r"(bar),
                 "r"(parity)
                 : "memory");
}
// The box of a 3-D tensor map at (c0, c1, c2) to shared memory at dst
// (the map's swizzle applied), completing `bar`'s transaction bytes.
// tmap: the generic address of a __grid_constant__ CUtensorMap parameter.
__device__ __forceinline__ void tma_load_3d(uint32_t dst, const void *tmap, int c0, int c1, int c2, uint32_t bar) {
    asm volatile("cp.async.bulk.tensor.3d.shared::cluster.global.tile.mbarrier::complete_tx::bytes"
                 " [%0], [%1, {%2, %3, %4}], [%5];\n" ::"r"(dst),
                 "l"(reinterpret_cast<uint64_t>(tmap)), "r"(c0), "r"(c1), "r"(c2), "r"(bar)
                 : "memory");
}

// Shared-memory matrix descriptor, 128-byte swizzle: bits 0-13 start
// address >> 4, 16-29 LBO >> 4, 32-45 SBO >> 4, 49-51 base offset (0),
// 62-63 swizzle mode (1 = 128B).
__device__ __forceinline__ uint64_t make_desc(uint32_t saddr, uint32_t lbo, uint32_t sbo) {
    return (uint64_t)((saddr & 0x3FFFFu) >> 4) | ((uint64_t)((lbo >> 4) & 0x3FFFu) << 16) |
           ((uint64_t)((sbo >> 4) & 0x3FFFu) << 32) | (1ull << 62);
}

// The accumulator operands d[0..n-1] ("+f") and their PTX list, for the
// N = 8 / 56 / 64 / 128 / 256 shapes (n = N / 2 f32 registers a thread).
#define CK_WG_D4(i) "+f"(d[(i)]), "+f"(d[(i) + 1]), "+f"(d[(i) + 2]), "+f"(d[(i) + 3])
#define CK_WG_D8(i) CK_WG_D4(i), CK_WG_D4((i) + 4)
#define CK_WG_D28 CK_WG_D8(0), CK_WG_D8(8), CK_WG_D8(16), CK_WG_D4(24)
#define CK_WG_D32 CK_WG_D8(0), CK_WG_D8(8), CK_WG_D8(16), CK_WG_D8(24)
#define CK_WG_D64 CK_WG_D32, CK_WG_D8(32), CK_WG_D8(40), CK_WG_D8(48), CK_WG_D8(56)
#define CK_WG_D128                                                                                                  \
    CK_WG_D64, CK_WG_D8(64), CK_WG_D8(72), CK_WG_D8(80), CK_WG_D8(88), CK_WG_D8(96), CK_WG_D8(104), CK_WG_D8(112),  \
        CK_WG_D8(120)
#define CK_WG_S4 "{%0, %1, %2, %3}"
#define CK_WG_S8(a, b, c, e, f, g, h, i) "%" #a ", %" #b ", %" #c ", %" #e ", %" #f ", %" #g ", %" #h ", %" #i
#define CK_WG_S28                                                                                                   \
    "{" CK_WG_S8(0, 1, 2, 3, 4, 5, 6, 7) ", " CK_WG_S8(8, 9, 10, 11, 12, 13, 14, 15) ", "                            \
        CK_WG_S8(16, 17, 18, 19, 20, 21, 22, 23) ", %24, %25, %26, %27}"
#define CK_WG_S32                                                                                                   \
    "{" CK_WG_S8(0, 1, 2, 3, 4, 5, 6, 7) ", " CK_WG_S8(8, 9, 10, 11, 12, 13, 14, 15) ", "                            \
        CK_WG_S8(16, 17, 18, 19, 20, 21, 22, 23) ", " CK_WG_S8(24, 25, 26, 27, 28, 29, 30, 31) "}"
#define CK_WG_S64                                                                                                   \
    "{" CK_WG_S8(0, 1, 2, 3, 4, 5, 6, 7) ", " CK_WG_S8(8, 9, 10, 11, 12, 13, 14, 15) ", "                            \
        CK_WG_S8(16, 17, 18, 19, 20, 21, 22, 23) ", " CK_WG_S8(24, 25, 26, 27, 28, 29, 30, 31) ", "                  \
        CK_WG_S8(32, 33, 34, 35, 36, 37, 38, 39) ", " CK_WG_S8(40, 41, 42, 43, 44, 45, 46, 47) ", "                  \
        CK_WG_S8(48, 49, 50, 51, 52, 53, 54, 55) ", " CK_WG_S8(56, 57, 58, 59, 60, 61, 62, 63) "}"

#define CK_WG_S128                                                                                                  \
    "{" CK_WG_S8(0, 1, 2, 3, 4, 5, 6, 7) ", " CK_WG_S8(8, 9, 10, 11, 12, 13, 14, 15) ", "                            \
        CK_WG_S8(16, 17, 18, 19, 20, 21, 22, 23) ", " CK_WG_S8(24, 25, 26, 27, 28, 29, 30, 31) ", "                  \
        CK_WG_S8(32, 33, 34, 35, 36, 37, 38, 39) ", " CK_WG_S8(40, 41, 42, 43, 44, 45, 46, 47) ", "                  \
        CK_WG_S8(48, 49, 50, 51, 52, 53, 54, 55) ", " CK_WG_S8(56, 57, 58, 59, 60, 61, 62, 63) ", "                  \
        CK_WG_S8(64, 65, 66, 67, 68, 69, 70, 71) ", " CK_WG_S8(72, 73, 74, 75, 76, 77, 78, 79) ", "                  \
        CK_WG_S8(80, 81, 82, 83, 84, 85, 86, 87) ", " CK_WG_S8(88, 89, 90, 91, 92, 93, 94, 95) ", "                  \
        CK_WG_S8(96, 97, 98, 99, 100, 101, 102, 103) ", " CK_WG_S8(104, 105, 106, 107, 108, 109, 110, 111) ", "      \
        CK_WG_S8(112, 113, 114, 115, 116, 117, 118, 119) ", " CK_WG_S8(120, 121, 122, 123, 124, 125, 126, 127) "}"

// wgmma.mma_async m64nNk16, f32 accumulators, A from registers (4 32-bit
// words of 16-bit pairs), B from a shared-memory descriptor; scale_d 0:
// D = A B, 1: D += A B; TRANS_B 0: B K-major, 1: B MN-major. The operands
// after the n accumulators: a at %n..%n+3, desc %n+4, scale_d %n+5, TRANS_B
// %n+6 (A0..A6 below, as PTX digits).
template <typename T, int N> struct WgRS;
#define CK_WGMMA_RS(TYPE, PTXT, N, n, DLIST, DSTR, A0, A1, A2, A3, A4, A5, A6)                                         \
    template <> struct WgRS<TYPE, N> {                                                                                 \
        template <int TRANS_B>                                                                                         \
        static __device__ __forceinline__ void mma(float (&d)[n], const uint32_t (&a)[4], uint64_t desc, int scale_d) { \
            asm volatile("{\n.reg .pred p;\nsetp.ne.b32 p, %" #A5 ", 0;\n"                                           \
                         "wgmma.mma_async.sync.aligned.m64n" #N "k16.f32." PTXT "." PTXT " " DSTR ", {%" #A0 ", %" #A1 \
                         ", %" #A2 ", %" #A3 "}, %" #A4 ", p, 1, 1, %" #A6 ";\n}\n"                                   \
                         : DLIST                                                                                       \
                         : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "l"(desc), "r"(scale_d), "n"(TRANS_B));      \
        }                                                                                                              \
    };
CK_WGMMA_RS(__half, "f16", 8, 4, CK_WG_D4(0), CK_WG_S4, 4, 5, 6, 7, 8, 9, 10)
CK_WGMMA_RS(__half, "f16", 56, 28, CK_WG_D28, CK_WG_S28, 28, 29, 30, 31, 32, 33, 34)
CK_WGMMA_RS(__half, "f16", 64, 32, CK_WG_D32, CK_WG_S32, 32, 33, 34, 35, 36, 37, 38)
CK_WGMMA_RS(__half, "f16", 128, 64, CK_WG_D64, CK_WG_S64, 64, 65, 66, 67, 68, 69, 70)
CK_WGMMA_RS(__nv_bfloat16, "bf16", 8, 4, CK_WG_D4(0), CK_WG_S4, 4, 5, 6, 7, 8, 9, 10)
CK_WGMMA_RS(__nv_bfloat16, "bf16", 56, 28, CK_WG_D28, CK_WG_S28, 28, 29, 30, 31, 32, 33, 34)
CK_WGMMA_RS(__nv_bfloat16, "bf16", 64, 32, CK_WG_D32, CK_WG_S32, 32, 33, 34, 35, 36, 37, 38)
CK_WGMMA_RS(__nv_bfloat16, "bf16", 128, 64, CK_WG_D64, CK_WG_S64, 64, 65, 66, 67, 68, 69, 70)
#undef CK_WGMMA_RS

// The same with A from a shared-memory descriptor too (both K-major); the
// operands after the n accumulators: a %n, b %n+1, scale_d %n+2.
template <typename T, int N> struct WgSS;
#define CK_WGMMA_SS(TYPE, PTXT, N, n, DLIST, DSTR, A0, A1, A2)                                                      \
    template <> struct WgSS<TYPE, N> {                                                                                 \
        static __device__ __forceinline__ void mma(float (&d)[n], uint64_t a, uint64_t b, int scale_d) {             \
            asm volatile("{\n.reg .pred p;\nsetp.ne.b32 p, %" #A2 ", 0;\n"                                           \
                         "wgmma.mma_async.sync.aligned.m64n" #N "k16.f32." PTXT "." PTXT " " DSTR ", %" #A0 ", %" #A1 \
                         ", p, 1, 1, 0, 0;\n}\n"                                                                      \
                         : DLIST                                                                                       \
                         : "l"(a), "l"(b), "r"(scale_d));                                                             \
        }                                                                                                              \
    };
CK_WGMMA_SS(__half, "f16", 64, 32, CK_WG_D32, CK_WG_S32, 32, 33, 34)
CK_WGMMA_SS(__half, "f16", 128, 64, CK_WG_D64, CK_WG_S64, 64, 65, 66)
CK_WGMMA_SS(__nv_bfloat16, "bf16", 64, 32, CK_WG_D32, CK_WG_S32, 32, 33, 34)
CK_WGMMA_SS(__nv_bfloat16, "bf16", 128, 64, CK_WG_D64, CK_WG_S64, 64, 65, 66)
CK_WGMMA_SS(__half, "f16", 256, 128, CK_WG_D128, CK_WG_S128, 128, 129, 130)
CK_WGMMA_SS(__nv_bfloat16, "bf16", 256, 128, CK_WG_D128, CK_WG_S128, 128, 129, 130)
#undef CK_WGMMA_SS

#undef CK_WG_D4
#undef CK_WG_D8
#undef CK_WG_D28
#undef CK_WG_D32
#undef CK_WG_D64
#undef CK_WG_D128
#undef CK_WG_S4
#undef CK_WG_S8
#undef CK_WG_S28
#undef CK_WG_S32
#undef CK_WG_S64
#undef CK_WG_S128

// A tiled tensor map over 16-bit elements of type T (rank dimensions,
// innermost first; strides in bytes for dimensions 1..rank-1), 128-byte
// swizzle, 256-byte L2 promotion, out-of-bounds elements zero.
// cuTensorMapEncodeTiled is a driver function, reached through the runtime's
// entry-point query (no link against libcuda); cudaErrorNotSupported where
// the driver has none.
template <typename T>
cudaError_t encode_tmap(CUtensorMap *map, int rank, const void *base, const cuuint64_t *dims, const cuuint64_t *strides,
                        const cuuint32_t *box) {
    typedef CUresult (*encode_fn)(CUtensorMap *, CUtensorMapDataType, cuuint32_t, void *, const cuuint64_t *,
                                  const cuuint64_t *, const cuuint32_t *, const cuuint32_t *, CUtensorMapInterleave,
                                  CUtensorMapSwizzle, CUtensorMapL2promotion, CUtensorMapFloatOOBfill);
    void *fn = NULL;
    cudaDriverEntryPointQueryResult q;
    cudaError_t e = cudaGetDriverEntryPointByVersion("cuTensorMapEncodeTiled", &fn, 12000, cudaEnableDefault, &q);
    if (e != cudaSuccess) return e;
    if (q != cudaDriverEntryPointSuccess || !fn) return cudaErrorNotSupported;
    const cuuint32_t estr[3] = {1, 1, 1};
    const CUtensorMapDataType dt =
        std::is_same<T, __half>::value ? CU_TENSOR_MAP_DATA_TYPE_FLOAT16 : CU_TENSOR_MAP_DATA_TYPE_BFLOAT16;
    const CUresult r = ((encode_fn)fn)(map, dt, (cuuint32_t)rank, const_cast<void *>(base), dims, strides, box, estr,
                                       CU_TENSOR_MAP_INTERLEAVE_NONE, CU_TENSOR_MAP_SWIZZLE_128B,
                                       CU_TENSOR_MAP_L2_PROMOTION_L2_256B, CU_TENSOR_MAP_FLOAT_OOB_FILL_NONE);
    return r == CUDA_SUCCESS ? cudaSuccess : cudaErrorInvalidValue;
}

} // namespace

#endif
