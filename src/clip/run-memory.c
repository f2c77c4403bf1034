/*
 * ckey_plan_run_memory: the memory of a whole run, the network's plan plus
 * every buffer that scales with the plate (public API in ckey_clip.h). The
 * figures come from the functions the run itself sizes its buffers with
 * (ck_preprocess_scratch_floats, ck_postprocess_scratch_floats,
 * ckey_post_scratch_bytes, ckey_auto_hint_scratch_bytes, ck_shot_layout), so
 * the plan and the run cannot drift apart; only the encoders' and codecs'
 * internal buffers, which libpng, OpenEXR and FFmpeg allocate, are estimates
 * (the constants below, rounded up from measurements).
 */
#include <stdio.h>
#include <string.h>

#include "ckey_clip.h"
#include "clip/shot.h"
#include "core/core.h"
#include "media/image.h"
#include "model/session.h"
#include "pixel/devframe.h"
#include "pixel/pixel.h"

/* One compressor's state (zlib's or libdeflate's), its tables and window. */
#define CK_CODEC_STATE_BYTES ((int64_t)1 << 20)
/* Rows of a PNG encode libpng holds: our row, its copy, the filter rows. */
#define CK_PNG_ROWS 8
/* Scanlines per EXR chunk (PXR24 and ZIP: 16; the other compressions fewer)
 * and the copies of a chunk on its way out (packed, transformed, deflated,
 * OpenEXR's and the libdeflate path's own buffers). */
#define CK_EXR_CHUNK_LINES 16
#define CK_EXR_CHUNK_COPIES 5
/* Bytes a pixel of a video reader (the decoder's reference and threading
 * frames, the conversion rows), of a video writer beyond the tee's own
 * planes (its input frame, its conversion scratch and the encoder: for
 * H.264, libx264's lookahead of 40 frames) and of each ProRes coder of a
 * run with several writers (its input frame, its conversion scratch, the
 * encoder's packet buffer and the coded packets waiting for their turn).
 * Peak RSS measured at 1920 x 1080 on 2 cores: reader 24 (H.264) and 61
 * (ProRes 4444) over 60 frames, writer 90 (ProRes 4444) and 218 (H.264)
 * over 60 frames, a ProRes 4444 coder 34 over 20 frames of noise (its
 * largest packets); more cores run more frames at once, so these are
 * rounded up. */
#define CK_VIDEO_DECODE_BYTES_PER_PIXEL 64
#define CK_PRORES_BYTES_PER_PIXEL 96
#define CK_PRORES_CODER_BYTES_PER_PIXEL 40
#define CK_H264_BYTES_PER_PIXEL 256

void ckey_run_options_default(ckey_run_options *o) {
    if (!o) return;
    memset(o, 0, sizeof *o);
    o->kind = CKEY_RUN_PLATE;
    ckey_shot_options_default(&o->shot);
}

/* Bytes of `n` floats, 0 for the "invalid" 0 of the *_scratch_floats. */
static int64_t float_bytes(size_t n) { return (int64_t)n * (int64_t)sizeof(float); }

/* The PNG encoder of one plane set `ch` channels wide at `depth` bits. */
static int64_t png_encode_bytes(int32_t w, int ch, int depth) {
    return CK_PNG_ROWS * ((int64_t)w * ch * (depth / 8) + 1) + CK_CODEC_STATE_BYTES;
}

/* The Comp PNG's writer, kept by each of a shot's writers (src/clip/sequence.c's
 * pass kits): at the default CK_PNG_LEVEL_RLE with libdeflate, the filtered
 * 8-bit RGB image, room for its zlib stream (libdeflate's bound: about as
 * much again) and two rows; else libpng's rows. */
