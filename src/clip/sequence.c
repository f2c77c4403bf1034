/*
 * Image sequences in and out (public API in ckey_clip.h):
 *   ckey_source_open_sequence  a plate directory + a hint directory, paired by
 *                              frame number, decoded with ckey_image_read into
 *                              the reader's previous frame's pixels; reads may
 *                              run at once (concurrent_read);
 *   ckey_sink_open_passes      the four official passes as EXR / PNG files,
 *                              written at once on the runner's pool.
 * ckey_shot_run (src/clip/shot.c) drives both.
 */
#include <ctype.h>
#include <dirent.h>
#include <errno.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/stat.h>

#include "ckey_clip.h"
#include "ckey.h"
#include "core/core.h"
#include "media/image.h"
#include "clip/sequence.h"
#include "media/exr.h"

/* ----------------------------------------------------------------- names */

const char *ck_file_ext(const char *name) {
    const char *dot = strrchr(name, '.');
    return dot && dot != name ? dot + 1 : "";
}

static int is_image_ext(const char *e) {
    static const char *const ok[] = {"png", "jpg", "jpeg", "tif", "tiff", "exr"};
    for (size_t i = 0; i < CK_ARRAY_LEN(ok); i++)
        if (!strcasecmp(e, ok[i])) return 1;
    return 0;
}

int ck_is_video_ext(const char *e) {
    static const char *const v[] = {"mp4", "mov", "avi", "mkv", "mxf", "webm", "m4v", "mpg",
                                    "mpeg", "wmv", "flv", "prores"};
    for (size_t i = 0; i < CK_ARRAY_LEN(v); i++)
        if (!strcasecmp(e, v[i])) return 1;
    return 0;
}

/* Last run of digits in the name (extension excluded); -1 when none, -2 too long. */
static long frame_number(const char *name) {
    const char *end = strrchr(name, '.');
    if (!end || end == name) end = name + strlen(name);
    const char *p = end;
    while (p > name && !isdigit((unsigned char)p[-1])) p--;
    if (p == name) return -1;
    const char *q = p;
    while (q > name && isdigit((unsigned char)q[-1])) q--;
    long v = 0;
    for (const char *c = q; c < p; c++) {
        if (v > 99999999L) return -2;
        v = v * 10 + (*c - '0');
    }
    return v;
}

char *ckey_path_join(const char *dir, const char *name) {
    const size_t a = strlen(dir), b = strlen(name);
    char *p = malloc(a + b + 2);
    if (!p) return NULL;
    memcpy(p, dir, a);
    size_t k = a;
    if (a && dir[a - 1] != '/') p[k++] = '/';
    memcpy(p + k, name, b + 1);
    return p;
}

/* ------------------------------------------------------------- scanning */

void ck_seq_free(ck_seq *s) {
    for (int64_t i = 0; i < s->n; i++) free(s->f[i].name);
    free(s->f);
    free(s->video);
    memset(s, 0, sizeof *s);
}

static int cmp_frame(const void *a, const void *b) {
    const ck_seq_file *x = a, *y = b;
    if (x->frame != y->frame) return x->frame < y->frame ? -1 : 1;
    return strcmp(x->name, y->name);
}

