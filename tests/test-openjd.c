/*
 * The OpenJD template tools/farm/openjd-key.yaml, checked and run by the
 * Open Job Description CLI (PyPI's openjd-cli, in a virtual environment
 * this test creates once under $XDG_CACHE_HOME/ckey-tests, default
 * ~/.cache/ckey-tests):
 *
 *   openjd check    the template is valid jobtemplate-2023-09 with the
 *                   TASK_CHUNKING extension;
 *   openjd run      the whole job (Key in chunks of 4, then Encode) on a
 *                   generated 9-frame clip; then on a copy, two chunks out of
 *                   order (--tasks), the Encode step alone refusing while a
 *                   chunk is missing, then the whole job (the chunks done
 *                   resume with nothing to key).
 * Both give every pass and both videos byte for byte as one `ckey key
 * --video-out both` run.
 *
 * Needs python3 with the venv module (Debian's python3-venv, which
 * tools/install-deps.sh installs). Skipped (exit 77) only when the package
 * index cannot be reached to install openjd-cli.
 */
#include <limits.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "ckey.h"
#include "support/clip.h"
#include "support/testutil.h"

/* The openjd-cli release the template was checked with. */
#define OPENJD_CLI "openjd-cli==0.8.0"

static char ckey_bin[PATH_MAX + 16];
static char workdir[256];
static char model[PATH_MAX];
static char template_path[PATH_MAX];
static char venv[PATH_MAX + 32];

enum { W = 96, H = 64, FRAMES = 9 };

/* sh -c (printf-style command), output captured. */
#define shf(...) ck_shf(workdir, __VA_ARGS__)

/*
 * The venv with openjd-cli: made once (under a lock, so that concurrent test
 * runs share it), reused after. 1 when ready; 0 with the reason in why[cap]
 * and *skip set when the package index is unreachable.
 */
static int ensure_openjd(int *skip, char *why, size_t cap) {
    *skip = 0;
    const char *cache = getenv("XDG_CACHE_HOME");
    const char *home = getenv("HOME");
    char base[PATH_MAX];
    if (cache && *cache) snprintf(base, sizeof base, "%s/ckey-tests", cache);
    else snprintf(base, sizeof base, "%s/.cache/ckey-tests", home && *home ? home : "/tmp");
    snprintf(venv, sizeof venv, "%s/openjd-venv", base);
    ck_run_result r = shf("command -v python3 >/dev/null || { echo 'python3 is not installed "
                          "(tools/install-deps.sh installs python3-venv)' >&2; exit 3; }\n"
                          "mkdir -p '%s' && exec 9> '%s/openjd-venv.lock' && flock 9 &&\n"
                          "if [ ! -f '%s/.ckey-ready-%s' ]; then\n"
                          "  rm -rf '%s' && python3 -m venv '%s' || { echo 'python3 -m venv failed "
                          "(Debian: apt-get install python3-venv)' >&2; exit 3; }\n"
                          "  '%s/bin/pip' install --disable-pip-version-check -q '%s' || exit 4\n"
                          "  touch '%s/.ckey-ready-%s'\n"
                          "fi",
                          base, base, venv, OPENJD_CLI, venv, venv, venv, OPENJD_CLI, venv, OPENJD_CLI);
    const int code = r.code;
    snprintf(why, cap, "%s", r.err);
    ck_run_free(&r);
    if (code == 0) return 1;
    if (code == 4) {
        /* is the index reachable at all? (pip's own configuration decides which) */
        r = shf("'%s/bin/pip' --disable-pip-version-check index versions openjd-cli", venv);
        if (r.code != 0) {
            /* pip's last line says why */
            size_t n = strlen(r.err);
            while (n > 0 && (r.err[n - 1] == '\n' || r.err[n - 1] == ' ')) r.err[--n] = 0;
            const char *last = strrchr(r.err, '\n');
            *skip = 1;
            snprintf(why, cap, "the package index (PyPI) is unreachable, so %s cannot be installed: %.300s",
                     OPENJD_CLI, last ? last + 1 : r.err);
        }
        ck_run_free(&r);
    }
    return 0;
}

/* openjd run TEMPLATE on `clip` with `extra` options; the exit code, the
 * output on failure printed. */
static int openjd_run(const char *clip, const char *extra) {
    ck_run_result r = shf("'%s/bin/openjd' run '%s' -p 'ShotDir=%s' -p Frames=1-%d -p ChunkSize=4 "
                          "-p 'Ckey=%s' -p 'KeyArgs=--model %s --size 64 --threads 1 --device cpu' %s",
                          venv, template_path, clip, FRAMES, ckey_bin, model, extra);
    const int code = r.code;
    if (code != 0) printf("  openjd run ... %s: exit %d\n%s%s\n", extra, code, r.out, r.err);
    ck_run_free(&r);
    return code;
}

