#include "testutil.h"

#include "ckey_media.h"

#include <dirent.h>
#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

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

static char *slurp_or_empty(const char *path) {
    size_t n = 0;
    char *s = (char *)ck_read_file(path, &n);
    return s ? s : calloc(1, 1);
}

ck_run_result ck_run(const char *const *argv, const char *workdir) {
    return ck_run_opts(argv, workdir, NULL);
}

ck_run_result ck_run_opts(const char *const *argv, const char *workdir, const ck_run_options *opt) {
    char out_path[512], err_path[512];
    snprintf(out_path, sizeof out_path, "%s/stdout.txt", workdir);
    snprintf(err_path, sizeof err_path, "%s/stderr.txt", workdir);
    ck_run_result r = {-1, NULL, NULL};
    fflush(stdout);
    pid_t pid = fork();
    if (pid == 0) {
        int o = open(out_path, O_WRONLY | O_CREAT | O_TRUNC, 0600);
        int e = open(err_path, O_WRONLY | O_CREAT | O_TRUNC, 0600);
        if (o < 0 || e < 0) _exit(126);
        dup2(o, 1);
        dup2(opt && opt->merge_stderr ? o : e, 2);
        for (const char *const *v = opt && opt->env ? opt->env : NULL; v && *v; v++) {
            const char *eq = strchr(*v, '=');
            char name[256];
            const size_t n = eq ? (size_t)(eq - *v) : strlen(*v);
            if (n == 0 || n >= sizeof name) _exit(126);
            memcpy(name, *v, n);
            name[n] = 0;
            if (eq ? setenv(name, eq + 1, 1) : unsetenv(name)) _exit(126);
        }
        if (opt && opt->cwd && chdir(opt->cwd) != 0) _exit(126);
        execv(argv[0], (char *const *)argv);
        _exit(127);
    }
    int status = 0;
    if (pid > 0 && waitpid(pid, &status, 0) == pid && WIFEXITED(status)) r.code = WEXITSTATUS(status);
    r.out = slurp_or_empty(out_path);
    r.err = slurp_or_empty(err_path);
    return r;
}

void ck_run_free(ck_run_result *r) {
    free(r->out);
    free(r->err);
    memset(r, 0, sizeof *r);
}

void ck_remove_tree(const char *dir) {
    DIR *d = opendir(dir);
    if (!d) return;
    struct dirent *e;
    char path[1024];
    while ((e = readdir(d))) {
        if (!strcmp(e->d_name, ".") || !strcmp(e->d_name, "..")) continue;
        snprintf(path, sizeof path, "%s/%s", dir, e->d_name);
        struct stat st;
        if (lstat(path, &st) == 0 && S_ISDIR(st.st_mode)) ck_remove_tree(path);
        else unlink(path);
    }
    closedir(d);
    rmdir(dir);
}

int ck_copy_file(const char *from, const char *to) {
    size_t n = 0;
    unsigned char *b = ck_read_file(from, &n);
    if (!b) return 0;
    FILE *f = fopen(to, "wb");
    int ok = f && fwrite(b, 1, n, f) == n;
    if (f && fclose(f) != 0) ok = 0;
    free(b);
    return ok;
}

