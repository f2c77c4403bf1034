/*
 * ckey_image_probe: an image's size from its header alone, so that a run can
 * plan the memory a plate needs (ckey_plan_run_memory) before it decodes the
 * pixels. Pure parsing of the first bytes (and, for TIFF and JPEG, of a few
 * records the header points at); none of the codec libraries is involved, so
 * it answers in a build without them too. The decoders stay the authority: a
 * file the probe accepts may still fail to decode, and every check of theirs
 * (caps, truncation, channels) runs as before.
 */
#include <errno.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>

#include "ckey_media.h"
#include "core/core.h"
#include "media/image.h"

/* What is probed: an open file, or a buffer (the fuzz targets), and the
 * label its messages carry. */
typedef struct probe_file {
    FILE *f;
    const unsigned char *mem;
    const char *path;
    int64_t size;
} probe_file;

static ckey_status truncated(const probe_file *p, ckey_error *err) {
    return ck_fail(err, CKEY_ERR_FORMAT, "%s: truncated header", p->path);
}

/* n bytes at offset `off`; 0 when the file ends first or cannot be read. */
static int read_at(const probe_file *p, uint64_t off, void *buf, size_t n) {
    if (off > (uint64_t)p->size || n > (uint64_t)p->size - off) return 0;
    if (p->mem) {
        memcpy(buf, p->mem + off, n);
        return 1;
    }
    if (fseeko(p->f, (off_t)off, SEEK_SET) != 0) return 0;
    return fread(buf, 1, n, p->f) == n;
}

static uint32_t be32(const unsigned char *b) {
    return (uint32_t)b[0] << 24 | (uint32_t)b[1] << 16 | (uint32_t)b[2] << 8 | b[3];
}

static uint32_t le32(const unsigned char *b) {
    return (uint32_t)b[3] << 24 | (uint32_t)b[2] << 16 | (uint32_t)b[1] << 8 | b[0];
}

/* PNG: the IHDR chunk, first after the signature. */
static ckey_status probe_png(const probe_file *p, int64_t *w, int64_t *h, ckey_error *err) {
    unsigned char b[24];
    if (!read_at(p, 0, b, sizeof b)) return truncated(p, err);
    if (memcmp(b + 12, "IHDR", 4) != 0 || be32(b + 8) != 13)
        return ck_fail(err, CKEY_ERR_FORMAT, "%s: the PNG does not start with its IHDR chunk", p->path);
    *w = be32(b + 16);
    *h = be32(b + 20);
    return CKEY_OK;
}

/* JPEG: the segments in order up to the first start-of-frame (SOF0..SOF15
 * but DHT C4, JPG C8 and DAC CC), whose lines and samples per line are the
 * size. */
static ckey_status probe_jpeg(const probe_file *p, int64_t *w, int64_t *h, ckey_error *err) {
    uint64_t off = 2; /* after SOI */
    for (int segments = 0; segments < 4096; segments++) {
        unsigned char m[2];
        if (!read_at(p, off, m, 2)) return truncated(p, err);
        if (m[0] != 0xFF)
            return ck_fail(err, CKEY_ERR_FORMAT, "%s: no JPEG marker at byte %llu", p->path,
                           (unsigned long long)off);
        if (m[1] == 0xFF) { /* fill byte */
            off += 1;
            continue;
        }
        off += 2;
        if (m[1] == 0x01 || (m[1] >= 0xD0 && m[1] <= 0xD7)) continue; /* no length */
        if (m[1] == 0xD9 || m[1] == 0xDA)
            return ck_fail(err, CKEY_ERR_FORMAT, "%s: no JPEG frame header before the image data",
                           p->path);
        unsigned char seg[7];
        if (!read_at(p, off, seg, 2)) return truncated(p, err);
        const unsigned len = (unsigned)seg[0] << 8 | seg[1];
        if (len < 2) return ck_fail(err, CKEY_ERR_FORMAT, "%s: bad JPEG segment length", p->path);
        const int sof = m[1] >= 0xC0 && m[1] <= 0xCF && m[1] != 0xC4 && m[1] != 0xC8 && m[1] != 0xCC;
        if (sof) {
            if (len < 8 || !read_at(p, off, seg, 7)) return truncated(p, err);
            *h = (int64_t)seg[3] << 8 | seg[4];
            *w = (int64_t)seg[5] << 8 | seg[6];
            if (*h == 0)
                return ck_fail(err, CKEY_ERR_UNSUPPORTED, "%s: the JPEG gives its height after the image "
                                                          "data (DNL)", p->path);
            return CKEY_OK;
        }
        off += len;
    }
    return ck_fail(err, CKEY_ERR_FORMAT, "%s: no JPEG frame header", p->path);
}

