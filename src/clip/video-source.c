/*
 * ckey_source_open_video: a shot source in which the plate, the hint or both
 * are video files (public API and pairing rules in ckey.h). Each side is a
 * video (ckey_video_reader, decoded forward: the runner asks for frames in
 * increasing order, and frames it skips are decoded and dropped by the
 * reader), an image sequence (ck_seq_scan, read with ckey_image_read) or
 * "auto". Frames pair by frame number; a video's frame k has number k.
 * Two sequences are ckey_source_open_sequence's job.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/stat.h>

#include "ckey_clip.h"
#include "ckey.h"
#include "core/core.h"
#include "media/image.h"
#include "media/video.h"
#include "clip/sequence.h"

enum { SIDE_AUTO = 0, SIDE_SEQ = 1, SIDE_VIDEO = 2 };

typedef struct side {
    int kind;
    char *path;              /* the video file, or the directory of frames */
    ck_seq seq;              /* SIDE_SEQ */
    ckey_video_reader *r;    /* SIDE_VIDEO */
    ckey_video_info info;
    int64_t count;           /* SIDE_VIDEO: frames */
    int64_t dead_at;         /* SIDE_VIDEO: the frame whose decode failed, -1 none */
} side;

typedef struct video_source {
    ckey_shot_frame *frames;
    int64_t count;
    side plate, hint;
} video_source;

static void side_free(side *sd) {
    ckey_video_reader_free(sd->r);
    ck_seq_free(&sd->seq);
    free(sd->path);
    memset(sd, 0, sizeof *sd);
}

/* Open the video of a side and learn its frame count: the container's, else
 * decode it through once. A decode error while counting ends the count at
 * that frame, so the error comes back when the shot reaches it, after the
 * frames before it are keyed. */
static ckey_status side_open_video(side *sd, int32_t threads, ckey_error *err) {
    sd->kind = SIDE_VIDEO;
    sd->dead_at = -1;
    ckey_status st = ckey_video_reader_open(sd->path, threads, &sd->r, err);
    if (st != CKEY_OK) return st;
    ckey_video_reader_get_info(sd->r, &sd->info);
    sd->count = sd->info.frame_count;
    if (sd->count > 0) return CKEY_OK;
    for (int64_t i = 0;; i++) {
        int32_t eof = 0;
        ckey_error e;
        ck_error_clear(&e);
        if (ckey_video_read_frame(sd->r, i, NULL, NULL, &eof, &e) != CKEY_OK) {
            sd->count = i + 1;
            break;
        }
        if (eof) {
            sd->count = i;
            break;
        }
    }
    return CKEY_OK;
}

/* What `path` is: NULL -> auto; a file -> a video; a directory -> its image
 * frames, or the one video file it holds when it holds no frames. */
static ckey_status side_resolve(const char *path, const char *what, int32_t threads, side *sd,
                                ckey_error *err) {
    memset(sd, 0, sizeof *sd);
    sd->dead_at = -1;
    if (!path) return CKEY_OK;
    struct stat st;
    if (stat(path, &st) != 0)
        return ck_fail(err, CKEY_ERR_IO, "%s %s: %s", what, path, strerror(errno));
    if (!S_ISDIR(st.st_mode)) {
        if (!(sd->path = strdup(path))) return ck_fail(err, CKEY_ERR_NOMEM, "out of memory");
        return side_open_video(sd, threads, err);
    }
    ckey_status rc = ck_seq_scan(path, what, 1, &sd->seq, err);
    if (rc != CKEY_OK) return rc;
    if (sd->seq.videos == 0) {
        sd->kind = SIDE_SEQ;
        if (!(sd->path = strdup(path))) return ck_fail(err, CKEY_ERR_NOMEM, "out of memory");
        return CKEY_OK;
    }
    if (sd->seq.n > 0)
        return ck_fail(err, CKEY_ERR_INVALID_ARG,
                       "%s directory %s holds both image frames and a video file (%s): expected "
                       "frames or one video", what, path, sd->seq.video);
    if (sd->seq.videos > 1)
        return ck_fail(err, CKEY_ERR_INVALID_ARG,
                       "%s directory %s holds %lld video files (%s, ...): expected one video or "
                       "image frames", what, path, (long long)sd->seq.videos, sd->seq.video);
    if (!(sd->path = ckey_path_join(path, sd->seq.video)))
        return ck_fail(err, CKEY_ERR_NOMEM, "out of memory");
    ck_seq_free(&sd->seq);
    return side_open_video(sd, threads, err);
}

