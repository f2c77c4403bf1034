/* Cutie end to end against tests/fixtures/cutie/ (README there: made by
 * tools/reference/cutie.py, our PyTorch reference checked against the
 * official code): the reduced-width checkpoint in the official layout, a
 * 30-frame clip with per-frame probabilities, memory reads, sensory memory
 * and memory sizes, stage taps of frames 0, 1 and 3, a clip run with
 * max_internal_size, and the clip with long-term memory (memory reads,
 * decoder logits, sensory, working and long-term sizes, last
 * probabilities). Bars: probabilities and memory reads within 1e-4
 * (fp32), per-object mask IoU >= 0.999, taps within 1e-4 of their scale.
 * Skips, saying so, when the fixtures are absent. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "ckpt/checkpoint.h"
#include "core/core.h"
#include "model/cutie.h"
#include "support/testutil.h"

#define DIR "tests/fixtures/cutie/"

typedef struct {
    ck_checkpoint *ck;
} fixture;

static const ck_tensor_info *need(ck_checkpoint *ck, const char *name) {
    const ck_tensor_info *t = ck_checkpoint_find(ck, name);
    if (!t) fprintf(stderr, "  fixture tensor '%s' missing\n", name);
    return t;
}

static float *f32(const ck_tensor_info *t) {
    float *p = malloc(t->numel * sizeof(float));
    if (ck_tensor_to_f32(t, p, NULL)) {
        free(p);
        return NULL;
    }
    return p;
}

/* ------------------------------------------------------------ the taps */

/* Fixture layouts: maps [(K,) C, h, w]; ours channels-last [(K,) h, w, C].
 * These taps are laid out alike on both sides (rows or planes). */
static int same_layout(const char *name) {
    static const char *const rows[] = {"ot_query_in", "ot_query_pe", "ot_pixel_pe", "ot_query_", "ot_aux_logits_",
                                       "dec_logits", "enc_summaries"};
    for (size_t i = 0; i < CK_ARRAY_LEN(rows); i++)
        if (!strncmp(name, rows[i], strlen(rows[i]))) return 1;
    return 0;
}

typedef struct {
    ck_checkpoint *clip, *taps;
    int K, CV, h, w, T;
    float *readout_visual, *sensory;
    double worst_read, worst_sensory;
    int taps_compared;
    double worst_tap;
    float *dec_logits; /* [T - 1, K, H/4, W/4] (longterm.safetensors) */
    double worst_logits; /* relative to each frame's largest logit */
} run_state;

static double compare_to(const char *label, const float *got, const float *want, size_t n) {
    double scale = 1, e = 0;
    for (size_t i = 0; i < n; i++) scale = fmax(scale, fabs(want[i]));
    for (size_t i = 0; i < n; i++) {
        const double d = fabs((double)got[i] - want[i]);
        e = d > e || d != d ? d : e;
    }
    printf("    %-26s max abs err %.2e (scale %.3g, %zu values)\n", label, e, scale, n);
    return e;
}

/* ours [K, hw, C] (channels-last) -> [K, C, hw] */
static void to_channels_first(const float *src, int K, int64_t hw, int C, float *dst) {
    for (int k = 0; k < K; k++)
        for (int64_t p = 0; p < hw; p++)
            for (int c = 0; c < C; c++) dst[((int64_t)k * C + c) * hw + p] = src[((int64_t)k * hw + p) * C + c];
}

static void on_tap(void *user, int frame, const char *name, const float *data, int64_t n) {
    run_state *s = user;
    const int64_t hw = (int64_t)s->h * s->w;
    float *buf = malloc((size_t)n * sizeof(float));
    const int vis = !strcmp(name, "visual_readout");
    if (vis) { /* ours [hw, K*CV] -> [K, CV, hw] */
        for (int k = 0; k < s->K; k++)
            for (int c = 0; c < s->CV; c++)
                for (int64_t p = 0; p < hw; p++) buf[((int64_t)k * s->CV + c) * hw + p] = data[p * s->K * s->CV + k * s->CV + c];
    }
    if (vis && s->readout_visual && frame >= 1) {
        char label[64];
        snprintf(label, sizeof label, "frame %d memory read", frame);
        const double e = compare_to(label, buf, s->readout_visual + (int64_t)(frame - 1) * n, (size_t)n);
        s->worst_read = fmax(s->worst_read, e);
    }
    if (!strcmp(name, "dec_logits") && s->dec_logits && frame >= 1) {
        char label[64];
        snprintf(label, sizeof label, "frame %d decoder logits", frame);
        const float *want = s->dec_logits + (int64_t)(frame - 1) * n;
        double scale = 1;
        for (int64_t i = 0; i < n; i++) scale = fmax(scale, fabs(want[i]));
        s->worst_logits = fmax(s->worst_logits, compare_to(label, data, want, (size_t)n) / scale);
    }
    if (!strcmp(name, "sensory") && s->sensory) {
        to_channels_first(data, s->K, hw, (int)(n / (s->K * hw)), buf);
        char label[64];
        snprintf(label, sizeof label, "frame %d sensory", frame);
        const double e = compare_to(label, buf, s->sensory + (int64_t)frame * n, (size_t)n);
        s->worst_sensory = fmax(s->worst_sensory, e);
    }
    if (s->taps) {
        char key[96];
        const char *fname = !strcmp(name, "sensory") ? "sensory_out" : name;
        snprintf(key, sizeof key, "f%d.%s", frame, fname);
        const ck_tensor_info *t = ck_checkpoint_find(s->taps, key);
        if (t && (int64_t)t->numel == n) {
            float *want = f32(t);
            const float *got = vis ? buf : data;
            if (!vis && !same_layout(fname)) {
                /* [(K,) C, h, w] fixture: the last two dims are spatial */
                const int64_t sp = t->shape[t->ndim - 1] * t->shape[t->ndim - 2];
                const int K = t->ndim == 4 ? (int)t->shape[0] : 1;
                to_channels_first(data, K, sp, (int)(n / (K * sp)), buf);
                got = buf;
            }
            double scale = 1;
            for (uint64_t i = 0; i < t->numel; i++) scale = fmax(scale, fabs(want[i]));
            const double e = compare_to(key, got, want, (size_t)n) / scale;
            CHECKF(e <= 1e-4, "%s: relative error %.3g", key, e);
            s->worst_tap = fmax(s->worst_tap, e);
            s->taps_compared++;
            free(want);
        } else if (t) {
            fprintf(stderr, "  FAIL %s: %lld values, ours %lld\n", key, (long long)t->numel, (long long)n);
            ck_test_failed = 1;
        }
    }
    free(buf);
}

