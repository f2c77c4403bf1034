/*
 * The ckey CLI as a user meets it: exit codes (0 ok, 1 runtime, 2 usage) and
 * messages for bad arguments and bad files, every --help text against the
 * reference in docs/cli.md, then an end-to-end `ckey run` on examples/ with
 * the tiny fixture model. The binary is the ckey next to this
 * test's build tree (<dir of argv[0]>/../ckey).
 */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "ckey_media.h"
#include "ckey.h"
#include "support/testutil.h"

#define LEN(a) (sizeof(a) / sizeof((a)[0]))

static char ckey_bin[PATH_MAX + 16];
static char workdir[256];

typedef ck_run_result result;
#define result_free ck_run_free

static result run_ckey(const char *first, ...) {
    const char *argv[64];
    int argc = 0;
    argv[argc++] = ckey_bin;
    va_list ap;
    va_start(ap, first);
    for (const char *a = first; a && argc < (int)LEN(argv) - 1; a = va_arg(ap, const char *))
        argv[argc++] = a;
    va_end(ap);
    argv[argc] = NULL;

    result r = ck_run(argv, workdir);
    printf("  $ ckey");
    for (int i = 1; i < argc; i++) printf(" %s", argv[i]);
    printf("  -> %d", r.code);
    const char *first_err = r.err[0] ? r.err : NULL;
    if (first_err) {
        const char *nl = strchr(first_err, '\n');
        printf("  [%.*s]", nl ? (int)(nl - first_err) : (int)strlen(first_err), first_err);
    }
    printf("\n");
    return r;
}

#define EXPECT(r, want_code, stream, needle)                                               \
    do {                                                                                   \
        CHECKF((r).code == (want_code), "exit %d, want %d; stderr: %s", (r).code,          \
               (want_code), (r).err);                                                     \
        CHECKF(strstr((r).stream, (needle)) != NULL, "%s lacks '%s': %s", #stream,         \
               (needle), (r).stream);                                                      \
    } while (0)

static int have_binary(void) {
    if (access(ckey_bin, X_OK) == 0) return 1;
    return 0;
}

#ifdef CK_HAVE_PNG
#define HAVE_PNG 1
#else
#define HAVE_PNG 0
#endif

#define NEED_BINARY()                                                                      \
    do {                                                                                   \
        if (!have_binary()) SKIP("%s is not built", ckey_bin);                             \
    } while (0)

#define NEED_PNG()                                                                         \
    do {                                                                                   \
        if (!HAVE_PNG) SKIP("libckey was built without libpng");                           \
    } while (0)

static void path_in(char *buf, size_t cap, const char *name) {
    snprintf(buf, cap, "%s/%s", workdir, name);
}

/* --------------------------------------------------------------- usage */

static void test_help_and_version(void) {
    NEED_BINARY();
    result r = run_ckey(NULL);
    EXPECT(r, 2, err, "usage: ckey");
    result_free(&r);
    r = run_ckey("--help", NULL);
    EXPECT(r, 0, out, "exit codes");
    result_free(&r);
    r = run_ckey("run", "--help", NULL);
    EXPECT(r, 0, out, "usage: ckey run");
    result_free(&r);
    r = run_ckey("info", "-h", NULL);
    EXPECT(r, 0, out, "usage: ckey info");
    result_free(&r);
    r = run_ckey("convert", "--help", NULL);
    EXPECT(r, 0, out, "usage: ckey convert");
    result_free(&r);
    r = run_ckey("version", NULL);
    EXPECT(r, 0, out, "ckey 0.");
    result_free(&r);
    r = run_ckey("--version", "--json", NULL);
    EXPECT(r, 0, out, "\"version\":");
    result_free(&r);
}

