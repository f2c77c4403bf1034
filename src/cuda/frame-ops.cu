// The frame path's pixel kernels: the resize passes of src/pixel/resize.c
// (the same weight tables, the same summation order, so a GPU resize equals
// the CPU's within float rounding), plate conversion from 8 / 16-bit or half
// interleaved pixels to float planes, the sRGB curves, the network input's
// normalization and the passes' conversion to the samples their files store.
// One thread per output value; every kernel begins with ck_pdl_enter
// (launch.cuh).
#include <cuda_fp16.h>

#include "core/quantize.h"
#include "cuda/ops-common.cuh"

namespace {

// AA rows: out[row][x] = sum_j in[row][xmin + j] * w[j], j from 0 (run_horizontal)
__global__ void resize_h_kernel(const float *__restrict__ table, int taps, int in_w, int out_w, int64_t rows,
                                const float *__restrict__ src, float *__restrict__ dst) {
    ck_pdl_enter();
    const int64_t i = (int64_t)blockIdx.x * blockDim.x + threadIdx.x;
    if (i >= rows * out_w) return;
    const int64_t row = i / out_w;
    const int x = (int)(i % out_w);
    const float *e = table + (size_t)x * (2 + taps), *w = e + 2;
    const float *t = src + row * in_w + (int64_t)e[0];
    const int n = (int)e[1];
    float acc = n > 0 ? t[0] * w[0] : 0.0f;
    for (int j = 1; j < n; j++) acc += t[j] * w[j];
    dst[i] = acc;
}

// AA columns: out[c][y][x] = w0 * in[c][ymin][x] + sum_j w[j] * in[c][ymin + j][x] (run_vertical)
__global__ void resize_v_kernel(const float *__restrict__ table, int taps, int in_h, int out_h, int w, int channels,
                                const float *__restrict__ src, float *__restrict__ dst) {
    ck_pdl_enter();
    const int64_t i = (int64_t)blockIdx.x * blockDim.x + threadIdx.x;
    const int64_t total = (int64_t)channels * out_h * w;
    if (i >= total) return;
    const int x = (int)(i % w);
    const int64_t row = i / w;
    const int64_t c = row / out_h, y = row % out_h;
    const float *e = table + (size_t)y * (2 + taps), *wt = e + 2;
    const int n = (int)e[1];
    if (n <= 0) {
        dst[i] = 0.0f;
        return;
    }
    const float *s0 = src + (c * in_h + (int64_t)e[0]) * w + x;
    float d = s0[0] * wt[0];
    for (int j = 1; j < n; j++) d += s0[(int64_t)j * w] * wt[j];
    dst[i] = d;
}

// F.interpolate bilinear (run_bilinear)
__global__ void resize_bilinear_kernel(const float *__restrict__ tw, const float *__restrict__ th, int in_h, int in_w,
                                       int out_h, int out_w, int channels, const float *__restrict__ src,
                                       float *__restrict__ dst) {
    ck_pdl_enter();
    const int64_t i = (int64_t)blockIdx.x * blockDim.x + threadIdx.x;
    if (i >= (int64_t)channels * out_h * out_w) return;
    const int x = (int)(i % out_w);
    const int64_t row = i / out_w, c = row / out_h, y = row % out_h;
    const float *plane = src + c * in_h * in_w;
    const float *eh = th + (size_t)y * 4, *ew = tw + (size_t)x * 4;
    const float *r0 = plane + (int64_t)eh[0] * in_w, *r1 = plane + (int64_t)eh[1] * in_w;
    const int64_t x0 = (int64_t)ew[0], x1 = (int64_t)ew[1];
    const float t0 = r0[x0] * ew[2] + r0[x1] * ew[3];
    const float t1 = r1[x0] * ew[2] + r1[x1] * ew[3];
    dst[i] = t0 * eh[2] + t1 * eh[3];
}

// Lanczos-4 rows, taps clamped to the edge, summed from the first (run_lanczos_h)
__global__ void lanczos_h_kernel(const float *__restrict__ table, int in_w, int out_w, int64_t rows,
                                 const float *__restrict__ src, float *__restrict__ dst) {
    ck_pdl_enter();
    const int64_t i = (int64_t)blockIdx.x * blockDim.x + threadIdx.x;
    if (i >= rows * out_w) return;
    const int64_t row = i / out_w;
    const int x = (int)(i % out_w);
    const float *e = table + (size_t)x * 10, *w = e + 2;
    const float *s = src + row * in_w;
    const int x0 = (int)e[0];
    float acc;
    if (x0 >= 0 && x0 + 7 < in_w) {
        acc = s[x0] * w[0];
        for (int j = 1; j < 8; j++) acc += s[x0 + j] * w[j];
    } else {
        acc = 0.0f;
        for (int j = 0; j < 8; j++) {
            int xi = x0 + j;
            xi = xi < 0 ? 0 : xi >= in_w ? in_w - 1 : xi;
            acc += s[xi] * w[j];
        }
    }
    dst[i] = acc;
}

// Lanczos-4 columns, summed from the last tap back to the first (run_lanczos_v)
__global__ void lanczos_v_kernel(const float *__restrict__ table, int in_h, int out_h, int w, int channels,
                                 const float *__restrict__ src, float *__restrict__ dst) {
    ck_pdl_enter();
    const int64_t i = (int64_t)blockIdx.x * blockDim.x + threadIdx.x;
    if (i >= (int64_t)channels * out_h * w) return;
    const int x = (int)(i % w);
    const int64_t row = i / w, c = row / out_h, y = row % out_h;
    const float *e = table + (size_t)y * 10, *wt = e + 2;
    const int y0 = (int)e[0];
    const float *plane = src + c * in_h * w + x;
    int y7 = y0 + 7;
    y7 = y7 < 0 ? 0 : y7 >= in_h ? in_h - 1 : y7;
    float d = plane[(int64_t)y7 * w] * wt[7];
    for (int k = 6; k >= 0; k--) {
        int yi = y0 + k;
        yi = yi < 0 ? 0 : yi >= in_h ? in_h - 1 : yi;
        d = plane[(int64_t)yi * w] * wt[k] + d;
    }
    dst[i] = d;
}

// interleaved pixels [h, w, C] of an integer or half type -> float planes [C', h, w] for
// the first C' = min(C, 3) channels (divided by 255, 65535 or 1: the decoders'
// v / 255.0f, correctly rounded, so the same floats), and, when `hint` is given,
// channel `hint_ch` of each pixel into hint [h, w]
template <typename P>
__global__ void unpack_kernel(const P *__restrict__ in, int C, int64_t n, float div, float *__restrict__ rgb,
                              int rgb_ch, float *__restrict__ hint, int hint_ch) {
    ck_pdl_enter();
    const int64_t p = (int64_t)blockIdx.x * blockDim.x + threadIdx.x;
    if (p >= n) return;
    const P *px = in + p * C;
    for (int c = 0; c < rgb_ch; c++) rgb[c * n + p] = __fdiv_rn((float)px[c], div);
    if (hint) hint[p] = __fdiv_rn((float)px[hint_ch], div);
}
template <>
__global__ void unpack_kernel<__half>(const __half *__restrict__ in, int C, int64_t n, float div,
                                     float *__restrict__ rgb, int rgb_ch, float *__restrict__ hint, int hint_ch) {
    ck_pdl_enter();
    const int64_t p = (int64_t)blockIdx.x * blockDim.x + threadIdx.x;
    if (p >= n) return;
    const __half *px = in + p * C;
    for (int c = 0; c < rgb_ch; c++) rgb[c * n + p] = __half2float(px[c]);
    if (hint) hint[p] = __half2float(px[hint_ch]);
}

// upstream color_utils, float32 as PyTorch computes it (src/pixel/color.c)
__device__ __forceinline__ float linear_to_srgb(float x) {
    x = x < 0.0f ? 0.0f : x;
    return x <= 0.0031308f ? x * 12.92f : 1.055f * powf(x, 1.0f / 2.4f) - 0.055f;
}
__device__ __forceinline__ float srgb_to_linear(float x) {
    x = x < 0.0f ? 0.0f : x;
    return x <= 0.04045f ? x / 12.92f : powf((x + 0.055f) / 1.055f, 2.4f);
}

__global__ void srgb_kernel(float *__restrict__ x, int64_t n, int to_linear) {
    ck_pdl_enter();
    const int64_t i = (int64_t)blockIdx.x * blockDim.x + threadIdx.x;
    if (i >= n) return;
    x[i] = to_linear ? srgb_to_linear(x[i]) : linear_to_srgb(x[i]);
}

// the stored passes: HALF as the EXR writer rounds, 8 bits as the Comp PNG truncates (core/quantize.h)
__global__ void to_half_kernel(const float *__restrict__ in, uint16_t *__restrict__ out, int64_t n) {
    ck_pdl_enter();
    const int64_t i = (int64_t)blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) out[i] = ck_half_of_bits(__float_as_uint(in[i]));
}

