/*
 * The PNG reader's fast path (src/media/png.c: libdeflate, for plain 8/16-bit
 * images) against libpng: every PNG of the corpora (fuzz/corpus/png,
 * examples/), files from our writer at each compression, and PNGs built here
 * with every filter type on every pixel size and the faults the fast path
 * must decline -- each read both ways, float and packed, as plate and hint:
 * the same status, the same message, the same bytes. Files the fast path must
 * take are checked to be taken, and those it must decline to be declined.
 */
#include <dirent.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "ckey_media.h"
#include "media/image.h"
#include "support/testutil.h"

#ifdef CK_HAVE_LIBDEFLATE
#include <libdeflate.h>
#endif

#define LEN(a) (sizeof(a) / sizeof((a)[0]))

enum { ANY_WAY = -1, DECLINED = 0, TAKEN = 1 };

static size_t packed_bytes(const ckey_packed_image *pk) {
    return (size_t)pk->width * (size_t)pk->height * (size_t)pk->channels * (pk->type == CKEY_SAMPLE_U16 ? 2u : 1u);
}

static int same_image(const ckey_image *a, const ckey_image *b) {
    return a->width == b->width && a->height == b->height && a->channels == b->channels &&
           a->bit_depth == b->bit_depth && a->has_alpha == b->has_alpha &&
           memcmp(a->data, b->data, (size_t)a->width * a->height * a->channels * sizeof(float)) == 0;
}

static int same_packed(const ckey_packed_image *a, const ckey_packed_image *b) {
    return a->width == b->width && a->height == b->height && a->channels == b->channels && a->type == b->type &&
           a->hint_channel == b->hint_channel && memcmp(a->data, b->data, packed_bytes(a)) == 0;
}

/*
 * Read `data` with libpng only, with the readers' choice and with the fast
 * path only, float and packed, as plate and hint. The first two must agree
 * in every respect; the fast path must agree wherever it decodes, and be
 * taken or declined as `expect` says. Returns whether libpng decoded it.
 */
static int compare_ways(const char *label, const unsigned char *data, size_t n, int expect) {
    int decoded = 0;
    for (int kind = CKEY_IMAGE_RGB; kind <= CKEY_IMAGE_HINT; kind++) {
        ckey_image lib, any, fast;
        ckey_error el, ea, ef;
        const ckey_status sl = ck_png_read_memory_with(data, n, label, (ckey_image_kind)kind, CK_PNG_LIBPNG, NULL, &lib, &el);
        const ckey_status sa = ck_png_read_memory_with(data, n, label, (ckey_image_kind)kind, CK_PNG_ANY, NULL, &any, &ea);
        const ckey_status sf = ck_png_read_memory_with(data, n, label, (ckey_image_kind)kind, CK_PNG_FAST, NULL, &fast, &ef);
        CHECKF(sl == sa, "%s kind %d: libpng %d, reader %d (%s / %s)", label, kind, sl, sa,
               sl ? el.message : "", sa ? ea.message : "");
        if (sl != CKEY_OK && sa != CKEY_OK)
            CHECKF(strcmp(el.message, ea.message) == 0, "%s: '%s' vs '%s'", label, el.message, ea.message);
        if (sl == CKEY_OK && sa == CKEY_OK) CHECKF(same_image(&lib, &any), "%s kind %d: samples differ", label, kind);
        if (sf == CKEY_OK) {
            CHECKF(sl == CKEY_OK, "%s kind %d: fast path decoded what libpng refuses (%s)", label, kind, el.message);
            if (sl == CKEY_OK) CHECKF(same_image(&lib, &fast), "%s kind %d: fast samples differ", label, kind);
        } else if (sf != CKEY_ERR_UNSUPPORTED || strstr(ef.message, "fast path") == NULL) {
            /* refused before a decoder is chosen (signature, size caps): libpng's error */
            CHECKF(sf == sl && strcmp(ef.message, el.message) == 0, "%s: '%s' vs '%s'", label, ef.message, el.message);
        }
        if (expect != ANY_WAY)
            CHECKF((sf == CKEY_OK) == (expect == TAKEN), "%s kind %d: fast path %s", label, kind,
                   sf == CKEY_OK ? "took it" : "declined it");
        decoded |= sl == CKEY_OK;
        ckey_image_free(&lib);
        ckey_image_free(&any);
        ckey_image_free(&fast);

        ckey_packed_image pl = {0}, pa = {0}, pf = {0};
        const ckey_status ql = ck_png_read_packed_memory_with(data, n, label, (ckey_image_kind)kind, CK_PNG_LIBPNG, &pl, &el);
        const ckey_status qa = ck_png_read_packed_memory_with(data, n, label, (ckey_image_kind)kind, CK_PNG_ANY, &pa, &ea);
        const ckey_status qf = ck_png_read_packed_memory_with(data, n, label, (ckey_image_kind)kind, CK_PNG_FAST, &pf, &ef);
        CHECKF(ql == qa, "%s kind %d packed: libpng %d, reader %d", label, kind, ql, qa);
        if (ql != CKEY_OK && qa != CKEY_OK)
            CHECKF(strcmp(el.message, ea.message) == 0, "%s packed: '%s' vs '%s'", label, el.message, ea.message);
        if (ql == CKEY_OK && qa == CKEY_OK) CHECKF(same_packed(&pl, &pa), "%s kind %d: packed samples differ", label, kind);
        if (qf == CKEY_OK) {
            CHECK(ql == CKEY_OK);
            if (ql == CKEY_OK) CHECKF(same_packed(&pl, &pf), "%s kind %d: fast packed samples differ", label, kind);
        }
        ckey_packed_image_free(&pl);
        ckey_packed_image_free(&pa);
        ckey_packed_image_free(&pf);
    }
    return decoded;
}

