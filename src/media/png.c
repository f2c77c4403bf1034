/*
 * PNG in and out through libpng; plain 8/16-bit PNGs in through a fast path
 * of our own on libdeflate (see "the fast path" below), with libpng's results.
 *
 * libpng reports errors by longjmp. To keep that safe, each setjmp lives in a
 * small function (decode / encode) whose only mutable state is a context
 * struct owned by its caller: after a longjmp nothing local to the setjmp
 * frame is read, and the caller frees whatever the context holds. The
 * library's own stderr printing is replaced by handlers that keep the first
 * message for our error string.
 */
#include <errno.h>
#include <stdarg.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "ckey_media.h"
#include "core/core.h"
#include "media/image.h"

#ifdef CK_HAVE_PNG
#include <png.h>
#include <zlib.h>
#endif
#ifdef CK_HAVE_LIBDEFLATE
#include <libdeflate.h>
#endif

void ckey_image_free(ckey_image *img) {
    if (!img) return;
    free(img->data);
    memset(img, 0, sizeof *img);
}

#ifndef CK_HAVE_PNG

ckey_status ck_image_read_png_memory(const void *data, size_t size, const char *label,
                                     ckey_image_kind kind, ckey_image *out, ckey_error *err) {
    (void)data;
    (void)size;
    (void)kind;
    if (out) memset(out, 0, sizeof *out);
    return ck_fail(err, CKEY_ERR_UNSUPPORTED, "%s: ckey was built without libpng",
                   label ? label : "(memory)");
}

ckey_status ckey_image_read_png(const char *path, ckey_image_kind kind, ckey_image *out,
                                ckey_error *err) {
    return ck_image_read_png_memory(NULL, 0, path, kind, out, err);
}

ckey_status ck_image_read_png_stream(FILE *f, const void *head, size_t nhead, const char *label,
                                     ckey_image_kind kind, ckey_image *out, ckey_error *err) {
    (void)f;
    (void)head;
    (void)nhead;
    return ck_image_read_png_memory(NULL, 0, label, kind, out, err);
}

ckey_status ck_image_read_png_stream_px(FILE *f, const void *head, size_t nhead, const char *label,
                                        ckey_image_kind kind, ck_pixels *px, ckey_image *out, ckey_error *err) {
    (void)px;
    return ck_image_read_png_stream(f, head, nhead, label, kind, out, err);
}

ckey_status ck_image_read_png_packed_stream(FILE *f, const void *head, size_t nhead, const char *label,
                                            ckey_image_kind kind, ckey_packed_image *pk, ckey_error *err) {
    (void)f, (void)head, (void)nhead, (void)kind, (void)pk;
    return ck_fail(err, CKEY_ERR_UNSUPPORTED, "%s: ckey was built without libpng", label ? label : "(stream)");
}

ckey_status ck_png_read_memory_with(const void *data, size_t size, const char *label, ckey_image_kind kind,
                                    ck_png_decoder decoder, ck_pixels *px, ckey_image *out, ckey_error *err) {
    (void)decoder, (void)px;
    return ck_image_read_png_memory(data, size, label, kind, out, err);
}

ckey_status ck_png_read_packed_memory_with(const void *data, size_t size, const char *label, ckey_image_kind kind,
                                           ck_png_decoder decoder, ckey_packed_image *pk, ckey_error *err) {
    (void)data, (void)size, (void)kind, (void)decoder, (void)pk;
    return ck_fail(err, CKEY_ERR_UNSUPPORTED, "%s: ckey was built without libpng", label ? label : "(memory)");
}

ckey_status ck_image_write_png_qt(const char *path, const float *data, int32_t channels,
                                  int32_t width, int32_t height, int32_t bit_depth,
                                  ck_png_quantize q, int level, double *io_seconds, ckey_error *err) {
    if (io_seconds) *io_seconds = 0;
    return ck_image_write_png_q(path, data, channels, width, height, bit_depth, q, level, err);
}

ckey_status ck_image_write_png_u8(const char *path, const uint8_t *data, int32_t channels, int32_t width,
                                  int32_t height, int level, double *io_seconds, ckey_error *err) {
    (void)data, (void)channels, (void)width, (void)height, (void)level;
    if (io_seconds) *io_seconds = 0;
    return ck_fail(err, CKEY_ERR_UNSUPPORTED, "%s: ckey was built without libpng", path ? path : "(null)");
}

struct ck_png_writer {
    int unused;
};
ck_png_writer *ck_png_writer_new(void) { return calloc(1, sizeof(ck_png_writer)); }
void ck_png_writer_free(ck_png_writer *pw) { free(pw); }

ckey_status ck_png_writer_write(ck_png_writer *pw, const char *path, const float *data, int32_t channels,
                                int32_t width, int32_t height, int32_t bit_depth, ck_png_quantize q, int level,
                                double *io_seconds, ckey_error *err) {
    (void)pw;
    return ck_image_write_png_qt(path, data, channels, width, height, bit_depth, q, level, io_seconds, err);
}

ckey_status ck_png_writer_write_u8(ck_png_writer *pw, const char *path, const uint8_t *data, int32_t channels,
                                   int32_t width, int32_t height, int level, double *io_seconds, ckey_error *err) {
    (void)pw;
    return ck_image_write_png_u8(path, data, channels, width, height, level, io_seconds, err);
}

ckey_status ck_image_write_png_q(const char *path, const float *data, int32_t channels,
                                 int32_t width, int32_t height, int32_t bit_depth,
                                 ck_png_quantize q, int level, ckey_error *err) {
    (void)data;
    (void)channels;
    (void)width;
    (void)height;
    (void)bit_depth;
    (void)q;
    (void)level;
    return ck_fail(err, CKEY_ERR_UNSUPPORTED, "%s: ckey was built without libpng",
                   path ? path : "(null)");
}

ckey_status ckey_image_write_png(const char *path, const float *data, int32_t channels,
                                 int32_t width, int32_t height, int32_t bit_depth,
                                 ckey_error *err) {
    return ck_image_write_png_q(path, data, channels, width, height, bit_depth, CK_PNG_ROUND, 3, err);
}

ckey_status ck_png_write_stream(FILE *f, const char *label, const float *data, int32_t channels,
                                int32_t width, int32_t height, int32_t bit_depth, ck_png_quantize q,
                                int level, ckey_error *err) {
    (void)f;
    return ck_image_write_png_q(label, data, channels, width, height, bit_depth, q, level, err);
}

#else /* CK_HAVE_PNG */

static const unsigned char png_signature[8] = {137, 80, 78, 71, 13, 10, 26, 10};

/* Ancillary chunks (text, ICC profiles) may not make libpng allocate more
 * than this; the image itself is bounded by the dimension caps. */
#define CK_PNG_CHUNK_MAX (8u << 20)

/* ------------------------------------------------------------- reading */

typedef struct reader {
    const char *label;
    /* byte source: `file` when non-NULL, else the memory range */
    FILE *file;
    const unsigned char *mem;
    size_t mem_size, mem_pos;
    /* bytes already taken from the source to pre-check IHDR, replayed first */
    unsigned char head[25];
    size_t head_len, head_pos;
    uint64_t total_size;      /* bytes in the whole input; 0 if unknown (a pipe) */
    /* error record: status defaults to CKEY_ERR_FORMAT for libpng errors */
    ckey_status status;
    char msg[256];
    png_structp png;
    png_infop info;
    /* everything decode() allocates, freed by the caller */
    unsigned char *rows;      /* one row, or the whole image when interlaced */
    png_bytep *row_ptrs;
    ck_pixels *px;            /* where the pixels go */
    float *pixels;            /* the result (px's block) */
    float *fallback;          /* hint from color when the alpha turns out opaque (in the block) */
    ckey_packed_image *pk;    /* decode_packed's output */
    unsigned char *filebuf;   /* the whole file, when the fast path read it */
    ck_png_decoder decoder;   /* which decoders may read it */
} reader;

static void set_msg(char *msg, size_t cap, ckey_status *status, ckey_status st,
                    const char *fmt, ...) __attribute__((format(printf, 5, 6)));
static void set_msg(char *msg, size_t cap, ckey_status *status, ckey_status st,
                    const char *fmt, ...) {
    if (msg[0]) return; /* the first problem is the one to report */
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, cap, fmt, ap);
    va_end(ap);
    *status = st;
}

static void rd_error(png_structp png, png_const_charp msg) {
    reader *r = png_get_error_ptr(png);
    set_msg(r->msg, sizeof r->msg, &r->status, CKEY_ERR_FORMAT, "%s", msg);
    png_longjmp(png, 1);
}

static void ignore_warning(png_structp png, png_const_charp msg) {
    (void)png;
    (void)msg;
}

/* Raw read from the source; returns the bytes delivered (short at the end). */
static size_t src_read(reader *r, void *out, size_t len) {
    size_t done = 0;
    if (r->head_pos < r->head_len) {
        done = r->head_len - r->head_pos;
        if (done > len) done = len;
        memcpy(out, r->head + r->head_pos, done);
        r->head_pos += done;
        if (done == len) return done;
        out = (unsigned char *)out + done;
        len -= done;
    }
    if (r->file) return done + fread(out, 1, len, r->file);
    size_t left = r->mem_size - r->mem_pos;
    if (len > left) len = left;
    if (len) memcpy(out, r->mem + r->mem_pos, len);
    r->mem_pos += len;
    return done + len;
}

