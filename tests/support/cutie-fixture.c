/* The Cutie fixtures (tests/fixtures/cutie/, README there) and the runs
 * that compare a tracker against them, on a device (ckey_track_options.
 * device): tests/test-cutie.c on the CPU, tests/test-cuda-cutie.c on CUDA. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "ckpt/checkpoint.h"
#include "core/core.h"
#include "model/cutie.h"
#include "cutie-fixture.h"
#include "testutil.h"

#define DIR CK_CUTIE_FIXTURES

const ck_tensor_info *ck_cutie_need(ck_checkpoint *ck, const char *name) {
    const ck_tensor_info *t = ck_checkpoint_find(ck, name);
    if (!t) fprintf(stderr, "  fixture tensor '%s' missing\n", name);
    return t;
}

void ck_cutie_clip_close(ck_cutie_clip *c) {
    ckey_track_model_free(c->m);
    ck_checkpoint_close(c->ck);
    memset(c, 0, sizeof *c);
}

int ck_cutie_clip_open(ck_cutie_clip *c) {
    memset(c, 0, sizeof *c);
    ckey_error err;
    if (ck_checkpoint_open(DIR "clip.safetensors", &c->ck, NULL) != CKEY_OK) {
        printf("  skip: %s absent\n", DIR "clip.safetensors");
        ck_test_skipped = 1;
        return 0;
    }
    if (ckey_track_model_open(DIR "cutie_tiny.pth", NULL, &c->m, &err) != CKEY_OK) {
        printf("  skip: %s\n", err.message);
        ck_test_skipped = 1;
        ck_cutie_clip_close(c);
        return 0;
    }
    c->frames = ck_checkpoint_find(c->ck, "frames"), c->mask0 = ck_checkpoint_find(c->ck, "mask0");
    CHECK(c->frames && c->mask0);
    if (!c->frames || !c->mask0) {
        ck_cutie_clip_close(c);
        return 0;
    }
    c->T = (int)c->frames->shape[0], c->H = (int)c->frames->shape[2], c->W = (int)c->frames->shape[3];
    c->HW = (int64_t)c->H * c->W;
    return 1;
}

void ck_cutie_frame_rgb(const uint8_t *frame, int64_t HW, float *rgb) {
    for (int64_t p = 0; p < HW; p++)
        for (int c = 0; c < 3; c++) rgb[p * 3 + c] = (float)frame[c * HW + p] / 255.0f;
}

float *ck_cutie_f32(const ck_tensor_info *t) {
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



double ck_cutie_compare(const char *label, const float *got, const float *want, size_t n) {
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
void ck_cutie_to_channels_first(const float *src, int K, int64_t hw, int C, float *dst) {
    for (int k = 0; k < K; k++)
        for (int64_t p = 0; p < hw; p++)
            for (int c = 0; c < C; c++) dst[((int64_t)k * C + c) * hw + p] = src[((int64_t)k * hw + p) * C + c];
}

void ck_cutie_on_tap(void *user, int frame, const char *name, const float *data, int64_t n) {
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
        const double e = ck_cutie_compare(label, buf, s->readout_visual + (int64_t)(frame - 1) * n, (size_t)n);
        s->worst_read = fmax(s->worst_read, e);
    }
    if (!strcmp(name, "dec_logits") && s->dec_logits && frame >= 1) {
        char label[64];
        snprintf(label, sizeof label, "frame %d decoder logits", frame);
        const float *want = s->dec_logits + (int64_t)(frame - 1) * n;
        double scale = 1;
        for (int64_t i = 0; i < n; i++) scale = fmax(scale, fabs(want[i]));
        s->worst_logits = fmax(s->worst_logits, ck_cutie_compare(label, data, want, (size_t)n) / scale);
    }
    if (!strcmp(name, "sensory") && s->sensory) {
        ck_cutie_to_channels_first(data, s->K, hw, (int)(n / (s->K * hw)), buf);
        char label[64];
        snprintf(label, sizeof label, "frame %d sensory", frame);
        const double e = ck_cutie_compare(label, buf, s->sensory + (int64_t)frame * n, (size_t)n);
        s->worst_sensory = fmax(s->worst_sensory, e);
    }
    if (s->taps) {
        char key[96];
        const char *fname = !strcmp(name, "sensory") ? "sensory_out" : name;
        snprintf(key, sizeof key, "f%d.%s", frame, fname);
        const ck_tensor_info *t = ck_checkpoint_find(s->taps, key);
        if (t && (int64_t)t->numel == n) {
            float *want = ck_cutie_f32(t);
            const float *got = vis ? buf : data;
            if (!vis && !same_layout(fname)) {
                /* [(K,) C, h, w] fixture: the last two dims are spatial */
                const int64_t sp = t->shape[t->ndim - 1] * t->shape[t->ndim - 2];
                const int K = t->ndim == 4 ? (int)t->shape[0] : 1;
                ck_cutie_to_channels_first(data, K, sp, (int)(n / (K * sp)), buf);
                got = buf;
            }
            double scale = 1;
            for (uint64_t i = 0; i < t->numel; i++) scale = fmax(scale, fabs(want[i]));
            const double e = ck_cutie_compare(key, got, want, (size_t)n) / scale;
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


