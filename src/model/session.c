/* Sessions: plan once (the forward pass on no backend), size one arena,
 * then run frames with no allocation. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "ckey_media.h"
#include "ckey_debug.h"
#include "cpu/cpu.h"
#include "cuda/backend.h"
#include "model/session.h"
#include "model/greenformer.h"
#include "model/ln-fold.h"
#include "pixel/pixel.h"

/* cuBLAS's workspace on a CUDA session (its own allocation, so that no GEMM
 * allocates during a graph capture). */
enum { CUBLAS_WORKSPACE = 16 << 20, CONV_SYNC_INTS = 16384 };

struct ckey_session {
    const ckey_model *m;
    ckey_session_options opt;
    ck_pool *pool;
    ck_backend be;
    ck_plan *plan;
    void *arena;
    float *pos_resized;   /* NULL when S / 4 == the stored grid */
    size_t scratch_bytes; /* CPU: the pass-long scratch; CUDA: the largest phase's */
    size_t phase_scratch[CK_PHASE_COUNT]; /* CUDA: each phase's scratch (ck_fwd.scratch_bytes) */
    ckey_memory_plan mp;
    uint32_t cuda_off;    /* CKEY_DEBUG_CUDA_* bits: optimisations of the CUDA path switched off */
    ckey_tap_fn tap;
    void *tap_user;
    double *prof;
    float *pipe;          /* pre/post-processing scratch, grown to the largest plate seen */
    size_t pipe_floats;
    /* CUDA sessions: the arena, weights and pos-embed live on the device; the
     * model struct `dm` points into the device copy of the weight store.
     * Input and results pass through host staging buffers. */
    int cuda;
    ck_cuda_state cs;
    ckey_model dm;
    ck_dtype dt;          /* activation and matrix-weight storage on the device */
    float *dstore;        /* fp32 weights (all of them, or only the vectors when dt is 16-bit) */
    void *dmat;           /* 16-bit matrix weights (dt != CK_F32) */
    void *dconv;          /* 16-bit refiner conv weights packed for the tensor-core conv */
    void *dbias;          /* 16-bit copies of the biases fused into cuBLASLt GEMMs (collect_linear_biases) */
    float *dfold;         /* the LN fold : per folded block, fc1's colsum [hidden], then its
                           * folded bias [hidden] (ln-fold.h) */
    int ln_fold;          /* fold norm2 into the fused fc1 where that kernel takes the block's shapes */
    float *dpos;          /* pos-embed for S: into dstore, or its own allocation (dpos_owned) */
    int dpos_owned;
    float *host_in, *host_out, *tap_host; /* host_in/out pinned (cudaMallocHost) */
    float *tap_dev;       /* taps of 16-bit sessions: widened to fp32 here (device, outside the plan) */
    void *blas_ws;        /* cuBLAS's workspace (device), so that GEMMs allocate nothing */
    void *graph;          /* the forward as a CUDA graph, captured on the second frame */
    int64_t frames;       /* frames run */
    int no_graph;         /* capture failed once: stay eager */
    float *result;        /* the pass's [4, S, S] output on the device (the same every frame) */
    void *ev[2];          /* around the network on the stream (device_seconds) */
    const float *io_in;   /* ckey_session_forward_into's caller buffers for this call, else NULL */
    float *io_out;
    size_t tap_host_floats, tap_dev_floats;
};

void ck_session_set_profile(ckey_session *s, double *prof) { s->prof = prof; }


void ck_session_blas_plan_counts(const ckey_session *s, int bias_only, int *fused, int *fallback) {
    *fused = *fallback = 0;
    if (s && s->cuda) ck_cublas_plan_counts(s->cs.blas, bias_only, fused, fallback);
}

const char *ckey_precision_name(ckey_precision p) {
    switch (p) {
    case CKEY_PRECISION_FP32: return "fp32";
    case CKEY_PRECISION_FP16: return "fp16";
    case CKEY_PRECISION_BF16: return "bf16";
    default: return "default";
    }
}

/* The storage type a session's options resolve to. */
static ck_dtype session_dtype(const ckey_session_options *o) {
    if (o->device != CKEY_DEVICE_CUDA) return CK_F32;
    switch (o->precision) {
    case CKEY_PRECISION_FP32: return CK_F32;
    case CKEY_PRECISION_BF16: return CK_BF16;
    default: return CK_F16;
    }
}

ckey_precision ckey_session_precision(const ckey_session *s) {
    if (!s) return CKEY_PRECISION_DEFAULT;
    switch (s->dt) {
    case CK_F16: return CKEY_PRECISION_FP16;
    case CK_BF16: return CKEY_PRECISION_BF16;
    default: return CKEY_PRECISION_FP32;
    }
}

void ckey_session_options_default(ckey_session_options *o) {
    memset(o, 0, sizeof *o);
    o->size = 2048;
    o->threads = 0;
    o->device = CKEY_DEVICE_CPU;
    o->refiner_strength = 1.0f;
    o->resize_back = CKEY_RESIZE_BACK_LANCZOS4;
}

const char *ckey_version(void) {
#if defined(CK_HAVE_OPENBLAS) && defined(CK_HAVE_CUDA)
    return "0.1.0 (cpu: openblas; cuda: fp32, fp16/bf16 tensor cores)";
#elif defined(CK_HAVE_OPENBLAS)
    return "0.1.0 (cpu: openblas; cuda: no)";
#elif defined(CK_HAVE_CUDA)
    return "0.1.0 (cpu: ckey sgemm avx512/avx2; cuda: fp32, fp16/bf16 tensor cores)";
#else
    return "0.1.0 (cpu: ckey sgemm avx512/avx2; cuda: no)";
#endif
}

ckey_status ckey_model_get_info(const ckey_model *m, ckey_model_info *info) {
    if (!m || !info) return CKEY_ERR_INVALID_ARG;
    memset(info, 0, sizeof *info);
    const ck_config *c = &m->cfg;
    info->embed_dim = c->embed_dim;
    info->head_dim = c->head_dim;
    info->num_blocks = ck_config_num_blocks(c);
    info->num_stages = c->num_stages;
    ck_block_info bi[CK_MAX_BLOCKS];
    ck_config_blocks(c, bi);
    for (int i = 0, s = 0; i < info->num_blocks; i++) {
        if (bi[i].stage_end) {
            info->stage_dims[s] = bi[i].dim_out;
            info->stage_heads[s] = bi[i].heads;
            s++;
        }
    }
    for (int s = 0; s < 4; s++) info->stage_blocks[s] = c->stage_blocks[s];
    info->decoder_dim = c->dec_dim;
    info->refiner_dim = c->ref_dim;
    info->refiner_groups = c->ref_groups;
    info->pos_embed_grid = c->pos_grid;
    info->native_size = c->pos_grid * c->patch_stride;
    info->num_params = m->num_params;
    return CKEY_OK;
}

