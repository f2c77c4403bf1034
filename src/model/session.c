/* Sessions: plan once (the forward pass on no backend), then drive one
 * backend through its interface (backend/backend.h): create, upload the
 * weights, allocate the arena, run frames with no allocation. Nothing here
 * knows which backend it drives. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "ckey_debug.h"
#include "model/session.h"
#include "model/greenformer.h"

struct ckey_session {
    const ckey_model *m;
    ckey_session_options opt;
    const ck_backend_i *bi;
    ck_backend *be;
    ck_backend_config bc;
    ck_pass_params pp;
    const ck_weights *w;  /* the backend's copy */
    ck_plan *plan;
    ckey_memory_plan mp;
    ckey_tap_fn tap;
    void *tap_user;
    float *tap_host;      /* taps: the tensor read back as fp32 (debug path) */
    size_t tap_host_floats;
    double *prof;
    float *work;          /* host scratch for per-plate work (ck_session_work) */
    size_t work_floats;
};

void ck_session_set_profile(ckey_session *s, double *prof) { s->prof = prof; }

ck_backend *ck_session_backend(const ckey_session *s) { return s ? s->be : NULL; }

ck_pool *ck_session_pool(const ckey_session *s) {
    return s && s->be && s->be->iface->host_pool ? s->be->iface->host_pool(s->be) : NULL;
}

const ckey_session_options *ck_session_options(const ckey_session *s) { return &s->opt; }

const char *ckey_precision_name(ckey_precision p) {
    switch (p) {
    case CKEY_PRECISION_FP32: return "fp32";
    case CKEY_PRECISION_FP16: return "fp16";
    case CKEY_PRECISION_BF16: return "bf16";
    case CKEY_PRECISION_TF32: return "tf32";
    default: return "default";
    }
}

