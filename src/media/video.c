/*
 * Video in and out through FFmpeg (libavformat / libavcodec / libswscale).
 *
 * Reading. ckey opens the file itself and hands libavformat a custom
 * AVIOContext (or one over a memory buffer, for the fuzz target), so a path is
 * never parsed as an FFmpeg URL ("concat:", "http:"); the demuxer's io_open is
 * replaced by one that refuses, so no format can pull in other files (HLS, dref
 * atoms, image2 patterns), and only the container formats of a video workflow
 * are probed. The frame-size cap goes to the decoder as max_pixels, which
 * libavcodec checks before it allocates a picture; ckey checks the sides and
 * the container's frame count. The decoder runs with AV_EF_EXPLODE and every
 * frame's corruption flags are checked, so a damaged frame is an error naming
 * it, not a concealed picture.
 *
 * Colour. libswscale 5.1 places >8-bit samples in its 16-bit outputs by
 * shifting, which leaves a gain error of up to 0.4% (10-bit limited-range
 * white reads 0.9962; full-range 1023 reads 0.9990), the size of an 8-bit
 * step; even RGB24 -> RGBA64 came back up to 1/255 off (measured). So ckey converts planar
 * formats itself with the textbook formulas (direct_convert), and swscale only
 * repacks the other layouts into a planar one of the same family (exact
 * unscaled copies). The writer likewise computes its YUV samples itself, with
 * the same formulas and chroma siting the reader assumes.
 *
 * Writing. Frames are converted to BT.709 limited-range YUV and encoded
 * (prores_ks or libx264) into a container written through our own FILE* to
 * ckey_temp_path(path); close drains the encoder, writes the trailer, fsyncs and
 * renames. A ProRes writer opened with ck_video_writer_open_coded codes
 * frames apart from the muxer: ProRes is intra-only, so several threads may
 * each convert and code a frame at once, on encoder contexts of their own
 * (the "coders", made as needed and reused), and the packets are muxed
 * afterwards, one thread in frame order; the bytes are those of one encoder
 * coding the frames in turn.
 *
 * FFmpeg's log level is process-wide; only ckey_video_set_log_level touches
 * it, for programs to call once (see ckey.h).
 */
#include <errno.h>
#include <math.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/stat.h>
#include <unistd.h>

#include "ckey_media.h"
#include "core/core.h"
#include "media/image.h"
#include "media/video.h"

#ifndef CK_HAVE_FFMPEG

static ckey_status no_ffmpeg(ckey_error *err, const char *what) {
    return ck_fail(err, CKEY_ERR_UNSUPPORTED, "%s: ckey was built without FFmpeg (video support)",
                   what ? what : "(null)");
}

ckey_status ck_video_reader_open_memory(const void *data, size_t size, const char *label,
                                        int32_t threads, int64_t max_pixels,
                                        ckey_video_reader **out, ckey_error *err) {
    (void)data;
    (void)size;
    (void)threads;
    (void)max_pixels;
    if (out) *out = NULL;
    return no_ffmpeg(err, label ? label : "(memory)");
}

ckey_status ckey_video_reader_open(const char *path, int32_t threads, ckey_video_reader **out,
                                   ckey_error *err) {
    (void)threads;
    if (out) *out = NULL;
    return no_ffmpeg(err, path);
}

void ckey_video_reader_free(ckey_video_reader *r) { (void)r; }

ckey_status ckey_video_reader_get_info(const ckey_video_reader *r, ckey_video_info *info) {
    (void)r;
    if (info) memset(info, 0, sizeof *info);
    return CKEY_ERR_UNSUPPORTED;
}

ckey_status ckey_video_read_frame(ckey_video_reader *r, int64_t index, float *rgb, float *alpha,
                                  int32_t *eof, ckey_error *err) {
    (void)r;
    (void)index;
    (void)rgb;
    (void)alpha;
    (void)eof;
    return no_ffmpeg(err, "ckey_video_read_frame");
}

ckey_status ckey_video_read_hint(ckey_video_reader *r, int64_t index, float *hint, int32_t *eof,
                                 ckey_error *err) {
    (void)r;
    (void)index;
    (void)hint;
    (void)eof;
    return no_ffmpeg(err, "ckey_video_read_hint");
}

ckey_status ck_video_read_packed(ckey_video_reader *r, int64_t index, ckey_image_kind kind,
                                 ckey_packed_image *pk, int32_t *eof, ckey_error *err) {
    (void)r;
    (void)index;
    (void)kind;
    (void)pk;
    if (eof) *eof = 0;
    return no_ffmpeg(err, "ck_video_read_packed");
}

ckey_status ck_video_reader_convert_threads(ckey_video_reader *r, int threads, ckey_error *err) {
    (void)r;
    (void)threads;
    return no_ffmpeg(err, "ck_video_reader_convert_threads");
}

ckey_status ckey_video_writer_open(const char *path, const ckey_video_writer_options *o,
                                   ckey_video_writer **out, ckey_error *err) {
    (void)o;
    if (out) *out = NULL;
    return no_ffmpeg(err, path);
}

ckey_status ckey_video_write_frame(ckey_video_writer *w, const float *rgb, const float *alpha,
                                   ckey_error *err) {
    (void)w;
    (void)rgb;
    (void)alpha;
    return no_ffmpeg(err, "ckey_video_write_frame");
}

ckey_status ck_video_write_frame_on(ckey_video_writer *w, ck_pool *pool, const float *rgb,
                                    const float *alpha, ckey_error *err) {
    (void)pool;
    return ckey_video_write_frame(w, rgb, alpha, err);
}

ckey_status ckey_video_writer_close(ckey_video_writer *w, ckey_error *err) {
    (void)w;
    return no_ffmpeg(err, "ckey_video_writer_close");
}

ckey_status ck_video_writer_open_coded(const char *path, const ckey_video_writer_options *o,
                                       ckey_video_writer **out, ckey_error *err) {
    return ckey_video_writer_open(path, o, out, err);
}

int ck_video_codec_intra(ckey_video_codec codec) {
    return codec == CKEY_VIDEO_PRORES_4444 || codec == CKEY_VIDEO_PRORES_422HQ;
}

ckey_status ck_video_code_frame(ckey_video_writer *w, const void *key, ck_pool *pool,
                                const float *rgb, const float *alpha, ckey_error *err) {
    (void)w, (void)key, (void)pool, (void)rgb, (void)alpha;
    return no_ffmpeg(err, "ck_video_code_frame");
}

ckey_status ck_video_mux_frame(ckey_video_writer *w, const void *key, int *muxed, ckey_error *err) {
    (void)w, (void)key;
    if (muxed) *muxed = 0;
    return no_ffmpeg(err, "ck_video_mux_frame");
}

void ckey_video_writer_free(ckey_video_writer *w) { (void)w; }

void ckey_video_set_log_level(int32_t verbose) { (void)verbose; }

#else /* CK_HAVE_FFMPEG */

#include <libavcodec/avcodec.h>
#include <libavformat/avformat.h>
#include <libavutil/imgutils.h>
#include <libavutil/opt.h>
#include <libavutil/pixdesc.h>
#include <libswscale/swscale.h>

#define CK_AVIO_BUF 65536

/* Demuxers a clip may come in (matched against the probed format's names). */
static const char format_whitelist[] =
    "mov,mp4,m4a,3gp,3g2,mj2,matroska,webm,avi,mxf,mpegts,mpeg,h264,hevc,m4v,ivf,nut,flv,"
    "yuv4mpegpipe";

/* A decoder that swallows this many packets without a frame is given up on. */
#define CK_MAX_PACKETS_PER_FRAME 100000

/* The fallback repacks without scaling or chroma resampling (same layout
 * family); the flags only matter if swscale ever has to interpolate. */
#define CK_SWS_FLAGS (SWS_BICUBIC | SWS_ACCURATE_RND | SWS_FULL_CHR_H_INT | SWS_FULL_CHR_H_INP)

static void av_message(int code, char *buf, size_t cap) {
    if (av_strerror(code, buf, cap) < 0) snprintf(buf, cap, "FFmpeg error %d", code);
}

void ckey_video_set_log_level(int32_t verbose) {
    av_log_set_level(verbose <= 0 ? AV_LOG_QUIET : verbose == 1 ? AV_LOG_WARNING : AV_LOG_INFO);
}

/* ============================================================= reading */

typedef struct source {
    FILE *file; /* or the memory range */
    const unsigned char *mem;
    size_t size, pos;
    int io_errno;
} source;

static int source_read(void *opaque, uint8_t *buf, int n) {
    source *s = opaque;
    if (n <= 0) return 0;
    if (s->file) {
        const size_t got = fread(buf, 1, (size_t)n, s->file);
        if (got == 0) {
            if (ferror(s->file)) {
                s->io_errno = errno ? errno : EIO;
                return AVERROR(EIO);
            }
            return AVERROR_EOF;
        }
        return (int)got;
    }
    const size_t left = s->size - s->pos;
    if (left == 0) return AVERROR_EOF;
    const size_t len = (size_t)n < left ? (size_t)n : left;
    memcpy(buf, s->mem + s->pos, len);
    s->pos += len;
    return (int)len;
}

static int64_t source_seek(void *opaque, int64_t offset, int whence) {
    source *s = opaque;
    whence &= ~AVSEEK_FORCE;
    if (whence == AVSEEK_SIZE) return (int64_t)s->size;
    int64_t base;
    if (whence == SEEK_SET) base = 0;
    else if (whence == SEEK_CUR) base = s->file ? (int64_t)ftello(s->file) : (int64_t)s->pos;
    else if (whence == SEEK_END) base = (int64_t)s->size;
    else return AVERROR(EINVAL);
    if ((offset > 0 && base > INT64_MAX - offset)) return AVERROR(EINVAL);
    const int64_t to = base + offset;
    if (to < 0 || to > (int64_t)s->size) return AVERROR(EINVAL);
    if (s->file) {
        if (fseeko(s->file, (off_t)to, SEEK_SET) != 0) return AVERROR(errno ? errno : EIO);
    } else {
        s->pos = (size_t)to;
    }
    return to;
}

/* The demuxer may not open anything besides the file it was given. */
static int refuse_io_open(struct AVFormatContext *s, AVIOContext **pb, const char *url, int flags,
                          AVDictionary **options) {
    (void)s;
    (void)url;
    (void)flags;
    (void)options;
    *pb = NULL;
    return AVERROR(EPERM);
}

struct ckey_video_reader {
    char *label;                /* the path, for messages; owned */
    source src;
    AVIOContext *pb;            /* custom I/O over src; its buffer is av_malloc'd */
    AVFormatContext *fmt;
    AVCodecContext *dec;
    AVPacket *pkt;
    AVFrame *frame;             /* holds frame `cur` */
    struct SwsContext *sws;     /* fallback repacker, made on first use */
    int sws_fmt;                /* its source format (-1: none) */
    AVFrame *planar;            /* fallback: frame `cur` repacked to a planar format */
    ck_pool *pool;              /* the conversion's threads (NULL: the caller's alone) */
    float *rowbuf;              /* direct path: two chroma rows a pool thread, [threads, 2, w] */
    int32_t *cx0, *cx1;         /* direct path: per column, the chroma samples to mix */
    float *cxw;                 /*   and the weight of the second */
    int stream;
    int64_t max_pixels;
    int64_t next;               /* index the decoder's next frame gets */
    int64_t cur;                /* index held in `frame`, -1 when none */
    int flushing;               /* the demuxer ended; the decoder was sent its NULL packet */
    int ended;                  /* the decoder is drained: `next` frames in all */
    ckey_video_info info;
};

