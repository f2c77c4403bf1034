/*
 * JPEG and TIFF reading and format sniffing (src/media/image.c): files
 * written here with libjpeg / libtiff are read back through ckey_image_read;
 * truncated, oversized, CMYK and unknown files are refused with a message
 * naming the file. Every format read from a stream (a FIFO, a pipe as
 * /dev/stdin, an open FILE): read once, and a FIFO with no writer fails
 * after the timeout instead of blocking.
 */
#include <dirent.h>
#include <fcntl.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "ckey_media.h"
#include "media/image.h"
#include "support/clip.h"
#include "support/testutil.h"

#ifdef CK_HAVE_JPEG
#include <jpeglib.h>
#endif
#ifdef CK_HAVE_TIFF
#include <tiffio.h>
#endif

static char tmpdir[256];

static const char *make_tmpdir(void) {
    return ck_make_temp_dir(tmpdir, sizeof tmpdir, "image-formats") ? tmpdir : NULL;
}


#ifdef CK_HAVE_TIFF
static unsigned char pat8(unsigned x, unsigned y, unsigned c) {
    return (unsigned char)((x * 37 + y * 11 + c * 71) & 255);
}
#endif

/* ------------------------------------------------------------- sniffing */

static void test_sniff(void) {
    static const unsigned char png[8] = {137, 80, 78, 71, 13, 10, 26, 10};
    static const unsigned char jpg[3] = {0xFF, 0xD8, 0xFF};
    static const unsigned char ii[4] = {'I', 'I', 42, 0}, mm[4] = {'M', 'M', 0, 42};
    CHECK(ck_image_sniff(png, 8) == CK_IMAGE_PNG);
    CHECK(ck_image_sniff(png, 7) == CK_IMAGE_UNKNOWN);
    CHECK(ck_image_sniff(jpg, 3) == CK_IMAGE_JPEG);
    CHECK(ck_image_sniff(jpg, 2) == CK_IMAGE_UNKNOWN);
    CHECK(ck_image_sniff(ii, 4) == CK_IMAGE_TIFF);
    CHECK(ck_image_sniff(mm, 4) == CK_IMAGE_TIFF);
    CHECK(ck_image_sniff("BM\0\0\0\0", 6) == CK_IMAGE_UNKNOWN);
    CHECK(ck_image_sniff("", 0) == CK_IMAGE_UNKNOWN);
}

static void test_unknown_and_empty(void) {
    const char *dir = make_tmpdir();
    REQUIRE(dir);
    char path[512];
    snprintf(path, sizeof path, "%s/plate.bmp", dir);
    REQUIRE(ck_write_file(path, "BM6\0\0\0\0\0\0\0", 10));
    ck_expect_read_fails(path, CKEY_IMAGE_RGB, CKEY_ERR_UNSUPPORTED, "unknown image format");
    snprintf(path, sizeof path, "%s/empty.png", dir);
    REQUIRE(ck_write_file(path, "", 0));
    ck_expect_read_fails(path, CKEY_IMAGE_RGB, CKEY_ERR_FORMAT, "empty");
    snprintf(path, sizeof path, "%s/missing.png", dir);
    ck_expect_read_fails(path, CKEY_IMAGE_RGB, CKEY_ERR_IO, "cannot open");
    /* memory readers refuse the other formats */
    ckey_image img;
    ckey_error err;
    const ckey_status want_jpeg = ck_image_read_jpeg_memory("II*\0xxxx", 8, "m", CKEY_IMAGE_RGB,
                                                            &img, &err);
    CHECK(want_jpeg == CKEY_ERR_FORMAT || want_jpeg == CKEY_ERR_UNSUPPORTED);
    CHECK(img.data == NULL);
    CHECK(ck_image_read_memory("hello", 5, "m", CKEY_IMAGE_RGB, &img, &err) == CKEY_ERR_UNSUPPORTED);
    CHECK(img.data == NULL);
    ck_remove_tree(dir);
}

/* A PNG under a .jpg name is still read as a PNG. */
static void test_dispatch_png(void) {
    const char *dir = make_tmpdir();
    REQUIRE(dir);
    char path[512];
    snprintf(path, sizeof path, "%s/really-a-png.jpg", dir);
    float px[2 * 3 * 3];
    for (int i = 0; i < 18; i++) px[i] = (float)(i * 13 % 256) / 255.0f;
    ckey_error err;
    ckey_status st = ckey_image_write_png(path, px, 3, 3, 2, 8, &err);
    if (st == CKEY_ERR_UNSUPPORTED) {
        ck_remove_tree(dir);
        SKIP("built without libpng");
    }
    REQUIRE(st == CKEY_OK);
    ckey_image img;
    REQUIRE(ckey_image_read(path, CKEY_IMAGE_RGB, &img, &err) == CKEY_OK);
    CHECK(img.width == 3 && img.height == 2 && img.channels == 3);
    CHECK(ck_compare("png via ckey_image_read", img.data, px, 18, NULL) == 0.0);
    ckey_image_free(&img);
    ck_remove_tree(dir);
}

/* ================================================================ JPEG */

