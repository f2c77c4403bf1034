/* ck_post_frame with the image on a CUDA device: the matte cleanup's
 * threshold, connected components, dilation and blur, and the per-pixel
 * despill / premultiply / comp, all on the stream. Same results as
 * ck_post_frame (the mask steps are integer-exact; the pixels agree within
 * float rounding). */
#include "core/core.h"
#include "cuda/kernels.h"
#include "pixel/pixel.h"
#include "pixel/post.h"

size_t ck_post_frame_cuda_device_bytes(int32_t h, int32_t w) { return (size_t)h * (size_t)w * 10; }

ckey_status ck_post_frame_cuda(const float *alpha, const float *fg, int32_t h, int32_t w, const ck_post_options *opt,
                               float *processed, float *comp, void *dev_scratch, void *stream, ckey_error *err) {
    const size_t n = (size_t)h * (size_t)w;
    if (!alpha || !fg || !opt || !processed || h < 1 || w < 1 || (opt->despeckle && !dev_scratch))
        return ck_fail(err, CKEY_ERR_INVALID_ARG, "post (cuda): bad arguments");
    if (opt->despeckle && opt->despeckle_mode != CK_DESPECKLE_OPENCV)
        return ck_fail(err, CKEY_ERR_UNSUPPORTED, "post (cuda): only the OpenCV despeckle runs on the device");
    float *pa = processed + 3 * n;
    ckey_status st;
    if (opt->despeckle) {
        /* device scratch: dist [n] int32 | sums [n] uint32 | mask [n] | mask_tmp [n] (10 bytes a pixel,
         * the 32-bit parts first so that they stay aligned); the components take dist and sums as their
         * labels and areas before the dilation and the blur */
        int32_t *dist = dev_scratch;
        uint32_t *sums = (uint32_t *)(dist + n);
        uint8_t *mask = (uint8_t *)(sums + n), *mask_tmp = mask + n;
        if ((st = ck_cuda_threshold_mask(alpha, (int64_t)n, CK_DESPECKLE_THRESHOLD, mask, stream, err)) ||
            (st = ck_cuda_components_filter(mask, h, w, opt->despeckle_area, dist, sums, stream, err)))
            return st;
        int32_t dx[2 * 64 + 1];
        ck_ellipse_halfwidths(CK_DESPECKLE_DILATION, dx);
        /* the blur as ck_gaussian_blur_u8: a 1-pixel axis is not blurred */
        const int32_t ks = 2 * CK_DESPECKLE_BLUR + 1, nx = w == 1 ? 1 : ks, ny = h == 1 ? 1 : ks;
        uint32_t kx[64], ky[64];
        if (ck_gaussian_kernel_q8(nx, 0.0, kx) || ck_gaussian_kernel_q8(ny, 0.0, ky))
            return ck_fail(err, CKEY_ERR_INTERNAL, "post (cuda): blur kernel");
        st = ck_cuda_matte_finish(mask, h, w, CK_DESPECKLE_DILATION, dx, nx, kx, ny, ky, alpha, mask_tmp, dist, sums,
                                  pa, stream, err);
        if (st) return st;
    } else if ((st = ck_cuda_copy_d2d(pa, alpha, n * sizeof(float), stream, err))) {
        return st;
    }
    const float bg0 = ck_srgb_to_linear1(CK_CHECKER_DARK), bg1 = ck_srgb_to_linear1(CK_CHECKER_LIGHT);
    return ck_cuda_post_pixels(fg, pa, h, w, opt->despill_strength, bg0, bg1, CK_CHECKER_SIZE, processed, comp, stream,
                               err);
}
