/* --hint auto: the rough chroma-key hint made from a plate alone. */
#include <stdlib.h>
#include <string.h>

#include "ckey_clip.h"
#include "ckey.h"
#include "core/core.h"
#include "support/testutil.h"

/* green screen (0.1, 0.75, 0.2) with a reddish square [16, 56) x [20, 60) */
static void synthetic(float *rgb, int w, int h) {
    const int64_t n = (int64_t)w * h;
    for (int y = 0; y < h; y++)
        for (int x = 0; x < w; x++) {
            const int in = x >= 20 && x < 60 && y >= 16 && y < 56;
            rgb[y * w + x] = in ? 0.8f : 0.1f;
            rgb[n + y * w + x] = in ? 0.3f : 0.75f;
            rgb[2 * n + y * w + x] = in ? 0.25f : 0.2f;
        }
}

static void test_square(void) {
    const int w = 96, h = 72;
    float *rgb = malloc(sizeof(float) * 3 * w * h), *hint = malloc(sizeof(float) * w * h);
    void *scratch = malloc(ckey_auto_hint_scratch_bytes(w, h));
    synthetic(rgb, w, h);
    ckey_error err;
    REQUIRE(ckey_auto_hint(rgb, w, h, hint, scratch, &err) == CKEY_OK);
    const float centre = hint[36 * w + 40], corner = hint[2 * w + 2], outside = hint[36 * w + 80];
    printf("  hint: centre %.3f, corner %.3f, right of the square %.3f\n", centre, corner, outside);
    CHECK(centre > 0.99f && corner < 0.01f && outside < 0.01f);
    /* eroded: the square's own edge pixel is below its centre, and values stay in [0, 1] */
    CHECK(hint[36 * w + 20] < 0.9f);
    for (int i = 0; i < w * h; i++) CHECK(hint[i] >= 0.0f && hint[i] <= 1.0f);
    free(rgb), free(hint), free(scratch);
}

static void test_no_screen(void) {
    const int w = 32, h = 32;
    float *rgb = malloc(sizeof(float) * 3 * w * h), *hint = malloc(sizeof(float) * w * h);
    void *scratch = malloc(ckey_auto_hint_scratch_bytes(w, h));
    for (int i = 0; i < 3 * w * h; i++) rgb[i] = i < w * h ? 0.7f : 0.2f; /* all red */
    ckey_error err;
    CHECK(ckey_auto_hint(rgb, w, h, hint, scratch, &err) == CKEY_ERR_INVALID_ARG);
    CHECK(strstr(err.message, "no green screen") != NULL);
    printf("  %s\n", err.message);
    CHECK(ckey_auto_hint(NULL, w, h, hint, scratch, &err) == CKEY_ERR_INVALID_ARG);
    CHECK(ckey_auto_hint_scratch_bytes(0, 5) == 0);
    free(rgb), free(hint), free(scratch);
}

/* On the bundled example the automatic hint agrees with the hand-made hint
 * where that one is decided (inside the subject / on the screen). */
static void test_example_plate(void) {
    ckey_image plate, hint;
    ckey_error err;
    if (ckey_image_read("examples/plate.png", CKEY_IMAGE_RGB, &plate, &err) != CKEY_OK) SKIP("%s", err.message);
    REQUIRE(ckey_image_read("examples/hint.png", CKEY_IMAGE_HINT, &hint, &err) == CKEY_OK);
    const int64_t n = (int64_t)plate.width * plate.height;
    float *mine = malloc(sizeof(float) * n);
    void *scratch = malloc(ckey_auto_hint_scratch_bytes(plate.width, plate.height));
    REQUIRE(ckey_auto_hint(plate.data, plate.width, plate.height, mine, scratch, &err) == CKEY_OK);
    int64_t fg = 0, bg = 0, fg_ok = 0, bg_ok = 0;
    for (int64_t i = 0; i < n; i++) {
        if (hint.data[i] > 0.95f) fg++, fg_ok += mine[i] > 0.5f;
        if (hint.data[i] < 0.05f) bg++, bg_ok += mine[i] < 0.5f;
    }
    printf("  agrees with examples/hint.png on %.1f%% of its foreground and %.1f%% of its background\n",
           100.0 * fg_ok / (fg ? fg : 1), 100.0 * bg_ok / (bg ? bg : 1));
    CHECK(fg > 0 && bg > 0 && fg_ok >= fg * 9 / 10 && bg_ok >= bg * 95 / 100);
    free(mine), free(scratch);
    ckey_image_free(&plate);
    ckey_image_free(&hint);
}

int main(int argc, char **argv) {
    static const ck_test_case cases[] = {
        {"square", test_square},
        {"no_screen", test_no_screen},
        {"example_plate", test_example_plate},
    };
    return ck_test_main(cases, (int)CK_ARRAY_LEN(cases), argc, argv);
}
