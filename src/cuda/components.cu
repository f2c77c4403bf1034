// The despeckle's connected components on the device: ck_components_filter
// (src/pixel/post.c) with 8-connectivity, as a union-find over pixel indices.
//
//   1. tiles of CC_TH x CC_TW pixels, a block each: a union-find in shared
//      memory over the tile's pixels, then every pixel's label is the global
//      index of its tile root and the root's area slot holds the pixels of its
//      tile component (every other slot 0);
//   2. the tile borders: the pixels of the first row of a tile row and of the
//      first column of a tile column join their neighbours across the border
//      (atomicMin on the roots in global memory);
//   3. each tile root points at its final root and adds its tile area to the
//      final root's (atomicAdd: one add per tile component, not per pixel);
//   4. mask = area of the pixel's final root (two steps: its tile root's
//      label) >= min_area ? 255 : 0, and 0 off the mask.
//
// A root is always the smallest index of its set (a union links the larger
// root under the smaller), so a parent is never larger than its child and the
// parent chains have no cycles. A component's final root is its smallest
// pixel index whatever order the threads run in (only the tree shapes depend
// on it); the mask follows from the components alone and so is exact.
#include "cuda/ops-common.cuh"

namespace {

constexpr int CC_TW = 32, CC_TH = 16; // a tile: one block of 512 threads, a pixel each

// The root of x. Volatile: parents written by other threads' atomics are read
// from memory, not from a register or L1.
__device__ __forceinline__ int cc_find(const volatile int *par, int x) {
    int p;
    while ((p = par[x]) != x) x = p;
    return x;
}

// Joins the sets of a and b (shared or global memory). The larger root goes
// under the smaller; when another thread linked it first (atomicMin returns a
// parent other than itself), the join goes on from that parent.
__device__ __forceinline__ void cc_union(int *par, int a, int b) {
    for (;;) {
        a = cc_find(par, a);
        b = cc_find(par, b);
        if (a == b) return;
        if (a < b) {
            const int t = a;
            a = b;
            b = t;
        }
        const int old = atomicMin(&par[a], b);
        if (old == a) return;
        a = old;
    }
}

// Step 1. The neighbours joined are those of a raster scan (W, NW, N, NE) with
// the scan's shortcut: N, when set, is adjacent to the other three, which are
// joined to it by their own pixels' unions; W, when set, is adjacent to NW.
// Pixels outside the image are background.
__global__ void cc_local_kernel(const uint8_t *__restrict__ mask, int h, int w, int tiles_x,
                                int *__restrict__ labels, uint32_t *__restrict__ area) {
    ck_pdl_enter();
    __shared__ int par[CC_TH * CC_TW];
    __shared__ uint32_t cnt[CC_TH * CC_TW];
    const int tx = (int)threadIdx.x, ty = (int)threadIdx.y, li = ty * CC_TW + tx;
    const int x0 = (int)(blockIdx.x % (unsigned)tiles_x) * CC_TW, y0 = (int)(blockIdx.x / (unsigned)tiles_x) * CC_TH;
    const int x = x0 + tx, y = y0 + ty;
    const bool in = x < w && y < h;
    const int g = in ? y * w + x : 0;
    const bool fg = in && mask[g] != 0;
    par[li] = fg ? li : -1;
    cnt[li] = 0;
    __syncthreads();
    if (fg) {
        // a background pixel's slot stays -1; a set pixel's is never negative
        const volatile int *vp = par;
        const bool up = ty > 0, left = tx > 0, right = tx + 1 < CC_TW;
        if (up && vp[li - CC_TW] >= 0) {
            cc_union(par, li, li - CC_TW);
        } else {
            if (left && vp[li - 1] >= 0)
                cc_union(par, li, li - 1);
            else if (left && up && vp[li - CC_TW - 1] >= 0)
                cc_union(par, li, li - CC_TW - 1);
            if (right && up && vp[li - CC_TW + 1] >= 0) cc_union(par, li, li - CC_TW + 1);
        }
    }
    __syncthreads();
    int r = li;
    if (fg) {
        r = cc_find(par, li);
        atomicAdd(&cnt[r], 1u);
    }
    __syncthreads();
    if (!in) return;
    labels[g] = (y0 + r / CC_TW) * w + x0 + r % CC_TW;
    area[g] = fg && r == li ? cnt[li] : 0u;
}

// Step 2, the borders between tile rows: pixel (y, x) of a tile's first row
// with its neighbours in row y - 1 (N alone when set: NW and NE are adjacent to
// it, joined within their tile or by the column borders below). A thread per
// pixel of the rows y = k CC_TH, k >= 1.
__global__ void cc_merge_rows_kernel(const uint8_t *__restrict__ mask, int w, int64_t count, int *labels) {
    ck_pdl_enter();
    const int64_t i = (int64_t)blockIdx.x * blockDim.x + threadIdx.x;
    if (i >= count) return;
    const int y = (int)(i / w + 1) * CC_TH, x = (int)(i % w);
    const int p = y * w + x, u = p - w;
    if (!mask[p]) return;
    if (mask[u]) {
        cc_union(labels, p, u);
        return;
    }
    if (x > 0 && mask[u - 1]) cc_union(labels, p, u - 1);
    if (x + 1 < w && mask[u + 1]) cc_union(labels, p, u + 1);
}

// Step 2, the borders between tile columns: pixel (y, x) of a tile's first
// column with its neighbours in column x - 1 (W alone when set: NW and SW are
// adjacent to it, joined within their tile or by the row borders above). A
// thread per pixel of the columns x = k CC_TW, k >= 1.
__global__ void cc_merge_cols_kernel(const uint8_t *__restrict__ mask, int h, int w, int64_t count, int *labels) {
    ck_pdl_enter();
    const int64_t i = (int64_t)blockIdx.x * blockDim.x + threadIdx.x;
    if (i >= count) return;
    const int x = (int)(i / h + 1) * CC_TW, y = (int)(i % h);
    const int p = y * w + x, l = p - 1;
    if (!mask[p]) return;
    if (mask[l]) {
        cc_union(labels, p, l);
        return;
    }
    if (y > 0 && mask[l - w]) cc_union(labels, p, l - w);
    if (y + 1 < h && mask[l + w]) cc_union(labels, p, l + w);
}

// Step 3, a thread per pixel, work for the tile roots (area > 0) only: each
// finds its final root, points itself and the tile roots on its way there at
// it, and adds its tile area to the root's. Only the final roots receive adds,
// and a final root sends none (the area it reads is unused), so no count is
// read while another thread adds to it. Pointing a tile root at its final root while other threads walk through
// it is safe: the old parent and the root are both its ancestors. The other
// pixels keep their tile root as their label (the unions only ever move a
// root, and they are never one).
__global__ void cc_roots_kernel(int n, int *labels, uint32_t *area) {
    ck_pdl_enter();
    const int i = (int)(blockIdx.x * blockDim.x + threadIdx.x);
    if (i >= n) return;
    const uint32_t a = area[i];
    if (!a) return;
    const int r = cc_find(labels, i);
    if (r == i) return;
    for (int x = i; x != r;) {
        const int next = ((volatile int *)labels)[x];
        labels[x] = r;
        x = next;
    }
    atomicAdd(&area[r], a);
}

// Step 4, as cc_filter_px in post.c: a pixel's tile root, then that root's
// final root (step 3), holds its component's area.
__global__ void cc_filter_kernel(uint8_t *__restrict__ mask, int n, const int *__restrict__ labels,
                                 const uint32_t *__restrict__ area, int64_t min_area) {
    ck_pdl_enter();
    const int i = (int)(blockIdx.x * blockDim.x + threadIdx.x);
    if (i >= n) return;
    mask[i] = mask[i] && (int64_t)area[labels[labels[i]]] >= min_area ? 255 : 0;
}

} // namespace

