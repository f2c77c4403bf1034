#include "testutil.h"

#include <stdlib.h>
#include <string.h>

int ck_test_failed;
int ck_test_skipped;

double ck_compare(const char *name, const float *got, const float *want, size_t n,
                  double *mean_out) {
    double max = 0, sum = 0;
    size_t worst = 0;
    for (size_t i = 0; i < n; i++) {
        double d = fabs((double)got[i] - (double)want[i]);
        if (isnan(d)) d = INFINITY;
        if (d > max) { max = d; worst = i; }
        sum += d;
    }
    double mean = n ? sum / (double)n : 0;
    printf("  %-24s max abs err %.3g (at %zu: got %.7g want %.7g), mean abs err %.3g over %zu\n",
           name, max, worst, n ? got[worst] : 0.0, n ? want[worst] : 0.0, mean, n);
    if (mean_out) *mean_out = mean;
    return max;
}

int ck_test_main(const ck_test_case *cases, int n, int argc, char **argv) {
    int passed = 0, failed = 0, skipped = 0;
    const char *only = argc > 1 ? argv[1] : NULL;
    for (int i = 0; i < n; i++) {
        if (only && !strstr(cases[i].name, only)) continue;
        ck_test_failed = 0;
        ck_test_skipped = 0;
        printf("[ RUN  ] %s\n", cases[i].name);
        fflush(stdout);
        cases[i].fn();
        if (ck_test_failed) {
            printf("[ FAIL ] %s\n", cases[i].name);
            failed++;
        } else if (ck_test_skipped) {
            printf("[ SKIP ] %s\n", cases[i].name);
            skipped++;
        } else {
            printf("[  OK  ] %s\n", cases[i].name);
            passed++;
        }
        fflush(stdout);
    }
    printf("cases: %d passed, %d failed, %d skipped\n", passed, failed, skipped);
    if (failed) return 1;
    if (passed == 0 && skipped > 0) return 77;
    return 0;
}

unsigned char *ck_read_file(const char *path, size_t *size) {
    FILE *f = fopen(path, "rb");
    if (!f) return NULL;
    if (fseek(f, 0, SEEK_END) != 0) { fclose(f); return NULL; }
    long len = ftell(f);
    if (len < 0) { fclose(f); return NULL; }
    rewind(f);
    unsigned char *buf = malloc((size_t)len + 1);
    if (!buf) { fclose(f); return NULL; }
    if (fread(buf, 1, (size_t)len, f) != (size_t)len) { free(buf); fclose(f); return NULL; }
    fclose(f);
    buf[len] = 0;
    *size = (size_t)len;
    return buf;
}

const char *ck_fixtures_dir(void) {
    const char *e = getenv("CKEY_FIXTURES");
    return e && *e ? e : "tests/fixtures";
}
