/* Cutie's forward pass and inference core (cutie/model/cutie.py,
 * big_modules.py, transformer/ modules; cutie/inference/inference_core.py and
 * memory_manager.py), written once against the op table (backend/ops.h).
 *
 * Layouts: maps channels-last [h, w, C]; per-object maps [O, h, w, C]; the
 * masks and probabilities planes [O, H, W] at the padded size Hp x Wp; the
 * memory positions as rows (mk [N, CK], ms [N], mv [N, O*CV] object-major in
 * a row), as memory_read takes them. h, w = Hp/16, Wp/16.
 *
 * A frame runs in up to three parts: encode (pixel encoder, key projection),
 * segment (memory read, pixel fusion, object transformer, decoder) and
 * memorize (mask encoder, summaries, memory insertion). What outlives a
 * part (the frame's features, probabilities, the sensory, object and
 * working memories) has fixed buffers made with the tracker; each part's
 * temporaries are placed by the planner (core/plan.c), recorded once with
 * no op table, and the parts share one arena of the largest part's size. */
#include <assert.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "backend/backend.h"
#include "core/core.h"
#include "model/cutie.h"

enum { PART_ENCODE, PART_SEGMENT, PART_SEGMENT_UPDATE, PART_MEMORIZE, PART_COUNT };

struct ckey_tracker {
    const ckey_track_model *m; /* the host model, or dm: its copy on the device */
    ckey_track_options o;
    const ck_backend_i *bi;
    ck_backend *be;
    const ck_ops *ops;
    int W0, H0;     /* the frames' size */
    int Wi, Hi;     /* processed size (after max_internal_size) */
    int Wp, Hp;     /* padded to multiples of 16 */
    int pad_l, pad_t;
    int w, h, hw;   /* stride 16 */
    int O;          /* objects (0 before the first frame) */
    uint8_t objects[256]; /* their labels, in the first frame's order */
    int64_t cap;    /* working-memory positions */
    int64_t N;      /* working-memory positions in use */
    /* long-term memory: a bucket's rows [wbase - L, wbase) of its key store
     * and values sit just before its working memory's [wbase, wbase + N), so
     * that one read runs over [long-term, working] (the official order);
     * wbase = 0 without. L and N here are the first bucket's. */
    int lt;
    int64_t wbase, L;
    int64_t max_work, min_work; /* non-permanent working tokens that trigger / survive a consolidation */
    int ti, last_mem_ti, mem_frames;
    /* Buckets (the official KeyValueMemoryStore's): the objects a mask
     * brought together, objects bo0[b] .. bo0[b] + bno[b] - 1, each bucket
     * with its own memory (bucket_bank): keys and shrinkages in rows
     * [b * S, (b + 1) * S) of mk / ms, values [S, bno * CV] at float
     * S * bo0 * CV of mv (S = wbase + cap), its first memory frame
     * permanent; with long-term memory its own long-term store, usage and
     * consolidations. Bucket 0 is the first frame's (its N, L and memory
     * frames are N, L and mem_frames above); later ones come with objects a
     * later mask adds. */
    int nb;
    int bo0[256], bno[256], bmf[256];
    int64_t bN[256], bL[256];
    int objmem_n;   /* objects with an object memory (summaries) */
    int stagger[64], nstagger;
    /* fixed buffers (backend memory) */
    void *fixed;
    ck_tensor raw, resized, img, dec4, dec8, pix, key, shrink, sel, prob, sensory, objmem, mk, ms, mv;
    /* the masks' logits (a mask frame, between segment and memorize) and the
     * cropped result (after memorize): both at the arena's start, which no
     * part uses then */
    ck_tensor onehot, crop;
    /* row bands of the pixel encoder, the decoder and the mask encoder
     * (choose_bands); force_bands: set by ck_tracker_set_bands */
    int bands[3], force_bands;
    /* long-term mode, each bucket's (b at b * cap, b * wbase): the
     * non-permanent working entries' selection [cap, CK], usage and life
     * [cap] (index 0 = the row after the permanent frame); the long-term
     * rows' usage and life [wbase] (indexed by row); a read's usage
     * [wbase + cap] (one bucket's at a time) */
    ck_tensor wsel, wuse, wlife, luse, llife, usage;
    /* the parts' plans and their shared arena; the ops' workspace */
    ck_plan *plan[PART_COUNT];
    void *arena, *ws;
    size_t fixed_bytes, arena_bytes, ws_bytes; /* what fixed, arena and ws took */
    ck_op_needs needs;
    ck_cutie_tap_fn tap;
    void *tap_user;
    /* a device backend (CUDA): the weights' device copy and the model that
     * views it; host staging for the frame, the masks and readbacks */
    int dev;
    ckey_track_model dm;
    void *dweights;
    float *stage; /* [stage_floats] */
    int64_t stage_floats;
    size_t dweight_bytes, out_bytes; /* what dweights and out took */
    int64_t staging_bytes;           /* the host staging's bytes (stage, lt_host) */
    ck_tensor out;           /* [(O+1), H0, W0] the resized result (device; resizing only) */
    /* long-term memory on a device: wsel, wuse, wlife, luse and llife are host
     * memory (lt_host), and a read's usage and consolidation's rows pass
     * through lt_usage and lt_a / lt_b (lt_rows floats each) */
    float *lt_host, *lt_usage, *lt_a, *lt_b;
    int32_t *lt_idx;
    int64_t lt_rows;
};

/* ------------------------------------------------------------ op helpers */

/* One part's execution context: ops NULL while the planner records. */
typedef struct {
    const ck_ops *ops;
    ck_backend *be;
    ck_plan *plan;
    ckey_tracker *t;
} cx;

#define OP(x, name, ...)                                         \
    do {                                                         \
        if ((x)->ops) (x)->ops->name((x)->be, __VA_ARGS__);      \
    } while (0)

static ck_tensor A(cx *x, int64_t n, const char *tag) {
    return ck_tensor_of(ck_alloc(x->plan, (size_t)n * sizeof(float), tag), CK_F32);
}
static void R(cx *x, ck_tensor t) { ck_release(x->plan, t.data); }
static ck_tensor at(ck_tensor t, int64_t off) { return ck_tensor_at(t, off); }
static ck_tensor wt(ck_weight w) { return ck_tensor_of((void *)w.data, w.type); }
static const ck_tensor none = {NULL, CK_F32};

static void tap(cx *x, const char *name, ck_tensor v, int64_t n) {
    if (x->ops && x->t->tap) {
        float *host = malloc((size_t)n * sizeof(float));
        if (!host) return;
        x->ops->read(x->be, v, n, host);
        x->t->tap(x->t->tap_user, x->t->ti, name, host, n);
        free(host);
    }
}

/* conv c over n maps H x W (in pixels in_ld apart, out out_ld; 0: dense). */
static void conv_ld(cx *x, const ck_cconv *c, int n, int H, int W, ck_tensor in, int in_ld, ck_tensor out, int out_ld,
                    int flags) {
    ck_conv2d g = {n, H, W, c->cin, c->cout, c->k, c->stride, c->pad, 1, flags, in_ld, out_ld, 0, 0};
    OP(x, conv2d, &g, in, c->W, c->b, out);
}
static void conv(cx *x, const ck_cconv *c, int n, int H, int W, ck_tensor in, ck_tensor out, int flags) {
    conv_ld(x, c, n, H, W, in, 0, out, 0, flags);
}
/* A linear layer over `rows` rows. */
static void lin(cx *x, const ck_cconv *c, int64_t rows, ck_tensor in, ck_tensor out, int flags) {
    conv(x, c, 1, 1, (int)rows, in, out, flags);
}

/* ---------------------------------------------------------------- blocks */

/* ------------------------------------------------------------- row bands
 *
 * The encoders' stride-2 to stride-8 stages and the decoder run in bands of
 * output rows when a whole map would not fit the arena's budget
 * (choose_bands). Every op there is per pixel or a conv / pool / resize
 * over a few neighbouring rows (BatchNorm is folded: no statistics over
 * the map), so a band computed from enough rows above and below (its halo)
 * equals those rows of the whole map. A band's buffer at a level holds rows
 * [base, base + rows) of that level's map; an op run over a window of rows
 * pads at the window's edges as at the map's, so the rows next to a window
 * edge that is not the map's are wrong: the window of each op is the rows
 * that the rows asked of it need (need_rows), and those are right. */

typedef struct {
    void *mem;   /* the allocation (released by it) */
    ck_tensor d; /* row `base` */
    int base, rows;
} rowbuf;

static ck_tensor rows_at(rowbuf b, int row, int W, int C) {
    assert(row >= b.base && row <= b.base + b.rows);
    return at(b.d, (int64_t)(row - b.base) * W * C);
}
/* Whether rows [lo, hi) lie in b (the windows' invariant). */
static inline int has_rows(rowbuf b, int lo, int hi) { return lo >= b.base && hi <= b.base + b.rows && lo < hi; }

/* Output rows of a conv or pool (k, s, p) over `rows` rows. */
static int out_rows(int rows, int k, int s, int p) { return (rows + 2 * p - k) / s + 1; }

/* The input rows [*ilo, *ihi) of a map of Hin rows that output rows [lo, hi)
 * of a conv or pool (k, s, p) read, clamped to the map, the start a multiple
 * of s (so that the window's output rows are the map's, from *ilo / s). */
static void need_rows(int lo, int hi, int k, int s, int p, int Hin, int *ilo, int *ihi) {
    int a = s * lo - p, b = s * (hi - 1) - p + k;
    a = a < 0 ? 0 : a - a % s;
    *ilo = a, *ihi = b > Hin ? Hin : b;
}

/* The input rows a ResNet block over Hin rows needs for output rows [lo, hi). */
static void block_need(const ck_cresnet *r, const ck_cblock *b, int lo, int hi, int Hin, int *ilo, int *ihi) {
    if (r->bottleneck) { /* c1, c3 1x1 */
        need_rows(lo, hi, b->c2.k, b->c2.stride, b->c2.pad, Hin, ilo, ihi);
    } else {
        int m0, m1;
        need_rows(lo, hi, b->c2.k, 1, b->c2.pad, out_rows(Hin, b->c1.k, b->c1.stride, b->c1.pad), &m0, &m1);
        need_rows(m0, m1, b->c1.k, b->c1.stride, b->c1.pad, Hin, ilo, ihi);
    }
}

/* A block over rows [ilo, ihi) of cur (W pixels, c channels): its output
 * rows, those the window gives (a superset of the rows asked, block_need).
 * The shortcut is the window's own rows; without a downsample (stride 1,
 * same width) the block adds into cur in place. cur is released when the
 * block leaves it. */
static rowbuf block_rows(cx *x, const ck_cresnet *r, const ck_cblock *blk, int W, int c, rowbuf cur, int ilo,
                         int ihi) {
    const ck_cconv *sc = r->bottleneck ? &blk->c2 : &blk->c1, *last = r->bottleneck ? &blk->c3 : &blk->c2;
    const int s = sc->stride, n = ihi - ilo, Ho = out_rows(n, sc->k, s, sc->pad), Wo = out_rows(W, sc->k, s, sc->pad);
    assert(has_rows(cur, ilo, ihi));
    const ck_tensor in = rows_at(cur, ilo, W, c);
    ck_tensor t1 = A(x, (int64_t)(r->bottleneck ? n * W : Ho * Wo) * blk->c1.cout, "cutie.t1");
    conv(x, &blk->c1, 1, n, W, in, t1, CK_CONV_RELU_OUT);
    ck_tensor t2 = t1;
    if (r->bottleneck) {
        t2 = A(x, (int64_t)Ho * Wo * blk->c2.cout, "cutie.t2");
        conv(x, &blk->c2, 1, n, W, t1, t2, CK_CONV_RELU_OUT);
        R(x, t1);
    }
    rowbuf y = {NULL, none, ilo / s, Ho};
    if (blk->has_down) {
        y.d = A(x, (int64_t)Ho * Wo * last->cout, "cutie.block");
        y.mem = y.d.data;
        conv(x, &blk->down, 1, s * (Ho - 1) + 1, W, in, y.d, 0);
        ck_release(x->plan, cur.mem);
    } else { /* stride 1: rows [ilo, ihi) of cur */
        y.mem = cur.mem, y.d = in;
    }
    conv(x, last, 1, Ho, Wo, t2, y.d, CK_CONV_ACCUMULATE | CK_CONV_RELU_OUT);
    R(x, t2);
    return y;
}

/* A ResNet trunk (PixelEncoder / MaskEncoder up to layer3) over n maps of
 * H x W: returns its stride-16 features [n, H/16, W/16, C] (the caller
 * releases them). in: the pixel encoder's frame [H, W, 3], or for the mask
 * encoder (mask_enc) the frame that each map's [frame, mask, others] input
 * is made from, with masks [n, H, W], a band at a time. The pixel encoder
 * writes the decoder's projections of its stride-4 and stride-8 features
 * into t->dec4 and t->dec8. The stem to the first block of the last
 * stage run in `bands` bands of stride-16 rows; the last stage's other
 * blocks over the whole map, in place. */