static int64_t comp_png_encode_bytes(int32_t w, int32_t h) {
#ifdef CK_HAVE_LIBDEFLATE
    const int64_t raw = (int64_t)h * ((int64_t)w * 3 + 1);
    return 2 * raw + raw / 64 + 2 * (int64_t)w * 3 + CK_CODEC_STATE_BYTES;
#else
    (void)h;
    return png_encode_bytes(w, 3, 8);
#endif
}

/* An EXR pass of at most 4 HALF channels (Processed) being written. */
static int64_t exr_encode_bytes(int32_t w) {
    return (int64_t)CK_EXR_CHUNK_COPIES * CK_EXR_CHUNK_LINES * w * 4 * 2 + CK_CODEC_STATE_BYTES;
}

/* The video tee (src/clip/video-tee.c): with several writers, for each
 * (each codes its frames' ProRes) a ProRes input [4, h, w] (the despilled
 * fg and the alpha) and a coder; with one, one input and the frame-threaded
 * encoder; the comp padded to even sides for the H.264 when a side is odd,
 * and its encoder. */
static int64_t video_out_bytes(int bits, int32_t w, int32_t h, int writers) {
    const int64_t P = (int64_t)w * h, in = 4 * P * (int64_t)sizeof(float);
    int64_t b = 0;
    if (bits & CKEY_RUN_VIDEO_PRORES)
        b += writers > 1 ? writers * (in + CK_PRORES_CODER_BYTES_PER_PIXEL * P)
                         : in + CK_PRORES_BYTES_PER_PIXEL * P;
    if (bits & CKEY_RUN_VIDEO_H264) {
        const int64_t Pe = (int64_t)(w + (w & 1)) * (h + (h & 1));
        if ((w | h) & 1) b += 3 * Pe * (int64_t)sizeof(float);
        b += CK_H264_BYTES_PER_PIXEL * Pe;
    }
    return b;
}

void ckey_run_memory_parts(const ckey_run_memory *r, char *buf, size_t cap) {
    if (!buf || cap == 0) return;
    if (!r) {
        buf[0] = 0;
        return;
    }
    char a[32], b[32], c[32], d[32];
    ck_format_bytes(a, sizeof a, r->session.peak_bytes);
    ck_format_bytes(b, sizeof b, r->model_bytes);
    ck_format_bytes(d, sizeof d, r->plate_bytes);
    if (r->io_bytes > 0)
        snprintf(buf, cap, "network %s + model %s + transfer buffers %s + plate buffers %s", a, b,
                 ck_format_bytes(c, sizeof c, r->io_bytes), d);
    else
        snprintf(buf, cap, "network %s + model %s + plate buffers %s", a, b, d);
    if (r->device_frame_bytes > 0) {
        const size_t used = strlen(buf);
        snprintf(buf + used, cap - used, " + device frame buffers %s",
                 ck_format_bytes(c, sizeof c, r->device_frame_bytes));
    }
    if (r->track_bytes > 0) {
        const size_t used = strlen(buf);
        snprintf(buf + used, cap - used, " + tracker %s", ck_format_bytes(c, sizeof c, r->track_bytes));
    }
}

