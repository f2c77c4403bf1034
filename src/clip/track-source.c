/*
 * Tracked hints (public API in ckey_track.h): masks read as label images,
 * and a source that wraps another one and makes each frame's hint with a
 * Cutie tracker as it reads the plate, so `ckey key --mask` keys with hints
 * that never touch the disk and `ckey track` writes the same hints as files.
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "ckey_track.h"
#include "core/core.h"
#include "model/cutie.h"

ckey_status ckey_track_read_mask(const char *path, uint8_t **labels, int32_t *width, int32_t *height,
                                 uint8_t objects[255], int32_t *num_objects, ckey_error *err) {
    if (!path || !labels || !width || !height || !objects || !num_objects)
        return ck_fail(err, CKEY_ERR_INVALID_ARG, "ckey_track_read_mask: invalid arguments");
    *labels = NULL;
    ckey_image img;
    memset(&img, 0, sizeof img);
    ckey_status st = ckey_image_read(path, CKEY_IMAGE_HINT, &img, err);
    if (st != CKEY_OK) return st;
    const size_t n = (size_t)img.width * img.height;
    uint8_t *lab = malloc(n ? n : 1);
    if (!lab) {
        ckey_image_free(&img);
        return ck_fail(err, CKEY_ERR_NOMEM, "%s: out of memory for a %d x %d mask", path, (int)img.width,
                       (int)img.height);
    }
    uint8_t seen[256] = {0};
    for (size_t i = 0; i < n; i++) {
        const float v = img.data[i];
        const int l = !(v > 0.0f) ? 0 : v >= 1.0f ? 255 : (int)lrintf(v * 255.0f);
        lab[i] = (uint8_t)l;
        seen[l] = 1;
    }
    int count = 0;
    for (int l = 1; l < 256; l++)
        if (seen[l]) objects[count++] = (uint8_t)l;
    *width = img.width;
    *height = img.height;
    ckey_image_free(&img);
    if (count == 0) {
        free(lab);
        return ck_fail(err, CKEY_ERR_INVALID_ARG,
                       "%s: the mask holds no object (every pixel is 0; an object is a nonzero label)", path);
    }
    *labels = lab;
    *num_objects = count;
    return CKEY_OK;
}

void ckey_track_source_options_default(ckey_track_source_options *o) {
    memset(o, 0, sizeof *o);
    o->hint_bits = 16;
    ckey_track_options_default(&o->track);
}

typedef struct later_mask {
    int64_t index;     /* into frames */
    const char *path;
    uint8_t *labels;
    uint8_t objects[255];
    int32_t count;
} later_mask;

typedef struct tracked {
    ckey_source inner;
    const ckey_track_model *m;
    ckey_track_options topt;
    int32_t object;      /* index into prob (1 + the object's position), 0: the union */
    int32_t hint_bits;
    ckey_shot_frame *frames;
    /* the first frame's mask */
    char *mask_path;
    uint8_t *labels;
    uint8_t objects[255];
    int32_t count;
    /* every object of the masks in the tracker's order: the first mask's,
     * then those each later mask brings, by frame (its labels increasing) */
    uint8_t all[255];
    int32_t total;
    int32_t mw, mh;
    later_mask *later;
    int32_t nlater;
    /* tracking state */
    ckey_tracker *t;
    int32_t w, h;
    int64_t next;        /* the next frame to track */
    ckey_error failed;   /* status != OK: a read failed, tracking cannot go on */
    float *rgb, *prob;   /* [h, w, 3], [1 + total, h, w] */
    ckey_image hint_scratch; /* the inner source's hint, ignored */
} tracked;

static void tracked_close(void *self) {
    tracked *q = self;
    if (!q) return;
    ckey_source_close(&q->inner);
    ckey_tracker_host_free(q->t, q->rgb);
    ckey_tracker_host_free(q->t, q->prob);
    ckey_tracker_free(q->t);
    free(q->frames);
    free(q->mask_path);
    free(q->labels);
    for (int i = 0; i < q->nlater; i++) free(q->later[i].labels);
    free(q->later);
    ckey_image_free(&q->hint_scratch);
    free(q);
}

static ckey_status tracked_probe(void *self, int64_t index, int32_t *w, int32_t *h, ckey_error *err) {
    tracked *q = self;
    return q->inner.probe(q->inner.self, index, w, h, err);
}

