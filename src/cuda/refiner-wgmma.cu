// The refiner's 64 -> 64 dilated 3x3 convolutions on Hopper warpgroup MMA
// (wgmma.mma_async, sm_90a only: built with its own -gencode, like
// attention-wgmma.cu), fp16 / bf16 storage, fp32 accumulation. Same
// arguments, results and work (conv-work.cuh: chains of rows through a ring
// of input rows, persistent blocks) as the mma.sync kernel in refiner-mma.cu,
// whose comments explain the rest; what differs is the MMA.
//
// GEMM, transposed: D^T[cout][pixel] = W_tap[cout][cin] . X_tap^T[cin][pixel]
// for a tile of 128 output pixels of one row, K = 9 taps x 64 input
// channels: wgmma m64n128k16 with A = the weights (M = the 64 output
// channels), held in registers (36 k16 steps x 4 registers a thread, loaded
// once a block from global memory), and B = 128 pixel rows of the ring in
// shared memory, 36 wgmma a tile. One warpgroup a block, two blocks an SM,
// which run independently: one block's epilogue, row wait and GroupNorm
// transform overlap the other's MMAs. 255 registers (8 bytes spilled).
//
// Ring rows (shared memory): a pixel's 64 channels are one 128-byte row,
// K-major with the 128-byte swizzle (the canonical SWIZZLE_128B layout, as
// attention-wgmma.cu's K tile): the 16-byte chunk c of row j sits at byte
// j*128 + ((c ^ (j & 7)) * 16) of a 1024-byte aligned slot. A slot holds
// pixels x0 - d .. x0 + 127 + d of an input row, ceil((128 + 2d) / 8) KiB;
// there are kSlots = 5. Tap (ky, kx) reads the 128 rows starting at pixel
// kx*d of the slot of input row y + (ky-1)*d: a start that is a whole
// number of rows but not of 8-row (1024-byte) swizzle atoms. The hardware
// swizzles the computed address (its bits 7-9 pick the XOR), so rows read
// back as stored with the descriptor's base offset field (bits 49-51) left
// 0 (setting it to the start's row within its atom gives wrong results for
// every dilation but 8, where the starts are atom-aligned).
//
// Step k of a chain: row k+3 is sent for at the start of the step (into the
// slot step k-1's MMAs read last), the step's wgmma batch is issued, then
// each thread waits for its own cp.async chunks of row k+2
// (cp.async.wait_group 1) and applies the pending GroupNorm + ReLU to those
// same chunks; wgmma.wait_group 0 before the epilogue reads the
// accumulators. Epilogue: a thread's accumulators are 2 output channels
// (16 * warp + g, + 8) x 32 pixels; bias and GroupNorm sums (double, in
// shared memory laid out [4][thread]: the registers are full), then the
// 16-bit values go to the slot of row k-1 (this step's MMAs were its last
// readers; it is refilled next step) transposed by stmatrix.trans (8 x 8
// blocks land as 8 pixels x 8 channels, 16 bytes a pixel, swizzled), a
// __syncthreads, and out as 16-byte chunks of whole pixels.
// fence.proxy.async.shared::cta (the copies' and the transform's
// generic-proxy writes -> the MMAs' async proxy) and a __syncthreads end the
// step.
//
// Why this form (S = 2048, dil 4, H200; ms without / with the GroupNorm
// transform): 0.598 / 0.639, against 0.612 / 0.730 for two warpgroups a
// block of 64 pixels x 64 channels each (both operands in shared memory, one
// block an SM); the gain is the second block an SM, not the halved operand
// traffic. The double sums laid out [4][thread] avoid an 8-way bank conflict
// every step ([thread][4]: 0.628 / 0.643); each warp storing only its own 16
// channels after a __syncwarp (32-byte sectors) is slower (0.632 / 0.644).
// Under ncu (SM clock ~1.79 GHz) the tensor pipe is busy 53% of its time.
#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cuda_runtime.h>
#include <stdint.h>
#include <stdio.h>

#include "cuda/kernels.h"
#include "cuda/conv-work.cuh"
#include "cuda/launch.cuh"
#include "cuda/ptx.cuh"
#include "cuda/wgmma.cuh"

