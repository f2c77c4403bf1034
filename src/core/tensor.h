/* Typed views of memory: a tensor (activations a backend reads and writes)
 * and a weight (read-only), each its data and element type. The shape is the
 * op's arguments. Data may be host or device memory: only the backend that
 * owns it dereferences it. */
#ifndef CK_TENSOR_H
#define CK_TENSOR_H

#include <stdint.h>
#include <stdlib.h>

#include "core/dtype.h"

typedef struct ck_tensor {
    void *data;
    ck_dtype type;
} ck_tensor;

typedef struct ck_weight {
    const void *data; /* NULL: absent (e.g. proj_w where dim == dim_out) */
    ck_dtype type;
} ck_weight;

static inline ck_tensor ck_tensor_of(void *data, ck_dtype type) {
    ck_tensor t = {data, type};
    return t;
}

static inline ck_weight ck_weight_of(const void *data, ck_dtype type) {
    ck_weight w = {data, type};
    return w;
}

/* The tensor from element `off` of t on. */
static inline ck_tensor ck_tensor_at(ck_tensor t, int64_t off) {
    return ck_tensor_of(t.data ? (char *)t.data + (size_t)off * ck_dtype_size(t.type) : NULL, t.type);
}

/* fp32 data of a tensor or weight that must be fp32 (NULL stays NULL). A
 * wrong type is a programming error: abort rather than read 16-bit data as
 * floats. */
static inline float *ck_f32(ck_tensor t) {
    if (t.data && t.type != CK_F32) abort();
    return (float *)t.data;
}

static inline const float *ck_wf32(ck_weight w) {
    if (w.data && w.type != CK_F32) abort();
    return (const float *)w.data;
}

#endif