ckey_status ck_seq_scan(const char *dir, const char *what, int collect_videos, ck_seq *s,
                        ckey_error *err) {
    memset(s, 0, sizeof *s);
    struct stat st;
    if (stat(dir, &st) != 0)
        return ck_fail(err, CKEY_ERR_IO, "%s directory %s: %s", what, dir, strerror(errno));
    if (!S_ISDIR(st.st_mode)) {
        if (ck_is_video_ext(ck_file_ext(dir)))
            return ck_fail(err, CKEY_ERR_UNSUPPORTED,
                           "%s: a video file, not a directory of frames (ckey_source_open_video "
                           "reads video)", dir);
        return ck_fail(err, CKEY_ERR_IO, "%s %s is not a directory of frames", what, dir);
    }
    DIR *d = opendir(dir);
    if (!d)
        return ck_fail(err, CKEY_ERR_IO, "cannot open %s directory %s: %s", what, dir,
                       strerror(errno));
    ckey_status rc = CKEY_OK;
    struct dirent *e;
    while (rc == CKEY_OK && (e = readdir(d))) {
        const char *name = e->d_name;
        if (name[0] == '.') continue;
        const char *ext = ck_file_ext(name);
        if (ck_is_video_ext(ext)) {
            if (!collect_videos) {
                rc = ck_fail(err, CKEY_ERR_UNSUPPORTED,
                             "%s/%s: a video file among the %s frames (ckey_source_open_video "
                             "reads video)", dir, name, what);
                break;
            }
            if (!s->video && !(s->video = strdup(name))) {
                rc = ck_fail(err, CKEY_ERR_NOMEM, "out of memory listing %s", dir);
                break;
            }
            s->videos++;
            continue;
        }
        if (!is_image_ext(ext)) continue;
        const long fr = frame_number(name);
        if (fr < 0) {
            rc = ck_fail(err, CKEY_ERR_INVALID_ARG, "%s/%s: %s", dir, name,
                         fr == -1 ? "no frame number in the file name (expected digits, e.g. "
                                    "plate_0001.png)"
                                  : "frame number too large");
            break;
        }
        if (s->n == s->cap) {
            const int64_t nc = s->cap ? 2 * s->cap : 64;
            ck_seq_file *nf = realloc(s->f, (size_t)nc * sizeof *nf);
            if (!nf) {
                rc = ck_fail(err, CKEY_ERR_NOMEM, "out of memory listing %s", dir);
                break;
            }
            s->f = nf;
            s->cap = nc;
        }
        s->f[s->n].name = strdup(name);
        s->f[s->n].frame = fr;
        if (!s->f[s->n].name) {
            rc = ck_fail(err, CKEY_ERR_NOMEM, "out of memory listing %s", dir);
            break;
        }
        s->n++;
    }
    closedir(d);
    if (rc != CKEY_OK) {
        ck_seq_free(s);
        return rc;
    }
    if (s->n) qsort(s->f, (size_t)s->n, sizeof *s->f, cmp_frame);
    for (int64_t i = 1; i < s->n; i++)
        if (s->f[i].frame == s->f[i - 1].frame) {
            rc = ck_fail(err, CKEY_ERR_INVALID_ARG, "%s: frame %ld appears twice: %s/%s and %s/%s",
                         what, s->f[i].frame, dir, s->f[i - 1].name, dir, s->f[i].name);
            ck_seq_free(s);
            return rc;
        }
    return CKEY_OK;
}

const ck_seq_file *ck_seq_find(const ck_seq *s, long frame) {
    int64_t lo = 0, hi = s->n - 1;
    while (lo <= hi) {
        const int64_t mid = (lo + hi) / 2;
        if (s->f[mid].frame == frame) return &s->f[mid];
        if (s->f[mid].frame < frame) lo = mid + 1;
        else hi = mid - 1;
    }
    return NULL;
}

const char ck_auto_hint[] = "auto";

int ck_seq_frame(const char *dir, const ck_seq_file *pf, ckey_shot_frame *f) {
    const char *dot = strrchr(pf->name, '.');
    f->number = pf->frame;
    f->stem = strndup(pf->name, dot && dot != pf->name ? (size_t)(dot - pf->name) : strlen(pf->name));
    f->plate = ckey_path_join(dir, pf->name);
    f->plate_linear = !strcasecmp(ck_file_ext(pf->name), "exr");
    return f->stem && f->plate;
}

void ck_shot_frames_free(ckey_shot_frame *frames, int64_t count) {
    for (int64_t i = 0; i < count; i++) {
        free((char *)frames[i].stem);
        free((char *)frames[i].plate);
        if (frames[i].hint != ck_auto_hint) free((char *)frames[i].hint);
    }
    free(frames);
}

/* --------------------------------------------------------------- source */

typedef struct seq_source {
    ckey_shot_frame *frames;
    int64_t count;
    char *hint_dir;          /* for the "no hint" message */
    int auto_hint;
} seq_source;

