/*
 * Video (src/media/video.c): clips made here with ckey_video_writer (H.264,
 * ProRes 422 HQ, ProRes 4444 with alpha) and, for exact colour checks, with
 * libavcodec directly (lossless FFV1 in Matroska with chosen YUV samples and
 * tags), read back through ckey_video_reader. Checks size, frame count, rate,
 * values within each codec's tolerance, that 10/12-bit precision survives
 * (a ramp with steps finer than 1/255), alpha and the hint rule, the matrix
 * and range tags, rewinding, and clean errors for corrupt, truncated and
 * oversized input. Every case skips when ckey is built without FFmpeg.
 */
#include <dirent.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "ckey_media.h"
#include "media/video.h"
#include "support/clip.h"
#include "support/testutil.h"

#ifdef CK_HAVE_FFMPEG
#include <libavcodec/avcodec.h>
#include <libavformat/avformat.h>
#include <libavutil/opt.h>
#endif

static char tmpdir[256];

#ifndef CK_HAVE_FFMPEG

static void test_without_ffmpeg(void) {
    ckey_video_reader *r = (ckey_video_reader *)1;
    ckey_error err;
    CHECK(ckey_video_reader_open("x.mov", 0, &r, &err) == CKEY_ERR_UNSUPPORTED);
    CHECK(r == NULL);
    CHECKF(strstr(err.message, "x.mov") != NULL, "%s", err.message);
    SKIP("built without FFmpeg");
}

static const ck_test_case cases[] = {{"without_ffmpeg", test_without_ffmpeg}};

#else

#define W 64
#define H 48
#define FRAMES 5

static const char *path_in(const char *name) {
    static char p[4][512];
    static int k;
    k = (k + 1) % 4;
    snprintf(p[k], sizeof p[k], "%s/%s", tmpdir, name);
    return p[k];
}

/* Frame f of a smooth test clip: [4, H, W], RGB then alpha. The first 8 rows
 * are a gray ramp (step 1/640 of full scale: between 8- and 10-bit
 * quantization; gray, so it lives in luma alone); below, red is that ramp,
 * green a vertical gradient, blue moves with f; alpha a diagonal ramp. */
static void make_frame(float *p, int f) {
    const size_t plane = (size_t)W * H;
    for (int y = 0; y < H; y++)
        for (int x = 0; x < W; x++) {
            const size_t i = (size_t)y * W + x;
            p[i] = 0.45f + (float)x / 640.0f;
            p[plane + i] = y < 8 ? p[i] : 0.2f + 0.6f * (float)y / (H - 1);
            p[2 * plane + i] = y < 8 ? p[i] : 0.3f + 0.05f * (float)f + 0.2f * (float)(x + y) / (W + H);
            p[3 * plane + i] = 0.1f + 0.8f * (float)(x + 2 * y) / (W + 2 * H);
        }
}

/* make_frame as a video frame (its fourth plane the alpha, when asked). */
static void video_frame(void *user, int k, float *rgb, float *alpha) {
    (void)user, (void)alpha;
    make_frame(rgb, k);
}

static ckey_status write_clip(const char *path, ckey_video_codec codec, int alpha, int frames) {
    return ck_write_video(path, codec, W, H, frames, alpha, video_frame, NULL);
}

static ckey_video_reader *open_ok(const char *path, ckey_video_info *info) {
    ckey_video_reader *r = NULL;
    ckey_error err;
    ckey_status st = ckey_video_reader_open(path, 1, &r, &err);
    CHECKF(st == CKEY_OK, "%s", err.message);
    if (st == CKEY_OK) ckey_video_reader_get_info(r, info);
    return r;
}

/* Read every frame and compare with make_frame; returns the max abs error
 * over RGB (and alpha in *alpha_err when asked). */
static double compare_clip(ckey_video_reader *r, double *mean, double *alpha_err) {
    float *want = malloc(4 * sizeof(float) * W * H), *got = malloc(4 * sizeof(float) * W * H);
    double maxe = 0, sum = 0, amax = 0;
    for (int f = 0; f < FRAMES; f++) {
        ckey_error err;
        int32_t eof = -1;
        ckey_status st = ckey_video_read_frame(r, f, got, got + 3 * W * H, &eof, &err);
        CHECKF(st == CKEY_OK && eof == 0, "frame %d: %s", f, err.message);
        if (st != CKEY_OK) break;
        make_frame(want, f);
        for (size_t i = 0; i < (size_t)3 * W * H; i++) {
            const double e = fabs((double)got[i] - want[i]);
            maxe = e > maxe ? e : maxe;
            sum += e;
        }
        for (size_t i = (size_t)3 * W * H; i < (size_t)4 * W * H; i++) {
            const double e = fabs((double)got[i] - want[i]);
            amax = e > amax ? e : amax;
        }
    }
    free(want);
    free(got);
    if (mean) *mean = sum / (3.0 * W * H * FRAMES);
    if (alpha_err) *alpha_err = amax;
    return maxe;
}

/* Max abs error of the ramp after quantizing to 8 bits: what a reader that
 * went through 8 bits could at best achieve. */
static double ramp_8bit_error(void) {
    double m = 0;
    for (int x = 0; x < W; x++) {
        const double v = 0.45 + x / 640.0, q = (double)(long)(v * 255 + 0.5) / 255;
        m = fabs(q - v) > m ? fabs(q - v) : m;
    }
    return m;
}

/* Max abs error of the gray ramp (frame 0, row y < 8, all channels) as read. */
static double ramp_error(ckey_video_reader *r, int y) {
    float *got = malloc(3 * sizeof(float) * W * H);
    ckey_error err;
    double m = 1;
    if (ckey_video_read_frame(r, 0, got, NULL, NULL, &err) == CKEY_OK) {
        m = 0;
        for (int c = 0; c < 3; c++)
            for (int x = 0; x < W; x++) {
                const double e =
                    fabs((double)got[(size_t)c * W * H + (size_t)y * W + x] - (0.45 + x / 640.0));
                m = e > m ? e : m;
            }
    }
    free(got);
    return m;
}

