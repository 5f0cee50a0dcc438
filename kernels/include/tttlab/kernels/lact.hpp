// tttlab/kernels/lact.hpp — LaCT's large-chunk inner loop on the GPU, forward and backward, for a
// whole batch (docs/MATH.md §11.10; the CPU functions it computes are lact_forward and lact_backward,
// tttlab/fastweight/lact.hpp, run once per sequence and head).
//
// Per head of one sequence, SwiGLU fast weights W0, W2 [d_h, d], W1 [d, d_h] (d = d_k = d_v), read
// as row vectors f_W(x) = (silu(x W0ᵀ) ⊙ (x W2ᵀ)) W1ᵀ. The tokens are cut into chunks of C; each
// chunk is read with the weights from before it (o_t = f_W(q_t)), and every chunk but the last then
// takes one step: G_i = −Σ_t η_{i,t} ∇_{W_i} ℓ_t with ℓ_t = −⟨f_W(k_t), v_t⟩ and the per-token rates
// lr0, lr1, lr2; m_c = G + m̄_c m_{c−1} (m̄_c the chunk's mean momentum; m_c = G without momentum);
// W ← W + m_c; every row renormalised to its norm at the start of the sequence
// (W[r] ← W[r] / (‖W[r]‖ + 1e-5) · ‖W_0[r]‖). No Muon: the kernels refuse it (lact_unsupported).
//
// DESIGN (docs/KERNELS.md, "LaCT's inner loop on the GPU"): correct first, in fp32 with plain FMAs
// (no tensor cores), a sibling of titans.hpp. One block of 256 threads per (sequence, head) walks
// the chunks in order; a chunk is walked in tiles of up to 16 tokens (lact_tile_rows), whose inputs
// and per-token d_h-vectors sit in shared memory, while the weights, the step m_c and the gradients
// of the weights live in global memory (the states and the workspace below: d_h · d floats per
// matrix does not fit in shared memory at d = 128). Every product is a dot of fixed order computed
// by one thread (a token's d_h-vector entry, an output entry, or an entry of a weight's sum over the
// tile's tokens, each accumulated into global memory by the one thread that owns it), so there are
// no atomics and a run repeats its bits. A tile costs three barriers in the forward and in the
// backward; a chunk's update (the renormalisation, a thread per row) at most four more.
//
// WHAT IS STORED, AND WHY. Each chunk's weights depend on the last update nonlinearly (the
// renormalisation), so the backward, which walks the chunks in reverse, needs every chunk's
// weights; the forward keeps them:
//   states   [B, H, nc, 6, d_h·d], nc = ⌈T / C⌉: for chunk c, W0, W1, W2 (the weights the chunk is
//            read with; chunk 0's are the initial ones) then m_c's three matrices (the step, for
//            the backward's W + m_c and momentum; unused for the last chunk). lact_state_floats.
//            The forward uses them as its working memory: it is not optional.
//   workspace  of the backward: per (sequence, head) ∂L/∂W and ∂L/∂m (3 · d_h · d floats each),
//            lact_backward_workspace_bytes.
// The backward walks the chunks in reverse: the renormalisation's backward (a thread per row, from
// W_c + m_c), then the chunk's tokens, tile by tile, recomputing the forward's d_h-vectors from W_c.
//
// SHARED MEMORY (dynamic, opted in above 48 KiB; at most 227 KiB on an H200): per tile row
//   forward  3d + 4 d_h + 3 floats, backward 6d + 10 d_h + 3 floats, plus the row norms (2 d_h + d,
//   and as much again for their gradients in the backward), 4 scalars and, in the backward, 256
//   partial sums. A tile has min(16, C, what fits) rows: at d = 64, d_h = 128 the forward takes
//   45.5 KiB and the backward 107.7 KiB (16 rows); at d = d_h = 64, 29.0 and 66.7 KiB; at d = 128,
//   d_h = 256, 90.7 and 214.2 KiB; at d = 128, d_h = 512 the backward's tile is 9 rows (217 KiB).
//   lact_forward_tile_rows, lact_backward_tile_rows, lact_forward_smem_bytes and
//   lact_backward_smem_bytes give the figure of a shape.
//
// CONVENTIONS, as titans.hpp: this header includes neither CUDA nor Eigen headers. Every pointer is
// a DEVICE pointer, fp32; R = B·T rows, sequence n's token t at row n·T + t, rows with the given
// leading dimensions:
//   q, k, v, o, dO, dq, dk, dv   [R, ≥ H·d], head h at columns h·d … h·d + d − 1
//   lr0, lr1, lr2, momentum and their gradients   [R, H] contiguous: column h for head h
//   w0, w2 and their gradients   [B, H, d_h, d] contiguous, row-major; w1 [B, H, d, d_h]
// (initial weights per sequence and head, as the layer broadcasts them; their gradients are per
// sequence, the caller sums over the batch). The layer's positive rates, momentum in (0, 1) and
// L2-normalised q, k are not checked (device data). Calls are asynchronous on `stream`, validate
// their arguments first (std::invalid_argument, one line naming the field, nothing launched) and
// throw std::runtime_error when a launch fails. No global state.
// SHAPES: any B ≤ 65535, H ≥ 1, T ≥ 1 (T need not be a multiple of C), C ≥ 1, 1 ≤ d ≤ 128,
// 1 ≤ d_h ≤ 512 (LaCT's layer: d_h = inter_multi · d, inter_multi = 1 by default).
#pragma once

