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
 * not need. Weights are converted to float32 once, into memory the model owns.
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
    int64_t memory_free;      /* bytes available now (0 when unknown) */
} ckey_device_info;

/* Number of devices of a kind (CPU: 1; CUDA: 0 without a driver, a GPU or a
 * CUDA build). */
int32_t ckey_device_count(ckey_device_kind kind);
ckey_status ckey_device_get_info(ckey_device_kind kind, int32_t index, ckey_device_info *info,
                                 ckey_error *err);

/* Arithmetic of a session. fp16/bf16 store activations and matrix weights in
 * 16 bits and accumulate in fp32 (CUDA only); fp32 is the reference. */
typedef enum ckey_precision {
    CKEY_PRECISION_DEFAULT = 0, /* the device's default: fp32 on the CPU, fp16 on CUDA */
    CKEY_PRECISION_FP32 = 1,
    CKEY_PRECISION_FP16 = 2,
    CKEY_PRECISION_BF16 = 3
} ckey_precision;

/* "fp32", "fp16", "bf16" or "default". */
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
    int64_t memory_budget;    /* bytes; 0 = unlimited. Plans over budget fail with CKEY_ERR_BUDGET */
    float refiner_strength;   /* multiplies the refiner's deltas; 1 = official default */
    ckey_precision precision; /* DEFAULT: the device's default (see ckey_precision) */
    int32_t resize_back;      /* ckey_resize_back; default LANCZOS4 */
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
    int64_t peak_bytes;       /* weights + arena (plate-size resize buffers of
                                 ckey_session_key and the model's raw decoder
                                 copy kept for `convert`, ~7 MiB, come on top) */
    int32_t num_buffers;      /* activation buffers the planner placed */
    int64_t naive_bytes;      /* what those buffers would need with no reuse */
} ckey_memory_plan;

/* Plan a session without allocating its arena (for `ckey info`). */
ckey_status ckey_plan_memory(const ckey_model *m, const ckey_session_options *opt,
                             ckey_memory_plan *plan, ckey_error *err);

/* Print the planned buffers of a session (tag, size, arena offset, lifetime
 * in op events), one line each, to `out`: where the peak comes from. */
ckey_status ckey_plan_memory_print(const ckey_model *m, const ckey_session_options *opt, FILE *out,
                                   ckey_error *err);

typedef struct ckey_session ckey_session;

ckey_status ckey_session_create(const ckey_model *m, const ckey_session_options *opt,
                                ckey_session **out, ckey_error *err);
void ckey_session_free(ckey_session *s);

ckey_status ckey_session_get_plan(const ckey_session *s, ckey_memory_plan *plan);

/*
 * Intermediate-tensor observer: called as each named stage output is produced
 * ("c1".."c4" NCHW features, "alpha_logits", "fg_logits" at S/4, "coarse" the
 * 4-channel sigmoid at S, "deltas" the refiner's 4-channel output at S after
 * strength). Data is valid only during the call. Used by the parity tests.
 */
typedef void (*ckey_tap_fn)(void *user, const char *name, const float *data,
                            const int64_t *shape, int32_t ndim);
void ckey_session_set_tap(ckey_session *s, ckey_tap_fn fn, void *user);

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

/* ================================================================ images
 * Image reading (PNG, JPEG, TIFF, OpenEXR) and PNG / OpenEXR writing, so that
 * programs using only this header (the ckey CLI) can load plates and hints and
 * save mattes. Each format is present when libckey is built with its library
 * (libpng: CK_HAVE_PNG, libjpeg: CK_HAVE_JPEG, libtiff: CK_HAVE_TIFF, OpenEXR's
 * C library OpenEXRCore: CK_HAVE_EXR); otherwise the calls for it fail with
 * CKEY_ERR_UNSUPPORTED.
 */

/* Limits checked from the file header before anything is allocated. */
#define CKEY_IMAGE_MAX_SIDE 32768
#define CKEY_IMAGE_MAX_PIXELS ((int64_t)1 << 28)

typedef enum ckey_image_kind {
    /* 3 channels: gray is replicated, palettes expanded, alpha dropped. */
    CKEY_IMAGE_RGB = 0,
    /*
     * 1 channel, for alpha hints: the alpha channel (or palette/tRNS
     * transparency) when the file has one that is not entirely opaque;
     * otherwise gray, or for color files the blue channel -- the channel the
     * official reader takes (OpenCV's channel 0 of BGR). For the usual
     * black/white hint all color channels agree anyway.
     */
    CKEY_IMAGE_HINT = 1
} ckey_image_kind;

