/*
 * Shared by the image fuzz targets: the header probe (ckey_image_probe, on a
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

#endif
