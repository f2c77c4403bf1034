/*
 * OpenEXR reading through OpenEXRCore, the C API of OpenEXR 3.1
 * (Debian 12 ships 3.1.5, which has known unfixed CVEs in its header and
 * chunk parsing).
 *
 * So the reader never hands OpenEXR a file it has not vetted itself: the
 * header is parsed here from the bytes (magic, version flags, every
 * attribute bounded by the file size), and only a single-part scanline image
 * within ckey's caps, with at most 8 HALF/FLOAT channels sampled 1x1, one of
 * the compressions NONE/RLE/ZIPS/ZIP/PIZ/PXR24, and an offset table whose
 * every chunk lies inside the file goes on to OpenEXR, which then decodes
 * from the memory buffer through a custom read function.
 *
 * The writer is src/media/exr-write.c.
 */
#include <math.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "ckey_media.h"
#include "core/core.h"
#include "media/image.h"

#ifdef CK_HAVE_EXR
#include <openexr.h>
#endif

#ifndef CK_HAVE_EXR

ckey_status ck_image_read_exr_memory(const void *data, size_t size, const char *label,
                                     ckey_image_kind kind, ckey_image *out, ckey_error *err) {
    (void)data;
    (void)size;
    (void)kind;
    if (out) memset(out, 0, sizeof *out);
    return ck_fail(err, CKEY_ERR_UNSUPPORTED, "%s: ckey was built without OpenEXR",
                   label ? label : "(memory)");
}

ckey_status ck_image_read_exr_memory_px(const void *data, size_t size, const char *label, ckey_image_kind kind,
                                        ck_pixels *px, ckey_image *out, ckey_error *err) {
    (void)px;
    return ck_image_read_exr_memory(data, size, label, kind, out, err);
}

ckey_status ck_image_read_exr_packed_memory(const void *data, size_t size, const char *label, ckey_image_kind kind,
                                            ckey_packed_image *pk, ckey_error *err) {
    (void)data, (void)size, (void)kind, (void)pk;
    return ck_fail(err, CKEY_ERR_UNSUPPORTED, "%s: ckey was built without OpenEXR", label ? label : "(memory)");
}

#else

static int valid_kind(ckey_image_kind kind) {
    return kind == CKEY_IMAGE_RGB || kind == CKEY_IMAGE_HINT || kind == CK_IMAGE_RGBA;
}

/* ------------------------------------------------ header pre-check */

#define EXR_MAX_CHANNELS 8
#define EXR_MAX_ATTRIBUTES 1024

typedef struct exr_chan {
    char name[256];
    int32_t type; /* 1 HALF, 2 FLOAT */
} exr_chan;

typedef struct exr_info {
    int64_t xmin, ymin, w, h;
    int compression;
    int nch;
    exr_chan ch[EXR_MAX_CHANNELS];
    uint64_t table_at, nchunks;
} exr_info;

static uint32_t le32(const unsigned char *p) {
    return (uint32_t)p[0] | (uint32_t)p[1] << 8 | (uint32_t)p[2] << 16 | (uint32_t)p[3] << 24;
}

static uint64_t le64(const unsigned char *p) {
    return (uint64_t)le32(p) | (uint64_t)le32(p + 4) << 32;
}

/* A NUL-terminated string of at most `maxlen` characters at *pos; 0 when the
 * file ends first or it is longer. */
static int get_str(const unsigned char *d, uint64_t size, uint64_t *pos, size_t maxlen,
                   char *out) {
    size_t n = 0;
    while (*pos + n < size && d[*pos + n] != 0) {
        if (n >= maxlen) return 0;
        out[n] = (char)d[*pos + n];
        n++;
    }
    if (*pos + n >= size) return 0;
    out[n] = 0;
    *pos += n + 1;
    return 1;
}

static int lines_per_chunk(int comp) {
    switch (comp) {
    case 0: case 1: case 2: return 1;   /* NONE, RLE, ZIPS */
    case 3: case 5: return 16;          /* ZIP, PXR24 */
    case 4: return 32;                  /* PIZ */
    default: return 0;
    }
}

static const char *comp_name(int c) {
    static const char *names[] = {"NONE", "RLE", "ZIPS", "ZIP", "PIZ", "PXR24",
                                  "B44", "B44A", "DWAA", "DWAB"};
    return c >= 0 && c < 10 ? names[c] : "unknown";
}