void (*ck_cutie_tracker_hook)(ckey_tracker *t) = NULL;

/* ckey_tracker_create (staged: ck_tracker_create_staged), then the hook */
static ckey_status create_tracker(int staged, const ckey_track_model *m, int32_t W, int32_t H,
                                  const ckey_track_options *o, ckey_tracker **t, ckey_error *err) {
    const ckey_status st = (staged ? ck_tracker_create_staged : ckey_tracker_create)(m, W, H, o, t, err);
    if (st == CKEY_OK && ck_cutie_tracker_hook) ck_cutie_tracker_hook(*t);
    return st;
}

/* --------------------------------------------------------------- a clip */

double ck_cutie_iou(const float *a, const float *b, int C, int64_t HW, int obj) {
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

void ck_cutie_run_clip(const char *file, int with_taps, int32_t device, int staged) {
    ck_cutie_run_clip_at(file, with_taps, device, staged, CKEY_PRECISION_FP32);
}

void ck_cutie_run_clip_at(const char *file, int with_taps, int32_t device, int staged, int32_t precision) {
    /* the CPU runs fp32 whatever the precision */
    const char *pn = device == CKEY_DEVICE_CPU ? "" : precision == CKEY_PRECISION_TF32 ? " at tf32"
                                                     : precision == CKEY_PRECISION_FP16 ? " at fp16" : "";
    const int tf32 = *pn != 0; /* a reduced precision: the looser bars */
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
    const ck_tensor_info *tf = ck_cutie_need(clip, "frames"), *tm = ck_cutie_need(clip, "mask0"), *tp = ck_cutie_need(clip, "prob");
    const ck_tensor_info *tmt = ck_cutie_need(clip, "mem_tokens");
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
    o.device = device;
    o.precision = precision;
    o.mem_every = 3, o.max_mem_frames = 3, o.top_k = 30, o.stagger_updates = 2; /* the README's table */
    if (strstr(file, "resize")) o.max_internal_size = 80;
    printf("  %s%s: %d frames %d x %d, %d objects, model pixel encoder %s (params %s)\n", file, pn, T, W, H, K,
           m->pix_enc.bottleneck ? "Bottleneck" : "BasicBlock", params ? params : "?");
    ckey_tracker *t = NULL;
    st = create_tracker(staged, m, W, H, &o, &t, &err);
    CHECKF(st == CKEY_OK, "%s", err.message);
    if (st == CKEY_OK && !staged) { /* the weights as planned (at fp16 on a device: the convs' fp16 copy too) */
        ckey_track_memory plan, got;
        ckey_error pe;
        const ckey_status ps = ckey_track_plan_memory(m, W, H, &o, &plan, &pe);
        CHECKF(ps == CKEY_OK, "plan: %s", pe.message);
        ckey_tracker_get_memory(t, &got);
        CHECKF(ps || got.weight_bytes == plan.weight_bytes, "weights: %lld bytes, %lld planned",
               (long long)got.weight_bytes, (long long)plan.weight_bytes);
    }
    run_state rs = {clip, taps, K, m->cfg.value_dim, 0, 0, T, NULL, NULL, 0, 0, 0, 0, NULL, 0};
    rs.h = (int)((H + 15) / 16), rs.w = (int)((W + 15) / 16);
    if (o.max_internal_size < 0) {
        const ck_tensor_info *a = ck_checkpoint_find(clip, "readout_visual"), *b = ck_checkpoint_find(clip, "sensory");
        rs.readout_visual = a ? ck_cutie_f32(a) : NULL;
        rs.sensory = b ? ck_cutie_f32(b) : NULL;
    } else {
        rs.h = rs.w = 0; /* internal size differs; no per-stage comparison */
        rs.taps = NULL;
    }
    if (st == CKEY_OK) ck_tracker_set_tap(t, rs.h ? ck_cutie_on_tap : NULL, &rs);
    uint8_t *frames = malloc(tf->numel), *mask = malloc(tm->numel);
    memcpy(frames, tf->data, tf->numel);
    memcpy(mask, tm->data, tm->numel);
    int32_t *mt = malloc(tmt->numel * sizeof(int32_t));
    memcpy(mt, tmt->data, tmt->numel * sizeof(int32_t));
    float *want = ck_cutie_f32(tp), *rgb = malloc((size_t)HW * 3 * sizeof(float)), *prob = malloc((size_t)C1 * HW * sizeof(float));
    const uint8_t objects[2] = {1, 2};
    double worst = 0, worst_iou = 1, worst_first = 0, worst_iou_first = 1; /* over all frames, over 0-1 */
    for (int f = 0; f < T && st == CKEY_OK; f++) {
        ck_cutie_frame_rgb(frames + (int64_t)f * 3 * HW, HW, rgb);
        st = ckey_tracker_step(t, rgb, f == 0 ? mask : NULL, f == 0 ? K : 0, objects, prob, &err);
        CHECKF(st == CKEY_OK, "frame %d: %s", f, err.message);
        if (st) break;
        char label[64];
        snprintf(label, sizeof label, "frame %d probabilities", f);
        const double e = ck_cutie_compare(label, prob, want + (int64_t)f * C1 * HW, (size_t)C1 * HW);
        worst = fmax(worst, e);
        for (int k = 1; k <= K; k++) worst_iou = fmin(worst_iou, ck_cutie_iou(prob, want + (int64_t)f * C1 * HW, C1, HW, k));
        if (f == 1) worst_first = worst, worst_iou_first = worst_iou;
        CHECKF(ckey_tracker_memory_tokens(t) == mt[f], "frame %d: memory %lld tokens, expected %d", f,
               (long long)ckey_tracker_memory_tokens(t), mt[f]);
    }
    printf("  %s%s: probabilities max abs err %.2e, worst object IoU %.6f\n", file, pn, worst,
           worst_iou);
    if (rs.h)
        printf("  %s%s: memory reads max abs err %.2e, sensory %.2e; %d taps, worst %.2e of their scale\n", file,
               pn, rs.worst_read, rs.worst_sensory, rs.taps_compared, rs.worst_tap);
    if (tf32) {
        /* TF32 and fp16 round every conv GEMM's inputs to a 10-bit mantissa
         * (about 5e-4 relative). The first segmented frame (1) carries that
         * rounding alone: the bar holds there (7.0e-3 on the H200). Later
         * frames read a memory written at that precision, and this clip has
         * near-ties in its top-k selections that such rounding flips: on the
         * CPU with each conv output rounded to TF32 and perturbed by an ulp,
         * 3 of 10 seeds end within 2.2e-2 and 7 lose an object (0.59-0.89),
         * as the H200 does (0.538) — so later frames are printed, not held. */
        printf("  %s%s: frames 0-1 max abs err %.2e, worst object IoU %.6f\n", file, pn, worst_first,
               worst_iou_first);
        CHECKF(worst_first <= 4e-2, "%s%s: frame 1 probabilities max abs err %.2e > 4e-2", file, pn, worst_first);
        CHECKF(worst_iou_first >= 0.9, "%s%s: frame 1 worst object IoU %.6f < 0.9", file, pn, worst_iou_first);
    } else {
        CHECK(worst <= 1e-4);
        CHECK(worst_iou >= 0.999);
        CHECK(rs.worst_read <= 1e-4);
        CHECK(rs.worst_sensory <= 1e-4);
        if (with_taps && taps) CHECK(rs.taps_compared >= 20);
    }
    free(frames), free(mask), free(mt), free(want), free(rgb), free(prob), free(rs.readout_visual), free(rs.sensory);
    ckey_tracker_free(t);
    ckey_track_model_free(m);
    ck_checkpoint_close(clip);
    ck_checkpoint_close(taps);
}

/* Masks on later frames (`ckey track --mask-at`): the clip's first frames with
 * the reference's masks at frames 4 (both objects, moved) and 8 (object 1
 * alone), against maskat.safetensors (tools/reference/make_cutie_fixtures.py
 * --only maskat); skipped until that fixture is made. */
void ck_cutie_run_mask_at(int32_t device, int staged) {
    ck_checkpoint *mk = NULL, *clip = NULL;
    if (ck_checkpoint_open(DIR "maskat.safetensors", &mk, NULL) != CKEY_OK)
        SKIP("%s absent: make it with tools/reference/make_cutie_fixtures.py --only maskat", DIR "maskat.safetensors");
    ckey_error err;
    ckey_track_model *m = NULL;
    const ck_tensor_info *tp = NULL, *m4 = NULL, *m8 = NULL, *tmt = NULL, *tf = NULL, *tm = NULL;
    if (ck_checkpoint_open(DIR "clip.safetensors", &clip, NULL) == CKEY_OK) tf = ck_cutie_need(clip, "frames"), tm = ck_cutie_need(clip, "mask0");
    tp = ck_cutie_need(mk, "prob"), m4 = ck_cutie_need(mk, "mask4"), m8 = ck_cutie_need(mk, "mask8"), tmt = ck_cutie_need(mk, "mem_tokens");
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
    o.device = device;
    o.mem_every = 3, o.max_mem_frames = 3, o.top_k = 30, o.stagger_updates = 2;
    ckey_tracker *t = NULL;
    ckey_status st = create_tracker(staged, m, W, H, &o, &t, &err);
    float *want = ck_cutie_f32(tp), *rgb = malloc((size_t)HW * 3 * sizeof(float)), *prob = malloc((size_t)C1 * HW * sizeof(float));
    int32_t *mt = malloc(tmt->numel * sizeof(int32_t));
    memcpy(mt, tmt->data, tmt->numel * sizeof(int32_t));
    const uint8_t *frames = tf->data, both[2] = {1, 2}, one[1] = {1};
    double worst = 0;
    for (int f = 0; f < T && st == CKEY_OK; f++) {
        ck_cutie_frame_rgb(frames + (int64_t)f * 3 * HW, HW, rgb);
        const uint8_t *lab = f == 0 ? tm->data : f == 4 ? m4->data : f == 8 ? m8->data : NULL;
        st = ckey_tracker_step(t, rgb, lab, f == 8 ? 1 : lab ? 2 : 0, f == 8 ? one : both, prob, &err);
        CHECKF(st == CKEY_OK, "frame %d: %s", f, err.message);
        if (st) break;
        char label[64];
        snprintf(label, sizeof label, "frame %d probabilities", f);
        worst = fmax(worst, ck_cutie_compare(label, prob, want + (int64_t)f * C1 * HW, (size_t)C1 * HW));
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


/* Long-term memory (longterm.safetensors: clip's frames, use_long_term with
 * the README's parameters): per-frame memory reads, decoder logits and
 * sensory, working and long-term memory sizes, the last frame's
 * probabilities. */
void ck_cutie_run_longterm(int32_t device, int staged) {
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
    const ck_tensor_info *tf = ck_cutie_need(clip, "frames"), *tm = ck_cutie_need(clip, "mask0"), *tp = ck_cutie_need(lt, "prob_last");
    const ck_tensor_info *tmt = ck_cutie_need(lt, "mem_tokens"), *tlt = ck_cutie_need(lt, "lt_tokens"), *trv = ck_cutie_need(lt, "readout_visual");
    const ck_tensor_info *tdl = ck_cutie_need(lt, "dec_logits"), *tse = ck_cutie_need(lt, "sensory");
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
    o.device = device;
    o.mem_every = 2, o.max_mem_frames = 3, o.top_k = 30, o.stagger_updates = 2; /* the fixture's metadata */
    o.use_long_term = 1, o.lt_max_mem_frames = 5, o.lt_min_mem_frames = 3, o.num_prototypes = 16;
    o.max_num_tokens = 48, o.buffer_tokens = 8, o.count_usage = 1;
    ckey_tracker *t = NULL;
    st = create_tracker(staged, m, W, H, &o, &t, &err);
    CHECKF(st == CKEY_OK, "%s", err.message);
    run_state rs = {clip, NULL, K, m->cfg.value_dim, (H + 15) / 16, (W + 15) / 16, T, ck_cutie_f32(trv), ck_cutie_f32(tse), 0, 0, 0, 0,
                    ck_cutie_f32(tdl), 0};
    if (st == CKEY_OK) ck_tracker_set_tap(t, ck_cutie_on_tap, &rs);
    const int32_t *mt = (const int32_t *)tmt->data, *ltt = (const int32_t *)tlt->data;
    float *want = ck_cutie_f32(tp), *rgb = malloc((size_t)HW * 3 * sizeof(float)), *prob = malloc((size_t)C1 * HW * sizeof(float));
    const uint8_t objects[2] = {1, 2};
    int removals = 0, consolidations = 0;
    for (int f = 0; f < T && st == CKEY_OK; f++) {
        ck_cutie_frame_rgb(tf->data + (int64_t)f * 3 * HW, HW, rgb);
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
    const double e = ck_cutie_compare("frame 29 probabilities", prob, want, (size_t)C1 * HW);
    printf("  longterm: %d consolidations (%d with a removal); memory reads max abs err %.2e, decoder logits %.2e of their "
           "scale, sensory %.2e, last probabilities %.2e, IoU %.6f / %.6f\n",
           consolidations, removals, rs.worst_read, rs.worst_logits, rs.worst_sensory, e, ck_cutie_iou(prob, want, C1, HW, 1),
           ck_cutie_iou(prob, want, C1, HW, 2));
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

/* An object a later mask brings (the official InferenceCore.step with a
 * mask of new objects): the clip's frames tracked with object 1 of mask0,
 * and at frame 4 a mask of object 2 alone (mask4's object 2). Against a
 * twin tracker given no mask at frame 4: up to frame 3 the same; at frame
 * 4 object 2 is its mask, object 1 is 0 on it and the twin's probability
 * elsewhere; the frame is memorized twice (object 1's memory and object
 * 2's own, its first frame permanent); from frame 5 three planes summing to
 * 1, object 2 tracked near where its mask put it. */
void ck_cutie_run_new_object(int32_t device, int staged) {
    ck_checkpoint *mk = NULL, *clip = NULL;
    if (ck_checkpoint_open(DIR "maskat.safetensors", &mk, NULL) != CKEY_OK ||
        ck_checkpoint_open(DIR "clip.safetensors", &clip, NULL) != CKEY_OK) {
        ck_checkpoint_close(mk);
        SKIP("%s or %s absent", DIR "maskat.safetensors", DIR "clip.safetensors");
    }
    ckey_error err;
    ckey_track_model *m = NULL;
    const ck_tensor_info *tf = ck_cutie_need(clip, "frames"), *tm = ck_cutie_need(clip, "mask0"), *m4 = ck_cutie_need(mk, "mask4");
    REQUIRE(tf && tm && m4 && ckey_track_model_open(DIR "cutie_tiny.pth", NULL, &m, &err) == CKEY_OK);
    const int H = (int)tf->shape[2], W = (int)tf->shape[3], T = 9;
    const int64_t HW = (int64_t)H * W, hw = (int64_t)((H + 15) / 16) * ((W + 15) / 16);
    ckey_track_options o;
    ckey_track_options_default(&o);
    o.threads = 2, o.max_objects = 2;
    o.device = device;
    ckey_tracker *t = NULL, *twin = NULL;
    REQUIRE(create_tracker(staged, m, W, H, &o, &t, &err) == CKEY_OK);
    REQUIRE(create_tracker(staged, m, W, H, &o, &twin, &err) == CKEY_OK);
    uint8_t *first = malloc((size_t)HW), *later = malloc((size_t)HW);
    const uint8_t *l0 = tm->data, *l4 = m4->data, one[1] = {1}, two[1] = {2};
    int64_t area2 = 0;
    for (int64_t p = 0; p < HW; p++) first[p] = l0[p] == 1, later[p] = l4[p] == 2 ? 2 : 0, area2 += l4[p] == 2;
    float *rgb = malloc((size_t)HW * 3 * sizeof(float)), *prob = malloc((size_t)3 * HW * sizeof(float)),
          *ref = malloc((size_t)3 * HW * sizeof(float));
    const uint8_t *frames = tf->data;
    for (int f = 0; f < T; f++) {
        ck_cutie_frame_rgb(frames + (int64_t)f * 3 * HW, HW, rgb);
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
void ck_cutie_run_newobj(int32_t device, int staged) {
    ck_checkpoint *no = NULL, *clip = NULL;
    if (ck_checkpoint_open(DIR "newobj.safetensors", &no, NULL) != CKEY_OK)
        SKIP("%s absent: make it with tools/reference/make_cutie_fixtures.py --only newobj", DIR "newobj.safetensors");
    ckey_error err;
    ckey_track_model *m = NULL;
    const ck_tensor_info *tf = NULL, *tm0 = ck_cutie_need(no, "mask0"), *tm4 = ck_cutie_need(no, "mask4"), *tm8 = ck_cutie_need(no, "mask8"),
                         *tp = ck_cutie_need(no, "prob"), *tmt = ck_cutie_need(no, "mem_tokens");
    if (ck_checkpoint_open(DIR "clip.safetensors", &clip, NULL) == CKEY_OK) tf = ck_cutie_need(clip, "frames");
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
    o.device = device;
    o.mem_every = 3, o.max_mem_frames = 3, o.top_k = 30, o.stagger_updates = 2; /* the fixture's parameters */
    ckey_tracker *t = NULL;
    ckey_status st = create_tracker(staged, m, W, H, &o, &t, &err);
    CHECKF(st == CKEY_OK, "%s", err.message);
    float *want = ck_cutie_f32(tp), *rgb = malloc((size_t)HW * 3 * sizeof(float)), *prob = malloc((size_t)3 * HW * sizeof(float));
    int32_t mt[64];
    memcpy(mt, tmt->data, (size_t)T * sizeof(int32_t));
    const uint8_t *frames = tf->data, one[1] = {1}, two[1] = {2};
    double worst = 0;
    for (int f = 0; f < T && st == CKEY_OK; f++) {
        ck_cutie_frame_rgb(frames + (int64_t)f * 3 * HW, HW, rgb);
        const uint8_t *lab = f == 0 ? tm0->data : f == 4 ? tm4->data : f == 8 ? tm8->data : NULL;
        memset(prob, 0, (size_t)3 * HW * sizeof(float));
        st = ckey_tracker_step(t, rgb, lab, lab ? 1 : 0, f == 4 ? two : one, prob, &err);
        CHECKF(st == CKEY_OK, "frame %d: %s", f, err.message);
        if (st) break;
        char label[64];
        snprintf(label, sizeof label, "frame %d probabilities", f);
        worst = fmax(worst, ck_cutie_compare(label, prob, want + (int64_t)f * 3 * HW, (size_t)3 * HW));
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

/* newobj_lt's tap state: the decoder logits of each segmented frame
 * against the fixture's [T, 2, Hp/4, Wp/4] (the first O planes). */
typedef struct {
    const float *want;
    const int32_t *segmented;
    int64_t n4;
    int frames;
    double worst; /* relative to each frame's largest logit */
} newobj_lt_state;

static void newobj_lt_tap(void *user, int frame, const char *name, const float *data, int64_t n) {
    newobj_lt_state *s = user;
    if (strcmp(name, "dec_logits")) return;
    int32_t seg;
    memcpy(&seg, &s->segmented[frame], sizeof seg);
    CHECKF(seg && n <= 2 * s->n4, "frame %d: decoder logits (%lld values) where the reference has none", frame,
           (long long)n);
    if (!seg || n > 2 * s->n4) return;
    const float *want = s->want + (int64_t)frame * 2 * s->n4;
    double scale = 1;
    for (int64_t i = 0; i < n; i++) scale = fmax(scale, fabs(want[i]));
    char label[64];
    snprintf(label, sizeof label, "frame %d decoder logits", frame);
    s->worst = fmax(s->worst, ck_cutie_compare(label, data, want, (size_t)n) / scale);
    s->frames++;
}

/* Objects added later with long-term memory (newobj_lt.safetensors): newobj's
 * masks (object 1 at frame 0, object 2 new at frame 4, object 1 alone at
 * frame 8) over 24 frames with longterm's parameters; object 2's bucket
 * consolidates into a long-term store of its own and prunes it. Every
 * segmented frame's decoder logits (1e-4 of their scale), the probabilities
 * of frames 4, 8 and 23 (1e-4, object IoU >= 0.999), working and long-term
 * memory sizes. */
void ck_cutie_run_newobj_lt(int32_t device, int staged) {
    ck_checkpoint *no = NULL, *clip = NULL;
    if (ck_checkpoint_open(DIR "newobj_lt.safetensors", &no, NULL) != CKEY_OK)
        SKIP("%s absent: make it with tools/reference/make_cutie_fixtures.py --only newobj_lt",
             DIR "newobj_lt.safetensors");
    ckey_error err;
    ckey_track_model *m = NULL;
    const ck_tensor_info *tf = NULL, *tm0 = ck_cutie_need(no, "mask0"), *tm4 = ck_cutie_need(no, "mask4"),
                         *tm8 = ck_cutie_need(no, "mask8"), *tp = ck_cutie_need(no, "prob"),
                         *tpf = ck_cutie_need(no, "prob_frames"), *tdl = ck_cutie_need(no, "dec_logits"),
                         *tsg = ck_cutie_need(no, "segmented"), *tmt = ck_cutie_need(no, "mem_tokens"),
                         *tlt = ck_cutie_need(no, "lt_tokens");
    if (ck_checkpoint_open(DIR "clip.safetensors", &clip, NULL) == CKEY_OK) tf = ck_cutie_need(clip, "frames");
    if (!tf || !tm0 || !tm4 || !tm8 || !tp || !tpf || !tdl || !tsg || !tmt || !tlt ||
        ckey_track_model_open(DIR "cutie_tiny.pth", NULL, &m, &err) != CKEY_OK) {
        ck_test_failed = 1;
        ck_checkpoint_close(no), ck_checkpoint_close(clip);
        return;
    }
    const int T = (int)tdl->shape[0], H = (int)tf->shape[2], W = (int)tf->shape[3], NP = (int)tpf->shape[0];
    const int64_t HW = (int64_t)H * W;
    if (T > 64 || NP > 8 || tmt->numel != (uint64_t)T || tlt->numel != (uint64_t)T || tsg->numel != (uint64_t)T) {
        fprintf(stderr, "  FAIL newobj_lt.safetensors: %d frames, %d probability frames: not the layout expected\n",
                T, NP);
        ck_test_failed = 1;
        ckey_track_model_free(m);
        ck_checkpoint_close(no), ck_checkpoint_close(clip);
        return;
    }
    ckey_track_options o;
    ckey_track_options_default(&o);
    o.threads = 2, o.max_objects = 2;
    o.device = device;
    o.mem_every = 2, o.max_mem_frames = 3, o.top_k = 30, o.stagger_updates = 2; /* the fixture's parameters */
    o.use_long_term = 1, o.lt_max_mem_frames = 5, o.lt_min_mem_frames = 3, o.num_prototypes = 16;
    o.max_num_tokens = 48, o.buffer_tokens = 8, o.count_usage = 1;
    ckey_tracker *t = NULL;
    ckey_status st = create_tracker(staged, m, W, H, &o, &t, &err);
    CHECKF(st == CKEY_OK, "%s", err.message);
    float *logits = ck_cutie_f32(tdl);
    newobj_lt_state ts = {logits, (const int32_t *)tsg->data, tdl->shape[2] * tdl->shape[3], 0, 0};
    if (st == CKEY_OK) ck_tracker_set_tap(t, newobj_lt_tap, &ts);
    float *want = ck_cutie_f32(tp), *rgb = malloc((size_t)HW * 3 * sizeof(float));
    float *prob = malloc((size_t)3 * HW * sizeof(float));
    int32_t mt[64], ltt[64], pf[8], segs = 0;
    memcpy(mt, tmt->data, (size_t)T * sizeof(int32_t)), memcpy(ltt, tlt->data, (size_t)T * sizeof(int32_t));
    memcpy(pf, tpf->data, (size_t)NP * sizeof(int32_t));
    const uint8_t *frames = tf->data, one[1] = {1}, two[1] = {2};
    double worst = 0, iou = 1;
    int64_t lt_max = 0;
    for (int f = 0; f < T && st == CKEY_OK; f++) {
        ck_cutie_frame_rgb(frames + (int64_t)f * 3 * HW, HW, rgb);
        const uint8_t *lab = f == 0 ? tm0->data : f == 4 ? tm4->data : f == 8 ? tm8->data : NULL;
        memset(prob, 0, (size_t)3 * HW * sizeof(float));
        st = ckey_tracker_step(t, rgb, lab, lab ? 1 : 0, f == 4 ? two : one, prob, &err);
        CHECKF(st == CKEY_OK, "frame %d: %s", f, err.message);
        if (st) break;
        int32_t seg;
        memcpy(&seg, &ts.segmented[f], sizeof seg);
        segs += seg != 0;
        for (int i = 0; i < NP; i++) {
            if (pf[i] != f) continue;
            char label[64];
            snprintf(label, sizeof label, "frame %d probabilities", f);
            const float *w = want + (int64_t)i * 3 * HW;
            worst = fmax(worst, ck_cutie_compare(label, prob, w, (size_t)3 * HW));
            iou = fmin(iou, fmin(ck_cutie_iou(prob, w, 3, HW, 1), f >= 4 ? ck_cutie_iou(prob, w, 3, HW, 2) : 1.0));
        }
        const int64_t lt = ckey_tracker_long_term_tokens(t);
        lt_max = lt > lt_max ? lt : lt_max;
        CHECKF(ckey_tracker_memory_tokens(t) == mt[f] && lt == ltt[f],
               "frame %d: memory %lld + %lld long-term tokens, expected %d + %d", f,
               (long long)ckey_tracker_memory_tokens(t), (long long)lt, mt[f], ltt[f]);
    }
    printf("  newobj_lt.safetensors: %d segmented frames compared, decoder logits %.2e of their scale; "
           "probabilities of %d frames max abs err %.2e, IoU >= %.6f; long-term tokens up to %lld\n",
           ts.frames, ts.worst, NP, worst, iou, (long long)lt_max);
    CHECKF(ts.frames == segs, "%d frames' decoder logits compared, the reference segments %d", ts.frames, segs);
    CHECK(ts.worst <= 1e-4);
    CHECK(worst <= 1e-4 && iou >= 0.999);
    /* two long-term stores: more tokens than one holds (fewer than max_num_tokens) */
    CHECK(lt_max >= o.max_num_tokens);
    free(logits), free(want), free(rgb), free(prob);
    ckey_tracker_free(t);
    ckey_track_model_free(m);
    ck_checkpoint_close(no), ck_checkpoint_close(clip);
}

/* Row bands (ck_tracker_set_bands) against whole maps: the fixture clip
 * scaled up 2 x 4 (226 x 196: 13 stride-16 rows) with its two objects,
 * through memory frames and sensory updates; the pixel encoder, the decoder
 * and the mask encoder in several bands, down to a stride-16 row each.
 * Frame 1, the first segmented one, has run every banded part (the pixel
 * encoder on frames 0 and 1, the mask encoder on frame 0, the decoder) with
 * no memory read's top-k selection compounded yet: it is held to bar. The
 * later frames are held to later_bar, above the jumps a near-tie in a
 * top-k selection gives (ck_cutie_run_bands' callers say what they are). */
void ck_cutie_run_bands(int32_t device, int32_t top_k, double bar, double later_bar) {
    ck_cutie_clip clip;
    if (!ck_cutie_clip_open(&clip)) return;
    ckey_error err;
    const ck_tensor_info *tf = clip.frames, *tm = clip.mask0;
    const int T = clip.T, H0 = clip.H, W0 = clip.W, W = 2 * W0, H = 4 * H0;
    const int64_t HW0 = clip.HW, HW = (int64_t)H * W;
    ckey_track_options o;
    ckey_track_options_default(&o);
    o.device = device, o.threads = 2, o.mem_every = 2, o.max_mem_frames = 3, o.stagger_updates = 1, o.max_objects = 2;
    o.top_k = top_k;
    enum { RUNS = 4, FRAMES = 8 };
    static const int bands[RUNS][3] = {{1, 1, 1}, {2, 3, 2}, {5, 4, 3}, {13, 13, 13}};
    float *rgb = malloc((size_t)HW * 3 * sizeof(float)), *prob[RUNS];
    uint8_t *lab = malloc((size_t)HW);
    for (int r = 0; r < RUNS; r++) prob[r] = malloc((size_t)FRAMES * 3 * HW * sizeof(float));
    REQUIRE(rgb && lab && prob[RUNS - 1]);
    for (int64_t p = 0; p < HW; p++) lab[p] = tm->data[(p / W / 4) * W0 + (p % W) / 2];
    const uint8_t objects[2] = {1, 2};
    for (int r = 0; r < RUNS; r++) {
        ckey_tracker *t = NULL;
        REQUIRE(create_tracker(0, clip.m, W, H, &o, &t, &err) == CKEY_OK);
        ck_tracker_set_bands(t, bands[r][0], bands[r][1], bands[r][2]);
        for (int f = 0; f < FRAMES; f++) {
            const uint8_t *fr = tf->data + (size_t)(f % T) * 3 * HW0;
            for (int64_t p = 0; p < HW; p++)
                for (int c = 0; c < 3; c++) rgb[p * 3 + c] = (float)fr[c * HW0 + (p / W / 4) * W0 + (p % W) / 2] / 255.0f;
            if (ckey_tracker_step(t, rgb, f ? NULL : lab, f ? 0 : 2, objects, prob[r] + (size_t)f * 3 * HW, &err)) {
                CHECKF(0, "bands %d %d %d, frame %d: %s", bands[r][0], bands[r][1], bands[r][2], f, err.message);
                break;
            }
        }
        ckey_tracker_free(t);
    }
    for (int r = 1; r < RUNS; r++) {
        double worst = 0, early = 0, per[FRAMES];
        for (int f = 0; f < FRAMES; f++) {
            per[f] = 0;
            for (int64_t i = (int64_t)f * 3 * HW; i < (int64_t)(f + 1) * 3 * HW; i++)
                per[f] = fmax(per[f], fabs((double)prob[r][i] - prob[0][i]));
            worst = fmax(worst, per[f]);
            if (f <= 1) early = fmax(early, per[f]);
        }
        printf("  %d x %d, bands %d %d %d (pixel encoder, decoder, mask encoder): frames 0-1 within %.2e of whole "
               "maps', %d frames within %.2e; per frame", W, H, bands[r][0], bands[r][1], bands[r][2], early, FRAMES,
               worst);
        for (int f = 0; f < FRAMES; f++) printf(" %.1e", per[f]);
        printf("\n");
        CHECKF(early <= bar, "bands %d %d %d: frames 0-1 differ by %.2e", bands[r][0], bands[r][1], bands[r][2], early);
        CHECKF(worst <= later_bar, "bands %d %d %d differ by %.2e", bands[r][0], bands[r][1], bands[r][2], worst);
    }
    for (int r = 0; r < RUNS; r++) free(prob[r]);
    free(rgb), free(lab);
    ck_cutie_clip_close(&clip);
}