/* need_device: a session needs the GPU itself; a plan alone does not. */
static ckey_status check_options(const ckey_model *m, const ckey_session_options *o, int need_device,
                                 ckey_error *err) {
    ckey_status st = ck_config_check_size(&m->cfg, o->size, err);
    if (st) return st;
    if (o->threads < 0 || o->threads > 1024)
        return ck_fail(err, CKEY_ERR_INVALID_ARG, "threads %d: must be 0 (all cores) to 1024", o->threads);
    if (o->device == CKEY_DEVICE_CUDA) {
        int n = ck_cuda_device_count();
        if (o->device_index < 0 || (need_device && o->device_index >= n))
            return ck_fail(err, CKEY_ERR_DEVICE, "cuda:%d: no such CUDA device (%d found%s)", o->device_index, n,
                           n ? "" : "; is this a CUDA build with a GPU and driver?");
#ifndef CK_HAVE_CUDA
        return ck_fail(err, CKEY_ERR_UNSUPPORTED, "cuda:%d: this build has no CUDA backend", o->device_index);
#endif
        if (m->cfg.ref_dim > 64)
            return ck_fail(err, CKEY_ERR_UNSUPPORTED, "cuda: refiner width %d over 64 is not supported", m->cfg.ref_dim);
    } else if (o->device != CKEY_DEVICE_CPU) {
        return ck_fail(err, CKEY_ERR_INVALID_ARG, "unknown device kind %d", (int)o->device);
    }
    if (!(o->refiner_strength >= 0.0f && o->refiner_strength <= 100.0f))
        return ck_fail(err, CKEY_ERR_INVALID_ARG, "refiner strength %g: must be within 0..100",
                       (double)o->refiner_strength);
    if (o->memory_budget < 0) return ck_fail(err, CKEY_ERR_INVALID_ARG, "memory budget must not be negative");
    if (o->precision < CKEY_PRECISION_DEFAULT || o->precision > CKEY_PRECISION_BF16)
        return ck_fail(err, CKEY_ERR_INVALID_ARG, "unknown precision %d", (int)o->precision);
    if (o->device != CKEY_DEVICE_CUDA && (o->precision == CKEY_PRECISION_FP16 || o->precision == CKEY_PRECISION_BF16))
        return ck_fail(err, CKEY_ERR_UNSUPPORTED, "precision %s: the CPU backend runs fp32 only (use --device cuda)",
                       ckey_precision_name(o->precision));
    if (o->resize_back != CKEY_RESIZE_BACK_LANCZOS4 && o->resize_back != CKEY_RESIZE_BACK_BILINEAR)
        return ck_fail(err, CKEY_ERR_INVALID_ARG, "resize_back %d: expected CKEY_RESIZE_BACK_LANCZOS4 or _BILINEAR",
                       (int)o->resize_back);
    return CKEY_OK;
}

static int resolve_threads(int t) {
    if (t > 0) return t;
    long n = sysconf(_SC_NPROCESSORS_ONLN);
    return n > 0 ? (int)n : 1;
}

/* Record the pass. CPU: its scratch first (buffer 0, lives throughout), then
 * the forward's own buffers. CUDA: the forward allocates a scratch per phase
 * (phase[], bytes; the encoder's is buffer 0), each released when its phase
 * ends, so that the refiner's maps reuse the encoder's scratch. *scratch_bytes:
 * the CPU scratch, or the largest phase's. */
static ckey_status plan_pass(const ckey_model *m, const ckey_session_options *o, int threads, ck_plan *plan,
                             size_t *scratch_bytes, size_t phase[CK_PHASE_COUNT], ckey_error *err) {
    const ck_dtype dt = session_dtype(o);
    const size_t act_bytes = ck_dtype_size(dt);
    const int S = o->size;
    for (int i = 0; i < CK_PHASE_COUNT; i++) phase[i] = 0;
    ck_plan_begin_record(plan);
    if (o->device == CKEY_DEVICE_CUDA) {
        /* the encoder's scratch also stages the fp32 input of a 16-bit session (cuda_run) */
        phase[CK_PHASE_ENCODER] = CK_MAX(ck_cuda_encoder_scratch_elems(&m->cfg, S) * act_bytes, (size_t)16 * S * S);
        phase[CK_PHASE_STEM] = ck_cuda_stem_scratch_elems(&m->cfg, S, dt) * act_bytes;
        *scratch_bytes = CK_MAX(phase[CK_PHASE_ENCODER], phase[CK_PHASE_STEM]);
    } else {
        size_t per_thread, shared;
        ck_cpu_scratch_floats(&m->cfg, S, threads, &per_thread, &shared);
        *scratch_bytes = ((size_t)threads * per_thread + shared) * sizeof(float);
        ck_alloc(plan, *scratch_bytes, "cpu scratch");
    }
    ck_fwd f = {m,    NULL, NULL, plan, S, NULL, o->refiner_strength, NULL, NULL, NULL, NULL, (int)act_bytes,
                {0}, 0,    0};
    for (int i = 0; i < CK_PHASE_COUNT; i++) f.scratch_bytes[i] = phase[i];
    if (o->device == CKEY_DEVICE_CUDA) {
        f.conv_shift_rows = ck_cuda_conv_shift_rows(S);
        f.conv_load_affine = ck_cuda_conv_loads_affine(m->cfg.ref_dim, dt);
    }
    ck_forward(&f);
    return ck_plan_finish(plan, err);
}

static size_t pos_bytes(const ckey_model *m, int S) {
    int g = S / m->cfg.patch_stride;
    return g == m->cfg.pos_grid ? 0 : (size_t)g * g * m->cfg.embed_dim * sizeof(float);
}

/* The matrix weights (the GEMM operands: stored in 16 bits on 16-bit CUDA
 * sessions), as slots of the model struct with their element counts, in
 * store order. */
typedef struct mat_ref {
    size_t off, count;  /* in floats, within the store */
    const float **slot; /* in the device model struct */
} mat_ref;

/* Append `field` (count elements of the model's store; skipped when absent)
 * with its slot `dfield` in the device model. */
#define ADD(field, dfield, cnt)                                                     \
    do {                                                                            \
        if (field) {                                                                \
            r[n].off = (size_t)((field) - m->store), r[n].count = (size_t)(cnt);    \
            r[n].slot = (const float **)&(dfield);                                  \
            n++;                                                                    \
        }                                                                           \
    } while (0)
enum { MAX_MATS = CK_MAX_BLOCKS * 5 + 5 };

static int cmp_mat(const void *a, const void *b) {
    const mat_ref *x = a, *y = b;
    return x->off < y->off ? -1 : x->off > y->off;
}

