// tttlab/kernels/titans.hpp — Titans' memory (the inner loop of flash-linear-attention's linear
// Titans) on the GPU, forward and backward, for a whole batch (docs/MATH.md §11.9; the CPU functions
// it computes are titans_primal and titans_backward, tttlab/fastweight/titans.hpp, run once per
// sequence and head).
//
// Per head of one sequence, memory M [d, d] and momentum S [d, d], row-vector convention, with c(t)
// the first token of t's mini-batch of b tokens and M_start the memory before it:
//   z = k_t M_start,  ẑ = LN(z) (biased variance, ε),  e = w ⊙ ẑ + bias − v_t + k_t,  g = e ⊙ w,
//   u_t = D·g − (Σg + ẑ·Σ(g ⊙ ẑ)) / (σ D)                       (FLA's u, D·g outside the division)
//   S_t = η_t S_{t−1} − 2 θ_t k_tᵀ u_t,  M_t = (1 − α_t) M_{t−1} + S_t,
//   o_t = y + w ⊙ LN(y) + bias,  y = q_t M_t                     (read after the write)
// with the CPU's order of operations; M starts at M0 (or zero), S at zero.
//
// DESIGN (docs/KERNELS.md, "Titans' memory (recurrent)"): the recurrent form, correct first, in
// fp32, a sibling of matrix_rules.hpp. One block of 256 threads per (sequence, head) walks the tokens
// in order with M, S and M_start in registers: thread (g, c) holds column c and the rows g, g + G, …
// (G = 256 / ⌈d⌉₃₂ = 8 or 4 row groups), so a column sum (k·M_start, q·M, k·G_S) is a register sum and
// one pass over G partials in shared memory, and a row sum (dq, dk) a warp reduction and one pass
// over ≤ 2 warps. The tokens go in segments of up to 16 of one mini-batch, whose gradients are all
// taken at the same M_start: the segment's column partials of z = k·M_start are written at once, a
// warp a token forms the write's d-vectors (z, ẑ, g, u with warp shuffles), each thread runs the
// segment's state steps in its registers, writing its partials of y = q·M after each, and a warp a
// token reads the outputs out. Four barriers a segment, in the forward and in each of the backward's
// two walks (the rerun; the reverse walk: G_M and G_S in registers with every reduction written as
// partials, then u's backward a warp a token, then the rank-one updates of M_start's gradient). The
// row sums of a token's RPT rows are one exchange-and-halve reduction (RPT − 1 + 5 − log2 RPT
// shuffles, not 5·RPT). Every sum has a fixed order and every result one writer: no atomics, the
// same bits run to run; dw and dbias are summed over the batch by a second kernel, sequences in
// order.
//
// THE CHUNKED BACKWARD (TitansBackwardForm::chunked, what `automatic` runs for b ≤ 16): the same
// gradients as titans_backward_chunked computes them on the CPU, a mini-batch at a time in reverse
// through the closed form Y = diag(β) Q M_p + diag(f) Q S_p − 2 (QKᵀ ⊙ G) U: products of [b, d],
// [b, b] and [d, d] matrices in shared memory on the CUDA cores, one block of 512 threads per
// (sequence, head). It reads the same stored states and workspace (the mini-batches' start states
// of a chunk, rerun from its stored M, S, go where the token walk keeps its per-token states).
//
// WHAT IS STORED, AND WHY. The backward needs M_{t−1}, S_{t−1} and M_start at every token, walked in
// reverse, and the recurrence can only be run forward (undoing token t divides by η_t and needs u_t,
// which is taken at the earlier M_start). So, as the matrix rules:
//   states     [B, H, nc, 2, d, d]: the forward writes M then S before each chunk of C tokens
//              (nc = ⌈T / C⌉; chunk 0's are M0, or zero, and zero). 2·B·H·nc·d² floats
//              (titans_state_floats). C is a multiple of b, so a chunk starts a mini-batch and its M is
//              that mini-batch's M_start.
//   workspace  per (sequence, head): the chunk's ≤ C states M_{t−1}, S_{t−1} (2·C·d²), and per token the
//              d-vectors dy, u, ẑ, g, e and the scalars σ, Σg, Σ(g ⊙ ẑ) (5d + 4), written by the rerun
//              of the chunk from its stored M, S; and the partial dw, dbias of the sequence (2d).
//              titans_backward_workspace_bytes. The states are read back only by the thread that
//              wrote them; the vectors cross threads after a barrier.
//   The backward then walks the chunk's tokens in reverse with ∂L/∂M, ∂L/∂S and the mini-batch start's
//   gradient in registers, titans_backward's step, forming M_t again from M_{t−1}, S_{t−1} for
//   dq_t = dy_t M_tᵀ. The forward's work is done twice in all.
//
// CONVENTIONS, as matrix_rules.hpp: this header includes neither CUDA nor Eigen headers. Every
// pointer is a DEVICE pointer, fp32; R = B·T rows, sequence n's token t at row n·T + t, rows with the
// given leading dimensions:
//   q, k, v, o, dO, dq, dk, dv   [R, ≥ H·d], head h at columns h·d … h·d + d − 1
//   theta, alpha, eta and their gradients   [R, H] contiguous: column h for head h
//   w, bias, dw, dbias   [H, d] contiguous (the LayerNorm's weight and bias, shared by the batch;
//                        their gradients are summed over it)
//   M0, M_final, dM_final, dM0   [B, H, d, d] contiguous, row-major (M maps a key row to a value row)
// The layer's θ ∈ (0, 1/d), α ∈ (0, 1), η ∈ (0, 1) and L2-normalised q, k are not checked (device
// data). Calls are asynchronous on `stream`, validate their arguments first (std::invalid_argument,
// one line naming the field, nothing launched) and throw std::runtime_error when a launch fails. No
// global state.
// SHAPES: any B ≤ 65535, H ≥ 1, T ≥ 1 (T need not be a multiple of b or C), b ≥ 1, C a multiple of b,
// 1 ≤ d ≤ 64 (the backward holds four d × d matrices in registers: d = 128 would not fit).
#pragma once