static uint32_t be32(const unsigned char *p) {
    return (uint32_t)p[0] << 24 | (uint32_t)p[1] << 16 | (uint32_t)p[2] << 8 | p[3];
}

/*
 * Check the caps from IHDR before libpng sees the file: png_read_info only
 * returns once it reaches IDAT, so a header-only file with absurd dimensions
 * would otherwise be reported as merely truncated. The bytes are replayed to
 * libpng, which still validates the chunk (CRC included).
 */
static ckey_status precheck_ihdr(reader *r) {
    r->head_len = src_read(r, r->head, sizeof r->head);
    r->head_pos = 0;
    if (r->file && ferror(r->file)) {
        set_msg(r->msg, sizeof r->msg, &r->status, CKEY_ERR_IO, "read error: %s", strerror(errno));
        return r->status;
    }
    if (r->head_len < sizeof r->head || be32(r->head) != 13 || memcmp(r->head + 4, "IHDR", 4) != 0)
        return CKEY_OK; /* libpng reports these in its own words */
    const uint32_t w = be32(r->head + 8), h = be32(r->head + 12);
    if (w > CKEY_IMAGE_MAX_SIDE || h > CKEY_IMAGE_MAX_SIDE) {
        set_msg(r->msg, sizeof r->msg, &r->status, CKEY_ERR_UNSUPPORTED,
                "%lu x %lu exceeds the %d-pixel side limit", (unsigned long)w, (unsigned long)h,
                CKEY_IMAGE_MAX_SIDE);
        return r->status;
    }
    if ((int64_t)w * (int64_t)h > CKEY_IMAGE_MAX_PIXELS) {
        set_msg(r->msg, sizeof r->msg, &r->status, CKEY_ERR_UNSUPPORTED,
                "%lu x %lu exceeds the limit of %lld pixels", (unsigned long)w, (unsigned long)h,
                (long long)CKEY_IMAGE_MAX_PIXELS);
        return r->status;
    }
    return CKEY_OK;
}

static void rd_bytes(png_structp png, png_bytep out, size_t len) {
    reader *r = png_get_io_ptr(png);
    if (src_read(r, out, len) != len) {
        if (r->file && ferror(r->file))
            set_msg(r->msg, sizeof r->msg, &r->status, CKEY_ERR_IO, "read error: %s",
                    strerror(errno));
        else
            set_msg(r->msg, sizeof r->msg, &r->status, CKEY_ERR_FORMAT, "truncated");
        png_error(png, r->msg);
    }
}

static inline float sample(const unsigned char *row, size_t i, int wide) {
    if (wide) return (float)((unsigned)row[2 * i] << 8 | row[2 * i + 1]) / 65535.0f;
    return (float)row[i] / 255.0f;
}

static inline unsigned raw_sample(const unsigned char *row, size_t i, int wide) {
    return wide ? ((unsigned)row[2 * i] << 8 | row[2 * i + 1]) : row[i];
}

/* One decoded row (after libpng's expansions: 1..4 channels of 8 or 16 bits)
 * into the output planes. Returns 0 when some alpha sample is not opaque. */
static int convert_row(const reader *r, ckey_image_kind kind, const unsigned char *row,
                       size_t y, size_t w, size_t plane, int ch, int wide) {
    const size_t o = y * w;
    int opaque = 1;
    if (kind == CKEY_IMAGE_RGB) {
        float *R = r->pixels + o, *G = R + plane, *B = G + plane;
        for (size_t x = 0; x < w; x++) {
            if (ch <= 2) {
                R[x] = G[x] = B[x] = sample(row, x * (size_t)ch, wide);
            } else {
                R[x] = sample(row, x * (size_t)ch, wide);
                G[x] = sample(row, x * (size_t)ch + 1, wide);
                B[x] = sample(row, x * (size_t)ch + 2, wide);
            }
        }
        return 1;
    }
    float *out = r->pixels + o;
    const unsigned maxv = wide ? 65535u : 255u;
    const size_t color = ch >= 3 ? 2 : 0; /* blue, or gray */
    if (ch == 2 || ch == 4) {
        float *fb = r->fallback + o;
        for (size_t x = 0; x < w; x++) {
            const size_t a = x * (size_t)ch + (size_t)ch - 1;
            out[x] = sample(row, a, wide);
            opaque &= raw_sample(row, a, wide) == maxv;
            fb[x] = sample(row, x * (size_t)ch + color, wide);
        }
    } else {
        for (size_t x = 0; x < w; x++) out[x] = sample(row, x * (size_t)ch + color, wide);
    }
    return opaque;
}

/* The chunks up to the pixels (the signature already read) and the IHDR
 * fields; called inside a decoder's setjmp frame, as are the two helpers
 * below. The decoders apply ckey's dimension caps; libpng's (1e6) is lifted
 * so there is one gate and one message. */
static void read_header(reader *r, png_uint_32 *w, png_uint_32 *h, int *depth, int *color) {
    png_set_sig_bytes(r->png, 8);
    png_set_read_fn(r->png, r, rd_bytes);
    png_set_user_limits(r->png, 0x7fffffffu, 0x7fffffffu);
    png_set_chunk_malloc_max(r->png, CK_PNG_CHUNK_MAX);
    png_read_info(r->png, r->info);
    int interlace;
    png_get_IHDR(r->png, r->info, w, h, depth, color, &interlace, NULL, NULL);
}

/* Palette, low-depth gray and tRNS expanded to 8- or 16-bit samples. */
static void expand_samples(reader *r, int depth, int color) {
    if (color == PNG_COLOR_TYPE_PALETTE) png_set_palette_to_rgb(r->png);
    if (color == PNG_COLOR_TYPE_GRAY && depth < 8) png_set_expand_gray_1_2_4_to_8(r->png);
    if (png_get_valid(r->png, r->info, PNG_INFO_tRNS)) png_set_tRNS_to_alpha(r->png);
}

/* Deflate cannot compress better than ~1032:1, so a file too small to hold
 * the pixel data is refused here, before a tiny forged header makes us
 * allocate gigabytes only to find the data missing. Returns 1 when refused. */
static int refuse_truncated(reader *r, size_t rowbytes, png_uint_32 w, png_uint_32 h) {
    const uint64_t raw_bytes = ((uint64_t)rowbytes + 1) * h;
    if (!r->total_size || r->total_size >= raw_bytes / 1032) return 0;
    set_msg(r->msg, sizeof r->msg, &r->status, CKEY_ERR_FORMAT,
            "truncated (%lu x %lu pixels need at least %llu bytes, the file has %llu)", (unsigned long)w,
            (unsigned long)h, (unsigned long long)(raw_bytes / 1032), (unsigned long long)r->total_size);
    return 1;
}

/* The setjmp frame: reads header and pixels into r's buffers. */
static ckey_status decode(reader *r, ckey_image_kind kind, ckey_image *img) {
    if (setjmp(png_jmpbuf(r->png))) return r->status;
    png_structp png = r->png;
    png_infop info = r->info;
    png_uint_32 w, h;
    int depth, color;
    read_header(r, &w, &h, &depth, &color);
    if (w > CKEY_IMAGE_MAX_SIDE || h > CKEY_IMAGE_MAX_SIDE) {
        set_msg(r->msg, sizeof r->msg, &r->status, CKEY_ERR_UNSUPPORTED,
                "%lu x %lu exceeds the %d-pixel side limit", (unsigned long)w,
                (unsigned long)h, CKEY_IMAGE_MAX_SIDE);
        return r->status;
    }
    if ((int64_t)w * (int64_t)h > CKEY_IMAGE_MAX_PIXELS) {
        set_msg(r->msg, sizeof r->msg, &r->status, CKEY_ERR_UNSUPPORTED,
                "%lu x %lu exceeds the limit of %lld pixels", (unsigned long)w,
                (unsigned long)h, (long long)CKEY_IMAGE_MAX_PIXELS);
        return r->status;
    }
    expand_samples(r, depth, color);
    const int passes = png_set_interlace_handling(png);
    png_read_update_info(png, info);

    const int ch = png_get_channels(png, info);
    const int wide = png_get_bit_depth(png, info) == 16;
    const size_t rowbytes = png_get_rowbytes(png, info);
    const size_t plane = (size_t)w * h;
    if (ch < 1 || ch > 4 || rowbytes != (size_t)w * (size_t)ch * (wide ? 2 : 1)) {
        set_msg(r->msg, sizeof r->msg, &r->status, CKEY_ERR_INTERNAL,
                "unexpected row layout (%d channels, %zu bytes per row)", ch, rowbytes);
        return r->status;
    }
    if (refuse_truncated(r, rowbytes, w, h)) return r->status;
    const int out_ch = kind == CKEY_IMAGE_RGB ? 3 : 1;
    const int alpha_ch = ch == 2 || ch == 4;
    const int fb = kind == CKEY_IMAGE_HINT && alpha_ch;
    r->pixels = ck_pixels_take(r->px, plane * (size_t)(out_ch + fb));
    if (fb && r->pixels) r->fallback = r->pixels + plane * (size_t)out_ch;
    r->rows = malloc(passes > 1 ? rowbytes * h : rowbytes);
    if (passes > 1) r->row_ptrs = malloc((size_t)h * sizeof *r->row_ptrs);
    if (!r->pixels || !r->rows || (passes > 1 && !r->row_ptrs)) {
        set_msg(r->msg, sizeof r->msg, &r->status, CKEY_ERR_NOMEM,
                "out of memory for a %lu x %lu image", (unsigned long)w, (unsigned long)h);
        return r->status;
    }
    int opaque = 1;
    if (passes > 1) {
        /* Adam7 fills every row on each pass: the whole image must be held */
        for (png_uint_32 y = 0; y < h; y++) r->row_ptrs[y] = r->rows + (size_t)y * rowbytes;
        png_read_image(png, r->row_ptrs);
        for (png_uint_32 y = 0; y < h; y++)
            opaque &= convert_row(r, kind, r->row_ptrs[y], y, w, plane, ch, wide);
    } else {
        for (png_uint_32 y = 0; y < h; y++) {
            png_read_row(png, r->rows, NULL);
            opaque &= convert_row(r, kind, r->rows, y, w, plane, ch, wide);
        }
    }
    /* Up to IEND: a file cut after the pixels is still reported truncated. */
    png_read_end(png, NULL);
    if (kind == CKEY_IMAGE_HINT && alpha_ch && opaque)
        memcpy(r->pixels, r->fallback, plane * sizeof(float));

    img->width = (int32_t)w;
    img->height = (int32_t)h;
    img->channels = out_ch;
    img->bit_depth = depth;
    img->has_alpha = alpha_ch;
    img->data = r->pixels;
    img->capacity = r->px->floats;
    r->pixels = NULL;
    return CKEY_OK;
}

