/*
 * PNG IO (src/media/png.c): round trips, every color type of the corpus
 * (fuzz/corpus/png, made by tools/make_png_corpus.py), broken files, the
 * dimension caps and the atomic write.
 */
#include <errno.h>
#include <math.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "ckey_media.h"
#include "media/image.h"
#include "support/testutil.h"

#define LEN(a) (sizeof(a) / sizeof((a)[0]))

static char tmpdir[256];

/* A fresh private directory per case. */
static const char *make_tmpdir(void) {
    return ck_make_temp_dir(tmpdir, sizeof tmpdir, "image") ? tmpdir : NULL;
}

static int exists(const char *path) {
    struct stat st;
    return stat(path, &st) == 0;
}

static int write_bytes(const char *path, const void *data, size_t n) {
    FILE *f = fopen(path, "wb");
    if (!f) return 0;
    int ok = fwrite(data, 1, n, f) == n;
    return fclose(f) == 0 && ok;
}

/* ------------------------------------------------------------ round trips */

static void roundtrip(int channels, int depth, ckey_image_kind kind) {
    const int w = 29, h = 17;
    const size_t plane = (size_t)w * h;
    const unsigned maxv = depth == 16 ? 65535u : 255u;
    float *src = malloc(plane * (size_t)channels * sizeof *src);
    REQUIRE(src);
    /* exact quantization levels, so the round trip must be exact */
    for (size_t i = 0; i < plane * (size_t)channels; i++)
        src[i] = (float)((i * 2654435761u) % (maxv + 1)) / (float)maxv;
    const char *dir = make_tmpdir();
    REQUIRE(dir);
    char path[512];
    snprintf(path, sizeof path, "%s/rt.png", dir);
    ckey_error err;
    ckey_status st = ckey_image_write_png(path, src, channels, w, h, depth, &err);
    CHECKF(st == CKEY_OK, "%s", err.message);
    ckey_image img;
    st = ckey_image_read_png(path, kind, &img, &err);
    CHECKF(st == CKEY_OK, "%s", err.message);
    if (st == CKEY_OK) {
        CHECK(img.width == w && img.height == h && img.bit_depth == depth);
        CHECK(img.has_alpha == (channels == 4));
        if (kind == CKEY_IMAGE_RGB) {
            REQUIRE(img.channels == 3);
            for (int c = 0; c < 3; c++) {
                const float *want = src + (size_t)(channels == 1 ? 0 : c) * plane;
                char label[64];
                snprintf(label, sizeof label, "%dch %d-bit -> rgb c%d", channels, depth, c);
                CHECK(ck_compare(label, img.data + (size_t)c * plane, want, plane, NULL) == 0);
            }
        } else {
            REQUIRE(img.channels == 1);
            /* alpha when the file has a non-opaque one, else gray / blue */
            const int src_c = channels == 4 ? 3 : channels == 3 ? 2 : 0;
            char label[64];
            snprintf(label, sizeof label, "%dch %d-bit -> hint", channels, depth);
            CHECK(ck_compare(label, img.data, src + (size_t)src_c * plane, plane, NULL) == 0);
        }
    }
    ckey_image_free(&img);
    CHECK(img.data == NULL);
    free(src);
    ck_remove_tree(dir);
}

static void test_roundtrip_gray16(void) { roundtrip(1, 16, CKEY_IMAGE_HINT); }
static void test_roundtrip_gray8_as_rgb(void) { roundtrip(1, 8, CKEY_IMAGE_RGB); }
static void test_roundtrip_rgb8(void) { roundtrip(3, 8, CKEY_IMAGE_RGB); }
static void test_roundtrip_rgb16(void) { roundtrip(3, 16, CKEY_IMAGE_RGB); }
static void test_roundtrip_rgb16_hint(void) { roundtrip(3, 16, CKEY_IMAGE_HINT); }
static void test_roundtrip_rgba16_hint(void) { roundtrip(4, 16, CKEY_IMAGE_HINT); }
static void test_roundtrip_rgba8_as_rgb(void) { roundtrip(4, 8, CKEY_IMAGE_RGB); }

/* Out-of-range values clamp, NaN becomes 0, rounding is to nearest. */
static void test_quantize(void) {
    const float src[8] = {-1.0f, 0.0f, 0.5f / 65535.0f - 1e-9f, 0.5f, 1.0f, 2.0f, NAN, 1e-7f};
    const char *dir = make_tmpdir();
    REQUIRE(dir);
    char path[512];
    snprintf(path, sizeof path, "%s/q.png", dir);
    ckey_error err;
    CHECK(ckey_image_write_png(path, src, 1, 8, 1, 16, &err) == CKEY_OK);
    ckey_image img;
    REQUIRE(ckey_image_read_png(path, CKEY_IMAGE_HINT, &img, &err) == CKEY_OK);
    const float want[8] = {0.0f, 0.0f, 0.0f, 32768.0f / 65535.0f, 1.0f, 1.0f, 0.0f, 0.0f};
    CHECK(ck_compare("quantize 16-bit", img.data, want, 8, NULL) == 0);
    ckey_image_free(&img);
    ck_remove_tree(dir);
}

/* The Comp PNG's compressions (zlib levels with libpng's adaptive filters,
 * and Up-filtered runs) write other bytes and the same pixels: a grainy
 * 8-bit RGB image, odd-sized, read back at 3, 1, 9 and rle. */
