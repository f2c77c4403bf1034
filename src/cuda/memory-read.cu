// Cutie's memory read on CUDA (backend/ops.h memory_read), fused. A CTA of
// 256 threads works on a tile of BQ = 64 query positions at a time
// (persistent CTAs, at most GRID_MAX of them, stride over the tiles): it
// writes the tile's queries once into shared memory as the rows of a GEMM's
// A, then streams the memory through shared memory in tiles of BN = 64
// positions. Both sides are extended to K = 2 CK so that one product gives
// the similarity:
//   query row  [2 qe qk, -qe]  (without selection [2 qk, -1])
//   memory row [mk, mk^2]
// S[q, n] = (A[q] . B[n] - sum_c qe qk^2) * ms[n] / sqrt(CK), computed
// one of two ways:
//   fp32:       on CUDA cores (no TF32), each thread a 4 x 4 block of the
//               64 x 64 tile in registers, A [K][64] and B [K][68] in shared
//               memory, the memory tile loaded in 32-byte pieces of rows;
//   fp16/bf16:  (the precision of the official code under autocast: the
//               similarity's matmuls in half precision, fp32 accumulation)
//               on tensor cores, mma.sync m16n8k16 with fp32 accumulation,
//               each warp a 16 x 32 block; A and B rows [64][K16 + 8] in the
//               16-bit type (K padded with zeros to a multiple of 16, and
//               the pitch 8 more so that a fragment's 8 rows fall in
//               distinct banks). The operands are the 16-bit roundings
//               autocast gives them: qk, qe, mk rounded; 2 qe qk and mk^2
//               formed from the rounded values in fp32 and rounded again;
//               sum_c qe qk^2 in fp32 from the rounded values.
// Either way the tile is stored to shared memory in fp32, and the rest is
// fp32 and the same code:
//   top-k:  one thread per query owns a bounded min-heap of top_k 64-bit
//           rank keys (the value's bits in an unsigned order above the
//           complemented position: one integer compare applies the op's tie
//           rule, so the kept set does not depend on the order positions are
//           offered in) and offers it the tile's values that reach its
//           current k-th best. The GEMM threads leave each row a 64-bit mask
//           of the columns holding such a value, so a heap's owner visits
//           only those (in column order): past the first tiles one or two a
//           row, most rows none. After the last tile the owner turns
//           its heap into (position, weight) pairs, the softmax from the
//           largest kept value, and the whole CTA gathers the value rows of
//           the pairs into out, in heap order.
//   dense:  (top_k <= 0 or >= N) the online-softmax recurrence per query
//           (thread per query), its running P . V kept in the tile's own rows
//           of out (no other CTA writes them), rescaled and then divided by
//           the sum at the end.
// Heaps live in shared memory up to SMEM_K kept pairs a query; above, in
// device scratch. With fewer query tiles than GRID_MAX (and heaps in shared
// memory) the memory is also split into ranges of at least MIN_SPLIT_TILES
// tiles, a CTA per (query tile, range), so that small reads fill the GPU;
// each CTA leaves its heaps in device scratch and merge_kernel merges a
// query's heaps (the same keys, so the same kept set) and reads out. Either
// way the scratch is GRID_MAX x BQ x top_k x 8 bytes of keys and GRID_MAX x
// BQ counts: top_k alone sets it.
// usage: each kept pair's weight is added to its position's 64-bit fixed-
// point count (2^-40 units) with an integer atomicAdd, which is exact and
// associative, so the result is deterministic (the same bits every run);
// then converted to fp32 usage [N]. It needs N x 8 bytes of scratch.
// Nothing N x HW is ever stored.
#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cuda_runtime.h>
#include <math.h>
#include <stdint.h>
#include <stdio.h>

#include <type_traits>

#include "cuda/kernels.h"
#include "cuda/launch.cuh"
extern "C" { // C headers without their own linkage blocks
#include "backend/ops.h"
#include "cuda/backend.h"
}

