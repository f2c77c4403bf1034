/* Internal core: errors, logging-free status helpers, thread pool, planner. */
#ifndef CK_CORE_H
#define CK_CORE_H

#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#include "ckey.h"

#define CK_ARRAY_LEN(a) (sizeof(a) / sizeof((a)[0]))
#define CK_MIN(a, b) ((a) < (b) ? (a) : (b))
#define CK_MAX(a, b) ((a) > (b) ? (a) : (b))

/* Fill `err` (may be NULL) and return `st`. printf-style message. */
ckey_status ck_fail(ckey_error *err, ckey_status st, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));

/* Clear an error record. */
void ck_error_clear(ckey_error *err);

/* A byte count in the unit that shows it: "1000 bytes", "1.0 KiB", "5.8 MiB",
 * "1.50 GiB" (binary multiples), into buf[cap]; returns buf. */
const char *ck_format_bytes(char *buf, size_t cap, int64_t bytes);

/* Overflow-checked size arithmetic: returns 0 on overflow. */
int ck_mul_size(size_t a, size_t b, size_t *out);
int ck_add_size(size_t a, size_t b, size_t *out);

/* fsync the directory holding `path`, so a rename into it survives a crash
 * (failure only weakens crash safety, so it is not reported). */
void ck_sync_parent_dir(const char *path);
/* Removes from dir the temporary files (ckey_temp_path's names) of this
 * host's writers whose process no longer runs: what a killed run left.
 * Another host's, or a live process's, are left alone. Returns how many. */
int ck_remove_dead_temps(const char *dir);

/* Monotonic wall clock in seconds. */
double ck_now(void);

/* How long a reader waits for a FIFO's (or a pipe's) first byte. */
#define CK_INPUT_TIMEOUT_MS 30000

/*
 * Open `path` for reading (binary, close-on-exec). A FIFO with no writer
 * must not block forever: the file is opened O_NONBLOCK, and anything but a
 * regular file or a block device is then polled up to timeout_ms for data or
 * its writer's end; the descriptor is then put back in blocking mode for
 * the reads. Errors name the file: "x: cannot open: ...", "x: no writer
 * ... after 30 s".
 */
ckey_status ck_open_input(const char *path, int timeout_ms, FILE **out, ckey_error *err);

/* ------------------------------------------------------------ thread pool */

typedef struct ck_pool ck_pool;

/* fn(ctx, begin, end, thread_index) covers [begin, end) of a parallel range. */
typedef void (*ck_range_fn)(void *ctx, int64_t begin, int64_t end, int thread);

/* threads <= 0 means "all online cores". */
ckey_status ck_pool_create(int threads, ck_pool **out, ckey_error *err);
void ck_pool_free(ck_pool *p);
int ck_pool_size(const ck_pool *p);

/*
 * Split [0, n) into chunks of at least `grain` items and run them on all
 * threads (the caller participates). Returns when every chunk is done.
 * p may be NULL: then everything runs on the caller. Several threads may
 * call it on one pool at once, and a chunk may call it again (a nested
 * job): the jobs share the workers, first come first served. Within one job
 * the caller is thread 0 and the workers are 1 .. ck_pool_size - 1, so
 * `thread` indexes per-thread scratch of that job.
 */
void ck_pool_for(ck_pool *p, int64_t n, int64_t grain, ck_range_fn fn, void *ctx);

/* --------------------------------------------------------------- planner */

/*
 * The memory planner. The forward pass is written once against this
 * allocator. Pass 1 (record) runs the model on the null backend: every
 * ck_alloc/ck_release is logged with its size and lifetime and no op does
 * work. The planner then places each buffer at an offset so that buffers
 * whose lifetimes overlap never share bytes (greedy, largest first), and the
 * arena is sized to the highest end. Pass 2 (execute) replays the identical
 * sequence of allocations, each returning arena + its planned offset.
 */
typedef struct ck_plan ck_plan;

ckey_status ck_plan_create(ck_plan **out, ckey_error *err);
void ck_plan_free(ck_plan *p);

/* Begin recording (resets the log). */
void ck_plan_begin_record(ck_plan *p);
/* Finish recording and place buffers. Fails on allocation failure only. */
ckey_status ck_plan_finish(ck_plan *p, ckey_error *err);
/* Bind an arena of at least ck_plan_arena_bytes() bytes and start replaying. */
void ck_plan_begin_execute(ck_plan *p, void *arena);
/* After an execute pass: check every recorded buffer was replayed. */
int ck_plan_replay_complete(const ck_plan *p);

size_t ck_plan_arena_bytes(const ck_plan *p);
size_t ck_plan_naive_bytes(const ck_plan *p);
int ck_plan_num_buffers(const ck_plan *p);
/* While recording: the index of the next allocation event (a stage mark). */
int64_t ck_plan_event(const ck_plan *p);
/* After finish: the most bytes live at once at the events in [e0, e1) (a
 * stage between two marks; the arena holds at least that). */
size_t ck_plan_live_peak(const ck_plan *p, int64_t e0, int64_t e1);

/*
 * Allocate `bytes` (64-byte aligned) for the op sequence. During recording
 * returns a unique fake address (never dereferenced: the null backend does no
 * work) that ck_release accepts. `tag` names the buffer for `ckey info`.
 */
void *ck_alloc(ck_plan *p, size_t bytes, const char *tag);
#define ck_alloc_f32(p, n, tag) ((float *)ck_alloc((p), (size_t)(n) * sizeof(float), (tag)))
/* Mark the end of a buffer's lifetime (after its last reader). NULL is ignored. */
void ck_release(ck_plan *p, void *ptr);
/* End the lifetime of a live buffer's bytes past its first `keep` (rounded
 * up to 64): they are free for later buffers while the first `keep` live on
 * (placed as two buffers, adjacent; the tail tagged `tag`). ck_release then
 * releases the rest. */
void ck_shrink(ck_plan *p, void *ptr, size_t keep, const char *tag);

/* Address of the index-th recorded buffer in the bound arena (NULL if none). */
void *ck_plan_buffer(const ck_plan *p, int index);

/* Print the placed buffers (tag, size, offset, lifetime) for diagnostics. */
void ck_plan_dump(const ck_plan *p, void *file /* FILE* */);

#endif
