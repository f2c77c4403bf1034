/*
 * `ckey key` with video in and out (ckey_source_open_video, the video tee
 * sink), with the tiny fixture model at S = 32 on 64 x 48 clips of 5 frames
 * made here with ckey_video_writer: a ProRes 4444 plate with a ProRes 4444
 * hint (its alpha) in the official clip layout, an H.264 plate with
 * --hint auto, a plate sequence with a hint video. Each video run is checked
 * against `ckey key` on the same frames decoded here (ckey_video_reader) and
 * saved as float32 TIFFs, so both runs see identical pixels: the outputs must
 * agree to 1e-6. Then: 5-digit stems, resume over a video, count mismatch
 * and damaged-frame errors (frame and file named, frames before the damage
 * written), and --video-out (ProRes 4444 fg + alpha, H.264 comp) with its
 * resume refusal, the ProRes of three writers byte for byte one writer's;
 * the tee through its API, write() from several threads at once over an
 * ordered inner sink. Every case skips when ckey is built without FFmpeg.
 */
#include <dirent.h>
#include <limits.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "ckey_clip.h"
#include "ckey.h"
#include "support/clip.h"
#include "support/testutil.h"

#ifdef CK_HAVE_TIFF
#include <tiffio.h>
#endif

#define LEN(a) (sizeof(a) / sizeof((a)[0]))

enum { W = 64, H = 48, N = W * H, NF = 5 };

static char ckey_bin[PATH_MAX + 16];
static char workdir[256];
static char model[512];

/* `ckey key ARGS...` (NULL-terminated) with the same network settings for
 * every run: results comparable. S = 32, the smallest size, keeps the suite
 * fast under the sanitizers: these tests are about frames in and out, not
 * the network. Three writers: the tee gets the pass files written
 * concurrently and must still encode the frames in order (the passes do not
 * depend on the count) */
static const char *const common[] = {"--model", model, "--size", "32", "--threads", "1", "--writers", "3", NULL};
static const ck_cli cli = {ckey_bin, workdir, common, 1};
#define key(...) ck_cli_run(&cli, NULL, "key", __VA_ARGS__)

