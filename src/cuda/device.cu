// Device enumeration and memory helpers for the CUDA backend.
#include <cuda_profiler_api.h>
#include <cuda_runtime.h>
#include <stdlib.h>
#include <stdio.h>
#include <string.h>

#include "cuda/kernels.h"

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

int64_t ck_cuda_used_bytes(void) {
    size_t fr = 0, tot = 0;
    if (cudaMemGetInfo(&fr, &tot) != cudaSuccess) {
        cudaGetLastError();
        return -1;
    }
    return (int64_t)(tot - fr);
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

ckey_status ck_cuda_copy2d_d2d(void *dst, size_t dpitch, const void *src, size_t spitch, size_t width, size_t height,
                               void *stream, ckey_error *err) {
    if (!width || !height) return CKEY_OK;
    cudaError_t e = cudaMemcpy2DAsync(dst, dpitch, src, spitch, width, height, cudaMemcpyDeviceToDevice,
                                      (cudaStream_t)stream);
    if (e != cudaSuccess) return cuda_fail(err, e, "cudaMemcpy2DAsync");
    return CKEY_OK;
}

ckey_status ck_cuda_memset_async(void *p, int value, size_t bytes, void *stream, ckey_error *err) {
    cudaError_t e = cudaMemsetAsync(p, value, bytes, (cudaStream_t)stream);
    if (e != cudaSuccess) return cuda_fail(err, e, "cudaMemsetAsync");
    return CKEY_OK;
}

ckey_status ck_cuda_copy_async(void *dst, const void *src, size_t bytes, int to_device, void *stream,
                               ckey_error *err) {
    cudaError_t e = cudaMemcpyAsync(dst, src, bytes, to_device ? cudaMemcpyHostToDevice : cudaMemcpyDeviceToHost,
                                    (cudaStream_t)stream);
    if (e != cudaSuccess) return cuda_fail(err, e, "cudaMemcpyAsync");
    return CKEY_OK;
}

ckey_status ck_cuda_host_alloc(void **p, size_t bytes, ckey_error *err) {
    cudaError_t e = cudaMallocHost(p, bytes);
    if (e != cudaSuccess) {
        *p = NULL;
        return cuda_fail(err, e, "cudaMallocHost");
    }
    return CKEY_OK;
}

void ck_cuda_host_free(void *p) {
    if (p) cudaFreeHost(p);
}

ckey_status ck_cuda_stream_create(void **stream, ckey_error *err) {
    cudaStream_t s = NULL;
    cudaError_t e = cudaStreamCreate(&s); /* blocking: the legacy stream still orders against it */
    if (e != cudaSuccess) return cuda_fail(err, e, "cudaStreamCreate");
    *stream = s;
    return CKEY_OK;
}

ckey_status ck_cuda_stream_create_high(void **stream, ckey_error *err) {
    int least = 0, greatest = 0;
    cudaError_t e = cudaDeviceGetStreamPriorityRange(&least, &greatest);
    if (e != cudaSuccess) return cuda_fail(err, e, "cudaDeviceGetStreamPriorityRange");
    cudaStream_t s = NULL;
    e = cudaStreamCreateWithPriority(&s, cudaStreamDefault, greatest); /* blocking, as ck_cuda_stream_create */
    if (e != cudaSuccess) return cuda_fail(err, e, "cudaStreamCreateWithPriority");
    *stream = s;
    return CKEY_OK;
}

void ck_cuda_stream_destroy(void *stream) {
    if (stream) cudaStreamDestroy((cudaStream_t)stream);
}

ckey_status ck_cuda_stream_sync(void *stream, ckey_error *err) {
    cudaError_t e = cudaStreamSynchronize((cudaStream_t)stream);
    if (e != cudaSuccess) return cuda_fail(err, e, "cudaStreamSynchronize");
    return CKEY_OK;
}

ckey_status ck_cuda_capture_begin(void *stream, ckey_error *err) {
    cudaError_t e = cudaStreamBeginCapture((cudaStream_t)stream, cudaStreamCaptureModeThreadLocal);
    if (e != cudaSuccess) return cuda_fail(err, e, "cudaStreamBeginCapture");
    return CKEY_OK;
}

ckey_status ck_cuda_capture_end(void *stream, void **exec, size_t *nodes, ckey_error *err) {
    cudaGraph_t g = NULL;
    *exec = NULL;
    if (nodes) *nodes = 0;
    cudaError_t e = cudaStreamEndCapture((cudaStream_t)stream, &g);
    if (e != cudaSuccess) {
        cudaGetLastError(); /* clear the sticky-free capture error */
        return cuda_fail(err, e, "cudaStreamEndCapture");
    }
    if (nodes && cudaGraphGetNodes(g, NULL, nodes) != cudaSuccess) *nodes = 0;
    cudaGraphExec_t x = NULL;
    e = cudaGraphInstantiate(&x, g, 0);
    cudaGraphDestroy(g);
    if (e != cudaSuccess) return cuda_fail(err, e, "cudaGraphInstantiate");
    *exec = x;
    return CKEY_OK;
}

ckey_status ck_cuda_graph_launch(void *exec, void *stream, ckey_error *err) {
    cudaError_t e = cudaGraphLaunch((cudaGraphExec_t)exec, (cudaStream_t)stream);
    if (e != cudaSuccess) return cuda_fail(err, e, "cudaGraphLaunch");
    return CKEY_OK;
}

ckey_status ck_cuda_event_create(void **ev, ckey_error *err) {
    cudaEvent_t e = NULL;
    cudaError_t r = cudaEventCreate(&e);
    if (r != cudaSuccess) return cuda_fail(err, r, "cudaEventCreate");
    *ev = e;
    return CKEY_OK;
}

ckey_status ck_cuda_event_create_blocking(void **ev, ckey_error *err) {
    cudaEvent_t e = NULL;
    cudaError_t r = cudaEventCreateWithFlags(&e, cudaEventBlockingSync | cudaEventDisableTiming);
    if (r != cudaSuccess) return cuda_fail(err, r, "cudaEventCreateWithFlags");
    *ev = e;
    return CKEY_OK;
}

ckey_status ck_cuda_wait(void *ev, void *stream, ckey_error *err) {
    cudaError_t r = cudaEventRecord((cudaEvent_t)ev, (cudaStream_t)stream);
    if (r != cudaSuccess) return cuda_fail(err, r, "cudaEventRecord");
    r = cudaEventSynchronize((cudaEvent_t)ev);
    if (r != cudaSuccess) return cuda_fail(err, r, "cudaEventSynchronize");
    return CKEY_OK;
}

void ck_cuda_event_destroy(void *ev) {
    if (ev) cudaEventDestroy((cudaEvent_t)ev);
}

ckey_status ck_cuda_event_record(void *ev, void *stream, ckey_error *err) {
    cudaError_t r = cudaEventRecord((cudaEvent_t)ev, (cudaStream_t)stream);
    if (r != cudaSuccess) return cuda_fail(err, r, "cudaEventRecord");
    return CKEY_OK;
}

double ck_cuda_event_seconds(void *ev0, void *ev1) {
    float ms = 0.f;
    if (cudaEventElapsedTime(&ms, (cudaEvent_t)ev0, (cudaEvent_t)ev1) != cudaSuccess) {
        cudaGetLastError();
        return 0.0;
    }
    return ms / 1000.0;
}

void ck_cuda_graph_free(void *exec) {
    if (exec) cudaGraphExecDestroy((cudaGraphExec_t)exec);
}

ckey_status ck_cuda_sync(ckey_error *err) {
    cudaError_t e = cudaDeviceSynchronize();
    if (e != cudaSuccess) return cuda_fail(err, e, "cudaDeviceSynchronize");
    return CKEY_OK;
}

void ck_cuda_profile(int on) {
    if (on) (void)cudaProfilerStart();
    else (void)cudaProfilerStop();
}

}  // extern "C"

/* launch.cuh's PDL switch: on, unless the build turns programmatic dependent
 * launch off (make CUDA_OPTS=-DCK_CUDA_NO_PDL) to compare plain stream order. */
extern "C" int ck_cuda_pdl_on(void) {
#ifdef CK_CUDA_NO_PDL
    return 0;
#else
    return 1;
#endif
}
