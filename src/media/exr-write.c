/*
 * OpenEXR writing: HALF scanline images (channels "Y" / "R","G","B" /
 * "R","G","B","A"; one channel is "Y" as OpenCV's cv2.imwrite names it, so a
 * Matte pass matches upstream's), written to ckey_temp_path(path) through a
 * write function on our own descriptor, fsynced and renamed into place.
 *
 * ckey encodes the chunks itself and hands OpenEXRCore the finished bytes
 * (exr_write_scanline_chunk), so that the chunks of an image, independent
 * in the format, are encoded on a thread pool; OpenEXRCore writes the
 * header, each chunk's line number and size, and the offset table, in
 * chunk order. A chunk's encoding is the format's, step for step as
 * OpenEXRCore's own pipeline does it: the floats rounded to HALF as
 * OpenEXR's pack does (Imath's float_to_half; HALF samples given as such,
 * ck_exr_write_half, are copied), the channels of each line in
 * the header's (alphabetical) order, little-endian; for PXR24 and ZIP the
 * format's byte transform, then a zlib stream; a chunk that would not shrink
 * is stored as it is. Only the deflate differs: libdeflate (levels 1 to
 * 12) instead of zlib, which compresses faster to a standard zlib stream,
 * so any reader sees an ordinary PXR24 / ZIP file. The deflate must give
 * the same bytes for the same chunk on every run and thread (passes are
 * compared byte for byte across runs, chunks of a farm job and resumes):
 * libdeflate does; ISA-L's igzip, faster still at level 1, does not (its
 * output for one chunk varied between runs of the same process).
 * With neither library the PXR24 / ZIP chunks go through OpenEXRCore's own
 * pipeline and zlib, one after another.
 *
 * Measured on a 4K three-channel FG pass, PXR24, one core of the 2-core
 * machine (docs/performance.md, bench/bench-exr-deflate.c): OpenEXR's writer
 * with zlib 3.2 s and 26.1 MB; libdeflate level 6 1.3 s and 26.3 MB, level 1
 * 0.43 s and 27.3 MB.
 */
#include <errno.h>
#include <fcntl.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "ckey_media.h"
#include "core/core.h"
#include "core/quantize.h"
#include "media/exr.h"

#ifdef CK_HAVE_EXR
#include <openexr.h>
#endif
#if defined(CK_HAVE_EXR) && defined(CK_HAVE_LIBDEFLATE)
#include <libdeflate.h>
#endif
#if defined(__x86_64__)
#include <immintrin.h>
#endif

#if __BYTE_ORDER__ != __ORDER_LITTLE_ENDIAN__
#error "the EXR writer stores HALF values in host order, which must be little-endian as the format"
#endif

/* -------------------------------------------------------- float -> HALF */

/* Imath's imath_float_to_half (core/quantize.h, which the device frame
 * path's conversion shares). */
static uint16_t half_of(float f) {
    uint32_t ui;
    memcpy(&ui, &f, sizeof ui);
    return ck_half_of_bits(ui);
}

#if defined(__x86_64__)
/* vcvtps2ph with round-to-nearest-even gives Imath's result for every float
 * but NaN (it sets the quiet bit where Imath keeps the payload): a group of
 * eight holding a NaN takes the scalar form. */
__attribute__((target("avx2,f16c"))) static void halves_f16c(const float *in, uint16_t *out, size_t n) {
    size_t i = 0;
    for (; i + 8 <= n; i += 8) {
        const __m256 v = _mm256_loadu_ps(in + i);
        if (_mm256_movemask_ps(_mm256_cmp_ps(v, v, _CMP_UNORD_Q))) {
            for (int k = 0; k < 8; k++) out[i + k] = half_of(in[i + k]);
        } else {
            _mm_storeu_si128((__m128i *)(void *)(out + i),
                             _mm256_cvtps_ph(v, _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC));
        }
    }
    for (; i < n; i++) out[i] = half_of(in[i]);
}
#endif

