/*
 * A clip keyed on a real Slurm cluster: a single-node cluster started here
 * from Debian's packages (tools/farm/local-slurm.sh: munged with its own key
 * and socket, slurmctld, slurmd with two fake GPUs; everything under a
 * temporary directory, stopped at the end whatever happened), then
 *
 *   1. `ckey farm slurm CLIP --chunk 4 --submit`: an array of 3 tasks (frames
 *      1-4, 5-8, 9-12; --gres=gpu:1 each, so two run at once) and an encode
 *      job after them (--dependency=afterok);
 *   2. task 1 is held mid-way (frame 7's plate is a FIFO nobody writes: it
 *      keys 5 and 6, then waits) and cancelled with scancel, so the encode
 *      job can never start (DependencyNeverSatisfied): it is cancelled too;
 *   3. the plate is put back and task 1 resubmitted (--chunks 1, with a new
 *      encode job): it resumes (frames 5 and 6 skipped);
 *   4. once the encode job has completed, every pass and both videos are
 *      byte for byte those of one `ckey key --video-out both` run.
 *
 * Skipped (exit 77, the reason printed) when slurmctld, slurmd or munged is
 * not installed, or when not run as root (slurmd starts jobs as their
 * users); tools/install-deps.sh installs them, so CI runs it.
 */
#include <limits.h>
#include <stdlib.h>
#include <string.h>
#include <signal.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "ckey.h"
#include "support/clip.h"
#include "support/testutil.h"

static char ckey_bin[PATH_MAX + 16];
static char workdir[256];
static char model[PATH_MAX];
static char local_slurm[PATH_MAX];

enum { W = 96, H = 64, FRAMES = 12 };

/* sh -c (printf-style command), output captured. */
#define shf(...) ck_shf(workdir, __VA_ARGS__)

/* The first line of `squeue -h -j JOB -o FORMAT` ("" when the job is gone). */
static void squeue(const char *job, const char *format, char *buf, size_t cap) {
    ck_run_result r = shf("timeout 10 squeue -h -j '%s' -o '%s' 2>&1", job, format);
    snprintf(buf, cap, "%.*s", (int)strcspn(r.out, "\n"), r.out);
    ck_run_free(&r);
}

/* JobState=... of `scontrol show job JOB` ("" when unknown). */
static void job_state(long job, char *buf, size_t cap) {
    ck_run_result r = shf("timeout 10 scontrol show job -o %ld 2>&1", job);
    const char *s = strstr(r.out, "JobState=");
    snprintf(buf, cap, "%.*s", s ? (int)strcspn(s + 9, " \n") : 0, s ? s + 9 : "");
    ck_run_free(&r);
}

/* The job ids `ckey farm slurm --submit` printed. */
static int parse_jobs(const char *out, long *key, long *encode) {
    const char *k = strstr(out, "key job "), *e = strstr(out, "encode job ");
    return k && e && sscanf(k, "key job %ld", key) == 1 && sscanf(e, "encode job %ld", encode) == 1;
}

/* Wait up to `seconds` for `cond`; ok = 1 when it held. */
#define WAIT_FOR(ok, cond, seconds)                                                         \
    do {                                                                                    \
        (ok) = 0;                                                                           \
        for (int t_ = 0; t_ < (seconds) * 5 && !((ok) = (cond)); t_++) usleep(200000);     \
    } while (0)

static void print_logs(const char *cluster, const char *logs) {
    ck_run_result r = shf("tail -n 20 '%s'/log/slurmctld.log '%s'/log/slurmd.log '%s'/*.log 2>&1", cluster,
                          cluster, logs);
    printf("%s", r.out);
    ck_run_free(&r);
}