static ckey_status frame_fail(const ckey_video_reader *r, ckey_error *err, ckey_status st,
                              const char *what, int code) {
    char msg[128];
    av_message(code, msg, sizeof msg);
    return ck_fail(err, st, "%s: frame %lld: %s: %s", r->label, (long long)r->next, what, msg);
}

/* Sides and pixels within the caps; 0 and a message otherwise. */
static int size_ok(const ckey_video_reader *r, int64_t w, int64_t h, char *msg, size_t cap) {
    if (w < 1 || h < 1) {
        snprintf(msg, cap, "invalid frame size %lld x %lld", (long long)w, (long long)h);
        return 0;
    }
    if (w > CKEY_IMAGE_MAX_SIDE || h > CKEY_IMAGE_MAX_SIDE) {
        snprintf(msg, cap, "%lld x %lld exceeds the %d-pixel side limit", (long long)w,
                 (long long)h, CKEY_IMAGE_MAX_SIDE);
        return 0;
    }
    if (w * h > r->max_pixels) {
        snprintf(msg, cap, "%lld x %lld exceeds the limit of %lld pixels", (long long)w,
                 (long long)h, (long long)r->max_pixels);
        return 0;
    }
    return 1;
}

/* A frame the decoder returned: vet it and make it frame `next`. */
static ckey_status accept_frame(ckey_video_reader *r, ckey_error *err) {
    const AVFrame *f = r->frame;
    char msg[160];
    if (r->next >= CKEY_VIDEO_MAX_FRAMES)
        return ck_fail(err, CKEY_ERR_UNSUPPORTED, "%s: more than %lld frames", r->label,
                       (long long)CKEY_VIDEO_MAX_FRAMES);
    if (!size_ok(r, f->width, f->height, msg, sizeof msg))
        return ck_fail(err, CKEY_ERR_UNSUPPORTED, "%s: frame %lld: %s", r->label,
                       (long long)r->next, msg);
    if (r->info.width && (f->width != r->info.width || f->height != r->info.height))
        return ck_fail(err, CKEY_ERR_UNSUPPORTED,
                       "%s: frame %lld: size changed from %d x %d to %d x %d", r->label,
                       (long long)r->next, (int)r->info.width, (int)r->info.height, f->width,
                       f->height);
    if (f->decode_error_flags || (f->flags & AV_FRAME_FLAG_CORRUPT))
        return ck_fail(err, CKEY_ERR_FORMAT, "%s: frame %lld: the decoder reports it corrupt",
                       r->label, (long long)r->next);
    if (!av_pix_fmt_desc_get((enum AVPixelFormat)f->format))
        return ck_fail(err, CKEY_ERR_FORMAT, "%s: frame %lld: no pixel format", r->label,
                       (long long)r->next);
    r->cur = r->next++;
    return CKEY_OK;
}

/* Decode the next frame into r->frame, or set r->ended. */
static ckey_status decode_next(ckey_video_reader *r, ckey_error *err) {
    int64_t packets = 0;
    for (;;) {
        int ret = avcodec_receive_frame(r->dec, r->frame);
        if (ret >= 0) return accept_frame(r, err);
        r->cur = -1;
        if (ret == AVERROR_EOF) {
            r->ended = 1;
            return CKEY_OK;
        }
        if (ret != AVERROR(EAGAIN)) return frame_fail(r, err, CKEY_ERR_FORMAT, "decode error", ret);
        if (r->flushing)
            return ck_fail(err, CKEY_ERR_INTERNAL, "%s: frame %lld: the decoder stalled",
                           r->label, (long long)r->next);
        if (++packets > CK_MAX_PACKETS_PER_FRAME)
            return ck_fail(err, CKEY_ERR_FORMAT, "%s: frame %lld: no picture in %d packets",
                           r->label, (long long)r->next, CK_MAX_PACKETS_PER_FRAME);
        ret = av_read_frame(r->fmt, r->pkt);
        if (ret == AVERROR_EOF) {
            r->flushing = 1;
            ret = avcodec_send_packet(r->dec, NULL);
            if (ret < 0 && ret != AVERROR_EOF)
                return frame_fail(r, err, CKEY_ERR_FORMAT, "decode error", ret);
            continue;
        }
        if (ret < 0) {
            if (r->src.io_errno)
                return ck_fail(err, CKEY_ERR_IO, "%s: frame %lld: read error: %s", r->label,
                               (long long)r->next, strerror(r->src.io_errno));
            return frame_fail(r, err, CKEY_ERR_FORMAT, "cannot read the next packet", ret);
        }
        if (r->pkt->stream_index != r->stream) {
            av_packet_unref(r->pkt);
            continue;
        }
        if (r->pkt->flags & AV_PKT_FLAG_CORRUPT) {
            av_packet_unref(r->pkt);
            return ck_fail(err, CKEY_ERR_FORMAT, "%s: frame %lld: truncated or corrupt packet",
                           r->label, (long long)r->next);
        }
        ret = avcodec_send_packet(r->dec, r->pkt);
        av_packet_unref(r->pkt);
        if (ret < 0 && ret != AVERROR(EAGAIN))
            return frame_fail(r, err, CKEY_ERR_FORMAT, "decode error", ret);
    }
}

/* Back to the first frame: seek the demuxer to the stream's start (by time,
 * else by byte for raw streams) and reset the decoder. */
static ckey_status rewind_reader(ckey_video_reader *r, int64_t index, ckey_error *err) {
    const AVStream *st = r->fmt->streams[r->stream];
    const int64_t start = st->start_time != AV_NOPTS_VALUE ? st->start_time : 0;
    int ret = avformat_seek_file(r->fmt, r->stream, INT64_MIN, start, start, 0);
    if (ret < 0) ret = av_seek_frame(r->fmt, r->stream, 0, AVSEEK_FLAG_BYTE | AVSEEK_FLAG_BACKWARD);
    if (ret < 0) {
        char msg[128];
        av_message(ret, msg, sizeof msg);
        return ck_fail(err, CKEY_ERR_UNSUPPORTED,
                       "%s: cannot rewind to frame %lld (frames are read in order): %s",
                       r->label, (long long)index, msg);
    }
    avcodec_flush_buffers(r->dec);
    av_frame_unref(r->frame);
    r->next = 0;
    r->cur = -1;
    r->flushing = 0;
    r->ended = 0;
    return CKEY_OK;
}

/* Make frame `index` the current one. *at_end = 1 when the clip ends first. */
static ckey_status goto_frame(ckey_video_reader *r, int64_t index, int *at_end, ckey_error *err) {
    *at_end = 0;
    if (index == r->cur) return CKEY_OK;
    if (index < r->next) {
        ckey_status st = rewind_reader(r, index, err);
        if (st != CKEY_OK) return st;
    }
    while (r->cur != index) {
        if (r->ended) {
            if (r->info.frame_count > r->next)
                return ck_fail(err, CKEY_ERR_FORMAT,
                               "%s: truncated: the clip ends after %lld frames, its header "
                               "declares %lld (frame %lld asked for)",
                               r->label, (long long)r->next, (long long)r->info.frame_count,
                               (long long)index);
            *at_end = 1;
            return CKEY_OK;
        }
        ckey_status st = decode_next(r, err);
        if (st != CKEY_OK) {
            /* the stream position is unknown now: start over on the next call */
            r->cur = -1;
            r->next = INT64_MAX;
            return st;
        }
    }
    return CKEY_OK;
}

/* How a frame's samples become RGB. */
typedef struct color {
    int rgb;            /* RGB (or gray-as-is) samples: no matrix */
    int gray;           /* one component: R = G = B = Y */
    double kr, kb;      /* luma weights of the matrix */
    int full;           /* full (JPEG) range */
    const char *name;
} color;

/* The YUV matrix and range of a frame: its own tags, else BT.709 for HD and
 * BT.601 below, limited range unless a yuvj format. Gray is full range
 * unless tagged limited (FFmpeg's convention). */
static ckey_status frame_color(const ckey_video_reader *r, const AVFrame *f, color *c,
                               ckey_error *err) {
    const AVPixFmtDescriptor *d = av_pix_fmt_desc_get((enum AVPixelFormat)f->format);
    memset(c, 0, sizeof *c);
    if (d->flags & AV_PIX_FMT_FLAG_RGB) {
        c->rgb = 1;
        c->full = 1;
        c->name = "rgb";
        return CKEY_OK;
    }
    if (d->nb_components < 3) {
        c->gray = 1;
        c->full = f->color_range != AVCOL_RANGE_MPEG;
        c->name = "gray";
        return CKEY_OK;
    }
    enum AVColorSpace cs = f->colorspace;
    if (cs == AVCOL_SPC_UNSPECIFIED || cs == AVCOL_SPC_RESERVED)
        cs = (f->width >= 1280 || f->height >= 720) ? AVCOL_SPC_BT709 : AVCOL_SPC_SMPTE170M;
    switch (cs) {
    case AVCOL_SPC_BT709: c->kr = 0.2126, c->kb = 0.0722; break;
    case AVCOL_SPC_FCC: c->kr = 0.30, c->kb = 0.11; break;
    case AVCOL_SPC_BT470BG:
    case AVCOL_SPC_SMPTE170M: c->kr = 0.299, c->kb = 0.114; break;
    case AVCOL_SPC_SMPTE240M: c->kr = 0.212, c->kb = 0.087; break;
    case AVCOL_SPC_BT2020_NCL: c->kr = 0.2627, c->kb = 0.0593; break;
    default: {
        const char *n = av_color_space_name(cs);
        return ck_fail(err, CKEY_ERR_UNSUPPORTED,
                       "%s: frame %lld: colour matrix %s is not supported", r->label,
                       (long long)r->cur, n ? n : "(unknown)");
    }
    }
    c->name = av_color_space_name(cs);
    const enum AVPixelFormat pf = (enum AVPixelFormat)f->format;
    c->full = f->color_range == AVCOL_RANGE_JPEG || pf == AV_PIX_FMT_YUVJ420P ||
              pf == AV_PIX_FMT_YUVJ422P || pf == AV_PIX_FMT_YUVJ444P ||
              pf == AV_PIX_FMT_YUVJ440P || pf == AV_PIX_FMT_YUVJ411P;
    return CKEY_OK;
}

/*
 * The formats ckey converts itself: every component in a plane of its own,
 * 1..16 bits in whole bytes (any chroma subsampling, either endianness):
 * yuv(a)4xxp*, gbr(a)p*, gray*. libswscale (5.1) scales >8-bit samples by
 * shifts, which leaves a gain error up to 0.4% (10-bit limited-range white
 * comes out 0.9962), so these exact formulas replace it where they can;
 * packed, semi-planar, palette and float formats go through swscale.
 */