ckey_precision ckey_session_precision(const ckey_session *s) {
    if (!s) return CKEY_PRECISION_DEFAULT;
    switch (s->bc.act) {
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

static int resolve_threads(int t) {
    if (t > 0) return t;
    long n = sysconf(_SC_NPROCESSORS_ONLN);
    return n > 0 ? (int)n : 1;
}

static const char *device_name(ckey_device_kind k) { return k == CKEY_DEVICE_CUDA ? "cuda" : "cpu"; }

/* Validate the options, find the backend and fill its config. need_device:
 * a session needs the device itself; a plan alone does not. */
static ckey_status check_options(const ckey_model *m, const ckey_session_options *o, int need_device,
                                 uint32_t debug_off, const ck_backend_i **bi, ck_backend_config *bc, ckey_error *err) {
    ckey_status st = ck_config_check_size(&m->cfg, o->size, err);
    if (st) return st;
    if (o->threads < 0 || o->threads > 1024)
        return ck_fail(err, CKEY_ERR_INVALID_ARG, "threads %d: must be 0 (all cores) to 1024", o->threads);
    if (o->device != CKEY_DEVICE_CPU && o->device != CKEY_DEVICE_CUDA)
        return ck_fail(err, CKEY_ERR_INVALID_ARG, "unknown device kind %d", (int)o->device);
    if (!(o->refiner_strength >= 0.0f && o->refiner_strength <= 100.0f))
        return ck_fail(err, CKEY_ERR_INVALID_ARG, "refiner strength %g: must be within 0..100",
                       (double)o->refiner_strength);
    if (o->memory_budget < 0) return ck_fail(err, CKEY_ERR_INVALID_ARG, "memory budget must not be negative");
    if (o->precision == CKEY_PRECISION_TF32)
        return ck_fail(err, CKEY_ERR_UNSUPPORTED, "precision tf32 is the tracker's only (keyer: fp32, fp16, bf16)");
    if (o->precision < CKEY_PRECISION_DEFAULT || o->precision > CKEY_PRECISION_BF16)
        return ck_fail(err, CKEY_ERR_INVALID_ARG, "unknown precision %d", (int)o->precision);
    if (o->resize_back != CKEY_RESIZE_BACK_LANCZOS4 && o->resize_back != CKEY_RESIZE_BACK_BILINEAR)
        return ck_fail(err, CKEY_ERR_INVALID_ARG, "resize_back %d: expected CKEY_RESIZE_BACK_LANCZOS4 or _BILINEAR",
                       (int)o->resize_back);
    *bi = ck_backend_find(o->device);
    if (!*bi)
        return ck_fail(err, CKEY_ERR_UNSUPPORTED, "%s:%d: this build has no %s backend", device_name(o->device),
                       o->device_index, device_name(o->device));
    memset(bc, 0, sizeof *bc);
    if ((st = (*bi)->check(m, o, need_device, &bc->act, err))) return st;
    bc->size = o->size;
    bc->threads = resolve_threads(o->threads);
    bc->device_index = o->device_index;
    bc->io_elems = (int64_t)4 * o->size * o->size;
    bc->in_buffer = CK_INPUT_BUFFER;
    bc->debug_off = debug_off;
    return CKEY_OK;
}

/* The pass on no backend under bc's schedule: records its allocations into
 * plan; *cost = the refiner's conv work, marks = the stages' first events. */
static ckey_status plan_pass(const ckey_model *m, const ckey_session_options *o, const ck_backend_config *bc,
                             const ck_pass_params *pp, ck_plan *plan, double *cost, int64_t *marks,
                             ckey_error *err) {
    ck_plan_begin_record(plan);
    ck_fwd f;
    memset(&f, 0, sizeof f);
    f.c = &m->cfg;
    f.w = &m->w;
    f.plan = plan;
    f.S = o->size;
    f.strength = o->refiner_strength;
    f.act = bc->act;
    f.p = *pp;
    f.sched = bc->sched;
    f.cost = cost;
    f.marks = marks;
    *cost = 0;
    ck_forward(&f);
    return ck_plan_finish(plan, err);
}

/* The CKEY_PLAN_* bits of schedule s. */
static int32_t streamed_bits(const ck_schedule *s) {
    return (s->pos_streamed ? CKEY_PLAN_POS_STREAMED : 0) | (s->qkv_streamed ? CKEY_PLAN_QKV_STREAMED : 0) |
           (s->decoder_band > 0 ? CKEY_PLAN_DECODER_BANDS : 0) | (s->transition_from_map ? CKEY_PLAN_FROM_MAPS : 0) |
           (s->norm1_from_map ? CKEY_PLAN_NORM1_FROM_MAP : 0) | (s->input_rgb ? CKEY_PLAN_INPUT_RGB : 0) |
           (s->reroll_in_place ? CKEY_PLAN_REROLL_IN_PLACE : 0) | (s->encoder_band > 0 ? CKEY_PLAN_ENCODER_BANDS : 0) |
           (s->out_in_input ? CKEY_PLAN_OUT_IN_INPUT : 0) | (s->c1_bands ? CKEY_PLAN_C1_BANDS : 0) |
           (s->x_on_host ? CKEY_PLAN_X_ON_HOST : 0) | (s->out_on_host ? CKEY_PLAN_OUT_ON_HOST : 0);
}

static void fill_plan(const ckey_model *m, const ck_backend_i *bi, const ck_backend_config *bc,
                      const ck_pass_params *pp, const ck_plan *plan, const int64_t *marks, ckey_memory_plan *mp) {
    memset(mp, 0, sizeof *mp);
    mp->weight_bytes = bi->weight_bytes(bc, m);
    mp->arena_bytes = (int64_t)ck_plan_arena_bytes(plan);
    size_t scratch = pp->pass_scratch;
    for (int i = 0; i < CK_PHASE_COUNT; i++) scratch = CK_MAX(scratch, pp->phase_scratch[i]);
    mp->scratch_bytes = (int64_t)scratch;
    mp->workspace_bytes = bi->workspace_bytes ? bi->workspace_bytes(bc) : 0;
    mp->peak_bytes = mp->weight_bytes + mp->arena_bytes + mp->workspace_bytes;
    mp->num_buffers = ck_plan_num_buffers(plan);
    mp->naive_bytes = (int64_t)ck_plan_naive_bytes(plan);
    for (int i = 0; i < CK_STAGE_COUNT; i++)
        mp->stage_bytes[i] = (int64_t)ck_plan_live_peak(plan, marks[i], marks[i + 1]);
    mp->refiner_band = bc->sched.refiner_band;
    mp->encoder_chunks = CK_MAX(1, bc->sched.encoder_chunks);
    mp->c1_on_host = bc->sched.c1_on_host;
    mp->streamed = streamed_bits(&bc->sched);
}

/* Whether backend bi runs schedule s. */
static int schedule_ok(const ck_backend_i *bi, const ck_schedule *s) {
    return ck_schedule_supported(bi->ops, s) && (!s->pos_streamed || bi->pos_streamed) &&
           (!s->input_rgb || bi->input_rgb);
}

/* The schedules a session may run, fastest first: the refiner on whole maps,
 * then in bands of S/2, S/4, ... down to 8 rows while a band with its halo
 * (ck_refiner_band_halo) is shorter than the image; then the same after each
 * encoder step the backend takes: where it chunks its encoder
 * (ck_backend_i.encoder_chunks), the mask-unit attention in 4 and in 16
 * chunks of windows (at most one window a chunk: (S/32)^2 windows), then,
 * where it has to_host / from_host, with 16 chunks and c1 in host memory,
 * then also the pos-embed streamed (below), then in 64 chunks, then with
 * the input's hint plane released (below), then with the global
 * attention's qkv streamed, then the decoders in bands too, then c1 to and
 * from host memory in bands (reroll_rows), then the input's RGB planes in
 * host memory (refiner bands only), then the output too (finalize_rows,
 * host_ptr), then with the mask-unit blocks in bands (patch_embed_rows,
 * copy_rows) in place of c1 in host memory (a step that is an earlier one at this
 * S, the pos-embed having nothing to stream, is left out); where it
 * streams the
 * pos-embed (ck_backend_i.pos_streamed) and S/4 is not the stored grid,
 * that; then, where it has attention_qkv, with the global
 * attention's qkv streamed too; then, where it has decoder_fuse_rows, with
 * the decoders in bands of 64 rows as well; then, where it has
 * mask_unit_attention_map, with the stage transitions read from the maps;
 * then, where it has linear_maxpool_map and attention_qkv_map, with norm1
 * of the widening global block taken from the map; then, where its ops
 * allow it (ck_backend_i.input_rgb), with the input's hint plane released
 * after patch_embed; then, where it has
 * reroll_inplace, with the maps made in the tokens' buffers and the decoders
 * in bands of 16 rows; then, where it has patch_embed_rows and copy_rows,
 * with the mask-unit blocks in bands of 16 token rows and their maps made
 * again by the decoders; then, with the refiner in bands, also with the
 * deltas written into the input's buffer (out_in_input). */
enum { MAX_SCHEDULES = 192 };
static const ck_schedule encoder_steps[] = {
    {0}, {.encoder_chunks = 4}, {.encoder_chunks = 16}, {.encoder_chunks = 16, .c1_on_host = 1},
    {.encoder_chunks = 16, .c1_on_host = 1, .pos_streamed = 1},
    {.encoder_chunks = 64, .c1_on_host = 1, .pos_streamed = 1},
    {.encoder_chunks = 64, .c1_on_host = 1, .pos_streamed = 1, .input_rgb = 1},
    {.encoder_chunks = 64, .c1_on_host = 1, .pos_streamed = 1, .input_rgb = 1, .qkv_streamed = 1},
    {.encoder_chunks = 64, .c1_on_host = 1, .pos_streamed = 1, .input_rgb = 1, .qkv_streamed = 1, .decoder_band = 64},
    {.encoder_chunks = 64, .c1_on_host = 1, .pos_streamed = 1, .input_rgb = 1, .qkv_streamed = 1, .decoder_band = 64,
     .c1_bands = 1},
    {.encoder_chunks = 64, .c1_on_host = 1, .pos_streamed = 1, .input_rgb = 1, .qkv_streamed = 1, .decoder_band = 64,
     .c1_bands = 1, .x_on_host = 1},
    {.encoder_chunks = 64, .c1_on_host = 1, .pos_streamed = 1, .input_rgb = 1, .qkv_streamed = 1, .decoder_band = 64,
     .c1_bands = 1, .x_on_host = 1, .out_on_host = 1},
    {.encoder_chunks = 64, .pos_streamed = 1, .qkv_streamed = 1, .decoder_band = 64, .encoder_band = 16,
     .x_on_host = 1, .out_on_host = 1},
    {.pos_streamed = 1}, {.pos_streamed = 1, .qkv_streamed = 1},
    {.pos_streamed = 1, .qkv_streamed = 1, .decoder_band = 64},
    {.pos_streamed = 1, .qkv_streamed = 1, .decoder_band = 64, .transition_from_map = 1},
    {.pos_streamed = 1, .qkv_streamed = 1, .decoder_band = 64, .transition_from_map = 1, .norm1_from_map = 1},
    {.pos_streamed = 1, .qkv_streamed = 1, .decoder_band = 64, .transition_from_map = 1, .norm1_from_map = 1,
     .input_rgb = 1},
    {.pos_streamed = 1, .qkv_streamed = 1, .decoder_band = 16, .transition_from_map = 1, .norm1_from_map = 1,
     .input_rgb = 1, .reroll_in_place = 1},
    {.pos_streamed = 1, .qkv_streamed = 1, .decoder_band = 16, .transition_from_map = 1, .norm1_from_map = 1,
     .input_rgb = 1, .reroll_in_place = 1, .encoder_band = 16},
    {.pos_streamed = 1, .qkv_streamed = 1, .decoder_band = 16, .transition_from_map = 1, .norm1_from_map = 1,
     .input_rgb = 1, .reroll_in_place = 1, .encoder_band = 16, .out_in_input = 1}};
static int candidate_schedules(const ck_backend_i *bi, const ck_config *c, int S, ck_schedule *out) {
    int n = 0;
    const int64_t windows = (int64_t)(S / 32) * (S / 32);
    for (int k = 0; k < (int)CK_ARRAY_LEN(encoder_steps); k++) {
        ck_schedule s = encoder_steps[k];
        if (s.encoder_chunks > 1 && (!bi->encoder_chunks || s.encoder_chunks > windows)) continue;
        if (s.pos_streamed && S / c->patch_stride == c->pos_grid) s.pos_streamed = 0; /* nothing to stream */
        int seen = 0; /* a step that is an earlier one at this S */
        for (int j = 0; j < n && !seen; j++) seen = !memcmp(&out[j], &s, sizeof s);
        if (seen) continue;
        if (n >= MAX_SCHEDULES) continue;
        if (schedule_ok(bi, &s)) out[n++] = s; /* (out_in_input, x_on_host: in bands only) */
        for (int B = S / 2; B >= 8 && n < MAX_SCHEDULES; B /= 2) {
            s.refiner_band = B;
            if (B + ck_refiner_band_halo() < S && schedule_ok(bi, &s)) out[n++] = s;
        }
    }
    return n;
}

int ck_session_schedules(const ckey_model *m, const ckey_session_options *o, ck_schedule *out, int max) {
    const ck_backend_i *bi = ck_backend_find(o->device);
    ck_schedule all[MAX_SCHEDULES];
    ck_config dc;
    if (!m) ck_config_default(&dc);
    const int n = bi ? candidate_schedules(bi, m ? &m->cfg : &dc, o->size, all) : 0;
    for (int i = 0; i < n && i < max; i++) out[i] = all[i];
    return CK_MIN(n, max);
}

/* Plan bc's schedule (bc->sched) into plan and *mp; *work = the refiner's
 * work relative to whole maps. */
static ckey_status plan_schedule(const ckey_model *m, const ckey_session_options *o, const ck_backend_i *bi,
                                 const ck_backend_config *bc, ck_pass_params *pp, ck_plan *plan,
                                 ckey_memory_plan *mp, double *work, ckey_error *err) {
    int64_t marks[CK_STAGE_COUNT + 1] = {0};
    double cost = 0;
    bi->pass_params(bc, &m->cfg, pp);
    ckey_status st = plan_pass(m, o, bc, pp, plan, &cost, marks, err);
    if (st) return st;
    fill_plan(m, bi, bc, pp, plan, marks, mp);
    *work = cost;
    const ck_config *c = &m->cfg;
    const double whole = (double)o->size * o->size * 9 * c->ref_dim * (7 + 8.0 * c->ref_dim);
    mp->relative_work = cost / whole;
    return CKEY_OK;
}

ckey_status ck_session_plan_schedule(const ckey_model *m, const ckey_session_options *opt, const ck_schedule *sched,
                                     ckey_memory_plan *mp, ckey_error *err) {
    const ck_backend_i *bi;
    ck_backend_config bc;
    ck_pass_params pp;
    ck_plan *plan = NULL;
    double work;
    ckey_status st = check_options(m, opt, 0, 0, &bi, &bc, err);
    if (!st && !schedule_ok(bi, sched))
        st = ck_fail(err, CKEY_ERR_UNSUPPORTED, "the %s backend does not run this schedule", bi->name);
    if (!st) st = ck_plan_create(&plan, err);
    bc.sched = *sched;
    if (!st) st = plan_schedule(m, opt, bi, &bc, &pp, plan, mp, &work, err);
    if (!st)
        mp->min_budget_bytes = mp->peak_bytes, mp->min_budget_band = sched->refiner_band,
        mp->min_budget_chunks = mp->encoder_chunks, mp->min_budget_c1_on_host = mp->c1_on_host,
        mp->min_budget_streamed = mp->streamed;
    ck_plan_free(plan);
    return st;
}

/* Choose the schedule (bc->sched) and leave its plan in plan, mp and pp:
 * without a budget the fastest; with one the fastest whose peak fits it.
 * mp->min_budget_bytes is the leanest schedule's peak. *fits: whether the
 * chosen plan is within the budget (0: over it, the leanest planned). */
static ckey_status choose_schedule(const ckey_model *m, const ckey_session_options *o, const ck_backend_i *bi,
                                   ck_backend_config *bc, ck_pass_params *pp, ck_plan *plan, ckey_memory_plan *mp,
                                   int *fits, ckey_error *err) {
    ck_schedule cand[MAX_SCHEDULES];
    const int n = candidate_schedules(bi, &m->cfg, o->size, cand);
    int best = -1, lean = 0;
    double best_work = 0;
    /* the least refiner work; at equal work the fewest encoder chunks (the list's order) */
    int64_t lean_peak = 0;
    for (int i = 0; i < n; i++) {
        ckey_memory_plan cp;
        double work;
        bc->sched = cand[i];
        ckey_status st = plan_schedule(m, o, bi, bc, pp, plan, &cp, &work, err);
        if (st) return st;
        if (i == 0 || cp.peak_bytes < lean_peak) lean = i, lean_peak = cp.peak_bytes;
        const int ok = o->memory_budget <= 0 ? i == 0 : cp.peak_bytes <= o->memory_budget;
        if (ok && (best < 0 || work < best_work)) best = i, best_work = work;
    }
    *fits = best >= 0;
    if (best < 0) best = lean;
    double work;
    bc->sched = cand[best];
    ckey_status st = plan_schedule(m, o, bi, bc, pp, plan, mp, &work, err);
    if (st) return st;
    mp->min_budget_bytes = lean_peak;
    mp->min_budget_band = cand[lean].refiner_band;
    mp->min_budget_chunks = CK_MAX(1, cand[lean].encoder_chunks);
    mp->min_budget_c1_on_host = cand[lean].c1_on_host;
    mp->min_budget_streamed = streamed_bits(&cand[lean]);
    return CKEY_OK;
}

/* CKEY_ERR_BUDGET when no schedule fits the options' budget, every figure
 * in a unit that shows it (a budget of 1K is "1.0 KiB", not "0.0 MiB"). */
static ckey_status check_budget(const ckey_session_options *o, const ckey_memory_plan *mp, int fits,
                                ckey_error *err) {
    if (fits) return CKEY_OK;
    char peak[32], weights[32], arena[32], ws[48] = "", limit[32];
    if (mp->workspace_bytes > 0) {
        char w[32];
        snprintf(ws, sizeof ws, " + workspace %s", ck_format_bytes(w, sizeof w, mp->workspace_bytes));
    }
    return ck_fail(err, CKEY_ERR_BUDGET,
                   "size %d needs at least %s (%lld bytes: weights %s + arena %s%s, the leanest schedule), over "
                   "the budget of %s",
                   (int)o->size, ck_format_bytes(peak, sizeof peak, mp->min_budget_bytes),
                   (long long)mp->min_budget_bytes,
                   ck_format_bytes(weights, sizeof weights, mp->weight_bytes),
                   ck_format_bytes(arena, sizeof arena, mp->min_budget_bytes - mp->weight_bytes - mp->workspace_bytes),
                   ws, ck_format_bytes(limit, sizeof limit, o->memory_budget));
}

/* Validate the options and record a plan without creating a backend (the
 * planning-only entry points). The caller frees *plan. `bi_out` and
 * `bc_out` (may be NULL) receive the backend and its configuration. */
static ckey_status plan_only(const ckey_model *m, const ckey_session_options *opt, ckey_session_options *o,
                             ck_plan **plan, ckey_memory_plan *mp, const ck_backend_i **bi_out,
                             ck_backend_config *bc_out, int *fits_out, ckey_error *err) {
    *plan = NULL;
    if (opt) *o = *opt; else ckey_session_options_default(o);
    const ck_backend_i *bi;
    ck_backend_config bc;
    ck_pass_params pp;
    int fits = 1;
    ckey_status st = check_options(m, o, 0, 0, &bi, &bc, err);
    if (!st) st = ck_plan_create(plan, err);
    if (!st) st = choose_schedule(m, o, bi, &bc, &pp, *plan, mp, &fits, err);
    if (!st && fits_out) *fits_out = fits;
    if (!st && bi_out) *bi_out = bi;
    if (!st && bc_out) *bc_out = bc;
    return st;
}

ckey_status ck_plan_session_memory(const ckey_model *m, const ckey_session_options *opt, ck_session_memory *out,
                                   ckey_error *err) {
    ckey_session_options o;
    ck_plan *plan;
    const ck_backend_i *bi = NULL;
    ck_backend_config bc;
    memset(out, 0, sizeof *out);
    ckey_status st = plan_only(m, opt, &o, &plan, &out->plan, &bi, &bc, NULL, err);
    if (!st) {
        out->device_memory = bi->device_memory;
        out->host_io_bytes = bi->host_io_bytes(&bc, &m->cfg);
        /* the CPU's weights are views of the store, counted in plan.weight_bytes */
        const size_t floats = m->dec_raw_floats + (bi->device_memory ? m->store_floats : 0);
        out->model_host_bytes = (int64_t)(floats * sizeof(float));
    }
    ck_plan_free(plan);
    return st;
}

ckey_status ckey_plan_memory(const ckey_model *m, const ckey_session_options *opt, ckey_memory_plan *mp,
                             ckey_error *err) {
    if (!m || !mp) return ck_fail(err, CKEY_ERR_INVALID_ARG, "ckey_plan_memory: NULL argument");
    ckey_session_options o;
    ck_plan *plan;
    int fits = 1;
    ckey_status st = plan_only(m, opt, &o, &plan, mp, NULL, NULL, &fits, err);
    if (!st) st = check_budget(&o, mp, fits, err);
    ck_plan_free(plan);
    return st;
}

ckey_status ckey_plan_memory_print(const ckey_model *m, const ckey_session_options *opt, FILE *out,
                                   ckey_error *err) {
    if (!m || !out) return ck_fail(err, CKEY_ERR_INVALID_ARG, "ckey_plan_memory_print: NULL argument");
    ckey_session_options o;
    ck_plan *plan;
    ckey_memory_plan mp;
    ckey_status st = plan_only(m, opt, &o, &plan, &mp, NULL, NULL, NULL, err);
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
    return ck_session_create_schedule(m, opt, cuda_off, NULL, out, err);
}

ckey_status ck_session_create_schedule(const ckey_model *m, const ckey_session_options *opt, uint32_t cuda_off,
                                       const ck_schedule *sched, ckey_session **out, ckey_error *err) {
    return ck_session_create_traced(m, opt, cuda_off, sched, NULL, NULL, out, err);
}

ckey_status ck_session_create_traced(const ckey_model *m, const ckey_session_options *opt, uint32_t cuda_off,
                                     const ck_schedule *sched, ck_trace_fn trace, void *trace_user,
                                     ckey_session **out, ckey_error *err) {
    if (!out) return ck_fail(err, CKEY_ERR_INVALID_ARG, "ckey_session_create: out is NULL");
    *out = NULL;
    if (!m) return ck_fail(err, CKEY_ERR_INVALID_ARG, "ckey_session_create: model is NULL");
    ckey_session *s = calloc(1, sizeof *s);
    if (!s) return ck_fail(err, CKEY_ERR_NOMEM, "out of memory");
    s->m = m;
    if (opt) s->opt = *opt; else ckey_session_options_default(&s->opt);
    ckey_status st = check_options(m, &s->opt, 1, cuda_off, &s->bi, &s->bc, err);
    if (!st) st = ck_plan_create(&s->plan, err);
    int fits = 1;
    if (!st && sched) {
        /* a schedule forced (tests, benchmarks): planned alone, within the budget when there is one */
        double work;
        s->bc.sched = *sched;
        if (!schedule_ok(s->bi, sched))
            st = ck_fail(err, CKEY_ERR_UNSUPPORTED, "the %s backend does not run this schedule", s->bi->name);
        if (!st) st = plan_schedule(m, &s->opt, s->bi, &s->bc, &s->pp, s->plan, &s->mp, &work, err);
        if (!st)
            s->mp.min_budget_bytes = s->mp.peak_bytes, s->mp.min_budget_band = sched->refiner_band,
            s->mp.min_budget_chunks = s->mp.encoder_chunks, s->mp.min_budget_c1_on_host = s->mp.c1_on_host,
            s->mp.min_budget_streamed = s->mp.streamed;
        fits = s->opt.memory_budget <= 0 || s->mp.peak_bytes <= s->opt.memory_budget;
    } else if (!st) {
        st = choose_schedule(m, &s->opt, s->bi, &s->bc, &s->pp, s->plan, &s->mp, &fits, err);
    }
    if (!st) st = check_budget(&s->opt, &s->mp, fits, err);
    s->bc.trace = trace, s->bc.trace_user = trace_user;
    /* under a budget the plan is what the session takes: no CUDA graph, whose memory it does not count */
    s->bc.eager = s->opt.memory_budget > 0;
    if (!st) st = s->bi->create(&s->bc, &s->be, err);
    if (!st) st = s->bi->upload_weights(s->be, m, &s->w, err);
    if (!st) st = s->bi->alloc_workspace(s->be, s->plan, err);
    if (st) {
        ckey_session_free(s);
        return st;
    }
    *out = s;
    return CKEY_OK;
}

void ckey_session_free(ckey_session *s) {
    if (!s) return;
    if (s->be) s->bi->free(s->be);
    ck_plan_free(s->plan);
    free(s->tap_host);
    free(s->work);
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

float *ck_session_input(ckey_session *s) { return s->bi->input(s->be); }

/* A stage output: read back as fp32 into the session's host buffer, then to the user's tap. */
static void session_tap(void *user, const char *name, ck_tensor t, const int64_t *shape, int32_t ndim) {
    ckey_session *s = user;
    int64_t n = 1;
    for (int i = 0; i < ndim; i++) n *= shape[i];
    if ((size_t)n > s->tap_host_floats) {
        float *p = realloc(s->tap_host, (size_t)n * sizeof(float)); /* debug path only */
        if (!p) return;
        s->tap_host = p;
        s->tap_host_floats = (size_t)n;
    }
    s->bi->ops->read(s->be, t, n, s->tap_host);
    s->tap(s->tap_user, name, s->tap_host, shape, ndim);
}

/* The GreenFormer pass on a backend (ck_run_args.pass). */
static ck_tensor session_pass(void *user, const ck_ops *ops, ck_backend *be) {
    ckey_session *s = user;
    ck_fwd f;
    memset(&f, 0, sizeof f);
    f.c = &s->m->cfg;
    f.w = s->w;
    f.ops = ops;
    f.be = be;
    f.plan = s->plan;
    f.S = s->opt.size;
    f.strength = s->opt.refiner_strength;
    f.act = s->bc.act;
    f.tap = s->tap ? session_tap : NULL;
    f.tap_user = s;
    f.prof = s->prof;
    f.p = s->pp;
    f.sched = s->bc.sched;
    return ck_forward(&f);
}

static ckey_status run(ckey_session *s, const float *in, float *outbuf, int device_io, ckey_forward_result *out,
                       ckey_error *err) {
    ck_run_args r = {s->plan, session_pass, s, in, outbuf, s->tap || s->prof, device_io};
    const float *res = NULL;
    double sec[4] = {0, 0, 0, 0};
    ckey_status st = s->bi->run(s->be, &r, &res, sec, err);
    if (st) return st;
    if (out) {
        const int64_t HW = (int64_t)s->opt.size * s->opt.size;
        out->alpha = (float *)res;
        out->fg = (float *)res + HW;
        out->seconds = sec[0];
        out->device_seconds = sec[1];
        out->upload_seconds = sec[2];
        out->download_seconds = sec[3];
    }
    return CKEY_OK;
}

ckey_status ck_session_run(ckey_session *s, ckey_forward_result *out, ckey_error *err) {
    return run(s, NULL, NULL, 0, out, err);
}

ckey_status ckey_session_forward(ckey_session *s, const float *input, ckey_forward_result *out,
                                 ckey_error *err) {
    if (!s || !input) return ck_fail(err, CKEY_ERR_INVALID_ARG, "ckey_session_forward: NULL argument");
    return run(s, input, NULL, 0, out, err);
}

ckey_status ckey_session_forward_into(ckey_session *s, const float *input, float *output, ckey_forward_result *out,
                                      ckey_error *err) {
    if (!s || !input || !output) return ck_fail(err, CKEY_ERR_INVALID_ARG, "ckey_session_forward_into: NULL argument");
    return run(s, input, output, 0, out, err);
}

void *ck_session_stream(const ckey_session *s) {
    return s && s->bi->stream ? s->bi->stream(s->be) : NULL;
}

ckey_status ck_session_run_device(ckey_session *s, const float *dev_in, ckey_forward_result *out, ckey_error *err) {
    if (!ck_session_stream(s) || !dev_in)
        return ck_fail(err, CKEY_ERR_INVALID_ARG, "ck_session_run_device: no device session or input");
    return run(s, dev_in, NULL, 1, out, err);
}

void *ckey_session_host_alloc(ckey_session *s, size_t bytes) {
    if (!s || bytes == 0) return NULL;
    return s->bi->host_alloc(s->be, bytes);
}

void ckey_session_host_free(ckey_session *s, void *p) {
    if (!s || !p) return;
    s->bi->host_free(s->be, p);
}

float *ck_session_work(ckey_session *s, size_t floats, ckey_error *err) {
    if (floats > s->work_floats) {
        float *p = realloc(s->work, floats * sizeof(float));
        if (!p) {
            ck_fail(err, CKEY_ERR_NOMEM, "out of memory for %.1f MiB of work buffers", floats * 4.0 / 1048576.0);
            return NULL;
        }
        s->work = p;
        s->work_floats = floats;
    }
    return s->work;
}