#ifdef CK_HAVE_JPEG

/* interleaved 8-bit samples; comps 1 (gray), 3 (RGB) or 4 (CMYK) */
static int write_jpeg(const char *path, const unsigned char *px, int w, int h, int comps,
                      int quality) {
    FILE *f = fopen(path, "wb");
    if (!f) return 0;
    struct jpeg_compress_struct c;
    struct jpeg_error_mgr jerr;
    c.err = jpeg_std_error(&jerr);
    jpeg_create_compress(&c);
    jpeg_stdio_dest(&c, f);
    c.image_width = (JDIMENSION)w;
    c.image_height = (JDIMENSION)h;
    c.input_components = comps;
    c.in_color_space = comps == 1 ? JCS_GRAYSCALE : comps == 3 ? JCS_RGB : JCS_CMYK;
    jpeg_set_defaults(&c);
    jpeg_set_quality(&c, quality, TRUE);
    if (comps == 3) { /* no chroma subsampling: tighter round trip */
        c.comp_info[0].h_samp_factor = c.comp_info[0].v_samp_factor = 1;
    }
    jpeg_start_compress(&c, TRUE);
    while (c.next_scanline < c.image_height) {
        JSAMPROW row = (JSAMPROW)(px + (size_t)c.next_scanline * (size_t)w * (size_t)comps);
        jpeg_write_scanlines(&c, &row, 1);
    }
    jpeg_finish_compress(&c);
    jpeg_destroy_compress(&c);
    return fclose(f) == 0;
}

/* smooth content, so that JPEG's loss stays small */
static unsigned char smooth(int x, int y, int c) {
    return (unsigned char)(20 + x * 3 + y * 2 + c * 30); /* <= 243 */
}

static void test_jpeg_rgb(void) {
    const int w = 40, h = 24;
    const size_t plane = (size_t)w * h;
    unsigned char *px = malloc(plane * 3);
    float *want = malloc(plane * 3 * sizeof(float));
    REQUIRE(px && want);
    for (int y = 0; y < h; y++)
        for (int x = 0; x < w; x++)
            for (int c = 0; c < 3; c++) {
                px[((size_t)y * w + x) * 3 + c] = smooth(x, y, c);
                want[(size_t)c * plane + (size_t)y * w + x] = smooth(x, y, c) / 255.0f;
            }
    const char *dir = make_tmpdir();
    REQUIRE(dir);
    char path[512];
    snprintf(path, sizeof path, "%s/plate.jpg", dir);
    REQUIRE(write_jpeg(path, px, w, h, 3, 95));
    ckey_image img;
    ckey_error err;
    REQUIRE(ckey_image_read(path, CKEY_IMAGE_RGB, &img, &err) == CKEY_OK);
    CHECK(img.width == w && img.height == h && img.channels == 3 && img.bit_depth == 8 &&
          !img.has_alpha);
    CHECK(ck_compare("jpeg rgb", img.data, want, plane * 3, NULL) < 0.04);
    ckey_image_free(&img);
    /* hint: the blue channel */
    REQUIRE(ckey_image_read(path, CKEY_IMAGE_HINT, &img, &err) == CKEY_OK);
    CHECK(img.channels == 1);
    CHECK(ck_compare("jpeg hint (blue)", img.data, want + 2 * plane, plane, NULL) < 0.04);
    ckey_image_free(&img);
    /* truncated: half the file, and just past the header */
    size_t n = 0;
    unsigned char *bytes = ck_read_file(path, &n);
    REQUIRE(bytes && n > 400);
    snprintf(path, sizeof path, "%s/cut.jpg", dir);
    REQUIRE(ck_write_file(path, bytes, n / 2));
    ck_expect_read_fails(path, CKEY_IMAGE_RGB, CKEY_ERR_FORMAT, "truncated");
    REQUIRE(ck_write_file(path, bytes, n - 2)); /* only the EOI marker missing */
    ck_expect_read_fails(path, CKEY_IMAGE_HINT, CKEY_ERR_FORMAT, "truncated");
    REQUIRE(ck_write_file(path, bytes, 3));
    ck_expect_read_fails(path, CKEY_IMAGE_RGB, CKEY_ERR_FORMAT, NULL);
    /* huge dimensions in SOF: refused from the header */
    unsigned char *sof = NULL;
    for (size_t i = 2; i + 9 < n; i++)
        if (bytes[i] == 0xFF && (bytes[i + 1] == 0xC0 || bytes[i + 1] == 0xC2)) {
            sof = bytes + i;
            break;
        }
    REQUIRE(sof);
    sof[5] = 0xEA, sof[6] = 0x60; /* height 60000 */
    sof[7] = 0x00, sof[8] = 0x10; /* width 16 */
    snprintf(path, sizeof path, "%s/tall.jpg", dir);
    REQUIRE(ck_write_file(path, bytes, n));
    ck_expect_read_fails(path, CKEY_IMAGE_RGB, CKEY_ERR_UNSUPPORTED, "side limit");
    sof[5] = 0x4E, sof[6] = 0x20; /* 20000 x 20000: under the side cap, over the pixel cap */
    sof[7] = 0x4E, sof[8] = 0x20;
    REQUIRE(ck_write_file(path, bytes, n));
    ck_expect_read_fails(path, CKEY_IMAGE_RGB, CKEY_ERR_UNSUPPORTED, "pixels");
    sof[5] = 0x3E, sof[6] = 0x80; /* 16000 x 16000 from a few hundred bytes */
    sof[7] = 0x3E, sof[8] = 0x80;
    REQUIRE(ck_write_file(path, bytes, n));
    ck_expect_read_fails(path, CKEY_IMAGE_RGB, CKEY_ERR_FORMAT, "truncated");
    /* garbage after the SOI */
    memset(bytes + 20, 0x5A, n - 20);
    snprintf(path, sizeof path, "%s/garbage.jpg", dir);
    REQUIRE(ck_write_file(path, bytes, n));
    ck_expect_read_fails(path, CKEY_IMAGE_RGB, CKEY_ERR_FORMAT, NULL);
    free(bytes);
    free(px);
    free(want);
    ck_remove_tree(dir);
}

