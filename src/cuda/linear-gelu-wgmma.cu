// Hopper (sm_90a) linear layer with the bias and the GELU in its epilogue:
// y [M, N] = gelu(x [M, K] . W [N, K]^T + b), 16-bit storage, fp32
// accumulation and epilogue, the MLP's fc1. cuBLASLt's own GELU epilogue is
// the tanh approximation (up to 4.7e-4 from erf's); this one applies the erf
// GELU of the separate pass (ck_gelu_fast, core/fastmath.h) to the fp32
// accumulator, so the hidden activations are rounded to 16 bits once
// instead of twice and are written once instead of three times (GEMM, then
// the pass's read and write).
//
// Design (the tile loop of attention-wgmma.cu's TMA kernel): a CTA = two
// consumer warpgroups, persistent over 128 x BN output tiles (BN 128: two
// CTAs an SM; 256: one), each warpgroup 64 rows of a tile (wgmma m64nBNk16,
// both operands from shared memory, K-major, 128-byte swizzle). K is walked
// in 64-element steps; the x and W tiles of a step (128 and BN rows x 128
// bytes) come in by TMA (2-D tensor maps, elements past K, M or N
// zero-filled) into a ring of ST stages with a `full` mbarrier (the bytes)
// and an `empty` one (every consumer warp, once its MMAs of the step are
// complete). The ring runs on across a CTA's tiles, so the next tile's loads
// land during this one's epilogue. Epilogue: bias + GELU on the accumulator
// fragments, packed to 16 bits, staged per warp (stmatrix, 32 columns at a
// time) and stored as 16-byte vectors.
//
// The backend uses it for every fc1: the frame is 0.24-0.3 ms faster than
// with cuBLASLt + the separate pass, although the tensor work runs at about
// half cuBLASLt's rate (~400 against ~715 TFLOP/s, H200). What holds it is
// the epilogue: with 256-wide tiles (one CTA an SM) it is not under the
// MMAs, and the K loop alone or the loads alone take under half of the
// kernel's time (PROBE, stage 2's fc1). Overlapping it would take two
// accumulator sets (they do not fit at 256 columns) or warpgroups on
// different tiles (ping-pong: x rows of their own, 1.67 x the shared-memory
// bytes a FLOP). The L2 is not the limit: clusters sharing W by multicast
// (CL = 2) halve its L2 reads and change nothing.

#include <cuda.h> // CUtensorMap and its enums (types only: no libcuda link)
#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cuda_runtime.h>
#include <stdint.h>
#include <stdio.h>

#include <type_traits>

#include "cuda/kernels.h"
#include "cuda/launch.cuh"
#include "cuda/ptx.cuh"
#include "cuda/rowbias.cuh"
#include "cuda/wgmma.cuh"

