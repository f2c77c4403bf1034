/* Cutie at the full cutie-base widths (not a test):
 *   build/bench/bench-cutie [--size 480p|1080p|2160p | --width W --height H]
 *       [--mem-frames N] [--mem-every N] [--measure N] [--objects N]
 *       [--threads N] [--checkpoint PATH] [--read-only] [--plan-only]
 *       [--profile] [--device cpu|cuda] [--precision fp32|tf32|fp16] [--pageable]
 * The step's frame and result buffers come from ckey_tracker_host_alloc
 * (page-locked on cuda), as `ckey track` and `ckey key --mask` hold them;
 * --pageable gives it malloc'd ones instead, whose upload and read-back the
 * driver stages.
 * --profile marks the last measured frame as the range a profiler started
 * with profiling off records (ncu --profile-from-start off ...).
 * --precision is ckey_track_options.precision (on cuda, tf32: the convs' GEMMs
 * on TF32 tensor cores, fp16: on fp16 inputs; the CPU runs fp32 whatever it is).
 * --device cuda runs the tracker on GPU 0 (ckey_track_options.device): each
 * step is timed between two cudaDeviceSynchronize calls, and it prints the
 * device memory the tracker holds at its peak (cudaMemGetInfo's free memory
 * before the tracker, less the least seen after each step); the read-alone
 * timing that follows is the CPU op's and is left out. 
 * The frame is processed at its own size (max_internal_size -1), so 480p,
 * 1080p and 2160p are internal sizes 854 x 480, 1920 x 1080, 3840 x 2160.
 * Defaults: 480p, 5 memory frames (max_mem_frames), mem_every 5 and
 * top_k 30 (the official eval defaults), 1 object, 5 measured frames,
 * every core. It runs the shot until the working memory holds its
 * mem-frames frames, then times --measure more frames (the whole step:
 * encode, memory read, decoder, and the mask encoder on memory frames) and
 * prints their frames per second and the process's peak RSS (weights
 * included). Then it times the memory read alone (the backend op, as the
 * tracker calls it) at the same N = mem-frames x h x w and HW = h x w,
 * one object's 256 value channels per object, and prints reads per second
 * and what the read works in (its scratch for those threads and its
 * output) beside the N x HW affinity that it never stores. Without a
 * checkpoint a child process writes synthetic cutie-base weights (every
 * tensor of the official state dict, random, at cutie-base's shapes) to a
 * temporary safetensors file, so that their making does not count in the
 * peak: the time does not depend on the weights. --read-only times the
 * read alone; --plan-only prints the planned memory and stops. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "benchutil.h"
#include "cpu/cpu.h"
#include "cuda/kernels.h"

#include "ckey_track.h"
#include "ckpt/checkpoint.h"
#include "core/core.h"

/* Names are short and fixed; the buffers hold them all. */
#pragma GCC diagnostic ignored "-Wformat-truncation"

typedef struct {
    ck_st_entry *e;
    char **names;
    int n, cap;
    uint64_t seed;
} sd;

static void put(sd *s, const char *name, int ndim, const int64_t *shape, float lo, float hi) {
    if (s->n == s->cap) {
        s->cap = s->cap ? 2 * s->cap : 512;
        s->e = realloc(s->e, (size_t)s->cap * sizeof *s->e);
        s->names = realloc(s->names, (size_t)s->cap * sizeof *s->names);
    }
    size_t n = 1;
    for (int i = 0; i < ndim; i++) n *= (size_t)shape[i];
    float *p = malloc(n * sizeof(float));
    for (size_t i = 0; i < n; i++) {
        s->seed ^= s->seed << 13, s->seed ^= s->seed >> 7, s->seed ^= s->seed << 17;
        p[i] = lo + (hi - lo) * (float)((s->seed >> 40) * (1.0 / 16777216.0));
    }
    ck_st_entry *e = &s->e[s->n];
    s->names[s->n] = strdup(name);
    e->name = s->names[s->n];
    e->ndim = ndim;
    memcpy(e->shape, shape, (size_t)ndim * sizeof *shape);
    e->data = p;
    s->n++;
}