static void test_png_levels_same_pixels(void) {
    enum { W = 211, H = 67 };
    float *src = malloc(sizeof(float) * 3 * W * H);
    REQUIRE(src);
    uint32_t r = 99;
    for (int i = 0; i < 3 * W * H; i++) {
        r = r * 1664525u + 1013904223u;
        src[i] = 0.3f + 0.4f * (float)(i % W) / W + 0.05f * (float)(r >> 8) / 16777216.0f;
    }
    const char *dir = make_tmpdir();
    REQUIRE(dir);
    static const int levels[4] = {3, 1, 9, CK_PNG_LEVEL_RLE};
    ckey_image ref = {0};
    size_t ref_n = 0;
    unsigned char *ref_b = NULL;
    for (int k = 0; k < 4; k++) {
        char path[512];
        snprintf(path, sizeof path, "%s/l%d.png", dir, k);
        ckey_error err;
        REQUIRE(ck_image_write_png_q(path, src, 3, W, H, 8, CK_PNG_TRUNCATE, levels[k], &err) == CKEY_OK);
        ckey_image img;
        REQUIRE(ckey_image_read(path, CKEY_IMAGE_RGB, &img, &err) == CKEY_OK);
        size_t n = 0;
        unsigned char *b = ck_read_file(path, &n);
        REQUIRE(b);
        if (k == 0) {
            ref = img, ref_b = b, ref_n = n;
            continue;
        }
        CHECKF(img.width == W && img.height == H && memcmp(img.data, ref.data, sizeof(float) * 3 * W * H) == 0,
               "level %d: other pixels than level 3's", levels[k]);
        CHECKF(n != ref_n || memcmp(b, ref_b, n) != 0, "level %d wrote level 3's bytes", levels[k]);
        printf("  level %d: %zu bytes (level 3: %zu)\n", levels[k], n, ref_n);
        ckey_image_free(&img);
        free(b);
    }
    ckey_image_free(&ref);
    free(ref_b);
    free(src);
    ck_remove_tree(dir);
}

/* The Comp PNG from 8-bit samples (ck_image_write_png_u8, the device frame
 * path's) is the file of the floats they were truncated from
 * (CK_PNG_TRUNCATE), byte for byte: 1 and 3 channels, levels 3 and rle, on
 * every k / 255 and its neighbours, NaN, infinities, negatives, values past
 * 1 and grain. */
static void test_png_u8_same_bytes(void) {
    enum { W = 131, H = 29 };
    const size_t n = (size_t)3 * W * H;
    float *src = malloc(n * sizeof(float));
    uint8_t *q = malloc(n);
    REQUIRE(src && q);
    static const float special[] = {NAN, INFINITY, -INFINITY, -0.0f, -1e-30f, 1e-30f, 1.0f, 1.0000001f, 2.0f, -0.5f};
    uint32_t r = 7;
    for (size_t i = 0; i < n; i++) {
        r = r * 1664525u + 1013904223u;
        const float k = (float)(i % 256) / 255.0f;
        switch (i % 5) {
        case 0: src[i] = k; break;
        case 1: src[i] = nextafterf(k, 0.0f); break;
        case 2: src[i] = nextafterf(k, 2.0f); break;
        case 3: src[i] = special[(i / 5) % (sizeof special / sizeof special[0])]; break;
        default: src[i] = (float)(r >> 8) / 16777216.0f * 1.2f - 0.1f; break;
        }
        q[i] = (uint8_t)ck_trunc_u8(src[i]);
    }
    const char *dir = make_tmpdir();
    REQUIRE(dir);
    static const int levels[2] = {3, CK_PNG_LEVEL_RLE};
    static const int chans[2] = {1, 3};
    int same = 0;
    for (int l = 0; l < 2; l++)
        for (int c = 0; c < 2; c++) {
            char pf[512], pq[512];
            snprintf(pf, sizeof pf, "%s/f%d%d.png", dir, l, c);
            snprintf(pq, sizeof pq, "%s/q%d%d.png", dir, l, c);
            ckey_error err;
            REQUIRE(ck_image_write_png_q(pf, src, chans[c], W, H, 8, CK_PNG_TRUNCATE, levels[l], &err) == CKEY_OK);
            double io = -1;
            CHECKF(ck_image_write_png_u8(pq, q, chans[c], W, H, levels[l], &io, &err) == CKEY_OK, "%s", err.message);
            CHECK(io >= 0);
            size_t nf = 0, nq = 0;
            unsigned char *bf = ck_read_file(pf, &nf), *bq = ck_read_file(pq, &nq);
            REQUIRE(bf && bq);
            CHECKF(nf == nq && memcmp(bf, bq, nf) == 0, "level %d, %d channels: the 8-bit samples' file differs",
                   levels[l], chans[c]);
            same += nf == nq && memcmp(bf, bq, nf) == 0;
            free(bf), free(bq);
        }
    printf("  %d of 4 files the same from the floats and from their bytes\n", same);
    ckey_error err;
    char bad[512];
    snprintf(bad, sizeof bad, "%s/bad.png", dir);
    CHECK(ck_image_write_png_u8(bad, NULL, 3, W, H, 3, NULL, &err) == CKEY_ERR_INVALID_ARG);
    free(src);
    free(q);
    ck_remove_tree(dir);
}

