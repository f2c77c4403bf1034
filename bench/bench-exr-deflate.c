/*
 * Which deflate for the EXR passes, and which for the Comp PNG (not a
 * test): a 4K HALF RGB FG pass --
 * examples/plate.png resized to 3840 x 2160 with Lanczos4 (the resize back
 * of every FG pass) plus grain at half resolution, so that it has detail at
 * the network's 2048 -- cut into the 16-line chunks of PXR24 and ZIP, each
 * transformed as the format does, then deflated by every candidate on one
 * thread. Prints the seconds and the bytes of the whole pass for each:
 * OpenEXR's own writer (zlib, the whole file) and libdeflate's levels.
 * Then the same image
 * as an 8-bit PNG (the Comp's encoder, truncating) at zlib levels with
 * libpng's adaptive filters, and Up-filtered: CK_PNG_LEVEL_RLE (with
 * libdeflate: its level 1, written without libpng, through one writer kept
 * from run to run as a shot's pass writers keep theirs) and zlib's Z_RLE
 * through libpng (CK_PNG_LEVEL_RLE_ZLIB, the default before).
 *
 *   build/bench/bench-exr-deflate [--grain 0.004] [--plate examples/plate.png] [--runs 3]
 */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "benchutil.h"
#include "ckey_media.h"
#include "media/exr.h"
#include "media/image.h"
#include "pixel/pixel.h"

#ifdef CK_HAVE_LIBDEFLATE
#include <libdeflate.h>
#endif

static double cpu_now(void) {
    struct timespec t;
    clock_gettime(CLOCK_THREAD_CPUTIME_ID, &t);
    return t.tv_sec + t.tv_nsec * 1e-9;
}

enum { W = 3840, H = 2160, LPC = 16, NCH = (H + LPC - 1) / LPC };

typedef struct chunks {
    uint8_t *data[NCH];
    size_t n[NCH], total;
} chunks;

