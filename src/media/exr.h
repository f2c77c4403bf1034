/*
 * The OpenEXR writer's internals (src/media/exr-write.c), for the passes
 * sink, the tests and the benchmarks.
 */
#ifndef CK_EXR_H
#define CK_EXR_H

#include <stddef.h>
#include <stdint.h>

#include "ckey_media.h"
#include "core/core.h"

/*
 * A writer that keeps its buffers from one image to the next (the encoded
 * chunks of a file, each thread's compressor and scratch): after the first
 * image of a size, writing allocates nothing but OpenEXR's own small header
 * and table blocks. One image at a time per writer; ck_exr_writer_new
 * returns NULL when out of memory.
 */
typedef struct ck_exr_writer ck_exr_writer;
ck_exr_writer *ck_exr_writer_new(void);
void ck_exr_writer_free(ck_exr_writer *w);

/*
 * ckey_image_write_exr_opt through `w` (NULL: a writer for this call only),
 * the chunks packed and compressed on `pool` (NULL: on the caller), then
 * written in order. The file's bytes do not depend on the pool.
 */
ckey_status ck_exr_write(ck_exr_writer *w, ck_pool *pool, const char *path, const float *data,
                         int32_t channels, int32_t width, int32_t height, const ckey_exr_options *o,
                         ckey_error *err);

/*
 * ck_exr_write of HALF samples (the bits ck_half_from_float makes, [C, h, w]
 * as the floats): stored as they are, so the file is ck_exr_write's of the
 * floats they were rounded from, byte for byte (the device frame path hands
 * the passes so, converted on the GPU).
 */
ckey_status ck_exr_write_half(ck_exr_writer *w, ck_pool *pool, const char *path, const uint16_t *data,
                              int32_t channels, int32_t width, int32_t height, const ckey_exr_options *o,
                              ckey_error *err);

/* The seconds the last ck_exr_write through `w` spent writing the file
 * (header and chunks, fsync, rename) after encoding its chunks; 0 when it
 * went through OpenEXR's own pipeline (encoding and writing interleaved). */
double ck_exr_writer_io_seconds(const ck_exr_writer *w);

/* The same image through OpenEXR's own encode pipeline and zlib
 * (zip_level: -1 for OpenEXR's default), one chunk after another: what the
 * tests compare the writer with. */
ckey_status ck_exr_write_openexr(const char *path, const float *data, int32_t channels, int32_t width,
                                 int32_t height, ckey_exr_compression comp, int32_t zip_level, ckey_error *err);
ckey_status ck_exr_write_openexr_half(const char *path, const uint16_t *data, int32_t channels, int32_t width,
                                      int32_t height, ckey_exr_compression comp, int32_t zip_level,
                                      ckey_error *err);

/* What deflates PXR24 / ZIP chunks at `level` (1 .. CKEY_EXR_LEVEL_MAX) in
 * this build: "libdeflate" or "zlib" (OpenEXR's). */
const char *ck_exr_deflater(int32_t level);

/* OpenEXR's float -> HALF conversion (Imath's imath_float_to_half: round to
 * nearest even, overflow to Inf, NaN kept NaN), F16C eight at a time where
 * the CPU has it. */
void ck_half_from_float(const float *in, uint16_t *out, size_t n);

#endif