#ifdef CK_HAVE_LIBDEFLATE
/* The chunks of the PNG b[0, n): how many IDATs, the largest and the last
 * one's length; 0 when the walk does not end at IEND. */
static int idat_chunks(const unsigned char *b, size_t n, size_t *largest, size_t *last) {
    size_t o = 8;
    int k = 0;
    *largest = *last = 0;
    while (o + 12 <= n) {
        const size_t len = (size_t)b[o] << 24 | (size_t)b[o + 1] << 16 | (size_t)b[o + 2] << 8 | b[o + 3];
        if (!memcmp(b + o + 4, "IEND", 4)) return o + 12 + len == n ? k : 0;
        if (!memcmp(b + o + 4, "IDAT", 4)) {
            k++;
            *last = len;
            if (len > *largest) *largest = len;
        }
        o += 12 + len;
    }
    return 0;
}
#endif

/* CK_PNG_LEVEL_RLE (with libdeflate: Up rows deflated by libdeflate, written
 * without libpng) decodes with libpng to exactly the samples of libpng's
 * files at level 3 and at CK_PNG_LEVEL_RLE_ZLIB: 1, 3 and 4 channels of 8
 * and 16 bits; 1 x 1, odd sizes, rows over 64 KiB (3 and 4 channels; gray's
 * rows are at most 64 KiB at the side cap) and a noisy image of several IDAT
 * chunks; floats rounded and truncated, NaN, negatives and values past 1;
 * from floats and from 8-bit samples; with one writer reused (sizes up and
 * down) and with none. */
static void test_png_rle_libdeflate(void) {
    static const struct { int w, h; float noise; } sizes[] = {
        {1, 1, 0.0f}, {37, 23, 0.02f}, {22000, 3, 0.02f}, {5, 2, 0.0f}, {640, 480, 1.0f}, {211, 67, 0.05f}};
    static const int chans[] = {1, 3, 4}, depths[] = {8, 16};
    const char *dir = make_tmpdir();
    REQUIRE(dir);
    ck_png_writer *pw = ck_png_writer_new();
    REQUIRE(pw);
    int files = 0, multi = 0;
    uint32_t r = 4242;
    for (size_t z = 0; z < LEN(sizes); z++)
        for (size_t c = 0; c < LEN(chans); c++)
            for (size_t d = 0; d < LEN(depths); d++) {
                const int W = sizes[z].w, H = sizes[z].h, C = chans[c], D = depths[d];
                const size_t n = (size_t)C * W * H;
                float *src = malloc(n * sizeof(float));
                uint8_t *u8 = malloc(n);
                REQUIRE(src && u8);
                for (size_t i = 0; i < n; i++) {
                    r = r * 1664525u + 1013904223u;
                    const float grain = sizes[z].noise * ((float)(r >> 8) / 16777216.0f - 0.5f);
                    src[i] = 0.25f + 0.5f * (float)(i % (size_t)W) / (float)W + grain;
                    if (i % 997 == 5) src[i] = i % 3 ? NAN : -0.25f;
                    if (i % 991 == 7) src[i] = 1.5f;
                    u8[i] = (uint8_t)ck_trunc_u8(src[i]);
                }
                const ck_png_quantize q = (z + c + d) % 2 ? CK_PNG_TRUNCATE : CK_PNG_ROUND;
                ck_png_writer *use = (z + c) % 2 ? pw : NULL;
                char p_new[512], p_zlib[512], p_l3[512], p_u8[512];
                snprintf(p_new, sizeof p_new, "%s/rle.png", dir);
                snprintf(p_zlib, sizeof p_zlib, "%s/rle-zlib.png", dir);
                snprintf(p_l3, sizeof p_l3, "%s/l3.png", dir);
                snprintf(p_u8, sizeof p_u8, "%s/u8.png", dir);
                ckey_error err;
                double io = -1;
                CHECKF(ck_png_writer_write(use, p_new, src, C, W, H, D, q, CK_PNG_LEVEL_RLE, &io, &err) == CKEY_OK,
                       "%s", err.message);
                CHECK(io >= 0);
                REQUIRE(ck_image_write_png_q(p_zlib, src, C, W, H, D, q, CK_PNG_LEVEL_RLE_ZLIB, &err) == CKEY_OK);
                REQUIRE(ck_image_write_png_q(p_l3, src, C, W, H, D, q, 3, &err) == CKEY_OK);
                const char *paths[3] = {p_new, p_zlib, p_l3};
                ckey_packed_image pk[3];
                size_t bytes[3] = {0};
                unsigned char *file[3];
                memset(pk, 0, sizeof pk);
                for (int k = 0; k < 3; k++) {
                    file[k] = ck_read_file(paths[k], &bytes[k]);
                    REQUIRE(file[k]);
                    CHECKF(ck_png_read_packed_memory_with(file[k], bytes[k], paths[k], CKEY_IMAGE_HINT, CK_PNG_LIBPNG,
                                                          &pk[k], &err) == CKEY_OK,
                           "%s: %s", paths[k], err.message);
                }
                const size_t pb = (size_t)W * H * C * (D / 8);
                for (int k = 1; k < 3; k++)
                    CHECKF(pk[0].width == W && pk[0].height == H && pk[0].channels == C &&
                               pk[0].type == pk[k].type && pk[k].channels == C &&
                               memcmp(pk[0].data, pk[k].data, pb) == 0,
                           "%d x %d, %d channels, %d bits: libpng reads other samples than from %s", W, H, C, D,
                           paths[k]);
#ifdef CK_HAVE_LIBDEFLATE
                /* not libpng's file: libdeflate's stream, in chunks of 1 MiB */
                CHECKF(bytes[0] != bytes[1] || memcmp(file[0], file[1], bytes[0]) != 0,
                       "%d x %d: the zlib Z_RLE file", W, H);
                size_t largest = 0, last = 0;
                const int idats = idat_chunks(file[0], bytes[0], &largest, &last);
                CHECKF(idats >= 1 && largest <= ((size_t)1 << 20) && (idats == 1 || largest == ((size_t)1 << 20)),
                       "%d x %d: %d IDAT chunks, largest %zu", W, H, idats, largest);
                multi += idats > 1;
#endif
                /* and from the 8-bit samples the floats truncate to: the file of the floats truncated */
                if (D == 8) {
                    char p_t[512];
                    snprintf(p_t, sizeof p_t, "%s/t.png", dir);
                    REQUIRE(ck_png_writer_write(use, p_t, src, C, W, H, 8, CK_PNG_TRUNCATE, CK_PNG_LEVEL_RLE, NULL,
                                                &err) == CKEY_OK);
                    CHECKF(ck_png_writer_write_u8(use ? NULL : pw, p_u8, u8, C, W, H, CK_PNG_LEVEL_RLE, NULL, &err) ==
                               CKEY_OK,
                           "%s", err.message);
                    size_t nt = 0, nu = 0;
                    unsigned char *bt = ck_read_file(p_t, &nt), *bu = ck_read_file(p_u8, &nu);
                    REQUIRE(bt && bu);
                    CHECKF(nt == nu && memcmp(bt, bu, nt) == 0, "%d x %d, %d channels: the 8-bit samples' file differs",
                           W, H, C);
                    free(bt), free(bu);
                }
                printf("  %5d x %-4d %d ch %2d-bit: %8zu bytes (zlib Z_RLE %8zu, level 3 %8zu)\n", W, H, C, D,
                       bytes[0], bytes[1], bytes[2]);
                for (int k = 0; k < 3; k++) {
                    ckey_packed_image_free(&pk[k]);
                    free(file[k]);
                }
                free(src);
                free(u8);
                files++;
            }
#ifdef CK_HAVE_LIBDEFLATE
    CHECKF(multi >= 1, "no image took several IDAT chunks");
#endif
    printf("  %d images the same samples at rle, rle through zlib and level 3; %d in several IDAT chunks\n", files,
           multi);
    ck_png_writer_free(pw);
    ck_remove_tree(dir);
}