void ck_half_from_float(const float *in, uint16_t *out, size_t n) {
#if defined(__x86_64__)
    if (__builtin_cpu_supports("f16c") && __builtin_cpu_supports("avx2")) {
        halves_f16c(in, out, n);
        return;
    }
#endif
    for (size_t i = 0; i < n; i++) out[i] = half_of(in[i]);
}

#ifdef CK_HAVE_EXR /* the writer's helpers: without OpenEXR every entry refuses */
/* ------------------------------------------------------------ arguments */

static ckey_status check_args(const char *path, const void *data, int32_t channels, int32_t width,
                              int32_t height, const ckey_exr_options *o, ckey_error *err) {
    if (!path || !*path || !data)
        return ck_fail(err, CKEY_ERR_INVALID_ARG, "ckey_image_write_exr: %s",
                       !path || !*path ? "no path" : "no pixels");
    if (channels != 1 && channels != 3 && channels != 4)
        return ck_fail(err, CKEY_ERR_INVALID_ARG, "%s: cannot write %d channels (1, 3 or 4)", path, channels);
    if (width < 1 || height < 1 || width > CKEY_IMAGE_MAX_SIDE || height > CKEY_IMAGE_MAX_SIDE ||
        (int64_t)width * height > CKEY_IMAGE_MAX_PIXELS)
        return ck_fail(err, CKEY_ERR_INVALID_ARG, "%s: cannot write a %d x %d image", path, (int)width,
                       (int)height);
    if (o->compression != CKEY_EXR_PXR24 && o->compression != CKEY_EXR_ZIP && o->compression != CKEY_EXR_NONE &&
        o->compression != CKEY_EXR_ZIP_FAST)
        return ck_fail(err, CKEY_ERR_INVALID_ARG, "%s: unknown EXR compression %d", path, (int)o->compression);
    if (o->level < 0 || o->level > CKEY_EXR_LEVEL_MAX)
        return ck_fail(err, CKEY_ERR_INVALID_ARG, "%s: EXR deflate level %d is outside 0 .. %d", path,
                       (int)o->level, CKEY_EXR_LEVEL_MAX);
    return CKEY_OK;
}

/* The deflate level an option set means (see ckey_exr_options). */
static int effective_level(const ckey_exr_options *o) {
    return o->level > 0 ? o->level : o->compression == CKEY_EXR_ZIP_FAST ? 1 : 6;
}

enum { DEFLATE_ZLIB, DEFLATE_LIBDEFLATE };

static int deflater_for(int level) {
#ifdef CK_HAVE_LIBDEFLATE
    return DEFLATE_LIBDEFLATE;
#else
    (void)level;
    return DEFLATE_ZLIB;
#endif
}
#endif

const char *ck_exr_deflater(int32_t level) {
#ifndef CK_HAVE_EXR
    (void)level;
    return "none";
#else
    static const char *const names[] = {"zlib", "libdeflate"};
    return names[deflater_for(level)];
#endif
}

#ifndef CK_HAVE_EXR

ck_exr_writer *ck_exr_writer_new(void) { return calloc(1, 1); }
void ck_exr_writer_free(ck_exr_writer *w) { free(w); }
double ck_exr_writer_io_seconds(const ck_exr_writer *w) {
    (void)w;
    return 0;
}

ckey_status ck_exr_write(ck_exr_writer *w, ck_pool *pool, const char *path, const float *data,
                         int32_t channels, int32_t width, int32_t height, const ckey_exr_options *o,
                         ckey_error *err) {
    (void)w, (void)pool, (void)data, (void)channels, (void)width, (void)height, (void)o;
    return ck_fail(err, CKEY_ERR_UNSUPPORTED, "%s: ckey was built without OpenEXR", path ? path : "(null)");
}

ckey_status ck_exr_write_half(ck_exr_writer *w, ck_pool *pool, const char *path, const uint16_t *data,
                              int32_t channels, int32_t width, int32_t height, const ckey_exr_options *o,
                              ckey_error *err) {
    (void)w, (void)pool, (void)data, (void)channels, (void)width, (void)height, (void)o;
    return ck_fail(err, CKEY_ERR_UNSUPPORTED, "%s: ckey was built without OpenEXR", path ? path : "(null)");
}

