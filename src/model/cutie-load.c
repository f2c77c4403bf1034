/* Loading a Cutie checkpoint (the official cutie-base-mega.pth layout: a
 * plain state dict, cutie/model/cutie.py's module names). Every width and
 * block count comes from the tensor shapes; BatchNorm (eval statistics, eps
 * 1e-5) is folded into the conv before it; conv taps are repacked
 * channels-last for the ops (backend/ops.h conv2d). */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "ckpt/checkpoint.h"
#include "ckpt/json.h"
#include "core/core.h"
#include "model/cutie.h"

/* Names are built from bounded prefixes; a truncated one would only fail its lookup. */
#pragma GCC diagnostic ignored "-Wformat-truncation"

typedef struct {
    ck_checkpoint *ck;
    const char *path;
    ckey_track_model *m;
    ckey_error *err;
} loader;

static float *keep(loader *L, size_t n) {
    ckey_track_model *m = L->m;
    if (m->nstore == m->capstore) {
        int cap = m->capstore ? 2 * m->capstore : 256;
        float **s = realloc(m->store, (size_t)cap * sizeof *s);
        if (!s) return NULL;
        m->store = s;
        size_t *sn = realloc(m->store_n, (size_t)cap * sizeof *sn);
        if (!sn) return NULL;
        m->store_n = sn, m->capstore = cap;
    }
    float *p = malloc(n * sizeof(float) + 64);
    if (p) m->store_n[m->nstore] = n, m->store[m->nstore++] = p, m->weight_bytes += (int64_t)(n * sizeof(float) + 64);
    return p;
}

static const ck_tensor_info *find(loader *L, const char *name) { return ck_checkpoint_find(L->ck, name); }

/* Tensor `name` as fp32 into memory the model owns; shape checked when want
 * (ndim dims, -1 for any). */
static ckey_status get(loader *L, const char *name, int ndim, const int64_t *want, float **out,
                       const ck_tensor_info **info) {
    const ck_tensor_info *t = find(L, name);
    if (!t) return ck_fail(L->err, CKEY_ERR_MODEL, "%s: tensor '%s' is missing (not a Cutie checkpoint?)", L->path, name);
    if (t->ndim != ndim) return ck_fail(L->err, CKEY_ERR_MODEL, "%s: tensor '%s' has %d dims, expected %d", L->path, name, t->ndim, ndim);
    for (int i = 0; i < ndim; i++)
        if (want && want[i] >= 0 && t->shape[i] != want[i])
            return ck_fail(L->err, CKEY_ERR_MODEL, "%s: tensor '%s' dim %d is %lld, expected %lld", L->path, name, i,
                           (long long)t->shape[i], (long long)want[i]);
    float *p = keep(L, t->numel);
    if (!p) return ck_fail(L->err, CKEY_ERR_NOMEM, "out of memory loading %s", L->path);
    ckey_status st = ck_tensor_to_f32(t, p, L->err);
    if (st) return st;
    for (uint64_t i = 0; i < t->numel; i++)
        if (!isfinite(p[i]))
            return ck_fail(L->err, CKEY_ERR_FORMAT, "%s: tensor '%s' element %llu is not finite: the checkpoint is damaged",
                           L->path, name, (unsigned long long)i);
    L->m->num_params += (int64_t)t->numel;
    *out = p;
    if (info) *info = t;
    return CKEY_OK;
}

/* A conv (4-D weight) or linear (2-D weight) `w` with optional bias `b` and
 * optional BatchNorm prefix `bn`; cin, when >= 0, is checked. */