static int valid_kind(ckey_image_kind kind);

/* The hint's channel of a packed image: the alpha unless it is entirely
 * opaque, else blue or gray (convert_row's rule). */
static int32_t packed_hint_channel(const unsigned char *px, size_t w, size_t h, int ch, int wide) {
    int opaque = 1;
    if (ch == 2 || ch == 4) {
        const size_t n = w * h;
        if (wide) {
            const uint16_t *s = (const uint16_t *)(const void *)px;
            for (size_t i = 0; i < n && opaque; i++) opaque = s[i * (size_t)ch + (size_t)ch - 1] == 65535u;
        } else {
            for (size_t i = 0; i < n && opaque; i++) opaque = px[i * (size_t)ch + (size_t)ch - 1] == 255u;
        }
    }
    return (ch == 2 || ch == 4) && !opaque ? ch - 1 : ch >= 3 ? 2 : 0;
}

/* The setjmp frame of a packed read: rows go straight into r->pk's block,
 * as libpng leaves them (16-bit samples swapped to the host's order). */
static ckey_status decode_packed(reader *r, ckey_image_kind kind) {
    if (setjmp(png_jmpbuf(r->png))) return r->status;
    png_structp png = r->png;
    png_infop info = r->info;
    ckey_packed_image *pk = r->pk;
    png_uint_32 w, h;
    int depth, color;
    read_header(r, &w, &h, &depth, &color);
    if (w > CKEY_IMAGE_MAX_SIDE || h > CKEY_IMAGE_MAX_SIDE || (int64_t)w * (int64_t)h > CKEY_IMAGE_MAX_PIXELS) {
        set_msg(r->msg, sizeof r->msg, &r->status, CKEY_ERR_UNSUPPORTED, "%lu x %lu exceeds the size limits",
                (unsigned long)w, (unsigned long)h);
        return r->status;
    }
    expand_samples(r, depth, color);
    if (kind == CKEY_IMAGE_RGB && !(color & PNG_COLOR_MASK_COLOR)) png_set_gray_to_rgb(png);
    const uint16_t one = 1;
    if (depth == 16 && *(const unsigned char *)&one == 1) png_set_swap(png);
    const int passes = png_set_interlace_handling(png);
    png_read_update_info(png, info);
    const int ch = png_get_channels(png, info);
    const int wide = png_get_bit_depth(png, info) == 16;
    const size_t rowbytes = png_get_rowbytes(png, info);
    if (ch < 1 || ch > 4 || (kind == CKEY_IMAGE_RGB && ch < 3) ||
        rowbytes != (size_t)w * (size_t)ch * (wide ? 2 : 1)) {
        set_msg(r->msg, sizeof r->msg, &r->status, CKEY_ERR_INTERNAL,
                "unexpected row layout (%d channels, %zu bytes per row)", ch, rowbytes);
        return r->status;
    }
    if (refuse_truncated(r, rowbytes, w, h)) return r->status;
    const size_t bytes = rowbytes * h;
    ck_packed_reserve(pk, bytes);
    if (passes > 1) r->row_ptrs = malloc((size_t)h * sizeof *r->row_ptrs);
    if (!pk->data || (passes > 1 && !r->row_ptrs)) {
        set_msg(r->msg, sizeof r->msg, &r->status, CKEY_ERR_NOMEM, "out of memory for a %lu x %lu image",
                (unsigned long)w, (unsigned long)h);
        return r->status;
    }
    unsigned char *px = pk->data;
    if (passes > 1) {
        for (png_uint_32 y = 0; y < h; y++) r->row_ptrs[y] = px + (size_t)y * rowbytes;
        png_read_image(png, r->row_ptrs);
    } else {
        for (png_uint_32 y = 0; y < h; y++) png_read_row(png, px + (size_t)y * rowbytes, NULL);
    }
    png_read_end(png, NULL);
    const int32_t hint_ch = kind == CKEY_IMAGE_HINT ? packed_hint_channel(px, w, h, ch, wide) : -1;
    pk->width = (int32_t)w;
    pk->height = (int32_t)h;
    pk->channels = ch;
    pk->type = wide ? CKEY_SAMPLE_U16 : CKEY_SAMPLE_U8;
    pk->hint_channel = hint_ch;
    return CKEY_OK;
}

/* ------------------------------------------------------- the fast path */

#ifdef CK_HAVE_LIBDEFLATE
/*
 * Plates and hints are plain PNGs: 8- or 16-bit gray, gray+alpha, RGB or
 * RGBA, not interlaced, without tRNS or PLTE. For those the whole file is
 * held in memory, its IDAT stream inflated at once by libdeflate (about
 * twice libpng's zlib) into a buffer of exactly the image's filtered size,
 * and the rows unfiltered in place.
 *
 * The fast path only ever decodes a file libpng would decode to the same
 * samples; anything else it declines, and libpng reads the same bytes (so
 * every error, and libpng's tolerance of benign faults, stays as it is). It
 * declines: another color type, bit depth, interlace, filter or compression
 * method; a chunk name that is not four letters; PLTE, tRNS or any unknown
 * critical chunk; a chunk over CK_PNG_CHUNK_MAX (libpng's limit for every
 * chunk but a large IDAT); a CRC error in IHDR, IDAT or IEND (libpng's
 * errors; it only warns on an ancillary chunk's CRC, and so the fast path
 * does not check those); IDAT chunks not in one run; no IEND, or one with
 * data; a zlib window smaller than the image whose back references zlib
 * would refuse; any error from libdeflate, including a stream that holds
 * less or more data than the image, or bytes after its end; and a filter
 * type above 4. Ancillary chunks change no sample in libpng's reading
 * (no gamma, sBIT or background transform is set), so they are skipped.
 * Where libdeflate might still accept a malformed stream zlib refuses,
 * fuzz/fuzz-png.c checks on every input that both readers agree.
 */

/* what the fast path reads from the chunks */
typedef struct fast_png {
    uint32_t w, h;
    int ch, wide;            /* channels (1..4); 16-bit samples */
    size_t rowbytes, raw;    /* bytes a row; filtered bytes of the image (rows + filter bytes) */
    const unsigned char *idat; /* the first IDAT's data */
    size_t idat_len;         /* that chunk's length */
    size_t idat_total;       /* all IDAT data */
    int idat_chunks;
} fast_png;

static int is_letter(unsigned char c) { return (c >= 'A' && c <= 'Z') || (c >= 'a' && c <= 'z'); }

static uint32_t chunk_crc(const unsigned char *type_and_data, size_t len) {
    return (uint32_t)libdeflate_crc32(0, type_and_data, len + 4);
}

/* Walk the chunks of the PNG in p[0, n) (signature included). 1: the fast
 * path can decode it (fp filled); 0: decline. */
