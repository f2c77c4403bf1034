/* The LayerNorm before an MLP's fc1 folded into fc1 (16-bit CUDA sessions,
 * unless CKEY_DEBUG_CUDA_NO_LN_FOLD): with xn = (x - mean) rstd g + beta,
 *   W xn + b = rstd (W' x - mean colsum) + b',
 *   W' = W diag(g), b' = b + W beta, colsum = W' 1,
 * so the fused fc1 kernel reads x itself and only the rows' mean and rstd
 * are computed before it; the normalized rows are never written. colsum must
 * be the row sums of W' as the GEMM sees it, i.e. after its 16-bit rounding,
 * so that mean colsum cancels the mean in W' x exactly up to the fp32
 * accumulation. */
#ifndef CK_MODEL_LNFOLD_H
#define CK_MODEL_LNFOLD_H

#include <stdint.h>

#include "core/dtype.h"

/* Wf [N, K] = W [N, K] diag(g [K]); bf [N] = b [N] + W beta (double sums). */
void ck_lnfold_weights(const float *W, const float *g, const float *beta, const float *b, int N, int K, float *Wf,
                       float *bf);
/* colsum [N] = the row sums (in double) of the 16-bit matrix Wq [N, K] of type dt (CK_F16 / CK_BF16). */
void ck_lnfold_colsum16(const uint16_t *Wq, ck_dtype dt, int N, int K, float *colsum);

#endif