/* --------------------------------------------------------------- a clip */

static double iou(const float *a, const float *b, int C, int64_t HW, int obj) {
    int64_t inter = 0, uni = 0;
    for (int64_t p = 0; p < HW; p++) {
        int ma = 0, mb = 0;
        for (int c = 1; c < C; c++) {
            if (a[c * HW + p] > a[ma * HW + p]) ma = c;
            if (b[c * HW + p] > b[mb * HW + p]) mb = c;
        }
        inter += ma == obj && mb == obj;
        uni += ma == obj || mb == obj;
    }
    return uni ? (double)inter / (double)uni : 1.0;
}

static void run_clip(const char *file, int with_taps) {
    ck_checkpoint *clip = NULL, *taps = NULL;
    if (ck_checkpoint_open(DIR "cutie_tiny.pth", &clip, NULL) != CKEY_OK) SKIP("%s absent: the Cutie fixtures are not here", DIR "cutie_tiny.pth");
    ck_checkpoint_close(clip);
    char path[256];
    snprintf(path, sizeof path, DIR "%s", file);
    if (ck_checkpoint_open(path, &clip, NULL) != CKEY_OK) SKIP("%s absent: the Cutie fixtures are not here", path);
    if (with_taps && ck_checkpoint_open(DIR "taps.safetensors", &taps, NULL) != CKEY_OK) taps = NULL;
    ckey_error err;
    ckey_track_model *m = NULL;
    ckey_status st = ckey_track_model_open(DIR "cutie_tiny.pth", NULL, &m, &err);
    CHECKF(st == CKEY_OK, "%s", err.message);
    const ck_tensor_info *tf = need(clip, "frames"), *tm = need(clip, "mask0"), *tp = need(clip, "prob");
    const ck_tensor_info *tmt = need(clip, "mem_tokens");
    if (st || !tf || !tm || !tp || !tmt) {
        ck_test_failed = 1;
        ckey_track_model_free(m);
        ck_checkpoint_close(clip);
        ck_checkpoint_close(taps);
        return;
    }
    const int T = (int)tf->shape[0], H = (int)tf->shape[2], W = (int)tf->shape[3], C1 = (int)tp->shape[1], K = C1 - 1;
    const int64_t HW = (int64_t)H * W;
    const char *params = ck_checkpoint_meta(clip, "params");
    ckey_track_options o;
    ckey_track_options_default(&o);
    o.threads = 2;
    o.mem_every = 3, o.max_mem_frames = 3, o.top_k = 30, o.stagger_updates = 2; /* the README's table */
    if (strstr(file, "resize")) o.max_internal_size = 80;
    printf("  %s: %d frames %d x %d, %d objects, model pixel encoder %s (params %s)\n", file, T, W, H, K,
           m->pix_enc.bottleneck ? "Bottleneck" : "BasicBlock", params ? params : "?");
    ckey_tracker *t = NULL;
    st = ckey_tracker_create(m, W, H, &o, &t, &err);
    CHECKF(st == CKEY_OK, "%s", err.message);
    run_state rs = {clip, taps, K, m->cfg.value_dim, 0, 0, T, NULL, NULL, 0, 0, 0, 0, NULL, 0};
    rs.h = (int)((H + 15) / 16), rs.w = (int)((W + 15) / 16);
    if (o.max_internal_size < 0) {
        const ck_tensor_info *a = ck_checkpoint_find(clip, "readout_visual"), *b = ck_checkpoint_find(clip, "sensory");
        rs.readout_visual = a ? f32(a) : NULL;
        rs.sensory = b ? f32(b) : NULL;
    } else {
        rs.h = rs.w = 0; /* internal size differs; no per-stage comparison */
        rs.taps = NULL;
    }
    if (st == CKEY_OK) ck_tracker_set_tap(t, rs.h ? on_tap : NULL, &rs);
    uint8_t *frames = malloc(tf->numel), *mask = malloc(tm->numel);
    memcpy(frames, tf->data, tf->numel);
    memcpy(mask, tm->data, tm->numel);
    int32_t *mt = malloc(tmt->numel * sizeof(int32_t));
    memcpy(mt, tmt->data, tmt->numel * sizeof(int32_t));
    float *want = f32(tp), *rgb = malloc((size_t)HW * 3 * sizeof(float)), *prob = malloc((size_t)C1 * HW * sizeof(float));
    const uint8_t objects[2] = {1, 2};
    double worst = 0, worst_iou = 1;
    for (int f = 0; f < T && st == CKEY_OK; f++) {
        for (int64_t p = 0; p < HW; p++)
            for (int c = 0; c < 3; c++) rgb[p * 3 + c] = (float)frames[((int64_t)f * 3 + c) * HW + p] / 255.0f;
        st = ckey_tracker_step(t, rgb, f == 0 ? mask : NULL, f == 0 ? K : 0, objects, prob, &err);
        CHECKF(st == CKEY_OK, "frame %d: %s", f, err.message);
        if (st) break;
        char label[64];
        snprintf(label, sizeof label, "frame %d probabilities", f);
        const double e = compare_to(label, prob, want + (int64_t)f * C1 * HW, (size_t)C1 * HW);
        worst = fmax(worst, e);
        for (int k = 1; k <= K; k++) worst_iou = fmin(worst_iou, iou(prob, want + (int64_t)f * C1 * HW, C1, HW, k));
        CHECKF(ckey_tracker_memory_tokens(t) == mt[f], "frame %d: memory %lld tokens, expected %d", f,
               (long long)ckey_tracker_memory_tokens(t), mt[f]);
    }
    printf("  %s: probabilities max abs err %.2e, worst object IoU %.6f\n", file, worst, worst_iou);
    if (rs.h)
        printf("  %s: memory reads max abs err %.2e, sensory %.2e; %d taps, worst %.2e of their scale\n", file,
               rs.worst_read, rs.worst_sensory, rs.taps_compared, rs.worst_tap);
    CHECK(worst <= 1e-4);
    CHECK(worst_iou >= 0.999);
    CHECK(rs.worst_read <= 1e-4);
    CHECK(rs.worst_sensory <= 1e-4);
    if (with_taps && taps) CHECK(rs.taps_compared >= 20);
    free(frames), free(mask), free(mt), free(want), free(rgb), free(prob), free(rs.readout_visual), free(rs.sensory);
    ckey_tracker_free(t);
    ckey_track_model_free(m);
    ck_checkpoint_close(clip);
    ck_checkpoint_close(taps);
}