static int direct_format(const AVPixFmtDescriptor *d) {
    if (d->flags & (AV_PIX_FMT_FLAG_PAL | AV_PIX_FMT_FLAG_BITSTREAM | AV_PIX_FMT_FLAG_HWACCEL |
                    AV_PIX_FMT_FLAG_FLOAT | AV_PIX_FMT_FLAG_BAYER))
        return 0;
    if (d->nb_components != 1 && d->nb_components != 3 && d->nb_components != 4) return 0;
    if (d->nb_components > 1 && !(d->flags & AV_PIX_FMT_FLAG_PLANAR)) return 0;
    unsigned planes = 0;
    for (int c = 0; c < d->nb_components; c++) {
        const AVComponentDescriptor *k = &d->comp[c];
        if (k->depth < 8 || k->depth > 16 || k->depth != d->comp[0].depth || k->shift ||
            k->offset || k->step != (k->depth > 8 ? 2 : 1) || k->plane < 0 || k->plane > 3 ||
            (planes & (1u << k->plane)))
            return 0;
        planes |= 1u << k->plane;
    }
    return 1;
}

static inline unsigned sample_at(const uint8_t *row, int x, int wide, int be) {
    if (!wide) return row[x];
    const uint8_t *p = row + 2 * (size_t)x;
    return be ? (unsigned)p[0] << 8 | p[1] : (unsigned)p[1] << 8 | p[0];
}

static inline float clamp01(double v) { return v <= 0.0 ? 0.0f : v >= 1.0 ? 1.0f : (float)v; }

/* Chroma sample position for luma coordinate p, as (index, weight) of a
 * linear interpolation between index and index + 1 of n samples; `centred`:
 * chroma sits between its luma samples, else on the first of them. */
static void chroma_tap(int p, int log2s, int centred, int n, int32_t *i0, int32_t *i1, float *t) {
    const double s = (double)(1 << log2s);
    const double u = ((double)p - (centred ? (s - 1) / 2 : 0.0)) / s;
    const double fl = floor(u);
    int a = (int)fl, b = a + 1;
    *t = (float)(u - fl);
    if (a < 0) a = 0;
    if (b < 0) b = 0;
    if (a > n - 1) a = n - 1;
    if (b > n - 1) b = n - 1;
    *i0 = a;
    *i1 = b;
}

/* Where a conversion writes one component: a float plane [h, w], or 16-bit
 * samples `step` apart (v -> round(65535 v), v in [0, 1]); p NULL: not
 * wanted. */
typedef struct comp_out {
    void *p;
    int step; /* 0: floats */
} comp_out;

static inline void put_out(const comp_out *o, size_t i, float v) {
    if (!o->p) return;
    if (o->step) ((uint16_t *)o->p)[i * (size_t)o->step] = (uint16_t)(v * 65535.0f + 0.5f);
    else ((float *)o->p)[i] = v;
}

/* One frame's conversion, split by rows over the reader's pool (the chroma
 * taps per column are the frame's, shared; each thread mixes its chroma
 * rows in its own part of rowbuf). */
typedef struct conv_job {
    ckey_video_reader *r;
    const AVFrame *f;
    const AVPixFmtDescriptor *d;
    const color *col;
    comp_out out[4];             /* R, G, B, A */
    int fill_alpha;              /* out[3] wanted, the frame has none: 1.0 */
    int wide, be, alpha_c, lh, cw, ch, vcentred, vbottom;
    double maxv, yoff, ysc, coff, csc, rcr, gcb, gcr, bcb;
} conv_job;

/*
 * Rows [y0, y1) of the frame into the outputs by the direct path. YUV:
 * chroma upsampled linearly at its sited position (frame's chroma_location;
 * unspecified = MPEG-2's "left": co-sited horizontally, centred vertically),
 * then
 *   Y' = (Y - 16 * 2^(n-8)) / (219 * 2^(n-8)), C' = (C - 2^(n-1)) / (224 * 2^(n-8))
 * (full range: Y / (2^n - 1), (C - 2^(n-1)) / (2^n - 1)) and
 *   R = Y' + 2(1-Kr) Cr', B = Y' + 2(1-Kb) Cb', G = (Y' - Kr R - Kb B) / Kg.
 */
static void conv_rows(void *ctx, int64_t y0, int64_t y1, int thread) {
    const conv_job *c = ctx;
    const AVFrame *f = c->f;
    const AVComponentDescriptor *k = c->d->comp;
    const int w = f->width, wide = c->wide, be = c->be;
    const size_t W = (size_t)w;
    const comp_out *oR = &c->out[0], *oG = &c->out[1], *oB = &c->out[2], *oA = &c->out[3];
    const int rgb_wanted = oR->p || oG->p || oB->p;
#define ROW(cc, yy) (f->data[k[cc].plane] + (ptrdiff_t)(yy) * f->linesize[k[cc].plane])
    float *cbrow = c->r->rowbuf + (size_t)thread * 2 * W, *crrow = cbrow + W;
    for (int64_t yy = y0; yy < y1; yy++) {
        const int y = (int)yy;
        const size_t at = (size_t)y * W;
        if (oA->p && c->alpha_c >= 0) {
            const uint8_t *ra = ROW(c->alpha_c, y);
            for (int x = 0; x < w; x++) put_out(oA, at + x, (float)(sample_at(ra, x, wide, be) / c->maxv));
        } else if (oA->p && c->fill_alpha) {
            for (int x = 0; x < w; x++) put_out(oA, at + x, 1.0f);
        }
        if (!rgb_wanted) continue;
        if (c->col->rgb) {
            const comp_out *o[3] = {oR, oG, oB};
            for (int cc = 0; cc < 3; cc++) {
                if (!o[cc]->p) continue;
                const uint8_t *row = ROW(cc, y);
                for (int x = 0; x < w; x++) put_out(o[cc], at + x, (float)(sample_at(row, x, wide, be) / c->maxv));
            }
            continue;
        }
        if (c->col->gray) {
            const uint8_t *row = ROW(0, y);
            for (int x = 0; x < w; x++) {
                const float v = clamp01(((double)sample_at(row, x, wide, be) - c->yoff) * c->ysc);
                put_out(oR, at + x, v);
                put_out(oG, at + x, v);
                put_out(oB, at + x, v);
            }
            continue;
        }
        int32_t j0, j1;
        float t;
        if (c->vbottom && c->lh) {
            /* chroma row j sits on luma row j * 2^lh + 2^lh - 1 */
            chroma_tap(y - ((1 << c->lh) - 1), c->lh, 0, c->ch, &j0, &j1, &t);
        } else {
            chroma_tap(y, c->lh, c->vcentred, c->ch, &j0, &j1, &t);
        }
        const uint8_t *b0 = ROW(1, j0), *b1 = ROW(1, j1), *r0 = ROW(2, j0), *r1 = ROW(2, j1);
        for (int i = 0; i < c->cw; i++) {
            cbrow[i] = (1 - t) * (float)sample_at(b0, i, wide, be) + t * (float)sample_at(b1, i, wide, be);
            crrow[i] = (1 - t) * (float)sample_at(r0, i, wide, be) + t * (float)sample_at(r1, i, wide, be);
        }
        const uint8_t *yr = ROW(0, y);
        const int32_t *cx0 = c->r->cx0, *cx1 = c->r->cx1;
        const float *cxw = c->r->cxw;
        for (int x = 0; x < w; x++) {
            const int i0 = cx0[x], i1 = cx1[x];
            const float u = cxw[x];
            const double cb = ((1 - u) * cbrow[i0] + u * cbrow[i1] - c->coff) * c->csc;
            const double cr = ((1 - u) * crrow[i0] + u * crrow[i1] - c->coff) * c->csc;
            const double yv = ((double)sample_at(yr, x, wide, be) - c->yoff) * c->ysc;
            put_out(oR, at + x, clamp01(yv + c->rcr * cr));
            put_out(oG, at + x, clamp01(yv - c->gcb * cb - c->gcr * cr));
            put_out(oB, at + x, clamp01(yv + c->bcb * cb));
        }
    }
#undef ROW
}

/* The frame `f` (a direct format) into the outputs, its rows over the
 * reader's pool. */
static void direct_convert(ckey_video_reader *r, const AVFrame *f, const color *col, const comp_out out[4],
                           int fill_alpha) {
    conv_job c;
    memset(&c, 0, sizeof c);
    c.r = r;
    c.f = f;
    c.col = col;
    c.d = av_pix_fmt_desc_get((enum AVPixelFormat)f->format);
    memcpy(c.out, out, sizeof c.out);
    c.fill_alpha = fill_alpha;
    const int w = f->width, h = f->height, n = c.d->comp[0].depth;
    c.wide = n > 8;
    c.be = (c.d->flags & AV_PIX_FMT_FLAG_BE) != 0;
    c.maxv = (double)((1u << n) - 1);
    c.alpha_c = (c.d->flags & AV_PIX_FMT_FLAG_ALPHA) ? c.d->nb_components - 1 : -1;
    const double unit = ldexp(1.0, n - 8);
    c.yoff = col->full ? 0.0 : 16.0 * unit;
    c.ysc = col->full ? 1.0 / c.maxv : 1.0 / (219.0 * unit);
    if (!col->rgb && !col->gray) {
        c.coff = ldexp(1.0, n - 1);
        c.csc = col->full ? 1.0 / c.maxv : 1.0 / (224.0 * unit);
        const double kr = col->kr, kb = col->kb, kg = 1.0 - kr - kb;
        c.rcr = 2 * (1 - kr);
        c.bcb = 2 * (1 - kb);
        c.gcb = c.bcb * kb / kg;
        c.gcr = c.rcr * kr / kg;
        const int lw = c.d->log2_chroma_w;
        c.lh = c.d->log2_chroma_h;
        c.cw = AV_CEIL_RSHIFT(w, lw);
        c.ch = AV_CEIL_RSHIFT(h, c.lh);
        const enum AVChromaLocation loc = f->chroma_location;
        const int hcentred = loc == AVCHROMA_LOC_CENTER || loc == AVCHROMA_LOC_TOP || loc == AVCHROMA_LOC_BOTTOM;
        c.vcentred = loc == AVCHROMA_LOC_UNSPECIFIED || loc == AVCHROMA_LOC_LEFT || loc == AVCHROMA_LOC_CENTER;
        c.vbottom = loc == AVCHROMA_LOC_BOTTOMLEFT || loc == AVCHROMA_LOC_BOTTOM;
        for (int x = 0; x < w; x++) chroma_tap(x, lw, hcentred, c.cw, &r->cx0[x], &r->cx1[x], &r->cxw[x]);
    }
    ck_pool_for(r->pool, h, 8, conv_rows, &c);
}

/* The planar format of the same family, chroma layout and alpha that a
 * fallback format is repacked into (8 or 16 bits). */
