/* The session's internal entry points, for the layers above it (src/pixel,
 * src/clip) and for tests and benchmarks. */
#ifndef CK_SESSION_H
#define CK_SESSION_H
#include "ckey.h"
#include "backend/backend.h"

/* The host buffer the next ck_session_run reads its [4, S, S] fp32 input from. */
float *ck_session_input(ckey_session *s);
ckey_status ck_session_run(ckey_session *s, ckey_forward_result *out, ckey_error *err);
/* The options the session was created with. */
const ckey_session_options *ck_session_options(const ckey_session *s);
/* Host scratch of at least `floats` floats owned by the session (grown as
 * needed, reused by later calls), or NULL with err set. */
float *ck_session_work(ckey_session *s, size_t floats, ckey_error *err);
/* Accumulate per-op wall time into prof[CK_PROF_COUNT] (NULL: off). */
void ck_session_set_profile(ckey_session *s, double *prof);
/* The backend the session drives (tests: backend-specific counters). */
ck_backend *ck_session_backend(const ckey_session *s);
/* The session's CPU threads (the CPU backend's pool), which the work around
 * the network may share; NULL on a GPU. */
ck_pool *ck_session_pool(const ckey_session *s);
#endif
