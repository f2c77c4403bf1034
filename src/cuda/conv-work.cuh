// The work of the refiner's tensor-core 3x3 convolutions (refiner-mma.cu,
// mma.sync; refiner-wgmma.cu, Hopper wgmma), shared by both kernels.
//
// Work: output rows y = r, r + d, r + 2d, ... (one residue r of the dilation
// d) of one kTM-pixel column strip form a chain; consecutive rows of a chain
// share two of their three input rows (y - d, y, y + d), so a chain is walked
// with a ring of input rows in shared memory (4 in refiner-mma.cu, 5 in
// refiner-wgmma.cu): each step loads (and, with a
// pending GroupNorm + ReLU, transforms) one new row while the previous step's
// rows are reused. A work item is `seg` consecutive steps of a chain: kSeg,
// or fewer when a thin band of rows (the in-place conv's) would otherwise
// leave most SMs idle (a 64-row band at dilation 1 is only 32 items of 32).
#ifndef CK_CUDA_CONV_WORK_CUH
#define CK_CUDA_CONV_WORK_CUH

#include <stdint.h>

namespace {

constexpr int kTM = 128;   // output pixels per tile (one row segment)
constexpr int kSeg = 32;   // chain steps per work item, at most
constexpr int kMinSeg = 4; // ... and at least (each item loads seg + 2 input rows)

// Whether a band's output (rows y0 .. y1-1 of Cout channels, stored from
// `out` on) shares a byte with the input rows it reads (y0 - dil .. y1 - 1 +
// dil, clipped to the image, of Cin channels, `in` holding rows from in_r0
// on), 16-bit samples. The in-place refiner conv writes each band
// ck_cuda_conv_shift_rows rows before its input, over rows that earlier
// bands have read: that band's out may even equal in, and is no overlap.
inline bool band_overlaps(const void *in, int in_r0, int Cin, int S, int dil, const void *out, int y0, int y1,
                          int Cout) {
    const int64_t in_row = (int64_t)S * Cin * 2, out_row = (int64_t)S * Cout * 2;
    int r0 = y0 - dil, r1 = y1 + dil;
    if (r0 < in_r0) r0 = in_r0;
    if (r1 > S) r1 = S;
    const char *rs = (const char *)in + (r0 - in_r0) * in_row, *re = (const char *)in + (r1 - in_r0) * in_row;
    const char *ws = (const char *)out, *we = ws + (int64_t)(y1 - y0) * out_row;
    return ws < re && rs < we;
}

struct ConvArgs {
    const void *in, *W;
    const float *bias, *a, *b;
    void *out;
    double *stats;
    int S, dil, groups, tiles_per_row;
    int y0, rows;   // output rows y0 .. y0+rows-1, stored from `out` on
    int in_r0;      // the image row `in` begins with: 0 for a whole map, else a band's
                    // first row (every row the outputs read lies in the band)
    int seg;        // chain steps per work item (kSeg, less for a thin band of rows)
    int nseg;       // segments per chain
    int64_t nitems; // dil * nseg * tiles_per_row
    // One launch for nbands bands of band_rows output rows written shift_rows
    // rows before the input (refiner-wgmma.cu's in-place conv2): rows and
    // nitems are then a band's, and sync (zeroed before the launch) holds the
    // item counter ([0]) and the items' done flags ([1 + item]). nbands = 1
    // and sync = NULL otherwise.
    int nbands, band_rows, shift_rows;
    int *sync;
};

// seg, nseg, nitems: the longest segments (fewest rows loaded twice) that
// still make at least min_items items, if segments of kMinSeg allow.
// refiner-wgmma.cu asks for an item a block: the longer segments beat
// three items a block (H200, S = 2048 fp16: a 512-row band of conv2 on 264
// blocks 176-182 us in 16-step items against 187-190 in 8-step ones; a
// frame's convs 5.34 against 5.47 ms). refiner-mma.cu (one block an SM) asks
// for three a block.
inline void conv_plan(ConvArgs &b, int64_t min_items) {
    const int chain = (b.rows + b.dil - 1) / b.dil; // rows in the longest chain
    for (b.seg = kSeg;; b.seg /= 2) {
        b.nseg = (chain + b.seg - 1) / b.seg;
        b.nitems = (int64_t)b.dil * b.nseg * b.tiles_per_row;
        if (b.seg <= kMinSeg || b.nitems >= min_items) break;
    }
}

// Item `item` of a plan: its column strip x0, residue r, steps k0 .. kend-1
// of a chain of nr rows (k0 >= kend: nothing to do).
struct ConvItem {
    int x0, r, k0, kend;
};
__device__ __forceinline__ ConvItem conv_item(const ConvArgs &p, int64_t item, int rows) {
    ConvItem it;
    const int xt = (int)(item % p.tiles_per_row);
    const int rs = (int)(item / p.tiles_per_row), seg = rs % p.nseg;
    it.r = rs / p.nseg;
    const int nr = it.r < rows ? (rows - it.r + p.dil - 1) / p.dil : 0;
    it.k0 = seg * p.seg;
    it.kend = min(nr, it.k0 + p.seg);
    it.x0 = xt * kTM;
    return it;
}

// The epilogues' 4 x 4 transpose of 32-bit words across the lanes of a quad (lane % 4 = q):
// afterwards w[j] of lane q is what w[q] of lane j was. Two butterfly steps
// (partner q ^ 1, then q ^ 2), each swapping the two words whose index
// differs from q in that bit.
__device__ __forceinline__ void quad_transpose(uint32_t *w, int q) {
#pragma unroll
    for (int b = 1; b <= 2; b <<= 1) {
        const bool hi = (q & b) != 0;
        const int pa = 0, pb = b == 1 ? 2 : 1; // the pairs (pa, pa | b), (pb, pb | b) this step swaps across
        const uint32_t sa = hi ? w[pa] : w[pa | b], sb = hi ? w[pb] : w[pb | b];
        const uint32_t ra = __shfl_xor_sync(0xffffffffu, sa, b), rb = __shfl_xor_sync(0xffffffffu, sb, b);
        if (hi) w[pa] = ra, w[pb] = rb;
        else w[pa | b] = ra, w[pb | b] = rb;
    }
}

// The end of a conv block: each thread's per-channel GroupNorm sums (NB
// blocks of 8 channels: channel c0 + 8i + 2 * (lane % 4) + e, e = 0, 1; the
// mma fragments' layout) reduced over the lanes that hold the same channels,
// gathered per group in the block's shared sstat[2 * groups] (zeroed at the
// start) and added to p.stats. Every thread of the block calls it.
template <int NB>
__device__ __forceinline__ void conv_stats_finish(double (&ssum)[NB][2], double (&ssq)[NB][2], int c0, int cout,
                                                  const ConvArgs &p, double *sstat) {
    const int tid = threadIdx.x, lane = tid & 31;
#pragma unroll
    for (int i = 0; i < NB; i++)
#pragma unroll
        for (int e = 0; e < 2; e++)
#pragma unroll
            for (int off = 4; off < 32; off <<= 1) {
                ssum[i][e] += __shfl_xor_sync(0xffffffffu, ssum[i][e], off);
                ssq[i][e] += __shfl_xor_sync(0xffffffffu, ssq[i][e], off);
            }
    const int cpg = cout / p.groups;
    if (lane < 4) {
#pragma unroll
        for (int i = 0; i < NB; i++)
#pragma unroll
            for (int e = 0; e < 2; e++) {
                const int g = (c0 + i * 8 + lane * 2 + e) / cpg;
                atomicAdd(&sstat[2 * g], ssum[i][e]);
                atomicAdd(&sstat[2 * g + 1], ssq[i][e]);
            }
    }
    __syncthreads();
    if (tid < 2 * p.groups) atomicAdd(&p.stats[tid], sstat[tid]);
}

} // namespace

#endif