static void test_clip(void) { run_clip("clip.safetensors", 1); }
static void test_resize(void) { run_clip("resize.safetensors", 0); }

/* Long-term memory (longterm.safetensors: clip's frames, use_long_term with
 * the README's parameters): per-frame memory reads, decoder logits and
 * sensory, working and long-term memory sizes, the last frame's
 * probabilities. */
static void test_longterm(void) {
    ck_checkpoint *clip = NULL, *lt = NULL;
    if (ck_checkpoint_open(DIR "clip.safetensors", &clip, NULL) != CKEY_OK) SKIP("%s absent", DIR "clip.safetensors");
    if (ck_checkpoint_open(DIR "longterm.safetensors", &lt, NULL) != CKEY_OK) {
        ck_checkpoint_close(clip);
        SKIP("%s absent", DIR "longterm.safetensors");
    }
    ckey_error err;
    ckey_track_model *m = NULL;
    ckey_status st = ckey_track_model_open(DIR "cutie_tiny.pth", NULL, &m, &err);
    CHECKF(st == CKEY_OK, "%s", err.message);
    const ck_tensor_info *tf = need(clip, "frames"), *tm = need(clip, "mask0"), *tp = need(lt, "prob_last");
    const ck_tensor_info *tmt = need(lt, "mem_tokens"), *tlt = need(lt, "lt_tokens"), *trv = need(lt, "readout_visual");
    const ck_tensor_info *tdl = need(lt, "dec_logits"), *tse = need(lt, "sensory");
    if (st || !tf || !tm || !tp || !tmt || !tlt || !trv || !tdl || !tse) {
        ck_test_failed = 1;
        ckey_track_model_free(m);
        ck_checkpoint_close(clip), ck_checkpoint_close(lt);
        return;
    }
    const int T = (int)tf->shape[0], H = (int)tf->shape[2], W = (int)tf->shape[3], C1 = (int)tp->shape[0], K = C1 - 1;
    const int64_t HW = (int64_t)H * W;
    const char *params = ck_checkpoint_meta(lt, "params");
    printf("  longterm: %d frames %d x %d, %d objects (params %s)\n", T, W, H, K, params ? params : "?");
    ckey_track_options o;
    ckey_track_options_default(&o);
    o.threads = 2;
    o.mem_every = 2, o.max_mem_frames = 3, o.top_k = 30, o.stagger_updates = 2; /* the fixture's metadata */
    o.use_long_term = 1, o.lt_max_mem_frames = 5, o.lt_min_mem_frames = 3, o.num_prototypes = 16;
    o.max_num_tokens = 48, o.buffer_tokens = 8, o.count_usage = 1;
    ckey_tracker *t = NULL;
    st = ckey_tracker_create(m, W, H, &o, &t, &err);
    CHECKF(st == CKEY_OK, "%s", err.message);
    run_state rs = {clip, NULL, K, m->cfg.value_dim, (H + 15) / 16, (W + 15) / 16, T, f32(trv), f32(tse), 0, 0, 0, 0,
                    f32(tdl), 0};
    if (st == CKEY_OK) ck_tracker_set_tap(t, on_tap, &rs);
    const int32_t *mt = (const int32_t *)tmt->data, *ltt = (const int32_t *)tlt->data;
    float *want = f32(tp), *rgb = malloc((size_t)HW * 3 * sizeof(float)), *prob = malloc((size_t)C1 * HW * sizeof(float));
    const uint8_t objects[2] = {1, 2};
    int removals = 0, consolidations = 0;
    for (int f = 0; f < T && st == CKEY_OK; f++) {
        for (int64_t p = 0; p < HW; p++)
            for (int c = 0; c < 3; c++) rgb[p * 3 + c] = (float)tf->data[((int64_t)f * 3 + c) * HW + p] / 255.0f;
        st = ckey_tracker_step(t, rgb, f == 0 ? tm->data : NULL, f == 0 ? K : 0, objects, prob, &err);
        CHECKF(st == CKEY_OK, "frame %d: %s", f, err.message);
        if (st) break;
        int32_t w, l;
        memcpy(&w, &mt[f], sizeof w), memcpy(&l, &ltt[f], sizeof l);
        CHECKF(ckey_tracker_memory_tokens(t) == w && ckey_tracker_long_term_tokens(t) == l,
               "frame %d: memory %lld + %lld long-term tokens, expected %d + %d", f,
               (long long)ckey_tracker_memory_tokens(t), (long long)ckey_tracker_long_term_tokens(t), w, l);
        if (f > 0) {
            int32_t l0;
            memcpy(&l0, &ltt[f - 1], sizeof l0);
            consolidations += l != l0;
            removals += l < l0 + 16 && l != l0;
        }
    }
    const double e = compare_to("frame 29 probabilities", prob, want, (size_t)C1 * HW);
    printf("  longterm: %d consolidations (%d with a removal); memory reads max abs err %.2e, decoder logits %.2e of their "
           "scale, sensory %.2e, last probabilities %.2e, IoU %.6f / %.6f\n",
           consolidations, removals, rs.worst_read, rs.worst_logits, rs.worst_sensory, e, iou(prob, want, C1, HW, 1),
           iou(prob, want, C1, HW, 2));
    CHECK(consolidations >= 3 && removals >= 1); /* the fixture exercises both */
    CHECK(rs.worst_read <= 1e-4);
    CHECK(rs.worst_logits <= 1e-4);
    CHECK(rs.worst_sensory <= 1e-4);
    CHECK(e <= 1e-4);
    free(want), free(rgb), free(prob), free(rs.readout_visual), free(rs.sensory), free(rs.dec_logits);
    ckey_tracker_free(t);
    ckey_track_model_free(m);
    ck_checkpoint_close(clip), ck_checkpoint_close(lt);
}

/* Masks on later frames (`ckey track --mask-at`): the clip's first frames with
 * the reference's masks at frames 4 (both objects, moved) and 8 (object 1
 * alone), against maskat.safetensors (tools/reference/make_cutie_fixtures.py
 * --only maskat); skipped until that fixture is made. */
