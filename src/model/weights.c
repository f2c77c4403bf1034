/* Every weight slot of a ck_weights, for code that treats weights
 * uniformly (a backend remapping its copy into its own memory). */
#include "model/model.h"

int ck_weights_slots(ck_weights *w, ck_weight **out, int max) {
    int n = 0;
#define S(x) ((x).data && n < max ? (void)(out[n++] = &(x)) : (void)0)
    S(w->patch_w), S(w->patch_b), S(w->pos_embed);
    for (int i = 0; i < CK_MAX_BLOCKS; i++) {
        ck_block_w *b = &w->blocks[i];
        S(b->norm1_w), S(b->norm1_b), S(b->proj_w), S(b->proj_b), S(b->qkv_w), S(b->qkv_b);
        S(b->attn_proj_w), S(b->attn_proj_b), S(b->norm2_w), S(b->norm2_b), S(b->fc1_w), S(b->fc1_b);
        S(b->fc2_w), S(b->fc2_b), S(b->fc1_colsum);
    }
    for (int k = 0; k < 4; k++) S(w->dec.scale_w[k]), S(w->dec.scale_b[k]);
    S(w->dec.cls_w), S(w->dec.cls_b);
    ck_refiner_w *r = &w->ref;
    S(r->stem_w), S(r->stem_b), S(r->stem_gn_w), S(r->stem_gn_b), S(r->final_w), S(r->final_b);
    for (int i = 0; i < 8; i++) S(r->conv_w[i]), S(r->conv_b[i]), S(r->gn_w[i]), S(r->gn_b[i]);
#undef S
    return n;
}
