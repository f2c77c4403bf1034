/*
 * Checkpoint front end: maps the file, sniffs the format, runs the torch-zip
 * or safetensors reader, and owns the resulting tensor table; converts
 * tensors to float32.
 */
#include "ckpt/checkpoint.h"

#include <errno.h>
#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include "core/core.h"
#include "ckpt/internal.h"
#include "ckpt/pickle.h"
#include "ckpt/zip.h"

#if defined(__BYTE_ORDER__) && __BYTE_ORDER__ != __ORDER_LITTLE_ENDIAN__
#error "ckey reads little-endian checkpoint data in place: big-endian hosts are not supported"
#endif

/* Files above this are refused before mapping (the official model is ~0.4 GiB). */
#define CK_MAX_CHECKPOINT_BYTES ((uint64_t)16 << 30)

struct ck_checkpoint {
    char *label;
    const uint8_t *base;
    size_t size;
    void *map; /* non-NULL when we mmapped the file */
    size_t map_size;
    size_t page;
    const char *format;
    ck_tensor_table tab;
    const ck_tensor_info **sorted; /* by name, for ck_checkpoint_find */
    ck_meta_table meta;
};

static int cmp_info(const void *a, const void *b) {
    return strcmp((*(const ck_tensor_info *const *)a)->name, (*(const ck_tensor_info *const *)b)->name);
}

/* --------------------------------------------------------------- torch zip */

typedef struct pth_ctx {
    const ck_zip *zip;
    const char *prefix; /* the archive directory, e.g. "archive/" */
    size_t prefix_len;
    const char *label;
} pth_ctx;

static ckey_status pth_storage(void *vctx, const char *key, size_t key_len, const uint8_t **data,
                               uint64_t *size, ckey_error *err) {
    const pth_ctx *c = vctx;
    char name[512];
    int kl = (int)(key_len > 64 ? 64 : key_len);
    if (c->prefix_len + 5 + key_len >= sizeof name || memchr(key, 0, key_len))
        return ck_fail(err, CKEY_ERR_FORMAT, "%s: storage key '%.*s' is malformed", c->label, kl,
                       key);
    memcpy(name, c->prefix, c->prefix_len);
    memcpy(name + c->prefix_len, "data/", 5);
    memcpy(name + c->prefix_len + 5, key, key_len);
    size_t n = c->prefix_len + 5 + key_len;
    const ck_zip_entry *e = ck_zip_find(c->zip, name, n);
    if (!e)
        return ck_fail(err, CKEY_ERR_FORMAT,
                       "%s: storage '%.*s' named by the pickle is missing from the archive (no "
                       "entry '%.*s')", c->label, kl, key, (int)(n > 200 ? 200 : n), name);
    return ck_zip_data(c->zip, e, data, size, err);
}