static void test_mask_at(void) {
    ck_checkpoint *mk = NULL, *clip = NULL;
    if (ck_checkpoint_open(DIR "maskat.safetensors", &mk, NULL) != CKEY_OK)
        SKIP("%s absent: make it with tools/reference/make_cutie_fixtures.py --only maskat", DIR "maskat.safetensors");
    ckey_error err;
    ckey_track_model *m = NULL;
    const ck_tensor_info *tp = NULL, *m4 = NULL, *m8 = NULL, *tmt = NULL, *tf = NULL, *tm = NULL;
    if (ck_checkpoint_open(DIR "clip.safetensors", &clip, NULL) == CKEY_OK) tf = need(clip, "frames"), tm = need(clip, "mask0");
    tp = need(mk, "prob"), m4 = need(mk, "mask4"), m8 = need(mk, "mask8"), tmt = need(mk, "mem_tokens");
    if (!tf || !tm || !tp || !m4 || !m8 || !tmt || ckey_track_model_open(DIR "cutie_tiny.pth", NULL, &m, &err) != CKEY_OK) {
        ck_test_failed = 1;
        ck_checkpoint_close(mk), ck_checkpoint_close(clip);
        return;
    }
    const int T = (int)tp->shape[0], C1 = (int)tp->shape[1], H = (int)tf->shape[2], W = (int)tf->shape[3];
    const int64_t HW = (int64_t)H * W;
    ckey_track_options o;
    ckey_track_options_default(&o);
    o.threads = 2;
    o.mem_every = 3, o.max_mem_frames = 3, o.top_k = 30, o.stagger_updates = 2;
    ckey_tracker *t = NULL;
    ckey_status st = ckey_tracker_create(m, W, H, &o, &t, &err);
    float *want = f32(tp), *rgb = malloc((size_t)HW * 3 * sizeof(float)), *prob = malloc((size_t)C1 * HW * sizeof(float));
    int32_t *mt = malloc(tmt->numel * sizeof(int32_t));
    memcpy(mt, tmt->data, tmt->numel * sizeof(int32_t));
    const uint8_t *frames = tf->data, both[2] = {1, 2}, one[1] = {1};
    double worst = 0;
    for (int f = 0; f < T && st == CKEY_OK; f++) {
        for (int64_t p = 0; p < HW; p++)
            for (int c = 0; c < 3; c++) rgb[p * 3 + c] = (float)frames[((int64_t)f * 3 + c) * HW + p] / 255.0f;
        const uint8_t *lab = f == 0 ? tm->data : f == 4 ? m4->data : f == 8 ? m8->data : NULL;
        st = ckey_tracker_step(t, rgb, lab, f == 8 ? 1 : lab ? 2 : 0, f == 8 ? one : both, prob, &err);
        CHECKF(st == CKEY_OK, "frame %d: %s", f, err.message);
        if (st) break;
        char label[64];
        snprintf(label, sizeof label, "frame %d probabilities", f);
        worst = fmax(worst, compare_to(label, prob, want + (int64_t)f * C1 * HW, (size_t)C1 * HW));
        CHECKF(ckey_tracker_memory_tokens(t) == mt[f], "frame %d: memory %lld tokens, expected %d", f,
               (long long)ckey_tracker_memory_tokens(t), mt[f]);
    }
    printf("  maskat.safetensors: probabilities max abs err %.2e\n", worst);
    CHECK(worst <= 1e-4);
    free(want), free(rgb), free(prob), free(mt);
    ckey_tracker_free(t);
    ckey_track_model_free(m);
    ck_checkpoint_close(mk), ck_checkpoint_close(clip);
}

static void test_model_shapes(void) {
    ckey_error err;
    ckey_track_model *m = NULL;
    if (ckey_track_model_open(DIR "cutie_tiny.pth", NULL, &m, &err) != CKEY_OK) {
        if (strstr(err.message, "cannot open") || strstr(err.message, "No such")) SKIP("%s", err.message);
        CHECKF(0, "%s", err.message);
        return;
    }
    const ck_cutie_cfg *c = &m->cfg;
    printf("  pixel %d key %d value %d sensory %d embed %d; ms %d/%d/%d; up %d/%d/%d; Q %d heads %d blocks %d ff %d; "
           "%lld params\n",
           c->pixel_dim, c->key_dim, c->value_dim, c->sensory_dim, c->embed_dim, c->ms_dims[0], c->ms_dims[1],
           c->ms_dims[2], c->up_dims[0], c->up_dims[1], c->up_dims[2], c->num_queries, c->num_heads, c->ot_blocks,
           c->ff_dim, (long long)m->num_params);
    /* the README's table of the reduced network */
    CHECK(c->pixel_dim == 20 && c->key_dim == 12 && c->value_dim == 16 && c->sensory_dim == 12 && c->embed_dim == 24);
    CHECK(c->ms_dims[0] == 64 && c->ms_dims[1] == 32 && c->ms_dims[2] == 16);
    CHECK(c->up_dims[0] == 24 && c->up_dims[1] == 16 && c->up_dims[2] == 8);
    CHECK(c->num_queries == 8 && c->num_heads == 2 && c->ot_blocks == 3 && c->ff_dim == 40);
    CHECK(m->pix_enc.bottleneck && !m->mask_enc.bottleneck);
    CHECK(m->pix_enc.nblocks[0] == 3 && m->pix_enc.nblocks[1] == 4 && m->pix_enc.nblocks[2] == 6);
    ckey_track_model_free(m);
}

static long rss_kib(void) {
    FILE *f = fopen("/proc/self/status", "r");
    char line[256];
    long v = -1;
    while (f && fgets(line, sizeof line, f))
        if (!strncmp(line, "RssAnon:", 8)) v = strtol(line + 8, NULL, 10);
    if (f) fclose(f);
    return v;
}

/* A long shot (the clip's frames over and over): the memory holds max_mem_frames
 * frames (with long-term memory: at most lt_max_mem_frames working frames and
 * fewer than max_num_tokens long-term tokens) and the process does not grow
 * after the first frames. */
