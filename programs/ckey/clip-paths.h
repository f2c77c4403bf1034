/*
 * Where a clip's commands (key, encode, farm) read and write: SHOT_DIR's
 * Input/, AlphaHint/ and Output/ (or --out DIR), or --plate, --hint and
 * --out; the clip's name for its videos, and the videos' paths.
 */
#ifndef CKEY_CLI_CLIP_PATHS_H
#define CKEY_CLI_CLIP_PATHS_H

#include <stddef.h>

#include "opts.h"

typedef struct clip_paths {
    /* plate_dir / hint_dir: a directory of frames, a video, or a directory
     * holding one video (ckey_source_open_video tells them apart) */
    char *plate_dir, *hint_dir, *out_dir;
    char *shot;              /* SHOT_DIR as given; NULL with --plate */
    char *clip;              /* the clip's name, for its video outputs */
    int auto_hint;           /* --hint auto (hint_dir is "auto") */
} clip_paths;

/*
 * The paths from the options: SHOT_DIR (o->positional[0]) or --plate (and,
 * with `with_hint`, --hint) and --out. Returns CONTINUE; EXIT_USAGE after the
 * usage message; or EXIT_RUNTIME with the reason in why[cap] (a SHOT_DIR that
 * is a file, out of memory).
 */
int clip_paths_resolve(const opts *o, int with_hint, clip_paths *cp, char *why, size_t cap);
void clip_paths_free(clip_paths *cp);

/* OUT/<clip>_fg_alpha.mov (which 0) or OUT/<clip>_comp.mp4 (which 1),
 * malloc'd; NULL when out of memory. */
char *clip_video_path(const clip_paths *cp, int which);

/* The extensions libckey reads as video (its own list is internal). */
int is_video_ext(const char *ext);

#endif
