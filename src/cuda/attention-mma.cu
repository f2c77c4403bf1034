// Tensor-core attention, fp16 / bf16 storage with fp32 accumulation:
// FlashAttention-2 style (queries split over warps, keys streamed through
// shared memory, online softmax in registers; no score matrix beyond one
// 16 x 64 tile per warp). Written for sm_80+ (mma.sync m16n8k16, ldmatrix,
// cp.async); on Hopper this is the mma.sync path, not wgmma.
//
// Fragment layouts (PTX ISA, mma.m16n8k16, g = lane / 4, t = lane % 4):
//   A 16x16 row-major: a0 (g, 2t..2t+1)  a1 (g+8, 2t..)  a2 (g, 2t+8..)  a3 (g+8, 2t+8..)
//   B 16x8  col-major: b0 (k 2t..2t+1, n g)  b1 (k 2t+8.., n g)
//   C 16x8  fp32:      c0 c1 (g, 2t..2t+1)  c2 c3 (g+8, 2t..2t+1)
// so the S = Q K^T accumulator of two adjacent 8-key tiles is, packed to 16
// bits, exactly the A fragment of P for the P V product. K tiles are read
// with ldmatrix (rows = keys), V tiles with ldmatrix.trans.
#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cuda_runtime.h>
#include <math.h>
#include <stdint.h>
#include <stdio.h>

#include "cuda/kernels.h"
#include "cuda/launch.cuh"
#include "cuda/ptx.cuh"

namespace {

// ---------------------------------------------------------------- PTX wrappers

__device__ __forceinline__ void ldsm_x4(uint32_t (&r)[4], uint32_t addr) {
    asm volatile("ldmatrix.sync.aligned.m8n8.x4.shared.b16 {%0,%1,%2,%3}, [%4];\n"
                 : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3])
                 : "r"(addr));
}
__device__ __forceinline__ void ldsm_x2(uint32_t (&r)[2], uint32_t addr) {
    asm volatile("ldmatrix.sync.aligned.m8n8.x2.shared.b16 {%0,%1}, [%2];\n" : "=r"(r[0]), "=r"(r[1]) : "r"(addr));
}
__device__ __forceinline__ void ldsm_x4_t(uint32_t (&r)[4], uint32_t addr) {
    asm volatile("ldmatrix.sync.aligned.m8n8.x4.trans.shared.b16 {%0,%1,%2,%3}, [%4];\n"
                 : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3])
                 : "r"(addr));
}
__device__ __forceinline__ void ldsm_x2_t(uint32_t (&r)[2], uint32_t addr) {
    asm volatile("ldmatrix.sync.aligned.m8n8.x2.trans.shared.b16 {%0,%1}, [%2];\n"
                 : "=r"(r[0]), "=r"(r[1])
                 : "r"(addr));
}

// The storage type's conversions and mma instructions.
template <typename T> struct Ty;

template <> struct Ty<__half> : Pair16<__half> {
    static __device__ __forceinline__ void mma16(float (&d)[4], const uint32_t (&a)[4], uint32_t b0, uint32_t b1) {
        asm("mma.sync.aligned.m16n8k16.row.col.f32.f16.f16.f32 {%0,%1,%2,%3}, {%4,%5,%6,%7}, {%8,%9}, "
            "{%0,%1,%2,%3};\n"
            : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3])
            : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b0), "r"(b1));
    }
    static __device__ __forceinline__ void mma8(float (&d)[4], uint32_t a0, uint32_t a1, uint32_t b0) {
        asm("mma.sync.aligned.m16n8k8.row.col.f32.f16.f16.f32 {%0,%1,%2,%3}, {%4,%5}, {%6}, {%0,%1,%2,%3};\n"
            : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3])
            : "r"(a0), "r"(a1), "r"(b0));
    }
};

template <> struct Ty<__nv_bfloat16> : Pair16<__nv_bfloat16> {
    static __device__ __forceinline__ void mma16(float (&d)[4], const uint32_t (&a)[4], uint32_t b0, uint32_t b1) {
        asm("mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32 {%0,%1,%2,%3}, {%4,%5,%6,%7}, {%8,%9}, "
            "{%0,%1,%2,%3};\n"
            : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3])
            : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b0), "r"(b1));
    }
    static __device__ __forceinline__ void mma8(float (&d)[4], uint32_t a0, uint32_t a1, uint32_t b0) {
        asm("mma.sync.aligned.m16n8k8.row.col.f32.bf16.bf16.f32 {%0,%1,%2,%3}, {%4,%5}, {%6}, {%0,%1,%2,%3};\n"
            : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3])
            : "r"(a0), "r"(a1), "r"(b0));
    }
};

// ------------------------------------------------------------- the warp tile

