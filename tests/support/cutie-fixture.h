/* Shared by the Cutie tests (support/cutie-fixture.c): the fixtures'
 * loading, the comparisons and the clip runs against them. */
#ifndef CK_TEST_CUTIE_FIXTURE_H
#define CK_TEST_CUTIE_FIXTURE_H

#include <stdint.h>

#include "ckey_track.h"
#include "ckpt/checkpoint.h"

#define CK_CUTIE_FIXTURES "tests/fixtures/cutie/"

/* What the tap callback compares (ck_cutie_on_tap's user). */
typedef struct {
    ck_checkpoint *clip, *taps;
    int K, CV, h, w, T;
    float *readout_visual, *sensory;
    double worst_read, worst_sensory;
    int taps_compared;
    double worst_tap;
    float *dec_logits; /* [T - 1, K, H/4, W/4] (longterm.safetensors) */
    double worst_logits; /* relative to each frame's largest logit */
} run_state;

/* clip.safetensors and the fixture model cutie_tiny.pth, with the clip's
 * frames [T, 3, H, W] and mask0 [H, W] (uint8). */
typedef struct ck_cutie_clip {
    ck_checkpoint *ck;
    ckey_track_model *m;
    const ck_tensor_info *frames, *mask0;
    int T, H, W;
    int64_t HW;
} ck_cutie_clip;
/* 1 with c open; else 0 with c closed and the case skipped (the clip
 * absent, the model refused: the reason printed) or failed (frames or mask0
 * missing). */
int ck_cutie_clip_open(ck_cutie_clip *c);
void ck_cutie_clip_close(ck_cutie_clip *c);
/* One frame's uint8 planes [3, HW] as interleaved rgb [HW, 3] in [0, 1]. */
void ck_cutie_frame_rgb(const uint8_t *frame, int64_t HW, float *rgb);

const ck_tensor_info *ck_cutie_need(ck_checkpoint *ck, const char *name);
/* A fixture tensor as fp32 (malloc'd), NULL on failure. */
float *ck_cutie_f32(const ck_tensor_info *t);
/* Prints the max abs error of got against want and returns it. */
double ck_cutie_compare(const char *label, const float *got, const float *want, size_t n);
void ck_cutie_to_channels_first(const float *src, int K, int64_t hw, int C, float *dst);
void ck_cutie_on_tap(void *user, int frame, const char *name, const float *data, int64_t n);
/* Mask IoU of object obj between two [C, HW] probability sets (argmax). */
double ck_cutie_iou(const float *a, const float *b, int C, int64_t HW, int obj);
/* A fixture clip (clip.safetensors, resize.safetensors) on device; with
 * taps.safetensors' stage taps when with_taps; staged: the tracker made by
 * ck_tracker_create_staged (a device's host side on any backend). Skips
 * when absent. */
void ck_cutie_run_clip(const char *file, int with_taps, int32_t device, int staged);
/* The same at a tracker precision (ckey_track_options.precision): at
 * CKEY_PRECISION_TF32 and _FP16 on a device the bars are the result's alone, looser
 * (probabilities within 2e-2, object IoU >= 0.99); the stages' errors are
 * printed. */
void ck_cutie_run_clip_at(const char *file, int with_taps, int32_t device, int staged, int32_t precision);
/* Later masks (maskat.safetensors) on device; skips when absent. */
void ck_cutie_run_mask_at(int32_t device, int staged);
/* The clip with long-term memory (longterm.safetensors) on device; skips when absent. */
void ck_cutie_run_longterm(int32_t device, int staged);

/* An object a later mask brings (maskat.safetensors' mask4 object 2) on
 * device, against a twin tracker given no mask then; skips when absent. */
void ck_cutie_run_new_object(int32_t device, int staged);
/* Objects added later against newobj.safetensors on device; skips when absent. */
void ck_cutie_run_newobj(int32_t device, int staged);
/* Objects added later with long-term memory against newobj_lt.safetensors on
 * device; skips when absent. */
void ck_cutie_run_newobj_lt(int32_t device, int staged);
/* The fixture clip scaled up 2 x 4 (226 x 196) on device, whole and with
 * the pixel encoder, the decoder and the mask encoder in row bands
 * (ck_tracker_set_bands): frames 0 and 1's probabilities within bar of the
 * whole maps', every frame's within later_bar. Skips when absent. */
void ck_cutie_run_bands(int32_t device, int32_t top_k, double bar, double later_bar);
/* ck_cutie_run_bands' bars where the band and whole runs round differently
 * (a GPU's GEMMs pick other kernels for other band heights; test-cutie
 * bands_rounding perturbs the CPU's convs alike). Frames 0-1: rounding
 * gives up to 3e-5 (75 runs with every conv output perturbed by 1e-7
 * relative), a halo one row short in the decoder's upsampling 2.4e-4 to
 * 1.4e-3. Later frames: at frame 6 a near-tie in one query's top-k
 * selection (top_k 30; none with top_k 0 or 40) flips with the rounding
 * and moves a probability by 4.4e-3, in about two runs of three. */
#define CK_CUTIE_BANDS_BAR 1e-4
#define CK_CUTIE_BANDS_LATER_BAR 1e-2
/* With top_k 0 (every key read, nothing to flip) the rounding still grows
 * through the memory: up to 1.2e-4 by frame 7 on the CPU with every conv
 * output perturbed by about an ulp (test-cutie bands_rounding, 4 seeds). */
#define CK_CUTIE_BANDS_ALL_KEYS_BAR 5e-4

/* Called on every tracker the runs above create, before its first step
 * (NULL: none); a test sets it to change the tracker's backend, e.g. to
 * take the convs off cuBLASLt. */
extern void (*ck_cutie_tracker_hook)(ckey_tracker *t);

#endif
