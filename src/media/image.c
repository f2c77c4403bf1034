/*
 * JPEG (libjpeg-turbo) and TIFF (libtiff) readers, and ckey_image_read, which
 * picks PNG / JPEG / TIFF / OpenEXR (src/media/exr.c) from the file's first bytes.
 *
 * Both readers work on a memory buffer (the file is read whole first), so the
 * fuzz targets drive exactly the code the CLI runs. The caps of ckey.h are
 * checked from the header before the pixels are allocated. libjpeg reports
 * errors through a custom error manager that longjmps back into a small
 * decode function (same discipline as image.c: after the longjmp nothing local
 * to the setjmp frame is read; the caller frees what the context holds).
 * libtiff's messages go to per-handle handlers given with TIFFOpenOptions --
 * no process-wide handler is installed.
 */
#include <errno.h>
#include <math.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "ckey_media.h"
#include "core/core.h"
#include "media/image.h"

#ifdef CK_HAVE_JPEG
#include <jpeglib.h>
#include <jerror.h>
#endif
#ifdef CK_HAVE_TIFF
#include <tiffio.h>
#endif

static int valid_kind(ckey_image_kind kind) {
    return kind == CKEY_IMAGE_RGB || kind == CKEY_IMAGE_HINT;
}

/* ------------------------------------------------------------ sniffing */

ck_image_format ck_image_sniff(const void *data, size_t size) {
    const unsigned char *p = data;
    static const unsigned char png_sig[8] = {137, 80, 78, 71, 13, 10, 26, 10};
    if (size >= 8 && memcmp(p, png_sig, 8) == 0) return CK_IMAGE_PNG;
    if (size >= 3 && p[0] == 0xFF && p[1] == 0xD8 && p[2] == 0xFF) return CK_IMAGE_JPEG;
    if (size >= 4 && ((p[0] == 'I' && p[1] == 'I' && p[2] == 42 && p[3] == 0) ||
                      (p[0] == 'M' && p[1] == 'M' && p[2] == 0 && p[3] == 42)))
        return CK_IMAGE_TIFF;
    /* BigTIFF (version 43) goes to libtiff as well */
    if (size >= 4 && ((p[0] == 'I' && p[1] == 'I' && p[2] == 43 && p[3] == 0) ||
                      (p[0] == 'M' && p[1] == 'M' && p[2] == 0 && p[3] == 43)))
        return CK_IMAGE_TIFF;
    if (size >= 4 && p[0] == 0x76 && p[1] == 0x2f && p[2] == 0x31 && p[3] == 0x01)
        return CK_IMAGE_EXR;
    return CK_IMAGE_UNKNOWN;
}

/* ------------------------------------------------ shared pixel plumbing */

#if defined(CK_HAVE_JPEG) || defined(CK_HAVE_TIFF)

typedef enum { S_U8, S_U16, S_F32 } sample_fmt;

static inline float get_sample(const unsigned char *row, size_t i, sample_fmt f) {
    switch (f) {
    case S_U8: return (float)row[i] / 255.0f;
    case S_U16: {
        uint16_t v;
        memcpy(&v, row + 2 * i, 2);
        return (float)v / 65535.0f;
    }
    default: {
        float v;
        memcpy(&v, row + 4 * i, 4);
        return v;
    }
    }
}

static inline int sample_opaque(const unsigned char *row, size_t i, sample_fmt f) {
    switch (f) {
    case S_U8: return row[i] == 255;
    case S_U16: {
        uint16_t v;
        memcpy(&v, row + 2 * i, 2);
        return v == 65535;
    }
    default: {
        float v;
        memcpy(&v, row + 4 * i, 4);
        return v >= 1.0f;
    }
    }
}

/*
 * n interleaved pixels of `ch` samples (1 gray, 2 gray+alpha, 3 RGB, 4 RGBA)
 * into the planes at offset o. Same rules as the PNG reader: RGB replicates
 * gray and drops alpha; HINT takes alpha into `pixels` and the color channel
 * (gray, or blue -- OpenCV's channel 0 of BGR) into `fallback`, used when the
 * alpha turns out opaque. Returns 0 when some alpha sample is not opaque.
 */
static int convert_span(float *pixels, float *fallback, size_t plane, ckey_image_kind kind,
                        const unsigned char *row, size_t o, size_t n, int ch, sample_fmt f) {
    int opaque = 1;
    const size_t c = (size_t)ch;
    if (kind == CKEY_IMAGE_RGB) {
        float *R = pixels + o, *G = R + plane, *B = G + plane;
        for (size_t x = 0; x < n; x++) {
            if (ch <= 2) {
                R[x] = G[x] = B[x] = get_sample(row, x * c, f);
            } else {
                R[x] = get_sample(row, x * c, f);
                G[x] = get_sample(row, x * c + 1, f);
                B[x] = get_sample(row, x * c + 2, f);
            }
        }
        return 1;
    }
    float *out = pixels + o;
    const size_t color = ch >= 3 ? 2 : 0;
    if (ch == 2 || ch == 4) {
        float *fb = fallback + o;
        for (size_t x = 0; x < n; x++) {
            const size_t a = x * c + c - 1;
            out[x] = get_sample(row, a, f);
            opaque &= sample_opaque(row, a, f);
            fb[x] = get_sample(row, x * c + color, f);
        }
    } else {
        for (size_t x = 0; x < n; x++) out[x] = get_sample(row, x * c + color, f);
    }
    return opaque;
}

