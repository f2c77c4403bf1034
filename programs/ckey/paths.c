/* File-system helpers of the CLI (paths.h). */
#include "paths.h"

#include <stdio.h>
#include <string.h>

#include "ckey_clip.h"

char *path_join(const char *dir, const char *name) { return ckey_path_join(dir, name); }

const char *file_ext(const char *name) {
    const char *dot = strrchr(name, '.');
    return dot && dot != name ? dot + 1 : "";
}

int make_dirs(const char *path, char *why, size_t cap) {
    ckey_error err;
    if (ckey_make_dirs(path, &err) == CKEY_OK) return 1;
    snprintf(why, cap, "%s", err.message);
    return 0;
}