// One warp's share: MT m-tiles of 16 query rows against a shared-memory chunk
// of KN keys. K and V chunks are [KN][STR] in storage type, STR = head_dim
// padded to an odd number of 16-byte units so that ldmatrix's 8 row
// addresses hit distinct banks (56 -> 56, 64 -> 72, 32 -> 40, 16 -> 24).
// head_dim % 16 == 8 (56) ends Q K^T with one m16n8k8 step instead of a
// zero-padded k16 one, so nothing reads padding.
template <typename T, int HD, int MT, int KN> struct Tile {
    static constexpr int KS = (HD + 15) / 16; // Q K^T k-steps
    static constexpr bool K8 = HD % 16 != 0;  // the last one is k8
    static constexpr int DT = HD / 8;         // 8-wide output column tiles
    static constexpr int NT = KN / 8;         // 8-key score tiles
    static constexpr int STR = ((HD / 8) | 1) * 8;
    static constexpr int CH = HD / 8; // 16-byte chunks per row
    static_assert(HD % 8 == 0 && KN % 16 == 0, "tile shape");

    uint32_t q[MT][KS][4]; // Q fragments (A operand), unscaled
    float o[MT][DT][4];    // output accumulator
    float m[MT][2];        // running max of the scaled (log2-domain) scores, rows g and g+8
    float l[MT][2];        // running sum, this thread's columns only (quad-reduced at the end)

    __device__ __forceinline__ void init() {
#pragma unroll
        for (int mt = 0; mt < MT; mt++) {
#pragma unroll
            for (int dt = 0; dt < DT; dt++)
#pragma unroll
                for (int i = 0; i < 4; i++) o[mt][dt][i] = 0.f;
            m[mt][0] = m[mt][1] = -INFINITY;
            l[mt][0] = l[mt][1] = 0.f;
        }
    }

    // The Q fragment word of columns col, col+1 of a query row, max-pooled
    // over the qs source rows src + s * sstride (element pointers to the
    // head's column 0).
    static __device__ __forceinline__ uint32_t q_word(const T *src, int64_t sstride, int qs, int col) {
        uint32_t v = *reinterpret_cast<const uint32_t *>(src + col);
        for (int s = 1; s < qs; s++)
            v = Ty<T>::max2(v, *reinterpret_cast<const uint32_t *>(src + s * sstride + col));
        return v;
    }

    // Load m-tile mt's Q fragments: rows g (lo) and g+8 (hi), zero where the
    // row does not exist.
    __device__ __forceinline__ void load_q(int mt, const T *lo, bool lo_ok, const T *hi, bool hi_ok, int64_t sstride,
                                           int qs, int lane) {
        const int t = lane & 3;
#pragma unroll
        for (int kk = 0; kk < KS; kk++) {
            const int c0 = kk * 16 + 2 * t;
            const bool second = !(K8 && kk == KS - 1); // columns c0+8 exist
            q[mt][kk][0] = lo_ok ? q_word(lo, sstride, qs, c0) : 0u;
            q[mt][kk][1] = hi_ok ? q_word(hi, sstride, qs, c0) : 0u;
            q[mt][kk][2] = lo_ok && second ? q_word(lo, sstride, qs, c0 + 8) : 0u;
            q[mt][kk][3] = hi_ok && second ? q_word(hi, sstride, qs, c0 + 8) : 0u;
        }
    }

    // Consume one chunk: keys [0, nvalid) of the K / V chunks at shared
    // addresses ks, vs. c = scale * log2(e).
    __device__ __forceinline__ void step(uint32_t ks, uint32_t vs, int nvalid, float c, int lane) {
        float s[MT][NT][4];
#pragma unroll
        for (int mt = 0; mt < MT; mt++)
#pragma unroll
            for (int nt = 0; nt < NT; nt++)
#pragma unroll
                for (int i = 0; i < 4; i++) s[mt][nt][i] = 0.f;

        // S = Q K^T
        const uint32_t k_x4 = ks + (uint32_t)((((lane & 7) + (lane >> 4) * 8) * STR + ((lane >> 3) & 1) * 8) * 2);
#pragma unroll
        for (int kk = 0; kk < KS; kk++) {
            if (K8 && kk == KS - 1) {
                if constexpr (NT % 4 == 0) {
                    // 4 key tiles per ldmatrix: lane's row = key `lane` of the 32
                    const uint32_t a = ks + (uint32_t)((lane * STR + kk * 16) * 2);
#pragma unroll
                    for (int nq = 0; nq < NT / 4; nq++) {
                        uint32_t b[4];
                        ldsm_x4(b, a + (uint32_t)(nq * 32 * STR * 2));
#pragma unroll
                        for (int mt = 0; mt < MT; mt++)
#pragma unroll
                            for (int i = 0; i < 4; i++) Ty<T>::mma8(s[mt][4 * nq + i], q[mt][kk][0], q[mt][kk][1], b[i]);
                    }
                } else {
                    const uint32_t a = ks + (uint32_t)((((lane & 7) + ((lane >> 3) & 1) * 8) * STR + kk * 16) * 2);
#pragma unroll
                    for (int np = 0; np < NT / 2; np++) {
                        uint32_t b[2];
                        ldsm_x2(b, a + (uint32_t)(np * 16 * STR * 2));
#pragma unroll
                        for (int mt = 0; mt < MT; mt++) {
                            Ty<T>::mma8(s[mt][2 * np], q[mt][kk][0], q[mt][kk][1], b[0]);
                            Ty<T>::mma8(s[mt][2 * np + 1], q[mt][kk][0], q[mt][kk][1], b[1]);
                        }
                    }
                }
            } else {
#pragma unroll
                for (int np = 0; np < NT / 2; np++) {
                    uint32_t b[4]; // (keys 0-7, k lo) (keys 0-7, k hi) (keys 8-15, k lo) (keys 8-15, k hi)
                    ldsm_x4(b, k_x4 + (uint32_t)((np * 16 * STR + kk * 16) * 2));
#pragma unroll
                    for (int mt = 0; mt < MT; mt++) {
                        Ty<T>::mma16(s[mt][2 * np], q[mt][kk], b[0], b[1]);
                        Ty<T>::mma16(s[mt][2 * np + 1], q[mt][kk], b[2], b[3]);
                    }
                }
            }
        }

        // keys past the end of the sequence / window
        if (nvalid < KN) {
            const int t2 = 2 * (lane & 3);
#pragma unroll
            for (int mt = 0; mt < MT; mt++)
#pragma unroll
                for (int nt = 0; nt < NT; nt++)
#pragma unroll
                    for (int i = 0; i < 4; i++)
                        if (nt * 8 + t2 + (i & 1) >= nvalid) s[mt][nt][i] = -INFINITY;
        }

        // online softmax, log2 domain; every chunk has a valid key, so the
        // new max is finite and exp2(-inf - m) = 0 handles the first chunk
#pragma unroll
        for (int mt = 0; mt < MT; mt++)
#pragma unroll
            for (int r = 0; r < 2; r++) {
                float mx = s[mt][0][2 * r];
#pragma unroll
                for (int nt = 0; nt < NT; nt++) mx = fmaxf(mx, fmaxf(s[mt][nt][2 * r], s[mt][nt][2 * r + 1]));
                mx = fmaxf(mx, __shfl_xor_sync(0xffffffffu, mx, 1));
                mx = fmaxf(mx, __shfl_xor_sync(0xffffffffu, mx, 2));
                const float mnew = fmaxf(m[mt][r], mx * c);
                const float corr = fast_exp2(m[mt][r] - mnew);
                m[mt][r] = mnew;
                float sum = 0.f;
#pragma unroll
                for (int nt = 0; nt < NT; nt++) {
                    const float p0 = fast_exp2(fmaf(s[mt][nt][2 * r], c, -mnew));
                    const float p1 = fast_exp2(fmaf(s[mt][nt][2 * r + 1], c, -mnew));
                    s[mt][nt][2 * r] = p0, s[mt][nt][2 * r + 1] = p1;
                    sum += p0 + p1;
                }
                l[mt][r] = l[mt][r] * corr + sum;
#pragma unroll
                for (int dt = 0; dt < DT; dt++) o[mt][dt][2 * r] *= corr, o[mt][dt][2 * r + 1] *= corr;
            }

        // O += P V
        const uint32_t v_row = (uint32_t)((lane & 7) + ((lane >> 3) & 1) * 8) * STR;
        const uint32_t v_x4 = vs + (v_row + (uint32_t)(lane >> 4) * 8) * 2;
        const uint32_t v_x2 = vs + (v_row + (uint32_t)(DT - 1) * 8) * 2;
#pragma unroll
        for (int kk = 0; kk < KN / 16; kk++) {
            uint32_t a[MT][4];
#pragma unroll
            for (int mt = 0; mt < MT; mt++) {
                a[mt][0] = Ty<T>::pack(s[mt][2 * kk][0], s[mt][2 * kk][1]);
                a[mt][1] = Ty<T>::pack(s[mt][2 * kk][2], s[mt][2 * kk][3]);
                a[mt][2] = Ty<T>::pack(s[mt][2 * kk + 1][0], s[mt][2 * kk + 1][1]);
                a[mt][3] = Ty<T>::pack(s[mt][2 * kk + 1][2], s[mt][2 * kk + 1][3]);
            }
#pragma unroll
            for (int dp = 0; dp < DT / 2; dp++) {
                uint32_t b[4]; // (keys lo, d lo) (keys hi, d lo) (keys lo, d hi) (keys hi, d hi)
                ldsm_x4_t(b, v_x4 + (uint32_t)((kk * 16 * STR + dp * 16) * 2));
#pragma unroll
                for (int mt = 0; mt < MT; mt++) {
                    Ty<T>::mma16(o[mt][2 * dp], a[mt], b[0], b[1]);
                    Ty<T>::mma16(o[mt][2 * dp + 1], a[mt], b[2], b[3]);
                }
            }
            if constexpr (DT % 2 != 0) {
                uint32_t b[2];
                ldsm_x2_t(b, v_x2 + (uint32_t)(kk * 16 * STR * 2));
#pragma unroll
                for (int mt = 0; mt < MT; mt++) Ty<T>::mma16(o[mt][DT - 1], a[mt], b[0], b[1]);
            }
        }
    }

    // Normalize m-tile mt and store rows g (dst_lo) and g+8 (dst_hi): element
    // pointers to the head's column 0 of the output rows, or nullptr.
    __device__ __forceinline__ void store(int mt, T *dst_lo, T *dst_hi, int lane) {
        const int t2 = 2 * (lane & 3);
        T *dst[2] = {dst_lo, dst_hi};
#pragma unroll
        for (int r = 0; r < 2; r++) {
            float L = l[mt][r];
            L += __shfl_xor_sync(0xffffffffu, L, 1);
            L += __shfl_xor_sync(0xffffffffu, L, 2);
            const float inv = 1.f / L;
            if (dst[r]) {
#pragma unroll
                for (int dt = 0; dt < DT; dt++)
                    *reinterpret_cast<uint32_t *>(dst[r] + dt * 8 + t2) =
                        Ty<T>::pack(o[mt][dt][2 * r] * inv, o[mt][dt][2 * r + 1] * inv);
            }
        }
    }
};