extern "C" {

ckey_status ck_cuda_components_filter(uint8_t *mask, int h, int w, int64_t min_area, int32_t *labels, uint32_t *area,
                                      void *st, ckey_error *err) {
    if (h < 1 || w < 1 || (int64_t)h * w > INT32_MAX - 2) {
        if (err) {
            snprintf(err->message, sizeof err->message, "components: %d x %d pixels", h, w);
            err->status = CKEY_ERR_INVALID_ARG;
        }
        return CKEY_ERR_INVALID_ARG;
    }
    const cudaStream_t s = (cudaStream_t)st;
    const int n = h * w, tiles_x = (w + CC_TW - 1) / CC_TW, tiles_y = (h + CC_TH - 1) / CC_TH;
    ck_launch(cc_local_kernel, (unsigned)tiles_x * (unsigned)tiles_y, dim3(CC_TW, CC_TH), 0, s,
              (const uint8_t *)mask, h, w, tiles_x, (int *)labels, area);
    const int64_t rows = (int64_t)(tiles_y - 1) * w, cols = (int64_t)(tiles_x - 1) * h;
    if (rows > 0)
        ck_launch(cc_merge_rows_kernel, blocks_for(rows, 256), 256, 0, s, (const uint8_t *)mask, w, rows,
                  (int *)labels);
    if (cols > 0)
        ck_launch(cc_merge_cols_kernel, blocks_for(cols, 256), 256, 0, s, (const uint8_t *)mask, h, w, cols,
                  (int *)labels);
    ck_launch(cc_roots_kernel, blocks_for(n, 256), 256, 0, s, n, (int *)labels, area);
    ck_launch(cc_filter_kernel, blocks_for(n, 256), 256, 0, s, mask, n, (const int *)labels,
              (const uint32_t *)area, min_area);
    return launched(err, "components");
}

} // extern "C"