static void test_usage_errors(void) {
    NEED_BINARY();
    static const struct {
        const char *args[8];
        const char *needle;
    } cases[] = {
        {{"frobnicate"}, "unknown command 'frobnicate'"},
        {{"run", "--bogus"}, "unknown option '--bogus'"},
        {{"run", "--model"}, "option '--model' needs a value"},
        {{"run", "--model="}, "option '--model' needs a value"},
        {{"run", "--size", "abc"}, "--size 'abc' is not a size"},
        {{"run", "--size", "100"}, "not a multiple of 32"},
        {{"run", "--size=0"}, "is not a size"},
        {{"run", "--threads", "-1"}, "--threads '-1'"},
        {{"run", "--refiner-strength", "x1"}, "--refiner-strength 'x1' is not a number"},
        {{"run", "--json=yes"}, "takes no value"},
        {{"run", "--device", "tpu"}, "--device 'tpu'"},
        {{"run", "--budget", "12Q"}, "--budget '12Q'"},
        {{"run", "stray"}, "unexpected argument 'stray'"},
        {{"run", "--model", "m.pth", "--image", "p.png", "--out", "o"}, "missing --hint"},
        {{"run", "--image", "p.png", "--hint", "h.png", "--out", "o"}, "missing --model"},
        {{"info"}, "missing --model"},
        {{"info", "--image", "p.png"}, "unknown option '--image'"},
        {{"convert", "only-one.pth"}, "expected IN and OUT.safetensors"},
        {{"convert", "a", "b", "c"}, "unexpected argument 'c'"},
        {{"version", "--size", "64"}, "unknown option '--size'"},
    };
    for (size_t k = 0; k < LEN(cases); k++) {
        const char *const *a = cases[k].args;
        result r = run_ckey(a[0], a[1], a[2], a[3], a[4], a[5], a[6], a[7]);
        EXPECT(r, 2, err, cases[k].needle);
        CHECKF(strstr(r.err, "--help"), "no pointer to --help: %s", r.err);
        result_free(&r);
    }
}

/* ------------------------------------------------------ the reference */

/*
 * docs/cli.md holds each help text in the fenced block after a line
 * "<!-- ckey-help: ckey ARGS -->" (tools/gen-cli-doc.sh writes them). The
 * block of `args`, malloc'd; NULL with the reason in why[cap] when the doc
 * has no such marker or block.
 */
static char *doc_help_block(const char *doc, const char *args, char *why, size_t cap) {
    char marker[128];
    snprintf(marker, sizeof marker, "<!-- ckey-help: ckey %s -->\n", args);
    const char *m = doc;
    while ((m = strstr(m, marker)) && m != doc && m[-1] != '\n') m++;
    if (!m) {
        snprintf(why, cap, "no line '%.*s'", (int)strlen(marker) - 1, marker);
        return NULL;
    }
    const char *fence = m + strlen(marker);
    if (strncmp(fence, "```", 3)) {
        snprintf(why, cap, "no fenced block after '%.*s'", (int)strlen(marker) - 1, marker);
        return NULL;
    }
    const char *body = strchr(fence, '\n');
    const char *end = body ? strstr(body, "\n```\n") : NULL;
    if (!end) {
        snprintf(why, cap, "the block after '%.*s' is not closed", (int)strlen(marker) - 1, marker);
        return NULL;
    }
    body++;
    end++; /* the block's last line keeps its newline */
    return end > body ? strndup(body, (size_t)(end - body)) : strdup("");
}

/* The first line where a and b differ (1-based), 0 when they are equal. */
static int first_diff_line(const char *a, const char *b, const char **la, const char **lb) {
    int line = 1;
    const char *sa = a, *sb = b;
    for (; *a && *a == *b; a++, b++)
        if (*a == '\n') line++, sa = a + 1, sb = b + 1;
    *la = sa;
    *lb = sb;
    return *a == *b ? 0 : line;
}

/* Every command of `ckey --help`: the lines "  name   what it does" under
 * "commands:" (a continuation line is indented further), up to a blank line. */
