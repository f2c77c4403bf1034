/* Memory planner: record the allocation sequence once, place buffers by
 * lifetime, replay with fixed offsets. See core.h. */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/core.h"

#define ALIGN 64

typedef struct {
    size_t bytes;       /* placed bytes (a shrunk buffer's head: what is kept) */
    size_t alloc_bytes; /* as allocated (the replay's check) */
    size_t span;        /* placement order: bytes, with a shrunk buffer's tail */
    int head1, tail1;   /* a tail: its head's index + 1; a head: its tail's; else 0 */
    size_t offset;
    const char *tag;
    int64_t born, died; /* event indices; died = INT64_MAX when never released */
    int live;           /* execute pass: allocated and not yet released */
} plan_buf;

struct ck_plan {
    plan_buf *bufs;
    int nbufs, cap;
    int64_t events;
    int recording;
    int failed;     /* allocation of the log failed while recording */
    int replay;     /* execute pass: next buffer index */
    int mismatch;   /* execute pass diverged from the record */
    unsigned char *arena;
    size_t arena_bytes, naive_bytes;
};

ckey_status ck_plan_create(ck_plan **out, ckey_error *err) {
    *out = calloc(1, sizeof **out);
    if (!*out) return ck_fail(err, CKEY_ERR_NOMEM, "planner: out of memory");
    return CKEY_OK;
}

void ck_plan_free(ck_plan *p) {
    if (!p) return;
    free(p->bufs);
    free(p);
}

void ck_plan_begin_record(ck_plan *p) {
    p->nbufs = 0;
    p->events = 0;
    p->recording = 1;
    p->failed = 0;
    p->arena = NULL;
}

static uintptr_t fake_addr(int index) { return (uintptr_t)(index + 1) * ALIGN; }

void *ck_alloc(ck_plan *p, size_t bytes, const char *tag) {
    bytes = (bytes + ALIGN - 1) / ALIGN * ALIGN;
    if (bytes == 0) bytes = ALIGN;
    if (p->recording) {
        if (p->nbufs == p->cap) {
            int ncap = p->cap ? p->cap * 2 : 256;
            plan_buf *nb = realloc(p->bufs, (size_t)ncap * sizeof *nb);
            if (!nb) {
                p->failed = 1;
                return (void *)fake_addr(0);
            }
            p->bufs = nb;
            p->cap = ncap;
        }
        plan_buf *b = &p->bufs[p->nbufs];
        memset(b, 0, sizeof *b);
        b->bytes = b->alloc_bytes = bytes;
        b->tag = tag;
        b->born = p->events++;
        b->died = INT64_MAX;
        return (void *)fake_addr(p->nbufs++);
    }
    if (p->replay >= p->nbufs || p->bufs[p->replay].alloc_bytes != bytes || p->bufs[p->replay].head1) {
        p->mismatch = 1;
        return NULL;
    }
    plan_buf *b = &p->bufs[p->replay++];
    b->live = 1;
    return p->arena + b->offset;
}

void ck_release(ck_plan *p, void *ptr) {
    if (!ptr) return;
    if (p->recording) {
        uintptr_t a = (uintptr_t)ptr;
        int idx = (int)(a / ALIGN) - 1;
        if (a % ALIGN || idx < 0 || idx >= p->nbufs || p->bufs[idx].died != INT64_MAX) {
            p->failed = 1;
            return;
        }
        p->bufs[idx].died = p->events++;
        return;
    }
    for (int i = p->replay - 1; i >= 0; i--) {
        if (p->bufs[i].live && p->arena + p->bufs[i].offset == (unsigned char *)ptr) {
            p->bufs[i].live = 0;
            return;
        }
    }
    p->mismatch = 1;
}