static enum AVPixelFormat planar_target(const AVPixFmtDescriptor *d) {
    const int deep = d->comp[0].depth > 8 || (d->flags & AV_PIX_FMT_FLAG_FLOAT);
    const int alpha = (d->flags & AV_PIX_FMT_FLAG_ALPHA) != 0;
    if (d->flags & (AV_PIX_FMT_FLAG_RGB | AV_PIX_FMT_FLAG_PAL | AV_PIX_FMT_FLAG_BAYER)) {
        if (alpha || (d->flags & AV_PIX_FMT_FLAG_PAL))
            return deep ? AV_PIX_FMT_GBRAP16 : AV_PIX_FMT_GBRAP;
        return deep ? AV_PIX_FMT_GBRP16 : AV_PIX_FMT_GBRP;
    }
    if (d->nb_components < 3) return deep ? AV_PIX_FMT_GRAY16 : AV_PIX_FMT_GRAY8;
    static const enum AVPixelFormat yuv[2][2][3][3] = {
        /* [deep][alpha][log2_chroma_h][log2_chroma_w]; AV_PIX_FMT_NONE: none */
        {{{AV_PIX_FMT_YUV444P, AV_PIX_FMT_YUV422P, AV_PIX_FMT_YUV411P},
          {AV_PIX_FMT_YUV440P, AV_PIX_FMT_YUV420P, AV_PIX_FMT_NONE},
          {AV_PIX_FMT_NONE, AV_PIX_FMT_NONE, AV_PIX_FMT_YUV410P}},
         {{AV_PIX_FMT_YUVA444P, AV_PIX_FMT_YUVA422P, AV_PIX_FMT_NONE},
          {AV_PIX_FMT_NONE, AV_PIX_FMT_YUVA420P, AV_PIX_FMT_NONE},
          {AV_PIX_FMT_NONE, AV_PIX_FMT_NONE, AV_PIX_FMT_NONE}}},
        {{{AV_PIX_FMT_YUV444P16, AV_PIX_FMT_YUV422P16, AV_PIX_FMT_NONE},
          {AV_PIX_FMT_YUV440P12, AV_PIX_FMT_YUV420P16, AV_PIX_FMT_NONE},
          {AV_PIX_FMT_NONE, AV_PIX_FMT_NONE, AV_PIX_FMT_NONE}},
         {{AV_PIX_FMT_YUVA444P16, AV_PIX_FMT_YUVA422P16, AV_PIX_FMT_NONE},
          {AV_PIX_FMT_NONE, AV_PIX_FMT_YUVA420P16, AV_PIX_FMT_NONE},
          {AV_PIX_FMT_NONE, AV_PIX_FMT_NONE, AV_PIX_FMT_NONE}}}};
    const int lw = d->log2_chroma_w, lh = d->log2_chroma_h;
    enum AVPixelFormat t = lw <= 2 && lh <= 2 ? yuv[deep][alpha][lh][lw] : AV_PIX_FMT_NONE;
    /* no planar twin: 4:4:4 keeps every sample */
    if (t == AV_PIX_FMT_NONE) t = yuv[deep][alpha][0][0];
    return t;
}

/*
 * The fallback for formats direct_format refuses (packed yuyv, semi-planar
 * nv12 / p010, packed RGB, palettes, float): swscale repacks frame `cur`
 * into the planar format of the same family (unscaled copies: 8-bit samples
 * stay exact, deeper ones are placed in 16 bits by shifting, which is exact
 * for limited-range video), and the direct path converts that.
 */
static ckey_status repack(ckey_video_reader *r, const AVFrame **out, ckey_error *err) {
    const AVFrame *f = r->frame;
    const AVPixFmtDescriptor *d = av_pix_fmt_desc_get((enum AVPixelFormat)f->format);
    const enum AVPixelFormat t = planar_target(d);
    if (!r->planar || r->planar->format != t) {
        av_frame_free(&r->planar);
        r->planar = av_frame_alloc();
        if (!r->planar) return ck_fail(err, CKEY_ERR_NOMEM, "%s: out of memory", r->label);
        r->planar->format = t;
        r->planar->width = f->width;
        r->planar->height = f->height;
        if (av_frame_get_buffer(r->planar, 0) < 0) {
            av_frame_free(&r->planar);
            return ck_fail(err, CKEY_ERR_NOMEM, "%s: out of memory for a %d x %d frame",
                           r->label, f->width, f->height);
        }
    }
    if (!r->sws || r->sws_fmt != f->format) {
        sws_freeContext(r->sws);
        r->sws = sws_getContext(f->width, f->height, (enum AVPixelFormat)f->format, f->width,
                                f->height, t, CK_SWS_FLAGS, NULL, NULL, NULL);
        r->sws_fmt = r->sws ? f->format : -1;
        if (!r->sws)
            return ck_fail(err, CKEY_ERR_UNSUPPORTED,
                           "%s: frame %lld: cannot convert pixel format %s", r->label,
                           (long long)r->cur, av_get_pix_fmt_name((enum AVPixelFormat)f->format));
    }
    const int h = sws_scale(r->sws, (const uint8_t *const *)f->data, f->linesize, 0, f->height,
                            r->planar->data, r->planar->linesize);
    if (h != f->height)
        return ck_fail(err, CKEY_ERR_INTERNAL, "%s: frame %lld: swscale converted %d of %d rows",
                       r->label, (long long)r->cur, h, f->height);
    r->planar->colorspace = f->colorspace;
    r->planar->color_range = f->color_range;
    r->planar->chroma_location = f->chroma_location;
    *out = r->planar;
    return CKEY_OK;
}

/* Frame `cur` into the outputs R, G, B, A (p NULL: skipped). hint != 0:
 * want[2] gets the hint (alpha unless absent or entirely opaque, else
 * blue); want[0], want[1], want[3] must then be unset. */
static ckey_status convert_to(ckey_video_reader *r, const comp_out want[4], int hint, ckey_error *err) {
    const AVFrame *f = r->frame;
    const size_t w = (size_t)f->width, h = (size_t)f->height;
    ckey_status st;
    if (!direct_format(av_pix_fmt_desc_get((enum AVPixelFormat)f->format))) {
        st = repack(r, &f, err);
        if (st != CKEY_OK) return st;
    }
    color col; /* of the planar frame: a palette has become RGB */
    st = frame_color(r, f, &col, err);
    if (st != CKEY_OK) return st;
    const AVPixFmtDescriptor *d = av_pix_fmt_desc_get((enum AVPixelFormat)f->format);
    const int has_alpha = (d->flags & AV_PIX_FMT_FLAG_ALPHA) != 0;
    comp_out out[4];
    memcpy(out, want, sizeof out);
    if (hint && has_alpha) {
        const AVComponentDescriptor *k = &d->comp[d->nb_components - 1];
        const int wide = k->depth > 8, be = (d->flags & AV_PIX_FMT_FLAG_BE) != 0;
        const unsigned maxv = (1u << k->depth) - 1;
        int opaque = 1;
        for (size_t y = 0; y < h && opaque; y++) {
            const uint8_t *row = f->data[k->plane] + (ptrdiff_t)y * f->linesize[k->plane];
            for (size_t x = 0; x < w; x++)
                if (sample_at(row, (int)x, wide, be) != maxv) {
                    opaque = 0;
                    break;
                }
        }
        if (!opaque) {
            out[3] = out[2];
            out[2].p = NULL;
        }
    }
    direct_convert(r, f, &col, out, !has_alpha);
    return CKEY_OK;
}

static void reader_close(ckey_video_reader *r) {
    ck_pool_free(r->pool);
    sws_freeContext(r->sws);
    av_frame_free(&r->planar);
    free(r->rowbuf);
    free(r->cx0);
    free(r->cx1);
    free(r->cxw);
    av_frame_free(&r->frame);
    av_packet_free(&r->pkt);
    avcodec_free_context(&r->dec);
    avformat_close_input(&r->fmt);
    if (r->pb) {
        av_freep(&r->pb->buffer);
        avio_context_free(&r->pb);
    }
    if (r->src.file) fclose(r->src.file);
    free(r->label);
    free(r);
}

void ckey_video_reader_free(ckey_video_reader *r) {
    if (r) reader_close(r);
}

