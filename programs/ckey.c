/*
 * ckey -- command-line front end of libckey. Uses only the public header.
 *
 *   ckey run --model M --image plate.png --hint hint.png --out DIR [...]
 *   ckey key SHOT_DIR --model M [...]   (or --plate DIR --hint DIR --out DIR)
 *   ckey info --model M [--size S] [--json]
 *   ckey convert IN OUT.safetensors
 *   ckey version
 *
 * Exit codes: 0 success, 1 runtime failure ("ckey: error: ..."), 2 usage;
 * key also 3 (frames skipped as bad) and 128 + N when signal N (SIGINT 130,
 * SIGTERM 143) interrupted it.
 */
#include <ctype.h>
#include <dirent.h>
#include <errno.h>
#include <math.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "ckey.h"

enum { EXIT_OK = 0, EXIT_RUNTIME = 1, EXIT_USAGE = 2, EXIT_PARTIAL = 3 };

/* The real architecture's embedding width; anything else is a reduced test
 * configuration whose (random) weights cannot produce a meaningful matte. */
#define CKEY_REAL_EMBED_DIM 112

static const char usage_main[] =
    "usage: ckey <command> [options]\n"
    "\n"
    "Keys green-screen plates with the CorridorKey GreenFormer network.\n"
    "\n"
    "commands:\n"
    "  run       key one plate: writes DIR/alpha.png and DIR/fg.png\n"
    "  key       key a clip (image sequence or video): Matte/, FG/, Processed/\n"
    "            and Comp/ passes, optionally ProRes / H.264 videos\n"
    "  info      describe a checkpoint and the memory a session would plan\n"
    "  convert   rewrite a checkpoint (.pth or .safetensors) as safetensors\n"
    "  devices   list the CPU and the CUDA devices ckey can use\n"
    "  version   print the library version\n"
    "\n"
    "'ckey <command> --help' describes a command's options.\n"
    "\n"
    "exit codes: 0 success, 1 runtime failure (message on stderr as\n"
    "'ckey: error: ...'), 2 usage error (bad or missing arguments), 3 (key\n"
    "--on-error skip) finished, but some frames were skipped as bad, 130 / 143\n"
    "(key) stopped cleanly by SIGINT / SIGTERM.\n";

static const char usage_run[] =
    "usage: ckey run --model M --image PLATE --hint HINT --out DIR [options]\n"
    "\n"
    "Keys one plate. PLATE is an RGB (or gray) image: PNG (8 or 16 bits), JPEG\n"
    "(8-bit gray or color; not CMYK), TIFF (8/16-bit or 32-bit float, gray/RGB\n"
    "with optional alpha) or OpenEXR (half/float, scanline), the format told by\n"
    "the file's contents, not its name.\n"
    "HINT is the coarse alpha hint of the same size, in any of these formats (its\n"
    "alpha channel if it has a non-opaque one, else gray / blue), or `auto`: a\n"
    "rough chroma-key hint made from the plate (screen colour estimated from the\n"
    "plate, foreground eroded and blurred) for a plate with no hint pass. Writes\n"
    "DIR/alpha.png (16-bit gray, linear alpha) and DIR/fg.png (16-bit RGB,\n"
    "straight sRGB foreground), creating DIR if needed.\n"
    "\n"
    "options:\n"
    "  --model PATH            checkpoint (.pth or .safetensors)\n"
    "  --image PATH            the plate (PNG, JPEG or TIFF)\n"
    "  --hint PATH|auto        the alpha hint (PNG, JPEG, TIFF or OpenEXR), or auto\n"
    "  --out DIR               output directory\n"
    "  --size S                network resolution, a multiple of 32 (default 2048)\n"
    "  --threads N             CPU worker threads, 0 = all cores (default 0)\n"
    "  --refiner-strength F    scale of the refiner's corrections (default 1)\n"
    "  --input-space S         auto (default), srgb, linear or linear-read: how a\n"
    "                          plate's values are taken. auto: an EXR plate is\n"
    "                          scene-linear and converted to sRGB as it is read,\n"
    "                          before the resize to S (upstream's default for EXR);\n"
    "                          other formats are sRGB. srgb: no conversion.\n"
    "                          linear: linear, converted to sRGB after the resize\n"
    "                          (upstream's --linear). linear-read: any plate\n"
    "                          converted as auto converts an EXR\n"
    "  --linear                same as --input-space linear\n"
    "  --resize-back R         lanczos4 (default) or bilinear: how alpha and fg go\n"
    "                          from S back to the plate size. lanczos4 is cv2's\n"
    "                          INTER_LANCZOS4, the official CLI's default (CPU\n"
    "                          post-processing); bilinear is torchvision's\n"
    "                          antialiased resize (its --gpu-post path)\n"
    "  --device D              auto (default: the first CUDA GPU, else cpu), cpu, cuda, cuda:N\n"
    "  --precision P           fp32, fp16 or bf16 (default: fp16 on CUDA; the CPU runs fp32)\n"
    "  --budget BYTES          memory budget, e.g. 800M or 1.5G (default: none)\n"
    "  --json                  print one JSON object instead of text\n"
    "  -h, --help              this help\n"
    "\n"
    "exit codes: 0 success, 1 runtime failure, 2 usage error.\n";

static const char usage_info[] =
    "usage: ckey info --model M [--size S] [--threads N] [--budget BYTES] [--memory] [--json]\n"
    "\n"
    "Prints the architecture (stages, dims, heads, blocks), the parameter count\n"
    "and the memory plan of a session at size S: weights, activation arena,\n"
    "peak, the number of planned buffers and what they would take without reuse.\n"
    "\n"
    "options:\n"
    "  --model PATH     checkpoint (.pth or .safetensors)\n"
    "  --size S         network resolution, a multiple of 32 (default 2048)\n"
    "  --threads N      CPU worker threads the plan is made for (default 0 = all)\n"
    "  --device D       auto (default: the first CUDA GPU, else cpu), cpu, cuda, cuda:N\n"
    "  --precision P    fp32, fp16 or bf16 (default: fp16 on CUDA; the CPU runs fp32)\n"
    "  --budget BYTES   plan against a memory budget, e.g. 512M\n"
    "  --memory         also list every planned buffer (size, arena offset, lifetime)\n"
    "  --json           print one JSON object\n"
    "  -h, --help       this help\n"
    "\n"
    "exit codes: 0 success, 1 runtime failure, 2 usage error.\n";

static const char usage_convert[] =
    "usage: ckey convert IN OUT.safetensors [--json]\n"
    "\n"
    "Loads IN (a torch .pth zip or safetensors) and writes its weights (float32)\n"
    "and hyper-parameters as safetensors.\n"
    "\n"
    "exit codes: 0 success, 1 runtime failure, 2 usage error.\n";

static const char usage_version[] =
    "usage: ckey version [--json]\n"
    "\n"
    "Prints the library version and the backends it was built with.\n";

static const char usage_devices[] =
    "usage: ckey devices [--json]\n"
    "\n"
    "Lists the devices this build can use: the CPU (cores, memory) and each\n"
    "CUDA GPU (name, compute capability, multiprocessors, memory). Note: the\n"
    "network runs on the CPU in this version; the CUDA backend is in progress.\n";

/* ------------------------------------------------------------- helpers */

