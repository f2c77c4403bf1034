/*
 * The ckey CLI as a user meets it: exit codes (0 ok, 1 runtime, 2 usage) and
 * messages for bad arguments and bad files, every --help text against the
 * reference in docs/cli.md, then an end-to-end `ckey run` on examples/ with
 * the tiny fixture model. The binary is the ckey next to this
 * test's build tree (<dir of argv[0]>/../ckey).
 */
#include <ctype.h>
#include <dirent.h>
#include <fcntl.h>
#include <limits.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "ckey_clip.h"
#include "ckey_media.h"
#include "ckey.h"
#include "media/image.h"
#include "pixel/pixel.h"
#include "support/clip.h"
#include "support/testutil.h"
#include "../programs/ckey/sha256.h"

#ifdef CK_HAVE_PNG
#include <png.h>
#endif

#define LEN(a) (sizeof(a) / sizeof((a)[0]))

static char ckey_bin[PATH_MAX + 16];
static char workdir[256];

typedef ck_run_result result;
#define result_free ck_run_free

/* ckey ARGS... (NULL-terminated); run_ckey_opts in a working directory and
 * with environment changes (ck_run_opts). The command, its exit code and the
 * first line of its stderr echoed. */
static const ck_cli cli = {ckey_bin, workdir, NULL, 2};
#define run_ckey(...) ck_cli_run(&cli, NULL, __VA_ARGS__)
#define run_ckey_opts(opt, ...) ck_cli_run(&cli, (opt), __VA_ARGS__)

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
    /* no temporary file of `name` is left (ckey_temp_path: "<name>.ckey-...tmp") */
    DIR *d = opendir(dir);
    for (struct dirent *e; d && (e = readdir(d));)
        CHECKF(strncmp(e->d_name, name, strlen(name)) || !strstr(e->d_name, ".tmp"),
               "%s/%s was left behind", dir, e->d_name);
    if (d) closedir(d);
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

/* ------------------------------------------------------ finding the model */

/* The tiny model's absolute path (the lookup tests run in other directories). */
static const char *tiny_abs(char *buf, size_t cap) {
    ck_tiny_model_path(buf, cap);
    return access(buf, R_OK) == 0 ? buf : NULL;
}

