/* Little-endian loads from unaligned bytes (zip, pickle, safetensors all
 * store little-endian integers at arbitrary offsets). */
#ifndef CK_IO_LE_H
#define CK_IO_LE_H

#include <stdint.h>

static inline uint16_t ck_rd16(const uint8_t *p) {
    return (uint16_t)(p[0] | (p[1] << 8));
}

static inline uint32_t ck_rd32(const uint8_t *p) {
    return (uint32_t)p[0] | ((uint32_t)p[1] << 8) | ((uint32_t)p[2] << 16) | ((uint32_t)p[3] << 24);
}

static inline uint64_t ck_rd64(const uint8_t *p) {
    return (uint64_t)ck_rd32(p) | ((uint64_t)ck_rd32(p + 4) << 32);
}

#endif