// ------------------------------------------------------------ global attention

constexpr int kWarps = 4;
constexpr int kThreads = 32 * kWarps;
constexpr int kGlobalMT = 2;                      // m-tiles per warp
constexpr int kGlobalBM = 16 * kGlobalMT * kWarps; // 128 query rows per block
constexpr int kGlobalKN = 64;                      // keys per stage

// Block (query tile of 128 rows, head): 4 warps x 32 rows; K/V tiles of 64
// keys double-buffered with cp.async.
template <typename T, int HD>
__global__ void __launch_bounds__(kThreads) attention_tc_kernel(const T *__restrict__ qkv, int64_t N, int D, int qs,
                                                                float c, T *__restrict__ out) {
    ck_pdl_enter();
    using W = Tile<T, HD, kGlobalMT, kGlobalKN>;
    constexpr int STR = W::STR, CH = W::CH, KN = kGlobalKN;
    __shared__ __align__(16) T ksm[2][KN * STR];
    __shared__ __align__(16) T vsm[2][KN * STR];

    const int tid = threadIdx.x, warp = tid >> 5, lane = tid & 31;
    const int h = blockIdx.y;
    const int64_t Nq = N / qs, ld = 3 * (int64_t)D;
    const T *kbase = qkv + D + (int64_t)h * HD; // row 0's K of this head; V is D further

    auto load_kv = [&](int64_t k0, int stage) {
        const uint32_t ks = smem_addr(&ksm[stage][0]), vs = smem_addr(&vsm[stage][0]);
        for (int idx = tid; idx < KN * CH; idx += kThreads) {
            const int r = idx / CH, cc = idx - r * CH;
            const bool ok = k0 + r < N;
            const T *src = kbase + (ok ? k0 + r : 0) * ld + cc * 8;
            const uint32_t off = (uint32_t)((r * STR + cc * 8) * (int)sizeof(T));
            cp_async16(ks + off, src, ok);
            cp_async16(vs + off, src + D, ok);
        }
    };

    const int64_t ntiles = (N + KN - 1) / KN;
    load_kv(0, 0);
    cp_async_commit();

    W w;
    w.init();
    const int64_t qrow0 = (int64_t)blockIdx.x * kGlobalBM + warp * 16 * kGlobalMT + (lane >> 2);
#pragma unroll
    for (int mt = 0; mt < kGlobalMT; mt++) {
        const int64_t rlo = qrow0 + mt * 16, rhi = rlo + 8;
        // pooled q: source rows s*Nq + row (Unroll order)
        const T *qb = qkv + (int64_t)h * HD;
        w.load_q(mt, qb + rlo * ld, rlo < Nq, qb + rhi * ld, rhi < Nq, Nq * ld, qs, lane);
    }

    for (int64_t i = 0; i < ntiles; i++) {
        if (i + 1 < ntiles) load_kv((i + 1) * KN, (int)((i + 1) & 1));
        cp_async_commit();
        cp_async_wait<1>();
        __syncthreads();
        const int st = (int)(i & 1);
        const int64_t rem = N - i * KN;
        w.step(smem_addr(&ksm[st][0]), smem_addr(&vsm[st][0]), rem < KN ? (int)rem : KN, c, lane);
        __syncthreads();
    }

#pragma unroll
    for (int mt = 0; mt < kGlobalMT; mt++) {
        const int64_t rlo = qrow0 + mt * 16, rhi = rlo + 8;
        T *base = out + (int64_t)h * HD;
        w.store(mt, rlo < Nq ? base + rlo * D : nullptr, rhi < Nq ? base + rhi * D : nullptr, lane);
    }
}

