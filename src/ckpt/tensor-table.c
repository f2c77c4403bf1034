/* The tensor table the checkpoint readers fill (ckpt/internal.h), and the
 * safetensors metadata table. */
#include <stdlib.h>
#include <string.h>

#include "core/core.h"
#include "ckpt/internal.h"

static int has_prefix(const char *s, size_t n, const char *prefix, size_t *plen) {
    *plen = strlen(prefix);
    return n > *plen && memcmp(s, prefix, *plen) == 0;
}

ckey_status ck_table_add(ck_tensor_table *t, const char *name, size_t len,
                         const ck_tensor_info *info, const char *label, ckey_error *err) {
    size_t pl;
    for (;;) {
        if (has_prefix(name, len, "_orig_mod.", &pl) || has_prefix(name, len, "module.", &pl)) {
            name += pl;
            len -= pl;
        } else {
            break;
        }
    }
    if (len == 0 || len > CK_MAX_NAME_LEN || memchr(name, 0, len))
        return ck_fail(err, CKEY_ERR_FORMAT,
                       "%s: tensor name '%.*s' is empty, longer than %d bytes or holds a NUL",
                       label, (int)(len > 100 ? 100 : len), name, CK_MAX_NAME_LEN);
    if (t->count >= CK_MAX_TENSORS)
        return ck_fail(err, CKEY_ERR_UNSUPPORTED, "%s: more than %d tensors", label,
                       CK_MAX_TENSORS);
    if (t->count == t->cap) {
        size_t cap = t->cap ? t->cap * 2 : 64;
        ck_tensor_info *items = realloc(t->items, cap * sizeof *items);
        if (!items) return ck_fail(err, CKEY_ERR_NOMEM, "%s: out of memory", label);
        t->items = items;
        t->cap = cap;
    }
    char *copy = malloc(len + 1);
    if (!copy) return ck_fail(err, CKEY_ERR_NOMEM, "%s: out of memory", label);
    memcpy(copy, name, len);
    copy[len] = 0;
    t->items[t->count] = *info;
    t->items[t->count].name = copy;
    t->count++;
    return CKEY_OK;
}

void ck_table_free(ck_tensor_table *t) {
    if (!t) return;
    for (size_t i = 0; i < t->count; i++) free((char *)t->items[i].name);
    free(t->items);
    memset(t, 0, sizeof *t);
}

void ck_meta_free(ck_meta_table *m) {
    if (!m) return;
    for (size_t i = 0; i < 2 * m->count; i++) free(m->kv[i]);
    free(m->kv);
    m->kv = NULL;
    m->count = 0;
}
