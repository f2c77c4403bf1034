/*
 * Per-frame post-processing after the network and the resize back to the
 * plate size, matching the official CPU/OpenCV path (`_postprocess_opencv` in
 * CorridorKeyModule/inference_engine.py and the numpy/cv2 helpers it calls in
 * core/color_utils.py):
 *
 *   processed_alpha = despeckle(alpha)      (optional, clean_matte_opencv)
 *   fg_despilled    = despill(fg, strength) (despill_opencv, "average" limit)
 *   fg_lin          = srgb_to_linear(fg_despilled)
 *   Processed       = [fg_lin * processed_alpha, processed_alpha]
 *   Comp            = linear_to_srgb(fg_lin * a + checker_lin * (1 - a))
 *
 * Upstream returns the raw resized alpha and fg (not despeckled, not
 * despilled) as the "alpha" and "fg" results that become the Matte/ and FG/
 * passes; ck_post_frame reproduces that.
 *
 * Images are planar float32 [C, H, W]. Nothing here allocates and nothing
 * keeps state (ck_post_options.pool lends threads): functions that need work memory take a caller-provided
 * `scratch` whose size a *_scratch_bytes() function gives. Scratch must be
 * aligned for int32_t (any malloc or arena block aligned to 4 bytes or more).
 *
 * Float arithmetic follows numpy's float32 evaluation order. The Makefile
 * allows FMA contraction, which only changes anything on targets built with
 * FMA enabled (-march); the default x86-64 build has none.
 */
#ifndef CK_POST_H
#define CK_POST_H

#include <stddef.h>
#include <stdint.h>

#include "ckey.h"

struct ck_pool;

/* Official parameters (process_frame defaults and _postprocess_opencv). */
#define CK_DESPECKLE_AREA_DEFAULT 400 /* despeckle_size */
#define CK_DESPECKLE_DILATION 25      /* ellipse radius: 51 x 51 kernel */
#define CK_DESPECKLE_BLUR 5           /* Gaussian ksize 2*5+1 = 11, sigma 0 -> 2.0 */
#define CK_DESPECKLE_THRESHOLD 0.5f   /* alpha > 0.5 is foreground */
#define CK_CHECKER_SIZE 128           /* comp checkerboard square, px */
#define CK_CHECKER_DARK 0.15f         /* sRGB value of squares with even (x/128 + y/128) */
#define CK_CHECKER_LIGHT 0.55f        /* sRGB value of the odd squares */

/* ----------------------------------------------------------------- despill */

/*
 * despill_opencv(green_limit_mode="average") in place on fg [3, plane]
 * (straight sRGB): limit = (r + b) / 2, spill = max(g - limit, 0),
 * g -= spill, r += spill / 2, b += spill / 2; for strength < 1 the result is
 * blended with the input as x * (1 - strength) + despilled * strength.
 * strength <= 0 leaves the image untouched (upstream returns early).
 */
void ck_despill(float *fg, size_t plane, double strength);
/* ck_despill on the pixels [begin, end) of the planes only (a thread's share). */
void ck_despill_span(float *fg, size_t plane, size_t begin, size_t end, double strength);

/* ---------------------------------------------------------------- despeckle */

/*
 * Connected components of a 0/non-0 byte mask [h, w] by two-pass union-find
 * labelling (connectivity 8 as upstream's cv2.connectedComponentsWithStats
 * call, or 4). Components with fewer than `min_area` pixels are cleared to 0,
 * the others set to 255, in place. Returns the number of components found
 * (before removal), or -1 on invalid arguments.
 * Scratch: ck_components_scratch_bytes(h, w) bytes.
 */
size_t ck_components_scratch_bytes(int32_t h, int32_t w);
int32_t ck_components_filter(uint8_t *mask, int32_t h, int32_t w, int connectivity,
                             int64_t min_area, void *scratch);
/* The same on the pool's threads: strips of rows labelled in parallel, then
 * joined along their edges (the components, the count and the mask do not
 * depend on the pool; NULL runs one strip on the caller). */
int32_t ck_components_filter_pool(uint8_t *mask, int32_t h, int32_t w, int connectivity, int64_t min_area,
                                  void *scratch, struct ck_pool *pool);

/*
 * Row half-widths of cv2.getStructuringElement(MORPH_ELLIPSE, (2r+1, 2r+1)):
 * kernel row i (0 .. 2r) covers columns [r - dx[i], r + dx[i]].
 */
void ck_ellipse_halfwidths(int32_t radius, int32_t *dx);

