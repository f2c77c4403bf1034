/*
 * Fast float approximations of exp, erf and GELU: the CPU ops' (src/cpu/ops.c)
 * and the CUDA 16-bit paths' GELU (src/cuda/rowbias.cuh, built for the device
 * and the host). One definition, so that the host tests (tests/test-core.c,
 * also under UBSan) check exactly the code the ops run. Valid C11 and CUDA
 * C++: CK_FASTMATH is CK_HD (core/hd.h).
 */
#ifndef CK_FASTMATH_H
#define CK_FASTMATH_H

#include <math.h>
#include <stdint.h>
#include <string.h>

#include "core/hd.h"

#define CK_FASTMATH CK_HD

/* exp(v), within ~1 ulp where the result is a normal float: n = round(v / ln 2)
 * by the 1.5 * 2^23 trick, r = v - n ln 2 (two-part ln 2), a degree-6
 * polynomial for e^r, times 2^n applied as two factors 2^n1 2^n2 built in the
 * exponent bits (n1 + n2 = n, each a normal float's exponent), so that the
 * product overflows to +Inf past ln FLT_MAX and underflows through the
 * denormals towards 0 as expf does. Defined for every float: v is first
 * clamped to [-104, 89], beyond which exp is 0 or +Inf in float anyway, so
 * exp(-Inf) = 0 and exp(+Inf) = +Inf; a NaN passes the clamps and the
 * polynomial and gives NaN. The exponent arithmetic is unsigned (it wraps
 * harmlessly on a NaN's bits; signed overflow or a shift into the sign bit
 * would be undefined). Branch-free so loops vectorize. */
CK_FASTMATH float ck_exp_approx(float v) {
    v = v < -104.0f ? -104.0f : v;
    v = v > 89.0f ? 89.0f : v;
    const float t = v * 1.44269504088896341f + 12582912.0f;
    const float nf = t - 12582912.0f;
    uint32_t u;
    memcpy(&u, &t, sizeof u);
    const uint32_t nb = u - 0x4B400000u + 256u; /* n + 256, in [106, 384] */
    const uint32_t n1 = nb >> 1, n2 = nb - n1;  /* 2^n = 2^(n1 - 128) 2^(n2 - 128) */
    float r = v - nf * 0.693145751953125f;
    r = r - nf * 1.428606765330187e-06f;
    const float p = 1.0f + r * (1.0f + r * (0.5f + r * (0.166666672f + r * (0.0416666679f +
                    r * (0.00833333377f + r * 0.00138888892f)))));
    const uint32_t b1 = (n1 - 1u) << 23, b2 = (n2 - 1u) << 23; /* biased exponents n_i - 128 + 127 */
    float s1, s2;
    memcpy(&s1, &b1, sizeof s1);
    memcpy(&s2, &b2, sizeof s2);
    return p * s1 * s2;
}

/* erf by Abramowitz & Stegun 7.1.26 (|error| < 1.5e-7), vectorizable;
 * erf(+-Inf) = +-1, NaN gives NaN. */
CK_FASTMATH float ck_erf_approx(float x) {
    float ax = x < 0 ? -x : x;
    float t = 1.0f / (1.0f + 0.3275911f * ax);
    float y = t * (0.254829592f + t * (-0.284496736f + t * (1.421413741f + t * (-1.453152027f + t * 1.061405429f))));
    float e = 1.0f - y * ck_exp_approx(-ax * ax);
    return x < 0 ? -e : e;
}

/* The CPU ops' GELU, 0.5 v (1 + erf(v / sqrt 2)): GELU(+Inf) = +Inf, NaN
 * gives NaN, and where 1 + erf rounds to 0 (v below about -5.9) the result
 * is 0, so that GELU(-Inf) is its limit 0 rather than -Inf * 0 = NaN. */
CK_FASTMATH float ck_gelu_approx(float v) {
    const float q = 1.0f + ck_erf_approx(v * 0.70710678118654752f);
    return q == 0.0f ? 0.0f : 0.5f * v * q;
}

/* The GELU 0.5 v (1 + erf(v / sqrt 2)) for the CUDA 16-bit storage paths, written as
 * GELU(v) = max(v, 0) - 0.5 |v| erfc(|v| / sqrt 2) (both signs at once),
 * with erfc(|v| / sqrt 2) / 2 = 2^P(a), a = min(|v|, 5.7), P a degree-5
 * polynomial fitted to log2 erfc - 1 (weighted by erfc, so that the error is
 * small where |v| erfc is large). Past |v| = 5.7 the term (under 4e-8) is
 * dropped: GELU = max(v, 0), which also gives the limits +Inf and 0 at
 * +-Inf, where the fma would give Inf - Inf = NaN and -Inf; a NaN passes
 * the comparison and the fma and gives NaN. The formula costs
 * one MUFU op (ex2) and 10 FMA / ALU-pipe ones (the |v| and its sign are
 * operand modifiers). One MUFU op, not the two (rcp, ex2) of Abramowitz &
 * Stegun 7.1.26 (erfc = t poly(t) exp(-z^2), t = 1 / (1 + p z)), because the
 * MUFU pipe (16 lanes an SM) bounds the fused fc1's epilogue
 * (linear-gelu-wgmma.cu): with two, ~14 us of stage 2's fc1; with one, that
 * fc1 takes 58.2 us instead of ~62 (H200, fp16). Max abs error over
 * [-12, 12] in steps of 1e-5 against double erf (host build: exact exp2, the
 * same FMAs): 1.2e-6, worst 0.54 of test-model's bound (0.5 |v| 1.5e-7 +
 * 8 ulp), far below the 16-bit rounding of the result (2^-11 relative). */
CK_FASTMATH float ck_exp2_approx(float x) {
#ifdef __CUDA_ARCH__
    float y;
    asm("ex2.approx.ftz.f32 %0, %1;" : "=f"(y) : "f"(x));
    return y;
#else
    return exp2f(x);
#endif
}
CK_FASTMATH float ck_gelu_fast(float v) {
    const float a = fminf(fabsf(v), 5.7f);
    float p = fmaf(a, -5.1885255380e-04f, 7.3871598579e-03f);
    p = fmaf(p, a, -5.2537918091e-02f);
    p = fmaf(p, a, -4.5927679539e-01f);
    p = fmaf(p, a, -1.1510831118e+00f);
    p = fmaf(p, a, -1.0000008345e+00f);
    const float g = fmaf(-fabsf(v), ck_exp2_approx(p), fmaxf(v, 0.f)); // 2^p = erfc(|v| / sqrt 2) / 2
    return fabsf(v) >= 5.7f ? fmaxf(v, 0.f) : g;
}

#endif
