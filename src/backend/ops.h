/* The backend op table. src/model/greenformer.c calls these in order; a
 * backend (src/cpu, src/cuda) fills the table. Every tensor is a typed view
 * (core/tensor.h) of backend memory (host for the CPU, device for CUDA),
 * carved from the session arena by the planner; weights are the backend's
 * copy (ck_backend_i.upload_weights). Activations (tokens, features, refiner
 * maps, the input x and the refiner input) are in the session's activation
 * type; logits, the output, GroupNorm statistics (fp64) and affines are fp32.
 * Layouts, densely packed:
 *   tokens   [N, C]        token-major, in Hiera's unrolled order
 *   features [H, W, C]     spatial, channels last (NHWC without the batch)
 *   images   [C, H, W]     channel-major (the model input, logits, outputs)
 *   refiner maps [R x S x S] in a layout of the backend's choosing
 * The planning pass runs the same sequence with no table at all. */
#ifndef CK_OPS_H
#define CK_OPS_H

#include "backend/cutie-math.h"
#include "model/model.h"

/* A backend's state. Each backend embeds this as the first member of its own
 * struct (src/cpu/cpu.h, src/cuda/backend.h). */
typedef struct ck_backend_i ck_backend_i;
typedef struct ck_backend {
    const ck_backend_i *iface;
} ck_backend;

/* The geometry of a 2-D convolution over channels-last maps (Cutie's convs,
 * BatchNorm folded into W and b at load). n maps in a batch; a pixel's
 * channels are in_ld (out_ld) floats apart, 0: dense (Cin, Cout); a map is
 * in_map (out_map) floats apart, 0: H*W*in_ld (Ho*Wo*out_ld). Output side
 * Ho = (H + 2 pad - dil (k - 1) - 1) / stride + 1, likewise Wo. */
enum {
    CK_CONV_RELU_IN = 1,    /* the input is read as relu(in) */
    CK_CONV_ACCUMULATE = 2, /* out += conv + b (a residual already in out) */
    CK_CONV_RELU_OUT = 4    /* out = relu(out) at the end */
};
typedef struct ck_conv2d {
    int n, H, W, Cin, Cout, k, stride, pad, dil, flags;
    int in_ld, out_ld;
    int64_t in_map, out_map;
} ck_conv2d;

/* norm1's output read from a feature map [H, H, C] (ck_schedule.norm1_from_map):
 * token row r is layernorm(g, b) of the map row reroll (k strides) put it in. */
typedef struct ck_ln_map {
    ck_tensor map;
    int H, k;
    ck_weight g, b;
} ck_ln_map;

/* What the largest of Cutie's ops in a pass needs of the backend's scratch
 * (ck_backend_i.ops_workspace_bytes, ck_ops.set_workspace). */
typedef struct ck_op_needs {
    int64_t conv_k;     /* largest k * k * Cin of a conv */
    int64_t conv_w;     /* largest Cout * k * k * Cin of a conv */
    int64_t attn_keys;  /* largest Nk of mha */
    int64_t mr_n;       /* memory_read: largest N, its CK and top_k */
    int mr_ck, mr_top_k;
    int64_t mr_usage_hw; /* memory_read: largest HW of a read that gives usage (0: none does) */
} ck_op_needs;

/* The elementwise maps of unary, CK_UNARY_*: backend/cutie-math.h. */