namespace {

constexpr int C = 64;      // Cin = Cout
constexpr int kSlots = 5;  // ring: rows k-1, k, k+1 of step k, k+2 landing, k+3 in flight
__host__ __device__ constexpr uint32_t slot_bytes(int dil) { return (uint32_t)((kTM + 2 * dil + 7) / 8) * 1024u; }
// + 1024 to align the start; the ring, bias, a, b (fp32), the group sums
// and each thread's four running sums (double)
size_t smem_total(int dil) {
    return 1024 + kSlots * (size_t)slot_bytes(dil) + 3 * C * sizeof(float) + 2 * C * sizeof(double) +
           4 * 128 * sizeof(double);
}

__device__ __forceinline__ uint32_t swz(int row, int chunk) { return (uint32_t)(row * 128 + ((chunk ^ (row & 7)) << 4)); }

__device__ __forceinline__ uint64_t desc_add(uint64_t d, uint32_t off) { return d + (off >> 4); }

template <typename T> __device__ __forceinline__ float2 unpack2(uint32_t w);
template <> __device__ __forceinline__ float2 unpack2<__half>(uint32_t w) {
    return __half22float2(*reinterpret_cast<__half2 *>(&w));
}
template <> __device__ __forceinline__ float2 unpack2<__nv_bfloat16>(uint32_t w) {
    return __bfloat1622float2(*reinterpret_cast<__nv_bfloat162 *>(&w));
}

// Four 8 x 8 16-bit matrices (r[i]: matrix i in the mma accumulator layout,
// row g = lane / 4, columns 2t, 2t + 1) stored transposed: row j of matrix i
// (its column j) at the address lane 8i + j gives.
__device__ __forceinline__ void stmatrix_t4(uint32_t addr, uint32_t r0, uint32_t r1, uint32_t r2, uint32_t r3) {
    asm volatile("stmatrix.sync.aligned.m8n8.x4.trans.shared.b16 [%0], {%1, %2, %3, %4};\n" ::"r"(addr), "r"(r0),
                 "r"(r1), "r"(r2), "r"(r3)
                 : "memory");
}

// Merged bands (ConvArgs.sync): an item of band `band` writes output rows
// ylo .. yhi (absolute, step d) at input rows q = y - shift. Input row q is
// read by the output rows q - d, q, q + d of earlier bands (never of this or
// a later one: shift >= band_rows + d), all in the item's residue class r
// (band_rows and shift are multiples of d), by the items of strips xt - 1 ..
// xt + 1 (the halo is d <= 8 pixels). Thread 0 waits until each of those
// items has flagged itself done (acquire loads).
__device__ __forceinline__ void wait_readers(const ConvArgs &p, int band, int r, int ylo, int yhi, int xt) {
    const int d = p.dil, B = p.band_rows;
    int prev = -1;
    for (int rho = ylo - p.shift_rows - d; rho <= yhi - p.shift_rows + d; rho += d) {
        if (rho < p.y0 || rho >= p.S) continue;
        const int bb = (rho - p.y0) / B;
        if (bb >= band) continue;
        const int kq = (rho - p.y0 - bb * B) / d, sq = kq / p.seg;
        const int key = bb * p.nseg + sq;
        if (key == prev) continue;
        prev = key;
        for (int xs = xt - 1; xs <= xt + 1; xs++) {
            if (xs < 0 || xs >= p.tiles_per_row) continue;
            const int64_t dep = (int64_t)bb * p.nitems + ((int64_t)r * p.nseg + sq) * p.tiles_per_row + xs;
            const int *f = p.sync + 1 + dep;
            int v;
            for (;;) {
                asm volatile("ld.acquire.gpu.global.s32 %0, [%1];\n" : "=r"(v) : "l"(f) : "memory");
                if (v) break;
                __nanosleep(64);
            }
        }
    }
}

template <typename T> __global__ void __launch_bounds__(128, 2) conv3x3_wg_kernel(ConvArgs p) {
    ck_pdl_enter();
    constexpr int NT = 128;                              // threads
    constexpr int RI = ((kTM + 2 * 8) * 8 + NT - 1) / NT; // 16-byte chunks of a ring row a thread copies, at most
    extern __shared__ __align__(16) uint8_t smem_raw[];
    const uint32_t raw = smem_addr(smem_raw), sbase = (raw + 1023u) & ~1023u;
    uint8_t *gbase = smem_raw + (sbase - raw);
    const int S = p.S, dil = p.dil, TMH = kTM + 2 * dil;
    const uint32_t sbytes = slot_bytes(dil), srows = sbase;
    float *sbias = reinterpret_cast<float *>(gbase + kSlots * sbytes);
    float *sa = sbias + C, *sb = sa + C;
    double *sstat = reinterpret_cast<double *>(sb + C);
    // this thread's running sums (double) of its two channels' values and
    // squares: ssum[e * NT] (a thread's four apart, so a warp's accesses are
    // consecutive doubles: no bank conflicts)
    double *ssum = sstat + 2 * C + threadIdx.x;
    const T *__restrict__ in = static_cast<const T *>(p.in);
    T *__restrict__ out = static_cast<T *>(p.out);
    const int tid = threadIdx.x, lane = tid & 31, warp = tid >> 5;
    const int g = lane >> 2, t = lane & 3;
    const bool affine = p.a != nullptr;

    for (int i = tid; i < C; i += NT) {
        sbias[i] = p.bias ? p.bias[i] : 0.f;
        sa[i] = affine ? p.a[i] : 1.f;
        sb[i] = affine ? p.b[i] : 0.f;
    }
    for (int i = tid; i < 2 * C; i += NT) sstat[i] = 0.0;
    ssum[0] = ssum[NT] = ssum[2 * NT] = ssum[3 * NT] = 0.0;
    // this thread's output channels c0 = 16 * warp + g and c0 + 8
    const int c0 = 16 * warp + g;
    // A fragments of the weights [9][Cout][Cin], k16 step j = 4 * tap + kc:
    // a0 (c0, cin 16kc + 2t, +1), a1 (c0 + 8, same), a2 (c0, + 8), a3 (c0 + 8, + 8)
    uint32_t wa[36][4];
    {
        const uint32_t *W = static_cast<const uint32_t *>(p.W); // pairs of cin
#pragma unroll
        for (int j = 0; j < 36; j++) {
            const int tap = j >> 2, kc = j & 3;
            const size_t r0 = (size_t)(tap * C + c0) * (C / 2), r1 = r0 + 8 * (C / 2);
            const int col = kc * 8 + t;
            wa[j][0] = W[r0 + col], wa[j][1] = W[r1 + col], wa[j][2] = W[r0 + col + 4], wa[j][3] = W[r1 + col + 4];
        }
    }
    __syncthreads(); // bias, sa, sb
    auto slot = [&](int q) { return srows + (uint32_t)((q + 1) % kSlots) * sbytes; }; // q >= -1
    // input row iy over pixels x0-d .. x0+kTM-1+d; zeros outside the image.
    // A thread copies 16-byte chunk lch = tid % 8 of pixels lj + 16 m.
    const int lj = tid >> 3, lch = tid & 7;
    const uint32_t lsw = swz(lj, lch);
    auto load_row = [&](int iy, int x0, uint32_t dst) {
        const bool row_in = iy >= 0 && iy < S;
        const T *src = in + (size_t)(row_in ? iy - p.in_r0 : 0) * S * C + (ptrdiff_t)(x0 - dil + lj) * C + lch * 8;
#pragma unroll
        for (int m = 0; m < RI; m++) {
            const int j = lj + (NT / 8) * m, ix = x0 - dil + j;
            if (j < TMH) {
                const bool ok = row_in && ix >= 0 && ix < S;
                cp_async16(dst + lsw + (uint32_t)(m * NT * 16), ok ? src + (ptrdiff_t)(NT / 8) * m * C : in, ok);
            }
        }
    };
    // relu(a*v + b) in place on this thread's chunks (channels 8 * lch ..) of
    // the in-image pixels of a loaded row
    auto transform_row = [&](int iy, int x0, uint32_t buf) {
        if (iy < 0 || iy >= S) return; // padding rows stay zero
        float ra[8], rb[8];
        {
            const float4 *a4 = reinterpret_cast<const float4 *>(sa + lch * 8);
            const float4 *b4 = reinterpret_cast<const float4 *>(sb + lch * 8);
            const float4 a0 = a4[0], a1 = a4[1], b0 = b4[0], b1 = b4[1];
            ra[0] = a0.x, ra[1] = a0.y, ra[2] = a0.z, ra[3] = a0.w;
            ra[4] = a1.x, ra[5] = a1.y, ra[6] = a1.z, ra[7] = a1.w;
            rb[0] = b0.x, rb[1] = b0.y, rb[2] = b0.z, rb[3] = b0.w;
            rb[4] = b1.x, rb[5] = b1.y, rb[6] = b1.z, rb[7] = b1.w;
        }
#pragma unroll
        for (int m = 0; m < RI; m++) {
            const int j = lj + (NT / 8) * m, ix = x0 - dil + j;
            if (j >= TMH || ix < 0 || ix >= S) continue;
            const uint32_t a = buf + lsw + (uint32_t)(m * NT * 16);
            uint32_t w[4];
            asm volatile("ld.shared.v4.u32 {%0, %1, %2, %3}, [%4];\n"
                         : "=r"(w[0]), "=r"(w[1]), "=r"(w[2]), "=r"(w[3])
                         : "r"(a));
#pragma unroll
            for (int e = 0; e < 4; e++) {
                float2 f = unpack2<T>(w[e]);
                f.x = fmaxf(fmaf(ra[2 * e], f.x, rb[2 * e]), 0.f);
                f.y = fmaxf(fmaf(ra[2 * e + 1], f.y, rb[2 * e + 1]), 0.f);
                w[e] = Pair16<T>::pack(f.x, f.y);
            }
            asm volatile("st.shared.v4.u32 [%0], {%1, %2, %3, %4};\n" ::"r"(a), "r"(w[0]), "r"(w[1]), "r"(w[2]),
                         "r"(w[3])
                         : "memory");
        }
    };

    const float bias0 = sbias[c0], bias1 = sbias[c0 + 8];
    const uint32_t dil_bytes = (uint32_t)dil * 128u;
    // stmatrix: lane L stores row L % 8 of matrix L / 8 = (pixel block +
    // (L / 16), channel chunk 2 * warp + (L / 8) % 2)
    const int st_pix = ((lane >> 4) << 3) + (lane & 7), st_chunk = 2 * warp + ((lane >> 3) & 1);

    // Items: a static share (item += gridDim.x), or with p.sync (several bands
    // in one launch, in place) handed out in order by an atomic counter, an
    // item of band b first waiting for the earlier bands' items that read
    // the rows it overwrites (wait_readers), and flagging itself done.
    const bool merged = p.sync != nullptr;
    const int64_t total = merged ? (int64_t)p.nbands * p.nitems : p.nitems;
    __shared__ int s_item;
    for (int64_t item = blockIdx.x;; item += gridDim.x) {
        if (merged) {
            __syncthreads(); // everyone has read the previous s_item
            if (tid == 0) s_item = atomicAdd(p.sync, 1);
            __syncthreads();
            item = s_item;
        }
        if (item >= total) break;
        const int band = merged ? (int)(item / p.nitems) : 0;
        const int64_t li = item - (int64_t)band * p.nitems;
        const int by0 = p.y0 + band * p.band_rows; // the band's first output row (absolute)
        const int brows = merged ? min(p.band_rows, S - by0) : p.rows;
        const ConvItem ci = conv_item(p, li, brows);
        const int r = ci.r, k0 = ci.k0, kend = ci.kend, x0 = ci.x0;
        if (k0 >= kend) {
            if (merged && tid == 0) atomicExch(p.sync + 1 + item, 1);
            continue;
        }
        if (merged && band > 0) {
            if (tid == 0) wait_readers(p, band, r, by0 + r + k0 * dil, by0 + r + (kend - 1) * dil, x0 / kTM);
            __syncthreads();
        }
        T *const bout = out + (size_t)band * p.band_rows * S * C; // the band's output, from its first row
        const int ybase = by0 + r;
        for (int q = k0 - 1; q <= k0 + 1; q++) load_row(ybase + q * dil, x0, slot(q));
        cp_async_commit();
        if (k0 + 2 <= kend) load_row(ybase + (k0 + 2) * dil, x0, slot(k0 + 2));
        cp_async_commit();
        cp_async_wait<1>();
        if (affine)
            for (int q = k0 - 1; q <= k0 + 1; q++) transform_row(ybase + q * dil, x0, slot(q));
        fence_proxy_async();
        __syncthreads();
        for (int k = k0; k < kend; k++) {
            if (k + 3 <= kend) load_row(ybase + (k + 3) * dil, x0, slot(k + 3));
            cp_async_commit();

            float acc[64];
            uint64_t bdesc[3]; // pixel rows of input rows k-1, k, k+1
#pragma unroll
            for (int ky = 0; ky < 3; ky++) bdesc[ky] = make_desc(slot(k - 1 + ky), 16, 1024);
            wgmma_fence();
#pragma unroll
            for (int tap = 0; tap < 9; tap++) {
                const int ky = tap / 3, kx = tap % 3;
                const uint64_t b0 = desc_add(bdesc[ky], (uint32_t)kx * dil_bytes);
#pragma unroll
                for (int kc = 0; kc < 4; kc++)
                    WgRS<T, 128>::template mma<0>(acc, wa[4 * tap + kc], desc_add(b0, kc * 32), tap > 0 || kc > 0);
            }
            wgmma_commit();
            cp_async_wait<1>(); // row k+2 (all but row k+3's group)
            if (affine && k + 2 <= kend) transform_row(ybase + (k + 2) * dil, x0, slot(k + 2));
            wgmma_wait<0>();
            reg_fence(acc);

            // epilogue. acc[4i + j]: channel c0 + 8 * (j >= 2), pixel
            // x0 + 8i + 2t + (j & 1). Staged in the slot of row k-1 (this
            // step's MMAs were its last readers; refilled next step) as
            // swizzled 128-byte pixel rows.
            const int y = r + k * dil;
            const uint32_t stg = slot(k - 1);
            {
                float s0 = 0.f, s1 = 0.f, q0 = 0.f, q1 = 0.f;
#pragma unroll
                for (int i = 0; i < 16; i += 2) {
                    uint32_t pk[2][2];
#pragma unroll
                    for (int h = 0; h < 2; h++) {
                        const int ii = i + h;
                        const float v0 = acc[4 * ii] + bias0, v1 = acc[4 * ii + 1] + bias0;
                        const float u0 = acc[4 * ii + 2] + bias1, u1 = acc[4 * ii + 3] + bias1;
                        const int x = x0 + 8 * ii + 2 * t;
                        if (x < S) s0 += v0, q0 += v0 * v0, s1 += u0, q1 += u0 * u0;
                        if (x + 1 < S) s0 += v1, q0 += v1 * v1, s1 += u1, q1 += u1 * u1;
                        pk[h][0] = Pair16<T>::pack(v0, v1), pk[h][1] = Pair16<T>::pack(u0, u1);
                    }
                    const int px = 8 * i + st_pix;
                    stmatrix_t4(stg + (uint32_t)(px * 128 + ((st_chunk ^ (px & 7)) << 4)), pk[0][0], pk[0][1],
                                pk[1][0], pk[1][1]);
                }
                ssum[0] += s0, ssum[NT] += s1, ssum[2 * NT] += q0, ssum[3 * NT] += q1;
            }
            __syncthreads(); // the staging is complete
            {
                T *orow = bout + (size_t)y * S * C;
#pragma unroll
                for (int m = 0; m < 8; m++) {
                    const int q = tid + 128 * m, px = q >> 3, ch = q & 7;
                    if (x0 + px < S) {
                        uint4 v;
                        asm volatile("ld.shared.v4.u32 {%0, %1, %2, %3}, [%4];\n"
                                     : "=r"(v.x), "=r"(v.y), "=r"(v.z), "=r"(v.w)
                                     : "r"(stg + (uint32_t)(px * 128 + ((ch ^ (px & 7)) << 4))));
                        *reinterpret_cast<uint4 *>(orow + (size_t)(x0 + px) * C + ch * 8) = v;
                    }
                }
            }
            fence_proxy_async(); // row k+2's copies and transform -> the MMAs
            __syncthreads();
        }
        if (merged) { // the item's stores, then its done flag (the release pattern of threadFenceReduction)
            __threadfence();
            __syncthreads();
            if (tid == 0) atomicExch(p.sync + 1 + item, 1);
        }
    }
    cp_async_wait<0>();
    if (!p.stats) return;
    // sums over the 4 lanes of a quad (same channels), then per group
    double v[4] = {ssum[0], ssum[NT], ssum[2 * NT], ssum[3 * NT]};
#pragma unroll
    for (int e = 0; e < 4; e++)
#pragma unroll
        for (int off = 1; off < 4; off <<= 1) v[e] += __shfl_xor_sync(0xffffffffu, v[e], off);
    const int cpg = C / p.groups;
    if (t == 0)
#pragma unroll
        for (int e = 0; e < 2; e++) {
            const int gi = (c0 + 8 * e) / cpg;
            atomicAdd(&sstat[2 * gi], v[e]);
            atomicAdd(&sstat[2 * gi + 1], v[2 + e]);
        }
    __syncthreads();
    if (tid < 2 * p.groups) atomicAdd(&p.stats[tid], sstat[tid]);
}

ckey_status fail(ckey_error *err, ckey_status s, const char *msg) {
    if (err) {
        snprintf(err->message, sizeof err->message, "%s", msg);
        err->status = s;
    }
    return s;
}

template <typename T> cudaError_t launch(const ConvArgs &a, int nsm, size_t smem, cudaStream_t st) {
    const cudaError_t e =
        cudaFuncSetAttribute(conv3x3_wg_kernel<T>, cudaFuncAttributeMaxDynamicSharedMemorySize, (int)smem);
    if (e != cudaSuccess) return e;
    const int blocks = 2 * nsm; // two an SM
    ConvArgs b = a;
    // an item a block at least (conv-work.cuh), over all of a merged launch's bands
    conv_plan(b, (blocks + b.nbands - 1) / b.nbands);
    const int64_t total = (int64_t)b.nbands * b.nitems;
    if (b.sync) {
        if (total + 1 > (int64_t)INT32_MAX) return cudaErrorInvalidValue;
        const cudaError_t m = cudaMemsetAsync(b.sync, 0, (size_t)(total + 1) * sizeof(int), st);
        if (m != cudaSuccess) return m;
    }
    const int64_t grid = total < blocks ? total : blocks;
    ck_launch(conv3x3_wg_kernel<T>, (unsigned)grid, 128, smem, (cudaStream_t)st, b);
    return cudaGetLastError();
}

// Checks and launches either form: rows y0 .. y1-1 into a separate out, or
// (sync) the whole image in place, bands of band_rows written shift_rows
// rows before the input.
ckey_status conv_call(const void *in, int in_r0, int S, int dil, const void *W, const float *bias, const float *in_a,
                      const float *in_b, void *out, int y0, int y1, int band_rows, int shift_rows, int *sync,
                      int64_t sync_cap, int groups, double *stats, ck_dtype dt, void *stream, ckey_error *err) {
    if (stats && (groups < 1 || groups > C || C % groups))
        return fail(err, CKEY_ERR_UNSUPPORTED, "conv3x3 wgmma: groups must divide 64");
    if (dt != CK_F16 && dt != CK_BF16) return fail(err, CKEY_ERR_UNSUPPORTED, "conv3x3 wgmma: storage must be fp16 or bf16");
    if (sync && out == in) return fail(err, CKEY_ERR_INVALID_ARG, "conv3x3 wgmma: out must not alias in");
    if (S <= 0 || dil <= 0) return fail(err, CKEY_ERR_INVALID_ARG, "conv3x3 wgmma: bad size or dilation");
    if (dil > 8) return fail(err, CKEY_ERR_UNSUPPORTED, "conv3x3 wgmma: dilations up to 8 (the row copies' unrolling)");
    if (y0 < 0 || y1 > S || y0 >= y1) return fail(err, CKEY_ERR_INVALID_ARG, "conv3x3 wgmma: bad row range");
    if (in_r0 < 0 || in_r0 >= S || (sync && in_r0))
        return fail(err, CKEY_ERR_INVALID_ARG, "conv3x3 wgmma: bad input band");
    if ((in_a == NULL) != (in_b == NULL))
        return fail(err, CKEY_ERR_INVALID_ARG, "conv3x3 wgmma: in_a and in_b go together");
    if (!sync && band_overlaps(in, in_r0, C, S, dil, out, y0, y1, C))
        return fail(err, CKEY_ERR_INVALID_ARG, "conv3x3 wgmma: out overlaps the input rows it reads");
    if (sync && (band_rows <= 0 || band_rows % dil || shift_rows % dil || shift_rows < band_rows + dil))
        return fail(err, CKEY_ERR_INVALID_ARG,
                    "conv3x3 wgmma in place: bands and shift must be multiples of the dilation, shift >= band + dil");
    int dev = 0, nsm = 0, maxsmem = 0;
    cudaGetDevice(&dev);
    cudaDeviceGetAttribute(&nsm, cudaDevAttrMultiProcessorCount, dev);
    cudaDeviceGetAttribute(&maxsmem, cudaDevAttrMaxSharedMemoryPerBlockOptin, dev);
    const size_t smem = smem_total(dil);
    if (smem > (size_t)maxsmem) {
        char msg[160];
        snprintf(msg, sizeof msg, "conv3x3 wgmma: dilation %d needs %zu bytes of shared memory, the device has %d", dil,
                 smem, maxsmem);
        return fail(err, CKEY_ERR_UNSUPPORTED, msg);
    }
    ConvArgs a;
    a.in = in, a.W = W, a.bias = bias, a.a = in_a, a.b = in_b, a.out = out, a.stats = stats;
    a.S = S, a.dil = dil, a.groups = groups, a.y0 = y0, a.rows = sync ? band_rows : y1 - y0, a.in_r0 = in_r0;
    a.tiles_per_row = (S + kTM - 1) / kTM;
    a.seg = a.nseg = 0, a.nitems = 0;
    a.nbands = sync ? (S + band_rows - 1) / band_rows : 1;
    a.band_rows = sync ? band_rows : y1 - y0, a.shift_rows = sync ? shift_rows : 0, a.sync = sync;
    if (sync) { /* the flags must fit: the most items the plan can make (kMinSeg-step segments) */
        const int64_t most = (int64_t)a.nbands * dil * ((band_rows / dil + kMinSeg - 1) / kMinSeg + 1) * a.tiles_per_row;
        if (most + 1 > sync_cap) return fail(err, CKEY_ERR_UNSUPPORTED, "conv3x3 wgmma in place: too many work items");
    }
    cudaStream_t st = (cudaStream_t)stream;
    const cudaError_t e = dt == CK_F16 ? launch<__half>(a, nsm, smem, st) : launch<__nv_bfloat16>(a, nsm, smem, st);
    if (e != cudaSuccess) {
        char msg[160];
        snprintf(msg, sizeof msg, "CUDA: conv3x3 wgmma: %s", cudaGetErrorString(e));
        return fail(err, CKEY_ERR_DEVICE, msg);
    }
    return CKEY_OK;
}

} // namespace

