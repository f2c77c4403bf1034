/* Cutie's memory read (backend/ops.h memory_read): an unfused reference of
 * the official computation (cutie/model/utils/memory_utils.py:
 * get_similarity, do_softmax with top_k, readout) in double precision and
 * its characterization on hand-computed values. Layouts as the op's: positions as
 * rows, mk [N, CK], qk / qe [HW, CK], mv [N, C], out [HW, C]. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "core/core.h"
#include "support/testutil.h"

typedef struct {
    int64_t N, HW;
    int CK, C, top_k;
    const float *mk, *ms, *qk, *qe, *mv; /* ms, qe: NULL when absent */
} read_case;

/* ------------------------------------------------------------ reference */

typedef struct {
    double v;
    int64_t n;
} ranked;

/* Descending value; equal values by ascending position (the op's tie rule). */
static int rank_low_first(const void *a, const void *b) {
    const ranked *x = a, *y = b;
    if (x->v != y->v) return x->v > y->v ? -1 : 1;
    return (x->n > y->n) - (x->n < y->n);
}

/* get_similarity for one query: s [N] in double, as the official code
 * composes it (-a_sq + two_ab - b_sq with selection, -a_sq + two_ab
 * without, then * ms / sqrt(CK)); mag [N] (optional): the size of the terms,
 * the scale of an fp32 computation's rounding. */
static void ref_similarity(const read_case *c, int64_t q, double *s, double *mag) {
    const int CK = c->CK;
    const float *k = c->qk + q * CK, *e = c->qe ? c->qe + q * CK : NULL;
    double b_sq = 0;
    if (e)
        for (int ch = 0; ch < CK; ch++) b_sq += (double)e[ch] * k[ch] * k[ch];
    for (int64_t n = 0; n < c->N; n++) {
        const float *m = c->mk + n * CK;
        double a_sq = 0, two_ab = 0;
        for (int ch = 0; ch < CK; ch++) {
            const double w = e ? e[ch] : 1.0;
            a_sq += (double)m[ch] * m[ch] * w;
            two_ab += (double)m[ch] * k[ch] * w;
        }
        two_ab *= 2;
        double v = e ? -a_sq + two_ab - b_sq : -a_sq + two_ab, sc = 1.0 / sqrt((double)CK);
        if (c->ms) sc *= c->ms[n];
        s[n] = v * sc;
        if (mag) mag[n] = (fabs(a_sq) + fabs(two_ab) + fabs(e ? b_sq : 0)) * fabs(sc);
    }
}

/* The whole read in double: out [HW, C]. Returns how many queries have two
 * distinct values within fp32 rounding of each other at the top-k boundary
 * (their kept set is not determined by the fp32 op's similarities), marking
 * them in ambiguous [HW] when given. */
static int64_t ref_read(const read_case *c, int (*order)(const void *, const void *), double *out,
                        unsigned char *ambiguous) {
    const int64_t N = c->N;
    const int64_t k = c->top_k <= 0 || c->top_k >= N ? N : c->top_k;
    double *s = malloc((size_t)N * sizeof *s), *mag = malloc((size_t)N * sizeof *mag);
    ranked *r = malloc((size_t)N * sizeof *r);
    int64_t n_amb = 0;
    for (int64_t q = 0; q < c->HW; q++) {
        ref_similarity(c, q, s, mag);
        for (int64_t n = 0; n < N; n++) r[n].v = s[n], r[n].n = n;
        qsort(r, (size_t)N, sizeof *r, order);
        int amb = 0;
        if (k < N) {
            const double gap = r[k - 1].v - r[k].v, tol = 2e-6 * fmax(mag[r[k - 1].n], mag[r[k].n]);
            amb = gap != 0 && gap <= tol;
        }
        n_amb += amb;
        if (ambiguous) ambiguous[q] = (unsigned char)amb;
        /* do_softmax: exp of the kept values over their sum (from the largest,
         * which changes nothing where the official exp is finite); readout */
        double sum = 0;
        for (int64_t j = 0; j < k; j++) sum += exp(r[j].v - r[0].v);
        double *o = out + q * c->C;
        for (int ch = 0; ch < c->C; ch++) o[ch] = 0;
        for (int64_t j = 0; j < k; j++) {
            const double w = exp(r[j].v - r[0].v) / sum;
            const float *v = c->mv + r[j].n * c->C;
            for (int ch = 0; ch < c->C; ch++) o[ch] += w * v[ch];
        }
    }
    free(s), free(mag), free(r);
    return n_amb;
}

/* ------------------------------------------------- characterization */

/* CK = 1, N = 2, HW = 1, worked by hand from the official formulas:
 * mk = [1, 3], qk = 2, qe = 0.5, ms = [1, 2], mv = [10, 20].
 *   with qe:  s = -qe mk^2 + 2 qe qk mk - qe qk^2 = [-0.5, -0.5]; * ms = [-0.5, -1]
 *   no qe:    s = -mk^2 + 2 qk mk                 = [3, 3];       * ms = [3, 6]
 * sqrt(CK) = 1. Without qe the query's own qk^2 is absent (STCN's form);
 * shrinkage scales the whole similarity, qk^2 term included. */
typedef struct {
    int sel, shr, top_k;
    double want;
} hand_case;

static const hand_case hand_cases[] = {
    {1, 1, 1, 10},                                     /* -0.5 > -1: position 0 */
    {1, 1, 0, (10 + 20 * 0.60653065971263342) / (1 + 0.60653065971263342)}, /* weights 1 : e^-0.5 */
    {1, 0, 1, 10},                                     /* a tie at -0.5: the lower position */
    {1, 0, 0, 15},                                     /* equal weights */
    {0, 1, 1, 20},                                     /* 6 > 3 */
    {0, 1, 2, (10 * 0.049787068367863944 + 20) / (1 + 0.049787068367863944)}, /* top_k == N: e^-3 : 1 */
    {0, 0, 1, 10},                                     /* a tie at 3: the lower position */
    {0, 0, 5, 15},                                     /* top_k > N: all */
};

static void hand_data(const hand_case *h, float mk[2], float ms[2], float *qk, float *qe, float mv[2],
                      read_case *c) {
    mk[0] = 1, mk[1] = 3, ms[0] = 1, ms[1] = 2, *qk = 2, *qe = 0.5f, mv[0] = 10, mv[1] = 20;
    read_case r = {2, 1, 1, 1, h->top_k, mk, h->shr ? ms : NULL, qk, h->sel ? qe : NULL, mv};
    *c = r;
}

static void test_reference_hand_values(void) {
    for (size_t i = 0; i < CK_ARRAY_LEN(hand_cases); i++) {
        float mk[2], ms[2], qk, qe, mv[2];
        read_case c;
        hand_data(&hand_cases[i], mk, ms, &qk, &qe, mv, &c);
        double got;
        ref_read(&c, rank_low_first, &got, NULL);
        CHECKF(fabs(got - hand_cases[i].want) < 1e-12, "case %zu: %.15g, by hand %.15g", i, got, hand_cases[i].want);
    }
}

int main(int argc, char **argv) {
    static const ck_test_case cases[] = {
        {"reference_hand_values", test_reference_hand_values},
    };
    return ck_test_main(cases, (int)CK_ARRAY_LEN(cases), argc, argv);
}
