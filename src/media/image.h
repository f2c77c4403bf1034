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

/* The PNG encoder on an open stream, flushed but neither synced nor
 * closed; `label` names it in messages. A failed write reports the system's
 * reason ("write failed: No space left on device"). */
ckey_status ck_png_write_stream(FILE *f, const char *label, const float *data, int32_t channels,
                                int32_t width, int32_t height, int32_t bit_depth, ck_png_quantize q,
                                ckey_error *err);

/* ckey_image_write_png with the quantization chosen. */
ckey_status ck_image_write_png_q(const char *path, const float *data, int32_t channels,
                                 int32_t width, int32_t height, int32_t bit_depth,
                                 ck_png_quantize q, ckey_error *err);

/* ckey_image_read with the wait for a FIFO's writer bounded by timeout_ms
 * (ckey_image_read: CK_INPUT_TIMEOUT_MS). */
ckey_status ck_image_read_path(const char *path, ckey_image_kind kind, int timeout_ms, ckey_image *out,
                               ckey_error *err);

/* ckey_image_read on a buffer: sniffs and dispatches. */
ckey_status ck_image_read_memory(const void *data, size_t size, const char *label,
                                 ckey_image_kind kind, ckey_image *out, ckey_error *err);

#endif
