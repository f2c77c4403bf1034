/* Budgets on the GPU (model.h ck_schedule): the banded refiner (the CUDA
 * backend's refiner_input_rows / conv3x3_rows / pointwise_conv_rows), the
 * encoder's mask-unit attention in chunks of windows, c1 in host memory,
 * the pos-embed resized chunk by chunk (ck_cuda_pos_embed_rows: the host
 * resize's bits), the input's hint plane released after patch_embed, the
 * global attention's qkv streamed a head at a time (attention_qkv), the
 * decoders in bands of rows (decoder_fuse_rows), c1 to and from host
 * memory in bands (reroll_rows) and x's RGB planes in host memory, fetched
 * per refiner band, each give the whole-map CUDA run's result, fp32 within 1e-5, fp16 and bf16
 * within the reduced-precision bar (below); a budget makes the planner pick
 * them on CUDA; the smallest budget's session takes no more device memory
 * beyond its plan than the whole-map session does beyond its own. Without a
 * GPU only the planning case runs (a CUDA build plans for the device without
 * one); without CUDA every case is skipped.
 *
 * The reduced-precision bar is the form of test-cuda's network bar (mean
 * abs error <= 1.5x a reference's own): against the fp32 whole-map CUDA run,
 * the banded 16-bit run's mean abs error is within 1.5x the whole-map 16-bit
 * run's, and its max abs error within 2x (plus 1e-3) the whole-map 16-bit
 * run's max. Every comparison prints its max and mean error; a failure
 * names the model, S, precision and band height. */
#include <stdlib.h>
#include <string.h>

#include "ckpt/checkpoint.h"
#include "cuda/kernels.h"
#include "model/greenformer.h"
#include "model/model.h"
#include "model/session.h"
#include "support/testutil.h"

static int have_cuda_backend(void) {
    ckey_session_options o;
    ckey_session_options_default(&o);
    o.device = CKEY_DEVICE_CUDA;
    ck_schedule s[4];
    return ck_session_schedules(NULL, &o, s, 4) > 0;
}

/* Device memory free now (bytes; -1: unknown). */
static int64_t device_free(void) {
    ckey_device_info info;
    if (ckey_device_get_info(CKEY_DEVICE_CUDA, 0, &info, NULL) != CKEY_OK || info.memory_free <= 0) return -1;
    return info.memory_free;
}

/* One CUDA session under schedule sched (NULL: chosen by budget) at S and
 * prec: frames forwards into out [4, S, S]; *plan its plan; *used (may be
 * NULL) the most device memory it took, measured as the drop of free device
 * memory from before its creation to the lowest seen after creation and
 * after each frame. */
static ckey_status run_cuda(const ckey_model *m, int S, ckey_precision prec, int64_t budget, const ck_schedule *sched,
                            const float *x, float *out, int frames, ckey_memory_plan *plan, int64_t *used,
                            ckey_error *err) {
    ckey_session_options o;
    ckey_session_options_default(&o);
    o.size = S;
    o.device = CKEY_DEVICE_CUDA;
    o.precision = prec;
    o.memory_budget = budget;
    const int64_t before = used ? device_free() : -1;
    int64_t lowest = before;
    ckey_session *s = NULL;
    ckey_status st = ck_session_create_schedule(m, &o, 0, sched, &s, err);
    if (!st) st = ckey_session_get_plan(s, plan);
    if (used) lowest = CK_MIN(lowest, device_free());
    for (int k = 0; !st && k < frames; k++) {
        st = ckey_session_forward_into(s, x, out, NULL, err);
        if (used) lowest = CK_MIN(lowest, device_free());
    }
    ckey_session_free(s);
    if (used) *used = before < 0 ? -1 : before - lowest;
    return st;
}

/* The bar for a run of prec (banded) against ref, the fp32 whole-map run,
 * given the whole-map run of prec (whole16; NULL for fp32: 1e-5 against
 * ref). Returns 1 when within it; prints the figures. */
static int within_bar(const char *what, ckey_precision prec, const float *got, const float *ref, const float *whole16,
                      size_t n) {
    double mean = 0;
    const double max = ck_compare(what, got, ref, n, &mean);
    if (prec == CKEY_PRECISION_FP32) {
        CHECKF(max <= 1e-5, "%s: max abs err %.3g vs the fp32 whole-map run, bar 1e-5", what, max);
        return max <= 1e-5;
    }
    double wmean = 0;
    char name[160];
    snprintf(name, sizeof name, "  (whole maps, same precision)");
    const double wmax = ck_compare(name, whole16, ref, n, &wmean);
    const double dmax = ck_compare("  (vs whole maps, same precision)", got, whole16, n, NULL);
    (void)dmax;
    const int ok = mean <= 1.5 * wmean + 1e-7 && max <= 2.0 * wmax + 1e-3;
    CHECKF(ok, "%s: mean abs err %.3g (bar 1.5 x %.3g), max %.3g (bar 2 x %.3g + 1e-3) vs the fp32 whole-map run",
           what, mean, wmean, max, wmax);
    return ok;
}

