/*
 * `ckey key` end to end on a 3-frame sequence built from examples/ with the
 * tiny fixture model: the four passes per frame (channel counts, sizes, frame
 * numbers kept in the names), resume (skip complete frames, re-key a frame
 * with a missing output), --frames, --dry-run, and the errors for a missing
 * hint and a hint of the wrong size; and a generated green-screen shot whose
 * passes are checked against the official math step by step. The binary is
 * <dir of argv[0]>/../ckey.
 */
#include <dirent.h>
#include <fcntl.h>
#include <limits.h>
#include <math.h>
#include <pthread.h>
#include <sched.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "ckey_clip.h"
#include "ckey.h"
#include "clip/shot.h"
#include "core/dtype.h"
#include "pixel/pixel.h"
#include "support/clip.h"
#include "media/image.h"
#include "support/testutil.h"

#define LEN(a) (sizeof(a) / sizeof((a)[0]))

static char ckey_bin[PATH_MAX + 16];
static char workdir[256];

typedef ck_run_result result;
#define result_free ck_run_free

/* ckey ARGS... (NULL-terminated), the command and its exit code echoed. */
static const ck_cli cli = {ckey_bin, workdir, NULL, 1};
#define run_ckey(...) ck_cli_run(&cli, NULL, __VA_ARGS__)

#define remove_tree ck_remove_tree

static int tiny_model(char *buf, size_t cap) {
    snprintf(buf, cap, "%s/tiny/tiny.pth", ck_fixtures_dir());
    return access(buf, R_OK) == 0;
}

/* Pass `pass` of frame `frame` of a shot keyed into its Output/. */
static void out_path(char *buf, size_t cap, const char *shot, int pass, int frame) {
    char out[1024];
    snprintf(out, sizeof out, "%s/Output", shot);
    ck_pass_path(buf, cap, out, pass, frame);
}

/* The channel names of an EXR file's channel list, concatenated ("Y", "ABGR"). */
static void exr_channels(const char *path, char *names, size_t cap) {
    names[0] = 0;
    size_t n = 0, k = 0;
    unsigned char *b = ck_read_file(path, &n);
    static const char key[] = "channels\0chlist\0";
    for (size_t i = 0; b && i + sizeof key - 1 + 4 < n; i++) {
        if (memcmp(b + i, key, sizeof key - 1)) continue;
        /* name\0, pixel type, pLinear + 3 reserved, x / y sampling: 16 bytes after the name */
        for (size_t j = i + sizeof key - 1 + 4; j < n && b[j] && k + 1 < cap;) {
            names[k++] = (char)b[j];
            while (j < n && b[j]) j++;
            j += 1 + 16;
        }
        break;
    }
    names[k] = 0;
    free(b);
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
    REQUIRE(ck_make_shot(shot, sizeof shot, workdir, "shot", 3));
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
             * past the range at hard edges, as upstream's does (its EXRs keep
             * that). Its 8 weights have |w| summing to at most 1.715 per
             * axis, so from inputs in [0, 1] the result lies within
             * [(1 - 1.715^2) / 2, (1 + 1.715^2) / 2] = [-0.97, 1.97]. (The
             * bilinear resize is convex: test synthetic_shot checks [0, 1].) */
            size_t n = (size_t)img.width * img.height * img.channels;
            int bad = 0;
            float lo = 0, hi = 1;
            for (size_t i = 0; i < n; i++) {
                if (!(img.data[i] >= -0.97f && img.data[i] <= 1.97f)) bad = 1;
                lo = fminf(lo, img.data[i]);
                hi = fmaxf(hi, img.data[i]);
            }
            if (f == 1) printf("  %s: values in [%g, %g]\n", ck_pass_names[pass], lo, hi);
            CHECKF(!bad, "%s has values outside [-0.97, 1.97]", p);
            ckey_image_free(&img);
        }
    }
    /* Channel layout of the EXR passes: Matte is the lone channel Y (as
     * upstream's cv2.imwrite names it), FG is R, G, B (no alpha), Processed
     * R, G, B, A (has_alpha checked above). */
    out_path(p, sizeof p, shot, 0, 1);
    ckey_image m;
    memset(&m, 0, sizeof m);
    if (ckey_image_read(p, CKEY_IMAGE_HINT, &m, &err) == CKEY_OK) {
        CHECKF(m.channels == 1 && !m.has_alpha, "%s: channels %d, has_alpha %d", p, m.channels, m.has_alpha);
        ckey_image_free(&m);
    } else {
        CHECKF(0, "%s: %s", p, err.message);
    }
    char ch[32];
    exr_channels(p, ch, sizeof ch);
    CHECKF(!strcmp(ch, "Y"), "%s holds channels '%s', want Y", p, ch);
    out_path(p, sizeof p, shot, 2, 1);
    exr_channels(p, ch, sizeof ch);
    CHECKF(!strcmp(ch, "ABGR"), "%s holds channels '%s', want A B G R", p, ch);
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
    CHECK(ck_count_str(r.out, "\"status\":\"skipped\"") == 3);
    CHECK(ck_count_str(r.out, "\"status\":\"keyed\"") == 0);
    CHECK(strstr(r.out, "{\"event\":\"started\"") == r.out);
    CHECK(strstr(r.out, "\"event\":\"done\",\"keyed\":0,\"skipped\":3") != NULL);
    result_free(&r);

    /* Delete one output of frame 2 -> only frame 2 re-keyed. */
    out_path(p, sizeof p, shot, 2, 2);
    REQUIRE(unlink(p) == 0);
    r = run_ckey("key", shot, "--model", model, "--size", "64", "--json", NULL);
    CHECKF(r.code == 0, "exit %d: %s", r.code, r.err);
    CHECK(strstr(r.out, "\"frame\":2,\"status\":\"keyed\"") != NULL);
    CHECK(ck_count_str(r.out, "\"status\":\"keyed\"") == 1);
    CHECK(ck_count_str(r.out, "\"status\":\"skipped\"") == 2);
    CHECK(ck_exists(p));
    result_free(&r);

    /* --force --frames 2-2: only frame 2, keyed again. */
    r = run_ckey("key", shot, "--model", model, "--size", "64", "--json", "--force", "--frames", "2-2", NULL);
    CHECKF(r.code == 0, "exit %d: %s", r.code, r.err);
    CHECK(strstr(r.out, "\"frame\":2,\"status\":\"keyed\"") != NULL);
    CHECK(ck_count_str(r.out, "\"event\":\"frame\"") == 1);
    result_free(&r);
}

static void test_frames_and_dry_run(void) {
    char model[512], shot[512], p[1024];
    NEED_SETUP(model);
    REQUIRE(ck_make_shot(shot, sizeof shot, workdir, "shot2", 3));
    /* dry run writes nothing */
    result r = run_ckey("key", shot, "--model", model, "--size", "64", "--dry-run", NULL);
    CHECKF(r.code == 0, "exit %d: %s", r.code, r.err);
    CHECK(strstr(r.out, "frame 3: key") != NULL);
    snprintf(p, sizeof p, "%s/Output", shot);
    CHECK(!ck_exists(p));
    result_free(&r);
    r = run_ckey("key", shot, "--model", model, "--dry-run", "--json", NULL);
    CHECK(r.code == 0 && ck_count_str(r.out, "\"status\":\"would_key\"") == 3);
    CHECK(!ck_exists(p));
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
            CHECKF(ck_exists(p) == (f == 2), "%s %s", p, ck_exists(p) ? "exists" : "missing");
        }
    /* --exr-compression zip-fast keys frame 3 (readable passes); an unknown name is a usage error */
    r = run_ckey("key", "--plate", plates, "--hint", hints, "--out", out, "--model", model, "--size",
                 "64", "--frames", "3-3", "--exr-compression", "zip-fast", NULL);
    CHECKF(r.code == 0, "exit %d: %s", r.code, r.err);
    result_free(&r);
    out_path(p, sizeof p, shot, 0, 3);
    ckey_image mimg;
    ckey_error merr;
    CHECKF(ckey_image_read(p, CKEY_IMAGE_HINT, &mimg, &merr) == CKEY_OK, "%s", merr.message);
    ckey_image_free(&mimg);
    out_path(p, sizeof p, shot, 0, 3);
    remove(p); /* frame 3 stays to be keyed by the resume below */
    r = run_ckey("key", "--plate", plates, "--hint", hints, "--out", out, "--model", model, "--size",
                 "64", "--frames", "3-3", "--exr-compression", "zip9", NULL);
    CHECK(r.code == 2 && strstr(r.err, "zip-fast") != NULL);
    result_free(&r);
    /* dry run now lists frame 2 as skipped */
    r = run_ckey("key", shot, "--model", model, "--dry-run", NULL);
    CHECK(r.code == 0 && strstr(r.out, "frame 2: skip") != NULL && strstr(r.out, "frame 1: key") != NULL);
    result_free(&r);
}

static void test_errors(void) {
    char model[512], shot[512], p[1024];
    NEED_SETUP(model);
    REQUIRE(ck_make_shot(shot, sizeof shot, workdir, "shot3", 3));
    snprintf(p, sizeof p, "%s/AlphaHint/hint_0003.png", shot);
    REQUIRE(unlink(p) == 0);
    result r = run_ckey("key", shot, "--model", model, "--size", "64", "--json", NULL);
    CHECKF(r.code == 1, "exit %d", r.code);
    CHECKF(strstr(r.err, "frame 3") && strstr(r.err, "plate_0003.png"), "stderr: %s", r.err);
    CHECK(strstr(r.out, "\"event\":\"error\"") != NULL);
    result_free(&r);
    snprintf(p, sizeof p, "%s/Output", shot);
    CHECK(!ck_exists(p)); /* checked before anything is keyed */

    /* a hint of another size for frame 3: resized to the plate, as upstream
     * does, with a warning naming the frame and both sizes (test
     * hint_resize checks the values) */
    snprintf(p, sizeof p, "%s/AlphaHint/hint_0003.png", shot);
    float px[4 * 3] = {0};
    ckey_error err;
    REQUIRE(ckey_image_write_png(p, px, 1, 4, 3, 8, &err) == CKEY_OK);
    r = run_ckey("key", shot, "--model", model, "--size", "64", NULL);
    CHECKF(r.code == 0, "exit %d: %s", r.code, r.err);
    CHECKF(strstr(r.err, "warning: frame 3") && strstr(r.err, "hint_0003.png") && strstr(r.err, "4 x 3") &&
               strstr(r.err, "resized"),
           "stderr: %s", r.err);
    CHECK(ck_count_str(r.err, "warning:") == 1);
    result_free(&r);
    snprintf(p, sizeof p, "%s/Output", shot);
    remove_tree(p);

    /* duplicate frame numbers */
    char p2[1024];
    snprintf(p2, sizeof p2, "%s/Input/plate_v2_0001.png", shot);
    REQUIRE(ck_copy_file("examples/plate.png", p2));
    r = run_ckey("key", shot, "--model", model, NULL);
    CHECKF(r.code == 1 && strstr(r.err, "frame 1 appears twice"), "exit %d: %s", r.code, r.err);
    result_free(&r);
    unlink(p2);

    /* Input/ is frames or one video, not both */
    snprintf(p2, sizeof p2, "%s/Input/clip.mov", shot);
    REQUIRE(ck_copy_file("examples/plate.png", p2));
    r = run_ckey("key", shot, "--model", model, NULL);
    CHECKF(r.code == 1 && strstr(r.err, "both image frames and a video file (clip.mov)"), "exit %d: %s",
           r.code, r.err);
    result_free(&r);
    unlink(p2);
    /* SHOT_DIR must be a directory */
    r = run_ckey("key", "examples/plate.png", "--model", model, NULL);
    CHECKF(r.code == 1 && strstr(r.err, "not a clip directory"), "exit %d: %s", r.code, r.err);
    result_free(&r);

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
    r = run_ckey("key", shot, "--model", model, "--frame-path", "gpu", NULL);
    CHECKF(r.code == 2 && strstr(r.err, "expected auto, host or device"), "exit %d: %s", r.code, r.err);
    result_free(&r);
    /* a CPU session has no device frame path */
    r = run_ckey("key", shot, "--model", model, "--size", "64", "--device", "cpu", "--frame-path", "device", NULL);
    CHECKF(r.code != 0 && strstr(r.err, "device frame path"), "exit %d: %s", r.code, r.err);
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
    REQUIRE(ck_make_shot(shot, sizeof shot, workdir, "autoshot", 2));
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
    CHECK(ck_count_str(r.out, "\"status\":\"keyed\"") == 2);
    result_free(&r);
    for (int f = 1; f <= 2; f++)
        for (int pass = 0; pass < 4; pass++) {
            out_path(p, sizeof p, shot, pass, f);
            CHECKF(ck_exists(p), "%s missing", p);
        }
    remove_tree(shot);
}