static void test_jpeg_gray_and_cmyk(void) {
    const int w = 16, h = 16;
    unsigned char px[16 * 16 * 4];
    for (int i = 0; i < w * h; i++) px[i] = (unsigned char)(60 + (i % 16) * 5 + (i / 16) * 3);
    const char *dir = make_tmpdir();
    REQUIRE(dir);
    char path[512];
    snprintf(path, sizeof path, "%s/hint.tif", dir); /* the name does not matter */
    REQUIRE(write_jpeg(path, px, w, h, 1, 100));
    ckey_image img;
    ckey_error err;
    REQUIRE(ckey_image_read(path, CKEY_IMAGE_HINT, &img, &err) == CKEY_OK);
    float want[16 * 16];
    for (int i = 0; i < w * h; i++) want[i] = px[i] / 255.0f;
    CHECK(img.channels == 1 && img.width == w);
    CHECK(ck_compare("jpeg gray", img.data, want, (size_t)w * h, NULL) < 0.02);
    ckey_image_free(&img);
    REQUIRE(ckey_image_read(path, CKEY_IMAGE_RGB, &img, &err) == CKEY_OK);
    CHECK(img.channels == 3);
    CHECK(ck_compare("jpeg gray as rgb (G)", img.data + w * h, want, (size_t)w * h, NULL) < 0.02);
    ckey_image_free(&img);
    for (int i = 0; i < w * h * 4; i++) px[i] = (unsigned char)(i * 7);
    snprintf(path, sizeof path, "%s/cmyk.jpg", dir);
    REQUIRE(write_jpeg(path, px, w, h, 4, 90));
    ck_expect_read_fails(path, CKEY_IMAGE_RGB, CKEY_ERR_UNSUPPORTED, "CMYK");
    ck_remove_tree(dir);
}

#else
static void test_jpeg_rgb(void) { SKIP("built without libjpeg"); }
static void test_jpeg_gray_and_cmyk(void) { SKIP("built without libjpeg"); }
#endif

/* ================================================================ TIFF */

#ifdef CK_HAVE_TIFF

typedef struct tspec {
    int w, h, spp, bps, sfmt; /* sfmt: SAMPLEFORMAT_UINT or _IEEEFP */
    int tiled;                /* tiles of 16 x 16 */
    int compression;
    int planar;
} tspec;

/* `px` interleaved samples of the sample type; `mode` TIFFOpen's ("w",
 * "wb" big-endian, "w8" BigTIFF, ...). */