/* The tracker and its buffers, at the first frame's size. */
static ckey_status start(tracked *q, const ckey_image *plate, const ckey_shot_frame *f, ckey_error *err) {
    if (plate->width != q->mw || plate->height != q->mh)
        return ck_fail(err, CKEY_ERR_INVALID_ARG, "%s: the mask is %d x %d, the first plate (%s) %d x %d", q->mask_path,
                       (int)q->mw, (int)q->mh, f->plate, (int)plate->width, (int)plate->height);
    q->w = plate->width;
    q->h = plate->height;
    const size_t hw = (size_t)q->w * q->h;
    ckey_track_options to = q->topt;
    to.max_objects = q->total;
    ckey_status st = ckey_tracker_create(q->m, q->w, q->h, &to, &q->t, err);
    if (st) return st;
    /* the tracker's host memory (page-locked on a GPU): the step's copies at the link's speed */
    q->rgb = ckey_tracker_host_alloc(q->t, hw * 3 * sizeof(float));
    q->prob = ckey_tracker_host_alloc(q->t, hw * (size_t)(1 + q->total) * sizeof(float));
    if (!q->rgb || !q->prob) return ck_fail(err, CKEY_ERR_NOMEM, "tracking: out of memory for %d x %d frames", q->w, q->h);
    return CKEY_OK;
}

/* Track frame i, whose plate is in `plate`. */
static ckey_status track_one(tracked *q, int64_t i, const ckey_image *plate, ckey_error *err) {
    const ckey_shot_frame *f = &q->frames[i];
    ckey_status st = CKEY_OK;
    if (!q->t && (st = start(q, plate, f, err)) != CKEY_OK) return st;
    if (plate->width != q->w || plate->height != q->h || plate->channels != 3)
        return ck_fail(err, CKEY_ERR_INVALID_ARG, "%s: %d x %d, the shot's first plate is %d x %d (a tracked shot "
                       "keeps one size)", f->plate, (int)plate->width, (int)plate->height, (int)q->w, (int)q->h);
    const size_t hw = (size_t)q->w * q->h;
    for (size_t p = 0; p < hw; p++)
        for (int c = 0; c < 3; c++) q->rgb[p * 3 + (size_t)c] = plate->data[(size_t)c * hw + p];
    if (f->plate_linear) ckey_linear_to_srgb(q->rgb, hw * 3);
    for (size_t k = 0; k < hw * 3; k++) {
        const float v = q->rgb[k];
        q->rgb[k] = !(v > 0.0f) ? 0.0f : v > 1.0f ? 1.0f : v;
    }
    const uint8_t *labels = NULL, *objects = NULL;
    int32_t count = 0;
    if (i == 0) {
        labels = q->labels, objects = q->objects, count = q->count;
    } else {
        for (int k = 0; k < q->nlater; k++)
            if (q->later[k].index == i) labels = q->later[k].labels, objects = q->later[k].objects, count = q->later[k].count;
    }
    ckey_error e;
    /* objects the masks bring later are 0 until then (the step writes its objects' planes) */
    memset(q->prob, 0, hw * (size_t)(1 + q->total) * sizeof(float));
    st = ckey_tracker_step(q->t, q->rgb, labels, count, objects, q->prob, &e);
    if (st != CKEY_OK) ck_fail(err, st, "frame %lld: %s: tracking: %s", (long long)f->number, f->plate, e.message);
    return st;
}

/* The hint of the frame just tracked. */
static ckey_status make_hint(tracked *q, ckey_image *hint, ckey_error *err) {
    const size_t hw = (size_t)q->w * q->h;
    if (!hint->data || (hint->capacity ? hint->capacity : (size_t)hint->channels * hint->width * hint->height) < hw) {
        ckey_image_free(hint);
        hint->data = malloc(hw * sizeof(float));
        if (!hint->data) return ck_fail(err, CKEY_ERR_NOMEM, "tracking: out of memory for a hint");
        hint->capacity = hw;
    }
    hint->width = q->w;
    hint->height = q->h;
    hint->channels = 1;
    hint->bit_depth = q->hint_bits == 16 ? 16 : 32;
    hint->has_alpha = 0;
    const float *bg = q->prob, *obj = q->prob + (size_t)q->object * hw;
    for (size_t p = 0; p < hw; p++) {
        float v = q->object ? obj[p] : 1.0f - bg[p];
        if (q->hint_bits == 16) /* as ckey_image_write_png stores it and ckey_image_read reads it back */
            v = !(v > 0.0f) ? 0.0f : v >= 1.0f ? 1.0f : (float)(unsigned)((double)v * 65535u + 0.5) / 65535.0f;
        hint->data[p] = v;
    }
    return CKEY_OK;
}