static int collect_matrices(const ckey_model *m, ckey_model *dm, mat_ref *r) {
    const ck_config *c = &m->cfg;
    ck_block_info bi[CK_MAX_BLOCKS];
    ck_config_blocks(c, bi);
    const int nb = ck_config_num_blocks(c);
    int n = 0, nf = 0, feat[4] = {0};
    for (int i = 0; i < nb; i++) {
        const ck_block_info *b = &bi[i];
        const ck_block_w *w = &m->blocks[i];
        ck_block_w *dw = &dm->blocks[i];
        const size_t D = (size_t)b->dim, Do = (size_t)b->dim_out, Hd = Do * (size_t)c->mlp_ratio;
        ADD(w->qkv_w, dw->qkv_w, 3 * Do * D);
        ADD(w->proj_w, dw->proj_w, Do * D);
        ADD(w->attn_proj_w, dw->attn_proj_w, Do * Do);
        ADD(w->fc1_w, dw->fc1_w, Hd * Do);
        ADD(w->fc2_w, dw->fc2_w, Do * Hd);
        if (b->stage_end && nf < 4) feat[nf++] = b->dim_out;
    }
    for (int k = 0; k < 4; k++) ADD(m->dec.scale_w[k], dm->dec.scale_w[k], (size_t)2 * c->dec_dim * feat[k]);
    ADD(m->patch_w, dm->patch_w, (size_t)c->embed_dim * c->in_chans * c->patch_kernel * c->patch_kernel);
    qsort(r, (size_t)n, sizeof *r, cmp_mat);
    return n;
}

/* The biases that 16-bit sessions hand to cuBLASLt's fused bias epilogue
 * (ck_cuda_linear_t with a bias, src/cuda/backend.c), which takes the bias
 * in the output's type: qkv_b, attn_proj_b, fc2_b and the decoder's
 * scale_b[1..3]. They get dt copies (s->dbias), each starting 16-byte
 * aligned (BIAS_ALIGN elements), and their device-model slots point there.
 * The biases other kernels read as fp32 keep their fp32 slots: proj_b
 * (maxpool + bias), fc1_b (bias + GELU), patch_b (patch epilogue), scale_b[0]
 * (decoder epilogue). r[i].count is the bias's length; the copies are packed in r's order, each
 * padded to a multiple of BIAS_ALIGN. Returns the count of r. */
enum { BIAS_ALIGN = 8, MAX_BIASES = CK_MAX_BLOCKS * 3 + 3 };

static size_t bias_padded(size_t count) { return (count + BIAS_ALIGN - 1) / BIAS_ALIGN * BIAS_ALIGN; }

static int collect_linear_biases(const ckey_model *m, ckey_model *dm, mat_ref *r) {
    const ck_config *c = &m->cfg;
    ck_block_info bi[CK_MAX_BLOCKS];
    ck_config_blocks(c, bi);
    const int nb = ck_config_num_blocks(c);
    int n = 0;
    for (int i = 0; i < nb; i++) {
        const size_t Do = (size_t)bi[i].dim_out;
        ADD(m->blocks[i].qkv_b, dm->blocks[i].qkv_b, 3 * Do);
        ADD(m->blocks[i].attn_proj_b, dm->blocks[i].attn_proj_b, Do);
        ADD(m->blocks[i].fc2_b, dm->blocks[i].fc2_b, Do);
    }
    for (int k = 1; k < 4; k++) ADD(m->dec.scale_b[k], dm->dec.scale_b[k], (size_t)2 * c->dec_dim);
    return n;
}
#undef ADD

/* Elements of s->dbias (padded copies of the collect_linear_biases). */
static size_t linear_bias_elems(const ckey_model *m) {
    mat_ref r[MAX_BIASES];
    ckey_model tmp = *m;
    const int n = collect_linear_biases(m, &tmp, r);
    size_t total = 0;
    for (int i = 0; i < n; i++) total += bias_padded(r[i].count);
    return total;
}

/* Whether block b's norm2 folds into its fc1 in a 16-bit session that asked
 * for the fold: the fused fc1 kernel takes its shapes (ln-fold.h). */
static int block_folds(const ckey_model *m, int i, const ck_block_info *b, ck_dtype dt) {
    const ck_block_w *w = &m->blocks[i];
    return dt != CK_F32 && w->fc1_w && w->norm2_w && w->norm2_b &&
           ck_cuda_linear_gelu_ok(1, b->dim_out, b->dim_out * m->cfg.mlp_ratio, dt);
}

/* The LN fold unless a switch turns it (or the fused fc1 it lives in) off;
 * whether the device takes it is cuda_session_init's question. */
static int ln_fold_wanted(uint32_t cuda_off) {
    return !(cuda_off & (CKEY_DEBUG_CUDA_NO_LN_FOLD | CKEY_DEBUG_CUDA_NO_FUSED_FC1 | CKEY_DEBUG_CUDA_NO_WGMMA));
}

/* Floats of the LN fold's vectors (s->dfold): colsum and the folded bias per folded block. */
static size_t ln_fold_floats(const ckey_model *m, ck_dtype dt) {
    ck_block_info bi[CK_MAX_BLOCKS];
    ck_config_blocks(&m->cfg, bi);
    size_t n = 0;
    for (int i = 0; i < ck_config_num_blocks(&m->cfg); i++)
        if (block_folds(m, i, &bi[i], dt)) n += 2 * (size_t)bi[i].dim_out * m->cfg.mlp_ratio;
    return n;
}

/* Device weight bytes: fp32 store, or fp32 vectors + 16-bit matrices +
 * 16-bit copies of the fused linear biases + the packed refiner convs (+ the
 * LN fold's vectors unless a switch turns the fold off). */
static size_t device_weight_bytes(const ckey_model *m, ck_dtype dt, uint32_t cuda_off) {
    if (dt == CK_F32) return m->store_floats * sizeof(float);
    mat_ref r[MAX_MATS];
    ckey_model tmp = *m;
    const int n = collect_matrices(m, &tmp, r);
    size_t mat = 0;
    for (int i = 0; i < n; i++) mat += r[i].count;
    size_t conv = 0;
    const int R = m->cfg.ref_dim;
    if (ck_cuda_refiner_tc_ok(R, dt)) conv = 8 * ck_conv3x3_tc_weight_bytes(R, R) + ck_conv3x3_tc_weight_bytes(R, 16);
    const size_t fold = ln_fold_wanted(cuda_off) ? ln_fold_floats(m, dt) * sizeof(float) : 0;
    return (m->store_floats - mat) * sizeof(float) + (mat + linear_bias_elems(m)) * ck_dtype_size(dt) + conv + fold;
}

static void fill_plan(const ckey_model *m, const ck_plan *plan, size_t scratch, int S, ck_dtype dt, uint32_t cuda_off,
                      ckey_memory_plan *mp) {
    memset(mp, 0, sizeof *mp);
    mp->weight_bytes = (int64_t)(device_weight_bytes(m, dt, cuda_off) + pos_bytes(m, S));
    mp->arena_bytes = (int64_t)ck_plan_arena_bytes(plan);
    mp->scratch_bytes = (int64_t)scratch;
    mp->peak_bytes = mp->weight_bytes + mp->arena_bytes;
    mp->num_buffers = ck_plan_num_buffers(plan);
    mp->naive_bytes = (int64_t)ck_plan_naive_bytes(plan);
}

/* Validate the options and record a plan without any backend (for the
 * planning-only entry points). The caller frees *plan. */