static int usage_error(const char *cmd, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static int usage_error(const char *cmd, const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    fprintf(stderr, "ckey%s%s: ", cmd ? " " : "", cmd ? cmd : "");
    vfprintf(stderr, fmt, ap);
    va_end(ap);
    fprintf(stderr, "\nTry 'ckey %s%s--help' for more information.\n", cmd ? cmd : "",
            cmd ? " " : "");
    return EXIT_USAGE;
}

static double now_seconds(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

/* JSON string literal (quotes included). */
static void json_str(FILE *f, const char *s) {
    fputc('"', f);
    for (const unsigned char *p = (const unsigned char *)(s ? s : ""); *p; p++) {
        switch (*p) {
        case '"': fputs("\\\"", f); break;
        case '\\': fputs("\\\\", f); break;
        case '\n': fputs("\\n", f); break;
        case '\t': fputs("\\t", f); break;
        case '\r': fputs("\\r", f); break;
        default:
            if (*p < 0x20) fprintf(f, "\\u%04x", *p);
            else fputc(*p, f);
        }
    }
    fputc('"', f);
}

/* Runtime failure: the message on stderr; with --json also a JSON object on
 * stdout so a caller parsing stdout always gets one. */
static int fail(int json, ckey_status st, const char *fmt, ...) __attribute__((format(printf, 3, 4)));
static int fail(int json, ckey_status st, const char *fmt, ...) {
    char msg[1024];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof msg, fmt, ap);
    va_end(ap);
    fprintf(stderr, "ckey: error: %s\n", msg);
    if (json) {
        printf("{\"ok\": false, \"status\": ");
        json_str(stdout, ckey_status_name(st));
        printf(", \"message\": ");
        json_str(stdout, msg);
        printf("}\n");
    }
    return EXIT_RUNTIME;
}

static int fail_err(int json, const ckey_error *err) {
    return fail(json, err->status, "%s", err->message[0] ? err->message : ckey_status_name(err->status));
}

static double mib(int64_t bytes) { return (double)bytes / (1024.0 * 1024.0); }

/* ---------------------------------------------------------- option parsing */

typedef struct opts {
    const char *cmd;
    const char *model, *image, *hint, *out;
    int json, linear, memory;
    int space; /* ckey_input_space: 0 auto, 1 srgb, 2 linear, 3 linear-read */
    ckey_session_options so;
    /* key */
    const char *plate;
    ckey_post_options post;
    int dry_run, force, have_frames;
    long frame_first, frame_last;
    ckey_exr_compression exr;
    ckey_shot_on_error on_error;
    int read_ahead; /* -1: the library default */
    int writers;    /* writer threads; 0: the library default */
    int video_out;  /* bit 1: ProRes 4444 fg + alpha, bit 2: H.264 comp */
    int verbose;    /* FFmpeg's log: 0 quiet, 1 warnings, 2 info */
    int32_t fps_num, fps_den; /* --fps; 0/0: the plate's (24 for a sequence) */
    const char *positional[2];
    int npositional;
} opts;

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

/* The default device: the first CUDA GPU when one is usable, else the CPU. */
static void default_device(ckey_session_options *so) {
    so->device = ckey_device_count(CKEY_DEVICE_CUDA) > 0 ? CKEY_DEVICE_CUDA : CKEY_DEVICE_CPU;
    so->device_index = 0;
}

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

static const char *file_ext(const char *name);

/* Which options a command accepts. */
enum { O_MODEL = 1, O_IMAGE = 2, O_HINT = 4, O_OUT = 8, O_SIZE = 16, O_THREADS = 32,
       O_STRENGTH = 64, O_LINEAR = 128, O_DEVICE = 256, O_BUDGET = 512, O_JSON = 1024, O_MEMORY = 2048,
       O_PLATE = 1 << 12, O_DESPILL = 1 << 13, O_NO_DESPECKLE = 1 << 14, O_DESPECKLE_AREA = 1 << 15,
       O_FRAMES = 1 << 16, O_DRY_RUN = 1 << 17, O_FORCE = 1 << 18, O_EXR_COMPRESSION = 1 << 19,
       O_INPUT_SPACE = 1 << 20, O_ON_ERROR = 1 << 21, O_READ_AHEAD = 1 << 22, O_RESIZE_BACK = 1 << 23,
       O_DESPECKLE_MODE = 1 << 24, O_PRECISION = 1 << 25, O_VIDEO_OUT = 1 << 26, O_VERBOSE = 1 << 27,
       O_FPS = 1 << 28, O_WRITERS = 1 << 29 };

enum { VIDEO_OUT_PRORES = 1, VIDEO_OUT_H264 = 2 };

static const struct {
    const char *name;
    int flag, takes_value;
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
    {"--fps", O_FPS, 1},         {"--writers", O_WRITERS, 1},
};

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

/*
 * Parse argv[1..] of a command. Returns -1 when parsing succeeded, 0 after
 * printing help, else the usage exit code. `allowed` masks the options;
 * `max_positional` the bare arguments.
 */
static int parse_opts(int argc, char **argv, int allowed, int max_positional, const char *help,
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
        size_t nlen = eq ? (size_t)(eq - a) : strlen(a);
        int found = -1;
        for (size_t k = 0; k < sizeof option_table / sizeof option_table[0]; k++)
            if (strlen(option_table[k].name) == nlen && !strncmp(option_table[k].name, a, nlen))
                found = (int)k;
        if (found < 0 || !(option_table[found].flag & allowed))
            return usage_error(o->cmd, "unknown option '%.*s'", (int)nlen, a);
        const char *name = option_table[found].name;
        const int flag = option_table[found].flag;
        const char *val = NULL;
        if (option_table[found].takes_value) {
            if (eq) val = eq + 1;
            else if (i + 1 < argc) val = argv[++i];
            if (!val || !*val) return usage_error(o->cmd, "option '%s' needs a value", name);
        } else if (eq) {
            return usage_error(o->cmd, "option '%s' takes no value", name);
        }
        long n;
        switch (flag) {
        case O_MODEL: o->model = val; break;
        case O_IMAGE: o->image = val; break;
        case O_HINT: o->hint = val; break;
        case O_OUT: o->out = val; break;
        case O_SIZE:
            if (!parse_int(val, 1, 16384, &n))
                return usage_error(o->cmd, "--size '%s' is not a size between 32 and 16384", val);
            if (n % 32)
                return usage_error(o->cmd, "--size %ld is not a multiple of 32 (the network "
                                           "downsamples by 32)", n);
            o->so.size = (int32_t)n;
            break;
        case O_THREADS:
            if (!parse_int(val, 0, 4096, &n))
                return usage_error(o->cmd, "--threads '%s' is not a count between 0 and 4096", val);
            o->so.threads = (int32_t)n;
            break;
        case O_STRENGTH: {
            char *end;
            errno = 0;
            float f = strtof(val, &end);
            if (errno || end == val || *end || !isfinite(f))
                return usage_error(o->cmd, "--refiner-strength '%s' is not a number", val);
            o->so.refiner_strength = f;
            break;
        }
        case O_LINEAR: o->linear = 1, o->space = 2; break;
        case O_INPUT_SPACE:
            if (!strcmp(val, "auto")) o->space = CKEY_INPUT_AUTO;
            else if (!strcmp(val, "srgb")) o->space = CKEY_INPUT_SRGB;
            else if (!strcmp(val, "linear")) o->space = CKEY_INPUT_LINEAR;
            else if (!strcmp(val, "linear-read")) o->space = CKEY_INPUT_LINEAR_AT_READ;
            else return usage_error(o->cmd, "--input-space '%s': expected auto, srgb, linear or "
                                            "linear-read", val);
            o->linear = o->space == 2;
            break;
        case O_DEVICE:
            if (!parse_device(val, &o->so))
                return usage_error(o->cmd, "--device '%s': expected auto, cpu, cuda or cuda:N", val);
            break;
        case O_BUDGET:
            if (!parse_bytes(val, &o->so.memory_budget))
                return usage_error(o->cmd, "--budget '%s' is not a size such as 800M or 1.5G", val);
            break;
        case O_JSON: o->json = 1; break;
        case O_MEMORY: o->memory = 1; break;
        case O_PLATE: o->plate = val; break;
        case O_DESPILL: {
            char *end;
            errno = 0;
            float f = strtof(val, &end);
            if (errno || end == val || *end || !(f >= 0.0f && f <= 1.0f))
                return usage_error(o->cmd, "--despill '%s' is not a number between 0 and 1", val);
            o->post.despill_strength = f;
            break;
        }
        case O_NO_DESPECKLE: o->post.despeckle = 0; break;
        case O_PRECISION:
            if (!strcmp(val, "fp32")) o->so.precision = CKEY_PRECISION_FP32;
            else if (!strcmp(val, "fp16")) o->so.precision = CKEY_PRECISION_FP16;
            else if (!strcmp(val, "bf16")) o->so.precision = CKEY_PRECISION_BF16;
            else return usage_error(o->cmd, "--precision '%s': expected fp32, fp16 or bf16", val);
            break;
        case O_RESIZE_BACK:
            if (!strcmp(val, "lanczos4")) o->so.resize_back = CKEY_RESIZE_BACK_LANCZOS4;
            else if (!strcmp(val, "bilinear")) o->so.resize_back = CKEY_RESIZE_BACK_BILINEAR;
            else return usage_error(o->cmd, "--resize-back '%s': expected lanczos4 or bilinear", val);
            break;
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
        case O_FRAMES: {
            const char *dash = strchr(val, '-');
            char buf[64];
            long fa, fb;
            int ok;
            if (dash && (size_t)(dash - val) < sizeof buf) {
                memcpy(buf, val, (size_t)(dash - val));
                buf[dash - val] = 0;
                ok = parse_int(buf, 0, 999999999L, &fa) && parse_int(dash + 1, 0, 999999999L, &fb);
            } else {
                ok = !dash && parse_int(val, 0, 999999999L, &fa);
                fb = ok ? fa : 0;
            }
            if (!ok || fa > fb)
                return usage_error(o->cmd, "--frames '%s': expected A-B (inclusive, A <= B) or N", val);
            o->have_frames = 1;
            o->frame_first = fa;
            o->frame_last = fb;
            break;
        }
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
        case O_VIDEO_OUT:
            if (!strcmp(val, "prores")) o->video_out = VIDEO_OUT_PRORES;
            else if (!strcmp(val, "h264")) o->video_out = VIDEO_OUT_H264;
            else if (!strcmp(val, "both")) o->video_out = VIDEO_OUT_PRORES | VIDEO_OUT_H264;
            else if (!strcmp(val, "none")) o->video_out = 0;
            else return usage_error(o->cmd, "--video-out '%s': expected prores, h264, both or none", val);
            break;
        case O_VERBOSE: o->verbose++; break;
        case O_FPS:
            if (!parse_fps(val, &o->fps_num, &o->fps_den))
                return usage_error(o->cmd, "--fps '%s': expected a rate between 1 and 1000 such "
                                           "as 24, 23.976 or 30000/1001", val);
            break;
        case O_DRY_RUN: o->dry_run = 1; break;
        case O_FORCE: o->force = 1; break;
        case O_EXR_COMPRESSION:
            if (!strcmp(val, "pxr24")) o->exr = CKEY_EXR_PXR24;
            else if (!strcmp(val, "zip")) o->exr = CKEY_EXR_ZIP;
            else if (!strcmp(val, "zip-fast")) o->exr = CKEY_EXR_ZIP_FAST;
            else if (!strcmp(val, "none")) o->exr = CKEY_EXR_NONE;
            else return usage_error(o->cmd, "--exr-compression '%s': expected pxr24, zip, zip-fast or none", val);
            break;
        }
    }
    return -1;
}

