/* Temporary files removed on SIGINT / SIGTERM, and their commit (tempfiles.h). */
#include "tempfiles.h"

#include <errno.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

/* The handler may only touch lock-free atomics (C11 7.14.1.1). */
_Static_assert(ATOMIC_INT_LOCK_FREE == 2, "atomic_int must be lock-free for the signal handler");

/*
 * IDLE: no set armed, a signal takes its default action. ARMED: a signal
 * removes the set's files, then takes its default action. BUSY: the main
 * flow is renaming or removing the files; a signal is held for it. DYING: a
 * handler is removing the files and will end the process.
 */
enum { IDLE, ARMED, BUSY, DYING };

static atomic_int state;
static atomic_int held; /* a signal that arrived while BUSY */
static char temp_paths[TEMPS_MAX][4096];
static size_t temp_count; /* both written only while IDLE */
static char temp_what[2048];

static void put_err(const char *s) {
    size_t n = 0;
    while (s[n]) n++;
    while (n > 0) {
        const ssize_t k = write(2, s, n);
        if (k <= 0) return;
        s += k;
        n -= (size_t)k;
    }
}

/* Take the default action of sig: with sig blocked in its handler, raise()
 * leaves it pending, and it ends the process as the handler returns. */
static void die_of(int sig) {
    signal(sig, SIG_DFL);
    raise(sig);
}

static void on_signal(int sig) {
    const int saved = errno;
    int seen = ARMED;
    if (atomic_compare_exchange_strong(&state, &seen, DYING)) {
        for (size_t i = 0; i < temp_count; i++) unlink(temp_paths[i]);
        put_err(sig == SIGINT ? "ckey: error: interrupted by SIGINT: " : "ckey: error: interrupted by SIGTERM: ");
        put_err(temp_what);
        put_err("\n");
    } else if (seen == BUSY) {
        /* the main flow ends the process once its renames are done; if it
         * has just finished (IDLE now), it may not see this: end it here */
        atomic_store(&held, sig);
        if (atomic_load(&state) == BUSY) {
            errno = saved;
            return;
        }
    } else if (seen == DYING) {
        errno = saved; /* another thread's handler is ending the process */
        return;
    }
    die_of(sig);
    errno = saved;
}

int temps_arm(const char *const *paths, size_t n, const char *what) {
    if (n > TEMPS_MAX || atomic_load(&state) != IDLE) return 0;
    for (size_t i = 0; i < n; i++)
        if (strlen(paths[i]) >= sizeof temp_paths[i]) return 0;
    for (size_t i = 0; i < n; i++) snprintf(temp_paths[i], sizeof temp_paths[i], "%s", paths[i]);
    temp_count = n;
    snprintf(temp_what, sizeof temp_what, "%s", what);
    struct sigaction sa;
    memset(&sa, 0, sizeof sa);
    sa.sa_handler = on_signal;
    sigemptyset(&sa.sa_mask);
    sigaddset(&sa.sa_mask, SIGINT);
    sigaddset(&sa.sa_mask, SIGTERM);
    sa.sa_flags = SA_RESTART;
    sigaction(SIGINT, &sa, NULL);
    sigaction(SIGTERM, &sa, NULL);
    atomic_store(&state, ARMED); /* after the paths: a handler reads them once it sees ARMED */
    return 1;
}

/* ARMED -> BUSY for the main flow; a handler already removing the files
 * (DYING) ends the process, so then wait for that. */
static void enter_busy(void) {
    int seen = ARMED;
    if (!atomic_compare_exchange_strong(&state, &seen, BUSY))
        while (seen == DYING) pause();
}

/* BUSY -> IDLE; then a signal held meanwhile ends the process. */
static void leave_busy(void) {
    atomic_store(&state, IDLE);
    const int sig = atomic_exchange(&held, 0);
    if (sig) die_of(sig);
}

int temps_commit(const char *const *from, const char *const *to, size_t n, char *why, size_t cap) {
    enter_busy();
    int ok = 1;
    for (size_t i = 0; i < n && ok; i++) {
        if (rename(from[i], to[i]) == 0) continue;
        const int e = errno;
        if (i) snprintf(why, cap, "cannot rename %s to %s: %s (%s was already replaced)", from[i], to[i], strerror(e),
                        to[i - 1]);
        else snprintf(why, cap, "cannot rename %s to %s: %s", from[i], to[i], strerror(e));
        ok = 0;
    }
    if (!ok)
        for (size_t i = 0; i < temp_count; i++) unlink(temp_paths[i]);
    leave_busy();
    return ok;
}

void temps_discard(void) {
    enter_busy();
    for (size_t i = 0; i < temp_count; i++) unlink(temp_paths[i]);
    leave_busy();
}
