/* `ckey track` and `ckey key --mask` with the tiny Cutie fixture
 * (tests/fixtures/cutie/: cutie_tiny.pth and the first frames of
 * clip.safetensors, written as 8-bit PNGs, with its two-object mask). The
 * tracker itself is checked against PyTorch in test-cutie; here the CLI's
 * hints must equal what ckey_tracker_step gives on the same frames (rounded
 * to 16 bits as the PNG holds them), masks given later must act as the
 * official InferenceCore.step takes them (the frame's result is the mask),
 * bad masks must fail naming the file, and keying with --mask in
 * one pass must write the same bytes as `ckey track` then `ckey key`. */
#include <limits.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "ckey_track.h"
#include "ckpt/checkpoint.h"
#include "core/core.h"
#include "support/testutil.h"

#define DIR "tests/fixtures/cutie/"
#define T 6 /* frames of the clip used */

static char ckey_bin[PATH_MAX + 16];
static char workdir[256];
static char model_path[PATH_MAX], keyer_path[PATH_MAX];
static const ck_cli cli = {ckey_bin, workdir, NULL, 2};
#define run_ckey(...) ck_cli_run(&cli, NULL, __VA_ARGS__)

/* The clip: frames [T, 3, H, W] in [0, 1] (interleaved copies for the
 * tracker) and the first mask's labels. */
static int W, H, have_clip;
static float *planes;   /* [T, 3, H, W] */
static uint8_t *mask0;  /* [H, W], labels 0, 1, 2 */
static char plate_dir[512], mask_path[512];

static void path_in(char *buf, size_t cap, const char *name) { snprintf(buf, cap, "%s/%s", workdir, name); }

static int write_labels(const char *path, const uint8_t *lab) {
    float *v = malloc((size_t)W * H * sizeof(float));
    for (int p = 0; p < W * H; p++) v[p] = lab[p] / 255.0f;
    ckey_error err;
    const ckey_status st = ckey_image_write_png(path, v, 1, W, H, 8, &err);
    free(v);
    return st == CKEY_OK;
}

/* Load the fixture clip and write its first T frames and its mask as PNGs. */
static int setup_clip(void) {
    ck_checkpoint *ck = NULL;
    if (ck_checkpoint_open(DIR "clip.safetensors", &ck, NULL) != CKEY_OK) return 0;
    const ck_tensor_info *tf = ck_checkpoint_find(ck, "frames"), *tm = ck_checkpoint_find(ck, "mask0");
    if (!tf || !tm || tf->shape[0] < T) {
        ck_checkpoint_close(ck);
        return 0;
    }
    H = (int)tf->shape[2], W = (int)tf->shape[3];
    const size_t hw = (size_t)W * H;
    planes = malloc((size_t)T * 3 * hw * sizeof(float));
    mask0 = malloc(hw);
    const uint8_t *fr = tf->data;
    for (size_t i = 0; i < (size_t)T * 3 * hw; i++) planes[i] = fr[i] / 255.0f;
    memcpy(mask0, tm->data, hw);
    ck_checkpoint_close(ck);
    path_in(plate_dir, sizeof plate_dir, "plate");
    path_in(mask_path, sizeof mask_path, "mask0.png");
    char cmd[1024];
    snprintf(cmd, sizeof cmd, "mkdir -p %s", plate_dir);
    if (system(cmd) != 0) return 0;
    for (int t = 0; t < T; t++) {
        char p[600];
        snprintf(p, sizeof p, "%s/shot_%04d.png", plate_dir, t + 1);
        ckey_error err;
        if (ckey_image_write_png(p, planes + (size_t)t * 3 * hw, 3, W, H, 8, &err) != CKEY_OK) return 0;
    }
    return write_labels(mask_path, mask0);
}

#define NEED_CLIP()                                                                              \
    do {                                                                                         \
        if (access(ckey_bin, X_OK) != 0) SKIP("%s is not built", ckey_bin);                      \
        if (!have_clip) SKIP("the Cutie fixtures (%s) are absent or unreadable", DIR);           \
    } while (0)

/* A later mask for the direct run. */
typedef struct {
    int frame; /* index into the clip */
    const uint8_t *labels;
    int count;
    uint8_t objects[2];
} later;

static float q16(float v) {
    return !(v > 0.0f) ? 0.0f : v >= 1.0f ? 1.0f : (float)(unsigned)((double)v * 65535u + 0.5) / 65535.0f;
}

/* The hints ckey_tracker_step gives (object 0: the union), rounded to 16
 * bits, [T, H, W]; also the raw probabilities [T, 3, H, W] when prob_out. */