static ckey_status conv(loader *L, ck_cconv *c, const char *w, const char *b, const char *bn, int stride, int pad,
                        int cin) {
    const ck_tensor_info *t = find(L, w);
    if (!t) return ck_fail(L->err, CKEY_ERR_MODEL, "%s: tensor '%s' is missing (not a Cutie checkpoint?)", L->path, w);
    const int lin = t->ndim == 2;
    if (!lin && (t->ndim != 4 || t->shape[2] != t->shape[3]))
        return ck_fail(L->err, CKEY_ERR_MODEL, "%s: tensor '%s' is not a square conv or a linear weight", L->path, w);
    const int cout = (int)t->shape[0], ci = (int)t->shape[1], k = lin ? 1 : (int)t->shape[2];
    if (cin >= 0 && ci != cin)
        return ck_fail(L->err, CKEY_ERR_MODEL, "%s: tensor '%s' has %d input channels, expected %d", L->path, w, ci, cin);
    float *W = NULL, *bias = NULL;
    const int64_t shape[4] = {cout, ci, k, k};
    ckey_status st = get(L, w, t->ndim, shape, &W, NULL);
    if (st) return st;
    float *out_b = keep(L, (size_t)cout);
    float *Wr = malloc((size_t)cout * ci * k * k * sizeof(float)); /* the repacked taps, copied back over W */
    if (!out_b || !Wr) {
        free(Wr);
        return ck_fail(L->err, CKEY_ERR_NOMEM, "out of memory loading %s", L->path);
    }
    if (b && (st = get(L, b, 1, shape, &bias, NULL))) {
        free(Wr);
        return st;
    }
    for (int o = 0; o < cout; o++) out_b[o] = bias ? bias[o] : 0.0f;
    float *scale = NULL;
    if (bn) {
        char n[256];
        float *g = NULL, *be = NULL, *mu = NULL, *var = NULL;
        const int64_t s1[1] = {cout};
#define BN(dst, suffix)                                   \
    snprintf(n, sizeof n, "%s.%s", bn, suffix);           \
    if ((st = get(L, n, 1, s1, &dst, NULL))) {            \
        free(Wr);                                         \
        return st;                                        \
    }
        BN(g, "weight") BN(be, "bias") BN(mu, "running_mean") BN(var, "running_var")
#undef BN
        scale = g; /* g becomes the scale, in place (the model owns it) */
        for (int o = 0; o < cout; o++) {
            scale[o] = (float)(g[o] / sqrt((double)var[o] + 1e-5));
            out_b[o] = (out_b[o] - mu[o]) * scale[o] + be[o];
        }
    }
    for (int o = 0; o < cout; o++)
        for (int i = 0; i < ci; i++)
            for (int y = 0; y < k; y++)
                for (int x = 0; x < k; x++)
                    Wr[(((size_t)o * k + y) * k + x) * ci + i] =
                        W[(((size_t)o * ci + i) * k + y) * k + x] * (scale ? scale[o] : 1.0f);
    memcpy(W, Wr, (size_t)cout * ci * k * k * sizeof(float));
    free(Wr);
    c->W = ck_weight_of(W, CK_F32);
    c->b = ck_weight_of(out_b, CK_F32);
    c->cin = ci, c->cout = cout, c->k = k, c->stride = stride, c->pad = pad;
    L->m->max_conv_k = CK_MAX(L->m->max_conv_k, (int64_t)k * k * ci);
    L->m->max_conv_w = CK_MAX(L->m->max_conv_w, (int64_t)cout * k * k * ci);
    return CKEY_OK;
}

/* The conv `prefix`.weight + .bias. */
static ckey_status convb(loader *L, ck_cconv *c, const char *prefix, int pad, int cin) {
    char w[256], b[256];
    snprintf(w, sizeof w, "%s.weight", prefix);
    snprintf(b, sizeof b, "%s.bias", prefix);
    return conv(L, c, w, b, NULL, 1, pad, cin);
}