/* NULL msg means OK; else writes the cap message. */
static int over_caps(uint64_t w, uint64_t h, char *msg, size_t cap) {
    if (w > CKEY_IMAGE_MAX_SIDE || h > CKEY_IMAGE_MAX_SIDE) {
        snprintf(msg, cap, "%llu x %llu exceeds the %d-pixel side limit", (unsigned long long)w,
                 (unsigned long long)h, CKEY_IMAGE_MAX_SIDE);
        return 1;
    }
    if (w * h > (uint64_t)CKEY_IMAGE_MAX_PIXELS) {
        snprintf(msg, cap, "%llu x %llu exceeds the limit of %lld pixels", (unsigned long long)w,
                 (unsigned long long)h, (long long)CKEY_IMAGE_MAX_PIXELS);
        return 1;
    }
    return 0;
}

#endif

/* ================================================================ JPEG */

#ifndef CK_HAVE_JPEG

ckey_status ck_image_read_jpeg_memory(const void *data, size_t size, const char *label,
                                      ckey_image_kind kind, ckey_image *out, ckey_error *err) {
    (void)data;
    (void)size;
    (void)kind;
    if (out) memset(out, 0, sizeof *out);
    return ck_fail(err, CKEY_ERR_UNSUPPORTED, "%s: ckey was built without JPEG support (libjpeg)",
                   label ? label : "(memory)");
}

ckey_status ck_image_read_jpeg_memory_px(const void *data, size_t size, const char *label, ckey_image_kind kind,
                                         ck_pixels *px, ckey_image *out, ckey_error *err) {
    (void)px;
    return ck_image_read_jpeg_memory(data, size, label, kind, out, err);
}

#else

typedef struct jreader {
    struct jpeg_error_mgr pub; /* first: libjpeg hands back a pointer to it */
    jmp_buf jb;
    ckey_status status;
    char msg[JMSG_LENGTH_MAX + 64];
    struct jpeg_decompress_struct ci;
    unsigned char *row;
    ck_pixels *px;
    float *pixels; /* px's block */
} jreader;

static void j_fail(j_common_ptr c, ckey_status st, const char *text) {
    jreader *r = (jreader *)c->err;
    if (!r->msg[0]) {
        snprintf(r->msg, sizeof r->msg, "%s", text);
        r->status = st;
    }
    longjmp(r->jb, 1);
}

static void j_error_exit(j_common_ptr c) {
    char buf[JMSG_LENGTH_MAX];
    (*c->err->format_message)(c, buf);
    j_fail(c, CKEY_ERR_FORMAT, buf);
}

/* Warnings (level -1) are ignored except a premature end of data, for which
 * libjpeg would pad the image with gray: that is a truncated file. */
static void j_emit_message(j_common_ptr c, int level) {
    if (level < 0) {
        if (c->err->msg_code == JWRN_JPEG_EOF) j_fail(c, CKEY_ERR_FORMAT, "truncated");
        c->err->num_warnings++;
    }
}

static void j_output_message(j_common_ptr c) { (void)c; }

static ckey_status jdecode(jreader *r, const unsigned char *data, size_t size,
                           ckey_image_kind kind, ckey_image *img) {
    if (setjmp(r->jb)) return r->status;
    struct jpeg_decompress_struct *ci = &r->ci;
    jpeg_create_decompress(ci);
    jpeg_mem_src(ci, data, (unsigned long)size);
    jpeg_read_header(ci, TRUE);
    const uint64_t w = ci->image_width, h = ci->image_height;
    if (over_caps(w, h, r->msg, sizeof r->msg)) {
        r->status = CKEY_ERR_UNSUPPORTED;
        return r->status;
    }
    if (ci->jpeg_color_space == JCS_CMYK || ci->jpeg_color_space == JCS_YCCK) {
        snprintf(r->msg, sizeof r->msg, "CMYK JPEG is not supported (convert it to RGB)");
        r->status = CKEY_ERR_UNSUPPORTED;
        return r->status;
    }
    if (ci->num_components == 1) {
        ci->out_color_space = JCS_GRAYSCALE;
    } else if (ci->num_components == 3 &&
               (ci->jpeg_color_space == JCS_YCbCr || ci->jpeg_color_space == JCS_RGB)) {
        ci->out_color_space = JCS_RGB;
    } else {
        snprintf(r->msg, sizeof r->msg, "unsupported JPEG color space (%d components)",
                 ci->num_components);
        r->status = CKEY_ERR_UNSUPPORTED;
        return r->status;
    }
    /* Every 8x8 block of the (largest) component costs at least one bit of
     * Huffman code per scan; allowing for 4x4 subsampling and partial
     * progressive scans, a file smaller than blocks/128 bytes cannot hold the
     * image. Refuse it before a tiny forged header makes us allocate
     * gigabytes. (Arithmetic coding can go below a bit per block.) */
    if (!ci->arith_code) {
        const uint64_t blocks = ((w + 7) / 8) * ((h + 7) / 8);
        if ((uint64_t)size < blocks / 128) {
            snprintf(r->msg, sizeof r->msg,
                     "truncated (%llu x %llu pixels need more than the %zu bytes of the file)",
                     (unsigned long long)w, (unsigned long long)h, size);
            r->status = CKEY_ERR_FORMAT;
            return r->status;
        }
    }
    jpeg_start_decompress(ci);
    const int ch = ci->output_components;
    if ((ch != 1 && ch != 3) || ci->output_width != w || ci->output_height != h) {
        snprintf(r->msg, sizeof r->msg, "unexpected decoder output (%d components)", ch);
        r->status = CKEY_ERR_INTERNAL;
        return r->status;
    }
    const size_t plane = (size_t)w * (size_t)h;
    const int out_ch = kind == CKEY_IMAGE_RGB ? 3 : 1;
    r->pixels = ck_pixels_take(r->px, plane * (size_t)out_ch);
    r->row = malloc((size_t)w * (size_t)ch);
    if (!r->pixels || !r->row) {
        snprintf(r->msg, sizeof r->msg, "out of memory for a %llu x %llu image",
                 (unsigned long long)w, (unsigned long long)h);
        r->status = CKEY_ERR_NOMEM;
        return r->status;
    }
    while (ci->output_scanline < ci->output_height) {
        const size_t y = ci->output_scanline;
        JSAMPROW rp = r->row;
        if (jpeg_read_scanlines(ci, &rp, 1) != 1) {
            snprintf(r->msg, sizeof r->msg, "truncated");
            r->status = CKEY_ERR_FORMAT;
            return r->status;
        }
        convert_span(r->pixels, NULL, plane, kind, r->row, y * (size_t)w, (size_t)w, ch, S_U8);
    }
    jpeg_finish_decompress(ci);
    img->width = (int32_t)w;
    img->height = (int32_t)h;
    img->channels = out_ch;
    img->bit_depth = 8;
    img->has_alpha = 0;
    img->data = r->pixels;
    img->capacity = r->px->floats;
    r->pixels = NULL;
    return CKEY_OK;
}