int main(int argc, char **argv) {
    float grain = 0.004f;
    int runs = 3;
    const char *plate_path = "examples/plate.png";
    for (int i = 1; i + 1 < argc; i += 2) {
        if (!strcmp(argv[i], "--grain")) grain = (float)atof(argv[i + 1]);
        else if (!strcmp(argv[i], "--plate")) plate_path = argv[i + 1];
        else if (!strcmp(argv[i], "--runs")) runs = atoi(argv[i + 1]);
    }
    const size_t n = (size_t)W * H;
    ckey_error err;
    float *fg = bench_grainy_plate(plate_path, W, H, grain);
    uint16_t *halves = malloc(3 * n * sizeof(uint16_t));
    if (!fg || !halves) return 1;

    /* the file's chunks: lines of B, G, R halves, then each compression's transform */
    chunks raw, pxr, zip;
    memset(&raw, 0, sizeof raw), memset(&pxr, 0, sizeof pxr), memset(&zip, 0, sizeof zip);
    for (int c = 0; c < NCH; c++) {
        const int y0 = c * LPC, lines = H - y0 < LPC ? H - y0 : LPC;
        const size_t nb = (size_t)lines * 3 * W * 2;
        uint16_t *h16 = halves + (size_t)y0 * 3 * W;
        for (int l = 0; l < lines; l++)
            for (int k = 0; k < 3; k++)
                ck_half_from_float(fg + (size_t)(2 - k) * n + (size_t)(y0 + l) * W, h16 + ((size_t)l * 3 + k) * W, W);
        raw.data[c] = (uint8_t *)h16, raw.n[c] = nb, raw.total += nb;
        uint8_t *p = malloc(nb), *z = malloc(nb), *sp = malloc(nb);
        for (size_t run = 0; run < (size_t)lines * 3; run++) {
            const uint16_t *hv = h16 + run * W;
            uint8_t *hi = p + run * 2 * W, *lo = hi + W;
            unsigned prev = 0;
            for (int x = 0; x < W; x++) {
                const unsigned d = (unsigned)(hv[x] - prev) & 0xffffu;
                prev = hv[x];
                hi[x] = (uint8_t)(d >> 8), lo[x] = (uint8_t)d;
            }
        }
        const uint8_t *in = (const uint8_t *)h16;
        for (size_t i = 0; i < nb / 2; i++) sp[i] = in[2 * i], sp[nb / 2 + i] = in[2 * i + 1];
        z[0] = sp[0];
        for (size_t i = 1; i < nb; i++) z[i] = (uint8_t)(sp[i] - sp[i - 1] + 128);
        free(sp);
        pxr.data[c] = p, pxr.n[c] = nb, pxr.total += nb;
        zip.data[c] = z, zip.n[c] = nb, zip.total += nb;
    }
    printf("a 4K HALF RGB FG pass (%s resized by Lanczos4, grain %.3g): %zu bytes of halves, %d chunks\n",
           plate_path, (double)grain, raw.total, NCH);
#ifdef CK_HAVE_LIBDEFLATE
    uint8_t *out = malloc(3 * (size_t)LPC * W * 2);
    const chunks *tx[2] = {&pxr, &zip};
#endif
    static const char *const tname[2] = {"PXR24", "ZIP"};
    static const ckey_exr_compression comp[2] = {CKEY_EXR_PXR24, CKEY_EXR_ZIP};
    for (int t = 0; t < 2; t++) {
        printf("%s:\n", tname[t]);
        /* OpenEXR's own writer: pack, transform, zlib, write (one file) */
        static const int zl[2] = {6, 1};
        for (int k = 0; k < 2; k++) {
            char path[64];
            snprintf(path, sizeof path, "/tmp/bench-exr-deflate-%d.exr", (int)getpid());
            double best = 1e9;
            struct stat st;
            for (int rep = 0; rep < runs; rep++) {
                const double t0 = cpu_now();
                if (ck_exr_write_openexr(path, fg, 3, W, H, comp[t], zl[k], &err) != CKEY_OK) {
                    fprintf(stderr, "%s\n", err.message);
                    return 1;
                }
                const double dt = cpu_now() - t0;
                best = dt < best ? dt : best;
            }
            stat(path, &st);
            unlink(path);
            printf("  %-34s %.3f s  %6.2f MB (the whole file, OpenEXR's pack and writes included)\n",
                   k ? "OpenEXR's writer, zlib level 1" : "OpenEXR's writer, zlib level 6", best,
                   (double)st.st_size / 1e6);
        }
#ifdef CK_HAVE_LIBDEFLATE
        static const int lv[5] = {1, 2, 4, 6, 9};
        for (int k = 0; k < 5; k++) {
            struct libdeflate_compressor *cz = libdeflate_alloc_compressor(lv[k]);
            double best = 1e9;
            size_t tot = 0;
            for (int rep = 0; rep < runs; rep++) {
                const double t0 = cpu_now();
                tot = 0;
                for (int c = 0; c < NCH; c++) {
                    size_t m = libdeflate_zlib_compress(cz, tx[t]->data[c], tx[t]->n[c], out, tx[t]->n[c]);
                    tot += m ? m : tx[t]->n[c];
                }
                const double dt = cpu_now() - t0;
                best = dt < best ? dt : best;
            }
            libdeflate_free_compressor(cz);
            printf("  libdeflate level %-17d %.3f s  %6.2f MB\n", lv[k], best, (double)tot / 1e6);
        }
#endif
    }
    printf("the same image as an 8-bit RGB PNG (the Comp's encoder):\n");
    static const int png_levels[6] = {CK_PNG_LEVEL_RLE, CK_PNG_LEVEL_RLE_ZLIB, 1, 3, 6, 9};
    ck_png_writer *pw = ck_png_writer_new();
    if (!pw) return 1;
    for (int k = 0; k < 6; k++) {
        char path[64];
        snprintf(path, sizeof path, "/tmp/bench-exr-deflate-%d.png", (int)getpid());
        double best = 1e9;
        struct stat st;
        for (int rep = 0; rep < runs; rep++) {
            const double t0 = cpu_now();
            if (ck_png_writer_write(pw, path, fg, 3, W, H, 8, CK_PNG_TRUNCATE, png_levels[k], NULL, &err) !=
                CKEY_OK) {
                fprintf(stderr, "%s\n", err.message);
                return 1;
            }
            const double dt = cpu_now() - t0;
            best = dt < best ? dt : best;
        }
        stat(path, &st);
        unlink(path);
        if (png_levels[k] == CK_PNG_LEVEL_RLE)
#ifdef CK_HAVE_LIBDEFLATE
            printf("  %-34s %.3f s  %6.2f MB\n", "Up filter, libdeflate 1 (rle)", best, (double)st.st_size / 1e6);
#else
            printf("  %-34s %.3f s  %6.2f MB\n", "Up filter, runs only (rle)", best, (double)st.st_size / 1e6);
#endif
        else if (png_levels[k] == CK_PNG_LEVEL_RLE_ZLIB)
            printf("  %-34s %.3f s  %6.2f MB\n", "Up filter, zlib runs only", best, (double)st.st_size / 1e6);
        else
            printf("  zlib level %d, adaptive filters%*s %.3f s  %6.2f MB\n", png_levels[k], 6, "", best,
                   (double)st.st_size / 1e6);
    }
    ck_png_writer_free(pw);
    return 0;
}
