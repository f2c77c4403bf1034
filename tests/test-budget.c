/* Memory budgets: every execution schedule (model.h ck_schedule) gives the
 * result of the whole-map run, and the PyTorch goldens of test-model
 * (tools/reference/make_fixtures.py); a budget picks the fastest schedule
 * whose planned peak fits it, and one below every schedule's is refused
 * naming the smallest that fits. CPU, fp32. */
#include <stdlib.h>
#include <string.h>

#include "ckey_clip.h"
#include "ckpt/checkpoint.h"
#include "model/model.h"
#include "model/session.h"
#include "support/testutil.h"

/* The sanitizer build (CK_ASAN; make test runs it after the release build) runs
 * fewer band heights (not the 1-row bands, each of which recomputes up to
 * 63 rows: the costliest), and on the full-size model
 * only the banded forward against the golden: the release build keeps the
 * whole set. */

static float *load_tensor(const char *gold_path, const char *name, uint64_t numel) {
    ck_checkpoint *g = NULL;
    if (ck_checkpoint_open(gold_path, &g, NULL)) return NULL;
    const ck_tensor_info *t = ck_checkpoint_find(g, name);
    float *x = NULL;
    if (t && t->numel == numel) {
        x = malloc(t->numel * sizeof(float));
        if (ck_tensor_to_f32(t, x, NULL)) free(x), x = NULL;
    }
    ck_checkpoint_close(g);
    return x;
}

/* The golden alpha then fg [4, S, S]. */
static float *load_golden(const char *gold_path, int S) {
    const int64_t HW = (int64_t)S * S;
    float *a = load_tensor(gold_path, "alpha", (uint64_t)HW), *f = load_tensor(gold_path, "fg", (uint64_t)(3 * HW));
    float *out = a && f ? malloc((size_t)4 * HW * sizeof(float)) : NULL;
    if (out) {
        memcpy(out, a, (size_t)HW * sizeof(float));
        memcpy(out + HW, f, (size_t)3 * HW * sizeof(float));
    }
    free(a), free(f);
    return out;
}

/* Session options at S with two threads and no budget. */
static ckey_session_options options_at(int S) {
    ckey_session_options o;
    ckey_session_options_default(&o);
    o.size = S;
    o.threads = 2;
    return o;
}

/* One forward under schedule sched (NULL: chosen by the budget) into out
 * [4, S, S]; returns the session's plan. */
static ckey_status run_schedule(const ckey_model *m, int S, int64_t budget, const ck_schedule *sched, const float *x,
                                float *out, ckey_memory_plan *plan, ckey_error *err) {
    ckey_session_options o = options_at(S);
    o.memory_budget = budget;
    ckey_session *s = NULL;
    ckey_status st = ck_session_create_schedule(m, &o, 0, sched, &s, err);
    if (!st) st = ckey_session_get_plan(s, plan);
    if (!st) st = ckey_session_forward_into(s, x, out, NULL, err);
    ckey_session_free(s);
    return st;
}

/* Model m at S on one input, and a reference schedule's result on it: the
 * input x is the golden's x when gold_rel is given and it holds one
 * (full256 holds its checksums only), else ck_synth_input's; gold the golden
 * (NULL without gold_rel); ref schedule base's result with its plan p0
 * (base NULL: no run); got room for the run under test. */
typedef struct base_run {
    const ckey_model *m;
    int S;
    int64_t n; /* 4 * S * S */
    float *x, *gold, *ref, *got;
    char *gold_path;
    ckey_memory_plan p0;
    ckey_error err;
} base_run;

static void base_close(base_run *b) {
    free(b->x), free(b->gold), free(b->ref), free(b->got), free(b->gold_path);
    memset(b, 0, sizeof *b);
}

/* 1 with b filled in (the base run checked here), 0 when a buffer or the
 * golden is missing (checked; b left empty). */
static int base_open(base_run *b, const ckey_model *m, int S, const ck_schedule *base, const char *gold_rel) {
    memset(b, 0, sizeof *b);
    b->m = m, b->S = S, b->n = 4 * (int64_t)S * S;
    const size_t bytes = (size_t)b->n * sizeof(float);
    if (gold_rel) {
        b->gold_path = ck_fixture_path(gold_rel);
        b->x = load_tensor(b->gold_path, "x", (uint64_t)b->n), b->gold = load_golden(b->gold_path, S);
    }
    if (!b->x && (b->x = malloc(bytes))) ck_synth_input(S, b->x);
    b->ref = malloc(bytes), b->got = malloc(bytes);
    const int ok = b->x && b->ref && b->got && (!gold_rel || b->gold);
    CHECKF(ok, "S = %d: the buffers and the input of %s", S, gold_rel ? gold_rel : "ck_synth_input");
    if (!ok) {
        base_close(b);
        return 0;
    }
    if (base) CHECKF(run_schedule(m, S, 0, base, b->x, b->ref, &b->p0, &b->err) == CKEY_OK, "%s", b->err.message);
    return 1;
}

/* Schedule s on b's input into b->got, its plan into p (checked). */
static void base_next(base_run *b, const ck_schedule *s, ckey_memory_plan *p) {
    CHECKF(run_schedule(b->m, b->S, 0, s, b->x, b->got, p, &b->err) == CKEY_OK, "%s", b->err.message);
}