namespace {

constexpr int BQ = 64;        // query positions per tile
constexpr int BN = 64;        // memory positions per tile
constexpr int SP = BN + 1;    // row pitch of the similarity tile in shared memory
constexpr int BNP = BN + 4;   // row pitch of the fp32 memory tile B [K][BNP] (load_tile)
constexpr int THREADS = 256;  // fp32: 16 x 16 threads, each a 4 x 4 block of the tile; 16-bit: 8 warps of 16 x 32
constexpr int SMEM_K = 64;    // heaps in shared memory up to this many kept pairs
constexpr int GRID_MAX = 264; // CTAs at most (two per SM on a 132-SM H200); global heaps are sized for this
constexpr int MAX_CK = 128;   // the K = 2 CK rows of both tiles stay in shared memory
constexpr double USAGE_ONE = 1099511627776.0; // 2^40: usage's fixed-point unit is 2^-40
constexpr int64_t USAGE_MAX_HW = (int64_t)1 << 23; // HW * 2^40 fits 64 bits unsigned with room

typedef unsigned long long u64;

struct Args {
    const float *mk, *ms, *qk, *qe, *mv;
    float *out;
    u64 *heap_g;    // heaps in device scratch (nullptr: in shared memory)
    u64 *usage_acc; // [N] fixed-point usage (nullptr: none)
    u64 *part;      // splits > 1: each work item's heaps, [item][k][BQ] keys
    int *part_n;    // and their sizes, [item][BQ]
    int64_t N, HW;
    int64_t per;    // memory positions per split (a multiple of BN)
    int CK, C, k;   // k: pairs kept per query, 0: the dense path
    int splits;     // the memory is split into this many ranges, each a work item of its own
    float inv_sqrt_ck;
};

// The 16-bit product's K (2 CK padded with zeros to whole k16 steps) and its
// tiles' row pitch: 8 more, so that a row is an odd number of 16-byte units
// and the 8 rows a fragment reads start in distinct banks.
__host__ __device__ constexpr int k16_of(int CK) { return (2 * CK + 15) / 16 * 16; }
__host__ __device__ constexpr int kpitch_of(int CK) { return k16_of(CK) + 8; }

// Dynamic shared memory: [heaps (when in shared memory)] A, B (fp32: [K][BQ],
// [K][BNP] floats; 16-bit: [BQ][KP], [BN][KP] halves), S [BQ][SP],
// scale [BN], then BQ-sized per-query vectors.
constexpr int PER_QUERY_VECS = 8; // bsq, thr, m, l, corr (floats), hn (ints), mask (64-bit: two)
size_t smem_bytes(int CK, int k, int heap_in_smem, int half) {
    const size_t K = 2 * (size_t)CK;
    size_t b = heap_in_smem ? (size_t)BQ * k * sizeof(u64) : 0;
    b += half ? (size_t)(BQ + BN) * kpitch_of(CK) * 2 : (K * BQ + K * BNP) * sizeof(float);
    b += ((size_t)BQ * SP + BN + (size_t)PER_QUERY_VECS * BQ) * sizeof(float);
    return b;
}

int heap_in_smem(int k) { return k <= SMEM_K; }

size_t al256(size_t n) { return (n + 255) / 256 * 256; }

// Device scratch of a read that keeps k a query: GRID_MAX x BQ x k keys (the
// heaps above SMEM_K, else the split items' heaps) and GRID_MAX x BQ sizes.
size_t keys_bytes(int k) { return k > 0 ? al256((size_t)GRID_MAX * BQ * k * sizeof(u64)) : 0; }
size_t counts_bytes(int k) { return k > 0 ? al256((size_t)GRID_MAX * BQ * sizeof(int)) : 0; }

constexpr int MIN_SPLIT_TILES = 8; // memory tiles a split takes at least

// The op's tie rule as one integer order: larger ranks higher.
__device__ __forceinline__ u64 rank_key(float v, int n) {
    v += 0.0f; // -0 -> +0, so that they tie as the floats do
    unsigned u = __float_as_uint(v);
    u = (u & 0x80000000u) ? ~u : (u | 0x80000000u);
    return ((u64)u << 32) | (unsigned)~(unsigned)n;
}

__device__ __forceinline__ float key_value(u64 key) {
    unsigned u = (unsigned)(key >> 32);
    u = (u & 0x80000000u) ? (u & 0x7FFFFFFFu) : ~u;
    return __uint_as_float(u);
}

__device__ __forceinline__ int key_position(u64 key) { return (int)~(unsigned)key; }

// Offers key x to the min-heap h of *hn (<= k) keys, element j at h[j * BQ]
// (a query's heap is a column of [k][BQ]: the owners of a warp touch
// neighbouring words at equal depths).
__device__ void heap_offer(u64 *h, int *hn, int k, u64 x) {
    int i = *hn;
    if (i < k) { // not full: sift up
        while (i > 0 && h[(size_t)((i - 1) / 2) * BQ] > x) {
            h[(size_t)i * BQ] = h[(size_t)((i - 1) / 2) * BQ];
            i = (i - 1) / 2;
        }
        h[(size_t)i * BQ] = x;
        *hn += 1;
        return;
    }
    if (x <= h[0]) return;
    for (i = 0;;) { // replace the root: sift down
        int c = 2 * i + 1;
        if (c >= k) break;
        if (c + 1 < k && h[(size_t)(c + 1) * BQ] < h[(size_t)c * BQ]) c++;
        if (h[(size_t)c * BQ] >= x) break;
        h[(size_t)i * BQ] = h[(size_t)c * BQ];
        i = c;
    }
    h[(size_t)i * BQ] = x;
}

// The fp32 kernel's load: the thread's part of memory tile n0 (zero from
// n_hi on) into pf, in pieces of 8 channels of a position (32 bytes): thread
// tid holds channel 8 (r / 2) + tid % 8 of position tid / 8 + 32 (r % 2)
// (PF = 2 ceil(CK / 8)). A warp's load is four whole 32-byte pieces of rows,
// and its stores to B [K][BNP] (pitch BNP = BN + 4: bank 4 (lane % 8) +
// lane / 8 plus a constant) conflict-free. The scale ms[n] / sqrt(CK)
// (threads < BN) into *scl.
__device__ __forceinline__ int tile_n(int tid, int r) { return tid / 8 + 32 * (r % 2); }
__device__ __forceinline__ int tile_c(int tid, int r) { return 8 * (r / 2) + tid % 8; }

template <int PF>
__device__ __forceinline__ void load_tile(const Args &a, int64_t n0, int64_t n_hi, int tid, float pf[PF],
                                          float *scl) {
#pragma unroll
    for (int r = 0; r < PF; r++) {
        const int n = tile_n(tid, r), c = tile_c(tid, r);
        pf[r] = c < a.CK && n0 + n < n_hi ? a.mk[(n0 + n) * a.CK + c] : 0.0f;
    }
    if (tid < BN) *scl = n0 + tid < n_hi ? (a.ms ? a.ms[n0 + tid] : 1.0f) * a.inv_sqrt_ck : 0.0f;
}

// The 16-bit kernel's load: the thread's part of memory tile n0 (zero from
// n_hi on) into pf, element e = tid + r * THREADS of the tile's BN x CK
// floats, which are contiguous in mk (coalesced); and the scale as load_tile.
template <int PF>
__device__ __forceinline__ void load_rows(const Args &a, int64_t n0, int64_t n_hi, int tid, float pf[PF],
                                          float *scl) {
    const int64_t o = n0 * a.CK, end = n_hi * a.CK, tile = (int64_t)BN * a.CK;
#pragma unroll
    for (int r = 0; r < PF; r++) {
        const int64_t e = tid + (int64_t)r * THREADS;
        pf[r] = e < tile && o + e < end ? a.mk[o + e] : 0.0f;
    }
    if (tid < BN) *scl = n0 + tid < n_hi ? (a.ms ? a.ms[n0 + tid] : 1.0f) * a.inv_sqrt_ck : 0.0f;
}

// load_rows four floats at a time (CK a multiple of 4, mk 16-byte aligned):
// quad e = tid + r * THREADS of the tile into pf [4 r .. 4 r + 3].
template <int PF>
__device__ __forceinline__ void load_rows4(const Args &a, int64_t n0, int64_t n_hi, int tid, float pf[PF],
                                           float *scl) {
    const int64_t o = n0 * a.CK, end = n_hi * a.CK, tile = (int64_t)BN * a.CK;
#pragma unroll
    for (int r = 0; r < PF / 4; r++) {
        const int64_t e = 4 * (tid + (int64_t)r * THREADS);
        float4 v = make_float4(0.0f, 0.0f, 0.0f, 0.0f);
        if (e < tile && o + e < end) v = *(const float4 *)(const void *)(a.mk + o + e);
        pf[4 * r] = v.x, pf[4 * r + 1] = v.y, pf[4 * r + 2] = v.z, pf[4 * r + 3] = v.w;
    }
    if (tid < BN) *scl = n0 + tid < n_hi ? (a.ms ? a.ms[n0 + tid] : 1.0f) * a.inv_sqrt_ck : 0.0f;
}

// The readout of the tile's queries from their heaps (hn_s: the sizes):
// each owner turns its heap into (position, weight) pairs, the softmax from
// the largest kept value, adding the weights to usage; then the CTA gathers
// out [q, c] = sum_j w_j mv [pos_j, c] in heap order, coalesced along C.
__device__ void readout(const Args &a, u64 *heap, const int *hn_s, int64_t q0, int nq, int tid) {
    const int C = a.C;
    if (tid < nq) {
        u64 *h = heap + tid;
        const int hn = hn_s[tid];
        float mx = -INFINITY, sum = 0.0f;
        for (int j = 0; j < hn; j++) mx = fmaxf(mx, key_value(h[(size_t)j * BQ]));
        for (int j = 0; j < hn; j++) sum += expf(key_value(h[(size_t)j * BQ]) - mx);
        const float inv = 1.0f / sum;
        for (int j = 0; j < hn; j++) {
            const u64 key = h[(size_t)j * BQ];
            const int pos = key_position(key);
            const float w = expf(key_value(key) - mx) * inv;
            h[(size_t)j * BQ] = (u64)__float_as_uint(w) << 32 | (unsigned)pos;
            if (a.usage_acc) atomicAdd(a.usage_acc + pos, __double2ull_rn((double)w * USAGE_ONE));
        }
    }
    __syncthreads();
    for (int i = tid; i < nq * C; i += THREADS) {
        const int q = i / C, c = i % C, hn = hn_s[q];
        const u64 *h = heap + q;
        float s = 0.0f;
        for (int j = 0; j < hn; j++) {
            const u64 pw = h[(size_t)j * BQ];
            s = fmaf(__uint_as_float((unsigned)(pw >> 32)), a.mv[(int64_t)(unsigned)pw * C + c], s);
        }
        a.out[(q0 + q) * C + c] = s;
    }
}

// The 16-bit types' conversions and mma (m16n8k16, fp32 accumulation).
// Fragments (PTX ISA, g = lane / 4, t = lane % 4): A 16 x 16 row-major,
// a0 (g, 2t..2t+1) a1 (g+8, 2t..) a2 (g, 2t+8..) a3 (g+8, 2t+8..); B 16 x 8
// column-major, b0 (k 2t..2t+1, n g) b1 (k 2t+8.., n g); C 16 x 8 fp32,
// c0 c1 (g, 2t..2t+1) c2 c3 (g+8, 2t..2t+1). With A and B both stored as
// rows of K (a query's, a memory position's), every fragment register is
// one aligned 32-bit word of a row.
template <typename T> struct H16;
template <> struct H16<__half> {
    typedef __half2 T2;
    static __device__ __forceinline__ __half from(float x) { return __float2half_rn(x); }
    static __device__ __forceinline__ __half2 from2(float lo, float hi) { return __floats2half2_rn(lo, hi); }
    static __device__ __forceinline__ float to(__half x) { return __half2float(x); }
    static __device__ __forceinline__ void mma(float (&d)[4], const uint32_t (&a)[4], uint32_t b0, uint32_t b1) {
        asm("mma.sync.aligned.m16n8k16.row.col.f32.f16.f16.f32 {%0,%1,%2,%3}, {%4,%5,%6,%7}, {%8,%9}, "
            "{%0,%1,%2,%3};\n"
            : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3])
            : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b0), "r"(b1));
    }
};
template <> struct H16<__nv_bfloat16> {
    typedef __nv_bfloat162 T2;
    static __device__ __forceinline__ __nv_bfloat16 from(float x) { return __float2bfloat16_rn(x); }
    static __device__ __forceinline__ __nv_bfloat162 from2(float lo, float hi) { return __floats2bfloat162_rn(lo, hi); }
    static __device__ __forceinline__ float to(__nv_bfloat16 x) { return __bfloat162float(x); }
    static __device__ __forceinline__ void mma(float (&d)[4], const uint32_t (&a)[4], uint32_t b0, uint32_t b1) {
        asm("mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32 {%0,%1,%2,%3}, {%4,%5,%6,%7}, {%8,%9}, "
            "{%0,%1,%2,%3};\n"
            : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3])
            : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b0), "r"(b1));
    }
};