__global__ void to_u8_trunc_kernel(const float *__restrict__ in, uint8_t *__restrict__ out, int64_t n) {
    ck_pdl_enter();
    const int64_t i = (int64_t)blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) out[i] = (uint8_t)ck_trunc_u8(in[i]);
}

// x [3, plane] -> (x - mean) / std per channel (a true division, as TF.normalize)
__global__ void normalize_kernel(float *__restrict__ x, int64_t plane, float m0, float m1, float m2, float s0,
                                 float s1, float s2) {
    ck_pdl_enter();
    const int64_t i = (int64_t)blockIdx.x * blockDim.x + threadIdx.x;
    if (i >= 3 * plane) return;
    const int c = (int)(i / plane);
    const float m = c == 0 ? m0 : c == 1 ? m1 : m2, s = c == 0 ? s0 : c == 1 ? s1 : s2;
    x[i] = (x[i] - m) / s;
}

} // namespace

extern "C" {

ckey_status ck_cuda_resize_pass(int kind, int channels, int in_h, int in_w, int out_h, int out_w, int taps,
                                const float *table_w, const float *table_h, const float *src, float *dst, void *st,
                                ckey_error *err) {
    const int T = 256;
    switch (kind) {
    case CK_CUDA_RESIZE_COPY:
        if (cudaMemcpyAsync(dst, src, (size_t)channels * in_h * in_w * sizeof(float), cudaMemcpyDeviceToDevice,
                            (cudaStream_t)st) != cudaSuccess)
            return launched(err, "resize copy");
        return CKEY_OK;
    case CK_CUDA_RESIZE_H: {
        const int64_t rows = (int64_t)channels * in_h;
        ck_launch(resize_h_kernel, blocks_for(rows * out_w, T), T, 0, (cudaStream_t)st, table_w, taps, in_w, out_w,
                  rows, src, dst);
        return launched(err, "resize rows");
    }
    case CK_CUDA_RESIZE_V:
        ck_launch(resize_v_kernel, blocks_for((int64_t)channels * out_h * out_w, T), T, 0, (cudaStream_t)st, table_h,
                  taps, in_h, out_h, out_w, channels, src, dst);
        return launched(err, "resize columns");
    case CK_CUDA_RESIZE_BILINEAR:
        ck_launch(resize_bilinear_kernel, blocks_for((int64_t)channels * out_h * out_w, T), T, 0, (cudaStream_t)st,
                  table_w, table_h, in_h, in_w, out_h, out_w, channels, src, dst);
        return launched(err, "resize bilinear");
    case CK_CUDA_RESIZE_L4_H: {
        const int64_t rows = (int64_t)channels * in_h;
        ck_launch(lanczos_h_kernel, blocks_for(rows * out_w, T), T, 0, (cudaStream_t)st, table_w, in_w, out_w, rows,
                  src, dst);
        return launched(err, "lanczos rows");
    }
    case CK_CUDA_RESIZE_L4_V:
        ck_launch(lanczos_v_kernel, blocks_for((int64_t)channels * out_h * out_w, T), T, 0, (cudaStream_t)st, table_h,
                  in_h, out_h, out_w, channels, src, dst);
        return launched(err, "lanczos columns");
    }
    if (err) {
        snprintf(err->message, sizeof err->message, "resize: unknown pass kind %d", kind);
        err->status = CKEY_ERR_INVALID_ARG;
    }
    return CKEY_ERR_INVALID_ARG;
}

ckey_status ck_cuda_unpack_pixels(const void *in, ck_pixel_type type, int C, int64_t n, float *rgb, int rgb_ch,
                                  float *hint, int hint_ch, void *st, ckey_error *err) {
    const int T = 256;
    const unsigned g = blocks_for(n, T);
    switch (type) {
    case CK_PIXEL_U8:
        ck_launch(unpack_kernel<uint8_t>, g, T, 0, (cudaStream_t)st, (const uint8_t *)in, C, n, 255.0f, rgb,
                  rgb_ch, hint, hint_ch);
        break;
    case CK_PIXEL_U16:
        ck_launch(unpack_kernel<uint16_t>, g, T, 0, (cudaStream_t)st, (const uint16_t *)in, C, n, 65535.0f,
                  rgb, rgb_ch, hint, hint_ch);
        break;
    case CK_PIXEL_F16:
        ck_launch(unpack_kernel<__half>, g, T, 0, (cudaStream_t)st, (const __half *)in, C, n, 1.0f, rgb, rgb_ch,
                  hint, hint_ch);
        break;
    default:
        if (err) {
            snprintf(err->message, sizeof err->message, "unpack: unknown pixel type %d", (int)type);
            err->status = CKEY_ERR_INVALID_ARG;
        }
        return CKEY_ERR_INVALID_ARG;
    }
    return launched(err, "unpack pixels");
}

ckey_status ck_cuda_srgb(float *x, int64_t n, int to_linear, void *st, ckey_error *err) {
    ck_launch(srgb_kernel, blocks_for(n, 256), 256, 0, (cudaStream_t)st, x, n, to_linear);
    return launched(err, "srgb");
}

ckey_status ck_cuda_to_half(const float *in, uint16_t *out, int64_t n, void *st, ckey_error *err) {
    if (n <= 0) return CKEY_OK;
    ck_launch(to_half_kernel, blocks_for(n, 256), 256, 0, (cudaStream_t)st, in, out, n);
    return launched(err, "to half");
}

ckey_status ck_cuda_to_u8_trunc(const float *in, uint8_t *out, int64_t n, void *st, ckey_error *err) {
    if (n <= 0) return CKEY_OK;
    ck_launch(to_u8_trunc_kernel, blocks_for(n, 256), 256, 0, (cudaStream_t)st, in, out, n);
    return launched(err, "to 8 bits");
}

ckey_status ck_cuda_imagenet_normalize(float *x, int64_t plane, const float mean[3], const float std[3], void *st,
                                       ckey_error *err) {
    ck_launch(normalize_kernel, blocks_for(3 * plane, 256), 256, 0, (cudaStream_t)st, x, plane, mean[0], mean[1],
              mean[2], std[0], std[1], std[2]);
    return launched(err, "normalize");
}

} // extern "C"

