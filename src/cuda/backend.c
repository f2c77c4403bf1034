/* The CUDA backend's lifecycle (backend/backend.h): device checks, the
 * weights on the device (16-bit matrices, packed convs, the LN fold), the
 * arena, pinned host buffers, and the run: upload, the pass as a CUDA graph
 * from the second frame on, download. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "ckey_debug.h"
#include "cuda/backend.h"
#include "model/greenformer.h"
#include "model/ln-fold.h"

#ifdef CK_HAVE_CUDA

/* cuBLAS's workspace (the session's, so that no GEMM allocates during a
 * graph capture) and device ints for the one-launch in-place conv: one
 * allocation, the plan's workspace_bytes. */
enum { CUBLAS_WORKSPACE = 16 << 20, CONV_SYNC_INTS = 16384 };

#define CU(be) ((ck_cuda_state *)(void *)(be))

void ck_cuda_trace(const ck_cuda_state *s, const char *step) {
    if (s->cfg.trace && !s->capturing) s->cfg.trace(s->cfg.trace_user, step);
}

static ck_dtype precision_dtype(ckey_precision p) {
    switch (p) {
    case CKEY_PRECISION_FP32: return CK_F32;
    case CKEY_PRECISION_BF16: return CK_BF16;
    default: return CK_F16;
    }
}

static ckey_status cu_check(const ckey_model *m, const ckey_session_options *o, int need_device, ck_dtype *act,
                            ckey_error *err) {
    const int n = ck_cuda_device_count();
    if (o->device_index < 0 || (need_device && o->device_index >= n))
        return ck_fail(err, CKEY_ERR_DEVICE, "cuda:%d: no such CUDA device (%d found%s)", o->device_index, n,
                       n ? "" : "; is there a GPU and a driver?");
    if (m->cfg.ref_dim > 64)
        return ck_fail(err, CKEY_ERR_UNSUPPORTED, "cuda: refiner width %d over 64 is not supported", m->cfg.ref_dim);
    *act = precision_dtype(o->precision);
    return CKEY_OK;
}

static void cu_pass_params(const ck_backend_config *bc, const ck_config *c, ck_pass_params *p) {
    memset(p, 0, sizeof *p);
    const int S = bc->size;
    const size_t act = ck_dtype_size(bc->act);
    /* the encoder's scratch also stages the fp32 input of a 16-bit session
     * (cu_run): whole, or, with the encoder in chunks (a budget), in pieces of
     * what the encoder's ops need, at least 4 MiB */
    const size_t enc = ck_cuda_encoder_scratch_elems(c, S, &bc->sched, bc->act) * act;
    const size_t io = (size_t)bc->io_elems * sizeof(float);
    p->phase_scratch[CK_PHASE_ENCODER] = bc->sched.encoder_chunks > 1 ? CK_MAX(enc, CK_MIN(io, (size_t)4 << 20))
                                                                      : CK_MAX(enc, io);
    p->phase_scratch[CK_PHASE_STEM] = ck_cuda_stem_scratch_elems(c, S, bc->act) * act;
    p->conv_shift_rows = ck_cuda_conv_shift_rows(S);
    p->conv_load_affine = ck_cuda_conv_loads_affine(c->ref_dim, bc->act);
    p->band_input_ch = ck_cuda_band_input_ch(c->ref_dim, bc->act);
    /* c1 [S/4, S/4, embed_dim] (c1_on_host), x's RGB planes (x_on_host) */
    p->host_map_bytes = ck_host_map_bytes(c, S, &bc->sched, bc->act);
}

/* The pos-embed resized to S/4 (fp32), unless the stored grid is that or
 * patch_embed resizes it chunk by chunk (ck_schedule.pos_streamed). */
static size_t pos_bytes(const ck_config *c, const ck_backend_config *bc) {
    const int g = bc->size / c->patch_stride;
    return g == c->pos_grid || bc->sched.pos_streamed ? 0 : (size_t)g * g * c->embed_dim * sizeof(float);
}

/* ------------------------------------------------------------ weight sets */

/* A weight of the host model (fp32, in its store) and its slot in the device
 * view. */
typedef struct wref {
    size_t off, count;  /* in floats, within the host store */
    ck_weight *slot;
} wref;

static size_t store_off(const ckey_model *m, ck_weight w) { return (size_t)(ck_wf32(w) - m->store); }

#define ADD(hw, dw, cnt)                                                            \
    do {                                                                            \
        if ((hw).data) {                                                            \
            r[n].off = store_off(m, (hw)), r[n].count = (size_t)(cnt);              \
            r[n].slot = &(dw);                                                      \
            n++;                                                                    \
        }                                                                           \
    } while (0)
enum { MAX_MATS = CK_MAX_BLOCKS * 5 + 5, MAX_BIASES = CK_MAX_BLOCKS * 3 + 3, BIAS_ALIGN = 8 };

static int cmp_ref(const void *a, const void *b) {
    const wref *x = a, *y = b;
    return x->off < y->off ? -1 : x->off > y->off;
}

/* The matrix weights (GEMM operands: stored in dt on 16-bit sessions), in
 * store order. */