typedef struct ckey_image {
    int32_t width, height;
    int32_t channels;   /* 3 for CKEY_IMAGE_RGB, 1 for CKEY_IMAGE_HINT */
    int32_t bit_depth;  /* bits per sample in the file: 1, 2, 4, 8, 16 (16: half EXR;
                           32: float TIFF / EXR) */
    int32_t has_alpha;  /* the file carries alpha (channel or tRNS) */
    /* [channels, height, width], uint8/255 or uint16/65535, float TIFF and
     * EXR samples as stored (may exceed 1 or be negative); owned */
    float *data;
} ckey_image;

/*
 * Read an 8- or 16-bit PNG of any color type (gray, gray+alpha, RGB, RGBA,
 * palette; interlaced or not). On failure `out` is left empty and the message
 * names the file and the problem ("plate.png: not a PNG file",
 * "plate.png: truncated", "plate.png: 40000 x 40000 exceeds the 32768-pixel
 * side limit").
 */
ckey_status ckey_image_read_png(const char *path, ckey_image_kind kind, ckey_image *out,
                                ckey_error *err);

/*
 * Read a PNG, JPEG or TIFF, chosen by the file's first bytes (not its name):
 *   PNG   as ckey_image_read_png;
 *   JPEG  8-bit gray or color (YCbCr/RGB), baseline or progressive; CMYK is
 *         refused; a file that ends early is an error ("truncated"), not a
 *         gray-padded image;
 *   TIFF  8/16-bit unsigned or 32-bit float samples, gray, gray+alpha, RGB or
 *         RGBA, contiguous samples, strips or tiles, any codec libtiff has;
 *         float samples are kept as stored (values above 1 stay);
 *   OpenEXR single-part scanline images (no tiles, deep data or multi-part),
 *         HALF or FLOAT channels sampled 1x1 (at most 8; UINT refused),
 *         compression NONE, RLE, ZIPS, ZIP, PIZ or PXR24 (B44 / DWA refused).
 *         The header and chunk offset table are checked by ckey before
 *         OpenEXR decodes. RGB takes R, G, B (else Y, else a lone channel);
 *         HINT takes A unless it is entirely >= 1, else Y, else B (else R,
 *         G). Values kept as stored (scene-linear: may exceed 1).
 * The kinds and the hint rule are those of the PNG reader. NaN or Inf in a
 * float TIFF or EXR is refused ("non-finite sample ... at x X, y Y, channel C"). Other formats fail
 * with CKEY_ERR_UNSUPPORTED ("x.bmp: unknown image format ...").
 */
ckey_status ckey_image_read(const char *path, ckey_image_kind kind, ckey_image *out,
                            ckey_error *err);

/* Free the pixels and zero the struct; NULL and empty images are fine. */
void ckey_image_free(ckey_image *img);

/*
 * Write `data` ([channels, height, width], values clamped to [0, 1], NaN as
 * 0, rounded to nearest) as a PNG: channels 1 (gray), 3 (RGB) or 4 (RGBA);
 * bit_depth 8 or 16. The file is written to "<path>.tmp", flushed to disk and
 * renamed over `path`, so `path` never names a partly written file; on failure
 * the temporary file is removed.
 */
ckey_status ckey_image_write_png(const char *path, const float *data, int32_t channels,
                                 int32_t width, int32_t height, int32_t bit_depth,
                                 ckey_error *err);

typedef enum {
    CKEY_EXR_PXR24 = 0, /* default: lossless for HALF, small for mattes */
    CKEY_EXR_ZIP = 1,
    CKEY_EXR_NONE = 2,
    CKEY_EXR_ZIP_FAST = 3 /* ZIP at zlib level 1: the same format as ZIP (any reader),
                             ~20% larger files, several times less CPU to write */
} ckey_exr_compression;

/*
 * Write `data` ([channels, height, width] float, values kept as given --
 * rounded to HALF, so beyond +-65504 they become Inf) as a single-part
 * scanline OpenEXR of HALF channels: 1 channel is written as "Y" (a matte
 * pass, named as OpenCV's cv2.imwrite names one channel, so upstream's Matte
 * and ckey's have the same layout; ckey_image_read takes a lone Y or A
 * channel as a hint alike), 3 as "R","G","B", 4 as "R","G","B","A". Atomic like
 * ckey_image_write_png: "<path>.tmp", fsync, rename; on failure the
 * temporary file is removed and the message names `path`.
 */
ckey_status ckey_image_write_exr(const char *path, const float *data, int32_t channels,
                                 int32_t width, int32_t height, ckey_exr_compression comp,
                                 ckey_error *err);


