// CUDA kernels for the rest of the op table, on CUDA cores in every storage
// type (dtype.cuh), each checked against the CPU op by tests/test-cuda.c.
// Layouts are the CPU backend's: tokens [N, C] in Hiera's
// unrolled order, features [H, W, C], refiner maps channels-last [S*S, C],
// logits and outputs [C, S, S].
#include <cuda_runtime.h>
#include <limits.h>
#include <math.h>
#include <stdio.h>

#include "cuda/kernels.h"
#include "cuda/dtype.cuh"
#include "cuda/launch.cuh"
#include "cuda/rowbias.cuh"

namespace {

__device__ __forceinline__ float sigmoidf_(float v) { return 1.f / (1.f + expf(-v)); }

// unrolled index of spatial token (y, x) with k pending 2x2 strides (timm Unroll)
__device__ __forceinline__ int64_t unroll_index(int y, int x, int H, int W, int k) {
    int64_t outer = 0;
    for (int i = 0; i < k; i++) outer = outer * 4 + (((y >> i) & 1) * 2 + ((x >> i) & 1));
    const int Hc = H >> k, Wc = W >> k;
    return outer * ((int64_t)Hc * Wc) + (int64_t)(y >> k) * Wc + (x >> k);
}

// bilinear taps, align_corners=False (PyTorch upsample_bilinear2d)
struct Tap {
    int i0, i1;
    float l0, l1;
};
__device__ __forceinline__ Tap bilinear_tap(int dst, int in, int out) {
    const float scale = (float)in / (float)out;
    float src = scale * ((float)dst + 0.5f) - 0.5f;
    if (src < 0) src = 0;
    Tap t;
    t.i0 = (int)src;
    t.i1 = t.i0 + (t.i0 < in - 1 ? 1 : 0);
    t.l1 = src - (float)t.i0;
    t.l0 = 1.f - t.l1;
    return t;
}

template <typename T>
__global__ void reroll_kernel(const T *__restrict__ tok, int H, int W, int k, int C, T *__restrict__ feat) {
    ck_pdl_enter();
    const int64_t i = (int64_t)blockIdx.x * blockDim.x + threadIdx.x;
    const int64_t total = (int64_t)H * W * C;
    if (i >= total) return;
    const int c = (int)(i % C);
    const int64_t p = i / C;
    const int y = (int)(p / W), x = (int)(p % W);
    feat[i] = tok[unroll_index(y, x, H, W, k) * C + c];
}

// The same, 16 bytes a thread (C a multiple of the vector, 16-byte aligned
// buffers), a row of feat a grid row: 32-bit index arithmetic (a frame's four
// at S = 2048, fp16, H200: 59 us against the kernel above's 300).
template <typename T>
__global__ void reroll_vec_kernel(const T *__restrict__ tok, int H, int W, int k, int C, T *__restrict__ feat) {
    ck_pdl_enter();
    constexpr int V = 16 / sizeof(T);
    const int cv = C / V, j = (int)(blockIdx.x * blockDim.x + threadIdx.x), y = (int)blockIdx.y;
    if (j >= W * cv) return;
    const int x = j / cv, c = j - x * cv;
    reinterpret_cast<uint4 *>(feat + ((int64_t)y * W + x) * C)[c] =
        reinterpret_cast<const uint4 *>(tok + unroll_index(y, x, H, W, k) * C)[c];
}

// y[n', c] = max over s of x[s*Nq + n', c] + b[c]  (x: the full projection)
template <typename T>
__global__ void maxpool_bias_kernel(const T *__restrict__ x, int64_t Nq, int C, int qs,
                                    const float *__restrict__ b, T *__restrict__ y) {
    ck_pdl_enter();
    const int64_t i = (int64_t)blockIdx.x * blockDim.x + threadIdx.x;
    if (i >= Nq * C) return;
    float v = ck_ld(x + i);
    for (int s = 1; s < qs; s++) v = fmaxf(v, ck_ld(x + i + (int64_t)s * Nq * C));
    ck_st(y + i, v + (b ? b[i % C] : 0.f));
}

// The same, 16 bytes a thread (C a multiple of the vector, 16-byte aligned
// x and y, Nq * C / V < 2^31: 32-bit index arithmetic; a frame's three at
// S = 2048, fp16, H200: 75 us against the kernel above's 205).
template <typename T>
__global__ void maxpool_bias_vec_kernel(const T *__restrict__ x, int nvec, int cv, int64_t plane, int qs,
                                        const float *__restrict__ b, T *__restrict__ y) {
    ck_pdl_enter();
    constexpr int V = 16 / sizeof(T);
    const int i = (int)(blockIdx.x * blockDim.x + threadIdx.x);
    if (i >= nvec) return;
    const uint4 *xv = reinterpret_cast<const uint4 *>(x) + i;
    union U {
        uint4 u;
        T v[V];
    } a, o;
    a.u = xv[0];
    float m[V];
#pragma unroll
    for (int e = 0; e < V; e++) m[e] = ck_ld(&a.v[e]);
    for (int s = 1; s < qs; s++) {
        a.u = xv[(int64_t)s * plane];
#pragma unroll
        for (int e = 0; e < V; e++) m[e] = fmaxf(m[e], ck_ld(&a.v[e]));
    }
    const int c0 = (i % cv) * V;
#pragma unroll
    for (int e = 0; e < V; e++) ck_st(&o.v[e], m[e] + (b ? b[c0 + e] : 0.f));
    reinterpret_cast<uint4 *>(y)[i] = o.u;
}

// The bilinear sample of a G x G map L at taps ty, tx.
__device__ __forceinline__ float bilerp(const float *__restrict__ L, int G, const Tap &ty, const Tap &tx) {
    return ty.l0 * (tx.l0 * L[ty.i0 * G + tx.i0] + tx.l1 * L[ty.i0 * G + tx.i1]) +
           ty.l1 * (tx.l0 * L[ty.i1 * G + tx.i0] + tx.l1 * L[ty.i1 * G + tx.i1]);
}

// rin [7, S, S] = [x[0:3], sigmoid(up(logits))]: a thread per pixel (its
// bilinear taps found once for the four logit channels), a grid row per
// image row: 48 us at S = 2048, fp16, H200, against 152 with a thread per
// value and 64-bit divisions.
template <typename T>
__global__ void refiner_input_kernel(const T *__restrict__ x, const float *__restrict__ logits, int S,
                                     T *__restrict__ rin) {
    ck_pdl_enter();
    const int xx = (int)(blockIdx.x * blockDim.x + threadIdx.x), y = (int)blockIdx.y;
    if (xx >= S) return;
    const int64_t HW = (int64_t)S * S, p = (int64_t)y * S + xx;
    for (int ch = 0; ch < 3; ch++) rin[ch * HW + p] = x[ch * HW + p];
    const int G = S / 4;
    const Tap ty = bilinear_tap(y, G, S), tx = bilinear_tap(xx, G, S);
    for (int ch = 0; ch < 4; ch++) {
        const float v = bilerp(logits + (int64_t)ch * G * G, G, ty, tx);
        ck_st(rin + (3 + ch) * HW + p, sigmoidf_(v));
    }
}

// out [4, S, S] = sigmoid(up(logits) + out): a thread per pixel, as above
// (49 us against 105).
__global__ void finalize_kernel(const float *__restrict__ logits, int S, float *__restrict__ out) {
    ck_pdl_enter();
    const int xx = (int)(blockIdx.x * blockDim.x + threadIdx.x), y = (int)blockIdx.y;
    if (xx >= S) return;
    const int64_t HW = (int64_t)S * S, p = (int64_t)y * S + xx;
    const int G = S / 4;
    const Tap ty = bilinear_tap(y, G, S), tx = bilinear_tap(xx, G, S);
    for (int ch = 0; ch < 4; ch++) {
        const float v = bilerp(logits + (int64_t)ch * G * G, G, ty, tx);
        out[ch * HW + p] = sigmoidf_(v + out[ch * HW + p]);
    }
}

// channels-last: x = relu(a*x + b) or relu(x' + a*y + b), x' = x or, with
// pa / pb, relu(pa*x + pb) (a pending GroupNorm + ReLU)
__device__ __forceinline__ float pre_relu(float x, const float *pa, const float *pb, int c) {
    if (!pa) return x;
    const float u = pa[c] * x + pb[c];
    return u > 0.f ? u : 0.f;
}
template <typename T>
__global__ void affine_kernel(T *__restrict__ x, const T *__restrict__ y, int C, int64_t n,
                              const float *__restrict__ a, const float *__restrict__ b, const float *__restrict__ pa,
                              const float *__restrict__ pb) {
    ck_pdl_enter();
    const int64_t i = (int64_t)blockIdx.x * blockDim.x + threadIdx.x;
    if (i >= n) return;
    const int c = (int)(i % C);
    const float xv = ck_ld(x + i);
    const float v = y ? pre_relu(xv, pa, pb, c) + (a[c] * ck_ld(y + i) + b[c]) : a[c] * xv + b[c];
    ck_st(x + i, v > 0.f ? v : 0.f);
}

// The same, 16 bytes per thread (C a multiple of the vector width, aligned
// buffers): the refiner's 64-channel maps.
template <typename T>
__global__ void affine_vec_kernel(T *__restrict__ x, const T *__restrict__ y, int C, int64_t nvec,
                                  const float *__restrict__ a, const float *__restrict__ b,
                                  const float *__restrict__ pa, const float *__restrict__ pb) {
    ck_pdl_enter();
    constexpr int V = 16 / sizeof(T);
    const int64_t i = (int64_t)blockIdx.x * blockDim.x + threadIdx.x;
    if (i >= nvec) return;
    const int c0 = (int)((i * V) % C);
    uint4 xv = reinterpret_cast<uint4 *>(x)[i], yv = make_uint4(0, 0, 0, 0);
    if (y) yv = reinterpret_cast<const uint4 *>(y)[i];
    T *xe = reinterpret_cast<T *>(&xv);
    const T *ye = reinterpret_cast<const T *>(&yv);
#pragma unroll
    for (int e = 0; e < V; e++) {
        const float xf = ck_ld(xe + e);
        const float v =
            y ? pre_relu(xf, pa, pb, c0 + e) + (a[c0 + e] * ck_ld(ye + e) + b[c0 + e]) : a[c0 + e] * xf + b[c0 + e];
        ck_st(xe + e, v > 0.f ? v : 0.f);
    }
    reinterpret_cast<uint4 *>(x)[i] = xv;
}

// The residual pass's value of one element (affine_vec_kernel's arithmetic
// without a pending affine), rounded to T as that pass stores it.
template <typename T> __device__ __forceinline__ float residual_value(float xf, float yf, float a, float b) {
    const float v = xf + (a * yf + b);
    T r;
    ck_st(&r, v > 0.f ? v : 0.f);
    return ck_ld(&r);
}

// channels-last x [HW, C] -> out [Cout, HW]; with y, x' = relu(x + ra*y + rb)
template <typename T>
__global__ void pointwise_kernel(const T *__restrict__ x, const T *__restrict__ y, const float *__restrict__ ra,
                                 const float *__restrict__ rb, int C, int64_t HW, const float *__restrict__ W,
                                 const float *__restrict__ b, float mult, float *__restrict__ out, int Cout) {
    ck_pdl_enter();
    const int64_t p = (int64_t)blockIdx.x * blockDim.x + threadIdx.x;
    if (p >= HW) return;
    const T *xr = x + p * C, *yr = y ? y + p * C : NULL;
    for (int o = 0; o < Cout; o++) {
        float acc = 0.f;
        for (int c = 0; c < C; c++)
            acc += W[o * C + c] * (yr ? residual_value<T>(ck_ld(xr + c), ck_ld(yr + c), ra[c], rb[c]) : ck_ld(xr + c));
        out[(int64_t)o * HW + p] = mult * (acc + b[o]);
    }
}

// The refiner's final 1x1 conv (64 -> 4): a block stages its kPwPx pixels'
// channels (at most 128 bytes a pixel) in shared memory with coalesced
// 16-byte loads, then a thread per pixel sums each output over c in the same
// order as above (weights in shared memory). With y (res4's t) it also
// applies the last residual as it loads (twice the loads). S = 2048, fp16,
// H200: 128 pixels a block and 6 blocks an SM 371 us, against 381-395 with
// 256 pixels a block and 2-3 blocks an SM (4 spill); without the residual,
// staging 201 us against 282 for a thread per pixel reading its own 128 bytes.
constexpr int kPwMaxC = 64, kPwMaxCout = 4, kPwPx = 128, kPwRowV = 8;
template <typename T>
__global__ void __launch_bounds__(kPwPx, 6)
    pointwise_vec_kernel(const T *__restrict__ x, const T *__restrict__ y, const float *__restrict__ ra,
                         const float *__restrict__ rb, int C, int64_t HW, const float *__restrict__ W,
                         const float *__restrict__ b, float mult, float *__restrict__ out, int Cout) {
    ck_pdl_enter();
    constexpr int V = 16 / sizeof(T);
    __shared__ float ws[kPwMaxCout * kPwMaxC], bs[kPwMaxCout], as[kPwMaxC], cs[kPwMaxC];
    __shared__ uint4 tile[kPwPx * (kPwRowV + 1)]; /* a pixel's row padded by 16 bytes: no bank conflicts */
    for (int i = threadIdx.x; i < Cout * C; i += blockDim.x) ws[i] = W[i];
    if (threadIdx.x < Cout) bs[threadIdx.x] = b[threadIdx.x];
    if (y)
        for (int i = threadIdx.x; i < C; i += blockDim.x) as[i] = ra[i], cs[i] = rb[i];
    const int rv = C / V;
    const int64_t p0 = (int64_t)blockIdx.x * kPwPx;
    const int npx = (int)(HW - p0 < kPwPx ? HW - p0 : kPwPx);
    const uint4 *src = reinterpret_cast<const uint4 *>(x + p0 * C);
    const uint4 *ysrc = y ? reinterpret_cast<const uint4 *>(y + p0 * C) : NULL;
    uint4 r[kPwRowV], q[kPwRowV]; /* every load in flight before the first store */
#pragma unroll
    for (int k = 0; k < kPwRowV; k++) {
        const int i = threadIdx.x + k * kPwPx;
        if (i < npx * rv) {
            r[k] = __ldg(src + i);
            if (y) q[k] = __ldg(ysrc + i);
        }
    }
    if (y) __syncthreads(); /* as, cs */
#pragma unroll
    for (int k = 0; k < kPwRowV; k++) {
        const int i = threadIdx.x + k * kPwPx;
        if (i < npx * rv) {
            const int px = i / rv, cv = i - px * rv;
            if (y) { /* the last residual: x' = relu(x + ra*y + rb), as the residual pass would store it */
                T *xe = reinterpret_cast<T *>(&r[k]);
                const T *ye = reinterpret_cast<const T *>(&q[k]);
#pragma unroll
                for (int e = 0; e < V; e++) {
                    const int c = cv * V + e;
                    ck_st(xe + e, residual_value<T>(ck_ld(xe + e), ck_ld(ye + e), as[c], cs[c]));
                }
            }
            tile[px * (kPwRowV + 1) + cv] = r[k];
        }
    }
    __syncthreads();
    if ((int)threadIdx.x >= npx) return;
    const uint4 *row = tile + threadIdx.x * (kPwRowV + 1);
    float acc[kPwMaxCout] = {0.f, 0.f, 0.f, 0.f};
    for (int c0 = 0; c0 < C; c0 += V) {
        union {
            uint4 u;
            T v[V];
        } chunk;
        chunk.u = row[c0 / V];
#pragma unroll
        for (int j = 0; j < V; j++) {
            const float v = ck_ld(&chunk.v[j]);
#pragma unroll
            for (int o = 0; o < kPwMaxCout; o++)
                if (o < Cout) acc[o] += ws[o * C + c0 + j] * v;
        }
    }
    const int64_t p = p0 + threadIdx.x;
#pragma unroll
    for (int o = 0; o < kPwMaxCout; o++)
        if (o < Cout) out[(int64_t)o * HW + p] = mult * (acc[o] + bs[o]);
}

// 3x3 conv, padding = dilation. Input: image [Cin, S, S] (stem) or a
// channels-last map [S*S, Cin]; output channels-last [S*S, Cout], bias
// added, and per-group sum / sum of squares accumulated in double.
// One block per 32 output pixels of a row; thread (px, co) loops taps and ci.
constexpr int kConvPx = 32;
template <typename T>
__global__ void conv3x3_kernel(const T *__restrict__ in, int image_in, int Cin, int S, int dil,
                               const float *__restrict__ W, const float *__restrict__ bias, T *__restrict__ out,
                               int y0, int Cout, int groups, double *__restrict__ stats) {
    ck_pdl_enter();
    const int y = blockIdx.y + y0; // out holds rows y0.. of the output
    const int x0 = blockIdx.x * kConvPx;
    const int px = threadIdx.x % kConvPx;
    const int x = x0 + px;
    __shared__ double gsum[64], gsq[64];
    if (threadIdx.x < 64) gsum[threadIdx.x] = gsq[threadIdx.x] = 0.0;
    __syncthreads();
    const int cpg = Cout / groups;
    for (int co = threadIdx.x / kConvPx; co < Cout; co += blockDim.x / kConvPx) {
        if (x >= S) break;
        float acc = bias[co];
        for (int ky = 0; ky < 3; ky++) {
            const int iy = y + (ky - 1) * dil;
            if (iy < 0 || iy >= S) continue;
            for (int kx = 0; kx < 3; kx++) {
                const int ix = x + (kx - 1) * dil;
                if (ix < 0 || ix >= S) continue;
                const float *w = W + ((int64_t)co * Cin) * 9 + ky * 3 + kx;
                if (image_in) {
                    for (int ci = 0; ci < Cin; ci++) acc += w[ci * 9] * ck_ld(in + ((int64_t)ci * S + iy) * S + ix);
                } else {
                    const T *ir = in + ((int64_t)iy * S + ix) * Cin;
                    for (int ci = 0; ci < Cin; ci++) acc += w[ci * 9] * ck_ld(ir + ci);
                }
            }
        }
        ck_st(out + ((int64_t)(y - y0) * S + x) * Cout + co, acc);
        atomicAdd(&gsum[co / cpg], (double)acc);
        atomicAdd(&gsq[co / cpg], (double)acc * acc);
    }
    __syncthreads();
    if (threadIdx.x < groups) {
        atomicAdd(&stats[2 * threadIdx.x], gsum[threadIdx.x]);
        atomicAdd(&stats[2 * threadIdx.x + 1], gsq[threadIdx.x]);
    }
}

__global__ void gn_affine_kernel(const double *__restrict__ stats, int groups, int C, int64_t HW,
                                 const float *__restrict__ gamma, const float *__restrict__ beta, float *__restrict__ a,
                                 float *__restrict__ b) {
    ck_pdl_enter();
    const int ch = threadIdx.x;
    if (ch >= C) return;
    const int cpg = C / groups, g = ch / cpg;
    const double n = (double)cpg * (double)HW;
    const double mean = stats[2 * g] / n;
    double var = stats[2 * g + 1] / n - mean * mean;
    if (var < 0) var = 0;
    const double rstd = 1.0 / sqrt(var + 1e-5);
    a[ch] = (float)(gamma[ch] * rstd);
    b[ch] = (float)(beta[ch] - mean * gamma[ch] * rstd);
}

// patch embed: conv k x k / stride + bias + pos, written to the unrolled index
template <typename T>
__global__ void patch_embed_kernel(const T *__restrict__ x, int S, int Cin, int K, int stride, int pad,
                                   const float *__restrict__ w, const float *__restrict__ b,
                                   const float *__restrict__ pos, int E, int k, T *__restrict__ tok) {
    ck_pdl_enter();
    const int G = S / stride;
    const int64_t i = (int64_t)blockIdx.x * blockDim.x + threadIdx.x;
    if (i >= (int64_t)G * G * E) return;
    const int e = (int)(i % E);
    const int64_t p = i / E;
    const int yo = (int)(p / G), xo = (int)(p % G);
    float acc = b[e] + pos[p * E + e];
    for (int ci = 0; ci < Cin; ci++)
        for (int ky = 0; ky < K; ky++) {
            const int iy = yo * stride - pad + ky;
            if (iy < 0 || iy >= S) continue;
            for (int kx = 0; kx < K; kx++) {
                const int ix = xo * stride - pad + kx;
                if (ix < 0 || ix >= S) continue;
                acc += w[((e * Cin + ci) * K + ky) * K + kx] * ck_ld(x + ((int64_t)ci * S + iy) * S + ix);
            }
        }
    ck_st(tok + unroll_index(yo, xo, G, G, k) * E + e, acc);
}

// Patch embed as a GEMM (16-bit sessions): im2col rows for output pixels
// p0 .. p0+n-1, [n, Cin*K*K] in W's (ci, ky, kx) order. A thread writes the
// K values of one (token, ci, ky), so the index arithmetic (32-bit; KC = K
// known at compile time: 7, Hiera's patch embedding, or 0: K at run time)
// is paid once for K values.
template <typename T, int KC>
__global__ void im2col_patch_kernel(const T *__restrict__ x, int S, int Cin, int Kr, int stride, int pad, int p0, int n,
                                    T *__restrict__ col) {
    ck_pdl_enter();
    const int K = KC ? KC : Kr, CK = Cin * K, G = S / stride;
    const int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i >= n * CK) return;
    const int pl = i / CK, r = i - pl * CK, ci = r / K, ky = r - ci * K;
    const int p = p0 + pl, yo = p / G, xo = p - yo * G;
    const int iy = yo * stride - pad + ky, ix0 = xo * stride - pad;
    T *dst = col + (size_t)i * K; // = row pl, column (ci * K + ky) * K
    if (iy < 0 || iy >= S) {
#pragma unroll
        for (int kx = 0; kx < K; kx++) dst[kx] = T(0.f);
        return;
    }
    const T *src = x + ((size_t)ci * S + iy) * S;
#pragma unroll
    for (int kx = 0; kx < K; kx++) {
        const int ix = ix0 + kx;
        dst[kx] = ix >= 0 && ix < S ? src[ix] : T(0.f);
    }
}

