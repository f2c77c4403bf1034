#ifndef CK_GREENFORMER_H
#define CK_GREENFORMER_H

#include "model/model.h"
#include "backend/backend.h"

/* One forward pass. With ops == NULL nothing is computed: the pass only
 * records its allocations (the planning run). */
typedef struct ck_fwd {
    const ck_config *c;
    const ck_weights *w;  /* the backend's copy (pos_embed resized to S/4); the model's own when planning */
    const ck_ops *ops;
    ck_backend *be;
    ck_plan *plan;
    int S;
    float strength;       /* refiner strength */
    ck_dtype act;         /* activation type: CK_F32, or CK_F16 / CK_BF16 on CUDA */
    /* optional: stage outputs (t in backend memory; fp32 or act) */
    void (*tap)(void *user, const char *name, ck_tensor t, const int64_t *shape, int32_t ndim);
    void *tap_user;
    double *prof;         /* optional: seconds per op kind, [CK_PROF_COUNT] (ops->sync first, when set) */
    ck_pass_params p;     /* the backend's answers for this pass (backend/backend.h) */
    ck_schedule sched;    /* how the pass runs (model.h) */
    double *cost;         /* optional, planning pass: += the refiner's conv work (MACs) */
    int64_t *marks;       /* optional, planning pass: [CK_STAGE_COUNT + 1] plan events where the
                           * encoder, the decoders and the refiner begin, and the pass's end */
} ck_fwd;

enum { CK_STAGE_ENCODER, CK_STAGE_DECODERS, CK_STAGE_REFINER, CK_STAGE_COUNT };

/* The rows a refiner band grows by, both sides together (twice the sum of
 * the nine convs' dilations: 62): a band of B output rows computes its
 * first conv on up to B + this many rows. */
int ck_refiner_band_halo(void);

/* Whether the backend's op table runs schedule s (the banded ops are optional). */
int ck_schedule_supported(const ck_ops *ops, const ck_schedule *s);

/* Host memory a pass under schedule s keeps maps in (ck_pass_params.host_map_bytes):
 * c1 (c1_on_host) at offset 0, then x's RGB planes (x_on_host; all four
 * planes under encoder_band) at ck_x_host_offset, then the output [4, S, S]
 * in fp32 (out_on_host). */
size_t ck_host_map_bytes(const ck_config *c, int S, const ck_schedule *s, ck_dtype act);
size_t ck_x_host_offset(const ck_config *c, int S, const ck_schedule *s, ck_dtype act);

/* Profile buckets (wall time of each op kind, summed over the pass). */
enum { CK_PROF_PATCH, CK_PROF_MU_ATTN, CK_PROF_LAYERNORM, CK_PROF_LINEAR, CK_PROF_POOL_LINEAR,
       CK_PROF_ATTENTION, CK_PROF_MLP, CK_PROF_REROLL, CK_PROF_DECODER, CK_PROF_REFINER_CONV,
       CK_PROF_REFINER_OTHER, CK_PROF_COUNT };
extern const char *const ck_prof_names[CK_PROF_COUNT];

/* Returns the [4, S, S] fp32 result (alpha, then fg) inside the arena. Plan
 * buffer CK_INPUT_BUFFER is the [4, S, S] input (activation type): x is read
 * from it (the backend writes the input there before the pass). Buffer 0 is
 * the pass scratch (ck_pass_params.pass_scratch, the CPU's) or the encoder's
 * phase scratch (the CUDA backend's), whichever the backend asked for.
 * Activations (tokens, features, refiner maps) are of type act; logits,
 * GroupNorm statistics and affines and the output are fp32. */
enum { CK_INPUT_BUFFER = 1 };
ck_tensor ck_forward(const ck_fwd *f);

#endif