// ---- post-processing (src/pixel/post.c's clean matte and ck_post_frame)
namespace {

__global__ void threshold_kernel(const float *__restrict__ alpha, int64_t n, float t, uint8_t *__restrict__ mask) {
    ck_pdl_enter();
    const int64_t i = (int64_t)blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) mask[i] = alpha[i] > t ? 255 : 0;
}

// per row: horizontal distance to the nearest set pixel (far when none); a thread per row
__global__ void row_dist_kernel(const uint8_t *__restrict__ src, int h, int w, int far, int32_t *__restrict__ dist) {
    ck_pdl_enter();
    const int y = (int)(blockIdx.x * blockDim.x + threadIdx.x);
    if (y >= h) return;
    const uint8_t *s = src + (int64_t)y * w;
    int32_t *d = dist + (int64_t)y * w;
    int last = -1;
    for (int x = 0; x < w; x++) {
        if (s[x]) last = x;
        d[x] = last >= 0 ? x - last : far;
    }
    last = -1;
    for (int x = w - 1; x >= 0; x--) {
        if (s[x]) last = x;
        if (last >= 0 && last - x < d[x]) d[x] = last - x;
    }
}

struct Widths {
    int32_t dx[2 * 64 + 1];
};

// out(y, x) = 255 iff some kernel row dy has dist(y + dy, x) <= dx[dy]
__global__ void dilate_kernel(const int32_t *__restrict__ dist, int h, int w, int r, Widths wd,
                              uint8_t *__restrict__ dst) {
    ck_pdl_enter();
    const int64_t i = (int64_t)blockIdx.x * blockDim.x + threadIdx.x;
    if (i >= (int64_t)h * w) return;
    const int y = (int)(i / w), x = (int)(i % w);
    uint8_t o = 0;
    for (int dy = -r; dy <= r && !o; dy++) {
        const int yy = y + dy;
        if (yy < 0 || yy >= h) continue;
        if (dist[(int64_t)yy * w + x] <= wd.dx[dy + r]) o = 255;
    }
    dst[i] = o;
}