// The same, a thread per 4 consecutive values of a row (one 8-byte store;
// Cin * K * K a multiple of 4, K = 7 at compile time): the 2-byte stores of
// the kernel above, 14 bytes apart across a warp, are its cost.
template <typename T, int K>
__global__ void im2col_patch_vec4_kernel(const T *__restrict__ x, int S, int Cin, int stride, int pad, int p0, int n,
                                         T *__restrict__ col) {
    ck_pdl_enter();
    constexpr int KK = K * K;
    const int nv = Cin * KK / 4, G = S / stride;
    const int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i >= n * nv) return;
    const int pl = i / nv, r = i - pl * nv;
    const int p = p0 + pl, yo = p / G, xo = p - yo * G;
    const int iy0 = yo * stride - pad, ix0 = xo * stride - pad;
    const uint16_t *xb = reinterpret_cast<const uint16_t *>(x);
    uint32_t w[2] = {0u, 0u};
#pragma unroll
    for (int j = 0; j < 4; j++) {
        const int q = r * 4 + j, ci = q / KK, t = q - ci * KK, ky = t / K, kx = t - ky * K;
        const int iy = iy0 + ky, ix = ix0 + kx;
        const uint32_t v = iy >= 0 && iy < S && ix >= 0 && ix < S ? xb[((size_t)ci * S + iy) * S + ix] : 0u;
        w[j >> 1] |= v << (16 * (j & 1));
    }
    reinterpret_cast<uint2 *>(col)[i] = make_uint2(w[0], w[1]);
}