static ckey_status resnet(loader *L, ck_cresnet *r, const char *pre, const char *const stage[3], int cin) {
    char w[256], bn[256];
    ckey_status st;
    snprintf(w, sizeof w, "%s.conv1.weight", pre);
    snprintf(bn, sizeof bn, "%s.bn1", pre);
    if ((st = conv(L, &r->stem, w, NULL, bn, 2, 3, cin))) return st;
    snprintf(w, sizeof w, "%s.%s.0.conv3.weight", pre, stage[0]);
    r->bottleneck = find(L, w) != NULL;
    int c = r->stem.cout;
    for (int s = 0; s < 3; s++) {
        int n = 0;
        for (;; n++) {
            snprintf(w, sizeof w, "%s.%s.%d.conv1.weight", pre, stage[s], n);
            if (!find(L, w)) break;
            if (n == CK_CUTIE_MAX_BLOCKS)
                return ck_fail(L->err, CKEY_ERR_UNSUPPORTED, "%s: %s.%s has more than %d blocks", L->path, pre, stage[s],
                               CK_CUTIE_MAX_BLOCKS);
            ck_cblock *b = &r->blocks[s][n];
            const int stride = n == 0 && s > 0 ? 2 : 1;
            char p[200];
            snprintf(p, sizeof p, "%s.%s.%d", pre, stage[s], n);
#define CV(dst, i, str, pad, ci)                                         \
    snprintf(w, sizeof w, "%s.conv%d.weight", p, i);                    \
    snprintf(bn, sizeof bn, "%s.bn%d", p, i);                           \
    if ((st = conv(L, dst, w, NULL, bn, str, pad, ci))) return st;
            if (r->bottleneck) {
                CV(&b->c1, 1, 1, 0, c) CV(&b->c2, 2, stride, 1, b->c1.cout) CV(&b->c3, 3, 1, 0, b->c2.cout)
            } else {
                CV(&b->c1, 1, stride, 1, c) CV(&b->c2, 2, 1, 1, b->c1.cout)
            }
#undef CV
            const int out = r->bottleneck ? b->c3.cout : b->c2.cout;
            snprintf(w, sizeof w, "%s.downsample.0.weight", p);
            snprintf(bn, sizeof bn, "%s.downsample.1", p);
            b->has_down = find(L, w) != NULL;
            if (b->has_down && (st = conv(L, &b->down, w, NULL, bn, stride, 0, c))) return st;
            if (!b->has_down && (stride != 1 || out != c))
                return ck_fail(L->err, CKEY_ERR_MODEL, "%s: %s has no downsample but changes shape", L->path, p);
            c = out;
        }
        if (n == 0) return ck_fail(L->err, CKEY_ERR_MODEL, "%s: %s.%s has no blocks", L->path, pre, stage[s]);
        r->nblocks[s] = n;
        r->dims[s] = c;
    }
    return CKEY_OK;
}

static ckey_status cares(loader *L, ck_cares *a, const char *pre, int dim) {
    char p[256];
    ckey_status st;
    snprintf(p, sizeof p, "%s.conv1", pre);
    if ((st = convb(L, &a->c1, p, 1, dim))) return st;
    snprintf(p, sizeof p, "%s.conv2", pre);
    if ((st = convb(L, &a->c2, p, 1, dim))) return st;
    if (a->c1.cout != dim || a->c2.cout != dim)
        return ck_fail(L->err, CKEY_ERR_UNSUPPORTED, "%s: %s changes width (not in Cutie)", L->path, pre);
    snprintf(p, sizeof p, "%s.conv.weight", pre);
    const ck_tensor_info *t = find(L, p);
    if (!t || t->ndim != 3) return ck_fail(L->err, CKEY_ERR_MODEL, "%s: tensor '%s' is missing or not 3-D", L->path, p);
    float *g = NULL;
    const int64_t s[3] = {1, 1, -1};
    if ((st = get(L, p, 3, s, &g, NULL))) return st;
    a->gate = ck_weight_of(g, CK_F32);
    a->gate_k = (int)t->shape[2];
    return CKEY_OK;
}