static void seq_source_close(void *self) {
    seq_source *q = self;
    if (!q) return;
    ck_shot_frames_free(q->frames, q->count);
    free(q->hint_dir);
    free(q);
}

static ckey_status seq_source_read(void *self, int64_t index, ckey_image *plate, ckey_image *hint,
                                   ckey_error *err) {
    seq_source *q = self;
    if (index < 0 || index >= q->count)
        return ck_fail(err, CKEY_ERR_INVALID_ARG, "frame index %lld out of range",
                       (long long)index);
    const ckey_shot_frame *f = &q->frames[index];
    if (!f->hint)
        return ck_fail(err, CKEY_ERR_IO,
                       "frame %lld: plate %s has no hint in %s (hints pair with plates by frame "
                       "number)", (long long)f->number, f->plate, q->hint_dir);
    /* Decoded into the previous frame's pixels when they are large enough;
     * nothing here is shared between calls, so readers may call at once. */
    ckey_error e;
    ck_error_clear(&e);
    ckey_status st = ck_image_read_reuse(f->plate, CKEY_IMAGE_RGB, plate, &e);
    if (st == CKEY_OK && !q->auto_hint) st = ck_image_read_reuse(f->hint, CKEY_IMAGE_HINT, hint, &e);
    if (st == CKEY_OK && q->auto_hint) ckey_image_free(hint);
    if (st != CKEY_OK) {
        ckey_image_free(plate);
        ckey_image_free(hint);
        /* The image readers name the file; add the frame. */
        return ck_fail(err, st, "frame %lld: %s", (long long)f->number, e.message);
    }
    return CKEY_OK;
}

/* Files ckey_image_read_packed may read (by name: the content decides). */
static int packed_ext(const char *path) {
    const char *e = ck_file_ext(path);
    return !strcasecmp(e, "png") || !strcasecmp(e, "exr");
}

/* The frames seq_source_read_packed takes (by their names). */
static int packed_names(const seq_source *q, const ckey_shot_frame *f) {
    return !q->auto_hint && f->hint && packed_ext(f->plate) && packed_ext(f->hint);
}

static int32_t seq_source_packed_frame(void *self, int64_t index) {
    const seq_source *q = self;
    return index >= 0 && index < q->count && packed_names(q, &q->frames[index]);
}

/* seq_source_read into packed images: PNG or HALF EXR plates and hints
 * (CKEY_ERR_UNSUPPORTED: read() reads the frame). */
static ckey_status seq_source_read_packed(void *self, int64_t index, ckey_packed_image *plate,
                                          ckey_packed_image *hint, ckey_error *err) {
    seq_source *q = self;
    if (index < 0 || index >= q->count)
        return ck_fail(err, CKEY_ERR_INVALID_ARG, "frame index %lld out of range", (long long)index);
    const ckey_shot_frame *f = &q->frames[index];
    if (!packed_names(q, f))
        return ck_fail(err, CKEY_ERR_UNSUPPORTED, "frame %lld: no packed read", (long long)f->number);
    ckey_error e;
    ck_error_clear(&e);
    /* the hint first: when it has no packed form (a FLOAT EXR), the plate
     * is not decoded twice */
    ckey_status st = ckey_image_read_packed(f->hint, CKEY_IMAGE_HINT, hint, &e);
    if (st == CKEY_OK) st = ckey_image_read_packed(f->plate, CKEY_IMAGE_RGB, plate, &e);
    /* the image readers name the file; add the frame (an unsupported one
     * goes to read(), which reports any real fault itself) */
    if (st != CKEY_OK) return ck_fail(err, st, "frame %lld: %s", (long long)f->number, e.message);
    return CKEY_OK;
}

static ckey_status seq_source_probe(void *self, int64_t index, int32_t *width, int32_t *height,
                                    ckey_error *err) {
    seq_source *q = self;
    if (index < 0 || index >= q->count)
        return ck_fail(err, CKEY_ERR_INVALID_ARG, "frame index %lld out of range", (long long)index);
    return ckey_image_probe(q->frames[index].plate, width, height, err);
}

