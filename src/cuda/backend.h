/* The CUDA backend: its interface (backend.c: device memory, weight upload,
 * graphs), its op table (ops.c) and their shared state. */
#ifndef CK_CUDA_BACKEND_H
#define CK_CUDA_BACKEND_H

#include "cuda/kernels.h"
#include "backend/backend.h"

typedef struct ck_cuda_state {
    ck_backend base;
    /* ---- what the ops read */
    void *stream;       /* cudaStream_t */
    ck_cublas *blas;
    void *scratch;      /* device: the current phase's scratch inside the arena (set_scratch); NULL between phases */
    size_t scratch_bytes;
    ck_dtype dt;        /* storage type of activations and matrix weights */
    int wgmma;          /* global attention and the refiner's 64 -> 64 convs on the sm_90a
                         * wgmma kernels (16-bit dt, a 9.0 device, CKEY_DEBUG_CUDA_NO_WGMMA not set) */
    int fused_fc1;      /* the MLP's fc1 + bias + GELU as one wgmma kernel (linear-gelu-wgmma.cu) where it
                         * supports the shape (wgmma sessions; CKEY_DEBUG_CUDA_NO_FUSED_FC1 off) */
    int fc1_form;       /* its form (ck_cuda_linear_wgmma's mode bits): 0 = the kernel's pick for the
                         * shape; 128-wide tiles without clusters with CKEY_DEBUG_CUDA_FC1_PLAIN */
    int *conv_sync;     /* device ints for the in-place conv2's one-launch form (item counter and
                         * done flags; NULL: one launch a band) */
    int64_t conv_sync_n;
    void *mr_scratch;   /* device: memory_read's part of Cutie's workspace (set_workspace binds it,
                         * ck_cuda_memory_read_bytes(needs) bytes); NULL: none bound */
    size_t mr_scratch_bytes;
    int ref_dim;        /* the refiner's width (the banded refiner's input layout: ck_cuda_band_input_ch) */
    int64_t stage_floats; /* fp32 input values staged through the encoder's scratch at a time (cu_run) */
    void *host_maps;    /* page-locked host memory for maps kept there (ck_schedule.c1_on_host) */
    size_t host_map_bytes;
    ckey_status status; /* first failure of the pass (ops return nothing) */
    ckey_error err;
    float *tap_dev;     /* taps of 16-bit tensors, widened to fp32 here (device, outside the plan) */
    size_t tap_dev_floats;
    /* ---- the lifecycle's (backend.c) */
    ck_backend_config cfg;
    ck_weights w;       /* the device copy's views */
    float *dstore;      /* fp32 weights (all of them, or only the vectors when dt is 16-bit) */
    void *dmat;         /* 16-bit matrix weights (dt != CK_F32) */
    void *dconv;        /* 16-bit refiner conv weights packed for the tensor-core conv */
    void *dbias;        /* 16-bit copies of the biases fused into cuBLASLt GEMMs */
    float *dfold;       /* the LN fold: per folded block, fc1's colsum [hidden], then its folded bias */
    float *dpos;        /* pos-embed resized to S/4 (its own allocation; NULL when the stored grid fits) */
    int ln_fold;        /* fold norm2 into the fused fc1 where that kernel takes the block's shapes */
    void *arena;
    float *host_in, *host_out; /* pinned */
    void *blas_ws;      /* cuBLAS's workspace (device), so that GEMMs allocate nothing */
    size_t blas_ws_bytes;
    void *graph;        /* the forward as a CUDA graph, captured on the second frame */
    int64_t frames;     /* frames run */
    int no_graph;       /* every frame eager: the config's eager, CKEY_DEBUG_CUDA_NO_GRAPH, or a
                         * capture that failed */
    int capturing;      /* a graph capture is under way (no trace then: cudaMemGetInfo is not capture-safe) */
    float *result;      /* the pass's [4, S, S] output on the device (the same every frame) */
    void *ev[4];        /* around the network on the stream (device_seconds), before the
                           upload and after the download (their times) */
    void *ev_wait;      /* the wait for a pass's end (ck_cuda_wait: no spinning core) */
    /* ---- Cutie's ops (cutie-ops.c): their workspace (ck_ops.set_workspace, device memory) */
    float *cutie_col;   /* the im2col chunk of conv2d, cutie_col_floats */
    size_t cutie_col_floats;
    void *cutie_wh;     /* conv2d's fp16 weight (conv_precision FP16), cutie_wh_halves */
    size_t cutie_wh_halves;
    float *cutie_means; /* channel_attention's means */
    int *cutie_counts;  /* object_attn_mask's per-object foreground counts */
    float *cutie_mha;   /* mha's partial results of split keys */
    double *cutie_ca;   /* channel_attention's partial sums over row ranges */
    ck_cutie_gemm *cutie_gemm; /* conv2d's GEMMs with the bias / ReLU epilogue (made by set_workspace;
                                * NULL: the GEMM + bias pass), on blas_ws */
    int cutie_no_lt;    /* ck_cuda_backend_cutie_lt(be, 0): every conv takes the GEMM + bias pass */
} ck_cuda_state;

/* Device scratch the CUDA ops need in each phase of the pass (ck_pass_params.phase_scratch),
 * in elements of the storage type, for this config and S:
 *   encoder   the encoder's and decoders' ops (mask-unit attention, linear_maxpool,
 *             mlp and patch-embed chunks with their resized pos-embed rows under
 *             sched->pos_streamed, decoder_fuse chunks), sched->encoder_chunks;
 *   stem      the refiner stem (the tensor-core stem's padded input; 0 otherwise).
 * The residual blocks need none: conv2 writes into t's margin. */
