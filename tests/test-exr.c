/*
 * OpenEXR (src/media/exr.c, exr-write.c): HALF round trips through
 * ckey_image_write_exr and ckey_image_read for 1, 3 and 4 channels and each
 * compression, ckey's chunk writer against OpenEXR's own (read back by
 * OpenEXRCore and by the Imf C++ library), the
 * atomic write, and the header / offset-table checks that run before OpenEXR
 * sees a byte (forged data window, tiled flag, bad compression, UINT channel,
 * offsets past the end, truncation, NaN).
 */
#include <dirent.h>
#include <math.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "ckey_media.h"
#include "core/core.h"
#include "core/dtype.h"
#include "core/quantize.h"
#include "media/exr.h"
#include "media/image.h"
#include "support/clip.h"
#include "support/testutil.h"

#ifdef CK_HAVE_EXR
#include <ImfCRgbaFile.h> /* the Imf (C++) library's C interface */
#include <half.h>         /* Imath's C helpers: imath_float_to_half / imath_half_to_float */
#endif

static void test_sniff(void) {
    static const unsigned char exr[4] = {0x76, 0x2f, 0x31, 0x01};
    CHECK(ck_image_sniff(exr, 4) == CK_IMAGE_EXR);
    CHECK(ck_image_sniff(exr, 3) == CK_IMAGE_UNKNOWN);
}

#ifdef CK_HAVE_EXR

static char tmpdir[256];

static const char *make_tmpdir(void) {
    return ck_make_temp_dir(tmpdir, sizeof tmpdir, "exr") ? tmpdir : NULL;
}


static float half_round(float v) { return imath_half_to_float(imath_float_to_half(v)); }

/* [c, h, w] test pattern with values from -2 to 5 */
static float *pattern(int ch, int w, int h) {
    float *d = malloc((size_t)ch * w * h * sizeof(float));
    for (int c = 0; c < ch; c++)
        for (int y = 0; y < h; y++)
            for (int x = 0; x < w; x++)
                d[((size_t)c * h + y) * w + x] =
                    -2.0f + 7.0f * (float)((x * 37 + y * 11 + c * 71) % 97) / 96.0f +
                    0.001f * (float)x;
    return d;
}

static void check_plane(const char *what, const float *got, const float *src, size_t n) {
    size_t bad = 0, first = 0;
    for (size_t i = 0; i < n; i++)
        if (got[i] != half_round(src[i])) {
            if (!bad) first = i;
            bad++;
        }
    CHECKF(bad == 0, "%s: %zu samples differ from the half-rounded input (first %zu: %g vs %g)",
           what, bad, first, bad ? got[first] : 0.0, bad ? half_round(src[first]) : 0.0);
}

static void test_round_trip(void) {
    const char *dir = make_tmpdir();
    REQUIRE(dir);
    const int w = 37, h = 21; /* neither a multiple of 16 nor 32 */
    const size_t plane = (size_t)w * h;
    static const ckey_exr_compression comps[4] = {CKEY_EXR_PXR24, CKEY_EXR_ZIP, CKEY_EXR_NONE, CKEY_EXR_ZIP_FAST};
    static const int chans[3] = {1, 3, 4};
    for (int ci = 0; ci < 4; ci++) {
        for (int k = 0; k < 3; k++) {
            const int ch = chans[k];
            float *src = pattern(ch, w, h);
            char path[512], what[64];
            snprintf(path, sizeof path, "%s/rt-%d-%d.exr", dir, ch, (int)comps[ci]);
            ckey_error err;
            ckey_status st = ckey_image_write_exr(path, src, ch, w, h, comps[ci], &err);
            CHECKF(st == CKEY_OK, "write %s: %s", path, err.message);
            if (st != CKEY_OK) {
                free(src);
                continue;
            }
            char *tmp = ckey_temp_path(path);
            CHECK(tmp && access(tmp, F_OK) != 0);
            free(tmp);

            ckey_image img;
            st = ckey_image_read(path, CKEY_IMAGE_RGB, &img, &err);
            CHECKF(st == CKEY_OK, "read %s: %s", path, err.message);
            if (st == CKEY_OK) {
                CHECK(img.width == w && img.height == h && img.channels == 3);
                CHECK(img.bit_depth == 16 && img.has_alpha == (ch == 4));
                for (int c = 0; c < 3; c++) {
                    snprintf(what, sizeof what, "%d ch comp %d rgb plane %d", ch, (int)comps[ci], c);
                    check_plane(what, img.data + c * plane, src + (ch == 1 ? 0 : c) * plane, plane);
                }
            }
            ckey_image_free(&img);

            st = ckey_image_read(path, CKEY_IMAGE_HINT, &img, &err);
            CHECKF(st == CKEY_OK, "read hint %s: %s", path, err.message);
            if (st == CKEY_OK) {
                CHECK(img.width == w && img.height == h && img.channels == 1);
                /* A when present (not opaque here), else blue */
                const int want = ch == 1 ? 0 : ch == 4 ? 3 : 2;
                snprintf(what, sizeof what, "%d ch comp %d hint", ch, (int)comps[ci]);
                check_plane(what, img.data, src + want * plane, plane);
            }
            ckey_image_free(&img);

            /* in memory, through the sniffing entry point */
            size_t n = 0;
            unsigned char *bytes = ck_read_file(path, &n);
            REQUIRE(bytes);
            st = ck_image_read_memory(bytes, n, "mem.exr", CKEY_IMAGE_RGB, &img, &err);
            CHECKF(st == CKEY_OK, "memory read: %s", err.message);
            ckey_image_free(&img);
            free(bytes);
            free(src);
        }
    }
    ck_remove_tree(dir);
}