#include <cstddef>
#include <string>

#include "tttlab/kernels/mamba2.hpp"

struct CUstream_st;

namespace tttlab::kernels {

struct TitansDims {
  int batch = 1;        // B
  int seq_len = 1;      // T
  int heads = 1;        // H
  int dim = 64;         // d = d_k = d_v (the inner loss has a residual k)
  int mini_batch = 16;  // b: gradients are taken at the memory of the mini-batch's start
  int chunk = 64;       // C, a multiple of b: tokens between two stored states
  int chunks() const { return (seq_len + chunk - 1) / chunk; }
};

// Empty when the kernels take the shape, else why not (one line, naming the field).
std::string titans_unsupported(const TitansDims& dims);
// Floats of `states` ([B, H, nc, 2, d, d]).
std::size_t titans_state_floats(const TitansDims& dims);
// Bytes of the backward's workspace (floats: B·H·(C·(2d² + 5d + 4) + 2d)).
std::size_t titans_backward_workspace_bytes(const TitansDims& dims);

struct TitansForwardArgs {
  TitansDims dims;
  const float* q = nullptr;
  int ld_q = 0;
  const float* k = nullptr;
  int ld_k = 0;
  const float* v = nullptr;
  int ld_v = 0;
  const float* theta = nullptr;  // [R, H]
  const float* alpha = nullptr;  // [R, H]
  const float* eta = nullptr;    // [R, H]
  const float* w = nullptr;      // [H, d]
  const float* bias = nullptr;   // [H, d]
  const float* M0 = nullptr;     // [B, H, d, d], or null for a zero initial memory
  float eps = 1e-6f;             // the LayerNorms' ε (both: the write's and the read's)
  float* o = nullptr;            // OVERWRITTEN
  int ld_o = 0;
  float* M_final = nullptr;  // [B, H, d, d] OVERWRITTEN with M_T, or null (not wanted)
  float* states = nullptr;   // OVERWRITTEN with M, S before each chunk, for the backward; or null
  CUstream_st* stream = nullptr;
};
void titans_forward(const TitansForwardArgs& args);

// Which backward runs. Both compute titans_backward's gradients (to fp32 rounding): `tokens` walks
// the tokens in reverse (the recurrent kernel, any b); `chunked` walks the mini-batches in reverse
// through the chunked form's closed form (titans_backward_chunked; b ≤ 16). `automatic` takes the
// chunked form where it applies.
enum class TitansBackwardForm { automatic, chunked, tokens };

struct TitansBackwardArgs {
  TitansDims dims;  // as in the forward, the same chunk
  TitansBackwardForm form = TitansBackwardForm::automatic;
  const float* q = nullptr;
  int ld_q = 0;
  const float* k = nullptr;
  int ld_k = 0;
  const float* v = nullptr;
  int ld_v = 0;
  const float* theta = nullptr;
  const float* alpha = nullptr;
  const float* eta = nullptr;
  const float* w = nullptr;
  const float* bias = nullptr;
  float eps = 1e-6f;
  const float* states = nullptr;  // the forward's
  const float* dO = nullptr;      // ∂L/∂o
  int ld_do = 0;
  const float* dM_final = nullptr;  // ∂L/∂M_T [B, H, d, d], or null for zero
  float* dq = nullptr;              // OVERWRITTEN
  int ld_dq = 0;
  float* dk = nullptr;  // OVERWRITTEN
  int ld_dk = 0;
  float* dv = nullptr;  // OVERWRITTEN
  int ld_dv = 0;
  float* dtheta = nullptr;    // [R, H] OVERWRITTEN
  float* dalpha = nullptr;    // [R, H] OVERWRITTEN
  float* deta = nullptr;      // [R, H] OVERWRITTEN
  float* dw = nullptr;        // [H, d] OVERWRITTEN with the sum over the batch
  float* dbias = nullptr;     // [H, d] OVERWRITTEN with the sum over the batch
  float* dM0 = nullptr;       // [B, H, d, d] OVERWRITTEN, or null (not wanted)
  void* workspace = nullptr;  // titans_backward_workspace_bytes(dims), float-aligned
  std::size_t workspace_bytes = 0;
  CUstream_st* stream = nullptr;
};
void titans_backward(const TitansBackwardArgs& args);

// The backward's arguments that repeat the forward's: the dims, q, k, v with their strides, θ, α, η,
// w, bias, ε, the kept states and the stream. The caller adds dO, dM_final, the gradients and the
// workspace.
inline TitansBackwardArgs titans_backward_args(const TitansForwardArgs& f) {
  TitansBackwardArgs b;
  b.dims = f.dims;
  b.q = f.q;
  b.ld_q = f.ld_q;
  b.k = f.k;
  b.ld_k = f.ld_k;
  b.v = f.v;
  b.ld_v = f.ld_v;
  b.theta = f.theta;
  b.alpha = f.alpha;
  b.eta = f.eta;
  b.w = f.w;
  b.bias = f.bias;
  b.eps = f.eps;
  b.states = f.states;
  b.stream = f.stream;
  return b;
}

// ---- the whole layer -------------------------------------------------------------------------------
// TitansLayer::forward_train and backward (core/include/tttlab/seq/titans_layer.hpp, docs/MATH.md
// §11.9) for a batch of B sequences, statement by statement over the ops in fp32 storage
// (model/titans_layer.cpp): DeltaNet's block around the inner loop (model/short_conv_block.hpp:
// q, k, v = silu(conv(x W)), q̂ and k̂ L2-normalised per head with no 1/√d, the gated output
// y = RMSNorm(o_h)·w ⊙ silu(x W_g), out = y W_o), the gates θ = σ(x W_θ + b_θ)/d,
// α = σ(x W_α + b_α), η = σ(x W_η + b_η) [R, H] (eta_forward / eta_backward, nn_ops.hpp, over R
// rows of one token), and the memory above (titans_forward / titans_backward, always fp32) from
// M_0 = 0. The products are the step's (Mamba2Product's contract, fp32 operands).
using TitansProduct = Mamba2Product;

// TitansLayerConfig (tttlab/seq/titans_layer.hpp) for a batch of B sequences of T tokens.
struct TitansLayerDims {
  int batch = 1, seq_len = 1;
  int width = 64, heads = 4, conv_kernel = 4;
  int mini_batch = 16;  // b
  float ln_eps = 1e-6f, norm_eps = 1e-6f, l2_eps = 1e-6f;
  int rows() const { return batch * seq_len; }
  int head_dim() const { return heads > 0 ? width / heads : 0; }
  // The memory's shape; its chunk (tokens between two kept states) is the largest multiple of b not
  // above 64, or b itself where b > 64.
  TitansDims memory() const;
};
// Empty when the layer runs on the GPU, else why not (one line): the memory's limits (d <= 64),
// conv_kernel <= 16.
std::string titans_layer_unsupported(const TitansLayerDims& dims);

// The parameters in TitansParams' layouts ([in, out] projections, convolutions [D, K], biases [H],
// the memory's LayerNorm [H, d], o_norm [d]). Gradients alike, ADDED TO.
struct TitansLayerParams {
  const float *q_proj = nullptr, *k_proj = nullptr, *v_proj = nullptr, *q_conv = nullptr,
              *k_conv = nullptr, *v_conv = nullptr, *theta_proj = nullptr, *theta_bias = nullptr,
              *alpha_proj = nullptr, *alpha_bias = nullptr, *eta_proj = nullptr,
              *eta_bias = nullptr, *ln_weight = nullptr, *ln_bias = nullptr, *o_norm = nullptr,
              *g_proj = nullptr, *o_proj = nullptr;
};
struct TitansLayerGrads {
  float *q_proj = nullptr, *k_proj = nullptr, *v_proj = nullptr, *q_conv = nullptr,
        *k_conv = nullptr, *v_conv = nullptr, *theta_proj = nullptr, *theta_bias = nullptr,
        *alpha_proj = nullptr, *alpha_bias = nullptr, *eta_proj = nullptr, *eta_bias = nullptr,
        *ln_weight = nullptr, *ln_bias = nullptr, *o_norm = nullptr, *g_proj = nullptr,
        *o_proj = nullptr;
};

// What the forward keeps, in one allocation of titans_layer_cache_floats(dims) floats, carved by
// titans_layer_cache: the shared block's intermediates (uq … kn, o, n, gate, y, the zero bias:
// [R, D] each but the bias [D]), θ, α, η [R, H], and the memory's kept states
// (titans_state_floats).
struct TitansLayerCache {
  float *uq = nullptr, *uk = nullptr, *uv = nullptr, *cq = nullptr, *ck = nullptr, *cv = nullptr,
        *aq = nullptr, *ak = nullptr, *av = nullptr, *qn = nullptr, *kn = nullptr, *o = nullptr,
        *n = nullptr, *gate = nullptr, *y = nullptr, *zero_bias = nullptr, *theta = nullptr,
        *alpha = nullptr, *eta = nullptr, *states = nullptr;
};
std::size_t titans_layer_cache_floats(const TitansLayerDims& dims);
TitansLayerCache titans_layer_cache(const TitansLayerDims& dims, float* base);
// The backward's scratch, in floats (16-byte aligned base).
std::size_t titans_layer_workspace_floats(const TitansLayerDims& dims);

// out [R, D] = the layer applied to x [R, D], each sequence from the empty prefix. The cache and
// workspace may be carved for a larger batch than dims.batch (the same T).
void titans_layer_forward(const TitansProduct& product, const TitansLayerDims& dims,
                          const TitansLayerParams& p, const float* x, const TitansLayerCache& cache,
                          float* out, CUstream_st* stream);
// From dOut [R, D]: dx [R, D] (OVERWRITTEN, or ADDED TO with accumulate) and every parameter's
// gradient ADDED TO g.
void titans_layer_backward(const TitansProduct& product, const TitansLayerDims& dims,
                           const TitansLayerParams& p, const float* x,
                           const TitansLayerCache& cache, const float* dOut,
                           const TitansLayerGrads& g, float* dx, bool accumulate, float* workspace,
                           CUstream_st* stream);

}  // namespace tttlab::kernels