static ckey_status fuse(loader *L, ck_cfuse *f, const char *pre, int xdim, int gdim) {
    char p[256];
    ckey_status st;
    snprintf(p, sizeof p, "%s.distributor.x_transform", pre);
    if ((st = convb(L, &f->x_tf, p, 0, xdim))) return st;
    snprintf(p, sizeof p, "%s.distributor.g_transform", pre);
    if ((st = convb(L, &f->g_tf, p, 0, gdim))) return st;
    snprintf(p, sizeof p, "%s.block1", pre);
    if ((st = cares(L, &f->b1, p, f->x_tf.cout))) return st;
    snprintf(p, sizeof p, "%s.block2", pre);
    return cares(L, &f->b2, p, f->x_tf.cout);
}

/* nn.MultiheadAttention `pre` (in_proj split into q, k, v) with LayerNorm `ln` (NULL: none). */
static ckey_status attn(loader *L, ck_cattn *a, const char *pre, const char *ln, int E) {
    char p[256];
    ckey_status st;
    float *w = NULL, *b = NULL;
    const int64_t s2[2] = {3 * E, E}, s1[1] = {3 * E};
    snprintf(p, sizeof p, "%s.in_proj_weight", pre);
    if ((st = get(L, p, 2, s2, &w, NULL))) return st;
    snprintf(p, sizeof p, "%s.in_proj_bias", pre);
    if ((st = get(L, p, 1, s1, &b, NULL))) return st;
    ck_cconv *qkv[3] = {&a->q, &a->k, &a->v};
    for (int i = 0; i < 3; i++) {
        qkv[i]->W = ck_weight_of(w + (size_t)i * E * E, CK_F32);
        qkv[i]->b = ck_weight_of(b + (size_t)i * E, CK_F32);
        qkv[i]->cin = qkv[i]->cout = E, qkv[i]->k = qkv[i]->stride = 1, qkv[i]->pad = 0;
    }
    snprintf(p, sizeof p, "%s.out_proj", pre);
    if ((st = convb(L, &a->out, p, 0, E))) return st;
    a->ln_g = a->ln_b = ck_weight_of(NULL, CK_F32);
    if (ln) {
        const int64_t se[1] = {E};
        float *g = NULL, *bb = NULL;
        snprintf(p, sizeof p, "%s.weight", ln);
        if ((st = get(L, p, 1, se, &g, NULL))) return st;
        snprintf(p, sizeof p, "%s.bias", ln);
        if ((st = get(L, p, 1, se, &bb, NULL))) return st;
        a->ln_g = ck_weight_of(g, CK_F32), a->ln_b = ck_weight_of(bb, CK_F32);
    }
    return CKEY_OK;
}

static int sidecar_heads(const char *path) {
    char side[4096];
    const char *dot = strrchr(path, '.'), *slash = strrchr(path, '/');
    for (int pass = 0; pass < 2; pass++) {
        if (pass == 0)
            snprintf(side, sizeof side, "%s.json", path);
        else if (dot && (!slash || dot > slash))
            snprintf(side, sizeof side, "%.*s.json", (int)(dot - path), path);
        else
            break;
        FILE *f = fopen(side, "rb");
        if (!f) continue;
        char text[65536];
        size_t n = fread(text, 1, sizeof text, f);
        fclose(f);
        ck_json js = {0};
        if (n == sizeof text || ck_json_parse(text, n, side, &js, NULL)) return -1;
        int v = -1;
        const ck_json_node *nd = js.nodes[0].type == CK_JSON_OBJECT ? ck_json_get(&js, &js.nodes[0], "num_heads") : NULL;
        if (nd && nd->type == CK_JSON_NUMBER && nd->is_int && nd->ival >= 1 && nd->ival <= 1024) v = (int)nd->ival;
        ck_json_free(&js);
        return nd ? v : 0;
    }
    return 0;
}

