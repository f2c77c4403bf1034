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
 * removed); the objects a later mask adds have a memory of their own. The
 * tracker's buffers are allocated when it is created and its
 * working arena on the first frame (when the object count is known), sized
 * for max_objects; nothing is allocated after that (but the small record of
 * the parts' plans, made again on a frame whose mask adds objects), so a
 * shot of any length runs in the memory of its first frame. Masks of later
 * frames correct the known objects and may add new ones (ckey_tracker_step). Flip augmentation is not
 * implemented.
 */
#ifndef CKEY_TRACK_H
#define CKEY_TRACK_H

#include <stdint.h>

#include "ckey.h"
#include "ckey_clip.h"

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
    /* Where the network runs: CKEY_DEVICE_CPU (default), CKEY_DEVICE_CUDA
     * (GPU 0; the tracker's buffers and a copy of the weights on the
     * device), or CKEY_TRACK_DEVICE_AUTO: CUDA when this build and machine
     * have a GPU and the CUDA backend has every Cutie op, else the CPU. */
    int32_t device;
    /* The arithmetic of the network's convs and linears on CUDA:
     * CKEY_PRECISION_FP32 (default; CKEY_PRECISION_DEFAULT is the same):
     * exact fp32 SGEMMs. CKEY_PRECISION_TF32: their GEMMs on TF32 tensor
     * cores (inputs rounded to a 10-bit mantissa, fp32 accumulation and
     * storage; PyTorch's default for convs on Ampere and later), the rest
     * fp32 as before. CKEY_PRECISION_FP16: the same GEMMs with their inputs
     * (the im2col'd activations and the weights) rounded to fp16, fp32
     * accumulation and output, and the memory read's similarity on tensor
     * cores from fp16-rounded keys (as under the official code's autocast;
     * its top-k, softmax and readout stay fp32); activations stay fp32 in
     * memory. The CPU
     * backend runs fp32 for all three (the lower precisions permit the
     * rounding, they do not require it). BF16: CKEY_ERR_UNSUPPORTED. */
    int32_t precision;
} ckey_track_options;

#define CKEY_TRACK_DEVICE_AUTO (-1)

void ckey_track_options_default(ckey_track_options *o);

/* A tracker for frames of width x height; allocates everything it will use. */
ckey_status ckey_tracker_create(const ckey_track_model *m, int32_t width, int32_t height,
                                const ckey_track_options *opt, ckey_tracker **out, ckey_error *err);

/*
 * One frame. The first call must give `labels` (uint8 [H, W], 0 the
 * background) and `objects` (num_objects distinct labels, at most
 * max_objects): it is memorized as given. Later calls give labels NULL and
 * propagate. prob receives [1 + objects, H, W] floats.
 *
 * A later call may give a mask again (to correct drift, or to bring
 * objects): `objects` then lists 1 or more labels. As the official
 * InferenceCore.step takes a mask that brings no new object, the mask is the
 * frame's result: the frame is not segmented, each listed object is its
 * label's pixels and an object not listed is absent from the frame. A mask
 * that lists labels the tracker does not know yet adds those objects, after
 * the known ones in the order listed, from this frame on (up to max_objects
 * in all): the frame is
 * segmented with the known objects, the listed ones become their label's
 * pixels, the others keep their probability off the mask's nonzero pixels
 * and are 0 on them, and softmax(aggregate(...)) of that is the result
 * (official need_segment). The new objects get a working memory of their
 * own (the official bucket: its first frame permanent, FIFO; with
 * use_long_term its own usage counts, consolidations and long-term store of
 * fewer than max_num_tokens), a zero sensory memory and an object memory
 * from this frame. prob then holds
 * [1 + objects, H, W] for the new count. Either way the frame becomes a
 * memory frame (not a permanent one for the known objects: it leaves their
 * working memory in its FIFO turn) and restarts the count to the next
 * memory frame. The parts' plans are recorded again for the new count (in
 * the arena made on the first frame, which holds max_objects).
 */
ckey_status ckey_tracker_step(ckey_tracker *t, const float *rgb, const uint8_t *labels, int32_t num_objects,
                              const uint8_t *objects, float *prob, ckey_error *err);

