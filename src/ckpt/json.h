/*
 * A small strict JSON (RFC 8259) parser for safetensors headers and sidecar
 * files (internal). The document becomes an array of nodes linked by index;
 * strings are decoded (escapes, UTF-16 surrogate pairs) into one buffer of
 * NUL-terminated copies. Refuses: nesting deeper than CK_JSON_MAX_DEPTH,
 * invalid UTF-8, control characters in strings, bad escapes, "\u0000",
 * leading zeros, trailing commas, comments and any trailing non-space bytes.
 */
#ifndef CK_IO_JSON_H
#define CK_IO_JSON_H

#include <stddef.h>
#include <stdint.h>

#include "ckey.h"

#define CK_JSON_MAX_DEPTH 64
#define CK_JSON_MAX_NODES (1u << 22)

typedef enum ck_json_type {
    CK_JSON_NULL, CK_JSON_FALSE, CK_JSON_TRUE, CK_JSON_NUMBER, CK_JSON_STRING,
    CK_JSON_ARRAY, CK_JSON_OBJECT
} ck_json_type;

typedef struct ck_json_node {
    uint8_t type;      /* ck_json_type */
    uint8_t is_int;    /* NUMBER written as an integer that fits int64 */
    uint32_t next;     /* next sibling, 0 = last (node 0 is the root) */
    uint32_t first;    /* ARRAY/OBJECT: first child, 0 = empty */
    uint32_t count;    /* ARRAY/OBJECT: number of children */
    uint32_t key;      /* member of an OBJECT: offset of its key in strings */
    uint32_t str;      /* STRING: offset of its value in strings */
    uint32_t str_len;  /* STRING: bytes, excluding the NUL */
    int64_t ival;      /* NUMBER with is_int */
} ck_json_node;

typedef struct ck_json {
    ck_json_node *nodes; /* nodes[0] is the root */
    size_t count;
    char *strings;
} ck_json;

/* Errors read "<label>: <what> at byte N". On failure *out is empty. */
ckey_status ck_json_parse(const char *text, size_t len, const char *label, ck_json *out,
                          ckey_error *err);
void ck_json_free(ck_json *j);

static inline const char *ck_json_key(const ck_json *j, const ck_json_node *n) {
    return j->strings + n->key;
}

static inline const char *ck_json_str(const ck_json *j, const ck_json_node *n) {
    return j->strings + n->str;
}

/* Member `key` of an object node; NULL when absent or not an object. */
const ck_json_node *ck_json_get(const ck_json *j, const ck_json_node *obj, const char *key);

#endif
