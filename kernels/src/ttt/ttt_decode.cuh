// What the TTT-Linear and TTT-MLP decode steps share (ttt_linear_decode.cu, ttt_mlp_decode.cu): the
// argument checks and parameter fields of a decode step, and the two warp-0 row stages of the
// kernels, the loss gradient at the last layer's output and the output's read-out. Private to
// kernels/src.
#pragma once

#include <cstddef>
#include <string>

#include "ttt/ttt_common.cuh"
#include "ttt/ttt_host.hpp"
#include "tttlab/kernels/ttt.hpp"

namespace tttlab::kernels::detail {

// The checks every decode step makes before its model's pointers (q, k, v, λ, τ, o are checked by
// the caller with them): dims (seq_len taken as 1, which the result has), ε and pos.
inline TttDims checked_decode_dims(const char* fn, const TttDecodeInputs& a, int pos) {
  TttDims D = a.dims;
  D.seq_len = 1;
  check_dims(fn, D);
  check_eps(fn, a.opt);
  require(pos >= 0 && pos < D.mini_batch,
          std::string(fn) + ": pos must be in 0..mini_batch-1 (got " + std::to_string(pos) + ")");
  return D;
}

// The fields both decode kernels' parameter blocks share (q, k, v, lam, tau, gamma, beta, o, B, H,
// d, b, pos and the options), from the step's arguments and its checked dims.
template <class Params, class Args>
void set_decode_params(Params& p, const Args& a, const TttDims& D) {
  p.q = a.q;
  p.k = a.k;
  p.v = a.v;
  p.lam = a.lambda;
  p.tau = a.tau;
  p.gamma = a.ln_weight;
  p.beta = a.ln_bias;
  p.o = a.o;
  p.B = D.batch;
  p.H = D.heads;
  p.d = D.head_dim;
  p.b = D.mini_batch;
  p.pos = a.pos;
  set_options(p, a.opt);
}

// Warp 0 of a decode block: the loss gradient g = ∂ℓ/∂z of the token's last-layer output z (the
// fused LN + L2 gradient, target v − k or v) into shared g. z, k: shared rows of d; row: the token's
// head slice in v; h: the head.
template <class Params>
__device__ __forceinline__ void decode_loss_grad(const Params& p, const float* z_s, const float* k_s,
                                                 float* g_s, std::size_t row, int h, int d,
                                                 int lane) {
  const RowFrag z = row_load(z_s, d, lane);
  RowFrag t = row_load(p.v + row, d, lane);
  if (p.res) {
    const RowFrag kk = row_load(k_s, d, lane);
#pragma unroll
    for (int u = 0; u < kPerLane; ++u) t.v[u] -= kk.v[u];
  }
  const RowFrag gam = p.ln ? row_load(p.gamma + std::size_t(h) * d, d, lane) : RowFrag{};
  const RowFrag bet = p.ln ? row_load(p.beta + std::size_t(h) * d, d, lane) : RowFrag{};
  row_store(g_s, row_loss_grad(z, t, gam, bet, d, lane, p.eps, p.ln), d, lane);
}

// Warp 0 of a decode block: the output o = [q +] LN(z̄) of the read-out z̄ (shared, d) into p.o.
template <class Params>
__device__ __forceinline__ void decode_output(const Params& p, const float* zb_s, const float* q_s,
                                              std::size_t row, int h, int d, int lane) {
  const RowFrag gam = p.ln ? row_load(p.gamma + std::size_t(h) * d, d, lane) : RowFrag{};
  const RowFrag bet = p.ln ? row_load(p.beta + std::size_t(h) * d, d, lane) : RowFrag{};
  RowFrag o = row_layer_norm(row_load(zb_s, d, lane), gam, bet, d, lane, p.eps, p.ln);
  if (p.res) {
    const RowFrag q = row_load(q_s, d, lane);
#pragma unroll
    for (int u = 0; u < kPerLane; ++u) o.v[u] += q.v[u];
  }
  row_store(p.o + row, o, d, lane);
}

}  // namespace tttlab::kernels::detail
