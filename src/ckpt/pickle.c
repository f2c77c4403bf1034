/*
 * A pickle interpreter for torch state dicts that executes nothing.
 *
 * What torch.save writes (protocol 2 by default, 4/5 on request) is a
 * sequence of opcodes that builds an OrderedDict of name -> tensor, where a
 * tensor is REDUCE(torch._utils._rebuild_tensor_v2, (storage, offset, size,
 * stride, requires_grad, hooks)) and a storage is a persistent id
 * ('storage', torch.FloatStorage, key, location, numel). The allowlist below
 * mirrors what PyTorch's weights_only unpickler accepts for such a file,
 * narrowed to what a state dict needs; each global resolves to a behaviour
 * written here, never to code named by the file.
 *
 * Objects live in one array and refer to each other by index, so the memo
 * and stack hold plain integers and freeing is a single pass over the array
 * (shared references and cycles need no special care).
 */
#include "ckpt/pickle.h"

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/core.h"
#include "ckpt/le.h"

enum {
    OP_MARK = '(', OP_STOP = '.', OP_BINFLOAT = 'G', OP_BININT = 'J', OP_BININT1 = 'K',
    OP_BININT2 = 'M', OP_NONE = 'N', OP_BINPERSID = 'Q', OP_REDUCE = 'R',
    OP_BINUNICODE = 'X', OP_APPEND = 'a', OP_BUILD = 'b', OP_GLOBAL = 'c', OP_APPENDS = 'e',
    OP_BINGET = 'h', OP_LONG_BINGET = 'j', OP_EMPTY_LIST = ']', OP_BINPUT = 'q',
    OP_LONG_BINPUT = 'r', OP_SETITEM = 's', OP_TUPLE = 't', OP_SETITEMS = 'u',
    OP_EMPTY_DICT = '}', OP_EMPTY_TUPLE = ')', OP_PROTO = 0x80, OP_TUPLE1 = 0x85,
    OP_TUPLE2 = 0x86, OP_TUPLE3 = 0x87, OP_NEWTRUE = 0x88, OP_NEWFALSE = 0x89, OP_LONG1 = 0x8a,
    OP_LONG4 = 0x8b, OP_SHORT_BINUNICODE = 0x8c, OP_BINUNICODE8 = 0x8d, OP_STACK_GLOBAL = 0x93,
    OP_MEMOIZE = 0x94, OP_FRAME = 0x95
};

/* Names of every standard opcode, so a refusal says what the file tried. */
static const char *op_name(int op) {
    switch (op) {
    case '(': return "MARK";
    case '.': return "STOP";
    case '0': return "POP";
    case '1': return "POP_MARK";
    case '2': return "DUP";
    case 'F': return "FLOAT";
    case 'I': return "INT";
    case 'J': return "BININT";
    case 'K': return "BININT1";
    case 'L': return "LONG";
    case 'M': return "BININT2";
    case 'N': return "NONE";
    case 'P': return "PERSID";
    case 'Q': return "BINPERSID";
    case 'R': return "REDUCE";
    case 'S': return "STRING";
    case 'T': return "BINSTRING";
    case 'U': return "SHORT_BINSTRING";
    case 'V': return "UNICODE";
    case 'X': return "BINUNICODE";
    case 'a': return "APPEND";
    case 'b': return "BUILD";
    case 'c': return "GLOBAL";
    case 'd': return "DICT";
    case '}': return "EMPTY_DICT";
    case 'e': return "APPENDS";
    case 'g': return "GET";
    case 'h': return "BINGET";
    case 'i': return "INST";
    case 'j': return "LONG_BINGET";
    case 'l': return "LIST";
    case ']': return "EMPTY_LIST";
    case 'o': return "OBJ";
    case 'p': return "PUT";
    case 'q': return "BINPUT";
    case 'r': return "LONG_BINPUT";
    case 's': return "SETITEM";
    case 't': return "TUPLE";
    case ')': return "EMPTY_TUPLE";
    case 'u': return "SETITEMS";
    case 'G': return "BINFLOAT";
    case 0x80: return "PROTO";
    case 0x81: return "NEWOBJ";
    case 0x82: return "EXT1";
    case 0x83: return "EXT2";
    case 0x84: return "EXT4";
    case 0x85: return "TUPLE1";
    case 0x86: return "TUPLE2";
    case 0x87: return "TUPLE3";
    case 0x88: return "NEWTRUE";
    case 0x89: return "NEWFALSE";
    case 0x8a: return "LONG1";
    case 0x8b: return "LONG4";
    case 'B': return "BINBYTES";
    case 'C': return "SHORT_BINBYTES";
    case 0x8c: return "SHORT_BINUNICODE";
    case 0x8d: return "BINUNICODE8";
    case 0x8e: return "BINBYTES8";
    case 0x8f: return "EMPTY_SET";
    case 0x90: return "ADDITEMS";
    case 0x91: return "FROZENSET";
    case 0x92: return "NEWOBJ_EX";
    case 0x93: return "STACK_GLOBAL";
    case 0x94: return "MEMOIZE";
    case 0x95: return "FRAME";
    case 0x96: return "BYTEARRAY8";
    case 0x97: return "NEXT_BUFFER";
    case 0x98: return "READONLY_BUFFER";
    }
    return "unknown";
}