/* ------------------------------------------------------------ the corpora */

#ifdef CK_HAVE_LIBDEFLATE
static int plain_name(const char *name) {
    /* the corpus's seeds the fast path is for (tools/make_png_corpus.py's names) */
    static const char *const plain[] = {"seed-gray8.png", "seed-graya8.png", "seed-rgb8.png", "seed-rgba8.png",
                                        "seed-gray16.png", "seed-graya16.png", "seed-rgb16.png", "seed-rgba16.png",
                                        "seed-filters_rgb8.png", "seed-filters_rgba16.png", "seed-filters_graya8.png"};
    for (size_t k = 0; k < LEN(plain); k++)
        if (strcmp(name, plain[k]) == 0) return 1;
    return 0;
}
#endif

static void test_corpora(void) {
    static const char *const dirs[] = {"fuzz/corpus/png", "examples"};
    int files = 0, taken = 0;
    for (size_t d = 0; d < LEN(dirs); d++) {
        DIR *dir = opendir(dirs[d]);
        REQUIRE(dir);
        struct dirent *e;
        while ((e = readdir(dir))) {
            const size_t len = strlen(e->d_name);
            if (len < 4 || strcmp(e->d_name + len - 4, ".png") != 0) continue;
            char path[512];
            snprintf(path, sizeof path, "%s/%s", dirs[d], e->d_name);
            size_t n = 0;
            unsigned char *data = (unsigned char *)ck_read_file(path, &n);
            CHECKF(data, "%s unreadable", path);
            if (!data) continue;
            int expect = ANY_WAY;
#ifdef CK_HAVE_LIBDEFLATE
            if (plain_name(e->d_name)) expect = TAKEN;
            if (strstr(e->d_name, "interlaced") || strstr(e->d_name, "palette") || strcmp(e->d_name, "seed-gray1.png") == 0 ||
                strcmp(e->d_name, "seed-zlib_window.png") == 0)
                expect = DECLINED;
#endif
            compare_ways(path, data, n, expect);
            ckey_image img;
            ckey_error err;
            taken += ck_png_read_memory_with(data, n, path, CKEY_IMAGE_RGB, CK_PNG_FAST, NULL, &img, &err) == CKEY_OK;
            ckey_image_free(&img);
            files++;
            free(data);
        }
        closedir(dir);
    }
    printf("  %d PNG files, %d taken by the fast path\n", files, taken);
    CHECK(files >= 24);
}

