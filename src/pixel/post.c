/*
 * Official per-frame post-processing (see post.h). The despeckle works on
 * bytes exactly as upstream's cv2 calls do (uint8 mask, integer dilation and
 * OpenCV's bit-exact fixed-point Gaussian), so the only float rounding left is
 * the final alpha * (mask / 255), which matches numpy's float32 evaluation.
 */
#include "pixel/post.h"

#include <math.h>
#include <string.h>

#include "core/core.h"
#include "pixel/pixel.h"

/* ----------------------------------------------------------------- despill */

/* numpy's np.maximum propagates NaN; keep that so a NaN pixel stays visible
 * instead of silently becoming "no spill". */
static inline float max0_nan(float d) { return (d > 0.0f || d != d) ? d : 0.0f; }

static inline void despill_px(float *r, float *g, float *b, double strength) {
    float r0 = *r, g0 = *g, b0 = *b;
    float limit = (r0 + b0) / 2.0f;
    float spill = max0_nan(g0 - limit);
    float rn = r0 + spill * 0.5f, gn = g0 - spill, bn = b0 + spill * 0.5f;
    if (strength < 1.0) {
        /* numpy evaluates `1.0 - strength` in double, then the product in
         * float32 (a Python float is a weak scalar against a float32 array). */
        float keep = (float)(1.0 - strength), s = (float)strength;
        rn = r0 * keep + rn * s;
        gn = g0 * keep + gn * s;
        bn = b0 * keep + bn * s;
    }
    *r = rn;
    *g = gn;
    *b = bn;
}

void ck_despill_span(float *fg, size_t plane, size_t begin, size_t end, double strength) {
    if (!(strength > 0.0)) return; /* upstream: strength <= 0 returns the input */
    float *r = fg, *g = fg + plane, *b = fg + 2 * plane;
    for (size_t i = begin; i < end; i++) despill_px(&r[i], &g[i], &b[i], strength);
}

void ck_despill(float *fg, size_t plane, double strength) {
    ck_despill_span(fg, plane, 0, plane, strength);
}

/* ------------------------------------------------------ connected components */

static int dims_ok(int32_t h, int32_t w) {
    return h > 0 && w > 0 && (int64_t)h * w <= INT32_MAX - 2;
}

/* Upper bound on provisional labels of the first pass over `rows` rows. With
 * 8-connectivity a new label needs W, NW, N and NE all background, so each
 * aligned 2x2 block holds at most one; 4-connectivity allows a checkerboard
 * (half the pixels). The 4-connected bound covers both. */
static size_t max_labels(int32_t rows, int32_t w) {
    return ((size_t)rows * (size_t)w + 1) / 2 + 1;
}

/* The rows are labelled in up to CC_STRIPS strips of at least CC_STRIP_ROWS
 * rows each, in parallel; each strip's labels take their own range. */
enum { CC_STRIPS = 64, CC_STRIP_ROWS = 64 };

/* Label slots of all strips: each strip's bound, summed, is at most
 * (n + CC_STRIPS) / 2 + CC_STRIPS, plus label 0. */
static size_t label_slots(int32_t h, int32_t w) {
    return ((size_t)h * (size_t)w + CC_STRIPS) / 2 + CC_STRIPS + 1;
}

size_t ck_components_scratch_bytes(int32_t h, int32_t w) {
    if (!dims_ok(h, w)) return 0;
    size_t n = (size_t)h * (size_t)w;
    /* labels [n], then parent and area [label_slots] each */
    return sizeof(int32_t) * (n + 2 * label_slots(h, w));
}

static int32_t uf_find(int32_t *parent, int32_t x) {
    while (parent[x] != x) {
        parent[x] = parent[parent[x]]; /* path halving keeps trees shallow */
        x = parent[x];
    }
    return x;
}

/* Link so that the smaller label is the root: every label's parent is then
 * no larger than itself, and the flattening pass below resolves every label
 * in one increasing sweep. */
static int32_t uf_union(int32_t *parent, int32_t a, int32_t b) {
    a = uf_find(parent, a);
    b = uf_find(parent, b);
    if (a < b) {
        parent[b] = a;
        return a;
    }
    parent[a] = b;
    return b;
}

typedef struct cc_job {
    const uint8_t *mask;
    uint8_t *out;
    int32_t *labels, *parent, *area;
    int32_t h, w, conn, strips, rows; /* strip s: rows [s rows, min(h, (s + 1) rows)) */
    int32_t first[CC_STRIPS], next[CC_STRIPS]; /* strip s's labels: [first, next) */
    int64_t min_area;
} cc_job;

/* Pass 1 over strips [b, e): provisional labels from the neighbours already
 * scanned within the strip (its first row looks at nothing above), unions in
 * the strip's own label range. */