static void long_shot(int long_term) {
    ck_checkpoint *clip = NULL;
    ckey_error err;
    ckey_track_model *m = NULL;
    if (ck_checkpoint_open(DIR "clip.safetensors", &clip, NULL) != CKEY_OK) SKIP("%s absent", DIR "clip.safetensors");
    if (ckey_track_model_open(DIR "cutie_tiny.pth", NULL, &m, &err) != CKEY_OK) {
        ck_checkpoint_close(clip);
        SKIP("%s", err.message);
    }
    const ck_tensor_info *tf = ck_checkpoint_find(clip, "frames"), *tm = ck_checkpoint_find(clip, "mask0");
    REQUIRE(tf && tm);
    const int T = (int)tf->shape[0], H = (int)tf->shape[2], W = (int)tf->shape[3];
    const int64_t HW = (int64_t)H * W;
    ckey_track_options o;
    ckey_track_options_default(&o);
    o.threads = 2, o.mem_every = 2, o.max_mem_frames = 3;
    if (long_term) /* longterm.safetensors' parameters */
        o.use_long_term = 1, o.lt_max_mem_frames = 5, o.lt_min_mem_frames = 3, o.num_prototypes = 16,
        o.max_num_tokens = 48, o.buffer_tokens = 8;
    ckey_tracker *t = NULL;
    REQUIRE(ckey_tracker_create(m, W, H, &o, &t, &err) == CKEY_OK);
    float *rgb = malloc((size_t)HW * 3 * sizeof(float)), *prob = malloc((size_t)3 * HW * sizeof(float));
    const uint8_t objects[2] = {1, 2};
    long rss10 = 0, rss_end = 0;
    int64_t tokens_max = 0, lt_max = 0, lt_min_late = INT64_MAX;
    const int frames = 120;
    for (int f = 0; f < frames; f++) {
        const uint8_t *fr = tf->data + (size_t)(f % T) * 3 * HW;
        for (int64_t p = 0; p < HW; p++)
            for (int c = 0; c < 3; c++) rgb[p * 3 + c] = (float)fr[c * HW + p] / 255.0f;
        if (ckey_tracker_step(t, rgb, f ? NULL : tm->data, f ? 0 : 2, objects, prob, &err) != CKEY_OK) {
            CHECKF(0, "frame %d: %s", f, err.message);
            break;
        }
        if (f >= 6) tokens_max = CK_MAX(tokens_max, ckey_tracker_memory_tokens(t));
        lt_max = CK_MAX(lt_max, ckey_tracker_long_term_tokens(t));
        if (f >= 60) lt_min_late = CK_MIN(lt_min_late, ckey_tracker_long_term_tokens(t));
        if (f == 10) rss10 = rss_kib();
    }
    rss_end = rss_kib();
    printf("  %d frames%s: memory %lld tokens at most from frame 6, long-term %lld at most (%lld at least from frame "
           "60), anonymous RSS %ld KiB at frame 10, %ld at the end\n",
           frames, long_term ? " with long-term memory" : "", (long long)tokens_max, (long long)lt_max,
           (long long)lt_min_late, rss10, rss_end);
    /* long-term: 5 frames while an insert consolidates, 4 after a step at most */
    CHECK(tokens_max == (long_term ? 4 : 3) * 32);
    CHECK(long_term ? lt_max < 48 && lt_min_late > 0 : lt_max == 0);
    CHECK(rss_end <= rss10 + 64);
    free(rgb), free(prob);
    ckey_tracker_free(t);
    ckey_track_model_free(m);
    ck_checkpoint_close(clip);
}

/* Arguments the tracker refuses, with a status and a message. */
static void test_long_shot(void) { long_shot(0); }
static void test_long_shot_long_term(void) { long_shot(1); }

/* The tracker's memory plan (ckey_track_plan_memory, made without
 * allocating) against what a tracker of the same options allocates once
 * its first frame (with max_objects objects) has planned the arena; and the
 * memory bank against its size from the model's widths. Cases: the
 * defaults, max_internal_size (a resized frame), long-term memory. */