/* weight [out, in, k, k] (k 0: a linear [out, in]) with variance 1/fan_in, and a bias */
static void conv(sd *s, const char *pre, int out, int in, int k, int bias) {
    char n[256];
    const float a = sqrtf(3.0f / (float)(in * (k ? k * k : 1)));
    const int64_t sh[4] = {out, in, k, k};
    snprintf(n, sizeof n, "%s.weight", pre);
    put(s, n, k ? 4 : 2, sh, -a, a);
    if (bias) {
        snprintf(n, sizeof n, "%s.bias", pre);
        put(s, n, 1, sh, -0.1f, 0.1f);
    }
}

static void bn(sd *s, const char *pre, int c) {
    char n[256];
    const int64_t sh[1] = {c};
    snprintf(n, sizeof n, "%s.weight", pre), put(s, n, 1, sh, 0.8f, 1.2f);
    snprintf(n, sizeof n, "%s.bias", pre), put(s, n, 1, sh, -0.1f, 0.1f);
    snprintf(n, sizeof n, "%s.running_mean", pre), put(s, n, 1, sh, -0.1f, 0.1f);
    snprintf(n, sizeof n, "%s.running_var", pre), put(s, n, 1, sh, 0.9f, 1.1f);
}

static void resnet(sd *s, const char *pre, const char *const st[3], int cin, int bottleneck, const int nb[3]) {
    char p[256], q[300];
    snprintf(p, sizeof p, "%s.conv1", pre), conv(s, p, 64, cin, 7, 0);
    snprintf(p, sizeof p, "%s.bn1", pre), bn(s, p, 64);
    int in = 64;
    for (int i = 0; i < 3; i++) {
        const int planes = 64 << i, out = bottleneck ? 4 * planes : planes;
        for (int b = 0; b < nb[i]; b++) {
            snprintf(p, sizeof p, "%s.%s.%d", pre, st[i], b);
            snprintf(q, sizeof q, "%s.conv1", p), conv(s, q, planes, in, bottleneck ? 1 : 3, 0);
            snprintf(q, sizeof q, "%s.bn1", p), bn(s, q, planes);
            snprintf(q, sizeof q, "%s.conv2", p), conv(s, q, planes, planes, 3, 0);
            snprintf(q, sizeof q, "%s.bn2", p), bn(s, q, planes);
            if (bottleneck) {
                snprintf(q, sizeof q, "%s.conv3", p), conv(s, q, out, planes, 1, 0);
                snprintf(q, sizeof q, "%s.bn3", p), bn(s, q, out);
            }
            if (b == 0 && (i > 0 || in != out)) {
                snprintf(q, sizeof q, "%s.downsample.0", p), conv(s, q, out, in, 1, 0);
                snprintf(q, sizeof q, "%s.downsample.1", p), bn(s, q, out);
            }
            in = out;
        }
    }
}

static void cares(sd *s, const char *pre, int c) {
    char q[256];
    const int64_t g[3] = {1, 1, 5};
    snprintf(q, sizeof q, "%s.conv1", pre), conv(s, q, c, c, 3, 1);
    snprintf(q, sizeof q, "%s.conv2", pre), conv(s, q, c, c, 3, 1);
    snprintf(q, sizeof q, "%s.conv.weight", pre), put(s, q, 3, g, -0.5f, 0.5f);
}

static void fuser(sd *s, const char *pre, int x, int g, int out) {
    char q[256];
    snprintf(q, sizeof q, "%s.distributor.x_transform", pre), conv(s, q, out, x, 1, 1);
    snprintf(q, sizeof q, "%s.distributor.g_transform", pre), conv(s, q, out, g, 1, 1);
    snprintf(q, sizeof q, "%s.block1", pre), cares(s, q, out);
    snprintf(q, sizeof q, "%s.block2", pre), cares(s, q, out);
}

static void mha(sd *s, const char *pre, int E) {
    char q[256];
    const int64_t w[2] = {3 * E, E};
    snprintf(q, sizeof q, "%s.in_proj_weight", pre), put(s, q, 2, w, -sqrtf(3.0f / E), sqrtf(3.0f / E));
    snprintf(q, sizeof q, "%s.in_proj_bias", pre), put(s, q, 1, w, -0.1f, 0.1f);
    snprintf(q, sizeof q, "%s.out_proj", pre), conv(s, q, E, E, 0, 1);
}

