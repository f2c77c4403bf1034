/* Strict recursive-descent JSON parser; see json.h for what it refuses. */
#include "ckpt/json.h"

#include <stdlib.h>
#include <string.h>

#include "core/core.h"

typedef struct jp {
    const unsigned char *s;
    size_t len, pos;
    const char *label;
    ckey_error *err;
    ck_json *j;
    size_t cap;      /* nodes allocated */
    size_t str_used; /* bytes of j->strings in use */
} jp;

static ckey_status jfail(jp *p, const char *what) {
    return ck_fail(p->err, CKEY_ERR_FORMAT, "%s: invalid JSON: %s at byte %zu", p->label, what,
                   p->pos);
}

static void skip_ws(jp *p) {
    while (p->pos < p->len) {
        unsigned char c = p->s[p->pos];
        if (c != ' ' && c != '\t' && c != '\n' && c != '\r') break;
        p->pos++;
    }
}

static ckey_status new_node(jp *p, int type, uint32_t *out) {
    if (p->j->count >= CK_JSON_MAX_NODES)
        return ck_fail(p->err, CKEY_ERR_UNSUPPORTED, "%s: JSON has more than %u values", p->label,
                       CK_JSON_MAX_NODES);
    if (p->j->count == p->cap) {
        size_t n = p->cap ? p->cap * 2 : 64;
        if (n > CK_JSON_MAX_NODES) n = CK_JSON_MAX_NODES;
        ck_json_node *nodes = realloc(p->j->nodes, n * sizeof *nodes);
        if (!nodes) return ck_fail(p->err, CKEY_ERR_NOMEM, "%s: out of memory parsing JSON", p->label);
        p->j->nodes = nodes;
        p->cap = n;
    }
    ck_json_node *nd = &p->j->nodes[p->j->count];
    memset(nd, 0, sizeof *nd);
    nd->type = (uint8_t)type;
    *out = (uint32_t)p->j->count++;
    return CKEY_OK;
}

static int hex4(const unsigned char *s, uint32_t *out) {
    uint32_t v = 0;
    for (int i = 0; i < 4; i++) {
        unsigned char c = s[i];
        v <<= 4;
        if (c >= '0' && c <= '9') v |= (uint32_t)(c - '0');
        else if (c >= 'a' && c <= 'f') v |= (uint32_t)(c - 'a' + 10);
        else if (c >= 'A' && c <= 'F') v |= (uint32_t)(c - 'A' + 10);
        else return 0;
    }
    *out = v;
    return 1;
}

static void put_utf8(char *d, size_t *n, uint32_t cp) {
    if (cp < 0x80) {
        d[(*n)++] = (char)cp;
    } else if (cp < 0x800) {
        d[(*n)++] = (char)(0xC0 | (cp >> 6));
        d[(*n)++] = (char)(0x80 | (cp & 0x3F));
    } else if (cp < 0x10000) {
        d[(*n)++] = (char)(0xE0 | (cp >> 12));
        d[(*n)++] = (char)(0x80 | ((cp >> 6) & 0x3F));
        d[(*n)++] = (char)(0x80 | (cp & 0x3F));
    } else {
        d[(*n)++] = (char)(0xF0 | (cp >> 18));
        d[(*n)++] = (char)(0x80 | ((cp >> 12) & 0x3F));
        d[(*n)++] = (char)(0x80 | ((cp >> 6) & 0x3F));
        d[(*n)++] = (char)(0x80 | (cp & 0x3F));
    }
}

/* Length of the valid UTF-8 sequence at s[0..n) (lead byte >= 0x80), or 0. */
static size_t utf8_len(const unsigned char *s, size_t n) {
    unsigned char c = s[0];
    size_t len;
    uint32_t cp, min;
    if (c >= 0xC2 && c <= 0xDF) { len = 2; cp = c & 0x1F; min = 0x80; }
    else if (c >= 0xE0 && c <= 0xEF) { len = 3; cp = c & 0x0F; min = 0x800; }
    else if (c >= 0xF0 && c <= 0xF4) { len = 4; cp = c & 0x07; min = 0x10000; }
    else return 0;
    if (len > n) return 0;
    for (size_t i = 1; i < len; i++) {
        if ((s[i] & 0xC0) != 0x80) return 0;
        cp = cp << 6 | (s[i] & 0x3F);
    }
    if (cp < min || cp > 0x10FFFF || (cp >= 0xD800 && cp <= 0xDFFF)) return 0;
    return len;
}

/* Parse a string at p->pos (the opening quote); store its decoded copy. The
 * decoded form is never longer than the source, so the strings buffer sized
 * to the input always has room. */