ckey_status ck_image_read_jpeg_memory(const void *data, size_t size, const char *label,
                                      ckey_image_kind kind, ckey_image *out, ckey_error *err) {
    return ck_image_read_jpeg_memory_px(data, size, label, kind, NULL, out, err);
}

ckey_status ck_image_read_jpeg_memory_px(const void *data, size_t size, const char *label, ckey_image_kind kind,
                                         ck_pixels *px, ckey_image *out, ckey_error *err) {
    if (out) memset(out, 0, sizeof *out);
    if (!label) label = "(memory)";
    if (!out || (!data && size) || !valid_kind(kind))
        return ck_fail(err, CKEY_ERR_INVALID_ARG, "%s: invalid arguments to the JPEG reader",
                       label);
    if (size == 0) return ck_fail(err, CKEY_ERR_FORMAT, "%s: empty file, not a JPEG", label);
    if (size < 3 || ck_image_sniff(data, size) != CK_IMAGE_JPEG)
        return ck_fail(err, CKEY_ERR_FORMAT, "%s: not a JPEG file", label);
    if ((uint64_t)size > (uint64_t)(unsigned long)-1)
        return ck_fail(err, CKEY_ERR_UNSUPPORTED, "%s: file too large", label);
    jreader *r = calloc(1, sizeof *r);
    if (!r) return ck_fail(err, CKEY_ERR_NOMEM, "%s: out of memory", label);
    ck_pixels own = {0};
    r->px = px ? px : &own;
    r->status = CKEY_ERR_FORMAT;
    r->ci.err = jpeg_std_error(&r->pub);
    r->pub.error_exit = j_error_exit;
    r->pub.emit_message = j_emit_message;
    r->pub.output_message = j_output_message;
    ckey_status st = jdecode(r, data, size, kind, out);
    jpeg_destroy_decompress(&r->ci); /* safe on a struct create never finished */
    free(r->row);
    if (r->pixels) ck_pixels_drop(r->px);
    if (st != CKEY_OK) {
        memset(out, 0, sizeof *out);
        st = ck_fail(err, st, "%s: %s", label, r->msg[0] ? r->msg : "invalid JPEG");
    }
    free(r);
    return st;
}

#endif /* CK_HAVE_JPEG */

/* ================================================================ TIFF */

#ifndef CK_HAVE_TIFF

ckey_status ck_image_read_tiff_memory(const void *data, size_t size, const char *label,
                                      ckey_image_kind kind, ckey_image *out, ckey_error *err) {
    (void)data;
    (void)size;
    (void)kind;
    if (out) memset(out, 0, sizeof *out);
    return ck_fail(err, CKEY_ERR_UNSUPPORTED, "%s: ckey was built without TIFF support (libtiff)",
                   label ? label : "(memory)");
}

ckey_status ck_image_read_tiff_memory_px(const void *data, size_t size, const char *label, ckey_image_kind kind,
                                         ck_pixels *px, ckey_image *out, ckey_error *err) {
    (void)px;
    return ck_image_read_tiff_memory(data, size, label, kind, out, err);
}

#else

/* libtiff's own allocations (strip buffers, directory arrays) stay below
 * this; the pixels are bounded by the caps. */
#define CK_TIFF_ALLOC_MAX ((tmsize_t)512 << 20)

typedef struct treader {
    const char *label;
    const unsigned char *data;
    uint64_t size, pos;
    ckey_status status;
    char msg[256];
    unsigned char *buf; /* one scanline or one tile */
    ck_pixels *px;
    float *pixels, *fallback; /* px's block; the fallback plane within it */
} treader;