static int collect_matrices(const ckey_model *m, ck_weights *dw, wref *r) {
    const ck_config *c = &m->cfg;
    ck_block_info bi[CK_MAX_BLOCKS];
    ck_config_blocks(c, bi);
    const int nb = ck_config_num_blocks(c);
    int n = 0, nf = 0, feat[4] = {0};
    for (int i = 0; i < nb; i++) {
        const ck_block_info *b = &bi[i];
        const ck_block_w *w = &m->w.blocks[i];
        ck_block_w *d = &dw->blocks[i];
        const size_t D = (size_t)b->dim, Do = (size_t)b->dim_out, Hd = Do * (size_t)c->mlp_ratio;
        ADD(w->qkv_w, d->qkv_w, 3 * Do * D);
        ADD(w->proj_w, d->proj_w, Do * D);
        ADD(w->attn_proj_w, d->attn_proj_w, Do * Do);
        ADD(w->fc1_w, d->fc1_w, Hd * Do);
        ADD(w->fc2_w, d->fc2_w, Do * Hd);
        if (b->stage_end && nf < 4) feat[nf++] = b->dim_out;
    }
    for (int k = 0; k < 4; k++) ADD(m->w.dec.scale_w[k], dw->dec.scale_w[k], (size_t)2 * c->dec_dim * feat[k]);
    ADD(m->w.patch_w, dw->patch_w, (size_t)c->embed_dim * c->in_chans * c->patch_kernel * c->patch_kernel);
    qsort(r, (size_t)n, sizeof *r, cmp_ref);
    return n;
}

/* The biases 16-bit sessions hand to cuBLASLt's fused bias epilogue, which
 * takes the bias in the output's type: qkv_b, attn_proj_b, fc2_b and the
 * decoder's scale_b[1..3]. They get dt copies (dbias), each starting 16-byte
 * aligned (BIAS_ALIGN elements). The biases other kernels read as fp32 keep
 * their fp32 slots: proj_b (maxpool + bias), fc1_b (bias + GELU), patch_b
 * (patch epilogue), scale_b[0] (decoder epilogue). */
static int collect_linear_biases(const ckey_model *m, ck_weights *dw, wref *r) {
    const ck_config *c = &m->cfg;
    ck_block_info bi[CK_MAX_BLOCKS];
    ck_config_blocks(c, bi);
    const int nb = ck_config_num_blocks(c);
    int n = 0;
    for (int i = 0; i < nb; i++) {
        const size_t Do = (size_t)bi[i].dim_out;
        ADD(m->w.blocks[i].qkv_b, dw->blocks[i].qkv_b, 3 * Do);
        ADD(m->w.blocks[i].attn_proj_b, dw->blocks[i].attn_proj_b, Do);
        ADD(m->w.blocks[i].fc2_b, dw->blocks[i].fc2_b, Do);
    }
    for (int k = 1; k < 4; k++) ADD(m->w.dec.scale_b[k], dw->dec.scale_b[k], (size_t)2 * c->dec_dim);
    return n;
}
#undef ADD

static size_t bias_padded(size_t count) { return (count + BIAS_ALIGN - 1) / BIAS_ALIGN * BIAS_ALIGN; }

static size_t linear_bias_elems(const ckey_model *m) {
    wref r[MAX_BIASES];
    ck_weights tmp = m->w;
    const int n = collect_linear_biases(m, &tmp, r);
    size_t total = 0;
    for (int i = 0; i < n; i++) total += bias_padded(r[i].count);
    return total;
}

/* Whether block i's norm2 folds into its fc1 in a 16-bit session that asked
 * for the fold: the fused fc1 kernel takes its shapes (ln-fold.h). */
static int block_folds(const ckey_model *m, int i, const ck_block_info *b, ck_dtype dt) {
    const ck_block_w *w = &m->w.blocks[i];
    return dt != CK_F32 && w->fc1_w.data && w->norm2_w.data && w->norm2_b.data &&
           ck_cuda_linear_gelu_ok(1, b->dim_out, b->dim_out * m->cfg.mlp_ratio, dt);
}

/* The LN fold unless a switch turns it (or the fused fc1 it lives in) off;
 * whether the device takes it is cu_create's question. */
static int ln_fold_wanted(uint32_t off) {
    return !(off & (CKEY_DEBUG_CUDA_NO_LN_FOLD | CKEY_DEBUG_CUDA_NO_FUSED_FC1 | CKEY_DEBUG_CUDA_NO_WGMMA));
}

static size_t ln_fold_floats(const ckey_model *m, ck_dtype dt) {
    ck_block_info bi[CK_MAX_BLOCKS];
    ck_config_blocks(&m->cfg, bi);
    size_t n = 0;
    for (int i = 0; i < ck_config_num_blocks(&m->cfg); i++)
        if (block_folds(m, i, &bi[i], dt)) n += 2 * (size_t)bi[i].dim_out * m->cfg.mlp_ratio;
    return n;
}

/* Device weight bytes: the fp32 store, or fp32 vectors + dt matrices + dt
 * copies of the fused linear biases + the packed refiner convs (+ the LN
 * fold's vectors unless a switch turns the fold off); + the resized pos-embed. */