/* Our writer's files: zlib levels with libpng's adaptive filters (every
 * filter type on a noisy image) and Up-filtered runs, 8 and 16 bits. */
static void test_writer_files(void) {
    char dir[256];
    REQUIRE(ck_make_temp_dir(dir, sizeof dir, "png-fast"));
    const int w = 203, h = 67;
    float *src = malloc((size_t)4 * w * h * sizeof *src);
    REQUIRE(src);
    uint32_t s = 12345;
    for (size_t i = 0; i < (size_t)4 * w * h; i++) {
        s = s * 1664525u + 1013904223u;
        const size_t x = i % (size_t)w, y = i / (size_t)w % (size_t)h;
        /* smooth ramps plus noise in some rows: the adaptive filters differ by row */
        src[i] = (float)((x + y) % 97) / 96.0f * 0.8f + (y % 3 ? (float)(s >> 8) / 16777216.0f * 0.2f : 0.0f);
    }
    static const int chans[] = {1, 3, 4}, depths[] = {8, 16}, levels[] = {0, 1, 3, 9, CK_PNG_LEVEL_RLE};
    for (size_t c = 0; c < LEN(chans); c++)
        for (size_t d = 0; d < LEN(depths); d++)
            for (size_t l = 0; l < LEN(levels); l++) {
                char path[512];
                snprintf(path, sizeof path, "%s/w%d-%d-%d.png", dir, chans[c], depths[d], levels[l]);
                ckey_error err;
                CHECK(ck_image_write_png_q(path, src, chans[c], w, h, depths[d], CK_PNG_ROUND, levels[l], &err) ==
                      CKEY_OK);
                size_t n = 0;
                unsigned char *data = (unsigned char *)ck_read_file(path, &n);
                REQUIRE(data);
#ifdef CK_HAVE_LIBDEFLATE
                CHECK(compare_ways(path, data, n, TAKEN));
#else
                CHECK(compare_ways(path, data, n, DECLINED));
#endif
                free(data);
                remove(path);
            }
    free(src);
    ck_remove_tree(dir);
}

#ifdef CK_HAVE_LIBDEFLATE
/* ------------------------------------------------------- PNGs built here */

typedef struct buf {
    unsigned char *p;
    size_t n, cap;
} buf;

static void put(buf *b, const void *data, size_t n) {
    if (b->n + n > b->cap) {
        b->cap = (b->n + n) * 2 + 64;
        b->p = realloc(b->p, b->cap);
        if (!b->p) abort();
    }
    memcpy(b->p + b->n, data, n);
    b->n += n;
}

static void put32(buf *b, uint32_t v) {
    const unsigned char q[4] = {(unsigned char)(v >> 24), (unsigned char)(v >> 16), (unsigned char)(v >> 8),
                                (unsigned char)v};
    put(b, q, 4);
}

static void chunk(buf *b, const char *type, const void *data, size_t n, int bad_crc) {
    put32(b, (uint32_t)n);
    const size_t at = b->n;
    put(b, type, 4);
    if (n) put(b, data, n);
    put32(b, (uint32_t)libdeflate_crc32(0, b->p + at, n + 4) ^ (bad_crc ? 1u : 0u));
}

/* What to build: the image, then a fault or an extra. */
typedef struct spec {
    uint32_t w, h;
    int color, depth;     /* IHDR */
    int interlace;
    int filter;           /* 0..4 every row, -1 each row its own (y % 5), 5+ that value in row 1 */
    size_t split;         /* IDAT chunk size (0: one chunk) */
    int rows_delta;       /* rows of data more (+) or fewer (-) than the image has */
    int trailing_zlib;    /* bytes after the zlib stream in IDAT */
    int window_bits;      /* the zlib header's window: 8..15 (0: libdeflate's, 15) */
    int bad_idat_crc, bad_text_crc, text_between_idats, trns, plte, unknown_critical, iend_data, no_iend;
    int after_iend;       /* garbage after IEND */
    int ancillary;        /* gAMA, sRGB, pHYs, tEXt, a private chunk before and after IDAT */
} spec;

