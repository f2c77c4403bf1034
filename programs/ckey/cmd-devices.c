/* ckey devices: the CPU and the CUDA devices this build can use. */
#include <stdio.h>
#include <string.h>

#include "ckey.h"
#include "commands.h"
#include "help.h"
#include "opts.h"
#include "output.h"

int cmd_devices(int argc, char **argv) {
    opts o;
    opts_init(&o, "devices");
    int rc = parse_opts(argc, argv, O_JSON, 0, help_devices, &o);
    if (rc != CONTINUE) return rc;
    const ckey_device_kind kinds[2] = {CKEY_DEVICE_CPU, CKEY_DEVICE_CUDA};
    if (o.json) printf("{\"ok\": true, \"command\": \"devices\", \"devices\": [");
    int first = 1;
    for (int k = 0; k < 2; k++) {
        const int n = ckey_device_count(kinds[k]);
        for (int i = 0; i < n; i++) {
            ckey_device_info d;
            ckey_error err;
            memset(&err, 0, sizeof err);
            if (ckey_device_get_info(kinds[k], i, &d, &err) != CKEY_OK) {
                if (o.json) printf("]}\n");
                return fail_err(o.json, &err);
            }
            const char *kn = kinds[k] == CKEY_DEVICE_CPU ? "cpu" : "cuda";
            if (o.json) {
                printf("%s{\"device\": \"%s:%d\", \"name\": ", first ? "" : ", ", kn, i);
                json_str(stdout, d.name);
                printf(", \"units\": %d, \"memory_total\": %lld, \"memory_free\": %lld", (int)d.units,
                       (long long)d.memory_total, (long long)d.memory_free);
                if (kinds[k] == CKEY_DEVICE_CUDA)
                    printf(", \"compute_capability\": \"%d.%d\"", (int)d.compute_major, (int)d.compute_minor);
                printf("}");
            } else if (kinds[k] == CKEY_DEVICE_CPU) {
                printf("cpu:%d   %s, %d cores, %.1f GiB memory (%.1f GiB free)\n", i, d.name, (int)d.units,
                       d.memory_total / 1073741824.0, d.memory_free / 1073741824.0);
            } else {
                printf("cuda:%d  %s, compute %d.%d, %d multiprocessors, %.1f GiB (%.1f GiB free)\n", i, d.name,
                       (int)d.compute_major, (int)d.compute_minor, (int)d.units, d.memory_total / 1073741824.0,
                       d.memory_free / 1073741824.0);
            }
            first = 0;
        }
    }
    if (o.json) printf("]}\n");
    else if (ckey_device_count(CKEY_DEVICE_CUDA) == 0) printf("(no CUDA device)\n");
    return EXIT_OK;
}
