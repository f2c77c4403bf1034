/* GreenFormer: hyper-parameters, weights, and the forward pass written once
 * against the backend op table (src/backend/ops.h). */
#ifndef CK_MODEL_H
#define CK_MODEL_H

#include <stdint.h>

#include "ckey.h"
#include "core/core.h"
#include "core/tensor.h"

#define CK_MAX_STAGES 4
#define CK_MAX_BLOCKS 64

typedef struct ck_config {
    int in_chans;                     /* 4: RGB + hint */
    int embed_dim;                    /* 112 */
    int head_dim;                     /* 56 */
    int num_stages;                   /* 4 */
    int stage_blocks[CK_MAX_STAGES];  /* 2, 3, 16, 3 */
    int patch_kernel, patch_stride, patch_pad; /* 7, 4, 3 */
    int mask_unit;                    /* 8: mask units are 8x8 tokens */
    int q_pool;                       /* 3: stage transitions that pool q */
    int mlp_ratio;                    /* 4 */
    int pos_grid;                     /* 512: stored pos-embed grid side */
    int dec_dim;                      /* 256 */
    int ref_dim;                      /* 64 */
    int ref_groups;                   /* 8 */
} ck_config;

/* How a forward pass runs: the model layer's execution schedule, one of
 * several that compute the same result with different peaks (chosen by the
 * session: the fastest whose plan fits the budget).
 *   refiner_band = 0: the refiner on whole S x S maps (two maps of ref_dim
 *     channels live; the fastest, the default without a budget).
 *   refiner_band = B > 0: the refiner in bands of B output rows, no S x S map
 *     of ref_dim channels ever stored. Each GroupNorm's statistics are exact:
 *     pass k computes conv k over the whole image, band by band, recomputing
 *     each band (with its halo of the dilations below) from the refiner input,
 *     through convs 0..k-1 with the GroupNorm affines the earlier passes
 *     found, and sums GroupNorm k's statistics; a last pass writes the
 *     deltas. Offered only to backends with the banded ops (backend/ops.h). */