static void test_h264(void) {
    const char *path = path_in("preview.mp4");
    REQUIRE(write_clip(path, CKEY_VIDEO_H264, 0, FRAMES) == CKEY_OK);
    struct stat sb;
    CHECK(stat(path, &sb) == 0);
    char *tmp = ckey_temp_path(path);
    CHECK(tmp && stat(tmp, &sb) != 0); /* renamed away */
    free(tmp);
    ckey_video_info in;
    ckey_video_reader *r = open_ok(path, &in);
    REQUIRE(r);
    printf("  h264: %d x %d, %lld frames, %d/%d fps, %s %d-bit, matrix %s, %s range\n", in.width,
           in.height, (long long)in.frame_count, in.rate_num, in.rate_den, in.pixel_format,
           in.bit_depth, in.color_matrix, in.full_range ? "full" : "limited");
    CHECK(in.width == W && in.height == H);
    CHECK(in.frame_count == FRAMES);
    CHECK(in.rate_num == 25 && in.rate_den == 1);
    CHECK(in.bit_depth == 8 && !in.has_alpha);
    CHECK(!strcmp(in.codec, "h264"));
    CHECK(!strcmp(in.pixel_format, "yuv420p"));
    CHECK(!strcmp(in.color_matrix, "bt709") && !in.full_range);
    double mean, aerr;
    const double maxe = compare_clip(r, &mean, &aerr);
    printf("  h264 8-bit 4:2:0: max abs err %.5f, mean %.5f\n", maxe, mean);
    /* 4:2:0 smears chroma over the sharp gray / colour edge at row 8 */
    CHECK(maxe < 0.1 && mean < 0.006);
    CHECK(aerr < 0.9 + 1e-6); /* alpha read as 1 */
    /* the end of the clip */
    float *buf = malloc(3 * sizeof(float) * W * H);
    ckey_error err;
    int32_t eof = 0;
    CHECK(ckey_video_read_frame(r, FRAMES, buf, NULL, &eof, &err) == CKEY_OK && eof == 1);
    CHECK(ckey_video_read_frame(r, FRAMES + 3, buf, NULL, NULL, &err) == CKEY_ERR_INVALID_ARG);
    CHECKF(strstr(err.message, "past the end") != NULL, "%s", err.message);
    CHECK(ckey_video_read_frame(r, -1, buf, NULL, NULL, &err) == CKEY_ERR_INVALID_ARG);
    free(buf);
    ckey_video_reader_free(r);
}

static void test_prores_422_10bit(void) {
    const char *path = path_in("hq.mov");
    REQUIRE(write_clip(path, CKEY_VIDEO_PRORES_422HQ, 0, FRAMES) == CKEY_OK);
    ckey_video_info in;
    ckey_video_reader *r = open_ok(path, &in);
    REQUIRE(r);
    printf("  prores 422: %s %d-bit, %lld frames, matrix %s\n", in.pixel_format, in.bit_depth,
           (long long)in.frame_count, in.color_matrix);
    CHECK(!strcmp(in.codec, "prores"));
    CHECK(in.bit_depth == 10 && !in.has_alpha);
    CHECK(in.frame_count == FRAMES && in.rate_num == 25 && in.rate_den == 1);
    CHECK(!strcmp(in.color_matrix, "bt709"));
    double mean;
    const double maxe = compare_clip(r, &mean, NULL);
    printf("  prores 422 HQ: max abs err %.5f, mean %.6f\n", maxe, mean);
    CHECK(maxe < 0.01 && mean < 0.001);
    /* the gray ramp steps by 1/640: finer than 8 bits can hold */
    const double e = ramp_error(r, 3), q8 = ramp_8bit_error();
    printf("  gray ramp: max abs err %.6f (8-bit quantization alone: %.6f)\n", e, q8);
    CHECK(e < 0.5 * q8);
    ckey_video_reader_free(r);
}

static void test_prores_4444_alpha(void) {
    const char *path = path_in("fg.mov");
    REQUIRE(write_clip(path, CKEY_VIDEO_PRORES_4444, 1, FRAMES) == CKEY_OK);
    ckey_video_info in;
    ckey_video_reader *r = open_ok(path, &in);
    REQUIRE(r);
    printf("  prores 4444: %s %d-bit, alpha %d\n", in.pixel_format, in.bit_depth, in.has_alpha);
    CHECK(in.bit_depth == 12 && in.has_alpha);
    CHECK(!strcmp(in.pixel_format, "yuva444p12le"));
    double mean, aerr;
    const double maxe = compare_clip(r, &mean, &aerr);
    printf("  prores 4444: rgb max abs err %.5f, mean %.6f; alpha max abs err %.6f\n", maxe, mean,
           aerr);
    CHECK(maxe < 0.006 && mean < 0.0006);
    /* alpha: 10-bit codes, coded losslessly, decoded to 12 bits */
    CHECK(aerr < 0.5 / 1023 + 0.5 / 4095 + 1e-5);
    const double e = ramp_error(r, 5), q8 = ramp_8bit_error();
    printf("  gray ramp: max abs err %.6f (8-bit quantization alone: %.6f)\n", e, q8);
    CHECK(e < 0.5 * q8);
    /* the hint is the alpha channel */
    float *hint = malloc(sizeof(float) * W * H), *want = malloc(4 * sizeof(float) * W * H);
    ckey_error err;
    CHECK(ckey_video_read_hint(r, 2, hint, NULL, &err) == CKEY_OK);
    make_frame(want, 2);
    CHECK(ck_compare("hint from alpha", hint, want + 3 * W * H, (size_t)W * H, NULL) < 1e-3);
    free(hint);
    free(want);
    ckey_video_reader_free(r);
}

/* Opaque alpha (and no alpha): the hint is the blue channel, as for images. */
static void test_hint_from_color(void) {
    const char *paths[2] = {path_in("opaque.mov"), path_in("noalpha.mov")};
    REQUIRE(write_clip(paths[0], CKEY_VIDEO_PRORES_4444, 0, 2) == CKEY_OK);
    REQUIRE(write_clip(paths[1], CKEY_VIDEO_PRORES_422HQ, 0, 2) == CKEY_OK);
    float *hint = malloc(sizeof(float) * W * H), *rgb = malloc(3 * sizeof(float) * W * H);
    for (int k = 0; k < 2; k++) {
        ckey_video_info in;
        ckey_video_reader *r = open_ok(paths[k], &in);
        if (!r) continue;
        CHECK(in.has_alpha == (k == 0));
        ckey_error err;
        /* hint first, then the plate of the same frame (no second decode) */
        CHECK(ckey_video_read_hint(r, 1, hint, NULL, &err) == CKEY_OK);
        CHECK(ckey_video_read_frame(r, 1, rgb, NULL, NULL, &err) == CKEY_OK);
        CHECK(ck_compare("hint = blue", hint, rgb + 2 * W * H, (size_t)W * H, NULL) == 0);
        ckey_video_reader_free(r);
    }
    free(hint);
    free(rgb);
}

