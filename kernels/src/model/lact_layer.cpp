// The LaCT layer on the GPU (tttlab/kernels/lact.hpp, "the whole layer"): LactLayer's forward_train
// and backward (core/src/seq/lact_layer.cpp) statement by statement over the ops, for B sequences
// stacked as R rows. Every intermediate the backward reads is kept; the inner loop's backward walks
// its kept states. The inner loop is called through run_lact_forward / run_lact_backward only, so
// that another implementation of lact_forward / lact_backward (same arguments, same semantics) is a
// change of those two functions.
#include <cuda_runtime_api.h>

#include <algorithm>
#include <cmath>
#include <stdexcept>
#include <string>

#include "common/cuda_check.hpp"
#include "model/short_conv_block.hpp"
#include "tttlab/kernels/attention.hpp"
#include "tttlab/kernels/lact.hpp"
#include "tttlab/kernels/nn_ops.hpp"

namespace tttlab::kernels {
namespace {

using detail::BlockCarver;
using detail::BlockLinearBackward;

constexpr float kL2Eps = 1e-5f;  // LaCT's l2_norm: u / (‖u‖ + 1e-5) (k_lact_l2_eps on the CPU)

void bad(const std::string& what) { throw std::invalid_argument("lact layer (GPU): " + what); }

void check(const LactLayerDims& d) {
  if (const std::string why = lact_layer_unsupported(d); !why.empty()) bad(why);
}

// The inner loop, the one place it is called (see the file's comment): the chunk-parallel form on
// the given products, or the correct-first kernels without them.
void run_lact_forward(const Gemm* gemm, const LactForwardArgs& a) {
  if (gemm)
    lact_forward_chunked(*gemm, a);
  else
    lact_forward(a);
}
void run_lact_backward(const Gemm* gemm, const LactBackwardArgs& a) {
  if (gemm)
    lact_backward_chunked(*gemm, a);
  else
    lact_backward(a);
}
// Bytes of the inner loop's scratch for either form: the chunked form's (both directions) or the
// kernels' backward's, whichever is larger.
std::size_t inner_scratch_bytes(const LactLayerDims& d) {
  return std::max(lact_chunked_workspace_bytes(d.inner()), lact_backward_workspace_bytes(d.inner()));
}

// The inner loop's inputs as the forward keeps them, for both directions; the forward adds its
// initial weights and output.
LactForwardArgs inner_inputs(const LactLayerDims& d, const LactLayerCache& c, CUstream_st* st) {
  LactForwardArgs f;
  f.dims = d.inner();
  f.q = c.qf;
  f.ld_q = d.width;
  f.k = c.kf;
  f.ld_k = d.width;
  f.v = c.vs;
  f.ld_v = d.width;
  f.lr0 = c.lr0;
  f.lr1 = c.lr1;
  f.lr2 = c.lr2;
  f.momentum = d.momentum ? c.mom : nullptr;
  f.states = c.states;
  f.stream = st;
  return f;
}

std::size_t fw_floats(const LactLayerDims& d) {  // one initial weight matrix over the batch
  return std::size_t(d.batch) * d.lact_heads * d.fw_hidden() * d.fw_head_dim();
}

std::size_t carve_cache(const LactLayerDims& d, float* base, LactLayerCache* out) {
  const std::size_t R = d.rows(), D = d.width, Hf = d.lact_heads;
  BlockCarver c{base};
  LactLayerCache k;
  for (float** t : {&k.q, &k.k, &k.v, &k.qa, &k.ka, &k.qs, &k.ks, &k.qf, &k.kf, &k.vs, &k.oa, &k.of,
                    &k.n, &k.o})
    *t = c.take(R * D);
  k.lr_z = c.take(R * 3 * Hf);
  for (float** t : {&k.lr0, &k.lr1, &k.lr2, &k.mom, &k.sz}) *t = c.take(R * Hf);
  k.lse = c.take(std::size_t(d.batch) * d.attn_heads * d.seq_len);
  for (float** t : {&k.w0b, &k.w1b, &k.w2b}) *t = c.take(fw_floats(d));
  k.states = c.take(lact_state_floats(d.inner()));
  k.inner_ws = c.take((lact_chunked_workspace_bytes(d.inner()) + 3) / 4);
  if (out) *out = k;
  return c.used;
}

// The backward's scratch: the gradients of o_proj's input (dout), of the attention's q, k, v and
// then of the projections (dq, dk, dv: the attention's, then the fast branch's added), of the fast
// weights' q, k, v (dqf, dkf, dvs), of n and of, the qk pass's dt and dt ⊙ u; of the rates, the
// momentum and the scale [R, H_f] and of their pre-activations (dz3 [R, 3 H_f], dzm [R, H_f]); the
// initial weights' per-sequence gradients; two [D] column sums; the workspaces of the norm, the
// column sums, the attention and the inner loop.
struct Scratch {
  float *dout = nullptr, *dq = nullptr, *dk = nullptr, *dv = nullptr, *dqf = nullptr,
        *dkf = nullptr, *dvs = nullptr, *dn = nullptr, *dof = nullptr, *dt = nullptr,
        *dtu = nullptr, *dlr0 = nullptr, *dlr1 = nullptr, *dlr2 = nullptr, *dmom = nullptr,
        *dsz = nullptr, *dzm = nullptr, *dz3 = nullptr, *dw0b = nullptr, *dw1b = nullptr,
        *dw2b = nullptr, *sum_t = nullptr, *sum_tu = nullptr, *norm_ws = nullptr,
        *sum_ws = nullptr, *attn_ws = nullptr, *inner_ws = nullptr;
  std::size_t attn_bytes = 0, inner_bytes = 0;
};

AttentionDims attention_dims(const LactLayerDims& d) {
  return AttentionDims{d.batch, d.attn_heads, d.seq_len, d.attn_head_dim()};
}

std::size_t carve(const LactLayerDims& d, float* base, Scratch* out) {
  const int R = d.rows(), D = d.width, Hf = d.lact_heads, df = d.fw_head_dim();
  BlockCarver c{base};
  Scratch s;
  for (float** t : {&s.dout, &s.dq, &s.dk, &s.dv, &s.dqf, &s.dkf, &s.dvs, &s.dn, &s.dof, &s.dt,
                    &s.dtu})
    *t = c.take(std::size_t(R) * D);
  for (float** t : {&s.dlr0, &s.dlr1, &s.dlr2, &s.dmom, &s.dsz, &s.dzm})
    *t = c.take(std::size_t(R) * Hf);
  s.dz3 = c.take(std::size_t(R) * 3 * Hf);
  for (float** t : {&s.dw0b, &s.dw1b, &s.dw2b}) *t = c.take(fw_floats(d));
  s.sum_t = c.take(D);
  s.sum_tu = c.take(D);
  s.norm_ws = c.take(rms_norm_backward_workspace(R * Hf, df));
  const int fw = Hf * d.fw_hidden() * df;
  s.sum_ws = c.take(std::max({column_sum_workspace(R, D), column_sum_workspace(R, 3 * Hf),
                              column_sum_workspace(d.batch, fw)}));
  s.attn_bytes = attention_backward_workspace_bytes(attention_dims(d), AttentionKind::Softmax);
  s.attn_ws = c.take((s.attn_bytes + 3) / 4);
  s.inner_bytes = inner_scratch_bytes(d);
  s.inner_ws = c.take((s.inner_bytes + 3) / 4);
  if (out) *out = s;
  return c.used;
}

void copy(float* dst, const float* src, std::size_t n, CUstream_st* st) {
  TTTLAB_CUDA_CHECK(cudaMemcpyAsync(dst, src, n * sizeof(float), cudaMemcpyDeviceToDevice, st));
}

}  // namespace

LactDims LactLayerDims::inner() const {
  LactDims m;
  m.batch = batch;
  m.seq_len = seq_len;
  m.heads = lact_heads;
  m.dim = fw_head_dim();
  m.hidden = fw_hidden();
  m.chunk = chunk;
  m.muon = muon;
  return m;
}

std::string lact_layer_unsupported(const LactLayerDims& d) {
  auto positive = [](int v, const char* name) -> std::string {
    return v >= 1 ? std::string() : std::string("the LaCT layer needs ") + name + " >= 1, got " +
                                        std::to_string(v);
  };
  for (auto [v, name] : {std::pair{d.batch, "batch"}, {d.seq_len, "seq_len"}, {d.width, "width"},
                         {d.attn_heads, "attn_heads"}, {d.lact_heads, "lact_heads"},
                         {d.inter_multi, "inter_multi"}, {d.chunk, "chunk"}, {d.window, "window"}})
    if (std::string why = positive(v, name); !why.empty()) return why;
  if (d.width % d.attn_heads != 0)
    return "the LaCT layer's attn_heads (" + std::to_string(d.attn_heads) +
           ") must divide the width (" + std::to_string(d.width) + ")";
  if (d.width % d.lact_heads != 0)
    return "the LaCT layer's lact_heads (" + std::to_string(d.lact_heads) +
           ") must divide the width (" + std::to_string(d.width) + ")";
  const int da = d.attn_head_dim();
  if (da % 2 != 0 || da > 128)
    return "the LaCT layer's attention head dim (width / attn_heads) must be even and <= 128 (the "
           "GPU's windowed attention), got " +
           std::to_string(da);
  if (!(d.norm_eps > 0.f) || !(d.base_lr > 0.f))
    return "the LaCT layer's norm_eps and base_lr must be positive";
  if (d.muon)
    return "the LaCT layer's muon (lact_muon) runs on the CPU only: the GPU's inner loop has no "
           "Newton-Schulz";
  return lact_chunked_unsupported(d.inner());
}

std::size_t lact_layer_cache_floats(const LactLayerDims& d) {
  return carve_cache(d, nullptr, nullptr);
}

LactLayerCache lact_layer_cache(const LactLayerDims& d, float* base) {
  LactLayerCache c;
  carve_cache(d, base, &c);
  return c;
}

std::size_t lact_layer_workspace_floats(const LactLayerDims& d) {
  return carve(d, nullptr, nullptr);
}

void lact_layer_forward(const LactProduct& product, const Gemm* inner_gemm, const LactLayerDims& d,
                        const LactLayerParams& p, const float* x, const LactLayerCache& c,
                        float* out, CUstream_st* st) {
  check(d);
  if (!x || !out || !c.q || !c.o || !c.states || !c.w0b || !p.qkv || !p.qk_scale || !p.qk_offset ||
      !p.w0 || !p.w1 || !p.w2 || !p.lr_proj || !p.lr_bias || !p.scale_proj || !p.scale_bias ||
      !p.ttt_norm || !p.o_proj || !p.rope_cos || !p.rope_sin ||
      (d.momentum && (!p.momentum_proj || !p.momentum_bias)))
    bad("forward: a pointer is null");
  const int B = d.batch, T = d.seq_len, R = d.rows(), D = d.width, Ha = d.attn_heads,
            da = d.attn_head_dim(), Hf = d.lact_heads, df = d.fw_head_dim();
  const std::size_t RD = std::size_t(R) * D;
  // [q, k, v] = x W_qkv: three products of W_qkv's column blocks (each entry the CPU's dot over D)
  float* qkv[3] = {c.q, c.k, c.v};
  for (int j = 0; j < 3; ++j)
    product(false, false, R, D, D, x, nullptr, D, p.qkv + j * D, nullptr, 3 * D, qkv[j], D, false);
  // the attention's RoPE(q), RoPE(k): H_a heads, positions 0..T−1
  copy(c.qa, c.q, RD, st);
  copy(c.ka, c.k, RD, st);
  rope_rotate(c.qa, B, T, Ha, da, T, p.rope_cos, p.rope_sin, 1.f, st);
  rope_rotate(c.ka, B, T, Ha, da, T, p.rope_cos, p.rope_sin, 1.f, st);
  // q_f = RoPE(L2(silu(q ⊙ s_q + b_q))) per fast head, k_f likewise; v_f = silu(v)
  lact_qk_forward(c.q, p.qk_scale, p.qk_offset, 2, R, D, df, kL2Eps, c.qs, c.qf, st);
  lact_qk_forward(c.k, p.qk_scale + 1, p.qk_offset + 1, 2, R, D, df, kL2Eps, c.ks, c.kf, st);
  rope_rotate(c.qf, B, T, Ha, da, T, p.rope_cos, p.rope_sin, 1.f, st);
  rope_rotate(c.kf, B, T, Ha, da, T, p.rope_cos, p.rope_sin, 1.f, st);
  lact_silu_forward(c.v, RD, c.vs, st);
  // η = softplus(x W_lr + b_lr + softplus⁻¹(base_lr)), split per head into the kernels' [R, H_f]
  product(false, false, R, 3 * Hf, D, x, nullptr, D, p.lr_proj, nullptr, 3 * Hf, c.lr_z, 3 * Hf,
          false);
  const float base = float(std::log(std::expm1(double(d.base_lr))));
  lact_rates_forward(c.lr_z, p.lr_bias, base, R, Hf, c.lr_z, c.lr0, c.lr1, c.lr2, st);
  // m = σ(x W_m + b_m) [R, H_f] (eta_forward over R rows of one token); the pre-activation goes
  // to c.of, which the inner loop writes only after
  if (d.momentum) {
    product(false, false, R, Hf, D, x, nullptr, D, p.momentum_proj, nullptr, Hf, c.of, Hf, false);
    eta_forward(c.of, p.momentum_bias, R, 1, Hf, 1.f, c.mom, st);
  }
  // the output scale's pre-activation x W_s [R, H_f] (its bias is added where it is used)
  product(false, false, R, Hf, D, x, nullptr, D, p.scale_proj, nullptr, Hf, c.sz, Hf, false);
  // o_a = SWA(RoPE(q), RoPE(k), v): the fp32 CUDA-core kernels, the only ones with a window
  AttentionForwardArgs a;
  a.dims = attention_dims(d);
  a.kind = AttentionKind::Softmax;
  a.Q = c.qa;
  a.K = c.ka;
  a.V = c.v;
  a.O = c.oa;
  a.lse = c.lse;
  a.stream = st;
  a.precision = AttentionPrecision::fp32;
  a.window = d.window;
  attention_forward(a);
  // o_f = the fast weights' reads, from the learnable initial weights of every sequence
  const std::size_t fw = fw_floats(d) / std::size_t(B);
  for (int n = 0; n < B; ++n) {
    copy(c.w0b + n * fw, p.w0, fw, st);
    copy(c.w1b + n * fw, p.w1, fw, st);
    copy(c.w2b + n * fw, p.w2, fw, st);
  }
  LactForwardArgs f = inner_inputs(d, c, st);
  f.w0 = c.w0b;
  f.w1 = c.w1b;
  f.w2 = c.w2b;
  f.o = c.of;
  f.ld_o = D;
  f.workspace = c.inner_ws;
  f.workspace_bytes = lact_chunked_workspace_bytes(d.inner());
  run_lact_forward(inner_gemm, f);
  // n = RMSNorm(o_f,h)·w per fast head ([R, D] as [R·H_f, d_f]); o = o_a + n ⊙ silu(sz + b_s)
  rms_norm_forward(c.of, p.ttt_norm, R * Hf, df, d.norm_eps, c.n, st);
  lact_scale_forward(c.n, c.sz, p.scale_bias, c.oa, R, Hf, df, c.o, st);
  // out = o W_o
  product(false, false, R, D, D, c.o, nullptr, D, p.o_proj, nullptr, D, out, D, false);
}

void lact_layer_backward(const LactProduct& product, const Gemm* inner_gemm, const LactLayerDims& d,
                         const LactLayerParams& p, const float* x, const LactLayerCache& c,
                         const float* dOut, const LactLayerGrads& g, float* dx, bool accumulate,
                         float* workspace, CUstream_st* st) {
  check(d);
  if (!x || !dOut || !dx || !workspace || !g.qkv || !g.qk_scale || !g.qk_offset || !g.w0 ||
      !g.w1 || !g.w2 || !g.lr_proj || !g.lr_bias || !g.scale_proj || !g.scale_bias ||
      !g.ttt_norm || !g.o_proj || !p.rope_cos || !p.rope_sin ||
      (d.momentum && (!g.momentum_proj || !g.momentum_bias)))
    bad("backward: a pointer is null");
  const int B = d.batch, T = d.seq_len, R = d.rows(), D = d.width, Ha = d.attn_heads,
            da = d.attn_head_dim(), Hf = d.lact_heads, df = d.fw_head_dim();
  const std::size_t RD = std::size_t(R) * D;
  Scratch s;
  carve(d, workspace, &s);
  // out = o · o_proj
  product(true, false, D, D, R, c.o, nullptr, D, dOut, nullptr, D, g.o_proj, D, true);
  product(false, true, R, D, D, dOut, nullptr, D, p.o_proj, nullptr, D, s.dout, D, false);
  // the attention branch: o_a = SWA(RoPE(q), RoPE(k), v); then RoPE's transpose on dq, dk
  AttentionBackwardArgs a;
  a.dims = attention_dims(d);
  a.kind = AttentionKind::Softmax;
  a.Q = c.qa;
  a.K = c.ka;
  a.V = c.v;
  a.O = c.oa;
  a.lse = c.lse;
  a.dO = s.dout;
  a.dQ = s.dq;
  a.dK = s.dk;
  a.dV = s.dv;
  a.workspace = s.attn_ws;
  a.workspace_bytes = s.attn_bytes;
  a.stream = st;
  a.precision = AttentionPrecision::fp32;
  a.window = d.window;
  attention_backward(a);
  rope_rotate(s.dq, B, T, Ha, da, T, p.rope_cos, p.rope_sin, -1.f, st);
  rope_rotate(s.dk, B, T, Ha, da, T, p.rope_cos, p.rope_sin, -1.f, st);
  // the fast branch: y_f,h = RMSNorm(o_f,h)·w · silu(sz_h + b_s): dn, dsz, then the norm (dw +=)
  lact_scale_backward(c.n, c.sz, p.scale_bias, s.dout, R, Hf, df, s.dn, s.dsz, st);
  rms_norm_backward(c.of, p.ttt_norm, s.dn, R * Hf, df, d.norm_eps, s.dof, false, g.ttt_norm,
                    s.norm_ws, st);
  // the inner loop: dq_f, dk_f, dv_f, the rates', the momentum's and the initial weights' gradients
  // (per sequence, then summed over the batch in sequence order)
  LactBackwardArgs b = lact_backward_args(inner_inputs(d, c, st));
  b.dO = s.dof;
  b.ld_do = D;
  b.dq = s.dqf;
  b.ld_dq = D;
  b.dk = s.dkf;
  b.ld_dk = D;
  b.dv = s.dvs;
  b.ld_dv = D;
  b.dlr0 = s.dlr0;
  b.dlr1 = s.dlr1;
  b.dlr2 = s.dlr2;
  b.dmomentum = d.momentum ? s.dmom : nullptr;
  b.dw0 = s.dw0b;
  b.dw1 = s.dw1b;
  b.dw2 = s.dw2b;
  b.workspace = s.inner_ws;
  b.workspace_bytes = s.inner_bytes;
  run_lact_backward(inner_gemm, b);
  const int fw = int(fw_floats(d) / std::size_t(B));
  column_sum_add(s.dw0b, B, fw, g.w0, s.sum_ws, st);
  column_sum_add(s.dw1b, B, fw, g.w1, s.sum_ws, st);
  column_sum_add(s.dw2b, B, fw, g.w2, s.sum_ws, st);
  // The projections of x, in the CPU's order of dx: the output scale, the rates (softplus), the
  // momentum (sigmoid); q, k, v last.
  BlockLinearBackward lin{product, x, R, D, dx, accumulate};
  column_sum_add(s.dsz, R, Hf, g.scale_bias, s.sum_ws, st);
  lin(p.scale_proj, g.scale_proj, Hf, s.dsz);
  lact_rates_backward(c.lr_z, s.dlr0, s.dlr1, s.dlr2, R, Hf, s.dz3, st);
  column_sum_add(s.dz3, R, 3 * Hf, g.lr_bias, s.sum_ws, st);
  lin(p.lr_proj, g.lr_proj, 3 * Hf, s.dz3);
  if (d.momentum) {
    eta_backward(c.mom, s.dmom, R, 1, Hf, 1.f, s.dzm, st);
    column_sum_add(s.dzm, R, Hf, g.momentum_bias, s.sum_ws, st);
    lin(p.momentum_proj, g.momentum_proj, Hf, s.dzm);
  }
  // q_f = RoPE(L2(silu(q̃))), k_f likewise (q̃ = q ⊙ s_q + b_q): dq += dq̃ ⊙ s_q, and qk_scale's,
  // qk_offset's columns from the sums of dq̃ ⊙ q and dq̃ over the rows; v_f = silu(v)
  rope_rotate(s.dqf, B, T, Ha, da, T, p.rope_cos, p.rope_sin, -1.f, st);
  rope_rotate(s.dkf, B, T, Ha, da, T, p.rope_cos, p.rope_sin, -1.f, st);
  const float* u[2] = {c.q, c.k};
  const float* us[2] = {c.qs, c.ks};
  float* dF[2] = {s.dqf, s.dkf};
  float* du[2] = {s.dq, s.dk};
  for (int j = 0; j < 2; ++j) {
    lact_qk_backward(u[j], us[j], p.qk_scale + j, p.qk_offset + j, 2, dF[j], R, D, df, kL2Eps, du[j],
                     s.dt, s.dtu, st);
    TTTLAB_CUDA_CHECK(cudaMemsetAsync(s.sum_t, 0, std::size_t(D) * sizeof(float), st));
    TTTLAB_CUDA_CHECK(cudaMemsetAsync(s.sum_tu, 0, std::size_t(D) * sizeof(float), st));
    column_sum_add(s.dt, R, D, s.sum_t, s.sum_ws, st);
    column_sum_add(s.dtu, R, D, s.sum_tu, s.sum_ws, st);
    lact_add_strided(s.sum_tu, D, g.qk_scale + j, 2, st);
    lact_add_strided(s.sum_t, D, g.qk_offset + j, 2, st);
  }
  lact_silu_backward_add(c.v, s.dvs, RD, s.dv, st);
  // [q, k, v] = x W_qkv: W_qkv's column blocks += xᵀ d·, dx += d· W_·ᵀ
  const float* dP[3] = {s.dq, s.dk, s.dv};
  for (int j = 0; j < 3; ++j) {
    product(true, false, D, D, R, x, nullptr, D, dP[j], nullptr, D, g.qkv + j * D, 3 * D, true);
    product(false, true, R, D, D, dP[j], nullptr, D, p.qkv + j * D, nullptr, 3 * D, dx, D,
            lin.written);
    lin.written = true;
  }
}

}  // namespace tttlab::kernels