/* Parses and vets the header; 0 with msg set (status in *st) when refused. */
static int exr_precheck(const unsigned char *d, uint64_t size, exr_info *info, char *msg,
                        size_t cap, ckey_status *st) {
    *st = CKEY_ERR_FORMAT;
    memset(info, 0, sizeof *info);
    if (size < 8 || le32(d) != 20000630u) {
        snprintf(msg, cap, size < 8 ? "truncated (no OpenEXR header)" : "not an OpenEXR file");
        return 0;
    }
    const uint32_t ver = le32(d + 4);
    if ((ver & 0xff) != 2) {
        snprintf(msg, cap, "unsupported OpenEXR version %u", ver & 0xff);
        *st = CKEY_ERR_UNSUPPORTED;
        return 0;
    }
    if (ver & 0x200) {
        snprintf(msg, cap, "tiled OpenEXR files are not supported (scanline images only)");
        *st = CKEY_ERR_UNSUPPORTED;
        return 0;
    }
    if (ver & 0x800) {
        snprintf(msg, cap, "deep OpenEXR files are not supported");
        *st = CKEY_ERR_UNSUPPORTED;
        return 0;
    }
    if (ver & 0x1000) {
        snprintf(msg, cap, "multi-part OpenEXR files are not supported");
        *st = CKEY_ERR_UNSUPPORTED;
        return 0;
    }
    if (ver & ~(uint32_t)0x4ff) {
        snprintf(msg, cap, "unknown OpenEXR version flags 0x%x", ver & ~0xffu);
        *st = CKEY_ERR_UNSUPPORTED;
        return 0;
    }
    const size_t maxname = (ver & 0x400) ? 255 : 31;
    uint64_t pos = 8;
    int have_ch = 0, have_comp = 0, have_dw = 0;
    char name[256], type[256];
    for (int nattr = 0;; nattr++) {
        if (pos >= size) {
            snprintf(msg, cap, "truncated (in the header)");
            return 0;
        }
        if (d[pos] == 0) {
            pos++;
            break;
        }
        if (nattr >= EXR_MAX_ATTRIBUTES) {
            snprintf(msg, cap, "more than %d header attributes", EXR_MAX_ATTRIBUTES);
            return 0;
        }
        if (!get_str(d, size, &pos, maxname, name) || !get_str(d, size, &pos, maxname, type) ||
            size - pos < 4) {
            snprintf(msg, cap, "truncated or corrupt header attribute");
            return 0;
        }
        const int32_t asz = (int32_t)le32(d + pos);
        pos += 4;
        if (asz < 0 || (uint64_t)asz > size - pos) {
            snprintf(msg, cap, "truncated (attribute '%.60s' of %d bytes)", name, asz);
            return 0;
        }
        const unsigned char *v = d + pos;
        const uint64_t vend = pos + (uint64_t)asz;
        if (!strcmp(name, "channels")) {
            if (strcmp(type, "chlist") || have_ch) goto bad_attr;
            have_ch = 1;
            uint64_t p = pos;
            for (;;) {
                if (p >= vend) goto bad_attr;
                if (d[p] == 0) break;
                char cname[256];
                if (!get_str(d, vend, &p, maxname, cname) || vend - p < 16) goto bad_attr;
                if (info->nch >= EXR_MAX_CHANNELS) {
                    snprintf(msg, cap, "more than %d channels", EXR_MAX_CHANNELS);
                    *st = CKEY_ERR_UNSUPPORTED;
                    return 0;
                }
                const int32_t pt = (int32_t)le32(d + p);
                const int32_t xs = (int32_t)le32(d + p + 8), ys = (int32_t)le32(d + p + 12);
                p += 16;
                if (pt != 1 && pt != 2) {
                    snprintf(msg, cap, "channel '%.60s' has pixel type %s (HALF or FLOAT supported)",
                             cname, pt == 0 ? "UINT" : "unknown");
                    *st = CKEY_ERR_UNSUPPORTED;
                    return 0;
                }
                if (xs != 1 || ys != 1) {
                    snprintf(msg, cap, "channel '%.60s' is subsampled (%d x %d; only 1 x 1 supported)",
                             cname, xs, ys);
                    *st = CKEY_ERR_UNSUPPORTED;
                    return 0;
                }
                snprintf(info->ch[info->nch].name, sizeof info->ch[0].name, "%s", cname);
                info->ch[info->nch].type = pt;
                info->nch++;
            }
            if (info->nch == 0) {
                snprintf(msg, cap, "no channels");
                return 0;
            }
        } else if (!strcmp(name, "compression")) {
            if (strcmp(type, "compression") || asz != 1 || have_comp) goto bad_attr;
            have_comp = 1;
            info->compression = v[0];
            if (!lines_per_chunk(info->compression)) {
                snprintf(msg, cap,
                         "compression %s (%d) is not supported (NONE, RLE, ZIPS, ZIP, PIZ or "
                         "PXR24)",
                         comp_name(info->compression), info->compression);
                *st = CKEY_ERR_UNSUPPORTED;
                return 0;
            }
        } else if (!strcmp(name, "dataWindow")) {
            if (strcmp(type, "box2i") || asz != 16 || have_dw) goto bad_attr;
            have_dw = 1;
            const int64_t x0 = (int32_t)le32(v), y0 = (int32_t)le32(v + 4),
                          x1 = (int32_t)le32(v + 8), y1 = (int32_t)le32(v + 12);
            if (x1 < x0 || y1 < y0) {
                snprintf(msg, cap, "empty data window");
                return 0;
            }
            info->xmin = x0;
            info->ymin = y0;
            info->w = x1 - x0 + 1;
            info->h = y1 - y0 + 1;
            if (info->w > CKEY_IMAGE_MAX_SIDE || info->h > CKEY_IMAGE_MAX_SIDE) {
                snprintf(msg, cap, "%lld x %lld exceeds the %d-pixel side limit",
                         (long long)info->w, (long long)info->h, CKEY_IMAGE_MAX_SIDE);
                *st = CKEY_ERR_UNSUPPORTED;
                return 0;
            }
            if (info->w * info->h > CKEY_IMAGE_MAX_PIXELS) {
                snprintf(msg, cap, "%lld x %lld exceeds the limit of %lld pixels",
                         (long long)info->w, (long long)info->h,
                         (long long)CKEY_IMAGE_MAX_PIXELS);
                *st = CKEY_ERR_UNSUPPORTED;
                return 0;
            }
        } else if (!strcmp(name, "type")) {
            if (asz < 13 || memcmp(v, "scanlineimage", 13) != 0 ||
                (asz > 13 && v[13] != 0)) {
                snprintf(msg, cap, "only scanline images are supported (type '%.*s')",
                         asz > 40 ? 40 : (int)asz, (const char *)v);
                *st = CKEY_ERR_UNSUPPORTED;
                return 0;
            }
        }
        pos = vend;
        continue;
    bad_attr:
        snprintf(msg, cap, "corrupt '%.60s' attribute", name);
        return 0;
    }
    if (!have_ch || !have_comp || !have_dw) {
        snprintf(msg, cap, "header lacks the %s attribute",
                 !have_ch ? "channels" : !have_comp ? "compression" : "dataWindow");
        return 0;
    }
    const uint64_t lpc = (uint64_t)lines_per_chunk(info->compression);
    info->nchunks = ((uint64_t)info->h + lpc - 1) / lpc;
    info->table_at = pos;
    if (info->nchunks > (size - pos) / 8) {
        snprintf(msg, cap, "truncated (the offset table of %llu chunks does not fit)",
                 (unsigned long long)info->nchunks);
        return 0;
    }
    const uint64_t data_start = pos + info->nchunks * 8;
    for (uint64_t i = 0; i < info->nchunks; i++) {
        const uint64_t off = le64(d + pos + 8 * i);
        if (off < data_start || off > size || size - off < 8) {
            snprintf(msg, cap, "truncated or corrupt (chunk %llu at offset %llu, file of %llu bytes)",
                     (unsigned long long)i, (unsigned long long)off, (unsigned long long)size);
            return 0;
        }
        const int64_t y = (int32_t)le32(d + off);
        const int32_t psz = (int32_t)le32(d + off + 4);
        if (y < info->ymin || y >= info->ymin + info->h || (y - info->ymin) % (int64_t)lpc) {
            snprintf(msg, cap, "corrupt chunk %llu (line %lld)", (unsigned long long)i,
                     (long long)y);
            return 0;
        }
        if (psz < 0 || (uint64_t)psz > size - off - 8) {
            snprintf(msg, cap, "truncated (chunk %llu of %d bytes ends past the end of file)",
                     (unsigned long long)i, psz);
            return 0;
        }
    }
    return 1;
}

