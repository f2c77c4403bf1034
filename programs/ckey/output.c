/* Output shared by the ckey commands (output.h). */
#include "output.h"

#include <stdarg.h>
#include <string.h>
#include <sys/resource.h>
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

int event_fail(int json, int newline, ckey_status st, const char *fmt, ...) {
    char msg[4600];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof msg, fmt, ap);
    va_end(ap);
    if (newline) fputc('\n', stderr);
    fprintf(stderr, "ckey: error: %s\n", msg);
    if (json) {
        printf("{\"event\":\"error\",\"status\":");
        json_str(stdout, ckey_status_name(st));
        printf(",\"message\":");
        json_str(stdout, msg);
        printf("}\n");
        fflush(stdout);
    }
    return EXIT_RUNTIME;
}

void event_warning(int json, const char *msg) {
    fprintf(stderr, "ckey: warning: %s\n", msg);
    if (json) {
        printf("{\"event\":\"warning\",\"message\":");
        json_str(stdout, msg);
        printf("}\n");
        fflush(stdout);
    }
}

double mib(int64_t bytes) { return (double)bytes / (1024.0 * 1024.0); }

void print_run_memory_json(const ckey_run_memory *r, int32_t width, int32_t height) {
    printf("{\"width\": %d, \"height\": %d, \"frames_in_flight\": %d, \"writers\": %d, "
           "\"network_bytes\": %lld, \"model_bytes\": %lld, \"io_bytes\": %lld, "
           "\"decoded_bytes\": %lld, \"hint_bytes\": %lld, \"resize_bytes\": %lld, "
           "\"output_bytes\": %lld, \"post_bytes\": %lld, \"encode_bytes\": %lld, "
           "\"plate_bytes\": %lld, \"total_bytes\": %lld, \"host_bytes\": %lld, "
           "\"host_limit_bytes\": %lld, \"min_budget_bytes\": %lld, \"device_frame_bytes\": %lld, "
           "\"track_bytes\": %lld}",
           (int)width, (int)height, (int)r->frames_in_flight, (int)r->writers,
           (long long)r->session.peak_bytes, (long long)r->model_bytes, (long long)r->io_bytes,
           (long long)r->decoded_bytes, (long long)r->hint_bytes, (long long)r->resize_bytes,
           (long long)r->output_bytes, (long long)r->post_bytes, (long long)r->encode_bytes,
           (long long)r->plate_bytes, (long long)r->total_bytes, (long long)r->host_bytes,
           (long long)r->host_limit, (long long)r->min_budget_bytes, (long long)r->device_frame_bytes,
           (long long)r->track_bytes);
}

void print_run_memory_text(const ckey_run_memory *r, const char *indent) {
    static const char *const what[] = {
        "network", "model", "transfer", "decoded", "auto hint", "resize", "outputs", "post", "encode",
        "device frame", "tracker",
    };
    const int64_t v[] = {r->session.peak_bytes, r->model_bytes, r->io_bytes, r->decoded_bytes,
                         r->hint_bytes, r->resize_bytes, r->output_bytes, r->post_bytes,
                         r->encode_bytes, r->device_frame_bytes, r->track_bytes};
    static const char *const note[] = {
        "weights + arena",
        "the loaded model outside the weights",
        "[4, S, S] buffers outside the arena",
        "plates + hints as decoded",
        "scratch of the hints made from the plates",
        "scratch of the resizes to S and back",
        "alpha + fg at plate size (key: + Processed + Comp)",
        "scratch of the post passes",
        "the file encoders (an estimate)",
        "the device frame path's plate buffers, on the GPU",
        "Cutie: weights, memory bank, frame buffers, arena (host memory)",
    };
    char b[32];
    for (size_t k = 0; k < sizeof v / sizeof v[0]; k++) {
        if (v[k] == 0 && k > 1) continue;
        printf("%s%-14s %11s  %s\n", indent, what[k], ckey_format_bytes(b, sizeof b, v[k]), note[k]);
    }
    printf("%s%-14s %11s", indent, "total", ckey_format_bytes(b, sizeof b, r->total_bytes));
    if (r->host_bytes != r->total_bytes) printf("  (host memory %s)", ckey_format_bytes(b, sizeof b, r->host_bytes));
    printf("\n");
    printf("%s%-14s %11s  the network's leanest schedule\n", indent, "smallest", ckey_format_bytes(b, sizeof b, r->min_budget_bytes));
}

double cpu_seconds(void) {
    struct rusage u;
    if (getrusage(RUSAGE_SELF, &u) != 0) return 0.0;
    return (double)u.ru_utime.tv_sec + 1e-6 * (double)u.ru_utime.tv_usec + (double)u.ru_stime.tv_sec +
           1e-6 * (double)u.ru_stime.tv_usec;
}

int64_t peak_rss_bytes(void) {
    FILE *f = fopen("/proc/self/status", "re");
    if (!f) return 0;
    char line[256];
    long long kib = -1;
    while (fgets(line, sizeof line, f))
        if (sscanf(line, "VmHWM: %lld kB", &kib) == 1) break;
    fclose(f);
    return kib > 0 ? (int64_t)kib * 1024 : 0;
}

void print_plan_json(const ckey_memory_plan *p) {
    printf("{\"weight_bytes\": %lld, \"arena_bytes\": %lld, \"scratch_bytes\": %lld, "
           "\"peak_bytes\": %lld, \"num_buffers\": %d, \"naive_bytes\": %lld, "
           "\"stage_bytes\": {\"encoder\": %lld, \"decoders\": %lld, \"refiner\": %lld}, "
           "\"refiner_band\": %d, \"refiner_work\": %.2f, \"min_budget_bytes\": %lld, \"min_budget_band\": %d, "
           "\"encoder_chunks\": %d, \"min_budget_chunks\": %d, \"c1_on_host\": %d, \"min_budget_c1_on_host\": %d, "
           "\"streamed\": %d, \"min_budget_streamed\": %d, \"workspace_bytes\": %lld}",
           (long long)p->weight_bytes, (long long)p->arena_bytes, (long long)p->scratch_bytes,
           (long long)p->peak_bytes, (int)p->num_buffers, (long long)p->naive_bytes,
           (long long)p->stage_bytes[0], (long long)p->stage_bytes[1], (long long)p->stage_bytes[2],
           (int)p->refiner_band, p->relative_work, (long long)p->min_budget_bytes, (int)p->min_budget_band,
           (int)p->encoder_chunks, (int)p->min_budget_chunks, (int)p->c1_on_host, (int)p->min_budget_c1_on_host,
           (int)p->streamed, (int)p->min_budget_streamed, (long long)p->workspace_bytes);
}

int is_test_model(const ckey_model_info *mi) { return mi->embed_dim != CKEY_REAL_EMBED_DIM; }

void test_model_notice(const char *model, const ckey_model_info *mi) {
    fflush(stdout); /* after what stdout holds so far, as on a terminal */
    fprintf(stderr,
            "ckey: note: %s is a reduced test configuration (embed_dim %d, not %d); its weights "
            "are untrained test weights and the matte is not meaningful.\n",
            model, (int)mi->embed_dim, CKEY_REAL_EMBED_DIM);
}
