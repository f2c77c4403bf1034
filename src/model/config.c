/* Hyper-parameters of GreenFormer and the per-block schedule of timm's Hiera. */
#include "model/model.h"

void ck_config_default(ck_config *c) {
    c->in_chans = 4;
    c->embed_dim = 112;
    c->head_dim = 56;
    c->num_stages = 4;
    c->stage_blocks[0] = 2;
    c->stage_blocks[1] = 3;
    c->stage_blocks[2] = 16;
    c->stage_blocks[3] = 3;
    c->patch_kernel = 7;
    c->patch_stride = 4;
    c->patch_pad = 3;
    c->mask_unit = 8;
    c->q_pool = 3;
    c->mlp_ratio = 4;
    c->pos_grid = 512;
    c->dec_dim = 256;
    c->ref_dim = 64;
    c->ref_groups = 8;
}

int ck_config_num_blocks(const ck_config *c) {
    int n = 0;
    for (int s = 0; s < c->num_stages; s++) n += c->stage_blocks[s];
    return n;
}

/* Mirrors the block loop of timm Hiera.__init__: dims and heads double at
 * each stage start; q is pooled (stride 2x2 = 4 tokens) in the first block of
 * the first q_pool stages after stage 0, which also shrinks the flat
 * mask-unit size by 4; the attention kind lags one block behind the stage
 * (the first block of stage 2 still attends within mask units). */
void ck_config_blocks(const ck_config *c, ck_block_info *out) {
    int nb = ck_config_num_blocks(c);
    int dim = c->embed_dim, heads = c->embed_dim / c->head_dim;
    int flat_mu = c->mask_unit * c->mask_unit;
    int stage = 0, end = c->stage_blocks[0] - 1, pooled = 0;
    for (int i = 0; i < nb; i++) {
        int mask_unit_attn = stage < 2; /* mask_unit_attn = (True, True, False, False) */
        int dim_out = dim, qs = 1;
        if (i > 0 && i - 1 == end) {
            dim_out = dim * 2;
            heads *= 2;
            stage++;
            end += c->stage_blocks[stage];
            if (pooled < c->q_pool) {
                pooled++;
                qs = 4;
                flat_mu /= 4;
            }
        }
        out[i].dim = dim;
        out[i].dim_out = dim_out;
        out[i].heads = heads;
        out[i].q_stride = qs;
        out[i].window = flat_mu;
        out[i].mask_unit_attn = mask_unit_attn;
        out[i].stage = stage;
        out[i].stage_end = (i == end);
        dim = dim_out;
    }
}

ckey_status ck_config_check_size(const ck_config *c, int S, ckey_error *err) {
    int unit = c->patch_stride * c->mask_unit;
    if (S < unit || S % unit != 0)
        return ck_fail(err, CKEY_ERR_INVALID_ARG, "size %d: must be a positive multiple of %d", S, unit);
    if (S > 16384) return ck_fail(err, CKEY_ERR_INVALID_ARG, "size %d: larger than 16384", S);
    return CKEY_OK;
}
