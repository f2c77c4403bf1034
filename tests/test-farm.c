/*
 * A clip keyed past one process: chunks, ckey encode, ckey farm's script,
 * several sessions. Runs <dir of argv[0]>/../ckey with the tiny model
 * (tests/fixtures/tiny) on generated clips (ck_make_synth_shot, 96 x 64).
 *
 *   temp_names       ckey_temp_path names the host, process and thread
 *   chunks_compose   chunks in any order, at once, one killed mid-way (SIGKILL)
 *                    and run again, two runs racing on the same frames: the
 *                    passes and, after ckey encode, the videos are byte for
 *                    byte those of one `ckey key --video-out both` run
 *                    (whose pool has one thread, while ckey encode splits
 *                    the videos' Y'CbCr conversion over every core)
 *   encode_checks    ckey encode lists incomplete frames, refuses another
 *                    despill, removes stale temporary files
 *   key_options      --frames with --video-out points to ckey encode;
 *                    --empty-ok
 *   multi_session    --device cpu,cpu (and three sessions unthreaded) write
 *                    what one session writes; mismatched sessions refused
 *   farm_script      ckey farm slurm's script, run against a stand-in
 *                    sbatch: its tasks (one through tools/farm/slurm-key.sh,
 *                    the sbatch recipe) key their chunks, its encode job
 *                    finishes the clip
 * The Slurm cluster (tests/test-slurm.c) and OpenJD (tests/test-openjd.c)
 * run the same chunks through real schedulers.
 */
#include <errno.h>
#include <limits.h>
#include <pthread.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "ckey_clip.h"
#include "ckey_media.h"
#include "ckey.h"
#include "pixel/pixel.h"
#include "pixel/post.h"
#include "support/clip.h"
#include "support/testutil.h"

static char ckey_bin[PATH_MAX + 16];
static char workdir[256];
static char model[PATH_MAX];

enum { W = 96, H = 64 };

#define NEED_SETUP() NEED_CKEY(ckey_bin, model)

/* ckey ARGS... (NULL-terminated), stdout and stderr captured. */
static const ck_cli cli = {ckey_bin, workdir, NULL, 0};
#define ckey(...) ck_cli_run(&cli, NULL, __VA_ARGS__)

/* The passes (not the videos) of two output roots are the same files. */
static void check_same_passes(const char *want, const char *got) {
    for (int p = 0; p < 4; p++) {
        char a[2048], b[2048], why[4500];
        snprintf(a, sizeof a, "%s/%s", want, ck_pass_names[p]);
        snprintf(b, sizeof b, "%s/%s", got, ck_pass_names[p]);
        const long n = ck_same_tree(a, b, why, sizeof why);
        CHECKF(n > 0, "%s", why);
        if (n > 0) printf("  %s: %ld files byte for byte the same as %s's\n", b, n, want);
    }
}

/* ------------------------------------------------------------------ */

typedef struct {
    char path[4096];
} temp_name;

static void *temp_name_thread(void *arg) {
    temp_name *t = arg;
    char *p = ckey_temp_path("/x/plate.exr");
    snprintf(t->path, sizeof t->path, "%s", p ? p : "");
    free(p);
    return NULL;
}

static void test_temp_names(void) {
    char *p = ckey_temp_path("/x/plate.exr");
    REQUIRE(p);
    char host[256] = "";
    gethostname(host, sizeof host - 1);
    char want[512];
    snprintf(want, sizeof want, "-%ld-", (long)getpid());
    printf("  %s\n", p);
    CHECK(!strncmp(p, "/x/plate.exr.ckey-", strlen("/x/plate.exr.ckey-")));
    CHECK(strlen(p) > 4 && !strcmp(p + strlen(p) - 4, ".tmp"));
    CHECKF(strstr(p, want) != NULL, "%s lacks the pid", p);
    CHECKF(!host[0] || strchr(host, '/') || strstr(p, host) != NULL, "%s lacks the host %s", p, host);
    /* another thread of this process: another name */
    temp_name t;
    pthread_t th;
    REQUIRE(pthread_create(&th, NULL, temp_name_thread, &t) == 0);
    pthread_join(th, NULL);
    CHECKF(t.path[0] && strcmp(t.path, p), "%s and %s", t.path, p);
    free(p);
}