static void cc_label_strips(void *ctx, int64_t b, int64_t e, int thread) {
    (void)thread;
    cc_job *j = ctx;
    const int32_t w = j->w;
    for (int64_t s = b; s < e; s++) {
        const int32_t y0 = (int32_t)s * j->rows, y1 = y0 + j->rows < j->h ? y0 + j->rows : j->h;
        int32_t next = j->first[s];
        for (int32_t y = y0; y < y1; y++) {
            const uint8_t *m = j->mask + (size_t)y * w;
            int32_t *l = j->labels + (size_t)y * w;
            const int32_t *lu = y > y0 ? l - w : NULL;
            for (int32_t x = 0; x < w; x++) {
                if (!m[x]) {
                    l[x] = 0;
                    continue;
                }
                int32_t lab = 0;
                int32_t nb[4];
                int k = 0;
                if (x > 0) nb[k++] = l[x - 1];
                if (lu) {
                    nb[k++] = lu[x];
                    if (j->conn == 8) {
                        if (x > 0) nb[k++] = lu[x - 1];
                        if (x + 1 < w) nb[k++] = lu[x + 1];
                    }
                }
                for (int i = 0; i < k; i++) {
                    if (!nb[i]) continue;
                    lab = lab ? uf_union(j->parent, lab, nb[i]) : nb[i];
                }
                if (!lab) {
                    lab = next;
                    j->parent[next] = next;
                    next++;
                }
                l[x] = lab;
            }
        }
        j->next[s] = next;
    }
}

/* Pixels per provisional label, over the strips [b, e) (a label belongs to
 * one strip, so no two threads count the same one). */
static void cc_count_strips(void *ctx, int64_t b, int64_t e, int thread) {
    (void)thread;
    cc_job *j = ctx;
    for (int64_t s = b; s < e; s++) {
        const int32_t y0 = (int32_t)s * j->rows, y1 = y0 + j->rows < j->h ? y0 + j->rows : j->h;
        for (int32_t i = j->first[s]; i < j->next[s]; i++) j->area[i] = 0;
        const int32_t *l = j->labels + (size_t)y0 * j->w;
        const size_t n = (size_t)(y1 - y0) * (size_t)j->w;
        for (size_t i = 0; i < n; i++)
            if (l[i]) j->area[l[i]]++;
    }
}

static void cc_filter_px(void *ctx, int64_t b, int64_t e, int thread) {
    (void)thread;
    const cc_job *j = ctx;
    for (int64_t i = b; i < e; i++) {
        const int32_t l = j->labels[i];
        j->out[i] = (l && j->area[j->parent[l]] >= j->min_area) ? 255 : 0;
    }
}

int32_t ck_components_filter_pool(uint8_t *mask, int32_t h, int32_t w, int connectivity, int64_t min_area,
                                  void *scratch, ck_pool *pool) {
    if (!mask || !scratch || !dims_ok(h, w) || (connectivity != 4 && connectivity != 8))
        return -1;
    const size_t n = (size_t)h * (size_t)w;
    cc_job j = {.mask = mask, .out = mask, .h = h, .w = w, .conn = connectivity, .min_area = min_area};
    j.labels = (int32_t *)scratch;
    j.parent = j.labels + n;
    j.area = j.parent + label_slots(h, w);
    int32_t strips = pool ? h / CC_STRIP_ROWS : 1;
    if (strips > CC_STRIPS) strips = CC_STRIPS;
    if (strips < 1) strips = 1;
    j.rows = (h + strips - 1) / strips;
    j.strips = (h + j.rows - 1) / j.rows;
    j.parent[0] = 0;
    for (int32_t s = 0, first = 1; s < j.strips; s++) {
        const int32_t y0 = s * j.rows, rows = y0 + j.rows < h ? j.rows : h - y0;
        j.first[s] = first;
        first += (int32_t)max_labels(rows, w);
    }
    ck_pool_for(pool, j.strips, 1, cc_label_strips, &j);

    /* The strips joined: each strip's first row to the last row of the one above. */
    for (int32_t s = 1; s < j.strips; s++) {
        const int32_t *l = j.labels + (size_t)s * j.rows * w, *lu = l - w;
        for (int32_t x = 0; x < w; x++) {
            if (!l[x]) continue;
            if (lu[x]) uf_union(j.parent, l[x], lu[x]);
            if (connectivity == 8) {
                if (x > 0 && lu[x - 1]) uf_union(j.parent, l[x], lu[x - 1]);
                if (x + 1 < w && lu[x + 1]) uf_union(j.parent, l[x], lu[x + 1]);
            }
        }
    }

    /* Flatten: roots are the smallest label of their set, so parent[i] < i
     * is already final when visited in increasing order. */
    int32_t count = 0;
    for (int32_t s = 0; s < j.strips; s++)
        for (int32_t i = j.first[s]; i < j.next[s]; i++) {
            const int32_t p = j.parent[i];
            j.parent[i] = p == i ? i : j.parent[p];
            if (j.parent[i] == i) count++;
        }

    /* Pass 2: areas per provisional label, summed into their roots, then
     * keep or clear each pixel. */
    ck_pool_for(pool, j.strips, 1, cc_count_strips, &j);
    for (int32_t s = 0; s < j.strips; s++)
        for (int32_t i = j.first[s]; i < j.next[s]; i++)
            if (j.parent[i] != i) j.area[j.parent[i]] += j.area[i];
    ck_pool_for(pool, (int64_t)n, 65536, cc_filter_px, &j);
    return count;
}