static void test_opaque_alpha_hint(void) {
    const char *dir = make_tmpdir();
    REQUIRE(dir);
    const int w = 9, h = 5;
    const size_t plane = (size_t)w * h;
    float *src = pattern(4, w, h);
    for (size_t i = 0; i < plane; i++) src[3 * plane + i] = 1.0f;
    char path[512];
    snprintf(path, sizeof path, "%s/opaque.exr", dir);
    ckey_error err;
    REQUIRE(ckey_image_write_exr(path, src, 4, w, h, CKEY_EXR_PXR24, &err) == CKEY_OK);
    ckey_image img;
    REQUIRE(ckey_image_read(path, CKEY_IMAGE_HINT, &img, &err) == CKEY_OK);
    check_plane("opaque alpha -> blue", img.data, src + 2 * plane, plane);
    CHECK(img.has_alpha == 1);
    ckey_image_free(&img);
    free(src);
    ck_remove_tree(dir);
}

static void test_atomic_write(void) {
    const char *dir = make_tmpdir();
    REQUIRE(dir);
    float px[4] = {0.5f, 0.25f, 1.0f, 2.0f};
    ckey_error err;
    char path[512];
    /* a missing directory: cannot even create the .tmp */
    snprintf(path, sizeof path, "%s/no/such/dir/m.exr", dir);
    CHECK(ckey_image_write_exr(path, px, 1, 2, 2, CKEY_EXR_PXR24, &err) == CKEY_ERR_IO);
    CHECKF(strstr(err.message, path) != NULL, "message '%s' lacks the path", err.message);
    /* the target is a directory: the .tmp is written, the rename fails, the
     * .tmp must be gone */
    snprintf(path, sizeof path, "%s/isdir.exr", dir);
    REQUIRE(mkdir(path, 0777) == 0);
    CHECK(ckey_image_write_exr(path, px, 1, 2, 2, CKEY_EXR_PXR24, &err) == CKEY_ERR_IO);
    CHECKF(strstr(err.message, path) != NULL, "message '%s' lacks the path", err.message);
    char *lib_tmp = ckey_temp_path(path);
    CHECK(lib_tmp && access(lib_tmp, F_OK) != 0);
    free(lib_tmp);
    /* bad arguments */
    CHECK(ckey_image_write_exr(path, px, 2, 2, 1, CKEY_EXR_ZIP, &err) == CKEY_ERR_INVALID_ARG);
    CHECK(ckey_image_write_exr(path, px, 1, 0, 1, CKEY_EXR_ZIP, &err) == CKEY_ERR_INVALID_ARG);
    CHECK(ckey_image_write_exr(path, px, 1, 2, 2, (ckey_exr_compression)7, &err) ==
          CKEY_ERR_INVALID_ARG);
    ck_remove_tree(dir);
}

/* Position just after `needle` (n bytes) in hay, or 0. */
static size_t find_after(const unsigned char *hay, size_t size, const void *needle, size_t n) {
    for (size_t i = 0; i + n <= size; i++)
        if (!memcmp(hay + i, needle, n)) return i + n;
    return 0;
}

static void put32(unsigned char *p, uint32_t v) {
    for (int i = 0; i < 4; i++) p[i] = (unsigned char)(v >> (8 * i));
}

/* The first channel name of an EXR file's channel list ("" when none). */
static const char *first_channel(const unsigned char *b, size_t n, char *name, size_t cap) {
    name[0] = 0;
    const size_t at = find_after(b, n, "channels\0chlist\0", 16);
    if (!at || at + 4 >= n) return name;
    size_t k = 0;
    for (size_t i = at + 4; i < n && b[i] && k + 1 < cap; i++) name[k++] = (char)b[i];
    name[k] = 0;
    return name;
}

/*
 * A one-channel EXR (the Matte pass) is written as "Y", as OpenCV names the
 * channel of a one-channel cv2.imwrite (upstream's Matte); and a Y matte and
 * an A matte (what ckey wrote before, and other tools write) both read back
 * as the same hint.
 */