void ck_shrink(ck_plan *p, void *ptr, size_t keep, const char *tag) {
    keep = (keep + ALIGN - 1) / ALIGN * ALIGN;
    if (p->recording) {
        uintptr_t a = (uintptr_t)ptr;
        int idx = (int)(a / ALIGN) - 1;
        if (a % ALIGN || idx < 0 || idx >= p->nbufs || p->bufs[idx].died != INT64_MAX || p->bufs[idx].tail1 ||
            p->bufs[idx].head1 || keep == 0 || keep >= p->bufs[idx].bytes) {
            p->failed = 1;
            return;
        }
        const size_t tail = p->bufs[idx].bytes - keep;
        (void)ck_alloc(p, tail, tag); /* the tail: born with the head, dying now */
        if (p->failed) return;
        plan_buf *t = &p->bufs[p->nbufs - 1], *h = &p->bufs[idx];
        p->events--;
        t->born = h->born;
        t->died = p->events++;
        t->head1 = idx + 1;
        h->bytes = keep;
        h->tail1 = p->nbufs;
        return;
    }
    /* replay: the tail is the next record; its head the live buffer at ptr */
    int idx = -1;
    for (int i = p->replay - 1; i >= 0 && idx < 0; i--)
        if (p->bufs[i].live && p->arena + p->bufs[i].offset == (unsigned char *)ptr) idx = i;
    if (idx < 0 || p->replay >= p->nbufs || p->bufs[p->replay].head1 != idx + 1 || p->bufs[idx].bytes != keep) {
        p->mismatch = 1;
        return;
    }
    p->replay++;
}

static int by_size_desc(const void *a, const void *b) {
    const plan_buf *x = *(const plan_buf *const *)a, *y = *(const plan_buf *const *)b;
    if (x->span != y->span) return x->span < y->span ? 1 : -1;
    return x->born < y->born ? -1 : x->born > y->born;
}

static int by_offset(const void *a, const void *b) {
    const plan_buf *x = *(const plan_buf *const *)a, *y = *(const plan_buf *const *)b;
    return x->offset < y->offset ? -1 : x->offset > y->offset;
}

/* Whether [off, off + bytes) misses every buffer of placed[0..n) live with b. */
static int fits(const plan_buf *b, size_t off, size_t bytes, plan_buf *const *placed, int n) {
    for (int j = 0; j < n; j++) {
        const plan_buf *o = placed[j];
        if (o->born < b->died && b->born < o->died && o->offset < off + bytes && off < o->offset + o->bytes)
            return 0;
    }
    return 1;
}

/* The lowest offset at which head h and, right after it, its tail t both
 * miss the placed buffers live with them: 0 or where a conflicting buffer
 * ends (for the tail, less the head's bytes). */
static size_t place_pair(const plan_buf *h, const plan_buf *t, plan_buf *const *placed, int n) {
    size_t best = SIZE_MAX;
    for (int j = -1; j < n; j++) {
        size_t c[2] = {0, SIZE_MAX};
        if (j >= 0) {
            const plan_buf *o = placed[j];
            const size_t end = o->offset + o->bytes;
            c[0] = end;
            c[1] = end >= h->bytes ? end - h->bytes : SIZE_MAX;
        }
        for (int m = 0; m < 2; m++)
            if (c[m] < best && fits(h, c[m], h->bytes, placed, n) && fits(t, c[m] + h->bytes, t->bytes, placed, n))
                best = c[m];
    }
    return best;
}

