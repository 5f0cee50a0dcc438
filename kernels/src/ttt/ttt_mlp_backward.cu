// TTT-MLP backward on the GPU (see tttlab/kernels/ttt.hpp; maths in docs/MATH.md §5 and §7.4; the CPU
// engine's chunk_backward_mlp in core/src/ttt/inner_backward.cpp, which this follows line by line).
//
// Design (as the TTT-Linear backward's fallback, ttt_linear_backward.cu): one block per (sequence, head);
// checkpoint groups walked in reverse; the states inside a group recomputed from its checkpoint
// into per-block slots in the workspace; the group's mini-batches walked in reverse with the carry
// dW1', db1', dW2', db2' (∂L/∂ the state after the mini-batch). Every matrix product is a block_mma
// on tensor cores in 3xTF32 (fp32-level accuracy; version Tf32: one tf32 product per term, the
// template argument kSplit = false); row-wise LayerNorm work is one warp per row, the
// b×b pieces and the column sums stay on CUDA cores. The per-block contributions to the shared
// parameters go to partial buffers summed over the batch by a second kernel in a fixed order
// (deterministic, no atomics).
//
// Memory: the block's matrices (about 6·d·4d for the state and the carry plus 10 b×4d, 12 b×d and
// 7 b×b per mini-batch) are placed in priority order — the per-mini-batch matrices first, then the
// state W1, W2, then the carry dW1, dW2 — into dynamic shared memory while they fit, and the rest
// into a per-block slice of the workspace (the same code through generic pointers; L2 holds it).
// At d ≤ 32 (b = 16) everything is on chip; at d = 64 the state and the carry are in the workspace.
//
// The compile-time instance (d = 64, b = 16, T a multiple of 16: the training shape) has
// every shape, stride, loop bound, split-k count and buffer offset as a constant, reads the states
// where they are (the checkpoint, then the slots the recomputation writes) instead of copying them
// into W1, W2 every mini-batch, and reads the old values of its read-modify-writes of global memory
// (the carry's updates, the recomputation's commits) before their products (block_mma_accumulate), and
// reads its shared-memory buffers as shared memory: LDS, and ldmatrix for the operands that allow it
// (its block_mma and splitk_mma calls pass kLdsm). Every block_mma call passes the block's warp
// count (kWarps) so that, with the shapes constant, each call compiles to one form of its product:
// the instance's code fell from 474 to 181 KB, under the instruction cache's reach. Each step came
// from a source-level profile (docs/KERNELS.md).
//
// The 16-row products with k = 4d (X2W2, X̄2W2, X̄2X2ᵀ, X2dW2', dZ̄1W1ᵀ, dZ̄1G1ᵀ, G1dW1'ᵀ, dP1W2, dZ1W1ᵀ)
// have only n/8 output tiles; they are split over k (splitk_mma) so that about 16 warp tasks run,
// into partial buffers that are dead at that point, and the partials are summed in slice order by
// the consumer (the row warps of the LN phases, the element-wise phases, the copy-out): one barrier
// more per mini-batch (the C2 sum), none for the others.
//
// Per mini-batch (m ≤ b rows; E[i,j] = τ_i λ_j for j ≤ i, e = τ_b λ; phases separated by barriers):
//   recompute  Z1 = KW1 + b1, X2 = gelu(Z1), Z2 = X2W2 + b2, G2 = lnl2(Z2, R), P1 = G2W2ᵀ,
//              G1 = P1 ⊙ gelu′(Z1), M1 = E ⊙ tril(QKᵀ + 1), Z̄1 = QW1 + b1 − M1G1, X̄2 = gelu(Z̄1),
//              M2 = E ⊙ tril(X̄2X2ᵀ + 1), Z̄2 = X̄2W2 + b2 − M2G2
//   output     dZ̄2 = LN′ᵀ dO (dγ, dβ);  dQ = dO (residual)
//   Z̄2 line    dM2 = −dZ̄2G2ᵀ, dG2 = −M2ᵀdZ̄2, dE = dM2 ⊙ C2, dC2 = tril(dM2 ⊙ E)
//   C2, gelu   dZ̄1 = (dZ̄2W2ᵀ + dC2X2) ⊙ gelu′(Z̄1),  dX2 = dC2ᵀX̄2
//   Z̄1 line    dQ += dZ̄1W1ᵀ, dM1 = −dZ̄1G1ᵀ, dG1 = −M1ᵀdZ̄1, dE += dM1 ⊙ C1, dC1 = tril(dM1 ⊙ E),
//              dQ += dC1K, dK += dC1ᵀQ
//   commit     (full) dG1 −= e ⊙ (K dW1' + db1'), dK −= e ⊙ (G1 dW1'ᵀ), dG2 −= e ⊙ (X2 dW2' + db2'),
//              dX2 −= e ⊙ (G2 dW2'ᵀ), de
//   η          dτ, dλ from dE and de
//   G1 line    dP1 = dG1 ⊙ gelu′(Z1), dZ1 = dG1 ⊙ P1 ⊙ gelu″(Z1), dG2 += dP1W2
//   G2 = lnl2  dZ2, dR (second order), dV = dR, dγ, dβ
//   Z2, X2     dX2 += dZ2W2ᵀ, dZ1 += dX2 ⊙ gelu′(Z1), dK += dZ1W1ᵀ − dR (residual)
//   carry      dW1 ← [dW1' +] Qᵀ dZ̄1 + Kᵀ dZ1,  dW2 ← [dW2' +] X̄2ᵀ dZ̄2 + X2ᵀ dZ2 + dP1ᵀ G2, biases
//
// The kernel itself is in ttt_mlp_backward.cuh, its instances in ttt_mlp_backward_<shape>_<version>.cu.
#include <cuda_runtime.h>