/* ================================================================= video
 * Video in and out through FFmpeg's libraries (libavformat, libavcodec,
 * libswscale; CK_HAVE_FFMPEG). Built without them, every call below fails
 * with CKEY_ERR_UNSUPPORTED.
 *
 * Reading: any video stream libavcodec decodes (H.264, HEVC, ProRes 422 /
 * 4444 at 10 or 12 bits with alpha, ...) in a mov/mp4, Matroska/WebM, AVI,
 * MXF, MPEG-TS or raw H.264/HEVC file. Frames come out as planar float32 in
 * [0, 1] at the stream's full bit depth, never through 8 bits: planar YUV,
 * RGB and gray formats (8 to 16 bits) are converted by ckey with the exact
 * formulas (chroma interpolated linearly at its sited position); others
 * (packed, semi-planar, palette, float) are first repacked by swscale into
 * the planar format of their family. The YUV matrix and range are the
 * stream's tags (per frame); an untagged stream is taken as BT.709 when it is
 * HD (width >= 1280 or height >= 720), else BT.601, and as limited range
 * unless its pixel format is a full-range (yuvj) one. Matrices: BT.709,
 * BT.601, FCC, SMPTE 240M, BT.2020 NCL; others are refused. The file is opened by ckey (no FFmpeg protocol
 * or URL is ever interpreted) and the demuxer may not open other files.
 * The image caps (CKEY_IMAGE_MAX_SIDE / _PIXELS) hold for the frame size, and
 * are given to the decoder before it allocates anything.
 *
 * FFmpeg prints its own warnings to stderr at its default level; it keeps
 * that level process-wide, so libckey never changes it: a program calls
 * ckey_video_set_log_level once at start-up (the ckey CLI: quiet unless
 * verbose).
 */

/* Most frames a clip may declare or a reader decode (12 h at 24 fps). */
#define CKEY_VIDEO_MAX_FRAMES ((int64_t)1 << 20)

typedef struct ckey_video_reader ckey_video_reader;

typedef struct ckey_video_info {
    int32_t width, height;
    int64_t frame_count;         /* frames the container declares; 0 when it does not say */
    int32_t rate_num, rate_den;  /* frame rate as a fraction (0/1 when unknown) */
    int32_t bit_depth;           /* bits per sample of the decoded format (8, 10, 12, 16, 32) */
    int32_t has_alpha;           /* the decoded format carries alpha */
    int32_t full_range;          /* YUV range applied: 1 full, 0 limited (1 for RGB formats) */
    char codec[32];              /* decoder: "h264", "hevc", "prores", ... */
    char pixel_format[32];       /* decoded format: "yuv420p", "yuva444p12le", ... */
    char color_matrix[32];       /* matrix applied: "bt709", "bt470bg" (BT.601), "bt2020nc",
                                    ..., "rgb" for RGB / gray formats */
} ckey_video_info;

/*
 * Open `path` and decode its first frame (so `info` describes real frames).
 * `threads`: decoder threads, 0 = FFmpeg's choice (all cores), 1 = none.
 * Errors name the file ("clip.mov: no video stream", "clip.mov: frame 0:
 * 40000 x 40000 exceeds the 32768-pixel side limit").
 */
ckey_status ckey_video_reader_open(const char *path, int32_t threads, ckey_video_reader **out,
                                   ckey_error *err);
void ckey_video_reader_free(ckey_video_reader *r);

/* Stream facts, from the first decoded frame and the container. */
ckey_status ckey_video_reader_get_info(const ckey_video_reader *r, ckey_video_info *info);

/*
 * Decode frame `index` (0-based) into `rgb` ([3, h, w]; may be NULL) and
 * `alpha` ([h, w]; 1 everywhere when the stream has none; may be NULL).
 * Frames are decoded in order: a later index decodes forward, an earlier one
 * rewinds to the start; asking for the frame last returned decodes nothing.
 * When the clip ends before `index`: with `eof` non-NULL, *eof = 1, CKEY_OK,
 * buffers untouched; with `eof` NULL, CKEY_ERR_INVALID_ARG. A clip ending
 * before the frame count its container declares is CKEY_ERR_FORMAT
 * ("truncated"), and so is a frame the decoder reports corrupt ("clip.mov:
 * frame 17: ..."). A frame whose size differs from the first is refused.
 */
ckey_status ckey_video_read_frame(ckey_video_reader *r, int64_t index, float *rgb, float *alpha,
                                  int32_t *eof, ckey_error *err);

/*
 * Frame `index` as an alpha hint, one channel [h, w], by the rule of
 * CKEY_IMAGE_HINT: the alpha channel when the frame has one that is not
 * entirely opaque, else the blue channel (gray for gray formats). Same
 * sequencing and errors as ckey_video_read_frame.
 */
ckey_status ckey_video_read_hint(ckey_video_reader *r, int64_t index, float *hint, int32_t *eof,
                                 ckey_error *err);

