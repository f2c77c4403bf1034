/* --hint auto: a rough alpha hint from the plate alone, for users without a
 * hint pass. The screen colour is estimated from the plate (the per-channel
 * median of the green-dominant pixels), each pixel's green excess
 * g - max(r, b) is compared with the screen's, the result is thresholded to
 * a core foreground mask, eroded (so the hint stays inside the subject, as a
 * coarse hint should), and blurred. */
#include <math.h>
#include <string.h>

#include "ckey_clip.h"
#include "core/core.h"

enum { BINS = 1024 };

static int bin_of(float v) {
    if (!(v > 0)) return 0; /* also NaN */
    if (v >= 1) return BINS - 1;
    return (int)(v * (BINS - 1) + 0.5f);
}

size_t ckey_auto_hint_scratch_bytes(int32_t width, int32_t height) {
    if (width < 1 || height < 1) return 0;
    return (size_t)width * height * sizeof(float) + 3 * BINS * sizeof(uint32_t);
}

/* min (erode) or mean (blur) over a (2r+1) window along rows then columns */
static void separable(float *img, float *tmp, int w, int h, int r, int erode) {
    for (int pass = 0; pass < 2; pass++) {
        const int n = pass == 0 ? w : h, lines = pass == 0 ? h : w;
        const int64_t step = pass == 0 ? 1 : w, lstep = pass == 0 ? w : 1;
        for (int l = 0; l < lines; l++) {
            float *src = img + (int64_t)l * lstep, *dst = tmp + (int64_t)l * lstep;
            double run = 0;
            for (int i = 0; i < n; i++) {
                if (erode) {
                    float m = src[(int64_t)i * step];
                    for (int j = CK_MAX(0, i - r); j <= CK_MIN(n - 1, i + r); j++) {
                        float v = src[(int64_t)j * step];
                        m = v < m ? v : m;
                    }
                    dst[(int64_t)i * step] = m;
                } else {
                    /* running sum over the clamped window */
                    if (i == 0) {
                        run = 0;
                        for (int j = 0; j <= CK_MIN(n - 1, r); j++) run += src[(int64_t)j * step];
                    } else {
                        if (i + r < n) run += src[(int64_t)(i + r) * step];
                        if (i - r - 1 >= 0) run -= src[(int64_t)(i - r - 1) * step];
                    }
                    const int cnt = CK_MIN(n - 1, i + r) - CK_MAX(0, i - r) + 1;
                    dst[(int64_t)i * step] = (float)(run / cnt);
                }
            }
        }
        memcpy(img, tmp, (size_t)w * h * sizeof(float));
    }
}

ckey_status ckey_auto_hint(const float *rgb, int32_t width, int32_t height, float *hint, void *scratch,
                           ckey_error *err) {
    if (!rgb || !hint || !scratch || width < 1 || height < 1)
        return ck_fail(err, CKEY_ERR_INVALID_ARG, "auto hint: invalid arguments");
    const int64_t n = (int64_t)width * height;
    const float *R = rgb, *G = rgb + n, *B = rgb + 2 * n;
    float *tmp = scratch;
    uint32_t *hist = (uint32_t *)(void *)(tmp + n);
    memset(hist, 0, 3 * BINS * sizeof(uint32_t));
    int64_t count = 0;
    for (int64_t i = 0; i < n; i++) {
        if (G[i] > R[i] && G[i] > B[i]) {
            hist[bin_of(R[i])]++;
            hist[BINS + bin_of(G[i])]++;
            hist[2 * BINS + bin_of(B[i])]++;
            count++;
        }
    }
    if (count < n / 100 + 1)
        return ck_fail(err, CKEY_ERR_INVALID_ARG,
                       "auto hint: no green screen found (%lld of %lld pixels are green-dominant)", (long long)count,
                       (long long)n);
    float screen[3];
    for (int c = 0; c < 3; c++) {
        int64_t acc = 0;
        int b = 0;
        while (b < BINS - 1 && acc + hist[c * BINS + b] <= count / 2) acc += hist[c * BINS + b++];
        screen[c] = (float)b / (BINS - 1);
    }
    const float ks = screen[1] - CK_MAX(screen[0], screen[2]);
    if (!(ks > 0.02f))
        return ck_fail(err, CKEY_ERR_INVALID_ARG, "auto hint: the screen colour (%.2f, %.2f, %.2f) is not green enough",
                       (double)screen[0], (double)screen[1], (double)screen[2]);
    /* core foreground: less than half the screen's green excess */
    for (int64_t i = 0; i < n; i++) {
        const float k = G[i] - CK_MAX(R[i], B[i]);
        hint[i] = k < 0.5f * ks ? 1.0f : 0.0f;
    }
    const int r = CK_MAX(1, CK_MIN(width, height) / 100);
    separable(hint, tmp, width, height, r, 1);     /* erode */
    separable(hint, tmp, width, height, 2 * r, 0); /* blur, twice: close to a Gaussian */
    separable(hint, tmp, width, height, 2 * r, 0);
    return CKEY_OK;
}
