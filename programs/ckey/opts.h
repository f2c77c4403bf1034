/*
 * Command-line options shared by the ckey commands: exit codes, the parsed
 * options of every command in one struct, and the parser. A command names the
 * options it accepts (O_* flags); anything else is a usage error.
 */
#ifndef CKEY_CLI_OPTS_H
#define CKEY_CLI_OPTS_H

#include <stdint.h>

#include "ckey_clip.h"
#include "ckey.h"

/* Exit codes (ckey --help lists them). CONTINUE is no exit code: a step that
 * returns it lets the command go on. */
enum { EXIT_OK = 0, EXIT_RUNTIME = 1, EXIT_USAGE = 2, EXIT_PARTIAL = 3, CONTINUE = -1 };

/* Which options a command accepts (bits of a uint64_t mask). */
typedef uint64_t opt_set;
#define O_MODEL (UINT64_C(1) << 0)
#define O_IMAGE (UINT64_C(1) << 1)
#define O_HINT (UINT64_C(1) << 2)
#define O_OUT (UINT64_C(1) << 3)
#define O_SIZE (UINT64_C(1) << 4)
#define O_THREADS (UINT64_C(1) << 5)
#define O_STRENGTH (UINT64_C(1) << 6)
#define O_LINEAR (UINT64_C(1) << 7)
#define O_DEVICE (UINT64_C(1) << 8)
#define O_BUDGET (UINT64_C(1) << 9)
#define O_JSON (UINT64_C(1) << 10)
#define O_MEMORY (UINT64_C(1) << 11)
#define O_PLATE (UINT64_C(1) << 12)
#define O_DESPILL (UINT64_C(1) << 13)
#define O_NO_DESPECKLE (UINT64_C(1) << 14)
#define O_DESPECKLE_AREA (UINT64_C(1) << 15)
#define O_FRAMES (UINT64_C(1) << 16)
#define O_DRY_RUN (UINT64_C(1) << 17)
#define O_FORCE (UINT64_C(1) << 18)
#define O_EXR_COMPRESSION (UINT64_C(1) << 19)
#define O_INPUT_SPACE (UINT64_C(1) << 20)
#define O_ON_ERROR (UINT64_C(1) << 21)
#define O_READ_AHEAD (UINT64_C(1) << 22)
#define O_RESIZE_BACK (UINT64_C(1) << 23)
#define O_DESPECKLE_MODE (UINT64_C(1) << 24)
#define O_PRECISION (UINT64_C(1) << 25)
#define O_VIDEO_OUT (UINT64_C(1) << 26)
#define O_VERBOSE (UINT64_C(1) << 27)
#define O_FPS (UINT64_C(1) << 28)
#define O_WRITERS (UINT64_C(1) << 29)
#define O_EMPTY_OK (UINT64_C(1) << 30)
#define O_DEVICE_LIST (UINT64_C(1) << 31) /* --device may name several (key) */
/* farm */
#define O_CHUNK (UINT64_C(1) << 32)
#define O_CHUNKS (UINT64_C(1) << 33)
#define O_GPUS (UINT64_C(1) << 34)
#define O_PARTITION (UINT64_C(1) << 35)
#define O_SBATCH (UINT64_C(1) << 36)
#define O_CKEY (UINT64_C(1) << 37)
#define O_SUBMIT (UINT64_C(1) << 38)
#define O_LOGS (UINT64_C(1) << 39)
#define O_MAX_RUNNING (UINT64_C(1) << 40)
#define O_CPUS (UINT64_C(1) << 41)
/* info */
#define O_PLATE_SIZE (UINT64_C(1) << 42)
#define O_FOR (UINT64_C(1) << 43)
/* key / run: the CPU clip runner (clipcpu) */
#define O_READERS (UINT64_C(1) << 44)
#define O_EXR_LEVEL (UINT64_C(1) << 45)
#define O_COMP_PNG (UINT64_C(1) << 46)
/* track, key: Cutie mask propagation */
#define O_MASK (UINT64_C(1) << 47)
#define O_MASK_AT (UINT64_C(1) << 48)
#define O_OBJECT (UINT64_C(1) << 49)
#define O_TRACK_MODEL (UINT64_C(1) << 50)
#define O_HINT_FORMAT (UINT64_C(1) << 51)
#define O_TRACK_SIZE (UINT64_C(1) << 52)
/* The tracking options `track` and `key --mask` share (tracking.h). */
#define O_TRACKING (O_MASK | O_MASK_AT | O_OBJECT | O_TRACK_MODEL | O_TRACK_SIZE | O_TRACK_DEVICE | O_TRACK_PRECISION)

/* opts.track_device when --track-device is not given (the tracker's default, the CPU). */
#define TRACK_DEVICE_UNSET (-2)

