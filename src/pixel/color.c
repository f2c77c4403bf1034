/*
 * sRGB transfer function and ImageNet normalization, in float32 the way
 * PyTorch evaluates upstream color_utils on a float32 tensor: Python scalars
 * (12.92, 1.055, 0.055, the exponents, the thresholds) become float32
 * operands, and each operation rounds to float32.
 */
#include <math.h>

#include "pixel/pixel.h"

const float ck_imagenet_mean[3] = {0.485f, 0.456f, 0.406f};
const float ck_imagenet_std[3] = {0.229f, 0.224f, 0.225f};

float ck_linear_to_srgb1(float x) {
    /* clamp(min=0) first; written so that NaN passes through as in torch */
    if (x < 0.0f) x = 0.0f;
    if (x <= 0.0031308f) return x * 12.92f;
    return 1.055f * powf(x, (float)(1.0 / 2.4)) - 0.055f;
}

float ck_srgb_to_linear1(float x) {
    if (x < 0.0f) x = 0.0f;
    if (x <= 0.04045f) return x / 12.92f;
    return powf((x + 0.055f) / 1.055f, 2.4f);
}

void ck_linear_to_srgb(float *x, size_t n) {
    for (size_t i = 0; i < n; i++) x[i] = ck_linear_to_srgb1(x[i]);
}

void ck_srgb_to_linear(float *x, size_t n) {
    for (size_t i = 0; i < n; i++) x[i] = ck_srgb_to_linear1(x[i]);
}

void ck_imagenet_normalize(float *chw, size_t plane) {
    for (int c = 0; c < 3; c++) {
        float *p = chw + (size_t)c * plane;
        const float m = ck_imagenet_mean[c], s = ck_imagenet_std[c];
        for (size_t i = 0; i < plane; i++) p[i] = (p[i] - m) / s;
    }
}

void ckey_linear_to_srgb(float *data, size_t count) {
    if (data) ck_linear_to_srgb(data, count);
}