template <typename T> __device__ __forceinline__ uint32_t word(const T *p) {
    return *(const uint32_t *)(const void *)p;
}

// PF: registers a thread holds of a prefetched memory tile (kernel_for),
// rounded up to a power of two (the kernel is built for each). T: float for
// the fp32 product, __half or __nv_bfloat16 for the tensor-core one; VEC
// (16-bit only): the memory tile loaded and converted four floats at a time.
template <typename T, int PF, bool VEC>
__global__ void __launch_bounds__(THREADS, 2) read_kernel(Args a) {
    constexpr bool HALF = !std::is_same<T, float>::value;
    ck_pdl_enter();
    extern __shared__ float4 smem4[];
    char *base = (char *)smem4;
    const int CK = a.CK, K = 2 * CK, k = a.k, C = a.C, tid = (int)threadIdx.x, tx = tid % 16, ty = tid / 16;
    const int K16 = k16_of(CK), KP = kpitch_of(CK);
    const int64_t N = a.N, HW = a.HW;
    u64 *heap = a.heap_g ? a.heap_g + (size_t)blockIdx.x * BQ * k : (u64 *)(void *)base;
    char *tiles = base + (a.heap_g ? 0 : (size_t)BQ * k * sizeof(u64));
    // fp32: A [K][BQ], B [K][BNP] floats; 16-bit: A [BQ][KP], B [BN][KP] of T
    float *A_s = (float *)(void *)tiles;
    float *B_s = HALF ? (float *)(void *)(tiles + (size_t)BQ * KP * sizeof(T)) : A_s + (size_t)K * BQ;
    T *A_h = (T *)(void *)A_s, *B_h = (T *)(void *)B_s;
    float *S_s = HALF ? (float *)(void *)(tiles + (size_t)(BQ + BN) * KP * sizeof(T)) : B_s + (size_t)K * BNP;
    float *scl_s = S_s + BQ * SP;
    float *bsq_s = scl_s + BN, *thr_s = bsq_s + BQ, *m_s = thr_s + BQ, *l_s = m_s + BQ, *corr_s = l_s + BQ;
    int *hn_s = (int *)(corr_s + BQ);
    // mask_s [q]: the columns of the tile's row q that reach its k-th best (bit n), written each
    // tile by the row's GEMM threads; 8-byte aligned (every region before it is a multiple of 8)
    u64 *mask_s = (u64 *)(void *)(hn_s + BQ);
    uint32_t *mask32_s = (uint32_t *)(void *)mask_s; // [q][2]: columns 0..31, 32..63
    // the 16-bit product: warp w computes rows 16 (w % 4) .. + 15, columns 32 (w / 4) .. + 31
    const int lane = tid % 32, g = lane / 4, t4 = lane % 4, wm = (tid / 32) % 4, wn = tid / 128;
    if constexpr (HALF) // B's padding columns 2 CK .. K16 - 1 stay zero (the tile loads write 0 .. 2 CK - 1)
        for (int i = tid; i < BN * (K16 - K); i += THREADS)
            B_h[(i / (K16 - K)) * KP + K + i % (K16 - K)] = H16<T>::from(0.0f);

    const int64_t ntiles = (HW + BQ - 1) / BQ, items = ntiles * a.splits;
    for (int64_t w = blockIdx.x; w < items; w += gridDim.x) { // work item: query tile t, memory range s
        const int64_t t = w / a.splits, n_lo = (w % a.splits) * a.per, n_hi = min(N, n_lo + a.per);
        const int64_t q0 = t * BQ;
        const int nq = (int)min((int64_t)BQ, HW - q0);
        if constexpr (HALF) {
            // the queries as rows of A [BQ][KP] (zero past nq and past 2 CK), from qk and qe rounded to T
            for (int i = tid; i < BQ * K16; i += THREADS) {
                const int q = i / K16, c = i % K16;
                float x = 0.0f;
                if (q < nq && c < K) {
                    const int cc = c < CK ? c : c - CK;
                    const float kv = H16<T>::to(H16<T>::from(a.qk[(q0 + q) * CK + cc]));
                    const float e = a.qe ? H16<T>::to(H16<T>::from(a.qe[(q0 + q) * CK + cc])) : 1.0f;
                    x = c < CK ? 2.0f * e * kv : -e;
                }
                A_h[(size_t)q * KP + c] = H16<T>::from(x);
            }
        } else {
            // the queries as A [K][BQ] (zero past nq); q fastest, so the stores do not conflict
            for (int i = tid; i < BQ * CK; i += THREADS) {
                const int q = i % BQ, c = i / BQ;
                float x = 0.0f, y = 0.0f;
                if (q < nq) {
                    const float kv = a.qk[(q0 + q) * CK + c];
                    if (a.qe) {
                        const float e = a.qe[(q0 + q) * CK + c];
                        x = 2.0f * e * kv, y = -e;
                    } else {
                        x = 2.0f * kv, y = -1.0f;
                    }
                }
                A_s[(size_t)c * BQ + q] = x;
                A_s[(size_t)(CK + c) * BQ + q] = y;
            }
        }
        if (tid < BQ) {
            float b = 0.0f;
            if (a.qe && tid < nq) {
                const float *e = a.qe + (q0 + tid) * CK, *kv = a.qk + (q0 + tid) * CK;
                for (int c = 0; c < CK; c++) {
                    float ec = e[c], kc = kv[c];
                    if constexpr (HALF) ec = H16<T>::to(H16<T>::from(ec)), kc = H16<T>::to(H16<T>::from(kc));
                    b += ec * kc * kc;
                }
            }
            bsq_s[tid] = b;
            thr_s[tid] = -INFINITY;
            hn_s[tid] = 0;
            m_s[tid] = -INFINITY;
            l_s[tid] = 0.0f;
        }
        // memory tiles are loaded one ahead into registers, so that the loads of tile n0 + BN are
        // in flight while tile n0 is multiplied
        float pf[PF], pf_scl = 0.0f;
        if constexpr (VEC) load_rows4<PF>(a, n_lo, n_hi, tid, pf, &pf_scl);
        else if constexpr (HALF) load_rows<PF>(a, n_lo, n_hi, tid, pf, &pf_scl);
        else load_tile<PF>(a, n_lo, n_hi, tid, pf, &pf_scl);
        for (int64_t n0 = n_lo; n0 < n_hi; n0 += BN) {
            const int bk = (int)min((int64_t)BN, n_hi - n0);
            // the memory tile as B (zero past bk); the previous tile's readers are past the two
            // barriers that follow its product
            if constexpr (VEC) {
                // pf [4 r ..]: quad tid + r * THREADS, elements e .. e + 3 of position e / CK from
                // channel e % CK; mk^2 from the rounded values, rounded once (__hmul2)
                int n = 4 * tid / CK, c = 4 * tid % CK;
                const int dn = 4 * THREADS / CK, dc = 4 * THREADS % CK;
#pragma unroll
                for (int r = 0; r < PF / 4; r++) {
                    if (n < BN) {
                        typedef typename H16<T>::T2 T2;
                        const T2 lo = H16<T>::from2(pf[4 * r], pf[4 * r + 1]);
                        const T2 hi = H16<T>::from2(pf[4 * r + 2], pf[4 * r + 3]);
                        const T2 lo2 = __hmul2(lo, lo), hi2 = __hmul2(hi, hi);
                        uint2 v, v2;
                        v.x = *(const uint32_t *)(const void *)&lo, v.y = *(const uint32_t *)(const void *)&hi;
                        v2.x = *(const uint32_t *)(const void *)&lo2, v2.y = *(const uint32_t *)(const void *)&hi2;
                        *(uint2 *)(void *)(B_h + (size_t)n * KP + c) = v;
                        *(uint2 *)(void *)(B_h + (size_t)n * KP + CK + c) = v2;
                    }
                    n += dn, c += dc;
                    if (c >= CK) c -= CK, n++;
                }
            } else if constexpr (HALF) {
                // pf [r]: element e = tid + r * THREADS of the tile's rows, position e / CK, channel e % CK
                int n = tid / CK, c = tid % CK;
                const int dn = THREADS / CK, dc = THREADS % CK;
#pragma unroll
                for (int r = 0; r < PF; r++) {
                    if (n < BN) {
                        const T h = H16<T>::from(pf[r]);
                        const float hf = H16<T>::to(h);
                        B_h[(size_t)n * KP + c] = h;
                        B_h[(size_t)n * KP + CK + c] = H16<T>::from(hf * hf);
                    }
                    n += dn, c += dc;
                    if (c >= CK) c -= CK, n++;
                }
            } else {
                // pf [r]: channel tile_c of position tile_n (load_tile)
#pragma unroll
                for (int r = 0; r < PF; r++) {
                    const int n = tile_n(tid, r), c = tile_c(tid, r);
                    if (c < CK) {
                        B_s[c * BNP + n] = pf[r];
                        B_s[(CK + c) * BNP + n] = pf[r] * pf[r];
                    }
                }
            }
            if (tid < BN) scl_s[tid] = pf_scl;
            __syncthreads();
            if (n0 + BN < n_hi) {
                if constexpr (VEC) load_rows4<PF>(a, n0 + BN, n_hi, tid, pf, &pf_scl);
                else if constexpr (HALF) load_rows<PF>(a, n0 + BN, n_hi, tid, pf, &pf_scl);
                else load_tile<PF>(a, n0 + BN, n_hi, tid, pf, &pf_scl);
            }
            if constexpr (HALF) {
                float acc[4][4]; // [8-column tile j][c0..c3]
#pragma unroll
                for (int j = 0; j < 4; j++)
#pragma unroll
                    for (int i = 0; i < 4; i++) acc[j][i] = 0.0f;
                const T *a0 = A_h + (size_t)(16 * wm + g) * KP + 2 * t4, *a1 = a0 + 8 * (size_t)KP;
                const T *b0 = B_h + (size_t)(32 * wn + g) * KP + 2 * t4;
#pragma unroll 2
                for (int kk = 0; kk < K16; kk += 16) {
                    const uint32_t af[4] = {word(a0 + kk), word(a1 + kk), word(a0 + kk + 8), word(a1 + kk + 8)};
#pragma unroll
                    for (int j = 0; j < 4; j++) {
                        const T *b = b0 + (size_t)j * 8 * KP + kk;
                        H16<T>::mma(acc[j], af, word(b), word(b + 8));
                    }
                }
#pragma unroll
                for (int hr = 0; hr < 2; hr++) {
                    const int q = 16 * wm + g + 8 * hr;
                    const float bsq = bsq_s[q], thr = thr_s[q];
                    uint32_t bits = 0; // bit 8 j + 2 t4 + e: column n - 32 wn
#pragma unroll
                    for (int j = 0; j < 4; j++)
#pragma unroll
                        for (int e = 0; e < 2; e++) {
                            const int n = 32 * wn + 8 * j + 2 * t4 + e;
                            const float s = (acc[j][2 * hr + e] - bsq) * scl_s[n];
                            S_s[q * SP + n] = s;
                            if (n < bk && s >= thr) bits |= 1u << (8 * j + 2 * t4 + e);
                        }
                    // the row's 32 columns of this warp are in its 4 lanes of equal g
                    bits |= __shfl_xor_sync(0xffffffffu, bits, 1);
                    bits |= __shfl_xor_sync(0xffffffffu, bits, 2);
                    if (t4 == 0) mask32_s[2 * q + wn] = bits;
                }
            } else {
                float acc[4][4];
#pragma unroll
                for (int i = 0; i < 4; i++)
#pragma unroll
                    for (int j = 0; j < 4; j++) acc[i][j] = 0.0f;
#pragma unroll 2
                for (int kk = 0; kk < K; kk++) {
                    const float4 av = *(const float4 *)&A_s[(size_t)kk * BQ + ty * 4];
                    const float4 bv = *(const float4 *)&B_s[(size_t)kk * BNP + tx * 4];
                    const float ar[4] = {av.x, av.y, av.z, av.w}, br[4] = {bv.x, bv.y, bv.z, bv.w};
#pragma unroll
                    for (int i = 0; i < 4; i++)
#pragma unroll
                        for (int j = 0; j < 4; j++) acc[i][j] = fmaf(ar[i], br[j], acc[i][j]);
                }
#pragma unroll
                for (int i = 0; i < 4; i++) {
                    const int q = ty * 4 + i;
                    const float bsq = bsq_s[q], thr = thr_s[q];
                    uint32_t bits = 0; // bit n % 32 of word n / 32 = tx / 8
#pragma unroll
                    for (int j = 0; j < 4; j++) {
                        const int n = tx * 4 + j;
                        const float s = (acc[i][j] - bsq) * scl_s[n];
                        S_s[q * SP + n] = s;
                        if (n < bk && s >= thr) bits |= 1u << (n % 32);
                    }
                    // a word's 32 columns are in 8 lanes of equal ty and tx / 8
                    bits |= __shfl_xor_sync(0xffffffffu, bits, 1);
                    bits |= __shfl_xor_sync(0xffffffffu, bits, 2);
                    bits |= __shfl_xor_sync(0xffffffffu, bits, 4);
                    if (tx % 8 == 0) mask32_s[2 * q + tx / 8] = bits;
                }
            }
            __syncthreads();
            if (k) {
                u64 m = tid < nq ? mask_s[tid] : 0;
                if (m) {
                    int hn = hn_s[tid];
                    float thr = thr_s[tid];
                    u64 *h = heap + tid;
                    for (; m; m &= m - 1) { // the marked columns in order; thr only rises meanwhile
                        const int j = __ffsll((long long)m) - 1;
                        const float v = S_s[tid * SP + j];
                        if (!(v >= thr)) continue; // below the k-th best now
                        heap_offer(h, &hn, k, rank_key(v, (int)(n0 + j)));
                        if (hn == k) thr = key_value(h[0]);
                    }
                    hn_s[tid] = hn;
                    thr_s[tid] = thr;
                }
            } else {
                if (tid < nq) { // online softmax: the row becomes exp(s - m)
                    float *r = S_s + tid * SP;
                    const float m_old = m_s[tid];
                    float mx = m_old;
                    for (int j = 0; j < bk; j++) mx = fmaxf(mx, r[j]);
                    const float corr = m_old == -INFINITY ? 0.0f : expf(m_old - mx);
                    float l = l_s[tid] * corr;
                    for (int j = 0; j < bk; j++) {
                        const float e = expf(r[j] - mx);
                        r[j] = e;
                        l += e;
                    }
                    m_s[tid] = mx, l_s[tid] = l, corr_s[tid] = corr;
                }
                __syncthreads();
                // out rows (*corr) += P [nq, bk] . mv [bk, C]: the same thread each tile for a value
                for (int i = tid; i < nq * C; i += THREADS) {
                    const int q = i / C, c = i % C;
                    const float *p = S_s + q * SP, *v = a.mv + n0 * C + c;
                    float s = 0.0f;
                    for (int j = 0; j < bk; j++) s = fmaf(p[j], v[(int64_t)j * C], s);
                    float *o = a.out + (q0 + q) * C + c;
                    *o = n0 > 0 ? fmaf(*o, corr_s[q], s) : s;
                }
            }
            __syncthreads();
        }
        if (k && a.splits > 1) { // the item's heaps to merge_kernel
            if (tid < nq) {
                const int hn = hn_s[tid];
                for (int j = 0; j < hn; j++) a.part[((size_t)w * k + j) * BQ + tid] = heap[(size_t)j * BQ + tid];
                a.part_n[(size_t)w * BQ + tid] = hn;
            }
        } else if (k) {
            readout(a, heap, hn_s, q0, nq, tid);
        } else {
            for (int i = tid; i < nq * C; i += THREADS) {
                const int q = i / C;
                a.out[(q0 + q) * C + i % C] *= 1.0f / l_s[q];
            }
        }
        __syncthreads(); // the next tile rewrites A, the heaps and the per-query vectors
    }
}