static ckey_status plan_only(const ckey_model *m, const ckey_session_options *opt, ckey_session_options *o,
                             ck_plan **plan, size_t *scratch, ckey_error *err) {
    *plan = NULL;
    if (opt) *o = *opt; else ckey_session_options_default(o);
    size_t phase[CK_PHASE_COUNT];
    ckey_status st = check_options(m, o, 0, err);
    if (!st) st = ck_plan_create(plan, err);
    if (!st) st = plan_pass(m, o, resolve_threads(o->threads), *plan, scratch, phase, err);
    return st;
}

/* CKEY_ERR_BUDGET: the plan at `size` is over `budget`, every figure in a
 * unit that shows it (a budget of 1K is "1.0 KiB", not "0.0 MiB"). */
static ckey_status over_budget(int32_t size, const ckey_memory_plan *mp, int64_t budget,
                               ckey_error *err) {
    char peak[32], weights[32], arena[32], limit[32];
    return ck_fail(err, CKEY_ERR_BUDGET,
                   "size %d needs %s (weights %s + arena %s), over the budget of %s", (int)size,
                   ck_format_bytes(peak, sizeof peak, mp->peak_bytes),
                   ck_format_bytes(weights, sizeof weights, mp->weight_bytes),
                   ck_format_bytes(arena, sizeof arena, mp->arena_bytes),
                   ck_format_bytes(limit, sizeof limit, budget));
}

ckey_status ckey_plan_memory(const ckey_model *m, const ckey_session_options *opt, ckey_memory_plan *mp,
                             ckey_error *err) {
    if (!m || !mp) return ck_fail(err, CKEY_ERR_INVALID_ARG, "ckey_plan_memory: NULL argument");
    ckey_session_options o;
    ck_plan *plan;
    size_t scratch;
    ckey_status st = plan_only(m, opt, &o, &plan, &scratch, err);
    if (!st) {
        fill_plan(m, plan, scratch, o.size, session_dtype(&o), 0, mp);
        if (o.memory_budget > 0 && mp->peak_bytes > o.memory_budget)
            st = over_budget(o.size, mp, o.memory_budget, err);
    }
    ck_plan_free(plan);
    return st;
}

/* The model struct with every weight pointer moved into the device copy of
 * the store (all weights live in that one allocation). */
static void remap_model(const ckey_model *m, float *dstore, ckey_model *dm) {
    *dm = *m;
#define R(p) ((p) ? dstore + ((p) - m->store) : NULL)
    dm->store = dstore;
    dm->dec_raw = NULL;
    dm->source = NULL;
    dm->patch_w = R(m->patch_w), dm->patch_b = R(m->patch_b), dm->pos_embed = R(m->pos_embed);
    for (int i = 0; i < CK_MAX_BLOCKS; i++) {
        const ck_block_w *a = &m->blocks[i];
        ck_block_w *b = &dm->blocks[i];
        b->norm1_w = R(a->norm1_w), b->norm1_b = R(a->norm1_b), b->proj_w = R(a->proj_w), b->proj_b = R(a->proj_b);
        b->qkv_w = R(a->qkv_w), b->qkv_b = R(a->qkv_b), b->attn_proj_w = R(a->attn_proj_w);
        b->attn_proj_b = R(a->attn_proj_b), b->norm2_w = R(a->norm2_w), b->norm2_b = R(a->norm2_b);
        b->fc1_w = R(a->fc1_w), b->fc1_b = R(a->fc1_b), b->fc2_w = R(a->fc2_w), b->fc2_b = R(a->fc2_b);
    }
    for (int k = 0; k < 4; k++) dm->dec.scale_w[k] = R(m->dec.scale_w[k]), dm->dec.scale_b[k] = R(m->dec.scale_b[k]);
    dm->dec.cls_w = R(m->dec.cls_w), dm->dec.cls_b = R(m->dec.cls_b);
    const ck_refiner_w *ra = &m->ref;
    ck_refiner_w *rb = &dm->ref;
    rb->stem_w = R(ra->stem_w), rb->stem_b = R(ra->stem_b), rb->stem_gn_w = R(ra->stem_gn_w);
    rb->stem_gn_b = R(ra->stem_gn_b), rb->final_w = R(ra->final_w), rb->final_b = R(ra->final_b);
    for (int i = 0; i < 8; i++) {
        rb->conv_w[i] = R(ra->conv_w[i]), rb->conv_b[i] = R(ra->conv_b[i]);
        rb->gn_w[i] = R(ra->gn_w[i]), rb->gn_b[i] = R(ra->gn_b[i]);
    }
#undef R
}

/* 16-bit sessions with a refiner width the tensor-core conv takes: the
 * eight residual convs and the stem (its 7 input channels zero-padded to 8,
 * see ck_cuda_refiner_stem_input; packed with its taps paired) packed for
 * ck_cuda_conv3x3_tc. */
static ckey_status pack_convs(ckey_session *s, ckey_error *err) {
    const ckey_model *m = s->m;
    const int R = m->cfg.ref_dim;
    if (!ck_cuda_refiner_tc_ok(R, s->dt)) return CKEY_OK;
    const size_t conv = ck_conv3x3_tc_weight_bytes(R, R), stem = ck_conv3x3_tc_weight_bytes(R, 8);
    ckey_status st = ck_cuda_malloc(&s->dconv, 8 * conv + stem, err);
    for (int i = 0; !st && i < 8; i++) {
        void *d = (char *)s->dconv + (size_t)i * conv;
        st = ck_cuda_conv3x3_tc_pack_weights(m->ref.conv_w[i], R, R, s->dt, d, NULL, err);
        s->dm.ref.conv_w[i] = d;
    }
    if (st) return st;
    float *w8 = calloc((size_t)R * 8 * 9, sizeof(float));
    if (!w8) return ck_fail(err, CKEY_ERR_NOMEM, "out of memory");
    for (int o = 0; o < R; o++)
        for (int c = 0; c < 7; c++) memcpy(w8 + ((size_t)o * 8 + c) * 9, m->ref.stem_w + ((size_t)o * 7 + c) * 9, 9 * sizeof(float));
    void *d = (char *)s->dconv + 8 * conv;
    st = ck_cuda_conv3x3_tc_pack_weights(w8, R, 8, s->dt, d, NULL, err);
    free(w8);
    s->dm.ref.stem_w = d;
    return st;
}

/* 16-bit sessions: the dt copies of the fused linear biases (see
 * collect_linear_biases), converted on the device in one pass; the padding
 * between them is zero. */
static ckey_status upload_linear_biases(ckey_session *s, ckey_error *err) {
    const ckey_model *m = s->m;
    mat_ref r[MAX_BIASES];
    const int n = collect_linear_biases(m, &s->dm, r);
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
        *r[i].slot = (const float *)(void *)((char *)s->dbias + at * ck_dtype_size(s->dt));
        at += bias_padded(r[i].count);
    }
    return CKEY_OK;
}

/* Upload the weights. fp32 sessions copy the store as it is. 16-bit
 * sessions store the matrices (GEMM operands) in dt, converted on the device
 * one at a time, and the rest (vectors, patch embed, pos-embed, convs) in a
 * compact fp32 copy of the store with the matrices cut out; the biases fused
 * into cuBLASLt GEMMs also get dt copies (upload_linear_biases). */
