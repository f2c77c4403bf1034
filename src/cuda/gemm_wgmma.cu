// Hopper (sm_90a) linear layer with the bias and the GELU in its epilogue:
// y [M, N] = gelu(x [M, K] . W [N, K]^T + b), 16-bit storage, fp32
// accumulation and epilogue, the MLP's fc1. cuBLASLt's own GELU epilogue is
// the tanh approximation (up to 4.7e-4 from erf's); this one applies the erf
// GELU of the separate pass (ck_one_plus_erf_fast, rowbias.cuh) to the fp32
// accumulator, so the hidden activations are rounded to 16 bits once
// instead of twice and are written once instead of three times (GEMM, then
// the pass's read and write).
//
// Design (the tile loop of attention_wgmma.cu's TMA kernel): a CTA = two
// consumer warpgroups, persistent over 128 x 128 output tiles (two CTAs an
// SM), each warpgroup 64 rows of a tile (wgmma m64n128k16, both operands
// from shared memory, K-major, 128-byte swizzle). K is walked in 64-element
// steps; the x and W tiles of a step (128 rows x 128 bytes each) come in by
// TMA (2-D tensor maps, elements past K, M or N zero-filled) into a ring of
// ST stages with a `full` mbarrier (the bytes) and an `empty` one (every
// consumer warp, once its MMAs of the step are complete). The ring runs on
// across a CTA's tiles, so the next tile's loads land during this one's
// epilogue. Epilogue: bias + GELU on the accumulator fragments, packed to 16
// bits, staged per warp (stmatrix, 32 columns at a time) and stored as
// 16-byte vectors.
//
// H200, session 10 (`build/tests/test-cuda linear_gelu`, fp16): the first
// form (a CTA a tile, the ring refilled tile by tile, every K step's batch
// waited for before the next was issued, the ring reused for staging) ran
// stage 2's fc1 (16384 x 448 -> 1792) in 71.3 us against 74.9 for cuBLASLt +
// the pass, and the bias-only qkv shapes 10-30% behind cuBLASLt. This one
// (host-timed batches, fp16): fc1 of stages 0-3 25.5 / 52.8 / 69.9 / 63.3 us
// against 34.5 / 63.5 / 73.8 / 55.2 for cuBLASLt + the pass (29.4 / 60.7 /
// 71.3 / 58.3 for the first form); bias only (a 16-bit bias) at the qkv
// shapes 140 / 226 / 50 us against cuBLASLt's 102 / 195 / 37. In the frame
// (ncu): stage 2's fc1 71 us against 37 + 32, so the tensor work there runs
// at about half cuBLASLt's rate (~370 against ~715 TFLOP/s: 128 x 128 tiles
// without cluster multicast ask the L2 for 32 KiB per K step and tile).
// The backend uses it for every fc1 (the frame is 0.24-0.3 ms faster than
// with cuBLASLt + the pass; stage 2-3 alone measured no different).

#include <cuda.h> // CUtensorMap and its enums (types only: no libcuda link)
#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cuda_runtime.h>
#include <stdint.h>
#include <stdio.h>

#include <type_traits>

#include "cuda/ck_cuda.h"
#include "cuda/ptx.cuh"
#include "cuda/rowbias.cuh"
#include "cuda/wgmma.cuh"