static void test_matte_channel(void) {
    const char *dir = make_tmpdir();
    REQUIRE(dir);
    const int w = 9, h = 7;
    const size_t plane = (size_t)w * h;
    float src[9 * 7];
    for (size_t i = 0; i < plane; i++) src[i] = (float)i / (float)(plane - 1);
    char path[512], apath[512], name[32];
    snprintf(path, sizeof path, "%s/matte.exr", dir);
    snprintf(apath, sizeof apath, "%s/matte-a.exr", dir);
    ckey_error err;
    REQUIRE(ckey_image_write_exr(path, src, 1, w, h, CKEY_EXR_PXR24, &err) == CKEY_OK);
    size_t n = 0;
    unsigned char *b = ck_read_file(path, &n);
    REQUIRE(b);
    first_channel(b, n, name, sizeof name);
    printf("  one-channel EXR written as channel '%s'\n", name);
    CHECKF(!strcmp(name, "Y"), "channel '%s', want Y", name);
    /* the same file with the channel renamed A */
    const size_t at = find_after(b, n, "channels\0chlist\0", 16);
    REQUIRE(at && at + 5 < n && b[at + 4] == 'Y' && b[at + 5] == 0);
    b[at + 4] = 'A';
    REQUIRE(ck_write_file(apath, b, n));
    free(b);
    const char *paths[2] = {path, apath};
    for (int k = 0; k < 2; k++) {
        ckey_image img;
        ckey_status st = ckey_image_read(paths[k], CKEY_IMAGE_HINT, &img, &err);
        CHECKF(st == CKEY_OK, "read %s: %s", paths[k], err.message);
        if (st == CKEY_OK) {
            CHECK(img.channels == 1 && img.width == w && img.height == h);
            CHECK(img.has_alpha == (k == 1));
            check_plane(k ? "A matte as hint" : "Y matte as hint", img.data, src, plane);
        }
        ckey_image_free(&img);
        /* and as a gray plate */
        st = ckey_image_read(paths[k], CKEY_IMAGE_RGB, &img, &err);
        CHECKF(st == CKEY_OK, "read %s as RGB: %s", paths[k], err.message);
        if (st == CKEY_OK) check_plane("matte as RGB", img.data + plane, src, plane);
        ckey_image_free(&img);
    }
    ck_remove_tree(dir);
}