int ck_poison_safetensors(const char *from, const char *to, const char *tensor, uint64_t index,
                          float value) {
    size_t n = 0;
    unsigned char *b = ck_read_file(from, &n);
    if (!b) {
        fprintf(stderr, "ck_poison_safetensors: cannot read %s\n", from);
        return 0;
    }
    /* [u64 LE header length][JSON header]["name": {"dtype": ..., "shape": [...],
     * "data_offsets": [begin, end]}, ...][data] */
    uint64_t hl = 0;
    for (int i = 7; n >= 8 && i >= 0; i--) hl = hl << 8 | b[i];
    int ok = n >= 8 && hl <= n - 8;
    char key[300];
    snprintf(key, sizeof key, "\"%s\"", tensor);
    char *hdr = ok ? strndup((const char *)b + 8, (size_t)hl) : NULL;
    const char *entry = hdr ? strstr(hdr, key) : NULL;
    const char *end = entry ? strchr(entry, '}') : NULL;
    const char *dt = entry ? strstr(entry, "\"dtype\"") : NULL;
    const char *off = entry ? strstr(entry, "\"data_offsets\"") : NULL;
    unsigned long long begin = 0, stop = 0;
    ok = ok && end && dt && off && dt < end && off < end && strstr(dt, "\"F32\"") &&
         strstr(dt, "\"F32\"") < end &&
         sscanf(strchr(off, '[') ? strchr(off, '[') : "", "[%llu ,%llu", &begin, &stop) == 2 &&
         index < (stop - begin) / 4 && 8 + hl + stop <= n;
    if (ok) memcpy(b + 8 + hl + begin + 4 * index, &value, 4);
    else fprintf(stderr, "ck_poison_safetensors: %s: no F32 tensor '%s' with element %llu\n", from,
                 tensor, (unsigned long long)index);
    free(hdr);
    if (ok) {
        FILE *f = fopen(to, "wb");
        ok = f && fwrite(b, 1, n, f) == n;
        if (f && fclose(f) != 0) ok = 0;
        if (!ok) fprintf(stderr, "ck_poison_safetensors: cannot write %s\n", to);
    }
    free(b);
    return ok;
}

int ck_make_shot(char *shot, size_t cap, const char *root, const char *name, int n) {
    snprintf(shot, cap, "%s/%s", root, name);
    ck_remove_tree(shot);
    char p[1024];
    if (mkdir(shot, 0777) != 0) return 0;
    snprintf(p, sizeof p, "%s/Input", shot);
    if (mkdir(p, 0777) != 0) return 0;
    snprintf(p, sizeof p, "%s/AlphaHint", shot);
    if (mkdir(p, 0777) != 0) return 0;
    for (int i = 1; i <= n; i++) {
        snprintf(p, sizeof p, "%s/Input/plate_%04d.png", shot, i);
        if (!ck_copy_file("examples/plate.png", p)) return 0;
        snprintf(p, sizeof p, "%s/AlphaHint/hint_%04d.png", shot, i);
        if (!ck_copy_file("examples/hint.png", p)) return 0;
    }
    return 1;
}

void ck_synth_frame(int k, int W, int H, float *rgb, float *hint) {
    const size_t n = (size_t)W * H;
    const float cx = 22.0f + 7.0f * (float)k, cy = 0.5f * (float)H, rad = 15.0f;
    for (int y = 0; y < H; y++)
        for (int x = 0; x < W; x++) {
            const size_t i = (size_t)y * W + x;
            const float d = sqrtf((x - cx) * (x - cx) + (y - cy) * (y - cy));
            float a = (rad - d) / 4.0f + 0.5f;
            a = a < 0 ? 0 : a > 1 ? 1 : a;
            const float spill = 0.3f * (1.0f - a) * (a > 0);
            const float sub[3] = {0.85f - 0.003f * (float)y, 0.55f + spill, 0.45f + 0.002f * (float)x};
            const float screen[3] = {0.12f, 0.78f + 0.001f * (float)x, 0.18f};
            for (int c = 0; c < 3; c++) rgb[c * n + i] = sub[c] * a + screen[c] * (1.0f - a);
            const float h = (a - 0.3f) * 2.0f;
            hint[i] = h < 0 ? 0 : h > 1 ? 1 : h;
        }
}

int ck_make_synth_shot(char *shot, size_t cap, const char *root, const char *name, int first, int n,
                       int W, int H) {
    snprintf(shot, cap, "%s/%s", root, name);
    ck_remove_tree(shot);
    char p[1024];
    if (mkdir(shot, 0777) != 0) return 0;
    snprintf(p, sizeof p, "%s/Input", shot);
    if (mkdir(p, 0777) != 0) return 0;
    snprintf(p, sizeof p, "%s/AlphaHint", shot);
    if (mkdir(p, 0777) != 0) return 0;
    float *rgb = malloc(sizeof(float) * 3 * (size_t)W * H), *hint = malloc(sizeof(float) * (size_t)W * H);
    int ok = rgb && hint;
    ckey_error err;
    for (int k = 0; ok && k < n; k++) {
        ck_synth_frame(k, W, H, rgb, hint);
        snprintf(p, sizeof p, "%s/Input/plate_%04d.png", shot, first + k);
        ok = ckey_image_write_png(p, rgb, 3, W, H, 16, &err) == CKEY_OK;
        snprintf(p, sizeof p, "%s/AlphaHint/hint_%04d.png", shot, first + k);
        ok = ok && ckey_image_write_png(p, hint, 1, W, H, 8, &err) == CKEY_OK;
    }
    free(rgb);
    free(hint);
    return ok;
}