static ck_tensor trunk(cx *x, const ck_cresnet *r, int n, int H, int W, ck_tensor in, int mask_enc, ck_tensor masks,
                       int bands) {
    const ck_tensor dec4 = mask_enc ? none : x->t->dec4, dec8 = mask_enc ? none : x->t->dec8;
    const ck_cutie_cfg *cf = &x->t->m->cfg;
    enum { MAXU = 2 + 2 * CK_CUTIE_MAX_BLOCKS + 1 };
    const ck_cblock *blk[MAXU];
    int Hl[MAXU + 1], Wl[MAXU + 1], Cl[MAXU + 1], nu = 0; /* unit u: input level u, output level u + 1 */
    Hl[0] = H, Wl[0] = W, Cl[0] = mask_enc ? 5 : 3;
    Hl[1] = out_rows(H, r->stem.k, r->stem.stride, r->stem.pad), Wl[1] = out_rows(W, r->stem.k, r->stem.stride, r->stem.pad);
    Cl[1] = r->stem.cout;
    Hl[2] = out_rows(Hl[1], 3, 2, 1), Wl[2] = out_rows(Wl[1], 3, 2, 1), Cl[2] = r->stem.cout;
    nu = 2;
    int end4 = 0, end8 = 0; /* the units that end stages 1 and 2 */
    for (int st = 0; st < 3; st++)
        for (int b = 0; b < (st < 2 ? r->nblocks[st] : 1); b++) {
            const ck_cblock *k = &r->blocks[st][b];
            const ck_cconv *sc = r->bottleneck ? &k->c2 : &k->c1;
            blk[nu] = k;
            Hl[nu + 1] = out_rows(Hl[nu], sc->k, sc->stride, sc->pad), Wl[nu + 1] = out_rows(Wl[nu], sc->k, sc->stride, sc->pad);
            Cl[nu + 1] = (r->bottleneck ? k->c3 : k->c2).cout;
            nu++;
            if (st == 0 && b == r->nblocks[0] - 1) end4 = nu - 1;
            if (st == 1 && b == r->nblocks[1] - 1) end8 = nu - 1;
        }
    const int h = Hl[nu], w = Wl[nu], C = Cl[nu];
    ck_tensor f16 = A(x, (int64_t)n * h * w * C, "cutie.f16");
    for (int band = 0; band < bands; band++) {
        const int A0 = (int)((int64_t)h * band / bands), B0 = (int)((int64_t)h * (band + 1) / bands);
        if (B0 <= A0) continue;
        /* the rows asked of each unit's output (lo, hi) and its input window (ilo, ihi), last unit first */
        int lo[MAXU] = {0}, hi[MAXU] = {0}, ilo[MAXU] = {0}, ihi[MAXU] = {0};
        lo[nu - 1] = A0, hi[nu - 1] = B0;
        for (int u = nu - 1; u >= 0; u--) {
            if (u == 0)
                need_rows(lo[u], hi[u], r->stem.k, r->stem.stride, r->stem.pad, Hl[0], &ilo[u], &ihi[u]);
            else if (u == 1)
                need_rows(lo[u], hi[u], 3, 2, 1, Hl[1], &ilo[u], &ihi[u]);
            else
                block_need(r, blk[u], lo[u], hi[u], Hl[u], &ilo[u], &ihi[u]);
            if (u > 0) {
                lo[u - 1] = ilo[u], hi[u - 1] = ihi[u];
                const int f = mask_enc ? 0 : u - 1 == end4 ? 4 : u - 1 == end8 ? 2 : 0;
                if (f) lo[u - 1] = CK_MIN(lo[u - 1], f * A0), hi[u - 1] = CK_MAX(hi[u - 1], f * B0);
            }
        }
        const int rows0 = ihi[0] - ilo[0];
        ck_tensor xin = none;
        if (mask_enc) { /* [frame, mask, others] of the band's rows, each map's */
            const int64_t np = (int64_t)rows0 * W;
            xin = A(x, n * np * 5, "mem.input");
            ck_tensor mt = A(x, n * np, "mem.masks");
            OP(x, copy_channels, at(masks, (int64_t)ilo[0] * W), n, (int)np, (int)((int64_t)H * W), mt, (int)np);
            for (int o = 0; o < n; o++) OP(x, copy_channels, at(in, (int64_t)ilo[0] * W * 3), np, 3, 3, at(xin, o * np * 5), 5);
            OP(x, masks_with_others, mt, n, np, at(xin, 3), 5);
            R(x, mt);
        }
        for (int o = 0; o < n; o++) {
            const ck_tensor src = mask_enc ? at(xin, (int64_t)o * rows0 * W * 5) : at(in, (int64_t)ilo[0] * W * 3);
            rowbuf s = {NULL, none, ilo[0] / r->stem.stride, out_rows(rows0, r->stem.k, r->stem.stride, r->stem.pad)};
            s.d = A(x, (int64_t)s.rows * Wl[1] * Cl[1], "cutie.stem");
            s.mem = s.d.data;
            conv(x, &r->stem, 1, rows0, W, src, s.d, CK_CONV_RELU_OUT); /* relu(maxpool(bn(conv))) = maxpool(relu(...)) */
            rowbuf cur = {NULL, none, ilo[1] / 2, out_rows(ihi[1] - ilo[1], 3, 2, 1)};
            cur.d = A(x, (int64_t)cur.rows * Wl[2] * Cl[2], "cutie.pool");
            cur.mem = cur.d.data;
            assert(has_rows(s, ilo[1], ihi[1]));
            OP(x, maxpool3x3s2, rows_at(s, ilo[1], Wl[1], Cl[1]), 1, ihi[1] - ilo[1], Wl[1], Cl[1], cur.d);
            ck_release(x->plan, s.mem);
            for (int u = 2; u < nu; u++) {
                cur = block_rows(x, r, blk[u], Wl[u], Cl[u], cur, ilo[u], ihi[u]);
                const int L = u + 1, whole = bands == 1 && n == 1 && cur.base == 0 && cur.rows >= Hl[L];
                if (u == end4 && !mask_enc) {
                    assert(has_rows(cur, 4 * A0, 4 * B0));
                    conv(x, &x->t->m->dec_f4, 1, 4 * (B0 - A0), Wl[L], rows_at(cur, 4 * A0, Wl[L], Cl[L]),
                         at(dec4, (int64_t)4 * A0 * Wl[L] * cf->up_dims[1]), 0);
                    if (whole) tap(x, "f4", cur.d, (int64_t)Hl[L] * Wl[L] * Cl[L]);
                }
                if (u == end8 && !mask_enc) {
                    assert(has_rows(cur, 2 * A0, 2 * B0));
                    conv(x, &x->t->m->dec_f8, 1, 2 * (B0 - A0), Wl[L], rows_at(cur, 2 * A0, Wl[L], Cl[L]),
                         at(dec8, (int64_t)2 * A0 * Wl[L] * cf->up_dims[0]), 0);
                    if (whole) tap(x, "f8", cur.d, (int64_t)Hl[L] * Wl[L] * Cl[L]);
                }
            }
            assert(has_rows(cur, A0, B0));
            OP(x, copy_channels, rows_at(cur, A0, w, C), (int64_t)(B0 - A0) * w, C, C,
               at(f16, ((int64_t)o * h + A0) * w * C), C);
            ck_release(x->plan, cur.mem);
        }
        if (mask_enc) R(x, xin);
    }
    /* the last stage's other blocks, over the whole map */
    for (int b = 1; b < r->nblocks[2]; b++) {
        const ck_cblock *k = &r->blocks[2][b];
        const ck_cconv *last = r->bottleneck ? &k->c3 : &k->c2;
        const int co = last->cout;
        ck_tensor y = f16;
        if (k->has_down) y = A(x, (int64_t)n * h * w * co, "cutie.f16");
        ck_tensor t1 = A(x, (int64_t)n * h * w * k->c1.cout, "cutie.t1");
        conv(x, &k->c1, n, h, w, f16, t1, CK_CONV_RELU_OUT);
        if (k->has_down) conv(x, &k->down, n, h, w, f16, y, 0);
        ck_tensor t2 = t1;
        if (r->bottleneck) {
            t2 = A(x, (int64_t)n * h * w * k->c2.cout, "cutie.t2");
            conv(x, &k->c2, n, h, w, t1, t2, CK_CONV_RELU_OUT);
            R(x, t1);
        }
        conv(x, last, n, h, w, t2, y, CK_CONV_ACCUMULATE | CK_CONV_RELU_OUT);
        R(x, t2);
        if (k->has_down) R(x, f16);
        f16 = y;
    }
    return f16;
}

/* The rows [*lo, *hi) of a map of Hin rows that a 2x bilinear upsampling
 * (align_corners=False) reads for its output rows [a, b): an output row y
 * reads rows floor(y / 2 - 1/4) and the next, clamped to the map; over a
 * window of rows it clamps to the window instead, so the window reaches a
 * row past them where it is not the map's edge. */
static void need_up2(int a, int b, int Hin, int *lo, int *hi) {
    *lo = a >= 1 ? (a - 1) / 2 : 0;
    *hi = CK_MIN(Hin, (b + 2) / 2);
}

/* The decoder (MaskDecoder.forward) in t->bands[1] bands of stride-16 rows,
 * an object at a time: its logits [O, H/4, W/4] into lg and, with a8 / a4
 * set, the sensory update's pooled stride-8 and stride-4 maps [O, hw, C]. */
static void decoder_bands(cx *x, ck_tensor p16, ck_tensor lg, ck_tensor a8, ck_tensor a4) {
    ckey_tracker *t = x->t;
    const ckey_track_model *m = t->m;
    const ck_cutie_cfg *c = &m->cfg;
    const int U0 = c->up_dims[0], U1 = c->up_dims[1], U2 = c->up_dims[2], bands = t->bands[1];
    const int h = t->h, w = t->w, H8 = 2 * h, W8 = 2 * w, H4 = 4 * h, W4 = 4 * w;
    for (int band = 0; band < bands; band++) {
        const int A0 = (int)((int64_t)h * band / bands), B0 = (int)((int64_t)h * (band + 1) / bands);
        if (B0 <= A0) continue;
        /* rows asked, last op first: p4 (the logits' conv), g4 (up_8_4's two convs), p8 (up), g8, p16 */
        int q0, q1, m0, m1, g0, g1, e0, e1, k0, k1, h0, h1;
        need_rows(4 * A0, 4 * B0, m->pred.k, 1, m->pred.pad, H4, &q0, &q1);
        need_rows(q0, q1, m->up2_c2.k, 1, m->up2_c2.pad, H4, &m0, &m1);
        need_rows(m0, m1, m->up2_c1.k, 1, m->up2_c1.pad, H4, &g0, &g1);
        need_up2(g0, g1, H8, &e0, &e1);
        e0 = CK_MIN(e0, 2 * A0), e1 = CK_MAX(e1, 2 * B0); /* the sensory update pools rows [2 A0, 2 B0) */
        need_rows(e0, e1, m->up1_c2.k, 1, m->up1_c2.pad, H8, &m0, &m1);
        need_rows(m0, m1, m->up1_c1.k, 1, m->up1_c1.pad, H8, &h0, &h1);
        need_up2(h0, h1, h, &k0, &k1);
        for (int o = 0; o < t->O; o++) {
            /* g8 rows [2 k0, 2 k1) = up(p16) + f8's projection */
            const int n8 = 2 * (k1 - k0);
            rowbuf g8 = {NULL, none, 2 * k0, n8};
            g8.d = A(x, (int64_t)n8 * W8 * U0, "dec.g8");
            g8.mem = g8.d.data;
            OP(x, resize_bilinear, at(p16, ((int64_t)o * h + k0) * w * U0), 1, k1 - k0, w, U0,
               at(t->dec8, (int64_t)2 * k0 * W8 * U0), n8, W8, g8.d);
            /* p8 rows [h0, h1) */
            const int r8 = h1 - h0;
            rowbuf p8 = {NULL, none, h0, r8};
            p8.d = A(x, (int64_t)r8 * W8 * U1, "dec.p8");
            p8.mem = p8.d.data;
            assert(has_rows(g8, h0, h1));
            ck_tensor tt = A(x, (int64_t)r8 * W8 * U1, "dec.t8"), gi = rows_at(g8, h0, W8, U0);
            if (m->up1_has_down)
                conv(x, &m->up1_down, 1, r8, W8, gi, p8.d, 0);
            else
                OP(x, copy_channels, gi, (int64_t)r8 * W8, U1, U0, p8.d, U1);
            conv(x, &m->up1_c1, 1, r8, W8, gi, tt, CK_CONV_RELU_IN);
            conv(x, &m->up1_c2, 1, r8, W8, tt, p8.d, CK_CONV_RELU_IN | CK_CONV_ACCUMULATE);
            R(x, tt);
            ck_release(x->plan, g8.mem);
            if (a8.data)
                OP(x, avgpool, rows_at(p8, 2 * A0, W8, U1), 1, 2 * (B0 - A0), W8, U1, 2,
                   at(a8, ((int64_t)o * h + A0) * w * U1), 0);
            assert(has_rows(p8, e0, e1) && has_rows(p8, 2 * A0, 2 * B0));
            /* g4 rows [2 e0, 2 e1) = up(p8) + f4's projection */
            const int n4 = 2 * (e1 - e0);
            rowbuf g4 = {NULL, none, 2 * e0, n4};
            g4.d = A(x, (int64_t)n4 * W4 * U1, "dec.g4");
            g4.mem = g4.d.data;
            OP(x, resize_bilinear, rows_at(p8, e0, W8, U1), 1, e1 - e0, W8, U1, at(t->dec4, (int64_t)2 * e0 * W4 * U1),
               n4, W4, g4.d);
            ck_release(x->plan, p8.mem);
            /* p4 rows [g0, g1), the logit in its last channel */
            const int r4 = g1 - g0;
            rowbuf p4 = {NULL, none, g0, r4};
            p4.d = A(x, (int64_t)r4 * W4 * (U2 + 1), "dec.p4");
            p4.mem = p4.d.data;
            assert(has_rows(g4, g0, g1));
            ck_tensor t4 = A(x, (int64_t)r4 * W4 * U2, "dec.t4"), g = rows_at(g4, g0, W4, U1);
            if (m->up2_has_down)
                conv_ld(x, &m->up2_down, 1, r4, W4, g, 0, p4.d, U2 + 1, 0);
            else
                OP(x, copy_channels, g, (int64_t)r4 * W4, U2, U1, p4.d, U2 + 1);
            conv(x, &m->up2_c1, 1, r4, W4, g, t4, CK_CONV_RELU_IN);
            conv_ld(x, &m->up2_c2, 1, r4, W4, t4, 0, p4.d, U2 + 1, CK_CONV_RELU_IN | CK_CONV_ACCUMULATE);
            R(x, t4);
            ck_release(x->plan, g4.mem);
            assert(has_rows(p4, q0, q1) && has_rows(p4, 4 * A0, 4 * B0));
            const ck_tensor pq = rows_at(p4, q0, W4, U2 + 1);
            conv_ld(x, &m->pred, 1, q1 - q0, W4, pq, U2 + 1, at(pq, U2), U2 + 1, CK_CONV_RELU_IN);
            OP(x, copy_channels, at(rows_at(p4, 4 * A0, W4, U2 + 1), U2), (int64_t)4 * (B0 - A0) * W4, 1, U2 + 1,
               at(lg, ((int64_t)o * H4 + 4 * A0) * W4), 1);
            if (a4.data)
                OP(x, avgpool, rows_at(p4, 4 * A0, W4, U2 + 1), 1, 4 * (B0 - A0), W4, U2 + 1, 4,
                   at(a4, ((int64_t)o * h + A0) * w * (U2 + 1)), 0);
            ck_release(x->plan, p4.mem);
        }
    }
}

/* CAResBlock in place over n maps of h x w x C. */
static void cares(cx *x, const ck_cares *a, int n, int h, int w, ck_tensor v) {
    const int C = a->c1.cout;
    ck_tensor t1 = A(x, (int64_t)n * h * w * C, "cutie.ca1"), t2 = A(x, (int64_t)n * h * w * C, "cutie.ca2");
    conv(x, &a->c1, n, h, w, v, t1, CK_CONV_RELU_IN);
    conv(x, &a->c2, n, h, w, t1, t2, CK_CONV_RELU_IN);
    OP(x, channel_attention, t2, n, (int64_t)h * w, C, a->gate, a->gate_k, v, v);
    R(x, t2);
    R(x, t1);
}

/* GroupFeatureFusionBlock: out [O, hw, C] = blocks(x_tf(pix) + g_tf(g [O, hw, G])). */
static void fuse(cx *x, const ck_cfuse *f, int O, ck_tensor g, ck_tensor out) {
    ckey_tracker *t = x->t;
    const int C = f->x_tf.cout;
    conv(x, &f->g_tf, O, t->h, t->w, g, out, 0);
    ck_tensor px = A(x, (int64_t)t->hw * C, "cutie.fuse.x");
    conv(x, &f->x_tf, 1, t->h, t->w, t->pix, px, 0);
    OP(x, add, out, (int64_t)O * t->hw * C, px, (int64_t)t->hw * C, out);
    R(x, px);
    cares(x, &f->b1, O, t->h, t->w, out);
    cares(x, &f->b2, O, t->h, t->w, out);
}

/* The sensory GRU: sensory [O, hw, CS] from transform([g, sensory]), g [O, hw, G]
 * already in cat's first G channels of G + CS. */
static void sensory_gru(cx *x, const ck_cconv *tf, int G, ck_tensor cat) {
    ckey_tracker *t = x->t;
    const int CS = t->m->cfg.sensory_dim, O = t->O;
    OP(x, copy_channels, t->sensory, (int64_t)O * t->hw, CS, CS, at(cat, G), G + CS);
    ck_tensor v = A(x, (int64_t)O * t->hw * 3 * CS, "cutie.gru");
    conv(x, tf, O, t->h, t->w, cat, v, 0);
    OP(x, gru_update, t->sensory, v, (int64_t)O * t->hw, CS);
    R(x, v);
}