static unsigned char *build(const spec *sp, size_t *out_n, uint32_t seed) {
    static const int chans[7] = {1, 0, 3, 1, 2, 0, 4};
    const size_t bpp = (size_t)chans[sp->color] * (size_t)(sp->depth / 8);
    const size_t rb = bpp * sp->w;
    const long rows = (long)sp->h + sp->rows_delta;
    const size_t raw_n = (size_t)(rows > 0 ? rows : 0) * (rb + 1);
    unsigned char *raw = malloc(raw_n + 1);
    if (!raw) abort();
    uint32_t s = seed;
    for (long y = 0; y < rows; y++) {
        unsigned char *r = raw + (size_t)y * (rb + 1);
        int f = sp->filter < 0 ? (int)(y % 5) : sp->filter;
        if (sp->filter >= 5) f = y == 1 ? sp->filter : 4;
        r[0] = (unsigned char)f;
        for (size_t i = 0; i < rb; i++) {
            s = s * 1103515245u + 12345u;
            /* small deltas mostly, so the predictions matter and it compresses */
            r[1 + i] = (unsigned char)((s >> 16) % 7 == 0 ? (s >> 8) : (s >> 24) % 5);
        }
    }
    struct libdeflate_compressor *c = libdeflate_alloc_compressor(6);
    if (!c) abort();
    const size_t zcap = libdeflate_zlib_compress_bound(c, raw_n) + (size_t)sp->trailing_zlib;
    unsigned char *z = malloc(zcap);
    if (!z) abort();
    size_t zn = libdeflate_zlib_compress(c, raw, raw_n, z, zcap);
    libdeflate_free_compressor(c);
    if (!zn) abort();
    if (sp->window_bits) { /* a declared window of 2^window_bits, the header's check recomputed */
        z[0] = (unsigned char)((sp->window_bits - 8) << 4 | 8);
        z[1] = (unsigned char)(z[1] & 0xe0);
        z[1] = (unsigned char)(z[1] + (31 - (z[0] * 256u + z[1]) % 31) % 31);
    }
    for (int k = 0; k < sp->trailing_zlib; k++) z[zn++] = (unsigned char)(k + 1);

    buf b = {0};
    static const unsigned char sig[8] = {137, 80, 78, 71, 13, 10, 26, 10};
    put(&b, sig, 8);
    unsigned char ihdr[13];
    for (int k = 0; k < 4; k++) ihdr[k] = (unsigned char)(sp->w >> (24 - 8 * k)), ihdr[4 + k] = (unsigned char)(sp->h >> (24 - 8 * k));
    ihdr[8] = (unsigned char)sp->depth;
    ihdr[9] = (unsigned char)sp->color;
    ihdr[10] = ihdr[11] = 0;
    ihdr[12] = (unsigned char)sp->interlace;
    chunk(&b, "IHDR", ihdr, 13, 0);
    if (sp->ancillary) {
        const unsigned char gama[4] = {0, 0, 0xb1, 0x8f}, srgb[1] = {0}, phys[9] = {0, 0, 11, 19, 0, 0, 11, 19, 1};
        chunk(&b, "gAMA", gama, 4, 0);
        chunk(&b, "sRGB", srgb, 1, 0);
        chunk(&b, "pHYs", phys, 9, 0);
        chunk(&b, "prVt", "anything", 8, 0);
    }
    if (sp->plte) {
        unsigned char pal[9] = {1, 2, 3, 4, 5, 6, 7, 8, 9};
        chunk(&b, "PLTE", pal, 9, 0);
    }
    if (sp->trns) {
        const unsigned char t[6] = {0, 1, 0, 2, 0, 3};
        chunk(&b, "tRNS", t, sp->color == 0 ? 2 : 6, 0);
    }
    if (sp->unknown_critical) chunk(&b, "CRIT", "x", 1, 0);
    chunk(&b, "tEXt", "Comment\0made here", 17, sp->bad_text_crc);
    const size_t step = sp->split ? sp->split : zn;
    for (size_t at = 0; at < zn; at += step) {
        const size_t len = zn - at < step ? zn - at : step;
        chunk(&b, "IDAT", z + at, len, sp->bad_idat_crc && at == 0);
        if (sp->text_between_idats && at == 0 && len < zn) chunk(&b, "tEXt", "Note\0between", 12, 0);
    }
    if (sp->ancillary) chunk(&b, "tEXt", "Title\0after the pixels", 22, 0);
    if (!sp->no_iend) chunk(&b, "IEND", "junk", sp->iend_data ? 4 : 0, 0);
    if (sp->after_iend) put(&b, "trailing bytes", 14);
    free(raw);
    free(z);
    *out_n = b.n;
    return b.p;
}

