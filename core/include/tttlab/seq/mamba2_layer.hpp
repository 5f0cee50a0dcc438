// tttlab/seq/mamba2_layer.hpp — Mamba-2 (the SSD layer) behind the SequenceLayer interface
// (docs/MATH.md §8.8).
//
// The block of the reference implementation, state-spaces/mamba's mamba_ssm/modules/mamba2.py (class
// Mamba2), with ngroups = 1, no projection biases, D per head, rmsnorm = True, norm_before_gate = False,
// dt_limit = (0, ∞). Sizes: d_inner = expand·D, H = d_inner / P heads of P channels, state size N.
//
//   [z | xBC | dt_raw] = x · in_proj                    z [T, d_inner], xBC [T, d_inner + 2N], dt_raw [T, H]
//   xBC ← silu(causal_conv(xBC) + conv_b)               depthwise, width K = d_conv, tap K−1 = current token
//   [xs | B | C] = xBC                                  xs [T, d_inner], B, C [T, N] (shared by the heads)
//   dt = softplus(dt_raw + dt_bias),  A = −exp(A_log)   [T, H], [H]; softplus(r) = r above r = 20, as
//                                                       PyTorch's and the reference's scan kernel
//   per head h (xs_h = its P columns), state S_h [P, N] from 0:
//     S_t = exp(dt_t·A)·S_{t−1} + dt_t · xs_t B_tᵀ,     y_t = S_t C_t + D_h · xs_t
//   g = y ⊙ silu(z);  n = g / sqrt(mean(g²) + ε) ⊙ norm.weight   (one group over d_inner, ε = 1e-5)
//   out = n · out_proj
//
// The scan has TWO FORMS, as the TTT layer has its primal and dual forms (tttlab/ttt/layer.hpp):
//   Recurrent: the recurrence above token by token — what streaming and generation use.
//   Chunked (SSD, the matrix form): chunks of Q tokens; within a chunk, with a_t = dt_t·A and
//     cs_i = a_1 + … + a_i (segment sums inside the chunk),
//       Y = ((C Bᵀ) ⊙ L)(dt ⊙ X) + diag(exp(cs)) C S_prevᵀ,   L_ij = exp(cs_i − cs_j) for i ≥ j, else 0
//       S_next = exp(cs_Q) S_prev + (dt ⊙ X)ᵀ diag(exp(cs_Q − cs)) B
//   — what forward_train uses. Both agree to rounding; every exponent is ≤ 0, so neither overflows.
// backward is manual (no autodiff), through the chunked form, chunk by chunk in reverse.
//
// Parameters, named and laid out as the reference's state_dict (tensor.hpp's [in, out] storage inside;
// checkpoint code transposes the two projections to nn.Linear's [out, in]):
//   in_proj.weight  [D, 2·d_inner + 2N + H]   columns in the reference's order [z, x, B, C, dt]
//   conv1d.weight   [d_inner + 2N, K]  (file: [d_inner + 2N, 1, K]),  conv1d.bias [d_inner + 2N]
//   dt_bias, A_log, D [H],  norm.weight [d_inner],  out_proj.weight [d_inner, D]
// Initialisation (Mamba2Params::init): the reference's for the SSM parameters — dt = exp(U[log dt_min,
// log dt_max]) with dt_min = 0.001, dt_max = 0.1, floored at 1e-4, stored as dt_bias = softplus⁻¹(dt) =
// dt + log(1 − exp(−dt)); A_log = log U[1, 16]; D = 1; norm.weight = 1; conv1d as PyTorch's Conv1d
// default, weight and bias U(±1/√K). The two projections are N(0, σ) with the model's initializer_range
// σ, as every other projection of this lab (the reference keeps nn.Linear's default there).
//
// Stream state: the last K−1 inputs of the convolution (before it, [K−1, d_inner + 2N]) and S_h of
// every head.
#pragma once

#include <vector>

#include "tttlab/seq/sequence_layer.hpp"
#include "tttlab/util/rng.hpp"

