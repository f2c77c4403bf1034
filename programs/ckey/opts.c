/* Option parsing shared by the ckey commands (opts.h). */
#include "ckey_clip.h"
#include "ckey_track.h"
#include "opts.h"

#include <errno.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define LEN(a) (sizeof(a) / sizeof((a)[0]))

int usage_error(const char *cmd, const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    fprintf(stderr, "ckey%s%s: ", cmd ? " " : "", cmd ? cmd : "");
    vfprintf(stderr, fmt, ap);
    va_end(ap);
    fprintf(stderr, "\nTry 'ckey %s%s--help' for more information.\n", cmd ? cmd : "",
            cmd ? " " : "");
    return EXIT_USAGE;
}

int require(const opts *o, const char *value, const char *name) {
    if (value) return 1;
    usage_error(o->cmd, "missing %s", name);
    return 0;
}

/* The first CUDA GPU when one is usable, else the CPU. */
static void default_device(ckey_session_options *so) {
    so->device = ckey_device_count(CKEY_DEVICE_CUDA) > 0 ? CKEY_DEVICE_CUDA : CKEY_DEVICE_CPU;
    so->device_index = 0;
}

void opts_init(opts *o, const char *cmd) {
    memset(o, 0, sizeof *o);
    o->cmd = cmd;
    o->gpus = -1;
    o->track_size = -1;
    o->track_device = TRACK_DEVICE_UNSET;
}

void opts_init_session(opts *o, const char *cmd) {
    opts_init(o, cmd);
    ckey_session_options_default(&o->so);
    default_device(&o->so);
}

/* ------------------------------------------------------------ values */

static int parse_int(const char *s, long lo, long hi, long *out) {
    char *end;
    errno = 0;
    long v = strtol(s, &end, 10);
    if (errno || end == s || *end || v < lo || v > hi) return 0;
    *out = v;
    return 1;
}

/* "123", "800M", "1.5G", "64k": bytes, binary multiples. */
static int parse_bytes(const char *s, int64_t *out) {
    char *end;
    errno = 0;
    double v = strtod(s, &end);
    if (errno || end == s || !(v >= 0) || !isfinite(v)) return 0;
    double mult = 1;
    if (*end) {
        switch (*end) {
        case 'k': case 'K': mult = 1024.0; break;
        case 'm': case 'M': mult = 1024.0 * 1024; break;
        case 'g': case 'G': mult = 1024.0 * 1024 * 1024; break;
        default: return 0;
        }
        end++;
        if (*end == 'i') end++;         /* "MiB" */
        if (*end == 'B' || *end == 'b') end++;
        if (*end) return 0;
    }
    v *= mult;
    if (v > 9.0e18) return 0;
    *out = (int64_t)v;
    return 1;
}

/* One device: auto, cpu, cuda or cuda:N. */
static int parse_device(const char *s, ckey_session_options *so) {
    if (!strcmp(s, "auto")) {
        default_device(so);
        return 1;
    }
    if (!strcmp(s, "cpu")) {
        so->device = CKEY_DEVICE_CPU;
        return 1;
    }
    if (!strncmp(s, "cuda", 4)) {
        long idx = 0;
        if (s[4] == ':' && !parse_int(s + 5, 0, 255, &idx)) return 0;
        if (s[4] && s[4] != ':') return 0;
        so->device = CKEY_DEVICE_CUDA;
        so->device_index = (int32_t)idx;
        return 1;
    }
    return 0;
}

/*
 * --device: one device (into o->so), or with `list_ok` a comma-separated list
 * of them where cuda:all stands for every CUDA device (into o->devices, the
 * first also into o->so). cuda:all on a machine without one is cuda:0, so
 * that the session reports the missing device as --device cuda does. 0 on a
 * bad value.
 */
