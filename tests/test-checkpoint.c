/*
 * Checkpoint readers: real torch.save files and hand-written safetensors from
 * tools/reference/make_ckpt_fixtures.py (exact values), the safetensors
 * writer round trip, the half-precision conversions, and malformed files
 * (built here by hand or by mutating the fixtures) that must be refused with
 * the right status and a message that names the problem.
 */
#include <errno.h>
#include <float.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "core/core.h"
#include "ckey_media.h"
#include "ckpt/checkpoint.h"
#include "ckpt/json.h"
#include "support/testutil.h"

/* ---------------------------------------------------------------- helpers */

typedef struct buf {
    uint8_t *p;
    size_t n, cap;
} buf;

static void put(buf *b, const void *d, size_t n) {
    if (b->n + n > b->cap) {
        size_t cap = b->cap ? b->cap : 256;
        while (cap < b->n + n) cap *= 2;
        uint8_t *p = realloc(b->p, cap);
        if (!p) abort();
        b->p = p;
        b->cap = cap;
    }
    if (n) memcpy(b->p + b->n, d, n);
    b->n += n;
}

static void put8(buf *b, unsigned v) { uint8_t x = (uint8_t)v; put(b, &x, 1); }
static void put16(buf *b, unsigned v) { put8(b, v & 0xff); put8(b, (v >> 8) & 0xff); }
static void put32(buf *b, uint32_t v) { put16(b, v & 0xffff); put16(b, v >> 16); }
static void put64(buf *b, uint64_t v) { put32(b, (uint32_t)v); put32(b, (uint32_t)(v >> 32)); }
static void puts_(buf *b, const char *s) { put(b, s, strlen(s)); }
static void buf_free(buf *b) { free(b->p); memset(b, 0, sizeof *b); }

static void set32(uint8_t *p, uint32_t v) {
    for (int i = 0; i < 4; i++) p[i] = (uint8_t)(v >> (8 * i));
}
static void set64(uint8_t *p, uint64_t v) {
    for (int i = 0; i < 8; i++) p[i] = (uint8_t)(v >> (8 * i));
}
static uint32_t get32(const uint8_t *p) {
    return (uint32_t)p[0] | (uint32_t)p[1] << 8 | (uint32_t)p[2] << 16 | (uint32_t)p[3] << 24;
}

static uint32_t crc32_of(const uint8_t *d, size_t n) {
    uint32_t c = 0xffffffffu;
    for (size_t i = 0; i < n; i++) {
        c ^= d[i];
        for (int k = 0; k < 8; k++) c = (c >> 1) ^ (0xedb88320u & (0u - (c & 1)));
    }
    return ~c;
}

/* A zip writer for hand-made archives: stored (or falsely "deflated")
 * entries; with zip64 set, every size and offset goes through the ZIP64
 * extra field and end records, as large torch files do. */
typedef struct zent {
    const char *name;
    const void *data;
    size_t len;
    uint16_t method;
} zent;

static void build_zip(buf *z, const zent *e, size_t n, int zip64) {
    uint64_t *offs = calloc(n ? n : 1, sizeof *offs);
    for (size_t i = 0; i < n; i++) {
        offs[i] = z->n;
        uint32_t crc = crc32_of(e[i].data, e[i].len);
        put32(z, 0x04034b50u);
        put16(z, 20), put16(z, 0), put16(z, e[i].method), put16(z, 0), put16(z, 0);
        put32(z, crc), put32(z, (uint32_t)e[i].len), put32(z, (uint32_t)e[i].len);
        put16(z, (unsigned)strlen(e[i].name)), put16(z, 0);
        puts_(z, e[i].name);
        put(z, e[i].data, e[i].len);
    }
    uint64_t cd = z->n;
    for (size_t i = 0; i < n; i++) {
        uint32_t crc = crc32_of(e[i].data, e[i].len);
        put32(z, 0x02014b50u);
        put16(z, 45), put16(z, 45), put16(z, 0), put16(z, e[i].method), put16(z, 0), put16(z, 0);
        put32(z, crc);
        put32(z, zip64 ? 0xffffffffu : (uint32_t)e[i].len);
        put32(z, zip64 ? 0xffffffffu : (uint32_t)e[i].len);
        put16(z, (unsigned)strlen(e[i].name)), put16(z, zip64 ? 28 : 0), put16(z, 0);
        put16(z, 0), put16(z, 0), put32(z, 0);
        put32(z, zip64 ? 0xffffffffu : (uint32_t)offs[i]);
        puts_(z, e[i].name);
        if (zip64) {
            put16(z, 1), put16(z, 24);
            put64(z, e[i].len), put64(z, e[i].len), put64(z, offs[i]);
        }
    }
    uint64_t cd_size = z->n - cd;
    if (zip64) {
        uint64_t rec = z->n;
        put32(z, 0x06064b50u), put64(z, 44), put16(z, 45), put16(z, 45), put32(z, 0), put32(z, 0);
        put64(z, n), put64(z, n), put64(z, cd_size), put64(z, cd);
        put32(z, 0x07064b50u), put32(z, 0), put64(z, rec), put32(z, 1);
    }
    put32(z, 0x06054b50u), put16(z, 0), put16(z, 0);
    put16(z, zip64 ? 0xffff : (unsigned)n), put16(z, zip64 ? 0xffff : (unsigned)n);
    put32(z, zip64 ? 0xffffffffu : (uint32_t)cd_size), put32(z, zip64 ? 0xffffffffu : (uint32_t)cd);
    put16(z, 0);
    free(offs);
}

/* Pickle emitters (protocol 2, as torch.save writes). */
static void pk_op(buf *b, unsigned op) { put8(b, op); }
static void pk_str(buf *b, const char *s) {
    pk_op(b, 'X');
    put32(b, (uint32_t)strlen(s));
    puts_(b, s);
}
static void pk_int(buf *b, int64_t v) {
    if (v >= 0 && v < 256) {
        pk_op(b, 'K'), put8(b, (unsigned)v);
    } else if (v >= INT32_MIN && v <= INT32_MAX) {
        pk_op(b, 'J'), put32(b, (uint32_t)(int32_t)v);
    } else {
        pk_op(b, 0x8a), put8(b, 8), put64(b, (uint64_t)v);
    }
}
static void pk_global(buf *b, const char *mod, const char *name) {
    pk_op(b, 'c');
    puts_(b, mod), put8(b, '\n'), puts_(b, name), put8(b, '\n');
}
static void pk_tensor(buf *b, const char *stype, const char *key, int64_t numel, int64_t offset,
                      int nd, const int64_t *size, const int64_t *stride) {
    pk_global(b, "torch._utils", "_rebuild_tensor_v2");
    pk_op(b, '(');
    pk_op(b, '(');
    pk_str(b, "storage"), pk_global(b, "torch", stype), pk_str(b, key), pk_str(b, "cpu");
    pk_int(b, numel);
    pk_op(b, 't'), pk_op(b, 'Q');
    pk_int(b, offset);
    pk_op(b, '(');
    for (int i = 0; i < nd; i++) pk_int(b, size[i]);
    pk_op(b, 't'), pk_op(b, '(');
    for (int i = 0; i < nd; i++) pk_int(b, stride[i]);
    pk_op(b, 't');
    pk_op(b, 0x89);
    pk_global(b, "collections", "OrderedDict"), pk_op(b, ')'), pk_op(b, 'R');
    pk_op(b, 't'), pk_op(b, 'R');
}
/* {name: tensor} with one tensor over storage "0". */
static void pk_one_tensor(buf *b, const char *stype, int64_t numel, int64_t offset, int nd,
                          const int64_t *size, const int64_t *stride) {
    pk_op(b, 0x80), put8(b, 2);
    pk_op(b, '}'), pk_op(b, '(');
    pk_str(b, "w");
    pk_tensor(b, stype, "0", numel, offset, nd, size, stride);
    pk_op(b, 'u'), pk_op(b, '.');
}

/* A torch-style archive around a pickle, with storage "0" of `bytes` bytes
 * holding floats 0, 0.5, 1, ... */
static void make_pth(buf *z, const buf *pkl, size_t bytes, const char *byteorder) {
    float *st = calloc(bytes / 4 + 1, sizeof(float));
    for (size_t i = 0; i < bytes / 4; i++) st[i] = 0.5f * (float)i;
    zent e[] = {
        {"archive/data.pkl", pkl->p, pkl->n, 0},
        {"archive/byteorder", byteorder, strlen(byteorder), 0},
        {"archive/data/0", st, bytes, 0},
        {"archive/version", "3\n", 2, 0},
    };
    build_zip(z, e, CK_ARRAY_LEN(e), 0);
    free(st);
}

static void fixture_path(char *out, size_t n, const char *name) {
    snprintf(out, n, "%s/ckpt/%s", ck_fixtures_dir(), name);
}