struct Taps {
    uint32_t k[64];
};

__device__ __forceinline__ int reflect101(int p, int len) {
    if (len == 1) return 0;
    while (p < 0 || p >= len) p = p < 0 ? -p : 2 * (len - 1) - p;
    return p;
}

// Q8 row sums, exact
__global__ void blur_rows_kernel(const uint8_t *__restrict__ src, int h, int w, int n, Taps k,
                                 uint32_t *__restrict__ tmp) {
    ck_pdl_enter();
    const int64_t i = (int64_t)blockIdx.x * blockDim.x + threadIdx.x;
    if (i >= (int64_t)h * w) return;
    const int y = (int)(i / w), x = (int)(i % w), r = n / 2;
    const uint8_t *s = src + (int64_t)y * w;
    uint32_t acc = 0;
    for (int j = 0; j < n; j++) acc += k.k[j] * s[reflect101(x - r + j, w)];
    tmp[i] = acc;
}

// Q16 column sums, rounded half up once, saturated; then out = alpha * (mask / 255)
__global__ void blur_cols_apply_kernel(const uint32_t *__restrict__ tmp, int h, int w, int n, Taps k,
                                       const float *__restrict__ alpha, float *__restrict__ out) {
    ck_pdl_enter();
    const int64_t i = (int64_t)blockIdx.x * blockDim.x + threadIdx.x;
    if (i >= (int64_t)h * w) return;
    const int y = (int)(i / w), x = (int)(i % w), r = n / 2;
    uint64_t acc = 0;
    for (int j = 0; j < n; j++) acc += (uint64_t)k.k[j] * tmp[(int64_t)reflect101(y - r + j, h) * w + x];
    const uint64_t v = (acc + 32768u) >> 16;
    const uint8_t m = (uint8_t)(v > 255 ? 255 : v);
    out[i] = alpha[i] * ((float)m / 255.0f);
}