static int fast_scan(const unsigned char *p, size_t n, fast_png *fp) {
    memset(fp, 0, sizeof *fp);
    if (n < 8 + 25 || memcmp(p, png_signature, 8) != 0) return 0;
    size_t pos = 8;
    int seen_idat = 0, idat_done = 0;
    for (;;) {
        if (n - pos < 12) return 0; /* truncated */
        const uint32_t len = be32(p + pos);
        const unsigned char *type = p + pos + 4;
        if (len > 0x7fffffffu || len > n - pos - 12) return 0;
        for (int k = 0; k < 4; k++)
            if (!is_letter(type[k])) return 0;
        const unsigned char *data = type + 4;
        const int critical = !(type[0] & 0x20);
        if (len > CK_PNG_CHUNK_MAX) return 0;
        if (critical && chunk_crc(type, len) != be32(data + len)) return 0;
        if (pos == 8) {
            if (memcmp(type, "IHDR", 4) != 0 || len != 13) return 0;
            fp->w = be32(data);
            fp->h = be32(data + 4);
            const int depth = data[8], color = data[9];
            if (fp->w == 0 || fp->h == 0 || fp->w > CKEY_IMAGE_MAX_SIDE || fp->h > CKEY_IMAGE_MAX_SIDE ||
                (int64_t)fp->w * (int64_t)fp->h > CKEY_IMAGE_MAX_PIXELS)
                return 0;
            if ((depth != 8 && depth != 16) || data[10] != 0 || data[11] != 0 || data[12] != 0) return 0;
            fp->ch = color == 0 ? 1 : color == 4 ? 2 : color == 2 ? 3 : color == 6 ? 4 : 0;
            if (!fp->ch) return 0;
            fp->wide = depth == 16;
            /* within the caps: at most 2^28 pixels of 8 bytes, no overflow */
            fp->rowbytes = (size_t)fp->w * (size_t)fp->ch * (fp->wide ? 2u : 1u);
            fp->raw = (fp->rowbytes + 1) * (size_t)fp->h;
        } else if (memcmp(type, "IDAT", 4) == 0) {
            if (idat_done) return 0; /* a second run of IDATs */
            if (!seen_idat) fp->idat = data, fp->idat_len = len;
            seen_idat = 1;
            fp->idat_total += len;
            fp->idat_chunks++;
        } else if (memcmp(type, "IEND", 4) == 0) {
            if (len != 0 || !seen_idat) return 0;
            break; /* libpng reads no further */
        } else if (critical || memcmp(type, "tRNS", 4) == 0) {
            return 0; /* PLTE, a second IHDR, unknown critical chunks; transparency */
        } else if (seen_idat) {
            idat_done = 1;
        }
        pos += 12 + (size_t)len;
    }
    if (fp->idat_total < 2) return 0;
    /* deflate expands at most ~1032:1: a stream too short for the image is
     * libpng's to report, before anything is allocated for it */
    if (fp->idat_total < fp->raw / 1032) return 0;
    const unsigned cmf = fp->idat[0], cinfo = cmf >> 4;
    if ((cmf & 15) != 8 || cinfo > 7) return 0;
    /* zlib (libpng's inflater) refuses references beyond the declared window;
     * libdeflate does not check, so a small window is taken only when the
     * whole image fits in it */
    if (cinfo < 7 && fp->raw > ((size_t)1 << (cinfo + 8))) return 0;
    return 1;
}

/* The IDAT stream, contiguous: the first chunk's data itself when it is the
 * only one, else gathered into *owned. NULL when out of memory. */
static const unsigned char *fast_idat_stream(const fast_png *fp, unsigned char **owned) {
    *owned = NULL;
    if (fp->idat_chunks == 1) return fp->idat;
    unsigned char *s = malloc(fp->idat_total);
    if (!s) return NULL;
    const unsigned char *c = fp->idat - 8; /* the first IDAT's chunk */
    size_t off = 0;
    for (int k = 0; k < fp->idat_chunks; k++) {
        const size_t len = be32(c);
        memcpy(s + off, c + 8, len);
        off += len;
        c += 12 + len;
    }
    *owned = s;
    return s;
}

static inline unsigned paeth(unsigned a, unsigned b, unsigned c) {
    const int p = (int)a + (int)b - (int)c;
    const int pa = abs(p - (int)a), pb = abs(p - (int)b), pc = abs(p - (int)c);
    return pa <= pb && pa <= pc ? a : pb <= pc ? b : c;
}

#if defined(__SSE2__)
#include <emmintrin.h>

/* One pixel's bytes in a register, by loads of its own size: gathering them
 * through memory would stall on store forwarding. */
static inline uint64_t load_px(const unsigned char *p, int bpp) {
    uint16_t a16;
    uint32_t a32;
    uint64_t a64;
    switch (bpp) {
    case 3: memcpy(&a16, p, 2); return a16 | (uint64_t)p[2] << 16;
    case 4: memcpy(&a32, p, 4); return a32;
    case 6: memcpy(&a32, p, 4), memcpy(&a16, p + 4, 2); return a32 | (uint64_t)a16 << 32;
    default: memcpy(&a64, p, 8); return a64;
    }
}

/* Sub / Avg / Paeth, one pixel of bpp (3, 4, 6 or 8) bytes at a time in
 * 16-bit lanes: the serial dependence is between pixels, not bytes. */
#define CK_UNFILTER_PX(BPP)                                                                                \
    static void unfilter_px##BPP(int type, unsigned char *dst, const unsigned char *src,                  \
                                 const unsigned char *prev, size_t n) {                                  \
        const __m128i zero = _mm_setzero_si128();                                                          \
        __m128i a = zero, c = zero;                                                                        \
        for (size_t i = 0; i < n; i += BPP) {                                                              \
            const uint64_t xs = load_px(src + i, BPP), bs = prev ? load_px(prev + i, BPP) : 0;              \
            const __m128i x = _mm_unpacklo_epi8(_mm_cvtsi64_si128((long long)xs), zero);                   \
            const __m128i b = _mm_unpacklo_epi8(_mm_cvtsi64_si128((long long)bs), zero);                   \
            __m128i pred;                                                                                  \
            if (type == 1) {                                                                               \
                pred = a;                                                                                  \
            } else if (type == 3) {                                                                        \
                pred = _mm_srli_epi16(_mm_add_epi16(a, b), 1);                                             \
            } else {                                                                                       \
                /* pa = |b - c|, pb = |a - c|, pc = |a + b - 2c|: a if pa <= pb, pc; else b if pb <= pc */ \
                const __m128i pb0 = _mm_sub_epi16(a, c), pa0 = _mm_sub_epi16(b, c);                        \
                const __m128i pc0 = _mm_add_epi16(pa0, pb0);                                               \
                const __m128i pa = _mm_max_epi16(pa0, _mm_sub_epi16(zero, pa0));                           \
                const __m128i pb = _mm_max_epi16(pb0, _mm_sub_epi16(zero, pb0));                           \
                const __m128i pc = _mm_max_epi16(pc0, _mm_sub_epi16(zero, pc0));                           \
                const __m128i use_a = _mm_andnot_si128(_mm_or_si128(_mm_cmpgt_epi16(pa, pb),               \
                                                                    _mm_cmpgt_epi16(pa, pc)),              \
                                                       _mm_set1_epi16(-1));                                \
                const __m128i use_b = _mm_andnot_si128(_mm_cmpgt_epi16(pb, pc), _mm_set1_epi16(-1));       \
                const __m128i bc = _mm_or_si128(_mm_and_si128(use_b, b), _mm_andnot_si128(use_b, c));      \
                pred = _mm_or_si128(_mm_and_si128(use_a, a), _mm_andnot_si128(use_a, bc));                 \
            }                                                                                              \
            a = _mm_and_si128(_mm_add_epi16(x, pred), _mm_set1_epi16(0xff));                               \
            c = b;                                                                                         \
            const uint64_t out = (uint64_t)_mm_cvtsi128_si64(_mm_packus_epi16(a, zero));                   \
            memcpy(dst + i, &out, BPP);                                                                    \
        }                                                                                                  \
    }
CK_UNFILTER_PX(3)
CK_UNFILTER_PX(4)
CK_UNFILTER_PX(6)
CK_UNFILTER_PX(8)
#undef CK_UNFILTER_PX
#endif

/*
 * Undo one row's filter: `src` (the filtered bytes) into `dst`, `prev` the
 * row above as unfiltered (NULL for the first). dst may lie before src in
 * the same buffer (the in-place compaction of fast_unfilter): every byte of
 * src is read before a store reaches it, as stores trail the reads.
 */
static void unfilter_row(int type, unsigned char *dst, const unsigned char *src, const unsigned char *prev,
                         size_t n, size_t bpp) {
    if (type == 0) {
        memmove(dst, src, n);
        return;
    }
    if (type == 2) {
        size_t i = 0;
        if (prev) {
            /* 16 bytes loaded before any is stored: safe with dst < src */
            for (; i + 16 <= n; i += 16) {
                unsigned char t[16];
                for (int k = 0; k < 16; k++) t[k] = (unsigned char)(src[i + k] + prev[i + k]);
                memcpy(dst + i, t, 16);
            }
            for (; i < n; i++) dst[i] = (unsigned char)(src[i] + prev[i]);
        } else {
            memmove(dst, src, n);
        }
        return;
    }
#if defined(__SSE2__)
    switch (bpp) {
    case 3: unfilter_px3(type, dst, src, prev, n); return;
    case 4: unfilter_px4(type, dst, src, prev, n); return;
    case 6: unfilter_px6(type, dst, src, prev, n); return;
    case 8: unfilter_px8(type, dst, src, prev, n); return;
    default: break;
    }
#endif
    for (size_t i = 0; i < n; i++) {
        const unsigned a = i >= bpp ? dst[i - bpp] : 0, b = prev ? prev[i] : 0;
        const unsigned c = i >= bpp && prev ? prev[i - bpp] : 0;
        const unsigned x = src[i];
        unsigned v;
        if (type == 1) v = x + a;
        else if (type == 3) v = x + ((a + b) >> 1);
        else v = x + paeth(a, b, c);
        dst[i] = (unsigned char)v;
    }
}

/* buf holds h filtered rows (a filter byte, then rowbytes); unfilter them in
 * place into h * rowbytes packed rows at buf. 0 on a bad filter type. */
static int fast_unfilter(unsigned char *buf, const fast_png *fp) {
    const size_t rb = fp->rowbytes, bpp = (size_t)fp->ch * (fp->wide ? 2u : 1u);
    for (uint32_t y = 0; y < fp->h; y++) {
        const unsigned char *src = buf + (size_t)y * (rb + 1);
        const int type = src[0];
        if (type > 4) return 0;
        unsigned char *dst = buf + (size_t)y * rb;
        unfilter_row(type, dst, src + 1, y ? dst - rb : NULL, rb, bpp);
    }
    return 1;
}

/* Inflate and unfilter into buf (fp->raw bytes): 1 done, 0 decline, -1 out
 * of memory. */