/* The device frame path's read (ck_video_read_packed: 16-bit samples) is
 * round(65535 v) of the float read, plate and hint, and the conversion gives
 * the same bits on one thread and on several (rows split over the reader's
 * pool), for 4:2:0 8-bit, 4:2:2 10-bit and 4:4:4 10-bit with alpha. */
static void test_packed_and_threads(void) {
    static const struct { const char *name; ckey_video_codec codec; int alpha; } clips[] = {
        {"p420.mp4", CKEY_VIDEO_H264, 0}, {"p422.mov", CKEY_VIDEO_PRORES_422HQ, 0},
        {"p4444.mov", CKEY_VIDEO_PRORES_4444, 1}};
    const size_t n = (size_t)W * H;
    float *a = malloc(4 * sizeof(float) * n), *b = malloc(4 * sizeof(float) * n);
    REQUIRE(a && b);
    for (size_t c = 0; c < sizeof clips / sizeof clips[0]; c++) {
        const char *path = path_in(clips[c].name);
        REQUIRE(write_clip(path, clips[c].codec, clips[c].alpha, FRAMES) == CKEY_OK);
        ckey_video_info in;
        ckey_video_reader *one = open_ok(path, &in), *many = open_ok(path, &in);
        REQUIRE(one && many);
        ckey_error err;
        CHECKF(ck_video_reader_convert_threads(many, 5, &err) == CKEY_OK, "%s", err.message);
        ckey_packed_image pk = {0}, ph = {0};
        long differ = 0, off = 0;
        for (int f = 0; f < FRAMES; f++) {
            int32_t eof = -1;
            CHECK(ckey_video_read_frame(one, f, a, a + 3 * n, &eof, &err) == CKEY_OK && eof == 0);
            CHECK(ckey_video_read_frame(many, f, b, b + 3 * n, &eof, &err) == CKEY_OK && eof == 0);
            differ += memcmp(a, b, 4 * sizeof(float) * n) != 0;
            CHECKF(ck_video_read_packed(many, f, CKEY_IMAGE_RGB, &pk, &eof, &err) == CKEY_OK && eof == 0, "%s",
                   err.message);
            CHECK(pk.width == W && pk.height == H && pk.channels == 3 && pk.type == CKEY_SAMPLE_U16 &&
                  pk.hint_channel == -1);
            const uint16_t *px = pk.data;
            for (size_t i = 0; i < n; i++)
                for (int k = 0; k < 3; k++)
                    off += px[3 * i + k] != (uint16_t)(a[k * n + i] * 65535.0f + 0.5f);
            CHECK(ckey_video_read_hint(one, f, a, NULL, &err) == CKEY_OK);
            CHECKF(ck_video_read_packed(many, f, CKEY_IMAGE_HINT, &ph, NULL, &err) == CKEY_OK, "%s", err.message);
            CHECK(ph.channels == 1 && ph.hint_channel == 0 && ph.type == CKEY_SAMPLE_U16);
            const uint16_t *hx = ph.data;
            for (size_t i = 0; i < n; i++) off += hx[i] != (uint16_t)(a[i] * 65535.0f + 0.5f);
        }
        printf("  %s: %ld of %d frames differ between 1 and 5 threads; %ld packed samples off\n", clips[c].name,
               differ, FRAMES, off);
        CHECK(differ == 0 && off == 0);
        int32_t eof = 0;
        CHECK(ck_video_read_packed(many, FRAMES, CKEY_IMAGE_RGB, &pk, &eof, &err) == CKEY_OK && eof == 1);
        CHECK(ck_video_read_packed(many, 0, (ckey_image_kind)99, &pk, NULL, &err) == CKEY_ERR_INVALID_ARG);
        ckey_packed_image_free(&pk);
        ckey_packed_image_free(&ph);
        ckey_video_reader_free(one);
        ckey_video_reader_free(many);
    }
    free(a);
    free(b);
}

/* Frames come back identical after a rewind. */
static void test_rewind(void) {
    const char *path = path_in("seek.mp4");
    REQUIRE(write_clip(path, CKEY_VIDEO_H264, 0, FRAMES) == CKEY_OK);
    ckey_video_info in;
    ckey_video_reader *r = open_ok(path, &in);
    REQUIRE(r);
    const size_t n = (size_t)3 * W * H;
    float *a = malloc(n * sizeof(float) * FRAMES), *b = malloc(n * sizeof(float));
    ckey_error err;
    for (int f = 0; f < FRAMES; f++) CHECK(ckey_video_read_frame(r, f, a + f * n, NULL, NULL, &err) == CKEY_OK);
    static const int order[6] = {1, 3, 3, 0, 4, 2};
    for (int k = 0; k < 6; k++) {
        CHECKF(ckey_video_read_frame(r, order[k], b, NULL, NULL, &err) == CKEY_OK, "%s", err.message);
        CHECKF(memcmp(b, a + order[k] * n, n * sizeof(float)) == 0, "frame %d differs", order[k]);
    }
    free(a);
    free(b);
    ckey_video_reader_free(r);
}

/* ---------------------------------------- FFV1 clips made with libavcodec */

typedef struct yuv_clip {
    int width, height, frames;
    enum AVColorSpace space;
    enum AVColorRange range;
    uint16_t y, cb, cr;         /* base samples (10-bit); varied over the picture */
    const char *movflags;       /* for a mov with the index first */
    int rgb24;                  /* instead: raw packed RGB24 (the swscale fallback) */
    int sub420;                 /* yuv420p10: chroma (i, j) = cb + 6i + 4j, cr - 4i + 6j */
} yuv_clip;

/* Write an FFV1 yuv444p10 clip (lossless: the decoder returns exactly these
 * samples). Sample (x, y) of frame f: Y = y + 3x + f, Cb = cb + 2y - x,
 * Cr = cr - 2x + y. With rgb24: rawvideo, byte c of pixel (x, y) is
 * (5x + 7y + 60c + f) mod 256. */
