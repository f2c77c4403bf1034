/*
 * Writes the valid seeds of fuzz/corpus/exr with ckey_image_write_exr:
 *   cc -std=c11 -Iinclude tools/make-exr-corpus.c build/libckey.a $(LIBS of the Makefile) -o /tmp/mkexr
 *   /tmp/mkexr fuzz/corpus/exr
 * (bad-* seeds: seed-3ch-zip.exr cut in half, its tiled flag set, its data
 * window forged to 40000 wide.)
 */
#include <stdio.h>
#include <stdlib.h>
#include "ckey_media.h"
#include "ckey.h"
int main(int argc, char **argv) {
    const char *dir = argv[1];
    static const int ch[3] = {1, 3, 4};
    static const char *cn[3] = {"pxr24", "zip", "none"};
    ckey_error err;
    char path[512];
    for (int c = 0; c < 3; c++) for (int k = 0; k < 3; k++) {
        int w = 7 + k * 5, h = 18 + c;
        float *d = malloc(sizeof(float) * ch[c] * w * h);
        for (int i = 0; i < ch[c] * w * h; i++) d[i] = (float)((i * 37) % 101) / 50.0f - 0.5f;
        snprintf(path, sizeof path, "%s/seed-%dch-%s.exr", dir, ch[c], cn[k]);
        if (ckey_image_write_exr(path, d, ch[c], w, h, (ckey_exr_compression)k, &err)) { fprintf(stderr, "%s\n", err.message); return 1; }
        free(d);
    }
    return 0;
}