static ckey_status parse_string(jp *p, uint32_t *off, uint32_t *len) {
    char *d = p->j->strings;
    size_t n = p->str_used;
    *off = (uint32_t)n;
    p->pos++; /* opening quote */
    for (;;) {
        if (p->pos >= p->len) return jfail(p, "unterminated string");
        unsigned char c = p->s[p->pos];
        if (c == '"') {
            p->pos++;
            break;
        }
        if (c < 0x20) return jfail(p, "control character in string");
        if (c == '\\') {
            if (p->len - p->pos < 2) return jfail(p, "unterminated escape");
            unsigned char e = p->s[p->pos + 1];
            p->pos += 2;
            switch (e) {
            case '"': d[n++] = '"'; break;
            case '\\': d[n++] = '\\'; break;
            case '/': d[n++] = '/'; break;
            case 'b': d[n++] = '\b'; break;
            case 'f': d[n++] = '\f'; break;
            case 'n': d[n++] = '\n'; break;
            case 'r': d[n++] = '\r'; break;
            case 't': d[n++] = '\t'; break;
            case 'u': {
                uint32_t cp, lo;
                if (p->len - p->pos < 4 || !hex4(p->s + p->pos, &cp))
                    return jfail(p, "bad \\u escape");
                p->pos += 4;
                if (cp >= 0xDC00 && cp <= 0xDFFF) return jfail(p, "lone low surrogate");
                if (cp >= 0xD800 && cp <= 0xDBFF) {
                    if (p->len - p->pos < 6 || p->s[p->pos] != '\\' || p->s[p->pos + 1] != 'u' ||
                        !hex4(p->s + p->pos + 2, &lo) || lo < 0xDC00 || lo > 0xDFFF)
                        return jfail(p, "unpaired high surrogate");
                    p->pos += 6;
                    cp = 0x10000 + ((cp - 0xD800) << 10) + (lo - 0xDC00);
                }
                /* Names become C strings: an embedded NUL would truncate them. */
                if (cp == 0) return jfail(p, "\\u0000 in string");
                put_utf8(d, &n, cp);
                break;
            }
            default:
                p->pos -= 1;
                return jfail(p, "bad escape");
            }
            continue;
        }
        if (c < 0x80) {
            d[n++] = (char)c;
            p->pos++;
            continue;
        }
        size_t l = utf8_len(p->s + p->pos, p->len - p->pos);
        if (!l) return jfail(p, "invalid UTF-8 in string");
        memcpy(d + n, p->s + p->pos, l);
        n += l;
        p->pos += l;
    }
    d[n++] = 0;
    *len = (uint32_t)(n - 1 - *off);
    p->str_used = n;
    return CKEY_OK;
}

static int is_digit(unsigned char c) { return c >= '0' && c <= '9'; }

static ckey_status parse_number(jp *p, ck_json_node *nd) {
    size_t i = p->pos;
    int neg = 0, is_int = 1, overflow = 0;
    uint64_t mag = 0;
    if (i < p->len && p->s[i] == '-') { neg = 1; i++; }
    if (i >= p->len || !is_digit(p->s[i])) return jfail(p, "bad number");
    if (p->s[i] == '0' && i + 1 < p->len && is_digit(p->s[i + 1]))
        return jfail(p, "leading zero in number");
    while (i < p->len && is_digit(p->s[i])) {
        uint64_t dgt = (uint64_t)(p->s[i] - '0');
        if (mag > (UINT64_MAX - dgt) / 10) overflow = 1;
        else mag = mag * 10 + dgt;
        i++;
    }
    if (i < p->len && p->s[i] == '.') {
        is_int = 0;
        i++;
        if (i >= p->len || !is_digit(p->s[i])) return jfail(p, "bad fraction");
        while (i < p->len && is_digit(p->s[i])) i++;
    }
    if (i < p->len && (p->s[i] == 'e' || p->s[i] == 'E')) {
        is_int = 0;
        i++;
        if (i < p->len && (p->s[i] == '+' || p->s[i] == '-')) i++;
        if (i >= p->len || !is_digit(p->s[i])) return jfail(p, "bad exponent");
        while (i < p->len && is_digit(p->s[i])) i++;
    }
    p->pos = i;
    if (is_int && !overflow && mag <= (uint64_t)INT64_MAX + (uint64_t)neg) {
        nd->is_int = 1;
        /* -2^63 has no positive counterpart: negate in unsigned arithmetic. */
        uint64_t u = neg ? (uint64_t)0 - mag : mag;
        memcpy(&nd->ival, &u, sizeof u);
    }
    return CKEY_OK;
}

static int match(jp *p, const char *word) {
    size_t n = strlen(word);
    if (p->len - p->pos < n || memcmp(p->s + p->pos, word, n) != 0) return 0;
    p->pos += n;
    return 1;
}

