#ifndef CK_SESSION_H
#define CK_SESSION_H
#include "ckey.h"
#include "pixel/pixel.h"
/* Internal: the arena's input buffer [4, S, S] (write x there, then run). */
float *ck_session_input(ckey_session *s);
ckey_status ck_session_run(ckey_session *s, ckey_forward_result *out, ckey_error *err);
/* How alpha and fg go back to the plate size (the session's resize_back). */
ck_resize_mode ck_session_resize_back(const ckey_session *s);
/* Accumulate per-op wall time into prof[CK_PROF_COUNT] (NULL: off). */
void ck_session_set_profile(ckey_session *s, double *prof);
/* A CUDA session's cuBLASLt plans so far (ck_cublas_plan_counts); zeros on
 * other sessions. */
void ck_session_blas_plan_counts(const ckey_session *s, int bias_only, int *fused, int *fallback);
#endif