/* ------------------------------------------------------------ reader */

typedef struct exr_src {
    const unsigned char *data;
    uint64_t size;
} exr_src;

static int64_t src_read(exr_const_context_t ctxt, void *ud, void *buf, uint64_t sz,
                        uint64_t off, exr_stream_error_func_ptr_t error_cb) {
    (void)ctxt;
    (void)error_cb;
    const exr_src *s = ud;
    if (off >= s->size) return 0;
    if (sz > s->size - off) sz = s->size - off;
    memcpy(buf, s->data + off, (size_t)sz);
    return (int64_t)sz;
}

static int64_t src_size(exr_const_context_t ctxt, void *ud) {
    (void)ctxt;
    return (int64_t)((const exr_src *)ud)->size;
}

/* OpenEXR's messages go to the message box that starts the context's user
 * data (exr_rd, found through exr_get_user_data), never to
 * stderr. */
typedef struct exr_msgbox {
    char msg[256];
} exr_msgbox;

static void on_error(exr_const_context_t ctxt, exr_result_t code, const char *text) {
    void *ud = NULL;
    char *msg = NULL;
    if (ctxt && exr_get_user_data(ctxt, &ud) == EXR_ERR_SUCCESS && ud)
        msg = ((exr_msgbox *)ud)->msg;
    if (msg && !msg[0])
        snprintf(msg, sizeof((exr_msgbox *)0)->msg, "%s (%s)", text ? text : "error",
                 exr_get_error_code_as_string(code));
}