ckey_status ckey_source_open_sequence(const char *plate_dir, const char *hint_dir,
                                      ckey_message_fn warn, void *user, ckey_source *out,
                                      ckey_error *err) {
    if (!plate_dir || !out) return ck_fail(err, CKEY_ERR_INVALID_ARG, "no plate directory");
    memset(out, 0, sizeof *out);
    ck_seq plates, hints;
    memset(&hints, 0, sizeof hints);
    ckey_status st = ck_seq_scan(plate_dir, "plate", 0, &plates, err);
    if (st != CKEY_OK) return st;
    if (hint_dir && (st = ck_seq_scan(hint_dir, "hint", 0, &hints, err)) != CKEY_OK) {
        ck_seq_free(&plates);
        return st;
    }
    if (plates.n == 0) {
        ck_seq_free(&plates);
        ck_seq_free(&hints);
        return ck_fail(err, CKEY_ERR_IO,
                       "%s holds no image frames (png, jpg, jpeg, tif, tiff, exr)", plate_dir);
    }
    seq_source *q = calloc(1, sizeof *q);
    if (q) q->frames = calloc((size_t)plates.n, sizeof *q->frames);
    if (q) q->hint_dir = strdup(hint_dir ? hint_dir : "auto");
    if (!q || !q->frames || !q->hint_dir) {
        if (q) free(q->frames), free(q->hint_dir);
        free(q);
        ck_seq_free(&plates);
        ck_seq_free(&hints);
        return ck_fail(err, CKEY_ERR_NOMEM, "out of memory listing %s", plate_dir);
    }
    q->auto_hint = hint_dir == NULL;
    for (int64_t i = 0; i < plates.n; i++) {
        const ck_seq_file *pf = &plates.f[i];
        ckey_shot_frame *f = &q->frames[i];
        q->count = i + 1;
        int ok = ck_seq_frame(plate_dir, pf, f);
        if (q->auto_hint) {
            f->hint = ck_auto_hint;
        } else {
            const ck_seq_file *hf = ck_seq_find(&hints, pf->frame);
            if (hf) ok = ok && (f->hint = ckey_path_join(hint_dir, hf->name)) != NULL;
        }
        if (!ok) {
            seq_source_close(q);
            ck_seq_free(&plates);
            ck_seq_free(&hints);
            return ck_fail(err, CKEY_ERR_NOMEM, "out of memory listing %s", plate_dir);
        }
    }
    if (warn)
        for (int64_t i = 0; i < hints.n; i++)
            if (!ck_seq_find(&plates, hints.f[i].frame)) {
                char msg[1200];
                snprintf(msg, sizeof msg, "hint %s/%s (frame %ld) has no plate; ignored", hint_dir,
                         hints.f[i].name, hints.f[i].frame);
                warn(user, msg);
            }
    ck_seq_free(&plates);
    ck_seq_free(&hints);
    out->self = q;
    out->count = q->count;
    out->frames = q->frames;
    out->read = seq_source_read;
    out->read_packed = seq_source_read_packed;
    out->packed_frame = seq_source_packed_frame;
    out->close = seq_source_close;
    out->probe = seq_source_probe;
    out->concurrent_read = 1;
    return CKEY_OK;
}

void ckey_source_close(ckey_source *src) {
    if (!src) return;
    if (src->close && src->self) src->close(src->self);
    memset(src, 0, sizeof *src);
}

/* ----------------------------------------------------------------- sink */

enum { PASS_MATTE, PASS_FG, PASS_PROCESSED, PASS_COMP, NPASS };
static const char *const pass_dir[NPASS] = {"Matte", "FG", "Processed", "Comp"};

/* One frame's writing tools, kept from frame to frame: an EXR writer per
 * EXR pass (its chunk buffers sized by that pass), the Comp's PNG writer
 * (its filtered image and zlib stream) and each pass's path. */
typedef struct pass_kit {
    ck_exr_writer *exr[3];
    ck_png_writer *png;
    char *path[NPASS];
    size_t cap[NPASS];
    struct pass_kit *next; /* the free list */
} pass_kit;

