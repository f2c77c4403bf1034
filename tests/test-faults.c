/*
 * Faults while keying a shot. Each case provokes one fault and checks that
 * the error names the file and the frame, the exit code is the documented
 * one (1 stop, 3 finished with skipped frames), every frame finished before
 * the fault is intact (decoded and compared with a clean reference run), and
 * no temporary file or partial output is left under a final name (every
 * run on the CPU, so that "intact" is bit for bit: on a GPU the frame path
 * a run takes depends on its frames, and the paths agree within float
 * rounding only):
 *   - ckey_shot_run with an in-memory source and sink (the interface a video
 *     reader / writer implements): order of writes and events, a read
 *     failure (stop and skip), a write failure;
 *   - truncated plate and corrupt hint mid-sequence (stop, then --on-error skip);
 *   - unreadable plate (permissions; skipped as root);
 *   - a missing hint (stop and skip), a hint of another size (resized to the
 *     plate with a warning, as upstream does);
 *   - cancel (ckey_shot_options.cancel) through the library, and SIGINT /
 *     SIGTERM to the CLI mid-shot: the frames keyed are written, no temporary
 *     file is left, exit 130 / 143, the error event says interrupted, and a
 *     re-run resumes;
 *   - absurd dimensions in a PNG header (the decoder's pixel limits);
 *   - full disk, as RLIMIT_FSIZE in the child with SIGXFSZ ignored (EFBIG);
 *   - SIGKILL mid-shot, then a re-run that resumes and finishes;
 *   - `ckey run` writing its pair of outputs over an older pair: a full disk
 *     (RLIMIT_FSIZE) or SIGTERM / SIGINT mid-write leave the older pair
 *     untouched and no temporary file.
 * The binary is <dir of argv[0]>/../ckey; the model tests/fixtures/tiny.
 */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "ckey_clip.h"
#include "ckey.h"
#include "support/clip.h"
#include "support/testutil.h"

#define LEN(a) (sizeof(a) / sizeof((a)[0]))

static char ckey_bin[PATH_MAX + 16];
static char workdir[256];
static char model[512];

typedef ck_run_result result;

/* The error (or first warning) line of a failed run tells the story in the log. */
static result echo_error(result r) {
    const char *line = strstr(r.err, "error:");
    if (!line) line = strstr(r.err, "warning: frame");
    if (r.code != 0 && line) printf("    %.*s\n", (int)strcspn(line, "\n"), line);
    return r;
}

/* ckey ARGS... (NULL-terminated), the command and its error echoed. */
static const ck_cli cli = {ckey_bin, workdir, NULL, 1};
#define run_ckey(...) echo_error(ck_cli_run(&cli, NULL, __VA_ARGS__))

/* ckey with the arguments given (NULL-terminated) and that RLIMIT_FSIZE in
 * the child, SIGXFSZ ignored (a full disk). */
static result run_fsize(const char *const *args, long fsize) {
    const ck_run_options o = {.fsize_limit = fsize};
    return echo_error(ck_cli_run_argv(&cli, &o, args));
}

/* Pass `pass` of frame `frame` of a shot keyed into its Output/. */
static void out_path(char *buf, size_t cap, const char *shot, int pass, int frame) {
    char out[1024];
    snprintf(out, sizeof out, "%s/Output", shot);
    ck_pass_path(buf, cap, out, pass, frame);
}

/* Reference outputs of one clean frame (every frame of make_shot is the same
 * picture, so one frame's passes serve all). */
static ckey_image ref[4];
static int have_ref;

static int same_image(const ckey_image *a, const ckey_image *b) {
    if (a->width != b->width || a->height != b->height || a->channels != b->channels) return 0;
    const size_t n = (size_t)a->width * a->height * a->channels;
    return memcmp(a->data, b->data, n * sizeof(float)) == 0;
}

/* Every output of `frame`: 1 all four present and equal to the reference,
 * 0 none present; -1 otherwise (with a FAIL). A file present under a final
 * name must decode (never a partial file). */
static int frame_state(const char *shot, int frame, int compare) {
    int present = 0;
    for (int pass = 0; pass < 4; pass++) {
        char p[1024];
        out_path(p, sizeof p, shot, pass, frame);
        if (!ck_exists(p)) continue;
        present++;
        ckey_image img;
        memset(&img, 0, sizeof img);
        ckey_error err;
        const ckey_status st = ckey_image_read(p, pass == 0 ? CKEY_IMAGE_HINT : CKEY_IMAGE_RGB, &img, &err);
        CHECKF(st == CKEY_OK, "%s is damaged: %s", p, err.message);
        if (st == CKEY_OK && compare && have_ref)
            CHECKF(same_image(&img, &ref[pass]), "%s differs from the clean run", p);
        ckey_image_free(&img);
    }
    return present == 4 ? 1 : present == 0 ? 0 : -1;
}

static int count_tmp_entry(void *n, const char *path, const char *name, const struct stat *st) {
    if ((!st || !S_ISDIR(st->st_mode)) && strstr(name, ".tmp")) {
        printf("    stray temporary file %s\n", path);
        ++*(int *)n;
    }
    return 1;
}

/* Files named *.tmp anywhere under dir. */
static int count_tmp(const char *dir) {
    int n = 0;
    ck_walk_tree(dir, count_tmp_entry, &n);
    return n;
}

static int no_tmp(const char *shot) {
    char p[1024];
    snprintf(p, sizeof p, "%s/Output", shot);
    return count_tmp(p) == 0;
}

#define NEED_SETUP() NEED_CKEY(ckey_bin, model)

/* The clean reference: a 1-frame shot keyed serially (--read-ahead 0). */
static int ensure_reference(void) {
    if (have_ref) return 1;
    char shot[512], p[1024];
    if (!ck_make_shot(shot, sizeof shot, workdir, "reference", 1)) return 0;
    result r = run_ckey("key", shot, "--model", model, "--size", "64", "--threads", "2", "--device", "cpu",
                        "--read-ahead", "0", NULL);
    const int ok = r.code == 0;
    ck_run_free(&r);
    if (!ok) return 0;
    ckey_error err;
    for (int pass = 0; pass < 4; pass++) {
        out_path(p, sizeof p, shot, pass, 1);
        if (ckey_image_read(p, pass == 0 ? CKEY_IMAGE_HINT : CKEY_IMAGE_RGB, &ref[pass], &err) != CKEY_OK)
            return 0;
    }
    have_ref = 1;
    return 1;
}

/* ------------------------------------------------- the library interface */

