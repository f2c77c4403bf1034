/*
 * ckey install-model: check that a file is a checkpoint ckey can load, then
 * copy it into the data directory, where run, key and info find it without
 * --model. Prints where it went and its SHA-256.
 */
#include <errno.h>
#include <fcntl.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <unistd.h>

#include "ckey.h"
#include "commands.h"
#include "help.h"
#include "model-path.h"
#include "opts.h"
#include "output.h"
#include "paths.h"
#include "sha256.h"

/* A whole copy of `src` in the new file `tmp` (0644), fsync'd, hashed as it
 * is read. 1 on success; else 0 with the reason in why[cap] (tmp may exist). */
static int copy_hashed(const char *src, const char *tmp, int64_t *bytes, char hex[65], char *why,
                       size_t cap) {
    int in = open(src, O_RDONLY | O_CLOEXEC);
    if (in < 0) {
        snprintf(why, cap, "%s: cannot open: %s", src, strerror(errno));
        return 0;
    }
    int out = open(tmp, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0644);
    if (out < 0) {
        snprintf(why, cap, "%s: cannot create: %s", tmp, strerror(errno));
        close(in);
        return 0;
    }
    enum { CHUNK = 1 << 20 };
    unsigned char *buf = malloc(CHUNK);
    sha256_ctx c;
    sha256_init(&c);
    *bytes = 0;
    int ok = buf != NULL;
    if (!buf) snprintf(why, cap, "out of memory");
    while (ok) {
        const ssize_t n = read(in, buf, CHUNK);
        if (n < 0 && errno == EINTR) continue;
        if (n < 0) {
            snprintf(why, cap, "%s: read failed: %s", src, strerror(errno));
            ok = 0;
            break;
        }
        if (n == 0) break;
        sha256_update(&c, buf, (size_t)n);
        *bytes += n;
        for (ssize_t done = 0; done < n;) {
            const ssize_t w = write(out, buf + done, (size_t)(n - done));
            if (w < 0 && errno == EINTR) continue;
            if (w <= 0) {
                snprintf(why, cap, "%s: write failed: %s", tmp, w < 0 ? strerror(errno) : "no progress");
                ok = 0;
                break;
            }
            done += w;
        }
    }
    if (ok && fsync(out) != 0) {
        snprintf(why, cap, "%s: fsync failed: %s", tmp, strerror(errno));
        ok = 0;
    }
    if (close(out) != 0 && ok) {
        snprintf(why, cap, "%s: write failed: %s", tmp, strerror(errno));
        ok = 0;
    }
    close(in);
    free(buf);
    uint8_t digest[32];
    sha256_final(&c, digest);
    sha256_hex(digest, hex);
    return ok;
}

/* The last component of a path. */
static const char *base_name(const char *path) {
    const char *slash = strrchr(path, '/');
    return slash ? slash + 1 : path;
}

/* Whether commands without --model take `dest`; a warning on stderr when
 * they do not. */
static int lookup_takes(const char *dir, const char *dest) {
    char found[4200];
    int count = 0, takes = 0;
    if (!dir_checkpoint(dir, found, sizeof found, &count))
        fprintf(stderr, "ckey: warning: %s/ now holds %d checkpoints and none is named %s, so "
                        "commands without --model will not choose one: remove the others, or "
                        "install the official checkpoint under its own name\n",
                dir, count, OFFICIAL_CHECKPOINT);
    else if (strcmp(found, dest))
        fprintf(stderr, "ckey: warning: commands without --model take %s, not the copy just "
                        "installed (%s is preferred)\n", found, OFFICIAL_CHECKPOINT);
    else
        takes = 1;
    const char *env = getenv("CKEY_MODEL");
    if (env && env[0]) {
        fprintf(stderr, "ckey: warning: $CKEY_MODEL is set (%s); commands without --model take "
                        "it before the data directory\n", env);
        takes = 0;
    }
    return takes;
}

/* One file of an install: copied to a hidden temporary name in the data
 * directory, then renamed into place. */
typedef struct install_file {
    char *src, *dest, *tmp; /* malloc'd */
    int64_t bytes;
    char sha256[65];
} install_file;