static int help_commands(const char *help, char names[][16], int cap) {
    const char *line = strstr(help, "commands:\n");
    int n = 0;
    if (!line) return 0;
    line += strlen("commands:\n");
    for (const char *eol; n < cap && (eol = strchr(line, '\n')) && eol > line; line = eol + 1) {
        if (strncmp(line, "  ", 2) || line[2] == ' ') continue;
        const size_t len = strcspn(line + 2, " \n");
        if (len == 0 || len >= 16) continue;
        memcpy(names[n], line + 2, len);
        names[n++][len] = 0;
    }
    return n;
}

static void check_doc_block(const char *doc, const char *args, const result *r) {
    char why[256];
    char *block = doc_help_block(doc, args, why, sizeof why);
    CHECKF(block != NULL, "docs/cli.md: %s", why);
    if (!block) return;
    const char *la, *lb;
    const int line = first_diff_line(r->out, block, &la, &lb);
    if (!*la) la = "(no line)";
    if (!*lb) lb = "(no line)";
    CHECKF(line == 0,
           "docs/cli.md's block for 'ckey %s' differs from the program's output at line %d:\n"
           "    program: %.*s\n    doc:     %.*s\n  (run tools/gen-cli-doc.sh after changing a "
           "help text)",
           args, line, (int)strcspn(la, "\n"), la, (int)strcspn(lb, "\n"), lb);
    if (line == 0) {
        int lines = 0;
        for (const char *c = block; *c; c++) lines += *c == '\n';
        printf("  docs/cli.md: 'ckey %s' block matches (%d lines)\n", args, lines);
    }
    free(block);
}

static void test_help_in_reference(void) {
    NEED_BINARY();
    size_t size = 0;
    char *doc = (char *)ck_read_file("docs/cli.md", &size);
    CHECKF(doc != NULL, "cannot read docs/cli.md (the tests run from the repository root)");
    if (!doc) return;
    result r = run_ckey("--help", NULL);
    EXPECT(r, 0, out, "commands:");
    check_doc_block(doc, "--help", &r);
    char names[16][16];
    const int n = help_commands(r.out, names, (int)LEN(names));
    result_free(&r);
    CHECKF(n >= 6, "ckey --help lists %d commands", n);
    for (int k = 0; k < n; k++) {
        char args[64];
        snprintf(args, sizeof args, "%.15s --help", names[k]);
        r = run_ckey(names[k], "--help", NULL);
        EXPECT(r, 0, out, "usage: ckey ");
        check_doc_block(doc, args, &r);
        result_free(&r);
    }
    free(doc);
}

/* ------------------------------------------------------- runtime errors */

static int write_png(const char *path, int channels, int w, int h) {
    float *px = calloc((size_t)channels * w * h, sizeof *px);
    if (!px) return 0;
    ckey_error err;
    ckey_status st = ckey_image_write_png(path, px, channels, w, h, 8, &err);
    free(px);
    return st == CKEY_OK;
}