/* How many of the n values of got differ from want to the bit. */
static size_t bit_diffs(const float *got, const float *want, int64_t n) {
    size_t diff = 0;
    for (int64_t i = 0; i < n; i++) diff += memcmp(&got[i], &want[i], sizeof(float)) != 0;
    return diff;
}

/* Schedule s on b's input (base_next), then how many of its values differ
 * from the base run's to the bit. */
static size_t bitwise_vs_base(base_run *b, const ck_schedule *s, ckey_memory_plan *p) {
    base_next(b, s, p);
    return bit_diffs(b->got, b->ref, b->n);
}

/* Whole maps (unless bands_only), then each band height in bands[]: equal
 * to the whole-map result within 1e-5 and to the golden within 1e-5. */
static void schedules_case(const ckey_model *m, const char *gold_rel, int S, const int *bands, int nb, int bands_only) {
    const ck_schedule s0 = {0};
    base_run b;
    REQUIRE(base_open(&b, m, S, bands_only ? NULL : &s0, gold_rel));
    const size_t n = (size_t)b.n;
    ckey_memory_plan p;
    double e;
    if (!bands_only) {
        e = ck_compare("whole maps vs golden", b.ref, b.gold, n, NULL);
        CHECKF(e <= 1e-5, "whole maps: max abs err %.3g vs the golden", e);
    } else { /* the whole maps' plan alone, for the arena figure */
        const ckey_session_options o = options_at(S);
        CHECKF(ck_session_plan_schedule(m, &o, &s0, &b.p0, &b.err) == CKEY_OK, "%s", b.err.message);
    }
    for (int i = 0; i < nb; i++) {
        const ck_schedule sb = {.refiner_band = bands[i]};
        char name[64];
        memset(b.got, 0, n * sizeof(float));
        base_next(&b, &sb, &p);
        if (!bands_only) {
            snprintf(name, sizeof name, "bands of %d rows vs whole", bands[i]);
            e = ck_compare(name, b.got, b.ref, n, NULL);
            CHECKF(e <= 1e-5, "bands of %d: max abs err %.3g vs whole maps", bands[i], e);
        }
        snprintf(name, sizeof name, "bands of %d rows vs golden", bands[i]);
        e = ck_compare(name, b.got, b.gold, n, NULL);
        CHECKF(e <= 1e-5, "bands of %d: max abs err %.3g vs the golden", bands[i], e);
        printf("    arena %.2f MiB (whole maps %.2f MiB)\n", p.arena_bytes / 1048576.0, b.p0.arena_bytes / 1048576.0);
        CHECK(p.refiner_band == bands[i]);
    }
    base_close(&b);
}

static ckey_model *load_tiny(void) {
    char *mp = ck_fixture_path("tiny/tiny.pth");
    ckey_model *m = NULL;
    ckey_error err;
    CHECKF(ckey_model_load(mp, &m, &err) == CKEY_OK, "%s", err.message);
    free(mp);
    return m;
}

/* The full architecture (ck_config_default) with synthetic weights. */
static ckey_model *load_full(void) {
    ck_config cfg;
    ck_config_default(&cfg);
    ckey_model *m = NULL;
    ckey_error err;
    CHECKF(ck_model_synthetic(&cfg, &m, &err) == CKEY_OK, "%s", err.message);
    return m;
}

/* Band heights that divide S and that do not, one row, and bands taller
 * than the halo. */
static void test_tiny_s128(void) {
    ckey_model *m = load_tiny();
    REQUIRE(m);
    static const int all[] = {64, 50, 16, 7, 1}, asan[] = {50, 7};
    if (CK_ASAN) schedules_case(m, "tiny/tiny_s128.safetensors", 128, asan, (int)CK_ARRAY_LEN(asan), 0);
    else schedules_case(m, "tiny/tiny_s128.safetensors", 128, all, (int)CK_ARRAY_LEN(all), 0);
    ckey_model_free(m);
}

static void test_tiny_s64(void) {
    ckey_model *m = load_tiny();
    REQUIRE(m);
    static const int all[] = {32, 9, 2}, asan[] = {9};
    if (CK_ASAN) schedules_case(m, "tiny/tiny_s64.safetensors", 64, asan, (int)CK_ARRAY_LEN(asan), 0);
    else schedules_case(m, "tiny/tiny_s64.safetensors", 64, all, (int)CK_ARRAY_LEN(all), 0);
    ckey_model_free(m);
}

static void test_full_s256(void) {
    ckey_model *m = load_full();
    REQUIRE(m);
    const int bands[] = {96}; /* 256 rows in bands of 96, 96 and 64 */
    schedules_case(m, "full256.safetensors", 256, bands, (int)CK_ARRAY_LEN(bands), CK_ASAN);
    ckey_model_free(m);
}

/* ck_schedule.pos_streamed: the stored pos-embed resized row by row as
 * patch_embed adds it gives the result of the resized copy to the last bit,
 * and the plan's weights lose the copy: the tiny model at S = 256 and the
 * full architecture at S = 256 (stored grids 32 and 512, S/4 = 64). */