// ------------------------------------------------------ mask-unit attention

// The K and V chunks (keys k0 .. k0 + KN - 1) of units U0 .. U0 + upb - 1 to
// shared memory at dst (unit u: K at 2u chunks of kChunkBytes, V after it),
// cp.async by all the block's threads; keys past Tk and units past `units`
// are zero-filled. Token t of window w is row t * nw + w.
template <typename T, int HD, int KN>
__device__ __forceinline__ void window_kv_load(const T *__restrict__ qkv, int64_t nw, int Tk, int Do, int heads,
                                               int units, int upb, int U0, int k0, uint32_t dst0, int tid) {
    using W = Tile<T, HD, 1, KN>;
    constexpr int STR = W::STR, CH = W::CH;
    constexpr uint32_t kChunkBytes = (uint32_t)(KN * STR * sizeof(T));
    const int64_t ld = 3 * (int64_t)Do;
    for (int idx = tid; idx < upb * KN * CH; idx += kThreads) {
        const int uu = idx / (KN * CH), rem = idx - uu * (KN * CH);
        const int r = rem / CH, cc = rem - r * CH;
        const int UU = U0 + uu;
        const bool ok = UU < units && k0 + r < Tk;
        const int ww = ok ? UU / heads : 0, hh = ok ? UU - ww * heads : 0;
        const T *src = qkv + ((ok ? (int64_t)(k0 + r) : 0) * nw + ww) * ld + Do + hh * HD + cc * 8;
        const uint32_t dst = dst0 + 2u * (uint32_t)uu * kChunkBytes + (uint32_t)((r * STR + cc * 8) * (int)sizeof(T));
        cp_async16(dst, src, ok);
        cp_async16(dst + kChunkBytes, src + Do, ok);
    }
}