/* TIFF: ImageWidth (256) and ImageLength (257) of the first directory, the
 * image the reader decodes; classic and BigTIFF, either byte order. */
static ckey_status probe_tiff(const probe_file *p, int64_t *w, int64_t *h, ckey_error *err) {
    unsigned char b[16];
    if (!read_at(p, 0, b, 16)) return truncated(p, err);
    const int le = b[0] == 'I';
    const int big = (le ? b[2] : b[3]) == 43;
#define U16(q) (le ? (uint32_t)(q)[0] | (uint32_t)(q)[1] << 8 : (uint32_t)(q)[0] << 8 | (uint32_t)(q)[1])
#define U32(q) (le ? le32(q) : be32(q))
#define U64(q) (le ? (uint64_t)le32((q) + 4) << 32 | le32(q) : (uint64_t)be32(q) << 32 | be32((q) + 4))
    const uint64_t ifd = big ? U64(b + 8) : U32(b + 4);
    const size_t entry = big ? 20 : 12, count_bytes = big ? 8 : 2;
    unsigned char c[8];
    if (!read_at(p, ifd, c, count_bytes)) return truncated(p, err);
    const uint64_t n = big ? U64(c) : U16(c);
    *w = *h = -1;
    for (uint64_t i = 0; i < n && i < 65536 && (*w < 0 || *h < 0); i++) {
        unsigned char e[20];
        if (!read_at(p, ifd + count_bytes + i * entry, e, entry)) return truncated(p, err);
        const uint32_t tag = U16(e), type = U16(e + 2);
        if (tag != 256 && tag != 257) continue;
        const unsigned char *v = e + (big ? 12 : 8);
        int64_t val;
        /* the integer types libtiff takes for these tags, inline */
        if (type == 1 || type == 6) val = type == 6 ? (int8_t)v[0] : v[0];      /* (S)BYTE */
        else if (type == 3 || type == 8) val = type == 8 ? (int16_t)U16(v) : (int64_t)U16(v); /* (S)SHORT */
        else if (type == 4 || type == 9) val = type == 9 ? (int32_t)U32(v) : (int64_t)U32(v); /* (S)LONG */
        else if ((type == 16 || type == 17) && big) /* (S)LONG8, BigTIFF only */
            val = U64(v) > INT32_MAX ? (type == 17 && (int64_t)U64(v) < 0 ? -1 : INT32_MAX) : (int64_t)U64(v);
        else
            return ck_fail(err, CKEY_ERR_FORMAT, "%s: TIFF tag %u has type %u, not an integer",
                           p->path, (unsigned)tag, (unsigned)type);
        if (tag == 256) *w = val;
        else *h = val;
    }
#undef U16
#undef U32
#undef U64
    if (*w < 0 || *h < 0)
        return ck_fail(err, CKEY_ERR_FORMAT, "%s: the TIFF's first directory has no image width or length",
                       p->path);
    return CKEY_OK;
}

/* OpenEXR: the dataWindow attribute (box2i) of the first header. */
static ckey_status probe_exr(const probe_file *p, int64_t *w, int64_t *h, ckey_error *err) {
    uint64_t off = 8; /* magic, version and flags */
    for (int attrs = 0; attrs < 1024; attrs++) {
        char text[2][256];
        for (int k = 0; k < 2; k++) { /* the attribute's name, then its type's */
            size_t len = 0;
            for (;;) {
                unsigned char ch;
                if (!read_at(p, off++, &ch, 1)) return truncated(p, err);
                if (ch == 0) break;
                if (len + 1 >= sizeof text[k])
                    return ck_fail(err, CKEY_ERR_FORMAT, "%s: an EXR attribute name is too long", p->path);
                text[k][len++] = (char)ch;
            }
            text[k][len] = 0;
            if (k == 0 && len == 0)
                return ck_fail(err, CKEY_ERR_FORMAT, "%s: the EXR header has no dataWindow", p->path);
        }
        unsigned char sz[4];
        if (!read_at(p, off, sz, 4)) return truncated(p, err);
        off += 4;
        const uint32_t size = le32(sz);
        if (!strcmp(text[0], "dataWindow")) {
            unsigned char box[16];
            if (strcmp(text[1], "box2i") || size != 16 || !read_at(p, off, box, 16))
                return ck_fail(err, CKEY_ERR_FORMAT, "%s: the EXR dataWindow is not a box2i", p->path);
            const int64_t x0 = (int32_t)le32(box), y0 = (int32_t)le32(box + 4),
                          x1 = (int32_t)le32(box + 8), y1 = (int32_t)le32(box + 12);
            *w = x1 - x0 + 1;
            *h = y1 - y0 + 1;
            return CKEY_OK;
        }
        off += size;
    }
    return ck_fail(err, CKEY_ERR_FORMAT, "%s: the EXR header has no dataWindow", p->path);
}

