// The refiner's dilated 3x3 convolutions (64 -> 64 in the real model) on
// 16-bit storage as implicit GEMM on tensor cores (mma.sync m16n8k16, fp32
// accumulation). Maps are channels-last [S*S, C].
//
// Conv design (persistent blocks, one an SM, two for the stem; 8 warps):
//  - GEMM view: M = pixels, N = Cout, K = 9 taps x Cin. A tile is 128 pixels
//    of one output row; each warp computes 32 pixels x Cout/2 channels.
//  - Shared memory: all 9 taps of the weights, [tap][Cout][Cin] (loaded once
//    per block, reused for every tile it computes), and a ring of 4 input
//    rows over pixels x0-d .. x0+127+d (the dilated halo): a block walks
//    output rows y, y+d, y+2d, ... of a column strip, which share two of
//    their three input rows, so each tile loads one new row (cp.async, one
//    row ahead). Out-of-image pixels are zeros. Rows are padded by 16 bytes
//    so ldmatrix reads of 8 consecutive pixels (or output channels) hit 8
//    distinct bank groups.
//  - A pending GroupNorm + ReLU (in_a, in_b) is applied in shared memory,
//    once per loaded row, to in-image pixels only: padding stays zero.
//  - Epilogue: bias, per-channel sum / sum of squares (fp32 over a thread's 4
//    values of a tile, then double across tiles, lanes, warps and blocks),
//    16-bit store.
#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cuda_runtime.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cuda/kernels.h"
#include "cuda/conv-work.cuh"
#include "cuda/launch.cuh"

namespace {

constexpr int kThreads = 256; // 8 warps: 4 along pixels x 2 along output channels

ckey_status fail(ckey_error *err, ckey_status s, const char *msg) {
    if (err) {
        snprintf(err->message, sizeof err->message, "%s", msg);
        err->status = s;
    }
    return s;
}

ckey_status cuda_check(ckey_error *err, cudaError_t e, const char *what) {
    if (e == cudaSuccess) return CKEY_OK;
    if (err) {
        snprintf(err->message, sizeof err->message, "CUDA: %s: %s", what, cudaGetErrorString(e));
        err->status = CKEY_ERR_DEVICE;
    }
    return CKEY_ERR_DEVICE;
}

// ---- storage types -------------------------------------------------------

// two floats -> two 16-bit values in one 32-bit word (lower address first)
template <typename T> __device__ __forceinline__ uint32_t pack2(float lo, float hi);
template <> __device__ __forceinline__ uint32_t pack2<__half>(float lo, float hi) {
    __half2 h = __floats2half2_rn(lo, hi);
    return *reinterpret_cast<uint32_t *>(&h);
}
template <> __device__ __forceinline__ uint32_t pack2<__nv_bfloat16>(float lo, float hi) {
    __nv_bfloat162 h = __floats2bfloat162_rn(lo, hi);
    return *reinterpret_cast<uint32_t *>(&h);
}
template <typename T> __device__ __forceinline__ float2 unpack2(uint32_t w);
template <> __device__ __forceinline__ float2 unpack2<__half>(uint32_t w) {
    return __half22float2(*reinterpret_cast<__half2 *>(&w));
}
template <> __device__ __forceinline__ float2 unpack2<__nv_bfloat16>(uint32_t w) {
    return __bfloat1622float2(*reinterpret_cast<__nv_bfloat162 *>(&w));
}

// ---- PTX wrappers ----------------------------------------------------------

__device__ __forceinline__ uint32_t smem_u32(const void *p) {
    return (uint32_t)__cvta_generic_to_shared(p);
}
__device__ __forceinline__ void cp_async16(uint32_t dst, const void *src) {
    asm volatile("cp.async.cg.shared.global [%0], [%1], 16;\n" ::"r"(dst), "l"(src));
}
__device__ __forceinline__ void cp_async_commit() { asm volatile("cp.async.commit_group;\n" ::); }
template <int N> __device__ __forceinline__ void cp_async_wait() {
    asm volatile("cp.async.wait_group %0;\n" ::"n"(N));
}
__device__ __forceinline__ void ldsm_x4(uint32_t (&r)[4], uint32_t addr) {
    asm volatile("ldmatrix.sync.aligned.m8n8.x4.shared.b16 {%0,%1,%2,%3}, [%4];\n"
                 : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3])
                 : "r"(addr));
}
__device__ __forceinline__ void ldsm_x2(uint32_t &r0, uint32_t &r1, uint32_t addr) {
    asm volatile("ldmatrix.sync.aligned.m8n8.x2.shared.b16 {%0,%1}, [%2];\n" : "=r"(r0), "=r"(r1) : "r"(addr));
}
template <typename T> __device__ __forceinline__ void mma16816(float (&d)[4], const uint32_t (&a)[4], uint32_t b0,
                                                               uint32_t b1);
