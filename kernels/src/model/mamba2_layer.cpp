// The Mamba-2 layer on the GPU (tttlab/kernels/mamba2.hpp): Mamba2Layer::forward_train and backward
// (core/src/seq/mamba2_layer.cpp) statement by statement over the ops, for B sequences stacked as R
// rows. Two forms of the element passes around the scan (mamba2_layer_fused): fused, the conv + silu
// reading zx's xBC columns in place and the gate + RMSNorm in one pass each way, nothing kept that
// the backward can recompute (every preset's shape); else the first version's separate passes, the
// convolution reading a contiguous copy (u) of the xBC columns.
#include <cuda_runtime_api.h>

#include <cstdint>
#include <stdexcept>
#include <string>

#include "common/cuda_check.hpp"
#include "tttlab/kernels/gemm.hpp"
#include "tttlab/kernels/mamba2.hpp"
#include "tttlab/kernels/nn_ops.hpp"

namespace tttlab::kernels {
namespace {

std::size_t up4(std::size_t n) { return (n + 3) / 4 * 4; }

void bad(const std::string& what) { throw std::invalid_argument("mamba2 layer (GPU): " + what); }

void check(const Mamba2LayerDims& d) {
  if (const std::string why = mamba2_layer_unsupported(d); !why.empty()) bad(why);
}

// The backward's scratch, carved from one buffer. Fused: no dgated and du (the fused passes write
// straight into dzx), the norm's and the conv's partial sums of their own sizes; with bf16 products
// also dzx16 = bf16(dzx) and dout16 = bf16(dOut), the products' operands.
struct Scratch {
  float *dnormed = nullptr, *dgated = nullptr, *dy = nullptr, *dzx = nullptr, *dxbc = nullptr,
        *du = nullptr, *scan_ws = nullptr, *norm_ws = nullptr, *conv_ws = nullptr;
  std::uint16_t *dzx16 = nullptr, *dout16 = nullptr;
  std::size_t scan_bytes = 0;
};

// Carves the scratch from base, or only counts its floats (base null): the returned end - base.
std::size_t carve(const Mamba2LayerDims& d, float* base, Scratch* out) {
  const std::size_t R = d.rows(), di = d.d_inner(), cd = d.conv_dim(), W = d.in_width();
  const bool fused = mamba2_layer_fused(d), half = fused && d.bf16_products;
  Scratch s;
  std::size_t used = 0;
  auto take = [&](std::size_t n) {
    float* p = base ? base + used : nullptr;
    used += up4(n);
    return p;
  };
  auto take16 = [&](std::size_t n) { return reinterpret_cast<std::uint16_t*>(take((n + 1) / 2)); };
  s.dnormed = take(R * di);
  if (!fused) s.dgated = take(R * di);
  s.dy = take(R * di);
  s.dzx = take(R * W);
  s.dxbc = take(R * cd);
  if (!fused) s.du = take(R * cd);
  s.scan_bytes = mamba2_scan_backward_workspace_bytes(d.scan());
  s.scan_ws = take((s.scan_bytes + 3) / 4);
  s.norm_ws = take(fused ? mamba2_gate_norm_backward_workspace(int(R), int(di))
                         : rms_norm_backward_workspace(int(R), int(di)));
  s.conv_ws =
      take(fused ? mamba2_conv_silu_backward_workspace(d.batch, d.seq_len, int(cd), d.d_conv)
                 : causal_conv_backward_workspace(d.batch, d.seq_len, int(cd), d.d_conv));
  if (half) {
    s.dzx16 = take16(R * W);
    s.dout16 = take16(R * std::size_t(d.width));
  }
  if (out) *out = s;
  return used;
}

}  // namespace

std::string mamba2_layer_unsupported(const Mamba2LayerDims& d) {
  if (d.batch < 1 || d.seq_len < 1 || d.width < 1 || d.expand < 1 || d.headdim < 1 || d.d_state < 1)
    return "the Mamba-2 layer needs positive sizes";
  if (d.d_inner() % d.headdim != 0) return "the Mamba-2 head dim must divide d_inner";
  if (d.d_conv < 1 || d.d_conv > 16)
    return "the GPU's causal convolution needs tttlab_mamba2_d_conv <= 16, got " +
           std::to_string(d.d_conv);
  if (!(d.norm_eps > 0.f)) return "the Mamba-2 norm's eps must be positive";
  return mamba2_scan_unsupported(d.scan());
}

bool mamba2_layer_fused(const Mamba2LayerDims& d) {
  const int di = d.d_inner(), cd = d.conv_dim(), W = d.in_width();
  return d.d_conv == 4 && di % 4 == 0 && cd % 4 == 0 && W % 4 == 0 &&
         mamba2_gate_norm_supported(di, W);
}

namespace {
// Carves the cache from base, or only counts its floats (base null).
std::size_t carve_cache(const Mamba2LayerDims& d, float* base, Mamba2LayerCache* out) {
  const std::size_t R = d.rows(), di = d.d_inner(), cd = d.conv_dim();
  const bool fused = mamba2_layer_fused(d), half = fused && d.bf16_products;
  Mamba2LayerCache c;
  std::size_t used = 0;
  auto take = [&](std::size_t n) {
    float* p = base ? base + used : nullptr;
    used += up4(n);
    return p;
  };
  c.zx = take(R * d.in_width());
  if (!fused) {
    c.u = take(R * cd);
    c.conv_pre = take(R * cd);
  }
  c.xbc = take(R * cd);
  c.dt = take(R * d.heads());
  c.y = take(R * di);
  if (!fused) c.gated = take(R * di);
  if (half)
    c.normed16 = reinterpret_cast<std::uint16_t*>(take((R * di + 1) / 2));
  else
    c.normed = take(R * di);
  c.states = take(mamba2_state_floats(d.scan()));
  c.decay = take(mamba2_decay_floats(d.scan()));
  if (out) *out = c;
  return used;
}
}  // namespace

std::size_t mamba2_layer_cache_floats(const Mamba2LayerDims& d) {
  return carve_cache(d, nullptr, nullptr);
}

Mamba2LayerCache mamba2_layer_cache(const Mamba2LayerDims& d, float* base) {
  Mamba2LayerCache c;
  carve_cache(d, base, &c);
  return c;
}

std::size_t mamba2_layer_workspace_floats(const Mamba2LayerDims& d) {
  return carve(d, nullptr, nullptr);
}

namespace {

// The scan's inputs, the same in both directions: X, B and C are the columns of xbc, dt_raw the last
// H columns of zx.
template <class Args>
void scan_inputs(Args& a, const Mamba2LayerDims& d, const Mamba2LayerParams& p,
                 const Mamba2LayerCache& c) {
  const int di = d.d_inner(), cd = d.conv_dim();
  a.dims = d.scan();
  a.X = c.xbc;
  a.ld_x = cd;
  a.B = c.xbc + di;
  a.C = c.xbc + di + d.d_state;
  a.ld_bc = cd;
  a.dt_raw = c.zx + di + cd;
  a.ld_dt = d.in_width();
  a.dt_bias = p.dt_bias;
  a.A_log = p.A_log;
  a.D = p.D;
  a.tensor_cores = d.scan_tensor_cores && mamba2_scan_tensor_cores_unsupported(a.dims).empty();
}

}  // namespace

void mamba2_layer_forward(const Mamba2Product& product, const Mamba2LayerDims& d,
                          const Mamba2LayerParams& p, const float* x, const Mamba2LayerCache& c,
                          float* out, CUstream_st* st) {
  check(d);
  if (!x || !out || !c.zx || !p.in_proj || !p.out_proj) bad("forward: a pointer is null");
  const int R = d.rows(), D = d.width, di = d.d_inner(), cd = d.conv_dim(), W = d.in_width();
  const bool fused = mamba2_layer_fused(d);
  // [z | xBC | dt_raw] = x·in_proj
  product(false, false, R, W, D, x, nullptr, D, p.in_proj, nullptr, W, c.zx, W, false);
  // xbc = silu(conv(xBC) + conv_b), each sequence from a zero history
  if (fused) {
    mamba2_conv_silu_forward(c.zx + di, W, p.conv_w, p.conv_b, d.batch, d.seq_len, cd, d.d_conv,
                             c.xbc, st);
  } else {
    TTTLAB_CUDA_CHECK(cudaMemcpy2DAsync(c.u, sizeof(float) * cd, c.zx + di, sizeof(float) * W,
                                        sizeof(float) * cd, R, cudaMemcpyDeviceToDevice, st));
    causal_conv_forward(c.u, p.conv_w, p.conv_b, d.batch, d.seq_len, cd, d.d_conv, c.conv_pre, st);
    mamba2_silu_forward(c.conv_pre, c.xbc, std::size_t(R) * cd, st);
  }
  // The scan of every head, dt and the D skip.
  Mamba2ScanForwardArgs a;
  scan_inputs(a, d, p, c);
  a.dt = c.dt;
  a.Y = c.y;
  a.ld_y = di;
  a.states = c.states;
  a.decay = c.decay;
  a.stream = st;
  mamba2_scan_forward(a);
  // normed = RMSNorm(y ⊙ silu(z))·norm_w;  out = normed·out_proj
  if (fused) {
    mamba2_gate_norm_forward(c.y, c.zx, W, p.norm_w, R, di, d.norm_eps, c.normed, c.normed16, st);
  } else {
    mamba2_gate_forward(c.y, c.zx, W, R, di, c.gated, st);
    rms_norm_forward(c.gated, p.norm_w, R, di, d.norm_eps, c.normed, st);
  }
  product(false, false, R, D, di, c.normed, c.normed16, di, p.out_proj, nullptr, D, out, D, false);
}

void mamba2_layer_backward(const Mamba2Product& product, const Mamba2LayerDims& d,
                           const Mamba2LayerParams& p, const float* x, const Mamba2LayerCache& c,
                           const float* dOut, const Mamba2LayerGrads& g, float* dx, bool accumulate,
                           float* workspace, CUstream_st* st) {
  check(d);
  if (!x || !dOut || !dx || !workspace || !g.in_proj || !g.conv_w || !g.conv_b || !g.dt_bias ||
      !g.A_log || !g.D || !g.norm_w || !g.out_proj)
    bad("backward: a pointer is null");
  const int R = d.rows(), D = d.width, di = d.d_inner(), cd = d.conv_dim(), W = d.in_width(),
            N = d.d_state, H = d.heads();
  const bool fused = mamba2_layer_fused(d);
  Scratch s;
  carve(d, workspace, &s);
  // out = normed·out_proj (dOut rounded once for both products where they take bf16)
  if (s.dout16) convert_to_bf16(dOut, R, D, D, s.dout16, D, st);
  product(true, false, di, D, R, c.normed, c.normed16, di, dOut, s.dout16, D, g.out_proj, D, true);
  product(false, true, R, di, D, dOut, s.dout16, D, p.out_proj, nullptr, D, s.dnormed, di, false);
  // normed = RMSNorm(gated)·w,  gated = y ⊙ silu(z): dy, and dz into dzx's z columns
  if (fused) {
    mamba2_gate_norm_backward(c.y, c.zx, W, p.norm_w, s.dnormed, R, di, d.norm_eps, s.dy,
                              s.dzx16 ? nullptr : s.dzx, s.dzx16, W, g.norm_w, s.norm_ws, st);
  } else {
    rms_norm_backward(c.gated, p.norm_w, s.dnormed, R, di, d.norm_eps, s.dgated, false, g.norm_w,
                      s.norm_ws, st);
    mamba2_gate_backward(c.y, c.zx, W, s.dgated, R, di, s.dy, s.dzx, W, st);
  }
  // The scan: dX, dB, dC into dxbc, dt_raw's gradient into dzx's last H columns.
  Mamba2ScanBackwardArgs a;
  scan_inputs(a, d, p, c);
  a.dt = c.dt;
  a.states = c.states;
  a.decay = c.decay;
  a.dY = s.dy;
  a.ld_y = di;
  a.dX = s.dxbc;
  a.ld_dx = cd;
  a.dB = s.dxbc + di;
  a.dC = s.dxbc + di + N;
  a.ld_dbc = cd;
  a.ddt_raw = s.dzx + di + cd;
  a.ld_ddt = W;
  a.ddt_bias = g.dt_bias;
  a.dA_log = g.A_log;
  a.dD = g.D;
  a.workspace = s.scan_ws;
  a.workspace_bytes = s.scan_bytes;
  a.stream = st;
  mamba2_scan_backward(a);
  // xbc = silu(conv(u)): the convolution's input gradient into dzx's xBC columns
  if (fused) {
    mamba2_conv_silu_backward(c.zx + di, W, p.conv_w, p.conv_b, d.batch, d.seq_len, cd, d.d_conv,
                              s.dxbc, s.dzx16 ? nullptr : s.dzx + di,
                              s.dzx16 ? s.dzx16 + di : nullptr, W, g.conv_w, g.conv_b, s.conv_ws,
                              st);
    // dt_raw's gradient, the one part of dzx the scan writes in fp32, into its bf16 copy
    if (s.dzx16) convert_to_bf16(s.dzx + di + cd, R, H, W, s.dzx16 + di + cd, W, st);
  } else {
    mamba2_silu_backward(c.conv_pre, s.dxbc, s.dxbc, std::size_t(R) * cd, st);
    causal_conv_backward(c.u, p.conv_w, s.dxbc, d.batch, d.seq_len, cd, d.d_conv, s.du, false,
                         g.conv_w, g.conv_b, s.conv_ws, st);
    TTTLAB_CUDA_CHECK(cudaMemcpy2DAsync(s.dzx + di, sizeof(float) * W, s.du, sizeof(float) * cd,
                                        sizeof(float) * cd, R, cudaMemcpyDeviceToDevice, st));
  }
  // zx = x·in_proj
  product(true, false, D, W, R, x, nullptr, D, s.dzx, s.dzx16, W, g.in_proj, W, true);
  product(false, true, R, D, W, s.dzx, s.dzx16, W, p.in_proj, nullptr, W, dx, D, accumulate);
}

}  // namespace tttlab::kernels
