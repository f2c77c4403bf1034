/*
 * Read-only zip reader over a memory buffer. Follows the PKWARE APPNOTE for
 * the records torch.save (miniz) writes: local headers, central directory,
 * end-of-central-directory and its ZIP64 record/locator, ZIP64 extra fields.
 * The central directory is the authority for sizes and offsets; each local
 * header is still checked (signature, name) because the data offset depends
 * on its own name and extra lengths.
 */
#include "ckpt/zip.h"

#include <stdlib.h>
#include <string.h>

#include "core/core.h"
#include "ckpt/le.h"

#define SIG_LOCAL 0x04034b50u
#define SIG_CENTRAL 0x02014b50u
#define SIG_EOCD 0x06054b50u
#define SIG_EOCD64 0x06064b50u
#define SIG_LOCATOR64 0x07064b50u

#define EOCD_LEN 22u
#define LOCATOR64_LEN 20u
#define EOCD64_LEN 56u
#define CENTRAL_LEN 46u
#define LOCAL_LEN 30u
#define MAX_COMMENT 65535u

/* Names in messages are clipped so the message keeps its tail. */
#define NAME_FMT "'%.*s'"
#define NAME_ARG(p, n) (int)((n) > 120 ? 120 : (n)), (p)

/* a + b <= limit, without overflow. */
static int fits(uint64_t a, uint64_t b, uint64_t limit) {
    return a <= limit && b <= limit - a;
}

static int find_eocd(const uint8_t *p, size_t size, size_t *out) {
    if (size < EOCD_LEN) return 0;
    size_t pos = size - EOCD_LEN;
    size_t lowest = pos > MAX_COMMENT ? pos - MAX_COMMENT : 0;
    for (;;) {
        if (ck_rd32(p + pos) == SIG_EOCD) {
            size_t comment = ck_rd16(p + pos + 20);
            if (comment <= size - EOCD_LEN - pos) {
                *out = pos;
                return 1;
            }
        }
        if (pos == lowest) return 0;
        pos--;
    }
}

/* Apply a ZIP64 extended-information extra field (id 1) to the values that
 * the fixed record saturated at 0xFFFFFFFF, in the order the APPNOTE fixes. */
static int apply_zip64_extra(const uint8_t *x, size_t xlen, uint64_t *size, uint64_t *csize,
                             uint64_t *offset) {
    size_t i = 0;
    while (xlen - i >= 4) {
        uint16_t id = ck_rd16(x + i), len = ck_rd16(x + i + 2);
        i += 4;
        if (len > xlen - i) return 0;
        if (id == 1) {
            const uint8_t *f = x + i;
            size_t left = len;
            uint64_t *fields[3] = {size, csize, offset};
            for (int k = 0; k < 3; k++) {
                if (*fields[k] != 0xFFFFFFFFu) continue;
                if (left < 8) return 0;
                *fields[k] = ck_rd64(f);
                f += 8;
                left -= 8;
            }
            return 1;
        }
        i += len;
    }
    return 1;
}

static int cmp_entry(const void *a, const void *b) {
    const ck_zip_entry *x = *(const ck_zip_entry *const *)a;
    const ck_zip_entry *y = *(const ck_zip_entry *const *)b;
    size_t n = x->name_len < y->name_len ? x->name_len : y->name_len;
    int c = n ? memcmp(x->name, y->name, n) : 0;
    if (c) return c;
    return (x->name_len > y->name_len) - (x->name_len < y->name_len);
}