static int64_t cu_weight_bytes(const ck_backend_config *bc, const ckey_model *m) {
    const ck_dtype dt = bc->act;
    const size_t pos = pos_bytes(&m->cfg, bc);
    if (dt == CK_F32) return (int64_t)(m->store_floats * sizeof(float) + pos);
    wref r[MAX_MATS];
    ck_weights tmp = m->w;
    const int n = collect_matrices(m, &tmp, r);
    size_t mat = 0;
    for (int i = 0; i < n; i++) mat += r[i].count;
    size_t conv = 0;
    const int R = m->cfg.ref_dim;
    if (ck_cuda_refiner_tc_ok(R, dt)) conv = 8 * ck_conv3x3_tc_weight_bytes(R, R) + ck_conv3x3_tc_weight_bytes(R, 16);
    const size_t fold = ln_fold_wanted(bc->debug_off) ? ln_fold_floats(m, dt) * sizeof(float) : 0;
    return (int64_t)((m->store_floats - mat) * sizeof(float) + (mat + linear_bias_elems(m)) * ck_dtype_size(dt) +
                     conv + fold + pos);
}

/* ------------------------------------------------------------- lifecycle */

static void cu_free(ck_backend *be);

static ckey_status cu_create(const ck_backend_config *bc, ck_backend **out, ckey_error *err) {
    ck_cuda_state *s = calloc(1, sizeof *s);
    if (!s) return ck_fail(err, CKEY_ERR_NOMEM, "out of memory");
    s->base.iface = &ck_cuda_backend;
    s->cfg = *bc;
    s->dt = bc->act;
    const uint32_t off = bc->debug_off;
    ckey_status st = ck_cuda_set_device(bc->device_index, err);
    if (!st) ck_cuda_trace(s, "create: device current");
    if (!st) {
        /* Hopper's wgmma attention and refiner convs for 16-bit sessions (else mma.sync) */
        s->wgmma = s->dt != CK_F32 && !(off & CKEY_DEBUG_CUDA_NO_WGMMA) && ck_cuda_wgmma_ok();
        /* the MLP's fc1 + bias + GELU as one wgmma kernel (else cuBLASLt + a pass) */
        s->fused_fc1 = s->wgmma && !(off & CKEY_DEBUG_CUDA_NO_FUSED_FC1);
        /* that kernel's tile form: the kernel's pick for the shape, or 128-wide tiles without clusters */
        s->fc1_form = off & CKEY_DEBUG_CUDA_FC1_PLAIN ? CK_LINEAR_TILE_N128 | CK_LINEAR_CLUSTER1 : 0;
        /* norm2 folded into that kernel (ln-fold.h; upload_weights), else LayerNorm, then fc1 */
        s->ln_fold = s->fused_fc1 && ln_fold_wanted(off);
        st = ck_cublas_create(&s->blas, err);
        if (!st) ck_cuda_trace(s, "create: cuBLAS and cuBLASLt handles");
    }
    /* the network before the frame path's kernels on the other streams (devframe.c) */
    if (!st) st = ck_cuda_stream_create_high(&s->stream, err);
    if (!st) ck_cuda_trace(s, "create: stream");
    if (!st) st = ck_cuda_event_create(&s->ev[0], err);
    for (int e = 1; e < 4 && !st; e++) st = ck_cuda_event_create(&s->ev[e], err);
    if (!st) st = ck_cuda_event_create_blocking(&s->ev_wait, err);
    if (!st) ck_cuda_trace(s, "create: 5 events");
    if (!st) st = ck_cuda_malloc(&s->blas_ws, CUBLAS_WORKSPACE + CONV_SYNC_INTS * sizeof(int), err);
    if (!st) s->blas_ws_bytes = CUBLAS_WORKSPACE;
    if (!st) st = ck_cublas_set_workspace(s->blas, s->blas_ws, CUBLAS_WORKSPACE, err);
    if (!st) ck_cuda_trace(s, "create: cuBLAS workspace and conv sync ints (16 MiB + 64 KiB)");
    /* the in-place conv2 as one launch over its bands (else a launch a band) */
    if (!st && s->wgmma && !(off & CKEY_DEBUG_CUDA_NO_CONV_ONE_LAUNCH)) {
        s->conv_sync_n = CONV_SYNC_INTS;
        s->conv_sync = (int *)(void *)((char *)s->blas_ws + CUBLAS_WORKSPACE);
    }
    /* 16-bit linears through cuBLAS GEMM + a bias pass instead of cuBLASLt */
    if (!st && (off & CKEY_DEBUG_CUDA_NO_LT)) ck_cublas_set_lt(s->blas, 0);
    s->no_graph = bc->eager || (off & CKEY_DEBUG_CUDA_NO_GRAPH); /* every frame eager */
    if (st) {
        cu_free(&s->base);
        return st;
    }
    *out = &s->base;
    return CKEY_OK;
}

/* 16-bit sessions with a refiner width the tensor-core conv takes: the eight
 * residual convs and the stem (its 7 input channels zero-padded to 8, see
 * ck_cuda_refiner_stem_input) packed for ck_cuda_conv3x3_tc. */