template <> __device__ __forceinline__ void mma16816<__half>(float (&d)[4], const uint32_t (&a)[4], uint32_t b0,
                                                             uint32_t b1) {
    asm volatile("mma.sync.aligned.m16n8k16.row.col.f32.f16.f16.f32 {%0,%1,%2,%3}, {%4,%5,%6,%7}, {%8,%9}, "
                 "{%0,%1,%2,%3};\n"
                 : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3])
                 : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b0), "r"(b1));
}
template <> __device__ __forceinline__ void mma16816<__nv_bfloat16>(float (&d)[4], const uint32_t (&a)[4], uint32_t b0,
                                                                    uint32_t b1) {
    asm volatile("mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32 {%0,%1,%2,%3}, {%4,%5,%6,%7}, {%8,%9}, "
                 "{%0,%1,%2,%3};\n"
                 : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3])
                 : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b0), "r"(b1));
}

// ---- the convolution ----------------------------------------------------

// Cin = 8 (the stem: the image's 7 channels padded to 8) pairs taps: k16
// step j holds taps 2j and 2j + 1, 8 channels each (tap 9 is zero weights),
// so a 3x3 conv is 5 k16 steps instead of 9 with the channels padded to 16.
// Its weights are packed [5][Cout][16] (ck_conv3x3_tc_pack_weights_host).
template <int CIN> struct TapPack {
    static constexpr bool PAIR = CIN == 8;
    static constexpr int KW = PAIR ? 16 : CIN;  // K of a weight row (a k16 step's taps x channels)
    static constexpr int NSTEP = PAIR ? 5 : 9;  // weight rows per output channel
};

// shared memory layout, in bytes from the start of the dynamic allocation
template <int CIN, int COUT> struct ConvSmem {
    static constexpr int PSW = TapPack<CIN>::KW + 8;            // padded weight-row stride, elements
    static constexpr int PSA = TapPack<CIN>::PAIR ? 8 : CIN + 8; // pixel stride (16 bytes: conflict-free as is)
    static constexpr size_t w_bytes = (size_t)TapPack<CIN>::NSTEP * COUT * PSW * 2;
    __host__ __device__ static size_t row_bytes(int dil) { return (size_t)(kTM + 2 * dil) * PSA * 2; }
    static size_t total(int dil) {
        return w_bytes + 4 * row_bytes(dil) + 2 * CIN * sizeof(float) + 2 * 64 * sizeof(double);
    }
};

// Blocks an SM: the stem (Cin 8, or 16) is bound by each tile's latency, not
// the MMAs, so it runs two blocks an SM (128 registers, no spill): at Cin 16,
// 325 us against 405 with one at S = 2048 on the H200 (three spill at 80
// registers: 397). With Cin 8 (the paired taps) the stem conv takes 237 us.
template <int CIN> constexpr int conv_blocks_per_sm() { return CIN <= 16 ? 2 : 1; }

