/*
 * Image-sequence directory scanning and the source frames made from a scan,
 * shared by the sequence source (clip/sequence.c) and the video source
 * (src/clip/video-source.c), which pairs a video with a sequence. Internal;
 * the public API is in ckey.h.
 */
#ifndef CK_SEQUENCE_H
#define CK_SEQUENCE_H

#include <stdint.h>

#include "ckey.h"
#include "ckey_clip.h"

typedef struct ck_seq_file {
    char *name;              /* file name within the directory */
    long frame;              /* last run of digits in the name */
} ck_seq_file;

/* The image files of a directory, sorted by frame number (unique). */
typedef struct ck_seq {
    ck_seq_file *f;
    int64_t n, cap;
    /* video files seen (only when the scan was asked to collect them) */
    int64_t videos;
    char *video;             /* the first one's name */
} ck_seq;

/*
 * List the image files (*.png, *.jpg, *.jpeg, *.tif, *.tiff, *.exr, any case)
 * of `dir`; `what` ("plate", "hint") names it in messages. Fails on a name
 * without digits or two files with one frame number. Video files (by
 * extension): with `collect_videos` zero they are an error
 * (CKEY_ERR_UNSUPPORTED); otherwise they are counted in `videos` and the
 * first is named in `video`.
 */
ckey_status ck_seq_scan(const char *dir, const char *what, int collect_videos, ck_seq *s,
                        ckey_error *err);
void ck_seq_free(ck_seq *s);
const ck_seq_file *ck_seq_find(const ck_seq *s, long frame);

/* The hint of every frame of a source whose hints the runner makes: one
 * shared string, never freed. */
extern const char ck_auto_hint[];

/* Frame `f` from file `pf` of a scan of `dir`: its number, stem (the name
 * without the extension), plate path and plate_linear (EXR); the hint is
 * left to the caller. Returns 0 when out of memory (ck_shot_frames_free
 * frees what was made). */
int ck_seq_frame(const char *dir, const ck_seq_file *pf, ckey_shot_frame *f);

/* Frees frames[0..count): their stem, plate and hint (but ck_auto_hint),
 * then the array. */
void ck_shot_frames_free(ckey_shot_frame *frames, int64_t count);

/* The extension after the last dot ("" when none). */
const char *ck_file_ext(const char *name);
int ck_is_video_ext(const char *ext);

#endif