static void test_refused(void) {
    const char *dir = make_tmpdir();
    REQUIRE(dir);
    const int w = 40, h = 40;
    float *src = pattern(3, w, h);
    char path[512], bad[512];
    ckey_error err;
    snprintf(path, sizeof path, "%s/good.exr", dir);
    REQUIRE(ckey_image_write_exr(path, src, 3, w, h, CKEY_EXR_ZIP, &err) == CKEY_OK);
    size_t n = 0;
    unsigned char *good = ck_read_file(path, &n);
    REQUIRE(good);
    unsigned char *b = malloc(n);
    REQUIRE(b);

    /* truncated: anywhere in the data, in the offset table, in the header */
    static const size_t cuts[4] = {0, 1, 3, 4};
    for (int i = 0; i < 4; i++) {
        const size_t len = cuts[i] == 0 ? n - 1 : cuts[i] == 1 ? n / 2 : cuts[i] == 3 ? 100 : 6;
        snprintf(bad, sizeof bad, "%s/trunc-%zu.exr", dir, len);
        REQUIRE(ck_write_file(bad, good, len));
        ck_expect_read_fails(bad, CKEY_IMAGE_RGB, CKEY_ERR_FORMAT, "truncated");
    }

    /* forged data window: side limit, then pixel limit */
    const size_t dw = find_after(good, n, "dataWindow\0box2i\0", 17);
    REQUIRE(dw && dw + 4 + 16 <= n);
    memcpy(b, good, n);
    put32(b + dw + 4 + 8, 40000);
    snprintf(bad, sizeof bad, "%s/huge-side.exr", dir);
    REQUIRE(ck_write_file(bad, b, n));
    ck_expect_read_fails(bad, CKEY_IMAGE_RGB, CKEY_ERR_UNSUPPORTED, "side limit");
    memcpy(b, good, n);
    put32(b + dw + 4 + 8, 20000);
    put32(b + dw + 4 + 12, 20000);
    snprintf(bad, sizeof bad, "%s/huge-area.exr", dir);
    REQUIRE(ck_write_file(bad, b, n));
    ck_expect_read_fails(bad, CKEY_IMAGE_RGB, CKEY_ERR_UNSUPPORTED, "limit of");
    memcpy(b, good, n);
    put32(b + dw + 4 + 8, (uint32_t)-5); /* xmax < xmin */
    snprintf(bad, sizeof bad, "%s/empty-window.exr", dir);
    REQUIRE(ck_write_file(bad, b, n));
    ck_expect_read_fails(bad, CKEY_IMAGE_RGB, CKEY_ERR_FORMAT, "data window");

    /* tiled, deep and multi-part flags */
    static const unsigned char flags[3] = {0x02, 0x08, 0x10};
    static const char *words[3] = {"tiled", "deep", "multi-part"};
    for (int i = 0; i < 3; i++) {
        memcpy(b, good, n);
        b[5] |= flags[i];
        snprintf(bad, sizeof bad, "%s/flag-%d.exr", dir, i);
        REQUIRE(ck_write_file(bad, b, n));
        ck_expect_read_fails(bad, CKEY_IMAGE_RGB, CKEY_ERR_UNSUPPORTED, words[i]);
    }

    /* compression: DWAA and an id past the end */
    const size_t cp = find_after(good, n, "compression\0compression\0", 24);
    REQUIRE(cp && cp + 5 <= n);
    static const unsigned char cids[2] = {8, 42};
    for (int i = 0; i < 2; i++) {
        memcpy(b, good, n);
        b[cp + 4] = cids[i];
        snprintf(bad, sizeof bad, "%s/comp-%d.exr", dir, cids[i]);
        REQUIRE(ck_write_file(bad, b, n));
        ck_expect_read_fails(bad, CKEY_IMAGE_RGB, CKEY_ERR_UNSUPPORTED, "compression");
    }

    /* a UINT channel */
    const size_t bch = find_after(good, n, "B\0\1\0\0\0", 6);
    REQUIRE(bch);
    memcpy(b, good, n);
    b[bch - 4] = 0;
    snprintf(bad, sizeof bad, "%s/uint.exr", dir);
    REQUIRE(ck_write_file(bad, b, n));
    ck_expect_read_fails(bad, CKEY_IMAGE_RGB, CKEY_ERR_UNSUPPORTED, "UINT");

    /* the offset table: 3 chunks of 16 lines; its first entry points just
     * past it */
    size_t table = 0;
    for (size_t i = 8; i + 24 <= n; i++) {
        uint64_t v = 0;
        for (int k = 7; k >= 0; k--) v = v << 8 | good[i + (size_t)k];
        if (v == i + 24 && good[i - 1] == 0) {
            table = i;
            break;
        }
    }
    REQUIRE(table);
    memcpy(b, good, n);
    put32(b + table + 8, (uint32_t)n + 100); /* second chunk past the end */
    snprintf(bad, sizeof bad, "%s/offset-past-end.exr", dir);
    REQUIRE(ck_write_file(bad, b, n));
    ck_expect_read_fails(bad, CKEY_IMAGE_RGB, CKEY_ERR_FORMAT, "chunk 1");
    memcpy(b, good, n);
    put32(b + table + 16, 3); /* third chunk inside the header */
    snprintf(bad, sizeof bad, "%s/offset-in-header.exr", dir);
    REQUIRE(ck_write_file(bad, b, n));
    ck_expect_read_fails(bad, CKEY_IMAGE_RGB, CKEY_ERR_FORMAT, "chunk 2");
    /* a chunk whose size runs past the end */
    memcpy(b, good, n);
    put32(b + table + 24 + 4, 1u << 30);
    snprintf(bad, sizeof bad, "%s/chunk-size.exr", dir);
    REQUIRE(ck_write_file(bad, b, n));
    ck_expect_read_fails(bad, CKEY_IMAGE_RGB, CKEY_ERR_FORMAT, "truncated");

    /* unknown magic */
    memcpy(b, good, n);
    b[0] = 'B';
    b[1] = 'M';
    snprintf(bad, sizeof bad, "%s/magic.exr", dir);
    REQUIRE(ck_write_file(bad, b, n));
    ck_expect_read_fails(bad, CKEY_IMAGE_RGB, CKEY_ERR_UNSUPPORTED, "unknown image format");

    /* NaN and Inf are refused, naming the pixel */
    src[(size_t)1 * w * h + 2 * w + 3] = NAN;
    snprintf(bad, sizeof bad, "%s/nan.exr", dir);
    REQUIRE(ckey_image_write_exr(bad, src, 3, w, h, CKEY_EXR_PXR24, &err) == CKEY_OK);
    ck_expect_read_fails(bad, CKEY_IMAGE_RGB, CKEY_ERR_FORMAT, "non-finite sample (NaN or Inf) at x 3, y 2, channel 1");
    src[(size_t)1 * w * h + 2 * w + 3] = 1e6f; /* beyond half range: Inf */
    REQUIRE(ckey_image_write_exr(bad, src, 3, w, h, CKEY_EXR_NONE, &err) == CKEY_OK);
    ck_expect_read_fails(bad, CKEY_IMAGE_RGB, CKEY_ERR_FORMAT, "x 3, y 2, channel 1");

    free(b);
    free(good);
    free(src);
    ck_remove_tree(dir);
}

/* The Imf (C++) library's reader, through its C interface: the halves of
 * R, G, B and A as RgbaInputFile gives them; NULL when it refuses the file. */
static ImfHalf *imf_read(const char *path, int *w, int *h) {
    ImfInputFile *in = ImfOpenInputFile(path);
    if (!in) {
        printf("    Imf: %s: %s\n", path, ImfErrorMessage());
        return NULL;
    }
    int x0, y0, x1, y1;
    ImfHeaderDataWindow(ImfInputHeader(in), &x0, &y0, &x1, &y1);
    *w = x1 - x0 + 1, *h = y1 - y0 + 1;
    ImfRgba *px = malloc(sizeof *px * (size_t)*w * (size_t)*h);
    ImfHalf *out = malloc(sizeof *out * 4 * (size_t)*w * (size_t)*h);
    int ok = px && out && ImfInputSetFrameBuffer(in, px - x0 - (size_t)y0 * *w, 1, (size_t)*w) &&
             ImfInputReadPixels(in, y0, y1);
    if (!ok) printf("    Imf: %s: %s\n", path, ImfErrorMessage());
    for (size_t i = 0; ok && i < (size_t)*w * (size_t)*h; i++) {
        out[4 * i] = px[i].r, out[4 * i + 1] = px[i].g, out[4 * i + 2] = px[i].b, out[4 * i + 3] = px[i].a;
    }
    ImfCloseInputFile(in);
    free(px);
    if (!ok) {
        free(out);
        return NULL;
    }
    return out;
}