static int parse_devices(const char *s, int list_ok, opts *o) {
    o->ndevices = 0;
    if (!strchr(s, ',') && strcmp(s, "cuda:all")) return parse_device(s, &o->so);
    if (!list_ok) return 0;
    char item[64];
    for (const char *p = s;;) {
        const size_t len = strcspn(p, ",");
        if (len == 0 || len >= sizeof item) return 0;
        memcpy(item, p, len);
        item[len] = 0;
        ckey_session_options so = o->so;
        if (!strcmp(item, "cuda:all")) {
            const int32_t n = ckey_device_count(CKEY_DEVICE_CUDA);
            for (int32_t k = 0; k < (n > 0 ? n : 1); k++) {
                if (o->ndevices >= CKEY_SHOT_MAX_SESSIONS) return 0;
                o->devices[o->ndevices].kind = CKEY_DEVICE_CUDA;
                o->devices[o->ndevices++].index = k;
            }
        } else {
            if (!parse_device(item, &so) || o->ndevices >= CKEY_SHOT_MAX_SESSIONS) return 0;
            o->devices[o->ndevices].kind = so.device;
            o->devices[o->ndevices++].index = so.device == CKEY_DEVICE_CUDA ? so.device_index : 0;
        }
        p += len;
        if (!*p) break;
        p++;
    }
    o->so.device = o->devices[0].kind;
    o->so.device_index = o->devices[0].index;
    if (o->ndevices == 1) o->ndevices = 0; /* one device after all (cuda:all on one GPU) */
    return 1;
}

/*
 * A frame rate: "N/D", an integer, or a decimal; the NTSC rates written as
 * decimals (23.976, 29.97, 47.952, 59.94, 119.88) become N*1000/1001, others
 * are kept to 1/1000. Between 1 and 1000 fps.
 */
static int parse_fps(const char *s, int32_t *num, int32_t *den) {
    char *end;
    errno = 0;
    if (strchr(s, '/')) {
        long n = strtol(s, &end, 10);
        if (errno || end == s || *end != '/') return 0;
        const char *d0 = end + 1;
        long d = strtol(d0, &end, 10);
        if (errno || end == d0 || *end || n < 1 || d < 1 || n > 1000000 || d > 1000000) return 0;
        if ((double)n / (double)d < 1.0 || (double)n / (double)d > 1000.0) return 0;
        *num = (int32_t)n, *den = (int32_t)d;
        return 1;
    }
    const double v = strtod(s, &end);
    if (errno || end == s || *end || !(v >= 1.0 && v <= 1000.0)) return 0;
    if (v == floor(v)) {
        *num = (int32_t)v, *den = 1;
        return 1;
    }
    const double ntsc = v * 1.001;
    if (fabs(ntsc - floor(ntsc + 0.5)) < 0.002 && fabs(v - floor(ntsc + 0.5) / 1.001) < 0.0011) {
        *num = (int32_t)(floor(ntsc + 0.5) * 1000), *den = 1001;
        return 1;
    }
    long n = (long)floor(v * 1000.0 + 0.5), d = 1000;
    long a = n, b = d; /* reduce by the gcd */
    while (b) {
        const long t = a % b;
        a = b, b = t;
    }
    n /= a, d /= a;
    *num = (int32_t)n, *den = (int32_t)d;
    return 1;
}

/* "WxH" (or "W x H" as one argument, X too): a plate size within the image caps. */
static int parse_plate_size(const char *s, int32_t *w, int32_t *h) {
    char *end;
    errno = 0;
    const long a = strtol(s, &end, 10);
    if (errno || end == s) return 0;
    while (*end == ' ') end++;
    if (*end != 'x' && *end != 'X') return 0;
    const char *b0 = end + 1;
    const long b = strtol(b0, &end, 10);
    if (errno || end == b0 || *end) return 0;
    if (a < 1 || b < 1 || a > CKEY_IMAGE_MAX_SIDE || b > CKEY_IMAGE_MAX_SIDE ||
        (int64_t)a * b > CKEY_IMAGE_MAX_PIXELS)
        return 0;
    *w = (int32_t)a, *h = (int32_t)b;
    return 1;
}

