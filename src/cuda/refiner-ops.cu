// The refiner's ops on CUDA cores, in every storage type (dtype.cuh), each
// checked against the CPU op by tests/test-cuda.c: the refiner input, the
// 3x3 conv with its GroupNorm sums (where the tensor-core convs of
// refiner-mma.cu / refiner-wgmma.cu do not apply), the GroupNorm affine,
// affine / residual + ReLU, the final 1x1 conv and the final sigmoid.
// Layouts are the CPU backend's: refiner maps channels-last [S*S, C],
// images, logits and outputs [C, S, S].
#include <cuda_runtime.h>
#include <math.h>
#include <stdio.h>

#include "cuda/kernels.h"
#include "cuda/dtype.cuh"
#include "cuda/launch.cuh"
#include "cuda/ops-common.cuh"

namespace {

__device__ __forceinline__ float sigmoidf_(float v) { return 1.f / (1.f + expf(-v)); }

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

// Rows y0 .. y0 + gridDim.y - 1 of the same into a band: planes [7, n, S]
// (PACK = false) or, for the tensor-core stem, pixels [n * S, 8] with
// channel 7 zero (PACK = true: the layout ck_cuda_refiner_stem_input makes of
// a whole map). Each value is the whole-map kernel's.
template <typename T, bool PACK>
__global__ void refiner_input_rows_kernel(const T *__restrict__ x, int x_r0, int x_rows,
                                          const float *__restrict__ logits, int S, int y0, T *__restrict__ rin) {
    ck_pdl_enter();
    const int xx = (int)(blockIdx.x * blockDim.x + threadIdx.x), yb = (int)blockIdx.y, y = y0 + yb;
    if (xx >= S) return;
    // x: image rows x_r0.., planes x_rows rows apart
    const int64_t HW = (int64_t)x_rows * S, p = (int64_t)(y - x_r0) * S + xx, q = (int64_t)yb * S + xx;
    const int64_t bn = (int64_t)gridDim.y * S; // a plane of the band
    const int G = S / 4;
    const Tap ty = bilinear_tap(y, G, S), tx = bilinear_tap(xx, G, S);
    T v[8];
    for (int ch = 0; ch < 3; ch++) v[ch] = x[ch * HW + p];
    for (int ch = 0; ch < 4; ch++) ck_st(v + 3 + ch, sigmoidf_(bilerp(logits + (int64_t)ch * G * G, G, ty, tx)));
    if constexpr (PACK && sizeof(T) == 2) { /* a pixel's 16 bytes as one store */
        v[7] = T(0.f);
        union {
            uint4 u;
            T e[8];
        } o;
#pragma unroll
        for (int c = 0; c < 8; c++) o.e[c] = v[c];
        *reinterpret_cast<uint4 *>(rin + q * 8) = o.u;
    } else if constexpr (PACK) {
        v[7] = T(0.f);
        for (int c = 0; c < 8; c++) rin[q * 8 + c] = v[c];
    } else {
        for (int ch = 0; ch < 7; ch++) rin[ch * bn + q] = v[ch];
    }
}

// out [4, S, S] = sigmoid(up(logits) + out): a thread per pixel, as above
// (49 us against 105); out holds rows y0 .. y0 + gridDim.y - 1 of each plane.
__global__ void finalize_kernel(const float *__restrict__ logits, int S, int y0, float *__restrict__ out) {
    ck_pdl_enter();
    const int xx = (int)(blockIdx.x * blockDim.x + threadIdx.x), y = (int)blockIdx.y + y0;
    if (xx >= S) return;
    const int64_t HW = (int64_t)gridDim.y * S, p = (int64_t)blockIdx.y * S + xx;
    const int G = S / 4;
    const Tap ty = bilinear_tap(y, G, S), tx = bilinear_tap(xx, G, S);
    for (int ch = 0; ch < 4; ch++) {
        const float v = bilerp(logits + (int64_t)ch * G * G, G, ty, tx);
        out[ch * HW + p] = sigmoidf_(v + out[ch * HW + p]);
    }
}

// 3x3 conv, padding = dilation. Input: image [Cin, S, S] (stem) or a
// channels-last map [S*S, Cin], or a band of either holding image rows
// in_r0 .. (planes in_cs elements apart for an image); output channels-last
// [S*S, Cout], bias added, and (stats not NULL) per-group sum / sum of squares accumulated in
// double.
// One block per 32 output pixels of a row; thread (px, co) loops taps and ci.
constexpr int kConvPx = 32;
template <typename T>
__global__ void conv3x3_kernel(const T *__restrict__ in, int image_in, int Cin, int S, int dil, int in_r0,
                               int64_t in_cs, const float *__restrict__ W, const float *__restrict__ bias,
                               T *__restrict__ out, int y0, int Cout, int groups, double *__restrict__ stats) {
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
                const int64_t ip = (int64_t)(iy - in_r0) * S + ix; // the pixel within the input (band)
                if (image_in) {
                    for (int ci = 0; ci < Cin; ci++) acc += w[ci * 9] * ck_ld(in + ci * in_cs + ip);
                } else {
                    const T *ir = in + ip * Cin;
                    for (int ci = 0; ci < Cin; ci++) acc += w[ci * 9] * ck_ld(ir + ci);
                }
            }
        }
        ck_st(out + ((int64_t)(y - y0) * S + x) * Cout + co, acc);
        atomicAdd(&gsum[co / cpg], (double)acc);
        atomicAdd(&gsq[co / cpg], (double)acc * acc);
    }
    __syncthreads();
    if (stats && threadIdx.x < groups) { /* stats NULL: not wanted (the banded refiner's recomputed convs) */
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

// channels-last x [HW, C] -> out [Cout, HW] (planes ops elements apart: HW,
// or S * S for a band of rows); with y, x' = relu(x + ra*y + rb)
template <typename T>
__global__ void pointwise_kernel(const T *__restrict__ x, const T *__restrict__ y, const float *__restrict__ ra,
                                 const float *__restrict__ rb, int C, int64_t HW, const float *__restrict__ W,
                                 const float *__restrict__ b, float mult, float *__restrict__ out, int64_t ops,
                                 int Cout) {
    ck_pdl_enter();
    const int64_t p = (int64_t)blockIdx.x * blockDim.x + threadIdx.x;
    if (p >= HW) return;
    const T *xr = x + p * C, *yr = y ? y + p * C : NULL;
    for (int o = 0; o < Cout; o++) {
        float acc = 0.f;
        for (int c = 0; c < C; c++)
            acc += W[o * C + c] * (yr ? residual_value<T>(ck_ld(xr + c), ck_ld(yr + c), ra[c], rb[c]) : ck_ld(xr + c));
        out[(int64_t)o * ops + p] = mult * (acc + b[o]);
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
                         const float *__restrict__ b, float mult, float *__restrict__ out, int64_t ops, int Cout) {
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
        if (o < Cout) out[(int64_t)o * ops + p] = mult * (acc[o] + bs[o]);
}

} // namespace

extern "C" {

ckey_status ck_cuda_refiner_input_t(const void *x, const float *logits, int S, void *rin, ck_dtype dt, void *st,
                                    ckey_error *err) {
    if (S <= 0) return CKEY_OK;
    LAUNCH_T(dt, dim3(blocks_for(S, 256), (unsigned)S), 256, refiner_input_kernel, (const T *)x, logits, S, (T *)rin);
    return launched(err, "refiner input");
}

ckey_status ck_cuda_refiner_input_rows_t(const void *x, int x_r0, int x_rows, const float *logits, int S, int y0, int n,
                                         int packed, void *rin, ck_dtype dt, void *st, ckey_error *err) {
    if (S <= 0 || n <= 0) return CKEY_OK;
    if (y0 < 0 || y0 + n > S || y0 < x_r0 || y0 + n > x_r0 + x_rows || (packed && ((uintptr_t)rin & 15))) {
        if (err) {
            snprintf(err->message, sizeof err->message, "refiner input rows: bad band %d + %d of %d%s", y0, n, S,
                     packed ? " (packed: 16-byte aligned)" : "");
            err->status = CKEY_ERR_INVALID_ARG;
        }
        return CKEY_ERR_INVALID_ARG;
    }
    const dim3 grid(blocks_for(S, 256), (unsigned)n);
    if (packed)
        CK_DISPATCH(dt, (ck_launch(refiner_input_rows_kernel<T, true>, grid, 256, 0, (cudaStream_t)st, (const T *)x,
                                   x_r0, x_rows, logits, S, y0, (T *)rin)));
    else
        CK_DISPATCH(dt, (ck_launch(refiner_input_rows_kernel<T, false>, grid, 256, 0, (cudaStream_t)st, (const T *)x,
                                   x_r0, x_rows, logits, S, y0, (T *)rin)));
    return launched(err, "refiner input rows");
}

ckey_status ck_cuda_conv3x3_band_t(const void *in, int image_in, int Cin, int S, int dil, int in_r0, int in_n,
                                   const float *W, const float *bias, void *out, int y0, int y1, int Cout, int groups,
                                   double *stats, ck_dtype dt, void *st, ckey_error *err) {
    if (Cout > 64 || groups > 64 || Cout % groups) {
        if (err) {
            snprintf(err->message, sizeof err->message, "conv3x3: %d channels / %d groups unsupported", Cout, groups);
            err->status = CKEY_ERR_UNSUPPORTED;
        }
        return CKEY_ERR_UNSUPPORTED;
    }
    if (y1 <= y0) return CKEY_OK;
    dim3 grid((unsigned)((S + kConvPx - 1) / kConvPx), (unsigned)(y1 - y0));
    LAUNCH_T(dt, grid, kConvPx * 8, conv3x3_kernel, (const T *)in, image_in, Cin, S, dil, in_r0, (int64_t)in_n * S, W,
             bias, (T *)out, y0, Cout, groups, stats);
    return launched(err, "conv3x3");
}

ckey_status ck_cuda_conv3x3_rows_t(const void *in, int image_in, int Cin, int S, int dil, const float *W,
                                   const float *bias, void *out, int y0, int y1, int Cout, int groups, double *stats,
                                   ck_dtype dt, void *st, ckey_error *err) {
    return ck_cuda_conv3x3_band_t(in, image_in, Cin, S, dil, 0, S, W, bias, out, y0, y1, Cout, groups, stats, dt, st,
                                  err);
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

static ckey_status pointwise_launch(const void *x, const void *y, const float *ra, const float *rb, int C,
                                    int64_t HW, const float *W, const float *b, float mult, float *out, int64_t ops,
                                    int Cout, ck_dtype dt, void *st, ckey_error *err) {
    const int V = 16 / (int)ck_dtype_size(dt);
    if (C <= kPwMaxC && C / V <= kPwRowV && Cout <= kPwMaxCout && C % V == 0 &&
        (((uintptr_t)x | (uintptr_t)y) & 15) == 0) {
        LAUNCH_T(dt, blocks_for(HW, kPwPx), kPwPx, pointwise_vec_kernel, (const T *)x, (const T *)y, ra, rb, C, HW, W,
                 b, mult, out, ops, Cout);
        return launched(err, "pointwise conv");
    }
    LAUNCH_T(dt, blocks_for(HW, 128), 128, pointwise_kernel, (const T *)x, (const T *)y, ra, rb, C, HW, W, b, mult,
             out, ops, Cout);
    return launched(err, "pointwise conv");
}

ckey_status ck_cuda_pointwise_t(const void *x, const void *y, const float *ra, const float *rb, int C, int64_t HW,
                                const float *W, const float *b, float mult, float *out, int Cout, ck_dtype dt, void *st,
                                ckey_error *err) {
    return pointwise_launch(x, y, ra, rb, C, HW, W, b, mult, out, HW, Cout, dt, st, err);
}

ckey_status ck_cuda_pointwise_rows_t(const void *x, int C, int S, int y0, int n, const float *W, const float *b,
                                     float mult, float *out, int out_r0, int out_rows, int Cout, ck_dtype dt, void *st,
                                     ckey_error *err) {
    if (n <= 0) return CKEY_OK;
    return pointwise_launch(x, NULL, NULL, NULL, C, (int64_t)n * S, W, b, mult, out + (int64_t)(y0 - out_r0) * S,
                            (int64_t)out_rows * S, Cout, dt, st, err);
}

ckey_status ck_cuda_finalize(const float *logits, int S, float *out, void *st, ckey_error *err) {
    return ck_cuda_finalize_rows(logits, S, 0, S, out, st, err);
}

ckey_status ck_cuda_finalize_rows(const float *logits, int S, int y0, int n, float *out, void *st, ckey_error *err) {
    if (S <= 0 || n <= 0) return CKEY_OK;
    ck_launch(finalize_kernel, dim3(blocks_for(S, 256), (unsigned)n), 256, 0, (cudaStream_t)st, logits, S, y0, out);
    return launched(err, "finalize");
}

/* fp32 entry points (tests and fp32 sessions) */
ckey_status ck_cuda_refiner_input(const float *x, const float *logits, int S, float *rin, void *st, ckey_error *err) {
    return ck_cuda_refiner_input_t(x, logits, S, rin, CK_F32, st, err);
}
ckey_status ck_cuda_conv3x3(const float *in, int image_in, int Cin, int S, int dil, const float *W, const float *bias,
                            float *out, int Cout, int groups, double *stats, void *st, ckey_error *err) {
    return ck_cuda_conv3x3_t(in, image_in, Cin, S, dil, W, bias, out, Cout, groups, stats, CK_F32, st, err);
}
ckey_status ck_cuda_affine_relu(float *x, const float *y, int C, int64_t HW, const float *a, const float *b, void *st,
                                ckey_error *err) {
    return ck_cuda_affine_relu_t(x, y, C, HW, a, b, CK_F32, st, err);
}
ckey_status ck_cuda_pointwise(const float *x, int C, int64_t HW, const float *W, const float *b, float mult,
                              float *out, int Cout, void *st, ckey_error *err) {
    return ck_cuda_pointwise_t(x, NULL, NULL, NULL, C, HW, W, b, mult, out, Cout, CK_F32, st, err);
}

} // extern "C"