/* ----------------------------------------------------------------- parts */

/* Pixel encoder and key projection (CUTIE.encode_image, transform_key). */
static void part_encode(cx *x) {
    ckey_tracker *t = x->t;
    const ckey_track_model *m = t->m;
    ck_tensor f16 = trunk(x, &m->pix_enc, 1, t->Hp, t->Wp, t->img, 0, none, t->bands[0]);
    tap(x, "f16", f16, (int64_t)t->hw * m->cfg.ms_dims[0]);
    conv(x, &m->pix_feat_proj, 1, t->h, t->w, f16, t->pix, 0);
    ck_tensor k = A(x, (int64_t)t->hw * m->kp_proj.cout, "cutie.keyproj");
    conv(x, &m->kp_proj, 1, t->h, t->w, f16, k, 0);
    R(x, f16);
    conv(x, &m->kp_key, 1, t->h, t->w, k, t->key, 0);
    conv(x, &m->kp_d, 1, t->h, t->w, k, t->shrink, 0);
    conv(x, &m->kp_e, 1, t->h, t->w, k, t->sel, 0);
    R(x, k);
    OP(x, unary, CK_UNARY_SQUARE_PLUS_1, t->shrink, t->hw, t->shrink);
    OP(x, unary, CK_UNARY_SIGMOID, t->sel, (int64_t)t->hw * m->cfg.key_dim, t->sel);
    tap(x, "pix_feat", t->pix, (int64_t)t->hw * m->cfg.pixel_dim);
    tap(x, "key", t->key, (int64_t)t->hw * m->cfg.key_dim);
    tap(x, "shrinkage", t->shrink, t->hw);
    tap(x, "selection", t->sel, (int64_t)t->hw * m->cfg.key_dim);
}

/* The object transformer's attention mask [O, Q, hw] from the auxiliary
 * logits [O, hw]: foreground is where an object wins the aggregate of its
 * bucket's objects (the official code reads each bucket's objects
 * together). */
static void attn_mask(cx *x, ck_tensor aux, ck_tensor mask) {
    ckey_tracker *t = x->t;
    const int Q = t->m->cfg.num_queries;
    for (int b = 0; b < CK_MAX(t->nb, 1); b++)
        OP(x, object_attn_mask, at(aux, (int64_t)t->bo0[b] * t->hw), t->nb > 1 ? t->bno[b] : t->O, t->hw, Q,
           at(mask, (int64_t)t->bo0[b] * Q * t->hw));
}

/* QueryTransformer over the fused readout p [O, hw, E]; returns the pixel
 * features [O, hw, E] (p is released). */
static ck_tensor object_transformer(cx *x, ck_tensor p) {
    ckey_tracker *t = x->t;
    const ckey_track_model *m = t->m;
    const ck_cutie_cfg *c = &m->cfg;
    const int O = t->O, Q = c->num_queries, E = c->embed_dim, hw = t->hw, H = c->num_heads;
    const int64_t nq = (int64_t)O * Q, np = (int64_t)O * hw, big = CK_MAX(nq, np);
    ck_tensor ov = A(x, nq * E, "ot.values"), q = A(x, nq * E, "ot.query"), qpe = A(x, nq * E, "ot.query_pe");
    OP(x, summary_values, t->objmem, nq, E, ov);
    lin(x, &m->s2q_init, nq, ov, q, 0);
    OP(x, add, q, nq * E, wt(m->query_init), (int64_t)Q * E, q);
    lin(x, &m->s2q_emb, nq, ov, qpe, 0);
    OP(x, add, qpe, nq * E, wt(m->query_emb), (int64_t)Q * E, qpe);
    R(x, ov);
    ck_tensor pix = A(x, np * E, "ot.pixel"), ppe = A(x, np * E, "ot.pixel_pe"), pe = A(x, (int64_t)hw * E, "ot.pe");
    conv(x, &m->pixel_init, O, t->h, t->w, p, pix, 0);
    conv(x, &m->pixel_emb, O, t->h, t->w, p, ppe, 0);
    R(x, p);
    OP(x, pos_encoding, t->h, t->w, E, c->pe_scale, c->pe_temperature, pe);
    OP(x, add, ppe, np * E, pe, (int64_t)hw * E, ppe);
    R(x, pe);
    tap(x, "ot_query_in", q, nq * E);
    tap(x, "ot_query_pe", qpe, nq * E);
    tap(x, "ot_pixel_pe", ppe, np * E);
    ck_tensor aux = A(x, np, "ot.aux");
    ck_tensor mask = ck_tensor_of(ck_alloc(x->plan, (size_t)(nq * hw), "ot.mask"), CK_U8);
    ck_tensor T1 = A(x, big * E, "ot.t1"), T2 = A(x, nq * E, "ot.t2"), Qb = A(x, big * E, "ot.q");
    ck_tensor Kb = A(x, big * E, "ot.k"), Vb = A(x, big * E, "ot.v"), att = A(x, big * E, "ot.att");
    ck_tensor hid = A(x, nq * c->ff_dim, "ot.ffn");
    lin(x, &m->mask_pred[0], np, pix, aux, CK_CONV_RELU_IN);
    tap(x, "ot_aux_logits_0", aux, np);
    attn_mask(x, aux, mask);
    static const char *const qn[] = {"ot_query_0", "ot_query_1", "ot_query_2", "ot_query_3",
                                     "ot_query_4", "ot_query_5", "ot_query_6", "ot_query_7"};
    static const char *const pn[] = {"ot_pixel_0", "ot_pixel_1", "ot_pixel_2", "ot_pixel_3",
                                     "ot_pixel_4", "ot_pixel_5", "ot_pixel_6", "ot_pixel_7"};
    static const char *const an[] = {"ot_aux_logits_0", "ot_aux_logits_1", "ot_aux_logits_2", "ot_aux_logits_3",
                                     "ot_aux_logits_4", "ot_aux_logits_5", "ot_aux_logits_6", "ot_aux_logits_7",
                                     "ot_aux_logits_8"};
    for (int i = 0; i < c->ot_blocks; i++) {
        const ck_cotblock *b = &m->ot[i];
        /* read_from_pixel: n = LN(q); q = n + MHA(n + q_pe, pix + pixel_pe, pix, mask) */
        const ck_cattn *a = &b->read_pixel;
        OP(x, layer_norm, q, nq, E, a->ln_g, a->ln_b, 1e-5f, q);
        OP(x, add, q, nq * E, qpe, nq * E, T1);
        lin(x, &a->q, nq, T1, Qb, 0);
        OP(x, add, pix, np * E, ppe, np * E, T1);
        lin(x, &a->k, np, T1, Kb, 0);
        lin(x, &a->v, np, pix, Vb, 0);
        OP(x, mha, O, Qb, Q, E, Kb, Vb, hw, E, E, H, mask, att);
        lin(x, &a->out, nq, att, q, CK_CONV_ACCUMULATE);
        /* self_attn: n = LN(q); q = n + MHA(n + q_pe, n + q_pe, n) */
        a = &b->self_attn;
        OP(x, layer_norm, q, nq, E, a->ln_g, a->ln_b, 1e-5f, q);
        OP(x, add, q, nq * E, qpe, nq * E, T1);
        lin(x, &a->q, nq, T1, Qb, 0);
        lin(x, &a->k, nq, T1, Kb, 0);
        lin(x, &a->v, nq, q, Vb, 0);
        OP(x, mha, O, Qb, Q, E, Kb, Vb, Q, E, E, H, none, att);
        lin(x, &a->out, nq, att, q, CK_CONV_ACCUMULATE);
        /* ffn: q += W2 relu(W1 LN(q)) */
        OP(x, layer_norm, q, nq, E, b->ffn_ln_g, b->ffn_ln_b, 1e-5f, T1);
        lin(x, &b->ffn1, nq, T1, hid, CK_CONV_RELU_OUT);
        lin(x, &b->ffn2, nq, hid, q, CK_CONV_ACCUMULATE);
        /* read_from_query: pix = pix + MHA(pix + pixel_pe, q + q_pe, q) */
        a = &b->read_query;
        if (a->ln_g.data) OP(x, layer_norm, pix, np, E, a->ln_g, a->ln_b, 1e-5f, pix);
        OP(x, add, pix, np * E, ppe, np * E, T1);
        lin(x, &a->q, np, T1, Qb, 0);
        OP(x, add, q, nq * E, qpe, nq * E, T2);
        lin(x, &a->k, nq, T2, Kb, 0);
        lin(x, &a->v, nq, q, Vb, 0);
        OP(x, mha, O, Qb, hw, E, Kb, Vb, Q, E, E, H, none, att);
        lin(x, &a->out, np, att, pix, CK_CONV_ACCUMULATE);
        /* pixel_ffn */
        cares(x, &b->pixel_ffn, O, t->h, t->w, pix);
        tap(x, qn[i & 7], q, nq * E);
        tap(x, pn[i & 7], pix, np * E);
        if (i + 1 < c->ot_blocks || (x->ops && t->tap)) {
            lin(x, &m->mask_pred[i + 1], np, pix, aux, CK_CONV_RELU_IN);
            tap(x, an[(i + 1) & 7], aux, np);
            if (i + 1 < c->ot_blocks) attn_mask(x, aux, mask);
        }
    }
    R(x, hid), R(x, att), R(x, Vb), R(x, Kb), R(x, Qb), R(x, T2), R(x, T1);
    ck_release(x->plan, mask.data);
    R(x, aux), R(x, ppe), R(x, qpe), R(x, q);
    return pix;
}

/* ---------------------------------------------------- long-term memory
 * (MemoryManager with use_long_term; host code: the CPU backend's buffers
 * are host memory). */

/* Bucket b's memory: its rows of the key store and shrinkages and its block
 * of the values (row 0 the bucket's first: long-term rows [wbase - L,
 * wbase), working rows [wbase, wbase + N)); with long-term memory its
 * bookkeeping. */
typedef struct {
    ck_tensor mk, ms, mv, wsel, wuse, wlife, luse, llife;
    int64_t C;      /* floats in a value row: the bucket's objects' values */
    int64_t *N, *L; /* its working and long-term tokens */
    int *mf;        /* its memory frames */
} bank;

static bank bucket_bank(ckey_tracker *t, int b) {
    const ck_cutie_cfg *c = &t->m->cfg;
    const int64_t S = t->wbase + t->cap, CK = c->key_dim;
    bank k = {at(t->mk, b * S * CK), at(t->ms, b * S), at(t->mv, S * t->bo0[b] * c->value_dim), none, none, none, none,
              none, (int64_t)(t->nb > 1 ? t->bno[b] : t->O) * c->value_dim, b ? &t->bN[b] : &t->N,
              b ? &t->bL[b] : &t->L, b ? &t->bmf[b] : &t->mem_frames};
    if (t->lt) {
        k.wsel = at(t->wsel, b * t->cap * CK), k.wuse = at(t->wuse, b * t->cap), k.wlife = at(t->wlife, b * t->cap);
        k.luse = at(t->luse, b * t->wbase), k.llife = at(t->llife, b * t->wbase);
    }
    return k;
}

/* After bucket k's read: each entry's usage += its affinity summed over the
 * frame, life += 1, for the non-permanent working entries and (count_usage)
 * the long-term ones. */
static void count_usage(cx *x, const bank *k) {
    ckey_tracker *t = x->t;
    const int64_t L = *k->L, N = *k->N, nt = N - t->hw;
    const float *u = t->usage.data;
    if (t->dev) { /* the read's usage, to the host */
        x->ops->read(x->be, t->usage, L + N, t->lt_usage);
        u = t->lt_usage;
    }
    float *wu = k->wuse.data, *wl = k->wlife.data, *lu = k->luse.data, *ll = k->llife.data;
    for (int64_t j = 0; j < nt; j++) wu[j] += u[L + t->hw + j], wl[j] += 1.0f;
    if (t->o.count_usage)
        for (int64_t i = 0; i < L; i++) lu[t->wbase - L + i] += u[i], ll[t->wbase - L + i] += 1.0f;
}

/* Whether entry a ranks above b: higher usage / life, equal ratios the
 * lower index first (one total order, so the selection is deterministic). */
static int ranks_above(const float *use, const float *life, int32_t a, int32_t b) {
    const float ra = use[a] / life[a], rb = use[b] / life[b];
    return ra > rb || (ra == rb && a < b);
}

/* Entry e into the root of the min-heap idx [n] (root: the lowest ranked),
 * sifted down to its place. */
static void sift_down(const float *use, const float *life, int32_t *idx, int n, int32_t e) {
    int i = 0;
    for (;;) {
        int c = 2 * i + 1;
        if (c >= n) break;
        if (c + 1 < n && ranks_above(use, life, idx[c], idx[c + 1])) c++;
        if (!ranks_above(use, life, e, idx[c])) break;
        idx[i] = idx[c];
        i = c;
    }
    idx[i] = e;
}

/* idx [k] = the k of entries 0..n-1 that rank highest (k <= n), in rank
 * order: a min-heap of the best k (root: the lowest kept), then popped
 * from the back. */
static void select_top(const float *use, const float *life, int64_t n, int k, int32_t *idx) {
    int m = 0;
    if (k <= 0) return;
    for (int32_t e = 0; e < n; e++) {
        if (m == k && !ranks_above(use, life, e, idx[0])) continue;
        if (m < k) {
            int i;
            for (i = m++; i > 0 && ranks_above(use, life, idx[(i - 1) / 2], e); i = (i - 1) / 2) idx[i] = idx[(i - 1) / 2];
            idx[i] = e;
        } else {
            sift_down(use, life, idx, k, e); /* e replaces the lowest kept */
        }
    }
    for (int end = k - 1; end > 0; end--) { /* heapsort: the lowest goes last */
        const int32_t low = idx[0];
        sift_down(use, life, idx, end, idx[end]);
        idx[end] = low;
    }
}

static void rows_move(ck_tensor t, int64_t dst, int64_t src, int64_t n, int64_t width) {
    float *p = t.data;
    memmove(p + dst * width, p + src * width, (size_t)(n * width) * sizeof(float));
}

/* Rows idx[0..k) of rows [r0, r0 + n) of t (width floats a row) into rows
 * [n0, n0 + k), through the host (a device's consolidation). */
static void gather_rows(cx *x, ck_tensor t, int64_t r0, int64_t n, int64_t width, const int32_t *idx, int64_t k,
                        int64_t n0) {
    float *a = x->t->lt_a, *b = x->t->lt_b;
    x->ops->read(x->be, at(t, r0 * width), n * width, a);
    for (int64_t i = 0; i < k; i++) memcpy(b + i * width, a + idx[i] * width, (size_t)width * sizeof(float));
    x->ops->write(x->be, at(t, n0 * width), k * width, b);
}

/* Rows [src, src + n) of t to [dst, dst + n), dst < src, by the ops. */
static void rows_down(cx *x, ck_tensor t, int64_t dst, int64_t src, int64_t n, int64_t width) {
    x->ops->copy_channels(x->be, at(t, src * width), n, (int)width, (int)width, at(t, dst * width), (int)width);
}

/* long_term()'s consolidation of bucket k with the memory in device memory:
 * the bookkeeping (usage, life, selection, the ranking) is host code over
 * host arrays, the rows it picks pass through the host, the moves and the
 * prototypes' reads are the ops'. */