/* Whole maps in fp32 (the reference), then for each precision the whole
 * maps and each schedule of sch (bands, encoder chunks), all on CUDA. */
static void bands_case(const char *model_name, const ckey_model *m, int S, const float *x, const ck_schedule *sch,
                       int nb, const ckey_precision *precs, int np) {
    const size_t n = (size_t)4 * S * S;
    float *ref = malloc(n * sizeof(float)), *whole = malloc(n * sizeof(float)), *got = malloc(n * sizeof(float));
    REQUIRE(ref && whole && got);
    ckey_error err;
    ckey_memory_plan p0, p;
    const ck_schedule s0 = {0};
    CHECKF(run_cuda(m, S, CKEY_PRECISION_FP32, 0, &s0, x, ref, 1, &p0, NULL, &err) == CKEY_OK, "%s S=%d fp32: %s",
           model_name, S, err.message);
    for (int pi = 0; pi < np; pi++) {
        const ckey_precision prec = precs[pi];
        const char *pn = ckey_precision_name(prec);
        if (prec != CKEY_PRECISION_FP32)
            CHECKF(run_cuda(m, S, prec, 0, &s0, x, whole, 1, &p0, NULL, &err) == CKEY_OK, "%s S=%d %s: %s", model_name,
                   S, pn, err.message);
        for (int i = 0; i < nb; i++) {
            const ck_schedule sb = sch[i];
            char name[256];
            memset(got, 0, n * sizeof(float));
            snprintf(name, sizeof name,
                     "%s S=%d %s bands of %d, encoder chunks %d, c1 on host %d, pos streamed %d, qkv streamed %d, "
                     "decoder bands of %d, c1 in bands %d, x on host %d, encoder bands of %d, output on host %d",
                     model_name, S, pn, sb.refiner_band, CK_MAX(1, sb.encoder_chunks), sb.c1_on_host,
                     sb.pos_streamed, sb.qkv_streamed, sb.decoder_band, sb.c1_bands, sb.x_on_host, sb.encoder_band,
                     sb.out_on_host);
            if (run_cuda(m, S, prec, 0, &sb, x, got, 1, &p, NULL, &err) != CKEY_OK) {
                CHECKF(0, "%s: %s", name, err.message);
                continue;
            }
            const int pos = (p.streamed & CKEY_PLAN_POS_STREAMED) != 0, qkv = (p.streamed & CKEY_PLAN_QKV_STREAMED) != 0,
                      dec = (p.streamed & CKEY_PLAN_DECODER_BANDS) != 0, c1b = (p.streamed & CKEY_PLAN_C1_BANDS) != 0,
                      xh = (p.streamed & CKEY_PLAN_X_ON_HOST) != 0,
                      eb = (p.streamed & CKEY_PLAN_ENCODER_BANDS) != 0, oh = (p.streamed & CKEY_PLAN_OUT_ON_HOST) != 0;
            CHECKF(p.refiner_band == sb.refiner_band && p.encoder_chunks == CK_MAX(1, sb.encoder_chunks) &&
                       p.c1_on_host == sb.c1_on_host && pos == sb.pos_streamed && qkv == sb.qkv_streamed &&
                       dec == (sb.decoder_band > 0) && c1b == sb.c1_bands && xh == sb.x_on_host &&
                       eb == (sb.encoder_band > 0) && oh == sb.out_on_host,
                   "%s: the session ran bands of %d, %d chunks, c1 on host %d, pos streamed %d, qkv streamed %d, "
                   "decoder bands %d, c1 in bands %d, x on host %d, encoder bands %d, output on host %d", name,
                   (int)p.refiner_band, (int)p.encoder_chunks, (int)p.c1_on_host, pos, qkv, dec, c1b, xh, eb, oh);
            if (sb.pos_streamed) /* the weights hold the stored pos-embed only */
                CHECKF(p.weight_bytes == p0.weight_bytes - (int64_t)(S / m->cfg.patch_stride) *
                                                               (S / m->cfg.patch_stride) * m->cfg.embed_dim * 4,
                       "%s: weights %lld bytes, whole maps' %lld", name, (long long)p.weight_bytes,
                       (long long)p0.weight_bytes);
            within_bar(name, prec, got, ref, prec == CKEY_PRECISION_FP32 ? NULL : whole, n);
            printf("    planned peak %.1f MiB (whole maps %.1f MiB), refiner work x%.2f\n", p.peak_bytes / 1048576.0,
                   p0.peak_bytes / 1048576.0, p.relative_work);
        }
    }
    free(ref), free(whole), free(got);
}