static void pos_streamed_case(const ckey_model *m, int S) {
    const ck_schedule s0 = {.refiner_band = 32}, s1 = {.refiner_band = 32, .pos_streamed = 1};
    base_run b;
    REQUIRE(base_open(&b, m, S, &s0, NULL));
    ckey_memory_plan p1;
    const size_t diff = bitwise_vs_base(&b, &s1, &p1);
    const int G = S / m->cfg.patch_stride;
    printf("  S = %d, stored grid %d: weights %.2f MiB resized, %.2f MiB streamed\n", S, m->cfg.pos_grid,
           b.p0.weight_bytes / 1048576.0, p1.weight_bytes / 1048576.0);
    CHECK(G != m->cfg.pos_grid);
    CHECK(b.p0.weight_bytes - p1.weight_bytes == (int64_t)G * G * m->cfg.embed_dim * (int64_t)sizeof(float));
    CHECKF(diff == 0, "pos_streamed: %zu of %lld values differ from the resized copy (max %.3g)", diff,
           (long long)b.n, ck_compare("pos streamed vs resized", b.got, b.ref, (size_t)b.n, NULL));
    base_close(&b);
}

static void test_pos_streamed(void) {
    ckey_model *m = load_tiny();
    REQUIRE(m);
    pos_streamed_case(m, 256);
    ckey_model_free(m);
    if (CK_ASAN) return; /* the full architecture's forward: the release build */
    m = load_full();
    REQUIRE(m);
    pos_streamed_case(m, 256);
    ckey_model_free(m);
}

/* ck_schedule.qkv_streamed: the global attention's q, k and v computed from
 * norm1's output as they are needed equal the stored qkv's result within
 * 1e-5, and the plan drops the qkv buffers: the tiny model at S = 128 (its
 * golden) and the full architecture at S = 256. */
static void qkv_streamed_case(const ckey_model *m, int S, const char *gold_rel) {
    const ck_schedule s0 = {0}, s1 = {.qkv_streamed = 1};
    base_run b;
    REQUIRE(base_open(&b, m, S, &s0, NULL));
    ckey_memory_plan p1;
    base_next(&b, &s1, &p1);
    printf("  S = %d: encoder %.2f MiB with qkv, %.2f MiB streamed\n", S, b.p0.stage_bytes[0] / 1048576.0,
           p1.stage_bytes[0] / 1048576.0);
    CHECK(p1.stage_bytes[0] < b.p0.stage_bytes[0]);
    double e = ck_compare("qkv streamed vs stored", b.got, b.ref, (size_t)b.n, NULL);
    CHECKF(e <= 1e-5, "qkv streamed: max abs err %.3g vs the stored qkv", e);
    base_close(&b);
    if (gold_rel) {
        REQUIRE(base_open(&b, m, S, NULL, gold_rel));
        base_next(&b, &s1, &p1);
        e = ck_compare("qkv streamed vs golden", b.got, b.gold, (size_t)b.n, NULL);
        CHECKF(e <= 1e-5, "qkv streamed: max abs err %.3g vs the golden", e);
        base_close(&b);
    }
}

static void test_qkv_streamed(void) {
    ckey_model *m = load_tiny();
    REQUIRE(m);
    qkv_streamed_case(m, 128, "tiny/tiny_s128.safetensors");
    ckey_model_free(m);
    if (CK_ASAN) return; /* the full architecture's forward: the release build */
    m = load_full();
    REQUIRE(m);
    qkv_streamed_case(m, 256, NULL);
    ckey_model_free(m);
}

/* ck_schedule.decoder_band: the decoders in bands of logits rows (bands that
 * divide S/4 and bands that do not, one row) equal the whole-map decoders
 * within 1e-5 and the tiny model's golden: the tiny model at S = 128 (S/4 =
 * 32), the full architecture at S = 256; and the full architecture's plan at
 * S = 2048 holds no whole projection of c2 (128 MiB) in its decoders. */
static void decoder_band_case(const ckey_model *m, int S, const int *bands, int nb, const char *gold_rel) {
    const ck_schedule s0 = {0};
    base_run b;
    REQUIRE(base_open(&b, m, S, &s0, gold_rel));
    ckey_memory_plan p1;
    for (int i = 0; i < nb; i++) {
        const ck_schedule s1 = {.decoder_band = bands[i], .qkv_streamed = i & 1};
        char name[64];
        base_next(&b, &s1, &p1);
        printf("  S = %d, decoder bands of %d: decoders %.2f MiB (whole %.2f MiB)\n", S, bands[i],
               p1.stage_bytes[1] / 1048576.0, b.p0.stage_bytes[1] / 1048576.0);
        snprintf(name, sizeof name, "decoder bands of %d vs whole", bands[i]);
        double e = ck_compare(name, b.got, b.ref, (size_t)b.n, NULL);
        CHECKF(e <= 1e-5, "decoder bands of %d: max abs err %.3g vs whole maps", bands[i], e);
        if (b.gold) {
            snprintf(name, sizeof name, "decoder bands of %d vs golden", bands[i]);
            e = ck_compare(name, b.got, b.gold, (size_t)b.n, NULL);
            CHECKF(e <= 1e-5, "decoder bands of %d: max abs err %.3g vs the golden", bands[i], e);
        }
    }
    base_close(&b);
}