#include <cstddef>
#include <cstdint>
#include <string>
#include <utility>

#include "common/cuda_check.hpp"
#include "ttt/ttt_host.hpp"
#include "ttt/ttt_mlp_backward.cuh"
#include "tttlab/kernels/ttt.hpp"

namespace tttlab::kernels {
namespace detail {
namespace {

// The workspace, in floats: [slots][scratch][partials W1, b1, W2, b2, γ, β, τ].
struct MlpBwdLayout {
  std::size_t slots = 0, scratch = 0, pW1 = 0, pb1 = 0, pW2 = 0, pb2 = 0, pgam = 0, pbet = 0,
              ptau = 0, total = 0;
  std::size_t smem_floats = 0, global_floats = 0, smem_cap = 0;
  bool fixed = false;  // the compile-time instance runs
};

MlpBwdLayout mlp_bwd_layout(const TttDims& D, int group) {
  MlpBwdLayout L;
  const std::size_t BH = std::size_t(D.batch) * D.heads, d = D.head_dim, hd = 4 * d,
                    b = D.mini_batch;
  L.smem_cap = max_dynamic_smem() / sizeof(float);
  // The compile-time instance: d = 64, b = 16, T a multiple of 16, and room for its layout.
  L.fixed = D.head_dim == 64 && D.mini_batch == 16 && D.seq_len % 16 == 0 && L.smem_cap >= kFixedSmemCap;
  if (L.fixed) L.smem_cap = kFixedSmemCap;
  Bufs s;
  carve(s, NoMemory{}, NoMemory{}, D.head_dim, D.mini_batch, L.smem_cap, L.fixed, L.smem_floats,
        L.global_floats);
  std::size_t off = 0;
  auto take = [&](std::size_t n) {
    const std::size_t r = off;
    off += (n + 3) & ~std::size_t(3);
    return r;
  };
  L.slots = take(BH * std::size_t(group) * (2 * d * hd + hd + d));
  L.scratch = take(BH * L.global_floats);
  L.pW1 = take(BH * d * hd);
  L.pb1 = take(BH * hd);
  L.pW2 = take(BH * d * hd);
  L.pb2 = take(BH * d);
  L.pgam = take(BH * d);
  L.pbet = take(BH * d);
  L.ptau = take(BH * b);
  L.total = off;
  return L;
}

}  // namespace
}  // namespace detail

using namespace detail;

std::size_t ttt_mlp_backward_workspace_bytes(const TttDims& dims, int checkpoint_group) {
  check_dims("ttt_mlp_backward_workspace_bytes", dims);
  require(checkpoint_group >= 1, "ttt_mlp_backward_workspace_bytes: checkpoint_group must be >= 1");
  return mlp_bwd_layout(dims, checkpoint_group).total * sizeof(float);
}

void ttt_mlp_backward(const TttMlpBackwardArgs& a) {
  const char* fn = "ttt_mlp_backward";
  check_dims(fn, a.dims);
  check_eps(fn, a.opt);
  require(a.checkpoint_group >= 1, "ttt_mlp_backward: checkpoint_group must be >= 1");
  require(a.version == TttMlpBackwardVersion::Default || a.version == TttMlpBackwardVersion::Tf32,
          "ttt_mlp_backward: unknown version " + std::to_string(static_cast<int>(a.version)));
  for (auto [ptr, name] :
       {std::pair<const void*, const char*>{a.Q, "Q"}, {a.K, "K"}, {a.V, "V"}, {a.lambda, "lambda"},
        {a.tau, "tau"}, {a.checkpoint_W1, "checkpoint_W1"}, {a.checkpoint_W2, "checkpoint_W2"},
        {a.dO, "dO"}, {a.dQ, "dQ"}, {a.dK, "dK"}, {a.dV, "dV"}, {a.dlambda, "dlambda"},
        {a.dtau, "dtau"}, {a.dln_weight, "dln_weight"}, {a.dln_bias, "dln_bias"}, {a.dW1, "dW1"},
        {a.db1, "db1"}, {a.dW2, "dW2"}, {a.db2, "db2"}, {a.workspace, "workspace"}})
    check_ptr(fn, ptr, name);
  if (a.opt.bias) {
    check_ptr(fn, a.checkpoint_b1, "checkpoint_b1 (bias is on)");
    check_ptr(fn, a.checkpoint_b2, "checkpoint_b2 (bias is on)");
  }
  check_ln_params(fn, a);
  const TttDims& D = a.dims;
  const MlpBwdLayout L = mlp_bwd_layout(D, a.checkpoint_group);
  require(a.workspace_bytes >= L.total * sizeof(float),
          "ttt_mlp_backward: workspace has " + std::to_string(a.workspace_bytes) + " bytes, needs " +
              std::to_string(L.total * sizeof(float)) + " (ttt_mlp_backward_workspace_bytes)");
  require(reinterpret_cast<std::uintptr_t>(a.workspace) % 16 == 0,
          "ttt_mlp_backward: the workspace must be 16-byte aligned");
  float* ws = static_cast<float*>(a.workspace);
  MlpBwdParams p{};
  set_token_inputs(p, a);
  p.ckW1 = a.checkpoint_W1;
  p.ckb1 = a.checkpoint_b1;
  p.ckW2 = a.checkpoint_W2;
  p.ckb2 = a.checkpoint_b2;
  set_token_grads(p, a);
  p.slots = ws + L.slots;
  p.scratch = L.global_floats > 0 ? ws + L.scratch : nullptr;
  p.pW1 = ws + L.pW1;
  p.pb1 = ws + L.pb1;
  p.pW2 = ws + L.pW2;
  p.pb2 = ws + L.pb2;
  p.pgam = ws + L.pgam;
  p.pbet = ws + L.pbet;
  p.ptau = ws + L.ptau;
  p.smem_cap = L.smem_cap;
  p.global_floats = L.global_floats;
  set_dims(p, D);
  p.group = a.checkpoint_group;
  p.n_ck = ttt_num_checkpoints(D, a.checkpoint_group);
  set_options(p, a.opt);
  const std::size_t smem = L.smem_floats * sizeof(float);
  // 3xTF32 (fp32-level) or one tf32 product per term: the same kernel, a template argument apart.
  const bool split = a.version == TttMlpBackwardVersion::Default;
  // The training shape (d = 64, b = 16, T a multiple of 16) has its own compile-time instance.
  const MlpBwdKernel kernel = L.fixed ? (split ? mlp_backward_fixed_3xtf32() : mlp_backward_fixed_tf32())
                                      : (split ? mlp_backward_runtime_3xtf32() : mlp_backward_runtime_tf32());
  set_smem_limit(reinterpret_cast<const void*>(kernel), smem);
  kernel<<<D.batch * D.heads, kThreads, smem, a.stream>>>(p);
  TTTLAB_CUDA_CHECK(cudaGetLastError());
  const int d = D.head_dim, hd = 4 * d;
  auto sum = [&](const float* part, float* out, int B, int H, int len) {
    sum_over_batch(part, out, B, H, len, a.stream);
  };
  sum(p.pW1, a.dW1, D.batch, D.heads, d * hd);
  sum(p.pb1, a.db1, D.batch, D.heads, hd);
  sum(p.pW2, a.dW2, D.batch, D.heads, d * hd);
  sum(p.pb2, a.db2, D.batch, D.heads, d);
  sum(p.pgam, a.dln_weight, D.batch, D.heads, d);
  sum(p.pbet, a.dln_bias, D.batch, D.heads, d);
  sum(p.ptau, a.dtau, D.batch * D.heads, 1, D.mini_batch);
}

}  // namespace tttlab::kernels