static int fast_inflate(const fast_png *fp, unsigned char *buf) {
    unsigned char *owned;
    const unsigned char *in = fast_idat_stream(fp, &owned);
    struct libdeflate_decompressor *d = in ? libdeflate_alloc_decompressor() : NULL;
    if (!d) {
        free(owned);
        return -1;
    }
    size_t used = 0;
    const enum libdeflate_result res = libdeflate_zlib_decompress_ex(d, in, fp->idat_total, buf, fp->raw, &used, NULL);
    libdeflate_free_decompressor(d);
    free(owned);
    if (res != LIBDEFLATE_SUCCESS || used != fp->idat_total) return 0;
    return fast_unfilter(buf, fp);
}

/*
 * The header the fast path decides on first, before anything is read or
 * allocated: 1 when IHDR describes an image it may take (fp's size fields
 * filled), with `extra` the bytes of the file still to read into memory (0
 * for a memory source); 0 to leave the file to libpng.
 */
static int fast_header(const reader *r, ckey_image_kind kind, int packed, fast_png *fp, size_t *extra) {
    memset(fp, 0, sizeof *fp);
    *extra = 0;
    const unsigned char *ihdr; /* the 25 bytes after the signature */
    if (r->file) {
        if (!r->total_size || r->head_len < 25 || r->head_pos != 0) return 0;
        ihdr = r->head;
    } else {
        if (r->mem_size < 8 + 25) return 0;
        ihdr = r->mem + 8;
    }
    if (be32(ihdr) != 13 || memcmp(ihdr + 4, "IHDR", 4) != 0) return 0;
    const uint32_t w = be32(ihdr + 8), h = be32(ihdr + 12);
    const int depth = ihdr[16], color = ihdr[17];
    if (w == 0 || h == 0 || w > CKEY_IMAGE_MAX_SIDE || h > CKEY_IMAGE_MAX_SIDE ||
        (int64_t)w * (int64_t)h > CKEY_IMAGE_MAX_PIXELS)
        return 0;
    if ((depth != 8 && depth != 16) || ihdr[18] != 0 || ihdr[19] != 0 || ihdr[20] != 0) return 0;
    fp->ch = color == 0 ? 1 : color == 4 ? 2 : color == 2 ? 3 : color == 6 ? 4 : 0;
    if (!fp->ch || (packed && kind == CKEY_IMAGE_RGB && fp->ch < 3)) return 0;
    fp->w = w;
    fp->h = h;
    fp->wide = depth == 16;
    /* within the caps: at most 2^28 pixels of 8 bytes, no overflow */
    fp->rowbytes = (size_t)w * (size_t)fp->ch * (fp->wide ? 2u : 1u);
    fp->raw = (fp->rowbytes + 1) * (size_t)h;
    if (r->file) {
        const long at = ftell(r->file);
        if (at < 0 || (uint64_t)at > r->total_size) return 0;
        const uint64_t rest = r->total_size - (uint64_t)at;
        /* the image's filtered bytes stored without compression, plus room
         * for ancillary chunks; a larger file streams through libpng */
        if (rest > (uint64_t)fp->raw + fp->raw / 64 + ((uint64_t)64 << 20)) return 0;
        *extra = 8 + r->head_len + (size_t)rest;
    }
    return 1;
}

/*
 * Read the file (signature and replayed header first) into `dst` (`extra`
 * bytes, fast_header's) and switch the reader to that memory, so that
 * libpng can read the same bytes. 0 on a read error (r->msg set).
 */
static int fast_slurp(reader *r, unsigned char *dst, size_t extra) {
    memcpy(dst, png_signature, 8);
    memcpy(dst + 8, r->head, r->head_len);
    const size_t want = extra - 8 - r->head_len;
    const size_t got = want ? fread(dst + 8 + r->head_len, 1, want, r->file) : 0;
    if (ferror(r->file)) {
        set_msg(r->msg, sizeof r->msg, &r->status, CKEY_ERR_IO, "read error: %s", strerror(errno));
        return 0;
    }
    r->file = NULL;
    r->mem = dst;
    r->mem_size = 8 + r->head_len + got; /* short when the file shrank: truncated */
    r->mem_pos = 8 + r->head_len;        /* libpng gets the head replayed, then the rest */
    return 1;
}

/* When the fast path declines a file it read into a block that libpng may
 * replace: the bytes moved to r->filebuf. 0 when out of memory. */
static int fast_rescue(reader *r, const void *block, size_t bytes) {
    const unsigned char *b = block;
    if (!b || r->mem < b || r->mem >= b + bytes || r->filebuf) return 1;
    r->filebuf = malloc(r->mem_size ? r->mem_size : 1);
    if (!r->filebuf) {
        set_msg(r->msg, sizeof r->msg, &r->status, CKEY_ERR_NOMEM, "out of memory");
        return 0;
    }
    memcpy(r->filebuf, r->mem, r->mem_size);
    r->mem = r->filebuf;
    return 1;
}
#endif /* CK_HAVE_LIBDEFLATE */

/*
 * Fast float read: CKEY_OK decoded; CKEY_ERR_UNSUPPORTED declined (libpng's
 * then, the reader left at the same bytes); another status an error with
 * r->msg. The pixel block holds, after the image's planes, the inflated rows
 * and (for a file) the file itself: a reader that reuses its block (ck_pixels)
 * then decodes frame after frame without allocating.
 */
static ckey_status fast_decode(reader *r, ckey_image_kind kind, ckey_image *img) {
#ifdef CK_HAVE_LIBDEFLATE
    fast_png fp;
    size_t extra;
    if (!fast_header(r, kind, 0, &fp, &extra)) return CKEY_ERR_UNSUPPORTED;
    const size_t plane = (size_t)fp.w * fp.h;
    const int out_ch = kind == CKEY_IMAGE_RGB ? 3 : 1;
    const int alpha_ch = fp.ch == 2 || fp.ch == 4;
    const int fb = kind == CKEY_IMAGE_HINT && alpha_ch;
    const size_t image_floats = plane * (size_t)(out_ch + fb);
    r->pixels = ck_pixels_take(r->px, image_floats + (fp.raw + extra + sizeof(float) - 1) / sizeof(float));
    if (!r->pixels) return CKEY_ERR_UNSUPPORTED; /* libpng needs less */
    unsigned char *rows = (unsigned char *)(r->pixels + image_floats);
    if (extra && !fast_slurp(r, rows + fp.raw, extra)) return r->status;
    ckey_status st = CKEY_ERR_UNSUPPORTED;
    if (fast_scan(r->mem, r->mem_size, &fp) && fast_inflate(&fp, rows) > 0) st = CKEY_OK;
    if (st != CKEY_OK) {
        if (!fast_rescue(r, r->pixels, r->px->floats * sizeof(float))) return r->status;
        ck_pixels_drop(r->px);
        r->pixels = NULL;
        return st;
    }
    r->fallback = fb ? r->pixels + plane * (size_t)out_ch : NULL;
    int opaque = 1;
    for (uint32_t y = 0; y < fp.h; y++)
        opaque &= convert_row(r, kind, rows + (size_t)y * fp.rowbytes, y, fp.w, plane, fp.ch, fp.wide);
    if (fb && opaque) memcpy(r->pixels, r->fallback, plane * sizeof(float));
    img->width = (int32_t)fp.w;
    img->height = (int32_t)fp.h;
    img->channels = out_ch;
    img->bit_depth = fp.wide ? 16 : 8;
    img->has_alpha = alpha_ch;
    img->data = r->pixels;
    img->capacity = r->px->floats;
    r->pixels = NULL;
    return CKEY_OK;
#else
    (void)r, (void)kind, (void)img;
    return CKEY_ERR_UNSUPPORTED;
#endif
}

/* Fast packed read, as fast_decode: inflated straight into the image's
 * block, which holds the filter bytes too and (for a file) the file after
 * them. Gray read as RGB is libpng's (it replicates the channel). */
static ckey_status fast_decode_packed(reader *r, ckey_image_kind kind) {
#ifdef CK_HAVE_LIBDEFLATE
    fast_png fp;
    size_t extra;
    if (!fast_header(r, kind, 1, &fp, &extra)) return CKEY_ERR_UNSUPPORTED;
    ckey_packed_image *pk = r->pk;
    const size_t need = fp.raw + extra;
    if (!ck_packed_reserve(pk, need)) return CKEY_ERR_UNSUPPORTED;
    unsigned char *px = pk->data;
    if (extra && !fast_slurp(r, px + fp.raw, extra)) return r->status;
    if (!fast_scan(r->mem, r->mem_size, &fp) || fast_inflate(&fp, px) <= 0)
        return fast_rescue(r, px, pk->capacity) ? CKEY_ERR_UNSUPPORTED : r->status;
    const uint16_t one = 1;
    if (fp.wide && *(const unsigned char *)&one == 1) {
        const size_t m = fp.rowbytes * fp.h / 2;
        uint16_t *s = (uint16_t *)(void *)px;
        for (size_t i = 0; i < m; i++) s[i] = (uint16_t)(s[i] << 8 | s[i] >> 8);
    }
    pk->width = (int32_t)fp.w;
    pk->height = (int32_t)fp.h;
    pk->channels = fp.ch;
    pk->type = fp.wide ? CKEY_SAMPLE_U16 : CKEY_SAMPLE_U8;
    pk->hint_channel = kind == CKEY_IMAGE_HINT ? packed_hint_channel(px, fp.w, fp.h, fp.ch, fp.wide) : -1;
    return CKEY_OK;
#else
    (void)r, (void)kind;
    return CKEY_ERR_UNSUPPORTED;
#endif
}

