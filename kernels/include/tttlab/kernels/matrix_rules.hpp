// tttlab/kernels/matrix_rules.hpp — the inner loops of the matrix fast-weight members on the GPU,
// forward and backward, for a whole batch: linear attention, the decayed Hebbian rule, DeltaNet and
// Gated DeltaNet (docs/MATH.md §11.2–§11.4; the CPU functions they compute are matrix_rule_primal and
// matrix_rule_backward, tttlab/fastweight/matrix_rules.hpp, run once per sequence and head).
//
// Row-vector convention of §11.2: the state S [d_k, d_v] maps a key row to a value row, and every
// member reads after its write, o_t = q_t S_t.
//
// DESIGN (docs/KERNELS.md, "Matrix fast-weight rules (recurrent)"): the recurrent form, correct
// first; the chunked tensor-core form of §11.3 is delta_rule_chunked.hpp (forward). One block of 256
// threads per (sequence, head) walks the tokens in order with the state in registers, in fp32: thread
// (g, c) holds column c of the state and the rows g, g + G, g + 2G, … (G = 256 / ⌈d_v⌉₃₂ row groups),
// so the column sums (k_t S, q_t S, k_t G) are a register sum and one pass over G ≤ 8 partials in
// shared memory, and the row sums (dk_t, dq_t) a warp shuffle and one pass over ≤ 4 warps. Every sum
// runs in a fixed order and every result has one writer: no atomics, the same bits run to run.
//
// WHAT IS STORED, AND WHY. The backward needs S_{t−1} at every token (A = α_t S_{t−1}, the delta
// residual, dα_t) and S_t (dq_t), walked in reverse, while the recurrence can only be run forward (the
// delta step I − β k_tᵀk_t is singular at β‖k‖² = 1, so it cannot be undone). So:
//   states     [B, H, nc, d_k, d_v]: the forward writes the state before each chunk of C tokens
//              (nc = ⌈T / C⌉; chunk 0's is S0, or zero). B·H·nc·d_k·d_v floats
//              (matrix_rule_state_floats): 1/C of keeping every state.
//   workspace  [B, H, C, d_k, d_v]: the backward, chunk by chunk from the last, reruns the chunk from
//              its stored state, keeping its ≤ C states S_{t−1} here (and writing dq_t = dO_t S_tᵀ on the
//              way), then walks the chunk's tokens in reverse with dS carried in registers (§11.4).
//              B·H·C·d_k·d_v floats (matrix_rule_backward_workspace_bytes); each thread reads back only
//              what it wrote itself. The forward's work is thus done twice in all, whatever C; C
//              trades the two buffers (nc·d_k·d_v against C·d_k·d_v per head), nothing else.
//
// CONVENTIONS, as the other ops (mamba2.hpp): this header includes neither CUDA nor Eigen headers
// (the rule is the core's enum, from its Eigen-free tttlab/fastweight/matrix_rule_kind.hpp).
// Every pointer is a DEVICE pointer, fp32; R = B·T rows, sequence b's token t at row b·T + t, rows
// with the given strides:
//   q, k, dq, dk   [R, ≥ H·d_k], head h at columns h·d_k … h·d_k + d_k − 1 (ld_qk, ld_dqk)
//   v, dv          [R, ≥ H·d_v], head h at columns h·d_v … (ld_v, ld_dv)
//   o, dO          [R, ≥ H·d_v] (ld_o, ld_do)
//   beta, alpha, dbeta, dalpha   [R, H] contiguous: column h for head h
//   S0, S_final, dS_final, dS0   [B, H, d_k, d_v] contiguous
// The delta rules expect L2-normalised keys, and α ∈ (0, 1] (§11.2): neither is checked (device data).
// Calls are asynchronous on `stream`, validate their arguments first (std::invalid_argument, one
// line, nothing launched) and throw std::runtime_error when a launch fails. No global state.
// SHAPES: any B, H ≥ 1, T ≥ 1 (T need not be a multiple of C), C ≥ 1, 1 ≤ d_k, d_v ≤ 128.
#pragma once

#include <cstddef>
#include <string>