static unsigned char *slurp(const char *path, size_t *n) {
    FILE *f = fopen(path, "rb");
    if (!f) return NULL;
    fseek(f, 0, SEEK_END);
    const long len = ftell(f);
    fseek(f, 0, SEEK_SET);
    unsigned char *b = malloc(len > 0 ? (size_t)len : 1);
    *n = b ? fread(b, 1, (size_t)len, f) : 0;
    fclose(f);
    return b;
}

/*
 * ckey's chunk writer against OpenEXR's own pipeline and zlib: for each
 * compression and deflate level, 1, 3 and 4 channels, smooth data, noise
 * (chunks stored raw), odd sizes and a 1 x 1 image, and special values
 * (NaN, +-Inf, -0, values that round to Inf or to HALF denormals):
 *   - the OpenEXR C++ library (Imf's RgbaInputFile) decodes ckey's file to
 *     Imath's float_to_half of the input, and both libraries (OpenEXRCore
 *     through ckey_image_read, finite values only) decode it as they decode
 *     OpenEXR's own file;
 *   - with NONE the files are byte for byte OpenEXR's own;
 *   - encoded on a pool of 3 threads the file is byte for byte the serial one.
 * PXR24 keeps HALF channels exactly (it rounds only FLOAT ones to 24 bits).
 */