static float *direct_hints(int object, const later *lm, int nlm, float **prob_out) {
    ckey_error err;
    ckey_track_model *m = NULL;
    if (ckey_track_model_open(model_path, NULL, &m, &err) != CKEY_OK) {
        fprintf(stderr, "  %s\n", err.message);
        return NULL;
    }
    ckey_track_options o;
    ckey_track_options_default(&o);
    o.threads = 2;
    o.max_objects = 3; /* the first mask's 2, and one a later mask may bring */
    ckey_tracker *t = NULL;
    const size_t hw = (size_t)W * H;
    float *rgb = malloc(hw * 3 * sizeof(float)), *prob = malloc(4 * hw * sizeof(float));
    float *hints = malloc((size_t)T * hw * sizeof(float)), *all = prob_out ? malloc((size_t)T * 3 * hw * sizeof(float)) : NULL;
    ckey_status st = ckey_tracker_create(m, W, H, &o, &t, &err);
    static const uint8_t both[2] = {1, 2};
    for (int f = 0; f < T && st == CKEY_OK; f++) {
        for (size_t p = 0; p < hw; p++)
            for (int c = 0; c < 3; c++) rgb[p * 3 + c] = planes[((size_t)f * 3 + c) * hw + p];
        const uint8_t *lab = f == 0 ? mask0 : NULL, *objs = f == 0 ? both : NULL;
        int n = f == 0 ? 2 : 0;
        for (int k = 0; k < nlm; k++)
            if (lm[k].frame == f) lab = lm[k].labels, objs = lm[k].objects, n = lm[k].count;
        memset(prob, 0, 4 * hw * sizeof(float)); /* an object not yet brought: 0 */
        st = ckey_tracker_step(t, rgb, lab, n, objs, prob, &err);
        for (size_t p = 0; p < hw; p++) hints[(size_t)f * hw + p] = q16(object ? prob[(size_t)object * hw + p] : 1.0f - prob[p]);
        if (all) memcpy(all + (size_t)f * 3 * hw, prob, 3 * hw * sizeof(float));
    }
    if (st != CKEY_OK) fprintf(stderr, "  %s\n", err.message);
    ckey_tracker_free(t);
    ckey_track_model_free(m);
    free(rgb), free(prob);
    if (st != CKEY_OK) {
        free(hints), free(all);
        return NULL;
    }
    if (prob_out) *prob_out = all;
    return hints;
}

/* Compare the hint image at `path` with want [H, W]: returns how many
 * pixels differ and raises *worst to the largest abs difference; SIZE_MAX
 * (a failure recorded) when it cannot be read or is not W x H. bits: the
 * bit depth it must have (0: any). */
static size_t diff_hint(const char *path, const float *want, int bits, double *worst) {
    const size_t hw = (size_t)W * H;
    ckey_image img;
    memset(&img, 0, sizeof img);
    ckey_error err;
    if (ckey_image_read(path, CKEY_IMAGE_HINT, &img, &err) != CKEY_OK) {
        CHECKF(0, "%s", err.message);
        return SIZE_MAX;
    }
    CHECKF(img.width == W && img.height == H && (!bits || img.bit_depth == bits), "%s: %d x %d, %d bits", path,
           img.width, img.height, img.bit_depth);
    size_t bad = SIZE_MAX;
    if (img.width == W && img.height == H) {
        bad = 0;
        for (size_t i = 0; i < hw; i++) {
            const double d = fabs((double)img.data[i] - want[i]);
            bad += d != 0;
            *worst = d > *worst ? d : *worst;
        }
    }
    ckey_image_free(&img);
    return bad;
}

/* Every hint file of `dir` (shot_0001.png ...) equals want [T, H, W]
 * exactly; returns the number of frames that match. */
static int compare_hints(const char *dir, const float *want, const char *what) {
    const size_t hw = (size_t)W * H;
    int ok = 0;
    double worst = 0;
    for (int t = 0; t < T; t++) {
        char p[600];
        snprintf(p, sizeof p, "%s/shot_%04d.png", dir, t + 1);
        const size_t bad = diff_hint(p, want + (size_t)t * hw, 16, &worst);
        if (bad == SIZE_MAX) continue;
        CHECKF(bad == 0, "%s: %zu of %zu pixels differ from ckey_tracker_step's", p, bad, hw);
        ok += bad == 0;
    }
    printf("  %s: %d of %d hints equal ckey_tracker_step's (max abs diff %.3g)\n", what, ok, T, worst);
    return ok;
}

/* ------------------------------------------------------------- the cases */