/* A 4 x 3 hint of 16-bit RGBA, src [4, 12]: red and green 0, blue a ramp
 * over the pixels, alpha opaque; written to h.png (path[512]) in a new
 * temporary directory, which it returns (NULL on failure). */
static const char *opaque_alpha_hint(float src[4 * 12], char path[512]) {
    for (int i = 0; i < 12; i++) {
        src[i] = 0.0f;                     /* R */
        src[12 + i] = 0.0f;                /* G */
        src[24 + i] = (float)i / 11.0f;    /* B */
        src[36 + i] = 1.0f;                /* A: opaque */
    }
    const char *dir = make_tmpdir();
    if (!dir) return NULL;
    snprintf(path, 512, "%s/h.png", dir);
    ckey_error err;
    CHECKF(ckey_image_write_png(path, src, 4, 4, 3, 16, &err) == CKEY_OK, "%s", err.message);
    return dir;
}

/* A hint file with an opaque alpha channel uses its color instead. */
static void test_hint_opaque_alpha(void) {
    float src[4 * 12];
    char path[512];
    const char *dir = opaque_alpha_hint(src, path);
    REQUIRE(dir);
    ckey_error err;
    ckey_image img;
    REQUIRE(ckey_image_read_png(path, CKEY_IMAGE_HINT, &img, &err) == CKEY_OK);
    CHECK(img.has_alpha == 1);
    CHECK(ck_compare("opaque alpha -> blue", img.data, src + 24, 12, NULL) < 1e-5);
    ckey_image_free(&img);
    ck_remove_tree(dir);
}

/* ----------------------------------------------------------- the corpus */

static unsigned s8(unsigned x, unsigned y, unsigned c) { return (x * 37 + y * 11 + c * 71) & 255; }
static unsigned s16(unsigned x, unsigned y, unsigned c) {
    return (x * 4099 + y * 257 + c * 7919) & 65535;
}

static int read_corpus(const char *name, ckey_image_kind kind, ckey_image *img) {
    char path[512];
    snprintf(path, sizeof path, "fuzz/corpus/png/seed-%s", name);
    ckey_error err;
    ckey_status st = ckey_image_read_png(path, kind, img, &err);
    CHECKF(st == CKEY_OK, "%s", err.message);
    return st == CKEY_OK;
}

