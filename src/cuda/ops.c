/* The CUDA op table: the forward in src/model/greenformer.c runs on the GPU
 * through these entries, composed from the kernels in src/cuda/ (the .cu
 * files) and cuBLAS, in fp32 or in 16 bits (the session's activation type;
 * each op is checked against the CPU op in tests/test-cuda.c, the whole
 * network against the PyTorch fixtures). Large intermediates use a device
 * scratch inside the arena, one per phase of the pass (ck_pass_params.
 * phase_scratch, handed over by set_scratch), sized by the
 * ck_cuda_*_scratch_elems functions. */
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include "cuda/backend.h"
#include "cuda/op-status.h"

#ifdef CK_HAVE_CUDA

/* element n of a dt-typed device buffer */
#define AT(s, p, n) ((void *)((char *)(p) + (size_t)(n) * ck_dtype_size((s)->dt)))

/* CONV_BAND: rows per band of a residual block's conv2 from S = 2048 on,
 * which writes band + REF_MAX_DIL rows before its input
 * (ck_cuda_conv_shift_rows, conv3x3_shifted), so the margin costs a band of
 * a map: 512-row bands at S >= 2048 keep the session within 1.5 GiB at S =
 * 2048; from S = 1024 one band covers the image (fewer, longer work items);
 * below, S / 4, so the parity tests' small S run several bands. */
enum { MLP_CHUNK = 32768, DEC_CHUNK = 16384, CONV_BAND = 512, REF_MAX_DIL = 8, PATCH_CHUNK = 32768 };

static int conv_band(int S) { return S < 1024 ? S / 4 : S < 2048 ? S : CONV_BAND; }

int ck_cuda_conv_shift_rows(int S) { return conv_band(S) + REF_MAX_DIL; }

/* cu_conv3x3 runs the tensor-core convs, which apply in_a / in_b as they
 * load, for a refiner of width R in storage dt; else its CUDA-core path
 * applies them to the input in place first. */
int ck_cuda_conv_loads_affine(int R, ck_dtype dt) { return ck_cuda_refiner_tc_ok(R, dt); }

/* Tokens per chunk of the MLP: a quarter with the encoder in chunks (a
 * budget; 70 -> 18 MiB of scratch at S = 2048 in 16 bits), a sixteenth in
 * over 16 chunks. */
static int64_t mlp_chunk(int chunks) { return chunks > 16 ? MLP_CHUNK / 16 : chunks > 1 ? MLP_CHUNK / 4 : MLP_CHUNK; }
/* Over 16 chunks (budgets at S = 3072 and up) the patch embedding's and the
 * decoders' chunks are a quarter as long too. */
static int64_t patch_chunk(int chunks) { return chunks > 16 ? PATCH_CHUNK / 4 : PATCH_CHUNK; }
static int64_t dec_chunk(int chunks) { return chunks > 16 ? DEC_CHUNK / 4 : DEC_CHUNK; }
/* linear_maxpool's pooled rows at a time (the whole projection [N, out] at
 * once up to 16 chunks: one GEMM). */
static int64_t pool_chunk(int chunks, int64_t Nq) { return chunks > 16 ? CK_MIN(Nq, (int64_t)MLP_CHUNK / 16) : Nq; }

/* Whether patch_embed resizes the stored pos-embed chunk by chunk
 * (ck_schedule.pos_streamed where S/4 is not the stored grid), and the
 * scratch elements of dt that a chunk of n pixels' fp32 rows take then. */
static int pos_streams(const ck_config *c, int S, const ck_schedule *sched) {
    return sched->pos_streamed && S / c->patch_stride != c->pos_grid;
}
static size_t pos_chunk_elems(const ck_config *c, int64_t n, ck_dtype dt) {
    return (size_t)n * c->embed_dim * sizeof(float) / ck_dtype_size(dt);
}

/* Windows per chunk of mask-unit attention when it runs in `chunks` chunks
 * (ck_schedule.encoder_chunks; 0 or 1: all nw at once). */
static int64_t mu_chunk_windows(int64_t nw, int chunks) { return chunks > 1 ? (nw + chunks - 1) / chunks : nw; }

/* The scratch of mask-unit attention on nwc windows of T tokens: all of them
 * at once, xn | q, k, v | att; in chunks, also the chunk's gathered tokens
 * (and, widening, its pooled shortcut) ahead of them. */
static size_t mu_scratch_elems(const ck_block_info *b, int64_t nwc, int chunked) {
    const int64_t T = (int64_t)b->window * b->q_stride, Nc = T * nwc, Nqc = Nc / b->q_stride;
    size_t s = (size_t)Nc * b->dim + (size_t)Nc * 3 * b->dim_out + (size_t)Nqc * b->dim_out;
    if (chunked) s += (size_t)Nc * b->dim + (b->dim != b->dim_out ? (size_t)Nqc * b->dim_out : 0);
    return s;
}

/* The scratch of attention_qkv (ck_schedule.qkv_streamed) over N tokens,
 * heads of hd, g heads a group: a head's q | k | v [N, 3 hd] and its output
 * [Nq, hd]; over one head a group, the group's outputs side by side [Nq, g hd]
 * too. */
static size_t qkv_streamed_elems(int64_t N, int64_t Nq, int hd, int g) {
    return (size_t)N * 3 * hd + (size_t)Nq * hd + (g > 1 ? (size_t)Nq * g * hd : 0);
}

size_t ck_cuda_encoder_scratch_elems(const ck_config *c, int S, const ck_schedule *sched, ck_dtype dt) {
    const int chunks = sched->encoder_chunks;
    const int64_t G = S / c->patch_stride;
    ck_block_info bi[CK_MAX_BLOCKS];
    ck_config_blocks(c, bi);
    const int nb = ck_config_num_blocks(c);
    int64_t N = G * G;
    size_t need = 0;
    for (int i = 0; i < nb; i++) {
        const ck_block_info *b = &bi[i];
        const int64_t Nq = N / b->q_stride;
        size_t s = 0;
        if (b->mask_unit_attn) { /* (cu_mask_unit_attention) */
            const int64_t T = (int64_t)b->window * b->q_stride, nw = N / T;
            s = mu_scratch_elems(b, mu_chunk_windows(nw, chunks), chunks > 1 && mu_chunk_windows(nw, chunks) < nw);
        }
        else if (b->dim != b->dim_out) /* linear_maxpool's projection of a chunk of pooled rows */
            s = (size_t)pool_chunk(chunks, Nq) * b->q_stride * b->dim_out;
        if (!b->mask_unit_attn && sched->qkv_streamed) /* attention_qkv, a head at a time */
            s = CK_MAX(s, qkv_streamed_elems(N, Nq, b->dim_out / b->heads, 1));
        need = CK_MAX(need, s);
        const int64_t ch = CK_MIN(Nq, mlp_chunk(chunks));
        need = CK_MAX(need, (size_t)ch * b->dim_out + (size_t)ch * b->dim_out * c->mlp_ratio);
        N = Nq;
    }
    need = CK_MAX(need, (size_t)dec_chunk(chunks) * 2 * c->dec_dim);
    /* patch_embed: a chunk's im2col and GEMM output (16 bits), then its pos-embed rows (pos_streamed) */
    const int64_t pc = CK_MIN(patch_chunk(chunks), G * G);
    const size_t patch = dt != CK_F32 ? (size_t)pc * (c->in_chans * c->patch_kernel * c->patch_kernel + c->embed_dim) : 0;
    need = CK_MAX(need, patch + (pos_streams(c, S, sched) ? pos_chunk_elems(c, pc, dt) : 0));
    return need;
}

