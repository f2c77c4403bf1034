/* The CUDA backend's Cutie ops (backend/ops.h, the Cutie block), fp32:
 * convs as im2col of bounded chunks of output pixels into the workspace +
 * a GEMM with the bias and ReLU in its epilogue (cuBLASLt: cutie-gemm.cu;
 * cuBLAS and a bias / ReLU pass for a shape cuBLASLt has no algorithm for).
 * The GEMM follows the backend's conv_precision
 * (ckey_track_options.precision): fp32 math (no TF32); TF32 tensor-core
 * math; or fp16: the im2col chunk written in fp16 and the weight converted
 * to fp16 in the workspace, fp32 accumulation and fp32 output. Activations
 * stay fp32 in memory; the rest is the kernels of cutie-ops.cu. The
 * workspace (bound once by set_workspace, device memory) holds the im2col
 * chunk, the fp16 weight, the channel attention's means, the attention
 * mask's counts, mha's and the channel attention's partial results and the
 * memory read's scratch
 * (memory-read.cu); no op allocates.
 * Each op is checked against the CPU op in tests/test-cuda-cutie.c. */
#include "cuda/backend.h"
#include "cuda/kernels.h"
#include "cuda/op-status.h"

#ifdef CK_HAVE_CUDA

#include "cuda/cutie-kernels.h"

#define F(t) ck_f32(t)

/* COL_MIN: the im2col chunk holds at least this many floats (32 MiB), and
 * at least COL_PIX output pixels of the widest conv. MEANS: floats for the
 * channel attention's means (n maps x C channels: 255 objects x 256).
 * COUNTS: ints for the attention mask's per-object counts. MHA_PART: floats
 * for mha's partial results of split keys (2 MiB: 16 queries x 8 heads x
 * 120 splits of 32-dim heads). CA_PART: floats for channel_attention's
 * partial sums (doubles, 512 KiB: 256 channels x 256 row ranges). */
enum { COL_MIN = 1 << 23, COL_PIX = 256, MEANS = 65536, COUNTS = 256, MHA_PART = 1 << 19, CA_PART = 1 << 17 };

static size_t col_floats(const ck_op_needs *n) {
    const size_t w = (size_t)COL_PIX * (size_t)CK_MAX(n->conv_k, 1);
    return CK_MAX(w, (size_t)COL_MIN);
}

/* the fp16 copy of the widest conv's weight, in floats (two halves each),
 * whole 1 KiB blocks; none unless the convs run fp16 */
static size_t wh_floats(const ck_backend_config *bc, const ck_op_needs *n) {
    if (!bc || bc->conv_precision != CKEY_PRECISION_FP16) return 0;
    return ((size_t)(n->conv_w + 1) / 2 + 255) / 256 * 256;
}

size_t ck_cuda_ops_workspace_bytes(const ck_backend_config *bc, const ck_op_needs *n) {
    return (col_floats(n) + wh_floats(bc, n) + MEANS + COUNTS + MHA_PART + CA_PART) * sizeof(float) +
           ck_cuda_memory_read_bytes(n);
}

/* y[N, ldy] = relu?(x[N, K] W[Cout, K]^T (+ y) (+ bias)) at the backend's
 * conv arithmetic (fp16: x and w fp16): one cuBLASLt call with the bias and
 * ReLU in its epilogue, or, where cuBLASLt has no algorithm for the shape,
 * the GEMM and a bias / ReLU pass. */