/* An in-memory source: `n` frames of a w x h gradient plate; frame `bad`
 * fails to read. A sink recording the order of writes; frame `bad_write`
 * fails to write. */
typedef struct mem_src {
    ckey_shot_frame frames[8];
    char stems[8][16];
    int n, w, h, bad;
    int64_t last_index;
    int order_ok;
} mem_src;

static ckey_status mem_read(void *self, int64_t index, ckey_image *plate, ckey_image *hint,
                            ckey_error *err) {
    mem_src *m = self;
    if (index <= m->last_index) m->order_ok = 0;
    m->last_index = index;
    if ((int)index == m->bad) {
        err->status = CKEY_ERR_FORMAT;
        snprintf(err->message, sizeof err->message, "frame %d: mem://%d: corrupt", (int)index + 1,
                 (int)index + 1);
        return CKEY_ERR_FORMAT;
    }
    const size_t n = (size_t)m->w * m->h;
    /* reuse the buffers when the size matches: no allocation per frame */
    if (!plate->data || plate->width != m->w || plate->height != m->h) {
        ckey_image_free(plate);
        ckey_image_free(hint);
        plate->data = malloc(3 * n * sizeof(float));
        hint->data = malloc(n * sizeof(float));
        if (!plate->data || !hint->data) return CKEY_ERR_NOMEM;
    }
    plate->width = hint->width = m->w;
    plate->height = hint->height = m->h;
    plate->channels = 3;
    hint->channels = 1;
    for (size_t i = 0; i < n; i++) {
        plate->data[i] = 0.1f;
        plate->data[n + i] = 0.8f * (float)(i % m->w) / m->w;
        plate->data[2 * n + i] = 0.2f;
        hint->data[i] = (i % m->w) < (size_t)m->w / 2 ? 1.0f : 0.0f;
    }
    return CKEY_OK;
}

typedef struct mem_sink {
    int64_t written[8];
    int nwritten, bad_write, began, finished;
    /* concurrent_write 0: the runner must call write() one at a time */
    atomic_int busy;
    atomic_int overlap;
} mem_sink;

static ckey_status mem_begin(void *self, ckey_error *err) {
    ((mem_sink *)self)->began++;
    return CKEY_OK;
}

static ckey_status mem_write(void *self, const ckey_shot_frame *f, const ckey_shot_passes *p,
                             ckey_error *err) {
    mem_sink *k = self;
    if (atomic_fetch_add(&k->busy, 1) != 0) atomic_store(&k->overlap, 1);
    usleep(20000); /* widen the window for another writer to come in */
    atomic_fetch_sub(&k->busy, 1);
    if (f->number == k->bad_write) {
        err->status = CKEY_ERR_IO;
        snprintf(err->message, sizeof err->message, "out/%s.exr: No space left on device", f->stem);
        return CKEY_ERR_IO;
    }
    if (!p->alpha || !p->fg || !p->processed || !p->comp || p->width <= 0) return CKEY_ERR_INTERNAL;
    k->written[k->nwritten++] = f->number;
    return CKEY_OK;
}

static ckey_status mem_finish(void *self, ckey_error *err) {
    ((mem_sink *)self)->finished++;
    return CKEY_OK;
}

typedef struct ev_log {
    int64_t frame[8];
    int kind[8];
    int n;
    atomic_int keyed;      /* read by the cancel callback from other threads */
    int cancel_after;      /* cancel once this many frames are keyed; -1 never */
    atomic_int polls;
} ev_log;

static void log_event(void *user, const ckey_shot_event *ev) {
    ev_log *l = user;
    if (l->n < 8) {
        l->frame[l->n] = ev->frame->number;
        l->kind[l->n++] = (int)ev->kind;
    }
    if (ev->kind == CKEY_SHOT_KEYED) atomic_fetch_add(&l->keyed, 1);
}

static int log_cancel(void *user) {
    ev_log *l = user;
    atomic_fetch_add(&l->polls, 1);
    return l->cancel_after >= 0 && atomic_load(&l->keyed) >= l->cancel_after;
}

static int cancel_after = -1; /* for the next run_mem */

static int run_writers = 1; /* ckey_shot_options.writers for the next run_mem */

static void run_mem(ckey_session *s, int n, int bad, int bad_write, const uint8_t *plan, int on_error,
                    int read_ahead, ckey_status *st, mem_sink *sink_out, ev_log *log, char *msg) {
    mem_src m;
    memset(&m, 0, sizeof m);
    m.n = n, m.w = 40, m.h = 24, m.bad = bad, m.last_index = -1, m.order_ok = 1;
    for (int i = 0; i < n; i++) {
        snprintf(m.stems[i], sizeof m.stems[i], "f%d", i + 1);
        m.frames[i].number = i + 1;
        m.frames[i].stem = m.stems[i];
        m.frames[i].plate = m.stems[i];
        m.frames[i].hint = m.stems[i];
    }
    ckey_source src = {&m, n, m.frames, mem_read, NULL, 0, 0, NULL, 0, 0, NULL, NULL};
    memset(sink_out, 0, sizeof *sink_out);
    sink_out->bad_write = bad_write;
    atomic_init(&sink_out->busy, 0);
    atomic_init(&sink_out->overlap, 0);
    /* concurrent_write 0: ordered writes, whatever the number of writers */
    ckey_sink sink = {.self = sink_out, .begin = mem_begin, .write = mem_write, .finish = mem_finish};
    ckey_shot_options o;
    ckey_shot_options_default(&o);
    o.on_error = on_error;
    o.read_ahead = read_ahead;
    o.writers = run_writers;
    memset(log, 0, sizeof *log);
    atomic_init(&log->keyed, 0);
    atomic_init(&log->polls, 0);
    log->cancel_after = cancel_after;
    o.cancel = log_cancel;
    o.cancel_user = log;
    ckey_error err;
    memset(&err, 0, sizeof err);
    *st = ckey_shot_run(s, &src, &sink, plan, &o, log_event, log, NULL, &err);
    snprintf(msg, 512, "%s", err.message);
    CHECKF(m.order_ok, "source read out of order");
    CHECKF(!atomic_load(&sink_out->overlap), "two writes of an ordered sink overlapped");
}

