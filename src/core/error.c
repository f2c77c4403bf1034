#include <stdio.h>
#include <string.h>
#include <time.h>

#include "core/core.h"

const char *ckey_status_name(ckey_status s) {
    switch (s) {
    case CKEY_OK: return "CKEY_OK";
    case CKEY_ERR_INVALID_ARG: return "CKEY_ERR_INVALID_ARG";
    case CKEY_ERR_IO: return "CKEY_ERR_IO";
    case CKEY_ERR_FORMAT: return "CKEY_ERR_FORMAT";
    case CKEY_ERR_UNSUPPORTED: return "CKEY_ERR_UNSUPPORTED";
    case CKEY_ERR_MODEL: return "CKEY_ERR_MODEL";
    case CKEY_ERR_NOMEM: return "CKEY_ERR_NOMEM";
    case CKEY_ERR_BUDGET: return "CKEY_ERR_BUDGET";
    case CKEY_ERR_DEVICE: return "CKEY_ERR_DEVICE";
    case CKEY_ERR_INTERNAL: return "CKEY_ERR_INTERNAL";
    case CKEY_ERR_CANCELLED: return "CKEY_ERR_CANCELLED";
    }
    return "CKEY_ERR_UNKNOWN";
}

ckey_status ck_fail(ckey_error *err, ckey_status st, const char *fmt, ...) {
    if (err) {
        va_list ap;
        va_start(ap, fmt);
        vsnprintf(err->message, sizeof err->message, fmt, ap);
        va_end(ap);
        err->status = st;
    }
    return st;
}

const char *ck_format_bytes(char *buf, size_t cap, int64_t bytes) {
    const double b = (double)bytes;
    if (bytes < 1024 && bytes > -1024) snprintf(buf, cap, "%lld bytes", (long long)bytes);
    else if (b < 1024.0 * 1024) snprintf(buf, cap, "%.1f KiB", b / 1024.0);
    else if (b < 1024.0 * 1024 * 1024) snprintf(buf, cap, "%.1f MiB", b / (1024.0 * 1024));
    else snprintf(buf, cap, "%.2f GiB", b / (1024.0 * 1024 * 1024));
    return buf;
}

const char *ckey_format_bytes(char *buf, size_t cap, int64_t bytes) { return ck_format_bytes(buf, cap, bytes); }

void ck_error_clear(ckey_error *err) {
    if (err) {
        err->status = CKEY_OK;
        err->message[0] = 0;
    }
}

int ck_mul_size(size_t a, size_t b, size_t *out) {
    if (a != 0 && b > SIZE_MAX / a) return 0;
    *out = a * b;
    return 1;
}

int ck_add_size(size_t a, size_t b, size_t *out) {
    if (b > SIZE_MAX - a) return 0;
    *out = a + b;
    return 1;
}

double ck_now(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}
