/*
 * OpenEXR (src/media/exr.c): HALF round trips through ckey_image_write_exr
 * and ckey_image_read for 1, 3 and 4 channels and each compression, the
 * atomic write, and the header / offset-table checks that run before OpenEXR
 * sees a byte (forged data window, tiled flag, bad compression, UINT channel,
 * offsets past the end, truncation, NaN).
 */
#include <dirent.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "ckey_media.h"
#include "media/image.h"
#include "support/clip.h"
#include "support/testutil.h"

#ifdef CK_HAVE_EXR
#include <half.h> /* Imath's C helpers: imath_float_to_half / imath_half_to_float */
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

/* zip-fast is ZIP at zlib level 1: the same pixels back as ZIP, a file that
 * is not ZIP's byte for byte (the level took effect), and not smaller. */
/* PXR24 and ZIP chunks deflated by libdeflate (where built with it) against
 * OpenEXR's own zlib path: OpenEXR's reader decodes both to the same halves,
 * on smooth data, on incompressible noise (chunks stored raw), with odd
 * sizes and the writer's 1 / 3 / 4 channels; the files differ (the path ran)
 * and libdeflate's are at most 10% larger. */
static void test_own_deflate(void) {
    if (!ck_exr_own_deflate()) SKIP("built without libdeflate: OpenEXR's zlib deflates the chunks");
    const char *dir = make_tmpdir();
    REQUIRE(dir);
    static const ckey_exr_compression comps[3] = {CKEY_EXR_PXR24, CKEY_EXR_ZIP, CKEY_EXR_ZIP_FAST};
    static const int chans[3] = {1, 3, 4};
    static const struct { int w, h, noise; } sizes[3] = {{999, 77, 0}, {64, 33, 1}, {1, 1, 0}};
    for (int zi = 0; zi < 3; zi++)
        for (int k = 0; k < 3; k++)
            for (int si = 0; si < 3; si++) {
                const int ch = chans[k], w = sizes[si].w, h = sizes[si].h;
                const size_t n = (size_t)ch * w * h;
                float *src = pattern(ch, w, h);
                uint32_t x = 12345u + (uint32_t)(zi * 9 + k * 3 + si);
                for (size_t i = 0; i < n; i++) {
                    x = x * 1664525u + 1013904223u;
                    const float r = (float)(x >> 8) / 16777216.0f;
                    src[i] = sizes[si].noise ? (r - 0.5f) * 200.0f : src[i] + 0.001f * r;
                }
                char pa[512], pb[512];
                snprintf(pa, sizeof pa, "%s/own-%d-%d-%d.exr", dir, zi, ch, si);
                snprintf(pb, sizeof pb, "%s/zlib-%d-%d-%d.exr", dir, zi, ch, si);
                ckey_error err;
                CHECKF(ck_image_write_exr_opt(pa, src, ch, w, h, comps[zi], 1, &err) == CKEY_OK, "%s", err.message);
                CHECKF(ck_image_write_exr_opt(pb, src, ch, w, h, comps[zi], 0, &err) == CKEY_OK, "%s", err.message);
                for (int kind = 0; kind < 2; kind++) { /* RGB, then the hint (alpha or Y) */
                    ckey_image a = {0}, b = {0};
                    const ckey_image_kind kd = kind ? CKEY_IMAGE_HINT : CKEY_IMAGE_RGB;
                    REQUIRE(ckey_image_read(pa, kd, &a, &err) == CKEY_OK);
                    REQUIRE(ckey_image_read(pb, kd, &b, &err) == CKEY_OK);
                    CHECK(a.width == w && a.height == h && a.channels == b.channels);
                    CHECKF(memcmp(a.data, b.data, (size_t)a.channels * w * h * sizeof(float)) == 0,
                           "comp %d, %d channels, %d x %d: decoded pixels differ", (int)comps[zi], ch, w, h);
                    ckey_image_free(&a);
                    ckey_image_free(&b);
                }
                struct stat sa, sb;
                REQUIRE(stat(pa, &sa) == 0 && stat(pb, &sb) == 0);
                if (si == 0) {
                    printf("  comp %d, %d ch, %d x %d: libdeflate %lld bytes, zlib %lld\n", (int)comps[zi], ch, w,
                           h, (long long)sa.st_size, (long long)sb.st_size);
                    CHECK(sa.st_size != sb.st_size);
                    CHECK(sa.st_size <= sb.st_size + sb.st_size / 10);
                }
                free(src);
            }
    ck_remove_tree(dir);
}

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

#else
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
static void test_own_deflate(void) { SKIP("built without OpenEXR"); }
static void test_matte_channel(void) { SKIP("built without OpenEXR"); }
#endif

int main(int argc, char **argv) {
    static const ck_test_case cases[] = {
        {"zip_fast", test_zip_fast},
        {"own_deflate", test_own_deflate},
        {"sniff", test_sniff},
        {"round_trip", test_round_trip},
        {"opaque_alpha_hint", test_opaque_alpha_hint},
        {"atomic_write", test_atomic_write},
        {"refused", test_refused},
        {"matte_channel", test_matte_channel},
    };
    return ck_test_main(cases, (int)(sizeof cases / sizeof cases[0]), argc, argv);
}