/* <workdir>/<name>, created (a fresh empty directory). */
static void fresh_dir(char *buf, size_t cap, const char *name) {
    path_in(buf, cap, name);
    ck_remove_tree(buf);
    mkdir(buf, 0777);
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

static void sha256_of_file(const char *path, char hex[65]) {
    size_t n = 0;
    unsigned char *b = ck_read_file(path, &n);
    sha256_ctx c;
    uint8_t d[32];
    sha256_init(&c);
    sha256_update(&c, b, b ? n : 0);
    sha256_final(&c, d);
    sha256_hex(d, hex);
    free(b);
}

/* A copy of a checkpoint and of its sidecar <file>.json. */
static int copy_model(const char *from, const char *to) {
    char a[1100], b[1100];
    snprintf(a, sizeof a, "%s.json", from);
    snprintf(b, sizeof b, "%s.json", to);
    return ck_copy_file(from, to) && (access(a, F_OK) != 0 || ck_copy_file(a, b));
}

/* No --model, no $CKEY_MODEL, an empty data directory, no upstream layout:
 * every command that needs a model says where it looked and how to get one. */
static void test_model_not_found(void) {
    NEED_BINARY();
    char home[600], cwd[600], xdg[600], env_home[700], env_xdg[700], data[700];
    fresh_dir(home, sizeof home, "nf-home");
    fresh_dir(cwd, sizeof cwd, "nf-cwd");
    path_in(xdg, sizeof xdg, "nf-xdg");
    snprintf(env_home, sizeof env_home, "HOME=%s", home);
    snprintf(env_xdg, sizeof env_xdg, "XDG_DATA_HOME=%s", xdg);
    const char *env_default[] = {env_home, "XDG_DATA_HOME", "CKEY_MODEL", NULL};
    const char *env_with_xdg[] = {env_home, env_xdg, "CKEY_MODEL", NULL};
    for (int variant = 0; variant < 2; variant++) {
        ck_run_options opt = {cwd, variant ? env_with_xdg : env_default, 0, 0};
        if (variant) snprintf(data, sizeof data, "%s/ckey", xdg);
        else snprintf(data, sizeof data, "%s/.local/share/ckey", home);
        for (int cmd = 0; cmd < 3; cmd++) {
            result r = cmd == 0   ? run_ckey_opts(&opt, "info", NULL)
                       : cmd == 1 ? run_ckey_opts(&opt, "run", "--image", "p.png", "--hint",
                                                  "h.png", "--out", "o", NULL)
                                  : run_ckey_opts(&opt, "key", "shot", NULL);
            EXPECT(r, 2, err, "missing --model");
            static const char *const places[] = {
                "$CKEY_MODEL", "CorridorKeyModule/checkpoints", "CorridorKey_v1.0.pth",
                "github.com/nikopueringer/CorridorKey/releases", "never downloads",
                "ckey install-model"};
            for (size_t k = 0; k < LEN(places); k++)
                CHECKF(strstr(r.err, places[k]), "the message lacks '%s': %s", places[k], r.err);
            CHECKF(strstr(r.err, data), "the message does not name the data directory %s: %s",
                   data, r.err);
            result_free(&r);
        }
    }
}

/* $CKEY_MODEL names the model; --model wins over it; a bad one is named. */
static void test_model_from_env(void) {
    NEED_BINARY();
    char model[512], env_model[600], bogus[600], env_bogus[700];
    if (!tiny_abs(model, sizeof model)) SKIP("no tiny model");
    snprintf(env_model, sizeof env_model, "CKEY_MODEL=%s", model);
    path_in(bogus, sizeof bogus, "no-such-model.pth");
    snprintf(env_bogus, sizeof env_bogus, "CKEY_MODEL=%s", bogus);
    const char *env[] = {env_model, NULL};
    ck_run_options opt = {NULL, env, 0, 0};
    result r = run_ckey_opts(&opt, "info", "--threads", "2", "--device", "cpu", NULL);
    EXPECT(r, 0, out, model);
    result_free(&r);
    r = run_ckey_opts(&opt, "run", "--image", "examples/plate.png", "--hint", "examples/hint.png",
                      "--out", workdir, "--size", "64", "--threads", "2", "--device", "cpu",
                      "--json", NULL);
    if (HAVE_PNG) EXPECT(r, 0, out, "\"ok\": true");
    result_free(&r);

    const char *env2[] = {env_bogus, NULL};
    opt.env = env2;
    r = run_ckey_opts(&opt, "info", "--threads", "2", NULL);
    EXPECT(r, 1, err, bogus);
    CHECKF(strstr(r.err, "CKEY_MODEL"), "the error does not say the path came from $CKEY_MODEL: %s",
           r.err);
    result_free(&r);
    r = run_ckey_opts(&opt, "info", "--model", model, "--threads", "2", "--device", "cpu", NULL);
    EXPECT(r, 0, out, model);
    result_free(&r);
}

/* install-model: the data directory is created, the copy is whole and
 * named after the file, its SHA-256 printed; later commands find it. */
static void test_install_model(void) {
    NEED_BINARY();
    char model[512], xdg[600], env_xdg[700], home[600], env_home[700], cwd[600], dest[800];
    char hex[65];
    if (!tiny_abs(model, sizeof model)) SKIP("no tiny model");
    sha256_of_file(model, hex);
    path_in(xdg, sizeof xdg, "inst-xdg");
    ck_remove_tree(xdg);
    fresh_dir(home, sizeof home, "inst-home");
    fresh_dir(cwd, sizeof cwd, "inst-cwd");
    snprintf(env_xdg, sizeof env_xdg, "XDG_DATA_HOME=%s", xdg);
    snprintf(env_home, sizeof env_home, "HOME=%s", home);
    const char *env[] = {env_xdg, env_home, "CKEY_MODEL", NULL};
    ck_run_options opt = {cwd, env, 0, 0};

    result r = run_ckey_opts(&opt, "install-model", model, NULL);
    snprintf(dest, sizeof dest, "%s/ckey/tiny.pth", xdg);
    EXPECT(r, 0, out, dest);
    CHECKF(strstr(r.out, hex), "install-model does not print the SHA-256 %s: %s", hex, r.out);
    result_free(&r);
    CHECK(ck_same_file(model, dest));
    /* with its sidecar (head_dim, groups), which the loader reads beside it */
    char side[600];
    snprintf(side, sizeof side, "%s.json", model);
    snprintf(dest, sizeof dest, "%s/ckey/tiny.pth.json", xdg);
    CHECK(ck_same_file(side, dest));
    snprintf(dest, sizeof dest, "%s/ckey", xdg);
    CHECKF(ck_count_entries(dest) == 2, "%s holds %d entries, want 2", dest, ck_count_entries(dest));

    /* found without --model */
    snprintf(dest, sizeof dest, "%s/ckey/tiny.pth", xdg);
    r = run_ckey_opts(&opt, "info", "--threads", "2", "--device", "cpu", NULL);
    EXPECT(r, 0, out, dest);
    result_free(&r);

    /* again, over the installed copy, with --json */
    r = run_ckey_opts(&opt, "install-model", model, "--json", NULL);
    EXPECT(r, 0, out, "\"ok\": true");
    char want[128];
    snprintf(want, sizeof want, "\"sha256\": \"%s\"", hex);
    CHECKF(strstr(r.out, want), "no %s in %s", want, r.out);
    result_free(&r);
    snprintf(dest, sizeof dest, "%s/ckey", xdg);
    CHECK(ck_count_entries(dest) == 2);

    /* without $XDG_DATA_HOME: ~/.local/share/ckey */
    const char *env_home_only[] = {env_home, "XDG_DATA_HOME", "CKEY_MODEL", NULL};
    opt.env = env_home_only;
    r = run_ckey_opts(&opt, "install-model", model, NULL);
    snprintf(dest, sizeof dest, "%s/.local/share/ckey/tiny.pth", home);
    EXPECT(r, 0, out, dest);
    result_free(&r);
    CHECK(ck_same_file(model, dest));
    r = run_ckey_opts(&opt, "info", "--threads", "2", "--device", "cpu", NULL);
    EXPECT(r, 0, out, dest);
    result_free(&r);
}

/* install-model refuses what it cannot load, and leaves nothing behind. */
static void test_install_model_refuses(void) {
    NEED_BINARY();
    char model[512], xdg[600], env_xdg[700], data[700], bad[600], odd[600], missing[600];
    if (!tiny_abs(model, sizeof model)) SKIP("no tiny model");
    path_in(xdg, sizeof xdg, "bad-xdg");
    ck_remove_tree(xdg);
    snprintf(env_xdg, sizeof env_xdg, "XDG_DATA_HOME=%s", xdg);
    snprintf(data, sizeof data, "%s/ckey", xdg);
    const char *env[] = {env_xdg, "CKEY_MODEL", NULL};
    ck_run_options opt = {NULL, env, 0, 0};
    path_in(bad, sizeof bad, "bad.pth");
    FILE *f = fopen(bad, "w");
    REQUIRE(f);
    fputs("PK\003\004 not a checkpoint\n", f);
    fclose(f);

    result r = run_ckey_opts(&opt, "install-model", bad, NULL);
    EXPECT(r, 1, err, bad);
    result_free(&r);
    struct stat st;
    CHECKF(stat(xdg, &st) != 0, "%s was created for a refused file", xdg);

    /* an existing data directory is left as it was */
    REQUIRE(mkdir(xdg, 0777) == 0 && mkdir(data, 0777) == 0);
    r = run_ckey_opts(&opt, "install-model", bad, NULL);
    EXPECT(r, 1, err, bad);
    result_free(&r);
    CHECKF(ck_count_entries(data) == 0, "%s holds %d entries after a refused install", data,
           ck_count_entries(data));

    path_in(missing, sizeof missing, "missing.pth");
    r = run_ckey_opts(&opt, "install-model", missing, NULL);
    EXPECT(r, 1, err, missing);
    result_free(&r);
    /* the lookup finds *.pth and *.safetensors only */
    path_in(odd, sizeof odd, "tiny.ckpt");
    REQUIRE(ck_copy_file(model, odd));
    r = run_ckey_opts(&opt, "install-model", odd, NULL);
    EXPECT(r, 1, err, ".safetensors");
    result_free(&r);
    CHECK(ck_count_entries(data) == 0);

    r = run_ckey_opts(&opt, "install-model", NULL);
    EXPECT(r, 2, err, "FILE");
    result_free(&r);
    r = run_ckey_opts(&opt, "install-model", "--help", NULL);
    EXPECT(r, 0, out, "usage: ckey install-model");
    result_free(&r);
}

/* The order: $CKEY_MODEL, the data directory (CorridorKey_v1.0.pth, else its
 * only checkpoint; several are refused), then upstream's layout. */
static void test_model_lookup_order(void) {
    NEED_BINARY();
    char model[512], xdg[600], env_xdg[700], env_model[700], data[700], p[800], cwd[600];
    if (!tiny_abs(model, sizeof model)) SKIP("no tiny model");
    fresh_dir(xdg, sizeof xdg, "order-xdg");
    snprintf(data, sizeof data, "%s/ckey", xdg);
    REQUIRE(mkdir(data, 0777) == 0);
    fresh_dir(cwd, sizeof cwd, "order-cwd");
    snprintf(env_xdg, sizeof env_xdg, "XDG_DATA_HOME=%s", xdg);
    const char *env[] = {env_xdg, "CKEY_MODEL", NULL};
    ck_run_options opt = {cwd, env, 0, 0};

    /* upstream's layout, under the current directory */
    snprintf(p, sizeof p, "%s/CorridorKeyModule", cwd);
    REQUIRE(mkdir(p, 0777) == 0);
    snprintf(p, sizeof p, "%s/CorridorKeyModule/checkpoints", cwd);
    REQUIRE(mkdir(p, 0777) == 0);
    snprintf(p, sizeof p, "%s/CorridorKeyModule/checkpoints/mine.pth", cwd);
    REQUIRE(copy_model(model, p));
    result r = run_ckey_opts(&opt, "info", "--threads", "2", "--device", "cpu", NULL);
    EXPECT(r, 0, out, "CorridorKeyModule/checkpoints/mine.pth");
    result_free(&r);

    /* the data directory comes first; two checkpoints there are ambiguous */
    snprintf(p, sizeof p, "%s/a.pth", data);
    REQUIRE(copy_model(model, p));
    r = run_ckey_opts(&opt, "info", "--threads", "2", "--device", "cpu", NULL);
    EXPECT(r, 0, out, p);
    result_free(&r);
    snprintf(p, sizeof p, "%s/b.safetensors", data);
    REQUIRE(copy_model(model, p));
    r = run_ckey_opts(&opt, "info", NULL);
    EXPECT(r, 2, err, "a.pth");
    CHECKF(strstr(r.err, "b.safetensors") && strstr(r.err, data), "stderr: %s", r.err);
    result_free(&r);
    /* ... unless one is the official name */
    snprintf(p, sizeof p, "%s/CorridorKey_v1.0.pth", data);
    REQUIRE(copy_model(model, p));
    r = run_ckey_opts(&opt, "info", "--threads", "2", "--device", "cpu", NULL);
    EXPECT(r, 0, out, p);
    result_free(&r);

    /* $CKEY_MODEL before the data directory */
    snprintf(env_model, sizeof env_model, "CKEY_MODEL=%s", model);
    const char *env2[] = {env_xdg, env_model, NULL};
    opt.env = env2;
    r = run_ckey_opts(&opt, "info", "--threads", "2", "--device", "cpu", NULL);
    EXPECT(r, 0, out, model);
    result_free(&r);
}

/* info without --size plans at the checkpoint's training size. */
static void test_info_native_size(void) {
    NEED_BINARY();
    char model[512];
    if (!tiny_model(model, sizeof model)) SKIP("no tiny model");
    result r = run_ckey("info", "--model", model, "--threads", "2", "--device", "cpu", NULL);
    EXPECT(r, 0, out, "at S = 128 ");
    result_free(&r);
    r = run_ckey("info", "--model", model, "--threads", "2", "--device", "cpu", "--json", NULL);
    EXPECT(r, 0, out, "\"size\": 128,");
    result_free(&r);
    r = run_ckey("info", "--model", model, "--size", "64", "--threads", "2", "--device", "cpu", NULL);
    EXPECT(r, 0, out, "at S = 64 ");
    result_free(&r);
}

static void test_sha256_vectors(void) {
    static const struct {
        const char *msg;
        long repeat;
        const char *hex;
    } v[] = {
        {"", 1, "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855"},
        {"abc", 1, "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad"},
        {"abcdbcdecdefdefgefghfghighijhijkijkljklmklmnlmnomnopnopq", 1,
         "248d6a61d20638b8e5c026930c3e6039a33ce45964ff2167f6ecedd419db06c1"},
        {"abcdefghbcdefghicdefghijdefghijkefghijklfghijklmghijklmnhijklmnoijklmnopjklmnopqklmnopqr"
         "lmnopqrsmnopqrstnopqrstu", 1,
         "cf5b16a778af8380036ce59e7b0492370b249b11e8f07a51afac45037afee9d1"},
        /* around the padding boundary */
        {"a", 55, "9f4390f8d30c2dd92ec9f095b65e2b9ae9b0a925a5258e241c9f1e910f734318"},
        {"a", 56, "b35439a4ac6f0948b6d6f9e3c6af0f5f590ce20f1bde7090ef7970686ec6738a"},
        {"a", 63, "7d3e74a05d7db15bce4ad9ec0658ea98e3f06eeecf16b4c6fff2da457ddc2f34"},
        {"a", 64, "ffe054fe7ae0cb6dc65c3af9b61d5209f439851db43d0ba5997337df154668eb"},
        {"a", 1000000, "cdc76e5c9914fb9281a1c7e284d73e67f1809a48a497200e046d39ccc7112cd0"},
    };
    for (size_t k = 0; k < LEN(v); k++) {
        /* byte by byte for repeated messages, whole for the others, and in
         * chunks of 7 (crossing block edges) */
        for (int mode = 0; mode < 2; mode++) {
            sha256_ctx c;
            sha256_init(&c);
            const size_t len = strlen(v[k].msg);
            if (mode == 0) {
                for (long i = 0; i < v[k].repeat; i++) sha256_update(&c, v[k].msg, len);
            } else {
                char *all = malloc(len * (size_t)v[k].repeat + 1);
                REQUIRE(all);
                for (long i = 0; i < v[k].repeat; i++) memcpy(all + (size_t)i * len, v[k].msg, len);
                const size_t total = len * (size_t)v[k].repeat;
                for (size_t at = 0; at < total; at += 7)
                    sha256_update(&c, all + at, total - at < 7 ? total - at : 7);
                free(all);
            }
            uint8_t d[32];
            char hex[65];
            sha256_final(&c, d);
            sha256_hex(d, hex);
            CHECKF(!strcmp(hex, v[k].hex), "sha256('%.20s' x %ld, mode %d) = %s, want %s",
                   v[k].msg, v[k].repeat, mode, hex, v[k].hex);
        }
    }
}

/* ------------------------------------------------------- small frictions */

/* run --help: the --image line names every format the text lists; devices
 * --help does not call the CUDA backend unfinished. */
static void test_help_details(void) {
    NEED_BINARY();
    result r = run_ckey("run", "--help", NULL);
    EXPECT(r, 0, out, "--image");
    const char *opts_at = strstr(r.out, "\noptions:\n");
    const char *image = strstr(r.out, "\n  --image ");
    REQUIRE(opts_at && image);
    const size_t line_len = strcspn(image + 1, "\n");
    static const char *const formats[] = {"PNG", "JPEG", "TIFF", "OpenEXR"};
    for (size_t k = 0; k < LEN(formats); k++) {
        const char *in_text = strstr(r.out, formats[k]);
        if (!in_text || in_text > opts_at) continue;
        char *line = strndup(image + 1, line_len);
        CHECKF(strstr(line, formats[k]), "run --help: the text lists %s but the --image line "
                                         "does not: %s", formats[k], line);
        free(line);
    }
    result_free(&r);
    r = run_ckey("devices", "--help", NULL);
    EXPECT(r, 0, out, "CUDA");
    CHECKF(!strstr(r.out, "in progress"), "devices --help: %s", r.out);
    result_free(&r);
}

/* A budget is printed in a unit that shows it: 1K is 1.0 KiB, not 0.0 MiB. */
static void test_budget_units(void) {
    NEED_BINARY();
    char model[512];
    if (!tiny_model(model, sizeof model)) SKIP("no tiny model");
    static const struct {
        const char *budget, *shown;
    } cases[] = {{"1K", "budget of 1.0 KiB"}, {"1000", "budget of 1000 bytes"},
                 {"2.5M", "budget of 2.5 MiB"}};
    for (size_t k = 0; k < LEN(cases); k++) {
        result r = run_ckey("info", "--model", model, "--size", "128", "--threads", "2", "--device",
                            "cpu", "--budget", cases[k].budget, NULL);
        EXPECT(r, 1, err, cases[k].shown);
        CHECKF(!strstr(r.err, " 0.0 "), "a figure rounds to 0.0: %s", r.err);
        result_free(&r);
    }
}

/* key SHOT_DIR --out DIR: the passes go to DIR (the dry run names it; test-key
 * writes them where the build has OpenEXR). */
static void test_key_shot_out(void) {
    NEED_BINARY();
    NEED_PNG();
    char model[512], shot[512], out[600];
    if (!tiny_model(model, sizeof model)) SKIP("no tiny model");
    REQUIRE(ck_make_shot(shot, sizeof shot, workdir, "shot", 2));
    path_in(out, sizeof out, "passes");
    result r = run_ckey("key", shot, "--out", out, "--model", model, "--dry-run", "--json", NULL);
    char want[700];
    snprintf(want, sizeof want, "\"out\":\"%s\"", out);
    EXPECT(r, 0, out, want);
    result_free(&r);
    r = run_ckey("key", shot, "--out", out, "--plate", shot, "--model", model, "--dry-run", NULL);
    EXPECT(r, 2, err, "SHOT_DIR");
    result_free(&r);
    r = run_ckey("key", "--help", NULL);
    EXPECT(r, 0, out, "--out DIR");
    const char *line = strstr(r.out, "\n  --out DIR");
    CHECKF(line && strstr(line, "SHOT_DIR/Output"), "key --help's --out line: %.200s",
           line ? line : "(none)");
    result_free(&r);
    ck_remove_tree(shot);
}

/* ------------------------------------------------------- README samples */

/*
 * README.md and docs/cli.md show what some commands print, each in the fenced
 * block after a line "<!-- ckey-sample: ckey ARGS -->" or "<!-- ckey-sample:
 * make example -->" (the ckey command of the Makefile's example target);
 * tools/gen-samples.sh writes them. The command runs in a directory holding
 * links to the repository's tests/ and examples/, with stderr merged into
 * stdout. Timing figures ("0.002 s") differ from run to run and are compared
 * as equal whatever their value.
 */

/* The ckey arguments of the Makefile's example recipe ("build/ckey ARGS",
 * continuation lines joined, blanks collapsed); malloc'd, NULL if none. */
static char *make_example_args(void) {
    size_t n = 0;
    char *mk = (char *)ck_read_file("Makefile", &n);
    if (!mk) return NULL;
    char *rule = strstr(mk, "\nexample:");
    char *cmd = rule ? calloc(1, n + 1) : NULL;
    size_t len = 0;
    for (char *line = rule ? strchr(rule + 1, '\n') : NULL; cmd && line && line[1] == '\t';
         line = strchr(line + 1, '\n')) {
        for (const char *c = line + 1; *c && *c != '\n'; c++) {
            const int blank = *c == ' ' || *c == '\t' || (*c == '\\' && (c[1] == '\n' || !c[1]));
            if (blank) {
                if (len && cmd[len - 1] != ' ') cmd[len++] = ' ';
            } else {
                cmd[len++] = *c;
            }
        }
        if (len && cmd[len - 1] != ' ') cmd[len++] = ' ';
    }
    free(mk);
    if (!cmd) return NULL;
    while (len && cmd[len - 1] == ' ') cmd[--len] = 0;
    static const char prefix[] = "build/ckey ";
    char *args = strncmp(cmd, prefix, strlen(prefix)) ? NULL : strdup(cmd + strlen(prefix));
    free(cmd);
    return args;
}

/* `s` with every timing figure (digits with one '.', then " s") written as
 * "T s"; malloc'd. */
static char *mask_timings(const char *s) {
    char *m = malloc(strlen(s) + 1);
    if (!m) return NULL;
    size_t k = 0;
    for (size_t i = 0; s[i];) {
        const int starts = (i == 0 || !(isdigit((unsigned char)s[i - 1]) || s[i - 1] == '.')) &&
                           isdigit((unsigned char)s[i]);
        size_t j = i;
        int dots = 0;
        while (starts && (isdigit((unsigned char)s[j]) || (s[j] == '.' && !dots++))) j++;
        if (starts && dots == 1 && s[j - 1] != '.' && s[j] == ' ' && s[j + 1] == 's' &&
            !isalnum((unsigned char)s[j + 2])) {
            m[k++] = 'T';
            i = j;
        } else {
            m[k++] = s[i++];
        }
    }
    m[k] = 0;
    return m;
}

/* Run sample `what` ("ckey ARGS" or "make example") in `dir`; malloc'd
 * output, NULL with the reason in why[cap]. */
static char *run_sample(const char *what, const char *dir, char *why, size_t cap) {
    char *args = NULL;
    if (!strcmp(what, "make example")) {
        args = make_example_args();
        if (!args) snprintf(why, cap, "no 'build/ckey ...' recipe for example: in the Makefile");
    } else if (!strncmp(what, "ckey ", 5)) {
        args = strdup(what + 5);
    } else {
        snprintf(why, cap, "'%s' is neither 'ckey ARGS' nor 'make example'", what);
    }
    if (!args) return NULL;
    const char *argv[32];
    int argc = 0;
    argv[argc++] = ckey_bin;
    for (char *t = strtok(args, " "); t && argc < (int)LEN(argv) - 1; t = strtok(NULL, " "))
        argv[argc++] = t;
    argv[argc] = NULL;
    ck_run_options opt = {dir, NULL, 1, 0};
    result r = ck_run_opts(argv, workdir, &opt);
    printf("  $ (in %s) %s -> %d\n", dir, what, r.code);
    free(args);
    if (r.code != 0) {
        snprintf(why, cap, "'%s' exited with %d: %.300s", what, r.code, r.out);
        result_free(&r);
        return NULL;
    }
    free(r.err);
    return r.out;
}

/* Check every sample block of `doc_path`; returns how many it holds. */
static int check_samples(const char *doc_path, const char *dir) {
    size_t size = 0;
    char *doc = (char *)ck_read_file(doc_path, &size);
    CHECKF(doc != NULL, "cannot read %s (the tests run from the repository root)", doc_path);
    if (!doc) return 0;
    static const char marker[] = "<!-- ckey-sample: ";
    int n = 0;
    for (const char *m = doc; (m = strstr(m, marker)); m += strlen(marker)) {
        if (m != doc && m[-1] != '\n') continue;
        const char *what0 = m + strlen(marker);
        const char *close = strstr(what0, " -->\n");
        const char *eol = strchr(what0, '\n');
        if (!close || (eol && close > eol)) {
            CHECKF(0, "%s: a sample marker is not closed by ' -->'", doc_path);
            continue;
        }
        char *what = strndup(what0, (size_t)(close - what0));
        const char *fence = close + strlen(" -->\n");
        const char *body = !strncmp(fence, "```", 3) ? strchr(fence, '\n') : NULL;
        const char *end = body ? strstr(body, "\n```\n") : NULL;
        CHECKF(end != NULL, "%s: no closed fenced block after the sample '%s'", doc_path, what);
        char why[512] = "";
        char *out = end ? run_sample(what, dir, why, sizeof why) : NULL;
        CHECKF(!end || out, "%s: sample '%s': %s", doc_path, what, why);
        if (out) {
            char *block = strndup(body + 1, (size_t)(end + 1 - (body + 1)));
            char *mo = mask_timings(out), *mb = mask_timings(block);
            const char *la, *lb;
            const int line = mo && mb ? first_diff_line(mo, mb, &la, &lb) : -1;
            if (line > 0) {
                if (!*la) la = "(no line)";
                if (!*lb) lb = "(no line)";
            }
            CHECKF(line == 0,
                   "%s: the sample of '%s' differs from what the program prints at line %d:\n"
                   "    program: %.*s\n    doc:     %.*s\n  (run tools/gen-samples.sh)",
                   doc_path, what, line, line > 0 ? (int)strcspn(la, "\n") : 0,
                   line > 0 ? la : "", line > 0 ? (int)strcspn(lb, "\n") : 0, line > 0 ? lb : "");
            if (line == 0) printf("  %s: the sample of '%s' matches\n", doc_path, what);
            free(mo);
            free(mb);
            free(block);
            free(out);
        }
        free(what);
        n++;
    }
    free(doc);
    return n;
}

static void test_doc_samples(void) {
    NEED_BINARY();
    NEED_PNG();
    char model[512];
    if (!tiny_model(model, sizeof model)) SKIP("no tiny model");
    char dir[600], link[700], *root = realpath(".", NULL);
    REQUIRE(root);
    fresh_dir(dir, sizeof dir, "samples");
    static const char *const shared[] = {"tests", "examples"};
    for (size_t k = 0; k < LEN(shared); k++) {
        char target[PATH_MAX + 64];
        snprintf(target, sizeof target, "%s/%s", root, shared[k]);
        snprintf(link, sizeof link, "%s/%s", dir, shared[k]);
        CHECK(symlink(target, link) == 0);
    }
    free(root);
    const int in_readme = check_samples("README.md", dir);
    CHECKF(in_readme >= 2, "README.md has %d sample blocks (make example, ckey info), want 2",
           in_readme);
    check_samples("docs/cli.md", dir);
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
            CHECKF(ck_same_file(got, want), "%s differs from %s", got, want);
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

/* ------------------------------------------------- the run's memory */

/* The integer after "key": (or "key":) in a JSON text, from `from` on; -1
 * when absent. */
static long long json_int(const char *json, const char *key) {
    char pat[128];
    snprintf(pat, sizeof pat, "\"%s\":", key);
    const char *p = json ? strstr(json, pat) : NULL;
    if (!p) return -1;
    p += strlen(pat);
    while (*p == ' ') p++;
    return strtoll(p, NULL, 10);
}

/* As the CLI prints a figure (programs/ckey/output.c fmt_bytes). */
static const char *fmt_bytes(char *buf, size_t cap, long long bytes) {
    const double b = (double)bytes;
    if (bytes < 1024) snprintf(buf, cap, "%lld bytes", bytes);
    else if (b < 1024.0 * 1024) snprintf(buf, cap, "%.1f KiB", b / 1024.0);
    else if (b < 1024.0 * 1024 * 1024) snprintf(buf, cap, "%.1f MiB", b / (1024.0 * 1024));
    else snprintf(buf, cap, "%.2f GiB", b / (1024.0 * 1024 * 1024));
    return buf;
}

/* The parts of a run_memory object (ckey run --json, ckey info --json). */
typedef struct run_parts {
    long long network, model, io, decoded, hint, resize, output, post, encode, plate, total, host;
    long long frames, writers;
} run_parts;

static run_parts parse_run_parts(const char *json) {
    const char *m = json ? strstr(json, "\"run_memory\"") : NULL;
    if (!m && json) m = strstr(json, "\"event\":\"plan\"");
    run_parts p;
    p.network = json_int(m, "network_bytes"), p.model = json_int(m, "model_bytes");
    p.io = json_int(m, "io_bytes"), p.decoded = json_int(m, "decoded_bytes");
    p.hint = json_int(m, "hint_bytes"), p.resize = json_int(m, "resize_bytes");
    p.output = json_int(m, "output_bytes"), p.post = json_int(m, "post_bytes");
    p.encode = json_int(m, "encode_bytes"), p.plate = json_int(m, "plate_bytes");
    p.total = json_int(m, "total_bytes"), p.host = json_int(m, "host_bytes");
    p.frames = json_int(m, "frames_in_flight"), p.writers = json_int(m, "writers");
    return p;
}

/* Every part is a figure, and the parts add up. */
static void check_sums(const run_parts *p, const char *what) {
    CHECKF(p->network > 0 && p->model >= 0 && p->io >= 0 && p->decoded > 0 && p->hint >= 0 &&
               p->resize > 0 && p->output > 0 && p->post >= 0 && p->encode > 0,
           "%s: a part is missing", what);
    CHECKF(p->plate == p->decoded + p->hint + p->resize + p->output + p->post + p->encode,
           "%s: plate buffers %lld are not the sum of their parts", what, p->plate);
    CHECKF(p->total == p->network + p->model + p->io + p->plate, "%s: total %lld is not network + model + "
           "io + plate buffers", what, p->total);
    CHECKF(p->host == p->total, "%s: on the CPU all of it is host memory (%lld of %lld)", what, p->host, p->total);
}

#ifdef CK_HAVE_PNG
/* A W x H PNG of one colour (`channels` 1 or 3, 8 bits), written row by row
 * at deflate level 1: a few hundred KiB however large, in about a second. */
static int write_flat_png(const char *path, int w, int h, int channels, int value) {
    FILE *f = fopen(path, "wb");
    if (!f) return 0;
    png_structp png = png_create_write_struct(PNG_LIBPNG_VER_STRING, NULL, NULL, NULL);
    png_infop info = png ? png_create_info_struct(png) : NULL;
    unsigned char *row = malloc((size_t)w * (size_t)channels);
    int ok = png && info && row;
    if (ok && setjmp(png_jmpbuf(png))) ok = 0;
    else if (ok) {
        memset(row, value, (size_t)w * (size_t)channels);
        png_init_io(png, f);
        png_set_compression_level(png, 1);
        png_set_filter(png, 0, PNG_FILTER_NONE);
        png_set_IHDR(png, info, (png_uint_32)w, (png_uint_32)h, 8,
                     channels == 1 ? PNG_COLOR_TYPE_GRAY : PNG_COLOR_TYPE_RGB, PNG_INTERLACE_NONE,
                     PNG_COMPRESSION_TYPE_DEFAULT, PNG_FILTER_TYPE_DEFAULT);
        png_write_info(png, info);
        for (int y = 0; y < h; y++) png_write_row(png, row);
        png_write_end(png, NULL);
    }
    png_destroy_write_struct(png ? &png : NULL, info ? &info : NULL);
    free(row);
    return fclose(f) == 0 && ok;
}
#endif

/* A PNG of the signature and an IHDR of w x h, and nothing after it: its
 * header says the size, and any decoder fails on it ("truncated"). */
static int write_png_header_only(const char *path, unsigned w, unsigned h) {
    unsigned char b[33] = {137, 80, 78, 71, 13, 10, 26, 10, 0, 0, 0, 13, 'I', 'H', 'D', 'R'};
    for (int k = 0; k < 4; k++) {
        b[16 + k] = (unsigned char)(w >> (24 - 8 * k));
        b[20 + k] = (unsigned char)(h >> (24 - 8 * k));
    }
    b[24] = 8, b[25] = 2; /* 8-bit RGB; CRC left zero */
    FILE *f = fopen(path, "wb");
    if (!f) return 0;
    const int ok = fwrite(b, 1, sizeof b, f) == sizeof b;
    return fclose(f) == 0 && ok;
}

/*
 * An 8192 x 8192 plate with a --budget above the network's own need but
 * below its plate buffers is refused from its header, naming the file, the
 * figure it needs and the budget, before it is decoded (a PNG that ends
 * after its IHDR is refused the same way, not reported "truncated"), with
 * nothing written.
 */
static void test_run_memory_refused(void) {
    NEED_BINARY();
    NEED_PNG();
    char model[512], plate[512], hint[512], header_only[512], out[512];
    if (!tiny_model(model, sizeof model)) SKIP("no tiny model");
    path_in(plate, sizeof plate, "big-plate.png");
    path_in(hint, sizeof hint, "big-hint.png");
    path_in(header_only, sizeof header_only, "big-header-only.png");
    path_in(out, sizeof out, "big-out");
#ifdef CK_HAVE_PNG
    REQUIRE(write_flat_png(plate, 8192, 8192, 3, 40) && write_flat_png(hint, 8192, 8192, 1, 255));
#endif
    REQUIRE(write_png_header_only(header_only, 8192, 8192));
    /* the plan the run will make, from info */
    result r = run_ckey("info", "--model", model, "--size", "64", "--threads", "2", "--device", "cpu",
                        "--plate-size", "8192x8192", "--json", NULL);
    REQUIRE(r.code == 0);
    const run_parts want = parse_run_parts(r.out);
    result_free(&r);
    check_sums(&want, "8192 x 8192");
    const long long budget = 16ll << 20;
    REQUIRE(want.network + want.model < budget && want.plate > budget);
    char need[64], msg[256];
    snprintf(msg, sizeof msg, "a 8192 x 8192 plate at S = 64 needs %s", fmt_bytes(need, sizeof need, want.total));
    const char *plates[2] = {plate, header_only};
    for (int k = 0; k < 2; k++) {
        r = run_ckey("run", "--model", model, "--image", plates[k], "--hint", k ? "auto" : hint, "--out", out,
                     "--size", "64", "--threads", "2", "--device", "cpu", "--budget", "16M", NULL);
        EXPECT(r, 1, err, "over the budget of 16.0 MiB");
        CHECKF(strstr(r.err, plates[k]) != NULL, "the message does not name %s: %s", plates[k], r.err);
        CHECKF(k == 1 || strstr(r.err, msg) != NULL, "the message lacks '%s': %s", msg, r.err);
        CHECKF(!strstr(r.err, "truncated"), "the plate was decoded: %s", r.err);
        result_free(&r);
        struct stat st;
        CHECKF(stat(out, &st) != 0, "%s was created", out);
    }
    /* the same through --json: one object, ok false, the budget's status */
    r = run_ckey("run", "--model", model, "--image", plate, "--hint", hint, "--out", out, "--size", "64",
                 "--threads", "2", "--device", "cpu", "--budget", "16M", "--json", NULL);
    EXPECT(r, 1, out, "\"status\": \"CKEY_ERR_BUDGET\"");
    result_free(&r);
    unlink(plate);
    unlink(hint);
    unlink(header_only);
}

/*
 * The printed plan for a known plate size is the sum of its parts, and the
 * parts are the formulas of ckey_plan_run_memory (include/ckey_clip.h) with
 * the functions the run sizes its buffers with: for ckey run, ckey info
 * --plate-size and its text; for a clip (--for key) with its ring sizes.
 */
static void test_run_memory_breakdown(void) {
    NEED_BINARY();
    NEED_PNG();
    char model[512], out[512];
    if (!tiny_model(model, sizeof model)) SKIP("no tiny model");
    path_in(out, sizeof out, "plan-out");
    const long long W = 320, H = 180, S = 128, P = W * H, F = 4;
    /* ckey run on examples/plate.png: its JSON and its text */
    result r = run_ckey("run", "--model", model, "--image", "examples/plate.png", "--hint", "examples/hint.png",
                        "--out", out, "--size", "128", "--threads", "2", "--device", "cpu", "--json", NULL);
    REQUIRE(r.code == 0);
    const run_parts run = parse_run_parts(r.out);
    CHECK(json_int(r.out, "peak_bytes") == run.network);
    result_free(&r);
    check_sums(&run, "ckey run");
    const long long pre = (long long)ck_preprocess_scratch_floats((int32_t)H, (int32_t)W, (int32_t)S) * F;
    const long long back = (long long)ck_postprocess_scratch_floats((int32_t)S, (int32_t)H, (int32_t)W,
                                                                    CK_RESIZE_LANCZOS4) * F;
    const long long png = CK_PNG_READ_BYTES_PER_PIXEL; /* the PNG files and rows, read as floats */
    CHECKF(run.decoded == (4 * F + png) * P, "decoded %lld, want plate + hint %lld", run.decoded, (4 * F + png) * P);
    CHECKF(run.output == 4 * P * F, "outputs %lld, want alpha + fg %lld", run.output, 4 * P * F);
    CHECKF(run.resize == (pre > back ? pre : back), "resize %lld, want max(%lld, %lld)", run.resize, pre, back);
    CHECK(run.hint == 0 && run.post == 0 && run.io == 0 && run.frames == 1 && run.writers == 0);

    r = run_ckey("run", "--model", model, "--image", "examples/plate.png", "--hint", "examples/hint.png",
                 "--out", out, "--size", "128", "--threads", "2", "--device", "cpu", NULL);
    REQUIRE(r.code == 0);
    char line[512], a[32], b[32], c[32], d[32];
    snprintf(line, sizeof line, "planned peak %s for the 320 x 180 plate: network %s + model %s + plate buffers %s",
             fmt_bytes(a, sizeof a, run.total), fmt_bytes(b, sizeof b, run.network),
             fmt_bytes(c, sizeof c, run.model), fmt_bytes(d, sizeof d, run.plate));
    CHECKF(strstr(r.out, line) != NULL, "ckey run does not print '%s':\n%s", line, r.out);
    result_free(&r);

    /* info --plate-size plans the same run, and lists it part by part */
    r = run_ckey("info", "--model", model, "--size", "128", "--threads", "2", "--device", "cpu", "--plate-size",
                 "320x180", "--json", NULL);
    REQUIRE(r.code == 0);
    const run_parts info = parse_run_parts(r.out);
    result_free(&r);
    CHECK(memcmp(&info, &run, sizeof info) == 0);
    r = run_ckey("info", "--model", model, "--size", "128", "--threads", "2", "--device", "cpu", "--plate-size",
                 "320x180", NULL);
    REQUIRE(r.code == 0);
    static const char *const names[] = {"decoded", "resize", "outputs", "encode", "total"};
    const long long vals[] = {run.decoded, run.resize, run.output, run.encode, run.total};
    for (size_t k = 0; k < LEN(names); k++) {
        snprintf(line, sizeof line, "  %-14s %11s", names[k], fmt_bytes(a, sizeof a, vals[k]));
        CHECKF(strstr(r.out, line) != NULL, "info does not list '%s':\n%s", line, r.out);
    }
    result_free(&r);

    /* a clip: read-ahead 1 (2 in slots), one reader (its plate + hint, its
     * resize and auto hint scratch), 3 writers (4 out slots), auto hints */
    r = run_ckey("info", "--model", model, "--size", "128", "--threads", "2", "--device", "cpu", "--plate-size",
                 "320x180", "--for", "key", "--read-ahead", "1", "--readers", "1", "--writers", "3", "--hint", "auto",
                 "--json", NULL);
    REQUIRE(r.code == 0);
    const run_parts key = parse_run_parts(r.out);
    result_free(&r);
    check_sums(&key, "ckey key");
    ckey_shot_options so;
    ckey_shot_options_default(&so);
    const long long nin = 2, nout = 4, K = 3;
    const long long post = (long long)ckey_post_scratch_bytes((int32_t)W, (int32_t)H, &so.post);
    CHECK(key.frames == nin + nout && key.writers == K);
    CHECKF(key.io == (nin + nout) * 4 * S * S * F, "transfer %lld, want %lld ring slots", key.io, nin + nout);
    CHECKF(key.decoded == 1 * (4 * F + png) * P, "decoded %lld", key.decoded);
    CHECKF(key.hint == (long long)ckey_auto_hint_scratch_bytes((int32_t)W, (int32_t)H), "auto hint %lld", key.hint);
    CHECKF(key.resize == pre + K * back, "resize %lld, want %lld", key.resize, pre + K * back);
    CHECKF(key.output == nout * 4 * P * F + K * 7 * P * F, "outputs %lld", key.output);
    CHECKF(key.post == K * post, "post %lld, want %lld", key.post, K * post);
    CHECK(key.network == run.network && key.model == run.model);

    /* with --video-out, the videos' encoders come on top */
    r = run_ckey("info", "--model", model, "--size", "128", "--threads", "2", "--device", "cpu", "--plate-size",
                 "320x180", "--for", "key", "--read-ahead", "1", "--readers", "1", "--writers", "3", "--hint", "auto",
                 "--video-out", "both", "--json", NULL);
    REQUIRE(r.code == 0);
    const run_parts video = parse_run_parts(r.out);
    result_free(&r);
    check_sums(&video, "ckey key --video-out both");
    CHECK(video.encode > key.encode && video.total - key.total == video.encode - key.encode);

    /* the options that shape a run need --plate-size; --read-ahead needs --for key */
    r = run_ckey("info", "--model", model, "--for", "key", NULL);
    EXPECT(r, 2, err, "add --plate-size WxH");
    result_free(&r);
    r = run_ckey("info", "--model", model, "--plate-size", "320x180", "--writers", "2", NULL);
    EXPECT(r, 2, err, "add --for key");
    result_free(&r);
    r = run_ckey("info", "--model", model, "--plate-size", "320", NULL);
    EXPECT(r, 2, err, "expected WxH");
    result_free(&r);
}

/* One ckey run --json on a W x H plate made here: its plan and peak RSS. */
static int measure_run(const char *model, int w, int h, long long *plan, long long *rss) {
    char dir[512], plate[600], hint[600], out[600];
    snprintf(dir, sizeof dir, "%s/rss-%dx%d", workdir, w, h);
    mkdir(dir, 0777);
    snprintf(plate, sizeof plate, "%s/plate.png", dir);
    snprintf(hint, sizeof hint, "%s/hint.png", dir);
    snprintf(out, sizeof out, "%s/out", dir);
    const size_t P = (size_t)w * (size_t)h;
    float *rgb = malloc(3 * P * sizeof(float)), *a = malloc(P * sizeof(float));
    if (!rgb || !a) {
        free(rgb), free(a);
        return 0;
    }
    for (size_t i = 0; i < P; i++) { /* a disc on green */
        const long x = (long)(i % (size_t)w) - w / 2, y = (long)(i / (size_t)w) - h / 2;
        const int in = x * x + y * y < (long)(h / 3) * (h / 3);
        rgb[i] = in ? 0.8f : 0.1f, rgb[P + i] = in ? 0.5f : 0.9f, rgb[2 * P + i] = in ? 0.3f : 0.1f;
        a[i] = in ? 1.0f : 0.0f;
    }
    ckey_error e;
    const int made = ckey_image_write_png(plate, rgb, 3, w, h, 8, &e) == CKEY_OK &&
                     ckey_image_write_png(hint, a, 1, w, h, 8, &e) == CKEY_OK;
    free(rgb);
    free(a);
    if (!made) return 0;
    result r = run_ckey("run", "--model", model, "--image", plate, "--hint", hint, "--out", out, "--size", "64",
                        "--threads", "2", "--device", "cpu", "--json", NULL);
    *plan = json_int(strstr(r.out, "\"run_memory\""), "total_bytes");
    *rss = json_int(r.out, "peak_rss_bytes");
    const int ok = r.code == 0 && *plan > 0 && *rss > 0;
    result_free(&r);
    ck_remove_tree(dir);
    return ok;
}

/*
 * The plan against the real thing: the peak RSS (VmHWM) ckey run reports for
 * a 2048 x 1024 plate, less that of a 64 x 64 one (the process's code and
 * libraries, a CUDA build's above all, are most of a small run's RSS), is
 * within a factor 2 of what the plans differ by. Loose on purpose: the
 * sanitizer build's shadow memory and allocator add their share.
 */
static void test_run_memory_measured(void) {
    NEED_BINARY();
    NEED_PNG();
    char model[512];
    if (!tiny_model(model, sizeof model)) SKIP("no tiny model");
    long long plan_small = 0, rss_small = 0, plan_big = 0, rss_big = 0;
    REQUIRE(measure_run(model, 64, 64, &plan_small, &rss_small));
    REQUIRE(measure_run(model, 2048, 1024, &plan_big, &rss_big));
    const double dplan = (double)(plan_big - plan_small), drss = (double)(rss_big - rss_small);
    printf("  plan %.1f -> %.1f MiB, peak RSS %.1f -> %.1f MiB: the plate's share %.1f MiB planned, %.1f MiB "
           "measured (x %.2f)\n",
           plan_small / 1048576.0, plan_big / 1048576.0, rss_small / 1048576.0, rss_big / 1048576.0,
           dplan / 1048576.0, drss / 1048576.0, drss / dplan);
    CHECKF(dplan > 32.0 * 1048576, "the plan grew by only %.1f MiB", dplan / 1048576.0);
    CHECKF(drss >= 0.5 * dplan && drss <= 2.0 * dplan, "measured %.1f MiB against %.1f MiB planned",
           drss / 1048576.0, dplan / 1048576.0);
}

int main(int argc, char **argv) {
    ck_ckey_path(ckey_bin, sizeof ckey_bin, argv[0]);
    if (!ck_make_temp_dir(workdir, sizeof workdir, "cli")) return 1;
    /* no checkpoint of the user's may answer a command run without --model */
    ck_isolate_model_lookup(workdir);
    static const ck_test_case cases[] = {
        {"help_and_version", test_help_and_version},
        {"usage_errors", test_usage_errors},
        {"help_in_reference", test_help_in_reference},
        {"bad_files", test_bad_files},
        {"run_end_to_end", test_run_end_to_end},
        {"info_and_convert", test_info_and_convert},
        {"model_not_found", test_model_not_found},
        {"model_from_env", test_model_from_env},
        {"install_model", test_install_model},
        {"install_model_refuses", test_install_model_refuses},
        {"model_lookup_order", test_model_lookup_order},
        {"info_native_size", test_info_native_size},
        {"sha256_vectors", test_sha256_vectors},
        {"help_details", test_help_details},
        {"budget_units", test_budget_units},
        {"key_shot_out", test_key_shot_out},
        {"doc_samples", test_doc_samples},
        {"damaged_model", test_damaged_model},
        {"stdin_and_fifo", test_stdin_and_fifo},
        {"run_memory_refused", test_run_memory_refused},
        {"run_memory_breakdown", test_run_memory_breakdown},
        {"run_memory_measured", test_run_memory_measured},
    };
    int rc = ck_test_main(cases, (int)LEN(cases), argc, argv);
    ck_remove_tree(workdir);
    return rc;
}
