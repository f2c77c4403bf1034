// LayerNorm and the cuBLAS-backed linear layer, for every storage type
// (dtype.cuh). fp32 sessions keep TF32 off, so results track the CPU backend
// to fp32 rounding; 16-bit sessions run cuBLAS on tensor cores with fp32
// accumulation.
#include <cublasLt.h>
#include <cublas_v2.h>
#include <cuda_runtime.h>
#include <stdio.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "cuda/kernels.h"
#include "cuda/dtype.cuh"
#include "cuda/launch.cuh"
#include "cuda/rowbias.cuh"

extern "C" {

static ckey_status fail_cuda(ckey_error *err, cudaError_t e, const char *what) {
    if (err) {
        snprintf(err->message, sizeof err->message, "CUDA: %s: %s", what, cudaGetErrorString(e));
        err->status = CKEY_ERR_DEVICE;
    }
    return CKEY_ERR_DEVICE;
}

static ckey_status fail_blas(ckey_error *err, cublasStatus_t s, const char *what) {
    if (err) {
        snprintf(err->message, sizeof err->message, "cuBLAS: %s: status %d", what, (int)s);
        err->status = CKEY_ERR_DEVICE;
    }
    return CKEY_ERR_DEVICE;
}

}  // extern "C"

// ---- LayerNorm. Generic kernel: one warp per row, any C and alignment; two
// passes over the row, read again from L1/L2.
// stats != NULL: only the row's mean and rstd, to stats[2 row .. 2 row + 1]
// (the LN fold's row statistics), y, g, b unused.
template <typename T>
__global__ void layernorm_kernel(const T *__restrict__ x, int64_t N, int C, const float *__restrict__ g,
                                 const float *__restrict__ b, T *__restrict__ y, float *__restrict__ stats) {
    ck_pdl_enter();
    const int64_t row = (int64_t)blockIdx.x * (blockDim.x / 32) + threadIdx.x / 32;
    const int lane = threadIdx.x % 32;
    if (row >= N) return;
    const T *xr = x + row * C;
    float s = 0.f;
    for (int i = lane; i < C; i += 32) s += ck_ld(xr + i);
    for (int o = 16; o > 0; o >>= 1) s += __shfl_xor_sync(0xffffffffu, s, o);
    const float mean = s / (float)C;
    float q = 0.f;
    for (int i = lane; i < C; i += 32) {
        const float d = ck_ld(xr + i) - mean;
        q += d * d;
    }
    for (int o = 16; o > 0; o >>= 1) q += __shfl_xor_sync(0xffffffffu, q, o);
    const float rstd = rsqrtf(q / (float)C + 1e-6f);
    if (stats) {
        if (lane == 0) *reinterpret_cast<float2 *>(stats + 2 * row) = make_float2(mean, rstd);
        return;
    }
    T *yr = y + row * C;
    for (int i = lane; i < C; i += 32) ck_st(yr + i, (ck_ld(xr + i) - mean) * rstd * g[i] + b[i]);
}

// Vector kernel: G lanes per row (4..32, a power of two), the row held in
// registers as 16-byte vectors (at most K per lane), read from memory once;
// the mean, then the sum of squared deviations from the registers (the same
// two passes as the generic kernel), then one 16-byte store per vector.
// Needs C a multiple of V = 16 / sizeof(T), x and y 16-byte aligned and
// C / V <= G * K.
// GB4: g and b 16-byte aligned, read as float4 (8 scalar loads of fp32
// weights a 16-bit vector would be most of the kernel's load instructions;
// a frame's 65 launches at S = 2048, fp16, H200: 0.715 ms against 0.835).
// STATS: the row's mean and rstd to stats (as the generic kernel's stats).
template <typename T, int G, int K, bool GB4, bool STATS = false>
__global__ void __launch_bounds__(256) layernorm_vec_kernel(const T *__restrict__ x, int64_t N, int C,
                                                            const float *__restrict__ g,
                                                            const float *__restrict__ b, T *__restrict__ y,
                                                            float *__restrict__ stats = nullptr) {
    ck_pdl_enter();
    constexpr int V = (int)(16 / sizeof(T));
    const int64_t row = (int64_t)blockIdx.x * (blockDim.x / G) + threadIdx.x / G;
    const int lane = threadIdx.x % G;
    const bool live = row < N; /* every lane takes part in the shuffles */
    const int nv = C / V;
    const uint4 *xr = reinterpret_cast<const uint4 *>(x + (live ? row : 0) * C);
    uint4 v[K];
    float s = 0.f;
#pragma unroll
    for (int k = 0; k < K; k++) {
        const int j = k * G + lane;
        v[k] = make_uint4(0, 0, 0, 0);
        if (live && j < nv) {
            v[k] = xr[j];
            const T *e = reinterpret_cast<const T *>(&v[k]);
#pragma unroll
            for (int i = 0; i < V; i++) s += ck_ld(e + i);
        }
    }
#pragma unroll
    for (int o = G / 2; o > 0; o >>= 1) s += __shfl_xor_sync(0xffffffffu, s, o);
    const float mean = s / (float)C;
    float q = 0.f;
#pragma unroll
    for (int k = 0; k < K; k++) {
        const int j = k * G + lane;
        if (live && j < nv) {
            const T *e = reinterpret_cast<const T *>(&v[k]);
#pragma unroll
            for (int i = 0; i < V; i++) {
                const float d = ck_ld(e + i) - mean;
                q += d * d;
            }
        }
    }
#pragma unroll
    for (int o = G / 2; o > 0; o >>= 1) q += __shfl_xor_sync(0xffffffffu, q, o);
    if (!live) return;
    const float rstd = rsqrtf(q / (float)C + 1e-6f);
    if constexpr (STATS) {
        if (lane == 0) *reinterpret_cast<float2 *>(stats + 2 * row) = make_float2(mean, rstd);
        return;
    }
    uint4 *yr = reinterpret_cast<uint4 *>(y + row * C);
#pragma unroll
    for (int k = 0; k < K; k++) {
        const int j = k * G + lane;
        if (j < nv) {
            T *e = reinterpret_cast<T *>(&v[k]);
            const int c0 = j * V;
            float gv[V], bv[V];
            if constexpr (GB4) {
#pragma unroll
                for (int i = 0; i < V; i += 4) {
                    const float4 g4 = *reinterpret_cast<const float4 *>(g + c0 + i),
                                 b4 = *reinterpret_cast<const float4 *>(b + c0 + i);
                    gv[i] = g4.x, gv[i + 1] = g4.y, gv[i + 2] = g4.z, gv[i + 3] = g4.w;
                    bv[i] = b4.x, bv[i + 1] = b4.y, bv[i + 2] = b4.z, bv[i + 3] = b4.w;
                }
            } else {
#pragma unroll
                for (int i = 0; i < V; i++) gv[i] = g[c0 + i], bv[i] = b[c0 + i];
            }
#pragma unroll
            for (int i = 0; i < V; i++) ck_st(e + i, (ck_ld(e + i) - mean) * rstd * gv[i] + bv[i]);
            yr[j] = v[k];
        }
    }
}