size_t ck_cuda_stem_scratch_elems(const ck_config *c, int S, ck_dtype dt) {
    /* the tensor-core stem's input, repacked [S*S, 8]; the CUDA-core stem needs none */
    return ck_cuda_refiner_tc_ok(c->ref_dim, dt) ? (size_t)S * S * 8 : 0;
}


/* Fails the pass (once) when the current phase's scratch is under `elems`
 * elements of dt: the sizes above and the ops below disagree. */
static int scratch_ok(ck_cuda_state *s, size_t elems) {
    if (elems * ck_dtype_size(s->dt) <= s->scratch_bytes) return 1;
    FAIL_ONCE(s, CKEY_ERR_INTERNAL, "cuda: the phase's scratch (%zu bytes) is under the %zu an op needs",
              s->scratch_bytes, elems * ck_dtype_size(s->dt));
    return 0;
}

static void cu_set_scratch(ck_backend *be, void *scratch, size_t bytes) {
    ST(be)->scratch = scratch;
    ST(be)->scratch_bytes = bytes;
}

/* Patch embed of the grid rows pb->ty0 .. ty0 + th - 1 (x: pb's rows of the
 * input), unrolled as a th x G image: all of it where pb is the whole grid. */
static void patch_embed_band(ck_backend *be, const ck_config *c, ck_weight w, ck_weight b, const void *x,
                             const ck_patch_band *pb, int S, ck_weight pos, int k, void *tokens) {
    ck_cuda_state *s = ST(be);
    const int G = S / c->patch_stride, KK = c->in_chans * c->patch_kernel * c->patch_kernel;
    const int64_t first = (int64_t)pb->ty0 * G, total = first + (int64_t)pb->th * G,
                  pchunk = patch_chunk(s->cfg.sched.encoder_chunks), chunk = CK_MIN(pchunk, total - first);
    /* pos_streamed: pos is the stored grid; each chunk's rows are resized into the scratch, after
     * the chunk's im2col and GEMM output (16 bits) or at its start (fp32) */
    const int streams = pos_streams(c, S, &s->cfg.sched);
    const size_t pos_at = s->dt != CK_F32 ? (size_t)chunk * (KK + c->embed_dim) : 0;
    float *prow = streams ? AT(s, s->scratch, pos_at) : NULL;
    if (streams && !scratch_ok(s, pos_at + pos_chunk_elems(c, chunk, s->dt))) return;
    if (s->dt != CK_F32) { /* im2col + GEMM on tensor cores, pchunk output pixels at a time */
        if (!scratch_ok(s, (size_t)chunk * (KK + c->embed_dim))) return;
        for (int64_t p0 = first; p0 < total; p0 += pchunk) {
            const int64_t n = CK_MIN(pchunk, total - p0);
            void *col = s->scratch, *y = AT(s, col, (size_t)n * KK);
            CHECKED(be, ck_cuda_im2col_patch_band_t(x, pb, S, c->in_chans, c->patch_kernel, c->patch_stride,
                                                    c->patch_pad, p0, n, col, s->dt, s->stream, EC));
            CHECKED(be, ck_cuda_linear_t(s->blas, col, n, KK, w.data, NULL, y, c->embed_dim, 0, s->dt, s->stream, EC));
            if (streams)
                CHECKED(be, ck_cuda_pos_embed_rows(WF(pos), c->pos_grid, c->embed_dim, G, p0, n, prow, s->stream, EC));
            CHECKED(be, ck_cuda_patch_epilogue_band_t(y, pb, G, c->embed_dim, k, p0, n, WF(b), streams ? prow : WF(pos),
                                                      streams ? p0 : 0, tokens, s->dt, s->stream, EC));
        }
        return;
    }
    for (int64_t p0 = first; p0 < total; p0 += streams ? pchunk : total - first) {
        const int64_t n = streams ? CK_MIN(pchunk, total - p0) : total - first;
        if (streams)
            CHECKED(be, ck_cuda_pos_embed_rows(WF(pos), c->pos_grid, c->embed_dim, G, p0, n, prow, s->stream, EC));
        CHECKED(be, ck_cuda_patch_embed_band_t(x, pb, S, c->in_chans, c->patch_kernel, c->patch_stride, c->patch_pad,
                                               WF(w), WF(b), streams ? prow : WF(pos), streams ? p0 : 0, c->embed_dim,
                                               k, p0, n, tokens, s->dt, s->stream, EC));
    }
}

static void cu_patch_embed(ck_backend *be, const ck_config *c, ck_weight w, ck_weight b, ck_tensor x, int S,
                           ck_weight pos, int k, ck_tensor tokens) {
    const ck_patch_band whole = {0, S, 0, S / c->patch_stride};
    patch_embed_band(be, c, w, b, x.data, &whole, S, pos, k, tokens.data);
}

/* (ck_schedule.encoder_band) */
static void cu_patch_embed_rows(ck_backend *be, const ck_config *c, ck_weight w, ck_weight b, ck_tensor x, int x_r0,
                                int x_rows, int S, ck_weight pos, int k, int y0, int n, ck_tensor tokens) {
    const ck_patch_band band = {x_r0, x_rows, y0, n};
    patch_embed_band(be, c, w, b, x.data, &band, S, pos, k, tokens.data);
}

/* Rows of C values from src to dst, part by part (one 2D copy; the parts
 * must not overlap, which the model's callers on this backend keep). */
