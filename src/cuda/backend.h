/* The CUDA op table and its state (see backend.c). */
#ifndef CK_CUDA_BACKEND_H
#define CK_CUDA_BACKEND_H

#include "cuda/ck_cuda.h"
#include "model/ops.h"

typedef struct ck_cuda_state {
    void *stream;       /* cudaStream_t; NULL = the default stream */
    ck_cublas *blas;
    float *scratch;     /* device, ck_cuda_scratch_floats() elements of dt, inside the arena */
    ck_dtype dt;        /* storage type of activations and matrix weights */
    int wgmma;          /* global attention on the sm_90a wgmma kernel (16-bit dt, a 9.0
                         * device, CKEY_CUDA_NO_WGMMA unset; decided at session init) */
    ckey_status status; /* first failure of the pass (ops return nothing) */
    ckey_error err;
} ck_cuda_state;

/* Device scratch the CUDA ops need for this config and S. */
size_t ck_cuda_scratch_floats(const ck_config *c, int S);

#ifdef CK_HAVE_CUDA
extern const ck_ops ck_cuda_ops;
#endif

#endif