/* ------------------------------------------- synthetic green-screen shot */

/* The generated frames: ck_synth_frame (tests/support/testutil.c). */

static float srgb_to_lin_ref(float v) {
    v = v < 0 ? 0 : v;
    return v <= 0.04045f ? v / 12.92f : powf((v + 0.055f) / 1.055f, 2.4f);
}

static float lin_to_srgb_ref(float v) {
    v = v < 0 ? 0 : v;
    return v <= 0.0031308f ? v * 12.92f : 1.055f * powf(v, 1.0f / 2.4f) - 0.055f;
}

/* |a - b| within the rounding of a HALF store of b (PXR24 keeps HALF
 * exactly): half an ulp of 2^-10 relative, plus `extra`. */
static int half_close(float got, float want, float extra) {
    const float m = fabsf(want) > 1.0f ? fabsf(want) : 1.0f;
    return fabsf(got - want) <= m * 4.9e-4f + 6.2e-5f + extra;
}

static void read_pass(const char *dir, const char *pass, const char *stem, const char *ext,
                      ckey_image_kind kind, ckey_image *img) {
    char p[1024];
    ckey_error err;
    snprintf(p, sizeof p, "%s/%s/%s.%s", dir, pass, stem, ext);
    memset(img, 0, sizeof *img);
    if (ckey_image_read(p, kind, img, &err) != CKEY_OK) {
        printf("  cannot read %s: %s\n", p, err.message);
        memset(img, 0, sizeof *img);
    }
}

/* A fresh clip folder workdir/name with empty Input/ and AlphaHint/. */
static int empty_shot(char *shot, size_t cap, const char *name) {
    char p[1024];
    snprintf(shot, cap, "%s/%s", workdir, name);
    remove_tree(shot);
    if (mkdir(shot, 0777) != 0) return 0;
    snprintf(p, sizeof p, "%s/Input", shot);
    if (mkdir(p, 0777) != 0) return 0;
    snprintf(p, sizeof p, "%s/AlphaHint", shot);
    return mkdir(p, 0777) == 0;
}

/*
 * Five generated frames (72 x 56, frame numbers 101..105) through `ckey key`
 * with the tiny model at S = 64, in both upstream post-processing flavours
 * (default: Lanczos4 + OpenCV despeckle, despill 0.5 -- upstream's shot
 * command defaults; then bilinear + torch despeckle, --despill 1). Per frame and pass: the file exists under the
 * official folder with the plate's stem, its size, channels and depth; then
 * every step against the official math:
 *   Matte / FG  = the network's S x S alpha / fg resized back to the plate
 *                 (the library's forward + the resize validated against
 *                 cv2 / torchvision in test-post / test-pipeline), stored
 *                 as HALF;
 *   Processed.A = despeckle(Matte) (the library's post, validated against
 *                 cv2 / torch in test-post);
 *   Processed.RGB = srgb_to_linear(despill(FG)) * Processed.A and
 *   Comp        = linear_to_srgb(lin * A + checker * (1 - A)), 8 bits:
 *                 recomputed here from the float outputs with the formulas
 *                 of upstream color_utils written out independently, and
 *                 stored as upstream stores it: (clip(c, 0, 1) * 255)
 *                 .astype(uint8), truncated (checked exactly against the
 *                 library's float comp; rounding would differ on about half
 *                 the samples).
 */
static void test_synthetic_shot(void) {
    char model[512], shot[512], p[1024];
    NEED_SETUP(model);
    enum { W = 72, H = 56, N = W * H, F0 = 101, NF = 5, S = 64 };
    REQUIRE(empty_shot(shot, sizeof shot, "synth"));
    float *rgb = malloc(sizeof(float) * 3 * N * NF), *hint = malloc(sizeof(float) * N * NF);
    REQUIRE(rgb && hint);
    ckey_error err;
    for (int k = 0; k < NF; k++) {
        ck_synth_frame(k, W, H, rgb + (size_t)3 * N * k, hint + (size_t)N * k);
        snprintf(p, sizeof p, "%s/Input/greenshot.%04d.png", shot, F0 + k);
        REQUIRE(ckey_image_write_png(p, rgb + (size_t)3 * N * k, 3, W, H, 16, &err) == CKEY_OK);
        snprintf(p, sizeof p, "%s/AlphaHint/greenshot_hint.%04d.png", shot, F0 + k);
        REQUIRE(ckey_image_write_png(p, hint + (size_t)N * k, 1, W, H, 8, &err) == CKEY_OK);
    }

    ckey_model *m = NULL;
    REQUIRE(ckey_model_load(model, &m, &err) == CKEY_OK);
    for (int flavour = 0; flavour < 2; flavour++) {
        const int torch = flavour == 1;
        char out[600];
        snprintf(out, sizeof out, "%s/%s", shot, torch ? "OutTorch" : "Output");
        char plates[600], hints[600];
        snprintf(plates, sizeof plates, "%s/Input", shot);
        snprintf(hints, sizeof hints, "%s/AlphaHint", shot);
        result r = torch ? run_ckey("key", "--plate", plates, "--hint", hints, "--out", out, "--model", model,
                                    "--size", "64", "--threads", "1", "--device", "cpu", "--resize-back", "bilinear",
                                    "--despeckle-mode", "torch", "--despill", "1", "--despeckle-area", "60", NULL)
                         : run_ckey("key", shot, "--model", model, "--size", "64", "--threads", "1",
                                    "--device", "cpu", "--despeckle-area", "60", NULL);
        CHECKF(r.code == 0, "exit %d: %s", r.code, r.err);
        CHECKF(strstr(r.out, "keyed 5 frames") != NULL, "%s", r.out);
        result_free(&r);

        ckey_session_options so;
        ckey_session_options_default(&so);
        CHECK(so.resize_back == CKEY_RESIZE_BACK_LANCZOS4);
        so.size = S;
        so.threads = 1;
        so.resize_back = torch ? CKEY_RESIZE_BACK_BILINEAR : CKEY_RESIZE_BACK_LANCZOS4;
        ckey_session *sess = NULL;
        REQUIRE(ckey_session_create(m, &so, &sess, &err) == CKEY_OK);
        ckey_post_options po;
        ckey_post_options_default(&po);
        CHECK(po.despeckle_mode == CKEY_DESPECKLE_OPENCV);
        po.despeckle_mode = torch ? CKEY_DESPECKLE_TORCH : CKEY_DESPECKLE_OPENCV;
        /* the CLI's default is the shot default, upstream's 0.5 */
        ckey_shot_options sho;
        ckey_shot_options_default(&sho);
        CHECK(sho.post.despill_strength == 0.5f && po.despill_strength == 1.0f);
        po.despill_strength = torch ? 1.0f : sho.post.despill_strength;
        po.despeckle_area = 60;
        const float strength = po.despill_strength;
        float *alpha = malloc(sizeof(float) * N), *fg = malloc(sizeof(float) * 3 * N);
        float *proc = malloc(sizeof(float) * 4 * N), *comp = malloc(sizeof(float) * 3 * N);
        float *raw = malloc(sizeof(float) * 4 * S * S), *back = malloc(sizeof(float) * 4 * N);
        void *scratch = malloc(ckey_post_scratch_bytes(W, H, &po));
        const ck_resize_mode mode = torch ? CK_RESIZE_BILINEAR_AA : CK_RESIZE_LANCZOS4;
        float *rs = malloc(sizeof(float) * ck_resize_scratch_floats(3, S, S, H, W, mode));
        float *pre = malloc(sizeof(float) * ck_preprocess_scratch_floats(H, W, S));
        REQUIRE(alpha && fg && proc && comp && raw && back && scratch && rs && pre);
        double e_matte = 0, e_fg = 0, e_pa = 0, e_prgb = 0, e_comp8 = 0, e_resize = 0;
        long comp_trunc_bad = 0, comp_round_differs = 0;
        double sum_matte = 0, sum_pa = 0;
        int cleared = 0, kept = 0;
        int bad_files = 0;
        for (int k = 0; k < NF; k++) {
            /* the plate and hint as the CLI read them back from the PNGs */
            ckey_image pl, hi;
            snprintf(p, sizeof p, "%s/Input/greenshot.%04d.png", shot, F0 + k);
            REQUIRE(ckey_image_read(p, CKEY_IMAGE_RGB, &pl, &err) == CKEY_OK);
            snprintf(p, sizeof p, "%s/AlphaHint/greenshot_hint.%04d.png", shot, F0 + k);
            REQUIRE(ckey_image_read(p, CKEY_IMAGE_HINT, &hi, &err) == CKEY_OK);
            ckey_frame fr = {W, H, pl.data, hi.data, 0};
            REQUIRE(ckey_session_key(sess, &fr, alpha, fg, &err) == CKEY_OK);
            /* resize back = the network's raw output through the selected resize */
            REQUIRE(ck_preprocess(pl.data, hi.data, H, W, S, 0, raw, pre) == CKEY_OK);
            ckey_forward_result fw;
            REQUIRE(ckey_session_forward(sess, raw, &fw, &err) == CKEY_OK);
            ck_resize rz;
            REQUIRE(ck_resize_prepare(&rz, 1, S, S, H, W, mode, rs) == CKEY_OK);
            ck_resize_run(&rz, fw.alpha, back);
            REQUIRE(ck_resize_prepare(&rz, 3, S, S, H, W, mode, rs) == CKEY_OK);
            ck_resize_run(&rz, fw.fg, back + N);
            for (int i = 0; i < N; i++) {
                e_resize = fmax(e_resize, fabsf(back[i] - alpha[i]));
                for (int c = 0; c < 3; c++) e_resize = fmax(e_resize, fabsf(back[N + c * N + i] - fg[c * N + i]));
            }
            REQUIRE(ckey_post_passes(alpha, fg, W, H, &po, proc, comp, scratch, &err) == CKEY_OK);
            ckey_image_free(&pl);
            ckey_image_free(&hi);

            char stem[64];
            snprintf(stem, sizeof stem, "greenshot.%04d", F0 + k);
            ckey_image mt, fgi, pr, cp;
            read_pass(out, "Matte", stem, "exr", CKEY_IMAGE_HINT, &mt);
            read_pass(out, "FG", stem, "exr", CKEY_IMAGE_RGB, &fgi);
            read_pass(out, "Processed", stem, "exr", CKEY_IMAGE_RGB, &pr);
            read_pass(out, "Comp", stem, "png", CKEY_IMAGE_RGB, &cp);
            if (!mt.data || !fgi.data || !pr.data || !cp.data || mt.width != W || mt.height != H ||
                fgi.width != W || fgi.height != H || pr.width != W || pr.height != H || cp.width != W ||
                cp.height != H || mt.channels != 1 || mt.bit_depth != 16 || fgi.bit_depth != 16 ||
                pr.bit_depth != 16 || !pr.has_alpha || cp.bit_depth != 8 || fgi.has_alpha) {
                bad_files++;
            } else {
                /* Processed's A comes back through the HINT reader */
                ckey_image pra;
                read_pass(out, "Processed", stem, "exr", CKEY_IMAGE_HINT, &pra);
                for (int i = 0; i < N; i++) {
                    /* the bilinear resize is a convex combination of the
                     * network's sigmoid outputs: no ringing */
                    if (torch && !(mt.data[i] >= 0.0f && mt.data[i] <= 1.0f && fgi.data[i] >= 0.0f &&
                                   fgi.data[i] <= 1.0f))
                        e_matte = fmax(e_matte, 1.0);
                    e_matte = fmax(e_matte, fabsf(mt.data[i] - alpha[i]));
                    if (!half_close(mt.data[i], alpha[i], 0)) e_matte = fmax(e_matte, 1.0);
                    const float a = proc[3 * N + i];
                    sum_matte += alpha[i];
                    sum_pa += a;
                    cleared += alpha[i] > 0.5f && a == 0.0f;
                    kept += alpha[i] > 0.5f && a == alpha[i];
                    if (pra.data) {
                        e_pa = fmax(e_pa, fabsf(pra.data[i] - a));
                        if (!half_close(pra.data[i], a, 0)) e_pa = fmax(e_pa, 1.0);
                    }
                    /* independent colour reference from the float outputs */
                    float c3[3] = {fg[i], fg[N + i], fg[2 * N + i]};
                    const float limit = (c3[0] + c3[2]) / 2.0f;
                    const float spill = c3[1] - limit > 0 ? c3[1] - limit : 0.0f;
                    const float des[3] = {c3[0] + spill * 0.5f, c3[1] - spill, c3[2] + spill * 0.5f};
                    const int xx = i % W, yy = i / W;
                    const float bg = srgb_to_lin_ref(((xx / 128 + yy / 128) % 2) ? 0.55f : 0.15f);
                    for (int c = 0; c < 3; c++) {
                        const float d = strength < 1.0f ? c3[c] * (1.0f - strength) + des[c] * strength : des[c];
                        const float lin = srgb_to_lin_ref(d);
                        const float want_p = lin * a;
                        e_fg = fmax(e_fg, fabsf(fgi.data[c * N + i] - c3[c]));
                        if (!half_close(fgi.data[c * N + i], c3[c], 0)) e_fg = fmax(e_fg, 1.0);
                        e_prgb = fmax(e_prgb, fabsf(pr.data[c * N + i] - want_p));
                        if (!half_close(pr.data[c * N + i], want_p, 2e-6f)) e_prgb = fmax(e_prgb, 1.0);
                        float cs = lin_to_srgb_ref(lin * a + bg * (1.0f - a));
                        cs = cs < 0 ? 0 : cs > 1 ? 1 : cs;
                        /* the PNG holds trunc(255 c), c the library's float comp
                         * clipped to [0, 1], the product in float32 (numpy) */
                        const float cl = comp[c * N + i] < 0.0f ? 0.0f : comp[c * N + i] > 1.0f ? 1.0f : comp[c * N + i];
                        const long got = lrint(cp.data[c * N + i] * 255.0f);
                        const long want_t = (long)(cl * 255.0f);
                        comp_trunc_bad += got != want_t;
                        comp_round_differs += lrint((double)cl * 255.0) != want_t;
                        /* and against the independent reference: within a step */
                        e_comp8 = fmax(e_comp8, fabs((double)got - (double)cs * 255.0));
                    }
                }
                ckey_image_free(&pra);
            }
            ckey_image_free(&mt);
            ckey_image_free(&fgi);
            ckey_image_free(&pr);
            ckey_image_free(&cp);
        }
        printf("  %s: files bad %d; resize back vs session_key %.3g; Matte %.3g, FG %.3g, Processed A %.3g "
               "(HALF rounding allowed), Processed RGB %.3g vs independent reference, Comp %.3g of 8-bit steps; "
               "Comp samples not truncated as upstream %ld (rounding would change %ld)\n",
               torch ? "bilinear + torch despeckle + despill 1" : "defaults (lanczos4 + opencv, despill 0.5)",
               bad_files, e_resize, e_matte, e_fg, e_pa, e_prgb, e_comp8, comp_trunc_bad, comp_round_differs);
        printf("  mean Matte %.4f, mean Processed A %.4f; pixels over 0.5 cleared by the despeckle %d, kept %d\n",
               sum_matte / (N * NF), sum_pa / (N * NF), cleared, kept);
        CHECK(bad_files == 0);
        CHECKF(sum_pa > 0.01 * N * NF && kept > 0, "the matte is empty: nothing to check");
        CHECKF(e_resize == 0.0, "resize back differs from ckey_session_key by %g", e_resize);
        CHECKF(e_matte < 1.0 && e_fg < 1.0 && e_pa < 1.0 && e_prgb < 1.0, "outside the HALF rounding");
        CHECKF(e_comp8 < 1.0 + 1e-3, "Comp off by %g steps of 1/255", e_comp8);
        CHECKF(comp_trunc_bad == 0, "%ld Comp samples are not trunc(255 c)", comp_trunc_bad);
        CHECKF(comp_round_differs > 0, "no sample tells truncation from rounding");
        /* exactly the five frames, named after the plates, in each pass */
        for (int pass = 0; pass < 4; pass++) {
            snprintf(p, sizeof p, "%s/%s", out, ck_pass_names[pass]);
            DIR *d = opendir(p);
            int files = 0;
            struct dirent *e;
            while (d && (e = readdir(d)))
                if (e->d_name[0] != '.') files++;
            if (d) closedir(d);
            CHECKF(files == NF, "%s holds %d files", p, files);
        }
        free(alpha);
        free(fg);
        free(proc);
        free(comp);
        free(raw);
        free(back);
        free(scratch);
        free(rs);
        free(pre);
        ckey_session_free(sess);
    }
    ckey_model_free(m);
    free(rgb);
    free(hint);
    remove_tree(shot);
}

