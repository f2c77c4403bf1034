/* Small file helpers shared by the readers and the writers. */
#include <errno.h>
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

char *ckey_temp_path(const char *path) {
    if (!path) return NULL;
    /* the host's name, cut at 64 bytes and kept to characters that are safe
     * in a file name on any file system */
    char host[65] = "";
    if (gethostname(host, sizeof host - 1) != 0 || !host[0]) snprintf(host, sizeof host, "host");
    host[sizeof host - 1] = 0;
    for (char *c = host; *c; c++)
        if (!((*c >= 'a' && *c <= 'z') || (*c >= 'A' && *c <= 'Z') || (*c >= '0' && *c <= '9') ||
              *c == '-' || *c == '.' || *c == '_'))
            *c = '_';
    const size_t cap = strlen(path) + strlen(host) + 64;
    char *t = malloc(cap);
    if (t) snprintf(t, cap, "%s.ckey-%s-%ld-%ld.tmp", path, host, (long)getpid(), (long)gettid());
    return t;
}
