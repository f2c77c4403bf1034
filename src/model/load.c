/* Building a GreenFormer from a tensor source: the list of expected tensors
 * (official state-dict names and shapes), one float32 store, and the
 * load-time folding of the decoders. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "ckpt/checkpoint.h"
#include "model/model.h"

typedef struct {
    char name[128];
    int ndim;
    int64_t shape[4];
    ck_weight *slot;    /* where the view into the store goes (NULL: staging) */
    int stage_slot;     /* >= 0: decoder tensor kept in staging index */
} wspec;

#define MAX_SPECS 1024
#define ENC "encoder.model."

typedef struct {
    wspec s[MAX_SPECS];
    int n;
} wlist;

static void add(wlist *l, ck_weight *slot, int ndim, int64_t a, int64_t b, int64_t c, int64_t d,
                const char *fmt, ...) __attribute__((format(printf, 8, 9)));
static void add(wlist *l, ck_weight *slot, int ndim, int64_t a, int64_t b, int64_t c, int64_t d,
                const char *fmt, ...) {
    if (l->n >= MAX_SPECS) return; /* cannot happen for CK_MAX_BLOCKS; checked by caller */
    wspec *w = &l->s[l->n++];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(w->name, sizeof w->name, fmt, ap);
    va_end(ap);
    w->ndim = ndim;
    w->shape[0] = a, w->shape[1] = b, w->shape[2] = c, w->shape[3] = d;
    w->slot = slot;
    w->stage_slot = -1;
}

static int64_t numel(const wspec *w) {
    int64_t n = 1;
    for (int i = 0; i < w->ndim; i++) n *= w->shape[i];
    return n;
}

/* A weight that is NaN or +-Inf (all exponent bits set) would load and key
 * without complaint into a wrong or blank matte: refuse it, naming the
 * tensor and its first bad element (flat, row-major). The scan ORs a flag
 * over blocks of integers so that it vectorizes; a bad block is rescanned. */
static ckey_status check_finite(const char *label, const wspec *w, const float *p, ckey_error *err) {
    const int64_t n = numel(w);
    for (int64_t b = 0; b < n; b += 4096) {
        const int64_t e = CK_MIN(n, b + 4096);
        uint32_t bad = 0;
        for (int64_t i = b; i < e; i++) {
            uint32_t u;
            memcpy(&u, p + i, sizeof u);
            bad |= (u & 0x7f800000u) == 0x7f800000u;
        }
        if (!bad) continue;
        for (int64_t i = b; i < e; i++) {
            if (isfinite(p[i])) continue;
            return ck_fail(err, CKEY_ERR_FORMAT, "%s: tensor '%s' element %lld is %s: the checkpoint is damaged",
                           label, w->name, (long long)i, isnan(p[i]) ? "NaN" : p[i] > 0 ? "+Inf" : "-Inf");
        }
    }
    return CKEY_OK;
}

/* Decoder tensors are read into staging and folded; these name their slots. */
enum { D_LIN_W = 0, D_LIN_B = 4, D_FUSE = 8, D_BN_W, D_BN_B, D_BN_M, D_BN_V, D_CLS_W, D_CLS_B, D_COUNT };