/*
 * Host memory for a step's rgb and prob: page-locked on a GPU, so that their
 * copies to and from the device run at the link's speed without the
 * driver's staging (a third of a 1080p step's time); aligned host memory on
 * the CPU. NULL when bytes is 0 or the allocation fails. Free with
 * ckey_tracker_host_free before ckey_tracker_free.
 */
void *ckey_tracker_host_alloc(ckey_tracker *t, size_t bytes);
void ckey_tracker_host_free(ckey_tracker *t, void *p);

/*
 * A tracker's memory, part by part, in bytes; every part is held at once, so
 * the total is their sum. weight_bytes to workspace_bytes are where the
 * tracker runs (`device`): host memory on the CPU, device memory on a GPU,
 * whose tracker also keeps host memory (model_bytes, staging_bytes).
 */
typedef struct ckey_track_memory {
    int32_t device;          /* CKEY_DEVICE_CPU or CKEY_DEVICE_CUDA: where the tracker runs */
    int64_t weight_bytes;    /* the model's weights, fp32: on the CPU the model's own
                                (ckey_track_model_open; shared by every tracker of the
                                model), on a device the tracker's copy of them */
    int64_t bank_bytes;      /* the memory bank: keys, shrinkages and values of the working
                                memory (max_mem_frames frames, or lt_max_mem_frames with
                                use_long_term, plus the long-term store of max_num_tokens
                                entries and the usage counts; keys, shrinkages and counts
                                for a bucket per object) */
    int64_t sensory_bytes;   /* the sensory memory and the object memory (summaries) */
    int64_t frame_bytes;     /* the frame's buffers: as given and resized (when resizing),
                                padded; its features (the decoder's projections of the
                                stride-4 and stride-8 ones, the stride-16 ones), key,
                                shrinkage and selection; the probabilities (on a device,
                                and the result resized back to the frame) */
    int64_t arena_bytes;     /* the parts' temporaries: the largest part's planned arena
                                (or, when larger, a mask's logits or the unpadded
                                probabilities, which use it between the parts) */
    int64_t workspace_bytes; /* the ops' workspace (per-thread tiles, the top-k lists) */
    int64_t model_bytes;     /* on a device: the host model's fp32 weights its copy was made
                                from (host memory, shared by every tracker of the model); 0
                                on the CPU (weight_bytes are they) */
    int64_t staging_bytes;   /* on a device: the host staging of the masks and readbacks,
                                and with use_long_term its host bookkeeping; 0 on the
                                CPU */
    int64_t source_bytes;    /* a tracked source's own buffers (ckey_source_tracked_memory):
                                the frame as RGB, its probabilities, the masks; 0 else */
    int64_t total_bytes;     /* the sum of the parts */
    int64_t host_bytes;      /* what of the total is host memory: all of it on the CPU; on a
                                device model_bytes + staging_bytes + source_bytes */
} ckey_track_memory;

/*
 * The memory a tracker for frames of width x height with options `opt`
 * (NULL: the defaults) takes once its first frame is given with
 * opt->max_objects objects, computed without allocating any of it (the
 * tracker sizes its buffers from the same table). A first frame with fewer
 * objects takes a smaller arena. On the device opt->device picks (as
 * ckey_tracker_create picks it). Fails as ckey_tracker_create would on the
 * same arguments (CUDA without a GPU, too).
 */
ckey_status ckey_track_plan_memory(const ckey_track_model *m, int32_t width, int32_t height,
                                   const ckey_track_options *opt, ckey_track_memory *out, ckey_error *err);

/* What tracker `t` has allocated: its plan's parts (arena_bytes 0 before the
 * first frame, which plans the arena), on its device. source_bytes is 0. */
void ckey_tracker_get_memory(const ckey_tracker *t, ckey_track_memory *out);

/* Working-memory size in tokens (frames x positions at stride 16), all the
 * buckets' together. */
int64_t ckey_tracker_memory_tokens(const ckey_tracker *t);
/* Long-term memory size in tokens, all the buckets' together (0 without
 * use_long_term). */
int64_t ckey_tracker_long_term_tokens(const ckey_tracker *t);

void ckey_tracker_free(ckey_tracker *t);