static void check_built(const char *what, const spec *sp, int expect, uint32_t seed) {
    size_t n = 0;
    unsigned char *png = build(sp, &n, seed);
    char label[160];
    snprintf(label, sizeof label, "%s (%ux%u color %d depth %d filter %d)", what, sp->w, sp->h, sp->color, sp->depth,
             sp->filter);
    compare_ways(label, png, n, expect);
    free(png);
}

/* Every filter type on every pixel size, odd widths, one and several IDATs. */
static void test_filters(void) {
    static const int colors[] = {0, 4, 2, 6}, depths[] = {8, 16}, filters[] = {0, 1, 2, 3, 4, -1};
    static const uint32_t widths[] = {1, 2, 3, 5, 17, 64, 131};
    uint32_t seed = 1;
    for (size_t c = 0; c < LEN(colors); c++)
        for (size_t d = 0; d < LEN(depths); d++)
            for (size_t f = 0; f < LEN(filters); f++)
                for (size_t k = 0; k < LEN(widths); k++) {
                    spec sp = {.w = widths[k], .h = 1 + widths[k] % 9 + 3, .color = colors[c], .depth = depths[d],
                               .filter = filters[f], .split = k % 2 ? 37 : 0};
                    check_built("filters", &sp, TAKEN, seed++);
                }
    /* larger, Paeth and Avg where the lanes' arithmetic could overflow */
    for (size_t c = 0; c < LEN(colors); c++) {
        spec sp = {.w = 1031, .h = 40, .color = colors[c], .depth = 8, .filter = -1, .split = 8192};
        check_built("large", &sp, TAKEN, seed++);
        sp.depth = 16;
        check_built("large", &sp, TAKEN, seed++);
    }
}

/* Ancillary chunks the fast path skips, and every case it must leave to
 * libpng: the same outcome either way. */
static void test_declines(void) {
    const spec base = {.w = 61, .h = 23, .color = 2, .depth = 8, .filter = -1, .split = 100};
    spec sp;
    uint32_t seed = 99;
#define CASE(what, field, value, expect)       \
    do {                                       \
        sp = base;                             \
        sp.field = value;                      \
        check_built(what, &sp, expect, seed++); \
    } while (0)
    CASE("ancillary chunks", ancillary, 1, TAKEN);
    CASE("bad CRC on an ancillary chunk", bad_text_crc, 1, TAKEN);
    CASE("bytes after IEND", after_iend, 1, TAKEN);
    CASE("bad IDAT CRC", bad_idat_crc, 1, DECLINED);
    CASE("filter type 5", filter, 5, DECLINED);
    CASE("filter type 255", filter, 255, DECLINED);
    CASE("a row short", rows_delta, -1, DECLINED);
    CASE("a row over", rows_delta, 1, DECLINED);
    CASE("bytes after the zlib stream", trailing_zlib, 3, DECLINED);
    CASE("a window smaller than the image", window_bits, 9, DECLINED);
    CASE("tRNS", trns, 1, DECLINED);
    CASE("PLTE", plte, 1, DECLINED);
    CASE("unknown critical chunk", unknown_critical, 1, DECLINED);
    CASE("IEND with data", iend_data, 1, DECLINED);
    CASE("no IEND", no_iend, 1, DECLINED);
    CASE("tEXt between IDATs", text_between_idats, 1, DECLINED);
    CASE("interlaced", interlace, 1, DECLINED);
    CASE("depth 4", depth, 4, DECLINED);
    CASE("palette", color, 3, DECLINED);
    CASE("color type 5", color, 5, DECLINED);
#undef CASE
    /* a small window the whole image fits in: taken */
    sp = (spec){.w = 7, .h = 5, .color = 0, .depth = 8, .filter = -1, .window_bits = 9};
    check_built("a window the image fits in", &sp, TAKEN, seed++);
}