static void test_corpus_direct_color(void) {
    static const struct {
        const char *name;
        int w, h, channels, depth;
    } files[] = {
        {"gray8.png", 13, 7, 1, 8},    {"graya8.png", 13, 7, 2, 8},
        {"rgb8.png", 13, 7, 3, 8},     {"rgba8.png", 13, 7, 4, 8},
        {"gray16.png", 9, 5, 1, 16},   {"graya16.png", 9, 5, 2, 16},
        {"rgb16.png", 9, 5, 3, 16},    {"rgba16.png", 9, 5, 4, 16},
        {"rgb8_interlaced.png", 11, 10, 3, 8}, {"graya16_interlaced.png", 6, 9, 2, 16},
    };
    for (size_t k = 0; k < LEN(files); k++) {
        for (int kind = 0; kind < 2; kind++) {
            ckey_image img;
            if (!read_corpus(files[k].name, (ckey_image_kind)kind, &img)) continue;
            const int w = files[k].w, h = files[k].h, n = files[k].channels;
            CHECKF(img.width == w && img.height == h && img.bit_depth == files[k].depth, "%s",
                   files[k].name);
            CHECK(img.has_alpha == (n == 2 || n == 4));
            int bad = 0;
            for (int y = 0; y < h && img.width == w && img.height == h; y++) {
                for (int x = 0; x < w; x++) {
                    for (int c = 0; c < img.channels; c++) {
                        int sc; /* which file channel lands in output channel c */
                        if (kind == CKEY_IMAGE_RGB) sc = n <= 2 ? 0 : c;
                        else sc = (n == 2 || n == 4) ? n - 1 : (n == 3 ? 2 : 0);
                        float want = files[k].depth == 16
                                         ? (float)s16((unsigned)x, (unsigned)y, (unsigned)sc) / 65535.0f
                                         : (float)s8((unsigned)x, (unsigned)y, (unsigned)sc) / 255.0f;
                        float got = img.data[((size_t)c * h + y) * w + x];
                        if (got != want && !bad++)
                            fprintf(stderr, "  %s kind %d: (%d,%d,c%d) got %g want %g\n",
                                    files[k].name, kind, x, y, c, got, want);
                    }
                }
            }
            CHECKF(!bad, "%s: %d samples differ", files[k].name, bad);
            ckey_image_free(&img);
        }
    }
}

static void test_corpus_palette_and_low_depth(void) {
    ckey_image img;
    if (read_corpus("palette4_trns.png", CKEY_IMAGE_RGB, &img)) {
        CHECK(img.width == 7 && img.height == 6 && img.bit_depth == 4 && img.has_alpha);
        int bad = 0;
        for (int y = 0; y < 6; y++)
            for (int x = 0; x < 7; x++) {
                const int i = (x + 3 * y) % 16;
                const float want[3] = {(float)(16 * i) / 255.0f, (float)(255 - 16 * i) / 255.0f,
                                       (float)(8 * i) / 255.0f};
                for (int c = 0; c < 3; c++) bad += img.data[(c * 6 + y) * 7 + x] != want[c];
            }
        CHECKF(!bad, "palette rgb: %d samples differ", bad);
        ckey_image_free(&img);
    }
    if (read_corpus("palette4_trns.png", CKEY_IMAGE_HINT, &img)) {
        int bad = 0;
        for (int y = 0; y < 6; y++)
            for (int x = 0; x < 7; x++)
                bad += img.data[y * 7 + x] != (float)(17 * ((x + 3 * y) % 16)) / 255.0f;
        CHECKF(!bad, "palette tRNS as hint: %d samples differ", bad);
        ckey_image_free(&img);
    }
    if (read_corpus("palette8.png", CKEY_IMAGE_HINT, &img)) {
        CHECK(!img.has_alpha);
        /* no alpha: the blue channel, entry i -> 8i */
        CHECK(img.data[1] == 8.0f / 255.0f);
        ckey_image_free(&img);
    }
    if (read_corpus("gray1.png", CKEY_IMAGE_HINT, &img)) {
        CHECK(img.bit_depth == 1 && img.width == 10 && img.height == 3);
        int bad = 0;
        for (int y = 0; y < 3; y++)
            for (int x = 0; x < 10; x++) bad += img.data[y * 10 + x] != (float)((x + y) & 1);
        CHECKF(!bad, "1-bit gray: %d samples differ", bad);
        ckey_image_free(&img);
    }
    if (read_corpus("one_pixel.png", CKEY_IMAGE_RGB, &img)) {
        CHECK(img.width == 1 && img.height == 1 && img.data[2] == 200.0f / 255.0f);
        ckey_image_free(&img);
    }
}

/* -------------------------------------------------------- broken files */

/* ckey_image_read_packed's samples, as floats, against ckey_image_read's:
 * the same numbers for every file of the corpus, either kind. */
static int packed_allocs;
static void *count_alloc(void *user, size_t bytes) {
    (void)user;
    packed_allocs++;
    return malloc(bytes);
}
static void count_free(void *user, void *p) {
    (void)user;
    free(p);
}