/* ------------------------------------------------------------------ */

/* `ckey key SHOT --out OUT --frames RANGE ...` in the background. */
static int spawn_chunk(const char *shot, const char *out, const char *range, const char *log,
                       int force) {
    const char *argv[] = {ckey_bin, "key", shot, "--out", out, "--model", model, "--size", "64",
                          "--threads", "1", "--writers", "1", "--frames", range, "--json",
                          force ? "--force" : NULL, NULL};
    return ck_spawn(argv, log);
}

static int wait_exit(int pid) {
    int status = 0;
    while (waitpid(pid, &status, 0) < 0 && errno == EINTR) {}
    return WIFEXITED(status) ? WEXITSTATUS(status) : 128 + (WIFSIGNALED(status) ? WTERMSIG(status) : 0);
}

static void test_chunks_compose(void) {
    NEED_SETUP();
    char shot[512], ref[600], out[600], dup[600], p[1024], aside[1024], log[4][700];
    REQUIRE(ck_make_synth_shot(shot, sizeof shot, workdir, "compose", 1, 8, W, H));
    snprintf(ref, sizeof ref, "%s/ref", workdir);
    snprintf(out, sizeof out, "%s/chunks", workdir);
    snprintf(dup, sizeof dup, "%s/racing", workdir);
    /* the reference: one run, passes and videos */
    ck_run_result r = ckey("key", shot, "--out", ref, "--model", model, "--size", "64", "--threads", "1",
                           "--video-out", "both", NULL);
    CHECKF(r.code == 0, "exit %d: %s", r.code, r.err);
    ck_run_free(&r);

    /* frame 4's plate becomes a FIFO nobody writes: the chunk 3-5 keys frame
     * 3, then waits there, and is killed */
    snprintf(p, sizeof p, "%s/Input/plate_0004.png", shot);
    snprintf(aside, sizeof aside, "%s/plate_0004.png", workdir);
    REQUIRE(rename(p, aside) == 0);
    REQUIRE(mkfifo(p, 0600) == 0);
    static const char *const ranges[3] = {"6-8", "1-2", "3-5"};
    int pid[3];
    for (int k = 0; k < 3; k++) {
        snprintf(log[k], sizeof log[k], "%s/chunk-%d.log", workdir, k);
        pid[k] = spawn_chunk(shot, out, ranges[k], log[k], 0);
        CHECK(pid[k] > 0);
    }
    int waited = 0;
    while (!ck_frame_complete(out, 3) && waited < 600) { /* 60 s */
        usleep(100000);
        waited++;
    }
    CHECKF(ck_frame_complete(out, 3), "frame 3 was not written within 60 s");
    kill(pid[2], SIGKILL);
    CHECK(wait_exit(pid[2]) == 128 + SIGKILL);
    for (int k = 0; k < 2; k++) {
        const int rc = wait_exit(pid[k]);
        CHECKF(rc == 0, "chunk %s: exit %d (log %s)", ranges[k], rc, log[k]);
    }
    CHECK(ck_frame_complete(out, 3) && !ck_frame_complete(out, 4) && !ck_frame_complete(out, 5));
    /* the retry resumes: frame 3 skipped, 4 and 5 keyed */
    REQUIRE(unlink(p) == 0 && rename(aside, p) == 0);
    snprintf(log[3], sizeof log[3], "%s/chunk-retry.log", workdir);
    const int retry = spawn_chunk(shot, out, "3-5", log[3], 0);
    CHECK(wait_exit(retry) == 0);
    size_t n = 0;
    char *text = (char *)ck_read_file(log[3], &n);
    CHECKF(text && strstr(text, "\"to_key\":2,\"to_skip\":1"), "the retry did not resume: %s",
           text ? text : "(no log)");
    free(text);

    /* a temporary file a killed task left elsewhere: encode removes it */
    snprintf(p, sizeof p, "%s/Matte/plate_0007.exr.ckey-elsewhere-12-34.tmp", out);
    FILE *f = fopen(p, "w");
    if (f) fclose(f);
    r = ckey("encode", shot, "--out", out, NULL);
    CHECKF(r.code == 0 && strstr(r.out, "removed 1 temporary file"), "exit %d: %s%s", r.code, r.out,
           r.err);
    ck_run_free(&r);
    char why[2300];
    const int same = ck_same_tree_n(ref, out, 34, why, sizeof why); /* 32 passes, 2 videos */
    CHECKF(same, "%s", why);
    if (same)
        printf("  chunks 6-8, 1-2, 3-5 (killed, run again) + ckey encode: all 34 files (passes "
               "and videos) byte for byte those of one run\n");

    /* two runs keying the same frames at once (a task and its retry, say):
     * each file is whole and the same, no temporary file is left */
    int racer[2];
    for (int k = 0; k < 2; k++) {
        snprintf(log[k], sizeof log[k], "%s/racer-%d.log", workdir, k);
        racer[k] = spawn_chunk(shot, dup, "1-4", log[k], 1);
    }
    for (int k = 0; k < 2; k++) CHECKF(wait_exit(racer[k]) == 0, "racer %d failed (log %s)", k, log[k]);
    for (int fr = 1; fr <= 4; fr++)
        for (int q = 0; q < 4; q++) {
            char a[1024], b[1024];
            ck_pass_path(a, sizeof a, ref, q, fr);
            ck_pass_path(b, sizeof b, dup, q, fr);
            CHECKF(ck_same_file(a, b), "%s and %s differ", a, b);
        }
    char why2[2300];
    for (int q = 0; q < 4; q++) { /* nothing else, no temporary file, in the racers' folders */
        char d[2048];
        snprintf(d, sizeof d, "%s/%s", dup, ck_pass_names[q]);
        CHECKF(ck_same_tree(d, d, why2, sizeof why2) == 4, "%s does not hold exactly 4 files", d);
    }
}