static void cu_copy_rows(ck_backend *be, ck_tensor src, int64_t ss, int64_t so, ck_tensor dst, int64_t ds, int64_t do_,
                         int parts, int64_t n, int C) {
    ck_cuda_state *s = ST(be);
    const size_t es = ck_dtype_size(s->dt), row = (size_t)C * es;
    if (parts <= 0 || n <= 0) return;
    const char *a = (const char *)src.data + (size_t)so * row, *d = (const char *)dst.data + (size_t)do_ * row;
    const char *a_end = a + ((size_t)(parts - 1) * ss + n) * row, *d_end = d + ((size_t)(parts - 1) * ds + n) * row;
    if (a < d_end && d < a_end) {
        FAIL_ONCE(s, CKEY_ERR_INTERNAL, "cuda copy_rows: source and destination overlap");
        return;
    }
    CHECKED(be, ck_cuda_copy2d_d2d((void *)d, (size_t)ds * row, a, (size_t)ss * row, (size_t)n * row, (size_t)parts,
                                   s->stream, EC));
}

static void cu_layernorm(ck_backend *be, ck_tensor x, int64_t N, int C, ck_weight g, ck_weight b, ck_tensor y) {
    CHECKED(be, ck_cuda_layernorm_t(x.data, N, C, WF(g), WF(b), y.data, ST(be)->dt, ST(be)->stream, EC));
}

/* The biases handed to ck_cuda_linear_t / _ld_t (qkv_b, attn_proj_b, fc2_b,
 * dec.scale_b[1..3]) are in the session's dt, like the matrices; the ones
 * other kernels read (proj_b: maxpool_bias, fc1_b: bias_gelu, patch_b,
 * dec.scale_b[0]: the epilogues) stay fp32 (backend.c, upload_weights). */
static int linear_types_ok(ck_cuda_state *s, ck_weight W, ck_weight b) {
    if (W.type == s->dt && (!b.data || b.type == s->dt)) return 1;
    FAIL_ONCE(s, CKEY_ERR_INTERNAL, "cuda linear: weight %s / bias %s in a %s session", ck_dtype_name(W.type),
              ck_dtype_name(b.type), ck_dtype_name(s->dt));
    return 0;
}

static void cu_linear(ck_backend *be, ck_tensor x, int64_t N, int in, ck_weight W, ck_weight b, ck_tensor y, int out,
                      int accumulate) {
    if (!linear_types_ok(ST(be), W, b)) return;
    CHECKED(be, ck_cuda_linear_t(ST(be)->blas, x.data, N, in, W.data, b.data, y.data, out, accumulate, ST(be)->dt,
                             ST(be)->stream, EC));
}

static void cu_linear_maxpool(ck_backend *be, ck_tensor x, int64_t N, int in, ck_weight W, ck_weight b, ck_tensor y,
                              int out, int qs) {
    ck_cuda_state *s = ST(be);
    void *full = s->scratch;
    const int64_t Nq = N / qs, chunk = pool_chunk(s->cfg.sched.encoder_chunks, Nq);
    if (!scratch_ok(s, (size_t)chunk * qs * out) || !linear_types_ok(s, W, ck_weight_of(NULL, s->dt))) return;
    if (chunk == Nq) {
        CHECKED(be, ck_cuda_linear_t(s->blas, x.data, N, in, W.data, NULL, full, out, 0, s->dt, s->stream, EC));
        CHECKED(be, ck_cuda_maxpool_bias_t(full, Nq, out, qs, WF(b), y.data, s->dt, s->stream, EC));
        return;
    }
    /* pooled rows r0 .. r0+n-1 read rows r0 + k Nq (k < qs): their projections in the layout of an
     * Nq = n problem, then pooled as one */
    for (int64_t r0 = 0; r0 < Nq; r0 += chunk) {
        const int64_t n = CK_MIN(chunk, Nq - r0);
        for (int k = 0; k < qs; k++)
            CHECKED(be, ck_cuda_linear_t(s->blas, AT(s, x.data, (r0 + k * Nq) * in), n, in, W.data, NULL,
                                     AT(s, full, (size_t)k * n * out), out, 0, s->dt, s->stream, EC));
        CHECKED(be, ck_cuda_maxpool_bias_t(full, n, out, qs, WF(b), AT(s, y.data, r0 * out), s->dt, s->stream, EC));
    }
}

/* All heads at once: one qkv GEMM, one attention launch. The scratch holds
 * xn [N, D], then the full projection [N, Do] (the stage transition's pooled
 * shortcut, consumed at once) and the q | k | v of all heads [N, 3 Do], and
 * att [Nq, Do]. (Head by head, with each head's q, k, v projected by its own
 * narrow GEMM, the scratch would be smaller, 196 vs 420 MiB at S = 2048, but
 * not the arena, whose peak the refiner's maps set, and every one of those
 * GEMMs would read all of xn.) */
static void mu_attention_chunks(ck_backend *be, const ck_block_info *bi, const ck_block_w *w, const void *x,
                                int64_t nw, int64_t nwc, void *xo);

/* The weights' types for mask-unit attention (linear_types_ok). */
static int mu_types_ok(ck_cuda_state *s, const ck_block_info *bi, const ck_block_w *w) {
    if (!linear_types_ok(s, w->qkv_w, w->qkv_b) || !linear_types_ok(s, w->attn_proj_w, w->attn_proj_b)) return 0;
    return bi->dim == bi->dim_out || linear_types_ok(s, w->proj_w, ck_weight_of(NULL, s->dt));
}

/* Mask-unit attention of nwc windows whose N tokens lie in x [N, D] (token
 * t of window w at row t * nwc + w): norm1 into xn, then from xn on in the
 * same buffer q | k | v [N, 3 Do] and att [N / qs, Do]; widening, the
 * pooled shortcut into xo first; then xo [N / qs, Do] += attn.proj(att). */
static void mu_attention_windows(ck_backend *be, const ck_block_info *bi, const ck_block_w *w, const void *x,
                                 int64_t N, int64_t nwc, void *xn, void *xo) {
    ck_cuda_state *s = ST(be);
    const int D = bi->dim, Do = bi->dim_out, qs = bi->q_stride, T = bi->window * qs, heads = bi->heads;
    const int64_t Nq = N / qs;
    void *wk = AT(s, xn, (size_t)N * D), *att = AT(s, wk, (size_t)N * 3 * Do);
    CHECKED(be, ck_cuda_layernorm_t(x, N, D, WF(w->norm1_w), WF(w->norm1_b), xn, s->dt, s->stream, EC));
    if (D != Do) {
        CHECKED(be, ck_cuda_linear_t(s->blas, xn, N, D, w->proj_w.data, NULL, wk, Do, 0, s->dt, s->stream, EC));
        CHECKED(be, ck_cuda_maxpool_bias_t(wk, Nq, Do, qs, WF(w->proj_b), xo, s->dt, s->stream, EC));
    }
    CHECKED(be, ck_cuda_linear_t(s->blas, xn, N, D, w->qkv_w.data, w->qkv_b.data, wk, 3 * Do, 0, s->dt, s->stream,
                                 EC));
    if (s->dt == CK_F32)
        CHECKED(be, ck_cuda_window_attention_t(wk, nwc, T, qs, Do, heads, att, s->dt, s->stream, EC));
    else
        CHECKED(be, ck_cuda_window_attention_tc_ld(wk, nwc, T, qs, Do, heads, att, Do, s->dt, s->stream, EC));
    CHECKED(be, ck_cuda_linear_t(s->blas, att, Nq, Do, w->attn_proj_w.data, w->attn_proj_b.data, xo, Do, 1, s->dt,
                                 s->stream, EC));
}