static void long_term_dev(cx *x, const bank *k, ck_tensor pk, ck_tensor pe, ck_tensor pv, ck_tensor ps) {
    ckey_tracker *t = x->t;
    const ck_ops *ops = x->ops;
    ck_backend *be = x->be;
    const ck_cutie_cfg *c = &t->m->cfg;
    const int CK = c->key_dim, P = t->o.num_prototypes, hw = t->hw;
    const int64_t C = k->C, M = t->o.max_num_tokens, keep = M - P - t->o.buffer_tokens;
    const int64_t wb = t->wbase;
    int32_t *idx = t->lt_idx;
    float *lu = k->luse.data, *ll = k->llife.data, *b = t->lt_b;
    if (*k->L >= M - P) { /* remove_obsolete_features: keep the most used, in that order */
        const int64_t r0 = wb - *k->L, n0 = wb - keep;
        select_top(lu + r0, ll + r0, *k->L, (int)keep, idx);
        gather_rows(x, k->mk, r0, *k->L, CK, idx, keep, n0);
        gather_rows(x, k->mv, r0, *k->L, C, idx, keep, n0);
        gather_rows(x, k->ms, r0, *k->L, 1, idx, keep, n0);
        for (int64_t i = 0; i < keep; i++) b[i] = lu[r0 + idx[i]], b[keep + i] = ll[r0 + idx[i]];
        memcpy(lu + n0, b, (size_t)keep * sizeof(float));
        memcpy(ll + n0, b + keep, (size_t)keep * sizeof(float));
        *k->L = keep;
    }
    /* compress_features: candidates = the non-permanent entries but the newest min_work */
    const int64_t c0 = wb + hw, ncand = *k->N - hw - t->min_work;
    select_top(k->wuse.data, k->wlife.data, ncand, P, idx);
    ops->read(be, at(k->mk, c0 * CK), ncand * CK, t->lt_a);
    for (int i = 0; i < P; i++) memcpy(b + (int64_t)i * CK, t->lt_a + (int64_t)idx[i] * CK, (size_t)CK * sizeof(float));
    ops->write(be, pk, (int64_t)P * CK, b);
    const float *sel = k->wsel.data;
    for (int i = 0; i < P; i++) memcpy(b + (int64_t)i * CK, sel + (int64_t)idx[i] * CK, (size_t)CK * sizeof(float));
    ops->write(be, pe, (int64_t)P * CK, b);
    ops->memory_read(be, at(k->mk, c0 * CK), at(k->ms, c0), pk, pe, ncand, P, CK, at(k->mv, c0 * C), (int)C, 0, pv,
                     none);
    ops->memory_read(be, at(k->mk, c0 * CK), at(k->ms, c0), pk, pe, ncand, P, CK, at(k->ms, c0), 1, 0, ps, none);
    /* the candidates leave the working memory */
    const int64_t rest = *k->N - hw - ncand;
    rows_down(x, k->mk, c0, c0 + ncand, rest, CK), rows_down(x, k->ms, c0, c0 + ncand, rest, 1);
    rows_down(x, k->mv, c0, c0 + ncand, rest, C);
    rows_move(k->wsel, 0, ncand, rest, CK), rows_move(k->wuse, 0, ncand, rest, 1);
    rows_move(k->wlife, 0, ncand, rest, 1);
    *k->N -= ncand;
    /* the prototypes join the long-term store at its end (usage 0, life 1e-7) */
    const int64_t L = *k->L;
    rows_down(x, k->mk, wb - L - P, wb - L, L, CK), rows_down(x, k->ms, wb - L - P, wb - L, L, 1);
    rows_down(x, k->mv, wb - L - P, wb - L, L, C);
    rows_move(k->luse, wb - L - P, wb - L, L, 1), rows_move(k->llife, wb - L - P, wb - L, L, 1);
    ops->copy_channels(be, pk, P, CK, CK, at(k->mk, (wb - P) * CK), CK);
    ops->copy_channels(be, ps, P, 1, 1, at(k->ms, wb - P), 1);
    ops->copy_channels(be, pv, P, (int)C, (int)C, at(k->mv, (wb - P) * C), (int)C);
    for (int64_t r = wb - P; r < wb; r++) lu[r] = 0.0f, ll[r] = 1e-7f;
    *k->L = L + P;
}

/* After an insert that fills bucket b's working memory (MemoryManager's
 * compress_features and remove_obsolete_features, per bucket): its
 * long-term store shrinks to its most used entries when it is near full,
 * then its older non-permanent working entries become num_prototypes
 * prototypes appended to it. Temporaries are the plan's (allocated whether
 * or not this frame consolidates, so that record and replay agree; sized
 * for all the objects' values). */
static void long_term(cx *x, int b) {
    ckey_tracker *t = x->t;
    const ck_cutie_cfg *c = &t->m->cfg;
    const int CK = c->key_dim, P = t->o.num_prototypes, hw = t->hw;
    const int64_t Cmax = (int64_t)t->O * c->value_dim, M = t->o.max_num_tokens, keep = M - P - t->o.buffer_tokens;
    const int64_t ncand_max = t->max_work - t->min_work;
    int32_t *idx = ck_alloc(x->plan, (size_t)CK_MAX(CK_MAX(ncand_max, t->wbase), 1) * sizeof(int32_t), "lt.index");
    ck_tensor pk = A(x, (int64_t)P * CK, "lt.proto_key"), pe = A(x, (int64_t)P * CK, "lt.proto_selection");
    ck_tensor pv = A(x, P * Cmax, "lt.proto_value"), ps = A(x, P, "lt.proto_shrinkage");
    ck_tensor tk = A(x, CK_MAX(keep, 1) * CK, "lt.keep_key"), tv = A(x, CK_MAX(keep, 1) * Cmax, "lt.keep_value");
    ck_tensor ts = A(x, CK_MAX(keep, 1) * 3, "lt.keep_shrinkage_usage_life");
    const bank k = bucket_bank(t, b);
    const int full = x->ops && *k.N - hw >= t->max_work;
    if (full && t->dev) {
        long_term_dev(x, &k, pk, pe, pv, ps);
    } else if (full) {
        const int64_t wb = t->wbase, C = k.C;
        float *mk = k.mk.data, *ms = k.ms.data, *mv = k.mv.data, *lu = k.luse.data, *ll = k.llife.data;
        if (*k.L >= M - P) { /* remove_obsolete_features: keep the most used, in that order */
            const int64_t r0 = wb - *k.L;
            select_top(lu + r0, ll + r0, *k.L, (int)keep, idx);
            float *kk = tk.data, *v = tv.data, *o = ts.data;
            for (int64_t i = 0; i < keep; i++) {
                const int64_t r = r0 + idx[i];
                memcpy(kk + i * CK, mk + r * CK, (size_t)CK * sizeof(float));
                memcpy(v + i * C, mv + r * C, (size_t)C * sizeof(float));
                o[i] = ms[r], o[keep + i] = lu[r], o[2 * keep + i] = ll[r];
            }
            const int64_t n0 = wb - keep;
            memcpy(mk + n0 * CK, kk, (size_t)(keep * CK) * sizeof(float));
            memcpy(mv + n0 * C, v, (size_t)(keep * C) * sizeof(float));
            memcpy(ms + n0, o, (size_t)keep * sizeof(float));
            memcpy(lu + n0, o + keep, (size_t)keep * sizeof(float));
            memcpy(ll + n0, o + 2 * keep, (size_t)keep * sizeof(float));
            *k.L = keep;
        }
        /* compress_features: candidates = the non-permanent entries but the newest min_work */
        const int64_t c0 = wb + hw, ncand = *k.N - hw - t->min_work;
        select_top(k.wuse.data, k.wlife.data, ncand, P, idx);
        const float *sel = k.wsel.data;
        for (int i = 0; i < P; i++) {
            memcpy((float *)pk.data + (int64_t)i * CK, mk + (c0 + idx[i]) * CK, (size_t)CK * sizeof(float));
            memcpy((float *)pe.data + (int64_t)i * CK, sel + (int64_t)idx[i] * CK, (size_t)CK * sizeof(float));
        }
        /* prototype = softmax over the candidates (no top-k) of similarity(candidate key and
         * shrinkage, prototype key and selection) . the candidates' values and shrinkages */
        x->ops->memory_read(x->be, at(k.mk, c0 * CK), at(k.ms, c0), pk, pe, ncand, P, CK, at(k.mv, c0 * C), (int)C, 0,
                            pv, none);
        x->ops->memory_read(x->be, at(k.mk, c0 * CK), at(k.ms, c0), pk, pe, ncand, P, CK, at(k.ms, c0), 1, 0, ps,
                            none);
        /* the candidates leave the working memory */
        const int64_t rest = *k.N - hw - ncand;
        rows_move(k.mk, c0, c0 + ncand, rest, CK), rows_move(k.ms, c0, c0 + ncand, rest, 1);
        rows_move(k.mv, c0, c0 + ncand, rest, C), rows_move(k.wsel, 0, ncand, rest, CK);
        rows_move(k.wuse, 0, ncand, rest, 1), rows_move(k.wlife, 0, ncand, rest, 1);
        *k.N -= ncand;
        /* the prototypes join the long-term store at its end (usage 0, life 1e-7) */
        const int64_t L = *k.L;
        rows_move(k.mk, wb - L - P, wb - L, L, CK), rows_move(k.ms, wb - L - P, wb - L, L, 1);
        rows_move(k.mv, wb - L - P, wb - L, L, C), rows_move(k.luse, wb - L - P, wb - L, L, 1);
        rows_move(k.llife, wb - L - P, wb - L, L, 1);
        memcpy(mk + (wb - P) * CK, pk.data, (size_t)P * CK * sizeof(float));
        memcpy(ms + wb - P, ps.data, (size_t)P * sizeof(float));
        memcpy(mv + (wb - P) * C, pv.data, (size_t)(P * C) * sizeof(float));
        for (int64_t r = wb - P; r < wb; r++) lu[r] = 0.0f, ll[r] = 1e-7f;
        *k.L = L + P;
    }
    R(x, ts), R(x, tv), R(x, tk), R(x, ps), R(x, pv), R(x, pe), R(x, pk);
    ck_release(x->plan, idx);
}

/* Memory read, pixel fusion, object transformer, decoder; prob [O+1, Hp, Wp]
 * (CUTIE.segment, MemoryManager.read, InferenceCore._segment). */
static void part_segment(cx *x, int update_sensory) {
    ckey_tracker *t = x->t;
    const ckey_track_model *m = t->m;
    const ck_cutie_cfg *c = &m->cfg;
    const int O = t->O, hw = t->hw, CV = c->value_dim, CS = c->sensory_dim, E = c->embed_dim, CK = c->key_dim;
    const int64_t HWp = (int64_t)t->Hp * t->Wp, C = (int64_t)O * CV;
    /* memory read: vis [hw, O*CV] */
    ck_tensor vis = A(x, hw * C, "seg.visual");
    /* each bucket reads its own memory, [long-term, working], for its
     * objects (MemoryManager.read) */
    ck_tensor vb = t->nb > 1 ? A(x, hw * C, "seg.visual_bucket") : vis;
    for (int b = 0; b < CK_MAX(t->nb, 1); b++) {
        const bank k = bucket_bank(t, b);
        const int64_t r0 = t->wbase - *k.L;
        OP(x, memory_read, at(k.mk, r0 * CK), at(k.ms, r0), t->key, t->sel, *k.L + *k.N, hw, CK, at(k.mv, r0 * k.C),
           (int)k.C, t->o.top_k, vb, t->lt ? t->usage : none);
        if (x->ops && t->lt) count_usage(x, &k);
        if (t->nb > 1) OP(x, copy_channels, vb, hw, (int)k.C, (int)k.C, at(vis, (int64_t)t->bo0[b] * CV), (int)C);
    }
    if (t->nb > 1) R(x, vb);
    tap(x, "visual_readout", vis, hw * C);
    tap(x, "sensory_in", t->sensory, (int64_t)O * hw * CS);
    /* pixel fusion: p = vis + sensory_compress([sensory, last mask, others]) */
    ck_tensor lm = A(x, (int64_t)O * hw, "seg.last_mask"), cat = A(x, (int64_t)O * hw * (CS + 2), "seg.cat");
    OP(x, avgpool, at(t->prob, HWp), O, t->Hp, t->Wp, 1, 16, lm, 1);
    OP(x, copy_channels, t->sensory, (int64_t)O * hw, CS, CS, cat, CS + 2);
    for (int b = 0; b < CK_MAX(t->nb, 1); b++) /* "others": the bucket's other objects (pixel_fusion per bucket) */
        OP(x, masks_with_others, at(lm, (int64_t)t->bo0[b] * hw), t->nb > 1 ? t->bno[b] : O, hw,
           at(cat, (int64_t)t->bo0[b] * hw * (CS + 2) + CS), CS + 2);
    R(x, lm);
    ck_tensor p = A(x, (int64_t)O * hw * CV, "seg.p");
    for (int o = 0; o < O; o++) OP(x, copy_channels, at(vis, (int64_t)o * CV), hw, CV, (int)C, at(p, (int64_t)o * hw * CV), CV);
    R(x, vis);
    conv(x, &m->sensory_compress, O, t->h, t->w, cat, p, CK_CONV_ACCUMULATE);
    R(x, cat);
    ck_tensor fused = A(x, (int64_t)O * hw * E, "seg.fused");
    fuse(x, &m->pixel_fuse, O, p, fused);
    R(x, p);
    tap(x, "fused_readout", fused, (int64_t)O * hw * E);
    ck_tensor p16 = object_transformer(x, fused);
    tap(x, "readout", p16, (int64_t)O * hw * E);
    /* decoder (MaskDecoder.forward); the sensory update's inputs pooled to stride 16 */
    const int U1 = c->up_dims[1], U2 = c->up_dims[2];
    const int H8 = t->Hp / 8, W8 = t->Wp / 8, H4 = t->Hp / 4, W4 = t->Wp / 4;
    const int64_t n8 = (int64_t)H8 * W8, n4 = (int64_t)H4 * W4;
    ck_tensor lg = A(x, O * n4, "dec.logits"), a8 = none, a4 = none;
    if (update_sensory) a8 = A(x, (int64_t)O * hw * U1, "dec.su8"), a4 = A(x, (int64_t)O * hw * (U2 + 1), "dec.su4");
    if (t->bands[1] > 1) {
        decoder_bands(x, p16, lg, a8, a4);
    } else {
        const int U0 = c->up_dims[0];
        ck_tensor g8 = A(x, O * n8 * U0, "dec.g8");
        OP(x, resize_bilinear, p16, O, t->h, t->w, U0, t->dec8, H8, W8, g8);
        ck_tensor p8 = A(x, O * n8 * U1, "dec.p8"), tt = A(x, O * n8 * U1, "dec.t8");
        if (m->up1_has_down)
            conv(x, &m->up1_down, O, H8, W8, g8, p8, 0);
        else
            OP(x, copy_channels, g8, O * n8, U1, U0, p8, U1);
        conv(x, &m->up1_c1, O, H8, W8, g8, tt, CK_CONV_RELU_IN);
        conv(x, &m->up1_c2, O, H8, W8, tt, p8, CK_CONV_RELU_IN | CK_CONV_ACCUMULATE);
        R(x, tt);
        R(x, g8);
        tap(x, "dec_p8", p8, O * n8 * U1);
        if (update_sensory) OP(x, avgpool, p8, O, H8, W8, U1, 2, a8, 0);
        ck_tensor g4 = A(x, O * n4 * U1, "dec.g4");
        OP(x, resize_bilinear, p8, O, H8, W8, U1, t->dec4, H4, W4, g4);
        R(x, p8);
        ck_tensor p4 = A(x, O * n4 * (U2 + 1), "dec.p4"), t4 = A(x, O * n4 * U2, "dec.t4");
        if (m->up2_has_down)
            conv_ld(x, &m->up2_down, O, H4, W4, g4, 0, p4, U2 + 1, 0);
        else
            OP(x, copy_channels, g4, O * n4, U2, U1, p4, U2 + 1);
        conv(x, &m->up2_c1, O, H4, W4, g4, t4, CK_CONV_RELU_IN);
        conv_ld(x, &m->up2_c2, O, H4, W4, t4, 0, p4, U2 + 1, CK_CONV_RELU_IN | CK_CONV_ACCUMULATE);
        R(x, t4);
        R(x, g4);
        conv_ld(x, &m->pred, O, H4, W4, p4, U2 + 1, at(p4, U2), U2 + 1, CK_CONV_RELU_IN);
        OP(x, copy_channels, at(p4, U2), O * n4, 1, U2 + 1, lg, 1);
        if (update_sensory) OP(x, avgpool, p4, O, H4, W4, U2 + 1, 4, a4, 0);
        R(x, p4);
    }
    tap(x, "dec_logits", lg, O * n4);
    if (update_sensory) { /* SensoryUpdater: g16(p16) + g8(area/2 p8) + g4(area/4 [p4, logits]) */
        ck_tensor scat = A(x, (int64_t)O * hw * 2 * CS, "dec.su_cat");
        conv_ld(x, &m->su_g16, O, t->h, t->w, p16, 0, scat, 2 * CS, 0);
        conv_ld(x, &m->su_g8, O, t->h, t->w, a8, 0, scat, 2 * CS, CK_CONV_ACCUMULATE);
        conv_ld(x, &m->su_g4, O, t->h, t->w, a4, 0, scat, 2 * CS, CK_CONV_ACCUMULATE);
        sensory_gru(x, &m->su_transform, CS, scat);
        R(x, scat);
        R(x, a4), R(x, a8);
    }
    R(x, p16);
    /* probabilities: softmax(up4(aggregate(sigmoid(logits)))) */
    ck_tensor ag = A(x, (O + 1) * n4, "dec.agg");
    OP(x, aggregate, lg, O, n4, ag);
    OP(x, resize_bilinear, ag, O + 1, H4, W4, 1, none, t->Hp, t->Wp, t->prob);
    OP(x, softmax_planes, t->prob, O + 1, HWp);
    R(x, ag), R(x, lg);
}