static ckey_status conv_gemm(ck_cuda_state *s, const void *x, int64_t N, int K, const void *w, const float *bias,
                             int relu, float *y, int Cout, int ldy, int acc, ckey_error *err) {
    const ckey_precision p = s->cfg.conv_precision == CKEY_PRECISION_FP16   ? CKEY_PRECISION_FP16
                             : s->cfg.conv_precision == CKEY_PRECISION_TF32 ? CKEY_PRECISION_TF32
                                                                            : CKEY_PRECISION_FP32;
    int done = 0;
    ckey_status st = ck_cutie_gemm_run(s->cutie_no_lt ? NULL : s->cutie_gemm, p, x, N, K, w, bias, relu, y, Cout, ldy,
                                       acc, s->stream, &done, err);
    if (st || done) return st;
    if (p == CKEY_PRECISION_FP16)
        st = ck_cuda_gemm_f16_f32(s->blas, x, N, K, w, y, Cout, ldy, acc, s->stream, err);
    else if (p == CKEY_PRECISION_TF32)
        st = ck_cuda_gemm_tf32(s->blas, x, N, K, w, y, Cout, ldy, acc, s->stream, err);
    else
        st = ck_cuda_linear_ld_t(s->blas, x, N, K, w, NULL, y, Cout, ldy, acc, CK_F32, s->stream, err);
    if (!st && (bias || relu)) st = ck_cu_bias_relu(y, N, Cout, ldy, bias, relu, s->stream, err);
    return st;
}

void ck_cuda_cutie_set_workspace(ck_backend *be, void *scratch, const ck_op_needs *n) {
    ck_cuda_state *s = ST(be);
    s->cutie_col = scratch;
    s->cutie_col_floats = col_floats(n);
    s->cutie_wh = s->cutie_col + s->cutie_col_floats;
    s->cutie_wh_halves = 2 * wh_floats(&s->cfg, n);
    s->cutie_means = s->cutie_col + s->cutie_col_floats + wh_floats(&s->cfg, n);
    s->cutie_counts = (int *)(s->cutie_means + MEANS);
    s->cutie_mha = scratch ? (float *)(s->cutie_counts + COUNTS) : NULL;
    s->cutie_ca = scratch ? (double *)(void *)(s->cutie_mha + MHA_PART) : NULL;
    /* the memory read's scratch after those (an offset of whole 1 KiB blocks: col_floats,
     * wh_floats, MEANS + COUNTS, MHA_PART and CA_PART are multiples of 256 floats) */
    s->mr_scratch_bytes = ck_cuda_memory_read_bytes(n);
    s->mr_scratch = s->mr_scratch_bytes ? (void *)((float *)(void *)s->cutie_ca + CA_PART) : NULL;
    /* the conv GEMMs' plans, kept for the backend's life (without them the GEMM + bias pass) */
    if (!s->cutie_gemm && ck_cutie_gemm_create(s->blas_ws, s->blas_ws_bytes, &s->cutie_gemm, NULL)) s->cutie_gemm = NULL;
}

/* A conv's output size and strides (ck_conv2d's 0s resolved). */
typedef struct {
    int Ho, Wo, in_ld, out_ld, acc, relu;
    int64_t in_map, out_map, K, P;
} conv_shape;

static conv_shape conv_shape_of(const ck_conv2d *g) {
    conv_shape c;
    c.Ho = (g->H + 2 * g->pad - g->dil * (g->k - 1) - 1) / g->stride + 1;
    c.Wo = (g->W + 2 * g->pad - g->dil * (g->k - 1) - 1) / g->stride + 1;
    c.in_ld = g->in_ld ? g->in_ld : g->Cin, c.out_ld = g->out_ld ? g->out_ld : g->Cout;
    c.in_map = g->in_map ? g->in_map : (int64_t)g->H * g->W * c.in_ld;
    c.out_map = g->out_map ? g->out_map : (int64_t)c.Ho * c.Wo * c.out_ld;
    c.K = (int64_t)g->k * g->k * g->Cin, c.P = (int64_t)c.Ho * c.Wo;
    c.acc = (g->flags & CK_CONV_ACCUMULATE) != 0, c.relu = (g->flags & CK_CONV_RELU_OUT) != 0;
    return c;
}

/* The conv as chunks of `chunk` output pixels: im2col of the chunk into the
 * workspace, then a GEMM with the bias / ReLU (conv_gemm) against w. half:
 * the chunk and w fp16; else both fp32. */
