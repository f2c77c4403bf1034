// Hopper (sm_90a) global attention on warpgroup MMA (wgmma.mma_async), fp16 /
// bf16 storage, fp32 accumulation and softmax. Same interface, layouts and
// q pooling as ck_cuda_attention_tc (attention-mma.cu); head_dim 56 only.
//
// Design. A CTA = NWG consumer warpgroups (128 threads each) x one head; each
// warpgroup owns 64 query rows (wgmma M = 64). Q lives in registers as wgmma
// A fragments (max-pooled over qs on load, head_dim zero-padded 56 -> 64),
// or (T_QSMEM, the default TMA kernel's: 128-key tiles need its 16
// registers) in a shared-memory tile per warpgroup, staged once.
// K and V are streamed through shared memory in tiles of KN keys, ST stages,
// loaded with cp.async by all threads of the CTA (one __syncthreads per
// tile; KvLoader works each thread's addresses out once). Per tile and
// warpgroup:
//   S  = Q K^T   : 4 x wgmma m64nKNk16, A = Q (registers), B = K tile
//                  (K-major: a key's head dims are contiguous), trans-b 0;
//   online softmax on the f32 S fragments (exp2, log2(e)/sqrt(56) folded;
//                  softmax_tile; the default TMA kernel first tries P from
//                  the running max as it stands and takes the row max only
//                  when some p of the warpgroup exceeds 2^8: F_PCHECK);
//   O += P V     : KN/16 x wgmma m64n64k16 (or n56), A = P (S fragments
//                  packed to 16 bits), B = V tile (MN-major: a key's dims
//                  contiguous, trans-b 1); with F_ONES the 1.0 in V's padding
//                  column 56 makes O's column 56 the row sum of P.
// attention_wgmma_kernel commits and waits (wait_group 0) each wgmma batch
// before its results are touched; overlap comes from the other warpgroups /
// CTAs on the SM. attention_tma_kernel (the default) does the same math with
// the tiles brought in by the Tensor Memory Accelerator into an mbarrier
// ring: no copy instructions and no CTA-wide barrier in the consumers' loop,
// so the warpgroups of a CTA drift apart and one's softmax overlaps
// another's MMAs. The forms the dispatch may take: see dispatch() below.
//
// What bounds it: the tile's instruction count, then latency, not memory.
// Hence KvLoader, the precomputed descriptors and F_ONES / F_LAZY, which
// take the copies' address arithmetic and per-score work out of the loop;
// of what remains, the exp2 of every score (MUFU) and the wgmma waits are
// the largest parts.
//
// Shared-memory tile layout (K and V alike): row r (a key) = 128 bytes (64
// elements: dims 0..55, then 8 padding elements, set once by init_tiles and
// never written again), 128-byte swizzle: the 16-byte chunk c of row r is at
// byte r*128 + ((c ^ (r & 7)) * 16) of a 1024-byte aligned tile. That is the
// canonical SWIZZLE_128B layout for both operands:
//   K as B, K-major: rows = N (keys), 8-row groups SBO = 1024 B apart; the
//     k16 step kk starts 32*kk bytes into the row (the swizzle is applied by
//     the hardware to the computed address, so the start address may move
//     inside the 1024-byte atom; the atom itself is 1024-aligned, base offset
//     field 0). LBO is not used by swizzled K-major layouts (set to 16 B).
//   V as B, MN-major (trans-b): 128-byte lines = k (keys), the 56 used
//     N columns sit inside one 64-element swizzle atom; the k16 step kk starts
//     at 2048*kk bytes. The two 8-key halves of a k16 step are 1024 B apart;
//     both LBO and SBO are set to 1024 B (with N <= 64 there is no second
//     atom along N, so whichever of the two the hardware uses for the
//     k direction, 1024 is right).
// Descriptor: make_desc in wgmma.cuh.
//
// Register fragments (PTX ISA, wgmma m64nNk16; warp w of the warpgroup owns
// rows 16w..16w+15; g = lane / 4, t = lane % 4):
//   D (f32), N/2 registers: d[4i + j] = (row g + 8*(j >= 2), col 8i + 2t + (j & 1))
//   A (16-bit), 4 registers: a0 (g, k 2t..2t+1) a1 (g+8, 2t..) a2 (g, 2t+8..) a3 (g+8, 2t+8..)
// i.e. per warp exactly mma.m16n8k16's layouts, so the S accumulator of keys
// 16kk..16kk+15 (d[8kk .. 8kk+7]) packs pairwise into the A fragment of P
// for the k16 step kk of O += P V.
//
// Synchronization (cp.async kernels): cp.async.wait_group +
// fence.proxy.async.shared::cta (the generic-proxy writes become visible to
// wgmma's async proxy) + __syncthreads before a tile is read; wgmma.fence
// before each batch (its accumulator / A registers were written by ordinary
// instructions); commit_group + wait_group 0 after; a tile's stage is
// refilled only after the next __syncthreads, by which time every warpgroup
// has waited for its wgmmas. The TMA kernel: see attention_tma_kernel.
#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cuda.h> // CUtensorMap and its enums (types only: no libcuda link)
#include <cuda_runtime.h>
#include <math.h>
#include <stdint.h>
#include <stdio.h>

#include <type_traits>

#include "cuda/kernels.h"
#include "cuda/launch.cuh"
#include "cuda/ptx.cuh"
#include "cuda/wgmma.cuh"

