/* Element types: of checkpoint tensors (all of them) and of device storage
 * (F32, F16, BF16: see src/cuda/dtype.cuh). */
#ifndef CK_DTYPE_H
#define CK_DTYPE_H

#include <stddef.h>
#include <stdint.h>

typedef enum ck_dtype {
    CK_F32 = 0,
    CK_F16,
    CK_BF16,
    CK_F64,
    CK_I64,   /* e.g. BatchNorm num_batches_tracked; never converted to float */
    CK_I32,
    CK_U8,
    CK_BOOL
} ck_dtype;

#ifdef __cplusplus
extern "C" {
#endif
/* Bytes per element. */
size_t ck_dtype_size(ck_dtype dt);
/* "float32", "float16", ... */
const char *ck_dtype_name(ck_dtype dt);
/* IEEE half and bfloat16 <-> float32, round to nearest even. */
float ck_f16_to_f32(uint16_t h);
float ck_bf16_to_f32(uint16_t h);
uint16_t ck_f32_to_f16(float f);
uint16_t ck_f32_to_bf16(float f);
#ifdef __cplusplus
}
#endif

#endif
