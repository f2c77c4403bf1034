#include "clip.h"

#include <limits.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "testutil.h"

/* <root>/<name> (into shot) made afresh with empty Input/ and AlphaHint/. */
static int fresh_shot(char *shot, size_t cap, const char *root, const char *name) {
    snprintf(shot, cap, "%s/%s", root, name);
    ck_remove_tree(shot);
    char p[1024];
    if (mkdir(shot, 0777) != 0) return 0;
    snprintf(p, sizeof p, "%s/Input", shot);
    if (mkdir(p, 0777) != 0) return 0;
    snprintf(p, sizeof p, "%s/AlphaHint", shot);
    return mkdir(p, 0777) == 0;
}

int ck_make_shot(char *shot, size_t cap, const char *root, const char *name, int n) {
    if (!fresh_shot(shot, cap, root, name)) return 0;
    char p[1024];
    for (int i = 1; i <= n; i++) {
        snprintf(p, sizeof p, "%s/Input/plate_%04d.png", shot, i);
        if (!ck_copy_file("examples/plate.png", p)) return 0;
        snprintf(p, sizeof p, "%s/AlphaHint/hint_%04d.png", shot, i);
        if (!ck_copy_file("examples/hint.png", p)) return 0;
    }
    return 1;
}

void ck_synth_frame(int k, int W, int H, float *rgb, float *hint) {
    const size_t n = (size_t)W * H;
    const float cx = 22.0f + 7.0f * (float)k, cy = 0.5f * (float)H, rad = 15.0f;
    for (int y = 0; y < H; y++)
        for (int x = 0; x < W; x++) {
            const size_t i = (size_t)y * W + x;
            const float d = sqrtf((x - cx) * (x - cx) + (y - cy) * (y - cy));
            float a = (rad - d) / 4.0f + 0.5f;
            a = a < 0 ? 0 : a > 1 ? 1 : a;
            const float spill = 0.3f * (1.0f - a) * (a > 0);
            const float sub[3] = {0.85f - 0.003f * (float)y, 0.55f + spill, 0.45f + 0.002f * (float)x};
            const float screen[3] = {0.12f, 0.78f + 0.001f * (float)x, 0.18f};
            for (int c = 0; c < 3; c++) rgb[c * n + i] = sub[c] * a + screen[c] * (1.0f - a);
            const float h = (a - 0.3f) * 2.0f;
            hint[i] = h < 0 ? 0 : h > 1 ? 1 : h;
        }
}

int ck_make_synth_shot(char *shot, size_t cap, const char *root, const char *name, int first, int n,
                       int W, int H) {
    if (!fresh_shot(shot, cap, root, name)) return 0;
    char p[1024];
    float *rgb = malloc(sizeof(float) * 3 * (size_t)W * H), *hint = malloc(sizeof(float) * (size_t)W * H);
    int ok = rgb && hint;
    ckey_error err;
    for (int k = 0; ok && k < n; k++) {
        ck_synth_frame(k, W, H, rgb, hint);
        snprintf(p, sizeof p, "%s/Input/plate_%04d.png", shot, first + k);
        ok = ckey_image_write_png(p, rgb, 3, W, H, 16, &err) == CKEY_OK;
        snprintf(p, sizeof p, "%s/AlphaHint/hint_%04d.png", shot, first + k);
        ok = ok && ckey_image_write_png(p, hint, 1, W, H, 8, &err) == CKEY_OK;
    }
    free(rgb);
    free(hint);
    return ok;
}

const char *const ck_pass_names[4] = {"Matte", "FG", "Processed", "Comp"};

void ck_pass_path(char *buf, size_t cap, const char *out, int pass, int frame) {
    snprintf(buf, cap, "%s/%s/plate_%04d.%s", out, ck_pass_names[pass], frame, pass == 3 ? "png" : "exr");
}

int ck_frame_complete(const char *out, int frame) {
    for (int p = 0; p < 4; p++) {
        char path[PATH_MAX];
        ck_pass_path(path, sizeof path, out, p, frame);
        if (access(path, F_OK) != 0) return 0;
    }
    return 1;
}

ckey_status ck_write_video(const char *path, ckey_video_codec codec, int W, int H, int frames, int alpha,
                           ck_video_frame_fn fn, void *user) {
    ckey_video_writer_options o = {codec, W, H, 25, 1, 1};
    ckey_video_writer *w = NULL;
    ckey_error err;
    ckey_status st = ckey_video_writer_open(path, &o, &w, &err);
    if (st != CKEY_OK) {
        fprintf(stderr, "  %s\n", err.message);
        return st;
    }
    float *p = malloc(4 * sizeof(float) * (size_t)W * H);
    if (!p) st = CKEY_ERR_NOMEM;
    for (int k = 0; k < frames && st == CKEY_OK; k++) {
        fn(user, k, p, alpha ? p + 3 * (size_t)W * H : NULL);
        st = ckey_video_write_frame(w, p, alpha ? p + 3 * (size_t)W * H : NULL, &err);
    }
    free(p);
    if (st != CKEY_OK) {
        fprintf(stderr, "  %s\n", err.message);
        ckey_video_writer_free(w);
        return st;
    }
    st = ckey_video_writer_close(w, &err);
    if (st != CKEY_OK) fprintf(stderr, "  %s\n", err.message);
    return st;
}

void ck_expect_read_fails(const char *path, ckey_image_kind kind, ckey_status want, const char *part) {
    ckey_image img;
    ckey_error err;
    memset(&err, 0, sizeof err);
    ckey_status st = ckey_image_read(path, kind, &img, &err);
    CHECKF(st == want, "%s: status %d, want %d (%s)", path, (int)st, (int)want, err.message);
    CHECK(img.data == NULL && img.width == 0);
    CHECKF(strstr(err.message, path) != NULL, "message '%s' lacks the path", err.message);
    if (part) CHECKF(strstr(err.message, part) != NULL, "message '%s' lacks '%s'", err.message, part);
    ckey_image_free(&img);
}
