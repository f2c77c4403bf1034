/*
 * ckey -- command-line front end of libckey. Uses only the public header.
 *
 *   ckey run --model M --image plate.png --hint hint.png --out DIR [...]
 *   ckey key SHOT_DIR --model M [...]   (or --plate DIR --hint DIR --out DIR)
 *   ckey info --model M [--size S] [--json]
 *   ckey convert IN OUT.safetensors
 *   ckey version
 *
 * Exit codes: 0 success, 1 runtime failure ("ckey: error: ..."), 2 usage.
 */
#include <ctype.h>
#include <dirent.h>
#include <errno.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "ckey.h"

enum { EXIT_OK = 0, EXIT_RUNTIME = 1, EXIT_USAGE = 2 };

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
    "  key       key an image sequence: Matte/, FG/, Processed/ and Comp/ passes\n"
    "  info      describe a checkpoint and the memory a session would plan\n"
    "  convert   rewrite a checkpoint (.pth or .safetensors) as safetensors\n"
    "  devices   list the CPU and the CUDA devices ckey can use\n"
    "  version   print the library version\n"
    "\n"
    "'ckey <command> --help' describes a command's options.\n"
    "\n"
    "exit codes: 0 success, 1 runtime failure (message on stderr as\n"
    "'ckey: error: ...'), 2 usage error (bad or missing arguments).\n";

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
    "  --input-space S         srgb, linear or auto (default auto: an EXR plate is\n"
    "                          linear, other formats sRGB). A linear plate is\n"
    "                          converted to sRGB after the resize, as the official\n"
    "                          engine does\n"
    "  --linear                same as --input-space linear\n"
    "  --resize-back R         lanczos4 (default) or bilinear: how alpha and fg go\n"
    "                          from S back to the plate size. lanczos4 is cv2's\n"
    "                          INTER_LANCZOS4, the official CLI's default (CPU\n"
    "                          post-processing); bilinear is torchvision's\n"
    "                          antialiased resize (its --gpu-post path)\n"
    "  --device D              cpu (default), cuda or cuda:N\n"
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
    "  --device D       cpu (default), cuda or cuda:N\n"
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
    int space; /* 0 auto (EXR linear, else sRGB), 1 srgb, 2 linear */
    ckey_session_options so;
    /* key */
    const char *plate;
    ckey_post_options post;
    int dry_run, force, have_frames;
    long frame_first, frame_last;
    ckey_exr_compression exr;
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

