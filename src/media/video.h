/*
 * Video (public API in ckey.h: ckey_video_*). This header adds the in-memory
 * reader the fuzz target drives; src/media/video.c implements both on FFmpeg.
 */
#ifndef CK_VIDEO_H
#define CK_VIDEO_H

#include <stddef.h>

#include "ckey_media.h"
#include "ckey.h"
#include "core/core.h"

/*
 * ckey_video_reader_open on a buffer, which must outlive the reader; `label`
 * stands for the file name in messages. `max_pixels` (<= CKEY_IMAGE_MAX_PIXELS;
 * 0 means that) lowers the frame-size cap, so a fuzzer can stay within its
 * memory limit.
 */
ckey_status ck_video_reader_open_memory(const void *data, size_t size, const char *label,
                                        int32_t threads, int64_t max_pixels,
                                        ckey_video_reader **out, ckey_error *err);

/*
 * Frame `index` as 16-bit samples in `pk` (its block reused when large
 * enough, through its allocator), for the device frame path: kind
 * CKEY_IMAGE_RGB R, G, B interleaved (3 channels); CKEY_IMAGE_HINT one
 * channel, the hint as ckey_video_read_hint takes it (hint_channel 0). Each
 * sample is round(65535 v) of the float v that ckey_video_read_frame /
 * ckey_video_read_hint gives for it. Positioning, *eof and errors as theirs.
 */
ckey_status ck_video_read_packed(ckey_video_reader *r, int64_t index, ckey_image_kind kind,
                                 ckey_packed_image *pk, int32_t *eof, ckey_error *err);

/* A reader converts a decoded frame on up to this many threads of its own
 * (half the online CPUs, fewer than 4 CPUs none; decoder threads 1: none). */
#define CK_VIDEO_CONVERT_THREADS 8

/* Set the reader's conversion threads (1 .. 64; tests: the frames are the
 * same bits on any number). */
ckey_status ck_video_reader_convert_threads(ckey_video_reader *r, int threads, ckey_error *err);

/*
 * ckey_video_write_frame with the RGB -> Y'CbCr conversion split by rows over
 * `pool` (may be NULL: the caller's thread); the same frame on any number of
 * threads. The encoder's own threads are FFmpeg's.
 */
ckey_status ck_video_write_frame_on(ckey_video_writer *w, ck_pool *pool, const float *rgb,
                                    const float *alpha, ckey_error *err);

/* Non-zero for a codec whose frames are coded each on its own (ProRes),
 * which a coded-mode writer takes. */
int ck_video_codec_intra(ckey_video_codec codec);

/*
 * A writer that codes frames apart from the muxer (an intra-only codec:
 * CKEY_VIDEO_PRORES_*; others are CKEY_ERR_INVALID_ARG). Any number of
 * threads may call ck_video_code_frame at once, each frame on an encoder
 * context of its own ("coders", made as calls overlap -- the first with
 * o->threads slice threads (0: one per core), the k-th with 1 / k of those
 * -- and reused); one thread at a time muxes them in frame order with
 * ck_video_mux_frame. ck_video_write_frame_on / ckey_video_write_frame code
 * and mux a frame at once. The file is byte for byte the one
 * ckey_video_writer_open's single encoder writes from the same frames.
 * Without FFmpeg: ckey_video_writer_open's error.
 */
ckey_status ck_video_writer_open_coded(const char *path, const ckey_video_writer_options *o,
                                       ckey_video_writer **out, ckey_error *err);

/* Convert a frame (RGB -> Y'CbCr split by rows over `pool`, may be NULL) and
 * code it, kept under `key` (not NULL; a frame of that key not yet muxed is
 * replaced) until ck_video_mux_frame. Thread-safe. */
ckey_status ck_video_code_frame(ckey_video_writer *w, const void *key, ck_pool *pool,
                                const float *rgb, const float *alpha, ckey_error *err);

/* Mux the frame coded under `key` as the video's next frame (*muxed = 1),
 * or nothing when no frame has that key (*muxed = 0). One call at a time,
 * not alongside ck_video_write_frame_on / ckey_video_writer_close. */
ckey_status ck_video_mux_frame(ckey_video_writer *w, const void *key, int *muxed, ckey_error *err);

#endif