static void test_decoder_band(void) {
    ckey_model *m = load_tiny();
    REQUIRE(m);
    static const int all[] = {32, 64, 7, 1, 12}, asan[] = {7, 1};
    if (CK_ASAN) decoder_band_case(m, 128, asan, (int)CK_ARRAY_LEN(asan), "tiny/tiny_s128.safetensors");
    else decoder_band_case(m, 128, all, (int)CK_ARRAY_LEN(all), "tiny/tiny_s128.safetensors");
    ckey_model_free(m);
    if (CK_ASAN) return; /* the full architecture's forward: the release build */
    m = load_full();
    REQUIRE(m);
    static const int full[] = {24};
    decoder_band_case(m, 256, full, 1, NULL);
    const ckey_session_options o = options_at(2048);
    const ck_schedule s0 = {.refiner_band = 64}, s1 = {.refiner_band = 64, .decoder_band = 64};
    ckey_memory_plan p0, p1;
    ckey_error err;
    CHECKF(ck_session_plan_schedule(m, &o, &s0, &p0, &err) == CKEY_OK, "%s", err.message);
    CHECKF(ck_session_plan_schedule(m, &o, &s1, &p1, &err) == CKEY_OK, "%s", err.message);
    printf("  S = 2048 decoders: %.1f MiB whole, %.1f MiB in bands of 64\n", p0.stage_bytes[1] / 1048576.0,
           p1.stage_bytes[1] / 1048576.0);
    CHECK(p1.stage_bytes[1] <= p0.stage_bytes[1] - (64 << 20));
    ckey_model_free(m);
}

/* Schedule s against the whole-map run of model m at S (the golden's x
 * when gold_rel is given, then also against the golden): within 1e-5. */
static void same_as_whole(const ckey_model *m, int S, const ck_schedule *s, const char *gold_rel, const char *what) {
    const ck_schedule s0 = {0};
    base_run b;
    REQUIRE(base_open(&b, m, S, &s0, gold_rel));
    ckey_memory_plan p1;
    base_next(&b, s, &p1);
    char name[80];
    snprintf(name, sizeof name, "S = %d %s vs whole", S, what);
    double e = ck_compare(name, b.got, b.ref, (size_t)b.n, NULL);
    CHECKF(e <= 1e-5, "%s: max abs err %.3g vs the whole-map run", what, e);
    if (b.gold) {
        snprintf(name, sizeof name, "S = %d %s vs golden", S, what);
        e = ck_compare(name, b.got, b.gold, (size_t)b.n, NULL);
        CHECKF(e <= 1e-5, "%s: max abs err %.3g vs the golden", what, e);
    }
    base_close(&b);
}

/* ck_schedule.transition_from_map: the widening blocks (mask-unit and
 * global) read the feature map rerolled from the tokens, which are gone:
 * the same result (tiny model at S = 128 and, with every step, 256; the full
 * architecture at S = 256), and the full architecture's encoder at S = 2048
 * plans less. */
static void test_transition_from_map(void) {
    ckey_model *m = load_tiny();
    REQUIRE(m);
    const ck_schedule s1 = {.transition_from_map = 1}, s2 = {.transition_from_map = 1, .qkv_streamed = 1,
                                                            .decoder_band = 16, .pos_streamed = 1, .refiner_band = 24};
    same_as_whole(m, 128, &s1, "tiny/tiny_s128.safetensors", "from map");
    same_as_whole(m, 256, &s2, NULL, "every step");
    ckey_model_free(m);
    m = load_full();
    REQUIRE(m);
    if (!CK_ASAN) same_as_whole(m, 256, &s1, NULL, "from map");
    const ckey_session_options o = options_at(2048);
    const ck_schedule a = {.refiner_band = 64, .qkv_streamed = 1, .decoder_band = 64},
                      b = {.refiner_band = 64, .qkv_streamed = 1, .decoder_band = 64, .transition_from_map = 1};
    ckey_memory_plan pa, pb;
    ckey_error err;
    CHECKF(ck_session_plan_schedule(m, &o, &a, &pa, &err) == CKEY_OK, "%s", err.message);
    CHECKF(ck_session_plan_schedule(m, &o, &b, &pb, &err) == CKEY_OK, "%s", err.message);
    printf("  S = 2048 encoder: %.1f MiB from tokens, %.1f MiB from maps\n", pa.stage_bytes[0] / 1048576.0,
           pb.stage_bytes[0] / 1048576.0);
    CHECK(pb.stage_bytes[0] < pa.stage_bytes[0]);
    ckey_model_free(m);
}

/* The floor steps on top of schedule base (model m at S): norm1_from_map,
 * input_rgb and reroll_in_place, each alone and all together, give base's
 * result to the last bit (they move and recompute the same values), and
 * change its buffers as they should: norm1's output gone, the input's tail a
 * buffer of its own, the feature maps no buffers of their own. */