typedef struct ck_ops {
    /* Optional. The scratch of the phase of the pass that begins (ck_fwd.scratch_bytes,
     * inside the arena; the same address on every pass), or NULL, 0 when a phase
     * ends. Ops that need scratch are called only inside a phase that sized it. */
    void (*set_scratch)(ck_backend *be, void *scratch, size_t bytes);

    /* Copy n elements of t to host memory as fp32 (taps; not on the hot path). */
    void (*read)(ck_backend *be, ck_tensor t, int64_t n, float *host);

    /* Copy n fp32 host values into the fp32 tensor t (the tracker's frame and
     * masks; the host buffer may be reused once the call returns). */
    void (*write)(ck_backend *be, ck_tensor t, int64_t n, const float *host);

    /* Optional. Wait until every op issued so far has finished (profiling). */
    void (*sync)(ck_backend *be);

    /* Optional. The op `name` has been issued: the backend config's trace,
     * when it has one (ck_backend_config.trace). */
    void (*trace)(ck_backend *be, const char *name);

    /* x [4, S, S] -> tokens [(S/4)^2, E] in unrolled order (k strides):
     * conv 7x7/4 + bias + pos [(S/4)^2, E] (raster order). Under
     * ck_schedule.pos_streamed (a backend with ck_backend_i.pos_streamed),
     * pos is the stored [pos_grid^2, E] where pos_grid != S/4, resized as
     * it is added (ck_pos_embed_resize_rows). */
    void (*patch_embed)(ck_backend *be, const ck_config *c, ck_weight w, ck_weight b, ck_tensor x, int S,
                        ck_weight pos, int unroll_k, ck_tensor tokens);

    /* Optional (ck_schedule.encoder_band): token rows [y0, y0 + n) of the
     * S/4 grid alone (y0, n multiples of 2^unroll_k), unrolled as an n x S/4
     * image of their own: tokens [n * S/4, E], the values patch_embed gives
     * those tokens. x holds image rows [x_r0, x_r0 + x_rows) of each of its
     * planes (0 and S: the whole input; else a band the patches read). */
    void (*patch_embed_rows)(ck_backend *be, const ck_config *c, ck_weight w, ck_weight b, ck_tensor x, int x_r0,
                             int x_rows, int S, ck_weight pos, int unroll_k, int y0, int n, ck_tensor tokens);

    /* Optional (ck_schedule.encoder_band, out_in_input): for p < parts, rows
     * [p * ss + so, ... + n) of src -> rows [p * ds + do_, ... + n) of dst,
     * rows of C values (a band's tokens into the whole image's, image rows
     * between planes); src and dst may overlap within a part where the
     * backend offers out_in_input (the CPU; CUDA refuses an overlap). */
    void (*copy_rows)(ck_backend *be, ck_tensor src, int64_t ss, int64_t so, ck_tensor dst, int64_t ds, int64_t do_,
                      int parts, int64_t n, int C);

    /* The attention half of a mask-unit block, window by window:
     * xo = (expand ? maxpool_q(proj(norm1(x))) : x) + attn.proj(attn(norm1(x))).
     * x [N, dim]; xo [N / q_stride, dim_out] (xo == x when dim == dim_out). */
    void (*mask_unit_attention)(ck_backend *be, const ck_block_info *bi, const ck_block_w *w, ck_tensor x,
                                int64_t N, ck_tensor xo);

    /* Optional (ck_schedule.transition_from_map): the same with x given as
     * the feature map [H, H, dim] that reroll(x, H, H, k) made of it. */
    void (*mask_unit_attention_map)(ck_backend *be, const ck_block_info *bi, const ck_block_w *w, ck_tensor map,
                                    int H, int k, int64_t N, ck_tensor xo);

    /* y [N, C] = layernorm(x) (eps 1e-6). */
    void (*layernorm)(ck_backend *be, ck_tensor x, int64_t N, int C, ck_weight g, ck_weight b, ck_tensor y);

    /* Optional (ck_schedule.transition_from_map): y [N, C] in unrolled order
     * = layernorm of the feature map [H, H, C] that reroll(x, H, H, k) made. */
    void (*layernorm_map)(ck_backend *be, ck_tensor map, int H, int k, int64_t N, int C, ck_weight g, ck_weight b,
                          ck_tensor y);

    /* y [N, out] (+)= x [N, in] . W^T + b   (W [out, in], PyTorch layout). */
    void (*linear)(ck_backend *be, ck_tensor x, int64_t N, int in, ck_weight W, ck_weight b, ck_tensor y, int out,
                   int accumulate);

    /* y [N/qs, out] = max over s of (x [s*N/qs + n] . W^T + b). */
    void (*linear_maxpool)(ck_backend *be, ck_tensor x, int64_t N, int in, ck_weight W, ck_weight b, ck_tensor y,
                           int out, int qs);

    /* Global attention over all tokens, q max-pooled by qs, heads of head_dim:
     * qkv [N, 3*D] (q | k | v, head-major inside each); out [N/qs, D]. */
    void (*attention)(ck_backend *be, ck_tensor qkv, int64_t N, int D, int heads, int qs, ck_tensor out);

    /* Optional (ck_schedule.qkv_streamed): out [N/qs, D] += attention(qkv)
     * . Wp^T + bp (attn.proj, Wp [D, D]) with qkv = xn [N, in] . W^T + b (W
     * [3*D, in]): neither qkv nor the attention's output stored whole (the
     * CPU sums attn.proj head by head: equal within fp32 rounding). */
    void (*attention_qkv)(ck_backend *be, ck_tensor xn, int64_t N, int in, ck_weight W, ck_weight b, int D, int heads,
                          int qs, ck_weight Wp, ck_weight bp, ck_tensor out);

    /* Optional (ck_schedule.norm1_from_map): linear_maxpool and attention_qkv
     * with x / xn = layernorm(ln) of the feature map [H, H, in] that reroll
     * (k strides) made of the tokens, computed row by row as it is read. */
    void (*linear_maxpool_map)(ck_backend *be, const ck_ln_map *ln, int64_t N, int in, ck_weight W, ck_weight b,
                               ck_tensor y, int out, int qs);
    void (*attention_qkv_map)(ck_backend *be, const ck_ln_map *ln, int64_t N, int in, ck_weight W, ck_weight b, int D,
                              int heads, int qs, ck_weight Wp, ck_weight bp, ck_tensor out);

    /* x [N, C] += fc2(gelu(fc1(norm2(x)))), token chunk by chunk. */
    void (*mlp)(ck_backend *be, ck_tensor x, int64_t N, int C, const ck_block_w *w, int hidden);

    /* tokens [H*W, C] in unrolled order with k strides -> feat [H, W, C]. */
    void (*reroll)(ck_backend *be, ck_tensor tokens, int H, int W, int k, int C, ck_tensor feat);

    /* Optional (ck_schedule.reroll_in_place): the same with feat == tokens,
     * the rows permuted in place. */
    void (*reroll_inplace)(ck_backend *be, ck_tensor x, int H, int W, int k, int C);

    /* Optional (ck_schedule.c1_bands): rows [y0, y0 + n) of reroll's feat
     * into feat_rows [n, W, C]. */
    void (*reroll_rows)(ck_backend *be, ck_tensor tokens, int H, int W, int k, int C, int y0, int n,
                        ck_tensor feat_rows);

    /* Both decoders at S/4 = H1: logits [4, H1, H1] (fp32) = cls(relu(P1 + sum_k up(Pk))) + cls_b
     * where P1 = c1 . W1^T + b1 and Pk [Hk, Hk, 2*dec] are the projected
     * coarser scales (computed with linear). */
    void (*decoder_fuse)(ck_backend *be, const ck_config *c, const ck_decoder_w *w, ck_tensor c1, int H1, int C1,
                         const ck_tensor P[3], const int Hk[3], ck_tensor logits);

    /* Optional (ck_schedule.decoder_band): rows [y0, y0 + n) of those logits,
     * c1 holding rows c1_r0.. of the map (the whole map: 0; at least the
     * band's), P[s] rows r0[s].. of scale s (every row the band's bilinear
     * taps read). */
    void (*decoder_fuse_rows)(ck_backend *be, const ck_config *c, const ck_decoder_w *w, ck_tensor c1, int c1_r0,
                              int H1, int C1, const ck_tensor P[3], const int Hk[3], const int r0[3], int y0, int n,
                              ck_tensor logits);

    /* rin [7, S, S] = [x[0:3], sigmoid(up(logits))]. */
    void (*refiner_input)(ck_backend *be, ck_tensor x, ck_tensor logits, int S, ck_tensor rin);

    /* 3x3 conv, padding = dilation, S x S, into a refiner map (layout is the
     * backend's: CPU keeps maps channels-last). in_is_image: `in` is the
     * [Cin, S, S] refiner input (the stem); else a refiner map. When in_a/in_b
     * are given, each input value v is read as relu(a*v + b) (a pending
     * GroupNorm + ReLU; the backend may apply it to `in` in place first; zero
     * padding stays zero). Accumulates per-group sum and sum of squares of the
     * output into stats [groups][2]. out may equal in (the CPU: rows are
     * written back band by band once no later row needs them), or begin
     * ck_fwd.conv_shift_rows image rows before in (the CUDA backend: bands of
     * output rows go straight below the input rows that later bands read). */
    void (*conv3x3)(ck_backend *be, ck_tensor in, int in_is_image, int Cin, int S, int dil, ck_weight W,
                    ck_weight bias, const float *in_a, const float *in_b, ck_tensor out, int Cout, int groups,
                    double *stats);

    /* x = relu(a*x + b) per channel of a refiner map (C channels, HW pixels). */
    void (*affine_relu)(ck_backend *be, ck_tensor x, int C, int64_t HW, const float *a, const float *b);

    /* x = relu(x' + a*y + b) per channel, x' = x, or with pre_a / pre_b
     * relu(pre_a*x + pre_b) (a GroupNorm + ReLU still pending on x: the
     * stem's, which the first residual block's conv1 applied as it loaded). */
    void (*residual_affine_relu)(ck_backend *be, ck_tensor x, ck_tensor y, int C, int64_t HW, const float *a,
                                 const float *b, const float *pre_a, const float *pre_b);

    /* out [4, S, S] (fp32, channel-major) = mult * (final_w . x' + final_b), x a refiner map,
     * x' = x, or with y (the last residual block's sum, never stored by the CUDA
     * backend) relu(x + ra*y + rb) per channel, rounded to the storage type as
     * residual_affine_relu would store it; the backend may store x' in x. */
    void (*pointwise_conv)(ck_backend *be, ck_tensor x, ck_tensor y, const float *ra, const float *rb, int C,
                           int64_t HW, ck_weight W, ck_weight b, float mult, ck_tensor out, int Cout);

    /* out [4, S, S] = sigmoid(up(logits [4, S/4, S/4]) + out), both fp32. */
    void (*finalize)(ck_backend *be, ck_tensor logits, int S, ck_tensor out);

    /* Per-channel GroupNorm affine from accumulated stats: a = g / sqrt(var + eps),
     * b = beta - mean * a, over count = (C/groups) * HW values per group. */
    void (*groupnorm_affine)(ck_backend *be, const double *stats, int groups, int C, int64_t HW, ck_weight gamma,
                             ck_weight beta, float *a, float *b);

    /* zero n doubles (stats accumulators). */
    void (*zero_stats)(ck_backend *be, double *stats, int n);

    /* The banded refiner (model.h ck_schedule.refiner_band). Optional: a
     * backend that leaves them NULL runs only the whole-map schedule. A band
     * of a refiner map holding image rows [r0, r0 + n) is n * S * C elements,
     * rows in order (a backend offering bands keeps its maps row-contiguous,
     * as channels-last is), so rows [a, b) of it start at (a - r0) * S * C.
     *
     * rin = rows [y0, y0 + n) of refiner_input's [7, S, S], in a layout of
     * the backend's taking ck_pass_params.band_input_ch values a pixel
     * (7, the default: planes [7, n, S]; the CUDA tensor-core stem's: pixels
     * [n * S, 8]); only conv3x3_rows reads it. x holds the input's image
     * rows x_r0 .. of its RGB planes, x_rows * S elements apart (the whole
     * input: 0, S; ck_schedule.x_on_host: a band fetched from host memory). */
    void (*refiner_input_rows)(ck_backend *be, ck_tensor x, int x_r0, int x_rows, ck_tensor logits, int S, int y0,
                               int n, ck_tensor rin);

    /* conv3x3 (no pending affine) of a band: in holds image rows [in_r0,
     * in_r0 + in_n) of its map (in_is_image: a band of rin above),
     * out receives rows [out_r0, out_r0 + out_n) (a band of a refiner map).
     * Rows outside the image are zero padding; the caller guarantees that
     * every image row the output reads lies inside the input band. stats:
     * as conv3x3, or NULL (not wanted). */
    void (*conv3x3_rows)(ck_backend *be, ck_tensor in, int in_is_image, int Cin, int S, int dil, int in_r0,
                         int in_n, ck_weight W, ck_weight bias, ck_tensor out, int out_r0, int out_n, int Cout,
                         int groups, double *stats);

    /* Rows [y0, y0 + n) of out [Cout, S, S] (fp32) = mult * (W . x + b), x a
     * band of a refiner map holding those rows; out holds image rows
     * [out_r0, out_r0 + out_rows) of each of its planes (0 and S: whole). */
    void (*pointwise_conv_rows)(ck_backend *be, ck_tensor x, int C, int S, int y0, int n, ck_weight W, ck_weight b,
                                float mult, ck_tensor out, int out_r0, int out_rows, int Cout);

    /* Optional (ck_schedule.out_on_host): finalize on rows [y0, y0 + n):
     * out [4, n, S] (those rows of each plane) = sigmoid(up(logits) + out). */
    void (*finalize_rows)(ck_backend *be, ck_tensor logits, int S, int y0, int n, ck_tensor out);

    /* Optional (ck_schedule.out_on_host): the address of byte `off` of the
     * backend's host buffer (ck_pass_params.host_map_bytes), readable by
     * the caller once the pass is done. */
    void *(*host_ptr)(ck_backend *be, size_t off);

    /* Optional (ck_schedule.c1_on_host): copy `bytes` of t into the
     * backend's host buffer (ck_pass_params.host_map_bytes) at offset off,
     * and back. Stream-ordered with the ops around them. */
    void (*to_host)(ck_backend *be, ck_tensor t, size_t off, size_t bytes);
    void (*from_host)(ck_backend *be, size_t off, size_t bytes, ck_tensor t);

    /* Cutie's memory read (cutie/model/utils/memory_utils.py: get_similarity,
     * do_softmax with top_k, readout), fused. All fp32, positions as rows:
     *   mk [N, CK] memory keys,  ms [N] shrinkage (data NULL: none),
     *   qk [HW, CK] query keys,  qe [HW, CK] selection (data NULL: none),
     *   mv [N, C] memory values, out [HW, C]; C = objects x CV, object-major
     *   in a row (object o's channel c at o * CV + c).
     * For each query q and memory position n:
     *   with qe:    s = -sum_c qe mk^2 + 2 sum_c qe qk mk - sum_c qe qk^2
     *   without qe: s = -sum_c mk^2 + 2 sum_c qk mk      (no qk^2 term)
     *   s = s * ms[n] / sqrt(CK)   (without ms: s / sqrt(CK))
     * The top_k largest s of each query are kept (equal values: the lower n
     * first, so the set is one deterministic total order's first top_k),
     * w = softmax over them (computed from the largest, so it stays finite
     * for any finite s), out[q] = sum_n w_n mv[n]. top_k <= 0 or >= N: the
     * softmax is over all N (the official top_k = None). N >= 1. No N x HW
     * matrix is stored; the backend's scratch bounds what is live (CPU:
     * ck_cpu_memory_read_floats per thread; CUDA: ck_cuda_memory_read_bytes).
     * usage (data NULL: none) receives [N] each position's weight summed
     * over the queries (the long-term memory's usage count); it needs
     * top_k > 0 and a workspace set for it (ck_op_needs.mr_usage_hw), and
     * its sum does not depend on the thread count or scheduling (CPU: in
     * query order; CUDA: in 64-bit fixed point). Optional: NULL where the
     * backend has no implementation. */
    void (*memory_read)(ck_backend *be, ck_tensor mk, ck_tensor ms, ck_tensor qk, ck_tensor qe, int64_t N,
                        int64_t HW, int CK, ck_tensor mv, int C, int top_k, ck_tensor out, ck_tensor usage);
    /* ------------------------------------------------------------ Cutie
     * All fp32; maps channels-last [H, W, C], several objects' maps one
     * after another. The CPU backend (src/cpu/cutie-ops.c) and the CUDA
     * backend (src/cuda/cutie-ops.c, .cu) implement them; memory_read above
     * may be NULL on a backend, which then cannot run the tracker. */

    /* Bind the scratch of Cutie's ops: ck_backend_i.ops_workspace_bytes(needs)
     * bytes of backend memory, carved as the backend needs for ops within
     * `needs` (the CPU: a slice per thread, then packed weights). */
    void (*set_workspace)(ck_backend *be, void *scratch, const ck_op_needs *needs);

    /* out = conv2d(in) per g (W [Cout, k, k, Cin], b [Cout] or absent). A
     * linear layer is the 1x1 conv of a 1 x N map. out must not overlap in.
     * W is fp32, or fp16 on CUDA where the convs run at fp16. */
    void (*conv2d)(ck_backend *be, const ck_conv2d *g, ck_tensor in, ck_weight W, ck_weight b, ck_tensor out);

    /* out [n, Ho, Wo, C] = max-pool 3x3, stride 2, padding 1 of in [n, H, W, C]. */
    void (*maxpool3x3s2)(ck_backend *be, ck_tensor in, int n, int H, int W, int C, ck_tensor out);

    /* out [n, Ho, Wo, C] = bilinear resize of in [n, H, W, C] (PyTorch,
     * align_corners=False, source scale H/Ho, W/Wo) + add [Ho, Wo, C] (the
     * same for every map; data NULL: none). */
    void (*resize_bilinear)(ck_backend *be, ck_tensor in, int n, int H, int W, int C, ck_tensor add, int Ho,
                            int Wo, ck_tensor out);

    /* out [n, H/f, W/f, C] (pixels out_ld apart, 0: C) = mean of each f x f
     * block of in [n, H, W, C] (PyTorch's 'area' mode at an integer factor). */
    void (*avgpool)(ck_backend *be, ck_tensor in, int n, int H, int W, int C, int f, ck_tensor out, int out_ld);

    /* y [N, C] = layernorm(x) with eps (y may equal x). */
    void (*layer_norm)(ck_backend *be, ck_tensor x, int64_t N, int C, ck_weight g, ck_weight b, float eps,
                       ck_tensor y);

    /* Multi-head attention (the core of nn.MultiheadAttention, projections
     * excluded): q [Nq, D] rows q_ld apart, k and v [Nk, D] rows kv_ld apart;
     * head h is channels [h*D/heads, (h+1)*D/heads); scale 1/sqrt(D/heads);
     * mask [Nq, Nk] (1: blocked; data NULL: none; a row is never all blocked);
     * out [Nq, D] dense. n batches: q, k, v, mask and out advance by
     * Nq*q_ld, Nk*kv_ld, Nq*Nk and Nq*D. */
    void (*mha)(ck_backend *be, int n, ck_tensor q, int64_t Nq, int q_ld, ck_tensor k, ck_tensor v, int64_t Nk,
                int kv_ld, int D, int heads, ck_tensor mask, ck_tensor out);

    /* y [i] = f(x[i]) for CK_UNARY_* f (y may equal x). */
    void (*unary)(ck_backend *be, int kind, ck_tensor x, int64_t n, ck_tensor y);

    /* y [i] = a [i] + b [i mod nb] over na values (y may equal a). */
    void (*add)(ck_backend *be, ck_tensor a, int64_t na, ck_tensor b, int64_t nb, ck_tensor y);

    /* dst [p * dst_ld + c] = src [p * src_ld + c], c < C, over n pixels, in
     * order of p (so rows may move down within one buffer, dst before src). */
    void (*copy_channels)(ck_backend *be, ck_tensor src, int64_t n, int C, int src_ld, ck_tensor dst, int dst_ld);

    /* dst [Hp, Wp, 3] = the frame src [Hi, Wi, 3] padded with zeros (pad_t
     * rows above, pad_l columns left) and normalized (ck_cutie_normalize: the
     * padding becomes -mean/std). dst must not overlap src. */
    void (*pad_normalize)(ck_backend *be, ck_tensor src, int Hi, int Wi, int pad_t, int pad_l, int Hp, int Wp,
                          ck_tensor dst);

    /* For O objects' masks m [O, HW]: dst [o, p, 0] = m [o, p], dst [o, p, 1]
     * = clamp(sum_j m [j, p] - m [o, p], 0, 1) (the others), pixels dst_ld
     * apart, objects HW * dst_ld apart. */
    void (*masks_with_others)(ck_backend *be, ck_tensor m, int O, int64_t HW, ck_tensor dst, int dst_ld);

    /* The sensory GRU (modules.py _recurrent_update): v [HW, 3D] = forget |
     * update | new; h [HW, D] = sigmoid(f) h (1 - sigmoid(u)) + sigmoid(u) tanh(n), in place. */
    void (*gru_update)(ck_backend *be, ck_tensor h, ck_tensor v, int64_t HW, int D);

    /* CAResBlock's tail, per map of n: out [HW, C] = x * sigmoid(conv1d_k(mean_HW x)) + r
     * (r data NULL: none; out may equal x or r). w [k], no bias, padding (k-1)/2. */
    void (*channel_attention)(ck_backend *be, ck_tensor x, int n, int64_t HW, int C, ck_weight w, int k,
                              ck_tensor r, ck_tensor out);

    /* aggregate (tensor_utils.py) over O planes [O, HW] of logits:
     * p = sigmoid(logits); out [O+1, HW] = log(q / (1 - q)) of q = clamp([prod(1-p), p], 1e-7, 1-1e-7). */
    void (*aggregate)(ck_backend *be, ck_tensor logits, int O, int64_t HW, ck_tensor out);

    /* x [C, HW] = softmax over the C planes, per pixel, in place. */
    void (*softmax_planes)(ck_backend *be, ck_tensor x, int C, int64_t HW);

    /* The object transformer's attention mask (QueryTransformer._get_aux_mask)
     * from O objects' aux logits [O, HW]: with a = aggregate(logits), object
     * o is foreground at p when a[o+1, p] >= max_j a[j, p]; mask [O, Q, HW]:
     * queries q < Q/2 blocked off the foreground, the rest off the
     * background; a query row blocked everywhere is cleared. */
    void (*object_attn_mask)(ck_backend *be, ck_tensor logits, int O, int64_t HW, int Q, ck_tensor mask);

    /* The object summarizer's pooling (object_summarizer.py _weighted_pooling)
     * for one object: m [HW] its mask at the feature size; w = sigmoid(logits [HW, Q])
     * times m (q < Q/2) or 1 - m; out [Q, E+1] = (sum_p w feat [p], sum_p w). */
    void (*summary_pool)(ck_backend *be, ck_tensor m, ck_tensor feat, ck_tensor logits, int64_t HW, int E, int Q,
                         ck_tensor out);

    /* Object values from summaries: out [i, e] = in [i, e] / (in [i, E] + 1e-4)
     * over n rows of in [n, E+1] (QueryTransformer.forward). */
    void (*summary_values)(ck_backend *be, ck_tensor in, int64_t n, int E, ck_tensor out);

    /* The sine positional encoding (positional_encoding.py) at H x W:
     * out [H, W, 2 d], d = ceil(dim / 4) * 2: x terms then y terms, each
     * (sin, cos) pairs of pos * inv_freq, pos normalized to [0, scale]. */
    void (*pos_encoding)(ck_backend *be, int H, int W, int dim, float scale, float temperature, ck_tensor out);
} ck_ops;

#endif