static tmsize_t t_read(thandle_t h, void *out, tmsize_t n) {
    treader *r = (treader *)h;
    if (n <= 0 || r->pos >= r->size) return 0;
    uint64_t left = r->size - r->pos;
    if ((uint64_t)n > left) n = (tmsize_t)left;
    memcpy(out, r->data + r->pos, (size_t)n);
    r->pos += (uint64_t)n;
    return n;
}

static tmsize_t t_write(thandle_t h, void *in, tmsize_t n) {
    (void)h;
    (void)in;
    (void)n;
    return 0;
}

static toff_t t_seek(thandle_t h, toff_t off, int whence) {
    treader *r = (treader *)h;
    uint64_t base = whence == SEEK_SET ? 0 : whence == SEEK_CUR ? r->pos : r->size;
    if (whence != SEEK_SET && whence != SEEK_CUR && whence != SEEK_END) return (toff_t)-1;
    /* toff_t is unsigned; a "negative" offset wraps, which is what SEEK_CUR/
     * SEEK_END with a negative delta means */
    const uint64_t np = base + (uint64_t)off;
    if (whence == SEEK_SET ? off > (toff_t)INT64_MAX : (int64_t)np < 0) return (toff_t)-1;
    r->pos = np;
    return np;
}

static int t_close(thandle_t h) {
    (void)h;
    return 0;
}

static toff_t t_size(thandle_t h) { return ((treader *)h)->size; }

static int t_map(thandle_t h, void **base, toff_t *size) {
    (void)h;
    (void)base;
    (void)size;
    return 0;
}

static void t_unmap(thandle_t h, void *base, toff_t size) {
    (void)h;
    (void)base;
    (void)size;
}

static int t_error(TIFF *tif, void *user, const char *module, const char *fmt, va_list ap) {
    (void)tif;
    (void)module;
    treader *r = user;
    if (!r->msg[0]) {
        char buf[sizeof r->msg];
        vsnprintf(buf, sizeof buf, fmt, ap);
        /* libtiff often starts with the file name, which we add ourselves */
        const size_t ln = strlen(r->label);
        const char *m = buf;
        if (strncmp(m, r->label, ln) == 0 && m[ln] == ':') m += ln + 1;
        while (*m == ' ') m++;
        snprintf(r->msg, sizeof r->msg, "%s", m);
        r->status = CKEY_ERR_FORMAT;
    }
    return 1; /* handled: libtiff's global handler stays silent */
}

static int t_warning(TIFF *tif, void *user, const char *module, const char *fmt, va_list ap) {
    (void)tif;
    (void)user;
    (void)module;
    (void)fmt;
    (void)ap;
    return 1;
}

static ckey_status t_refuse(treader *r, ckey_status st, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));
static ckey_status t_refuse(treader *r, ckey_status st, const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(r->msg, sizeof r->msg, fmt, ap);
    va_end(ap);
    r->status = st;
    return st;
}