/* Planning alone (no GPU needed in a CUDA build): the CUDA backend offers
 * bands, a budget under the whole maps' peak picks them, and in 16 bits the
 * smallest budget at S = 2048 is within 512 MiB. */
static void test_plan_offers_bands(void) {
    if (!have_cuda_backend()) SKIP("this build has no CUDA backend");
    ck_config cfg;
    ck_config_default(&cfg);
    ckey_model *m = NULL;
    ckey_error err;
    REQUIRE(ck_model_synthetic(&cfg, &m, &err) == CKEY_OK);
    static const ckey_precision precs[] = {CKEY_PRECISION_FP32, CKEY_PRECISION_FP16, CKEY_PRECISION_BF16};
    for (int i = 0; i < 3; i++) {
        ckey_session_options o;
        ckey_session_options_default(&o);
        o.size = 2048;
        o.device = CKEY_DEVICE_CUDA;
        o.precision = precs[i];
        ck_schedule s[16];
        const int ns = ck_session_schedules(m, &o, s, 16);
        CHECKF(ns > 1, "%s: %d schedules on CUDA (the whole maps only)", ckey_precision_name(precs[i]), ns);
        ckey_memory_plan unl, p;
        REQUIRE(ckey_plan_memory(m, &o, &unl, &err) == CKEY_OK);
        o.memory_budget = unl.min_budget_bytes;
        CHECKF(ckey_plan_memory(m, &o, &p, &err) == CKEY_OK, "%s", err.message);
        printf("  S = 2048 %s on CUDA: whole maps %.1f MiB; smallest budget %.1f MiB (bands of %d rows, encoder "
               "in %d chunks, c1 on host %d; live at most: encoder %.1f, decoders %.1f, refiner %.1f MiB)\n",
               ckey_precision_name(precs[i]), unl.peak_bytes / 1048576.0, p.peak_bytes / 1048576.0,
               (int)p.refiner_band, (int)p.encoder_chunks, (int)p.c1_on_host, p.stage_bytes[0] / 1048576.0,
               p.stage_bytes[1] / 1048576.0, p.stage_bytes[2] / 1048576.0);
        CHECK(unl.refiner_band == 0 && p.refiner_band > 0 && p.peak_bytes < unl.peak_bytes);
        CHECK(p.peak_bytes <= o.memory_budget);
        /* the GPU's smallest budget in 16 bits at S = 2048 is at most 512 MiB, weights included */
        if (precs[i] != CKEY_PRECISION_FP32)
            CHECKF(p.peak_bytes <= (int64_t)512 << 20, "%s: smallest budget %.1f MiB over 512 MiB",
                   ckey_precision_name(precs[i]), p.peak_bytes / 1048576.0);
        /* at S = 3072 the smallest budget keeps the stored pos-embed: the weights of S = 2048 */
        const int64_t w2048 = p.weight_bytes;
        o.size = 3072;
        o.memory_budget = 0;
        ckey_memory_plan p3;
        REQUIRE(ckey_plan_memory(m, &o, &unl, &err) == CKEY_OK);
        o.memory_budget = unl.min_budget_bytes;
        CHECKF(ckey_plan_memory(m, &o, &p3, &err) == CKEY_OK, "%s", err.message);
        printf("  S = 3072 %s on CUDA: whole maps %.1f MiB; smallest budget %.1f MiB (weights %.1f MiB, pos-embed "
               "streamed %d)\n", ckey_precision_name(precs[i]), unl.peak_bytes / 1048576.0,
               p3.peak_bytes / 1048576.0, p3.weight_bytes / 1048576.0, (p3.streamed & CKEY_PLAN_POS_STREAMED) != 0);
        CHECK((p3.streamed & CKEY_PLAN_POS_STREAMED) && p3.weight_bytes == w2048);
    }
    ckey_model_free(m);
}

/* Planning alone: the CUDA planner offers the global attention's qkv
 * streamed (attention_qkv) and the decoders in bands (decoder_fuse_rows),
 * and at S = 2048, 3072 and 4096 in fp16 its smallest budget takes both
 * with the mask-unit blocks in bands (patch_embed_rows), x and the output
 * in host memory, and is under the leanest schedule's without them; at each
 * S it is within 512 MiB, weights included. Prints the smallest budgets. */