/* The image decoded by the fast path, else by libpng (r->decoder may force
 * either): into out, or with out NULL into r->pk (the packed read). */
static ckey_status decode_either(reader *r, ckey_image_kind kind, ckey_image *out) {
    ckey_status st = r->decoder == CK_PNG_LIBPNG ? CKEY_ERR_UNSUPPORTED
                     : out                       ? fast_decode(r, kind, out)
                                                 : fast_decode_packed(r, kind);
    if (st == CKEY_ERR_UNSUPPORTED && r->decoder == CK_PNG_FAST) {
        snprintf(r->msg, sizeof r->msg, "not a PNG for the fast path");
    } else if (st == CKEY_ERR_UNSUPPORTED) {
        r->png = png_create_read_struct(PNG_LIBPNG_VER_STRING, r, rd_error, ignore_warning);
        if (r->png) r->info = png_create_info_struct(r->png);
        if (!r->png || !r->info) {
            st = CKEY_ERR_NOMEM;
            snprintf(r->msg, sizeof r->msg, "out of memory creating the PNG reader");
        } else {
            st = out ? decode(r, kind, out) : decode_packed(r, kind);
        }
        png_destroy_read_struct(r->png ? &r->png : NULL, r->info ? &r->info : NULL, NULL);
    }
    return st;
}

/* r reading the stream f, after the nhead (<= 8) bytes of `head` that were
 * already taken from it (replayed before the stream's bytes). */
static void reader_on_stream(reader *r, const char *label, FILE *f, const void *head, size_t nhead) {
    memset(r, 0, sizeof *r);
    r->label = label;
    r->file = f;
    if (nhead) memcpy(r->head, head, nhead);
    r->head_len = nhead;
    struct stat sb;
    if (fstat(fileno(f), &sb) == 0 && S_ISREG(sb.st_mode)) r->total_size = (uint64_t)sb.st_size;
}

/* r reading the size bytes at data with the decoders `decoder` allows. */
static void reader_on_memory(reader *r, const char *label, const void *data, size_t size, ck_png_decoder decoder) {
    memset(r, 0, sizeof *r);
    r->label = label;
    r->mem = data;
    r->mem_size = size;
    r->total_size = size;
    r->decoder = decoder;
}

/* The packed read from r's source (signature not yet read). */
static ckey_status read_packed(reader *r, ckey_image_kind kind, ckey_error *err) {
    ckey_packed_image *pk = r->pk;
    unsigned char sig[8];
    const size_t got = src_read(r, sig, sizeof sig);
    if (r->file && ferror(r->file))
        return ck_fail(err, CKEY_ERR_IO, "%s: read error: %s", r->label, strerror(errno));
    if (got < sizeof sig || memcmp(sig, png_signature, sizeof sig) != 0)
        return ck_fail(err, CKEY_ERR_FORMAT, "%s: not a PNG file", r->label);
    pk->width = pk->height = pk->channels = 0;
    r->status = CKEY_ERR_FORMAT;
    ckey_status st = precheck_ihdr(r);
    if (st != CKEY_OK) return ck_fail(err, st, "%s: %s", r->label, r->msg);
    st = decode_either(r, kind, NULL);
    free(r->row_ptrs);
    free(r->filebuf);
    if (st != CKEY_OK) {
        pk->width = pk->height = pk->channels = 0;
        return ck_fail(err, st, "%s: %s", r->label, r->msg[0] ? r->msg : "invalid PNG");
    }
    return CKEY_OK;
}

ckey_status ck_image_read_png_packed_stream(FILE *f, const void *head, size_t nhead, const char *label,
                                            ckey_image_kind kind, ckey_packed_image *pk, ckey_error *err) {
    if (!label) label = "(stream)";
    if (!f || !pk || (!head && nhead) || nhead > 8 || !valid_kind(kind))
        return ck_fail(err, CKEY_ERR_INVALID_ARG, "%s: invalid arguments to the PNG reader", label);
    reader r;
    reader_on_stream(&r, label, f, head, nhead);
    r.pk = pk;
    return read_packed(&r, kind, err);
}

ckey_status ck_png_read_packed_memory_with(const void *data, size_t size, const char *label, ckey_image_kind kind,
                                           ck_png_decoder decoder, ckey_packed_image *pk, ckey_error *err) {
    if (!label) label = "(memory)";
    if (!pk || (!data && size) || !valid_kind(kind))
        return ck_fail(err, CKEY_ERR_INVALID_ARG, "%s: invalid arguments to the PNG reader", label);
    reader r;
    reader_on_memory(&r, label, data, size, decoder);
    r.pk = pk;
    return read_packed(&r, kind, err);
}

static ckey_status read_png(reader *r, ckey_image_kind kind, ckey_image *out, ckey_error *err) {
    unsigned char sig[8];
    const size_t got = src_read(r, sig, sizeof sig);
    if (r->file && ferror(r->file))
        return ck_fail(err, CKEY_ERR_IO, "%s: read error: %s", r->label, strerror(errno));
    if (got == 0) return ck_fail(err, CKEY_ERR_FORMAT, "%s: empty file, not a PNG", r->label);
    if (memcmp(sig, png_signature, got) != 0)
        return ck_fail(err, CKEY_ERR_FORMAT, "%s: not a PNG file", r->label);
    if (got < sizeof sig) return ck_fail(err, CKEY_ERR_FORMAT, "%s: truncated", r->label);

    r->status = CKEY_ERR_FORMAT;
    ckey_status st = precheck_ihdr(r);
    if (st != CKEY_OK) return ck_fail(err, st, "%s: %s", r->label, r->msg);
    st = decode_either(r, kind, out);
    free(r->rows);
    free(r->row_ptrs);
    free(r->filebuf);
    if (r->pixels) ck_pixels_drop(r->px);
    if (st != CKEY_OK) {
        memset(out, 0, sizeof *out);
        return ck_fail(err, st, "%s: %s", r->label, r->msg[0] ? r->msg : "invalid PNG");
    }
    return CKEY_OK;
}

static int valid_kind(ckey_image_kind kind) {
    return kind == CKEY_IMAGE_RGB || kind == CKEY_IMAGE_HINT;
}

ckey_status ck_image_read_png_memory(const void *data, size_t size, const char *label,
                                     ckey_image_kind kind, ckey_image *out, ckey_error *err) {
    return ck_png_read_memory_with(data, size, label, kind, CK_PNG_ANY, NULL, out, err);
}

ckey_status ck_png_read_memory_with(const void *data, size_t size, const char *label, ckey_image_kind kind,
                                    ck_png_decoder decoder, ck_pixels *px, ckey_image *out, ckey_error *err) {
    if (out) memset(out, 0, sizeof *out);
    if (!label) label = "(memory)";
    if (!out || (!data && size) || !valid_kind(kind))
        return ck_fail(err, CKEY_ERR_INVALID_ARG, "%s: invalid arguments to the PNG reader",
                       label);
    reader r;
    reader_on_memory(&r, label, data, size, decoder);
    ck_pixels own = {0};
    r.px = px ? px : &own;
    return read_png(&r, kind, out, err);
}

ckey_status ck_image_read_png_stream(FILE *f, const void *head, size_t nhead, const char *label,
                                     ckey_image_kind kind, ckey_image *out, ckey_error *err) {
    return ck_image_read_png_stream_px(f, head, nhead, label, kind, NULL, out, err);
}

ckey_status ck_image_read_png_stream_px(FILE *f, const void *head, size_t nhead, const char *label,
                                        ckey_image_kind kind, ck_pixels *px, ckey_image *out, ckey_error *err) {
    if (out) memset(out, 0, sizeof *out);
    if (!label) label = "(stream)";
    if (!f || !out || (!head && nhead) || nhead > 8 || !valid_kind(kind))
        return ck_fail(err, CKEY_ERR_INVALID_ARG, "%s: invalid arguments to the PNG reader", label);
    reader r;
    reader_on_stream(&r, label, f, head, nhead);
    ck_pixels own = {0};
    r.px = px ? px : &own;
    return read_png(&r, kind, out, err);
}

ckey_status ckey_image_read_png(const char *path, ckey_image_kind kind, ckey_image *out,
                                ckey_error *err) {
    if (out) memset(out, 0, sizeof *out);
    if (!path || !out || !valid_kind(kind))
        return ck_fail(err, CKEY_ERR_INVALID_ARG, "ckey_image_read_png: invalid arguments");
    FILE *f = NULL;
    ckey_status st = ck_open_input(path, CK_INPUT_TIMEOUT_MS, &f, err);
    if (st != CKEY_OK) return st;
    st = ck_image_read_png_stream(f, NULL, 0, path, kind, out, err);
    fclose(f);
    return st;
}

/* ------------------------------------------------------------- writing */

typedef struct writer {
    const char *label;
    ckey_status status;
    char msg[256];
    png_structp png;
    png_infop info;
    FILE *file;
    unsigned char *row;
} writer;

static void wr_error(png_structp png, png_const_charp msg) {
    writer *w = png_get_error_ptr(png);
    set_msg(w->msg, sizeof w->msg, &w->status, CKEY_ERR_IO, "%s", msg);
    png_longjmp(png, 1);
}

/* libpng's output through stdio, keeping the system's reason for a failed
 * write ("No space left on device", "File too large"): libpng's own writer
 * reports every failure as "Write Error". */