static int parse_device(const char *s, ckey_session_options *so) {
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
       O_INPUT_SPACE = 1 << 20, O_RESIZE_BACK = 1 << 21, O_DESPECKLE_MODE = 1 << 22 };

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
    {"--resize-back", O_RESIZE_BACK, 1}, {"--despeckle-mode", O_DESPECKLE_MODE, 1},
};

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
            if (!strcmp(val, "auto")) o->space = 0;
            else if (!strcmp(val, "srgb")) o->space = 1;
            else if (!strcmp(val, "linear")) o->space = 2;
            else return usage_error(o->cmd, "--input-space '%s': expected srgb, linear or auto", val);
            o->linear = o->space == 2;
            break;
        case O_DEVICE:
            if (!parse_device(val, &o->so))
                return usage_error(o->cmd, "--device '%s': expected cpu, cuda or cuda:N", val);
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
        case O_DRY_RUN: o->dry_run = 1; break;
        case O_FORCE: o->force = 1; break;
        case O_EXR_COMPRESSION:
            if (!strcmp(val, "pxr24")) o->exr = CKEY_EXR_PXR24;
            else if (!strcmp(val, "zip")) o->exr = CKEY_EXR_ZIP;
            else if (!strcmp(val, "none")) o->exr = CKEY_EXR_NONE;
            else return usage_error(o->cmd, "--exr-compression '%s': expected zip, pxr24 or none", val);
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
    int rc = parse_opts(argc, argv,
                        O_MODEL | O_IMAGE | O_HINT | O_OUT | O_SIZE | O_THREADS | O_STRENGTH |
                            O_LINEAR | O_INPUT_SPACE | O_DEVICE | O_BUDGET | O_JSON | O_RESIZE_BACK,
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
    frame.input_is_linear = o.space == 2 || (o.space == 0 && !strcasecmp(file_ext(o.image), "exr"));
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
               "\"refiner_strength\": %g, \"input_is_linear\": %s, \"test_weights\": %s, ",
               (int)plate.width, (int)plate.height, (int)o.so.size, (int)o.so.threads,
               (double)o.so.refiner_strength, frame.input_is_linear ? "true" : "false",
               test_model ? "true" : "false");
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
    "       ckey key --plate DIR --hint DIR --out DIR --model M [options]\n"
    "\n"
    "Keys an image sequence: loads the model once, then for each frame reads the\n"
    "plate and its alpha hint, runs the network and the official post-processing\n"
    "(despeckle, despill, premultiply, checkerboard comp) and writes four passes.\n"
    "SHOT_DIR is a clip in the official layout: frames in SHOT_DIR/Input/, hints\n"
    "in SHOT_DIR/AlphaHint/, passes written under SHOT_DIR/Output/.\n"
    "\n"
    "Sequences: the files of a directory named *.png, *.jpg, *.jpeg, *.tif,\n"
    "*.tiff or *.exr (any case; other files are ignored). A file's frame number\n"
    "is the last run of digits in its name (plate_0042.png -> 42). Plates and\n"
    "hints pair by frame number. Video files (mp4, mov, ...) are not supported\n"
    "yet. Errors (exit 1, naming the file and frame): a plate without a hint, two\n"
    "files with one frame number, a name without digits, a hint whose size\n"
    "differs from its plate. Hints without a plate are ignored (a warning).\n"
    "\n"
    "Outputs, per frame, named after the plate (<stem> = its name without the\n"
    "extension, so the frame number is kept), directories created as needed:\n"
    "  OUT/Matte/<stem>.exr      1 channel (A): linear alpha, raw network output\n"
    "  OUT/FG/<stem>.exr         3 channels: straight sRGB fg, raw network output\n"
    "  OUT/Processed/<stem>.exr  4 channels: linear premultiplied RGBA after\n"
    "                            despeckle and despill\n"
    "  OUT/Comp/<stem>.png       8-bit sRGB preview over a checkerboard\n"
    "EXR files are HALF. Every file is written atomically (temp file + rename),\n"
    "so a frame whose four outputs exist is complete and is skipped on a re-run\n"
    "(resume) unless --force.\n"
    "\n"
    "options:\n"
    "  --model PATH            checkpoint (.pth or .safetensors); required\n"
    "  --plate DIR             plate frames (instead of SHOT_DIR)\n"
    "  --hint DIR|auto         alpha hint frames (instead of SHOT_DIR), or auto: a rough\n"
    "                          chroma-key hint made from each plate (also with SHOT_DIR,\n"
    "                          which then needs no AlphaHint/)\n"
    "  --out DIR               output root (instead of SHOT_DIR/Output)\n"
    "  --size S                network resolution, a multiple of 32 (default 2048)\n"
    "  --threads N             CPU worker threads, 0 = all cores (default 0)\n"
    "  --device D              cpu (default), cuda or cuda:N\n"
    "  --budget BYTES          memory budget, e.g. 800M or 1.5G (default: none)\n"
    "  --refiner-strength F    scale of the refiner's corrections (default 1)\n"
    "  --despill F             despill strength 0 .. 1 (default 1)\n"
    "  --no-despeckle          keep small matte islands (default: despeckle on)\n"
    "  --despeckle-area N      islands below N pixels are removed (default 400)\n"
    "  --resize-back R         lanczos4 (default) or bilinear: the resize from S\n"
    "                          back to the plate (upstream's CPU / GPU\n"
    "                          post-processing; see ckey run --help)\n"
    "  --despeckle-mode M      opencv (default) or torch: upstream's\n"
    "                          clean_matte_opencv (CLI default) or\n"
    "                          clean_matte_torch (its --gpu-post path, with\n"
    "                          --resize-back bilinear)\n"
    "  --input-space S         srgb, linear or auto (default auto: EXR plates, by\n"
    "                          extension, are linear, other formats sRGB)\n"
    "  --linear                same as --input-space linear\n"
    "  --frames A-B            only frame numbers A to B inclusive (or one: N)\n"
    "  --exr-compression C     pxr24 (default), zip or none\n"
    "  --dry-run               list the frames that would be keyed or skipped;\n"
    "                          writes nothing and loads no model\n"
    "  --force                 re-key frames whose outputs already exist\n"
    "  --json                  NDJSON events on stdout, one object a line:\n"
    "                          {\"event\":\"started\",\"frames\":N,\"to_key\":K,...},\n"
    "                          {\"event\":\"frame\",\"frame\":F,\"status\":\"keyed\"|\"skipped\"\n"
    "                          (dry run: \"would_key\"),\"seconds\":T,...},\n"
    "                          {\"event\":\"warning\",\"message\":...},\n"
    "                          {\"event\":\"done\",\"keyed\":K,\"skipped\":S,\"seconds\":T,\"fps\":F},\n"
    "                          or {\"event\":\"error\",\"message\":...} before exit 1\n"
    "  -h, --help              this help\n"
    "\n"
    "Progress goes to stderr: a one-line counter (frame i/n, fps, ETA) when\n"
    "stderr is a terminal, one line per frame otherwise (none with --json). The\n"
    "end-to-end rate (read + key + post + write) is reported at the end.\n"
    "\n"
    "exit codes: 0 success, 1 runtime failure, 2 usage error.\n";