static void floor_case(const ckey_model *m, int S, const ck_schedule *base) {
    base_run b;
    REQUIRE(base_open(&b, m, S, base, NULL));
    ckey_memory_plan p1;
    for (int step = 0; step < 4; step++) {
        ck_schedule s = *base;
        s.norm1_from_map = step == 0 || step == 3;
        s.input_rgb = step == 1 || step == 3;
        s.reroll_in_place = step == 2 || step == 3;
        static const char *const what[4] = {"norm1 from the map", "input rgb", "reroll in place", "all three"};
        const size_t diff = bitwise_vs_base(&b, &s, &p1);
        CHECKF(diff == 0, "S = %d %s: %zu of %lld values differ from the schedule without it", S, what[step], diff,
               (long long)b.n);
        printf("  S = %d %s: arena %.2f MiB (without: %.2f), %d buffers (%d)\n", S, what[step],
               p1.arena_bytes / 1048576.0, b.p0.arena_bytes / 1048576.0, (int)p1.num_buffers, (int)b.p0.num_buffers);
        if (step == 0) CHECK(p1.num_buffers == b.p0.num_buffers - 1); /* the widening block's norm1 */
        if (step == 1) CHECK(p1.num_buffers == b.p0.num_buffers + 1); /* the hint plane's bytes */
        if (step == 2) CHECK(p1.num_buffers == b.p0.num_buffers - 3); /* c1, c2, c3 */
    }
    base_close(&b);
}

/* ck_schedule.norm1_from_map, input_rgb, reroll_in_place (the CPU's floor
 * steps): the tiny model at S = 128 and (release build) 256 (pos-embed streamed, refiner in
 * bands) and the full architecture at S = 256 (release build); the whole step
 * against the whole-map run and the golden; at S = 2048 each step plans
 * less, and at S = 3072 the leanest schedule (the smallest budget: release
 * build) is within 1 GiB. */
static void test_floor_steps(void) {
    ckey_model *m = load_tiny();
    REQUIRE(m);
    const ck_schedule a = {.transition_from_map = 1, .qkv_streamed = 1, .decoder_band = 16},
                      b = {.transition_from_map = 1, .qkv_streamed = 1, .decoder_band = 16, .pos_streamed = 1,
                           .refiner_band = 24},
                      all = {.transition_from_map = 1, .qkv_streamed = 1, .decoder_band = 16, .norm1_from_map = 1,
                             .input_rgb = 1, .reroll_in_place = 1};
    floor_case(m, 128, &a);
    if (!CK_ASAN) floor_case(m, 256, &b);
    same_as_whole(m, 128, &all, "tiny/tiny_s128.safetensors", "floor steps");
    ckey_model_free(m);
    m = load_full();
    REQUIRE(m);
    if (!CK_ASAN) floor_case(m, 256, &a);
    ckey_session_options o = options_at(2048);
    ckey_error err;
    ck_schedule s = {.refiner_band = 32, .qkv_streamed = 1, .decoder_band = 16, .transition_from_map = 1};
    ckey_memory_plan last, p;
    CHECKF(ck_session_plan_schedule(m, &o, &s, &last, &err) == CKEY_OK, "%s", err.message);
    for (int step = 0; step < 3; step++) {
        if (step == 0) s.norm1_from_map = 1;
        if (step == 1) s.input_rgb = 1;
        if (step == 2) s.reroll_in_place = 1;
        CHECKF(ck_session_plan_schedule(m, &o, &s, &p, &err) == CKEY_OK, "%s", err.message);
        printf("  S = 2048 step %d: encoder %.1f, decoders %.1f, refiner %.1f MiB (before: %.1f, %.1f, %.1f)\n", step,
               p.stage_bytes[0] / 1048576.0, p.stage_bytes[1] / 1048576.0, p.stage_bytes[2] / 1048576.0,
               last.stage_bytes[0] / 1048576.0, last.stage_bytes[1] / 1048576.0, last.stage_bytes[2] / 1048576.0);
        CHECK(p.arena_bytes < last.arena_bytes);
        last = p;
    }
    o.size = 3072;
    s.refiner_band = 48;
    s.pos_streamed = 1;
    CHECKF(ck_session_plan_schedule(m, &o, &s, &p, &err) == CKEY_OK, "%s", err.message);
    printf("  S = 3072 every step, bands of 48: %.1f MiB\n", p.peak_bytes / 1048576.0);
    CHECK(p.peak_bytes <= (int64_t)1 << 30);
    if (!CK_ASAN) { /* the planner finds it (every schedule planned) */
        REQUIRE(ckey_plan_memory(m, &o, &p, &err) == CKEY_OK);
        printf("  S = 3072: smallest budget %.1f MiB\n", p.min_budget_bytes / 1048576.0);
        CHECK(p.min_budget_bytes <= (int64_t)1 << 30);
    }
    ckey_model_free(m);
}

/* ck_schedule.encoder_band on top of schedule base (model m at S): the
 * mask-unit blocks in bands, c1 and c2 made again by each decoder band, give
 * base's result to the last bit (the same arithmetic per row and window),
 * and the whole-map run's within 1e-5 (with the golden's x and the golden,
 * when gold_rel is given). */