typedef enum pk_kind {
    PK_NONE, PK_BOOL, PK_INT, PK_FLOAT, PK_STR, PK_TUPLE, PK_LIST, PK_DICT, PK_GLOBAL,
    PK_STORAGE, PK_TENSOR
} pk_kind;

static const char *kind_name(int k) {
    static const char *const names[] = {"None", "bool", "int", "float", "str", "tuple", "list",
                                        "dict", "global", "storage", "tensor"};
    return k >= 0 && k < (int)CK_ARRAY_LEN(names) ? names[k] : "?";
}

/* The allowlisted globals. */
typedef enum pk_global {
    G_ORDERED_DICT = 1,
    G_REBUILD_TENSOR_V2,
    G_REBUILD_PARAMETER,
    G_REBUILD_PARAMETER_WITH_STATE,
    G_STORAGE_TYPE
} pk_global;

typedef struct pk_obj {
    uint8_t kind;
    uint8_t global;  /* PK_GLOBAL: pk_global */
    uint8_t dtype;   /* PK_GLOBAL storage type, PK_STORAGE: ck_dtype */
    uint32_t n, cap; /* containers; a dict stores key, value, key, value, ... */
    union {
        int64_t i;
        double f;
        struct { const char *p; size_t len; } s;
        uint32_t *items;
        struct { const uint8_t *data; uint64_t numel; } st;
        uint32_t args; /* PK_TENSOR: the rebuild arguments tuple */
    } u;
} pk_obj;

typedef struct pk_vm {
    const uint8_t *p;
    size_t len, pos;
    size_t op_pos;
    int op;
    const char *label;
    ckey_error *err;
    ck_pickle_storage_fn storage;
    void *storage_ctx;

    pk_obj *objs;
    size_t nobj, capobj;
    size_t items_total;
    uint32_t *stack;
    size_t sp, capstack;
    size_t *marks;
    size_t nmark;
    uint32_t *memo; /* UINT32_MAX = unset */
    size_t capmemo, memo_used;
} pk_vm;

#define UNSET UINT32_MAX
enum { OBJ_NONE = 0, OBJ_FALSE = 1, OBJ_TRUE = 2 };

static ckey_status vm_fail(pk_vm *vm, ckey_status st, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));

/* "<label>: <what> (pickle opcode 0xNN NAME at offset N)". */
static ckey_status vm_fail(pk_vm *vm, ckey_status st, const char *fmt, ...) {
    char msg[384];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof msg, fmt, ap);
    va_end(ap);
    return ck_fail(vm->err, st, "%s: %s (pickle opcode 0x%02x %s at offset %zu)", vm->label, msg,
                   vm->op, op_name(vm->op), vm->op_pos);
}

static ckey_status nomem(pk_vm *vm) {
    return ck_fail(vm->err, CKEY_ERR_NOMEM, "%s: out of memory while reading the pickle",
                   vm->label);
}

/* Grow *buf (elements of `elem` bytes) to hold at least `need`, up to `limit`. */
static int grow(void **buf, size_t *cap, size_t need, size_t elem, size_t limit) {
    if (need <= *cap) return 1;
    if (need > limit) return 0;
    size_t n = *cap ? *cap : 16;
    while (n < need) n = n > limit / 2 ? limit : n * 2;
    void *b = realloc(*buf, n * elem);
    if (!b) return 0;
    *buf = b;
    *cap = n;
    return 1;
}

static ckey_status new_obj(pk_vm *vm, int kind, uint32_t *out) {
    if (vm->nobj >= CK_PICKLE_MAX_OBJECTS)
        return vm_fail(vm, CKEY_ERR_UNSUPPORTED, "more than %u objects", CK_PICKLE_MAX_OBJECTS);
    if (!grow((void **)&vm->objs, &vm->capobj, vm->nobj + 1, sizeof *vm->objs,
              CK_PICKLE_MAX_OBJECTS))
        return nomem(vm);
    pk_obj *o = &vm->objs[vm->nobj];
    memset(o, 0, sizeof *o);
    o->kind = (uint8_t)kind;
    *out = (uint32_t)vm->nobj++;
    return CKEY_OK;
}

static ckey_status push(pk_vm *vm, uint32_t obj) {
    if (vm->sp >= CK_PICKLE_MAX_STACK)
        return vm_fail(vm, CKEY_ERR_UNSUPPORTED, "stack deeper than %u", CK_PICKLE_MAX_STACK);
    if (!grow((void **)&vm->stack, &vm->capstack, vm->sp + 1, sizeof *vm->stack,
              CK_PICKLE_MAX_STACK))
        return nomem(vm);
    vm->stack[vm->sp++] = obj;
    return CKEY_OK;
}

/* Items above the innermost MARK are all an opcode may consume. */
static size_t floor_of(const pk_vm *vm) {
    return vm->nmark ? vm->marks[vm->nmark - 1] : 0;
}

static ckey_status pop(pk_vm *vm, uint32_t *out) {
    if (vm->sp <= floor_of(vm)) return vm_fail(vm, CKEY_ERR_FORMAT, "stack underflow");
    *out = vm->stack[--vm->sp];
    return CKEY_OK;
}