/* Mask encoder, deep sensory update, object summaries and the memory
 * insertion: FIFO eviction, or with long-term memory the consolidation of
 * long_term() (InferenceCore._add_memory, MemoryManager.add_memory). */
static void part_memorize(cx *x) {
    ckey_tracker *t = x->t;
    const ckey_track_model *m = t->m;
    const ck_cutie_cfg *c = &m->cfg;
    const int O = t->O, hw = t->hw, CV = c->value_dim, CS = c->sensory_dim, E = c->embed_dim, CK = c->key_dim;
    const int Q = c->num_queries;
    const int64_t HWp = (int64_t)t->Hp * t->Wp, np = (int64_t)O * hw;
    ck_tensor masks = at(t->prob, HWp);
    ck_tensor mf = trunk(x, &m->mask_enc, O, t->Hp, t->Wp, t->img, 1, masks, t->bands[2]);
    tap(x, "mask_feat", mf, np * m->mask_enc.dims[2]);
    ck_tensor cat = A(x, np * (CV + CS), "mem.cat");
    ck_tensor value = A(x, np * CV, "mem.value");
    fuse(x, &m->mask_fuse, O, mf, value);
    R(x, mf);
    tap(x, "enc_value", value, np * CV);
    tap(x, "enc_sensory_in", t->sensory, np * CS);
    OP(x, copy_channels, value, np, CV, CV, cat, CV + CS);
    sensory_gru(x, &m->mask_sensory, CV, cat);
    R(x, cat);
    tap(x, "enc_sensory", t->sensory, np * CS);
    /* object summaries [O, Q, E+1] */
    ck_tensor m16 = A(x, np, "mem.m16"), tv = A(x, np * E, "mem.tv"), pe = A(x, (int64_t)hw * E, "mem.pe");
    OP(x, avgpool, masks, O, t->Hp, t->Wp, 1, 16, m16, 1);
    lin(x, &m->sum_in, np, value, tv, 0);
    OP(x, pos_encoding, t->h, t->w, E, c->pe_scale, c->pe_temperature, pe);
    OP(x, add, tv, np * E, pe, (int64_t)hw * E, tv);
    R(x, pe);
    ck_tensor hid = A(x, np * E, "mem.hid"), feat = A(x, np * E, "mem.feature"), wl = A(x, np * Q, "mem.logits");
    lin(x, &m->sum_f1, np, tv, hid, CK_CONV_RELU_OUT);
    lin(x, &m->sum_f2, np, hid, feat, 0);
    lin(x, &m->sum_w1, np, tv, hid, CK_CONV_RELU_OUT);
    lin(x, &m->sum_w2, np, hid, wl, 0);
    ck_tensor summ = A(x, (int64_t)O * Q * (E + 1), "mem.summaries");
    for (int o = 0; o < O; o++)
        OP(x, summary_pool, at(m16, (int64_t)o * hw), at(feat, (int64_t)o * hw * E), at(wl, (int64_t)o * hw * Q), hw, E,
           Q, at(summ, (int64_t)o * Q * (E + 1)));
    tap(x, "enc_summaries", summ, (int64_t)O * Q * (E + 1));
    const int64_t ns = (int64_t)O * Q * (E + 1);
    const int64_t ns0 = (int64_t)t->objmem_n * Q * (E + 1); /* objects new to the object memory start it */
    if (ns0 > 0) OP(x, add, t->objmem, ns0, summ, ns0, t->objmem);
    if (ns > ns0) OP(x, copy_channels, at(summ, ns0), ns - ns0, 1, 1, at(t->objmem, ns0), 1);
    if (x->ops) t->objmem_n = O;
    R(x, summ), R(x, wl), R(x, feat), R(x, hid), R(x, tv), R(x, m16);
    const int64_t np_cap = t->cap - hw;
    /* each bucket's memory: the frame's key and its objects' values; its
     * first frame permanent, then FIFO over the rest, or with long-term
     * memory appended at the end and long_term() makes room */
    for (int b = 0; b < CK_MAX(t->nb, 1); b++) {
        const bank k = bucket_bank(t, b);
        const int64_t Nb = *k.N, Cb = k.C, w0 = t->wbase;
        int64_t at_row = Nb;
        if (!t->lt && *k.mf > 0 && np_cap == 0) {
            at_row = -1; /* no room besides the permanent frame: the new frame would be evicted at once */
        } else if (!t->lt && *k.mf > 0 && Nb + hw > t->cap) {
            const int64_t keep = Nb - 2 * hw; /* drop the oldest non-permanent frame */
            OP(x, copy_channels, at(k.mk, 2 * hw * CK), keep, CK, CK, at(k.mk, hw * CK), CK);
            OP(x, copy_channels, at(k.ms, 2 * hw), keep, 1, 1, at(k.ms, hw), 1);
            OP(x, copy_channels, at(k.mv, 2 * hw * Cb), keep, (int)Cb, (int)Cb, at(k.mv, hw * Cb), (int)Cb);
            at_row = Nb - hw;
        }
        if (at_row >= 0) {
            const int64_t row = w0 + at_row;
            OP(x, copy_channels, t->key, hw, CK, CK, at(k.mk, row * CK), CK);
            OP(x, copy_channels, t->shrink, hw, 1, 1, at(k.ms, row), 1);
            for (int o = 0; o < (t->nb > 1 ? t->bno[b] : O); o++)
                OP(x, copy_channels, at(value, (int64_t)(t->bo0[b] + o) * hw * CV), hw, CV, CV,
                   at(k.mv, row * Cb + (int64_t)o * CV), (int)Cb);
        }
        if (x->ops) {
            if (t->lt && *k.mf > 0) { /* a non-permanent entry: its selection, usage 0 and life 1e-7 */
                const int64_t j = Nb - hw;
                if (t->dev)
                    x->ops->read(x->be, t->sel, (int64_t)hw * CK, (float *)k.wsel.data + j * CK);
                else
                    memcpy((float *)k.wsel.data + j * CK, t->sel.data, (size_t)hw * CK * sizeof(float));
                float *use = k.wuse.data, *life = k.wlife.data;
                for (int64_t i = j; i < j + hw; i++) use[i] = 0.0f, life[i] = 1e-7f;
            }
            if (at_row >= 0) *k.N = at_row + hw;
            (*k.mf)++;
        }
        if (t->lt) long_term(x, b);
    }
    R(x, value);
}

/* --------------------------------------------------------------- tracker */

void ckey_track_options_default(ckey_track_options *o) {
    o->max_objects = 4;
    o->mem_every = 5;
    o->max_mem_frames = 5;
    o->top_k = 30;
    o->stagger_updates = 5;
    o->max_internal_size = -1;
    o->threads = 0;
    o->use_long_term = 0; /* the official long_term defaults (config/eval_config.yaml) */
    o->lt_max_mem_frames = 10;
    o->lt_min_mem_frames = 5;
    o->num_prototypes = 128;
    o->max_num_tokens = 10000;
    o->buffer_tokens = 2000;
    o->count_usage = 1;
    o->device = CKEY_DEVICE_CPU;
    o->precision = CKEY_PRECISION_FP32;
}

void ck_tracker_set_tap(ckey_tracker *t, ck_cutie_tap_fn fn, void *user) {
    t->tap = fn;
    t->tap_user = user;
}

int64_t ckey_tracker_memory_tokens(const ckey_tracker *t) {
    if (!t) return 0;
    int64_t n = t->N;
    for (int b = 1; b < t->nb; b++) n += t->bN[b];
    return n;
}
int64_t ckey_tracker_long_term_tokens(const ckey_tracker *t) {
    if (!t) return 0;
    int64_t n = t->L;
    for (int b = 1; b < t->nb; b++) n += t->bL[b];
    return n;
}

void *ckey_tracker_host_alloc(ckey_tracker *t, size_t bytes) {
    if (!t || bytes == 0) return NULL;
    return t->bi->host_alloc(t->be, bytes);
}

void ckey_tracker_host_free(ckey_tracker *t, void *p) {
    if (t && p) t->bi->host_free(t->be, p);
}

void ckey_tracker_free(ckey_tracker *t) {
    if (!t) return;
    for (int i = 0; i < PART_COUNT; i++) ck_plan_free(t->plan[i]);
    if (t->be) {
        t->bi->mem_free(t->be, t->dweights);
        t->bi->mem_free(t->be, t->out.data);
        t->bi->mem_free(t->be, t->fixed);
        t->bi->mem_free(t->be, t->arena);
        t->bi->mem_free(t->be, t->ws);
        t->bi->free(t->be);
    }
    free(t->stage);
    free(t->lt_host);
    free(t);
}

static void run_part(ckey_tracker *t, int part, int execute) {
    cx x = {execute ? t->ops : NULL, t->be, t->plan[part], t};
    if (execute) ck_plan_begin_execute(t->plan[part], t->arena);
    switch (part) {
    case PART_ENCODE: part_encode(&x); break;
    case PART_SEGMENT: part_segment(&x, 0); break;
    case PART_SEGMENT_UPDATE: part_segment(&x, 1); break;
    default: part_memorize(&x); break;
    }
}

/* Every weight of a model, for a visitor (the device copy's remapping, the
 * convs' fp16 weights): a conv to v->conv when it has one, else its weight
 * and bias to v->weight like every other weight. A visitor's context
 * extends the struct. */
typedef struct wvisit wvisit;
struct wvisit {
    void (*weight)(ck_weight *w, wvisit *v);
    void (*conv)(ck_cconv *c, wvisit *v); /* NULL: W and b to weight */
};
static void cconv_w(ck_cconv *c, wvisit *v) {
    if (v->conv)
        v->conv(c, v);
    else
        v->weight(&c->W, v), v->weight(&c->b, v);
}
static void cares_w(ck_cares *a, wvisit *v) {
    cconv_w(&a->c1, v), cconv_w(&a->c2, v), v->weight(&a->gate, v);
}
static void cfuse_w(ck_cfuse *g, wvisit *v) {
    cconv_w(&g->x_tf, v), cconv_w(&g->g_tf, v), cares_w(&g->b1, v), cares_w(&g->b2, v);
}
static void cattn_w(ck_cattn *a, wvisit *v) {
    cconv_w(&a->q, v), cconv_w(&a->k, v), cconv_w(&a->v, v), cconv_w(&a->out, v);
    v->weight(&a->ln_g, v), v->weight(&a->ln_b, v);
}
static void cresnet_w(ck_cresnet *r, wvisit *v) {
    cconv_w(&r->stem, v);
    for (int s = 0; s < 3; s++)
        for (int b = 0; b < CK_CUTIE_MAX_BLOCKS; b++) {
            ck_cblock *k = &r->blocks[s][b];
            cconv_w(&k->c1, v), cconv_w(&k->c2, v), cconv_w(&k->c3, v), cconv_w(&k->down, v);
        }
}
static void model_weights(ckey_track_model *m, wvisit *v) {
    cresnet_w(&m->pix_enc, v), cresnet_w(&m->mask_enc, v);
    ck_cconv *convs[] = {&m->pix_feat_proj, &m->kp_proj, &m->kp_key, &m->kp_d, &m->kp_e, &m->mask_sensory,
                         &m->sensory_compress, &m->sum_in, &m->sum_f1, &m->sum_f2, &m->sum_w1, &m->sum_w2,
                         &m->s2q_init, &m->s2q_emb, &m->pixel_init, &m->pixel_emb, &m->dec_f8, &m->dec_f4,
                         &m->up1_c1, &m->up1_c2, &m->up1_down, &m->up2_c1, &m->up2_c2, &m->up2_down, &m->pred,
                         &m->su_g16, &m->su_g8, &m->su_g4, &m->su_transform};
    for (size_t i = 0; i < CK_ARRAY_LEN(convs); i++) cconv_w(convs[i], v);
    cfuse_w(&m->mask_fuse, v), cfuse_w(&m->pixel_fuse, v);
    v->weight(&m->query_init, v), v->weight(&m->query_emb, v);
    for (int i = 0; i < CK_CUTIE_MAX_OT; i++) {
        ck_cotblock *b = &m->ot[i];
        cattn_w(&b->read_pixel, v), cattn_w(&b->self_attn, v), cattn_w(&b->read_query, v);
        v->weight(&b->ffn_ln_g, v), v->weight(&b->ffn_ln_b, v);
        cconv_w(&b->ffn1, v), cconv_w(&b->ffn2, v), cares_w(&b->pixel_ffn, v);
    }
    for (int i = 0; i <= CK_CUTIE_MAX_OT; i++) cconv_w(&m->mask_pred[i], v);
}

/* The store's allocations laid out in one device block, 64-byte aligned. */
static size_t store_offset(const ckey_track_model *m, int i) {
    size_t off = 0;
    for (int j = 0; j < i; j++) off += (m->store_n[j] + 15) / 16 * 16;
    return off;
}

typedef struct {
    wvisit v;
    const ckey_track_model *m;
    float *dbase;
    int bad;
} remap_ctx;