ckey_status ck_zip_open(ck_zip *z, const uint8_t *p, size_t size, const char *label,
                        ckey_error *err) {
    memset(z, 0, sizeof *z);
    size_t eocd;
    if (!find_eocd(p, size, &eocd))
        return ck_fail(err, CKEY_ERR_FORMAT,
                       "%s: no zip end-of-central-directory record (truncated or not a zip "
                       "archive)", label);

    uint64_t disk = ck_rd16(p + eocd + 4), cd_disk = ck_rd16(p + eocd + 6);
    uint64_t n_disk = ck_rd16(p + eocd + 8), n_total = ck_rd16(p + eocd + 10);
    uint64_t cd_size = ck_rd32(p + eocd + 12), cd_off = ck_rd32(p + eocd + 16);
    /* The central directory must end before the first trailing record. */
    uint64_t cd_limit = eocd;

    if (eocd >= LOCATOR64_LEN && ck_rd32(p + eocd - LOCATOR64_LEN) == SIG_LOCATOR64) {
        const uint8_t *loc = p + eocd - LOCATOR64_LEN;
        uint64_t rec = ck_rd64(loc + 8);
        if (ck_rd32(loc + 4) != 0 || ck_rd32(loc + 16) > 1)
            return ck_fail(err, CKEY_ERR_UNSUPPORTED,
                           "%s: multi-disk zip archives are not supported", label);
        if (!fits(rec, EOCD64_LEN, eocd - LOCATOR64_LEN) || ck_rd32(p + rec) != SIG_EOCD64)
            return ck_fail(err, CKEY_ERR_FORMAT,
                           "%s: zip64 end-of-central-directory record missing at offset %llu",
                           label, (unsigned long long)rec);
        const uint8_t *r = p + rec;
        disk = ck_rd32(r + 16);
        cd_disk = ck_rd32(r + 20);
        n_disk = ck_rd64(r + 24);
        n_total = ck_rd64(r + 32);
        cd_size = ck_rd64(r + 40);
        cd_off = ck_rd64(r + 48);
        cd_limit = rec;
    }
    if (disk != 0 || cd_disk != 0 || n_disk != n_total)
        return ck_fail(err, CKEY_ERR_UNSUPPORTED, "%s: multi-disk zip archives are not supported",
                       label);
    if (n_total > CK_ZIP_MAX_ENTRIES)
        return ck_fail(err, CKEY_ERR_UNSUPPORTED, "%s: zip archive has %llu entries (limit %zu)",
                       label, (unsigned long long)n_total, (size_t)CK_ZIP_MAX_ENTRIES);
    if (!fits(cd_off, cd_size, cd_limit))
        return ck_fail(err, CKEY_ERR_FORMAT,
                       "%s: zip central directory (offset %llu, %llu bytes) lies outside the "
                       "file (%zu bytes; truncated?)",
                       label, (unsigned long long)cd_off, (unsigned long long)cd_size, size);
    if (n_total > cd_size / CENTRAL_LEN)
        return ck_fail(err, CKEY_ERR_FORMAT,
                       "%s: zip central directory of %llu bytes cannot hold %llu entries", label,
                       (unsigned long long)cd_size, (unsigned long long)n_total);

    if (n_total) {
        z->entries = calloc((size_t)n_total, sizeof *z->entries);
        z->sorted = calloc((size_t)n_total, sizeof *z->sorted);
        if (!z->entries || !z->sorted) {
            ck_zip_close(z);
            return ck_fail(err, CKEY_ERR_NOMEM, "%s: out of memory for %llu zip entries", label,
                           (unsigned long long)n_total);
        }
    }
    z->base = p;
    z->size = size;
    z->label = label;

    const uint64_t cd_end = cd_off + cd_size;
    uint64_t pos = cd_off;
    ckey_status st = CKEY_OK;
    for (uint64_t i = 0; i < n_total; i++) {
        if (!fits(pos, CENTRAL_LEN, cd_end) || ck_rd32(p + pos) != SIG_CENTRAL) {
            st = ck_fail(err, CKEY_ERR_FORMAT,
                         "%s: zip central directory entry %llu is missing or corrupt (offset %llu)",
                         label, (unsigned long long)i, (unsigned long long)pos);
            break;
        }
        const uint8_t *c = p + pos;
        ck_zip_entry *e = &z->entries[i];
        e->flags = ck_rd16(c + 8);
        e->method = ck_rd16(c + 10);
        e->comp_size = ck_rd32(c + 20);
        e->size = ck_rd32(c + 24);
        size_t nlen = ck_rd16(c + 28), xlen = ck_rd16(c + 30), clen = ck_rd16(c + 32);
        uint64_t local = ck_rd32(c + 42);
        if (!fits(pos + CENTRAL_LEN, (uint64_t)nlen + xlen + clen, cd_end)) {
            st = ck_fail(err, CKEY_ERR_FORMAT,
                         "%s: zip central directory entry %llu runs past the directory", label,
                         (unsigned long long)i);
            break;
        }
        e->name = (const char *)c + CENTRAL_LEN;
        e->name_len = nlen;
        if (!apply_zip64_extra(c + CENTRAL_LEN + nlen, xlen, &e->size, &e->comp_size, &local)) {
            st = ck_fail(err, CKEY_ERR_FORMAT, "%s: zip entry " NAME_FMT " has a corrupt zip64 "
                         "extra field", label, NAME_ARG(e->name, nlen));
            break;
        }
        pos += CENTRAL_LEN + nlen + xlen + clen;

        if (e->flags & 1u) {
            st = ck_fail(err, CKEY_ERR_UNSUPPORTED, "%s: zip entry " NAME_FMT " is encrypted",
                         label, NAME_ARG(e->name, nlen));
            break;
        }
        if (e->method == 0 && e->comp_size != e->size) {
            st = ck_fail(err, CKEY_ERR_FORMAT,
                         "%s: stored zip entry " NAME_FMT " has compressed size %llu != size %llu",
                         label, NAME_ARG(e->name, nlen), (unsigned long long)e->comp_size,
                         (unsigned long long)e->size);
            break;
        }
        /* Local header: fixed part, the same name, then the data. */
        if (!fits(local, LOCAL_LEN, cd_off) || ck_rd32(p + local) != SIG_LOCAL) {
            st = ck_fail(err, CKEY_ERR_FORMAT,
                         "%s: zip entry " NAME_FMT ": no local header at offset %llu", label,
                         NAME_ARG(e->name, nlen), (unsigned long long)local);
            break;
        }
        size_t lnlen = ck_rd16(p + local + 26), lxlen = ck_rd16(p + local + 28);
        uint64_t data = local + LOCAL_LEN + lnlen + lxlen;
        if (lnlen != nlen || !fits(local + LOCAL_LEN, lnlen, cd_off) ||
            memcmp(p + local + LOCAL_LEN, e->name, nlen) != 0) {
            st = ck_fail(err, CKEY_ERR_FORMAT,
                         "%s: zip entry " NAME_FMT ": local header name does not match the "
                         "central directory", label, NAME_ARG(e->name, nlen));
            break;
        }
        if (!fits(data, e->comp_size, cd_off)) {
            st = ck_fail(err, CKEY_ERR_FORMAT,
                         "%s: zip entry " NAME_FMT " (%llu bytes at offset %llu) extends past the "
                         "end of the entry data (%llu bytes; truncated?)",
                         label, NAME_ARG(e->name, nlen), (unsigned long long)e->comp_size,
                         (unsigned long long)data, (unsigned long long)cd_off);
            break;
        }
        e->data_offset = data;
        z->sorted[i] = e;
    }
    if (st != CKEY_OK) {
        ck_zip_close(z);
        return st;
    }
    z->count = (size_t)n_total;
    if (z->count > 1) qsort(z->sorted, z->count, sizeof *z->sorted, cmp_entry);
    /* Two entries of one name would make lookups ambiguous. */
    for (size_t i = 1; i < z->count; i++) {
        if (cmp_entry(&z->sorted[i - 1], &z->sorted[i]) == 0) {
            const ck_zip_entry *e = z->sorted[i];
            st = ck_fail(err, CKEY_ERR_FORMAT, "%s: zip entry " NAME_FMT " appears twice", label,
                         NAME_ARG(e->name, e->name_len));
            ck_zip_close(z);
            return st;
        }
    }
    return CKEY_OK;
}

void ck_zip_close(ck_zip *z) {
    if (!z) return;
    free(z->entries);
    free(z->sorted);
    memset(z, 0, sizeof *z);
}

const ck_zip_entry *ck_zip_find(const ck_zip *z, const char *name, size_t name_len) {
    ck_zip_entry key = {.name = name, .name_len = name_len};
    const ck_zip_entry *kp = &key;
    if (!z->count) return NULL;
    const ck_zip_entry **hit = bsearch(&kp, z->sorted, z->count, sizeof *z->sorted, cmp_entry);
    return hit ? *hit : NULL;
}

ckey_status ck_zip_data(const ck_zip *z, const ck_zip_entry *e, const uint8_t **data,
                        uint64_t *size, ckey_error *err) {
    if (e->method != 0)
        return ck_fail(err, CKEY_ERR_UNSUPPORTED,
                       "%s: zip entry " NAME_FMT " is compressed (method %u); ckey reads only "
                       "stored entries, as torch.save writes them",
                       z->label, NAME_ARG(e->name, e->name_len), (unsigned)e->method);
    *data = z->base + e->data_offset;
    *size = e->size;
    return CKEY_OK;
}