static int write_tiff_mode(const char *path, const char *mode, const tspec *s, const void *px) {
    TIFF *t = TIFFOpen(path, mode);
    if (!t) return 0;
    const size_t bpp = (size_t)s->spp * (size_t)(s->bps / 8);
    TIFFSetField(t, TIFFTAG_IMAGEWIDTH, (uint32_t)s->w);
    TIFFSetField(t, TIFFTAG_IMAGELENGTH, (uint32_t)s->h);
    TIFFSetField(t, TIFFTAG_SAMPLESPERPIXEL, (uint16_t)s->spp);
    TIFFSetField(t, TIFFTAG_BITSPERSAMPLE, (uint16_t)s->bps);
    TIFFSetField(t, TIFFTAG_SAMPLEFORMAT, (uint16_t)s->sfmt);
    TIFFSetField(t, TIFFTAG_PHOTOMETRIC, s->spp >= 3 ? PHOTOMETRIC_RGB : PHOTOMETRIC_MINISBLACK);
    TIFFSetField(t, TIFFTAG_PLANARCONFIG, s->planar ? s->planar : PLANARCONFIG_CONTIG);
    TIFFSetField(t, TIFFTAG_COMPRESSION, s->compression ? s->compression : COMPRESSION_NONE);
    if (s->spp == 2 || s->spp == 4) {
        uint16_t extra = EXTRASAMPLE_UNASSALPHA;
        TIFFSetField(t, TIFFTAG_EXTRASAMPLES, 1, &extra);
    }
    int ok = 1;
    if (s->planar == PLANARCONFIG_SEPARATE) {
        /* plane-major rows, contents irrelevant */
        TIFFSetField(t, TIFFTAG_ROWSPERSTRIP, (uint32_t)s->h);
        unsigned char *row = calloc((size_t)s->w, (size_t)(s->bps / 8));
        for (int c = 0; c < s->spp && ok; c++)
            for (int y = 0; y < s->h && ok; y++) ok = TIFFWriteScanline(t, row, (uint32_t)y, (uint16_t)c) >= 0;
        free(row);
    } else if (s->tiled) {
        TIFFSetField(t, TIFFTAG_TILEWIDTH, 16u);
        TIFFSetField(t, TIFFTAG_TILELENGTH, 16u);
        unsigned char *tile = calloc(16 * 16, bpp);
        for (int ty = 0; ty < s->h && ok; ty += 16)
            for (int tx = 0; tx < s->w && ok; tx += 16) {
                memset(tile, 0, 16 * 16 * bpp);
                for (int y = ty; y < ty + 16 && y < s->h; y++)
                    for (int x = tx; x < tx + 16 && x < s->w; x++)
                        memcpy(tile + ((size_t)(y - ty) * 16 + (size_t)(x - tx)) * bpp,
                               (const unsigned char *)px + ((size_t)y * s->w + x) * bpp, bpp);
                ok = TIFFWriteTile(t, tile, (uint32_t)tx, (uint32_t)ty, 0, 0) >= 0;
            }
        free(tile);
    } else {
        TIFFSetField(t, TIFFTAG_ROWSPERSTRIP, 4u);
        for (int y = 0; y < s->h && ok; y++)
            ok = TIFFWriteScanline(t, (unsigned char *)px + (size_t)y * s->w * bpp, (uint32_t)y,
                                   0) >= 0;
    }
    TIFFClose(t);
    return ok;
}

static int write_tiff(const char *path, const tspec *s, const void *px) {
    return write_tiff_mode(path, "w", s, px);
}

/* Write, read as `kind`, compare exactly with want ([C,H,W]). */
static void tiff_roundtrip(const char *name, const tspec *s, const void *px,
                           ckey_image_kind kind, const float *want) {
    const char *dir = make_tmpdir();
    REQUIRE(dir);
    char path[512];
    snprintf(path, sizeof path, "%s/%s.tif", dir, name);
    REQUIRE(write_tiff(path, s, px));
    ckey_image img;
    ckey_error err;
    ckey_status st = ckey_image_read(path, kind, &img, &err);
    CHECKF(st == CKEY_OK, "%s", err.message);
    if (st == CKEY_OK) {
        const int out_ch = kind == CKEY_IMAGE_RGB ? 3 : 1;
        CHECK(img.width == s->w && img.height == s->h && img.channels == out_ch);
        CHECK(img.bit_depth == s->bps && img.has_alpha == (s->spp == 2 || s->spp == 4));
        CHECK(ck_compare(name, img.data, want, (size_t)out_ch * s->w * s->h, NULL) == 0.0);
    }
    ckey_image_free(&img);
    ck_remove_tree(dir);
}

static void test_tiff_rgb8(void) {
    for (int tiled = 0; tiled <= 1; tiled++) {
        for (int comp = 0; comp <= 1; comp++) {
            tspec s = {37, 21, 3, 8, SAMPLEFORMAT_UINT, tiled,
                       comp ? COMPRESSION_LZW : COMPRESSION_NONE, 0};
            const size_t plane = (size_t)s.w * s.h;
            unsigned char *px = malloc(plane * 3);
            float *want = malloc(plane * 3 * sizeof(float)), *blue = malloc(plane * sizeof(float));
            REQUIRE(px && want && blue);
            for (int y = 0; y < s.h; y++)
                for (int x = 0; x < s.w; x++)
                    for (int c = 0; c < 3; c++) {
                        const unsigned char v = pat8((unsigned)x, (unsigned)y, (unsigned)c);
                        px[((size_t)y * s.w + x) * 3 + c] = v;
                        want[(size_t)c * plane + (size_t)y * s.w + x] = v / 255.0f;
                    }
            memcpy(blue, want + 2 * plane, plane * sizeof(float));
            tiff_roundtrip(tiled ? "rgb8-tiled" : comp ? "rgb8-lzw" : "rgb8", &s, px,
                           CKEY_IMAGE_RGB, want);
            tiff_roundtrip("rgb8-hint", &s, px, CKEY_IMAGE_HINT, blue);
            free(px);
            free(want);
            free(blue);
        }
    }
}

static void test_tiff_gray16(void) {
    tspec s = {19, 23, 1, 16, SAMPLEFORMAT_UINT, 0, COMPRESSION_ADOBE_DEFLATE, 0};
    const size_t plane = (size_t)s.w * s.h;
    uint16_t *px = malloc(plane * 2);
    float *want = malloc(plane * 3 * sizeof(float));
    REQUIRE(px && want);
    for (size_t i = 0; i < plane; i++) {
        px[i] = (uint16_t)((i * 2654435761u) >> 16);
        want[i] = want[i + plane] = want[i + 2 * plane] = px[i] / 65535.0f;
    }
    tiff_roundtrip("gray16-hint", &s, px, CKEY_IMAGE_HINT, want);
    tiff_roundtrip("gray16-rgb", &s, px, CKEY_IMAGE_RGB, want);
    free(px);
    free(want);
}

