#ifndef CK_GREENFORMER_H
#define CK_GREENFORMER_H

#include "model/model.h"
#include "backend/ops.h"

/* The phases of a pass with a backend scratch of their own (ck_fwd.scratch_bytes):
 * the encoder and the decoders, the refiner's stem conv, the refiner's residual
 * blocks. */
enum { CK_PHASE_ENCODER, CK_PHASE_STEM, CK_PHASE_COUNT };

/* One forward pass. With ops == NULL nothing is computed: the pass only
 * records its allocations (the planning run). */
typedef struct ck_fwd {
    const ckey_model *m;
    const ck_ops *ops;
    ck_backend *be;
    ck_plan *plan;
    int S;
    const float *pos;     /* pos-embed on the S/4 grid, [(S/4)^2, E] */
    float strength;       /* refiner strength */
    /* optional: stage outputs; elem_bytes is 4 (fp32) or 2 (the device's 16-bit activations) */
    void (*tap)(void *user, const char *name, const void *data, const int64_t *shape, int32_t ndim, int elem_bytes);
    void *tap_user;
    double *prof;         /* optional: seconds per op kind, [CK_PROF_COUNT] */
    void (*sync)(void);   /* optional: wait for the device, so profiled times are real */
    int act_bytes;        /* bytes per activation element: 4 (fp32) or 2 (fp16/bf16 on CUDA) */
    /* optional: the backend's scratch per phase, in bytes (0: none). ck_forward
     * allocates each phase's scratch from the plan as the phase begins and
     * releases it as it ends (so later buffers reuse its bytes), and hands it
     * to ops->set_scratch: (ptr, bytes) at the start, (NULL, 0) at the end.
     * Backends that keep one pass-long scratch of their own (the CPU) leave
     * these 0. The encoder's scratch, when there is one, is the pass's first
     * allocation (plan buffer 0). */
    size_t scratch_bytes[CK_PHASE_COUNT];
    /* Where a residual block's conv2 writes: 0, over its input t (in place,
     * the CPU); else this many image rows before t, into a margin allocated
     * with t (the CUDA backend's banded conv needs no copies then:
     * ck_cuda_conv_shift_rows). */
    int conv_shift_rows;
    /* 1: conv3x3 applies a pending GroupNorm + ReLU (in_a, in_b) as it loads
     * and leaves `in` as it was (the CUDA backend's tensor-core convs); the
     * stem's is then never applied in a pass of its own: the first residual
     * block's conv1 and residual apply it (ck_cuda_conv_loads_affine). 0:
     * conv3x3 may apply it to `in` in place (the CPU). */
    int conv_load_affine;
} ck_fwd;

/* Profile buckets (wall time of each op kind, summed over the pass). */
enum { CK_PROF_PATCH, CK_PROF_MU_ATTN, CK_PROF_LAYERNORM, CK_PROF_LINEAR, CK_PROF_POOL_LINEAR,
       CK_PROF_ATTENTION, CK_PROF_MLP, CK_PROF_REROLL, CK_PROF_DECODER, CK_PROF_REFINER_CONV,
       CK_PROF_REFINER_OTHER, CK_PROF_COUNT };
extern const char *const ck_prof_names[CK_PROF_COUNT];

/* Returns the [4, S, S] fp32 result (alpha, then fg) inside the arena. The
 * first allocation of the pass (the second, after the encoder's scratch, when
 * scratch_bytes[CK_PHASE_ENCODER] is set) is the [4, S, S] input buffer
 * (activation type): x is read from it (callers write the input there before
 * the pass).
 * Activations (tokens, features, refiner maps) are act_bytes per element;
 * logits, GroupNorm statistics and affines and the output are fp32. */
float *ck_forward(const ck_fwd *f);

#endif