typedef enum ckey_video_codec {
    /* ProRes 4444 with alpha (prores_ks, yuva444p10le) in .mov / .mkv: the keyed
       foreground and its matte */
    CKEY_VIDEO_PRORES_4444 = 0,
    /* ProRes 422 HQ (prores_ks, yuv422p10le) in .mov / .mkv; no alpha */
    CKEY_VIDEO_PRORES_422HQ = 1,
    /* H.264 (libx264, yuv420p 8-bit, CRF 18) in .mp4 / .mov / .mkv: the comp
       preview; no alpha; width and height must be even */
    CKEY_VIDEO_H264 = 2
} ckey_video_codec;

typedef struct ckey_video_writer_options {
    ckey_video_codec codec;
    int32_t width, height;
    int32_t rate_num, rate_den;  /* frame rate, e.g. the reader's; 0/0 means 24/1 */
    int32_t threads;             /* encoder threads, 0 = FFmpeg's choice */
} ckey_video_writer_options;

typedef struct ckey_video_writer ckey_video_writer;

/*
 * Create a video file. The container comes from the extension of `path`
 * (.mov, .mp4, .mkv). Frames go to "<path>.tmp"; ckey_video_writer_close
 * finishes the file, flushes it to disk and renames it over `path`, so `path`
 * never names a partly written video. Colour: values are taken as sRGB-encoded
 * [0, 1] (clamped, NaN as 0), converted with the BT.709 matrix to limited
 * range YUV and tagged BT.709 (primaries, matrix) with the sRGB transfer.
 */
ckey_status ckey_video_writer_open(const char *path, const ckey_video_writer_options *o,
                                   ckey_video_writer **out, ckey_error *err);

/* Append one frame: rgb [3, h, w] (required) and alpha [h, w] (ProRes 4444
 * only; NULL = opaque; ignored by the codecs without alpha). */
ckey_status ckey_video_write_frame(ckey_video_writer *w, const float *rgb, const float *alpha,
                                   ckey_error *err);

/* Flush the encoder, finish the container and rename into place; frees `w`
 * whatever happens. On failure the temporary file is removed. */
ckey_status ckey_video_writer_close(ckey_video_writer *w, ckey_error *err);

/* Abandon a writer: removes the temporary file, leaves `path` untouched.
 * NULL is fine. */
void ckey_video_writer_free(ckey_video_writer *w);

/*
 * FFmpeg's own log output (process-wide, FFmpeg keeps one level):
 * verbose 0 silences it, 1 lets its warnings and errors through, 2 and more
 * adds its informational messages. Call once, before threads use video.
 */
void ckey_video_set_log_level(int32_t verbose);

/* ============================================================ post passes
 * The official per-frame post-processing after ckey_session_key (see
 * CorridorKey's _postprocess_opencv): optional despeckle of the matte
 * (connected components below an area threshold removed, then dilation 25
 * and blur 5), despill of the fg (strength 0..1), fg sRGB -> linear,
 * premultiply; and the preview comp over a 128 px checkerboard. The Matte/
 * and FG/ passes are the raw ckey_session_key outputs, unchanged.
 */
/*
 * The two upstream despeckle implementations (core/color_utils.py):
 *   OPENCV  clean_matte_opencv (`_postprocess_opencv`, the official CLI's
 *           default): alpha > 0.5, 8-connected components, ellipse dilation
 *           radius 25, 8-bit Gaussian blur 11 x 11;
 *   TORCH   clean_matte_torch (`_postprocess_torch`, `--gpu-post`): alpha >
 *           0.25, components joined across gaps (pixels within 4 px are
 *           neighbours) by area / 20 rounds of a 9 x 9 max-propagation of
 *           pseudo-random labels, square dilation radius 2 * (25 / 2) = 24,
 *           float Gaussian blur 11 x 11 (sigma 2, reflect border). Its
 *           labels are random upstream (torch.randperm); ckey uses a fixed
 *           pseudo-random permutation, so a component too large to be
 *           labelled within those rounds may split differently than in any
 *           one upstream run (upstream differs from run to run there too).
 */
typedef enum ckey_despeckle_mode {
    CKEY_DESPECKLE_OPENCV = 0,
    CKEY_DESPECKLE_TORCH = 1
} ckey_despeckle_mode;

typedef struct ckey_post_options {
    float despill_strength;   /* 0 .. 1; default 1, process_frame's (upstream's shot
                                 command defaults to 0.5: ckey_shot_options_default) */
    int32_t despeckle;        /* non-zero: clean the matte (official default on) */
    int64_t despeckle_area;   /* components smaller than this are removed; default 400 */
    int32_t despeckle_mode;   /* ckey_despeckle_mode; default OPENCV */
} ckey_post_options;

/* Fill `o` with the official defaults above. */
void ckey_post_options_default(ckey_post_options *o);