// splits > 1: a CTA per query tile merges the tile's items' heaps (the
// positions are global, so the rank keys order them as one pass over all N
// would) into one heap a query in shared memory, then reads out.
__global__ void __launch_bounds__(THREADS) merge_kernel(Args a) {
    ck_pdl_enter();
    extern __shared__ float4 smem4[];
    u64 *heap = (u64 *)(void *)smem4;
    int *hn_s = (int *)(void *)(heap + (size_t)BQ * a.k);
    const int tid = (int)threadIdx.x, k = a.k;
    const int64_t t = blockIdx.x, q0 = t * BQ;
    const int nq = (int)min((int64_t)BQ, a.HW - q0);
    if (tid < nq) {
        int hn = 0;
        for (int sp = 0; sp < a.splits; sp++) {
            const int64_t w = t * a.splits + sp;
            const int n = a.part_n[(size_t)w * BQ + tid];
            for (int j = 0; j < n; j++) heap_offer(heap + tid, &hn, k, a.part[((size_t)w * k + j) * BQ + tid]);
        }
        hn_s[tid] = hn;
    }
    __syncthreads();
    readout(a, heap, hn_s, q0, nq, tid);
}

// usage [n] = acc [n] in units of 2^-40.
__global__ void usage_kernel(const u64 *__restrict__ acc, int64_t N, float *__restrict__ usage) {
    ck_pdl_enter();
    const int64_t n = (int64_t)blockIdx.x * blockDim.x + threadIdx.x;
    if (n < N) usage[n] = (float)((double)acc[n] * (1.0 / USAGE_ONE));
}