/* cv2.resize(src, (ow, oh), interpolation=INTER_LINEAR) on a one-channel
 * float image, written out from OpenCV's definition: src = (dst + 0.5) *
 * in / out - 0.5; below 0 the first pixel, past the end the last. */
static void cv2_linear_ref(const float *src, int iw, int ih, float *dst, int ow, int oh) {
    for (int y = 0; y < oh; y++) {
        double sy = (y + 0.5) * ih / oh - 0.5;
        int y0 = (int)floor(sy);
        double fy = sy - y0;
        if (y0 < 0) y0 = 0, fy = 0;
        if (y0 >= ih - 1) y0 = ih - 1, fy = 0;
        const int y1 = y0 + 1 < ih ? y0 + 1 : y0;
        for (int x = 0; x < ow; x++) {
            double sx = (x + 0.5) * iw / ow - 0.5;
            int x0 = (int)floor(sx);
            double fx = sx - x0;
            if (x0 < 0) x0 = 0, fx = 0;
            if (x0 >= iw - 1) x0 = iw - 1, fx = 0;
            const int x1 = x0 + 1 < iw ? x0 + 1 : x0;
            const double top = src[y0 * iw + x0] * (1 - fx) + src[y0 * iw + x1] * fx;
            const double bot = src[y1 * iw + x0] * (1 - fx) + src[y1 * iw + x1] * fx;
            dst[y * ow + x] = (float)(top * (1 - fy) + bot * fy);
        }
    }
}

/* Key `plate` with `hint` in-process as `ckey key --size 64 --threads 1` does. */
static int key_in_process(const char *model, const ckey_image *plate, const float *hint, int input_is_linear,
                          float *alpha, float *fg) {
    ckey_model *m = NULL;
    ckey_session *sess = NULL;
    ckey_error err;
    ckey_session_options so;
    ckey_session_options_default(&so);
    so.size = 64;
    so.threads = 1;
    int ok = ckey_model_load(model, &m, &err) == CKEY_OK && ckey_session_create(m, &so, &sess, &err) == CKEY_OK;
    if (ok) {
        ckey_frame fr = {plate->width, plate->height, plate->data, hint, input_is_linear};
        ok = ckey_session_key(sess, &fr, alpha, fg, &err) == CKEY_OK;
    }
    if (!ok) printf("  in-process key failed: %s\n", err.message);
    ckey_session_free(sess);
    ckey_model_free(m);
    return ok;
}

/*
 * A hint of another size than its plate (100 x 60 for a 320 x 180 plate,
 * ratios 3.2 and 3) is resized to the plate as upstream's shot command does
 * (cv2.resize INTER_LINEAR on the float mask): the library's resize against
 * OpenCV's formula written out here, then the CLI's Matte against keying
 * with that resized hint in-process; the warning event names the frame and
 * both sizes.
 */
static void test_hint_resize(void) {
    char model[512], shot[512], p[1024];
    NEED_SETUP(model);
    REQUIRE(ck_make_shot(shot, sizeof shot, workdir, "hintsize", 1));
    enum { HW = 100, HH = 60 };
    static float small[HW * HH];
    for (int y = 0; y < HH; y++)
        for (int x = 0; x < HW; x++) /* a soft blob: hint-like, not constant */
            small[y * HW + x] = (float)(0.5 + 0.5 * tanh(6.0 * (0.3 - hypot((x - 50.0) / 100.0, (y - 33.0) / 60.0))));
    ckey_error err;
    snprintf(p, sizeof p, "%s/AlphaHint/hint_0001.png", shot);
    REQUIRE(ckey_image_write_png(p, small, 1, HW, HH, 16, &err) == CKEY_OK);
    ckey_image plate, hint;
    REQUIRE(ckey_image_read("examples/plate.png", CKEY_IMAGE_RGB, &plate, &err) == CKEY_OK);
    REQUIRE(ckey_image_read(p, CKEY_IMAGE_HINT, &hint, &err) == CKEY_OK);
    const int W = plate.width, H = plate.height, N = W * H;
    float *ref = malloc(sizeof(float) * N), *lib = malloc(sizeof(float) * N);
    float *alpha = malloc(sizeof(float) * N), *fg = malloc(sizeof(float) * 3 * N);
    float *rs = malloc(sizeof(float) * ck_resize_scratch_floats(1, HH, HW, H, W, CK_RESIZE_BILINEAR));
    REQUIRE(ref && lib && alpha && fg && rs);
    cv2_linear_ref(hint.data, HW, HH, ref, W, H);
    ck_resize rz;
    REQUIRE(ck_resize_prepare(&rz, 1, HH, HW, H, W, CK_RESIZE_BILINEAR, rs) == CKEY_OK);
    ck_resize_run(&rz, hint.data, lib);
    double e = 0, spread = 0;
    for (int i = 0; i < N; i++) {
        e = fmax(e, fabs((double)lib[i] - ref[i]));
        spread = fmax(spread, fabs((double)ref[i] - ref[0]));
    }
    printf("  hint %d x %d -> %d x %d: library resize vs cv2 INTER_LINEAR formula max %.3g (hint spread %.3g)\n",
           HW, HH, W, H, e, spread);
    CHECKF(e <= 2e-6, "the hint resize is not cv2's INTER_LINEAR: max error %g", e);
    CHECK(spread > 0.5);

    result r = run_ckey("key", shot, "--model", model, "--size", "64", "--threads", "1", "--device", "cpu", "--json",
                        NULL);
    CHECKF(r.code == 0, "exit %d: %s", r.code, r.err);
    CHECKF(strstr(r.out, "{\"event\":\"warning\",\"frame\":1,") && strstr(r.out, "100 x 60") &&
               strstr(r.out, "320 x 180") && strstr(r.out, "resized"),
           "%s", r.out);
    CHECK(strstr(r.out, "\"warnings\":1,") != NULL);
    /* the warning comes before the frame's event */
    const char *w = strstr(r.out, "\"event\":\"warning\""), *k = strstr(r.out, "\"status\":\"keyed\"");
    CHECK(w && k && w < k);
    result_free(&r);
    REQUIRE(key_in_process(model, &plate, lib, 0, alpha, fg));
    ckey_image mt;
    out_path(p, sizeof p, shot, 0, 1);
    REQUIRE(ckey_image_read(p, CKEY_IMAGE_HINT, &mt, &err) == CKEY_OK);
    double em = 0;
    int bad = 0;
    for (int i = 0; i < N; i++) {
        em = fmax(em, fabsf(mt.data[i] - alpha[i]));
        bad += !half_close(mt.data[i], alpha[i], 0);
    }
    printf("  Matte vs in-process key with the resized hint: max %.3g (%d outside HALF rounding)\n", em, bad);
    CHECK(bad == 0);
    ckey_image_free(&mt);
    ckey_image_free(&plate);
    ckey_image_free(&hint);
    free(ref);
    free(lib);
    free(alpha);
    free(fg);
    free(rs);
    remove_tree(shot);
}

/*
 * An EXR plate (scene-linear) with --input-space auto is converted to sRGB as
 * it is read, at full size, before the resize: upstream's default
 * (read_image_frame(gamma_correct_exr=True) with InferenceSettings
 * .input_is_linear = False); --input-space linear converts after the resize
 * (upstream's --linear). Each run's Matte against the in-process key of that
 * treatment; the two treatments must differ for the check to mean anything.
 */
