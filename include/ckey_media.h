/*
 * ckey_media.h -- image and video files in and out (part of libckey's public API).
 */
#ifndef CKEY_MEDIA_H
#define CKEY_MEDIA_H

#include <stdio.h>

#include "ckey.h"

#ifdef __cplusplus
extern "C" {
#endif

/*
 * The temporary name under which this library's writers (ckey_image_write_png,
 * ckey_image_write_exr, the video writer, the pass sink) build `path` before
 * renaming it into place, when called from the calling thread:
 * "<path>.ckey-<host>-<pid>-<tid>.tmp" (the host name, the process id and the
 * thread id). Unique among the writers running at one time on every host
 * that shares the file system, so two processes (two farm tasks, a task and
 * its retry) never write one temporary file, even when both write `path`;
 * whichever renames last wins, and each rename puts a whole file in place.
 * A killed writer leaves its temporary file behind: files named
 * "*.ckey-*.tmp" belong to no one once every writer of a directory has ended
 * (`ckey encode` removes those of a clip's passes; the image-sequence sink's
 * begin() removes those of this host's processes that no longer run). Malloc'd (free with
 * free()); NULL when out of memory.
 */
char *ckey_temp_path(const char *path);

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
    /* floats `data` holds, when the block is larger than channels x height x
     * width (0: exactly that). A source that decodes frame after frame into
     * the same image reuses a block large enough for the next frame
     * (ckey_source.read), so a clip of one size allocates its pixels once. */
    size_t capacity;
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
 * The file is opened once and read from start to end (the format is sniffed
 * from the same stream), so `path` may be a pipe or a FIFO (/dev/stdin, a
 * mkfifo file). A FIFO is opened without blocking, then waited on for its
 * first byte for at most 30 s: "x: no data after 30 s: no writer has opened
 * the FIFO, or it writes nothing" (CKEY_ERR_IO). ckey_image_read_png opens
 * its file the same way. A stream is read whole into memory for every
 * format but PNG (which is decoded as it is read), up to the most an image
 * within the limits below can take (8 GiB + 64 MiB).
 */
ckey_status ckey_image_read(const char *path, ckey_image_kind kind, ckey_image *out,
                            ckey_error *err);

/*
 * ckey_image_read on a stream the caller opened (stdin, say), from its
 * current position to the end of the image; `f` is not closed. `label`
 * stands for the file name in messages (NULL: "(stream)").
 */
ckey_status ckey_image_read_file(FILE *f, const char *label, ckey_image_kind kind, ckey_image *out,
                                 ckey_error *err);

/*
 * The size of the image in `path` from its header alone, without decoding a
 * pixel (PNG: IHDR; JPEG: the frame header; TIFF: the first directory's
 * width and length; OpenEXR: dataWindow), so that a caller can plan the
 * memory a plate will take (ckey_plan_run_memory) before reading it. Reads a
 * few hundred bytes and needs none of the codec libraries. A size over the
 * caps above is refused as the readers refuse it ("x.png: 40000 x 40000
 * exceeds the 32768-pixel side limit", CKEY_ERR_UNSUPPORTED). Only a regular
 * file can be probed: for a pipe, a FIFO or a device reading the header would
 * consume it, so that is CKEY_ERR_UNSUPPORTED ("not a regular file") and the
 * size is known once ckey_image_read has read it. A file the probe accepts
 * may still fail to decode; the readers stay the authority on its contents.
 */
ckey_status ckey_image_probe(const char *path, int32_t *width, int32_t *height, ckey_error *err);

/* Free the pixels and zero the struct; NULL and empty images are fine. */
void ckey_image_free(ckey_image *img);

/*
 * An image in its file's own sample type, pixels interleaved: what a GPU
 * uploads as it is (an 8-bit plate is a quarter of its floats) and converts
 * there. The samples, read as floats, are those of ckey_image_read: 8-bit
 * v / 255, 16-bit v / 65535, half as it is.
 */
typedef enum ckey_sample_type { CKEY_SAMPLE_U8 = 0, CKEY_SAMPLE_U16 = 1, CKEY_SAMPLE_F16 = 2 } ckey_sample_type;

typedef struct ckey_packed_image {
    int32_t width, height;
    int32_t channels;        /* samples a pixel: CKEY_IMAGE_RGB 3 or 4 (R, G, B [, A]:
                                gray is replicated, palettes expanded), CKEY_IMAGE_HINT 1..4 */
    ckey_sample_type type;
    int32_t hint_channel;    /* CKEY_IMAGE_HINT: the channel that is the hint, by
                                ckey_image_kind's rule; -1 for CKEY_IMAGE_RGB */
    void *data;              /* [height, width, channels], native byte order */
    size_t capacity;         /* bytes data holds; a read reuses it when large enough */
    /* How data is allocated and freed (set by the caller; NULL: malloc / free),
     * e.g. page-locked memory for a device's copies. */
    void *(*alloc)(void *user, size_t bytes);
    void (*release)(void *user, void *p);
    void *alloc_user;
} ckey_packed_image;

/*
 * Read a regular file into `img` as packed samples, reusing img->data when
 * it holds enough (else releasing it and allocating anew). PNG files (8 or
 * 16 bits) and OpenEXR files whose channels read are HALF are read so; any
 * other format (FLOAT EXR channels too), or a path that is not a regular
 * file, is CKEY_ERR_UNSUPPORTED before a pixel is decoded: read it with
 * ckey_image_read. Other errors as ckey_image_read's.
 */
ckey_status ckey_image_read_packed(const char *path, ckey_image_kind kind, ckey_packed_image *img,
                                   ckey_error *err);
/* Release img->data (with img->release) and zero the pixel fields; the
 * allocator stays. */
void ckey_packed_image_free(ckey_packed_image *img);

/*
 * Write `data` ([channels, height, width], values clamped to [0, 1], NaN as
 * 0, rounded to nearest) as a PNG: channels 1 (gray), 3 (RGB) or 4 (RGBA);
 * bit_depth 8 or 16. The file is written to ckey_temp_path(path), flushed to
 * disk and renamed over `path`, so `path` never names a partly written file; on failure
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
 * ckey_image_write_png: ckey_temp_path(path), fsync, rename; on failure the
 * temporary file is removed and the message names `path`.
 */
ckey_status ckey_image_write_exr(const char *path, const float *data, int32_t channels,
                                 int32_t width, int32_t height, ckey_exr_compression comp,
                                 ckey_error *err);

/*
 * How ckey_image_write_exr_opt (and the passes sink, ckey_pass_options)
 * compress. `level` is the deflate level of PXR24 and ZIP chunks:
 *   1 .. 12  libdeflate's level (1 the fastest; 6 is zlib's default and
 *            ckey_image_write_exr's; 12 the smallest)
 *   0        the compression's own default: 6, or 1 for CKEY_EXR_ZIP_FAST
 * Every level writes the same standard PXR24 / ZIP file, which any OpenEXR
 * reads to the same pixels; a lower level takes less CPU for a larger file.
 * Without libdeflate the chunks are deflated by OpenEXR's zlib at min(level, 9). Ignored for NONE.
 */
typedef struct ckey_exr_options {
    ckey_exr_compression compression;
    int32_t level;
} ckey_exr_options;

#define CKEY_EXR_LEVEL_MAX 12

/* ckey_image_write_exr with the options above (NULL: PXR24 at level 6,
 * ckey_image_write_exr's). */
ckey_status ckey_image_write_exr_opt(const char *path, const float *data, int32_t channels,
                                     int32_t width, int32_t height, const ckey_exr_options *o,
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
 * (.mov, .mp4, .mkv). Frames go to ckey_temp_path(path); ckey_video_writer_close
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

#ifdef __cplusplus
}
#endif
#endif /* CKEY_MEDIA_H */