static ck_checkpoint *open_fixture(const char *name) {
    char path[1024];
    fixture_path(path, sizeof path, name);
    ck_checkpoint *c = NULL;
    ckey_error err = {0};
    ckey_status st = ck_checkpoint_open(path, &c, &err);
    CHECKF(st == CKEY_OK, "%s: %s", path, err.message);
    return c;
}

static unsigned char *read_fixture(const char *name, size_t *size) {
    char path[1024];
    fixture_path(path, sizeof path, name);
    unsigned char *d = ck_read_file(path, size);
    CHECKF(d != NULL, "cannot read %s", path);
    return d;
}

static int expect_fail_(const char *file, int line, const void *data, size_t size,
                        const char *label, ckey_status want, const char *substr) {
    ck_checkpoint *c = NULL;
    ckey_error err = {0};
    ckey_status st = ck_checkpoint_open_memory(data, size, label, &c, &err);
    int ok = 1;
    if (st != want || c != NULL) {
        fprintf(stderr, "  FAIL %s:%d: %s: got %s (%s), want %s\n", file, line, label,
                ckey_status_name(st), st ? err.message : "opened", ckey_status_name(want));
        ok = 0;
    } else if (strncmp(err.message, label, strlen(label)) != 0 || !strstr(err.message, substr)) {
        fprintf(stderr, "  FAIL %s:%d: %s: message \"%s\" lacks the label or \"%s\"\n", file,
                line, label, err.message, substr);
        ok = 0;
    } else {
        printf("  refused %-22s %s: %s\n", label, ckey_status_name(st), err.message);
    }
    ck_checkpoint_close(c);
    if (!ok) ck_test_failed = 1;
    return ok;
}
#define EXPECT_FAIL(data, size, label, want, substr) \
    expect_fail_(__FILE__, __LINE__, data, size, label, want, substr)

/* Build a one-tensor pth from a pickle and expect it refused. */
#define EXPECT_PKL_FAIL(pkl, bytes, label, want, substr)            \
    do {                                                            \
        buf z_ = {0};                                               \
        make_pth(&z_, &(pkl), (bytes), "little");                   \
        EXPECT_FAIL(z_.p, z_.n, label, want, substr);               \
        buf_free(&z_);                                              \
    } while (0)

static int same_float(float a, float b) {
    if (isnan(a) || isnan(b)) return isnan(a) && isnan(b);
    uint32_t x, y;
    memcpy(&x, &a, 4);
    memcpy(&y, &b, 4);
    return x == y;
}

/* Every tensor of `c` equals the dense version in `want` (float tensors
 * bit-exactly after conversion, others byte-for-byte). */
static void compare_to_expected(const ck_checkpoint *c, const ck_checkpoint *want, size_t expect_n) {
    CHECKF(ck_checkpoint_count(c) == expect_n, "%zu tensors, want %zu", ck_checkpoint_count(c),
           expect_n);
    size_t floats = 0;
    for (size_t i = 0; i < ck_checkpoint_count(c); i++) {
        const ck_tensor_info *t = ck_checkpoint_at(c, i);
        const ck_tensor_info *w = ck_checkpoint_find(want, t->name);
        CHECKF(w != NULL, "tensor '%s' is not in the expected file", t->name);
        if (!w) continue;
        CHECKF(t->ndim == w->ndim && t->numel == w->numel, "'%s' shape", t->name);
        for (int d = 0; d < t->ndim && d < w->ndim; d++)
            CHECKF(t->shape[d] == w->shape[d], "'%s' dim %d: %lld vs %lld", t->name, d,
                   (long long)t->shape[d], (long long)w->shape[d]);
        int is_float = t->dtype == CK_F32 || t->dtype == CK_F16 || t->dtype == CK_BF16 ||
                       t->dtype == CK_F64;
        if (is_float) {
            CHECKF(w->dtype == CK_F32 || w->dtype == t->dtype, "'%s' dtype", t->name);
            float *got = malloc((t->numel + 1) * sizeof(float));
            float *exp = malloc((t->numel + 1) * sizeof(float));
            ckey_error err = {0};
            CHECK(ck_tensor_to_f32(t, got, &err) == CKEY_OK);
            CHECK(ck_tensor_to_f32(w, exp, &err) == CKEY_OK);
            size_t bad = 0;
            for (uint64_t k = 0; k < t->numel; k++) bad += !same_float(got[k], exp[k]);
            CHECKF(bad == 0, "'%s': %zu of %llu values differ", t->name, bad,
                   (unsigned long long)t->numel);
            floats += t->numel;
            free(got);
            free(exp);
        } else {
            CHECKF(t->dtype == w->dtype, "'%s' dtype %s vs %s", t->name, ck_dtype_name(t->dtype),
                   ck_dtype_name(w->dtype));
            CHECKF(memcmp(t->data, w->data, t->numel * ck_dtype_size(t->dtype)) == 0,
                   "'%s' values differ", t->name);
        }
    }
    printf("  %zu tensors match (%zu float values bit-exact)\n", ck_checkpoint_count(c), floats);
}

#define BASIC_TENSORS 21 /* 7 from the module state dict + 14 added */

/* ------------------------------------------------------------ valid files */

static void test_basic_pth(void) {
    ck_checkpoint *c = open_fixture("basic.pth");
    ck_checkpoint *want = open_fixture("expected.safetensors");
    REQUIRE(c && want);
    CHECK(strcmp(ck_checkpoint_format(c), "pth") == 0);
    CHECK(strcmp(ck_checkpoint_format(want), "safetensors") == 0);
    compare_to_expected(c, want, BASIC_TENSORS);
    /* File order is kept. */
    CHECK(strcmp(ck_checkpoint_at(c, 0)->name, "0.weight") == 0);
    CHECK(ck_checkpoint_at(c, BASIC_TENSORS) == NULL);
    CHECK(ck_checkpoint_find(c, "nope") == NULL);
    CHECK(ck_checkpoint_meta(c, "generator") == NULL);

    const ck_tensor_info *nbt = ck_checkpoint_find(c, "1.num_batches_tracked");
    REQUIRE(nbt);
    CHECK(nbt->dtype == CK_I64 && nbt->ndim == 0 && nbt->numel == 1);
    int64_t v;
    memcpy(&v, nbt->data, 8);
    CHECK(v == 1);
    float f;
    ckey_error err = {0};
    CHECK(ck_tensor_to_f32(nbt, &f, &err) == CKEY_ERR_MODEL && strstr(err.message, "int64"));

    /* Views share their base's storage: nothing is copied. */
    const ck_tensor_info *base = ck_checkpoint_find(c, "base");
    const ck_tensor_info *bt = ck_checkpoint_find(c, "base_t");
    const ck_tensor_info *sl = ck_checkpoint_find(c, "slice");
    REQUIRE(base && bt && sl);
    CHECK(bt->data == base->data && bt->stride[0] == 1 && bt->stride[1] == 6);
    CHECK(sl->data == base->data + 8 * 4 && sl->stride[0] == 6 && sl->stride[1] == 1);
    CHECK(sl->avail_bytes == (24 - 8) * 4 && base->avail_bytes == 24 * 4);
    float s[6];
    CHECK(ck_tensor_to_f32(sl, s, &err) == CKEY_OK);
    /* base[1:3, 2:5] of arange(24)/4 - 2 */
    CHECK(s[0] == 8 * 0.25f - 2 && s[2] == 10 * 0.25f - 2 && s[3] == 14 * 0.25f - 2);

    const ck_tensor_info *h = ck_checkpoint_find(c, "half");
    REQUIRE(h && h->dtype == CK_F16 && h->numel == 10);
    float hv[10];
    CHECK(ck_tensor_to_f32(h, hv, &err) == CKEY_OK);
    CHECK(hv[2] == 65504.0f && isinf(hv[3]) && hv[3] > 0 && isinf(hv[4]) && hv[4] < 0);
    CHECK(isnan(hv[5]) && hv[6] == 0x1p-24f);
    CHECK(ck_checkpoint_find(c, "bf")->dtype == CK_BF16);
    CHECK(ck_checkpoint_find(c, "dbl")->dtype == CK_F64);
    CHECK(ck_checkpoint_find(c, "param")->numel == 3);
    CHECK(ck_checkpoint_find(c, "scalar")->ndim == 0);
    const ck_tensor_info *em = ck_checkpoint_find(c, "empty");
    CHECK(em && em->numel == 0 && em->ndim == 2 && em->shape[1] == 3);
    CHECK(ck_tensor_to_f32(em, NULL, &err) == CKEY_OK);
    ck_checkpoint_close(c);
    ck_checkpoint_close(want);
}

static void test_proto4_pth(void) {
    ck_checkpoint *c = open_fixture("proto4.pth");
    ck_checkpoint *want = open_fixture("expected.safetensors");
    REQUIRE(c && want);
    compare_to_expected(c, want, BASIC_TENSORS);
    ck_checkpoint_close(c);
    ck_checkpoint_close(want);
}