ckey_status ck_plan_finish(ck_plan *p, ckey_error *err) {
    p->recording = 0;
    if (p->failed) return ck_fail(err, CKEY_ERR_INTERNAL, "planner: allocation log failed (out of memory or bad release)");
    int n = p->nbufs;
    plan_buf **order = malloc((size_t)(n ? n : 1) * sizeof *order);
    plan_buf **placed = malloc((size_t)(n ? n : 1) * sizeof *placed);
    plan_buf **conf = malloc((size_t)(n ? n : 1) * sizeof *conf);
    if (!order || !placed || !conf) {
        free(order), free(placed), free(conf);
        return ck_fail(err, CKEY_ERR_NOMEM, "planner: out of memory");
    }
    int no = 0;
    for (int i = 0; i < n; i++) {
        plan_buf *b = &p->bufs[i];
        b->span = b->bytes + (b->tail1 ? p->bufs[b->tail1 - 1].bytes : 0);
        if (!b->head1) order[no++] = b; /* a tail is placed with its head */
    }
    qsort(order, (size_t)no, sizeof *order, by_size_desc);
    size_t top = 0, naive = 0;
    int nplaced = 0;
    for (int i = 0; i < no; i++) {
        plan_buf *b = order[i];
        if (b->tail1) { /* a shrunk buffer: head and tail adjacent */
            plan_buf *t = &p->bufs[b->tail1 - 1];
            const size_t off = place_pair(b, t, placed, nplaced);
            b->offset = off, t->offset = off + b->bytes;
            placed[nplaced++] = b, placed[nplaced++] = t;
            if (off + b->span > top) top = off + b->span;
            naive += b->span;
            continue;
        }
        int nc = 0;
        for (int j = 0; j < nplaced; j++) {
            plan_buf *o = placed[j];
            if (o->born < b->died && b->born < o->died) conf[nc++] = o;
        }
        qsort(conf, (size_t)nc, sizeof *conf, by_offset);
        size_t off = 0;
        for (int j = 0; j < nc; j++) {
            if (conf[j]->offset >= off + b->bytes) break; /* gap before conf[j] fits */
            size_t end = conf[j]->offset + conf[j]->bytes;
            if (end > off) off = end;
        }
        b->offset = off;
        placed[nplaced++] = b;
        if (off + b->bytes > top) top = off + b->bytes;
        naive += b->bytes;
    }
    free(order), free(placed), free(conf);
    p->arena_bytes = top;
    p->naive_bytes = naive;
    return CKEY_OK;
}

void ck_plan_begin_execute(ck_plan *p, void *arena) {
    p->recording = 0;
    p->arena = arena;
    p->replay = 0;
    p->mismatch = 0;
    for (int i = 0; i < p->nbufs; i++) p->bufs[i].live = 0;
}

int ck_plan_replay_complete(const ck_plan *p) { return !p->mismatch && p->replay == p->nbufs; }

size_t ck_plan_arena_bytes(const ck_plan *p) { return p->arena_bytes; }
size_t ck_plan_naive_bytes(const ck_plan *p) { return p->naive_bytes; }
int ck_plan_num_buffers(const ck_plan *p) { return p->nbufs; }
int64_t ck_plan_event(const ck_plan *p) { return p->events; }

size_t ck_plan_live_peak(const ck_plan *p, int64_t e0, int64_t e1) {
    /* the live total changes only at births: check it at each birth in
     * [e0, e1) and at e0 itself */
    size_t peak = 0;
    for (int i = -1; i < p->nbufs; i++) {
        const int64_t t = i < 0 ? e0 : p->bufs[i].born;
        if (t < e0 || t >= e1) continue;
        size_t live = 0;
        for (int j = 0; j < p->nbufs; j++)
            if (p->bufs[j].born <= t && t < p->bufs[j].died) live += p->bufs[j].bytes;
        if (live > peak) peak = live;
    }
    return peak;
}

void ck_plan_dump(const ck_plan *p, void *file) {
    FILE *f = file;
    for (int i = 0; i < p->nbufs; i++) {
        const plan_buf *b = &p->bufs[i];
        fprintf(f, "  %-28s %10.2f MiB  @ %10.2f MiB  events [%lld, %lld)\n", b->tag ? b->tag : "?",
                (double)b->bytes / (1 << 20), (double)b->offset / (1 << 20), (long long)b->born,
                b->died == INT64_MAX ? -1LL : (long long)b->died);
    }
}

void *ck_plan_buffer(const ck_plan *p, int index) {
    if (!p->arena || index < 0 || index >= p->nbufs) return NULL;
    return p->arena + p->bufs[index].offset;
}