static void encoder_band_case(const ckey_model *m, int S, const ck_schedule *base, const char *gold_rel) {
    base_run b;
    REQUIRE(base_open(&b, m, S, base, NULL));
    ck_schedule s = *base;
    s.encoder_band = 16;
    ckey_memory_plan p1;
    const size_t diff = bitwise_vs_base(&b, &s, &p1);
    CHECK(p1.streamed & CKEY_PLAN_ENCODER_BANDS);
    CHECKF(diff == 0, "S = %d encoder bands: %zu of %lld values differ from the schedule without them", S, diff,
           (long long)b.n);
    printf("  S = %d encoder bands: arena %.2f MiB (without: %.2f)\n", S, p1.arena_bytes / 1048576.0,
           b.p0.arena_bytes / 1048576.0);
    base_close(&b);
    same_as_whole(m, S, &s, gold_rel, "encoder bands");
}

/* ck_schedule.out_in_input on top of schedule base (model m at S, the
 * refiner in bands): the deltas written into x's buffer give base's result
 * to the last bit, twice in a row on one session (the second pass's input
 * copied over the first's output), plan less than base, and the whole-map
 * run's result within 1e-5. */
static void out_in_input_case(const ckey_model *m, int S, const ck_schedule *base) {
    base_run b;
    REQUIRE(base_open(&b, m, S, base, NULL));
    ck_schedule s = *base;
    s.out_in_input = 1;
    ckey_memory_plan p1;
    const ckey_session_options o = options_at(S);
    ckey_session *ss = NULL;
    ckey_status st = ck_session_create_schedule(m, &o, 0, &s, &ss, &b.err);
    if (!st) st = ckey_session_get_plan(ss, &p1);
    CHECKF(st == CKEY_OK, "%s", b.err.message);
    if (st) {
        ckey_session_free(ss);
        base_close(&b);
        return;
    }
    CHECK(p1.streamed & CKEY_PLAN_OUT_IN_INPUT);
    for (int run = 0; run < 2; run++) {
        ckey_forward_result r;
        CHECKF(ckey_session_forward(ss, b.x, &r, &b.err) == CKEY_OK, "%s", b.err.message);
        const size_t diff = bit_diffs(r.alpha, b.ref, b.n);
        CHECKF(diff == 0, "S = %d bands of %d, output in the input, pass %d: %zu of %lld values differ", S,
               s.refiner_band, run, diff, (long long)b.n);
    }
    ckey_session_free(ss);
    printf("  S = %d bands of %d, output in the input: arena %.2f MiB (without: %.2f)\n", S, s.refiner_band,
           p1.arena_bytes / 1048576.0, b.p0.arena_bytes / 1048576.0);
    CHECK(p1.arena_bytes < b.p0.arena_bytes);
    base_close(&b);
    same_as_whole(m, S, &s, NULL, "output in the input");
}

/* ck_schedule.encoder_band: the tiny model at S = 128 (two bands of units,
 * eight decoder bands; against the golden too) and (release build) 256 with
 * the pos-embed streamed and the refiner in bands, the full architecture at
 * S = 256 (release build); on the full architecture each of the encoder,
 * decoders and the whole plan less at S = 2048 and 4096, and at S = 4096 the
 * encoder and decoders within 1 GiB with the weights. */