__global__ void mask_apply_kernel(const uint8_t *__restrict__ mask, const float *__restrict__ alpha, int64_t n,
                                  float *__restrict__ out) {
    ck_pdl_enter();
    const int64_t i = (int64_t)blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) out[i] = alpha[i] * ((float)mask[i] / 255.0f);
}

__device__ __forceinline__ float max0_nan(float d) { return (d > 0.0f || d != d) ? d : 0.0f; }

// despill (sRGB), to linear, premultiply by the processed alpha, comp over the checkerboard
__global__ void post_pixels_kernel(const float *__restrict__ fg, const float *__restrict__ pa, int h, int w,
                                   int despill, float keep, float s, int partial, float bg0, float bg1, int checker,
                                   float *__restrict__ processed, float *__restrict__ comp) {
    ck_pdl_enter();
    const int64_t n = (int64_t)h * w;
    const int64_t i = (int64_t)blockIdx.x * blockDim.x + threadIdx.x;
    if (i >= n) return;
    const int y = (int)(i / w), x = (int)(i % w);
    float c[3] = {fg[i], fg[n + i], fg[2 * n + i]};
    if (despill) {
        const float r0 = c[0], g0 = c[1], b0 = c[2];
        const float limit = (r0 + b0) / 2.0f;
        const float spill = max0_nan(g0 - limit);
        float rn = r0 + spill * 0.5f, gn = g0 - spill, bn = b0 + spill * 0.5f;
        if (partial) {
            rn = r0 * keep + rn * s;
            gn = g0 * keep + gn * s;
            bn = b0 * keep + bn * s;
        }
        c[0] = rn, c[1] = gn, c[2] = bn;
    }
    const float a = pa[i];
    const float bg = ((x / checker) + (y / checker)) & 1 ? bg1 : bg0;
    for (int ch = 0; ch < 3; ch++) {
        const float lin = srgb_to_linear(c[ch]);
        processed[ch * n + i] = lin * a;
        if (comp) comp[ch * n + i] = linear_to_srgb(lin * a + bg * (1.0f - a));
    }
}

} // namespace