static void check_same(const char *ref, const char *clip) {
    char out[700], why[2300];
    snprintf(out, sizeof out, "%s/Output", clip);
    const int same = ck_same_tree_n(ref, out, 4 * FRAMES + 2, why, sizeof why);
    CHECKF(same, "%s", why);
    if (same) printf("  %s: all %d files (passes and videos) byte for byte those of one run\n", out, 4 * FRAMES + 2);
}

static void test_openjd(void) {
    if (access(ckey_bin, X_OK) != 0) SKIP("%s is not built", ckey_bin);
    int skip = 0;
    char why[1200];
    if (!ensure_openjd(&skip, why, sizeof why)) {
        if (skip) SKIP("%s", why);
        CHECKF(0, "cannot set up %s in %s: %s", OPENJD_CLI, venv, why);
        return;
    }
    ck_run_result r = shf("'%s/bin/openjd' check '%s'", venv, template_path);
    CHECKF(r.code == 0, "openjd check: exit %d: %s%s", r.code, r.out, r.err);
    printf("  %.*s\n", (int)strcspn(r.out, "\n"), r.out);
    ck_run_free(&r);

    char clip[512], copy[512], ref[600], p[1024], aside[1024];
    REQUIRE(ck_make_synth_shot(clip, sizeof clip, workdir, "ojclip", 1, FRAMES, W, H));
    snprintf(ref, sizeof ref, "%s/ref", workdir);
    r = shf("'%s' key '%s' --out '%s' --model '%s' --size 64 --threads 1 --video-out both", ckey_bin, clip,
            ref, model);
    REQUIRE(r.code == 0);
    ck_run_free(&r);
    REQUIRE(ck_make_synth_shot(copy, sizeof copy, workdir, "ojchunks", 1, FRAMES, W, H));

    /* the whole job: every chunk of Key, then Encode */
    CHECK(openjd_run(clip, "--step Encode --run-dependencies") == 0);
    check_same(ref, clip);

    /* chunks one at a time, out of order; Encode refuses until all are done */
    CHECK(openjd_run(copy, "--step Key --tasks '[{\"Frame\": \"9-9\"}, {\"Frame\": \"1-4\"}]'") == 0);
    r = shf("'%s/bin/openjd' run '%s' -p 'ShotDir=%s' -p Frames=1-%d -p 'Ckey=%s' --step Encode "
            "--no-run-dependencies",
            venv, template_path, copy, FRAMES, ckey_bin);
    CHECKF(r.code != 0 && strstr(r.out, "frames 5-8"), "Encode with frames 5-8 missing: exit %d: %s",
           r.code, r.out);
    ck_run_free(&r);
    snprintf(p, sizeof p, "%s/Output/ojchunks_comp.mp4", copy);
    CHECK(access(p, F_OK) != 0);
    /* the whole job again: chunks 1-4 and 9 resume (nothing to key), 5-8 keyed */
    CHECK(openjd_run(copy, "--step Encode --run-dependencies") == 0);
    /* videos named after each clip's folder: compare the copy under its own name */
    for (int k = 0; k < 2; k++) {
        static const char *const suffix[2] = {"_fg_alpha.mov", "_comp.mp4"};
        snprintf(p, sizeof p, "%s/Output/ojchunks%s", copy, suffix[k]);
        snprintf(aside, sizeof aside, "%s/Output/ojclip%s", copy, suffix[k]);
        CHECK(rename(p, aside) == 0);
    }
    check_same(ref, copy);
}

int main(int argc, char **argv) {
    CK_TEST_NEEDS(CK_BUILT_PNG && CK_BUILT_EXR && CK_BUILT_FFMPEG,
                  "test-openjd: skipped: clips need PNG, OpenEXR and FFmpeg support in the build\n");
    ck_ckey_path(ckey_bin, sizeof ckey_bin, argv[0]);
    ck_tiny_model_path(model, sizeof model);
    /* the repository's template (the tests run from its root) */
    ck_abs_path(template_path, sizeof template_path, "tools/farm/openjd-key.yaml");
    if (!ck_make_temp_dir(workdir, sizeof workdir, "openjd")) return 1;
    static const ck_test_case cases[] = {
        {"openjd_template", test_openjd},
    };
    const int rc = ck_test_main(cases, (int)(sizeof cases / sizeof cases[0]), argc, argv);
    ck_remove_tree(workdir);
    return rc;
}
