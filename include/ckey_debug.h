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

#ifdef __cplusplus
}
#endif
#endif /* CKEY_DEBUG_H */