static void test_encoder_band(void) {
    ckey_model *m = load_tiny();
    REQUIRE(m);
    const ck_schedule all = {.transition_from_map = 1, .qkv_streamed = 1, .decoder_band = 16, .norm1_from_map = 1,
                             .input_rgb = 1, .reroll_in_place = 1},
                      b = {.transition_from_map = 1, .qkv_streamed = 1, .decoder_band = 16, .norm1_from_map = 1,
                           .input_rgb = 1, .reroll_in_place = 1, .pos_streamed = 1, .refiner_band = 24};
    encoder_band_case(m, 128, &all, "tiny/tiny_s128.safetensors");
    if (!CK_ASAN) encoder_band_case(m, 256, &b, NULL);
    ck_schedule e = all;
    e.encoder_band = 16;
    for (int B = 8; B <= 32; B += 24) { /* bands shorter than the halo's half, and longer */
        e.refiner_band = B;
        out_in_input_case(m, 128, &e);
    }
    e.encoder_band = 0, e.input_rgb = 0, e.refiner_band = 24;
    out_in_input_case(m, 128, &e); /* alone */
    ckey_model_free(m);
    m = load_full();
    REQUIRE(m);
    if (!CK_ASAN) encoder_band_case(m, 256, &all, NULL);
    ckey_session_options o = options_at(2048); /* and 4096 */
    ckey_error err;
    if (!CK_ASAN) {
        ck_schedule e2 = all;
        e2.encoder_band = 16, e2.refiner_band = 16;
        out_in_input_case(m, 256, &e2);
    }
    for (int S = 2048; S <= 4096; S += 2048) {
        o.size = S;
        ck_schedule s = all;
        s.refiner_band = 8;
        s.pos_streamed = S / m->cfg.patch_stride != m->cfg.pos_grid;
        ckey_memory_plan p0, p1;
        CHECKF(ck_session_plan_schedule(m, &o, &s, &p0, &err) == CKEY_OK, "%s", err.message);
        s.encoder_band = 16;
        CHECKF(ck_session_plan_schedule(m, &o, &s, &p1, &err) == CKEY_OK, "%s", err.message);
        printf("  S = %d encoder bands: encoder %.1f, decoders %.1f, refiner %.1f, peak %.1f MiB (without: %.1f, "
               "%.1f, %.1f, %.1f)\n",
               S, p1.stage_bytes[0] / 1048576.0, p1.stage_bytes[1] / 1048576.0, p1.stage_bytes[2] / 1048576.0,
               p1.peak_bytes / 1048576.0, p0.stage_bytes[0] / 1048576.0, p0.stage_bytes[1] / 1048576.0,
               p0.stage_bytes[2] / 1048576.0, p0.peak_bytes / 1048576.0);
        CHECK(p1.stage_bytes[0] < p0.stage_bytes[0] && p1.stage_bytes[1] < p0.stage_bytes[1]);
        CHECK(p1.peak_bytes < p0.peak_bytes);
        if (S == 4096)
            CHECK(p1.weight_bytes + CK_MAX(p1.stage_bytes[0], p1.stage_bytes[1]) <= (int64_t)1 << 30);
        s.out_in_input = 1;
        ckey_memory_plan p2;
        CHECKF(ck_session_plan_schedule(m, &o, &s, &p2, &err) == CKEY_OK, "%s", err.message);
        printf("  S = %d and the output in the input: refiner %.1f, peak %.1f MiB\n", S,
               p2.stage_bytes[2] / 1048576.0, p2.peak_bytes / 1048576.0);
        CHECK(p2.stage_bytes[2] < p1.stage_bytes[2]);
        if (S == 4096) CHECK(p2.peak_bytes <= (int64_t)1 << 30);
    }
    if (!CK_ASAN) { /* the planner finds it (every schedule planned) */
        o.size = 4096;
        ckey_memory_plan p;
        REQUIRE(ckey_plan_memory(m, &o, &p, &err) == CKEY_OK);
        printf("  S = 4096: smallest budget %.1f MiB\n", p.min_budget_bytes / 1048576.0);
        CHECK(p.min_budget_bytes <= (int64_t)1 << 30);
    }
    ckey_model_free(m);
}

/* Budgets on the full architecture at S = 512 (planning only): none picks
 * the whole maps; the smallest budget fits the leanest schedule; each
 * budget's plan is within it and as fast as any plan within it; one byte
 * less than the smallest is refused with the smallest named. */
static void test_budget_choice(void) {
    ckey_model *m = load_full();
    REQUIRE(m);
    ckey_session_options o = options_at(512);
    ckey_error err;
    ckey_memory_plan unl, p;
    REQUIRE(ckey_plan_memory(m, &o, &unl, &err) == CKEY_OK);
    printf("  S = 512 unlimited: peak %.1f MiB, bands %d; smallest budget %.1f MiB\n", unl.peak_bytes / 1048576.0,
           (int)unl.refiner_band, unl.min_budget_bytes / 1048576.0);
    CHECK(unl.refiner_band == 0 && unl.relative_work == 1.0);
    CHECK(unl.min_budget_bytes < unl.peak_bytes);
    CHECK(unl.stage_bytes[2] <= unl.arena_bytes && unl.stage_bytes[0] > 0);
    double last_work = 1.0;
    int64_t last_peak = unl.peak_bytes;
    /* budgets from the whole maps' peak down to the smallest */
    for (int i = 0; i <= 8; i++) {
        o.memory_budget = unl.peak_bytes - (unl.peak_bytes - unl.min_budget_bytes) * i / 8;
        REQUIRE(ckey_plan_memory(m, &o, &p, &err) == CKEY_OK);
        printf("  budget %.1f MiB: bands %d, peak %.1f MiB, refiner work x%.2f\n", o.memory_budget / 1048576.0,
               (int)p.refiner_band, p.peak_bytes / 1048576.0, p.relative_work);
        CHECK(p.peak_bytes <= o.memory_budget);
        CHECK(p.relative_work >= last_work && p.peak_bytes <= last_peak);
        CHECK(p.min_budget_bytes == unl.min_budget_bytes);
        last_work = p.relative_work, last_peak = p.peak_bytes;
    }
    CHECK(p.peak_bytes == unl.min_budget_bytes);
    o.memory_budget = unl.min_budget_bytes - 1;
    CHECK(ckey_plan_memory(m, &o, &p, &err) == CKEY_ERR_BUDGET);
    char want[48];
    snprintf(want, sizeof want, "%.1f MiB (%lld bytes", unl.min_budget_bytes / 1048576.0,
             (long long)unl.min_budget_bytes);
    printf("  %s\n", err.message);
    CHECKF(strstr(err.message, want) != NULL, "the message names the smallest budget %s", want);
    /* a session refuses it the same way, before allocating */
    ckey_session *s = NULL;
    CHECK(ckey_session_create(m, &o, &s, &err) == CKEY_ERR_BUDGET && s == NULL);
    ckey_model_free(m);
}

