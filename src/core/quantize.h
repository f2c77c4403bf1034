/* The roundings of the stored passes, one definition for the host and the
 * device (CK_HD): the HALF of the EXR passes and the 8 bits of the Comp PNG.
 * The device frame path converts with these on the GPU, the writers of float
 * passes on the CPU, so the files are the same byte for byte. */
#ifndef CK_CORE_QUANTIZE_H
#define CK_CORE_QUANTIZE_H

#include <stdint.h>

#include "core/hd.h"

/* Imath's imath_float_to_half, which OpenEXRCore's pack applies to FLOAT
 * input for a HALF channel, on the float's bits: round to nearest even,
 * overflow to Inf, NaN kept NaN with its payload's top bits (at least one
 * set). The hardware conversions make every NaN one canonical NaN. */
CK_HD uint16_t ck_half_of_bits(uint32_t ui) {
    uint16_t ret = (uint16_t)((ui >> 16) & 0x8000);
    ui &= 0x7fffffffu;
    if (ui >= 0x38800000u) {
        if (ui >= 0x7f800000u) { /* Inf, or NaN with at least one mantissa bit kept */
            ret |= 0x7c00;
            if (ui == 0x7f800000u) return ret;
            const uint32_t m = (ui & 0x7fffff) >> 13;
            return (uint16_t)(ret | m | (m == 0));
        }
        if (ui > 0x477fefffu) return (uint16_t)(ret | 0x7c00); /* rounds to Inf */
        ui -= 0x38000000u;
        return (uint16_t)(ret | ((ui + 0x00000fffu + ((ui >> 13) & 1)) >> 13));
    }
    if (ui < 0x33000001u) return ret; /* rounds to zero */
    const uint32_t e = ui >> 23, shift = 0x7e - e, m = 0x800000 | (ui & 0x7fffff);
    const uint32_t r = m << (32 - shift);
    ret |= (uint16_t)(m >> shift);
    if (r > 0x80000000u || (r == 0x80000000u && (ret & 1))) ++ret;
    return ret;
}

/* CK_PNG_TRUNCATE at 8 bits: numpy's (np.clip(v, 0, 1) * 255.0).astype(np.uint8)
 * on float32 (the product rounded to float32, then truncated; NaN 0). An
 * 8-bit sample reads back as its value / 255.0f, and that value truncates
 * to the same byte again. */
CK_HD unsigned ck_trunc_u8(float v) {
    if (!(v > 0.0f)) return 0;
    if (v >= 1.0f) return 255;
    const float p = v * 255.0f;
    return (unsigned)p;
}

#endif