ckey_status ck_exr_write_openexr(const char *path, const float *data, int32_t channels, int32_t width,
                                 int32_t height, ckey_exr_compression comp, int32_t zip_level, ckey_error *err) {
    (void)data, (void)channels, (void)width, (void)height, (void)comp, (void)zip_level;
    return ck_fail(err, CKEY_ERR_UNSUPPORTED, "%s: ckey was built without OpenEXR", path ? path : "(null)");
}

ckey_status ck_exr_write_openexr_half(const char *path, const uint16_t *data, int32_t channels, int32_t width,
                                      int32_t height, ckey_exr_compression comp, int32_t zip_level,
                                      ckey_error *err) {
    (void)data, (void)channels, (void)width, (void)height, (void)comp, (void)zip_level;
    return ck_fail(err, CKEY_ERR_UNSUPPORTED, "%s: ckey was built without OpenEXR", path ? path : "(null)");
}

#else

/* ------------------------------------------------------------- the file */

/* OpenEXR's messages go to the message box that starts the context's user
 * data, never to stderr. */
typedef struct exr_out {
    char msg[256]; /* first: on_error writes here */
    int fd;
    int io_errno;
} exr_out;

static void on_error(exr_const_context_t ctxt, exr_result_t code, const char *text) {
    void *ud = NULL;
    if (ctxt && exr_get_user_data(ctxt, &ud) == EXR_ERR_SUCCESS && ud && !((exr_out *)ud)->msg[0])
        snprintf(((exr_out *)ud)->msg, sizeof((exr_out *)0)->msg, "%s (%s)", text ? text : "error",
                 exr_get_error_code_as_string(code));
}

static int64_t out_write(exr_const_context_t ctxt, void *ud, const void *buf, uint64_t sz, uint64_t off,
                         exr_stream_error_func_ptr_t error_cb) {
    exr_out *s = ud;
    const unsigned char *p = buf;
    uint64_t done = 0;
    while (done < sz) {
        const ssize_t n = pwrite(s->fd, p + done, (size_t)(sz - done), (off_t)(off + done));
        if (n < 0 && errno == EINTR) continue;
        if (n <= 0) {
            s->io_errno = n < 0 ? errno : EIO;
            if (error_cb) error_cb(ctxt, EXR_ERR_WRITE_IO, "write failed: %s", strerror(s->io_errno));
            return -1;
        }
        done += (uint64_t)n;
    }
    return (int64_t)sz;
}

static const char *const channel_names[4][4] = {{"Y"}, {0}, {"R", "G", "B"}, {"R", "G", "B", "A"}};

/* Our planes in the file's channel order (the header sorts them by name:
 * A, B, G, R). */
static const int file_plane[5][4] = {{0}, {0}, {0}, {2, 1, 0}, {3, 2, 1, 0}};

/* The part's header: one scanline part, HALF channels. */
static exr_result_t add_part(exr_context_t ctx, int ch, int32_t width, int32_t height, exr_compression_t comp,
                             int zip_level) {
    int part = 0;
    exr_result_t rc = exr_add_part(ctx, "", EXR_STORAGE_SCANLINE, &part);
    if (!rc) rc = exr_initialize_required_attr_simple(ctx, part, width, height, comp);
    if (!rc && zip_level >= 0) rc = exr_set_zip_compression_level(ctx, part, zip_level);
    for (int c = 0; !rc && c < ch; c++)
        rc = exr_add_channel(ctx, part, channel_names[ch - 1][c], EXR_PIXEL_HALF, EXR_PERCEPTUALLY_LINEAR, 1, 1);
    return rc;
}

/* A function that writes the image's content into a started context. */
typedef ckey_status (*write_body_fn)(exr_context_t ctx, exr_out *s, void *arg);

