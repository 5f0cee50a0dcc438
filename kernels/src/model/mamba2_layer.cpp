// The Mamba-2 layer on the GPU (tttlab/kernels/mamba2.hpp): Mamba2Layer::forward_train and backward
// (core/src/seq/mamba2_layer.cpp) statement by statement over the ops, for B sequences stacked as R
// rows. The convolution reads zx's xBC columns through a contiguous copy (u), since the causal-conv
// ops take contiguous rows.
#include <cuda_runtime_api.h>

#include <stdexcept>
#include <string>

#include "common/cuda_check.hpp"
#include "tttlab/kernels/mamba2.hpp"
#include "tttlab/kernels/nn_ops.hpp"

namespace tttlab::kernels {
namespace {

std::size_t up4(std::size_t n) { return (n + 3) / 4 * 4; }

void bad(const std::string& what) { throw std::invalid_argument("mamba2 layer (GPU): " + what); }

void check(const Mamba2LayerDims& d) {
  if (const std::string why = mamba2_layer_unsupported(d); !why.empty()) bad(why);
}

// The backward's scratch, carved from one buffer.
struct Scratch {
  float *dnormed, *dgated, *dy, *dzx, *dxbc, *du, *scan_ws, *norm_ws, *conv_ws;
  std::size_t scan_bytes;
};

Scratch carve(const Mamba2LayerDims& d, float* base) {
  const std::size_t R = d.rows(), di = d.d_inner(), cd = d.conv_dim();
  Scratch s;
  float* f = base;
  auto take = [&f](std::size_t n) {
    float* p = f;
    f += up4(n);
    return p;
  };
  s.dnormed = take(R * di);
  s.dgated = take(R * di);
  s.dy = take(R * di);
  s.dzx = take(R * std::size_t(d.in_width()));
  s.dxbc = take(R * cd);
  s.du = take(R * cd);
  s.scan_bytes = mamba2_scan_backward_workspace_bytes(d.scan());
  s.scan_ws = take((s.scan_bytes + 3) / 4);
  s.norm_ws = take(rms_norm_backward_workspace(int(R), int(di)));
  s.conv_ws = take(causal_conv_backward_workspace(d.batch, d.seq_len, int(cd), d.d_conv));
  return s;
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

std::size_t mamba2_layer_cache_floats(const Mamba2LayerDims& d) {
  const std::size_t R = d.rows(), di = d.d_inner(), cd = d.conv_dim();
  return up4(R * d.in_width()) + 3 * up4(R * cd) + up4(R * d.heads()) + 3 * up4(R * di) +
         up4(mamba2_state_floats(d.scan())) + up4(mamba2_decay_floats(d.scan()));
}

Mamba2LayerCache mamba2_layer_cache(const Mamba2LayerDims& d, float* base) {
  const std::size_t R = d.rows(), di = d.d_inner(), cd = d.conv_dim();
  Mamba2LayerCache c;
  float* f = base;
  auto take = [&f](std::size_t n) {
    float* p = f;
    f += up4(n);
    return p;
  };
  c.zx = take(R * d.in_width());
  c.u = take(R * cd);
  c.conv_pre = take(R * cd);
  c.xbc = take(R * cd);
  c.dt = take(R * d.heads());
  c.y = take(R * di);
  c.gated = take(R * di);
  c.normed = take(R * di);
  c.states = take(mamba2_state_floats(d.scan()));
  c.decay = take(mamba2_decay_floats(d.scan()));
  return c;
}

std::size_t mamba2_layer_workspace_floats(const Mamba2LayerDims& d) {
  const std::size_t R = d.rows(), di = d.d_inner(), cd = d.conv_dim();
  return 3 * up4(R * di) + up4(R * d.in_width()) + 2 * up4(R * cd) +
         up4((mamba2_scan_backward_workspace_bytes(d.scan()) + 3) / 4) +
         up4(rms_norm_backward_workspace(int(R), int(di))) +
         up4(causal_conv_backward_workspace(d.batch, d.seq_len, int(cd), d.d_conv));
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
  // [z | xBC | dt_raw] = x·in_proj
  product(false, false, R, W, D, x, D, p.in_proj, W, c.zx, W, false);
  // xbc = silu(conv(xBC) + conv_b), each sequence from a zero history
  TTTLAB_CUDA_CHECK(cudaMemcpy2DAsync(c.u, sizeof(float) * cd, c.zx + di, sizeof(float) * W,
                                      sizeof(float) * cd, R, cudaMemcpyDeviceToDevice, st));
  causal_conv_forward(c.u, p.conv_w, p.conv_b, d.batch, d.seq_len, cd, d.d_conv, c.conv_pre, st);
  mamba2_silu_forward(c.conv_pre, c.xbc, std::size_t(R) * cd, st);
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
  mamba2_gate_forward(c.y, c.zx, W, R, di, c.gated, st);
  rms_norm_forward(c.gated, p.norm_w, R, di, d.norm_eps, c.normed, st);
  product(false, false, R, D, di, c.normed, di, p.out_proj, D, out, D, false);
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
            N = d.d_state;
  const Scratch s = carve(d, workspace);
  // out = normed·out_proj
  product(true, false, di, D, R, c.normed, di, dOut, D, g.out_proj, D, true);
  product(false, true, R, di, D, dOut, D, p.out_proj, D, s.dnormed, di, false);
  // normed = RMSNorm(gated)·w,  gated = y ⊙ silu(z): dy, and dz into dzx's z columns
  rms_norm_backward(c.gated, p.norm_w, s.dnormed, R, di, d.norm_eps, s.dgated, false, g.norm_w,
                    s.norm_ws, st);
  mamba2_gate_backward(c.y, c.zx, W, s.dgated, R, di, s.dy, s.dzx, W, st);
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
  mamba2_silu_backward(c.conv_pre, s.dxbc, s.dxbc, std::size_t(R) * cd, st);
  causal_conv_backward(c.u, p.conv_w, s.dxbc, d.batch, d.seq_len, cd, d.d_conv, s.du, false,
                       g.conv_w, g.conv_b, s.conv_ws, st);
  TTTLAB_CUDA_CHECK(cudaMemcpy2DAsync(s.dzx + di, sizeof(float) * W, s.du, sizeof(float) * cd,
                                      sizeof(float) * cd, R, cudaMemcpyDeviceToDevice, st));
  // zx = x·in_proj
  product(true, false, D, W, R, x, D, s.dzx, W, g.in_proj, W, true);
  product(false, true, R, D, W, s.dzx, W, p.in_proj, W, dx, D, accumulate);
}

}  // namespace tttlab::kernels