static void test_plan_streamed(void) {
    if (!have_cuda_backend()) SKIP("this build has no CUDA backend");
    ck_config cfg;
    ck_config_default(&cfg);
    ckey_model *m = NULL;
    ckey_error err;
    REQUIRE(ck_model_synthetic(&cfg, &m, &err) == CKEY_OK);
    static const int sizes[] = {2048, 3072, 4096};
    for (int i = 0; i < (int)CK_ARRAY_LEN(sizes); i++) {
        ckey_session_options o;
        ckey_session_options_default(&o);
        o.size = sizes[i];
        o.device = CKEY_DEVICE_CUDA;
        o.precision = CKEY_PRECISION_FP16;
        ck_schedule s[192];
        const int ns = ck_session_schedules(m, &o, s, (int)CK_ARRAY_LEN(s));
        int64_t without = 0; /* the leanest peak with neither step */
        int qkv = 0, dec = 0;
        for (int k = 0; k < ns; k++) {
            qkv |= s[k].qkv_streamed, dec |= s[k].decoder_band > 0;
            if (s[k].qkv_streamed || s[k].decoder_band > 0) continue;
            ckey_memory_plan p;
            REQUIRE(ck_session_plan_schedule(m, &o, &s[k], &p, &err) == CKEY_OK);
            if (!without || p.peak_bytes < without) without = p.peak_bytes;
        }
        CHECKF(qkv && dec, "S = %d: the CUDA planner offers qkv streamed %d, decoder bands %d", sizes[i], qkv, dec);
        ckey_memory_plan unl, p;
        REQUIRE(ckey_plan_memory(m, &o, &unl, &err) == CKEY_OK);
        o.memory_budget = unl.min_budget_bytes;
        CHECKF(ckey_plan_memory(m, &o, &p, &err) == CKEY_OK, "%s", err.message);
        printf("  S = %d fp16 on CUDA: smallest budget %.1f MiB (weights %.1f + arena %.1f + workspace %.1f; bands of "
               "%d, %d chunks, steps %d), without qkv streamed and decoder bands %.1f MiB\n",
               sizes[i], p.peak_bytes / 1048576.0, p.weight_bytes / 1048576.0, p.arena_bytes / 1048576.0,
               p.workspace_bytes / 1048576.0, (int)p.refiner_band, (int)p.encoder_chunks, (int)p.streamed,
               without / 1048576.0);
        const int32_t steps = CKEY_PLAN_QKV_STREAMED | CKEY_PLAN_DECODER_BANDS | CKEY_PLAN_ENCODER_BANDS |
                              CKEY_PLAN_X_ON_HOST | CKEY_PLAN_OUT_ON_HOST;
        CHECKF((p.streamed & steps) == steps,
               "S = %d: the smallest budget's steps %d lack qkv streamed, decoder or encoder bands, x or the output "
               "on host", sizes[i], (int)p.streamed);
        CHECKF(p.peak_bytes <= (int64_t)512 << 20, "S = %d fp16: smallest budget %.1f MiB over 512 MiB", sizes[i],
               p.peak_bytes / 1048576.0);
        CHECKF(p.peak_bytes < without, "S = %d: smallest budget %.1f MiB, not under %.1f MiB without the two steps",
               sizes[i], p.peak_bytes / 1048576.0, without / 1048576.0);
    }
    ckey_model_free(m);
}

/* The tiny model at S = 128: band heights that divide S and that do not, one
 * row, and taller than the halo; fp32 also against the PyTorch golden. */
static void test_tiny_s128(void) {
    if (ck_cuda_device_count() == 0) SKIP("no CUDA device on this machine");
    char *mp = ck_fixture_path("tiny/tiny.pth"), *gp = ck_fixture_path("tiny/tiny_s128.safetensors");
    ckey_model *m = NULL;
    ckey_error err;
    CHECKF(ckey_model_load(mp, &m, &err) == CKEY_OK, "%s", err.message);
    free(mp);
    const int S = 128;
    float *x = malloc((size_t)4 * S * S * sizeof(float));
    ck_checkpoint *g = NULL;
    const ck_tensor_info *t = NULL;
    if (m && x && !ck_checkpoint_open(gp, &g, NULL) && (t = ck_checkpoint_find(g, "x")) && !ck_tensor_to_f32(t, x, NULL)) {
        static const ck_schedule sch[] = {
            {.refiner_band = 64}, {.refiner_band = 50}, {.refiner_band = 16}, {.refiner_band = 7}, {.refiner_band = 1},
            {.encoder_chunks = 4}, {.refiner_band = 7, .encoder_chunks = 16},
            {.refiner_band = 7, .encoder_chunks = 16, .c1_on_host = 1}, {.qkv_streamed = 1}, {.decoder_band = 16},
            {.decoder_band = 1},
            {.refiner_band = 7, .encoder_chunks = 16, .c1_on_host = 1, .qkv_streamed = 1, .decoder_band = 7},
            {.refiner_band = 7, .encoder_chunks = 16, .c1_on_host = 1, .qkv_streamed = 1, .decoder_band = 7,
             .c1_bands = 1},
            {.refiner_band = 16, .x_on_host = 1},
            {.refiner_band = 7, .encoder_chunks = 16, .c1_on_host = 1, .qkv_streamed = 1, .decoder_band = 7,
             .c1_bands = 1, .x_on_host = 1},
            {.refiner_band = 16, .out_on_host = 1}, {.decoder_band = 16, .encoder_band = 16},
            {.decoder_band = 7, .encoder_band = 8, .encoder_chunks = 3},
            {.refiner_band = 7, .decoder_band = 7, .encoder_band = 16, .x_on_host = 1},
            {.refiner_band = 7, .encoder_chunks = 16, .qkv_streamed = 1, .decoder_band = 7, .encoder_band = 8,
             .x_on_host = 1, .out_on_host = 1}};
        static const ckey_precision precs[] = {CKEY_PRECISION_FP32, CKEY_PRECISION_FP16, CKEY_PRECISION_BF16};
        bands_case("tiny", m, S, x, sch, (int)CK_ARRAY_LEN(sch), precs, 3);
    } else {
        CHECK(!"the tiny model and tiny_s128.safetensors's x readable");
    }
    ck_checkpoint_close(g);
    free(gp), free(x);
    ckey_model_free(m);
}