// ... then, after the GEMM y [n, E] = col . W^T: bias + pos, scattered to
// the unrolled token order.
template <typename T>
__global__ void patch_epilogue_kernel(const T *__restrict__ y, int G, int E, int k, int64_t p0, int64_t n,
                                      const float *__restrict__ b, const float *__restrict__ pos, T *__restrict__ tok) {
    ck_pdl_enter();
    const int64_t i = (int64_t)blockIdx.x * blockDim.x + threadIdx.x;
    if (i >= n * E) return;
    const int e = (int)(i % E);
    const int64_t p = p0 + i / E;
    ck_st(tok + unroll_index((int)(p / G), (int)(p % G), G, G, k) * E + e, ck_ld(y + i) + b[e] + pos[p * E + e]);
}

// Mask-unit attention within windows: qkv rows in token order (token t of
// window w at row t*nw + w), q pooled over qs (rows Tq*nw apart); one thread
// per (query, head); out [Nq, Do] in the same order.
template <int HD, typename TT>
__global__ void window_attention_kernel(const TT *__restrict__ qkv, int64_t nw, int T, int qs, int Do,
                                        int heads, float scale, TT *__restrict__ out, int ldo) {
    ck_pdl_enter();
    const int64_t i = (int64_t)blockIdx.x * blockDim.x + threadIdx.x;
    const int Tq = T / qs;
    if (i >= (int64_t)Tq * nw * heads) return;
    const int h = (int)(i % heads);
    const int64_t jw = i / heads; // row of the output: j*nw + w
    const int64_t w = jw % nw, j = jw / nw;
    const int64_t ld = 3 * (int64_t)Do;
    float q[HD], o[HD];
    const TT *src = qkv + (j * nw + w) * ld + (int64_t)h * HD;
    for (int e = 0; e < HD; e++) q[e] = ck_ld(src + e);
    for (int s = 1; s < qs; s++) {
        const TT *o2 = qkv + ((s * Tq + j) * nw + w) * ld + (int64_t)h * HD;
        for (int e = 0; e < HD; e++) q[e] = fmaxf(q[e], ck_ld(o2 + e));
    }
    for (int e = 0; e < HD; e++) q[e] *= scale, o[e] = 0.f;
    float m = -INFINITY, l = 0.f;
    for (int t = 0; t < T; t++) {
        const TT *kr = qkv + ((int64_t)t * nw + w) * ld + Do + (int64_t)h * HD;
        float s = 0.f;
#pragma unroll
        for (int e = 0; e < HD; e++) s += q[e] * ck_ld(kr + e);
        if (s > m) {
            const float corr = __expf(m - s);
            l *= corr;
#pragma unroll
            for (int e = 0; e < HD; e++) o[e] *= corr;
            m = s;
        }
        const float p = __expf(s - m);
        l += p;
        const TT *vr = kr + Do;
#pragma unroll
        for (int e = 0; e < HD; e++) o[e] += p * ck_ld(vr + e);
    }
    TT *dst = out + jw * ldo + (int64_t)h * HD;
    const float inv = 1.f / l;
    for (int e = 0; e < HD; e++) ck_st(dst + e, o[e] * inv);
}