static ckey_status top(pk_vm *vm, uint32_t *out) {
    if (vm->sp <= floor_of(vm)) return vm_fail(vm, CKEY_ERR_FORMAT, "stack underflow");
    *out = vm->stack[vm->sp - 1];
    return CKEY_OK;
}

/* Remove the innermost mark; its items are stack[*start .. sp). */
static ckey_status pop_mark(pk_vm *vm, size_t *start) {
    if (!vm->nmark) return vm_fail(vm, CKEY_ERR_FORMAT, "no MARK on the stack");
    *start = vm->marks[--vm->nmark];
    return CKEY_OK;
}

static ckey_status container_add(pk_vm *vm, uint32_t c, uint32_t item) {
    if (vm->items_total >= CK_PICKLE_MAX_ITEMS)
        return vm_fail(vm, CKEY_ERR_UNSUPPORTED, "more than %u container items",
                       CK_PICKLE_MAX_ITEMS);
    pk_obj *o = &vm->objs[c];
    size_t cap = o->cap;
    if (!grow((void **)&o->u.items, &cap, (size_t)o->n + 1, sizeof *o->u.items,
              CK_PICKLE_MAX_ITEMS))
        return nomem(vm);
    o->cap = (uint32_t)cap;
    o->u.items[o->n++] = item;
    vm->items_total++;
    return CKEY_OK;
}

/* A tuple of stack[start .. start+n). */
static ckey_status make_tuple(pk_vm *vm, size_t start, size_t n, uint32_t *out) {
    ckey_status st = new_obj(vm, PK_TUPLE, out);
    if (st) return st;
    for (size_t i = 0; i < n; i++)
        if ((st = container_add(vm, *out, vm->stack[start + i]))) return st;
    return CKEY_OK;
}

static int is_str(const pk_obj *o, const char *s) {
    size_t n = strlen(s);
    return o->kind == PK_STR && o->u.s.len == n && memcmp(o->u.s.p, s, n) == 0;
}

static int eq(const char *p, size_t n, const char *s) {
    return strlen(s) == n && memcmp(p, s, n) == 0;
}

static const struct {
    const char *name;
    ck_dtype dtype;
} storage_types[] = {
    {"FloatStorage", CK_F32},  {"HalfStorage", CK_F16},     {"BFloat16Storage", CK_BF16},
    {"DoubleStorage", CK_F64}, {"LongStorage", CK_I64},     {"IntStorage", CK_I32},
    {"ByteStorage", CK_U8},    {"BoolStorage", CK_BOOL},
};

/* Map module.name to an allowlisted behaviour, or refuse it by name. */
static ckey_status resolve_global(pk_vm *vm, const char *mod, size_t mlen, const char *name,
                                  size_t nlen, uint32_t *out) {
    int g = 0;
    ck_dtype dt = CK_F32;
    if (eq(mod, mlen, "collections") && eq(name, nlen, "OrderedDict")) {
        g = G_ORDERED_DICT;
    } else if (eq(mod, mlen, "torch._utils")) {
        if (eq(name, nlen, "_rebuild_tensor_v2")) g = G_REBUILD_TENSOR_V2;
        else if (eq(name, nlen, "_rebuild_parameter")) g = G_REBUILD_PARAMETER;
        else if (eq(name, nlen, "_rebuild_parameter_with_state")) g = G_REBUILD_PARAMETER_WITH_STATE;
    } else if (eq(mod, mlen, "torch")) {
        for (size_t i = 0; i < CK_ARRAY_LEN(storage_types); i++) {
            if (eq(name, nlen, storage_types[i].name)) {
                g = G_STORAGE_TYPE;
                dt = storage_types[i].dtype;
            }
        }
    }
    if (!g) {
        int ml = (int)(mlen > 100 ? 100 : mlen), nl = (int)(nlen > 100 ? 100 : nlen);
        return ck_fail(vm->err, CKEY_ERR_UNSUPPORTED,
                       "%s: pickle opcode 0x%02x (%s of %.*s.%.*s) at offset %zu is not allowed "
                       "in a state dict",
                       vm->label, vm->op, op_name(vm->op), ml, mod, nl, name, vm->op_pos);
    }
    ckey_status st = new_obj(vm, PK_GLOBAL, out);
    if (st) return st;
    vm->objs[*out].global = (uint8_t)g;
    vm->objs[*out].dtype = (uint8_t)dt;
    return CKEY_OK;
}