typedef struct exr_rd {
    exr_msgbox box; /* first: on_error writes here */
    exr_src src;
    ck_pixels *px;
    float *pixels, *fallback; /* px's block; the fallback plane within it */
    float *scratch;
} exr_rd;

static int64_t rd_read(exr_const_context_t c, void *ud, void *buf, uint64_t sz, uint64_t off,
                       exr_stream_error_func_ptr_t e) {
    return src_read(c, &((exr_rd *)ud)->src, buf, sz, off, e);
}

static int64_t rd_size(exr_const_context_t c, void *ud) {
    return src_size(c, &((exr_rd *)ud)->src);
}

/* OpenEXRCore reading r from the buffer data: its errors into r, the
 * image's sides capped as every reader caps them. */
static exr_result_t start_read(exr_rd *r, const void *data, size_t size, const char *label, exr_context_t *ctx) {
    r->src.data = data;
    r->src.size = size;
    exr_context_initializer_t init = EXR_DEFAULT_CONTEXT_INITIALIZER;
    init.error_handler_fn = on_error;
    init.user_data = r;
    init.read_fn = rd_read;
    init.size_fn = rd_size;
    init.max_image_width = CKEY_IMAGE_MAX_SIDE;
    init.max_image_height = CKEY_IMAGE_MAX_SIDE;
    return exr_start_read(ctx, label, &init);
}

static int find_ch(const exr_info *info, const char *name) {
    for (int i = 0; i < info->nch; i++)
        if (!strcmp(info->ch[i].name, name)) return i;
    return -1;
}

static ckey_status exr_fail(exr_rd *r, ckey_status st, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));
static ckey_status exr_fail(exr_rd *r, ckey_status st, const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    char buf[96];
    vsnprintf(buf, sizeof buf, fmt, ap);
    va_end(ap);
    if (r->box.msg[0]) {
        char lib[sizeof r->box.msg];
        memcpy(lib, r->box.msg, sizeof lib);
        snprintf(r->box.msg, sizeof r->box.msg, "%.95s: %.150s", buf, lib);
    } else {
        snprintf(r->box.msg, sizeof r->box.msg, "%s", buf);
    }
    return st;
}

/* OpenEXR's view must agree with ours before it decodes anything; then which
 * file channel feeds which output plane (src[4]); for HINT, plane 0 is the
 * alpha (or the only channel) and plane 1 the fallback color (*alpha_hint). */