int32_t ck_components_filter(uint8_t *mask, int32_t h, int32_t w, int connectivity, int64_t min_area,
                             void *scratch) {
    return ck_components_filter_pool(mask, h, w, connectivity, min_area, scratch, NULL);
}

/* ---------------------------------------------------------------- dilation */

void ck_ellipse_halfwidths(int32_t radius, int32_t *dx) {
    /* OpenCV: r = c = ksize/2, dx = saturate_cast<int>(c * sqrt((r^2 - dy^2) /
     * r^2)), a round-half-to-even conversion; the row spans [c-dx, c+dx]. */
    if (radius <= 0) {
        dx[0] = 0;
        return;
    }
    double r = radius, inv_r2 = 1.0 / (r * r);
    for (int32_t i = 0; i <= 2 * radius; i++) {
        int32_t dy = i - radius;
        double v = r * sqrt((double)(radius * radius - dy * dy) * inv_r2);
        int32_t d = (int32_t)nearbyint(v);
        dx[i] = d > radius ? radius : d;
    }
}

/* The two row-parallel steps of the ellipse dilation. */
typedef struct dilate_job {
    const uint8_t *src;
    uint8_t *dst;
    uint16_t *dist; /* in the caller's int32 scratch, which holds twice as many */
    int32_t h, w, rr;
    const int32_t *dx;
} dilate_job;

/* Integer loops that the compiler widens to the CPU's vectors (exact
 * whatever the width). */
#define VEC_INT __attribute__((target_clones("avx2", "default")))

/* dist = horizontal distance to the nearest set pixel of the same row, or
 * 65535 when it has none (a row is at most 32768 wide) */
VEC_INT static void dilate_dist_rows(void *ctx, int64_t y0, int64_t y1, int thread) {
    (void)thread;
    const dilate_job *j = ctx;
    const int32_t w = j->w;
    for (int64_t y = y0; y < y1; y++) {
        const uint8_t *s = j->src + (size_t)y * w;
        uint16_t *d = j->dist + (size_t)y * w;
        int32_t last = -65536;
        for (int32_t x = 0; x < w; x++) {
            if (s[x]) last = x;
            const int32_t v = x - last;
            d[x] = (uint16_t)(v > 65535 ? 65535 : v);
        }
        last = w + 65536;
        for (int32_t x = w - 1; x >= 0; x--) {
            if (s[x]) last = x;
            if (last - x < d[x]) d[x] = (uint16_t)(last - x);
        }
    }
}

VEC_INT static void dilate_out_rows(void *ctx, int64_t y0, int64_t y1, int thread) {
    (void)thread;
    const dilate_job *j = ctx;
    const int32_t w = j->w, h = j->h, rr = j->rr;
    for (int64_t y = y0; y < y1; y++) {
        uint8_t *o = j->dst + (size_t)y * w;
        memset(o, 0, (size_t)w);
        for (int32_t dy = -rr; dy <= rr; dy++) {
            const int64_t yy = y + dy;
            if (yy < 0 || yy >= h) continue;
            const uint16_t *d = j->dist + (size_t)yy * w;
            /* sides are at most 32768, so 65534 reaches any set pixel but not "none" */
            const uint16_t lim = (uint16_t)(j->dx[dy + rr] > 65534 ? 65534 : j->dx[dy + rr]);
            for (int32_t x = 0; x < w; x++) o[x] |= (uint8_t)(d[x] <= lim ? 255 : 0);
        }
    }
}

/* Rows a chunk of a row-parallel step should hold at least: about 64 KiB of
 * pixels, so that a chunk is worth a thread's wake-up. */
static int64_t row_grain(int32_t w) { return 1 + 65536 / ((int64_t)w + 1); }

static void dilate_ellipse(const uint8_t *src, uint8_t *dst, int32_t h, int32_t w, int32_t radius,
                           int32_t *dist, ck_pool *pool) {
    size_t n = (size_t)h * (size_t)w;
    if (radius <= 0) {
        if (dst != src) memmove(dst, src, n);
        return;
    }
    /* The ellipse is a stack of horizontal runs, so out(y, x) is set iff
     * some kernel row dy has dist(y + dy, x) <= dx. All of
     * dist is computed before any output row is written, so dst may be src. */
    int32_t dx[2 * 255 + 1];
    int32_t rr = radius;
    /* Rows beyond +-h never touch the image; clamp so the table stays small. */
    if (rr > h) rr = h;
    if (rr > 255) rr = 255;
    int32_t full[2 * 255 + 1];
    if (radius <= 255) {
        ck_ellipse_halfwidths(radius, full);
        for (int32_t i = -rr; i <= rr; i++) dx[i + rr] = full[i + radius];
    } else {
        /* Very large radii: evaluate the same formula row by row. */
        double r = radius, inv_r2 = 1.0 / (r * r);
        for (int32_t i = -rr; i <= rr; i++) {
            double v = r * sqrt(((double)radius * radius - (double)i * i) * inv_r2);
            dx[i + rr] = (int32_t)nearbyint(v);
        }
    }
    dilate_job j = {src, dst, (uint16_t *)(void *)dist, h, w, rr, dx};
    ck_pool_for(pool, h, row_grain(w), dilate_dist_rows, &j);
    ck_pool_for(pool, h, 1 + row_grain(w) / (2 * rr + 1), dilate_out_rows, &j);
}