static ckey_status parse_value(jp *p, int depth, uint32_t *out);

static ckey_status parse_container(jp *p, int depth, uint32_t self, int object) {
    const unsigned char close = object ? '}' : ']';
    uint32_t last = 0;
    p->pos++; /* '{' or '[' */
    skip_ws(p);
    if (p->pos < p->len && p->s[p->pos] == close) {
        p->pos++;
        return CKEY_OK;
    }
    for (;;) {
        uint32_t key_off = 0, key_len = 0, child;
        ckey_status st;
        skip_ws(p);
        if (object) {
            if (p->pos >= p->len || p->s[p->pos] != '"') return jfail(p, "expected a string key");
            if ((st = parse_string(p, &key_off, &key_len))) return st;
            skip_ws(p);
            if (p->pos >= p->len || p->s[p->pos] != ':') return jfail(p, "expected ':'");
            p->pos++;
        }
        if ((st = parse_value(p, depth + 1, &child))) return st;
        ck_json_node *nodes = p->j->nodes;
        nodes[child].key = key_off;
        if (last) nodes[last].next = child;
        else nodes[self].first = child;
        last = child;
        nodes[self].count++;
        skip_ws(p);
        if (p->pos >= p->len) return jfail(p, object ? "unterminated object" : "unterminated array");
        unsigned char c = p->s[p->pos++];
        if (c == close) return CKEY_OK;
        if (c != ',') {
            p->pos--;
            return jfail(p, object ? "expected ',' or '}'" : "expected ',' or ']'");
        }
    }
}

static ckey_status parse_value(jp *p, int depth, uint32_t *out) {
    skip_ws(p);
    if (p->pos >= p->len) return jfail(p, "unexpected end");
    unsigned char c = p->s[p->pos];
    ckey_status st;
    if (c == '{' || c == '[') {
        if (depth >= CK_JSON_MAX_DEPTH)
            return ck_fail(p->err, CKEY_ERR_FORMAT, "%s: JSON nested deeper than %d levels at byte %zu",
                           p->label, CK_JSON_MAX_DEPTH, p->pos);
        if ((st = new_node(p, c == '{' ? CK_JSON_OBJECT : CK_JSON_ARRAY, out))) return st;
        return parse_container(p, depth, *out, c == '{');
    }
    if (c == '"') {
        uint32_t off, len;
        if ((st = new_node(p, CK_JSON_STRING, out))) return st;
        if ((st = parse_string(p, &off, &len))) return st;
        p->j->nodes[*out].str = off;
        p->j->nodes[*out].str_len = len;
        return CKEY_OK;
    }
    if (c == '-' || is_digit(c)) {
        if ((st = new_node(p, CK_JSON_NUMBER, out))) return st;
        return parse_number(p, &p->j->nodes[*out]);
    }
    int type;
    if (match(p, "true")) type = CK_JSON_TRUE;
    else if (match(p, "false")) type = CK_JSON_FALSE;
    else if (match(p, "null")) type = CK_JSON_NULL;
    else return jfail(p, "unexpected character");
    return new_node(p, type, out);
}

ckey_status ck_json_parse(const char *text, size_t len, const char *label, ck_json *out,
                          ckey_error *err) {
    memset(out, 0, sizeof *out);
    if (len >= UINT32_MAX)
        return ck_fail(err, CKEY_ERR_UNSUPPORTED, "%s: JSON of %zu bytes is too large", label, len);
    jp p = {.s = (const unsigned char *)text, .len = len, .label = label, .err = err, .j = out};
    out->strings = malloc(len + 1);
    if (!out->strings) return ck_fail(err, CKEY_ERR_NOMEM, "%s: out of memory parsing JSON", label);
    out->strings[0] = 0;
    /* Offset 0 is reserved for the empty key of array elements and the root. */
    p.str_used = 1;
    uint32_t root;
    ckey_status st = parse_value(&p, 0, &root);
    if (!st) {
        skip_ws(&p);
        if (p.pos != p.len) st = jfail(&p, "trailing characters after the value");
    }
    if (st) ck_json_free(out);
    return st;
}

void ck_json_free(ck_json *j) {
    if (!j) return;
    free(j->nodes);
    free(j->strings);
    memset(j, 0, sizeof *j);
}

const ck_json_node *ck_json_get(const ck_json *j, const ck_json_node *obj, const char *key) {
    if (!obj || obj->type != CK_JSON_OBJECT) return NULL;
    for (uint32_t c = obj->first; c; c = j->nodes[c].next)
        if (strcmp(j->strings + j->nodes[c].key, key) == 0) return &j->nodes[c];
    return NULL;
}