static void test_plan(void) {
    ckey_error err;
    ckey_track_model *m = NULL;
    if (ckey_track_model_open(DIR "cutie_tiny.pth", NULL, &m, &err) != CKEY_OK) SKIP("%s", err.message);
    static const struct {
        const char *name;
        int W, H, objects, internal, long_term;
    } cases[] = {
        {"defaults", 113, 49, 2, -1, 0},
        {"max_internal_size 40", 113, 81, 3, 40, 0},
        {"long-term", 160, 96, 2, -1, 1},
    };
    for (size_t k = 0; k < CK_ARRAY_LEN(cases); k++) {
        const int W = cases[k].W, H = cases[k].H, O = cases[k].objects;
        ckey_track_options o;
        ckey_track_options_default(&o);
        o.threads = 2;
        o.max_objects = O;
        o.max_internal_size = cases[k].internal;
        if (cases[k].long_term) o.use_long_term = 1, o.num_prototypes = 16, o.max_num_tokens = 400, o.buffer_tokens = 50;
        ckey_track_memory plan, got;
        REQUIRE(ckey_track_plan_memory(m, W, H, &o, &plan, &err) == CKEY_OK);
        ckey_tracker *t = NULL;
        REQUIRE(ckey_tracker_create(m, W, H, &o, &t, &err) == CKEY_OK);
        float *rgb = calloc((size_t)W * H * 3, sizeof(float)), *prob = malloc((size_t)(O + 1) * W * H * sizeof(float));
        uint8_t *lab = calloc((size_t)W * H, 1), ids[3] = {1, 2, 3};
        for (int i = 0; i < O; i++) lab[i * 7] = ids[i];
        ckey_tracker_get_memory(t, &got);
        CHECKF(got.arena_bytes == 0, "%s: an arena of %lld bytes before the first frame", cases[k].name,
               (long long)got.arena_bytes);
        REQUIRE(ckey_tracker_step(t, rgb, lab, O, ids, prob, &err) == CKEY_OK);
        REQUIRE(ckey_tracker_step(t, rgb, NULL, 0, NULL, prob, &err) == CKEY_OK);
        ckey_tracker_get_memory(t, &got);
        printf("  %-22s planned %lld bytes (weights %lld, bank %lld, sensory %lld, frame %lld, arena %lld, "
               "workspace %lld); allocated %lld\n",
               cases[k].name, (long long)plan.total_bytes, (long long)plan.weight_bytes, (long long)plan.bank_bytes,
               (long long)plan.sensory_bytes, (long long)plan.frame_bytes, (long long)plan.arena_bytes,
               (long long)plan.workspace_bytes, (long long)got.total_bytes);
        CHECKF(plan.weight_bytes == got.weight_bytes && plan.bank_bytes == got.bank_bytes &&
                   plan.sensory_bytes == got.sensory_bytes && plan.frame_bytes == got.frame_bytes &&
                   plan.arena_bytes == got.arena_bytes && plan.workspace_bytes == got.workspace_bytes &&
                   plan.total_bytes == got.total_bytes && plan.source_bytes == 0,
               "%s: the plan (%lld bytes) is not what the tracker allocated (%lld)", cases[k].name,
               (long long)plan.total_bytes, (long long)got.total_bytes);
        CHECKF(plan.weight_bytes >= m->num_params * 4 && plan.arena_bytes > 0 && plan.workspace_bytes > 0,
               "%s: weights %lld bytes for %lld parameters, arena %lld, workspace %lld", cases[k].name,
               (long long)plan.weight_bytes, (long long)m->num_params, (long long)plan.arena_bytes,
               (long long)plan.workspace_bytes);
        /* the bank from the widths: rows of key + shrinkage + O values, the
         * working memory's frames at stride 16 of the processed size */
        const ck_cutie_cfg *c = &m->cfg;
        int Hi = H, Wi = W;
        if (o.max_internal_size > 0 && (H < W ? H : W) > o.max_internal_size) {
            const int mn = H < W ? H : W;
            Hi = (int)((double)H / mn * o.max_internal_size), Wi = (int)((double)W / mn * o.max_internal_size);
        }
        const int64_t hw = (int64_t)((Hi + 15) / 16) * ((Wi + 15) / 16);
        /* keys and shrinkages for a bucket per object (objects added later
         * bring buckets of their own), values for every object */
        int64_t rows = (int64_t)o.max_mem_frames * hw, krows = rows * O, extra = 0;
        if (o.use_long_term) { /* one bucket; + the long-term store, the selections, usage and life counts */
            rows = krows = (int64_t)o.lt_max_mem_frames * hw + o.max_num_tokens;
            extra = (int64_t)o.lt_max_mem_frames * hw * (c->key_dim + 2) + 2 * (int64_t)o.max_num_tokens + rows;
        }
        const int64_t bank = (krows * (c->key_dim + 1) + rows * (int64_t)O * c->value_dim + extra) * 4;
        CHECKF(plan.bank_bytes >= bank && plan.bank_bytes < bank + 9 * 64, "%s: bank %lld bytes, expected %lld (+ alignment)",
               cases[k].name, (long long)plan.bank_bytes, (long long)bank);
        free(rgb), free(prob), free(lab);
        ckey_tracker_free(t);
    }
    {   /* a first frame of 1 object with room for 3: the arena holds objects added later */
        ckey_track_options o;
        ckey_track_options_default(&o);
        o.threads = 2, o.max_objects = 3;
        const int W = 113, H = 49;
        ckey_track_memory plan, got, later;
        REQUIRE(ck_track_plan_memory_first(m, W, H, &o, 1, &plan, &err) == CKEY_OK);
        ckey_track_memory full;
        REQUIRE(ckey_track_plan_memory(m, W, H, &o, &full, &err) == CKEY_OK);
        ckey_tracker *t = NULL;
        REQUIRE(ckey_tracker_create(m, W, H, &o, &t, &err) == CKEY_OK);
        float *rgb = calloc((size_t)W * H * 3, sizeof(float)), *prob = malloc((size_t)4 * W * H * sizeof(float));
        uint8_t *lab = calloc((size_t)W * H, 1), ids[3] = {1, 2, 3};
        lab[0] = 1, lab[7] = 2, lab[14] = 3;
        REQUIRE(ckey_tracker_step(t, rgb, lab, 1, ids, prob, &err) == CKEY_OK);
        ckey_tracker_get_memory(t, &got);
        REQUIRE(ckey_tracker_step(t, rgb, lab, 2, ids + 1, prob, &err) == CKEY_OK); /* objects 2 and 3 join */
        REQUIRE(ckey_tracker_step(t, rgb, NULL, 0, NULL, prob, &err) == CKEY_OK);
        ckey_tracker_get_memory(t, &later);
        printf("  1 object of 3 first: planned %lld bytes (arena %lld; the plan for 3 at first: arena %lld), "
               "allocated %lld, after objects 2 and 3 joined %lld\n", (long long)plan.total_bytes,
               (long long)plan.arena_bytes, (long long)full.arena_bytes, (long long)got.total_bytes,
               (long long)later.total_bytes);
        CHECKF(plan.total_bytes == got.total_bytes && plan.arena_bytes == got.arena_bytes &&
                   later.total_bytes == got.total_bytes && plan.arena_bytes >= full.arena_bytes,
               "1 of 3 objects first: planned %lld (arena %lld), allocated %lld (arena %lld), later %lld",
               (long long)plan.total_bytes, (long long)plan.arena_bytes, (long long)got.total_bytes,
               (long long)got.arena_bytes, (long long)later.total_bytes);
        free(rgb), free(prob), free(lab);
        ckey_tracker_free(t);
    }
    ckey_track_memory plan;
    ckey_track_options o;
    ckey_track_options_default(&o);
    o.mem_every = 0;
    CHECK(ckey_track_plan_memory(m, 64, 64, &o, &plan, &err) == CKEY_ERR_INVALID_ARG && plan.total_bytes == 0);
    CHECK(ckey_track_plan_memory(m, 0, 64, NULL, &plan, &err) == CKEY_ERR_INVALID_ARG);
    ckey_track_model_free(m);
}

/* An object a later mask brings (the official InferenceCore.step with a
 * mask of new objects): the clip's frames tracked with object 1 of mask0,
 * and at frame 4 a mask of object 2 alone (mask4's object 2). Against a
 * twin tracker given no mask at frame 4: up to frame 3 the same; at frame
 * 4 object 2 is its mask, object 1 is 0 on it and the twin's probability
 * elsewhere; the frame is memorized twice (object 1's memory and object
 * 2's own, its first frame permanent); from frame 5 three planes summing to
 * 1, object 2 tracked near where its mask put it. */