void ck_dilate_ellipse(const uint8_t *src, uint8_t *dst, int32_t h, int32_t w,
                       int32_t radius, int32_t *dist) {
    dilate_ellipse(src, dst, h, w, radius, dist, NULL);
}

/* ------------------------------------------------------------ Gaussian blur */

int ck_gaussian_kernel_q8(int32_t ksize, double sigma, uint32_t *k) {
    if (ksize <= 0 || ksize % 2 == 0 || ksize > 255) return -1;
    if (sigma <= 0) {
        /* OpenCV's fixed small kernels for the default sigma, as Q8. */
        static const uint32_t t1[] = {256}, t3[] = {64, 128, 64},
                              t5[] = {16, 64, 96, 64, 16},
                              t7[] = {8, 28, 56, 72, 56, 28, 8};
        const uint32_t *t = ksize == 1 ? t1 : ksize == 3 ? t3 : ksize == 5 ? t5 : ksize == 7 ? t7 : NULL;
        if (t) {
            memcpy(k, t, sizeof *k * (size_t)ksize);
            return 0;
        }
    }
    /* sigma = n * 0.15 + 0.35 (OpenCV's soft-float mulAdd, hence fma), which
     * equals 0.3 * ((n - 1) / 2 - 1) + 0.8; x runs over doubled offsets, hence
     * the extra 0.25 in the exponent scale. The centre tap is exp(0) = 1. */
    double s = sigma > 0 ? sigma : fma((double)ksize, 0.15, 0.35);
    double scale = -0.125 / (s * s);
    int32_t half = ksize / 2;
    double v[128], sum = 0;
    for (int32_t i = 0, x = 1 - ksize; i < half; i++, x += 2) {
        v[i] = exp((double)(x * x) * scale);
        sum += v[i];
    }
    sum = sum * 2 + 1.0;
    /* Quantize the outer taps to Q8 with error diffusion and give the centre
     * the remainder, so the weights sum to exactly 256 (a flat image stays
     * flat). Plain rounding would differ for ksize 11, the official size. */
    double err = 0;
    int64_t side = 0;
    for (int32_t i = 0; i < half; i++) {
        double adj = v[i] / sum * 256.0 + err;
        double q = nearbyint(adj);
        err = adj - q;
        k[i] = k[ksize - 1 - i] = (uint32_t)q;
        side += (int64_t)q;
    }
    int64_t centre = 256 - 2 * side;
    k[half] = centre < 0 ? 0 : (uint32_t)centre;
    return 0;
}

/* OpenCV borderInterpolate for BORDER_REFLECT_101 (gfedcb|abcdefgh|gfedcba),
 * including repeated reflection when the kernel is wider than the image. */
static int32_t reflect101(int32_t p, int32_t len) {
    if (len == 1) return 0;
    while (p < 0 || p >= len) {
        if (p < 0)
            p = -p;
        else
            p = 2 * (len - 1) - p;
    }
    return p;
}

typedef struct blur_job {
    const uint8_t *src;
    uint8_t *dst;
    uint32_t *tmp;
    int32_t h, w, nx, ny;
    const uint32_t *kx, *ky;
} blur_job;

/* Row pass: exact Q8 sums (<= 255 * 257, no rounding); the interior tap
 * by tap over the row, the borders reflected. */
VEC_INT static void blur_rows(void *ctx, int64_t y0, int64_t y1, int thread) {
    (void)thread;
    const blur_job *j = ctx;
    const int32_t w = j->w, nx = j->nx, rx = nx / 2;
    for (int64_t y = y0; y < y1; y++) {
        const uint8_t *s = j->src + (size_t)y * w;
        uint32_t *t = j->tmp + (size_t)y * w;
        const int32_t x0 = rx < w ? rx : w, x1 = w - rx > x0 ? w - rx : x0; /* [x0, x1): no reflection */
        for (int32_t x = x0; x < x1; x++) t[x] = 0;
        for (int32_t k = 0; k < nx; k++) {
            const uint32_t kk = j->kx[k];
            const uint8_t *sk = s - rx + k;
            for (int32_t x = x0; x < x1; x++) t[x] += kk * sk[x];
        }
        for (int32_t x = 0; x < w; x++) {
            if (x == x0) x = x1;
            if (x >= w) break;
            uint32_t acc = 0;
            for (int32_t k = 0; k < nx; k++) acc += j->kx[k] * s[reflect101(x - rx + k, w)];
            t[x] = acc;
        }
    }
}

/* Column pass: Q16 sums, rounded half up once, saturated to a byte. A row
 * pass value is at most 255 * 256 and the weights sum to 256, so a sum
 * stays below 2^24: 32 bits hold it exactly. */
