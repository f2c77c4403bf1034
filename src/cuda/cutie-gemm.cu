// Cutie's conv GEMMs through cuBLASLt with the conv's bias and ReLU in the
// GEMM's epilogue (kernels.h: ck_cutie_gemm), so that no pass over the
// output follows the GEMM. A plan (descriptors and the heuristic's first
// algorithm) is made per shape on its first use and kept: a tracker's
// shapes are the same every frame.
#include <cublasLt.h>
#include <cuda_runtime.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cuda/kernels.h"

namespace {

/* PLANS: the table's slots (a power of two, open addressing); a tracker at
 * 3840 x 2160 in bands uses a few hundred shapes. */
enum { PLANS = 2048 };

struct gkey {
    int64_t N;
    int K, Cout, ldy, acc, bias, relu, prec;
    unsigned align[4]; /* of W, x, y, the bias */
};

struct gplan {
    gkey k;
    int used, ok;
    cublasLtMatmulDesc_t op;
    cublasLtMatrixLayout_t a, b, c;
    cublasLtMatmulAlgo_t algo;
};

unsigned align_of(const void *p) {
    const uintptr_t a = (uintptr_t)p;
    if (!a) return 16;
    unsigned k = 1;
    while (k < 16 && !(a & k)) k <<= 1;
    return k;
}

uint64_t hash_of(const gkey *k) {
    const unsigned char *p = (const unsigned char *)k;
    uint64_t h = 1469598103934665603ull;
    for (size_t i = 0; i < sizeof *k; i++) h = (h ^ p[i]) * 1099511628211ull;
    return h;
}

void plan_release(gplan *p) {
    if (p->op) cublasLtMatmulDescDestroy(p->op);
    if (p->a) cublasLtMatrixLayoutDestroy(p->a);
    if (p->b) cublasLtMatrixLayoutDestroy(p->b);
    if (p->c) cublasLtMatrixLayoutDestroy(p->c);
    p->op = NULL, p->a = p->b = p->c = NULL;
}

ckey_status fail_lt(ckey_error *err, cublasStatus_t s, const char *what) {
    if (err) {
        snprintf(err->message, sizeof err->message, "cuda cutie conv GEMM: %s failed (cuBLAS status %d)", what, (int)s);
        err->status = CKEY_ERR_DEVICE;
    }
    return CKEY_ERR_DEVICE;
}

} // namespace

struct ck_cutie_gemm {
    cublasLtHandle_t lt;
    void *ws;
    size_t ws_bytes;
    gplan plans[PLANS];
};

namespace {

// Row-major y[N, ldy] = x[N, K] W[Cout, K]^T is column-major D [Cout, N]
// (ld ldy) = op(A) B with A = W as column-major [K, Cout] (op T) and B = x
// as column-major [K, N]; the bias runs along D's rows (Cout), as cuBLASLt
// broadcasts it. D = epilogue(A B + beta C + bias), C = D.
void plan_build(const ck_cutie_gemm *g, const gkey *k, const void *bias, gplan *p) {
    const cudaDataType_t ab = k->prec == CKEY_PRECISION_FP16 ? CUDA_R_16F : CUDA_R_32F;
    const cublasComputeType_t ct =
        k->prec == CKEY_PRECISION_TF32 ? CUBLAS_COMPUTE_32F_FAST_TF32 : CUBLAS_COMPUTE_32F;
    const cublasOperation_t ta = CUBLAS_OP_T, tb = CUBLAS_OP_N;
    const cublasLtEpilogue_t epi = k->bias && k->relu ? CUBLASLT_EPILOGUE_RELU_BIAS
                                   : k->bias          ? CUBLASLT_EPILOGUE_BIAS
                                   : k->relu          ? CUBLASLT_EPILOGUE_RELU
                                                      : CUBLASLT_EPILOGUE_DEFAULT;
    cublasLtMatmulPreference_t pref = NULL;
    p->ok = 0;
    cublasStatus_t s = cublasLtMatmulDescCreate(&p->op, ct, CUDA_R_32F);
    if (s == CUBLAS_STATUS_SUCCESS) s = cublasLtMatmulDescSetAttribute(p->op, CUBLASLT_MATMUL_DESC_TRANSA, &ta, sizeof ta);
    if (s == CUBLAS_STATUS_SUCCESS) s = cublasLtMatmulDescSetAttribute(p->op, CUBLASLT_MATMUL_DESC_TRANSB, &tb, sizeof tb);
    if (s == CUBLAS_STATUS_SUCCESS)
        s = cublasLtMatmulDescSetAttribute(p->op, CUBLASLT_MATMUL_DESC_EPILOGUE, &epi, sizeof epi);
    if (s == CUBLAS_STATUS_SUCCESS && k->bias)
        s = cublasLtMatmulDescSetAttribute(p->op, CUBLASLT_MATMUL_DESC_BIAS_POINTER, &bias, sizeof bias);
    if (s == CUBLAS_STATUS_SUCCESS) s = cublasLtMatrixLayoutCreate(&p->a, ab, (uint64_t)k->K, (uint64_t)k->Cout, k->K);
    if (s == CUBLAS_STATUS_SUCCESS) s = cublasLtMatrixLayoutCreate(&p->b, ab, (uint64_t)k->K, (uint64_t)k->N, k->K);
    if (s == CUBLAS_STATUS_SUCCESS)
        s = cublasLtMatrixLayoutCreate(&p->c, CUDA_R_32F, (uint64_t)k->Cout, (uint64_t)k->N, k->ldy);
    if (s == CUBLAS_STATUS_SUCCESS) s = cublasLtMatmulPreferenceCreate(&pref);
    if (s == CUBLAS_STATUS_SUCCESS) {
        const uint64_t wsb = g->ws_bytes;
        s = cublasLtMatmulPreferenceSetAttribute(pref, CUBLASLT_MATMUL_PREF_MAX_WORKSPACE_BYTES, &wsb, sizeof wsb);
        const cublasLtMatmulPreferenceAttributes_t al[4] = {
            CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_A_BYTES, CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_B_BYTES,
            CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_C_BYTES, CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_D_BYTES};
        const uint32_t v[4] = {k->align[0], k->align[1], k->align[2], k->align[2]};
        for (int i = 0; i < 4 && s == CUBLAS_STATUS_SUCCESS; i++)
            s = cublasLtMatmulPreferenceSetAttribute(pref, al[i], &v[i], sizeof v[i]);
    }
    if (s == CUBLAS_STATUS_SUCCESS) {
        cublasLtMatmulHeuristicResult_t r;
        int found = 0;
        memset(&r, 0, sizeof r);
        s = cublasLtMatmulAlgoGetHeuristic(g->lt, p->op, p->a, p->b, p->c, p->c, pref, 1, &r, &found);
        if (s == CUBLAS_STATUS_SUCCESS && found > 0 && r.state == CUBLAS_STATUS_SUCCESS) {
            p->algo = r.algo;
            p->ok = 1;
        }
    }
    if (pref) cublasLtMatmulPreferenceDestroy(pref);
    if (!p->ok) plan_release(p);
}

} // namespace