static void test_bad_files(void) {
    NEED_BINARY();
    NEED_PNG();
    char plate[512], hint[512], small[512], text[512], out[512], model[512];
    path_in(plate, sizeof plate, "plate.png");
    path_in(hint, sizeof hint, "hint.png");
    path_in(small, sizeof small, "small.png");
    path_in(text, sizeof text, "notes.png");
    path_in(out, sizeof out, "out");
    path_in(model, sizeof model, "missing-model.pth");
    REQUIRE(write_png(plate, 3, 40, 30));
    REQUIRE(write_png(hint, 1, 40, 30));
    REQUIRE(write_png(small, 1, 20, 15));
    FILE *f = fopen(text, "w");
    REQUIRE(f);
    fputs("not an image\n", f);
    fclose(f);

    result r = run_ckey("run", "--model", model, "--image", "/nonexistent/plate.png", "--hint",
                        hint, "--out", out, NULL);
    EXPECT(r, 1, err, "ckey: error: /nonexistent/plate.png: cannot open");
    result_free(&r);

    r = run_ckey("run", "--model", model, "--image", text, "--hint", hint, "--out", out, NULL);
    EXPECT(r, 1, err, "unknown image format"); /* sniffed, not a PNG/JPEG/TIFF */
    CHECK(strstr(r.err, text) != NULL);
    result_free(&r);

    /* the message names both files and both sizes */
    r = run_ckey("run", "--model", model, "--image", plate, "--hint", small, "--out", out, NULL);
    EXPECT(r, 1, err, "40 x 30");
    CHECK(strstr(r.err, "20 x 15") && strstr(r.err, plate) && strstr(r.err, small));
    result_free(&r);

    /* with --json, stdout still carries one object */
    r = run_ckey("run", "--model", model, "--image", plate, "--hint", small, "--out", out,
                 "--json", NULL);
    EXPECT(r, 1, out, "\"ok\": false");
    result_free(&r);

    r = run_ckey("run", "--model", model, "--image", plate, "--hint", hint, "--out", out, NULL);
    EXPECT(r, 1, err, "ckey: error:");
    CHECK(strstr(r.err, "missing-model.pth") != NULL);
    result_free(&r);

    r = run_ckey("info", "--model", model, NULL);
    EXPECT(r, 1, err, "missing-model.pth");
    result_free(&r);

    r = run_ckey("convert", model, out, NULL);
    EXPECT(r, 1, err, "ckey: error:");
    result_free(&r);

    /* nothing was written by the failed runs */
    struct stat st;
    CHECK(stat(out, &st) != 0);
}

/* ------------------------------------------------------------ end to end */

static const char *tiny_model(char *buf, size_t cap) {
    snprintf(buf, cap, "%s/tiny/tiny.pth", ck_fixtures_dir());
    return access(buf, R_OK) == 0 ? buf : NULL;
}

static void check_output(const char *dir, const char *name, int channels) {
    char path[600];
    snprintf(path, sizeof path, "%s/%s", dir, name);
    ckey_image img;
    ckey_error err;
    ckey_status st = ckey_image_read_png(path, channels == 3 ? CKEY_IMAGE_RGB : CKEY_IMAGE_HINT,
                                         &img, &err);
    CHECKF(st == CKEY_OK, "%s", err.message);
    if (st == CKEY_OK) {
        CHECKF(img.width == 320 && img.height == 180 && img.bit_depth == 16,
               "%s: %d x %d, %d-bit", path, img.width, img.height, img.bit_depth);
        /* a sigmoid output is strictly inside (0, 1) before quantization; at
         * least it must not be one flat value */
        const size_t n = (size_t)img.channels * img.width * img.height;
        float lo = 1, hi = 0;
        for (size_t i = 0; i < n; i++) {
            lo = img.data[i] < lo ? img.data[i] : lo;
            hi = img.data[i] > hi ? img.data[i] : hi;
        }
        printf("  %s: %d x %d, 16-bit, values in [%.4f, %.4f]\n", name, img.width, img.height,
               lo, hi);
        CHECK(hi > lo);
    }
    snprintf(path, sizeof path, "%s/%s.tmp", dir, name);
    CHECK(access(path, F_OK) != 0);
    ckey_image_free(&img);
}

static void test_run_end_to_end(void) {
    NEED_BINARY();
    NEED_PNG();
    char model[512];
    if (!tiny_model(model, sizeof model)) SKIP("%s/tiny/tiny.pth does not exist yet", ck_fixtures_dir());
    char out[512];
    path_in(out, sizeof out, "e2e/nested"); /* created with its parent */
    result r = run_ckey("run", "--model", model, "--image", "examples/plate.png", "--hint",
                        "examples/hint.png", "--out", out, "--size", "64", "--threads", "2", NULL);
    EXPECT(r, 0, out, "wrote");
    CHECK(strstr(r.out, "planned peak") != NULL);
    CHECKF(strstr(r.err, "untrained test weights") != NULL, "no test-weights notice: %s", r.err);
    result_free(&r);
    check_output(out, "alpha.png", 1);
    check_output(out, "fg.png", 3);

    r = run_ckey("run", "--model", model, "--image", "examples/plate.png", "--hint",
                 "examples/hint.png", "--out", out, "--size", "64", "--refiner-strength", "0.5",
                 "--json", NULL);
    EXPECT(r, 0, out, "\"ok\": true");
    CHECK(r.out[0] == '{' && strstr(r.out, "\"test_weights\": true") &&
          strstr(r.out, "\"peak_bytes\":"));
    result_free(&r);
}