static ckey_status pack_convs(ck_cuda_state *s, const ckey_model *m, ckey_error *err) {
    const int R = m->cfg.ref_dim;
    if (!ck_cuda_refiner_tc_ok(R, s->dt)) return CKEY_OK;
    const size_t conv = ck_conv3x3_tc_weight_bytes(R, R), stem = ck_conv3x3_tc_weight_bytes(R, 8);
    ckey_status st = ck_cuda_malloc(&s->dconv, 8 * conv + stem, err);
    for (int i = 0; !st && i < 8; i++) {
        void *d = (char *)s->dconv + (size_t)i * conv;
        st = ck_cuda_conv3x3_tc_pack_weights(ck_wf32(m->w.ref.conv_w[i]), R, R, s->dt, d, NULL, err);
        s->w.ref.conv_w[i] = ck_weight_of(d, s->dt);
    }
    if (st) return st;
    float *w8 = calloc((size_t)R * 8 * 9, sizeof(float));
    if (!w8) return ck_fail(err, CKEY_ERR_NOMEM, "out of memory");
    const float *stem_w = ck_wf32(m->w.ref.stem_w);
    for (int o = 0; o < R; o++)
        for (int c = 0; c < 7; c++) memcpy(w8 + ((size_t)o * 8 + c) * 9, stem_w + ((size_t)o * 7 + c) * 9, 9 * sizeof(float));
    void *d = (char *)s->dconv + 8 * conv;
    st = ck_cuda_conv3x3_tc_pack_weights(w8, R, 8, s->dt, d, NULL, err);
    free(w8);
    s->w.ref.stem_w = ck_weight_of(d, s->dt);
    return st;
}

/* 16-bit sessions: the dt copies of the fused linear biases, converted on
 * the device in one pass; the padding between them is zero. */
static ckey_status upload_linear_biases(ck_cuda_state *s, const ckey_model *m, ckey_error *err) {
    wref r[MAX_BIASES];
    const int n = collect_linear_biases(m, &s->w, r);
    const size_t total = linear_bias_elems(m);
    if (!n || !total) return CKEY_OK;
    float *host = calloc(total, sizeof(float));
    if (!host) return ck_fail(err, CKEY_ERR_NOMEM, "out of memory for the bias upload");
    size_t at = 0;
    for (int i = 0; i < n; i++) {
        memcpy(host + at, m->store + r[i].off, r[i].count * sizeof(float));
        at += bias_padded(r[i].count);
    }
    void *tmp = NULL;
    ckey_status st = ck_cuda_malloc(&s->dbias, total * ck_dtype_size(s->dt), err);
    if (!st) st = ck_cuda_malloc(&tmp, total * sizeof(float), err);
    if (!st) st = ck_cuda_copy(tmp, host, total * sizeof(float), 1, err);
    if (!st) st = ck_cuda_convert(tmp, CK_F32, s->dbias, s->dt, (int64_t)total, NULL, err);
    if (!st) st = ck_cuda_sync(err);
    ck_cuda_free(tmp);
    free(host);
    if (st) return st;
    at = 0;
    for (int i = 0; i < n; i++) {
        *r[i].slot = ck_weight_of((char *)s->dbias + at * ck_dtype_size(s->dt), s->dt);
        at += bias_padded(r[i].count);
    }
    return CKEY_OK;
}

/* Every fp32 slot of the view still pointing into the host store: to the
 * same weight in the device copy, whose layout is the store with the ranges
 * in cut[0..ncut) (sorted) removed. */
static ckey_status remap_vectors(ck_cuda_state *s, const ckey_model *m, const wref *cut, int ncut, ckey_error *err) {
    ck_weight *slots[CK_MAX_WEIGHT_SLOTS];
    const int ns = ck_weights_slots(&s->w, slots, CK_MAX_WEIGHT_SLOTS);
    if (ns >= CK_MAX_WEIGHT_SLOTS) return ck_fail(err, CKEY_ERR_INTERNAL, "too many weight slots");
    for (int j = 0; j < ns; j++) {
        const float *p = slots[j]->data;
        if (slots[j]->type != CK_F32 || p < m->store || p >= m->store + m->store_floats) continue; /* already on the device */
        const size_t off = (size_t)(p - m->store);
        size_t before = 0;
        for (int i = 0; i < ncut && cut[i].off < off; i++) {
            if (off < cut[i].off + cut[i].count) return ck_fail(err, CKEY_ERR_INTERNAL, "vector inside a matrix");
            before += cut[i].count;
        }
        *slots[j] = ck_weight_of(s->dstore + (off - before), CK_F32);
    }
    return CKEY_OK;
}

/* fp32 sessions copy the store as it is. 16-bit sessions store the matrices
 * (GEMM operands) in dt, converted on the device one at a time, and the rest
 * (vectors, patch embed, convs) in a compact fp32 copy of the store with the
 * matrices cut out; the biases fused into cuBLASLt GEMMs also get dt copies
 * (upload_linear_biases); the refiner convs are packed (pack_convs). The
 * pos-embed for S, when the stored grid is not S/4, is resized on the host. */