/* ckey_temp_path(path) through a context, fsynced, renamed over `path`; on
 * failure the temporary file is removed and the message names `path`. `tmp`
 * holds the temporary name (replaced on each call: the name carries the
 * calling thread's id); tmp_cap is its buffer size. */
static ckey_status write_atomically(const char *path, char **tmp, size_t *tmp_cap, write_body_fn body, void *arg,
                                    ckey_error *err) {
    char *t = ckey_temp_path(path);
    if (!t) return ck_fail(err, CKEY_ERR_NOMEM, "%s: out of memory", path);
    free(*tmp);
    *tmp = t;
    *tmp_cap = strlen(t) + 1;
    exr_out s;
    memset(&s, 0, sizeof s);
    s.fd = open(*tmp, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0666);
    if (s.fd < 0) return ck_fail(err, CKEY_ERR_IO, "%s: cannot create %s: %s", path, *tmp, strerror(errno));
    exr_context_initializer_t init = EXR_DEFAULT_CONTEXT_INITIALIZER;
    init.error_handler_fn = on_error;
    init.user_data = &s;
    init.write_fn = out_write;
    exr_context_t ctx = NULL;
    ckey_status st = CKEY_OK;
    if (exr_start_write(&ctx, *tmp, EXR_WRITE_FILE_DIRECTLY, &init) != EXR_ERR_SUCCESS) {
        st = CKEY_ERR_INTERNAL;
        if (!s.msg[0]) snprintf(s.msg, sizeof s.msg, "OpenEXR refused to start");
    } else {
        st = body(ctx, &s, arg);
    }
    /* exr_finish writes what is left of the chunk offset table */
    if (ctx && exr_finish(&ctx) != EXR_ERR_SUCCESS && st == CKEY_OK) {
        st = s.io_errno ? CKEY_ERR_IO : CKEY_ERR_INTERNAL;
        if (!s.msg[0]) snprintf(s.msg, sizeof s.msg, "OpenEXR could not finish the file");
    }
    /* Only data that reached the disk may take the final name. */
    if (st == CKEY_OK && fsync(s.fd) != 0) {
        st = CKEY_ERR_IO;
        snprintf(s.msg, sizeof s.msg, "write failed: %s", strerror(errno));
    }
    if (close(s.fd) != 0 && st == CKEY_OK) {
        st = CKEY_ERR_IO;
        snprintf(s.msg, sizeof s.msg, "write failed: %s", strerror(errno));
    }
    if (st == CKEY_OK && rename(*tmp, path) != 0) {
        st = CKEY_ERR_IO;
        snprintf(s.msg, sizeof s.msg, "cannot rename %s into place: %s", *tmp, strerror(errno));
    }
    if (st != CKEY_OK) {
        unlink(*tmp);
        return ck_fail(err, st, "%s: %s", path, s.msg[0] ? s.msg : "write failed");
    }
    ck_sync_parent_dir(path);
    return CKEY_OK;
}

static ckey_status body_failed(exr_out *s, const char *what) {
    if (!s->msg[0]) snprintf(s->msg, sizeof s->msg, "%s", what);
    return s->io_errno ? CKEY_ERR_IO : CKEY_ERR_INTERNAL;
}

/* ------------------------------------------- OpenEXR's own pipeline */

typedef struct openexr_body {
    const float *data;
    const uint16_t *half; /* or HALF samples (then data is NULL), copied as they are */
    int ch;
    int32_t width, height;
    exr_compression_t comp;
    int zip_level;
} openexr_body;

/* Each chunk through exr_encoding_run: OpenEXR packs, compresses (zlib)
 * and writes it. */
