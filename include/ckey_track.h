/*
 * ckey_track: Cutie mask propagation (hkchengrex/Cutie). A first-frame
 * mask of one or more objects becomes per-frame object probabilities for a
 * whole shot, on the CPU backend.
 *
 *   ckey_track_model_open("cutie-base-mega.pth", NULL, &m, &err);
 *   ckey_track_options o; ckey_track_options_default(&o);
 *   ckey_tracker_create(m, W, H, &o, &t, &err);
 *   ckey_tracker_step(t, rgb0, labels0, 2, objects, prob, &err);  // frame 0 with its mask
 *   ckey_tracker_step(t, rgb1, NULL, 0, NULL, prob, &err);        // every later frame
 *   ckey_tracker_free(t); ckey_track_model_free(m);
 *
 * Images are float RGB in [0, 1], interleaved [H, W, 3]. Probabilities are
 * planes [1 + objects, H, W]: the background, then each object in the order
 * of the first frame's `objects`, summing to 1 per pixel (the official
 * InferenceCore.step output). Memory: the working memory holds the first
 * frame (permanent) and the newest max_mem_frames - 1 memory frames, with
 * FIFO eviction; or, with use_long_term (the official option of that name,
 * with its defaults), up to lt_max_mem_frames frames whose older part is
 * consolidated into num_prototypes long-term entries at a time, the
 * long-term store holding fewer than max_num_tokens (its least used entries
 * removed). The tracker's buffers are allocated when it is created and its
 * working arena on the first frame (when the object count is known);
 * nothing is allocated after that, so a shot of any length runs in the
 * memory of its first frame. Objects added after the first frame and flip
 * augmentation are not implemented.
 */
#ifndef CKEY_TRACK_H
#define CKEY_TRACK_H

#include <stdint.h>

#include "ckey.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef struct ckey_track_model ckey_track_model;
typedef struct ckey_tracker ckey_tracker;

/* What a state dict cannot say. num_heads 0: a sidecar `<path>.json` or
 * `<path without extension>.json` with {"num_heads": N}, else 8 (Cutie's). */
typedef struct ckey_track_model_options {
    int32_t num_heads;
} ckey_track_model_options;

/* Load a Cutie checkpoint (cutie-base-mega.pth, cutie-small-mega.pth or a
 * reduced-width one with the official key names); widths, block counts and
 * the pixel encoder (ResNet-50 or ResNet-18) come from the tensor shapes.
 * BatchNorm is folded into the convs. opt may be NULL. */
ckey_status ckey_track_model_open(const char *path, const ckey_track_model_options *opt, ckey_track_model **out,
                                  ckey_error *err);
void ckey_track_model_free(ckey_track_model *m);

typedef struct ckey_track_options {
    int32_t max_objects;       /* objects the tracker can hold (default 4) */
    int32_t mem_every;         /* a memory frame every this many frames (default 5) */
    int32_t max_mem_frames;    /* working memory in frames, the first included (default 5) */
    int32_t top_k;             /* similarities kept per pixel (default 30; <= 0: all) */
    int32_t stagger_updates;   /* sensory updates between memory frames (default 5) */
    int32_t max_internal_size; /* shorter side processed at most (default -1: the frame's own) */
    int32_t threads;           /* CPU threads (default 0: all online cores) */
    /* Long-term memory (XMem-style; the official use_long_term and its
     * long_term settings). Each read adds to every entry's usage its
     * affinity summed over the frame; when the working memory reaches
     * lt_max_mem_frames frames, its non-permanent entries except the newest
     * lt_min_mem_frames - 1 frames become num_prototypes prototypes (the
     * most used entries, their values and shrinkages averaged over the
     * candidates by key similarity), and before that the long-term store, if
     * it holds max_num_tokens - num_prototypes or more, keeps only its
     * max_num_tokens - num_prototypes - buffer_tokens most used entries.
     * Needs top_k > 0, lt_max_mem_frames > lt_min_mem_frames >= 1, at least
     * num_prototypes tokens in lt_max_mem_frames - lt_min_mem_frames frames,
     * and max_num_tokens >= num_prototypes + buffer_tokens. */
    int32_t use_long_term;     /* 0 (default): FIFO working memory only */
    int32_t lt_max_mem_frames; /* default 10, the first frame included */
    int32_t lt_min_mem_frames; /* default 5, the first frame included */
    int32_t num_prototypes;    /* default 128 */
    int32_t max_num_tokens;    /* default 10000 */
    int32_t buffer_tokens;     /* default 2000 */
    int32_t count_usage;       /* default 1: long-term entries count usage too */
} ckey_track_options;

void ckey_track_options_default(ckey_track_options *o);

/* A tracker for frames of width x height; allocates everything it will use. */
ckey_status ckey_tracker_create(const ckey_track_model *m, int32_t width, int32_t height,
                                const ckey_track_options *opt, ckey_tracker **out, ckey_error *err);

/*
 * One frame. The first call must give `labels` (uint8 [H, W], 0 the
 * background) and `objects` (num_objects distinct labels, at most
 * max_objects): it is memorized as given. Later calls give labels NULL and
 * propagate. prob receives [1 + num_objects, H, W] floats.
 */
ckey_status ckey_tracker_step(ckey_tracker *t, const float *rgb, const uint8_t *labels, int32_t num_objects,
                              const uint8_t *objects, float *prob, ckey_error *err);

/* Working-memory size in tokens (frames x positions at stride 16). */
int64_t ckey_tracker_memory_tokens(const ckey_tracker *t);
/* Long-term memory size in tokens (0 without use_long_term). */
int64_t ckey_tracker_long_term_tokens(const ckey_tracker *t);

void ckey_tracker_free(ckey_tracker *t);

#ifdef __cplusplus
}
#endif

#endif