static void remap(ck_weight *w, wvisit *v) {
    remap_ctx *r = (remap_ctx *)v;
    if (!w->data) return;
    const float *p = w->data;
    for (int i = 0; i < r->m->nstore; i++) {
        const float *b = r->m->store[i];
        if (p >= b && p < b + r->m->store_n[i]) {
            w->data = r->dbase + store_offset(r->m, i) + (p - b);
            return;
        }
    }
    r->bad = 1;
}

/* At fp16 on a device (a backend with device memory) the convs' weights
 * lie there in fp16 as well, after the fp32 store, each conv's
 * [Cout, k, k, Cin] rounded to whole 16 bytes, so that no conv converts
 * its weight when it runs; the biases and every other weight stay fp32. */
static int half_convs(const ckey_track_options *o, const ck_backend_i *bi) {
    return o->precision == CKEY_PRECISION_FP16 && bi->device_memory;
}

static size_t conv_halves(const ck_cconv *c) { return ((size_t)c->cout * c->k * c->k * c->cin + 7) / 8 * 8; }

/* Lays the convs' fp16 weights out (n halves so far, `most` the largest
 * conv's); with dhalf set it also writes each there (rounded on the host
 * through tmp, from the host store behind the remapped fp32 weight) and
 * points the conv at it. */
typedef struct {
    wvisit v;
    const ckey_track_model *m; /* the host model: its store */
    const float *dbase;        /* the fp32 store on the device */
    uint16_t *dhalf, *tmp;     /* NULL: count only */
    const ck_ops *ops;
    ck_backend *be;
    size_t n, most;
    int bad;
} half_ctx;

static void half_conv(ck_cconv *c, wvisit *v) {
    half_ctx *h = (half_ctx *)v;
    if (!c->W.data) return;
    const size_t n = conv_halves(c), used = (size_t)c->cout * c->k * c->k * c->cin;
    if (h->dhalf) {
        const float *src = NULL;
        const size_t off = (size_t)((const float *)c->W.data - h->dbase);
        for (int i = 0; i < h->m->nstore && !src; i++) {
            const size_t so = store_offset(h->m, i);
            if (off >= so && off + used <= so + h->m->store_n[i]) src = h->m->store[i] + (off - so);
        }
        if (!src || c->W.type != CK_F32) {
            h->bad = 1;
            return;
        }
        for (size_t i = 0; i < n; i++) h->tmp[i] = i < used ? ck_f32_to_f16(src[i]) : 0;
        /* write copies bytes: the halves as n / 2 floats' worth */
        h->ops->write(h->be, ck_tensor_of(h->dhalf + h->n, CK_F32), (int64_t)(n / 2), (const float *)(void *)h->tmp);
        c->W = (ck_weight){h->dhalf + h->n, CK_F16};
    }
    h->n += n;
    h->most = CK_MAX(h->most, n);
}

static void half_none(ck_weight *w, wvisit *v) { (void)w, (void)v; }

/* The halves of m's convs' fp16 weights, and the largest conv's (*most). */
static size_t model_conv_halves(const ckey_track_model *m, size_t *most) {
    ckey_track_model c = *m; /* model_weights walks a model it may change; counting changes nothing */
    half_ctx h = {{half_none, half_conv}, m, NULL, NULL, NULL, NULL, NULL, 0, 0, 0};
    model_weights(&c, &h.v);
    if (most) *most = h.most;
    return h.n;
}

/* The model's weights copied to the device once, and t->dm: the model
 * viewing them (t->m then points at it). */
static ckey_status upload_weights(ckey_tracker *t, ckey_error *err) {
    const ckey_track_model *m = t->m;
    const size_t total = store_offset(m, m->nstore);
    const int half = half_convs(&t->o, t->bi);
    size_t most = 0;
    const size_t halves = half ? model_conv_halves(m, &most) : 0;
    t->dweight_bytes = CK_MAX(total, (size_t)1) * sizeof(float) + halves * sizeof(uint16_t);
    t->dweights = t->bi->mem_alloc(t->be, t->dweight_bytes);
    if (!t->dweights)
        return ck_fail(err, CKEY_ERR_NOMEM, "tracker: out of device memory for %.1f MiB of weights",
                       total * 4 / 1048576.0);
    for (int i = 0; i < m->nstore; i++)
        t->ops->write(t->be, ck_tensor_of((float *)t->dweights + store_offset(m, i), CK_F32), (int64_t)m->store_n[i],
                      m->store[i]);
    t->dm = *m;
    remap_ctx r = {{remap, NULL}, m, t->dweights, 0};
    model_weights(&t->dm, &r.v);
    if (r.bad) return ck_fail(err, CKEY_ERR_INTERNAL, "tracker: a weight outside the model's store");
    if (half) {
        half_ctx h = {{half_none, half_conv}, m, t->dweights, (uint16_t *)(void *)((float *)t->dweights + total),
                      malloc(CK_MAX(most, (size_t)1) * sizeof(uint16_t)), t->ops, t->be, 0, 0, 0};
        if (!h.tmp) return ck_fail(err, CKEY_ERR_NOMEM, "tracker: out of memory rounding a conv's weight to fp16");
        model_weights(&t->dm, &h.v);
        free(h.tmp);
        if (h.bad || h.n != halves)
            return ck_fail(err, CKEY_ERR_INTERNAL, "tracker: a conv's weight outside the model's store");
    }
    /* every pointer-sized word of the copy: none may still point into the host store (a weight
     * model_weights does not visit) */
    for (size_t off = 0; off + sizeof(void *) <= sizeof t->dm; off += sizeof(void *)) {
        const char *p;
        memcpy(&p, (const char *)&t->dm + off, sizeof p);
        for (int i = 0; i < m->nstore; i++)
            if (p >= (const char *)m->store[i] && p < (const char *)(m->store[i] + m->store_n[i]))
                return ck_fail(err, CKEY_ERR_INTERNAL, "tracker: a weight (at byte %zu of the model) not copied", off);
    }
    t->dm.store = NULL, t->dm.store_n = NULL, t->dm.nstore = t->dm.capstore = 0;
    t->m = &t->dm;
    return t->bi->ops_status ? t->bi->ops_status(t->be, err) : CKEY_OK;
}

/* Every op of the tracker on a backend. */
static int has_cutie_ops(const ck_backend_i *bi, int *read) {
    const ck_ops *o = bi->ops;
    *read = o->memory_read != NULL;
    return bi->ops_workspace_bytes && bi->mem_alloc && o->read && o->write && o->set_workspace && o->conv2d &&
           o->maxpool3x3s2 && o->resize_bilinear && o->avgpool && o->layer_norm && o->mha && o->unary && o->add &&
           o->copy_channels && o->masks_with_others && o->gru_update && o->channel_attention && o->aggregate &&
           o->softmax_planes && o->object_attn_mask && o->summary_pool && o->summary_values && o->pos_encoding;
}

/* The backend of o->device (ckey_track_options). */
static ckey_status pick_backend(const ckey_track_options *o, const ck_backend_i **out, ckey_error *err) {
    int read = 0;
    const ck_backend_i *cpu = ck_backend_find(CKEY_DEVICE_CPU), *cuda = ck_backend_find(CKEY_DEVICE_CUDA);
    if (o->device == CKEY_TRACK_DEVICE_AUTO) {
        const int cuda_ok = cuda && ckey_device_count(CKEY_DEVICE_CUDA) > 0 && has_cutie_ops(cuda, &read) && read;
        *out = cuda_ok ? cuda : cpu;
    } else if (o->device == CKEY_DEVICE_CUDA) {
        if (!cuda || ckey_device_count(CKEY_DEVICE_CUDA) < 1)
            return ck_fail(err, CKEY_ERR_DEVICE, "tracker: no CUDA device (%s)",
                           cuda ? "none found; is there a GPU and a driver?" : "this build has no CUDA support");
        if (!has_cutie_ops(cuda, &read))
            return ck_fail(err, CKEY_ERR_UNSUPPORTED, "tracker: the CUDA backend lacks some of Cutie's ops");
        if (!read)
            return ck_fail(err, CKEY_ERR_UNSUPPORTED,
                           "tracker: the CUDA backend has no memory_read yet; run the tracker on the CPU");
        *out = cuda;
    } else if (o->device == CKEY_DEVICE_CPU) {
        *out = cpu;
    } else {
        return ck_fail(err, CKEY_ERR_INVALID_ARG, "tracker: device %d is none of CPU, CUDA and AUTO", (int)o->device);
    }
    if (!*out || !has_cutie_ops(*out, &read) || !read)
        return ck_fail(err, CKEY_ERR_UNSUPPORTED, "tracker: this build's %s backend has no Cutie ops",
                       *out ? (*out)->name : "CPU");
    return CKEY_OK;
}

/* The step's result on a device backend: the padded probabilities cropped
 * (and resized back) there, then read into prob; and the ops' first failure. */
static ckey_status device_result(ckey_tracker *t, float *prob, ckey_error *err) {
    const ck_ops *ops = t->ops;
    ck_backend *be = t->be;
    const int O = t->O, Hi = t->Hi, Wi = t->Wi;
    const int64_t HWp = (int64_t)t->Hp * t->Wp;
    const int resize = Hi != t->H0 || Wi != t->W0;
    for (int c = 0; c <= O; c++) /* Hi rows of Wi values, Wp apart */
        ops->copy_channels(be, at(t->prob, c * HWp + (int64_t)t->pad_t * t->Wp + t->pad_l), Hi, Wi, t->Wp,
                           at(t->crop, (int64_t)c * Hi * Wi), Wi);
    ck_tensor res = t->crop;
    if (resize) {
        ops->resize_bilinear(be, t->crop, O + 1, Hi, Wi, 1, none, t->H0, t->W0, t->out);
        res = t->out;
    }
    ops->read(be, res, (int64_t)(O + 1) * t->H0 * t->W0, prob);
    return t->bi->ops_status ? t->bi->ops_status(be, err) : CKEY_OK;
}

/* The tracker's shape for frames of width x height with options `opt`
 * (NULL: the defaults): the checks, the processed and padded sizes, the
 * memory's capacity and the sensory-update frames. Allocates nothing. */
static ckey_status tracker_shape(ckey_tracker *t, const ckey_track_model *m, int32_t width, int32_t height,
                                 const ckey_track_options *opt, ckey_error *err) {
    ckey_track_options o;
    if (opt)
        o = *opt;
    else
        ckey_track_options_default(&o);
    if (!m || width < 1 || height < 1 || width > 32768 || height > 32768)
        return ck_fail(err, CKEY_ERR_INVALID_ARG, "tracker: a model and a frame size of 1 to 32768 pixels are needed (got %d x %d)",
                       (int)width, (int)height);
    if (o.max_objects < 1 || o.max_objects > 255 || o.mem_every < 1 || o.max_mem_frames < 1 ||
        o.stagger_updates < 1 || o.threads < 0)
        return ck_fail(err, CKEY_ERR_INVALID_ARG,
                       "tracker: max_objects 1..255, mem_every, max_mem_frames and stagger_updates >= 1 are needed");
    if (o.precision != CKEY_PRECISION_DEFAULT && o.precision != CKEY_PRECISION_FP32 &&
        o.precision != CKEY_PRECISION_TF32 && o.precision != CKEY_PRECISION_FP16)
        return ck_fail(err, o.precision == CKEY_PRECISION_BF16 ? CKEY_ERR_UNSUPPORTED : CKEY_ERR_INVALID_ARG,
                       "tracker: precision %s (%d): the tracker runs fp32, tf32 or fp16",
                       ckey_precision_name((ckey_precision)o.precision), (int)o.precision);
    t->m = m, t->o = o;
    t->W0 = width, t->H0 = height, t->Wi = width, t->Hi = height;
    const int mn = CK_MIN(width, height);
    if (o.max_internal_size > 0 && mn > o.max_internal_size) { /* InferenceCore.step: int() truncates */
        t->Hi = (int)((double)height / mn * o.max_internal_size);
        t->Wi = (int)((double)width / mn * o.max_internal_size);
    }
    t->Hp = (t->Hi + 15) / 16 * 16, t->Wp = (t->Wi + 15) / 16 * 16;
    t->pad_t = (t->Hp - t->Hi) / 2, t->pad_l = (t->Wp - t->Wi) / 2;
    t->h = t->Hp / 16, t->w = t->Wp / 16, t->hw = t->h * t->w;
    t->lt = o.use_long_term != 0;
    t->cap = (int64_t)(t->lt ? o.lt_max_mem_frames : o.max_mem_frames) * t->hw;
    if (t->lt) {
        t->max_work = (int64_t)(o.lt_max_mem_frames - 1) * t->hw;
        t->min_work = (int64_t)(o.lt_min_mem_frames - 1) * t->hw;
        t->wbase = o.max_num_tokens; /* the store holds fewer (at most max_num_tokens - 1) */
        if (o.top_k <= 0 || o.lt_min_mem_frames < 1 || o.lt_max_mem_frames <= o.lt_min_mem_frames ||
            o.num_prototypes < 1 || o.buffer_tokens < 0 || o.max_num_tokens < (int64_t)o.num_prototypes + o.buffer_tokens ||
            o.max_num_tokens <= o.num_prototypes || t->max_work - t->min_work < o.num_prototypes) {
            const long long room = (long long)(t->max_work - t->min_work);
            return ck_fail(err, CKEY_ERR_INVALID_ARG,
                           "tracker: long-term memory needs top_k > 0, lt_max_mem_frames > lt_min_mem_frames >= 1, "
                           "num_prototypes >= 1 and at most the %lld tokens of lt_max_mem_frames - lt_min_mem_frames "
                           "frames, and max_num_tokens > num_prototypes + buffer_tokens",
                           room);
        }
    }
    t->ti = -1;
    t->bands[0] = t->bands[1] = t->bands[2] = 1;
    /* the frames after a memory frame that update the sensory memory */
    if (o.stagger_updates >= o.mem_every) {
        t->nstagger = CK_MIN(o.mem_every, 64);
        for (int i = 0; i < t->nstagger; i++) t->stagger[i] = i + 1;
    } else {
        t->nstagger = CK_MIN(o.stagger_updates, 64);
        for (int i = 0; i < t->nstagger; i++) /* numpy round (half to even) of linspace(1, mem_every, n) */
            t->stagger[i] = t->nstagger == 1 ? 1
                                              : (int)nearbyint(1.0 + (double)i * (o.mem_every - 1) / (t->nstagger - 1));
    }
    return CKEY_OK;
}

/* What a fixed buffer holds, for the plan's parts (ckey_track_memory). */
enum { FX_FRAME, FX_BANK, FX_SENSORY };
typedef struct {
    ck_tensor *t;
    int64_t n; /* floats */
    int kind;  /* FX_* */
} fixed_buf;
#define FIXED_MAX 32

/* The fixed buffers of a shaped tracker (tracker_shape), in their order in
 * t->fixed; returns their count. One table for the allocation and the plan. */