static void test_exr_plate_space(void) {
    char model[512], shot[512], p[1024];
    NEED_SETUP(model);
    REQUIRE(ck_make_shot(shot, sizeof shot, workdir, "exrplate", 1));
    ckey_error err;
    ckey_image plate, hint;
    REQUIRE(ckey_image_read("examples/plate.png", CKEY_IMAGE_RGB, &plate, &err) == CKEY_OK);
    REQUIRE(ckey_image_read("examples/hint.png", CKEY_IMAGE_HINT, &hint, &err) == CKEY_OK);
    const int W = plate.width, H = plate.height, N = W * H;
    /* the plate as linear light, HALF-exact so the EXR holds it unchanged */
    for (int i = 0; i < 3 * N; i++) {
        const float v = plate.data[i];
        plate.data[i] = v <= 0.04045f ? v / 12.92f : powf((v + 0.055f) / 1.055f, 2.4f);
    }
    snprintf(p, sizeof p, "%s/Input/plate_0001.png", shot);
    unlink(p);
    snprintf(p, sizeof p, "%s/Input/plate_0001.exr", shot);
    REQUIRE(ckey_image_write_exr(p, plate.data, 3, W, H, CKEY_EXR_ZIP, &err) == CKEY_OK);
    ckey_image_free(&plate);
    REQUIRE(ckey_image_read(p, CKEY_IMAGE_RGB, &plate, &err) == CKEY_OK); /* as ckey reads it */
    float *a_read = malloc(sizeof(float) * N), *a_after = malloc(sizeof(float) * N);
    float *fg = malloc(sizeof(float) * 3 * N);
    REQUIRE(a_read && a_after && fg);
    REQUIRE(key_in_process(model, &plate, hint.data, 1, a_after, fg));
    ckey_linear_to_srgb(plate.data, 3 * (size_t)N);
    REQUIRE(key_in_process(model, &plate, hint.data, 0, a_read, fg));
    double apart = 0;
    for (int i = 0; i < N; i++) apart = fmax(apart, fabsf(a_read[i] - a_after[i]));
    printf("  converting before vs after the resize changes the matte by up to %.3g\n", apart);
    CHECKF(apart > 1e-2, "the two treatments are too close (%g) for this test to tell them apart", apart);

    static const char *const spaces[2] = {"auto", "linear"};
    for (int k = 0; k < 2; k++) {
        char out[600];
        snprintf(out, sizeof out, "%s/Out-%s", shot, spaces[k]);
        char pl[600], hi[600];
        snprintf(pl, sizeof pl, "%s/Input", shot);
        snprintf(hi, sizeof hi, "%s/AlphaHint", shot);
        result r = run_ckey("key", "--plate", pl, "--hint", hi, "--out", out, "--model", model, "--size", "64",
                            "--threads", "1", "--device", "cpu", "--input-space", spaces[k], NULL);
        CHECKF(r.code == 0, "exit %d: %s", r.code, r.err);
        result_free(&r);
        ckey_image mt;
        snprintf(p, sizeof p, "%s/Matte/plate_0001.exr", out);
        REQUIRE(ckey_image_read(p, CKEY_IMAGE_HINT, &mt, &err) == CKEY_OK);
        const float *want = k == 0 ? a_read : a_after;
        int bad = 0;
        double e = 0;
        for (int i = 0; i < N; i++) {
            e = fmax(e, fabsf(mt.data[i] - want[i]));
            bad += !half_close(mt.data[i], want[i], 0);
        }
        printf("  --input-space %s: Matte vs converted %s the resize: max %.3g, %d outside HALF rounding\n",
               spaces[k], k == 0 ? "before" : "after", e, bad);
        CHECK(bad == 0);
        ckey_image_free(&mt);
    }
    ckey_image_free(&plate);
    ckey_image_free(&hint);
    free(a_read);
    free(a_after);
    free(fg);
    remove_tree(shot);
}

/* ------------------------------------------------------ parallel writers */

/*
 * --writers 3 against --writers 1 on a 7-frame shot whose frames differ
 * (the synthetic disc moving): every pass file byte for byte the same (the
 * three writers work on frames 1, 2, 3 then 4, 5, 6 at once, with their own
 * buffers), and the frame events in frame order.
 */
static void test_parallel_writers(void) {
    char model[512], shot[512], p[1024];
    NEED_SETUP(model);
    enum { W = 72, H = 56, N = W * H, F0 = 11, NF = 7 };
    REQUIRE(empty_shot(shot, sizeof shot, "writers"));
    float *rgb = malloc(sizeof(float) * 3 * N), *hint = malloc(sizeof(float) * N);
    REQUIRE(rgb && hint);
    ckey_error err;
    for (int k = 0; k < NF; k++) {
        ck_synth_frame(k, W, H, rgb, hint);
        snprintf(p, sizeof p, "%s/Input/w.%04d.png", shot, F0 + k);
        REQUIRE(ckey_image_write_png(p, rgb, 3, W, H, 16, &err) == CKEY_OK);
        snprintf(p, sizeof p, "%s/AlphaHint/w_hint.%04d.png", shot, F0 + k);
        REQUIRE(ckey_image_write_png(p, hint, 1, W, H, 8, &err) == CKEY_OK);
    }
    free(rgb);
    free(hint);
    char plates[600], hints[600], out[2][600];
    snprintf(plates, sizeof plates, "%s/Input", shot);
    snprintf(hints, sizeof hints, "%s/AlphaHint", shot);
    static const char *const writers[2] = {"1", "3"};
    for (int v = 0; v < 2; v++) {
        snprintf(out[v], sizeof out[v], "%s/Out%s", shot, writers[v]);
        result r = run_ckey("key", "--plate", plates, "--hint", hints, "--out", out[v], "--model", model,
                            "--size", "64", "--threads", "1", "--read-ahead", "2", "--writers", writers[v],
                            "--json", NULL);
        CHECKF(r.code == 0, "exit %d: %s", r.code, r.err);
        CHECK(ck_count_str(r.out, "\"status\":\"keyed\"") == NF);
        /* the frame events in order */
        const char *at = r.out;
        for (int k = 0; k < NF; k++) {
            char want[64];
            snprintf(want, sizeof want, "\"frame\":%d,\"status\":\"keyed\"", F0 + k);
            const char *q = strstr(r.out, want);
            CHECKF(q && q >= at, "writers %s: event of frame %d missing or out of order", writers[v], F0 + k);
            if (q) at = q;
        }
        result_free(&r);
    }
    for (int k = 0; k < NF; k++)
        for (int pass = 0; pass < 4; pass++) {
            char a[1024], b[1024];
            snprintf(a, sizeof a, "%s/%s/w.%04d.%s", out[0], ck_pass_names[pass], F0 + k, pass == 3 ? "png" : "exr");
            snprintf(b, sizeof b, "%s/%s/w.%04d.%s", out[1], ck_pass_names[pass], F0 + k, pass == 3 ? "png" : "exr");
            CHECKF(ck_same_file(a, b), "%s and %s differ", a, b);
        }
    /* frames differ from each other (so a mix-up would show) */
    {
        char a[1024], b[1024];
        snprintf(a, sizeof a, "%s/Matte/w.%04d.exr", out[1], F0);
        snprintf(b, sizeof b, "%s/Matte/w.%04d.exr", out[1], F0 + 1);
        size_t na = 0, nb = 0;
        unsigned char *da = ck_read_file(a, &na), *db = ck_read_file(b, &nb);
        CHECK(da && db && (na != nb || memcmp(da, db, na) != 0));
        free(da);
        free(db);
    }
    result r = run_ckey("key", shot, "--model", model, "--writers", "65", NULL);
    CHECKF(r.code == 2 && strstr(r.err, "--writers"), "exit %d: %s", r.code, r.err);
    result_free(&r);
    remove_tree(shot);
}

/* The shot tests' session: model on the CPU at size 64, one thread (the
 * network's result then does not depend on the shot's threads). 1 when
 * made; else 0, with the error printed. */
static int cpu_session(const char *model, ckey_model **m, ckey_session **s) {
    ckey_error err;
    *m = NULL, *s = NULL;
    ckey_session_options so;
    ckey_session_options_default(&so);
    so.device = CKEY_DEVICE_CPU;
    so.size = 64;
    so.threads = 1;
    if (ckey_model_load(model, m, &err) == CKEY_OK && ckey_session_create(*m, &so, s, &err) == CKEY_OK) return 1;
    printf("  the CPU session failed: %s\n", err.message);
    ckey_model_free(*m);
    *m = NULL;
    return 0;
}

/* The sequence plates + hints as the source, a passes sink writing under
 * out. 1 when both are open; else 0 (nothing held), with the error printed. */
static int open_shot_io(const char *plates, const char *hints, const char *out, ckey_source *src, ckey_sink *sink) {
    ckey_error err;
    if (ckey_source_open_sequence(plates, hints, NULL, NULL, src, &err) != CKEY_OK) {
        printf("  the source failed: %s\n", err.message);
        return 0;
    }
    if (ckey_sink_open_passes_opt(out, NULL, sink, &err) != CKEY_OK) {
        printf("  the sink failed: %s\n", err.message);
        ckey_source_close(src);
        return 0;
    }
    return 1;
}

/*
 * One shot through ckey_shot_run with every thread count: unthreaded; one
 * reader, one writer, a pool of 1; three readers, two writers, a pool of 4;
 * two readers, three writers on the session's own pool; and the first of
 * those with a source that reads one frame at a time (the readers take
 * turns). The network runs on one thread each time, so the passes must be
 * the same files, byte for byte. The frames have odd sizes (several EXR
 * chunks, a partial last one, rows not a multiple of the post blocks), one
 * hint of another size (resized on the reader) and one larger plate (the
 * reused buffers grow).
 */
static void test_thread_counts(void) {
    char model[512], shot[512], p[1024];
    NEED_SETUP(model);
    enum { NF = 7 };
    REQUIRE(empty_shot(shot, sizeof shot, "threads"));
    ckey_error err;
    for (int k = 0; k < NF; k++) {
        const int W = k == 5 ? 170 : 150, H = k == 5 ? 101 : 97;
        float *rgb = malloc(sizeof(float) * 3 * W * H), *hint = malloc(sizeof(float) * W * H);
        REQUIRE(rgb && hint);
        ck_synth_frame(k, W, H, rgb, hint);
        snprintf(p, sizeof p, "%s/Input/t.%04d.png", shot, 1 + k);
        REQUIRE(ckey_image_write_png(p, rgb, 3, W, H, 8, &err) == CKEY_OK);
        snprintf(p, sizeof p, "%s/AlphaHint/t.%04d.png", shot, 1 + k);
        /* frame 3's hint at half size: resized to its plate by the reader */
        if (k == 3) {
            for (int y = 0; y < H / 2; y++)
                for (int x = 0; x < W / 2; x++) hint[y * (W / 2) + x] = hint[(2 * y) * W + 2 * x];
            REQUIRE(ckey_image_write_png(p, hint, 1, W / 2, H / 2, 8, &err) == CKEY_OK);
        } else {
            REQUIRE(ckey_image_write_png(p, hint, 1, W, H, 8, &err) == CKEY_OK);
        }
        free(rgb);
        free(hint);
    }
    ckey_model *m;
    ckey_session *s;
    REQUIRE(cpu_session(model, &m, &s));
    static const struct { int read_ahead, readers, writers, threads, serial_source; } cfg[] = {
        {0, 1, 1, 1, 0}, {2, 1, 1, 1, 0}, {3, 3, 2, 4, 0}, {1, 2, 3, 0, 0}, {3, 3, 2, 4, 1}};
    enum { NC = sizeof cfg / sizeof cfg[0] };
    char out[NC][600], plates[600], hints[600];
    snprintf(plates, sizeof plates, "%s/Input", shot);
    snprintf(hints, sizeof hints, "%s/AlphaHint", shot);
    for (int c = 0; c < (int)NC; c++) {
        snprintf(out[c], sizeof out[c], "%s/Out%d", shot, c);
        ckey_source src;
        ckey_sink sink;
        REQUIRE(open_shot_io(plates, hints, out[c], &src, &sink));
        if (cfg[c].serial_source) src.concurrent_read = 0;
        ckey_shot_options o;
        ckey_shot_options_default(&o);
        o.read_ahead = cfg[c].read_ahead;
        o.readers = cfg[c].readers;
        o.writers = cfg[c].writers;
        o.threads = cfg[c].threads;
        ckey_shot_stats st;
        const ckey_status rc = ckey_shot_run(s, &src, &sink, NULL, &o, NULL, NULL, &st, &err);
        CHECKF(rc == CKEY_OK && st.keyed == NF, "config %d: %s", c, err.message);
        CHECK(st.decode_seconds > 0 && st.pass_seconds[0] > 0 && st.pass_seconds[3] > 0);
        printf("  read-ahead %d, %d readers, %d writers, pool %d%s: %.3f s\n", cfg[c].read_ahead, cfg[c].readers,
               cfg[c].writers, cfg[c].threads, cfg[c].serial_source ? ", reads one at a time" : "", st.seconds);
        ckey_sink_close(&sink);
        ckey_source_close(&src);
    }
    int compared = 0;
    for (int k = 0; k < NF; k++)
        for (int pass = 0; pass < 4; pass++) {
            char a[1024];
            snprintf(a, sizeof a, "%s/%s/t.%04d.%s", out[0], ck_pass_names[pass], 1 + k, pass == 3 ? "png" : "exr");
            size_t na = 0;
            unsigned char *da = ck_read_file(a, &na);
            CHECKF(da != NULL, "%s is missing", a);
            for (int c = 1; da && c < (int)NC; c++) {
                char b[1024];
                snprintf(b, sizeof b, "%s/%s/t.%04d.%s", out[c], ck_pass_names[pass], 1 + k, pass == 3 ? "png" : "exr");
                size_t nb = 0;
                unsigned char *db = ck_read_file(b, &nb);
                CHECKF(db && na == nb && memcmp(da, db, na) == 0, "%s and %s differ", a, b);
                free(db);
                compared++;
            }
            free(da);
        }
    printf("  %d files compared with the unthreaded run's\n", compared);
    /* a CPU session has no device frame path: asked for, the run refuses before anything is written */
    {
        ckey_source src;
        ckey_sink sink;
        char dir[700];
        snprintf(dir, sizeof dir, "%s/OutDevice", shot);
        REQUIRE(open_shot_io(plates, hints, dir, &src, &sink));
        ckey_shot_options o;
        ckey_shot_options_default(&o);
        o.frame_path = CKEY_FRAME_PATH_DEVICE;
        ckey_shot_stats st;
        const ckey_status rc = ckey_shot_run(s, &src, &sink, NULL, &o, NULL, NULL, &st, &err);
        CHECKF(rc == CKEY_ERR_UNSUPPORTED && st.keyed == 0 && strstr(err.message, "GPU"), "%s: %s",
               ckey_status_name(rc), err.message);
        printf("  frame path device on a CPU session: %s\n", err.message);
        ckey_sink_close(&sink);
        ckey_source_close(&src);
    }
    ckey_session_free(s);
    ckey_model_free(m);
    remove_tree(shot);
}