/* Everything between the cluster's start and stop. */
static void on_cluster(const char *cluster) {
    char clip[512], ref[600], out[600], logs[600], plate[1024], aside[1024], farm[16384], buf[256];
    REQUIRE(ck_make_synth_shot(clip, sizeof clip, workdir, "slurmclip", 1, FRAMES, W, H));
    snprintf(ref, sizeof ref, "%s/ref", workdir);
    snprintf(out, sizeof out, "%s/Output", clip);
    snprintf(logs, sizeof logs, "%s/logs", workdir);
    ck_run_result r = shf("'%s' key '%s' --out '%s' --model '%s' --size 64 --threads 1 --video-out both",
                          ckey_bin, clip, ref, model);
    REQUIRE(r.code == 0);
    ck_run_free(&r);
    /* %s: more farm options (--chunks for the retry) */
    snprintf(farm, sizeof farm,
             "timeout 120 '%s' farm slurm '%s' --chunk 4 --cpus 1 --logs '%s' --submit %%s -- --model '%s' "
             "--size 64 --threads 1 --writers 1 --device cpu",
             ckey_bin, clip, logs, model);

    /* frame 7 waits on a FIFO: task 1 (frames 5-8) stops there */
    snprintf(plate, sizeof plate, "%s/Input/plate_0007.png", clip);
    snprintf(aside, sizeof aside, "%s/plate_0007.png", workdir);
    REQUIRE(rename(plate, aside) == 0 && mkfifo(plate, 0600) == 0);

    char cmd[16500];
    snprintf(cmd, sizeof cmd, farm, "");
    r = shf("%s", cmd);
    long key = 0, encode = 0;
    const int submitted = r.code == 0 && parse_jobs(r.out, &key, &encode);
    CHECKF(submitted, "exit %d: %s%s", r.code, r.out, r.err);
    ck_run_free(&r);
    if (!submitted) return;
    printf("  submitted: key array job %ld (3 tasks), encode job %ld\n", key, encode);
    char task1[64], enc[32];
    snprintf(task1, sizeof task1, "%ld_1", key);
    snprintf(enc, sizeof enc, "%ld", encode);

    int held, gone, never, done;
    WAIT_FOR(held, ck_frame_complete(out, 5) && ck_frame_complete(out, 6), 90);
    CHECKF(held, "task 1 did not key frames 5 and 6 within 90 s");
    squeue(task1, "%T", buf, sizeof buf);
    CHECKF(!strcmp(buf, "RUNNING"), "task %s is '%s', not RUNNING", task1, buf);
    if (!held) {
        print_logs(cluster, logs);
        return;
    }
    r = shf("timeout 10 scancel '%s'", task1);
    CHECKF(r.code == 0, "scancel %s: %s", task1, r.err);
    ck_run_free(&r);
    WAIT_FOR(gone, (squeue(task1, "%T", buf, sizeof buf), !buf[0]), 30);
    CHECKF(gone, "task %s still '%s'", task1, buf);
    CHECK(!ck_frame_complete(out, 7) && !ck_frame_complete(out, 8));
    printf("  task %s cancelled mid-way: frames 5-6 written, 7-8 not\n", task1);
    /* the encode job waits for a task that will never succeed */
    WAIT_FOR(never, (squeue(enc, "%r", buf, sizeof buf), !strcmp(buf, "DependencyNeverSatisfied")), 30);
    CHECKF(never, "encode job %s: reason '%s', not DependencyNeverSatisfied", enc, buf);
    r = shf("timeout 10 scancel '%s'", enc);
    ck_run_free(&r);

    /* the plate back; task 1 again, with a new encode job */
    REQUIRE(unlink(plate) == 0 && rename(aside, plate) == 0);
    snprintf(cmd, sizeof cmd, farm, "--chunks 1");
    r = shf("%s", cmd);
    long key2 = 0, encode2 = 0;
    const int resubmitted = r.code == 0 && parse_jobs(r.out, &key2, &encode2);
    CHECKF(resubmitted, "exit %d: %s%s", r.code, r.out, r.err);
    ck_run_free(&r);
    if (!resubmitted) return;
    printf("  resubmitted task 1: key array job %ld, encode job %ld\n", key2, encode2);
    WAIT_FOR(done,
             (job_state(encode2, buf, sizeof buf), buf[0] && strcmp(buf, "PENDING") &&
                                                       strcmp(buf, "RUNNING") && strcmp(buf, "CONFIGURING") &&
                                                       strcmp(buf, "COMPLETING")),
             180);
    CHECKF(done && !strcmp(buf, "COMPLETED"), "encode job %ld: '%s'", encode2, buf);
    if (!done || strcmp(buf, "COMPLETED")) {
        print_logs(cluster, logs);
        return;
    }
    /* the retry resumed its chunk */
    char log[700];
    snprintf(log, sizeof log, "%s/key-%ld_1.log", logs, key2);
    size_t n = 0;
    char *text = (char *)ck_read_file(log, &n);
    CHECKF(text && strstr(text, "keyed 2 frames, skipped 2"), "%s: %s", log, text ? text : "(none)");
    free(text);
    char why[2300];
    const int same = ck_same_tree_n(ref, out, 4 * FRAMES + 2, why, sizeof why);
    CHECKF(same, "%s", why);
    if (same)
        printf("  Slurm: 3 tasks (one cancelled and resubmitted) + encode: all %d files (passes "
               "and videos) byte for byte those of one run\n", 4 * FRAMES + 2);
}

