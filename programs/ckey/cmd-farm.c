/*
 * ckey farm slurm: a clip keyed on a Slurm cluster as a job array of frame
 * chunks (one `ckey key --frames A-B` per task, a GPU each) plus a final
 * `ckey encode` job that runs once every task has succeeded
 * (--dependency=afterok). Prints the submission as a bash script, or runs it
 * with --submit, so what is submitted can always be read first.
 *
 * Task t keys the frame numbers FIRST + t * CHUNK .. FIRST + (t + 1) * CHUNK
 * - 1 (the last task stops at LAST), computed in the task from
 * SLURM_ARRAY_TASK_ID, with --empty-ok so that a chunk over a gap in a
 * sequence's numbering succeeds with nothing to do. Chunks compose: every
 * frame's files are written only by the task that owns it, and a retried
 * task resumes its chunk where the killed one stopped.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "ckey_clip.h"
#include "ckey.h"
#include "clip-paths.h"
#include "commands.h"
#include "help.h"
#include "opts.h"
#include "output.h"
#include "paths.h"

/* `s` single-quoted for the shell. */
static void sh_quote(FILE *f, const char *s) {
    fputc('\'', f);
    for (; *s; s++) {
        if (*s == '\'') fputs("'\\''", f);
        else fputc(*s, f);
    }
    fputc('\'', f);
}

/* The ckey options farm sets itself, refused after "--". */
static const char *const farm_owned[] = {"--frames", "--out", "--plate", "--hint", "--video-out",
                                         "--fps", "--despill", "--dry-run", "--empty-ok"};

/* 1 when argument `a` ("--name" or "--name=value") is option `name`. */
static int is_option(const char *a, const char *name) {
    const size_t n = strlen(name);
    return !strncmp(a, name, n) && (a[n] == 0 || a[n] == '=');
}

typedef struct farm_job {
    opts o;
    clip_paths cp;
    ckey_source src;
    int64_t first, last;     /* frame numbers of the clip's first and last frames */
    long ntasks;
    char **key_args;         /* the ckey key options after "--" */
    int nkey_args;
    int key_has_device;      /* --device among them */
    char ckey_path[4096];    /* the ckey the tasks run */
    ckey_error err;
} farm_job;

/* The key options after "--": none that farm sets, and valid for ckey key. */
static int check_key_args(farm_job *j) {
    for (int i = 0; i < j->nkey_args; i++) {
        const char *a = j->key_args[i];
        for (size_t k = 0; k < sizeof farm_owned / sizeof farm_owned[0]; k++)
            if (is_option(a, farm_owned[k]))
                return usage_error(j->o.cmd, "%s after --: farm sets it (give --out, --plate, "
                                             "--hint, --video-out, --fps and --despill before --; "
                                             "each task gets its own --frames)",
                                   farm_owned[k]);
        if (is_option(a, "--device")) j->key_has_device = 1;
    }
    /* the same parser ckey key uses, so a typo fails here, not in every task */
    opts k;
    opts_init_session(&k, "farm");
    char **argv = malloc(((size_t)j->nkey_args + 2) * sizeof *argv);
    if (!argv) return fail(0, CKEY_ERR_NOMEM, "out of memory");
    argv[0] = (char *)"key";
    for (int i = 0; i < j->nkey_args; i++) argv[i + 1] = j->key_args[i];
    argv[j->nkey_args + 1] = NULL;
    const uint64_t key_opts = O_MODEL | O_SIZE | O_THREADS | O_STRENGTH | O_LINEAR | O_INPUT_SPACE |
                              O_DEVICE | O_DEVICE_LIST | O_PRECISION | O_BUDGET | O_NO_DESPECKLE |
                              O_DESPECKLE_AREA | O_FORCE | O_EXR_COMPRESSION | O_ON_ERROR |
                              O_READ_AHEAD | O_RESIZE_BACK | O_DESPECKLE_MODE | O_VERBOSE |
                              O_WRITERS | O_JSON;
    const int rc = parse_opts(j->nkey_args + 1, argv, key_opts, 0, help_key, &k);
    free(argv);
    return rc == EXIT_OK ? EXIT_USAGE : rc; /* --help after -- is no farm */
}