/* Bytes of `scratch` ckey_post_passes needs for this plate size (0 when
 * despeckle is off); SIZE_MAX when the arguments are invalid. */
size_t ckey_post_scratch_bytes(int32_t width, int32_t height, const ckey_post_options *o);

/*
 * alpha [h, w] (linear) and fg [3, h, w] (straight sRGB) as ckey_session_key
 * returned them. Writes `processed` [4, h, w] (linear premultiplied RGBA,
 * after despeckle and despill; required) and `comp` [3, h, w] (sRGB preview
 * over the checkerboard; NULL skips it). Outputs must not overlap the inputs.
 * `scratch` (aligned for int32_t, ckey_post_scratch_bytes bytes) may be NULL
 * when that size is 0. Allocates nothing.
 */
ckey_status ckey_post_passes(const float *alpha, const float *fg, int32_t width, int32_t height,
                             const ckey_post_options *o, float *processed, float *comp,
                             void *scratch, ckey_error *err);

/* ------------------------------------------------------- auto hint */

/*
 * A rough alpha hint from a green-screen plate alone (`--hint auto`): the
 * screen colour is estimated from the plate (median of its green-dominant
 * pixels), pixels with less than half the screen's green excess form the
 * foreground, which is eroded (by ~1% of the plate's short side) and blurred.
 * rgb [3, h, w] in [0, 1] (sRGB); hint [h, w]. `scratch` holds
 * ckey_auto_hint_scratch_bytes() bytes (float-aligned). Fails with
 * CKEY_ERR_INVALID_ARG when the plate has no green screen.
 */
size_t ckey_auto_hint_scratch_bytes(int32_t width, int32_t height);
ckey_status ckey_auto_hint(const float *rgb, int32_t width, int32_t height, float *hint, void *scratch,
                           ckey_error *err);

/* ================================================================= shots
 * Keying a whole shot: frames stream from a *source* (decode) through the
 * network to a *sink* (post-processing is done by the runner; the sink
 * encodes and writes), on three threads so the device never waits for file
 * I/O:
 *
 *   reader thread    source->read frame j+1, j+2 (+ auto hint), resize to S -> input ring
 *   calling thread   the network on frame j (ckey_session_forward)         -> output ring
 *   writer threads   resize back, ckey_post_passes + sink->write frames j-1, j-2, ...
 *                    (K of them, a frame each, in parallel); events, in order
 * (the steps of ckey_session_key, spread over the threads: the same results)
 *
 * Sources and sinks are tables of function pointers over an opaque `self`,
 * so a video reader / writer plugs in beside the image-sequence ones below.
 */

/* One frame of a source, as listed before anything is decoded. */
typedef struct ckey_shot_frame {
    int64_t number;          /* frame number (sequences: digits of the file name) */
    const char *stem;        /* output base name: "plate_0042" for plate_0042.png */
    const char *plate;       /* the plate's path (or "clip.mov#42"), for messages */
    const char *hint;        /* the hint's path, "auto", or NULL: this frame has no
                                hint (reading it fails; see ckey_shot_options.on_error) */
    int32_t plate_linear;    /* the source's guess: 1 for scene-linear plates (EXR) */
} ckey_shot_frame;

typedef struct ckey_source {
    void *self;
    int64_t count;                            /* frames, in playback order */
    const ckey_shot_frame *frames;            /* [count], valid until close */
    /*
     * Decode frame `index` into `plate` (CKEY_IMAGE_RGB layout, [3, h, w]) and
     * `hint` ([1, h, w]; leave hint->data NULL when the source makes no hint
     * and the runner should make one with ckey_auto_hint). Calls come from one
     * thread (the reader), with `index` strictly increasing; frames not asked
     * for need not be decoded (a video reader decodes and drops them). The
     * images arrive holding an earlier frame's pixels: a source may reuse
     * buffers of the right size (data is malloc'd; ckey_image_free frees it)
     * or free and replace them. Errors name the file and the frame.
     */
    ckey_status (*read)(void *self, int64_t index, ckey_image *plate, ckey_image *hint,
                        ckey_error *err);
    void (*close)(void *self);                /* frees self; NULL-safe via ckey_source_close */
    /* The plate's frame rate when it is a video (for video outputs); 0/0 when
     * unknown (image sequences). */
    int32_t rate_num, rate_den;
} ckey_source;

/* A keyed frame's passes as the sink receives them ([C, h, w] float planes). */
typedef struct ckey_shot_passes {
    int32_t width, height;
    const float *alpha;      /* [1, h, w] linear alpha, raw network output (Matte) */
    const float *fg;         /* [3, h, w] straight sRGB fg, raw network output (FG) */
    const float *processed;  /* [4, h, w] linear premultiplied RGBA (Processed) */
    const float *comp;       /* [3, h, w] sRGB preview over the checkerboard (Comp) */
} ckey_shot_passes;