static int require(const opts *o, const char *value, const char *name) {
    if (value) return 1;
    usage_error(o->cmd, "missing %s", name);
    return 0;
}

/* mkdir -p: create DIR and missing parents. */
static int make_dirs(const char *path, char *why, size_t cap) {
    char buf[4096];
    size_t n = strlen(path);
    if (n == 0 || n >= sizeof buf) {
        snprintf(why, cap, "%s: bad directory name", path);
        return 0;
    }
    memcpy(buf, path, n + 1);
    for (size_t i = 1; i <= n; i++) {
        if (buf[i] != '/' && buf[i] != 0) continue;
        const char saved = buf[i];
        buf[i] = 0;
        if (mkdir(buf, 0777) != 0 && errno != EEXIST) {
            snprintf(why, cap, "cannot create directory %s: %s", buf, strerror(errno));
            return 0;
        }
        buf[i] = saved;
    }
    struct stat st;
    if (stat(path, &st) != 0 || !S_ISDIR(st.st_mode)) {
        snprintf(why, cap, "%s exists and is not a directory", path);
        return 0;
    }
    return 1;
}

static void print_plan_json(const ckey_memory_plan *p) {
    printf("{\"weight_bytes\": %lld, \"arena_bytes\": %lld, \"scratch_bytes\": %lld, "
           "\"peak_bytes\": %lld, \"num_buffers\": %d, \"naive_bytes\": %lld}",
           (long long)p->weight_bytes, (long long)p->arena_bytes, (long long)p->scratch_bytes,
           (long long)p->peak_bytes, (int)p->num_buffers, (long long)p->naive_bytes);
}

static int is_test_model(const ckey_model_info *mi) { return mi->embed_dim != CKEY_REAL_EMBED_DIM; }

static void test_model_notice(const char *model, const ckey_model_info *mi) {
    fprintf(stderr,
            "ckey: note: %s is a reduced test configuration (embed_dim %d, not %d); its weights "
            "are untrained test weights and the matte is not meaningful.\n",
            model, (int)mi->embed_dim, CKEY_REAL_EMBED_DIM);
}

/* ------------------------------------------------------------------ run */

static int cmd_run(int argc, char **argv) {
    opts o;
    memset(&o, 0, sizeof o);
    o.cmd = "run";
    ckey_session_options_default(&o.so);
    default_device(&o.so);
    int rc = parse_opts(argc, argv,
                        O_MODEL | O_IMAGE | O_HINT | O_OUT | O_SIZE | O_THREADS | O_STRENGTH |
                            O_LINEAR | O_INPUT_SPACE | O_DEVICE | O_BUDGET | O_JSON | O_RESIZE_BACK | O_PRECISION,
                        0, usage_run, &o);
    if (rc >= 0) return rc;
    if (!require(&o, o.model, "--model") || !require(&o, o.image, "--image") ||
        !require(&o, o.hint, "--hint") || !require(&o, o.out, "--out"))
        return EXIT_USAGE;

    ckey_error err;
    memset(&err, 0, sizeof err);
    ckey_image plate, hint;
    memset(&plate, 0, sizeof plate);
    memset(&hint, 0, sizeof hint);
    ckey_model *model = NULL;
    ckey_session *sess = NULL;
    float *alpha = NULL, *fg = NULL;
    int exit_code = EXIT_RUNTIME;

    /* Inputs first: a typo in a path should not cost a model load. */
    double t0 = now_seconds();
    const int auto_hint = !strcmp(o.hint, "auto");
    if (ckey_image_read(o.image, CKEY_IMAGE_RGB, &plate, &err) != CKEY_OK ||
        (!auto_hint && ckey_image_read(o.hint, CKEY_IMAGE_HINT, &hint, &err) != CKEY_OK)) {
        exit_code = fail_err(o.json, &err);
        goto done;
    }
    /* auto: an EXR plate is linear, converted to sRGB now, at full size, as
     * upstream's reader does by default (linear: after the resize instead) */
    const int linear_at_read = o.space == CKEY_INPUT_LINEAR_AT_READ ||
                               (o.space == CKEY_INPUT_AUTO && !strcasecmp(file_ext(o.image), "exr"));
    if (linear_at_read) ckey_linear_to_srgb(plate.data, 3 * (size_t)plate.width * (size_t)plate.height);
    if (auto_hint) {
        /* --hint auto: a rough chroma-key hint made from the plate itself */
        const size_t sb = ckey_auto_hint_scratch_bytes(plate.width, plate.height);
        void *scratch = malloc(sb);
        hint.width = plate.width;
        hint.height = plate.height;
        hint.channels = 1;
        hint.data = malloc((size_t)plate.width * plate.height * sizeof(float));
        if (!scratch || !hint.data) {
            free(scratch);
            exit_code = fail(o.json, CKEY_ERR_NOMEM, "out of memory for the automatic hint");
            goto done;
        }
        ckey_status ast = ckey_auto_hint(plate.data, plate.width, plate.height, hint.data, scratch, &err);
        free(scratch);
        if (ast != CKEY_OK) {
            exit_code = fail(o.json, ast, "%s: %s", o.image, err.message);
            goto done;
        }
    }
    if (plate.width != hint.width || plate.height != hint.height) {
        exit_code = fail(o.json, CKEY_ERR_INVALID_ARG,
                         "%s is %d x %d but %s is %d x %d: the hint must match the plate", o.image,
                         (int)plate.width, (int)plate.height, o.hint, (int)hint.width,
                         (int)hint.height);
        goto done;
    }
    const double t_read = now_seconds() - t0;

    t0 = now_seconds();
    if (ckey_model_load(o.model, &model, &err) != CKEY_OK) {
        exit_code = fail_err(o.json, &err);
        goto done;
    }
    const double t_load = now_seconds() - t0;
    ckey_model_info mi;
    memset(&mi, 0, sizeof mi);
    ckey_model_get_info(model, &mi);
    const int test_model = is_test_model(&mi);
    if (test_model) test_model_notice(o.model, &mi);

    t0 = now_seconds();
    if (ckey_session_create(model, &o.so, &sess, &err) != CKEY_OK) {
        exit_code = fail_err(o.json, &err);
        goto done;
    }
    const double t_session = now_seconds() - t0;
    ckey_memory_plan plan;
    memset(&plan, 0, sizeof plan);
    ckey_session_get_plan(sess, &plan);

    const size_t pixels = (size_t)plate.width * (size_t)plate.height;
    alpha = malloc(pixels * sizeof *alpha);
    fg = malloc(3 * pixels * sizeof *fg);
    if (!alpha || !fg) {
        exit_code = fail(o.json, CKEY_ERR_NOMEM, "out of memory for a %d x %d plate",
                         (int)plate.width, (int)plate.height);
        goto done;
    }
    ckey_frame frame;
    memset(&frame, 0, sizeof frame);
    frame.width = plate.width;
    frame.height = plate.height;
    frame.rgb = plate.data;
    frame.hint = hint.data;
    frame.input_is_linear = o.space == CKEY_INPUT_LINEAR;
    t0 = now_seconds();
    if (ckey_session_key(sess, &frame, alpha, fg, &err) != CKEY_OK) {
        exit_code = fail_err(o.json, &err);
        goto done;
    }
    const double t_key = now_seconds() - t0;

    char why[4400];
    if (!make_dirs(o.out, why, sizeof why)) {
        exit_code = fail(o.json, CKEY_ERR_IO, "%s", why);
        goto done;
    }
    const size_t dlen = strlen(o.out);
    char *alpha_path = malloc(dlen + 16), *fg_path = malloc(dlen + 16);
    if (!alpha_path || !fg_path) {
        free(alpha_path);
        free(fg_path);
        exit_code = fail(o.json, CKEY_ERR_NOMEM, "out of memory");
        goto done;
    }
    const char *sep = dlen && o.out[dlen - 1] == '/' ? "" : "/";
    sprintf(alpha_path, "%s%salpha.png", o.out, sep);
    sprintf(fg_path, "%s%sfg.png", o.out, sep);
    t0 = now_seconds();
    if (ckey_image_write_png(alpha_path, alpha, 1, plate.width, plate.height, 16, &err) != CKEY_OK ||
        ckey_image_write_png(fg_path, fg, 3, plate.width, plate.height, 16, &err) != CKEY_OK) {
        free(alpha_path);
        free(fg_path);
        exit_code = fail_err(o.json, &err);
        goto done;
    }
    const double t_write = now_seconds() - t0;

    if (o.json) {
        printf("{\"ok\": true, \"command\": \"run\", \"model\": ");
        json_str(stdout, o.model);
        printf(", \"image\": ");
        json_str(stdout, o.image);
        printf(", \"hint\": ");
        json_str(stdout, o.hint);
        printf(", \"width\": %d, \"height\": %d, \"size\": %d, \"threads\": %d, "
               "\"refiner_strength\": %g, \"input_is_linear\": %s, \"linear_at_read\": %s, "
               "\"test_weights\": %s, ",
               (int)plate.width, (int)plate.height, (int)o.so.size, (int)o.so.threads,
               (double)o.so.refiner_strength, frame.input_is_linear ? "true" : "false",
               linear_at_read ? "true" : "false", test_model ? "true" : "false");
        printf("\"seconds\": {\"read\": %.6f, \"load\": %.6f, \"session\": %.6f, \"key\": %.6f, "
               "\"write\": %.6f}, \"memory\": ",
               t_read, t_load, t_session, t_key, t_write);
        print_plan_json(&plan);
        printf(", \"outputs\": {\"alpha\": ");
        json_str(stdout, alpha_path);
        printf(", \"fg\": ");
        json_str(stdout, fg_path);
        printf("}}\n");
    } else {
        printf("ckey run: %s (%d x %d) + %s, model %s%s, S = %d\n", o.image, (int)plate.width,
               (int)plate.height, o.hint, o.model, test_model ? " (test weights)" : "",
               (int)o.so.size);
        printf("  read     %8.3f s\n", t_read);
        printf("  load     %8.3f s\n", t_load);
        printf("  session  %8.3f s   planned peak %.1f MiB (weights %.1f MiB + arena %.1f MiB)\n",
               t_session, mib(plan.peak_bytes), mib(plan.weight_bytes), mib(plan.arena_bytes));
        printf("  key      %8.3f s\n", t_key);
        printf("  write    %8.3f s\n", t_write);
        printf("  wrote %s (16-bit gray) and %s (16-bit RGB)\n", alpha_path, fg_path);
    }
    free(alpha_path);
    free(fg_path);
    exit_code = EXIT_OK;

done:
    free(alpha);
    free(fg);
    ckey_session_free(sess);
    ckey_model_free(model);
    ckey_image_free(&plate);
    ckey_image_free(&hint);
    return exit_code;
}

