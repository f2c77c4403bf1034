/*
 * A generated green-screen clip for bench/farm-chunks.sh and
 * bench/key_clip.sh (not a test):
 *
 *   build/bench/make-synth-clip DIR FRAMES WIDTH HEIGHT [png16|png8|exr|h264|prores]
 *
 * DIR/Input/plate_NNNN.png (16-bit RGB, the default; png8: 8-bit) or
 * DIR/Input/plate_NNNN.exr (exr: HALF RGB, PXR24, the same sRGB values made
 * linear, as a linear plate stores them) and DIR/AlphaHint/hint_NNNN.png
 * (8-bit), frames 1 .. FRAMES: a soft-edged disc with green spill on its
 * edge moving across a green screen, and its hardened, shrunk alpha as the
 * hint (the frames tests/support/clip.c's ck_synth_frame makes, scaled
 * to the size). h264 / prores: the same plates as one video,
 * DIR/Input/plate.mp4 (H.264, 8-bit 4:2:0, CRF 18) or DIR/Input/plate.mov
 * (ProRes 422 HQ, 10-bit), at 24 fps, written by ckey_video_writer; a
 * video's frames are numbered from 0, so its hints are hint_0000 ..
 * FRAMES - 1 (the 8-bit PNGs as above). Needs only libckey (PNG support;
 * OpenEXR for exr; FFmpeg for h264 / prores).
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "ckey_clip.h"
#include "ckey_media.h"

static void frame(int k, int frames, int W, int H, float *rgb, float *hint) {
    const size_t n = (size_t)W * H;
    const float rad = 0.23f * (float)H;
    const float cx = rad + ((float)W - 2 * rad) * (float)k / (float)(frames > 1 ? frames - 1 : 1);
    const float cy = 0.5f * (float)H, soft = 0.06f * rad;
    for (int y = 0; y < H; y++)
        for (int x = 0; x < W; x++) {
            const size_t i = (size_t)y * W + x;
            const float d = sqrtf((x - cx) * (x - cx) + (y - cy) * (y - cy));
            float a = (rad - d) / (4.0f * soft) + 0.5f;
            a = a < 0 ? 0 : a > 1 ? 1 : a;
            const float spill = 0.3f * (1.0f - a) * (a > 0);
            const float sub[3] = {0.85f - 0.2f * (float)y / (float)H, 0.55f + spill,
                                  0.45f + 0.2f * (float)x / (float)W};
            const float screen[3] = {0.12f, 0.78f + 0.06f * (float)x / (float)W, 0.18f};
            for (int c = 0; c < 3; c++) rgb[c * n + i] = sub[c] * a + screen[c] * (1.0f - a);
            const float h = (a - 0.3f) * 2.0f;
            hint[i] = h < 0 ? 0 : h > 1 ? 1 : h;
        }
}

/* The sRGB transfer function undone (IEC 61966-2-1), for a linear plate. */
static float srgb_to_linear(float v) {
    return v <= 0.04045f ? v / 12.92f : powf((v + 0.055f) / 1.055f, 2.4f);
}

int main(int argc, char **argv) {
    if (argc != 5 && argc != 6) {
        fprintf(stderr, "usage: %s DIR FRAMES WIDTH HEIGHT [png16|png8|exr|h264|prores]\n", argv[0]);
        return 2;
    }
    const char *dir = argv[1];
    const int frames = atoi(argv[2]), W = atoi(argv[3]), H = atoi(argv[4]);
    const char *fmt = argc == 6 ? argv[5] : "png16";
    const int exr = strcmp(fmt, "exr") == 0, depth = strcmp(fmt, "png8") == 0 ? 8 : 16;
    const int h264 = strcmp(fmt, "h264") == 0, video = h264 || strcmp(fmt, "prores") == 0;
    if (frames < 1 || W < 16 || H < 16 || (h264 && (W % 2 || H % 2)) ||
        (!exr && !video && strcmp(fmt, "png8") != 0 && strcmp(fmt, "png16") != 0)) {
        fprintf(stderr, "make-synth-clip: bad frame count, size or format\n");
        return 2;
    }
    char in[4096], hints[4096], p[4200];
    snprintf(in, sizeof in, "%s/Input", dir);
    snprintf(hints, sizeof hints, "%s/AlphaHint", dir);
    ckey_error err;
    if (ckey_make_dirs(in, &err) != CKEY_OK || ckey_make_dirs(hints, &err) != CKEY_OK) {
        fprintf(stderr, "make-synth-clip: %s\n", err.message);
        return 1;
    }
    float *rgb = malloc(sizeof(float) * 3 * (size_t)W * H), *hint = malloc(sizeof(float) * (size_t)W * H);
    if (!rgb || !hint) return 1;
    ckey_video_writer *vw = NULL;
    if (video) {
        ckey_video_set_log_level(0);
        const ckey_video_writer_options vo = {h264 ? CKEY_VIDEO_H264 : CKEY_VIDEO_PRORES_422HQ, W, H, 24, 1, 0};
        snprintf(p, sizeof p, "%s/plate.%s", in, h264 ? "mp4" : "mov");
        if (ckey_video_writer_open(p, &vo, &vw, &err) != CKEY_OK) {
            fprintf(stderr, "make-synth-clip: %s\n", err.message);
            return 1;
        }
    }
    for (int k = 0; k < frames; k++) {
        frame(k, frames, W, H, rgb, hint);
        ckey_status st;
        if (video) {
            st = ckey_video_write_frame(vw, rgb, NULL, &err);
        } else {
            snprintf(p, sizeof p, "%s/plate_%04d.%s", in, k + 1, exr ? "exr" : "png");
            if (exr)
                for (size_t i = 0; i < 3 * (size_t)W * H; i++) rgb[i] = srgb_to_linear(rgb[i]);
            st = exr ? ckey_image_write_exr(p, rgb, 3, W, H, CKEY_EXR_PXR24, &err)
                     : ckey_image_write_png(p, rgb, 3, W, H, depth, &err);
        }
        if (st != CKEY_OK) {
            ckey_video_writer_free(vw);
            fprintf(stderr, "make-synth-clip: %s\n", err.message);
            return 1;
        }
        /* a video's frames are numbered from 0, a sequence's from its names (1 ..) */
        snprintf(p, sizeof p, "%s/hint_%04d.png", hints, video ? k : k + 1);
        if (ckey_image_write_png(p, hint, 1, W, H, 8, &err) != CKEY_OK) {
            ckey_video_writer_free(vw);
            fprintf(stderr, "make-synth-clip: %s\n", err.message);
            return 1;
        }
    }
    if (vw && ckey_video_writer_close(vw, &err) != CKEY_OK) {
        fprintf(stderr, "make-synth-clip: %s\n", err.message);
        return 1;
    }
    free(rgb);
    free(hint);
    printf("%s: %d frames of %d x %d (%s plates)\n", dir, frames, W, H, fmt);
    return 0;
}
