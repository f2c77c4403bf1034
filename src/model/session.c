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

/* The pass on no backend: records its allocations into plan. */
static ckey_status plan_pass(const ckey_model *m, const ckey_session_options *o, const ck_backend_config *bc,
                             const ck_pass_params *pp, ck_plan *plan, ckey_error *err) {
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
    ck_forward(&f);
    return ck_plan_finish(plan, err);
}

static void fill_plan(const ckey_model *m, const ck_backend_i *bi, const ck_backend_config *bc,
                      const ck_pass_params *pp, const ck_plan *plan, ckey_memory_plan *mp) {
    memset(mp, 0, sizeof *mp);
    mp->weight_bytes = bi->weight_bytes(bc, m);
    mp->arena_bytes = (int64_t)ck_plan_arena_bytes(plan);
    size_t scratch = pp->pass_scratch;
    for (int i = 0; i < CK_PHASE_COUNT; i++) scratch = CK_MAX(scratch, pp->phase_scratch[i]);
    mp->scratch_bytes = (int64_t)scratch;
    mp->peak_bytes = mp->weight_bytes + mp->arena_bytes;
    mp->num_buffers = ck_plan_num_buffers(plan);
    mp->naive_bytes = (int64_t)ck_plan_naive_bytes(plan);
}

/* CKEY_ERR_BUDGET when the plan is over the options' budget, every figure
 * in a unit that shows it (a budget of 1K is "1.0 KiB", not "0.0 MiB"). */
static ckey_status check_budget(const ckey_session_options *o, const ckey_memory_plan *mp, ckey_error *err) {
    if (o->memory_budget <= 0 || mp->peak_bytes <= o->memory_budget) return CKEY_OK;
    char peak[32], weights[32], arena[32], limit[32];
    return ck_fail(err, CKEY_ERR_BUDGET, "size %d needs %s (weights %s + arena %s), over the budget of %s",
                   (int)o->size, ck_format_bytes(peak, sizeof peak, mp->peak_bytes),
                   ck_format_bytes(weights, sizeof weights, mp->weight_bytes),
                   ck_format_bytes(arena, sizeof arena, mp->arena_bytes),
                   ck_format_bytes(limit, sizeof limit, o->memory_budget));
}

/* Validate the options and record a plan without creating a backend (the
 * planning-only entry points). The caller frees *plan. `bi_out` and
 * `bc_out` (may be NULL) receive the backend and its configuration. */
static ckey_status plan_only(const ckey_model *m, const ckey_session_options *opt, ckey_session_options *o,
                             ck_plan **plan, ckey_memory_plan *mp, const ck_backend_i **bi_out,
                             ck_backend_config *bc_out, ckey_error *err) {
    *plan = NULL;
    if (opt) *o = *opt; else ckey_session_options_default(o);
    const ck_backend_i *bi;
    ck_backend_config bc;
    ck_pass_params pp;
    ckey_status st = check_options(m, o, 0, 0, &bi, &bc, err);
    if (!st) st = ck_plan_create(plan, err);
    if (!st) {
        bi->pass_params(&bc, &m->cfg, &pp);
        st = plan_pass(m, o, &bc, &pp, *plan, err);
    }
    if (!st) fill_plan(m, bi, &bc, &pp, *plan, mp);
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
    ckey_status st = plan_only(m, opt, &o, &plan, &out->plan, &bi, &bc, err);
    if (!st) {
        out->device_memory = bi->device_memory;
        out->host_io_bytes = bi->host_io_bytes(&bc);
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
    ckey_status st = plan_only(m, opt, &o, &plan, mp, NULL, NULL, err);
    if (!st) st = check_budget(&o, mp, err);
    ck_plan_free(plan);
    return st;
}

ckey_status ckey_plan_memory_print(const ckey_model *m, const ckey_session_options *opt, FILE *out,
                                   ckey_error *err) {
    if (!m || !out) return ck_fail(err, CKEY_ERR_INVALID_ARG, "ckey_plan_memory_print: NULL argument");
    ckey_session_options o;
    ck_plan *plan;
    ckey_memory_plan mp;
    ckey_status st = plan_only(m, opt, &o, &plan, &mp, NULL, NULL, err);
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
    if (opt) s->opt = *opt; else ckey_session_options_default(&s->opt);
    ckey_status st = check_options(m, &s->opt, 1, cuda_off, &s->bi, &s->bc, err);
    if (!st) st = ck_plan_create(&s->plan, err);
    if (!st) {
        s->bi->pass_params(&s->bc, &m->cfg, &s->pp);
        st = plan_pass(m, &s->opt, &s->bc, &s->pp, s->plan, err);
    }
    if (!st) {
        fill_plan(m, s->bi, &s->bc, &s->pp, s->plan, &s->mp);
        st = check_budget(&s->opt, &s->mp, err);
    }
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
    return ck_forward(&f);
}

static ckey_status run(ckey_session *s, const float *in, float *outbuf, int device_io, ckey_forward_result *out,
                       ckey_error *err) {
    ck_run_args r = {s->plan, session_pass, s, in, outbuf, s->tap || s->prof, device_io};
    const float *res = NULL;
    double sec[2] = {0, 0};
    ckey_status st = s->bi->run(s->be, &r, &res, sec, err);
    if (st) return st;
    if (out) {
        const int64_t HW = (int64_t)s->opt.size * s->opt.size;
        out->alpha = (float *)res;
        out->fg = (float *)res + HW;
        out->seconds = sec[0];
        out->device_seconds = sec[1];
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