/* The stages' busy times of ckey_shot_run (ckey_shot_load): in the stats and
 * in every KEYED event, non-negative, growing from event to event, equal to
 * the older per-stage stats they refine, each group's use within [0, 1],
 * and the bounding stage one of its group's; and `ckey key` naming it in the
 * progress lines, the summary and the --json events. */
typedef struct load_log {
    int keyed, bad;
    char why[256];
    ckey_shot_load last;
} load_log;

static void log_load(void *user, const ckey_shot_event *ev) {
    load_log *g = user;
    if (ev->kind != CKEY_SHOT_KEYED) return;
    const ckey_shot_load *l = ev->load;
    if (!l) {
        g->bad = 1;
        snprintf(g->why, sizeof g->why, "keyed event %d has no load", g->keyed);
        return;
    }
    for (int k = 0; k < CKEY_SHOT_STAGES; k++)
        if (!(l->stage_seconds[k] >= 0) || (g->keyed && l->stage_seconds[k] < g->last.stage_seconds[k])) {
            g->bad = 1;
            snprintf(g->why, sizeof g->why, "keyed event %d: stage %s %g after %g", g->keyed,
                     ckey_shot_stage_name(k), l->stage_seconds[k], g->last.stage_seconds[k]);
        }
    if (g->keyed && l->elapsed < g->last.elapsed) g->bad = 1;
    g->last = *l;
    g->keyed++;
}

/* Whether stage k runs on group g (the host frame path). */
static int stage_in_group(int k, int g) {
    switch (g) {
    case CKEY_GROUP_READERS: return k == CKEY_STAGE_READ || k == CKEY_STAGE_PRE;
    case CKEY_GROUP_NETWORK: return k == CKEY_STAGE_UPLOAD || k == CKEY_STAGE_NETWORK || k == CKEY_STAGE_DOWNLOAD;
    case CKEY_GROUP_WRITERS: return k >= CKEY_STAGE_BACK;
    case CKEY_GROUP_ORDERED: return k == CKEY_STAGE_ENCODE || k == CKEY_STAGE_WRITE;
    default: return 0;
    }
}

static int near(double a, double b) { return fabs(a - b) <= 1e-9 + 1e-9 * fabs(b); }

static void test_stage_stats(void) {
    char model[512], shot[512];
    NEED_SETUP(model);
    enum { NF = 4 };
    REQUIRE(ck_make_shot(shot, sizeof shot, workdir, "stages", NF));
    ckey_error err;
    ckey_model *m;
    ckey_session *s;
    REQUIRE(cpu_session(model, &m, &s));
    static const struct { int read_ahead, readers, writers; } cfg[] = {{0, 1, 1}, {2, 1, 2}, {3, 2, 3}};
    char plates[600], hints[600], out[640];
    snprintf(plates, sizeof plates, "%s/Input", shot);
    snprintf(hints, sizeof hints, "%s/AlphaHint", shot);
    for (int c = 0; c < (int)LEN(cfg); c++) {
        snprintf(out, sizeof out, "%s/Out%d", shot, c);
        ckey_source src;
        ckey_sink sink;
        REQUIRE(open_shot_io(plates, hints, out, &src, &sink));
        ckey_shot_options o;
        ckey_shot_options_default(&o);
        o.read_ahead = cfg[c].read_ahead;
        o.readers = cfg[c].readers;
        o.writers = cfg[c].writers;
        load_log g;
        memset(&g, 0, sizeof g);
        ckey_shot_stats st;
        const ckey_status rc = ckey_shot_run(s, &src, &sink, NULL, &o, log_load, &g, &st, &err);
        CHECKF(rc == CKEY_OK && st.keyed == NF, "config %d: %s", c, err.message);
        CHECKF(g.keyed == NF && !g.bad, "config %d: %d keyed events: %s", c, g.keyed, g.why);
        const ckey_shot_load *l = &st.load;
        const double *sec = l->stage_seconds;
        printf("  read-ahead %d, %d readers, %d writers: %.3f s;", cfg[c].read_ahead, cfg[c].readers,
               cfg[c].writers, st.seconds);
        for (int k = 0; k < CKEY_SHOT_STAGES; k++) printf(" %s %.4f", ckey_shot_stage_name(k), sec[k]);
        printf("; use");
        for (int q = 0; q < CKEY_SHOT_GROUPS; q++) printf(" %s %.2f", ckey_shot_group_name(q), l->use[q]);
        printf("; bound by %s (%s)\n", ckey_shot_stage_name(l->bound), ckey_shot_group_name(l->bound_group));
        /* the stages refine the per-stage stats: equal sums */
        CHECKF(near(sec[CKEY_STAGE_READ], st.decode_seconds), "config %d: read %g, decode %g", c,
               sec[CKEY_STAGE_READ], st.decode_seconds);
        CHECKF(near(sec[CKEY_STAGE_PRE], st.pre_seconds), "config %d: pre %g vs %g", c, sec[CKEY_STAGE_PRE],
               st.pre_seconds);
        CHECKF(near(sec[CKEY_STAGE_UPLOAD] + sec[CKEY_STAGE_NETWORK] + sec[CKEY_STAGE_DOWNLOAD], st.model_seconds),
               "config %d: upload + network + download %g, model %g", c,
               sec[CKEY_STAGE_UPLOAD] + sec[CKEY_STAGE_NETWORK] + sec[CKEY_STAGE_DOWNLOAD], st.model_seconds);
        CHECKF(sec[CKEY_STAGE_UPLOAD] == 0 && sec[CKEY_STAGE_DOWNLOAD] == 0, "config %d: transfers on the CPU", c);
        CHECKF(near(sec[CKEY_STAGE_BACK], st.back_seconds) && near(sec[CKEY_STAGE_POST], st.post_seconds),
               "config %d: back %g vs %g, post %g vs %g", c, sec[CKEY_STAGE_BACK], st.back_seconds,
               sec[CKEY_STAGE_POST], st.post_seconds);
        CHECKF(near(sec[CKEY_STAGE_ENCODE] + sec[CKEY_STAGE_WRITE], st.sink_seconds),
               "config %d: encode + write %g, sink %g", c, sec[CKEY_STAGE_ENCODE] + sec[CKEY_STAGE_WRITE],
               st.sink_seconds);
        /* every stage that runs here took time; the passes sink reports its file I/O */
        for (int k = 0; k < CKEY_SHOT_STAGES; k++)
            if (k != CKEY_STAGE_UPLOAD && k != CKEY_STAGE_DOWNLOAD)
                CHECKF(sec[k] > 0, "config %d: stage %s took %g s", c, ckey_shot_stage_name(k), sec[k]);
        CHECKF(l->elapsed == st.seconds, "config %d: elapsed %g, seconds %g", c, l->elapsed, st.seconds);
        CHECKF(g.last.elapsed <= l->elapsed, "config %d: last event at %g s, run %g s", c, g.last.elapsed, l->elapsed);
        for (int k = 0; k < CKEY_SHOT_STAGES; k++)
            CHECKF(g.last.stage_seconds[k] <= sec[k], "config %d: %s %g in the last event, %g at the end", c,
                   ckey_shot_stage_name(k), g.last.stage_seconds[k], sec[k]);
        /* threads, use, the bound */
        const int threaded = cfg[c].read_ahead > 0;
        CHECKF(l->threads[CKEY_GROUP_READERS] == cfg[c].readers && l->threads[CKEY_GROUP_NETWORK] == 1 &&
                   l->threads[CKEY_GROUP_WRITERS] == cfg[c].writers && l->threads[CKEY_GROUP_ORDERED] == 1,
               "config %d: threads %d %d %d %d", c, (int)l->threads[0], (int)l->threads[1], (int)l->threads[2],
               (int)l->threads[3]);
        double total = 0;
        for (int q = 0; q < CKEY_SHOT_GROUPS; q++) {
            CHECKF(l->use[q] >= 0 && l->use[q] <= 1.0 + 1e-6, "config %d: %s use %g", c, ckey_shot_group_name(q),
                   l->use[q]);
            /* the ordered part runs on the writers' threads: in their use */
            if (q != CKEY_GROUP_ORDERED) total += l->use[q] * l->threads[q];
        }
        CHECKF(l->use[CKEY_GROUP_WRITERS] * l->threads[CKEY_GROUP_WRITERS] >= l->use[CKEY_GROUP_ORDERED] - 1e-9,
               "config %d: the writers' use %g leaves out their ordered part's %g", c, l->use[CKEY_GROUP_WRITERS],
               l->use[CKEY_GROUP_ORDERED]);
        /* unthreaded, one thread runs the stages one after another: their
         * busy time is at most the run's */
        if (!threaded) CHECKF(total <= 1.0 + 1e-6, "unthreaded: the groups' use sums to %g", total);
        CHECKF(l->bound >= 0 && l->bound < CKEY_SHOT_STAGES && l->bound_group >= 0 &&
                   l->bound_group < CKEY_SHOT_GROUPS && stage_in_group(l->bound, l->bound_group),
               "config %d: bound %d in group %d", c, (int)l->bound, (int)l->bound_group);
        for (int q = 0; q < CKEY_SHOT_GROUPS; q++)
            CHECKF(l->use[q] <= l->use[l->bound_group], "config %d: %s use %g above the bound's %g", c,
                   ckey_shot_group_name(q), l->use[q], l->use[l->bound_group]);
        CHECKF(l->wait_input_seconds >= 0 && l->wait_output_seconds >= 0 &&
                   l->wait_input_seconds + l->wait_output_seconds <= l->elapsed,
               "config %d: waits %g + %g in %g s", c, l->wait_input_seconds, l->wait_output_seconds, l->elapsed);
        /* each writer waits for its turns within the run */
        CHECKF(l->wait_turn_seconds >= 0 && l->wait_turn_seconds <= l->elapsed * cfg[c].writers,
               "config %d: turn waits %g in %g s, %d writers", c, l->wait_turn_seconds, l->elapsed, cfg[c].writers);
        ckey_sink_close(&sink);
        ckey_source_close(&src);
    }
    ckey_session_free(s);
    ckey_model_free(m);

    /* the CLI: the bounding stage in each progress line and the summary */
    result r = run_ckey("key", shot, "--model", model, "--size", "64", "--threads", "2", "--force", NULL);
    CHECKF(r.code == 0, "exit %d: %s", r.code, r.err);
    int named = 0;
    for (const char *at = r.err; (at = strstr(at, "bound by ")); at++) {
        at += strlen("bound by ");
        int ok = 0;
        for (int k = 0; k < CKEY_SHOT_STAGES; k++) {
            const char *nm = ckey_shot_stage_name(k);
            if (!strncmp(at, nm, strlen(nm)) && at[strlen(nm)] == ' ') ok = 1;
        }
        CHECKF(ok, "progress line names no stage: %.60s", at);
        named++;
    }
    CHECKF(named == NF, "%d of %d progress lines name the bounding stage: %s", named, NF, r.err);
    CHECKF(strstr(r.out, "model only, bound by ") != NULL, "summary: %s", r.out);
    result_free(&r);
    r = run_ckey("key", shot, "--model", model, "--size", "64", "--threads", "2", "--force", "--json", NULL);
    CHECKF(r.code == 0, "exit %d: %s", r.code, r.err);
    CHECK(ck_count_str(r.out, "\"stages\":{\"read\":") == NF + 1);
    const char *done = strstr(r.out, "{\"event\":\"done\"");
    CHECKF(done && strstr(done, "\"stages\":{\"read\":") && strstr(done, "\"bound\":\"") &&
               strstr(done, "\"use\":{\"readers\":") && strstr(done, "\"wait_input_seconds\":") &&
               strstr(done, "\"wait_turn_seconds\":"),
           "done event: %s", done ? done : r.out);
    result_free(&r);
}