template <typename S, typename D>
__global__ void convert_kernel(const S *__restrict__ src, D *__restrict__ dst, int64_t n) {
    ck_pdl_enter();
    const int64_t i = (int64_t)blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) ck_st(dst + i, ck_ld(src + i));
}

extern "C" {

// G lanes per row and K vectors per lane for a row of nv 16-byte vectors:
// the narrowest group that holds the row with 4 vectors a lane, else a warp
// with 8; 0 when the row is too long for the vector kernel.
static int layernorm_group(int nv, int *K) {
    for (int G = 4; G <= 32; G *= 2)
        if (nv <= 4 * G) {
            *K = 4;
            return G;
        }
    *K = 8;
    return nv <= 8 * 32 ? 32 : 0;
}

// The LayerNorm (stats NULL) or only its row statistics (stats [N, 2]).
static cudaError_t layernorm_launch(const void *x, int64_t N, int C, const float *g, const float *b, void *y,
                                    float *stats, ck_dtype dt, cudaStream_t st) {
    const int V = (int)(16 / ck_dtype_size(dt));
    int K = 0, G = 0;
    if (C > 0 && C % V == 0 && ((uintptr_t)x & 15) == 0 && (stats || ((uintptr_t)y & 15) == 0))
        G = layernorm_group(C / V, &K);
    if (G) {
        const unsigned blocks = (unsigned)((N + 256 / G - 1) / (256 / G));
        const bool gb4 = !stats && (((uintptr_t)g | (uintptr_t)b) & 15) == 0;
#define LN_VEC(GG, KK)                                                                                                 \
    do {                                                                                                               \
        if (stats)                                                                                                     \
            CK_DISPATCH(dt, (ck_launch(layernorm_vec_kernel<T, GG, KK, false, true>, blocks, 256, 0, (cudaStream_t)st, \
                                       (const T *)x, N, C, nullptr, nullptr, nullptr, stats)));                        \
        else if (gb4)                                                                                                  \
            CK_DISPATCH(dt, (ck_launch(layernorm_vec_kernel<T, GG, KK, true>, blocks, 256, 0, (cudaStream_t)st,        \
                                       (const T *)x, N, C, g, b, (T *)y, nullptr)));                                   \
        else                                                                                                           \
            CK_DISPATCH(dt, (ck_launch(layernorm_vec_kernel<T, GG, KK, false>, blocks, 256, 0, (cudaStream_t)st,       \
                                       (const T *)x, N, C, g, b, (T *)y, nullptr)));                                   \
    } while (0)
        if (K == 8)
            LN_VEC(32, 8);
        else if (G == 4)
            LN_VEC(4, 4);
        else if (G == 8)
            LN_VEC(8, 4);
        else if (G == 16)
            LN_VEC(16, 4);
        else
            LN_VEC(32, 4);
#undef LN_VEC
    } else {
        const int warps = 8;
        const unsigned blocks = (unsigned)((N + warps - 1) / warps);
        CK_DISPATCH(dt, (ck_launch(layernorm_kernel<T>, blocks, warps * 32, 0, (cudaStream_t)st, (const T *)x, N, C, g,
                                   b, (T *)y, stats)));
    }
    return cudaGetLastError();
}

ckey_status ck_cuda_layernorm_t(const void *x, int64_t N, int C, const float *g, const float *b, void *y,
                                ck_dtype dt, void *stream, ckey_error *err) {
    if (N <= 0) return CKEY_OK;
    const cudaError_t e = layernorm_launch(x, N, C, g, b, y, nullptr, dt, (cudaStream_t)stream);
    return e == cudaSuccess ? CKEY_OK : fail_cuda(err, e, "layernorm launch");
}

ckey_status ck_cuda_layernorm_stats_t(const void *x, int64_t N, int C, float *stats, ck_dtype dt, void *stream,
                                      ckey_error *err) {
    if (N <= 0) return CKEY_OK;
    if ((uintptr_t)stats & 7) {
        if (err) {
            snprintf(err->message, sizeof err->message, "layernorm stats: stats must be 8-byte aligned");
            err->status = CKEY_ERR_INVALID_ARG;
        }
        return CKEY_ERR_INVALID_ARG;
    }
    const cudaError_t e = layernorm_launch(x, N, C, nullptr, nullptr, nullptr, stats, dt, (cudaStream_t)stream);
    return e == cudaSuccess ? CKEY_OK : fail_cuda(err, e, "layernorm stats launch");
}

ckey_status ck_cuda_layernorm(const float *x, int64_t N, int C, const float *g, const float *b, float *y,
                              void *stream, ckey_error *err) {
    return ck_cuda_layernorm_t(x, N, C, g, b, y, CK_F32, stream, err);
}

ckey_status ck_cuda_convert(const void *src, ck_dtype sdt, void *dst, ck_dtype ddt, int64_t n, void *stream,
                            ckey_error *err) {
    if (n <= 0) return CKEY_OK;
    const unsigned blocks = (unsigned)((n + 255) / 256);
    cudaStream_t st = (cudaStream_t)stream;
    if (sdt == CK_F32) {
        CK_DISPATCH(ddt, (ck_launch(convert_kernel<float, T>, blocks, 256, 0, (cudaStream_t)st, (const float *)src,
                                    (T *)dst, n)));
    } else if (ddt == CK_F32) {
        CK_DISPATCH(sdt, (ck_launch(convert_kernel<T, float>, blocks, 256, 0, (cudaStream_t)st, (const T *)src,
                                    (float *)dst, n)));
    } else {
        if (err) {
            snprintf(err->message, sizeof err->message, "convert: 16-bit to 16-bit is not supported");
            err->status = CKEY_ERR_INVALID_ARG;
        }
        return CKEY_ERR_INVALID_ARG;
    }
    cudaError_t e = cudaGetLastError();
    return e == cudaSuccess ? CKEY_OK : fail_cuda(err, e, "convert launch");
}

// ---- cuBLAS / cuBLASLt. 16-bit linear layers run through cuBLASLt with the
// bias fused into the GEMM's epilogue (CUBLASLT_EPILOGUE_BIAS). The bias is
// in the output's type (cublasLt.h: "bias vector elements are the same type
// as the elements of output matrix"; an fp32 bias with a 16-bit D finds no
// algorithm), as PyTorch's fp16 autocast also rounds the bias to 16 bits;
// the epilogue adds it in fp32 with x W^T (+ y), and D is rounded once. A
// plan (descriptors, layouts, algorithm) is kept per distinct shape in a
// fixed table, so that after the first frame a linear layer is one
// cublasLtMatmul. Shapes the heuristic gives no algorithm for, and fp32 (the
// parity path), take cuBLAS's GEMM and a separate bias pass.
//
// Split-K: the partial dot products must be reduced in fp32, never in the
// 16-bit output type, which rounds every partial sum (an extra rounding of
// the size of x W^T, large where y's accumulation cancels it): the cuBLASLt
// heuristic is limited to CUBLASLT_REDUCTION_SCHEME_NONE | _COMPUTE_TYPE, and
// cuBLAS's own GEMMs run with CUBLAS_MATH_DISALLOW_REDUCED_PRECISION_REDUCTION
// (cuBLAS's default allows the output type).
//
// Algorithm choice: cuBLASLt's heuristic ranks candidates for a shape; its
// first is often not the fastest of its own first eight on the H200 (timed
// one by one: stage 2's fc1 36 us against 44, about 0.43 ms a frame at S = 2048).
// Choosing by timing at run time would make a session's results differ in
// the last bits from the next's (the candidates sum in different orders), so
// the choice is a table (lt-tuned.h) of measured picks, an index into the
// heuristic's ranking, for a GPU model and cuBLASLt version; any other GPU,
// version or shape takes the first. The table is measured with
// a CK_CUDA_LT_TUNE build (lt_tune below), which times each candidate of each
// new shape on scratch buffers and prints the table's lines to stderr.
enum { LT_PLANS = 64, LT_CANDIDATES = 8 };

typedef struct {
    int64_t N;
    int in, out, ldy, accumulate, bias;
    ck_dtype dt;
    unsigned align[4]; /* W, x, y, b: alignment in bytes, capped at 16 */
} lt_key;

typedef struct {
    lt_key key;
    int pick; /* index into the heuristic's ranking */
} lt_pick;

typedef struct {
    const char *gpu; /* cudaDeviceProp.name */
    size_t lt_version; /* cublasLtGetVersion() */
    const lt_pick *picks;
    int n;
} lt_tuning;

#include "cuda/lt-tuned.h"

typedef struct {
    lt_key key;
    int ldw; /* W's rows apart where not key.in (a column block of a wider W; never in the tuned table); else 0 */
    int used;
    int ok; /* 0: no algorithm, GEMM + bias pass */
    int pick; /* the algorithm's index in the heuristic's ranking */
    cublasLtMatmulDesc_t op;
    cublasLtMatrixLayout_t a, b, c;
    cublasLtMatmulAlgo_t algo;
} lt_plan;

struct ck_cublas {
    cublasHandle_t h;
    cublasLtHandle_t lt;
    void *ws;
    size_t ws_bytes;
    cudaStream_t stream; /* the stream the handle is on (stream_set) */
    int stream_set;
    int nplans;
    int no_lt;     /* ck_cublas_set_lt(c, 0): every 16-bit linear takes the GEMM + bias pass */
    int last_lt;   /* the last 16-bit linear ran as one cublasLtMatmul */
    int tune;      /* a CK_CUDA_LT_TUNE build: time the candidates, print the table */
    const lt_tuning *tuned; /* this GPU's and cuBLASLt's picks, or NULL */
    int no_tuned;  /* ck_cublas_set_tuned(c, 0): the heuristic's first everywhere */
    int last_pick; /* the last linear's plan's pick */
    lt_plan plans[LT_PLANS];
};

static int lt_key_eq(const lt_key *x, const lt_key *y) {
    return x->N == y->N && x->in == y->in && x->out == y->out && x->ldy == y->ldy && x->accumulate == y->accumulate &&
           x->bias == y->bias && x->dt == y->dt && x->align[0] == y->align[0] && x->align[1] == y->align[1] &&
           x->align[2] == y->align[2] && x->align[3] == y->align[3];
}

static const lt_tuning *lt_tuning_find(const char *gpu) {
    const size_t v = cublasLtGetVersion();
    for (size_t i = 0; i < sizeof lt_tuned / sizeof lt_tuned[0]; i++)
        if (lt_tuned[i].lt_version == v && strcmp(lt_tuned[i].gpu, gpu) == 0) return &lt_tuned[i];
    return NULL;
}

static int lt_pick_of(const ck_cublas *c, const lt_key *k) {
    for (int i = 0; c->tuned && !c->no_tuned && i < c->tuned->n; i++) {
        if (lt_key_eq(&c->tuned->picks[i].key, k)) return c->tuned->picks[i].pick;
    }
    return 0;
}

static void lt_plan_release(lt_plan *p) {
    if (p->op) cublasLtMatmulDescDestroy(p->op);
    if (p->a) cublasLtMatrixLayoutDestroy(p->a);
    if (p->b) cublasLtMatrixLayoutDestroy(p->b);
    if (p->c) cublasLtMatrixLayoutDestroy(p->c);
    memset(p, 0, sizeof *p);
}

static void lt_clear(ck_cublas *c) {
    for (int i = 0; i < c->nplans; i++) lt_plan_release(&c->plans[i]);
    c->nplans = 0;
}

ckey_status ck_cublas_create(ck_cublas **out, ckey_error *err) {
    *out = NULL;
    ck_cublas *c = (ck_cublas *)calloc(1, sizeof *c);
    if (!c) {
        if (err) {
            snprintf(err->message, sizeof err->message, "cuBLAS: out of memory");
            err->status = CKEY_ERR_NOMEM;
        }
        return CKEY_ERR_NOMEM;
    }
    cublasStatus_t s = cublasCreate(&c->h);
    if (s != CUBLAS_STATUS_SUCCESS) {
        free(c);
        return fail_blas(err, s, "cublasCreate");
    }
    s = cublasLtCreate(&c->lt);
    if (s != CUBLAS_STATUS_SUCCESS) {
        cublasDestroy(c->h);
        free(c);
        return fail_blas(err, s, "cublasLtCreate");
    }
    /* fp32 GEMMs stay fp32 (no TF32); 16-bit GEMMs reduce split-K partials in fp32 */
    s = cublasSetMathMode(c->h, (cublasMath_t)(CUBLAS_DEFAULT_MATH | CUBLAS_MATH_DISALLOW_REDUCED_PRECISION_REDUCTION));
    if (s != CUBLAS_STATUS_SUCCESS) {
        cublasLtDestroy(c->lt);
        cublasDestroy(c->h);
        free(c);
        return fail_blas(err, s, "cublasSetMathMode");
    }
#ifdef CK_CUDA_LT_TUNE
    c->tune = 1; /* a build for regenerating lt-tuned.h (make CUDA_OPTS=-DCK_CUDA_LT_TUNE) */
#else
    c->tune = 0;
#endif
    int dev = 0;
    cudaDeviceProp prop;
    if (cudaGetDevice(&dev) == cudaSuccess && cudaGetDeviceProperties(&prop, dev) == cudaSuccess) {
        c->tuned = lt_tuning_find(prop.name);
        if (c->tune)
            fprintf(stderr, "lt tune: gpu \"%s\", cuBLASLt %zu, table %s\n", prop.name, cublasLtGetVersion(),
                    c->tuned ? "found" : "none");
    }
    *out = c;
    return CKEY_OK;
}

// Put the handle on stream st. cublasSetStream also puts the handle back on
// cuBLAS's default workspace pool, device memory cuBLAS allocates itself
// (outside the plan): the handle moves only when the stream changes, and
// gets our workspace back right after.
static cublasStatus_t bind_stream(ck_cublas *c, cudaStream_t st) {
    if (c->stream_set && c->stream == st) return CUBLAS_STATUS_SUCCESS;
    cublasStatus_t s = cublasSetStream(c->h, st);
    if (s == CUBLAS_STATUS_SUCCESS && c->ws) s = cublasSetWorkspace(c->h, c->ws, c->ws_bytes);
    c->stream_set = s == CUBLAS_STATUS_SUCCESS;
    c->stream = st;
    return s;
}

ckey_status ck_cublas_set_workspace(ck_cublas *c, void *ws, size_t bytes, ckey_error *err) {
    cublasStatus_t s = cublasSetWorkspace(c->h, ws, bytes);
    if (s != CUBLAS_STATUS_SUCCESS) return fail_blas(err, s, "cublasSetWorkspace");
    lt_clear(c); /* algorithms were chosen for the old workspace size */
    c->ws = ws;
    c->ws_bytes = ws ? bytes : 0;
    return CKEY_OK;
}

void ck_cublas_free(ck_cublas *c) {
    if (!c) return;
    lt_clear(c);
    cublasLtDestroy(c->lt);
    cublasDestroy(c->h);
    free(c);
}

void ck_cublas_plan_counts(const ck_cublas *c, int bias_only, int *fused, int *fallback) {
    *fused = *fallback = 0;
    for (int i = 0; c && i < c->nplans; i++)
        if (!bias_only || c->plans[i].key.bias) ++*(c->plans[i].ok ? fused : fallback);
}

void ck_cublas_set_lt(ck_cublas *c, int on) {
    if (c) c->no_lt = !on;
}

int ck_cublas_last_fused(const ck_cublas *c) { return c ? c->last_lt : 0; }

int ck_cublas_tuned(const ck_cublas *c) { return c && c->tuned && !c->no_tuned; }

void ck_cublas_set_tuned(ck_cublas *c, int on) {
    if (!c || c->no_tuned == !on) return;
    c->no_tuned = !on;
    lt_clear(c); /* the plans hold their picks */
}

int ck_cublas_last_pick(const ck_cublas *c) { return c ? c->last_pick : 0; }

static unsigned align_of(const void *p) {
    const uintptr_t a = (uintptr_t)p;
    if (!a) return 16;
    unsigned k = 1;
    while (k < 16 && !(a & k)) k <<= 1;
    return k;
}


// A CK_CUDA_LT_TUNE build: time each of the heuristic's candidates for p's key
// (20 runs after 3, on scratch buffers of its shape, the device otherwise
// idle) and print the key as a line of lt-tuned.h with the fastest's index
// (the first's unless another is more than 3% faster).
// A tool for measuring the table, not for sessions that key frames: it
// synchronizes the device and allocates.
static void lt_tune(const ck_cublas *c, const lt_plan *p, const cublasLtMatmulHeuristicResult_t *r, int found,
                    cudaStream_t st) {
    const lt_key *k = &p->key;
    if (p->ldw) return; /* the table's keys have no ldw: such shapes take the heuristic's first */
    cudaStreamCaptureStatus cap = cudaStreamCaptureStatusNone;
    if (cudaStreamIsCapturing(st, &cap) != cudaSuccess || cap != cudaStreamCaptureStatusNone) {
        fprintf(stderr, "lt tune: N=%lld in=%d out=%d first seen in a graph capture, not timed\n", (long long)k->N,
                k->in, k->out);
        return;
    }
    const size_t es = 2, nA = (size_t)k->in * k->out, nB = (size_t)k->in * k->N, nC = (size_t)k->ldy * k->N;
    void *A = NULL, *B = NULL, *C = NULL, *bias = NULL;
    cudaEvent_t e0 = NULL, e1 = NULL;
    if (cudaDeviceSynchronize() != cudaSuccess || cudaMalloc(&A, nA * es) || cudaMalloc(&B, nB * es) ||
        cudaMalloc(&C, nC * es) || cudaMalloc(&bias, (size_t)k->out * es) || cudaEventCreate(&e0) ||
        cudaEventCreate(&e1)) {
        fprintf(stderr, "lt tune: no scratch for N=%lld in=%d out=%d\n", (long long)k->N, k->in, k->out);
    } else {
        cudaMemset(A, 0x11, nA * es), cudaMemset(B, 0x11, nB * es), cudaMemset(C, 0, nC * es);
        cudaMemset(bias, 0, (size_t)k->out * es);
        cublasLtMatmulDesc_t op = p->op;
        if (k->bias) cublasLtMatmulDescSetAttribute(op, CUBLASLT_MATMUL_DESC_BIAS_POINTER, &bias, sizeof bias);
        const float one = 1.f, beta = k->accumulate ? 1.f : 0.f;
        float best = 1e30f, first = 0.f;
        int besti = 0;
        for (int i = 0; i < found; i++) {
            if (r[i].state != CUBLAS_STATUS_SUCCESS) continue;
            int bad = 0;
            for (int it = 0; it < 23 && !bad; it++) {
                if (it == 3) cudaEventRecord(e0, 0);
                bad = cublasLtMatmul(c->lt, op, &one, A, p->a, B, p->b, &beta, C, p->c, C, p->c, &r[i].algo, c->ws,
                                     c->ws_bytes, 0) != CUBLAS_STATUS_SUCCESS;
            }
            cudaEventRecord(e1, 0);
            float ms = 0.f;
            if (bad || cudaEventSynchronize(e1) != cudaSuccess || cudaEventElapsedTime(&ms, e0, e1) != cudaSuccess)
                continue;
            ms /= 20.f;
            if (i == 0) first = ms;
            if (ms < best) best = ms, besti = i;
        }
        if (best > 0.97f * first) besti = 0, best = first; /* within the noise: keep the heuristic's */
        fprintf(stderr,
                "    {{%lld, %d, %d, %d, %d, %d, %s, {%u, %u, %u, %u}}, %d}, /* %.1f -> %.1f us of %d candidates */\n",
                (long long)k->N, k->in, k->out, k->ldy, k->accumulate, k->bias,
                k->dt == CK_F16 ? "CK_F16" : "CK_BF16", k->align[0], k->align[1],
                k->align[2], k->align[3], besti, first * 1e3f, best * 1e3f, found);
    }
    if (e0) cudaEventDestroy(e0);
    if (e1) cudaEventDestroy(e1);
    cudaFree(A), cudaFree(B), cudaFree(C), cudaFree(bias);
}

// Descriptors and the algorithm for key k (the heuristic's first, or the
// tuned pick: see lt-tuned.h) (p->ok = 0 when
// there is none). Column-major view: D [out, N] (ld ldy) = op(A) B (+ C) +
// bias, A = W stored column-major [in, out] (ld in, or ldw) with op T, B = x
// column-major [in, N] (ld in); C = D. The bias pointer's value matters to the
// heuristic only through its alignment, part of the key; each call sets it.
static void lt_plan_build(const ck_cublas *c, const lt_key *k, int ldw, const void *b, lt_plan *p, cudaStream_t st) {
    memset(p, 0, sizeof *p);
    p->key = *k;
    p->ldw = ldw;
    p->used = 1;
    const cudaDataType_t ty = k->dt == CK_F16 ? CUDA_R_16F : CUDA_R_16BF;
    const cublasOperation_t ta = CUBLAS_OP_T, tb = CUBLAS_OP_N;
    cublasLtMatmulPreference_t pref = NULL;
    cublasStatus_t s = cublasLtMatmulDescCreate(&p->op, CUBLAS_COMPUTE_32F, CUDA_R_32F);
    if (s == CUBLAS_STATUS_SUCCESS)
        s = cublasLtMatmulDescSetAttribute(p->op, CUBLASLT_MATMUL_DESC_TRANSA, &ta, sizeof ta);
    if (s == CUBLAS_STATUS_SUCCESS)
        s = cublasLtMatmulDescSetAttribute(p->op, CUBLASLT_MATMUL_DESC_TRANSB, &tb, sizeof tb);
    if (s == CUBLAS_STATUS_SUCCESS && k->bias) {
        const cublasLtEpilogue_t epi = CUBLASLT_EPILOGUE_BIAS;
        const int32_t bty = ty; /* the bias is in D's type (see above) */
        s = cublasLtMatmulDescSetAttribute(p->op, CUBLASLT_MATMUL_DESC_EPILOGUE, &epi, sizeof epi);
        if (s == CUBLAS_STATUS_SUCCESS)
            s = cublasLtMatmulDescSetAttribute(p->op, CUBLASLT_MATMUL_DESC_BIAS_DATA_TYPE, &bty, sizeof bty);
        if (s == CUBLAS_STATUS_SUCCESS)
            s = cublasLtMatmulDescSetAttribute(p->op, CUBLASLT_MATMUL_DESC_BIAS_POINTER, &b, sizeof b);
    }
    if (s == CUBLAS_STATUS_SUCCESS) s = cublasLtMatrixLayoutCreate(&p->a, ty, (uint64_t)k->in, (uint64_t)k->out,
                                                                       ldw ? ldw : k->in);
    if (s == CUBLAS_STATUS_SUCCESS) s = cublasLtMatrixLayoutCreate(&p->b, ty, (uint64_t)k->in, (uint64_t)k->N, k->in);
    if (s == CUBLAS_STATUS_SUCCESS) s = cublasLtMatrixLayoutCreate(&p->c, ty, (uint64_t)k->out, (uint64_t)k->N, k->ldy);
    if (s == CUBLAS_STATUS_SUCCESS) s = cublasLtMatmulPreferenceCreate(&pref);
    if (s == CUBLAS_STATUS_SUCCESS) {
        const uint64_t wsb = c->ws_bytes;
        s = cublasLtMatmulPreferenceSetAttribute(pref, CUBLASLT_MATMUL_PREF_MAX_WORKSPACE_BYTES, &wsb, sizeof wsb);
        const cublasLtMatmulPreferenceAttributes_t al[3] = {CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_A_BYTES,
                                                            CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_B_BYTES,
                                                            CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_C_BYTES};
        for (int i = 0; i < 3 && s == CUBLAS_STATUS_SUCCESS; i++) {
            const uint32_t v = k->align[i];
            s = cublasLtMatmulPreferenceSetAttribute(pref, al[i], &v, sizeof v);
        }
        if (s == CUBLAS_STATUS_SUCCESS) {
            const uint32_t v = k->align[2];
            s = cublasLtMatmulPreferenceSetAttribute(pref, CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_D_BYTES, &v, sizeof v);
        }
        if (s == CUBLAS_STATUS_SUCCESS) { /* split-K partials reduced in fp32 only (see above) */
            const uint32_t v = CUBLASLT_REDUCTION_SCHEME_NONE | CUBLASLT_REDUCTION_SCHEME_COMPUTE_TYPE;
            s = cublasLtMatmulPreferenceSetAttribute(pref, CUBLASLT_MATMUL_PREF_REDUCTION_SCHEME_MASK, &v, sizeof v);
        }
    }
    if (s == CUBLAS_STATUS_SUCCESS) {
        cublasLtMatmulHeuristicResult_t r[LT_CANDIDATES];
        int found = 0;
        memset(r, 0, sizeof r);
        s = cublasLtMatmulAlgoGetHeuristic(c->lt, p->op, p->a, p->b, p->c, p->c, pref, LT_CANDIDATES, r, &found);
        if (s == CUBLAS_STATUS_SUCCESS && found > 0) {
            int pick = ldw ? 0 : lt_pick_of(c, k);
            if (pick >= found || r[pick].state != CUBLAS_STATUS_SUCCESS) pick = 0;
            if (c->tune) lt_tune(c, p, r, found, st);
            if (r[pick].state == CUBLAS_STATUS_SUCCESS) {
                p->algo = r[pick].algo;
                p->pick = pick;
                p->ok = 1;
            }
        }
        s = CUBLAS_STATUS_SUCCESS;
    }
    if (pref) cublasLtMatmulPreferenceDestroy(pref);
}

// The plan for k: from the table, else built into it, else (table full)
// built into *tmp, which the caller releases.
static lt_plan *lt_plan_get(ck_cublas *c, const lt_key *k, int ldw, const void *b, lt_plan *tmp, cudaStream_t st) {
    for (int i = 0; i < c->nplans; i++)
        if (lt_key_eq(&c->plans[i].key, k) && c->plans[i].ldw == ldw) return &c->plans[i];
    lt_plan *p = c->nplans < LT_PLANS ? &c->plans[c->nplans++] : tmp;
    lt_plan_build(c, k, ldw, b, p, st);
    return p;
}

// y (+)= x W^T + b through cuBLASLt (b in dt); *done = 0 when this shape has
// no cuBLASLt algorithm (the caller takes the GEMM + bias pass).
static ckey_status linear_lt(ck_cublas *c, const void *x, int64_t N, int in, const void *W, int ldw, const void *b,
                             void *y, int out, int ldy, int accumulate, ck_dtype dt, cudaStream_t st, int *done,
                             ckey_error *err) {
    lt_key k;
    memset(&k, 0, sizeof k);
    k.N = N, k.in = in, k.out = out, k.ldy = ldy, k.accumulate = accumulate ? 1 : 0, k.bias = b != NULL, k.dt = dt;
    k.align[0] = align_of(W), k.align[1] = align_of(x), k.align[2] = align_of(y), k.align[3] = align_of(b);
    lt_plan tmp;
    memset(&tmp, 0, sizeof tmp);
    lt_plan *p = lt_plan_get(c, &k, ldw != in ? ldw : 0, b, &tmp, st);
    *done = 0;
    c->last_pick = p->pick;
    cublasStatus_t s = CUBLAS_STATUS_SUCCESS;
    if (p->ok) {
        if (b) s = cublasLtMatmulDescSetAttribute(p->op, CUBLASLT_MATMUL_DESC_BIAS_POINTER, &b, sizeof b);
        const float one = 1.f, beta = accumulate ? 1.f : 0.f;
        if (s == CUBLAS_STATUS_SUCCESS)
            s = cublasLtMatmul(c->lt, p->op, &one, W, p->a, x, p->b, &beta, y, p->c, y, p->c, &p->algo, c->ws,
                               c->ws_bytes, st);
        *done = s == CUBLAS_STATUS_SUCCESS;
        if (s == CUBLAS_STATUS_NOT_SUPPORTED) { /* refused at run time: this shape takes the fallback */
            p->ok = 0;
            s = CUBLAS_STATUS_SUCCESS;
        }
    }
    if (p == &tmp) lt_plan_release(&tmp);
    return s == CUBLAS_STATUS_SUCCESS ? CKEY_OK : fail_blas(err, s, "cublasLtMatmul");
}

// Row-major y[N, out] = x[N, in] . W^T is column-major y^T[out, N] = W[out, in] . x^T:
// with W stored [out, in] row-major = column-major [in, out], that is op(A) = A^T.
ckey_status ck_cuda_linear_t(ck_cublas *c, const void *x, int64_t N, int in, const void *W, const void *b, void *y,
                             int out, int accumulate, ck_dtype dt, void *stream, ckey_error *err) {
    return ck_cuda_linear_ld_t(c, x, N, in, W, b, y, out, out, accumulate, dt, stream, err);
}

ckey_status ck_cuda_linear_ld_t(ck_cublas *c, const void *x, int64_t N, int in, const void *W, const void *b, void *y,
                                int out, int ldy, int accumulate, ck_dtype dt, void *stream, ckey_error *err) {
    return ck_cuda_linear_ldw_t(c, x, N, in, W, in, b, y, out, ldy, accumulate, dt, stream, err);
}

ckey_status ck_cuda_linear_ldw_t(ck_cublas *c, const void *x, int64_t N, int in, const void *W, int ldw, const void *b,
                                 void *y, int out, int ldy, int accumulate, ck_dtype dt, void *stream,
                                 ckey_error *err) {
    c->last_lt = 0;
    if (N <= 0) return CKEY_OK;
    if (N > 0x7fffffff) {
        if (err) {
            snprintf(err->message, sizeof err->message, "linear: %lld rows exceed cuBLAS's int range", (long long)N);
            err->status = CKEY_ERR_INVALID_ARG;
        }
        return CKEY_ERR_INVALID_ARG;
    }
    cudaStream_t st = (cudaStream_t)stream;
    if (dt != CK_F32 && !c->no_lt) {
        int done = 0;
        ckey_status r = linear_lt(c, x, N, in, W, ldw, b, y, out, ldy, accumulate, dt, st, &done, err);
        c->last_lt = !r && done;
        if (r || done) return r;
    }
    cublasStatus_t s = bind_stream(c, st);
    if (s != CUBLAS_STATUS_SUCCESS) return fail_blas(err, s, "cublasSetStream");
    const float one = 1.f, beta = accumulate ? 1.f : 0.f;
    if (dt == CK_F32) {
        s = cublasSgemm(c->h, CUBLAS_OP_T, CUBLAS_OP_N, out, (int)N, in, &one, (const float *)W, ldw,
                        (const float *)x, in, &beta, (float *)y, ldy);
    } else {
        const cudaDataType_t ty = dt == CK_F16 ? CUDA_R_16F : CUDA_R_16BF;
        s = cublasGemmEx(c->h, CUBLAS_OP_T, CUBLAS_OP_N, out, (int)N, in, &one, W, ty, ldw, x, ty, in, &beta, y, ty,
                         ldy, CUBLAS_COMPUTE_32F, CUBLAS_GEMM_DEFAULT);
    }
    if (s != CUBLAS_STATUS_SUCCESS) return fail_blas(err, s, dt == CK_F32 ? "cublasSgemm" : "cublasGemmEx");
    if (b) {
        cudaError_t e;
        /* the bias is T too: y = round(round(x W^T (+ y)) + b), two roundings */
        CK_DISPATCH(dt, (e = ck_rowbias_launch<T, false>((T *)y, N, out, ldy, (const T *)b, st)));
        if (e != cudaSuccess) return fail_cuda(err, e, "bias launch");
    }
    return CKEY_OK;
}

/* y (+)= x W^T with fp32 output: x and W fp32 on TF32 tensor cores, or fp16 (half) */
static ckey_status gemm_f32_out(ck_cublas *c, const void *x, int64_t N, int in, const void *W, float *y, int out,
                                int ldy, int accumulate, int half, void *stream, ckey_error *err) {
    c->last_lt = 0;
    if (N <= 0) return CKEY_OK;
    if (N > 0x7fffffff) {
        if (err) {
            snprintf(err->message, sizeof err->message, "gemm: %lld rows exceed cuBLAS's int range", (long long)N);
            err->status = CKEY_ERR_INVALID_ARG;
        }
        return CKEY_ERR_INVALID_ARG;
    }
    cublasStatus_t s = bind_stream(c, (cudaStream_t)stream);
    if (s != CUBLAS_STATUS_SUCCESS) return fail_blas(err, s, "cublasSetStream");
    const float one = 1.f, beta = accumulate ? 1.f : 0.f;
    const cudaDataType_t ty = half ? CUDA_R_16F : CUDA_R_32F;
    s = cublasGemmEx(c->h, CUBLAS_OP_T, CUBLAS_OP_N, out, (int)N, in, &one, W, ty, in, x, ty, in, &beta, y, CUDA_R_32F,
                     ldy, half ? CUBLAS_COMPUTE_32F : CUBLAS_COMPUTE_32F_FAST_TF32, CUBLAS_GEMM_DEFAULT);
    if (s != CUBLAS_STATUS_SUCCESS) return fail_blas(err, s, half ? "cublasGemmEx (fp16)" : "cublasGemmEx (tf32)");
    return CKEY_OK;
}

ckey_status ck_cuda_gemm_tf32(ck_cublas *c, const float *x, int64_t N, int in, const float *W, float *y, int out,
                              int ldy, int accumulate, void *stream, ckey_error *err) {
    return gemm_f32_out(c, x, N, in, W, y, out, ldy, accumulate, 0, stream, err);
}

ckey_status ck_cuda_gemm_f16_f32(ck_cublas *c, const void *x, int64_t N, int in, const void *W, float *y, int out,
                                 int ldy, int accumulate, void *stream, ckey_error *err) {
    return gemm_f32_out(c, x, N, in, W, y, out, ldy, accumulate, 1, stream, err);
}

ckey_status ck_cuda_linear(ck_cublas *c, const float *x, int64_t N, int in, const float *W, const float *b,
                           float *y, int out, int accumulate, void *stream, ckey_error *err) {
    return ck_cuda_linear_t(c, x, N, in, W, b, y, out, accumulate, CK_F32, stream, err);
}

}  // extern "C"
