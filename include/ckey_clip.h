/*
 * ckey_clip.h -- after the network: the official post passes, the auto hint, and keying a
 * whole shot from a source to a sink (part of libckey's public API).
 */
#ifndef CKEY_CLIP_H
#define CKEY_CLIP_H

#include "ckey_media.h"

#ifdef __cplusplus
extern "C" {
#endif

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
    ckey_despeckle_mode despeckle_mode; /* default OPENCV */
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
 * encodes and writes), on several threads so the device never waits for
 * file I/O:
 *
 *   reader threads   source->read frames j+1, j+2, ... (+ auto hint), resize to S
 *                    (R of them, a frame each, in parallel)              -> input ring
 *   calling thread   the network on frame j (ckey_session_forward)         -> output ring
 *   writer threads   resize back, ckey_post_passes + sink->write frames j-1, j-2, ...
 *                    (K of them, a frame each, in parallel); events, in order
 * and within a frame the resizes, the post passes and the sink's encoding
 * split over one pool of threads (ckey_shot_options.threads). On a GPU the
 * device frame path (ckey_shot_options.frame_path) moves the resizes and the
 * post passes to the calling thread's device: the readers only decode, the
 * writers only write.
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
     * and the runner should make one with ckey_auto_hint). Calls never
     * overlap (unless concurrent_read, below) and come with `index` strictly
     * increasing, though from any of the reader threads; frames not asked
     * for need not be decoded (a video reader decodes and drops them). The
     * images arrive holding the same reader's earlier frame: a source may
     * decode into their pixels when the block is large enough (data is
     * malloc'd, `capacity` floats; ckey_image_free frees it) or free and
     * replace them. Errors name the file and the frame.
     */
    ckey_status (*read)(void *self, int64_t index, ckey_image *plate, ckey_image *hint,
                        ckey_error *err);
    void (*close)(void *self);                /* frees self; NULL-safe via ckey_source_close */
    /* The plate's frame rate when it is a video (for video outputs); 0/0 when
     * unknown (image sequences). */
    int32_t rate_num, rate_den;
    /*
     * Optional (NULL: a plate's size is known once it is decoded). The size
     * of frame `index`'s plate without decoding its pixels (an image file's
     * header, ckey_image_probe; a video's stream), so that a run's memory can
     * be planned up front (ckey_source_plate_size). Called from one thread,
     * before or between reads.
     */
    ckey_status (*probe)(void *self, int64_t index, int32_t *width, int32_t *height, ckey_error *err);
    /* How many videos the source decodes (0 for image files; 1 or 2: a plate
     * and / or hint video), for the memory plan (ckey_run_options.video_in). */
    int32_t videos;
    /*
     * Opt-in to parallel reads (0, the default: read() as above). Non-zero:
     * the runner's reader threads (ckey_shot_options.readers) may call
     * read() for several frames at once, each thread with its own images
     * and increasing indices, so read() must be thread-safe (no shared
     * mutable state across calls). An image sequence's source does; a
     * video's decodes forward and does not.
     */
    int32_t concurrent_read;
    /*
     * Optional (NULL: none). read() into packed images (ckey_image_read_packed:
     * the files' own samples), for the device frame path, which uploads them
     * as they are (page-locked: the runner sets their allocator) and converts
     * them there. Called as read() is, in its place; CKEY_ERR_UNSUPPORTED for
     * a frame it does not read so (a format without a packed form, a hint to
     * be made from the plate), and the runner then calls read() for it.
     */
    ckey_status (*read_packed)(void *self, int64_t index, ckey_packed_image *plate, ckey_packed_image *hint,
                               ckey_error *err);
    /*
     * Optional (NULL: no frame is). Non-zero when read_packed takes frame
     * `index` by what the source knows before reading it (an image
     * sequence: a PNG or EXR plate with a PNG or EXR hint file), so that the
     * frame path can be chosen up front (ckey_shot_frame_path); the files
     * still decide (a FLOAT EXR goes to read()).
     */
    int32_t (*packed_frame)(void *self, int64_t index);
} ckey_source;

/* Worker threads (opaque): the runner's, which it lends to a sink's write
 * (ckey_shot_passes.pool) and libckey's own sinks spread their encoding
 * over. */
typedef struct ck_pool ckey_pool;