static ckey_status tracked_read(void *self, int64_t index, ckey_image *plate, ckey_image *hint, ckey_error *err) {
    tracked *q = self;
    if (q->failed.status != CKEY_OK)
        return ck_fail(err, q->failed.status, "frame %lld: not tracked (tracking runs frame after frame and "
                       "stopped at an earlier frame: %s)", (long long)q->frames[index].number, q->failed.message);
    if (index < q->next)
        return ck_fail(err, CKEY_ERR_INVALID_ARG, "frame %lld: read again (a tracked source reads forward only)",
                       (long long)q->frames[index].number);
    ckey_status st = CKEY_OK;
    while (st == CKEY_OK && q->next <= index) {
        st = q->inner.read(q->inner.self, q->next, plate, &q->hint_scratch, err);
        if (st == CKEY_OK) st = track_one(q, q->next, plate, err);
        if (st == CKEY_OK) q->next++;
    }
    if (st == CKEY_OK) st = make_hint(q, hint, err);
    if (st != CKEY_OK) q->failed = *err;
    return st;
}

/* The source's frame of number `n`, -1 when none. */
static int64_t frame_index(const ckey_source *s, int64_t n) {
    for (int64_t i = 0; i < s->count; i++)
        if (s->frames[i].number == n) return i;
    return -1;
}

static ckey_status open_masks(tracked *q, const ckey_track_source_options *o, ckey_error *err) {
    ckey_status st = ckey_track_read_mask(o->mask, &q->labels, &q->mw, &q->mh, q->objects, &q->count, err);
    if (st != CKEY_OK) return st;
    if (q->count > CKEY_TRACK_MAX_OBJECTS)
        return ck_fail(err, CKEY_ERR_INVALID_ARG,
                       "%s: %d different labels, more than the %d objects a mask may hold: a mask holds object "
                       "labels (0 the background, then 1, 2, ... or 255), not a soft matte (threshold one first)",
                       o->mask, (int)q->count, CKEY_TRACK_MAX_OBJECTS);
    memcpy(q->all, q->objects, (size_t)q->count);
    q->total = q->count;
    if (o->mask_at_count > 0) {
        q->later = calloc((size_t)o->mask_at_count, sizeof *q->later);
        if (!q->later) return ck_fail(err, CKEY_ERR_NOMEM, "out of memory");
    }
    for (int k = 0; k < o->mask_at_count; k++) {
        later_mask *lm = &q->later[k];
        const int64_t n = o->mask_at_frame[k];
        lm->path = o->mask_at[k];
        lm->index = frame_index(&q->inner, n);
        if (lm->index < 0)
            return ck_fail(err, CKEY_ERR_INVALID_ARG, "mask at frame %lld (%s): the plate has no frame %lld",
                           (long long)n, lm->path, (long long)n);
        if (lm->index == 0)
            return ck_fail(err, CKEY_ERR_INVALID_ARG, "mask at frame %lld (%s): that is the first frame, whose "
                           "mask is the first mask", (long long)n, lm->path);
        for (int j = 0; j < k; j++)
            if (q->later[j].index == lm->index)
                return ck_fail(err, CKEY_ERR_INVALID_ARG, "two masks at frame %lld (%s and %s)", (long long)n,
                               q->later[j].path, lm->path);
        q->nlater = k + 1;
        int32_t w, h;
        st = ckey_track_read_mask(lm->path, &lm->labels, &w, &h, lm->objects, &lm->count, err);
        if (st != CKEY_OK) return st;
        if (w != q->mw || h != q->mh)
            return ck_fail(err, CKEY_ERR_INVALID_ARG, "%s: the mask is %d x %d, the first mask (%s) %d x %d", lm->path,
                           (int)w, (int)h, o->mask, (int)q->mw, (int)q->mh);
    }
    /* objects the later masks bring, in frame order (as the tracker adds them) */
    for (int64_t f = 1; f < q->inner.count; f++)
        for (int k = 0; k < q->nlater; k++) {
            const later_mask *lm = &q->later[k];
            if (lm->index != f) continue;
            for (int i = 0; i < lm->count; i++) {
                int known = 0;
                for (int j = 0; j < q->total; j++) known |= q->all[j] == lm->objects[i];
                if (known) continue;
                if (q->total >= CKEY_TRACK_MAX_OBJECTS)
                    return ck_fail(err, CKEY_ERR_INVALID_ARG, "%s: the masks hold more than %d objects in all",
                                   lm->path, CKEY_TRACK_MAX_OBJECTS);
                q->all[q->total++] = lm->objects[i];
            }
        }
    if (o->object) {
        for (int k = 0; k < q->total; k++)
            if (q->all[k] == o->object) q->object = 1 + k;
        if (!q->object) {
            char list[1024] = "";
            size_t n = 0;
            for (int k = 0; k < q->total && n < sizeof list - 8; k++)
                n += (size_t)snprintf(list + n, sizeof list - n, "%s%d", k ? ", " : "", (int)q->all[k]);
            return ck_fail(err, CKEY_ERR_INVALID_ARG, "%s: object %d is not in the masks (their objects: %s)", o->mask,
                           (int)o->object, list);
        }
    }
    /* the first plate's size from its header, when the source can tell */
    if (q->inner.probe && q->inner.count > 0) {
        int32_t w = 0, h = 0;
        ckey_error e;
        if (q->inner.probe(q->inner.self, 0, &w, &h, &e) == CKEY_OK && (w != q->mw || h != q->mh))
            return ck_fail(err, CKEY_ERR_INVALID_ARG, "%s: the mask is %d x %d, the first plate (%s) %d x %d", o->mask,
                           (int)q->mw, (int)q->mh, q->inner.frames[0].plate, (int)w, (int)h);
    }
    return CKEY_OK;
}

