// The block the GPU's DeltaNet and Titans layers share (short_conv_block.hpp): the CPU layers'
// statements around the inner loop (core/src/seq/deltanet_layer.cpp, titans_layer.cpp), each pass a
// separate op, every intermediate the backward reads kept.
#include "model/short_conv_block.hpp"

#include <cuda_runtime_api.h>

#include "common/cuda_check.hpp"
#include "tttlab/kernels/deltanet.hpp"
#include "tttlab/kernels/nn_ops.hpp"

namespace tttlab::kernels::detail {

void carve_short_conv_block_cache(const ShortConvBlockDims& d, BlockCarver& c,
                                  ShortConvBlockCache* out) {
  const std::size_t R = d.rows(), D = d.width;
  ShortConvBlockCache k;
  for (float** t :
       {&k.uq, &k.uk, &k.uv, &k.cq, &k.ck, &k.cv, &k.aq, &k.ak, &k.av, &k.qn, &k.kn, &k.o, &k.n})
    *t = c.take(R * D);
  if (d.gated) {
    k.gate = c.take(R * D);
    k.y = c.take(R * D);
  }
  k.zero_bias = c.take(D);
  if (out) *out = k;
}

void carve_short_conv_block_scratch(const ShortConvBlockDims& d, BlockCarver& c,
                                    ShortConvBlockScratch* out) {
  const std::size_t R = d.rows(), D = d.width;
  ShortConvBlockScratch s;
  for (float** t : {&s.dy, &s.dn, &s.dO, &s.dqn, &s.dkn, &s.dv, &s.da, &s.dc, &s.du})
    *t = c.take(R * D);
  if (d.gated) s.dgate = c.take(R * D);
  s.dbias = c.take(D);
  s.norm_ws = c.take(rms_norm_backward_workspace(int(R) * d.heads, d.head_dim()));
  s.conv_ws = c.take(causal_conv_backward_workspace(d.batch, d.seq_len, d.width, d.conv_kernel));
  if (out) *out = s;
}

void short_conv_block_front(const Mamba2Product& product, const ShortConvBlockDims& d,
                            const ShortConvBlockParams& p, const float* x,
                            const ShortConvBlockCache& c, CUstream_st* st) {
  const int R = d.rows(), D = d.width, H = d.heads, hd = d.head_dim(), K = d.conv_kernel;
  const std::size_t RD = std::size_t(R) * D;
  // q, k, v = silu(conv(x W)), each sequence from a zero history
  TTTLAB_CUDA_CHECK(cudaMemsetAsync(c.zero_bias, 0, sizeof(float) * D, st));
  const float* W[3] = {p.q_proj, p.k_proj, p.v_proj};
  const float* conv[3] = {p.q_conv, p.k_conv, p.v_conv};
  float* u[3] = {c.uq, c.uk, c.uv};
  float* cv[3] = {c.cq, c.ck, c.cv};
  float* a[3] = {c.aq, c.ak, c.av};
  for (int b = 0; b < 3; ++b) {
    product(false, false, R, D, D, x, nullptr, D, W[b], nullptr, D, u[b], D, false);
    causal_conv_forward(u[b], conv[b], c.zero_bias, d.batch, d.seq_len, D, K, cv[b], st);
    mamba2_silu_forward(cv[b], a[b], RD, st);
  }
  // q̂ = q / ‖q‖ · q_scale, k̂ = k / ‖k‖ per head
  deltanet_l2norm_heads_forward(c.aq, R, H, hd, d.q_scale, d.l2_eps, c.qn, st);
  deltanet_l2norm_heads_forward(c.ak, R, H, hd, 1.f, d.l2_eps, c.kn, st);
}

void short_conv_block_back(const Mamba2Product& product, const ShortConvBlockDims& d,
                           const ShortConvBlockParams& p, const float* x,
                           const ShortConvBlockCache& c, float* out, CUstream_st* st) {
  const int R = d.rows(), D = d.width, H = d.heads, hd = d.head_dim();
  // n = RMSNorm(o_h)·w per head: rows of d, one weight shared by the heads
  rms_norm_forward(c.o, p.o_norm, R * H, hd, d.norm_eps, c.n, st);
  // gated: y = n ⊙ silu(x W_g);  out = y W_o
  const float* y = c.n;
  if (d.gated) {
    product(false, false, R, D, D, x, nullptr, D, p.g_proj, nullptr, D, c.gate, D, false);
    mamba2_gate_forward(c.n, c.gate, D, R, D, c.y, st);
    y = c.y;
  }
  product(false, false, R, D, D, y, nullptr, D, p.o_proj, nullptr, D, out, D, false);
}

void short_conv_block_back_backward(const Mamba2Product& product, const ShortConvBlockDims& d,
                                    const ShortConvBlockParams& p, const ShortConvBlockCache& c,
                                    const float* dOut, const ShortConvBlockGrads& g,
                                    const ShortConvBlockScratch& s, BlockLinearBackward& lin,
                                    CUstream_st* st) {
  const int R = d.rows(), D = d.width, H = d.heads, hd = d.head_dim();
  // out = y W_o
  const float* y = d.gated ? c.y : c.n;
  product(true, false, D, D, R, y, nullptr, D, dOut, nullptr, D, g.o_proj, D, true);
  product(false, true, R, D, D, dOut, nullptr, D, p.o_proj, nullptr, D, s.dy, D, false);
  // y = n ⊙ silu(gate) (gated) or n
  const float* dn = s.dy;
  if (d.gated) {
    mamba2_gate_backward(c.n, c.gate, D, s.dy, R, D, s.dn, s.dgate, D, st);
    lin(p.g_proj, g.g_proj, D, s.dgate);
    dn = s.dn;
  }
  // n = RMSNorm(o_h)·w per head
  rms_norm_backward(c.o, p.o_norm, dn, R * H, hd, d.norm_eps, s.dO, false, g.o_norm, s.norm_ws, st);
}

void short_conv_block_front_backward(const ShortConvBlockDims& d, const ShortConvBlockParams& p,
                                     const ShortConvBlockCache& c, const ShortConvBlockGrads& g,
                                     const ShortConvBlockScratch& s, BlockLinearBackward& lin,
                                     CUstream_st* st) {
  const int R = d.rows(), D = d.width, H = d.heads, hd = d.head_dim(), K = d.conv_kernel;
  const std::size_t RD = std::size_t(R) * D;
  // The L2 normalisations, then per branch silu, the convolution and the projection.
  TTTLAB_CUDA_CHECK(cudaMemsetAsync(s.dbias, 0, sizeof(float) * D, st));
  const float* W[3] = {p.q_proj, p.k_proj, p.v_proj};
  const float* conv[3] = {p.q_conv, p.k_conv, p.v_conv};
  float* gW[3] = {g.q_proj, g.k_proj, g.v_proj};
  float* gconv[3] = {g.q_conv, g.k_conv, g.v_conv};
  const float* u[3] = {c.uq, c.uk, c.uv};
  const float* cv[3] = {c.cq, c.ck, c.cv};
  for (int br = 0; br < 3; ++br) {
    const float* da = s.dv;
    if (br == 0) {
      deltanet_l2norm_heads_backward(c.aq, s.dqn, R, H, hd, d.q_scale, d.l2_eps, s.da, st);
      da = s.da;
    } else if (br == 1) {
      deltanet_l2norm_heads_backward(c.ak, s.dkn, R, H, hd, 1.f, d.l2_eps, s.da, st);
      da = s.da;
    }
    mamba2_silu_backward(cv[br], da, s.dc, RD, st);
    causal_conv_backward(u[br], conv[br], s.dc, d.batch, d.seq_len, D, K, s.du, false, gconv[br],
                         s.dbias, s.conv_ws, st);
    lin(W[br], gW[br], D, s.du);
  }
}

}  // namespace tttlab::kernels::detail
