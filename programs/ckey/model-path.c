/* Finding the checkpoint and the data directory (model-path.h). */
#include "model-path.h"

#include <dirent.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/stat.h>

#include "paths.h"

int model_data_dir(char *buf, size_t cap, const char **from) {
    const char *xdg = getenv("XDG_DATA_HOME");
    /* the XDG spec: a relative value is invalid and ignored */
    if (xdg && xdg[0] == '/') {
        snprintf(buf, cap, "%s%sckey", xdg, xdg[strlen(xdg) - 1] == '/' ? "" : "/");
        if (from) *from = "$XDG_DATA_HOME/ckey";
        return 1;
    }
    const char *home = getenv("HOME");
    if (home && home[0]) {
        snprintf(buf, cap, "%s%s.local/share/ckey", home, home[strlen(home) - 1] == '/' ? "" : "/");
        if (from) *from = "~/.local/share/ckey";
        return 1;
    }
    snprintf(buf, cap, "neither $XDG_DATA_HOME nor $HOME is set");
    if (from) *from = NULL;
    return 0;
}

/* What one directory holds. */
typedef struct dir_scan {
    enum { SCAN_FOUND, SCAN_NONE, SCAN_SEVERAL } state;
    char why[256];        /* SCAN_NONE: why nothing was taken */
    char names[16][256];  /* the candidates, sorted (SCAN_SEVERAL: the first 16) */
    int count;
    char found[4096];     /* SCAN_FOUND: dir/name */
} dir_scan;

static int has_ext(const char *name, const char *ext) {
    const size_t n = strlen(name), e = strlen(ext);
    return n > e && !strcasecmp(name + n - e, ext);
}

static int cmp_names(const void *a, const void *b) { return strcmp(a, b); }

/*
 * The checkpoint of `dir`: CorridorKey_v1.0.pth, else the only regular file
 * named *.pth (or *.safetensors when `safetensors`); hidden files are
 * skipped (install-model's temporary copies are hidden).
 */
static void scan_dir(const char *dir, int safetensors, dir_scan *s) {
    memset(s, 0, sizeof *s);
    s->state = SCAN_NONE;
    DIR *d = opendir(dir);
    if (!d) {
        snprintf(s->why, sizeof s->why, "%s", errno == ENOENT    ? "does not exist"
                                              : errno == ENOTDIR ? "not a directory"
                                                                 : strerror(errno));
        return;
    }
    int official = 0, total = 0;
    for (struct dirent *e; (e = readdir(d));) {
        const char *name = e->d_name;
        if (name[0] == '.') continue;
        if (!has_ext(name, ".pth") && !(safetensors && has_ext(name, ".safetensors"))) continue;
        char *path = path_join(dir, name);
        struct stat st;
        const int regular = path && stat(path, &st) == 0 && S_ISREG(st.st_mode);
        free(path);
        if (!regular) continue;
        if (!strcmp(name, OFFICIAL_CHECKPOINT)) official = 1;
        if (total < 16) snprintf(s->names[total], sizeof s->names[total], "%s", name);
        total++;
    }
    closedir(d);
    s->count = total < 16 ? total : 16;
    qsort(s->names, (size_t)s->count, sizeof s->names[0], cmp_names);
    const char *take = official ? OFFICIAL_CHECKPOINT : total == 1 ? s->names[0] : NULL;
    if (take) {
        s->state = SCAN_FOUND;
        snprintf(s->found, sizeof s->found, "%s%s%s", dir, dir[strlen(dir) - 1] == '/' ? "" : "/",
                 take);
    } else if (total > 1) {
        s->state = SCAN_SEVERAL;
        s->count = total;
    } else {
        snprintf(s->why, sizeof s->why, "no %s file", safetensors ? "*.pth or *.safetensors" : "*.pth");
    }
}

int dir_checkpoint(const char *dir, char *buf, size_t cap, int *count) {
    dir_scan *s = malloc(sizeof *s);
    if (!s) return *count = 0, 0;
    scan_dir(dir, 1, s);
    const int found = s->state == SCAN_FOUND;
    if (found) snprintf(buf, cap, "%s", s->found);
    *count = s->count;
    free(s);
    return found;
}

/* Several checkpoints in `dir` and none named as the official one. */
static int several(const opts *o, const char *dir, const char *what, const dir_scan *s) {
    char list[1200] = "";
    size_t n = 0;
    for (int i = 0; i < s->count && i < 16 && n < sizeof list; i++)
        n += (size_t)snprintf(list + n, sizeof list - n, "%s%s", i ? ", " : "", s->names[i]);
    return usage_error(o->cmd,
                       "missing --model, and %s/ (%s) holds %d checkpoints, none named %s: %s%s.\n"
                       "Pass --model FILE or set CKEY_MODEL=FILE, or keep one checkpoint there.",
                       dir, what, s->count, OFFICIAL_CHECKPOINT, list, s->count > 16 ? ", ..." : "");
}

static int take(opts *o, const char *path, const char *origin) {
    if (strlen(path) >= sizeof o->model_buf)
        return usage_error(o->cmd, "the checkpoint %s has a path too long (%zu bytes)", origin,
                           strlen(path));
    snprintf(o->model_buf, sizeof o->model_buf, "%s", path);
    o->model = o->model_buf;
    o->model_origin = origin;
    return CONTINUE;
}