// The work decomposition (chains of rows, items) is conv-work.cuh's.
template <typename T, int CIN, int COUT>
__global__ void __launch_bounds__(kThreads, conv_blocks_per_sm<CIN>()) conv3x3_tc_kernel(ConvArgs p) {
    ck_pdl_enter();
    using L = ConvSmem<CIN, COUT>;
    using TP = TapPack<CIN>;
    constexpr int PSA = L::PSA, PSW = L::PSW;
    constexpr int CPX = CIN / 8;  // 16-byte chunks per pixel
    constexpr int NT = COUT / 16; // n8 tiles per warp (a warp covers COUT/2 channels)
    constexpr int WN = COUT / 2;
    extern __shared__ __align__(16) unsigned char smem[];
    const int S = p.S, dil = p.dil, TMH = kTM + 2 * dil;
    const uint32_t row_bytes = (uint32_t)L::row_bytes(dil);
    T *sw = reinterpret_cast<T *>(smem);
    unsigned char *srows = smem + L::w_bytes; // ring: chain row q in slot (q + 1) % 4
    float *sa = reinterpret_cast<float *>(srows + 4 * row_bytes), *sb = sa + CIN;
    double *sstat = reinterpret_cast<double *>(sb + CIN);
    const T *__restrict__ in = static_cast<const T *>(p.in);
    T *__restrict__ out = static_cast<T *>(p.out);
    const int tid = threadIdx.x, lane = tid & 31, warp = tid >> 5;
    const int wm = warp & 3, wn = warp >> 2;
    const bool affine = p.a != nullptr;

    for (int i = tid; i < CIN; i += kThreads) {
        sa[i] = affine ? p.a[i] : 1.f;
        sb[i] = affine ? p.b[i] : 0.f;
    }
    for (int i = tid; i < 2 * 64; i += kThreads) sstat[i] = 0.0;
    // weights [NSTEP][COUT][KW] (global) -> [NSTEP][COUT][PSW] (shared)
    {
        const T *W = static_cast<const T *>(p.W);
        constexpr int CPW = TP::KW / 8;
        for (int i = tid; i < TP::NSTEP * COUT * CPW; i += kThreads) {
            const int row = i / CPW, ch = i % CPW;
            cp_async16(smem_u32(sw + row * PSW + ch * 8), W + (size_t)row * TP::KW + ch * 8);
        }
    }
    auto slot = [&](int q) { return srows + (uint32_t)((q + 1) & 3) * row_bytes; };
    // input row iy over pixels x0-d .. x0+kTM-1+d into `dst`; zeros outside the image
    auto load_row = [&](int iy, int x0, unsigned char *dst) {
        const bool row_in = iy >= 0 && iy < S;
        T *drow = reinterpret_cast<T *>(dst);
        const T *srow = in + (size_t)(row_in ? iy - p.in_r0 : 0) * S * CIN;
        for (int i = tid; i < TMH * CPX; i += kThreads) {
            const int j = i / CPX, ch = i % CPX, ix = x0 - dil + j;
            T *d = drow + j * PSA + ch * 8;
            if (row_in && ix >= 0 && ix < S)
                cp_async16(smem_u32(d), srow + (size_t)ix * CIN + ch * 8);
            else
                *reinterpret_cast<uint4 *>(d) = make_uint4(0, 0, 0, 0);
        }
    };
    // relu(a*v + b) in place on the in-image pixels of a loaded row. With
    // kThreads a multiple of CPX a thread always sees the same 8 channels.
    constexpr bool kFixedCh = kThreads % CPX == 0;
    auto transform_row = [&](int iy, int x0, unsigned char *buf) {
        if (iy < 0 || iy >= S) return; // padding rows stay zero
        float ra[8], rb[8];
        if (kFixedCh) {
#pragma unroll
            for (int e = 0; e < 8; e++) ra[e] = sa[(tid % CPX) * 8 + e], rb[e] = sb[(tid % CPX) * 8 + e];
        }
        T *drow = reinterpret_cast<T *>(buf);
        for (int i = tid; i < TMH * CPX; i += kThreads) {
            const int j = i / CPX, ch = i % CPX, ix = x0 - dil + j;
            if (ix < 0 || ix >= S) continue;
            if (!kFixedCh) {
#pragma unroll
                for (int e = 0; e < 8; e++) ra[e] = sa[ch * 8 + e], rb[e] = sb[ch * 8 + e];
            }
            uint4 *d = reinterpret_cast<uint4 *>(drow + j * PSA + ch * 8);
            uint4 v = *d;
            uint32_t *w = reinterpret_cast<uint32_t *>(&v);
#pragma unroll
            for (int e = 0; e < 4; e++) {
                float2 f = unpack2<T>(w[e]);
                f.x = fmaxf(fmaf(ra[2 * e], f.x, rb[2 * e]), 0.f);
                f.y = fmaxf(fmaf(ra[2 * e + 1], f.y, rb[2 * e + 1]), 0.f);
                w[e] = pack2<T>(f.x, f.y);
            }
            *d = v;
        }
    };

    // per-thread channel statistics, double across tiles: channels
    // wn*WN + nt*8 + (lane%4)*2 + e
    double ssum[NT][2], ssq[NT][2];
#pragma unroll
    for (int nt = 0; nt < NT; nt++) ssum[nt][0] = ssum[nt][1] = ssq[nt][0] = ssq[nt][1] = 0.0;
    float bias[NT][2]; // this thread's bias, in registers (see refiner-wgmma.cu)
#pragma unroll
    for (int nt = 0; nt < NT; nt++)
#pragma unroll
        for (int e = 0; e < 2; e++) bias[nt][e] = p.bias ? p.bias[wn * WN + nt * 8 + (lane & 3) * 2 + e] : 0.f;

    // lane addresses for ldmatrix: A rows are pixels (lane%16), k chunk lane/16;
    // B rows are output channels (lane%8 + 8*(lane/16)), k chunk (lane/8)%2
    // (PAIR: no k chunk in the pixel row; lane / 16 picks the step's second tap instead)
    const uint32_t a_lane = (uint32_t)(((wm * 32 + (lane & 15)) * PSA + (TP::PAIR ? 0 : (lane >> 4) * 8)) * 2);
    const uint32_t b_lane =
        smem_u32(sw) + (uint32_t)(((wn * WN + (lane & 7) + ((lane >> 4) << 3)) * PSW + ((lane >> 3) & 1) * 8) * 2);
    for (int64_t item = blockIdx.x; item < p.nitems; item += gridDim.x) {
        const ConvItem ci = conv_item(p, item, p.rows);
        const int r = ci.r, k0 = ci.k0, kend = ci.kend, x0 = ci.x0;
        if (k0 >= kend) continue;
        const int ybase = p.y0 + r; // image row of chain step 0
        // chain row q is image row r + q*d; step k needs rows k-1, k, k+1
        for (int q = k0 - 1; q <= k0 + 1; q++) load_row(ybase + q * dil, x0, slot(q));
        cp_async_commit();
        for (int k = k0; k < kend; k++) {
            if (k + 2 <= kend) load_row(ybase + (k + 2) * dil, x0, slot(k + 2));
            cp_async_commit();
            cp_async_wait<1>();
            __syncthreads();
            if (affine) {
                if (k == k0)
                    for (int q = k0 - 1; q <= k0 + 1; q++) transform_row(ybase + q * dil, x0, slot(q));
                else
                    transform_row(ybase + (k + 1) * dil, x0, slot(k + 1));
                __syncthreads();
            }
            float acc[2][NT][4];
#pragma unroll
            for (int mt = 0; mt < 2; mt++)
#pragma unroll
                for (int nt = 0; nt < NT; nt++)
                    acc[mt][nt][0] = acc[mt][nt][1] = acc[mt][nt][2] = acc[mt][nt][3] = 0.f;
            const uint32_t a_row[3] = {smem_u32(slot(k - 1)) + a_lane, smem_u32(slot(k)) + a_lane,
                                       smem_u32(slot(k + 1)) + a_lane};
#pragma unroll
            for (int step = 0; step < TP::NSTEP; step++) {
                // the tap this lane's A rows come from: step's (9 steps), or for PAIR taps 2 step
                // (lanes 0-15: k 0-7) and 2 step + 1 (lanes 16-31: k 8-15; tap 9 = tap 8 x zero weights)
                const int tap = TP::PAIR ? min(2 * step + (lane >> 4), 8) : step;
                const int ky = tap / 3, kx = tap - 3 * ky;
                const uint32_t arow = TP::PAIR ? (ky == 0 ? a_row[0] : ky == 1 ? a_row[1] : a_row[2]) : a_row[ky];
                const uint32_t a_tap = arow + (uint32_t)(kx * dil * PSA * 2);
                const uint32_t b_tap = b_lane + (uint32_t)(step * COUT * PSW * 2);
#pragma unroll
                for (int kc = 0; kc < TP::KW / 16; kc++) {
                    uint32_t af[2][4];
                    ldsm_x4(af[0], a_tap + kc * 32);
                    ldsm_x4(af[1], a_tap + 16 * PSA * 2 + kc * 32);
                    uint32_t bf[NT][2];
#pragma unroll
                    for (int j = 0; j < NT; j += 2) {
                        const uint32_t addr = b_tap + (uint32_t)(j * 8 * PSW * 2 + kc * 32);
                        if (j + 1 < NT) {
                            uint32_t rr[4];
                            ldsm_x4(rr, addr);
                            bf[j][0] = rr[0], bf[j][1] = rr[1], bf[j + 1][0] = rr[2], bf[j + 1][1] = rr[3];
                        } else {
                            ldsm_x2(bf[j][0], bf[j][1], addr);
                        }
                    }
#pragma unroll
                    for (int mt = 0; mt < 2; mt++)
#pragma unroll
                        for (int nt = 0; nt < NT; nt++) mma16816<T>(acc[mt][nt], af[mt], bf[nt][0], bf[nt][1]);
                }
            }
            // epilogue: bias, statistics, store. With NT = 4 the packed pairs
            // are transposed within each quad of lanes (quad_transpose) so
            // that a lane stores 8 channels, 16 bytes, at once (4-byte stores
            // fill half of each 32-byte sector).
            {
                const int y = r + k * dil; // output row y0 + y, stored as row y
                T *orow = out + (size_t)y * S * COUT;
                float s0[NT], s1[NT], q0[NT], q1[NT];
#pragma unroll
                for (int nt = 0; nt < NT; nt++) s0[nt] = s1[nt] = q0[nt] = q1[nt] = 0.f;
#pragma unroll
                for (int mt = 0; mt < 2; mt++)
#pragma unroll
                    for (int h = 0; h < 2; h++) {
                        const int x = x0 + wm * 32 + mt * 16 + h * 8 + (lane >> 2);
                        const bool in_img = x < S;
                        uint32_t w[NT];
#pragma unroll
                        for (int nt = 0; nt < NT; nt++) {
                            const float v0 = acc[mt][nt][2 * h] + bias[nt][0], v1 = acc[mt][nt][2 * h + 1] + bias[nt][1];
                            if (in_img) s0[nt] += v0, s1[nt] += v1, q0[nt] += v0 * v0, q1[nt] += v1 * v1;
                            w[nt] = pack2<T>(v0, v1);
                        }
                        if constexpr (NT == 4) {
                            quad_transpose(w, lane & 3);
                            if (in_img)
                                reinterpret_cast<uint4 *>(orow + (size_t)x * COUT + wn * WN)[lane & 3] =
                                    make_uint4(w[0], w[1], w[2], w[3]);
                        } else if (in_img) {
#pragma unroll
                            for (int nt = 0; nt < NT; nt++)
                                *reinterpret_cast<uint32_t *>(orow + (size_t)x * COUT + wn * WN + nt * 8 +
                                                              (lane & 3) * 2) = w[nt];
                        }
                    }
#pragma unroll
                for (int nt = 0; nt < NT; nt++)
                    ssum[nt][0] += s0[nt], ssum[nt][1] += s1[nt], ssq[nt][0] += q0[nt], ssq[nt][1] += q1[nt];
            }
            __syncthreads(); // slot(k - 1) is refilled by the next step's prefetch
        }
    }
    cp_async_wait<0>();
    if (!p.stats) return;
    conv_stats_finish<NT>(ssum, ssq, wn * WN, COUT, p, sstat);
}