static void cu_mask_unit_attention(ck_backend *be, const ck_block_info *bi, const ck_block_w *w, ck_tensor xt,
                                   int64_t N, ck_tensor xot) {
    ck_cuda_state *s = ST(be);
    const int64_t nw = N / ((int64_t)bi->window * bi->q_stride), nwc = mu_chunk_windows(nw, s->cfg.sched.encoder_chunks);
    if (nwc < nw) { /* the schedule's chunks of windows (ck_schedule.encoder_chunks) */
        mu_attention_chunks(be, bi, w, xt.data, nw, nwc, xot.data);
        return;
    }
    if (!scratch_ok(s, mu_scratch_elems(bi, nw, 0)) || !mu_types_ok(s, bi, w)) return;
    mu_attention_windows(be, bi, w, xt.data, N, nw, s->scratch, xot.data);
}

/* Mask-unit attention in chunks of nwc windows, for a schedule whose
 * encoder scratch holds only a chunk's q, k, v. Window w's token t is row
 * t * nw + w, so a chunk's tokens are T blocks of nwc rows nw rows apart:
 * they are gathered into xc (token t of window w0 + w' at row t * nwc + w',
 * the same strided layout with nwc windows), run through the whole-map path
 * (mu_attention_windows: layernorm, GEMMs, window attention, q pooling over
 * rows Nqc apart) and scattered back into xo's rows. Each value is the
 * one-launch path's up to the GEMMs' order of summation over a different
 * row count. */
static void mu_attention_chunks(ck_backend *be, const ck_block_info *bi, const ck_block_w *w, const void *x,
                                int64_t nw, int64_t nwc, void *xo) {
    ck_cuda_state *s = ST(be);
    const int D = bi->dim, Do = bi->dim_out, qs = bi->q_stride, T = bi->window * qs;
    const size_t es = ck_dtype_size(s->dt);
    if (!scratch_ok(s, mu_scratch_elems(bi, nwc, 1)) || !mu_types_ok(s, bi, w)) return;
    for (int64_t w0 = 0; w0 < nw; w0 += nwc) {
        const int64_t n = CK_MIN(nwc, nw - w0), Nc = (int64_t)T * n, Nqc = Nc / qs;
        /* xc [Nc, D] | (widening: xoc [Nqc, Do]) | xn [Nc, D] | q, k, v [Nc, 3 Do] | att [Nqc, Do] */
        void *xc = s->scratch, *xoc = D != Do ? AT(s, xc, (size_t)Nc * D) : xc;
        void *xn = D != Do ? AT(s, xoc, (size_t)Nqc * Do) : AT(s, xc, (size_t)Nc * D);
        CHECKED(be, ck_cuda_copy2d_d2d(xc, (size_t)n * D * es, AT(s, x, w0 * D), (size_t)nw * D * es,
                                       (size_t)n * D * es, (size_t)T, s->stream, EC));
        /* the residual: xoc (x's rows of the chunk, or the pooled shortcut) += attn.proj(att) */
        mu_attention_windows(be, bi, w, xc, Nc, n, xn, xoc);
        CHECKED(be, ck_cuda_copy2d_d2d(AT(s, xo, w0 * Do), (size_t)nw * Do * es, xoc, (size_t)n * Do * es,
                                       (size_t)n * Do * es, (size_t)(T / qs), s->stream, EC));
    }
}

static void attention_run(ck_backend *be, const void *qkv, int64_t N, int D, int heads, int qs, void *out) {
    if (ST(be)->dt == CK_F32)
        CHECKED(be, ck_cuda_attention_t(qkv, N, D, heads, qs, out, ST(be)->dt, ST(be)->stream, EC));
    else if (ST(be)->wgmma && heads > 0 && D == 56 * heads) /* the wgmma kernel is head_dim 56 only */
        CHECKED(be, ck_cuda_attention_wgmma(qkv, N, D, heads, qs, out, ST(be)->dt, ST(be)->stream, EC));
    else
        CHECKED(be, ck_cuda_attention_tc(qkv, N, D, heads, qs, out, ST(be)->dt, ST(be)->stream, EC));
}

static void cu_attention(ck_backend *be, ck_tensor qkvt, int64_t N, int D, int heads, int qs, ck_tensor outt) {
    attention_run(be, qkvt.data, N, D, heads, qs, outt.data);
}

/* ck_schedule.qkv_streamed: out [Nq, D] += attention(xn . W^T + b) . Wp^T +
 * bp with no qkv [N, 3 D] stored. Head by head, its q, k and v (W's rows
 * part * D + h * hd.., three GEMMs) go into the scratch as a one-head qkv
 * [N, 3 hd], the attention kernel of the whole map runs on it with heads = 1
 * (the same per-head math), and its output [Nq, hd] joins its group's
 * columns [Nq, g hd]. Each group adds its outputs times its columns of Wp
 * (rows D apart) to out, bp with the last. The groups are as large as the
 * phase's scratch holds (qkv_streamed_elems; at least one head, which the
 * planner sized it for): with all heads in one group the projection is the
 * whole map's one GEMM; else each group's sum is rounded to the storage
 * type as it is added. */