static void test_hints_union(void) {
    NEED_CLIP();
    char out[512];
    path_in(out, sizeof out, "hints-union");
    ck_run_result r = run_ckey("track", "--plate", plate_dir, "--mask", mask_path, "--out", out, "--track-model",
                               model_path, "--threads", "2", NULL);
    CHECKF(r.code == 0, "exit %d: %s", r.code, r.err);
    CHECKF(strstr(r.out, "tracked 6 frames") != NULL, "stdout: %s", r.out);
    ck_run_free(&r);
    float *prob = NULL;
    float *want = direct_hints(0, NULL, 0, &prob);
    REQUIRE(want && prob);
    CHECK(compare_hints(out, want, "union of objects 1, 2") == T);
    /* the union is both objects' probability, and not a trivial image */
    const size_t hw = (size_t)W * H;
    size_t soft = 0;
    double sum_err = 0;
    for (int t = 1; t < T; t++)
        for (size_t i = 0; i < hw; i++) {
            const float *p = prob + (size_t)t * 3 * hw;
            const double d = fabs((1.0 - p[i]) - ((double)p[hw + i] + p[2 * hw + i]));
            sum_err = d > sum_err ? d : sum_err;
            soft += want[(size_t)t * hw + i] > 0.01f && want[(size_t)t * hw + i] < 0.99f;
        }
    printf("  union vs P(1) + P(2): max abs diff %.3g; %zu soft pixels over frames 1..%d\n", sum_err, soft, T - 1);
    CHECK(sum_err < 1e-5);
    CHECK(soft > 100);
    free(want), free(prob);
}

/* --track-device: cpu and auto (the CPU here, or the GPU) track; cuda
 * tracks, or fails saying why (no CUDA device); anything else is a usage
 * error. On the CPU the hints equal ckey_tracker_step's. */
static void test_track_device(void) {
    NEED_CLIP();
    char out[512];
    float *prob = NULL, *want = direct_hints(0, NULL, 0, &prob);
    REQUIRE(want && prob);
    path_in(out, sizeof out, "hints-cpu");
    ck_run_result r = run_ckey("track", "--plate", plate_dir, "--mask", mask_path, "--out", out, "--track-model",
                               model_path, "--threads", "2", "--track-device", "cpu", NULL);
    CHECKF(r.code == 0, "exit %d: %s", r.code, r.err);
    ck_run_free(&r);
    CHECK(compare_hints(out, want, "--track-device cpu") == T);
    const char *devs[] = {"auto", "cuda"};
    for (int i = 0; i < 2; i++) {
        path_in(out, sizeof out, i ? "hints-cuda" : "hints-auto");
        r = run_ckey("track", "--plate", plate_dir, "--mask", mask_path, "--out", out, "--track-model", model_path,
                     "--threads", "2", "--track-device", devs[i], NULL);
        printf("  --track-device %s: exit %d%s%s", devs[i], r.code, r.code ? ", " : "\n", r.code ? r.err : "");
        if (i == 0 || r.code == 0)
            CHECKF(r.code == 0 && strstr(r.out, "tracked 6 frames"), "--track-device %s: exit %d: %s", devs[i], r.code,
                   r.err);
        else
            CHECKF(r.code == 1 && (strstr(r.err, "no CUDA device") || strstr(r.err, "memory_read")),
                   "--track-device cuda: exit %d: %s", r.code, r.err);
        ck_run_free(&r);
    }
    r = run_ckey("track", "--plate", plate_dir, "--mask", mask_path, "--out", out, "--track-model", model_path,
                 "--track-device", "gpu", NULL);
    CHECKF(r.code == 2 && strstr(r.err, "--track-device 'gpu'"), "exit %d: %s", r.code, r.err);
    ck_run_free(&r);
    /* --track-precision tf32 on the CPU runs fp32: the same hints */
    path_in(out, sizeof out, "hints-cpu-tf32");
    r = run_ckey("track", "--plate", plate_dir, "--mask", mask_path, "--out", out, "--track-model", model_path,
                 "--threads", "2", "--track-device", "cpu", "--track-precision", "tf32", NULL);
    CHECKF(r.code == 0, "--track-precision tf32: exit %d: %s", r.code, r.err);
    ck_run_free(&r);
    CHECK(compare_hints(out, want, "--track-precision tf32 on cpu") == T);
    r = run_ckey("track", "--plate", plate_dir, "--mask", mask_path, "--out", out, "--track-model", model_path,
                 "--track-precision", "bf16", NULL);
    CHECKF(r.code == 2 && strstr(r.err, "--track-precision 'bf16'"), "exit %d: %s", r.code, r.err);
    ck_run_free(&r);
    free(want), free(prob);
}

