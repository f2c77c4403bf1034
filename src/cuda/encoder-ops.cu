// The encoder's ops on CUDA cores, in every storage type (dtype.cuh), each
// checked against the CPU op by tests/test-cuda.c: the patch embedding
// (direct, or im2col + GEMM + epilogue in 16-bit sessions), the mask-unit
// blocks' window attention, bias + GELU, the stage transitions' max-pool +
// bias, and reroll (unrolled tokens to spatial features for the decoders).
// Layouts are the CPU backend's: tokens [N, C] in Hiera's unrolled order,
// features [H, W, C].
#include <cuda_runtime.h>
#include <limits.h>
#include <math.h>
#include <stdio.h>

#include "cuda/kernels.h"
#include "cuda/dtype.cuh"
#include "cuda/launch.cuh"
#include "cuda/ops-common.cuh"
#include "cuda/rowbias.cuh"

namespace {

// unrolled index of spatial token (y, x) with k pending 2x2 strides (timm Unroll)
__device__ __forceinline__ int64_t unroll_index(int y, int x, int H, int W, int k) {
    int64_t outer = 0;
    for (int i = 0; i < k; i++) outer = outer * 4 + (((y >> i) & 1) * 2 + ((x >> i) & 1));
    const int Hc = H >> k, Wc = W >> k;
    return outer * ((int64_t)Hc * Wc) + (int64_t)(y >> k) * Wc + (x >> k);
}

// patch embed: conv k x k / stride + bias + pos, written to the unrolled
// index, for output pixels p0 .. p0+n-1; pos holds pixels from pos_p0 on.
// x holds image rows x_r0 .. x_r0 + x_rows - 1 of each plane; the tokens are
// grid rows ty0 .. ty0 + th - 1 unrolled as a th x G image (0, G: the grid).
template <typename T>
__global__ void patch_embed_kernel(const T *__restrict__ x, int x_r0, int x_rows, int S, int Cin, int K, int stride,
                                   int pad, const float *__restrict__ w, const float *__restrict__ b,
                                   const float *__restrict__ pos, int64_t pos_p0, int E, int k, int ty0, int th,
                                   int64_t p0, int64_t n, T *__restrict__ tok) {
    ck_pdl_enter();
    const int G = S / stride;
    const int64_t i = (int64_t)blockIdx.x * blockDim.x + threadIdx.x;
    if (i >= n * E) return;
    const int e = (int)(i % E);
    const int64_t p = p0 + i / E;
    const int yo = (int)(p / G), xo = (int)(p % G);
    float acc = b[e] + pos[(p - pos_p0) * E + e];
    for (int ci = 0; ci < Cin; ci++)
        for (int ky = 0; ky < K; ky++) {
            const int iy = yo * stride - pad + ky;
            if (iy < 0 || iy >= S) continue;
            for (int kx = 0; kx < K; kx++) {
                const int ix = xo * stride - pad + kx;
                if (ix < 0 || ix >= S) continue;
                acc += w[((e * Cin + ci) * K + ky) * K + kx] * ck_ld(x + ((int64_t)ci * x_rows + iy - x_r0) * S + ix);
            }
        }
    ck_st(tok + unroll_index(yo - ty0, xo, th, G, k) * E + e, acc);
}

// Patch embed as a GEMM (16-bit sessions): im2col rows for output pixels
// p0 .. p0+n-1, [n, Cin*K*K] in W's (ci, ky, kx) order. A thread writes the
// K values of one (token, ci, ky), so the index arithmetic (32-bit; KC = K
// known at compile time: 7, Hiera's patch embedding, or 0: K at run time)
// is paid once for K values.
template <typename T, int KC>
__global__ void im2col_patch_kernel(const T *__restrict__ x, int x_r0, int x_rows, int S, int Cin, int Kr, int stride,
                                    int pad, int p0, int n, T *__restrict__ col) {
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
    const T *src = x + ((size_t)ci * x_rows + iy - x_r0) * S;
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
__global__ void im2col_patch_vec4_kernel(const T *__restrict__ x, int x_r0, int x_rows, int S, int Cin, int stride,
                                         int pad, int p0, int n, T *__restrict__ col) {
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
        const uint32_t v =
            iy >= 0 && iy < S && ix >= 0 && ix < S ? xb[((size_t)ci * x_rows + iy - x_r0) * S + ix] : 0u;
        w[j >> 1] |= v << (16 * (j & 1));
    }
    reinterpret_cast<uint2 *>(col)[i] = make_uint2(w[0], w[1]);
}

// ... then, after the GEMM y [n, E] = col . W^T: bias + pos, scattered to
// the unrolled token order.
template <typename T>
__global__ void patch_epilogue_kernel(const T *__restrict__ y, int G, int E, int k, int ty0, int th, int64_t p0,
                                      int64_t n, const float *__restrict__ b, const float *__restrict__ pos,
                                      int64_t pos_p0, T *__restrict__ tok) {
    ck_pdl_enter();
    const int64_t i = (int64_t)blockIdx.x * blockDim.x + threadIdx.x;
    if (i >= n * E) return;
    const int e = (int)(i % E);
    const int64_t p = p0 + i / E;
    ck_st(tok + unroll_index((int)(p / G) - ty0, (int)(p % G), th, G, k) * E + e,
          ck_ld(y + i) + b[e] + pos[(p - pos_p0) * E + e]);
}

// patch_epilogue_kernel with a thread for 8 consecutive channels of a token
// (E % 8 == 0, every pointer 16-byte aligned): 16-byte loads and stores, the
// token's unrolled position worked out once for 8 values. The same sums in
// the same order (y + b + pos, rounded once).
template <typename T>
__global__ void patch_epilogue_vec_kernel(const T *__restrict__ y, int G, int E, int k, int ty0, int th, int64_t p0,
                                          int64_t n, const float *__restrict__ b, const float *__restrict__ pos,
                                          int64_t pos_p0, T *__restrict__ tok) {
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
    ld8(pos + (p - pos_p0) * E + e, pp);
#pragma unroll
    for (int j = 0; j < 8; j++) v[j] = v[j] + bb[j] + pp[j];
    st8(tok + unroll_index(yo - ty0, xo, th, G, k) * E + e, v);
}

// The pos-embed resized bicubic (A = -0.75, align_corners=False, edges
// clamped) from a gs x gs grid to gd x gd, for raster pixels p0 .. p0+n-1:
// dst [n, C] fp32. ck_pos_embed_resize_rows's arithmetic, operation by
// operation, each rounded alone (no contraction), so its values to the bit.
__device__ __forceinline__ float cubic1(float x, float A) {
    return __fadd_rn(__fmul_rn(__fmul_rn(__fsub_rn(__fmul_rn(__fadd_rn(A, 2.f), x), __fadd_rn(A, 3.f)), x), x), 1.f);
}
__device__ __forceinline__ float cubic2(float x, float A) {
    const float t = __fadd_rn(__fmul_rn(__fsub_rn(__fmul_rn(A, x), __fmul_rn(5.f, A)), x), __fmul_rn(8.f, A));
    return __fsub_rn(__fmul_rn(t, x), __fmul_rn(4.f, A));
}
__device__ __forceinline__ void cubic_coeffs(float t, float w[4]) {
    const float A = -0.75f;
    w[0] = cubic2(__fadd_rn(t, 1.f), A);
    w[1] = cubic1(t, A);
    w[2] = cubic1(__fsub_rn(1.f, t), A);
    w[3] = cubic2(__fsub_rn(2.f, t), A);
}

__global__ void pos_embed_rows_kernel(const float *__restrict__ src, int gs, int C, int gd, int64_t p0, int64_t n,
                                      float *__restrict__ dst) {
    ck_pdl_enter();
    const int64_t i = (int64_t)blockIdx.x * blockDim.x + threadIdx.x;
    if (i >= n * C) return;
    const int ch = (int)(i % C);
    const int64_t p = p0 + i / C;
    const int y = (int)(p / gd), x = (int)(p % gd);
    const float scale = __fdiv_rn((float)gs, (float)gd);
    const float sy = __fsub_rn(__fmul_rn(scale, __fadd_rn((float)y, 0.5f)), 0.5f);
    const float sx = __fsub_rn(__fmul_rn(scale, __fadd_rn((float)x, 0.5f)), 0.5f);
    const int iy = (int)floorf(sy), ix = (int)floorf(sx);
    float wy[4], wx[4];
    cubic_coeffs(__fsub_rn(sy, (float)iy), wy);
    cubic_coeffs(__fsub_rn(sx, (float)ix), wx);
    float acc = 0.f;
#pragma unroll
    for (int a = 0; a < 4; a++) {
        const int yy = min(max(iy - 1 + a, 0), gs - 1);
        float row = 0.f;
#pragma unroll
        for (int b = 0; b < 4; b++) {
            const int xx = min(max(ix - 1 + b, 0), gs - 1);
            row = __fadd_rn(row, __fmul_rn(wx[b], src[((int64_t)yy * gs + xx) * C + ch]));
        }
        acc = __fadd_rn(acc, __fmul_rn(wy[a], row));
    }
    dst[i] = acc;
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

// Rows y0 .. y0+rows-1 of the feature map into feat [rows, W, C].
template <typename T>
__global__ void reroll_kernel(const T *__restrict__ tok, int H, int W, int k, int C, int y0, int rows,
                              T *__restrict__ feat) {
    ck_pdl_enter();
    const int64_t i = (int64_t)blockIdx.x * blockDim.x + threadIdx.x;
    const int64_t total = (int64_t)rows * W * C;
    if (i >= total) return;
    const int c = (int)(i % C);
    const int64_t p = i / C;
    const int y = y0 + (int)(p / W), x = (int)(p % W);
    feat[i] = tok[unroll_index(y, x, H, W, k) * C + c];
}

// The same, 16 bytes a thread (C a multiple of the vector, 16-byte aligned
// buffers), a row of feat a grid row: 32-bit index arithmetic (a frame's four
// at S = 2048, fp16, H200: 59 us against the kernel above's 300).
template <typename T>
__global__ void reroll_vec_kernel(const T *__restrict__ tok, int H, int W, int k, int C, int y0,
                                  T *__restrict__ feat) {
    ck_pdl_enter();
    constexpr int V = 16 / sizeof(T);
    const int cv = C / V, j = (int)(blockIdx.x * blockDim.x + threadIdx.x), r = (int)blockIdx.y;
    if (j >= W * cv) return;
    const int x = j / cv, c = j - x * cv;
    reinterpret_cast<uint4 *>(feat + ((int64_t)r * W + x) * C)[c] =
        reinterpret_cast<const uint4 *>(tok + unroll_index(y0 + r, x, H, W, k) * C)[c];
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

} // namespace

extern "C" {

ckey_status ck_cuda_patch_embed_t(const void *x, int S, int Cin, int K, int stride, int pad, const float *w,
                                  const float *b, const float *pos, int64_t pos_p0, int E, int k, int64_t p0,
                                  int64_t n, void *tok, ck_dtype dt, void *st, ckey_error *err) {
    const ck_patch_band whole = {0, S, 0, S / stride};
    return ck_cuda_patch_embed_band_t(x, &whole, S, Cin, K, stride, pad, w, b, pos, pos_p0, E, k, p0, n, tok, dt, st,
                                      err);
}

ckey_status ck_cuda_patch_embed_band_t(const void *x, const ck_patch_band *pb, int S, int Cin, int K, int stride,
                                       int pad, const float *w, const float *b, const float *pos, int64_t pos_p0, int E,
                                       int k, int64_t p0, int64_t n, void *tok, ck_dtype dt, void *st,
                                       ckey_error *err) {
    if (n <= 0) return CKEY_OK;
    LAUNCH_T(dt, blocks_for(n * E, 128), 128, patch_embed_kernel, (const T *)x, pb->x_r0, pb->x_rows, S, Cin, K, stride,
             pad, w, b, pos, pos_p0, E, k, pb->ty0, pb->th, p0, n, (T *)tok);
    return launched(err, "patch embed");
}

ckey_status ck_cuda_pos_embed_rows(const float *src, int gs, int C, int gd, int64_t p0, int64_t n, float *dst,
                                   void *st, ckey_error *err) {
    if (n <= 0) return CKEY_OK;
    ck_launch(pos_embed_rows_kernel, blocks_for(n * C, 256), 256, 0, (cudaStream_t)st, src, gs, C, gd, p0, n, dst);
    return launched(err, "pos-embed resize");
}

ckey_status ck_cuda_im2col_patch_t(const void *x, int S, int Cin, int K, int stride, int pad, int64_t p0, int64_t n,
                                   void *col, ck_dtype dt, void *st, ckey_error *err) {
    const ck_patch_band whole = {0, S, 0, S / stride};
    return ck_cuda_im2col_patch_band_t(x, &whole, S, Cin, K, stride, pad, p0, n, col, dt, st, err);
}

ckey_status ck_cuda_im2col_patch_band_t(const void *x, const ck_patch_band *pb, int S, int Cin, int K, int stride,
                                        int pad, int64_t p0, int64_t n, void *col, ck_dtype dt, void *st,
                                        ckey_error *err) {
    if (n <= 0) return CKEY_OK;
    const int xr0 = pb->x_r0, xrows = pb->x_rows;
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
        CK_DISPATCH(dt, (ck_launch(im2col_patch_vec4_kernel<T, 7>, vblocks, 256, 0, (cudaStream_t)cs, (const T *)x, xr0,
                                   xrows, S, Cin, stride, pad, (int)p0, (int)n, (T *)col)));
        return launched(err, "patch embed im2col");
    }
    const unsigned blocks = (unsigned)blocks_for(threads, 256);
    if (K == 7)
        CK_DISPATCH(dt, (ck_launch(im2col_patch_kernel<T, 7>, blocks, 256, 0, (cudaStream_t)cs, (const T *)x, xr0, xrows,
                                   S, Cin, K, stride, pad, (int)p0, (int)n, (T *)col)));
    else
        CK_DISPATCH(dt, (ck_launch(im2col_patch_kernel<T, 0>, blocks, 256, 0, (cudaStream_t)cs, (const T *)x, xr0, xrows,
                                   S, Cin, K, stride, pad, (int)p0, (int)n, (T *)col)));
    return launched(err, "patch embed im2col");
}

ckey_status ck_cuda_patch_epilogue_t(const void *y, int G, int E, int k, int64_t p0, int64_t n, const float *b,
                                     const float *pos, int64_t pos_p0, void *tok, ck_dtype dt, void *st,
                                     ckey_error *err) {
    const ck_patch_band whole = {0, 0, 0, G}; /* (x_r0, x_rows: the epilogue reads no input) */
    return ck_cuda_patch_epilogue_band_t(y, &whole, G, E, k, p0, n, b, pos, pos_p0, tok, dt, st, err);
}

ckey_status ck_cuda_patch_epilogue_band_t(const void *y, const ck_patch_band *pb, int G, int E, int k, int64_t p0,
                                          int64_t n, const float *b, const float *pos, int64_t pos_p0, void *tok,
                                          ck_dtype dt, void *st, ckey_error *err) {
    const int ty0 = pb->ty0, th = pb->th;
    const uintptr_t al = (uintptr_t)y | (uintptr_t)b | (uintptr_t)pos | (uintptr_t)tok;
    if (E % 8 == 0 && al % 16 == 0)
        LAUNCH_T(dt, blocks_for(n * (E / 8), 256), 256, patch_epilogue_vec_kernel, (const T *)y, G, E, k, ty0, th, p0,
                 n, b, pos, pos_p0, (T *)tok);
    else
        LAUNCH_T(dt, blocks_for(n * E, 256), 256, patch_epilogue_kernel, (const T *)y, G, E, k, ty0, th, p0, n, b, pos,
                 pos_p0, (T *)tok);
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

ckey_status ck_cuda_reroll_rows_t(const void *tok, int H, int W, int k, int C, int y0, int rows, void *feat,
                                  ck_dtype dt, void *st, ckey_error *err) {
    const int64_t n = (int64_t)rows * W * C;
    const int V = 16 / (int)ck_dtype_size(dt);
    if (rows <= 0) return CKEY_OK;
    if (C % V == 0 && (int64_t)W * (C / V) <= INT_MAX && rows <= 65535 &&
        (((uintptr_t)tok | (uintptr_t)feat) & 15) == 0) {
        const dim3 grid(blocks_for((int64_t)W * (C / V), 256), (unsigned)rows);
        LAUNCH_T(dt, grid, 256, reroll_vec_kernel, (const T *)tok, H, W, k, C, y0, (T *)feat);
        return launched(err, "reroll");
    }
    LAUNCH_T(dt, blocks_for(n, 256), 256, reroll_kernel, (const T *)tok, H, W, k, C, y0, rows, (T *)feat);
    return launched(err, "reroll");
}

ckey_status ck_cuda_reroll_t(const void *tok, int H, int W, int k, int C, void *feat, ck_dtype dt, void *st,
                             ckey_error *err) {
    return ck_cuda_reroll_rows_t(tok, H, W, k, C, 0, H, feat, dt, st, err);
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

/* fp32 entry points (tests and fp32 sessions) */
ckey_status ck_cuda_patch_embed(const float *x, int S, int Cin, int K, int stride, int pad, const float *w,
                                const float *b, const float *pos, int E, int k, float *tok, void *st,
                                ckey_error *err) {
    const int64_t G = S / stride;
    return ck_cuda_patch_embed_t(x, S, Cin, K, stride, pad, w, b, pos, 0, E, k, 0, G * G, tok, CK_F32, st, err);
}
ckey_status ck_cuda_window_attention(const float *qkv, int64_t nw, int T, int qs, int Do, int heads, float *out,
                                     void *st, ckey_error *err) {
    return ck_cuda_window_attention_t(qkv, nw, T, qs, Do, heads, out, CK_F32, st, err);
}
ckey_status ck_cuda_bias_gelu(float *h, int64_t rows, int C, const float *b, void *st, ckey_error *err) {
    return ck_cuda_bias_gelu_t(h, rows, C, b, CK_F32, st, err);
}
float ck_cuda_gelu_fast_host(float v) { return ck_gelu_fast(v); }
ckey_status ck_cuda_reroll(const float *tok, int H, int W, int k, int C, float *feat, void *st, ckey_error *err) {
    return ck_cuda_reroll_t(tok, H, W, k, C, feat, CK_F32, st, err);
}
ckey_status ck_cuda_maxpool_bias(const float *x, int64_t Nq, int C, int qs, const float *b, float *y, void *st,
                                 ckey_error *err) {
    return ck_cuda_maxpool_bias_t(x, Nq, C, qs, b, y, CK_F32, st, err);
}

} // extern "C"