#include "tttlab/fastweight/matrix_rule_kind.hpp"

struct CUstream_st;

namespace tttlab::kernels {

struct MatrixRuleDims {
  int batch = 1;    // B
  int seq_len = 1;  // T
  int heads = 1;    // H
  int d_k = 64;
  int d_v = 64;
  int chunk = 64;  // C: tokens between two stored states
  int chunks() const { return (seq_len + chunk - 1) / chunk; }
};

// Empty when the kernels take the shape, else why not (one line, naming the field).
std::string matrix_rule_unsupported(const MatrixRuleDims& dims);
// Floats of `states` ([B, H, nc, d_k, d_v]).
std::size_t matrix_rule_state_floats(const MatrixRuleDims& dims);
// Bytes of the backward's workspace ([B, H, C, d_k, d_v] floats).
std::size_t matrix_rule_backward_workspace_bytes(const MatrixRuleDims& dims);

struct MatrixRuleForwardArgs {
  MatrixRule rule{};
  MatrixRuleDims dims;
  const float* q = nullptr;
  const float* k = nullptr;
  int ld_qk = 0;
  const float* v = nullptr;
  int ld_v = 0;
  const float* beta = nullptr;   // [R, H]; null for linear attention (it must be, there)
  const float* alpha = nullptr;  // [R, H]; given exactly where the rule decays
  const float* S0 = nullptr;     // [B, H, d_k, d_v], or null for a zero initial state
  float* o = nullptr;            // OVERWRITTEN
  int ld_o = 0;
  float* S_final = nullptr;  // [B, H, d_k, d_v] OVERWRITTEN with S_T, or null (not wanted)
  float* states =
      nullptr;  // OVERWRITTEN with the states before each chunk, for the backward; or null
  CUstream_st* stream = nullptr;
};
void matrix_rule_forward(const MatrixRuleForwardArgs& args);

struct MatrixRuleBackwardArgs {
  MatrixRule rule{};
  MatrixRuleDims dims;  // as in the forward, the same chunk
  const float* q = nullptr;
  const float* k = nullptr;
  int ld_qk = 0;
  const float* v = nullptr;
  int ld_v = 0;
  const float* beta = nullptr;
  const float* alpha = nullptr;
  const float* states = nullptr;  // the forward's
  const float* dO = nullptr;      // ∂L/∂o
  int ld_do = 0;
  const float* dS_final = nullptr;  // ∂L/∂S_T [B, H, d_k, d_v], or null for zero
  float* dq = nullptr;              // OVERWRITTEN
  float* dk = nullptr;              // OVERWRITTEN
  int ld_dqk = 0;
  float* dv = nullptr;  // OVERWRITTEN
  int ld_dv = 0;
  float* dbeta = nullptr;     // [R, H] OVERWRITTEN; given exactly where the rule uses β
  float* dalpha = nullptr;    // [R, H] OVERWRITTEN; given exactly where the rule uses α
  float* dS0 = nullptr;       // [B, H, d_k, d_v] OVERWRITTEN, or null (not wanted)
  void* workspace = nullptr;  // matrix_rule_backward_workspace_bytes(dims), 16-byte aligned
  std::size_t workspace_bytes = 0;
  CUstream_st* stream = nullptr;
};
void matrix_rule_backward(const MatrixRuleBackwardArgs& args);

// The backward's arguments that repeat the forward's: the rule, the dims, q, k, v, β, α with their
// strides, the kept states and the stream. The caller adds dO, dS_final, the gradients and the
// workspace.
inline MatrixRuleBackwardArgs matrix_rule_backward_args(const MatrixRuleForwardArgs& f) {
  MatrixRuleBackwardArgs b;
  b.rule = f.rule;
  b.dims = f.dims;
  b.q = f.q;
  b.k = f.k;
  b.ld_qk = f.ld_qk;
  b.v = f.v;
  b.ld_v = f.ld_v;
  b.beta = f.beta;
  b.alpha = f.alpha;
  b.states = f.states;
  b.stream = f.stream;
  return b;
}

}  // namespace tttlab::kernels