static void test_mixed_safetensors(void) {
    ck_checkpoint *c = open_fixture("mixed.safetensors");
    ck_checkpoint *want = open_fixture("expected.safetensors");
    REQUIRE(c && want);
    compare_to_expected(c, want, BASIC_TENSORS);
    CHECK(ck_checkpoint_find(c, "half")->dtype == CK_F16);
    CHECK(ck_checkpoint_find(c, "bf")->dtype == CK_BF16);
    CHECK(ck_checkpoint_find(c, "i32")->dtype == CK_I32);
    CHECK(ck_checkpoint_find(c, "flag")->dtype == CK_BOOL);
    CHECK(ck_checkpoint_find(c, "u8")->dtype == CK_U8);
    const char *kind = ck_checkpoint_meta(c, "kind");
    CHECK(kind && strcmp(kind, "mixed") == 0);
    const char *gen = ck_checkpoint_meta(want, "generator");
    CHECK(gen && strcmp(gen, "make_ckpt_fixtures.py") == 0);
    ck_checkpoint_close(c);
    ck_checkpoint_close(want);
}

static void test_nested_state_dict(void) {
    ck_checkpoint *c = open_fixture("nested.pth");
    ck_checkpoint *want = open_fixture("expected.safetensors");
    REQUIRE(c && want);
    /* Only the state_dict entry: not "stray" nor the optimizer's tensors. */
    compare_to_expected(c, want, 5);
    CHECK(ck_checkpoint_find(c, "stray") == NULL && ck_checkpoint_find(c, "exp_avg") == NULL);
    ck_checkpoint_close(c);
    ck_checkpoint_close(want);
}

static void test_prefixes_stripped(void) {
    ck_checkpoint *c = open_fixture("orig_mod.pth");
    ck_checkpoint *want = open_fixture("expected.safetensors");
    REQUIRE(c && want);
    compare_to_expected(c, want, 5);
    CHECK(ck_checkpoint_find(c, "0.weight") && ck_checkpoint_find(c, "0.bias"));
    ck_checkpoint_close(c);
    ck_checkpoint_close(want);
}

static void test_memory_and_drop_pages(void) {
    size_t n = 0;
    unsigned char *d = read_fixture("basic.pth", &n);
    REQUIRE(d);
    ck_checkpoint *m = NULL, *f = open_fixture("basic.pth");
    ckey_error err = {0};
    CHECK(ck_checkpoint_open_memory(d, n, "mem", &m, &err) == CKEY_OK);
    REQUIRE(m && f);
    for (size_t i = 0; i < ck_checkpoint_count(f); i++) {
        const ck_tensor_info *t = ck_checkpoint_at(f, i);
        if (t->dtype != CK_F32 || !t->numel) continue;
        float a[64], b[64];
        REQUIRE(t->numel <= 64);
        CHECK(ck_tensor_to_f32(t, a, &err) == CKEY_OK);
        ck_checkpoint_drop_pages(f, t);
        ck_checkpoint_drop_pages(m, ck_checkpoint_find(m, t->name)); /* no-op in memory */
        CHECK(ck_tensor_to_f32(t, b, &err) == CKEY_OK); /* pages fault back in */
        CHECK(memcmp(a, b, t->numel * 4) == 0);
    }
    ck_checkpoint_close(m);
    ck_checkpoint_close(f);
    ck_checkpoint_close(NULL);
    free(d);
}

/* A hand-made archive, stored with ZIP64 records and extra fields, and a
 * strided view that needs the general conversion path. */
static void test_zip64_archive(void) {
    buf pkl = {0}, z = {0};
    int64_t size[3] = {2, 3, 2}, stride[3] = {1, 4, 2};
    pk_one_tensor(&pkl, "FloatStorage", 12, 0, 3, size, stride);
    float st[12];
    for (int i = 0; i < 12; i++) st[i] = (float)i;
    zent e[] = {{"my model/data.pkl", pkl.p, pkl.n, 0}, {"my model/data/0", st, sizeof st, 0}};
    build_zip(&z, e, 2, 1);
    ck_checkpoint *c = NULL;
    ckey_error err = {0};
    CHECKF(ck_checkpoint_open_memory(z.p, z.n, "zip64", &c, &err) == CKEY_OK, "%s", err.message);
    if (c) {
        const ck_tensor_info *t = ck_checkpoint_find(c, "w");
        REQUIRE(t && t->numel == 12);
        float out[12];
        CHECK(ck_tensor_to_f32(t, out, &err) == CKEY_OK);
        int bad = 0;
        for (int i = 0; i < 2; i++)
            for (int j = 0; j < 3; j++)
                for (int k = 0; k < 2; k++) bad += out[(i * 3 + j) * 2 + k] != (float)(i + 4 * j + 2 * k);
        CHECK(bad == 0);
    }
    ck_checkpoint_close(c);
    buf_free(&pkl);
    buf_free(&z);
}

static void test_safetensors_roundtrip(void) {
    char path[] = "/tmp/ckey-test-st-XXXXXX";
    int fd = mkstemp(path);
    REQUIRE(fd >= 0);
    close(fd);
    float a[6] = {1, -2, 3.5f, 1e-30f, -0.0f, 65536};
    float sc = 42;
    float big[1000];
    for (int i = 0; i < 1000; i++) big[i] = (float)i * 0.001f;
    ck_st_entry e[] = {
        {"enc.w \"quoted\"\\", 2, {2, 3}, a},
        {"scalar", 0, {0}, &sc},
        {"empty", 2, {0, 5}, NULL},
        {"unicode.\xc3\xa9", 3, {10, 10, 10}, big},
    };
    const char *meta[] = {"ckey.head_dim", "56", "note", "tab\there\n", NULL};
    ckey_error err = {0};
    REQUIRE(ck_safetensors_write(path, e, 4, meta, &err) == CKEY_OK);

    char *tmp = ckey_temp_path(path);
    CHECK(tmp && access(tmp, F_OK) != 0);
    free(tmp);
    size_t n = 0;
    unsigned char *raw = ck_read_file(path, &n);
    REQUIRE(raw && n > 8);
    uint64_t hl = 0;
    for (int i = 0; i < 8; i++) hl |= (uint64_t)raw[i] << (8 * i);
    CHECK((8 + hl) % 8 == 0);
    free(raw);

    ck_checkpoint *c = NULL;
    CHECKF(ck_checkpoint_open(path, &c, &err) == CKEY_OK, "%s", err.message);
    REQUIRE(c);
    CHECK(ck_checkpoint_count(c) == 4);
    CHECK(strcmp(ck_checkpoint_meta(c, "ckey.head_dim"), "56") == 0);
    CHECK(strcmp(ck_checkpoint_meta(c, "note"), "tab\there\n") == 0);
    for (int i = 0; i < 4; i++) {
        const ck_tensor_info *t = ck_checkpoint_find(c, e[i].name);
        CHECKF(t != NULL, "missing '%s'", e[i].name);
        if (!t) continue;
        CHECK(strcmp(ck_checkpoint_at(c, (size_t)i)->name, e[i].name) == 0);
        CHECK(t->dtype == CK_F32 && t->ndim == e[i].ndim);
        uint64_t numel = 1;
        for (int d = 0; d < e[i].ndim; d++) {
            CHECK(t->shape[d] == e[i].shape[d]);
            numel *= (uint64_t)e[i].shape[d];
        }
        CHECK(t->numel == numel);
        if (numel) {
            float *got = malloc(numel * sizeof(float));
            CHECK(ck_tensor_to_f32(t, got, &err) == CKEY_OK);
            CHECK(memcmp(got, e[i].data, numel * sizeof(float)) == 0);
            free(got);
        }
    }
    ck_checkpoint_close(c);

    /* Refusals leave no file behind. */
    ck_st_entry dup[] = {{"x", 1, {1}, a}, {"x", 1, {1}, a}};
    CHECK(ck_safetensors_write(path, dup, 2, NULL, &err) == CKEY_ERR_INVALID_ARG &&
          strstr(err.message, "twice"));
    ck_st_entry badshape[] = {{"x", 1, {-1}, a}};
    CHECK(ck_safetensors_write(path, badshape, 1, NULL, &err) == CKEY_ERR_INVALID_ARG);
    ck_st_entry reserved[] = {{"__metadata__", 1, {1}, a}};
    CHECK(ck_safetensors_write(path, reserved, 1, NULL, &err) == CKEY_ERR_INVALID_ARG);
    CHECK(ck_safetensors_write("/nonexistent-dir/x.safetensors", e, 1, NULL, &err) == CKEY_ERR_IO &&
          strstr(err.message, "cannot create"));
    unlink(path);
}

