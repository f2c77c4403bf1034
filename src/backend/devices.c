/* Device enumeration for `ckey devices` and for --device validation. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "core/core.h"
#include "cuda/kernels.h"

void ckey_process_init(void) { setenv("CUBLAS_WORKSPACE_CONFIG", ":16:8", 0); }

int32_t ckey_device_count(ckey_device_kind kind) {
    if (kind == CKEY_DEVICE_CPU) return 1;
    if (kind == CKEY_DEVICE_CUDA) return ck_cuda_device_count();
    return 0;
}

static void cpu_name(char *buf, size_t n) {
    snprintf(buf, n, "CPU");
    FILE *f = fopen("/proc/cpuinfo", "r");
    if (!f) return;
    char line[512];
    while (fgets(line, sizeof line, f)) {
        if (strncmp(line, "model name", 10) == 0) {
            const char *c = strchr(line, ':');
            if (c) {
                c++;
                while (*c == ' ' || *c == '\t') c++;
                snprintf(buf, n, "%s", c);
                size_t l = strlen(buf);
                while (l && (buf[l - 1] == '\n' || buf[l - 1] == ' ')) buf[--l] = 0;
            }
            break;
        }
    }
    fclose(f);
}

int64_t ckey_host_memory_available(void) {
    FILE *f = fopen("/proc/meminfo", "re");
    if (f) {
        char line[256];
        long long kib = -1;
        while (fgets(line, sizeof line, f))
            if (sscanf(line, "MemAvailable: %lld kB", &kib) == 1) break;
        fclose(f);
        if (kib >= 0) return (int64_t)kib * 1024;
    }
    const long pages = sysconf(_SC_AVPHYS_PAGES), psz = sysconf(_SC_PAGESIZE);
    return pages > 0 && psz > 0 ? (int64_t)pages * psz : 0;
}

ckey_status ckey_device_get_info(ckey_device_kind kind, int32_t index, ckey_device_info *info,
                                 ckey_error *err) {
    if (!info) return ck_fail(err, CKEY_ERR_INVALID_ARG, "ckey_device_get_info: info is NULL");
    memset(info, 0, sizeof *info);
    if (kind == CKEY_DEVICE_CPU) {
        if (index != 0) return ck_fail(err, CKEY_ERR_DEVICE, "cpu:%d: there is one CPU device, cpu:0", index);
        info->kind = CKEY_DEVICE_CPU;
        cpu_name(info->name, sizeof info->name);
        long cores = sysconf(_SC_NPROCESSORS_ONLN), pages = sysconf(_SC_PHYS_PAGES),
             psz = sysconf(_SC_PAGESIZE);
        info->units = cores > 0 ? (int32_t)cores : 1;
        if (pages > 0 && psz > 0) info->memory_total = (int64_t)pages * psz;
        info->memory_free = ckey_host_memory_available();
        return CKEY_OK;
    }
    if (kind == CKEY_DEVICE_CUDA) return ck_cuda_device_info(index, info, err);
    return ck_fail(err, CKEY_ERR_INVALID_ARG, "unknown device kind %d", (int)kind);
}