namespace {

constexpr int HD = 56;         // head_dim
constexpr int ROWB = 128;      // bytes per smem row (64 16-bit elements)
constexpr int CHUNKS = HD / 8; // 16-byte chunks per row that hold data (7)

template <typename T> using Ty = Pair16<T>; // (wgmma wrappers: wgmma.cuh)

// ------------------------------------------------------------------ the kernel

// The Q fragment word of columns col, col+1 of a query row, max-pooled over
// the qs source rows src + s * sstride.
template <typename T>
__device__ __forceinline__ uint32_t q_word(const T *src, int64_t sstride, int qs, int col) {
    uint32_t v = *reinterpret_cast<const uint32_t *>(src + col);
    for (int s = 1; s < qs; s++) v = Ty<T>::max2(v, *reinterpret_cast<const uint32_t *>(src + s * sstride + col));
    return v;
}

// Softmax features: F_PCHECK (with F_LAZY and F_ONES): a tile's
// P is first taken from the running max as it stands, without the row max
// (64 FMNMX a thread and 128-key tile, their shuffles and the lazy test);
// the packed P's pairwise max (32 HMNMX2) tells whether any p exceeds 2^8,
// i.e. whether some row's max would have moved under F_LAZY; if one did
// anywhere in the warpgroup (bar.red.or: the warpgroup's wgmmas must agree),
// S is recomputed (the K tile is still in its stage) and the tile takes the
// max path. Tile 0 always takes the max path (m = -inf). The rows' m and O
// are then exactly those of F_LAZY whenever the check passes, so the
// results match it up to which tiles set m. F_ONES: V's padding column 56 holds 1.0, so
// the P V MMA (n64) also sums P per row into O's column 56 (no per-score
// FADD; the sum is of the 16-bit P that the numerator uses); F_LAZY: the
// running max m moves only when a tile's max exceeds it by more than 8 (log2
// units), so O is rescaled on few tiles; p <= 2^8 meanwhile, well inside
// fp16 / bf16 and fp32. (exp2 of f16x2 pairs would save no MUFU work:
// ptxas splits ex2.approx.f16x2 into two MUFU.EX2.F16.)
enum { F_ONES = 1, F_LAZY = 4, F_PCHECK = 8 };
constexpr float kLazyThreshold = 8.f;

template <typename T> __device__ __forceinline__ uint32_t one_bits();
template <> __device__ __forceinline__ uint32_t one_bits<__half>() { return 0x3C00u; }
template <> __device__ __forceinline__ uint32_t one_bits<__nv_bfloat16>() { return 0x3F80u; }

// One tile's online softmax for rows g (r = 0) and g + 8 (r = 1) of S (f32
// wgmma fragments, see above), log2 domain: updates m (and l unless F_ONES),
// gives the rows' O corrections and P as the A fragments of the P V MMA
// (keys 16kk.. = S columns of n8 blocks 2kk, 2kk+1).
template <typename T, int KN, int FEAT>
__device__ __forceinline__ void softmax_tile(float (&s)[KN / 2], float (&m)[2], float (&l)[2], float c, float (&corr)[2],
                                             uint32_t (&p)[KN / 16][4]) {
#pragma unroll
    for (int r = 0; r < 2; r++) {
        float mx = s[2 * r];
#pragma unroll
        for (int i = 0; i < KN / 8; i++) mx = fmaxf(mx, fmaxf(s[4 * i + 2 * r], s[4 * i + 2 * r + 1]));
        mx = fmaxf(mx, __shfl_xor_sync(0xffffffffu, mx, 1));
        mx = fmaxf(mx, __shfl_xor_sync(0xffffffffu, mx, 2));
        const float cand = mx * c;
        float mnew;
        if constexpr ((FEAT & F_LAZY) != 0) mnew = cand > m[r] + kLazyThreshold ? cand : m[r];
        else mnew = fmaxf(m[r], cand);
        corr[r] = fast_exp2(m[r] - mnew);
        m[r] = mnew;
        {
            float sum = 0.f;
#pragma unroll
            for (int i = 0; i < KN / 8; i++) {
                const float p0 = fast_exp2(fmaf(s[4 * i + 2 * r], c, -mnew));
                const float p1 = fast_exp2(fmaf(s[4 * i + 2 * r + 1], c, -mnew));
                s[4 * i + 2 * r] = p0, s[4 * i + 2 * r + 1] = p1;
                sum += p0 + p1;
            }
            if constexpr ((FEAT & F_ONES) == 0) l[r] = l[r] * corr[r] + sum;
        }
    }
#pragma unroll
    for (int kk = 0; kk < KN / 16; kk++) {
        p[kk][0] = Ty<T>::pack(s[8 * kk + 0], s[8 * kk + 1]);
        p[kk][1] = Ty<T>::pack(s[8 * kk + 2], s[8 * kk + 3]);
        p[kk][2] = Ty<T>::pack(s[8 * kk + 4], s[8 * kk + 5]);
        p[kk][3] = Ty<T>::pack(s[8 * kk + 6], s[8 * kk + 7]);
    }
}

// O *= the rows' corrections (F_LAZY: only when some row of the warp moved
// its max; otherwise the corrections are all exactly 1).
template <int FEAT, int N> __device__ __forceinline__ void rescale_o(float (&o)[N], const float (&corr)[2]) {
    if constexpr ((FEAT & F_LAZY) != 0)
        if (!__any_sync(0xffffffffu, corr[0] != 1.f || corr[1] != 1.f)) return;
#pragma unroll
    for (int i = 0; i < N / 4; i++)
#pragma unroll
        for (int r = 0; r < 2; r++) o[4 * i + 2 * r] *= corr[r], o[4 * i + 2 * r + 1] *= corr[r];
}

// Scores of keys at or past the end (rem keys left in this tile, fewer than
// KN) set to -inf; the key of s[i] is 8 (i / 4) + 2t + (i % 2).
template <int KN> __device__ __forceinline__ void mask_tail(float (&s)[KN / 2], int64_t rem, int t) {
    if (rem >= KN) return;
#pragma unroll
    for (int i = 0; i < KN / 2; i++)
        if ((i >> 2) * 8 + 2 * t + (i & 1) >= rem) s[i] = -INFINITY;
}

// Descriptor of the byte `off` bytes after the one `d` describes (the start
// address field is bits 0-13, in 16-byte units; shared addresses stay below
// 2^18 bytes, so the add never carries out of it).
__device__ __forceinline__ uint64_t desc_add(uint64_t d, uint32_t off) { return d + (off >> 4); }

// Tile `it`'s scores to P: S = Q K^T over the 64 (padded) head dims (K-major
// B at descriptor kd, waited for), keys past N masked, the online softmax
// (softmax_tile) and O rescaled by the rows' corrections.
// Q is the A fragments in registers (q[kk]) or, as a uint64_t, the
// descriptor of the warpgroup's 64 x 64 Q tile in shared memory (K-major,
// 128-byte swizzle: K's tile layout).
template <typename T, int KN>
__device__ __forceinline__ void qk_mma(float (&s)[KN / 2], const uint32_t (&q)[4][4], uint64_t kd, int kk) {
    WgRS<T, KN>::template mma<0>(s, q[kk], desc_add(kd, kk * 32), kk > 0);
}
template <typename T, int KN>
__device__ __forceinline__ void qk_mma(float (&s)[KN / 2], uint64_t qd, uint64_t kd, int kk) {
    WgSS<T, KN>::mma(s, desc_add(qd, kk * 32), desc_add(kd, kk * 32), kk > 0);
}

// Whether `bad` is nonzero in any thread of this thread's warpgroup (named
// barrier 1 + warpgroup, 128 threads: every thread of the warpgroup calls it).
__device__ __forceinline__ bool wg_any(uint32_t bad) {
    uint32_t any;
    asm volatile("{\n .reg .pred pi, po;\n setp.ne.u32 pi, %1, 0;\n bar.red.or.pred po, %2, 128, pi;\n"
                 " selp.u32 %0, 1, 0, po;\n}\n"
                 : "=r"(any)
                 : "r"(bad), "r"(1 + (int)(threadIdx.x >> 7))
                 : "memory");
    return any != 0;
}

// P from the running max as it stands (no row max): false for the whole
// warpgroup when some p of it exceeds 2^8 (the lazy threshold), i.e. when
// some row's max would have moved; s is consumed either way.
template <typename T> __device__ __forceinline__ uint32_t p_limit2();
template <> __device__ __forceinline__ uint32_t p_limit2<__half>() { return 0x5C005C00u; }         // 256, 256
template <> __device__ __forceinline__ uint32_t p_limit2<__nv_bfloat16>() { return 0x43804380u; } // 256, 256
template <typename T, int KN>
__device__ __forceinline__ bool softmax_try(float (&s)[KN / 2], const float (&m)[2], float c, uint32_t (&p)[KN / 16][4]) {
    uint32_t mx = 0;
#pragma unroll
    for (int kk = 0; kk < KN / 16; kk++)
#pragma unroll
        for (int j = 0; j < 4; j++) {
            const float mr = m[j & 1];
            p[kk][j] = Ty<T>::pack(fast_exp2(fmaf(s[8 * kk + 2 * j], c, -mr)), fast_exp2(fmaf(s[8 * kk + 2 * j + 1], c, -mr)));
            mx = (kk | j) ? Ty<T>::max2(mx, p[kk][j]) : p[kk][j];
        }
    return !wg_any(__vcmpgtu2(mx, p_limit2<T>()));
}

template <typename T, int KN, int FEAT, int NO, typename QA>
__device__ __forceinline__ void qk_softmax(const QA &q, uint64_t kd, int64_t N, int it, int t, float (&m)[2],
                                           float (&l)[2], float c, float (&o)[NO], uint32_t (&p)[KN / 16][4]) {
    float s[KN / 2];
    auto scores = [&]() { // S = Q K^T of the tile, keys past N masked
        wgmma_fence();
#pragma unroll
        for (int kk = 0; kk < 4; kk++) qk_mma<T, KN>(s, q, kd, kk);
        wgmma_commit();
        wgmma_wait<0>();
        reg_fence(s);
        mask_tail<KN>(s, N - (int64_t)it * KN, t);
    };
    scores();
    if constexpr ((FEAT & F_PCHECK) != 0) {
        static_assert((FEAT & (F_LAZY | F_ONES)) == (F_LAZY | F_ONES), "the check stands in for the lazy max");
        if (it > 0) {
            if (softmax_try<T, KN>(s, m, c, p)) return; // no row's max moved: O as it is
            scores();                                   // S again (the try consumed it), for the max path
        }
    }
    float corr[2];
    softmax_tile<T, KN, FEAT>(s, m, l, c, corr, p);
    rescale_o<FEAT>(o, corr);
}

// Normalize rows g and g+8 and store their 56 columns. The row sums are l
// (summed over the quad), or with F_ONES O's column 56 (lane t = 0 of the
// quad holds it: o[28] row g, o[30] row g + 8).
template <typename T, int FEAT, int N>
__device__ __forceinline__ void store_rows(const float (&o)[N], const float (&l)[2], T *out, int64_t rlo, int64_t rhi,
                                           int64_t Nq, int D, int h, int lane) {
    const int t = lane & 3;
#pragma unroll
    for (int r = 0; r < 2; r++) {
        float L;
        if constexpr ((FEAT & F_ONES) != 0) {
            L = __shfl_sync(0xffffffffu, o[28 + 2 * r], lane & ~3);
        } else {
            L = l[r];
            L += __shfl_xor_sync(0xffffffffu, L, 1);
            L += __shfl_xor_sync(0xffffffffu, L, 2);
        }
        const float inv = 1.f / L;
        const int64_t row = r ? rhi : rlo;
        if (row < Nq) {
            T *dst = out + row * D + (int64_t)h * HD + 2 * t;
#pragma unroll
            for (int i = 0; i < HD / 8; i++)
                *reinterpret_cast<uint32_t *>(dst + 8 * i) = Ty<T>::pack(o[4 * i + 2 * r] * inv, o[4 * i + 2 * r + 1] * inv);
        }
    }
}

// Every K and V row of ST stages zeroed, or with F_ONES the V rows'
// element 56 (the padding chunk, logical chunk 7) = 1.0. The padding chunk
// is never written again; the rest is zero until a tile lands there.
template <typename T, int KN, int ST, int FEAT>
__device__ __forceinline__ void init_tiles(uint32_t sbase, int tid, int nthreads) {
    for (int i = tid; i < ST * 2 * KN * 8; i += nthreads) {
        const int r = i >> 3, c = i & 7; // row, physical chunk
        const bool one = (FEAT & F_ONES) && ((r / KN) & 1) && c == (7 ^ (r & 7));
        asm volatile("st.shared.v4.u32 [%0], {%1, %2, %2, %2};\n" ::"r"(sbase + (uint32_t)(r * ROWB + c * 16)),
                     "r"(one ? one_bits<T>() : 0u), "r"(0u)
                     : "memory");
    }
}

// The K and V tile loads of one CTA (cp.async, 16-byte chunks). The chunk
// assignment is fixed for the kernel: thread tid copies chunks tid,
// tid + NT, ... of a tile's KN * 7, whose global offsets (inside a tile) and
// swizzled shared offsets are worked out once, so a tile costs each thread a
// pointer add, a bounds test and two cp.async per chunk.
template <typename T, int KN, int NT> struct KvLoader {
    static constexpr int kChunks = KN * CHUNKS, kPer = (kChunks + NT - 1) / NT;
    const T *base; // this head's K of row 0
    int64_t tile_stride;
    int goff[kPer];      // elements from the tile's first K
    uint32_t soff[kPer]; // bytes from the tile's first byte
    int row[kPer];       // key inside the tile; KN: no chunk for this thread
    __device__ __forceinline__ KvLoader(const T *kbase, int64_t ld, int tid) : base(kbase), tile_stride(KN * ld) {
#pragma unroll
        for (int j = 0; j < kPer; j++) {
            const int idx = tid + j * NT, r = idx / CHUNKS, cc = idx - r * CHUNKS;
            row[j] = idx < kChunks ? r : KN;
            goff[j] = (int)(r * ld) + cc * 8;
            soff[j] = (uint32_t)(r * ROWB + ((cc ^ (r & 7)) << 4));
        }
    }
    // K of tile `tile` to kdst, V (D elements further) to kdst + vbytes;
    // keys past N are zero-filled.
    __device__ __forceinline__ void load(int64_t tile, int64_t N, int D, uint32_t kdst, uint32_t vbytes) const {
        const T *tb = base + tile * tile_stride;
        const int64_t rem = N - tile * KN;
#pragma unroll
        for (int j = 0; j < kPer; j++) {
            if (row[j] < KN) {
                const bool ok = row[j] < rem;
                const T *src = ok ? tb + goff[j] : base;
                cp_async16(kdst + soff[j], src, ok);
                cp_async16(kdst + vbytes + soff[j], src + D, ok);
            }
        }
    }
};

// f(integral_constant<int, 0>), ..., f(integral_constant<int, N - 1>), in order.
template <int I, int N, typename F> __device__ __forceinline__ void unroll_from(F &&f) {
    if constexpr (I < N) {
        f(std::integral_constant<int, I>{});
        unroll_from<I + 1, N>(f);
    }
}
template <int N, typename F> __device__ __forceinline__ void unroll(F &&f) { unroll_from<0, N>(f); }

template <int NWG, int KN, int ST> struct Cfg {
    static constexpr int kThreads = 128 * NWG;
    static constexpr int kRows = 64 * NWG; // query rows per CTA
    static constexpr int kTileBytes = KN * ROWB;
    static constexpr int kStageBytes = 2 * kTileBytes; // K tile, then V tile
    static constexpr int kSmem = ST * kStageBytes + 1024; // + slack to align to 1024
    static_assert(KN % 16 == 0 && KN >= 16 && KN <= 256 && ST >= 2, "tile shape");
};

// The Q fragments (A operand) of rows rlo and rhi = rlo + 8 of head h,
// max-pooled over qs; head dims 56..63 are zero.
template <typename T>
__device__ __forceinline__ void load_q(uint32_t (&q)[4][4], const T *qkv, int h, int64_t rlo, int64_t rhi, int64_t Nq,
                                       int64_t ld, int qs, int t) {
    const T *qb = qkv + (int64_t)h * HD;
    const T *lo = qb + rlo * ld, *hi = qb + rhi * ld;
    const bool lo_ok = rlo < Nq, hi_ok = rhi < Nq;
    const int64_t ss = Nq * ld; // pooled q: source rows s*Nq + row
#pragma unroll
    for (int kk = 0; kk < 4; kk++) {
        const int c0 = kk * 16 + 2 * t;
        q[kk][0] = lo_ok ? q_word(lo, ss, qs, c0) : 0u;
        q[kk][1] = hi_ok ? q_word(hi, ss, qs, c0) : 0u;
        q[kk][2] = lo_ok && kk < 3 ? q_word(lo, ss, qs, c0 + 8) : 0u;
        q[kk][3] = hi_ok && kk < 3 ? q_word(hi, ss, qs, c0 + 8) : 0u;
    }
}

// The start of the cp.async kernel: every stage's tiles zeroed (init_tiles),
// then the first AHEAD tiles of head h in flight, one cp.async group each;
// gives the CTA's loader (ld: the qkv row stride, 3 D).
template <typename T, int KN, int ST, int FEAT, int NT, int AHEAD>
__device__ __forceinline__ KvLoader<T, KN, NT> start_tiles(const T *qkv, int64_t N, int D, int64_t ld, int h,
                                                          uint32_t sbase, int tid) {
    constexpr int kTileBytes = KN * ROWB, kStageBytes = 2 * kTileBytes;
    init_tiles<T, KN, ST, FEAT>(sbase, tid, NT);
    __syncthreads(); // the zeros land before any tile copy to the same bytes
    const KvLoader<T, KN, NT> ldr(qkv + D + (int64_t)h * HD, ld, tid);
    const int ntiles = (int)((N + KN - 1) / KN);
#pragma unroll
    for (int s = 0; s < AHEAD; s++) {
        if (s < ntiles) ldr.load(s, N, D, sbase + (uint32_t)(s * kStageBytes), kTileBytes);
        cp_async_commit();
    }
    return ldr;
}

template <typename T, int NWG, int KN, int ST, int MINB, int PVN, int FEAT>
__global__ void __launch_bounds__(128 * NWG, MINB)
    attention_wgmma_kernel(const T *__restrict__ qkv, int64_t N, int D, int qs, float c, T *__restrict__ out) {
    ck_pdl_enter();
    using C = Cfg<NWG, KN, ST>;
    constexpr int kThreads = C::kThreads, kTileBytes = C::kTileBytes, kStageBytes = C::kStageBytes;
    static_assert(PVN == 56 || PVN == 64, "O = P V is n56, or n64 over the padding");
    static_assert(!(FEAT & F_ONES) || PVN == 64, "the row sums come from V's padding column 56");
    extern __shared__ uint8_t smem_raw[];
    const uint32_t sbase = (smem_addr(smem_raw) + 1023u) & ~1023u;

    const int tid = threadIdx.x, wg = tid >> 7, warp = (tid >> 5) & 3, lane = tid & 31;
    const int g = lane >> 2, t = lane & 3;
    const int h = blockIdx.y;
    const int64_t Nq = N / qs, ld = 3 * (int64_t)D;

    const KvLoader<T, KN, kThreads> ldr = start_tiles<T, KN, ST, FEAT, kThreads, ST - 1>(qkv, N, D, ld, h, sbase, tid);
    const int ntiles = (int)((N + KN - 1) / KN);

    uint32_t q[4][4];
    const int64_t rlo = (int64_t)blockIdx.x * C::kRows + wg * 64 + warp * 16 + g, rhi = rlo + 8;
    load_q(q, qkv, h, rlo, rhi, Nq, ld, qs, t);

    float o[PVN / 2];
#pragma unroll
    for (int i = 0; i < PVN / 2; i++) o[i] = 0.f;
    float m[2] = {-INFINITY, -INFINITY}, l[2] = {0.f, 0.f};
    // descriptors of stage 0: K as K-major B, V as MN-major B
    const uint64_t kdesc0 = make_desc(sbase, 16, 1024), vdesc0 = make_desc(sbase + kTileBytes, 1024, 1024);

    // One tile; SI = it % ST is a compile-time constant (the loop below is
    // unrolled ST times), so every descriptor and stage address is a
    // loop-invariant constant instead of per-tile uniform arithmetic.
    auto tile = [&](auto si_c, int it) {
        constexpr int SI = decltype(si_c)::value;
        cp_async_wait<ST - 2>(); // this thread's copies of tile `it` landed
        fence_proxy_async();     // ... and are visible to the async proxy
        __syncthreads();         // everyone's; and every warpgroup is done with tile it-1
        {
            const int nt = it + ST - 1;
            if (nt < ntiles) ldr.load(nt, N, D, sbase + (uint32_t)(((SI + ST - 1) % ST) * kStageBytes), kTileBytes);
            cp_async_commit();
        }
        constexpr uint32_t so = (uint32_t)(SI * kStageBytes);

        uint32_t p[KN / 16][4];
        qk_softmax<T, KN, FEAT>(q, desc_add(kdesc0, so), N, it, t, m, l, c, o, p);

        // O += P V
        wgmma_fence();
        reg_fence(o);
#pragma unroll
        for (int kk = 0; kk < KN / 16; kk++)
            WgRS<T, PVN>::template mma<1>(o, p[kk], desc_add(vdesc0, so + kk * 16 * ROWB), 1);
        wgmma_commit();
        wgmma_wait<0>();
        reg_fence(o);
        reg_fence(p);
    };
    for (int it = 0; it < ntiles; it += ST)
        unroll<ST>([&](auto si_c) {
            if (it + decltype(si_c)::value < ntiles) tile(si_c, it + decltype(si_c)::value);
        });
    store_rows<T, FEAT>(o, l, out, rlo, rhi, Nq, D, h, lane);
}

// The same math with the K / V tiles brought in by the Tensor Memory
// Accelerator. Two TMA box loads a tile (K and V of head h, KN keys x 64
// elements; the map's dims are [56 head elements, 3 heads slots, N keys], so
// elements 56..63 and keys past N arrive as zeros) into a ring of ST
// stages, each with a `full` mbarrier (one arrive announcing the tiles'
// bytes + the bytes) and an `empty` one (an arrival from every consumer warp
// once its P V wgmma, the last reader of the stage, is complete). Who issues
// the loads: thread 0, at the start of tile it, for tile it + ST - 2 into
// the stage of tile it - 2 (so a warpgroup may run up to a tile ahead of the
// slowest before thread 0 waits). Neither the loads nor a CTA-wide barrier sit in the consumers' loop.
//
// Row sums: the zero padding leaves no 1.0 in V's column 56 (F_ONES), so P
// is multiplied by a constant all-ones B tile as well (wgmma m64n8k16: 8
// rows = n, 128 bytes of k each; every element 1.0, so the swizzle does not
// matter and its k16 steps reuse the one 1 KB atom), into o[28..31]; P V
// itself is n56. o[28] / o[30] are rows g / g + 8 sums, where store_rows
// with F_ONES looks for them.
// OPT: T_QSMEM (Q as a shared-memory operand: each warpgroup's 64 rows x 64
// head dims staged once, in K's tile layout, so the S wgmma is SS and the 16
// Q registers are free for 128-key tiles) and T_PCHECK (softmax with
// F_PCHECK).
enum { T_QSMEM = 1, T_PCHECK = 2 };
template <typename T, int NWG, int KN, int ST, int MINB, int OPT>
__global__ void __launch_bounds__(128 * NWG, MINB)
    attention_tma_kernel(const __grid_constant__ CUtensorMap kv, int64_t N, int D, int heads, int qs, float c,
                         const T *__restrict__ qkv, T *__restrict__ out) {
    ck_pdl_enter();
    using C = Cfg<NWG, KN, ST>;
    static_assert(ST >= 3, "tiles are refilled two tiles behind");
    constexpr int kTileBytes = C::kTileBytes, kStageBytes = C::kStageBytes, kConsumerWarps = 4 * NWG;
    constexpr int FEAT = F_ONES | F_LAZY | ((OPT & T_PCHECK) ? F_PCHECK : 0);
    constexpr bool QSMEM = (OPT & T_QSMEM) != 0;
    extern __shared__ uint8_t smem_raw[];
    const uint32_t sbase = (smem_addr(smem_raw) + 1023u) & ~1023u;
    // stages | ones tile | Q tiles (T_QSMEM) | mbarriers: full[ST], then empty[ST]
    const uint32_t ones = sbase + ST * kStageBytes, qtiles = ones + 1024;
    const uint32_t bars = qtiles + (QSMEM ? NWG * 64 * ROWB : 0);

    const int tid = threadIdx.x, warp_id = tid >> 5, lane = tid & 31;
    const int h = blockIdx.y;
    const int ntiles = (int)((N + KN - 1) / KN);
    for (int i = tid; i < 1024 / 16; i += blockDim.x)
        asm volatile("st.shared.v4.u32 [%0], {%1, %1, %1, %1};\n" ::"r"(ones + 16u * i),
                     "r"(one_bits<T>() * 0x10001u)
                     : "memory");
    if (tid == 0) {
        for (int s = 0; s < ST; s++) mbar_init(bars + 8 * s, 1), mbar_init(bars + 8 * (ST + s), kConsumerWarps);
        mbar_init_fence();
    }
    fence_proxy_async(); // the ones tile, for wgmma
    __syncthreads();

    // tile `it` into its stage, once the stage's previous tile is released
    auto produce = [&](int it) {
        const int s = it % ST;
        if (it >= ST) mbar_wait(bars + 8 * (ST + s), ((it / ST) & 1) ^ 1);
        const uint32_t full = bars + 8 * s, dst = sbase + (uint32_t)(s * kStageBytes);
        mbar_arrive_tx(full, kStageBytes);
        tma_load_3d(dst, &kv, 0, heads + h, it * KN, full);
        tma_load_3d(dst + kTileBytes, &kv, 0, 2 * heads + h, it * KN, full);
    };
    constexpr int kAhead = ST - 2; // tiles issued before the first is consumed
    if (tid == 0)
        for (int it = 0; it < kAhead && it < ntiles; it++) produce(it);

    const int wg = tid >> 7, warp = warp_id & 3;
    const int g = lane >> 2, t = lane & 3;
    const int64_t Nq = N / qs, ld = 3 * (int64_t)D;
    const int64_t rlo = (int64_t)blockIdx.x * C::kRows + wg * 64 + warp * 16 + g, rhi = rlo + 8;
    using QArg = typename std::conditional<QSMEM, uint64_t, uint32_t[4][4]>::type;
    QArg q;
    if constexpr (QSMEM) {
        // this thread's A-fragment words (load_q's) to the swizzled tile:
        // word (row, col pair) at row * 128 + ((col / 8) ^ (row & 7)) * 16 + (col % 8) * 2
        const uint32_t qt = qtiles + (uint32_t)(wg * 64 * ROWB);
        uint32_t qr[4][4];
        load_q(qr, qkv, h, rlo, rhi, Nq, ld, qs, t);
#pragma unroll
        for (int kk = 0; kk < 4; kk++)
#pragma unroll
            for (int j = 0; j < 4; j++) {
                const int row = warp * 16 + g + 8 * (j & 1), col = kk * 16 + 2 * t + 8 * (j >> 1);
                const uint32_t a = qt + (uint32_t)(row * ROWB + (((col >> 3) ^ (row & 7)) << 4) + (col & 7) * 2);
                asm volatile("st.shared.u32 [%0], %1;\n" ::"r"(a), "r"(qr[kk][j]) : "memory");
            }
        fence_proxy_async(); // the Q tile, for wgmma
        asm volatile("bar.sync %0, 128;\n" ::"r"(1 + wg) : "memory"); // the warpgroup's four warps
        q = make_desc(qt, 16, 1024);
    } else {
        load_q(q, qkv, h, rlo, rhi, Nq, ld, qs, t);
    }

    float o[32]; // P V (n56) in o[0..27], the row sums (n8) in o[28..31]
#pragma unroll
    for (int i = 0; i < 32; i++) o[i] = 0.f;
    float(&pv)[28] = *reinterpret_cast<float(*)[28]>(o);
    float(&rs)[4] = *reinterpret_cast<float(*)[4]>(o + 28);
    float m[2] = {-INFINITY, -INFINITY}, l[2] = {0.f, 0.f};
    const uint64_t kdesc0 = make_desc(sbase, 16, 1024), vdesc0 = make_desc(sbase + kTileBytes, 1024, 1024);
    const uint64_t odesc = make_desc(ones, 16, 1024);

    // Tile `it` from stage SI (compile-time: the loop below is unrolled ST
    // times); parity: the phase of the stage's barriers this round.
    auto tile = [&](auto si_c, int it, uint32_t parity) {
        constexpr int SI = decltype(si_c)::value;
        constexpr uint32_t so = (uint32_t)(SI * kStageBytes);
        if (tid == 0 && it + kAhead < ntiles) produce(it + kAhead); // thread 0 refills the stage of tile it - 2
        mbar_wait(bars + 8 * SI, parity); // K and V of tile `it` landed

        uint32_t p[KN / 16][4];
        qk_softmax<T, KN, FEAT>(q, desc_add(kdesc0, so), N, it, t, m, l, c, o, p);

        // O += P V (n56), row sums += P 1 (n8)
        wgmma_fence();
        reg_fence(o);
#pragma unroll
        for (int kk = 0; kk < KN / 16; kk++) {
            WgRS<T, HD>::template mma<1>(pv, p[kk], desc_add(vdesc0, so + kk * 16 * ROWB), 1);
            WgRS<T, 8>::template mma<0>(rs, p[kk], desc_add(odesc, (kk & 3) * 32), 1);
        }
        wgmma_commit();
        wgmma_wait<0>();
        reg_fence(o);
        reg_fence(p);
        if (lane == 0) mbar_arrive(bars + 8 * (ST + SI)); // this warp is done with the stage
    };
    for (int it = 0; it < ntiles; it += ST)
        unroll<ST>([&](auto si_c) {
            constexpr int SI = decltype(si_c)::value;
            if (it + SI < ntiles) tile(si_c, it + SI, (uint32_t)((it / ST) & 1));
        });
    store_rows<T, FEAT>(o, l, out, rlo, rhi, Nq, D, h, lane);
}

// --------------------------------------------------------------- launchers

ckey_status fail(ckey_error *err, ckey_status st, const char *msg) {
    if (err) {
        snprintf(err->message, sizeof err->message, "%s", msg);
        err->status = st;
    }
    return st;
}

constexpr float kLog2e = 1.4426950408889634f;

template <typename T, int NWG, int KN, int ST, int MINB, int PVN, int FEAT>
cudaError_t launch(const void *qkv, int64_t N, int D, int heads, int qs, void *out, cudaStream_t st) {
    using C = Cfg<NWG, KN, ST>;
    auto kern = attention_wgmma_kernel<T, NWG, KN, ST, MINB, PVN, FEAT>;
    if (C::kSmem > 48 * 1024) {
        const cudaError_t e = cudaFuncSetAttribute(kern, cudaFuncAttributeMaxDynamicSharedMemorySize, C::kSmem);
        if (e != cudaSuccess) return e;
    }
    const int64_t Nq = N / qs;
    dim3 grid((unsigned)((Nq + C::kRows - 1) / C::kRows), (unsigned)heads);
    ck_launch(kern, grid, C::kThreads, C::kSmem, (cudaStream_t)st, (const T *)qkv, N, D, qs, kLog2e / sqrtf((float)HD),
              (T *)out);
    return cudaGetLastError();
}

// The K / V tensor map of attention_tma_kernel: dims (innermost first) 56
// elements of a head, 3 * heads head slots of a qkv row (q, k, v), N rows;
// box 64 x 1 x KN (elements 56..63 out of bounds: zeros), 128-byte swizzle.
// cuTensorMapEncodeTiled is a driver function: reached through the runtime's
// entry-point query (no link against libcuda).
template <typename T>
cudaError_t encode_kv_map(CUtensorMap *map, const void *qkv, int64_t N, int heads, int KN) {
    const cuuint64_t dims[3] = {HD, (cuuint64_t)3 * heads, (cuuint64_t)N};
    const cuuint64_t strides[2] = {HD * sizeof(T), (cuuint64_t)3 * heads * HD * sizeof(T)};
    const cuuint32_t box[3] = {64, 1, (cuuint32_t)KN};
    return encode_tmap<T>(map, 3, qkv, dims, strides, box);
}

template <typename T, int NWG, int KN, int ST, int MINB, int OPT>
cudaError_t launch_tma(const void *qkv, int64_t N, int D, int heads, int qs, void *out, cudaStream_t st) {
    using C = Cfg<NWG, KN, ST>;
    // + the ones tile, the Q tiles (T_QSMEM) and the mbarriers
    constexpr int kSmem = C::kSmem + 1024 + ((OPT & T_QSMEM) ? NWG * 64 * ROWB : 0) + 16 * ST;
    auto kern = attention_tma_kernel<T, NWG, KN, ST, MINB, OPT>;
    if (N > INT32_MAX - KN) return cudaErrorInvalidValue; // TMA coordinates are 32-bit
    alignas(64) CUtensorMap map;
    cudaError_t e = encode_kv_map<T>(&map, qkv, N, heads, KN);
    if (e != cudaSuccess) return e;
    if (kSmem > 48 * 1024) {
        e = cudaFuncSetAttribute(kern, cudaFuncAttributeMaxDynamicSharedMemorySize, kSmem);
        if (e != cudaSuccess) return e;
    }
    const int64_t Nq = N / qs;
    dim3 grid((unsigned)((Nq + C::kRows - 1) / C::kRows), (unsigned)heads);
    ck_launch(kern, grid, C::kThreads, kSmem, (cudaStream_t)st, map, N, D, heads, qs, kLog2e / sqrtf((float)HD),
              (const T *)qkv, (T *)out);
    return cudaGetLastError();
}

// The forms (ck_attn_wgmma_form; AUTO is ck_cuda_attention_wgmma's choice):
//   TMA_128: the TMA kernel, 4 warpgroups a CTA, 128-key tiles, 5 stages, Q
//            in shared memory, P checked against the running max first
//            (T_PCHECK). AUTO takes it when its CTAs (256 query rows each)
//            still give every SM one;
//   TMA_64:  the TMA kernel, 2 warpgroups x 2 CTAs an SM, 64-key tiles, 4
//            stages, Q in registers: AUTO's choice for smaller grids;
//   NO_TMA:  the cp.async kernel, 2 warpgroups x 2 CTAs an SM, 64-key tiles,
//            2 stages: AUTO's fallback where the driver has no tensor-map
//            encoder (cudaErrorNotSupported from either TMA form).
// Why (H200, N = 16384, 8 heads, ms fp16 / bf16): 128-key tiles need Q in
// shared memory (with Q in registers they spill 468 bytes) and then run at
// 1.067 / 1.020 with 5 stages (6 do not fit) against 1.128 / 1.132 for
// 64-key tiles with Q in registers; T_PCHECK takes stage 2's 16 launches of
// a frame (S = 2048, fp16) from about 1.01 to 0.945 ms.
template <typename T>
cudaError_t dispatch(ck_attn_wgmma_form form, const void *qkv, int64_t N, int D, int heads, int qs, void *out,
                     cudaStream_t st) {
    switch (form) {
    case CK_ATTN_WGMMA_TMA_128: return launch_tma<T, 4, 128, 5, 1, T_QSMEM | T_PCHECK>(qkv, N, D, heads, qs, out, st);
    case CK_ATTN_WGMMA_TMA_64: return launch_tma<T, 2, 64, 4, 2, 0>(qkv, N, D, heads, qs, out, st);
    case CK_ATTN_WGMMA_NO_TMA: return launch<T, 2, 64, 2, 2, 64, F_ONES | F_LAZY>(qkv, N, D, heads, qs, out, st);
    default: break;
    }
    int dev = 0, sms = 0;
    cudaError_t e = cudaGetDevice(&dev);
    if (e == cudaSuccess) e = cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, dev);
    if (e != cudaSuccess) return e;
    const int64_t ctas4 = (N / qs + 255) / 256 * heads;
    e = dispatch<T>(ctas4 >= sms ? CK_ATTN_WGMMA_TMA_128 : CK_ATTN_WGMMA_TMA_64, qkv, N, D, heads, qs, out, st);
    if (e == cudaErrorNotSupported) return dispatch<T>(CK_ATTN_WGMMA_NO_TMA, qkv, N, D, heads, qs, out, st);
    return e;
}

} // namespace