static void test_committed_model_fixtures(void) {
    static const char *const names[] = {"tiny/tiny.pth", "tiny/tiny_fp16.pth", "tiny/tiny_bf16.pth",
                                        "full256.safetensors"};
    int found = 0;
    for (size_t i = 0; i < CK_ARRAY_LEN(names); i++) {
        char path[1024];
        snprintf(path, sizeof path, "%s/%s", ck_fixtures_dir(), names[i]);
        if (access(path, R_OK) != 0) continue;
        found++;
        ck_checkpoint *c = NULL;
        ckey_error err = {0};
        double t0 = 0;
        CHECKF(ck_checkpoint_open(path, &c, &err) == CKEY_OK, "%s", err.message);
        (void)t0;
        if (!c) continue;
        uint64_t values = 0;
        for (size_t k = 0; k < ck_checkpoint_count(c); k++) values += ck_checkpoint_at(c, k)->numel;
        printf("  %s: %s, %zu tensors, %llu values\n", names[i], ck_checkpoint_format(c),
               ck_checkpoint_count(c), (unsigned long long)values);
        CHECK(ck_checkpoint_count(c) > 0);
        ck_checkpoint_close(c);
    }
    if (!found) SKIP("no model fixtures under %s", ck_fixtures_dir());
}

/* ------------------------------------------------------- half precision */

static float bits_to_f(uint32_t u) {
    float f;
    memcpy(&f, &u, 4);
    return f;
}

/* float16 value of h computed in double: the reference for rounding. */
static double f16_value(uint16_t h) {
    int e = (h >> 10) & 31, m = h & 1023;
    double v = e ? ldexp(1024 + m, e - 25) : ldexp(m, -24);
    return (h & 0x8000) ? -v : v;
}

static void test_f16_conversions(void) {
    /* Every finite half round-trips exactly; specials keep their class. */
    int bad = 0;
    for (uint32_t h = 0; h < 65536; h++) {
        float f = ck_f16_to_f32((uint16_t)h);
        int e = (h >> 10) & 31;
        if (e == 31) {
            if ((h & 1023) == 0) bad += !(isinf(f) && ((h & 0x8000) ? f < 0 : f > 0));
            else bad += !isnan(f) || !isnan(ck_f16_to_f32(ck_f32_to_f16(f)));
            continue;
        }
        bad += (double)f != f16_value((uint16_t)h);
        bad += ck_f32_to_f16(f) != h;
    }
    CHECKF(bad == 0, "%d half values do not round-trip", bad);

    /* Narrowing: round to nearest, ties to even, checked against the exact
     * neighbours for a sweep of float32 bit patterns. */
    int wrong = 0;
    uint32_t x = 12345;
    for (int i = 0; i < 2000000; i++) {
        x = x * 1664525u + 1013904223u;
        uint32_t bits = (x & 0x8fffffffu) | ((x >> 3) & 0x30000000u); /* bias toward half range */
        float f = bits_to_f(bits);
        if (isnan(f)) continue;
        uint16_t h = ck_f32_to_f16(f);
        double v = fabs((double)f);
        uint16_t mag = h & 0x7fff;
        if (v >= 65520.0) { wrong += mag != 0x7c00; continue; }
        if (mag >= 0x7c00) { wrong++; continue; }
        double got = fabs(f16_value(h));
        double lo = mag ? fabs(f16_value((uint16_t)(mag - 1))) : -1;
        double hi = fabs(f16_value((uint16_t)(mag + 1)));
        /* got must be nearest; on a tie, the even mantissa. */
        double dg = fabs(v - got);
        if ((lo >= 0 && fabs(v - lo) < dg) || (mag + 1 < 0x7c00 && fabs(v - hi) < dg)) wrong++;
        else if (((lo >= 0 && fabs(v - lo) == dg) || fabs(v - hi) == dg) && (mag & 1)) wrong++;
        if ((h & 0x8000) != ((bits >> 16) & 0x8000) && mag) wrong++;
    }
    CHECKF(wrong == 0, "%d float32 -> float16 roundings are wrong", wrong);

    CHECK(ck_f32_to_f16(65519.0f) == 0x7bff);
    CHECK(ck_f32_to_f16(65520.0f) == 0x7c00);
    CHECK(ck_f32_to_f16(-INFINITY) == 0xfc00);
    CHECK(ck_f32_to_f16(0x1p-25f) == 0);                    /* tie -> even (zero) */
    CHECK(ck_f32_to_f16(nextafterf(0x1p-25f, 1)) == 1);
    CHECK(ck_f32_to_f16(0x1.8p-24f) == 2);                  /* 1.5 ulp ties to 2 */
    CHECK(ck_f32_to_f16(0x1p-14f) == 0x0400);               /* smallest normal */
    CHECK(ck_f32_to_f16(nextafterf(0x1p-14f, 0)) == 0x0400); /* rounds up into the normals */
    CHECK(ck_f32_to_f16(1.0f + 0x1p-11f) == 0x3c00);        /* tie, even stays */
    CHECK(ck_f32_to_f16(1.0f + 0x1.8p-10f) == 0x3c02);      /* tie, odd rounds up */
    CHECK(isnan(ck_f16_to_f32(ck_f32_to_f16(NAN))));
    CHECK(ck_f32_to_f16(-0.0f) == 0x8000);
#if defined(__FLT16_MAX__)
    /* The compiler's own conversion, where the target has one. */
    int hw = 0;
    for (int i = 0; i < 200000; i++) {
        x = x * 1664525u + 1013904223u;
        float f = bits_to_f(x);
        if (isnan(f)) continue;
        _Float16 r = (_Float16)f;
        uint16_t hb;
        memcpy(&hb, &r, 2);
        hw += hb != ck_f32_to_f16(f);
    }
    CHECKF(hw == 0, "%d differ from _Float16", hw);
#endif
}

static void test_bf16_conversions(void) {
    int bad = 0;
    for (uint32_t h = 0; h < 65536; h++) {
        float f = ck_bf16_to_f32((uint16_t)h);
        if (isnan(f)) bad += !isnan(ck_bf16_to_f32(ck_f32_to_bf16(f)));
        else bad += ck_f32_to_bf16(f) != h;
    }
    CHECKF(bad == 0, "%d bfloat16 values do not round-trip", bad);
    CHECK(ck_f32_to_bf16(bits_to_f(0x3f808000u)) == 0x3f80); /* tie, even stays */
    CHECK(ck_f32_to_bf16(bits_to_f(0x3f818000u)) == 0x3f82); /* tie, odd rounds up */
    CHECK(ck_f32_to_bf16(bits_to_f(0x3f808001u)) == 0x3f81);
    CHECK(ck_f32_to_bf16(FLT_MAX) == 0x7f80);                /* rounds to inf */
    CHECK(ck_f32_to_bf16(bits_to_f(0x00008000u)) == 0x0000); /* subnormal tie to even */
    CHECK(ck_f32_to_bf16(bits_to_f(0x00018000u)) == 0x0002);
    uint16_t qn = ck_f32_to_bf16(bits_to_f(0x7f800001u)); /* payload below bf16 bits */
    CHECK((qn & 0x7f80) == 0x7f80 && (qn & 0x7f));
    CHECK(ck_bf16_to_f32(0x4049) == bits_to_f(0x40490000u));
}

/* ---------------------------------------------------------------- refusals */

