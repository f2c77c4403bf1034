/* Output shared by the ckey commands (output.h). */
#include "output.h"

#include <stdarg.h>
#include <time.h>

#include "opts.h"

double now_seconds(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

void json_str(FILE *f, const char *s) {
    fputc('"', f);
    for (const unsigned char *p = (const unsigned char *)(s ? s : ""); *p; p++) {
        switch (*p) {
        case '"': fputs("\\\"", f); break;
        case '\\': fputs("\\\\", f); break;
        case '\n': fputs("\\n", f); break;
        case '\t': fputs("\\t", f); break;
        case '\r': fputs("\\r", f); break;
        default:
            if (*p < 0x20) fprintf(f, "\\u%04x", *p);
            else fputc(*p, f);
        }
    }
    fputc('"', f);
}

int fail(int json, ckey_status st, const char *fmt, ...) {
    char msg[1024];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof msg, fmt, ap);
    va_end(ap);
    fprintf(stderr, "ckey: error: %s\n", msg);
    if (json) {
        printf("{\"ok\": false, \"status\": ");
        json_str(stdout, ckey_status_name(st));
        printf(", \"message\": ");
        json_str(stdout, msg);
        printf("}\n");
    }
    return EXIT_RUNTIME;
}

int fail_err(int json, const ckey_error *err) {
    return fail(json, err->status, "%s", err->message[0] ? err->message : ckey_status_name(err->status));
}

double mib(int64_t bytes) { return (double)bytes / (1024.0 * 1024.0); }

void print_plan_json(const ckey_memory_plan *p) {
    printf("{\"weight_bytes\": %lld, \"arena_bytes\": %lld, \"scratch_bytes\": %lld, "
           "\"peak_bytes\": %lld, \"num_buffers\": %d, \"naive_bytes\": %lld}",
           (long long)p->weight_bytes, (long long)p->arena_bytes, (long long)p->scratch_bytes,
           (long long)p->peak_bytes, (int)p->num_buffers, (long long)p->naive_bytes);
}

int is_test_model(const ckey_model_info *mi) { return mi->embed_dim != CKEY_REAL_EMBED_DIM; }

void test_model_notice(const char *model, const ckey_model_info *mi) {
    fflush(stdout); /* after what stdout holds so far, as on a terminal */
    fprintf(stderr,
            "ckey: note: %s is a reduced test configuration (embed_dim %d, not %d); its weights "
            "are untrained test weights and the matte is not meaningful.\n",
            model, (int)mi->embed_dim, CKEY_REAL_EMBED_DIM);
}