/* SHOT_DIR: Input/ -> AlphaHint/; --hint-format exr: HALF hints. */
static void test_shot_dir_and_exr(void) {
    NEED_CLIP();
    char shot[512], cmd[2200];
    path_in(shot, sizeof shot, "shot");
    snprintf(cmd, sizeof cmd, "mkdir -p %s && ln -sfn %s %s/Input", shot, plate_dir, shot);
    REQUIRE(system(cmd) == 0);
    ck_run_result r = run_ckey("track", shot, "--mask", mask_path, "--track-model", model_path, "--threads", "2",
                               "--hint-format", "exr", NULL);
    CHECKF(r.code == 0, "exit %d: %s", r.code, r.err);
    ck_run_free(&r);
    float *want = direct_hints(0, NULL, 0, NULL);
    REQUIRE(want);
    const size_t hw = (size_t)W * H;
    double worst = 0;
    int files = 0;
    for (int t = 0; t < T; t++) {
        char p[700];
        snprintf(p, sizeof p, "%s/AlphaHint/shot_%04d.exr", shot, t + 1);
        files += diff_hint(p, want + (size_t)t * hw, 0, &worst) != SIZE_MAX;
    }
    /* HALF rounds values in [0.5, 1) to 2^-11 (error <= 2.44e-4); the 16-bit rounding of want
     * adds <= 7.6e-6 */
    printf("  SHOT_DIR/AlphaHint/*.exr: %d files, max abs diff to the rounded hints %.3g\n", files, worst);
    CHECK(files == T && worst <= 2.45e-4 + 7.7e-6);
    free(want);
}

static void test_object(void) {
    NEED_CLIP();
    char out[512];
    path_in(out, sizeof out, "hints-object2");
    ck_run_result r = run_ckey("track", "--plate", plate_dir, "--mask", mask_path, "--out", out, "--track-model",
                               model_path, "--threads", "2", "--object", "2", "--json", NULL);
    CHECKF(r.code == 0, "exit %d: %s", r.code, r.err);
    CHECK(ck_count_str(r.out, "\"event\":\"frame\"") == T);
    CHECK(ck_count_str(r.out, "\"event\":\"started\"") == 1 && ck_count_str(r.out, "\"event\":\"done\"") == 1);
    CHECK(strstr(r.out, "\"status\":\"tracked\"") != NULL);
    ck_run_free(&r);
    float *want = direct_hints(2, NULL, 0, NULL);
    REQUIRE(want);
    CHECK(compare_hints(out, want, "object 2") == T);
    free(want);
    /* a label the mask does not hold */
    r = run_ckey("track", "--plate", plate_dir, "--mask", mask_path, "--out", out, "--track-model", model_path,
                 "--object", "7", NULL);
    CHECKF(r.code == 1 && strstr(r.err, "object 7 is not in the mask") && strstr(r.err, "mask0.png"), "exit %d: %s",
           r.code, r.err);
    ck_run_free(&r);
}