static void test_packed_matches_float(void) {
    static const char *const names[] = {"gray1.png",    "gray8.png",  "gray16.png", "graya8.png",
                                        "graya16.png",  "graya16_interlaced.png", "palette4_trns.png",
                                        "palette8.png", "rgb8.png",   "rgb16.png",  "rgb8_interlaced.png",
                                        "rgba8.png",    "rgba16.png", "one_pixel.png"};
    ckey_packed_image pk;
    memset(&pk, 0, sizeof pk);
    pk.alloc = count_alloc;
    pk.release = count_free;
    for (size_t k = 0; k < LEN(names); k++)
        for (int kind = 0; kind < 2; kind++) {
            char path[512];
            snprintf(path, sizeof path, "fuzz/corpus/png/seed-%s", names[k]);
            ckey_error err;
            ckey_image img;
            REQUIRE(ckey_image_read(path, (ckey_image_kind)kind, &img, &err) == CKEY_OK);
            for (int again = 0; again < 2; again++) {
                const int allocs = packed_allocs;
                CHECKF(ckey_image_read_packed(path, (ckey_image_kind)kind, &pk, &err) == CKEY_OK, "%s", err.message);
                /* the block is reused when it holds the frame */
                if (again) CHECK(packed_allocs == allocs);
            }
            CHECK(pk.width == img.width && pk.height == img.height);
            CHECK(kind == CKEY_IMAGE_RGB ? pk.channels >= 3 : pk.hint_channel >= 0 && pk.hint_channel < pk.channels);
            const size_t n = (size_t)img.width * (size_t)img.height, C = (size_t)pk.channels;
            float *got = malloc((size_t)img.channels * n * sizeof(float));
            REQUIRE(got);
            for (int c = 0; c < img.channels; c++) {
                const size_t ch = kind == CKEY_IMAGE_RGB ? (size_t)c : (size_t)pk.hint_channel;
                for (size_t i = 0; i < n; i++)
                    got[(size_t)c * n + i] = pk.type == CKEY_SAMPLE_U16
                                                 ? (float)((const uint16_t *)pk.data)[i * C + ch] / 65535.0f
                                                 : (float)((const uint8_t *)pk.data)[i * C + ch] / 255.0f;
            }
            CHECKF(memcmp(got, img.data, (size_t)img.channels * n * sizeof(float)) == 0, "%s (%s): packed differs",
                   names[k], kind ? "hint" : "rgb");
            printf("  %-24s %-4s %d x %d, %d %s-bit channels%s: packed = float reads\n", names[k],
                   kind ? "hint" : "rgb", (int)img.width, (int)img.height, (int)pk.channels,
                   pk.type == CKEY_SAMPLE_U16 ? "16" : "8", kind && (C == 2 || C == 4) && pk.hint_channel == (int)C - 1 ? ", the alpha" : "");
            free(got);
            ckey_image_free(&img);
        }
    /* not a PNG, or not a regular file: nothing read, the caller reads floats */
    ckey_error err;
    CHECK(ckey_image_read_packed("fuzz/corpus/png/bad-not_png.png", CKEY_IMAGE_RGB, &pk, &err) ==
          CKEY_ERR_UNSUPPORTED);
    CHECK(ckey_image_read_packed("/dev/null", CKEY_IMAGE_RGB, &pk, &err) == CKEY_ERR_UNSUPPORTED);
    CHECK(ckey_image_read_packed("fuzz/corpus/png/bad-truncated.png", CKEY_IMAGE_RGB, &pk, &err) == CKEY_ERR_FORMAT);
    ckey_packed_image_free(&pk);
}

/* The opaque alpha rule in a packed hint: the colour's channel. */
static void test_packed_hint_opaque_alpha(void) {
    float src[4 * 12];
    char path[512];
    const char *dir = opaque_alpha_hint(src, path);
    REQUIRE(dir);
    ckey_error err;
    ckey_packed_image pk;
    memset(&pk, 0, sizeof pk);
    REQUIRE(ckey_image_read_packed(path, CKEY_IMAGE_HINT, &pk, &err) == CKEY_OK);
    CHECK(pk.channels == 4 && pk.hint_channel == 2 && pk.type == CKEY_SAMPLE_U16);
    src[36 + 5] = 0.5f; /* one translucent pixel: the alpha is the hint */
    CHECK(ckey_image_write_png(path, src, 4, 4, 3, 16, &err) == CKEY_OK);
    REQUIRE(ckey_image_read_packed(path, CKEY_IMAGE_HINT, &pk, &err) == CKEY_OK);
    CHECK(pk.hint_channel == 3);
    ckey_packed_image_free(&pk);
    ck_remove_tree(dir);
}

static void expect_error(const char *path, ckey_status want_st, const char *want_msg) {
    ckey_image img;
    ckey_error err;
    memset(&err, 0, sizeof err);
    ckey_status st = ckey_image_read_png(path, CKEY_IMAGE_RGB, &img, &err);
    printf("  %s -> %s: %s\n", path, ckey_status_name(st), err.message);
    CHECKF(st == want_st, "%s: got %s", path, ckey_status_name(st));
    CHECKF(strstr(err.message, want_msg) != NULL, "message '%s' lacks '%s'", err.message, want_msg);
    CHECKF(strstr(err.message, path) != NULL, "message '%s' does not name the file", err.message);
    CHECK(img.data == NULL && img.width == 0);
}

static void test_corpus_broken(void) {
    expect_error("fuzz/corpus/png/bad-truncated.png", CKEY_ERR_FORMAT, "truncated");
    expect_error("fuzz/corpus/png/bad-no_iend.png", CKEY_ERR_FORMAT, "truncated");
    expect_error("fuzz/corpus/png/bad-not_png.png", CKEY_ERR_FORMAT, "not a PNG file");
    expect_error("fuzz/corpus/png/bad-crc_error.png", CKEY_ERR_FORMAT, "CRC");
    expect_error("fuzz/corpus/png/bad-huge_header.png", CKEY_ERR_UNSUPPORTED, "limit");
    expect_error("fuzz/corpus/png/does_not_exist.png", CKEY_ERR_IO, "cannot open");
}