/* ck_cuda_pos_embed_rows gives the host resize's (ck_pos_embed_resize_rows)
 * bits: up (32 -> 48, 64) and down (32 -> 24), over every pixel in chunks
 * that do not divide the grid. */
static void test_pos_embed_rows(void) {
    if (ck_cuda_device_count() == 0) SKIP("no CUDA device on this machine");
    const int gs = 32, C = 24, gds[] = {48, 64, 24};
    float *src = malloc((size_t)gs * gs * C * sizeof(float)), *want = malloc((size_t)64 * 64 * C * sizeof(float)),
          *got = malloc((size_t)64 * 64 * C * sizeof(float));
    REQUIRE(src && want && got);
    uint32_t r = 12345;
    for (int i = 0; i < gs * gs * C; i++) {
        r = r * 1664525u + 1013904223u;
        src[i] = (float)((r >> 8) & 0xffff) / 32768.0f - 1.0f;
    }
    ckey_error err;
    float *dsrc = NULL, *ddst = NULL;
    REQUIRE(ck_cuda_malloc((void **)&dsrc, (size_t)gs * gs * C * sizeof(float), &err) == CKEY_OK);
    REQUIRE(ck_cuda_malloc((void **)&ddst, (size_t)64 * 64 * C * sizeof(float), &err) == CKEY_OK);
    REQUIRE(ck_cuda_copy(dsrc, src, (size_t)gs * gs * C * sizeof(float), 1, &err) == CKEY_OK);
    for (int k = 0; k < 3; k++) {
        const int gd = gds[k];
        const int64_t total = (int64_t)gd * gd, chunk = 1000;
        ck_pos_embed_resize_rows(src, gs, C, want, gd, 0, gd);
        REQUIRE(ck_cuda_memset(ddst, 0xff, (size_t)total * C * sizeof(float), &err) == CKEY_OK);
        for (int64_t p0 = 0; p0 < total; p0 += chunk)
            CHECKF(ck_cuda_pos_embed_rows(dsrc, gs, C, gd, p0, CK_MIN(chunk, total - p0), ddst + p0 * C, NULL, &err) ==
                       CKEY_OK, "%s", err.message);
        REQUIRE(ck_cuda_sync(&err) == CKEY_OK);
        REQUIRE(ck_cuda_copy(got, ddst, (size_t)total * C * sizeof(float), 0, &err) == CKEY_OK);
        int64_t differ = 0;
        for (int64_t i = 0; i < total * C; i++) differ += memcmp(&got[i], &want[i], sizeof(float)) != 0;
        const double max = ck_compare("  pos-embed rows vs the host resize", got, want, (size_t)total * C, NULL);
        printf("    %d -> %d: %lld of %lld values differ in their bits (max abs err %.3g)\n", gs, gd,
               (long long)differ, (long long)(total * C), max);
        CHECKF(differ == 0, "pos-embed %d -> %d: %lld values differ from the host resize", gs, gd, (long long)differ);
    }
    ck_cuda_free(dsrc), ck_cuda_free(ddst);
    free(src), free(want), free(got);
}

/* The tiny model at S = 256 and 2048, where its 32 x 32 pos-embed is resized
 * to 64 x 64 and 512 x 512: the pos-embed streamed, alone and with the other
 * schedule fields; at S = 2048 in 64 chunks, where the widening global
 * block's projection is pooled 2048 rows at a time (two chunks). */
