/*
 * libFuzzer target for the PNG reader (src/media/png.c): any byte string must
 * give either an image within the caps or a clean error -- never a crash, a
 * leak or a read outside the buffer; the packed reader (ckey_image_read_packed's)
 * likewise, and where both decode, its samples are the float reader's; the
 * reader (its fast path where it takes the file) and libpng alone give the
 * same outcome. fuzz/replay.c supplies main() to replay
 * the corpus (fuzz/corpus/png) without libFuzzer.
 */
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "ckey_media.h"
#include "media/image.h"
#include "probe-check.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

/* The packed read of the same bytes; when `img` decoded too, the same samples. */
static void check_packed(const uint8_t *data, size_t size, ckey_image_kind kind, const ckey_image *img) {
    FILE *f = size ? fmemopen((void *)data, size, "rb") : NULL;
    if (!f) return;
    ckey_packed_image pk = {0};
    ckey_error err;
    const ckey_status st = ck_image_read_png_packed_stream(f, NULL, 0, "fuzz.png", kind, &pk, &err);
    fclose(f);
    if (st != CKEY_OK && !err.message[0]) abort();
    if (st == CKEY_OK && img) {
        if (pk.width != img->width || pk.height != img->height) abort();
        const size_t n = (size_t)img->width * (size_t)img->height, C = (size_t)pk.channels;
        for (int c = 0; c < img->channels; c++) {
            const size_t ch = kind == CKEY_IMAGE_RGB ? (size_t)c : (size_t)pk.hint_channel;
            if (ch >= C) abort();
            for (size_t i = 0; i < n; i++) {
                const float v = pk.type == CKEY_SAMPLE_U16 ? (float)((const uint16_t *)pk.data)[i * C + ch] / 65535.0f
                                                           : (float)((const uint8_t *)pk.data)[i * C + ch] / 255.0f;
                if (v != img->data[(size_t)c * n + i]) abort();
            }
        }
    }
    ckey_packed_image_free(&pk);
}

/* The reader takes its fast path (libdeflate) where it can: libpng alone
 * must give the same status, message and samples. */
static void check_libpng(const uint8_t *data, size_t size, ckey_image_kind kind, ckey_status st, const ckey_image *img,
                         const ckey_error *err) {
    ckey_image lib;
    ckey_error lerr;
    const ckey_status ls = ck_png_read_memory_with(data, size, "fuzz.png", kind, CK_PNG_LIBPNG, NULL, &lib, &lerr);
    if (ls != st) abort();
    if (st != CKEY_OK && strcmp(lerr.message, err->message) != 0) abort();
    if (st == CKEY_OK &&
        (lib.width != img->width || lib.height != img->height || lib.channels != img->channels ||
         lib.bit_depth != img->bit_depth || lib.has_alpha != img->has_alpha ||
         memcmp(lib.data, img->data, (size_t)img->channels * (size_t)img->width * (size_t)img->height * sizeof(float)) != 0))
        abort();
    ckey_image_free(&lib);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    int32_t read_w = 0, read_h = 0; /* the plate reader's size, when it decodes */
    for (int kind = CKEY_IMAGE_RGB; kind <= CKEY_IMAGE_HINT; kind++) {
        ckey_image img;
        ckey_error err;
        ckey_status st = ck_image_read_png_memory(data, size, "fuzz.png", (ckey_image_kind)kind,
                                                  &img, &err);
        check_libpng(data, size, (ckey_image_kind)kind, st, &img, &err);
        check_decoded(st, &img, &err, (ckey_image_kind)kind, 1, &read_w, &read_h);
        check_packed(data, size, (ckey_image_kind)kind, st == CKEY_OK ? &img : NULL);
        ckey_image_free(&img);
    }
    check_probe(data, size, "fuzz.png", read_w, read_h);
    return 0;
}