// Units are (window w, head h), U = w * heads + h. Token t of window w is
// row t * nw + w; query j pools rows (s * Tq + j) * nw + w; output row
// j * nw + w. A block holds `upb` units' K/V chunks (KN keys each) in
// dynamic shared memory; `wpu` warps share a unit, each taking 16 queries
// (more passes when a window has more than 16 * wpu queries). Latency-bound
// (45% of DRAM bandwidth at the unbounded 143 registers, 3 blocks an SM),
// hence the bound: at most 96 registers, 5 blocks an SM (44 bytes spilled),
// the six launches of a frame 597 us against 636 (S = 2048, fp16, H200).
template <typename T, int HD, int KN>
__global__ void __launch_bounds__(kThreads, 5)
    window_attention_tc_kernel(const T *__restrict__ qkv, int64_t nw, int Tk, int qs, int Do, int heads, float c,
                               T *__restrict__ out, int ldo, int upb, int wpu, int units) {
    ck_pdl_enter();
    using W = Tile<T, HD, 1, KN>;
    constexpr uint32_t kChunkBytes = (uint32_t)(KN * W::STR * sizeof(T));
    extern __shared__ uint4 smem_raw[];
    const uint32_t sbase = smem_addr(smem_raw); // unit u: K at 2u chunks, V after it

    const int tid = threadIdx.x, warp = tid >> 5, lane = tid & 31;
    const int Tq = Tk / qs, nqc = (Tq + 15) / 16, passes = (nqc + wpu - 1) / wpu;
    const int64_t ld = 3 * (int64_t)Do;
    const int U0 = blockIdx.x * upb;
    const int u = warp / wpu, sub = warp - u * wpu;
    const int U = U0 + u;
    const bool has_unit = u < upb && U < units;
    const int w_ = has_unit ? U / heads : 0;
    const int h = has_unit ? U - w_ * heads : 0;
    const uint32_t ks = sbase + 2u * (uint32_t)u * kChunkBytes, vs = ks + kChunkBytes;

    for (int pass = 0; pass < passes; pass++) {
        const int qc = pass * wpu + sub;
        const bool active = has_unit && qc < nqc;
        const int jlo = qc * 16 + (lane >> 2), jhi = jlo + 8;
        W wt;
        wt.init();
        if (active) {
            const T *qb = qkv + (int64_t)w_ * ld + (int64_t)h * HD; // query j: row (s*Tq + j)*nw + w
            wt.load_q(0, qb + (int64_t)jlo * nw * ld, jlo < Tq, qb + (int64_t)jhi * nw * ld, jhi < Tq,
                      (int64_t)Tq * nw * ld, qs, lane);
        }
        for (int k0 = 0; k0 < Tk; k0 += KN) {
            __syncthreads(); // the previous chunk is consumed
            window_kv_load<T, HD, KN>(qkv, nw, Tk, Do, heads, units, upb, U0, k0, sbase, tid);
            cp_async_commit();
            cp_async_wait<0>();
            __syncthreads();
            if (active) wt.step(ks, vs, Tk - k0 < KN ? Tk - k0 : KN, c, lane);
        }
        if (active) {
            T *base = out + (int64_t)w_ * ldo + (int64_t)h * HD;
            const int64_t rs = nw * (int64_t)ldo; // output row j*nw + w, rows ldo apart
            wt.store(0, jlo < Tq ? base + jlo * rs : nullptr, jhi < Tq ? base + jhi * rs : nullptr, lane);
        }
    }
}