/* The file readers (not the memory one) take the fast path too, and fall
 * back to libpng on the bytes they have read. */
static void test_file_readers(void) {
    char dir[256];
    REQUIRE(ck_make_temp_dir(dir, sizeof dir, "png-fast"));
    for (int trns = 0; trns <= 1; trns++) {
        const spec sp = {.w = 300, .h = 41, .color = 6, .depth = 16, .filter = -1, .split = 4096, .trns = trns};
        size_t n = 0;
        unsigned char *png = build(&sp, &n, 7u + (uint32_t)trns);
        char path[512];
        snprintf(path, sizeof path, "%s/f.png", dir);
        FILE *f = fopen(path, "wb");
        REQUIRE(f);
        CHECK(fwrite(png, 1, n, f) == n);
        CHECK(fclose(f) == 0);
        for (int kind = CKEY_IMAGE_RGB; kind <= CKEY_IMAGE_HINT; kind++) {
            ckey_image want, got;
            ckey_error err;
            REQUIRE(ck_png_read_memory_with(png, n, path, (ckey_image_kind)kind, CK_PNG_LIBPNG, NULL, &want, &err) == CKEY_OK);
            CHECK(ckey_image_read_png(path, (ckey_image_kind)kind, &got, &err) == CKEY_OK);
            CHECK(same_image(&want, &got));
            ckey_image_free(&got);
            CHECK(ckey_image_read(path, (ckey_image_kind)kind, &got, &err) == CKEY_OK);
            CHECK(same_image(&want, &got));
            ckey_image_free(&got);
            ckey_image_free(&want);
            ckey_packed_image pw = {0}, pg = {0};
            REQUIRE(ck_png_read_packed_memory_with(png, n, path, (ckey_image_kind)kind, CK_PNG_LIBPNG, &pw, &err) ==
                    CKEY_OK);
            CHECK(ckey_image_read_packed(path, (ckey_image_kind)kind, &pg, &err) == CKEY_OK);
            CHECK(same_packed(&pw, &pg));
            /* again into the same block */
            CHECK(ckey_image_read_packed(path, (ckey_image_kind)kind, &pg, &err) == CKEY_OK);
            CHECK(same_packed(&pw, &pg));
            ckey_packed_image_free(&pw);
            ckey_packed_image_free(&pg);
        }
        /* cut short: the same error from the file as from libpng */
        ckey_image img;
        ckey_error e1, e2;
        f = fopen(path, "wb");
        REQUIRE(f);
        CHECK(fwrite(png, 1, n - 20, f) == n - 20);
        CHECK(fclose(f) == 0);
        CHECK(ckey_image_read_png(path, CKEY_IMAGE_RGB, &img, &e1) == CKEY_ERR_FORMAT);
        CHECK(ck_png_read_memory_with(png, n - 20, path, CKEY_IMAGE_RGB, CK_PNG_LIBPNG, NULL, &img, &e2) == CKEY_ERR_FORMAT);
        CHECKF(strcmp(e1.message, e2.message) == 0, "'%s' vs '%s'", e1.message, e2.message);
        free(png);
        remove(path);
    }
    ck_remove_tree(dir);
}
#endif /* CK_HAVE_LIBDEFLATE */

int main(int argc, char **argv) {
    CK_TEST_NEEDS(CK_BUILT_PNG, "skip: libckey was built without libpng\n");
    static const ck_test_case cases[] = {
        {"corpora", test_corpora},
        {"writer_files", test_writer_files},
#ifdef CK_HAVE_LIBDEFLATE
        {"filters", test_filters},
        {"declines", test_declines},
        {"file_readers", test_file_readers},
#endif
    };
    return ck_test_main(cases, (int)LEN(cases), argc, argv);
}
