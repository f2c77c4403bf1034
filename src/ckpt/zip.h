/* Read-only view of a zip archive held in memory (internal to src/ckpt). Only
 * the central directory is trusted for sizes; every offset is checked against
 * the buffer. Entry data is exposed only for stored (uncompressed) entries,
 * which is what torch.save writes. */
#ifndef CK_IO_ZIP_H
#define CK_IO_ZIP_H

#include <stddef.h>
#include <stdint.h>

#include "ckey.h"
#include "ckpt/checkpoint.h"

typedef struct ck_zip_entry {
    const char *name;      /* points into the archive; not NUL-terminated */
    size_t name_len;
    uint16_t method;       /* 0 = stored */
    uint16_t flags;
    uint64_t size;         /* uncompressed */
    uint64_t comp_size;
    uint64_t data_offset;  /* first byte of the entry's (stored) data */
} ck_zip_entry;

typedef struct ck_zip {
    const uint8_t *base;
    size_t size;
    const char *label;     /* for messages; borrowed */
    ck_zip_entry *entries; /* central-directory order */
    size_t count;
    const ck_zip_entry **sorted; /* by name, for ck_zip_find */
} ck_zip;

/* Entry cap: a state dict has one storage per tensor plus a few records. */
#define CK_ZIP_MAX_ENTRIES ((size_t)CK_MAX_TENSORS * 2 + 16)

/* Parse the archive in data[0..size). On failure *z is left empty. */
ckey_status ck_zip_open(ck_zip *z, const uint8_t *data, size_t size, const char *label,
                        ckey_error *err);
void ck_zip_close(ck_zip *z);

/* Exact-name lookup; NULL when absent. */
const ck_zip_entry *ck_zip_find(const ck_zip *z, const char *name, size_t name_len);

/* The bytes of a stored entry; refuses compressed or encrypted ones. */
ckey_status ck_zip_data(const ck_zip *z, const ck_zip_entry *e, const uint8_t **data,
                        uint64_t *size, ckey_error *err);

#endif