// The decoder epilogue kernels' shared parts: a pixel's bilinear taps into
// the three coarser maps, and the warp's classifier sums reduced and stored.
__device__ __forceinline__ void dec_taps(int y, int x, int G, const int (&Hk)[3], Tap (&ty)[3], Tap (&tx)[3]) {
#pragma unroll
    for (int s = 0; s < 3; s++) ty[s] = bilinear_tap(y, Hk[s], G), tx[s] = bilinear_tap(x, Hk[s], G);
}
__device__ __forceinline__ void dec_store(float (&acc)[4], int lane, int y, int x, int G, const float *__restrict__ cls_b,
                                          float *__restrict__ logits) {
    for (int o = 0; o < 4; o++)
        for (int off = 16; off > 0; off >>= 1) acc[o] += __shfl_xor_sync(0xffffffffu, acc[o], off);
    if (lane < 4) logits[((int64_t)lane * G + y) * G + x] = acc[lane] + cls_b[lane];
}

// 16-bit pairs <-> float2, for 8-value loads and stores of either type
template <typename T> struct Half2Of;
template <> struct Half2Of<__half> {
    typedef __half2 P;
    static __device__ __forceinline__ float2 get(P p) { return __half22float2(p); }
    static __device__ __forceinline__ P make(float a, float b) { return __floats2half2_rn(a, b); }
};
template <> struct Half2Of<__nv_bfloat16> {
    typedef __nv_bfloat162 P;
    static __device__ __forceinline__ float2 get(P p) { return __bfloat1622float2(p); }
    static __device__ __forceinline__ P make(float a, float b) { return __floats2bfloat162_rn(a, b); }
};
template <typename T> __device__ __forceinline__ void ld8(const T *p, float (&v)[8]) {
    const uint4 u = *reinterpret_cast<const uint4 *>(p);
    const typename Half2Of<T>::P *h = reinterpret_cast<const typename Half2Of<T>::P *>(&u);
#pragma unroll
    for (int i = 0; i < 4; i++) {
        const float2 f = Half2Of<T>::get(h[i]);
        v[2 * i] = f.x, v[2 * i + 1] = f.y;
    }
}
__device__ __forceinline__ void ld8(const float *p, float (&v)[8]) {
    const float4 a = *reinterpret_cast<const float4 *>(p), b = *reinterpret_cast<const float4 *>(p + 4);
    v[0] = a.x, v[1] = a.y, v[2] = a.z, v[3] = a.w, v[4] = b.x, v[5] = b.y, v[6] = b.z, v[7] = b.w;
}
template <typename T> __device__ __forceinline__ void st8(T *p, const float (&v)[8]) {
    uint4 u;
    typename Half2Of<T>::P *h = reinterpret_cast<typename Half2Of<T>::P *>(&u);
#pragma unroll
    for (int i = 0; i < 4; i++) h[i] = Half2Of<T>::make(v[2 * i], v[2 * i + 1]);
    *reinterpret_cast<uint4 *>(p) = u;
}
__device__ __forceinline__ void st8(float *p, const float (&v)[8]) {
    *reinterpret_cast<float4 *>(p) = make_float4(v[0], v[1], v[2], v[3]);
    *reinterpret_cast<float4 *>(p + 4) = make_float4(v[4], v[5], v[6], v[7]);
}