ckey_status fail(ckey_error *err, ckey_status st, const char *msg, const char *detail) {
    if (err) {
        snprintf(err->message, sizeof err->message, "CUDA memory_read: %s%s%s", msg, detail ? ": " : "",
                 detail ? detail : "");
        err->status = st;
    }
    return st;
}

// The kernel for type T: PF holds a thread's part of a BN x CK memory tile
// (fp32: 2 ceil(CK / 8), load_tile; 16-bit: BN x CK / THREADS, load_rows,
// or with vec (CK a multiple of 4, mk 16-byte aligned) whole quads of it,
// load_rows4).
template <typename T> void (*kernel_for(int CK, bool vec))(Args) {
    if constexpr (!std::is_same<T, float>::value)
        if (vec) {
            const int quads = (BN * CK / 4 + THREADS - 1) / THREADS;
            return quads <= 1   ? read_kernel<T, 4, true>
                   : quads <= 2 ? read_kernel<T, 8, true>
                   : quads <= 4 ? read_kernel<T, 16, true>
                                : read_kernel<T, 32, true>;
        }
    const int per_thread = std::is_same<T, float>::value ? 2 * ((CK + 7) / 8) : (BN * CK + THREADS - 1) / THREADS;
    return per_thread <= 1    ? read_kernel<T, 1, false>
           : per_thread <= 2  ? read_kernel<T, 2, false>
           : per_thread <= 4  ? read_kernel<T, 4, false>
           : per_thread <= 8  ? read_kernel<T, 8, false>
           : per_thread <= 16 ? read_kernel<T, 16, false>
                              : read_kernel<T, 32, false>;
}

} // namespace