extern "C" {

ckey_status ck_cutie_gemm_create(void *ws, size_t ws_bytes, ck_cutie_gemm **out, ckey_error *err) {
    *out = NULL;
    ck_cutie_gemm *g = (ck_cutie_gemm *)calloc(1, sizeof *g);
    if (!g) {
        if (err) {
            snprintf(err->message, sizeof err->message, "cuda cutie conv GEMM: out of memory for its plan table");
            err->status = CKEY_ERR_NOMEM;
        }
        return CKEY_ERR_NOMEM;
    }
    const cublasStatus_t s = cublasLtCreate(&g->lt);
    if (s != CUBLAS_STATUS_SUCCESS) {
        free(g);
        return fail_lt(err, s, "cublasLtCreate");
    }
    g->ws = ws, g->ws_bytes = ws ? ws_bytes : 0;
    *out = g;
    return CKEY_OK;
}

void ck_cutie_gemm_free(ck_cutie_gemm *g) {
    if (!g) return;
    for (int i = 0; i < PLANS; i++)
        if (g->plans[i].used) plan_release(&g->plans[i]);
    cublasLtDestroy(g->lt);
    free(g);
}

ckey_status ck_cutie_gemm_run(ck_cutie_gemm *g, ckey_precision prec, const void *x, int64_t N, int K, const void *W,
                              const float *bias, int relu, float *y, int Cout, int ldy, int acc, void *stream, int *done,
                              ckey_error *err) {
    *done = 0;
    if (!g || N <= 0 || N > 0x7fffffff || K <= 0 || Cout <= 0) return CKEY_OK;
    gkey k;
    memset(&k, 0, sizeof k); /* the padding too: the key is hashed and compared as bytes */
    k.N = N, k.K = K, k.Cout = Cout, k.ldy = ldy, k.acc = acc ? 1 : 0, k.bias = bias != NULL, k.relu = relu ? 1 : 0;
    k.prec = (int)prec;
    k.align[0] = align_of(W), k.align[1] = align_of(x), k.align[2] = align_of(y), k.align[3] = align_of(bias);
    gplan *p = NULL;
    for (uint64_t i = hash_of(&k), n = 0; n < PLANS; i++, n++) {
        gplan *q = &g->plans[i & (PLANS - 1)];
        if (!q->used) { /* a new shape: its plan made now and kept */
            q->used = 1;
            memcpy(&q->k, &k, sizeof k);
            plan_build(g, &k, bias, q);
            p = q;
            break;
        }
        if (!memcmp(&q->k, &k, sizeof k)) {
            p = q;
            break;
        }
    }
    if (!p || !p->ok) return CKEY_OK; /* table full or no algorithm: the caller's GEMM + bias pass */
    cublasStatus_t s = CUBLAS_STATUS_SUCCESS;
    if (bias) s = cublasLtMatmulDescSetAttribute(p->op, CUBLASLT_MATMUL_DESC_BIAS_POINTER, &bias, sizeof bias);
    const float one = 1.f, beta = acc ? 1.f : 0.f;
    if (s == CUBLAS_STATUS_SUCCESS)
        s = cublasLtMatmul(g->lt, p->op, &one, W, p->a, x, p->b, &beta, y, p->c, y, p->c, &p->algo, g->ws, g->ws_bytes,
                           (cudaStream_t)stream);
    if (s == CUBLAS_STATUS_NOT_SUPPORTED) { /* refused at run time: this shape takes the fallback from now on */
        p->ok = 0;
        plan_release(p);
        return CKEY_OK;
    }
    if (s != CUBLAS_STATUS_SUCCESS) return fail_lt(err, s, "cublasLtMatmul");
    *done = 1;
    return CKEY_OK;
}

} // extern "C"