/* SHOT_DIR --out DIR: the clip's Input/ and AlphaHint/, the passes under DIR
 * (SHOT_DIR/Output is not created); --plate and a hint folder stay refused. */
static void test_shot_out(void) {
    char model[512], shot[512], out[600], p[1024];
    NEED_SETUP(model);
    REQUIRE(ck_make_shot(shot, sizeof shot, workdir, "shot-out", 2));
    snprintf(out, sizeof out, "%s/elsewhere/passes", workdir);
    result r = run_ckey("key", shot, "--out", out, "--model", model, "--size", "64", NULL);
    CHECKF(r.code == 0, "exit %d: %s", r.code, r.err);
    CHECKF(strstr(r.out, out) != NULL, "the summary does not name %s: %s", out, r.out);
    result_free(&r);
    for (int f = 1; f <= 2; f++)
        for (int pass = 0; pass < 4; pass++) {
            ck_pass_path(p, sizeof p, out, pass, f);
            CHECKF(ck_exists(p), "%s was not written", p);
        }
    snprintf(p, sizeof p, "%s/Output", shot);
    CHECKF(!ck_exists(p), "%s was created", p);
    /* resume works there too */
    r = run_ckey("key", shot, "--out", out, "--model", model, "--size", "64", "--json", NULL);
    CHECKF(r.code == 0 && strstr(r.out, "\"to_skip\":2"), "exit %d: %s", r.code, r.out);
    result_free(&r);
    snprintf(p, sizeof p, "%s/AlphaHint", shot);
    r = run_ckey("key", shot, "--out", out, "--hint", p, "--model", model, NULL);
    CHECKF(r.code == 2 && strstr(r.err, "SHOT_DIR"), "exit %d: %s", r.code, r.err);
    result_free(&r);
    remove_tree(shot);
}

/* The integer after "key": in a JSON text; -1 when absent. */
static long long json_int(const char *json, const char *key) {
    char pat[128];
    snprintf(pat, sizeof pat, "\"%s\":", key);
    const char *p = json ? strstr(json, pat) : NULL;
    if (!p) return -1;
    p += strlen(pat);
    while (*p == ' ') p++;
    return strtoll(p, NULL, 10);
}

/*
 * ckey_plan_run_memory as a library call: the shot's parts follow the
 * runner's rings (ckey_shot_run), the figures add up, a host limit or a
 * budget refuses the run with the figures in the message and `out` still
 * filled, bad arguments are refused; ckey_source_plate_size finds the
 * largest plate of a sequence from the headers.
 */
static void test_run_memory_api(void) {
    char model[512], shot[512], p[1024];
    NEED_SETUP(model);
    ckey_model *m = NULL;
    ckey_error err;
    REQUIRE(ckey_model_load(model, &m, &err) == CKEY_OK);
    ckey_session_options so;
    ckey_session_options_default(&so);
    so.size = 64;
    so.threads = 2;
    ckey_run_options ro;
    ckey_run_options_default(&ro);
    ro.kind = CKEY_RUN_SHOT;
    ro.width = 640, ro.height = 360;
    ro.shot.read_ahead = 2, ro.shot.writers = 2, ro.shot.readers = 1;
    ro.host_limit = -1;
    ckey_run_memory r;
    REQUIRE(ckey_plan_run_memory(m, &so, &ro, &r, &err) == CKEY_OK);
    const int64_t P = 640 * 360, F = 4;
    CHECK(r.frames_in_flight == 3 + 3 && r.writers == 2 && r.host_limit == 0);
    CHECK(r.io_bytes == 6 * 4 * 64 * 64 * F);
    /* the plates and hints are the readers' (one), the slots hold the network's input */
    CHECK(r.decoded_bytes == 1 * (4 * F + CK_PNG_READ_BYTES_PER_PIXEL) * P && r.output_bytes == 3 * 4 * P * F + 2 * 7 * P * F);
    CHECK(r.plate_bytes == r.decoded_bytes + r.hint_bytes + r.resize_bytes + r.output_bytes + r.post_bytes +
                               r.encode_bytes);
    CHECK(r.total_bytes == r.session.peak_bytes + r.model_bytes + r.io_bytes + r.plate_bytes &&
          r.host_bytes == r.total_bytes);
    ckey_memory_plan net;
    REQUIRE(ckey_plan_memory(m, &so, &net, &err) == CKEY_OK);
    CHECK(memcmp(&net, &r.session, sizeof net) == 0);
    /* two sessions keying together: two networks and model copies, slots rounded up to 2 per session */
    ro.sessions = 2;
    ckey_run_memory r2;
    REQUIRE(ckey_plan_run_memory(m, &so, &ro, &r2, &err) == CKEY_OK);
    CHECK(r2.session.peak_bytes == 2 * net.peak_bytes && r2.model_bytes == 2 * r.model_bytes);
    CHECK(r2.frames_in_flight == 4 + 4 && r2.io_bytes == 8 * 4 * 64 * 64 * F);
    ro.sessions = CKEY_SHOT_MAX_SESSIONS + 1;
    CHECK(ckey_plan_run_memory(m, &so, &ro, &r2, &err) == CKEY_ERR_INVALID_ARG);
    ro.sessions = 0;
    /* a CUDA session (planning needs no GPU; skipped in a build without CUDA): the device frame
     * path when asked for, its buffers on the device; the slots hold the decoded plate + hint and
     * the four passes, no [4, S, S] ring; the host path as the CPU's */
    ckey_session_options cu = so;
    cu.device = CKEY_DEVICE_CUDA;
    ckey_run_memory rd, rh;
    ro.shot.frame_path = CKEY_FRAME_PATH_DEVICE;
    ro.shot.device_frames = 4;
    if (ckey_plan_run_memory(m, &cu, &ro, &rd, &err) == CKEY_OK) {
        ro.shot.frame_path = CKEY_FRAME_PATH_AUTO;
        REQUIRE(ckey_plan_run_memory(m, &cu, &ro, &rh, &err) == CKEY_OK);
        CHECKF(rd.device_frame_bytes > 11 * P * F && rh.device_frame_bytes == 0, "%lld",
               (long long)rd.device_frame_bytes);
        /* device_frames 4: four model threads a session (ck_shot_pipelines), each its own
         * ck_devframe, the slots rounded up to multiples of 4, 8 in and 8 out; two with
         * device_frames 2 (the default), 4 in and 4 out; unthreaded, one ck_devframe. An out
         * slot holds the passes as the pass files store them: HALF alpha, fg and processed
         * (2 + 6 + 8 bytes a pixel) and the 8-bit comp (3), each part 256-byte aligned */
        const int64_t slot =
            ((2 * P + 255) / 256 + (6 * P + 255) / 256 + (8 * P + 255) / 256 + (3 * P + 255) / 256) * 256;
        CHECK(slot >= 19 * P && slot < 11 * P * F / 2);
        CHECKF(rd.decoded_bytes == 8 * 4 * P * F && rd.output_bytes == 8 * slot && rd.post_bytes == 0,
               "decoded %lld, output %lld", (long long)rd.decoded_bytes, (long long)rd.output_bytes);
        ckey_run_memory r1, r2d;
        ro.shot.frame_path = CKEY_FRAME_PATH_DEVICE;
        ro.shot.device_frames = 2;
        REQUIRE(ckey_plan_run_memory(m, &cu, &ro, &r2d, &err) == CKEY_OK);
        CHECKF(r2d.decoded_bytes == 4 * 4 * P * F && r2d.output_bytes == 4 * slot, "decoded %lld, output %lld",
               (long long)r2d.decoded_bytes, (long long)r2d.output_bytes);
        ckey_run_memory rdef;
        ro.shot.device_frames = 0;
        REQUIRE(ckey_plan_run_memory(m, &cu, &ro, &rdef, &err) == CKEY_OK);
        CHECK(rdef.decoded_bytes == r2d.decoded_bytes && rdef.output_bytes == r2d.output_bytes &&
              rdef.device_frame_bytes == r2d.device_frame_bytes);
        ro.shot.device_frames = 9; /* 0 .. 8 */
        CHECK(ckey_plan_run_memory(m, &cu, &ro, &r1, &err) == CKEY_ERR_INVALID_ARG);
        ro.shot.device_frames = 0;
        ro.shot.read_ahead = 0;
        REQUIRE(ckey_plan_run_memory(m, &cu, &ro, &r1, &err) == CKEY_OK);
        CHECKF(rd.device_frame_bytes == 4 * r1.device_frame_bytes && r2d.device_frame_bytes == 2 * r1.device_frame_bytes,
               "four devframes %lld, two %lld, one %lld", (long long)rd.device_frame_bytes,
               (long long)r2d.device_frame_bytes, (long long)r1.device_frame_bytes);
        ro.shot.read_ahead = 2;
        ro.shot.frame_path = CKEY_FRAME_PATH_AUTO;
        CHECK(rd.io_bytes == rh.io_bytes - 6 * 4 * 64 * 64 * F);
        CHECK(rd.total_bytes == rd.session.peak_bytes + rd.model_bytes + rd.io_bytes + rd.plate_bytes +
                                    rd.device_frame_bytes &&
              rd.host_bytes == rd.total_bytes - rd.session.peak_bytes - rd.device_frame_bytes);
        CHECK(rh.decoded_bytes == r.decoded_bytes && rh.output_bytes == r.output_bytes);
    } else {
        printf("  no CUDA plan (%s)\n", err.message);
    }
    /* read_ahead 0: one stage at a time, one frame of each kind */
    ro.shot.read_ahead = 0;
    REQUIRE(ckey_plan_run_memory(m, &so, &ro, &r, &err) == CKEY_OK);
    CHECK(r.frames_in_flight == 2 && r.writers == 1 && r.io_bytes == 2 * 4 * 64 * 64 * F);

    /* refused by a host limit: the figures in the message, the plan filled */
    ro.host_limit = 1 << 20;
    CHECK(ckey_plan_run_memory(m, &so, &ro, &r, &err) == CKEY_ERR_BUDGET);
    CHECKF(strstr(err.message, "a 640 x 360 plate at S = 64 needs") && strstr(err.message, "of host memory") &&
               strstr(err.message, "more than the 1.0 MiB allowed"),
           "%s", err.message);
    CHECK(r.total_bytes > (1 << 20) && r.host_limit == 1 << 20);
    /* the machine's: 90 % of what is available */
    ro.host_limit = 0;
    const int64_t avail = ckey_host_memory_available();
    if (ckey_plan_run_memory(m, &so, &ro, &r, &err) == CKEY_OK && avail > 0)
        CHECKF(r.host_limit > avail / 2 && r.host_limit < avail, "limit %lld of %lld available",
               (long long)r.host_limit, (long long)avail);
    /* refused by the budget, whatever the host has */
    so.memory_budget = r.session.peak_bytes + r.model_bytes + 1;
    ro.host_limit = -1;
    CHECK(ckey_plan_run_memory(m, &so, &ro, &r, &err) == CKEY_ERR_BUDGET);
    CHECKF(strstr(err.message, "over the budget of") && strstr(err.message, "plate buffers"), "%s", err.message);
    so.memory_budget = 0;
    /* bad arguments */
    ro.width = 0;
    CHECK(ckey_plan_run_memory(m, &so, &ro, &r, &err) == CKEY_ERR_INVALID_ARG);
    ro.width = 640;
    ro.kind = (ckey_run_kind)7;
    CHECK(ckey_plan_run_memory(m, &so, &ro, &r, &err) == CKEY_ERR_INVALID_ARG);
    CHECK(ckey_plan_run_memory(NULL, &so, &ro, &r, &err) == CKEY_ERR_INVALID_ARG);
    ckey_model_free(m);

    /* the largest plate of a sequence, by its header: frame 2 made larger */
    REQUIRE(ck_make_shot(shot, sizeof shot, workdir, "shot-sizes", 3));
    float px[3 * 50 * 40];
    for (size_t i = 0; i < LEN(px); i++) px[i] = 0.5f;
    snprintf(p, sizeof p, "%s/Input/plate_0002.png", shot);
    REQUIRE(ckey_image_write_png(p, px, 3, 50, 40, 8, &err) == CKEY_OK);
    snprintf(p, sizeof p, "%s/Input", shot);
    ckey_source src;
    REQUIRE(ckey_source_open_sequence(p, NULL, NULL, NULL, &src, &err) == CKEY_OK);
    int32_t w = 0, h = 0;
    int64_t idx = -9;
    REQUIRE(ckey_source_plate_size(&src, NULL, &w, &h, &idx, &err) == CKEY_OK);
    CHECKF(w == 320 && h == 180 && idx == 0, "%d x %d at %lld", (int)w, (int)h, (long long)idx);
    const uint8_t plan[3] = {CKEY_SHOT_SKIP, CKEY_SHOT_KEY, CKEY_SHOT_SKIP};
    REQUIRE(ckey_source_plate_size(&src, plan, &w, &h, &idx, &err) == CKEY_OK);
    CHECKF(w == 50 && h == 40 && idx == 1, "%d x %d at %lld", (int)w, (int)h, (long long)idx);
    ckey_source_close(&src);
    remove_tree(shot);
}