static void test_new_object(void) {
    ck_checkpoint *mk = NULL, *clip = NULL;
    if (ck_checkpoint_open(DIR "maskat.safetensors", &mk, NULL) != CKEY_OK ||
        ck_checkpoint_open(DIR "clip.safetensors", &clip, NULL) != CKEY_OK) {
        ck_checkpoint_close(mk);
        SKIP("%s or %s absent", DIR "maskat.safetensors", DIR "clip.safetensors");
    }
    ckey_error err;
    ckey_track_model *m = NULL;
    const ck_tensor_info *tf = need(clip, "frames"), *tm = need(clip, "mask0"), *m4 = need(mk, "mask4");
    REQUIRE(tf && tm && m4 && ckey_track_model_open(DIR "cutie_tiny.pth", NULL, &m, &err) == CKEY_OK);
    const int H = (int)tf->shape[2], W = (int)tf->shape[3], T = 9;
    const int64_t HW = (int64_t)H * W, hw = (int64_t)((H + 15) / 16) * ((W + 15) / 16);
    ckey_track_options o;
    ckey_track_options_default(&o);
    o.threads = 2, o.max_objects = 2;
    ckey_tracker *t = NULL, *twin = NULL;
    REQUIRE(ckey_tracker_create(m, W, H, &o, &t, &err) == CKEY_OK);
    REQUIRE(ckey_tracker_create(m, W, H, &o, &twin, &err) == CKEY_OK);
    uint8_t *first = malloc((size_t)HW), *later = malloc((size_t)HW);
    const uint8_t *l0 = tm->data, *l4 = m4->data, one[1] = {1}, two[1] = {2};
    int64_t area2 = 0;
    for (int64_t p = 0; p < HW; p++) first[p] = l0[p] == 1, later[p] = l4[p] == 2 ? 2 : 0, area2 += l4[p] == 2;
    float *rgb = malloc((size_t)HW * 3 * sizeof(float)), *prob = malloc((size_t)3 * HW * sizeof(float)),
          *ref = malloc((size_t)3 * HW * sizeof(float));
    const uint8_t *frames = tf->data;
    for (int f = 0; f < T; f++) {
        for (int64_t p = 0; p < HW; p++)
            for (int c = 0; c < 3; c++) rgb[p * 3 + c] = (float)frames[((int64_t)f * 3 + c) * HW + p] / 255.0f;
        const int64_t twin_tokens = ckey_tracker_memory_tokens(twin);
        REQUIRE(ckey_tracker_step(twin, rgb, f == 0 ? first : NULL, f == 0, one, ref, &err) == CKEY_OK);
        const ckey_status st = ckey_tracker_step(t, rgb, f == 0 ? first : f == 4 ? later : NULL, f == 0 || f == 4,
                                                 f == 0 ? one : two, prob, &err);
        CHECKF(st == CKEY_OK, "frame %d: %s", f, err.message);
        if (st) break;
        if (f < 4) {
            double d = 0;
            for (int64_t i = 0; i < 2 * HW; i++) d = fmax(d, fabs(prob[i] - ref[i]));
            CHECKF(d == 0, "frame %d: %.3g from the twin before the new object", f, d);
        } else if (f == 4) {
            /* off the mask: the official merge, softmax(aggregate([p1, 0])) of the
             * twin's p1, in double: q = clamp([(1 - p1), p1, 0], 1e-7, 1 - 1e-7),
             * each q / (1 - q) over their sum */
            double off = 0, on1 = 0, on2 = 0;
            for (int64_t p = 0; p < HW; p++) {
                if (later[p]) {
                    on1 = fmax(on1, prob[HW + p]), on2 = fmax(on2, fabs(1.0 - prob[2 * HW + p]));
                    continue;
                }
                double q[3] = {1.0 - ref[HW + p], ref[HW + p], 0.0}, odds[3], sum = 0;
                for (int k = 0; k < 3; k++) {
                    q[k] = fmin(fmax(q[k], 1e-7), 1.0 - 1e-7);
                    sum += odds[k] = q[k] / (1.0 - q[k]);
                }
                for (int k = 0; k < 3; k++) off = fmax(off, fabs(prob[k * HW + p] - odds[k] / sum));
            }
            printf("  frame 4: object 2 on its mask off by %.2e, object 1 there %.2e; off the mask %.2e from the "
                   "merge of the twin's probabilities\n", on2, on1, off);
            CHECKF(on2 < 1e-5 && on1 < 1e-5 && off < 1e-5, "frame 4: on the mask %.3g / %.3g, off it %.3g", on2, on1,
                   off);
            CHECKF(ckey_tracker_memory_tokens(t) == twin_tokens + 2 * hw, "frame 4: memory %lld tokens, expected %lld",
                   (long long)ckey_tracker_memory_tokens(t), (long long)(twin_tokens + 2 * hw));
        } else {
            /* the tiny model's weights are random: its masks say nothing of
             * tracking quality, only that object 2 is present and the planes
             * a distribution (parity with the reference: tests/fixtures/cutie) */
            double sum = 0, mass2 = 0;
            for (int64_t p = 0; p < HW; p++) {
                sum = fmax(sum, fabs(prob[p] + prob[HW + p] + prob[2 * HW + p] - 1.0));
                mass2 += prob[2 * HW + p];
            }
            printf("  frame %d: planes sum to 1 within %.1e; object 2's mean probability %.3f\n", f, sum, mass2 / HW);
            CHECKF(sum < 1e-5 && mass2 / HW > 1e-3, "frame %d: sum off by %.3g, object 2's mean %.3g", f, sum,
                   mass2 / HW);
        }
    }
    CHECK(area2 > 0);
    free(first), free(later), free(rgb), free(prob), free(ref);
    ckey_tracker_free(t), ckey_tracker_free(twin);
    ckey_track_model_free(m);
    ck_checkpoint_close(mk), ck_checkpoint_close(clip);
}

/* Objects added later against newobj.safetensors (make_cutie_fixtures.py
 * --only newobj): the clip's first 12 frames with object 1 of mask0 at
 * frame 0, a mask of object 2 alone at frame 4 (new: the reference merges
 * it into the frame's segmentation and gives it a memory bucket of its
 * own, as the official InferenceCore and KeyValueMemoryStore do) and object
 * 1 alone at frame 8; per-frame probabilities (object 2's plane 0 before
 * frame 4) within 1e-4 and the memory sizes. */