static void test_info_and_convert(void) {
    NEED_BINARY();
    char model[512];
    if (!tiny_model(model, sizeof model)) SKIP("%s/tiny/tiny.pth does not exist yet", ck_fixtures_dir());
    result r = run_ckey("info", "--model", model, "--size", "64", NULL);
    EXPECT(r, 0, out, "parameters");
    CHECK(strstr(r.out, "peak") != NULL && strstr(r.out, "buffers") != NULL);
    result_free(&r);
    r = run_ckey("info", "--model", model, "--size", "64", "--json", NULL);
    EXPECT(r, 0, out, "\"num_params\":");
    result_free(&r);

    char st_path[512];
    path_in(st_path, sizeof st_path, "tiny.safetensors");
    r = run_ckey("convert", model, st_path, NULL);
    EXPECT(r, 0, out, "wrote");
    result_free(&r);
    r = run_ckey("info", "--model", st_path, "--size", "64", NULL);
    EXPECT(r, 0, out, "parameters");
    result_free(&r);
}

/* sh -c SCRIPT with $0 = the ckey binary, $1 = `model`, $2 = the work
 * directory (run from the repository root, like the tests). */
static result run_sh(const char *script, const char *model) {
    const char *argv[] = {"/bin/sh", "-c", script, ckey_bin, model, workdir, NULL};
    result r = ck_run(argv, workdir);
    printf("  $ %s  -> %d\n", script, r.code);
    if (r.code != 0 && r.err[0]) printf("    %.*s\n", (int)strcspn(r.err, "\n"), r.err);
    return r;
}

static int same_bytes(const char *a, const char *b) {
    size_t na = 0, nb = 0;
    unsigned char *x = ck_read_file(a, &na), *y = ck_read_file(b, &nb);
    const int same = x && y && na == nb && memcmp(x, y, na) == 0;
    free(x);
    free(y);
    return same;
}

/* A plate or hint from a pipe (`-` or /dev/stdin) or a FIFO is read once
 * and keys exactly as the file does; `-` for both inputs is a usage error. */
static void test_stdin_and_fifo(void) {
    NEED_BINARY();
    NEED_PNG();
    char model[512], ref[512], fifo[512];
    if (!tiny_model(model, sizeof model)) SKIP("%s/tiny/tiny.pth does not exist yet", ck_fixtures_dir());
    path_in(ref, sizeof ref, "stream-ref");
    path_in(fifo, sizeof fifo, "plate.fifo");
    result r = run_ckey("run", "--model", model, "--image", "examples/plate.png", "--hint", "examples/hint.png",
                        "--out", ref, "--size", "64", "--threads", "2", NULL);
    REQUIRE(r.code == 0);
    result_free(&r);
    static const struct {
        const char *out, *script;
    } cases[] = {
        {"stream-pipe", "cat examples/plate.png | \"$0\" run --model \"$1\" --image - --hint examples/hint.png "
                        "--out \"$2/stream-pipe\" --size 64 --threads 2"},
        {"stream-dev-stdin", "cat examples/hint.png | \"$0\" run --model \"$1\" --image examples/plate.png "
                             "--hint /dev/stdin --out \"$2/stream-dev-stdin\" --size 64 --threads 2"},
        {"stream-fifo", "mkfifo \"$2/plate.fifo\" && { cat examples/plate.png > \"$2/plate.fifo\" & } && "
                        "cat examples/hint.png | \"$0\" run --model \"$1\" --image \"$2/plate.fifo\" --hint - "
                        "--out \"$2/stream-fifo\" --size 64 --threads 2"},
    };
    for (size_t k = 0; k < LEN(cases); k++) {
        r = run_sh(cases[k].script, model);
        CHECKF(r.code == 0, "exit %d: %s", r.code, r.err);
        result_free(&r);
        for (int i = 0; i < 2; i++) {
            const char *name = i ? "fg.png" : "alpha.png";
            char got[600], want[600];
            snprintf(got, sizeof got, "%s/%s/%s", workdir, cases[k].out, name);
            snprintf(want, sizeof want, "%s/%s", ref, name);
            CHECKF(same_bytes(got, want), "%s differs from %s", got, want);
        }
    }
    /* a writer still blocked on the FIFO (had ckey not opened it) gets a
     * reader and goes */
    const int fd = open(fifo, O_RDONLY | O_NONBLOCK);
    if (fd >= 0) close(fd);
    unlink(fifo);

    r = run_ckey("run", "--model", model, "--image", "-", "--hint", "-", "--out", ref, NULL);
    EXPECT(r, 2, err, "only one of --image and --hint can be - (standard input)");
    result_free(&r);
}