extern "C" int ck_cuda_wgmma_ok(void) {
    int dev = 0, major = 0, minor = 0;
    if (cudaGetDevice(&dev) != cudaSuccess || cudaDeviceGetAttribute(&major, cudaDevAttrComputeCapabilityMajor, dev) ||
        cudaDeviceGetAttribute(&minor, cudaDevAttrComputeCapabilityMinor, dev)) {
        cudaGetLastError(); // clear "no driver / no device"
        return 0;
    }
    return major == 9 && minor == 0;
}

extern "C" ckey_status ck_cuda_attention_wgmma_form(const void *qkv, int64_t N, int D, int heads, int qs, void *out,
                                                   ck_dtype dt, ck_attn_wgmma_form form, void *stream,
                                                   ckey_error *err) {
    char msg[160];
    if ((int)form < 0 || (int)form >= CK_ATTN_WGMMA_FORMS) {
        snprintf(msg, sizeof msg, "attention (wgmma): no form %d", (int)form);
        return fail(err, CKEY_ERR_INVALID_ARG, msg);
    }
    if (heads <= 0 || D <= 0 || D % heads || qs <= 0 || N < 0 || N % qs) {
        snprintf(msg, sizeof msg, "attention (wgmma): D %d, heads %d, N %lld, q stride %d do not fit", D, heads,
                 (long long)N, qs);
        return fail(err, CKEY_ERR_INVALID_ARG, msg);
    }
    if (D / heads != HD || (dt != CK_F16 && dt != CK_BF16)) {
        snprintf(msg, sizeof msg, "attention (wgmma): head_dim %d, dtype %d unsupported (56; f16, bf16)", D / heads,
                 (int)dt);
        return fail(err, CKEY_ERR_UNSUPPORTED, msg);
    }
    if (((uintptr_t)qkv & 15) || ((uintptr_t)out & 3))
        return fail(err, CKEY_ERR_INVALID_ARG, "attention (wgmma): qkv must be 16-byte aligned, out 4-byte");
    if (N == 0) return CKEY_OK;
    cudaStream_t st = (cudaStream_t)stream;
    const cudaError_t e = dt == CK_F16 ? dispatch<__half>(form, qkv, N, D, heads, qs, out, st)
                                       : dispatch<__nv_bfloat16>(form, qkv, N, D, heads, qs, out, st);
    if (e != cudaSuccess) {
        snprintf(msg, sizeof msg, "CUDA: attention (wgmma) launch: %s", cudaGetErrorString(e));
        return fail(err, CKEY_ERR_DEVICE, msg);
    }
    return CKEY_OK;
}

extern "C" ckey_status ck_cuda_attention_wgmma(const void *qkv, int64_t N, int D, int heads, int qs, void *out,
                                              ck_dtype dt, void *stream, ckey_error *err) {
    return ck_cuda_attention_wgmma_form(qkv, N, D, heads, qs, out, dt, CK_ATTN_WGMMA_AUTO, stream, err);
}