static ckey_status write_openexr_body(exr_context_t ctx, exr_out *s, void *arg) {
    const openexr_body *b = arg;
    const int ch = b->ch;
    if (add_part(ctx, ch, b->width, b->height, b->comp, b->zip_level) || exr_write_header(ctx))
        return body_failed(s, "OpenEXR could not write the header");
    int32_t lpc = 0;
    if (exr_get_scanlines_per_chunk(ctx, 0, &lpc) || lpc < 1) return body_failed(s, "OpenEXR could not encode the image");
    exr_encode_pipeline_t enc = EXR_ENCODE_PIPELINE_INITIALIZER;
    int started = 0;
    const size_t plane = (size_t)b->width * (size_t)b->height;
    ckey_status st = CKEY_OK;
    for (int32_t y = 0; y < b->height && st == CKEY_OK; y += lpc) {
        exr_chunk_info_t ci;
        if (exr_write_scanline_chunk_info(ctx, 0, y, &ci) ||
            (started ? exr_encoding_update(ctx, 0, &ci, &enc) : exr_encoding_initialize(ctx, 0, &ci, &enc))) {
            st = body_failed(s, "OpenEXR could not encode the image");
            break;
        }
        for (int c = 0; c < enc.channel_count; c++) {
            exr_coding_channel_info_t *cc = &enc.channels[c];
            int k = 0;
            while (k < ch && strcmp(cc->channel_name, channel_names[ch - 1][k])) k++;
            if (k == ch) k = 0; /* cannot happen: these are our channels */
            const size_t at = (size_t)k * plane + (size_t)y * (size_t)b->width;
            const size_t bytes = b->half ? sizeof(uint16_t) : sizeof(float);
            cc->encode_from_ptr = b->half ? (const uint8_t *)(b->half + at) : (const uint8_t *)(b->data + at);
            cc->user_pixel_stride = (int32_t)bytes;
            cc->user_line_stride = (int32_t)((size_t)b->width * bytes);
            cc->user_bytes_per_element = (int16_t)bytes;
            cc->user_data_type = b->half ? EXR_PIXEL_HALF : EXR_PIXEL_FLOAT;
        }
        if (!started) {
            started = 1;
            if (exr_encoding_choose_default_routines(ctx, 0, &enc)) {
                st = body_failed(s, "OpenEXR could not encode the image");
                break;
            }
        }
        if (exr_encoding_run(ctx, 0, &enc)) st = body_failed(s, "OpenEXR could not encode the image");
    }
    if (started) exr_encoding_destroy(ctx, &enc);
    return st;
}

static exr_compression_t file_compression(ckey_exr_compression c) {
    return c == CKEY_EXR_PXR24 ? EXR_COMPRESSION_PXR24
           : c == CKEY_EXR_NONE ? EXR_COMPRESSION_NONE
                                : EXR_COMPRESSION_ZIP;
}

/* The image of floats `data` or of HALF samples `half` through OpenEXR's pipeline. */
static ckey_status write_openexr(const char *path, const float *data, const uint16_t *half, int32_t channels,
                                 int32_t width, int32_t height, ckey_exr_compression comp, int32_t zip_level,
                                 ckey_error *err) {
    const ckey_exr_options o = {comp, 0};
    ckey_status st = check_args(path, half ? (const void *)half : (const void *)data, channels, width, height, &o,
                                err);
    if (st != CKEY_OK) return st;
    openexr_body b = {half ? NULL : data, half, channels, width, height, file_compression(comp), zip_level};
    char *tmp = NULL;
    size_t cap = 0;
    st = write_atomically(path, &tmp, &cap, write_openexr_body, &b, err);
    free(tmp);
    return st;
}

ckey_status ck_exr_write_openexr(const char *path, const float *data, int32_t channels, int32_t width,
                                 int32_t height, ckey_exr_compression comp, int32_t zip_level, ckey_error *err) {
    return write_openexr(path, data, NULL, channels, width, height, comp, zip_level, err);
}

ckey_status ck_exr_write_openexr_half(const char *path, const uint16_t *data, int32_t channels, int32_t width,
                                      int32_t height, ckey_exr_compression comp, int32_t zip_level,
                                      ckey_error *err) {
    return write_openexr(path, NULL, data, channels, width, height, comp, zip_level, err);
}

/* ------------------------------------------------- ckey's chunk encoder */