static ckey_status exr_pick(exr_rd *r, exr_context_t ctx, const exr_info *info, ckey_image_kind kind, int src[4],
                            int *out_ch_out, int *alpha_hint_out, int *lpc_out) {
    exr_attr_box2i_t dw;
    exr_storage_t storage;
    exr_compression_t comp;
    const exr_attr_chlist_t *chl = NULL;
    int32_t nchunks = 0, lpc = 0;
    if (exr_get_storage(ctx, 0, &storage) || exr_get_data_window(ctx, 0, &dw) ||
        exr_get_compression(ctx, 0, &comp) || exr_get_channels(ctx, 0, &chl) ||
        exr_get_chunk_count(ctx, 0, &nchunks) || exr_get_scanlines_per_chunk(ctx, 0, &lpc) || !chl)
        return exr_fail(r, CKEY_ERR_FORMAT, "unreadable header");
    if (storage != EXR_STORAGE_SCANLINE || dw.min.x != info->xmin || dw.min.y != info->ymin ||
        (int64_t)dw.max.x - dw.min.x + 1 != info->w || (int64_t)dw.max.y - dw.min.y + 1 != info->h ||
        (int)comp != info->compression || chl->num_channels != info->nch ||
        (uint64_t)nchunks != info->nchunks || lpc != lines_per_chunk(info->compression))
        return exr_fail(r, CKEY_ERR_FORMAT, "inconsistent header");

    const int iR = find_ch(info, "R"), iG = find_ch(info, "G"), iB = find_ch(info, "B"),
              iA = find_ch(info, "A"), iY = find_ch(info, "Y");
    src[0] = src[1] = src[2] = src[3] = -1;
    int out_ch, alpha_hint = 0;
    if (kind == CK_IMAGE_RGBA) {
        out_ch = 4;
        if (iR < 0 || iG < 0 || iB < 0 || iA < 0)
            return exr_fail(r, CKEY_ERR_FORMAT, "no R, G, B and A channels (an RGBA pass needs all four)");
        src[0] = iR, src[1] = iG, src[2] = iB, src[3] = iA;
    } else if (kind == CKEY_IMAGE_RGB) {
        out_ch = 3;
        if (iR >= 0 && iG >= 0 && iB >= 0) {
            src[0] = iR, src[1] = iG, src[2] = iB;
        } else if (iY >= 0) {
            src[0] = src[1] = src[2] = iY;
        } else if (info->nch == 1) {
            src[0] = src[1] = src[2] = 0;
        } else {
            return exr_fail(r, CKEY_ERR_UNSUPPORTED,
                            "no R, G, B or Y channels (a color plate needs R, G and B, or Y)");
        }
    } else {
        out_ch = 1;
        /* the color the other readers fall back on: gray, else blue (OpenCV's
         * channel 0 of BGR) */
        const int color = iY >= 0 ? iY : iB >= 0 ? iB : iR >= 0 ? iR : iG;
        if (iA >= 0 && color >= 0) {
            src[0] = iA, src[1] = color;
            alpha_hint = 1;
        } else if (iA >= 0 || color >= 0) {
            src[0] = iA >= 0 ? iA : color;
        } else if (info->nch == 1) {
            src[0] = 0;
        } else {
            return exr_fail(r, CKEY_ERR_UNSUPPORTED, "no A, Y, R, G or B channel for a hint");
        }
    }
    *out_ch_out = out_ch;
    *alpha_hint_out = alpha_hint;
    *lpc_out = lpc;
    return CKEY_OK;
}

/* Decode every chunk: plane p's samples (file channel src[p]) to base[p],
 * `stride` bytes apart, rows `line` bytes apart, as `type`; channels no
 * plane takes into r->scratch (a chunk of w-sample rows). */