static void test_slurm(void) {
    if (access(ckey_bin, X_OK) != 0) SKIP("%s is not built", ckey_bin);
    if (access(local_slurm, X_OK) != 0) SKIP("no %s", local_slurm);
    char cluster[600], conf[700];
    snprintf(cluster, sizeof cluster, "%s/cluster", workdir);
    ck_run_result r = shf("'%s' start '%s' 2 2", local_slurm, cluster);
    if (r.code == 77) {
        char why[600];
        snprintf(why, sizeof why, "%.*s", (int)strcspn(r.err, "\n"), r.err);
        ck_run_free(&r);
        SKIP("no Slurm cluster here: %s", why);
    }
    CHECKF(r.code == 0, "local-slurm.sh start: exit %d: %s%s", r.code, r.out, r.err);
    ck_run_free(&r);
    snprintf(conf, sizeof conf, "%s/slurm.conf", cluster);
    setenv("SLURM_CONF", conf, 1);
    if (!ck_test_failed) {
        /* in a child process, so that the cluster is stopped below whatever
         * happens there (a crash, a hang: killed after 10 minutes) */
        fflush(stdout);
        const pid_t pid = fork();
        if (pid == 0) {
            on_cluster(cluster);
            fflush(stdout);
            _exit(ck_test_failed ? 1 : 0);
        }
        int status = 0, waited = 0;
        while (pid > 0 && waitpid(pid, &status, WNOHANG) == 0) {
            if (++waited > 6000) { /* 600 s */
                printf("  the test did not finish within 10 minutes: killed\n");
                kill(pid, SIGKILL);
                waitpid(pid, &status, 0);
                break;
            }
            usleep(100000);
        }
        CHECKF(pid > 0 && WIFEXITED(status) && WEXITSTATUS(status) == 0,
               "the steps on the cluster failed (status %d)", status);
    }
    r = shf("'%s' stop '%s'", local_slurm, cluster);
    CHECKF(r.code == 0, "local-slurm.sh stop: exit %d: %s", r.code, r.err);
    ck_run_free(&r);
    unsetenv("SLURM_CONF");
}

int main(int argc, char **argv) {
    CK_TEST_NEEDS(CK_BUILT_PNG && CK_BUILT_EXR && CK_BUILT_FFMPEG,
                  "test-slurm: skipped: clips need PNG, OpenEXR and FFmpeg support in the build\n");
    ck_ckey_path(ckey_bin, sizeof ckey_bin, argv[0]);
    ck_tiny_model_path(model, sizeof model);
    /* the repository's tools (the tests run from its root) */
    ck_abs_path(local_slurm, sizeof local_slurm, "tools/farm/local-slurm.sh");
    if (!ck_make_temp_dir(workdir, sizeof workdir, "slurm")) return 1;
    /* world-readable: the jobs run as the caller, but slurmd's checks walk it */
    chmod(workdir, 0755);
    static const ck_test_case cases[] = {
        {"slurm_chunks", test_slurm},
    };
    const int rc = ck_test_main(cases, (int)(sizeof cases / sizeof cases[0]), argc, argv);
    ck_remove_tree(workdir);
    return rc;
}