size_t ck_cuda_encoder_scratch_elems(const ck_config *c, int S, const ck_schedule *sched, ck_dtype dt);
size_t ck_cuda_stem_scratch_elems(const ck_config *c, int S, ck_dtype dt);
/* Image rows before its input at which a residual block's conv2 writes at
 * size S (ck_pass_params.conv_shift_rows): its band of rows + the largest dilation. */
int ck_cuda_conv_shift_rows(int S);
/* Whether conv3x3 applies a pending GroupNorm + ReLU as it loads, leaving
 * its input as it was, for a refiner of width R in storage dt
 * (ck_pass_params.conv_load_affine). */
int ck_cuda_conv_loads_affine(int R, ck_dtype dt);
/* Values a pixel of a refiner-input band takes (ck_pass_params.band_input_ch):
 * 8 where the tensor-core stem reads it packed [n * S, 8], else 7. */
int ck_cuda_band_input_ch(int R, ck_dtype dt);

/* Report a step to the config's trace (ck_backend_config.trace), if any and
 * not inside a graph capture. */
void ck_cuda_trace(const ck_cuda_state *s, const char *step);

/* A CUDA backend's cuBLASLt plans so far (ck_cublas_plan_counts). */
void ck_cuda_backend_blas_plan_counts(const ck_backend *be, int bias_only, int *fused, int *fallback);
/* on = 0: Cutie's convs skip cuBLASLt (each takes the GEMM and the bias /
 * ReLU pass, as a shape without a cuBLASLt algorithm does); for tests. */
void ck_cuda_backend_cutie_lt(ck_backend *be, int on);

/* Cutie's ops on the CUDA backend (cutie-ops.c; backend/ops.h defines them)
 * and the bytes of their workspace (ck_backend_i.ops_workspace_bytes). */
size_t ck_cuda_ops_workspace_bytes(const ck_backend_config *bc, const ck_op_needs *needs);
void ck_cuda_cutie_set_workspace(ck_backend *be, void *scratch, const ck_op_needs *n);
void ck_cuda_cutie_conv2d(ck_backend *be, const ck_conv2d *g, ck_tensor in, ck_weight W, ck_weight b, ck_tensor out);
void ck_cuda_cutie_maxpool3x3s2(ck_backend *be, ck_tensor in, int n, int H, int W, int C, ck_tensor out);
void ck_cuda_cutie_resize_bilinear(ck_backend *be, ck_tensor in, int n, int H, int W, int C, ck_tensor add, int Ho, int Wo, ck_tensor out);
void ck_cuda_cutie_avgpool(ck_backend *be, ck_tensor in, int n, int H, int W, int C, int f, ck_tensor out, int out_ld);
void ck_cuda_cutie_layer_norm(ck_backend *be, ck_tensor x, int64_t N, int C, ck_weight g, ck_weight b, float eps, ck_tensor y);
void ck_cuda_cutie_mha(ck_backend *be, int n, ck_tensor q, int64_t Nq, int q_ld, ck_tensor k, ck_tensor v, int64_t Nk, int kv_ld, int D, int heads, ck_tensor mask, ck_tensor out);
void ck_cuda_cutie_unary(ck_backend *be, int kind, ck_tensor x, int64_t n, ck_tensor y);
void ck_cuda_cutie_add(ck_backend *be, ck_tensor a, int64_t na, ck_tensor b, int64_t nb, ck_tensor y);
void ck_cuda_cutie_copy_channels(ck_backend *be, ck_tensor src, int64_t n, int C, int src_ld, ck_tensor dst, int dst_ld);
void ck_cuda_cutie_pad_normalize(ck_backend *be, ck_tensor src, int Hi, int Wi, int pad_t, int pad_l, int Hp, int Wp,
                                 ck_tensor dst);
void ck_cuda_cutie_masks_with_others(ck_backend *be, ck_tensor m, int O, int64_t HW, ck_tensor dst, int dst_ld);
void ck_cuda_cutie_gru_update(ck_backend *be, ck_tensor h, ck_tensor v, int64_t HW, int D);
void ck_cuda_cutie_channel_attention(ck_backend *be, ck_tensor x, int n, int64_t HW, int C, ck_weight w, int k, ck_tensor r, ck_tensor out);
void ck_cuda_cutie_aggregate(ck_backend *be, ck_tensor logits, int O, int64_t HW, ck_tensor out);
void ck_cuda_cutie_softmax_planes(ck_backend *be, ck_tensor x, int C, int64_t HW);
void ck_cuda_cutie_object_attn_mask(ck_backend *be, ck_tensor logits, int O, int64_t HW, int Q, ck_tensor mask);
void ck_cuda_cutie_summary_pool(ck_backend *be, ck_tensor m, ck_tensor feat, ck_tensor logits, int64_t HW, int E, int Q, ck_tensor out);
void ck_cuda_cutie_summary_values(ck_backend *be, ck_tensor in, int64_t n, int E, ck_tensor out);
void ck_cuda_cutie_pos_encoding(ck_backend *be, int H, int W, int dim, float scale, float temperature, ck_tensor out);
void ck_cuda_cutie_write(ck_backend *be, ck_tensor t, int64_t n, const float *host);
/* ck_cuda_ops.memory_read (memory-read.cu): ck_cuda_memory_read in the
 * state's stream and mr_scratch. */
void ck_cuda_memory_read_op(ck_backend *be, ck_tensor mk, ck_tensor ms, ck_tensor qk, ck_tensor qe, int64_t N,
                            int64_t HW, int CK, ck_tensor mv, int C, int top_k, ck_tensor out, ck_tensor usage);

extern const ck_ops ck_cuda_ops;
extern const ck_backend_i ck_cuda_backend;

#endif
