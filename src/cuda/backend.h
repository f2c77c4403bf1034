/* The CUDA op table and its state (see backend.c). */
#ifndef CK_CUDA_BACKEND_H
#define CK_CUDA_BACKEND_H

#include "cuda/kernels.h"
#include "backend/ops.h"

typedef struct ck_cuda_state {
    void *stream;       /* cudaStream_t; NULL = the default stream */
    ck_cublas *blas;
    float *scratch;     /* device: the current phase's scratch inside the arena (set_scratch); NULL between phases */
    size_t scratch_bytes;
    ck_dtype dt;        /* storage type of activations and matrix weights */
    int wgmma;          /* global attention and the refiner's 64 -> 64 convs on the sm_90a
                         * wgmma kernels (16-bit dt, a 9.0 device, CKEY_DEBUG_CUDA_NO_WGMMA not
                         * set; decided at session init) */
    int fused_fc1;      /* the MLP's fc1 + bias + GELU as one wgmma kernel (linear-gelu-wgmma.cu) where it
                         * supports the shape (wgmma sessions; CKEY_DEBUG_CUDA_NO_FUSED_FC1 off) */
    int fc1_form;       /* its form (ck_cuda_linear_wgmma's mode bits): 0 = the kernel's pick for the
                         * shape; 128-wide tiles without clusters with CKEY_DEBUG_CUDA_FC1_PLAIN (A/B runs) */
    int *conv_sync;     /* device ints for the in-place conv2's one-launch form (item counter and
                         * done flags; NULL: one launch a band) */
    int64_t conv_sync_n;
    ckey_status status; /* first failure of the pass (ops return nothing) */
    ckey_error err;
} ck_cuda_state;

/* Device scratch the CUDA ops need in each phase of the pass (ck_fwd.scratch_bytes),
 * in elements of the storage type, for this config and S:
 *   encoder   the encoder's and decoders' ops (mask-unit attention, linear_maxpool,
 *             mlp and patch-embed chunks, decoder_fuse chunks);
 *   stem      the refiner stem (the tensor-core stem's padded input; 0 otherwise).
 * The residual blocks need none: conv2 writes into t's margin. */
size_t ck_cuda_encoder_scratch_elems(const ck_config *c, int S);
size_t ck_cuda_stem_scratch_elems(const ck_config *c, int S, ck_dtype dt);
/* Image rows before its input at which a residual block's conv2 writes at
 * size S (ck_fwd.conv_shift_rows): its band of rows + the largest dilation. */
int ck_cuda_conv_shift_rows(int S);
/* Whether conv3x3 applies a pending GroupNorm + ReLU as it loads, leaving
 * its input as it was, for a refiner of width R in storage dt
 * (ck_fwd.conv_load_affine). */
int ck_cuda_conv_loads_affine(int R, ck_dtype dt);

#ifdef CK_HAVE_CUDA
extern const ck_ops ck_cuda_ops;
#endif

#endif