extern "C" {

size_t ck_cuda_memory_read_bytes(const ck_op_needs *n) {
    if (!n || n->mr_n <= 0) return 0;
    const int k = n->mr_top_k > 0 ? (int)(n->mr_top_k < n->mr_n ? n->mr_top_k : n->mr_n) : 0;
    size_t b = keys_bytes(k) + counts_bytes(k);
    if (n->mr_usage_hw > 0) b += al256((size_t)n->mr_n * sizeof(u64));
    return b;
}

ckey_status ck_cuda_memory_read(const float *mk, const float *ms, const float *qk, const float *qe, int64_t N,
                                int64_t HW, int CK, const float *mv, int C, int top_k, float *out, float *usage,
                                int precision, void *scratch, size_t scratch_bytes, void *stream, ckey_error *err) {
    cudaStream_t st = (cudaStream_t)stream;
    cudaError_t e = cudaSuccess;
    if (usage && N > 0 && (e = cudaMemsetAsync(usage, 0, (size_t)N * sizeof(float), st)) != cudaSuccess)
        return fail(err, CKEY_ERR_DEVICE, "cudaMemsetAsync", cudaGetErrorString(e));
    if (HW <= 0 || C <= 0) return CKEY_OK;
    if (N <= 0) {
        if ((e = cudaMemsetAsync(out, 0, (size_t)HW * C * sizeof(float), st)) != cudaSuccess)
            return fail(err, CKEY_ERR_DEVICE, "cudaMemsetAsync", cudaGetErrorString(e));
        return CKEY_OK;
    }
    if (CK < 1 || CK > MAX_CK || N > INT32_MAX)
        return fail(err, CKEY_ERR_UNSUPPORTED, "CK above 128 or N above 2^31 - 1", NULL);
    if (usage && (top_k <= 0 || HW > USAGE_MAX_HW))
        return fail(err, CKEY_ERR_INVALID_ARG, "usage needs top_k > 0 and HW below 2^23", NULL);
    // with usage the top-k path keeps min(top_k, N), so every weight is a kept pair's
    const int k = usage ? (int)(top_k < N ? top_k : N) : (top_k > 0 && top_k < N ? top_k : 0);
    const size_t key_b = keys_bytes(k), cnt_b = counts_bytes(k);
    const size_t need = key_b + cnt_b + (usage ? al256((size_t)N * sizeof(u64)) : 0);
    if (need > scratch_bytes || (need && !scratch))
        return fail(err, CKEY_ERR_INVALID_ARG, "the workspace is smaller than ck_cuda_memory_read_bytes", NULL);
    // Few query tiles (below 264): the memory is split into ranges of at least
    // MIN_SPLIT_TILES tiles, each (tile, range) a CTA, so that the CTAs fill
    // the GPU; merge_kernel then merges each query's heaps (top-k with the
    // heaps in shared memory only).
    const int64_t ntiles = (HW + BQ - 1) / BQ, mtiles = (N + BN - 1) / BN;
    int64_t splits = 1;
    if (k > 0 && heap_in_smem(k)) {
        splits = GRID_MAX / ntiles;
        const int64_t most = mtiles / MIN_SPLIT_TILES;
        splits = splits < most ? splits : most;
        if (splits < 1) splits = 1;
    }
    const int64_t per = (mtiles + splits - 1) / splits * BN;
    splits = (N + per - 1) / per; // no empty range
    Args a;
    a.mk = mk, a.ms = ms, a.qk = qk, a.qe = qe, a.mv = mv, a.out = out;
    a.heap_g = k > 0 && !heap_in_smem(k) ? (u64 *)scratch : nullptr;
    a.part = splits > 1 ? (u64 *)scratch : nullptr;
    a.part_n = splits > 1 ? (int *)(void *)((char *)scratch + key_b) : nullptr;
    a.usage_acc = usage ? (u64 *)(void *)((char *)scratch + key_b + cnt_b) : nullptr;
    a.N = N, a.HW = HW, a.per = per, a.CK = CK, a.C = C, a.k = k, a.splits = (int)splits;
    a.inv_sqrt_ck = 1.0f / sqrtf((float)CK);
    if (usage && (e = cudaMemsetAsync(a.usage_acc, 0, (size_t)N * sizeof(u64), st)) != cudaSuccess)
        return fail(err, CKEY_ERR_DEVICE, "cudaMemsetAsync", cudaGetErrorString(e));
    const int half = precision == CKEY_PRECISION_FP16 || precision == CKEY_PRECISION_BF16;
    const size_t smem = smem_bytes(CK, k, a.heap_g == nullptr, half);
    const bool vec = CK % 4 == 0 && (uintptr_t)mk % 16 == 0;
    void (*kern)(Args) = precision == CKEY_PRECISION_FP16   ? kernel_for<__half>(CK, vec)
                         : precision == CKEY_PRECISION_BF16 ? kernel_for<__nv_bfloat16>(CK, vec)
                                                            : kernel_for<float>(CK, false);
    if (smem > 48 * 1024 &&
        (e = cudaFuncSetAttribute(kern, cudaFuncAttributeMaxDynamicSharedMemorySize, (int)smem)) != cudaSuccess)
        return fail(err, CKEY_ERR_DEVICE, "cudaFuncSetAttribute", cudaGetErrorString(e));
    const int64_t items = ntiles * splits;
    const int grid = (int)(items < GRID_MAX ? items : GRID_MAX);
    if ((e = ck_launch(kern, dim3(grid), dim3(THREADS), smem, st, a)) != cudaSuccess)
        return fail(err, CKEY_ERR_DEVICE, "read kernel", cudaGetErrorString(e));
    const size_t merge_smem = (size_t)BQ * k * sizeof(u64) + BQ * sizeof(int);
    if (splits > 1 &&
        (e = ck_launch(merge_kernel, dim3((unsigned)ntiles), dim3(THREADS), merge_smem, st, a)) != cudaSuccess)
        return fail(err, CKEY_ERR_DEVICE, "merge kernel", cudaGetErrorString(e));
    if (usage) {
        const u64 *acc = a.usage_acc;
        if ((e = ck_launch(usage_kernel, dim3((unsigned)((N + 255) / 256)), dim3(256), 0, st, acc, N, usage)) !=
            cudaSuccess)
            return fail(err, CKEY_ERR_DEVICE, "usage kernel", cudaGetErrorString(e));
    }
    return CKEY_OK;
}

// The op table's entry (ck_cuda_ops.memory_read): the scratch is the one
// set_workspace bound for the memory read (mr_scratch, mr_scratch_bytes),
// the precision the backend's conv_precision (the tracker's: fp16 gives the
// tensor-core similarity, fp32 and tf32 the fp32 one, as PyTorch keeps
// matmuls out of TF32 by default); a failure fails the pass (status), as
// the other CUDA ops do.
void ck_cuda_memory_read_op(ck_backend *be, ck_tensor mk, ck_tensor ms, ck_tensor qk, ck_tensor qe, int64_t N,
                            int64_t HW, int CK, ck_tensor mv, int C, int top_k, ck_tensor out, ck_tensor usage) {
    ck_cuda_state *s = (ck_cuda_state *)(void *)be;
    ckey_error e_;
    const ck_tensor *t[] = {&mk, &ms, &qk, &qe, &mv, &out, &usage};
    for (size_t i = 0; i < sizeof t / sizeof t[0]; i++)
        if (t[i]->data && t[i]->type != CK_F32) {
            if (s->status == CKEY_OK) s->status = fail(&s->err, CKEY_ERR_UNSUPPORTED, "tensors must be fp32", NULL);
            return;
        }
    const ckey_status r = ck_cuda_memory_read((const float *)mk.data, (const float *)ms.data, (const float *)qk.data,
                                              (const float *)qe.data, N, HW, CK, (const float *)mv.data, C, top_k,
                                              (float *)out.data, (float *)usage.data, s->cfg.conv_precision,
                                              s->mr_scratch, s->mr_scratch_bytes, s->stream, &e_);
    if (r != CKEY_OK && s->status == CKEY_OK) { /* the pass's first failure */
        s->status = r;
        s->err = e_;
    }
}

} // extern "C"
