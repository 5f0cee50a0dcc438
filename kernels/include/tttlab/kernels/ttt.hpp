// tttlab/kernels/ttt.hpp — the TTT inner loop on the GPU (TTT-Linear and TTT-MLP, fp32; the
// TTT-Linear forward also with bf16 inputs and output, version Bf16).
//
// The kernels compute exactly the functions of the CPU engine (core/include/tttlab/ttt/inner.hpp,
// inner_backward.hpp; maths in docs/MATH.md §3–§6 and §7) for all B·H heads of a batch at once.
// The tests (tests/kernels/test_ttt_*.cpp) compare every output with the CPU engine run in fp64.
//
// This header includes neither CUDA nor Eigen headers. Every pointer is a DEVICE pointer (cudaMalloc)
// unless stated otherwise; the caller owns all memory. Calls are asynchronous on `stream` (nullptr:
// the legacy default stream), validate their arguments first (std::invalid_argument, one line, nothing
// launched) and throw std::runtime_error naming the CUDA call when the runtime reports an error.
// THREADING: no global state (each launch sets its kernel's shared-memory limit on the current
// device); calls may come from any thread.
// ALIGNMENT: the tensor-core kernels need the pointers they stream 16-byte aligned (cudaMalloc gives
// 256); Default runs the fallback for unaligned pointers.
//
// LAYOUTS (row-major, fp32 (bf16 bit patterns where a field says so), contiguous, as in
// tttlab/tensor.hpp: a token is a row, heads are column blocks, linear maps are stored [in, out] and
// applied as z = x·W + b):
//   Q, K, V, O, dQ, dK, dV, dO   [B, T, H·d]   element (n, t, h, c) at (n·T + t)·H·d + h·d + c
//   lambda, dlambda              [B, H, T]     λ_t of head h of sequence n at (n·H + h)·T + t
//   tau, dtau                    [b]           τ_i, i = 1..b, shared by all heads and sequences
//   ln_weight, ln_bias (γ, β)    [H, d]        the inner LayerNorm of each head (loss and output)
//   TTT-Linear state  W [H, d, d] (row k = input feature k), b [H, d]
//   TTT-MLP state     W1 [H, d, 4d], b1 [H, 4d], W2 [H, 4d, d], b2 [H, d]
//   Per-sequence states (decode, final states, per-sequence initial states) add a leading B axis:
//   W [B, H, d, d] etc., sequence n's head h at (n·H + h)·d·d.
//
// SHAPES: 1 ≤ b ≤ 64, 16 ≤ d ≤ 128 with d even, any T ≥ 1 (T need not be a multiple of b: the last,
// short mini-batch is read out and left uncommitted, exactly as the CPU engine does), any B, H ≥ 1.
// A forward starts at a mini-batch boundary (position 0) from the given initial state.
#pragma once

#include <cstddef>
#include <cstdint>

struct CUstream_st;  // = cudaStream_t, without the CUDA headers