static void wr_bytes(png_structp png, png_bytep data, size_t len) {
    writer *w = png_get_io_ptr(png);
    errno = 0;
    if (fwrite(data, 1, len, w->file) != len) {
        set_msg(w->msg, sizeof w->msg, &w->status, CKEY_ERR_IO, "write failed: %s", strerror(errno ? errno : EIO));
        png_error(png, w->msg);
    }
}

static void wr_flush(png_structp png) {
    writer *w = png_get_io_ptr(png);
    errno = 0;
    if (fflush(w->file) != 0) {
        set_msg(w->msg, sizeof w->msg, &w->status, CKEY_ERR_IO, "write failed: %s", strerror(errno ? errno : EIO));
        png_error(png, w->msg);
    }
}

/* [0, 1] -> 0..maxv, nearest; NaN and negatives to 0. */
static inline unsigned quantize(float v, unsigned maxv) {
    if (!(v > 0.0f)) return 0;
    if (v >= 1.0f) return maxv;
    return (unsigned)((double)v * maxv + 0.5);
}

/* numpy's (np.clip(v, 0, 1) * 255.0).astype(np.uint8) on float32: the
 * product rounded to float32, then truncated; NaN to 0. */
static inline unsigned quantize_trunc(float v, unsigned maxv) {
    if (!(v > 0.0f)) return 0;
    if (v >= 1.0f) return maxv;
    const float p = v * (float)maxv;
    return (unsigned)p;
}

/* Row y of the image as the PNG stores it (rowbytes, no filter byte): the
 * float planes quantized as `q` says, or the 8-bit planes u8 (then data is
 * NULL) as they are. Every writer's samples come from here. */
static void pack_row(unsigned char *p, const float *data, const uint8_t *u8, int ch, png_uint_32 width,
                     size_t plane, png_uint_32 y, int depth, ck_png_quantize q) {
    if (u8) {
        for (png_uint_32 x = 0; x < width; x++)
            for (int c = 0; c < ch; c++) *p++ = u8[(size_t)c * plane + (size_t)y * width + x];
        return;
    }
    const unsigned maxv = depth == 16 ? 65535u : 255u;
    for (png_uint_32 x = 0; x < width; x++) {
        for (int c = 0; c < ch; c++) {
            const float v = data[(size_t)c * plane + (size_t)y * width + x];
            const unsigned k = q == CK_PNG_TRUNCATE ? quantize_trunc(v, maxv) : quantize(v, maxv);
            if (depth == 16) *p++ = (unsigned char)(k >> 8);
            *p++ = (unsigned char)k;
        }
    }
}

/* The image's samples (pack_row) through libpng. */
static ckey_status encode(writer *w, const float *data, const uint8_t *u8, int ch, png_uint_32 width,
                          png_uint_32 height, int depth, ck_png_quantize q, int level) {
    if (setjmp(png_jmpbuf(w->png))) return w->status;
    png_structp png = w->png;
    static const int types[5] = {0, PNG_COLOR_TYPE_GRAY, PNG_COLOR_TYPE_GRAY_ALPHA,
                                 PNG_COLOR_TYPE_RGB, PNG_COLOR_TYPE_RGB_ALPHA};
    png_set_write_fn(png, w, wr_bytes, wr_flush);
    png_set_IHDR(png, w->info, width, height, depth, types[ch], PNG_INTERLACE_NONE,
                 PNG_COMPRESSION_TYPE_DEFAULT, PNG_FILTER_TYPE_DEFAULT);
    if (level == CK_PNG_LEVEL_RLE || level == CK_PNG_LEVEL_RLE_ZLIB) {
        /* (CK_PNG_LEVEL_RLE without libdeflate) Up-filtered rows, deflated
         * as runs of repeated bytes only: on a grainy 4K image 2.9 times
         * faster than level 3 with libpng's adaptive filters, and 9% smaller
         * (bench/bench-exr-deflate.c) */
        png_set_filter(png, 0, PNG_FILTER_UP);
        png_set_compression_level(png, 1);
        png_set_compression_strategy(png, Z_RLE);
    } else {
        png_set_compression_level(png, level);
    }
    png_write_info(png, w->info);
    const size_t plane = (size_t)width * height;
    for (png_uint_32 y = 0; y < height; y++) {
        pack_row(w->row, data, u8, ch, width, plane, y, depth, q);
        png_write_row(png, w->row);
    }
    png_write_end(png, NULL);
    return CKEY_OK;
}

/* A writer's buffers, kept from image to image (one image at a time). */
struct ck_png_writer {
#ifdef CK_HAVE_LIBDEFLATE
    struct libdeflate_compressor *ld; /* level 1 */
    unsigned char *raw;               /* the filtered image: a filter byte and the row, each row */
    size_t raw_cap;
    unsigned char *z;                 /* its zlib stream */
    size_t z_cap;
    unsigned char *rows;              /* two unfiltered rows: this one and the one above */
    size_t rows_cap;
#endif
    int unused;
};

ck_png_writer *ck_png_writer_new(void) { return calloc(1, sizeof(ck_png_writer)); }

void ck_png_writer_free(ck_png_writer *pw) {
    if (!pw) return;
#ifdef CK_HAVE_LIBDEFLATE
    if (pw->ld) libdeflate_free_compressor(pw->ld);
    free(pw->raw);
    free(pw->z);
    free(pw->rows);
#endif
    free(pw);
}

#ifdef CK_HAVE_LIBDEFLATE
/* IDAT chunks of at most this much of the zlib stream each */
#define CK_PNG_IDAT_BYTES ((size_t)1 << 20)

static void put_be32(unsigned char *p, uint32_t v) {
    p[0] = (unsigned char)(v >> 24), p[1] = (unsigned char)(v >> 16);
    p[2] = (unsigned char)(v >> 8), p[3] = (unsigned char)v;
}

/* `n` bytes at least in *buf (keeping nothing); 0 when out of memory. */
static int grow(unsigned char **buf, size_t *cap, size_t n) {
    if (n <= *cap) return 1;
    free(*buf);
    *buf = malloc(n);
    *cap = *buf ? n : 0;
    return *buf != NULL;
}

/* One chunk: length, type, data, CRC of type and data. */
static int put_chunk(writer *w, const char *type, const unsigned char *data, size_t len) {
    unsigned char head[8], tail[4];
    put_be32(head, (uint32_t)len);
    memcpy(head + 4, type, 4);
    uint32_t crc = (uint32_t)libdeflate_crc32(0, head + 4, 4);
    if (len) crc = (uint32_t)libdeflate_crc32(crc, data, len);
    put_be32(tail, crc);
    errno = 0;
    if (fwrite(head, 1, 8, w->file) != 8 || (len && fwrite(data, 1, len, w->file) != len) ||
        fwrite(tail, 1, 4, w->file) != 4) {
        set_msg(w->msg, sizeof w->msg, &w->status, CKEY_ERR_IO, "write failed: %s", strerror(errno ? errno : EIO));
        return 0;
    }
    return 1;
}

/* CK_PNG_LEVEL_RLE with libdeflate, without libpng: the samples of encode()
 * (pack_row), every row Up-filtered, the whole image deflated at once by
 * libdeflate at level 1 (on a grainy 4K Comp about 2 times faster than
 * zlib's Z_RLE through libpng, 10% larger: bench/bench-exr-deflate.c), the
 * stream cut into IDAT chunks of CK_PNG_IDAT_BYTES. The buffers are pw's. */
static ckey_status encode_up_deflate(writer *w, ck_png_writer *pw, const float *data, const uint8_t *u8, int ch,
                                     png_uint_32 width, png_uint_32 height, int depth, ck_png_quantize q) {
    const size_t rowbytes = (size_t)width * (size_t)ch * (size_t)(depth / 8);
    const size_t raw = (size_t)height * (rowbytes + 1), plane = (size_t)width * height;
    if (!pw->ld && !(pw->ld = libdeflate_alloc_compressor(1))) goto nomem;
    if (!grow(&pw->raw, &pw->raw_cap, raw) || !grow(&pw->rows, &pw->rows_cap, 2 * rowbytes)) goto nomem;
    const size_t bound = libdeflate_zlib_compress_bound(pw->ld, raw);
    if (!grow(&pw->z, &pw->z_cap, bound)) goto nomem;

    unsigned char *cur = pw->rows, *prev = pw->rows + rowbytes;
    memset(prev, 0, rowbytes); /* the row above the first: zeros */
    for (png_uint_32 y = 0; y < height; y++) {
        unsigned char *dst = pw->raw + (size_t)y * (rowbytes + 1);
        pack_row(cur, data, u8, ch, width, plane, y, depth, q);
        dst[0] = 2; /* Up */
        for (size_t i = 0; i < rowbytes; i++) dst[1 + i] = (unsigned char)(cur[i] - prev[i]);
        unsigned char *t = cur;
        cur = prev, prev = t;
    }
    const size_t zn = libdeflate_zlib_compress(pw->ld, pw->raw, raw, pw->z, pw->z_cap);
    if (!zn) { /* cannot happen with the bound's room */
        set_msg(w->msg, sizeof w->msg, &w->status, CKEY_ERR_IO, "deflate failed");
        return CKEY_ERR_IO;
    }

    static const unsigned char color_type[5] = {0, 0, 4, 2, 6};
    unsigned char ihdr[13];
    put_be32(ihdr, width);
    put_be32(ihdr + 4, height);
    ihdr[8] = (unsigned char)depth, ihdr[9] = color_type[ch];
    ihdr[10] = ihdr[11] = ihdr[12] = 0; /* deflate, adaptive filtering, not interlaced */
    errno = 0;
    if (fwrite(png_signature, 1, 8, w->file) != 8) {
        set_msg(w->msg, sizeof w->msg, &w->status, CKEY_ERR_IO, "write failed: %s", strerror(errno ? errno : EIO));
        return CKEY_ERR_IO;
    }
    if (!put_chunk(w, "IHDR", ihdr, sizeof ihdr)) return w->status;
    for (size_t off = 0; off < zn; off += CK_PNG_IDAT_BYTES) {
        const size_t len = zn - off < CK_PNG_IDAT_BYTES ? zn - off : CK_PNG_IDAT_BYTES;
        if (!put_chunk(w, "IDAT", pw->z + off, len)) return w->status;
    }
    if (!put_chunk(w, "IEND", NULL, 0)) return w->status;
    return CKEY_OK;
nomem:
    set_msg(w->msg, sizeof w->msg, &w->status, CKEY_ERR_NOMEM, "out of memory");
    return CKEY_ERR_NOMEM;
}
#endif /* CK_HAVE_LIBDEFLATE */