static void test_bad_zip(void) {
    size_t n = 0;
    unsigned char *d = read_fixture("basic.pth", &n);
    REQUIRE(d && n > 200);
    unsigned char *m = malloc(n);
    REQUIRE(m);

    /* Truncation at several points: the end records are gone. */
    size_t cuts[] = {4, 100, n / 2, n - 200, n - 23, n - 1};
    for (size_t i = 0; i < CK_ARRAY_LEN(cuts); i++) {
        char label[32];
        snprintf(label, sizeof label, "cut@%zu", cuts[i]);
        EXPECT_FAIL(d, cuts[i], label, CKEY_ERR_FORMAT, "truncated");
    }
    /* Cut off the sniffable magic. */
    EXPECT_FAIL(d, 3, "cut@3", CKEY_ERR_FORMAT, "not a torch.save zip or a safetensors");

    /* No end-of-central-directory signature. */
    memcpy(m, d, n);
    m[n - 22] = 'X';
    EXPECT_FAIL(m, n, "no-eocd", CKEY_ERR_FORMAT, "end-of-central-directory");

    /* torch writes a ZIP64 end record: point its directory past the file. */
    memcpy(m, d, n);
    REQUIRE(get32(m + n - 22 - 20) == 0x07064b50u);
    uint64_t rec = 0;
    for (int i = 0; i < 8; i++) rec |= (uint64_t)m[n - 42 + 8 + i] << (8 * i);
    REQUIRE(rec + 56 <= n && get32(m + rec) == 0x06064b50u);
    set64(m + rec + 48, (uint64_t)n * 4);
    EXPECT_FAIL(m, n, "cd-beyond-file", CKEY_ERR_FORMAT, "central directory");
    memcpy(m, d, n);
    set64(m + n - 42 + 8, (uint64_t)1 << 62);
    EXPECT_FAIL(m, n, "zip64-locator-bad", CKEY_ERR_FORMAT, "zip64");

    /* First central entry (data.pkl): claim a size past the end. */
    memcpy(m, d, n);
    uint64_t cd = 0;
    for (int i = 0; i < 8; i++) cd |= (uint64_t)m[rec + 48 + i] << (8 * i);
    REQUIRE(get32(m + cd) == 0x02014b50u);
    set32(m + cd + 20, (uint32_t)n), set32(m + cd + 24, (uint32_t)n);
    EXPECT_FAIL(m, n, "entry-past-end", CKEY_ERR_FORMAT, "extends past");
    /* ... or say it is deflated. */
    memcpy(m, d, n);
    m[cd + 10] = 8;
    EXPECT_FAIL(m, n, "compressed-pkl", CKEY_ERR_UNSUPPORTED, "compressed");
    /* ... or encrypted. */
    memcpy(m, d, n);
    m[cd + 8] |= 1;
    EXPECT_FAIL(m, n, "encrypted", CKEY_ERR_UNSUPPORTED, "encrypted");
    /* ... or point it at something that is not a local header. */
    memcpy(m, d, n);
    set32(m + cd + 42, 7);
    EXPECT_FAIL(m, n, "bad-local-offset", CKEY_ERR_FORMAT, "no local header");
    /* Local name differs from the central one. */
    memcpy(m, d, n);
    m[30] ^= 0x20;
    EXPECT_FAIL(m, n, "local-name", CKEY_ERR_FORMAT, "local header name");

    free(m);
    free(d);

    /* Hand-made archives. */
    buf pkl = {0}, z = {0};
    int64_t size[1] = {4}, stride[1] = {1};
    pk_one_tensor(&pkl, "FloatStorage", 4, 0, 1, size, stride);
    float st[4] = {1, 2, 3, 4};

    zent nopkl[] = {{"archive/data/0", st, 16, 0}, {"archive/version", "3\n", 2, 0}};
    build_zip(&z, nopkl, 2, 0);
    EXPECT_FAIL(z.p, z.n, "no-data.pkl", CKEY_ERR_FORMAT, "no data.pkl");
    buf_free(&z);

    zent defl[] = {{"archive/data.pkl", pkl.p, pkl.n, 8}, {"archive/data/0", st, 16, 0}};
    build_zip(&z, defl, 2, 0);
    EXPECT_FAIL(z.p, z.n, "deflated", CKEY_ERR_UNSUPPORTED, "is compressed");
    buf_free(&z);

    zent defl_st[] = {{"archive/data.pkl", pkl.p, pkl.n, 0}, {"archive/data/0", st, 16, 8}};
    build_zip(&z, defl_st, 2, 0);
    EXPECT_FAIL(z.p, z.n, "deflated-storage", CKEY_ERR_UNSUPPORTED, "archive/data/0");
    buf_free(&z);

    zent nostore[] = {{"archive/data.pkl", pkl.p, pkl.n, 0}, {"archive/data/1", st, 16, 0}};
    build_zip(&z, nostore, 2, 0);
    EXPECT_FAIL(z.p, z.n, "missing-storage", CKEY_ERR_FORMAT, "missing from the archive");
    buf_free(&z);

    zent twice[] = {{"archive/data.pkl", pkl.p, pkl.n, 0}, {"archive/data/0", st, 16, 0},
                    {"archive/data/0", st, 16, 0}};
    build_zip(&z, twice, 3, 0);
    EXPECT_FAIL(z.p, z.n, "dup-entry", CKEY_ERR_FORMAT, "appears twice");
    buf_free(&z);

    zent two_pkl[] = {{"a/data.pkl", pkl.p, pkl.n, 0}, {"b/data.pkl", pkl.p, pkl.n, 0}};
    build_zip(&z, two_pkl, 2, 0);
    EXPECT_FAIL(z.p, z.n, "two-pkl", CKEY_ERR_FORMAT, "more than one data.pkl");
    buf_free(&z);

    zent ts[] = {{"m/constants.pkl", "x", 1, 0}, {"m/code/x.py", "x", 1, 0}};
    build_zip(&z, ts, 2, 0);
    EXPECT_FAIL(z.p, z.n, "torchscript", CKEY_ERR_FORMAT, "TorchScript");
    buf_free(&z);

    /* Non-zip64 archive whose directory offset lies past the file. */
    make_pth(&z, &pkl, 16, "little");
    set32(z.p + z.n - 6, (uint32_t)z.n + 100);
    EXPECT_FAIL(z.p, z.n, "cd-offset", CKEY_ERR_FORMAT, "lies outside the file");
    buf_free(&z);

    make_pth(&z, &pkl, 16, "big");
    EXPECT_FAIL(z.p, z.n, "byteorder-big", CKEY_ERR_UNSUPPORTED, "byteorder is 'big'");
    buf_free(&z);
    make_pth(&z, &pkl, 16, "middle");
    EXPECT_FAIL(z.p, z.n, "byteorder-odd", CKEY_ERR_FORMAT, "byteorder");
    buf_free(&z);
    make_pth(&z, &pkl, 16, "little\n");
    ck_checkpoint *c = NULL;
    ckey_error err = {0};
    CHECKF(ck_checkpoint_open_memory(z.p, z.n, "ok", &c, &err) == CKEY_OK, "%s", err.message);
    ck_checkpoint_close(c);
    buf_free(&z);
    buf_free(&pkl);
}

