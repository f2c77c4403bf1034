/* Element types: sizes, names, and the 16-bit float conversions (round to
 * nearest even, NaN and Inf kept). */
#include <stdint.h>
#include <string.h>

#include "core/dtype.h"

size_t ck_dtype_size(ck_dtype dt) {
    switch (dt) {
    case CK_F32: return 4;
    case CK_F16: return 2;
    case CK_BF16: return 2;
    case CK_F64: return 8;
    case CK_I64: return 8;
    case CK_I32: return 4;
    case CK_U8: return 1;
    case CK_BOOL: return 1;
    }
    return 0;
}

const char *ck_dtype_name(ck_dtype dt) {
    switch (dt) {
    case CK_F32: return "float32";
    case CK_F16: return "float16";
    case CK_BF16: return "bfloat16";
    case CK_F64: return "float64";
    case CK_I64: return "int64";
    case CK_I32: return "int32";
    case CK_U8: return "uint8";
    case CK_BOOL: return "bool";
    }
    return "unknown";
}

static inline float bits_f32(uint32_t u) {
    float f;
    memcpy(&f, &u, sizeof f);
    return f;
}

static inline uint32_t f32_bits(float f) {
    uint32_t u;
    memcpy(&u, &f, sizeof u);
    return u;
}

float ck_f16_to_f32(uint16_t h) {
    uint32_t sign = (uint32_t)(h & 0x8000) << 16;
    uint32_t exp = (h >> 10) & 0x1f, mant = h & 0x3ff;
    if (exp == 0x1f) return bits_f32(sign | 0x7f800000u | (mant << 13)); /* inf, nan */
    if (exp == 0) {
        if (!mant) return bits_f32(sign);
        /* Subnormal: mant * 2^-24, exact in float32. */
        float v = (float)mant * 0x1p-24f;
        return sign ? -v : v;
    }
    return bits_f32(sign | ((exp + 112) << 23) | (mant << 13));
}

float ck_bf16_to_f32(uint16_t h) { return bits_f32((uint32_t)h << 16); }

uint16_t ck_f32_to_f16(float f) {
    uint32_t x = f32_bits(f);
    uint16_t sign = (uint16_t)((x >> 16) & 0x8000);
    uint32_t ax = x & 0x7fffffffu;
    if (ax >= 0x7f800000u) /* inf stays inf; nan stays a quiet nan */
        return (uint16_t)(sign | (ax > 0x7f800000u ? 0x7e00 | ((ax >> 13) & 0x3ff) : 0x7c00));
    if (ax >= 0x477ff000u) return (uint16_t)(sign | 0x7c00); /* >= 65520 rounds to inf */
    if (ax < 0x38800000u) {                                  /* below 2^-14: subnormal */
        if (ax <= 0x33000000u) return sign;                  /* <= 2^-25 rounds to zero */
        uint32_t e = ax >> 23, m = (ax & 0x7fffffu) | 0x800000u;
        uint32_t shift = 126 - e; /* 14..24 */
        uint32_t q = m >> shift, rem = m & ((1u << shift) - 1), half = 1u << (shift - 1);
        if (rem > half || (rem == half && (q & 1))) q++;
        return (uint16_t)(sign | q);
    }
    uint32_t h = (ax - 0x38000000u) >> 13, rem = ax & 0x1fff;
    if (rem > 0x1000 || (rem == 0x1000 && (h & 1))) h++; /* a carry bumps the exponent: right */
    return (uint16_t)(sign | h);
}

uint16_t ck_f32_to_bf16(float f) {
    uint32_t x = f32_bits(f);
    if ((x & 0x7fffffffu) > 0x7f800000u) return (uint16_t)((x >> 16) | 0x40); /* quiet nan */
    x += 0x7fffu + ((x >> 16) & 1);
    return (uint16_t)(x >> 16);
}