/* The ckey binary the tasks run: --ckey, else this one (absolute). */
static int find_ckey(farm_job *j) {
    if (j->o.ckey) {
        snprintf(j->ckey_path, sizeof j->ckey_path, "%s", j->o.ckey);
        return CONTINUE;
    }
    const ssize_t n = readlink("/proc/self/exe", j->ckey_path, sizeof j->ckey_path - 1);
    if (n <= 0) return fail(0, CKEY_ERR_IO, "cannot tell where this ckey is (%s): give --ckey PATH",
                            strerror(errno));
    j->ckey_path[n] = 0;
    return CONTINUE;
}

/* An absolute path, so that tasks starting elsewhere find it (the nodes share
 * the file system); `p` as given when it does not exist yet. Malloc'd. */
static char *absolute(const char *p) {
    char *r = realpath(p, NULL);
    if (r) return r;
    if (p[0] == '/') return strdup(p);
    char cwd[4096];
    if (!getcwd(cwd, sizeof cwd)) return strdup(p);
    return path_join(cwd, p);
}

/* The ckey arguments that name the clip: SHOT_DIR [--out DIR], or --plate,
 * --hint and --out (absolute). */
static void print_clip_args(FILE *f, const farm_job *j, int with_hint) {
    const opts *o = &j->o;
    if (j->cp.shot) {
        char *s = absolute(j->cp.shot);
        fputc(' ', f);
        sh_quote(f, s ? s : j->cp.shot);
        free(s);
        if (o->out) {
            char *d = absolute(o->out);
            fputs(" --out ", f);
            sh_quote(f, d ? d : o->out);
            free(d);
        }
        if (with_hint && j->cp.auto_hint) fputs(" --hint auto", f);
        return;
    }
    const char *names[3] = {"--plate", "--hint", "--out"};
    const char *vals[3] = {o->plate, o->hint, o->out};
    for (int k = 0; k < 3; k++) {
        if (k == 1 && !with_hint) continue;
        char *a = k == 1 && j->cp.auto_hint ? strdup("auto") : absolute(vals[k]);
        fprintf(f, " %s ", names[k]);
        sh_quote(f, a ? a : vals[k]);
        free(a);
    }
}

/* sbatch options both jobs take: --partition, --cpus, --sbatch. */
static void print_common_sbatch(FILE *f, const opts *o) {
    if (o->partition) {
        fputs(" --partition=", f);
        sh_quote(f, o->partition);
    }
    if (o->cpus) fprintf(f, " --cpus-per-task=%ld", o->cpus);
    for (int i = 0; i < o->nsbatch; i++) {
        fputc(' ', f);
        sh_quote(f, o->sbatch[i]);
    }
}

/* --output=LOGS/NAME (sbatch's filename pattern) when there is a logs folder. */
static void print_output(FILE *f, const char *logs, const char *name) {
    if (!logs) return;
    char *p = path_join(logs, name);
    fputs(" --output=", f);
    sh_quote(f, p ? p : logs);
    free(p);
}

/* The submission: a bash script that submits the array, then the encode
 * job after it, and prints both job ids. */