/* BINPERSID: ('storage', storage_type, key, location, numel). */
static ckey_status persistent_load(pk_vm *vm, uint32_t pid, uint32_t *out) {
    const pk_obj *t = &vm->objs[pid];
    if (t->kind != PK_TUPLE || t->n != 5 || !is_str(&vm->objs[t->u.items[0]], "storage"))
        return vm_fail(vm, CKEY_ERR_FORMAT,
                       "persistent id is not a ('storage', type, key, location, numel) tuple");
    const pk_obj *type = &vm->objs[t->u.items[1]];
    const pk_obj *key = &vm->objs[t->u.items[2]];
    const pk_obj *loc = &vm->objs[t->u.items[3]];
    const pk_obj *numel = &vm->objs[t->u.items[4]];
    if (type->kind != PK_GLOBAL || type->global != G_STORAGE_TYPE)
        return vm_fail(vm, CKEY_ERR_FORMAT, "persistent id names no storage type (%s)",
                       kind_name(type->kind));
    if (key->kind != PK_STR || loc->kind != PK_STR || numel->kind != PK_INT || numel->u.i < 0)
        return vm_fail(vm, CKEY_ERR_FORMAT,
                       "persistent id needs a string key, a string location and a count");
    const uint8_t *data = NULL;
    uint64_t bytes = 0, need;
    ckey_status st = vm->storage(vm->storage_ctx, key->u.s.p, key->u.s.len, &data, &bytes,
                                 vm->err);
    if (st) return st;
    ck_dtype dt = (ck_dtype)type->dtype;
    uint64_t n = (uint64_t)numel->u.i;
    int kl = (int)(key->u.s.len > 64 ? 64 : key->u.s.len);
    if (!ck_mul_u64(n, ck_dtype_size(dt), &need) || need > bytes)
        return vm_fail(vm, CKEY_ERR_FORMAT,
                       "storage '%.*s' holds %llu bytes but declares %llu %s elements", kl,
                       key->u.s.p, (unsigned long long)bytes, (unsigned long long)n,
                       ck_dtype_name(dt));
    if ((st = new_obj(vm, PK_STORAGE, out))) return st;
    pk_obj *s = &vm->objs[*out];
    s->dtype = (uint8_t)dt;
    s->u.st.data = data;
    s->u.st.numel = n;
    return CKEY_OK;
}

static ckey_status reduce(pk_vm *vm, uint32_t fn, uint32_t args, uint32_t *out) {
    const pk_obj *f = &vm->objs[fn];
    const pk_obj *a = &vm->objs[args];
    if (f->kind != PK_GLOBAL)
        return vm_fail(vm, CKEY_ERR_UNSUPPORTED, "REDUCE calls a %s, not an allowed global",
                       kind_name(f->kind));
    if (a->kind != PK_TUPLE)
        return vm_fail(vm, CKEY_ERR_FORMAT, "REDUCE arguments are a %s, not a tuple",
                       kind_name(a->kind));
    switch (f->global) {
    case G_ORDERED_DICT:
        if (a->n != 0)
            return vm_fail(vm, CKEY_ERR_UNSUPPORTED, "OrderedDict called with %u arguments",
                           a->n);
        return new_obj(vm, PK_DICT, out);
    case G_REBUILD_TENSOR_V2: {
        /* (storage, offset, size, stride, requires_grad, hooks[, metadata]);
         * the geometry is checked once the tensor has a name. */
        if ((a->n != 6 && a->n != 7) || vm->objs[a->u.items[0]].kind != PK_STORAGE)
            return vm_fail(vm, CKEY_ERR_FORMAT,
                           "_rebuild_tensor_v2 needs (storage, offset, size, stride, "
                           "requires_grad, hooks) arguments");
        ckey_status st = new_obj(vm, PK_TENSOR, out);
        if (st) return st;
        vm->objs[*out].u.args = args;
        return CKEY_OK;
    }
    case G_REBUILD_PARAMETER:
    case G_REBUILD_PARAMETER_WITH_STATE: {
        /* (data, requires_grad, hooks[, state]): the Parameter is its tensor. */
        uint32_t want = f->global == G_REBUILD_PARAMETER ? 3 : 4;
        if (a->n != want || vm->objs[a->u.items[0]].kind != PK_TENSOR)
            return vm_fail(vm, CKEY_ERR_FORMAT, "%s needs a tensor and %u more arguments",
                           f->global == G_REBUILD_PARAMETER ? "_rebuild_parameter"
                                                            : "_rebuild_parameter_with_state",
                           want - 1);
        *out = a->u.items[0];
        return CKEY_OK;
    }
    default:
        return vm_fail(vm, CKEY_ERR_UNSUPPORTED, "REDUCE calls a storage type");
    }
}

/* BUILD sets an object's state. OrderedDict state (the state dict's
 * `_metadata`) is ignored; a tensor may only receive an empty state. */
static ckey_status build(pk_vm *vm, uint32_t target, uint32_t state) {
    const pk_obj *t = &vm->objs[target];
    const pk_obj *s = &vm->objs[state];
    if (t->kind == PK_DICT) return CKEY_OK;
    if (t->kind == PK_TENSOR && (s->kind == PK_NONE || (s->kind == PK_DICT && s->n == 0)))
        return CKEY_OK;
    return vm_fail(vm, CKEY_ERR_UNSUPPORTED, "BUILD with a %s state on a %s is not supported",
                   kind_name(s->kind), kind_name(t->kind));
}

static ckey_status need(pk_vm *vm, size_t n) {
    if (n > vm->len - vm->pos)
        return vm_fail(vm, CKEY_ERR_FORMAT, "argument runs past the end of the pickle (%zu bytes)",
                       vm->len);
    return CKEY_OK;
}