static void test_shot_api(void) {
    if (access(model, R_OK) != 0) SKIP("%s does not exist", model);
    ckey_model *m = NULL;
    ckey_session *s = NULL;
    ckey_error err;
    REQUIRE(ckey_model_load(model, &m, &err) == CKEY_OK);
    ckey_session_options so;
    ckey_session_options_default(&so);
    so.size = 64;
    so.threads = 2;
    if (ckey_session_create(m, &so, &s, &err) != CKEY_OK) {
        ckey_model_free(m);
        REQUIRE(0);
    }
    /* writers 3: three writer threads, an ordered sink (concurrent_write 0):
     * the same writes and events, in the same order, one write at a time */
    static const int config[3][2] = {{0, 1}, {3, 1}, {3, 3}}; /* read_ahead, writers */
    for (int c = 0; c < 3; c++) {
        const int ra = config[c][0], nw = config[c][1];
        run_writers = nw;
        printf("  read_ahead %d, writers %d\n", ra, nw);
        ckey_status st;
        mem_sink k;
        ev_log log;
        char msg[512];
        /* clean: 6 frames, frame 2 planned SKIP, frame 6 EXCLUDE */
        const uint8_t plan[6] = {CKEY_SHOT_KEY, CKEY_SHOT_SKIP, CKEY_SHOT_KEY, CKEY_SHOT_KEY,
                                 CKEY_SHOT_KEY, CKEY_SHOT_EXCLUDE};
        run_mem(s, 6, -1, -1, plan, CKEY_ON_ERROR_STOP, ra, &st, &k, &log, msg);
        CHECKF(st == CKEY_OK, "%s", msg);
        CHECK(k.nwritten == 4 && k.written[0] == 1 && k.written[1] == 3 && k.written[3] == 5);
        CHECK(k.began == 1 && k.finished == 1);
        CHECK(log.n == 5);
        for (int i = 0; i < log.n; i++) CHECKF(log.frame[i] == i + 1, "event %d is frame %d", i, (int)log.frame[i]);
        CHECK(log.kind[1] == CKEY_SHOT_SKIPPED && log.kind[0] == CKEY_SHOT_KEYED);

        /* read failure at index 3 (frame 4), stop: frames 1-3 written, error names frame 4 */
        run_mem(s, 6, 3, -1, NULL, CKEY_ON_ERROR_STOP, ra, &st, &k, &log, msg);
        CHECKF(st == CKEY_ERR_FORMAT && strstr(msg, "frame 4") && strstr(msg, "mem://4"), "%d %s", st, msg);
        CHECKF(k.nwritten == 3 && k.written[2] == 3, "wrote %d", k.nwritten);
        CHECK(k.finished == 0 && log.n == 3);

        /* the same, skip: 5 written, one FAILED event in its place */
        run_mem(s, 6, 3, -1, NULL, CKEY_ON_ERROR_SKIP, ra, &st, &k, &log, msg);
        CHECKF(st == CKEY_OK, "%s", msg);
        CHECK(k.nwritten == 5 && k.written[3] == 5 && log.n == 6 && log.kind[3] == CKEY_SHOT_FAILED &&
              log.frame[3] == 4);

        /* write failure at frame 2: frame 1 written, the error is the sink's with the frame */
        run_mem(s, 6, -1, 2, NULL, CKEY_ON_ERROR_SKIP, ra, &st, &k, &log, msg);
        CHECKF(st == CKEY_ERR_IO && strstr(msg, "frame 2") && strstr(msg, "out/f2.exr"), "%d %s", st, msg);
        CHECK(k.nwritten == 1 && log.n == 1);

        /* cancel once 2 frames are keyed: those keyed by then are written, in
         * order, nothing after; not finished; CKEY_ERR_CANCELLED. Without
         * threads exactly 2; with read-ahead the frames in flight (at most
         * the writers + 1 output slots + the one being keyed) are written too. */
        cancel_after = 2;
        run_mem(s, 8, -1, -1, NULL, CKEY_ON_ERROR_STOP, ra, &st, &k, &log, msg);
        cancel_after = -1;
        printf("    cancelled after 2 keyed: %d written, %d polls: %s\n", k.nwritten,
               atomic_load(&log.polls), msg);
        CHECKF(st == CKEY_ERR_CANCELLED && strstr(msg, "interrupted"), "%d %s", st, msg);
        CHECK(k.finished == 0 && k.began == 1);
        CHECKF(ra == 0 ? k.nwritten == 2 : k.nwritten >= 2 && k.nwritten <= 4 + nw, "wrote %d", k.nwritten);
        CHECK(log.n == k.nwritten);
        for (int i = 0; i < k.nwritten; i++) CHECK(k.written[i] == i + 1);
        char want[32];
        snprintf(want, sizeof want, "before frame %d", k.nwritten + 1);
        CHECKF(strstr(msg, want) != NULL, "'%s' lacks '%s'", msg, want);
        /* cancelled before anything: nothing written */
        cancel_after = 0;
        run_mem(s, 4, -1, -1, NULL, CKEY_ON_ERROR_STOP, ra, &st, &k, &log, msg);
        cancel_after = -1;
        CHECKF(st == CKEY_ERR_CANCELLED && k.nwritten == 0 && k.finished == 0, "%d %d", st, k.nwritten);
    }
    CHECK(!strcmp(ckey_status_name(CKEY_ERR_CANCELLED), "CKEY_ERR_CANCELLED"));
    ckey_shot_options o;
    ckey_shot_options_default(&o);
    CHECK(o.read_ahead == 2 && o.on_error == CKEY_ON_ERROR_STOP && o.writers == 0);
    o.read_ahead = 9;
    ckey_source src;
    memset(&src, 0, sizeof src);
    CHECK(ckey_shot_run(s, &src, NULL, NULL, &o, NULL, NULL, NULL, &err) == CKEY_ERR_INVALID_ARG);
    ckey_sink nosink;
    memset(&nosink, 0, sizeof nosink);
    nosink.write = mem_write;
    src.read = mem_read; /* no frames */
    o.read_ahead = 2;
    o.writers = 65;
    CHECK(ckey_shot_run(s, &src, &nosink, NULL, &o, NULL, NULL, NULL, &err) == CKEY_ERR_INVALID_ARG);
    o.writers = 64;
    CHECK(ckey_shot_run(s, &src, &nosink, NULL, &o, NULL, NULL, NULL, &err) == CKEY_OK);
    ckey_session_free(s);
    ckey_model_free(m);
}

/* ------------------------------------------------------------ CLI faults */