static void test_chunk_writer(void) {
    const char *dir = make_tmpdir();
    REQUIRE(dir);
    ck_pool *pool = NULL;
    REQUIRE(ck_pool_create(3, &pool, NULL) == CKEY_OK);
    ck_exr_writer *wr = ck_exr_writer_new();
    REQUIRE(wr);
    static const ckey_exr_compression comps[4] = {CKEY_EXR_PXR24, CKEY_EXR_ZIP, CKEY_EXR_ZIP_FAST, CKEY_EXR_NONE};
    static const int levels[4] = {0, 1, 6, 12};
    static const int chans[3] = {1, 3, 4};
    static const struct { int w, h, kind; } sizes[4] = {{999, 77, 0}, {64, 33, 1}, {1, 1, 0}, {37, 40, 2}};
    static const float special[] = {NAN, INFINITY, -INFINITY, -0.0f, 65504.0f, 65519.9f, 65520.0f, -1e6f,
                                    1e-5f, 3e-8f, 2.98e-8f, 5.96e-8f, -6.1e-5f, 1e-40f};
    int files = 0, half_files = 0;
    for (int zi = 0; zi < 4; zi++)
        for (int li = 0; li < 4; li++) {
            if (comps[zi] == CKEY_EXR_NONE && li > 0) continue;
            for (int k = 0; k < 3; k++)
                for (int si = 0; si < 4; si++) {
                    const int ch = chans[k], w = sizes[si].w, h = sizes[si].h;
                    const size_t n = (size_t)ch * w * h;
                    float *src = pattern(ch, w, h);
                    uint32_t x = 12345u + (uint32_t)(zi * 9 + k * 3 + si);
                    for (size_t i = 0; i < n; i++) {
                        x = x * 1664525u + 1013904223u;
                        const float r = (float)(x >> 8) / 16777216.0f;
                        src[i] = sizes[si].kind == 1 ? (r - 0.5f) * 200.0f
                                 : sizes[si].kind == 2 && i % 7 == 0
                                     ? special[(i / 7) % (sizeof special / sizeof special[0])]
                                     : src[i] + 0.001f * r;
                    }
                    const ckey_exr_options o = {comps[zi], levels[li]};
                    const int zl = levels[li] ? (levels[li] > 9 ? 9 : levels[li])
                                              : comps[zi] == CKEY_EXR_ZIP_FAST ? 1 : -1;
                    char pa[512], pp[512], pr[512];
                    snprintf(pa, sizeof pa, "%s/ck-%d-%d-%d-%d.exr", dir, zi, li, ch, si);
                    snprintf(pp, sizeof pp, "%s/pool-%d-%d-%d-%d.exr", dir, zi, li, ch, si);
                    snprintf(pr, sizeof pr, "%s/ref-%d-%d-%d-%d.exr", dir, zi, li, ch, si);
                    ckey_error err;
                    CHECKF(ckey_image_write_exr_opt(pa, src, ch, w, h, &o, &err) == CKEY_OK, "%s", err.message);
                    CHECKF(ck_exr_write(wr, pool, pp, src, ch, w, h, &o, &err) == CKEY_OK, "%s", err.message);
                    CHECKF(ck_exr_write_openexr(pr, src, ch, w, h, comps[zi], zl, &err) == CKEY_OK, "%s",
                           err.message);
                    size_t na = 0, np = 0, nr = 0;
                    unsigned char *ba = slurp(pa, &na), *bp = slurp(pp, &np), *br = slurp(pr, &nr);
                    REQUIRE(ba && bp && br);
                    CHECKF(na == np && memcmp(ba, bp, na) == 0, "%s: the pool's file differs", pp);
                    {
                        /* the same image given as the HALF samples the floats round to: the same
                         * bytes, through ckey's chunk encoder and through OpenEXR's pipeline */
                        uint16_t *hs = malloc(n * sizeof *hs);
                        REQUIRE(hs);
                        ck_half_from_float(src, hs, n);
                        char ph[512], phr[512];
                        snprintf(ph, sizeof ph, "%s/half-%d-%d-%d-%d.exr", dir, zi, li, ch, si);
                        snprintf(phr, sizeof phr, "%s/half-ref-%d-%d-%d-%d.exr", dir, zi, li, ch, si);
                        CHECKF(ck_exr_write_half(wr, pool, ph, hs, ch, w, h, &o, &err) == CKEY_OK, "%s",
                               err.message);
                        CHECKF(ck_exr_write_openexr_half(phr, hs, ch, w, h, comps[zi], zl, &err) == CKEY_OK, "%s",
                               err.message);
                        size_t nh = 0, nhr = 0;
                        unsigned char *bh = slurp(ph, &nh), *bhr = slurp(phr, &nhr);
                        REQUIRE(bh && bhr);
                        CHECKF(nh == na && memcmp(bh, ba, na) == 0, "%s: not the floats' file", ph);
                        CHECKF(nhr == nr && memcmp(bhr, br, nr) == 0, "%s: not OpenEXR's file of the floats", phr);
                        half_files++;
                        free(bh), free(bhr), free(hs);
                    }
                    if (comps[zi] == CKEY_EXR_NONE)
                        CHECKF(na == nr && memcmp(ba, br, na) == 0, "%s: not OpenEXR's bytes", pa);
                    int wa = 0, ha = 0, wr2 = 0, hr = 0;
                    ImfHalf *ia = imf_read(pa, &wa, &ha), *ir = imf_read(pr, &wr2, &hr);
                    /* a build without libdeflate writes through
                     * OpenEXR's own writer, whose flaw (below) the special
                     * values can hit */
                    const int eff = levels[li] ? levels[li] : comps[zi] == CKEY_EXR_ZIP_FAST ? 1 : 6;
                    const int by_openexr = comps[zi] != CKEY_EXR_NONE && !strcmp(ck_exr_deflater(eff), "zlib");
                    if (by_openexr && sizes[si].kind == 2) {
                        free(ia), free(ir), ia = ir = NULL;
                    }
                    CHECKF(ia || (by_openexr && sizes[si].kind == 2), "%s: Imf cannot read it", pa);
                    CHECKF(!ia || (wa == w && ha == h), "%s: Imf reads another size", pa);
                    if (ia) {
                        /* R, G, B (the lone Y thrice) and A (1 when absent) as Imath rounds the input */
                        size_t bad = 0;
                        for (size_t i = 0; i < (size_t)w * h; i++)
                            for (int c = 0; c < 4; c++) {
                                const int plane = ch == 1 ? (c < 3 ? 0 : -1) : c < ch ? c : -1;
                                const uint16_t want =
                                    plane < 0 ? 0x3c00 : imath_float_to_half(src[(size_t)plane * w * h + i]);
                                bad += ia[4 * i + c] != want;
                            }
                        CHECKF(bad == 0, "%s: %zu halves differ from the input's", pa, bad);
                    }
                    /* OpenEXR 3.1.5's own PXR24 encoder writes a chunk whose
                     * deflated size equals its raw size as if it were stored
                     * raw, which no reader decodes: the special values hit
                     * that, so its file is compared only on the others */
                    if (sizes[si].kind != 2)
                        CHECKF(ia && ir && wr2 == w && hr == h &&
                                   memcmp(ia, ir, sizeof *ia * 4 * (size_t)w * h) == 0,
                               "%s: Imf decodes other halves than from OpenEXR's file", pa);
                    free(ia);
                    free(ir);
                    if (sizes[si].kind != 2)
                        for (int kind = 0; kind < 2; kind++) { /* OpenEXRCore: RGB, then the hint (A or Y) */
                            ckey_image a = {0}, b = {0};
                            const ckey_image_kind kd = kind ? CKEY_IMAGE_HINT : CKEY_IMAGE_RGB;
                            REQUIRE(ckey_image_read(pa, kd, &a, &err) == CKEY_OK);
                            REQUIRE(ckey_image_read(pr, kd, &b, &err) == CKEY_OK);
                            CHECK(a.width == w && a.height == h && a.channels == b.channels);
                            CHECKF(memcmp(a.data, b.data, (size_t)a.channels * w * h * sizeof(float)) == 0,
                                   "%s: decoded pixels differ from OpenEXR's file", pa);
                            ckey_image_free(&a);
                            ckey_image_free(&b);
                        }
                    if (si == 0 && k == 1)
                        printf("  %s level %d (%s), 3 ch, %d x %d: ckey %zu bytes, OpenEXR's zlib %zu\n",
                               zi == 0 ? "PXR24" : zi == 3 ? "NONE" : zi == 1 ? "ZIP" : "ZIP_FAST", levels[li],
                               ck_exr_deflater(levels[li] ? levels[li] : zi == 2 ? 1 : 6), w, h, na, nr);
                    free(ba);
                    free(bp);
                    free(br);
                    free(src);
                    files++;
                }
        }
    printf("  %d images written three ways, %d of them also from their HALF samples (two ways): the same bytes\n",
           files, half_files);
    CHECK(half_files == files);
    ckey_error err;
    const float px[4] = {0};
    const ckey_exr_options bad = {CKEY_EXR_PXR24, CKEY_EXR_LEVEL_MAX + 1};
    char p[512];
    snprintf(p, sizeof p, "%s/bad.exr", dir);
    CHECK(ckey_image_write_exr_opt(p, px, 1, 2, 2, &bad, &err) == CKEY_ERR_INVALID_ARG);
    CHECKF(strstr(err.message, "level 13") != NULL, "%s", err.message);
    ck_exr_writer_free(wr);
    ck_pool_free(pool);
    if (!getenv("KEEP")) ck_remove_tree(dir);
}