typedef struct ckey_sink {
    void *self;
    /* Non-zero when `f` already has every output (resume skips it); may be
     * NULL for sinks that cannot resume (a video encoder). */
    int (*complete)(void *self, const ckey_shot_frame *f);
    /* Called once before the first write (create directories, open encoders). */
    ckey_status (*begin)(void *self, ckey_error *err);
    /* Write one frame. A failed write must leave no partial file under a
     * final name. With concurrent_write 0, calls come from one thread at a
     * time, in frame order; with concurrent_write non-zero, see below. */
    ckey_status (*write)(void *self, const ckey_shot_frame *f, const ckey_shot_passes *p,
                         ckey_error *err);
    /* Called once after the last frame of a run that did not fail (flush). */
    ckey_status (*finish)(void *self, ckey_error *err);
    void (*close)(void *self);
    /*
     * Opt-in to parallel writes (0, the default: write() is called one frame
     * at a time, in frame order). Non-zero: the runner's writer threads
     * (ckey_shot_options.writers) may call write() for several frames at
     * once and out of order, so write() must be thread-safe (no shared
     * mutable state across calls); then, in frame order and one at a time,
     * write_ordered() for each frame whose write() succeeded.
     */
    int32_t concurrent_write;
    /* Optional (may be NULL): the part of a frame's write that must see the
     * frames in order (a video encoder); called after write() succeeded for
     * that frame, one frame at a time, in frame order, whatever
     * concurrent_write says. A failure is the frame's write failure. */
    ckey_status (*write_ordered)(void *self, const ckey_shot_frame *f, const ckey_shot_passes *p,
                                 ckey_error *err);
} ckey_sink;

/*
 * An image-sequence source: the image files of `plate_dir` (*.png, *.jpg,
 * *.jpeg, *.tif, *.tiff, *.exr, any case) paired with those of `hint_dir` by
 * frame number (the last run of digits in the name); `hint_dir` NULL: every
 * frame's hint is made with ckey_auto_hint ("auto"). Fails (naming the file)
 * on a name without digits, two files with one frame number, a video file in
 * the directory (CKEY_ERR_UNSUPPORTED), or no frames at all. A plate without
 * a hint is listed with hint NULL. `warn` (may be NULL) hears about hints
 * without a plate.
 */
typedef void (*ckey_message_fn)(void *user, const char *message);
ckey_status ckey_source_open_sequence(const char *plate_dir, const char *hint_dir,
                                      ckey_message_fn warn, void *user, ckey_source *out,
                                      ckey_error *err);
void ckey_source_close(ckey_source *src);

/*
 * A shot with video in it (FFmpeg; CKEY_ERR_UNSUPPORTED without it):
 *   `plate`  a video file, or a directory of image frames, or a directory
 *            that holds exactly one video file and no image frames (the
 *            official clip layout: Input/ is frames or one video);
 *   `hint`   the same three forms, or NULL: every frame's hint is made with
 *            ckey_auto_hint ("auto").
 * With no video on either side this is ckey_source_open_sequence.
 *
 * A video's frames are numbered from 0 in decode order, and a plate video's
 * frames get the stems "00000", "00001", ... (5 digits, more past 99999), as
 * upstream names the frames it extracts from a video. Plates and hints pair by
 * frame number, whatever each side is: a plate video's frame k takes hint
 * video frame k, or the hint file whose frame number is k; a plate sequence's
 * frame n takes hint video frame n. A plate frame with no hint is listed with
 * hint NULL (as for sequences); hint frames without a plate are ignored.
 * `warn` hears about both: "frame counts differ: plate clip.mov has 5 frames,
 * hint hint.mov 3", "... hint frames have no plate; ignored".
 *
 * Frame counts come from the container's header; a clip whose container has
 * none (Matroska, raw H.264) is decoded once at open to count its frames. A
 * video plate is sRGB-encoded: frames[].plate_linear is 0. Labels name the
 * frame: frames[].plate "clip.mov#3", .hint "hint.mov#3". Decoding keeps the
 * video reader's checks (size caps before allocation, corrupt or truncated
 * data is an error naming the file and frame); once a video fails at frame
 * k, later frames of it fail at once (a decoder cannot pass the damage).
 * `decode_threads`: per video, 0 = FFmpeg's choice, 1 = none.
 * `src->rate_num / rate_den` are the plate video's frame rate.
 */
ckey_status ckey_source_open_video(const char *plate, const char *hint, int32_t decode_threads,
                                   ckey_message_fn warn, void *user, ckey_source *out,
                                   ckey_error *err);