/* `img` ready for a [c, h, w] frame: kept when it has that shape. */
static ckey_status image_for(ckey_image *img, int32_t w, int32_t h, int32_t c, ckey_error *err) {
    if (img->data && img->width == w && img->height == h && img->channels == c) return CKEY_OK;
    ckey_image_free(img);
    img->data = malloc((size_t)c * (size_t)w * (size_t)h * sizeof(float));
    if (!img->data)
        return ck_fail(err, CKEY_ERR_NOMEM, "out of memory for a %d x %d frame", (int)w, (int)h);
    img->width = w;
    img->height = h;
    img->channels = c;
    return CKEY_OK;
}

/* A video side's frame `number` may be decoded: not past the frame where
 * its decode failed. */
static ckey_status side_alive(const side *sd, int64_t number, ckey_error *err) {
    if (sd->dead_at >= 0 && number > sd->dead_at)
        return ck_fail(err, CKEY_ERR_FORMAT, "%s: frame %lld: not decodable: the video is damaged at frame %lld",
                       sd->path, (long long)number, (long long)sd->dead_at);
    return CKEY_OK;
}

/* After a video side's read of frame `number` (status st, end of clip eof):
 * an early end is an error, and a failed decode marks the side damaged there. */
static ckey_status side_read_done(side *sd, int64_t number, ckey_status st, int32_t eof, ckey_error *err) {
    if (st == CKEY_OK && eof)
        st = ck_fail(err, CKEY_ERR_FORMAT, "%s: frame %lld: the clip ended early", sd->path, (long long)number);
    if (st != CKEY_OK && st != CKEY_ERR_NOMEM) sd->dead_at = number;
    return st;
}

/* A file's read status with the frame added to its message (the image
 * readers name the file). */
static ckey_status file_read_done(int64_t number, ckey_status st, const ckey_error *e, ckey_error *err) {
    if (st != CKEY_OK) return ck_fail(err, st, "frame %lld: %s", (long long)number, e->message);
    return CKEY_OK;
}

/* Frame `number` of a side into `img`; `label` is the frame's file or
 * "clip.mov#N" label. Messages name the file and the frame. */
static ckey_status side_read(side *sd, int64_t number, const char *label, int is_hint,
                             ckey_image *img, ckey_error *err) {
    if (sd->kind == SIDE_SEQ) {
        /* into the previous frame's pixels when they are large enough */
        ckey_error e;
        ck_error_clear(&e);
        return file_read_done(number, ck_image_read_reuse(label, is_hint ? CKEY_IMAGE_HINT : CKEY_IMAGE_RGB, img, &e),
                              &e, err);
    }
    ckey_status st = side_alive(sd, number, err);
    if (st == CKEY_OK) st = image_for(img, sd->info.width, sd->info.height, is_hint ? 1 : 3, err);
    if (st != CKEY_OK) return st;
    img->bit_depth = sd->info.bit_depth;
    img->has_alpha = sd->info.has_alpha;
    int32_t eof = 0;
    st = is_hint ? ckey_video_read_hint(sd->r, number, img->data, &eof, err)
                 : ckey_video_read_frame(sd->r, number, img->data, NULL, &eof, err);
    return side_read_done(sd, number, st, eof, err);
}

/* Frame `number` of a side as packed samples (ck_video_read_packed, or
 * ckey_image_read_packed for a file); CKEY_ERR_UNSUPPORTED for a file
 * without a packed form. Messages as side_read's. */
static ckey_status side_read_packed(side *sd, int64_t number, const char *label, int is_hint,
                                    ckey_packed_image *pk, ckey_error *err) {
    const ckey_image_kind kind = is_hint ? CKEY_IMAGE_HINT : CKEY_IMAGE_RGB;
    if (sd->kind == SIDE_SEQ) {
        ckey_error e;
        ck_error_clear(&e);
        return file_read_done(number, ckey_image_read_packed(label, kind, pk, &e), &e, err);
    }
    ckey_status st = side_alive(sd, number, err);
    if (st != CKEY_OK) return st;
    int32_t eof = 0;
    st = ck_video_read_packed(sd->r, number, kind, pk, &eof, err);
    return side_read_done(sd, number, st, eof, err);
}

/* A side's frame file ckey_image_read_packed may read (by name: the content
 * decides); a video's frames always. */
static int side_packed(const side *sd, const char *label) {
    if (sd->kind == SIDE_VIDEO) return 1;
    if (sd->kind != SIDE_SEQ || !label) return 0;
    const char *e = ck_file_ext(label);
    return !strcasecmp(e, "png") || !strcasecmp(e, "exr");
}