static ckey_status tdecode(treader *r, TIFF *tif, ckey_image_kind kind, ckey_image *img) {
    uint32_t w = 0, h = 0;
    uint16_t spp = 1, bps = 1, fmt = SAMPLEFORMAT_UINT, planar = PLANARCONFIG_CONTIG;
    uint16_t photo = 0, compression = COMPRESSION_NONE;
    if (!TIFFGetField(tif, TIFFTAG_IMAGEWIDTH, &w) || !TIFFGetField(tif, TIFFTAG_IMAGELENGTH, &h))
        return t_refuse(r, CKEY_ERR_FORMAT, "no image width or length");
    if (w == 0 || h == 0) return t_refuse(r, CKEY_ERR_FORMAT, "empty image (%u x %u)", w, h);
    if (over_caps(w, h, r->msg, sizeof r->msg)) return r->status = CKEY_ERR_UNSUPPORTED;
    TIFFGetFieldDefaulted(tif, TIFFTAG_SAMPLESPERPIXEL, &spp);
    TIFFGetFieldDefaulted(tif, TIFFTAG_BITSPERSAMPLE, &bps);
    TIFFGetFieldDefaulted(tif, TIFFTAG_SAMPLEFORMAT, &fmt);
    TIFFGetFieldDefaulted(tif, TIFFTAG_PLANARCONFIG, &planar);
    TIFFGetFieldDefaulted(tif, TIFFTAG_COMPRESSION, &compression);
    if (!TIFFGetField(tif, TIFFTAG_PHOTOMETRIC, &photo))
        photo = spp >= 3 ? PHOTOMETRIC_RGB : PHOTOMETRIC_MINISBLACK;

    sample_fmt sf;
    if ((bps == 8 || bps == 16) && (fmt == SAMPLEFORMAT_UINT || fmt == SAMPLEFORMAT_VOID))
        sf = bps == 8 ? S_U8 : S_U16;
    else if (bps == 32 && fmt == SAMPLEFORMAT_IEEEFP)
        sf = S_F32;
    else
        return t_refuse(r, CKEY_ERR_UNSUPPORTED,
                        "%u-bit samples of sample format %u are not supported (8- or 16-bit "
                        "unsigned, or 32-bit float)",
                        (unsigned)bps, (unsigned)fmt);
    if (spp < 1 || spp > 4)
        return t_refuse(r, CKEY_ERR_UNSUPPORTED, "%u samples per pixel (1 to 4 supported)",
                        (unsigned)spp);
    if (photo == PHOTOMETRIC_YCBCR && compression == COMPRESSION_JPEG && spp == 3 && sf == S_U8) {
        /* JPEG-in-TIFF: let libjpeg convert to RGB */
        TIFFSetField(tif, TIFFTAG_JPEGCOLORMODE, JPEGCOLORMODE_RGB);
        photo = PHOTOMETRIC_RGB;
    }
    if (spp <= 2 && photo != PHOTOMETRIC_MINISBLACK)
        return t_refuse(r, CKEY_ERR_UNSUPPORTED,
                        "photometric interpretation %u with %u samples is not supported "
                        "(min-is-black gray expected)",
                        (unsigned)photo, (unsigned)spp);
    if (spp >= 3 && photo != PHOTOMETRIC_RGB)
        return t_refuse(r, CKEY_ERR_UNSUPPORTED,
                        "photometric interpretation %u is not supported (RGB expected; "
                        "CMYK, YCbCr, Lab and palette TIFFs are not read)",
                        (unsigned)photo);
    if (spp > 1 && planar != PLANARCONFIG_CONTIG)
        return t_refuse(r, CKEY_ERR_UNSUPPORTED,
                        "separate color planes are not supported (contiguous samples only)");

    /* Every strip or tile must lie inside the file: a cut file is refused
     * here, before the pixels are allocated. */
    const uint32_t nstriles = TIFFIsTiled(tif) ? TIFFNumberOfTiles(tif) : TIFFNumberOfStrips(tif);
    if (nstriles == 0) return t_refuse(r, CKEY_ERR_FORMAT, "no strips or tiles");
    uint64_t stored = 0;
    for (uint32_t i = 0; i < nstriles; i++) {
        const uint64_t off = TIFFGetStrileOffset(tif, i), bc = TIFFGetStrileByteCount(tif, i);
        if (off > r->size || bc > r->size - off)
            return t_refuse(r, CKEY_ERR_FORMAT, "truncated (strip %u ends past the end of file)",
                            i);
        stored += bc;
    }
    const uint64_t bytes_pp = (uint64_t)spp * (bps / 8);
    if (compression == COMPRESSION_NONE && !TIFFIsTiled(tif) &&
        stored < (uint64_t)w * h * bytes_pp)
        return t_refuse(r, CKEY_ERR_FORMAT, "truncated (uncompressed strips hold %llu bytes, "
                                            "%u x %u pixels need %llu)",
                        (unsigned long long)stored, w, h,
                        (unsigned long long)((uint64_t)w * h * bytes_pp));

    const int ch = spp;
    const int alpha_ch = ch == 2 || ch == 4;
    const size_t plane = (size_t)w * h;
    const int out_ch = kind == CKEY_IMAGE_RGB ? 3 : 1;
    const int fb = kind == CKEY_IMAGE_HINT && alpha_ch;
    int opaque = 1;
    if (TIFFIsTiled(tif)) {
        uint32_t tw = 0, th = 0;
        TIFFGetField(tif, TIFFTAG_TILEWIDTH, &tw);
        TIFFGetField(tif, TIFFTAG_TILELENGTH, &th);
        const tmsize_t ts = TIFFTileSize(tif);
        if (tw == 0 || th == 0 || ts <= 0 || (uint64_t)ts != (uint64_t)tw * th * bytes_pp ||
            ts > CK_TIFF_ALLOC_MAX)
            return t_refuse(r, CKEY_ERR_FORMAT, "bad tile layout (%u x %u)", tw, th);
        r->buf = malloc((size_t)ts);
        r->pixels = ck_pixels_take(r->px, plane * (size_t)(out_ch + fb));
        if (fb && r->pixels) r->fallback = r->pixels + plane * (size_t)out_ch;
        if (!r->buf || !r->pixels)
            return t_refuse(r, CKEY_ERR_NOMEM, "out of memory for a %u x %u image", w, h);
        for (uint32_t ty = 0; ty < h; ty += th) {
            for (uint32_t tx = 0; tx < w; tx += tw) {
                if (TIFFReadTile(tif, r->buf, tx, ty, 0, 0) < 0)
                    return r->msg[0] ? (r->status = CKEY_ERR_FORMAT)
                                     : t_refuse(r, CKEY_ERR_FORMAT,
                                                "read error in the tile at %u, %u", tx, ty);
                const uint32_t cw = w - tx < tw ? w - tx : tw, chh = h - ty < th ? h - ty : th;
                for (uint32_t yy = 0; yy < chh; yy++)
                    opaque &= convert_span(r->pixels, r->fallback, plane, kind,
                                           r->buf + (size_t)yy * tw * bytes_pp,
                                           (size_t)(ty + yy) * w + tx, cw, ch, sf);
            }
        }
    } else {
        const tmsize_t sl = TIFFScanlineSize(tif);
        if (sl <= 0 || (uint64_t)sl != (uint64_t)w * bytes_pp)
            return t_refuse(r, CKEY_ERR_FORMAT, "unexpected scanline size %lld",
                            (long long)sl);
        r->buf = malloc((size_t)sl);
        r->pixels = ck_pixels_take(r->px, plane * (size_t)(out_ch + fb));
        if (fb && r->pixels) r->fallback = r->pixels + plane * (size_t)out_ch;
        if (!r->buf || !r->pixels)
            return t_refuse(r, CKEY_ERR_NOMEM, "out of memory for a %u x %u image", w, h);
        for (uint32_t y = 0; y < h; y++) {
            if (TIFFReadScanline(tif, r->buf, y, 0) < 0)
                return r->msg[0] ? (r->status = CKEY_ERR_FORMAT)
                                 : t_refuse(r, CKEY_ERR_FORMAT, "read error at row %u", y);
            opaque &= convert_span(r->pixels, r->fallback, plane, kind, r->buf, (size_t)y * w,
                                   w, ch, sf);
        }
    }
    if (kind == CKEY_IMAGE_HINT && alpha_ch && opaque)
        memcpy(r->pixels, r->fallback, plane * sizeof(float));
    if (sf == S_F32) {
        /* A NaN or Inf would spread through every convolution of the network
         * and poison the whole matte: refuse the plate, naming the pixel. */
        const size_t total = plane * (size_t)out_ch;
        for (size_t i = 0; i < total; i++)
            if (!isfinite(r->pixels[i]))
                return t_refuse(r, CKEY_ERR_FORMAT, "non-finite sample (NaN or Inf) at x %zu, y %zu, channel %zu",
                                (i % plane) % w, (i % plane) / w, i / plane);
    }
    img->width = (int32_t)w;
    img->height = (int32_t)h;
    img->channels = out_ch;
    img->bit_depth = bps;
    img->has_alpha = alpha_ch;
    img->data = r->pixels;
    img->capacity = r->px->floats;
    r->pixels = NULL;
    return CKEY_OK;
}

