/*
 * Writes the seeds of fuzz/corpus/video: tiny clips from ckey_video_writer
 * (ProRes 4444 with alpha, ProRes 422 HQ, H.264 in mp4 and Matroska) and a
 * raw RGB24 clip in NUT made with libavformat directly (a packed format: the
 * reader's swscale fallback), plus bad-* variants (cut short, a damaged frame
 * header):
 *   make build/libckey.a
 *   cc -std=c11 -D_GNU_SOURCE -Iinclude tools/make-video-corpus.c build/libckey.a \
 *       $(pkg-config --cflags --libs libavformat libavcodec libavutil libswscale) -lm \
 *       -o /tmp/mkvideo
 *   /tmp/mkvideo fuzz/corpus/video
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <libavcodec/avcodec.h>
#include <libavformat/avformat.h>

#include "ckey_media.h"
#include "ckey.h"

static int clip(const char *dir, const char *name, ckey_video_codec codec, int w, int h, int n) {
    char path[512];
    snprintf(path, sizeof path, "%s/%s", dir, name);
    ckey_video_writer_options o = {codec, w, h, 24, 1, 1};
    ckey_video_writer *wr;
    ckey_error err;
    if (ckey_video_writer_open(path, &o, &wr, &err) != CKEY_OK) {
        fprintf(stderr, "%s\n", err.message);
        return 1;
    }
    float *p = malloc(sizeof(float) * 4 * (size_t)w * (size_t)h);
    for (int f = 0; f < n; f++) {
        for (int i = 0; i < 4 * w * h; i++) p[i] = (float)((i * 7 + f * 13) % 29) / 28.0f;
        if (ckey_video_write_frame(wr, p, p + 3 * w * h, &err) != CKEY_OK) {
            fprintf(stderr, "%s\n", err.message);
            return 1;
        }
    }
    free(p);
    if (ckey_video_writer_close(wr, &err) != CKEY_OK) {
        fprintf(stderr, "%s\n", err.message);
        return 1;
    }
    return 0;
}

/* rawvideo rgb24, 8 x 6, 2 frames, in NUT */
static int raw_clip(const char *dir) {
    char path[512];
    snprintf(path, sizeof path, "%s/seed-rgb24.nut", dir);
    const AVCodec *codec = avcodec_find_encoder(AV_CODEC_ID_RAWVIDEO);
    AVFormatContext *fmt = NULL;
    if (!codec || avformat_alloc_output_context2(&fmt, NULL, "nut", path) < 0) return 1;
    AVCodecContext *e = avcodec_alloc_context3(codec);
    e->width = 8;
    e->height = 6;
    e->pix_fmt = AV_PIX_FMT_RGB24;
    e->time_base = (AVRational){1, 24};
    AVStream *st = avformat_new_stream(fmt, NULL);
    if (avcodec_open2(e, codec, NULL) < 0 || avcodec_parameters_from_context(st->codecpar, e) < 0 ||
        avio_open(&fmt->pb, path, AVIO_FLAG_WRITE) < 0)
        return 1;
    st->time_base = e->time_base;
    if (avformat_write_header(fmt, NULL) < 0) return 1;
    AVFrame *fr = av_frame_alloc();
    AVPacket *pkt = av_packet_alloc();
    fr->format = e->pix_fmt;
    fr->width = 8;
    fr->height = 6;
    if (av_frame_get_buffer(fr, 0) < 0) return 1;
    for (int f = 0; f <= 2; f++) {
        if (f < 2) {
            for (int y = 0; y < 6; y++)
                for (int x = 0; x < 24; x++) fr->data[0][y * fr->linesize[0] + x] = (uint8_t)(x * 10 + y * 3 + f);
            fr->pts = f;
        }
        if (avcodec_send_frame(e, f < 2 ? fr : NULL) < 0) return 1;
        while (avcodec_receive_packet(e, pkt) >= 0) {
            av_packet_rescale_ts(pkt, e->time_base, st->time_base);
            if (av_interleaved_write_frame(fmt, pkt) < 0) return 1;
        }
    }
    if (av_write_trailer(fmt) < 0) return 1;
    av_packet_free(&pkt);
    av_frame_free(&fr);
    avcodec_free_context(&e);
    avio_closep(&fmt->pb);
    avformat_free_context(fmt);
    return 0;
}

static unsigned char *slurp(const char *path, size_t *n) {
    FILE *f = fopen(path, "rb");
    if (!f) return NULL;
    fseek(f, 0, SEEK_END);
    *n = (size_t)ftell(f);
    fseek(f, 0, SEEK_SET);
    unsigned char *b = malloc(*n);
    if (fread(b, 1, *n, f) != *n) *n = 0;
    fclose(f);
    return b;
}

static void spill(const char *dir, const char *name, const unsigned char *b, size_t n) {
    char path[512];
    snprintf(path, sizeof path, "%s/%s", dir, name);
    FILE *f = fopen(path, "wb");
    fwrite(b, 1, n, f);
    fclose(f);
}

int main(int argc, char **argv) {
    if (argc != 2) {
        fprintf(stderr, "usage: %s DIR\n", argv[0]);
        return 2;
    }
    const char *dir = argv[1];
    ckey_video_set_log_level(0);
    if (clip(dir, "seed-prores4444.mov", CKEY_VIDEO_PRORES_4444, 16, 8, 2) ||
        clip(dir, "seed-prores422.mov", CKEY_VIDEO_PRORES_422HQ, 16, 8, 2) ||
        clip(dir, "seed-h264.mp4", CKEY_VIDEO_H264, 16, 8, 3) ||
        clip(dir, "seed-h264.mkv", CKEY_VIDEO_H264, 16, 8, 3) || raw_clip(dir))
        return 1;
    char path[512];
    size_t n;
    snprintf(path, sizeof path, "%s/seed-prores4444.mov", dir);
    unsigned char *b = slurp(path, &n);
    spill(dir, "bad-cut.mov", b, n * 2 / 3);
    for (size_t i = 0, seen = 0; i + 4 <= n; i++)
        if (!memcmp(b + i, "icpf", 4) && seen++ == 1) memcpy(b + i, "icpX", 4);
    spill(dir, "bad-frame1.mov", b, n);
    free(b);
    snprintf(path, sizeof path, "%s/seed-h264.mkv", dir);
    b = slurp(path, &n);
    spill(dir, "bad-cut.mkv", b, n * 3 / 4);
    free(b);
    return 0;
}
