/* What `track` and `key --mask` share (cmd-track.c): the Cutie checkpoint
 * and the tracked source from the command line's masks. */
#ifndef CKEY_CLI_TRACKING_H
#define CKEY_CLI_TRACKING_H

#include "ckey_track.h"
#include "opts.h"

/* Load o->track_model: CONTINUE, or EXIT_RUNTIME with the reason in err
 * (which says where the file was found when --track-model did not name it). */
int load_track_model(const opts *o, ckey_track_model **m, ckey_error *err);

/* The tracked source over *inner with --mask, --mask-at, --object and
 * --track-size (ckey_source_open_tracked; it takes *inner on success).
 * CONTINUE, or EXIT_RUNTIME with the reason in err. */
int open_tracked_source(const opts *o, ckey_source *inner, ckey_track_model *m, int hint_bits, ckey_source *out,
                        ckey_error *err);

#endif