static void test_tiff_float_rgb(void) {
    tspec s = {17, 9, 3, 32, SAMPLEFORMAT_IEEEFP, 0, 0, 0};
    const size_t plane = (size_t)s.w * s.h;
    float *px = malloc(plane * 3 * sizeof(float)), *want = malloc(plane * 3 * sizeof(float));
    REQUIRE(px && want);
    for (size_t i = 0; i < plane; i++)
        for (int c = 0; c < 3; c++) {
            const float v = (float)(i % 13) * 0.25f - 0.5f + (float)c; /* -0.5 .. 5.5 */
            px[i * 3 + (size_t)c] = v;
            want[(size_t)c * plane + i] = v;
        }
    tiff_roundtrip("float-rgb", &s, px, CKEY_IMAGE_RGB, want);
    s.tiled = 1;
    s.compression = COMPRESSION_ADOBE_DEFLATE;
    tiff_roundtrip("float-rgb-tiled", &s, px, CKEY_IMAGE_RGB, want);
    /* a NaN plate is refused, naming the pixel */
    px[(size_t)(4 * s.w + 5) * 3 + 1] = NAN;
    const char *dir = make_tmpdir();
    REQUIRE(dir);
    char path[512];
    snprintf(path, sizeof path, "%s/nan.tif", dir);
    REQUIRE(write_tiff(path, &s, px));
    ckey_image img;
    ckey_error err;
    CHECK(ckey_image_read(path, CKEY_IMAGE_RGB, &img, &err) == CKEY_ERR_FORMAT);
    CHECKF(strstr(err.message, "non-finite") && strstr(err.message, "x 5, y 4, channel 1"), "%s", err.message);
    printf("  %s\n", err.message);
    ck_remove_tree(dir);
    free(px);
    free(want);
}

static void test_tiff_rgba_hint(void) {
    tspec s = {11, 7, 4, 8, SAMPLEFORMAT_UINT, 0, 0, 0};
    const size_t plane = (size_t)s.w * s.h;
    unsigned char px[11 * 7 * 4];
    float alpha[11 * 7], blue[11 * 7], rgb[11 * 7 * 3];
    for (size_t i = 0; i < plane; i++) {
        for (int c = 0; c < 4; c++) px[i * 4 + (size_t)c] = (unsigned char)(i * 5 + (size_t)c * 50);
        alpha[i] = px[i * 4 + 3] / 255.0f;
        for (int c = 0; c < 3; c++) rgb[(size_t)c * plane + i] = px[i * 4 + (size_t)c] / 255.0f;
    }
    tiff_roundtrip("rgba-hint", &s, px, CKEY_IMAGE_HINT, alpha);
    tiff_roundtrip("rgba-rgb", &s, px, CKEY_IMAGE_RGB, rgb);
    /* opaque alpha: the hint is the blue channel */
    for (size_t i = 0; i < plane; i++) {
        px[i * 4 + 3] = 255;
        blue[i] = px[i * 4 + 2] / 255.0f;
    }
    tiff_roundtrip("rgba-opaque-hint", &s, px, CKEY_IMAGE_HINT, blue);
}