static ckey_status load_all(loader *L, int heads) {
    ckey_track_model *m = L->m;
    ck_cutie_cfg *c = &m->cfg;
    ckey_status st;
    static const char *const pix_stages[3] = {"res2", "layer2", "layer3"};
    static const char *const mask_stages[3] = {"layer1", "layer2", "layer3"};
    if ((st = resnet(L, &m->pix_enc, "pixel_encoder", pix_stages, 3))) return st;
    for (int i = 0; i < 3; i++) c->ms_dims[i] = m->pix_enc.dims[2 - i];
    if ((st = convb(L, &m->pix_feat_proj, "pix_feat_proj", 0, c->ms_dims[0]))) return st;
    c->pixel_dim = m->pix_feat_proj.cout;
    if ((st = convb(L, &m->kp_proj, "key_proj.pix_feat_proj", 0, c->ms_dims[0]))) return st;
    if ((st = convb(L, &m->kp_key, "key_proj.key_proj", 1, m->kp_proj.cout))) return st;
    if ((st = convb(L, &m->kp_d, "key_proj.d_proj", 1, m->kp_proj.cout))) return st;
    if ((st = convb(L, &m->kp_e, "key_proj.e_proj", 1, m->kp_proj.cout))) return st;
    c->key_dim = m->kp_key.cout;
    if (m->kp_d.cout != 1 || m->kp_e.cout != c->key_dim)
        return ck_fail(L->err, CKEY_ERR_MODEL, "%s: key projection shapes disagree", L->path);
    if ((st = resnet(L, &m->mask_enc, "mask_encoder", mask_stages, 5))) return st;
    if ((st = fuse(L, &m->mask_fuse, "mask_encoder.fuser", c->pixel_dim, m->mask_enc.dims[2]))) return st;
    c->value_dim = m->mask_fuse.x_tf.cout;
    if ((st = convb(L, &m->mask_sensory, "mask_encoder.sensory_update.transform", 1, -1))) return st;
    c->sensory_dim = m->mask_sensory.cout / 3;
    if (m->mask_sensory.cin != c->value_dim + c->sensory_dim || m->mask_sensory.cout != 3 * c->sensory_dim)
        return ck_fail(L->err, CKEY_ERR_MODEL, "%s: mask encoder sensory update shapes disagree", L->path);
    if ((st = convb(L, &m->sensory_compress, "pixel_fuser.sensory_compress", 0, c->sensory_dim + 2))) return st;
    if ((st = fuse(L, &m->pixel_fuse, "pixel_fuser.fuser", c->pixel_dim, c->value_dim))) return st;
    c->embed_dim = m->pixel_fuse.x_tf.cout;
    const int E = c->embed_dim;
    /* object summarizer */
    if ((st = convb(L, &m->sum_in, "object_summarizer.input_proj", 0, c->value_dim))) return st;
    if ((st = convb(L, &m->sum_f1, "object_summarizer.feature_pred.0", 0, E))) return st;
    if ((st = convb(L, &m->sum_f2, "object_summarizer.feature_pred.2", 0, E))) return st;
    if ((st = convb(L, &m->sum_w1, "object_summarizer.weights_pred.0", 0, E))) return st;
    if ((st = convb(L, &m->sum_w2, "object_summarizer.weights_pred.2", 0, E))) return st;
    c->num_queries = m->sum_w2.cout;
    /* object transformer */
    const int64_t sq[2] = {c->num_queries, E};
    float *qi = NULL, *qe = NULL;
    if ((st = get(L, "object_transformer.query_init.weight", 2, sq, &qi, NULL))) return st;
    if ((st = get(L, "object_transformer.query_emb.weight", 2, sq, &qe, NULL))) return st;
    m->query_init = ck_weight_of(qi, CK_F32), m->query_emb = ck_weight_of(qe, CK_F32);
    if ((st = convb(L, &m->s2q_init, "object_transformer.summary_to_query_init", 0, E))) return st;
    if ((st = convb(L, &m->s2q_emb, "object_transformer.summary_to_query_emb", 0, E))) return st;
    if ((st = convb(L, &m->pixel_init, "object_transformer.pixel_init_proj", 0, E))) return st;
    if ((st = convb(L, &m->pixel_emb, "object_transformer.pixel_emb_proj", 0, E))) return st;
    int nb = 0;
    for (;; nb++) {
        char p[256], q[256];
        snprintf(p, sizeof p, "object_transformer.blocks.%d.read_from_pixel.cross_attn.in_proj_weight", nb);
        if (!find(L, p)) break;
        if (nb == CK_CUTIE_MAX_OT) return ck_fail(L->err, CKEY_ERR_UNSUPPORTED, "%s: too many transformer blocks", L->path);
        ck_cotblock *b = &m->ot[nb];
#define PRE(s) (snprintf(p, sizeof p, "object_transformer.blocks.%d.%s", nb, s), p)
#define PRE2(s) (snprintf(q, sizeof q, "object_transformer.blocks.%d.%s", nb, s), q)
        if ((st = attn(L, &b->read_pixel, PRE("read_from_pixel.cross_attn"), PRE2("read_from_pixel.norm"), E))) return st;
        if ((st = attn(L, &b->self_attn, PRE("self_attn.self_attn"), PRE2("self_attn.norm"), E))) return st;
        if ((st = attn(L, &b->read_query, PRE("read_from_query.cross_attn"),
                       find(L, PRE2("read_from_query.norm.weight")) ? PRE2("read_from_query.norm") : NULL, E)))
            return st;
        const int64_t se[1] = {E};
        float *g = NULL, *bb = NULL;
        if ((st = get(L, PRE("ffn.norm.weight"), 1, se, &g, NULL))) return st;
        if ((st = get(L, PRE("ffn.norm.bias"), 1, se, &bb, NULL))) return st;
        b->ffn_ln_g = ck_weight_of(g, CK_F32), b->ffn_ln_b = ck_weight_of(bb, CK_F32);
        if ((st = convb(L, &b->ffn1, PRE("ffn.linear1"), 0, E))) return st;
        if ((st = convb(L, &b->ffn2, PRE("ffn.linear2"), 0, b->ffn1.cout))) return st;
        if ((st = cares(L, &b->pixel_ffn, PRE("pixel_ffn.conv"), E))) return st;
        c->ff_dim = b->ffn1.cout;
#undef PRE
#undef PRE2
    }
    c->ot_blocks = nb;
    if (nb == 0) return ck_fail(L->err, CKEY_ERR_UNSUPPORTED, "%s: no object transformer blocks", L->path);
    for (int i = 0; i <= nb; i++) {
        char p[128];
        snprintf(p, sizeof p, "object_transformer.mask_pred.%d.1", i);
        if ((st = convb(L, &m->mask_pred[i], p, 0, E))) return st;
    }
    /* decoder */
    if ((st = convb(L, &m->dec_f8, "mask_decoder.decoder_feat_proc.transforms.0", 0, c->ms_dims[1]))) return st;
    if ((st = convb(L, &m->dec_f4, "mask_decoder.decoder_feat_proc.transforms.1", 0, c->ms_dims[2]))) return st;
    c->up_dims[0] = m->dec_f8.cout;
    if (c->up_dims[0] != E) return ck_fail(L->err, CKEY_ERR_MODEL, "%s: decoder width differs from embed_dim", L->path);
    if ((st = convb(L, &m->up1_c1, "mask_decoder.up_16_8.out_conv.conv1", 1, E))) return st;
    c->up_dims[1] = m->up1_c1.cout;
    if ((st = convb(L, &m->up1_c2, "mask_decoder.up_16_8.out_conv.conv2", 1, c->up_dims[1]))) return st;
    m->up1_has_down = find(L, "mask_decoder.up_16_8.out_conv.downsample.weight") != NULL;
    if (m->up1_has_down && (st = convb(L, &m->up1_down, "mask_decoder.up_16_8.out_conv.downsample", 0, E))) return st;
    if ((st = convb(L, &m->up2_c1, "mask_decoder.up_8_4.out_conv.conv1", 1, c->up_dims[1]))) return st;
    c->up_dims[2] = m->up2_c1.cout;
    if ((st = convb(L, &m->up2_c2, "mask_decoder.up_8_4.out_conv.conv2", 1, c->up_dims[2]))) return st;
    m->up2_has_down = find(L, "mask_decoder.up_8_4.out_conv.downsample.weight") != NULL;
    if (m->up2_has_down && (st = convb(L, &m->up2_down, "mask_decoder.up_8_4.out_conv.downsample", 0, c->up_dims[1])))
        return st;
    if (m->dec_f4.cout != c->up_dims[1])
        return ck_fail(L->err, CKEY_ERR_MODEL, "%s: decoder stride-4 projection width disagrees", L->path);
    if ((st = convb(L, &m->pred, "mask_decoder.pred", 1, c->up_dims[2]))) return st;
    const int CS = c->sensory_dim;
    if ((st = convb(L, &m->su_g16, "mask_decoder.sensory_update.g16_conv", 0, c->up_dims[0]))) return st;
    if ((st = convb(L, &m->su_g8, "mask_decoder.sensory_update.g8_conv", 0, c->up_dims[1]))) return st;
    if ((st = convb(L, &m->su_g4, "mask_decoder.sensory_update.g4_conv", 0, c->up_dims[2] + 1))) return st;
    if ((st = convb(L, &m->su_transform, "mask_decoder.sensory_update.transform", 1, m->su_g16.cout + CS))) return st;
    if (m->su_transform.cout != 3 * CS || m->su_g16.cout != CS)
        return ck_fail(L->err, CKEY_ERR_MODEL, "%s: decoder sensory update shapes disagree", L->path);
    if (c->value_dim != m->sensory_compress.cout || c->num_queries % 2)
        return ck_fail(L->err, CKEY_ERR_MODEL, "%s: pixel fuser or summarizer shapes disagree", L->path);
    c->num_heads = heads;
    if (E % heads) return ck_fail(L->err, CKEY_ERR_MODEL, "%s: embed_dim %d is not a multiple of %d heads", L->path, E, heads);
    c->pe_scale = 32.0f, c->pe_temperature = 128.0f; /* config/model/base.yaml pixel_pe_* */
    return CKEY_OK;
}

