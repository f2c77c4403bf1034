/* The memory-read tests' cases and double-precision reference
 * (memread-ref.h). */
#include "memread-ref.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

uint64_t mr_next(uint64_t *st) {
    *st ^= *st << 13, *st ^= *st >> 7, *st ^= *st << 17;
    return *st;
}

float mr_unif(uint64_t *st, float lo, float hi) {
    return lo + (hi - lo) * (float)((mr_next(st) >> 40) * (1.0 / 16777216.0));
}

void mr_case_alloc(mr_case *c, const char *name, int64_t N, int64_t HW, int CK, int C, int top_k, int sel, int shr) {
    memset(c, 0, sizeof *c);
    c->name = name, c->N = N, c->HW = HW, c->CK = CK, c->C = C, c->top_k = top_k;
    c->mk = malloc((size_t)(N * CK) * sizeof(float));
    c->qk = malloc((size_t)(HW * CK) * sizeof(float));
    c->mv = malloc((size_t)(N * C) * sizeof(float));
    c->ms = shr ? malloc((size_t)N * sizeof(float)) : NULL;
    c->qe = sel ? malloc((size_t)(HW * CK) * sizeof(float)) : NULL;
}

void mr_case_random(mr_case *c, uint64_t seed) {
    uint64_t st = seed * 0x9E3779B97F4A7C15ull + 1;
    for (int64_t i = 0; i < c->N * c->CK; i++) c->mk[i] = mr_unif(&st, -1, 1);
    for (int64_t i = 0; i < c->HW * c->CK; i++) c->qk[i] = mr_unif(&st, -1, 1);
    for (int64_t i = 0; i < c->N * c->C; i++) c->mv[i] = mr_unif(&st, -1, 1);
    if (c->ms)
        for (int64_t n = 0; n < c->N; n++) {
            const float x = mr_unif(&st, -1, 1);
            c->ms[n] = x * x + 1;
        }
    if (c->qe)
        for (int64_t i = 0; i < c->HW * c->CK; i++) c->qe[i] = 1.0f / (1.0f + expf(-mr_unif(&st, -3, 3)));
}

void mr_case_integer(mr_case *c, uint64_t seed) {
    uint64_t st = seed * 0x9E3779B97F4A7C15ull + 1;
    for (int64_t i = 0; i < c->N * c->CK; i++) c->mk[i] = (float)((int)(mr_next(&st) % 7) - 3);
    for (int64_t i = 0; i < c->HW * c->CK; i++) c->qk[i] = (float)((int)(mr_next(&st) % 7) - 3);
    for (int64_t i = 0; i < c->N * c->C; i++) c->mv[i] = mr_unif(&st, -1, 1);
    if (c->ms)
        for (int64_t n = 0; n < c->N; n++) c->ms[n] = (float)(1 << (mr_next(&st) % 3));
    if (c->qe)
        for (int64_t i = 0; i < c->HW * c->CK; i++) c->qe[i] = (float)(1 + mr_next(&st) % 4) * 0.25f;
}

void mr_case_free(mr_case *c) { free(c->mk), free(c->ms), free(c->qk), free(c->qe), free(c->mv); }

void mr_case_ties(mr_case *c) {
    const int CK = c->CK;
    for (int64_t n = 0; n < c->N; n++) {
        float *m = c->mk + n * CK;
        const int top = n % 50 == 7, tied = !top && n % 11 == 0;
        m[0] = top ? 1.0f : 0.0f, m[1] = top || tied ? 0.0f : (float)(1 + n % 3), m[2] = m[3] = 0;
        if (c->ms) c->ms[n] = top || tied ? 1.5f : (n % 2 ? 1.0f : 4.0f);
    }
    for (int64_t q = 0; q < c->HW; q++) {
        float *k = c->qk + q * CK;
        k[0] = 1, k[1] = k[2] = k[3] = 0;
        if (c->qe)
            for (int ch = 0; ch < CK; ch++) c->qe[q * CK + ch] = (float)(1 + (q + ch) % 4) * 0.25f;
    }
}

void mr_case_large(mr_case *c) {
    const int sel = c->qe != NULL;
    uint64_t st = 99;
    for (int64_t i = 0; i < c->N * c->CK; i++) c->mk[i] = (float)(mr_next(&st) % 17);
    for (int64_t n = 0; n < c->N; n++) c->ms[n] = (float)(1 << (mr_next(&st) % 3));
    for (int64_t i = 0; i < c->HW * c->CK; i++) {
        c->qk[i] = sel ? -(float)(32 + mr_next(&st) % 33) : (float)(32 + mr_next(&st) % 33);
        if (c->qe) c->qe[i] = (float)(1 + mr_next(&st) % 4) * 0.25f;
    }
}

void mr_case_all_equal(mr_case *c) {
    for (int64_t i = 0; i < c->N * c->CK; i++) c->mk[i] = 0.5f;
    for (int64_t n = 0; n < c->N; n++) c->ms[n] = 2, c->mv[n] = (float)n;
    for (int64_t i = 0; i < c->HW * c->CK; i++) c->qk[i] = 0.25f, c->qe[i] = 0.75f;
}

int64_t mr_kept(const mr_case *c) { return c->top_k <= 0 || c->top_k >= c->N ? c->N : c->top_k; }