static void test_tiff_refused(void) {
    const char *dir = make_tmpdir();
    REQUIRE(dir);
    char path[512];
    /* separate planes */
    tspec s = {8, 8, 3, 8, SAMPLEFORMAT_UINT, 0, 0, PLANARCONFIG_SEPARATE};
    snprintf(path, sizeof path, "%s/planar.tif", dir);
    REQUIRE(write_tiff(path, &s, NULL));
    ck_expect_read_fails(path, CKEY_IMAGE_RGB, CKEY_ERR_UNSUPPORTED, "separate");
    /* signed 16-bit */
    int16_t spx[8 * 8] = {0};
    tspec si = {8, 8, 1, 16, SAMPLEFORMAT_INT, 0, 0, 0};
    snprintf(path, sizeof path, "%s/signed.tif", dir);
    REQUIRE(write_tiff(path, &si, spx));
    ck_expect_read_fails(path, CKEY_IMAGE_HINT, CKEY_ERR_UNSUPPORTED, "sample format");

    /* truncated: a cut file (pixels and the directory after them) */
    unsigned char px[32 * 32 * 3];
    for (size_t i = 0; i < sizeof px; i++) px[i] = (unsigned char)i;
    tspec sr = {32, 32, 3, 8, SAMPLEFORMAT_UINT, 0, 0, 0};
    snprintf(path, sizeof path, "%s/full.tif", dir);
    REQUIRE(write_tiff(path, &sr, px));
    size_t n = 0;
    unsigned char *bytes = ck_read_file(path, &n);
    REQUIRE(bytes && n > sizeof px);
    snprintf(path, sizeof path, "%s/cut.tif", dir);
    REQUIRE(ck_write_file(path, bytes, n / 2));
    ck_expect_read_fails(path, CKEY_IMAGE_RGB, CKEY_ERR_FORMAT, NULL);
    REQUIRE(ck_write_file(path, bytes, 6));
    ck_expect_read_fails(path, CKEY_IMAGE_RGB, CKEY_ERR_FORMAT, NULL);

    /* The IFD (libtiff writes it after the pixels): patch dimensions / strip
     * counts in place. Entries: tag u16, type u16, count u32, value u32. */
    uint32_t ifd;
    memcpy(&ifd, bytes + 4, 4); /* little-endian host and file ("II") */
    REQUIRE(bytes[0] == 'I' && ifd + 2 < n);
    uint16_t count;
    memcpy(&count, bytes + ifd, 2);
    unsigned char *e_w = NULL, *e_h = NULL, *e_bc = NULL;
    for (uint16_t i = 0; i < count; i++) {
        unsigned char *e = bytes + ifd + 2 + 12 * (size_t)i;
        uint16_t tag;
        memcpy(&tag, e, 2);
        if (tag == TIFFTAG_IMAGEWIDTH) e_w = e;
        if (tag == TIFFTAG_IMAGELENGTH) e_h = e;
        if (tag == TIFFTAG_STRIPBYTECOUNTS) e_bc = e;
    }
    REQUIRE(e_w && e_h && e_bc);
    const uint16_t type_long = TIFF_LONG;
    memcpy(e_w + 2, &type_long, 2);
    memcpy(e_h + 2, &type_long, 2);
    uint32_t v = 100000, one = 1;
    memcpy(e_w + 8, &v, 4);
    memcpy(e_h + 8, &one, 4);
    snprintf(path, sizeof path, "%s/wide.tif", dir);
    REQUIRE(ck_write_file(path, bytes, n));
    ck_expect_read_fails(path, CKEY_IMAGE_RGB, CKEY_ERR_UNSUPPORTED, "side limit");
    v = 20000;
    memcpy(e_w + 8, &v, 4);
    memcpy(e_h + 8, &v, 4);
    REQUIRE(ck_write_file(path, bytes, n));
    ck_expect_read_fails(path, CKEY_IMAGE_RGB, CKEY_ERR_UNSUPPORTED, "pixels");
    /* 8000 x 8000 under the caps, but the strips hold 32 x 32 pixels */
    v = 8000;
    memcpy(e_w + 8, &v, 4);
    memcpy(e_h + 8, &v, 4);
    snprintf(path, sizeof path, "%s/big-header.tif", dir);
    REQUIRE(ck_write_file(path, bytes, n));
    ck_expect_read_fails(path, CKEY_IMAGE_RGB, CKEY_ERR_FORMAT, NULL);
    free(bytes);
    ck_remove_tree(dir);
}

#else
static void test_tiff_rgb8(void) { SKIP("built without libtiff"); }
static void test_tiff_gray16(void) { SKIP("built without libtiff"); }
static void test_tiff_float_rgb(void) { SKIP("built without libtiff"); }
static void test_tiff_rgba_hint(void) { SKIP("built without libtiff"); }
static void test_tiff_refused(void) { SKIP("built without libtiff"); }
#endif

/* -------------------------------------------------------------- streams */

static int same_pixels(const ckey_image *a, const ckey_image *b) {
    if (a->width != b->width || a->height != b->height || a->channels != b->channels) return 0;
    return memcmp(a->data, b->data, (size_t)a->width * a->height * a->channels * sizeof(float)) == 0;
}

enum { VIA_FIFO, VIA_DEV_STDIN, VIA_FILE, VIA_FIFO_PNG };
static const char *const via_names[] = {"a FIFO", "a pipe as /dev/stdin", "stdin as a FILE",
                                        "a FIFO (ckey_image_read_png)"};

/* `file`'s bytes through a FIFO or a pipe, written by one child process and
 * read by another (an alarm ends a read that blocks), compared with `want`. */
