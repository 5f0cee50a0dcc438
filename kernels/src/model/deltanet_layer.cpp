// The DeltaNet and Gated DeltaNet layers on the GPU (tttlab/kernels/deltanet.hpp):
// DeltaNetLayer::forward_train and backward (core/src/seq/deltanet_layer.cpp) statement by statement
// over the ops, for B sequences stacked as R rows; the block around the inner loop is
// short_conv_block.hpp's, shared with Titans. Every intermediate the backward reads is kept (no
// recomputation outside the inner loop) and each pass is a separate op. The inner loop is the
// recurrent matrix rule in fp32, or in the bf16 step the chunked form on the tensor cores
// (delta_rule_chunked.hpp; docs/KERNELS.md, "DeltaNet and Gated DeltaNet on the GPU").
#include <cuda_runtime_api.h>

#include <cmath>
#include <stdexcept>
#include <string>

#include "common/cuda_check.hpp"
#include "model/short_conv_block.hpp"
#include "tttlab/kernels/delta_rule_chunked.hpp"
#include "tttlab/kernels/deltanet.hpp"
#include "tttlab/kernels/gemm.hpp"
#include "tttlab/kernels/matrix_rules.hpp"
#include "tttlab/kernels/nn_ops.hpp"

namespace tttlab::kernels {
namespace {

using detail::BlockCarver;
using detail::BlockLinearBackward;
using detail::ShortConvBlockCache;
using detail::ShortConvBlockDims;
using detail::ShortConvBlockScratch;

void bad(const std::string& what) { throw std::invalid_argument("deltanet layer (GPU): " + what); }

void check(const DeltaNetLayerDims& d) {
  if (const std::string why = deltanet_layer_unsupported(d); !why.empty()) bad(why);
}

MatrixRuleDims rule_dims(const DeltaNetLayerDims& d) {
  return {d.batch, d.seq_len, d.heads, d.head_dim(), d.head_dim(), d.chunk};
}

AttentionDims chunked_dims(const DeltaNetLayerDims& d) {
  return {d.batch, d.heads, d.seq_len, d.head_dim()};
}

MatrixRule rule_of(const DeltaNetLayerDims& d) {
  return d.gated ? MatrixRule::GatedDeltaNet : MatrixRule::DeltaNet;
}

// The shared block's view of the layer: q̂ scaled by 1/√d, gated with Gated DeltaNet.
ShortConvBlockDims block_dims(const DeltaNetLayerDims& d) {
  ShortConvBlockDims b;
  b.batch = d.batch;
  b.seq_len = d.seq_len;
  b.width = d.width;
  b.heads = d.heads;
  b.conv_kernel = d.conv_kernel;
  b.q_scale = 1.f / std::sqrt(float(d.head_dim()));
  b.gated = d.gated;
  b.norm_eps = d.norm_eps;
  b.l2_eps = d.l2_eps;
  return b;
}

// The inner loop's inputs as the forward keeps them (q̂, k̂, v, β, α and the kept states, [R, D] and
// [R, H]), for both directions; the forward adds its output.
MatrixRuleForwardArgs rule_inputs(const DeltaNetLayerDims& d, const DeltaNetLayerCache& c,
                                  CUstream_st* st) {
  MatrixRuleForwardArgs f;
  f.rule = rule_of(d);
  f.dims = rule_dims(d);
  f.q = c.qn;
  f.k = c.kn;
  f.ld_qk = d.width;
  f.v = c.av;
  f.ld_v = d.width;
  f.beta = c.beta;
  f.alpha = d.gated ? c.alpha : nullptr;
  f.states = c.states;
  f.stream = st;
  return f;
}

std::size_t carve_cache(const DeltaNetLayerDims& d, float* base, DeltaNetLayerCache* out) {
  const std::size_t R = d.rows(), D = d.width, H = d.heads;
  BlockCarver c{base};
  ShortConvBlockCache b;
  detail::carve_short_conv_block_cache(block_dims(d), c, &b);
  DeltaNetLayerCache k;
  k.uq = b.uq;
  k.uk = b.uk;
  k.uv = b.uv;
  k.cq = b.cq;
  k.ck = b.ck;
  k.cv = b.cv;
  k.aq = b.aq;
  k.ak = b.ak;
  k.av = b.av;
  k.qn = b.qn;
  k.kn = b.kn;
  k.o = b.o;
  k.n = b.n;
  k.gate = b.gate;
  k.y = b.y;
  k.zero_bias = b.zero_bias;
  k.beta = c.take(R * H);
  if (d.gated) {
    k.r = c.take(R * H);
    k.alpha = c.take(R * H);
  }
  k.states = c.take(matrix_rule_state_floats(rule_dims(d)));
  if (deltanet_layer_chunked(d)) {
    for (std::uint16_t** t : {&k.q16, &k.k16, &k.v16, &k.o16})
      *t = reinterpret_cast<std::uint16_t*>(c.take((R * D + 1) / 2));
    if (d.gated) k.log_alpha = c.take(R * H);
    // What the inner loop's forward keeps for its backward (chunked_delta_rule_keep_bytes): the
    // backward then skips recomputing it.
    k.inner_ws_bytes = chunked_delta_rule_keep_bytes(chunked_dims(d));
    k.inner_ws = c.take((k.inner_ws_bytes + 3) / 4);
  }
  if (out) *out = k;
  return c.used;
}

// The backward's scratch: the shared block's, the gradients of β, α, r and the A_log terms [R, H],
// and the workspaces of the column sums and the inner loop.
struct Scratch {
  ShortConvBlockScratch block;
  float *dbeta = nullptr, *dalpha = nullptr, *dr = nullptr, *dA_terms = nullptr, *sum_ws = nullptr,
        *rule_ws = nullptr;
  std::size_t rule_bytes = 0;
  std::uint16_t* dO16 = nullptr;  // the chunked inner loop's bf16 dO
};

std::size_t carve(const DeltaNetLayerDims& d, float* base, Scratch* out) {
  const std::size_t R = d.rows(), D = d.width, H = d.heads;
  BlockCarver c{base};
  Scratch s;
  detail::carve_short_conv_block_scratch(block_dims(d), c, &s.block);
  s.dbeta = c.take(R * H);
  if (d.gated) {
    s.dalpha = c.take(R * H);
    s.dr = c.take(R * H);
    s.dA_terms = c.take(R * H);
  }
  s.sum_ws = c.take(column_sum_workspace(int(R), d.heads));
  s.rule_bytes = deltanet_layer_chunked(d)
                     ? chunked_delta_rule_backward_workspace_bytes(chunked_dims(d), true)
                     : matrix_rule_backward_workspace_bytes(rule_dims(d));
  s.rule_ws = c.take((s.rule_bytes + 3) / 4);
  if (deltanet_layer_chunked(d)) s.dO16 = reinterpret_cast<std::uint16_t*>(c.take((R * D + 1) / 2));
  if (out) *out = s;
  return c.used;
}

}  // namespace

std::string deltanet_layer_unsupported(const DeltaNetLayerDims& d) {
  if (d.batch < 1 || d.seq_len < 1 || d.width < 1 || d.heads < 1 || d.chunk < 1)
    return "the DeltaNet layer needs positive sizes";
  if (d.width % d.heads != 0) return "the DeltaNet heads must divide the width";
  if (d.conv_kernel < 1 || d.conv_kernel > 16)
    return "the GPU's causal convolution needs conv_kernel <= 16, got " +
           std::to_string(d.conv_kernel);
  if (!(d.norm_eps > 0.f) || !(d.l2_eps > 0.f)) return "the DeltaNet norms' eps must be positive";
  return matrix_rule_unsupported(rule_dims(d));
}

bool deltanet_layer_chunked(const DeltaNetLayerDims& d) {
  return d.bf16_inner && chunked_delta_rule_backward_supported(chunked_dims(d));
}

std::size_t deltanet_layer_cache_floats(const DeltaNetLayerDims& d) {
  return carve_cache(d, nullptr, nullptr);
}

DeltaNetLayerCache deltanet_layer_cache(const DeltaNetLayerDims& d, float* base) {
  DeltaNetLayerCache c;
  carve_cache(d, base, &c);
  return c;
}

std::size_t deltanet_layer_workspace_floats(const DeltaNetLayerDims& d) {
  return carve(d, nullptr, nullptr);
}

void deltanet_layer_forward(const DeltaNetProduct& product, const DeltaNetLayerDims& d,
                            const DeltaNetLayerParams& p, const float* x,
                            const DeltaNetLayerCache& c, float* out, CUstream_st* st) {
  check(d);
  if (!x || !out || !c.uq || !p.q_proj || !p.k_proj || !p.v_proj || !p.b_proj || !p.q_conv ||
      !p.k_conv || !p.v_conv || !p.o_norm || !p.o_proj)
    bad("forward: a pointer is null");
  if (d.gated && (!p.a_proj || !p.A_log || !p.dt_bias || !p.g_proj || !c.gate))
    bad("forward: a gated parameter is null");
  const int R = d.rows(), D = d.width, H = d.heads;
  const std::size_t RD = std::size_t(R) * D;
  const ShortConvBlockDims bd = block_dims(d);
  auto linear = [&](const float* W, int N, float* y) {
    product(false, false, R, N, D, x, nullptr, D, W, nullptr, N, y, N, false);
  };
  // q, k, v = silu(conv(x W)); q̂ = q / ‖q‖ / √d, k̂ = k / ‖k‖ per head
  detail::short_conv_block_front(product, bd, detail::short_conv_block_params(p), x,
                                 detail::short_conv_block_cache(c), st);
  // β = sigmoid(x W_β); gated: α = exp(−exp(A_log)·softplus(x W_a + dt_bias))
  linear(p.b_proj, H, c.beta);
  deltanet_sigmoid_forward(c.beta, std::size_t(R) * H, st);
  if (d.gated) {
    linear(p.a_proj, H, c.r);
    deltanet_alpha_forward(c.r, p.dt_bias, p.A_log, R, H, c.alpha, st);
  }
  // o = the matrix rule from S_0 = 0
  if (deltanet_layer_chunked(d)) {
    convert_to_bf16(c.qn, R, D, D, c.q16, D, st);
    convert_to_bf16(c.kn, R, D, D, c.k16, D, st);
    convert_to_bf16(c.av, R, D, D, c.v16, D, st);
    if (d.gated) deltanet_log(c.alpha, std::size_t(R) * H, c.log_alpha, st);
    ChunkedDeltaRuleForwardArgs f;
    f.dims = chunked_dims(d);
    f.Q = c.q16;
    f.K = c.k16;
    f.V = c.v16;
    f.beta = c.beta;
    f.log_alpha = d.gated ? c.log_alpha : nullptr;
    f.O = c.o16;
    f.keep = c.inner_ws;
    f.keep_bytes = c.inner_ws_bytes;
    f.stream = st;
    chunked_delta_rule_forward(f);
    deltanet_widen_bf16(c.o16, RD, c.o, st);
  } else {
    MatrixRuleForwardArgs f = rule_inputs(d, c, st);
    f.o = c.o;
    f.ld_o = D;
    matrix_rule_forward(f);
  }
  // n = RMSNorm(o_h)·w per head; gated: y = n ⊙ silu(x W_g); out = y W_o
  detail::short_conv_block_back(product, bd, detail::short_conv_block_params(p), x,
                                detail::short_conv_block_cache(c), out, st);
}

void deltanet_layer_backward(const DeltaNetProduct& product, const DeltaNetLayerDims& d,
                             const DeltaNetLayerParams& p, const float* x,
                             const DeltaNetLayerCache& c, const float* dOut,
                             const DeltaNetLayerGrads& g, float* dx, bool accumulate,
                             float* workspace, CUstream_st* st) {
  check(d);
  if (!x || !dOut || !dx || !workspace || !g.q_proj || !g.k_proj || !g.v_proj || !g.b_proj ||
      !g.q_conv || !g.k_conv || !g.v_conv || !g.o_norm || !g.o_proj)
    bad("backward: a pointer is null");
  if (d.gated && (!g.a_proj || !g.A_log || !g.dt_bias || !g.g_proj))
    bad("backward: a gated gradient is null");
  const int R = d.rows(), D = d.width, H = d.heads;
  Scratch s;
  carve(d, workspace, &s);
  const ShortConvBlockScratch& sb = s.block;
  const ShortConvBlockDims bd = block_dims(d);
  const ShortConvBlockCache bc = detail::short_conv_block_cache(c);
  // Weight gradient W += xᵀ dz and dx (+)= dz Wᵀ, dx written by the first and added to after.
  BlockLinearBackward lin{product, x, R, D, dx, accumulate};
  // out = y W_o; y = n ⊙ silu(gate) (gated) or n; n = RMSNorm(o_h)·w per head
  detail::short_conv_block_back_backward(product, bd, detail::short_conv_block_params(p), bc, dOut,
                                         detail::short_conv_block_grads(g), sb, lin, st);
  // The inner loop. The chunked form gives d log α (in s.dalpha), which the gate's backward takes
  // with alpha null.
  const bool chunked = deltanet_layer_chunked(d);
  if (chunked) {
    convert_to_bf16(sb.dO, R, D, D, s.dO16, D, st);
    ChunkedDeltaRuleBackwardArgs b;
    b.dims = chunked_dims(d);
    b.Q = c.q16;
    b.K = c.k16;
    b.V = c.v16;
    b.beta = c.beta;
    b.log_alpha = d.gated ? c.log_alpha : nullptr;
    b.dO = s.dO16;
    b.dQ = sb.dqn;
    b.dK = sb.dkn;
    b.dV = sb.dv;
    b.dbeta = s.dbeta;
    b.dlog_alpha = d.gated ? s.dalpha : nullptr;
    b.workspace = s.rule_ws;
    b.workspace_bytes = s.rule_bytes;
    b.kept = c.inner_ws;
    b.kept_bytes = c.inner_ws_bytes;
    b.stream = st;
    chunked_delta_rule_backward(b);
  } else {
    MatrixRuleBackwardArgs b = matrix_rule_backward_args(rule_inputs(d, c, st));
    b.dO = sb.dO;
    b.ld_do = D;
    b.dq = sb.dqn;
    b.dk = sb.dkn;
    b.ld_dqk = D;
    b.dv = sb.dv;
    b.ld_dv = D;
    b.dbeta = s.dbeta;
    b.dalpha = d.gated ? s.dalpha : nullptr;
    b.workspace = s.rule_ws;
    b.workspace_bytes = s.rule_bytes;
    matrix_rule_backward(b);
  }
  // β = sigmoid(x W_β)
  deltanet_sigmoid_backward(c.beta, s.dbeta, s.dbeta, std::size_t(R) * H, st);
  lin(p.b_proj, g.b_proj, H, s.dbeta);
  // α = exp(g), g = −exp(A_log)·softplus(r), r = x W_a + dt_bias
  if (d.gated) {
    deltanet_alpha_backward(c.r, chunked ? nullptr : c.alpha, s.dalpha, p.A_log, R, H, s.dr,
                            s.dA_terms, st);
    column_sum_add(s.dA_terms, R, H, g.A_log, s.sum_ws, st);
    column_sum_add(s.dr, R, H, g.dt_bias, s.sum_ws, st);
    lin(p.a_proj, g.a_proj, H, s.dr);
  }
  // The L2 normalisations, then per branch silu, the convolution and the projection.
  detail::short_conv_block_front_backward(bd, detail::short_conv_block_params(p), bc,
                                          detail::short_conv_block_grads(g), sb, lin, st);
}

}  // namespace tttlab::kernels
