/*
 * PNG in and out through libpng.
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

ckey_status ck_image_write_png_qt(const char *path, const float *data, int32_t channels,
                                  int32_t width, int32_t height, int32_t bit_depth,
                                  ck_png_quantize q, int level, double *io_seconds, ckey_error *err) {
    if (io_seconds) *io_seconds = 0;
    return ck_image_write_png_q(path, data, channels, width, height, bit_depth, q, level, err);
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

/* The setjmp frame: reads header and pixels into r's buffers. */
static ckey_status decode(reader *r, ckey_image_kind kind, ckey_image *img) {
    if (setjmp(png_jmpbuf(r->png))) return r->status;
    png_structp png = r->png;
    png_infop info = r->info;
    png_set_sig_bytes(png, 8);
    png_set_read_fn(png, r, rd_bytes);
    /* The dimension caps below are ours; lift libpng's (1e6) so there is
     * one gate and one message. */
    png_set_user_limits(png, 0x7fffffffu, 0x7fffffffu);
    png_set_chunk_malloc_max(png, CK_PNG_CHUNK_MAX);
    png_read_info(png, info);

    png_uint_32 w, h;
    int depth, color, interlace;
    png_get_IHDR(png, info, &w, &h, &depth, &color, &interlace, NULL, NULL);
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
    if (color == PNG_COLOR_TYPE_PALETTE) png_set_palette_to_rgb(png);
    if (color == PNG_COLOR_TYPE_GRAY && depth < 8) png_set_expand_gray_1_2_4_to_8(png);
    if (png_get_valid(png, info, PNG_INFO_tRNS)) png_set_tRNS_to_alpha(png);
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
    /* Deflate cannot compress better than ~1032:1, so a file too small to
     * hold the pixel data is refused here, before a tiny forged header makes
     * us allocate gigabytes only to find the data missing. */
    const uint64_t raw_bytes = ((uint64_t)rowbytes + 1) * h;
    if (r->total_size && r->total_size < raw_bytes / 1032) {
        set_msg(r->msg, sizeof r->msg, &r->status, CKEY_ERR_FORMAT,
                "truncated (%lu x %lu pixels need at least %llu bytes, the file has %llu)",
                (unsigned long)w, (unsigned long)h, (unsigned long long)(raw_bytes / 1032),
                (unsigned long long)r->total_size);
        return r->status;
    }
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

/* The setjmp frame of a packed read: rows go straight into r->pk's block,
 * as libpng leaves them (16-bit samples swapped to the host's order). */
static ckey_status decode_packed(reader *r, ckey_image_kind kind) {
    if (setjmp(png_jmpbuf(r->png))) return r->status;
    png_structp png = r->png;
    png_infop info = r->info;
    ckey_packed_image *pk = r->pk;
    png_set_sig_bytes(png, 8);
    png_set_read_fn(png, r, rd_bytes);
    png_set_user_limits(png, 0x7fffffffu, 0x7fffffffu);
    png_set_chunk_malloc_max(png, CK_PNG_CHUNK_MAX);
    png_read_info(png, info);
    png_uint_32 w, h;
    int depth, color, interlace;
    png_get_IHDR(png, info, &w, &h, &depth, &color, &interlace, NULL, NULL);
    if (w > CKEY_IMAGE_MAX_SIDE || h > CKEY_IMAGE_MAX_SIDE || (int64_t)w * (int64_t)h > CKEY_IMAGE_MAX_PIXELS) {
        set_msg(r->msg, sizeof r->msg, &r->status, CKEY_ERR_UNSUPPORTED, "%lu x %lu exceeds the size limits",
                (unsigned long)w, (unsigned long)h);
        return r->status;
    }
    if (color == PNG_COLOR_TYPE_PALETTE) png_set_palette_to_rgb(png);
    if (color == PNG_COLOR_TYPE_GRAY && depth < 8) png_set_expand_gray_1_2_4_to_8(png);
    if (png_get_valid(png, info, PNG_INFO_tRNS)) png_set_tRNS_to_alpha(png);
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
    const uint64_t raw_bytes = ((uint64_t)rowbytes + 1) * h;
    if (r->total_size && r->total_size < raw_bytes / 1032) {
        set_msg(r->msg, sizeof r->msg, &r->status, CKEY_ERR_FORMAT,
                "truncated (%lu x %lu pixels need at least %llu bytes, the file has %llu)", (unsigned long)w,
                (unsigned long)h, (unsigned long long)(raw_bytes / 1032), (unsigned long long)r->total_size);
        return r->status;
    }
    const size_t bytes = rowbytes * h;
    if (bytes > pk->capacity) {
        if (pk->data) {
            if (pk->release) pk->release(pk->alloc_user, pk->data);
            else free(pk->data);
        }
        pk->data = pk->alloc ? pk->alloc(pk->alloc_user, bytes) : malloc(bytes);
        pk->capacity = pk->data ? bytes : 0;
    }
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
    int32_t hint_ch = -1;
    if (kind == CKEY_IMAGE_HINT) {
        /* the alpha unless it is entirely opaque, else blue or gray (convert_row's rule) */
        int opaque = 1;
        if (ch == 2 || ch == 4) {
            const size_t n = (size_t)w * h;
            if (wide) {
                const uint16_t *s = (const uint16_t *)(const void *)px;
                for (size_t i = 0; i < n && opaque; i++) opaque = s[i * (size_t)ch + (size_t)ch - 1] == 65535u;
            } else {
                for (size_t i = 0; i < n && opaque; i++) opaque = px[i * (size_t)ch + (size_t)ch - 1] == 255u;
            }
        }
        hint_ch = (ch == 2 || ch == 4) && !opaque ? ch - 1 : ch >= 3 ? 2 : 0;
    }
    pk->width = (int32_t)w;
    pk->height = (int32_t)h;
    pk->channels = ch;
    pk->type = wide ? CKEY_SAMPLE_U16 : CKEY_SAMPLE_U8;
    pk->hint_channel = hint_ch;
    return CKEY_OK;
}

ckey_status ck_image_read_png_packed_stream(FILE *f, const void *head, size_t nhead, const char *label,
                                            ckey_image_kind kind, ckey_packed_image *pk, ckey_error *err) {
    if (!label) label = "(stream)";
    if (!f || !pk || (!head && nhead) || nhead > 8 || !valid_kind(kind))
        return ck_fail(err, CKEY_ERR_INVALID_ARG, "%s: invalid arguments to the PNG reader", label);
    reader r;
    memset(&r, 0, sizeof r);
    r.label = label;
    r.file = f;
    r.pk = pk;
    if (nhead) memcpy(r.head, head, nhead);
    r.head_len = nhead;
    struct stat sb;
    if (fstat(fileno(f), &sb) == 0 && S_ISREG(sb.st_mode)) r.total_size = (uint64_t)sb.st_size;
    unsigned char sig[8];
    const size_t got = src_read(&r, sig, sizeof sig);
    if (ferror(f)) return ck_fail(err, CKEY_ERR_IO, "%s: read error: %s", label, strerror(errno));
    if (got < sizeof sig || memcmp(sig, png_signature, sizeof sig) != 0)
        return ck_fail(err, CKEY_ERR_FORMAT, "%s: not a PNG file", label);
    pk->width = pk->height = pk->channels = 0;
    r.status = CKEY_ERR_FORMAT;
    ckey_status st = precheck_ihdr(&r);
    if (st != CKEY_OK) return ck_fail(err, st, "%s: %s", label, r.msg);
    r.png = png_create_read_struct(PNG_LIBPNG_VER_STRING, &r, rd_error, ignore_warning);
    if (r.png) r.info = png_create_info_struct(r.png);
    if (!r.png || !r.info) {
        st = CKEY_ERR_NOMEM;
        snprintf(r.msg, sizeof r.msg, "out of memory creating the PNG reader");
    } else {
        st = decode_packed(&r, kind);
    }
    png_destroy_read_struct(r.png ? &r.png : NULL, r.info ? &r.info : NULL, NULL);
    free(r.row_ptrs);
    if (st != CKEY_OK) {
        pk->width = pk->height = pk->channels = 0;
        return ck_fail(err, st, "%s: %s", label, r.msg[0] ? r.msg : "invalid PNG");
    }
    return CKEY_OK;
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
    r->png = png_create_read_struct(PNG_LIBPNG_VER_STRING, r, rd_error, ignore_warning);
    if (r->png) r->info = png_create_info_struct(r->png);
    if (!r->png || !r->info) {
        st = CKEY_ERR_NOMEM;
        snprintf(r->msg, sizeof r->msg, "out of memory creating the PNG reader");
    } else {
        st = decode(r, kind, out);
    }
    png_destroy_read_struct(r->png ? &r->png : NULL, r->info ? &r->info : NULL, NULL);
    free(r->rows);
    free(r->row_ptrs);
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
    if (out) memset(out, 0, sizeof *out);
    if (!label) label = "(memory)";
    if (!out || (!data && size) || !valid_kind(kind))
        return ck_fail(err, CKEY_ERR_INVALID_ARG, "%s: invalid arguments to the PNG reader",
                       label);
    reader r;
    memset(&r, 0, sizeof r);
    r.label = label;
    r.mem = data;
    r.mem_size = size;
    r.total_size = size;
    ck_pixels own = {0};
    r.px = &own;
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
    memset(&r, 0, sizeof r);
    r.label = label;
    r.file = f;
    ck_pixels own = {0};
    r.px = px ? px : &own;
    if (nhead) memcpy(r.head, head, nhead); /* replayed before the stream's bytes */
    r.head_len = nhead;
    struct stat sb;
    if (fstat(fileno(f), &sb) == 0 && S_ISREG(sb.st_mode)) r.total_size = (uint64_t)sb.st_size;
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

static ckey_status encode(writer *w, const float *data, int ch, png_uint_32 width,
                          png_uint_32 height, int depth, ck_png_quantize q, int level) {
    if (setjmp(png_jmpbuf(w->png))) return w->status;
    png_structp png = w->png;
    static const int types[5] = {0, PNG_COLOR_TYPE_GRAY, PNG_COLOR_TYPE_GRAY_ALPHA,
                                 PNG_COLOR_TYPE_RGB, PNG_COLOR_TYPE_RGB_ALPHA};
    png_set_write_fn(png, w, wr_bytes, wr_flush);
    png_set_IHDR(png, w->info, width, height, depth, types[ch], PNG_INTERLACE_NONE,
                 PNG_COMPRESSION_TYPE_DEFAULT, PNG_FILTER_TYPE_DEFAULT);
    if (level == CK_PNG_LEVEL_RLE) {
        /* Up-filtered rows, deflated as runs of repeated bytes only: on a
         * grainy 4K image 2.9 times faster than level 3 with libpng's
         * adaptive filters, and 9% smaller (bench/bench-exr-deflate.c) */
        png_set_filter(png, 0, PNG_FILTER_UP);
        png_set_compression_level(png, 1);
        png_set_compression_strategy(png, Z_RLE);
    } else {
        png_set_compression_level(png, level);
    }
    png_write_info(png, w->info);
    const size_t plane = (size_t)width * height;
    const unsigned maxv = depth == 16 ? 65535u : 255u;
    for (png_uint_32 y = 0; y < height; y++) {
        unsigned char *p = w->row;
        for (png_uint_32 x = 0; x < width; x++) {
            for (int c = 0; c < ch; c++) {
                const float v = data[(size_t)c * plane + (size_t)y * width + x];
                const unsigned k = q == CK_PNG_TRUNCATE ? quantize_trunc(v, maxv) : quantize(v, maxv);
                if (depth == 16) *p++ = (unsigned char)(k >> 8);
                *p++ = (unsigned char)k;
            }
        }
        png_write_row(png, w->row);
    }
    png_write_end(png, NULL);
    return CKEY_OK;
}

/* The arguments every PNG writer checks before touching the disk. */
static ckey_status check_write_args(const char *label, const float *data, int32_t channels, int32_t width,
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
static ckey_status write_png_file(writer *w, const float *data, int32_t channels, int32_t width,
                                  int32_t height, int32_t bit_depth, ck_png_quantize q, int level) {
    ckey_status st;
    w->status = CKEY_ERR_IO;
    w->row = malloc((size_t)width * (size_t)channels * (size_t)(bit_depth / 8));
    w->png = png_create_write_struct(PNG_LIBPNG_VER_STRING, w, wr_error, ignore_warning);
    if (w->png) w->info = png_create_info_struct(w->png);
    if (!w->row || !w->png || !w->info) {
        st = CKEY_ERR_NOMEM;
        snprintf(w->msg, sizeof w->msg, "out of memory");
    } else {
        st = encode(w, data, channels, (png_uint_32)width, (png_uint_32)height, bit_depth, q, level);
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
    st = write_png_file(&w, data, channels, width, height, bit_depth, q, level);
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

ckey_status ck_image_write_png_qt(const char *path, const float *data, int32_t channels,
                                  int32_t width, int32_t height, int32_t bit_depth,
                                  ck_png_quantize q, int level, double *io_seconds, ckey_error *err) {
    if (io_seconds) *io_seconds = 0;
    ckey_status st = check_write_args(path, data, channels, width, height, bit_depth, err);
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
    st = write_png_file(&w, data, channels, width, height, bit_depth, q, level);
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

#endif /* CK_HAVE_PNG */
