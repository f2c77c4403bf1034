/* Shared between the checkpoint readers (internal to src/ckpt). */
#ifndef CK_IO_CKPT_INTERNAL_H
#define CK_IO_CKPT_INTERNAL_H

#include <stddef.h>
#include <stdint.h>

#include "ckpt/checkpoint.h"

/* The tensors a reader found, in file order. The table owns each name. */
typedef struct ck_tensor_table {
    ck_tensor_info *items;
    size_t count, cap;
} ck_tensor_table;

/*
 * Append a tensor whose metadata the reader has fully validated. The name is
 * copied after removing the `_orig_mod.` (torch.compile) and `module.`
 * (DataParallel) prefixes; it must be non-empty, NUL-free and at most
 * CK_MAX_NAME_LEN bytes. Duplicates are found later, when the table is sorted.
 */
ckey_status ck_table_add(ck_tensor_table *t, const char *name, size_t name_len,
                         const ck_tensor_info *info, const char *label, ckey_error *err);
void ck_table_free(ck_tensor_table *t);

/* safetensors __metadata__: owned key/value strings. */
typedef struct ck_meta_table {
    char **kv; /* key0, value0, key1, value1, ... */
    size_t count; /* pairs */
} ck_meta_table;

void ck_meta_free(ck_meta_table *m);

/* Parse and validate a whole safetensors file held in data[0..size). */
ckey_status ck_safetensors_parse(const uint8_t *data, size_t size, const char *label,
                                 ck_tensor_table *tab, ck_meta_table *meta, ckey_error *err);

/* Overflow-checked 64-bit helpers: return 0 on overflow. */
static inline int ck_mul_u64(uint64_t a, uint64_t b, uint64_t *out) {
    if (a != 0 && b > UINT64_MAX / a) return 0;
    *out = a * b;
    return 1;
}

static inline int ck_add_u64(uint64_t a, uint64_t b, uint64_t *out) {
    if (b > UINT64_MAX - a) return 0;
    *out = a + b;
    return 1;
}

#endif
