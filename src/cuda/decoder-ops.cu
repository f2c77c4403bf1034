// The decoders' fused epilogue on CUDA cores, in every storage type
// (dtype.cuh), checked against the CPU op by tests/test-cuda.c: both heads'
// P1 rows + the upsampled coarser scales P2..P4 + b1, ReLU and the
// classifier, into the logits [4, G, G]. Features are [H, W, C] (the CPU
// backend's layout).
#include <cuda_runtime.h>
#include <stdint.h>

#include "cuda/kernels.h"
#include "cuda/dtype.cuh"
#include "cuda/launch.cuh"
#include "cuda/ops-common.cuh"

namespace {

// The decoder epilogue kernels' shared parts: a pixel's bilinear taps into
// the three coarser maps, and the warp's classifier sums reduced and stored.
//
// Pixel (y, x) of the G x G output against the coarser maps P2..P4
// ([Hs, Hs, D2] each): per scale s its rows ty[s] and columns tx[s].
template <typename T> struct DecTaps {
    const T *P[3];
    int Hk[3];
    Tap ty[3], tx[3];
    __device__ __forceinline__ DecTaps(int y, int x, int G, const T *P2, int H2, const T *P3, int H3, const T *P4,
                                       int H4)
        : P{P2, P3, P4}, Hk{H2, H3, H4} {
#pragma unroll
        for (int s = 0; s < 3; s++) ty[s] = bilinear_tap(y, Hk[s], G), tx[s] = bilinear_tap(x, Hk[s], G);
    }
    // channel e of scale s's source pixel at row tap r, column tap c (0: i0, 1: i1)
    __device__ __forceinline__ const T *src(int s, int r, int c, int D2, int e) const {
        return P[s] + ((int64_t)(r ? ty[s].i1 : ty[s].i0) * Hk[s] + (c ? tx[s].i1 : tx[s].i0)) * D2 + e;
    }
};
__device__ __forceinline__ void dec_store(float (&acc)[4], int lane, int y, int x, int G, const float *__restrict__ cls_b,
                                          float *__restrict__ logits) {
    for (int o = 0; o < 4; o++)
        for (int off = 16; off > 0; off >>= 1) acc[o] += __shfl_xor_sync(0xffffffffu, acc[o], off);
    if (lane < 4) logits[((int64_t)lane * G + y) * G + x] = acc[lane] + cls_b[lane];
}

// decoder epilogue: h [n, D2] (P1 rows of image rows y0..) + sum of upsampled
// P2..P4 + b1, relu, classifier -> logits [4, G, G]; one warp per pixel, a
// lane a channel (fp32 storage, or 16-bit rows that do not suit the kernel
// below).
template <typename T>
__global__ void decoder_epilogue_kernel(const T *__restrict__ h, int64_t p0, int64_t n, int G, int D2,
                                        const T *__restrict__ P2, int H2, const T *__restrict__ P3, int H3,
                                        const T *__restrict__ P4, int H4, const float *__restrict__ b1,
                                        const float *__restrict__ cls_w, const float *__restrict__ cls_b,
                                        float *__restrict__ logits) {
    ck_pdl_enter();
    const int64_t wid = ((int64_t)blockIdx.x * blockDim.x + threadIdx.x) / 32;
    const int lane = threadIdx.x % 32;
    if (wid >= n) return;
    const int64_t p = p0 + wid;
    const int y = (int)(p / G), x = (int)(p % G);
    const DecTaps<T> t(y, x, G, P2, H2, P3, H3, P4, H4);
    float acc[4] = {0.f, 0.f, 0.f, 0.f};
    const T *hr = h + wid * D2;
    for (int e = lane; e < D2; e += 32) {
        float v = ck_ld(hr + e) + b1[e];
        for (int s = 0; s < 3; s++) {
            const Tap &ty = t.ty[s], &tx = t.tx[s];
            v += ty.l0 * (tx.l0 * ck_ld(t.src(s, 0, 0, D2, e)) + tx.l1 * ck_ld(t.src(s, 0, 1, D2, e))) +
                 ty.l1 * (tx.l0 * ck_ld(t.src(s, 1, 0, D2, e)) + tx.l1 * ck_ld(t.src(s, 1, 1, D2, e)));
        }
        v = v > 0.f ? v : 0.f;
        for (int o = 0; o < 4; o++) acc[o] += cls_w[o * D2 + e] * v;
    }
    dec_store(acc, lane, y, x, G, cls_b, logits);
}
// The same for 16-bit storage with D2 % 8 == 0 and 16-byte aligned rows: a
// lane takes 8 consecutive channels per 16-byte load (the loop above issues
// 13 two-byte loads per channel). Per channel the arithmetic is the loop's
// above, in the same order; only the lanes' partial sums of the classifier
// split the channels differently. Its loads are L1 hits mostly (88%): it is
// bound by latency, so occupancy decides: the scale loop unrolled and at
// most 80 registers (3 blocks an SM), a 16384-pixel chunk at S = 2048 in
// 33.6 us on the H200, against 36.9 at 96 registers (2 blocks) and 35.3 at
// 64 (spilling).
template <typename T>
__global__ void __launch_bounds__(256, 3)
    decoder_epilogue_vec_kernel(const T *__restrict__ h, int64_t p0, int64_t n, int G, int D2,
                                const T *__restrict__ P2, int H2, const T *__restrict__ P3, int H3,
                                const T *__restrict__ P4, int H4, const float *__restrict__ b1,
                                const float *__restrict__ cls_w, const float *__restrict__ cls_b,
                                float *__restrict__ logits) {
    ck_pdl_enter();
    const int64_t wid = ((int64_t)blockIdx.x * blockDim.x + threadIdx.x) / 32;
    const int lane = threadIdx.x % 32;
    if (wid >= n) return;
    const int64_t p = p0 + wid;
    const int y = (int)(p / G), x = (int)(p % G);
    const DecTaps<T> t(y, x, G, P2, H2, P3, H3, P4, H4);
    float acc[4] = {0.f, 0.f, 0.f, 0.f};
    const T *hr = h + wid * D2;
    for (int e = lane * 8; e < D2; e += 256) {
        float v[8], bb[8];
        ld8(hr + e, v);
        ld8(b1 + e, bb);
#pragma unroll
        for (int k = 0; k < 8; k++) v[k] += bb[k];
#pragma unroll
        for (int s = 0; s < 3; s++) {
            const Tap &ty = t.ty[s], &tx = t.tx[s];
            float q00[8], q01[8], q10[8], q11[8];
            ld8(t.src(s, 0, 0, D2, e), q00);
            ld8(t.src(s, 0, 1, D2, e), q01);
            ld8(t.src(s, 1, 0, D2, e), q10);
            ld8(t.src(s, 1, 1, D2, e), q11);
#pragma unroll
            for (int k = 0; k < 8; k++)
                v[k] += ty.l0 * (tx.l0 * q00[k] + tx.l1 * q01[k]) + ty.l1 * (tx.l0 * q10[k] + tx.l1 * q11[k]);
        }
#pragma unroll
        for (int k = 0; k < 8; k++) v[k] = v[k] > 0.f ? v[k] : 0.f;
#pragma unroll
        for (int o = 0; o < 4; o++) {
            float w[8];
            ld8(cls_w + (int64_t)o * D2 + e, w);
#pragma unroll
            for (int k = 0; k < 8; k++) acc[o] += w[k] * v[k];
        }
    }
    dec_store(acc, lane, y, x, G, cls_b, logits);
}

// A 2 x 2 quad of output pixels a warp (16-bit, D2 % 8 == 0, a chunk of
// whole row pairs, every map no larger than G): the quad's bilinear taps into
// a coarser map (at most as large as G) lie in a window of at most 3 x 3
// source pixels (2 x 2 when the map is 4 or 8 times coarser), loaded once
// for the four pixels instead of 4 x 4 times, and the classifier weights and
// b1 once for the four. Each pixel weighs a window row by wy (l0 at its i0,
// l1 at its i1, their sum where the two coincide at an edge) and a column
// by wx, so its sum is the bilinear one up to fp32 rounding order.
template <typename T>
__global__ void __launch_bounds__(256, 2)
    decoder_epilogue_quad_kernel(const T *__restrict__ h, int64_t p0, int64_t n, int G, int D2,
                                 const T *__restrict__ P2, int H2, const T *__restrict__ P3, int H3,
                                 const T *__restrict__ P4, int H4, const float *__restrict__ b1,
                                 const float *__restrict__ cls_w, const float *__restrict__ cls_b,
                                 float *__restrict__ logits) {
    ck_pdl_enter();
    const int64_t wid = ((int64_t)blockIdx.x * blockDim.x + threadIdx.x) / 32;
    const int lane = threadIdx.x % 32;
    const int qpr = G / 2; // quads per row pair
    if (wid >= n / 4) return;
    const int rp = (int)(wid / qpr), qx = (int)(wid % qpr);
    const int y = (int)(p0 / G) + 2 * rp, x = 2 * qx;
    const T *P[3] = {P2, P3, P4};
    const int Hk[3] = {H2, H3, H4};
    const T *hq = h + ((int64_t)(2 * rp) * G + x) * D2; // pixel (dy, dx): hq + (dy * G + dx) * D2
    float acc[4][4];
#pragma unroll
    for (int q = 0; q < 4; q++)
#pragma unroll
        for (int o = 0; o < 4; o++) acc[q][o] = 0.f;
    for (int e = lane * 8; e < D2; e += 256) {
        float v[4][8], bb[8];
        ld8(b1 + e, bb);
#pragma unroll
        for (int q = 0; q < 4; q++) {
            ld8(hq + ((int64_t)(q >> 1) * G + (q & 1)) * D2 + e, v[q]);
#pragma unroll
            for (int k = 0; k < 8; k++) v[q][k] += bb[k];
        }
#pragma unroll
        for (int s = 0; s < 3; s++) {
            const int Hs = Hk[s];
            const Tap ty[2] = {bilinear_tap(y, Hs, G), bilinear_tap(y + 1, Hs, G)};
            const Tap tx[2] = {bilinear_tap(x, Hs, G), bilinear_tap(x + 1, Hs, G)};
            const int r0 = ty[0].i0, c0 = tx[0].i0, nr = ty[1].i1 - r0 + 1, nc = tx[1].i1 - c0 + 1;
            float wy[2][3], wx[2][3];
#pragma unroll
            for (int d = 0; d < 2; d++)
#pragma unroll
                for (int j = 0; j < 3; j++) {
                    wy[d][j] = (j == ty[d].i0 - r0 ? ty[d].l0 : 0.f) + (j == ty[d].i1 - r0 ? ty[d].l1 : 0.f);
                    wx[d][j] = (j == tx[d].i0 - c0 ? tx[d].l0 : 0.f) + (j == tx[d].i1 - c0 ? tx[d].l1 : 0.f);
                }
            const T *Q = P[s] + ((int64_t)r0 * Hs + c0) * D2 + e;
#pragma unroll
            for (int jr = 0; jr < 3; jr++) {
                if (jr >= nr) break;
                float w0[8], w1[8], w2[8];
                const T *Qr = Q + (int64_t)jr * Hs * D2;
                ld8(Qr, w0);
                if (nc > 1) ld8(Qr + D2, w1);
                else
#pragma unroll
                    for (int k = 0; k < 8; k++) w1[k] = 0.f;
                if (nc > 2) ld8(Qr + 2 * D2, w2);
                else
#pragma unroll
                    for (int k = 0; k < 8; k++) w2[k] = 0.f;
#pragma unroll
                for (int q = 0; q < 4; q++) {
                    const float a = wy[q >> 1][jr], x0 = wx[q & 1][0], x1 = wx[q & 1][1], x2 = wx[q & 1][2];
#pragma unroll
                    for (int k = 0; k < 8; k++) v[q][k] += a * (x0 * w0[k] + x1 * w1[k] + x2 * w2[k]);
                }
            }
        }
#pragma unroll
        for (int q = 0; q < 4; q++)
#pragma unroll
            for (int k = 0; k < 8; k++) v[q][k] = v[q][k] > 0.f ? v[q][k] : 0.f;
#pragma unroll
        for (int o = 0; o < 4; o++) {
            float w[8];
            ld8(cls_w + (int64_t)o * D2 + e, w);
#pragma unroll
            for (int q = 0; q < 4; q++)
#pragma unroll
                for (int k = 0; k < 8; k++) acc[q][o] += w[k] * v[q][k];
        }
    }
#pragma unroll
    for (int q = 0; q < 4; q++) dec_store(acc[q], lane, y + (q >> 1), x + (q & 1), G, cls_b, logits);
}

} // namespace