static const char *at(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
static const char *at(const char *fmt, ...) {
    static char buf[8][1024];
    static int k;
    k = (k + 1) % 8;
    int n = snprintf(buf[k], sizeof buf[k], "%s/", workdir);
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(buf[k] + n, sizeof buf[k] - (size_t)n, fmt, ap);
    va_end(ap);
    return buf[k];
}

/* Frame k: a warm ellipse drifting left to right over a green screen with a
 * vertical light falloff; the hint is the ellipse's core, softened. */
static void plate_frame(int k, float *rgb, float *hint) {
    const float cx = 16.0f + 8.0f * (float)k, cy = 22.0f;
    for (int y = 0; y < H; y++)
        for (int x = 0; x < W; x++) {
            const int i = y * W + x;
            const float dx = (x - cx) / 11.0f, dy = (y - cy) / 16.0f;
            const float d = sqrtf(dx * dx + dy * dy);
            float a = (1.0f - d) * 5.0f;
            a = a < 0 ? 0 : a > 1 ? 1 : a;
            const float g = 0.7f + 0.15f * (float)y / H;
            rgb[i] = 0.8f * a + 0.1f * (1 - a);
            rgb[N + i] = 0.45f * a + g * (1 - a);
            rgb[2 * N + i] = 0.35f * a + 0.15f * (1 - a);
            if (hint) {
                const float h = (0.8f - d) * 4.0f;
                hint[i] = h < 0 ? 0 : h > 1 ? 1 : h;
            }
        }
}

/* Frame k of a clip: the plate, or with alpha the hint as alpha over a flat
 * gray picture. */
static void clip_frame(void *user, int k, float *rgb, float *alpha) {
    (void)user;
    plate_frame(k, rgb, alpha);
    if (alpha)
        for (int i = 0; i < 3 * N; i++) rgb[i] = 0.5f;
}

/* A clip of `frames` frames; `alpha_hint`: the hint as alpha (ProRes 4444),
 * with a flat gray picture. */
static int write_clip(const char *path, ckey_video_codec codec, int frames, int alpha_hint) {
    return ck_write_video(path, codec, W, H, frames, alpha_hint, clip_frame, NULL) == CKEY_OK;
}

/* <workdir>/<name> made afresh in the official clip layout: a ProRes 4444
 * plate in Input/ and a ProRes 4444 hint (alpha) in AlphaHint/, NF frames. */
static int make_video_shot(const char *name) {
    ck_remove_tree(at("%s", name));
    return ck_mkdirs(at("%s/Input", name)) && ck_mkdirs(at("%s/AlphaHint", name)) &&
           write_clip(at("%s/Input/plate.mov", name), CKEY_VIDEO_PRORES_4444, NF, 0) &&
           write_clip(at("%s/AlphaHint/hint.mov", name), CKEY_VIDEO_PRORES_4444, NF, 1);
}

#ifdef CK_HAVE_TIFF
/* [c, h, w] floats as a float32 TIFF: read back bit for bit. */
static int write_tiff_float(const char *path, const float *data, int c) {
    TIFF *t = TIFFOpen(path, "w");
    if (!t) return 0;
    TIFFSetField(t, TIFFTAG_IMAGEWIDTH, (uint32_t)W);
    TIFFSetField(t, TIFFTAG_IMAGELENGTH, (uint32_t)H);
    TIFFSetField(t, TIFFTAG_SAMPLESPERPIXEL, (uint16_t)c);
    TIFFSetField(t, TIFFTAG_BITSPERSAMPLE, (uint16_t)32);
    TIFFSetField(t, TIFFTAG_SAMPLEFORMAT, (uint16_t)SAMPLEFORMAT_IEEEFP);
    TIFFSetField(t, TIFFTAG_PLANARCONFIG, (uint16_t)PLANARCONFIG_CONTIG);
    TIFFSetField(t, TIFFTAG_PHOTOMETRIC, (uint16_t)(c == 3 ? PHOTOMETRIC_RGB : PHOTOMETRIC_MINISBLACK));
    TIFFSetField(t, TIFFTAG_ROWSPERSTRIP, (uint32_t)H);
    TIFFSetField(t, TIFFTAG_COMPRESSION, (uint16_t)COMPRESSION_NONE);
    float row[3 * W];
    int ok = 1;
    for (int y = 0; y < H && ok; y++) {
        for (int x = 0; x < W; x++)
            for (int k = 0; k < c; k++) row[x * c + k] = data[(size_t)k * N + (size_t)y * W + x];
        ok = TIFFWriteScanline(t, row, (uint32_t)y, 0) >= 0;
    }
    TIFFClose(t);
    return ok;
}
#endif

/* Decode `video` (plate RGB, or its hint) into dir/00000.tif, ... */
static int decode_to_tiffs(const char *video, int as_hint, const char *dir) {
#ifdef CK_HAVE_TIFF
    if (!ck_mkdirs(dir)) return 0;
    ckey_video_reader *r = NULL;
    ckey_error err;
    if (ckey_video_reader_open(video, 1, &r, &err) != CKEY_OK) {
        printf("  %s\n", err.message);
        return 0;
    }
    float *px = malloc(sizeof(float) * 3 * N);
    int ok = px != NULL;
    for (int k = 0; k < NF && ok; k++) {
        ok = (as_hint ? ckey_video_read_hint(r, k, px, NULL, &err)
                      : ckey_video_read_frame(r, k, px, NULL, NULL, &err)) == CKEY_OK;
        char p[1024];
        snprintf(p, sizeof p, "%s/%05d.tif", dir, k);
        ok = ok && write_tiff_float(p, px, as_hint ? 1 : 3);
    }
    free(px);
    ckey_video_reader_free(r);
    return ok;
#else
    (void)video, (void)as_hint, (void)dir;
    return 0;
#endif
}

static const char *const passes[4] = {"Matte", "FG", "Processed", "Comp"};

/* Files in a directory (excluding dot files); *tmp counts names ending .tmp. */
static int count_files(const char *dir, int *tmp) {
    DIR *d = opendir(dir);
    int n = 0;
    struct dirent *e;
    while (d && (e = readdir(d))) {
        if (e->d_name[0] == '.') continue;
        n++;
        const size_t l = strlen(e->d_name);
        if (tmp && l > 4 && !strcmp(e->d_name + l - 4, ".tmp")) (*tmp)++;
    }
    if (d) closedir(d);
    return n;
}

/* Passes of frames `first`..`last` under out/ exist with stems 00000, ...;
 * right size and channels; each pass dir holds exactly those; no .tmp. */
static void check_passes(const char *out, int first, int last) {
    ckey_error err;
    int tmp = 0;
    for (int pass = 0; pass < 4; pass++) {
        char d[1024];
        snprintf(d, sizeof d, "%s/%s", out, passes[pass]);
        const int files = count_files(d, &tmp);
        CHECKF(files == last - first + 1, "%s holds %d files, expected %d", d, files, last - first + 1);
        for (int k = first; k <= last; k++) {
            char p[1100];
            snprintf(p, sizeof p, "%s/%05d.%s", d, k, pass == 3 ? "png" : "exr");
            ckey_image img;
            memset(&img, 0, sizeof img);
            const ckey_status st = ckey_image_read(p, pass == 0 ? CKEY_IMAGE_HINT : CKEY_IMAGE_RGB, &img, &err);
            CHECKF(st == CKEY_OK, "%s: %s", p, err.message);
            if (st != CKEY_OK) continue;
            CHECKF(img.width == W && img.height == H, "%s is %d x %d", p, img.width, img.height);
            if (pass == 0) CHECKF(img.channels == 1 && !img.has_alpha, "%s: Matte is not one Y channel", p);
            if (pass == 1) CHECKF(!img.has_alpha, "%s: FG has alpha", p);
            if (pass == 2) CHECKF(img.has_alpha, "%s: Processed has no alpha", p);
            CHECKF(img.bit_depth == (pass == 3 ? 8 : 16), "%s: bit depth %d", p, img.bit_depth);
            ckey_image_free(&img);
        }
    }
    CHECKF(tmp == 0, "%d temporary files left under %s", tmp, out);
}

/* Every pass of frames first..last in `a` equals the one in `b`; returns the
 * max abs difference over all of them (RGB and, for Processed, alpha). */
static double compare_outputs(const char *a, const char *b, int first, int last) {
    double worst = 0;
    ckey_error err;
    for (int pass = 0; pass < 4; pass++)
        for (int k = first; k <= last; k++)
            for (int kind = 0; kind < (pass == 2 ? 2 : 1); kind++) {
                const ckey_image_kind ik = pass == 0 || kind == 1 ? CKEY_IMAGE_HINT : CKEY_IMAGE_RGB;
                char pa[1100], pb[1100];
                snprintf(pa, sizeof pa, "%s/%s/%05d.%s", a, passes[pass], k, pass == 3 ? "png" : "exr");
                snprintf(pb, sizeof pb, "%s/%s/%05d.%s", b, passes[pass], k, pass == 3 ? "png" : "exr");
                ckey_image x, y;
                memset(&x, 0, sizeof x);
                memset(&y, 0, sizeof y);
                if (ckey_image_read(pa, ik, &x, &err) != CKEY_OK || ckey_image_read(pb, ik, &y, &err) != CKEY_OK ||
                    x.width != y.width || x.height != y.height || x.channels != y.channels) {
                    printf("  cannot compare %s with %s: %s\n", pa, pb, err.message);
                    worst = INFINITY;
                } else {
                    const size_t n = (size_t)x.width * x.height * x.channels;
                    for (size_t i = 0; i < n; i++) {
                        const double d = fabs((double)x.data[i] - (double)y.data[i]);
                        if (!(d <= worst)) worst = isnan(d) ? INFINITY : d;
                    }
                }
                ckey_image_free(&x);
                ckey_image_free(&y);
            }
    return worst;
}

#define NEED_SETUP() NEED_CKEY(ckey_bin, model)

#define NEED_TIFF()                                                                       \
    do {                                                                                  \
        if (!have_tiff) SKIP("built without libtiff: no float frames to compare with");  \
    } while (0)

#ifdef CK_HAVE_TIFF
static const int have_tiff = 1;
#else
static const int have_tiff = 0;
#endif

/* The official clip layout with a ProRes 4444 plate in Input/ and a ProRes
 * 4444 hint (alpha) in AlphaHint/; then the same frames as float TIFFs. */
static void test_prores_clip(void) {
    NEED_SETUP();
    NEED_TIFF();
    REQUIRE(make_video_shot("prores"));
    const char *shot = at("prores");
    ck_run_result r = key(shot, "--json", NULL);
    CHECKF(r.code == 0, "exit %d: %s", r.code, r.err);
    CHECK(ck_count_str(r.out, "\"status\":\"keyed\"") == NF);
    CHECK(strstr(r.out, "\"frame\":0,\"status\":\"keyed\"") != NULL);
    ck_run_free(&r);
    check_passes(at("prores/Output"), 0, NF - 1);

    /* the same decoded pixels as an image sequence */
    REQUIRE(decode_to_tiffs(at("prores/Input/plate.mov"), 0, at("seq/Input")));
    REQUIRE(decode_to_tiffs(at("prores/AlphaHint/hint.mov"), 1, at("seq/AlphaHint")));
    r = key(at("seq"), NULL);
    CHECKF(r.code == 0, "exit %d: %s", r.code, r.err);
    ck_run_free(&r);
    double e = compare_outputs(at("prores/Output"), at("seq/Output"), 0, NF - 1);
    printf("  video shot vs its decoded frames as a float TIFF sequence: max abs diff %g over every pass\n", e);
    CHECKF(e <= 1e-6, "outputs differ by %g", e);

    /* a plate sequence with the hint video: pairs frame N with hint frame N
     * (frames 3-4: the hint video decodes through 0-2) */
    r = key("--plate", at("seq/Input"), "--hint", at("prores/AlphaHint/hint.mov"), "--out", at("mixed"),
            "--frames", "3-4", NULL);
    CHECKF(r.code == 0, "exit %d: %s", r.code, r.err);
    ck_run_free(&r);
    check_passes(at("mixed"), 3, 4);
    e = compare_outputs(at("mixed"), at("seq/Output"), 3, 4);
    printf("  plate sequence + hint video vs the sequences: max abs diff %g\n", e);
    CHECKF(e <= 1e-6, "outputs differ by %g", e);
    /* a plate video with the hint sequence */
    r = key("--plate", at("prores/Input"), "--hint", at("seq/AlphaHint"), "--out", at("mixed2"), "--frames",
            "2-3", NULL);
    CHECKF(r.code == 0, "exit %d: %s", r.code, r.err);
    ck_run_free(&r);
    e = compare_outputs(at("mixed2"), at("seq/Output"), 2, 3);
    printf("  plate video + hint sequence vs the sequences: max abs diff %g\n", e);
    CHECKF(e <= 1e-6, "outputs differ by %g", e);
}

/* An H.264 plate with --hint auto; --frames and resume over a video. */
static void test_h264_auto_resume(void) {
    NEED_SETUP();
    NEED_TIFF();
    const char *clip = at("h264/plate.mp4");
    REQUIRE(ck_mkdirs(at("h264")));
    REQUIRE(write_clip(clip, CKEY_VIDEO_H264, NF, 0));
    const char *out = at("h264/out");
    ck_run_result r = key("--plate", clip, "--hint", "auto", "--out", out, "--frames", "1-2", "--json", NULL);
    CHECKF(r.code == 0, "exit %d: %s", r.code, r.err);
    CHECK(ck_count_str(r.out, "\"status\":\"keyed\"") == 2);
    ck_run_free(&r);
    check_passes(out, 1, 2);
    /* resume: frames 1 and 2 are complete (decoded through, not keyed) */
    r = key("--plate", clip, "--hint", "auto", "--out", out, "--json", NULL);
    CHECKF(r.code == 0, "exit %d: %s", r.code, r.err);
    CHECK(ck_count_str(r.out, "\"status\":\"keyed\"") == 3 && ck_count_str(r.out, "\"status\":\"skipped\"") == 2);
    CHECK(strstr(r.out, "\"frame\":1,\"status\":\"skipped\"") && strstr(r.out, "\"frame\":3,\"status\":\"keyed\""));
    ck_run_free(&r);
    check_passes(out, 0, NF - 1);

    REQUIRE(decode_to_tiffs(clip, 0, at("h264seq")));
    r = key("--plate", at("h264seq"), "--hint", "auto", "--out", at("h264seq-out"), NULL);
    CHECKF(r.code == 0, "exit %d: %s", r.code, r.err);
    ck_run_free(&r);
    const double e = compare_outputs(out, at("h264seq-out"), 0, NF - 1);
    printf("  H.264 + auto hint, keyed in two runs, vs the decoded frames: max abs diff %g\n", e);
    CHECKF(e <= 1e-6, "outputs differ by %g", e);
}

/* Plates and hints that do not pair: the error names the missing frame. */
static void test_count_mismatch(void) {
    NEED_SETUP();
    REQUIRE(ck_mkdirs(at("mm")));
    REQUIRE(write_clip(at("mm/plate.mov"), CKEY_VIDEO_PRORES_422HQ, NF, 0));
    REQUIRE(write_clip(at("mm/hint.mov"), CKEY_VIDEO_PRORES_4444, 3, 1));
    ck_run_result r = key("--plate", at("mm/plate.mov"), "--hint", at("mm/hint.mov"), "--out", at("mm/out"), NULL);
    CHECKF(r.code == 1, "exit %d", r.code);
    CHECKF(strstr(r.err, "frame 3: plate ") && strstr(r.err, "plate.mov#3 has no hint in ") &&
               strstr(r.err, "hint.mov"), "%s", r.err);
    CHECKF(strstr(r.err, "frame counts differ: plate ") && strstr(r.err, "has 5 frames, hint "), "%s", r.err);
    printf("  %s", r.err);
    ck_run_free(&r);
    CHECK(!ck_exists(at("mm/out"))); /* refused before anything is keyed */

    /* the other way round: hint frames without a plate are ignored */
    r = key("--plate", at("mm/hint.mov"), "--hint", at("mm/plate.mov"), "--out", at("mm/out2"), "--json",
            "--dry-run", NULL);
    CHECKF(r.code == 0, "exit %d: %s", r.code, r.err);
    CHECK(ck_count_str(r.out, "\"status\":\"would_key\"") == 3 && strstr(r.out, "\"event\":\"warning\""));
    ck_run_free(&r);

    /* a hint sequence numbered from 1 misses the video's frame 0 */
    REQUIRE(ck_mkdirs(at("mm/hints")));
    float *hint = malloc(sizeof(float) * 4 * N);
    REQUIRE(hint);
    ckey_error err;
    for (int k = 1; k <= NF; k++) {
        plate_frame(k - 1, hint + N, hint);
        REQUIRE(ckey_image_write_png(at("mm/hints/h_%04d.png", k), hint, 1, W, H, 8, &err) == CKEY_OK);
    }
    free(hint);
    r = key("--plate", at("mm/plate.mov"), "--hint", at("mm/hints"), "--out", at("mm/out3"), NULL);
    CHECKF(r.code == 1 && strstr(r.err, "frame 0: plate ") && strstr(r.err, "numbered from 0"), "exit %d: %s",
           r.code, r.err);
    ck_run_free(&r);
    /* two videos in Input/ */
    REQUIRE(ck_mkdirs(at("mm/two/Input")));
    REQUIRE(write_clip(at("mm/two/Input/a.mov"), CKEY_VIDEO_PRORES_422HQ, 1, 0));
    REQUIRE(write_clip(at("mm/two/Input/b.mov"), CKEY_VIDEO_PRORES_422HQ, 1, 0));
    r = key(at("mm/two"), "--hint", "auto", NULL);
    CHECKF(r.code == 1 && strstr(r.err, "holds 2 video files"), "exit %d: %s", r.code, r.err);
    ck_run_free(&r);
}

/* A Matroska plate declares no frame count: it is counted by decoding. */
static void test_mkv_count(void) {
    NEED_SETUP();
    REQUIRE(ck_mkdirs(at("mkv")));
    const char *clip = at("mkv/plate.mkv");
    REQUIRE(write_clip(clip, CKEY_VIDEO_PRORES_422HQ, NF, 0));
    ckey_video_reader *rd = NULL;
    ckey_error err;
    REQUIRE(ckey_video_reader_open(clip, 1, &rd, &err) == CKEY_OK);
    ckey_video_info in;
    ckey_video_reader_get_info(rd, &in);
    ckey_video_reader_free(rd);
    printf("  %s declares %lld frames\n", clip, (long long)in.frame_count);
    ck_run_result r = key("--plate", clip, "--hint", "auto", "--out", at("mkv/out"), "--dry-run", NULL);
    CHECKF(r.code == 0, "exit %d: %s", r.code, r.err);
    CHECKF(ck_count_str(r.out, ": key  (") == NF && strstr(r.out, "frame 4: key  (") && !strstr(r.out, "frame 5"),
           "%s", r.out);
    ck_run_free(&r);
}

/* Frame 2 of the plate damaged: frames 0 and 1 are written, the error names
 * the file and frame 2, exit 1, nothing half-written. */
static void test_damaged_plate(void) {
    NEED_SETUP();
    REQUIRE(ck_mkdirs(at("dmg")));
    const char *good = at("dmg/good.mov");
    REQUIRE(write_clip(good, CKEY_VIDEO_PRORES_4444, NF, 0));
    size_t n = 0;
    unsigned char *data = ck_read_file(good, &n);
    REQUIRE(data);
    int seen = 0;
    for (size_t i = 0; i + 4 <= n; i++)
        if (!memcmp(data + i, "icpf", 4) && seen++ == 2) {
            memset(data + i, 'X', 4); /* frame 2's ProRes frame header */
            break;
        }
    const char *bad = at("dmg/plate.mov");
    FILE *f = fopen(bad, "wb");
    REQUIRE(f);
    const int ok = fwrite(data, 1, n, f) == n;
    REQUIRE(fclose(f) == 0 && ok && seen == 3);
    free(data);
    for (int ra = 0; ra <= 2; ra += 2) {
        const char *out = at("dmg/out%d", ra);
        ck_run_result r = key("--plate", bad, "--hint", "auto", "--out", out, "--read-ahead", ra ? "2" : "0", NULL);
        CHECKF(r.code == 1, "exit %d", r.code);
        CHECKF(strstr(r.err, bad) && strstr(r.err, "frame 2"), "%s", r.err);
        CHECKF(strstr(r.err, "2 frames written before the error"), "%s", r.err);
        printf("  %s", r.err);
        ck_run_free(&r);
        check_passes(out, 0, 1);
    }
}

/* --video-out both: ProRes 4444 fg + alpha and H.264 comp beside the passes. */
static float lin_to_srgb(float v) {
    v = v < 0 ? 0 : v;
    return v <= 0.0031308f ? v * 12.92f : 1.055f * powf(v, 1.0f / 2.4f) - 0.055f;
}

static void test_video_out(void) {
    NEED_SETUP();
    char shot[1024], out[1024];
    snprintf(shot, sizeof shot, "%s", at("vo"));
    snprintf(out, sizeof out, "%s", at("vo/Output"));
    REQUIRE(make_video_shot("vo"));
    ck_run_result r = key(shot, "--video-out", "both", "--frames", "1-2", NULL);
    CHECKF(r.code == 2 && strstr(r.err, "--frames"), "exit %d: %s", r.code, r.err);
    ck_run_free(&r);
    r = key(shot, "--video-out", "both", "--on-error", "skip", NULL);
    CHECKF(r.code == 2 && strstr(r.err, "--on-error skip"), "exit %d: %s", r.code, r.err);
    ck_run_free(&r);
    r = key(shot, "--video-out", "sideways", NULL);
    CHECK(r.code == 2);
    ck_run_free(&r);

    /* no despeckle: the tiny model's matte has no islands of 400 px */
    r = key(shot, "--video-out", "both", "--no-despeckle", "--json", NULL);
    CHECKF(r.code == 0, "exit %d: %s", r.code, r.err);
    CHECK(strstr(r.out, "vo_fg_alpha.mov") && strstr(r.out, "vo_comp.mp4"));
    ck_run_free(&r);
    check_passes(out, 0, NF - 1);
    int tmp = 0;
    CHECKF(count_files(out, &tmp) == 6 && tmp == 0, "%s: %d .tmp files", out, tmp); /* 4 dirs + 2 videos */

    /* the videos: 5 frames of 64 x 48 at the plate's 25 fps; the ProRes
     * alpha is the Processed alpha and its RGB the Processed RGB
     * un-premultiplied, in sRGB; the H.264 picture is the Comp pass */
    const char *vid[2] = {at("vo/Output/vo_fg_alpha.mov"), at("vo/Output/vo_comp.mp4")};
    for (int v = 0; v < 2; v++) {
        ckey_video_reader *rd = NULL;
        ckey_error err;
        const ckey_status st = ckey_video_reader_open(vid[v], 1, &rd, &err);
        CHECKF(st == CKEY_OK, "%s", err.message);
        if (st != CKEY_OK) continue;
        ckey_video_info in;
        ckey_video_reader_get_info(rd, &in);
        printf("  %s: %s %s, %d x %d, %lld frames, %d/%d fps\n", vid[v], in.codec, in.pixel_format, in.width,
               in.height, (long long)in.frame_count, in.rate_num, in.rate_den);
        CHECK(in.width == W && in.height == H && in.frame_count == NF && in.rate_num == 25 && in.rate_den == 1);
        CHECK(!strcmp(in.codec, v == 0 ? "prores" : "h264"));
        CHECK(v == 1 || in.has_alpha);
        float *rgb = malloc(sizeof(float) * 4 * N);
        REQUIRE(rgb);
        double e_alpha = 0, e_rgb = 0, sum = 0, e_fg = 0;
        int fg_px = 0;
        for (int k = 0; k < NF; k++) {
            CHECK(ckey_video_read_frame(rd, k, rgb, rgb + 3 * N, NULL, &err) == CKEY_OK);
            ckey_image ref;
            memset(&ref, 0, sizeof ref);
            ckey_image pa;
            memset(&pa, 0, sizeof pa);
            const char *rp = v == 0 ? at("vo/Output/Processed/%05d.exr", k) : at("vo/Output/Comp/%05d.png", k);
            if (ckey_image_read(rp, CKEY_IMAGE_RGB, &ref, &err) != CKEY_OK ||
                (v == 0 && ckey_image_read(rp, CKEY_IMAGE_HINT, &pa, &err) != CKEY_OK)) {
                CHECKF(0, "%s: %s", rp, err.message);
                ckey_image_free(&ref);
                continue;
            }
            for (int i = 0; i < N; i++) {
                if (v == 0) {
                    const float a = pa.data[i] < 0 ? 0 : pa.data[i] > 1 ? 1 : pa.data[i];
                    e_alpha = fmax(e_alpha, fabsf(rgb[3 * N + i] - a));
                    sum += a;
                    if (pa.data[i] > 0.2f) {
                        fg_px++;
                        for (int c = 0; c < 3; c++) {
                            float want = lin_to_srgb(ref.data[c * N + i] / pa.data[i]);
                            want = want > 1 ? 1 : want;
                            e_fg = fmax(e_fg, fabsf(rgb[c * N + i] - want));
                        }
                    }
                } else {
                    /* 4:2:0 halves the chroma: compare luma closely, RGB loosely */
                    static const float ky[3] = {0.2126f, 0.7152f, 0.0722f};
                    float dy = 0;
                    for (int c = 0; c < 3; c++) {
                        e_rgb += fabsf(rgb[c * N + i] - ref.data[c * N + i]);
                        dy += ky[c] * (rgb[c * N + i] - ref.data[c * N + i]);
                    }
                    e_fg += fabsf(dy);
                }
            }
            ckey_image_free(&ref);
            ckey_image_free(&pa);
        }
        if (v == 0) {
            printf("  ProRes alpha vs Processed alpha: max abs err %.5f (10 bits), mean alpha %.3f; RGB vs "
                   "Processed un-premultiplied, in sRGB, where alpha > 0.2: max abs err %.5f (%d px)\n",
                   e_alpha, sum / (N * NF), e_fg, fg_px);
            CHECK(e_alpha < 2.0 / 1023 && sum > 0.02 * N * NF);
            CHECK(e_fg < 0.01 && fg_px > 0);
        } else {
            e_rgb /= 3.0 * N * NF;
            e_fg /= (double)N * NF;
            printf("  H.264 picture vs Comp: mean abs err of luma %.4f, of R, G, B %.4f\n", e_fg, e_rgb);
            /* the tiny model's untrained comp is noise (neighbouring pixels
             * differ by 0.06 on average), which H.264 at CRF 18 smooths */
            CHECK(e_fg < 0.03 && e_rgb < 0.06);
        }
        free(rgb);
        ckey_video_reader_free(rd);
    }

    /* the ProRes frames coded by three writers at once are muxed in order:
     * the file is byte for byte that of one writer coding them in turn */
    r = key(shot, "--video-out", "prores", "--no-despeckle", "--writers", "1", "--out", at("vo-w1"), NULL);
    CHECKF(r.code == 0, "exit %d: %s", r.code, r.err);
    ck_run_free(&r);
    char one[1024];
    snprintf(one, sizeof one, "%s", at("vo-w1/vo_fg_alpha.mov"));
    CHECKF(ck_same_file(at("vo/Output/vo_fg_alpha.mov"), one), "%s differs from --writers 1's %s",
           at("vo/Output/vo_fg_alpha.mov"), one);

    /* a re-run cannot resume a video */
    r = key(shot, "--video-out", "prores", NULL);
    CHECKF(r.code == 1 && strstr(r.err, "--force") && strstr(r.err, "5 of the 5 frames"), "exit %d: %s", r.code,
           r.err);
    ck_run_free(&r);
    r = key(shot, "--video-out", "h264", "--force", "--verbose", NULL);
    CHECKF(r.code == 0, "exit %d: %s", r.code, r.err);
    ck_run_free(&r);
    tmp = 0;
    CHECKF(count_files(out, &tmp) == 6 && tmp == 0, "%s: %d .tmp files", out, tmp);
}

/*
 * An image-sequence plate of odd size (63 x 47) with --video-out h264: the
 * H.264 (4:2:0 needs even sides) is padded to 64 x 48, the last column and
 * row repeated, at --fps (23.976 -> 24000/1001; default 24/1 for a
 * sequence); its picture matches the Comp pass. --fps needs --video-out.
 */
static void test_odd_sequence_fps(void) {
    NEED_SETUP();
    enum { OW = W - 1, OH = H - 1, ON = OW * OH, NS = 3 };
    char shot[1024];
    snprintf(shot, sizeof shot, "%s", at("odd"));
    ck_remove_tree(shot);
    REQUIRE(ck_mkdirs(at("odd/Input")) && ck_mkdirs(at("odd/AlphaHint")));
    float *rgb = malloc(sizeof(float) * 3 * N), *hint = malloc(sizeof(float) * N);
    float *crgb = malloc(sizeof(float) * 3 * ON), *chint = malloc(sizeof(float) * ON);
    REQUIRE(rgb && hint && crgb && chint);
    ckey_error err;
    for (int k = 0; k < NS; k++) {
        plate_frame(k, rgb, hint);
        for (int c = 0; c < 3; c++)
            for (int y = 0; y < OH; y++) memcpy(crgb + (c * OH + y) * OW, rgb + (c * H + y) * W, sizeof(float) * OW);
        for (int y = 0; y < OH; y++) memcpy(chint + y * OW, hint + y * W, sizeof(float) * OW);
        REQUIRE(ckey_image_write_png(at("odd/Input/p_%04d.png", k + 1), crgb, 3, OW, OH, 16, &err) == CKEY_OK);
        REQUIRE(ckey_image_write_png(at("odd/AlphaHint/h_%04d.png", k + 1), chint, 1, OW, OH, 8, &err) == CKEY_OK);
    }
    ck_run_result r = key(shot, "--fps", "24", NULL);
    CHECKF(r.code == 2 && strstr(r.err, "--video-out"), "exit %d: %s", r.code, r.err);
    ck_run_free(&r);
    r = key(shot, "--video-out", "h264", "--fps", "0", NULL);
    CHECK(r.code == 2);
    ck_run_free(&r);
    static const char *const fps[2] = {"23.976", NULL};
    static const int want_num[2] = {24000, 24}, want_den[2] = {1001, 1};
    for (int run = 0; run < 2; run++) {
        r = fps[run] ? key(shot, "--video-out", "h264", "--force", "--fps", fps[run], NULL)
                     : key(shot, "--video-out", "h264", "--force", NULL);
        CHECKF(r.code == 0, "exit %d: %s", r.code, r.err);
        ck_run_free(&r);
        ckey_video_reader *rd = NULL;
        const ckey_status st = ckey_video_reader_open(at("odd/Output/odd_comp.mp4"), 1, &rd, &err);
        CHECKF(st == CKEY_OK, "%s", err.message);
        if (st != CKEY_OK) continue;
        ckey_video_info in;
        ckey_video_reader_get_info(rd, &in);
        printf("  %s fps: %s %d x %d, %lld frames, %d/%d fps\n", fps[run] ? fps[run] : "default", in.codec,
               in.width, in.height, (long long)in.frame_count, in.rate_num, in.rate_den);
        CHECK(in.width == W && in.height == H && in.frame_count == NS);
        CHECKF(in.rate_num == want_num[run] && in.rate_den == want_den[run], "%d/%d", in.rate_num, in.rate_den);
        double e_in = 0, e_pad = 0;
        for (int k = 0; k < NS; k++) {
            CHECK(ckey_video_read_frame(rd, k, rgb, NULL, NULL, &err) == CKEY_OK);
            ckey_image cp;
            if (ckey_image_read(at("odd/Output/Comp/p_%04d.png", k + 1), CKEY_IMAGE_RGB, &cp, &err) != CKEY_OK) {
                CHECKF(0, "%s", err.message);
                continue;
            }
            static const float ky[3] = {0.2126f, 0.7152f, 0.0722f};
            for (int y = 0; y < H; y++)
                for (int x = 0; x < W; x++) {
                    /* the padded pixel shows its edge neighbour of the Comp */
                    const int sx = x < OW ? x : OW - 1, sy = y < OH ? y : OH - 1;
                    float dy = 0;
                    for (int c = 0; c < 3; c++) dy += ky[c] * (rgb[(c * H + y) * W + x] - cp.data[(c * OH + sy) * OW + sx]);
                    if (x < OW && y < OH) e_in += fabsf(dy);
                    else e_pad += fabsf(dy);
                }
            ckey_image_free(&cp);
        }
        e_in /= (double)ON * NS;
        e_pad /= (double)(N - ON) * NS;
        printf("  H.264 vs Comp, mean abs luma error: picture %.4f, padded column + row vs the edge %.4f\n", e_in,
               e_pad);
        CHECK(e_in < 0.03 && e_pad < 0.05);
        ckey_video_reader_free(rd);
    }
    int tmp = 0;
    count_files(at("odd/Output"), &tmp);
    CHECK(tmp == 0);
    free(rgb);
    free(hint);
    free(crgb);
    free(chint);
}


/*
 * The tee through its API over an ordered inner sink (no concurrent_write)
 * that records its calls: write() from three threads at once, each taking
 * its frames last to first (the ProRes coded there), then write_ordered()
 * in frame order. The inner sink's writes come one at a time, in frame
 * order, the ProRes is byte for byte that of a tee told it has one writer
 * (the ProRes on one frame-threaded encoder), fed a frame at a time, and
 * the H.264 frames come in order.
 */
enum { TF = 9, TEE_THREADS = 3 };

typedef struct rec_sink {
    pthread_mutex_t mu;
    int order[TF + 4];
    int n, busy, overlap;
} rec_sink;

static ckey_status rec_write(void *self, const ckey_shot_frame *f, const ckey_shot_passes *p, ckey_error *err) {
    (void)p, (void)err;
    rec_sink *r = self;
    pthread_mutex_lock(&r->mu);
    if (r->busy) r->overlap = 1;
    r->busy = 1;
    pthread_mutex_unlock(&r->mu);
    usleep(1000);
    pthread_mutex_lock(&r->mu);
    if (r->n < TF + 4) r->order[r->n] = (int)f->number;
    r->n++;
    r->busy = 0;
    pthread_mutex_unlock(&r->mu);
    return CKEY_OK;
}

typedef struct tee_feed {
    ckey_sink *tee;
    const ckey_shot_frame *frames;
    const ckey_shot_passes *fp;
    int first;
    ckey_status st;
} tee_feed;

static void *feed_writes(void *arg) {
    tee_feed *t = arg;
    t->st = CKEY_OK;
    for (int i = TF - 1; i >= 0 && t->st == CKEY_OK; i--) {
        if (i % TEE_THREADS != t->first) continue;
        ckey_error err;
        t->st = t->tee->write(t->tee->self, &t->frames[i], &t->fp[i], &err);
        if (t->st != CKEY_OK) fprintf(stderr, "  frame %d: %s\n", i, err.message);
    }
    return NULL;
}

/* One tee's videos from the frames: `writers` 0 fed by TEE_THREADS threads,
 * 1 a frame at a time. */
static int tee_videos(int writers, const char *fg_path, const char *comp_path, const ckey_shot_frame *frames,
                      const ckey_shot_passes *fp, rec_sink *rec) {
    memset(rec->order, 0, sizeof rec->order);
    rec->n = rec->busy = rec->overlap = 0;
    ckey_sink inner, tee;
    memset(&inner, 0, sizeof inner);
    inner.self = rec;
    inner.write = rec_write;
    ckey_video_tee_options vo;
    memset(&vo, 0, sizeof vo);
    vo.fg_alpha = fg_path;
    vo.comp = comp_path;
    vo.rate_num = 25;
    vo.rate_den = 1;
    vo.despill_strength = 0.5f;
    vo.writers = writers;
    ckey_error err;
    if (ckey_sink_open_video_tee(&inner, &vo, &tee, &err) != CKEY_OK) {
        fprintf(stderr, "  %s\n", err.message);
        return 0;
    }
    CHECK(tee.concurrent_write);
    int ok = 1;
    if (writers != 1) {
        tee_feed feed[TEE_THREADS];
        pthread_t th[TEE_THREADS];
        for (int k = 0; k < TEE_THREADS; k++) {
            feed[k] = (tee_feed){&tee, frames, fp, k, CKEY_OK};
            CHECK(pthread_create(&th[k], NULL, feed_writes, &feed[k]) == 0);
        }
        for (int k = 0; k < TEE_THREADS; k++) {
            pthread_join(th[k], NULL);
            ok &= feed[k].st == CKEY_OK;
        }
        CHECKF(rec->n == 0, "the ordered inner sink wrote %d frames from write()", rec->n);
    }
    for (int i = 0; i < TF && ok; i++) {
        if (writers == 1) ok &= tee.write(tee.self, &frames[i], &fp[i], &err) == CKEY_OK;
        if (ok && tee.write_ordered(tee.self, &frames[i], &fp[i], &err) != CKEY_OK) {
            fprintf(stderr, "  frame %d: %s\n", i, err.message);
            ok = 0;
        }
    }
    if (ok && tee.finish(tee.self, &err) != CKEY_OK) {
        fprintf(stderr, "  %s\n", err.message);
        ok = 0;
    }
    ckey_sink_close(&tee);
    return ok;
}

static void test_tee_api(void) {
    char stems[TF][16], plates[TF][32];
    ckey_shot_frame frames[TF];
    ckey_shot_passes fp[TF];
    float *px[TF];
    for (int k = 0; k < TF; k++) {
        snprintf(stems[k], sizeof stems[k], "%05d", k);
        snprintf(plates[k], sizeof plates[k], "plate/%05d.png", k);
        frames[k] = (ckey_shot_frame){.number = k, .stem = stems[k], .plate = plates[k]};
        /* fg [3, N], processed [4, N], comp [3, N]: the ellipse's frame k */
        px[k] = malloc(sizeof(float) * 10 * N);
        REQUIRE(px[k]);
        float *fg = px[k], *pr = fg + 3 * N, *comp = pr + 4 * N;
        plate_frame(k, fg, pr + 3 * N); /* its hint as the alpha */
        for (int i = 0; i < N; i++) {
            const float a = pr[3 * N + i];
            for (int c = 0; c < 3; c++) {
                pr[c * N + i] = fg[c * N + i] * a;
                comp[c * N + i] = 0.5f * fg[c * N + i] + 0.05f * (float)k; /* each frame its own level */
            }
        }
        fp[k] = (ckey_shot_passes){.width = W, .height = H, .fg = fg, .processed = pr, .comp = comp};
    }
    rec_sink rec;
    memset(&rec, 0, sizeof rec);
    REQUIRE(pthread_mutex_init(&rec.mu, NULL) == 0);
    char fg1[1024], comp1[1024], fg3[1024], comp3[1024];
    snprintf(fg1, sizeof fg1, "%s", at("tee1_fg_alpha.mov"));
    snprintf(comp1, sizeof comp1, "%s", at("tee1_comp.mp4"));
    snprintf(fg3, sizeof fg3, "%s", at("tee3_fg_alpha.mov"));
    snprintf(comp3, sizeof comp3, "%s", at("tee3_comp.mp4"));
    CHECK(tee_videos(1, fg1, comp1, frames, fp, &rec));
    CHECK(rec.n == TF && !rec.overlap);
    CHECK(tee_videos(0, fg3, comp3, frames, fp, &rec));
    CHECKF(rec.n == TF && !rec.overlap, "%d inner writes, overlap %d", rec.n, rec.overlap);
    for (int k = 0; k < TF && k < rec.n; k++) CHECKF(rec.order[k] == k, "inner write %d: frame %d", k, rec.order[k]);
    CHECKF(ck_same_file(fg1, fg3), "%s differs from %s", fg3, fg1);
    /* the H.264 frames in order: each nearest its own Comp (libx264's bytes
     * are not compared: two encoders in one process can code the same
     * frames differently, the tee's threads or not) */
    ckey_video_reader *rd = NULL;
    ckey_error err;
    REQUIRE(ckey_video_reader_open(comp3, 1, &rd, &err) == CKEY_OK);
    float *got = malloc(sizeof(float) * 3 * N);
    REQUIRE(got);
    double own = 0, other = 1;
    for (int k = 0; k < TF; k++) {
        CHECK(ckey_video_read_frame(rd, k, got, NULL, NULL, &err) == CKEY_OK);
        for (int j = 0; j < TF; j++) {
            const float *comp = fp[j].comp;
            double e = 0;
            for (int i = 0; i < 3 * N; i++) e += fabsf(got[i] - comp[i]);
            e /= 3.0 * N;
            if (j == k) own = fmax(own, e);
            else other = fmin(other, e);
        }
    }
    free(got);
    ckey_video_reader_free(rd);
    printf("  %d frames written by %d threads at once: inner sink in order, the ProRes the one-writer tee's "
           "byte for byte; H.264 frame k against Comp k: mean abs err at most %.4f, against another at least "
           "%.4f\n", TF, TEE_THREADS, own, other);
    CHECK(own < 0.5 * other);
    pthread_mutex_destroy(&rec.mu);
    for (int k = 0; k < TF; k++) free(px[k]);
}

int main(int argc, char **argv) {
    CK_TEST_NEEDS(CK_BUILT_FFMPEG && CK_BUILT_PNG && CK_BUILT_EXR,
                  "test-key-video: skipped: needs FFmpeg, PNG and OpenEXR support in the build\n");
    ck_ckey_path(ckey_bin, sizeof ckey_bin, argv[0]);
    ck_tiny_model_path(model, sizeof model);
    if (!ck_make_temp_dir(workdir, sizeof workdir, "key-video")) return 1;
    ckey_video_set_log_level(0);
    static const ck_test_case cases[] = {
        {"prores_clip", test_prores_clip},
        {"h264_auto_resume", test_h264_auto_resume},
        {"count_mismatch", test_count_mismatch},
        {"mkv_count", test_mkv_count},
        {"damaged_plate", test_damaged_plate},
        {"video_out", test_video_out},
        {"odd_sequence_fps", test_odd_sequence_fps},
        {"tee_api", test_tee_api},
    };
    const int rc = ck_test_main(cases, (int)LEN(cases), argc, argv);
    if (!getenv("CKEY_KEEP")) ck_remove_tree(workdir);
    return rc;
}