static ckey_status upload_weights(ckey_session *s, ckey_error *err) {
    const ckey_model *m = s->m;
    if (s->dt == CK_F32) {
        ckey_status st = ck_cuda_malloc((void **)&s->dstore, m->store_floats * sizeof(float), err);
        if (!st) st = ck_cuda_copy(s->dstore, m->store, m->store_floats * sizeof(float), 1, err);
        if (!st) remap_model(m, s->dstore, &s->dm);
        return st;
    }
    mat_ref r[MAX_MATS];
    remap_model(m, m->store, &s->dm); /* vectors fixed up below */
    const int n = collect_matrices(m, &s->dm, r);
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
    /* the LN fold (ln-fold.h): which blocks, and their vectors' offsets in s->dfold */
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
    if (!st) st = ck_cuda_malloc(&s->dmat, mat * ck_dtype_size(s->dt), err);
    if (!st) st = ck_cuda_malloc(&tmp, biggest * sizeof(float), err);
    size_t at = 0;
    for (int i = 0; !st && i < n; i++) {
        void *d = (char *)s->dmat + at * ck_dtype_size(s->dt);
        int fb = -1; /* the block whose folded fc1 this is */
        for (int b = 0; b < nb && nfold; b++)
            if (fold_at[b] != SIZE_MAX && r[i].slot == (const float **)&s->dm.blocks[b].fc1_w) fb = b;
        const float *from = m->store + r[i].off;
        const int H = fb >= 0 ? bi[fb].dim_out * m->cfg.mlp_ratio : 0, C = fb >= 0 ? bi[fb].dim_out : 0;
        if (fb >= 0) { /* W diag(g) and b + W beta, from the host model's fp32 weights */
            const ck_block_w *w = &m->blocks[fb];
            ck_lnfold_weights(w->fc1_w, w->norm2_w, w->norm2_b, w->fc1_b, H, C, hw, hfold + fold_at[fb] + H);
            from = hw;
        }
        st = ck_cuda_copy(tmp, from, r[i].count * sizeof(float), 1, err);
        if (!st) st = ck_cuda_convert(tmp, CK_F32, d, s->dt, (int64_t)r[i].count, NULL, err);
        if (!st) st = ck_cuda_sync(err);
        if (!st && fb >= 0) { /* colsum of the 16-bit matrix as the GEMM reads it */
            st = ck_cuda_copy(hq, d, r[i].count * sizeof(uint16_t), 0, err);
            if (!st) ck_lnfold_colsum16(hq, s->dt, H, C, hfold + fold_at[fb]);
        }
        *r[i].slot = (const float *)d;
        at += r[i].count;
    }
    ck_cuda_free(tmp);
    free(hw), free(hq);
    if (!st && nfold) st = ck_cuda_malloc((void **)&s->dfold, nfold * sizeof(float), err);
    if (!st && nfold) st = ck_cuda_copy(s->dfold, hfold, nfold * sizeof(float), 1, err);
    free(hfold);
    if (st) return st;
    /* every other pointer: host store offset -> compact device offset */
    const float **slots[256];
    int ns = 0;
    ckey_model *dm = &s->dm;
#define SLOT(p) ((p) && ns < 256 ? (void)(slots[ns++] = (const float **)&(p)) : (void)0)
    SLOT(dm->patch_b), SLOT(dm->pos_embed);
    for (int i = 0; i < CK_MAX_BLOCKS; i++) {
        ck_block_w *bw = &dm->blocks[i];
        SLOT(bw->norm1_w), SLOT(bw->norm1_b), SLOT(bw->proj_b), SLOT(bw->qkv_b), SLOT(bw->attn_proj_b);
        SLOT(bw->norm2_w), SLOT(bw->norm2_b), SLOT(bw->fc1_b), SLOT(bw->fc2_b);
    }
    for (int k = 0; k < 4; k++) SLOT(dm->dec.scale_b[k]);
    SLOT(dm->dec.cls_w), SLOT(dm->dec.cls_b);
    ck_refiner_w *rw = &dm->ref;
    SLOT(rw->stem_w), SLOT(rw->stem_b), SLOT(rw->stem_gn_w), SLOT(rw->stem_gn_b), SLOT(rw->final_w), SLOT(rw->final_b);
    for (int i = 0; i < 8; i++) SLOT(rw->conv_w[i]), SLOT(rw->conv_b[i]), SLOT(rw->gn_w[i]), SLOT(rw->gn_b[i]);
#undef SLOT
    if (ns >= 256) return ck_fail(err, CKEY_ERR_INTERNAL, "too many weight slots");
    for (int j = 0; j < ns; j++) {
        const float *p = *slots[j];
        if (p < m->store || p >= m->store + m->store_floats)
            return ck_fail(err, CKEY_ERR_INTERNAL, "weight outside the store");
        size_t off = (size_t)(p - m->store), before = 0;
        for (int i = 0; i < n && r[i].off < off; i++) {
            if (off < r[i].off + r[i].count) return ck_fail(err, CKEY_ERR_INTERNAL, "vector inside a matrix");
            before += r[i].count;
        }
        *slots[j] = s->dstore + (off - before);
    }
    dm->store = s->dstore;
    for (int b = 0; b < nb; b++) /* folded blocks: their colsum and folded bias, past the slot remapping */
        if (fold_at[b] != SIZE_MAX) {
            const size_t H = (size_t)bi[b].dim_out * m->cfg.mlp_ratio;
            dm->blocks[b].fc1_colsum = s->dfold + fold_at[b];
            dm->blocks[b].fc1_b = s->dfold + fold_at[b] + H;
        }
    st = upload_linear_biases(s, err);
    return st ? st : pack_convs(s, err);
}