typedef struct pass_sink {
    char *out;
    ckey_pass_options opt;
    /* the output path for complete (the caller's thread); write() uses a
     * kit's, so that writes may run concurrently (concurrent_write) */
    char *path;
    size_t path_cap;
    pthread_mutex_t mu; /* guards the kits and the timings */
    pass_kit *free_kits, *all_kits[64];
    int nkits;
    double seconds[NPASS];
} pass_sink;

/* OUT/<Pass>/<stem>.<ext> into *buf (grown as needed). */
static const char *pass_path(const pass_sink *k, char **buf, size_t *cap, int pass, const char *stem) {
    const size_t need = strlen(k->out) + strlen(pass_dir[pass]) + strlen(stem) + 8;
    if (need > *cap) {
        char *p = realloc(*buf, need);
        if (!p) return NULL;
        *buf = p;
        *cap = need;
    }
    const size_t ol = strlen(k->out);
    snprintf(*buf, *cap, "%s%s%s/%s.%s", k->out, ol && k->out[ol - 1] == '/' ? "" : "/",
             pass_dir[pass], stem, pass == PASS_COMP ? "png" : "exr");
    return *buf;
}

static int pass_complete(void *self, const ckey_shot_frame *f) {
    pass_sink *k = self;
    for (int p = 0; p < NPASS; p++) {
        const char *path = pass_path(k, &k->path, &k->path_cap, p, f->stem);
        struct stat st;
        if (!path || stat(path, &st) != 0 || !S_ISREG(st.st_mode)) return 0;
    }
    return 1;
}

ckey_status ckey_make_dirs(const char *path, ckey_error *err) {
    const size_t n = strlen(path);
    char *buf = malloc(n + 1);
    if (!buf) return ck_fail(err, CKEY_ERR_NOMEM, "out of memory");
    memcpy(buf, path, n + 1);
    for (size_t i = 1; i <= n; i++) {
        if (buf[i] != '/' && buf[i] != 0) continue;
        const char saved = buf[i];
        buf[i] = 0;
        if (mkdir(buf, 0777) != 0 && errno != EEXIST) {
            ckey_status st = ck_fail(err, CKEY_ERR_IO, "cannot create directory %s: %s", buf,
                                     strerror(errno));
            free(buf);
            return st;
        }
        buf[i] = saved;
    }
    free(buf);
    struct stat st;
    if (stat(path, &st) != 0 || !S_ISDIR(st.st_mode))
        return ck_fail(err, CKEY_ERR_IO, "%s exists and is not a directory", path);
    return CKEY_OK;
}

static ckey_status pass_begin(void *self, ckey_error *err) {
    pass_sink *k = self;
    for (int p = 0; p < NPASS; p++) {
        char *d = ckey_path_join(k->out, pass_dir[p]);
        if (!d) return ck_fail(err, CKEY_ERR_NOMEM, "out of memory");
        ckey_status st = ckey_make_dirs(d, err);
        if (st == CKEY_OK) ck_remove_dead_temps(d); /* a killed run's, before this run writes */
        free(d);
        if (st != CKEY_OK) return st;
    }
    return CKEY_OK;
}

static void kit_free(pass_kit *t) {
    if (!t) return;
    for (int i = 0; i < 3; i++) ck_exr_writer_free(t->exr[i]);
    ck_png_writer_free(t->png);
    for (int p = 0; p < NPASS; p++) free(t->path[p]);
    free(t);
}

/* A kit from the free list, or a new one (NULL when out of memory or when
 * more writes run at once than kits are kept). */
static pass_kit *kit_take(pass_sink *k) {
    pthread_mutex_lock(&k->mu);
    pass_kit *t = k->free_kits;
    if (t) k->free_kits = t->next;
    else if (k->nkits < (int)(sizeof k->all_kits / sizeof k->all_kits[0]) && (t = calloc(1, sizeof *t))) {
        int ok = (t->png = ck_png_writer_new()) != NULL;
        for (int i = 0; i < 3 && ok; i++) ok = (t->exr[i] = ck_exr_writer_new()) != NULL;
        if (!ok) {
            kit_free(t);
            t = NULL;
        }
        if (t) k->all_kits[k->nkits++] = t;
    }
    pthread_mutex_unlock(&k->mu);
    return t;
}