static void stream_case(const char *file, ckey_image_kind kind, const ckey_image *want, int via) {
    size_t n = 0;
    unsigned char *bytes = ck_read_file(file, &n);
    REQUIRE(bytes);
    char fifo[300];
    snprintf(fifo, sizeof fifo, "%s/fifo", tmpdir);
    unlink(fifo);
    int fds[2] = {-1, -1};
    const int use_fifo = via == VIA_FIFO || via == VIA_FIFO_PNG;
    if (use_fifo) REQUIRE(mkfifo(fifo, 0600) == 0);
    else REQUIRE(pipe(fds) == 0);
    fflush(stdout);
    const pid_t writer = fork();
    REQUIRE(writer >= 0);
    if (writer == 0) {
        if (!use_fifo) close(fds[0]);
        const int fd = use_fifo ? open(fifo, O_WRONLY) : fds[1];
        for (size_t off = 0; fd >= 0 && off < n;) {
            const ssize_t k = write(fd, bytes + off, n - off);
            if (k <= 0) _exit(1);
            off += (size_t)k;
        }
        _exit(fd >= 0 ? 0 : 1);
    }
    const pid_t reader = fork();
    REQUIRE(reader >= 0);
    if (reader == 0) {
        alarm(20);
        if (!use_fifo) {
            dup2(fds[0], 0);
            close(fds[0]);
            close(fds[1]);
        }
        ckey_image img;
        ckey_error err;
        memset(&err, 0, sizeof err);
        const ckey_status st = via == VIA_FIFO       ? ckey_image_read(fifo, kind, &img, &err)
                               : via == VIA_FIFO_PNG ? ckey_image_read_png(fifo, kind, &img, &err)
                               : via == VIA_FILE     ? ckey_image_read_file(stdin, "stdin", kind, &img, &err)
                                                     : ckey_image_read("/dev/stdin", kind, &img, &err);
        if (st != CKEY_OK) printf("    %s\n", err.message);
        fflush(stdout);
        _exit(st != CKEY_OK ? 1 : same_pixels(&img, want) ? 0 : 2);
    }
    if (!use_fifo) close(fds[0]), close(fds[1]);
    int status = 0;
    waitpid(reader, &status, 0);
    kill(writer, SIGKILL);
    waitpid(writer, NULL, 0);
    unlink(fifo);
    free(bytes);
    const int code = WIFEXITED(status) ? WEXITSTATUS(status) : -1;
    printf("  %s through %s: %s\n", file, via_names[via],
           code == 0 ? "same pixels" : code == 1 ? "failed" : code == 2 ? "other pixels" : "blocked (killed)");
    CHECKF(code == 0, "%s through %s", file, via_names[via]);
}

static void test_streams(void) {
    static const struct {
        const char *file;
        ckey_image_kind kind;
    } samples[] = {
        {"examples/plate.png", CKEY_IMAGE_RGB}, /* larger than a pipe's buffer */
        {"fuzz/corpus/png/seed-rgba16.png", CKEY_IMAGE_HINT},
        {"fuzz/corpus/jpeg/seed-rgb420.jpg", CKEY_IMAGE_RGB},
        {"fuzz/corpus/tiff/seed-rgb8-deflate.tif", CKEY_IMAGE_RGB},
        {"fuzz/corpus/exr/seed-4ch-zip.exr", CKEY_IMAGE_HINT},
    };
    REQUIRE(make_tmpdir());
    int formats = 0;
    for (size_t i = 0; i < sizeof samples / sizeof samples[0]; i++) {
        ckey_image want;
        ckey_error err;
        const ckey_status st = ckey_image_read(samples[i].file, samples[i].kind, &want, &err);
        if (st == CKEY_ERR_UNSUPPORTED) {
            printf("  %s: not in this build (%s)\n", samples[i].file, err.message);
            continue;
        }
        CHECKF(st == CKEY_OK, "%s", err.message);
        if (st != CKEY_OK) continue;
        formats++;
        for (int via = VIA_FIFO; via <= VIA_FILE; via++) stream_case(samples[i].file, samples[i].kind, &want, via);
        if (i == 0) stream_case(samples[i].file, samples[i].kind, &want, VIA_FIFO_PNG);
        ckey_image_free(&want);
    }
    CHECK(formats >= 1);
    ck_remove_tree(tmpdir);
}

/* A FIFO that no process opens for writing: the read gives up after the
 * timeout with a message naming the file, instead of blocking forever. */
static void test_fifo_without_writer(void) {
    REQUIRE(make_tmpdir());
    char fifo[300];
    snprintf(fifo, sizeof fifo, "%s/lonely.fifo", tmpdir);
    REQUIRE(mkfifo(fifo, 0600) == 0);
    fflush(stdout);
    const pid_t reader = fork();
    REQUIRE(reader >= 0);
    if (reader == 0) {
        alarm(20);
        struct timespec t0, t1;
        clock_gettime(CLOCK_MONOTONIC, &t0);
        ckey_image img;
        ckey_error err;
        memset(&err, 0, sizeof err);
        const ckey_status st = ck_image_read_path(fifo, CKEY_IMAGE_RGB, 300, &img, &err);
        clock_gettime(CLOCK_MONOTONIC, &t1);
        const double s = (double)(t1.tv_sec - t0.tv_sec) + 1e-9 * (double)(t1.tv_nsec - t0.tv_nsec);
        printf("  after %.2f s: status %d, %s\n", s, (int)st, err.message);
        fflush(stdout);
        _exit(st == CKEY_ERR_IO && strstr(err.message, fifo) && strstr(err.message, "no writer") && s >= 0.25 &&
                      s < 10
                  ? 0
                  : 1);
    }
    int status = 0;
    waitpid(reader, &status, 0);
    CHECKF(WIFEXITED(status) && WEXITSTATUS(status) == 0, "%s",
           WIFEXITED(status) ? "wrong status or message" : "blocked (killed)");
    ck_remove_tree(tmpdir);
}

/* ------------------------------------------------------------ probing */

/* The probe agrees with the reader on `path` when the reader takes it, and
 * fails naming the file otherwise (or, for a file broken past its header,
 * still gives the header's size). Returns 1 when both read it. */