static void cu_attention_qkv(ck_backend *be, ck_tensor xn, int64_t N, int in, ck_weight W, ck_weight b, int D,
                             int heads, int qs, ck_weight Wp, ck_weight bp, ck_tensor out) {
    ck_cuda_state *s = ST(be);
    const int hd = D / heads;
    const int64_t Nq = N / qs;
    const size_t es = ck_dtype_size(s->dt);
    if (!scratch_ok(s, qkv_streamed_elems(N, Nq, hd, 1)) || !linear_types_ok(s, W, b) || !linear_types_ok(s, Wp, bp))
        return;
    int g = heads;
    while (g > 1 && qkv_streamed_elems(N, Nq, hd, g) * es > s->scratch_bytes) g--;
    void *qkv = s->scratch, *att_h = AT(s, qkv, (size_t)N * 3 * hd);
    void *att_g = g > 1 ? AT(s, att_h, (size_t)Nq * hd) : att_h;
    for (int h0 = 0; h0 < heads; h0 += g) {
        const int gn = CK_MIN(g, heads - h0);
        for (int gi = 0; gi < gn; gi++) {
            const int h = h0 + gi;
            for (int part = 0; part < 3; part++) { /* q, k, v of head h */
                const int64_t row = (int64_t)part * D + (int64_t)h * hd;
                CHECKED(be, ck_cuda_linear_ld_t(s->blas, xn.data, N, in, AT(s, W.data, row * in),
                                                b.data ? AT(s, b.data, row) : NULL, AT(s, qkv, (size_t)part * hd),
                                                hd, 3 * hd, 0, s->dt, s->stream, EC));
            }
            attention_run(be, qkv, N, hd, 1, qs, att_h);
            if (gn > 1)
                CHECKED(be, ck_cuda_copy2d_d2d(AT(s, att_g, (size_t)gi * hd), (size_t)gn * hd * es, att_h,
                                               (size_t)hd * es, (size_t)hd * es, (size_t)Nq, s->stream, EC));
        }
        const void *bias = h0 + gn >= heads ? bp.data : NULL;
        CHECKED(be, ck_cuda_linear_ldw_t(s->blas, gn > 1 ? att_g : att_h, Nq, gn * hd, AT(s, Wp.data, (size_t)h0 * hd),
                                         D, bias, out.data, D, D, 1, s->dt, s->stream, EC));
    }
}

static void cu_mlp(ck_backend *be, ck_tensor xt, int64_t N, int C, const ck_block_w *w, int hidden) {
    ck_cuda_state *s = ST(be);
    const int64_t chunk = mlp_chunk(s->cfg.sched.encoder_chunks);
    if (!scratch_ok(s, (size_t)CK_MIN(chunk, N) * (C + hidden))) return;
    if (!linear_types_ok(s, w->fc1_w, ck_weight_of(NULL, s->dt)) || !linear_types_ok(s, w->fc2_w, w->fc2_b)) return;
    const float *fc1_b = WF(w->fc1_b);
    for (int64_t r = 0; r < N; r += chunk) {
        const int64_t n = CK_MIN(chunk, N - r);
        void *xn = s->scratch, *h = AT(s, xn, (size_t)n * C), *xr = AT(s, xt.data, r * C);
        if (w->fc1_colsum.data) { /* norm2 folded into fc1 (backend.c, ln-fold.h): the rows' stats where xn would be */
            float *stats = xn; /* [n, 2] floats: within xn's n * C 16-bit values, C >= 4 */
            CHECKED(be, ck_cuda_layernorm_stats_t(xr, n, C, stats, s->dt, s->stream, EC));
            CHECKED(be, ck_cuda_linear_gelu_ln(xr, n, C, w->fc1_w.data, fc1_b, WF(w->fc1_colsum), stats, h, hidden,
                                           s->fc1_form, s->dt, s->stream, EC));
            CHECKED(be, ck_cuda_linear_t(s->blas, h, n, hidden, w->fc2_w.data, w->fc2_b.data, xr, C, 1, s->dt, s->stream,
                                     EC));
            continue;
        }
        CHECKED(be, ck_cuda_layernorm_t(xr, n, C, WF(w->norm2_w), WF(w->norm2_b), xn, s->dt, s->stream, EC));
        if (s->fused_fc1 && ck_cuda_linear_gelu_ok(n, C, hidden, s->dt) && !((uintptr_t)fc1_b & 7)) {
            CHECKED(be, ck_cuda_linear_wgmma(xn, n, C, w->fc1_w.data, fc1_b, h, hidden, CK_LINEAR_GELU | s->fc1_form, s->dt,
                                         s->stream, EC));
        } else {
            CHECKED(be, ck_cuda_linear_t(s->blas, xn, n, C, w->fc1_w.data, NULL, h, hidden, 0, s->dt, s->stream, EC));
            CHECKED(be, ck_cuda_bias_gelu_t(h, n, hidden, fc1_b, s->dt, s->stream, EC));
        }
        CHECKED(be, ck_cuda_linear_t(s->blas, h, n, hidden, w->fc2_w.data, w->fc2_b.data, xr, C, 1, s->dt, s->stream, EC));
    }
}

static void cu_reroll(ck_backend *be, ck_tensor tokens, int H, int W, int k, int C, ck_tensor feat) {
    CHECKED(be, ck_cuda_reroll_t(tokens.data, H, W, k, C, feat.data, ST(be)->dt, ST(be)->stream, EC));
}

/* ck_schedule.c1_bands: a band of c1's rows, each value the whole reroll's */
static void cu_reroll_rows(ck_backend *be, ck_tensor tokens, int H, int W, int k, int C, int y0, int n,
                           ck_tensor feat_rows) {
    CHECKED(be, ck_cuda_reroll_rows_t(tokens.data, H, W, k, C, y0, n, feat_rows.data, ST(be)->dt, ST(be)->stream, EC));
}

/* Rows [y0, y0 + n) of the logits, c1 holding the map's rows c1_r0.., P[s]
 * scale s's rows r0[s].. (the whole maps: y0 = 0, n = H1, c1_r0 = r0 = 0).
 * The epilogue indexes P[s] by the scale's own rows, so it is handed P[s]
 * less r0[s] rows (an address the band buffer's rows begin after; only rows
 * from r0[s] on are read). */
static void decoder_rows(ck_backend *be, const ck_config *c, const ck_decoder_w *w, ck_tensor c1, int c1_r0, int H1,
                         int C1, const ck_tensor P[3], const int Hk[3], const int r0[3], int y0, int n,
                         ck_tensor logits) {
    ck_cuda_state *s = ST(be);
    const int D2 = 2 * c->dec_dim;
    if (!linear_types_ok(s, w->scale_w[0], ck_weight_of(NULL, s->dt))) return;
    const void *Ps[3];
    for (int k = 0; k < 3; k++)
        Ps[k] = (const void *)((uintptr_t)P[k].data - (uintptr_t)r0[k] * Hk[k] * D2 * ck_dtype_size(s->dt));
    const int64_t first = (int64_t)y0 * H1, total = (int64_t)n * H1;
    /* chunks of whole row pairs where they fit (the epilogue's 2 x 2 quad kernel) */
    const int64_t dc = dec_chunk(s->cfg.sched.encoder_chunks), chunk = 2 * H1 <= dc ? dc / (2 * H1) * (2 * H1) : dc;
    if (!scratch_ok(s, (size_t)CK_MIN(chunk, total) * D2)) return;
    for (int64_t p0 = first; p0 < first + total; p0 += chunk) {
        const int64_t m = CK_MIN(chunk, first + total - p0);
        CHECKED(be, ck_cuda_linear_t(s->blas, AT(s, c1.data, (p0 - (int64_t)c1_r0 * H1) * C1), m, C1, w->scale_w[0].data,
                                 NULL, s->scratch, D2, 0,
                                 s->dt, s->stream, EC));
        CHECKED(be, ck_cuda_decoder_epilogue_t(s->scratch, p0, m, H1, D2, Ps[0], Hk[0], Ps[1], Hk[1], Ps[2], Hk[2],
                                           WF(w->scale_b[0]), WF(w->cls_w), WF(w->cls_b), ck_f32(logits), s->dt,
                                           s->stream, EC));
    }
}