static int write_ffv1(const char *path, const yuv_clip *c) {
    const AVCodec *codec = avcodec_find_encoder(c->rgb24 ? AV_CODEC_ID_RAWVIDEO : AV_CODEC_ID_FFV1);
    if (!codec) return 0;
    AVFormatContext *fmt = NULL;
    if (avformat_alloc_output_context2(&fmt, NULL, NULL, path) < 0) return 0;
    AVCodecContext *e = avcodec_alloc_context3(codec);
    e->width = c->width;
    e->height = c->height;
    e->pix_fmt = c->rgb24 ? AV_PIX_FMT_RGB24 : c->sub420 ? AV_PIX_FMT_YUV420P10LE : AV_PIX_FMT_YUV444P10LE;
    e->time_base = (AVRational){1, 30};
    e->framerate = (AVRational){30, 1};
    e->colorspace = c->space;
    e->color_range = c->range;
    if (fmt->oformat->flags & AVFMT_GLOBALHEADER) e->flags |= AV_CODEC_FLAG_GLOBAL_HEADER;
    int ok = avcodec_open2(e, codec, NULL) >= 0;
    AVStream *st = ok ? avformat_new_stream(fmt, NULL) : NULL;
    ok = st && avcodec_parameters_from_context(st->codecpar, e) >= 0;
    if (ok) st->time_base = e->time_base;
    AVDictionary *mo = NULL;
    if (c->movflags) av_dict_set(&mo, "movflags", c->movflags, 0);
    ok = ok && avio_open(&fmt->pb, path, AVIO_FLAG_WRITE) >= 0;
    ok = ok && avformat_write_header(fmt, &mo) >= 0;
    av_dict_free(&mo);
    AVFrame *fr = av_frame_alloc();
    AVPacket *pkt = av_packet_alloc();
    fr->format = e->pix_fmt;
    fr->width = c->width;
    fr->height = c->height;
    ok = ok && av_frame_get_buffer(fr, 0) >= 0;
    for (int f = 0; ok && f <= c->frames; f++) {
        if (f < c->frames) {
            ok = av_frame_make_writable(fr) >= 0;
            for (int y = 0; ok && c->rgb24 && y < c->height; y++)
                for (int x = 0; x < 3 * c->width; x++)
                    fr->data[0][y * fr->linesize[0] + x] = (uint8_t)(5 * (x / 3) + 7 * y + 60 * (x % 3) + f);
            for (int y = 0; ok && c->sub420 && y < c->height; y++)
                for (int x = 0; x < c->width; x++) {
                    ((uint16_t *)(fr->data[0] + y * fr->linesize[0]))[x] = (uint16_t)(c->y + 3 * x + f);
                    if (x < c->width / 2 && y < c->height / 2) {
                        ((uint16_t *)(fr->data[1] + y * fr->linesize[1]))[x] = (uint16_t)(c->cb + 6 * x + 4 * y);
                        ((uint16_t *)(fr->data[2] + y * fr->linesize[2]))[x] = (uint16_t)(c->cr - 4 * x + 6 * y);
                    }
                }
            for (int y = 0; ok && !c->rgb24 && !c->sub420 && y < c->height; y++)
                for (int x = 0; x < c->width; x++) {
                    ((uint16_t *)(fr->data[0] + y * fr->linesize[0]))[x] = (uint16_t)(c->y + 3 * x + f);
                    ((uint16_t *)(fr->data[1] + y * fr->linesize[1]))[x] = (uint16_t)(c->cb + 2 * y - x);
                    ((uint16_t *)(fr->data[2] + y * fr->linesize[2]))[x] = (uint16_t)(c->cr - 2 * x + y);
                }
            fr->pts = f;
        }
        ok = ok && avcodec_send_frame(e, f < c->frames ? fr : NULL) >= 0;
        while (ok && avcodec_receive_packet(e, pkt) >= 0) {
            av_packet_rescale_ts(pkt, e->time_base, st->time_base);
            pkt->stream_index = 0;
            ok = av_interleaved_write_frame(fmt, pkt) >= 0;
        }
    }
    ok = ok && av_write_trailer(fmt) >= 0;
    av_packet_free(&pkt);
    av_frame_free(&fr);
    avcodec_free_context(&e);
    if (fmt->pb) avio_closep(&fmt->pb);
    avformat_free_context(fmt);
    return ok;
}

/* RGB of 10-bit Y'CbCr by the textbook formulas. */
static void yuv_to_rgb(double Y, double Cb, double Cr, double kr, double kb, int full, double *rgb) {
    const double y = full ? Y / 1023 : (Y - 64) / 876, cb = full ? (Cb - 512) / 1023 : (Cb - 512) / 896,
                 cr = full ? (Cr - 512) / 1023 : (Cr - 512) / 896;
    const double kg = 1 - kr - kb;
    rgb[0] = y + 2 * (1 - kr) * cr;
    rgb[2] = y + 2 * (1 - kb) * cb;
    rgb[1] = (y - kr * rgb[0] - kb * rgb[2]) / kg;
}

/* The stream's matrix and range tags are honoured; untagged SD is BT.601. */
static void test_matrix_and_range(void) {
    static const struct {
        enum AVColorSpace space;
        enum AVColorRange range;
        double kr, kb;
        const char *name;
    } cases[3] = {{AVCOL_SPC_BT709, AVCOL_RANGE_MPEG, 0.2126, 0.0722, "bt709"},
                  {AVCOL_SPC_BT470BG, AVCOL_RANGE_JPEG, 0.299, 0.114, "bt470bg"},
                  {AVCOL_SPC_UNSPECIFIED, AVCOL_RANGE_UNSPECIFIED, 0.299, 0.114, "smpte170m"}};
    const int w = 40, h = 24;
    float *rgb = malloc(3 * sizeof(float) * w * h);
    for (int k = 0; k < 3; k++) {
        char name[32];
        snprintf(name, sizeof name, "tags%d.mkv", k);
        const char *path = path_in(name);
        const yuv_clip c = {w, h, 2, cases[k].space, cases[k].range, 400, 440, 560, NULL, 0, 0};
        REQUIRE(write_ffv1(path, &c));
        ckey_video_info in;
        ckey_video_reader *r = open_ok(path, &in);
        if (!r) continue;
        CHECKF(!strcmp(in.color_matrix, cases[k].name), "%s vs %s", in.color_matrix, cases[k].name);
        CHECK(in.full_range == (cases[k].range == AVCOL_RANGE_JPEG));
        CHECK(in.bit_depth == 10 && !strcmp(in.codec, "ffv1"));
        ckey_error err;
        CHECK(ckey_video_read_frame(r, 1, rgb, NULL, NULL, &err) == CKEY_OK);
        double maxe = 0;
        for (int y = 0; y < h; y++)
            for (int x = 0; x < w; x++) {
                double want[3];
                yuv_to_rgb(400 + 3 * x + 1, 440 + 2 * y - x, 560 - 2 * x + y, cases[k].kr,
                           cases[k].kb, cases[k].range == AVCOL_RANGE_JPEG, want);
                for (int ch = 0; ch < 3; ch++) {
                    const double e = fabs(rgb[(size_t)ch * w * h + (size_t)y * w + x] - want[ch]);
                    maxe = e > maxe ? e : maxe;
                }
            }
        printf("  %s %s range: max abs err vs the formula %.6f\n", in.color_matrix,
               in.full_range ? "full" : "limited", maxe);
        CHECK(maxe < 1.0 / 1023);
        ckey_video_reader_free(r);
    }
    free(rgb);
}

