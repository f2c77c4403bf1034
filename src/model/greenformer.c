/* The GreenFormer forward pass, top to bottom. Each step names the shapes
 * (S = network size, G = S/4) and the upstream code it mirrors: timm
 * hiera.py (Hiera.forward_intermediates, HieraBlock, MaskUnitAttention) and
 * CorridorKey model_transformer.py (DecoderHead, CNNRefinerModule,
 * GreenFormer.forward). */
#include <math.h>

#include "model/greenformer.h"

const char *const ck_prof_names[CK_PROF_COUNT] = {
    "patch_embed", "mask_unit_attention", "layernorm", "linear", "linear_maxpool", "global_attention",
    "mlp", "reroll", "decoder", "refiner_conv", "refiner_other"};

/* Call an op of the backend (nothing during the planning pass). */
#define OPP(f, bucket, name, ...)                                        \
    do {                                                                 \
        if ((f)->ops) {                                                  \
            if ((f)->prof && (f)->ops->sync) (f)->ops->sync((f)->be);    \
            double t0_ = (f)->prof ? ck_now() : 0;                       \
            (f)->ops->name((f)->be, __VA_ARGS__);                        \
            if ((f)->prof && (f)->ops->sync) (f)->ops->sync((f)->be);    \
            if ((f)->prof) (f)->prof[bucket] += ck_now() - t0_;          \
            if ((f)->ops->trace) (f)->ops->trace((f)->be, #name);        \
        }                                                                \
    } while (0)
#define OP(f, name, ...) OPP(f, CK_PROF_REFINER_OTHER, name, __VA_ARGS__)

static void tap(const ck_fwd *f, const char *name, ck_tensor t, int ndim, int64_t d0, int64_t d1, int64_t d2) {
    if (!f->ops || !f->tap) return;
    int64_t shape[3] = {d0, d1, d2};
    f->tap(f->tap_user, name, t, shape, ndim);
}

/* Begin a phase: allocate its scratch (if the backend sized one) and hand it
 * to the backend. */
static void *phase_begin(const ck_fwd *f, int phase) {
    static const char *const tags[CK_PHASE_COUNT] = {"scratch: encoder", "scratch: refiner stem"};
    const size_t bytes = f->p.phase_scratch[phase];
    if (!bytes) return NULL;
    void *p = ck_alloc(f->plan, bytes, tags[phase]);
    if (f->ops && f->ops->set_scratch) f->ops->set_scratch(f->be, p, bytes);
    return p;
}

/* End a phase: its scratch is free for the buffers that follow. */
static void phase_end(const ck_fwd *f, void *scratch) {
    if (!scratch) return;
    if (f->ops && f->ops->set_scratch) f->ops->set_scratch(f->be, NULL, 0);
    ck_release(f->plan, scratch);
}

/* A tensor of n elements of type `type` from the plan. */
static ck_tensor alloc_t(ck_plan *pl, int64_t n, ck_dtype type, const char *tag) {
    return ck_tensor_of(ck_alloc(pl, (size_t)n * ck_dtype_size(type), tag), type);
}
#define ALLOC_ACT(n, tag) alloc_t(pl, (n), f->act, (tag))
#define ALLOC_F32(n, tag) alloc_t(pl, (n), CK_F32, (tag))
#define RELEASE(t) ck_release(pl, (t).data)

int ck_schedule_supported(const ck_ops *ops, const ck_schedule *s) {
    if (s->c1_on_host && !(ops->to_host && ops->from_host)) return 0;
    if (s->qkv_streamed && !ops->attention_qkv) return 0;
    if (s->decoder_band > 0 && !ops->decoder_fuse_rows) return 0;
    if (s->transition_from_map && !(ops->mask_unit_attention_map && ops->layernorm_map)) return 0;
    if (s->norm1_from_map && !(s->qkv_streamed && s->transition_from_map && ops->linear_maxpool_map &&
                               ops->attention_qkv_map))
        return 0;
    if (s->reroll_in_place && !(s->transition_from_map && ops->reroll_inplace)) return 0;
    if (s->encoder_band > 0 && !(s->decoder_band > 0 && !s->c1_on_host && ops->patch_embed_rows && ops->copy_rows))
        return 0;
    if (s->out_in_input && !(s->refiner_band > 0 && ops->copy_rows && (!s->input_rgb || s->encoder_band > 0)))
        return 0;
    if (s->c1_bands && !(s->c1_on_host && s->decoder_band > 0 && ops->reroll_rows)) return 0;
    if (s->x_on_host && !(s->refiner_band > 0 && ops->to_host && ops->from_host)) return 0;
    if (s->out_on_host &&
        !(s->refiner_band > 0 && !s->out_in_input && ops->to_host && ops->finalize_rows && ops->host_ptr))
        return 0;
    if (s->refiner_band <= 0) return 1;
    return ops->refiner_input_rows && ops->conv3x3_rows && ops->pointwise_conv_rows;
}

/* The refiner's nine 3x3 convs in order: the stem, then res1..res4's conv1
 * and conv2 (model.h ck_schedule). */
enum { REF_CONVS = 9 };
static const int ref_dil[REF_CONVS] = {1, 1, 1, 2, 2, 4, 4, 8, 8};

/* A range of image rows [lo, hi). */
typedef struct {
    int lo, hi;
} rows_t;

int ck_refiner_band_halo(void) {
    int h = 0;
    for (int k = 0; k < REF_CONVS; k++) h += ref_dil[k];
    return 2 * h;
}

static rows_t grow(rows_t r, int d, int S) {
    rows_t g = {CK_MAX(0, r.lo - d), CK_MIN(S, r.hi + d)};
    return g;
}

size_t ck_x_host_offset(const ck_config *c, int S, const ck_schedule *s, ck_dtype act) {
    const size_t G = (size_t)(S / c->patch_stride);
    return s->c1_on_host ? G * G * (size_t)c->embed_dim * ck_dtype_size(act) : 0;
}

/* x's planes in host memory (x_on_host): all of them under encoder_band,
 * whose decoder bands read the hint plane again, else the RGB planes. */
static int x_host_planes(const ck_config *c, const ck_schedule *s) {
    return !s->x_on_host ? 0 : s->encoder_band > 0 ? c->in_chans : 3;
}

/* Where the output waits in host memory (out_on_host): after c1 and x. */
static size_t out_host_offset(const ck_config *c, int S, const ck_schedule *s, ck_dtype act) {
    return ck_x_host_offset(c, S, s, act) + (size_t)x_host_planes(c, s) * S * S * ck_dtype_size(act);
}

size_t ck_host_map_bytes(const ck_config *c, int S, const ck_schedule *s, ck_dtype act) {
    return out_host_offset(c, S, s, act) + (s->out_on_host ? (size_t)4 * S * S * sizeof(float) : 0);
}

/* Whether the refiner's deltas go into x's own buffer (ck_schedule.out_in_input;
 * x and the deltas both 4 planes of fp32, the refiner's input band [7, n, S]). */
static int out_in_input(const ck_fwd *f) {
    return f->sched.out_in_input && f->sched.refiner_band > 0 && ck_dtype_size(f->act) == sizeof(float) &&
           (f->p.band_input_ch <= 0 || f->p.band_input_ch == 7);
}

/* The first input row of the last pass's band at y0 (bands of B rows). */
static int band_input_lo(int y0, int B, int S) {
    rows_t r = {y0, CK_MIN(S, y0 + B)};
    for (int k = REF_CONVS - 1; k >= 0; k--) r = grow(r, ref_dil[k], S);
    return r.lo;
}

/* The refiner in bands of B output rows (ck_schedule.refiner_band): ten
 * passes over the image, pass k < 9 summing GroupNorm k's statistics, pass 9
 * writing the deltas [4, S, S] (fp32, returned). Each band is recomputed
 * from x and the logits: conv j's output is needed on the band grown by the
 * dilations of the convs after j, up to the pass's conv. Band buffers (rows
 * of S pixels): rin, n * S * 7 values (ck_pass_params.band_input_ch); xb, the residual stream x_r (the stem's
 * output after its GroupNorm + ReLU, then each block's sum, in place); tb,
 * conv1's output (then relu(gn1(.)) in place); vb, conv2's output. */
static ck_tensor refiner_banded(const ck_fwd *f, ck_tensor x, ck_tensor logits) {
    const ck_config *c = f->c;
    const ck_refiner_w *rw = &f->w->ref;
    ck_plan *pl = f->plan;
    const int S = f->S, R = c->ref_dim, gr = c->ref_groups, B = CK_MIN(f->sched.refiner_band, S);
    const int64_t HW = (int64_t)S * S;
    const int64_t nmax = CK_MIN(S, B + ck_refiner_band_halo());
    const size_t es = ck_dtype_size(f->act), x_host = ck_x_host_offset(c, S, &f->sched, f->act);
    /* out_in_input: the deltas overwrite x [4, S, S] itself, band by band in
     * the last pass; the RGB rows a band overwrites that later bands still
     * read wait in sv, rows [sv0, sv1) (at most half the halo and a band) */
    const int in_x = out_in_input(f);
    const int svr = B + ck_refiner_band_halo() / 2;
    /* out_on_host: each band's deltas, then its alpha and fg, in ob [4, B, S]
     * on their way to host memory at out_host */
    const int on_host = f->sched.out_on_host;
    const size_t out_host = out_host_offset(c, S, &f->sched, f->act);
    ck_tensor out = in_x ? ck_tensor_of(x.data, CK_F32) : on_host ? (ck_tensor){0} : ALLOC_F32(4 * HW, "output");
    ck_tensor ob = on_host ? ALLOC_F32(4 * (int64_t)B * S, "refiner band: output") : (ck_tensor){0};
    ck_tensor sv = in_x ? ALLOC_ACT(3 * (int64_t)svr * S, "refiner band: saved input") : (ck_tensor){0};
    int sv0 = 0, sv1 = 0;
    double *stats = ck_alloc(pl, (size_t)gr * 2 * sizeof(double), "gn stats");
    float *aff = ck_alloc_f32(pl, (size_t)REF_CONVS * 2 * R, "gn affines");
    const int rin_ch = f->p.band_input_ch > 0 ? f->p.band_input_ch : 7;
    ck_tensor rin = ALLOC_ACT(rin_ch * nmax * S, "refiner band: input");
    ck_tensor xb = ALLOC_ACT(nmax * S * R, "refiner band: x");
    ck_tensor tb = ALLOC_ACT(nmax * S * R, "refiner band: t");
    ck_tensor vb = ALLOC_ACT(nmax * S * R, "refiner band: v");
    /* x_on_host: the band's rows of x's RGB planes [3, nmax, S], fetched per band */
    ck_tensor xin = f->sched.x_on_host ? ALLOC_ACT(3 * nmax * S, "refiner band: x input") : x;
    const ck_weight *W[REF_CONVS], *Bw[REF_CONVS], *G[REF_CONVS], *Be[REF_CONVS];
    W[0] = &rw->stem_w, Bw[0] = &rw->stem_b, G[0] = &rw->stem_gn_w, Be[0] = &rw->stem_gn_b;
    for (int k = 1; k < REF_CONVS; k++)
        W[k] = &rw->conv_w[k - 1], Bw[k] = &rw->conv_b[k - 1], G[k] = &rw->gn_w[k - 1], Be[k] = &rw->gn_b[k - 1];
    for (int pass = 0; pass <= REF_CONVS; pass++) {
        const int last = CK_MIN(pass, REF_CONVS - 1); /* the deepest conv this pass computes */
        double *st = pass < REF_CONVS ? stats : NULL;
        if (st) OP(f, zero_stats, stats, 2 * gr);
        for (int y0 = 0; y0 < S; y0 += B) {
            /* e[k]: the rows of conv k's output this band needs; in0: rin's */
            rows_t e[REF_CONVS];
            e[last].lo = y0, e[last].hi = CK_MIN(S, y0 + B);
            for (int k = last; k > 0; k--) e[k - 1] = grow(e[k], ref_dil[k], S);
            const rows_t in0 = grow(e[0], ref_dil[0], S);
            const int xlo = e[0].lo; /* xb's first row */
#define ROWS(r) ((r).hi - (r).lo)
#define BAND_AT(t, r, base) ck_tensor_at((t), (int64_t)((r).lo - (base)) * S * R)
            for (int ch = 0; f->sched.x_on_host && ch < 3; ch++) /* x's rows in0 of plane ch */
                OP(f, from_host, x_host + (size_t)((int64_t)ch * HW + (int64_t)in0.lo * S) * es,
                   (size_t)((int64_t)ROWS(in0) * S) * es, ck_tensor_at(xin, (int64_t)ch * nmax * S));
            OP(f, refiner_input_rows, xin, f->sched.x_on_host ? in0.lo : 0, f->sched.x_on_host ? (int)nmax : S, logits,
               S, in0.lo, ROWS(in0), rin);
            if (in_x && pass == REF_CONVS && in0.lo < sv1) /* x's rows [in0.lo, sv1) are deltas now */
                OP(f, copy_rows, sv, svr, in0.lo - sv0, rin, ROWS(in0), 0, 3, sv1 - in0.lo, S);
            OPP(f, CK_PROF_REFINER_CONV, conv3x3_rows, rin, 1, 7, S, 1, in0.lo, ROWS(in0), *W[0], *Bw[0], xb,
                e[0].lo, ROWS(e[0]), R, gr, last == 0 ? st : NULL);
            if (f->cost) *f->cost += (double)ROWS(e[0]) * S * 9 * 7 * R;
            if (last == 0 && st) continue;
            OP(f, affine_relu, xb, R, (int64_t)ROWS(e[0]) * S, aff, aff + R);
            for (int r = 0; r < 4; r++) {
                const int k1 = 1 + 2 * r, k2 = k1 + 1, d = ref_dil[k1];
                if (k1 > last) break;
                /* t = conv1(x_r) on e[k1]; x_r is valid on e[k1 - 1] */
                OPP(f, CK_PROF_REFINER_CONV, conv3x3_rows, BAND_AT(xb, e[k1 - 1], xlo), 0, R, S, d, e[k1 - 1].lo,
                    ROWS(e[k1 - 1]), *W[k1], *Bw[k1], tb, e[k1].lo, ROWS(e[k1]), R, gr, pass == k1 ? st : NULL);
                if (f->cost) *f->cost += (double)ROWS(e[k1]) * S * 9 * R * R;
                if (pass == k1) break;
                OP(f, affine_relu, tb, R, (int64_t)ROWS(e[k1]) * S, aff + 2 * k1 * R, aff + (2 * k1 + 1) * R);
                /* v = conv2(u) on e[k2] */
                OPP(f, CK_PROF_REFINER_CONV, conv3x3_rows, tb, 0, R, S, d, e[k1].lo, ROWS(e[k1]), *W[k2], *Bw[k2],
                    vb, e[k2].lo, ROWS(e[k2]), R, gr, pass == k2 ? st : NULL);
                if (f->cost) *f->cost += (double)ROWS(e[k2]) * S * 9 * R * R;
                if (pass == k2) break;
                /* x_{r+1} = relu(x_r + gn2(v)) on e[k2], in place in xb */
                OP(f, residual_affine_relu, BAND_AT(xb, e[k2], xlo), vb, R, (int64_t)ROWS(e[k2]) * S,
                   aff + 2 * k2 * R, aff + (2 * k2 + 1) * R, NULL, NULL);
            }
            if (pass == REF_CONVS && in_x) {
                /* keep the RGB rows [y0, hi) before the deltas take them,
                 * from the next band's first input row on */
                const int hi = e[last].hi, nlo = hi < S ? band_input_lo(hi, B, S) : S;
                if (nlo >= sv1) {
                    sv0 = sv1 = CK_MIN(nlo, hi);
                } else if (nlo > sv0) {
                    OP(f, copy_rows, sv, svr, nlo - sv0, sv, svr, 0, 3, sv1 - nlo, S);
                    sv0 = nlo;
                }
                OP(f, copy_rows, x, S, sv1, sv, svr, sv1 - sv0, 3, hi - sv1, S);
                sv1 = hi;
            }
            if (pass == REF_CONVS && on_host) {
                const int n = ROWS(e[last]);
                OP(f, pointwise_conv_rows, BAND_AT(xb, e[last], xlo), R, S, y0, n, rw->final_w, rw->final_b,
                   10.0f * f->strength, ob, y0, n, 4);
                OP(f, finalize_rows, logits, S, y0, n, ob);
                for (int ch = 0; ch < 4; ch++)
                    OP(f, to_host, ck_tensor_at(ob, (int64_t)ch * n * S),
                       out_host + (size_t)((int64_t)ch * HW + (int64_t)y0 * S) * sizeof(float),
                       (size_t)((int64_t)n * S) * sizeof(float));
            } else if (pass == REF_CONVS) {
                OP(f, pointwise_conv_rows, BAND_AT(xb, e[last], xlo), R, S, e[last].lo, ROWS(e[last]), rw->final_w,
                   rw->final_b, 10.0f * f->strength, out, 0, S, 4);
            }
#undef ROWS
#undef BAND_AT
        }
        if (st)
            OP(f, groupnorm_affine, stats, gr, R, HW, *G[pass], *Be[pass], aff + 2 * pass * R,
               aff + (2 * pass + 1) * R);
    }
    if (f->sched.x_on_host) RELEASE(xin);
    RELEASE(vb);
    RELEASE(tb);
    RELEASE(xb);
    RELEASE(rin);
    if (in_x) RELEASE(sv);
    ck_release(pl, aff);
    ck_release(pl, stats);
    if (on_host) { /* alpha and fg are done: the output is the host copy */
        RELEASE(ob);
        out = f->ops ? ck_tensor_of(f->ops->host_ptr(f->be, out_host), CK_F32) : (ck_tensor){0};
    }
    return out;
}

static void up_rows(int y0, int y1, int in, int out, int *lo, int *hi);

/* ---- the mask-unit blocks in bands (ck_schedule.encoder_band) ---------- */

/* The blocks before the first global one: nloc = its index. */
static int local_blocks(const ck_block_info *bi, int nb) {
    int i = 0;
    while (i < nb && bi[i].mask_unit_attn) i++;
    return i;
}

/* The input rows [lo, hi) the patches of token rows [y0, y0 + n) read. */
static rows_t patch_rows(const ck_config *c, int S, int y0, int n) {
    const rows_t r = {CK_MAX(0, y0 * c->patch_stride - c->patch_pad),
                      CK_MIN(S, (y0 + n - 1) * c->patch_stride - c->patch_pad + c->patch_kernel)};
    return r;
}

/* Buffers for the local blocks on bands of `rows` token rows: tb[j], the
 * tokens of the j-th width among them; fb[m] (when fb is given), the rows of
 * feature map m a band makes; *xb (x_on_host), the input rows a band's
 * patches read [in_chans, rows * stride + kernel - stride, S]. */
static void local_alloc(const ck_fwd *f, const ck_block_info *bi, int nloc, int rows, ck_tensor tb[CK_MAX_BLOCKS + 1],
                        ck_tensor fb[4], ck_tensor *xb) {
    ck_plan *pl = f->plan;
    const ck_config *c = f->c;
    int64_t N = (int64_t)rows * (f->S / c->patch_stride);
    int j = 0, nf = 0;
    const int64_t xr = CK_MIN(f->S, rows * c->patch_stride + c->patch_kernel - c->patch_stride);
    *xb = f->sched.x_on_host ? ALLOC_ACT(c->in_chans * xr * f->S, "band input") : (ck_tensor){0};
    tb[0] = ALLOC_ACT(N * f->c->embed_dim, "band tokens");
    for (int i = 0; i < nloc; i++) {
        N /= bi[i].q_stride;
        if (bi[i].dim != bi[i].dim_out) tb[++j] = ALLOC_ACT(N * bi[i].dim_out, "band tokens");
        if (bi[i].stage_end && fb && nf < 4) fb[nf++] = ALLOC_ACT(N * bi[i].dim_out, "band feature");
    }
}

static void local_release(const ck_fwd *f, const ck_block_info *bi, int nloc, ck_tensor tb[CK_MAX_BLOCKS + 1],
                          ck_tensor fb[4], ck_tensor xb) {
    ck_plan *pl = f->plan;
    int j = 0, nf = 0;
    for (int i = 0; i < nloc; i++) {
        if (bi[i].dim != bi[i].dim_out) j++;
        if (bi[i].stage_end && fb && nf < 4) nf++;
    }
    while (nf > 0) RELEASE(fb[--nf]);
    for (; j >= 0; j--) RELEASE(tb[j]);
    if (xb.data) RELEASE(xb);
}

/* Blocks 0..nloc-1 on token rows [y0, y0 + n) of the S/4 grid (whole mask
 * units) as an image of their own: patch_embed of those rows, then each
 * block (mask-unit attention: the band's windows are whole units, so every
 * value is the whole image's). With fb, feature map m's rows of the band
 * [n >> m, (S/4) >> m, C] are rerolled into fb[m] at the stage ends.
 * Returns the buffer of tb holding the band's tokens after the last block. */
static ck_tensor local_run(const ck_fwd *f, const ck_block_info *bi, int nloc, const ck_tensor *tb, ck_tensor *fb,
                           ck_tensor x, ck_tensor xb, int y0, int n) {
    const ck_config *c = f->c;
    const ck_weights *wt = f->w;
    const int S = f->S;
    int k = c->num_stages - 1, H = n, W = S / c->patch_stride, j = 0, nf = 0;
    int64_t N = (int64_t)H * W;
    ck_tensor tok = tb[0];
    rows_t xr = {0, S};
    if (f->sched.x_on_host) { /* x waits in host memory: its rows the patches read, plane by plane */
        const size_t es = ck_dtype_size(f->act), at = ck_x_host_offset(c, S, &f->sched, f->act);
        xr = patch_rows(c, S, y0, n);
        const int64_t rn = (int64_t)(xr.hi - xr.lo) * S;
        for (int ch = 0; ch < c->in_chans; ch++)
            OP(f, from_host, at + (size_t)((int64_t)ch * S * S + (int64_t)xr.lo * S) * es, (size_t)rn * es,
               ck_tensor_at(xb, ch * rn));
        x = xb;
    }
    OPP(f, CK_PROF_PATCH, patch_embed_rows, c, wt->patch_w, wt->patch_b, x, xr.lo, xr.hi - xr.lo, S, wt->pos_embed, k,
        y0, n, tok);
    for (int i = 0; i < nloc; i++) {
        const ck_block_info *b = &bi[i];
        const ck_block_w *w = &wt->blocks[i];
        ck_tensor xo = b->dim != b->dim_out ? tb[++j] : tok;
        OPP(f, CK_PROF_MU_ATTN, mask_unit_attention, b, w, tok, N, xo);
        tok = xo;
        N /= b->q_stride;
        if (b->q_stride > 1) H /= 2, W /= 2, k--;
        OPP(f, CK_PROF_MLP, mlp, tok, N, b->dim_out, w, b->dim_out * c->mlp_ratio);
        if (b->stage_end && nf < 4) {
            if (fb) OPP(f, CK_PROF_REROLL, reroll, tok, H, W, k, b->dim_out, fb[nf]);
            nf++;
        }
    }
    return tok;
}

/* The mask units [*ma, *mb) (rows of units, 2^k0 token rows each) whose
 * feature rows logits rows [y0, y0 + n) read: all of c1's rows there, and
 * the bilinear taps' rows of every other map the local blocks make (nfl). */
static void band_units(int y0, int n, int G, int k0, int nfl, const int feat_h[4], int *ma, int *mb) {
    *ma = y0 >> k0, *mb = (y0 + n + (1 << k0) - 1) >> k0;
    for (int m = 1; m < nfl; m++) {
        const int u = 1 << (k0 - m);
        int lo, hi;
        up_rows(y0, y0 + n, feat_h[m], G, &lo, &hi);
        *ma = CK_MIN(*ma, lo / u), *mb = CK_MAX(*mb, (hi + u - 1) / u);
    }
}

/* The rows [*lo, *hi) of a scale of `in` rows that bilinear upsampling to
 * `out` rows reads for output rows [y0, y1) (align_corners=False), widened
 * by a row each side against rounding and clipped to the scale. */
static void up_rows(int y0, int y1, int in, int out, int *lo, int *hi) {
    const float scale = (float)in / (float)out;
    const float s0 = scale * ((float)y0 + 0.5f) - 0.5f, s1 = scale * ((float)(y1 - 1) + 0.5f) - 0.5f;
    *lo = CK_MAX(0, (int)floorf(s0) - 1);
    *hi = CK_MIN(in, (int)s1 + 3);
}

/* The decoders in bands of sched.decoder_band rows of the logits: per band,
 * the rows of c2..c4 its taps read projected into a band buffer, then fused
 * with c1 (ck_ops.decoder_fuse_rows). Under encoder_band the maps of the
 * local blocks (feat[m].data NULL) are made again per band, from the mask
 * units of x its rows need (local_run). Releases feat[0..3]; returns the
 * logits [4, G, G] (fp32). */
static ck_tensor decoders_banded(const ck_fwd *f, ck_tensor feat[4], const int feat_h[4], const int feat_c[4],
                                 ck_tensor x) {
    const ck_config *c = f->c;
    const ck_weights *wt = f->w;
    ck_plan *pl = f->plan;
    const int G = f->S / c->patch_stride, D2 = 2 * c->dec_dim, B = CK_MIN(f->sched.decoder_band, G);
    const int k0 = c->num_stages - 1;
    ck_block_info bi[CK_MAX_BLOCKS];
    int nloc = 0, nfl = 0; /* the local blocks, the maps they make */
    if (f->sched.encoder_band > 0) {
        ck_config_blocks(c, bi);
        nloc = local_blocks(bi, ck_config_num_blocks(c));
        for (int i = 0; i < nloc; i++) nfl += bi[i].stage_end;
        nfl = CK_MIN(nfl, 4);
    }
    int rows[3] = {0, 0, 0}, Hk[3], units = 0;
    for (int s = 0; s < 3; s++) Hk[s] = feat_h[s + 1];
    for (int y0 = 0; y0 < G; y0 += B) {
        for (int s = 0; s < 3; s++) {
            int lo, hi;
            up_rows(y0, CK_MIN(G, y0 + B), Hk[s], G, &lo, &hi);
            rows[s] = CK_MAX(rows[s], hi - lo);
        }
        if (nfl) {
            int ma, mb;
            band_units(y0, CK_MIN(B, G - y0), G, k0, nfl, feat_h, &ma, &mb);
            units = CK_MAX(units, mb - ma);
        }
    }
    ck_tensor P[3];
    for (int s = 0; s < 3; s++) P[s] = ALLOC_ACT((int64_t)rows[s] * Hk[s] * D2, "decoder proj band");
    ck_tensor logits = ALLOC_F32(4 * (int64_t)G * G, "logits");
    ck_tensor tb[CK_MAX_BLOCKS + 1], fb[4], xb = {0};
    if (nfl) local_alloc(f, bi, nloc, units << k0, tb, fb, &xb);
    const int64_t c1_row = (int64_t)feat_h[0] * feat_c[0]; /* values in a row of c1 */
    const size_t es = ck_dtype_size(f->act);
    if (f->sched.c1_bands) { /* c1 back from host memory a band at a time */
        feat[0] = ALLOC_ACT(B * c1_row, "c1 band");
    } else if (f->sched.c1_on_host) { /* c1 back from host memory */
        const int64_t n1 = feat_h[0] * c1_row;
        feat[0] = ALLOC_ACT(n1, "feature");
        OP(f, from_host, 0, (size_t)n1 * es, feat[0]);
    }
    for (int y0 = 0; y0 < G; y0 += B) {
        const int n = CK_MIN(B, G - y0);
        int ma = 0, mb = 0;
        if (nfl) { /* the local maps' rows of this band, from x */
            band_units(y0, n, G, k0, nfl, feat_h, &ma, &mb);
            (void)local_run(f, bi, nloc, tb, fb, x, xb, ma << k0, (mb - ma) << k0);
        }
        if (f->sched.c1_bands) OP(f, from_host, (size_t)(y0 * c1_row) * es, (size_t)(n * c1_row) * es, feat[0]);
        int r0[3];
        for (int s = 0; s < 3; s++) {
            int hi;
            up_rows(y0, y0 + n, Hk[s], G, &r0[s], &hi);
            const int local = s + 1 < nfl, base = local ? ma << (k0 - s - 1) : 0;
            const ck_tensor src = local ? fb[s + 1] : feat[s + 1];
            OPP(f, CK_PROF_DECODER, linear, ck_tensor_at(src, (int64_t)(r0[s] - base) * Hk[s] * feat_c[s + 1]),
                (int64_t)(hi - r0[s]) * Hk[s], feat_c[s + 1], wt->dec.scale_w[s + 1], wt->dec.scale_b[s + 1], P[s],
                D2, 0);
        }
        /* c1's rows: fb[0]'s begin at row ma << k0, a c1 band's at y0 */
        OPP(f, CK_PROF_DECODER, decoder_fuse_rows, c, &wt->dec, nfl ? fb[0] : feat[0],
            nfl ? ma << k0 : f->sched.c1_bands ? y0 : 0, G, feat_c[0], P, Hk, r0, y0, n, logits);
    }
    if (nfl) local_release(f, bi, nloc, tb, fb, xb);
    for (int s = 0; s < 3; s++) RELEASE(P[s]);
    for (int s = 0; s < 4; s++)
        if (feat[s].data) RELEASE(feat[s]);
    return logits;
}

static ck_tensor after_decoders(const ck_fwd *f, ck_tensor x, ck_tensor logits);

ck_tensor ck_forward(const ck_fwd *f) {
    const ck_config *c = f->c;
    const ck_weights *wt = f->w;
    ck_plan *pl = f->plan;
    const int S = f->S, G = S / c->patch_stride, E = c->embed_dim;
    const int64_t HW = (int64_t)S * S;

    if (f->marks) f->marks[CK_STAGE_ENCODER] = ck_plan_event(pl);
    /* the backend's pass-long scratch (plan buffer 0), if it has one */
    if (f->p.pass_scratch) ck_alloc(pl, f->p.pass_scratch, "scratch: pass");
    /* the encoder's and decoders' scratch (plan buffer 0 when there is one) */
    void *scratch = phase_begin(f, CK_PHASE_ENCODER);
    /* x [4, S, S]: normalized RGB + hint (plan buffer CK_INPUT_BUFFER), written by the backend. */
    ck_tensor x = ALLOC_ACT(4 * HW, "input x");

    /* ---- Hiera encoder -------------------------------------------------- */
    /* patch_embed + pos_embed + Unroll: tokens [G*G, E], each 8x8 mask unit's
     * tokens strided by the number of units (three 2x2 unroll strides). */
    int k = c->num_stages - 1;
    int64_t N = (int64_t)G * G;
    int H = G;
    ck_block_info bi[CK_MAX_BLOCKS];
    ck_config_blocks(c, bi);
    const int nb = ck_config_num_blocks(c);
    ck_tensor feat[4] = {{0}};
    ck_tensor map = {0}; /* transition_from_map: the feature map the next block reads */
    int feat_h[4] = {0}, feat_c[4] = {0}, nf = 0, i0 = 0;
    ck_tensor tok;
    if (f->sched.encoder_band > 0) {
        /* blocks 0..i0-1 (mask-unit attention) in bands of whole units'
         * rows, each band's tokens put into the first global block's input
         * (rows outer * units + unit in unrolled order); their maps are not
         * kept (the decoders make them again) */
        const int k0 = k, Wu = G >> k0, Bn = CK_MAX(1, CK_MIN(f->sched.encoder_band, G) >> k0) << k0;
        i0 = local_blocks(bi, nb);
        int D = E;
        for (int i = 0; i < i0; i++) {
            N /= bi[i].q_stride, D = bi[i].dim_out;
            if (bi[i].q_stride > 1) H /= 2, k--;
            if (bi[i].stage_end && nf < 4) feat_h[nf] = H, feat_c[nf] = D, nf++;
        }
        if (f->sched.x_on_host) { /* x waits in host memory, whole: the decoders read it again */
            OP(f, to_host, x, ck_x_host_offset(c, S, &f->sched, f->act),
               (size_t)((int64_t)c->in_chans * HW) * ck_dtype_size(f->act));
            RELEASE(x);
            x = (ck_tensor){0};
        }
        tok = ALLOC_ACT(N * D, "tokens");
        ck_tensor tb[CK_MAX_BLOCKS + 1], xb;
        local_alloc(f, bi, i0, Bn, tb, NULL, &xb);
        const int parts = 1 << (2 * k); /* the unroll digits left */
        for (int y0 = 0; y0 < G; y0 += Bn) {
            const int n = CK_MIN(Bn, G - y0);
            ck_tensor bt = local_run(f, bi, i0, tb, NULL, x, xb, y0, n);
            const int64_t nw = (int64_t)(n >> k0) * Wu; /* the band's units */
            OP(f, copy_rows, bt, nw, 0, tok, (int64_t)Wu * Wu, (int64_t)(y0 >> k0) * Wu, parts, nw, D);
        }
        local_release(f, bi, i0, tb, NULL, xb);
    } else {
        tok = ALLOC_ACT(N * E, "tokens");
        OPP(f, CK_PROF_PATCH, patch_embed, c, wt->patch_w, wt->patch_b, x, S, wt->pos_embed, k, tok);
        /* the refiner reads x's RGB planes only: the hint plane (the last) goes */
        if (f->sched.x_on_host) { /* ... and the RGB planes wait in host memory */
            OP(f, to_host, x, ck_x_host_offset(c, S, &f->sched, f->act), (size_t)(3 * HW) * ck_dtype_size(f->act));
            RELEASE(x);
            x = (ck_tensor){0};
        } else if (f->sched.input_rgb) {
            ck_shrink(pl, x.data, (size_t)(3 * HW) * ck_dtype_size(f->act), "input hint");
        }
    }
    for (int i = i0; i < nb; i++) {
        const ck_block_info *b = &bi[i];
        const ck_block_w *w = &wt->blocks[i];
        const int64_t Nout = N / b->q_stride;
        const int Do = b->dim_out;
        ck_tensor xo = tok;
        if (b->mask_unit_attn && map.data) {
            /* the previous stage's tokens are gone: read its feature map */
            tok = xo = ALLOC_ACT(Nout * Do, "tokens");
            OPP(f, CK_PROF_MU_ATTN, mask_unit_attention_map, b, w, map, H, k, N, xo);
            map = (ck_tensor){0};
        } else if (b->mask_unit_attn) {
            /* HieraBlock attention half, window by window (no N-sized temporaries) */
            if (b->dim != Do) xo = ALLOC_ACT(Nout * Do, "tokens");
            OPP(f, CK_PROF_MU_ATTN, mask_unit_attention, b, w, tok, N, xo);
        } else if (map.data && b->dim != Do && f->sched.norm1_from_map && f->sched.qkv_streamed) {
            /* norm1(x) never stored: both its readers take it from the map row by row */
            const ck_ln_map ln = {map, H, k, w->norm1_w, w->norm1_b};
            tok = xo = ALLOC_ACT(Nout * Do, "tokens");
            OPP(f, CK_PROF_POOL_LINEAR, linear_maxpool_map, &ln, N, b->dim, w->proj_w, w->proj_b, xo, Do,
                b->q_stride);
            OPP(f, CK_PROF_ATTENTION, attention_qkv_map, &ln, N, b->dim, w->qkv_w, w->qkv_b, Do, b->heads,
                b->q_stride, w->attn_proj_w, w->attn_proj_b, xo);
            map = (ck_tensor){0};
        } else {
            /* xn = norm1(x); x = maxpool(proj(xn)) if expanding. An expanding
             * block reads x only here: x goes before the new tokens come. */
            ck_tensor xn = ALLOC_ACT(N * b->dim, "norm1");
            if (map.data) { /* the previous stage's tokens are gone: read its feature map */
                OPP(f, CK_PROF_LAYERNORM, layernorm_map, map, H, k, N, b->dim, w->norm1_w, w->norm1_b, xn);
                map = (ck_tensor){0};
            } else {
                OPP(f, CK_PROF_LAYERNORM, layernorm, tok, N, b->dim, w->norm1_w, w->norm1_b, xn);
            }
            if (b->dim != Do) {
                RELEASE(tok);
                tok = xo = ALLOC_ACT(Nout * Do, "tokens");
                OPP(f, CK_PROF_POOL_LINEAR, linear_maxpool, xn, N, b->dim, w->proj_w, w->proj_b, xo, Do, b->q_stride);
            }
            /* qkv [N, 3*Do]; global attention with q pooled -> [Nout, Do] */
            if (f->sched.qkv_streamed) { /* qkv and att computed as the attention needs them; x += proj */
                OPP(f, CK_PROF_ATTENTION, attention_qkv, xn, N, b->dim, w->qkv_w, w->qkv_b, Do, b->heads,
                    b->q_stride, w->attn_proj_w, w->attn_proj_b, xo);
                RELEASE(xn);
            } else {
                ck_tensor qkv = ALLOC_ACT(N * 3 * Do, "qkv");
                OPP(f, CK_PROF_LINEAR, linear, xn, N, b->dim, w->qkv_w, w->qkv_b, qkv, 3 * Do, 0);
                RELEASE(xn);
                ck_tensor att = ALLOC_ACT(Nout * Do, "attention");
                OPP(f, CK_PROF_ATTENTION, attention, qkv, N, Do, b->heads, b->q_stride, att);
                RELEASE(qkv);
                /* x = x + attn.proj(att) */
                OPP(f, CK_PROF_LINEAR, linear, att, Nout, Do, w->attn_proj_w, w->attn_proj_b, xo, Do, 1);
                RELEASE(att);
            }
        }
        if (xo.data != tok.data) {
            RELEASE(tok);
            tok = xo;
        }
        if (b->q_stride > 1) {
            H /= 2;
            k--;
        }
        N = Nout;
        /* x = x + mlp(norm2(x)) */
        OPP(f, CK_PROF_MLP, mlp, tok, N, Do, w, Do * c->mlp_ratio);
        if (b->stage_end && nf < 4) {
            /* Reroll: feature map [H, H, Do] in spatial order; in the tokens'
             * buffer where they go now (a stage transition read from the map) */
            const ck_block_info *nx = i + 1 < nb ? &bi[i + 1] : NULL;
            const int in_place = f->sched.reroll_in_place && f->sched.transition_from_map && nx &&
                                 nx->dim != nx->dim_out && !(nf == 0 && f->sched.c1_on_host);
            ck_tensor fm = tok;
            if (nf == 0 && f->sched.c1_bands && f->sched.c1_on_host) {
                /* c1 into host memory band by band (the decoders' bands), never whole here */
                const int B = CK_MIN(H, f->sched.decoder_band);
                const size_t row = (size_t)H * Do * ck_dtype_size(f->act);
                ck_tensor band = ALLOC_ACT((int64_t)B * H * Do, "c1 band");
                for (int y0 = 0; y0 < H; y0 += B) {
                    OPP(f, CK_PROF_REROLL, reroll_rows, tok, H, H, k, Do, y0, CK_MIN(B, H - y0), band);
                    OP(f, to_host, band, (size_t)y0 * row, (size_t)CK_MIN(B, H - y0) * row);
                }
                RELEASE(band);
                fm = (ck_tensor){0};
            } else if (in_place) {
                OPP(f, CK_PROF_REROLL, reroll_inplace, tok, H, H, k, Do);
                tok = (ck_tensor){0};
            } else {
                fm = ALLOC_ACT(N * Do, "feature");
                OPP(f, CK_PROF_REROLL, reroll, tok, H, H, k, Do, fm);
            }
            static const char *const names[4] = {"c1", "c2", "c3", "c4"};
            if (fm.data) tap(f, names[nf], fm, 3, H, H, Do);
            if (nf == 0 && f->sched.c1_on_host && fm.data) { /* c1 waits in host memory until the decoders */
                OP(f, to_host, fm, 0, (size_t)(N * Do) * ck_dtype_size(f->act));
                RELEASE(fm);
                fm = (ck_tensor){0};
            }
            feat[nf] = fm, feat_h[nf] = H, feat_c[nf] = Do, nf++;
            if (f->sched.transition_from_map && fm.data && nx && nx->dim != nx->dim_out) {
                RELEASE(tok); /* the next block reads the map (nothing where it is the tokens' buffer) */
                tok = (ck_tensor){0};
                map = fm;
            }
        }
    }
    RELEASE(tok);
    if (f->marks) f->marks[CK_STAGE_DECODERS] = ck_plan_event(pl);

    /* ---- decoders (alpha 1 ch + fg 3 ch, folded into one pass) ---------- */
    /* P_k [Hk, Hk, 2*dec] = folded linear_ck at each coarse scale, then
     * logits [4, G, G] = classifier(relu(P_1 + sum_k up(P_k))). */
    const int D2 = 2 * c->dec_dim;
    ck_tensor P[3];
    int Hk[3];
    if (f->sched.decoder_band > 0) {
        ck_tensor logits = decoders_banded(f, feat, feat_h, feat_c, x);
        /* encoder_band: the decoders were the last to read x's hint plane */
        if (f->sched.encoder_band > 0 && f->sched.input_rgb && !out_in_input(f) && x.data)
            ck_shrink(pl, x.data, (size_t)(3 * HW) * ck_dtype_size(f->act), "input hint");
        phase_end(f, scratch);
        return after_decoders(f, x, logits);
    }
    for (int s = 1; s < 4; s++) {
        int64_t n = (int64_t)feat_h[s] * feat_h[s];
        P[s - 1] = ALLOC_ACT(n * D2, "decoder proj");
        Hk[s - 1] = feat_h[s];
        OPP(f, CK_PROF_DECODER, linear, feat[s], n, feat_c[s], wt->dec.scale_w[s], wt->dec.scale_b[s], P[s - 1], D2, 0);
        RELEASE(feat[s]);
    }
    ck_tensor logits = ALLOC_F32(4 * (int64_t)G * G, "logits");
    if (f->sched.c1_on_host) { /* c1 back from host memory */
        const int64_t n1 = (int64_t)feat_h[0] * feat_h[0] * feat_c[0];
        feat[0] = ALLOC_ACT(n1, "feature");
        OP(f, from_host, 0, (size_t)n1 * ck_dtype_size(f->act), feat[0]);
    }
    OPP(f, CK_PROF_DECODER, decoder_fuse, c, &wt->dec, feat[0], G, feat_c[0], P, Hk, logits);
    for (int s = 0; s < 3; s++) RELEASE(P[s]);
    RELEASE(feat[0]);
    phase_end(f, scratch);
    return after_decoders(f, x, logits);
}

/* The refiner and the output, after the decoders' logits [4, S/4, S/4]. */
static ck_tensor after_decoders(const ck_fwd *f, ck_tensor x, ck_tensor logits) {
    const ck_config *c = f->c;
    const ck_weights *wt = f->w;
    ck_plan *pl = f->plan;
    const int S = f->S, G = S / c->patch_stride;
    const int64_t HW = (int64_t)S * S;
    const int R0 = c->ref_dim;
    tap(f, "alpha_logits", logits, 3, 1, G, G);
    tap(f, "fg_logits", ck_tensor_at(logits, (int64_t)G * G), 3, 3, G, G);

    /* ---- refiner ---------------------------------------------------------- */
    if (f->marks) f->marks[CK_STAGE_REFINER] = ck_plan_event(pl);
    if (f->sched.refiner_band > 0) {
        ck_tensor out = refiner_banded(f, x, logits);
        if (f->marks) f->marks[CK_STAGE_COUNT] = ck_plan_event(pl);
        if (x.data && out.data != x.data) RELEASE(x);
        if (!f->sched.out_on_host) { /* (out_on_host: finalized band by band) */
            tap(f, "deltas", out, 3, 4, S, S);
            OP(f, finalize, logits, S, out);
        }
        RELEASE(logits);
        return out;
    }
    if (f->cost) *f->cost += (double)HW * 9 * R0 * (7 + 8.0 * R0);
    /* rin [7, S, S] = [x[0:3], sigmoid(up(logits))]  (GreenFormer.forward) */
    ck_tensor rin = ALLOC_ACT(7 * HW, "refiner input");
    OP(f, refiner_input, x, logits, S, rin);
    RELEASE(x);
    tap(f, "coarse", ck_tensor_at(rin, 3 * HW), 3, 4, S, S);

    const int R = c->ref_dim, gr = c->ref_groups;
    const ck_refiner_w *rw = &wt->ref;
    double *stats = ck_alloc(pl, (size_t)gr * 2 * sizeof(double), "gn stats");
    float *ga = ck_alloc_f32(pl, R, "gn scale");
    float *gb = ck_alloc_f32(pl, R, "gn shift");
    float *ga0 = ck_alloc_f32(pl, R, "stem gn scale");
    float *gb0 = ck_alloc_f32(pl, R, "stem gn shift");
    /* stem: relu(gn(conv3x3(rin))) -> xr [R, S, S] */
    ck_tensor xr = ALLOC_ACT(R * HW, "refiner x");
    void *scratch = phase_begin(f, CK_PHASE_STEM);
    OP(f, zero_stats, stats, 2 * gr);
    OPP(f, CK_PROF_REFINER_CONV, conv3x3, rin, 1, 7, S, 1, rw->stem_w, rw->stem_b, NULL, NULL, xr, R, gr, stats);
    phase_end(f, scratch);
    RELEASE(rin);
    OP(f, groupnorm_affine, stats, gr, R, HW, rw->stem_gn_w, rw->stem_gn_b, ga0, gb0);
    /* the stem's GroupNorm + ReLU: a pass of its own, or (conv_load_affine)
     * pending on xr, applied by res1's conv1 as it loads xr and by res1's
     * residual as it adds (a 2 x 512 MiB pass less at S = 2048 in 16 bits) */
    const int stem_pending = f->p.conv_load_affine;
    if (!stem_pending) OP(f, affine_relu, xr, R, HW, ga0, gb0);
    /* res1..res4 (dilation 1, 2, 4, 8): x = relu(x + gn2(conv2(relu(gn1(conv1(x)))))) */
    /* t, after a margin of conv_shift_rows image rows into which conv2 writes
     * (its output starts at tbuf: conv_shift_rows rows before t) */
    const int64_t margin = (int64_t)f->p.conv_shift_rows * S * R;
    ck_tensor tbuf = ALLOC_ACT(R * HW + margin, "refiner t"), t = ck_tensor_at(tbuf, margin);
    for (int r = 0; r < 4; r++) {
        int dil = 1 << r;
        const float *pa = stem_pending && r == 0 ? ga0 : NULL, *pb = stem_pending && r == 0 ? gb0 : NULL;
        OP(f, zero_stats, stats, 2 * gr);
        OPP(f, CK_PROF_REFINER_CONV, conv3x3, xr, 0, R, S, dil, rw->conv_w[2 * r], rw->conv_b[2 * r], pa, pb, t, R, gr, stats);
        OP(f, groupnorm_affine, stats, gr, R, HW, rw->gn_w[2 * r], rw->gn_b[2 * r], ga, gb);
        /* gn1 + relu are applied as conv2 reads t; conv2 overwrites t in place
         * or writes conv_shift_rows rows before it (tbuf) */
        OP(f, zero_stats, stats, 2 * gr);
        OPP(f, CK_PROF_REFINER_CONV, conv3x3, t, 0, R, S, dil, rw->conv_w[2 * r + 1], rw->conv_b[2 * r + 1], ga, gb, tbuf, R, gr, stats);
        OP(f, groupnorm_affine, stats, gr, R, HW, rw->gn_w[2 * r + 1], rw->gn_b[2 * r + 1], ga, gb);
        /* the last block's residual is left to the final 1x1 conv, which reads xr
         * and tbuf (its pa / pb are NULL: only res1 has a pending GroupNorm) */
        if (r < 3) OP(f, residual_affine_relu, xr, tbuf, R, HW, ga, gb, pa, pb);
    }
    ck_release(pl, stats);
    ck_release(pl, ga0);
    ck_release(pl, gb0);
    /* final 1x1 conv of relu(xr + gn2(t)) (res4's sum, not stored by the CUDA
     * backend), x10, x strength -> deltas [4, S, S] fp32. With a margin (CUDA),
     * the last conv2 wrote its output conv_shift_rows rows before t, so tbuf's
     * last `margin` elements are free: the deltas go there when they fit (S =
     * 2048: 64 MiB in the 130 MiB tail), and tbuf then lives on with them. */
    const int out_in_t = (size_t)margin * ck_dtype_size(f->act) >= (size_t)4 * HW * sizeof(float);
    ck_tensor out = out_in_t ? ck_tensor_of(ck_tensor_at(tbuf, R * HW).data, CK_F32) : ALLOC_F32(4 * HW, "output");
    OP(f, pointwise_conv, xr, tbuf, ga, gb, R, HW, rw->final_w, rw->final_b, 10.0f * f->strength, out, 4);
    ck_release(pl, ga);
    ck_release(pl, gb);
    if (!out_in_t) RELEASE(tbuf);
    RELEASE(xr);
    tap(f, "deltas", out, 3, 4, S, S);
    /* alpha, fg = sigmoid(up(logits) + deltas) */
    OP(f, finalize, logits, S, out);
    RELEASE(logits);
    if (f->marks) f->marks[CK_STAGE_COUNT] = ck_plan_event(pl);
    return out; /* lives until the next pass */
}
