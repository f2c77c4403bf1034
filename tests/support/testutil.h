/* Minimal test harness: each tests/test-*.c defines TEST(name) cases and a
 * main() that calls ck_test_main(). A binary exits 0 when all its cases pass,
 * 1 when any fails, 77 when every case was skipped (the runner counts that as
 * skipped, never as passed). */
#ifndef CK_TESTUTIL_H
#define CK_TESTUTIL_H

#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <unistd.h>

/* CK_ASAN: 1 in the sanitizer build (make asan; GCC's and Clang's ways of
 * telling), where the costliest cases run smaller. */
#if defined(__SANITIZE_ADDRESS__)
#define CK_ASAN 1
#elif defined(__has_feature)
#if __has_feature(address_sanitizer)
#define CK_ASAN 1
#endif
#endif
#ifndef CK_ASAN
#define CK_ASAN 0
#endif

/* CK_BUILT_PNG, CK_BUILT_EXR, CK_BUILT_FFMPEG: 1 where libckey was built with
 * that library (the Makefile's CK_HAVE_* defines), else 0. */
#ifdef CK_HAVE_PNG
#define CK_BUILT_PNG 1
#else
#define CK_BUILT_PNG 0
#endif
#ifdef CK_HAVE_EXR
#define CK_BUILT_EXR 1
#else
#define CK_BUILT_EXR 0
#endif
#ifdef CK_HAVE_FFMPEG
#define CK_BUILT_FFMPEG 1
#else
#define CK_BUILT_FFMPEG 0
#endif

/* In main, before the cases: unless built (a CK_BUILT_* expression), print
 * the reason (printf's arguments) and leave with 77, which the runner counts
 * as skipped. */
#define CK_TEST_NEEDS(built, ...)                                                   \
    do {                                                                            \
        if (!(built)) {                                                             \
            printf(__VA_ARGS__);                                                    \
            return 77;                                                              \
        }                                                                           \
    } while (0)

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
    /* > 0: RLIMIT_FSIZE in the child, SIGXFSZ ignored, so that a write past
     * it fails with EFBIG as on a full disk */
    long fsize_limit;
} ck_run_options;
ck_run_result ck_run_opts(const char *const *argv, const char *workdir, const ck_run_options *o);
void ck_run_free(ck_run_result *r);

/* A fresh private directory /tmp/ckey-test-<name>-XXXXXX (mkdtemp) into
 * dir[cap]; 1 on success, 0 with the reason on stderr. */
int ck_make_temp_dir(char *dir, size_t cap, const char *name);

/* path into out[cap]: absolute (realpath) when it exists, else as given. */
void ck_abs_path(char *out, size_t cap, const char *path);

/* The ckey program built beside the tests, <dir of argv0>/../ckey, into
 * bin[cap] (absolute when it exists: some cases run it in other directories). */
void ck_ckey_path(char *bin, size_t cap, const char *argv0);

/* The tiny fixture model <fixtures>/tiny/tiny.pth into path[cap] (absolute
 * when it exists). */
void ck_tiny_model_path(char *path, size_t cap);

/* HOME and XDG_DATA_HOME under workdir (not created) and no CKEY_MODEL: no
 * checkpoint of the user's answers a command run without --model. */
void ck_isolate_model_lookup(const char *workdir);

/* Skip the case unless the ckey program `bin` is built and `model` exists. */
#define NEED_CKEY(bin, model)                                                       \
    do {                                                                            \
        if (access((bin), X_OK) != 0) SKIP("%s is not built", (bin));              \
        if (access((model), R_OK) != 0) SKIP("%s does not exist", (model));        \
    } while (0)

/* How a test runs the ckey program: ck_cli_run(&cli, opts, ARGS..., NULL)
 * runs `bin ARGS... common...` with ck_run_opts (opts may be NULL), output
 * captured in workdir. echo 1 prints "  $ ckey ARGS  -> CODE" (with the
 * directory, environment and file size limit of opts; not the common
 * arguments); echo 2 adds "  [first line of stderr]" when there is one. */
typedef struct ck_cli {
    const char *bin;
    const char *workdir;
    const char *const *common; /* NULL-terminated, or NULL */
    int echo;
} ck_cli;
ck_run_result ck_cli_run(const ck_cli *c, const ck_run_options *o, const char *first, ...);
/* The same with the arguments as a NULL-terminated array (at most 63). */
ck_run_result ck_cli_run_argv(const ck_cli *c, const ck_run_options *o, const char *const *args);

/* /bin/sh -c with a printf-formatted command, output captured in workdir. */
ck_run_result ck_shf(const char *workdir, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

/* Occurrences of needle in hay. */
int ck_count_str(const char *hay, const char *needle);

/* 1 when path exists (stat). */
int ck_exists(const char *path);

/* The entries of a directory other than . and ..; -1 when it cannot be read. */
int ck_count_entries(const char *dir);

/* mkdir -p; 1 on success. */
int ck_mkdirs(const char *path);

/* Every entry under dir, depth first, a directory after what it holds:
 * fn(user, path, name, st), st NULL where lstat failed (symlinks are not
 * followed); fn returning 0 ends the walk. 1 when every folder could be
 * read and fn never ended it; else 0. */
struct stat;
typedef int (*ck_walk_fn)(void *user, const char *path, const char *name, const struct stat *st);
int ck_walk_tree(const char *dir, ck_walk_fn fn, void *user);

/* rm -r: a directory and everything under it (symlinks are not followed). */
void ck_remove_tree(const char *dir);

/* Write n bytes to path (created or truncated); 1 on success. */
int ck_write_file(const char *path, const void *data, size_t n);

/* Copy a file; 1 on success. */
int ck_copy_file(const char *from, const char *to);

/* Copy the safetensors file `from` to `to` with element `index` (flat,
 * row-major) of the F32 tensor `tensor` set to `value` (a NaN, an Inf: a
 * damaged checkpoint). The offset is found from the file's own JSON header.
 * 1 on success; 0 with the reason on stderr. */
int ck_poison_safetensors(const char *from, const char *to, const char *tensor, uint64_t index,
                          float value);

/* 1 when files a and b can be read and hold the same bytes. */
int ck_same_file(const char *a, const char *b);

/* Every regular file under directory a has a byte-identical twin under b
 * and b holds no other file (recursively; names starting with '.' count
 * too). Returns the number of files compared, or -1 with the first
 * difference in why[cap]. */
long ck_same_tree(const char *a, const char *b, char *why, size_t cap);

/* ck_same_tree expecting `files` files: 1 when so; 0 with the first
 * difference, or the count found, in why[cap]. */
int ck_same_tree_n(const char *a, const char *b, long files, char *why, size_t cap);

/* Start argv (argv[0] a path) in the background, stdout and stderr to
 * `log`; the pid, or -1. */
int ck_spawn(const char *const *argv, const char *log);

/* /bin/sh -c `cmd` with stdout and stderr captured (ck_run in workdir). */
ck_run_result ck_sh(const char *cmd, const char *workdir);

/* Directory holding the committed fixtures (CKEY_FIXTURES env or tests/fixtures). */
const char *ck_fixtures_dir(void);

/* <fixtures dir>/rel, malloc'd (the caller frees). */
char *ck_fixture_path(const char *rel);

/* A 0/1 mask m[h * w] of kind 0..6 for the connected-components tests: one
 * column, diagonals, a checkerboard, random at 30 / 55 / 80%, and bands
 * joined by columns; *rng (an LCG) advances a step a pixel. */
void ck_cc_test_mask(uint8_t *m, int32_t h, int32_t w, int kind, uint64_t *rng);

#endif
