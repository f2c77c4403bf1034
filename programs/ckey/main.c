/*
 * ckey -- command-line front end of libckey. Uses only the public header.
 *
 *   ckey run --model M --image plate.png --hint hint.png --out DIR [...]
 *   ckey key SHOT_DIR --model M [...]   (or --plate DIR --hint DIR --out DIR)
 *   ckey info --model M [--size S] [--json]
 *   ckey encode SHOT_DIR [--video-out both]   (after a clip keyed in chunks)
 *   ckey farm slurm SHOT_DIR --chunk N [-- key options]
 *   ckey install-model FILE
 *   ckey convert IN OUT.safetensors
 *   ckey devices [--json]
 *   ckey version [--json]
 *
 * Exit codes: 0 success, 1 runtime failure ("ckey: error: ..."), 2 usage;
 * key also 3 (frames skipped as bad) and 128 + N when signal N (SIGINT 130,
 * SIGTERM 143) interrupted it. docs/cli.md is the reference.
 */
#include <stdio.h>
#include <string.h>

#include "ckey.h"
#include "commands.h"
#include "help.h"
#include "opts.h"

static const struct {
    const char *name;
    int (*run)(int argc, char **argv);
} commands[] = {
    {"run", cmd_run},         {"key", cmd_key},         {"info", cmd_info},
    {"convert", cmd_convert}, {"devices", cmd_devices}, {"version", cmd_version},
    {"install-model", cmd_install_model}, {"encode", cmd_encode}, {"farm", cmd_farm},
    {"track", cmd_track},
    {"--version", cmd_version},
};

int main(int argc, char **argv) {
    ckey_process_init();
    if (argc < 2) {
        fputs(help_main, stderr);
        return EXIT_USAGE;
    }
    const char *cmd = argv[1];
    if (!strcmp(cmd, "-h") || !strcmp(cmd, "--help") || !strcmp(cmd, "help")) {
        fputs(help_main, stdout);
        return EXIT_OK;
    }
    for (size_t k = 0; k < sizeof commands / sizeof commands[0]; k++)
        if (!strcmp(cmd, commands[k].name)) return commands[k].run(argc - 1, argv + 1);
    return usage_error(NULL, "unknown command '%s' (run, key, track, encode, farm, info, "
                                   "install-model, convert, devices, version)", cmd);
}
