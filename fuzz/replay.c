/*
 * Corpus replay without libFuzzer: links with any fuzz-*.c target and feeds
 * it every file named on the command line or found (one level deep) in a
 * directory argument. Run under the sanitizer build, this turns the corpus
 * into a regression test. Exits non-zero only when an argument cannot be read.
 */
#include <dirent.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static int run_file(const char *path) {
    FILE *f = fopen(path, "rb");
    if (!f) {
        fprintf(stderr, "replay: cannot open %s\n", path);
        return -1;
    }
    uint8_t *buf = NULL;
    size_t n = 0, cap = 0;
    for (;;) {
        if (n == cap) {
            cap = cap ? cap * 2 : 65536;
            uint8_t *b = realloc(buf, cap);
            if (!b) {
                free(buf);
                fclose(f);
                fprintf(stderr, "replay: out of memory reading %s\n", path);
                return -1;
            }
            buf = b;
        }
        size_t got = fread(buf + n, 1, cap - n, f);
        n += got;
        if (got == 0) break;
    }
    int bad = ferror(f);
    fclose(f);
    if (bad) {
        free(buf);
        fprintf(stderr, "replay: cannot read %s\n", path);
        return -1;
    }
    /* An exact-size copy lets the sanitizers catch a read one past the end. */
    uint8_t *exact = malloc(n ? n : 1);
    if (!exact) {
        free(buf);
        return -1;
    }
    if (n) memcpy(exact, buf, n);
    free(buf);
    LLVMFuzzerTestOneInput(exact, n);
    free(exact);
    return 0;
}

int main(int argc, char **argv) {
    if (argc < 2) {
        fprintf(stderr, "usage: %s CORPUS_DIR_OR_FILE...\n", argv[0]);
        return 2;
    }
    size_t ran = 0;
    int failed = 0;
    for (int i = 1; i < argc; i++) {
        struct stat sb;
        if (stat(argv[i], &sb) != 0) {
            fprintf(stderr, "replay: cannot read %s\n", argv[i]);
            failed = 1;
            continue;
        }
        if (!S_ISDIR(sb.st_mode)) {
            if (run_file(argv[i]) == 0) ran++;
            else failed = 1;
            continue;
        }
        DIR *d = opendir(argv[i]);
        if (!d) {
            fprintf(stderr, "replay: cannot read directory %s\n", argv[i]);
            failed = 1;
            continue;
        }
        struct dirent *e;
        while ((e = readdir(d)) != NULL) {
            if (e->d_name[0] == '.') continue;
            size_t len = strlen(argv[i]) + strlen(e->d_name) + 2;
            char *path = malloc(len);
            if (!path) break;
            snprintf(path, len, "%s/%s", argv[i], e->d_name);
            if (stat(path, &sb) == 0 && S_ISREG(sb.st_mode)) {
                if (run_file(path) == 0) ran++;
                else failed = 1;
            }
            free(path);
        }
        closedir(d);
    }
    printf("%s: replayed %zu inputs\n", argv[0], ran);
    return failed;
}