/* ------------------------------------------------------------------ key */

static const char usage_key[] =
    "usage: ckey key SHOT_DIR --model M [options]\n"
    "       ckey key --plate DIR|VIDEO --hint DIR|VIDEO|auto --out DIR --model M [options]\n"
    "\n"
    "Keys a clip, an image sequence or a video: loads the model once, then for\n"
    "each frame reads the plate and its alpha hint, runs the network and the\n"
    "official post-processing (despeckle, despill, premultiply, checkerboard comp)\n"
    "and writes four passes. SHOT_DIR is a clip in the official layout: the plate\n"
    "in SHOT_DIR/Input/ (image frames, or one video file), hints in\n"
    "SHOT_DIR/AlphaHint/ (frames or one video), passes written under\n"
    "SHOT_DIR/Output/.\n"
    "\n"
    "Sequences: the files of a directory named *.png, *.jpg, *.jpeg, *.tif,\n"
    "*.tiff or *.exr (any case; other files are ignored). A file's frame number\n"
    "is the last run of digits in its name (plate_0042.png -> 42).\n"
    "Videos (mov, mp4, mkv, ...: H.264, HEVC, ProRes, ... as FFmpeg decodes them,\n"
    "at full bit depth): frames are numbered from 0 in decode order, and a plate\n"
    "video's outputs are named 00000, 00001, ... (5 digits, as upstream names a\n"
    "video's frames). A video plate is sRGB (--input-space auto). A hint video's\n"
    "hint is its alpha when not opaque, else its blue channel.\n"
    "Plates and hints pair by frame number, whatever each is (a plate video with\n"
    "hint frames 00000.png ..., a plate sequence with a hint video whose frame N\n"
    "is plate frame N, two videos frame by frame). Errors found before anything\n"
    "is keyed (exit 1): two files with one frame number, a name without digits, a\n"
    "plate without a hint, e.g. a hint video shorter than the plate (the message\n"
    "names the frame; with --on-error skip that frame fails in its turn instead).\n"
    "Hints without a plate are ignored (a warning). A hint of another size than\n"
    "its plate is resized to the plate (bilinear, as upstream), with a warning.\n"
    "\n"
    "Outputs, per frame, named after the plate (<stem> = its name without the\n"
    "extension, so the frame number is kept; 00000 ... for a video), directories\n"
    "created as needed:\n"
    "  OUT/Matte/<stem>.exr      1 channel (Y, as upstream's): linear alpha, raw\n"
    "                            network output\n"
    "  OUT/FG/<stem>.exr         3 channels: straight sRGB fg, raw network output\n"
    "  OUT/Processed/<stem>.exr  4 channels: linear premultiplied RGBA after\n"
    "                            despeckle and despill\n"
    "  OUT/Comp/<stem>.png       8-bit sRGB preview over a checkerboard (truncated\n"
    "                            to 8 bits, as upstream's)\n"
    "EXR files are HALF. Every file is written atomically (temp file + rename),\n"
    "so a frame whose four outputs exist is complete and is skipped on a re-run\n"
    "(resume) unless --force; a run that was killed or failed resumes there (a\n"
    "video plate is still decoded through the skipped frames).\n"
    "With --video-out, also (<clip>: the SHOT_DIR's name, or the --plate video's\n"
    "or directory's name without extension):\n"
    "  OUT/<clip>_fg_alpha.mov   ProRes 4444 (10-bit): RGB the straight, despilled\n"
    "                            sRGB foreground (Processed un-premultiplied),\n"
    "                            alpha the despeckled matte (Processed's alpha)\n"
    "  OUT/<clip>_comp.mp4       H.264 preview of the Comp pass (an odd width or\n"
    "                            height is padded by one pixel, the edge repeated)\n"
    "at the plate video's frame rate (a sequence: --fps, default 24), written atomically\n"
    "when the last frame is done. A video cannot resume: with --video-out every\n"
    "frame is keyed in one run, so --frames, --on-error skip and a resume (frames\n"
    "whose passes exist, unless --force) are refused.\n"
    "\n"
    "Threads: a reader thread decodes the next frames (--read-ahead) while the\n"
    "network keys one, and writer threads (--writers) resize back, post-process\n"
    "and write the ones before, a frame each, in parallel; progress is reported\n"
    "in frame order. If a frame fails, a few frames after it may already be\n"
    "written (each file whole, so a re-run resumes correctly).\n"
    "\n"
    "options:\n"
    "  --model PATH            checkpoint (.pth or .safetensors); required\n"
    "  --plate DIR|VIDEO       plate frames or a video (instead of SHOT_DIR)\n"
    "  --hint DIR|VIDEO|auto   alpha hint frames or video (instead of SHOT_DIR), or\n"
    "                          auto: a rough chroma-key hint made from each plate\n"
    "                          (also with SHOT_DIR, which then needs no AlphaHint/)\n"
    "  --out DIR               output root (instead of SHOT_DIR/Output)\n"
    "  --size S                network resolution, a multiple of 32 (default 2048)\n"
    "  --threads N             CPU worker threads, 0 = all cores (default 0)\n"
    "  --device D              auto (default: the first CUDA GPU, else cpu), cpu, cuda, cuda:N\n"
    "  --precision P           fp32, fp16 or bf16 (default: fp16 on CUDA; the CPU runs fp32)\n"
    "  --budget BYTES          memory budget, e.g. 800M or 1.5G (default: none)\n"
    "  --refiner-strength F    scale of the refiner's corrections (default 1)\n"
    "  --despill F             despill strength 0 .. 1 (default 0.5, upstream's\n"
    "                          shot command; 1 = process_frame's full despill)\n"
    "  --no-despeckle          keep small matte islands (default: despeckle on)\n"
    "  --despeckle-area N      islands below N pixels are removed (default 400)\n"
    "  --resize-back R         lanczos4 (default) or bilinear: the resize from S\n"
    "                          back to the plate (upstream's CPU / GPU\n"
    "                          post-processing; see ckey run --help)\n"
    "  --despeckle-mode M      opencv (default) or torch: upstream's\n"
    "                          clean_matte_opencv (CLI default) or\n"
    "                          clean_matte_torch (its --gpu-post path, with\n"
    "                          --resize-back bilinear)\n"
    "  --input-space S         auto (default), srgb, linear or linear-read. auto:\n"
    "                          EXR plates (by extension) are scene-linear, converted\n"
    "                          to sRGB as they are read, before the resize to S\n"
    "                          (upstream's default); other formats and videos are\n"
    "                          sRGB. linear: converted after the resize (upstream's\n"
    "                          --linear); srgb: no conversion; linear-read: every\n"
    "                          plate converted as auto converts an EXR\n"
    "  --linear                same as --input-space linear\n"
    "  --frames A-B            only frame numbers A to B inclusive (or one: N)\n"
    "  --exr-compression C     pxr24 (default, as upstream), zip, zip-fast (ZIP at\n"
    "                          zlib level 1: ~20% larger files, several times less\n"
    "                          CPU; at 4K most of a frame's writing) or none\n"
    "  --video-out V           prores, h264, both or none (default): the videos\n"
    "                          above, in addition to the passes\n"
    "  --fps R                 frame rate of those videos: 24, 25, 23.976,\n"
    "                          30000/1001, ... (default: the plate video's rate,\n"
    "                          24 for an image sequence)\n"
    "  --on-error stop|skip    stop (default): the first frame whose plate or hint\n"
    "                          cannot be used (unreadable, corrupt, truncated, no\n"
    "                          hint, too large) ends the run, after the frames\n"
    "                          before it are written; skip: report that\n"
    "                          frame, key the rest, exit 3 (past a damaged frame a\n"
    "                          video cannot be decoded: its later frames fail too).\n"
    "                          Output errors (disk full, ...) always stop\n"
    "  --read-ahead N          frames decoded ahead of the network, 0 .. 8\n"
    "                          (default 2; 0 = no threads, one stage at a time)\n"
    "  --writers N             writer threads (resize back, post-process, write),\n"
    "                          0 .. 64 (default 0: online CPUs - 2, between 1\n"
    "                          and 8); each holds one frame's buffers\n"
    "  --dry-run               list the frames that would be keyed or skipped;\n"
    "                          writes nothing and loads no model\n"
    "  --force                 re-key frames whose outputs already exist\n"
    "  --verbose               let FFmpeg's warnings through (twice: its info too;\n"
    "                          default: FFmpeg is silent, ckey reports its errors)\n"
    "  --json                  NDJSON events on stdout, one object a line:\n"
    "                          {\"event\":\"started\",\"frames\":N,\"to_key\":K,...},\n"
    "                          {\"event\":\"frame\",\"frame\":F,\"status\":\"keyed\"|\"skipped\"\n"
    "                          |\"failed\" (dry run: \"would_key\"),\"seconds\":T,...},\n"
    "                          {\"event\":\"warning\",\"message\":...},\n"
    "                          {\"event\":\"done\",\"keyed\":K,\"skipped\":S,\"failed\":X,\n"
    "                          \"seconds\":T,\"fps\":F,\"model_fps\":M,...},\n"
    "                          or {\"event\":\"error\",\"message\":...} before exit 1\n"
    "                          (interrupted: \"interrupted\":true,\"signal\":...)\n"
    "  -h, --help              this help\n"
    "\n"
    "Progress goes to stderr: a one-line counter (frame i/n, fps, model fps,\n"
    "ETA) when stderr is a terminal, one line per frame otherwise (none with\n"
    "--json). Two rates are reported: end to end (frames written per second of\n"
    "the run: read + key + post + write, overlapped) and model only (frames per\n"
    "second of time inside the network); the summary line gives both.\n"
    "\n"
    "SIGINT (Ctrl-C) or SIGTERM stops the run cleanly: the frame being keyed\n"
    "and those before it are written, nothing is left half written, a video\n"
    "output is not kept; a re-run resumes. A second signal ends ckey at once.\n"
    "\n"
    "exit codes: 0 success, 1 runtime failure (the message names the file and\n"
    "the frame; frames written before it are complete), 2 usage error, 3 done\n"
    "but frames were skipped as bad (--on-error skip), 130 interrupted by\n"
    "SIGINT, 143 by SIGTERM (128 + the signal number).\n";

