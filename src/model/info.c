/* What a loaded model is: its hyper-parameters for callers (ckey info). */
#include <string.h>

#include "model/model.h"

ckey_status ckey_model_get_info(const ckey_model *m, ckey_model_info *info) {
    if (!m || !info) return CKEY_ERR_INVALID_ARG;
    memset(info, 0, sizeof *info);
    const ck_config *c = &m->cfg;
    info->embed_dim = c->embed_dim;
    info->head_dim = c->head_dim;
    info->num_blocks = ck_config_num_blocks(c);
    info->num_stages = c->num_stages;
    ck_block_info bi[CK_MAX_BLOCKS];
    ck_config_blocks(c, bi);
    for (int i = 0, s = 0; i < info->num_blocks; i++) {
        if (bi[i].stage_end) {
            info->stage_dims[s] = bi[i].dim_out;
            info->stage_heads[s] = bi[i].heads;
            s++;
        }
    }
    for (int s = 0; s < 4; s++) info->stage_blocks[s] = c->stage_blocks[s];
    info->decoder_dim = c->dec_dim;
    info->refiner_dim = c->ref_dim;
    info->refiner_groups = c->ref_groups;
    info->pos_embed_grid = c->pos_grid;
    info->native_size = c->pos_grid * c->patch_stride;
    info->num_params = m->num_params;
    return CKEY_OK;
}