/* Truncated plate at frame 3, corrupt hint at frame 4 of 5. */
static void test_corrupt_and_truncated(void) {
    char shot[512], p[1024];
    NEED_SETUP();
    REQUIRE(ensure_reference());
    REQUIRE(ck_make_shot(shot, sizeof shot, workdir, "corrupt", 5));
    size_t n = 0;
    unsigned char *b = ck_read_file("examples/plate.png", &n);
    REQUIRE(b && n > 200);
    snprintf(p, sizeof p, "%s/Input/plate_0003.png", shot);
    REQUIRE(ck_write_file(p, b, n / 2)); /* truncated */
    free(b);
    b = ck_read_file("examples/hint.png", &n);
    REQUIRE(b && n > 200);
    for (size_t i = 60; i < n; i += 7) b[i] ^= 0x5a; /* corrupt past the header */
    snprintf(p, sizeof p, "%s/AlphaHint/hint_0004.png", shot);
    REQUIRE(ck_write_file(p, b, n));
    free(b);

    result r = run_ckey("key", shot, "--model", model, "--size", "64", "--threads", "2", "--device", "cpu", "--json",
                        NULL);
    CHECKF(r.code == 1, "exit %d", r.code);
    CHECKF(strstr(r.err, "frame 3") && strstr(r.err, "plate_0003.png"), "stderr: %s", r.err);
    CHECK(strstr(r.out, "\"event\":\"error\"") != NULL);
    CHECK(ck_count_str(r.out, "\"status\":\"keyed\"") == 2);
    ck_run_free(&r);
    CHECK(frame_state(shot, 1, 1) == 1 && frame_state(shot, 2, 1) == 1);
    for (int f = 3; f <= 5; f++) CHECKF(frame_state(shot, f, 0) == 0, "frame %d has outputs", f);
    CHECK(no_tmp(shot));

    /* --on-error skip: frames 3 and 4 reported and skipped, 1, 2, 5 keyed, exit 3 */
    r = run_ckey("key", shot, "--model", model, "--size", "64", "--threads", "2", "--device", "cpu", "--json",
                 "--on-error", "skip", NULL);
    CHECKF(r.code == 3, "exit %d", r.code);
    CHECK(ck_count_str(r.out, "\"status\":\"failed\"") == 2);
    CHECK(ck_count_str(r.out, "\"status\":\"skipped\"") == 2);
    CHECK(ck_count_str(r.out, "\"status\":\"keyed\"") == 1);
    CHECKF(strstr(r.out, "\"frame\":4,\"status\":\"failed\"") && strstr(r.out, "hint_0004.png"), "%s", r.out);
    CHECKF(strstr(r.err, "frame 3") && strstr(r.err, "plate_0003.png"), "stderr: %s", r.err);
    CHECK(strstr(r.out, "\"failed\":2") != NULL);
    ck_run_free(&r);
    for (int f = 1; f <= 5; f++) CHECKF(frame_state(shot, f, 1) == (f == 3 || f == 4 ? 0 : 1), "frame %d", f);
    CHECK(no_tmp(shot));
    ck_remove_tree(shot);
}

static void test_unreadable(void) {
    char shot[512], p[1024];
    NEED_SETUP();
    if (geteuid() == 0) SKIP("running as root: permissions do not stop reads");
    REQUIRE(ensure_reference());
    REQUIRE(ck_make_shot(shot, sizeof shot, workdir, "unreadable", 3));
    snprintf(p, sizeof p, "%s/Input/plate_0002.png", shot);
    REQUIRE(chmod(p, 0) == 0);
    result r = run_ckey("key", shot, "--model", model, "--size", "64", "--threads", "2", "--device", "cpu", NULL);
    CHECKF(r.code == 1 && strstr(r.err, "frame 2") && strstr(r.err, "plate_0002.png"), "%d %s", r.code, r.err);
    ck_run_free(&r);
    CHECK(frame_state(shot, 1, 1) == 1 && frame_state(shot, 2, 0) == 0 && frame_state(shot, 3, 0) == 0);
    CHECK(no_tmp(shot));
    chmod(p, 0644);
    ck_remove_tree(shot);
}

/* A missing hint (a fault) and a hint of another size (resized, a warning). */
static void test_missing_and_mismatched(void) {
    char shot[512], p[1024];
    NEED_SETUP();
    REQUIRE(ensure_reference());
    REQUIRE(ck_make_shot(shot, sizeof shot, workdir, "mismatch", 4));
    snprintf(p, sizeof p, "%s/AlphaHint/hint_0002.png", shot);
    REQUIRE(unlink(p) == 0);
    float px[6 * 5] = {0};
    ckey_error err;
    snprintf(p, sizeof p, "%s/AlphaHint/hint_0003.png", shot);
    REQUIRE(ckey_image_write_png(p, px, 1, 6, 5, 8, &err) == CKEY_OK);

    /* stop: the missing hint is found before anything is keyed */
    result r = run_ckey("key", shot, "--model", model, "--size", "64", "--threads", "2", "--device", "cpu", NULL);
    CHECKF(r.code == 1 && strstr(r.err, "frame 2") && strstr(r.err, "plate_0002.png") &&
               strstr(r.err, "no hint"), "%d %s", r.code, r.err);
    ck_run_free(&r);
    snprintf(p, sizeof p, "%s/Output", shot);
    CHECK(!ck_exists(p));

    /* skip: 2 (no hint) fails; 3 (6 x 5 hint) is resized with a warning and
     * keyed with 1 and 4 */
    r = run_ckey("key", shot, "--model", model, "--size", "64", "--threads", "2", "--device", "cpu", "--on-error",
                 "skip", NULL);
    CHECKF(r.code == 3, "exit %d", r.code);
    CHECKF(strstr(r.err, "warning: frame 3") && strstr(r.err, "hint_0003.png") && strstr(r.err, "6 x 5") &&
               strstr(r.err, "resized"), "%s", r.err);
    CHECKF(strstr(r.err, "frame 2") && strstr(r.err, "no hint"), "%s", r.err);
    CHECKF(strstr(r.out, "keyed 3 frames") && strstr(r.out, "FAILED 1"), "%s", r.out);
    ck_run_free(&r);
    for (int f = 1; f <= 4; f++) CHECKF(frame_state(shot, f, f != 3) == (f != 2), "frame %d", f);

    /* stop with only the size difference: every frame keyed, one warning */
    snprintf(p, sizeof p, "%s/AlphaHint/hint_0002.png", shot);
    REQUIRE(ck_copy_file("examples/hint.png", p));
    r = run_ckey("key", shot, "--model", model, "--size", "64", "--threads", "2", "--device", "cpu", "--force", NULL);
    CHECKF(r.code == 0 && ck_count_str(r.err, "warning: frame 3") == 1 && strstr(r.err, "6 x 5"), "%d %s", r.code,
           r.err);
    ck_run_free(&r);
    for (int f = 1; f <= 4; f++) CHECKF(frame_state(shot, f, f != 3) == 1, "frame %d", f);
    CHECK(no_tmp(shot));
    ck_remove_tree(shot);
}