static ckey_status pth_parse(const uint8_t *p, size_t size, const char *label,
                             ck_tensor_table *tab, ckey_error *err) {
    ck_zip zip;
    ckey_status st = ck_zip_open(&zip, p, size, label, err);
    if (st) return st;

    /* The pickle is "<dir>/data.pkl" for one top-level directory of any name
     * (torch uses the file's stem), or a bare "data.pkl". */
    const ck_zip_entry *pkl = NULL;
    size_t prefix_len = 0;
    for (size_t i = 0; i < zip.count; i++) {
        const ck_zip_entry *e = &zip.entries[i];
        if (e->name_len < 8 || memcmp(e->name + e->name_len - 8, "data.pkl", 8) != 0) continue;
        size_t dir = e->name_len - 8;
        if (dir > 0 && (e->name[dir - 1] != '/' || memchr(e->name, '/', dir - 1))) continue;
        if (pkl) {
            st = ck_fail(err, CKEY_ERR_FORMAT, "%s: the archive holds more than one data.pkl",
                         label);
            goto done;
        }
        pkl = e;
        prefix_len = dir;
    }
    if (!pkl) {
        int torchscript = 0;
        for (size_t i = 0; i < zip.count; i++) {
            const ck_zip_entry *e = &zip.entries[i];
            if (e->name_len >= 13 && memcmp(e->name + e->name_len - 13, "constants.pkl", 13) == 0)
                torchscript = 1;
        }
        st = ck_fail(err, CKEY_ERR_FORMAT, "%s: no data.pkl in the zip archive: %s", label,
                     torchscript ? "this looks like a TorchScript module, not a torch.save state "
                                   "dict"
                                 : "not a torch.save checkpoint");
        goto done;
    }

    char name[300];
    if (prefix_len + 9 >= sizeof name) {
        st = ck_fail(err, CKEY_ERR_FORMAT, "%s: archive directory name is too long", label);
        goto done;
    }
    memcpy(name, pkl->name, prefix_len);
    memcpy(name + prefix_len, "byteorder", 9);
    const ck_zip_entry *bo = ck_zip_find(&zip, name, prefix_len + 9);
    if (bo) {
        const uint8_t *b;
        uint64_t n;
        if ((st = ck_zip_data(&zip, bo, &b, &n, err))) goto done;
        if (n > 0 && b[n - 1] == '\n') n--;
        if (!(n == 6 && memcmp(b, "little", 6) == 0)) {
            int big = n == 3 && memcmp(b, "big", 3) == 0;
            st = ck_fail(err, big ? CKEY_ERR_UNSUPPORTED : CKEY_ERR_FORMAT,
                         "%s: byteorder is '%.*s'; only little-endian checkpoints are supported",
                         label, (int)(n > 16 ? 16 : n), (const char *)b);
            goto done;
        }
    }

    const uint8_t *pdata;
    uint64_t plen;
    if ((st = ck_zip_data(&zip, pkl, &pdata, &plen, err))) goto done;
    if (plen > CK_MAX_PICKLE_BYTES) {
        st = ck_fail(err, CKEY_ERR_UNSUPPORTED, "%s: data.pkl of %llu bytes is over the limit of %u",
                     label, (unsigned long long)plen, CK_MAX_PICKLE_BYTES);
        goto done;
    }
    pth_ctx ctx = {.zip = &zip, .prefix = pkl->name, .prefix_len = prefix_len, .label = label};
    st = ck_pickle_load_state_dict(pdata, (size_t)plen, label, pth_storage, &ctx, tab, err);
done:
    ck_zip_close(&zip);
    return st;
}

/* ---------------------------------------------------------------- opening */

static ckey_status parse_any(ck_checkpoint *c, ckey_error *err) {
    const uint8_t *p = c->base;
    size_t n = c->size;
    ckey_status st;
    if (n == 0) return ck_fail(err, CKEY_ERR_FORMAT, "%s: file is empty", c->label);
    if (n >= 4 && p[0] == 'P' && p[1] == 'K' &&
        ((p[2] == 3 && p[3] == 4) || (p[2] == 5 && p[3] == 6))) {
        c->format = "pth";
        st = pth_parse(p, n, c->label, &c->tab, err);
    } else if (n >= 9 && p[8] == '{') {
        c->format = "safetensors";
        st = ck_safetensors_parse(p, n, c->label, &c->tab, &c->meta, err);
    } else if (n >= 2 && p[0] == 0x80 && p[1] <= 5) {
        return ck_fail(err, CKEY_ERR_UNSUPPORTED,
                       "%s: legacy (pre-1.6, non-zip) torch.save format is not supported; "
                       "re-save it with a current torch.save", c->label);
    } else {
        unsigned b[4] = {0};
        for (size_t i = 0; i < 4 && i < n; i++) b[i] = p[i];
        return ck_fail(err, CKEY_ERR_FORMAT,
                       "%s: not a torch.save zip or a safetensors file (starts with %02x %02x "
                       "%02x %02x)", c->label, b[0], b[1], b[2], b[3]);
    }
    if (st) return st;

    if (c->tab.count) {
        c->sorted = malloc(c->tab.count * sizeof *c->sorted);
        if (!c->sorted) return ck_fail(err, CKEY_ERR_NOMEM, "%s: out of memory", c->label);
        for (size_t i = 0; i < c->tab.count; i++) c->sorted[i] = &c->tab.items[i];
        qsort(c->sorted, c->tab.count, sizeof *c->sorted, cmp_info);
        for (size_t i = 1; i < c->tab.count; i++)
            if (strcmp(c->sorted[i - 1]->name, c->sorted[i]->name) == 0)
                return ck_fail(err, CKEY_ERR_FORMAT,
                               "%s: duplicate tensor name '%.200s' (after removing _orig_mod./"
                               "module. prefixes)", c->label, c->sorted[i]->name);
    }
    return CKEY_OK;
}

static ckey_status new_checkpoint(const char *label, ck_checkpoint **out, ckey_error *err) {
    ck_checkpoint *c = calloc(1, sizeof *c);
    if (c) c->label = strdup(label);
    if (!c || !c->label) {
        free(c);
        return ck_fail(err, CKEY_ERR_NOMEM, "%s: out of memory", label);
    }
    *out = c;
    return CKEY_OK;
}