static void test_mask_at(void) {
    NEED_CLIP();
    const size_t hw = (size_t)W * H;
    /* frame 2 (shot_0003): both objects, the first mask moved 3 px right;
     * frame 4 (shot_0005): object 1 alone, the first mask's object 1 */
    uint8_t *full = calloc(hw, 1), *one = calloc(hw, 1);
    for (int y = 0; y < H; y++)
        for (int x = 0; x < W; x++) {
            full[(size_t)y * W + x] = x >= 3 ? mask0[(size_t)y * W + x - 3] : 0;
            one[(size_t)y * W + x] = mask0[(size_t)y * W + x] == 1;
        }
    char m2[512], m4[512], out[512], arg2[600], arg4[600];
    path_in(m2, sizeof m2, "mask_full.png");
    path_in(m4, sizeof m4, "mask_one.png");
    path_in(out, sizeof out, "hints-mask-at");
    REQUIRE(write_labels(m2, full) && write_labels(m4, one));
    snprintf(arg2, sizeof arg2, "3=%s", m2);
    snprintf(arg4, sizeof arg4, "5=%s", m4);
    ck_run_result r = run_ckey("track", "--plate", plate_dir, "--mask", mask_path, "--out", out, "--track-model",
                               model_path, "--threads", "2", "--mask-at", arg2, "--mask-at", arg4, NULL);
    CHECKF(r.code == 0, "exit %d: %s", r.code, r.err);
    ck_run_free(&r);
    const later lm[2] = {{2, full, 2, {1, 2}}, {4, one, 1, {1, 0}}};
    float *want = direct_hints(0, lm, 2, NULL), *plain = direct_hints(0, NULL, 0, NULL);
    REQUIRE(want && plain);
    CHECK(compare_hints(out, want, "--mask-at 3 (both objects) and 5 (object 1)") == T);
    /* the official rule for a mask without new objects: it is the frame's
     * result (the union = the mask's objects), object 2 absent at frame 4 */
    size_t off2 = 0, off4 = 0, changed = 0;
    for (size_t i = 0; i < hw; i++) {
        off2 += want[2 * hw + i] != (full[i] ? 1.0f : 0.0f);
        off4 += want[4 * hw + i] != (one[i] ? 1.0f : 0.0f);
        changed += want[2 * hw + i] != plain[2 * hw + i];
    }
    printf("  frames 2 and 4: %zu and %zu pixels off the given masks; %zu of frame 2 changed by its mask\n", off2,
           off4, changed);
    CHECK(off2 == 0 && off4 == 0 && changed > 0);
    /* the frames after a later mask are tracked from it */
    size_t after = 0;
    for (size_t i = 0; i < hw; i++) after += want[3 * hw + i] != plain[3 * hw + i];
    CHECK(after > 0);
    free(want), free(full), free(one);
    free(plain);

    /* a new object: label 3 on a block of the first mask's background at
     * frame 4 (shot_0004) joins from that frame (the official
     * InferenceCore.step with a mask of new objects): the union hint gains
     * its block there, --object 3 is 0 before and its block at frame 4 */
    uint8_t *three = calloc(hw, 1);
    int bx = -1, by = -1;
    for (int y = 0; y + 8 <= H && bx < 0; y++)
        for (int x = 0; x + 8 <= W && bx < 0; x++) {
            int clear = 1;
            for (int v = 0; v < 8; v++)
                for (int u = 0; u < 8; u++) clear &= mask0[(size_t)(y + v) * W + x + u] == 0;
            if (clear) bx = x, by = y;
        }
    REQUIRE(bx >= 0);
    for (int v = 0; v < 8; v++)
        for (int u = 0; u < 8; u++) three[(size_t)(by + v) * W + bx + u] = 3;
    char m3[512], arg[600], out3[512];
    path_in(m3, sizeof m3, "mask_new.png");
    path_in(out3, sizeof out3, "hints-new-object");
    REQUIRE(write_labels(m3, three));
    snprintf(arg, sizeof arg, "4=%s", m3);
    r = run_ckey("track", "--plate", plate_dir, "--mask", mask_path, "--out", out3, "--track-model", model_path,
                 "--threads", "2", "--mask-at", arg, NULL);
    CHECKF(r.code == 0, "exit %d: %s", r.code, r.err);
    ck_run_free(&r);
    const later ln[1] = {{3, three, 1, {3, 0}}};
    float *with3 = direct_hints(0, ln, 1, NULL), *only3 = direct_hints(3, ln, 1, NULL);
    plain = direct_hints(0, NULL, 0, NULL);
    REQUIRE(with3 && only3 && plain);
    CHECK(compare_hints(out3, with3, "--mask-at 4 bringing object 3") == T);
    size_t gained = 0, block = 0, before = 0;
    for (size_t i = 0; i < hw; i++) {
        if (three[i]) block++, gained += with3[3 * hw + i] == 1.0f && plain[3 * hw + i] < 1.0f;
        for (int f = 0; f < 3; f++) before += only3[(size_t)f * hw + i] != 0.0f || with3[(size_t)f * hw + i] != plain[(size_t)f * hw + i];
    }
    size_t obj3 = 0;
    for (size_t i = 0; i < hw; i++) obj3 += only3[3 * hw + i] == (three[i] ? 1.0f : 0.0f);
    printf("  object 3 at frame 4: the union hint is 1 on %zu of its %zu pixels where it was below 1; frames 1-3 "
           "differ from the plain run at %zu pixels; --object 3 at frame 4 is its mask at %zu of %zu pixels\n",
           gained, block, before, obj3, hw);
    CHECK(gained > 0 && gained == block && before == 0 && obj3 == hw);
    r = run_ckey("track", "--plate", plate_dir, "--mask", mask_path, "--out", out3, "--track-model", model_path,
                 "--threads", "2", "--mask-at", arg, "--object", "3", NULL);
    CHECKF(r.code == 0, "--object 3: exit %d: %s", r.code, r.err);
    ck_run_free(&r);
    CHECK(compare_hints(out3, only3, "--mask-at 4 bringing object 3, --object 3") == T);
    free(with3), free(only3), free(plain), free(three);
    snprintf(arg, sizeof arg, "99=%s", m2);
    r = run_ckey("track", "--plate", plate_dir, "--mask", mask_path, "--out", out, "--track-model", model_path,
                 "--mask-at", arg, NULL);
    CHECKF(r.code == 1 && strstr(r.err, "the plate has no frame 99"), "exit %d: %s", r.code, r.err);
    ck_run_free(&r);
    snprintf(arg, sizeof arg, "1=%s", m2);
    r = run_ckey("track", "--plate", plate_dir, "--mask", mask_path, "--out", out, "--track-model", model_path,
                 "--mask-at", arg, NULL);
    CHECKF(r.code == 1 && strstr(r.err, "first frame"), "exit %d: %s", r.code, r.err);
    ck_run_free(&r);
    r = run_ckey("track", "--plate", plate_dir, "--mask", mask_path, "--out", out, "--track-model", model_path,
                 "--mask-at", "7", NULL);
    CHECKF(r.code == 2 && strstr(r.err, "expected FRAME=FILE"), "exit %d: %s", r.code, r.err);
    ck_run_free(&r);
}