static ckey_status exr_chunks(exr_rd *r, exr_context_t ctx, const exr_info *info, int lpc, int nplanes,
                              const int src[4], uint8_t *const base[4], size_t stride, size_t line,
                              exr_pixel_type_t type) {
    const size_t w = (size_t)info->w, h = (size_t)info->h;
    const size_t elem = type == EXR_PIXEL_HALF ? 2 : 4;
    exr_decode_pipeline_t dec = EXR_DECODE_PIPELINE_INITIALIZER;
    ckey_status st = CKEY_OK;
    int started = 0;
    for (int64_t y = info->ymin; y < info->ymin + info->h; y += lpc) {
        exr_chunk_info_t ci;
        exr_result_t rc = exr_read_scanline_chunk_info(ctx, 0, (int)y, &ci);
        if (rc) {
            st = exr_fail(r, CKEY_ERR_FORMAT, "corrupt chunk at line %lld", (long long)y);
            break;
        }
        rc = started ? exr_decoding_update(ctx, 0, &ci, &dec)
                     : exr_decoding_initialize(ctx, 0, &ci, &dec);
        if (rc) {
            st = exr_fail(r, CKEY_ERR_FORMAT, "cannot decode the chunk at line %lld",
                          (long long)y);
            break;
        }
        const size_t row0 = (size_t)(ci.start_y - info->ymin);
        if (ci.start_y < info->ymin || row0 + (size_t)ci.height > h || ci.width != (int32_t)w) {
            st = exr_fail(r, CKEY_ERR_FORMAT, "corrupt chunk at line %lld", (long long)y);
            break;
        }
        for (int c = 0; c < dec.channel_count; c++) {
            exr_coding_channel_info_t *cc = &dec.channels[c];
            cc->decode_to_ptr = (uint8_t *)r->scratch;
            cc->user_pixel_stride = (int32_t)elem;
            cc->user_line_stride = (int32_t)(w * elem);
            for (int p = 0; p < nplanes; p++) {
                if (!strcmp(cc->channel_name, info->ch[src[p]].name)) {
                    /* the first plane fed by this channel; others copied after */
                    cc->decode_to_ptr = base[p] + row0 * line;
                    cc->user_pixel_stride = (int32_t)stride;
                    cc->user_line_stride = (int32_t)line;
                    break;
                }
            }
            cc->user_bytes_per_element = (int16_t)elem;
            cc->user_data_type = type;
        }
        if (!started) {
            rc = exr_decoding_choose_default_routines(ctx, 0, &dec);
            if (rc) {
                st = exr_fail(r, CKEY_ERR_FORMAT, "no decoder for this file");
                break;
            }
            started = 1;
        }
        rc = exr_decoding_run(ctx, 0, &dec);
        if (rc) {
            st = exr_fail(r, CKEY_ERR_FORMAT, "corrupt data in the chunk at line %lld",
                          (long long)y);
            break;
        }
    }
    if (started || dec.channels) exr_decoding_destroy(ctx, &dec);
    if (st != CKEY_OK) return st;
    return CKEY_OK;
}

static ckey_status exr_decode(exr_rd *r, exr_context_t ctx, const exr_info *info,
                              ckey_image_kind kind, ckey_image *img) {
    int src[4], out_ch = 0, alpha_hint = 0, lpc = 0;
    ckey_status pst = exr_pick(r, ctx, info, kind, src, &out_ch, &alpha_hint, &lpc);
    if (pst != CKEY_OK) return pst;
    const int iA = find_ch(info, "A");
    const size_t w = (size_t)info->w, h = (size_t)info->h, plane = w * h;
    r->pixels = ck_pixels_take(r->px, plane * (size_t)(out_ch + alpha_hint));
    if (alpha_hint && r->pixels) r->fallback = r->pixels + plane * (size_t)out_ch;
    /* Channels we do not keep are still decoded, into one scratch chunk:
     * OpenEXR 3.1.5's unpackers crash on a NULL decode_to_ptr. */
    r->scratch = malloc((size_t)lpc * w * sizeof(float));
    if (!r->pixels || !r->scratch)
        return exr_fail(r, CKEY_ERR_NOMEM, "out of memory for a %zu x %zu image", w, h);
    float *dst[4] = {r->pixels, NULL, NULL, NULL};
    if (kind == CKEY_IMAGE_RGB || kind == CK_IMAGE_RGBA) {
        for (int p = 1; p < out_ch; p++) dst[p] = r->pixels + (size_t)p * plane;
    } else if (alpha_hint) {
        dst[1] = r->fallback;
    }
    const int nplanes = kind == CKEY_IMAGE_RGB || kind == CK_IMAGE_RGBA ? out_ch : alpha_hint ? 2 : 1;

    uint8_t *base[4];
    for (int p = 0; p < 4; p++) base[p] = (uint8_t *)dst[p];
    ckey_status st = exr_chunks(r, ctx, info, lpc, nplanes, src, base, sizeof(float), w * sizeof(float),
                                EXR_PIXEL_FLOAT);
    if (st != CKEY_OK) return st;

    /* planes fed by a channel that already fed an earlier plane (Y -> RGB) */
    for (int p = 1; p < nplanes; p++)
        for (int q = 0; q < p; q++)
            if (src[q] == src[p]) {
                memcpy(dst[p], dst[q], plane * sizeof(float));
                break;
            }
    if (alpha_hint) {
        int opaque = 1;
        for (size_t i = 0; i < plane && opaque; i++) opaque = r->pixels[i] >= 1.0f;
        if (opaque) memcpy(r->pixels, r->fallback, plane * sizeof(float));
    }
    /* A NaN or Inf would poison the whole matte: refuse it, naming the pixel
     * (same rule as float TIFF). */
    const size_t total = plane * (size_t)out_ch;
    for (size_t i = 0; i < total; i++)
        if (!isfinite(r->pixels[i]))
            return exr_fail(r, CKEY_ERR_FORMAT,
                            "non-finite sample (NaN or Inf) at x %zu, y %zu, channel %zu",
                            (i % plane) % w, (i % plane) / w, i / plane);
    int depth = 16;
    for (int p = 0; p < nplanes; p++)
        if (info->ch[src[p]].type == 2) depth = 32;
    img->width = (int32_t)w;
    img->height = (int32_t)h;
    img->channels = out_ch;
    img->bit_depth = depth;
    img->has_alpha = iA >= 0;
    img->data = r->pixels;
    img->capacity = r->px->floats;
    r->pixels = NULL;
    return CKEY_OK;
}