static ckey_status upload_store(ck_cuda_state *s, const ckey_model *m, ckey_error *err) {
    if (s->dt == CK_F32) {
        ckey_status st = ck_cuda_malloc((void **)&s->dstore, m->store_floats * sizeof(float), err);
        if (!st) st = ck_cuda_copy(s->dstore, m->store, m->store_floats * sizeof(float), 1, err);
        if (!st) ck_cuda_trace(s, "weights: the fp32 store");
        return st ? st : remap_vectors(s, m, NULL, 0, err);
    }
    wref r[MAX_MATS];
    const int n = collect_matrices(m, &s->w, r);
    size_t mat = 0, biggest = 0;
    for (int i = 0; i < n; i++) {
        if (i && r[i].off < r[i - 1].off + r[i - 1].count)
            return ck_fail(err, CKEY_ERR_INTERNAL, "weight matrices overlap in the store");
        mat += r[i].count;
        biggest = CK_MAX(biggest, r[i].count);
    }
    const size_t nvec = m->store_floats - mat;
    float *host = malloc(CK_MAX(nvec, (size_t)1) * sizeof(float));
    if (!host) return ck_fail(err, CKEY_ERR_NOMEM, "out of memory for the weight upload");
    /* compact copy: the store with the matrix ranges cut out */
    size_t src = 0, dst = 0;
    for (int i = 0; i <= n; i++) {
        const size_t end = i < n ? r[i].off : m->store_floats;
        memcpy(host + dst, m->store + src, (end - src) * sizeof(float));
        dst += end - src;
        if (i < n) src = r[i].off + r[i].count;
    }
    /* the LN fold (ln-fold.h): which blocks, and their vectors' offsets in dfold */
    ck_block_info bi[CK_MAX_BLOCKS];
    ck_config_blocks(&m->cfg, bi);
    const int nb = ck_config_num_blocks(&m->cfg);
    size_t fold_at[CK_MAX_BLOCKS], nfold = 0;
    for (int b = 0; b < nb; b++) {
        fold_at[b] = SIZE_MAX;
        if (s->ln_fold && block_folds(m, b, &bi[b], s->dt)) {
            fold_at[b] = nfold;
            nfold += 2 * (size_t)bi[b].dim_out * m->cfg.mlp_ratio;
        }
    }
    float *hfold = nfold ? malloc(nfold * sizeof(float)) : NULL, *hw = nfold ? malloc(biggest * sizeof(float)) : NULL;
    uint16_t *hq = nfold ? malloc(biggest * sizeof(uint16_t)) : NULL;
    if (nfold && (!hfold || !hw || !hq)) {
        free(host), free(hfold), free(hw), free(hq);
        return ck_fail(err, CKEY_ERR_NOMEM, "out of memory for the weight upload");
    }
    void *tmp = NULL;
    ckey_status st = ck_cuda_malloc((void **)&s->dstore, CK_MAX(nvec, (size_t)1) * sizeof(float), err);
    if (!st) st = ck_cuda_copy(s->dstore, host, nvec * sizeof(float), 1, err);
    free(host);
    if (!st) ck_cuda_trace(s, "weights: fp32 vectors");
    if (!st) st = ck_cuda_malloc(&s->dmat, mat * ck_dtype_size(s->dt), err);
    if (!st) st = ck_cuda_malloc(&tmp, biggest * sizeof(float), err);
    if (!st) ck_cuda_trace(s, "weights: 16-bit matrices allocated, with an fp32 staging buffer");
    size_t at = 0;
    for (int i = 0; !st && i < n; i++) {
        void *d = (char *)s->dmat + at * ck_dtype_size(s->dt);
        int fb = -1; /* the block whose folded fc1 this is */
        for (int b = 0; b < nb && nfold; b++)
            if (fold_at[b] != SIZE_MAX && r[i].slot == &s->w.blocks[b].fc1_w) fb = b;
        const float *from = m->store + r[i].off;
        const int H = fb >= 0 ? bi[fb].dim_out * m->cfg.mlp_ratio : 0, C = fb >= 0 ? bi[fb].dim_out : 0;
        if (fb >= 0) { /* W diag(g) and b + W beta, from the host model's fp32 weights */
            const ck_block_w *w = &m->w.blocks[fb];
            ck_lnfold_weights(ck_wf32(w->fc1_w), ck_wf32(w->norm2_w), ck_wf32(w->norm2_b), ck_wf32(w->fc1_b), H, C,
                              hw, hfold + fold_at[fb] + H);
            from = hw;
        }
        st = ck_cuda_copy(tmp, from, r[i].count * sizeof(float), 1, err);
        if (!st) st = ck_cuda_convert(tmp, CK_F32, d, s->dt, (int64_t)r[i].count, NULL, err);
        if (!st) st = ck_cuda_sync(err);
        if (!st && fb >= 0) { /* colsum of the 16-bit matrix as the GEMM reads it */
            st = ck_cuda_copy(hq, d, r[i].count * sizeof(uint16_t), 0, err);
            if (!st) ck_lnfold_colsum16(hq, s->dt, H, C, hfold + fold_at[fb]);
        }
        *r[i].slot = ck_weight_of(d, s->dt);
        at += r[i].count;
    }
    ck_cuda_free(tmp);
    free(hw), free(hq);
    if (!st) ck_cuda_trace(s, "weights: 16-bit matrices converted, the staging buffer freed");
    if (!st && nfold) st = ck_cuda_malloc((void **)&s->dfold, nfold * sizeof(float), err);
    if (!st && nfold) st = ck_cuda_copy(s->dfold, hfold, nfold * sizeof(float), 1, err);
    free(hfold);
    if (!st) ck_cuda_trace(s, "weights: LN fold");
    if (!st) st = upload_linear_biases(s, m, err);
    if (!st) ck_cuda_trace(s, "weights: 16-bit linear biases");
    if (!st) st = pack_convs(s, m, err);
    if (!st) ck_cuda_trace(s, "weights: packed refiner convs");
    if (!st) st = remap_vectors(s, m, r, n, err);
    if (st) return st;
    for (int b = 0; b < nb; b++) /* folded blocks: their colsum and folded bias */
        if (fold_at[b] != SIZE_MAX) {
            const size_t H = (size_t)bi[b].dim_out * m->cfg.mlp_ratio;
            s->w.blocks[b].fc1_colsum = ck_weight_of(s->dfold + fold_at[b], CK_F32);
            s->w.blocks[b].fc1_b = ck_weight_of(s->dfold + fold_at[b] + H, CK_F32);
        }
    return CKEY_OK;
}