static int fixed_layout(ckey_tracker *t, fixed_buf fx[FIXED_MAX]) {
    const ck_cutie_cfg *c = &t->m->cfg;
    const int Om = t->o.max_objects;
    const int64_t HWp = (int64_t)t->Hp * t->Wp, hw = t->hw;
    const int64_t nbmax = Om, S = t->wbase + t->cap; /* buckets: each brings an object at least */
    const int resize = t->Hi != t->H0 || t->Wi != t->W0;
    const fixed_buf tab[] = {
        {&t->raw, resize || t->dev ? (int64_t)t->H0 * t->W0 * 3 : 0, FX_FRAME}, /* the frame as given */
        {&t->resized, resize ? (int64_t)t->Hi * t->Wi * 3 : 0, FX_FRAME},
        {&t->img, HWp * 3, FX_FRAME},
        {&t->dec4, HWp / 16 * c->up_dims[1], FX_FRAME},
        {&t->dec8, HWp / 64 * c->up_dims[0], FX_FRAME},
        {&t->pix, hw * c->pixel_dim, FX_FRAME},
        {&t->key, hw * c->key_dim, FX_FRAME},
        {&t->shrink, hw, FX_FRAME},
        {&t->sel, hw * c->key_dim, FX_FRAME},
        {&t->prob, (Om + 1) * HWp, FX_FRAME},
        {&t->sensory, Om * hw * c->sensory_dim, FX_SENSORY},
        {&t->objmem, (int64_t)Om * c->num_queries * (c->embed_dim + 1), FX_SENSORY},
        {&t->mk, S * nbmax * c->key_dim, FX_BANK},
        {&t->ms, S * nbmax, FX_BANK},
        {&t->mv, S * Om * c->value_dim, FX_BANK},
        {&t->wsel, t->lt ? nbmax * t->cap * c->key_dim : 0, FX_BANK},
        {&t->wuse, t->lt ? nbmax * t->cap : 0, FX_BANK},
        {&t->wlife, t->lt ? nbmax * t->cap : 0, FX_BANK},
        {&t->luse, nbmax * t->wbase, FX_BANK},
        {&t->llife, nbmax * t->wbase, FX_BANK},
        {&t->usage, t->lt ? t->wbase + t->cap : 0, FX_BANK},
    };
    _Static_assert(CK_ARRAY_LEN(tab) <= FIXED_MAX, "FIXED_MAX");
    memcpy(fx, tab, sizeof tab);
    return (int)CK_ARRAY_LEN(tab);
}

/* A fixed buffer's bytes in t->fixed (each starts 64-byte aligned). */
static size_t fixed_bytes(int64_t n) { return ((size_t)n * sizeof(float) + 63) / 64 * 64; }

/* The ops' needs of a shaped tracker. */
static void tracker_needs(ckey_tracker *t) {
    const ckey_track_model *m = t->m;
    t->needs.conv_k = m->max_conv_k;
    t->needs.conv_w = m->max_conv_w;
    t->needs.attn_keys = CK_MAX(t->hw, m->cfg.num_queries);
    t->needs.mr_n = t->wbase + t->cap, t->needs.mr_ck = m->cfg.key_dim, t->needs.mr_top_k = t->o.top_k;
    t->needs.mr_usage_hw = t->lt ? t->hw : 0;
}

/* The backend's configuration for options o. */
static ck_backend_config tracker_backend_config(const ckey_track_options *o) {
    ck_backend_config bc = {.threads = o->threads > 0 ? o->threads : (int)sysconf(_SC_NPROCESSORS_ONLN),
                            .act = CK_F32,
                            .conv_precision = o->precision};
    if (bc.threads < 1) bc.threads = 1;
    return bc;
}

/* A device tracker's host staging, in floats: the masks and readbacks
 * (stage: the larger of the masks or probabilities [max_objects, Hp, Wp] and
 * the sensory memory), and with long-term memory its host bookkeeping and
 * row staging (lt_n floats, of which lt_rows for each of the two row
 * buffers). The frame goes up as the caller gives it (raw). */
typedef struct {
    int64_t stage, lt_rows, lt_n;
} staging;

static staging staging_layout(const ckey_tracker *t) {
    const ck_cutie_cfg *c = &t->m->cfg;
    const int64_t Om = t->o.max_objects, HWp = (int64_t)t->Hp * t->Wp, hw = t->hw, CK = c->key_dim;
    staging s = {0};
    s.stage = CK_MAX(Om * HWp, Om * hw * c->sensory_dim);
    if (t->lt) {
        const int64_t row = CK_MAX(CK_MAX(CK, Om * c->value_dim), 2);
        s.lt_rows = CK_MAX(t->wbase, t->cap) * row;
        s.lt_n = Om * (t->cap * CK + 2 * t->cap + 2 * t->wbase) + (t->wbase + t->cap) + 2 * s.lt_rows +
                 CK_MAX(t->wbase, t->cap);
    }
    return s;
}

static int64_t staging_bytes(const staging *s) {
    return (s->stage + s->lt_n) * (int64_t)sizeof(float);
}

/* A device tracker's result resized back to the frame [(max_objects + 1), H0, W0]
 * (device memory; only when the frame is resized). */
static int64_t out_bytes(const ckey_tracker *t) {
    const int resize = t->Hi != t->H0 || t->Wi != t->W0;
    return resize ? (int64_t)(t->o.max_objects + 1) * t->H0 * t->W0 * (int64_t)sizeof(float) : 0;
}

/* The device copy of m's weights (upload_weights' one block; half: with
 * the convs' fp16 weights). */
static int64_t device_weight_bytes(const ckey_track_model *m, int half) {
    return (int64_t)(CK_MAX(store_offset(m, m->nstore), (size_t)1) * sizeof(float) +
                     (half ? model_conv_halves(m, NULL) : 0) * sizeof(uint16_t));
}

static ckey_status tracker_create(const ckey_track_model *m, int32_t width, int32_t height,
                                  const ckey_track_options *opt, int staged, ckey_tracker **out, ckey_error *err) {
    *out = NULL;
    ckey_tracker *t = calloc(1, sizeof *t);
    if (!t) return ck_fail(err, CKEY_ERR_NOMEM, "out of memory");
    ckey_status st = tracker_shape(t, m, width, height, opt, err);
    const ck_backend_i *bi = NULL;
    if (!st) st = pick_backend(&t->o, &bi, err);
    if (st) {
        free(t);
        return st;
    }
    t->bi = bi, t->ops = bi->ops;
    ck_backend_config bc = tracker_backend_config(&t->o);
    st = bi->create(&bc, &t->be, err);
    if (st) {
        free(t);
        return st;
    }
    t->dev = bi->device_memory || staged;
    if (t->dev && (st = upload_weights(t, err))) {
        ckey_tracker_free(t);
        return st;
    }
    fixed_buf fx[FIXED_MAX];
    const int nfx = fixed_layout(t, fx);
    size_t total = 0;
    for (int i = 0; i < nfx; i++) total += fixed_bytes(fx[i].n);
    t->fixed = bi->mem_alloc(t->be, total);
    if (!t->fixed) {
        ckey_tracker_free(t);
        return ck_fail(err, CKEY_ERR_NOMEM, "tracker: out of memory for %.1f MiB of buffers", total / 1048576.0);
    }
    t->fixed_bytes = total;
    size_t off = 0;
    for (int i = 0; i < nfx; i++) {
        *fx[i].t = ck_tensor_of((char *)t->fixed + off, CK_F32);
        off += fixed_bytes(fx[i].n);
    }
    const int64_t sensory_n = (int64_t)t->o.max_objects * t->hw * t->m->cfg.sensory_dim;
    if (t->dev) {
        const staging sg = staging_layout(t);
        t->stage_floats = sg.stage;
        t->stage = calloc((size_t)sg.stage, sizeof(float));
        t->out_bytes = (size_t)out_bytes(t);
        if (t->out_bytes) t->out = ck_tensor_of(bi->mem_alloc(t->be, t->out_bytes), CK_F32);
        if (!t->stage || (t->out_bytes && !t->out.data)) {
            ckey_tracker_free(t);
            return ck_fail(err, CKEY_ERR_NOMEM, "tracker: out of memory for the device's result and host staging");
        }
        t->ops->write(t->be, t->sensory, sensory_n, t->stage); /* zeros */
        if (t->lt) { /* the long-term bookkeeping in host memory, and its staging */
            const int64_t CK = t->m->cfg.key_dim, Om = t->o.max_objects; /* a bucket per object at most */
            t->lt_rows = sg.lt_rows;
            float *h = t->lt_host = calloc((size_t)sg.lt_n, sizeof(float));
            if (!h) {
                ckey_tracker_free(t);
                return ck_fail(err, CKEY_ERR_NOMEM, "tracker: out of memory for the long-term memory's host side");
            }
            t->wsel = ck_tensor_of(h, CK_F32), h += Om * t->cap * CK;
            t->wuse = ck_tensor_of(h, CK_F32), h += Om * t->cap;
            t->wlife = ck_tensor_of(h, CK_F32), h += Om * t->cap;
            t->luse = ck_tensor_of(h, CK_F32), h += Om * t->wbase;
            t->llife = ck_tensor_of(h, CK_F32), h += Om * t->wbase;
            t->lt_usage = h, h += t->wbase + t->cap;
            t->lt_a = h, h += t->lt_rows;
            t->lt_b = h, h += t->lt_rows;
            t->lt_idx = (int32_t *)(void *)h;
        }
        t->staging_bytes = staging_bytes(&sg);
    } else {
        memset(t->sensory.data, 0, (size_t)sensory_n * sizeof(float)); /* host memory */
    }
    tracker_needs(t);
    t->ws_bytes = bi->ops_workspace_bytes(&bc, &t->needs);
    t->ws = bi->mem_alloc(t->be, t->ws_bytes);
    if (!t->ws) {
        ckey_tracker_free(t);
        return ck_fail(err, CKEY_ERR_NOMEM, "tracker: out of memory for the ops' workspace");
    }
    t->ops->set_workspace(t->be, t->ws, &t->needs);
    if (bi->ops_status && (st = bi->ops_status(t->be, err))) {
        ckey_tracker_free(t);
        return st;
    }
    *out = t;
    return CKEY_OK;
}

ckey_status ckey_tracker_create(const ckey_track_model *m, int32_t width, int32_t height,
                                const ckey_track_options *opt, ckey_tracker **out, ckey_error *err) {
    return tracker_create(m, width, height, opt, 0, out, err);
}

ckey_status ck_tracker_create_staged(const ckey_track_model *m, int32_t width, int32_t height,
                                     const ckey_track_options *opt, ckey_tracker **out, ckey_error *err) {
    return tracker_create(m, width, height, opt, 1, out, err);
}

static ckey_status grown_arena(ckey_tracker *t, size_t *arena, ckey_error *err);

/* What lies in the arena between the parts: a mask's logits [max_objects,
 * Hp, Wp] and the cropped result [max_objects + 1, Hi, Wi]. */
static size_t between_parts_bytes(const ckey_tracker *t) {
    const int64_t Om = t->o.max_objects;
    return CK_MAX(fixed_bytes((Om + 1) * (int64_t)t->Hi * t->Wi), fixed_bytes(Om * (int64_t)t->Hp * t->Wp));
}

/* One part's arena, recorded with no op table (the plan left freed). */
static ckey_status part_arena(ckey_tracker *t, int part, size_t *bytes, ckey_error *err) {
    ckey_status st = ck_plan_create(&t->plan[part], err);
    if (!st) {
        ck_plan_begin_record(t->plan[part]);
        run_part(t, part, 0);
        st = ck_plan_finish(t->plan[part], err);
    }
    *bytes = st ? 0 : ck_plan_arena_bytes(t->plan[part]);
    ck_plan_free(t->plan[part]);
    t->plan[part] = NULL;
    return st;
}

/* The row bands of the pixel encoder, the decoder and the mask encoder
 * (t->bands), planned for max_objects objects: one (whole maps) while the
 * part's arena fits CUTIE_ARENA_BUDGET, else the fewest that make it fit,
 * as long as one more band still lowers it, and bands of 4 stride-16 rows
 * at least (a band recomputes a halo of rows on each side). */
#define CUTIE_ARENA_BUDGET ((size_t)384 << 20)
static ckey_status choose_bands(ckey_tracker *t, ckey_error *err) {
    if (t->force_bands) return CKEY_OK;
    static const int parts[3] = {PART_ENCODE, PART_SEGMENT_UPDATE, PART_MEMORIZE};
    const int O = t->O, nb = t->nb, bno = t->bno[0], most = CK_MAX(t->h / 4, 1);
    t->O = t->o.max_objects, t->nb = 1, t->bno[0] = t->O;
    ckey_status st = CKEY_OK;
    for (int i = 0; i < 3 && !st; i++) {
        size_t cur = 0, next = 0;
        t->bands[i] = 1;
        st = part_arena(t, parts[i], &cur, err);
        while (!st && cur > CUTIE_ARENA_BUDGET && t->bands[i] < most) {
            t->bands[i]++;
            if ((st = part_arena(t, parts[i], &next, err))) break;
            if (next + next / 64 >= cur) { /* no lower */
                t->bands[i]--;
                break;
            }
            cur = next;
        }
    }
    t->O = O, t->nb = nb, t->bno[0] = bno;
    return st;
}

void ck_tracker_set_bands(ckey_tracker *t, int encode, int decode, int memorize) {
    t->bands[0] = CK_MAX(encode, 1), t->bands[1] = CK_MAX(decode, 1), t->bands[2] = CK_MAX(memorize, 1);
    t->force_bands = 1;
}

struct ck_backend *ck_tracker_backend(ckey_tracker *t) { return t ? t->be : NULL; }

/* The parts' plans for t->O objects, recorded with no op table (t's fixed
 * buffers may be NULL: nothing is read or written), and the shared arena's
 * size: the largest part's, plus the slack plan_parts allocates. */
static ckey_status record_parts(ckey_tracker *t, size_t *arena, ckey_error *err) {
    *arena = 0;
    for (int p = 0; p < PART_COUNT; p++) {
        ckey_status st = ck_plan_create(&t->plan[p], err);
        if (st) return st;
        ck_plan_begin_record(t->plan[p]);
        run_part(t, p, 0);
        if ((st = ck_plan_finish(t->plan[p], err))) return st;
        *arena = CK_MAX(*arena, ck_plan_arena_bytes(t->plan[p]));
    }
    *arena = CK_MAX(*arena, between_parts_bytes(t)) + 64;
    return CKEY_OK;
}

/* The fixed buffers' bytes of a shaped tracker into out's bank, sensory and
 * frame parts; returns their sum. */
static int64_t fixed_parts(ckey_tracker *t, ckey_track_memory *out) {
    fixed_buf fx[FIXED_MAX];
    const int nfx = fixed_layout(t, fx);
    int64_t sum = 0;
    for (int i = 0; i < nfx; i++) {
        const int64_t b = (int64_t)fixed_bytes(fx[i].n);
        if (fx[i].kind == FX_BANK) out->bank_bytes += b;
        else if (fx[i].kind == FX_SENSORY) out->sensory_bytes += b;
        else out->frame_bytes += b;
        sum += b;
    }
    return sum;
}

/* total_bytes and host_bytes from the parts (device_memory: weights to
 * workspace are device memory). */
static void memory_sums(ckey_track_memory *out, int device_memory) {
    const int64_t main_parts = out->weight_bytes + out->bank_bytes + out->sensory_bytes + out->frame_bytes +
                               out->arena_bytes + out->workspace_bytes;
    out->total_bytes = main_parts + out->model_bytes + out->staging_bytes + out->source_bytes;
    out->host_bytes = out->total_bytes - (device_memory ? main_parts : 0);
}