/* exr_decode into packed HALF samples: [h, w, C] with C = 3 (RGB: R, G, B,
 * or Y or the lone channel repeated) or, for HINT, 1 (the channel) or 2 (the
 * alpha, then the colour it falls back on). A plane fed by a FLOAT channel
 * is CKEY_ERR_UNSUPPORTED before anything is decoded. */
static ckey_status exr_decode_packed(exr_rd *r, exr_context_t ctx, const exr_info *info, ckey_image_kind kind,
                                     ckey_packed_image *pk) {
    int src[4], out_ch = 0, alpha_hint = 0, lpc = 0;
    ckey_status st = exr_pick(r, ctx, info, kind, src, &out_ch, &alpha_hint, &lpc);
    if (st != CKEY_OK) return st;
    const int C = kind == CKEY_IMAGE_RGB ? 3 : alpha_hint ? 2 : 1;
    for (int p = 0; p < C; p++)
        if (info->ch[src[p]].type != 1)
            return exr_fail(r, CKEY_ERR_UNSUPPORTED, "channel '%.60s' is FLOAT: no packed read",
                            info->ch[src[p]].name);
    const size_t w = (size_t)info->w, h = (size_t)info->h, n = w * h, bytes = n * (size_t)C * 2;
    ck_packed_reserve(pk, bytes);
    r->scratch = malloc((size_t)lpc * w * sizeof(float));
    if (!pk->data || !r->scratch) return exr_fail(r, CKEY_ERR_NOMEM, "out of memory for a %zu x %zu image", w, h);
    uint16_t *px = pk->data;
    uint8_t *base[4] = {NULL, NULL, NULL, NULL};
    for (int p = 0; p < C; p++) base[p] = (uint8_t *)(px + p);
    if ((st = exr_chunks(r, ctx, info, lpc, C, src, base, (size_t)C * 2, w * (size_t)C * 2, EXR_PIXEL_HALF)))
        return st;
    /* planes fed by a channel that already fed an earlier plane (Y -> RGB) */
    for (int p = 1; p < C; p++)
        for (int q = 0; q < p; q++)
            if (src[q] == src[p]) {
                for (size_t i = 0; i < n; i++) px[i * (size_t)C + (size_t)p] = px[i * (size_t)C + (size_t)q];
                break;
            }
    /* the float reader's rules on the same values: a NaN or Inf (all exponent
     * bits set) refused, naming the pixel and plane; an alpha >= 1 everywhere
     * (+Inf included, NaN not: a positive half's bits order as its value)
     * gives way to the colour */
    int hint_ch = -1;
    if (alpha_hint) {
        int opaque = 1;
        for (size_t i = 0; i < n && opaque; i++) opaque = px[i * 2] >= 0x3c00u && px[i * 2] <= 0x7c00u;
        hint_ch = opaque ? 1 : 0;
    } else if (kind == CKEY_IMAGE_HINT) {
        hint_ch = 0;
    }
    const int checked = kind == CKEY_IMAGE_RGB ? 3 : 1;
    for (int p = 0; p < checked; p++) {
        const int c = kind == CKEY_IMAGE_RGB ? p : hint_ch;
        for (size_t i = 0; i < n; i++)
            if ((px[i * (size_t)C + (size_t)c] & 0x7c00u) == 0x7c00u)
                return exr_fail(r, CKEY_ERR_FORMAT, "non-finite sample (NaN or Inf) at x %zu, y %zu, channel %d",
                                i % w, i / w, p);
    }
    pk->width = (int32_t)w;
    pk->height = (int32_t)h;
    pk->channels = C;
    pk->type = CKEY_SAMPLE_F16;
    pk->hint_channel = hint_ch;
    return CKEY_OK;
}