static ckey_status cu_upload_weights(ck_backend *be, const ckey_model *m, const ck_weights **view, ckey_error *err) {
    ck_cuda_state *s = CU(be);
    s->w = m->w;
    s->ref_dim = m->cfg.ref_dim;
    ck_pass_params pp;
    cu_pass_params(&s->cfg, &m->cfg, &pp);
    s->stage_floats = (int64_t)(pp.phase_scratch[CK_PHASE_ENCODER] / sizeof(float));
    ckey_status st = ck_cuda_set_device(s->cfg.device_index, err);
    if (!st) st = upload_store(s, m, err);
    if (st) return st;
    if (pp.host_map_bytes) { /* page-locked: the copies of c1 run on the stream (and in the graph) */
        st = ck_cuda_host_alloc(&s->host_maps, pp.host_map_bytes, err);
        if (st) return st;
        s->host_map_bytes = pp.host_map_bytes;
    }
    const int S = s->cfg.size;
    const size_t pb = pos_bytes(&m->cfg, &s->cfg);
    if (pb) {
        float *host = malloc(pb);
        if (!host) return ck_fail(err, CKEY_ERR_NOMEM, "out of memory");
        ck_pos_embed_resize(ck_wf32(m->w.pos_embed), m->cfg.pos_grid, m->cfg.embed_dim, host, S / m->cfg.patch_stride);
        st = ck_cuda_malloc((void **)&s->dpos, pb, err);
        if (!st) st = ck_cuda_copy(s->dpos, host, pb, 1, err);
        free(host);
        if (st) return st;
        ck_cuda_trace(s, "weights: pos-embed resized for S");
        s->w.pos_embed = ck_weight_of(s->dpos, CK_F32);
    }
    *view = &s->w;
    return CKEY_OK;
}

/* host_in and host_out, io_elems floats each (cu_alloc_workspace; no
 * host_out where the output is made in the host maps: out_on_host). */
static int64_t cu_host_io_bytes(const ck_backend_config *bc, const ck_config *c) {
    ck_pass_params pp;
    cu_pass_params(bc, c, &pp);
    return (bc->sched.out_on_host ? 1 : 2) * bc->io_elems * (int64_t)sizeof(float) + (int64_t)pp.host_map_bytes;
}

static ckey_status cu_alloc_workspace(ck_backend *be, ck_plan *plan, ckey_error *err) {
    ck_cuda_state *s = CU(be);
    const size_t io = (size_t)s->cfg.io_elems * sizeof(float);
    ckey_status st = ck_cuda_set_device(s->cfg.device_index, err);
    if (!st) st = ck_cuda_malloc(&s->arena, (ck_plan_arena_bytes(plan) + 255) / 256 * 256, err);
    if (!st) ck_cuda_trace(s, "arena");
    if (!st) st = ck_cuda_host_alloc((void **)&s->host_in, io, err);
    if (!st && !s->cfg.sched.out_on_host) st = ck_cuda_host_alloc((void **)&s->host_out, io, err);
    if (!st) ck_cuda_trace(s, "page-locked input and output (host)");
    return st;
}

static float *cu_input(ck_backend *be) { return CU(be)->host_in; }

/* Upload (outside the graph: pinned host -> device on the stream), the pass
 * (eager on the first frame and whenever taps or profiling watch the ops;
 * from the second frame on a CUDA graph, captured once since the arena's
 * addresses are the same every frame, then replayed), download. The
 * session's device is made current first: the CUDA runtime keeps the
 * current device per thread, and a session may run on another thread than
 * the one that created it, next to sessions on other GPUs
 * (ckey_shot_run_multi). */