ckey_status ckey_track_source_plan_memory(const ckey_track_model *m, int32_t width, int32_t height,
                                          int32_t num_objects, int32_t first_objects, int32_t num_later,
                                          const ckey_track_options *opt, ckey_track_memory *out, ckey_error *err) {
    if (out) memset(out, 0, sizeof *out);
    if (!out || num_objects < 1 || first_objects < 1 || first_objects > num_objects || num_later < 0)
        return ck_fail(err, CKEY_ERR_INVALID_ARG, "ckey_track_source_plan_memory: invalid arguments");
    ckey_track_options to;
    if (opt) to = *opt;
    else ckey_track_options_default(&to);
    to.max_objects = num_objects; /* as start() creates the tracker */
    const ckey_status st = ck_track_plan_memory_first(m, width, height, &to, first_objects, out, err);
    if (st != CKEY_OK) return st;
    /* start(): rgb [h, w, 3] and prob [1 + objects, h, w]; the masks' labels [h, w] */
    const int64_t hw = (int64_t)width * height;
    out->source_bytes = (3 + 1 + (int64_t)num_objects) * hw * (int64_t)sizeof(float) + (1 + (int64_t)num_later) * hw;
    out->total_bytes += out->source_bytes;
    out->host_bytes += out->source_bytes;
    return CKEY_OK;
}

ckey_status ckey_source_tracked_memory(const ckey_source *src, ckey_track_memory *out, ckey_error *err) {
    if (out) memset(out, 0, sizeof *out);
    if (!src || !out || src->read != tracked_read || !src->self)
        return ck_fail(err, CKEY_ERR_INVALID_ARG, "ckey_source_tracked_memory: not a tracked source");
    const tracked *q = src->self;
    return ckey_track_source_plan_memory(q->m, q->mw, q->mh, q->total, q->count, q->nlater, &q->topt, out, err);
}

ckey_status ckey_source_open_tracked(ckey_source *inner, const ckey_track_model *m,
                                     const ckey_track_source_options *o, ckey_source *out,
                                     ckey_error *err) {
    if (!inner || !inner->read || !m || !o || !o->mask || !out || (o->mask_at_count > 0 && (!o->mask_at || !o->mask_at_frame)) ||
        o->mask_at_count < 0 || (o->hint_bits != 0 && o->hint_bits != 16) || o->object < 0 || o->object > 255)
        return ck_fail(err, CKEY_ERR_INVALID_ARG, "ckey_source_open_tracked: invalid arguments");
    if (inner->count < 1) return ck_fail(err, CKEY_ERR_INVALID_ARG, "tracking: the plate has no frame");
    tracked *q = calloc(1, sizeof *q);
    if (!q) return ck_fail(err, CKEY_ERR_NOMEM, "out of memory");
    q->inner = *inner; /* borrowed until success */
    q->m = m;
    q->topt = o->track;
    q->hint_bits = o->hint_bits;
    q->mask_path = strdup(o->mask);
    q->frames = malloc((size_t)inner->count * sizeof *q->frames);
    ckey_status st = !q->mask_path || !q->frames ? ck_fail(err, CKEY_ERR_NOMEM, "out of memory")
                                                 : open_masks(q, o, err);
    if (st != CKEY_OK) {
        memset(&q->inner, 0, sizeof q->inner);
        tracked_close(q);
        return st;
    }
    for (int64_t i = 0; i < inner->count; i++) {
        q->frames[i] = inner->frames[i];
        q->frames[i].hint = "tracked";
    }
    memset(out, 0, sizeof *out);
    out->self = q;
    out->count = inner->count;
    out->frames = q->frames;
    out->read = tracked_read;
    out->close = tracked_close;
    out->rate_num = inner->rate_num;
    out->rate_den = inner->rate_den;
    out->probe = inner->probe ? tracked_probe : NULL;
    out->videos = inner->videos;
    out->concurrent_read = 0;
    memset(inner, 0, sizeof *inner);
    return CKEY_OK;
}