/* "A-B" (inclusive, A <= B) or "N". */
static int parse_frames(const char *s, long *first, long *last) {
    const char *dash = strchr(s, '-');
    char buf[64];
    long fa, fb;
    int ok;
    if (dash && (size_t)(dash - s) < sizeof buf) {
        memcpy(buf, s, (size_t)(dash - s));
        buf[dash - s] = 0;
        ok = parse_int(buf, 0, 999999999L, &fa) && parse_int(dash + 1, 0, 999999999L, &fb);
    } else {
        ok = !dash && parse_int(s, 0, 999999999L, &fa);
        fb = ok ? fa : 0;
    }
    if (!ok || fa > fb) return 0;
    *first = fa;
    *last = fb;
    return 1;
}

/* ----------------------------------------------------------- options */

static const struct {
    const char *name;
    uint64_t flag;
    int takes_value;
} option_table[] = {
    {"--model", O_MODEL, 1},     {"--image", O_IMAGE, 1},   {"--hint", O_HINT, 1},
    {"--out", O_OUT, 1},         {"--size", O_SIZE, 1},     {"--threads", O_THREADS, 1},
    {"--refiner-strength", O_STRENGTH, 1}, {"--linear", O_LINEAR, 0},
    {"--device", O_DEVICE, 1},   {"--budget", O_BUDGET, 1}, {"--json", O_JSON, 0},
    {"--memory", O_MEMORY, 0},   {"--plate", O_PLATE, 1},   {"--despill", O_DESPILL, 1},
    {"--no-despeckle", O_NO_DESPECKLE, 0}, {"--despeckle-area", O_DESPECKLE_AREA, 1},
    {"--frames", O_FRAMES, 1},   {"--dry-run", O_DRY_RUN, 0}, {"--force", O_FORCE, 0},
    {"--exr-compression", O_EXR_COMPRESSION, 1}, {"--input-space", O_INPUT_SPACE, 1},
    {"--on-error", O_ON_ERROR, 1}, {"--read-ahead", O_READ_AHEAD, 1},
    {"--resize-back", O_RESIZE_BACK, 1}, {"--despeckle-mode", O_DESPECKLE_MODE, 1},
    {"--precision", O_PRECISION, 1}, {"--video-out", O_VIDEO_OUT, 1}, {"--verbose", O_VERBOSE, 0},
    {"--fps", O_FPS, 1},         {"--writers", O_WRITERS, 1}, {"--empty-ok", O_EMPTY_OK, 0},
    {"--chunk", O_CHUNK, 1},     {"--chunks", O_CHUNKS, 1}, {"--gpus", O_GPUS, 1},
    {"--partition", O_PARTITION, 1}, {"--sbatch", O_SBATCH, 1}, {"--ckey", O_CKEY, 1},
    {"--submit", O_SUBMIT, 0},   {"--logs", O_LOGS, 1},     {"--max-running", O_MAX_RUNNING, 1},
    {"--cpus", O_CPUS, 1},
    {"--plate-size", O_PLATE_SIZE, 1}, {"--for", O_FOR, 1},
    {"--readers", O_READERS, 1}, {"--exr-level", O_EXR_LEVEL, 1}, {"--comp-png", O_COMP_PNG, 1},
    {"--mask", O_MASK, 1},       {"--mask-at", O_MASK_AT, 1}, {"--object", O_OBJECT, 1},
    {"--track-model", O_TRACK_MODEL, 1}, {"--hint-format", O_HINT_FORMAT, 1},
    {"--track-size", O_TRACK_SIZE, 1}, {"--track-device", O_TRACK_DEVICE, 1},
    {"--track-precision", O_TRACK_PRECISION, 1},
    {"--frame-path", O_FRAME_PATH, 1}, {"--device-frames", O_DEVICE_FRAMES, 1},
};

/* "0-4,7,9-10": task indices for --chunks (a Slurm --array list, no step). */
static int valid_index_list(const char *s) {
    for (const char *p = s;;) {
        const size_t len = strcspn(p, ",");
        char item[32];
        if (len == 0 || len >= sizeof item) return 0;
        memcpy(item, p, len);
        item[len] = 0;
        long a, b;
        const char *dash = strchr(item, '-');
        if (dash) {
            char first[32];
            memcpy(first, item, (size_t)(dash - item));
            first[dash - item] = 0;
            if (!parse_int(first, 0, 9999999, &a) || !parse_int(dash + 1, 0, 9999999, &b) || a > b)
                return 0;
        } else if (!parse_int(item, 0, 9999999, &a)) {
            return 0;
        }
        p += len;
        if (!*p) return 1;
        p++;
    }
}