VEC_INT static void blur_cols(void *ctx, int64_t y0, int64_t y1, int thread) {
    (void)thread;
    const blur_job *j = ctx;
    const int32_t w = j->w, h = j->h, ny = j->ny, ry = ny / 2;
    const uint32_t *rows[255];
    for (int64_t y = y0; y < y1; y++) {
        for (int32_t i = 0; i < ny; i++) rows[i] = j->tmp + (size_t)reflect101((int32_t)y - ry + i, h) * w;
        uint8_t *o = j->dst + (size_t)y * w;
        for (int32_t x = 0; x < w; x++) {
            uint32_t acc = 32768u;
            for (int32_t i = 0; i < ny; i++) acc += j->ky[i] * rows[i][x];
            const uint32_t v = acc >> 16;
            o[x] = (uint8_t)(v > 255 ? 255 : v);
        }
    }
}

static void gaussian_blur_u8(const uint8_t *src, uint8_t *dst, int32_t h, int32_t w, int32_t ksize,
                             double sigma, uint32_t *tmp, ck_pool *pool) {
    uint32_t kx[255], ky[255];
    /* OpenCV drops the blur along a 1-pixel axis (non-constant borders). */
    int32_t nx = w == 1 ? 1 : ksize, ny = h == 1 ? 1 : ksize;
    if (ck_gaussian_kernel_q8(nx, nx == 1 ? 0 : sigma, kx) != 0 ||
        ck_gaussian_kernel_q8(ny, ny == 1 ? 0 : sigma, ky) != 0)
        return;
    /* every row pass is done before the column pass, so dst may be src */
    blur_job j = {src, dst, tmp, h, w, nx, ny, kx, ky};
    ck_pool_for(pool, h, row_grain(w) / nx + 1, blur_rows, &j);
    ck_pool_for(pool, h, row_grain(w) / ny + 1, blur_cols, &j);
}

void ck_gaussian_blur_u8(const uint8_t *src, uint8_t *dst, int32_t h, int32_t w,
                         int32_t ksize, double sigma, uint32_t *tmp) {
    gaussian_blur_u8(src, dst, h, w, ksize, sigma, tmp, NULL);
}

/* ------------------------------------------------------------- clean matte */

size_t ck_clean_matte_scratch_bytes(int32_t h, int32_t w) {
    size_t c = ck_components_scratch_bytes(h, w);
    if (!c) return 0;
    return c + (size_t)h * (size_t)w; /* + the byte mask */
}

typedef struct matte_job {
    const float *alpha;
    float *out;
    uint8_t *mask;
} matte_job;

static void threshold_px(void *ctx, int64_t b, int64_t e, int thread) {
    (void)thread;
    const matte_job *j = ctx;
    for (int64_t i = b; i < e; i++) j->mask[i] = j->alpha[i] > CK_DESPECKLE_THRESHOLD ? 255 : 0;
}

/* numpy: mask.astype(float32) / 255.0 (float32 division), then alpha * it */
static void apply_mask_px(void *ctx, int64_t b, int64_t e, int thread) {
    (void)thread;
    const matte_job *j = ctx;
    for (int64_t i = b; i < e; i++) j->out[i] = j->alpha[i] * ((float)j->mask[i] / 255.0f);
}

static ckey_status clean_matte(const float *alpha, float *out, int32_t h, int32_t w, int64_t area_threshold,
                               int32_t dilation, int32_t blur_size, void *scratch, ck_pool *pool) {
    if (!alpha || !out || !scratch || !dims_ok(h, w) || blur_size > 127)
        return CKEY_ERR_INVALID_ARG;
    size_t n = (size_t)h * (size_t)w;
    size_t comp_bytes = ck_components_scratch_bytes(h, w);
    /* The labels block (int32 [n]) at the start of the component scratch is
     * free once the components are filtered; dilation and blur reuse it. */
    int32_t *work = (int32_t *)scratch;
    matte_job j = {alpha, out, (uint8_t *)scratch + comp_bytes};
    ck_pool_for(pool, (int64_t)n, 65536, threshold_px, &j);
    if (ck_components_filter_pool(j.mask, h, w, 8, area_threshold, scratch, pool) < 0) return CKEY_ERR_INTERNAL;
    if (dilation > 0) dilate_ellipse(j.mask, j.mask, h, w, dilation, work, pool);
    if (blur_size > 0) gaussian_blur_u8(j.mask, j.mask, h, w, 2 * blur_size + 1, 0.0, (uint32_t *)work, pool);
    ck_pool_for(pool, (int64_t)n, 65536, apply_mask_px, &j);
    return CKEY_OK;
}

ckey_status ck_clean_matte(const float *alpha, float *out, int32_t h, int32_t w,
                           int64_t area_threshold, int32_t dilation, int32_t blur_size,
                           void *scratch) {
    return clean_matte(alpha, out, h, w, area_threshold, dilation, blur_size, scratch, NULL);
}

/* -------------------------------------------------------- despeckle, torch */

/* One round function of the label Feistel network (a 32-bit mix). */
static uint32_t feistel_f(uint32_t x, uint32_t key) {
    x ^= key;
    x *= 0x9E3779B1u;
    x ^= x >> 15;
    x *= 0x85EBCA77u;
    x ^= x >> 13;
    return x;
}

