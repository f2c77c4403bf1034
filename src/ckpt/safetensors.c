/*
 * safetensors: [u64 LE header length N][N bytes of JSON][data]. The header
 * maps each tensor name to {"dtype", "shape", "data_offsets": [begin, end]}
 * with offsets relative to the first data byte; "__metadata__" maps strings
 * to strings. Tensors are dense and row-major.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "ckey_media.h"
#include "core/core.h"
#include "ckpt/internal.h"
#include "ckpt/json.h"
#include "ckpt/le.h"

static const struct {
    const char *name;
    ck_dtype dtype;
} st_dtypes[] = {
    {"F32", CK_F32}, {"F16", CK_F16}, {"BF16", CK_BF16}, {"F64", CK_F64},
    {"I64", CK_I64}, {"I32", CK_I32}, {"U8", CK_U8},     {"BOOL", CK_BOOL},
};

typedef struct span {
    uint64_t begin, end;
    size_t tensor;
} span;

static int cmp_span(const void *a, const void *b) {
    const span *x = a, *y = b;
    return (x->begin > y->begin) - (x->begin < y->begin);
}

static ckey_status read_metadata(const ck_json *j, const ck_json_node *obj, const char *label,
                                 ck_meta_table *meta, ckey_error *err) {
    if (obj->type != CK_JSON_OBJECT)
        return ck_fail(err, CKEY_ERR_FORMAT, "%s: safetensors __metadata__ is not an object", label);
    if (!obj->count) return CKEY_OK;
    meta->kv = calloc((size_t)obj->count * 2, sizeof *meta->kv);
    if (!meta->kv) return ck_fail(err, CKEY_ERR_NOMEM, "%s: out of memory", label);
    for (uint32_t c = obj->first; c; c = j->nodes[c].next) {
        const ck_json_node *v = &j->nodes[c];
        const char *key = ck_json_key(j, v);
        if (v->type != CK_JSON_STRING)
            return ck_fail(err, CKEY_ERR_FORMAT,
                           "%s: safetensors __metadata__ value of '%.100s' is not a string", label,
                           key);
        size_t i = meta->count;
        meta->kv[2 * i] = strdup(key);
        meta->kv[2 * i + 1] = strdup(ck_json_str(j, v));
        meta->count++; /* counted now so ck_meta_free releases a half-made pair */
        if (!meta->kv[2 * i] || !meta->kv[2 * i + 1])
            return ck_fail(err, CKEY_ERR_NOMEM, "%s: out of memory", label);
    }
    return CKEY_OK;
}

