/* Small file helpers shared by the readers and the writers. */
#include <dirent.h>
#include <errno.h>
#include <signal.h>
#include <fcntl.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "ckey_media.h"
#include "core/core.h"

void ck_sync_parent_dir(const char *path) {
    const char *slash = strrchr(path, '/');
    char dir[4096];
    if (!slash) {
        snprintf(dir, sizeof dir, ".");
    } else if (slash == path) {
        snprintf(dir, sizeof dir, "/");
    } else {
        const size_t n = (size_t)(slash - path);
        if (n >= sizeof dir) return;
        memcpy(dir, path, n);
        dir[n] = 0;
    }
    int fd = open(dir, O_RDONLY | O_DIRECTORY);
    if (fd >= 0) {
        (void)fsync(fd);
        close(fd);
    }
}

ckey_status ck_open_input(const char *path, int timeout_ms, FILE **out, ckey_error *err) {
    *out = NULL;
    const int fd = open(path, O_RDONLY | O_NONBLOCK | O_CLOEXEC);
    if (fd < 0) return ck_fail(err, CKEY_ERR_IO, "%s: cannot open: %s", path, strerror(errno));
    struct stat sb;
    if (fstat(fd, &sb) != 0) {
        const int e = errno;
        close(fd);
        return ck_fail(err, CKEY_ERR_IO, "%s: cannot open: %s", path, strerror(e));
    }
    /* A FIFO opened for reading without a writer polls as not ready until
     * one opens it and writes or closes (Linux reports no POLLHUP before a
     * first writer), so the wait ends with data, EOF or the timeout. */
    if (!S_ISREG(sb.st_mode) && !S_ISBLK(sb.st_mode) && !S_ISDIR(sb.st_mode)) {
        const double end = ck_now() + timeout_ms / 1000.0;
        for (;;) {
            struct pollfd pf = {fd, POLLIN, 0};
            const double left = end - ck_now();
            const int r = poll(&pf, 1, left > 0 ? (int)(left * 1000.0) + 1 : 0);
            if (r > 0) break;
            if (r < 0 && errno == EINTR) continue;
            const int e = errno;
            close(fd);
            if (r < 0) return ck_fail(err, CKEY_ERR_IO, "%s: cannot wait for data: %s", path, strerror(e));
            return ck_fail(err, CKEY_ERR_IO, "%s: no data after %g s%s", path, timeout_ms / 1000.0,
                           S_ISFIFO(sb.st_mode) ? ": no writer has opened the FIFO, or it writes nothing" : "");
        }
    }
    const int flags = fcntl(fd, F_GETFL);
    FILE *f = flags >= 0 && fcntl(fd, F_SETFL, flags & ~O_NONBLOCK) == 0 ? fdopen(fd, "rb") : NULL;
    if (!f) {
        const int e = errno;
        close(fd);
        return ck_fail(err, CKEY_ERR_IO, "%s: cannot open: %s", path, strerror(e));
    }
    *out = f;
    return CKEY_OK;
}

/* The host's name as temporary names carry it: cut at 64 bytes and kept to
 * characters that are safe in a file name on any file system. */
static void temp_host(char host[65]) {
    host[0] = 0;
    if (gethostname(host, 64) != 0 || !host[0]) snprintf(host, 65, "host");
    host[64] = 0;
    for (char *c = host; *c; c++)
        if (!((*c >= 'a' && *c <= 'z') || (*c >= 'A' && *c <= 'Z') || (*c >= '0' && *c <= '9') ||
              *c == '-' || *c == '.' || *c == '_'))
            *c = '_';
}

int ck_remove_dead_temps(const char *dir) {
    char host[65];
    temp_host(host);
    const size_t hl = strlen(host);
    DIR *d = opendir(dir);
    if (!d) return 0;
    int removed = 0;
    for (struct dirent *e; (e = readdir(d));) {
        /* <name>.ckey-<host>-<pid>-<tid>.tmp */
        const char *n = e->d_name, *m = strstr(n, ".ckey-");
        const size_t len = strlen(n);
        if (!m || len < 4 || strcmp(n + len - 4, ".tmp") != 0) continue;
        for (const char *next; (next = strstr(m + 1, ".ckey-"));) m = next; /* the last one */
        const char *h = m + 6;
        if (strncmp(h, host, hl) != 0 || h[hl] != '-') continue;
        char *end;
        errno = 0;
        const long pid = strtol(h + hl + 1, &end, 10);
        if (errno || pid <= 0 || *end != '-') continue;
        const long tid = strtol(end + 1, &end, 10);
        if (tid <= 0 || strcmp(end, ".tmp") != 0) continue;
        if (pid == (long)getpid() || kill((pid_t)pid, 0) == 0 || errno != ESRCH) continue; /* alive, or unknown */
        const size_t cap = strlen(dir) + len + 2;
        char *path = malloc(cap);
        if (!path) break;
        snprintf(path, cap, "%s/%s", dir, n);
        if (unlink(path) == 0) removed++;
        free(path);
    }
    closedir(d);
    return removed;
}

char *ckey_temp_path(const char *path) {
    if (!path) return NULL;
    char host[65];
    temp_host(host);
    const size_t cap = strlen(path) + strlen(host) + 64;
    char *t = malloc(cap);
    if (t) snprintf(t, cap, "%s.ckey-%s-%ld-%ld.tmp", path, host, (long)getpid(), (long)gettid());
    return t;
}