/*
 * The official passes as files: OUT/Matte/<stem>.exr (Y), OUT/FG/<stem>.exr
 * (RGB), OUT/Processed/<stem>.exr (RGBA), all HALF with compression `comp`,
 * and OUT/Comp/<stem>.png (8-bit RGB, truncated as upstream's
 * `(clip(comp, 0, 1) * 255).astype(uint8)`: floor(255 c) in float32, NaN 0;
 * ckey_image_write_png rounds instead). Each file is written atomically
 * (ckey_image_write_*: "<path>.tmp", fsync, rename), so a frame whose four
 * files exist is complete. begin() creates the directories.
 */
ckey_status ckey_sink_open_passes(const char *out_dir, ckey_exr_compression comp, ckey_sink *out,
                                  ckey_error *err);
void ckey_sink_close(ckey_sink *sink);

/*
 * Video outputs beside the passes: a "tee" sink that hands every frame to
 * `inner` (e.g. ckey_sink_open_passes) and then encodes it into up to two
 * videos (FFmpeg; CKEY_ERR_UNSUPPORTED without it):
 *   fg_alpha  ProRes 4444 (.mov / .mkv), for compositing: RGB the straight
 *             foreground, despilled, in sRGB (= the Processed pass
 *             un-premultiplied and encoded back to sRGB; the despill is
 *             applied to the FG pass with `despill_strength`, so it is
 *             defined where the matte is 0 too), alpha the Processed pass's
 *             alpha (the despeckled linear matte); 10 bits each;
 *   comp      H.264 (.mp4 / .mov / .mkv): the Comp preview pass, 8-bit 4:2:0,
 *             which needs an even width and height: an odd one is padded
 *             by one pixel, the last column / row repeated (the video is
 *             then one pixel wider / taller than the plate).
 * Encoders open at the first frame, at its size (a later frame of another
 * size is an error). The videos are written to "<path>.tmp" and renamed into
 * place by finish(); a run that fails or is closed without finish() leaves no
 * file under either name. A video cannot resume: the tee's `complete` is
 * NULL, and the frames it gets are the video's frames, in order, so a caller
 * keys every frame of the source (no gaps) for a whole video.
 * On success the tee owns `inner` (closing the tee closes it) and *inner is
 * zeroed; on failure *inner is untouched.
 */
typedef struct ckey_video_tee_options {
    const char *fg_alpha;        /* path of the ProRes 4444 video, or NULL */
    const char *comp;            /* path of the H.264 video, or NULL */
    int32_t rate_num, rate_den;  /* frame rate; 0/0 = 24/1 (an image sequence has none:
                                    `ckey key --fps` sets it) */
    float despill_strength;      /* the run's (ckey_post_options.despill_strength) */
    int32_t threads;             /* encoder threads, 0 = FFmpeg's choice */
} ckey_video_tee_options;

ckey_status ckey_sink_open_video_tee(ckey_sink *inner, const ckey_video_tee_options *o,
                                     ckey_sink *out, ckey_error *err);

/* What to do with each source frame (ckey_shot_run's `plan`). */
enum { CKEY_SHOT_EXCLUDE = 0, CKEY_SHOT_SKIP = 1, CKEY_SHOT_KEY = 2 };

typedef enum ckey_shot_on_error {
    CKEY_ON_ERROR_STOP = 0,  /* the first bad frame ends the run (default) */
    CKEY_ON_ERROR_SKIP = 1   /* a frame whose input cannot be used (unreadable, corrupt,
                                no hint, too large) is reported and
                                skipped; output and device errors still stop */
} ckey_shot_on_error;

/*
 * How the runner takes each plate's colour (ckey_shot_options.input_space).
 * Upstream's shot command reads an EXR plate as linear either way
 * (backend/frame_io.py read_image_frame); its default (`--srgb`,
 * InferenceSettings.input_is_linear = False) converts it to sRGB as it is
 * read, before the resize, and `--linear` converts after the resize
 * (process_frame(input_is_linear=True)).
 */
typedef enum ckey_input_space {
    CKEY_INPUT_AUTO = 0,           /* plate_linear frames (EXR) LINEAR_AT_READ, others SRGB:
                                      upstream's default */
    CKEY_INPUT_SRGB = 1,           /* every plate is sRGB-encoded: no conversion */
    CKEY_INPUT_LINEAR = 2,         /* linear, converted to sRGB after the resize to S
                                      (ckey_frame.input_is_linear; upstream's --linear) */
    CKEY_INPUT_LINEAR_AT_READ = 3  /* linear, converted to sRGB (ckey_linear_to_srgb) at
                                      full size before the resize */
} ckey_input_space;

/* Polled by the runner; non-zero asks it to stop (e.g. a signal handler's flag). */
typedef int (*ckey_cancel_fn)(void *user);