ckey_status ck_checkpoint_open_memory(const void *data, size_t size, const char *label,
                                      ck_checkpoint **out, ckey_error *err) {
    if (!out || (!data && size))
        return ck_fail(err, CKEY_ERR_INVALID_ARG, "ck_checkpoint_open_memory: NULL argument");
    *out = NULL;
    ck_checkpoint *c = NULL;
    ckey_status st = new_checkpoint(label ? label : "<memory>", &c, err);
    if (st) return st;
    c->base = data;
    c->size = size;
    if ((st = parse_any(c, err))) {
        ck_checkpoint_close(c);
        return st;
    }
    *out = c;
    return CKEY_OK;
}

ckey_status ck_checkpoint_open(const char *path, ck_checkpoint **out, ckey_error *err) {
    if (!path || !out) return ck_fail(err, CKEY_ERR_INVALID_ARG, "ck_checkpoint_open: NULL argument");
    *out = NULL;
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0) return ck_fail(err, CKEY_ERR_IO, "%s: cannot open: %s", path, strerror(errno));
    struct stat sb;
    if (fstat(fd, &sb) != 0) {
        int e = errno;
        close(fd);
        return ck_fail(err, CKEY_ERR_IO, "%s: cannot stat: %s", path, strerror(e));
    }
    if (!S_ISREG(sb.st_mode)) {
        close(fd);
        return ck_fail(err, CKEY_ERR_IO, "%s: not a regular file", path);
    }
    if ((uint64_t)sb.st_size > CK_MAX_CHECKPOINT_BYTES || (uint64_t)sb.st_size > SIZE_MAX) {
        close(fd);
        return ck_fail(err, CKEY_ERR_UNSUPPORTED, "%s: file of %lld bytes is over the limit of %llu",
                       path, (long long)sb.st_size, (unsigned long long)CK_MAX_CHECKPOINT_BYTES);
    }
    ck_checkpoint *c = NULL;
    ckey_status st = new_checkpoint(path, &c, err);
    if (st) {
        close(fd);
        return st;
    }
    long page = sysconf(_SC_PAGESIZE);
    c->page = page > 0 ? (size_t)page : 4096;
    c->size = (size_t)sb.st_size;
    if (c->size) {
        /* Private read-only mapping: tensors are read in place, and pages can
         * be dropped after conversion without any risk to the data. */
        void *m = mmap(NULL, c->size, PROT_READ, MAP_PRIVATE, fd, 0);
        if (m == MAP_FAILED) {
            int e = errno;
            close(fd);
            ck_checkpoint_close(c);
            return ck_fail(err, CKEY_ERR_IO, "%s: cannot map: %s", path, strerror(e));
        }
        c->map = m;
        c->map_size = c->size;
        c->base = m;
    }
    close(fd);
    if ((st = parse_any(c, err))) {
        ck_checkpoint_close(c);
        return st;
    }
    *out = c;
    return CKEY_OK;
}

void ck_checkpoint_close(ck_checkpoint *c) {
    if (!c) return;
    if (c->map) munmap(c->map, c->map_size);
    ck_table_free(&c->tab);
    ck_meta_free(&c->meta);
    free(c->sorted);
    free(c->label);
    free(c);
}

size_t ck_checkpoint_count(const ck_checkpoint *c) { return c ? c->tab.count : 0; }

const ck_tensor_info *ck_checkpoint_at(const ck_checkpoint *c, size_t i) {
    return c && i < c->tab.count ? &c->tab.items[i] : NULL;
}

const ck_tensor_info *ck_checkpoint_find(const ck_checkpoint *c, const char *name) {
    if (!c || !name || !c->tab.count) return NULL;
    ck_tensor_info key = {.name = name};
    const ck_tensor_info *kp = &key;
    const ck_tensor_info **hit = bsearch(&kp, c->sorted, c->tab.count, sizeof *c->sorted, cmp_info);
    return hit ? *hit : NULL;
}

const char *ck_checkpoint_meta(const ck_checkpoint *c, const char *key) {
    if (!c || !key) return NULL;
    for (size_t i = 0; i < c->meta.count; i++)
        if (strcmp(c->meta.kv[2 * i], key) == 0) return c->meta.kv[2 * i + 1];
    return NULL;
}

