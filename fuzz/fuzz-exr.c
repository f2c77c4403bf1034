/*
 * libFuzzer target for the OpenEXR reader (src/media/exr.c), through the
 * sniffing entry point ck_image_read_memory: any byte string must give either
 * an image within the caps or a clean error -- never a crash, a leak or a
 * read outside the buffer; the packed reader likewise, and where both decode,
 * its HALF samples are the float reader's. fuzz/replay.c supplies main() to replay the corpus
 * (fuzz/corpus/exr) without libFuzzer.
 */
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>

#include "ckey_media.h"
#include "core/dtype.h"
#include "media/image.h"
#include "probe-check.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    int32_t read_w = 0, read_h = 0; /* the plate reader's size, when it decodes */
    for (int kind = CKEY_IMAGE_RGB; kind <= CKEY_IMAGE_HINT; kind++) {
        ckey_image img;
        ckey_error err;
        ckey_status st = ck_image_read_exr_memory(data, size, "fuzz.exr", (ckey_image_kind)kind,
                                                   &img, &err);
        check_decoded(st, &img, &err, (ckey_image_kind)kind, 0, &read_w, &read_h);
        ckey_packed_image pk = {0};
        ckey_error perr;
        const ckey_status pst = ck_image_read_exr_packed_memory(data, size, "fuzz.exr", (ckey_image_kind)kind, &pk,
                                                                &perr);
        if (pst != CKEY_OK && !perr.message[0]) abort();
        if (pst == CKEY_OK && st == CKEY_OK) {
            if (pk.width != img.width || pk.height != img.height) abort();
            const size_t n = (size_t)img.width * (size_t)img.height, C = (size_t)pk.channels;
            for (int c = 0; c < img.channels; c++) {
                const size_t ch = kind == CKEY_IMAGE_RGB ? (size_t)c : (size_t)pk.hint_channel;
                if (ch >= C) abort();
                for (size_t i = 0; i < n; i++)
                    if (ck_f16_to_f32(((const uint16_t *)pk.data)[i * C + ch]) != img.data[(size_t)c * n + i]) abort();
            }
        }
        /* a FLOAT channel is the only decodable file it leaves to the float reader */
        if (pst == CKEY_OK && st != CKEY_OK) abort();
        ckey_packed_image_free(&pk);
        ckey_image_free(&img);
        /* the dispatcher must agree */
        st = ck_image_read_memory(data, size, "fuzz.exr", (ckey_image_kind)kind, &img, &err);
        if (st != CKEY_OK && (img.data || !err.message[0])) abort();
        ckey_image_free(&img);
    }
    check_probe(data, size, "fuzz.exr", read_w, read_h);
    return 0;
}