/* Everything after the byte source is set up. */
static ckey_status reader_start(ckey_video_reader *r, int32_t threads, ckey_error *err) {
    char msg[160];
    int ret;
    unsigned char *buf = av_malloc(CK_AVIO_BUF);
    if (buf) r->pb = avio_alloc_context(buf, CK_AVIO_BUF, 0, &r->src, source_read, NULL, source_seek);
    if (!r->pb) {
        av_free(buf);
        return ck_fail(err, CKEY_ERR_NOMEM, "%s: out of memory", r->label);
    }
    r->fmt = avformat_alloc_context();
    if (!r->fmt) return ck_fail(err, CKEY_ERR_NOMEM, "%s: out of memory", r->label);
    r->fmt->pb = r->pb;
    r->fmt->flags |= AVFMT_FLAG_CUSTOM_IO;
    r->fmt->io_open = refuse_io_open;
    r->fmt->format_whitelist = av_strdup(format_whitelist);
    if (!r->fmt->format_whitelist) return ck_fail(err, CKEY_ERR_NOMEM, "%s: out of memory", r->label);
    ret = avformat_open_input(&r->fmt, r->label, NULL, NULL); /* frees fmt on failure */
    if (ret < 0) {
        av_message(ret, msg, sizeof msg);
        if (r->src.io_errno)
            return ck_fail(err, CKEY_ERR_IO, "%s: read error: %s", r->label,
                           strerror(r->src.io_errno));
        return ck_fail(err, CKEY_ERR_FORMAT, "%s: not a video file ckey can read (%s)", r->label,
                       msg);
    }

    /* Sizes the container states are checked before anything decodes: a
     * probe decoder that hits max_pixels leaves the parameters zeroed. */
    for (unsigned i = 0; i < r->fmt->nb_streams; i++) {
        const AVCodecParameters *p = r->fmt->streams[i]->codecpar;
        if (p->codec_type == AVMEDIA_TYPE_VIDEO && (p->width || p->height) &&
            !size_ok(r, p->width, p->height, msg, sizeof msg))
            return ck_fail(err, CKEY_ERR_UNSUPPORTED, "%s: %s", r->label, msg);
    }

    /* Probe decoders get the same size cap and no threads. */
    const unsigned n0 = r->fmt->nb_streams;
    AVDictionary **sopts = n0 ? calloc(n0, sizeof *sopts) : NULL;
    if (n0 && !sopts) return ck_fail(err, CKEY_ERR_NOMEM, "%s: out of memory", r->label);
    for (unsigned i = 0; i < n0; i++) {
        av_dict_set_int(&sopts[i], "max_pixels", r->max_pixels, 0);
        av_dict_set(&sopts[i], "threads", "1", 0);
    }
    ret = avformat_find_stream_info(r->fmt, sopts);
    for (unsigned i = 0; i < n0; i++) av_dict_free(&sopts[i]);
    free(sopts);
    if (ret < 0) {
        av_message(ret, msg, sizeof msg);
        return ck_fail(err, CKEY_ERR_FORMAT, "%s: cannot read the stream parameters (%s)",
                       r->label, msg);
    }

    const AVCodec *codec = NULL;
    ret = av_find_best_stream(r->fmt, AVMEDIA_TYPE_VIDEO, -1, -1, &codec, 0);
    if (ret == AVERROR_DECODER_NOT_FOUND) {
        const int s = av_find_best_stream(r->fmt, AVMEDIA_TYPE_VIDEO, -1, -1, NULL, 0);
        return ck_fail(err, CKEY_ERR_UNSUPPORTED, "%s: FFmpeg has no decoder for its %s video",
                       r->label,
                       s >= 0 ? avcodec_get_name(r->fmt->streams[s]->codecpar->codec_id) : "?");
    }
    if (ret < 0 || !codec) return ck_fail(err, CKEY_ERR_FORMAT, "%s: no video stream", r->label);
    r->stream = ret;
    for (unsigned i = 0; i < r->fmt->nb_streams; i++)
        if ((int)i != r->stream) r->fmt->streams[i]->discard = AVDISCARD_ALL;
    AVStream *st = r->fmt->streams[r->stream];
    const AVCodecParameters *par = st->codecpar;
    if ((par->width || par->height) && !size_ok(r, par->width, par->height, msg, sizeof msg))
        return ck_fail(err, CKEY_ERR_UNSUPPORTED, "%s: %s", r->label, msg);
    if (st->nb_frames > CKEY_VIDEO_MAX_FRAMES)
        return ck_fail(err, CKEY_ERR_UNSUPPORTED, "%s: %lld frames exceed the limit of %lld",
                       r->label, (long long)st->nb_frames, (long long)CKEY_VIDEO_MAX_FRAMES);

    r->dec = avcodec_alloc_context3(codec);
    if (!r->dec) return ck_fail(err, CKEY_ERR_NOMEM, "%s: out of memory", r->label);
    ret = avcodec_parameters_to_context(r->dec, par);
    if (ret < 0) return frame_fail(r, err, CKEY_ERR_FORMAT, "decoder parameters", ret);
    r->dec->pkt_timebase = st->time_base;
    r->dec->max_pixels = r->max_pixels;
    r->dec->thread_count = threads;
    r->dec->err_recognition |= AV_EF_EXPLODE;
    ret = avcodec_open2(r->dec, codec, NULL);
    if (ret < 0) {
        av_message(ret, msg, sizeof msg);
        return ck_fail(err, CKEY_ERR_UNSUPPORTED, "%s: cannot open the %s decoder (%s)", r->label,
                       codec->name, msg);
    }
    r->pkt = av_packet_alloc();
    r->frame = av_frame_alloc();
    if (!r->pkt || !r->frame) return ck_fail(err, CKEY_ERR_NOMEM, "%s: out of memory", r->label);

    r->info.frame_count = st->nb_frames > 0 ? st->nb_frames : 0;
    r->cur = -1;
    r->sws_fmt = -1;
    int at_end;
    ckey_status s = goto_frame(r, 0, &at_end, err);
    if (s != CKEY_OK) return s;
    if (at_end) return ck_fail(err, CKEY_ERR_FORMAT, "%s: the video has no frames", r->label);

    const AVFrame *f = r->frame;
    const AVPixFmtDescriptor *d = av_pix_fmt_desc_get((enum AVPixelFormat)f->format);
    ckey_video_info *in = &r->info;
    in->width = f->width;
    in->height = f->height;
    const AVRational rate = av_guess_frame_rate(r->fmt, st, NULL);
    in->rate_num = rate.num > 0 && rate.den > 0 ? rate.num : 0;
    in->rate_den = rate.num > 0 && rate.den > 0 ? rate.den : 1;
    in->bit_depth = d->comp[0].depth;
    in->has_alpha = (d->flags & AV_PIX_FMT_FLAG_ALPHA) != 0;
    snprintf(in->codec, sizeof in->codec, "%s", codec->name);
    snprintf(in->pixel_format, sizeof in->pixel_format, "%s", d->name);
    color col;
    s = frame_color(r, f, &col, err);
    if (s != CKEY_OK) return s;
    in->full_range = col.full;
    snprintf(in->color_matrix, sizeof in->color_matrix, "%s", col.gray ? "rgb" : col.name);

    /* The conversion splits a frame's rows over threads of its own: a
     * reader decodes in order, one frame at a time, so the conversion is
     * on the clip's critical path (threads 1: the caller's thread alone). */
    int conv = 1;
    if (threads != 1) {
        const long ncpu = sysconf(_SC_NPROCESSORS_ONLN);
        conv = ncpu >= 4 ? (int)(ncpu / 2 < CK_VIDEO_CONVERT_THREADS ? ncpu / 2 : CK_VIDEO_CONVERT_THREADS) : 1;
    }
    s = ck_video_reader_convert_threads(r, conv, err);
    if (s != CKEY_OK) return s;
    const size_t w = (size_t)f->width;
    r->cx0 = malloc(w * sizeof(int32_t));
    r->cx1 = malloc(w * sizeof(int32_t));
    r->cxw = malloc(w * sizeof(float));
    if (!r->cx0 || !r->cx1 || !r->cxw) return ck_fail(err, CKEY_ERR_NOMEM, "%s: out of memory", r->label);
    return CKEY_OK;
}

ckey_status ck_video_reader_convert_threads(ckey_video_reader *r, int threads, ckey_error *err) {
    if (!r || threads < 1 || threads > 64)
        return ck_fail(err, CKEY_ERR_INVALID_ARG, "ck_video_reader_convert_threads: invalid arguments");
    ck_pool_free(r->pool);
    r->pool = NULL;
    free(r->rowbuf);
    r->rowbuf = malloc((size_t)threads * 2 * (size_t)r->info.width * sizeof(float));
    if (!r->rowbuf) return ck_fail(err, CKEY_ERR_NOMEM, "%s: out of memory", r->label);
    if (threads > 1) return ck_pool_create(threads, &r->pool, err);
    return CKEY_OK;
}

static ckey_status reader_new(const char *label, int64_t max_pixels, ckey_video_reader **out,
                              ckey_error *err) {
    ckey_video_reader *r = calloc(1, sizeof *r);
    if (r) r->label = strdup(label);
    if (!r || !r->label) {
        free(r);
        return ck_fail(err, CKEY_ERR_NOMEM, "%s: out of memory", label);
    }
    r->max_pixels = max_pixels > 0 && max_pixels < CKEY_IMAGE_MAX_PIXELS ? max_pixels
                                                                          : CKEY_IMAGE_MAX_PIXELS;
    *out = r;
    return CKEY_OK;
}

ckey_status ck_video_reader_open_memory(const void *data, size_t size, const char *label,
                                        int32_t threads, int64_t max_pixels,
                                        ckey_video_reader **out, ckey_error *err) {
    if (out) *out = NULL;
    if (!label) label = "(memory)";
    if (!out || (!data && size) || threads < 0)
        return ck_fail(err, CKEY_ERR_INVALID_ARG, "%s: invalid arguments to the video reader",
                       label);
    ckey_video_reader *r = NULL;
    ckey_status st = reader_new(label, max_pixels, &r, err);
    if (st != CKEY_OK) return st;
    r->src.mem = data;
    r->src.size = size;
    st = reader_start(r, threads, err);
    if (st != CKEY_OK) {
        reader_close(r);
        return st;
    }
    *out = r;
    return CKEY_OK;
}

ckey_status ckey_video_reader_open(const char *path, int32_t threads, ckey_video_reader **out,
                                   ckey_error *err) {
    if (out) *out = NULL;
    if (!path || !out || threads < 0)
        return ck_fail(err, CKEY_ERR_INVALID_ARG, "ckey_video_reader_open: invalid arguments");
    ckey_video_reader *r = NULL;
    ckey_status st = reader_new(path, 0, &r, err);
    if (st != CKEY_OK) return st;
    r->src.file = fopen(path, "rbe");
    if (!r->src.file) {
        st = ck_fail(err, CKEY_ERR_IO, "%s: cannot open: %s", path, strerror(errno));
        reader_close(r);
        return st;
    }
    struct stat sb;
    if (fstat(fileno(r->src.file), &sb) != 0 || !S_ISREG(sb.st_mode)) {
        st = ck_fail(err, CKEY_ERR_IO, "%s: not a regular file", path);
        reader_close(r);
        return st;
    }
    r->src.size = (size_t)sb.st_size;
    st = reader_start(r, threads, err);
    if (st != CKEY_OK) {
        reader_close(r);
        return st;
    }
    *out = r;
    return CKEY_OK;
}

ckey_status ckey_video_reader_get_info(const ckey_video_reader *r, ckey_video_info *info) {
    if (!info) return CKEY_ERR_INVALID_ARG;
    if (!r) {
        memset(info, 0, sizeof *info);
        return CKEY_ERR_INVALID_ARG;
    }
    *info = r->info;
    return CKEY_OK;
}

/* Shared head of the two frame readers: position on `index`. */
static ckey_status prepare(ckey_video_reader *r, int64_t index, int32_t *eof, int *at_end,
                           ckey_error *err) {
    if (eof) *eof = 0;
    if (index < 0 || index >= CKEY_VIDEO_MAX_FRAMES)
        return ck_fail(err, CKEY_ERR_INVALID_ARG, "%s: frame index %lld out of range", r->label,
                       (long long)index);
    ckey_status st = goto_frame(r, index, at_end, err);
    if (st != CKEY_OK || !*at_end) return st;
    if (eof) {
        *eof = 1;
        return CKEY_OK;
    }
    return ck_fail(err, CKEY_ERR_INVALID_ARG, "%s: frame %lld is past the end (%lld frames)",
                   r->label, (long long)index, (long long)r->next);
}

ckey_status ckey_video_read_frame(ckey_video_reader *r, int64_t index, float *rgb, float *alpha,
                                  int32_t *eof, ckey_error *err) {
    if (!r) return ck_fail(err, CKEY_ERR_INVALID_ARG, "ckey_video_read_frame: no reader");
    int at_end;
    ckey_status st = prepare(r, index, eof, &at_end, err);
    if (st != CKEY_OK || at_end) return st;
    const size_t plane = (size_t)r->info.width * (size_t)r->info.height;
    const comp_out out[4] = {{rgb, 0}, {rgb ? rgb + plane : NULL, 0}, {rgb ? rgb + 2 * plane : NULL, 0},
                             {alpha, 0}};
    return convert_to(r, out, 0, err);
}

ckey_status ckey_video_read_hint(ckey_video_reader *r, int64_t index, float *hint, int32_t *eof,
                                 ckey_error *err) {
    if (!r || !hint)
        return ck_fail(err, CKEY_ERR_INVALID_ARG, "ckey_video_read_hint: invalid arguments");
    int at_end;
    ckey_status st = prepare(r, index, eof, &at_end, err);
    if (st != CKEY_OK || at_end) return st;
    const comp_out out[4] = {{NULL, 0}, {NULL, 0}, {hint, 0}, {NULL, 0}};
    return convert_to(r, out, 1, err);
}