ckey_status ckey_plan_run_memory(const ckey_model *m, const ckey_session_options *so,
                                 const ckey_run_options *ro, ckey_run_memory *out, ckey_error *err) {
    if (out) memset(out, 0, sizeof *out);
    if (!m || !ro || !out) return ck_fail(err, CKEY_ERR_INVALID_ARG, "ckey_plan_run_memory: NULL argument");
    const int32_t w = ro->width, h = ro->height;
    if (w < 1 || h < 1 || w > CKEY_IMAGE_MAX_SIDE || h > CKEY_IMAGE_MAX_SIDE ||
        (int64_t)w * h > CKEY_IMAGE_MAX_PIXELS)
        return ck_fail(err, CKEY_ERR_INVALID_ARG, "plate %d x %d: outside 1..%d per side, %lld pixels",
                       (int)w, (int)h, CKEY_IMAGE_MAX_SIDE, (long long)CKEY_IMAGE_MAX_PIXELS);
    if ((ro->kind != CKEY_RUN_PLATE && ro->kind != CKEY_RUN_SHOT) || ro->video_in < 0 || ro->video_in > 2 ||
        (ro->video_out & ~(CKEY_RUN_VIDEO_PRORES | CKEY_RUN_VIDEO_H264)) || ro->host_limit < -1 ||
        ro->sessions < 0 || ro->sessions > CKEY_SHOT_MAX_SESSIONS || ro->track_bytes < 0 ||
        ro->track_device_bytes < 0 || ro->track_device_bytes > ro->track_bytes ||
        (ro->kind == CKEY_RUN_SHOT && (ro->shot.read_ahead < 0 || ro->shot.read_ahead > 8 ||
                                       ro->shot.writers < 0 || ro->shot.writers > 64 ||
                                       ro->shot.readers < 0 || ro->shot.readers > 16 ||
                                       ro->shot.device_frames < 0 ||
                                       ro->shot.device_frames > CK_SHOT_MAX_PIPELINES)))
        return ck_fail(err, CKEY_ERR_INVALID_ARG, "ckey_plan_run_memory: bad run options");
    ckey_session_options sopt;
    if (so) sopt = *so;
    else ckey_session_options_default(&sopt);
    ck_session_memory sm;
    ckey_status st = ck_plan_session_memory(m, &sopt, &sm, err);
    if (st != CKEY_OK) return st;

    const int32_t S = sopt.size;
    const int64_t P = (int64_t)w * h, F = (int64_t)sizeof(float), io = 4 * (int64_t)S * S * F;
    const ck_resize_mode back =
        sopt.resize_back == CKEY_RESIZE_BACK_BILINEAR ? CK_RESIZE_BILINEAR_AA : CK_RESIZE_LANCZOS4;
    const int64_t pre = float_bytes(ck_preprocess_scratch_floats(h, w, S));
    const int64_t post = float_bytes(ck_postprocess_scratch_floats(S, h, w, back));
    if (pre == 0 || post == 0)
        return ck_fail(err, CKEY_ERR_INVALID_ARG, "plate %d x %d: cannot be resized to %d", (int)w, (int)h, (int)S);
    ckey_run_memory *r = out;
    /* several sessions (a shot on several devices): each its own plan, model copy and transfer buffers */
    const int nsess = ro->kind == CKEY_RUN_SHOT && ro->sessions > 1 ? ro->sessions : 1;
    r->session = sm.plan;
    r->session.weight_bytes *= nsess;
    r->session.arena_bytes *= nsess;
    r->session.workspace_bytes *= nsess;
    r->session.peak_bytes *= nsess;
    r->model_bytes = sm.model_host_bytes * nsess;
    r->io_bytes = sm.host_io_bytes * nsess;
    r->hint_bytes = ro->auto_hint ? (int64_t)ckey_auto_hint_scratch_bytes(w, h) : 0;
    const int64_t video_in = (int64_t)ro->video_in * CK_VIDEO_DECODE_BYTES_PER_PIXEL * P;
    if (ro->kind == CKEY_RUN_PLATE) {
        /* cmd-run: plate + hint (with a PNG's file and rows:
         * CK_PNG_READ_BYTES_PER_PIXEL), the session's one work buffer
         * (ckey_session_key: the larger of the two resizes), alpha + fg, and
         * one PNG encoder at a time (fg: 3 channels of 16 bits) */
        r->frames_in_flight = 1;
        r->decoded_bytes = (4 * F + CK_PNG_READ_BYTES_PER_PIXEL) * P + video_in;
        r->resize_bytes = pre > post ? pre : post;
        r->output_bytes = 4 * P * F;
        r->encode_bytes = png_encode_bytes(w, 3, 16);
    } else {
        int nin, nout, nwr, nrd;
        ck_shot_layout(&ro->shot, nsess, &nin, &nout, &nwr, &nrd);
        const size_t post_scratch = ckey_post_scratch_bytes(w, h, &ro->shot.post);
        if (post_scratch == SIZE_MAX)
            return ck_fail(err, CKEY_ERR_INVALID_ARG, "ckey_plan_run_memory: bad post options");
        /* src/clip/shot.c: in slots hold the network's input; each reader
         * its decoded plate + hint (reused frame after frame; with a PNG's
         * file and rows, CK_PNG_READ_BYTES_PER_PIXEL), its resize
         * scratch to S and its auto hint scratch; out slots the network's
         * output and alpha + fg at plate size; each writer its Processed +
         * Comp planes, its resize scratch back, its post scratch and the
         * encoder it runs */
        r->frames_in_flight = nin + nout;
        r->writers = nwr;
        r->hint_bytes *= nrd;
        r->io_bytes += (int64_t)(nin + nout) * io;
        r->decoded_bytes = (int64_t)nrd * (4 * F + CK_PNG_READ_BYTES_PER_PIXEL) * P + video_in;
        r->resize_bytes = (int64_t)nrd * pre + (int64_t)nwr * post;
        r->output_bytes = (int64_t)nout * 4 * P * F + (int64_t)nwr * 7 * P * F;
        r->post_bytes = (int64_t)nwr * (int64_t)post_scratch;
        r->encode_bytes = (int64_t)nwr * (exr_encode_bytes(w) + comp_png_encode_bytes(w, h)) +
                          video_out_bytes(ro->video_out, w, h, nwr);
        const ckey_post_options *po = &ro->shot.post;
        if (sm.device_memory && ro->shot.frame_path == CKEY_FRAME_PATH_DEVICE &&
            !(po->despeckle && po->despeckle_mode != CKEY_DESPECKLE_OPENCV)) {
            /* the device frame path (shot.c, pixel/devframe.h): in slots hold the
             * decoded plate + hint (and a made hint; packed samples, which
             * replace the floats, take at most as much, 16 bytes a pixel,
             * a PNG's file and rows included for the usual plates;
             * not counted: a clip mixing packed and float frames holds both), out slots alpha, fg,
             * Processed and Comp as the pass files store them (HALF and 8-bit:
             * ckey_sink_open_passes takes them so); the resizes and the post run in the
             * ck_devframes (ck_shot_pipelines a session); the readers and
             * writers hold none of theirs */
            int64_t dev = 0, host = 0;
            ck_devframe_bytes(w, h, S, back, &dev, &host);
            if (dev < 0)
                return ck_fail(err, CKEY_ERR_INVALID_ARG, "plate %d x %d: cannot be resized to %d", (int)w, (int)h,
                               (int)S);
            r->io_bytes -= (int64_t)(nin + nout) * io;
            r->decoded_bytes = (int64_t)nin * (4 + (ro->auto_hint ? 1 : 0)) * P * F + video_in;
            const int64_t ndf = (int64_t)nsess * ck_shot_pipelines(&ro->shot); /* ck_devframes */
            r->resize_bytes = ndf * host;
            r->output_bytes = (int64_t)nout * (int64_t)ck_shot_out_slot_bytes(1, w, h);
            r->post_bytes = 0;
            r->device_frame_bytes = ndf * dev;
        }
    }
    r->plate_bytes = r->decoded_bytes + r->hint_bytes + r->resize_bytes + r->output_bytes + r->post_bytes +
                     r->encode_bytes;
    /* a tracker (ckey key --mask) is resident beside the keyer for the whole run */
    r->track_bytes = ro->track_bytes;
    const int64_t rest = r->model_bytes + r->io_bytes + r->plate_bytes + r->device_frame_bytes + r->track_bytes;
    r->min_budget_bytes = rest + sm.plan.min_budget_bytes * nsess;
    if (sopt.memory_budget > 0) {
        /* the session's schedule is chosen for what the budget leaves it (the
         * other parts do not depend on the schedule) */
        r->session_budget = (sopt.memory_budget - rest) / nsess;
        if (r->session_budget > 0) {
            ckey_session_options ss = sopt;
            ss.memory_budget = r->session_budget;
            if ((st = ck_plan_session_memory(m, &ss, &sm, err)) != CKEY_OK) return st;
            r->session = sm.plan;
            r->session.weight_bytes *= nsess;
            r->session.arena_bytes *= nsess;
            r->session.workspace_bytes *= nsess;
            r->session.peak_bytes *= nsess;
        }
    }
    r->total_bytes = r->session.peak_bytes + rest;
    r->host_bytes = r->total_bytes - (sm.device_memory ? r->session.peak_bytes : 0) - r->device_frame_bytes -
                    ro->track_device_bytes;
    if (ro->host_limit > 0) {
        r->host_limit = ro->host_limit;
    } else if (ro->host_limit == 0) {
        const int64_t avail = ckey_host_memory_available();
        r->host_limit = avail - avail / 10;
    }

    char parts[320], need[32], have[32];
    ckey_run_memory_parts(r, parts, sizeof parts);
    ck_format_bytes(need, sizeof need, r->total_bytes);
    if (sopt.memory_budget > 0 && r->total_bytes > sopt.memory_budget) {
        char least[32];
        return ck_fail(err, CKEY_ERR_BUDGET,
                       "a %d x %d plate at S = %d needs %s (%s), over the budget of %s; the smallest budget "
                       "for it is %s (%lld bytes)",
                       (int)w, (int)h, (int)S, need, parts, ck_format_bytes(have, sizeof have, sopt.memory_budget),
                       ck_format_bytes(least, sizeof least, r->min_budget_bytes), (long long)r->min_budget_bytes);
    }
    if (r->host_limit > 0 && r->host_bytes > r->host_limit) {
        char host[32], avail[32];
        ck_format_bytes(host, sizeof host, r->host_bytes);
        ck_format_bytes(have, sizeof have, r->host_limit);
        if (ro->host_limit == 0)
            return ck_fail(err, CKEY_ERR_BUDGET,
                           "a %d x %d plate at S = %d needs %s of host memory (%s), more than the %s "
                           "available (90 %% of the %s the system has available now)",
                           (int)w, (int)h, (int)S, host, parts, have,
                           ck_format_bytes(avail, sizeof avail, ckey_host_memory_available()));
        return ck_fail(err, CKEY_ERR_BUDGET,
                       "a %d x %d plate at S = %d needs %s of host memory (%s), more than the %s allowed",
                       (int)w, (int)h, (int)S, host, parts, have);
    }
    return CKEY_OK;
}

ckey_status ckey_source_plate_size(const ckey_source *src, const uint8_t *plan, int32_t *width,
                                   int32_t *height, int64_t *index, ckey_error *err) {
    if (width) *width = 0;
    if (height) *height = 0;
    if (index) *index = -1;
    if (!src || !width || !height || src->count < 0 || (src->count > 0 && !src->frames))
        return ck_fail(err, CKEY_ERR_INVALID_ARG, "ckey_source_plate_size: bad arguments");
    if (!src->probe) return CKEY_OK;
    int64_t best = 0;
    for (int64_t i = 0; i < src->count; i++) {
        if (plan && plan[i] != CKEY_SHOT_KEY) continue;
        int32_t fw = 0, fh = 0;
        ckey_error e;
        ck_error_clear(&e);
        if (src->probe(src->self, i, &fw, &fh, &e) != CKEY_OK || fw < 1 || fh < 1) continue;
        if ((int64_t)fw * fh > best) {
            best = (int64_t)fw * fh;
            *width = fw;
            *height = fh;
            if (index) *index = i;
        }
    }
    return CKEY_OK;
}