int mr_rank_low_first(const void *a, const void *b) {
    const mr_ranked *x = a, *y = b;
    if (x->v != y->v) return x->v > y->v ? -1 : 1;
    return (x->n > y->n) - (x->n < y->n);
}

int mr_rank_high_first(const void *a, const void *b) {
    const mr_ranked *x = a, *y = b;
    if (x->v != y->v) return x->v > y->v ? -1 : 1;
    return (x->n < y->n) - (x->n > y->n);
}

float mr_round(float x, int half) {
    uint32_t u;
    memcpy(&u, &x, sizeof u);
    if (half == MR_BF16) {
        u += 0x7FFFu + ((u >> 16) & 1u);
        u &= 0xFFFF0000u;
    } else if (half == MR_FP16) {
        const uint32_t sign = u & 0x80000000u, a = u & 0x7FFFFFFFu;
        if (a >= 0x477FF000u) { /* 65520 and above: infinity */
            u = sign | 0x7F800000u;
        } else if (a < 0x38800000u) { /* below 2^-14: subnormal, steps of 2^-24 (exact scalings) */
            const float r = rintf(x * 16777216.0f) * (1.0f / 16777216.0f);
            memcpy(&u, &r, sizeof u);
            u |= sign; /* -0 stays -0 */
        } else { /* 10 of the 23 fraction bits kept */
            u = sign | ((a + 0xFFFu + ((a >> 13) & 1u)) & ~0x1FFFu);
        }
    }
    memcpy(&x, &u, sizeof x);
    return x;
}

/* mr_ref_similarity with 16-bit operands (mr_case.half). */
static void similarity_half(const mr_case *c, int64_t q, double *s, double *mag) {
    const int CK = c->CK, h = c->half;
    const float *k = c->qk + q * CK, *e = c->qe ? c->qe + q * CK : NULL;
    double b_sq = 0;
    for (int ch = 0; e && ch < CK; ch++) {
        const float kr = mr_round(k[ch], h);
        b_sq += (double)mr_round(e[ch], h) * kr * kr;
    }
    for (int64_t n = 0; n < c->N; n++) {
        const float *m = c->mk + n * CK;
        double a_sq = 0, two_ab = 0;
        for (int ch = 0; ch < CK; ch++) {
            const float er = e ? mr_round(e[ch], h) : 1.0f, kr = mr_round(k[ch], h), mr = mr_round(m[ch], h);
            a_sq += (double)mr_round(mr * mr, h) * er;
            two_ab += (double)mr_round(2.0f * er * kr, h) * mr;
        }
        const double v = -a_sq + two_ab - b_sq;
        double sc = 1.0 / sqrt((double)CK);
        if (c->ms) sc *= c->ms[n];
        s[n] = v * sc;
        if (mag) mag[n] = (fabs(a_sq) + fabs(two_ab) + fabs(b_sq)) * fabs(sc);
    }
}

void mr_ref_similarity(const mr_case *c, int64_t q, double *s, double *mag) {
    if (c->half != MR_FP32) {
        similarity_half(c, q, s, mag);
        return;
    }
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
        const double v = e ? -a_sq + two_ab - b_sq : -a_sq + two_ab;
        double sc = 1.0 / sqrt((double)CK);
        if (c->ms) sc *= c->ms[n];
        s[n] = v * sc;
        if (mag) mag[n] = (fabs(a_sq) + fabs(two_ab) + fabs(b_sq)) * fabs(sc);
    }
}

int mr_ref_query(const mr_case *c, int64_t q, int (*order)(const void *, const void *), double *out, double *usage,
                 double *s, double *mag, mr_ranked *r) {
    const int64_t N = c->N, k = mr_kept(c);
    mr_ref_similarity(c, q, s, mag);
    for (int64_t n = 0; n < N; n++) r[n].v = s[n], r[n].n = n;
    qsort(r, (size_t)N, sizeof *r, order);
    int amb = 0;
    if (k < N) {
        const double gap = r[k - 1].v - r[k].v,
                     tol = (c->half != MR_FP32 ? 2e-5 : 2e-6) * fmax(mag[r[k - 1].n], mag[r[k].n]);
        amb = gap != 0 && gap <= tol;
    }
    double sum = 0;
    for (int64_t j = 0; j < k; j++) sum += exp(r[j].v - r[0].v);
    for (int ch = 0; ch < c->C; ch++) out[ch] = 0;
    for (int64_t j = 0; j < k; j++) {
        const double w = exp(r[j].v - r[0].v) / sum;
        const float *v = c->mv + r[j].n * c->C;
        for (int ch = 0; ch < c->C; ch++) out[ch] += w * v[ch];
        if (usage) usage[r[j].n] += w;
    }
    return amb;
}

int64_t mr_ref_read(const mr_case *c, int (*order)(const void *, const void *), double *out,
                    unsigned char *ambiguous) {
    const int64_t N = c->N;
    double *s = malloc((size_t)N * sizeof *s), *mag = malloc((size_t)N * sizeof *mag);
    mr_ranked *r = malloc((size_t)N * sizeof *r);
    int64_t n_amb = 0;
    for (int64_t q = 0; q < c->HW; q++) {
        const int amb = mr_ref_query(c, q, order, out + q * c->C, NULL, s, mag, r);
        n_amb += amb;
        if (ambiguous) ambiguous[q] = (unsigned char)amb;
    }
    free(s), free(mag), free(r);
    return n_amb;
}