static void cu_decoder_fuse(ck_backend *be, const ck_config *c, const ck_decoder_w *w, ck_tensor c1, int H1, int C1,
                            const ck_tensor P[3], const int Hk[3], ck_tensor logits) {
    static const int r0[3] = {0, 0, 0};
    decoder_rows(be, c, w, c1, 0, H1, C1, P, Hk, r0, 0, H1, logits);
}

/* ck_schedule.decoder_band: a band's rows, each pixel's values the whole
 * maps' (the same epilogue; P's band projected by the same GEMM on fewer
 * rows). */
static void cu_decoder_fuse_rows(ck_backend *be, const ck_config *c, const ck_decoder_w *w, ck_tensor c1, int c1_r0,
                                 int H1, int C1, const ck_tensor P[3], const int Hk[3], const int r0[3], int y0, int n,
                                 ck_tensor logits) {
    decoder_rows(be, c, w, c1, c1_r0, H1, C1, P, Hk, r0, y0, n, logits);
}

static void cu_refiner_input(ck_backend *be, ck_tensor x, ck_tensor logits, int S, ck_tensor rin) {
    CHECKED(be, ck_cuda_refiner_input_t(x.data, ck_f32(logits), S, rin.data, ST(be)->dt, ST(be)->stream, EC));
}

static void cu_affine_relu(ck_backend *be, ck_tensor x, int C, int64_t HW, const float *a, const float *b) {
    CHECKED(be, ck_cuda_affine_relu_t(x.data, NULL, C, HW, a, b, ST(be)->dt, ST(be)->stream, EC));
}

static void cu_residual_affine_relu(ck_backend *be, ck_tensor x, ck_tensor y, int C, int64_t HW, const float *a,
                                    const float *b, const float *pre_a, const float *pre_b) {
    CHECKED(be, ck_cuda_residual_relu_t(x.data, y.data, C, HW, a, b, pre_a, pre_b, ST(be)->dt, ST(be)->stream, EC));
}

/* The tensor-core conv of output rows y0 .. y1-1: Hopper's wgmma kernel for
 * the 64 -> 64 convolutions (dilation <= 8: its shared memory) where the
 * session uses wgmma, mma.sync else. */
static ckey_status conv_tc_rows(const ck_cuda_state *s, const void *in, int Cin, int S, int dil, const void *W,
                                const float *bias, const float *in_a, const float *in_b, void *out, int y0, int y1,
                                int Cout, int groups, double *stats, ckey_error *err) {
    if (s->wgmma && Cin == 64 && Cout == 64 && dil <= 8)
        return ck_cuda_conv3x3_wgmma_rows(in, S, dil, W, bias, in_a, in_b, out, y0, y1, groups, stats, s->dt,
                                          s->stream, err);
    return ck_cuda_conv3x3_tc_rows(in, Cin, S, dil, W, bias, in_a, in_b, out, y0, y1, Cout, groups, stats, s->dt,
                                   s->stream, err);
}

/* A conv whose output begins `shift` image rows before its input (out = in -
 * shift rows, shift = band + REF_MAX_DIL >= band + dil; the margin is
 * allocated with the input: ck_fwd.conv_shift_rows), one launch per band of
 * output rows in order. Band k writes rows y0 .. y1-1 at out + y0 rows = in +
 * y0 - shift rows <= in + y0 - band - dil rows: below every input row that
 * band k or a later one reads (from y0 - dil on), so no band reads what an
 * earlier band wrote, and stream order keeps band k's reads before band
 * k+1's writes. tc: the tensor-core conv (which applies the pending GroupNorm
 * + ReLU in_a, in_b as it loads), else the CUDA-core one (the caller has
 * applied it already; in_a, in_b are then unused). */
static void conv3x3_shifted(ck_backend *be, int tc, const void *in, int Cin, int S, int dil, ck_weight W,
                            const float *bias, const float *in_a, const float *in_b, void *out, int Cout, int groups,
                            double *stats) {
    ck_cuda_state *s = ST(be);
    const int rows = conv_band(S);
    if (tc && s->wgmma && s->conv_sync && Cin == 64 && Cout == 64 && dil <= REF_MAX_DIL) {
        /* all bands in one launch, items waiting only for the readers of the rows they overwrite */
        ckey_error e;
        const ckey_status st = ck_cuda_conv3x3_wgmma_inplace(in, S, dil, W.data, bias, in_a, in_b, rows,
                                                            ck_cuda_conv_shift_rows(S), s->conv_sync, s->conv_sync_n,
                                                            groups, stats, s->dt, s->stream, &e);
        if (st != CKEY_ERR_UNSUPPORTED) {
            ck_cuda_keep_status(s, st, &e);
            return;
        }
    }
    for (int y0 = 0; y0 < S; y0 += rows) {
        const int y1 = CK_MIN(S, y0 + rows);
        void *band = AT(s, out, (size_t)y0 * S * Cout);
        if (tc)
            CHECKED(be, conv_tc_rows(s, in, Cin, S, dil, W.data, bias, in_a, in_b, band, y0, y1, Cout, groups, stats, EC));
        else
            CHECKED(be, ck_cuda_conv3x3_rows_t(in, 0, Cin, S, dil, WF(W), bias, band, y0, y1, Cout, groups, stats, s->dt,
                                           s->stream, EC));
    }
}

/* How out lies against in: -1 apart; 1 exactly conv_shift_rows rows before
 * it (conv3x3_shifted); 0 any other overlap, which fails the pass. */
static int conv_shift_ok(ck_cuda_state *s, const void *in, int Cin, int S, int dil, const void *out, int Cout) {
    const size_t row = (size_t)S * Cout * ck_dtype_size(s->dt);
    const char *i = (const char *)in, *o = (const char *)out;
    if (o >= i + (size_t)S * row || i >= o + (size_t)S * row) return -1; /* disjoint */
    if (Cin == Cout && dil <= REF_MAX_DIL && o + (size_t)ck_cuda_conv_shift_rows(S) * row == i) return 1;
    FAIL_ONCE(s, CKEY_ERR_INTERNAL, "conv3x3: output overlaps the input other than %d rows before it (dilation %d)",
              ck_cuda_conv_shift_rows(S), dil);
    return 0;
}