template <typename T, int CIN, int COUT>
ckey_status launch_conv(const ConvArgs &a, cudaStream_t st, ckey_error *err) {
    const size_t smem = ConvSmem<CIN, COUT>::total(a.dil);
    int dev = 0, nsm = 0, maxsmem = 0;
    cudaGetDevice(&dev);
    cudaDeviceGetAttribute(&nsm, cudaDevAttrMultiProcessorCount, dev);
    cudaDeviceGetAttribute(&maxsmem, cudaDevAttrMaxSharedMemoryPerBlockOptin, dev);
    if (smem > (size_t)maxsmem) {
        char msg[160];
        snprintf(msg, sizeof msg, "conv3x3 tc: dilation %d needs %zu bytes of shared memory, the device has %d",
                 a.dil, smem, maxsmem);
        return fail(err, CKEY_ERR_UNSUPPORTED, msg);
    }
    ckey_status s = cuda_check(err,
                               cudaFuncSetAttribute(conv3x3_tc_kernel<T, CIN, COUT>,
                                                    cudaFuncAttributeMaxDynamicSharedMemorySize, (int)smem),
                               "conv3x3 tc smem attribute");
    if (s) return s;
    ConvArgs b = a;
    const int nblk = nsm * conv_blocks_per_sm<CIN>();
    conv_plan(b, 3LL * nblk);
    const int64_t grid = b.nitems < nblk ? b.nitems : nblk;
    ck_launch(conv3x3_tc_kernel<T, CIN, COUT>, (unsigned)grid, kThreads, smem, (cudaStream_t)st, b);
    return cuda_check(err, cudaGetLastError(), "conv3x3 tc");
}