ckey_status ck_video_read_packed(ckey_video_reader *r, int64_t index, ckey_image_kind kind,
                                 ckey_packed_image *pk, int32_t *eof, ckey_error *err) {
    if (!r || !pk || (kind != CKEY_IMAGE_RGB && kind != CKEY_IMAGE_HINT))
        return ck_fail(err, CKEY_ERR_INVALID_ARG, "ck_video_read_packed: invalid arguments");
    int at_end;
    ckey_status st = prepare(r, index, eof, &at_end, err);
    if (st != CKEY_OK || at_end) return st;
    const int hint = kind == CKEY_IMAGE_HINT, ch = hint ? 1 : 3;
    const AVFrame *f = r->frame;
    const size_t bytes = (size_t)f->width * (size_t)f->height * (size_t)ch * sizeof(uint16_t);
    if (!ck_packed_reserve(pk, bytes))
        return ck_fail(err, CKEY_ERR_NOMEM, "%s: frame %lld: out of memory for a %d x %d frame", r->label,
                       (long long)index, f->width, f->height);
    pk->width = f->width;
    pk->height = f->height;
    pk->channels = ch;
    pk->type = CKEY_SAMPLE_U16;
    pk->hint_channel = hint ? 0 : -1;
    uint16_t *px = pk->data;
    const comp_out rgb[4] = {{px, 3}, {px + 1, 3}, {px + 2, 3}, {NULL, 0}};
    const comp_out one[4] = {{NULL, 0}, {NULL, 0}, {px, 1}, {NULL, 0}};
    return convert_to(r, hint ? one : rgb, hint, err);
}

/* ============================================================= writing */

/*
 * One encoder and what it codes a frame with: the context, its Y'CbCr frame,
 * the full-resolution chroma the conversion subsamples from and the packet
 * it codes into. Each is made once and reused for every frame.
 */
typedef struct coder {
    AVCodecContext *enc;
    AVFrame *frame;
    AVPacket *pkt;
    float *chroma;              /* [2, h, w] full-resolution Cb', Cr' of the frame, to
                                   subsample; NULL for 4:4:4 */
    struct coder *next;         /* in the writer's free list */
} coder;

/* A frame coded by ck_video_code_frame and not yet muxed; key NULL: unused. */
typedef struct coded {
    const void *key;
    AVPacket *pkt;              /* owned; its data is the coded frame's */
} coded;

struct ckey_video_writer {
    char *path, *tmp;           /* owned */
    FILE *file;
    int io_errno;
    int renamed;
    AVIOContext *pb;            /* over `file`; buffer av_malloc'd */
    AVFormatContext *fmt;
    AVStream *st;
    coder main;                 /* the stream's encoder; its parameters are the stream's */
    int32_t width, height;
    int header_written;
    int64_t frames;
    /* Frames coded apart from the muxer (ck_video_writer_open_coded): the
     * further coders (each opened like `main` with fewer slice threads),
     * the free list over all of them, the coded frames awaiting their turn,
     * all guarded by `mu`; `out` is the packet being muxed. */
    int coded_mode;
    const AVCodec *codec;
    ckey_video_writer_options opt;
    int global_header;
    int32_t threads;            /* the encoder threads in all: opt.threads, else the cores */
    pthread_mutex_t mu;
    int mu_ready;
    coder **extra;              /* owned, each and the array */
    int nextra, extra_cap;
    coder *free;
    coded *coded;               /* owned, with each packet */
    int ncoded;
    AVPacket *out;
};

#if LIBAVFORMAT_VERSION_MAJOR >= 61
#define CK_AVIO_WBUF const uint8_t
#else
#define CK_AVIO_WBUF uint8_t
#endif

static int sink_write(void *opaque, CK_AVIO_WBUF *buf, int n) {
    ckey_video_writer *w = opaque;
    if (n <= 0) return 0;
    if (fwrite(buf, 1, (size_t)n, w->file) != (size_t)n) {
        if (!w->io_errno) w->io_errno = errno ? errno : EIO;
        return AVERROR(EIO);
    }
    return n;
}

static int64_t sink_seek(void *opaque, int64_t offset, int whence) {
    ckey_video_writer *w = opaque;
    whence &= ~AVSEEK_FORCE;
    if (whence == AVSEEK_SIZE) {
        struct stat sb;
        if (fflush(w->file) != 0 || fstat(fileno(w->file), &sb) != 0) return AVERROR(EIO);
        return (int64_t)sb.st_size;
    }
    if (whence != SEEK_SET && whence != SEEK_CUR && whence != SEEK_END) return AVERROR(EINVAL);
    if (fseeko(w->file, (off_t)offset, whence) != 0) return AVERROR(errno ? errno : EIO);
    return (int64_t)ftello(w->file);
}

static void coder_release(coder *c) {
    free(c->chroma);
    av_frame_free(&c->frame);
    av_packet_free(&c->pkt);
    avcodec_free_context(&c->enc);
}

static void writer_release(ckey_video_writer *w) {
    coder_release(&w->main);
    for (int i = 0; i < w->nextra; i++) {
        coder_release(w->extra[i]);
        free(w->extra[i]);
    }
    free(w->extra);
    for (int i = 0; i < w->ncoded; i++) av_packet_free(&w->coded[i].pkt);
    free(w->coded);
    av_packet_free(&w->out);
    if (w->mu_ready) pthread_mutex_destroy(&w->mu);
    avformat_free_context(w->fmt);
    if (w->pb) {
        av_freep(&w->pb->buffer);
        avio_context_free(&w->pb);
    }
    if (w->file) fclose(w->file);
    if (w->tmp && !w->renamed) unlink(w->tmp);
    free(w->tmp);
    free(w->path);
    free(w);
}

void ckey_video_writer_free(ckey_video_writer *w) {
    if (w) writer_release(w);
}

static const char *muxer_for(const char *path) {
    const char *dot = strrchr(path, '.');
    const char *slash = strrchr(path, '/');
    if (!dot || (slash && dot < slash)) return NULL;
    if (!strcasecmp(dot, ".mov")) return "mov";
    if (!strcasecmp(dot, ".mp4")) return "mp4";
    if (!strcasecmp(dot, ".mkv")) return "matroska";
    return NULL;
}

static ckey_status writer_fail(ckey_video_writer *w, ckey_error *err, const char *what, int code) {
    char msg[128];
    if (w->io_errno) snprintf(msg, sizeof msg, "%s", strerror(w->io_errno));
    else av_message(code, msg, sizeof msg);
    return ck_fail(err, w->io_errno ? CKEY_ERR_IO : CKEY_ERR_INTERNAL, "%s: %s: %s", w->path, what,
                   msg);
}

/* An encoder's failure off the muxing thread (which alone sets io_errno). */
static ckey_status coder_fail(const ckey_video_writer *w, ckey_error *err, const char *what,
                              int code) {
    char msg[128];
    av_message(code, msg, sizeof msg);
    return ck_fail(err, CKEY_ERR_INTERNAL, "%s: %s: %s", w->path, what, msg);
}

/*
 * Open a coder: the encoder with the writer's settings and `threads`
 * threads (0: FFmpeg's choice, which for prores_ks is a thread per core,
 * each coding a frame of its own), `slices_only` keeping to slice threads,
 * so that each frame's packet comes out of receive_packet as soon as it is
 * sent; and the coder's frame, chroma and packet.
 */
static ckey_status coder_open(const ckey_video_writer *w, coder *c, int32_t threads,
                              int slices_only, ckey_error *err) {
    static const enum AVPixelFormat formats[3] = {AV_PIX_FMT_YUVA444P10LE, AV_PIX_FMT_YUV422P10LE,
                                                  AV_PIX_FMT_YUV420P};
    const ckey_video_writer_options *o = &w->opt;
    AVCodecContext *e = c->enc = avcodec_alloc_context3(w->codec);
    if (!e) return ck_fail(err, CKEY_ERR_NOMEM, "%s: out of memory", w->path);
    e->width = o->width;
    e->height = o->height;
    e->pix_fmt = formats[o->codec];
    e->time_base = (AVRational){o->rate_den, o->rate_num};
    e->framerate = (AVRational){o->rate_num, o->rate_den};
    e->sample_aspect_ratio = (AVRational){1, 1};
    e->color_primaries = AVCOL_PRI_BT709;
    e->color_trc = AVCOL_TRC_IEC61966_2_1;
    e->colorspace = AVCOL_SPC_BT709;
    e->color_range = AVCOL_RANGE_MPEG;
    e->chroma_sample_location = AVCHROMA_LOC_LEFT;
    e->thread_count = threads;
    if (slices_only) e->thread_type = FF_THREAD_SLICE;
    if (w->global_header) e->flags |= AV_CODEC_FLAG_GLOBAL_HEADER;
    if (o->codec == CKEY_VIDEO_H264) {
        av_opt_set(e->priv_data, "preset", "medium", 0);
        av_opt_set(e->priv_data, "crf", "18", 0);
    } else {
        av_opt_set(e->priv_data, "profile", o->codec == CKEY_VIDEO_PRORES_4444 ? "4444" : "hq", 0);
    }
    int ret = avcodec_open2(e, w->codec, NULL);
    if (ret < 0) return coder_fail(w, err, "cannot open the encoder", ret);
    c->pkt = av_packet_alloc();
    c->frame = av_frame_alloc();
    if (!c->pkt || !c->frame) return ck_fail(err, CKEY_ERR_NOMEM, "%s: out of memory", w->path);
    c->frame->format = e->pix_fmt;
    c->frame->width = e->width;
    c->frame->height = e->height;
    c->frame->color_primaries = e->color_primaries;
    c->frame->color_trc = e->color_trc;
    c->frame->colorspace = e->colorspace;
    c->frame->color_range = e->color_range;
    c->frame->chroma_location = e->chroma_sample_location;
    ret = av_frame_get_buffer(c->frame, 0);
    if (ret < 0) return ck_fail(err, CKEY_ERR_NOMEM, "%s: out of memory for a frame", w->path);
    const AVPixFmtDescriptor *d = av_pix_fmt_desc_get(e->pix_fmt);
    if (!d->log2_chroma_w && !d->log2_chroma_h) return CKEY_OK; /* 4:4:4: no chroma scratch */
    size_t n;
    if (!ck_mul_size((size_t)o->width * (size_t)o->height, 2 * sizeof(float), &n) ||
        !(c->chroma = malloc(n)))
        return ck_fail(err, CKEY_ERR_NOMEM, "%s: out of memory for a frame", w->path);
    return CKEY_OK;
}

static ckey_status writer_start(ckey_video_writer *w, const char *muxer, ckey_error *err) {
    static const char *const encoders[3] = {"prores_ks", "prores_ks", "libx264"};
    const ckey_video_writer_options *o = &w->opt;
    w->codec = avcodec_find_encoder_by_name(encoders[o->codec]);
    if (!w->codec)
        return ck_fail(err, CKEY_ERR_UNSUPPORTED, "%s: this FFmpeg has no %s encoder", w->path,
                       encoders[o->codec]);
    int ret;
    w->file = fopen(w->tmp, "wbe");
    if (!w->file)
        return ck_fail(err, CKEY_ERR_IO, "%s: cannot create %s: %s", w->path, w->tmp,
                       strerror(errno));
    unsigned char *buf = av_malloc(CK_AVIO_BUF);
    if (buf) w->pb = avio_alloc_context(buf, CK_AVIO_BUF, 1, w, NULL, sink_write, sink_seek);
    if (!w->pb) {
        av_free(buf);
        return ck_fail(err, CKEY_ERR_NOMEM, "%s: out of memory", w->path);
    }
    ret = avformat_alloc_output_context2(&w->fmt, NULL, muxer, NULL);
    if (ret < 0 || !w->fmt) return writer_fail(w, err, "cannot set up the container", ret);
    w->fmt->pb = w->pb;
    w->fmt->flags |= AVFMT_FLAG_CUSTOM_IO;
    w->global_header = (w->fmt->oformat->flags & AVFMT_GLOBALHEADER) != 0;

    /* coded mode: the first coder has every thread; the further ones share
     * them (coder_take) */
    ckey_status st = coder_open(w, &w->main, w->coded_mode ? w->threads : o->threads,
                                w->coded_mode, err);
    if (st != CKEY_OK) return st;
    const AVCodecContext *c = w->main.enc;
    w->st = avformat_new_stream(w->fmt, NULL);
    if (!w->st) return ck_fail(err, CKEY_ERR_NOMEM, "%s: out of memory", w->path);
    ret = avcodec_parameters_from_context(w->st->codecpar, c);
    if (ret < 0) return writer_fail(w, err, "stream parameters", ret);
    w->st->time_base = c->time_base;
    w->st->avg_frame_rate = c->framerate;
    ret = avformat_write_header(w->fmt, NULL);
    if (ret < 0) return writer_fail(w, err, "cannot write the container header", ret);
    w->header_written = 1;
    if (w->coded_mode) {
        if (pthread_mutex_init(&w->mu, NULL) != 0)
            return ck_fail(err, CKEY_ERR_INTERNAL, "%s: cannot create a mutex", w->path);
        w->mu_ready = 1;
        w->free = &w->main;
        if (!(w->out = av_packet_alloc()))
            return ck_fail(err, CKEY_ERR_NOMEM, "%s: out of memory", w->path);
    }
    return CKEY_OK;
}