static void test_tiny_pos_streamed(void) {
    if (ck_cuda_device_count() == 0) SKIP("no CUDA device on this machine");
    char *mp = ck_fixture_path("tiny/tiny.pth");
    ckey_model *m = NULL;
    ckey_error err;
    CHECKF(ckey_model_load(mp, &m, &err) == CKEY_OK, "%s", err.message);
    free(mp);
    REQUIRE(m);
    static const ck_schedule sch[] = {{.pos_streamed = 1},
                                      {.refiner_band = 7, .encoder_chunks = 16, .c1_on_host = 1, .pos_streamed = 1},
                                      {.refiner_band = 7, .encoder_chunks = 64, .c1_on_host = 1, .pos_streamed = 1},
                                      {.refiner_band = 7, .encoder_chunks = 64, .c1_on_host = 1, .pos_streamed = 1,
                                       .input_rgb = 1, .qkv_streamed = 1, .decoder_band = 64, .c1_bands = 1,
                                       .x_on_host = 1},
                                      {.refiner_band = 7, .encoder_chunks = 64, .pos_streamed = 1, .qkv_streamed = 1,
                                       .decoder_band = 64, .encoder_band = 16, .x_on_host = 1, .out_on_host = 1}};
    static const ck_schedule sch2048[] = {{.encoder_chunks = 64, .c1_on_host = 1, .pos_streamed = 1},
                                          {.refiner_band = 300, .encoder_chunks = 64, .c1_on_host = 1,
                                           .pos_streamed = 1, .input_rgb = 1}};
    static const ckey_precision precs[] = {CKEY_PRECISION_FP32, CKEY_PRECISION_FP16, CKEY_PRECISION_BF16};
    for (int big = 0; big < 2; big++) {
        const int S = big ? 2048 : 256;
        float *x = malloc((size_t)4 * S * S * sizeof(float));
        REQUIRE(x);
        ck_synth_input(S, x);
        if (big) bands_case("tiny", m, S, x, sch2048, (int)CK_ARRAY_LEN(sch2048), precs, 3);
        else bands_case("tiny", m, S, x, sch, (int)CK_ARRAY_LEN(sch), precs, 3);
        free(x);
    }
    ckey_model_free(m);
}

/* The full-size architecture (synthetic weights) and the synthetic input
 * at S ([4, S, S]); 0 (nothing held) when either could not be made. */
static int full_model_input(int S, ckey_model **m, float **x) {
    ck_config cfg;
    ck_config_default(&cfg);
    *x = NULL;
    if (ck_model_synthetic(&cfg, m, NULL) != CKEY_OK) return 0;
    *x = malloc((size_t)4 * S * S * sizeof(float));
    if (!*x) {
        ckey_model_free(*m);
        *m = NULL;
        return 0;
    }
    ck_synth_input(S, *x);
    return 1;
}

/* The full-size architecture (synthetic weights) at S = 256: the 64-channel
 * refiner on the tensor-core convs (wgmma on Hopper) in 16 bits. */
static void test_full_s256(void) {
    if (ck_cuda_device_count() == 0) SKIP("no CUDA device on this machine");
    const int S = 256;
    ckey_model *m = NULL;
    float *x = NULL;
    REQUIRE(full_model_input(S, &m, &x));
    /* chunks: 64 windows in 4 of 16, in 16 of 4 and in 64 of 1 (with the MLP's, patch embedding's and
     * decoders' chunks a quarter again); 3 (not dividing) of 22, 22 and 20; c1 in host memory; the
     * pos-embed (stored 512 x 512) resized as patch_embed adds it; the input's hint plane released */
    static const ck_schedule sch[] = {
        {.refiner_band = 96}, {.refiner_band = 37}, {.refiner_band = 8}, {.refiner_band = 1},
        {.encoder_chunks = 4}, {.encoder_chunks = 16}, {.encoder_chunks = 3},
        {.refiner_band = 8, .encoder_chunks = 16}, {.c1_on_host = 1},
        {.refiner_band = 8, .encoder_chunks = 16, .c1_on_host = 1}, {.pos_streamed = 1},
        {.refiner_band = 8, .encoder_chunks = 16, .c1_on_host = 1, .pos_streamed = 1},
        {.refiner_band = 8, .encoder_chunks = 64, .c1_on_host = 1, .pos_streamed = 1},
        {.refiner_band = 8, .encoder_chunks = 64, .c1_on_host = 1, .pos_streamed = 1, .input_rgb = 1},
        {.qkv_streamed = 1}, {.decoder_band = 64}, {.decoder_band = 5}, {.encoder_chunks = 16, .qkv_streamed = 1},
        {.refiner_band = 8, .encoder_chunks = 64, .c1_on_host = 1, .pos_streamed = 1, .input_rgb = 1,
         .qkv_streamed = 1, .decoder_band = 64},
        {.refiner_band = 8, .encoder_chunks = 64, .c1_on_host = 1, .qkv_streamed = 1, .decoder_band = 5,
         .c1_bands = 1},
        {.refiner_band = 37, .x_on_host = 1},
        {.refiner_band = 8, .encoder_chunks = 64, .c1_on_host = 1, .pos_streamed = 1, .input_rgb = 1,
         .qkv_streamed = 1, .decoder_band = 64, .c1_bands = 1, .x_on_host = 1},
        {.refiner_band = 37, .out_on_host = 1}, {.decoder_band = 64, .encoder_band = 16},
        {.decoder_band = 5, .encoder_band = 32, .encoder_chunks = 3},
        {.refiner_band = 8, .encoder_chunks = 64, .pos_streamed = 1, .qkv_streamed = 1, .decoder_band = 64,
         .encoder_band = 16, .x_on_host = 1, .out_on_host = 1}};
    static const ckey_precision precs[] = {CKEY_PRECISION_FP32, CKEY_PRECISION_FP16, CKEY_PRECISION_BF16};
    bands_case("full", m, S, x, sch, (int)CK_ARRAY_LEN(sch), precs, 3);
    free(x);
    ckey_model_free(m);
}