typedef struct seq_file {
    char *name;   /* file name within the directory */
    long frame;
} seq_file;

typedef struct seq {
    seq_file *f;
    int n, cap;
} seq;

static void seq_free(seq *s) {
    for (int i = 0; i < s->n; i++) free(s->f[i].name);
    free(s->f);
    memset(s, 0, sizeof *s);
}

static const char *file_ext(const char *name) {
    const char *dot = strrchr(name, '.');
    return dot && dot != name ? dot + 1 : "";
}

static int is_image_ext(const char *e) {
    static const char *const ok[] = {"png", "jpg", "jpeg", "tif", "tiff", "exr"};
    for (size_t i = 0; i < sizeof ok / sizeof ok[0]; i++)
        if (!strcasecmp(e, ok[i])) return 1;
    return 0;
}

static int is_video_ext(const char *e) {
    static const char *const v[] = {"mp4", "mov", "avi", "mkv", "mxf", "webm", "m4v", "mpg",
                                    "mpeg", "wmv", "flv", "prores"};
    for (size_t i = 0; i < sizeof v / sizeof v[0]; i++)
        if (!strcasecmp(e, v[i])) return 1;
    return 0;
}

/* Last run of digits in the name (extension excluded); -1 when none. */
static long frame_number(const char *name) {
    const char *end = strrchr(name, '.');
    if (!end || end == name) end = name + strlen(name);
    const char *p = end;
    while (p > name && !isdigit((unsigned char)p[-1])) p--;
    if (p == name) return -1;
    const char *q = p;
    while (q > name && isdigit((unsigned char)q[-1])) q--;
    long v = 0;
    for (const char *c = q; c < p; c++) {
        if (v > 99999999L) return -2; /* too long */
        v = v * 10 + (*c - '0');
    }
    return v;
}

