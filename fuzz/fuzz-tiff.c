/*
 * libFuzzer target for the TIFF reader (src/media/image.c), through the
 * sniffing entry point ck_image_read_memory: any byte string must give either
 * an image within the caps or a clean error -- never a crash, a leak or a
 * read outside the buffer. fuzz/replay.c supplies main() to replay the corpus
 * (fuzz/corpus/tiff) without libFuzzer.
 */
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>

#include "ckey_media.h"
#include "media/image.h"
#include "probe-check.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    int32_t read_w = 0, read_h = 0; /* the plate reader's size, when it decodes */
    for (int kind = CKEY_IMAGE_RGB; kind <= CKEY_IMAGE_HINT; kind++) {
        ckey_image img;
        ckey_error err;
        ckey_status st = ck_image_read_tiff_memory(data, size, "fuzz.tif", (ckey_image_kind)kind,
                                                   &img, &err);
        check_decoded(st, &img, &err, (ckey_image_kind)kind, 0, &read_w, &read_h);
        ckey_image_free(&img);
        /* the dispatcher must agree */
        st = ck_image_read_memory(data, size, "fuzz.tif", (ckey_image_kind)kind, &img, &err);
        if (st != CKEY_OK && (img.data || !err.message[0])) abort();
        ckey_image_free(&img);
    }
    check_probe(data, size, "fuzz.tif", read_w, read_h);
    return 0;
}