static uint32_t crc32_png(const unsigned char *p, size_t n) {
    uint32_t c = 0xffffffffu;
    for (size_t i = 0; i < n; i++) {
        c ^= p[i];
        for (int k = 0; k < 8; k++) c = c & 1 ? 0xedb88320u ^ (c >> 1) : c >> 1;
    }
    return c ^ 0xffffffffu;
}

static void put32(unsigned char *p, uint32_t v) {
    p[0] = (unsigned char)(v >> 24), p[1] = (unsigned char)(v >> 16), p[2] = (unsigned char)(v >> 8),
    p[3] = (unsigned char)v;
}

/* A PNG whose header claims 40000 x 40000: refused from the header. */
static void test_absurd_dimensions(void) {
    char shot[512], p[1024];
    NEED_SETUP();
    REQUIRE(ensure_reference());
    REQUIRE(ck_make_shot(shot, sizeof shot, workdir, "absurd", 3));
    size_t n = 0;
    unsigned char *b = ck_read_file("examples/plate.png", &n);
    REQUIRE(b && n > 33 && !memcmp(b + 12, "IHDR", 4));
    put32(b + 16, 40000);
    put32(b + 20, 40000);
    put32(b + 29, crc32_png(b + 12, 17));
    snprintf(p, sizeof p, "%s/Input/plate_0002.png", shot);
    REQUIRE(ck_write_file(p, b, n));
    free(b);
    result r = run_ckey("key", shot, "--model", model, "--size", "64", "--threads", "2", "--device", "cpu", NULL);
    CHECKF(r.code == 1 && strstr(r.err, "frame 2") && strstr(r.err, "plate_0002.png") &&
               strstr(r.err, "40000"), "%d %s", r.code, r.err);
    ck_run_free(&r);
    CHECK(frame_state(shot, 1, 1) == 1 && frame_state(shot, 2, 0) == 0);
    CHECK(no_tmp(shot));
    ck_remove_tree(shot);
}

static int largest_entry(void *best, const char *path, const char *name, const struct stat *st) {
    (void)path, (void)name;
    if (st && !S_ISDIR(st->st_mode) && (long)st->st_size > *(long *)best) *(long *)best = (long)st->st_size;
    return 1;
}

/* Largest file under dir. */
static long largest_file(const char *dir) {
    long best = 0;
    ck_walk_tree(dir, largest_entry, &best);
    return best;
}

/* Full disk: frames 1-2 are small plates, frame 3 the full 320 x 180 one;
 * RLIMIT_FSIZE between their largest outputs makes frame 3's write fail with
 * EFBIG, as a full disk would. */
static void test_full_disk(void) {
    char shot[512], small[512], p[1024];
    NEED_SETUP();
    REQUIRE(ck_make_shot(shot, sizeof shot, workdir, "fulldisk", 3));
    ckey_image pl, hi;
    memset(&pl, 0, sizeof pl);
    memset(&hi, 0, sizeof hi);
    ckey_error err;
    REQUIRE(ckey_image_read("examples/plate.png", CKEY_IMAGE_RGB, &pl, &err) == CKEY_OK);
    REQUIRE(ckey_image_read("examples/hint.png", CKEY_IMAGE_HINT, &hi, &err) == CKEY_OK);
    /* the top-left 48 x 32 corner (every 4th pixel) as the small plates */
    enum { SW = 48, SH = 32 };
    float sp[3 * SW * SH], sh[SW * SH];
    for (int c = 0; c < 3; c++)
        for (int y = 0; y < SH; y++)
            for (int x = 0; x < SW; x++)
                sp[(c * SH + y) * SW + x] = pl.data[((size_t)c * pl.height + 4 * y) * pl.width + 4 * x];
    for (int y = 0; y < SH; y++)
        for (int x = 0; x < SW; x++) sh[y * SW + x] = hi.data[(size_t)4 * y * hi.width + 4 * x];
    ckey_image_free(&pl);
    ckey_image_free(&hi);
    for (int f = 1; f <= 2; f++) {
        snprintf(p, sizeof p, "%s/Input/plate_%04d.png", shot, f);
        REQUIRE(ckey_image_write_png(p, sp, 3, SW, SH, 8, &err) == CKEY_OK);
        snprintf(p, sizeof p, "%s/AlphaHint/hint_%04d.png", shot, f);
        REQUIRE(ckey_image_write_png(p, sh, 1, SW, SH, 8, &err) == CKEY_OK);
    }
    /* sizes of the outputs without a limit, from a copy of the shot's small frames */
    snprintf(small, sizeof small, "%s/fulldisk-ref", workdir);
    ck_remove_tree(small);
    char plates[600], hints[600], out[600];
    snprintf(plates, sizeof plates, "%s/Input", shot);
    snprintf(hints, sizeof hints, "%s/AlphaHint", shot);
    snprintf(out, sizeof out, "%s", small);
    result r = run_ckey("key", "--plate", plates, "--hint", hints, "--out", out, "--model", model,
                        "--size", "64", "--threads", "2", "--device", "cpu", "--frames", "1-2", NULL);
    REQUIRE(r.code == 0);
    ck_run_free(&r);
    const long small_max = largest_file(small);
    r = run_ckey("key", "--plate", plates, "--hint", hints, "--out", out, "--model", model,
                 "--size", "64", "--threads", "2", "--device", "cpu", "--frames", "3", NULL);
    REQUIRE(r.code == 0);
    ck_run_free(&r);
    const long all_max = largest_file(small);
    printf("  largest output: small frames %ld bytes, frame 3 %ld bytes\n", small_max, all_max);
    REQUIRE(all_max > small_max + 1024);
    const long limit = small_max + 512;

    const char *args[] = {"key", shot, "--model", model, "--size", "64", "--threads", "2", "--device", "cpu", NULL};
    r = run_fsize(args, limit);
    CHECKF(r.code == 1, "exit %d", r.code);
    /* the message names the frame and the output file, and says why (EFBIG) */
    CHECKF(strstr(r.err, "frame 3") && strstr(r.err, "/Output/") && strstr(r.err, "plate_0003."),
           "stderr: %s", r.err);
    CHECKF(strstr(r.err, strerror(EFBIG)), "stderr: %s", r.err);
    ck_run_free(&r);
    /* frames 1 and 2 identical to the unlimited run; frame 3 incomplete but
     * every file it has under a final name whole; no temporary files */
    for (int f = 1; f <= 2; f++)
        for (int pass = 0; pass < 4; pass++) {
            char a[1024], b2[1024];
            out_path(a, sizeof a, shot, pass, f);
            ck_pass_path(b2, sizeof b2, small, pass, f);
            ckey_image x, y;
            memset(&x, 0, sizeof x);
            memset(&y, 0, sizeof y);
            CHECKF(ckey_image_read(a, CKEY_IMAGE_RGB, &x, &err) == CKEY_OK, "%s: %s", a, err.message);
            CHECKF(ckey_image_read(b2, CKEY_IMAGE_RGB, &y, &err) == CKEY_OK, "%s: %s", b2, err.message);
            if (x.data && y.data) CHECKF(same_image(&x, &y), "%s differs", a);
            ckey_image_free(&x);
            ckey_image_free(&y);
        }
    CHECK(frame_state(shot, 3, 0) == -1 || frame_state(shot, 3, 0) == 0);
    CHECK(no_tmp(shot));
    /* with room again, a re-run keys only frame 3 */
    r = run_ckey("key", shot, "--model", model, "--size", "64", "--threads", "2", "--device", "cpu", "--json", NULL);
    CHECKF(r.code == 0 && ck_count_str(r.out, "\"status\":\"keyed\"") == 1 &&
               strstr(r.out, "\"frame\":3,\"status\":\"keyed\""), "%d %s", r.code, r.out);
    ck_run_free(&r);
    CHECK(frame_state(shot, 3, 0) == 1);
    ck_remove_tree(small);
    ck_remove_tree(shot);
}