static void conv_chunks(ck_backend *be, const ck_conv2d *g, const conv_shape *c, const float *x, const void *w,
                        const float *bias, float *y, int64_t chunk, int half) {
    ck_cuda_state *s = ST(be);
    const int relu_in = (g->flags & CK_CONV_RELU_IN) != 0;
    for (int img = 0; img < g->n; img++)
        for (int64_t p0 = 0; p0 < c->P; p0 += chunk) {
            const int64_t np = CK_MIN(chunk, c->P - p0);
            const float *in = x + img * c->in_map;
            float *o = y + img * c->out_map + p0 * c->out_ld;
            if (half)
                CHECKED(be, ck_cu_im2col_h(in, g->H, g->W, g->Cin, c->in_ld, g->k, g->stride, g->pad, g->dil, relu_in,
                                           c->Wo, p0, np, s->cutie_col, s->stream, EC));
            else
                CHECKED(be, ck_cu_im2col(in, g->H, g->W, g->Cin, c->in_ld, g->k, g->stride, g->pad, g->dil, relu_in,
                                         c->Wo, p0, np, s->cutie_col, s->stream, EC));
            CHECKED(be, conv_gemm(s, s->cutie_col, np, (int)c->K, w, bias, c->relu, o, g->Cout, c->out_ld, c->acc, EC));
        }
}

void ck_cuda_cutie_conv2d(ck_backend *be, const ck_conv2d *g, ck_tensor in, ck_weight W, ck_weight b, ck_tensor out) {
    ck_cuda_state *s = ST(be);
    const conv_shape c = conv_shape_of(g);
    const int64_t K = c.K, P = c.P;
    const float *x = F(in), *bias = WF(b);
    float *y = F(out);
    const int half = s->cfg.conv_precision == CKEY_PRECISION_FP16;
    if (W.type != CK_F32 && !(half && W.type == CK_F16)) {
        FAIL_ONCE(s, CKEY_ERR_INTERNAL, "cuda conv2d: a %s weight at %s", ck_dtype_name(W.type),
                  ckey_precision_name((ckey_precision)s->cfg.conv_precision));
        return;
    }
    if (K > INT32_MAX || P <= 0) {
        FAIL_ONCE(s, CKEY_ERR_INVALID_ARG, "cuda conv2d: a shape outside cuBLAS's int range");
        return;
    }
    if (half) {
        /* every conv (1x1 ones too) through an fp16 im2col chunk: twice the
         * pixels of the fp32 chunk in the same bytes; an fp32 weight rounded
         * into the workspace first (a tracker keeps its convs' weights in
         * fp16 as well, so that they take none) */
        const int64_t chunk = (int64_t)(2 * s->cutie_col_floats / (size_t)K);
        if (!s->cutie_col || chunk < 1 || (W.type == CK_F32 && (int64_t)g->Cout * K > (int64_t)s->cutie_wh_halves)) {
            FAIL_ONCE(s, CKEY_ERR_INTERNAL, "cuda conv2d (fp16): the workspace is unset or under the weight or one "
                      "pixel's taps");
            return;
        }
        const void *wh = W.data;
        if (W.type == CK_F32) {
            CHECKED(be, ck_cuda_convert(W.data, CK_F32, s->cutie_wh, CK_F16, (int64_t)g->Cout * K, s->stream, EC));
            wh = s->cutie_wh;
        }
        conv_chunks(be, g, &c, x, wh, bias, y, chunk, 1);
        return;
    }
    const float *w = W.data;
    if (g->k == 1 && g->stride == 1 && g->pad == 0 && !(g->flags & CK_CONV_RELU_IN) && c.in_ld == g->Cin) {
        /* a 1x1 conv is a GEMM over the input as it lies: all maps at once when they are packed */
        const int packed = c.in_map == P * c.in_ld && c.out_map == P * c.out_ld;
        for (int img = 0; img < (packed ? 1 : g->n); img++) {
            const int64_t rows = packed ? (int64_t)g->n * P : P;
            float *o = y + img * c.out_map;
            CHECKED(be, conv_gemm(s, x + img * c.in_map, rows, (int)K, w, bias, c.relu, o, g->Cout, c.out_ld, c.acc,
                                  EC));
        }
        return;
    }
    const int64_t chunk = (int64_t)(s->cutie_col_floats / (size_t)K);
    if (!s->cutie_col || chunk < 1) {
        FAIL_ONCE(s, CKEY_ERR_INTERNAL, "cuda conv2d: the workspace is unset or under one pixel's taps");
        return;
    }
    conv_chunks(be, g, &c, x, w, bias, y, chunk, 0);
}