/* One header entry: validate it and fill `info` (data pointer included). */
static ckey_status read_entry(const ck_json *j, const ck_json_node *e, const char *name,
                              const uint8_t *data, uint64_t data_len, const char *label,
                              ck_tensor_info *info, span *sp, ckey_error *err) {
    const ck_json_node *dtype = NULL, *shape = NULL, *offs = NULL;
    if (e->type != CK_JSON_OBJECT)
        return ck_fail(err, CKEY_ERR_FORMAT, "%s: safetensors entry '%.200s' is not an object",
                       label, name);
    for (uint32_t c = e->first; c; c = j->nodes[c].next) {
        const char *k = ck_json_key(j, &j->nodes[c]);
        const ck_json_node **slot = strcmp(k, "dtype") == 0          ? &dtype
                                    : strcmp(k, "shape") == 0        ? &shape
                                    : strcmp(k, "data_offsets") == 0 ? &offs
                                                                     : NULL;
        if (!slot) continue; /* unknown fields carry nothing we need */
        if (*slot)
            return ck_fail(err, CKEY_ERR_FORMAT, "%s: tensor '%.200s' repeats \"%s\"", label,
                           name, k);
        *slot = &j->nodes[c];
    }
    if (!dtype || !shape || !offs)
        return ck_fail(err, CKEY_ERR_FORMAT, "%s: tensor '%.200s' lacks \"%s\"", label, name,
                       !dtype ? "dtype" : !shape ? "shape" : "data_offsets");
    if (dtype->type != CK_JSON_STRING)
        return ck_fail(err, CKEY_ERR_FORMAT, "%s: tensor '%.200s': dtype is not a string", label,
                       name);
    memset(info, 0, sizeof *info);
    const char *dts = ck_json_str(j, dtype);
    size_t di = 0;
    while (di < CK_ARRAY_LEN(st_dtypes) && strcmp(dts, st_dtypes[di].name) != 0) di++;
    if (di == CK_ARRAY_LEN(st_dtypes))
        return ck_fail(err, CKEY_ERR_UNSUPPORTED,
                       "%s: tensor '%.200s' has dtype '%.32s' (ckey reads F32, F16, BF16, F64, "
                       "I64, I32, U8, BOOL)", label, name, dts);
    info->dtype = st_dtypes[di].dtype;

    if (shape->type != CK_JSON_ARRAY)
        return ck_fail(err, CKEY_ERR_FORMAT, "%s: tensor '%.200s': shape is not an array", label,
                       name);
    if (shape->count > CK_MAX_DIMS)
        return ck_fail(err, CKEY_ERR_UNSUPPORTED, "%s: tensor '%.200s' has %u dimensions (max %d)",
                       label, name, shape->count, CK_MAX_DIMS);
    uint64_t numel = 1, bytes;
    int d = 0;
    for (uint32_t c = shape->first; c; c = j->nodes[c].next, d++) {
        const ck_json_node *v = &j->nodes[c];
        if (v->type != CK_JSON_NUMBER || !v->is_int || v->ival < 0)
            return ck_fail(err, CKEY_ERR_FORMAT,
                           "%s: tensor '%.200s': shape entry %d is not a non-negative integer",
                           label, name, d);
        info->shape[d] = v->ival;
        if (!ck_mul_u64(numel, (uint64_t)v->ival, &numel))
            return ck_fail(err, CKEY_ERR_FORMAT, "%s: tensor '%.200s': shape product overflows",
                           label, name);
    }
    info->ndim = d;
    if (!ck_mul_u64(numel, ck_dtype_size(info->dtype), &bytes))
        return ck_fail(err, CKEY_ERR_FORMAT, "%s: tensor '%.200s': shape product overflows", label,
                       name);
    /* Dense row-major strides; they cannot overflow since numel did not. */
    int64_t stride = 1;
    for (int k = d - 1; k >= 0; k--) {
        info->stride[k] = stride;
        if (info->shape[k] > 0) stride *= info->shape[k];
    }

    const ck_json_node *b = offs->count == 2 ? &j->nodes[offs->first] : NULL;
    const ck_json_node *en = b ? &j->nodes[b->next] : NULL;
    if (offs->type != CK_JSON_ARRAY || !b || b->type != CK_JSON_NUMBER || !b->is_int ||
        en->type != CK_JSON_NUMBER || !en->is_int || b->ival < 0 || en->ival < b->ival)
        return ck_fail(err, CKEY_ERR_FORMAT,
                       "%s: tensor '%.200s': data_offsets is not [begin, end] with 0 <= begin <= "
                       "end", label, name);
    uint64_t begin = (uint64_t)b->ival, end = (uint64_t)en->ival;
    if (end > data_len)
        return ck_fail(err, CKEY_ERR_FORMAT,
                       "%s: tensor '%.200s': data_offsets [%llu, %llu] run past the data (%llu "
                       "bytes; truncated?)", label, name, (unsigned long long)begin,
                       (unsigned long long)end, (unsigned long long)data_len);
    if (end - begin != bytes)
        return ck_fail(err, CKEY_ERR_FORMAT,
                       "%s: tensor '%.200s': data_offsets [%llu, %llu] hold %llu bytes but %s "
                       "with %llu elements needs %llu", label, name, (unsigned long long)begin,
                       (unsigned long long)end, (unsigned long long)(end - begin),
                       ck_dtype_name(info->dtype), (unsigned long long)numel,
                       (unsigned long long)bytes);
    info->numel = numel;
    info->data = data + begin;
    info->avail_bytes = bytes;
    sp->begin = begin;
    sp->end = end;
    return CKEY_OK;
}