uint32_t ck_torch_label(uint32_t i, uint32_t n) {
    /* A bijection on [0, 2^(2 half)) >= n, applied until the value falls in
     * [0, n): cycle walking keeps it a bijection on [0, n). */
    int half = 1;
    while (((uint64_t)1 << (2 * half)) < (uint64_t)n) half++;
    const uint32_t mask = (uint32_t)(((uint64_t)1 << half) - 1);
    static const uint32_t keys[4] = {0x243F6A88u, 0x85A308D3u, 0x13198A2Eu, 0x03707344u};
    uint32_t v = i;
    do {
        uint32_t l = v >> half, r = v & mask;
        for (int k = 0; k < 4; k++) {
            uint32_t t = r;
            r = l ^ (feistel_f(r, keys[k]) & mask);
            l = t;
        }
        v = (l << half) | r;
    } while (v >= n);
    return v + 1;
}

int ck_gaussian_kernel_torch(int32_t ksize, float *k) {
    if (ksize <= 0 || ksize % 2 == 0 || ksize > 255) return -1;
    /* torchvision: sigma = ksize * 0.15 + 0.35; x = linspace(-lim, lim) with
     * lim = (ksize - 1) / (2 sqrt 2), i.e. x_i = (i - ksize / 2) / sqrt 2;
     * softmax(-(x / sigma)^2). Evaluated in double and rounded once; torch
     * works in float32, which moves a weight by an ulp or so. */
    const double sigma = (double)ksize * 0.15 + 0.35;
    const int32_t half = ksize / 2;
    double v[255], sum = 0;
    for (int32_t i = 0; i < ksize; i++) {
        const double x = (double)(i - half) / sqrt(2.0) / sigma;
        v[i] = exp(-x * x);
        sum += v[i];
    }
    for (int32_t i = 0; i < ksize; i++) k[i] = (float)(v[i] / sum);
    return 0;
}

size_t ck_clean_matte_torch_scratch_bytes(int32_t h, int32_t w) {
    if (!dims_ok(h, w)) return 0;
    const size_t n = (size_t)h * (size_t)w;
    /* labels [n] and a second uint32 plane [n + 1] (row maxima, then label
     * counts, then the blur's row pass as float), two byte masks [n] */
    return sizeof(uint32_t) * (2 * n + 1) + 2 * n;
}

/* One round of the label propagation: cur <- (max over the 9 x 9 window of
 * cur) on mask pixels. `rowmax` is scratch [n]. Returns whether anything
 * changed. */
static int propagate_round(uint32_t *cur, uint32_t *rowmax, const uint8_t *mask, int32_t h,
                           int32_t w, int32_t r) {
    for (int32_t y = 0; y < h; y++) {
        const uint32_t *c = cur + (size_t)y * w;
        uint32_t *m = rowmax + (size_t)y * w;
        for (int32_t x = 0; x < w; x++) {
            const int32_t x0 = x - r < 0 ? 0 : x - r, x1 = x + r >= w ? w - 1 : x + r;
            uint32_t v = 0;
            for (int32_t j = x0; j <= x1; j++) v = c[j] > v ? c[j] : v;
            m[x] = v;
        }
    }
    int changed = 0;
    for (int32_t y = 0; y < h; y++) {
        const int32_t y0 = y - r < 0 ? 0 : y - r, y1 = y + r >= h ? h - 1 : y + r;
        uint32_t *c = cur + (size_t)y * w;
        const uint8_t *mk = mask + (size_t)y * w;
        for (int32_t x = 0; x < w; x++) {
            if (!mk[x]) continue;
            uint32_t v = 0;
            for (int32_t i = y0; i <= y1; i++) {
                const uint32_t t = rowmax[(size_t)i * w + x];
                v = t > v ? t : v;
            }
            /* v >= c[x] since the window holds x itself; the synchronous
             * update is safe in place because rowmax holds the old values */
            if (v != c[x]) {
                c[x] = v;
                changed = 1;
            }
        }
    }
    return changed;
}

/* Square dilation of a 0/1 byte mask by radius r (Chebyshev), pixels outside
 * the image never contributing: rows, then columns. src -> dst via tmp. */
static void dilate_square(uint8_t *m, uint8_t *tmp, int32_t h, int32_t w, int32_t r) {
    for (int32_t y = 0; y < h; y++) {
        const uint8_t *s = m + (size_t)y * w;
        uint8_t *t = tmp + (size_t)y * w;
        int32_t last = -1 - r; /* last set column seen from the left */
        for (int32_t x = 0; x < w; x++) {
            if (s[x]) last = x;
            t[x] = x - last <= r;
        }
        last = w + r; /* from the right */
        for (int32_t x = w - 1; x >= 0; x--) {
            if (s[x]) last = x;
            if (last - x <= r) t[x] = 1;
        }
    }
    for (int32_t x = 0; x < w; x++) {
        int32_t last = -1 - r;
        for (int32_t y = 0; y < h; y++) {
            if (tmp[(size_t)y * w + x]) last = y;
            m[(size_t)y * w + x] = y - last <= r;
        }
        last = h + r;
        for (int32_t y = h - 1; y >= 0; y--) {
            if (tmp[(size_t)y * w + x]) last = y;
            if (last - y <= r) m[(size_t)y * w + x] = 1;
        }
    }
}