/* The image sequence's packed reads (the device frame path's): the samples of
 * read()'s floats, 16-bit PNG plates, 8-bit PNG hints, a HALF EXR plate; none
 * for hints made from the plates. */
static int packed_equals(const ckey_packed_image *pk, const ckey_image *img, int hint) {
    if (pk->width != img->width || pk->height != img->height) return 0;
    const size_t n = (size_t)img->width * img->height, C = (size_t)pk->channels;
    for (int c = 0; c < img->channels; c++) {
        const size_t ch = hint ? (size_t)pk->hint_channel : (size_t)c;
        for (size_t i = 0; i < n; i++) {
            const unsigned s = pk->type == CKEY_SAMPLE_U8 ? ((const uint8_t *)pk->data)[i * C + ch]
                                                          : ((const uint16_t *)pk->data)[i * C + ch];
            const float v = pk->type == CKEY_SAMPLE_F16 ? ck_f16_to_f32((uint16_t)s)
                            : pk->type == CKEY_SAMPLE_U16 ? (float)s / 65535.0f : (float)s / 255.0f;
            if (v != img->data[(size_t)c * n + i]) return 0;
        }
    }
    return 1;
}

static void test_sequence_read_packed(void) {
    char shot[512], p[1024], q[1024];
    REQUIRE(ck_make_synth_shot(shot, sizeof shot, workdir, "packed", 1, 2, 64, 36));
    /* frame 2's plate as a HALF EXR */
    ckey_image im;
    ckey_error err;
    snprintf(p, sizeof p, "%s/Input/plate_0002.png", shot);
    REQUIRE(ckey_image_read(p, CKEY_IMAGE_RGB, &im, &err) == CKEY_OK);
    REQUIRE(remove(p) == 0);
    snprintf(p, sizeof p, "%s/Input/plate_0002.exr", shot);
    REQUIRE(ckey_image_write_exr(p, im.data, 3, im.width, im.height, CKEY_EXR_ZIP, &err) == CKEY_OK);
    ckey_image_free(&im);
    snprintf(p, sizeof p, "%s/Input", shot);
    snprintf(q, sizeof q, "%s/AlphaHint", shot);
    for (int auto_hint = 0; auto_hint < 2; auto_hint++) {
        ckey_source src;
        REQUIRE(ckey_source_open_sequence(p, auto_hint ? NULL : q, NULL, NULL, &src, &err) == CKEY_OK);
        REQUIRE(src.read_packed && src.count == 2);
        ckey_packed_image pp, ph;
        memset(&pp, 0, sizeof pp);
        memset(&ph, 0, sizeof ph);
        for (int64_t k = 0; k < src.count; k++) {
            ckey_image plate = {0}, hint = {0};
            REQUIRE(src.read(src.self, k, &plate, &hint, &err) == CKEY_OK);
            const ckey_status st = src.read_packed(src.self, k, &pp, &ph, &err);
            if (auto_hint) {
                CHECKF(st == CKEY_ERR_UNSUPPORTED, "frame %lld: %d", (long long)k, (int)st);
            } else {
                CHECKF(st == CKEY_OK, "%s", err.message);
                CHECK(pp.type == (k == 0 ? CKEY_SAMPLE_U16 : CKEY_SAMPLE_F16) && ph.type == CKEY_SAMPLE_U8);
                CHECKF(st == CKEY_OK && packed_equals(&pp, &plate, 0) && packed_equals(&ph, &hint, 1),
                       "frame %lld: packed samples differ from read()'s", (long long)k);
                printf("  frame %lld: plate %s, hint 8-bit: packed = read()\n", (long long)k,
                       k == 0 ? "16-bit PNG" : "HALF EXR");
            }
            ckey_image_free(&plate);
            ckey_image_free(&hint);
        }
        ckey_packed_image_free(&pp);
        ckey_packed_image_free(&ph);
        ckey_source_close(&src);
    }
    remove_tree(shot);
}

/*
 * ckey key plans its run before keying: a "plan" event whose parts add up
 * (the text: a "planned peak" line), and a --budget the clip's buffers do
 * not fit refuses it naming the largest plate, with nothing written.
 */
static void test_run_memory_key(void) {
    char model[512], shot[512], p[1024];
    NEED_SETUP(model);
    REQUIRE(ck_make_shot(shot, sizeof shot, workdir, "shot-plan", 2));
    result r = run_ckey("key", shot, "--model", model, "--size", "64", "--threads", "2", "--device", "cpu",
                        "--read-ahead", "1", "--writers", "2", "--json", NULL);
    CHECKF(r.code == 0, "exit %d: %s", r.code, r.err);
    const char *plan = strstr(r.out, "{\"event\":\"plan\"");
    CHECKF(plan != NULL && plan < strstr(r.out, "\"status\":\"keyed\""), "no plan event before keying: %s",
           r.out);
    const long long total = json_int(plan, "total_bytes"), plate = json_int(plan, "plate_bytes");
    CHECK(json_int(plan, "width") == 320 && json_int(plan, "height") == 180);
    CHECK(json_int(plan, "frames_in_flight") == 2 + 3 && json_int(plan, "writers") == 2);
    CHECK(total == json_int(plan, "network_bytes") + json_int(plan, "model_bytes") + json_int(plan, "io_bytes") +
                       plate);
    CHECK(json_int(strstr(r.out, "\"event\":\"done\""), "peak_rss_bytes") > 0);
    result_free(&r);

    r = run_ckey("key", shot, "--model", model, "--size", "64", "--threads", "2", "--device", "cpu", "--force",
                 NULL);
    CHECKF(r.code == 0 && strstr(r.out, "planned peak ") && strstr(r.out, "for 320 x 180 plates"), "%s", r.out);
    result_free(&r);

    remove_tree(shot);
    REQUIRE(ck_make_shot(shot, sizeof shot, workdir, "shot-plan", 2));
    r = run_ckey("key", shot, "--model", model, "--size", "64", "--threads", "2", "--device", "cpu", "--budget",
                 "8M", NULL);
    snprintf(p, sizeof p, "%s/Input/plate_0001.png: a 320 x 180 plate at S = 64 needs", shot);
    CHECKF(r.code == 1 && strstr(r.err, p) && strstr(r.err, "over the budget of 8.0 MiB"), "exit %d: %s", r.code,
           r.err);
    result_free(&r);
    snprintf(p, sizeof p, "%s/Output", shot);
    CHECKF(!ck_exists(p), "%s was created", p);
    remove_tree(shot);
}

/* Frame 1 of a source that the device path would not take in its own samples. */
static int32_t not_frame_1(void *self, int64_t index) {
    (void)self;
    return index != 1;
}

/*
 * The frame path a run takes (ckey_shot_frame_path): AUTO is the device
 * path on a CUDA device when every frame to key is a PNG or EXR plate with a
 * hint file and the post options have a device form, else the host path,
 * with the reason; an explicit path is kept. A CPU run reports the host path
 * in its stats and in ckey key's plan and done events.
 */