/*
 * cv2.dilate of a 0/255 byte mask with that ellipse (anchor at the centre;
 * pixels outside the image never contribute, as OpenCV's default dilate
 * border). `dist` is int32 scratch [h * w]. src and dst may be the same.
 */
void ck_dilate_ellipse(const uint8_t *src, uint8_t *dst, int32_t h, int32_t w,
                       int32_t radius, int32_t *dist);

/*
 * The 8-bit fixed-point Gaussian weights cv2.GaussianBlur uses for CV_8U
 * images (its bit-exact path), k[0 .. ksize-1] as Q8 integers summing to 256:
 * the outer taps are rounded with error diffusion and the centre takes the
 * rest. sigma <= 0 means OpenCV's default 0.3 * ((ksize - 1) * 0.5 - 1) + 0.8;
 * ksize 1, 3, 5 and 7 with sigma <= 0 use OpenCV's fixed tables.
 * Returns 0, or -1 when ksize is not odd and positive (or above 255).
 * Checked against cv2 5.0 for ksize 1 .. 15.
 */
int ck_gaussian_kernel_q8(int32_t ksize, double sigma, uint32_t *k);

/*
 * cv2.GaussianBlur(src_u8, (ksize, ksize), sigma) with the default
 * BORDER_REFLECT_101: separable integer convolution with the Q8 weights,
 * rounded half up once at the end ((sum + 2^15) >> 16), as OpenCV's
 * fixed-point path, which is exact so its pass order does not matter. A
 * 1-pixel-wide (tall) image uses a 1-tap kernel along that axis, as OpenCV.
 * `tmp` is uint32 scratch [h * w]. src and dst may be the same.
 */
void ck_gaussian_blur_u8(const uint8_t *src, uint8_t *dst, int32_t h, int32_t w,
                         int32_t ksize, double sigma, uint32_t *tmp);

/*
 * clean_matte_opencv: mask = alpha > 0.5; drop 8-connected components with
 * area < area_threshold; dilate by an ellipse of radius `dilation` (skipped
 * when <= 0); Gaussian blur with ksize 2 * blur_size + 1, sigma 0 (skipped
 * when <= 0); out = alpha * (mask / 255). out may alias alpha.
 * Official call: area_threshold 400, dilation 25, blur_size 5.
 */
size_t ck_clean_matte_scratch_bytes(int32_t h, int32_t w);
ckey_status ck_clean_matte(const float *alpha, float *out, int32_t h, int32_t w,
                           int64_t area_threshold, int32_t dilation, int32_t blur_size,
                           void *scratch);

/* ------------------------------------------------------ despeckle, torch */

/* clean_matte_torch's fixed parameters. */
#define CK_TORCH_DESPECKLE_THRESHOLD 0.25f /* alpha > 0.25 is foreground */
#define CK_TORCH_COMPONENT_DISTANCE 4      /* max_pool2d kernel 2 * 4 + 1 = 9 */

/*
 * clean_matte_torch (the GPU post-processing's despeckle), from
 * core/color_utils.py:
 *   mask = alpha > 0.25;
 *   components: every mask pixel starts with a distinct label (upstream:
 *     torch.randperm(h * w) + 1), then area_threshold / 20 (integer
 *     division) rounds of "each mask pixel takes the largest label within
 *     a 9 x 9 window" (synchronous; pixels outside the mask hold 0 and
 *     never change). Pixels within 4 px of each other thus join, and a
 *     component wider than the rounds can reach stays split into pieces;
 *   keep the pixels whose label occurs >= area_threshold times (label 0
 *     never);
 *   dilate (dilation / 2 rounds of a 5 x 5 max: a square of radius
 *     2 * (dilation / 2), clipped at the image edge);
 *   blur with torchvision's gaussian_blur, ksize 2 * blur_size + 1,
 *     sigma = ksize * 0.15 + 0.35, reflect border, in float;
 *   out = alpha * mask.
 * `labels` gives the starting labels ([h * w], a permutation of 1 .. h*w)
 * to reproduce one upstream run exactly; NULL uses ckey's fixed
 * pseudo-random permutation (ck_torch_labels). The rounds stop early once
 * a round changes nothing (the rest would be no-ops).
 * Scratch: ck_clean_matte_torch_scratch_bytes(h, w) bytes, int32-aligned.
 * out may alias alpha.
 */
size_t ck_clean_matte_torch_scratch_bytes(int32_t h, int32_t w);
ckey_status ck_clean_matte_torch(const float *alpha, float *out, int32_t h, int32_t w,
                                 int64_t area_threshold, int32_t dilation, int32_t blur_size,
                                 const uint32_t *labels, void *scratch);