static void list_weights(const ck_config *c, ckey_model *m, wlist *l) {
    const int E = c->embed_dim, K = c->patch_kernel, R = c->ref_dim, D = c->dec_dim;
    add(l, &m->w.patch_w, 4, E, c->in_chans, K, K, ENC "patch_embed.proj.weight");
    add(l, &m->w.patch_b, 1, E, 0, 0, 0, ENC "patch_embed.proj.bias");
    add(l, &m->w.pos_embed, 3, 1, (int64_t)c->pos_grid * c->pos_grid, E, 0, ENC "pos_embed");
    ck_block_info bi[CK_MAX_BLOCKS];
    ck_config_blocks(c, bi);
    int nb = ck_config_num_blocks(c);
    int feat[CK_MAX_STAGES], nf = 0;
    for (int i = 0; i < nb; i++) {
        ck_block_w *b = &m->w.blocks[i];
        int d = bi[i].dim, o = bi[i].dim_out, h = o * c->mlp_ratio;
        if (bi[i].stage_end) feat[nf++] = o;
        add(l, &b->norm1_w, 1, d, 0, 0, 0, ENC "blocks.%d.norm1.weight", i);
        add(l, &b->norm1_b, 1, d, 0, 0, 0, ENC "blocks.%d.norm1.bias", i);
        if (d != o) {
            add(l, &b->proj_w, 2, o, d, 0, 0, ENC "blocks.%d.proj.weight", i);
            add(l, &b->proj_b, 1, o, 0, 0, 0, ENC "blocks.%d.proj.bias", i);
        }
        add(l, &b->qkv_w, 2, 3 * o, d, 0, 0, ENC "blocks.%d.attn.qkv.weight", i);
        add(l, &b->qkv_b, 1, 3 * o, 0, 0, 0, ENC "blocks.%d.attn.qkv.bias", i);
        add(l, &b->attn_proj_w, 2, o, o, 0, 0, ENC "blocks.%d.attn.proj.weight", i);
        add(l, &b->attn_proj_b, 1, o, 0, 0, 0, ENC "blocks.%d.attn.proj.bias", i);
        add(l, &b->norm2_w, 1, o, 0, 0, 0, ENC "blocks.%d.norm2.weight", i);
        add(l, &b->norm2_b, 1, o, 0, 0, 0, ENC "blocks.%d.norm2.bias", i);
        add(l, &b->fc1_w, 2, h, o, 0, 0, ENC "blocks.%d.mlp.fc1.weight", i);
        add(l, &b->fc1_b, 1, h, 0, 0, 0, ENC "blocks.%d.mlp.fc1.bias", i);
        add(l, &b->fc2_w, 2, o, h, 0, 0, ENC "blocks.%d.mlp.fc2.weight", i);
        add(l, &b->fc2_b, 1, o, 0, 0, 0, ENC "blocks.%d.mlp.fc2.bias", i);
    }
    static const char *const heads[2] = {"alpha_decoder", "fg_decoder"};
    for (int hd = 0; hd < 2; hd++) {
        int out = hd == 0 ? 1 : 3;
        for (int k = 0; k < 4; k++) {
            add(l, NULL, 2, D, feat[k], 0, 0, "%s.linear_c%d.proj.weight", heads[hd], k + 1);
            l->s[l->n - 1].stage_slot = hd * D_COUNT + D_LIN_W + k;
            add(l, NULL, 1, D, 0, 0, 0, "%s.linear_c%d.proj.bias", heads[hd], k + 1);
            l->s[l->n - 1].stage_slot = hd * D_COUNT + D_LIN_B + k;
        }
        add(l, NULL, 4, D, 4 * D, 1, 1, "%s.linear_fuse.weight", heads[hd]);
        l->s[l->n - 1].stage_slot = hd * D_COUNT + D_FUSE;
        static const char *const bn[4] = {"weight", "bias", "running_mean", "running_var"};
        for (int j = 0; j < 4; j++) {
            add(l, NULL, 1, D, 0, 0, 0, "%s.bn.%s", heads[hd], bn[j]);
            l->s[l->n - 1].stage_slot = hd * D_COUNT + D_BN_W + j;
        }
        add(l, NULL, 4, out, D, 1, 1, "%s.classifier.weight", heads[hd]);
        l->s[l->n - 1].stage_slot = hd * D_COUNT + D_CLS_W;
        add(l, NULL, 1, out, 0, 0, 0, "%s.classifier.bias", heads[hd]);
        l->s[l->n - 1].stage_slot = hd * D_COUNT + D_CLS_B;
    }
    ck_refiner_w *r = &m->w.ref;
    add(l, &r->stem_w, 4, R, 7, 3, 3, "refiner.stem.0.weight");
    add(l, &r->stem_b, 1, R, 0, 0, 0, "refiner.stem.0.bias");
    add(l, &r->stem_gn_w, 1, R, 0, 0, 0, "refiner.stem.1.weight");
    add(l, &r->stem_gn_b, 1, R, 0, 0, 0, "refiner.stem.1.bias");
    for (int i = 0; i < 8; i++) {
        int blk = i / 2 + 1, which = i % 2 + 1;
        add(l, &r->conv_w[i], 4, R, R, 3, 3, "refiner.res%d.conv%d.weight", blk, which);
        add(l, &r->conv_b[i], 1, R, 0, 0, 0, "refiner.res%d.conv%d.bias", blk, which);
        add(l, &r->gn_w[i], 1, R, 0, 0, 0, "refiner.res%d.gn%d.weight", blk, which);
        add(l, &r->gn_b[i], 1, R, 0, 0, 0, "refiner.res%d.gn%d.bias", blk, which);
    }
    add(l, &r->final_w, 4, 4, R, 1, 1, "refiner.final.weight");
    add(l, &r->final_b, 1, 4, 0, 0, 0, "refiner.final.bias");
}