static ckey_status cuda_session_init(ckey_session *s, ckey_error *err) {
    const ckey_model *m = s->m;
    const int S = s->opt.size;
    ckey_status st = ck_cuda_set_device(s->opt.device_index, err);
    if (st) return st;
    s->cs.dt = s->dt;
    const uint32_t off = s->cuda_off;
    /* Hopper's wgmma attention and refiner convs for 16-bit sessions (else mma.sync) */
    s->cs.wgmma = s->dt != CK_F32 && !(off & CKEY_DEBUG_CUDA_NO_WGMMA) && ck_cuda_wgmma_ok();
    /* the MLP's fc1 + bias + GELU as one wgmma kernel (else cuBLASLt + a pass) */
    s->cs.fused_fc1 = s->cs.wgmma && !(off & CKEY_DEBUG_CUDA_NO_FUSED_FC1);
    /* that kernel's tile form: the kernel's pick for the shape, or 128-wide tiles without clusters */
    s->cs.fc1_form = off & CKEY_DEBUG_CUDA_FC1_PLAIN ? CK_LINEAR_TILE_N128 | CK_LINEAR_CLUSTER1 : 0;
    /* norm2 folded into that kernel (ln-fold.h; upload_weights), else LayerNorm, then fc1 */
    s->ln_fold = s->cs.fused_fc1 && ln_fold_wanted(off);
    st = ck_cuda_malloc(&s->arena, (ck_plan_arena_bytes(s->plan) + 255) / 256 * 256, err);
    if (!st) st = upload_weights(s, err);
    if (!st) st = ck_cublas_create(&s->cs.blas, err);
    if (!st) st = ck_cuda_stream_create(&s->cs.stream, err);
    if (!st) st = ck_cuda_event_create(&s->ev[0], err);
    if (!st) st = ck_cuda_event_create(&s->ev[1], err);
    if (!st) st = ck_cuda_malloc(&s->blas_ws, CUBLAS_WORKSPACE, err);
    if (!st) st = ck_cublas_set_workspace(s->cs.blas, s->blas_ws, CUBLAS_WORKSPACE, err);
    if (st) return st;
    /* the in-place conv2 as one launch over its bands (else a launch a band) */
    if (s->cs.wgmma && !(off & CKEY_DEBUG_CUDA_NO_CONV_ONE_LAUNCH)) {
        s->cs.conv_sync_n = CONV_SYNC_INTS;
        st = ck_cuda_malloc((void **)&s->cs.conv_sync, (size_t)CONV_SYNC_INTS * sizeof(int), err);
        if (st) return st;
    }
    /* 16-bit linears through cuBLAS GEMM + a bias pass instead of cuBLASLt */
    if (off & CKEY_DEBUG_CUDA_NO_LT) ck_cublas_set_lt(s->cs.blas, 0);
    const size_t pb = pos_bytes(m, S);
    if (pb) {
        float *host = malloc(pb);
        if (!host) return ck_fail(err, CKEY_ERR_NOMEM, "out of memory");
        ck_pos_embed_resize(m->pos_embed, m->cfg.pos_grid, m->cfg.embed_dim, host, S / m->cfg.patch_stride);
        st = ck_cuda_malloc((void **)&s->dpos, pb, err);
        if (!st) s->dpos_owned = 1;
        if (!st) st = ck_cuda_copy(s->dpos, host, pb, 1, err);
        free(host);
        if (st) return st;
    } else {
        s->dpos = (float *)s->dm.pos_embed;
    }
    const size_t io = (size_t)4 * S * S * sizeof(float);
    if ((st = ck_cuda_host_alloc((void **)&s->host_in, io, err))) return st;
    if ((st = ck_cuda_host_alloc((void **)&s->host_out, io, err))) return st;
    ck_plan_begin_execute(s->plan, s->arena);
    return CKEY_OK;
}

ckey_status ckey_plan_memory_print(const ckey_model *m, const ckey_session_options *opt, FILE *out,
                                   ckey_error *err) {
    if (!m || !out) return ck_fail(err, CKEY_ERR_INVALID_ARG, "ckey_plan_memory_print: NULL argument");
    ckey_session_options o;
    ck_plan *plan;
    size_t scratch;
    ckey_status st = plan_only(m, opt, &o, &plan, &scratch, err);
    if (!st) ck_plan_dump(plan, out);
    ck_plan_free(plan);
    return st;
}

ckey_status ckey_session_create(const ckey_model *m, const ckey_session_options *opt, ckey_session **out,
                                ckey_error *err) {
    return ckey_session_create_debug(m, opt, 0, out, err);
}

ckey_status ckey_session_create_debug(const ckey_model *m, const ckey_session_options *opt, uint32_t cuda_off,
                                      ckey_session **out, ckey_error *err) {
    if (!out) return ck_fail(err, CKEY_ERR_INVALID_ARG, "ckey_session_create: out is NULL");
    *out = NULL;
    if (!m) return ck_fail(err, CKEY_ERR_INVALID_ARG, "ckey_session_create: model is NULL");
    ckey_session *s = calloc(1, sizeof *s);
    if (!s) return ck_fail(err, CKEY_ERR_NOMEM, "out of memory");
    s->m = m;
    s->cuda_off = cuda_off;
    if (opt) s->opt = *opt; else ckey_session_options_default(&s->opt);
    ckey_status st = check_options(m, &s->opt, 1, err);
    int threads = resolve_threads(s->opt.threads);
    if (!st) st = ck_plan_create(&s->plan, err);
    if (!st) st = plan_pass(m, &s->opt, threads, s->plan, &s->scratch_bytes, s->phase_scratch, err);
    if (!st) {
        fill_plan(m, s->plan, s->scratch_bytes, s->opt.size, session_dtype(&s->opt), s->cuda_off, &s->mp);
        if (s->opt.memory_budget > 0 && s->mp.peak_bytes > s->opt.memory_budget)
            st = over_budget(s->opt.size, &s->mp, s->opt.memory_budget, err);
    }
    s->cuda = s->opt.device == CKEY_DEVICE_CUDA;
    s->dt = session_dtype(&s->opt);
    if (!st && s->cuda) st = cuda_session_init(s, err);
    if (!st && !s->cuda) {
        ck_gemm_init();
        st = ck_pool_create(threads, &s->pool, err);
    }
    if (!st && !s->cuda) {
        s->arena = aligned_alloc(64, (ck_plan_arena_bytes(s->plan) + 63) / 64 * 64);
        size_t pb = pos_bytes(m, s->opt.size);
        if (pb) s->pos_resized = malloc(pb);
        if (!s->arena || (pb && !s->pos_resized))
            st = ck_fail(err, CKEY_ERR_NOMEM, "size %d: could not allocate the %.1f MiB arena", s->opt.size,
                         ck_plan_arena_bytes(s->plan) / 1048576.0);
    }
    if (!st && !s->cuda) {
        if (s->pos_resized)
            ck_pos_embed_resize(m->pos_embed, m->cfg.pos_grid, m->cfg.embed_dim, s->pos_resized,
                                s->opt.size / m->cfg.patch_stride);
        size_t per_thread, shared;
        ck_cpu_scratch_floats(&m->cfg, s->opt.size, ck_pool_size(s->pool),
                              &per_thread, &shared);
        s->be.pool = s->pool;
        s->be.threads = ck_pool_size(s->pool);
        s->be.per_thread = per_thread;
        ck_plan_begin_execute(s->plan, s->arena);
        s->be.scratch = ck_plan_buffer(s->plan, 0);
        s->be.shared = s->be.scratch + (size_t)s->be.threads * per_thread;
        s->be.shared_floats = shared;
    }
    if (st) {
        ckey_session_free(s);
        return st;
    }
    *out = s;
    return CKEY_OK;
}

void ckey_session_free(ckey_session *s) {
    if (!s) return;
    if (s->cuda) {
        ck_cuda_graph_free(s->graph);
        ck_cublas_free(s->cs.blas);
        ck_cuda_free(s->blas_ws);
        ck_cuda_free(s->cs.conv_sync);
        ck_cuda_event_destroy(s->ev[0]);
        ck_cuda_event_destroy(s->ev[1]);
        ck_cuda_stream_destroy(s->cs.stream);
        ck_cuda_free(s->arena);
        s->arena = NULL;
        ck_cuda_free(s->dstore);
        ck_cuda_free(s->dmat);
        ck_cuda_free(s->dconv);
        ck_cuda_free(s->dbias);
        ck_cuda_free(s->dfold);
        if (s->dpos_owned) ck_cuda_free(s->dpos);
        ck_cuda_host_free(s->host_in);
        ck_cuda_host_free(s->host_out);
        ck_cuda_free(s->tap_dev);
        free(s->tap_host);
    }
    ck_pool_free(s->pool);
    ck_plan_free(s->plan);
    free(s->arena);
    free(s->pos_resized);
    free(s->pipe);
    free(s);
}

