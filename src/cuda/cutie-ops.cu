// CUDA kernels of Cutie's ops (cutie-kernels.h; the ops are defined in
// backend/ops.h, the CPU versions in src/cpu/cutie-ops.c, whose arithmetic
// these follow: the same float formulas (the per-element ones shared with it:
// backend/cutie-math.h), sums over many pixels in double).
// Plain stream-ordered launches; fp32 throughout, but for im2col's fp16 form
// (a tracker at fp16: ck_cu_im2col_h).
#include <cuda_fp16.h>
#include <cuda_runtime.h>
#include <math.h>
#include <stdint.h>
#include <stdio.h>

#include "backend/cutie-math.h"
#include "cuda/cutie-kernels.h"

namespace {

/* MHA_WARPS: warps of an mha block; MHA_HD: the widest head; MHA_MIN_KEYS:
 * the fewest keys of a split; MHA_UNITS: the warps (items x splits) a split
 * launch aims at, a few per SM slot of an H200's 132 SMs. */
enum { THREADS = 256, MHA_WARPS = 4, MHA_HD = 256, MHA_MIN_KEYS = 128, MHA_UNITS = 16384 };
/* channel_attention's means in up to CA_RANGES row ranges of at least
 * CA_MIN_ROWS rows each (256 channels, one map: 8 x 64 blocks) */
enum { CA_RANGES = 64, CA_MIN_ROWS = 128 };

ckey_status launched(ckey_error *err, const char *what) {
    const cudaError_t e = cudaGetLastError();
    if (e == cudaSuccess) return CKEY_OK;
    if (err) {
        snprintf(err->message, sizeof err->message, "cuda %s: %s", what, cudaGetErrorString(e));
        err->status = CKEY_ERR_DEVICE;
    }
    return CKEY_ERR_DEVICE;
}

unsigned blocks_for(int64_t n) {
    int64_t b = (n + THREADS - 1) / THREADS;
    if (b > (int64_t)1 << 30) b = (int64_t)1 << 30;
    return (unsigned)(b < 1 ? 1 : b);
}

#define GRID_LOOP(i, n) for (int64_t i = blockIdx.x * (int64_t)blockDim.x + threadIdx.x; i < (n); i += (int64_t)gridDim.x * blockDim.x)
/* The same with an index of type I: the per-element kernels divide their
 * index into pixel and channel, and take I = int (division in 32 bits, a
 * fraction of the 64-bit sequence) when n <= 2^30 (LAUNCH_I), so that the
 * index plus the grid's stride stays in range. */
#define GRID_LOOP_I(I, i, n) \
    for (I i = (I)blockIdx.x * (I)blockDim.x + (I)threadIdx.x; i < (I)(n); i += (I)gridDim.x * (I)blockDim.x)

/* a value into the col matrix: fp32, or rounded to fp16 */
__device__ __forceinline__ void put1(float *col, int64_t i, float v) { col[i] = v; }
__device__ __forceinline__ void put1(__half *col, int64_t i, float v) { col[i] = __float2half_rn(v); }
__device__ __forceinline__ void put4(float *col, int i, float4 v) { ((float4 *)col)[i] = v; }
__device__ __forceinline__ void put4(__half *col, int i, float4 v) {
    __half2 *c2 = (__half2 *)col + 2 * (int64_t)i;
    c2[0] = __floats2half2_rn(v.x, v.y), c2[1] = __floats2half2_rn(v.z, v.w);
}

template <typename T>
__global__ void im2col_k(const float *in, int H, int W, int Cin, int in_ld, int k, int stride, int pad, int dil,
                         int relu_in, int Wo, int64_t p0, int64_t np, T *col) {
    const int64_t K = (int64_t)k * k * Cin;
    GRID_LOOP(i, np * K) {
        const int64_t p = p0 + i / K;
        const int r = (int)(i % K), t = r / Cin, ch = r % Cin, ky = t / k, kx = t % k;
        const int oy = (int)(p / Wo), ox = (int)(p % Wo);
        const int iy = oy * stride - pad + ky * dil, ix = ox * stride - pad + kx * dil;
        float v = 0;
        if (iy >= 0 && iy < H && ix >= 0 && ix < W) {
            v = in[((int64_t)iy * W + ix) * in_ld + ch];
            if (relu_in && !(v > 0)) v = 0;
        }
        put1(col, i, v);
    }
}

/* im2col_k four channels at a time (Cin and in_ld multiples of 4, `in`
 * 16-byte aligned): a quarter of the index arithmetic, in 32 bits (a chunk
 * holds fewer than 2^31 values, the map fewer than 2^31 pixels), and 16-byte
 * loads and stores. n4 = np * K / 4, K4 = K / 4, C4 = Cin / 4. */
template <typename T>
__global__ void im2col4_k(const float *__restrict__ in, int H, int W, int in_ld, int k, int stride, int pad, int dil,
                          int relu_in, int Wo, int p0, int n4, int K4, int C4, T *__restrict__ col) {
    for (int64_t j = blockIdx.x * (int64_t)blockDim.x + threadIdx.x; j < n4; j += (int64_t)gridDim.x * blockDim.x) {
        const int i = (int)j, pl = i / K4, r = i - pl * K4, t = r / C4, c4 = r - t * C4, ky = t / k, kx = t - ky * k;
        const int p = p0 + pl, oy = p / Wo, ox = p - oy * Wo;
        const int iy = oy * stride - pad + ky * dil, ix = ox * stride - pad + kx * dil;
        float4 v = make_float4(0.f, 0.f, 0.f, 0.f);
        if (iy >= 0 && iy < H && ix >= 0 && ix < W) {
            v = *(const float4 *)(in + ((int64_t)iy * W + ix) * in_ld + (int64_t)c4 * 4);
            if (relu_in) {
                v.x = v.x > 0 ? v.x : 0.f, v.y = v.y > 0 ? v.y : 0.f;
                v.z = v.z > 0 ? v.z : 0.f, v.w = v.w > 0 ? v.w : 0.f;
            }
        }
        put4(col, i, v);
    }
}

/* im2col_k a tap a thread (Cin or in_ld not multiples of 4: the stems, Cin
 * 3 or 5), its Cin channels in a loop: the index arithmetic in 32 bits and
 * once per tap, not per value (the chunk under 2^31 values, the map under
 * 2^31 pixels). nt = np * k * k. */
template <typename T>
__global__ void im2col_tap_k(const float *__restrict__ in, int H, int W, int Cin, int in_ld, int k, int stride,
                             int pad, int dil, int relu_in, int Wo, int p0, int nt, T *__restrict__ col) {
    const int kk = k * k;
    for (int64_t j = blockIdx.x * (int64_t)blockDim.x + threadIdx.x; j < nt; j += (int64_t)gridDim.x * blockDim.x) {
        const int i = (int)j, pl = i / kk, t = i - pl * kk, ky = t / k, kx = t - ky * k;
        const int p = p0 + pl, oy = p / Wo, ox = p - oy * Wo;
        const int iy = oy * stride - pad + ky * dil, ix = ox * stride - pad + kx * dil;
        T *c = col + (int64_t)i * Cin;
        if (iy >= 0 && iy < H && ix >= 0 && ix < W) {
            const float *src = in + ((int64_t)iy * W + ix) * in_ld;
            for (int ch = 0; ch < Cin; ch++) {
                float v = src[ch];
                if (relu_in && !(v > 0)) v = 0;
                put1(c, ch, v);
            }
        } else {
            for (int ch = 0; ch < Cin; ch++) put1(c, ch, 0.0f);
        }
    }
}

template <typename I>
__global__ void bias_relu_k(float *out, int64_t np, int C, int ld, const float *b, int relu) {
    GRID_LOOP_I(I, i, np * C) {
        const I r = i / C;
        const int j = (int)(i - r * C);
        float *o = out + (int64_t)r * ld + j;
        float v = *o;
        if (b) v += b[j];
        if (relu) v = v > 0 ? v : 0;
        *o = v;
    }
}

template <typename I>
__global__ void maxpool_k(const float *in, int n, int H, int W, int C, int Ho, int Wo, float *out) {
    GRID_LOOP_I(I, i, (int64_t)n * Ho * Wo * C) {
        const I pix = i / C, row = pix / Wo, img = row / Ho;
        const int ch = (int)(i - pix * C), ox = (int)(pix - row * Wo), oy = (int)(row - img * Ho);
        const float *src = in + (int64_t)img * H * W * C;
        float m = -INFINITY;
        for (int dy = 0; dy < 3; dy++) {
            const int iy = 2 * oy - 1 + dy;
            if (iy < 0 || iy >= H) continue;
            for (int dx = 0; dx < 3; dx++) {
                const int ix = 2 * ox - 1 + dx;
                if (ix < 0 || ix >= W) continue;
                const float s = src[((int64_t)iy * W + ix) * C + ch];
                m = s > m ? s : m;
            }
        }
        out[i] = m;
    }
}

template <typename I>
__global__ void resize_k(const float *in, int n, int H, int W, int C, const float *add, int Ho, int Wo, float *out) {
    GRID_LOOP_I(I, i, (int64_t)n * Ho * Wo * C) {
        const I pix = i / C, row = pix / Wo, img = row / Ho;
        const int ch = (int)(i - pix * C), ox = (int)(pix - row * Wo), oy = (int)(row - img * Ho);
        int y0, y1, x0, x1;
        float wy, wx;
        ck_bilinear_tap(oy, H, Ho, &y0, &y1, &wy);
        ck_bilinear_tap(ox, W, Wo, &x0, &x1, &wx);
        const float *s = in + (int64_t)img * H * W * C + ch;
        const float p00 = s[((int64_t)y0 * W + x0) * C], p01 = s[((int64_t)y0 * W + x1) * C];
        const float p10 = s[((int64_t)y1 * W + x0) * C], p11 = s[((int64_t)y1 * W + x1) * C];
        const float v = ck_bilinear(p00, p01, p10, p11, wx, wy);
        out[i] = add ? v + add[((int64_t)oy * Wo + ox) * C + ch] : v;
    }
}

template <typename I>
__global__ void avgpool_k(const float *in, int n, int H, int W, int C, int f, int Ho, int Wo, float *out, int out_ld) {
    const float inv = 1.0f / (float)(f * f);
    GRID_LOOP_I(I, i, (int64_t)n * Ho * Wo * C) {
        const I pix = i / C, row = pix / Wo, img = row / Ho;
        const int ch = (int)(i - pix * C), ox = (int)(pix - row * Wo), oy = (int)(row - img * Ho);
        const float *s = in + (int64_t)img * H * W * C + ch;
        float acc = 0;
        for (int dy = 0; dy < f; dy++)
            for (int dx = 0; dx < f; dx++) acc += s[((int64_t)(oy * f + dy) * W + ox * f + dx) * C];
        out[(int64_t)pix * out_ld + ch] = acc * inv;
    }
}

__device__ __forceinline__ double warp_sum_d(double v) {
    for (int o = 16; o > 0; o >>= 1) v += __shfl_xor_sync(0xffffffffu, v, o);
    return v;
}

// one warp per row; y may equal x (the row is read whole before it is written)
__global__ void layer_norm_k(const float *x, int64_t N, int C, const float *g, const float *b, float eps, float *y) {
    const int64_t r = blockIdx.x * (int64_t)(blockDim.x / 32) + threadIdx.x / 32;
    const int lane = threadIdx.x % 32;
    if (r >= N) return;
    const float *xr = x + r * C;
    double s = 0;
    for (int i = lane; i < C; i += 32) s += xr[i];
    const double mean = warp_sum_d(s) / C;
    double ss = 0;
    for (int i = lane; i < C; i += 32) ss += (xr[i] - mean) * (xr[i] - mean);
    ss = warp_sum_d(ss);
    const float m = (float)mean, rstd = (float)(1.0 / sqrt(ss / C + eps));
    float *yr = y + r * C;
    for (int i = lane; i < C; i += 32) yr[i] = (xr[i] - m) * rstd * g[i] + b[i];
}

__device__ __forceinline__ float warp_max(float v) {
    for (int o = 16; o > 0; o >>= 1) v = fmaxf(v, __shfl_xor_sync(0xffffffffu, v, o));
    return v;
}
__device__ __forceinline__ float warp_sum(float v) {
    for (int o = 16; o > 0; o >>= 1) v += __shfl_xor_sync(0xffffffffu, v, o);
    return v;
}

/* mha: one warp per (batch, head, query, key split), S splits of the keys
 * (a split of ceil(Nk / S) keys). The warp walks its keys 32 at a time, a
 * key a lane for the score (the query in shared memory), with the softmax
 * online: a running max m, sum l = sum exp(s - m) and acc = sum exp(s - m) V
 * (head dims lane, lane + 32, ...), rescaled by exp(m_old - m_new) when the
 * max grows. With S == 1 the warp writes out = acc / l; else its partial
 * [m, l, acc[hd]] goes to part[unit] and mha_merge_k combines an item's S
 * partials: out = sum_s exp(m_s - M) acc_s / sum_s exp(m_s - M) l_s, M =
 * max_s m_s. The merge is exact math, so any S gives the one-pass softmax
 * up to float rounding. A query whose keys are all blocked gets 0. */
struct mha_args {
    const float *q, *k, *v;
    const uint8_t *mask;
    float *out, *part;
    int64_t Nq, Nk, items;
    int q_ld, kv_ld, D, heads, S;
};

__global__ void __launch_bounds__(MHA_WARPS * 32) mha_k(mha_args a) {
    __shared__ float qs[MHA_WARPS][MHA_HD];
    const int lane = threadIdx.x & 31, w = threadIdx.x >> 5;
    const int64_t unit = blockIdx.x * (int64_t)MHA_WARPS + w;
    if (unit >= a.items * a.S) return; /* whole warps: only __syncwarp below */
    const int64_t item = unit / a.S, qi = item % a.Nq, bh = item / a.Nq;
    const int split = (int)(unit % a.S), hd = a.D / a.heads, h = (int)(bh % a.heads);
    const int64_t bi = bh / a.heads;
    const float scale = 1.0f / sqrtf((float)hd);
    const float *qv = a.q + (bi * a.Nq + qi) * a.q_ld + h * hd;
    const float *K = a.k + bi * a.Nk * a.kv_ld + h * hd, *V = a.v + bi * a.Nk * a.kv_ld + h * hd;
    const uint8_t *mk = a.mask ? a.mask + (bi * a.Nq + qi) * a.Nk : NULL;
    float *qw = qs[w];
    for (int c = lane; c < hd; c += 32) qw[c] = qv[c];
    __syncwarp();
    const int64_t per = (a.Nk + a.S - 1) / a.S, j0 = split * per, j1 = j0 + per < a.Nk ? j0 + per : a.Nk;
    const int vec = (hd & 3) == 0 && (a.kv_ld & 3) == 0 && ((uintptr_t)K & 15) == 0;
    float m = -INFINITY, l = 0.0f, acc[MHA_HD / 32];
#pragma unroll
    for (int i = 0; i < MHA_HD / 32; i++) acc[i] = 0.0f;
    for (int64_t jb = j0; jb < j1; jb += 32) {
        const int64_t j = jb + lane;
        float sc = -INFINITY;
        if (j < j1 && !(mk && mk[j])) {
            const float *kr = K + j * a.kv_ld;
            float d = 0.0f;
            if (vec) {
                for (int c = 0; c < hd; c += 4) {
                    const float4 kk = *(const float4 *)(kr + c);
                    d += qw[c] * kk.x, d += qw[c + 1] * kk.y, d += qw[c + 2] * kk.z, d += qw[c + 3] * kk.w;
                }
            } else {
                for (int c = 0; c < hd; c++) d += qw[c] * kr[c];
            }
            sc = d * scale;
        }
        const float cm = warp_max(sc);
        if (cm == -INFINITY) continue; /* every key of the chunk blocked (the same in every lane) */
        const float nm = fmaxf(m, cm), corr = expf(m - nm); /* exp(-inf) = 0 while nothing was seen */
        const float p = sc == -INFINITY ? 0.0f : expf(sc - nm);
        l = l * corr + warp_sum(p);
#pragma unroll
        for (int i = 0; i < MHA_HD / 32; i++) acc[i] *= corr;
        const int nj = j1 - jb < 32 ? (int)(j1 - jb) : 32;
        for (int t = 0; t < nj; t++) {
            const float pt = __shfl_sync(0xffffffffu, p, t);
            if (pt == 0.0f) continue;
            const float *vr = V + (jb + t) * a.kv_ld;
#pragma unroll
            for (int i = 0; i < MHA_HD / 32; i++)
                if (lane + 32 * i < hd) acc[i] += pt * vr[lane + 32 * i];
        }
        m = nm;
    }
    if (a.S == 1) {
        const float inv = l > 0.0f ? 1.0f / l : 0.0f;
        float *o = a.out + (bi * a.Nq + qi) * a.D + h * hd;
#pragma unroll
        for (int i = 0; i < MHA_HD / 32; i++)
            if (lane + 32 * i < hd) o[lane + 32 * i] = acc[i] * inv;
        return;
    }
    float *pr = a.part + unit * (hd + 2);
    if (lane == 0) pr[0] = m, pr[1] = l;
#pragma unroll
    for (int i = 0; i < MHA_HD / 32; i++)
        if (lane + 32 * i < hd) pr[2 + lane + 32 * i] = acc[i];
}

// one warp per item: its S partials of mha_k into out
__global__ void mha_merge_k(mha_args a) {
    const int lane = threadIdx.x & 31;
    const int64_t item = blockIdx.x * (int64_t)(blockDim.x / 32) + threadIdx.x / 32;
    if (item >= a.items) return;
    const int hd = a.D / a.heads, S = a.S, h = (int)(item / a.Nq % a.heads);
    const int64_t qi = item % a.Nq, bi = item / a.Nq / a.heads;
    const float *P = a.part + item * S * (int64_t)(hd + 2);
    float M = -INFINITY;
    for (int s = lane; s < S; s += 32) M = fmaxf(M, P[(int64_t)s * (hd + 2)]);
    M = warp_max(M);
    float L = 0.0f;
    if (M != -INFINITY)
        for (int s = lane; s < S; s += 32) {
            const float *ps = P + (int64_t)s * (hd + 2);
            L += ps[1] * expf(ps[0] - M);
        }
    L = warp_sum(L);
    const float inv = L > 0.0f ? 1.0f / L : 0.0f;
    float *o = a.out + (bi * a.Nq + qi) * a.D + h * hd;
    for (int d = lane; d < hd; d += 32) {
        float acc = 0.0f;
        if (M != -INFINITY)
            for (int s = 0; s < S; s++) {
                const float *ps = P + (int64_t)s * (hd + 2);
                acc += ps[2 + d] * expf(ps[0] - M);
            }
        o[d] = acc * inv;
    }
}

__global__ void unary_k(int kind, const float *x, int64_t n, float *y) {
    GRID_LOOP(i, n) y[i] = ck_unary_map(kind, x[i]);
}

template <typename I>
__global__ void add_k(const float *a, int64_t na, const float *b, int64_t nb, float *y) {
    const I m = (I)nb;
    GRID_LOOP_I(I, i, na) y[i] = a[i] + b[i % m];
}

template <typename I>
__global__ void copy_k(const float *src, int64_t n, int C, int src_ld, float *dst, int dst_ld) {
    GRID_LOOP_I(I, i, n * C) {
        const I p = i / C;
        const int c = (int)(i - p * C);
        dst[(int64_t)p * dst_ld + c] = src[(int64_t)p * src_ld + c];
    }
}

__global__ void pad_normalize_k(const float *src, int Hi, int Wi, int pad_t, int pad_l, int Hp, int Wp, float *dst) {
    GRID_LOOP(i, (int64_t)Hp * Wp * 3) {
        const int c = (int)(i % 3);
        const int64_t p = i / 3;
        dst[i] = ck_cutie_pad_normalize_at(src, Hi, Wi, pad_t, pad_l, (int)(p / Wp), (int)(p % Wp), c);
    }
}

// the in-order copy where no chunking keeps reads before writes: one thread
__global__ void copy_serial_k(const float *src, int64_t n, int C, int src_ld, float *dst, int dst_ld) {
    if (blockIdx.x || threadIdx.x) return;
    for (int64_t p = 0; p < n; p++)
        for (int c = 0; c < C; c++) dst[p * dst_ld + c] = src[p * src_ld + c];
}

__global__ void masks_others_k(const float *m, int O, int64_t HW, float *dst, int dst_ld) {
    GRID_LOOP(p, HW) ck_masks_with_others_pixel(m, O, HW, p, dst, dst_ld);
}

template <typename I>
__global__ void gru_k(float *h, const float *v, int64_t HW, int D) {
    GRID_LOOP_I(I, i, HW * D) {
        const I r = i / D;
        const int c = (int)(i - r * D);
        const float *vr = v + (int64_t)r * 3 * D;
        h[i] = ck_gru_cell(h[i], vr[c], vr[D + c], vr[2 * D + c]);
    }
}

// means [n, C]: block (32 channels x 8 rows) per (channel group, map), double sums
__global__ void channel_mean_k(const float *x, int64_t HW, int C, float *means) {
    __shared__ double acc[8][32];
    const int ch = blockIdx.x * 32 + threadIdx.x, b = blockIdx.y;
    double s = 0;
    if (ch < C)
        for (int64_t p = threadIdx.y; p < HW; p += 8) s += x[((int64_t)b * HW + p) * C + ch];
    acc[threadIdx.y][threadIdx.x] = s;
    __syncthreads();
    if (threadIdx.y == 0 && ch < C) {
        double t = 0;
        for (int i = 0; i < 8; i++) t += acc[i][threadIdx.x];
        means[(int64_t)b * C + ch] = (float)(t / (double)HW);
    }
}

// partial sums part [R, n, C] (double) over R row ranges of each map: block
// (32 channels x 8 rows) per (channel group, map, range), so that the few
// maps of a pass (n x C / 32 blocks) still fill the GPU
__global__ void channel_part_k(const float *x, int64_t HW, int C, int n, int R, double *part) {
    __shared__ double acc[8][32];
    const int ch = blockIdx.x * 32 + threadIdx.x, b = blockIdx.y, r = blockIdx.z;
    const int64_t per = (HW + R - 1) / R, p0 = r * per, p1 = p0 + per < HW ? p0 + per : HW;
    double s = 0;
    if (ch < C)
        for (int64_t p = p0 + threadIdx.y; p < p1; p += 8) s += x[((int64_t)b * HW + p) * C + ch];
    acc[threadIdx.y][threadIdx.x] = s;
    __syncthreads();
    if (threadIdx.y == 0 && ch < C) {
        double t = 0;
        for (int i = 0; i < 8; i++) t += acc[i][threadIdx.x];
        part[((int64_t)r * n + b) * C + ch] = t;
    }
}

// means [n, C] from channel_part_k's R partial sums, in range order
__global__ void channel_part_mean_k(const double *part, int n, int C, int R, int64_t HW, float *means) {
    GRID_LOOP(i, (int64_t)n * C) {
        double t = 0;
        for (int r = 0; r < R; r++) t += part[(int64_t)r * n * C + i];
        means[i] = (float)(t / (double)HW);
    }
}

template <typename I>
__global__ void channel_gate_k(const float *x, int n, int64_t HW, int C, const float *w, int k, const float *r,
                               float *out, const float *means) {
    const I hw = (I)HW;
    GRID_LOOP_I(I, i, (int64_t)n * HW * C) {
        const I pix = i / C, b = pix / hw;
        const int ch = (int)(i - pix * C);
        const float val = x[i] * ck_channel_gate(w, k, means + (int64_t)b * C, C, ch);
        out[i] = r ? val + r[i] : val;
    }
}

__global__ void aggregate_k(const float *logits, int O, int64_t HW, float *out) {
    GRID_LOOP(p, HW) ck_aggregate_pixel(logits, O, HW, p, out);
}

__global__ void softmax_planes_k(float *x, int C, int64_t HW) {
    GRID_LOOP(p, HW) ck_softmax_planes_pixel(x, C, HW, p);
}

__global__ void fg_count_k(const float *logits, int O, int64_t HW, int *counts) {
    GRID_LOOP(i, (int64_t)O * HW) {
        const int o = (int)(i / HW);
        if (ck_is_fg(logits, O, HW, o, i % HW)) atomicAdd(counts + o, 1);
    }
}

// mask [o, q, p]: q < Q/2 blocked off the foreground, the rest off the
// background; a half whose rows would be blocked everywhere is cleared
__global__ void attn_mask_k(const float *logits, int O, int64_t HW, int Q, uint8_t *mask, const int *counts) {
    GRID_LOOP(i, (int64_t)O * HW) {
        const int o = (int)(i / HW);
        const int64_t p = i % HW;
        const int fg = ck_is_fg(logits, O, HW, o, p), nfg = counts[o];
        const uint8_t vf = nfg == 0 ? 0 : (uint8_t)!fg, vb = nfg == HW ? 0 : (uint8_t)fg;
        uint8_t *mo = mask + (int64_t)o * Q * HW;
        for (int q = 0; q < Q / 2; q++) mo[q * HW + p] = vf, mo[(Q / 2 + q) * HW + p] = vb;
    }
}

// out [q, e]: block (32 e x 8 rows) per (q, e group), double sums over the pixels
__global__ void summary_pool_k(const float *m, const float *feat, const float *logits, int64_t HW, int E, int Q,
                               float *out) {
    __shared__ double acc[8][32];
    const int q = blockIdx.y, e = blockIdx.x * 32 + threadIdx.x;
    double s = 0;
    if (e <= E)
        for (int64_t p = threadIdx.y; p < HW; p += 8) {
            const float w = ck_summary_weight(logits[p * Q + q], q, Q, m[p]);
            s += e < E ? (double)w * feat[p * E + e] : (double)w;
        }
    acc[threadIdx.y][threadIdx.x] = s;
    __syncthreads();
    if (threadIdx.y == 0 && e <= E) {
        double t = 0;
        for (int i = 0; i < 8; i++) t += acc[i][threadIdx.x];
        out[(int64_t)q * (E + 1) + e] = (float)t;
    }
}

__global__ void summary_values_k(const float *in, int64_t n, int E, float *out) {
    GRID_LOOP(i, n * E) {
        const int64_t r = i / E;
        out[i] = in[r * (E + 1) + i % E] / (in[r * (E + 1) + E] + 1e-4f);
    }
}

__global__ void pos_encoding_k(int H, int W, int dim, float scale, float temperature, float *out) {
    const int d = (dim + 3) / 4 * 2, nf = d / 2;
    const float ey = (float)(H - 1) + 1e-6f, ex = (float)(W - 1) + 1e-6f;
    GRID_LOOP(t, (int64_t)H * W * nf) {
        const int i = (int)(t % nf);
        const int64_t pix = t / nf;
        const int x = (int)(pix % W), y = (int)(pix / W);
        float *o = out + pix * 2 * d;
        const float py = (float)y / ey * scale, px = (float)x / ex * scale;
        const float inv = 1.0f / powf(temperature, (float)(2 * i) / (float)d);
        o[2 * i] = sinf(px * inv), o[2 * i + 1] = cosf(px * inv);
        o[d + 2 * i] = sinf(py * inv), o[d + 2 * i + 1] = cosf(py * inv);
    }
}

#define LAUNCH(kern, n, st, ...)                                                    \
    do {                                                                            \
        if ((n) > 0) kern<<<blocks_for(n), THREADS, 0, (cudaStream_t)(st)>>>(__VA_ARGS__); \
    } while (0)
/* LAUNCH of a kernel templated on its index type (GRID_LOOP_I) */
#define LAUNCH_I(kern, n, st, ...)                                                  \
    do {                                                                            \
        if ((int64_t)(n) <= ((int64_t)1 << 30))                                     \
            LAUNCH(kern<int>, n, st, __VA_ARGS__);                                  \
        else                                                                        \
            LAUNCH(kern<int64_t>, n, st, __VA_ARGS__);                              \
    } while (0)

template <typename T>
ckey_status im2col_t(const float *in, int H, int W, int Cin, int in_ld, int k, int stride, int pad, int dil,
                     int relu_in, int Wo, int64_t p0, int64_t np, T *col, void *stream, ckey_error *err) {
    const int64_t K = (int64_t)k * k * Cin, n = np * K;
    if (Cin % 4 == 0 && in_ld % 4 == 0 && ((uintptr_t)in & 15) == 0 && ((uintptr_t)col & 15) == 0 && n < INT32_MAX &&
        p0 + np < INT32_MAX) {
        const int n4 = (int)(n / 4);
        LAUNCH(im2col4_k<T>, n4, stream, in, H, W, in_ld, k, stride, pad, dil, relu_in, Wo, (int)p0, n4, (int)(K / 4),
               Cin / 4, col);
    } else if (n < INT32_MAX && p0 + np < INT32_MAX) {
        const int nt = (int)(np * k * k);
        LAUNCH(im2col_tap_k<T>, nt, stream, in, H, W, Cin, in_ld, k, stride, pad, dil, relu_in, Wo, (int)p0, nt, col);
    } else {
        LAUNCH(im2col_k<T>, n, stream, in, H, W, Cin, in_ld, k, stride, pad, dil, relu_in, Wo, p0, np, col);
    }
    return launched(err, "im2col");
}
} // namespace

