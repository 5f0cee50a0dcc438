// The block the GPU's DeltaNet and Titans layers share (deltanet_layer.cpp, titans_layer.cpp): the
// front q, k, v = silu(causal depthwise conv(x W_q|k|v)) with a zero bias and the per-head L2
// normalisation of q and k; the back n = RMSNorm(o_h)·w_norm per head, y = n ⊙ silu(x W_g) (or
// y = n without the gate) and out = y W_o. What lies between (the inner loop and its gates) is the
// layer's. Private to kernels/src.
//
// The layers call, in the forward: front, then their own passes, then back; in the backward:
// back_backward (which gives dO), their own passes, then front_backward (which takes dq̂, dk̂, dv).
// Every input-gradient product goes through one BlockLinearBackward, so dx is written by the first
// and added to after, in the order the CPU layer sums it.
//
// CONVENTIONS as tttlab/kernels/deltanet.hpp: DEVICE pointers, fp32, row-major, R = B·T rows.
#pragma once

#include <cstddef>

#include "tttlab/kernels/mamba2.hpp"

struct CUstream_st;

namespace tttlab::kernels::detail {

inline std::size_t block_up4(std::size_t n) { return (n + 3) / 4 * 4; }

// A bump allocator over base (16-byte steps), or a counter only (base null).
struct BlockCarver {
  float* base = nullptr;
  std::size_t used = 0;
  float* take(std::size_t n) {
    float* p = base ? base + used : nullptr;
    used += block_up4(n);
    return p;
  }
};

struct ShortConvBlockDims {
  int batch = 1, seq_len = 1;
  int width = 64, heads = 4, conv_kernel = 4;
  float q_scale = 1.f;  // q̂'s scale after the L2 normalisation: DeltaNet's 1/√d, Titans' 1
  bool gated = false;   // y = n ⊙ silu(x W_g), else y = n
  float norm_eps = 1e-6f, l2_eps = 1e-6f;
  int rows() const { return batch * seq_len; }
  int head_dim() const { return width / heads; }
};

// [in, out] projections, convolutions [D, K], o_norm [d]; g_proj null without the gate. Gradients
// alike, ADDED TO.
struct ShortConvBlockParams {
  const float *q_proj = nullptr, *k_proj = nullptr, *v_proj = nullptr, *q_conv = nullptr,
              *k_conv = nullptr, *v_conv = nullptr, *g_proj = nullptr, *o_norm = nullptr,
              *o_proj = nullptr;
};
struct ShortConvBlockGrads {
  float *q_proj = nullptr, *k_proj = nullptr, *v_proj = nullptr, *q_conv = nullptr,
        *k_conv = nullptr, *v_conv = nullptr, *g_proj = nullptr, *o_norm = nullptr,
        *o_proj = nullptr;
};

// What the block's forward keeps, [R, D] unless said: the projections u, the convolutions' outputs
// c, their silu a (av is the inner loop's v), q̂, k̂; the inner loop's output o (the layer writes
// it), the normed n; gated: x W_g and y; the convolutions' zero bias [D].
struct ShortConvBlockCache {
  float *uq = nullptr, *uk = nullptr, *uv = nullptr, *cq = nullptr, *ck = nullptr, *cv = nullptr,
        *aq = nullptr, *ak = nullptr, *av = nullptr, *qn = nullptr, *kn = nullptr, *o = nullptr,
        *n = nullptr, *gate = nullptr, *y = nullptr, *zero_bias = nullptr;
};
// The backward's scratch: the gradients of y, n, the gate, o, q̂, k̂, v and of a branch's silu input,
// convolution input and projection output (one [R, D] buffer each, reused by the three branches in
// turn), the convolutions' discarded bias gradient [D] and the norm's and convolution's workspaces.
struct ShortConvBlockScratch {
  float *dy = nullptr, *dn = nullptr, *dgate = nullptr, *dO = nullptr, *dqn = nullptr,
        *dkn = nullptr, *dv = nullptr, *da = nullptr, *dc = nullptr, *du = nullptr,
        *dbias = nullptr, *norm_ws = nullptr, *conv_ws = nullptr;
};
// Carve them (or count them, with c.base null).
void carve_short_conv_block_cache(const ShortConvBlockDims& d, BlockCarver& c,
                                  ShortConvBlockCache* out);
void carve_short_conv_block_scratch(const ShortConvBlockDims& d, BlockCarver& c,
                                    ShortConvBlockScratch* out);

// W += xᵀ dz and dx (+)= dz Wᵀ for a projection x W [D, N] of the block's input: dx is OVERWRITTEN
// by the first call unless `written` starts true, and added to after.
struct BlockLinearBackward {
  const Mamba2Product& product;
  const float* x;
  int R, D;
  float* dx;
  bool written;
  void operator()(const float* W, float* gW, int N, const float* dz) {
    product(true, false, D, N, R, x, nullptr, D, dz, nullptr, N, gW, N, true);
    product(false, true, R, D, N, dz, nullptr, N, W, nullptr, N, dx, D, written);
    written = true;
  }
};

// uq…kn from x [R, D]: u = x W, c = conv(u) per sequence from a zero history, a = silu(c),
// q̂ = a_q / ‖a_q‖ · q_scale and k̂ = a_k / ‖a_k‖ per head (ε = l2_eps).
void short_conv_block_front(const Mamba2Product& product, const ShortConvBlockDims& d,
                            const ShortConvBlockParams& p, const float* x,
                            const ShortConvBlockCache& c, CUstream_st* stream);
// n, gate, y from c.o and x, and out [R, D] = y W_o.
void short_conv_block_back(const Mamba2Product& product, const ShortConvBlockDims& d,
                           const ShortConvBlockParams& p, const float* x,
                           const ShortConvBlockCache& c, float* out, CUstream_st* stream);
// From dOut: g.o_proj, g.o_norm, gated g.g_proj and its share of dx (through lin), and s.dO.
void short_conv_block_back_backward(const Mamba2Product& product, const ShortConvBlockDims& d,
                                    const ShortConvBlockParams& p, const ShortConvBlockCache& c,
                                    const float* dOut, const ShortConvBlockGrads& g,
                                    const ShortConvBlockScratch& s, BlockLinearBackward& lin,
                                    CUstream_st* stream);
// From s.dqn, s.dkn, s.dv (the layer's): the L2 normalisations', silu's, the convolutions' and the
// projections' backward, branch q, then k, then v, their shares of dx through lin.
void short_conv_block_front_backward(const ShortConvBlockDims& d, const ShortConvBlockParams& p,
                                     const ShortConvBlockCache& c, const ShortConvBlockGrads& g,
                                     const ShortConvBlockScratch& s, BlockLinearBackward& lin,
                                     CUstream_st* stream);

// The block's views of a layer's own structs (DeltaNet's, Titans'): each layer names these members
// alike, so one adapter serves every layer that wraps the block.
template <class P>
ShortConvBlockParams short_conv_block_params(const P& p) {
  return {p.q_proj, p.k_proj, p.v_proj, p.q_conv, p.k_conv, p.v_conv, p.g_proj, p.o_norm, p.o_proj};
}
template <class G>
ShortConvBlockGrads short_conv_block_grads(const G& g) {
  return {g.q_proj, g.k_proj, g.v_proj, g.q_conv, g.k_conv, g.v_conv, g.g_proj, g.o_norm, g.o_proj};
}
template <class C>
ShortConvBlockCache short_conv_block_cache(const C& k) {
  ShortConvBlockCache b;
  b.uq = k.uq;
  b.uk = k.uk;
  b.uv = k.uv;
  b.cq = k.cq;
  b.ck = k.ck;
  b.cv = k.cv;
  b.aq = k.aq;
  b.ak = k.ak;
  b.av = k.av;
  b.qn = k.qn;
  b.kn = k.kn;
  b.o = k.o;
  b.n = k.n;
  b.gate = k.gate;
  b.y = k.y;
  b.zero_bias = k.zero_bias;
  return b;
}

}  // namespace tttlab::kernels::detail