template <typename T, int CIN>
ckey_status dispatch_cout(const ConvArgs &a, int Cout, cudaStream_t st, ckey_error *err) {
    switch (Cout) {
    case 16: return launch_conv<T, CIN, 16>(a, st, err);
    case 32: return launch_conv<T, CIN, 32>(a, st, err);
    case 48: return launch_conv<T, CIN, 48>(a, st, err);
    case 64: return launch_conv<T, CIN, 64>(a, st, err);
    }
    return fail(err, CKEY_ERR_UNSUPPORTED, "conv3x3 tc: Cout must be 16, 32, 48 or 64");
}

template <typename T>
ckey_status dispatch_conv(const ConvArgs &a, int Cin, int Cout, cudaStream_t st, ckey_error *err) {
    switch (Cin) {
    case 8: return dispatch_cout<T, 8>(a, Cout, st, err);
    case 16: return dispatch_cout<T, 16>(a, Cout, st, err);
    case 32: return dispatch_cout<T, 32>(a, Cout, st, err);
    case 48: return dispatch_cout<T, 48>(a, Cout, st, err);
    case 64: return dispatch_cout<T, 64>(a, Cout, st, err);
    }
    return fail(err, CKEY_ERR_UNSUPPORTED, "conv3x3 tc: Cin must be 8, 16, 32, 48 or 64");
}

} // namespace

