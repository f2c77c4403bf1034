/*
 * File-system helpers of the CLI. libckey has its own (path joining, file
 * extensions, mkdir -p for the pass directories) but keeps them internal, and
 * the CLI uses only the public header.
 */
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
