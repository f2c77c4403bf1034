/* The backend interface: a backend's lifecycle (this table) and its ops
 * (backend/ops.h). A session (src/model/session.c) drives any backend through
 * these entries alone:
 *
 *   check -> pass_params -> [plan the pass] -> weight_bytes
 *   create -> upload_weights -> alloc_workspace -> run, run, ... -> free
 *
 * Each backend lives wholly in its own folder (src/cpu, src/cuda) and exports
 * one ck_backend_i; ck_backend_find picks it by device kind. */
#ifndef CK_BACKEND_H
#define CK_BACKEND_H

#include "backend/ops.h"

/* The phases of a pass with a backend scratch of their own: the encoder and
 * the decoders, the refiner's stem conv. */
enum { CK_PHASE_ENCODER, CK_PHASE_STEM, CK_PHASE_COUNT };

/* A step of a backend's life that may take memory (creation, the weights,
 * the arena, an op of a pass, a graph): called after it, with its name. */
typedef void (*ck_trace_fn)(void *user, const char *step);

/* What a session asks of a backend. */
typedef struct ck_backend_config {
    int size;           /* network input side S */
    int threads;        /* CPU threads (>= 1) */
    int device_index;   /* GPU index */
    ck_dtype act;       /* activation type (and the CUDA backend's matrix weights) */
    int64_t io_elems;   /* fp32 elements of the network's input, and of its output */
    int in_buffer;      /* the plan buffer holding the pass's input tensor (activation type) */
    uint32_t debug_off; /* CKEY_DEBUG_CUDA_* bits: optimisations switched off (ckey_debug.h) */
    ck_schedule sched;  /* the pass's schedule (its scratch may depend on it) */
    int conv_precision; /* Cutie's conv GEMMs on the CUDA backend: CKEY_PRECISION_TF32 (TF32 tensor
                         * cores), CKEY_PRECISION_FP16 (inputs rounded to fp16, fp32 accumulation and
                         * output), else fp32 SGEMM; the CPU ignores it */
    int eager;          /* 1: every frame op by op, never a CUDA graph (a session under a memory
                         * budget: a graph's device memory, about 10 KiB a kernel node, is outside
                         * the plan) */
    ck_trace_fn trace;  /* optional (bench-budget --trace-memory): each step, on backends that
                         * trace (CUDA: not inside a graph capture) */
    void *trace_user;
} ck_backend_config;

/* What the forward pass needs to know of a backend, for its plan and its ops. */
typedef struct ck_pass_params {
    size_t pass_scratch;                  /* bytes live for the whole pass (plan buffer 0), or 0 */
    size_t phase_scratch[CK_PHASE_COUNT]; /* bytes per phase, allocated as the phase begins, or 0 */
    /* Where a residual block's conv2 writes: 0, over its input t (in place,
     * the CPU); else this many image rows before t, into a margin allocated
     * with t (the CUDA backend's banded conv needs no copies then). */
    int conv_shift_rows;
    /* 1: conv3x3 applies a pending GroupNorm + ReLU (in_a, in_b) as it loads
     * and leaves `in` as it was (the CUDA backend's tensor-core convs); the
     * stem's is then never applied in a pass of its own. 0: conv3x3 may apply
     * it to `in` in place (the CPU). */
    int conv_load_affine;
    /* Values a pixel of a band of the refiner input takes in the backend's
     * refiner_input_rows layout (ops.h); 0: 7, planes [7, n, S]. */
    int band_input_ch;
    /* Host bytes the pass keeps maps in (ck_schedule.c1_on_host: c1), or 0. */
    size_t host_map_bytes;
} ck_pass_params;

/* One forward on a backend. The network's pass is a callback: it issues the
 * ops over the arena (ck_plan_begin_execute done) and returns the fp32
 * output tensor in backend memory. */
typedef struct ck_run_args {
    ck_plan *plan;
    ck_tensor (*pass)(void *user, const ck_ops *ops, ck_backend *be);
    void *user;
    const float *in;  /* host fp32 input [io_elems]; NULL: it is in the backend's input() buffer.
                       * The backend writes it to plan buffer in_buffer before the pass; buffer 0,
                       * when it is a phase scratch, is free until the pass begins. */
    float *out;       /* host fp32 buffer for the output [io_elems]; NULL: the backend's own */
    int watched;      /* taps or profiling watch the ops: run them one by one (no graph replay) */
    /* 1 (a backend with a stream() only): `in` is fp32 [io_elems] in device memory, and the output
     * stays there: *result is the backend's device buffer, valid until the next run (`out` unused).
     * The frame path (pixel/devframe.c) does the plate-size work around the network on the device. */
    int device_io;
} ck_run_args;

