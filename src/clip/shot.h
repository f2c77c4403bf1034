/* The shot runner's internal entry points (src/clip/shot.c), for the memory
 * plan of a run (src/clip/run-memory.c), which counts what the runner holds. */
#ifndef CK_SHOT_H
#define CK_SHOT_H
#include "ckey_clip.h"

/* How many in slots, out slots, writer threads and reader threads
 * ckey_shot_run(_multi) keeps for options `o` (valid ones) and `nsessions`
 * sessions (M): when threaded, max(read_ahead, R) + M and K + M, each
 * rounded up to a multiple of M, K writers (0: max(1, min(8, CPUs - 2))) and
 * R readers (0: max(1, min(4, CPUs / 4))); M, M, 1 and 1 with read_ahead 0. */
void ck_shot_layout(const ckey_shot_options *o, int nsessions, int *nin, int *nout, int *nwr, int *nrd);

#endif