ckey_status ck_image_read_tiff_memory(const void *data, size_t size, const char *label,
                                      ckey_image_kind kind, ckey_image *out, ckey_error *err) {
    return ck_image_read_tiff_memory_px(data, size, label, kind, NULL, out, err);
}

ckey_status ck_image_read_tiff_memory_px(const void *data, size_t size, const char *label, ckey_image_kind kind,
                                         ck_pixels *px, ckey_image *out, ckey_error *err) {
    if (out) memset(out, 0, sizeof *out);
    if (!label) label = "(memory)";
    if (!out || (!data && size) || !valid_kind(kind))
        return ck_fail(err, CKEY_ERR_INVALID_ARG, "%s: invalid arguments to the TIFF reader",
                       label);
    if (size == 0) return ck_fail(err, CKEY_ERR_FORMAT, "%s: empty file, not a TIFF", label);
    if (ck_image_sniff(data, size) != CK_IMAGE_TIFF)
        return ck_fail(err, CKEY_ERR_FORMAT, "%s: not a TIFF file", label);
    treader r;
    memset(&r, 0, sizeof r);
    r.label = label;
    r.data = data;
    r.size = size;
    ck_pixels own = {0};
    r.px = px ? px : &own;
    r.status = CKEY_ERR_FORMAT;
    TIFFOpenOptions *opts = TIFFOpenOptionsAlloc();
    if (!opts) return ck_fail(err, CKEY_ERR_NOMEM, "%s: out of memory", label);
    TIFFOpenOptionsSetErrorHandlerExtR(opts, t_error, &r);
    TIFFOpenOptionsSetWarningHandlerExtR(opts, t_warning, &r);
    TIFFOpenOptionsSetMaxSingleMemAlloc(opts, CK_TIFF_ALLOC_MAX);
    /* "m": no memory mapping, every byte comes through t_read */
    TIFF *tif = TIFFClientOpenExt(label, "rm", (thandle_t)&r, t_read, t_write, t_seek, t_close,
                                  t_size, t_map, t_unmap, opts);
    TIFFOpenOptionsFree(opts);
    ckey_status st;
    if (!tif) {
        st = CKEY_ERR_FORMAT;
        char why[200];
        snprintf(why, sizeof why, "%.199s", r.msg[0] ? r.msg : "no readable directory");
        snprintf(r.msg, sizeof r.msg, "truncated or corrupt TIFF (%s)", why);
    } else {
        st = tdecode(&r, tif, kind, out);
        TIFFClose(tif);
    }
    free(r.buf);
    if (r.pixels) ck_pixels_drop(r.px);
    if (st != CKEY_OK) {
        memset(out, 0, sizeof *out);
        return ck_fail(err, st, "%s: %s", label, r.msg[0] ? r.msg : "invalid TIFF");
    }
    return CKEY_OK;
}

#endif /* CK_HAVE_TIFF */

/* ======================================================== dispatching */

ckey_status ck_image_read_memory(const void *data, size_t size, const char *label,
                                 ckey_image_kind kind, ckey_image *out, ckey_error *err) {
    if (out) memset(out, 0, sizeof *out);
    if (!label) label = "(memory)";
    if (!out || (!data && size) || !valid_kind(kind))
        return ck_fail(err, CKEY_ERR_INVALID_ARG, "%s: invalid arguments to the image reader",
                       label);
    if (size == 0) return ck_fail(err, CKEY_ERR_FORMAT, "%s: empty file", label);
    switch (ck_image_sniff(data, size)) {
    case CK_IMAGE_PNG: return ck_image_read_png_memory(data, size, label, kind, out, err);
    case CK_IMAGE_JPEG: return ck_image_read_jpeg_memory(data, size, label, kind, out, err);
    case CK_IMAGE_TIFF: return ck_image_read_tiff_memory(data, size, label, kind, out, err);
    case CK_IMAGE_EXR: return ck_image_read_exr_memory(data, size, label, kind, out, err);
    default:
        return ck_fail(err, CKEY_ERR_UNSUPPORTED,
                       "%s: unknown image format (PNG, JPEG, TIFF and OpenEXR are read)", label);
    }
}