extern "C" {

ckey_status ck_cuda_conv3x3_tc_band(const void *in, int in_r0, int Cin, int S, int dil, const void *W,
                                    const float *bias, const float *in_a, const float *in_b, void *out, int y0, int y1,
                                    int Cout, int groups, double *stats, ck_dtype dt, void *stream, ckey_error *err) {
    if ((Cin != 8 && (Cin % 16 || Cin < 16 || Cin > 64)) || Cout % 16 || Cout < 16 || Cout > 64)
        return fail(err, CKEY_ERR_UNSUPPORTED, "conv3x3 tc: Cin must be 8, 16, 32, 48 or 64, Cout 16, 32, 48 or 64");
    if (stats && (groups < 1 || groups > 64 || Cout % groups))
        return fail(err, CKEY_ERR_UNSUPPORTED, "conv3x3 tc: groups must divide Cout (at most 64)");
    if (dt != CK_F16 && dt != CK_BF16) return fail(err, CKEY_ERR_UNSUPPORTED, "conv3x3 tc: storage must be fp16 or bf16");
    if (S <= 0 || dil <= 0) return fail(err, CKEY_ERR_INVALID_ARG, "conv3x3 tc: bad size or dilation");
    if (y0 < 0 || y1 > S || y0 >= y1) return fail(err, CKEY_ERR_INVALID_ARG, "conv3x3 tc: bad row range");
    if (in_r0 < 0 || in_r0 >= S) return fail(err, CKEY_ERR_INVALID_ARG, "conv3x3 tc: bad input band");
    if (band_overlaps(in, in_r0, Cin, S, dil, out, y0, y1, Cout))
        return fail(err, CKEY_ERR_INVALID_ARG, "conv3x3 tc: out overlaps the input rows it reads");
    if ((in_a == NULL) != (in_b == NULL))
        return fail(err, CKEY_ERR_INVALID_ARG, "conv3x3 tc: in_a and in_b go together");
    ConvArgs a;
    a.in = in, a.W = W, a.bias = bias, a.a = in_a, a.b = in_b, a.out = out, a.stats = stats;
    a.S = S, a.dil = dil, a.groups = groups, a.y0 = y0, a.rows = y1 - y0, a.in_r0 = in_r0;
    a.tiles_per_row = (S + kTM - 1) / kTM;
    a.seg = a.nseg = 0, a.nitems = 0; /* set by launch_conv, which knows the SM count */
    a.nbands = 1, a.band_rows = a.rows, a.shift_rows = 0, a.sync = NULL;
    cudaStream_t st = (cudaStream_t)stream;
    return dt == CK_F16 ? dispatch_conv<__half>(a, Cin, Cout, st, err)
                        : dispatch_conv<__nv_bfloat16>(a, Cin, Cout, st, err);
}

ckey_status ck_cuda_conv3x3_tc_rows(const void *in, int Cin, int S, int dil, const void *W, const float *bias,
                                    const float *in_a, const float *in_b, void *out, int y0, int y1, int Cout,
                                    int groups, double *stats, ck_dtype dt, void *stream, ckey_error *err) {
    return ck_cuda_conv3x3_tc_band(in, 0, Cin, S, dil, W, bias, in_a, in_b, out, y0, y1, Cout, groups, stats, dt,
                                   stream, err);
}

ckey_status ck_cuda_conv3x3_tc(const void *in, int Cin, int S, int dil, const void *W, const float *bias,
                               const float *in_a, const float *in_b, void *out, int Cout, int groups, double *stats,
                               ck_dtype dt, void *stream, ckey_error *err) {
    return ck_cuda_conv3x3_tc_rows(in, Cin, S, dil, W, bias, in_a, in_b, out, 0, S, Cout, groups, stats, dt, stream,
                                   err);
}

size_t ck_conv3x3_tc_weight_bytes(int Cout, int Cin) {
    return Cin == 8 ? (size_t)5 * Cout * 16 * 2 : (size_t)9 * Cout * Cin * 2;
}

ckey_status ck_conv3x3_tc_pack_weights_host(const float *W_oihw, int Cout, int Cin, ck_dtype dt, void *dst) {
    if (dt != CK_F16 && dt != CK_BF16) return CKEY_ERR_UNSUPPORTED;
    if (Cin == 8) { /* taps paired: [5][Cout][16], element c of step j = tap 2j + c / 8, channel c % 8 */
        for (int j = 0; j < 5; j++)
            for (int co = 0; co < Cout; co++)
                for (int c = 0; c < 16; c++) {
                    const int tap = 2 * j + c / 8, ci = c % 8;
                    const float v = tap < 9 ? W_oihw[((size_t)co * 8 + ci) * 9 + tap] : 0.f;
                    const size_t o = ((size_t)j * Cout + co) * 16 + c;
                    if (dt == CK_F16)
                        ((__half *)dst)[o] = __float2half_rn(v);
                    else
                        ((__nv_bfloat16 *)dst)[o] = __float2bfloat16_rn(v);
                }
        return CKEY_OK;
    }
    for (int co = 0; co < Cout; co++)
        for (int ci = 0; ci < Cin; ci++)
            for (int k = 0; k < 9; k++) {
                const float v = W_oihw[((size_t)co * Cin + ci) * 9 + k];
                const size_t o = ((size_t)k * Cout + co) * Cin + ci;
                if (dt == CK_F16)
                    ((__half *)dst)[o] = __float2half_rn(v);
                else
                    ((__nv_bfloat16 *)dst)[o] = __float2bfloat16_rn(v);
            }
    return CKEY_OK;
}

ckey_status ck_cuda_conv3x3_tc_pack_weights(const float *W_oihw_host, int Cout, int Cin, ck_dtype dt,
                                            void *W_dev_out, size_t *bytes, ckey_error *err) {
    const size_t n = ck_conv3x3_tc_weight_bytes(Cout, Cin);
    if (bytes) *bytes = n;
    if (!W_dev_out) return CKEY_OK;
    if (dt != CK_F16 && dt != CK_BF16) return fail(err, CKEY_ERR_UNSUPPORTED, "conv3x3 tc: weights must be fp16 or bf16");
    void *h = malloc(n);
    if (!h) return fail(err, CKEY_ERR_NOMEM, "conv3x3 tc: no host memory to pack weights");
    ck_conv3x3_tc_pack_weights_host(W_oihw_host, Cout, Cin, dt, h);
    const cudaError_t e = cudaMemcpy(W_dev_out, h, n, cudaMemcpyHostToDevice);
    free(h);
    return cuda_check(err, e, "conv3x3 tc: weight upload");
}

} // extern "C"