/* One thread's tools: a chunk's packed halves and their transform, and its
 * compressor (made for the level in use). */
typedef struct zthread {
    uint16_t *packed;
    uint8_t *xform;
    size_t cap; /* bytes of packed; xform holds twice as many */
#ifdef CK_HAVE_LIBDEFLATE
    struct libdeflate_compressor *ld;
    int ld_level;
#endif
} zthread;

struct ck_exr_writer {
    zthread *th; /* one per pool thread index */
    int nth;
    uint8_t *arena; /* chunk c's file bytes at c * stride */
    size_t arena_cap;
    uint32_t *bytes; /* per chunk: its size in the file */
    int64_t bytes_cap;
    char *tmp;
    size_t tmp_cap;
    double io_s; /* the last write's file I/O after encoding */
};

ck_exr_writer *ck_exr_writer_new(void) { return calloc(1, sizeof(ck_exr_writer)); }

double ck_exr_writer_io_seconds(const ck_exr_writer *w) { return w ? w->io_s : 0; }

static void zthread_free(zthread *z) {
    free(z->packed);
    free(z->xform);
#ifdef CK_HAVE_LIBDEFLATE
    if (z->ld) libdeflate_free_compressor(z->ld);
#endif
}

void ck_exr_writer_free(ck_exr_writer *w) {
    if (!w) return;
    for (int i = 0; i < w->nth; i++) zthread_free(&w->th[i]);
    free(w->th);
    free(w->arena);
    free(w->bytes);
    free(w->tmp);
    free(w);
}

/* Scratch for chunks of `n` bytes and a compressor for `level`; 0 when out
 * of memory. */
static int zthread_ready(zthread *z, size_t n, int deflater, int level) {
    if (n > z->cap) {
        free(z->packed);
        free(z->xform);
        z->packed = malloc(n);
        z->xform = malloc(2 * n);
        z->cap = z->packed && z->xform ? n : 0;
        if (!z->cap) return 0;
    }
#ifdef CK_HAVE_LIBDEFLATE
    if (deflater == DEFLATE_LIBDEFLATE && (!z->ld || z->ld_level != level)) {
        if (z->ld) libdeflate_free_compressor(z->ld);
        z->ld = libdeflate_alloc_compressor(level);
        z->ld_level = level;
        if (!z->ld) return 0;
    }
#endif
    (void)deflater, (void)level;
    return 1;
}

/* A zlib stream of in[0 .. n) into out (room for n bytes); 0 when it does
 * not fit. */
static size_t deflate_into(zthread *z, int deflater, const uint8_t *in, size_t n, uint8_t *out) {
#ifdef CK_HAVE_LIBDEFLATE
    if (deflater == DEFLATE_LIBDEFLATE) return libdeflate_zlib_compress(z->ld, in, n, out, n);
#endif
    (void)z, (void)deflater, (void)in, (void)n, (void)out;
    return 0;
}

typedef struct enc_job {
    ck_exr_writer *w;
    const float *data;
    const uint16_t *half; /* or HALF samples (then data is NULL), copied as they are */
    int ch;
    int32_t width, height, lpc;
    size_t plane, stride;
    exr_compression_t comp;
    int deflater, level;
    atomic_int failed;
} enc_job;

/* Chunk c: pack its lines (channel by channel in the file's order) into
 * HALF, transform, deflate into its place in the arena, or store it. */