/* ============================================================ masks and hints
 * A mask is a one-channel image (PNG, TIFF, EXR, ...; read as a hint is,
 * CKEY_IMAGE_HINT) whose values are labels: label = round(255 v) for the
 * value v in [0, 1] (an 8-bit gray PNG's pixel value; 16-bit and float
 * masks are scaled to the same 0..255), 0 the background. Each distinct
 * nonzero label is an object. Read it into `labels` (malloc'd [h, w], free
 * with free()) and its objects, in increasing order, into objects[255].
 * Fails naming the file when it is no image or holds no object.
 */
ckey_status ckey_track_read_mask(const char *path, uint8_t **labels, int32_t *width, int32_t *height,
                                 uint8_t objects[255], int32_t *num_objects, ckey_error *err);

/* The most objects ckey_source_open_tracked takes from a mask: more distinct
 * labels than this are a soft matte given as a mask (refused). */
#define CKEY_TRACK_MAX_OBJECTS 32

typedef struct ckey_track_source_options {
    const char *mask;              /* the first frame's mask (required) */
    int32_t mask_at_count;         /* later masks: */
    const int64_t *mask_at_frame;  /*   their frames' numbers (ckey_shot_frame.number) */
    const char *const *mask_at;    /*   their files */
    int32_t object;                /* 0 (default): the hint is the union of the objects,
                                      1 - P(background); else the probability of the
                                      object with this label (in any of the masks; 0
                                      before the mask that brings it) */
    int32_t hint_bits;             /* 16 (default): the hint rounded to 16 bits, the
                                      values a 16-bit PNG hint file holds; 0: as computed */
    ckey_track_options track;      /* max_objects is set from the masks: every object
                                      of the first and the later ones */
} ckey_track_source_options;

void ckey_track_source_options_default(ckey_track_source_options *o);

/*
 * A source whose hints are tracked: it reads each plate from `inner` (its
 * own hints, if any, are ignored) and runs a tracker on it, the first frame
 * with `mask`, frames named by mask_at with theirs (a later mask's new
 * labels add objects from its frame on, ckey_tracker_step), and hands the
 * plate on with the hint made from the frame's probabilities. Tracking is sequential:
 * a read of frame i tracks every frame from the last one tracked up to i
 * (frames the caller skips are read and tracked all the same), and once a
 * read fails every later one fails too. Frames' hint labels are "tracked".
 * A scene-linear plate (plate_linear, EXR) is tracked on its sRGB encoding.
 * The masks are read and checked here (their objects, --object's label, the
 * mask_at frames) and the mask's size against the first plate's when the
 * inner source can probe it; every plate must have the first one's size.
 * On success the source owns *inner (closing it closes inner) and *inner is
 * zeroed; on failure *inner is untouched. `m` must outlive the source.
 */
ckey_status ckey_source_open_tracked(ckey_source *inner, const ckey_track_model *m,
                                     const ckey_track_source_options *o, ckey_source *out,
                                     ckey_error *err);

/*
 * The memory of a tracked source (ckey_source_open_tracked) on frames of
 * width x height whose masks hold num_objects objects in all, first_objects
 * of them in the first mask (the rest brought by later masks), with
 * num_later later masks and tracker options `opt` (NULL: the defaults;
 * max_objects is set to num_objects, as the source does): its tracker's plan
 * (ckey_track_plan_memory, with the arena made for the objects added later)
 * plus the source's own buffers (source_bytes: the frame as RGB, its
 * probabilities, the masks' labels). `ckey info --mask` plans with it before
 * any source is open.
 */
ckey_status ckey_track_source_plan_memory(const ckey_track_model *m, int32_t width, int32_t height,
                                          int32_t num_objects, int32_t first_objects, int32_t num_later,
                                          const ckey_track_options *opt, ckey_track_memory *out, ckey_error *err);

/*
 * The same for an open tracked source, from its masks (known before the
 * first read), so a run can count it in its plan
 * (ckey_run_options.track_bytes). Fails on a source not opened by
 * ckey_source_open_tracked.
 */
ckey_status ckey_source_tracked_memory(const ckey_source *src, ckey_track_memory *out, ckey_error *err);

#ifdef __cplusplus
}
#endif

#endif