/* Standard CRC-32 (as PNG chunks use), to forge headers. */
static uint32_t crc32_png(const unsigned char *p, size_t n) {
    uint32_t c = 0xFFFFFFFFu;
    for (size_t i = 0; i < n; i++) {
        c ^= p[i];
        for (int k = 0; k < 8; k++) c = (c >> 1) ^ (0xEDB88320u & (0u - (c & 1u)));
    }
    return c ^ 0xFFFFFFFFu;
}

static void put32(unsigned char *p, uint32_t v) {
    p[0] = (unsigned char)(v >> 24);
    p[1] = (unsigned char)(v >> 16);
    p[2] = (unsigned char)(v >> 8);
    p[3] = (unsigned char)v;
}

/* signature + a valid IHDR of the given size, then nothing: the caps must
 * trigger from the header, before any allocation or IDAT read. */
static void test_huge_dimensions(void) {
    static const uint32_t dims[][2] = {{40000, 16}, {16, 32769}, {20000, 20000}, {0x7fffffff, 1}};
    static const char *what[] = {"side limit", "side limit", "pixels", "side limit"};
    const char *dir = make_tmpdir();
    REQUIRE(dir);
    for (size_t k = 0; k < LEN(dims); k++) {
        unsigned char buf[33] = {137, 80, 78, 71, 13, 10, 26, 10, 0, 0, 0, 13, 'I', 'H', 'D', 'R'};
        put32(buf + 16, dims[k][0]);
        put32(buf + 20, dims[k][1]);
        buf[24] = 8;  /* depth */
        buf[25] = 2;  /* RGB */
        put32(buf + 29, crc32_png(buf + 12, 17));
        char path[512];
        snprintf(path, sizeof path, "%s/huge%zu.png", dir, k);
        REQUIRE(write_bytes(path, buf, sizeof buf));
        expect_error(path, CKEY_ERR_UNSUPPORTED, what[k]);
    }
    /* within the caps, but far too small to hold the pixels: refused
     * before the 3 GiB of floats it claims would be allocated */
    unsigned char buf[33 + 14] = {137, 80, 78, 71, 13, 10, 26, 10, 0, 0, 0, 13, 'I', 'H', 'D', 'R'};
    put32(buf + 16, 16384);
    put32(buf + 20, 16384);
    buf[24] = 8;
    buf[25] = 2;
    put32(buf + 29, crc32_png(buf + 12, 17));
    unsigned char *idat = buf + 33;
    put32(idat, 2);
    memcpy(idat + 4, "IDAT\x78\x9c", 6);
    put32(idat + 10, crc32_png(idat + 4, 6));
    char path[512];
    snprintf(path, sizeof path, "%s/forged.png", dir);
    REQUIRE(write_bytes(path, buf, sizeof buf));
    expect_error(path, CKEY_ERR_FORMAT, "need at least");
    ck_remove_tree(dir);
}

static void test_truncations(void) {
    /* cut a valid file at every length: never OK, never a crash */
    size_t n = 0;
    unsigned char *good = ck_read_file("fuzz/corpus/png/seed-rgba16.png", &n);
    REQUIRE(good && n > 40);
    int ok = 0, truncated = 0;
    for (size_t len = 0; len < n; len++) {
        ckey_image img;
        ckey_error err;
        memset(&err, 0, sizeof err);
        ckey_status st = ck_image_read_png_memory(good, len, "cut.png", CKEY_IMAGE_HINT, &img, &err);
        ok += st == CKEY_OK;
        truncated += strstr(err.message, "cut.png: truncated") != NULL ||
                     strstr(err.message, "cut.png: empty file") != NULL;
        ckey_image_free(&img);
    }
    printf("  %zu cut lengths: %d accepted, %d reported truncated/empty\n", n, ok, truncated);
    CHECK(ok == 0);
    CHECK(truncated == (int)n);
    ckey_image img;
    ckey_error err;
    CHECK(ck_image_read_png_memory(good, n, "whole.png", CKEY_IMAGE_HINT, &img, &err) == CKEY_OK);
    ckey_image_free(&img);
    free(good);
}

static void test_empty_file(void) {
    const char *dir = make_tmpdir();
    REQUIRE(dir);
    char path[512];
    snprintf(path, sizeof path, "%s/empty.png", dir);
    REQUIRE(write_bytes(path, "", 0));
    expect_error(path, CKEY_ERR_FORMAT, "empty file");
    ck_remove_tree(dir);
}

/* ------------------------------------------------------------ writing */

