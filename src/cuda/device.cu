// Device enumeration and memory helpers for the CUDA backend.
#include <cuda_runtime.h>
#include <stdio.h>
#include <string.h>

#include "cuda/ck_cuda.h"

extern "C" {

static ckey_status cuda_fail(ckey_error *err, cudaError_t e, const char *what) {
    if (err) {
        snprintf(err->message, sizeof err->message, "CUDA: %s: %s", what, cudaGetErrorString(e));
        err->status = CKEY_ERR_DEVICE;
    }
    return CKEY_ERR_DEVICE;
}

int ck_cuda_device_count(void) {
    int n = 0;
    if (cudaGetDeviceCount(&n) != cudaSuccess) {
        cudaGetLastError(); /* clear the sticky "no driver" error */
        return 0;
    }
    return n;
}

ckey_status ck_cuda_device_info(int index, ckey_device_info *info, ckey_error *err) {
    int n = ck_cuda_device_count();
    if (index < 0 || index >= n) {
        if (err) {
            snprintf(err->message, sizeof err->message, "cuda:%d: no such device (%d CUDA device%s)", index, n,
                     n == 1 ? "" : "s");
            err->status = CKEY_ERR_DEVICE;
        }
        return CKEY_ERR_DEVICE;
    }
    cudaDeviceProp p;
    cudaError_t e = cudaGetDeviceProperties(&p, index);
    if (e != cudaSuccess) return cuda_fail(err, e, "cudaGetDeviceProperties");
    memset(info, 0, sizeof *info);
    info->kind = CKEY_DEVICE_CUDA;
    info->index = index;
    snprintf(info->name, sizeof info->name, "%.127s", p.name);
    info->compute_major = p.major;
    info->compute_minor = p.minor;
    info->units = p.multiProcessorCount;
    info->memory_total = (int64_t)p.totalGlobalMem;
    int prev = 0;
    cudaGetDevice(&prev);
    if (cudaSetDevice(index) == cudaSuccess) {
        size_t fr = 0, tot = 0;
        if (cudaMemGetInfo(&fr, &tot) == cudaSuccess) info->memory_free = (int64_t)fr;
        cudaSetDevice(prev);
    }
    return CKEY_OK;
}

ckey_status ck_cuda_set_device(int index, ckey_error *err) {
    cudaError_t e = cudaSetDevice(index);
    if (e != cudaSuccess) return cuda_fail(err, e, "cudaSetDevice");
    return CKEY_OK;
}

ckey_status ck_cuda_malloc(void **p, size_t bytes, ckey_error *err) {
    cudaError_t e = cudaMalloc(p, bytes);
    if (e != cudaSuccess) return cuda_fail(err, e, "cudaMalloc");
    return CKEY_OK;
}

void ck_cuda_free(void *p) {
    if (p) cudaFree(p);
}

ckey_status ck_cuda_copy(void *dst, const void *src, size_t bytes, int to_device, ckey_error *err) {
    cudaError_t e = cudaMemcpy(dst, src, bytes, to_device ? cudaMemcpyHostToDevice : cudaMemcpyDeviceToHost);
    if (e != cudaSuccess) return cuda_fail(err, e, "cudaMemcpy");
    return CKEY_OK;
}

ckey_status ck_cuda_memset(void *p, int value, size_t bytes, ckey_error *err) {
    cudaError_t e = cudaMemset(p, value, bytes);
    if (e != cudaSuccess) return cuda_fail(err, e, "cudaMemset");
    return CKEY_OK;
}

ckey_status ck_cuda_copy_d2d(void *dst, const void *src, size_t bytes, void *stream, ckey_error *err) {
    cudaError_t e = cudaMemcpyAsync(dst, src, bytes, cudaMemcpyDeviceToDevice, (cudaStream_t)stream);
    if (e != cudaSuccess) return cuda_fail(err, e, "cudaMemcpyAsync");
    return CKEY_OK;
}

ckey_status ck_cuda_sync(ckey_error *err) {
    cudaError_t e = cudaDeviceSynchronize();
    if (e != cudaSuccess) return cuda_fail(err, e, "cudaDeviceSynchronize");
    return CKEY_OK;
}

}  // extern "C"