ckey_status ck_safetensors_parse(const uint8_t *p, size_t size, const char *label,
                                 ck_tensor_table *tab, ck_meta_table *meta, ckey_error *err) {
    if (size < 8)
        return ck_fail(err, CKEY_ERR_FORMAT, "%s: %zu bytes is too short for a safetensors file",
                       label, size);
    uint64_t n = ck_rd64(p);
    if (n > size - 8)
        return ck_fail(err, CKEY_ERR_FORMAT,
                       "%s: safetensors header length %llu exceeds the file (%zu bytes; "
                       "truncated?)", label, (unsigned long long)n, size);
    if (n > CK_MAX_SAFETENSORS_HEADER)
        return ck_fail(err, CKEY_ERR_UNSUPPORTED,
                       "%s: safetensors header of %llu bytes is over the limit of %u", label,
                       (unsigned long long)n, CK_MAX_SAFETENSORS_HEADER);
    ck_json j;
    ckey_status st = ck_json_parse((const char *)p + 8, (size_t)n, label, &j, err);
    if (st) return st;
    const uint8_t *data = p + 8 + n;
    uint64_t data_len = size - 8 - n;
    span *spans = NULL;
    size_t nspan = 0;
    const ck_json_node *root = &j.nodes[0];
    if (root->type != CK_JSON_OBJECT) {
        st = ck_fail(err, CKEY_ERR_FORMAT, "%s: safetensors header is not a JSON object", label);
        goto done;
    }
    if (root->count > CK_MAX_TENSORS + 1) {
        st = ck_fail(err, CKEY_ERR_UNSUPPORTED, "%s: more than %d tensors", label, CK_MAX_TENSORS);
        goto done;
    }
    if (root->count && !(spans = malloc(root->count * sizeof *spans))) {
        st = ck_fail(err, CKEY_ERR_NOMEM, "%s: out of memory", label);
        goto done;
    }
    int seen_meta = 0;
    for (uint32_t c = root->first; c; c = j.nodes[c].next) {
        const ck_json_node *e = &j.nodes[c];
        const char *name = ck_json_key(&j, e);
        if (strcmp(name, "__metadata__") == 0) {
            if (seen_meta++) {
                st = ck_fail(err, CKEY_ERR_FORMAT, "%s: __metadata__ appears twice", label);
                goto done;
            }
            if ((st = read_metadata(&j, e, label, meta, err))) goto done;
            continue;
        }
        ck_tensor_info info;
        if ((st = read_entry(&j, e, name, data, data_len, label, &info, &spans[nspan], err)))
            goto done;
        spans[nspan].tensor = tab->count;
        if ((st = ck_table_add(tab, name, strlen(name), &info, label, err))) goto done;
        nspan++;
    }
    /* safetensors forbids tensors sharing bytes. */
    if (nspan > 1) {
        qsort(spans, nspan, sizeof *spans, cmp_span);
        const span *reach = NULL; /* the non-empty span reaching farthest so far */
        for (size_t i = 0; i < nspan; i++) {
            if (spans[i].begin == spans[i].end) continue;
            if (reach && spans[i].begin < reach->end) {
                st = ck_fail(err, CKEY_ERR_FORMAT, "%s: tensors '%.150s' and '%.150s' overlap",
                             label, tab->items[reach->tensor].name,
                             tab->items[spans[i].tensor].name);
                goto done;
            }
            if (!reach || spans[i].end > reach->end) reach = &spans[i];
        }
    }
done:
    free(spans);
    ck_json_free(&j);
    return st;
}

/* ------------------------------------------------------------------ writer */

typedef struct sbuf {
    char *p;
    size_t n, cap;
    int oom;
} sbuf;

