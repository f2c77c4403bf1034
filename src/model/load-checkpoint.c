/* ckey_model_load: infer the architecture from a checkpoint's shapes, read
 * every tensor once into the model's float32 store, refuse anything missing,
 * misshapen or unexpected. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "ckpt/checkpoint.h"
#include "ckpt/json.h"
#include "model/model.h"

typedef struct {
    const ck_checkpoint *ck;
    const char *path;
    unsigned char *used; /* one flag per checkpoint tensor */
} ck_src;

static ckey_status ck_read(void *user, const char *name, const int64_t *shape, int ndim, float *dst,
                           ckey_error *err) {
    ck_src *s = user;
    const ck_tensor_info *t = ck_checkpoint_find(s->ck, name);
    if (!t) return ck_fail(err, CKEY_ERR_MODEL, "%s: tensor '%s' is missing", s->path, name);
    int same = t->ndim == ndim;
    for (int i = 0; same && i < ndim; i++) same = t->shape[i] == shape[i];
    if (!same) {
        char got[160] = "", want[160] = "";
        for (int i = 0; i < t->ndim; i++)
            snprintf(got + strlen(got), sizeof got - strlen(got), "%s%lld", i ? ", " : "", (long long)t->shape[i]);
        for (int i = 0; i < ndim; i++)
            snprintf(want + strlen(want), sizeof want - strlen(want), "%s%lld", i ? ", " : "", (long long)shape[i]);
        return ck_fail(err, CKEY_ERR_MODEL, "%s: tensor '%s' has shape [%s], expected [%s]", s->path, name, got, want);
    }
    for (size_t i = 0; i < ck_checkpoint_count(s->ck); i++)
        if (ck_checkpoint_at(s->ck, i) == t) s->used[i] = 1;
    ckey_status st = ck_tensor_to_f32(t, dst, err);
    ck_checkpoint_drop_pages((ck_checkpoint *)s->ck, t);
    return st;
}

static const ck_tensor_info *find(const ck_checkpoint *ck, const char *fmt, int i) {
    char name[160];
    snprintf(name, sizeof name, fmt, i);
    return ck_checkpoint_find(ck, name);
}

static ckey_status read_overrides(const ck_checkpoint *ck, const char *path, ck_config *cfg, ckey_error *err) {
    const char *keys[2] = {"head_dim", "groups"};
    int *dst[2] = {&cfg->head_dim, &cfg->ref_groups};
    /* Optional sidecar `<path>.json`: {"head_dim": N, "groups": N}, parsed by
     * the strict JSON reader (untrusted input like the checkpoint itself). */
    char side[4096];
    snprintf(side, sizeof side, "%s.json", path);
    ck_json js = {0};
    int have_js = 0;
    FILE *f = fopen(side, "rb");
    if (f) {
        char text[65536];
        size_t n = fread(text, 1, sizeof text, f);
        int too_big = n == sizeof text;
        fclose(f);
        if (too_big) return ck_fail(err, CKEY_ERR_FORMAT, "%s: sidecar larger than 64 KiB", side);
        ckey_status st = ck_json_parse(text, n, side, &js, err);
        if (st) return st;
        if (js.nodes[0].type != CK_JSON_OBJECT) {
            ck_json_free(&js);
            return ck_fail(err, CKEY_ERR_FORMAT, "%s: expected a JSON object", side);
        }
        have_js = 1;
    }
    for (int i = 0; i < 2; i++) {
        char mk[32];
        snprintf(mk, sizeof mk, "ckey.%s", keys[i]);
        const char *meta = ck_checkpoint_meta(ck, mk);
        int v = -1;
        if (meta) {
            char *end;
            long lv = strtol(meta, &end, 10);
            if (end == meta || *end || lv < 1 || lv > 100000) {
                if (have_js) ck_json_free(&js);
                return ck_fail(err, CKEY_ERR_FORMAT, "%s: metadata %s='%s' is not a positive integer", path, mk, meta);
            }
            v = (int)lv;
        } else if (have_js) {
            const ck_json_node *nd = ck_json_get(&js, &js.nodes[0], keys[i]);
            if (nd && (nd->type != CK_JSON_NUMBER || !nd->is_int || nd->ival < 1 || nd->ival > 100000)) {
                ck_json_free(&js);
                return ck_fail(err, CKEY_ERR_FORMAT, "%s: \"%s\" must be a positive integer", side, keys[i]);
            }
            if (nd) v = (int)nd->ival;
        }
        if (v > 0) *dst[i] = v;
    }
    if (have_js) ck_json_free(&js);
    return CKEY_OK;
}