extern "C" {

ckey_status ck_cu_im2col(const float *in, int H, int W, int Cin, int in_ld, int k, int stride, int pad, int dil,
                         int relu_in, int Wo, int64_t p0, int64_t np, float *col, void *stream, ckey_error *err) {
    return im2col_t(in, H, W, Cin, in_ld, k, stride, pad, dil, relu_in, Wo, p0, np, col, stream, err);
}

ckey_status ck_cu_im2col_h(const float *in, int H, int W, int Cin, int in_ld, int k, int stride, int pad, int dil,
                           int relu_in, int Wo, int64_t p0, int64_t np, void *col, void *stream, ckey_error *err) {
    return im2col_t(in, H, W, Cin, in_ld, k, stride, pad, dil, relu_in, Wo, p0, np, (__half *)col, stream, err);
}

ckey_status ck_cu_bias_relu(float *out, int64_t np, int C, int ld, const float *b, int relu, void *stream,
                            ckey_error *err) {
    LAUNCH_I(bias_relu_k, np * C, stream, out, np, C, ld, b, relu);
    return launched(err, "conv epilogue");
}

ckey_status ck_cu_maxpool3x3s2(const float *in, int n, int H, int W, int C, float *out, void *stream, ckey_error *err) {
    const int Ho = (H - 1) / 2 + 1, Wo = (W - 1) / 2 + 1;
    LAUNCH_I(maxpool_k, (int64_t)n * Ho * Wo * C, stream, in, n, H, W, C, Ho, Wo, out);
    return launched(err, "maxpool3x3s2");
}

ckey_status ck_cu_resize_bilinear(const float *in, int n, int H, int W, int C, const float *add, int Ho, int Wo,
                                  float *out, void *stream, ckey_error *err) {
    LAUNCH_I(resize_k, (int64_t)n * Ho * Wo * C, stream, in, n, H, W, C, add, Ho, Wo, out);
    return launched(err, "resize_bilinear");
}

ckey_status ck_cu_avgpool(const float *in, int n, int H, int W, int C, int f, float *out, int out_ld, void *stream,
                          ckey_error *err) {
    const int Ho = H / f, Wo = W / f;
    LAUNCH_I(avgpool_k, (int64_t)n * Ho * Wo * C, stream, in, n, H, W, C, f, Ho, Wo, out, out_ld ? out_ld : C);
    return launched(err, "avgpool");
}

ckey_status ck_cu_layer_norm(const float *x, int64_t N, int C, const float *g, const float *b, float eps, float *y,
                             void *stream, ckey_error *err) {
    if (N > 0) layer_norm_k<<<(unsigned)((N + 7) / 8), 256, 0, (cudaStream_t)stream>>>(x, N, C, g, b, eps, y);
    return launched(err, "layer_norm");
}

ckey_status ck_cu_mha(int n, const float *q, int64_t Nq, int q_ld, const float *k, const float *v, int64_t Nk,
                      int kv_ld, int D, int heads, const uint8_t *mask, float *out, float *part, size_t part_floats,
                      void *stream, ckey_error *err) {
    const int64_t items = (int64_t)n * heads * Nq;
    if (items <= 0) return CKEY_OK;
    const int hd = D / heads;
    if (hd > MHA_HD || hd < 1) {
        if (err) {
            snprintf(err->message, sizeof err->message, "cuda mha: a head of %d dims, over the kernel's %d", hd,
                     MHA_HD);
            err->status = CKEY_ERR_UNSUPPORTED;
        }
        return CKEY_ERR_UNSUPPORTED;
    }
    /* splits of at least MHA_MIN_KEYS keys until about MHA_UNITS warps fill the GPU, as the partials' room allows */
    int64_t S = (Nk + MHA_MIN_KEYS - 1) / MHA_MIN_KEYS, fill = (MHA_UNITS + items - 1) / items;
    const int64_t room = part ? (int64_t)(part_floats / ((size_t)items * (size_t)(hd + 2))) : 0;
    S = S < fill ? S : fill;
    S = S < room ? S : room;
    if (S < 2) S = 1;
    const int64_t units = items * S, grid = (units + MHA_WARPS - 1) / MHA_WARPS;
    if (grid > 0x7fffffff) {
        if (err) {
            snprintf(err->message, sizeof err->message, "cuda mha: %lld (batch, head, query) items, over a grid",
                     (long long)items);
            err->status = CKEY_ERR_UNSUPPORTED;
        }
        return CKEY_ERR_UNSUPPORTED;
    }
    const mha_args a = {q, k, v, mask, out, part, Nq, Nk, items, q_ld, kv_ld, D, heads, (int)S};
    cudaStream_t st = (cudaStream_t)stream;
    mha_k<<<(unsigned)grid, MHA_WARPS * 32, 0, st>>>(a);
    if (S > 1) mha_merge_k<<<(unsigned)((items + 7) / 8), 256, 0, st>>>(a);
    return launched(err, "mha");
}

ckey_status ck_cu_unary(int kind, const float *x, int64_t n, float *y, void *stream, ckey_error *err) {
    LAUNCH(unary_k, n, stream, kind, x, n, y);
    return launched(err, "unary");
}

ckey_status ck_cu_add(const float *a, int64_t na, const float *b, int64_t nb, float *y, void *stream, ckey_error *err) {
    LAUNCH_I(add_k, na, stream, a, na, b, nb, y);
    return launched(err, "add");
}

ckey_status ck_cu_pad_normalize(const float *src, int Hi, int Wi, int pad_t, int pad_l, int Hp, int Wp, float *dst,
                                void *stream, ckey_error *err) {
    LAUNCH(pad_normalize_k, (int64_t)Hp * Wp * 3, stream, src, Hi, Wi, pad_t, pad_l, Hp, Wp, dst);
    return launched(err, "pad_normalize");
}

ckey_status ck_cu_copy_channels(const float *src, int64_t n, int C, int src_ld, float *dst, int dst_ld, void *stream,
                                ckey_error *err) {
    if (n <= 0 || C <= 0) return CKEY_OK;
    const float *send = src + (n - 1) * src_ld + C;
    const float *dend = dst + (n - 1) * dst_ld + C;
    if (dend <= src || send <= dst) { /* apart */
        LAUNCH_I(copy_k, n * C, stream, src, n, C, src_ld, dst, dst_ld);
        return launched(err, "copy_channels");
    }
    /* rows moving down one buffer: chunks of r rows whose writes end before the source rows they have not read */
    const int64_t shift = src - dst;
    if (dst < src && src_ld == dst_ld && shift >= src_ld) {
        const int64_t r = shift / src_ld;
        for (int64_t p = 0; p < n; p += r) {
            const int64_t m = n - p < r ? n - p : r;
            LAUNCH_I(copy_k, m * C, stream, src + p * src_ld, m, C, src_ld, dst + p * dst_ld, dst_ld);
        }
        return launched(err, "copy_channels");
    }
    copy_serial_k<<<1, 1, 0, (cudaStream_t)stream>>>(src, n, C, src_ld, dst, dst_ld);
    return launched(err, "copy_channels");
}

ckey_status ck_cu_masks_with_others(const float *m, int O, int64_t HW, float *dst, int dst_ld, void *stream,
                                    ckey_error *err) {
    LAUNCH(masks_others_k, HW, stream, m, O, HW, dst, dst_ld);
    return launched(err, "masks_with_others");
}

ckey_status ck_cu_gru_update(float *h, const float *v, int64_t HW, int D, void *stream, ckey_error *err) {
    LAUNCH_I(gru_k, HW * D, stream, h, v, HW, D);
    return launched(err, "gru_update");
}

ckey_status ck_cu_channel_attention(const float *x, int n, int64_t HW, int C, const float *w, int k, const float *r,
                                    float *out, float *means, double *part, size_t part_doubles, void *stream,
                                    ckey_error *err) {
    if (n <= 0 || C <= 0) return CKEY_OK;
    /* ranges of at least CA_MIN_ROWS rows, at most CA_RANGES, as the partials' room allows */
    const int64_t room = part ? (int64_t)(part_doubles / ((size_t)n * (size_t)C)) : 0;
    const int64_t most = CA_RANGES;
    int64_t R = (HW + CA_MIN_ROWS - 1) / CA_MIN_ROWS;
    R = R < most ? R : most;
    R = R < room ? R : room;
    const dim3 grid((unsigned)((C + 31) / 32), (unsigned)n, (unsigned)(R > 1 ? R : 1));
    if (R > 1) {
        channel_part_k<<<grid, dim3(32, 8), 0, (cudaStream_t)stream>>>(x, HW, C, n, (int)R, part);
        LAUNCH(channel_part_mean_k, (int64_t)n * C, stream, part, n, C, (int)R, HW, means);
    } else {
        channel_mean_k<<<grid, dim3(32, 8), 0, (cudaStream_t)stream>>>(x, HW, C, means);
    }
    LAUNCH_I(channel_gate_k, (int64_t)n * HW * C, stream, x, n, HW, C, w, k, r, out, means);
    return launched(err, "channel_attention");
}

ckey_status ck_cu_aggregate(const float *logits, int O, int64_t HW, float *out, void *stream, ckey_error *err) {
    LAUNCH(aggregate_k, HW, stream, logits, O, HW, out);
    return launched(err, "aggregate");
}

ckey_status ck_cu_softmax_planes(float *x, int C, int64_t HW, void *stream, ckey_error *err) {
    LAUNCH(softmax_planes_k, HW, stream, x, C, HW);
    return launched(err, "softmax_planes");
}

ckey_status ck_cu_object_attn_mask(const float *logits, int O, int64_t HW, int Q, uint8_t *mask, int *counts,
                                   void *stream, ckey_error *err) {
    if (HW <= 0 || O <= 0) return CKEY_OK;
    const cudaError_t e = cudaMemsetAsync(counts, 0, (size_t)O * sizeof(int), (cudaStream_t)stream);
    if (e != cudaSuccess) return launched(err, "object_attn_mask memset");
    LAUNCH(fg_count_k, (int64_t)O * HW, stream, logits, O, HW, counts);
    LAUNCH(attn_mask_k, (int64_t)O * HW, stream, logits, O, HW, Q, mask, counts);
    return launched(err, "object_attn_mask");
}

ckey_status ck_cu_summary_pool(const float *m, const float *feat, const float *logits, int64_t HW, int E, int Q,
                               float *out, void *stream, ckey_error *err) {
    if (Q <= 0) return CKEY_OK;
    summary_pool_k<<<dim3((unsigned)((E + 1 + 31) / 32), (unsigned)Q), dim3(32, 8), 0, (cudaStream_t)stream>>>(
        m, feat, logits, HW, E, Q, out);
    return launched(err, "summary_pool");
}

ckey_status ck_cu_summary_values(const float *in, int64_t n, int E, float *out, void *stream, ckey_error *err) {
    LAUNCH(summary_values_k, n * E, stream, in, n, E, out);
    return launched(err, "summary_values");
}

ckey_status ck_cu_pos_encoding(int H, int W, int dim, float scale, float temperature, float *out, void *stream,
                               ckey_error *err) {
    const int64_t nf = (dim + 3) / 4;
    LAUNCH(pos_encoding_k, (int64_t)H * W * nf, stream, H, W, dim, scale, temperature, out);
    return launched(err, "pos_encoding");
}

} // extern "C"