/* 4:2:0 chroma is interpolated at MPEG-2's "left" siting: chroma (i, j) sits
 * at luma (2i, 2j + 1/2), so chroma linear in (i, j) comes back exactly
 * linear in (x, y) away from the edges. */
static void test_chroma_siting(void) {
    const char *path = path_in("420.mkv");
    const int w = 32, h = 16;
    const yuv_clip c = {w, h, 1, AVCOL_SPC_BT709, AVCOL_RANGE_MPEG, 300, 400, 600, NULL, 0, 1};
    REQUIRE(write_ffv1(path, &c));
    ckey_video_info in;
    ckey_video_reader *r = open_ok(path, &in);
    REQUIRE(r);
    CHECK(!strcmp(in.pixel_format, "yuv420p10le"));
    float rgb[3 * 32 * 16];
    ckey_error err;
    CHECK(ckey_video_read_frame(r, 0, rgb, NULL, NULL, &err) == CKEY_OK);
    double maxe = 0;
    for (int y = 1; y < h - 2; y++)
        for (int x = 0; x < w - 2; x++) {
            const double ci = x / 2.0, cj = (y - 0.5) / 2.0;
            double want[3];
            yuv_to_rgb(300 + 3 * x, 400 + 6 * ci + 4 * cj, 600 - 4 * ci + 6 * cj, 0.2126, 0.0722,
                       0, want);
            for (int ch = 0; ch < 3; ch++) {
                const double e = fabs(rgb[(size_t)ch * w * h + (size_t)y * w + x] - want[ch]);
                maxe = e > maxe ? e : maxe;
            }
        }
    printf("  4:2:0 interior: max abs err vs linear chroma at the left siting %.2g\n", maxe);
    CHECK(maxe < 1e-5);
    ckey_video_reader_free(r);
}

/* A packed format goes through swscale: 8-bit RGB comes back exactly. */
static void test_swscale_fallback(void) {
    const char *path = path_in("rgb24.nut");
    const yuv_clip c = {20, 10, 3, AVCOL_SPC_UNSPECIFIED, AVCOL_RANGE_UNSPECIFIED, 0, 0, 0, NULL, 1, 0};
    REQUIRE(write_ffv1(path, &c));
    ckey_video_info in;
    ckey_video_reader *r = open_ok(path, &in);
    REQUIRE(r);
    CHECK(!strcmp(in.pixel_format, "rgb24") && in.bit_depth == 8 && !in.has_alpha);
    CHECK(!strcmp(in.color_matrix, "rgb"));
    float rgb[3 * 20 * 10], want[3 * 20 * 10], hint[20 * 10];
    ckey_error err;
    CHECK(ckey_video_read_frame(r, 2, rgb, NULL, NULL, &err) == CKEY_OK);
    for (int ch = 0; ch < 3; ch++)
        for (int y = 0; y < 10; y++)
            for (int x = 0; x < 20; x++)
                want[(ch * 10 + y) * 20 + x] = (float)((5 * x + 7 * y + 60 * ch + 2) % 256) / 255.0f;
    CHECK(ck_compare("rgb24 via swscale", rgb, want, 3 * 20 * 10, NULL) < 1e-6);
    CHECK(ckey_video_read_hint(r, 2, hint, NULL, &err) == CKEY_OK);
    CHECK(ck_compare("rgb24 hint = blue", hint, want + 2 * 200, 200, NULL) < 1e-6);
    ckey_video_reader_free(r);
}

/* ------------------------------------------------------------ errors */

static unsigned char *slurp(const char *path, size_t *n) { return ck_read_file(path, n); }

static int spill(const char *path, const void *data, size_t n) {
    FILE *f = fopen(path, "wb");
    if (!f) return 0;
    const int ok = fwrite(data, 1, n, f) == n;
    return fclose(f) == 0 && ok;
}

static void expect_open_fail(const char *path, ckey_status want, const char *part) {
    ckey_video_reader *r = (ckey_video_reader *)1;
    ckey_error err;
    memset(&err, 0, sizeof err);
    const ckey_status st = ckey_video_reader_open(path, 1, &r, &err);
    CHECKF(st == want, "%s: status %s, want %s (%s)", path, ckey_status_name(st),
           ckey_status_name(want), err.message);
    CHECK(r == NULL);
    CHECKF(strstr(err.message, path) != NULL, "message '%s' lacks the path", err.message);
    if (part) CHECKF(strstr(err.message, part) != NULL, "message '%s' lacks '%s'", err.message, part);
    printf("  %s\n", err.message);
    if (st == CKEY_OK) ckey_video_reader_free(r);
}