/* The smallest budget in fp16 at S: the session picks the leanest steps
 * (bands of the refiner, of the mask-unit blocks and of the decoders, the
 * qkv streamed, x and the output in host memory), its plan is within
 * 512 MiB, its result within the bar, and the device memory it took exceeds
 * its plan by no more than the whole-map session's exceeds that one's
 * (+ 16 MiB). The plans count cuBLAS's workspace and the conv's sync ints
 * (workspace_bytes); outside them are the CUDA graph (the whole-map
 * session's; the budget's runs eagerly), the allocations' rounding and the
 * runtime's own (bench-budget --trace-memory shows each). */
static void smallest_budget_case(const ckey_model *m, int S, const float *x) {
    const size_t n = (size_t)4 * S * S;
    float *ref = malloc(n * sizeof(float)), *whole = malloc(n * sizeof(float)), *got = malloc(n * sizeof(float));
    REQUIRE(ref && whole && got);
    ckey_error err;
    ckey_memory_plan pw, pb;
    int64_t used_w = -1, used_b = -1;
    const ck_schedule s0 = {0};
    CHECKF(run_cuda(m, S, CKEY_PRECISION_FP32, 0, &s0, x, ref, 1, &pw, NULL, &err) == CKEY_OK, "%s", err.message);
    /* the whole maps first: the kernels and cuBLAS are loaded before the banded session is measured */
    CHECKF(run_cuda(m, S, CKEY_PRECISION_FP16, 0, &s0, x, whole, 2, &pw, &used_w, &err) == CKEY_OK, "%s",
           err.message);
    /* the smallest budget (a session forced to a schedule names its own peak as the smallest) */
    ckey_session_options po;
    ckey_session_options_default(&po);
    po.size = S;
    po.device = CKEY_DEVICE_CUDA;
    po.precision = CKEY_PRECISION_FP16;
    ckey_memory_plan unl;
    REQUIRE(ckey_plan_memory(m, &po, &unl, &err) == CKEY_OK);
    pw.min_budget_bytes = unl.min_budget_bytes;
    CHECKF(run_cuda(m, S, CKEY_PRECISION_FP16, pw.min_budget_bytes, NULL, x, got, 3, &pb, &used_b, &err) == CKEY_OK,
           "smallest budget: %s", err.message);
    const int64_t outside = used_w - pw.peak_bytes + (16 << 20);
    printf("  S = %d fp16: whole maps planned %.1f MiB, measured %.1f MiB; smallest budget %.1f MiB: bands of %d, "
           "encoder in %d chunks, planned %.1f MiB, measured %.1f MiB (allowed over the plan: %.1f MiB; the plans "
           "count %.1f MiB of workspace)\n",
           S, pw.peak_bytes / 1048576.0, used_w / 1048576.0, pw.min_budget_bytes / 1048576.0, (int)pb.refiner_band,
           (int)pb.encoder_chunks, pb.peak_bytes / 1048576.0, used_b / 1048576.0, outside / 1048576.0,
           pb.workspace_bytes / 1048576.0);
    CHECKF(pb.refiner_band > 0 && pb.encoder_chunks > 1, "S = %d: the smallest budget ran bands of %d, %d encoder chunks",
           S, (int)pb.refiner_band, (int)pb.encoder_chunks);
    const int32_t steps = CKEY_PLAN_QKV_STREAMED | CKEY_PLAN_DECODER_BANDS | CKEY_PLAN_ENCODER_BANDS |
                          CKEY_PLAN_X_ON_HOST | CKEY_PLAN_OUT_ON_HOST;
    CHECKF((pb.streamed & steps) == steps,
           "S = %d: the smallest budget ran without the qkv streamed, the decoders or mask-unit blocks in bands, x "
           "or the output in host memory (steps %d)", S, (int)pb.streamed);
    CHECK(pb.peak_bytes <= pw.min_budget_bytes);
    CHECKF(pb.peak_bytes <= (int64_t)512 << 20, "S = %d fp16: smallest budget %.1f MiB over 512 MiB", S,
           pb.peak_bytes / 1048576.0);
    CHECKF(used_w >= 0 && used_b >= 0 && used_b <= pb.peak_bytes + outside,
           "banded fp16 session took %.1f MiB of device memory, its plan %.1f MiB + %.1f MiB outside it",
           used_b / 1048576.0, pb.peak_bytes / 1048576.0, outside / 1048576.0);
    char what[64];
    snprintf(what, sizeof what, "full S=%d fp16 smallest budget", S);
    within_bar(what, CKEY_PRECISION_FP16, got, ref, whole, n);
    free(ref), free(whole), free(got);
}