static void test_bad_masks(void) {
    NEED_CLIP();
    char out[512], small[512], text[512], empty[512];
    path_in(out, sizeof out, "hints-bad");
    path_in(small, sizeof small, "mask_small.png");
    path_in(text, sizeof text, "mask_text.png");
    path_in(empty, sizeof empty, "mask_empty.png");
    float *z = calloc((size_t)W * H, sizeof(float));
    ckey_error err;
    z[0] = 1.0f;
    REQUIRE(ckey_image_write_png(small, z, 1, W - 1, H, 8, &err) == CKEY_OK);
    z[0] = 0.0f;
    REQUIRE(ckey_image_write_png(empty, z, 1, W, H, 8, &err) == CKEY_OK);
    char soft[512];
    path_in(soft, sizeof soft, "mask_soft.png"); /* a gradient: a matte, not labels */
    for (int p = 0; p < W * H; p++) z[p] = (float)(p % W) / (float)(W - 1);
    REQUIRE(ckey_image_write_png(soft, z, 1, W, H, 8, &err) == CKEY_OK);
    free(z);
    FILE *f = fopen(text, "w");
    REQUIRE(f);
    fputs("not an image\n", f);
    fclose(f);
    static const struct {
        const char *file_var;
        const char *needle;
    } cases[4] = {{"small", "the mask is"}, {"text", "mask_text.png"}, {"empty", "holds no object"},
                  {"soft", "not a soft matte"}};
    const char *paths[4] = {small, text, empty, soft};
    for (int k = 0; k < 4; k++) {
        ck_run_result r = run_ckey("track", "--plate", plate_dir, "--mask", paths[k], "--out", out, "--track-model",
                                   model_path, NULL);
        CHECKF(r.code == 1, "%s: exit %d", cases[k].file_var, r.code);
        CHECKF(strstr(r.err, cases[k].needle) && strstr(r.err, strrchr(paths[k], '/') + 1),
               "%s: stderr lacks '%s' or the file: %s", cases[k].file_var, cases[k].needle, r.err);
        ck_run_free(&r);
    }
    /* nothing was written */
    CHECK(access(out, F_OK) != 0);
    ck_run_result r = run_ckey("track", "--plate", plate_dir, "--out", out, "--track-model", model_path, NULL);
    CHECKF(r.code == 2 && strstr(r.err, "missing --mask"), "exit %d: %s", r.code, r.err);
    ck_run_free(&r);
    /* no checkpoint anywhere: the message says where the official one is */
    r = run_ckey("track", "--plate", plate_dir, "--mask", mask_path, "--out", out, NULL);
    CHECKF(r.code == 2 && strstr(r.err, "cutie-base-mega.pth") && strstr(r.err, "hkchengrex/Cutie"), "exit %d: %s",
           r.code, r.err);
    ck_run_free(&r);
    r = run_ckey("key", "--plate", plate_dir, "--mask", mask_path, "--hint", plate_dir, "--out", out, "--model",
                 keyer_path, NULL);
    CHECKF(r.code == 2 && strstr(r.err, "leave out --hint"), "exit %d: %s", r.code, r.err);
    ck_run_free(&r);
}

/* Every pass file of the two outputs is byte for byte the same. */
static void same_passes(const char *a, const char *b) {
    static const char *const pass[4] = {"Matte", "FG", "Processed", "Comp"};
    int same = 0;
    for (int t = 0; t < T; t++)
        for (int k = 0; k < 4; k++) {
            char pa[700], pb[700];
            snprintf(pa, sizeof pa, "%s/%s/shot_%04d.%s", a, pass[k], t + 1, k == 3 ? "png" : "exr");
            snprintf(pb, sizeof pb, "%s/%s/shot_%04d.%s", b, pass[k], t + 1, k == 3 ? "png" : "exr");
            size_t na = 0, nb = 0;
            unsigned char *da = ck_read_file(pa, &na), *db = ck_read_file(pb, &nb);
            CHECKF(da && db && na == nb && !memcmp(da, db, na), "%s and %s differ", pa, pb);
            same += da && db && na == nb && !memcmp(da, db, na);
            free(da), free(db);
        }
    printf("  %d of %d pass files identical\n", same, 4 * T);
}

/* ckey with args (NULL-terminated), then --mask-at mask_at when mask_at is
 * set, then `last` when set. */
static ck_run_result run_mask_at(const char *const *args, const char *mask_at, const char *last) {
    const char *a[64];
    int n = 0;
    for (; args[n] && n < 60; n++) a[n] = args[n];
    if (mask_at) a[n++] = "--mask-at", a[n++] = mask_at;
    if (last) a[n++] = last;
    a[n] = NULL;
    return ck_cli_run_argv(&cli, NULL, a);
}

