/*
 * Temporary files of the CLI that SIGINT / SIGTERM must not leave behind,
 * and their commit: `ckey run` writes its outputs under temporary names
 * beside the final ones and renames them into place together, only once all
 * are complete.
 *
 * While a set is armed, a SIGINT or SIGTERM handler unlinks its paths
 * (async-signal-safe: unlink, write, signal, raise) and lets the signal end
 * the process as it would have without a handler. A signal that arrives
 * while the set is being committed (renamed) is held until the renames are
 * done, then ends the process: the files in place are always a whole set,
 * either the older one or the new one. One state word, changed by atomic
 * compare-and-swap, decides between the handler and the main flow. The
 * handler should run on the thread that writes the files (`ckey run` starts
 * its worker threads with these signals blocked): on another thread it
 * could remove a path just before the writer creates it.
 */
#ifndef CKEY_CLI_TEMPFILES_H
#define CKEY_CLI_TEMPFILES_H

#include <stddef.h>

/* At most this many temporary paths in a set, each shorter than 4096 bytes. */
#define TEMPS_MAX 8

/*
 * Install the SIGINT / SIGTERM handlers and arm a set: `n` temporary paths
 * (copied; those that never come to exist are fine), removed in this order,
 * so a path renamed to a later one while the handler runs is removed all
 * the same; and `what`, the end of
 * the line printed on stderr if a signal removes them ("ckey: error:
 * interrupted by SIGTERM: <what>"). 1 on success; 0 when the set does not
 * fit (too many or too long paths).
 */
int temps_arm(const char *const *paths, size_t n, const char *what);

/*
 * Rename from[i] to to[i] for i < n, in order, with signals held off, then
 * disarm; a signal held meanwhile then ends the process. 1 when every rename
 * succeeded; else 0 with the reason, naming the files, in why[cap] (the
 * temporary files not renamed are removed).
 */
int temps_commit(const char *const *from, const char *const *to, size_t n, char *why, size_t cap);

/* Remove the armed set's files and disarm (after a failed write). */
void temps_discard(void);

#endif