/* ------------------------------------------------------------------ */

static void test_encode_checks(void) {
    NEED_SETUP();
    char shot[512], out[600], p[1024];
    REQUIRE(ck_make_synth_shot(shot, sizeof shot, workdir, "enc", 1, 6, W, H));
    snprintf(out, sizeof out, "%s/Output", shot);
    ck_run_result r = ckey("key", shot, "--model", model, "--size", "64", "--threads", "1", "--frames",
                           "3-4", NULL);
    CHECKF(r.code == 0, "exit %d: %s", r.code, r.err);
    ck_run_free(&r);
    /* incomplete: frames 1-2 and 5-6; a frame with one pass missing is incomplete too */
    snprintf(p, sizeof p, "%s/Comp/plate_0004.png", out);
    REQUIRE(unlink(p) == 0);
    r = ckey("encode", shot, NULL);
    CHECKF(r.code == 1 && strstr(r.err, "frames 1-2, 4-6") && strstr(r.err, "5 of the 6 frames"),
           "exit %d: %s", r.code, r.err);
    ck_run_free(&r);
    r = ckey("encode", shot, "--json", NULL);
    CHECKF(r.code == 1 && strstr(r.out, "\"missing\": [1, 2, 4, 5, 6]"), "exit %d: %s", r.code, r.out);
    ck_run_free(&r);
    snprintf(p, sizeof p, "%s/shot_fg_alpha.mov", out);
    CHECK(access(p, F_OK) != 0);
    /* complete it */
    r = ckey("key", shot, "--model", model, "--size", "64", "--threads", "1", NULL);
    CHECKF(r.code == 0 && strstr(r.out, "keyed 5 frames, skipped 1"), "exit %d: %s", r.code, r.out);
    ck_run_free(&r);
    /* another despill than the clip's: refused, naming the frame. The tiny
     * model's FG has little green excess, so frame 6's passes are replaced
     * by a strongly spilled FG and its Processed pass at despill 0.5. */
    {
        enum { N = W * H };
        float *fg = malloc(sizeof(float) * 3 * N), *pr = malloc(sizeof(float) * 4 * N);
        REQUIRE(fg && pr);
        for (size_t i = 0; i < N; i++) {
            fg[i] = 0.2f, fg[N + i] = 0.8f, fg[2 * N + i] = 0.3f;
            pr[3 * N + i] = 1.0f;
        }
        float c[3] = {0.2f, 0.8f, 0.3f};
        ck_despill(c, 1, 0.5);
        for (int ch = 0; ch < 3; ch++)
            for (size_t i = 0; i < N; i++) pr[(size_t)ch * N + i] = ck_srgb_to_linear1(c[ch]);
        ckey_error err;
        snprintf(p, sizeof p, "%s/FG/plate_0006.exr", out);
        CHECK(ckey_image_write_exr(p, fg, 3, W, H, CKEY_EXR_PXR24, &err) == CKEY_OK);
        snprintf(p, sizeof p, "%s/Processed/plate_0006.exr", out);
        CHECK(ckey_image_write_exr(p, pr, 4, W, H, CKEY_EXR_PXR24, &err) == CKEY_OK);
        free(fg);
        free(pr);
    }
    r = ckey("encode", shot, "--despill", "1", NULL);
    CHECKF(r.code == 1 && strstr(r.err, "frame 6:") && strstr(r.err, "--despill"), "exit %d: %s",
           r.code, r.err);
    ck_run_free(&r);
    snprintf(p, sizeof p, "%s/enc_fg_alpha.mov", out);
    CHECK(access(p, F_OK) != 0);
    r = ckey("encode", shot, "--despill", "0.5", "--video-out", "prores", NULL);
    CHECKF(r.code == 0, "exit %d: %s", r.code, r.err);
    ck_run_free(&r);
    CHECK(access(p, F_OK) == 0);
    /* --video-out none: the check and the clean-up only */
    snprintf(p, sizeof p, "%s/FG/plate_0002.exr.ckey-host-1-1.tmp", out);
    FILE *f = fopen(p, "w");
    if (f) fclose(f);
    r = ckey("encode", shot, "--video-out", "none", "--json", NULL);
    CHECKF(r.code == 0 && strstr(r.out, "\"videos\": []") && strstr(r.out, "\"removed_temporary_files\": 1"),
           "exit %d: %s", r.code, r.out);
    ck_run_free(&r);
    CHECK(access(p, F_OK) != 0);
    r = ckey("encode", shot, "--video-out", "h264", "--json", NULL);
    CHECKF(r.code == 0 && strstr(r.out, "enc_comp.mp4") && !strstr(r.out, "fg_alpha"), "exit %d: %s",
           r.code, r.out);
    ck_run_free(&r);
    r = ckey("encode", shot, "--video-out", "none", "--fps", "25", NULL);
    CHECKF(r.code == 2, "exit %d: %s", r.code, r.err);
    ck_run_free(&r);
    r = ckey("encode", NULL);
    CHECKF(r.code == 2 && strstr(r.err, "SHOT_DIR"), "exit %d: %s", r.code, r.err);
    ck_run_free(&r);
}