extern "C" {

ckey_status ck_cuda_threshold_mask(const float *alpha, int64_t n, float t, uint8_t *mask, void *st, ckey_error *err) {
    ck_launch(threshold_kernel, blocks_for(n, 256), 256, 0, (cudaStream_t)st, alpha, n, t, mask);
    return launched(err, "threshold");
}

ckey_status ck_cuda_matte_finish(const uint8_t *mask, int h, int w, int radius, const int32_t *dx, int nx,
                                 const uint32_t *kx, int ny, const uint32_t *ky, const float *alpha, uint8_t *mask_tmp,
                                 int32_t *dist, uint32_t *sums, float *out, void *st, ckey_error *err) {
    const int64_t n = (int64_t)h * w;
    const unsigned g = blocks_for(n, 256);
    if (radius > 64 || nx > 64 || ny > 64) {
        if (err) {
            snprintf(err->message, sizeof err->message, "matte: dilation %d or blur %d x %d over 64", radius, nx, ny);
            err->status = CKEY_ERR_UNSUPPORTED;
        }
        return CKEY_ERR_UNSUPPORTED;
    }
    const uint8_t *m = mask;
    if (radius > 0) {
        ck_launch(row_dist_kernel, blocks_for(h, 64), 64, 0, (cudaStream_t)st, mask, h, w, w + radius + 1, dist);
        Widths wd;
        const int r = radius < h ? radius : h;
        for (int i = -r; i <= r; i++) wd.dx[i + r] = dx[i + radius];
        ck_launch(dilate_kernel, g, 256, 0, (cudaStream_t)st, (const int32_t *)dist, h, w, r, wd, mask_tmp);
        m = mask_tmp;
    }
    if (nx > 0 && ny > 0) {
        Taps a, b;
        for (int j = 0; j < nx; j++) a.k[j] = kx[j];
        for (int j = 0; j < ny; j++) b.k[j] = ky[j];
        ck_launch(blur_rows_kernel, g, 256, 0, (cudaStream_t)st, m, h, w, nx, a, sums);
        ck_launch(blur_cols_apply_kernel, g, 256, 0, (cudaStream_t)st, (const uint32_t *)sums, h, w, ny, b, alpha, out);
    } else {
        ck_launch(mask_apply_kernel, g, 256, 0, (cudaStream_t)st, m, alpha, n, out);
    }
    return launched(err, "matte");
}

ckey_status ck_cuda_post_pixels(const float *fg, const float *pa, int h, int w, double despill_strength, float bg0,
                                float bg1, int checker, float *processed, float *comp, void *st, ckey_error *err) {
    const int despill = despill_strength > 0.0, partial = despill_strength < 1.0;
    const float keep = (float)(1.0 - despill_strength), s = (float)despill_strength;
    ck_launch(post_pixels_kernel, blocks_for((int64_t)h * w, 256), 256, 0, (cudaStream_t)st, fg, pa, h, w, despill,
              keep, s, partial, bg0, bg1, checker, processed, comp);
    return launched(err, "post pixels");
}

} // extern "C"