// The same for windows of at most KN keys whose queries one pass of the
// block's warps covers (every mask-unit attention of the model), persistent:
// a block walks groups of `upb` units (g = blockIdx.x, + gridDim.x, ...) and
// sends for the next group's K / V (cp.async, the other of two buffers)
// before it loads this group's queries and waits for this group's K / V, so
// a unit's loads overlap the previous unit's math.
template <typename T, int HD, int KN>
__global__ void __launch_bounds__(kThreads, 5)
    window_attention_pipe_kernel(const T *__restrict__ qkv, int64_t nw, int Tk, int qs, int Do, int heads, float c,
                                 T *__restrict__ out, int ldo, int upb, int wpu, int units) {
    ck_pdl_enter();
    using W = Tile<T, HD, 1, KN>;
    constexpr uint32_t kChunkBytes = (uint32_t)(KN * W::STR * sizeof(T));
    extern __shared__ uint4 smem_raw[];
    const uint32_t sbase = smem_addr(smem_raw); // buffer b, unit u: K at (2 (b upb + u)) chunks, V after it
    const uint32_t kBufBytes = 2u * (uint32_t)upb * kChunkBytes;

    const int tid = threadIdx.x, warp = tid >> 5, lane = tid & 31;
    const int Tq = Tk / qs;
    const int64_t ld = 3 * (int64_t)Do;
    const int ngroups = (units + upb - 1) / upb;
    const int u = warp / wpu, sub = warp - u * wpu;

    auto load_group = [&](int g, uint32_t buf) {
        window_kv_load<T, HD, KN>(qkv, nw, Tk, Do, heads, units, upb, g * upb, 0, buf, tid);
    };

    if ((int)blockIdx.x < ngroups) load_group(blockIdx.x, sbase);
    cp_async_commit();
    for (int g = blockIdx.x, i = 0; g < ngroups; g += gridDim.x, i++) {
        const uint32_t buf = sbase + (uint32_t)(i & 1) * kBufBytes;
        if (g + (int)gridDim.x < ngroups) load_group(g + gridDim.x, sbase + (uint32_t)((i + 1) & 1) * kBufBytes);
        cp_async_commit();

        const int U = g * upb + u;
        const bool active = u < upb && U < units && sub * 16 < Tq;
        const int w_ = active ? U / heads : 0, h = active ? U - w_ * heads : 0;
        const int jlo = sub * 16 + (lane >> 2), jhi = jlo + 8;
        W wt;
        wt.init();
        if (active) {
            const T *qb = qkv + (int64_t)w_ * ld + (int64_t)h * HD; // query j: row (s*Tq + j)*nw + w
            wt.load_q(0, qb + (int64_t)jlo * nw * ld, jlo < Tq, qb + (int64_t)jhi * nw * ld, jhi < Tq,
                      (int64_t)Tq * nw * ld, qs, lane);
        }
        cp_async_wait<1>(); // this group's K / V (the next group's may still be in flight)
        __syncthreads();
        const uint32_t ks = buf + 2u * (uint32_t)u * kChunkBytes;
        if (active) {
            wt.step(ks, ks + kChunkBytes, Tk, c, lane);
            T *base = out + (int64_t)w_ * ldo + (int64_t)h * HD;
            const int64_t rs = nw * (int64_t)ldo; // output row j*nw + w, rows ldo apart
            wt.store(0, jlo < Tq ? base + jlo * rs : nullptr, jhi < Tq ? base + jhi * rs : nullptr, lane);
        }
        __syncthreads(); // buf is refilled next iteration
    }
}

// --------------------------------------------------------------- launchers

ckey_status fail(ckey_error *err, ckey_status st, const char *msg) {
    if (err) {
        snprintf(err->message, sizeof err->message, "%s", msg);
        err->status = st;
    }
    return st;
}

ckey_status launched(ckey_error *err, const char *what) {
    const cudaError_t e = cudaGetLastError();
    if (e == cudaSuccess) return CKEY_OK;
    if (err) {
        snprintf(err->message, sizeof err->message, "CUDA: %s launch: %s", what, cudaGetErrorString(e));
        err->status = CKEY_ERR_DEVICE;
    }
    return CKEY_ERR_DEVICE;
}