/* ------------------------------------------------------------------ */

static void test_key_options(void) {
    NEED_SETUP();
    char shot[512];
    REQUIRE(ck_make_synth_shot(shot, sizeof shot, workdir, "opts", 5, 3, W, H));
    ck_run_result r = ckey("key", shot, "--model", model, "--frames", "5-6", "--video-out", "both", NULL);
    CHECKF(r.code == 2 && strstr(r.err, "ckey encode"), "exit %d: %s", r.code, r.err);
    ck_run_free(&r);
    /* a chunk over a gap in the numbering */
    r = ckey("key", shot, "--model", model, "--size", "64", "--frames", "20-29", NULL);
    CHECKF(r.code == 1 && strstr(r.err, "--empty-ok"), "exit %d: %s", r.code, r.err);
    ck_run_free(&r);
    r = ckey("key", shot, "--model", model, "--size", "64", "--frames", "20-29", "--empty-ok", "--json",
             NULL);
    CHECKF(r.code == 0 && strstr(r.out, "\"empty\":true") && strstr(r.out, "\"frames\":0"),
           "exit %d: %s", r.code, r.out);
    ck_run_free(&r);
    r = ckey("key", shot, "--model", model, "--empty-ok", NULL);
    CHECKF(r.code == 2, "exit %d: %s", r.code, r.err);
    ck_run_free(&r);
    /* a device list is for key only */
    r = ckey("info", "--model", model, "--device", "cpu,cpu", NULL);
    CHECKF(r.code == 2 && strstr(r.err, "ckey key"), "exit %d: %s", r.code, r.err);
    ck_run_free(&r);
    r = ckey("key", shot, "--model", model, "--device", "cpu,gpu", NULL);
    CHECKF(r.code == 2 && strstr(r.err, "cuda:all"), "exit %d: %s", r.code, r.err);
    ck_run_free(&r);
}

