/*
 * `ckey key` end to end on a 3-frame sequence built from examples/ with the
 * tiny fixture model: the four passes per frame (channel counts, sizes, frame
 * numbers kept in the names), resume (skip complete frames, re-key a frame
 * with a missing output), --frames, --dry-run, and the errors for a missing
 * hint and a hint of the wrong size. The binary is <dir of argv[0]>/../ckey.
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
    printf("  -> %d\n", r.code);
    return r;
}

static int count_str(const char *hay, const char *needle) {
    int n = 0;
    for (const char *p = hay; (p = strstr(p, needle)); p += strlen(needle)) n++;
    return n;
}

static void remove_tree(const char *dir) {
    DIR *d = opendir(dir);
    if (!d) return;
    struct dirent *e;
    char path[1024];
    while ((e = readdir(d))) {
        if (!strcmp(e->d_name, ".") || !strcmp(e->d_name, "..")) continue;
        snprintf(path, sizeof path, "%s/%s", dir, e->d_name);
        struct stat st;
        if (lstat(path, &st) == 0 && S_ISDIR(st.st_mode)) remove_tree(path);
        else unlink(path);
    }
    closedir(d);
    rmdir(dir);
}

static int copy_file(const char *from, const char *to) {
    size_t n = 0;
    unsigned char *b = ck_read_file(from, &n);
    if (!b) return 0;
    FILE *f = fopen(to, "wb");
    int ok = f && fwrite(b, 1, n, f) == n;
    if (f && fclose(f) != 0) ok = 0;
    free(b);
    return ok;
}

static int exists(const char *p) {
    struct stat st;
    return stat(p, &st) == 0;
}

static int tiny_model(char *buf, size_t cap) {
    snprintf(buf, cap, "%s/tiny/tiny.pth", ck_fixtures_dir());
    return access(buf, R_OK) == 0;
}

/* A fresh shot directory <workdir>/<name> with frames 1..nframes. */
static int make_shot(char *shot, size_t cap, const char *name, int nframes) {
    snprintf(shot, cap, "%s/%s", workdir, name);
    remove_tree(shot);
    char p[1024];
    if (mkdir(shot, 0777) != 0) return 0;
    snprintf(p, sizeof p, "%s/Input", shot);
    if (mkdir(p, 0777) != 0) return 0;
    snprintf(p, sizeof p, "%s/AlphaHint", shot);
    if (mkdir(p, 0777) != 0) return 0;
    for (int i = 1; i <= nframes; i++) {
        snprintf(p, sizeof p, "%s/Input/plate_%04d.png", shot, i);
        if (!copy_file("examples/plate.png", p)) return 0;
        snprintf(p, sizeof p, "%s/AlphaHint/hint_%04d.png", shot, i);
        if (!copy_file("examples/hint.png", p)) return 0;
    }
    return 1;
}

static const char *const passes[4] = {"Matte", "FG", "Processed", "Comp"};

static void out_path(char *buf, size_t cap, const char *shot, int pass, int frame) {
    snprintf(buf, cap, "%s/Output/%s/plate_%04d.%s", shot, passes[pass], frame,
             pass == 3 ? "png" : "exr");
}

#define NEED_SETUP(model)                                                                  \
    do {                                                                                   \
        if (access(ckey_bin, X_OK) != 0) SKIP("%s is not built", ckey_bin);                \
        if (!tiny_model(model, sizeof model))                                              \
            SKIP("%s/tiny/tiny.pth does not exist", ck_fixtures_dir());                    \
    } while (0)