namespace {

constexpr int BM = 128, BK = 64;                    // tile rows, K step (one 128-byte swizzle row)
constexpr int kXTileBytes = BM * BK * 2;            // x's part of a stage (16 KiB); W's follows it
constexpr int kThreads = 256;                       // two consumer warpgroups
constexpr int kConsumerWarps = kThreads / 32;
constexpr int kStgPitch = 80;                       // bytes a staged row: 32 columns + 16 (no bank conflicts)
constexpr int kStgWarp = 16 * kStgPitch;            // a warp's staging area: 16 rows x 32 columns

// A stage: the x tile (BM rows x 128 bytes), then the W tile (BN rows x 128 bytes)
template <int BN> __host__ __device__ constexpr int stage_bytes() { return (BM + BN) * BK * 2; }
// ring + epilogue staging + alignment slack + mbarriers
template <int BN, int ST> constexpr int gemm_smem() {
    return ST * stage_bytes<BN>() + kConsumerWarps * kStgWarp + 1024 + 16 * ST;
}

__device__ __forceinline__ void tma_load_2d(uint32_t dst, const void *tmap, int c0, int c1, uint32_t bar) {
    asm volatile("cp.async.bulk.tensor.2d.shared::cluster.global.tile.mbarrier::complete_tx::bytes"
                 " [%0], [%1, {%2, %3}], [%4];\n" ::"r"(dst),
                 "l"(reinterpret_cast<uint64_t>(tmap)), "r"(c0), "r"(c1), "r"(bar)
                 : "memory");
}

// The same into the shared memory of every CTA of the cluster in `mask`, at
// the same offset, each completing its own mbarrier at bar's offset.
__device__ __forceinline__ void tma_load_2d_mc(uint32_t dst, const void *tmap, int c0, int c1, uint32_t bar,
                                               uint16_t mask) {
    asm volatile("cp.async.bulk.tensor.2d.shared::cluster.global.tile.mbarrier::complete_tx::bytes.multicast::cluster"
                 " [%0], [%1, {%2, %3}], [%4], %5;\n" ::"r"(dst),
                 "l"(reinterpret_cast<uint64_t>(tmap)), "r"(c0), "r"(c1), "r"(bar), "h"(mask)
                 : "memory");
}
__device__ __forceinline__ uint32_t cluster_rank() {
    uint32_t r;
    asm volatile("mov.u32 %0, %%cluster_ctarank;\n" : "=r"(r));
    return r;
}
// the address of this CTA's shared-memory location a in the cluster's CTA `rank`
__device__ __forceinline__ uint32_t cluster_map(uint32_t a, uint32_t rank) {
    uint32_t r;
    asm volatile("mapa.shared::cluster.u32 %0, %1, %2;\n" : "=r"(r) : "r"(a), "r"(rank));
    return r;
}
// an arrival on the mbarrier at a shared::cluster address (another CTA's)
__device__ __forceinline__ void mbar_arrive_cluster(uint32_t cluster_addr) {
    asm volatile("mbarrier.arrive.shared::cluster.b64 _, [%0];\n" ::"r"(cluster_addr) : "memory");
}
__device__ __forceinline__ void cluster_sync() {
    asm volatile("barrier.cluster.arrive.release.aligned;\nbarrier.cluster.wait.acquire.aligned;\n" ::: "memory");
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
//
// BN (the tile's columns, each warpgroup's wgmma N): 128 with two CTAs an SM
// (one's epilogue under the other's MMAs), or 256 with one CTA an SM (half
// the x loads a FLOP, m64n256 reads 10 KiB of shared memory per 512K FLOP
// against m64n128's 6 KiB per 256K; the epilogue is not overlapped). The
// bias of a pass's columns is loaded during the pass before it.
//
// CL = 2: clusters of two CTAs on row blocks 2p and 2p + 1 of the same
// column block, in lockstep over their tile pairs; each CTA loads its own x
// tile and half of the shared W tile, multicast into both CTAs (the L2 reads
// a pair's K step 2 x + W instead of 2 x + 2 W: 64 instead of 96 KiB at BN
// 256). A stage is refilled only when the consumer warps of both CTAs have
// released it (each warp arrives on both CTAs' `empty` barrier); a CTA's
// `full` barrier expects its x tile and both W halves.
//
// FOLD: the LayerNorm before the linear folded into it (lnfold: W = W0
// diag(g), bias = b0 + W0 beta, colsum = the 16-bit W's row sums, stats = the
// rows' mean and 1 / std): x is the un-normalized input and the epilogue
// takes rstd (acc - mean colsum) + bias, the LayerNorm's output never
// written.
struct LnFold {
    const float2 *stats;  // [M]: mean, rstd of x's rows
    const float *colsum;  // [N]
};
//
// PROBE (timings only, y not written): 1 = the K loop's loads and MMAs
// without the epilogue, 2 = the loads alone (each stage released once it has
// landed); what the kernel's time is made of, without a profiler.
template <typename T, typename B, int BN, int ST, bool GELU, int CL, bool FOLD, int PROBE = 0>
__global__ void __launch_bounds__(kThreads, BN == 128 ? 2 : 1)
    gemm_bias_gelu_kernel(const __grid_constant__ CUtensorMap xmap, const __grid_constant__ CUtensorMap wmap, int M,
                          int N, int K, const B *__restrict__ bias, T *__restrict__ y, LnFold fold) {
    ck_pdl_enter();
    constexpr int kStage = stage_bytes<BN>(), NA = BN / 2, NQ = BN / 32;
    extern __shared__ uint8_t smem_raw[];
    const uint32_t sbase = (smem_addr(smem_raw) + 1023u) & ~1023u;
    const uint32_t stg0 = sbase + ST * kStage;                       // the warps' staging areas
    const uint32_t bars = stg0 + kConsumerWarps * kStgWarp;          // full[ST], then empty[ST]
    const int tid = threadIdx.x, warp = tid >> 5, lane = tid & 31, wg = tid >> 7;
    // work units: tiles (CL 1) or tile pairs of a cluster (CL 2: row blocks 2p, 2p + 1)
    const int nk = (K + BK - 1) / BK, tiles_n = (N + BN - 1) / BN;
    const int units = tiles_n * (((M + BM - 1) / BM + CL - 1) / CL);
    const int unit0 = (int)blockIdx.x / CL, nunit = (int)gridDim.x / CL;
    const int rank = CL > 1 ? (int)cluster_rank() : 0;
    const int mine = unit0 < units ? (units - 1 - unit0) / nunit + 1 : 0;
    const int total = mine * nk; // this CTA's K steps (the same for both CTAs of a cluster)

    if (tid == 0) {
        for (int s = 0; s < ST; s++) mbar_init(bars + 8 * s, 1), mbar_init(bars + 8 * (ST + s), CL * kConsumerWarps);
        mbar_init_fence();
    }
    if (CL > 1)
        cluster_sync(); // the peer's barriers are initialized before anything reaches them
    else
        __syncthreads();

    // step g into its stage, once the stage's previous step is released (by both CTAs)
    auto produce = [&](int g) {
        const int s = g % ST, unit = unit0 + (g / nk) * nunit, k = g % nk;
        if (g >= ST) mbar_wait(bars + 8 * (ST + s), ((g / ST) & 1) ^ 1);
        const uint32_t full = bars + 8 * s, dst = sbase + (uint32_t)(s * kStage);
        mbar_arrive_tx(full, kStage);
        tma_load_2d(dst, &xmap, k * BK, ((unit / tiles_n) * CL + rank) * BM, full);
        if (CL == 1)
            tma_load_2d(dst + kXTileBytes, &wmap, k * BK, (unit % tiles_n) * BN, full);
        else
            tma_load_2d_mc(dst + kXTileBytes + (uint32_t)(rank * (BN / CL) * 128), &wmap, k * BK,
                           (unit % tiles_n) * BN + rank * (BN / CL), full, (uint16_t)((1u << CL) - 1));
    };
    // step g's stage released by this warp (in every CTA of the cluster); thread 0 refills it (step g + ST)
    auto release = [&](int g) {
        if (lane == 0) {
            const uint32_t e = bars + 8 * (ST + g % ST);
            mbar_arrive(e);
            for (int c = 1; c < CL; c++) mbar_arrive_cluster(cluster_map(e, (uint32_t)((rank + c) % CL)));
        }
        if (tid == 0 && g + ST < total) produce(g + ST);
    };
    if (tid == 0)
        for (int g = 0; g < ST && g < total; g++) produce(g);

    const int t = lane & 3;
    const uint32_t stg = stg0 + (uint32_t)(warp * kStgWarp);
    // this thread's bias pairs of pass q (columns n0 + 32 q + 8 ii + 2 t, + 1),
    // and with FOLD the column sums' pairs in cs
    auto load_bias = [&](int n0, int q, float2 (&bb)[4], float2 (&cs)[4]) {
#pragma unroll
        for (int ii = 0; ii < 4; ii++) {
            const int col = n0 + 32 * q + 8 * ii + 2 * t;
            bb[ii] = col < N ? make_float2(ck_ld(bias + col), ck_ld(bias + col + 1)) // N % 8 == 0: col + 1 < N
                             : make_float2(0.f, 0.f);
            if (FOLD) cs[ii] = col < N ? *reinterpret_cast<const float2 *>(fold.colsum + col) : make_float2(0.f, 0.f);
        }
    };
    int g = 0;
    for (int i = 0; i < mine; i++) {
        const int unit = unit0 + i * nunit;
        const int m0 = ((unit / tiles_n) * CL + rank) * BM, n0 = (unit % tiles_n) * BN;
        float acc[NA];
#pragma unroll
        for (int j = 0; j < NA; j++) acc[j] = 0.f;
        float2 bnext[4], cnext[4], rs[2] = {make_float2(0.f, 0.f), make_float2(0.f, 0.f)};
        load_bias(n0, 0, bnext, cnext); // in flight during the MMAs
        if (FOLD) // the stats of this thread's rows g and g + 8
#pragma unroll
            for (int h = 0; h < 2; h++) {
                const int row = m0 + wg * 64 + (warp & 3) * 16 + (lane >> 2) + 8 * h;
                if (row < M) rs[h] = fold.stats[row];
            }
        for (int k = 0; k < nk; k++, g++) {
            const int s = g % ST;
            mbar_wait(bars + 8 * s, (uint32_t)((g / ST) & 1));
            if (PROBE == 2) {
                release(g);
                continue;
            }
            const uint32_t st = sbase + (uint32_t)(s * kStage);
            const uint64_t ad = make_desc(st + (uint32_t)(wg * 64 * 128), 16, 1024),
                           bd = make_desc(st + kXTileBytes, 16, 1024);
            wgmma_fence();
#pragma unroll
            for (int kk = 0; kk < BK / 16; kk++)
                WgSS<T, BN>::mma(acc, ad + (uint64_t)(kk * 2), bd + (uint64_t)(kk * 2), k > 0 || kk > 0);
            wgmma_commit();
            if (k > 0) {
                wgmma_wait<1>(); // step g - 1's batch is complete
                release(g - 1);
            }
        }
        if (PROBE == 2) continue;
        wgmma_wait<0>();
        reg_fence(acc);
        release(g - 1);
        if (PROBE) continue;

        // Epilogue. Fragment d[4i + j] of the warp's 16 rows: row g + 8 (j >= 2),
        // column 8i + 2t + (j & 1) (wgmma's D layout, as mma.m16n8's). NQ
        // passes of 32 columns: bias (+ GELU), packed to 16 bits, staged with
        // stmatrix in the warp's area (16 rows x 80 bytes), read back as
        // 16-byte chunks and stored, 8 rows x 64 bytes an instruction.
        const int row0 = m0 + wg * 64 + (warp & 3) * 16;
#pragma unroll
        for (int q = 0; q < NQ; q++) {
            float2 bb[4], cs[4];
#pragma unroll
            for (int ii = 0; ii < 4; ii++) bb[ii] = bnext[ii], cs[ii] = cnext[ii];
            if (q + 1 < NQ) load_bias(n0, q + 1, bnext, cnext);
            uint32_t pk[4][2];
#pragma unroll
            for (int ii = 0; ii < 4; ii++) {
                const int i8 = 4 * q + ii;
                float v[4];
#pragma unroll
                for (int j = 0; j < 4; j++) {
                    const float bj = (j & 1) ? bb[ii].y : bb[ii].x;
                    const float u = FOLD ? fmaf(fmaf(-rs[j >> 1].x, (j & 1) ? cs[ii].y : cs[ii].x, acc[4 * i8 + j]),
                                                rs[j >> 1].y, bj)
                                         : acc[4 * i8 + j] + bj;
                    v[j] = GELU ? ck_gelu_fast(u) : u;
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
    if (CL > 1) cluster_sync(); // no CTA leaves while its peer may still arrive on its barriers
}

// A 2-D tensor map over a row-major [rows, cols] 16-bit matrix (cols
// contiguous, rows cols * 2 bytes apart), box 64 columns x box_rows rows.
template <typename T>
cudaError_t encode_2d(CUtensorMap *map, const void *base, int64_t rows, int64_t cols, int box_rows) {
    const cuuint64_t dims[2] = {(cuuint64_t)cols, (cuuint64_t)rows}, strides[1] = {(cuuint64_t)cols * sizeof(T)};
    const cuuint32_t box[2] = {BK, (cuuint32_t)box_rows};
    return encode_tmap<T>(map, 2, base, dims, strides, box);
}

// Stages: BN 128: 3 (107 KiB, two CTAs an SM); BN 256: 4 (203 KiB, one CTA).
template <int BN> constexpr int stages() { return BN == 128 ? 3 : 4; }

// The tile width for a shape when the caller leaves it open: 256 for stages
// 2-3's fc1 (K 448 / 896; stage 2's 65 us against 69 with 128), 128 for
// stages 0-1's (27 / 53 us against 29 / 61 with 256; H200, fp16). Clusters
// only when asked for (never faster there).
int pick_bn(int64_t M, int K, int N) {
    (void)M;
    return K >= 448 && N >= 1024 ? 256 : 128;
}

template <typename T, typename B, bool GELU, int BN, int CL, bool FOLD, int PROBE = 0>
cudaError_t launch(const void *x, int64_t M, int K, const void *W, const void *b, void *y, int N, LnFold fold,
                   cudaStream_t st) {
    alignas(64) CUtensorMap xm, wm;
    cudaError_t e = encode_2d<T>(&xm, x, M, K, BM);
    if (e == cudaSuccess) e = encode_2d<T>(&wm, W, N, K, BN / CL);
    if (e != cudaSuccess) return e;
    constexpr int ST = stages<BN>();
    auto kern = gemm_bias_gelu_kernel<T, B, BN, ST, GELU, CL, FOLD, PROBE>;
    constexpr int smem = gemm_smem<BN, ST>();
    e = cudaFuncSetAttribute(kern, cudaFuncAttributeMaxDynamicSharedMemorySize, smem);
    if (e != cudaSuccess) return e;
    int dev = 0, sms = 0;
    e = cudaGetDevice(&dev);
    if (e == cudaSuccess) e = cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, dev);
    if (e != cudaSuccess) return e;
    const int64_t units = ((M + BM - 1) / BM + CL - 1) / CL * ((N + BN - 1) / BN);
    const int64_t slots = (int64_t)(BN == 128 ? 2 : 1) * (sms / CL); // persistent: a unit per CTA slot (cluster)
    cudaLaunchAttribute cluster;
    cluster.id = cudaLaunchAttributeClusterDimension;
    cluster.val.clusterDim.x = CL;
    cluster.val.clusterDim.y = 1;
    cluster.val.clusterDim.z = 1;
    e = ck_launch_attr(kern, dim3((unsigned)((units < slots ? units : slots) * CL)), dim3(kThreads), smem, st, &cluster,
                       xm, wm, (int)M, N, K, (const B *)b, (T *)y, fold);
    if (e != cudaSuccess) return e;
    return cudaGetLastError();
}

template <typename T, typename B, bool GELU, bool FOLD = false>
cudaError_t launch_bn(int bn, int cl, const void *x, int64_t M, int K, const void *W, const void *b, void *y, int N,
                      cudaStream_t st, LnFold fold = LnFold{nullptr, nullptr}) {
    if (bn == 256)
        return cl == 2 ? launch<T, B, GELU, 256, 2, FOLD>(x, M, K, W, b, y, N, fold, st)
                       : launch<T, B, GELU, 256, 1, FOLD>(x, M, K, W, b, y, N, fold, st);
    return cl == 2 ? launch<T, B, GELU, 128, 2, FOLD>(x, M, K, W, b, y, N, fold, st)
                   : launch<T, B, GELU, 128, 1, FOLD>(x, M, K, W, b, y, N, fold, st);
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
    const int bn = (mode & CK_LINEAR_TILE_N256) ? 256 : (mode & CK_LINEAR_TILE_N128) ? 128 : pick_bn(M, K, N);
    const int cl = (mode & CK_LINEAR_CLUSTER2) ? 2 : 1;
    if (mode & (CK_LINEAR_PROBE_MAINLOOP | CK_LINEAR_PROBE_LOADS)) { /* timings only: fp16, GELU, no clusters */
        if (!f16 || cl != 1 || (mode & (CK_LINEAR_GELU | CK_LINEAR_BIAS16)) != CK_LINEAR_GELU)
            return fail(err, CKEY_ERR_UNSUPPORTED, "linear (wgmma): the probes are fp16 + GELU without clusters");
        const LnFold nf{nullptr, nullptr};
        const bool loads = mode & CK_LINEAR_PROBE_LOADS;
        if (bn == 256)
            e = loads ? launch<__half, float, true, 256, 1, false, 2>(x, M, K, W, b, y, N, nf, st)
                      : launch<__half, float, true, 256, 1, false, 1>(x, M, K, W, b, y, N, nf, st);
        else
            e = loads ? launch<__half, float, true, 128, 1, false, 2>(x, M, K, W, b, y, N, nf, st)
                      : launch<__half, float, true, 128, 1, false, 1>(x, M, K, W, b, y, N, nf, st);
        return e == cudaSuccess ? CKEY_OK : fail(err, CKEY_ERR_DEVICE, cudaGetErrorString(e));
    }
    switch (mode & (CK_LINEAR_GELU | CK_LINEAR_BIAS16)) {
    case CK_LINEAR_GELU:
        e = f16 ? launch_bn<__half, float, true>(bn, cl, x, M, K, W, b, y, N, st)
                : launch_bn<__nv_bfloat16, float, true>(bn, cl, x, M, K, W, b, y, N, st);
        break;
    case 0:
        e = f16 ? launch_bn<__half, float, false>(bn, cl, x, M, K, W, b, y, N, st)
                : launch_bn<__nv_bfloat16, float, false>(bn, cl, x, M, K, W, b, y, N, st);
        break;
    case CK_LINEAR_BIAS16:
        e = f16 ? launch_bn<__half, __half, false>(bn, cl, x, M, K, W, b, y, N, st)
                : launch_bn<__nv_bfloat16, __nv_bfloat16, false>(bn, cl, x, M, K, W, b, y, N, st);
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

extern "C" ckey_status ck_cuda_linear_gelu_ln(const void *x, int64_t M, int K, const void *W, const float *b,
                                             const float *colsum, const float *stats, void *y, int N, int mode,
                                             ck_dtype dt, void *stream, ckey_error *err) {
    if (!ck_cuda_linear_gelu_ok(M, K, N, dt))
        return fail(err, CKEY_ERR_UNSUPPORTED,
                    "linear + GELU (wgmma): needs fp16 / bf16, K and N multiples of 8, a compute capability 9.0 GPU");
    if ((((uintptr_t)x | (uintptr_t)W | (uintptr_t)y) & 15) || (((uintptr_t)b | (uintptr_t)colsum | (uintptr_t)stats) & 7))
        return fail(err, CKEY_ERR_INVALID_ARG,
                    "linear + GELU (wgmma): x, W, y must be 16-byte aligned, b, colsum, stats 8-byte");
    const int bn = (mode & CK_LINEAR_TILE_N256) ? 256 : (mode & CK_LINEAR_TILE_N128) ? 128 : pick_bn(M, K, N);
    const int cl = (mode & CK_LINEAR_CLUSTER2) ? 2 : 1;
    const LnFold fold{reinterpret_cast<const float2 *>(stats), colsum};
    cudaStream_t st = (cudaStream_t)stream;
    const cudaError_t e = dt == CK_F16 ? launch_bn<__half, float, true, true>(bn, cl, x, M, K, W, b, y, N, st, fold)
                                       : launch_bn<__nv_bfloat16, float, true, true>(bn, cl, x, M, K, W, b, y, N, st, fold);
    if (e != cudaSuccess) {
        char msg[160];
        snprintf(msg, sizeof msg, "CUDA: linear + GELU, LayerNorm folded (wgmma): %s", cudaGetErrorString(e));
        return fail(err, CKEY_ERR_DEVICE, msg);
    }
    return CKEY_OK;
}