ckey_status ckey_session_get_plan(const ckey_session *s, ckey_memory_plan *plan) {
    if (!s || !plan) return CKEY_ERR_INVALID_ARG;
    *plan = s->mp;
    return CKEY_OK;
}

void ckey_session_set_tap(ckey_session *s, ckey_tap_fn fn, void *user) {
    if (!s) return;
    s->tap = fn;
    s->tap_user = user;
}

int32_t ckey_session_size(const ckey_session *s) { return s ? s->opt.size : 0; }

/* The input buffer is the plan's second buffer (after the scratch). */
float *ck_session_input(ckey_session *s) {
    if (s->cuda) return s->host_in; /* uploaded by ck_session_run */
    ck_plan_begin_execute(s->plan, s->arena);
    return ck_plan_buffer(s->plan, 1);
}

#ifdef CK_HAVE_CUDA
/* Taps on a CUDA session: copy the device tensor to the host first. */
static void cuda_tap(void *user, const char *name, const void *data, const int64_t *shape, int32_t ndim,
                     int elem_bytes) {
    ckey_session *s = user;
    int64_t n = 1;
    for (int i = 0; i < ndim; i++) n *= shape[i];
    if ((size_t)n > s->tap_host_floats) {
        float *p = realloc(s->tap_host, (size_t)n * sizeof(float)); /* debug path only */
        if (!p) return;
        s->tap_host = p;
        s->tap_host_floats = (size_t)n;
    }
    if (elem_bytes == 4) {
        if (ck_cuda_copy(s->tap_host, data, (size_t)n * sizeof(float), 0, NULL)) return;
    } else {
        /* widen to fp32 on the device, then copy (taps run between ops, on eager
         * passes only). The buffer is the tap's own, outside the plan: no
         * phase's scratch has to fit every tap. */
        if ((size_t)n > s->tap_dev_floats) {
            ck_cuda_free(s->tap_dev); /* debug path only */
            s->tap_dev = NULL;
            s->tap_dev_floats = 0;
            if (ck_cuda_malloc((void **)&s->tap_dev, (size_t)n * sizeof(float), NULL)) return;
            s->tap_dev_floats = (size_t)n;
        }
        if (ck_cuda_convert(data, s->dt, s->tap_dev, CK_F32, n, NULL, NULL) || ck_cuda_sync(NULL)) return;
        if (ck_cuda_copy(s->tap_host, s->tap_dev, (size_t)n * sizeof(float), 0, NULL)) return;
    }
    s->tap(s->tap_user, name, s->tap_host, shape, ndim);
}
#endif

#ifdef CK_HAVE_CUDA
static void cuda_sync_quiet(void) { ck_cuda_sync(NULL); }
#endif

static ckey_status cuda_run(ckey_session *s, ckey_forward_result *out, ckey_error *err) {
#ifdef CK_HAVE_CUDA
    double t0 = ck_now();
    const int64_t HW = (int64_t)s->opt.size * s->opt.size;
    ck_plan_begin_execute(s->plan, s->arena);
    s->cs.status = CKEY_OK;
    void *stream = s->cs.stream;
    ckey_status st;
    /* the upload stays outside the graph: pinned host -> device on the stream */
    const float *src = s->io_in ? s->io_in : s->host_in;
    /* device_seconds: from the input on the device (fp32) to the output
     * there, i.e. without the two host transfers */
    if (s->dt == CK_F32) {
        st = ck_cuda_copy_async(ck_plan_buffer(s->plan, 1), src, (size_t)4 * HW * sizeof(float), 1, stream, err);
        if (!st) st = ck_cuda_event_record(s->ev[0], stream, err);
    } else {
        /* fp32 input through the encoder's scratch (buffer 0, free until the
         * first op; plan_pass sizes it for this), stored in dt */
        float *stage = ck_plan_buffer(s->plan, 0);
        st = ck_cuda_copy_async(stage, src, (size_t)4 * HW * sizeof(float), 1, stream, err);
        if (!st) st = ck_cuda_event_record(s->ev[0], stream, err);
        if (!st) st = ck_cuda_convert(stage, CK_F32, ck_plan_buffer(s->plan, 1), s->dt, 4 * HW, stream, err);
    }
    if (st) return st;
    /* Eager on the first frame, and whenever taps or profiling watch the
     * ops; from the second frame on the pass is a CUDA graph: captured
     * once (the arena's addresses are the same every frame), then replayed. */
    const int eager = s->tap || s->prof || s->no_graph || (!s->graph && s->frames == 0);
    float *res = NULL;
    if (eager || !s->graph) {
        int capturing = 0;
        if (!eager) capturing = ck_cuda_capture_begin(stream, NULL) == CKEY_OK;
        ck_fwd f = {&s->dm, &ck_cuda_ops, (ck_backend *)(void *)&s->cs, s->plan, s->opt.size, s->dpos,
                    s->opt.refiner_strength, s->tap ? cuda_tap : NULL, s, s->prof, cuda_sync_quiet,
                    (int)ck_dtype_size(s->dt), {0}, ck_cuda_conv_shift_rows(s->opt.size),
                    ck_cuda_conv_loads_affine(s->dm.cfg.ref_dim, s->dt)};
        for (int i = 0; i < CK_PHASE_COUNT; i++) f.scratch_bytes[i] = s->phase_scratch[i];
        res = ck_forward(&f);
        if (capturing) {
            ckey_error ce;
            if (ck_cuda_capture_end(stream, &s->graph, &ce) || s->cs.status) {
                /* the capture did not take: stay eager, run this frame again eagerly */
                ck_cuda_graph_free(s->graph);
                s->graph = NULL;
                s->no_graph = 1;
                s->cs.status = CKEY_OK;
                ck_plan_begin_execute(s->plan, s->arena);
                res = ck_forward(&f);
            }
        }
        if (!ck_plan_replay_complete(s->plan) || !res)
            return ck_fail(err, CKEY_ERR_INTERNAL, "planner replay diverged from the recorded pass");
        if (s->cs.status) {
            if (err) *err = s->cs.err;
            return s->cs.status;
        }
        s->result = res;
    }
    if (!eager && s->graph && (st = ck_cuda_graph_launch(s->graph, stream, err))) return st;
    res = s->result;
    if ((st = ck_cuda_event_record(s->ev[1], stream, err))) return st;
    float *dst = s->io_out ? s->io_out : s->host_out;
    if ((st = ck_cuda_copy_async(dst, res, (size_t)4 * HW * sizeof(float), 0, stream, err))) return st;
    if ((st = ck_cuda_stream_sync(stream, err))) return st;
    s->frames++;
    if (out) {
        out->alpha = dst;
        out->fg = dst + HW;
        out->seconds = ck_now() - t0;
        out->device_seconds = ck_cuda_event_seconds(s->ev[0], s->ev[1]);
    }
    return CKEY_OK;
#else
    (void)s, (void)out;
    return ck_fail(err, CKEY_ERR_UNSUPPORTED, "this build has no CUDA backend");
#endif
}