static void test_sequence_and_resume(void) {
    char model[512], shot[512], p[1024];
    NEED_SETUP(model);
    REQUIRE(make_shot(shot, sizeof shot, "shot", 3));
    ckey_image ex;
    memset(&ex, 0, sizeof ex);
    ckey_error err;
    REQUIRE(ckey_image_read("examples/plate.png", CKEY_IMAGE_RGB, &ex, &err) == CKEY_OK);
    const int W = ex.width, H = ex.height;
    ckey_image_free(&ex);

    result r = run_ckey("key", shot, "--model", model, "--size", "64", NULL);
    CHECKF(r.code == 0, "exit %d: %s", r.code, r.err);
    CHECK(strstr(r.out, "keyed 3 frames") != NULL);
    result_free(&r);
    for (int f = 1; f <= 3; f++) {
        for (int pass = 0; pass < 4; pass++) {
            out_path(p, sizeof p, shot, pass, f);
            ckey_image img;
            memset(&img, 0, sizeof img);
            ckey_status st = ckey_image_read(p, pass == 0 ? CKEY_IMAGE_HINT : CKEY_IMAGE_RGB, &img, &err);
            CHECKF(st == CKEY_OK, "%s: %s", p, err.message);
            if (st != CKEY_OK) continue;
            CHECKF(img.width == W && img.height == H, "%s is %d x %d", p, img.width, img.height);
            if (pass == 2) CHECKF(img.has_alpha, "%s has no alpha channel", p);
            if (pass == 3) CHECKF(img.bit_depth == 8, "%s bit depth %d", p, img.bit_depth);
            if (pass < 3) CHECKF(img.bit_depth == 16, "%s: EXR HALF expected, bit depth %d", p, img.bit_depth);
            /* values stay near [0, 1]: the default Lanczos4 resize back rings
             * a little past the range at hard edges, as upstream's (its
             * EXRs keep that); a Lanczos-4 step overshoots by < 10% */
            size_t n = (size_t)img.width * img.height * img.channels;
            int bad = 0;
            for (size_t i = 0; i < n; i++)
                if (!(img.data[i] >= -0.1f && img.data[i] <= 1.1f)) bad = 1;
            CHECKF(!bad, "%s has values outside [-0.1, 1.1]", p);
            ckey_image_free(&img);
        }
    }
    /* Channel layout of the EXR passes: Matte is the lone channel A, FG is
     * R, G, B (no alpha), Processed R, G, B, A (has_alpha checked above). */
    out_path(p, sizeof p, shot, 0, 1);
    ckey_image m;
    memset(&m, 0, sizeof m);
    if (ckey_image_read(p, CKEY_IMAGE_HINT, &m, &err) == CKEY_OK) {
        CHECKF(m.channels == 1 && m.has_alpha, "%s: channels %d, has_alpha %d", p, m.channels, m.has_alpha);
        ckey_image_free(&m);
    } else {
        CHECKF(0, "%s: %s", p, err.message);
    }
    out_path(p, sizeof p, shot, 1, 1);
    if (ckey_image_read(p, CKEY_IMAGE_RGB, &m, &err) == CKEY_OK) {
        CHECKF(m.channels == 3 && !m.has_alpha, "%s: channels %d, has_alpha %d", p, m.channels, m.has_alpha);
        ckey_image_free(&m);
    } else {
        CHECKF(0, "%s: %s", p, err.message);
    }

    /* Second run: everything complete -> all skipped. */
    r = run_ckey("key", shot, "--model", model, "--size", "64", "--json", NULL);
    CHECKF(r.code == 0, "exit %d: %s", r.code, r.err);
    CHECK(count_str(r.out, "\"status\":\"skipped\"") == 3);
    CHECK(count_str(r.out, "\"status\":\"keyed\"") == 0);
    CHECK(strstr(r.out, "{\"event\":\"started\"") == r.out);
    CHECK(strstr(r.out, "\"event\":\"done\",\"keyed\":0,\"skipped\":3") != NULL);
    result_free(&r);

    /* Delete one output of frame 2 -> only frame 2 re-keyed. */
    out_path(p, sizeof p, shot, 2, 2);
    REQUIRE(unlink(p) == 0);
    r = run_ckey("key", shot, "--model", model, "--size", "64", "--json", NULL);
    CHECKF(r.code == 0, "exit %d: %s", r.code, r.err);
    CHECK(strstr(r.out, "\"frame\":2,\"status\":\"keyed\"") != NULL);
    CHECK(count_str(r.out, "\"status\":\"keyed\"") == 1);
    CHECK(count_str(r.out, "\"status\":\"skipped\"") == 2);
    CHECK(exists(p));
    result_free(&r);

    /* --force --frames 2-2: only frame 2, keyed again. */
    r = run_ckey("key", shot, "--model", model, "--size", "64", "--json", "--force", "--frames", "2-2", NULL);
    CHECKF(r.code == 0, "exit %d: %s", r.code, r.err);
    CHECK(strstr(r.out, "\"frame\":2,\"status\":\"keyed\"") != NULL);
    CHECK(count_str(r.out, "\"event\":\"frame\"") == 1);
    result_free(&r);
}

