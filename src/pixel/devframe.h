/*
 * The frame path on a device session: one frame keyed where the network
 * runs, from the decoded plate to the passes the sink writes. The steps of
 * ckey_session_key + ckey_post_passes, in the same order and with the same
 * tables (resize.c's plans, uploaded), on the session's stream:
 *
 *   upload plate [3, h, w] and hint [h, w] (fp32), or either packed in its
 *   file's samples ([h, w, C] 8-bit, 16-bit or half) and unpacked to fp32 there
 *   [linear plate read as sRGB: encode at full size]  (ck_cuda_srgb)
 *   resize to S (antialiased bilinear) [+ linear -> sRGB] + ImageNet normalize
 *   the network (ck_session_run_device: input and output stay on the device)
 *   resize back to h x w (Lanczos4 or bilinear, the session's resize_back)
 *   post (ck_post_frame_cuda: despeckle, despill, premultiply, comp)
 *   [stored: alpha, fg, processed to HALF, comp to 8 bits (ck_cuda_to_half,
 *    ck_cuda_to_u8_trunc), into the post scratch and the plate's buffer]
 *   download alpha, fg, processed, comp (fp32, or stored: 19 bytes a pixel
 *   instead of 44)
 *
 * Results agree with the host path within float rounding (the mask steps of
 * despeckle are integer-exact). A ck_devframe belongs to one session and is
 * used by one thread at a time; its device buffers grow to the largest plate
 * and are then reused (nothing is allocated per frame after the first of a
 * size). The plate's device buffers take alpha and fg after the network.
 *
 * Several ck_devframes of one session may key frames at once, each on its
 * own thread and its own stream: the upload, the resize to S, the post and
 * the download of one frame then overlap the network of another. The
 * network and the resize back (which reads the session's output, rewritten
 * by its next run) run under the session's lock (ck_devframe_job.net_lock),
 * and so do the allocations of a new plate size (cudaMalloc and the legacy
 * stream's copies must not run beside another thread's graph capture).
 */
#ifndef CK_DEVFRAME_H
#define CK_DEVFRAME_H

#include <pthread.h>
#include <stdint.h>

#include "ckey.h"
#include "ckey_media.h"
#include "pixel/pixel.h"
#include "pixel/post.h"

typedef struct ck_devframe ck_devframe;

/* Whether session s has a device frame path (a device backend). */
int ck_devframe_available(const ckey_session *s);

/* The memory a ck_devframe holds for w x h plates at network size S: device
 * bytes (plate-size buffers, resize tables and intermediates, the network's
 * input, the post scratch, the packed samples' staging: 16 bytes a pixel at
 * most) and host bytes (the resize plans); -1 when the plate cannot be
 * resized. */
void ck_devframe_bytes(int32_t w, int32_t h, int32_t S, ck_resize_mode back, int64_t *device, int64_t *host);

/* CKEY_ERR_UNSUPPORTED when s has no device frame path. */
ckey_status ck_devframe_create(ckey_session *s, ck_devframe **out, ckey_error *err);
void ck_devframe_free(ck_devframe *df);

typedef struct ck_devframe_job {
    const float *rgb;     /* [3, h, w] host, in [0, 1] as the reader left it; or NULL: */
    const ckey_packed_image *rgb_packed; /* the plate's samples (3 or 4 channels; page-locked
                                            for a copy that overlaps) */
    const float *hint;    /* [h, w] host; or NULL: */
    const ckey_packed_image *hint_packed; /* channel hint_channel of its samples */
    int32_t width, height;
    int srgb_at_read;     /* the plate is linear: encode it to sRGB at full size first */
    int input_is_linear;  /* encode to sRGB after the resize to S (ck_preprocess's flag) */
    const ck_post_options *post; /* OpenCV despeckle only (ck_post_frame_cuda) */
    /* host outputs [h, w], [3, h, w], [4, h, w], [3, h, w] (comp may be NULL:
     * not made): fp32, or with `stored` as the pass files store them, alpha,
     * fg and processed HALF (uint16_t, core/quantize.h's rounding) and comp
     * 8-bit (ck_trunc_u8) */
    int stored;
    void *alpha, *fg, *processed, *comp;
    pthread_mutex_t *net_lock; /* the session's lock when other ck_devframes share it; may be NULL */
} ck_devframe_job;

/* Seconds of the last ck_devframe_key, host wall time of each step (the
 * stream synchronized after each): [0] upload, [1] preprocessing (sRGB,
 * resize to S, normalize), [2] the network (its run call), [3] resize back,
 * [4] post (and the conversion to the stored samples), [5] download. The waits for net_lock are in none of them. */
enum { CK_DEVFRAME_STEPS = 6 };
ckey_status ck_devframe_key(ck_devframe *df, const ck_devframe_job *job, double seconds[CK_DEVFRAME_STEPS],
                            ckey_error *err);

#endif