/* ckey's stand-in for torch.randperm(n) + 1: a fixed pseudo-random
 * permutation of 1 .. n (a Feistel network on the next even power of two,
 * cycle-walked into range). label[i] for i in [0, n). */
uint32_t ck_torch_label(uint32_t i, uint32_t n);

/* torchvision's 1-D Gaussian kernel for gaussian_blur(ksize, sigma=None), in
 * float: k[0 .. ksize-1], summing to 1. -1 when ksize is not odd in 1..255. */
int ck_gaussian_kernel_torch(int32_t ksize, float *k);

/* ------------------------------------------------------------- comp pieces */

/* create_checkerboard(checker_size=128, color1=0.15, color2=0.55) value at a
 * pixel, in sRGB. */
float ck_checker_srgb(int32_t y, int32_t x);

/* composite_straight: fg * alpha + bg * (1 - alpha). */
float ck_composite_straight1(float fg, float bg, float alpha);

/* ----------------------------------------------------------- official frame */

typedef enum ck_despeckle_mode {
    CK_DESPECKLE_OPENCV = 0, /* clean_matte_opencv (ck_clean_matte) */
    CK_DESPECKLE_TORCH = 1   /* clean_matte_torch (ck_clean_matte_torch) */
} ck_despeckle_mode;

typedef struct ck_post_options {
    double despill_strength; /* 0 .. 1; official default 1.0 */
    int despeckle;           /* official default on (auto_despeckle=True) */
    int64_t despeckle_area;  /* official default 400 */
    ck_despeckle_mode despeckle_mode; /* default CK_DESPECKLE_OPENCV */
    /* Threads for the parts that split by rows (the mask, dilation, blur,
     * despill, premultiply, comp); NULL runs everything on the caller. The
     * results do not depend on it. */
    struct ck_pool *pool;
} ck_post_options;

/* The official process_frame defaults. */
void ck_post_options_default(ck_post_options *opt);

/* Bytes of scratch ck_post_frame needs: 0 when despeckle is off. */
size_t ck_post_frame_scratch_bytes(int32_t h, int32_t w, const ck_post_options *opt);

/*
 * The official post-processing of one frame, from alpha [h, w] (linear) and
 * fg [3, h, w] (straight sRGB) as the network + resize produced them:
 *   matte     [h, w]     (optional) Matte pass: the raw alpha, as upstream
 *   fg_out    [3, h, w]  (optional) FG pass: the raw fg, as upstream
 *   processed [4, h, w]  (required) linear premultiplied RGBA after
 *                        despeckle and despill
 *   comp      [3, h, w]  (optional) sRGB comp over the checkerboard
 * NULL skips an optional output. matte may alias alpha and fg_out may alias
 * fg; processed and comp must not overlap the inputs.
 */
ckey_status ck_post_frame(const float *alpha, const float *fg, int32_t h, int32_t w,
                          const ck_post_options *opt, float *matte, float *fg_out,
                          float *processed, float *comp, void *scratch);

/*
 * ck_post_frame on a CUDA device (post-cuda.c): alpha [h, w] and fg [3, h, w]
 * in device memory, processed [4, h, w] and comp [3, h, w] (or NULL) written
 * there; the Matte and FG passes are alpha and fg themselves. The OpenCV
 * despeckle only (CKEY_ERR_UNSUPPORTED for the torch one); its connected
 * components run on the device too (ck_cuda_components_filter), so opt->pool
 * is not used. Device scratch: ck_post_frame_cuda_device_bytes. Returns with
 * the stream's work queued, the host never waiting.
 */
size_t ck_post_frame_cuda_device_bytes(int32_t h, int32_t w);
ckey_status ck_post_frame_cuda(const float *alpha, const float *fg, int32_t h, int32_t w, const ck_post_options *opt,
                               float *processed, float *comp, void *dev_scratch, void *stream, ckey_error *err);
/* ckey_post_passes (ckey_clip.h) with its rows split over `pool`. */
struct ckey_post_options;
/* The public options as ck_post_options (no pool). */
void ck_post_options_from(const struct ckey_post_options *o, ck_post_options *po);
ckey_status ck_post_passes_pool(const float *alpha, const float *fg, int32_t width, int32_t height,
                                const struct ckey_post_options *o, float *processed, float *comp, void *scratch,
                                struct ck_pool *pool, ckey_error *err);

#endif
