/* Memory budgets: for each schedule a session may run (model.h ck_schedule),
 * from the leanest (the smallest budget) up to the whole-map one (the
 * default), the planned peak, the peak RSS and the time per
 * frame, on the official checkpoint (--model) or the full-size synthetic
 * weights. Peak RSS: the process's from the session's creation on, and
 * its RSS just before (the model's store, the libraries, the input). With
 * --device cuda also the peak device memory the session took: the drop of
 * free device memory from before its creation to the lowest seen after
 * creation and after each frame (a warm-up session of the same S runs
 * first, so that loading the kernels is not counted). --plan-only: the
 * plans alone (any S, no run; CUDA plans need no GPU). One JSON line per
 * schedule, from the smallest planned peak upward; --max-schedules K: the
 * K leanest only. --trace-memory (with --device cuda): the device memory
 * in use (cudaMemGetInfo) after each step of each session's creation, and
 * of its frames (after each op only where it changed): where the memory
 * outside the plan goes. The warm-up session runs three frames then (eager,
 * graph capture, replay), so that what the CUDA context loads once is
 * traced there, apart from what each session takes. --no-graph: every
 * frame eager (CKEY_DEBUG_CUDA_NO_GRAPH), to see what the graph takes and
 * buys. Not a test. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "benchutil.h"
#include "ckey_debug.h"
#include "cuda/kernels.h"
#include "model/greenformer.h"
#include "model/session.h"

/* --trace-memory: the session traced, the memory in use when its creation
 * began and at the last line printed, ops since the frame began. */
typedef struct trace_state {
    const char *who;
    int frame; /* -1: creation */
    int64_t base, last;
    int ops;
} trace_state;

static void trace_begin(trace_state *t, const char *who) {
    t->who = who;
    t->frame = -1;
    t->ops = 0;
    t->base = t->last = ck_cuda_used_bytes();
    printf("trace-memory: %s: %.1f MiB of device memory in use before the session\n", who, t->base / 1048576.0);
}

/* ck_trace_fn: a line per step; ops only where the memory in use changed. */
static void trace_memory(void *user, const char *step) {
    trace_state *t = user;
    const int64_t used = ck_cuda_used_bytes();
    const int op = !strncmp(step, "op ", 3);
    t->ops += op;
    if (used < 0 || (op && used == t->last)) return;
    char where[32];
    if (t->frame < 0) snprintf(where, sizeof where, "creation");
    else if (op) snprintf(where, sizeof where, "frame %d, op %d", t->frame, t->ops);
    else snprintf(where, sizeof where, "frame %d", t->frame);
    printf("trace-memory: %s: %-18s %-62s %+8.1f MiB, %8.1f MiB since the session began\n", t->who, where, step,
           (used - t->last) / 1048576.0, (used - t->base) / 1048576.0);
    t->last = used;
}

static void trace_frame(trace_state *t, int frame) {
    t->frame = frame;
    t->ops = 0;
}

static void trace_end(trace_state *t) {
    const int64_t used = ck_cuda_used_bytes();
    printf("trace-memory: %s: session freed: %+.1f MiB left in use since it began (the CUDA context's own)\n",
           t->who, (used - t->base) / 1048576.0);
}

/* Device memory free now (bytes; -1: unknown). */
static int64_t device_free(void) {
    ckey_device_info info;
    if (ckey_device_get_info(CKEY_DEVICE_CUDA, 0, &info, NULL) != CKEY_OK || info.memory_free <= 0) return -1;
    return info.memory_free;
}