typedef struct ck_schedule {
    int refiner_band;
    /* encoder_chunks = C > 1: the encoder's mask-unit attention in C chunks
     * of windows, so that the backend's scratch holds a chunk's q, k, v
     * rather than all N tokens' (0 or 1: all at once; 4, 16 or 64 offered,
     * at most one window a chunk; CUDA shortens its MLP, patch and decoder
     * chunks with them). Offered only by
     * backends that stage them (ck_backend_i.encoder_chunks: CUDA; the CPU's
     * already streams windows through per-thread scratch). */
    int encoder_chunks;
    /* c1_on_host = 1: the encoder's first feature map c1, idle from the end
     * of stage 1 until the decoders, waits in host memory (the backend's
     * ck_ops.to_host / from_host; an exact copy). Offered only by backends
     * with those ops (CUDA). */
    int c1_on_host;
    /* pos_streamed = 1: the backend keeps the stored pos-embed (pos_grid^2
     * tokens) rather than one resized to the session's S/4 grid, and
     * patch_embed resizes it row by row as it adds it (ck_pos_embed_resize_rows:
     * the same values; CUDA: ck_cuda_pos_embed_rows, a chunk of pixels at a
     * time). Only where S/4 != pos_grid; offered only by backends that do it
     * (ck_backend_i.pos_streamed: the CPU and CUDA). */
    int pos_streamed;
    /* qkv_streamed = 1: the global-attention blocks never store qkv [N, 3 *
     * dim_out] nor the attention's output: the backend's attention_qkv
     * computes the heads' q, k and v from norm1's output as the attention
     * needs them and adds attn.proj of the output to the tokens (the CPU: k
     * and v into its packed keys and values, q and attn.proj per block of
     * queries and head; CUDA: a head's q, k and v at a time, attn.proj per
     * group of heads). Offered only by backends with that op (the CPU and
     * CUDA). */
    int qkv_streamed;
    /* decoder_band = B > 0: the decoders in bands of B rows of the S/4
     * logits: each band projects only the rows of c2..c4 its bilinear taps
     * read (a row or two more than the band's share) and fuses them with c1,
     * so no whole projection [Hk, Hk, 2 * dec_dim] is stored; c2..c4 stay
     * until the last band. Offered only by backends with decoder_fuse_rows
     * (the CPU and CUDA). */
    int decoder_band;
    /* transition_from_map = 1: a stage's tokens go once its feature map is
     * made (reroll) when the next block widens (the stage transitions), and
     * that block reads the map instead (ck_ops.mask_unit_attention_map, or
     * for a global block layernorm_map: the CPU). */
    int transition_from_map;
    /* norm1_from_map = 1 (with transition_from_map and qkv_streamed): a
     * widening global block that reads a feature map stores no norm1 output:
     * its linear_maxpool and attention take each run of rows' LayerNorm from
     * the map as they read it (ck_ops.linear_maxpool_map, attention_qkv_map:
     * the same values, computed once per read; the CPU). */
    int norm1_from_map;
    /* input_rgb = 1: after patch_embed, the input x [4, S, S] keeps only its
     * RGB planes (all the refiner reads of it): the hint plane's bytes are
     * free for later buffers (ck_shrink). Offered only by backends with
     * ck_backend_i.input_rgb (the CPU). */
    int input_rgb;
    /* reroll_in_place = 1 (with transition_from_map): at a stage transition
     * the feature map is made in the tokens' own buffer (ck_ops.reroll_inplace:
     * the same rows, permuted), so tokens and map are never both whole. */
    int reroll_in_place;
    /* encoder_band = B > 0 (with decoder_band): the blocks before the first
     * global one, which attend within mask units (each token a function of
     * its unit's pixels), run on bands of B token rows of the S/4 grid (whole
     * units), each band's tokens put into the first global block's input
     * (ck_ops.patch_embed_rows, copy_rows); no feature map of those stages
     * (c1, c2) is kept: each decoder band computes the units its rows need
     * again from x, which keeps its hint plane until the decoders are done
     * (input_rgb then releases it there), or with x_on_host waits in host
     * memory whole from the start, each band fetching the rows its patches
     * read. Offered only by backends with those ops (the CPU and CUDA). */
    int encoder_band;
    /* out_in_input = 1 (with refiner_band; with input_rgb only under
     * encoder_band, whose release of the hint plane it cancels): the refiner's
     * last pass writes the deltas [4, S, S] into the input x's own buffer,
     * band by band; the RGB rows it overwrites that later bands still read
     * are kept aside first (ck_ops.copy_rows: half the halo and a band). x is
     * then the pass's output. Only where x is fp32 (the CPU). */
    int out_in_input;
    /* c1_bands = 1 (with c1_on_host and decoder_band): c1 is never whole on
     * the device: rerolled band by band (decoder_band rows; ck_ops.reroll_rows)
     * into host memory, and fetched back a band at a time for the decoders'
     * bands. Offered only by backends with reroll_rows (CUDA). */
    int c1_bands;
    /* x_on_host = 1 (with refiner_band): after patch_embed the input's RGB
     * planes wait in host memory (after c1 there, when c1_on_host), and each
     * refiner band fetches the rows it reads (ck_ops.from_host,
     * refiner_input_rows given the band). Offered only by backends with
     * to_host / from_host (CUDA). */
    int x_on_host;
    /* out_on_host = 1 (with refiner_band): the refiner's last pass finishes
     * each band (ck_ops.finalize_rows: alpha and fg) in a band buffer
     * [4, B, S] and copies it into host memory (after c1 and x there): the
     * pass's output [4, S, S] is that host memory (ck_ops.host_ptr), never
     * whole on the device. Offered only by backends with those ops (CUDA). */
    int out_on_host;
} ck_schedule;

/* Per-block facts derived from the config (timm Hiera.__init__). */
typedef struct ck_block_info {
    int dim, dim_out, heads;
    int q_stride;      /* flattened: 4 where q is pooled, else 1 */
    int window;        /* flat mask-unit size after pooling (q tokens per window) */
    int mask_unit_attn;/* 1: attend within windows; 0: global */
    int stage;         /* stage the block belongs to */
    int stage_end;     /* 1 when a feature map is taken after this block */
} ck_block_info;

void ck_config_default(ck_config *c);
int ck_config_num_blocks(const ck_config *c);
void ck_config_blocks(const ck_config *c, ck_block_info *out /* [num_blocks] */);
/* Validate S for this config: multiple of patch_stride * mask_unit (32). */
ckey_status ck_config_check_size(const ck_config *c, int S, ckey_error *err);

/* The weights as typed views (core/tensor.h). In the loaded model every
 * weight is fp32 in the host store; a backend's copy (ck_backend_i.upload_weights)
 * holds the same fields in its own memory and types (the CUDA backend keeps
 * GEMM operands and some biases in 16 bits). */