/* `ckey key SHOT --json` (with `--video-out both` when video) started in
 * the background, its stdout into a pipe (the read end in fds[0]), its
 * stderr to /dev/null; the pid, or -1. */
static pid_t spawn_key_json(const char *shot, int video, int fds[2]) {
    if (pipe(fds) != 0) return -1;
    fflush(stdout);
    const pid_t pid = fork();
    if (pid == 0) {
        close(fds[0]);
        dup2(fds[1], 1);
        int devnull = open("/dev/null", O_WRONLY);
        if (devnull >= 0) dup2(devnull, 2);
        if (video)
            execl(ckey_bin, ckey_bin, "key", shot, "--model", model, "--size", "64", "--threads", "2", "--device",
                  "cpu", "--json",
                  "--video-out", "both", (char *)NULL);
        else
            execl(ckey_bin, ckey_bin, "key", shot, "--model", model, "--size", "64", "--threads", "2", "--device",
                  "cpu", "--json",
                  (char *)NULL);
        _exit(127);
    }
    close(fds[1]);
    if (pid < 0) close(fds[0]);
    return pid;
}

/* SIGKILL after some frames, then resume. */
static void test_kill_and_resume(void) {
    enum { N = 12 };
    char shot[512], p[1024];
    NEED_SETUP();
    REQUIRE(ensure_reference());
    REQUIRE(ck_make_shot(shot, sizeof shot, workdir, "killed", N));
    int fds[2];
    const pid_t pid = spawn_key_json(shot, 0, fds);
    REQUIRE(pid > 0);
    /* read NDJSON until the third keyed frame, then kill */
    char buf[65536];
    size_t len = 0;
    int keyed = 0;
    while (keyed < 3 && len < sizeof buf - 1) {
        const ssize_t k = read(fds[0], buf + len, sizeof buf - 1 - len);
        if (k <= 0) break;
        len += (size_t)k;
        buf[len] = 0;
        keyed = ck_count_str(buf, "\"status\":\"keyed\"");
    }
    kill(pid, SIGKILL);
    int status = 0;
    waitpid(pid, &status, 0);
    close(fds[0]);
    printf("  killed after %d keyed events (%s)\n", keyed,
           WIFSIGNALED(status) ? "by SIGKILL" : "it had already exited");
    CHECKF(keyed >= 3, "only %d frames keyed before the child ended", keyed);
    int complete = 0;
    for (int f = 1; f <= N; f++) {
        const int s = frame_state(shot, f, 1); /* any file present must be whole */
        if (s == 1) complete++;
    }
    printf("  %d of %d frames complete after the kill\n", complete, N);
    CHECK(complete >= 3);
    /* beside what the kill left: a temporary of this host's process that no
     * longer runs (a pid above any pid_max) and one of another host's; the
     * resumed run removes the first and leaves the second */
    char dead[1200], other[1200], mine_tmp[1024];
    out_path(mine_tmp, sizeof mine_tmp, shot, 0, 1);
    char *own = ckey_temp_path(mine_tmp); /* <path>.ckey-<host>-<pid>-<tid>.tmp */
    REQUIRE(own);
    char *cut = strrchr(own, '-');
    if (cut) *cut = 0;
    if ((cut = strrchr(own, '-'))) *cut = 0; /* <path>.ckey-<host> */
    snprintf(dead, sizeof dead, "%s-999999999-7.tmp", own);
    snprintf(other, sizeof other, "%s.ckey-elsewhere-1-1.tmp", mine_tmp);
    free(own);
    FILE *tf = fopen(dead, "wb");
    if (tf) fclose(tf);
    tf = fopen(other, "wb");
    if (tf) fclose(tf);

    result r = run_ckey("key", shot, "--model", model, "--size", "64", "--threads", "2", "--device", "cpu", "--json",
                        NULL);
    CHECKF(r.code == 0, "exit %d: %s", r.code, r.err);
    char want[128];
    snprintf(want, sizeof want, "\"to_skip\":%d", complete);
    CHECKF(strstr(r.out, want) != NULL, "started event lacks %s: %s", want, r.out);
    CHECK(ck_count_str(r.out, "\"status\":\"skipped\"") == complete);
    CHECK(ck_count_str(r.out, "\"status\":\"keyed\"") == N - complete);
    ck_run_free(&r);
    for (int f = 1; f <= N; f++) CHECKF(frame_state(shot, f, 1) == 1, "frame %d", f);
    struct stat sb;
    CHECKF(stat(dead, &sb) != 0, "%s: a dead process's temporary file is still there", dead);
    CHECKF(stat(other, &sb) == 0, "%s: another host's temporary file was removed", other);
    unlink(other);
    CHECK(no_tmp(shot));
    snprintf(p, sizeof p, "%s", shot);
    ck_remove_tree(p);
}