static void test_frames_and_dry_run(void) {
    char model[512], shot[512], p[1024];
    NEED_SETUP(model);
    REQUIRE(make_shot(shot, sizeof shot, "shot2", 3));
    /* dry run writes nothing */
    result r = run_ckey("key", shot, "--model", model, "--size", "64", "--dry-run", NULL);
    CHECKF(r.code == 0, "exit %d: %s", r.code, r.err);
    CHECK(strstr(r.out, "frame 3: key") != NULL);
    snprintf(p, sizeof p, "%s/Output", shot);
    CHECK(!exists(p));
    result_free(&r);
    r = run_ckey("key", shot, "--model", model, "--dry-run", "--json", NULL);
    CHECK(r.code == 0 && count_str(r.out, "\"status\":\"would_key\"") == 3);
    CHECK(!exists(p));
    result_free(&r);

    /* --frames 2-2 with the --plate/--hint/--out form */
    char plates[600], hints[600], out[600];
    snprintf(plates, sizeof plates, "%s/Input", shot);
    snprintf(hints, sizeof hints, "%s/AlphaHint", shot);
    snprintf(out, sizeof out, "%s/Output", shot);
    r = run_ckey("key", "--plate", plates, "--hint", hints, "--out", out, "--model", model, "--size",
                 "64", "--frames", "2-2", "--exr-compression", "zip", NULL);
    CHECKF(r.code == 0, "exit %d: %s", r.code, r.err);
    result_free(&r);
    for (int f = 1; f <= 3; f++)
        for (int pass = 0; pass < 4; pass++) {
            out_path(p, sizeof p, shot, pass, f);
            CHECKF(exists(p) == (f == 2), "%s %s", p, exists(p) ? "exists" : "missing");
        }
    /* dry run now lists frame 2 as skipped */
    r = run_ckey("key", shot, "--model", model, "--dry-run", NULL);
    CHECK(r.code == 0 && strstr(r.out, "frame 2: skip") != NULL && strstr(r.out, "frame 1: key") != NULL);
    result_free(&r);
}

static void test_errors(void) {
    char model[512], shot[512], p[1024];
    NEED_SETUP(model);
    REQUIRE(make_shot(shot, sizeof shot, "shot3", 3));
    snprintf(p, sizeof p, "%s/AlphaHint/hint_0003.png", shot);
    REQUIRE(unlink(p) == 0);
    result r = run_ckey("key", shot, "--model", model, "--size", "64", "--json", NULL);
    CHECKF(r.code == 1, "exit %d", r.code);
    CHECKF(strstr(r.err, "frame 3") && strstr(r.err, "plate_0003.png"), "stderr: %s", r.err);
    CHECK(strstr(r.out, "\"event\":\"error\"") != NULL);
    result_free(&r);
    snprintf(p, sizeof p, "%s/Output", shot);
    CHECK(!exists(p)); /* checked before anything is keyed */

    /* a hint of another size for frame 3 */
    snprintf(p, sizeof p, "%s/AlphaHint/hint_0003.png", shot);
    float px[4 * 3] = {0};
    ckey_error err;
    REQUIRE(ckey_image_write_png(p, px, 1, 4, 3, 8, &err) == CKEY_OK);
    r = run_ckey("key", shot, "--model", model, "--size", "64", NULL);
    CHECKF(r.code == 1, "exit %d", r.code);
    CHECKF(strstr(r.err, "frame 3") && strstr(r.err, "hint_0003.png") && strstr(r.err, "4 x 3"),
           "stderr: %s", r.err);
    result_free(&r);

    /* duplicate frame numbers */
    char p2[1024];
    snprintf(p2, sizeof p2, "%s/Input/plate_v2_0001.png", shot);
    REQUIRE(copy_file("examples/plate.png", p2));
    r = run_ckey("key", shot, "--model", model, NULL);
    CHECKF(r.code == 1 && strstr(r.err, "frame 1 appears twice"), "exit %d: %s", r.code, r.err);
    result_free(&r);
    unlink(p2);

    /* video */
    snprintf(p2, sizeof p2, "%s/Input/clip.mov", shot);
    REQUIRE(copy_file("examples/plate.png", p2));
    r = run_ckey("key", shot, "--model", model, NULL);
    CHECKF(r.code == 1 && strstr(r.err, "video input is not supported yet"), "exit %d: %s", r.code, r.err);
    result_free(&r);
    unlink(p2);

    /* usage */
    r = run_ckey("key", "--model", model, NULL);
    CHECK(r.code == 2);
    result_free(&r);
    r = run_ckey("key", shot, NULL);
    CHECK(r.code == 2);
    result_free(&r);
    r = run_ckey("key", shot, "--model", model, "--despill", "2", NULL);
    CHECK(r.code == 2);
    result_free(&r);
    r = run_ckey("key", shot, "--model", model, "--frames", "5-2", NULL);
    CHECK(r.code == 2);
    result_free(&r);
    r = run_ckey("key", "--help", NULL);
    CHECK(r.code == 0 && strstr(r.out, "--despeckle-area") && strstr(r.out, "exit codes"));
    result_free(&r);
    r = run_ckey("--help", NULL);
    CHECK(r.code == 0 && strstr(r.out, "  key "));
    result_free(&r);
}