/* The regular files under dir (relative paths, sorted) into *names. */
static int list_tree(const char *root, const char *rel, char ***names, size_t *n, size_t *cap) {
    char path[2048];
    snprintf(path, sizeof path, "%s%s%s", root, *rel ? "/" : "", rel);
    DIR *d = opendir(path);
    if (!d) return 0;
    int ok = 1;
    for (struct dirent *e; ok && (e = readdir(d));) {
        if (!strcmp(e->d_name, ".") || !strcmp(e->d_name, "..")) continue;
        char sub[2048], full[4096];
        snprintf(sub, sizeof sub, "%s%s%s", rel, *rel ? "/" : "", e->d_name);
        snprintf(full, sizeof full, "%s/%s", root, sub);
        struct stat st;
        if (lstat(full, &st) != 0) continue;
        if (S_ISDIR(st.st_mode)) {
            ok = list_tree(root, sub, names, n, cap);
        } else {
            if (*n == *cap) {
                *cap = *cap ? 2 * *cap : 64;
                char **nn = realloc(*names, *cap * sizeof *nn);
                if (!nn) { ok = 0; break; }
                *names = nn;
            }
            (*names)[(*n)++] = strdup(sub);
        }
    }
    closedir(d);
    return ok;
}

static int cmp_str(const void *a, const void *b) {
    return strcmp(*(char *const *)a, *(char *const *)b);
}

long ck_same_tree(const char *a, const char *b, char *why, size_t cap) {
    char **na = NULL, **nb = NULL;
    size_t ca = 0, cb = 0, ka = 0, kb = 0;
    long result = -1;
    if (!list_tree(a, "", &na, &ka, &ca) || !list_tree(b, "", &nb, &kb, &cb)) {
        snprintf(why, cap, "cannot list %s or %s", a, b);
        goto done;
    }
    if (ka) qsort(na, ka, sizeof *na, cmp_str);
    if (kb) qsort(nb, kb, sizeof *nb, cmp_str);
    for (size_t i = 0, j = 0; i < ka || j < kb;) {
        const int c = i == ka ? 1 : j == kb ? -1 : strcmp(na[i], nb[j]);
        if (c != 0) {
            snprintf(why, cap, "%s/%s has no twin", c < 0 ? a : b, c < 0 ? na[i] : nb[j]);
            goto done;
        }
        char pa[4096], pb[4096];
        snprintf(pa, sizeof pa, "%s/%s", a, na[i]);
        snprintf(pb, sizeof pb, "%s/%s", b, nb[j]);
        size_t sa = 0, sb = 0;
        unsigned char *da = ck_read_file(pa, &sa), *db = ck_read_file(pb, &sb);
        const int same = da && db && sa == sb && memcmp(da, db, sa) == 0;
        free(da);
        free(db);
        if (!same) {
            snprintf(why, cap, "%s and %s differ", pa, pb);
            goto done;
        }
        i++, j++;
    }
    result = (long)ka;
done:
    for (size_t i = 0; i < ka; i++) free(na[i]);
    for (size_t i = 0; i < kb; i++) free(nb[i]);
    free(na);
    free(nb);
    return result;
}

int ck_spawn(const char *const *argv, const char *log) {
    fflush(stdout);
    fflush(stderr);
    const pid_t pid = fork();
    if (pid == 0) {
        const int o = open(log, O_WRONLY | O_CREAT | O_TRUNC, 0600);
        if (o < 0) _exit(126);
        dup2(o, 1);
        dup2(o, 2);
        execv(argv[0], (char *const *)argv);
        _exit(127);
    }
    return pid;
}

ck_run_result ck_sh(const char *cmd, const char *workdir) {
    const char *argv[] = {"/bin/sh", "-c", cmd, NULL};
    return ck_run(argv, workdir);
}