extern "C" ckey_status ck_cuda_conv3x3_wgmma_rows(const void *in, int S, int dil, const void *W, const float *bias,
                                                 const float *in_a, const float *in_b, void *out, int y0, int y1,
                                                 int groups, double *stats, ck_dtype dt, void *stream,
                                                 ckey_error *err) {
    return conv_call(in, 0, S, dil, W, bias, in_a, in_b, out, y0, y1, 0, 0, NULL, 0, groups, stats, dt, stream, err);
}

extern "C" ckey_status ck_cuda_conv3x3_wgmma_band(const void *in, int in_r0, int S, int dil, const void *W,
                                                 const float *bias, const float *in_a, const float *in_b, void *out,
                                                 int y0, int y1, int groups, double *stats, ck_dtype dt, void *stream,
                                                 ckey_error *err) {
    return conv_call(in, in_r0, S, dil, W, bias, in_a, in_b, out, y0, y1, 0, 0, NULL, 0, groups, stats, dt, stream,
                     err);
}

extern "C" ckey_status ck_cuda_conv3x3_wgmma_inplace(const void *in, int S, int dil, const void *W, const float *bias,
                                                    const float *in_a, const float *in_b, int band_rows,
                                                    int shift_rows, int *sync, int64_t sync_cap, int groups,
                                                    double *stats, ck_dtype dt, void *stream, ckey_error *err) {
    if (!sync) return fail(err, CKEY_ERR_INVALID_ARG, "conv3x3 wgmma in place: no sync buffer");
    const size_t row = (size_t)S * C * 2; /* 16-bit storage (conv_call refuses the rest) */
    void *out = (void *)((const char *)in - (size_t)shift_rows * row);
    return conv_call(in, 0, S, dil, W, bias, in_a, in_b, out, 0, S, band_rows, shift_rows, sync, sync_cap, groups, stats,
                     dt, stream, err);
}
