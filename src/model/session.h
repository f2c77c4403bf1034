/* The session's internal entry points, for the layers above it (src/pixel,
 * src/clip) and for tests and benchmarks. */
#ifndef CK_SESSION_H
#define CK_SESSION_H
#include "ckey.h"
#include "backend/backend.h"

/* The host buffer the next ck_session_run reads its [4, S, S] fp32 input from. */
float *ck_session_input(ckey_session *s);
ckey_status ck_session_run(ckey_session *s, ckey_forward_result *out, ckey_error *err);
/* The device stream a session's runs are queued on (ck_backend_i.stream);
 * NULL for a host backend. */
void *ck_session_stream(const ckey_session *s);
/* The network on a device session with its [4, S, S] fp32 input in device
 * memory (dev_in) and its output left there: out->alpha / out->fg are device
 * pointers into the backend's buffer, valid until the session's next run.
 * CKEY_ERR_INVALID_ARG on a host session. */
ckey_status ck_session_run_device(ckey_session *s, const float *dev_in, ckey_forward_result *out, ckey_error *err);
/* The options the session was created with. */
const ckey_session_options *ck_session_options(const ckey_session *s);
/* Host scratch of at least `floats` floats owned by the session (grown as
 * needed, reused by later calls), or NULL with err set. */
float *ck_session_work(ckey_session *s, size_t floats, ckey_error *err);
/* Accumulate per-op wall time into prof[CK_PROF_COUNT] (NULL: off). */
void ck_session_set_profile(ckey_session *s, double *prof);
/* ckey_session_create_debug with the schedule forced (NULL: chosen by the
 * budget as ckey_session_create does); CKEY_ERR_UNSUPPORTED where the
 * backend lacks its ops, CKEY_ERR_BUDGET over a budget. */
ckey_status ck_session_create_schedule(const ckey_model *m, const ckey_session_options *opt, uint32_t cuda_off,
                                       const ck_schedule *sched, ckey_session **out, ckey_error *err);
/* ck_session_create_schedule with the backend's steps reported to trace
 * (ck_backend_config.trace; NULL: none), for bench-budget --trace-memory. */
ckey_status ck_session_create_traced(const ckey_model *m, const ckey_session_options *opt, uint32_t cuda_off,
                                     const ck_schedule *sched, ck_trace_fn trace, void *trace_user,
                                     ckey_session **out, ckey_error *err);
/* The plan of schedule sched alone (its min_budget_bytes: its own peak). */
ckey_status ck_session_plan_schedule(const ckey_model *m, const ckey_session_options *opt, const ck_schedule *sched,
                                     ckey_memory_plan *mp, ckey_error *err);
/* The schedules a session of model m (NULL: the default config) and these
 * options chooses from (at most max), fastest first; the count. */
int ck_session_schedules(const ckey_model *m, const ckey_session_options *o, ck_schedule *out, int max);
/* The backend the session drives (tests: backend-specific counters). */
ck_backend *ck_session_backend(const ckey_session *s);

/* What the memory plan of a whole run (ckey_plan_run_memory) needs of a
 * session: its plan as ckey_plan_memory makes it (the budget unchecked),
 * where that memory lives, the backend's transfer buffers, and the loaded
 * model's own host memory. */
typedef struct ck_session_memory {
    ckey_memory_plan plan;
    int device_memory;        /* ck_backend_i.device_memory */
    int64_t host_io_bytes;    /* ck_backend_i.host_io_bytes */
    int64_t model_host_bytes; /* the loaded model's host memory outside plan.weight_bytes:
                                 its raw decoder copy, and with device_memory its fp32 store */
} ck_session_memory;

ckey_status ck_plan_session_memory(const ckey_model *m, const ckey_session_options *opt, ck_session_memory *out,
                                   ckey_error *err);

/* The session's CPU threads (the CPU backend's pool), which the work around
 * the network may share; NULL on a GPU. */
ck_pool *ck_session_pool(const ckey_session *s);
#endif