static const char *file_ext(const char *name) {
    const char *dot = strrchr(name, '.');
    return dot && dot != name ? dot + 1 : "";
}

static int is_video_ext(const char *e) {
    static const char *const v[] = {"mp4", "mov", "avi", "mkv", "mxf", "webm", "m4v", "mpg",
                                    "mpeg", "wmv", "flv", "prores"};
    for (size_t i = 0; i < sizeof v / sizeof v[0]; i++)
        if (!strcasecmp(e, v[i])) return 1;
    return 0;
}

static char *path2(const char *dir, const char *name) {
    size_t a = strlen(dir), b = strlen(name);
    char *p = malloc(a + b + 2);
    if (!p) return NULL;
    memcpy(p, dir, a);
    size_t k = a;
    if (a && dir[a - 1] != '/') p[k++] = '/';
    memcpy(p + k, name, b + 1);
    return p;
}

/* The name of a clip for its video outputs: the last component of `path`
 * (made absolute first, so "." has a name), without the extension when it
 * is a file. Malloc'd. */
static char *clip_name(const char *path) {
    char *abs = realpath(path, NULL);
    const char *p = abs ? abs : path;
    size_t n = strlen(p);
    while (n > 1 && p[n - 1] == '/') n--;
    size_t b = n;
    while (b > 0 && p[b - 1] != '/') b--;
    char *name = strndup(p + b, n - b);
    free(abs);
    if (!name) return NULL;
    struct stat st;
    char *dot = strrchr(name, '.');
    if (dot && dot != name && stat(path, &st) == 0 && !S_ISDIR(st.st_mode)) *dot = 0;
    if (!*name || !strcmp(name, "/")) {
        free(name);
        name = strdup("clip");
    }
    return name;
}

/* State of one `key` run shared by its messages and the progress callback. */
typedef struct key_ctx {
    int json, tty;
    int64_t total;   /* frames in the plan (keyed + skipped + failed) */
    int64_t to_key;
    int64_t pos;     /* events so far */
    int64_t warnings; /* CKEY_SHOT_WARNING events */
} key_ctx;

/*
 * SIGINT / SIGTERM during `key`: the handler only records the signal; the
 * shot runner polls it (ckey_shot_options.cancel) and stops after the frame
 * in flight. SA_RESETHAND: a second signal takes the default action at once.
 */
static volatile sig_atomic_t stop_signal;

static void on_stop_signal(int sig) { stop_signal = sig; }

static int stop_requested(void *user) {
    (void)user;
    return stop_signal != 0;
}

static void install_stop_handlers(void) {
    struct sigaction sa;
    memset(&sa, 0, sizeof sa);
    sa.sa_handler = on_stop_signal;
    sigemptyset(&sa.sa_mask);
    sa.sa_flags = SA_RESTART | SA_RESETHAND;
    sigaction(SIGINT, &sa, NULL);
    sigaction(SIGTERM, &sa, NULL);
}

/* Runtime failure of `key`: stderr message, and with --json an error event. */
static int key_fail(const key_ctx *k, ckey_status st, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));
static int key_fail(const key_ctx *k, ckey_status st, const char *fmt, ...) {
    char msg[4600];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof msg, fmt, ap);
    va_end(ap);
    fprintf(stderr, "ckey: error: %s\n", msg);
    if (k->json) {
        printf("{\"event\":\"error\",\"status\":");
        json_str(stdout, ckey_status_name(st));
        printf(",\"message\":");
        json_str(stdout, msg);
        printf("}\n");
        fflush(stdout);
    }
    return EXIT_RUNTIME;
}

static void key_warning(const key_ctx *k, const char *msg) {
    fprintf(stderr, "ckey: warning: %s\n", msg);
    if (k->json) {
        printf("{\"event\":\"warning\",\"message\":");
        json_str(stdout, msg);
        printf("}\n");
        fflush(stdout);
    }
}

static void key_warning_cb(void *user, const char *msg) { key_warning(user, msg); }

static void fmt_eta(char *buf, size_t cap, double s) {
    if (!(s >= 0) || s > 1e7) {
        snprintf(buf, cap, "--:--");
        return;
    }
    long t = (long)(s + 0.5);
    if (t >= 3600) snprintf(buf, cap, "%ld:%02ld:%02ld", t / 3600, (t / 60) % 60, t % 60);
    else snprintf(buf, cap, "%ld:%02ld", t / 60, t % 60);
}

/* Progress: one call per planned frame, in frame order (ckey_shot_run). */
static void key_event(void *user, const ckey_shot_event *ev) {
    key_ctx *k = user;
    const long long fr = (long long)ev->frame->number;
    const long long pos = (long long)++k->pos;
    /* end to end: frames written per second of the run so far; model only:
     * frames per second spent inside the network */
    const double fps = ev->keyed > 0 && ev->elapsed > 0 ? ev->keyed / ev->elapsed : 0.0;
    const double mfps = ev->keyed > 0 && ev->model_total > 0 ? ev->keyed / ev->model_total : 0.0;
    if (ev->kind == CKEY_SHOT_WARNING) {
        /* about the frame whose event follows: not a position of its own */
        k->pos--;
        k->warnings++;
        if (k->json) {
            printf("{\"event\":\"warning\",\"frame\":%lld,\"message\":", fr);
            json_str(stdout, ev->message);
            printf("}\n");
            fflush(stdout);
        } else if (k->warnings <= 3) {
            fprintf(stderr, "%sckey: warning: %s%s\n", k->tty ? "\n" : "", ev->message,
                    k->warnings == 3 ? " (further warnings are counted, not shown; --json lists "
                                       "them all)" : "");
        }
        return;
    }
    if (ev->kind == CKEY_SHOT_SKIPPED) {
        if (k->json)
            printf("{\"event\":\"frame\",\"frame\":%lld,\"status\":\"skipped\",\"seconds\":0}\n", fr);
        else if (!k->tty)
            fprintf(stderr, "frame %lld (%lld/%lld): skipped, outputs complete\n", fr, pos,
                    (long long)k->total);
    } else if (ev->kind == CKEY_SHOT_FAILED) {
        fprintf(stderr, "%sckey: warning: skipped (--on-error skip): %s\n", k->tty ? "\n" : "",
                ev->error->message);
        if (k->json) {
            printf("{\"event\":\"frame\",\"frame\":%lld,\"status\":\"failed\",\"seconds\":0,"
                   "\"error\":", fr);
            json_str(stdout, ckey_status_name(ev->error->status));
            printf(",\"message\":");
            json_str(stdout, ev->error->message);
            printf("}\n");
        }
    } else {
        const int64_t left = k->to_key - ev->keyed - ev->failed;
        char e[32];
        fmt_eta(e, sizeof e, left / (fps > 0 ? fps : 1e-9));
        if (k->json)
            printf("{\"event\":\"frame\",\"frame\":%lld,\"status\":\"keyed\",\"seconds\":%.6f,"
                   "\"model_seconds\":%.6f,\"width\":%d,\"height\":%d,\"index\":%lld,\"total\":%lld,"
                   "\"fps\":%.4f,\"model_fps\":%.4f}\n",
                   fr, ev->seconds, ev->model_seconds, (int)ev->width, (int)ev->height, pos,
                   (long long)k->total, fps, mfps);
        else if (k->tty)
            fprintf(stderr, "\rframe %lld/%lld (#%lld)  %.2f fps (model %.2f fps)  ETA %s   ", pos,
                    (long long)k->total, fr, fps, mfps, e);
        else
            fprintf(stderr, "frame %lld (%lld/%lld): keyed in %.3f s (model %.3f s), %.2f fps "
                            "(model %.2f fps), ETA %s\n",
                    fr, pos, (long long)k->total, ev->seconds, ev->model_seconds, fps, mfps, e);
    }
    if (k->json) fflush(stdout);
}