static void test_key_with_mask(void) {
    NEED_CLIP();
    if (access(keyer_path, R_OK) != 0) SKIP("%s does not exist", keyer_path);
    char hints[512], k1[512], k2[512], arg[600];
    path_in(hints, sizeof hints, "hints-for-key");
    path_in(k1, sizeof k1, "key-two-steps");
    path_in(k2, sizeof k2, "key-one-pass");
    snprintf(arg, sizeof arg, "5=%s/mask_one.png", workdir);
    const char *mask_at = access(arg + 2, R_OK) == 0 ? arg : NULL; /* test_mask_at's mask, when it ran */
    const char *const track[] = {"track", "--plate", plate_dir, "--mask", mask_path, "--out", hints,
                                 "--track-model", model_path, "--threads", "2", NULL};
    const char *const key_mask[] = {"key", "--plate", plate_dir, "--mask", mask_path, "--out", k2, "--model",
                                    keyer_path, "--track-model", model_path, "--size", "128", "--device", "cpu",
                                    "--threads", "2", NULL};
    ck_run_result r = run_mask_at(track, mask_at, NULL);
    CHECKF(r.code == 0, "exit %d: %s", r.code, r.err);
    ck_run_free(&r);
    r = run_ckey("key", "--plate", plate_dir, "--hint", hints, "--out", k1, "--model", keyer_path, "--size", "128",
                 "--device", "cpu", "--threads", "2", NULL);
    CHECKF(r.code == 0, "exit %d: %s", r.code, r.err);
    ck_run_free(&r);
    r = run_mask_at(key_mask, mask_at, "--json");
    CHECKF(r.code == 0, "exit %d: %s", r.code, r.err);
    CHECK(ck_count_str(r.out, "\"status\":\"keyed\"") == T);
    ck_run_free(&r);
    printf("  track then key vs key --mask%s:\n", mask_at ? " (with a --mask-at)" : "");
    same_passes(k1, k2);
    /* resume: the passes of frames 3..6 removed; a re-run tracks from the
     * first frame again and writes the same bytes */
    char cmd[2048];
    snprintf(cmd, sizeof cmd, "rm -f %s/*/shot_0003.* %s/*/shot_0006.*", k2, k2);
    CHECK(system(cmd) == 0);
    r = run_mask_at(key_mask, mask_at, NULL);
    CHECKF(r.code == 0 && strstr(r.out, "keyed 2 frames, skipped 4"), "exit %d: %s %s", r.code, r.out, r.err);
    ck_run_free(&r);
    printf("  after a resume of 2 frames:\n");
    same_passes(k1, k2);
}

/* The integer after "key": in a JSON line, -1 when absent. */
static long long json_ll(const char *s, const char *key) {
    char pat[64];
    snprintf(pat, sizeof pat, "\"%s\":", key);
    const char *p = s ? strstr(s, pat) : NULL;
    return p ? strtoll(p + strlen(pat), NULL, 10) : -1;
}

/* `ckey key --mask` plans both networks resident together: the run's plan
 * (the --json "plan" event) holds the tracker as ckey_track_plan_memory
 * plans it plus the tracked source's frame, probabilities and mask, and a
 * --budget that fits the keyer's run but not the tracker beside it is
 * refused up front, naming the tracker and the smallest budget, with
 * nothing written; that smallest budget runs. */
