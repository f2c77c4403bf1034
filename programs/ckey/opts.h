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

/* Which options a command accepts. */
enum {
    O_MODEL = 1 << 0, O_IMAGE = 1 << 1, O_HINT = 1 << 2, O_OUT = 1 << 3, O_SIZE = 1 << 4,
    O_THREADS = 1 << 5, O_STRENGTH = 1 << 6, O_LINEAR = 1 << 7, O_DEVICE = 1 << 8,
    O_BUDGET = 1 << 9, O_JSON = 1 << 10, O_MEMORY = 1 << 11, O_PLATE = 1 << 12,
    O_DESPILL = 1 << 13, O_NO_DESPECKLE = 1 << 14, O_DESPECKLE_AREA = 1 << 15,
    O_FRAMES = 1 << 16, O_DRY_RUN = 1 << 17, O_FORCE = 1 << 18, O_EXR_COMPRESSION = 1 << 19,
    O_INPUT_SPACE = 1 << 20, O_ON_ERROR = 1 << 21, O_READ_AHEAD = 1 << 22,
    O_RESIZE_BACK = 1 << 23, O_DESPECKLE_MODE = 1 << 24, O_PRECISION = 1 << 25,
    O_VIDEO_OUT = 1 << 26, O_VERBOSE = 1 << 27, O_FPS = 1 << 28, O_WRITERS = 1 << 29,
};

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
    ckey_shot_on_error on_error;
    int read_ahead;                 /* -1: the library default */
    int writers;                    /* writer threads; 0: the library default */
    int video_out;                  /* VIDEO_OUT_* bits */
    int verbose;                    /* FFmpeg's log: 0 quiet, 1 warnings, 2 info */
    int32_t fps_num, fps_den;       /* --fps; 0/0: the plate's (24 for a sequence) */
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
int parse_opts(int argc, char **argv, int allowed, int max_positional, const char *help,
               opts *o);

/* 1 when `value` is set, else a usage message "missing <name>" and 0. */
int require(const opts *o, const char *value, const char *name);

/* A usage error of command `cmd` (NULL: of ckey itself) on stderr, with a
 * pointer to --help; returns EXIT_USAGE. */
int usage_error(const char *cmd, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

#endif
