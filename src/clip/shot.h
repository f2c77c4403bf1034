/* The shot runner's internal entry points (src/clip/shot.c), for the memory
 * plan of a run (src/clip/run-memory.c), which counts what the runner holds. */
#ifndef CK_SHOT_H
#define CK_SHOT_H
#include "ckey_clip.h"

/* How many in slots, out slots and writer threads ckey_shot_run keeps for
 * options `o` (valid ones): read_ahead + 1, writers + 1 and the writers
 * (0: max(1, min(8, CPUs - 2))) when threaded; 1, 1 and 1 with read_ahead 0. */
void ck_shot_layout(const ckey_shot_options *o, int nsessions, int *nin, int *nout, int *nwr);

#endif