/* A printf into a new string; NULL when out of memory. */
static char *strf(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
static char *strf(const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    const int n = vsnprintf(NULL, 0, fmt, ap);
    va_end(ap);
    char *s = n >= 0 ? malloc((size_t)n + 1) : NULL;
    if (!s) return NULL;
    va_start(ap, fmt);
    vsnprintf(s, (size_t)n + 1, fmt, ap);
    va_end(ap);
    return s;
}

/* `src` (with `suffix`) to dir/name(suffix); 1, or 0 when out of memory. */
static int install_file_init(install_file *f, const char *src, const char *dir, const char *name,
                             const char *suffix) {
    f->src = strf("%s%s", src, suffix);
    f->dest = strf("%s/%s%s", dir, name, suffix);
    /* hidden while incomplete: the lookup skips names starting with '.' */
    f->tmp = strf("%s/.%s%s.tmp-%ld", dir, name, suffix, (long)getpid());
    return f->src && f->dest && f->tmp;
}

static void install_file_free(install_file *f) {
    free(f->src);
    free(f->dest);
    free(f->tmp);
}

int cmd_install_model(int argc, char **argv) {
    opts o;
    opts_init(&o, "install-model");
    const int rc = parse_opts(argc, argv, O_JSON, 1, help_install_model, &o);
    if (rc != CONTINUE) return rc;
    if (o.npositional != 1) return usage_error(o.cmd, "expected FILE, the checkpoint to install");
    const char *src = o.positional[0];
    const char *name = base_name(src);
    if (strcasecmp(file_ext(name), "pth") && strcasecmp(file_ext(name), "safetensors"))
        return fail(o.json, CKEY_ERR_INVALID_ARG,
                    "%s: not installed: commands look for *.pth and *.safetensors files only; "
                    "give it one of those extensions", src);

    /* a file ckey cannot load never reaches the data directory */
    ckey_error err;
    memset(&err, 0, sizeof err);
    ckey_model *model = NULL;
    if (ckey_model_load(src, &model, &err) != CKEY_OK)
        return fail(o.json, err.status, "%s; nothing installed", err.message);
    ckey_model_info mi;
    memset(&mi, 0, sizeof mi);
    ckey_model_get_info(model, &mi);
    ckey_model_free(model);

    char dir[4096], why[9400];
    if (!model_data_dir(dir, sizeof dir, NULL))
        return fail(o.json, CKEY_ERR_IO, "cannot tell where to install %s: %s", src, dir);
    /* the checkpoint, and its sidecar <file>.json (head_dim, groups) when it
     * has one: the loader reads both */
    install_file f[2];
    memset(f, 0, sizeof f);
    if (!install_file_init(&f[0], src, dir, name, "") ||
        !install_file_init(&f[1], src, dir, name, ".json")) {
        install_file_free(&f[0]);
        install_file_free(&f[1]);
        return fail(o.json, CKEY_ERR_NOMEM, "out of memory");
    }
    const int have_side = access(f[1].src, F_OK) == 0;
    int ok = make_dirs(dir, why, sizeof why);
    for (int k = 0; ok && k < 1 + have_side; k++)
        ok = copy_hashed(f[k].src, f[k].tmp, &f[k].bytes, f[k].sha256, why, sizeof why);
    /* the sidecar first, so the checkpoint never appears without it; a stale
     * sidecar of an earlier install under this name goes */
    if (ok && have_side && rename(f[1].tmp, f[1].dest) != 0) {
        snprintf(why, sizeof why, "cannot rename %s to %s: %s", f[1].tmp, f[1].dest, strerror(errno));
        ok = 0;
    }
    if (ok && !have_side && unlink(f[1].dest) != 0 && errno != ENOENT) {
        snprintf(why, sizeof why, "cannot remove %s, the sidecar of an earlier install: %s",
                 f[1].dest, strerror(errno));
        ok = 0;
    }
    if (ok && rename(f[0].tmp, f[0].dest) != 0) {
        snprintf(why, sizeof why, "cannot rename %s to %s: %s", f[0].tmp, f[0].dest, strerror(errno));
        ok = 0;
    }
    for (int k = 0; k < 2 && !ok; k++) unlink(f[k].tmp); /* ours: the name holds our pid */
    if (!ok) {
        install_file_free(&f[0]);
        install_file_free(&f[1]);
        return fail(o.json, CKEY_ERR_IO, "%s; %s not installed", why, src);
    }
    int dfd = open(dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    if (dfd >= 0) {
        (void)fsync(dfd);
        close(dfd);
    }

    const int found = lookup_takes(dir, f[0].dest);
    if (o.json) {
        printf("{\"ok\": true, \"command\": \"install-model\", \"source\": ");
        json_str(stdout, src);
        printf(", \"installed\": ");
        json_str(stdout, f[0].dest);
        printf(", \"sidecar\": ");
        if (have_side) json_str(stdout, f[1].dest);
        else printf("null");
        printf(", \"sha256\": \"%s\", \"bytes\": %lld, \"num_params\": %lld, "
               "\"native_size\": %d, \"test_weights\": %s, \"found_without_model\": %s}\n",
               f[0].sha256, (long long)f[0].bytes, (long long)mi.num_params, (int)mi.native_size,
               is_test_model(&mi) ? "true" : "false", found ? "true" : "false");
    } else {
        printf("installed %s\n", f[0].dest);
        printf("  from      %s (%lld bytes, %lld parameters, native S = %d)\n", src,
               (long long)f[0].bytes, (long long)mi.num_params, (int)mi.native_size);
        if (have_side) printf("  sidecar   %s\n", f[1].dest);
        printf("  sha256    %s\n", f[0].sha256);
        if (found) printf("run, key and info now find it without --model.\n");
    }
    install_file_free(&f[0]);
    install_file_free(&f[1]);
    fflush(stdout);
    if (is_test_model(&mi)) test_model_notice(src, &mi);
    return EXIT_OK;
}
