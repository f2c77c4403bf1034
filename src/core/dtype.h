/* Element types: of checkpoint tensors (all of them) and of device storage
 * (F32, F16, BF16: see src/cuda/dtype.cuh). */
#ifndef CK_DTYPE_H
#define CK_DTYPE_H

#include <stddef.h>

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

/* Bytes per element (src/ckpt/checkpoint.c). */
#ifdef __cplusplus
extern "C"
#endif
size_t ck_dtype_size(ck_dtype dt);

#endif
