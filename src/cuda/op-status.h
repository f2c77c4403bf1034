/* The CUDA op tables' shared shorthand (ops.c: the keyer's ops, cutie-ops.c:
 * Cutie's). An op returns nothing: the first failure of a pass is kept in
 * the backend state (ck_cuda_state.status and err), later ones are dropped,
 * and the pass reads the status when it ends. */
#ifndef CK_CUDA_OP_STATUS_H
#define CK_CUDA_OP_STATUS_H

#include "cuda/backend.h"

#ifdef CK_HAVE_CUDA

/* the backend's state behind a ck_backend * */
#define ST(be) ((ck_cuda_state *)(void *)(be))
/* fp32 data of a weight that must be fp32 (aborts on any other type) */
#define WF(w) ck_wf32(w)

/* Keeps st (with *e) as the pass's failure unless it is CKEY_OK or one is
 * kept already. */
static inline void ck_cuda_keep_status(ck_cuda_state *s, ckey_status st, const ckey_error *e) {
    if (st != CKEY_OK && s->status == CKEY_OK) {
        s->status = st;
        s->err = *e;
    }
}

/* CHECKED(be, call): runs call, a ckey_status expression that reports into
 * EC (its ckey_error *), and keeps a failure in be's state. */
#define CHECKED(be, call)                                                 \
    do {                                                                  \
        ckey_error e_;                                                    \
        const ckey_status s_ = (call);                                    \
        ck_cuda_keep_status(ST(be), s_, &e_);                             \
    } while (0)
#define EC (&e_)

/* FAIL_ONCE(s, st, fmt, ...): fails the pass (s a ck_cuda_state *) with a
 * printf-style message unless it has failed already. */
#define FAIL_ONCE(s, st, ...)                                             \
    do {                                                                  \
        if ((s)->status == CKEY_OK) (s)->status = ck_fail(&(s)->err, (st), __VA_ARGS__); \
    } while (0)

#endif
#endif