ckey_status ck_clean_matte_torch(const float *alpha, float *out, int32_t h, int32_t w,
                                 int64_t area_threshold, int32_t dilation, int32_t blur_size,
                                 const uint32_t *labels, void *scratch) {
    if (!alpha || !out || !scratch || !dims_ok(h, w) || blur_size > 127 || area_threshold < 0)
        return CKEY_ERR_INVALID_ARG;
    const size_t n = (size_t)h * (size_t)w;
    uint32_t *comp = (uint32_t *)scratch;
    uint32_t *aux = comp + n; /* [n + 1] */
    uint8_t *mask = (uint8_t *)(aux + n + 1);
    uint8_t *keep = mask + n;

    for (size_t i = 0; i < n; i++) {
        mask[i] = alpha[i] > CK_TORCH_DESPECKLE_THRESHOLD;
        comp[i] = mask[i] ? (labels ? labels[i] : ck_torch_label((uint32_t)i, (uint32_t)n)) : 0;
        if (labels && mask[i] && (labels[i] < 1 || labels[i] > n)) return CKEY_ERR_INVALID_ARG;
    }
    const int64_t rounds = area_threshold / 20;
    for (int64_t k = 0; k < rounds; k++)
        if (!propagate_round(comp, aux, mask, h, w, CK_TORCH_COMPONENT_DISTANCE)) break;

    /* torch.bincount over the labels; label 0 (background) is never kept */
    memset(aux, 0, sizeof *aux * (n + 1));
    for (size_t i = 0; i < n; i++) aux[comp[i]]++;
    for (size_t i = 0; i < n; i++) keep[i] = comp[i] && (int64_t)aux[comp[i]] >= area_threshold;

    const int32_t radius = 2 * (dilation / 2);
    if (dilation > 0 && radius > 0) dilate_square(keep, mask, h, w, radius);

    if (blur_size > 0) {
        const int32_t ks = 2 * blur_size + 1, r = blur_size;
        float k[255];
        if (ck_gaussian_kernel_torch(ks, k) != 0) return CKEY_ERR_INVALID_ARG;
        float *rows = (float *)aux; /* [n] */
        for (int32_t y = 0; y < h; y++) {
            const uint8_t *s = keep + (size_t)y * w;
            float *t = rows + (size_t)y * w;
            for (int32_t x = 0; x < w; x++) {
                double acc = 0;
                for (int32_t j = 0; j < ks; j++) acc += (double)k[j] * s[reflect101(x - r + j, w)];
                t[x] = (float)acc;
            }
        }
        for (int32_t y = 0; y < h; y++)
            for (int32_t x = 0; x < w; x++) {
                double acc = 0;
                for (int32_t i = 0; i < ks; i++)
                    acc += (double)k[i] * rows[(size_t)reflect101(y - r + i, h) * w + x];
                const size_t p = (size_t)y * w + x;
                out[p] = alpha[p] * (float)acc;
            }
    } else {
        for (size_t i = 0; i < n; i++) out[i] = alpha[i] * (float)keep[i];
    }
    return CKEY_OK;
}

/* ------------------------------------------------------------- comp pieces */

float ck_checker_srgb(int32_t y, int32_t x) {
    return ((x / CK_CHECKER_SIZE + y / CK_CHECKER_SIZE) % 2) ? CK_CHECKER_LIGHT : CK_CHECKER_DARK;
}

float ck_composite_straight1(float fg, float bg, float alpha) {
    return fg * alpha + bg * (1.0f - alpha);
}

/* ----------------------------------------------------------- official frame */

void ck_post_options_default(ck_post_options *opt) {
    opt->despill_strength = 1.0;
    opt->despeckle = 1;
    opt->despeckle_area = CK_DESPECKLE_AREA_DEFAULT;
    opt->despeckle_mode = CK_DESPECKLE_OPENCV;
    opt->pool = NULL;
}

size_t ck_post_frame_scratch_bytes(int32_t h, int32_t w, const ck_post_options *opt) {
    if (!opt || !opt->despeckle) return 0;
    return opt->despeckle_mode == CK_DESPECKLE_TORCH ? ck_clean_matte_torch_scratch_bytes(h, w)
                                                     : ck_clean_matte_scratch_bytes(h, w);
}

/* Pixels a block of the per-pixel steps holds: a divisor of the checker
 * size, so a block lies in one square. */
#define PX_BLOCK 64

typedef struct frame_job {
    const float *fg, *pa;
    float *processed, *comp;
    int32_t w;
    size_t n;
    double strength;
    float bg_lin[2], bg_srgb[2];
} frame_job;