static void cu_conv3x3(ck_backend *be, ck_tensor int_, int image_in, int Cin, int S, int dil, ck_weight W,
                       ck_weight biasw, const float *in_a, const float *in_b, ck_tensor outt, int Cout, int groups,
                       double *stats) {
    ck_cuda_state *s = ST(be);
    void *in = int_.data, *out = outt.data;
    const float *bias = WF(biasw);
    const int64_t HW = (int64_t)S * S;
    if (ck_cuda_refiner_tc_ok(Cout, s->dt) && (image_in || ck_cuda_refiner_tc_ok(Cin, s->dt))) {
        /* tensor cores; the pending GroupNorm + ReLU is applied as the conv loads */
        if (image_in) { /* the stem: [7, S, S] -> [S*S, 8] in the scratch, weights with paired taps */
            if (!scratch_ok(s, (size_t)HW * 8)) return;
            CHECKED(be, ck_cuda_refiner_stem_input(in, S, s->scratch, s->dt, s->stream, EC));
            CHECKED(be, ck_cuda_conv3x3_tc(s->scratch, 8, S, dil, W.data, bias, NULL, NULL, out, Cout, groups, stats, s->dt,
                                       s->stream, EC));
            return;
        }
        const int sh = conv_shift_ok(s, in, Cin, S, dil, out, Cout);
        if (sh < 0) CHECKED(be, conv_tc_rows(s, in, Cin, S, dil, W.data, bias, in_a, in_b, out, 0, S, Cout, groups, stats, EC));
        if (sh > 0) conv3x3_shifted(be, 1, in, Cin, S, dil, W, bias, in_a, in_b, out, Cout, groups, stats);
        return;
    }
    const int sh = image_in ? -1 : conv_shift_ok(s, in, Cin, S, dil, out, Cout);
    if (!sh) return;
    if (in_a) CHECKED(be, ck_cuda_affine_relu_t(in, NULL, Cin, HW, in_a, in_b, s->dt, s->stream, EC));
    if (sh < 0)
        CHECKED(be, ck_cuda_conv3x3_t(in, image_in, Cin, S, dil, WF(W), bias, out, Cout, groups, stats, s->dt, s->stream, EC));
    else
        conv3x3_shifted(be, 0, in, Cin, S, dil, W, bias, NULL, NULL, out, Cout, groups, stats);
}

static void cu_pointwise_conv(ck_backend *be, ck_tensor x, ck_tensor y, const float *ra, const float *rb, int C,
                              int64_t HW, ck_weight W, ck_weight b, float mult, ck_tensor out, int Cout) {
    CHECKED(be, ck_cuda_pointwise_t(x.data, y.data, ra, rb, C, HW, WF(W), WF(b), mult, ck_f32(out), Cout, ST(be)->dt, ST(be)->stream, EC));
}

/* The banded refiner (model.h ck_schedule.refiner_band): the whole-map ops'
 * kernels on bands of rows, so each value is the whole-map run's. A band of
 * the refiner input is packed [n * S, 8] where the tensor-core stem reads it
 * (ck_cuda_band_input_ch), else planes [7, n, S]. */
int ck_cuda_band_input_ch(int R, ck_dtype dt) { return ck_cuda_refiner_tc_ok(R, dt) ? 8 : 7; }

static void cu_refiner_input_rows(ck_backend *be, ck_tensor x, int x_r0, int x_rows, ck_tensor logits, int S, int y0,
                                  int n, ck_tensor rin) {
    ck_cuda_state *s = ST(be);
    const int packed = ck_cuda_band_input_ch(s->ref_dim, s->dt) == 8;
    CHECKED(be, ck_cuda_refiner_input_rows_t(x.data, x_r0, x_rows, ck_f32(logits), S, y0, n, packed, rin.data, s->dt,
                                             s->stream, EC));
}

static void cu_conv3x3_rows(ck_backend *be, ck_tensor in, int image_in, int Cin, int S, int dil, int in_r0, int in_n,
                            ck_weight W, ck_weight biasw, ck_tensor out, int out_r0, int out_n, int Cout, int groups,
                            double *stats) {
    ck_cuda_state *s = ST(be);
    const float *bias = WF(biasw);
    const int y1 = out_r0 + out_n;
    if (ck_cuda_refiner_tc_ok(Cout, s->dt) && (image_in || ck_cuda_refiner_tc_ok(Cin, s->dt))) {
        if (image_in) /* the stem from its packed band (cu_refiner_input_rows), weights with paired taps */
            CHECKED(be, ck_cuda_conv3x3_tc_band(in.data, in_r0, 8, S, dil, W.data, bias, NULL, NULL, out.data, out_r0, y1,
                                            Cout, groups, stats, s->dt, s->stream, EC));
        else if (s->wgmma && Cin == 64 && Cout == 64 && dil <= REF_MAX_DIL)
            CHECKED(be, ck_cuda_conv3x3_wgmma_band(in.data, in_r0, S, dil, W.data, bias, NULL, NULL, out.data, out_r0, y1,
                                               groups, stats, s->dt, s->stream, EC));
        else
            CHECKED(be, ck_cuda_conv3x3_tc_band(in.data, in_r0, Cin, S, dil, W.data, bias, NULL, NULL, out.data, out_r0, y1,
                                            Cout, groups, stats, s->dt, s->stream, EC));
        return;
    }
    CHECKED(be, ck_cuda_conv3x3_band_t(in.data, image_in, Cin, S, dil, in_r0, in_n, WF(W), bias, out.data, out_r0, y1, Cout,
                                   groups, stats, s->dt, s->stream, EC));
}

static void cu_pointwise_conv_rows(ck_backend *be, ck_tensor x, int C, int S, int y0, int n, ck_weight W, ck_weight b,
                                   float mult, ck_tensor out, int out_r0, int out_rows, int Cout) {
    CHECKED(be, ck_cuda_pointwise_rows_t(x.data, C, S, y0, n, WF(W), WF(b), mult, ck_f32(out), out_r0, out_rows, Cout,
                                         ST(be)->dt, ST(be)->stream, EC));
}

/* c1 in page-locked host memory between stage 1 and the decoders (ck_schedule.c1_on_host) */
static int host_range_ok(ck_cuda_state *s, size_t off, size_t bytes) {
    if (s->host_maps && off + bytes <= s->host_map_bytes) return 1;
    FAIL_ONCE(s, CKEY_ERR_INTERNAL, "cuda: %zu host bytes at %zu past the session's %zu", bytes, off,
              s->host_map_bytes);
    return 0;
}