/*
 * A keyed frame's passes as the sink receives them: [C, h, w] float planes,
 * or, for a sink with stored_passes on the device frame path, the samples
 * the pass files store (the *_half and comp_u8 planes below; the floats are
 * then NULL). Either set is complete; the other is all NULL.
 */
typedef struct ckey_shot_passes {
    int32_t width, height;
    const float *alpha;      /* [1, h, w] linear alpha, raw network output (Matte) */
    const float *fg;         /* [3, h, w] straight sRGB fg, raw network output (FG) */
    const float *processed;  /* [4, h, w] linear premultiplied RGBA (Processed) */
    const float *comp;       /* [3, h, w] sRGB preview over the checkerboard (Comp) */
    ckey_pool *pool;         /* the runner's threads during this call; may be NULL;
                                a sink of another library ignores it */
    double *io_seconds;      /* may be NULL; else a sink that can tell adds the part of
                                this write() call's time that went to file I/O (writes,
                                fsync, rename), the rest being encoding; with several
                                files written at once, the call's time times the I/O
                                share of the files' summed times. The runner counts it
                                as the stage "write", the rest as "encode" */
    /* The passes as the pass sink's files store them: alpha, fg and processed
     * rounded to HALF as OpenEXR rounds floats (Imath's float_to_half: to
     * nearest even, overflow to Inf, NaN kept), the comp truncated to 8 bits
     * as its PNG (ckey_sink_open_passes); [C, h, w] as the floats. */
    const uint16_t *alpha_half;
    const uint16_t *fg_half;
    const uint16_t *processed_half;
    const uint8_t *comp_u8;
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
     * that frame, with the same `f` pointer, one frame at a time, in frame
     * order, whatever concurrent_write says. A failure is the frame's write
     * failure. */
    ckey_status (*write_ordered)(void *self, const ckey_shot_frame *f, const ckey_shot_passes *p,
                                 ckey_error *err);
    /* Optional (may be NULL): the seconds spent on each pass so far --
     * encoding and writing the Matte, FG, Processed and Comp files, in that
     * order -- each summed over the frames (the passes sink has it; the video
     * tee gives its inner sink's). ckey_shot_run copies it into its stats. */
    void (*pass_seconds)(void *self, double seconds[4]);
    /*
     * Opt-in (0, the default: float passes only). Non-zero: write() and
     * write_ordered() also take the passes as the pass files store them
     * (ckey_shot_passes.*_half, comp_u8). The device frame path then converts
     * them on the GPU and downloads those alone (19 bytes a pixel instead of
     * 44); the host path still hands the floats.
     */
    int32_t stored_passes;
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
 * (ckey_image_write_*: ckey_temp_path, fsync, rename), so a frame whose four
 * files exist is complete, and processes that write one frame at once (a
 * farm task and its retry) never write one temporary file. begin() creates the directories.
 */
ckey_status ckey_sink_open_passes(const char *out_dir, ckey_exr_compression comp, ckey_sink *out,
                                  ckey_error *err);

/*
 * How the passes sink compresses (ckey_sink_open_passes_opt):
 *   exr             the three EXR passes (ckey_exr_options); default PXR24 at
 *                   deflate level 1, the fastest
 *   comp_png_level  the Comp PNG: CKEY_PNG_RLE (default), the fastest:
 *                   Up-filtered rows deflated by libdeflate at level 1 (a
 *                   build without libdeflate: as runs only, zlib's Z_RLE),
 *                   on grainy plates about the size of level 3; or zlib's
 *                   level 0 .. 9 with libpng's adaptive row filters (3 is
 *                   ckey_image_write_png's)
 * Every setting writes the same pixels. ckey_sink_open_passes(dir, comp) is
 * these defaults with that compression. With the runner's pool
 * (ckey_shot_passes.pool) a frame's four files are encoded at once, and each
 * EXR's chunks on the pool's threads.
 */
#define CKEY_PNG_RLE (-1)
typedef struct ckey_pass_options {
    ckey_exr_options exr;
    int32_t comp_png_level;
} ckey_pass_options;

void ckey_pass_options_default(ckey_pass_options *o);
ckey_status ckey_sink_open_passes_opt(const char *out_dir, const ckey_pass_options *o, ckey_sink *out,
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
 * Both are made from the passes as the pass sink's files store them: FG
 * and the Processed alpha rounded to HALF, the Comp truncated to 8 bits (as
 * its PNG), below what either video keeps; so the videos depend on the pass
 * files alone, and ckey_encode_videos writes the same bytes from the files.
 * The tee is concurrent (concurrent_write, whatever the inner sink's): its
 * write() codes the frame's ProRes (an intra-only codec: several frames at
 * once, each on an encoder of its own; not with `writers` 1) and writes the
 * inner sink's files when that sink is concurrent; write_ordered() writes
 * the ProRes packets in frame order (the file is the same bytes as one
 * encoder's either way), encodes the H.264 and calls an ordered inner
 * sink's write().
 * Encoders open at the size of the first frame to come (to write() when
 * the ProRes is coded there: with several writers, not always the first
 * in order); a frame of another size is an error in its write_ordered(). The videos are written to ckey_temp_path(path) and
 * renamed into place by finish(); a run that fails or is closed without
 * finish() leaves no file under either name. A video cannot resume: the
 * tee's `complete` is NULL, and the frames it gets are the video's frames,
 * in order, so a caller keys every frame of the source (no gaps) for a whole
 * video (or keys the passes, resuming as needed, then calls
 * ckey_encode_videos).
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
    int32_t writers;             /* the threads that call write() at once (a run's writers,
                                    ckey_run_memory.writers); 1: the ProRes is encoded in
                                    write_ordered() on one encoder whose own frame threads
                                    overlap frames (faster for a single caller); 0 (default)
                                    or more: coded in write(), several frames at once */
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

/*
 * Where a frame's plate-size work is done (ckey_shot_options.frame_path). The
 * device path uploads the decoded plate and hint, does the resize to S, the
 * network, the resize back and the post passes on the session's GPU and
 * downloads the four passes; the host path does them on the CPU threads. The
 * passes agree within float rounding (the post-processing bars).
 */
typedef enum ckey_frame_path {
    CKEY_FRAME_PATH_AUTO = 0,   /* ckey_shot_frame_path's choice */
    CKEY_FRAME_PATH_CPU = 1,    /* the host path */
    CKEY_FRAME_PATH_DEVICE = 2  /* the device path; CKEY_ERR_UNSUPPORTED where it has none */
} ckey_frame_path;


typedef struct ckey_shot_options {
    /* ckey_shot_options_default: as upstream's shot command (clip_manager
     * InferenceSettings), so despill_strength 0.5, not ckey_post_options_default's
     * 1.0 (process_frame's default) */
    ckey_post_options post;
    ckey_input_space input_space; /* default AUTO */
    ckey_shot_on_error on_error;
    int32_t read_ahead;      /* frames decoded ahead of the one being keyed: 1..8,
                                default 2; 0 runs every stage on the calling thread */
    int32_t writers;         /* writer threads, 0..64: each resizes back, post-processes
                                and writes whole frames, frame w, w + K, w + 2K, ...;
                                0 (default) = max(1, min(8, online CPUs - 2)); ignored
                                when read_ahead is 0 */
    int32_t readers;         /* reader threads, 0..16: each decodes and resizes whole
                                frames, r, r + R, r + 2R, ..., handed to the network in
                                order; 0 (default) = max(1, min(4, CPUs / 4)), on the
                                device frame path (its readers only decode) max(1,
                                min(8, 3 CPUs / 8)); more than 1 only with a
                                concurrent_read source; ignored when read_ahead is 0 */
    int32_t threads;         /* the pool the readers, the writers and the sink split each
                                frame's work over (resizes, post passes, EXR chunks): 0
                                (default) = a CPU session's own threads (no more threads
                                busy than the session's), on a GPU a pool of every CPU
                                this process may use; N > 0: a pool of N of its own.
                                The passes do not depend on it */
    ckey_frame_path frame_path;  /* default AUTO */
    int32_t device_frames;   /* the device frame path's frames in flight on a session,
                                0..8: each keyed on its own model thread, stream and
                                device buffers, so that one frame's transfers and
                                plate-size steps overlap the others' network; 0
                                (default) = 2; ignored on the host path and when
                                read_ahead is 0 */
    /*
     * Optional. Polled before each frame is decoded and before each frame is
     * keyed; once it returns non-zero no new frame starts: the frames already
     * keyed (the one in flight included) are written, in order, and the run
     * returns CKEY_ERR_CANCELLED ("interrupted: ..."). No file is left half
     * written (every output is renamed into place whole), and a video sink is
     * not finished (its temporary file is removed at close). Called from the
     * reader threads and the calling thread: it must be thread-safe (reading
     * a volatile sig_atomic_t set by a signal handler is the intended use).
     */
    ckey_cancel_fn cancel;
    void *cancel_user;
} ckey_shot_options;

/*
 * The frame path a run takes (CKEY_FRAME_PATH_CPU or _DEVICE) with sessions
 * on `device`, the frames of `src` whose plan[i] is CKEY_SHOT_KEY (plan NULL:
 * all) and options `o`, and why, in `why` ("" when not wanted): o->frame_path
 * when it is not AUTO; AUTO takes the device path on a CUDA device when the
 * post options have a device form (not the torch despeckle) and every frame
 * to key is one the device path uploads in its own samples
 * (ckey_source.packed_frame: PNG or HALF EXR plates and hint files), else
 * the host path. ckey_shot_run resolves AUTO so; a caller that plans the
 * run's memory may check that the chosen path's plan fits and ask for the
 * host path when it does not.
 */
ckey_frame_path ckey_shot_frame_path(ckey_device_kind device, const ckey_source *src, const uint8_t *plan,
                                     const ckey_shot_options *o, char *why, size_t cap);
/* "host", "device" ("auto" for AUTO). */
const char *ckey_frame_path_name(ckey_frame_path p);

void ckey_shot_options_default(ckey_shot_options *o);

typedef enum ckey_shot_event_kind {
    CKEY_SHOT_KEYED = 0,     /* written */
    CKEY_SHOT_SKIPPED = 1,   /* plan said SKIP (outputs complete) */
    CKEY_SHOT_FAILED = 2,    /* skipped under CKEY_ON_ERROR_SKIP; `error` says why */
    CKEY_SHOT_WARNING = 3    /* about the frame that follows (its KEYED or FAILED event
                                comes next); `message` says what, e.g. a hint of
                                another size resized to the plate; counts unchanged */
} ckey_shot_event_kind;

/*
 * Where a shot's time goes. Each frame passes the stages in this order; a
 * stage's busy time is the wall time its threads spent in it, summed over
 * the threads (a stage split over the pool counts once, from start to end).
 */
typedef enum ckey_shot_stage {
    CKEY_STAGE_READ = 0,   /* source->read: decoding the plate and the hint */
    CKEY_STAGE_PRE = 1,    /* input fixes (auto hint, hint resize, linear -> sRGB),
                              resize to S, normalize */
    CKEY_STAGE_UPLOAD = 2, /* host -> GPU: the network's input (host frame path) or
                              the plate and hint (device frame path); 0 on the CPU */
    CKEY_STAGE_NETWORK = 3, /* the network (launch and wait included) */
    CKEY_STAGE_DOWNLOAD = 4, /* GPU -> host: the network's output or the passes */
    CKEY_STAGE_BACK = 5,   /* resize back to the plate */
    CKEY_STAGE_POST = 6,   /* despeckle, despill, premultiply, comp */
    CKEY_STAGE_ENCODE = 7, /* the sink's write() (and write_ordered()) less its file I/O:
                              EXR / PNG compression, video encoding */
    CKEY_STAGE_WRITE = 8,  /* the sink's file I/O (ckey_shot_passes.io_seconds) */
    CKEY_SHOT_STAGES = 9
} ckey_shot_stage;

/* "read", "pre", "upload", "network", "download", "back", "post", "encode",
 * "write"; "?" out of range. */
const char *ckey_shot_stage_name(int stage);

/* The threads a shot's stages run on: the readers (read, pre), the model
 * threads (upload, network, download; on the device frame path also pre,
 * back and post), the writers (back, post, and encode / write of a
 * concurrent_write sink) and, one frame at a time in frame order, the
 * ordered writes (a sink without concurrent_write, write_ordered). */
typedef enum ckey_shot_group {
    CKEY_GROUP_READERS = 0,
    CKEY_GROUP_NETWORK = 1,
    CKEY_GROUP_WRITERS = 2,
    CKEY_GROUP_ORDERED = 3,
    CKEY_SHOT_GROUPS = 4
} ckey_shot_group;

/* "readers", "network", "writers", "ordered"; "?" out of range. */
const char *ckey_shot_group_name(int group);

/*
 * The busy time of a shot's stages so far, and the stage that bounds it.
 * A group's use is its stages' busy seconds over (elapsed x its threads):
 * 1 when every one of its threads was busy all along. The ordered part runs
 * on the writers' threads, so the writers' busy seconds include it (their
 * use is their threads'); the ordered group's own use (one frame at a time)
 * is 1 when that serial part alone fills the run. The bounding group
 * is the one with the highest use (a pipeline runs at the pace of its
 * busiest group: the others wait on it), and the bounding stage is the
 * stage with the most busy time in that group. The model threads' waits
 * tell the same from the network's side: waiting for a decoded frame (the
 * readers are behind) or for a free output slot (the writers are).
 */
typedef struct ckey_shot_load {
    double elapsed;                          /* wall seconds since the run began */
    double stage_seconds[CKEY_SHOT_STAGES];  /* busy seconds, summed over threads */
    int32_t threads[CKEY_SHOT_GROUPS];       /* threads in each group */
    double use[CKEY_SHOT_GROUPS];            /* busy / (elapsed x threads), 0..1 */
    double wait_input_seconds;               /* the model threads waiting for an input */
    double wait_output_seconds;              /* ... for a free output slot */
    double wait_turn_seconds;                /* the writers, done with a frame's heavy part,
                                                waiting for its turn (the frames before it
                                                written): a writer's slot stays held */
    int32_t bound;                           /* ckey_shot_stage; -1 before any time */
    int32_t bound_group;                     /* ckey_shot_group; -1 before any time */
} ckey_shot_load;

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
    int32_t session;              /* KEYED: which session keyed it (ckey_shot_run_multi's
                                     index; 0 with one session) */
    const ckey_shot_load *load;   /* KEYED: the stages' busy time so far (valid during
                                     the call) */
} ckey_shot_event;

/* Called for every frame of the plan that is not EXCLUDE, in frame order,
 * from one thread at a time (a writer thread when threaded). */
typedef void (*ckey_shot_event_fn)(void *user, const ckey_shot_event *ev);

typedef struct ckey_shot_stats {
    int64_t keyed, skipped, failed;
    double seconds;               /* wall time of the run (end to end) */
    double model_seconds;         /* total in the network (ckey_session_forward) */
    double read_seconds;          /* total in the readers: decode_seconds + pre_seconds */
    double write_seconds;         /* total in the writers: back + post + sink seconds */
    /* the stages, each the sum over frames of its time on its thread (a
     * stage split over the pool counts once, from start to end) */
    double decode_seconds;        /* source->read */
    double pre_seconds;           /* input fixes (auto hint, hint resize, linear -> sRGB),
                                     resize to S and normalization; on the device frame
                                     path also the model thread's upload and resize to S */
    double back_seconds;          /* resize back to the plate (host path) */
    double post_seconds;          /* ckey_post_passes; on the device frame path the model
                                     thread's resize back, post and download */
    double sink_seconds;          /* sink->write and write_ordered */
    double pass_seconds[4];       /* within sink_seconds, per pass (Matte, FG, Processed,
                                     Comp) when the sink tells (ckey_sink.pass_seconds) */
    ckey_shot_load load;          /* every stage's busy time and the bounding stage */
    ckey_frame_path frame_path;   /* the path the run took (CPU or DEVICE) */
} ckey_shot_stats;

/*
 * Key the frames of `src` whose `plan[i]` is CKEY_SHOT_KEY ([src->count]
 * entries; NULL: key every frame) with session `s`, writing to `sink`. Calls
 * sink->begin first when any frame is to be keyed. Per-frame buffers -- the
 * readers' images, which the source decodes into, the network's slots, the
 * writers' planes and every scratch -- are allocated for the first frames
 * and reused (grown only for a larger plate).
 * A hint whose size differs from its plate's is resized to the plate as
 * upstream's shot command does (cv2.resize INTER_LINEAR: bilinear, half-pixel
 * centres, no antialias, edges clamped), with a CKEY_SHOT_WARNING event for
 * that frame.
 * On a fatal error the frames before the failing one are still written (in
 * order), the stages stop, and the error names the frame and the file
 * ("frame 7: Input/plate_0007.png: truncated"). With several writers and a
 * concurrent_write sink, a few frames after the failing one may have been
 * written too (each file whole: resume sees them complete); they get no
 * event. `stats` (may be NULL) is filled on success and failure; the
 * stage times sum the threads' times.
 */
ckey_status ckey_shot_run(ckey_session *s, ckey_source *src, ckey_sink *sink,
                          const uint8_t *plan, const ckey_shot_options *o,
                          ckey_shot_event_fn on_event, void *user, ckey_shot_stats *stats,
                          ckey_error *err);

/* ================================================= the memory of a run
 * ckey_plan_memory plans a session: the network's weights and arena, the
 * same for every plate. A run also holds buffers that scale with the plate:
 * the decoded plate and hint, the resize scratch to S and back, alpha and fg
 * at plate size, the post passes, the encoders, and for a shot every frame
 * the runner keeps in flight. At 16384 x 16384 those are gigabytes next to a
 * few MiB of network. ckey_plan_run_memory plans the whole run from the
 * plate size, the session's options and the run's shape, so a caller can
 * refuse a plate before decoding it.
 */

typedef enum ckey_run_kind {
    CKEY_RUN_PLATE = 0, /* one plate through ckey_session_key, alpha and fg written as
                           16-bit PNGs (`ckey run`) */
    CKEY_RUN_SHOT = 1   /* frames through ckey_shot_run into the pass files
                           (ckey_sink_open_passes; `ckey key`) */
} ckey_run_kind;

/* ckey_run_options.video_out: the videos of ckey_sink_open_video_tee. */
enum { CKEY_RUN_VIDEO_PRORES = 1, CKEY_RUN_VIDEO_H264 = 2 };

typedef struct ckey_run_options {
    ckey_run_kind kind;       /* default CKEY_RUN_PLATE */
    int32_t width, height;    /* the plate; a shot's largest (ckey_source_plate_size) */
    int32_t auto_hint;        /* non-zero: hints are made from the plates (ckey_auto_hint) */
    int32_t video_in;         /* videos decoded, 0..2 (ckey_source.videos) */
    int32_t video_out;        /* CKEY_RUN_VIDEO_* bits (a shot with a video tee) */
    ckey_shot_options shot;   /* CKEY_RUN_SHOT: the options given to ckey_shot_run
                                 (read_ahead, writers, post); ckey_shot_options_default */
    int64_t host_limit;       /* bytes of host memory the run may take: 0 (default) = 90 % of
                                 what the machine has available now
                                 (ckey_host_memory_available); -1 = not checked */
    int32_t sessions;         /* CKEY_RUN_SHOT: sessions keying together (ckey_shot_run_multi),
                                 each with its own network and model copy; 0 or 1: one */
    int64_t track_bytes;      /* a Cutie tracker resident beside the keyer (hints tracked from
                                 a mask: ckey_source_tracked_memory's total_bytes); 0: none */
    int64_t track_device_bytes; /* what of track_bytes is device memory (a tracker on a GPU:
                                 its total_bytes - host_bytes), not counted in host_bytes */
} ckey_run_options;

/* Fill `o` with the defaults above (width and height 0: set them). */
void ckey_run_options_default(ckey_run_options *o);

/*
 * A run's memory, part by part. Figures are bytes; every part is held at
 * once at the run's peak, so the total is their sum. The plate parts are
 * exact for the buffers ckey allocates (the formulas below, with the same
 * *_scratch_bytes functions the run calls); the encoders' and video codecs'
 * own buffers are estimates. Not counted: the transient mapping of the
 * checkpoint while it loads, and the process's code and libraries.
 *
 * P = width x height, F = sizeof(float); a plate run (CKEY_RUN_PLATE) has one
 * frame in flight and no writer threads; a shot has nin = read_ahead + 1 in
 * slots, K writers and nout = K + 1 out slots (1, 1 and 1 with read_ahead 0).
 */
typedef struct ckey_run_memory {
    ckey_memory_plan session; /* the network: weights + arena, as ckey_plan_memory plans them
                                 (device memory on a GPU, host memory on the CPU) */
    int64_t model_bytes;      /* host memory of the loaded model beyond session.weight_bytes:
                                 the raw decoder copy kept for `convert`; on a GPU also the
                                 fp32 store the device's weights were made from */
    int64_t io_bytes;         /* [4, S, S] float transfer buffers outside the arena: a GPU
                                 session's page-locked input and output (2); a shot's ring
                                 slots (nin + nout) */
    int64_t decoded_bytes;    /* plates [3, h, w] and hints [h, w] as decoded, 4 P F per frame
                                 held (a plate run: 1; a shot: nin), plus each video decoder's
                                 frames (an estimate: 64 bytes a pixel per video); read as
                                 floats, each reader's plate + hint 16 bytes a pixel more (an
                                 estimate: a PNG's file and rows, which the reader keeps with
                                 the samples) */
    int64_t hint_bytes;       /* ckey_auto_hint's scratch when hints are made from plates */
    int64_t resize_bytes;     /* the resize scratch to S and back: a plate run's one session
                                 buffer of the larger of the two; a shot's reader scratch in
                                 plus each writer's scratch back */
    int64_t output_bytes;     /* alpha [h, w] + fg [3, h, w], 4 P F per frame held (1; a shot:
                                 nout); a shot's writers also Processed [4, h, w] + Comp
                                 [3, h, w], 7 P F each; on the device frame path the out
                                 slots alone, each the four passes as the pass files store
                                 them (HALF and 8-bit: 19 P) */
    int64_t post_bytes;       /* a shot's ckey_post_passes scratch, per writer */
    int64_t encode_bytes;     /* the file encoders (estimates): PNG rows and deflate state; a
                                 shot's EXR chunks and Comp PNG per writer (at the default
                                 CKEY_PNG_RLE with libdeflate the whole filtered image and
                                 its zlib stream, about 6 P); the video tee's frames and
                                 codecs */
    int64_t plate_bytes;      /* the parts that scale with the plate: decoded + hint + resize +
                                 output + post + encode */
    int64_t total_bytes;      /* session.peak_bytes + model + io + plate_bytes (+ device frame
                                 buffers + tracker) */
    int64_t host_bytes;       /* what of the total is host memory (all of it on the CPU;
                                 on a GPU all but session.peak_bytes) */
    int64_t host_limit;       /* what host_bytes was checked against; 0: not checked */
    int32_t frames_in_flight; /* plates held at once: 1, or a shot's nin + nout */
    int64_t device_frame_bytes; /* a shot on the device frame path (ckey_shot_options.frame_path):
                                 each session's plate-size device buffers (in total_bytes, not
                                 in host_bytes); 0 on the host path */
    int32_t writers;          /* a shot's writer threads K (resolved); 0 for a plate run */
    int64_t session_budget;   /* with so->memory_budget: what is left of it to each session
                                 after the other parts, the budget its schedule was chosen
                                 for (give it to ckey_session_create as memory_budget so the
                                 session runs the planned schedule); 0 without a budget */
    int64_t min_budget_bytes; /* the smallest budget this run fits: the other parts plus each
                                 session's leanest schedule */
    int64_t track_bytes;      /* ro->track_bytes: the tracker (its weights, memory bank,
                                 buffers, arena), in total_bytes; in host_bytes but for
                                 ro->track_device_bytes */
} ckey_run_memory;

/*
 * Plan the memory of a run with session options `so` (as ckey_session_create
 * takes them) of model `m` on plates of ro->width x ro->height. Fills `out`,
 * and then checks it: CKEY_ERR_BUDGET when total_bytes is over
 * so->memory_budget (non-zero), or host_bytes over ro->host_limit ("a 16384 x
 * 16384 plate at S = 2048 needs 12.3 GiB (network 2.63 GiB + model 7.3 MiB +
 * plate buffers 9.65 GiB), over the budget of 4.00 GiB"; "..., more than the
 * 7.1 GiB of host memory available (90 % of 7.9 GiB)"); `out` is filled in
 * either case. The caller prefixes the plate's file to the message.
 */
ckey_status ckey_plan_run_memory(const ckey_model *m, const ckey_session_options *so,
                                 const ckey_run_options *ro, ckey_run_memory *out, ckey_error *err);

/* A run's plan in one line, the parts that add up to r->total_bytes, as
 * ckey_plan_run_memory's messages write it: "network 5.8 MiB + model 94.5 KiB
 * + plate buffers 3.3 MiB" ("+ transfer buffers X" before the plate buffers
 * and "+ device frame buffers Y" after them when there are any), into
 * buf[cap]. */
void ckey_run_memory_parts(const ckey_run_memory *r, char *buf, size_t cap);

/*
 * The plate size to plan a run of `src` for: the largest plate, by pixel
 * count, of the frames `plan` keys (CKEY_SHOT_KEY; NULL: every frame), from
 * src->probe, so no pixel is decoded (a sequence: one header read a frame).
 * *index (may be NULL) is that frame's index in src->frames. Frames whose
 * size cannot be read are left out (their read fails in its turn, with the
 * reader's message). 0 x 0 and index -1 when none could be read or the
 * source has no probe.
 */
ckey_status ckey_source_plate_size(const ckey_source *src, const uint8_t *plan, int32_t *width,
                                   int32_t *height, int64_t *index, ckey_error *err);

/*
 * ckey_shot_run with several sessions keying in parallel, one model thread
 * each (the calling thread runs the first session): typically one session per GPU
 * of a host (`ckey key --device cuda:0,cuda:1`). Frames are handed out in
 * order, round robin (the j-th frame to key goes to sessions[j % n]), and
 * still decoded by one reader thread and written by the writers, with the
 * events in frame order. The sessions must be alike -- created from one
 * model with the same size, precision and options (a different size or
 * resize back is CKEY_ERR_INVALID_ARG) -- so that which session keys a frame
 * does not change its passes: on one kind of device and one thread count
 * each, the outputs are byte for byte those of a one-session run. Two
 * sessions may share a device (two CPU sessions, or two on one GPU).
 * `nsessions` is 1 to CKEY_SHOT_MAX_SESSIONS; the stats' model_seconds sum
 * every session's time in the network.
 */
#define CKEY_SHOT_MAX_SESSIONS 64
ckey_status ckey_shot_run_multi(ckey_session *const *sessions, int32_t nsessions, ckey_source *src,
                                ckey_sink *sink, const uint8_t *plan, const ckey_shot_options *o,
                                ckey_shot_event_fn on_event, void *user, ckey_shot_stats *stats,
                                ckey_error *err);

/*
 * The videos of a keyed clip made from its finished pass files (`ckey
 * encode`): the final step after a clip was keyed in chunks (`ckey key
 * --frames A-B` on several machines), which no chunk can write alone.
 * `frames[count]` are the clip's frames in order (a source's frames: their
 * stems name the files); for each, OUT/FG/<stem>.exr,
 * OUT/Processed/<stem>.exr and OUT/Comp/<stem>.png under `pass_dir` are read
 * back and encoded as ckey_sink_open_video_tee does (o->video: the paths,
 * rate, despill strength, encoder threads). The tee makes its videos from
 * the passes as their files store them, so these are byte for byte the
 * videos a one-run `ckey key --video-out` writes for the same passes. A
 * missing or unreadable pass fails naming the frame and the file (a caller
 * checks completeness first to list every missing frame); the videos are
 * written to temporary names and renamed into place only when every frame
 * is encoded.
 * The ProRes RGB is despill(FG) with o->video.despill_strength, which must be
 * the strength the clip was keyed with: each frame's Processed pass is
 * checked against it, and a clear mismatch (Processed not
 * srgb_to_linear(despill(FG)) * alpha within the HALF roundings) is
 * CKEY_ERR_INVALID_ARG naming the frame. Frames are read, checked and
 * their ProRes coded a few at once (2 to 4 threads), then written to the
 * videos in frame order; `cancel` is polled before each frame is written,
 * `progress` (may be NULL) hears after each, one call at a time, in frame
 * order.
 */
typedef void (*ckey_progress_fn)(void *user, int64_t done, int64_t total);

typedef struct ckey_encode_options {
    ckey_video_tee_options video;
    ckey_cancel_fn cancel;
    void *cancel_user;
    ckey_progress_fn progress;
    void *progress_user;
} ckey_encode_options;

ckey_status ckey_encode_videos(const char *pass_dir, const ckey_shot_frame *frames, int64_t count,
                               const ckey_encode_options *o, ckey_error *err);

/* ------------------------------------------------------- shot layout */

/* "dir/name" (malloc'd, free with free(); no second '/' when dir ends in
 * one), or NULL when out of memory. */
char *ckey_path_join(const char *dir, const char *name);

/* mkdir -p: create `dir` and its missing parents, as the pass sinks do.
 * CKEY_ERR_IO names the directory that could not be made. */
ckey_status ckey_make_dirs(const char *dir, ckey_error *err);

#ifdef __cplusplus
}
#endif
#endif /* CKEY_CLIP_H */