static ckey_status writer_open(const char *path, const ckey_video_writer_options *o, int coded_mode,
                               ckey_video_writer **out, ckey_error *err) {
    if (out) *out = NULL;
    if (!path || !*path || !o || !out)
        return ck_fail(err, CKEY_ERR_INVALID_ARG, "ckey_video_writer_open: invalid arguments");
    if (o->codec != CKEY_VIDEO_PRORES_4444 && o->codec != CKEY_VIDEO_PRORES_422HQ &&
        o->codec != CKEY_VIDEO_H264)
        return ck_fail(err, CKEY_ERR_INVALID_ARG, "%s: unknown video codec %d", path, (int)o->codec);
    if (coded_mode && !ck_video_codec_intra(o->codec))
        return ck_fail(err, CKEY_ERR_INVALID_ARG,
                       "%s: only an intra-only codec (ProRes) codes frames apart", path);
    if (o->width < 1 || o->height < 1 || o->width > CKEY_IMAGE_MAX_SIDE ||
        o->height > CKEY_IMAGE_MAX_SIDE || (int64_t)o->width * o->height > CKEY_IMAGE_MAX_PIXELS)
        return ck_fail(err, CKEY_ERR_INVALID_ARG, "%s: cannot write a %d x %d video", path,
                       (int)o->width, (int)o->height);
    if (o->codec == CKEY_VIDEO_H264 && (o->width % 2 || o->height % 2))
        return ck_fail(err, CKEY_ERR_INVALID_ARG,
                       "%s: H.264 4:2:0 needs an even width and height, not %d x %d", path,
                       (int)o->width, (int)o->height);
    if (o->threads < 0)
        return ck_fail(err, CKEY_ERR_INVALID_ARG, "%s: %d threads", path, (int)o->threads);
    ckey_video_writer_options opt = *o;
    if (opt.rate_num == 0 && opt.rate_den == 0) {
        opt.rate_num = 24;
        opt.rate_den = 1;
    }
    if (opt.rate_num <= 0 || opt.rate_den <= 0)
        return ck_fail(err, CKEY_ERR_INVALID_ARG, "%s: frame rate %d/%d", path, (int)o->rate_num,
                       (int)o->rate_den);
    const char *muxer = muxer_for(path);
    if (!muxer)
        return ck_fail(err, CKEY_ERR_INVALID_ARG,
                       "%s: unknown video container (the name must end in .mov, .mp4 or .mkv)",
                       path);
    if (!strcmp(muxer, "mp4") && opt.codec != CKEY_VIDEO_H264)
        return ck_fail(err, CKEY_ERR_INVALID_ARG, "%s: ProRes goes in .mov or .mkv, not .mp4",
                       path);

    ckey_video_writer *w = calloc(1, sizeof *w);
    if (w) w->path = strdup(path);
    if (w) w->tmp = ckey_temp_path(path);
    if (!w || !w->path || !w->tmp) {
        if (w) writer_release(w);
        return ck_fail(err, CKEY_ERR_NOMEM, "%s: out of memory", path);
    }
    w->width = opt.width;
    w->height = opt.height;
    w->opt = opt;
    w->coded_mode = coded_mode;
    if (opt.threads > 0) {
        w->threads = opt.threads;
    } else {
        const long n = sysconf(_SC_NPROCESSORS_ONLN);
        w->threads = n > 0 ? (int32_t)(n < 256 ? n : 256) : 1;
    }
    ckey_status st = writer_start(w, muxer, err);
    if (st != CKEY_OK) {
        writer_release(w);
        return st;
    }
    *out = w;
    return CKEY_OK;
}

ckey_status ckey_video_writer_open(const char *path, const ckey_video_writer_options *o,
                                   ckey_video_writer **out, ckey_error *err) {
    return writer_open(path, o, 0, out, err);
}

ckey_status ck_video_writer_open_coded(const char *path, const ckey_video_writer_options *o,
                                       ckey_video_writer **out, ckey_error *err) {
    return writer_open(path, o, 1, out, err);
}

int ck_video_codec_intra(ckey_video_codec codec) {
    return codec == CKEY_VIDEO_PRORES_4444 || codec == CKEY_VIDEO_PRORES_422HQ;
}

/* The next packet of the stream, `pts` in the encoder's time base, to the
 * muxer (which takes the packet's data). */
static ckey_status mux_packet(ckey_video_writer *w, AVPacket *pkt, ckey_error *err) {
    av_packet_rescale_ts(pkt, w->main.enc->time_base, w->st->time_base);
    pkt->stream_index = w->st->index;
    const int ret = av_interleaved_write_frame(w->fmt, pkt);
    if (ret < 0) return writer_fail(w, err, "write error", ret);
    return CKEY_OK;
}

/* Send `frame` (NULL: drain) to the main encoder and write every packet it
 * has. */
static ckey_status encode(ckey_video_writer *w, const AVFrame *frame, ckey_error *err) {
    int ret = avcodec_send_frame(w->main.enc, frame);
    if (ret < 0) return writer_fail(w, err, "encoder error", ret);
    for (;;) {
        ret = avcodec_receive_packet(w->main.enc, w->main.pkt);
        if (ret == AVERROR(EAGAIN) || ret == AVERROR_EOF) return CKEY_OK;
        if (ret < 0) return writer_fail(w, err, "encoder error", ret);
        ckey_status st = mux_packet(w, w->main.pkt, err);
        if (st != CKEY_OK) return st;
    }
}

static inline double unit01(float v) { return v > 0.0f ? (v < 1.0f ? (double)v : 1.0) : 0.0; }

static inline void put_code(uint8_t *row, size_t x, int wide, double v, int maxv) {
    long q = lrint(v);
    if (q < 0) q = 0;
    if (q > maxv) q = maxv;
    if (wide) {
        row[2 * x] = (uint8_t)(q & 255); /* the encoders take little-endian formats */
        row[2 * x + 1] = (uint8_t)(q >> 8);
    } else {
        row[x] = (uint8_t)q;
    }
}

/*
 * sRGB-encoded planes -> the encoder's YUV frame (BT.709, limited range) by
 * the formulas the reader inverts: Y' = Kr R + Kg G + Kb B,
 * Cb' = (B - Y') / (2 (1 - Kb)), Cr' = (R - Y') / (2 (1 - Kr)); n-bit codes
 * 16 + 219 Y', 128 + 224 C' (times 2^(n-8)). Chroma is subsampled where it is
 * sited: 4:2:2 / 4:2:0 co-sited horizontally ([1 2 1] / 4 filter), 4:2:0
 * centred vertically (mean of the two rows) -- MPEG-2's "left" siting, the
 * reader's default.
 */
typedef struct yuv_job {
    const coder *c;
    int width, height;
    const float *rgb, *alpha;
    const AVPixFmtDescriptor *d;
} yuv_job;

/* Rows [y0, y1): Y' (and A) codes, and Cb', Cr' at full resolution into
 * the coder's chroma; for 4:4:4 (no chroma scratch) their codes, from the
 * same float values the subsampling pass would read back. */
static void yuv_luma_rows(void *ctx, int64_t y0, int64_t y1, int thread) {
    (void)thread;
    const yuv_job *j = ctx;
    const AVFrame *f = j->c->frame;
    const int width = j->width, n = j->d->comp[0].depth, wide = n > 8;
    const size_t W = (size_t)width, plane = W * (size_t)j->height;
    const double unit = ldexp(1.0, n - 8), maxv = (double)((1 << n) - 1);
    const double kr = 0.2126, kb = 0.0722, kg = 1.0 - kr - kb;
    const float *rgb = j->rgb, *alpha = j->alpha;
    float *cb = j->c->chroma, *cr = cb ? cb + plane : NULL;
    for (int64_t y = y0; y < y1; y++) {
        uint8_t *yrow = f->data[0] + (ptrdiff_t)y * f->linesize[0];
        uint8_t *cbrow = f->data[1] + (ptrdiff_t)y * f->linesize[1];
        uint8_t *crrow = f->data[2] + (ptrdiff_t)y * f->linesize[2];
        for (int x = 0; x < width; x++) {
            const size_t i = (size_t)y * W + (size_t)x;
            const double R = unit01(rgb[i]), G = unit01(rgb[plane + i]), B = unit01(rgb[2 * plane + i]);
            const double Y = kr * R + kg * G + kb * B;
            const float u = (float)((B - Y) / (2 * (1 - kb))), v = (float)((R - Y) / (2 * (1 - kr)));
            if (cb) {
                cb[i] = u;
                cr[i] = v;
            } else {
                put_code(cbrow, (size_t)x, wide, (128.0 + 224.0 * (double)u) * unit, (int)maxv);
                put_code(crrow, (size_t)x, wide, (128.0 + 224.0 * (double)v) * unit, (int)maxv);
            }
            put_code(yrow, (size_t)x, wide, (16.0 + 219.0 * Y) * unit, (int)maxv);
        }
        if (j->d->flags & AV_PIX_FMT_FLAG_ALPHA) {
            uint8_t *arow = f->data[3] + (ptrdiff_t)y * f->linesize[3];
            for (int x = 0; x < width; x++)
                put_code(arow, (size_t)x, wide,
                         alpha ? unit01(alpha[(size_t)y * W + (size_t)x]) * maxv : maxv, (int)maxv);
        }
    }
}