static void cpu_tap(void *user, const char *name, const void *data, const int64_t *shape, int32_t ndim,
                    int elem_bytes) {
    const ckey_session *s = user;
    (void)elem_bytes; /* always 4 on the CPU */
    s->tap(s->tap_user, name, data, shape, ndim);
}

ckey_status ck_session_run(ckey_session *s, ckey_forward_result *out, ckey_error *err) {
    if (s->cuda) return cuda_run(s, out, err);
    double t0 = ck_now();
    ck_plan_begin_execute(s->plan, s->arena);
    void *scratch = ck_alloc(s->plan, s->scratch_bytes, "cpu scratch");
    if (scratch != s->be.scratch) return ck_fail(err, CKEY_ERR_INTERNAL, "planner replay diverged (scratch)");
    ck_fwd f = {s->m, &ck_cpu_ops, &s->be, s->plan, s->opt.size,
                s->pos_resized ? s->pos_resized : s->m->pos_embed, s->opt.refiner_strength, s->tap ? cpu_tap : NULL,
                s, s->prof, NULL, (int)sizeof(float), {0}, 0, 0};
    float *res = ck_forward(&f);
    if (!ck_plan_replay_complete(s->plan) || !res)
        return ck_fail(err, CKEY_ERR_INTERNAL, "planner replay diverged from the recorded pass");
    const int64_t HW = (int64_t)s->opt.size * s->opt.size;
    if (out) {
        out->alpha = res;
        out->fg = res + HW;
        out->seconds = ck_now() - t0;
        out->device_seconds = out->seconds;
    }
    return CKEY_OK;
}

ckey_status ckey_session_forward(ckey_session *s, const float *input, ckey_forward_result *out,
                                 ckey_error *err) {
    if (!s || !input) return ck_fail(err, CKEY_ERR_INVALID_ARG, "ckey_session_forward: NULL argument");
    float *x = ck_session_input(s);
    if (x != input) memcpy(x, input, (size_t)4 * s->opt.size * s->opt.size * sizeof(float));
    return ck_session_run(s, out, err);
}

ckey_status ckey_session_forward_into(ckey_session *s, const float *input, float *output, ckey_forward_result *out,
                                      ckey_error *err) {
    if (!s || !input || !output) return ck_fail(err, CKEY_ERR_INVALID_ARG, "ckey_session_forward_into: NULL argument");
    const size_t n = (size_t)4 * s->opt.size * s->opt.size;
    ckey_forward_result r;
    ckey_status st;
    if (s->cuda) { /* straight from and to the caller's buffers */
        s->io_in = input;
        s->io_out = output;
        st = ck_session_run(s, &r, err);
        s->io_in = NULL;
        s->io_out = NULL;
    } else {
        float *x = ck_session_input(s);
        if (x != input) memcpy(x, input, n * sizeof(float));
        st = ck_session_run(s, &r, err);
        if (st == CKEY_OK) memcpy(output, r.alpha, n * sizeof(float)); /* alpha, then fg: one [4, S, S] block */
        r.alpha = output;
        r.fg = output + n / 4;
    }
    if (st == CKEY_OK && out) *out = r;
    return st;
}

void *ckey_session_host_alloc(ckey_session *s, size_t bytes) {
    if (!s || bytes == 0) return NULL;
#ifdef CK_HAVE_CUDA
    if (s->cuda) {
        void *p = NULL;
        if (ck_cuda_host_alloc(&p, bytes, NULL) == CKEY_OK) return p;
        return NULL;
    }
#endif
    void *p = NULL;
    return posix_memalign(&p, 64, bytes) ? NULL : p;
}

void ckey_session_host_free(ckey_session *s, void *p) {
    if (!s || !p) return;
#ifdef CK_HAVE_CUDA
    if (s->cuda) {
        ck_cuda_host_free(p);
        return;
    }
#endif
    free(p);
}

int64_t ckey_session_max_plate_pixels(const ckey_session *s) {
    (void)s;
    return CKEY_IMAGE_MAX_PIXELS;
}

ck_resize_mode ck_session_resize_back(const ckey_session *s) {
    return s->opt.resize_back == CKEY_RESIZE_BACK_BILINEAR ? CK_RESIZE_BILINEAR_AA : CK_RESIZE_LANCZOS4;
}

ckey_status ckey_session_key(ckey_session *s, const ckey_frame *fr, float *alpha_out, float *fg_out,
                             ckey_error *err) {
    if (!s || !fr || !fr->rgb || !fr->hint || !alpha_out || !fg_out)
        return ck_fail(err, CKEY_ERR_INVALID_ARG, "ckey_session_key: NULL argument");
    const int32_t w = fr->width, h = fr->height, S = s->opt.size;
    if (w < 1 || h < 1 || w > CKEY_IMAGE_MAX_SIDE || h > CKEY_IMAGE_MAX_SIDE ||
        (int64_t)w * h > CKEY_IMAGE_MAX_PIXELS)
        return ck_fail(err, CKEY_ERR_INVALID_ARG, "plate %d x %d: outside 1..%d per side, %lld pixels", w, h,
                       CKEY_IMAGE_MAX_SIDE, (long long)CKEY_IMAGE_MAX_PIXELS);
    /* The work buffers depend on the plate size: the first frame of a shot
     * sizes them, every later frame of that size reuses them. */
    const ck_resize_mode back = ck_session_resize_back(s);
    size_t need = CK_MAX(ck_preprocess_scratch_floats(h, w, S), ck_postprocess_scratch_floats(S, h, w, back));
    if (need == 0) return ck_fail(err, CKEY_ERR_INVALID_ARG, "plate %d x %d: cannot be resized to %d", w, h, S);
    if (need > s->pipe_floats) {
        float *p = realloc(s->pipe, need * sizeof(float));
        if (!p)
            return ck_fail(err, CKEY_ERR_NOMEM, "plate %d x %d: out of memory for %.1f MiB of resize buffers", w,
                           h, need * 4.0 / 1048576.0);
        s->pipe = p;
        s->pipe_floats = need;
    }
    float *x = ck_session_input(s);
    ckey_status st = ck_preprocess(fr->rgb, fr->hint, h, w, S, fr->input_is_linear, x, s->pipe);
    if (st) return ck_fail(err, st, "plate %d x %d: preprocessing failed", w, h);
    ckey_forward_result r;
    if ((st = ck_session_run(s, &r, err))) return st;
    st = ck_postprocess(r.alpha, r.fg, S, h, w, back, alpha_out, fg_out, s->pipe);
    if (st) return ck_fail(err, st, "plate %d x %d: postprocessing failed", w, h);
    return CKEY_OK;
}