static int cmd_key(int argc, char **argv) {
    opts o;
    memset(&o, 0, sizeof o);
    o.cmd = "key";
    ckey_session_options_default(&o.so);
    default_device(&o.so);
    ckey_shot_options shot_defaults;
    ckey_shot_options_default(&shot_defaults);
    o.post = shot_defaults.post; /* despill 0.5, as upstream's shot command */
    o.exr = CKEY_EXR_PXR24;
    o.read_ahead = -1;
    int rc = parse_opts(argc, argv,
                        O_MODEL | O_HINT | O_OUT | O_SIZE | O_THREADS | O_STRENGTH | O_LINEAR | O_INPUT_SPACE |
                            O_DEVICE | O_PRECISION | O_BUDGET | O_JSON | O_PLATE | O_DESPILL | O_NO_DESPECKLE |
                            O_DESPECKLE_AREA | O_FRAMES | O_DRY_RUN | O_FORCE | O_EXR_COMPRESSION |
                            O_ON_ERROR | O_READ_AHEAD | O_RESIZE_BACK | O_DESPECKLE_MODE | O_VIDEO_OUT |
                            O_VERBOSE | O_FPS | O_WRITERS,
                        1, usage_key, &o);
    if (rc >= 0) return rc;
    /* FFmpeg's log level is process-wide: set once, before any thread decodes */
    ckey_video_set_log_level(o.verbose);
    key_ctx kc;
    memset(&kc, 0, sizeof kc);
    kc.json = o.json;
    kc.tty = !o.json && isatty(2);
    if (!require(&o, o.model, "--model")) return EXIT_USAGE;
    /* A video cannot resume or leave gaps: every frame, in one run. */
    if (o.video_out && o.have_frames)
        return usage_error(o.cmd, "--video-out encodes the whole clip: it cannot be combined with "
                                  "--frames");
    if (o.video_out && o.on_error == CKEY_ON_ERROR_SKIP)
        return usage_error(o.cmd, "--video-out needs every frame: it cannot be combined with "
                                  "--on-error skip");
    if (o.fps_num && !o.video_out)
        return usage_error(o.cmd, "--fps sets the frame rate of the --video-out videos: add "
                                  "--video-out prores|h264|both");

    /* plate_dir / hint_dir: a directory of frames, a video, or a directory
     * holding one video (ckey_source_open_video tells them apart) */
    char *plate_dir = NULL, *hint_dir = NULL, *out_dir = NULL, *clip = NULL;
    /* --hint auto: every frame's hint is made from its plate (ckey_auto_hint) */
    const int auto_hint = o.hint && !strcmp(o.hint, "auto");
    if (o.npositional == 1) {
        if (o.plate || (o.hint && !auto_hint) || o.out)
            return usage_error(o.cmd, "give either SHOT_DIR or --plate/--hint/--out, not both "
                                      "(--hint auto is allowed with SHOT_DIR)");
        const char *shot = o.positional[0];
        struct stat st;
        if (stat(shot, &st) == 0 && !S_ISDIR(st.st_mode))
            return key_fail(&kc, CKEY_ERR_INVALID_ARG,
                            "%s is not a clip directory (%s); for a video file use --plate %s "
                            "--hint VIDEO|DIR|auto --out DIR",
                            shot, is_video_ext(file_ext(shot)) ? "a video" : "a file", shot);
        plate_dir = path2(shot, "Input");
        hint_dir = auto_hint ? strdup("auto") : path2(shot, "AlphaHint");
        out_dir = path2(shot, "Output");
        clip = clip_name(shot);
    } else {
        if (!o.plate || !o.hint || !o.out)
            return usage_error(o.cmd, "expected SHOT_DIR, or all of --plate DIR, --hint DIR and "
                                      "--out DIR");
        plate_dir = strdup(o.plate);
        hint_dir = strdup(o.hint);
        out_dir = strdup(o.out);
        clip = clip_name(o.plate);
    }
    char *video_path[2] = {NULL, NULL}; /* OUT/<clip>_fg_alpha.mov, OUT/<clip>_comp.mp4 */

    ckey_source src;
    ckey_sink sink;
    memset(&src, 0, sizeof src);
    memset(&sink, 0, sizeof sink);
    uint8_t *plan = NULL;
    ckey_model *model = NULL;
    ckey_session *sess = NULL;
    int exit_code = EXIT_RUNTIME;
    ckey_error err;
    memset(&err, 0, sizeof err);

    if (!plate_dir || !hint_dir || !out_dir || !clip) {
        exit_code = key_fail(&kc, CKEY_ERR_NOMEM, "out of memory");
        goto done;
    }
    if (ckey_source_open_video(plate_dir, auto_hint ? NULL : hint_dir, 0, key_warning_cb, &kc, &src,
                               &err) != CKEY_OK ||
        ckey_sink_open_passes(out_dir, o.exr, &sink, &err) != CKEY_OK) {
        exit_code = key_fail(&kc, err.status, "%s", err.message);
        goto done;
    }

    /* The plan: frames within --frames; complete ones skipped (resume). A
     * plate without a hint stops here, before anything is keyed, unless
     * --on-error skip (then that frame fails in its turn). */
    plan = calloc((size_t)src.count + 1, 1);
    if (!plan) {
        exit_code = key_fail(&kc, CKEY_ERR_NOMEM, "out of memory");
        goto done;
    }
    int64_t first = -1, last = -1;
    for (int64_t i = 0; i < src.count; i++) {
        const ckey_shot_frame *f = &src.frames[i];
        if (o.have_frames && (f->number < o.frame_first || f->number > o.frame_last)) continue;
        if (!f->hint && o.on_error == CKEY_ON_ERROR_STOP) {
            exit_code = key_fail(&kc, CKEY_ERR_IO, "frame %lld: plate %s has no hint in %s (hints "
                                                   "pair with plates by frame number)",
                                 (long long)f->number, f->plate, hint_dir);
            goto done;
        }
        plan[i] = !o.force && sink.complete(sink.self, f) ? CKEY_SHOT_SKIP : CKEY_SHOT_KEY;
        kc.total++;
        if (plan[i] == CKEY_SHOT_KEY) kc.to_key++;
        if (first < 0) first = f->number;
        last = f->number;
    }
    if (kc.total == 0) {
        exit_code = key_fail(&kc, CKEY_ERR_INVALID_ARG, "no plate in %s has a frame number in %ld-%ld",
                             plate_dir, o.frame_first, o.frame_last);
        goto done;
    }
    const long long nitems = (long long)kc.total, to_key = (long long)kc.to_key;
    if (o.video_out) {
        if (nitems > to_key) {
            exit_code = key_fail(&kc, CKEY_ERR_INVALID_ARG,
                                 "%s already holds the passes of %lld of the %lld frames, and "
                                 "--video-out encodes the whole clip in one run (a video cannot "
                                 "resume): add --force to key every frame again, or leave out "
                                 "--video-out to resume the passes",
                                 out_dir, nitems - to_key, nitems);
            goto done;
        }
        static const char *const suffix[2] = {"_fg_alpha.mov", "_comp.mp4"};
        for (int k = 0; k < 2; k++) {
            if (!(o.video_out & (k == 0 ? VIDEO_OUT_PRORES : VIDEO_OUT_H264))) continue;
            const size_t cap = strlen(clip) + strlen(suffix[k]) + 1;
            char *name = malloc(cap);
            if (name) snprintf(name, cap, "%s%s", clip, suffix[k]);
            video_path[k] = name ? path2(out_dir, name) : NULL;
            free(name);
            if (!video_path[k]) {
                exit_code = key_fail(&kc, CKEY_ERR_NOMEM, "out of memory");
                goto done;
            }
        }
    }

    if (o.json) {
        printf("{\"event\":\"started\",\"frames\":%lld,\"to_key\":%lld,\"to_skip\":%lld,\"first\":%lld,"
               "\"last\":%lld,\"plate_dir\":",
               nitems, to_key, nitems - to_key, (long long)first, (long long)last);
        json_str(stdout, plate_dir);
        printf(",\"hint_dir\":");
        json_str(stdout, hint_dir);
        printf(",\"out\":");
        json_str(stdout, out_dir);
        printf(",\"model\":");
        json_str(stdout, o.model);
        for (int k = 0; k < 2; k++) {
            printf(k == 0 ? ",\"fg_alpha_video\":" : ",\"comp_video\":");
            if (video_path[k]) json_str(stdout, video_path[k]);
            else printf("null");
        }
        printf(",\"size\":%d,\"dry_run\":%s,\"on_error\":\"%s\"}\n", (int)o.so.size,
               o.dry_run ? "true" : "false", o.on_error == CKEY_ON_ERROR_SKIP ? "skip" : "stop");
        fflush(stdout);
    }

    if (o.dry_run) {
        for (int64_t i = 0; i < src.count; i++) {
            if (plan[i] == CKEY_SHOT_EXCLUDE) continue;
            const ckey_shot_frame *f = &src.frames[i];
            const int skip = plan[i] == CKEY_SHOT_SKIP;
            if (o.json)
                printf("{\"event\":\"frame\",\"frame\":%lld,\"status\":\"%s\",\"seconds\":0}\n",
                       (long long)f->number, skip ? "skipped" : "would_key");
            else
                printf("frame %lld: %s  (%s + %s)\n", (long long)f->number,
                       skip ? "skip (outputs complete)" : "key", f->plate, f->hint ? f->hint : "no hint");
        }
        if (o.json)
            printf("{\"event\":\"done\",\"keyed\":0,\"skipped\":%lld,\"would_key\":%lld,\"seconds\":0,"
                   "\"fps\":0,\"dry_run\":true}\n",
                   nitems - to_key, to_key);
        else
            printf("dry run: %lld frame%s would be keyed, %lld skipped; nothing written\n", to_key,
                   to_key == 1 ? "" : "s", nitems - to_key);
        for (int k = 0; k < 2 && !o.json; k++)
            if (video_path[k]) printf("would write %s\n", video_path[k]);
        exit_code = EXIT_OK;
        goto done;
    }

    /* From here a SIGINT / SIGTERM stops the run cleanly (the runner polls it). */
    install_stop_handlers();
    const double t_start = now_seconds();
    if (to_key > 0) {
        if (ckey_model_load(o.model, &model, &err) != CKEY_OK) {
            exit_code = key_fail(&kc, err.status, "%s", err.message);
            goto done;
        }
        ckey_model_info mi;
        memset(&mi, 0, sizeof mi);
        ckey_model_get_info(model, &mi);
        if (is_test_model(&mi)) {
            if (o.json) {
                char msg[1200];
                snprintf(msg, sizeof msg, "%s is a reduced test configuration (embed_dim %d); its "
                         "mattes are not meaningful", o.model, (int)mi.embed_dim);
                key_warning(&kc, msg);
            } else {
                test_model_notice(o.model, &mi);
            }
        }
        if (ckey_session_create(model, &o.so, &sess, &err) != CKEY_OK) {
            exit_code = key_fail(&kc, err.status, "%s", err.message);
            goto done;
        }
    }
    const double setup_s = now_seconds() - t_start;

    if (o.video_out) {
        /* the passes sink inside a tee that also encodes the videos */
        ckey_video_tee_options vo;
        memset(&vo, 0, sizeof vo);
        vo.fg_alpha = video_path[0];
        vo.comp = video_path[1];
        /* --fps, else the plate video's rate; 0/0 (a sequence) is 24 */
        vo.rate_num = o.fps_num ? o.fps_num : src.rate_num;
        vo.rate_den = o.fps_num ? o.fps_den : src.rate_den;
        vo.despill_strength = o.post.despill_strength;
        ckey_sink tee;
        if (ckey_sink_open_video_tee(&sink, &vo, &tee, &err) != CKEY_OK) {
            exit_code = key_fail(&kc, err.status, "%s", err.message);
            goto done;
        }
        sink = tee;
    }

    ckey_shot_options so;
    ckey_shot_options_default(&so);
    so.post = o.post;
    so.input_space = o.space;
    so.on_error = o.on_error;
    so.cancel = stop_requested;
    if (o.read_ahead >= 0) so.read_ahead = o.read_ahead;
    so.writers = o.writers;
    ckey_shot_stats stats;
    const ckey_status st = ckey_shot_run(sess, &src, &sink, plan, &so, key_event, &kc, &stats, &err);
    if (kc.tty && kc.pos > 0) fputc('\n', stderr);
    if (st == CKEY_ERR_CANCELLED) {
        const int sig = (int)stop_signal;
        const char *sname = sig == SIGTERM ? "SIGTERM" : sig == SIGINT ? "SIGINT" : "signal";
        fprintf(stderr, "ckey: interrupted by %s: %s; %lld frame%s written%s, a re-run resumes "
                        "from there\n",
                sname, err.message, (long long)stats.keyed, stats.keyed == 1 ? "" : "s",
                o.video_out ? " (no video kept)" : "");
        if (o.json) {
            printf("{\"event\":\"error\",\"status\":\"%s\",\"interrupted\":true,\"signal\":\"%s\","
                   "\"keyed\":%lld,\"skipped\":%lld,\"failed\":%lld,\"seconds\":%.6f,\"message\":",
                   ckey_status_name(st), sname, (long long)stats.keyed, (long long)stats.skipped,
                   (long long)stats.failed, stats.seconds);
            json_str(stdout, err.message);
            printf("}\n");
        }
        exit_code = 128 + (sig > 0 ? sig : SIGINT);
        goto done;
    }
    if (st != CKEY_OK) {
        exit_code = key_fail(&kc, err.status, "%s", err.message);
        if (!o.json)
            fprintf(stderr, "ckey: %lld frame%s written before the error; a re-run resumes from "
                            "there\n", (long long)stats.keyed, stats.keyed == 1 ? "" : "s");
        goto done;
    }
    const double fps = stats.keyed > 0 && stats.seconds > 0 ? stats.keyed / stats.seconds : 0.0;
    const double mfps = stats.keyed > 0 && stats.model_seconds > 0 ? stats.keyed / stats.model_seconds : 0.0;
    if (o.json) {
        printf("{\"event\":\"done\",\"keyed\":%lld,\"skipped\":%lld,\"failed\":%lld,\"seconds\":%.6f,"
               "\"fps\":%.4f,\"model_seconds\":%.6f,\"model_fps\":%.4f,\"read_seconds\":%.6f,"
               "\"write_seconds\":%.6f,\"setup_seconds\":%.6f,\"read_ahead\":%d,\"warnings\":%lld,"
               "\"despill\":%g,\"out\":",
               (long long)stats.keyed, (long long)stats.skipped, (long long)stats.failed,
               stats.seconds, fps, stats.model_seconds, mfps, stats.read_seconds,
               stats.write_seconds, setup_s, (int)so.read_ahead, (long long)kc.warnings,
               (double)so.post.despill_strength);
        json_str(stdout, out_dir);
        printf(",\"videos\":[");
        for (int k = 0, n = 0; k < 2; k++)
            if (video_path[k]) {
                if (n++) printf(",");
                json_str(stdout, video_path[k]);
            }
        printf("]}\n");
    } else {
        char failed[64] = "";
        if (stats.failed) snprintf(failed, sizeof failed, ", FAILED %lld", (long long)stats.failed);
        printf("keyed %lld frame%s, skipped %lld%s, in %.3f s: %.2f fps end to end (read, key, "
               "post, write), %.2f fps model only; model load + session %.3f s; passes in %s\n",
               (long long)stats.keyed, stats.keyed == 1 ? "" : "s", (long long)stats.skipped,
               failed, stats.seconds, fps, mfps, setup_s, out_dir);
        if (kc.warnings > 3)
            fprintf(stderr, "ckey: %lld warnings in all\n", (long long)kc.warnings);
        for (int k = 0; k < 2; k++)
            if (video_path[k]) printf("wrote %s\n", video_path[k]);
    }
    exit_code = stats.failed ? EXIT_PARTIAL : EXIT_OK;

done:
    fflush(stdout);
    free(plan);
    ckey_source_close(&src);
    ckey_sink_close(&sink);
    ckey_session_free(sess);
    ckey_model_free(model);
    free(plate_dir);
    free(hint_dir);
    free(out_dir);
    free(clip);
    free(video_path[0]);
    free(video_path[1]);
    return exit_code;
}