static void test_bad_pickle(void) {
    buf p = {0};
    int64_t s1[1] = {4}, t1[1] = {1};

    /* Disallowed globals, by GLOBAL and by STACK_GLOBAL. */
    pk_op(&p, 0x80), put8(&p, 2), pk_global(&p, "os", "system"), pk_str(&p, "echo hi");
    pk_op(&p, 0x85), pk_op(&p, 'R'), pk_op(&p, '.');
    EXPECT_PKL_FAIL(p, 16, "os.system", CKEY_ERR_UNSUPPORTED, "GLOBAL of os.system");
    buf_free(&p);
    pk_op(&p, 0x80), put8(&p, 4), pk_op(&p, 0x8c), put8(&p, 5), puts_(&p, "posix");
    pk_op(&p, 0x8c), put8(&p, 6), puts_(&p, "system"), pk_op(&p, 0x93), pk_op(&p, '.');
    EXPECT_PKL_FAIL(p, 16, "stack-global", CKEY_ERR_UNSUPPORTED, "STACK_GLOBAL of posix.system");
    buf_free(&p);
    pk_op(&p, 0x80), put8(&p, 2), pk_global(&p, "builtins", "eval"), pk_op(&p, '.');
    EXPECT_PKL_FAIL(p, 16, "builtins.eval", CKEY_ERR_UNSUPPORTED, "builtins.eval");
    buf_free(&p);
    pk_op(&p, 0x80), put8(&p, 2), pk_global(&p, "torch._utils", "_rebuild_tensor_v3"), pk_op(&p, '.');
    EXPECT_PKL_FAIL(p, 16, "rebuild-v3", CKEY_ERR_UNSUPPORTED, "torch._utils._rebuild_tensor_v3");
    buf_free(&p);
    pk_op(&p, 0x80), put8(&p, 2), pk_global(&p, "torch", "ShortStorage"), pk_op(&p, '.');
    EXPECT_PKL_FAIL(p, 16, "short-storage", CKEY_ERR_UNSUPPORTED, "torch.ShortStorage");
    buf_free(&p);
    pk_op(&p, 0x80), put8(&p, 2), pk_op(&p, 'c'), puts_(&p, "os"); /* no newline */
    EXPECT_PKL_FAIL(p, 16, "global-unterminated", CKEY_ERR_FORMAT, "newline");
    buf_free(&p);

    /* REDUCE on something that is not an allowed callable. */
    pk_op(&p, 0x80), put8(&p, 2), pk_global(&p, "torch", "FloatStorage"), pk_op(&p, ')');
    pk_op(&p, 'R'), pk_op(&p, '.');
    EXPECT_PKL_FAIL(p, 16, "reduce-storage", CKEY_ERR_UNSUPPORTED, "REDUCE calls a storage type");
    buf_free(&p);
    pk_op(&p, 0x80), put8(&p, 2), pk_str(&p, "os.system"), pk_op(&p, ')'), pk_op(&p, 'R');
    pk_op(&p, '.');
    EXPECT_PKL_FAIL(p, 16, "reduce-str", CKEY_ERR_UNSUPPORTED, "REDUCE calls a str");
    buf_free(&p);
    pk_op(&p, 0x80), put8(&p, 2), pk_global(&p, "collections", "OrderedDict"), pk_int(&p, 1);
    pk_op(&p, 0x85), pk_op(&p, 'R'), pk_op(&p, '.');
    EXPECT_PKL_FAIL(p, 16, "odict-args", CKEY_ERR_UNSUPPORTED, "OrderedDict called with 1");
    buf_free(&p);

    /* Opcodes outside the subset. */
    pk_op(&p, 0x80), put8(&p, 2), pk_op(&p, 'i'), puts_(&p, "os\nsystem\n"), pk_op(&p, '.');
    EXPECT_PKL_FAIL(p, 16, "inst", CKEY_ERR_UNSUPPORTED, "0x69 INST");
    buf_free(&p);
    pk_op(&p, 0x80), put8(&p, 2), pk_op(&p, 0xff), pk_op(&p, '.');
    EXPECT_PKL_FAIL(p, 16, "opcode-ff", CKEY_ERR_UNSUPPORTED, "opcode 0xff unknown at offset 2");
    buf_free(&p);
    pk_op(&p, 0x80), put8(&p, 9), pk_op(&p, '.');
    EXPECT_PKL_FAIL(p, 16, "proto-9", CKEY_ERR_UNSUPPORTED, "protocol 9");
    buf_free(&p);

    /* Stack and memo misuse. */
    pk_op(&p, 0x80), put8(&p, 2), pk_op(&p, 0x86), pk_op(&p, '.');
    EXPECT_PKL_FAIL(p, 16, "underflow", CKEY_ERR_FORMAT, "stack underflow");
    buf_free(&p);
    pk_op(&p, 0x80), put8(&p, 2), pk_op(&p, '}'), pk_op(&p, '('), pk_str(&p, "k"), pk_op(&p, 's');
    pk_op(&p, '.');
    EXPECT_PKL_FAIL(p, 16, "underflow-mark", CKEY_ERR_FORMAT, "stack underflow");
    buf_free(&p);
    pk_op(&p, 0x80), put8(&p, 2), pk_op(&p, 't'), pk_op(&p, '.');
    EXPECT_PKL_FAIL(p, 16, "no-mark", CKEY_ERR_FORMAT, "no MARK");
    buf_free(&p);
    pk_op(&p, 0x80), put8(&p, 2), pk_op(&p, 'h'), put8(&p, 5), pk_op(&p, '.');
    EXPECT_PKL_FAIL(p, 16, "memo-unset", CKEY_ERR_FORMAT, "memo index 5 is not set");
    buf_free(&p);
    pk_op(&p, 0x80), put8(&p, 2), pk_op(&p, '}'), pk_op(&p, 'r'), put32(&p, 0xffffffffu);
    pk_op(&p, '.');
    EXPECT_PKL_FAIL(p, 16, "memo-huge", CKEY_ERR_UNSUPPORTED, "memo index 4294967295");
    buf_free(&p);
    pk_op(&p, 0x80), put8(&p, 2);
    for (int i = 0; i < 2000; i++) pk_op(&p, '(');
    pk_op(&p, '.');
    EXPECT_PKL_FAIL(p, 16, "mark-bomb", CKEY_ERR_UNSUPPORTED, "MARKs nested deeper");
    buf_free(&p);

    /* Lengths. */
    pk_op(&p, 0x80), put8(&p, 2), pk_op(&p, 'X'), put32(&p, 0xfffffff0u), puts_(&p, "abc");
    EXPECT_PKL_FAIL(p, 16, "huge-string", CKEY_ERR_FORMAT, "string of 4294967280 bytes runs past");
    buf_free(&p);
    pk_op(&p, 0x80), put8(&p, 4), pk_op(&p, 0x8d), put64(&p, (uint64_t)1 << 60), pk_op(&p, '.');
    EXPECT_PKL_FAIL(p, 16, "huge-string8", CKEY_ERR_FORMAT, "runs past the end");
    buf_free(&p);
    pk_op(&p, 0x80), put8(&p, 2), pk_op(&p, 0x8a), put8(&p, 9);
    for (int i = 0; i < 9; i++) put8(&p, 1);
    pk_op(&p, '.');
    EXPECT_PKL_FAIL(p, 16, "long-9", CKEY_ERR_UNSUPPORTED, "does not fit 64 bits");
    buf_free(&p);
    pk_op(&p, 0x80), put8(&p, 2), pk_op(&p, 'J'), put8(&p, 1);
    EXPECT_PKL_FAIL(p, 16, "cut-arg", CKEY_ERR_FORMAT, "runs past the end of the pickle");
    buf_free(&p);

    /* Structure. */
    pk_op(&p, 0x80), put8(&p, 2), pk_op(&p, '}');
    EXPECT_PKL_FAIL(p, 16, "no-stop", CKEY_ERR_FORMAT, "without a STOP");
    buf_free(&p);
    pk_op(&p, 0x80), put8(&p, 2), pk_op(&p, '}'), pk_op(&p, '}'), pk_op(&p, '.');
    EXPECT_PKL_FAIL(p, 16, "stop-leftover", CKEY_ERR_FORMAT, "STOP with 2 objects");
    buf_free(&p);
    pk_op(&p, 0x80), put8(&p, 2), pk_op(&p, ']'), pk_op(&p, '.');
    EXPECT_PKL_FAIL(p, 16, "top-list", CKEY_ERR_FORMAT, "holds a list, not a state dict");
    buf_free(&p);
    pk_op(&p, 0x80), put8(&p, 2), pk_op(&p, '}'), pk_int(&p, 1);
    pk_tensor(&p, "FloatStorage", "0", 4, 0, 1, s1, t1);
    pk_op(&p, 's'), pk_op(&p, '.');
    EXPECT_PKL_FAIL(p, 16, "int-key", CKEY_ERR_FORMAT, "key 0 is a int, not a string");
    buf_free(&p);
    pk_op(&p, 0x80), put8(&p, 2), pk_op(&p, ']'), pk_int(&p, 1), pk_op(&p, 's'), pk_op(&p, '.');
    EXPECT_PKL_FAIL(p, 16, "setitem-list", CKEY_ERR_FORMAT, "stack underflow");
    buf_free(&p);
    pk_op(&p, 0x80), put8(&p, 2), pk_op(&p, ']'), pk_op(&p, '}'), pk_op(&p, 'b'), pk_op(&p, '.');
    EXPECT_PKL_FAIL(p, 16, "build-list", CKEY_ERR_UNSUPPORTED, "BUILD with a dict state on a list");
    buf_free(&p);
    pk_op(&p, 0x80), put8(&p, 2), pk_op(&p, '}'), pk_op(&p, '('), pk_str(&p, "k"), pk_op(&p, 'u');
    pk_op(&p, '.');
    EXPECT_PKL_FAIL(p, 16, "setitems-odd", CKEY_ERR_FORMAT, "odd number");
    buf_free(&p);
    pk_op(&p, 0x80), put8(&p, 2), pk_op(&p, '}'), pk_op(&p, '('), pk_str(&p, "w");
    pk_str(&p, "not a tuple"), pk_op(&p, 'Q'), pk_op(&p, 'u'), pk_op(&p, '.');
    EXPECT_PKL_FAIL(p, 16, "pid-str", CKEY_ERR_FORMAT, "persistent id is not a");
    buf_free(&p);

    /* Tensor geometry against storage. */
    pk_one_tensor(&p, "FloatStorage", 100, 0, 1, s1, t1);
    EXPECT_PKL_FAIL(p, 16, "storage-small", CKEY_ERR_FORMAT,
                    "storage '0' holds 16 bytes but declares 100 float32 elements");
    buf_free(&p);
    int64_t s2[2] = {4, 4}, t2[2] = {4, 1};
    pk_one_tensor(&p, "FloatStorage", 8, 0, 2, s2, t2);
    EXPECT_PKL_FAIL(p, 32, "extent", CKEY_ERR_FORMAT,
                    "tensor 'w' extends past its storage (needs 64 bytes, storage has 32)");
    buf_free(&p);
    pk_one_tensor(&p, "FloatStorage", 8, 5, 1, s1, t1);
    EXPECT_PKL_FAIL(p, 32, "extent-offset", CKEY_ERR_FORMAT, "needs 36 bytes, storage has 32");
    buf_free(&p);
    pk_one_tensor(&p, "FloatStorage", 8, 9, 1, s1, t1);
    EXPECT_PKL_FAIL(p, 32, "offset-past", CKEY_ERR_FORMAT, "starts at element 9");
    buf_free(&p);
    int64_t tneg[1] = {-1};
    pk_one_tensor(&p, "FloatStorage", 8, 0, 1, s1, tneg);
    EXPECT_PKL_FAIL(p, 32, "neg-stride", CKEY_ERR_FORMAT, "negative size or stride");
    buf_free(&p);
    int64_t sneg[1] = {-4};
    pk_one_tensor(&p, "FloatStorage", 8, 0, 1, sneg, t1);
    EXPECT_PKL_FAIL(p, 32, "neg-size", CKEY_ERR_FORMAT, "negative size or stride");
    buf_free(&p);
    int64_t s9[9] = {1, 1, 1, 1, 1, 1, 1, 1, 1}, t9[9] = {1, 1, 1, 1, 1, 1, 1, 1, 1};
    pk_one_tensor(&p, "FloatStorage", 8, 0, 9, s9, t9);
    EXPECT_PKL_FAIL(p, 32, "ndim-9", CKEY_ERR_UNSUPPORTED, "has 9 dimensions (max 8)");
    buf_free(&p);
    int64_t sbig[3] = {(int64_t)1 << 40, (int64_t)1 << 40, 1 << 20}, tzero[3] = {0, 0, 0};
    pk_one_tensor(&p, "FloatStorage", 8, 0, 3, sbig, tzero);
    EXPECT_PKL_FAIL(p, 32, "numel-overflow", CKEY_ERR_FORMAT, "element count overflows");
    buf_free(&p);
    int64_t sx[2] = {2, 2}, tx[2] = {INT64_MAX / 2, INT64_MAX / 2};
    pk_one_tensor(&p, "FloatStorage", 8, 0, 2, sx, tx);
    EXPECT_PKL_FAIL(p, 32, "extent-overflow", CKEY_ERR_FORMAT, "extent overflows");
    buf_free(&p);
    /* Sizes and strides of different lengths, emitted by hand. */
    pk_op(&p, 0x80), put8(&p, 2), pk_op(&p, '}'), pk_str(&p, "w");
    pk_global(&p, "torch._utils", "_rebuild_tensor_v2"), pk_op(&p, '(');
    pk_op(&p, '('), pk_str(&p, "storage"), pk_global(&p, "torch", "FloatStorage"), pk_str(&p, "0");
    pk_str(&p, "cpu"), pk_int(&p, 8), pk_op(&p, 't'), pk_op(&p, 'Q'), pk_int(&p, 0);
    pk_int(&p, 2), pk_int(&p, 2), pk_op(&p, 0x86), pk_int(&p, 2), pk_op(&p, 0x85);
    pk_op(&p, 0x89), pk_op(&p, '}'), pk_op(&p, 't'), pk_op(&p, 'R'), pk_op(&p, 's'), pk_op(&p, '.');
    EXPECT_PKL_FAIL(p, 32, "stride-count", CKEY_ERR_FORMAT, "2 sizes but 1 strides");
    buf_free(&p);

    /* A valid hand-made pickle still loads (the emitters are right). */
    pk_one_tensor(&p, "HalfStorage", 8, 2, 1, s1, t1);
    buf z = {0};
    make_pth(&z, &p, 16, "little");
    ck_checkpoint *c = NULL;
    ckey_error err = {0};
    CHECKF(ck_checkpoint_open_memory(z.p, z.n, "valid", &c, &err) == CKEY_OK, "%s", err.message);
    if (c) {
        const ck_tensor_info *t = ck_checkpoint_find(c, "w");
        CHECK(t && t->dtype == CK_F16 && t->numel == 4 && t->avail_bytes == 12);
    }
    ck_checkpoint_close(c);
    buf_free(&z);
    buf_free(&p);
}