ckey_status ck_image_read_exr_packed_memory(const void *data, size_t size, const char *label, ckey_image_kind kind,
                                            ckey_packed_image *pk, ckey_error *err) {
    if (!label) label = "(memory)";
    if (!pk || (!data && size) || (kind != CKEY_IMAGE_RGB && kind != CKEY_IMAGE_HINT))
        return ck_fail(err, CKEY_ERR_INVALID_ARG, "%s: invalid arguments to the OpenEXR reader", label);
    pk->width = pk->height = pk->channels = 0;
    if (size == 0) return ck_fail(err, CKEY_ERR_FORMAT, "%s: empty file, not an OpenEXR", label);
    exr_info info;
    char msg[256];
    ckey_status st;
    if (!exr_precheck(data, size, &info, msg, sizeof msg, &st)) return ck_fail(err, st, "%s: %s", label, msg);
    exr_rd *r = calloc(1, sizeof *r);
    if (!r) return ck_fail(err, CKEY_ERR_NOMEM, "%s: out of memory", label);
    exr_context_t ctx = NULL;
    if (start_read(r, data, size, label, &ctx) != EXR_ERR_SUCCESS)
        st = exr_fail(r, CKEY_ERR_FORMAT, "OpenEXR refused the header");
    else
        st = exr_decode_packed(r, ctx, &info, kind, pk);
    if (ctx) exr_finish(&ctx);
    free(r->scratch);
    if (st != CKEY_OK) {
        pk->width = pk->height = pk->channels = 0;
        st = ck_fail(err, st, "%s: %s", label, r->box.msg[0] ? r->box.msg : "invalid OpenEXR");
    }
    free(r);
    return st;
}

ckey_status ck_image_read_exr_memory(const void *data, size_t size, const char *label,
                                     ckey_image_kind kind, ckey_image *out, ckey_error *err) {
    return ck_image_read_exr_memory_px(data, size, label, kind, NULL, out, err);
}

ckey_status ck_image_read_exr_memory_px(const void *data, size_t size, const char *label, ckey_image_kind kind,
                                        ck_pixels *px, ckey_image *out, ckey_error *err) {
    if (out) memset(out, 0, sizeof *out);
    if (!label) label = "(memory)";
    if (!out || (!data && size) || !valid_kind(kind))
        return ck_fail(err, CKEY_ERR_INVALID_ARG, "%s: invalid arguments to the OpenEXR reader",
                       label);
    if (size == 0) return ck_fail(err, CKEY_ERR_FORMAT, "%s: empty file, not an OpenEXR", label);
    exr_info info;
    char msg[256];
    ckey_status st;
    if (!exr_precheck(data, size, &info, msg, sizeof msg, &st))
        return ck_fail(err, st, "%s: %s", label, msg);

    exr_rd *r = calloc(1, sizeof *r);
    if (!r) return ck_fail(err, CKEY_ERR_NOMEM, "%s: out of memory", label);
    ck_pixels own = {0};
    r->px = px ? px : &own;
    exr_context_t ctx = NULL;
    if (start_read(r, data, size, label, &ctx) != EXR_ERR_SUCCESS)
        st = exr_fail(r, CKEY_ERR_FORMAT, "OpenEXR refused the header");
    else
        st = exr_decode(r, ctx, &info, kind, out);
    if (ctx) exr_finish(&ctx);
    if (r->pixels) ck_pixels_drop(r->px);
    free(r->scratch);
    if (st != CKEY_OK) {
        memset(out, 0, sizeof *out);
        st = ck_fail(err, st, "%s: %s", label, r->box.msg[0] ? r->box.msg : "invalid OpenEXR");
    }
    free(r);
    return st;
}

#endif /* CK_HAVE_EXR */
