/*
 * ckey.h -- the public API of libckey, a native engine for CorridorKey's
 * GreenFormer keying network.
 *
 * The flow:
 *
 *   ckey_model   *m;  ckey_model_load("CorridorKey_v1.0.pth", NULL, &m, &err);
 *   ckey_session *s;  ckey_session_create(m, &opts, &s, &err);   // plans + sizes the arena
 *   ckey_session_forward(s, input, &out, &err);                   // never mallocs
 *   ckey_session_free(s); ckey_model_free(m);
 *
 * Handles are opaque; every *_free accepts NULL. Every fallible call returns a
 * ckey_status and, when `err` is non-NULL, fills it with a readable message that
 * names the file, the tensor or the argument at fault. The library keeps no
 * global mutable state: two models or sessions never interfere.
 *
 * Tensors crossing the API are float32, channel-major (CHW), densely packed.
 *
 * Beside this header: ckey_media.h (image and video files), ckey_clip.h
 * (post passes, auto hint, keying a whole shot) and ckey_debug.h (unstable
 * test and debugging hooks).
 */
#ifndef CKEY_H
#define CKEY_H

#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#ifdef __cplusplus
extern "C" {
#endif

#define CKEY_VERSION_MAJOR 0
#define CKEY_VERSION_MINOR 1
#define CKEY_VERSION_PATCH 0

typedef enum ckey_status {
    CKEY_OK = 0,
    CKEY_ERR_INVALID_ARG,   /* a caller-supplied argument is out of range */
    CKEY_ERR_IO,            /* a file could not be opened, read or written */
    CKEY_ERR_FORMAT,        /* a file is malformed (truncated, bad header, ...) */
    CKEY_ERR_UNSUPPORTED,   /* well-formed but uses something ckey refuses */
    CKEY_ERR_MODEL,         /* tensors missing, unexpected or misshapen */
    CKEY_ERR_NOMEM,         /* an allocation failed */
    CKEY_ERR_BUDGET,        /* the plan does not fit the memory budget */
    CKEY_ERR_DEVICE,        /* the requested device is absent or failed */
    CKEY_ERR_INTERNAL,      /* a bug in ckey */
    CKEY_ERR_CANCELLED      /* the caller asked the run to stop (ckey_shot_options.cancel) */
} ckey_status;

/* Stable, readable name of a status ("CKEY_ERR_FORMAT"). Never NULL. */
const char *ckey_status_name(ckey_status s);

/* A byte count in the unit that shows it, as ckey's messages write sizes:
 * "512 bytes", "1.0 KiB", "5.8 MiB", "2.05 GiB" (binary multiples), into
 * buf[cap]; returns buf. */
const char *ckey_format_bytes(char *buf, size_t cap, int64_t bytes);

typedef struct ckey_error {
    ckey_status status;
    char message[512];
} ckey_error;

/* ---------------------------------------------------------------- model */

typedef struct ckey_model ckey_model;

/*
 * Load a checkpoint: a torch.save zip (CorridorKey_v1.0.pth; fp32/fp16/bf16
 * storages; optional `state_dict` nesting and `_orig_mod.` prefixes) or a
 * safetensors file. The pickle inside a .pth is read by a small interpreter
 * that executes nothing and refuses every opcode or global a state dict does
 * not need. Weights are converted to float32 once, into memory the model owns;
 * a NaN or Inf weight is refused (CKEY_ERR_FORMAT, "m.pth: tensor
 * 'refiner.final.weight' element 12 is NaN: the checkpoint is damaged").
 * Hyper-parameters come from the tensor shapes; head_dim (default 56) and the
 * GroupNorm group count (default 8) may be overridden by safetensors metadata
 * ("ckey.head_dim", "ckey.groups") or a JSON sidecar `<path>.json`.
 */
ckey_status ckey_model_load(const char *path, ckey_model **out, ckey_error *err);
void ckey_model_free(ckey_model *m);

/* Write the model's weights (float32) and hyper-parameters as safetensors. */
ckey_status ckey_model_save_safetensors(const ckey_model *m, const char *path, ckey_error *err);

typedef struct ckey_model_info {
    int32_t embed_dim;        /* 112 for hiera_base_plus */
    int32_t head_dim;         /* 56 */
    int32_t num_blocks;       /* 24 */
    int32_t num_stages;       /* 4 */
    int32_t stage_blocks[4];  /* 2, 3, 16, 3 */
    int32_t stage_dims[4];    /* 112, 224, 448, 896 */
    int32_t stage_heads[4];   /* 2, 4, 8, 16 */
    int32_t decoder_dim;      /* 256 */
    int32_t refiner_dim;      /* 64 */
    int32_t refiner_groups;   /* 8 */
    int32_t pos_embed_grid;   /* side of the stored pos-embed grid: 512 at S = 2048 */
    int32_t native_size;      /* the S the checkpoint was trained at (4 * pos_embed_grid) */
    int64_t num_params;       /* learned parameters as stored (pos-embed included) */
} ckey_model_info;

ckey_status ckey_model_get_info(const ckey_model *m, ckey_model_info *info);

/* -------------------------------------------------------------- session */

typedef enum ckey_device_kind {
    CKEY_DEVICE_CPU = 0,
    CKEY_DEVICE_CUDA = 1
} ckey_device_kind;

/* Devices this build and machine can run on (`ckey devices`). */
typedef struct ckey_device_info {
    ckey_device_kind kind;
    int32_t index;
    char name[128];
    int32_t units;            /* CPU: online cores; CUDA: multiprocessors */
    int32_t compute_major, compute_minor; /* CUDA compute capability (0 for CPU) */
    int64_t memory_total;     /* bytes: system RAM, or device memory */
    int64_t memory_free;      /* bytes available now (0 when unknown); the CPU's:
                                 ckey_host_memory_available() */
} ckey_device_info;

/* The host memory available now, in bytes: /proc/meminfo's MemAvailable
 * (free memory plus what the kernel can reclaim without swapping), else the
 * free pages (sysconf _SC_AVPHYS_PAGES); 0 when neither is known. */
int64_t ckey_host_memory_available(void);

/* For a program's main(), before any other ckey call: process-wide settings
 * the libraries ckey uses read once, set only where the environment leaves
 * them unset. Today one: CUBLAS_WORKSPACE_CONFIG=:16:8, cuBLAS's default
 * workspace pool per handle (64 MiB on an H200 otherwise). Every ckey cuBLAS
 * handle runs on a workspace from its memory plan, so the default pool would
 * sit unused outside the plan. Not thread-safe (it calls setenv); the
 * library itself never calls it. */
void ckey_process_init(void);

/* Number of devices of a kind (CPU: 1; CUDA: 0 without a driver, a GPU or a
 * CUDA build). */
int32_t ckey_device_count(ckey_device_kind kind);
ckey_status ckey_device_get_info(ckey_device_kind kind, int32_t index, ckey_device_info *info,
                                 ckey_error *err);

/* Arithmetic of a session. fp16/bf16 store activations and matrix weights in
 * 16 bits and accumulate in fp32 (CUDA only); fp32 is the reference. TF32
 * is the tracker's only (ckey_track_options.precision: fp32 storage, the
 * convs' GEMMs on TF32 tensor cores); a keyer session refuses it. */
typedef enum ckey_precision {
    CKEY_PRECISION_DEFAULT = 0, /* the device's default: fp32 on the CPU, fp16 on CUDA */
    CKEY_PRECISION_FP32 = 1,
    CKEY_PRECISION_FP16 = 2,
    CKEY_PRECISION_BF16 = 3,
    CKEY_PRECISION_TF32 = 4
} ckey_precision;

/* "fp32", "fp16", "bf16", "tf32" or "default". */
const char *ckey_precision_name(ckey_precision p);

/*
 * How ckey_session_key resizes alpha and fg from S x S back to the plate.
 * Upstream has two post-processing paths (inference_engine.py):
 *   LANCZOS4  cv2.resize INTER_LANCZOS4, `_postprocess_opencv`: the official
 *             CLI's default (clip_manager InferenceSettings.gpu_post_processing
 *             = False, `--cpu-post`), so ckey's default too;
 *   BILINEAR  torchvision TF.resize bilinear with antialias (v2 default),
 *             `_postprocess_torch`: process_frame's own default
 *             (post_process_on_gpu=True) and the CLI's `--gpu-post`.
 */
typedef enum ckey_resize_back {
    CKEY_RESIZE_BACK_LANCZOS4 = 0,
    CKEY_RESIZE_BACK_BILINEAR = 1
} ckey_resize_back;

typedef struct ckey_session_options {
    int32_t size;             /* S: the square size the network runs at; multiple of 32; default 2048 */
    int32_t threads;          /* CPU worker threads; 0 = all cores */
    ckey_device_kind device;  /* CPU by default */
    int32_t device_index;     /* for CUDA */
    int64_t memory_budget;    /* bytes; 0 = unlimited (the fastest schedule). Otherwise the session
                                 runs the fastest schedule whose peak (weights + arena) fits it, and
                                 a budget below every schedule's fails with CKEY_ERR_BUDGET naming
                                 the smallest that fits */
    float refiner_strength;   /* multiplies the refiner's deltas; 1 = official default */
    ckey_precision precision; /* DEFAULT: the device's default (see ckey_precision) */
    ckey_resize_back resize_back; /* default LANCZOS4 */
} ckey_session_options;

/* Fill `o` with the defaults above. */
void ckey_session_options_default(ckey_session_options *o);

typedef struct ckey_memory_plan {
    int64_t weight_bytes;     /* model weights (incl. pos-embed resized for S) */
    int64_t arena_bytes;      /* the one activation arena, sized by the planner */
    int64_t scratch_bytes;    /* scratch inside the arena: on the CPU the one
                                 pass-long scratch (per-thread slices + shared);
                                 on CUDA the largest of the per-phase scratches
                                 (encoder, refiner stem, refiner blocks) */
    int64_t peak_bytes;       /* weights + arena + workspace (the plate-size buffers of a run
                                 and the model's raw decoder copy kept for
                                 `convert`, ~5 MiB, come on top: the plan of a
                                 whole run, ckey_plan_run_memory in ckey_clip.h,
                                 counts them) */
    int32_t num_buffers;      /* activation buffers the planner placed */
    int64_t naive_bytes;      /* what those buffers would need with no reuse */
    /* the most arena bytes live at once during each stage of the pass (the
     * encoder, the decoders, the refiner), scratch included */
    int64_t stage_bytes[3];
    int32_t refiner_band;     /* the schedule chosen: 0 = the refiner on whole maps (the fastest);
                                 else in bands of this many rows, recomputed per GroupNorm */
    double relative_work;     /* the refiner's work under that schedule, 1 = whole maps */
    int64_t min_budget_bytes; /* the smallest budget any schedule fits: the leanest one's peak */
    int32_t min_budget_band;  /* that schedule's refiner_band */
    int32_t encoder_chunks;   /* the schedule chosen: its encoder's mask-unit attention in this many
                                 chunks of windows (1: all at once; only the CUDA backend chunks) */
    int32_t min_budget_chunks;/* the leanest schedule's encoder_chunks */
    int32_t c1_on_host;       /* the schedule chosen keeps the encoder's first feature map (c1) in host
                                 memory from stage 1 to the decoders (CUDA only; host bytes counted
                                 in a run's plan) */
    int32_t min_budget_c1_on_host; /* the leanest schedule's c1_on_host */
    int32_t streamed;         /* the schedule chosen: its CKEY_PLAN_* steps (the CPU; on CUDA the
                                 pos-embed's, qkv's, decoders', mask-unit blocks', input's and
                                 output's; docs/design.md,
                                 "The CPU at large sizes") */
    int32_t min_budget_streamed; /* the leanest schedule's */
    int64_t workspace_bytes;  /* what the backend holds beside weights and arena for the session's
                                 life (CUDA: cuBLAS's workspace and the in-place conv's sync ints;
                                 0 on the CPU) */
} ckey_memory_plan;

/* ckey_memory_plan.streamed: the CPU's encoder and decoder steps (CUDA takes
 * the pos-embed, qkv, decoder, mask-unit block and input ones), each computing what the
 * whole-map run does with less held at once. */
enum {
    CKEY_PLAN_POS_STREAMED = 1,  /* the pos-embed resized row by row as it is added */
    CKEY_PLAN_QKV_STREAMED = 2,  /* global attention without whole qkv or attention output */
    CKEY_PLAN_DECODER_BANDS = 4, /* the decoders in bands of rows */
    CKEY_PLAN_FROM_MAPS = 8,     /* stage transitions read the feature maps, the tokens gone */
    CKEY_PLAN_NORM1_FROM_MAP = 16, /* a widening global block's norm1 taken from the map as read */
    CKEY_PLAN_INPUT_RGB = 32,    /* the input's hint plane released after patch_embed */
    CKEY_PLAN_REROLL_IN_PLACE = 64, /* feature maps made in the tokens' buffers */
    CKEY_PLAN_ENCODER_BANDS = 128, /* mask-unit blocks in bands; c1, c2 made again by the decoders */
    CKEY_PLAN_OUT_IN_INPUT = 256,  /* the refiner's deltas written into the input's buffer */
    CKEY_PLAN_C1_BANDS = 512,    /* c1 to and from host memory band by band (CUDA) */
    CKEY_PLAN_X_ON_HOST = 1024,  /* the input's RGB planes in host memory, fetched per refiner band (CUDA) */
    CKEY_PLAN_OUT_ON_HOST = 2048 /* the output finished band by band into host memory (CUDA) */
};

/* Plan a session without allocating its arena (for `ckey info`); over
 * opt->memory_budget it fails with CKEY_ERR_BUDGET. A whole run's plan, plate
 * buffers included: ckey_plan_run_memory (ckey_clip.h). */
ckey_status ckey_plan_memory(const ckey_model *m, const ckey_session_options *opt,
                             ckey_memory_plan *plan, ckey_error *err);

typedef struct ckey_session ckey_session;

ckey_status ckey_session_create(const ckey_model *m, const ckey_session_options *opt,
                                ckey_session **out, ckey_error *err);
void ckey_session_free(ckey_session *s);

ckey_status ckey_session_get_plan(const ckey_session *s, ckey_memory_plan *plan);

/*
 * Run the network on one input. `input` is the model input x: [4, S, S]
 * float32, channels 0..2 the ImageNet-normalized sRGB image, channel 3 the
 * hint in [0, 1]. On return `alpha` ([S, S]) and `fg` ([3, S, S]) point into
 * session memory valid until the next call. No allocation happens here.
 */
typedef struct ckey_forward_result {
    const float *alpha;
    const float *fg;
    double seconds;           /* wall time of the forward pass */
    double device_seconds;    /* CUDA: the network on the GPU alone, from the input
                                 there to the output there (CUDA events; without the
                                 host transfers); CPU: the same as seconds */
    double upload_seconds;    /* CUDA: the input's upload on the GPU (CUDA events); CPU: 0 */
    double download_seconds;  /* CUDA: the output's download on the GPU; CPU: 0 */
} ckey_forward_result;

ckey_status ckey_session_forward(ckey_session *s, const float *input,
                                 ckey_forward_result *out, ckey_error *err);

/* The same, writing alpha [S*S] then fg [3*S*S] into `output` (4*S*S floats,
 * owned by the caller; `out`, when non-NULL, points into it). On a CUDA
 * session the input is uploaded from `input` and the result downloaded into
 * `output` directly, with no copy through the session's own buffers: give it
 * buffers from ckey_session_host_alloc (page-locked there) for the fastest
 * transfers. */
ckey_status ckey_session_forward_into(ckey_session *s, const float *input, float *output,
                                      ckey_forward_result *out, ckey_error *err);
/* Host memory suited to a session's transfers: page-locked on a CUDA session,
 * 64-byte aligned plain memory on the CPU. NULL when out of memory. Free it
 * with ckey_session_host_free on the same session, before freeing the session. */
void *ckey_session_host_alloc(ckey_session *s, size_t bytes);
void ckey_session_host_free(ckey_session *s, void *p);

/* Size S and the number of floats ckey_session_forward expects (4*S*S). */
int32_t ckey_session_size(const ckey_session *s);
/* The precision the session runs at (DEFAULT resolved: FP32, FP16 or BF16). */
ckey_precision ckey_session_precision(const ckey_session *s);

/* ------------------------------------------------------------ framing */

/*
 * Key one plate: image [3, h, w] in [0, 1] (sRGB or linear), hint [h, w] in
 * [0, 1]. Resizes to S exactly as torchvision's bilinear resize (antialiased
 * on downscale), normalizes, runs the network, and resizes alpha and fg back
 * to h x w as the session's `resize_back` says (default Lanczos4, cv2's
 * INTER_LANCZOS4: values may overshoot [0, 1] slightly near edges, as
 * upstream's do). `alpha_out` holds h*w floats, `fg_out` 3*h*w (CHW,
 * straight sRGB). The resize work buffers depend on the plate size: the
 * session grows them to the largest plate it has seen (outside the planned
 * arena), so every later frame of that size allocates nothing.
 */
typedef struct ckey_frame {
    int32_t width, height;
    const float *rgb;         /* [3, h, w] */
    const float *hint;        /* [h, w] */
    int32_t input_is_linear;  /* convert linear -> sRGB after the resize */
} ckey_frame;

ckey_status ckey_session_key(ckey_session *s, const ckey_frame *frame,
                             float *alpha_out, float *fg_out, ckey_error *err);

/*
 * Upstream's linear_to_srgb in place (float32, as color_utils evaluates it):
 * values below 0 become 0, values above 1 follow the curve. Applied to a
 * linear plate *before* the resize it gives upstream's default treatment of
 * an EXR plate (read_image_frame(gamma_correct_exr=True)); ckey_frame's
 * input_is_linear applies it after the resize instead (upstream's --linear).
 */
void ckey_linear_to_srgb(float *data, size_t count);

/* Largest plate (width*height) ckey_session_key accepts for this session. */
int64_t ckey_session_max_plate_pixels(const ckey_session *s);

/* Library version string, e.g. "0.1.0 (cpu: openblas; cuda: no)". */
const char *ckey_version(void);

#ifdef __cplusplus
}
#endif
#endif /* CKEY_H */
