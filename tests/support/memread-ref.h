/* Shared by the memory-read tests (tests/test-cutie-read.c on the CPU,
 * tests/test-cuda-read.c on CUDA; support/memread-ref.c): a read's inputs
 * and an unfused reference of the official computation
 * (cutie/model/utils/memory_utils.py: get_similarity, do_softmax with top_k,
 * readout) in double precision. Layouts as the op's (backend/ops.h
 * memory_read): positions as rows, mk [N, CK], qk / qe [HW, CK], mv [N, C],
 * out [HW, C]. */
#ifndef CK_TEST_MEMREAD_REF_H
#define CK_TEST_MEMREAD_REF_H

#include <stdint.h>

/* The similarity's operands (mr_case.half): as given (fp32), or rounded to
 * fp16 / bf16 as the official code's autocast rounds them: qk, qe, mk
 * rounded; 2 qe qk and mk^2 formed from the rounded values and rounded
 * again; sum qe qk^2 from the rounded values (the CUDA read's half path,
 * src/cuda/memory-read.cu). */
enum { MR_FP32 = 0, MR_FP16 = 1, MR_BF16 = 2 };

/* One read. The arrays are owned when made by mr_case_alloc (freed by
 * mr_case_free); a test may also point them at its own. */
typedef struct {
    const char *name; /* for messages; may be NULL */
    int64_t N, HW;
    int CK, C, top_k;
    float *mk, *ms, *qk, *qe, *mv; /* ms, qe: NULL when absent */
    int half;                      /* MR_FP32 (mr_case_alloc's), MR_FP16 or MR_BF16 */
} mr_case;

/* x rounded to nearest even in fp16 (subnormals, overflow to infinity) or
 * bf16 (half MR_FP16 / MR_BF16; MR_FP32: x). */
float mr_round(float x, int half);

/* xorshift64 and a uniform float in [lo, hi) from it: the cases' data. */
uint64_t mr_next(uint64_t *st);
float mr_unif(uint64_t *st, float lo, float hi);

/* Allocates the arrays (uninitialized); sel / shr: with qe / ms. */
void mr_case_alloc(mr_case *c, const char *name, int64_t N, int64_t HW, int CK, int C, int top_k, int sel, int shr);
/* Random data shaped like Cutie's: keys and values in [-1, 1], shrinkage
 * d^2 + 1, selection sigmoid(x) (cutie/model/big_modules.py KeyProjection). */
void mr_case_random(mr_case *c, uint64_t seed);
/* Data whose similarities are exact in fp32 in any summation order: keys
 * small integers, selection quarters, shrinkage 1, 2 or 4, CK 16 (sqrt 4).
 * Distinct similarities are then at least 1/16 apart, so no query is
 * ambiguous at the top-k boundary, and equal ones tie exactly. */
void mr_case_integer(mr_case *c, uint64_t seed);
void mr_case_free(mr_case *c);

/* Keys for ties exact in fp32 (CK 4, small dyadic numbers): "top"
 * positions (n % 50 == 7, mk = qk), "tied" ones below them (other
 * n % 11 == 0, mk = 0), the rest lower (mk = (0, 1 + n % 3, 0, 0)); ms 1.5
 * on the top and tied ones, else 1 or 4; every query qk = (1, 0, 0, 0) with
 * qe quarters. The values are left as they are. */
void mr_case_ties(mr_case *c);
/* Similarities far outside exp's fp32 range, exact in fp32 (integer keys
 * 0 .. 16, queries of magnitude 32 .. 64, ms powers of two, qe quarters;
 * CK 16): without selection all above 88.8 (exp overflows past 88.7), with
 * it all below -104 (exp underflows). Needs ms; the values are left. */
void mr_case_large(mr_case *c);
/* Every similarity equal (mk 0.5, ms 2, qk 0.25, qe 0.75) and mv [n] = n
 * (C 1): a read keeps positions 0 .. k-1 and gives their mean. Needs ms
 * and qe. */
void mr_case_all_equal(mr_case *c);

/* The kept count of a read: min(top_k, N), all N when top_k <= 0 (with
 * usage on the top-k path the same weights as the softmax over all N when
 * top_k >= N). */
int64_t mr_kept(const mr_case *c);

/* A similarity and its position, for sorting. */
typedef struct {
    double v;
    int64_t n;
} mr_ranked;

/* Descending value; equal values by ascending position (the op's tie rule). */
int mr_rank_low_first(const void *a, const void *b);
/* The same with equal values by descending position: a rule the op must not
 * follow (the tie cases check that they would notice). */
int mr_rank_high_first(const void *a, const void *b);

/* get_similarity for query q: s [N] in double, as the official code
 * composes it (-a_sq + two_ab - b_sq with selection, -a_sq + two_ab
 * without, then * ms / sqrt(CK)), from the operands c->half gives; mag [N]
 * (optional): the size of the terms, the scale of an fp32 computation's
 * rounding. */
void mr_ref_similarity(const mr_case *c, int64_t q, double *s, double *mag);

/* Query q of the whole read in double: out [C], usage [N] += the weights
 * (when given). Returns whether the k-th and (k+1)-th similarities are
 * distinct but within fp32 rounding of each other (2e-6 of the terms'
 * size; 2e-5 with 16-bit operands, whose fp32 sums run on tensor cores,
 * which align and truncate rather than round each addition): then the kept
 * set is not determined by the computation.
 * s, mag [N] and r [N] are the caller's work arrays. do_softmax's exp is
 * taken from the largest kept value, which changes nothing where the
 * official exp is finite. */
int mr_ref_query(const mr_case *c, int64_t q, int (*order)(const void *, const void *), double *out, double *usage,
                 double *s, double *mag, mr_ranked *r);

/* The whole read: out [HW, C]. Returns how many queries are ambiguous at
 * the top-k boundary (mr_ref_query), marking them in ambiguous [HW] when
 * given. */
int64_t mr_ref_read(const mr_case *c, int (*order)(const void *, const void *), double *out,
                    unsigned char *ambiguous);

#endif
