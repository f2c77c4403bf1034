/*
 * libFuzzer target for the video reader (src/media/video.c) on a memory buffer
 * (ck_video_reader_open_memory: a custom AVIOContext, the demuxer whitelist,
 * the size and frame caps, ckey's own YUV -> RGB path and the swscale
 * fallback): any byte string must give frames within the caps or a clean
 * error -- never a crash, a leak or a read outside the buffer. The frame-size
 * cap is lowered to 2^20 pixels and at most 8 frames are decoded, so one
 * input stays small and fast. fuzz/replay.c supplies main() to replay the
 * corpus (fuzz/corpus/video) without libFuzzer.
 */
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "ckey_media.h"
#include "media/video.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static int once;

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    if (!once) {
        ckey_video_set_log_level(0);
        once = 1;
    }
    ckey_video_reader *r = NULL;
    ckey_error err;
    memset(&err, 0, sizeof err);
    ckey_status st = ck_video_reader_open_memory(data, size, "fuzz.mov", 1, (int64_t)1 << 20, &r, &err);
    if (st != CKEY_OK) {
        if (r || !err.message[0]) abort();
        return 0;
    }
    ckey_video_info in;
    if (ckey_video_reader_get_info(r, &in) != CKEY_OK || in.width < 1 || in.height < 1 ||
        (int64_t)in.width * in.height > ((int64_t)1 << 20) || in.bit_depth < 1)
        abort();
    const size_t plane = (size_t)in.width * (size_t)in.height;
    float *rgb = malloc(3 * plane * sizeof(float)), *alpha = malloc(plane * sizeof(float));
    if (rgb && alpha) {
        for (int64_t f = 0; f < 8; f++) {
            int32_t eof = 0;
            st = (f & 1) ? ckey_video_read_hint(r, f, alpha, &eof, &err)
                         : ckey_video_read_frame(r, f, rgb, alpha, &eof, &err);
            if (st != CKEY_OK) {
                if (!err.message[0]) abort();
                break;
            }
            if (eof) break;
            /* every value a reader returns lies in [0, 1] */
            for (size_t i = 0; i < plane; i++)
                if (!(alpha[i] >= 0.0f && alpha[i] <= 1.0f)) abort();
            if (!(f & 1))
                for (size_t i = 0; i < 3 * plane; i++)
                    if (!(rgb[i] >= 0.0f && rgb[i] <= 1.0f)) abort();
        }
        /* back to the start after whatever happened */
        (void)ckey_video_read_frame(r, 0, rgb, NULL, NULL, &err);
    }
    free(rgb);
    free(alpha);
    ckey_video_reader_free(r);
    return 0;
}
