/*
 * Images (public API in ckey.h: ckey_image_read / _read_png / _write_png /
 * _free). This header adds the in-memory readers the fuzz targets drive.
 * PNG lives in image.c, JPEG / TIFF and the format sniffing in
 * media/image.c, OpenEXR in src/media/exr.c.
 */
#ifndef CK_IMAGE_H
#define CK_IMAGE_H

#include <stddef.h>
#include <stdio.h>

#include "ckey_media.h"
#include "ckey.h"
#include "core/quantize.h"

/* ckey_image_read_png on a buffer; `label` stands for the file name in
 * error messages. */
ckey_status ck_image_read_png_memory(const void *data, size_t size, const char *label,
                                     ckey_image_kind kind, ckey_image *out, ckey_error *err);

/* The PNG reader on an open stream (read to the PNG's end, not closed) whose
 * first nhead <= 8 bytes, already taken from it to sniff the format, are in
 * `head`: a pipe or a FIFO is read once. */
ckey_status ck_image_read_png_stream(FILE *f, const void *head, size_t nhead, const char *label,
                                     ckey_image_kind kind, ckey_image *out, ckey_error *err);

typedef enum ck_image_format {
    CK_IMAGE_UNKNOWN = 0,
    CK_IMAGE_PNG,
    CK_IMAGE_JPEG, /* FF D8 FF */
    CK_IMAGE_TIFF, /* II*\0 or MM\0* (and BigTIFF, version 43) */
    CK_IMAGE_EXR   /* 76 2F 31 01 */
} ck_image_format;

/* The format from the first bytes (8 are enough). */
ck_image_format ck_image_sniff(const void *data, size_t size);

/* The JPEG / TIFF readers on a buffer, same contract as the PNG one. Built
 * without libjpeg / libtiff they fail with CKEY_ERR_UNSUPPORTED. */
ckey_status ck_image_read_jpeg_memory(const void *data, size_t size, const char *label,
                                      ckey_image_kind kind, ckey_image *out, ckey_error *err);
ckey_status ck_image_read_tiff_memory(const void *data, size_t size, const char *label,
                                      ckey_image_kind kind, ckey_image *out, ckey_error *err);

/* The OpenEXR reader on a buffer (src/media/exr.c): the header and the
 * chunk offset table are vetted by ckey before OpenEXR sees the bytes. Built
 * without OpenEXR it fails with CKEY_ERR_UNSUPPORTED. */
ckey_status ck_image_read_exr_memory(const void *data, size_t size, const char *label,
                                     ckey_image_kind kind, ckey_image *out, ckey_error *err);

/* How ck_image_write_png_q maps [0, 1] to integers: ROUND to nearest
 * (ckey_image_write_png), or TRUNCATE as numpy's astype(uint8) after
 * `* 255.0` in float32 (upstream's Comp PNG). Both clamp; NaN is 0. */
typedef enum ck_png_quantize { CK_PNG_ROUND = 0, CK_PNG_TRUNCATE = 1 } ck_png_quantize;

/* ck_trunc_u8, CK_PNG_TRUNCATE at 8 bits: core/quantize.h */

/* An internal ckey_image_kind for OpenEXR files only: the four channels R,
 * G, B and A as stored ([4, h, w]), each required (a Processed pass). */
#define CK_IMAGE_RGBA ((ckey_image_kind)2)

/* The PNG encoder on an open stream, flushed but neither synced nor
 * closed; `label` names it in messages. A failed write reports the system's
 * reason ("write failed: No space left on device"). */
ckey_status ck_png_write_stream(FILE *f, const char *label, const float *data, int32_t channels,
                                int32_t width, int32_t height, int32_t bit_depth, ck_png_quantize q,
                                int level, ckey_error *err);

/* ckey_image_write_png with the quantization and the compression chosen:
 * `level` is zlib's 0 .. 9 with libpng's adaptive row filters
 * (ckey_image_write_png: 3), or CK_PNG_LEVEL_RLE, the fastest: every row
 * Up-filtered, then, where the build has libdeflate, the whole image deflated
 * by libdeflate at level 1 and written without libpng (about 2 times faster
 * than zlib's Z_RLE on a grainy 4K Comp, ~10% larger), else deflated as runs
 * only (zlib's Z_RLE) through libpng. CK_PNG_LEVEL_RLE_ZLIB, internal
 * (benchmarks, tests): the latter whatever the build. The same samples at
 * every level. */