void ckey_track_model_free(ckey_track_model *m) {
    if (!m) return;
    for (int i = 0; i < m->nstore; i++) free(m->store[i]);
    free(m->store);
    free(m->store_n);
    free(m);
}

ckey_status ckey_track_model_open(const char *path, const ckey_track_model_options *opt, ckey_track_model **out,
                                  ckey_error *err) {
    *out = NULL;
    if (!path) return ck_fail(err, CKEY_ERR_INVALID_ARG, "no Cutie checkpoint path");
    int heads = opt && opt->num_heads > 0 ? opt->num_heads : 0;
    if (!heads) {
        heads = sidecar_heads(path);
        if (heads < 0) return ck_fail(err, CKEY_ERR_FORMAT, "%s: its JSON sidecar has no valid \"num_heads\"", path);
        if (!heads) heads = 8;
    }
    loader L = {.path = path, .err = err};
    ckey_status st = ck_checkpoint_open(path, &L.ck, err);
    if (st) return st;
    L.m = calloc(1, sizeof *L.m);
    if (!L.m) {
        ck_checkpoint_close(L.ck);
        return ck_fail(err, CKEY_ERR_NOMEM, "out of memory loading %s", path);
    }
    st = load_all(&L, heads);
    ck_checkpoint_close(L.ck);
    if (st) {
        ckey_track_model_free(L.m);
        return st;
    }
    *out = L.m;
    return CKEY_OK;
}