namespace tttlab::kernels {

struct TttDims {
  int batch = 1;       // B
  int heads = 1;       // H
  int seq_len = 1;     // T
  int head_dim = 64;   // d
  int mini_batch = 16; // b
};

// The options of tttlab::InnerOptions that the kernels support (model chosen by the function).
struct TttOptions {
  bool layer_norm = true;  // f(k) = LN(kW + c) and O = [Q +] LN(Z̄); off: no LN anywhere
  bool residual = true;    // target V − K and output Q + ...; off: target V, output without Q
  bool bias = true;        // inner bias c (b0) exists and learns; off: c ≡ 0, b0 is not read
  float ln_eps = 1e-6f;     // ε of the inner LayerNorm; callers pass ModelConfig::ttt_ln_eps
};

// The inputs of every forward and backward of the sequence (both models): the tensors of the
// layouts above.
struct TttSequenceInputs {
  TttDims dims;
  TttOptions opt;
  const float* Q = nullptr;          // [B, T, H·d]
  const float* K = nullptr;          // [B, T, H·d]
  const float* V = nullptr;          // [B, T, H·d]
  const float* lambda = nullptr;     // [B, H, T]
  const float* tau = nullptr;        // [b]
  const float* ln_weight = nullptr;  // γ [H, d] (read only with layer_norm)
  const float* ln_bias = nullptr;    // β [H, d] (read only with layer_norm)
};

// The inputs of a decode step (both models): one token per sequence.
struct TttDecodeInputs {
  TttDims dims;
  TttOptions opt;
  const float* q = nullptr;          // [B, H·d], one token per sequence
  const float* k = nullptr;
  const float* v = nullptr;
  const float* lambda = nullptr;     // [B, H]
  const float* tau = nullptr;        // [b]
  const float* ln_weight = nullptr;  // [H, d] (read with layer_norm)
  const float* ln_bias = nullptr;
};

// Number of mini-batches, ceil(T / b), and of checkpoints kept by a forward with group g ≥ 1: the
// state at the start of mini-batches 0, g, 2g, … , i.e. ceil(n / g).
int ttt_num_mini_batches(const TttDims& dims);
int ttt_num_checkpoints(const TttDims& dims, int checkpoint_group);

// Which kernel runs the TTT-Linear forward (docs/KERNELS.md has the design and measured time of each).
enum class TttLinearForwardVersion {
  Default = 0,  // tensor cores, 3xTF32 (fp32-level accuracy: split operands, a·b ≈ a_hi·b_hi +
  // a_hi·b_lo + a_lo·b_hi) where b == 16, d ∈ {16, 32, 64, 128} and Q, K, V, O are
  // 16-byte aligned; the Fallback elsewhere
  Fallback = 1,  // one block per (sequence, head), fp32 CUDA cores; every supported shape
  Tf32 = 2,      // Default's tensor-core kernel with one tf32 product per term (operands truncated
                 // to 10-bit mantissas, relative error ~1e-3): what the training step runs when its
                 // GEMMs are tf32. Same shapes and alignment as Default's fast path, else an error.
  Bf16 = 3,  // bf16 inputs and output (Q_bf16, K_bf16, V_bf16 → O_bf16, in place of Q, K, V, O)
             // and bf16 products with fp32 accumulation (7-bit mantissas, ~4e-3 relative per
             // product); the state, both LayerNorms and every sum stay fp32, and so do the
             // checkpoints and final states. Same shapes as Tf32, else an error.
};

// ---- TTT-Linear, dual form, forward --------------------------------------------------------------

struct TttLinearForwardArgs : TttSequenceInputs {
  const float* W0 = nullptr;        // [H, d, d], or [B, H, d, d] with per_sequence_init
  const float* b0 = nullptr;        // [H, d], or [B, H, d] with per_sequence_init (read with bias)
  bool per_sequence_init = false;
  float* O = nullptr;               // [B, T, H·d], written
  // Version Bf16 only, and then in place of Q, K, V, O (which must be null): the same tensors as bf16
  // bit patterns ([B, T, H·d], 16-byte aligned; round to nearest even, as convert_to_bf16 writes them).
  const std::uint16_t* Q_bf16 = nullptr;
  const std::uint16_t* K_bf16 = nullptr;
  const std::uint16_t* V_bf16 = nullptr;
  std::uint16_t* O_bf16 = nullptr;

  // Optional (nullptr: not written). Checkpoints for the backward: the committed state at the start
  // of every checkpoint_group-th mini-batch, [B, H, ttt_num_checkpoints, d, d] and [.., d].
  float* checkpoint_W = nullptr;
  float* checkpoint_b = nullptr;
  int checkpoint_group = 0;  // ≥ 1 when checkpoints are requested
  // Optional (nullptr: not written). The streaming state after the last token, for decode
  // (ttt_linear_decode_step): the committed state [B, H, d, d], [B, H, d] and the accumulators of the
  // open mini-batch Σ_j λ_j ∇ℓ_j (zero when T % b == 0); the position is T % b.
  float* final_W = nullptr;
  float* final_b = nullptr;
  float* final_acc_W = nullptr;
  float* final_acc_b = nullptr;