static void test_post_api(void) {
    /* ckey_post_passes: argument checks and a tiny frame. */
    enum { W = 5, H = 4 };
    float alpha[W * H], fg[3 * W * H], proc[4 * W * H], comp[3 * W * H];
    for (int i = 0; i < W * H; i++) {
        alpha[i] = (float)i / (W * H);
        fg[i] = 0.2f, fg[W * H + i] = 0.9f, fg[2 * W * H + i] = 0.3f;
    }
    ckey_post_options o;
    ckey_post_options_default(&o);
    CHECK(o.despill_strength == 1.0f && o.despeckle && o.despeckle_area == 400);
    ckey_error err;
    size_t sb = ckey_post_scratch_bytes(W, H, &o);
    CHECK(sb > 0 && sb != (size_t)-1);
    CHECK(ckey_post_passes(alpha, fg, W, H, &o, proc, comp, NULL, &err) == CKEY_ERR_INVALID_ARG);
    void *scratch = malloc(sb);
    REQUIRE(scratch);
    CHECK(ckey_post_passes(alpha, fg, W, H, &o, proc, comp, scratch, &err) == CKEY_OK);
    free(scratch);
    o.despeckle = 0;
    CHECK(ckey_post_scratch_bytes(W, H, &o) == 0);
    CHECK(ckey_post_passes(alpha, fg, W, H, &o, proc, NULL, NULL, &err) == CKEY_OK);
    /* no despeckle: processed alpha = alpha; despill pulled green down; premultiplied */
    for (int i = 0; i < W * H; i++) {
        CHECK(proc[3 * W * H + i] == alpha[i]);
        CHECK(proc[W * H + i] <= proc[3 * W * H + i] + 1e-6f);
    }
    o.despill_strength = 1.5f;
    CHECK(ckey_post_passes(alpha, fg, W, H, &o, proc, NULL, NULL, &err) == CKEY_ERR_INVALID_ARG);
    CHECK(ckey_post_scratch_bytes(0, H, &o) == (size_t)-1);
}

/* --hint auto: a shot with no AlphaHint/ keys from chroma-key hints. */
static void test_auto_hint(void) {
    char model[512], shot[512], p[1024];
    NEED_SETUP(model);
    REQUIRE(make_shot(shot, sizeof shot, "autoshot", 2));
    snprintf(p, sizeof p, "%s/AlphaHint", shot);
    remove_tree(p);
    result r = run_ckey("key", shot, "--model", model, "--size", "64", NULL);
    CHECKF(r.code == 1 && strstr(r.err, "AlphaHint"), "without hints: %d %s", r.code, r.err);
    result_free(&r);
    r = run_ckey("key", shot, "--hint", "auto", "--model", model, "--input-space", "bogus", NULL);
    CHECKF(r.code == 2 && strstr(r.err, "--input-space"), "bad input space: %d %s", r.code, r.err);
    result_free(&r);
    r = run_ckey("key", shot, "--hint", "auto", "--model", model, "--size", "64", "--input-space", "srgb",
                 "--json", NULL);
    CHECKF(r.code == 0, "%s", r.err);
    CHECK(count_str(r.out, "\"status\":\"keyed\"") == 2);
    result_free(&r);
    for (int f = 1; f <= 2; f++)
        for (int pass = 0; pass < 4; pass++) {
            out_path(p, sizeof p, shot, pass, f);
            CHECKF(exists(p), "%s missing", p);
        }
    remove_tree(shot);
}

int main(int argc, char **argv) {
    char self[PATH_MAX];
    snprintf(self, sizeof self, "%s", argv[0]);
    char *slash = strrchr(self, '/');
    if (slash) *slash = 0;
    else snprintf(self, sizeof self, ".");
    snprintf(ckey_bin, sizeof ckey_bin, "%s/../ckey", self);
    snprintf(workdir, sizeof workdir, "/tmp/ckey-test-key-XXXXXX");
    if (!mkdtemp(workdir)) {
        fprintf(stderr, "cannot create a temporary directory: %s\n", strerror(errno));
        return 1;
    }
    static const ck_test_case cases[] = {
        {"post_api", test_post_api},
        {"sequence_and_resume", test_sequence_and_resume},
        {"frames_and_dry_run", test_frames_and_dry_run},
        {"errors", test_errors},
        {"auto_hint", test_auto_hint},
    };
    int rc = ck_test_main(cases, (int)LEN(cases), argc, argv);
    remove_tree(workdir);
    return rc;
}