static void test_duplicate_names(void) {
    size_t n = 0;
    unsigned char *d = read_fixture("dup.pth", &n);
    REQUIRE(d);
    EXPECT_FAIL(d, n, "dup.pth", CKEY_ERR_FORMAT, "duplicate tensor name 'w'");
    free(d);
    /* safetensors too */
    const char *h = "{\"a\":{\"dtype\":\"F32\",\"shape\":[1],\"data_offsets\":[0,4]},"
                    "\"_orig_mod.a\":{\"dtype\":\"F32\",\"shape\":[1],\"data_offsets\":[4,8]}}";
    buf b = {0};
    put64(&b, strlen(h)), puts_(&b, h), put64(&b, 0);
    EXPECT_FAIL(b.p, b.n, "st-dup", CKEY_ERR_FORMAT, "duplicate tensor name 'a'");
    buf_free(&b);
}

/* A safetensors file with the given header and `data` zero bytes after it. */
static void st_file(buf *b, const char *header, size_t data) {
    put64(b, strlen(header));
    puts_(b, header);
    for (size_t i = 0; i < data; i++) put8(b, 0);
}

#define EXPECT_ST_FAIL(header, data, label, want, substr) \
    do {                                                  \
        buf b_ = {0};                                     \
        st_file(&b_, header, data);                       \
        EXPECT_FAIL(b_.p, b_.n, label, want, substr);     \
        buf_free(&b_);                                    \
    } while (0)

static void test_bad_safetensors(void) {
    buf b = {0};
    put64(&b, 1000), puts_(&b, "{}");
    EXPECT_FAIL(b.p, b.n, "st-hdr-len", CKEY_ERR_FORMAT, "header length 1000 exceeds the file");
    buf_free(&b);
    put64(&b, (uint64_t)1 << 63), puts_(&b, "{}");
    EXPECT_FAIL(b.p, b.n, "st-hdr-huge", CKEY_ERR_FORMAT, "exceeds the file");
    buf_free(&b);

    EXPECT_ST_FAIL("{not json}", 0, "st-notjson", CKEY_ERR_FORMAT, "invalid JSON");
    EXPECT_ST_FAIL("{\"a\":1,}", 0, "st-trailing-comma", CKEY_ERR_FORMAT, "expected a string key");
    EXPECT_ST_FAIL("{}x", 0, "st-trailing", CKEY_ERR_FORMAT, "trailing characters");
    EXPECT_ST_FAIL("{\"a\":{\"dtype\":\"I8\",\"shape\":[1],\"data_offsets\":[0,1]}}", 1,
                   "st-dtype", CKEY_ERR_UNSUPPORTED, "dtype 'I8'");
    EXPECT_ST_FAIL("{\"a\":{\"dtype\":\"F32\",\"shape\":[2],\"data_offsets\":[0,8]}}", 4,
                   "st-range", CKEY_ERR_FORMAT, "run past the data");
    EXPECT_ST_FAIL("{\"a\":{\"dtype\":\"F16\",\"shape\":[2],\"data_offsets\":[0,8]}}", 8,
                   "st-size", CKEY_ERR_FORMAT, "hold 8 bytes but float16 with 2 elements needs 4");
    EXPECT_ST_FAIL("{\"a\":{\"dtype\":\"F32\",\"shape\":[4294967296,4294967296],"
                   "\"data_offsets\":[0,0]}}", 0, "st-shape-overflow", CKEY_ERR_FORMAT,
                   "shape product overflows");
    EXPECT_ST_FAIL("{\"a\":{\"dtype\":\"F32\",\"shape\":[99999999999999999999],"
                   "\"data_offsets\":[0,0]}}", 0, "st-shape-huge", CKEY_ERR_FORMAT,
                   "not a non-negative integer");
    EXPECT_ST_FAIL("{\"a\":{\"dtype\":\"F32\",\"shape\":[-1],\"data_offsets\":[0,0]}}", 0,
                   "st-shape-neg", CKEY_ERR_FORMAT, "not a non-negative integer");
    EXPECT_ST_FAIL("{\"a\":{\"dtype\":\"F32\",\"shape\":[1,1,1,1,1,1,1,1,1],"
                   "\"data_offsets\":[0,4]}}", 4, "st-ndim", CKEY_ERR_UNSUPPORTED, "9 dimensions");
    EXPECT_ST_FAIL("{\"a\":{\"dtype\":\"F32\",\"shape\":[1],\"data_offsets\":[4,0]}}", 4,
                   "st-offsets-order", CKEY_ERR_FORMAT, "data_offsets is not");
    EXPECT_ST_FAIL("{\"a\":{\"dtype\":\"F32\",\"shape\":[1]}}", 4, "st-lacks", CKEY_ERR_FORMAT,
                   "lacks \"data_offsets\"");
    EXPECT_ST_FAIL("{\"a\":{\"dtype\":\"F32\",\"dtype\":\"F32\",\"shape\":[1],"
                   "\"data_offsets\":[0,4]}}", 4, "st-repeat", CKEY_ERR_FORMAT, "repeats");
    EXPECT_ST_FAIL("{\"a\":{\"dtype\":\"F32\",\"shape\":[2],\"data_offsets\":[0,8]},"
                   "\"b\":{\"dtype\":\"F32\",\"shape\":[1],\"data_offsets\":[4,8]}}", 8,
                   "st-overlap", CKEY_ERR_FORMAT, "tensors 'a' and 'b' overlap");
    EXPECT_ST_FAIL("{\"__metadata__\":{\"k\":1}}", 0, "st-meta", CKEY_ERR_FORMAT,
                   "value of 'k' is not a string");
    /* A header must be an object: anything else is not even sniffed as safetensors. */
    EXPECT_ST_FAIL("[1]", 0, "st-array", CKEY_ERR_FORMAT, "not a torch.save zip or a safetensors");
    EXPECT_ST_FAIL("{\"a\":5}", 0, "st-entry", CKEY_ERR_FORMAT, "entry 'a' is not an object");

    /* Nesting bomb. */
    buf bomb = {0};
    put8(&bomb, '{'), puts_(&bomb, "\"a\":");
    for (int i = 0; i < 100000; i++) put8(&bomb, '[');
    put8(&bomb, 0);
    EXPECT_ST_FAIL((const char *)bomb.p, 0, "st-bomb", CKEY_ERR_FORMAT, "nested deeper than 64");
    buf_free(&bomb);

    /* Truncating the real file. */
    size_t n = 0;
    unsigned char *d = read_fixture("expected.safetensors", &n);
    REQUIRE(d);
    EXPECT_FAIL(d, n - 1, "st-cut-data", CKEY_ERR_FORMAT, "run past the data");
    EXPECT_FAIL(d, 40, "st-cut-header", CKEY_ERR_FORMAT, "exceeds the file");
    EXPECT_FAIL(d, 7, "st-cut-7", CKEY_ERR_FORMAT, "not a torch.save zip or a safetensors");
    free(d);
}