#define CK_PNG_LEVEL_RLE (-1)
#define CK_PNG_LEVEL_RLE_ZLIB (-2)
ckey_status ck_image_write_png_q(const char *path, const float *data, int32_t channels,
                                 int32_t width, int32_t height, int32_t bit_depth,
                                 ck_png_quantize q, int level, ckey_error *err);
/* The same; *io_seconds (may be NULL) gets the time after encoding spent
 * flushing, syncing and renaming the file (the encoder's buffered writes
 * count as encoding). */
ckey_status ck_image_write_png_qt(const char *path, const float *data, int32_t channels,
                                  int32_t width, int32_t height, int32_t bit_depth,
                                  ck_png_quantize q, int level, double *io_seconds, ckey_error *err);
/* The same of 8-bit samples [C, h, w], written as they are: the file that
 * the floats they were quantized from (ck_trunc_u8 for CK_PNG_TRUNCATE) give
 * at bit depth 8, byte for byte (the device frame path's Comp). */
ckey_status ck_image_write_png_u8(const char *path, const uint8_t *data, int32_t channels, int32_t width,
                                  int32_t height, int level, double *io_seconds, ckey_error *err);
/* A PNG writer's buffers kept from image to image (CK_PNG_LEVEL_RLE with
 * libdeflate: the filtered image, its zlib stream and the compressor, about
 * twice the image's bytes): one image at a time per writer. The two calls
 * below are ck_image_write_png_qt and _u8 with them; pw NULL: buffers of the
 * call's own. */
typedef struct ck_png_writer ck_png_writer;
ck_png_writer *ck_png_writer_new(void);
void ck_png_writer_free(ck_png_writer *pw);
ckey_status ck_png_writer_write(ck_png_writer *pw, const char *path, const float *data, int32_t channels,
                                int32_t width, int32_t height, int32_t bit_depth, ck_png_quantize q, int level,
                                double *io_seconds, ckey_error *err);
ckey_status ck_png_writer_write_u8(ck_png_writer *pw, const char *path, const uint8_t *data, int32_t channels,
                                   int32_t width, int32_t height, int level, double *io_seconds, ckey_error *err);

/* ckey_image_read with the wait for a FIFO's writer bounded by timeout_ms
 * (ckey_image_read: CK_INPUT_TIMEOUT_MS). */
ckey_status ck_image_read_path(const char *path, ckey_image_kind kind, int timeout_ms, ckey_image *out,
                               ckey_error *err);

/* ckey_image_probe on a buffer (the fuzz targets); `label` names it in
 * messages. */
ckey_status ck_image_probe_memory(const void *data, size_t size, const char *label, int32_t *width,
                                  int32_t *height, ckey_error *err);
/*
 * The pixel block of one decode: the image's planes and, for a hint whose
 * alpha may turn out opaque, one more plane for the colour it then takes.
 * A reader that decodes frame after frame hands in its previous image's
 * block (reuse, reuse_floats), which a decode takes when it is large
 * enough: a clip of one size then allocates its pixels once.
 */
typedef struct ck_pixels {
    float *reuse;        /* the caller's block (it stays the caller's), or NULL */
    size_t reuse_floats;
    float *block;        /* the block of this decode */
    size_t floats;       /* its size */
} ck_pixels;

/* `floats` floats: the caller's block when it holds as many, else a new
 * one; NULL when out of memory. */
float *ck_pixels_take(ck_pixels *px, size_t floats);
/* After a failed decode: frees the block unless it is the caller's. */
void ck_pixels_drop(ck_pixels *px);

/* The decoders with a pixel block (see ck_pixels): what ck_image_read_reuse
 * runs; px NULL is a block of their own, as the forms without _px. */