typedef struct ckey_shot_options {
    /* ckey_shot_options_default: as upstream's shot command (clip_manager
     * InferenceSettings), so despill_strength 0.5, not ckey_post_options_default's
     * 1.0 (process_frame's default) */
    ckey_post_options post;
    int32_t input_space;     /* ckey_input_space; default AUTO */
    ckey_shot_on_error on_error;
    int32_t read_ahead;      /* frames decoded ahead of the one being keyed: 1..8,
                                default 2; 0 runs every stage on the calling thread */
    int32_t writers;         /* writer threads, 0..64: each resizes back, post-processes
                                and writes whole frames, frame w, w + K, w + 2K, ...;
                                0 (default) = max(1, min(8, online CPUs - 2)); ignored
                                when read_ahead is 0 */
    /*
     * Optional. Polled before each frame is decoded and before each frame is
     * keyed; once it returns non-zero no new frame starts: the frames already
     * keyed (the one in flight included) are written, in order, and the run
     * returns CKEY_ERR_CANCELLED ("interrupted: ..."). No file is left half
     * written (every output is renamed into place whole), and a video sink is
     * not finished (its temporary file is removed at close). Called from the
     * reader thread and the calling thread: it must be thread-safe (reading
     * a volatile sig_atomic_t set by a signal handler is the intended use).
     */
    ckey_cancel_fn cancel;
    void *cancel_user;
} ckey_shot_options;

void ckey_shot_options_default(ckey_shot_options *o);

typedef enum ckey_shot_event_kind {
    CKEY_SHOT_KEYED = 0,     /* written */
    CKEY_SHOT_SKIPPED = 1,   /* plan said SKIP (outputs complete) */
    CKEY_SHOT_FAILED = 2,    /* skipped under CKEY_ON_ERROR_SKIP; `error` says why */
    CKEY_SHOT_WARNING = 3    /* about the frame that follows (its KEYED or FAILED event
                                comes next); `message` says what, e.g. a hint of
                                another size resized to the plate; counts unchanged */
} ckey_shot_event_kind;

typedef struct ckey_shot_event {
    ckey_shot_event_kind kind;
    int64_t index;                /* into source->frames */
    const ckey_shot_frame *frame;
    int32_t width, height;        /* KEYED */
    double seconds;               /* KEYED: read start to written */
    double model_seconds;         /* KEYED: in the network (ckey_session_forward) */
    const ckey_error *error;      /* FAILED */
    /* running totals, for progress */
    int64_t keyed, skipped, failed;
    double elapsed;               /* since ckey_shot_run began */
    double model_total;           /* sum of model_seconds so far */
    const char *message;          /* WARNING */
} ckey_shot_event;

/* Called for every frame of the plan that is not EXCLUDE, in frame order,
 * from one thread at a time (a writer thread when threaded). */
typedef void (*ckey_shot_event_fn)(void *user, const ckey_shot_event *ev);

typedef struct ckey_shot_stats {
    int64_t keyed, skipped, failed;
    double seconds;               /* wall time of the run (end to end) */
    double model_seconds;         /* total in the network (ckey_session_forward) */
    double read_seconds;          /* total in source->read (+ auto hint) */
    double write_seconds;         /* total in post-processing + sink->write */
} ckey_shot_stats;

/*
 * Key the frames of `src` whose `plan[i]` is CKEY_SHOT_KEY ([src->count]
 * entries; NULL: key every frame) with session `s`, writing to `sink`. Calls
 * sink->begin first when any frame is to be keyed. Per-frame buffers are
 * allocated for the first frame and reused (grown only for a larger plate);
 * the decoders allocate their own pixel buffers.
 * A hint whose size differs from its plate's is resized to the plate as
 * upstream's shot command does (cv2.resize INTER_LINEAR: bilinear, half-pixel
 * centres, no antialias, edges clamped), with a CKEY_SHOT_WARNING event for
 * that frame.
 * On a fatal error the frames before the failing one are still written (in
 * order), the stages stop, and the error names the frame and the file
 * ("frame 7: Input/plate_0007.png: truncated"). With several writers and a
 * concurrent_write sink, a few frames after the failing one may have been
 * written too (each file whole: resume sees them complete); they get no
 * event. `stats` (may be NULL) is filled on success and failure;
 * write_seconds sums the writer threads' time.
 */
ckey_status ckey_shot_run(ckey_session *s, ckey_source *src, ckey_sink *sink,
                          const uint8_t *plan, const ckey_shot_options *o,
                          ckey_shot_event_fn on_event, void *user, ckey_shot_stats *stats,
                          ckey_error *err);

#ifdef __cplusplus
}
#endif
#endif /* CKEY_H */
