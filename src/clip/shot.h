/* The shot runner's internal entry points (src/clip/shot.c), for the memory
 * plan of a run (src/clip/run-memory.c), which counts what the runner holds. */
#ifndef CK_SHOT_H
#define CK_SHOT_H
#include <pthread.h>
#include <stddef.h>

#include "ckey_clip.h"

/* Model threads a session for options `o`: on the device frame path when
 * threaded, o->device_frames (0: CK_SHOT_DEVICE_FRAMES) ck_devframes, each on
 * its own stream, so that one frame's transfers and plate-size steps overlap
 * another's network; else 1. */
int ck_shot_pipelines(const ckey_shot_options *o);
#define CK_SHOT_DEVICE_FRAMES 2
#define CK_SHOT_MAX_PIPELINES 8
#define CKEY_SHOT_MAX_MODELS (CK_SHOT_MAX_PIPELINES * CKEY_SHOT_MAX_SESSIONS)

/* How many in slots, out slots, writer threads and reader threads
 * ckey_shot_run(_multi) keeps for options `o` (valid ones) and `nsessions`
 * sessions (M), with T = M x ck_shot_pipelines(o) model threads: when
 * threaded, max(read_ahead, R) + T and K + T, each rounded up to a multiple
 * of T, K writers (0: max(1, min(8, CPUs - 2))) and R readers (0: max(1,
 * min(4, CPUs / 4)); on the device frame path, o->frame_path DEVICE,
 * max(1, min(8, 3 CPUs / 8))); M, M, 1 and 1 with read_ahead 0. */
void ck_shot_layout(const ckey_shot_options *o, int nsessions, int *nin, int *nout, int *nwr, int *nrd);

/* The bytes of a device-path out slot for a w x h plate: the four passes as
 * floats (44 bytes a pixel), or (stored) as the pass files store them,
 * HALF and 8-bit (19), each part 256-byte aligned; 0 for no size. */
size_t ck_shot_out_slot_bytes(int stored, int32_t w, int32_t h);

/*
 * The block behind one packed in-slot image of the device frame path (a
 * ckey_packed_image's allocator: ck_slot_block_alloc / _release with the
 * block as alloc_user). The block is page-locked (pin / unpin: the slot's
 * session's ckey_session_host_alloc), so that the model thread uploads it
 * directly. ck_slot_block_reserve pins it up front, before any model thread
 * runs, for the first plate's size (ck_slot_packed_bytes); from then on
 * nothing is pinned or unpinned until ck_slot_block_free at the end of the
 * run: a read that needs more (a larger plate, or a PNG file larger than the
 * rule's) takes pageable memory (malloc; the copy to the device is staged by
 * the driver), with no lock. Without a reservation (no size known up front)
 * a read pins what it needs, under `lock` (no allocation beside another
 * model thread's graph capture), as its first frames are read.
 */
typedef struct ck_slot_block {
    void *(*pin)(void *user, size_t bytes);
    void (*unpin)(void *user, void *p);
    void *pin_user;
    pthread_mutex_t *lock;   /* NULL: one model thread, no lock needed */
    void *pinned;            /* the page-locked block, or NULL */
    size_t pinned_cap;
    int reserved;            /* pinned up front: later growth is pageable */
    int64_t pins, grows;     /* blocks pinned, pageable blocks taken (tests) */
} ck_slot_block;

/* The bytes an in slot reserves for a w x h plate's packed samples (hint 0)
 * or its hint's (hint 1): CK_SLOT_PLATE_BYTES and CK_SLOT_HINT_BYTES a pixel,
 * together the 16 bytes a pixel the memory plan counts for an in slot's
 * decoded plate and hint; 0 for a size out of range. */
#define CK_SLOT_PLATE_BYTES 12 /* 16-bit RGB (6) + a PNG file as large as its samples */
#define CK_SLOT_HINT_BYTES 4   /* 16-bit gray (2) + its PNG file */
size_t ck_slot_packed_bytes(int32_t w, int32_t h, int hint);

/* Pin `bytes` up front (before any model thread runs); 0 when out of memory
 * (the reads then allocate as without a reservation). */
int ck_slot_block_reserve(ck_slot_block *b, size_t bytes);
void *ck_slot_block_alloc(void *block, size_t bytes);
void ck_slot_block_release(void *block, void *p);
/* Unpin the block (no lock: the model threads have ended). */
void ck_slot_block_free(ck_slot_block *b);

#endif
