/* Forward-pass benchmark: time per frame and peak RSS at a given S, on the
 * official checkpoint (--model) or the full-size synthetic weights.
 * Prints one JSON line per size. Not a test. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>

#include "benchutil.h"
#include "ckey_debug.h"
#include "model/greenformer.h"
#include "model/session.h"

static double peak_rss_mib(void) {
    struct rusage ru;
    getrusage(RUSAGE_SELF, &ru);
    return ru.ru_maxrss / 1024.0;
}

int main(int argc, char **argv) {
    ckey_process_init(); /* as the ckey program runs */
    bench_forward_args a = {.size = 512, .runs = 3, .precision = CKEY_PRECISION_DEFAULT};
    int cuda = 0, cuda_index = 0, profile = 0;
    uint32_t cuda_off = 0;
    const char *save_path = NULL;
    for (int i = 1; i < argc; i++) {
        if (bench_forward_arg(argc, argv, &i, &a)) continue;
        if (!strcmp(argv[i], "--profile")) profile = 1;
        else if (!strcmp(argv[i], "--cuda-off") && i + 1 < argc) {
            /* optimisations of the CUDA path to switch off, comma-separated (ckey_debug.h) */
            static const struct { const char *name; uint32_t bit; } offs[] = {
                {"wgmma", CKEY_DEBUG_CUDA_NO_WGMMA},         {"fused-fc1", CKEY_DEBUG_CUDA_NO_FUSED_FC1},
                {"fc1-tiles", CKEY_DEBUG_CUDA_FC1_PLAIN},     {"ln-fold", CKEY_DEBUG_CUDA_NO_LN_FOLD},
                {"conv-one-launch", CKEY_DEBUG_CUDA_NO_CONV_ONE_LAUNCH}, {"lt", CKEY_DEBUG_CUDA_NO_LT},
                {"graph", CKEY_DEBUG_CUDA_NO_GRAPH}};
            char list[256];
            snprintf(list, sizeof list, "%s", argv[++i]);
            for (char *tok = strtok(list, ","); tok; tok = strtok(NULL, ",")) {
                size_t k = 0;
                while (k < sizeof offs / sizeof offs[0] && strcmp(offs[k].name, tok)) k++;
                if (k == sizeof offs / sizeof offs[0]) {
                    fprintf(stderr, "bench: --cuda-off %s: expected wgmma, fused-fc1, fc1-tiles, ln-fold, "
                                    "conv-one-launch, lt or graph\n", tok);
                    return 2;
                }
                cuda_off |= offs[k].bit;
            }
        }
        else if (!strcmp(argv[i], "--save-model") && i + 1 < argc) save_path = argv[++i];
        else if (!strcmp(argv[i], "--device") && i + 1 < argc) {
            const char *d = argv[++i];
            if (!strncmp(d, "cuda", 4)) {
                cuda = 1;
                if (d[4] == ':') cuda_index = atoi(d + 5);
            } else if (strcmp(d, "cpu")) {
                fprintf(stderr, "bench: --device cpu|cuda[:N]\n");
                return 2;
            }
        }
        else {
            fprintf(stderr, "usage: %s [--size S] [--threads N] [--runs R] [--model M] [--device cpu|cuda[:N]] [--precision fp32|fp16|bf16] [--profile] [--cuda-off LIST] [--save-model OUT.safetensors]\n",
                    argv[0]);
            return 2;
        }
    }
    ckey_error err;
    ckey_model *m = NULL;
    const int S = a.size, threads = a.threads, runs = a.runs;
    double t0 = ck_now();
    ckey_status st = bench_model_open(&a, &m, &err);
    if (st) {
        fprintf(stderr, "bench: %s\n", err.message);
        return 1;
    }
    double t_load = ck_now() - t0;
    if (save_path) { /* --save-model: write the (synthetic) weights as a checkpoint for `ckey` and stop */
        st = ckey_model_save_safetensors(m, save_path, &err);
        if (st) fprintf(stderr, "bench: %s\n", err.message);
        ckey_model_free(m);
        return st ? 1 : 0;
    }
    ckey_session_options o;
    bench_session_options(&a, &o);
    if (cuda) {
        o.device = CKEY_DEVICE_CUDA;
        o.device_index = cuda_index;
    }
    /* device memory the session takes: cudaMemGetInfo before it (context
     * already up) and after the frames (the arena, weights and cuBLAS's
     * workspace are all allocated by then; nothing is freed per frame) */
    ckey_device_info di;
    int64_t free0 = 0;
    if (cuda && ckey_device_get_info(CKEY_DEVICE_CUDA, cuda_index, &di, NULL) == CKEY_OK) free0 = di.memory_free;
    ckey_session *s = NULL;
    t0 = ck_now();
    if (ckey_session_create_debug(m, &o, cuda_off, &s, &err)) {
        fprintf(stderr, "bench: %s\n", err.message);
        return 1;
    }
    double t_session = ck_now() - t0;
    float *x = malloc((size_t)4 * S * S * sizeof(float));
    ck_synth_input(S, x);
    /* --profile: time each op (on a GPU each op is synchronized, and the
     * pass runs eagerly instead of as a CUDA graph, so the total is slower) */
    double prof[CK_PROF_COUNT] = {0};
    if (profile) ck_session_set_profile(s, prof);
    ckey_forward_result r;
    double best = 1e30, sum = 0, dsum = 0;
    /* warm-up: the first frame (eager); on a GPU also the second, which
     * captures the pass into the CUDA graph that every later frame replays
     * (its device time includes the capture on the host), unless --profile
     * keeps the pass eager. The timed runs are the steady state. */
    const int warm = cuda && !profile ? 2 : 1;
    for (int i = 0; i < runs + warm; i++) {
        if (ckey_session_forward(s, x, &r, &err)) {
            fprintf(stderr, "bench: %s\n", err.message);
            return 1;
        }
        if (i < warm) {
            memset(prof, 0, sizeof prof);
            fprintf(stderr, "  warm-up %d: %.3f s (device %.4f s)\n", i + 1, r.seconds, r.device_seconds);
            continue;
        }
        sum += r.seconds;
        dsum += r.device_seconds;
        if (r.seconds < best) best = r.seconds;
        fprintf(stderr, "  run %d: %.3f s (device %.4f s)\n", i - warm + 1, r.seconds, r.device_seconds);
    }
    for (int k = 0; k < CK_PROF_COUNT && profile; k++)
        fprintf(stderr, "  %-22s %8.3f s/frame\n", ck_prof_names[k], runs ? prof[k] / runs : 0);
    double device_used_mib = 0;
    if (cuda && free0 && ckey_device_get_info(CKEY_DEVICE_CUDA, cuda_index, &di, NULL) == CKEY_OK)
        device_used_mib = (double)(free0 - di.memory_free) / 1048576.0;
    double chk = 0;
    for (int64_t i = 0; i < (int64_t)S * S; i++) chk += r.alpha[i];
    ckey_memory_plan mp;
    ckey_session_get_plan(s, &mp);
    printf("{\"impl\":\"ckey\",\"device\":\"%s\",\"precision\":\"%s\",\"size\":%d,\"threads\":%d,\"runs\":%d,\"profile\":%d,\"mean_s\":%.4f,\"best_s\":%.4f,\"device_mean_s\":%.5f,"
           "\"load_s\":%.3f,\"session_s\":%.3f,\"peak_rss_mib\":%.1f,\"planned_peak_mib\":%.1f,"
           "\"arena_mib\":%.1f,\"weights_mib\":%.1f,\"device_used_mib\":%.1f,\"alpha_mean\":%.6f}\n",
           cuda ? "cuda" : "cpu", ckey_precision_name(ckey_session_precision(s)), S, threads, runs, profile, runs ? sum / runs : 0, best, runs ? dsum / runs : 0, t_load, t_session, peak_rss_mib(),
           mp.peak_bytes / 1048576.0, mp.arena_bytes / 1048576.0, mp.weight_bytes / 1048576.0, device_used_mib,
           chk / ((double)S * S));
    free(x);
    ckey_session_free(s);
    ckey_model_free(m);
    return 0;
}