static ckey_status memo_put(pk_vm *vm, uint64_t idx) {
    uint32_t v = 0;
    ckey_status st = top(vm, &v);
    if (st) return st;
    if (idx >= CK_PICKLE_MAX_MEMO)
        return vm_fail(vm, CKEY_ERR_UNSUPPORTED, "memo index %llu is over the limit of %u",
                       (unsigned long long)idx, CK_PICKLE_MAX_MEMO);
    size_t old = vm->capmemo;
    if (!grow((void **)&vm->memo, &vm->capmemo, (size_t)idx + 1, sizeof *vm->memo,
              CK_PICKLE_MAX_MEMO))
        return nomem(vm);
    for (size_t i = old; i < vm->capmemo; i++) vm->memo[i] = UNSET;
    if (vm->memo[idx] == UNSET) vm->memo_used++;
    vm->memo[idx] = v;
    return CKEY_OK;
}

static ckey_status memo_get(pk_vm *vm, uint64_t idx) {
    if (idx >= vm->capmemo || vm->memo[idx] == UNSET)
        return vm_fail(vm, CKEY_ERR_FORMAT, "memo index %llu is not set",
                       (unsigned long long)idx);
    return push(vm, vm->memo[idx]);
}

static ckey_status push_str(pk_vm *vm, uint64_t n) {
    if (n > vm->len - vm->pos)
        return vm_fail(vm, CKEY_ERR_FORMAT,
                       "string of %llu bytes runs past the end of the pickle (%zu bytes)",
                       (unsigned long long)n, vm->len);
    if (n > CK_PICKLE_MAX_STRING)
        return vm_fail(vm, CKEY_ERR_UNSUPPORTED, "string of %llu bytes is over the limit of %u",
                       (unsigned long long)n, CK_PICKLE_MAX_STRING);
    uint32_t o = 0;
    ckey_status st = new_obj(vm, PK_STR, &o);
    if (st) return st;
    vm->objs[o].u.s.p = (const char *)vm->p + vm->pos;
    vm->objs[o].u.s.len = (size_t)n;
    vm->pos += (size_t)n;
    return push(vm, o);
}

static ckey_status push_int(pk_vm *vm, int64_t v) {
    uint32_t o = 0;
    ckey_status st = new_obj(vm, PK_INT, &o);
    if (st) return st;
    vm->objs[o].u.i = v;
    return push(vm, o);
}

/* LONG1/LONG4: little-endian two's complement of n bytes; 64 bits at most. */
static ckey_status push_long(pk_vm *vm, uint64_t n) {
    if (n > 8)
        return vm_fail(vm, CKEY_ERR_UNSUPPORTED, "integer of %llu bytes does not fit 64 bits",
                       (unsigned long long)n);
    ckey_status st = need(vm, (size_t)n);
    if (st) return st;
    uint64_t v = 0;
    for (size_t i = 0; i < n; i++) v |= (uint64_t)vm->p[vm->pos + i] << (8 * i);
    if (n > 0 && n < 8 && (vm->p[vm->pos + n - 1] & 0x80)) v |= ~(uint64_t)0 << (8 * n);
    vm->pos += (size_t)n;
    int64_t s;
    memcpy(&s, &v, sizeof s); /* two's complement reinterpretation */
    return push_int(vm, s);
}

/* GLOBAL's argument: "module\nname\n". */
static ckey_status read_line(pk_vm *vm, const char **s, size_t *n) {
    size_t max = vm->len - vm->pos;
    if (max > 256) max = 256;
    const uint8_t *start = vm->p + vm->pos;
    const uint8_t *nl = memchr(start, '\n', max);
    if (!nl) return vm_fail(vm, CKEY_ERR_FORMAT, "GLOBAL name is not terminated by a newline");
    *s = (const char *)start;
    *n = (size_t)(nl - start);
    vm->pos += *n + 1;
    return CKEY_OK;
}