/* Fold linear_fuse and eval-mode BatchNorm into each scale's projection:
 *   bn(fuse(cat[u4, u3, u2, u1])) = s * sum_k F_k (W_k c_k + b_k) + t
 * with F_k the k-th 256-column slice of linear_fuse (cat order c4, c3, c2, c1),
 * s = gamma / sqrt(var + eps), t = beta - mean * s. Bilinear upsampling is
 * linear and its weights sum to 1, so it commutes with the fold. */
static void fold_decoder(const ck_config *c, const int feat[4], float *const stage[2][D_COUNT],
                         float *const scale_w[4], float *const scale_b[4], float *cls_w, float *cls_b) {
    const int D = c->dec_dim;
    for (int hd = 0; hd < 2; hd++) {
        const float *fuse = stage[hd][D_FUSE];
        double s[1024], t[1024];
        for (int o = 0; o < D; o++) {
            double var = stage[hd][D_BN_V][o], g = stage[hd][D_BN_W][o];
            s[o] = g / sqrt(var + 1e-5);
            t[o] = stage[hd][D_BN_B][o] - stage[hd][D_BN_M][o] * s[o];
        }
        for (int k = 0; k < 4; k++) {
            int Ck = feat[k], slice = 3 - k; /* c1 is the last slice */
            const float *W = stage[hd][D_LIN_W + k], *b = stage[hd][D_LIN_B + k];
            float *ow = scale_w[k] + (size_t)hd * D * Ck, *ob = scale_b[k] + (size_t)hd * D;
            for (int o = 0; o < D; o++) {
                const float *f = fuse + (size_t)o * 4 * D + (size_t)slice * D;
                for (int j = 0; j < Ck; j++) {
                    double acc = 0;
                    for (int e = 0; e < D; e++) acc += (double)f[e] * W[(size_t)e * Ck + j];
                    ow[(size_t)o * Ck + j] = (float)(acc * s[o]);
                }
                double accb = 0;
                for (int e = 0; e < D; e++) accb += (double)f[e] * b[e];
                ob[o] = (float)(accb * s[o] + (k == 0 ? t[o] : 0.0));
            }
        }
        /* classifier: alpha row 0 reads channels [0, D), fg rows 1..3 read [D, 2D) */
        int out = hd == 0 ? 1 : 3, row0 = hd == 0 ? 0 : 1;
        for (int r = 0; r < out; r++) {
            float *row = cls_w + (size_t)(row0 + r) * 2 * D;
            memcpy(row + (size_t)hd * D, stage[hd][D_CLS_W] + (size_t)r * D, (size_t)D * sizeof(float));
            cls_b[row0 + r] = stage[hd][D_CLS_B][r];
        }
    }
}