/* Most --mask-at options. */
#define MASK_AT_MAX 256
#define O_FRAME_PATH (UINT64_C(1) << 53)
#define O_TRACK_DEVICE (UINT64_C(1) << 54)
#define O_TRACK_PRECISION (UINT64_C(1) << 55)
#define O_DEVICE_FRAMES (UINT64_C(1) << 56)

/* Most --sbatch options `farm` takes. */
#define SBATCH_ARGS_MAX 16

/* --video-out: which videos `key` encodes */
enum { VIDEO_OUT_PRORES = 1, VIDEO_OUT_H264 = 2 };

typedef struct opts {
    const char *cmd;                /* "run", "key", ...: names the command in messages */
    const char *model, *image, *hint, *out;
    const char *model_origin;       /* where find_model found the model; NULL: --model */
    char model_buf[4096];           /* the model's path when find_model found it */
    int have_size;                  /* --size given */
    int json, memory;
    ckey_input_space space;         /* --input-space, --linear */
    ckey_session_options so;        /* --size, --threads, --device, --precision, --budget, ... */
    const char *positional[2];
    int npositional;

    /* key */
    const char *plate;
    ckey_post_options post;         /* --despill, --no-despeckle, --despeckle-* */
    int dry_run, force, have_frames;
    long frame_first, frame_last;   /* --frames, when have_frames */
    ckey_exr_compression exr;
    int exr_level;                  /* --exr-level; 0: the compression's default for key */
    int comp_png_level;             /* --comp-png: CKEY_PNG_RLE or zlib's level */
    ckey_shot_on_error on_error;
    int read_ahead;                 /* -1: the library default */
    int writers;                    /* writer threads; 0: the library default */
    int readers;                    /* reader threads; 0: the library default */
    ckey_frame_path frame_path;     /* --frame-path; AUTO when not given */
    int device_frames;              /* --device-frames; 0: the library default */
    int video_out;                  /* VIDEO_OUT_* bits */
    int verbose;                    /* FFmpeg's log: 0 quiet, 1 warnings, 2 info */
    int32_t fps_num, fps_den;       /* --fps; 0/0: the plate's (24 for a sequence) */
    int have_video_out;             /* --video-out given */
    int have_despill;               /* --despill given */
    int empty_ok;                   /* --empty-ok */
    /* --device with several devices (key): one session each, in this order;
     * ndevices 0 when --device named one (it is in `so`) */
    int ndevices;
    struct {
        ckey_device_kind kind;
        int32_t index;
    } devices[CKEY_SHOT_MAX_SESSIONS];

    /* farm */
    long chunk;                     /* --chunk: frames per task; 0 when not given */
    const char *chunks;             /* --chunks LIST: only these task indices */
    long gpus;                      /* --gpus per task; -1 when not given */
    long cpus;                      /* --cpus per task; 0 when not given */
    long max_running;               /* --max-running; 0 when not given */
    const char *partition, *ckey, *logs;
    int submit;
    const char *sbatch[SBATCH_ARGS_MAX];
    int nsbatch;

    /* track, key --mask */
    const char *mask;               /* --mask: the first frame's mask */
    const char *track_model;        /* --track-model, or where find_track_model found one */
    const char *track_model_origin; /* NULL: --track-model */
    char track_model_buf[4096];
    int nmask_at;                   /* --mask-at FRAME=FILE */
    int64_t mask_at_frame[MASK_AT_MAX];
    const char *mask_at[MASK_AT_MAX];
    int object;                     /* --object N; 0: the union */
    int hint_exr;                   /* --hint-format exr */
    int track_size;                 /* --track-size; -1: not given */
    int track_device;               /* --track-device: ckey_track_options.device; TRACK_DEVICE_UNSET: not given */
    int track_precision;            /* --track-precision: ckey_track_options.precision; 0: not given */

    /* info */
    int32_t plate_w, plate_h;       /* --plate-size WxH; 0 x 0: not given */
    int plan_key;                   /* --for key (0: --for run) */
    int have_for;                   /* --for given */
} opts;

/* Zero `o` and name the command. */
void opts_init(opts *o, const char *cmd);
/* opts_init, then the session defaults for a command that plans or runs the
 * network (device: the first CUDA GPU when one is usable, else the CPU). */
void opts_init_session(opts *o, const char *cmd);

/*
 * Parse argv[1..] of a command. Returns CONTINUE when parsing succeeded,
 * EXIT_OK after printing `help` (-h, --help), else EXIT_USAGE after the
 * message. `allowed` masks the options; `max_positional` the bare arguments.
 */
int parse_opts(int argc, char **argv, uint64_t allowed, int max_positional, const char *help,
               opts *o);

/* 1 when `value` is set, else a usage message "missing <name>" and 0. */
int require(const opts *o, const char *value, const char *name);

/* A usage error of command `cmd` (NULL: of ckey itself) on stderr, with a
 * pointer to --help; returns EXIT_USAGE. */
int usage_error(const char *cmd, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

#endif