static ckey_status infer_config(const ck_checkpoint *ck, const char *path, ck_config *cfg, ckey_error *err) {
    ck_config_default(cfg);
    const ck_tensor_info *pe = ck_checkpoint_find(ck, "encoder.model.patch_embed.proj.weight");
    const ck_tensor_info *pos = ck_checkpoint_find(ck, "encoder.model.pos_embed");
    const ck_tensor_info *dec = ck_checkpoint_find(ck, "alpha_decoder.linear_c1.proj.weight");
    const ck_tensor_info *ref = ck_checkpoint_find(ck, "refiner.stem.0.weight");
    const ck_tensor_info *fc1 = ck_checkpoint_find(ck, "encoder.model.blocks.0.mlp.fc1.weight");
    if (!pe || !pos || !dec || !ref || !fc1)
        return ck_fail(err, CKEY_ERR_MODEL, "%s: not a GreenFormer checkpoint (missing %s)", path,
                       !pe ? "encoder.model.patch_embed.proj.weight" : !pos ? "encoder.model.pos_embed"
                       : !dec ? "alpha_decoder.linear_c1.proj.weight" : !ref ? "refiner.stem.0.weight"
                       : "encoder.model.blocks.0.mlp.fc1.weight");
    if (pe->ndim != 4 || pe->shape[2] != pe->shape[3] || pe->shape[0] < 1 || pe->shape[0] > 8192)
        return ck_fail(err, CKEY_ERR_MODEL, "%s: patch_embed.proj.weight must be [E, 4, k, k]", path);
    cfg->embed_dim = (int)pe->shape[0];
    cfg->in_chans = (int)pe->shape[1];
    cfg->patch_kernel = (int)pe->shape[2];
    if (pos->ndim != 3 || pos->shape[0] != 1 || pos->shape[2] != pe->shape[0])
        return ck_fail(err, CKEY_ERR_MODEL, "%s: pos_embed must be [1, N, %d]", path, cfg->embed_dim);
    int64_t g = 1;
    while (g * g < pos->shape[1]) g++;
    if (g * g != pos->shape[1] || g > 4096)
        return ck_fail(err, CKEY_ERR_MODEL, "%s: pos_embed holds %lld tokens, not a square grid", path,
                       (long long)pos->shape[1]);
    cfg->pos_grid = (int)g;
    if (dec->ndim != 2 || ref->ndim != 4 || fc1->ndim != 2 || fc1->shape[1] < 1)
        return ck_fail(err, CKEY_ERR_MODEL, "%s: decoder/refiner/mlp weights have unexpected rank", path);
    cfg->dec_dim = (int)dec->shape[0];
    cfg->ref_dim = (int)ref->shape[0];
    cfg->mlp_ratio = (int)(fc1->shape[0] / fc1->shape[1]);
    if (cfg->mlp_ratio < 1 || fc1->shape[0] != (int64_t)cfg->mlp_ratio * fc1->shape[1])
        return ck_fail(err, CKEY_ERR_MODEL, "%s: mlp.fc1 shape is not a multiple of the dim", path);
    /* Blocks: count them; a stage starts at each block with an expand proj. */
    int nb = 0;
    while (nb < CK_MAX_BLOCKS + 1 && find(ck, "encoder.model.blocks.%d.norm1.weight", nb)) nb++;
    if (nb < 4 || nb > CK_MAX_BLOCKS)
        return ck_fail(err, CKEY_ERR_MODEL, "%s: %d encoder blocks (expected 4..%d)", path, nb, CK_MAX_BLOCKS);
    int stage = 0, start = 0;
    for (int i = 1; i < nb; i++) {
        if (find(ck, "encoder.model.blocks.%d.proj.weight", i)) {
            if (stage >= 3) return ck_fail(err, CKEY_ERR_MODEL, "%s: more than 4 stages", path);
            cfg->stage_blocks[stage++] = i - start;
            start = i;
        }
    }
    cfg->stage_blocks[stage] = nb - start;
    if (stage != 3) return ck_fail(err, CKEY_ERR_MODEL, "%s: %d stages found, GreenFormer has 4", path, stage + 1);
    ckey_status st = read_overrides(ck, path, cfg, err);
    if (st) return st;
    if (cfg->embed_dim % cfg->head_dim)
        return ck_fail(err, CKEY_ERR_MODEL, "%s: embed dim %d is not a multiple of head_dim %d", path,
                       cfg->embed_dim, cfg->head_dim);
    if (cfg->ref_dim % cfg->ref_groups)
        return ck_fail(err, CKEY_ERR_MODEL, "%s: refiner width %d is not a multiple of %d groups", path,
                       cfg->ref_dim, cfg->ref_groups);
    return CKEY_OK;
}

static int ends_with(const char *s, const char *suffix) {
    size_t a = strlen(s), b = strlen(suffix);
    return a >= b && strcmp(s + a - b, suffix) == 0;
}

ckey_status ckey_model_load(const char *path, ckey_model **out, ckey_error *err) {
    if (!out) return ck_fail(err, CKEY_ERR_INVALID_ARG, "ckey_model_load: out is NULL");
    *out = NULL;
    if (!path) return ck_fail(err, CKEY_ERR_INVALID_ARG, "ckey_model_load: path is NULL");
    ck_checkpoint *ck = NULL;
    ckey_status st = ck_checkpoint_open(path, &ck, err);
    if (st) return st;
    ck_config cfg;
    st = infer_config(ck, path, &cfg, err);
    ck_src src = {ck, path, NULL};
    if (!st) {
        src.used = calloc(ck_checkpoint_count(ck) + 1, 1);
        if (!src.used) st = ck_fail(err, CKEY_ERR_NOMEM, "%s: out of memory", path);
    }
    ckey_model *m = NULL;
    if (!st) {
        ck_tensor_source ts = {&src, path, ck_read};
        st = ck_model_build(&cfg, &ts, &m, err);
    }
    if (!st) {
        /* Everything the file holds must have been used, except BatchNorm's
         * step counter, which inference never reads. */
        for (size_t i = 0; i < ck_checkpoint_count(ck); i++) {
            const ck_tensor_info *t = ck_checkpoint_at(ck, i);
            if (src.used[i] || ends_with(t->name, "num_batches_tracked")) continue;
            st = ck_fail(err, CKEY_ERR_MODEL, "%s: unexpected tensor '%s' (not part of GreenFormer)", path, t->name);
            break;
        }
    }
    if (!st) {
        m->source = strdup(path);
        if (!m->source) st = ck_fail(err, CKEY_ERR_NOMEM, "%s: out of memory", path);
    }
    free(src.used);
    ck_checkpoint_close(ck);
    if (st) {
        ckey_model_free(m);
        return st;
    }
    *out = m;
    return CKEY_OK;
}