static ckey_status run(pk_vm *vm, uint32_t *result) {
    ckey_status st = CKEY_OK;
    for (;;) {
        if (vm->pos >= vm->len)
            return ck_fail(vm->err, CKEY_ERR_FORMAT,
                           "%s: pickle ends at byte %zu without a STOP opcode (truncated?)",
                           vm->label, vm->len);
        vm->op_pos = vm->pos;
        vm->op = vm->p[vm->pos++];
        const uint8_t *arg = vm->p + vm->pos;
        uint32_t a = 0, b = 0, c = 0, o = 0;
        size_t start = 0;
        switch (vm->op) {
        case OP_PROTO:
            if ((st = need(vm, 1))) return st;
            if (arg[0] > 5)
                return vm_fail(vm, CKEY_ERR_UNSUPPORTED, "pickle protocol %u is not supported",
                               arg[0]);
            vm->pos += 1;
            break;
        case OP_FRAME: /* framing is only a read-ahead hint */
            if ((st = need(vm, 8))) return st;
            vm->pos += 8;
            break;
        case OP_STOP:
            if (vm->nmark || vm->sp != 1)
                return vm_fail(vm, CKEY_ERR_FORMAT,
                               "STOP with %zu objects and %zu marks on the stack (want 1 and 0)",
                               vm->sp, vm->nmark);
            *result = vm->stack[0];
            return CKEY_OK;
        case OP_MARK:
            if (vm->nmark >= CK_PICKLE_MAX_MARKS)
                return vm_fail(vm, CKEY_ERR_UNSUPPORTED, "MARKs nested deeper than %u",
                               CK_PICKLE_MAX_MARKS);
            if (!vm->marks && !(vm->marks = malloc(CK_PICKLE_MAX_MARKS * sizeof *vm->marks)))
                return nomem(vm);
            vm->marks[vm->nmark++] = vm->sp;
            break;
        case OP_EMPTY_DICT:
        case OP_EMPTY_LIST:
        case OP_EMPTY_TUPLE:
            if ((st = new_obj(vm, vm->op == OP_EMPTY_DICT   ? PK_DICT
                                  : vm->op == OP_EMPTY_LIST ? PK_LIST
                                                            : PK_TUPLE,
                              &o)))
                return st;
            if ((st = push(vm, o))) return st;
            break;
        case OP_NONE: if ((st = push(vm, OBJ_NONE))) return st; break;
        case OP_NEWFALSE: if ((st = push(vm, OBJ_FALSE))) return st; break;
        case OP_NEWTRUE: if ((st = push(vm, OBJ_TRUE))) return st; break;
        case OP_BINUNICODE:
            if ((st = need(vm, 4))) return st;
            vm->pos += 4;
            if ((st = push_str(vm, ck_rd32(arg)))) return st;
            break;
        case OP_SHORT_BINUNICODE:
            if ((st = need(vm, 1))) return st;
            vm->pos += 1;
            if ((st = push_str(vm, arg[0]))) return st;
            break;
        case OP_BINUNICODE8:
            if ((st = need(vm, 8))) return st;
            vm->pos += 8;
            if ((st = push_str(vm, ck_rd64(arg)))) return st;
            break;
        case OP_BINPUT:
            if ((st = need(vm, 1))) return st;
            vm->pos += 1;
            if ((st = memo_put(vm, arg[0]))) return st;
            break;
        case OP_LONG_BINPUT:
            if ((st = need(vm, 4))) return st;
            vm->pos += 4;
            if ((st = memo_put(vm, ck_rd32(arg)))) return st;
            break;
        case OP_MEMOIZE:
            if ((st = memo_put(vm, vm->memo_used))) return st;
            break;
        case OP_BINGET:
            if ((st = need(vm, 1))) return st;
            vm->pos += 1;
            if ((st = memo_get(vm, arg[0]))) return st;
            break;
        case OP_LONG_BINGET:
            if ((st = need(vm, 4))) return st;
            vm->pos += 4;
            if ((st = memo_get(vm, ck_rd32(arg)))) return st;
            break;
        case OP_BININT:
            if ((st = need(vm, 4))) return st;
            vm->pos += 4;
            if ((st = push_int(vm, (int32_t)ck_rd32(arg)))) return st;
            break;
        case OP_BININT1:
            if ((st = need(vm, 1))) return st;
            vm->pos += 1;
            if ((st = push_int(vm, arg[0]))) return st;
            break;
        case OP_BININT2:
            if ((st = need(vm, 2))) return st;
            vm->pos += 2;
            if ((st = push_int(vm, ck_rd16(arg)))) return st;
            break;
        case OP_LONG1:
            if ((st = need(vm, 1))) return st;
            vm->pos += 1;
            if ((st = push_long(vm, arg[0]))) return st;
            break;
        case OP_LONG4:
            if ((st = need(vm, 4))) return st;
            vm->pos += 4;
            if ((st = push_long(vm, ck_rd32(arg)))) return st;
            break;
        case OP_BINFLOAT: { /* big-endian IEEE double */
            if ((st = need(vm, 8))) return st;
            uint64_t bits = 0;
            for (int i = 0; i < 8; i++) bits = bits << 8 | arg[i];
            vm->pos += 8;
            if ((st = new_obj(vm, PK_FLOAT, &o))) return st;
            memcpy(&vm->objs[o].u.f, &bits, sizeof bits);
            if ((st = push(vm, o))) return st;
            break;
        }
        case OP_TUPLE:
            if ((st = pop_mark(vm, &start))) return st;
            if ((st = make_tuple(vm, start, vm->sp - start, &o))) return st;
            vm->sp = start;
            if ((st = push(vm, o))) return st;
            break;
        case OP_TUPLE1:
        case OP_TUPLE2:
        case OP_TUPLE3: {
            size_t n = (size_t)(vm->op - OP_TUPLE1 + 1);
            if (vm->sp - floor_of(vm) < n)
                return vm_fail(vm, CKEY_ERR_FORMAT, "stack underflow");
            if ((st = make_tuple(vm, vm->sp - n, n, &o))) return st;
            vm->sp -= n;
            if ((st = push(vm, o))) return st;
            break;
        }
        case OP_GLOBAL: {
            const char *mod = NULL, *name = NULL;
            size_t ml = 0, nl = 0;
            if ((st = read_line(vm, &mod, &ml)) || (st = read_line(vm, &name, &nl))) return st;
            if ((st = resolve_global(vm, mod, ml, name, nl, &o))) return st;
            if ((st = push(vm, o))) return st;
            break;
        }
        case OP_STACK_GLOBAL: {
            if ((st = pop(vm, &b)) || (st = pop(vm, &a))) return st;
            const pk_obj *mod = &vm->objs[a], *name = &vm->objs[b];
            if (mod->kind != PK_STR || name->kind != PK_STR)
                return vm_fail(vm, CKEY_ERR_FORMAT, "STACK_GLOBAL needs two strings");
            if ((st = resolve_global(vm, mod->u.s.p, mod->u.s.len, name->u.s.p, name->u.s.len,
                                     &o)))
                return st;
            if ((st = push(vm, o))) return st;
            break;
        }
        case OP_BINPERSID:
            if ((st = pop(vm, &a))) return st;
            if ((st = persistent_load(vm, a, &o))) return st;
            if ((st = push(vm, o))) return st;
            break;
        case OP_REDUCE:
            if ((st = pop(vm, &b)) || (st = pop(vm, &a))) return st;
            if ((st = reduce(vm, a, b, &o))) return st;
            if ((st = push(vm, o))) return st;
            break;
        case OP_BUILD:
            if ((st = pop(vm, &b)) || (st = top(vm, &a))) return st;
            if ((st = build(vm, a, b))) return st;
            break;
        case OP_SETITEM:
            if ((st = pop(vm, &c)) || (st = pop(vm, &b)) || (st = top(vm, &a))) return st;
            if (vm->objs[a].kind != PK_DICT)
                return vm_fail(vm, CKEY_ERR_FORMAT, "SETITEM on a %s",
                               kind_name(vm->objs[a].kind));
            if ((st = container_add(vm, a, b)) || (st = container_add(vm, a, c))) return st;
            break;
        case OP_APPEND:
            if ((st = pop(vm, &b)) || (st = top(vm, &a))) return st;
            if (vm->objs[a].kind != PK_LIST)
                return vm_fail(vm, CKEY_ERR_FORMAT, "APPEND on a %s",
                               kind_name(vm->objs[a].kind));
            if ((st = container_add(vm, a, b))) return st;
            break;
        case OP_SETITEMS:
        case OP_APPENDS: {
            int dict = vm->op == OP_SETITEMS;
            if ((st = pop_mark(vm, &start))) return st;
            if (start <= floor_of(vm)) return vm_fail(vm, CKEY_ERR_FORMAT, "stack underflow");
            a = vm->stack[start - 1];
            if (vm->objs[a].kind != (dict ? PK_DICT : PK_LIST))
                return vm_fail(vm, CKEY_ERR_FORMAT, "%s on a %s", dict ? "SETITEMS" : "APPENDS",
                               kind_name(vm->objs[a].kind));
            if (dict && (vm->sp - start) % 2)
                return vm_fail(vm, CKEY_ERR_FORMAT, "SETITEMS with an odd number of items");
            for (size_t i = start; i < vm->sp; i++)
                if ((st = container_add(vm, a, vm->stack[i]))) return st;
            vm->sp = start;
            break;
        }
        default:
            return vm_fail(vm, CKEY_ERR_UNSUPPORTED, "opcode not supported in a state dict");
        }
    }
}

