/* What the benchmarks share (benchutil.h). */
#include "benchutil.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cpu/cpu.h"
#include "pixel/pixel.h"
#include "model/model.h"

float *bench_random_floats(size_t n, uint64_t seed, float lo, float hi) {
    float *p = malloc(n * sizeof(float));
    uint64_t s = seed * 0x9E3779B97F4A7C15ull + 1;
    for (size_t i = 0; p && i < n; i++) {
        s ^= s << 13, s ^= s >> 7, s ^= s << 17;
        p[i] = lo + (hi - lo) * (float)((s >> 40) * (1.0 / 16777216.0));
    }
    return p;
}

static float grain_value(uint64_t *rng) {
    float s = 0;
    for (int k = 0; k < 4; k++) {
        *rng ^= *rng << 13;
        *rng ^= *rng >> 7;
        *rng ^= *rng << 17;
        s += (float)(*rng >> 40) / 16777216.0f;
    }
    return (s - 2.0f) * 1.7320508f;
}

static float *grainy(const ckey_image *im, int W, int H, float grain) {
    const size_t n = (size_t)W * H;
    const int w2 = W / 2, h2 = H / 2;
    float *fg = malloc(3 * n * sizeof(float)), *up = malloc(3 * n * sizeof(float));
    float *nz = malloc(3 * (size_t)w2 * h2 * sizeof(float));
    float *scr = malloc(ck_resize_scratch_floats(3, im->height, im->width, H, W, CK_RESIZE_LANCZOS4) * sizeof(float));
    float *scr2 = malloc(ck_resize_scratch_floats(3, h2, w2, H, W, CK_RESIZE_LANCZOS4) * sizeof(float));
    if (fg && up && nz && scr && scr2) {
        ck_resize r;
        ck_resize_prepare(&r, 3, im->height, im->width, H, W, CK_RESIZE_LANCZOS4, scr);
        ck_resize_run(&r, im->data, fg);
        uint64_t rng = 88172645463325252ull;
        for (size_t i = 0; i < 3 * (size_t)w2 * h2; i++) nz[i] = grain_value(&rng) * grain;
        ck_resize_prepare(&r, 3, h2, w2, H, W, CK_RESIZE_LANCZOS4, scr2);
        ck_resize_run(&r, nz, up);
        for (size_t i = 0; i < 3 * n; i++) fg[i] += up[i];
    } else {
        free(fg), fg = NULL;
    }
    free(up), free(nz), free(scr), free(scr2);
    return fg;
}

float *bench_grainy_plate(const char *path, int W, int H, float grain) {
    ckey_image im;
    ckey_error err;
    if (ckey_image_read(path, CKEY_IMAGE_RGB, &im, &err) != CKEY_OK) {
        fprintf(stderr, "%s\n", err.message);
        return NULL;
    }
    float *fg = grainy(&im, W, H, grain);
    if (!fg) fprintf(stderr, "out of memory for a %d x %d plate\n", W, H);
    ckey_image_free(&im);
    return fg;
}

double bench_status_mib(const char *key) {
    FILE *f = fopen("/proc/self/status", "r");
    char line[256];
    double kib = -1;
    while (f && fgets(line, sizeof line, f))
        if (!strncmp(line, key, strlen(key))) kib = atof(line + strlen(key));
    if (f) fclose(f);
    return kib / 1024.0;
}

void bench_reset_peak_rss(void) {
    FILE *f = fopen("/proc/self/clear_refs", "w");
    if (f) fputs("5", f), fclose(f);
}

int bench_memory_read(ck_pool *pool, int64_t N, int64_t HW, int CK, int C, int top_k, int min_runs, double seconds,
                      bench_read_time *out) {
    float *mk = bench_random_floats((size_t)(N * CK), 1, -1, 1), *qk = bench_random_floats((size_t)(HW * CK), 2, -1, 1);
    float *ms = bench_random_floats((size_t)N, 3, 1, 2), *qe = bench_random_floats((size_t)(HW * CK), 4, 0, 1);
    float *mv = bench_random_floats((size_t)(N * C), 5, -1, 1), *o = malloc((size_t)(HW * C) * sizeof(float));
    ck_cpu be;
    memset(&be, 0, sizeof be);
    be.pool = pool;
    be.threads = ck_pool_size(pool);
    be.per_thread = ck_cpu_memory_read_floats(N, CK, top_k);
    be.scratch = malloc(be.per_thread * be.threads * sizeof(float));
    int rc = 1;
    if (mk && qk && ms && qe && mv && o && be.scratch) {
#define T(p) ck_tensor_of((void *)(p), CK_F32)
        double best = 1e30;
        const double t_all = ck_now();
        int runs = 0;
        do {
            const double t0 = ck_now();
            ck_cpu_ops.memory_read(&be.base, T(mk), T(ms), T(qk), T(qe), N, HW, CK, T(mv), C, top_k, T(o),
                                   ck_tensor_of(NULL, CK_F32));
            const double t = ck_now() - t0;
            best = t < best ? t : best;
            runs++;
        } while (runs < min_runs || ck_now() - t_all < seconds);
#undef T
        *out = (bench_read_time){.best_s = best, .runs = runs, .threads = be.threads, .scratch_floats = be.per_thread};
        rc = 0;
    }
    free(mk), free(qk), free(ms), free(qe), free(mv), free(o), free(be.scratch);
    return rc;
}

int bench_forward_arg(int argc, char **argv, int *i, bench_forward_args *a) {
    const char *k = argv[*i], *v = *i + 1 < argc ? argv[*i + 1] : NULL;
    if (!v) return 0;
    if (!strcmp(k, "--size")) a->size = atoi(v);
    else if (!strcmp(k, "--threads")) a->threads = atoi(v);
    else if (!strcmp(k, "--runs")) a->runs = atoi(v);
    else if (!strcmp(k, "--model")) a->model = v;
    else if (!strcmp(k, "--precision"))
        a->precision = !strcmp(v, "fp32") ? CKEY_PRECISION_FP32 : !strcmp(v, "fp16") ? CKEY_PRECISION_FP16
                     : !strcmp(v, "bf16") ? CKEY_PRECISION_BF16 : CKEY_PRECISION_DEFAULT;
    else return 0;
    ++*i;
    return 1;
}

ckey_status bench_model_open(const bench_forward_args *a, ckey_model **out, ckey_error *err) {
    if (a->model) return ckey_model_load(a->model, out, err);
    ck_config cfg;
    ck_config_default(&cfg);
    return ck_model_synthetic(&cfg, out, err);
}

void bench_session_options(const bench_forward_args *a, ckey_session_options *o) {
    ckey_session_options_default(o);
    o->size = a->size;
    o->threads = a->threads;
    o->precision = a->precision;
}