/* ckey_track_plan_memory's plan: staged, as ck_tracker_create_staged makes it. */
static ckey_status track_plan(const ckey_track_model *m, int32_t width, int32_t height, const ckey_track_options *opt,
                              int32_t first_objects, int staged, ckey_track_memory *out, ckey_error *err) {
    if (out) memset(out, 0, sizeof *out);
    if (!out) return ck_fail(err, CKEY_ERR_INVALID_ARG, "ckey_track_plan_memory: NULL argument");
    ckey_tracker *t = calloc(1, sizeof *t);
    if (!t) return ck_fail(err, CKEY_ERR_NOMEM, "out of memory");
    ckey_status st = tracker_shape(t, m, width, height, opt, err);
    const ck_backend_i *bi = NULL;
    if (!st) st = pick_backend(&t->o, &bi, err);
    size_t arena = 0;
    if (!st) {
        t->dev = bi->device_memory || staged;
        fixed_parts(t, out);
        tracker_needs(t);
        const ck_backend_config bc = tracker_backend_config(&t->o);
        out->workspace_bytes = (int64_t)bi->ops_workspace_bytes(&bc, &t->needs);
        if (t->dev) {
            const staging sg = staging_layout(t);
            out->weight_bytes = device_weight_bytes(m, half_convs(&t->o, bi));
            out->model_bytes = m->weight_bytes;
            out->frame_bytes += out_bytes(t);
            out->staging_bytes = staging_bytes(&sg);
        } else {
            out->weight_bytes = m->weight_bytes;
        }
        out->device = bi == ck_backend_find(CKEY_DEVICE_CUDA) ? CKEY_DEVICE_CUDA : CKEY_DEVICE_CPU;
        /* the first frame's objects (at most max_objects; 0: max_objects), as plan_parts plans them */
        t->O = first_objects > 0 && first_objects < t->o.max_objects ? first_objects : t->o.max_objects;
        t->nb = 1, t->bno[0] = t->O;
        size_t own = 0;
        st = choose_bands(t, err);
        if (!st) st = grown_arena(t, &arena, err);
        if (!st) st = record_parts(t, &own, err);
        arena = CK_MAX(arena, own);
    }
    for (int p = 0; p < PART_COUNT; p++) ck_plan_free(t->plan[p]);
    const int device_memory = bi && bi->device_memory;
    free(t);
    if (st) {
        memset(out, 0, sizeof *out);
        return st;
    }
    out->arena_bytes = (int64_t)arena;
    memory_sums(out, device_memory);
    return CKEY_OK;
}

ckey_status ckey_track_plan_memory(const ckey_track_model *m, int32_t width, int32_t height,
                                   const ckey_track_options *opt, ckey_track_memory *out, ckey_error *err) {
    return track_plan(m, width, height, opt, 0, 0, out, err);
}

ckey_status ck_track_plan_memory_first(const ckey_track_model *m, int32_t width, int32_t height,
                                       const ckey_track_options *opt, int32_t first_objects, ckey_track_memory *out,
                                       ckey_error *err) {
    return track_plan(m, width, height, opt, first_objects, 0, out, err);
}

ckey_status ck_track_plan_memory_staged(const ckey_track_model *m, int32_t width, int32_t height,
                                        const ckey_track_options *opt, int32_t first_objects, ckey_track_memory *out,
                                        ckey_error *err) {
    return track_plan(m, width, height, opt, first_objects, 1, out, err);
}

void ckey_tracker_get_memory(const ckey_tracker *t, ckey_track_memory *out) {
    if (!out) return;
    memset(out, 0, sizeof *out);
    if (!t) return;
    ckey_tracker shaped = *t; /* the layout's parts; their sum is what t->fixed took */
    const int64_t sum = fixed_parts(&shaped, out);
    if (sum != (int64_t)t->fixed_bytes) out->frame_bytes += (int64_t)t->fixed_bytes - sum; /* never: one table */
    if (t->dev) {
        out->weight_bytes = (int64_t)t->dweight_bytes;
        out->model_bytes = t->m->weight_bytes; /* t->dm: a copy of the host model's fields */
        out->frame_bytes += (int64_t)t->out_bytes;
        out->staging_bytes = t->staging_bytes;
    } else {
        out->weight_bytes = t->m->weight_bytes;
    }
    out->device = t->bi == ck_backend_find(CKEY_DEVICE_CUDA) ? CKEY_DEVICE_CUDA : CKEY_DEVICE_CPU;
    out->arena_bytes = (int64_t)t->arena_bytes;
    out->workspace_bytes = (int64_t)t->ws_bytes;
    memory_sums(out, t->bi->device_memory);
}

/* The arena for objects added later (a bucket of max_objects - O more), when
 * the tracker has room for them: the larger of *arena and that plan's, so
 * no frame allocates after the first. The parts' plans are left freed. */
static ckey_status grown_arena(ckey_tracker *t, size_t *arena, ckey_error *err) {
    for (int p = 0; p < PART_COUNT; p++) ck_plan_free(t->plan[p]), t->plan[p] = NULL;
    if (t->o.max_objects <= t->O) return CKEY_OK;
    const int O = t->O, nb = t->nb;
    t->nb = 2, t->bo0[1] = O, t->bno[1] = t->o.max_objects - O, t->O = t->o.max_objects;
    size_t grown = 0;
    ckey_status st = record_parts(t, &grown, err);
    t->O = O, t->nb = nb, t->bo0[1] = 0, t->bno[1] = 0;
    for (int p = 0; p < PART_COUNT; p++) ck_plan_free(t->plan[p]), t->plan[p] = NULL;
    *arena = CK_MAX(*arena, grown);
    return st;
}

/* Plans of the parts for O objects and their shared arena (the first frame). */
static ckey_status plan_parts(ckey_tracker *t, ckey_error *err) {
    size_t arena = 0, own = 0;
    ckey_status st = choose_bands(t, err);
    if (st || (st = grown_arena(t, &arena, err)) || (st = record_parts(t, &own, err))) return st;
    arena = CK_MAX(arena, own);
    t->arena = t->bi->mem_alloc(t->be, arena);
    if (!t->arena) return ck_fail(err, CKEY_ERR_NOMEM, "tracker: out of memory for a %.1f MiB arena", arena / 1048576.0);
    t->arena_bytes = arena;
    t->onehot = t->crop = ck_tensor_of(t->arena, CK_F32);
    return CKEY_OK;
}

/* Bilinear source index (align_corners=False) as PyTorch's nearest-exact:
 * floor((d + 0.5) * in / out), clamped. */
static int nearest_exact(int d, int in, int out) {
    const int s = (int)floor((d + 0.5) * ((double)in / out));
    return s < in ? s : in - 1;
}

ckey_status ckey_tracker_step(ckey_tracker *t, const float *rgb, const uint8_t *labels, int32_t num_objects,
                              const uint8_t *objects, float *prob, ckey_error *err) {
    if (!t || !rgb || !prob) return ck_fail(err, CKEY_ERR_INVALID_ARG, "tracker step: a tracker, a frame and an output are needed");
    int added = 0; /* objects a later mask brings */
    if (t->O == 0) {
        if (!labels || !objects || num_objects < 1 || num_objects > t->o.max_objects)
            return ck_fail(err, CKEY_ERR_INVALID_ARG,
                           "tracker step: the first frame needs labels and 1 to %d objects (got %d)", (int)t->o.max_objects,
                           (int)num_objects);
        for (int i = 0; i < num_objects; i++)
            for (int j = 0; j < i; j++)
                if (objects[i] == objects[j] || objects[i] == 0)
                    return ck_fail(err, CKEY_ERR_INVALID_ARG, "tracker step: object labels must be distinct and nonzero");
        if (objects[0] == 0) return ck_fail(err, CKEY_ERR_INVALID_ARG, "tracker step: label 0 is the background");
        t->O = num_objects;
        t->nb = 1, t->bo0[0] = 0, t->bno[0] = num_objects;
        memcpy(t->objects, objects, (size_t)num_objects);
        ckey_status st = plan_parts(t, err);
        if (st) { /* back to the state before the call */
            for (int i = 0; i < PART_COUNT; i++) ck_plan_free(t->plan[i]), t->plan[i] = NULL;
            t->bi->mem_free(t->be, t->arena);
            t->arena = NULL;
            t->arena_bytes = 0;
            t->O = 0;
            return st;
        }
    } else if (labels) {
        if (!objects || num_objects < 1 || num_objects > t->o.max_objects)
            return ck_fail(err, CKEY_ERR_INVALID_ARG, "tracker step: a later mask needs 1 to %d objects (got %d)",
                           t->o.max_objects, (int)num_objects);
        for (int i = 0; i < num_objects; i++) {
            int known = 0;
            for (int k = 0; k < t->O; k++) known |= t->objects[k] == objects[i];
            if (!known) {
                if (objects[i] == 0) return ck_fail(err, CKEY_ERR_INVALID_ARG, "tracker step: label 0 is the background");
                added++;
            }
            for (int j = 0; j < i; j++)
                if (objects[i] == objects[j])
                    return ck_fail(err, CKEY_ERR_INVALID_ARG, "tracker step: object labels must be distinct");
        }
        if (t->O + added > t->o.max_objects)
            return ck_fail(err, CKEY_ERR_INVALID_ARG, "tracker step: the mask brings %d new object%s, %d in all: more "
                           "than max_objects (%d)", added, added == 1 ? "" : "s", t->O + added, t->o.max_objects);
    }
    const ck_ops *ops = t->ops;
    ck_backend *be = t->be;
    const int O = t->O, Hp = t->Hp, Wp = t->Wp, Hi = t->Hi, Wi = t->Wi;
    const int64_t HWp = (int64_t)Hp * Wp;
    const int resize = Hi != t->H0 || Wi != t->W0;
    t->ti++;
    const int is_mem = (t->ti - t->last_mem_ti >= t->o.mem_every) || labels != NULL;
    int update_sensory = 0;
    for (int i = 0; i < t->nstagger; i++) update_sensory |= t->ti - t->last_mem_ti == t->stagger[i];
    /* the frame: resized (bilinear, align_corners=False) to the internal
     * size, then padded with zeros and normalized (pad_normalize: the padding
     * becomes -mean/std), all by the backend. The CPU backend reads the
     * caller's frame where it lies; a device's gets it uploaded into raw. */
    ck_tensor src = ck_tensor_of((float *)rgb, CK_F32);
    if (resize || t->dev) {
        ops->write(be, t->raw, (int64_t)t->H0 * t->W0 * 3, rgb);
        src = t->raw;
    }
    if (resize) {
        ops->resize_bilinear(be, t->raw, 1, t->H0, t->W0, 3, none, Hi, Wi, t->resized);
        src = t->resized;
    }
    ops->pad_normalize(be, src, Hi, Wi, t->pad_t, t->pad_l, Hp, Wp, t->img);
    run_part(t, PART_ENCODE, 1);
    /* A later mask of objects the tracker knows is the frame's result, as the
     * official InferenceCore.step takes a mask that brings no new object: the
     * frame is not segmented; each object is its label's pixels, an object the
     * mask does not list is absent. A mask that brings new objects is merged
     * into the frame's segmentation of the known ones (need_segment): those
     * the mask lists are their label's pixels, the others keep their
     * probability where the mask is background and are 0 on its objects, and
     * the new objects (in the order listed) join after them, each in a bucket
     * of its mask's new objects with a memory of its own. */
    if (!labels || added) run_part(t, update_sensory ? PART_SEGMENT_UPDATE : PART_SEGMENT, 1);
    if (labels) {
        const int On = O + added;
        uint8_t ids[256];
        memcpy(ids, t->objects, (size_t)O);
        for (int i = 0, n = O; i < num_objects; i++) {
            int known = 0;
            for (int k = 0; k < O; k++) known |= t->objects[k] == objects[i];
            if (!known) ids[n++] = objects[i];
        }
        /* the masks' logits, and the known objects' probabilities (planes 1..O
         * of prob, object o at pp[o * HWp]) where a mask brings new objects. On
         * a device both are the host staging: the probabilities read into it
         * and each replaced in place by its logit. */
        float *oh = t->dev ? t->stage : (float *)t->onehot.data;
        const float *pp = t->dev ? t->stage : (const float *)t->prob.data + HWp;
        if (added && t->dev) ops->read(be, at(t->prob, HWp), (int64_t)O * HWp, t->stage);
        for (int o = 0; o < On; o++) {
            int listed = 0;
            for (int i = 0; i < num_objects; i++) listed |= objects[i] == ids[o];
            for (int y = 0; y < Hp; y++)
                for (int x = 0; x < Wp; x++) {
                    const int sy = y - t->pad_t, sx = x - t->pad_l;
                    int lab = 0;
                    if (sy >= 0 && sy < Hi && sx >= 0 && sx < Wi)
                        lab = labels[(size_t)(resize ? nearest_exact(sy, t->H0, Hi) : sy) * t->W0 +
                                     (resize ? nearest_exact(sx, t->W0, Wi) : sx)];
                    const int on_mask = lab != 0; /* the official pred_prob_no_bg[:, mask > 0] = 0 */
                    const size_t px = (size_t)y * Wp + x;
                    float v; /* the logit of the object's probability: +-inf give sigmoid exactly 1 and 0 */
                    if (listed || !added) {
                        v = listed && lab == ids[o] ? INFINITY : -INFINITY;
                    } else {
                        const float p = on_mask ? 0.0f : pp[(size_t)o * HWp + px];
                        v = p <= 0.0f ? -INFINITY : p >= 1.0f ? INFINITY : logf(p / (1.0f - p));
                    }
                    oh[(size_t)o * HWp + px] = v;
                }
        }
        if (t->dev) ops->write(be, t->onehot, (int64_t)On * HWp, oh);
        if (added) { /* the new objects' bucket, and the parts' plans for them (in the arena made for them) */
            const int b = t->nb;
            memcpy(t->objects, ids, (size_t)On);
            t->bo0[b] = O, t->bno[b] = added, t->bN[b] = 0, t->bL[b] = 0, t->bmf[b] = 0;
            t->nb = b + 1, t->O = On;
            for (int p = 0; p < PART_COUNT; p++) ck_plan_free(t->plan[p]), t->plan[p] = NULL;
            size_t need = 0;
            ckey_status st = record_parts(t, &need, err);
            if (!st && need > t->arena_bytes)
                st = ck_fail(err, CKEY_ERR_INTERNAL, "tracker: %d objects need a %zu-byte arena, %zu were made", On,
                             need, t->arena_bytes);
            if (st) return st;
        }
        /* softmax(aggregate(masks)) */
        ops->aggregate(be, t->onehot, On, HWp, t->prob);
        ops->softmax_planes(be, t->prob, On + 1, HWp);
    }
    if (is_mem) {
        run_part(t, PART_MEMORIZE, 1);
        t->last_mem_ti = t->ti;
    }
    if (t->tap) {
        cx x = {ops, be, NULL, t};
        tap(&x, "sensory", t->sensory, (int64_t)t->O * t->hw * t->m->cfg.sensory_dim);
        tap(&x, "prob_padded", t->prob, (int64_t)(t->O + 1) * HWp);
    }
    if (t->dev) return device_result(t, prob, err);
    /* unpad (and resize back) */
    float *dst = resize ? (float *)t->crop.data : prob;
    const float *pp = t->prob.data;
    for (int c = 0; c <= t->O; c++)
        for (int y = 0; y < Hi; y++)
            memcpy(dst + ((size_t)c * Hi + y) * Wi, pp + (size_t)c * HWp + (size_t)(y + t->pad_t) * Wp + t->pad_l,
                   (size_t)Wi * sizeof(float));
    if (resize)
        ops->resize_bilinear(be, t->crop, t->O + 1, Hi, Wi, 1, (ck_tensor){NULL, CK_F32}, t->H0, t->W0,
                             ck_tensor_of(prob, CK_F32));
    return CKEY_OK;
}