static void print_script(FILE *f, const farm_job *j) {
    const opts *o = &j->o;
    const long gpus = o->gpus < 0 ? 1 : o->gpus;
    char name[300];
    snprintf(name, sizeof name, "%s", j->cp.clip);
    char *logs = o->logs ? absolute(o->logs) : NULL;
    fprintf(f, "#!/bin/bash\n");
    fprintf(f, "# ckey farm slurm: frames %lld-%lld of %s as %ld task%s of %ld frame%s (a job array), "
               "then ckey encode once all of them succeed.\n",
            (long long)j->first, (long long)j->last, j->cp.plate_dir, j->ntasks,
            j->ntasks == 1 ? "" : "s", o->chunk, o->chunk == 1 ? "" : "s");
    fprintf(f, "# Resubmitting (the same command, or --chunks LIST for some tasks) resumes: "
               "finished frames are skipped.\n");
    fprintf(f, "set -euo pipefail\n");
    if (logs) {
        fputs("mkdir -p ", f);
        sh_quote(f, logs);
        fputc('\n', f);
    }
    /* the array */
    fputs("key_job=$(sbatch --parsable --job-name=", f);
    char jn[400];
    snprintf(jn, sizeof jn, "ckey-key-%s", name);
    sh_quote(f, jn);
    if (o->chunks) fprintf(f, " --array=%s", o->chunks);
    else fprintf(f, " --array=0-%ld", j->ntasks - 1);
    if (o->max_running) fprintf(f, "%%%ld", o->max_running);
    fputs(" --ntasks=1 --requeue", f);
    if (gpus > 0) fprintf(f, " --gres=gpu:%ld", gpus);
    print_common_sbatch(f, o);
    print_output(f, logs, "key-%A_%a.log");
    fputs(" <<'CKEY_KEY_TASK'\n", f);
    fprintf(f, "#!/bin/bash\n");
    fprintf(f, "# one task: frames %lld + %ld * SLURM_ARRAY_TASK_ID, %ld of them (to %lld at most)\n",
            (long long)j->first, o->chunk, o->chunk, (long long)j->last);
    fprintf(f, "set -eu\n");
    fprintf(f, "first=$(( %lld + %ld * SLURM_ARRAY_TASK_ID ))\n", (long long)j->first, o->chunk);
    fprintf(f, "last=$(( first + %ld ))\n", o->chunk - 1);
    fprintf(f, "if [ \"$last\" -gt %lld ]; then last=%lld; fi\n", (long long)j->last,
            (long long)j->last);
    fputs("exec ", f);
    sh_quote(f, j->ckey_path);
    fputs(" key", f);
    print_clip_args(f, j, 1);
    fputs(" --frames \"$first-$last\" --empty-ok", f);
    if (o->have_despill) fprintf(f, " --despill %g", (double)o->post.despill_strength);
    if (!j->key_has_device) {
        if (gpus == 0) fputs(" --device cpu", f);
        else if (gpus > 1) fputs(" --device cuda:all", f);
    }
    for (int i = 0; i < j->nkey_args; i++) {
        fputc(' ', f);
        sh_quote(f, j->key_args[i]);
    }
    fputs("\nCKEY_KEY_TASK\n)\n", f);
    fputs("key_job=${key_job%%;*}\n", f);
    /* the encode, after every task of the array succeeded */
    fputs("encode_job=$(sbatch --parsable --job-name=", f);
    snprintf(jn, sizeof jn, "ckey-encode-%s", name);
    sh_quote(f, jn);
    fputs(" --dependency=afterok:$key_job --ntasks=1", f);
    print_common_sbatch(f, o);
    print_output(f, logs, "encode-%j.log");
    fputs(" <<'CKEY_ENCODE'\n", f);
    fputs("#!/bin/bash\n", f);
    fputs("exec ", f);
    sh_quote(f, j->ckey_path);
    fputs(" encode", f);
    print_clip_args(f, j, 0);
    static const char *const video[4] = {"none", "prores", "h264", "both"};
    fprintf(f, " --video-out %s", video[o->video_out & 3]);
    if (o->video_out && o->fps_num) fprintf(f, " --fps %d/%d", (int)o->fps_num, (int)o->fps_den);
    if (o->have_despill) fprintf(f, " --despill %g", (double)o->post.despill_strength);
    fputs("\nCKEY_ENCODE\n)\n", f);
    fputs("encode_job=${encode_job%%;*}\n", f);
    fprintf(f, "echo \"key job $key_job: %s; encode job $encode_job: after all of them succeed\"\n",
            o->chunks ? "the tasks of --chunks" : "one task per chunk");
    free(logs);
}

/* --submit: the script through bash. */
static int submit(const farm_job *j) {
    char path[] = "/tmp/ckey-farm-XXXXXX";
    const int fd = mkstemp(path);
    if (fd < 0) return fail(j->o.json, CKEY_ERR_IO, "cannot create a temporary file: %s", strerror(errno));
    FILE *f = fdopen(fd, "w");
    if (!f) {
        close(fd);
        unlink(path);
        return fail(j->o.json, CKEY_ERR_IO, "cannot write a temporary file: %s", strerror(errno));
    }
    print_script(f, j);
    if (fclose(f) != 0) {
        unlink(path);
        return fail(j->o.json, CKEY_ERR_IO, "%s: write failed", path);
    }
    fflush(stdout);
    const pid_t pid = fork();
    if (pid == 0) {
        execlp("bash", "bash", path, (char *)NULL);
        fprintf(stderr, "ckey: error: cannot run bash: %s\n", strerror(errno));
        _exit(127);
    }
    int status = 0;
    while (pid > 0 && waitpid(pid, &status, 0) < 0 && errno == EINTR) {}
    unlink(path);
    if (pid < 0 || !WIFEXITED(status) || WEXITSTATUS(status) != 0)
        return fail(j->o.json, CKEY_ERR_IO, "submitting to Slurm failed (sbatch's message above); "
                                            "'ckey farm slurm' without --submit prints what it runs");
    return EXIT_OK;
}