static void test_frame_path_choice(void) {
    char shot[512], plates[600], hints[600], why[400];
    REQUIRE(ck_make_shot(shot, sizeof shot, workdir, "shot-path", 3));
    snprintf(plates, sizeof plates, "%s/Input", shot);
    snprintf(hints, sizeof hints, "%s/AlphaHint", shot);
    ckey_source src, autohint;
    ckey_error err;
    REQUIRE(ckey_source_open_sequence(plates, hints, NULL, NULL, &src, &err) == CKEY_OK);
    REQUIRE(ckey_source_open_sequence(plates, NULL, NULL, NULL, &autohint, &err) == CKEY_OK);
    ckey_shot_options o;
    ckey_shot_options_default(&o);
    CHECK(o.frame_path == CKEY_FRAME_PATH_AUTO);
    ckey_frame_path p = ckey_shot_frame_path(CKEY_DEVICE_CUDA, &src, NULL, &o, why, sizeof why);
    CHECKF(p == CKEY_FRAME_PATH_DEVICE && strstr(why, "PNG or EXR"), "%s: %s", ckey_frame_path_name(p), why);
    printf("  cuda, PNG plates and hints: %s (%s)\n", ckey_frame_path_name(p), why);
    p = ckey_shot_frame_path(CKEY_DEVICE_CPU, &src, NULL, &o, why, sizeof why);
    CHECKF(p == CKEY_FRAME_PATH_CPU && strstr(why, "CPU"), "%s: %s", ckey_frame_path_name(p), why);
    /* made hints are floats */
    p = ckey_shot_frame_path(CKEY_DEVICE_CUDA, &autohint, NULL, &o, why, sizeof why);
    CHECKF(p == CKEY_FRAME_PATH_CPU && strstr(why, "frame 1 ") && strstr(why, "hint auto"), "%s: %s",
           ckey_frame_path_name(p), why);
    printf("  cuda, auto hints: %s (%s)\n", ckey_frame_path_name(p), why);
    /* one frame read as floats decides, unless the plan skips it */
    ckey_source one = src;
    one.packed_frame = not_frame_1;
    p = ckey_shot_frame_path(CKEY_DEVICE_CUDA, &one, NULL, &o, why, sizeof why);
    CHECKF(p == CKEY_FRAME_PATH_CPU && strstr(why, "frame 2 ") && strstr(why, "plate_0002.png"), "%s", why);
    const uint8_t plan[3] = {CKEY_SHOT_KEY, CKEY_SHOT_SKIP, CKEY_SHOT_KEY};
    CHECK(ckey_shot_frame_path(CKEY_DEVICE_CUDA, &one, plan, &o, why, sizeof why) == CKEY_FRAME_PATH_DEVICE);
    one.packed_frame = NULL; /* a source that cannot tell (a video, tracked hints) */
    CHECK(ckey_shot_frame_path(CKEY_DEVICE_CUDA, &one, NULL, &o, why, sizeof why) == CKEY_FRAME_PATH_CPU);
    /* the torch despeckle has no device form */
    o.post.despeckle = 1;
    o.post.despeckle_mode = CKEY_DESPECKLE_TORCH;
    p = ckey_shot_frame_path(CKEY_DEVICE_CUDA, &src, NULL, &o, why, sizeof why);
    CHECKF(p == CKEY_FRAME_PATH_CPU && strstr(why, "torch"), "%s", why);
    /* asked for: kept, whatever the device */
    o.frame_path = CKEY_FRAME_PATH_DEVICE;
    CHECK(ckey_shot_frame_path(CKEY_DEVICE_CPU, &src, NULL, &o, why, sizeof why) == CKEY_FRAME_PATH_DEVICE);
    o.frame_path = CKEY_FRAME_PATH_CPU;
    ckey_shot_options_default(&o);
    o.frame_path = CKEY_FRAME_PATH_CPU;
    CHECK(ckey_shot_frame_path(CKEY_DEVICE_CUDA, &src, NULL, &o, NULL, 0) == CKEY_FRAME_PATH_CPU);
    CHECK(!strcmp(ckey_frame_path_name(CKEY_FRAME_PATH_CPU), "host") &&
          !strcmp(ckey_frame_path_name(CKEY_FRAME_PATH_DEVICE), "device"));
    ckey_source_close(&autohint);
    ckey_source_close(&src);

    /* ckey key says which path ran and why: a CPU run takes the host path */
    char model[512];
    NEED_SETUP(model);
    result r = run_ckey("key", shot, "--model", model, "--size", "64", "--threads", "2", "--device", "cpu", "--json",
                        NULL);
    const char *plan_ev = strstr(r.out, "{\"event\":\"plan\""), *done = strstr(r.out, "{\"event\":\"done\"");
    CHECKF(r.code == 0 && plan_ev && done, "exit %d: %s %s", r.code, r.out, r.err);
    CHECKF(plan_ev && strstr(plan_ev, "\"frame_path\":\"host\",\"frame_path_reason\":\"the device is the CPU\""), "%s",
           r.out);
    CHECKF(done && strstr(done, "\"frame_path\":\"host\""), "%s", r.out);
    result_free(&r);
    r = run_ckey("key", shot, "--model", model, "--size", "64", "--threads", "2", "--device", "cpu", "--force",
                 "--frame-path", "host", NULL);
    CHECKF(r.code == 0 && strstr(r.out, "frame path: host (--frame-path host)") && strstr(r.out, "host frame path"),
           "%s", r.out);
    result_free(&r);
    /* on cuda (planned before any session: no GPU needed to see the choice) the device path,
     * and under a --budget that holds the host path's plan but not the device path's, the host
     * path, saying why */
    r = run_ckey("key", shot, "--model", model, "--size", "64", "--device", "cuda", "--force", "--frame-path", "host",
                 "--json", NULL);
    const char *hp = strstr(r.out, "{\"event\":\"plan\"");
    if (!hp) {
        printf("  no CUDA plan in this build: %s\n", r.err);
        result_free(&r);
        remove_tree(shot);
        return;
    }
    char budget[32];
    snprintf(budget, sizeof budget, "%lld", json_int(hp, "total_bytes"));
    result_free(&r);
    r = run_ckey("key", shot, "--model", model, "--size", "64", "--device", "cuda", "--force", "--json", NULL);
    plan_ev = strstr(r.out, "{\"event\":\"plan\"");
    CHECKF(plan_ev && strstr(plan_ev, "\"frame_path\":\"device\",\"frame_path_reason\":\"on a GPU"), "%s", r.out);
    result_free(&r);
    r = run_ckey("key", shot, "--model", model, "--size", "64", "--device", "cuda", "--force", "--budget", budget,
                 "--json", NULL);
    plan_ev = strstr(r.out, "{\"event\":\"plan\"");
    CHECKF(plan_ev && strstr(plan_ev, "\"frame_path\":\"host\",\"frame_path_reason\":\"the device path does not "
                                      "fit: a 320 x 180 plate at S = 64 needs ") && strstr(plan_ev, "over --budget"),
           "--budget %s: %s", budget, r.out);
    const char *fpj = plan_ev ? strstr(plan_ev, "\"frame_path\"") : NULL;
    printf("  cuda, --budget %s (the host path's plan): %.*s\n", budget, fpj ? (int)strcspn(fpj, "}\n") : 0,
           fpj ? fpj : "");
    result_free(&r);
    remove_tree(shot);
}

/* The default thread counts (ck_shot_layout): readers CPUs / 4 (1 to 4) on
 * the host path, 3 CPUs / 8 (1 to 8) on the device path, whose readers only
 * decode; writers CPUs - 2 (1 to 8) on both; the slots follow them. */
static void test_layout_defaults(void) {
    cpu_set_t set;
    long cpus = sysconf(_SC_NPROCESSORS_ONLN);
    if (sched_getaffinity(0, sizeof set, &set) == 0 && CPU_COUNT(&set) > 0) cpus = CPU_COUNT(&set);
    const int c = (int)cpus;
#define CLAMP(v, lo, hi) ((v) < (lo) ? (lo) : (v) > (hi) ? (hi) : (v))
    const int want_host = CLAMP(c / 4, 1, 4), want_dev = CLAMP(3 * c / 8, 1, 8), want_wr = CLAMP(c - 2, 1, 8);
#undef CLAMP
    ckey_shot_options o;
    ckey_shot_options_default(&o);
    int nin, nout, nwr, nrd;
    ck_shot_layout(&o, 1, &nin, &nout, &nwr, &nrd);
    CHECKF(nrd == want_host && nwr == want_wr, "host path on %d CPUs: %d readers, %d writers", c, nrd, nwr);
    CHECK(nin == (o.read_ahead > nrd ? o.read_ahead : nrd) + 1 && nout == nwr + 1);
    o.frame_path = CKEY_FRAME_PATH_DEVICE; /* two model threads (device_frames 0: 2) */
    ck_shot_layout(&o, 1, &nin, &nout, &nwr, &nrd);
    const int T = 2, in = (o.read_ahead > nrd ? o.read_ahead : nrd) + T;
    CHECKF(nrd == want_dev && nwr == want_wr, "device path on %d CPUs: %d readers, %d writers", c, nrd, nwr);
    CHECK(nin == (in + T - 1) / T * T && nout == (nwr + T + T - 1) / T * T);
    printf("  %d CPUs: host path %d readers, device path %d readers (%d in slots, %d out), %d writers\n", c,
           want_host, nrd, nin, nout, nwr);
    o.readers = 3; /* asked for: kept */
    ck_shot_layout(&o, 1, &nin, &nout, &nwr, &nrd);
    CHECK(nrd == 3);
}

/* A fake page-locking allocator for ck_slot_block: counts the blocks it
 * pins and unpins and whether the session's lock was held for each. */
typedef struct {
    pthread_mutex_t *lock;
    int pinned, unpinned, pinned_locked, unpinned_locked;
} fake_pin;

static int lock_held(pthread_mutex_t *mu) {
    if (!mu) return 0;
    if (pthread_mutex_trylock(mu) != 0) return 1;
    pthread_mutex_unlock(mu);
    return 0;
}

static void *fake_pin_alloc(void *user, size_t bytes) {
    fake_pin *f = user;
    f->pinned++;
    f->pinned_locked += lock_held(f->lock);
    return malloc(bytes);
}

static void fake_pin_free(void *user, void *p) {
    fake_pin *f = user;
    f->unpinned++;
    f->unpinned_locked += lock_held(f->lock);
    free(p);
}

/* The device path's packed in-slot blocks (ck_slot_block, shot.c): reserved
 * up front for the first plate, a read of the same size or smaller reuses
 * the block; a larger one (another size or depth) takes pageable memory
 * and never pins or takes the lock; without a reservation the reads pin
 * under the lock, as the frames first come. */
static void test_slot_blocks(void) {
    pthread_mutex_t mu = PTHREAD_MUTEX_INITIALIZER;
    const int32_t W = 320, H = 180;
    const size_t n = (size_t)W * H;
    CHECK(ck_slot_packed_bytes(W, H, 0) == 12 * n && ck_slot_packed_bytes(W, H, 1) == 4 * n);
    CHECK(ck_slot_packed_bytes(0, H, 0) == 0 && ck_slot_packed_bytes(W, CKEY_IMAGE_MAX_SIDE + 1, 1) == 0);
    /* the plan counts 16 bytes a pixel for an in slot's plate + hint: the reservation is that */
    CHECK(CK_SLOT_PLATE_BYTES + CK_SLOT_HINT_BYTES == 4 * (int)sizeof(float));
    for (int reserved = 0; reserved < 2; reserved++) {
        fake_pin f = {&mu, 0, 0, 0, 0};
        ck_slot_block b = {fake_pin_alloc, fake_pin_free, &f, &mu, NULL, 0, 0, 0, 0};
        ckey_packed_image pk;
        memset(&pk, 0, sizeof pk);
        pk.alloc = ck_slot_block_alloc;
        pk.release = ck_slot_block_release;
        pk.alloc_user = &b;
        if (reserved) {
            REQUIRE(ck_slot_block_reserve(&b, ck_slot_packed_bytes(W, H, 0)));
            CHECK(f.pinned == 1 && f.pinned_locked == 0 && b.reserved && b.pinned_cap == 12 * n);
        }
        /* frames as an 8-bit PNG read asks (samples + its file), a 16-bit one, then a
         * 16-bit RGBA plate of twice the size (more than the reservation) and back */
        const size_t asks[] = {3 * n + H + n, 6 * n + H + 5 * n, 8 * (4 * n) + 2 * H, 3 * n};
        for (size_t k = 0; k < sizeof asks / sizeof asks[0]; k++) {
            pthread_mutex_lock(&mu); /* a reader never holds it: the block takes it when it must */
            pthread_mutex_unlock(&mu);
            REQUIRE(ck_packed_reserve(&pk, asks[k]));
            memset(pk.data, (int)k, asks[k]); /* the whole block is usable (ASan) */
            const int big = asks[k] > 12 * n;
            if (reserved)
                CHECKF(big || k == 3 ? pk.data != b.pinned : pk.data == b.pinned, "read %zu: %zu bytes", k, asks[k]);
            else
                CHECKF(k == 3 ? pk.capacity == asks[2] : pk.data == b.pinned, "read %zu: %zu bytes", k, asks[k]);
        }
        if (reserved) /* one block pinned in all, before the reads; the large read pageable */
            CHECKF(f.pinned == 1 && f.unpinned == 0 && b.grows == 1 && b.pins == 1, "pinned %d, unpinned %d, grows %lld",
                   f.pinned, f.unpinned, (long long)b.grows);
        else /* each growth pinned anew, under the lock, the old block unpinned under it */
            CHECKF(f.pinned == 3 && f.pinned_locked == 3 && f.unpinned == 2 && f.unpinned_locked == 2 && b.grows == 0,
                   "pinned %d (%d locked), unpinned %d (%d locked)", f.pinned, f.pinned_locked, f.unpinned,
                   f.unpinned_locked);
        b.lock = NULL; /* the end of a run: the model threads have ended */
        ckey_packed_image_free(&pk);
        ck_slot_block_free(&b);
        CHECKF(f.unpinned == f.pinned && !b.pinned, "pinned %d, unpinned %d", f.pinned, f.unpinned);
        printf("  %s: %d block(s) pinned, %lld pageable growth(s)\n", reserved ? "reserved up front" : "pinned by the reads",
               f.pinned, (long long)b.grows);
    }
    pthread_mutex_destroy(&mu);
}

int main(int argc, char **argv) {
    CK_TEST_NEEDS(CK_BUILT_PNG && CK_BUILT_EXR,
                  "test-key: skipped: shots need PNG and OpenEXR support in the build\n");
    ck_ckey_path(ckey_bin, sizeof ckey_bin, argv[0]);
    if (!ck_make_temp_dir(workdir, sizeof workdir, "key")) return 1;
    /* `key` without --model must not find a checkpoint of the user's */
    ck_isolate_model_lookup(workdir);
    static const ck_test_case cases[] = {
        {"post_api", test_post_api},
        {"sequence_and_resume", test_sequence_and_resume},
        {"frames_and_dry_run", test_frames_and_dry_run},
        {"errors", test_errors},
        {"auto_hint", test_auto_hint},
        {"synthetic_shot", test_synthetic_shot},
        {"hint_resize", test_hint_resize},
        {"exr_plate_space", test_exr_plate_space},
        {"parallel_writers", test_parallel_writers},
        {"thread_counts", test_thread_counts},
        {"stage_stats", test_stage_stats},
        {"shot_out", test_shot_out},
        {"run_memory_api", test_run_memory_api},
        {"run_memory_key", test_run_memory_key},
        {"sequence_read_packed", test_sequence_read_packed},
        {"slot_blocks", test_slot_blocks},
        {"frame_path_choice", test_frame_path_choice},
        {"layout_defaults", test_layout_defaults},
    };
    int rc = ck_test_main(cases, (int)LEN(cases), argc, argv);
    remove_tree(workdir);
    return rc;
}