namespace {

constexpr int BM = 128, BN = 128, BK = 64;         // tile rows, columns, K step (one 128-byte swizzle row)
constexpr int kTileBytes = BM * BK * 2;             // x's or W's part of a stage (16 KiB)
constexpr int kStageBytes = 2 * kTileBytes;         // x tile, then W tile
constexpr int kThreads = 256;                       // two consumer warpgroups
constexpr int kConsumerWarps = kThreads / 32;
constexpr int kStgPitch = 80;                       // bytes a staged row: 32 columns + 16 (no bank conflicts)
constexpr int kStgWarp = 16 * kStgPitch;            // a warp's staging area: 16 rows x 32 columns

// ring + epilogue staging + alignment slack + mbarriers
template <int ST> constexpr int gemm_smem() { return ST * kStageBytes + kConsumerWarps * kStgWarp + 1024 + 16 * ST; }

__device__ __forceinline__ void tma_load_2d(uint32_t dst, const void *tmap, int c0, int c1, uint32_t bar) {
    asm volatile("cp.async.bulk.tensor.2d.shared::cluster.global.tile.mbarrier::complete_tx::bytes"
                 " [%0], [%1, {%2, %3}], [%4];\n" ::"r"(dst),
                 "l"(reinterpret_cast<uint64_t>(tmap)), "r"(c0), "r"(c1), "r"(bar)
                 : "memory");
}

// Persistent: CTA b takes tiles b, b + gridDim.x, ... (tile -> row block
// tile / tiles_n, column block tile % tiles_n), and the ring runs on across
// them: the CTA's K steps are numbered g = 0, 1, ... over all its tiles, so
// the loads of the next tile's first steps are in flight during this tile's
// epilogue. Step g's stage is g % ST; thread 0 refills the stage of step
// g - 1 with step g - 1 + ST once every consumer warp has released it.
// Each warpgroup keeps one K step's wgmma batch in flight: the batch of step
// g is issued before the warpgroup waits for that of g - 1 (wait_group 1)
// and releases its stage.
template <typename T, typename B, int ST, bool GELU>
__global__ void __launch_bounds__(kThreads, 2)
    gemm_bias_gelu_kernel(const __grid_constant__ CUtensorMap xmap, const __grid_constant__ CUtensorMap wmap, int M,
                          int N, int K, const B *__restrict__ bias, T *__restrict__ y) {
    extern __shared__ uint8_t smem_raw[];
    const uint32_t sbase = (smem_addr(smem_raw) + 1023u) & ~1023u;
    const uint32_t stg0 = sbase + ST * kStageBytes;                  // the warps' staging areas
    const uint32_t bars = stg0 + kConsumerWarps * kStgWarp;          // full[ST], then empty[ST]
    const int tid = threadIdx.x, warp = tid >> 5, lane = tid & 31, wg = tid >> 7;
    const int nk = (K + BK - 1) / BK, tiles_n = (N + BN - 1) / BN, tiles = tiles_n * ((M + BM - 1) / BM);
    const int mine = (int)blockIdx.x < tiles ? (tiles - 1 - (int)blockIdx.x) / (int)gridDim.x + 1 : 0;
    const int total = mine * nk; // this CTA's K steps

    if (tid == 0) {
        for (int s = 0; s < ST; s++) mbar_init(bars + 8 * s, 1), mbar_init(bars + 8 * (ST + s), kConsumerWarps);
        mbar_init_fence();
    }
    __syncthreads();

    // step g into its stage, once the stage's previous step is released
    auto produce = [&](int g) {
        const int s = g % ST, tile = (int)blockIdx.x + (g / nk) * (int)gridDim.x, k = g % nk;
        if (g >= ST) mbar_wait(bars + 8 * (ST + s), ((g / ST) & 1) ^ 1);
        const uint32_t full = bars + 8 * s, dst = sbase + (uint32_t)(s * kStageBytes);
        mbar_arrive_tx(full, kStageBytes);
        tma_load_2d(dst, &xmap, k * BK, (tile / tiles_n) * BM, full);
        tma_load_2d(dst + kTileBytes, &wmap, k * BK, (tile % tiles_n) * BN, full);
    };
    // step g's stage released by this warp; thread 0 refills it (step g + ST)
    auto release = [&](int g) {
        if (lane == 0) mbar_arrive(bars + 8 * (ST + g % ST));
        if (tid == 0 && g + ST < total) produce(g + ST);
    };
    if (tid == 0)
        for (int g = 0; g < ST && g < total; g++) produce(g);

    const int t = lane & 3;
    const uint32_t stg = stg0 + (uint32_t)(warp * kStgWarp);
    int g = 0;
    for (int i = 0; i < mine; i++) {
        const int tile = (int)blockIdx.x + i * (int)gridDim.x;
        const int m0 = (tile / tiles_n) * BM, n0 = (tile % tiles_n) * BN;
        float acc[64];
#pragma unroll
        for (int j = 0; j < 64; j++) acc[j] = 0.f;
        for (int k = 0; k < nk; k++, g++) {
            const int s = g % ST;
            mbar_wait(bars + 8 * s, (uint32_t)((g / ST) & 1));
            const uint32_t st = sbase + (uint32_t)(s * kStageBytes);
            const uint64_t ad = make_desc(st + (uint32_t)(wg * 64 * 128), 16, 1024),
                           bd = make_desc(st + kTileBytes, 16, 1024);
            wgmma_fence();
#pragma unroll
            for (int kk = 0; kk < BK / 16; kk++)
                WgSS<T, 128>::mma(acc, ad + (uint64_t)(kk * 2), bd + (uint64_t)(kk * 2), k > 0 || kk > 0);
            wgmma_commit();
            if (k > 0) {
                wgmma_wait<1>(); // step g - 1's batch is complete
                release(g - 1);
            }
        }
        wgmma_wait<0>();
        reg_fence(acc);
        release(g - 1);

        // Epilogue. Fragment d[4i + j] of the warp's 16 rows: row g + 8 (j >= 2),
        // column 8i + 2t + (j & 1) (wgmma's D layout, as mma.m16n8's). Four
        // passes of 32 columns: bias (+ GELU), packed to 16 bits, staged with
        // stmatrix in the warp's area (16 rows x 80 bytes), read back as
        // 16-byte chunks and stored, 8 rows x 64 bytes an instruction.
        const int row0 = m0 + wg * 64 + (warp & 3) * 16;
#pragma unroll
        for (int q = 0; q < 4; q++) {
            uint32_t pk[4][2];
#pragma unroll
            for (int ii = 0; ii < 4; ii++) {
                const int i8 = 4 * q + ii, col = n0 + 8 * i8 + 2 * t;
                float2 bb = make_float2(0.f, 0.f);
                if (col < N) bb = make_float2(ck_ld(bias + col), ck_ld(bias + col + 1)); // N % 8 == 0: col + 1 < N
                float v[4];
#pragma unroll
                for (int j = 0; j < 4; j++) {
                    const float u = acc[4 * i8 + j] + ((j & 1) ? bb.y : bb.x);
                    v[j] = GELU ? 0.5f * u * ck_one_plus_erf_fast(u) : u;
                }
                pk[ii][0] = Pair16<T>::pack(v[0], v[1]); // row g
                pk[ii][1] = Pair16<T>::pack(v[2], v[3]); // row g + 8
            }
            // stmatrix x4: lane L gives the address of row L % 8 of matrix L / 8;
            // matrices: (rows 0-7, chunk c), (rows 8-15, c), (0-7, c + 1), (8-15, c + 1)
            const int mtx = lane >> 3, srow = (mtx & 1) * 8 + (lane & 7);
#pragma unroll
            for (int c = 0; c < 4; c += 2) {
                const uint32_t a = stg + (uint32_t)(srow * kStgPitch + (c + (mtx >> 1)) * 16);
                asm volatile("stmatrix.sync.aligned.m8n8.x4.shared.b16 [%0], {%1, %2, %3, %4};\n" ::"r"(a),
                             "r"(pk[c][0]), "r"(pk[c][1]), "r"(pk[c + 1][0]), "r"(pk[c + 1][1])
                             : "memory");
            }
            __syncwarp();
#pragma unroll
            for (int h = 0; h < 2; h++) {
                const int r = h * 8 + (lane >> 2), c = lane & 3;
                const int row = row0 + r, col = n0 + q * 32 + c * 8;
                uint4 v;
                asm volatile("ld.shared.v4.u32 {%0, %1, %2, %3}, [%4];\n"
                             : "=r"(v.x), "=r"(v.y), "=r"(v.z), "=r"(v.w)
                             : "r"(stg + (uint32_t)(r * kStgPitch + c * 16)));
                if (row < M && col < N) *reinterpret_cast<uint4 *>(y + (int64_t)row * N + col) = v;
            }
            __syncwarp(); // the area is rewritten by the next pass
        }
    }
}

// A 2-D tensor map over a row-major [rows, cols] 16-bit matrix (cols
// contiguous, rows cols * 2 bytes apart), box 64 columns x 128 rows.
template <typename T> cudaError_t encode_2d(CUtensorMap *map, const void *base, int64_t rows, int64_t cols) {
    const cuuint64_t dims[2] = {(cuuint64_t)cols, (cuuint64_t)rows}, strides[1] = {(cuuint64_t)cols * sizeof(T)};
    const cuuint32_t box[2] = {BK, 128};
    return encode_tmap<T>(map, 2, base, dims, strides, box);
}

constexpr int kStages = 3; // 107 KiB: two CTAs an SM, one's epilogue under the other's MMAs

template <typename T, typename B, bool GELU>
cudaError_t launch(const void *x, int64_t M, int K, const void *W, const void *b, void *y, int N, cudaStream_t st) {
    alignas(64) CUtensorMap xm, wm;
    cudaError_t e = encode_2d<T>(&xm, x, M, K);
    if (e == cudaSuccess) e = encode_2d<T>(&wm, W, N, K);
    if (e != cudaSuccess) return e;
    auto kern = gemm_bias_gelu_kernel<T, B, kStages, GELU>;
    constexpr int smem = gemm_smem<kStages>();
    e = cudaFuncSetAttribute(kern, cudaFuncAttributeMaxDynamicSharedMemorySize, smem);
    if (e != cudaSuccess) return e;
    int dev = 0, sms = 0;
    e = cudaGetDevice(&dev);
    if (e == cudaSuccess) e = cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, dev);
    if (e != cudaSuccess) return e;
    const int64_t tiles = (M + BM - 1) / BM * ((N + BN - 1) / BN);
    const unsigned grid = (unsigned)(tiles < 2LL * sms ? tiles : 2LL * sms); // two CTAs an SM, persistent
    kern<<<grid, kThreads, smem, st>>>(xm, wm, (int)M, N, K, (const B *)b, (T *)y);
    return cudaGetLastError();
}