/* ------------------------------------------------------------------ */

static void test_multi_session(void) {
    NEED_SETUP();
    char shot[512], out[3][600];
    REQUIRE(ck_make_synth_shot(shot, sizeof shot, workdir, "multi", 1, 7, W, H));
    static const char *const devices[3] = {"cpu", "cpu,cpu", "cpu,cpu,cpu"};
    static const char *const read_ahead[3] = {"2", "2", "0"};
    for (int v = 0; v < 3; v++) {
        snprintf(out[v], sizeof out[v], "%s/multi-%d", workdir, v);
        ck_run_result r = ckey("key", shot, "--out", out[v], "--model", model, "--size", "64",
                               "--threads", "1", "--device", devices[v], "--read-ahead", read_ahead[v],
                               "--writers", "2", "--json", NULL);
        CHECKF(r.code == 0, "--device %s: exit %d: %s", devices[v], r.code, r.err);
        char want[64];
        for (int s = 0; s < v + 1; s++) {
            /* a frame event's session, followed by the event's next key or its end */
            char want2[64];
            snprintf(want, sizeof want, "\"session\":%d,", s);
            snprintf(want2, sizeof want2, "\"session\":%d}", s);
            CHECKF(strstr(r.out, want) != NULL || strstr(r.out, want2) != NULL,
                   "--device %s: no frame keyed by session %d", devices[v], s);
        }
        snprintf(want, sizeof want, "\"sessions\":%d", v + 1);
        CHECKF(strstr(r.out, want) != NULL, "--device %s: %s missing", devices[v], want);
        /* frame events in order */
        const char *at = r.out;
        for (int k = 1; k <= 7; k++) {
            char ev[64];
            snprintf(ev, sizeof ev, "\"frame\":%d,\"status\":\"keyed\"", k);
            const char *q = strstr(r.out, ev);
            CHECKF(q && q >= at, "--device %s: event of frame %d missing or out of order", devices[v], k);
            if (q) at = q;
        }
        ck_run_free(&r);
        if (v > 0) check_same_passes(out[0], out[v]);
    }
    /* the library refuses sessions that key differently */
    ckey_model *m = NULL;
    ckey_error err;
    REQUIRE(ckey_model_load(model, &m, &err) == CKEY_OK);
    ckey_session_options so;
    ckey_session_options_default(&so);
    so.device = CKEY_DEVICE_CPU;
    so.threads = 1;
    ckey_session *s[2] = {NULL, NULL};
    so.size = 64;
    CHECK(ckey_session_create(m, &so, &s[0], &err) == CKEY_OK);
    so.size = 96;
    CHECK(ckey_session_create(m, &so, &s[1], &err) == CKEY_OK);
    ckey_source src;
    ckey_sink sink;
    char plates[600], hints[600], o2[600];
    snprintf(plates, sizeof plates, "%s/Input", shot);
    snprintf(hints, sizeof hints, "%s/AlphaHint", shot);
    snprintf(o2, sizeof o2, "%s/multi-bad", workdir);
    REQUIRE(ckey_source_open_sequence(plates, hints, NULL, NULL, &src, &err) == CKEY_OK);
    REQUIRE(ckey_sink_open_passes(o2, CKEY_EXR_PXR24, &sink, &err) == CKEY_OK);
    if (s[0] && s[1]) {
        const ckey_status st = ckey_shot_run_multi(s, 2, &src, &sink, NULL, NULL, NULL, NULL, NULL, &err);
        CHECKF(st == CKEY_ERR_INVALID_ARG && strstr(err.message, "alike"), "%s: %s",
               ckey_status_name(st), err.message);
    }
    CHECK(ckey_shot_run_multi(s, 0, &src, &sink, NULL, NULL, NULL, NULL, NULL, &err) == CKEY_ERR_INVALID_ARG);
    CHECK(access(o2, F_OK) != 0);
    ckey_source_close(&src);
    ckey_sink_close(&sink);
    ckey_session_free(s[0]);
    ckey_session_free(s[1]);
    ckey_model_free(m);
}