/* A session under a budget runs the schedule it chose: tiny model at S =
 * 256 (its pos-embed resized), the smallest budget, which only bands fit;
 * the result equals the whole-map run's. */
static void test_session_at_smallest_budget(void) {
    ckey_model *m = load_tiny();
    REQUIRE(m);
    base_run b; /* the runs under no budget (into ref) and the smallest (into got) */
    REQUIRE(base_open(&b, m, 256, NULL, NULL));
    ckey_memory_plan p, q;
    CHECKF(run_schedule(m, b.S, 0, NULL, b.x, b.ref, &p, &b.err) == CKEY_OK, "%s", b.err.message);
    CHECKF(run_schedule(m, b.S, p.min_budget_bytes, NULL, b.x, b.got, &q, &b.err) == CKEY_OK, "%s", b.err.message);
    printf("  smallest budget %.2f MiB: bands of %d rows, peak %.2f MiB (whole maps %.2f MiB)\n",
           p.min_budget_bytes / 1048576.0, (int)q.refiner_band, q.peak_bytes / 1048576.0, p.peak_bytes / 1048576.0);
    CHECK(p.refiner_band == 0 && q.refiner_band > 0 && q.peak_bytes <= p.min_budget_bytes);
    CHECK(q.peak_bytes < p.peak_bytes);
    double e = ck_compare("smallest budget vs whole maps", b.got, b.ref, (size_t)b.n, NULL);
    CHECKF(e <= 1e-5, "max abs err %.3g vs whole maps", e);
    base_close(&b);
    ckey_model_free(m);
}

/* A run's budget (ckey_plan_run_memory): the network's schedule is chosen
 * for what the budget leaves after the plate buffers, so the smallest run
 * budget fits with bands, and one byte less is refused naming it. */
static void test_run_budget(void) {
    ckey_model *m = load_tiny();
    REQUIRE(m);
    ckey_session_options o = options_at(256);
    ckey_run_options ro;
    ckey_run_options_default(&ro);
    ro.kind = CKEY_RUN_PLATE;
    ro.width = 640;
    ro.height = 360;
    ro.host_limit = -1;
    ckey_run_memory r;
    ckey_error err;
    REQUIRE(ckey_plan_run_memory(m, &o, &ro, &r, &err) == CKEY_OK);
    printf("  unlimited: total %.2f MiB (network %.2f MiB, whole maps); smallest %.2f MiB\n",
           r.total_bytes / 1048576.0, r.session.peak_bytes / 1048576.0, r.min_budget_bytes / 1048576.0);
    CHECK(r.session.refiner_band == 0 && r.session_budget == 0 && r.min_budget_bytes < r.total_bytes);
    const int64_t whole_total = r.total_bytes;
    o.memory_budget = r.min_budget_bytes;
    CHECKF(ckey_plan_run_memory(m, &o, &ro, &r, &err) == CKEY_OK, "%s", err.message);
    printf("  budget %.2f MiB: total %.2f MiB, network in bands of %d rows, its budget %.2f MiB\n",
           o.memory_budget / 1048576.0, r.total_bytes / 1048576.0, (int)r.session.refiner_band,
           r.session_budget / 1048576.0);
    CHECK(r.total_bytes <= o.memory_budget && r.session.refiner_band > 0 && r.total_bytes < whole_total);
    CHECK(r.session.peak_bytes <= r.session_budget);
    /* the session made with that share runs the same schedule */
    ckey_session_options so = o;
    so.memory_budget = r.session_budget;
    ckey_session *s = NULL;
    ckey_memory_plan p;
    CHECKF(ckey_session_create(m, &so, &s, &err) == CKEY_OK, "%s", err.message);
    if (s) {
        ckey_session_get_plan(s, &p);
        CHECK(p.refiner_band == r.session.refiner_band && p.peak_bytes == r.session.peak_bytes);
    }
    ckey_session_free(s);
    const int64_t least = o.memory_budget;
    o.memory_budget = least - 1;
    CHECK(ckey_plan_run_memory(m, &o, &ro, &r, &err) == CKEY_ERR_BUDGET);
    printf("  %s\n", err.message);
    char want[48];
    snprintf(want, sizeof want, "(%lld bytes)", (long long)least);
    CHECKF(strstr(err.message, want) != NULL, "the message names the smallest budget %s", want);
    ckey_model_free(m);
}

int main(int argc, char **argv) {
    static const ck_test_case cases[] = {
        {"tiny_s128_schedules", test_tiny_s128},
        {"tiny_s64_schedules", test_tiny_s64},
        {"full_s256_schedules", test_full_s256},
        {"pos_streamed", test_pos_streamed},
        {"qkv_streamed", test_qkv_streamed},
        {"decoder_band", test_decoder_band},
        {"transition_from_map", test_transition_from_map},
        {"floor_steps", test_floor_steps},
        {"encoder_band", test_encoder_band},
        {"budget_choice", test_budget_choice},
        {"session_at_smallest_budget", test_session_at_smallest_budget},
        {"run_budget", test_run_budget},
    };
    return ck_test_main(cases, (int)CK_ARRAY_LEN(cases), argc, argv);
}
