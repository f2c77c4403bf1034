/* The LayerNorm fold's weight transformation (ln-fold.h). */
#include "model/ln-fold.h"

#include "ckpt/checkpoint.h"

void ck_lnfold_weights(const float *W, const float *g, const float *beta, const float *b, int N, int K, float *Wf,
                       float *bf) {
    for (int n = 0; n < N; n++) {
        const float *w = W + (size_t)n * K;
        float *wf = Wf + (size_t)n * K;
        double s = b ? b[n] : 0.0;
        for (int k = 0; k < K; k++) {
            wf[k] = w[k] * g[k];
            s += (double)w[k] * beta[k];
        }
        bf[n] = (float)s;
    }
}

void ck_lnfold_colsum16(const uint16_t *Wq, ck_dtype dt, int N, int K, float *colsum) {
    for (int n = 0; n < N; n++) {
        const uint16_t *w = Wq + (size_t)n * K;
        double s = 0;
        for (int k = 0; k < K; k++) s += dt == CK_BF16 ? ck_bf16_to_f32(w[k]) : ck_f16_to_f32(w[k]);
        colsum[n] = (float)s;
    }
}