/* ck_half_from_float and ck_half_of_bits are Imath's float_to_half, NaN payloads included, on a
 * spread of every float's bit patterns. */
static void test_half_conversion(void) {
    enum { B = 4099 };
    float in[B];
    uint16_t out[B];
    long bad = 0, bad_scalar = 0, n = 0;
    for (uint64_t u = 0; u < 0x100000000ull; u += (uint64_t)B * 97 + 13) {
        for (int i = 0; i < B; i++) {
            const uint32_t b = (uint32_t)(u + (uint64_t)i * 97);
            memcpy(&in[i], &b, sizeof b);
        }
        ck_half_from_float(in, out, B);
        for (int i = 0; i < B; i++) {
            uint32_t b;
            memcpy(&b, &in[i], sizeof b);
            bad += out[i] != imath_float_to_half(in[i]);
            /* the scalar form alone (the device frame path's, core/quantize.h) */
            bad_scalar += ck_half_of_bits(b) != imath_float_to_half(in[i]);
        }
        n += B;
    }
    printf("  %ld floats, %ld differ from imath_float_to_half (%ld in the scalar form)\n", n, bad, bad_scalar);
    CHECK(bad == 0 && bad_scalar == 0);
}

/* zip-fast is ZIP at zlib level 1: the same pixels back as ZIP, a file that
 * is not ZIP's byte for byte (the level took effect), and not smaller. */
static void test_zip_fast(void) {
    const char *dir = make_tmpdir();
    REQUIRE(dir);
    const int w = 512, h = 256, ch = 3;
    float *src = pattern(ch, w, h);
    for (size_t i = 0; i < (size_t)ch * w * h; i++) src[i] += 0.01f * (float)((i * 2654435761u) % 1000) / 1000.0f;
    char pz[512], pf[512];
    snprintf(pz, sizeof pz, "%s/zip.exr", dir);
    snprintf(pf, sizeof pf, "%s/zip-fast.exr", dir);
    ckey_error err;
    REQUIRE(ckey_image_write_exr(pz, src, ch, w, h, CKEY_EXR_ZIP, &err) == CKEY_OK);
    REQUIRE(ckey_image_write_exr(pf, src, ch, w, h, CKEY_EXR_ZIP_FAST, &err) == CKEY_OK);
    ckey_image a, b;
    REQUIRE(ckey_image_read(pz, CKEY_IMAGE_RGB, &a, &err) == CKEY_OK);
    REQUIRE(ckey_image_read(pf, CKEY_IMAGE_RGB, &b, &err) == CKEY_OK);
    CHECK(a.width == w && a.height == h && b.width == w && b.height == h);
    CHECK(memcmp(a.data, b.data, (size_t)3 * w * h * sizeof(float)) == 0);
    ckey_image_free(&a);
    ckey_image_free(&b);
    struct stat sz, sf;
    REQUIRE(stat(pz, &sz) == 0 && stat(pf, &sf) == 0);
    printf("  %d x %d RGB: zip %lld bytes, zip-fast %lld bytes\n", w, h, (long long)sz.st_size,
           (long long)sf.st_size);
    CHECK(sf.st_size >= sz.st_size);
    FILE *fz = fopen(pz, "rb"), *ff = fopen(pf, "rb");
    REQUIRE(fz && ff);
    int differ = sz.st_size != sf.st_size;
    for (int cz = 0, cf = 0; !differ && (cz = fgetc(fz)) != EOF && (cf = fgetc(ff)) != EOF;) differ = cz != cf;
    fclose(fz);
    fclose(ff);
    CHECK(differ);
    free(src);
}