/* S = 2048, full size: fp32 and fp16 bands against the whole maps; then the
 * smallest budget in fp16 (smallest_budget_case). */
static void test_full_s2048(void) {
    if (ck_cuda_device_count() == 0) SKIP("no CUDA device on this machine");
    const int S = 2048;
    ckey_model *m = NULL;
    float *x = NULL;
    REQUIRE(full_model_input(S, &m, &x));
    /* fp16 only: the fp32 refiner on CUDA cores takes over 20 s a banded
     * run at S = 2048 (the S = 256 cases cover fp32, and bands of 8) */
    static const ck_schedule sch[] = {{.refiner_band = 512}, {.refiner_band = 100}, {.encoder_chunks = 16},
                                      {.refiner_band = 64, .encoder_chunks = 16, .c1_on_host = 1},
                                      {.refiner_band = 64, .encoder_chunks = 64, .c1_on_host = 1},
                                      {.refiner_band = 64, .encoder_chunks = 64, .c1_on_host = 1, .qkv_streamed = 1,
                                       .decoder_band = 64},
                                      {.refiner_band = 64, .encoder_chunks = 64, .c1_on_host = 1, .qkv_streamed = 1,
                                       .decoder_band = 64, .c1_bands = 1, .x_on_host = 1},
                                      {.refiner_band = 64, .encoder_chunks = 64, .qkv_streamed = 1,
                                       .decoder_band = 64, .encoder_band = 16, .x_on_host = 1, .out_on_host = 1}};
    static const ckey_precision precs[] = {CKEY_PRECISION_FP16};
    bands_case("full", m, S, x, sch, (int)CK_ARRAY_LEN(sch), precs, 1);
    /* fp32 on whole refiner maps: in 64 chunks the encoder's scratch holds 6 of stage 3's 8 heads' outputs
     * (attention_qkv's groups of heads, each group's projection added alone) */
    static const ck_schedule sch32[] = {{.encoder_chunks = 64, .qkv_streamed = 1, .decoder_band = 64}};
    static const ckey_precision prec32[] = {CKEY_PRECISION_FP32};
    bands_case("full", m, S, x, sch32, (int)CK_ARRAY_LEN(sch32), prec32, 1);

    smallest_budget_case(m, S, x);
    free(x);
    ckey_model_free(m);
}

/* S = 4096, full size, fp16: the smallest budget (the mask-unit blocks in
 * bands, x and the output in host memory) against the whole maps, with its
 * device memory measured as at S = 2048. */
static void test_full_s4096(void) {
    if (ck_cuda_device_count() == 0) SKIP("no CUDA device on this machine");
    const int S = 4096;
    ckey_model *m = NULL;
    float *x = NULL;
    REQUIRE(full_model_input(S, &m, &x));
    smallest_budget_case(m, S, x);
    free(x);
    ckey_model_free(m);
}

int main(int argc, char **argv) {
    setvbuf(stdout, NULL, _IOLBF, 0); /* each case's figures as they come (long GPU cases) */
    static const ck_test_case cases[] = {
        {"plan_offers_bands", test_plan_offers_bands},
        {"plan_streamed", test_plan_streamed},
        {"tiny_s128_bands", test_tiny_s128},
        {"pos_embed_rows", test_pos_embed_rows},
        {"tiny_pos_streamed", test_tiny_pos_streamed},
        {"full_s256_bands", test_full_s256},
        {"full_s2048_bands_and_memory", test_full_s2048},
        {"full_s4096_smallest_budget", test_full_s4096},
    };
    return ck_test_main(cases, (int)CK_ARRAY_LEN(cases), argc, argv);
}