static void encode_one(enc_job *j, int64_t c, zthread *z) {
    const int ch = j->ch;
    const int32_t w = j->width, y0 = (int32_t)(c * j->lpc);
    const int32_t lines = j->height - y0 < j->lpc ? j->height - y0 : j->lpc;
    const size_t n = (size_t)lines * (size_t)ch * (size_t)w * 2;
    uint8_t *dst = j->w->arena + (size_t)c * j->stride;
    const int raw = j->comp == EXR_COMPRESSION_NONE;
    if (!raw && !zthread_ready(z, n, j->deflater, j->level)) {
        atomic_store(&j->failed, 1);
        return;
    }
    uint16_t *packed = raw ? (uint16_t *)(void *)dst : z->packed;
    for (int32_t l = 0; l < lines; l++)
        for (int k = 0; k < ch; k++) {
            const size_t at = (size_t)file_plane[ch][k] * j->plane + (size_t)(y0 + l) * (size_t)w;
            uint16_t *to = packed + ((size_t)l * (size_t)ch + (size_t)k) * (size_t)w;
            if (j->half) memcpy(to, j->half + at, (size_t)w * sizeof *to);
            else ck_half_from_float(j->data + at, to, (size_t)w);
        }
    if (raw) {
        j->w->bytes[c] = (uint32_t)n;
        return;
    }
    const uint8_t *src;
    if (j->comp == EXR_COMPRESSION_PXR24) {
        /* each line's channel as packed: the differences of its 16-bit
         * values (mod 2^16), high bytes of the run first, then the low */
        for (size_t run = 0; run < (size_t)lines * (size_t)ch; run++) {
            const uint16_t *h = packed + run * (size_t)w;
            uint8_t *hi = z->xform + run * 2 * (size_t)w, *lo = hi + w;
            hi[0] = (uint8_t)(h[0] >> 8), lo[0] = (uint8_t)h[0];
            for (int32_t x = 1; x < w; x++) {
                const uint16_t d = (uint16_t)(h[x] - h[x - 1]);
                hi[x] = (uint8_t)(d >> 8), lo[x] = (uint8_t)d;
            }
        }
        src = z->xform;
    } else {
        /* ZIP: the even bytes, then the odd bytes, then each byte but the
         * first replaced by its difference to the one before (+128, mod 256) */
        const uint8_t *in = (const uint8_t *)packed;
        uint8_t *sp = z->xform, *out = z->xform + n;
        for (size_t i = 0; i < n / 2; i++) sp[i] = in[2 * i], sp[n / 2 + i] = in[2 * i + 1];
        out[0] = sp[0];
        for (size_t i = 1; i < n; i++) out[i] = (uint8_t)(sp[i] - sp[i - 1] + 128);
        src = out;
    }
    size_t m = deflate_into(z, j->deflater, src, n, dst);
    if (m == 0 || m >= n) { /* as OpenEXR: stored when deflate does not shrink it */
        memcpy(dst, packed, n);
        m = n;
    }
    j->w->bytes[c] = (uint32_t)m;
}

static void encode_chunks(void *ctx, int64_t b, int64_t e, int thread) {
    enc_job *j = ctx;
    for (int64_t c = b; c < e && !atomic_load(&j->failed); c++) encode_one(j, c, &j->w->th[thread]);
}

/* Writes the header, then the encoded chunks in order. */
static ckey_status write_chunks_body(exr_context_t ctx, exr_out *s, void *arg) {
    const enc_job *j = arg;
    if (add_part(ctx, j->ch, j->width, j->height, j->comp, -1) || exr_write_header(ctx))
        return body_failed(s, "OpenEXR could not write the header");
    const int64_t nchunks = (j->height + j->lpc - 1) / j->lpc;
    for (int64_t c = 0; c < nchunks; c++)
        if (exr_write_scanline_chunk(ctx, 0, (int)(c * j->lpc), j->w->arena + (size_t)c * j->stride,
                                     j->w->bytes[c]))
            return body_failed(s, "OpenEXR could not write a chunk");
    return CKEY_OK;
}