static void test_json_strict(void) {
    static const struct {
        const char *text;
        const char *why;
    } bad[] = {
        {"", "unexpected end"},
        {"[1,]", "unexpected character"},
        {"01", "leading zero"},
        {"1.", "bad fraction"},
        {"1e", "bad exponent"},
        {"-", "bad number"},
        {"\"a\\x\"", "bad escape"},
        {"\"\\ud800\"", "unpaired high surrogate"},
        {"\"\\udc00\"", "lone low surrogate"},
        {"\"\\u0000\"", "\\u0000"},
        {"\"\\u12g4\"", "bad \\u escape"},
        {"\"a\tb\"", "control character"},
        {"\"\xc0\xaf\"", "invalid UTF-8"},
        {"\"\xed\xa0\x80\"", "invalid UTF-8"},
        {"\"\xf4\x90\x80\x80\"", "invalid UTF-8"},
        {"\"abc", "unterminated string"},
        {"/* c */ 1", "unexpected character"},
        {"{\"a\" 1}", "expected ':'"},
        {"[1 2]", "expected ',' or ']'"},
        {"nul", "unexpected character"},
        {"1 2", "trailing characters"},
    };
    for (size_t i = 0; i < CK_ARRAY_LEN(bad); i++) {
        ck_json j;
        ckey_error err = {0};
        ckey_status st = ck_json_parse(bad[i].text, strlen(bad[i].text), "j", &j, &err);
        CHECKF(st == CKEY_ERR_FORMAT && strstr(err.message, bad[i].why), "'%s': %s", bad[i].text,
               st ? err.message : "accepted");
    }
    const char *good = " {\"k\\u00e9\\ud83d\\ude00\": [1, -0, -9223372036854775808, 1.5e3, true,"
                       " false, null, \"x\\n\\/\"], \"e\": {}, \"f\": []} ";
    ck_json j;
    ckey_error err = {0};
    REQUIRE(ck_json_parse(good, strlen(good), "j", &j, &err) == CKEY_OK);
    const ck_json_node *arr = ck_json_get(&j, &j.nodes[0], "k\xc3\xa9\xf0\x9f\x98\x80");
    REQUIRE(arr && arr->type == CK_JSON_ARRAY && arr->count == 8);
    const ck_json_node *n0 = &j.nodes[arr->first];
    const ck_json_node *n2 = &j.nodes[j.nodes[n0->next].next];
    CHECK(n0->is_int && n0->ival == 1 && n2->is_int && n2->ival == INT64_MIN);
    const ck_json_node *n3 = &j.nodes[n2->next];
    CHECK(n3->type == CK_JSON_NUMBER && !n3->is_int);
    CHECK(ck_json_get(&j, &j.nodes[0], "e")->count == 0);
    CHECK(ck_json_get(&j, &j.nodes[0], "missing") == NULL);
    ck_json_free(&j);
    ck_json_free(NULL);
}

static void test_bad_files_on_disk(void) {
    ck_checkpoint *c = NULL;
    ckey_error err = {0};
    CHECK(ck_checkpoint_open("/nonexistent/ckpt.pth", &c, &err) == CKEY_ERR_IO &&
          strstr(err.message, "/nonexistent/ckpt.pth: cannot open") && !c);
    CHECK(ck_checkpoint_open("/tmp", &c, &err) == CKEY_ERR_IO &&
          strstr(err.message, "not a regular file"));

    char path[] = "/tmp/ckey-test-bad-XXXXXX";
    int fd = mkstemp(path);
    REQUIRE(fd >= 0);
    close(fd);
    CHECK(ck_checkpoint_open(path, &c, &err) == CKEY_ERR_FORMAT && strstr(err.message, "empty") &&
          strncmp(err.message, path, strlen(path)) == 0);

    /* The mmap route with a truncated real file. */
    size_t n = 0;
    unsigned char *d = read_fixture("basic.pth", &n);
    REQUIRE(d);
    FILE *f = fopen(path, "wb");
    REQUIRE(f);
    fwrite(d, 1, n - 30, f);
    fclose(f);
    CHECK(ck_checkpoint_open(path, &c, &err) == CKEY_ERR_FORMAT && strstr(err.message, "truncated"));
    printf("  %s\n", err.message);

    /* Legacy torch format and junk. */
    f = fopen(path, "wb");
    REQUIRE(f);
    fwrite("\x80\x02\x8a\x0a\x6c\xfc\x9c\x46\xf9\x20\x6a\xa8\x50\x19.", 1, 15, f);
    fclose(f);
    CHECK(ck_checkpoint_open(path, &c, &err) == CKEY_ERR_UNSUPPORTED && strstr(err.message, "legacy"));
    f = fopen(path, "wb");
    REQUIRE(f);
    fputs("hello, world", f);
    fclose(f);
    CHECK(ck_checkpoint_open(path, &c, &err) == CKEY_ERR_FORMAT &&
          strstr(err.message, "starts with 68 65 6c 6c"));
    unlink(path);
    free(d);
    CHECK(ck_checkpoint_open_memory(NULL, 0, "nothing", &c, &err) == CKEY_ERR_FORMAT &&
          strstr(err.message, "nothing: file is empty"));
}

/* Flip every byte of the small fixtures in turn: nothing may crash, leak or
 * read out of bounds (the sanitizer build checks), and whatever opens must
 * convert cleanly. */
static void test_mutation_sweep(void) {
    static const char *const names[] = {"orig_mod.pth", "mixed.safetensors"};
    size_t opened = 0, refused = 0;
    for (size_t f = 0; f < CK_ARRAY_LEN(names); f++) {
        size_t n = 0;
        unsigned char *d = read_fixture(names[f], &n);
        REQUIRE(d);
        unsigned char *m = malloc(n);
        for (size_t i = 0; i < n; i++) {
            static const unsigned char flips[] = {0xff, 0x80, 0x01};
            for (size_t k = 0; k < CK_ARRAY_LEN(flips); k++) {
                memcpy(m, d, n);
                m[i] ^= flips[k];
                ck_checkpoint *c = NULL;
                ckey_error err = {0};
                if (ck_checkpoint_open_memory(m, n, "mut", &c, &err) != CKEY_OK) {
                    refused++;
                    CHECK(strncmp(err.message, "mut: ", 5) == 0 || err.status == CKEY_ERR_NOMEM);
                    continue;
                }
                opened++;
                for (size_t t = 0; t < ck_checkpoint_count(c); t++) {
                    const ck_tensor_info *ti = ck_checkpoint_at(c, t);
                    if (ti->numel > 4096) continue;
                    float buf_[4096];
                    ck_tensor_to_f32(ti, buf_, &err);
                }
                ck_checkpoint_close(c);
            }
        }
        free(m);
        free(d);
    }
    printf("  %zu mutants opened, %zu refused\n", opened, refused);
}

int main(int argc, char **argv) {
    static const ck_test_case cases[] = {
        {"basic_pth", test_basic_pth},
        {"proto4_pth", test_proto4_pth},
        {"mixed_safetensors", test_mixed_safetensors},
        {"nested_state_dict", test_nested_state_dict},
        {"prefixes_stripped", test_prefixes_stripped},
        {"memory_and_drop_pages", test_memory_and_drop_pages},
        {"zip64_archive", test_zip64_archive},
        {"safetensors_roundtrip", test_safetensors_roundtrip},
        {"committed_model_fixtures", test_committed_model_fixtures},
        {"f16_conversions", test_f16_conversions},
        {"bf16_conversions", test_bf16_conversions},
        {"bad_zip", test_bad_zip},
        {"bad_pickle", test_bad_pickle},
        {"duplicate_names", test_duplicate_names},
        {"bad_safetensors", test_bad_safetensors},
        {"json_strict", test_json_strict},
        {"bad_files_on_disk", test_bad_files_on_disk},
        {"mutation_sweep", test_mutation_sweep},
    };
    return ck_test_main(cases, (int)CK_ARRAY_LEN(cases), argc, argv);
}
