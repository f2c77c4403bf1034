#include "testutil.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <signal.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
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

char *ck_fixture_path(const char *rel) {
    size_t n = strlen(ck_fixtures_dir()) + strlen(rel) + 2;
    char *p = malloc(n);
    snprintf(p, n, "%s/%s", ck_fixtures_dir(), rel);
    return p;
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
        if (opt && opt->fsize_limit > 0) {
            signal(SIGXFSZ, SIG_IGN);
            const struct rlimit rl = {(rlim_t)opt->fsize_limit, (rlim_t)opt->fsize_limit};
            if (setrlimit(RLIMIT_FSIZE, &rl) != 0) _exit(125);
        }
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

int ck_make_temp_dir(char *dir, size_t cap, const char *name) {
    snprintf(dir, cap, "/tmp/ckey-test-%s-XXXXXX", name);
    if (mkdtemp(dir)) return 1;
    fprintf(stderr, "cannot create a temporary directory: %s\n", strerror(errno));
    return 0;
}

void ck_abs_path(char *out, size_t cap, const char *path) {
    char *abs = realpath(path, NULL);
    snprintf(out, cap, "%s", abs ? abs : path);
    free(abs);
}

void ck_ckey_path(char *bin, size_t cap, const char *argv0) {
    char self[PATH_MAX], rel[PATH_MAX + 16];
    snprintf(self, sizeof self, "%s", argv0);
    char *slash = strrchr(self, '/');
    if (slash) *slash = 0;
    else snprintf(self, sizeof self, ".");
    snprintf(rel, sizeof rel, "%s/../ckey", self);
    ck_abs_path(bin, cap, rel);
}

void ck_tiny_model_path(char *path, size_t cap) {
    char rel[PATH_MAX];
    snprintf(rel, sizeof rel, "%s/tiny/tiny.pth", ck_fixtures_dir());
    ck_abs_path(path, cap, rel);
}

void ck_isolate_model_lookup(const char *workdir) {
    char isolated[PATH_MAX];
    snprintf(isolated, sizeof isolated, "%s/no-home", workdir);
    setenv("HOME", isolated, 1);
    snprintf(isolated, sizeof isolated, "%s/no-data", workdir);
    setenv("XDG_DATA_HOME", isolated, 1);
    unsetenv("CKEY_MODEL");
}

ck_run_result ck_cli_run_argv(const ck_cli *c, const ck_run_options *o, const char *const *args) {
    const char *argv[128];
    int argc = 0;
    argv[argc++] = c->bin;
    for (; args && *args && argc < 64; args++) argv[argc++] = *args;
    const int shown = argc;
    for (const char *const *t = c->common; t && *t && argc < (int)(sizeof argv / sizeof argv[0]) - 1; t++)
        argv[argc++] = *t;
    argv[argc] = NULL;
    ck_run_result r = ck_run_opts(argv, c->workdir, o);
    if (!c->echo) return r;
    printf("  $");
    if (o && o->cwd) printf(" (in %s)", o->cwd);
    for (const char *const *e = o && o->env ? o->env : NULL; e && *e; e++)
        printf(strchr(*e, '=') ? " %s" : " (no %s)", *e);
    printf(" ckey");
    for (int i = 1; i < shown; i++) printf(" %s", argv[i]);
    if (o && o->fsize_limit > 0) printf("  (RLIMIT_FSIZE)");
    printf("  -> %d", r.code);
    if (c->echo > 1 && r.err[0]) printf("  [%.*s]", (int)strcspn(r.err, "\n"), r.err);
    printf("\n");
    return r;
}

ck_run_result ck_cli_run(const ck_cli *c, const ck_run_options *o, const char *first, ...) {
    const char *args[64];
    int n = 0;
    va_list ap;
    va_start(ap, first);
    for (const char *a = first; a && n < 63; a = va_arg(ap, const char *)) args[n++] = a;
    va_end(ap);
    args[n] = NULL;
    return ck_cli_run_argv(c, o, args);
}

ck_run_result ck_shf(const char *workdir, const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    const int n = vsnprintf(NULL, 0, fmt, ap);
    va_end(ap);
    char *cmd = malloc(n < 0 ? 1 : (size_t)n + 1);
    if (!cmd || n < 0) {
        free(cmd);
        return (ck_run_result){-1, calloc(1, 1), calloc(1, 1)};
    }
    va_start(ap, fmt);
    vsnprintf(cmd, (size_t)n + 1, fmt, ap);
    va_end(ap);
    ck_run_result r = ck_sh(cmd, workdir);
    free(cmd);
    return r;
}

int ck_count_str(const char *hay, const char *needle) {
    int n = 0;
    for (const char *p = hay; (p = strstr(p, needle)); p += strlen(needle)) n++;
    return n;
}

int ck_exists(const char *path) {
    struct stat st;
    return stat(path, &st) == 0;
}

int ck_count_entries(const char *dir) {
    DIR *d = opendir(dir);
    if (!d) return -1;
    int n = 0;
    for (struct dirent *e; (e = readdir(d));) n += strcmp(e->d_name, ".") && strcmp(e->d_name, "..");
    closedir(d);
    return n;
}

int ck_mkdirs(const char *path) {
    char b[PATH_MAX];
    snprintf(b, sizeof b, "%s", path);
    for (char *s = b + 1; *s; s++)
        if (*s == '/') {
            *s = 0;
            if (mkdir(b, 0777) != 0 && errno != EEXIST) return 0;
            *s = '/';
        }
    return mkdir(b, 0777) == 0 || errno == EEXIST;
}

int ck_walk_tree(const char *dir, ck_walk_fn fn, void *user) {
    DIR *d = opendir(dir);
    if (!d) return 0;
    int ok = 1, go = 1;
    char path[PATH_MAX];
    for (struct dirent *e; go && (e = readdir(d));) {
        if (!strcmp(e->d_name, ".") || !strcmp(e->d_name, "..")) continue;
        if (snprintf(path, sizeof path, "%s/%s", dir, e->d_name) >= (int)sizeof path) {
            ok = 0; /* a path too long to name */
            continue;
        }
        struct stat st;
        const int known = lstat(path, &st) == 0;
        if (known && S_ISDIR(st.st_mode) && !ck_walk_tree(path, fn, user)) ok = 0;
        go = fn(user, path, e->d_name, known ? &st : NULL);
    }
    closedir(d);
    return ok && go;
}

static int remove_entry(void *user, const char *path, const char *name, const struct stat *st) {
    (void)user, (void)name;
    if (st && S_ISDIR(st->st_mode)) rmdir(path);
    else unlink(path);
    return 1;
}

void ck_remove_tree(const char *dir) {
    ck_walk_tree(dir, remove_entry, NULL);
    rmdir(dir);
}

int ck_write_file(const char *path, const void *data, size_t n) {
    FILE *f = fopen(path, "wb");
    int ok = f && fwrite(data, 1, n, f) == n;
    if (f && fclose(f) != 0) ok = 0;
    return ok;
}

int ck_copy_file(const char *from, const char *to) {
    size_t n = 0;
    unsigned char *b = ck_read_file(from, &n);
    const int ok = b && ck_write_file(to, b, n);
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
    if (ok && !(ok = ck_write_file(to, b, n))) fprintf(stderr, "ck_poison_safetensors: cannot write %s\n", to);
    free(b);
    return ok;
}

int ck_same_file(const char *a, const char *b) {
    size_t na = 0, nb = 0;
    unsigned char *x = ck_read_file(a, &na), *y = ck_read_file(b, &nb);
    const int same = x && y && na == nb && memcmp(x, y, na) == 0;
    free(x);
    free(y);
    return same;
}

/* The regular files under a tree, as paths relative to its root. */
typedef struct name_list {
    size_t root_len;
    char **names;
    size_t n, cap;
} name_list;

static int list_entry(void *user, const char *path, const char *name, const struct stat *st) {
    (void)name;
    name_list *l = user;
    if (!st || S_ISDIR(st->st_mode)) return 1;
    if (l->n == l->cap) {
        l->cap = l->cap ? 2 * l->cap : 64;
        char **nn = realloc(l->names, l->cap * sizeof *nn);
        if (!nn) return 0;
        l->names = nn;
    }
    l->names[l->n++] = strdup(path + l->root_len + 1);
    return 1;
}

/* The regular files under root (relative paths) into *l; 0 when a folder
 * could not be read. */
static int list_tree(const char *root, name_list *l) {
    l->root_len = strlen(root);
    return ck_walk_tree(root, list_entry, l);
}

static int cmp_str(const void *a, const void *b) {
    return strcmp(*(char *const *)a, *(char *const *)b);
}

long ck_same_tree(const char *a, const char *b, char *why, size_t cap) {
    name_list la = {0}, lb = {0};
    long result = -1;
    const int listed = list_tree(a, &la) && list_tree(b, &lb);
    char **na = la.names, **nb = lb.names;
    const size_t ka = la.n, kb = lb.n;
    if (!listed) {
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
        if (!ck_same_file(pa, pb)) {
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

int ck_same_tree_n(const char *a, const char *b, long files, char *why, size_t cap) {
    const long n = ck_same_tree(a, b, why, cap);
    if (n >= 0 && n != files) snprintf(why, cap, "%s holds %ld files, not %ld", b, n, files);
    return n == files;
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

void ck_cc_test_mask(uint8_t *m, int32_t h, int32_t w, int kind, uint64_t *rng) {
    for (int32_t y = 0; y < h; y++)
        for (int32_t x = 0; x < w; x++) {
            *rng = *rng * 6364136223846793005ull + 1442695040888963407ull;
            const unsigned r = (unsigned)(*rng >> 33) % 100;
            uint8_t v;
            switch (kind) {
            case 0: v = x == w / 2; break;
            case 1: v = (x + y) % w == 0 || (x - y) % w == 0; break;
            case 2: v = (x + y) % 2 == 0; break;
            case 3: v = r < 30; break;
            case 4: v = r < 55; break;
            case 5: v = r < 80; break;
            default: v = (y / 3) % 2 == 0 ? r < 90 : (x % 7 == 0); break;
            }
            m[(size_t)y * w + x] = v;
        }
}