static int cmp_frame(const void *a, const void *b) {
    const seq_file *x = a, *y = b;
    if (x->frame != y->frame) return x->frame < y->frame ? -1 : 1;
    return strcmp(x->name, y->name);
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

/* Scan a sequence directory. Returns 1, or 0 with `why` set. */
static int scan_sequence(const char *dir, const char *what, seq *s, char *why, size_t cap) {
    memset(s, 0, sizeof *s);
    struct stat st;
    if (stat(dir, &st) != 0) {
        snprintf(why, cap, "%s directory %s: %s", what, dir, strerror(errno));
        return 0;
    }
    if (!S_ISDIR(st.st_mode)) {
        if (is_video_ext(file_ext(dir)))
            snprintf(why, cap, "%s: video input is not supported yet (extract the frames as an "
                               "image sequence)", dir);
        else
            snprintf(why, cap, "%s %s is not a directory of frames", what, dir);
        return 0;
    }
    DIR *d = opendir(dir);
    if (!d) {
        snprintf(why, cap, "cannot open %s directory %s: %s", what, dir, strerror(errno));
        return 0;
    }
    struct dirent *e;
    int ok = 1;
    while (ok && (e = readdir(d))) {
        const char *name = e->d_name;
        if (name[0] == '.') continue;
        const char *ext = file_ext(name);
        if (is_video_ext(ext)) {
            snprintf(why, cap, "%s/%s: video input is not supported yet (extract the frames as "
                               "an image sequence)", dir, name);
            ok = 0;
            break;
        }
        if (!is_image_ext(ext)) continue;
        long fr = frame_number(name);
        if (fr < 0) {
            snprintf(why, cap, "%s/%s: %s", dir, name,
                     fr == -1 ? "no frame number in the file name (expected digits, e.g. "
                                "plate_0001.png)"
                              : "frame number too large");
            ok = 0;
            break;
        }
        if (s->n == s->cap) {
            int nc = s->cap ? 2 * s->cap : 64;
            seq_file *nf = realloc(s->f, (size_t)nc * sizeof *nf);
            if (!nf) {
                snprintf(why, cap, "out of memory listing %s", dir);
                ok = 0;
                break;
            }
            s->f = nf;
            s->cap = nc;
        }
        s->f[s->n].name = strdup(name);
        s->f[s->n].frame = fr;
        if (!s->f[s->n].name) {
            snprintf(why, cap, "out of memory listing %s", dir);
            ok = 0;
            break;
        }
        s->n++;
    }
    closedir(d);
    if (!ok) {
        seq_free(s);
        return 0;
    }
    if (s->n) qsort(s->f, (size_t)s->n, sizeof *s->f, cmp_frame);
    for (int i = 1; i < s->n; i++) {
        if (s->f[i].frame == s->f[i - 1].frame) {
            snprintf(why, cap, "%s: frame %ld appears twice: %s/%s and %s/%s", what,
                     s->f[i].frame, dir, s->f[i - 1].name, dir, s->f[i].name);
            seq_free(s);
            return 0;
        }
    }
    return 1;
}

static const seq_file *seq_find(const seq *s, long frame) {
    int lo = 0, hi = s->n - 1;
    while (lo <= hi) {
        int mid = (lo + hi) / 2;
        if (s->f[mid].frame == frame) return &s->f[mid];
        if (s->f[mid].frame < frame) lo = mid + 1;
        else hi = mid - 1;
    }
    return NULL;
}

static int key_json;

/* Runtime failure of `key`: stderr message, and with --json an error event. */
static int key_fail(ckey_status st, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static int key_fail(ckey_status st, const char *fmt, ...) {
    char msg[4600];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof msg, fmt, ap);
    va_end(ap);
    fprintf(stderr, "ckey: error: %s\n", msg);
    if (key_json) {
        printf("{\"event\":\"error\",\"status\":");
        json_str(stdout, ckey_status_name(st));
        printf(",\"message\":");
        json_str(stdout, msg);
        printf("}\n");
        fflush(stdout);
    }
    return EXIT_RUNTIME;
}

static void key_warning(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
static void key_warning(const char *fmt, ...) {
    char msg[4600];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof msg, fmt, ap);
    va_end(ap);
    fprintf(stderr, "ckey: warning: %s\n", msg);
    if (key_json) {
        printf("{\"event\":\"warning\",\"message\":");
        json_str(stdout, msg);
        printf("}\n");
        fflush(stdout);
    }
}

static int file_exists(const char *p) {
    struct stat st;
    return stat(p, &st) == 0 && S_ISREG(st.st_mode);
}

enum { PASS_MATTE, PASS_FG, PASS_PROCESSED, PASS_COMP, NPASS };
static const char *const pass_dir[NPASS] = {"Matte", "FG", "Processed", "Comp"};

typedef struct key_item {
    const seq_file *plate, *hint;
    char *out[NPASS];
    int complete;
} key_item;

/* OUT/<Pass>/<stem>.<ext>; NULL on no memory. */
static char *pass_path(const char *out, int pass, const char *plate_name) {
    const char *dot = strrchr(plate_name, '.');
    size_t stem = dot && dot != plate_name ? (size_t)(dot - plate_name) : strlen(plate_name);
    size_t n = strlen(out) + strlen(pass_dir[pass]) + stem + 16;
    char *p = malloc(n);
    if (!p) return NULL;
    const size_t ol = strlen(out);
    snprintf(p, n, "%s%s%s/%.*s.%s", out, ol && out[ol - 1] == '/' ? "" : "/", pass_dir[pass],
             (int)stem, plate_name, pass == PASS_COMP ? "png" : "exr");
    return p;
}

static void fmt_eta(char *buf, size_t cap, double s) {
    if (!(s >= 0) || s > 1e7) {
        snprintf(buf, cap, "--:--");
        return;
    }
    long t = (long)(s + 0.5);
    if (t >= 3600) snprintf(buf, cap, "%ld:%02ld:%02ld", t / 3600, (t / 60) % 60, t % 60);
    else snprintf(buf, cap, "%ld:%02ld", t / 60, t % 60);
}

static int cmd_key(int argc, char **argv) {
    opts o;
    memset(&o, 0, sizeof o);
    o.cmd = "key";
    ckey_session_options_default(&o.so);
    ckey_post_options_default(&o.post);
    o.exr = CKEY_EXR_PXR24;
    int rc = parse_opts(argc, argv,
                        O_MODEL | O_HINT | O_OUT | O_SIZE | O_THREADS | O_STRENGTH | O_LINEAR | O_INPUT_SPACE |
                            O_DEVICE | O_BUDGET | O_JSON | O_PLATE | O_DESPILL | O_NO_DESPECKLE |
                            O_DESPECKLE_AREA | O_FRAMES | O_DRY_RUN | O_FORCE | O_EXR_COMPRESSION |
                            O_RESIZE_BACK | O_DESPECKLE_MODE,
                        1, usage_key, &o);
    if (rc >= 0) return rc;
    key_json = o.json;
    if (!require(&o, o.model, "--model")) return EXIT_USAGE;

    char *plate_dir = NULL, *hint_dir = NULL, *out_dir = NULL;
    /* --hint auto: every frame's hint is made from its plate (ckey_auto_hint) */
    const int auto_hint = o.hint && !strcmp(o.hint, "auto");
    static char auto_name[] = "auto";
    const seq_file auto_file = {auto_name, 0};
    if (o.npositional == 1) {
        if (o.plate || (o.hint && !auto_hint) || o.out)
            return usage_error(o.cmd, "give either SHOT_DIR or --plate/--hint/--out, not both "
                                      "(--hint auto is allowed with SHOT_DIR)");
        const char *shot = o.positional[0];
        struct stat st;
        if (stat(shot, &st) == 0 && !S_ISDIR(st.st_mode) && is_video_ext(file_ext(shot)))
            return key_fail(CKEY_ERR_UNSUPPORTED, "%s: video input is not supported yet", shot);
        plate_dir = path2(shot, "Input");
        hint_dir = auto_hint ? strdup("auto") : path2(shot, "AlphaHint");
        out_dir = path2(shot, "Output");
    } else {
        if (!o.plate || !o.hint || !o.out)
            return usage_error(o.cmd, "expected SHOT_DIR, or all of --plate DIR, --hint DIR and "
                                      "--out DIR");
        plate_dir = strdup(o.plate);
        hint_dir = strdup(o.hint);
        out_dir = strdup(o.out);
    }

    char why[4400];
    seq plates, hints;
    memset(&plates, 0, sizeof plates);
    memset(&hints, 0, sizeof hints);
    key_item *items = NULL;
    int nitems = 0;
    ckey_model *model = NULL;
    ckey_session *sess = NULL;
    ckey_image plate, hint;
    memset(&plate, 0, sizeof plate);
    memset(&hint, 0, sizeof hint);
    float *alpha = NULL, *fg = NULL, *processed = NULL, *comp = NULL;
    void *scratch = NULL;
    size_t buf_pixels = 0, scratch_cap = 0;
    int exit_code = EXIT_RUNTIME;
    ckey_error err;
    memset(&err, 0, sizeof err);

    if (!plate_dir || !hint_dir || !out_dir) {
        exit_code = key_fail(CKEY_ERR_NOMEM, "out of memory");
        goto done;
    }
    if (!scan_sequence(plate_dir, "plate", &plates, why, sizeof why) ||
        (!auto_hint && !scan_sequence(hint_dir, "hint", &hints, why, sizeof why))) {
        exit_code = key_fail(strstr(why, "video") ? CKEY_ERR_UNSUPPORTED : CKEY_ERR_IO, "%s", why);
        goto done;
    }
    if (plates.n == 0) {
        exit_code = key_fail(CKEY_ERR_IO, "%s holds no image frames (png, jpg, jpeg, tif, tiff, exr)",
                             plate_dir);
        goto done;
    }

    /* Pair plates with hints, within --frames. */
    items = calloc((size_t)plates.n, sizeof *items);
    if (!items) {
        exit_code = key_fail(CKEY_ERR_NOMEM, "out of memory");
        goto done;
    }
    int to_key = 0;
    for (int i = 0; i < plates.n; i++) {
        const seq_file *pf = &plates.f[i];
        if (o.have_frames && (pf->frame < o.frame_first || pf->frame > o.frame_last)) continue;
        const seq_file *hf = auto_hint ? &auto_file : seq_find(&hints, pf->frame);
        if (!hf) {
            exit_code = key_fail(CKEY_ERR_IO, "frame %ld: plate %s/%s has no hint in %s (hints "
                                              "pair with plates by frame number)",
                                 pf->frame, plate_dir, pf->name, hint_dir);
            goto done;
        }
        key_item *it = &items[nitems++];
        it->plate = pf;
        it->hint = hf;
        int complete = 1;
        for (int p = 0; p < NPASS; p++) {
            it->out[p] = pass_path(out_dir, p, pf->name);
            if (!it->out[p]) {
                exit_code = key_fail(CKEY_ERR_NOMEM, "out of memory");
                goto done;
            }
            if (!file_exists(it->out[p])) complete = 0;
        }
        it->complete = complete && !o.force;
        if (!it->complete) to_key++;
    }
    for (int i = 0; i < hints.n; i++)
        if (!seq_find(&plates, hints.f[i].frame) &&
            !(o.have_frames && (hints.f[i].frame < o.frame_first || hints.f[i].frame > o.frame_last)))
            key_warning("hint %s/%s (frame %ld) has no plate; ignored", hint_dir, hints.f[i].name,
                        hints.f[i].frame);
    if (nitems == 0) {
        exit_code = key_fail(CKEY_ERR_INVALID_ARG, "no plate in %s has a frame number in %ld-%ld",
                             plate_dir, o.frame_first, o.frame_last);
        goto done;
    }

    if (o.json) {
        printf("{\"event\":\"started\",\"frames\":%d,\"to_key\":%d,\"to_skip\":%d,\"first\":%ld,"
               "\"last\":%ld,\"plate_dir\":",
               nitems, to_key, nitems - to_key, items[0].plate->frame, items[nitems - 1].plate->frame);
        json_str(stdout, plate_dir);
        printf(",\"hint_dir\":");
        json_str(stdout, hint_dir);
        printf(",\"out\":");
        json_str(stdout, out_dir);
        printf(",\"model\":");
        json_str(stdout, o.model);
        printf(",\"size\":%d,\"dry_run\":%s}\n", (int)o.so.size, o.dry_run ? "true" : "false");
        fflush(stdout);
    }

    if (o.dry_run) {
        for (int i = 0; i < nitems; i++) {
            const key_item *it = &items[i];
            if (o.json)
                printf("{\"event\":\"frame\",\"frame\":%ld,\"status\":\"%s\",\"seconds\":0}\n",
                       it->plate->frame, it->complete ? "skipped" : "would_key");
            else
                printf("frame %ld: %s  (%s + %s)\n", it->plate->frame,
                       it->complete ? "skip (outputs complete)" : "key", it->plate->name,
                       it->hint->name);
        }
        if (o.json)
            printf("{\"event\":\"done\",\"keyed\":0,\"skipped\":%d,\"would_key\":%d,\"seconds\":0,"
                   "\"fps\":0,\"dry_run\":true}\n",
                   nitems - to_key, to_key);
        else
            printf("dry run: %d frame%s would be keyed, %d skipped; nothing written\n", to_key,
                   to_key == 1 ? "" : "s", nitems - to_key);
        exit_code = EXIT_OK;
        goto done;
    }

    const double t_start = now_seconds();
    if (to_key > 0) {
        if (ckey_model_load(o.model, &model, &err) != CKEY_OK) {
            exit_code = key_fail(err.status, "%s", err.message);
            goto done;
        }
        ckey_model_info mi;
        memset(&mi, 0, sizeof mi);
        ckey_model_get_info(model, &mi);
        if (is_test_model(&mi)) {
            if (o.json)
                key_warning("%s is a reduced test configuration (embed_dim %d); its mattes are not "
                            "meaningful", o.model, (int)mi.embed_dim);
            else
                test_model_notice(o.model, &mi);
        }
        if (ckey_session_create(model, &o.so, &sess, &err) != CKEY_OK) {
            exit_code = key_fail(err.status, "%s", err.message);
            goto done;
        }
        for (int p = 0; p < NPASS; p++) {
            char *d = path2(out_dir, pass_dir[p]);
            int ok = d && make_dirs(d, why, sizeof why);
            if (!d) snprintf(why, sizeof why, "out of memory");
            free(d);
            if (!ok) {
                exit_code = key_fail(CKEY_ERR_IO, "%s", why);
                goto done;
            }
        }
    }
    const double t_loop = now_seconds();
    const int tty = !o.json && isatty(2);
    int keyed = 0, skipped = 0;
    for (int i = 0; i < nitems; i++) {
        key_item *it = &items[i];
        const long fr = it->plate->frame;
        if (it->complete) {
            skipped++;
            if (o.json)
                printf("{\"event\":\"frame\",\"frame\":%ld,\"status\":\"skipped\",\"seconds\":0}\n", fr);
            else if (!tty)
                fprintf(stderr, "frame %ld (%d/%d): skipped, outputs complete\n", fr, i + 1, nitems);
            fflush(stdout);
            continue;
        }
        const double tf = now_seconds();
        char *pp = path2(plate_dir, it->plate->name), *hp = auto_hint ? strdup("auto") : path2(hint_dir, it->hint->name);
        if (!pp || !hp) {
            free(pp);
            free(hp);
            exit_code = key_fail(CKEY_ERR_NOMEM, "out of memory");
            goto done;
        }
        ckey_image_free(&plate);
        ckey_image_free(&hint);
        ckey_status st = ckey_image_read(pp, CKEY_IMAGE_RGB, &plate, &err);
        if (st == CKEY_OK && !auto_hint) st = ckey_image_read(hp, CKEY_IMAGE_HINT, &hint, &err);
        if (st == CKEY_OK && auto_hint) {
            const size_t sb = ckey_auto_hint_scratch_bytes(plate.width, plate.height);
            void *ascratch = malloc(sb);
            hint.width = plate.width;
            hint.height = plate.height;
            hint.channels = 1;
            hint.data = malloc((size_t)plate.width * plate.height * sizeof(float));
            if (!ascratch || !hint.data) st = CKEY_ERR_NOMEM, snprintf(err.message, sizeof err.message, "out of memory");
            else st = ckey_auto_hint(plate.data, plate.width, plate.height, hint.data, ascratch, &err);
            free(ascratch);
            if (st != CKEY_OK) err.status = st;
        }
        if (st != CKEY_OK) {
            free(pp);
            free(hp);
            exit_code = key_fail(err.status, "frame %ld: %s", fr, err.message);
            goto done;
        }
        if (plate.width != hint.width || plate.height != hint.height) {
            exit_code = key_fail(CKEY_ERR_INVALID_ARG,
                                 "frame %ld: plate %s is %d x %d but hint %s is %d x %d: the hint "
                                 "must match the plate",
                                 fr, pp, (int)plate.width, (int)plate.height, hp, (int)hint.width,
                                 (int)hint.height);
            free(pp);
            free(hp);
            goto done;
        }
        const int32_t w = plate.width, h = plate.height;
        const size_t n = (size_t)w * (size_t)h;
        if (n > buf_pixels) {
            free(alpha);
            free(fg);
            free(processed);
            free(comp);
            alpha = malloc(n * sizeof *alpha);
            fg = malloc(3 * n * sizeof *fg);
            processed = malloc(4 * n * sizeof *processed);
            comp = malloc(3 * n * sizeof *comp);
            buf_pixels = (alpha && fg && processed && comp) ? n : 0;
            if (!buf_pixels) {
                free(pp);
                free(hp);
                exit_code = key_fail(CKEY_ERR_NOMEM, "frame %ld: out of memory for a %d x %d plate",
                                     fr, (int)w, (int)h);
                goto done;
            }
        }
        const size_t sb = ckey_post_scratch_bytes(w, h, &o.post);
        if (sb == SIZE_MAX) {
            free(pp);
            free(hp);
            exit_code = key_fail(CKEY_ERR_INVALID_ARG, "frame %ld: bad plate size %d x %d", fr,
                                 (int)w, (int)h);
            goto done;
        }
        if (sb > scratch_cap) {
            free(scratch);
            scratch = malloc(sb);
            scratch_cap = scratch ? sb : 0;
            if (!scratch) {
                free(pp);
                free(hp);
                exit_code = key_fail(CKEY_ERR_NOMEM, "frame %ld: out of memory", fr);
                goto done;
            }
        }
        ckey_frame frame;
        memset(&frame, 0, sizeof frame);
        frame.width = w;
        frame.height = h;
        frame.rgb = plate.data;
        frame.hint = hint.data;
        frame.input_is_linear = o.space == 2 || (o.space == 0 && !strcasecmp(file_ext(it->plate->name), "exr"));
        free(pp);
        free(hp);
        st = ckey_session_key(sess, &frame, alpha, fg, &err);
        if (st == CKEY_OK)
            st = ckey_post_passes(alpha, fg, w, h, &o.post, processed, comp, scratch, &err);
        if (st == CKEY_OK)
            st = ckey_image_write_exr(it->out[PASS_MATTE], alpha, 1, w, h, o.exr, &err);
        if (st == CKEY_OK) st = ckey_image_write_exr(it->out[PASS_FG], fg, 3, w, h, o.exr, &err);
        if (st == CKEY_OK)
            st = ckey_image_write_exr(it->out[PASS_PROCESSED], processed, 4, w, h, o.exr, &err);
        if (st == CKEY_OK) st = ckey_image_write_png(it->out[PASS_COMP], comp, 3, w, h, 8, &err);
        if (st != CKEY_OK) {
            exit_code = key_fail(err.status, "frame %ld: %s", fr, err.message);
            goto done;
        }
        keyed++;
        const double now = now_seconds();
        const double secs = now - tf;
        const double fps = keyed / (now - t_loop);
        if (o.json) {
            printf("{\"event\":\"frame\",\"frame\":%ld,\"status\":\"keyed\",\"seconds\":%.6f,"
                   "\"width\":%d,\"height\":%d,\"index\":%d,\"total\":%d}\n",
                   fr, secs, (int)w, (int)h, i + 1, nitems);
            fflush(stdout);
        } else {
            const double eta = (to_key - keyed) / (fps > 0 ? fps : 1e-9);
            char e[32];
            fmt_eta(e, sizeof e, eta);
            if (tty)
                fprintf(stderr, "\rframe %d/%d (#%ld)  %.2f fps  ETA %s   ", i + 1, nitems, fr, fps, e);
            else
                fprintf(stderr, "frame %ld (%d/%d): keyed in %.3f s, %.2f fps, ETA %s\n", fr, i + 1,
                        nitems, secs, fps, e);
        }
    }
    const double t_end = now_seconds();
    const double loop_s = t_end - t_loop;
    const double fps = keyed > 0 && loop_s > 0 ? keyed / loop_s : 0.0;
    if (o.json) {
        printf("{\"event\":\"done\",\"keyed\":%d,\"skipped\":%d,\"seconds\":%.6f,\"fps\":%.4f,"
               "\"setup_seconds\":%.6f,\"out\":",
               keyed, skipped, loop_s, fps, t_loop - t_start);
        json_str(stdout, out_dir);
        printf("}\n");
    } else {
        if (tty) fputc('\n', stderr);
        printf("keyed %d frame%s, skipped %d, in %.3f s: %.2f fps end to end (read, key, post, "
               "write; model load + session %.3f s); passes in %s\n",
               keyed, keyed == 1 ? "" : "s", skipped, loop_s, fps, t_loop - t_start, out_dir);
    }
    exit_code = EXIT_OK;

done:
    fflush(stdout);
    if (items)
        for (int i = 0; i < nitems; i++)
            for (int p = 0; p < NPASS; p++) free(items[i].out[p]);
    free(items);
    seq_free(&plates);
    seq_free(&hints);
    ckey_image_free(&plate);
    ckey_image_free(&hint);
    free(alpha);
    free(fg);
    free(processed);
    free(comp);
    free(scratch);
    ckey_session_free(sess);
    ckey_model_free(model);
    free(plate_dir);
    free(hint_dir);
    free(out_dir);
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
    int rc = parse_opts(argc, argv, O_MODEL | O_SIZE | O_THREADS | O_DEVICE | O_BUDGET | O_JSON | O_MEMORY,
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
    printf("memory plan   at S = %d:\n", (int)o.so.size);
    printf("  weights     %10.1f MiB\n", mib(plan.weight_bytes));
    printf("  arena       %10.1f MiB (of which scratch %.1f MiB)\n", mib(plan.arena_bytes),
           mib(plan.scratch_bytes));
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