static ckey_status cu_run(ck_backend *be, const ck_run_args *r, const float **result, double seconds[4],
                          ckey_error *err) {
    ck_cuda_state *s = CU(be);
    const double t0 = ck_now();
    ckey_status dev_st = ck_cuda_set_device(s->cfg.device_index, err);
    if (dev_st) return dev_st;
    ck_plan_begin_execute(r->plan, s->arena);
    s->status = CKEY_OK;
    void *stream = s->stream;
    const size_t io = (size_t)s->cfg.io_elems * sizeof(float);
    const float *src = r->in ? r->in : s->host_in;
    ckey_status st;
    /* device_seconds: from the input on the device (fp32) to the output there */
    if (r->device_io) {
        if (!r->in) return ck_fail(err, CKEY_ERR_INVALID_ARG, "cuda run: device input missing");
        st = ck_cuda_event_record(s->ev[0], stream, err);
        if (!st && s->dt == CK_F32) st = ck_cuda_copy_d2d(ck_plan_buffer(r->plan, s->cfg.in_buffer), src, io, stream, err);
        else if (!st)
            st = ck_cuda_convert(src, CK_F32, ck_plan_buffer(r->plan, s->cfg.in_buffer), s->dt, s->cfg.io_elems,
                                 stream, err);
    } else if (s->dt == CK_F32) {
        st = ck_cuda_event_record(s->ev[2], stream, err);
        if (!st) st = ck_cuda_copy_async(ck_plan_buffer(r->plan, s->cfg.in_buffer), src, io, 1, stream, err);
        if (!st) st = ck_cuda_event_record(s->ev[0], stream, err);
    } else {
        /* fp32 input through the encoder's scratch (buffer 0, free until the
         * first op; cu_pass_params sizes it for this), stored in dt: whole, or
         * in pieces of the scratch (the encoder in chunks) */
        float *stage = ck_plan_buffer(r->plan, 0);
        st = ck_cuda_event_record(s->ev[2], stream, err);
        const int64_t total = s->cfg.io_elems, piece = CK_MIN(total, CK_MAX((int64_t)1, s->stage_floats));
        char *dst = ck_plan_buffer(r->plan, s->cfg.in_buffer);
        for (int64_t e0 = 0; !st && e0 < total; e0 += piece) {
            const int64_t n = CK_MIN(piece, total - e0);
            st = ck_cuda_copy_async(stage, src + e0, (size_t)n * sizeof(float), 1, stream, err);
            if (!st && e0 + n >= total) st = ck_cuda_event_record(s->ev[0], stream, err);
            if (!st)
                st = ck_cuda_convert(stage, CK_F32, dst + (size_t)e0 * ck_dtype_size(s->dt), s->dt, n, stream, err);
        }
    }
    if (st) return st;
    ck_cuda_trace(s, "run: input uploaded");
    const int eager = r->watched || s->no_graph || (!s->graph && s->frames == 0);
    if (eager || !s->graph) {
        int capturing = 0;
        if (!eager) capturing = ck_cuda_capture_begin(stream, NULL) == CKEY_OK;
        s->capturing = capturing;
        ck_tensor res = r->pass(r->user, &ck_cuda_ops, be);
        if (capturing) {
            ckey_error ce;
            size_t nodes = 0;
            const ckey_status cst = ck_cuda_capture_end(stream, &s->graph, &nodes, &ce);
            s->capturing = 0;
            if (!cst && s->cfg.trace) {
                char step[96];
                snprintf(step, sizeof step, "run: graph captured and instantiated (%zu nodes)", nodes);
                ck_cuda_trace(s, step);
            }
            if (cst || s->status) {
                /* the capture did not take: stay eager, run this frame again eagerly */
                ck_cuda_trace(s, "run: the capture failed, eager from now on");
                ck_cuda_graph_free(s->graph);
                s->graph = NULL;
                s->no_graph = 1;
                s->status = CKEY_OK;
                ck_plan_begin_execute(r->plan, s->arena);
                res = r->pass(r->user, &ck_cuda_ops, be);
            }
        }
        if (!ck_plan_replay_complete(r->plan) || !res.data)
            return ck_fail(err, CKEY_ERR_INTERNAL, "planner replay diverged from the recorded pass");
        if (s->status) {
            if (err) *err = s->err;
            return s->status;
        }
        s->result = ck_f32(res);
        if (!capturing) ck_cuda_trace(s, "run: pass issued");
    }
    if (!eager && s->graph && (st = ck_cuda_graph_launch(s->graph, stream, err))) return st;
    if (!eager && s->graph) ck_cuda_trace(s, "run: graph launched");
    if ((st = ck_cuda_event_record(s->ev[1], stream, err))) return st;
    /* the output is on the device, or (out_on_host) in the page-locked host
     * buffer already: the result itself, or copied into the caller's buffer
     * by the host once the stream is done */
    const int on_host = s->cfg.sched.out_on_host;
    float *dst = r->device_io || (on_host && !r->out) ? s->result : r->out ? r->out : s->host_out;
    if (!r->device_io && !on_host && (st = ck_cuda_copy_async(dst, s->result, io, 0, stream, err))) return st;
    if (!r->device_io && (st = ck_cuda_event_record(s->ev[3], stream, err))) return st;
    /* with device_io too: the events' times and a failed launch are known here, before the
     * frame path queues its work behind the network */
    if ((st = ck_cuda_wait(s->ev_wait, stream, err))) return st;
    if (!r->device_io && on_host && dst != s->result) memcpy(dst, s->result, io);
    ck_cuda_trace(s, "run: output downloaded, stream synchronized");
    s->frames++;
    *result = dst;
    seconds[0] = ck_now() - t0;
    seconds[1] = ck_cuda_event_seconds(s->ev[0], s->ev[1]);
    seconds[2] = r->device_io ? 0 : ck_cuda_event_seconds(s->ev[2], s->ev[0]);
    seconds[3] = r->device_io ? 0 : ck_cuda_event_seconds(s->ev[1], s->ev[3]);
    return CKEY_OK;
}