constexpr float kLog2e = 1.4426950408889634f;

template <typename T, int HD>
void launch_global(const void *qkv, int64_t N, int D, int heads, int qs, void *out, cudaStream_t st) {
    const int64_t Nq = N / qs;
    dim3 grid((unsigned)((Nq + kGlobalBM - 1) / kGlobalBM), (unsigned)heads);
    ck_launch(attention_tc_kernel<T, HD>, grid, kThreads, 0, (cudaStream_t)st, (const T *)qkv, N, D, qs,
              kLog2e / sqrtf((float)HD), (T *)out);
}

template <typename T, int HD, int KN>
cudaError_t launch_window_kn(const void *qkv, int64_t nw, int T_, int qs, int Do, int heads, void *out, int ldo,
                             cudaStream_t st) {
    const int Tq = T_ / qs, nqc = (Tq + 15) / 16;
    const int wpu = nqc >= kWarps ? kWarps : nqc;
    const int upb = kWarps / wpu;
    const int units = (int)(nw * heads); // checked < 2^31 by the caller
    const size_t smem = (size_t)upb * 2 * KN * Tile<T, HD, 1, KN>::STR * sizeof(T);
    if (T_ <= KN && nqc <= wpu) { // one chunk of keys, one pass: the persistent, prefetching kernel
        auto pk = window_attention_pipe_kernel<T, HD, KN>;
        const size_t psmem = 2 * smem;
        cudaError_t e = cudaSuccess;
        if (psmem > 48 * 1024) e = cudaFuncSetAttribute(pk, cudaFuncAttributeMaxDynamicSharedMemorySize, (int)psmem);
        int dev = 0, nsm = 0, per_sm = 0;
        if (e == cudaSuccess) e = cudaGetDevice(&dev);
        if (e == cudaSuccess) e = cudaDeviceGetAttribute(&nsm, cudaDevAttrMultiProcessorCount, dev);
        if (e == cudaSuccess) e = cudaOccupancyMaxActiveBlocksPerMultiprocessor(&per_sm, pk, kThreads, psmem);
        if (e != cudaSuccess) return e;
        /* only where its two buffers still fit 4 blocks an SM: there the six launches of a frame take
         * 559 us instead of 597 (S = 2048, fp16, H200); at 2 blocks an SM (the q-pooled stage-1 block, 4 units
         * of 64 keys a block in 128 KiB) it is slower than the kernel above (281 us against 202) */
        if (per_sm >= 4) {
            const int64_t groups = (units + upb - 1) / upb, resident = (int64_t)nsm * per_sm;
            ck_launch(pk, (unsigned)(groups < resident ? groups : resident), kThreads, psmem, (cudaStream_t)st,
                      (const T *)qkv, nw, T_, qs, Do, heads, kLog2e / sqrtf((float)HD), (T *)out, ldo, upb, wpu, units);
            return cudaSuccess;
        }
    }
    auto kern = window_attention_tc_kernel<T, HD, KN>;
    if (smem > 48 * 1024) {
        const cudaError_t e = cudaFuncSetAttribute(kern, cudaFuncAttributeMaxDynamicSharedMemorySize, (int)smem);
        if (e != cudaSuccess) return e;
    }
    ck_launch(kern, (unsigned)((units + upb - 1) / upb), kThreads, smem, (cudaStream_t)st, (const T *)qkv, nw, T_, qs,
              Do, heads, kLog2e / sqrtf((float)HD), (T *)out, ldo, upb, wpu, units);
    return cudaSuccess;
}

template <typename T, int HD>
cudaError_t launch_window(const void *qkv, int64_t nw, int T_, int qs, int Do, int heads, void *out, int ldo,
                          cudaStream_t st) {
    if (T_ <= 16) return launch_window_kn<T, HD, 16>(qkv, nw, T_, qs, Do, heads, out, ldo, st);
    return launch_window_kn<T, HD, 64>(qkv, nw, T_, qs, Do, heads, out, ldo, st);
}

template <typename T>
bool dispatch_global(int hd, const void *qkv, int64_t N, int D, int heads, int qs, void *out, cudaStream_t st) {
    switch (hd) {
    case 16: launch_global<T, 16>(qkv, N, D, heads, qs, out, st); return true;
    case 32: launch_global<T, 32>(qkv, N, D, heads, qs, out, st); return true;
    case 56: launch_global<T, 56>(qkv, N, D, heads, qs, out, st); return true;
    case 64: launch_global<T, 64>(qkv, N, D, heads, qs, out, st); return true;
    default: return false;
    }
}

