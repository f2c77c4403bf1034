/* The backends this build has, and the version string that names them. */
#include "cpu/cpu.h"
#ifdef CK_HAVE_CUDA
#include "cuda/backend.h"
#endif

const ck_backend_i *ck_backend_find(ckey_device_kind kind) {
    switch (kind) {
    case CKEY_DEVICE_CPU: return &ck_cpu_backend;
#ifdef CK_HAVE_CUDA
    case CKEY_DEVICE_CUDA: return &ck_cuda_backend;
#endif
    default: return NULL;
    }
}

const char *ckey_version(void) {
#if defined(CK_HAVE_OPENBLAS) && defined(CK_HAVE_CUDA)
    return "0.1.0 (cpu: openblas; cuda: fp32, fp16/bf16 tensor cores)";
#elif defined(CK_HAVE_OPENBLAS)
    return "0.1.0 (cpu: openblas; cuda: no)";
#elif defined(CK_HAVE_CUDA)
    return "0.1.0 (cpu: ckey sgemm avx512/avx2; cuda: fp32, fp16/bf16 tensor cores)";
#else
    return "0.1.0 (cpu: ckey sgemm avx512/avx2; cuda: no)";
#endif
}
