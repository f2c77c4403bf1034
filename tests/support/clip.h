/* Test helpers on the library's media API: shots on disk in the official
 * layout (Input/, AlphaHint/), generated frames and videos, the paths of a
 * keyed shot's passes, and image reads expected to fail. */
#ifndef CK_TEST_CLIP_H
#define CK_TEST_CLIP_H

#include <stddef.h>

#include "ckey_media.h"

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

/* The pass folders of a keyed shot, in the order of ckey_shot_passes. */
extern const char *const ck_pass_names[4];

/* out/<pass>/plate_NNNN.exr (.png for Comp): pass `pass` (0 Matte, 1 FG,
 * 2 Processed, 3 Comp) of frame `frame` of a shot made by ck_make_shot or
 * ck_make_synth_shot, keyed into out. */
void ck_pass_path(char *buf, size_t cap, const char *out, int pass, int frame);

/* 1 when all four passes of frame `frame` exist under out. */
int ck_frame_complete(const char *out, int frame);

/* Frame k of a generated video: the picture rgb [3, H, W] and, when alpha
 * is not NULL, its alpha [H, W]. */
typedef void (*ck_video_frame_fn)(void *user, int k, float *rgb, float *alpha);

/* A W x H video at 25 fps of `frames` frames of fn (ckey_video_writer), with
 * fn's alpha when `alpha` (ProRes 4444). CKEY_OK, or the status with the
 * message on stderr. */
ckey_status ck_write_video(const char *path, ckey_video_codec codec, int W, int H, int frames, int alpha,
                           ck_video_frame_fn fn, void *user);

/* CHECK that ckey_image_read(path, kind) fails with status want, leaves the
 * image empty, and says why in a message that names path and holds part
 * (unless NULL). */
void ck_expect_read_fails(const char *path, ckey_image_kind kind, ckey_status want, const char *part);

#endif
