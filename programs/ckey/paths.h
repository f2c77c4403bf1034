/* File-system helpers of the CLI: path joining and mkdir -p are the
 * library's (ckey_clip.h), with the CLI's error convention. */
#ifndef CKEY_CLI_PATHS_H
#define CKEY_CLI_PATHS_H

#include <stddef.h>

/* "dir/name" (malloc'd; no second '/' when dir ends in one); NULL when out of memory. */
char *path_join(const char *dir, const char *name);

/* The extension after the last dot ("" when none). */
const char *file_ext(const char *name);

/* mkdir -p: create `path` and its missing parents. 1 on success; else 0 and
 * the reason, naming the directory, in why[cap]. */
int make_dirs(const char *path, char *why, size_t cap);

/* fsync a directory, so that renames into it survive a crash (best effort:
 * a failure only weakens that). */
void sync_dir(const char *dir);

#endif