  // Where B·H blocks fit in one wave at one per SM, the tensor-core kernels (Default, Tf32) hold
  // each of their SMs alone, as TttLinearBackwardArgs::whole_sm: for work run beside the forward on
  // another stream. Same results; no effect elsewhere.
  bool whole_sm = false;
  // Where the tensor-core kernel runs (Default or Tf32), head_dim ≤ 64 and B·H blocks fit in one
  // wave at one per SM (the training step's shapes), and for Tf32 at head_dim 64 also at two per
  // SM: each block runs two groups of warps, one carrying the state W through the mini-batches
  // while the other reads the output out (docs/KERNELS.md, "TTT-Linear forward"). The same output
  // bit for bit. false: one group.
  bool two_roles = true;
  TttLinearForwardVersion version = TttLinearForwardVersion::Default;
  CUstream_st* stream = nullptr;
};

void ttt_linear_forward(const TttLinearForwardArgs& args);

// Whether a version supports these dims/options (Default: always true for valid dims).
bool ttt_linear_forward_supports(TttLinearForwardVersion version, const TttDims& dims);

// ---- TTT-Linear backward (second order, through the dual form) -----------------------------------
//
// Given dO, the gradients of a forward run from the shared initial state (W0, b0) [H, d, d], [H, d]
// (per_sequence_init = false). The checkpoints are those that forward wrote with the same group g;
// the backward recomputes the states inside each group (memory: n/g checkpoints plus g states per
// head of workspace). Outputs are overwritten:
//   dQ, dK, dV [B, T, H·d];  dlambda [B, H, T];  dtau [b] (summed over B, H);  dln_weight, dln_bias
//   [H, d] and dW0 [H, d, d], db0 [H, d] (summed over B). With bias off db0 is written as zeros; with
//   layer_norm off dln_weight and dln_bias are zeros. The result is deterministic (no atomics).
// Versions (docs/KERNELS.md has the design and measured time of each); Default and Fallback are
// 3xTF32 on tensor cores:
enum class TttBackwardVersion {
  Default = 0,   // the fused register kernel where mini_batch == 16, head_dim ∈ {16, 32, 64}, the
                 // device's shared memory holds its block (105 KB at head_dim 64) and every pointer
                 // it streams (Q, K, V, dO, dQ, dK, dV, checkpoints, workspace) is 16-byte aligned;
                 // the Fallback elsewhere
  Fallback = 1,  // block-wide tensor-core products; every supported shape
  Tf32 = 2,      // the fused kernel with one tf32 product per term (operands truncated to a 10-bit
                 // mantissa, ~1e-3 relative per product): what the training step runs when its GEMMs
                 // are tf32. The fused kernel's shapes and alignment only, else an error.
};

struct TttLinearBackwardArgs : TttSequenceInputs {
  const float* checkpoint_W = nullptr;  // from ttt_linear_forward with the same checkpoint_group
  const float* checkpoint_b = nullptr;  // (read with bias)
  int checkpoint_group = 1;
  const float* dO = nullptr;  // [B, T, H·d]
  float* dQ = nullptr;
  float* dK = nullptr;
  float* dV = nullptr;
  // Optional, version Tf32 only: dV written here instead, rounded to bf16 (to nearest, ties to even)
  // as bit patterns, [B, T, H·d]; dV may then be null. For training with bf16 products, whose next
  // readers of dV are products.
  std::uint16_t* dV_bf16 = nullptr;
  float* dlambda = nullptr;
  float* dtau = nullptr;
  float* dln_weight = nullptr;
  float* dln_bias = nullptr;
  float* dW0 = nullptr;
  float* db0 = nullptr;
  void* workspace = nullptr;  // ttt_linear_backward_workspace_bytes(dims, checkpoint_group) bytes
  std::size_t workspace_bytes = 0;
  // Where B·H blocks fit in one wave at one per SM, the fused kernel holds each of its SMs alone
  // (asks for the SM's whole shared memory): for work run beside it on another stream, which then
  // takes the idle SMs instead of slowing the blocks' chains. Same results; no effect elsewhere.
  bool whole_sm = false;
  // Where the fused kernel runs (Default or Tf32), checkpoint_group is 1 and B·H blocks fit in one
  // wave at one per SM (the training step's shapes): each block runs two groups of warps, one
  // recomputing the next mini-batch's forward and output-LN backward while the other carries
  // dW' through the current one (docs/KERNELS.md, "TTT-Linear backward"). The same sums per
  // element, except dγ and dβ, summed per group and then added. false: one group, for comparisons.
  bool two_roles = true;
  TttBackwardVersion version = TttBackwardVersion::Default;
  CUstream_st* stream = nullptr;
};

// Enough for both versions.
std::size_t ttt_linear_backward_workspace_bytes(const TttDims& dims, int checkpoint_group);
void ttt_linear_backward(const TttLinearBackwardArgs& args);
// Whether a version supports these dims (Default and Fallback do, for valid dims; Tf32 where the
// fused kernel does, alignment apart).
bool ttt_linear_backward_supports(TttBackwardVersion version, const TttDims& dims);

// ---- TTT-Linear decode: one token per sequence, primal form (docs/MATH.md §6) --------------------
//
// Every sequence of the batch is at the same position `pos` (0 ≤ pos < b) of its mini-batch: pos
// tokens of it were consumed before. The token's gradient is taken at the committed state, added
// (λ-weighted) to the accumulators, and the output is read with W_t = W − τ_{pos+1}·A_W,
// c_t = c − τ_{pos+1}·A_c. When pos + 1 == b the mini-batch is committed: W ← W_t, c ← c_t and the
// accumulators are zeroed. The caller advances pos to (pos + 1) % b. dims.seq_len is ignored.
struct TttLinearDecodeArgs : TttDecodeInputs {
  float* W = nullptr;      // [B, H, d, d]  committed state, read and (at a commit) written
  float* b = nullptr;      // [B, H, d]     (with bias)
  float* acc_W = nullptr;  // [B, H, d, d]  accumulators, read and written
  float* acc_b = nullptr;  // [B, H, d]     (with bias)
  int pos = 0;
  float* o = nullptr;      // [B, H·d], written
  CUstream_st* stream = nullptr;
};

void ttt_linear_decode_step(const TttLinearDecodeArgs& args);

// ---- TTT-MLP decode: one token per sequence, primal form (docs/MATH.md §5, §6) ---------------------
//
// The TTT-MLP counterpart of ttt_linear_decode_step, with the same conventions: every sequence is at
// position `pos` (0 ≤ pos < b) of its mini-batch. The token's gradients at the committed state
//   z1 = k·W1 + b1, x2 = gelu(z1), z2 = x2·W2 + b2, g2 = ∂ℓ/∂z2 (LN + L2 loss, target v − k or v),
//   g1 = (g2·W2ᵀ) ⊙ gelu′(z1)
// are added λ-weighted to the accumulators (A_W1 += λ kᵀg1, A_b1 += λ g1, A_W2 += λ x2ᵀg2,
// A_b2 += λ g2); the output is read with W_t = W − τ_{pos+1}·A (all four tensors):
//   o = [q +] LN(gelu(q·W1_t + b1_t)·W2_t + b2_t).
// When pos + 1 == b the state is committed (W ← W_t) and the accumulators are zeroed. The caller
// advances pos to (pos + 1) % b. dims.seq_len is ignored. GELU is the tanh form. One block of 256
// threads per (sequence, head); the hidden width is 4d (≤ 512).
struct TttMlpDecodeArgs : TttDecodeInputs {
  float* W1 = nullptr;      // [B, H, d, 4d]  committed state, read and (at a commit) written
  float* b1 = nullptr;      // [B, H, 4d]     (with bias)
  float* W2 = nullptr;      // [B, H, 4d, d]
  float* b2 = nullptr;      // [B, H, d]      (with bias)
  float* acc_W1 = nullptr;  // accumulators of the same shapes, read and written
  float* acc_b1 = nullptr;  // (with bias)
  float* acc_W2 = nullptr;
  float* acc_b2 = nullptr;  // (with bias)
  int pos = 0;
  float* o = nullptr;       // [B, H·d], written
  CUstream_st* stream = nullptr;
};

void ttt_mlp_decode_step(const TttMlpDecodeArgs& args);

// ---- TTT-MLP, dual form, forward (hidden width 4d) -----------------------------------------------

// Default and Fallback are 3xTF32 on tensor cores (fp32-level accuracy).
enum class TttMlpForwardVersion {
  Default = 0,   // split-k products, 6 barriers per mini-batch, every matrix on chip, where b == 16,
                 // d ∈ {16, 32, 64} and Q, K, V, O are 16-byte aligned; the Fallback elsewhere
  Fallback = 1,  // block-wide products, matrices in shared memory or the workspace; every shape
  Tf32 = 2,      // one tf32 product per term (operands truncated to a 10-bit mantissa, ~1e-3
                 // relative per product), the state stored as pairs along k: what the training step
                 // runs when its GEMMs are tf32 or bf16. The fused kernel's shapes only (b == 16,
                 // d ∈ {16, 32, 64}) and Q, K, V, O 16-byte aligned, else an error.
  Bf16 = 3,      // bf16 inputs and output (Q_bf16, K_bf16, V_bf16 → O_bf16, in place of Q, K, V, O)
                 // and bf16 products with fp32 accumulation (7-bit mantissas, ~4e-3 relative per
                 // product); the state W1, b1, W2, b2, both LayerNorms, GELU and every sum stay fp32,
                 // and so do the checkpoints. Same shapes as Tf32, else an error.
};

struct TttMlpForwardArgs : TttSequenceInputs {
  const float* W1 = nullptr;  // [H, d, 4d]
  const float* b1 = nullptr;  // [H, 4d]
  const float* W2 = nullptr;  // [H, 4d, d]
  const float* b2 = nullptr;  // [H, d]
  float* O = nullptr;         // [B, T, H·d]
  // Version Bf16 only, and then in place of Q, K, V, O (which must be null): the same tensors as bf16
  // bit patterns ([B, T, H·d], 16-byte aligned; round to nearest even, as convert_to_bf16 writes them).
  const std::uint16_t* Q_bf16 = nullptr;
  const std::uint16_t* K_bf16 = nullptr;
  const std::uint16_t* V_bf16 = nullptr;
  std::uint16_t* O_bf16 = nullptr;
  // Optional (nullptr: not written). Checkpoints for ttt_mlp_backward: the committed state at the
  // start of every checkpoint_group-th mini-batch, [B, H, n_ck, d, 4d], [B, H, n_ck, 4d],
  // [B, H, n_ck, 4d, d], [B, H, n_ck, d] with n_ck = ttt_num_checkpoints(dims, checkpoint_group).
  // checkpoint_W1 and checkpoint_W2 go together; the biases are written where given (with bias off
  // they are written as zeros).
  float* checkpoint_W1 = nullptr;
  float* checkpoint_b1 = nullptr;
  float* checkpoint_W2 = nullptr;
  float* checkpoint_b2 = nullptr;
  int checkpoint_group = 0;  // ≥ 1 when checkpoints are requested
  // Global scratch for shapes whose per-head matrices exceed the device's shared memory (e.g. d = 128,
  // or d = 64 with b = 64): ttt_mlp_forward_workspace_bytes(dims) bytes (enough for every version),
  // or nullptr when that is 0.
  void* workspace = nullptr;
  std::size_t workspace_bytes = 0;
  TttMlpForwardVersion version = TttMlpForwardVersion::Default;
  CUstream_st* stream = nullptr;
};

std::size_t ttt_mlp_forward_workspace_bytes(const TttDims& dims);
void ttt_mlp_forward(const TttMlpForwardArgs& args);
// Whether `version` runs `dims` (valid dims assumed; Default and Fallback always do).
bool ttt_mlp_forward_supports(TttMlpForwardVersion version, const TttDims& dims);

// ---- TTT-MLP backward (second order, through the dual form, the LN+L2 gradient and gelu′) --------
//
// Given dO, the gradients of a forward run from the shared initial state (W1, b1, W2, b2) [H, ...].
// The checkpoints are those ttt_mlp_forward wrote with the same group g; the backward recomputes
// the states inside each group (per-block slots of g states in the workspace). Outputs are
// overwritten: dQ, dK, dV [B, T, H·d]; dlambda [B, H, T]; dtau [b] (summed over B, H); dln_weight,
// dln_bias [H, d]; dW1 [H, d, 4d], db1 [H, 4d], dW2 [H, 4d, d], db2 [H, d] (summed over B). With
// bias off db1, db2 are written as zeros; with layer_norm off dln_weight and dln_bias are zeros.
// Deterministic (per-block partials summed in a fixed order, no atomics). Every matrix product runs
// on tensor cores (TttMlpBackwardVersion); the block's matrices live in shared memory as far as they
// fit and in a per-block slice of the workspace otherwise. Any valid dims, either version.
enum class TttMlpBackwardVersion {
  Default = 0,  // 3xTF32 products (fp32-level accuracy)
  Tf32 = 1,     // one tf32 product per term (operands rounded to a 10-bit mantissa, ~1e-3 relative
                // per product): what the training step runs when its GEMMs are tf32
};

struct TttMlpBackwardArgs : TttSequenceInputs {
  const float* checkpoint_W1 = nullptr;  // from ttt_mlp_forward with the same checkpoint_group
  const float* checkpoint_b1 = nullptr;  // (biases read with bias)
  const float* checkpoint_W2 = nullptr;
  const float* checkpoint_b2 = nullptr;
  int checkpoint_group = 1;
  const float* dO = nullptr;  // [B, T, H·d]
  float* dQ = nullptr;
  float* dK = nullptr;
  float* dV = nullptr;
  float* dlambda = nullptr;
  float* dtau = nullptr;
  float* dln_weight = nullptr;
  float* dln_bias = nullptr;
  float* dW1 = nullptr;
  float* db1 = nullptr;
  float* dW2 = nullptr;
  float* db2 = nullptr;
  void* workspace = nullptr;  // ttt_mlp_backward_workspace_bytes(dims, checkpoint_group) bytes
  std::size_t workspace_bytes = 0;
  TttMlpBackwardVersion version = TttMlpBackwardVersion::Default;
  CUstream_st* stream = nullptr;
};

std::size_t ttt_mlp_backward_workspace_bytes(const TttDims& dims, int checkpoint_group);
void ttt_mlp_backward(const TttMlpBackwardArgs& args);

}  // namespace tttlab::kernels