namespace {
// rin [7, HW] -> map [HW, 8] (channel 7 zero; the conv pairs taps, Cin 8):
// a thread per pixel, its 16 bytes stored as one vector.
template <typename T>
__global__ void stem_input_kernel(const T *__restrict__ rin, int64_t HW, T *__restrict__ map) {
    ck_pdl_enter();
    const int64_t p = (int64_t)blockIdx.x * blockDim.x + threadIdx.x;
    if (p >= HW) return;
    union {
        uint4 u;
        T v[8];
    } o;
#pragma unroll
    for (int c = 0; c < 8; c++) o.v[c] = c < 7 ? rin[c * HW + p] : T(0.f);
    *reinterpret_cast<uint4 *>(map + p * 8) = o.u;
}
} // namespace

extern "C" int ck_cuda_refiner_tc_ok(int R, ck_dtype dt) {
    return (dt == CK_F16 || dt == CK_BF16) && R >= 16 && R <= 64 && R % 16 == 0;
}

extern "C" ckey_status ck_cuda_refiner_stem_input(const void *rin, int S, void *map, ck_dtype dt, void *stream,
                                                  ckey_error *err) {
    const int64_t HW = (int64_t)S * S;
    const unsigned blocks = (unsigned)((HW + 255) / 256);
    if ((uintptr_t)map & 15) { /* the planner aligns to 64 bytes: a caller's mistake */
        if (err) {
            snprintf(err->message, sizeof err->message, "refiner stem input: map not 16-byte aligned");
            err->status = CKEY_ERR_INTERNAL;
        }
        return CKEY_ERR_INTERNAL;
    }
    if (dt == CK_F16)
        ck_launch(stem_input_kernel<__half>, blocks, 256, 0, (cudaStream_t)stream, (const __half *)rin, HW,
                  (__half *)map);
    else
        ck_launch(stem_input_kernel<__nv_bfloat16>, blocks, 256, 0, (cudaStream_t)stream, (const __nv_bfloat16 *)rin,
                  HW, (__nv_bfloat16 *)map);
    const cudaError_t e = cudaGetLastError();
    if (e == cudaSuccess) return CKEY_OK;
    if (err) {
        snprintf(err->message, sizeof err->message, "CUDA: refiner stem input: %s", cudaGetErrorString(e));
        err->status = CKEY_ERR_DEVICE;
    }
    return CKEY_ERR_DEVICE;
}