static void kit_give(pass_sink *k, pass_kit *t) {
    pthread_mutex_lock(&k->mu);
    t->next = k->free_kits;
    k->free_kits = t;
    pthread_mutex_unlock(&k->mu);
}

/* One frame's four files, a job item each: the Comp PNG first (one thread
 * encodes it whole), then the EXR passes, largest first, whose chunks are a
 * nested job on the same pool. */
typedef struct pass_job {
    pass_sink *k;
    pass_kit *kit;
    const ckey_shot_passes *p;
    ck_pool *pool;
    ckey_status st[NPASS];
    ckey_error err[NPASS];
    double seconds[NPASS];
    double io[NPASS];        /* within seconds: the file I/O after encoding */
} pass_job;

static const int pass_order[NPASS] = {PASS_COMP, PASS_PROCESSED, PASS_FG, PASS_MATTE};

static void write_pass(void *ctx, int64_t b, int64_t e, int thread) {
    (void)thread;
    pass_job *j = ctx;
    const ckey_shot_passes *p = j->p;
    const float *data[NPASS] = {p->alpha, p->fg, p->processed, p->comp};
    /* or the samples the files store (the device frame path's): written as they are */
    const uint16_t *half[NPASS] = {p->alpha_half, p->fg_half, p->processed_half, NULL};
    static const int32_t channels[NPASS] = {1, 3, 4, 3};
    for (int64_t i = b; i < e; i++) {
        const int q = pass_order[i];
        const double t = ck_now();
        const char *path = j->kit->path[q];
        if (q == PASS_COMP && p->comp_u8) {
            j->st[q] = ck_png_writer_write_u8(j->kit->png, path, p->comp_u8, 3, p->width, p->height,
                                              j->k->opt.comp_png_level, &j->io[q], &j->err[q]);
        } else if (q == PASS_COMP) {
            /* truncated to 8 bits as upstream writes its Comp */
            j->st[q] = ck_png_writer_write(j->kit->png, path, data[q], 3, p->width, p->height, 8, CK_PNG_TRUNCATE,
                                           j->k->opt.comp_png_level, &j->io[q], &j->err[q]);
        } else if (half[q]) {
            j->st[q] = ck_exr_write_half(j->kit->exr[q], j->pool, path, half[q], channels[q], p->width, p->height,
                                         &j->k->opt.exr, &j->err[q]);
            j->io[q] = ck_exr_writer_io_seconds(j->kit->exr[q]);
        } else {
            j->st[q] = ck_exr_write(j->kit->exr[q], j->pool, path, data[q], channels[q], p->width, p->height,
                                    &j->k->opt.exr, &j->err[q]);
            j->io[q] = ck_exr_writer_io_seconds(j->kit->exr[q]);
        }
        j->seconds[q] = ck_now() - t;
    }
}

static ckey_status pass_write(void *self, const ckey_shot_frame *f, const ckey_shot_passes *p,
                              ckey_error *err) {
    /* shares only the kits' free list and the timings (under the lock): safe
     * to call from several threads at once */
    pass_sink *k = self;
    pass_kit *kit = kit_take(k);
    if (!kit) return ck_fail(err, CKEY_ERR_NOMEM, "out of memory for the pass writers");
    const double t0 = ck_now();
    pass_job j;
    memset(&j, 0, sizeof j);
    j.k = k, j.kit = kit, j.p = p, j.pool = (ck_pool *)p->pool;
    ckey_status st = CKEY_OK;
    for (int q = 0; q < NPASS && st == CKEY_OK; q++)
        if (!pass_path(k, &kit->path[q], &kit->cap[q], q, f->stem)) st = ck_fail(err, CKEY_ERR_NOMEM, "out of memory");
    if (st == CKEY_OK) {
        ck_pool_for(j.pool, NPASS, 1, write_pass, &j);
        /* the first failure in pass order, whatever order the threads took */
        for (int q = 0; q < NPASS && st == CKEY_OK; q++)
            if (j.st[q] != CKEY_OK) {
                st = j.st[q];
                if (err) *err = j.err[q];
            }
    }
    pthread_mutex_lock(&k->mu);
    for (int q = 0; q < NPASS; q++) k->seconds[q] += j.seconds[q];
    pthread_mutex_unlock(&k->mu);
    kit_give(k, kit);
    if (p->io_seconds) {
        /* the four files ran at once: the call's time split as their sums are */
        double all = 0, io = 0;
        for (int q = 0; q < NPASS; q++) all += j.seconds[q], io += j.io[q];
        if (all > 0) *p->io_seconds += (ck_now() - t0) * (io / all);
    }
    return st;
}