int main(int argc, char **argv) {
    ckey_process_init(); /* as the ckey program runs */
    bench_forward_args a = {.size = 512, .runs = 1, .precision = CKEY_PRECISION_DEFAULT};
    int cuda = 0, plan_only = 0, dump = 0, warm = 1, min_band = 0, trace = 0, max_sched = 0;
    uint32_t cuda_off = 0;
    double budget_mib = 0;
    for (int i = 1; i < argc; i++) {
        if (bench_forward_arg(argc, argv, &i, &a)) continue;
        if (!strcmp(argv[i], "--plan-only")) plan_only = 1;
        else if (!strcmp(argv[i], "--dump")) dump = 1;
        else if (!strcmp(argv[i], "--no-warmup")) warm = 0;
        else if (!strcmp(argv[i], "--trace-memory")) trace = 1;
        else if (!strcmp(argv[i], "--no-graph")) cuda_off |= CKEY_DEBUG_CUDA_NO_GRAPH;
        else if (!strcmp(argv[i], "--max-schedules") && i + 1 < argc) max_sched = atoi(argv[++i]);
        else if (!strcmp(argv[i], "--min-band") && i + 1 < argc) min_band = atoi(argv[++i]);
        else if (!strcmp(argv[i], "--budget") && i + 1 < argc) budget_mib = atof(argv[++i]);
        else if (!strcmp(argv[i], "--device") && i + 1 < argc) cuda = !strncmp(argv[++i], "cuda", 4);
        else {
            fprintf(stderr, "usage: %s [--size S] [--threads N] [--runs R] [--model M] [--device cpu|cuda] "
                            "[--precision fp32|fp16|bf16] [--no-warmup] [--min-band B] [--max-schedules K] [--plan-only] "
                            "[--trace-memory] [--no-graph] [--dump [--budget MIB]]\n", argv[0]);
            return 2;
        }
    }
    const int S = a.size, threads = a.threads, runs = a.runs;
    ckey_error err;
    ckey_model *m = NULL;
    ckey_status st = bench_model_open(&a, &m, &err);
    if (st) {
        fprintf(stderr, "bench: %s\n", err.message);
        return 1;
    }
    ckey_session_options o;
    bench_session_options(&a, &o);
    if (cuda) o.device = CKEY_DEVICE_CUDA;
    if (dump) { /* the buffers of the plan a session would choose under --budget */
        o.memory_budget = (int64_t)(budget_mib * 1048576.0);
        st = ckey_plan_memory_print(m, &o, stdout, &err);
        if (st) fprintf(stderr, "bench: %s\n", err.message);
        ckey_model_free(m);
        return st ? 1 : 0;
    }
    ck_schedule sched[192];
    const int n = ck_session_schedules(m, &o, sched, (int)(sizeof sched / sizeof sched[0]));
    /* from the smallest planned peak upward (insertion sort; ties: the list's order, faster first) */
    int64_t peak[sizeof sched / sizeof sched[0]];
    for (int i = 0; i < n; i++) {
        ckey_memory_plan mp;
        if (ck_session_plan_schedule(m, &o, &sched[i], &mp, &err)) {
            fprintf(stderr, "bench: %s\n", err.message);
            return 1;
        }
        peak[i] = mp.peak_bytes;
    }
    for (int i = 1; i < n; i++)
        for (int j = i; j > 0 && peak[j] < peak[j - 1]; j--) {
            const ck_schedule ts = sched[j];
            const int64_t tp = peak[j];
            sched[j] = sched[j - 1], peak[j] = peak[j - 1];
            sched[j - 1] = ts, peak[j - 1] = tp;
        }
    float *x = malloc((size_t)4 * S * S * sizeof(float));
    if (!x) return 1;
    ck_synth_input(S, x);
    trace = trace && cuda && !plan_only;
    trace_state ts;
    if (cuda && !plan_only) { /* load the kernels and cuBLAS's before any session is measured */
        ckey_session *s = NULL;
        ckey_forward_result r;
        const ck_schedule whole = {0};
        if (trace) trace_begin(&ts, "warm-up (whole maps)");
        st = ck_session_create_traced(m, &o, cuda_off, &whole, trace ? trace_memory : NULL, &ts, &s, &err);
        for (int k = 0; !st && k < (trace ? 3 : 1); k++) {
            if (trace) trace_frame(&ts, k);
            st = ckey_session_forward(s, x, &r, &err);
        }
        if (st) {
            fprintf(stderr, "bench: %s\n", err.message);
            return 1;
        }
        ckey_session_free(s);
        if (trace) trace_end(&ts);
    }
    int ran = 0;
    for (int i = 0; i < n; i++) { /* leanest first */
        if (sched[i].refiner_band && sched[i].refiner_band < min_band) continue; /* --min-band: skip the slowest */
        if (max_sched > 0 && ran++ >= max_sched) break;
        ckey_memory_plan mp;
        ckey_session *s = NULL;
        double mean = 0, chk = 0, rss_before = 0;
        int64_t dev_before = -1, dev_low = -1;
        if (plan_only) {
            if (ck_session_plan_schedule(m, &o, &sched[i], &mp, &err)) {
                fprintf(stderr, "bench: %s\n", err.message);
                return 1;
            }
        } else {
            bench_reset_peak_rss(); /* the peak from here on: the model's store, this session, the rest */
            rss_before = bench_status_mib("VmRSS:");
            if (cuda) dev_before = dev_low = device_free();
            char label[96];
            snprintf(label, sizeof label, "bands of %d, %d chunks, c1 on host %d, pos streamed %d",
                     sched[i].refiner_band, CK_MAX(1, sched[i].encoder_chunks), sched[i].c1_on_host,
                     sched[i].pos_streamed);
            if (trace) trace_begin(&ts, label);
            if (ck_session_create_traced(m, &o, cuda_off, &sched[i], trace ? trace_memory : NULL, &ts, &s, &err)) {
                fprintf(stderr, "bench: %s\n", err.message);
                return 1;
            }
            if (cuda) dev_low = CK_MIN(dev_low, device_free());
            ckey_session_get_plan(s, &mp);
            ckey_forward_result r;
            for (int k = 1 - warm; k <= runs; k++) { /* run 0: warm-up */
                if (trace) trace_frame(&ts, k + warm - 1);
                if (ckey_session_forward(s, x, &r, &err)) {
                    fprintf(stderr, "bench: %s\n", err.message);
                    return 1;
                }
                if (k > 0) mean += r.seconds / runs;
                if (cuda) dev_low = CK_MIN(dev_low, device_free());
            }
            for (int64_t p = 0; p < (int64_t)S * S; p++) chk += r.alpha[p];
            ckey_session_free(s);
            if (trace) trace_end(&ts);
        }
        printf("{\"device\":\"%s\",\"precision\":\"%s\",\"size\":%d,\"threads\":%d,\"refiner_band\":%d,"
               "\"encoder_chunks\":%d,\"c1_on_host\":%d,\"pos_streamed\":%d,\"qkv_streamed\":%d,\"decoder_band\":%d,\"from_map\":%d,\"norm1_from_map\":%d,\"input_rgb\":%d,\"reroll_in_place\":%d,\"encoder_band\":%d,\"out_in_input\":%d,\"c1_bands\":%d,\"x_on_host\":%d,\"out_on_host\":%d,\"planned_peak_mib\":%.1f,"
               "\"weights_mib\":%.1f,\"arena_mib\":%.1f,\"workspace_mib\":%.1f,\"encoder_mib\":%.1f,\"decoders_mib\":%.1f,"
               "\"refiner_mib\":%.1f,\"refiner_work\":%.2f",
               cuda ? "cuda" : "cpu", ckey_precision_name(o.precision), S, threads, sched[i].refiner_band,
               CK_MAX(1, sched[i].encoder_chunks), sched[i].c1_on_host, sched[i].pos_streamed, sched[i].qkv_streamed, sched[i].decoder_band,
               sched[i].transition_from_map, sched[i].norm1_from_map, sched[i].input_rgb, sched[i].reroll_in_place, sched[i].encoder_band, sched[i].out_in_input,
               sched[i].c1_bands, sched[i].x_on_host, sched[i].out_on_host,
               mp.peak_bytes / 1048576.0,
               mp.weight_bytes / 1048576.0, mp.arena_bytes / 1048576.0, mp.workspace_bytes / 1048576.0,
               mp.stage_bytes[0] / 1048576.0,
               mp.stage_bytes[1] / 1048576.0, mp.stage_bytes[2] / 1048576.0, mp.relative_work);
        if (!plan_only)
            printf(",\"runs\":%d,\"mean_s\":%.3f,\"rss_before_mib\":%.1f,\"peak_rss_mib\":%.1f,"
                   "\"alpha_mean\":%.6f", runs, mean, rss_before, bench_status_mib("VmHWM:"), chk / ((double)S * S));
        if (!plan_only && cuda && dev_before >= 0) /* outside the plan: measured less planned */
            printf(",\"peak_device_mib\":%.1f,\"outside_plan_mib\":%.1f", (dev_before - dev_low) / 1048576.0,
                   (dev_before - dev_low - mp.peak_bytes) / 1048576.0);
        printf("}\n");
        fflush(stdout);
    }
    free(x);
    ckey_model_free(m);
    return 0;
}