ckey_status ck_image_read_png_stream_px(FILE *f, const void *head, size_t nhead, const char *label,
                                        ckey_image_kind kind, ck_pixels *px, ckey_image *out, ckey_error *err);
ckey_status ck_image_read_jpeg_memory_px(const void *data, size_t size, const char *label, ckey_image_kind kind,
                                         ck_pixels *px, ckey_image *out, ckey_error *err);
ckey_status ck_image_read_tiff_memory_px(const void *data, size_t size, const char *label, ckey_image_kind kind,
                                         ck_pixels *px, ckey_image *out, ckey_error *err);
ckey_status ck_image_read_exr_memory_px(const void *data, size_t size, const char *label, ckey_image_kind kind,
                                        ck_pixels *px, ckey_image *out, ckey_error *err);

/* pk's block holds at least bytes (its content not kept when it grows,
 * through pk's own allocator when it has one); 0 when out of memory. */
int ck_packed_reserve(ckey_packed_image *pk, size_t bytes);

/* ckey_image_read_packed's OpenEXR reader on a buffer: HALF channels only
 * (CKEY_ERR_UNSUPPORTED for a FLOAT one). */
ckey_status ck_image_read_exr_packed_memory(const void *data, size_t size, const char *label, ckey_image_kind kind,
                                            ckey_packed_image *pk, ckey_error *err);

/* ckey_image_read_packed's PNG reader on an open stream whose first nhead
 * bytes are in `head` (as ck_image_read_png_stream). */
ckey_status ck_image_read_png_packed_stream(FILE *f, const void *head, size_t nhead, const char *label,
                                            ckey_image_kind kind, ckey_packed_image *pk, ckey_error *err);

/*
 * A PNG in memory read by a chosen decoder (tests and benchmarks): CK_PNG_ANY
 * as every reader does (the fast path of src/media/png.c -- libdeflate, for
 * plain 8/16-bit images -- when it takes the file, else libpng),
 * CK_PNG_LIBPNG libpng only, CK_PNG_FAST the fast path only
 * (CKEY_ERR_UNSUPPORTED when it declines the file, or in a build without
 * libdeflate). The float read (into px's block as ck_image_read_png_stream_px;
 * px NULL: a new one) and the packed read.
 */
/* What a PNG plate and its hint add to their readers' reused blocks when
 * the fast path decodes them: each block holds, after the samples, the file
 * and its uncompressed rows -- for a grainy 16-bit RGB plate and a 16-bit
 * gray hint about 13 bytes a pixel together (bench/bench-png-decode's plate:
 * 6 + 4.6; the hint 2 + 0.5), rounded up. ckey_plan_run_memory counts it a
 * reader; packed samples with these stay within the floats they replace. */
#if defined(CK_HAVE_PNG) && defined(CK_HAVE_LIBDEFLATE)
#define CK_PNG_READ_BYTES_PER_PIXEL 16
#else
#define CK_PNG_READ_BYTES_PER_PIXEL 0
#endif
typedef enum ck_png_decoder { CK_PNG_ANY = 0, CK_PNG_LIBPNG = 1, CK_PNG_FAST = 2 } ck_png_decoder;
ckey_status ck_png_read_memory_with(const void *data, size_t size, const char *label, ckey_image_kind kind,
                                    ck_png_decoder decoder, ck_pixels *px, ckey_image *out, ckey_error *err);
ckey_status ck_png_read_packed_memory_with(const void *data, size_t size, const char *label, ckey_image_kind kind,
                                           ck_png_decoder decoder, ckey_packed_image *pk, ckey_error *err);

/*
 * ckey_image_read into `img`, which holds the previous frame (or nothing):
 * its block is reused when large enough (else freed and replaced), so
 * reading frame after frame of one size allocates no pixels after the first.
 * On failure `img` is freed and emptied.
 */
ckey_status ck_image_read_reuse(const char *path, ckey_image_kind kind, ckey_image *img, ckey_error *err);

/* ckey_image_read on a buffer: sniffs and dispatches. */
ckey_status ck_image_read_memory(const void *data, size_t size, const char *label,
                                 ckey_image_kind kind, ckey_image *out, ckey_error *err);

#endif