ckey_status ck_model_build(const ck_config *cfg, const ck_tensor_source *src, ckey_model **out,
                           ckey_error *err) {
    *out = NULL;
    int nb = ck_config_num_blocks(cfg);
    if (nb < 1 || nb > CK_MAX_BLOCKS || cfg->num_stages != 4 || cfg->dec_dim > 1024 || cfg->dec_dim < 1 ||
        cfg->ref_dim < 1 || cfg->ref_dim > 64 || cfg->ref_groups < 1 || cfg->ref_dim % cfg->ref_groups ||
        cfg->head_dim < 1 || cfg->embed_dim % cfg->head_dim || cfg->in_chans != 4 ||
        cfg->pos_grid < 1 || cfg->pos_grid > 4096)
        return ck_fail(err, CKEY_ERR_MODEL, "%s: unsupported architecture (blocks %d, embed %d, head_dim %d, "
                       "decoder %d, refiner %d/%d groups)", src->label, nb, cfg->embed_dim, cfg->head_dim,
                       cfg->dec_dim, cfg->ref_dim, cfg->ref_groups);
    ckey_model *m = calloc(1, sizeof *m);
    wlist *l = calloc(1, sizeof *l);
    if (!m || !l) {
        free(m), free(l);
        return ck_fail(err, CKEY_ERR_NOMEM, "%s: out of memory", src->label);
    }
    m->cfg = *cfg;
    list_weights(cfg, m, l);
    ck_block_info bi[CK_MAX_BLOCKS];
    ck_config_blocks(cfg, bi);
    int feat[4], nf = 0;
    for (int i = 0; i < nb && nf < 4; i++)
        if (bi[i].stage_end) feat[nf++] = bi[i].dim_out;

    /* Store layout: every direct tensor, then the folded decoder. The raw
     * decoder tensors go to a separate staging block freed after folding. */
    size_t direct = 0, staged = 0, folded = 0;
    for (int i = 0; i < l->n; i++) {
        size_t n = (size_t)numel(&l->s[i]);
        m->num_params += (int64_t)n;
        if (l->s[i].slot) direct += n; else staged += n;
    }
    const int D2 = 2 * cfg->dec_dim;
    for (int k = 0; k < 4; k++) folded += (size_t)D2 * feat[k] + D2;
    folded += (size_t)4 * D2 + 4;
    m->store_floats = direct + folded;
    m->store = malloc((direct + folded) * sizeof(float));
    float *staging = malloc(staged * sizeof(float));
    if (!m->store || !staging) {
        free(staging);
        free(l);
        ckey_model_free(m);
        return ck_fail(err, CKEY_ERR_NOMEM, "%s: out of memory for %.1f MiB of weights", src->label,
                       (double)(direct + folded + staged) * 4 / (1 << 20));
    }
    float *stage[2][D_COUNT] = {{0}};
    float *p = m->store, *sp = staging;
    ckey_status st = CKEY_OK;
    for (int i = 0; i < l->n && st == CKEY_OK; i++) {
        wspec *w = &l->s[i];
        float *dst = w->slot ? p : sp;
        st = src->read(src->user, w->name, w->shape, w->ndim, dst, err);
        if (st == CKEY_OK) st = check_finite(src->label, w, dst, err);
        if (w->slot) {
            *w->slot = ck_weight_of(dst, CK_F32);
            p += numel(w);
        } else {
            stage[w->stage_slot / D_COUNT][w->stage_slot % D_COUNT] = dst;
            sp += numel(w);
        }
    }
    if (st == CKEY_OK) {
        float *f = m->store + direct, *sw[4], *sb[4];
        for (int k = 0; k < 4; k++) {
            sw[k] = f, f += (size_t)D2 * feat[k];
            sb[k] = f, f += D2;
            m->w.dec.scale_w[k] = ck_weight_of(sw[k], CK_F32);
            m->w.dec.scale_b[k] = ck_weight_of(sb[k], CK_F32);
        }
        float *cls_w = f, *cls_b = f + (size_t)4 * D2;
        m->w.dec.cls_w = ck_weight_of(cls_w, CK_F32);
        m->w.dec.cls_b = ck_weight_of(cls_b, CK_F32);
        memset(cls_w, 0, (size_t)4 * D2 * sizeof(float));
        fold_decoder(cfg, feat, stage, sw, sb, cls_w, cls_b);
    }
    m->dec_raw = staging; /* kept for `ckey convert` (a few MiB) */
    m->dec_raw_floats = staged;
    free(l);
    if (st != CKEY_OK) {
        ckey_model_free(m);
        return st;
    }
    *out = m;
    return CKEY_OK;
}

void ckey_model_free(ckey_model *m) {
    if (!m) return;
    free(m->store);
    free(m->dec_raw);
    free(m->source);
    free(m);
}

ckey_status ckey_model_save_safetensors(const ckey_model *m, const char *path, ckey_error *err) {
    if (!m || !path) return ck_fail(err, CKEY_ERR_INVALID_ARG, "ckey_model_save_safetensors: NULL argument");
    ckey_model shadow = *m; /* list_weights writes slots; aim them at a copy */
    wlist *l = calloc(1, sizeof *l);
    ck_st_entry *e = l ? calloc(MAX_SPECS, sizeof *e) : NULL;
    if (!l || !e) {
        free(l);
        free(e);
        return ck_fail(err, CKEY_ERR_NOMEM, "%s: out of memory", path);
    }
    list_weights(&m->cfg, &shadow, l);
    const float *staged = m->dec_raw;
    for (int i = 0; i < l->n; i++) {
        e[i].name = l->s[i].name;
        e[i].ndim = l->s[i].ndim;
        for (int d = 0; d < l->s[i].ndim; d++) e[i].shape[d] = l->s[i].shape[d];
        if (l->s[i].slot) {
            e[i].data = ck_wf32(*l->s[i].slot);
        } else {
            e[i].data = staged;
            staged += numel(&l->s[i]);
        }
    }
    char hd[16], gr[16];
    snprintf(hd, sizeof hd, "%d", m->cfg.head_dim);
    snprintf(gr, sizeof gr, "%d", m->cfg.ref_groups);
    const char *meta[] = {"ckey.head_dim", hd, "ckey.groups", gr, "format", "pt", NULL};
    ckey_status st = ck_safetensors_write(path, e, (size_t)l->n, meta, err);
    free(e);
    free(l);
    return st;
}