static void test_new_object_parity(void) {
    ck_checkpoint *no = NULL, *clip = NULL;
    if (ck_checkpoint_open(DIR "newobj.safetensors", &no, NULL) != CKEY_OK)
        SKIP("%s absent: make it with tools/reference/make_cutie_fixtures.py --only newobj", DIR "newobj.safetensors");
    ckey_error err;
    ckey_track_model *m = NULL;
    const ck_tensor_info *tf = NULL, *tm0 = need(no, "mask0"), *tm4 = need(no, "mask4"), *tm8 = need(no, "mask8"),
                         *tp = need(no, "prob"), *tmt = need(no, "mem_tokens");
    if (ck_checkpoint_open(DIR "clip.safetensors", &clip, NULL) == CKEY_OK) tf = need(clip, "frames");
    if (!tf || !tm0 || !tm4 || !tm8 || !tp || !tmt || ckey_track_model_open(DIR "cutie_tiny.pth", NULL, &m, &err) != CKEY_OK) {
        ck_test_failed = 1;
        ck_checkpoint_close(no), ck_checkpoint_close(clip);
        return;
    }
    const int T = (int)tp->shape[0], H = (int)tf->shape[2], W = (int)tf->shape[3];
    const int64_t HW = (int64_t)H * W;
    ckey_track_options o;
    ckey_track_options_default(&o);
    o.threads = 2, o.max_objects = 2;
    o.mem_every = 3, o.max_mem_frames = 3, o.top_k = 30, o.stagger_updates = 2; /* the fixture's parameters */
    ckey_tracker *t = NULL;
    ckey_status st = ckey_tracker_create(m, W, H, &o, &t, &err);
    CHECKF(st == CKEY_OK, "%s", err.message);
    float *want = f32(tp), *rgb = malloc((size_t)HW * 3 * sizeof(float)), *prob = malloc((size_t)3 * HW * sizeof(float));
    int32_t mt[64];
    memcpy(mt, tmt->data, (size_t)T * sizeof(int32_t));
    const uint8_t *frames = tf->data, one[1] = {1}, two[1] = {2};
    double worst = 0;
    for (int f = 0; f < T && st == CKEY_OK; f++) {
        for (int64_t p = 0; p < HW; p++)
            for (int c = 0; c < 3; c++) rgb[p * 3 + c] = (float)frames[((int64_t)f * 3 + c) * HW + p] / 255.0f;
        const uint8_t *lab = f == 0 ? tm0->data : f == 4 ? tm4->data : f == 8 ? tm8->data : NULL;
        memset(prob, 0, (size_t)3 * HW * sizeof(float));
        st = ckey_tracker_step(t, rgb, lab, lab ? 1 : 0, f == 4 ? two : one, prob, &err);
        CHECKF(st == CKEY_OK, "frame %d: %s", f, err.message);
        if (st) break;
        char label[64];
        snprintf(label, sizeof label, "frame %d probabilities", f);
        worst = fmax(worst, compare_to(label, prob, want + (int64_t)f * 3 * HW, (size_t)3 * HW));
        CHECKF(ckey_tracker_memory_tokens(t) == mt[f], "frame %d: memory %lld tokens, expected %d", f,
               (long long)ckey_tracker_memory_tokens(t), mt[f]);
    }
    printf("  newobj.safetensors: probabilities max abs err %.2e\n", worst);
    CHECK(worst <= 1e-4);
    free(want), free(rgb), free(prob);
    ckey_tracker_free(t);
    ckey_track_model_free(m);
    ck_checkpoint_close(no), ck_checkpoint_close(clip);
}

static void test_api_errors(void) {
    ckey_error err;
    ckey_track_model *m = NULL;
    CHECK(ckey_track_model_open(DIR "absent.pth", NULL, &m, &err) != CKEY_OK && m == NULL);
    if (ckey_track_model_open(DIR "cutie_tiny.pth", NULL, &m, &err) != CKEY_OK) SKIP("%s", err.message);
    ckey_track_options o;
    ckey_track_options_default(&o);
    o.threads = 1;
    ckey_tracker *t = NULL;
    CHECK(ckey_tracker_create(m, 0, 10, &o, &t, &err) == CKEY_ERR_INVALID_ARG && !t);
    o.mem_every = 0;
    CHECK(ckey_tracker_create(m, 16, 16, &o, &t, &err) == CKEY_ERR_INVALID_ARG && !t);
    o.mem_every = 5;
    o.use_long_term = 1; /* 2 x 2 positions: 5 frames of 4 tokens cannot make 128 prototypes */
    CHECK(ckey_tracker_create(m, 20, 18, &o, &t, &err) == CKEY_ERR_INVALID_ARG && !t);
    printf("  refused: %s\n", err.message);
    o.use_long_term = 0;
    REQUIRE(ckey_tracker_create(m, 20, 18, &o, &t, &err) == CKEY_OK);
    float rgb[20 * 18 * 3] = {0}, prob[5 * 20 * 18];
    uint8_t lab[20 * 18] = {0}, ids[5] = {1, 2, 3, 4, 5}, dup[2] = {1, 1};
    lab[0] = 1;
    CHECK(ckey_tracker_step(t, rgb, NULL, 0, NULL, prob, &err) == CKEY_ERR_INVALID_ARG); /* no first mask */
    CHECK(ckey_tracker_step(t, rgb, lab, 5, ids, prob, &err) == CKEY_ERR_INVALID_ARG);  /* over max_objects */
    CHECK(ckey_tracker_step(t, rgb, lab, 2, dup, prob, &err) == CKEY_ERR_INVALID_ARG);  /* the same label twice */
    printf("  refused: %s\n", err.message);
    CHECK(ckey_tracker_step(t, rgb, lab, 1, ids, prob, &err) == CKEY_OK);
    CHECK(prob[20 * 18] > 0.99f && prob[1] > 0.99f); /* pixel 0 is object 1, pixel 1 the background */
    CHECK(ckey_tracker_step(t, rgb, lab, 4, ids + 1, prob, &err) == CKEY_ERR_INVALID_ARG); /* 5 objects in all */
    printf("  refused: %s\n", err.message);
    CHECK(ckey_tracker_step(t, rgb, NULL, 0, NULL, prob, &err) == CKEY_OK);
    CHECK(ckey_tracker_memory_tokens(t) == 4); /* 32 x 32 padded: 2 x 2 positions, the first frame only */
    CHECK(ckey_tracker_step(t, rgb, lab, 1, ids, prob, &err) == CKEY_OK); /* a later mask: memorized */
    CHECK(ckey_tracker_memory_tokens(t) == 8);
    CHECK(ckey_tracker_step(t, rgb, lab, 0, ids, prob, &err) == CKEY_ERR_INVALID_ARG); /* a mask of no object */
    ckey_tracker_free(t);
    ckey_tracker_free(NULL);
    ckey_track_model_free(m);
    ckey_track_model_free(NULL);
}

int main(int argc, char **argv) {
    static const ck_test_case cases[] = {
        {"model_shapes", test_model_shapes},
        {"clip", test_clip},
        {"resize", test_resize},
        {"longterm", test_longterm},
        {"mask_at", test_mask_at},
        {"new_object", test_new_object},
        {"new_object_parity", test_new_object_parity},
        {"plan", test_plan},
        {"api_errors", test_api_errors},
        {"long_shot", test_long_shot},
        {"long_shot_long_term", test_long_shot_long_term},
    };
    return ck_test_main(cases, (int)CK_ARRAY_LEN(cases), argc, argv);
}