static void test_atomic_write(void) {
    const char *dir = make_tmpdir();
    REQUIRE(dir);
    float px[6] = {0, 0.2f, 0.4f, 0.6f, 0.8f, 1};
    char path[512], tmp[600];
    ckey_error err;

    /* a new file, then replacing it: only the final name remains */
    snprintf(path, sizeof path, "%s/out.png", dir);
    char *lt = ckey_temp_path(path);
    snprintf(tmp, sizeof tmp, "%s", lt ? lt : "");
    free(lt);
    CHECK(ckey_image_write_png(path, px, 1, 3, 2, 8, &err) == CKEY_OK);
    CHECK(exists(path) && !exists(tmp));
    CHECK(ckey_image_write_png(path, px, 3, 2, 1, 16, &err) == CKEY_OK);
    CHECK(exists(path) && !exists(tmp));
    CHECK(ck_count_entries(dir) == 1);
    ckey_image img;
    REQUIRE(ckey_image_read_png(path, CKEY_IMAGE_RGB, &img, &err) == CKEY_OK);
    CHECK(img.width == 2 && img.height == 1 && img.bit_depth == 16);
    ckey_image_free(&img);

    /* the final name is a directory: the rename fails, the .tmp is removed */
    snprintf(path, sizeof path, "%s/adir.png", dir);
    lt = ckey_temp_path(path);
    snprintf(tmp, sizeof tmp, "%s", lt ? lt : "");
    free(lt);
    REQUIRE(mkdir(path, 0700) == 0);
    ckey_status st = ckey_image_write_png(path, px, 1, 3, 2, 16, &err);
    printf("  write onto a directory -> %s: %s\n", ckey_status_name(st), err.message);
    CHECK(st == CKEY_ERR_IO && strstr(err.message, path));
    CHECK(!exists(tmp));

    /* a missing directory: nothing is created */
    snprintf(path, sizeof path, "%s/missing/out.png", dir);
    st = ckey_image_write_png(path, px, 1, 3, 2, 16, &err);
    printf("  write into a missing dir -> %s: %s\n", ckey_status_name(st), err.message);
    CHECK(st == CKEY_ERR_IO && strstr(err.message, "cannot create"));
    CHECK(ck_count_entries(dir) == 2);

    /* bad arguments are refused before touching the disk */
    snprintf(path, sizeof path, "%s/bad.png", dir);
    CHECK(ckey_image_write_png(path, px, 2, 3, 1, 8, &err) == CKEY_ERR_INVALID_ARG);
    CHECK(ckey_image_write_png(path, px, 1, 3, 2, 12, &err) == CKEY_ERR_INVALID_ARG);
    CHECK(ckey_image_write_png(path, px, 1, 0, 2, 8, &err) == CKEY_ERR_INVALID_ARG);
    CHECK(ckey_image_write_png(path, NULL, 1, 3, 2, 8, &err) == CKEY_ERR_INVALID_ARG);
    CHECK(ck_count_entries(dir) == 2);
    ck_remove_tree(dir);
}

/* A full disk (/dev/full: every write fails with ENOSPC): the message says
 * so, in the system's words, not libpng's "Write Error". */
static void test_write_full_disk(void) {
    enum { W = 512, H = 384 }; /* a few MiB: libpng's own fwrite calls fail */
    float *px = malloc(sizeof(float) * 3 * W * H);
    REQUIRE(px);
    for (int i = 0; i < 3 * W * H; i++) px[i] = (float)((i * 2654435761u) % 65536) / 65535.0f;
    FILE *f = fopen("/dev/full", "wb");
    if (!f) {
        free(px);
        SKIP("no /dev/full");
    }
    /* libpng's writer, and CK_PNG_LEVEL_RLE's own (with libdeflate) */
    static const int levels[2] = {3, CK_PNG_LEVEL_RLE};
    for (int k = 0; k < 2; k++) {
        ckey_error err;
        memset(&err, 0, sizeof err);
        const ckey_status st = ck_png_write_stream(f, "/dev/full", px, 3, W, H, 16, CK_PNG_ROUND, levels[k], &err);
        printf("  level %d -> %s: %s\n", levels[k], ckey_status_name(st), err.message);
        CHECK(st == CKEY_ERR_IO);
        CHECKF(strstr(err.message, "/dev/full") && strstr(err.message, strerror(ENOSPC)), "%s", err.message);
        clearerr(f);
    }
    fclose(f);
    free(px);
}

int main(int argc, char **argv) {
    CK_TEST_NEEDS(CK_BUILT_PNG, "skip: libckey was built without libpng\n");
    static const ck_test_case cases[] = {
        {"roundtrip_gray16", test_roundtrip_gray16},
        {"roundtrip_gray8_as_rgb", test_roundtrip_gray8_as_rgb},
        {"roundtrip_rgb8", test_roundtrip_rgb8},
        {"roundtrip_rgb16", test_roundtrip_rgb16},
        {"roundtrip_rgb16_hint", test_roundtrip_rgb16_hint},
        {"roundtrip_rgba16_hint", test_roundtrip_rgba16_hint},
        {"roundtrip_rgba8_as_rgb", test_roundtrip_rgba8_as_rgb},
        {"quantize", test_quantize},
        {"hint_opaque_alpha", test_hint_opaque_alpha},
        {"png_levels_same_pixels", test_png_levels_same_pixels},
        {"png_u8_same_bytes", test_png_u8_same_bytes},
        {"png_rle_libdeflate", test_png_rle_libdeflate},
        {"corpus_direct_color", test_corpus_direct_color},
        {"corpus_palette_and_low_depth", test_corpus_palette_and_low_depth},
        {"corpus_broken", test_corpus_broken},
        {"packed_matches_float", test_packed_matches_float},
        {"packed_hint_opaque_alpha", test_packed_hint_opaque_alpha},
        {"huge_dimensions", test_huge_dimensions},
        {"truncations", test_truncations},
        {"empty_file", test_empty_file},
        {"atomic_write", test_atomic_write},
        {"write_full_disk", test_write_full_disk},
    };
    return ck_test_main(cases, (int)LEN(cases), argc, argv);
}
