/*
 * ckey_debug.h -- test and debugging hooks of libckey. Not part of the stable
 * API: names and behaviour may change between versions. The parity tests and
 * `ckey info --plan` use them.
 */
#ifndef CKEY_DEBUG_H
#define CKEY_DEBUG_H

#include <stdio.h>

#include "ckey.h"

#ifdef __cplusplus
extern "C" {
#endif

/* Print the planned buffers of a session (tag, size, arena offset, lifetime
 * in op events), one line each, to `out`: where the peak comes from. */
ckey_status ckey_plan_memory_print(const ckey_model *m, const ckey_session_options *opt, FILE *out,
                                   ckey_error *err);

/*
 * Intermediate-tensor observer: called as each named stage output is produced
 * ("c1".."c4" NCHW features, "alpha_logits", "fg_logits" at S/4, "coarse" the
 * 4-channel sigmoid at S, "deltas" the refiner's 4-channel output at S after
 * strength). Data is valid only during the call. Used by the parity tests.
 */
typedef void (*ckey_tap_fn)(void *user, const char *name, const float *data,
                            const int64_t *shape, int32_t ndim);
void ckey_session_set_tap(ckey_session *s, ckey_tap_fn fn, void *user);

/*
 * Optimisations of the CUDA path that a session can switch off, for
 * side-by-side benchmarks (bench-forward --cuda-off) and for tests that check
 * the plain path too. None is off in ckey_session_create; the results stay
 * within the same precision bars either way.
 */
enum {
    CKEY_DEBUG_CUDA_NO_WGMMA = 1 << 0,           /* Hopper wgmma kernels: mma.sync ones instead */
    CKEY_DEBUG_CUDA_NO_FUSED_FC1 = 1 << 1,       /* fc1 + bias + GELU in one kernel: cuBLASLt + a pass */
    CKEY_DEBUG_CUDA_FC1_PLAIN = 1 << 2,          /* that kernel in 128-wide tiles, no clusters, every shape */
    CKEY_DEBUG_CUDA_NO_LN_FOLD = 1 << 3,         /* norm2 folded into fc1: a LayerNorm pass instead */
    CKEY_DEBUG_CUDA_NO_CONV_ONE_LAUNCH = 1 << 4, /* the in-place conv2 in one launch: a launch a band */
    CKEY_DEBUG_CUDA_NO_LT = 1 << 5,              /* cuBLASLt for 16-bit linears: cuBLAS GEMM + a bias pass */
    CKEY_DEBUG_CUDA_NO_GRAPH = 1 << 6            /* the pass as a CUDA graph from frame 2: eager every frame */
};

/* ckey_session_create with the CKEY_DEBUG_CUDA_* bits in cuda_off switched
 * off (ignored on a CPU session). */
ckey_status ckey_session_create_debug(const ckey_model *m, const ckey_session_options *opt, uint32_t cuda_off,
                                      ckey_session **out, ckey_error *err);

#ifdef __cplusplus
}
#endif
#endif /* CKEY_DEBUG_H */