static int parse_float(const char *s, float *out) {
    char *end;
    errno = 0;
    const float f = strtof(s, &end);
    if (errno || end == s || *end) return 0;
    *out = f;
    return 1;
}

/* Store option `flag`'s value `val` (NULL for a flag without one) in `o`;
 * CONTINUE, or EXIT_USAGE after a message naming the bad value. */
static int set_option(opts *o, uint64_t flag, uint64_t allowed, const char *val) {
    long n;
    float f;
    switch (flag) {
    case O_MODEL: o->model = val; break;
    case O_IMAGE: o->image = val; break;
    case O_HINT: o->hint = val; break;
    case O_OUT: o->out = val; break;
    case O_PLATE: o->plate = val; break;
    case O_JSON: o->json = 1; break;
    case O_MEMORY: o->memory = 1; break;
    case O_DRY_RUN: o->dry_run = 1; break;
    case O_FORCE: o->force = 1; break;
    case O_VERBOSE: o->verbose++; break;
    case O_SIZE:
        if (!parse_int(val, 1, 16384, &n))
            return usage_error(o->cmd, "--size '%s' is not a size between 32 and 16384", val);
        if (n % 32)
            return usage_error(o->cmd, "--size %ld is not a multiple of 32 (the network "
                                       "downsamples by 32)", n);
        o->so.size = (int32_t)n;
        o->have_size = 1;
        break;
    case O_THREADS:
        if (!parse_int(val, 0, 4096, &n))
            return usage_error(o->cmd, "--threads '%s' is not a count between 0 and 4096", val);
        o->so.threads = (int32_t)n;
        break;
    case O_STRENGTH:
        if (!parse_float(val, &f) || !isfinite(f))
            return usage_error(o->cmd, "--refiner-strength '%s' is not a number", val);
        o->so.refiner_strength = f;
        break;
    case O_LINEAR: o->space = CKEY_INPUT_LINEAR; break;
    case O_INPUT_SPACE:
        if (!strcmp(val, "auto")) o->space = CKEY_INPUT_AUTO;
        else if (!strcmp(val, "srgb")) o->space = CKEY_INPUT_SRGB;
        else if (!strcmp(val, "linear")) o->space = CKEY_INPUT_LINEAR;
        else if (!strcmp(val, "linear-read")) o->space = CKEY_INPUT_LINEAR_AT_READ;
        else return usage_error(o->cmd, "--input-space '%s': expected auto, srgb, linear or "
                                        "linear-read", val);
        break;
    case O_DEVICE:
        if (!parse_devices(val, (allowed & O_DEVICE_LIST) != 0, o))
            return usage_error(o->cmd, (allowed & O_DEVICE_LIST)
                                           ? "--device '%s': expected auto, cpu, cuda, cuda:N, "
                                             "cuda:all or a comma-separated list of them"
                                           : "--device '%s': expected auto, cpu, cuda or cuda:N "
                                             "(several devices: ckey key)",
                               val);
        break;
    case O_EMPTY_OK: o->empty_ok = 1; break;
    case O_SUBMIT: o->submit = 1; break;
    case O_PARTITION: o->partition = val; break;
    case O_CKEY: o->ckey = val; break;
    case O_LOGS: o->logs = val; break;
    case O_CHUNK:
        if (!parse_int(val, 1, 1000000, &n))
            return usage_error(o->cmd, "--chunk '%s' is not a frame count between 1 and 1000000", val);
        o->chunk = n;
        break;
    case O_CHUNKS:
        if (!valid_index_list(val))
            return usage_error(o->cmd, "--chunks '%s': expected task indices such as 3 or 0-4,7", val);
        o->chunks = val;
        break;
    case O_GPUS:
        if (!parse_int(val, 0, 64, &n))
            return usage_error(o->cmd, "--gpus '%s' is not a count between 0 and 64", val);
        o->gpus = n;
        break;
    case O_CPUS:
        if (!parse_int(val, 1, 4096, &n))
            return usage_error(o->cmd, "--cpus '%s' is not a count between 1 and 4096", val);
        o->cpus = n;
        break;
    case O_MAX_RUNNING:
        if (!parse_int(val, 1, 1000000, &n))
            return usage_error(o->cmd, "--max-running '%s' is not a count of at least 1", val);
        o->max_running = n;
        break;
    case O_SBATCH:
        if (o->nsbatch >= SBATCH_ARGS_MAX)
            return usage_error(o->cmd, "more than %d --sbatch options", SBATCH_ARGS_MAX);
        if (val[0] != '-')
            return usage_error(o->cmd, "--sbatch '%s': expected an sbatch option such as "
                                       "--sbatch=--account=vfx", val);
        o->sbatch[o->nsbatch++] = val;
        break;
    case O_PRECISION:
        if (!strcmp(val, "fp32")) o->so.precision = CKEY_PRECISION_FP32;
        else if (!strcmp(val, "fp16")) o->so.precision = CKEY_PRECISION_FP16;
        else if (!strcmp(val, "bf16")) o->so.precision = CKEY_PRECISION_BF16;
        else return usage_error(o->cmd, "--precision '%s': expected fp32, fp16 or bf16", val);
        break;
    case O_BUDGET:
        if (!parse_bytes(val, &o->so.memory_budget))
            return usage_error(o->cmd, "--budget '%s' is not a size such as 800M or 1.5G", val);
        break;
    case O_RESIZE_BACK:
        if (!strcmp(val, "lanczos4")) o->so.resize_back = CKEY_RESIZE_BACK_LANCZOS4;
        else if (!strcmp(val, "bilinear")) o->so.resize_back = CKEY_RESIZE_BACK_BILINEAR;
        else return usage_error(o->cmd, "--resize-back '%s': expected lanczos4 or bilinear", val);
        break;
    case O_DESPILL:
        if (!parse_float(val, &f) || !(f >= 0.0f && f <= 1.0f))
            return usage_error(o->cmd, "--despill '%s' is not a number between 0 and 1", val);
        o->post.despill_strength = f;
        o->have_despill = 1;
        break;
    case O_NO_DESPECKLE: o->post.despeckle = 0; break;
    case O_DESPECKLE_MODE:
        if (!strcmp(val, "opencv")) o->post.despeckle_mode = CKEY_DESPECKLE_OPENCV;
        else if (!strcmp(val, "torch")) o->post.despeckle_mode = CKEY_DESPECKLE_TORCH;
        else return usage_error(o->cmd, "--despeckle-mode '%s': expected opencv or torch", val);
        break;
    case O_DESPECKLE_AREA:
        if (!parse_int(val, 0, 1L << 30, &n))
            return usage_error(o->cmd, "--despeckle-area '%s' is not a pixel count >= 0", val);
        o->post.despeckle_area = n;
        break;
    case O_FRAMES:
        if (!parse_frames(val, &o->frame_first, &o->frame_last))
            return usage_error(o->cmd, "--frames '%s': expected A-B (inclusive, A <= B) or N", val);
        o->have_frames = 1;
        break;
    case O_ON_ERROR:
        if (!strcmp(val, "stop")) o->on_error = CKEY_ON_ERROR_STOP;
        else if (!strcmp(val, "skip")) o->on_error = CKEY_ON_ERROR_SKIP;
        else return usage_error(o->cmd, "--on-error '%s': expected stop or skip", val);
        break;
    case O_READ_AHEAD:
        if (!parse_int(val, 0, 8, &n))
            return usage_error(o->cmd, "--read-ahead '%s' is not a count between 0 and 8", val);
        o->read_ahead = (int)n;
        break;
    case O_WRITERS:
        if (!parse_int(val, 0, 64, &n))
            return usage_error(o->cmd, "--writers '%s' is not a count between 0 and 64", val);
        o->writers = (int)n;
        break;
    case O_FRAME_PATH:
        if (!strcmp(val, "host") || !strcmp(val, "cpu")) o->frame_path = CKEY_FRAME_PATH_CPU;
        else if (!strcmp(val, "device")) o->frame_path = CKEY_FRAME_PATH_DEVICE;
        else if (!strcmp(val, "auto")) o->frame_path = CKEY_FRAME_PATH_AUTO;
        else return usage_error(o->cmd, "--frame-path '%s': expected auto, host or device", val);
        break;
    case O_DEVICE_FRAMES:
        if (!parse_int(val, 0, 8, &n))
            return usage_error(o->cmd, "--device-frames '%s' is not a count between 0 and 8", val);
        o->device_frames = (int)n;
        break;
    case O_READERS:
        if (!parse_int(val, 0, 16, &n))
            return usage_error(o->cmd, "--readers '%s' is not a count between 0 and 16", val);
        o->readers = (int)n;
        break;
    case O_EXR_LEVEL:
        if (!parse_int(val, 1, CKEY_EXR_LEVEL_MAX, &n))
            return usage_error(o->cmd, "--exr-level '%s' is not a deflate level between 1 and %d", val,
                               CKEY_EXR_LEVEL_MAX);
        o->exr_level = (int)n;
        break;
    case O_COMP_PNG:
        if (!strcmp(val, "rle")) o->comp_png_level = CKEY_PNG_RLE;
        else if (parse_int(val, 0, 9, &n)) o->comp_png_level = (int)n;
        else return usage_error(o->cmd, "--comp-png '%s': expected rle or a zlib level 0 .. 9", val);
        break;
    case O_VIDEO_OUT:
        if (!strcmp(val, "prores")) o->video_out = VIDEO_OUT_PRORES;
        else if (!strcmp(val, "h264")) o->video_out = VIDEO_OUT_H264;
        else if (!strcmp(val, "both")) o->video_out = VIDEO_OUT_PRORES | VIDEO_OUT_H264;
        else if (!strcmp(val, "none")) o->video_out = 0;
        else return usage_error(o->cmd, "--video-out '%s': expected prores, h264, both or none", val);
        o->have_video_out = 1;
        break;
    case O_FPS:
        if (!parse_fps(val, &o->fps_num, &o->fps_den))
            return usage_error(o->cmd, "--fps '%s': expected a rate between 1 and 1000 such "
                                       "as 24, 23.976 or 30000/1001", val);
        break;
    case O_MASK: o->mask = val; break;
    case O_TRACK_MODEL: o->track_model = val; break;
    case O_MASK_AT: {
        const char *eq = strchr(val, '=');
        char num[32];
        const size_t len = eq ? (size_t)(eq - val) : 0;
        if (eq && len < sizeof num) memcpy(num, val, len), num[len] = 0;
        if (!eq || len >= sizeof num || !parse_int(num, 0, 999999999, &n) || !eq[1])
            return usage_error(o->cmd, "--mask-at '%s': expected FRAME=FILE, FRAME a plate's frame "
                                       "number (e.g. 40=mask_0040.png)", val);
        if (o->nmask_at >= MASK_AT_MAX)
            return usage_error(o->cmd, "more than %d --mask-at options", MASK_AT_MAX);
        o->mask_at_frame[o->nmask_at] = n;
        o->mask_at[o->nmask_at++] = eq + 1;
        break;
    }
    case O_OBJECT:
        if (!parse_int(val, 1, 255, &n))
            return usage_error(o->cmd, "--object '%s' is not a label between 1 and 255", val);
        o->object = (int)n;
        break;
    case O_HINT_FORMAT:
        if (!strcmp(val, "png")) o->hint_exr = 0;
        else if (!strcmp(val, "exr")) o->hint_exr = 1;
        else return usage_error(o->cmd, "--hint-format '%s': expected png or exr", val);
        break;
    case O_TRACK_SIZE:
        if (!parse_int(val, 0, 32768, &n) || (n > 0 && n < 16))
            return usage_error(o->cmd, "--track-size '%s': expected 0 (the plate's size) or a "
                                       "shorter side of at least 16", val);
        o->track_size = (int)n;
        break;
    case O_TRACK_DEVICE:
        if (!strcmp(val, "cpu")) o->track_device = CKEY_DEVICE_CPU;
        else if (!strcmp(val, "cuda")) o->track_device = CKEY_DEVICE_CUDA;
        else if (!strcmp(val, "auto")) o->track_device = CKEY_TRACK_DEVICE_AUTO;
        else return usage_error(o->cmd, "--track-device '%s': expected cpu, cuda or auto", val);
        break;
    case O_TRACK_PRECISION:
        if (!strcmp(val, "fp32")) o->track_precision = CKEY_PRECISION_FP32;
        else if (!strcmp(val, "tf32")) o->track_precision = CKEY_PRECISION_TF32;
        else if (!strcmp(val, "fp16")) o->track_precision = CKEY_PRECISION_FP16;
        else return usage_error(o->cmd, "--track-precision '%s': expected fp32, tf32 or fp16", val);
        break;
    case O_PLATE_SIZE:
        if (!parse_plate_size(val, &o->plate_w, &o->plate_h))
            return usage_error(o->cmd, "--plate-size '%s': expected WxH such as 3840x2160, each side "
                                       "1 to %d, at most %lld pixels", val, CKEY_IMAGE_MAX_SIDE,
                               (long long)CKEY_IMAGE_MAX_PIXELS);
        break;
    case O_FOR:
        if (!strcmp(val, "run")) o->plan_key = 0;
        else if (!strcmp(val, "key")) o->plan_key = 1;
        else return usage_error(o->cmd, "--for '%s': expected run or key", val);
        o->have_for = 1;
        break;
    case O_EXR_COMPRESSION:
        if (!strcmp(val, "pxr24")) o->exr = CKEY_EXR_PXR24;
        else if (!strcmp(val, "zip")) o->exr = CKEY_EXR_ZIP;
        else if (!strcmp(val, "zip-fast")) o->exr = CKEY_EXR_ZIP_FAST;
        else if (!strcmp(val, "none")) o->exr = CKEY_EXR_NONE;
        else return usage_error(o->cmd, "--exr-compression '%s': expected pxr24, zip, zip-fast or none", val);
        break;
    }
    return CONTINUE;
}

