/* Minimal test harness: each tests/test-*.c defines TEST(name) cases and a
 * main() that calls ck_test_main(). A binary exits 0 when all its cases pass,
 * 1 when any fails, 77 when every case was skipped (the runner counts that as
 * skipped, never as passed). */
#ifndef CK_TESTUTIL_H
#define CK_TESTUTIL_H

#include <math.h>
#include <stdint.h>
#include <stdio.h>

typedef struct ck_test_case {
    const char *name;
    void (*fn)(void);
} ck_test_case;

/* Per-case state, reset before each case. */
extern int ck_test_failed;
extern int ck_test_skipped;

#define CHECK(cond)                                                                 \
    do {                                                                            \
        if (!(cond)) {                                                              \
            fprintf(stderr, "  FAIL %s:%d: %s\n", __FILE__, __LINE__, #cond);       \
            ck_test_failed = 1;                                                     \
        }                                                                           \
    } while (0)

#define CHECKF(cond, ...)                                                           \
    do {                                                                            \
        if (!(cond)) {                                                              \
            fprintf(stderr, "  FAIL %s:%d: %s: ", __FILE__, __LINE__, #cond);       \
            fprintf(stderr, __VA_ARGS__);                                           \
            fputc('\n', stderr);                                                    \
            ck_test_failed = 1;                                                     \
        }                                                                           \
    } while (0)

/* Fail and leave the current case. */
#define REQUIRE(cond)                                                               \
    do {                                                                            \
        if (!(cond)) {                                                              \
            fprintf(stderr, "  FAIL %s:%d: %s\n", __FILE__, __LINE__, #cond);       \
            ck_test_failed = 1;                                                     \
            return;                                                                 \
        }                                                                           \
    } while (0)

#define SKIP(...)                                                                   \
    do {                                                                            \
        printf("  skip: ");                                                         \
        printf(__VA_ARGS__);                                                        \
        printf("\n");                                                               \
        ck_test_skipped = 1;                                                        \
        return;                                                                     \
    } while (0)

/* Compare two float arrays; prints "name: max abs err X, mean abs err Y (n)"
 * and returns the max abs error. NaN anywhere counts as an infinite error. */
double ck_compare(const char *name, const float *got, const float *want, size_t n,
                  double *mean_out);

/* Run the cases; returns the process exit code. */
int ck_test_main(const ck_test_case *cases, int n, int argc, char **argv);

/* Read a whole file (malloc'd; caller frees). NULL on failure. */
unsigned char *ck_read_file(const char *path, size_t *size);

/* Run argv[0] (a NULL-terminated argv) with stdout/stderr captured through
 * files in `workdir`. code: exit status, or -1 when it did not exit normally;
 * out/err: NUL-terminated captures (never NULL). */
typedef struct ck_run_result {
    int code;
    char *out, *err;
} ck_run_result;
ck_run_result ck_run(const char *const *argv, const char *workdir);
/* ck_run with a working directory, environment changes and optionally stderr
 * merged into out (in the order the program wrote them; err stays empty).
 * env: NULL-terminated "NAME=VALUE" (set) or "NAME" (unset) entries, applied
 * in the child only. argv[0] must then be an absolute path when cwd is set. */
typedef struct ck_run_options {
    const char *cwd;
    const char *const *env;
    int merge_stderr;
} ck_run_options;
ck_run_result ck_run_opts(const char *const *argv, const char *workdir, const ck_run_options *o);
void ck_run_free(ck_run_result *r);

/* rm -r: a directory and everything under it (symlinks are not followed). */
void ck_remove_tree(const char *dir);

/* Copy a file; 1 on success. */
int ck_copy_file(const char *from, const char *to);

/* Copy the safetensors file `from` to `to` with element `index` (flat,
 * row-major) of the F32 tensor `tensor` set to `value` (a NaN, an Inf: a
 * damaged checkpoint). The offset is found from the file's own JSON header.
 * 1 on success; 0 with the reason on stderr. */
int ck_poison_safetensors(const char *from, const char *to, const char *tensor, uint64_t index,
                          float value);

/* A fresh shot <root>/<name> (into shot): Input/plate_NNNN.png +
 * AlphaHint/hint_NNNN.png, frames 1..n, copies of examples/; 1 on success. */
int ck_make_shot(char *shot, size_t cap, const char *root, const char *name, int n);

/* Frame k of a generated green-screen shot (W x H): a soft-edged disc (the
 * subject, warm colour) moving right over a green screen, green spill on the
 * subject's edge, and the hint: the disc's alpha, hardened and shrunk.
 * rgb [3, H, W], hint [H, W]. */
void ck_synth_frame(int k, int W, int H, float *rgb, float *hint);

/* A fresh shot <root>/<name> (into shot) of n generated frames (ck_synth_frame
 * k = 0 .. n-1) numbered first .. first + n - 1: Input/plate_NNNN.png (16-bit)
 * and AlphaHint/hint_NNNN.png (8-bit); 1 on success. */
int ck_make_synth_shot(char *shot, size_t cap, const char *root, const char *name, int first, int n,
                       int W, int H);

/* Every regular file under directory a has a byte-identical twin under b
 * and b holds no other file (recursively; names starting with '.' count
 * too). Returns the number of files compared, or -1 with the first
 * difference in why[cap]. */
long ck_same_tree(const char *a, const char *b, char *why, size_t cap);

/* Start argv (argv[0] a path) in the background, stdout and stderr to
 * `log`; the pid, or -1. */
int ck_spawn(const char *const *argv, const char *log);

/* /bin/sh -c `cmd` with stdout and stderr captured (ck_run in workdir). */
ck_run_result ck_sh(const char *cmd, const char *workdir);

/* Directory holding the committed fixtures (CKEY_FIXTURES env or tests/fixtures). */
const char *ck_fixtures_dir(void);

#endif