static void ln(sd *s, const char *pre, int E) {
    char q[256];
    const int64_t sh[1] = {E};
    snprintf(q, sizeof q, "%s.weight", pre), put(s, q, 1, sh, 0.8f, 1.2f);
    snprintf(q, sizeof q, "%s.bias", pre), put(s, q, 1, sh, -0.1f, 0.1f);
}

static void cutie_base(sd *s) {
    static const char *const ps[3] = {"res2", "layer2", "layer3"}, *const ms[3] = {"layer1", "layer2", "layer3"};
    static const int r50[3] = {3, 4, 6}, r18[3] = {2, 2, 2};
    const int E = 256, Q = 16;
    resnet(s, "pixel_encoder", ps, 3, 1, r50);
    conv(s, "pix_feat_proj", 256, 1024, 1, 1);
    conv(s, "key_proj.pix_feat_proj", 256, 1024, 1, 1);
    conv(s, "key_proj.key_proj", 64, 256, 3, 1);
    conv(s, "key_proj.d_proj", 1, 256, 3, 1);
    conv(s, "key_proj.e_proj", 64, 256, 3, 1);
    resnet(s, "mask_encoder", ms, 5, 0, r18);
    fuser(s, "mask_encoder.fuser", 256, 256, 256);
    conv(s, "mask_encoder.sensory_update.transform", 768, 512, 3, 1);
    fuser(s, "pixel_fuser.fuser", 256, 256, E);
    conv(s, "pixel_fuser.sensory_compress", 256, 258, 1, 1);
    conv(s, "object_summarizer.input_proj", E, 256, 0, 1);
    conv(s, "object_summarizer.feature_pred.0", E, E, 0, 1);
    conv(s, "object_summarizer.feature_pred.2", E, E, 0, 1);
    conv(s, "object_summarizer.weights_pred.0", E, E, 0, 1);
    conv(s, "object_summarizer.weights_pred.2", Q, E, 0, 1);
    const int64_t qe[2] = {Q, E};
    put(s, "object_transformer.query_init.weight", 2, qe, -1, 1);
    put(s, "object_transformer.query_emb.weight", 2, qe, -1, 1);
    conv(s, "object_transformer.summary_to_query_init", E, E, 0, 1);
    conv(s, "object_transformer.summary_to_query_emb", E, E, 0, 1);
    conv(s, "object_transformer.pixel_init_proj", E, E, 1, 1);
    conv(s, "object_transformer.pixel_emb_proj", E, E, 1, 1);
    for (int b = 0; b < 3; b++) {
        char p[128], q[192];
        snprintf(p, sizeof p, "object_transformer.blocks.%d", b);
        snprintf(q, sizeof q, "%s.read_from_pixel.cross_attn", p), mha(s, q, E);
        snprintf(q, sizeof q, "%s.read_from_pixel.norm", p), ln(s, q, E);
        snprintf(q, sizeof q, "%s.self_attn.self_attn", p), mha(s, q, E);
        snprintf(q, sizeof q, "%s.self_attn.norm", p), ln(s, q, E);
        snprintf(q, sizeof q, "%s.ffn.linear1", p), conv(s, q, 2048, E, 0, 1);
        snprintf(q, sizeof q, "%s.ffn.linear2", p), conv(s, q, E, 2048, 0, 1);
        snprintf(q, sizeof q, "%s.ffn.norm", p), ln(s, q, E);
        snprintf(q, sizeof q, "%s.read_from_query.cross_attn", p), mha(s, q, E);
        snprintf(q, sizeof q, "%s.pixel_ffn.conv", p), cares(s, q, E);
    }
    for (int i = 0; i < 4; i++) {
        char q[96];
        snprintf(q, sizeof q, "object_transformer.mask_pred.%d.1", i), conv(s, q, 1, E, 1, 1);
    }
    conv(s, "mask_decoder.decoder_feat_proc.transforms.0", 256, 512, 1, 1);
    conv(s, "mask_decoder.decoder_feat_proc.transforms.1", 128, 256, 1, 1);
    conv(s, "mask_decoder.up_16_8.out_conv.conv1", 128, 256, 3, 1);
    conv(s, "mask_decoder.up_16_8.out_conv.conv2", 128, 128, 3, 1);
    conv(s, "mask_decoder.up_16_8.out_conv.downsample", 128, 256, 1, 1);
    conv(s, "mask_decoder.up_8_4.out_conv.conv1", 128, 128, 3, 1);
    conv(s, "mask_decoder.up_8_4.out_conv.conv2", 128, 128, 3, 1);
    conv(s, "mask_decoder.pred", 1, 128, 3, 1);
    conv(s, "mask_decoder.sensory_update.g16_conv", 256, 256, 1, 1);
    conv(s, "mask_decoder.sensory_update.g8_conv", 256, 128, 1, 1);
    conv(s, "mask_decoder.sensory_update.g4_conv", 256, 129, 1, 1);
    conv(s, "mask_decoder.sensory_update.transform", 768, 512, 3, 1);
}