static void test_budget(void) {
    NEED_CLIP();
    if (access(keyer_path, R_OK) != 0) SKIP("%s does not exist", keyer_path);
    char out[512], budget[64];
    path_in(out, sizeof out, "key-budget");
    ck_run_result r = run_ckey("key", "--plate", plate_dir, "--mask", mask_path, "--out", out, "--model", keyer_path,
                 "--track-model", model_path, "--size", "128", "--device", "cpu", "--threads", "2", "--json", NULL);
    CHECKF(r.code == 0, "exit %d: %s", r.code, r.err);
    const char *plan = r.out ? strstr(r.out, "\"event\":\"plan\"") : NULL;
    CHECKF(plan != NULL, "no plan event: %s", r.out ? r.out : "");
    const long long track = json_ll(plan, "track_bytes"), total = json_ll(plan, "total_bytes"),
                    least = json_ll(plan, "min_budget_bytes");
    ck_run_free(&r);
    /* the tracker as the library plans it (key's --track-size default 480 is
     * over this clip's size: no resize), and the source's own buffers */
    ckey_error err;
    ckey_track_model *m = NULL;
    REQUIRE(ckey_track_model_open(model_path, NULL, &m, &err) == CKEY_OK);
    ckey_track_options o;
    ckey_track_options_default(&o);
    o.max_objects = 2, o.threads = 2, o.max_internal_size = 480;
    ckey_track_memory tm;
    REQUIRE(ckey_track_plan_memory(m, W, H, &o, &tm, &err) == CKEY_OK);
    ckey_track_model_free(m);
    const long long hw = (long long)W * H, source = (3 + 1 + 2) * hw * 4 + hw;
    printf("  run plan: total %lld bytes, tracker %lld (tracker plan %lld + source %lld), smallest budget %lld\n",
           total, track, (long long)tm.total_bytes, source, least);
    CHECKF(track == tm.total_bytes + source, "the run plans the tracker at %lld bytes, expected %lld + %lld", track,
           (long long)tm.total_bytes, source);
    CHECK(track > 0 && total > track && least > track && least <= total);
    /* ckey info --mask plans the same run */
    r = run_ckey("info", "--model", keyer_path, "--size", "128", "--device", "cpu", "--threads", "2", "--mask",
                 mask_path, "--track-model", model_path, "--json", NULL);
    CHECKF(r.code == 0, "exit %d: %s", r.code, r.err);
    const char *run = r.out ? strstr(r.out, "\"run_memory\"") : NULL, *tmem = r.out ? strstr(r.out, "\"track_memory\"") : NULL;
    CHECKF(run && tmem && json_ll(run, "track_bytes") == track && json_ll(run, "total_bytes") == total &&
               json_ll(run, "min_budget_bytes") == least && json_ll(tmem, "total_bytes") == track &&
               json_ll(tmem, "arena_bytes") == tm.arena_bytes,
           "info --mask plans tracker %lld, total %lld, smallest %lld; key planned %lld, %lld, %lld",
           json_ll(run, "track_bytes"), json_ll(run, "total_bytes"), json_ll(run, "min_budget_bytes"), track, total,
           least);
    ck_run_free(&r);
    /* a budget the keyer's run alone fits, but not with the tracker */
    snprintf(budget, sizeof budget, "%lld", total - track);
    char out2[512];
    path_in(out2, sizeof out2, "key-budget-refused");
    r = run_ckey("key", "--plate", plate_dir, "--mask", mask_path, "--out", out2, "--model", keyer_path,
                 "--track-model", model_path, "--size", "128", "--device", "cpu", "--threads", "2", "--budget", budget,
                 NULL);
    CHECKF(r.code != 0 && r.err && strstr(r.err, "tracker") && strstr(r.err, "smallest budget") &&
               strstr(r.err, "nothing was written"),
           "--budget %s: exit %d: %s", budget, r.code, r.err ? r.err : "");
    printf("  --budget %s: %s", budget, r.err ? r.err : "\n");
    char want[64];
    snprintf(want, sizeof want, "(%lld bytes)", least);
    CHECKF(r.err && strstr(r.err, want), "the refusal does not name the smallest budget %s", want);
    ck_run_free(&r);
    char probe[600];
    snprintf(probe, sizeof probe, "%s/Matte", out2);
    CHECKF(access(probe, F_OK) != 0, "%s exists after a refused run", probe);
    /* the smallest budget named runs */
    snprintf(budget, sizeof budget, "%lld", least);
    r = run_ckey("key", "--plate", plate_dir, "--mask", mask_path, "--out", out2, "--model", keyer_path,
                 "--track-model", model_path, "--size", "128", "--device", "cpu", "--threads", "2", "--budget", budget,
                 NULL);
    CHECKF(r.code == 0, "--budget %s (the smallest): exit %d: %s", budget, r.code, r.err ? r.err : "");
    ck_run_free(&r);
}

int main(int argc, char **argv) {
    ck_ckey_path(ckey_bin, sizeof ckey_bin, argv[0]);
    if (!ck_make_temp_dir(workdir, sizeof workdir, "track")) return 1;
    ck_isolate_model_lookup(workdir);
    ck_abs_path(model_path, sizeof model_path, DIR "cutie_tiny.pth");
    ck_tiny_model_path(keyer_path, sizeof keyer_path);
    have_clip = access(model_path, R_OK) == 0 && setup_clip();
    static const ck_test_case cases[] = {
        {"hints_union", test_hints_union},   {"shot_dir_and_exr", test_shot_dir_and_exr},
        {"track_device", test_track_device},
        {"object", test_object},
        {"mask_at", test_mask_at},           {"bad_masks", test_bad_masks},
        {"key_with_mask", test_key_with_mask}, {"budget", test_budget},
    };
    const int rc = ck_test_main(cases, (int)CK_ARRAY_LEN(cases), argc, argv);
    free(planes), free(mask0);
    if (rc == 0) {
        char cmd[400];
        snprintf(cmd, sizeof cmd, "rm -rf %s", workdir);
        if (system(cmd) != 0) fprintf(stderr, "could not remove %s\n", workdir);
    }
    return rc;
}