/* The size from p's header; the caps checked as the readers check them. */
static ckey_status probe(const probe_file *p, int32_t *width, int32_t *height, ckey_error *err) {
    unsigned char head[8];
    const size_t got = p->size < 8 ? (size_t)p->size : 8;
    int64_t w = 0, h = 0;
    ckey_status st;
    if (got == 0 || !read_at(p, 0, head, got)) {
        st = ck_fail(err, got == 0 ? CKEY_ERR_FORMAT : CKEY_ERR_IO, "%s: %s", p->path,
                     got == 0 ? "empty file" : "read error");
    } else {
        switch (ck_image_sniff(head, got)) {
        case CK_IMAGE_PNG: st = probe_png(p, &w, &h, err); break;
        case CK_IMAGE_JPEG: st = probe_jpeg(p, &w, &h, err); break;
        case CK_IMAGE_TIFF: st = probe_tiff(p, &w, &h, err); break;
        case CK_IMAGE_EXR: st = probe_exr(p, &w, &h, err); break;
        default:
            st = ck_fail(err, CKEY_ERR_UNSUPPORTED,
                         "%s: unknown image format (PNG, JPEG, TIFF and OpenEXR are read)", p->path);
        }
    }
    if (st != CKEY_OK) return st;
    if (w < 1 || h < 1)
        return ck_fail(err, CKEY_ERR_FORMAT, "%s: the header gives a size of %lld x %lld", p->path,
                       (long long)w, (long long)h);
    if (w > CKEY_IMAGE_MAX_SIDE || h > CKEY_IMAGE_MAX_SIDE)
        return ck_fail(err, CKEY_ERR_UNSUPPORTED, "%s: %lld x %lld exceeds the %d-pixel side limit", p->path,
                       (long long)w, (long long)h, CKEY_IMAGE_MAX_SIDE);
    if (w * h > CKEY_IMAGE_MAX_PIXELS)
        return ck_fail(err, CKEY_ERR_UNSUPPORTED, "%s: %lld x %lld exceeds the limit of %lld pixels", p->path,
                       (long long)w, (long long)h, (long long)CKEY_IMAGE_MAX_PIXELS);
    *width = (int32_t)w;
    *height = (int32_t)h;
    return CKEY_OK;
}

ckey_status ckey_image_probe(const char *path, int32_t *width, int32_t *height, ckey_error *err) {
    if (width) *width = 0;
    if (height) *height = 0;
    if (!path || !width || !height)
        return ck_fail(err, CKEY_ERR_INVALID_ARG, "ckey_image_probe: NULL argument");
    struct stat sb;
    if (stat(path, &sb) != 0) return ck_fail(err, CKEY_ERR_IO, "%s: %s", path, strerror(errno));
    if (!S_ISREG(sb.st_mode))
        return ck_fail(err, CKEY_ERR_UNSUPPORTED,
                       "%s: not a regular file: its header cannot be read without consuming it", path);
    probe_file p = {fopen(path, "rbe"), NULL, path, (int64_t)sb.st_size};
    if (!p.f) return ck_fail(err, CKEY_ERR_IO, "%s: %s", path, strerror(errno));
    const ckey_status st = probe(&p, width, height, err);
    fclose(p.f);
    return st;
}

ckey_status ck_image_probe_memory(const void *data, size_t size, const char *label, int32_t *width,
                                  int32_t *height, ckey_error *err) {
    if (width) *width = 0;
    if (height) *height = 0;
    if (!label) label = "(memory)";
    if ((!data && size) || !width || !height || size > INT64_MAX)
        return ck_fail(err, CKEY_ERR_INVALID_ARG, "%s: invalid arguments to the image probe", label);
    const probe_file p = {NULL, data, label, (int64_t)size};
    return probe(&p, width, height, err);
}