static int32_t vs_packed_frame(void *self, int64_t index) {
    const video_source *q = self;
    if (index < 0 || index >= q->count) return 0;
    const ckey_shot_frame *f = &q->frames[index];
    return f->hint && side_packed(&q->plate, f->plate) && side_packed(&q->hint, f->hint);
}

/* vs_read into packed images, for the device frame path: a video's frames
 * as 16-bit samples, PNG and HALF EXR files as theirs; the hint first, so
 * that a hint file without a packed form (a FLOAT EXR) sends the frame to
 * vs_read before the plate is decoded (a video side keeps its decoded frame
 * for vs_read in any case). */
static ckey_status vs_read_packed(void *self, int64_t index, ckey_packed_image *plate, ckey_packed_image *hint,
                                  ckey_error *err) {
    video_source *q = self;
    if (index < 0 || index >= q->count)
        return ck_fail(err, CKEY_ERR_INVALID_ARG, "frame index %lld out of range", (long long)index);
    if (!vs_packed_frame(self, index))
        return ck_fail(err, CKEY_ERR_UNSUPPORTED, "frame %lld: no packed read", (long long)q->frames[index].number);
    const ckey_shot_frame *f = &q->frames[index];
    ckey_status st = side_read_packed(&q->hint, f->number, f->hint, 1, hint, err);
    if (st == CKEY_OK) st = side_read_packed(&q->plate, f->number, f->plate, 0, plate, err);
    return st;
}

static void vs_close(void *self) {
    video_source *q = self;
    if (!q) return;
    ck_shot_frames_free(q->frames, q->count);
    side_free(&q->plate);
    side_free(&q->hint);
    free(q);
}

static ckey_status vs_read(void *self, int64_t index, ckey_image *plate, ckey_image *hint,
                           ckey_error *err) {
    video_source *q = self;
    if (index < 0 || index >= q->count)
        return ck_fail(err, CKEY_ERR_INVALID_ARG, "frame index %lld out of range",
                       (long long)index);
    const ckey_shot_frame *f = &q->frames[index];
    if (!f->hint)
        return ck_fail(err, CKEY_ERR_IO,
                       "frame %lld: plate %s has no hint in %s (hints pair with plates by frame "
                       "number; a video's frames are numbered from 0)",
                       (long long)f->number, f->plate, q->hint.path);
    ckey_status st = side_read(&q->plate, f->number, f->plate, 0, plate, err);
    if (st != CKEY_OK) return st;
    if (q->hint.kind == SIDE_AUTO) {
        ckey_image_free(hint); /* the runner makes the hint */
        return CKEY_OK;
    }
    return side_read(&q->hint, f->number, f->hint, 1, hint, err);
}

static ckey_status vs_probe(void *self, int64_t index, int32_t *width, int32_t *height, ckey_error *err) {
    video_source *q = self;
    if (index < 0 || index >= q->count)
        return ck_fail(err, CKEY_ERR_INVALID_ARG, "frame index %lld out of range", (long long)index);
    if (q->plate.kind == SIDE_VIDEO) {
        *width = q->plate.info.width;
        *height = q->plate.info.height;
        return CKEY_OK;
    }
    return ckey_image_probe(q->frames[index].plate, width, height, err);
}

/* "path#n", malloc'd. */
static char *frame_label(const char *path, int64_t n) {
    const size_t cap = strlen(path) + 24;
    char *s = malloc(cap);
    if (s) snprintf(s, cap, "%s#%lld", path, (long long)n);
    return s;
}

static int plate_has(const video_source *q, int64_t number) {
    if (q->plate.kind == SIDE_VIDEO) return number >= 0 && number < q->plate.count;
    return number <= 0x7fffffffL && ck_seq_find(&q->plate.seq, (long)number) != NULL;
}

/* Warnings about frames that do not pair (the read of a plate frame without a
 * hint fails in its turn; callers usually refuse the shot before keying). */