/* The arguments every PNG writer checks before touching the disk. */
static ckey_status check_write_args(const char *label, const void *data, int32_t channels, int32_t width,
                                    int32_t height, int32_t bit_depth, ckey_error *err) {
    if (!label || !*label || !data)
        return ck_fail(err, CKEY_ERR_INVALID_ARG, "ckey_image_write_png: %s",
                       !label || !*label ? "no path" : "no pixels");
    if (channels != 1 && channels != 3 && channels != 4)
        return ck_fail(err, CKEY_ERR_INVALID_ARG, "%s: cannot write %d channels (1, 3 or 4)",
                       label, channels);
    if (bit_depth != 8 && bit_depth != 16)
        return ck_fail(err, CKEY_ERR_INVALID_ARG, "%s: bit depth %d (8 or 16)", label, bit_depth);
    if (width < 1 || height < 1 || width > CKEY_IMAGE_MAX_SIDE || height > CKEY_IMAGE_MAX_SIDE ||
        (int64_t)width * height > CKEY_IMAGE_MAX_PIXELS)
        return ck_fail(err, CKEY_ERR_INVALID_ARG, "%s: cannot write a %d x %d image", label,
                       (int)width, (int)height);
    return CKEY_OK;
}

/* Encode into w->file and flush it; on failure the status, with the reason
 * in w->msg. */
static ckey_status write_png_file(writer *w, ck_png_writer *pw, const float *data, const uint8_t *u8,
                                  int32_t channels, int32_t width, int32_t height, int32_t bit_depth,
                                  ck_png_quantize q, int level) {
    ckey_status st;
    w->status = CKEY_ERR_IO;
#ifdef CK_HAVE_LIBDEFLATE
    if (level == CK_PNG_LEVEL_RLE) {
        ck_png_writer own = {0};
        st = encode_up_deflate(w, pw ? pw : &own, data, u8, channels, (png_uint_32)width, (png_uint_32)height,
                               bit_depth, q);
        if (!pw) {
            if (own.ld) libdeflate_free_compressor(own.ld);
            free(own.raw);
            free(own.z);
            free(own.rows);
        }
        if (st == CKEY_OK && fflush(w->file) != 0) {
            st = CKEY_ERR_IO;
            snprintf(w->msg, sizeof w->msg, "write failed: %s", strerror(errno));
        }
        return st;
    }
#endif
    (void)pw;
    w->row = malloc((size_t)width * (size_t)channels * (size_t)(bit_depth / 8));
    w->png = png_create_write_struct(PNG_LIBPNG_VER_STRING, w, wr_error, ignore_warning);
    if (w->png) w->info = png_create_info_struct(w->png);
    if (!w->row || !w->png || !w->info) {
        st = CKEY_ERR_NOMEM;
        snprintf(w->msg, sizeof w->msg, "out of memory");
    } else {
        st = encode(w, data, u8, channels, (png_uint_32)width, (png_uint_32)height, bit_depth, q, level);
    }
    png_destroy_write_struct(w->png ? &w->png : NULL, w->info ? &w->info : NULL);
    free(w->row);
    w->row = NULL;
    if (st == CKEY_OK && fflush(w->file) != 0) {
        st = CKEY_ERR_IO;
        snprintf(w->msg, sizeof w->msg, "write failed: %s", strerror(errno));
    }
    return st;
}

ckey_status ck_png_write_stream(FILE *f, const char *label, const float *data, int32_t channels,
                                int32_t width, int32_t height, int32_t bit_depth, ck_png_quantize q,
                                int level, ckey_error *err) {
    ckey_status st = check_write_args(label, data, channels, width, height, bit_depth, err);
    if (st != CKEY_OK) return st;
    writer w;
    memset(&w, 0, sizeof w);
    w.label = label;
    w.file = f;
    st = write_png_file(&w, NULL, data, NULL, channels, width, height, bit_depth, q, level);
    if (st != CKEY_OK) return ck_fail(err, st, "%s: %s", label, w.msg[0] ? w.msg : "write failed");
    return CKEY_OK;
}

ckey_status ckey_image_write_png(const char *path, const float *data, int32_t channels,
                                 int32_t width, int32_t height, int32_t bit_depth,
                                 ckey_error *err) {
    return ck_image_write_png_q(path, data, channels, width, height, bit_depth, CK_PNG_ROUND, 3, err);
}

ckey_status ck_image_write_png_q(const char *path, const float *data, int32_t channels,
                                 int32_t width, int32_t height, int32_t bit_depth,
                                 ck_png_quantize q, int level, ckey_error *err) {
    return ck_image_write_png_qt(path, data, channels, width, height, bit_depth, q, level, NULL, err);
}

/* A PNG of the floats `data` or the 8-bit samples `u8`, written atomically. */
static ckey_status write_png_path(ck_png_writer *pw, const char *path, const float *data, const uint8_t *u8,
                                  int32_t channels,
                                  int32_t width, int32_t height, int32_t bit_depth, ck_png_quantize q, int level,
                                  double *io_seconds, ckey_error *err) {
    if (io_seconds) *io_seconds = 0;
    ckey_status st = check_write_args(path, u8 ? (const void *)u8 : (const void *)data, channels, width, height,
                                      bit_depth, err);
    if (st != CKEY_OK) return st;
    char *tmp = ckey_temp_path(path);
    if (!tmp) return ck_fail(err, CKEY_ERR_NOMEM, "%s: out of memory", path);

    writer w;
    memset(&w, 0, sizeof w);
    w.label = path;
    w.file = fopen(tmp, "wb");
    if (!w.file) {
        st = ck_fail(err, CKEY_ERR_IO, "%s: cannot create %s: %s", path, tmp, strerror(errno));
        free(tmp);
        return st;
    }
    st = write_png_file(&w, pw, u8 ? NULL : data, u8, channels, width, height, bit_depth, q, level);
    const double t_io = ck_now();

    /* Only data that reached the disk may take the final name. */
    if (st == CKEY_OK && fsync(fileno(w.file)) != 0) {
        st = CKEY_ERR_IO;
        snprintf(w.msg, sizeof w.msg, "write failed: %s", strerror(errno));
    }
    if (fclose(w.file) != 0 && st == CKEY_OK) {
        st = CKEY_ERR_IO;
        snprintf(w.msg, sizeof w.msg, "write failed: %s", strerror(errno));
    }
    if (st == CKEY_OK && rename(tmp, path) != 0) {
        st = CKEY_ERR_IO;
        snprintf(w.msg, sizeof w.msg, "cannot rename %s into place: %s", tmp, strerror(errno));
    }
    if (st != CKEY_OK) {
        unlink(tmp);
        free(tmp);
        return ck_fail(err, st, "%s: %s", path, w.msg[0] ? w.msg : "write failed");
    }
    free(tmp);
    ck_sync_parent_dir(path);
    if (io_seconds) *io_seconds = ck_now() - t_io;
    return CKEY_OK;
}

ckey_status ck_image_write_png_qt(const char *path, const float *data, int32_t channels,
                                  int32_t width, int32_t height, int32_t bit_depth,
                                  ck_png_quantize q, int level, double *io_seconds, ckey_error *err) {
    return write_png_path(NULL, path, data, NULL, channels, width, height, bit_depth, q, level, io_seconds, err);
}

ckey_status ck_image_write_png_u8(const char *path, const uint8_t *data, int32_t channels, int32_t width,
                                  int32_t height, int level, double *io_seconds, ckey_error *err) {
    return write_png_path(NULL, path, NULL, data, channels, width, height, 8, CK_PNG_ROUND, level, io_seconds, err);
}

ckey_status ck_png_writer_write(ck_png_writer *pw, const char *path, const float *data, int32_t channels,
                                int32_t width, int32_t height, int32_t bit_depth, ck_png_quantize q, int level,
                                double *io_seconds, ckey_error *err) {
    return write_png_path(pw, path, data, NULL, channels, width, height, bit_depth, q, level, io_seconds, err);
}

ckey_status ck_png_writer_write_u8(ck_png_writer *pw, const char *path, const uint8_t *data, int32_t channels,
                                   int32_t width, int32_t height, int level, double *io_seconds, ckey_error *err) {
    return write_png_path(pw, path, NULL, data, channels, width, height, 8, CK_PNG_ROUND, level, io_seconds, err);
}

#endif /* CK_HAVE_PNG */