static void sb_put(sbuf *b, const char *s, size_t n) {
    if (b->oom) return;
    if (n > b->cap - b->n) {
        size_t cap = b->cap ? b->cap : 1024;
        while (n > cap - b->n) {
            if (cap > SIZE_MAX / 2) { b->oom = 1; return; }
            cap *= 2;
        }
        char *p = realloc(b->p, cap);
        if (!p) { b->oom = 1; return; }
        b->p = p;
        b->cap = cap;
    }
    memcpy(b->p + b->n, s, n);
    b->n += n;
}

static void sb_str(sbuf *b, const char *s) { sb_put(b, s, strlen(s)); }

static void sb_fmt_u64(sbuf *b, uint64_t v) {
    char t[24];
    int n = snprintf(t, sizeof t, "%llu", (unsigned long long)v);
    sb_put(b, t, (size_t)n);
}

/* A JSON string literal. */
static void sb_json_str(sbuf *b, const char *s) {
    sb_put(b, "\"", 1);
    for (const unsigned char *c = (const unsigned char *)s; *c; c++) {
        if (*c == '"' || *c == '\\') {
            char e[2] = {'\\', (char)*c};
            sb_put(b, e, 2);
        } else if (*c < 0x20) {
            char e[8];
            snprintf(e, sizeof e, "\\u%04x", *c);
            sb_put(b, e, 6);
        } else {
            sb_put(b, (const char *)c, 1);
        }
    }
    sb_put(b, "\"", 1);
}

static int cmp_str_ptr(const void *a, const void *b) {
    return strcmp(*(const char *const *)a, *(const char *const *)b);
}