/*
 * SIGINT (then SIGTERM, with a video output) to `ckey key --json` once two
 * frames are keyed: the run stops after the frames in flight, exits 128 +
 * the signal, ends with an error event that says interrupted, leaves every
 * output whole and no temporary file (nor a video), and a re-run resumes.
 */
static void test_interrupt(void) {
    enum { N = 16 };
    static const int sigs[2] = {SIGINT, SIGTERM};
    static const char *const names[2] = {"SIGINT", "SIGTERM"};
    NEED_SETUP();
    REQUIRE(ensure_reference());
    for (int k = 0; k < 2; k++) {
        char shot[512], p[1024];
        REQUIRE(ck_make_shot(shot, sizeof shot, workdir, k ? "terminated" : "interrupted", N));
        int fds[2];
#ifdef CK_HAVE_FFMPEG
        const pid_t pid = spawn_key_json(shot, k == 1, fds);
#else
        const pid_t pid = spawn_key_json(shot, 0, fds);
#endif
        REQUIRE(pid > 0);
        char buf[65536];
        size_t len = 0;
        int keyed = 0, sent = 0;
        for (;;) {
            const ssize_t n = read(fds[0], buf + len, sizeof buf - 1 - len);
            if (n <= 0) break;
            len += (size_t)n;
            buf[len] = 0;
            keyed = ck_count_str(buf, "\"status\":\"keyed\"");
            if (keyed >= 2 && !sent) {
                kill(pid, sigs[k]);
                sent = 1;
            }
            if (len >= sizeof buf - 1) break;
        }
        int status = 0;
        waitpid(pid, &status, 0);
        close(fds[0]);
        const int code = WIFEXITED(status) ? WEXITSTATUS(status) : -1;
        printf("  %s after 2 keyed events: exit %d, %d frames keyed in all\n", names[k], code, keyed);
        CHECKF(code == 128 + sigs[k], "exit %d (status 0x%x), want %d", code, status, 128 + sigs[k]);
        CHECKF(keyed < N, "all %d frames were keyed before the signal took effect", N);
        const char *ev = strstr(buf, "{\"event\":\"error\"");
        CHECKF(ev && strstr(ev, "\"status\":\"CKEY_ERR_CANCELLED\"") && strstr(ev, "\"interrupted\":true") &&
                   strstr(ev, names[k]) && strstr(ev, "interrupted: stopped before frame"),
               "%s", ev ? ev : buf);
        CHECK(!strstr(buf, "\"event\":\"done\""));
        char want[64];
        snprintf(want, sizeof want, "\"keyed\":%d,", keyed);
        CHECKF(ev && strstr(ev, want), "error event lacks %s: %s", want, ev ? ev : "");
        int complete = 0;
        for (int f = 1; f <= N; f++) complete += frame_state(shot, f, 1) == 1;
        printf("  %d of %d frames complete\n", complete, N);
        CHECKF(complete == keyed, "%d frames complete, %d keyed events", complete, keyed);
        CHECK(no_tmp(shot));
        snprintf(p, sizeof p, "%s/Output/%s_fg_alpha.mov", shot, k ? "terminated" : "interrupted");
        CHECK(!ck_exists(p));

        /* resume */
        result r = run_ckey("key", shot, "--model", model, "--size", "64", "--threads", "2", "--device", "cpu",
                            "--json", NULL);
        CHECKF(r.code == 0, "exit %d: %s", r.code, r.err);
        snprintf(want, sizeof want, "\"to_skip\":%d", complete);
        CHECKF(strstr(r.out, want) != NULL, "started event lacks %s", want);
        ck_run_free(&r);
        for (int f = 1; f <= N; f++) CHECKF(frame_state(shot, f, 1) == 1, "frame %d", f);
        CHECK(no_tmp(shot));
        ck_remove_tree(shot);
    }
}

/* ------------------------------------------------ ckey run's output pair */

static long file_size(const char *p) {
    struct stat st;
    return stat(p, &st) == 0 ? (long)st.st_size : -1;
}

/* DIR/alpha.png and DIR/fg.png, byte for byte (malloc'd; NULL if absent). */
typedef struct pair_bytes {
    unsigned char *b[2];
    size_t n[2];
} pair_bytes;

static pair_bytes read_pair(const char *dir) {
    pair_bytes p;
    memset(&p, 0, sizeof p);
    for (int i = 0; i < 2; i++) {
        char path[1024];
        snprintf(path, sizeof path, "%s/%s", dir, i ? "fg.png" : "alpha.png");
        p.b[i] = ck_read_file(path, &p.n[i]);
    }
    return p;
}

static int same_pair(const pair_bytes *a, const pair_bytes *b) {
    for (int i = 0; i < 2; i++)
        if (!a->b[i] || !b->b[i] || a->n[i] != b->n[i] || memcmp(a->b[i], b->b[i], a->n[i]) != 0) return 0;
    return 1;
}

static void free_pair(pair_bytes *p) {
    free(p->b[0]);
    free(p->b[1]);
    memset(p, 0, sizeof *p);
}

/* The older pair: the example plate at refiner strength 0.5 (the new runs
 * use 1, so every output differs from it). */
static int old_pair(const char *out) {
    ck_remove_tree(out);
    result r = run_ckey("run", "--model", model, "--image", "examples/plate.png", "--hint", "examples/hint.png",
                        "--out", out, "--size", "64", "--threads", "2", "--device", "cpu", "--refiner-strength", "0.5",
                        NULL);
    const int ok = r.code == 0;
    ck_run_free(&r);
    return ok;
}

/* Full disk while `ckey run` writes: RLIMIT_FSIZE between the new alpha's
 * size and the new fg's, so alpha is written whole and fg fails (EFBIG).
 * The older pair must stay as it was (not the new alpha beside the old fg),
 * the message must say why, and no temporary file may remain. */
