/* The shot runner's internal entry points (src/clip/shot.c), for the memory
 * plan of a run (src/clip/run-memory.c), which counts what the runner holds. */
#ifndef CK_SHOT_H
#define CK_SHOT_H
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
 * min(4, CPUs / 4))); M, M, 1 and 1 with read_ahead 0. */
void ck_shot_layout(const ckey_shot_options *o, int nsessions, int *nin, int *nout, int *nwr, int *nrd);

#endif