static int farm_slurm(farm_job *j) {
    opts *o = &j->o;
    if (!o->chunk) return usage_error(o->cmd, "missing --chunk N (frames per task)");
    char why[4400];
    int rc = clip_paths_resolve(o, 1, &j->cp, why, sizeof why);
    if (rc == EXIT_RUNTIME) return fail(0, CKEY_ERR_INVALID_ARG, "%s", why);
    if (rc == CONTINUE) rc = check_key_args(j);
    if (rc == CONTINUE) rc = find_ckey(j);
    if (rc != CONTINUE) return rc;
    /* the frame numbers, from the plate (hints are each task's business) */
    if (ckey_source_open_video(j->cp.plate_dir, NULL, 0, NULL, NULL, &j->src, &j->err) != CKEY_OK)
        return fail_err(0, &j->err);
    j->first = j->src.frames[0].number;
    j->last = j->src.frames[j->src.count - 1].number;
    j->ntasks = (long)((j->last - j->first) / o->chunk + 1);
    if (o->chunks) {
        /* every index of the list names a task */
        for (const char *p = o->chunks; *p;) {
            char *end;
            const long v = strtol(p, &end, 10);
            if (v >= j->ntasks)
                return usage_error(o->cmd, "--chunks %s: task %ld, but the clip has %ld task%s "
                                           "(0 to %ld)",
                                   o->chunks, v, j->ntasks, j->ntasks == 1 ? "" : "s", j->ntasks - 1);
            p = *end ? end + 1 : end;
        }
    }
    if (!o->submit) {
        print_script(stdout, j);
        return EXIT_OK;
    }
    return submit(j);
}

int cmd_farm(int argc, char **argv) {
    farm_job j;
    memset(&j, 0, sizeof j);
    opts_init(&j.o, "farm");
    ckey_shot_options shot_defaults;
    ckey_shot_options_default(&shot_defaults);
    j.o.post = shot_defaults.post;
    j.o.video_out = VIDEO_OUT_PRORES | VIDEO_OUT_H264;
    /* "--" ends farm's options; the rest goes to every task's ckey key */
    int nfarm = argc;
    for (int i = 1; i < argc; i++)
        if (!strcmp(argv[i], "--")) {
            nfarm = i;
            j.key_args = argv + i + 1;
            j.nkey_args = argc - i - 1;
            break;
        }
    int rc = parse_opts(nfarm, argv,
                        O_OUT | O_PLATE | O_HINT | O_VIDEO_OUT | O_FPS | O_DESPILL | O_CHUNK |
                            O_CHUNKS | O_GPUS | O_PARTITION | O_SBATCH | O_CKEY | O_SUBMIT |
                            O_LOGS | O_MAX_RUNNING | O_CPUS,
                        2, help_farm, &j.o);
    if (rc != CONTINUE) return rc;
    if (j.o.npositional == 0 || strcmp(j.o.positional[0], "slurm"))
        return usage_error(j.o.cmd, "expected a scheduler: ckey farm slurm ... (OpenJD, OpenCue "
                                    "and Deadline Cloud: docs/farm.md)");
    /* past the scheduler's name, the clip as ckey key takes it */
    j.o.positional[0] = j.o.positional[1];
    j.o.npositional--;
    if (j.o.fps_num && !j.o.video_out)
        return usage_error(j.o.cmd, "--fps sets the frame rate of the videos: it cannot be combined "
                                    "with --video-out none");
    rc = farm_slurm(&j);
    ckey_source_close(&j.src);
    clip_paths_free(&j.cp);
    return rc;
}