static void cu_to_host(ck_backend *be, ck_tensor t, size_t off, size_t bytes) {
    ck_cuda_state *s = ST(be);
    if (host_range_ok(s, off, bytes))
        CHECKED(be, ck_cuda_copy_async((char *)s->host_maps + off, t.data, bytes, 0, s->stream, EC));
}

static void cu_from_host(ck_backend *be, size_t off, size_t bytes, ck_tensor t) {
    ck_cuda_state *s = ST(be);
    if (host_range_ok(s, off, bytes))
        CHECKED(be, ck_cuda_copy_async(t.data, (char *)s->host_maps + off, bytes, 1, s->stream, EC));
}

static void cu_finalize(ck_backend *be, ck_tensor logits, int S, ck_tensor out) {
    CHECKED(be, ck_cuda_finalize(ck_f32(logits), S, ck_f32(out), ST(be)->stream, EC));
}

static void cu_finalize_rows(ck_backend *be, ck_tensor logits, int S, int y0, int n, ck_tensor out) {
    CHECKED(be, ck_cuda_finalize_rows(ck_f32(logits), S, y0, n, ck_f32(out), ST(be)->stream, EC));
}

/* The output in host memory (ck_schedule.out_on_host): page-locked, so the
 * run's download reads it there and a device-side reader (the frame path)
 * reads it through unified addressing. */
static void *cu_host_ptr(ck_backend *be, size_t off) {
    ck_cuda_state *s = ST(be);
    return host_range_ok(s, off, 0) ? (char *)s->host_maps + off : NULL;
}

static void cu_groupnorm_affine(ck_backend *be, const double *stats, int groups, int C, int64_t HW, ck_weight gamma,
                                ck_weight beta, float *a, float *b) {
    CHECKED(be, ck_cuda_groupnorm_affine(stats, groups, C, HW, WF(gamma), WF(beta), a, b, ST(be)->stream, EC));
}

static void cu_zero_stats(ck_backend *be, double *stats, int n) {
    CHECKED(be, ck_cuda_memset_async(stats, 0, (size_t)n * sizeof(double), ST(be)->stream, EC));
}

/* Taps: wait for the stream, widen 16-bit data to fp32 in the backend's own
 * device buffer (outside the plan, so no phase's scratch has to fit every
 * tap), copy to the host. Debug path: failures leave the host buffer as it
 * was. */
static void cu_read(ck_backend *be, ck_tensor t, int64_t n, float *host) {
    ck_cuda_state *s = ST(be);
    if (ck_cuda_stream_sync(s->stream, NULL)) return;
    const void *src = t.data;
    if (t.type != CK_F32) {
        if ((size_t)n > s->tap_dev_floats) {
            ck_cuda_free(s->tap_dev);
            s->tap_dev = NULL;
            s->tap_dev_floats = 0;
            if (ck_cuda_malloc((void **)&s->tap_dev, (size_t)n * sizeof(float), NULL)) return;
            s->tap_dev_floats = (size_t)n;
        }
        if (ck_cuda_convert(t.data, t.type, s->tap_dev, CK_F32, n, NULL, NULL) || ck_cuda_sync(NULL)) return;
        src = s->tap_dev;
    }
    ck_cuda_copy(host, src, (size_t)n * sizeof(float), 0, NULL);
}

static void cu_sync(ck_backend *be) { ck_cuda_stream_sync(ST(be)->stream, NULL); }

static void cu_trace(ck_backend *be, const char *name) {
    const ck_cuda_state *s = ST(be);
    if (!s->cfg.trace || s->capturing) return;
    char step[96];
    snprintf(step, sizeof step, "op %s", name);
    ck_cuda_trace(s, step);
}

const ck_ops ck_cuda_ops = {
    .set_scratch = cu_set_scratch,
    .read = cu_read,
    .sync = cu_sync,
    .trace = cu_trace,
    .patch_embed = cu_patch_embed,
    .patch_embed_rows = cu_patch_embed_rows,
    .copy_rows = cu_copy_rows,
    .mask_unit_attention = cu_mask_unit_attention,
    .layernorm = cu_layernorm,
    .linear = cu_linear,
    .linear_maxpool = cu_linear_maxpool,
    .attention = cu_attention,
    .attention_qkv = cu_attention_qkv,
    .mlp = cu_mlp,
    .reroll = cu_reroll,
    .reroll_rows = cu_reroll_rows,
    .decoder_fuse = cu_decoder_fuse,
    .decoder_fuse_rows = cu_decoder_fuse_rows,
    .refiner_input = cu_refiner_input,
    .conv3x3 = cu_conv3x3,
    .affine_relu = cu_affine_relu,
    .residual_affine_relu = cu_residual_affine_relu,
    .pointwise_conv = cu_pointwise_conv,
    .finalize = cu_finalize,
    .finalize_rows = cu_finalize_rows,
    .host_ptr = cu_host_ptr,
    .groupnorm_affine = cu_groupnorm_affine,
    .zero_stats = cu_zero_stats,
    .refiner_input_rows = cu_refiner_input_rows,
    .conv3x3_rows = cu_conv3x3_rows,
    .pointwise_conv_rows = cu_pointwise_conv_rows,
    .to_host = cu_to_host,
    .from_host = cu_from_host,
    /* Cutie (cutie-ops.c) */
    .memory_read = ck_cuda_memory_read_op,
    .set_workspace = ck_cuda_cutie_set_workspace,
    .conv2d = ck_cuda_cutie_conv2d,
    .maxpool3x3s2 = ck_cuda_cutie_maxpool3x3s2,
    .resize_bilinear = ck_cuda_cutie_resize_bilinear,
    .avgpool = ck_cuda_cutie_avgpool,
    .layer_norm = ck_cuda_cutie_layer_norm,
    .mha = ck_cuda_cutie_mha,
    .unary = ck_cuda_cutie_unary,
    .add = ck_cuda_cutie_add,
    .copy_channels = ck_cuda_cutie_copy_channels,
    .pad_normalize = ck_cuda_cutie_pad_normalize,
    .masks_with_others = ck_cuda_cutie_masks_with_others,
    .gru_update = ck_cuda_cutie_gru_update,
    .channel_attention = ck_cuda_cutie_channel_attention,
    .aggregate = ck_cuda_cutie_aggregate,
    .softmax_planes = ck_cuda_cutie_softmax_planes,
    .object_attn_mask = ck_cuda_cutie_object_attn_mask,
    .summary_pool = ck_cuda_cutie_summary_pool,
    .summary_values = ck_cuda_cutie_summary_values,
    .pos_encoding = ck_cuda_cutie_pos_encoding,
    .write = ck_cuda_cutie_write,
};

#endif