namespace tttlab {

struct Mamba2Config {
  int width = 64;        // D (the model's hidden size)
  int d_state = 16;      // N
  int d_conv = 4;        // K
  int expand = 2;        // d_inner = expand · D
  int headdim = 16;      // P
  int chunk_size = 16;   // Q of the chunked form (training)
  double norm_eps = 1e-5;  // the reference's RMSNormGated eps
  int d_inner() const { return expand * width; }
  int heads() const { return headdim > 0 ? d_inner() / headdim : 0; }
  int conv_dim() const { return d_inner() + 2 * d_state; }
  int in_proj_width() const { return 2 * d_inner() + 2 * d_state + heads(); }
  void validate() const;  // throws std::invalid_argument with a one-line message
};

template <class S>
struct Mamba2Params {
  Mat<S> in_proj;       // [D, 2·d_inner + 2N + H]
  Mat<S> conv_w;        // [d_inner + 2N, K]
  RowVec<S> conv_b;     // [d_inner + 2N]
  RowVec<S> dt_bias;    // [H]
  RowVec<S> A_log;      // [H]
  RowVec<S> D;          // [H]
  RowVec<S> norm_w;     // [d_inner]
  Mat<S> out_proj;      // [d_inner, D]
  // The initialisation above; `std` is the projections' standard deviation. Draws from `rng` in a
  // fixed order (in_proj, conv1d weight and bias, dt, A, out_proj).
  static Mamba2Params init(const Mamba2Config& cfg, double std, Rng& rng);
  static Mamba2Params zeros(const Mamba2Config& cfg);
};

enum class Mamba2Form { Recurrent, Chunked };

// The chunked scan of ONE head and its backward, as forward_train and backward run them (exposed for
// the GPU kernels' tests, tests/kernels/test_mamba2_cuda.cpp): X [T, P], B, C [T, N], dt [T], the decay
// rate A < 0, chunks of Q tokens; `state` [P, N] is the state before the first token and is left after
// the last; Y [T, P] (without D·X) is overwritten; `starts`, when given, receives the state before each
// chunk. The backward ADDS into dX, dB, dC, ddt and dA from dY [T, P] and the forward's `starts`.
template <class S>
void mamba2_scan_chunked(ConstMatRef<S> X, ConstMatRef<S> B, ConstMatRef<S> C, const Vec<S>& dt,
                         S A, int Q, Mat<S>& state, MatRef<S> Y, std::vector<Mat<S>>* starts);
template <class S>
void mamba2_scan_chunked_backward(ConstMatRef<S> X, ConstMatRef<S> B, ConstMatRef<S> C,
                                  const Vec<S>& dt, S A, int Q, const std::vector<Mat<S>>& starts,
                                  ConstMatRef<S> dY, MatRef<S> dX, MatRef<S> dB, MatRef<S> dC,
                                  Vec<S>& ddt, S& dA);
// dt = mamba2_softplus(dt_raw + dt_bias) (r itself above 20, as the reference), and its derivative.
double mamba2_softplus(double r);
double mamba2_softplus_grad(double r);
// One draw of the reference's initialisation (Mamba2Params::init draws dt_bias for every head, then
// A_log for every head; Gated DeltaNet's decay reuses them): dt_bias = softplus⁻¹(dt) with
// dt = exp(U[log 0.001, log 0.1]) floored at 1e-4, and A_log = log U[1, 16].
double mamba2_init_dt_bias(Rng& rng);
double mamba2_init_A_log(Rng& rng);

template <class S>
class Mamba2Layer final : public SequenceLayer<S> {
 public:
  Mamba2Layer(Mamba2Config cfg, Mamba2Params<S> params);
  std::string name() const override { return "mamba2"; }
  int width() const override { return m_cfg.width; }
  std::unique_ptr<SequenceState> start() const override;
  // Streams with the recurrent form.
  Mat<S> forward(SequenceState& state, ConstMatRef<S> x) const override;
  // Streams with either form (the chunked form continues from the carried state just the same).
  Mat<S> forward(SequenceState& state, ConstMatRef<S> x, Mamba2Form form) const;
  using SequenceLayer<S>::forward;
  // The chunked form from the empty prefix.
  std::unique_ptr<LayerCache> forward_train(ConstMatRef<S> x, Mat<S>& y) const override;
  void backward(const LayerCache& cache, ConstMatRef<S> dY, SequenceLayer<S>& grads,
                Mat<S>& dx) const override;
  std::unique_ptr<SequenceLayer<S>> zeros_like() const override;
  void for_each_param(const ParamVisitor<S>& f) override;
  // The two projections, the convolution, and the chunked scan: per chunk of Q tokens C Bᵀ (Q²N),
  // its product with X (Q²P per head), the state's read and write (2·Q·P·N per head).
  double forward_flops(long T) const override;
  const Mamba2Params<S>& params() const { return m_params; }
  const Mamba2Config& config() const { return m_cfg; }

 private:
  Mamba2Config m_cfg;
  Mamba2Params<S> m_params;
};

}  // namespace tttlab