/* ----------------------------------------------------------------- info */

static void print_list(const int32_t *v, int n) {
    for (int i = 0; i < n; i++) printf("%s%d", i ? "/" : "", (int)v[i]);
}

static void json_list(const int32_t *v, int n) {
    putchar('[');
    for (int i = 0; i < n; i++) printf("%s%d", i ? ", " : "", (int)v[i]);
    putchar(']');
}

static int cmd_info(int argc, char **argv) {
    opts o;
    memset(&o, 0, sizeof o);
    o.cmd = "info";
    ckey_session_options_default(&o.so);
    default_device(&o.so);
    int rc = parse_opts(argc, argv, O_MODEL | O_SIZE | O_THREADS | O_DEVICE | O_PRECISION | O_BUDGET | O_JSON | O_MEMORY,
                        0, usage_info, &o);
    if (rc >= 0) return rc;
    if (!require(&o, o.model, "--model")) return EXIT_USAGE;

    ckey_error err;
    memset(&err, 0, sizeof err);
    ckey_model *model = NULL;
    double t0 = now_seconds();
    if (ckey_model_load(o.model, &model, &err) != CKEY_OK) return fail_err(o.json, &err);
    const double t_load = now_seconds() - t0;
    ckey_model_info mi;
    memset(&mi, 0, sizeof mi);
    ckey_model_get_info(model, &mi);
    ckey_memory_plan plan;
    memset(&plan, 0, sizeof plan);
    t0 = now_seconds();
    ckey_status st = ckey_plan_memory(model, &o.so, &plan, &err);
    const double t_plan = now_seconds() - t0;
    if (st == CKEY_OK && o.memory && !o.json) {
        printf("planned buffers (tag, size, offset in the arena, lifetime in op events; -1 = to the end):\n");
        st = ckey_plan_memory_print(model, &o.so, stdout, &err);
        printf("\n");
    }
    ckey_model_free(model);
    if (st != CKEY_OK) return fail_err(o.json, &err);
    const int test_model = is_test_model(&mi);
    const int ns = mi.num_stages < 0 ? 0 : mi.num_stages > 4 ? 4 : mi.num_stages;

    if (o.json) {
        printf("{\"ok\": true, \"command\": \"info\", \"model\": ");
        json_str(stdout, o.model);
        printf(", \"test_weights\": %s, \"architecture\": {\"embed_dim\": %d, \"head_dim\": %d, "
               "\"num_blocks\": %d, \"num_stages\": %d, \"stage_blocks\": ",
               test_model ? "true" : "false", (int)mi.embed_dim, (int)mi.head_dim,
               (int)mi.num_blocks, (int)mi.num_stages);
        json_list(mi.stage_blocks, ns);
        printf(", \"stage_dims\": ");
        json_list(mi.stage_dims, ns);
        printf(", \"stage_heads\": ");
        json_list(mi.stage_heads, ns);
        printf(", \"decoder_dim\": %d, \"refiner_dim\": %d, \"refiner_groups\": %d, "
               "\"pos_embed_grid\": %d, \"native_size\": %d}, \"num_params\": %lld, ",
               (int)mi.decoder_dim, (int)mi.refiner_dim, (int)mi.refiner_groups,
               (int)mi.pos_embed_grid, (int)mi.native_size, (long long)mi.num_params);
        printf("\"size\": %d, \"seconds\": {\"load\": %.6f, \"plan\": %.6f}, \"memory\": ",
               (int)o.so.size, t_load, t_plan);
        print_plan_json(&plan);
        printf("}\n");
        if (test_model) test_model_notice(o.model, &mi);
        return EXIT_OK;
    }
    printf("model         %s%s\n", o.model, test_model ? " (reduced test configuration)" : "");
    printf("encoder       hiera: %d stages, blocks ", (int)mi.num_stages);
    print_list(mi.stage_blocks, ns);
    printf(" (%d in all), dims ", (int)mi.num_blocks);
    print_list(mi.stage_dims, ns);
    printf(", heads ");
    print_list(mi.stage_heads, ns);
    printf(", head_dim %d, embed_dim %d\n", (int)mi.head_dim, (int)mi.embed_dim);
    printf("decoders      dim %d; refiner dim %d, %d GroupNorm groups\n", (int)mi.decoder_dim,
           (int)mi.refiner_dim, (int)mi.refiner_groups);
    printf("pos-embed     %d x %d grid (native S = %d)\n", (int)mi.pos_embed_grid,
           (int)mi.pos_embed_grid, (int)mi.native_size);
    printf("parameters    %lld (%.1f M)\n", (long long)mi.num_params, (double)mi.num_params / 1e6);
    const int on_gpu = o.so.device == CKEY_DEVICE_CUDA;
    const ckey_precision prec = on_gpu ? (o.so.precision == CKEY_PRECISION_DEFAULT ? CKEY_PRECISION_FP16 : o.so.precision)
                                       : CKEY_PRECISION_FP32;
    char devname[32];
    if (on_gpu) snprintf(devname, sizeof devname, "cuda:%d", (int)o.so.device_index);
    else snprintf(devname, sizeof devname, "the CPU");
    printf("memory plan   at S = %d on %s, %s (%s memory):\n", (int)o.so.size, devname, ckey_precision_name(prec),
           on_gpu ? "device" : "host");
    printf("  weights     %10.1f MiB\n", mib(plan.weight_bytes));
    printf("  arena       %10.1f MiB (of which scratch %s%.1f MiB)\n", mib(plan.arena_bytes),
           on_gpu ? "at most " : "", mib(plan.scratch_bytes));
    printf("  peak        %10.1f MiB\n", mib(plan.peak_bytes));
    printf("  buffers     %10d   (without reuse they would take %.1f MiB)\n",
           (int)plan.num_buffers, mib(plan.naive_bytes));
    printf("time          load %.3f s, plan %.3f s\n", t_load, t_plan);
    if (test_model) test_model_notice(o.model, &mi);
    return EXIT_OK;
}