ckey_status ck_safetensors_write(const char *path, const ck_st_entry *entries, size_t n,
                                 const char *const *meta_kv, ckey_error *err) {
    if (!path || (n && !entries))
        return ck_fail(err, CKEY_ERR_INVALID_ARG, "ck_safetensors_write: no path or entries");
    if (n > CK_MAX_TENSORS)
        return ck_fail(err, CKEY_ERR_INVALID_ARG, "%s: %zu tensors is over the limit of %d", path,
                       n, CK_MAX_TENSORS);
    ckey_status st = CKEY_OK;
    sbuf h = {0};
    char *tmp = NULL;
    FILE *f = NULL;
    const char **names = n ? malloc(n * sizeof *names) : NULL;
    if (n && !names) return ck_fail(err, CKEY_ERR_NOMEM, "%s: out of memory", path);

    /* Validate every entry before touching the file system. */
    uint64_t offset = 0;
    for (size_t i = 0; i < n; i++) {
        const ck_st_entry *e = &entries[i];
        if (!e->name || !e->name[0] || strcmp(e->name, "__metadata__") == 0 ||
            e->ndim < 0 || e->ndim > CK_MAX_DIMS) {
            st = ck_fail(err, CKEY_ERR_INVALID_ARG, "%s: entry %zu has no valid name or ndim",
                         path, i);
            goto done;
        }
        uint64_t numel = 1;
        for (int d = 0; d < e->ndim; d++) {
            if (e->shape[d] < 0 || !ck_mul_u64(numel, (uint64_t)e->shape[d], &numel)) {
                st = ck_fail(err, CKEY_ERR_INVALID_ARG, "%s: tensor '%.200s' has a bad shape",
                             path, e->name);
                goto done;
            }
        }
        if ((numel && !e->data) || !ck_mul_u64(numel, sizeof(float), &numel) ||
            !ck_add_u64(offset, numel, &offset)) {
            st = ck_fail(err, CKEY_ERR_INVALID_ARG, "%s: tensor '%.200s' has no data or is too "
                         "large", path, e->name);
            goto done;
        }
        names[i] = e->name;
    }
    if (n > 1) {
        qsort(names, n, sizeof *names, cmp_str_ptr);
        for (size_t i = 1; i < n; i++) {
            if (strcmp(names[i - 1], names[i]) == 0) {
                st = ck_fail(err, CKEY_ERR_INVALID_ARG, "%s: tensor name '%.200s' appears twice",
                             path, names[i]);
                goto done;
            }
        }
    }

    sb_str(&h, "{");
    int first = 1;
    if (meta_kv && meta_kv[0]) {
        sb_str(&h, "\"__metadata__\":{");
        for (size_t i = 0; meta_kv[i]; i += 2) {
            if (!meta_kv[i + 1]) {
                st = ck_fail(err, CKEY_ERR_INVALID_ARG, "%s: metadata key '%.100s' has no value",
                             path, meta_kv[i]);
                goto done;
            }
            if (i) sb_str(&h, ",");
            sb_json_str(&h, meta_kv[i]);
            sb_str(&h, ":");
            sb_json_str(&h, meta_kv[i + 1]);
        }
        sb_str(&h, "}");
        first = 0;
    }
    offset = 0;
    for (size_t i = 0; i < n; i++) {
        const ck_st_entry *e = &entries[i];
        uint64_t bytes = sizeof(float);
        for (int d = 0; d < e->ndim; d++) bytes *= (uint64_t)e->shape[d];
        if (!first) sb_str(&h, ",");
        first = 0;
        sb_json_str(&h, e->name);
        sb_str(&h, ":{\"dtype\":\"F32\",\"shape\":[");
        for (int d = 0; d < e->ndim; d++) {
            if (d) sb_str(&h, ",");
            sb_fmt_u64(&h, (uint64_t)e->shape[d]);
        }
        sb_str(&h, "],\"data_offsets\":[");
        sb_fmt_u64(&h, offset);
        sb_str(&h, ",");
        sb_fmt_u64(&h, offset + bytes);
        sb_str(&h, "]}");
        offset += bytes;
    }
    sb_str(&h, "}");
    /* Pad with spaces so the data starts 8-byte aligned (as the reference
     * implementation does), which lets a reader map float data in place. */
    while ((8 + h.n) % 8) sb_str(&h, " ");
    if (h.oom) {
        st = ck_fail(err, CKEY_ERR_NOMEM, "%s: out of memory for the header", path);
        goto done;
    }

    tmp = ckey_temp_path(path);
    if (!tmp) {
        st = ck_fail(err, CKEY_ERR_NOMEM, "%s: out of memory", path);
        goto done;
    }
    f = fopen(tmp, "wb");
    if (!f) {
        st = ck_fail(err, CKEY_ERR_IO, "%s: cannot create: %s", tmp, strerror(errno));
        goto done;
    }
    uint8_t len8[8];
    for (int i = 0; i < 8; i++) len8[i] = (uint8_t)((uint64_t)h.n >> (8 * i));
    int ok = fwrite(len8, 1, 8, f) == 8 && fwrite(h.p, 1, h.n, f) == h.n;
    for (size_t i = 0; ok && i < n; i++) {
        const ck_st_entry *e = &entries[i];
        size_t numel = 1;
        for (int d = 0; d < e->ndim; d++) numel *= (size_t)e->shape[d];
        /* The host is little-endian (checked in checkpoint.c), as is the format. */
        if (numel) ok = fwrite(e->data, sizeof(float), numel, f) == numel;
    }
    if (ok) ok = fflush(f) == 0 && fsync(fileno(f)) == 0;
    if (fclose(f) != 0) ok = 0;
    f = NULL;
    if (!ok) {
        st = ck_fail(err, CKEY_ERR_IO, "%s: write failed: %s", tmp, strerror(errno));
        unlink(tmp);
        goto done;
    }
    if (rename(tmp, path) != 0) {
        st = ck_fail(err, CKEY_ERR_IO, "%s: cannot rename from %s: %s", path, tmp,
                     strerror(errno));
        unlink(tmp);
        goto done;
    }
done:
    free(tmp);
    free(h.p);
    free(names);
    return st;
}
