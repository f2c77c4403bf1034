/* Where a clip's commands read and write (clip-paths.h). */
#include "clip-paths.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/stat.h>

#include "paths.h"

int is_video_ext(const char *e) {
    static const char *const v[] = {"mp4", "mov", "avi", "mkv", "mxf", "webm", "m4v", "mpg",
                                    "mpeg", "wmv", "flv", "prores"};
    for (size_t i = 0; i < sizeof v / sizeof v[0]; i++)
        if (!strcasecmp(e, v[i])) return 1;
    return 0;
}

/* The name of a clip for its video outputs: the last component of `path`
 * (made absolute first, so "." has a name), without the extension when it
 * is a file. Malloc'd. */
static char *clip_name(const char *path) {
    char *abs = realpath(path, NULL);
    const char *p = abs ? abs : path;
    size_t n = strlen(p);
    while (n > 1 && p[n - 1] == '/') n--;
    size_t b = n;
    while (b > 0 && p[b - 1] != '/') b--;
    char *name = strndup(p + b, n - b);
    free(abs);
    if (!name) return NULL;
    struct stat st;
    char *dot = strrchr(name, '.');
    if (dot && dot != name && stat(path, &st) == 0 && !S_ISDIR(st.st_mode)) *dot = 0;
    if (!*name || !strcmp(name, "/")) {
        free(name);
        name = strdup("clip");
    }
    return name;
}

int clip_paths_resolve(const opts *o, int with_hint, clip_paths *cp, char *why, size_t cap) {
    memset(cp, 0, sizeof *cp);
    cp->auto_hint = with_hint && o->hint && !strcmp(o->hint, "auto");
    if (o->npositional == 1) {
        if (o->plate || (o->hint && !cp->auto_hint))
            return usage_error(o->cmd, with_hint
                                           ? "give either SHOT_DIR or --plate/--hint, not both "
                                             "(with SHOT_DIR, --hint auto and --out DIR are "
                                             "allowed)"
                                           : "give either SHOT_DIR or --plate, not both");
        const char *shot = o->positional[0];
        struct stat st;
        if (stat(shot, &st) == 0 && !S_ISDIR(st.st_mode)) {
            snprintf(why, cap, "%s is not a clip directory (%s); for a video file use --plate %s%s "
                               "--out DIR",
                     shot, is_video_ext(file_ext(shot)) ? "a video" : "a file", shot,
                     with_hint ? " --hint VIDEO|DIR|auto" : "");
            return EXIT_RUNTIME;
        }
        cp->shot = strdup(shot);
        cp->plate_dir = path_join(shot, "Input");
        cp->hint_dir = !with_hint ? NULL
                       : cp->auto_hint ? strdup("auto")
                                       : path_join(shot, "AlphaHint");
        cp->out_dir = o->out ? strdup(o->out) : path_join(shot, "Output");
        cp->clip = clip_name(shot);
    } else {
        if (!o->plate || (with_hint && !o->hint) || !o->out)
            return usage_error(o->cmd, with_hint ? "expected SHOT_DIR, or all of --plate DIR, "
                                                   "--hint DIR and --out DIR"
                                                 : "expected SHOT_DIR, or --plate DIR|VIDEO and "
                                                   "--out DIR");
        cp->plate_dir = strdup(o->plate);
        cp->hint_dir = with_hint ? strdup(o->hint) : NULL;
        cp->out_dir = strdup(o->out);
        cp->clip = clip_name(o->plate);
    }
    if (!cp->plate_dir || (with_hint && !cp->hint_dir) || !cp->out_dir || !cp->clip ||
        (o->npositional == 1 && !cp->shot)) {
        snprintf(why, cap, "out of memory");
        return EXIT_RUNTIME;
    }
    return CONTINUE;
}

void clip_paths_free(clip_paths *cp) {
    free(cp->plate_dir);
    free(cp->hint_dir);
    free(cp->out_dir);
    free(cp->shot);
    free(cp->clip);
    memset(cp, 0, sizeof *cp);
}

char *clip_video_path(const clip_paths *cp, int which) {
    static const char *const suffix[2] = {"_fg_alpha.mov", "_comp.mp4"};
    const size_t n = strlen(cp->clip) + strlen(suffix[which]) + 1;
    char *name = malloc(n);
    if (!name) return NULL;
    snprintf(name, n, "%s%s", cp->clip, suffix[which]);
    char *p = path_join(cp->out_dir, name);
    free(name);
    return p;
}