int parse_opts(int argc, char **argv, uint64_t allowed, int max_positional, const char *help,
               opts *o) {
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i];
        if (!strcmp(a, "-h") || !strcmp(a, "--help")) {
            fputs(help, stdout);
            return EXIT_OK;
        }
        if (a[0] != '-' || !strcmp(a, "-")) {
            if (o->npositional >= max_positional)
                return usage_error(o->cmd, "unexpected argument '%s'", a);
            o->positional[o->npositional++] = a;
            continue;
        }
        /* --name=value or --name value */
        const char *eq = strchr(a, '=');
        const size_t nlen = eq ? (size_t)(eq - a) : strlen(a);
        int found = -1;
        for (size_t k = 0; k < LEN(option_table); k++)
            if (strlen(option_table[k].name) == nlen && !strncmp(option_table[k].name, a, nlen))
                found = (int)k;
        if (found < 0 || !(option_table[found].flag & allowed))
            return usage_error(o->cmd, "unknown option '%.*s'", (int)nlen, a);
        const char *name = option_table[found].name;
        const char *val = NULL;
        if (option_table[found].takes_value) {
            if (eq) val = eq + 1;
            else if (i + 1 < argc) val = argv[++i];
            if (!val || !*val) return usage_error(o->cmd, "option '%s' needs a value", name);
        } else if (eq) {
            return usage_error(o->cmd, "option '%s' takes no value", name);
        }
        const int rc = set_option(o, option_table[found].flag, allowed, val);
        if (rc != CONTINUE) return rc;
    }
    return CONTINUE;
}
