/*
 * Where a command finds its checkpoint when --model is not given: the
 * lookup shared by every command that takes --model (run, key, info), and
 * the per-user data directory that `ckey install-model` fills. Environment
 * variables are read here, in the CLI: the library reads none.
 */
#ifndef CKEY_CLI_MODEL_PATH_H
#define CKEY_CLI_MODEL_PATH_H

#include <stddef.h>

#include "ckey.h"
#include "opts.h"

/* The official checkpoint's file name, preferred wherever ckey looks. */
#define OFFICIAL_CHECKPOINT "CorridorKey_v1.0.pth"
/* Where the official checkpoint is published (ckey never downloads it). */
#define OFFICIAL_CHECKPOINT_URL "https://github.com/nikopueringer/CorridorKey/releases"
/* Upstream's layout, under the current directory. */
#define UPSTREAM_CHECKPOINT_DIR "CorridorKeyModule/checkpoints"

/*
 * The data directory: $XDG_DATA_HOME/ckey when that is set to an absolute
 * path, else $HOME/.local/share/ckey. 1 with the path in buf[cap] (and in
 * *from, when not NULL, which of the two it is: "$XDG_DATA_HOME/ckey" or
 * "~/.local/share/ckey"); 0 with the reason in buf[cap] when neither
 * variable is usable.
 */
int model_data_dir(char *buf, size_t cap, const char **from);

/*
 * The checkpoint the lookup takes from `dir` (CorridorKey_v1.0.pth, else the
 * only *.pth or *.safetensors file): 1 with its path in buf[cap]; else 0, and
 * *count is how many checkpoints dir holds (several: the lookup refuses to
 * choose).
 */
int dir_checkpoint(const char *dir, char *buf, size_t cap, int *count);

/*
 * Resolve o->model, in this order: --model FILE; $CKEY_MODEL; the data
 * directory (CorridorKey_v1.0.pth there, else its only *.pth or
 * *.safetensors file); upstream's ./CorridorKeyModule/checkpoints/
 * (CorridorKey_v1.0.pth, else its only *.pth). CONTINUE with o->model set
 * (o->model_origin says where it was found; NULL for --model), or EXIT_USAGE
 * after a message that lists every place looked at and how to install the
 * official checkpoint, or names the files when a directory holds several.
 */
int find_model(opts *o);

/* Cutie's official checkpoints, as published (ckey never downloads them). */
#define CUTIE_CHECKPOINT "cutie-base-mega.pth"
#define CUTIE_SMALL_CHECKPOINT "cutie-small-mega.pth"
#define CUTIE_CHECKPOINT_URL "https://github.com/hkchengrex/Cutie/releases"

/*
 * Resolve o->track_model (track, key --mask): --track-model FILE;
 * $CKEY_TRACK_MODEL; cutie-base-mega.pth, else cutie-small-mega.pth, in the
 * data directory. CONTINUE, or EXIT_USAGE after a message listing the places
 * looked at and where the official checkpoint is published.
 */
int find_track_model(opts *o);

/* Add where the model was found to a failure to load it: " (named by
 * $CKEY_MODEL)" and the like; nothing when it came from --model. */
void note_model_origin(const opts *o, ckey_error *err);

#endif