/* ckey_image_read_packed's HALF samples, as floats, against ckey_image_read's
 * for 1, 3 and 4 channels, both kinds; an opaque alpha, a non-finite sample. */
static int packed_same(const char *path, ckey_image_kind kind, ckey_packed_image *pk) {
    ckey_image img;
    ckey_error err;
    if (ckey_image_read(path, kind, &img, &err) != CKEY_OK) return 0;
    if (ckey_image_read_packed(path, kind, pk, &err) != CKEY_OK || pk->type != CKEY_SAMPLE_F16 ||
        pk->width != img.width || pk->height != img.height) {
        ckey_image_free(&img);
        return 0;
    }
    const size_t n = (size_t)img.width * img.height, C = (size_t)pk->channels;
    int same = 1;
    for (int c = 0; c < img.channels; c++) {
        const size_t ch = kind == CKEY_IMAGE_RGB ? (size_t)c : (size_t)pk->hint_channel;
        for (size_t i = 0; i < n && same; i++)
            same = ck_f16_to_f32(((const uint16_t *)pk->data)[i * C + ch]) == img.data[(size_t)c * n + i];
    }
    ckey_image_free(&img);
    return same;
}

static void test_packed_matches_float(void) {
    const char *dir = make_tmpdir();
    REQUIRE(dir);
    const int w = 37, h = 21;
    const size_t plane = (size_t)w * h;
    ckey_packed_image pk;
    memset(&pk, 0, sizeof pk);
    static const int chans[3] = {1, 3, 4};
    for (int k = 0; k < 3; k++)
        for (int opaque = 0; opaque < (chans[k] == 4 ? 2 : 1); opaque++) {
            const int ch = chans[k];
            float *src = pattern(ch, w, h);
            for (size_t i = 0; opaque && i < plane; i++) src[3 * plane + i] = 1.0f;
            char path[512];
            snprintf(path, sizeof path, "%s/p-%d-%d.exr", dir, ch, opaque);
            ckey_error err;
            REQUIRE(ckey_image_write_exr(path, src, ch, w, h, CKEY_EXR_PXR24, &err) == CKEY_OK);
            CHECKF(packed_same(path, CKEY_IMAGE_RGB, &pk), "%d channels: packed rgb differs", ch);
            CHECK(pk.channels == 3 && pk.hint_channel == -1);
            CHECKF(packed_same(path, CKEY_IMAGE_HINT, &pk), "%d channels: packed hint differs", ch);
            CHECK(pk.channels == (ch == 4 ? 2 : 1) && pk.hint_channel == (ch == 4 && opaque ? 1 : 0));
            printf("  %d channel%s%s: packed HALF = float reads (hint: %d of %d channels)\n", ch, ch == 1 ? "" : "s",
                   opaque ? ", opaque alpha" : "", (int)pk.hint_channel, (int)pk.channels);
            /* Inf (a value past HALF's range) is refused by both */
            src[5] = 1e6f;
            REQUIRE(ckey_image_write_exr(path, src, ch, w, h, CKEY_EXR_PXR24, &err) == CKEY_OK);
            CHECK(ckey_image_read_packed(path, CKEY_IMAGE_RGB, &pk, &err) == CKEY_ERR_FORMAT &&
                  strstr(err.message, "non-finite") != NULL);
            free(src);
        }
    ckey_packed_image_free(&pk);
    ck_remove_tree(dir);
}

#else
static void test_packed_matches_float(void) { SKIP("built without OpenEXR"); }
static void test_round_trip(void) { SKIP("built without OpenEXR"); }
static void test_opaque_alpha_hint(void) { SKIP("built without OpenEXR"); }
static void test_atomic_write(void) {
    float px[1] = {0};
    ckey_error err;
    CHECK(ckey_image_write_exr("/tmp/x.exr", px, 1, 1, 1, CKEY_EXR_PXR24, &err) ==
          CKEY_ERR_UNSUPPORTED);
    CHECK(strstr(err.message, "without OpenEXR") != NULL);
}
static void test_refused(void) { SKIP("built without OpenEXR"); }
static void test_zip_fast(void) { SKIP("built without OpenEXR"); }
static void test_chunk_writer(void) { SKIP("built without OpenEXR"); }
static void test_half_conversion(void) { SKIP("built without OpenEXR"); }
static void test_matte_channel(void) { SKIP("built without OpenEXR"); }
#endif

int main(int argc, char **argv) {
    static const ck_test_case cases[] = {
        {"zip_fast", test_zip_fast},
        {"chunk_writer", test_chunk_writer},
        {"half_conversion", test_half_conversion},
        {"sniff", test_sniff},
        {"round_trip", test_round_trip},
        {"opaque_alpha_hint", test_opaque_alpha_hint},
        {"packed_matches_float", test_packed_matches_float},
        {"atomic_write", test_atomic_write},
        {"refused", test_refused},
        {"matte_channel", test_matte_channel},
    };
    return ck_test_main(cases, (int)(sizeof cases / sizeof cases[0]), argc, argv);
}