/* ck_exr_write of floats `data` or of HALF samples `half`. */
static ckey_status write_image(ck_exr_writer *w, ck_pool *pool, const char *path, const float *data,
                               const uint16_t *half, int32_t channels, int32_t width, int32_t height,
                               const ckey_exr_options *opt, ckey_error *err) {
    const ckey_exr_options def = {CKEY_EXR_PXR24, 0};
    const ckey_exr_options *o = opt ? opt : &def;
    ckey_status st = check_args(path, half ? (const void *)half : (const void *)data, channels, width, height, o,
                                err);
    if (st != CKEY_OK) return st;
    const exr_compression_t comp = file_compression(o->compression);
    const int level = effective_level(o), deflater = deflater_for(level);
    if (w) w->io_s = 0;
    if (comp != EXR_COMPRESSION_NONE && deflater == DEFLATE_ZLIB)
        return write_openexr(path, half ? NULL : data, half, channels, width, height, o->compression,
                             level > 9 ? 9 : level, err);
    ck_exr_writer *own = NULL;
    if (!w && !(w = own = ck_exr_writer_new())) return ck_fail(err, CKEY_ERR_NOMEM, "%s: out of memory", path);
    const int32_t lpc = comp == EXR_COMPRESSION_NONE ? 1 : 16; /* the format's lines per chunk */
    const int64_t nchunks = (height + lpc - 1) / lpc;
    const size_t stride = (size_t)lpc * (size_t)channels * (size_t)width * 2;
    const int nth = ck_pool_size(pool);
    if (nth > w->nth) {
        zthread *t = realloc(w->th, (size_t)nth * sizeof *t);
        if (t) {
            memset(t + w->nth, 0, (size_t)(nth - w->nth) * sizeof *t);
            w->th = t;
            w->nth = nth;
        }
    }
    if ((size_t)nchunks * stride > w->arena_cap) {
        free(w->arena);
        w->arena = malloc((size_t)nchunks * stride);
        w->arena_cap = w->arena ? (size_t)nchunks * stride : 0;
    }
    if (nchunks > w->bytes_cap) {
        free(w->bytes);
        w->bytes = malloc((size_t)nchunks * sizeof *w->bytes);
        w->bytes_cap = w->bytes ? nchunks : 0;
    }
    if (w->nth < nth || !w->arena_cap || !w->bytes_cap) {
        ck_exr_writer_free(own);
        return ck_fail(err, CKEY_ERR_NOMEM, "%s: out of memory for the %d x %d image's chunks", path, (int)width,
                       (int)height);
    }
    enc_job j = {w, half ? NULL : data, half, channels, width, height, lpc, (size_t)width * (size_t)height,
                 stride, comp, deflater, level, 0};
    atomic_init(&j.failed, 0);
    ck_pool_for(pool, nchunks, 1, encode_chunks, &j);
    if (atomic_load(&j.failed))
        st = ck_fail(err, CKEY_ERR_NOMEM, "%s: out of memory for the EXR compressor", path);
    else {
        const double t_io = ck_now();
        st = write_atomically(path, &w->tmp, &w->tmp_cap, write_chunks_body, &j, err);
        w->io_s = ck_now() - t_io;
    }
    ck_exr_writer_free(own);
    return st;
}

ckey_status ck_exr_write(ck_exr_writer *w, ck_pool *pool, const char *path, const float *data,
                         int32_t channels, int32_t width, int32_t height, const ckey_exr_options *opt,
                         ckey_error *err) {
    return write_image(w, pool, path, data, NULL, channels, width, height, opt, err);
}

ckey_status ck_exr_write_half(ck_exr_writer *w, ck_pool *pool, const char *path, const uint16_t *data,
                              int32_t channels, int32_t width, int32_t height, const ckey_exr_options *opt,
                              ckey_error *err) {
    return write_image(w, pool, path, NULL, data, channels, width, height, opt, err);
}

#endif /* CK_HAVE_EXR */

ckey_status ckey_image_write_exr_opt(const char *path, const float *data, int32_t channels, int32_t width,
                                     int32_t height, const ckey_exr_options *o, ckey_error *err) {
    return ck_exr_write(NULL, NULL, path, data, channels, width, height, o, err);
}

ckey_status ckey_image_write_exr(const char *path, const float *data, int32_t channels, int32_t width,
                                 int32_t height, ckey_exr_compression comp, ckey_error *err) {
    const ckey_exr_options o = {comp, 0};
    return ck_exr_write(NULL, NULL, path, data, channels, width, height, &o, err);
}