static int probe_agrees(const char *path) {
    ckey_image img;
    ckey_error err, perr;
    memset(&err, 0, sizeof err);
    memset(&perr, 0, sizeof perr);
    const ckey_status st = ckey_image_read(path, CKEY_IMAGE_RGB, &img, &err);
    int32_t w = -1, h = -1;
    const ckey_status pst = ckey_image_probe(path, &w, &h, &perr);
    if (pst != CKEY_OK) {
        CHECKF(strstr(perr.message, path) != NULL, "%s: probe message '%s' lacks the path", path, perr.message);
        CHECK(w == 0 && h == 0);
    }
    if (st == CKEY_OK) {
        CHECKF(pst == CKEY_OK && w == img.width && h == img.height, "%s: read %d x %d, probed %d x %d (%s)", path,
               (int)img.width, (int)img.height, (int)w, (int)h, perr.message);
    } else {
        printf("  %s: not read (%s); probe: %s\n", path, err.message, pst == CKEY_OK ? "a size" : perr.message);
    }
    ckey_image_free(&img);
    return st == CKEY_OK && pst == CKEY_OK;
}

/*
 * ckey_image_probe gives the size the readers decode, from the header only:
 * every image of the fuzz corpora (PNG, JPEG, TIFF, OpenEXR; the broken ones
 * must not crash it, under the sanitizers too), TIFFs of both byte orders
 * and BigTIFF; a size over the caps is refused as the readers refuse it, and
 * a FIFO is not probed (reading its header would consume it).
 */
static void test_probe(void) {
    static const char *const dirs[] = {"fuzz/corpus/png", "fuzz/corpus/jpeg", "fuzz/corpus/tiff",
                                       "fuzz/corpus/exr", "examples"};
    int agreed = 0;
    for (size_t d = 0; d < sizeof dirs / sizeof dirs[0]; d++) {
        DIR *dir = opendir(dirs[d]);
        CHECKF(dir != NULL, "cannot list %s (the tests run from the repository root)", dirs[d]);
        if (!dir) continue;
        for (struct dirent *e; (e = readdir(dir));) {
            if (e->d_name[0] == '.') continue;
            char path[600];
            snprintf(path, sizeof path, "%s/%s", dirs[d], e->d_name);
            struct stat st;
            if (stat(path, &st) != 0 || !S_ISREG(st.st_mode)) continue;
            agreed += probe_agrees(path);
        }
        closedir(dir);
    }
    printf("  %d files read and probed to the same size\n", agreed);
    CHECK(agreed >= 5);

    REQUIRE(make_tmpdir());
    char path[512];
    ckey_error err;
    int32_t w, h;
#ifdef CK_HAVE_TIFF
    static const char *const modes[] = {"w", "wb", "w8", "w8b"};
    const tspec s = {13, 7, 3, 8, SAMPLEFORMAT_UINT, 0, COMPRESSION_NONE, 0};
    unsigned char px[13 * 7 * 3] = {0};
    for (size_t k = 0; k < sizeof modes / sizeof modes[0]; k++) {
        snprintf(path, sizeof path, "%s/order-%s.tif", tmpdir, modes[k]);
        REQUIRE(write_tiff_mode(path, modes[k], &s, px));
        CHECKF(probe_agrees(path), "TIFFOpen mode %s", modes[k]);
    }
#endif
    snprintf(path, sizeof path, "%s/missing.png", tmpdir);
    CHECK(ckey_image_probe(path, &w, &h, &err) == CKEY_ERR_IO && strstr(err.message, path));
    snprintf(path, sizeof path, "%s/plate.fifo", tmpdir);
    REQUIRE(mkfifo(path, 0600) == 0);
    CHECK(ckey_image_probe(path, &w, &h, &err) == CKEY_ERR_UNSUPPORTED && strstr(err.message, "not a regular file"));
    CHECK(ckey_image_probe("fuzz/corpus/png/bad-huge_header.png", &w, &h, &err) == CKEY_ERR_UNSUPPORTED &&
          strstr(err.message, "exceeds"));
    CHECK(ckey_image_probe(NULL, &w, &h, &err) == CKEY_ERR_INVALID_ARG);
    ck_remove_tree(tmpdir);
}

int main(int argc, char **argv) {
    static const ck_test_case cases[] = {
        {"sniff", test_sniff},
        {"unknown_and_empty", test_unknown_and_empty},
        {"dispatch_png", test_dispatch_png},
        {"jpeg_rgb", test_jpeg_rgb},
        {"jpeg_gray_and_cmyk", test_jpeg_gray_and_cmyk},
        {"tiff_rgb8", test_tiff_rgb8},
        {"tiff_gray16", test_tiff_gray16},
        {"tiff_float_rgb", test_tiff_float_rgb},
        {"tiff_rgba_hint", test_tiff_rgba_hint},
        {"tiff_refused", test_tiff_refused},
        {"streams", test_streams},
        {"fifo_without_writer", test_fifo_without_writer},
        {"probe", test_probe},
    };
    return ck_test_main(cases, (int)(sizeof cases / sizeof cases[0]), argc, argv);
}