/* find_model's state between the places it looks (not an exit code, not CONTINUE) */
enum { STILL_LOOKING = -2 };

int find_model(opts *o) {
    if (o->model) {
        o->model_origin = NULL;
        return CONTINUE;
    }
    const char *env = getenv("CKEY_MODEL");
    if (env && env[0]) return take(o, env, "named by $CKEY_MODEL");

    char data[4096], data_line[4400], up_line[400];
    const char *data_from = NULL;
    const int have_data = model_data_dir(data, sizeof data, &data_from);
    dir_scan *s = malloc(sizeof *s);
    if (!s) return usage_error(o->cmd, "missing --model (out of memory looking for one)");
    int rc = STILL_LOOKING;
    if (have_data) {
        scan_dir(data, 1, s);
        if (s->state == SCAN_FOUND) rc = take(o, s->found, "found in the data directory");
        else if (s->state == SCAN_SEVERAL) rc = several(o, data, "the data directory", s);
        else snprintf(data_line, sizeof data_line, "%s/ (the data directory, %s): %s", data,
                      data_from, s->why);
    } else {
        snprintf(data_line, sizeof data_line, "the data directory: %s", data);
    }
    if (rc == STILL_LOOKING) {
        scan_dir(UPSTREAM_CHECKPOINT_DIR, 0, s);
        if (s->state == SCAN_FOUND) rc = take(o, s->found, "found in upstream's layout, ./" UPSTREAM_CHECKPOINT_DIR "/");
        else if (s->state == SCAN_SEVERAL)
            rc = several(o, "./" UPSTREAM_CHECKPOINT_DIR, "upstream's layout", s);
        else snprintf(up_line, sizeof up_line, "./%s/ (upstream's layout, under the current "
                      "directory): %s", UPSTREAM_CHECKPOINT_DIR, s->why);
    }
    free(s);
    if (rc != STILL_LOOKING) return rc;
    char where[4200] = "";
    if (have_data) snprintf(where, sizeof where, " (which copies it to %s/)", data);
    return usage_error(o->cmd,
                       "missing --model, and no checkpoint found where ckey looks for one:\n"
                       "  1. $CKEY_MODEL: %s\n"
                       "  2. %s\n"
                       "  3. %s\n"
                       "The official checkpoint, %s, is published on the release page of the\n"
                       "upstream CorridorKey project, %s\n"
                       "(ckey never downloads anything). Download it, then install it once with\n"
                       "  ckey install-model %s\n"
                       "%s, or pass --model FILE, or set CKEY_MODEL=FILE.",
                       env ? "set but empty" : "not set", data_line, up_line, OFFICIAL_CHECKPOINT,
                       OFFICIAL_CHECKPOINT_URL, OFFICIAL_CHECKPOINT,
                       have_data ? where + 1 : "(see 'ckey install-model --help')");
}

void note_model_origin(const opts *o, ckey_error *err) {
    if (!o->model_origin) return;
    const size_t n = strlen(err->message);
    snprintf(err->message + n, sizeof err->message - n, " (the checkpoint %s)", o->model_origin);
}

int find_track_model(opts *o) {
    if (o->track_model) {
        o->track_model_origin = NULL;
        return CONTINUE;
    }
    const char *env = getenv("CKEY_TRACK_MODEL");
    if (env && env[0]) {
        o->track_model = env;
        o->track_model_origin = "named by $CKEY_TRACK_MODEL";
        return CONTINUE;
    }
    char data[4096], line[4400];
    const char *from = NULL;
    if (model_data_dir(data, sizeof data, &from)) {
        static const char *const names[2] = {CUTIE_CHECKPOINT, CUTIE_SMALL_CHECKPOINT};
        for (int k = 0; k < 2; k++) {
            char *path = path_join(data, names[k]);
            struct stat st;
            if (path && stat(path, &st) == 0 && S_ISREG(st.st_mode) &&
                strlen(path) < sizeof o->track_model_buf) {
                snprintf(o->track_model_buf, sizeof o->track_model_buf, "%s", path);
                free(path);
                o->track_model = o->track_model_buf;
                o->track_model_origin = "found in the data directory";
                return CONTINUE;
            }
            free(path);
        }
        snprintf(line, sizeof line, "%s/ (the data directory, %s): no %s or %s", data, from,
                 CUTIE_CHECKPOINT, CUTIE_SMALL_CHECKPOINT);
    } else {
        snprintf(line, sizeof line, "the data directory: %s", data);
    }
    return usage_error(o->cmd,
                       "missing --track-model (a Cutie checkpoint), and none found where ckey looks:\n"
                       "  1. $CKEY_TRACK_MODEL: %s\n"
                       "  2. %s\n"
                       "The official checkpoint, %s, is published on the release page of\n"
                       "the Cutie project, %s\n"
                       "(ckey never downloads anything). Download it and copy it into the data\n"
                       "directory, or pass --track-model FILE, or set CKEY_TRACK_MODEL=FILE.",
                       env ? "set but empty" : "not set", line, CUTIE_CHECKPOINT, CUTIE_CHECKPOINT_URL);
}