/* ------------------------------------------------------------------ */

/* A stand-in for sbatch: records each call's options and job script, and
 * answers job ids 101, 102, ... as --parsable does ("id;cluster"). */
static const char fake_sbatch[] =
    "#!/bin/sh\n"
    "n=$(cat \"$FAKE_SBATCH/count\" 2>/dev/null || echo 0); n=$((n + 1))\n"
    "echo $n > \"$FAKE_SBATCH/count\"\n"
    "echo \"$@\" > \"$FAKE_SBATCH/args.$n\"\n"
    "cat > \"$FAKE_SBATCH/script.$n\"\n"
    "echo \"$((100 + n));local\"\n";

static void test_farm_script(void) {
    NEED_SETUP();
    char shot[512], logs[600], fake[600], p[1024], cmd[16384];
    REQUIRE(ck_make_synth_shot(shot, sizeof shot, workdir, "farmed", 1, 7, W, H));
    snprintf(logs, sizeof logs, "%s/farm-logs", workdir);
    ck_run_result r = ckey("farm", "slurm", shot, "--chunk", "3", "--logs", logs, "--partition", "gpu",
                           "--sbatch=--account=vfx", "--max-running", "2", "--", "--model", model,
                           "--size", "64", "--threads", "1", NULL);
    CHECKF(r.code == 0, "exit %d: %s", r.code, r.err);
    static const char *const want[] = {
        "--array=0-2%2", "--gres=gpu:1", "--dependency=afterok:$key_job", "--partition='gpu'",
        "'--account=vfx'", "first=$(( 1 + 3 * SLURM_ARRAY_TASK_ID ))", "if [ \"$last\" -gt 7 ]",
        "--frames \"$first-$last\" --empty-ok", "' encode '", "--video-out both", "key-%A_%a.log",
        "'--size' '64'"};
    for (size_t k = 0; k < sizeof want / sizeof want[0]; k++)
        CHECKF(strstr(r.out, want[k]) != NULL, "the script lacks %s:\n%s", want[k], r.out);
    ck_run_free(&r);
    r = ckey("farm", "slurm", shot, "--chunk", "4", "--gpus", "0", NULL);
    CHECKF(r.code == 0 && strstr(r.out, "--device cpu") && !strstr(r.out, "--gres"), "%s", r.out);
    ck_run_free(&r);
    r = ckey("farm", "slurm", shot, "--chunk", "4", "--gpus", "2", "--chunks", "0,1", NULL);
    CHECKF(r.code == 0 && strstr(r.out, "--gres=gpu:2") && strstr(r.out, "--device cuda:all") &&
               strstr(r.out, "--array=0,1 "),
           "%s", r.out);
    ck_run_free(&r);
    /* usage errors */
    static const char *const bad[][8] = {
        {"farm", "slurm", "SHOT", "--chunk", "4", "--", "--frames", "1-2"},
        {"farm", "slurm", "SHOT", "--chunk", "4", "--chunks", "3", NULL},
        {"farm", "slurm", "SHOT", NULL},
        {"farm", "pbs", "SHOT", "--chunk", "4", NULL},
        {"farm", "slurm", "SHOT", "--chunk", "4", "--", "--sizee", "64"},
    };
    for (size_t k = 0; k < sizeof bad / sizeof bad[0]; k++) {
        const char *args[9] = {NULL};
        for (int i = 0; i < 8; i++) args[i] = bad[k][i] && !strcmp(bad[k][i], "SHOT") ? shot : bad[k][i];
        r = ck_cli_run_argv(&cli, NULL, args);
        CHECKF(r.code == 2, "case %zu: exit %d: %s", k, r.code, r.err);
        ck_run_free(&r);
    }

    /* the script, with a stand-in sbatch: then run what it submitted, the
     * tasks in another order, and the encode job */
    snprintf(fake, sizeof fake, "%s/fake-sbatch", workdir);
    REQUIRE(mkdir(fake, 0777) == 0);
    snprintf(p, sizeof p, "%s/sbatch", fake);
    FILE *f = fopen(p, "w");
    REQUIRE(f);
    fputs(fake_sbatch, f);
    fclose(f);
    chmod(p, 0755);
    snprintf(cmd, sizeof cmd,
             "'%s' farm slurm '%s' --chunk 3 -- --model '%s' --size 64 --threads 1 --device cpu "
             "> '%s/submit.sh' && FAKE_SBATCH='%s' PATH='%s':\"$PATH\" bash '%s/submit.sh'",
             ckey_bin, shot, model, fake, fake, fake, fake);
    r = ck_sh(cmd, workdir);
    CHECKF(r.code == 0 && strstr(r.out, "key job 101") && strstr(r.out, "encode job 102"),
           "exit %d: %s%s", r.code, r.out, r.err);
    ck_run_free(&r);
    snprintf(p, sizeof p, "%s/args.2", fake);
    size_t n = 0;
    char *args = (char *)ck_read_file(p, &n);
    CHECKF(args && strstr(args, "--dependency=afterok:101 "), "encode job options: %s", args ? args : "none");
    free(args);
    /* tasks 2, 0, 1; task 0 through tools/farm/slurm-key.sh, the recipe's
     * task script, which must key the same frames */
    static const char *const order[3] = {"2", "0", "1"};
    char *recipe = realpath("tools/farm/slurm-key.sh", NULL);
    CHECK(recipe != NULL);
    for (int k = 0; k < 3; k++) {
        if (k == 1 && recipe)
            snprintf(cmd, sizeof cmd,
                     "SLURM_ARRAY_TASK_ID=0 CKEY='%s' '%s' '%s' 1 7 3 --model '%s' --size 64 "
                     "--threads 1 --device cpu",
                     ckey_bin, recipe, shot, model);
        else
            snprintf(cmd, sizeof cmd, "SLURM_ARRAY_TASK_ID=%s bash '%s/script.1'", order[k], fake);
        r = ck_sh(cmd, workdir);
        CHECKF(r.code == 0, "task %s: exit %d: %s", order[k], r.code, r.err);
        ck_run_free(&r);
        if (k == 0) { /* task 2 keyed frame 7; the encode must refuse */
            snprintf(cmd, sizeof cmd, "bash '%s/script.2'", fake);
            r = ck_sh(cmd, workdir);
            CHECKF(r.code == 1 && strstr(r.err, "frames 1-6"), "exit %d: %s", r.code, r.err);
            ck_run_free(&r);
        }
    }
    free(recipe);
    snprintf(cmd, sizeof cmd, "bash '%s/script.2'", fake);
    r = ck_sh(cmd, workdir);
    CHECKF(r.code == 0 && strstr(r.out, "farmed_fg_alpha.mov"), "exit %d: %s%s", r.code, r.out, r.err);
    ck_run_free(&r);
    char ref[600], out[600];
    snprintf(ref, sizeof ref, "%s/farmed-ref", workdir);
    snprintf(out, sizeof out, "%s/Output", shot);
    r = ckey("key", shot, "--out", ref, "--model", model, "--size", "64", "--threads", "1", "--device", "cpu",
             "--video-out", "both", NULL);
    CHECKF(r.code == 0, "exit %d: %s", r.code, r.err);
    ck_run_free(&r);
    char why[2300];
    const int same = ck_same_tree_n(ref, out, 30, why, sizeof why);
    CHECKF(same, "%s", why);
    if (same) printf("  the farm script's tasks + encode: 30 files as one run's\n");
}

int main(int argc, char **argv) {
    CK_TEST_NEEDS(CK_BUILT_PNG && CK_BUILT_EXR && CK_BUILT_FFMPEG,
                  "test-farm: skipped: clips need PNG, OpenEXR and FFmpeg support in the build\n");
    ck_ckey_path(ckey_bin, sizeof ckey_bin, argv[0]);
    ck_tiny_model_path(model, sizeof model);
    if (!ck_make_temp_dir(workdir, sizeof workdir, "farm")) return 1;
    static const ck_test_case cases[] = {
        {"temp_names", test_temp_names},
        {"chunks_compose", test_chunks_compose},
        {"encode_checks", test_encode_checks},
        {"key_options", test_key_options},
        {"multi_session", test_multi_session},
        {"farm_script", test_farm_script},
    };
    const int rc = ck_test_main(cases, (int)(sizeof cases / sizeof cases[0]), argc, argv);
    ck_remove_tree(workdir);
    return rc;
}