void ck_cuda_cutie_maxpool3x3s2(ck_backend *be, ck_tensor in, int n, int H, int W, int C, ck_tensor out) {
    CHECKED(be, ck_cu_maxpool3x3s2(F(in), n, H, W, C, F(out), ST(be)->stream, EC));
}

void ck_cuda_cutie_resize_bilinear(ck_backend *be, ck_tensor in, int n, int H, int W, int C, ck_tensor add, int Ho, int Wo,
                               ck_tensor out) {
    CHECKED(be, ck_cu_resize_bilinear(F(in), n, H, W, C, F(add), Ho, Wo, F(out), ST(be)->stream, EC));
}

void ck_cuda_cutie_avgpool(ck_backend *be, ck_tensor in, int n, int H, int W, int C, int f, ck_tensor out, int out_ld) {
    CHECKED(be, ck_cu_avgpool(F(in), n, H, W, C, f, F(out), out_ld, ST(be)->stream, EC));
}

void ck_cuda_cutie_layer_norm(ck_backend *be, ck_tensor x, int64_t N, int C, ck_weight g, ck_weight b, float eps,
                          ck_tensor y) {
    CHECKED(be, ck_cu_layer_norm(F(x), N, C, WF(g), WF(b), eps, F(y), ST(be)->stream, EC));
}

void ck_cuda_cutie_mha(ck_backend *be, int n, ck_tensor q, int64_t Nq, int q_ld, ck_tensor k, ck_tensor v, int64_t Nk,
                   int kv_ld, int D, int heads, ck_tensor mask, ck_tensor out) {
    ck_cuda_state *s = ST(be);
    if (mask.data && mask.type != CK_U8) abort();
    CHECKED(be, ck_cu_mha(n, F(q), Nq, q_ld, F(k), F(v), Nk, kv_ld, D, heads, mask.data, F(out), s->cutie_mha,
                          s->cutie_mha ? MHA_PART : 0, s->stream, EC));
}

void ck_cuda_cutie_unary(ck_backend *be, int kind, ck_tensor x, int64_t n, ck_tensor y) {
    CHECKED(be, ck_cu_unary(kind, F(x), n, F(y), ST(be)->stream, EC));
}

void ck_cuda_cutie_add(ck_backend *be, ck_tensor a, int64_t na, ck_tensor b, int64_t nb, ck_tensor y) {
    CHECKED(be, ck_cu_add(F(a), na, F(b), nb, F(y), ST(be)->stream, EC));
}

void ck_cuda_cutie_copy_channels(ck_backend *be, ck_tensor src, int64_t n, int C, int src_ld, ck_tensor dst, int dst_ld) {
    CHECKED(be, ck_cu_copy_channels(F(src), n, C, src_ld, F(dst), dst_ld, ST(be)->stream, EC));
}

void ck_cuda_cutie_pad_normalize(ck_backend *be, ck_tensor src, int Hi, int Wi, int pad_t, int pad_l, int Hp, int Wp,
                                 ck_tensor dst) {
    CHECKED(be, ck_cu_pad_normalize(F(src), Hi, Wi, pad_t, pad_l, Hp, Wp, F(dst), ST(be)->stream, EC));
}