const char *ck_checkpoint_format(const ck_checkpoint *c) { return c ? c->format : NULL; }

/* ------------------------------------------------------------- conversion */

static inline float load_f32(const uint8_t *p, ck_dtype dt) {
    switch (dt) {
    case CK_F16: {
        uint16_t h;
        memcpy(&h, p, 2);
        return ck_f16_to_f32(h);
    }
    case CK_BF16: {
        uint16_t h;
        memcpy(&h, p, 2);
        return ck_bf16_to_f32(h);
    }
    case CK_F64: {
        double d;
        memcpy(&d, p, 8);
        return (float)d;
    }
    default: {
        float f;
        memcpy(&f, p, 4);
        return f;
    }
    }
}

static void convert_dense(const uint8_t *src, ck_dtype dt, float *dst, uint64_t n) {
    if (dt == CK_F32) {
        memcpy(dst, src, n * 4);
        return;
    }
    size_t es = ck_dtype_size(dt);
    for (uint64_t i = 0; i < n; i++) dst[i] = load_f32(src + i * es, dt);
}

ckey_status ck_tensor_to_f32(const ck_tensor_info *t, float *dst, ckey_error *err) {
    if (!t || (!dst && t->numel))
        return ck_fail(err, CKEY_ERR_INVALID_ARG, "ck_tensor_to_f32: NULL argument");
    if (t->dtype != CK_F32 && t->dtype != CK_F16 && t->dtype != CK_BF16 && t->dtype != CK_F64)
        return ck_fail(err, CKEY_ERR_MODEL, "tensor '%.200s' is %s, not a floating-point tensor",
                       t->name ? t->name : "?", ck_dtype_name(t->dtype));
    if (t->numel == 0) return CKEY_OK;
    const size_t es = ck_dtype_size(t->dtype);
    const int nd = t->ndim;

    /* Dense row-major (size-1 dimensions may carry any stride). */
    int dense = 1;
    int64_t expect = 1;
    for (int d = nd - 1; d >= 0; d--) {
        if (t->shape[d] != 1 && t->stride[d] != expect) dense = 0;
        expect *= t->shape[d];
    }
    if (dense) {
        convert_dense(t->data, t->dtype, dst, t->numel);
        return CKEY_OK;
    }

    /* Odometer over the outer dimensions, a strided run along the last. The
     * reader has checked that every element lies inside the storage. */
    int64_t idx[CK_MAX_DIMS] = {0};
    const int64_t inner = t->shape[nd - 1], istride = t->stride[nd - 1];
    uint64_t off = 0; /* element offset of idx[] */
    uint64_t rows = t->numel / (uint64_t)inner;
    for (uint64_t r = 0; r < rows; r++) {
        const uint8_t *row = t->data + off * es;
        for (int64_t i = 0; i < inner; i++) *dst++ = load_f32(row + (uint64_t)(i * istride) * es, t->dtype);
        for (int d = nd - 2; d >= 0; d--) {
            if (++idx[d] < t->shape[d]) {
                off += (uint64_t)t->stride[d];
                break;
            }
            off -= (uint64_t)(t->shape[d] - 1) * (uint64_t)t->stride[d];
            idx[d] = 0;
        }
    }
    return CKEY_OK;
}

void ck_checkpoint_drop_pages(ck_checkpoint *c, const ck_tensor_info *t) {
    if (!c || !t || !c->map || t->numel == 0) return;
    const uint8_t *lo = t->data;
    if (lo < c->base || lo >= c->base + c->size) return;
    /* Bytes the tensor spans: through its farthest element. */
    uint64_t last = 0;
    for (int d = 0; d < t->ndim; d++) last += (uint64_t)(t->shape[d] - 1) * (uint64_t)t->stride[d];
    uint64_t span = (last + 1) * ck_dtype_size(t->dtype);
    if (span > t->avail_bytes) span = t->avail_bytes;
    uintptr_t start = (uintptr_t)lo & ~(uintptr_t)(c->page - 1);
    uintptr_t end = (uintptr_t)lo + (uintptr_t)span;
    uintptr_t map_end = (uintptr_t)c->base + c->map_size;
    end = (end + c->page - 1) & ~(uintptr_t)(c->page - 1);
    if (end > map_end) end = map_end; /* munmap-able bound; the kernel rounds up */
    /* The mapping is private and read-only: dropped pages refault from the
     * file, so rounding out to page boundaries never loses data. */
    madvise((void *)start, end - start, MADV_DONTNEED);
}