#include <cstddef>
#include <string>

#include "tttlab/kernels/mamba2.hpp"

struct CUstream_st;

namespace tttlab::kernels {

struct LactDims {
  int batch = 1;      // B
  int seq_len = 1;    // T
  int heads = 1;      // H
  int dim = 64;       // d = d_k = d_v
  int hidden = 64;    // d_h
  int chunk = 2048;   // C
  bool muon = false;  // refused: the kernels have no Newton–Schulz
  int chunks() const { return (seq_len + chunk - 1) / chunk; }
  int updates() const { return seq_len > 0 ? (seq_len - 1) / chunk : 0; }
};

// Empty when the kernels take the shape, else why not (one line, naming the field).
std::string lact_unsupported(const LactDims& dims);
// Floats of `states` ([B, H, nc, 6, d_h·d]).
std::size_t lact_state_floats(const LactDims& dims);
// Bytes of the backward's workspace (floats: B·H·6·d_h·d).
std::size_t lact_backward_workspace_bytes(const LactDims& dims);
// Tokens per tile, and the dynamic shared memory of each kernel at that tile (see SHARED MEMORY).
int lact_forward_tile_rows(const LactDims& dims);
int lact_backward_tile_rows(const LactDims& dims);
std::size_t lact_forward_smem_bytes(const LactDims& dims);
std::size_t lact_backward_smem_bytes(const LactDims& dims);

struct LactForwardArgs {
  LactDims dims;
  const float* q = nullptr;
  int ld_q = 0;
  const float* k = nullptr;
  int ld_k = 0;
  const float* v = nullptr;
  int ld_v = 0;
  const float* lr0 = nullptr;       // [R, H]
  const float* lr1 = nullptr;       // [R, H]
  const float* lr2 = nullptr;       // [R, H]
  const float* momentum = nullptr;  // [R, H], or null: no momentum
  const float* w0 = nullptr;        // [B, H, d_h, d] the initial weights
  const float* w1 = nullptr;        // [B, H, d, d_h]
  const float* w2 = nullptr;        // [B, H, d_h, d]
  float* o = nullptr;               // OVERWRITTEN
  int ld_o = 0;
  float* w0_final = nullptr;  // OVERWRITTEN with the weights the last chunk is read with, or null
  float* w1_final = nullptr;
  float* w2_final = nullptr;
  float* states =
      nullptr;  // OVERWRITTEN (lact_state_floats): working memory, kept for the backward
  CUstream_st* stream = nullptr;
  // lact_forward_chunked only (lact_forward ignores them): lact_chunked_workspace_bytes(dims).
  void* workspace = nullptr;
  std::size_t workspace_bytes = 0;
};
void lact_forward(const LactForwardArgs& args);

struct LactBackwardArgs {
  LactDims dims;  // as in the forward
  const float* q = nullptr;
  int ld_q = 0;
  const float* k = nullptr;
  int ld_k = 0;
  const float* v = nullptr;
  int ld_v = 0;
  const float* lr0 = nullptr;
  const float* lr1 = nullptr;
  const float* lr2 = nullptr;
  const float* momentum = nullptr;  // as in the forward (null: no momentum)
  const float* states = nullptr;    // the forward's
  const float* dO = nullptr;        // ∂L/∂o
  int ld_do = 0;
  const float* dw0_final = nullptr;  // ∂L/∂(the forward's w*_final), each null for zero
  const float* dw1_final = nullptr;
  const float* dw2_final = nullptr;
  float* dq = nullptr;  // OVERWRITTEN
  int ld_dq = 0;
  float* dk = nullptr;  // OVERWRITTEN
  int ld_dk = 0;
  float* dv = nullptr;  // OVERWRITTEN
  int ld_dv = 0;
  float* dlr0 = nullptr;       // [R, H] OVERWRITTEN
  float* dlr1 = nullptr;       // [R, H] OVERWRITTEN
  float* dlr2 = nullptr;       // [R, H] OVERWRITTEN
  float* dmomentum = nullptr;  // [R, H] OVERWRITTEN; must be given exactly when momentum is
  float* dw0 = nullptr;        // [B, H, d_h, d] OVERWRITTEN: of the initial weights
  float* dw1 = nullptr;        // [B, H, d, d_h] OVERWRITTEN
  float* dw2 = nullptr;        // [B, H, d_h, d] OVERWRITTEN
  void* workspace = nullptr;   // lact_backward_workspace_bytes(dims), float-aligned (the chunked
                               // backward: lact_chunked_workspace_bytes(dims))
  std::size_t workspace_bytes = 0;
  CUstream_st* stream = nullptr;
};
void lact_backward(const LactBackwardArgs& args);

// ---- the chunk-parallel form (docs/KERNELS.md, "The chunked form") -------------------------------
// The same functions, inputs, outputs and kept states ([B, H, nc, 6, d_h·d], so either backward
// reads either forward's states), computed as strided-batched matrix products over the B·H heads
// (one batch entry per sequence and head, through `gemm`: its precision, Fp32 / Tf32 / Bf16, is that
// of every product) and small row and elementwise kernels, the host looping over the chunks on the
// stream: per chunk the forward gathers the chunk's tokens of every head into packed [B·H, C, d]
// blocks, takes its products (q W0ᵀ, q W2ᵀ, k W0ᵀ, k W2ᵀ, v W1, the read h W1ᵀ and the three
// weight sums of the step as [d_h, C]×[C, d] products written into the states), and one row kernel
// does the momentum, W + m_c and the renormalisation; the backward walks the chunks in reverse the
// same way. `gemm` must be bound to `args.stream` (the products run on the Gemm's stream, the
// small kernels on args.stream; a Gemm of another stream is refused). Needs a WORKSPACE of
// lact_chunked_workspace_bytes(dims) bytes, float-aligned (one size for both calls; nothing in it
// needs to survive from the forward to the backward): the packed chunk [B·H, 2C', d] of q and k, of
// dO and v, the rates, the d_h-vectors [B·H, 2C', d_h] three times and [B·H, C', d_h] three more,
// outputs [B·H, 3C', d], ∂L/∂W and ∂L/∂m (B·H·6·d_h·d), the row norms and the chunks' mean momenta,
// C' = min(C, T): about 66 MiB at B16 H12 d = d_h = C = 64. The arguments are checked as
// lact_forward's / lact_backward's, plus the workspace and the stream (std::invalid_argument naming
// the field, nothing launched). The shapes are lact_chunked_unsupported's (0 bytes for a refused
// one), and B·H ≤ 65535 (refused naming batch·heads). Muon is refused.
std::size_t lact_chunked_workspace_bytes(const LactDims& dims);
// Empty when the chunked form takes the shape, else why not (one line naming the field): the
// kernels' checks (lact_unsupported) but for the widths, d ≤ 512 and d_h ≤ 2048. Nothing of the
// chunked form is sized by them (no shared-memory tile: the products take any width, the row and
// token kernels loop over it); the bounds keep every index of the workspace and states well inside
// its integer types, and only the widths the tests hold are taken.
std::string lact_chunked_unsupported(const LactDims& dims);

// The forward takes its workspace in LactForwardArgs::workspace / workspace_bytes (which
// lact_forward ignores), the backward in LactBackwardArgs's, each ≥ lact_chunked_workspace_bytes.
class Gemm;
void lact_forward_chunked(const Gemm& gemm, const LactForwardArgs& args);
void lact_backward_chunked(const Gemm& gemm, const LactBackwardArgs& args);

// The backward's arguments that repeat the forward's: the dims, q, k, v with their strides, the
// rates, the momentum, the kept states and the stream. The caller adds dO, the final weights'
// gradients, the gradients and the workspace.
inline LactBackwardArgs lact_backward_args(const LactForwardArgs& f) {
  LactBackwardArgs b;
  b.dims = f.dims;
  b.q = f.q;
  b.ld_q = f.ld_q;
  b.k = f.k;
  b.ld_k = f.ld_k;
  b.v = f.v;
  b.ld_v = f.ld_v;
  b.lr0 = f.lr0;
  b.lr1 = f.lr1;
  b.lr2 = f.lr2;
  b.momentum = f.momentum;
  b.states = f.states;
  b.stream = f.stream;
  return b;
}

// ---- the layer's element-wise ops ----------------------------------------------------------------
// The small passes of LaCT's block (core/src/seq/lact_layer.cpp) that no op of nn_ops.hpp covers,
// each mirroring the CPU statement named (tests/kernels/test_lact_layer_ops.cpp holds them to CPU
// references). CONVENTIONS as nn_ops.hpp: device pointers, fp32, row-major, R rows; "=" overwritten,
// "+=" added to; one line of std::invalid_argument on a bad argument before any launch.
//
// The fast weights' q or k from the projection u [R, D] (lact_front): t = u ⊙ s + b per channel
// (scale s and offset b read at scale[c·ld_sb], offset[c·ld_sb]: a column of qk_scale / qk_offset
// [D, 2]), us = silu(t) (=), and per head of d channels f = us / (‖us‖ + eps) (=, LaCT's l2_norm).
void lact_qk_forward(const float* u, const float* scale, const float* offset, int ld_sb, int R,
                     int D, int d, float eps, float* us, float* f, CUstream_st* stream);
// Its backward from dF [R, D] (lact_l2_heads_backward, then silu′(t)): dt = ∂L/∂t (=), dtu = dt ⊙ u
// (=: the terms of the scale's gradient; the caller sums dt and dtu over the rows), du += dt ⊙ s.
void lact_qk_backward(const float* u, const float* us, const float* scale, const float* offset,
                      int ld_sb, const float* dF, int R, int D, int d, float eps, float* du, float* dt,
                      float* dtu, CUstream_st* stream);
// y = silu(x) (=) and dx += dy ⊙ silu′(x) over n elements (v's silu).
void lact_silu_forward(const float* x, std::size_t n, float* y, CUstream_st* stream);
void lact_silu_backward_add(const float* x, const float* dy, std::size_t n, float* dx,
                            CUstream_st* stream);
// The rates: from z [R, 3H] = x W_lr, zl = (z + bias) + base (=; may alias z) and
// lr_i[r, h] = softplus(zl[r, 3h + i]) [R, H] (=) for i = 0, 1, 2 (head h's three columns: the
// kernels' layout). softplus as mamba2_softplus (z itself above 20).
void lact_rates_forward(const float* z, const float* bias, float base, int R, int H, float* zl,
                        float* lr0, float* lr1, float* lr2, CUstream_st* stream);
// dz[r, 3h + i] = dlr_i[r, h] · softplus′(zl[r, 3h + i]) (=).
void lact_rates_backward(const float* zl, const float* dlr0, const float* dlr1, const float* dlr2,
                         int R, int H, float* dz, CUstream_st* stream);
// The output scale and the branches' sum (lact_back): per head h of d channels,
// o = a + n ⊙ silu(z[r, h] + bias[h]) (=; o may alias a). n, a, o [R, H·d]; z [R, H].
void lact_scale_forward(const float* n, const float* z, const float* bias, const float* a, int R,
                        int H, int d, float* o, CUstream_st* stream);
// Its backward from dO [R, H·d]: dn = dO ⊙ silu(z + b) (=) and
// dz[r, h] = Σ_c dO·n over the head's channels · silu′(z + b) (=).
void lact_scale_backward(const float* n, const float* z, const float* bias, const float* dO, int R,
                         int H, int d, float* dn, float* dz, CUstream_st* stream);
// dst[i·stride] += src[i], i < n (a column of qk_scale's or qk_offset's gradient [D, 2]).
void lact_add_strided(const float* src, int n, float* dst, int stride, CUstream_st* stream);

// ---- the whole layer -------------------------------------------------------------------------------
// LactLayer::forward_train and backward (core/include/tttlab/seq/lact_layer.hpp, docs/MATH.md
// §11.10) for a batch of B sequences, statement by statement over the ops in fp32 storage
// (model/lact_layer.cpp): the qkv projection; the sliding-window softmax attention on RoPE(q),
// RoPE(k), v (attention.hpp, ALWAYS the fp32 CUDA-core kernels: only they take a window); the fast
// weights' q, k (scale, offset, silu, per-head L2, RoPE) and v = silu(v); the rates (softplus) and
// the momentum (sigmoid, eta_forward over R rows of one token); the inner loop above from the
// learnable initial weights broadcast to every sequence (their gradients summed over the batch):
// the chunk-parallel form (lact_forward_chunked / _backward_chunked) on `inner_gemm`'s products
// when one is given (fp32 or tf32: the precisions its tests hold), else the correct-first kernels
// (lact_forward / lact_backward, fp32, which refuse d_f > 128 and d_h > 512); the per-head RMSNorm, the output scale and o_proj. The
// other products are the step's (Mamba2Product's contract, fp32 operands).
using LactProduct = Mamba2Product;

// LactLayerConfig (tttlab/seq/lact_layer.hpp) for a batch of B sequences of T tokens.
struct LactLayerDims {
  int batch = 1, seq_len = 1;
  int width = 64;        // D
  int attn_heads = 4;    // H_a (d_a = D / H_a)
  int lact_heads = 2;    // H_f (d_f = D / H_f)
  int inter_multi = 1;   // d_h = inter_multi · d_f
  int chunk = 64;        // C
  int window = 64;       // W
  bool momentum = true;  // use_momentum
  bool muon = false;     // refused (lact_unsupported)
  float base_lr = 1e-3f, norm_eps = 1e-5f;
  int rows() const { return batch * seq_len; }
  int attn_head_dim() const { return attn_heads > 0 ? width / attn_heads : 0; }
  int fw_head_dim() const { return lact_heads > 0 ? width / lact_heads : 0; }
  int fw_hidden() const { return inter_multi * fw_head_dim(); }
  LactDims inner() const;  // the inner loop's shape
};
// Empty when the layer runs on the GPU, else why not (one line naming the field): positive sizes,
// the heads dividing the width, an even attention head dim of at most 128 (the attention kernels),
// window >= 1, and the chunked inner loop's limits, which the training step runs
// (lact_chunked_unsupported: d_f <= 512, d_h <= 2048, no muon).
std::string lact_layer_unsupported(const LactLayerDims& dims);

// The parameters in LactParams' layouts ([in, out] projections; qk_scale, qk_offset [D, 2]; w0, w2
// [H_f, d_h, d_f], w1 [H_f, d_f, d_h] stacked over the heads; biases [N]; ttt_norm [d_f]), plus the
// RoPE tables of positions 0..T−1 (rope_tables(d_a, T, rope_theta): [T, d_a/2] each, the caller's).
// momentum_proj, momentum_bias null without momentum. Gradients alike (no tables), ADDED TO.
struct LactLayerParams {
  const float *qkv = nullptr, *qk_scale = nullptr, *qk_offset = nullptr, *w0 = nullptr,
              *w1 = nullptr, *w2 = nullptr, *lr_proj = nullptr, *lr_bias = nullptr,
              *momentum_proj = nullptr, *momentum_bias = nullptr, *scale_proj = nullptr,
              *scale_bias = nullptr, *ttt_norm = nullptr, *o_proj = nullptr;
  const float *rope_cos = nullptr, *rope_sin = nullptr;
};
struct LactLayerGrads {
  float *qkv = nullptr, *qk_scale = nullptr, *qk_offset = nullptr, *w0 = nullptr, *w1 = nullptr,
        *w2 = nullptr, *lr_proj = nullptr, *lr_bias = nullptr, *momentum_proj = nullptr,
        *momentum_bias = nullptr, *scale_proj = nullptr, *scale_bias = nullptr,
        *ttt_norm = nullptr, *o_proj = nullptr;
};

// What the forward keeps, in one allocation of lact_layer_cache_floats(dims) floats, carved by
// lact_layer_cache: [R, D] each: q, k, v, qa, ka (after RoPE), qs, ks (silu(q̃), silu(k̃)), qf, kf
// (the fast weights' q, k), vs (silu(v)), oa (the attention's output), of (the fast weights'), n
// (RMSNorm(of)·w), o (oa + y_f, o_proj's input); lr_z [R, 3 H_f]; lr0, lr1, lr2, mom, sz [R, H_f];
// the attention's lse [B, H_a, T]; the initial weights broadcast to the batch (w0b, w2b
// [B, H_f, d_h, d_f], w1b [B, H_f, d_f, d_h]); the inner loop's kept states (lact_state_floats);
// inner_ws, the chunk-parallel forward's scratch (lact_chunked_workspace_bytes, not read after the
// forward).
struct LactLayerCache {
  float *q = nullptr, *k = nullptr, *v = nullptr, *qa = nullptr, *ka = nullptr, *qs = nullptr,
        *ks = nullptr, *qf = nullptr, *kf = nullptr, *vs = nullptr, *oa = nullptr, *of = nullptr,
        *n = nullptr, *o = nullptr, *lr_z = nullptr, *lr0 = nullptr, *lr1 = nullptr,
        *lr2 = nullptr, *mom = nullptr, *sz = nullptr, *lse = nullptr, *w0b = nullptr,
        *w1b = nullptr, *w2b = nullptr, *states = nullptr, *inner_ws = nullptr;
};
std::size_t lact_layer_cache_floats(const LactLayerDims& dims);
LactLayerCache lact_layer_cache(const LactLayerDims& dims, float* base);
// The backward's scratch, in floats (16-byte aligned base).
std::size_t lact_layer_workspace_floats(const LactLayerDims& dims);

// out [R, D] = the layer applied to x [R, D], each sequence from the empty prefix. The cache and
// workspace may be carved for a larger batch than dims.batch (the same T). x is read only by the
// products (with bf16 products it may be a buffer whose bf16 shadow the products read).
// inner_gemm: the inner loop's products (see above), null for the correct-first kernels.
void lact_layer_forward(const LactProduct& product, const Gemm* inner_gemm,
                        const LactLayerDims& dims, const LactLayerParams& p, const float* x,
                        const LactLayerCache& cache, float* out, CUstream_st* stream);
// From dOut [R, D]: dx [R, D] (OVERWRITTEN, or ADDED TO with accumulate) and every parameter's
// gradient ADDED TO g.
void lact_layer_backward(const LactProduct& product, const Gemm* inner_gemm,
                         const LactLayerDims& dims,
                         const LactLayerParams& p, const float* x, const LactLayerCache& cache,
                         const float* dOut, const LactLayerGrads& g, float* dx, bool accumulate,
                         float* workspace, CUstream_st* stream);

}  // namespace tttlab::kernels
