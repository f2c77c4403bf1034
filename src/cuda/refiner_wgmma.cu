// The refiner's 64 -> 64 dilated 3x3 convolutions on Hopper warpgroup MMA
// (wgmma.mma_async, sm_90a only: built with its own -gencode, like
// attention_wgmma.cu), fp16 / bf16 storage, fp32 accumulation. Same
// arguments, results and work (conv_work.cuh: chains of rows through a ring
// of 4 input rows, persistent blocks) as the mma.sync kernel in
// refiner_tc.cu, whose comments explain the rest; what differs is the MMA.
//
// GEMM per tile (128 output pixels of one row, 64 output channels, K = 9
// taps x 64 input channels): two warpgroups, each 64 pixels x 64 channels
// (wgmma m64n64k16, A and B from shared memory, f32 accumulators in
// registers), 36 wgmma per tile (9 taps x 4 k16 steps).
//
// One block an SM (persistent), 256 threads. Tried and dropped: two such
// pairs of warpgroups a block (512 threads), sharing the weights, each pair
// with its own items, ring and named barrier, so one pair's epilogue
// overlaps the other's wgmma: 0.81 / 0.89 ms plain / with the GroupNorm
// transform against 0.78 / 0.94 (S = 2048, dil 4, H200), but 47.5 against
// 46.4 ms for the whole network at S = 2048 (its fp32 GroupNorm sums per
// work item, forced by the 128-register budget of 512 threads, cost more
// on the in-place conv's short items than the overlap gained).
//
// Also tried (session 6, S = 2048, dil 4, fp16): the GEMM transposed
// (output channels x pixels: m64n128k16 a warpgroup, 256-pixel tiles, the
// output transposed back through shared memory by stmatrix.trans) 0.600 /
// 0.708 ms plain / fused against 0.612 / 0.730 (36.18 against 36.35 ms for
// the network: not worth a second kernel); the same software-pipelined by
// one step (a step's MMAs issued before the previous step's epilogue, two
// accumulator sets, 254 registers) 0.672 / 0.768, slower. The 64-wide N of
// this kernel is not what holds it at ~505 TFLOP/s.
//
// Shared memory, both operands K-major with the 128-byte swizzle (the
// canonical SWIZZLE_128B layout, as attention_wgmma.cu's K tile): a pixel's
// 64 channels (or an output channel's 64 weights) are one 128-byte row, and
// the 16-byte chunk c of row j sits at byte j*128 + ((c ^ (j & 7)) * 16) of
// a 1024-byte aligned region.
//  - weights: [tap][Cout] rows, 8 KiB a tap (B of tap t starts at t * 8 KiB);
//  - ring rows: pixels x0 - d .. x0 + 127 + d of an input row, a slot of
//    ceil((128 + 2d) / 8) KiB. Tap (ky, kx) of warpgroup w is the 64 rows
//    starting at pixel w*64 + kx*d of the slot of input row y + (ky-1)*d:
//    a start that is a whole number of rows but not of 8-row (1024-byte)
//    swizzle atoms. The hardware swizzles the computed address (its bits
//    7-9 pick the XOR), so rows read back as stored with the descriptor's
//    base offset field (bits 49-51) left 0 (measured: setting it to the
//    start's row within its atom gave wrong results for every dilation
//    but 8, where the starts are atom-aligned).
// Synchronization: cp.async (generic proxy) and the GroupNorm transform's
// stores are made visible to the MMA (async proxy) by
// fence.proxy.async.shared::cta before the __syncthreads that precedes the
// wgmma batch; wgmma.wait_group 0 before the epilogue reads the
// accumulators, and the step's final __syncthreads before a slot is
// refilled.
#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cuda_runtime.h>
#include <stdint.h>
#include <stdio.h>

#include "cuda/ck_cuda.h"
#include "cuda/conv_work.cuh"
#include "cuda/ptx.cuh"
#include "cuda/wgmma.cuh"