static void test_run_pair_full_disk(void) {
    char out[512], probe[512], pa[1024], pf[1024];
    NEED_SETUP();
    snprintf(out, sizeof out, "%s/pair-full", workdir);
    snprintf(probe, sizeof probe, "%s/pair-probe", workdir);
    REQUIRE(old_pair(out));
    ck_remove_tree(probe);
    result r = run_ckey("run", "--model", model, "--image", "examples/plate.png", "--hint", "examples/hint.png",
                        "--out", probe, "--size", "64", "--threads", "2", "--device", "cpu", NULL);
    REQUIRE(r.code == 0);
    ck_run_free(&r);
    snprintf(pa, sizeof pa, "%s/alpha.png", probe);
    snprintf(pf, sizeof pf, "%s/fg.png", probe);
    const long a = file_size(pa), f = file_size(pf);
    printf("  new alpha.png %ld bytes, fg.png %ld bytes\n", a, f);
    REQUIRE(a > 0 && f > a + 4096);
    pair_bytes before = read_pair(out);
    REQUIRE(before.b[0] && before.b[1]);

    const char *args[] = {"run", "--model", model, "--image", "examples/plate.png", "--hint",
                          "examples/hint.png", "--out", out, "--size", "64", "--threads", "2", "--device", "cpu", NULL};
    r = run_fsize(args, a + (f - a) / 2);
    CHECKF(r.code == 1, "exit %d", r.code);
    CHECKF(strstr(r.err, strerror(EFBIG)) && strstr(r.err, "fg.png"), "stderr: %s", r.err);
    ck_run_free(&r);
    pair_bytes after = read_pair(out);
    CHECKF(same_pair(&before, &after), "the older pair in %s changed", out);
    CHECK(count_tmp(out) == 0);
    free_pair(&before);
    free_pair(&after);
    ck_remove_tree(probe);
    ck_remove_tree(out);
}

static double mono_now(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

/* A name starting with `prefix` and holding ".tmp" in dir. */
static int has_tmp(const char *dir, const char *prefix) {
    DIR *d = opendir(dir);
    if (!d) return 0;
    struct dirent *e;
    int found = 0;
    while (!found && (e = readdir(d)))
        found = !strncmp(e->d_name, prefix, strlen(prefix)) && strstr(e->d_name, ".tmp") != NULL;
    closedir(d);
    return found;
}

/* SIGTERM, then SIGINT, to `ckey run` while it writes a large plate's
 * outputs: SIGTERM as soon as a temporary file appears (alpha's), SIGINT
 * once fg's appears (alpha then complete). The run dies of the signal,
 * removes its temporary files, and the older pair stays. */
static void test_run_pair_signal(void) {
    enum { W = 3840, H = 2160 };
    static const int sigs[2] = {SIGTERM, SIGINT};
    static const char *const when[2] = {"", "fg.png"};
    char out[512], plate[512], hint[512];
    NEED_SETUP();
    snprintf(out, sizeof out, "%s/pair-signal", workdir);
    snprintf(plate, sizeof plate, "%s/big-plate.png", workdir);
    snprintf(hint, sizeof hint, "%s/big-hint.png", workdir);
    /* noise (8-bit, so the plate file stays small to write) and a flat hint */
    float *px = malloc(sizeof(float) * 3 * W * H);
    REQUIRE(px);
    uint32_t x = 12345;
    for (size_t i = 0; i < (size_t)3 * W * H; i++) {
        x = x * 1664525u + 1013904223u;
        px[i] = (float)(x >> 24) / 255.0f;
    }
    ckey_error err;
    ckey_status st = ckey_image_write_png(plate, px, 3, W, H, 8, &err);
    for (size_t i = 0; i < (size_t)W * H; i++) px[i] = 0.75f;
    if (st == CKEY_OK) st = ckey_image_write_png(hint, px, 1, W, H, 8, &err);
    free(px);
    REQUIRE(st == CKEY_OK);
    for (int k = 0; k < 2; k++) {
        REQUIRE(old_pair(out));
        pair_bytes before = read_pair(out);
        REQUIRE(before.b[0] && before.b[1]);
        fflush(stdout);
        const pid_t pid = fork();
        REQUIRE(pid >= 0);
        char err_path[600];
        snprintf(err_path, sizeof err_path, "%s/signal-stderr.txt", workdir);
        if (pid == 0) {
            int devnull = open("/dev/null", O_WRONLY);
            int e = open(err_path, O_WRONLY | O_CREAT | O_TRUNC, 0600);
            if (devnull >= 0) dup2(devnull, 1);
            if (e >= 0) dup2(e, 2);
            execl(ckey_bin, ckey_bin, "run", "--model", model, "--image", plate, "--hint", hint, "--out", out,
                  "--size", "64", "--threads", "2", "--device", "cpu", (char *)NULL);
            _exit(127);
        }
        int status = 0, sent = 0;
        const double t0 = mono_now();
        while (waitpid(pid, &status, WNOHANG) == 0) {
            if (!sent && has_tmp(out, when[k])) {
                kill(pid, sigs[k]);
                sent = 1;
                printf("  %s sent %.2f s after the start, a temporary %sfile present\n", strsignal(sigs[k]),
                       mono_now() - t0, k ? "fg " : "");
            }
            if (mono_now() - t0 > 300) kill(pid, SIGKILL);
            usleep(500);
        }
        CHECKF(sent, "the run ended (status 0x%x) before a temporary file appeared", status);
        CHECKF(WIFSIGNALED(status) && WTERMSIG(status) == sigs[k], "status 0x%x: not ended by %s", status,
               strsignal(sigs[k]));
        size_t n = 0;
        char *msg = (char *)ck_read_file(err_path, &n);
        const char *line = msg ? strstr(msg, "error:") : NULL;
        if (line) printf("    %.*s\n", (int)strcspn(line, "\n"), line);
        CHECKF(line && strstr(line, "interrupted by") && strstr(line, "not written"), "stderr: %s", msg ? msg : "");
        free(msg);
        pair_bytes after = read_pair(out);
        CHECKF(same_pair(&before, &after), "the older pair in %s changed", out);
        CHECK(count_tmp(out) == 0);
        free_pair(&before);
        free_pair(&after);
    }
    unlink(plate);
    unlink(hint);
    ck_remove_tree(out);
}

int main(int argc, char **argv) {
    ck_ckey_path(ckey_bin, sizeof ckey_bin, argv[0]);
    ck_tiny_model_path(model, sizeof model);
    if (!ck_make_temp_dir(workdir, sizeof workdir, "faults")) return 1;
    static const ck_test_case cases[] = {
        {"shot_api", test_shot_api},
        {"corrupt_and_truncated", test_corrupt_and_truncated},
        {"unreadable", test_unreadable},
        {"missing_and_mismatched", test_missing_and_mismatched},
        {"absurd_dimensions", test_absurd_dimensions},
        {"full_disk", test_full_disk},
        {"kill_and_resume", test_kill_and_resume},
        {"interrupt", test_interrupt},
        {"run_pair_full_disk", test_run_pair_full_disk},
        {"run_pair_signal", test_run_pair_signal},
    };
    int rc = ck_test_main(cases, (int)LEN(cases), argc, argv);
    for (int i = 0; i < 4; i++) ckey_image_free(&ref[i]);
    ck_remove_tree(workdir);
    return rc;
}