/* The memory read alone at the tracker's shapes: best time of the runs in
 * about two seconds (at least 3). */
static int read_alone(int threads, int64_t hw, int64_t N, int objects, int top_k) {
    const int CK = 64, C = 256 * objects;
    ck_pool *pool = NULL;
    if (ck_pool_create(threads, &pool, NULL) != CKEY_OK) return 1;
    bench_read_time r;
    const int rc = bench_memory_read(pool, N, hw, CK, C, top_k, 3, 2.0, &r);
    ck_pool_free(pool);
    if (rc) {
        fprintf(stderr, "bench-cutie: out of memory for the read alone\n");
        return 1;
    }
    const double scratch = 4.0 * (double)r.scratch_floats * r.threads, out = 4.0 * (double)hw * C;
    printf("read alone: N %lld x HW %lld, %d threads: %.1f ms (best of %d), %.2f reads/s; works in %.2f MiB (scratch "
           "%.2f + out %.2f), reads %.1f MiB of memory; the N x HW affinity would be %.1f MiB\n",
           (long long)N, (long long)hw, r.threads, r.best_s * 1e3, r.runs, 1.0 / r.best_s, bench_mib(scratch + out),
           bench_mib(scratch), bench_mib(out), bench_mib(4.0 * (double)N * (CK + 1 + C)),
           bench_mib(4.0 * (double)N * (double)hw));
    return 0;
}

static int usage_exit(void) {
    fprintf(stderr, "usage: bench-cutie [--size 480p|1080p|2160p | --width W --height H] [--mem-frames N] "
                    "[--mem-every N] [--measure N] [--objects N] [--threads N] [--checkpoint PATH] [--read-only] [--plan-only] "
                    "[--profile] [--device cpu|cuda] [--precision fp32|tf32|fp16] [--pageable]\n");
    return 2;
}