namespace {

constexpr int C = 64;                   // Cin = Cout
constexpr int kTapBytes = C * 128;      // one tap of the weights
constexpr int kWBytes = 9 * kTapBytes;  // all taps

__host__ __device__ constexpr uint32_t slot_bytes(int dil) { return (uint32_t)((kTM + 2 * dil + 7) / 8) * 1024u; }
constexpr int kThreads = 256; // two warpgroups
// 16-byte chunks of a ring row a thread copies, at most (dilation <= 8)
constexpr int kRowIters = ((kTM + 2 * 8) * 8 + kThreads - 1) / kThreads;
// + 1024 to align the start; weights, the ring of 4 slots, bias, a, b
// (fp32) and the group sums (double)
size_t smem_total(int dil) {
    return 1024 + kWBytes + 4 * (size_t)slot_bytes(dil) + 3 * C * sizeof(float) + 2 * C * sizeof(double);
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

template <typename T>
__global__ void __launch_bounds__(kThreads, 1) conv3x3_wg_kernel(ConvArgs p) {
    extern __shared__ __align__(16) uint8_t smem_raw[];
    const uint32_t raw = smem_addr(smem_raw), sbase = (raw + 1023u) & ~1023u;
    uint8_t *gbase = smem_raw + (sbase - raw); // the same byte, generic
    const int S = p.S, dil = p.dil, TMH = kTM + 2 * dil;
    const uint32_t sbytes = slot_bytes(dil), srows = sbase + kWBytes;
    float *sbias = reinterpret_cast<float *>(gbase + kWBytes + 4 * sbytes);
    float *sa = sbias + C, *sb = sa + C;
    double *sstat = reinterpret_cast<double *>(sb + C);
    const T *__restrict__ in = static_cast<const T *>(p.in);
    T *__restrict__ out = static_cast<T *>(p.out);
    const int tid = threadIdx.x, lane = tid & 31, warp = (tid >> 5) & 3, wg = tid >> 7;
    const int g = lane >> 2, t = lane & 3;
    const bool affine = p.a != nullptr;

    for (int i = tid; i < C; i += kThreads) {
        sbias[i] = p.bias ? p.bias[i] : 0.f;
        sa[i] = affine ? p.a[i] : 1.f;
        sb[i] = affine ? p.b[i] : 0.f;
    }
    for (int i = tid; i < 2 * C; i += kThreads) sstat[i] = 0.0;
    { // weights [9][Cout][Cin] -> swizzled rows (row = tap * 64 + cout); they
      // land with the first item's rows (the same cp.async group)
        const T *W = static_cast<const T *>(p.W);
        for (int i = tid; i < 9 * C * 8; i += kThreads)
            cp_async16(sbase + swz(i >> 3, i & 7), W + (size_t)(i >> 3) * C + (i & 7) * 8, true);
    }
    __syncthreads(); // bias, sa, sb
    auto slot = [&](int q) { return srows + (uint32_t)((q + 1) & 3) * sbytes; };
    // input row iy over pixels x0-d .. x0+kTM-1+d; zeros outside the image
    // (cp.async with no source bytes)
    // A thread copies 16-byte chunk ch = tid % 8 of pixels j = tid / 8 + 32 m
    // (m < kRowIters), so its swizzled offsets differ by m * 4096 only.
    const int lj = tid >> 3, lch = tid & 7;
    const uint32_t lsw = swz(lj, lch);
    auto load_row = [&](int iy, int x0, uint32_t dst) {
        const bool row_in = iy >= 0 && iy < S;
        const T *src = in + (size_t)(row_in ? iy : 0) * S * C + (ptrdiff_t)(x0 - dil + lj) * C + lch * 8;
#pragma unroll
        for (int m = 0; m < kRowIters; m++) {
            const int j = lj + 32 * m, ix = x0 - dil + j;
            if (j < TMH) {
                const bool ok = row_in && ix >= 0 && ix < S;
                cp_async16(dst + lsw + (uint32_t)m * 4096u, ok ? src + (ptrdiff_t)32 * m * C : in, ok);
            }
        }
    };
    // relu(a*v + b) in place on the in-image pixels of a loaded row; a thread
    // always handles the same 8 channels (chunk tid % 8)
    float ra[8], rb[8];
#pragma unroll
    for (int e = 0; e < 8; e++) ra[e] = sa[(tid & 7) * 8 + e], rb[e] = sb[(tid & 7) * 8 + e];
    auto transform_row = [&](int iy, int x0, uint32_t buf) {
        if (iy < 0 || iy >= S) return; // padding rows stay zero
#pragma unroll
        for (int m = 0; m < kRowIters; m++) { // the chunks load_row copied
            const int j = lj + 32 * m, ix = x0 - dil + j;
            if (j >= TMH || ix < 0 || ix >= S) continue;
            const uint32_t a = buf + lsw + (uint32_t)m * 4096u;
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

    // this thread's bias (channels 8i + 2t + e), in registers: read from
    // shared memory in the epilogue, it waited behind the wgmma operand reads
    float bias[8][2];
#pragma unroll
    for (int i = 0; i < 8; i++) bias[i][0] = sbias[8 * i + 2 * t], bias[i][1] = sbias[8 * i + 2 * t + 1];
    // B (weights) descriptor of tap 0; A descriptors come from the row slots
    const uint64_t wdesc = make_desc(sbase, 16, 1024);
    const uint32_t dil_bytes = (uint32_t)dil * 128u;

    // per-thread channel statistics (channels 8i + 2t + e): fp32 over a
    // tile's 2 values, double across tiles
    double ssum[8][2], ssq[8][2];
#pragma unroll
    for (int i = 0; i < 8; i++) ssum[i][0] = ssum[i][1] = ssq[i][0] = ssq[i][1] = 0.0;

    for (int64_t item = blockIdx.x; item < p.nitems; item += gridDim.x) {
        const ConvItem ci = conv_item(p, item);
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
            if (affine) {
                __syncthreads();
                if (k == k0)
                    for (int q = k0 - 1; q <= k0 + 1; q++) transform_row(ybase + q * dil, x0, slot(q));
                else
                    transform_row(ybase + (k + 1) * dil, x0, slot(k + 1));
            }
            fence_proxy_async();
            __syncthreads();

            float acc[32];
            uint64_t adesc[3]; // rows k-1, k, k+1 at this warpgroup's pixels
#pragma unroll
            for (int ky = 0; ky < 3; ky++) adesc[ky] = make_desc(slot(k - 1 + ky) + (uint32_t)(wg * 64 * 128), 16, 1024);
            wgmma_fence();
#pragma unroll
            for (int tap = 0; tap < 9; tap++) {
                const int ky = tap / 3, kx = tap % 3;
                const uint64_t a0 = desc_add(adesc[ky], (uint32_t)kx * dil_bytes);
#pragma unroll
                for (int kc = 0; kc < 4; kc++)
                    WgSS64<T>::mma(acc, desc_add(a0, kc * 32), desc_add(wdesc, tap * kTapBytes + kc * 32),
                                   tap > 0 || kc > 0);
            }
            wgmma_commit();
            wgmma_wait<0>();
            reg_fence(acc);

            // epilogue: bias, statistics, store. acc[4i + j]: pixel
            // wg*64 + warp*16 + g + 8*(j >= 2), channel 8i + 2t + (j & 1)
            // (pixels outside the image: no statistics, no store). The packed
            // pairs are transposed within each quad of lanes (quad_transpose)
            // so that a lane stores 16 bytes, 8 channels, a time: a warp's
            // store then fills whole 32-byte sectors (4-byte stores half-filled
            // them: ncu).
            {
                const int y = r + k * dil; // output row y0 + y, stored as row y
                T *orow = out + (size_t)y * S * C;
                const int xa = x0 + wg * 64 + warp * 16 + g, xb = xa + 8;
                const bool ina = xa < S, inb = xb < S;
                uint32_t wa[8], wb[8];
#pragma unroll
                for (int i = 0; i < 8; i++) {
                    const float v0 = acc[4 * i] + bias[i][0], v1 = acc[4 * i + 1] + bias[i][1];
                    const float u0 = acc[4 * i + 2] + bias[i][0], u1 = acc[4 * i + 3] + bias[i][1];
                    float s0 = 0.f, s1 = 0.f, q0 = 0.f, q1 = 0.f;
                    if (ina) s0 += v0, s1 += v1, q0 += v0 * v0, q1 += v1 * v1;
                    if (inb) s0 += u0, s1 += u1, q0 += u0 * u0, q1 += u1 * u1;
                    ssum[i][0] += s0, ssum[i][1] += s1, ssq[i][0] += q0, ssq[i][1] += q1;
                    wa[i] = Pair16<T>::pack(v0, v1), wb[i] = Pair16<T>::pack(u0, u1);
                }
                quad_transpose(wa, t), quad_transpose(wa + 4, t), quad_transpose(wb, t), quad_transpose(wb + 4, t);
                if (ina) {
                    uint4 *o = reinterpret_cast<uint4 *>(orow + (size_t)xa * C);
                    o[t] = make_uint4(wa[0], wa[1], wa[2], wa[3]), o[4 + t] = make_uint4(wa[4], wa[5], wa[6], wa[7]);
                }
                if (inb) {
                    uint4 *o = reinterpret_cast<uint4 *>(orow + (size_t)xb * C);
                    o[t] = make_uint4(wb[0], wb[1], wb[2], wb[3]), o[4 + t] = make_uint4(wb[4], wb[5], wb[6], wb[7]);
                }
            }
            __syncthreads(); // slot(k - 1) is refilled by the next step's prefetch
        }
    }
    cp_async_wait<0>();
    if (!p.stats) return;
    conv_stats_finish<8>(ssum, ssq, 0, C, p, sstat);
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
    ConvArgs b = a;
    conv_plan(b, nsm);
    const int64_t grid = b.nitems < nsm ? b.nitems : nsm;
    conv3x3_wg_kernel<T><<<(unsigned)grid, kThreads, smem, st>>>(b);
    return cudaGetLastError();
}

} // namespace

extern "C" ckey_status ck_cuda_conv3x3_wgmma_rows(const void *in, int S, int dil, const void *W, const float *bias,
                                                 const float *in_a, const float *in_b, void *out, int y0, int y1,
                                                 int groups, double *stats, ck_dtype dt, void *stream,
                                                 ckey_error *err) {
    if (stats && (groups < 1 || groups > C || C % groups))
        return fail(err, CKEY_ERR_UNSUPPORTED, "conv3x3 wgmma: groups must divide 64");
    if (dt != CK_F16 && dt != CK_BF16) return fail(err, CKEY_ERR_UNSUPPORTED, "conv3x3 wgmma: storage must be fp16 or bf16");
    if (out == in) return fail(err, CKEY_ERR_INVALID_ARG, "conv3x3 wgmma: out must not alias in");
    if (S <= 0 || dil <= 0) return fail(err, CKEY_ERR_INVALID_ARG, "conv3x3 wgmma: bad size or dilation");
    if (dil > 8) return fail(err, CKEY_ERR_UNSUPPORTED, "conv3x3 wgmma: dilations up to 8 (the row copies' unrolling)");
    if (y0 < 0 || y1 > S || y0 >= y1) return fail(err, CKEY_ERR_INVALID_ARG, "conv3x3 wgmma: bad row range");
    if ((in_a == NULL) != (in_b == NULL))
        return fail(err, CKEY_ERR_INVALID_ARG, "conv3x3 wgmma: in_a and in_b go together");
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
    a.S = S, a.dil = dil, a.groups = groups, a.y0 = y0, a.rows = y1 - y0;
    a.tiles_per_row = (S + kTM - 1) / kTM;
    a.seg = a.nseg = 0, a.nitems = 0;
    cudaStream_t st = (cudaStream_t)stream;
    const cudaError_t e = dt == CK_F16 ? launch<__half>(a, nsm, smem, st) : launch<__nv_bfloat16>(a, nsm, smem, st);
    if (e != cudaSuccess) {
        char msg[160];
        snprintf(msg, sizeof msg, "CUDA: conv3x3 wgmma: %s", cudaGetErrorString(e));
        return fail(err, CKEY_ERR_DEVICE, msg);
    }
    return CKEY_OK;
}
