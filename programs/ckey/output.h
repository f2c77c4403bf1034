/*
 * What several ckey commands print: runtime failures and warnings (text on
 * stderr, and with --json a JSON object on stdout), JSON strings, the
 * memory plan, the note about reduced test models, and the clock their
 * timings use.
 */
#ifndef CKEY_CLI_OUTPUT_H
#define CKEY_CLI_OUTPUT_H

#include <stdint.h>
#include <stdio.h>

#include "ckey_clip.h"
#include "ckey.h"

/* The real architecture's embedding width; anything else is a reduced test
 * configuration whose (random) weights cannot produce a meaningful matte. */
#define CKEY_REAL_EMBED_DIM 112

/* Monotonic seconds. */
double now_seconds(void);

/* A JSON string literal (quotes included); NULL prints "". */
void json_str(FILE *f, const char *s);

/* Runtime failure: "ckey: error: <message>" on stderr; with `json` also
 * {"ok": false, "status": ..., "message": ...} on stdout, so a caller parsing
 * stdout always gets one object. Returns EXIT_RUNTIME. */
int fail(int json, ckey_status st, const char *fmt, ...) __attribute__((format(printf, 3, 4)));
/* fail() with a library error (its message, else its status name). */
int fail_err(int json, const ckey_error *err);

/* The same for the commands whose --json stdout is a stream of events
 * (key, track): "ckey: error: <message>" on stderr, after a newline when
 * `newline` (a progress line may be open on a terminal); with `json` also
 * {"event":"error","status":...,"message":...} on stdout. Returns
 * EXIT_RUNTIME. */
int event_fail(int json, int newline, ckey_status st, const char *fmt, ...) __attribute__((format(printf, 4, 5)));
/* "ckey: warning: <msg>" on stderr; with `json` also
 * {"event":"warning","message":...} on stdout. */
void event_warning(int json, const char *msg);

double mib(int64_t bytes);

/* The run's plan as a JSON object, every figure in bytes. */
void print_run_memory_json(const ckey_run_memory *r, int32_t width, int32_t height);
/* The run's plan as a list, a part a line, each line starting with `indent`. */
void print_run_memory_text(const ckey_run_memory *r, const char *indent);

/* This process's peak resident set so far (VmHWM of /proc/self/status), in
 * bytes; 0 when unknown. */
int64_t peak_rss_bytes(void);
/* CPU seconds (user + system) of the process's threads so far. */
double cpu_seconds(void);

/* The plan as a JSON object: {"weight_bytes": ..., ..., "naive_bytes": ...}. */
void print_plan_json(const ckey_memory_plan *p);

int is_test_model(const ckey_model_info *mi);
/* "ckey: note: <model> is a reduced test configuration ..." on stderr. */
void test_model_notice(const char *model, const ckey_model_info *mi);

#endif
