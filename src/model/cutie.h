/* Cutie (hkchengrex/Cutie) inside ckey: the network's weights and shapes
 * (cutie.c) and the tracker's test hook. The public API is
 * include/ckey_track.h. */
#ifndef CK_CUTIE_H
#define CK_CUTIE_H

#include "ckey_track.h"
#include "core/tensor.h"

/* A convolution or linear layer, BatchNorm folded in: W [cout, k, k, cin]
 * (channels-last taps, repacked from PyTorch's [cout, cin, k, k]), b [cout]. */
typedef struct ck_cconv {
    ck_weight W, b;
    int cin, cout, k, stride, pad;
} ck_cconv;

/* A ResNet block: Bottleneck (c1 1x1, c2 3x3 with the stride, c3 1x1) or
 * BasicBlock (c1 3x3 with the stride, c2 3x3); down: the shortcut's 1x1. */
typedef struct ck_cblock {
    ck_cconv c1, c2, c3, down;
    int has_down;
} ck_cblock;

enum { CK_CUTIE_MAX_BLOCKS = 8, CK_CUTIE_MAX_OT = 8 };

/* A ResNet trunk up to stride 16 (conv1 + bn1, maxpool, 3 stages). */
typedef struct ck_cresnet {
    ck_cconv stem;
    ck_cblock blocks[3][CK_CUTIE_MAX_BLOCKS];
    int nblocks[3], bottleneck;
    int dims[3]; /* output channels of the stages: stride 4, 8, 16 */
} ck_cresnet;

/* CAResBlock (in == out): conv3x3(relu(conv3x3(relu(x)))) * channel gate + x. */
typedef struct ck_cares {
    ck_cconv c1, c2;
    ck_weight gate; /* conv1d [k], no bias */
    int gate_k;
} ck_cares;

/* GroupFeatureFusionBlock: x_tf(x) + g_tf(g), then two CAResBlocks. */
typedef struct ck_cfuse {
    ck_cconv x_tf, g_tf;
    ck_cares b1, b2;
} ck_cfuse;

/* nn.MultiheadAttention (q, k, v rows of in_proj as three linears) and the
 * LayerNorm before it (absent: ln_g.data NULL). */
typedef struct ck_cattn {
    ck_cconv q, k, v, out;
    ck_weight ln_g, ln_b;
} ck_cattn;

typedef struct ck_cotblock {
    ck_cattn read_pixel, self_attn, read_query;
    ck_weight ffn_ln_g, ffn_ln_b;
    ck_cconv ffn1, ffn2;
    ck_cares pixel_ffn;
} ck_cotblock;

typedef struct ck_cutie_cfg {
    int pixel_dim, key_dim, value_dim, sensory_dim, embed_dim;
    int ms_dims[3]; /* f16, f8, f4 channels */
    int up_dims[3];
    int num_queries, num_heads, ot_blocks, ff_dim;
    float pe_scale, pe_temperature;
} ck_cutie_cfg;

struct ckey_track_model {
    ck_cutie_cfg cfg;
    ck_cresnet pix_enc, mask_enc;
    ck_cconv pix_feat_proj, kp_proj, kp_key, kp_d, kp_e;
    ck_cfuse mask_fuse, pixel_fuse;
    ck_cconv mask_sensory;                     /* mask_encoder.sensory_update.transform */
    ck_cconv sensory_compress;                 /* pixel_fuser.sensory_compress */
    ck_cconv sum_in, sum_f1, sum_f2, sum_w1, sum_w2; /* object summarizer */
    ck_weight query_init, query_emb;           /* [Q, E] */
    ck_cconv s2q_init, s2q_emb, pixel_init, pixel_emb;
    ck_cotblock ot[CK_CUTIE_MAX_OT];
    ck_cconv mask_pred[CK_CUTIE_MAX_OT + 1];
    ck_cconv dec_f8, dec_f4;                   /* decoder_feat_proc */
    ck_cconv up1_c1, up1_c2, up1_down, up2_c1, up2_c2, up2_down, pred;
    int up1_has_down, up2_has_down;
    ck_cconv su_g16, su_g8, su_g4, su_transform; /* decoder sensory update */
    float **store; /* every weight's allocation */
    size_t *store_n; /* and its floats */
    int nstore, capstore;
    int64_t num_params;
    int64_t weight_bytes; /* what the weights' allocations took (the plan's weights) */
    int64_t max_conv_k, max_conv_w; /* largest k*k*cin and cout*k*k*cin (the ops' workspace) */
};

/* Test hook: called with each stage's output as it is computed (frame
 * index, a name of tests/fixtures/cutie/README.md's taps, a host copy of
 * its n floats in the tracker's layout: channels-last, objects first). */
typedef void (*ck_cutie_tap_fn)(void *user, int frame, const char *name, const float *data, int64_t n);
void ck_tracker_set_tap(ckey_tracker *t, ck_cutie_tap_fn fn, void *user);

/* Test hook: run the pixel encoder, the decoder and the mask encoder in
 * these numbers of row bands (at least 1; at most the stride-16 rows)
 * instead of the arena budget's choice; before the first step. */
void ck_tracker_set_bands(ckey_tracker *t, int encode, int decode, int memorize);

/* The tracker's backend (tests: to set a backend's own switches). */
struct ck_backend *ck_tracker_backend(ckey_tracker *t);

/* Test hook: ckey_tracker_create with the device path's host side on any
 * backend: the weights copied into one block of backend memory and viewed
 * through a copy of the model, the frame and masks staged on the host and
 * written (ck_ops.write), the result cropped and resized by the ops and
 * read. On the CPU backend it checks that path against the fixtures
 * without a GPU. */
ckey_status ck_tracker_create_staged(const ckey_track_model *m, int32_t width, int32_t height,
                                     const ckey_track_options *opt, ckey_tracker **out, ckey_error *err);

/* ckey_track_plan_memory for a first frame of first_objects objects (0:
 * max_objects), the rest of max_objects to be added by later masks. */
ckey_status ck_track_plan_memory_first(const ckey_track_model *m, int32_t width, int32_t height,
                                       const ckey_track_options *opt, int32_t first_objects, ckey_track_memory *out,
                                       ckey_error *err);

/* The same for ck_tracker_create_staged (its weights' copy and host staging). */
ckey_status ck_track_plan_memory_staged(const ckey_track_model *m, int32_t width, int32_t height,
                                        const ckey_track_options *opt, int32_t first_objects, ckey_track_memory *out,
                                        ckey_error *err);

#endif
