/* What the benchmarks in bench/ share: inputs, timing and memory figures,
 * and the setup of the forward-pass benchmarks. Not part of libckey; linked
 * into every build/bench/ program. */
#ifndef CK_BENCHUTIL_H
#define CK_BENCHUTIL_H

#include <stddef.h>
#include <stdint.h>

#include "ckey.h"
#include "ckey_media.h"
#include "core/core.h"

static inline double bench_mib(double bytes) { return bytes / 1048576.0; }

/* n floats uniform in [lo, hi) from a xorshift generator seeded by seed
 * (the same values for the same seed on every machine), malloc'd; NULL
 * when out of memory. */
float *bench_random_floats(size_t n, uint64_t seed, float lo, float hi);

/* The RGB image at `path` resized to W x H (Lanczos4) plus grain: noise of
 * standard deviation `grain` (a fixed xorshift sequence, each value a sum of
 * four uniforms) drawn at half the size and resized up: a plate with detail
 * at every scale, as the codec benchmarks compress and decode. [3, H, W]
 * planes, malloc'd; NULL (the reason on stderr) when the image cannot be
 * read or memory runs out. */
float *bench_grainy_plate(const char *path, int W, int H, float grain);

/* A figure of /proc/self/status in MiB: "VmHWM:" (the peak RSS, since
 * the process started or the last bench_reset_peak_rss) or "VmRSS:";
 * -1/1024 when it cannot be read. */
double bench_status_mib(const char *key);

/* Start a new peak RSS at the current RSS (Linux: clear_refs 5). */
void bench_reset_peak_rss(void);

/* One memory read, ck_cpu_ops.memory_read, timed on the pool's threads:
 * N memory tokens of CK key channels and C value channels, HW queries,
 * top_k; random keys and values (the time does not depend on the data).
 * It runs until it has run at least min_runs times and `seconds` have
 * passed, and keeps the best time. */
typedef struct {
    double best_s;         /* the fastest run */
    int runs;              /* how many ran */
    int threads;           /* the pool's threads */
    size_t scratch_floats; /* the read's scratch per thread (ck_cpu_memory_read_floats) */
} bench_read_time;

/* 0, or 1 when out of memory (nothing printed). */
int bench_memory_read(ck_pool *pool, int64_t N, int64_t HW, int CK, int C, int top_k, int min_runs, double seconds,
                      bench_read_time *out);

/* The options bench-forward and bench-budget share: --size S,
 * --threads N, --runs R, --model M, --precision fp32|fp16|bf16 (another
 * word: the default precision). */
typedef struct {
    int size, threads, runs;
    const char *model; /* NULL: the full-size synthetic weights */
    ckey_precision precision;
} bench_forward_args;

/* If argv[*i] is one of the shared options (with its value), store it,
 * step *i past the value and return 1; else 0. */
int bench_forward_arg(int argc, char **argv, int *i, bench_forward_args *a);

/* The model of a.model: the checkpoint at that path, or the full-size
 * synthetic weights when it is NULL. */
ckey_status bench_model_open(const bench_forward_args *a, ckey_model **out, ckey_error *err);

/* Session options at a's size, threads and precision (the device left
 * at the default, the CPU). */
void bench_session_options(const bench_forward_args *a, ckey_session_options *o);

#endif