// patch_epilogue_kernel with a thread for 8 consecutive channels of a token
// (E % 8 == 0, every pointer 16-byte aligned): 16-byte loads and stores, the
// token's unrolled position worked out once for 8 values. The same sums in
// the same order (y + b + pos, rounded once).
template <typename T>
__global__ void patch_epilogue_vec_kernel(const T *__restrict__ y, int G, int E, int k, int64_t p0, int64_t n,
                                          const float *__restrict__ b, const float *__restrict__ pos,
                                          T *__restrict__ tok) {
    ck_pdl_enter();
    const int E8 = E / 8;
    const int64_t i = (int64_t)blockIdx.x * blockDim.x + threadIdx.x;
    if (i >= n * E8) return;
    const int64_t pl = i / E8;
    const int e = (int)(i - pl * E8) * 8;
    const int64_t p = p0 + pl;
    const int yo = (int)(p / G), xo = (int)(p - (int64_t)yo * G);
    float v[8], bb[8], pp[8];
    ld8(y + pl * E + e, v);
    ld8(b + e, bb);
    ld8(pos + p * E + e, pp);
#pragma unroll
    for (int j = 0; j < 8; j++) v[j] = v[j] + bb[j] + pp[j];
    st8(tok + unroll_index(yo, xo, G, G, k) * E + e, v);
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
    const T *P[3] = {P2, P3, P4};
    const int Hk[3] = {H2, H3, H4};
    Tap ty[3], tx[3];
    dec_taps(y, x, G, Hk, ty, tx);
    float acc[4] = {0.f, 0.f, 0.f, 0.f};
    const T *hr = h + wid * D2;
    for (int e = lane; e < D2; e += 32) {
        float v = ck_ld(hr + e) + b1[e];
        for (int s = 0; s < 3; s++) {
            const int Hs = Hk[s];
            const T *Q = P[s];
            v += ty[s].l0 * (tx[s].l0 * ck_ld(Q + ((int64_t)ty[s].i0 * Hs + tx[s].i0) * D2 + e) +
                             tx[s].l1 * ck_ld(Q + ((int64_t)ty[s].i0 * Hs + tx[s].i1) * D2 + e)) +
                 ty[s].l1 * (tx[s].l0 * ck_ld(Q + ((int64_t)ty[s].i1 * Hs + tx[s].i0) * D2 + e) +
                             tx[s].l1 * ck_ld(Q + ((int64_t)ty[s].i1 * Hs + tx[s].i1) * D2 + e));
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
    const T *P[3] = {P2, P3, P4};
    const int Hk[3] = {H2, H3, H4};
    Tap ty[3], tx[3];
    dec_taps(y, x, G, Hk, ty, tx);
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
            const int Hs = Hk[s];
            const T *Q = P[s];
            float q00[8], q01[8], q10[8], q11[8];
            ld8(Q + ((int64_t)ty[s].i0 * Hs + tx[s].i0) * D2 + e, q00);
            ld8(Q + ((int64_t)ty[s].i0 * Hs + tx[s].i1) * D2 + e, q01);
            ld8(Q + ((int64_t)ty[s].i1 * Hs + tx[s].i0) * D2 + e, q10);
            ld8(Q + ((int64_t)ty[s].i1 * Hs + tx[s].i1) * D2 + e, q11);
#pragma unroll
            for (int k = 0; k < 8; k++)
                v[k] += ty[s].l0 * (tx[s].l0 * q00[k] + tx[s].l1 * q01[k]) +
                        ty[s].l1 * (tx[s].l0 * q10[k] + tx[s].l1 * q11[k]);
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

inline unsigned blocks_for(int64_t n, int t) { return (unsigned)((n + t - 1) / t); }

ckey_status launched(ckey_error *err, const char *what) {
    cudaError_t e = cudaGetLastError();
    if (e == cudaSuccess) return CKEY_OK;
    if (err) {
        snprintf(err->message, sizeof err->message, "CUDA: %s: %s", what, cudaGetErrorString(e));
        err->status = CKEY_ERR_DEVICE;
    }
    return CKEY_ERR_DEVICE;
}

} // namespace


extern "C" {

#define LAUNCH_T(dt, grid, threads, kern, ...)                                                                         \
    CK_DISPATCH(dt, (ck_launch(kern<T>, (grid), (threads), 0, (cudaStream_t)st, __VA_ARGS__)))

ckey_status ck_cuda_reroll_t(const void *tok, int H, int W, int k, int C, void *feat, ck_dtype dt, void *st,
                             ckey_error *err) {
    const int64_t n = (int64_t)H * W * C;
    const int V = 16 / (int)ck_dtype_size(dt);
    if (C % V == 0 && (int64_t)W * (C / V) <= INT_MAX && H <= 65535 && (((uintptr_t)tok | (uintptr_t)feat) & 15) == 0) {
        const dim3 grid(blocks_for((int64_t)W * (C / V), 256), (unsigned)H);
        LAUNCH_T(dt, grid, 256, reroll_vec_kernel, (const T *)tok, H, W, k, C, (T *)feat);
        return launched(err, "reroll");
    }
    LAUNCH_T(dt, blocks_for(n, 256), 256, reroll_kernel, (const T *)tok, H, W, k, C, (T *)feat);
    return launched(err, "reroll");
}

ckey_status ck_cuda_maxpool_bias_t(const void *x, int64_t Nq, int C, int qs, const float *b, void *y, ck_dtype dt,
                                   void *st, ckey_error *err) {
    const int V = 16 / (int)ck_dtype_size(dt);
    if (C % V == 0 && Nq * (C / V) <= INT_MAX && (((uintptr_t)x | (uintptr_t)y) & 15) == 0) {
        const int64_t nvec = Nq * (C / V);
        LAUNCH_T(dt, blocks_for(nvec, 256), 256, maxpool_bias_vec_kernel, (const T *)x, (int)nvec, C / V, nvec, qs, b,
                 (T *)y);
        return launched(err, "maxpool");
    }
    LAUNCH_T(dt, blocks_for(Nq * C, 256), 256, maxpool_bias_kernel, (const T *)x, Nq, C, qs, b, (T *)y);
    return launched(err, "maxpool");
}

ckey_status ck_cuda_bias_gelu_t(void *h, int64_t rows, int C, const float *b, ck_dtype dt, void *st, ckey_error *err) {
    /* bias + erf GELU (erff for fp32 storage, an erf of absolute error < 1e-6 for
     * 16-bit), 16-byte vectors where C and h allow (rowbias.cuh) */
    cudaError_t e;
    CK_DISPATCH(dt, (e = ck_rowbias_launch<T, true>((T *)h, rows, C, C, b, (cudaStream_t)st)));
    if (e == cudaSuccess) return CKEY_OK;
    if (err) {
        snprintf(err->message, sizeof err->message, "CUDA: bias+gelu: %s", cudaGetErrorString(e));
        err->status = CKEY_ERR_DEVICE;
    }
    return CKEY_ERR_DEVICE;
}

ckey_status ck_cuda_refiner_input_t(const void *x, const float *logits, int S, void *rin, ck_dtype dt, void *st,
                                    ckey_error *err) {
    if (S <= 0) return CKEY_OK;
    LAUNCH_T(dt, dim3(blocks_for(S, 256), (unsigned)S), 256, refiner_input_kernel, (const T *)x, logits, S, (T *)rin);
    return launched(err, "refiner input");
}

ckey_status ck_cuda_finalize(const float *logits, int S, float *out, void *st, ckey_error *err) {
    if (S <= 0) return CKEY_OK;
    ck_launch(finalize_kernel, dim3(blocks_for(S, 256), (unsigned)S), 256, 0, (cudaStream_t)st, logits, S, out);
    return launched(err, "finalize");
}

ckey_status ck_cuda_residual_relu_t(void *x, const void *y, int C, int64_t HW, const float *a, const float *b,
                                    const float *pre_a, const float *pre_b, ck_dtype dt, void *st, ckey_error *err) {
    const size_t V = 16 / ck_dtype_size(dt);
    if (!y) pre_a = pre_b = NULL;
    if (C % V == 0 && ((uintptr_t)x & 15) == 0 && ((uintptr_t)y & 15) == 0) {
        const int64_t nvec = HW * C / (int64_t)V;
        LAUNCH_T(dt, blocks_for(nvec, 256), 256, affine_vec_kernel, (T *)x, (const T *)y, C, nvec, a, b, pre_a,
                 pre_b);
        return launched(err, "affine+relu");
    }
    LAUNCH_T(dt, blocks_for(HW * C, 256), 256, affine_kernel, (T *)x, (const T *)y, C, HW * C, a, b, pre_a, pre_b);
    return launched(err, "affine+relu");
}
ckey_status ck_cuda_affine_relu_t(void *x, const void *y, int C, int64_t HW, const float *a, const float *b,
                                  ck_dtype dt, void *st, ckey_error *err) {
    return ck_cuda_residual_relu_t(x, y, C, HW, a, b, NULL, NULL, dt, st, err);
}

ckey_status ck_cuda_pointwise_t(const void *x, const void *y, const float *ra, const float *rb, int C, int64_t HW,
                                const float *W, const float *b, float mult, float *out, int Cout, ck_dtype dt, void *st,
                                ckey_error *err) {
    const int V = 16 / (int)ck_dtype_size(dt);
    if (C <= kPwMaxC && C / V <= kPwRowV && Cout <= kPwMaxCout && C % V == 0 &&
        (((uintptr_t)x | (uintptr_t)y) & 15) == 0) {
        LAUNCH_T(dt, blocks_for(HW, kPwPx), kPwPx, pointwise_vec_kernel, (const T *)x, (const T *)y, ra, rb, C, HW, W,
                 b, mult, out, Cout);
        return launched(err, "pointwise conv");
    }
    LAUNCH_T(dt, blocks_for(HW, 128), 128, pointwise_kernel, (const T *)x, (const T *)y, ra, rb, C, HW, W, b, mult,
             out, Cout);
    return launched(err, "pointwise conv");
}

ckey_status ck_cuda_conv3x3_rows_t(const void *in, int image_in, int Cin, int S, int dil, const float *W,
                                   const float *bias, void *out, int y0, int y1, int Cout, int groups, double *stats,
                                   ck_dtype dt, void *st, ckey_error *err) {
    if (Cout > 64 || groups > 64 || Cout % groups) {
        if (err) {
            snprintf(err->message, sizeof err->message, "conv3x3: %d channels / %d groups unsupported", Cout, groups);
            err->status = CKEY_ERR_UNSUPPORTED;
        }
        return CKEY_ERR_UNSUPPORTED;
    }
    if (y1 <= y0) return CKEY_OK;
    dim3 grid((unsigned)((S + kConvPx - 1) / kConvPx), (unsigned)(y1 - y0));
    LAUNCH_T(dt, grid, kConvPx * 8, conv3x3_kernel, (const T *)in, image_in, Cin, S, dil, W, bias, (T *)out, y0, Cout,
             groups, stats);
    return launched(err, "conv3x3");
}

ckey_status ck_cuda_conv3x3_t(const void *in, int image_in, int Cin, int S, int dil, const float *W,
                              const float *bias, void *out, int Cout, int groups, double *stats, ck_dtype dt, void *st,
                              ckey_error *err) {
    return ck_cuda_conv3x3_rows_t(in, image_in, Cin, S, dil, W, bias, out, 0, S, Cout, groups, stats, dt, st, err);
}

ckey_status ck_cuda_groupnorm_affine(const double *stats, int groups, int C, int64_t HW, const float *gamma,
                                     const float *beta, float *a, float *b, void *st, ckey_error *err) {
    ck_launch(gn_affine_kernel, 1, C, 0, (cudaStream_t)st, stats, groups, C, HW, gamma, beta, a, b);
    return launched(err, "groupnorm affine");
}

ckey_status ck_cuda_patch_embed_t(const void *x, int S, int Cin, int K, int stride, int pad, const float *w,
                                  const float *b, const float *pos, int E, int k, void *tok, ck_dtype dt, void *st,
                                  ckey_error *err) {
    const int G = S / stride;
    LAUNCH_T(dt, blocks_for((int64_t)G * G * E, 128), 128, patch_embed_kernel, (const T *)x, S, Cin, K, stride, pad, w,
             b, pos, E, k, (T *)tok);
    return launched(err, "patch embed");
}

ckey_status ck_cuda_im2col_patch_t(const void *x, int S, int Cin, int K, int stride, int pad, int64_t p0, int64_t n,
                                   void *col, ck_dtype dt, void *st, ckey_error *err) {
    if (n <= 0) return CKEY_OK;
    const int64_t G = S / stride, threads = n * Cin * K;
    if (p0 < 0 || p0 + n > G * G || threads > INT_MAX) {
        if (err) {
            snprintf(err->message, sizeof err->message, "patch embed im2col: rows %lld..%lld of %lld, or too many",
                     (long long)p0, (long long)(p0 + n), (long long)(G * G));
            err->status = CKEY_ERR_INVALID_ARG;
        }
        return CKEY_ERR_INVALID_ARG;
    }
    cudaStream_t cs = (cudaStream_t)st;
    if (K == 7 && dt != CK_F32 && (Cin * 49) % 4 == 0 && ((uintptr_t)col & 7) == 0 && n * Cin * 49 / 4 <= INT_MAX) {
        const unsigned vblocks = (unsigned)blocks_for(n * Cin * 49 / 4, 256);
        CK_DISPATCH(dt, (ck_launch(im2col_patch_vec4_kernel<T, 7>, vblocks, 256, 0, (cudaStream_t)cs, (const T *)x, S,
                                   Cin, stride, pad, (int)p0, (int)n, (T *)col)));
        return launched(err, "patch embed im2col");
    }
    const unsigned blocks = (unsigned)blocks_for(threads, 256);
    if (K == 7)
        CK_DISPATCH(dt, (ck_launch(im2col_patch_kernel<T, 7>, blocks, 256, 0, (cudaStream_t)cs, (const T *)x, S, Cin, K,
                                   stride, pad, (int)p0, (int)n, (T *)col)));
    else
        CK_DISPATCH(dt, (ck_launch(im2col_patch_kernel<T, 0>, blocks, 256, 0, (cudaStream_t)cs, (const T *)x, S, Cin, K,
                                   stride, pad, (int)p0, (int)n, (T *)col)));
    return launched(err, "patch embed im2col");
}

ckey_status ck_cuda_patch_epilogue_t(const void *y, int G, int E, int k, int64_t p0, int64_t n, const float *b,
                                     const float *pos, void *tok, ck_dtype dt, void *st, ckey_error *err) {
    const uintptr_t al = (uintptr_t)y | (uintptr_t)b | (uintptr_t)pos | (uintptr_t)tok;
    if (E % 8 == 0 && al % 16 == 0)
        LAUNCH_T(dt, blocks_for(n * (E / 8), 256), 256, patch_epilogue_vec_kernel, (const T *)y, G, E, k, p0, n, b, pos,
                 (T *)tok);
    else
        LAUNCH_T(dt, blocks_for(n * E, 256), 256, patch_epilogue_kernel, (const T *)y, G, E, k, p0, n, b, pos,
                 (T *)tok);
    return launched(err, "patch embed epilogue");
}

ckey_status ck_cuda_window_attention_t(const void *qkv, int64_t nw, int Tw, int qs, int Do, int heads, void *out,
                                       ck_dtype dt, void *st, ckey_error *err) {
    return ck_cuda_window_attention_ld_t(qkv, nw, Tw, qs, Do, heads, out, Do, dt, st, err);
}

ckey_status ck_cuda_window_attention_ld_t(const void *qkv, int64_t nw, int Tw, int qs, int Do, int heads, void *out,
                                          int ldo, ck_dtype dt, void *st, ckey_error *err) {
    const int hd = Do / heads;
    const int64_t n = (int64_t)(Tw / qs) * nw * heads;
    const float scale = 1.f / sqrtf((float)hd);
    const unsigned g = blocks_for(n, 128);
    cudaStream_t s = (cudaStream_t)st;
#define WA(HD)                                                                                                         \
    CK_DISPATCH(dt, (ck_launch(window_attention_kernel<HD, T>, g, 128, 0, (cudaStream_t)s, (const T *)qkv, nw, Tw, qs, \
                               Do, heads, scale, (T *)out, ldo)))
    switch (hd) {
    case 16: WA(16); break;
    case 32: WA(32); break;
    case 56: WA(56); break;
    case 64: WA(64); break;
    default:
        if (err) {
            snprintf(err->message, sizeof err->message, "window attention: head_dim %d has no CUDA kernel", hd);
            err->status = CKEY_ERR_UNSUPPORTED;
        }
        return CKEY_ERR_UNSUPPORTED;
    }
#undef WA
    return launched(err, "window attention");
}

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

/* fp32 entry points (tests and fp32 sessions) */
ckey_status ck_cuda_reroll(const float *tok, int H, int W, int k, int C, float *feat, void *st, ckey_error *err) {
    return ck_cuda_reroll_t(tok, H, W, k, C, feat, CK_F32, st, err);
}
ckey_status ck_cuda_maxpool_bias(const float *x, int64_t Nq, int C, int qs, const float *b, float *y, void *st,
                                 ckey_error *err) {
    return ck_cuda_maxpool_bias_t(x, Nq, C, qs, b, y, CK_F32, st, err);
}
float ck_cuda_gelu_fast_host(float v) { return ck_gelu_fast(v); }

ckey_status ck_cuda_bias_gelu(float *h, int64_t rows, int C, const float *b, void *st, ckey_error *err) {
    return ck_cuda_bias_gelu_t(h, rows, C, b, CK_F32, st, err);
}
ckey_status ck_cuda_refiner_input(const float *x, const float *logits, int S, float *rin, void *st, ckey_error *err) {
    return ck_cuda_refiner_input_t(x, logits, S, rin, CK_F32, st, err);
}
ckey_status ck_cuda_affine_relu(float *x, const float *y, int C, int64_t HW, const float *a, const float *b, void *st,
                                ckey_error *err) {
    return ck_cuda_affine_relu_t(x, y, C, HW, a, b, CK_F32, st, err);
}
ckey_status ck_cuda_pointwise(const float *x, int C, int64_t HW, const float *W, const float *b, float mult,
                              float *out, int Cout, void *st, ckey_error *err) {
    return ck_cuda_pointwise_t(x, NULL, NULL, NULL, C, HW, W, b, mult, out, Cout, CK_F32, st, err);
}
ckey_status ck_cuda_conv3x3(const float *in, int image_in, int Cin, int S, int dil, const float *W, const float *bias,
                            float *out, int Cout, int groups, double *stats, void *st, ckey_error *err) {
    return ck_cuda_conv3x3_t(in, image_in, Cin, S, dil, W, bias, out, Cout, groups, stats, CK_F32, st, err);
}
ckey_status ck_cuda_patch_embed(const float *x, int S, int Cin, int K, int stride, int pad, const float *w,
                                const float *b, const float *pos, int E, int k, float *tok, void *st,
                                ckey_error *err) {
    return ck_cuda_patch_embed_t(x, S, Cin, K, stride, pad, w, b, pos, E, k, tok, CK_F32, st, err);
}
ckey_status ck_cuda_window_attention(const float *qkv, int64_t nw, int T, int qs, int Do, int heads, float *out,
                                     void *st, ckey_error *err) {
    return ck_cuda_window_attention_t(qkv, nw, T, qs, Do, heads, out, CK_F32, st, err);
}
ckey_status ck_cuda_decoder_epilogue(const float *h, int64_t p0, int64_t n, int G, int D2, const float *P2, int H2,
                                     const float *P3, int H3, const float *P4, int H4, const float *b1,
                                     const float *cls_w, const float *cls_b, float *logits, void *st, ckey_error *err) {
    return ck_cuda_decoder_epilogue_t(h, p0, n, G, D2, P2, H2, P3, H3, P4, H4, b1, cls_w, cls_b, logits, CK_F32, st,
                                      err);
}

} // extern "C"