int main(int argc, char **argv) {
    ckey_process_init(); /* as the ckey program runs */
    int W = 854, H = 480, mem_frames = 5, mem_every = 5, measure = 5, objects = 1, threads = 0, profile = 0;
    const char *ckpt = NULL;
    int read_only = 0, cuda = 0, plan_only = 0, pageable = 0;
    int32_t precision = CKEY_PRECISION_FP32;
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i], *v = i + 1 < argc ? argv[i + 1] : NULL;
        if (!strcmp(a, "--read-only")) {
            read_only = 1;
            continue;
        }
        if (!strcmp(a, "--profile")) {
            profile = 1;
            continue;
        }
        if (!strcmp(a, "--plan-only")) {
            plan_only = 1;
            continue;
        }
        if (!strcmp(a, "--pageable")) {
            pageable = 1;
            continue;
        }
        if (!v) return usage_exit();
        i++;
        if (!strcmp(a, "--size")) {
            if (!strcmp(v, "480p")) W = 854, H = 480;
            else if (!strcmp(v, "1080p")) W = 1920, H = 1080;
            else if (!strcmp(v, "2160p")) W = 3840, H = 2160;
            else return usage_exit();
        } else if (!strcmp(a, "--width")) W = atoi(v);
        else if (!strcmp(a, "--height")) H = atoi(v);
        else if (!strcmp(a, "--mem-frames")) mem_frames = atoi(v);
        else if (!strcmp(a, "--mem-every")) mem_every = atoi(v);
        else if (!strcmp(a, "--measure")) measure = atoi(v);
        else if (!strcmp(a, "--objects")) objects = atoi(v);
        else if (!strcmp(a, "--threads")) threads = atoi(v);
        else if (!strcmp(a, "--checkpoint")) ckpt = v;
        else if (!strcmp(a, "--device") && (!strcmp(v, "cpu") || !strcmp(v, "cuda"))) cuda = !strcmp(v, "cuda");
        else if (!strcmp(a, "--precision") && !strcmp(v, "fp32")) precision = CKEY_PRECISION_FP32;
        else if (!strcmp(a, "--precision") && !strcmp(v, "tf32")) precision = CKEY_PRECISION_TF32;
        else if (!strcmp(a, "--precision") && !strcmp(v, "fp16")) precision = CKEY_PRECISION_FP16;
        else return usage_exit();
    }
    if (W < 16 || H < 16 || mem_frames < 1 || mem_every < 1 || measure < 1 || objects < 1 || objects > 255 || threads < 0)
        return usage_exit();
    const int64_t hw = (int64_t)((H + 15) / 16) * ((W + 15) / 16);
    if (read_only) {
        ck_gemm_init();
        return read_alone(threads, hw, (int64_t)mem_frames * hw, objects, 30);
    }
    char path[256];
    ckey_error err;
    if (ckpt) {
        snprintf(path, sizeof path, "%s", ckpt);
    } else {
        snprintf(path, sizeof path, "/tmp/ckey-bench-cutie-%d.safetensors", (int)getpid());
        fflush(stdout);
        const pid_t child = fork();
        if (child == 0) {
            sd s = {.seed = 88172645463325252ull};
            cutie_base(&s);
            ckey_error e;
            if (ck_safetensors_write(path, s.e, (size_t)s.n, NULL, &e)) {
                fprintf(stderr, "bench-cutie: %s\n", e.message);
                _exit(1);
            }
            _exit(0);
        }
        int wst = 0;
        if (child < 0 || waitpid(child, &wst, 0) != child || !WIFEXITED(wst) || WEXITSTATUS(wst)) return 1;
    }
    double t0 = ck_now();
    ckey_track_model *m;
    ckey_track_model_options mo = {0};
    if (ckey_track_model_open(path, &mo, &m, &err)) {
        fprintf(stderr, "bench-cutie: %s\n", err.message);
        return 1;
    }
    if (!ckpt) remove(path);
    printf("cutie: %s, loaded in %.2f s, peak RSS %.1f MiB after loading\n", ckpt ? path : "synthetic cutie-base weights",
           ck_now() - t0, bench_status_mib("VmHWM:"));
    ckey_track_options o;
    ckey_track_options_default(&o);
    o.threads = threads;
    o.max_objects = objects;
    o.mem_every = mem_every;
    o.max_mem_frames = mem_frames;
    o.device = cuda ? CKEY_DEVICE_CUDA : CKEY_DEVICE_CPU;
    o.precision = precision;
    /* device memory: free before the tracker, the least free after any step */
    ckey_device_info dinfo;
    int64_t free0 = 0, free_min = 0;
    if (cuda) {
        if (ckey_device_get_info(CKEY_DEVICE_CUDA, 0, &dinfo, &err)) {
            fprintf(stderr, "bench-cutie: %s\n", err.message);
            return 1;
        }
        free0 = free_min = dinfo.memory_free;
    }
    ckey_track_memory plan;
    if (ckey_track_plan_memory(m, W, H, &o, &plan, &err)) {
        fprintf(stderr, "bench-cutie: %s\n", err.message);
        return 1;
    }
    printf("planned: %.1f MiB (weights %.1f, memory bank %.1f, sensory %.1f, frame %.1f, arena %.1f, "
           "workspace %.1f)\n", plan.total_bytes / 1048576.0, plan.weight_bytes / 1048576.0,
           plan.bank_bytes / 1048576.0, plan.sensory_bytes / 1048576.0, plan.frame_bytes / 1048576.0,
           plan.arena_bytes / 1048576.0, plan.workspace_bytes / 1048576.0);
    if (cuda)
        printf("planned on the device: %.1f MiB; host: %.1f MiB (model %.1f, staging %.1f)\n",
               (plan.total_bytes - plan.host_bytes) / 1048576.0, plan.host_bytes / 1048576.0,
               plan.model_bytes / 1048576.0, plan.staging_bytes / 1048576.0);
    if (plan_only) {
        ckey_track_model_free(m);
        return 0;
    }
    ckey_tracker *t;
    if (ckey_tracker_create(m, W, H, &o, &t, &err)) {
        fprintf(stderr, "bench-cutie: %s\n", err.message);
        return 1;
    }
    /* frames until the working memory holds mem_frames frames (FIFO), then the measured ones */
    const int fill = (mem_frames - 1) * mem_every + 1, frames = fill + measure;
    const size_t rgb_bytes = (size_t)W * H * 3 * sizeof(float), prob_bytes = (size_t)(objects + 1) * W * H * sizeof(float);
    float *rgb = NULL, *prob = NULL;
    if (pageable) {
        rgb = malloc(rgb_bytes), prob = malloc(prob_bytes);
    } else {
        rgb = ckey_tracker_host_alloc(t, rgb_bytes), prob = ckey_tracker_host_alloc(t, prob_bytes);
    }
    if (!rgb || !prob) {
        fprintf(stderr, "bench-cutie: out of memory for the frame and result buffers\n");
        return 1;
    }
    uint8_t *lab = malloc((size_t)W * H), ids[255];
    for (int i = 0; i < objects; i++) ids[i] = (uint8_t)(i + 1);
    for (int y = 0; y < H; y++)
        for (int x = 0; x < W; x++) lab[(size_t)y * W + x] = (uint8_t)((x * (objects + 1)) / W);
    double total = 0;
    for (int f = 0; f < frames; f++) {
        for (size_t i = 0; i < (size_t)W * H * 3; i++) rgb[i] = (float)((i * 2654435761u + (size_t)f * 97) % 255) / 255.0f;
        if (cuda) ck_cuda_sync(NULL);
        if (cuda && profile && f == frames - 1) ck_cuda_profile(1);
        const double a = ck_now();
        if (ckey_tracker_step(t, rgb, f ? NULL : lab, f ? 0 : objects, ids, prob, &err)) {
            fprintf(stderr, "bench-cutie: frame %d: %s\n", f, err.message);
            return 1;
        }
        if (cuda) ck_cuda_sync(NULL);
        const double dt = ck_now() - a;
        if (cuda && profile && f == frames - 1) ck_cuda_profile(0);
        if (cuda && ckey_device_get_info(CKEY_DEVICE_CUDA, 0, &dinfo, NULL) == CKEY_OK)
            free_min = CK_MIN(free_min, dinfo.memory_free);
        if (f >= fill) total += dt;
        printf("frame %3d  %8.1f ms  memory %lld tokens (%lld frames)%s\n", f, dt * 1e3,
               (long long)ckey_tracker_memory_tokens(t), (long long)(ckey_tracker_memory_tokens(t) / hw),
               f >= fill ? "  measured" : "");
        fflush(stdout);
    }
    const int64_t N = ckey_tracker_memory_tokens(t);
    printf("whole step%s%s%s: %d x %d, %d object(s), %d threads, %lld memory tokens (%d frames): %.1f ms a frame over %d "
           "frames, %.3f frames/s; peak RSS %.1f MiB",
           cuda ? " on cuda:0 at " : "", cuda ? ckey_precision_name((ckey_precision)precision) : "",
           cuda && pageable ? ", pageable frame and result" : "", W, H, objects,
           threads, (long long)N, mem_frames, total / measure * 1e3, measure, measure / total, bench_status_mib("VmHWM:"));
    if (cuda) printf("; device memory %.1f MiB at the peak", (double)(free0 - free_min) / 1048576.0);
    printf("\n");
    if (pageable)
        free(rgb), free(prob);
    else
        ckey_tracker_host_free(t, rgb), ckey_tracker_host_free(t, prob);
    free(lab);
    ckey_tracker_free(t);
    ckey_track_model_free(m);
    fflush(stdout);
    if (cuda) return 0;
    ck_gemm_init();
    return read_alone(threads, hw, (int64_t)mem_frames * hw, objects, 30);
}