struct ck_backend_i {
    const char *name; /* "cpu", "cuda" */
    const ck_ops *ops;
    /* Whether the backend can run a session of these options for model m
     * (need_device: on this machine now; planning alone does not need it),
     * and its activation type. */
    ckey_status (*check)(const ckey_model *m, const ckey_session_options *o, int need_device, ck_dtype *act,
                         ckey_error *err);
    /* Scratch and layout answers for the pass at bc. */
    void (*pass_params)(const ck_backend_config *bc, const ck_config *c, ck_pass_params *p);
    /* Bytes its copy of m's weights takes (pos-embed resized to S/4 included,
     * unless bc->sched.pos_streamed). */
    int64_t (*weight_bytes)(const ck_backend_config *bc, const ckey_model *m);
    /* Where a session's memory lives, for the plan of a whole run
     * (ckey_plan_run_memory): 1 when its weights and arena are device memory,
     * the loaded model's fp32 store staying in host memory beside them; 0
     * when they are host memory and the weights are views of that store. */
    int device_memory;
    /* 1: its scratch and ops follow ck_schedule.encoder_chunks (model.h) */
    int encoder_chunks;
    /* 1: its weights and patch_embed follow ck_schedule.pos_streamed (model.h) */
    int pos_streamed;
    /* 1: its ops read the input x after patch_embed only in its RGB planes
     * and its input has no copy elsewhere to keep whole (ck_schedule.input_rgb) */
    int input_rgb;
    /* Optional (NULL: none). Bytes of its memory kind the backend holds
     * beside the weights and the arena for the session's life (CUDA:
     * cuBLAS's workspace and the conv's sync ints): ckey_memory_plan.workspace_bytes. */
    int64_t (*workspace_bytes)(const ck_backend_config *bc);
    /* Host bytes the backend allocates outside its weights and arena: its
     * transfer buffers (CUDA: the page-locked input and output). */
    int64_t (*host_io_bytes)(const ck_backend_config *bc, const ck_config *c);

    ckey_status (*create)(const ck_backend_config *bc, ck_backend **out, ckey_error *err);
    /* Copy m's weights into backend memory and types; *view lives as long as be. */
    ckey_status (*upload_weights)(ck_backend *be, const ckey_model *m, const ck_weights **view, ckey_error *err);
    /* Allocate the arena for plan (ck_plan_arena_bytes) and the host buffers. */
    ckey_status (*alloc_workspace)(ck_backend *be, ck_plan *plan, ckey_error *err);
    /* Host buffer of io_elems floats the next run reads its input from. */
    float *(*input)(ck_backend *be);
    /* Run one forward: *result points at the host fp32 output (r->out when
     * given); seconds[0] is the wall time of the call, seconds[1] the time
     * on the device, input and output transfers excluded (the CPU: the same),
     * seconds[2] and [3] the device's time in the input's upload and the
     * output's download (0 on the CPU and where there is none). */
    ckey_status (*run)(ck_backend *be, const ck_run_args *r, const float **result, double seconds[4],
                       ckey_error *err);
    /* Host memory the backend transfers from fastest (pinned on CUDA). */
    void *(*host_alloc)(ck_backend *be, size_t bytes);
    void (*host_free)(ck_backend *be, void *p);
    /* The backend's CPU threads, which work around the network may share
     * (ck_pool_for takes jobs from several threads); NULL when it has none. */
    ck_pool *(*host_pool)(ck_backend *be);
    /* The device stream its runs are queued on (a cudaStream_t), for work
     * around the network on the same device; NULL: a host backend (no entry). */
    void *(*stream)(ck_backend *be);
    void (*free)(ck_backend *be);

    /* Cutie's ops (ck_ops.set_workspace): bytes of scratch that ops within
     * `needs` take on this backend; NULL where the backend has no Cutie ops. */
    size_t (*ops_workspace_bytes)(const ck_backend_config *bc, const ck_op_needs *needs);
    /* Memory the ops work on (the tracker's buffers): host memory for the
     * CPU, device memory for CUDA; NULL on failure. */
    void *(*mem_alloc)(ck_backend *be, size_t bytes);
    void (*mem_free)(ck_backend *be, void *p);
    /* Optional (NULL: ops cannot fail). Wait for the ops issued so far, then
     * the first failure among them (its message in *err) and forget it. */
    ckey_status (*ops_status)(ck_backend *be, ckey_error *err);
};

/* The backend for a device kind, or NULL when this build has none. */
const ck_backend_i *ck_backend_find(ckey_device_kind kind);

#endif