ckey_status fail(ckey_error *err, ckey_status s, const char *msg) {
    if (err) {
        snprintf(err->message, sizeof err->message, "%s", msg);
        err->status = s;
    }
    return s;
}

} // namespace

extern "C" int ck_cuda_linear_gelu_ok(int64_t M, int K, int N, ck_dtype dt) {
    return (dt == CK_F16 || dt == CK_BF16) && M > 0 && M <= 65535LL * BM && K > 0 && K % 8 == 0 && N > 0 &&
           N % 8 == 0 && ck_cuda_wgmma_ok();
}

extern "C" ckey_status ck_cuda_linear_wgmma(const void *x, int64_t M, int K, const void *W, const void *b, void *y,
                                           int N, int mode, ck_dtype dt, void *stream, ckey_error *err) {
    if (!ck_cuda_linear_gelu_ok(M, K, N, dt))
        return fail(err, CKEY_ERR_UNSUPPORTED,
                    "linear + GELU (wgmma): needs fp16 / bf16, K and N multiples of 8, a compute capability 9.0 GPU");
    if ((((uintptr_t)x | (uintptr_t)W | (uintptr_t)y) & 15) || ((uintptr_t)b & 7))
        return fail(err, CKEY_ERR_INVALID_ARG, "linear + GELU (wgmma): x, W, y must be 16-byte aligned, b 8-byte");
    cudaStream_t st = (cudaStream_t)stream;
    cudaError_t e;
    const bool f16 = dt == CK_F16;
    switch (mode & (CK_LINEAR_GELU | CK_LINEAR_BIAS16)) {
    case CK_LINEAR_GELU:
        e = f16 ? launch<__half, float, true>(x, M, K, W, b, y, N, st) : launch<__nv_bfloat16, float, true>(x, M, K, W, b, y, N, st);
        break;
    case 0:
        e = f16 ? launch<__half, float, false>(x, M, K, W, b, y, N, st)
                : launch<__nv_bfloat16, float, false>(x, M, K, W, b, y, N, st);
        break;
    case CK_LINEAR_BIAS16:
        e = f16 ? launch<__half, __half, false>(x, M, K, W, b, y, N, st)
                : launch<__nv_bfloat16, __nv_bfloat16, false>(x, M, K, W, b, y, N, st);
        break;
    default: return fail(err, CKEY_ERR_INVALID_ARG, "linear (wgmma): the GELU takes an fp32 bias");
    }
    if (e != cudaSuccess) {
        char msg[160];
        snprintf(msg, sizeof msg, "CUDA: linear + GELU (wgmma): %s", cudaGetErrorString(e));
        return fail(err, CKEY_ERR_DEVICE, msg);
    }
    return CKEY_OK;
}

extern "C" ckey_status ck_cuda_linear_gelu(const void *x, int64_t M, int K, const void *W, const float *b, void *y,
                                          int N, ck_dtype dt, void *stream, ckey_error *err) {
    return ck_cuda_linear_wgmma(x, M, K, W, b, y, N, CK_LINEAR_GELU, dt, stream, err);
}