static void warn_unpaired(const video_source *q, ckey_message_fn warn, void *user) {
    if (!warn) return;
    char msg[1600];
    if (q->plate.kind == SIDE_VIDEO && q->hint.kind == SIDE_VIDEO) {
        if (q->plate.count != q->hint.count) {
            snprintf(msg, sizeof msg, "frame counts differ: plate %s has %lld frames, hint %s %lld",
                     q->plate.path, (long long)q->plate.count, q->hint.path,
                     (long long)q->hint.count);
            warn(user, msg);
        }
        return;
    }
    int64_t lone = 0, first = -1;
    const char *first_name = NULL;
    if (q->hint.kind == SIDE_VIDEO) {
        for (int64_t k = 0; k < q->hint.count; k++)
            if (!plate_has(q, k) && lone++ == 0) first = k;
    } else if (q->hint.kind == SIDE_SEQ) {
        for (int64_t i = 0; i < q->hint.seq.n; i++)
            if (!plate_has(q, q->hint.seq.f[i].frame) && lone++ == 0) {
                first = q->hint.seq.f[i].frame;
                first_name = q->hint.seq.f[i].name;
            }
    }
    if (lone == 0) return;
    snprintf(msg, sizeof msg,
             "%lld hint frame%s in %s %s no plate (the first: %s%sframe %lld); ignored. Frames "
             "pair by frame number; a video's frames are numbered from 0",
             (long long)lone, lone == 1 ? "" : "s", q->hint.path, lone == 1 ? "has" : "have",
             first_name ? first_name : "", first_name ? ", " : "", (long long)first);
    warn(user, msg);
}

ckey_status ckey_source_open_video(const char *plate, const char *hint, int32_t decode_threads,
                                   ckey_message_fn warn, void *user, ckey_source *out,
                                   ckey_error *err) {
    if (!plate || !out || decode_threads < 0)
        return ck_fail(err, CKEY_ERR_INVALID_ARG, "ckey_source_open_video: bad arguments");
    memset(out, 0, sizeof *out);
    video_source *q = calloc(1, sizeof *q);
    if (!q) return ck_fail(err, CKEY_ERR_NOMEM, "out of memory");
    ckey_status st = side_resolve(plate, "plate", decode_threads, &q->plate, err);
    if (st == CKEY_OK) st = side_resolve(hint, "hint", decode_threads, &q->hint, err);
    if (st != CKEY_OK) {
        vs_close(q);
        return st;
    }
    if (q->plate.kind == SIDE_SEQ && q->hint.kind != SIDE_VIDEO) {
        /* no video after all: two sequences (or a sequence and auto) */
        vs_close(q);
        return ckey_source_open_sequence(plate, hint, warn, user, out, err);
    }
    const int64_t n = q->plate.kind == SIDE_VIDEO ? q->plate.count : q->plate.seq.n;
    if (n == 0) {
        vs_close(q);
        return ck_fail(err, CKEY_ERR_IO,
                       "%s holds no image frames (png, jpg, jpeg, tif, tiff, exr) and no video",
                       plate);
    }
    q->frames = calloc((size_t)n, sizeof *q->frames);
    if (!q->frames) {
        vs_close(q);
        return ck_fail(err, CKEY_ERR_NOMEM, "out of memory listing %s", plate);
    }
    for (int64_t i = 0; i < n; i++) {
        ckey_shot_frame *f = &q->frames[i];
        q->count = i + 1;
        int ok;
        if (q->plate.kind == SIDE_VIDEO) {
            char stem[32];
            snprintf(stem, sizeof stem, "%05lld", (long long)i);
            f->number = i;
            f->stem = strdup(stem);
            f->plate = frame_label(q->plate.path, i);
            f->plate_linear = 0; /* a video is sRGB-encoded */
            ok = f->stem && f->plate;
        } else {
            ok = ck_seq_frame(q->plate.path, &q->plate.seq.f[i], f);
        }
        if (q->hint.kind == SIDE_AUTO) {
            f->hint = ck_auto_hint;
        } else if (q->hint.kind == SIDE_VIDEO) {
            if (f->number < q->hint.count) ok = ok && (f->hint = frame_label(q->hint.path, f->number));
        } else if (f->number <= 0x7fffffffL) {
            const ck_seq_file *hf = ck_seq_find(&q->hint.seq, (long)f->number);
            if (hf) ok = ok && (f->hint = ckey_path_join(q->hint.path, hf->name));
        }
        if (!ok) {
            vs_close(q);
            return ck_fail(err, CKEY_ERR_NOMEM, "out of memory listing %s", plate);
        }
    }
    warn_unpaired(q, warn, user);
    out->self = q;
    out->count = q->count;
    out->frames = q->frames;
    out->read = vs_read;
    out->close = vs_close;
    out->probe = vs_probe;
    out->read_packed = vs_read_packed;
    out->packed_frame = vs_packed_frame;
    out->videos = (q->plate.kind == SIDE_VIDEO) + (q->hint.kind == SIDE_VIDEO);
    if (q->plate.kind == SIDE_VIDEO && q->plate.info.rate_num > 0 && q->plate.info.rate_den > 0) {
        out->rate_num = q->plate.info.rate_num;
        out->rate_den = q->plate.info.rate_den;
    }
    return CKEY_OK;
}
