/*
 * Checkpoint readers: torch.save zip archives (pickle-subset interpreter that
 * executes nothing) and safetensors. Both produce the same tensor table; the
 * tensors point into the read-only mapping of the file (or the caller's
 * memory for ck_checkpoint_open_memory), so nothing is copied until the model
 * converts each tensor to float32 exactly once.
 */
#ifndef CK_CHECKPOINT_H
#define CK_CHECKPOINT_H

#include <stddef.h>
#include <stdint.h>

#include "ckey.h"

#include "core/dtype.h"

#define CK_MAX_DIMS 8

typedef struct ck_tensor_info {
    const char *name;          /* key, `_orig_mod.` / `module.` prefixes removed
                                  (a nested `state_dict` dict is unwrapped) */
    ck_dtype dtype;
    int32_t ndim;
    int64_t shape[CK_MAX_DIMS];
    int64_t stride[CK_MAX_DIMS]; /* in elements; contiguous row-major for safetensors */
    const uint8_t *data;       /* first element (storage base + storage offset) */
    uint64_t numel;            /* product of shape (1 for a scalar) */
    /* Bytes available from `data` to the end of the storage: the reader has
     * already verified that every strided element lies inside it. */
    uint64_t avail_bytes;
} ck_tensor_info;

typedef struct ck_checkpoint ck_checkpoint;

/* Limits applied to untrusted files (defaults are generous for real models). */
#define CK_MAX_TENSORS 100000
#define CK_MAX_NAME_LEN 1024
#define CK_MAX_PICKLE_BYTES (64u << 20)
#define CK_MAX_SAFETENSORS_HEADER (100u << 20)

/*
 * Open and fully validate a checkpoint. The format is sniffed from the
 * content (zip magic "PK\3\4" -> torch zip; else an 8-byte little-endian
 * header length followed by '{' -> safetensors). Errors name `path` and the
 * problem (e.g. "x.pth: pickle opcode 0x93 (STACK_GLOBAL of os.system) is not
 * allowed in a state dict").
 */
ckey_status ck_checkpoint_open(const char *path, ck_checkpoint **out, ckey_error *err);

/* Same on a caller-owned buffer that must outlive the checkpoint (fuzzing). */
ckey_status ck_checkpoint_open_memory(const void *data, size_t size, const char *label,
                                      ck_checkpoint **out, ckey_error *err);

void ck_checkpoint_close(ck_checkpoint *c);

size_t ck_checkpoint_count(const ck_checkpoint *c);
const ck_tensor_info *ck_checkpoint_at(const ck_checkpoint *c, size_t i);
/* Exact-name lookup; NULL when absent. */
const ck_tensor_info *ck_checkpoint_find(const ck_checkpoint *c, const char *name);
/* safetensors __metadata__ value for `key` (NULL when absent / for .pth). */
const char *ck_checkpoint_meta(const ck_checkpoint *c, const char *key);
/* "pth" or "safetensors". */
const char *ck_checkpoint_format(const ck_checkpoint *c);

/* Convert any float tensor (f32/f16/bf16/f64, any strides) to dense
 * row-major float32 in `dst` (numel floats). Refuses integer dtypes. */
ckey_status ck_tensor_to_f32(const ck_tensor_info *t, float *dst, ckey_error *err);

/* Hint the OS that a tensor's pages are no longer needed (after conversion). */
void ck_checkpoint_drop_pages(ck_checkpoint *c, const ck_tensor_info *t);

/*
 * Write a safetensors file: n tensors (float32, dense), with optional
 * metadata key/value pairs. Writes to ckey_temp_path(path), then renames.
 */
typedef struct ck_st_entry {
    const char *name;
    int32_t ndim;
    int64_t shape[CK_MAX_DIMS];
    const float *data;
} ck_st_entry;

ckey_status ck_safetensors_write(const char *path, const ck_st_entry *entries, size_t n,
                                 const char *const *meta_kv /* key,value,...,NULL */,
                                 ckey_error *err);

#endif