/* The most bytes an image within the caps can take: CKEY_IMAGE_MAX_PIXELS of
 * 8 uncompressed FLOAT channels (OpenEXR's most), plus room for headers
 * and offset tables. A longer stream is refused rather than buffered. */
#define CK_IMAGE_MAX_FILE_BYTES ((uint64_t)CKEY_IMAGE_MAX_PIXELS * 32 + ((uint64_t)64 << 20))

static ckey_status too_long(const char *path, ckey_error *err) {
    return ck_fail(err, CKEY_ERR_UNSUPPORTED, "%s: more than %llu MiB: larger than any image within the size limits",
                   path, (unsigned long long)(CK_IMAGE_MAX_FILE_BYTES >> 20));
}

/* The whole file into memory, starting with the `nhead` bytes already read
 * (so pipes work too); NULL with *st and err set on failure. */
static unsigned char *slurp(FILE *f, const char *path, const unsigned char *head, size_t nhead,
                            size_t *size, ckey_status *st, ckey_error *err) {
    size_t cap = 1 << 16, n = nhead;
    struct stat sb;
    const int regular = fstat(fileno(f), &sb) == 0 && S_ISREG(sb.st_mode);
    if (regular && (uint64_t)sb.st_size > CK_IMAGE_MAX_FILE_BYTES) {
        *st = too_long(path, err);
        return NULL;
    }
    if (regular && (uint64_t)sb.st_size >= nhead && (uint64_t)sb.st_size < SIZE_MAX)
        cap = (size_t)sb.st_size + 1; /* +1: EOF is seen without a realloc */
    unsigned char *buf = malloc(cap);
    if (!buf) {
        *st = ck_fail(err, CKEY_ERR_NOMEM, "%s: out of memory reading the file", path);
        return NULL;
    }
    memcpy(buf, head, nhead);
    for (;;) {
        if (n == cap) {
            unsigned char *b = cap > SIZE_MAX / 2 ? NULL : realloc(buf, cap * 2);
            if (!b) {
                free(buf);
                *st = ck_fail(err, CKEY_ERR_NOMEM, "%s: out of memory reading the file", path);
                return NULL;
            }
            buf = b;
            cap *= 2;
        }
        const size_t got = fread(buf + n, 1, cap - n, f);
        n += got;
        if (got == 0) break;
        if ((uint64_t)n > CK_IMAGE_MAX_FILE_BYTES) {
            free(buf);
            *st = too_long(path, err);
            return NULL;
        }
    }
    if (ferror(f)) {
        free(buf);
        *st = ck_fail(err, CKEY_ERR_IO, "%s: read error: %s", path, strerror(errno));
        return NULL;
    }
    *size = n;
    return buf;
}

/* Sniff from the stream itself, then decode from it: a pipe or a FIFO can be
 * read only once. PNG streams from the file; the other formats are read
 * whole into memory (within CK_IMAGE_MAX_FILE_BYTES) first. */
static ckey_status read_stream(FILE *f, const char *label, ckey_image_kind kind, ck_pixels *px,
                               ckey_image *out, ckey_error *err) {
    unsigned char head[8];
    const size_t got = fread(head, 1, sizeof head, f);
    if (ferror(f)) return ck_fail(err, CKEY_ERR_IO, "%s: read error: %s", label, strerror(errno));
    if (got == 0) return ck_fail(err, CKEY_ERR_FORMAT, "%s: empty file", label);
    const ck_image_format fmt = ck_image_sniff(head, got);
    if (fmt == CK_IMAGE_UNKNOWN)
        return ck_fail(err, CKEY_ERR_UNSUPPORTED,
                       "%s: unknown image format (PNG, JPEG, TIFF and OpenEXR are read)", label);
    if (kind == CK_IMAGE_RGBA && fmt != CK_IMAGE_EXR)
        return ck_fail(err, CKEY_ERR_FORMAT, "%s: not an OpenEXR file (an RGBA pass is one)", label);
    if (fmt == CK_IMAGE_PNG) return ck_image_read_png_stream_px(f, head, got, label, kind, px, out, err);
    size_t size = 0;
    ckey_status st = CKEY_ERR_IO;
    unsigned char *buf = slurp(f, label, head, got, &size, &st, err);
    if (!buf) return st;
    st = fmt == CK_IMAGE_JPEG  ? ck_image_read_jpeg_memory_px(buf, size, label, kind, px, out, err)
         : fmt == CK_IMAGE_EXR ? ck_image_read_exr_memory_px(buf, size, label, kind, px, out, err)
                               : ck_image_read_tiff_memory_px(buf, size, label, kind, px, out, err);
    free(buf);
    return st;
}