/* Pinned host memory, allocated with the session's device current (the
 * calling thread's current device may be another session's). */
static void *cu_host_alloc(ck_backend *be, size_t bytes) {
    void *p = NULL;
    if (ck_cuda_set_device(CU(be)->cfg.device_index, NULL) != CKEY_OK) return NULL;
    return ck_cuda_host_alloc(&p, bytes, NULL) == CKEY_OK ? p : NULL;
}

static void cu_host_free(ck_backend *be, void *p) {
    ck_cuda_set_device(CU(be)->cfg.device_index, NULL);
    ck_cuda_host_free(p);
}

static void *cu_stream(ck_backend *be) { return CU(be)->stream; }

/* Device memory for the tracker's buffers, on the session's device. */
static void *cu_mem_alloc(ck_backend *be, size_t bytes) {
    void *p = NULL;
    if (ck_cuda_set_device(CU(be)->cfg.device_index, NULL) != CKEY_OK) return NULL;
    return ck_cuda_malloc(&p, bytes, NULL) == CKEY_OK ? p : NULL;
}

static void cu_mem_free(ck_backend *be, void *p) {
    ck_cuda_set_device(CU(be)->cfg.device_index, NULL);
    ck_cuda_free(p);
}

/* The ops' first failure since the last call (they record it in the state),
 * or the stream's. */
static ckey_status cu_ops_status(ck_backend *be, ckey_error *err) {
    ck_cuda_state *s = CU(be);
    ckey_status st = ck_cuda_stream_sync(s->stream, err);
    if (s->status) {
        st = s->status;
        if (err) *err = s->err;
        s->status = CKEY_OK;
    }
    return st;
}

static void cu_free(ck_backend *be) {
    ck_cuda_state *s = CU(be);
    if (!s) return;
    ck_cuda_set_device(s->cfg.device_index, NULL); /* its resources are on its device */
    ck_cuda_graph_free(s->graph);
    ck_cublas_free(s->blas);
    ck_cutie_gemm_free(s->cutie_gemm);
    ck_cuda_free(s->blas_ws); /* and conv_sync, inside it */
    for (int e = 0; e < 4; e++) ck_cuda_event_destroy(s->ev[e]);
    ck_cuda_event_destroy(s->ev_wait);
    ck_cuda_stream_destroy(s->stream);
    ck_cuda_free(s->arena);
    ck_cuda_free(s->dstore);
    ck_cuda_free(s->dmat);
    ck_cuda_free(s->dconv);
    ck_cuda_free(s->dbias);
    ck_cuda_free(s->dfold);
    ck_cuda_free(s->dpos);
    ck_cuda_free(s->tap_dev);
    ck_cuda_host_free(s->host_in);
    ck_cuda_host_free(s->host_out);
    ck_cuda_host_free(s->host_maps);
    free(s);
}

static int64_t cu_workspace_bytes(const ck_backend_config *bc) {
    (void)bc;
    return CUBLAS_WORKSPACE + CONV_SYNC_INTS * (int64_t)sizeof(int);
}

void ck_cuda_backend_cutie_lt(ck_backend *be, int on) {
    if (be && be->iface == &ck_cuda_backend) CU(be)->cutie_no_lt = !on;
}

void ck_cuda_backend_blas_plan_counts(const ck_backend *be, int bias_only, int *fused, int *fallback) {
    *fused = *fallback = 0;
    if (be && be->iface == &ck_cuda_backend) ck_cublas_plan_counts(CU(be)->blas, bias_only, fused, fallback);
}

const ck_backend_i ck_cuda_backend = {
    .name = "cuda",
    .ops = &ck_cuda_ops,
    .check = cu_check,
    .pass_params = cu_pass_params,
    .weight_bytes = cu_weight_bytes,
    .device_memory = 1,
    .encoder_chunks = 1,
    .pos_streamed = 1,
    .input_rgb = 1, /* after patch_embed only the refiner input reads x, its RGB planes */
    .workspace_bytes = cu_workspace_bytes,
    .host_io_bytes = cu_host_io_bytes,
    .create = cu_create,
    .upload_weights = cu_upload_weights,
    .alloc_workspace = cu_alloc_workspace,
    .input = cu_input,
    .run = cu_run,
    .host_alloc = cu_host_alloc,
    .host_free = cu_host_free,
    .stream = cu_stream,
    .free = cu_free,
    .ops_workspace_bytes = ck_cuda_ops_workspace_bytes,
    .mem_alloc = cu_mem_alloc,
    .mem_free = cu_mem_free,
    .ops_status = cu_ops_status,
};

#endif