static void test_bad_files(void) {
    expect_open_fail(path_in("missing.mov"), CKEY_ERR_IO, "cannot open");
    const char *empty = path_in("empty.mov");
    REQUIRE(spill(empty, "", 0));
    expect_open_fail(empty, CKEY_ERR_FORMAT, NULL);
    const char *text = path_in("text.mov");
    REQUIRE(spill(text, "hello, this is not a video at all\n", 34));
    expect_open_fail(text, CKEY_ERR_FORMAT, "not a video file");
    expect_open_fail(tmpdir, CKEY_ERR_IO, NULL); /* a directory */
    /* a PNG is a file FFmpeg could read, but not one of the video demuxers */
    static const unsigned char png[] = {137, 80, 78, 71, 13, 10, 26, 10, 0, 0, 0, 13, 'I', 'H', 'D', 'R',
                                        0, 0, 0, 1, 0, 0, 0, 1, 8, 0, 0, 0, 0, 0x3a, 0x7e, 0x9b, 0x55};
    const char *pngp = path_in("image.mov");
    REQUIRE(spill(pngp, png, sizeof png));
    expect_open_fail(pngp, CKEY_ERR_FORMAT, NULL);

    /* a mov cut short loses its index (written last): a clean open error */
    const char *good = path_in("cut-src.mov");
    REQUIRE(write_clip(good, CKEY_VIDEO_PRORES_422HQ, 0, FRAMES) == CKEY_OK);
    size_t n;
    unsigned char *data = slurp(good, &n);
    REQUIRE(data);
    const char *cut = path_in("cut.mov");
    REQUIRE(spill(cut, data, n / 2));
    expect_open_fail(cut, CKEY_ERR_FORMAT, NULL);

    /* frame 2's ProRes header damaged: frames 0 and 1 read, frame 2 is an
     * error naming it, and so on without a crash */
    int seen = 0;
    for (size_t i = 0; i + 4 <= n; i++)
        if (!memcmp(data + i, "icpf", 4) && seen++ == 2) {
            memset(data + i, 'X', 4);
            break;
        }
    REQUIRE(seen == 3);
    const char *bad = path_in("badframe.mov");
    REQUIRE(spill(bad, data, n));
    free(data);
    ckey_video_info in;
    ckey_video_reader *r = open_ok(bad, &in);
    if (r) {
        float *rgb = malloc(3 * sizeof(float) * W * H);
        ckey_error err;
        CHECK(ckey_video_read_frame(r, 1, rgb, NULL, NULL, &err) == CKEY_OK);
        const ckey_status st = ckey_video_read_frame(r, 2, rgb, NULL, NULL, &err);
        CHECKF(st == CKEY_ERR_FORMAT, "status %s: %s", ckey_status_name(st), err.message);
        CHECKF(strstr(err.message, bad) && strstr(err.message, "frame 2"), "%s", err.message);
        printf("  %s\n", err.message);
        /* later calls keep failing cleanly or recover: never a crash */
        (void)ckey_video_read_frame(r, 4, rgb, NULL, NULL, &err);
        CHECK(ckey_video_read_frame(r, 0, rgb, NULL, NULL, &err) == CKEY_OK);
        free(rgb);
        ckey_video_reader_free(r);
    }
}

/* The index first (faststart), the media cut off: frames read until the
 * data ends, then an error naming the frame, never a short clip passed as
 * whole. */
static void test_truncated_data(void) {
    const char *full = path_in("fast.mov");
    const yuv_clip c = {96, 64, 6, AVCOL_SPC_BT709, AVCOL_RANGE_MPEG, 400, 500, 520, "faststart", 0, 0};
    REQUIRE(write_ffv1(full, &c));
    size_t n;
    unsigned char *data = slurp(full, &n);
    REQUIRE(data);
    const char *cut = path_in("fast-cut.mov");
    REQUIRE(spill(cut, data, n * 6 / 10));
    free(data);
    ckey_video_info in;
    ckey_video_reader *r = open_ok(cut, &in);
    REQUIRE(r);
    CHECK(in.frame_count == 6);
    float *rgb = malloc(3 * sizeof(float) * 96 * 64);
    ckey_error err;
    ckey_status st = CKEY_OK;
    int f = 0;
    int32_t eof = 0;
    for (; f < 6 && st == CKEY_OK && !eof; f++) st = ckey_video_read_frame(r, f, rgb, NULL, &eof, &err);
    CHECKF(st == CKEY_ERR_FORMAT && eof == 0, "status %s after %d frames", ckey_status_name(st), f);
    CHECKF(strstr(err.message, cut) && strstr(err.message, "frame "), "%s", err.message);
    printf("  %s\n", err.message);
    free(rgb);
    ckey_video_reader_free(r);
}

/* Absurd sizes: refused from the container header, before any picture is
 * allocated; the writer refuses them too. */
static void test_caps(void) {
    /* FFV1 keeps no size of its own: Matroska's PixelWidth / PixelHeight
     * (EBML B0 / BA, two-byte values here) are the only source */
    const char *src = path_in("caps.mkv");
    const yuv_clip c = {300, 260, 1, AVCOL_SPC_BT709, AVCOL_RANGE_MPEG, 400, 500, 520, NULL, 0, 0};
    REQUIRE(write_ffv1(src, &c));
    size_t n;
    unsigned char *data = slurp(src, &n);
    REQUIRE(data);
    static const unsigned char pw[4] = {0xB0, 0x82, 0x01, 0x2C}, ph[4] = {0xBA, 0x82, 0x01, 0x04};
    unsigned char *wp = NULL, *hp = NULL;
    for (size_t i = 0; i + 4 <= n; i++) {
        if (!wp && !memcmp(data + i, pw, 4)) wp = data + i;
        if (!hp && !memcmp(data + i, ph, 4)) hp = data + i;
    }
    REQUIRE(wp && hp);
    wp[2] = 0x9C, wp[3] = 0x40; /* 40000 */
    const char *wide = path_in("wide.mkv");
    REQUIRE(spill(wide, data, n));
    expect_open_fail(wide, CKEY_ERR_UNSUPPORTED, "side limit");
    wp[2] = 0x4E, wp[3] = 0x20; /* 20000 x 20000 */
    hp[2] = 0x4E, hp[3] = 0x20;
    const char *big = path_in("big.mkv");
    REQUIRE(spill(big, data, n));
    expect_open_fail(big, CKEY_ERR_UNSUPPORTED, "pixels");
    free(data);

    /* a lowered cap (the fuzz target's) applies to real frames too */
    const char *small = path_in("small.mov");
    REQUIRE(write_clip(small, CKEY_VIDEO_PRORES_422HQ, 0, 1) == CKEY_OK);
    data = slurp(small, &n);
    REQUIRE(data);
    ckey_video_reader *r = (ckey_video_reader *)1;
    ckey_error err;
    CHECK(ck_video_reader_open_memory(data, n, "mem.mov", 1, 1000, &r, &err) ==
          CKEY_ERR_UNSUPPORTED);
    CHECK(r == NULL);
    printf("  %s\n", err.message);
    CHECK(ck_video_reader_open_memory(data, n, "mem.mov", 1, 0, &r, &err) == CKEY_OK);
    ckey_video_reader_free(r);
    free(data);

    ckey_video_writer_options o = {CKEY_VIDEO_PRORES_4444, 40000, 16, 24, 1, 1};
    ckey_video_writer *w = (ckey_video_writer *)1;
    CHECK(ckey_video_writer_open(path_in("huge.mov"), &o, &w, &err) == CKEY_ERR_INVALID_ARG);
    CHECK(w == NULL);
}