typedef struct ck_block_w {
    ck_weight norm1_w, norm1_b;       /* [dim] */
    ck_weight proj_w, proj_b;         /* [dim_out, dim], [dim_out]; absent when dim == dim_out */
    ck_weight qkv_w, qkv_b;           /* [3*dim_out, dim], [3*dim_out] */
    ck_weight attn_proj_w, attn_proj_b; /* [dim_out, dim_out] */
    ck_weight norm2_w, norm2_b;       /* [dim_out] */
    ck_weight fc1_w, fc1_b;           /* [4*dim_out, dim_out] */
    ck_weight fc2_w, fc2_b;           /* [dim_out, 4*dim_out] */
    ck_weight fc1_colsum;             /* [4*dim_out], fp32: set in backend copies with the LN fold
                                       * (ln-fold.h; fc1_w is then W diag(norm2_w), fc1_b the folded
                                       * bias); else absent */
} ck_block_w;

/* Both decoder heads folded into one: the 1024-channel concatenation is a
 * sum of four projected, upsampled terms, so linear_fuse and BatchNorm fold
 * into each scale's linear layer at load (see load.c). */
typedef struct ck_decoder_w {
    ck_weight scale_w[4];   /* [2*dec_dim, C_k]: alpha rows then fg rows */
    ck_weight scale_b[4];   /* [2*dec_dim]; scale 0 also carries the BN shift */
    ck_weight cls_w;        /* [4, 2*dec_dim], block diagonal: alpha 1 row, fg 3 rows */
    ck_weight cls_b;        /* [4] */
} ck_decoder_w;

typedef struct ck_refiner_w {
    ck_weight stem_w, stem_b;         /* [ref_dim, 7, 3, 3], [ref_dim] */
    ck_weight stem_gn_w, stem_gn_b;
    ck_weight conv_w[8], conv_b[8];   /* res1.conv1, res1.conv2, res2.conv1, ... [ref_dim, ref_dim, 3, 3] */
    ck_weight gn_w[8], gn_b[8];
    ck_weight final_w, final_b;       /* [4, ref_dim], [4] */
} ck_refiner_w;

/* Every weight of the network. */
typedef struct ck_weights {
    ck_weight patch_w, patch_b;       /* [embed, in_chans, k, k], [embed] */
    ck_weight pos_embed;              /* [pos_grid*pos_grid, embed]; in a backend's copy: resized to
                                       * the session's S/4 grid */
    ck_block_w blocks[CK_MAX_BLOCKS];
    ck_decoder_w dec;
    ck_refiner_w ref;
} ck_weights;

/* Pointers to the slots of w that hold a weight, at most max; returns the
 * count (max when there may be more). */
enum { CK_MAX_WEIGHT_SLOTS = 3 + CK_MAX_BLOCKS * 15 + 10 + 38 };
int ck_weights_slots(ck_weights *w, ck_weight **out, int max);

struct ckey_model {
    ck_config cfg;
    char *source;             /* path it was loaded from */
    float *store;             /* every weight, float32, one allocation */
    size_t store_floats;
    float *dec_raw;           /* the decoders as stored, before folding (for convert) */
    size_t dec_raw_floats;
    int64_t num_params;       /* as stored in the checkpoint */
    ck_weights w;             /* fp32 views into the store */
};

/* Build a model from a tensor lookup (checkpoint or synthetic generator). */
typedef struct ck_tensor_source ck_tensor_source;
struct ck_tensor_source {
    void *user;
    const char *label;
    /* Copy tensor `name` as dense float32 into dst (numel floats) after
     * checking its shape. Returns CKEY_ERR_MODEL when absent/misshapen. */
    ckey_status (*read)(void *user, const char *name, const int64_t *shape, int ndim,
                        float *dst, ckey_error *err);
};

ckey_status ck_model_build(const ck_config *cfg, const ck_tensor_source *src, ckey_model **out,
                           ckey_error *err);

/* Full-size model with the seeded synthetic weights of docs/synthetic-weights.md. */
ckey_status ck_model_synthetic(const ck_config *cfg, ckey_model **out, ckey_error *err);
/* Value of the synthetic generator for (key, flat index). */
float ck_synth_value(const char *key, int ndim, const int64_t *shape, uint64_t index);
/* Synthetic model input x [4, S, S]. */
void ck_synth_input(int S, float *x);

/* pos-embed bicubic resize (PyTorch F.interpolate bicubic, align_corners=False,
 * A = -0.75): src [gs*gs, C] token-major -> dst [gd*gd, C]. */
void ck_pos_embed_resize(const float *src, int gs, int C, float *dst, int gd);
/* Rows [y0, y1) of that resize into dst [(y1 - y0)*gd, C]: each value
 * computed as ck_pos_embed_resize computes it. */
void ck_pos_embed_resize_rows(const float *src, int gs, int C, float *dst, int gd, int y0, int y1);

#endif
