// The Titans layer on the GPU (tttlab/kernels/titans.hpp, "the whole layer"): TitansLayer's
// forward_train and backward (core/src/seq/titans_layer.cpp) statement by statement over the ops,
// for B sequences stacked as R rows: the block DeltaNet's layer has (short_conv_block.hpp) around
// Titans' memory (ops/titans.cu) and its three gates. Every intermediate the backward reads is kept;
// the memory's backward reruns its own forward from the kept states.
#include <algorithm>
#include <stdexcept>
#include <string>

#include "model/short_conv_block.hpp"
#include "tttlab/kernels/nn_ops.hpp"
#include "tttlab/kernels/titans.hpp"

namespace tttlab::kernels {
namespace {

using detail::BlockCarver;
using detail::BlockLinearBackward;
using detail::ShortConvBlockCache;
using detail::ShortConvBlockDims;
using detail::ShortConvBlockScratch;

void bad(const std::string& what) { throw std::invalid_argument("titans layer (GPU): " + what); }

void check(const TitansLayerDims& d) {
  if (const std::string why = titans_layer_unsupported(d); !why.empty()) bad(why);
}

// The shared block's view of the layer: q̂ unscaled (the memory's read LayerNorm makes its scale
// immaterial), always gated.
ShortConvBlockDims block_dims(const TitansLayerDims& d) {
  ShortConvBlockDims b;
  b.batch = d.batch;
  b.seq_len = d.seq_len;
  b.width = d.width;
  b.heads = d.heads;
  b.conv_kernel = d.conv_kernel;
  b.q_scale = 1.f;
  b.gated = true;
  b.norm_eps = d.norm_eps;
  b.l2_eps = d.l2_eps;
  return b;
}

// The memory's inputs as the forward keeps them (q̂, k̂, v [R, D], θ, α, η [R, H], the LayerNorm's
// weight and bias, the kept states), for both directions; the forward adds its output.
TitansForwardArgs memory_inputs(const TitansLayerDims& d, const TitansLayerParams& p,
                                const TitansLayerCache& c, CUstream_st* st) {
  TitansForwardArgs f;
  f.dims = d.memory();
  f.q = c.qn;
  f.ld_q = d.width;
  f.k = c.kn;
  f.ld_k = d.width;
  f.v = c.av;
  f.ld_v = d.width;
  f.theta = c.theta;
  f.alpha = c.alpha;
  f.eta = c.eta;
  f.w = p.ln_weight;
  f.bias = p.ln_bias;
  f.M0 = nullptr;
  f.eps = d.ln_eps;
  f.states = c.states;
  f.stream = st;
  return f;
}

std::size_t carve_cache(const TitansLayerDims& d, float* base, TitansLayerCache* out) {
  const std::size_t R = d.rows(), H = d.heads;
  BlockCarver c{base};
  ShortConvBlockCache b;
  detail::carve_short_conv_block_cache(block_dims(d), c, &b);
  TitansLayerCache k;
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
  for (float** t : {&k.theta, &k.alpha, &k.eta}) *t = c.take(R * H);
  k.states = c.take(titans_state_floats(d.memory()));
  if (out) *out = k;
  return c.used;
}

// The backward's scratch: the shared block's; the gradients of θ, α, η [R, H] and of a gate's
// pre-activation (one [R, H] buffer, reused by the three gates); the memory's dw, dbias [H, d] (it
// overwrites them; the layer adds them to the gradients); the column sums' and the memory's
// workspaces.
struct Scratch {
  ShortConvBlockScratch block;
  float *dtheta = nullptr, *dalpha = nullptr, *deta = nullptr, *dz = nullptr, *dw = nullptr,
        *dbias = nullptr, *sum_ws = nullptr, *memory_ws = nullptr;
  std::size_t memory_bytes = 0;
};

std::size_t carve(const TitansLayerDims& d, float* base, Scratch* out) {
  const std::size_t R = d.rows(), H = d.heads, hd = d.head_dim();
  BlockCarver c{base};
  Scratch s;
  detail::carve_short_conv_block_scratch(block_dims(d), c, &s.block);
  for (float** t : {&s.dtheta, &s.dalpha, &s.deta, &s.dz}) *t = c.take(R * H);
  s.dw = c.take(H * hd);
  s.dbias = c.take(H * hd);
  s.sum_ws = c.take(column_sum_workspace(int(R), d.heads));
  s.memory_bytes = titans_backward_workspace_bytes(d.memory());
  s.memory_ws = c.take((s.memory_bytes + 3) / 4);
  if (out) *out = s;
  return c.used;
}

}  // namespace

TitansDims TitansLayerDims::memory() const {
  TitansDims m;
  m.batch = batch;
  m.seq_len = seq_len;
  m.heads = heads;
  m.dim = head_dim();
  m.mini_batch = mini_batch;
  m.chunk = mini_batch > 0 ? mini_batch * std::max(1, 64 / mini_batch) : 1;
  return m;
}

std::string titans_layer_unsupported(const TitansLayerDims& d) {
  if (d.batch < 1 || d.seq_len < 1 || d.width < 1 || d.heads < 1 || d.mini_batch < 1)
    return "the Titans layer needs positive sizes";
  if (d.width % d.heads != 0) return "the Titans heads must divide the width";
  if (d.conv_kernel < 1 || d.conv_kernel > 16)
    return "the GPU's causal convolution needs conv_kernel <= 16, got " +
           std::to_string(d.conv_kernel);
  if (!(d.norm_eps > 0.f) || !(d.l2_eps > 0.f) || !(d.ln_eps > 0.f))
    return "the Titans norms' eps must be positive";
  return titans_unsupported(d.memory());
}

std::size_t titans_layer_cache_floats(const TitansLayerDims& d) {
  return carve_cache(d, nullptr, nullptr);
}

TitansLayerCache titans_layer_cache(const TitansLayerDims& d, float* base) {
  TitansLayerCache c;
  carve_cache(d, base, &c);
  return c;
}

std::size_t titans_layer_workspace_floats(const TitansLayerDims& d) {
  return carve(d, nullptr, nullptr);
}

void titans_layer_forward(const TitansProduct& product, const TitansLayerDims& d,
                          const TitansLayerParams& p, const float* x, const TitansLayerCache& c,
                          float* out, CUstream_st* st) {
  check(d);
  if (!x || !out || !c.uq || !c.gate || !c.theta || !c.states || !p.q_proj || !p.k_proj ||
      !p.v_proj || !p.q_conv || !p.k_conv || !p.v_conv || !p.theta_proj || !p.theta_bias ||
      !p.alpha_proj || !p.alpha_bias || !p.eta_proj || !p.eta_bias || !p.ln_weight || !p.ln_bias ||
      !p.o_norm || !p.g_proj || !p.o_proj)
    bad("forward: a pointer is null");
  const int R = d.rows(), D = d.width, H = d.heads;
  const ShortConvBlockDims bd = block_dims(d);
  // q, k, v = silu(conv(x W)); q̂ = q / ‖q‖, k̂ = k / ‖k‖ per head
  detail::short_conv_block_front(product, bd, detail::short_conv_block_params(p), x,
                                 detail::short_conv_block_cache(c), st);
  // θ = σ(x W_θ + b_θ)/d, α = σ(x W_α + b_α), η = σ(x W_η + b_η): eta_forward over R sequences of one
  // token writes them [R, H], the memory's layout. The pre-activation x W [R, H] goes to c.o, which
  // the memory writes only after (eta_forward's input and output may not alias).
  auto gate = [&](const float* W, const float* bias, float scale, float* out_gate) {
    product(false, false, R, H, D, x, nullptr, D, W, nullptr, H, c.o, H, false);
    eta_forward(c.o, bias, R, 1, H, scale, out_gate, st);
  };
  gate(p.theta_proj, p.theta_bias, 1.f / float(d.head_dim()), c.theta);
  gate(p.alpha_proj, p.alpha_bias, 1.f, c.alpha);
  gate(p.eta_proj, p.eta_bias, 1.f, c.eta);
  // o = the memory's reads from M_0 = 0
  TitansForwardArgs f = memory_inputs(d, p, c, st);
  f.o = c.o;
  f.ld_o = D;
  titans_forward(f);
  // n = RMSNorm(o_h)·w per head; y = n ⊙ silu(x W_g); out = y W_o
  detail::short_conv_block_back(product, bd, detail::short_conv_block_params(p), x,
                                detail::short_conv_block_cache(c), out, st);
}

void titans_layer_backward(const TitansProduct& product, const TitansLayerDims& d,
                           const TitansLayerParams& p, const float* x, const TitansLayerCache& c,
                           const float* dOut, const TitansLayerGrads& g, float* dx, bool accumulate,
                           float* workspace, CUstream_st* st) {
  check(d);
  if (!x || !dOut || !dx || !workspace || !g.q_proj || !g.k_proj || !g.v_proj || !g.q_conv ||
      !g.k_conv || !g.v_conv || !g.theta_proj || !g.theta_bias || !g.alpha_proj || !g.alpha_bias ||
      !g.eta_proj || !g.eta_bias || !g.ln_weight || !g.ln_bias || !g.o_norm || !g.g_proj ||
      !g.o_proj)
    bad("backward: a pointer is null");
  const int R = d.rows(), D = d.width, H = d.heads, hd = d.head_dim();
  Scratch s;
  carve(d, workspace, &s);
  const ShortConvBlockScratch& sb = s.block;
  const ShortConvBlockDims bd = block_dims(d);
  const ShortConvBlockCache bc = detail::short_conv_block_cache(c);
  // Weight gradient W += xᵀ dz and dx (+)= dz Wᵀ, dx written by the first and added to after, in the
  // CPU's order: g_proj, θ, α, η, then q, k, v.
  BlockLinearBackward lin{product, x, R, D, dx, accumulate};
  // out = y W_o; y = n ⊙ silu(gate); n = RMSNorm(o_h)·w per head
  detail::short_conv_block_back_backward(product, bd, detail::short_conv_block_params(p), bc, dOut,
                                         detail::short_conv_block_grads(g), sb, lin, st);
  // The memory, from ∂L/∂M_T = 0: dq̂, dk̂, dv, dθ, dα, dη, and dw, dbias summed over the batch.
  TitansBackwardArgs b = titans_backward_args(memory_inputs(d, p, c, st));
  b.dO = sb.dO;
  b.ld_do = D;
  b.dM_final = nullptr;
  b.dq = sb.dqn;
  b.ld_dq = D;
  b.dk = sb.dkn;
  b.ld_dk = D;
  b.dv = sb.dv;
  b.ld_dv = D;
  b.dtheta = s.dtheta;
  b.dalpha = s.dalpha;
  b.deta = s.deta;
  b.dw = s.dw;
  b.dbias = s.dbias;
  b.dM0 = nullptr;
  b.workspace = s.memory_ws;
  b.workspace_bytes = s.memory_bytes;
  titans_backward(b);
  add(g.ln_weight, s.dw, g.ln_weight, std::size_t(H) * hd, st);
  add(g.ln_bias, s.dbias, g.ln_bias, std::size_t(H) * hd, st);
  // θ = σ(z)/d, α = σ(z), η = σ(z): dz = d(out)·out·(1 − out/scale), then the bias and the projection.
  auto through_gate = [&](const float* dval, const float* val, float scale, const float* W,
                          float* gW, float* gb) {
    eta_backward(val, dval, R, 1, H, scale, s.dz, st);
    column_sum_add(s.dz, R, H, gb, s.sum_ws, st);
    lin(W, gW, H, s.dz);
  };
  through_gate(s.dtheta, c.theta, 1.f / float(hd), p.theta_proj, g.theta_proj, g.theta_bias);
  through_gate(s.dalpha, c.alpha, 1.f, p.alpha_proj, g.alpha_proj, g.alpha_bias);
  through_gate(s.deta, c.eta, 1.f, p.eta_proj, g.eta_proj, g.eta_bias);
  // q̂ = q / ‖q‖, k̂ = k / ‖k‖ per head, then per branch silu, the convolution and the projection.
  detail::short_conv_block_front_backward(bd, detail::short_conv_block_params(p), bc,
                                          detail::short_conv_block_grads(g), sb, lin, st);
}

}  // namespace tttlab::kernels
