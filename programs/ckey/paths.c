/* File-system helpers of the CLI (paths.h). */
#include "paths.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

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

void sync_dir(const char *dir) {
    const int fd = open(dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    if (fd < 0) return;
    (void)fsync(fd);
    close(fd);
}