extern "C" {

ckey_status ck_cuda_decoder_epilogue_t(const void *h, int64_t p0, int64_t n, int G, int D2, const void *P2, int H2,
                                       const void *P3, int H3, const void *P4, int H4, const float *b1,
                                       const float *cls_w, const float *cls_b, float *logits, ck_dtype dt, void *st,
                                       ckey_error *err) {
    const uintptr_t al = (uintptr_t)h | (uintptr_t)P2 | (uintptr_t)P3 | (uintptr_t)P4 | (uintptr_t)b1 | (uintptr_t)cls_w;
    const bool quads = G % 2 == 0 && p0 % (2 * G) == 0 && n % (2 * G) == 0 && H2 <= G && H3 <= G && H4 <= G;
    if (dt != CK_F32 && D2 % 8 == 0 && (al & 15) == 0 && quads) {
        LAUNCH_T(dt, blocks_for(n / 4 * 32, 256), 256, decoder_epilogue_quad_kernel, (const T *)h, p0, n, G, D2,
                 (const T *)P2, H2, (const T *)P3, H3, (const T *)P4, H4, b1, cls_w, cls_b, logits);
        return launched(err, "decoder epilogue");
    }
    if (dt != CK_F32 && D2 % 8 == 0 && (al & 15) == 0) {
        LAUNCH_T(dt, blocks_for(n * 32, 256), 256, decoder_epilogue_vec_kernel, (const T *)h, p0, n, G, D2,
                 (const T *)P2, H2, (const T *)P3, H3, (const T *)P4, H4, b1, cls_w, cls_b, logits);
        return launched(err, "decoder epilogue");
    }
    LAUNCH_T(dt, blocks_for(n * 32, 256), 256, decoder_epilogue_kernel, (const T *)h, p0, n, G, D2, (const T *)P2, H2,
             (const T *)P3, H3, (const T *)P4, H4, b1, cls_w, cls_b, logits);
    return launched(err, "decoder epilogue");
}

/* the fp32 entry point (tests and fp32 sessions) */
ckey_status ck_cuda_decoder_epilogue(const float *h, int64_t p0, int64_t n, int G, int D2, const float *P2, int H2,
                                     const float *P3, int H3, const float *P4, int H4, const float *b1,
                                     const float *cls_w, const float *cls_b, float *logits, void *st, ckey_error *err) {
    return ck_cuda_decoder_epilogue_t(h, p0, n, G, D2, P2, H2, P3, H3, P4, H4, b1, cls_w, cls_b, logits, CK_F32, st,
                                      err);
}

} // extern "C"