/*
 * B-F for rows [y0, y1), PX_BLOCK pixels at a time: despill (sRGB), to linear,
 * premultiply, comp. A block whose Processed alpha is all zero (the screen
 * around the subject, once despeckled) skips both powers: there lin * a is a
 * signed zero whose sign is that of lin's input (which the cheap stand-in
 * below keeps: 1 for a positive colour up to 4, whose lin is finite, 0 for a
 * negative one, which clamps to +0, the colour itself for +-0), and the comp
 * is linear_to_srgb(+-0 + bg * 1) = linear_to_srgb(bg) exactly. Colours
 * above 4 or NaN take the full path; both paths give the same floats.
 */
static void frame_rows(void *ctx, int64_t y0, int64_t y1, int thread) {
    (void)thread;
    const frame_job *j = ctx;
    const size_t n = j->n;
    float c[3][PX_BLOCK], cl[3][PX_BLOCK];
    for (int64_t y = y0; y < y1; y++) {
        for (int32_t x0 = 0; x0 < j->w; x0 += PX_BLOCK) {
            const int m = j->w - x0 < PX_BLOCK ? j->w - x0 : PX_BLOCK;
            const size_t i0 = (size_t)y * (size_t)j->w + (size_t)x0;
            const int sq = (int)(((x0 / CK_CHECKER_SIZE) + (y / CK_CHECKER_SIZE)) & 1);
            const float bg = j->bg_lin[sq];
            const float *a = j->pa + i0;
            int zero = 1;
            for (int k = 0; k < m; k++) {
                c[0][k] = j->fg[i0 + k];
                c[1][k] = j->fg[n + i0 + k];
                c[2][k] = j->fg[2 * n + i0 + k];
                if (j->strength > 0.0) despill_px(&c[0][k], &c[1][k], &c[2][k], j->strength);
                zero &= a[k] == 0.0f && c[0][k] <= 4.0f && c[1][k] <= 4.0f && c[2][k] <= 4.0f;
            }
            if (zero) {
                for (int ch = 0; ch < 3; ch++) {
                    float *pr = j->processed + (size_t)ch * n + i0;
                    for (int k = 0; k < m; k++) {
                        const float v = c[ch][k];
                        pr[k] = (v > 0.0f ? 1.0f : v < 0.0f ? 0.0f : v) * a[k];
                    }
                    if (j->comp)
                        for (int k = 0; k < m; k++) j->comp[(size_t)ch * n + i0 + k] = j->bg_srgb[sq];
                }
                continue;
            }
            for (int ch = 0; ch < 3; ch++) {
                float *lin = c[ch];
                ck_srgb_to_linear(lin, (size_t)m);
                float *pr = j->processed + (size_t)ch * n + i0;
                for (int k = 0; k < m; k++) {
                    pr[k] = lin[k] * a[k];
                    cl[ch][k] = ck_composite_straight1(lin[k], bg, a[k]);
                }
                if (j->comp) {
                    ck_linear_to_srgb(cl[ch], (size_t)m);
                    memcpy(j->comp + (size_t)ch * n + i0, cl[ch], (size_t)m * sizeof(float));
                }
            }
        }
    }
}

ckey_status ck_post_frame(const float *alpha, const float *fg, int32_t h, int32_t w,
                          const ck_post_options *opt, float *matte, float *fg_out,
                          float *processed, float *comp, void *scratch) {
    if (!alpha || !fg || !opt || !processed || !dims_ok(h, w) || (opt->despeckle && !scratch))
        return CKEY_ERR_INVALID_ARG;
    size_t n = (size_t)h * (size_t)w;
    float *pa = processed + 3 * n;

    /* A. matte cleanup into the Processed alpha plane */
    if (opt->despeckle) {
        ckey_status st =
            opt->despeckle_mode == CK_DESPECKLE_TORCH
                ? ck_clean_matte_torch(alpha, pa, h, w, opt->despeckle_area, CK_DESPECKLE_DILATION,
                                       CK_DESPECKLE_BLUR, NULL, scratch)
                : clean_matte(alpha, pa, h, w, opt->despeckle_area, CK_DESPECKLE_DILATION,
                              CK_DESPECKLE_BLUR, scratch, opt->pool);
        if (st != CKEY_OK) return st;
    } else {
        memcpy(pa, alpha, n * sizeof *pa);
    }

    /* The checkerboard in linear light, as upstream: float32 sRGB values
     * through srgb_to_linear. */
    frame_job j = {fg, pa, processed, comp, w, n, opt->despill_strength, {0}, {0}};
    for (int sq = 0; sq < 2; sq++) {
        j.bg_lin[sq] = ck_srgb_to_linear1(sq ? CK_CHECKER_LIGHT : CK_CHECKER_DARK);
        j.bg_srgb[sq] = ck_linear_to_srgb1(j.bg_lin[sq]);
    }
    ck_pool_for(opt->pool, h, row_grain(w), frame_rows, &j);

    /* Matte/ and FG/ carry the raw resized prediction upstream. Written last
     * so they may alias the inputs. */
    if (matte && matte != alpha) memmove(matte, alpha, n * sizeof *matte);
    if (fg_out && fg_out != fg) memmove(fg_out, fg, 3 * n * sizeof *fg_out);
    return CKEY_OK;
}