template <typename T>
cudaError_t dispatch_window(int hd, const void *qkv, int64_t nw, int T_, int qs, int Do, int heads, void *out,
                            int ldo, cudaStream_t st) {
    switch (hd) {
    case 16: return launch_window<T, 16>(qkv, nw, T_, qs, Do, heads, out, ldo, st);
    case 32: return launch_window<T, 32>(qkv, nw, T_, qs, Do, heads, out, ldo, st);
    case 56: return launch_window<T, 56>(qkv, nw, T_, qs, Do, heads, out, ldo, st);
    case 64: return launch_window<T, 64>(qkv, nw, T_, qs, Do, heads, out, ldo, st);
    default: return cudaErrorInvalidValue;
    }
}

bool hd_supported(int hd) { return hd == 16 || hd == 32 || hd == 56 || hd == 64; }

} // namespace

extern "C" ckey_status ck_cuda_attention_tc(const void *qkv, int64_t N, int D, int heads, int qs, void *out,
                                            ck_dtype dt, void *stream, ckey_error *err) {
    char msg[160];
    if (heads <= 0 || D <= 0 || D % heads || qs <= 0 || N < 0 || N % qs) {
        snprintf(msg, sizeof msg, "attention (tensor cores): D %d, heads %d, N %lld, q stride %d do not fit", D,
                 heads, (long long)N, qs);
        return fail(err, CKEY_ERR_INVALID_ARG, msg);
    }
    const int hd = D / heads;
    if (!hd_supported(hd) || (dt != CK_F16 && dt != CK_BF16)) {
        snprintf(msg, sizeof msg, "attention (tensor cores): head_dim %d, dtype %d unsupported (16, 32, 56, 64; f16, bf16)",
                 hd, (int)dt);
        return fail(err, CKEY_ERR_UNSUPPORTED, msg);
    }
    if (((uintptr_t)qkv & 15) || ((uintptr_t)out & 3))
        return fail(err, CKEY_ERR_INVALID_ARG, "attention (tensor cores): qkv must be 16-byte aligned, out 4-byte");
    if (N == 0) return CKEY_OK;
    cudaStream_t st = (cudaStream_t)stream;
    if (dt == CK_F16) dispatch_global<__half>(hd, qkv, N, D, heads, qs, out, st);
    else dispatch_global<__nv_bfloat16>(hd, qkv, N, D, heads, qs, out, st);
    return launched(err, "attention (tensor cores)");
}

extern "C" ckey_status ck_cuda_window_attention_tc(const void *qkv, int64_t nw, int T, int qs, int Do, int heads,
                                                   void *out, ck_dtype dt, void *stream, ckey_error *err) {
    return ck_cuda_window_attention_tc_ld(qkv, nw, T, qs, Do, heads, out, Do, dt, stream, err);
}

extern "C" ckey_status ck_cuda_window_attention_tc_ld(const void *qkv, int64_t nw, int T, int qs, int Do, int heads,
                                                      void *out, int ldo, ck_dtype dt, void *stream, ckey_error *err) {
    char msg[160];
    if (heads <= 0 || Do <= 0 || Do % heads || qs <= 0 || T <= 0 || T % qs || nw < 0) {
        snprintf(msg, sizeof msg, "window attention (tensor cores): Do %d, heads %d, T %d, q stride %d do not fit", Do,
                 heads, T, qs);
        return fail(err, CKEY_ERR_INVALID_ARG, msg);
    }
    const int hd = Do / heads;
    if (!hd_supported(hd) || (dt != CK_F16 && dt != CK_BF16)) {
        snprintf(msg, sizeof msg,
                 "window attention (tensor cores): head_dim %d, dtype %d unsupported (16, 32, 56, 64; f16, bf16)", hd,
                 (int)dt);
        return fail(err, CKEY_ERR_UNSUPPORTED, msg);
    }
    if (((uintptr_t)qkv & 15) || ((uintptr_t)out & 3) || ldo < Do || (ldo & 1))
        return fail(err, CKEY_ERR_INVALID_ARG,
                    "window attention (tensor cores): qkv must be 16-byte aligned, out 4-byte, ldo even and >= Do");
    if (nw == 0) return CKEY_OK;
    if (nw * heads > 0x7fffffff) return fail(err, CKEY_ERR_INVALID_ARG, "window attention (tensor cores): too many windows");
    cudaStream_t st = (cudaStream_t)stream;
    const cudaError_t e = dt == CK_F16 ? dispatch_window<__half>(hd, qkv, nw, T, qs, Do, heads, out, ldo, st)
                                       : dispatch_window<__nv_bfloat16>(hd, qkv, nw, T, qs, Do, heads, out, ldo, st);
    if (e != cudaSuccess) {
        snprintf(msg, sizeof msg, "CUDA: window attention (tensor cores): %s", cudaGetErrorString(e));
        return fail(err, CKEY_ERR_DEVICE, msg);
    }
    return launched(err, "window attention (tensor cores)");
}