static ckey_status pass_finish(void *self, ckey_error *err) {
    (void)self;
    (void)err;
    return CKEY_OK;
}

static void pass_seconds(void *self, double seconds[4]) {
    pass_sink *k = self;
    pthread_mutex_lock(&k->mu);
    for (int q = 0; q < NPASS; q++) seconds[q] = k->seconds[q];
    pthread_mutex_unlock(&k->mu);
}

static void pass_close(void *self) {
    pass_sink *k = self;
    if (!k) return;
    for (int i = 0; i < k->nkits; i++) kit_free(k->all_kits[i]);
    pthread_mutex_destroy(&k->mu);
    free(k->out);
    free(k->path);
    free(k);
}

void ckey_pass_options_default(ckey_pass_options *o) {
    if (!o) return;
    memset(o, 0, sizeof *o);
    o->exr.compression = CKEY_EXR_PXR24;
    o->exr.level = 1;
    o->comp_png_level = CKEY_PNG_RLE;
}

ckey_status ckey_sink_open_passes_opt(const char *out_dir, const ckey_pass_options *o, ckey_sink *out,
                                      ckey_error *err) {
    ckey_pass_options def;
    ckey_pass_options_default(&def);
    if (!o) o = &def;
    if (!out_dir || !out ||
        (o->exr.compression != CKEY_EXR_PXR24 && o->exr.compression != CKEY_EXR_ZIP &&
         o->exr.compression != CKEY_EXR_NONE && o->exr.compression != CKEY_EXR_ZIP_FAST) ||
        o->exr.level < 0 || o->exr.level > CKEY_EXR_LEVEL_MAX || o->comp_png_level < CKEY_PNG_RLE ||
        o->comp_png_level > 9)
        return ck_fail(err, CKEY_ERR_INVALID_ARG, "ckey_sink_open_passes: bad arguments");
    memset(out, 0, sizeof *out);
    pass_sink *k = calloc(1, sizeof *k);
    if (k) k->out = strdup(out_dir);
    if (!k || !k->out) {
        free(k);
        return ck_fail(err, CKEY_ERR_NOMEM, "out of memory");
    }
    k->opt = *o;
    pthread_mutex_init(&k->mu, NULL);
    out->self = k;
    out->complete = pass_complete;
    out->begin = pass_begin;
    out->write = pass_write;
    out->finish = pass_finish;
    out->close = pass_close;
    out->concurrent_write = 1; /* pass_write shares nothing across calls but the kits */
    out->stored_passes = 1;    /* every pass file is HALF or 8-bit */
    out->pass_seconds = pass_seconds;
    return CKEY_OK;
}

ckey_status ckey_sink_open_passes(const char *out_dir, ckey_exr_compression comp, ckey_sink *out,
                                  ckey_error *err) {
    ckey_pass_options o;
    ckey_pass_options_default(&o);
    o.exr.compression = comp;
    return ckey_sink_open_passes_opt(out_dir, &o, out, err);
}

void ckey_sink_close(ckey_sink *sink) {
    if (!sink) return;
    if (sink->close && sink->self) sink->close(sink->self);
    memset(sink, 0, sizeof *sink);
}