static void test_writer_args(void) {
    ckey_error err;
    ckey_video_writer *w = NULL;
    ckey_video_writer_options o = {CKEY_VIDEO_H264, 63, 48, 24, 1, 1};
    CHECK(ckey_video_writer_open(path_in("odd.mp4"), &o, &w, &err) == CKEY_ERR_INVALID_ARG);
    CHECKF(strstr(err.message, "even") != NULL, "%s", err.message);
    o.width = 64;
    CHECK(ckey_video_writer_open(path_in("x.avi"), &o, &w, &err) == CKEY_ERR_INVALID_ARG);
    o.codec = CKEY_VIDEO_PRORES_4444;
    CHECK(ckey_video_writer_open(path_in("x.mp4"), &o, &w, &err) == CKEY_ERR_INVALID_ARG);
    o.rate_num = -1;
    CHECK(ckey_video_writer_open(path_in("x.mov"), &o, &w, &err) == CKEY_ERR_INVALID_ARG);
    o.rate_num = 0;
    o.rate_den = 0; /* 24 fps by default */
    /* an abandoned writer leaves nothing behind; close without frames fails
     * and leaves nothing either */
    const char *p = path_in("abandoned.mov");
    char tmp[600];
    char *lt = ckey_temp_path(p);
    snprintf(tmp, sizeof tmp, "%s", lt ? lt : "");
    free(lt);
    struct stat sb;
    REQUIRE(ckey_video_writer_open(p, &o, &w, &err) == CKEY_OK);
    CHECK(stat(tmp, &sb) == 0);
    float *px = calloc((size_t)4 * 64 * 48, sizeof(float));
    CHECK(ckey_video_write_frame(w, px, NULL, &err) == CKEY_OK);
    ckey_video_writer_free(w);
    CHECK(stat(tmp, &sb) != 0 && stat(p, &sb) != 0);
    REQUIRE(ckey_video_writer_open(p, &o, &w, &err) == CKEY_OK);
    CHECK(ckey_video_writer_close(w, &err) == CKEY_ERR_INVALID_ARG);
    CHECK(stat(tmp, &sb) != 0 && stat(p, &sb) != 0);
    /* 24 fps default reaches the file */
    REQUIRE(ckey_video_writer_open(p, &o, &w, &err) == CKEY_OK);
    CHECK(ckey_video_write_frame(w, px, NULL, &err) == CKEY_OK);
    CHECK(ckey_video_writer_close(w, &err) == CKEY_OK);
    ckey_video_info in;
    ckey_video_reader *r = open_ok(p, &in);
    if (r) CHECK(in.rate_num == 24 && in.rate_den == 1 && in.frame_count == 1);
    ckey_video_reader_free(r);
    free(px);
    ckey_video_writer_free(NULL);
    ckey_video_reader_free(NULL);
}


/*
 * A coded-mode ProRes writer (ck_video_writer_open_coded): frames coded by
 * four threads at once, out of order, then muxed in order, give the very
 * bytes of the plain writer's single encoder (frame-threaded by FFmpeg),
 * and so do frames coded one ahead and muxed between serial writes (the
 * video tee's first frames); read back, every frame is its input within
 * the codec's tolerance (frames apart by 0.04 in blue: an order swap shows).
 */
enum { CW = 320, CH = 176, CNF = 16, CODERS = 4 };

static void coded_input(float *p, int f) {
    const size_t plane = (size_t)CW * CH;
    for (int y = 0; y < CH; y++)
        for (int x = 0; x < CW; x++) {
            const size_t i = (size_t)y * CW + x;
            /* smooth colours under a fine gray texture (luma alone, which
             * 4:2:2 keeps), so slices differ in cost */
            const float tex = 0.03f * (float)(((x * 7 + y * 13) % 17) - 8) / 8.0f;
            p[i] = 0.2f + 0.6f * (float)x / (CW - 1) + tex;
            p[plane + i] = 0.15f + 0.7f * (float)y / (CH - 1) + tex;
            p[2 * plane + i] = 0.1f + 0.04f * (float)f + 0.1f * (float)(x + y) / (CW + CH) + tex;
            p[3 * plane + i] = 0.05f + 0.9f * (float)(x + 2 * y) / (CW + 2 * CH) + 0.2f * tex;
        }
}

typedef struct coding {
    ckey_video_writer *w;
    float *const *frames;
    const int *keys;
    int first;
    ckey_status st;
} coding;

/* Frames first, first + CODERS, ... coded last to first. */
static void *code_some(void *arg) {
    coding *c = arg;
    c->st = CKEY_OK;
    for (int i = CNF - 1; i >= 0 && c->st == CKEY_OK; i--) {
        if (i % CODERS != c->first) continue;
        ckey_error err;
        c->st = ck_video_code_frame(c->w, &c->keys[i], NULL, c->frames[i],
                                    c->frames[i] + 3 * (size_t)CW * CH, &err);
        if (c->st != CKEY_OK) fprintf(stderr, "  frame %d: %s\n", i, err.message);
    }
    return NULL;
}

