/*
 * What several ckey commands print: runtime failures (text on stderr, and
 * with --json a JSON object on stdout), JSON strings, the memory plan, the
 * note about reduced test models, and the clock their timings use.
 */
#ifndef CKEY_CLI_OUTPUT_H
#define CKEY_CLI_OUTPUT_H

#include <stdint.h>
#include <stdio.h>

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

double mib(int64_t bytes);

/* The plan as a JSON object: {"weight_bytes": ..., ..., "naive_bytes": ...}. */
void print_plan_json(const ckey_memory_plan *p);

int is_test_model(const ckey_model_info *mi);
/* "ckey: note: <model> is a reduced test configuration ..." on stderr. */
void test_model_notice(const char *model, const ckey_model_info *mi);

#endif