/* A checkpoint with a NaN or Inf weight: `run` and `info` fail (exit 1)
 * naming the tensor and the element, and `run` writes nothing. */
static void test_damaged_model(void) {
    NEED_BINARY();
    NEED_PNG();
    char model[512], clean[512], bad[512], out[512];
    if (!tiny_model(model, sizeof model)) SKIP("%s/tiny/tiny.pth does not exist yet", ck_fixtures_dir());
    path_in(clean, sizeof clean, "clean.safetensors");
    path_in(bad, sizeof bad, "damaged.safetensors");
    path_in(out, sizeof out, "damaged-out");
    result r = run_ckey("convert", model, clean, NULL);
    REQUIRE(r.code == 0);
    result_free(&r);
    REQUIRE(ck_poison_safetensors(clean, bad, "refiner.final.weight", 12, NAN));
    r = run_ckey("run", "--model", bad, "--image", "examples/plate.png", "--hint", "examples/hint.png",
                 "--out", out, "--size", "64", "--threads", "2", NULL);
    EXPECT(r, 1, err, "tensor 'refiner.final.weight' element 12 is NaN: the checkpoint is damaged");
    CHECK(strstr(r.err, bad) != NULL);
    result_free(&r);
    struct stat st;
    CHECK(stat(out, &st) != 0);
    REQUIRE(ck_poison_safetensors(clean, bad, "encoder.model.pos_embed", 77, INFINITY));
    r = run_ckey("info", "--model", bad, "--json", NULL);
    EXPECT(r, 1, err, "tensor 'encoder.model.pos_embed' element 77 is +Inf");
    CHECK(strstr(r.out, "\"ok\": false") != NULL);
    result_free(&r);
}

int main(int argc, char **argv) {
    /* <build>/tests/test-cli -> <build>/ckey */
    char self[PATH_MAX];
    snprintf(self, sizeof self, "%s", argv[0]);
    char *slash = strrchr(self, '/');
    if (slash) *slash = 0;
    else snprintf(self, sizeof self, ".");
    snprintf(ckey_bin, sizeof ckey_bin, "%s/../ckey", self);
    snprintf(workdir, sizeof workdir, "/tmp/ckey-test-cli-XXXXXX");
    if (!mkdtemp(workdir)) {
        fprintf(stderr, "cannot create a temporary directory: %s\n", strerror(errno));
        return 1;
    }
    static const ck_test_case cases[] = {
        {"help_and_version", test_help_and_version},
        {"usage_errors", test_usage_errors},
        {"help_in_reference", test_help_in_reference},
        {"bad_files", test_bad_files},
        {"run_end_to_end", test_run_end_to_end},
        {"info_and_convert", test_info_and_convert},
        {"damaged_model", test_damaged_model},
        {"stdin_and_fifo", test_stdin_and_fifo},
    };
    int rc = ck_test_main(cases, (int)LEN(cases), argc, argv);
    ck_remove_tree(workdir);
    return rc;
}