static void test_coded_concurrent(void) {
    const size_t plane = (size_t)CW * CH;
    float *frames[CNF];
    int keys[CNF];
    for (int i = 0; i < CNF; i++) {
        frames[i] = malloc(4 * plane * sizeof(float));
        REQUIRE(frames[i]);
        coded_input(frames[i], i);
    }
    static const ckey_video_codec codecs[2] = {CKEY_VIDEO_PRORES_4444, CKEY_VIDEO_PRORES_422HQ};
    for (int ci = 0; ci < 2; ci++) {
        const int alpha = codecs[ci] == CKEY_VIDEO_PRORES_4444;
        char ref[600], conc[600], mixed[600];
        snprintf(ref, sizeof ref, "%s", path_in(alpha ? "ref4444.mov" : "ref422.mov"));
        snprintf(conc, sizeof conc, "%s", path_in(alpha ? "conc4444.mov" : "conc422.mov"));
        snprintf(mixed, sizeof mixed, "%s", path_in(alpha ? "mixed4444.mov" : "mixed422.mov"));
        ckey_error err;
        ckey_video_writer *w = NULL;
        /* the plain writer: one encoder, FFmpeg's threads */
        ckey_video_writer_options o = {codecs[ci], CW, CH, 25, 1, 0};
        REQUIRE(ckey_video_writer_open(ref, &o, &w, &err) == CKEY_OK);
        for (int i = 0; i < CNF; i++)
            CHECK(ckey_video_write_frame(w, frames[i], alpha ? frames[i] + 3 * plane : NULL, &err) ==
                  CKEY_OK);
        CHECKF(ckey_video_writer_close(w, &err) == CKEY_OK, "%s", err.message);

        /* coded by CODERS threads at once, muxed in order */
        REQUIRE(ck_video_writer_open_coded(conc, &o, &w, &err) == CKEY_OK);
        float *inputs[CNF];
        for (int i = 0; i < CNF; i++) inputs[i] = frames[i];
        float *noalpha[CNF]; /* 422 HQ has no alpha: the planes' fourth is ignored */
        for (int i = 0; i < CNF; i++) noalpha[i] = frames[i];
        coding jobs[CODERS];
        pthread_t th[CODERS];
        for (int k = 0; k < CODERS; k++) {
            jobs[k] = (coding){w, alpha ? inputs : noalpha, keys, k, CKEY_OK};
            CHECK(pthread_create(&th[k], NULL, code_some, &jobs[k]) == 0);
        }
        for (int k = 0; k < CODERS; k++) {
            pthread_join(th[k], NULL);
            CHECK(jobs[k].st == CKEY_OK);
        }
        int muxed = -1;
        CHECK(ck_video_mux_frame(w, &muxed, &muxed, &err) == CKEY_OK && muxed == 0); /* no such key */
        for (int i = 0; i < CNF; i++) {
            CHECKF(ck_video_mux_frame(w, &keys[i], &muxed, &err) == CKEY_OK && muxed == 1, "frame %d: %s", i,
                   err.message);
        }
        CHECKF(ckey_video_writer_close(w, &err) == CKEY_OK, "%s", err.message);
        CHECKF(ck_same_file(ref, conc), "%s differs from %s", conc, ref);

        /* coded one ahead between serial writes, two threads in all */
        o.threads = 2;
        REQUIRE(ck_video_writer_open_coded(mixed, &o, &w, &err) == CKEY_OK);
        for (int i = 0; i < CNF; i += 2) {
            const float *a = alpha ? frames[i] : NULL, *b = alpha && i + 1 < CNF ? frames[i + 1] : NULL;
            if (i + 1 < CNF)
                CHECK(ck_video_code_frame(w, &keys[i + 1], NULL, frames[i + 1], b ? b + 3 * plane : NULL,
                                          &err) == CKEY_OK);
            CHECK(ck_video_write_frame_on(w, NULL, frames[i], a ? a + 3 * plane : NULL, &err) == CKEY_OK);
            if (i + 1 < CNF) CHECK(ck_video_mux_frame(w, &keys[i + 1], &muxed, &err) == CKEY_OK && muxed == 1);
        }
        CHECKF(ckey_video_writer_close(w, &err) == CKEY_OK, "%s", err.message);
        CHECKF(ck_same_file(ref, mixed), "%s differs from %s", mixed, ref);

        /* read back: each frame is its own input */
        ckey_video_info in;
        ckey_video_reader *r = open_ok(conc, &in);
        REQUIRE(r);
        CHECK(in.width == CW && in.height == CH && in.frame_count == CNF);
        float *got = malloc(4 * plane * sizeof(float));
        double worst = 0, aworst = 0, own = 0, next = 1;
        for (int i = 0; i < CNF; i++) {
            int32_t eof = -1;
            CHECK(ckey_video_read_frame(r, i, got, got + 3 * plane, &eof, &err) == CKEY_OK && eof == 0);
            /* the mean error against this frame's input and a neighbour's */
            double e_own = 0, e_next = 0;
            const float *nb = frames[i + 1 < CNF ? i + 1 : i - 1];
            for (size_t k = 0; k < 3 * plane; k++) {
                const double e = fabs((double)got[k] - frames[i][k]);
                worst = e > worst ? e : worst;
                e_own += e;
                e_next += fabs((double)got[k] - nb[k]);
            }
            own = fmax(own, e_own / (3.0 * plane));
            next = fmin(next, e_next / (3.0 * plane));
            if (alpha)
                for (size_t k = 3 * plane; k < 4 * plane; k++) {
                    const double e = fabs((double)got[k] - frames[i][k]);
                    aworst = e > aworst ? e : aworst;
                }
        }
        printf("  %s: %d frames coded by %d threads = the single encoder's file; read back: rgb max abs "
               "err %.5f, mean at most %.5f (against the next frame's input at least %.5f); alpha max "
               "abs err %.6f\n", alpha ? "prores 4444" : "prores 422 HQ", CNF, CODERS, worst, own, next,
               aworst);
        CHECK(worst < 0.015 && own < 0.002 && next > 0.01); /* blue alone moves: 0.04 / 3 */
        CHECK(!alpha || aworst < 1.5 / 1023);
        free(got);
        ckey_video_reader_free(r);
    }
    for (int i = 0; i < CNF; i++) free(frames[i]);
    /* H.264 predicts frames from others: not coded apart */
    ckey_video_writer_options o = {CKEY_VIDEO_H264, 64, 48, 25, 1, 0};
    ckey_video_writer *w = (ckey_video_writer *)1;
    ckey_error err;
    CHECK(ck_video_writer_open_coded(path_in("x.mp4"), &o, &w, &err) == CKEY_ERR_INVALID_ARG && w == NULL);
}

static const ck_test_case cases[] = {
    {"h264", test_h264},
    {"prores_422_10bit", test_prores_422_10bit},
    {"prores_4444_alpha", test_prores_4444_alpha},
    {"hint_from_color", test_hint_from_color},
    {"packed_and_threads", test_packed_and_threads},
    {"rewind", test_rewind},
    {"matrix_and_range", test_matrix_and_range},
    {"chroma_siting", test_chroma_siting},
    {"swscale_fallback", test_swscale_fallback},
    {"bad_files", test_bad_files},
    {"truncated_data", test_truncated_data},
    {"caps", test_caps},
    {"writer_args", test_writer_args},
    {"coded_concurrent", test_coded_concurrent},
};

#endif /* CK_HAVE_FFMPEG */

int main(int argc, char **argv) {
    if (!ck_make_temp_dir(tmpdir, sizeof tmpdir, "video")) return 1;
    ckey_video_set_log_level(0);
    const int rc = ck_test_main(cases, (int)(sizeof cases / sizeof cases[0]), argc, argv);
    ck_remove_tree(tmpdir);
    return rc;
}
