/*
 * Shared by the image fuzz targets. check_decoded: a reader's result is
 * either an image within the caps (3 channels for a plate, 1 for a hint;
 * samples in [0, 1] for the integer formats, any float for EXR and float
 * TIFF, every one touched) or a clean failure (no image, a message). The
 * header probe (ckey_image_probe, on a
 * buffer: ck_image_probe_memory) on the same bytes gives a size within the
 * caps or a clean error, never a crash or a read outside the buffer; where
 * the reader decoded the image too (read_w > 0), it gives the reader's size.
 */
#ifndef CK_FUZZ_PROBE_CHECK_H
#define CK_FUZZ_PROBE_CHECK_H

#include <stdint.h>
#include <stdlib.h>

#include "ckey_media.h"
#include "media/image.h"

static void check_probe(const uint8_t *data, size_t size, const char *label, int32_t read_w, int32_t read_h) {
    int32_t w = -1, h = -1;
    ckey_error err;
    err.message[0] = 0;
    if (ck_image_probe_memory(data, size, label, &w, &h, &err) == CKEY_OK) {
        if (w < 1 || h < 1 || w > CKEY_IMAGE_MAX_SIDE || h > CKEY_IMAGE_MAX_SIDE ||
            (int64_t)w * h > CKEY_IMAGE_MAX_PIXELS)
            abort();
        if (read_w > 0 && (w != read_w || h != read_h)) abort();
    } else if (w != 0 || h != 0 || !err.message[0]) {
        abort();
    }
}

/* `unit`: the format's samples are normalized integers, so each lies in [0, 1].
 * A plate's size is kept in *read_w / *read_h for check_probe. */
static void check_decoded(ckey_status st, const ckey_image *img, const ckey_error *err, ckey_image_kind kind, int unit,
                          int32_t *read_w, int32_t *read_h) {
    if (st != CKEY_OK) {
        if (img->data || !err->message[0]) abort(); /* failures leave the image empty and say why */
        return;
    }
    if (kind == CKEY_IMAGE_RGB) *read_w = img->width, *read_h = img->height;
    if (img->width < 1 || img->height < 1 || img->width > CKEY_IMAGE_MAX_SIDE || img->height > CKEY_IMAGE_MAX_SIDE ||
        img->channels != (kind == CKEY_IMAGE_RGB ? 3 : 1))
        abort();
    const size_t n = (size_t)img->channels * (size_t)img->width * (size_t)img->height;
    volatile float sink = 0.0f;
    for (size_t i = 0; i < n; i++) {
        if (unit && !(img->data[i] >= 0.0f && img->data[i] <= 1.0f)) abort();
        sink += img->data[i];
    }
    (void)sink;
}

#endif