/* Chroma rows [j0, j1) of the frame, subsampled from the coder's chroma. */
static void yuv_chroma_rows(void *ctx, int64_t j0, int64_t j1, int thread) {
    (void)thread;
    const yuv_job *jb = ctx;
    const AVFrame *f = jb->c->frame;
    const int width = jb->width, h = jb->height, n = jb->d->comp[0].depth, wide = n > 8;
    const size_t W = (size_t)width, plane = W * (size_t)h;
    const double unit = ldexp(1.0, n - 8), maxv = (double)((1 << n) - 1);
    const int lw = jb->d->log2_chroma_w, lh = jb->d->log2_chroma_h;
    const int cw = AV_CEIL_RSHIFT(width, lw);
    for (int c = 0; c < 2; c++) {
        const float *src = jb->c->chroma + (c ? plane : 0);
        for (int64_t j = j0; j < j1; j++) {
            uint8_t *row = f->data[1 + c] + (ptrdiff_t)j * f->linesize[1 + c];
            const int y0 = (int)j << lh, y1 = lh && y0 + 1 < h ? y0 + 1 : y0;
            for (int i = 0; i < cw; i++) {
                double v = 0;
                for (int yy = y0;; yy = y1) {
                    const float *s = src + (size_t)yy * W;
                    const int x = i << lw;
                    if (lw) {
                        const int xl = x > 0 ? x - 1 : 0, xr = x + 1 < width ? x + 1 : x;
                        v += 0.25 * s[xl] + 0.5 * s[x] + 0.25 * s[xr];
                    } else {
                        v += s[x];
                    }
                    if (yy == y1) break;
                }
                if (y1 != y0) v *= 0.5;
                put_code(row, (size_t)i, wide, (128.0 + 224.0 * v) * unit, (int)maxv);
            }
        }
    }
}

/* Every row is converted on its own (the chroma after all of the luma pass),
 * so the frame is the same on any number of threads. The frame is made
 * writable first: an encoder may still hold the last one (a frame-threaded
 * encoder's, until its thread is done with it). */
static ckey_status rgb_to_yuv(const ckey_video_writer *w, coder *c, ck_pool *pool, const float *rgb,
                              const float *alpha, ckey_error *err) {
    if (av_frame_make_writable(c->frame) < 0)
        return ck_fail(err, CKEY_ERR_NOMEM, "%s: out of memory for a frame", w->path);
    yuv_job j = {c, w->width, w->height, rgb, alpha,
                 av_pix_fmt_desc_get((enum AVPixelFormat)c->frame->format)};
    ck_pool_for(pool, w->height, 16, yuv_luma_rows, &j);
    if (c->chroma) ck_pool_for(pool, AV_CEIL_RSHIFT(w->height, j.d->log2_chroma_h), 8, yuv_chroma_rows, &j);
    return CKEY_OK;
}

/* A coder from the free list, or a new one when every coder is busy. A
 * coder after the first gets threads / (its number) slice threads, so that
 * frames coded at once share the cores rather than each taking them all. */
static ckey_status coder_take(ckey_video_writer *w, coder **out, ckey_error *err) {
    ckey_status st = CKEY_OK;
    pthread_mutex_lock(&w->mu);
    coder *c = w->free;
    if (c) {
        w->free = c->next;
    } else if (w->nextra == w->extra_cap) {
        const int cap = w->extra_cap ? 2 * w->extra_cap : 4;
        coder **a = realloc(w->extra, (size_t)cap * sizeof *a);
        if (a) {
            w->extra = a;
            w->extra_cap = cap;
        } else {
            st = ck_fail(err, CKEY_ERR_NOMEM, "%s: out of memory", w->path);
        }
    }
    if (!c && st == CKEY_OK) {
        c = calloc(1, sizeof *c);
        if (!c) {
            st = ck_fail(err, CKEY_ERR_NOMEM, "%s: out of memory", w->path);
        } else {
            w->extra[w->nextra++] = c; /* the writer owns it from here, even half open */
            const int32_t t = w->threads / (w->nextra + 1);
            st = coder_open(w, c, t > 1 ? t : 1, 1, err);
            if (st != CKEY_OK) {
                w->nextra--;
                coder_release(c);
                free(c);
                c = NULL;
            }
        }
    }
    pthread_mutex_unlock(&w->mu);
    *out = c;
    return st;
}

static void coder_give(ckey_video_writer *w, coder *c) {
    pthread_mutex_lock(&w->mu);
    c->next = w->free;
    w->free = c;
    pthread_mutex_unlock(&w->mu);
}

/* Send the coder's frame and take its one packet into c->pkt: an intra-only
 * encoder on slice threads has no delay. */
static ckey_status code_one(const ckey_video_writer *w, coder *c, ckey_error *err) {
    c->frame->pts = 0; /* the packet's timestamps are set when it is muxed */
    int ret = avcodec_send_frame(c->enc, c->frame);
    if (ret < 0) return coder_fail(w, err, "encoder error", ret);
    ret = avcodec_receive_packet(c->enc, c->pkt);
    if (ret == AVERROR(EAGAIN))
        return ck_fail(err, CKEY_ERR_INTERNAL, "%s: the encoder held a frame back", w->path);
    if (ret < 0) return coder_fail(w, err, "encoder error", ret);
    return CKEY_OK;
}

/* Keep c->pkt under `key` (a frame of that key not yet muxed is replaced). */
static ckey_status store_coded(ckey_video_writer *w, coder *c, const void *key, ckey_error *err) {
    ckey_status st = CKEY_OK;
    pthread_mutex_lock(&w->mu);
    coded *slot = NULL;
    for (int i = 0; i < w->ncoded && !slot; i++)
        if (w->coded[i].key == key) slot = &w->coded[i];
    for (int i = 0; i < w->ncoded && !slot; i++)
        if (!w->coded[i].key) slot = &w->coded[i];
    if (!slot) {
        coded *a = realloc(w->coded, (size_t)(w->ncoded + 1) * sizeof *a);
        if (a) {
            w->coded = a;
            a[w->ncoded].key = NULL;
            a[w->ncoded].pkt = av_packet_alloc();
            if (a[w->ncoded].pkt) slot = &a[w->ncoded++];
        }
        if (!slot) st = ck_fail(err, CKEY_ERR_NOMEM, "%s: out of memory", w->path);
    }
    if (slot) {
        av_packet_unref(slot->pkt);
        av_packet_move_ref(slot->pkt, c->pkt);
        slot->key = key;
    }
    pthread_mutex_unlock(&w->mu);
    return st;
}

ckey_status ck_video_code_frame(ckey_video_writer *w, const void *key, ck_pool *pool,
                                const float *rgb, const float *alpha, ckey_error *err) {
    if (!w || !w->coded_mode || !key || !rgb)
        return ck_fail(err, CKEY_ERR_INVALID_ARG, "ck_video_code_frame: invalid arguments");
    coder *c = NULL;
    ckey_status st = coder_take(w, &c, err);
    if (st != CKEY_OK) return st;
    st = rgb_to_yuv(w, c, pool, rgb, alpha, err);
    if (st == CKEY_OK) st = code_one(w, c, err);
    if (st == CKEY_OK) st = store_coded(w, c, key, err);
    av_packet_unref(c->pkt);
    coder_give(w, c);
    return st;
}

ckey_status ck_video_mux_frame(ckey_video_writer *w, const void *key, int *muxed, ckey_error *err) {
    if (muxed) *muxed = 0;
    if (!w || !w->coded_mode || !key || !muxed)
        return ck_fail(err, CKEY_ERR_INVALID_ARG, "ck_video_mux_frame: invalid arguments");
    if (w->frames >= CKEY_VIDEO_MAX_FRAMES)
        return ck_fail(err, CKEY_ERR_INVALID_ARG, "%s: more than %lld frames", w->path,
                       (long long)CKEY_VIDEO_MAX_FRAMES);
    pthread_mutex_lock(&w->mu);
    for (int i = 0; i < w->ncoded; i++)
        if (w->coded[i].key == key) {
            av_packet_move_ref(w->out, w->coded[i].pkt);
            w->coded[i].key = NULL;
            *muxed = 1;
            break;
        }
    pthread_mutex_unlock(&w->mu);
    if (!*muxed) return CKEY_OK;
    /* what the encoder gives a frame of pts `frames`, coded in order */
    w->out->pts = w->out->dts = w->frames;
    ckey_status st = mux_packet(w, w->out, err);
    av_packet_unref(w->out);
    if (st != CKEY_OK) return st;
    w->frames++;
    return CKEY_OK;
}

ckey_status ckey_video_write_frame(ckey_video_writer *w, const float *rgb, const float *alpha,
                                   ckey_error *err) {
    return ck_video_write_frame_on(w, NULL, rgb, alpha, err);
}

ckey_status ck_video_write_frame_on(ckey_video_writer *w, ck_pool *pool, const float *rgb,
                                    const float *alpha, ckey_error *err) {
    if (!w || !rgb)
        return ck_fail(err, CKEY_ERR_INVALID_ARG, "ckey_video_write_frame: %s",
                       w ? "no pixels" : "no writer");
    if (w->frames >= CKEY_VIDEO_MAX_FRAMES)
        return ck_fail(err, CKEY_ERR_INVALID_ARG, "%s: more than %lld frames", w->path,
                       (long long)CKEY_VIDEO_MAX_FRAMES);
    if (w->coded_mode) {
        /* coded and muxed at once, under the writer's own address as the key */
        ckey_status st = ck_video_code_frame(w, w, pool, rgb, alpha, err);
        int muxed = 0;
        if (st == CKEY_OK) st = ck_video_mux_frame(w, w, &muxed, err);
        return st;
    }
    ckey_status st = rgb_to_yuv(w, &w->main, pool, rgb, alpha, err);
    if (st != CKEY_OK) return st;
    w->main.frame->pts = w->frames;
    st = encode(w, w->main.frame, err);
    if (st != CKEY_OK) return st;
    w->frames++;
    return CKEY_OK;
}

ckey_status ckey_video_writer_close(ckey_video_writer *w, ckey_error *err) {
    if (!w) return ck_fail(err, CKEY_ERR_INVALID_ARG, "ckey_video_writer_close: no writer");
    ckey_status st = CKEY_OK;
    if (w->frames == 0)
        st = ck_fail(err, CKEY_ERR_INVALID_ARG, "%s: no frames were written", w->path);
    /* drain the main encoder; a coded-mode writer's coders hold nothing back */
    if (st == CKEY_OK && !w->coded_mode) st = encode(w, NULL, err);
    if (st == CKEY_OK) {
        const int ret = av_write_trailer(w->fmt);
        if (ret < 0) st = writer_fail(w, err, "cannot finish the container", ret);
    }
    if (st == CKEY_OK) {
        avio_flush(w->pb);
        if (w->pb->error < 0) st = writer_fail(w, err, "write error", w->pb->error);
    }
    if (st == CKEY_OK && (fflush(w->file) != 0 || fsync(fileno(w->file)) != 0))
        st = ck_fail(err, CKEY_ERR_IO, "%s: write failed: %s", w->path, strerror(errno));
    if (w->file && fclose(w->file) != 0 && st == CKEY_OK)
        st = ck_fail(err, CKEY_ERR_IO, "%s: write failed: %s", w->path, strerror(errno));
    w->file = NULL;
    if (st == CKEY_OK) {
        if (rename(w->tmp, w->path) != 0)
            st = ck_fail(err, CKEY_ERR_IO, "%s: cannot rename %s into place: %s", w->path, w->tmp,
                         strerror(errno));
        else
            w->renamed = 1;
    }
    if (st == CKEY_OK) ck_sync_parent_dir(w->path);
    writer_release(w);
    return st;
}

#endif /* CK_HAVE_FFMPEG */