/* Check a tensor's geometry against its storage and describe it. */
static ckey_status tensor_info(pk_vm *vm, uint32_t tensor, const pk_obj *key,
                               ck_tensor_info *info) {
    const pk_obj *args = &vm->objs[vm->objs[tensor].u.args];
    const pk_obj *stor = &vm->objs[args->u.items[0]];
    const pk_obj *off = &vm->objs[args->u.items[1]];
    const pk_obj *size = &vm->objs[args->u.items[2]];
    const pk_obj *stride = &vm->objs[args->u.items[3]];
    int kl = (int)(key->u.s.len > 200 ? 200 : key->u.s.len);
    const char *kp = key->u.s.p;
    const char *label = vm->label;
    ckey_error *err = vm->err;

    if (off->kind != PK_INT || size->kind != PK_TUPLE || stride->kind != PK_TUPLE)
        return ck_fail(err, CKEY_ERR_FORMAT,
                       "%s: tensor '%.*s': rebuild arguments are not (storage, int, tuple, tuple)",
                       label, kl, kp);
    if (size->n > CK_MAX_DIMS)
        return ck_fail(err, CKEY_ERR_UNSUPPORTED, "%s: tensor '%.*s' has %u dimensions (max %d)",
                       label, kl, kp, size->n, CK_MAX_DIMS);
    if (stride->n != size->n)
        return ck_fail(err, CKEY_ERR_FORMAT,
                       "%s: tensor '%.*s' has %u sizes but %u strides", label, kl, kp, size->n,
                       stride->n);
    memset(info, 0, sizeof *info);
    ck_dtype dt = (ck_dtype)stor->dtype;
    uint64_t esize = ck_dtype_size(dt);
    info->dtype = dt;
    info->ndim = (int32_t)size->n;
    uint64_t numel = 1, last = 0; /* last: index of the farthest element */
    int overflow = 0;
    for (uint32_t d = 0; d < size->n; d++) {
        const pk_obj *sz = &vm->objs[size->u.items[d]];
        const pk_obj *sd = &vm->objs[stride->u.items[d]];
        if (sz->kind != PK_INT || sd->kind != PK_INT)
            return ck_fail(err, CKEY_ERR_FORMAT, "%s: tensor '%.*s': size or stride %u is not an "
                           "integer", label, kl, kp, d);
        if (sz->u.i < 0 || sd->u.i < 0)
            return ck_fail(err, CKEY_ERR_FORMAT,
                           "%s: tensor '%.*s' has a negative size or stride (%lld, %lld) in "
                           "dimension %u", label, kl, kp, (long long)sz->u.i, (long long)sd->u.i,
                           d);
        info->shape[d] = sz->u.i;
        info->stride[d] = sd->u.i;
        if (!ck_mul_u64(numel, (uint64_t)sz->u.i, &numel)) overflow = 1;
        uint64_t span;
        if (sz->u.i > 0 && (!ck_mul_u64((uint64_t)sz->u.i - 1, (uint64_t)sd->u.i, &span) ||
                            !ck_add_u64(last, span, &last)))
            overflow = 2;
    }
    uint64_t bytes;
    if (overflow == 1 || !ck_mul_u64(numel, esize, &bytes) || bytes > SIZE_MAX)
        return ck_fail(err, CKEY_ERR_FORMAT, "%s: tensor '%.*s': element count overflows", label,
                       kl, kp);
    if (off->u.i < 0)
        return ck_fail(err, CKEY_ERR_FORMAT, "%s: tensor '%.*s' has a negative storage offset",
                       label, kl, kp);
    uint64_t offset = (uint64_t)off->u.i, storage_bytes = stor->u.st.numel * esize;
    if (offset > stor->u.st.numel)
        return ck_fail(err, CKEY_ERR_FORMAT,
                       "%s: tensor '%.*s' starts at element %llu, past its storage of %llu", label,
                       kl, kp, (unsigned long long)offset, (unsigned long long)stor->u.st.numel);
    if (numel > 0) {
        uint64_t end, need;
        if (overflow || !ck_add_u64(last, offset, &last) || !ck_add_u64(last, 1, &end) ||
            !ck_mul_u64(end, esize, &need))
            return ck_fail(err, CKEY_ERR_FORMAT,
                           "%s: tensor '%.*s' extends past its storage (extent overflows, storage "
                           "has %llu bytes)", label, kl, kp, (unsigned long long)storage_bytes);
        if (end > stor->u.st.numel)
            return ck_fail(err, CKEY_ERR_FORMAT,
                           "%s: tensor '%.*s' extends past its storage (needs %llu bytes, storage "
                           "has %llu)", label, kl, kp, (unsigned long long)need,
                           (unsigned long long)storage_bytes);
    }
    info->numel = numel;
    info->data = stor->u.st.data + offset * esize;
    info->avail_bytes = storage_bytes - offset * esize;
    return CKEY_OK;
}