/* -------------------------------------------------------------- convert */

static int cmd_convert(int argc, char **argv) {
    opts o;
    memset(&o, 0, sizeof o);
    o.cmd = "convert";
    int rc = parse_opts(argc, argv, O_JSON, 2, usage_convert, &o);
    if (rc >= 0) return rc;
    if (o.npositional != 2)
        return usage_error(o.cmd, "expected IN and OUT.safetensors, got %d argument%s",
                           o.npositional, o.npositional == 1 ? "" : "s");
    const char *in = o.positional[0], *out = o.positional[1];
    ckey_error err;
    memset(&err, 0, sizeof err);
    ckey_model *model = NULL;
    double t0 = now_seconds();
    if (ckey_model_load(in, &model, &err) != CKEY_OK) return fail_err(o.json, &err);
    const double t_load = now_seconds() - t0;
    ckey_model_info mi;
    memset(&mi, 0, sizeof mi);
    ckey_model_get_info(model, &mi);
    t0 = now_seconds();
    ckey_status st = ckey_model_save_safetensors(model, out, &err);
    const double t_save = now_seconds() - t0;
    ckey_model_free(model);
    if (st != CKEY_OK) return fail_err(o.json, &err);
    if (o.json) {
        printf("{\"ok\": true, \"command\": \"convert\", \"input\": ");
        json_str(stdout, in);
        printf(", \"output\": ");
        json_str(stdout, out);
        printf(", \"num_params\": %lld, \"seconds\": {\"load\": %.6f, \"save\": %.6f}}\n",
               (long long)mi.num_params, t_load, t_save);
    } else {
        printf("wrote %s (%lld parameters; load %.3f s, save %.3f s)\n", out,
               (long long)mi.num_params, t_load, t_save);
    }
    return EXIT_OK;
}

/* -------------------------------------------------------------- devices */

static int cmd_devices(int argc, char **argv) {
    opts o;
    memset(&o, 0, sizeof o);
    o.cmd = "devices";
    int rc = parse_opts(argc, argv, O_JSON, 0, usage_devices, &o);
    if (rc >= 0) return rc;
    const ckey_device_kind kinds[2] = {CKEY_DEVICE_CPU, CKEY_DEVICE_CUDA};
    if (o.json) printf("{\"ok\": true, \"command\": \"devices\", \"devices\": [");
    int first = 1;
    for (int k = 0; k < 2; k++) {
        const int n = ckey_device_count(kinds[k]);
        for (int i = 0; i < n; i++) {
            ckey_device_info d;
            ckey_error err;
            memset(&err, 0, sizeof err);
            if (ckey_device_get_info(kinds[k], i, &d, &err) != CKEY_OK) {
                if (o.json) printf("]}\n");
                return fail_err(o.json, &err);
            }
            const char *kn = kinds[k] == CKEY_DEVICE_CPU ? "cpu" : "cuda";
            if (o.json) {
                printf("%s{\"device\": \"%s:%d\", \"name\": ", first ? "" : ", ", kn, i);
                json_str(stdout, d.name);
                printf(", \"units\": %d, \"memory_total\": %lld, \"memory_free\": %lld", (int)d.units,
                       (long long)d.memory_total, (long long)d.memory_free);
                if (kinds[k] == CKEY_DEVICE_CUDA)
                    printf(", \"compute_capability\": \"%d.%d\"", (int)d.compute_major, (int)d.compute_minor);
                printf("}");
            } else if (kinds[k] == CKEY_DEVICE_CPU) {
                printf("cpu:%d   %s, %d cores, %.1f GiB memory (%.1f GiB free)\n", i, d.name, (int)d.units,
                       d.memory_total / 1073741824.0, d.memory_free / 1073741824.0);
            } else {
                printf("cuda:%d  %s, compute %d.%d, %d multiprocessors, %.1f GiB (%.1f GiB free)\n", i, d.name,
                       (int)d.compute_major, (int)d.compute_minor, (int)d.units, d.memory_total / 1073741824.0,
                       d.memory_free / 1073741824.0);
            }
            first = 0;
        }
    }
    if (o.json) printf("]}\n");
    else if (ckey_device_count(CKEY_DEVICE_CUDA) == 0) printf("(no CUDA device)\n");
    return EXIT_OK;
}

/* -------------------------------------------------------------- version */

static int cmd_version(int argc, char **argv) {
    opts o;
    memset(&o, 0, sizeof o);
    o.cmd = "version";
    int rc = parse_opts(argc, argv, O_JSON, 0, usage_version, &o);
    if (rc >= 0) return rc;
    if (o.json) {
        printf("{\"ok\": true, \"command\": \"version\", \"version\": ");
        json_str(stdout, ckey_version());
        printf(", \"api\": \"%d.%d.%d\"}\n", CKEY_VERSION_MAJOR, CKEY_VERSION_MINOR,
               CKEY_VERSION_PATCH);
    } else {
        printf("ckey %s\n", ckey_version());
    }
    return EXIT_OK;
}

int main(int argc, char **argv) {
    if (argc < 2) {
        fputs(usage_main, stderr);
        return EXIT_USAGE;
    }
    const char *cmd = argv[1];
    if (!strcmp(cmd, "-h") || !strcmp(cmd, "--help") || !strcmp(cmd, "help")) {
        fputs(usage_main, stdout);
        return EXIT_OK;
    }
    if (!strcmp(cmd, "--version")) return cmd_version(argc - 1, argv + 1);
    if (!strcmp(cmd, "run")) return cmd_run(argc - 1, argv + 1);
    if (!strcmp(cmd, "key")) return cmd_key(argc - 1, argv + 1);
    if (!strcmp(cmd, "info")) return cmd_info(argc - 1, argv + 1);
    if (!strcmp(cmd, "convert")) return cmd_convert(argc - 1, argv + 1);
    if (!strcmp(cmd, "version")) return cmd_version(argc - 1, argv + 1);
    if (!strcmp(cmd, "devices")) return cmd_devices(argc - 1, argv + 1);
    return usage_error(NULL, "unknown command '%s' (run, key, info, convert, devices, version)", cmd);
}