void ck_cuda_cutie_masks_with_others(ck_backend *be, ck_tensor m, int O, int64_t HW, ck_tensor dst, int dst_ld) {
    CHECKED(be, ck_cu_masks_with_others(F(m), O, HW, F(dst), dst_ld, ST(be)->stream, EC));
}

void ck_cuda_cutie_gru_update(ck_backend *be, ck_tensor h, ck_tensor v, int64_t HW, int D) {
    CHECKED(be, ck_cu_gru_update(F(h), F(v), HW, D, ST(be)->stream, EC));
}

void ck_cuda_cutie_channel_attention(ck_backend *be, ck_tensor x, int n, int64_t HW, int C, ck_weight w, int k,
                                 ck_tensor r, ck_tensor out) {
    ck_cuda_state *s = ST(be);
    if (!s->cutie_means || (int64_t)n * C > MEANS) {
        FAIL_ONCE(s, CKEY_ERR_INTERNAL, "cuda channel_attention: the workspace is unset or under n x C means");
        return;
    }
    CHECKED(be, ck_cu_channel_attention(F(x), n, HW, C, WF(w), k, F(r), F(out), s->cutie_means, s->cutie_ca,
                                        s->cutie_ca ? CA_PART / 2 : 0, s->stream, EC));
}

void ck_cuda_cutie_aggregate(ck_backend *be, ck_tensor logits, int O, int64_t HW, ck_tensor out) {
    CHECKED(be, ck_cu_aggregate(F(logits), O, HW, F(out), ST(be)->stream, EC));
}

void ck_cuda_cutie_softmax_planes(ck_backend *be, ck_tensor x, int C, int64_t HW) {
    CHECKED(be, ck_cu_softmax_planes(F(x), C, HW, ST(be)->stream, EC));
}

void ck_cuda_cutie_object_attn_mask(ck_backend *be, ck_tensor logits, int O, int64_t HW, int Q, ck_tensor mask) {
    ck_cuda_state *s = ST(be);
    if (mask.type != CK_U8) abort();
    if (!s->cutie_counts || O > COUNTS) {
        FAIL_ONCE(s, CKEY_ERR_INTERNAL, "cuda object_attn_mask: the workspace is unset or under O counts");
        return;
    }
    CHECKED(be, ck_cu_object_attn_mask(F(logits), O, HW, Q, mask.data, s->cutie_counts, s->stream, EC));
}

void ck_cuda_cutie_summary_pool(ck_backend *be, ck_tensor m, ck_tensor feat, ck_tensor logits, int64_t HW, int E, int Q,
                            ck_tensor out) {
    CHECKED(be, ck_cu_summary_pool(F(m), F(feat), F(logits), HW, E, Q, F(out), ST(be)->stream, EC));
}

void ck_cuda_cutie_summary_values(ck_backend *be, ck_tensor in, int64_t n, int E, ck_tensor out) {
    CHECKED(be, ck_cu_summary_values(F(in), n, E, F(out), ST(be)->stream, EC));
}

void ck_cuda_cutie_pos_encoding(ck_backend *be, int H, int W, int dim, float scale, float temperature, ck_tensor out) {
    CHECKED(be, ck_cu_pos_encoding(H, W, dim, scale, temperature, F(out), ST(be)->stream, EC));
}

/* Host fp32 into backend memory in stream order (ck_ops.write); it waits
 * for the copy, so the host buffer (pinned or not) may be reused at once. */
void ck_cuda_cutie_write(ck_backend *be, ck_tensor t, int64_t n, const float *host) {
    CHECKED(be, ck_cuda_copy_async(F(t), host, (size_t)n * sizeof(float), 1, ST(be)->stream, EC));
    CHECKED(be, ck_cuda_stream_sync(ST(be)->stream, EC));
}


#endif