static const pk_obj *dict_get(const pk_vm *vm, const pk_obj *d, const char *key) {
    for (uint32_t i = 0; i + 1 < d->n; i += 2)
        if (is_str(&vm->objs[d->u.items[i]], key)) return &vm->objs[d->u.items[i + 1]];
    return NULL;
}

static ckey_status collect(pk_vm *vm, uint32_t root, ck_tensor_table *out) {
    const pk_obj *d = &vm->objs[root];
    if (d->kind != PK_DICT)
        return ck_fail(vm->err, CKEY_ERR_FORMAT,
                       "%s: the pickle holds a %s, not a state dict", vm->label,
                       kind_name(d->kind));
    const pk_obj *nested = dict_get(vm, d, "state_dict");
    if (nested && nested->kind == PK_DICT) d = nested;
    for (uint32_t i = 0; i + 1 < d->n; i += 2) {
        const pk_obj *key = &vm->objs[d->u.items[i]];
        uint32_t value = d->u.items[i + 1];
        if (key->kind != PK_STR)
            return ck_fail(vm->err, CKEY_ERR_FORMAT, "%s: state dict key %u is a %s, not a string",
                           vm->label, i / 2, kind_name(key->kind));
        /* Non-tensor values (e.g. a module's extra state) are not weights. */
        if (vm->objs[value].kind != PK_TENSOR) continue;
        ck_tensor_info info;
        ckey_status st = tensor_info(vm, value, key, &info);
        if (st) return st;
        if ((st = ck_table_add(out, key->u.s.p, key->u.s.len, &info, vm->label, vm->err)))
            return st;
    }
    return CKEY_OK;
}

ckey_status ck_pickle_load_state_dict(const uint8_t *pkl, size_t len, const char *label,
                                      ck_pickle_storage_fn storage, void *ctx,
                                      ck_tensor_table *out, ckey_error *err) {
    pk_vm vm = {.p = pkl, .len = len, .label = label, .err = err, .storage = storage,
                .storage_ctx = ctx};
    uint32_t o = 0, result = 0;
    ckey_status st = CKEY_OK;
    /* Shared None, False, True at indexes 0, 1, 2. */
    if ((st = new_obj(&vm, PK_NONE, &o)) || (st = new_obj(&vm, PK_BOOL, &o)) ||
        (st = new_obj(&vm, PK_BOOL, &o)))
        goto done;
    vm.objs[OBJ_TRUE].u.i = 1;
    if ((st = run(&vm, &result))) goto done;
    st = collect(&vm, result, out);
done:
    for (size_t i = 0; i < vm.nobj; i++) {
        int k = vm.objs[i].kind;
        if (k == PK_TUPLE || k == PK_LIST || k == PK_DICT) free(vm.objs[i].u.items);
    }
    free(vm.objs);
    free(vm.stack);
    free(vm.marks);
    free(vm.memo);
    return st;
}
