/*
 * PNG decoding, libpng against the reader's fast path (src/media/png.c:
 * libdeflate, in-place unfilter), not a test: the plate of a 4K clip --
 * examples/plate.png resized to 3840 x 2160 with Lanczos4 plus grain at half
 * resolution -- written by ckey's own writer (ckey_image_write_png: zlib
 * level 3, libpng's adaptive filters) as 8-bit and 16-bit RGB, and a 4K
 * 8-bit gray hint; each decoded from memory on one thread, as floats
 * (ckey_image_read) and packed (ckey_image_read_packed), by each decoder.
 * The blocks are reused from decode to decode, as a clip's readers reuse them;
 * the first decode, which allocates them, is not timed. Prints the
 * milliseconds a decode (best of --runs) and libpng's / fast.
 *
 *   build/bench/bench-png-decode [--plate examples/plate.png] [--grain 0.004] [--runs 5]
 */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "benchutil.h"
#include "ckey_media.h"
#include "media/image.h"
#include "pixel/pixel.h"

enum { W = 3840, H = 2160 };

static unsigned char *read_whole(const char *path, size_t *size) {
    FILE *f = fopen(path, "rb");
    if (!f) return NULL;
    fseek(f, 0, SEEK_END);
    const long n = ftell(f);
    fseek(f, 0, SEEK_SET);
    unsigned char *p = n > 0 ? malloc((size_t)n) : NULL;
    if (p && fread(p, 1, (size_t)n, f) != (size_t)n) free(p), p = NULL;
    fclose(f);
    *size = p ? (size_t)n : 0;
    return p;
}

/* Best milliseconds of `runs` decodes of png by `dec`; 0 when it fails. */
static double time_decode(const unsigned char *png, size_t n, ckey_image_kind kind, int packed, ck_png_decoder dec,
                          int runs) {
    double best = 1e30;
    ckey_packed_image pk = {0};
    ckey_image img = {0}; /* its block reused, as a clip's reader does */
    for (int r = 0; r < runs + 1; r++) {
        ckey_error err;
        ck_pixels px = {img.data, img.capacity, NULL, 0};
        ckey_image out;
        const double t0 = ck_now();
        const ckey_status st = packed ? ck_png_read_packed_memory_with(png, n, "bench.png", kind, dec, &pk, &err)
                                      : ck_png_read_memory_with(png, n, "bench.png", kind, dec, &px, &out, &err);
        const double t = ck_now() - t0;
        if (!packed && st == CKEY_OK && out.data != img.data) {
            ckey_image_free(&img);
            img = out;
        }
        if (st != CKEY_OK) {
            fprintf(stderr, "%s\n", err.message);
            ckey_packed_image_free(&pk);
            ckey_image_free(&img);
            return 0;
        }
        if (r > 0 && t < best) best = t; /* the first allocates the blocks */
    }
    ckey_packed_image_free(&pk);
    ckey_image_free(&img);
    return best * 1e3;
}

int main(int argc, char **argv) {
    float grain = 0.004f;
    int runs = 5;
    const char *plate_path = "examples/plate.png";
    for (int i = 1; i + 1 < argc; i += 2) {
        if (!strcmp(argv[i], "--grain")) grain = (float)atof(argv[i + 1]);
        else if (!strcmp(argv[i], "--plate")) plate_path = argv[i + 1];
        else if (!strcmp(argv[i], "--runs")) runs = atoi(argv[i + 1]);
    }
    const size_t n = (size_t)W * H;
    ckey_error err;
    float *fg = bench_grainy_plate(plate_path, W, H, grain), *hint = malloc(n * sizeof(float));
    if (!fg || !hint) return 1;
    /* a hint: the plate's green minus the others, hard-edged */
    for (size_t i = 0; i < n; i++) hint[i] = fg[n + i] - (fg[i] > fg[2 * n + i] ? fg[i] : fg[2 * n + i]) > 0.1f ? 0.0f : 1.0f;

    char path[64];
    snprintf(path, sizeof path, "/tmp/bench-png-decode-%d.png", (int)getpid());
    printf("%s resized to %d x %d (Lanczos4, grain %.3g), written by ckey_image_write_png; decoded from memory,\n"
           "one thread, best of %d:\n",
           plate_path, W, H, (double)grain, runs);
    printf("%-22s %-7s %10s %10s %7s\n", "image", "read", "libpng ms", "fast ms", "ratio");
    static const struct {
        const char *name;
        int channels, depth;
        ckey_image_kind kind;
    } imgs[] = {{"RGB 8-bit plate", 3, 8, CKEY_IMAGE_RGB},
                {"RGB 16-bit plate", 3, 16, CKEY_IMAGE_RGB},
                {"gray 8-bit hint", 1, 8, CKEY_IMAGE_HINT}};
    int bad = 0;
    for (size_t k = 0; k < sizeof imgs / sizeof imgs[0]; k++) {
        if (ckey_image_write_png(path, imgs[k].channels == 1 ? hint : fg, imgs[k].channels, W, H, imgs[k].depth, &err) !=
            CKEY_OK) {
            fprintf(stderr, "%s\n", err.message);
            return 1;
        }
        size_t size = 0;
        unsigned char *png = read_whole(path, &size);
        if (!png) return 1;
        for (int packed = 0; packed <= 1; packed++) {
            const double lib = time_decode(png, size, imgs[k].kind, packed, CK_PNG_LIBPNG, runs);
            const double fast = time_decode(png, size, imgs[k].kind, packed, CK_PNG_FAST, runs);
            bad |= lib == 0 || fast == 0;
            printf("%-22s %-7s %10.1f %10.1f %6.2fx   (%zu bytes)\n", imgs[k].name, packed ? "packed" : "float", lib,
                   fast, fast > 0 ? lib / fast : 0.0, size);
        }
        free(png);
        unlink(path);
    }
    free(fg), free(hint);
    return bad;
}
