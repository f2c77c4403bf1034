/* The CPU backend's lifecycle (backend/backend.h): a thread pool, the
 * model's own fp32 weights (pos-embed resized to the session's grid, unless
 * the schedule streams it: ck_schedule.pos_streamed), and
 * one host arena holding the pass's buffers and the ops' scratch. */
#include <stdlib.h>
#include <string.h>

#include "cpu/cpu.h"

static ckey_status cpu_check(const ckey_model *m, const ckey_session_options *o, int need_device, ck_dtype *act,
                             ckey_error *err) {
    (void)m, (void)need_device;
    if (o->precision == CKEY_PRECISION_FP16 || o->precision == CKEY_PRECISION_BF16)
        return ck_fail(err, CKEY_ERR_UNSUPPORTED, "precision %s: the CPU backend runs fp32 only (use --device cuda)",
                       ckey_precision_name(o->precision));
    *act = CK_F32;
    return CKEY_OK;
}

static void cpu_pass_params(const ck_backend_config *bc, const ck_config *c, ck_pass_params *p) {
    memset(p, 0, sizeof *p);
    size_t per_thread, shared;
    ck_cpu_scratch_floats(c, bc->size, bc->threads, &bc->sched, &per_thread, &shared);
    p->pass_scratch = ((size_t)bc->threads * per_thread + shared) * sizeof(float);
}

/* The resized pos-embed's bytes: none where the stored grid is S/4 or the
 * schedule resizes it row by row in patch_embed. */
static size_t pos_bytes(const ck_config *c, const ck_backend_config *bc) {
    const int g = bc->size / c->patch_stride;
    return g == c->pos_grid || bc->sched.pos_streamed ? 0 : (size_t)g * g * c->embed_dim * sizeof(float);
}

static int64_t cpu_weight_bytes(const ck_backend_config *bc, const ckey_model *m) {
    return (int64_t)(m->store_floats * sizeof(float) + pos_bytes(&m->cfg, bc));
}

/* The input is plan buffer CK_INPUT_BUFFER in the arena and the output
 * another: no transfer buffers. */
static int64_t cpu_host_io_bytes(const ck_backend_config *bc, const ck_config *c) {
    (void)bc;
    return 0;
}

static ckey_status cpu_create(const ck_backend_config *bc, ck_backend **out, ckey_error *err) {
    ck_cpu *b = calloc(1, sizeof *b);
    if (!b) return ck_fail(err, CKEY_ERR_NOMEM, "out of memory");
    b->base.iface = &ck_cpu_backend;
    b->cfg = *bc;
    ck_gemm_init();
    ckey_status st = ck_pool_create(bc->threads, &b->pool, err);
    if (st) {
        free(b);
        return st;
    }
    b->threads = ck_pool_size(b->pool);
    *out = &b->base;
    return CKEY_OK;
}

static ckey_status cpu_upload_weights(ck_backend *be, const ckey_model *m, const ck_weights **view, ckey_error *err) {
    ck_cpu *b = (ck_cpu *)(void *)be;
    b->w = m->w;
    b->mcfg = &m->cfg;
    const size_t pb = pos_bytes(&m->cfg, &b->cfg);
    if (pb) {
        b->pos_resized = malloc(pb);
        if (!b->pos_resized) return ck_fail(err, CKEY_ERR_NOMEM, "out of memory for the resized pos-embed");
        ck_pos_embed_resize(ck_wf32(m->w.pos_embed), m->cfg.pos_grid, m->cfg.embed_dim, b->pos_resized,
                            b->cfg.size / m->cfg.patch_stride);
        b->w.pos_embed = ck_weight_of(b->pos_resized, CK_F32);
    }
    *view = &b->w;
    return CKEY_OK;
}

/* The arena; the ops' scratch is the pass's first buffer (pass_scratch):
 * each thread's slice, then the shared part. */
static ckey_status cpu_alloc_workspace(ck_backend *be, ck_plan *plan, ckey_error *err) {
    ck_cpu *b = (ck_cpu *)(void *)be;
    const size_t bytes = ck_plan_arena_bytes(plan);
    b->arena = aligned_alloc(64, (bytes + 63) / 64 * 64);
    if (!b->arena)
        return ck_fail(err, CKEY_ERR_NOMEM, "size %d: could not allocate the %.1f MiB arena", b->cfg.size,
                       bytes / 1048576.0);
    b->plan = plan;
    size_t shared;
    ck_cpu_scratch_floats(b->mcfg, b->cfg.size, b->threads, &b->cfg.sched, &b->per_thread, &shared);
    ck_plan_begin_execute(plan, b->arena);
    b->scratch = ck_plan_buffer(plan, 0);
    b->shared = b->scratch + (size_t)b->threads * b->per_thread;
    b->shared_floats = shared;
    return CKEY_OK;
}

/* The input buffer is the pass's input tensor in the arena. */
static float *cpu_input(ck_backend *be) {
    ck_cpu *b = (ck_cpu *)(void *)be;
    ck_plan_begin_execute(b->plan, b->arena);
    return ck_plan_buffer(b->plan, b->cfg.in_buffer);
}

static ckey_status cpu_run(ck_backend *be, const ck_run_args *r, const float **result, double seconds[4],
                           ckey_error *err) {
    ck_cpu *b = (ck_cpu *)(void *)be;
    const double t0 = ck_now();
    const size_t io = (size_t)b->cfg.io_elems * sizeof(float);
    float *x = cpu_input(be);
    if (r->in && r->in != x) memcpy(x, r->in, io);
    ck_plan_begin_execute(r->plan, b->arena);
    ck_tensor out = r->pass(r->user, &ck_cpu_ops, be);
    if (!ck_plan_replay_complete(r->plan) || !out.data)
        return ck_fail(err, CKEY_ERR_INTERNAL, "planner replay diverged from the recorded pass");
    const float *res = ck_f32(out);
    if (r->out) {
        memcpy(r->out, res, io);
        res = r->out;
    }
    *result = res;
    seconds[0] = seconds[1] = ck_now() - t0;
    seconds[2] = seconds[3] = 0;
    return CKEY_OK;
}

static void *cpu_host_alloc(ck_backend *be, size_t bytes) {
    (void)be;
    void *p = NULL;
    return posix_memalign(&p, 64, bytes) ? NULL : p;
}

static void cpu_host_free(ck_backend *be, void *p) {
    (void)be;
    free(p);
}

static ck_pool *cpu_host_pool(ck_backend *be) { return ((ck_cpu *)(void *)be)->pool; }

static void cpu_free(ck_backend *be) {
    ck_cpu *b = (ck_cpu *)(void *)be;
    if (!b) return;
    ck_pool_free(b->pool);
    free(b->arena);
    free(b->pos_resized);
    free(b);
}

const ck_backend_i ck_cpu_backend = {
    .name = "cpu",
    .ops = &ck_cpu_ops,
    .check = cpu_check,
    .pass_params = cpu_pass_params,
    .weight_bytes = cpu_weight_bytes,
    .device_memory = 0,
    .pos_streamed = 1,
    .input_rgb = 1,
    .host_io_bytes = cpu_host_io_bytes,
    .create = cpu_create,
    .host_pool = cpu_host_pool,
    .upload_weights = cpu_upload_weights,
    .alloc_workspace = cpu_alloc_workspace,
    .input = cpu_input,
    .run = cpu_run,
    .host_alloc = cpu_host_alloc,
    .host_free = cpu_host_free,
    .mem_alloc = cpu_host_alloc,
    .mem_free = cpu_host_free,
    .free = cpu_free,
    .ops_workspace_bytes = ck_cpu_ops_workspace_bytes,
};