ckey_status ckey_image_read_packed(const char *path, ckey_image_kind kind, ckey_packed_image *img,
                                   ckey_error *err) {
    if (!path || !img || !valid_kind(kind))
        return ck_fail(err, CKEY_ERR_INVALID_ARG, "ckey_image_read_packed: invalid arguments");
    struct stat sb;
    if (stat(path, &sb) != 0 || !S_ISREG(sb.st_mode))
        return ck_fail(err, CKEY_ERR_UNSUPPORTED, "%s: not a regular file: no packed read", path);
    FILE *f = NULL;
    ckey_status st = ck_open_input(path, CK_INPUT_TIMEOUT_MS, &f, err);
    if (st != CKEY_OK) return st;
    unsigned char head[8];
    const size_t got = fread(head, 1, sizeof head, f);
    if (ferror(f)) st = ck_fail(err, CKEY_ERR_IO, "%s: read error: %s", path, strerror(errno));
    const ck_image_format fmt = st == CKEY_OK ? ck_image_sniff(head, got) : CK_IMAGE_UNKNOWN;
    if (st != CKEY_OK) {
    } else if (fmt == CK_IMAGE_PNG) {
        st = ck_image_read_png_packed_stream(f, head, got, path, kind, img, err);
    } else if (fmt == CK_IMAGE_EXR) {
        size_t size = 0;
        unsigned char *buf = slurp(f, path, head, got, &size, &st, err);
        if (buf) st = ck_image_read_exr_packed_memory(buf, size, path, kind, img, err);
        free(buf);
    } else {
        st = ck_fail(err, CKEY_ERR_UNSUPPORTED, "%s: neither PNG nor OpenEXR: no packed read", path);
    }
    fclose(f);
    return st;
}

int ck_packed_reserve(ckey_packed_image *pk, size_t bytes) {
    if (bytes <= pk->capacity) return 1;
    if (pk->data) {
        if (pk->release) pk->release(pk->alloc_user, pk->data);
        else free(pk->data);
    }
    pk->data = pk->alloc ? pk->alloc(pk->alloc_user, bytes) : malloc(bytes);
    pk->capacity = pk->data ? bytes : 0;
    return pk->data != NULL;
}

void ckey_packed_image_free(ckey_packed_image *img) {
    if (!img) return;
    if (img->data) {
        if (img->release) img->release(img->alloc_user, img->data);
        else free(img->data);
    }
    img->data = NULL;
    img->capacity = 0;
    img->width = img->height = img->channels = 0;
}

ckey_status ck_image_read_path(const char *path, ckey_image_kind kind, int timeout_ms, ckey_image *out,
                               ckey_error *err) {
    if (out) memset(out, 0, sizeof *out);
    if (!path || !out || !(valid_kind(kind) || kind == CK_IMAGE_RGBA))
        return ck_fail(err, CKEY_ERR_INVALID_ARG, "ckey_image_read: invalid arguments");
    FILE *f = NULL;
    ckey_status st = ck_open_input(path, timeout_ms, &f, err);
    if (st != CKEY_OK) return st;
    st = read_stream(f, path, kind, NULL, out, err);
    fclose(f);
    return st;
}

ckey_status ckey_image_read(const char *path, ckey_image_kind kind, ckey_image *out,
                            ckey_error *err) {
    if (!valid_kind(kind)) {
        if (out) memset(out, 0, sizeof *out);
        return ck_fail(err, CKEY_ERR_INVALID_ARG, "ckey_image_read: invalid arguments");
    }
    return ck_image_read_path(path, kind, CK_INPUT_TIMEOUT_MS, out, err);
}

ckey_status ckey_image_read_file(FILE *f, const char *label, ckey_image_kind kind, ckey_image *out,
                                 ckey_error *err) {
    if (out) memset(out, 0, sizeof *out);
    if (!label) label = "(stream)";
    if (!f || !out || !valid_kind(kind))
        return ck_fail(err, CKEY_ERR_INVALID_ARG, "%s: ckey_image_read_file: invalid arguments", label);
    return read_stream(f, label, kind, NULL, out, err);
}

/* ----------------------------------------------------- reused blocks */

float *ck_pixels_take(ck_pixels *px, size_t floats) {
    if (px->reuse && px->reuse_floats >= floats) {
        px->block = px->reuse;
        px->floats = px->reuse_floats;
    } else {
        px->block = malloc(floats * sizeof(float));
        px->floats = px->block ? floats : 0;
    }
    return px->block;
}

void ck_pixels_drop(ck_pixels *px) {
    if (px->block && px->block != px->reuse) free(px->block);
    px->block = NULL;
    px->floats = 0;
}

ckey_status ck_image_read_reuse(const char *path, ckey_image_kind kind, ckey_image *img, ckey_error *err) {
    if (!img) return ck_fail(err, CKEY_ERR_INVALID_ARG, "ck_image_read_reuse: no image");
    const size_t held = (size_t)img->channels * (size_t)img->width * (size_t)img->height;
    ck_pixels px = {img->data, img->data ? (img->capacity > held ? img->capacity : held) : 0, NULL, 0};
    ckey_image out;
    memset(&out, 0, sizeof out);
    ckey_status st = CKEY_OK;
    FILE *f = NULL;
    if (!path || !valid_kind(kind)) st = ck_fail(err, CKEY_ERR_INVALID_ARG, "ckey_image_read: invalid arguments");
    if (st == CKEY_OK) st = ck_open_input(path, CK_INPUT_TIMEOUT_MS, &f, err);
    if (st == CKEY_OK) {
        st = read_stream(f, path, kind, &px, &out, err);
        fclose(f);
    }
    /* the held block went into `out`, or is no longer needed */
    if (st != CKEY_OK || out.data != px.reuse) free(px.reuse);
    *img = out;
    return st;
}
