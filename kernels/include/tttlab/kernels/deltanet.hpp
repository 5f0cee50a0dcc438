// tttlab/kernels/deltanet.hpp — the DeltaNet and Gated DeltaNet layers on the GPU, forward and
// backward: DeltaNetLayer::forward_train and backward of core/include/tttlab/seq/deltanet_layer.hpp
// (docs/MATH.md §11.8) for a batch of B sequences.
//
// The layer is the CPU's statement by statement over the ops, in fp32 storage:
//   q, k, v = silu(causal depthwise conv(x W_q|k|v))   the step's products, causal_conv_forward (with a
//                                                     zero bias: FLA's ShortConvolution has none), silu
//   q̂ = L2-normalised q per head / √d, k̂ = L2-normalised k per head (ε_l2), β = sigmoid(x W_β),
//   gated: α = max(exp(−exp(A_log)·softplus(x W_a + dt_bias)), FLT_MIN)    the passes of ops/deltanet.cu
//   o = the recurrent matrix rule (matrix_rules.hpp) from S_0 = 0, in fp32; or, with bf16_inner (the
//       bf16 training step) and d = 64, the chunked form on the tensor cores (delta_rule_chunked.hpp)
//       on bf16 copies of q̂, k̂ and v, with log α
//   n = RMSNorm(o_h)·w_norm per head (rms_norm_forward over B·T·H rows of d)
//   gated: y = n ⊙ silu(x W_g) (mamba2_gate_forward); ungated: y = n
//   out = y W_o
// The backward mirrors it, the inner loop by matrix_rule_backward or chunked_delta_rule_backward. The tests
// (tests/kernels/test_train_cuda.cpp) compare whole-model losses and gradients with the CPU
// implementation.
//
// CONVENTIONS as mamba2.hpp: no CUDA or Eigen headers here; DEVICE pointers, fp32, row-major, R = B·T
// rows (sequence n's token t at row n·T + t); asynchronous on `stream`; arguments validated first
// (std::invalid_argument, one line, nothing launched). No global state.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>

#include "tttlab/kernels/mamba2.hpp"

struct CUstream_st;

namespace tttlab::kernels {

// ---- the layer's own passes (ops/deltanet.cu) -----------------------------------------------------
// out [R, H·d] = per head a_h / sqrt(‖a_h‖² + eps) (scale 1, a division as the CPU's) or
// a_h · scale / sqrt(‖a_h‖² + eps). a, out contiguous, may not alias.
void deltanet_l2norm_heads_forward(const float* a, int R, int H, int d, float scale, float eps,
                                   float* out, CUstream_st* stream);
// Its backward: da_h = (scale / n)(g_h − a_h (a_h·g_h)/n²), n = sqrt(‖a_h‖² + eps) (OVERWRITTEN).
void deltanet_l2norm_heads_backward(const float* a, const float* dout, int R, int H, int d,
                                    float scale, float eps, float* da, CUstream_st* stream);
// z = sigmoid(z) in place over n elements; dz = dβ ⊙ β ⊙ (1 − β) (dz may alias dβ).
void deltanet_sigmoid_forward(float* z, std::size_t n, CUstream_st* stream);
void deltanet_sigmoid_backward(const float* beta, const float* dbeta, float* dz, std::size_t n,
                               CUstream_st* stream);
// The decay gate of Gated DeltaNet on r [R, H] = x W_a: r += dt_bias (in place, kept for the
// backward), α = max(exp(−exp(A_log)·softplus(r)), FLT_MIN) [R, H].
void deltanet_alpha_forward(float* r, const float* dt_bias, const float* A_log, int R, int H,
                            float* alpha, CUstream_st* stream);
// Its backward from dα: dr = dα·α·(−exp(A_log))·softplus′(r) and the per-element terms of dA_log,
// dα·α·(−exp(A_log)·softplus(r)), both [R, H] OVERWRITTEN (the caller sums them over the rows). With
// alpha null, dalpha is d log α (= dα·α) itself.
void deltanet_alpha_backward(const float* r, const float* alpha, const float* dalpha,
                             const float* A_log, int R, int H, float* dr, float* dA_terms,
                             CUstream_st* stream);

// out = log(a) over n elements (the chunked inner loop takes log α); bf16 bit patterns widened to fp32.
void deltanet_log(const float* a, std::size_t n, float* out, CUstream_st* stream);
void deltanet_widen_bf16(const std::uint16_t* a, std::size_t n, float* out, CUstream_st* stream);

// ---- the whole layer -------------------------------------------------------------------------------
// The products: Mamba2Product's contract (fp32 operands here: A16 and B16 are always null, so the
// product rounds them itself where it takes bf16).
using DeltaNetProduct = Mamba2Product;

// DeltaNetConfig (tttlab/seq/deltanet_layer.hpp) for a batch of B sequences of T tokens.
struct DeltaNetLayerDims {
  int batch = 1, seq_len = 1;
  int width = 64, heads = 4, conv_kernel = 4;
  int chunk = 64;  // tokens between two states the inner loop's forward keeps (matrix_rules.hpp)
  bool gated = false;
  // The inner loop in the chunked bf16 form where it takes the head dim (64): the bf16 step's choice
  // (bf16 operands, fp32 sums and state, relative error of order 1e-2 where the fp32 recurrence's is
  // 1e-6; tests/kernels/test_delta_rule_chunked_cuda.cpp).
  bool bf16_inner = false;
  float norm_eps = 1e-6f, l2_eps = 1e-6f;
  int rows() const { return batch * seq_len; }
  int head_dim() const { return heads > 0 ? width / heads : 0; }
};
// Empty when the layer runs on the GPU, else why not (one line): the inner loop's limits (d ≤ 128),
// conv_kernel ≤ 16.
std::string deltanet_layer_unsupported(const DeltaNetLayerDims& dims);
// Whether the inner loop runs in the chunked bf16 form: bf16_inner and a head dim of 64.
bool deltanet_layer_chunked(const DeltaNetLayerDims& dims);

// The parameters in DeltaNetParams' layouts ([in, out] projections, convolutions [D, K], rows); the
// gated ones (a_proj, A_log, dt_bias, g_proj) null for DeltaNet. Gradients alike, ADDED TO.
struct DeltaNetLayerParams {
  const float *q_proj = nullptr, *k_proj = nullptr, *v_proj = nullptr, *b_proj = nullptr,
              *q_conv = nullptr, *k_conv = nullptr, *v_conv = nullptr, *a_proj = nullptr,
              *A_log = nullptr, *dt_bias = nullptr, *g_proj = nullptr, *o_norm = nullptr,
              *o_proj = nullptr;
};
struct DeltaNetLayerGrads {
  float *q_proj = nullptr, *k_proj = nullptr, *v_proj = nullptr, *b_proj = nullptr,
        *q_conv = nullptr, *k_conv = nullptr, *v_conv = nullptr, *a_proj = nullptr,
        *A_log = nullptr, *dt_bias = nullptr, *g_proj = nullptr, *o_norm = nullptr,
        *o_proj = nullptr;
};

// What the forward keeps for the backward, in one allocation of deltanet_layer_cache_floats(dims)
// floats carved by deltanet_layer_cache, [R, D] unless said: the projections u_q, u_k, u_v, the
// convolutions' outputs c_q, c_k, c_v, their silu a_q, a_k, a_v (a_v is the inner loop's v), q̂, k̂,
// β [R, H], gated: r = x W_a + dt_bias and α [R, H]; the inner loop's output o and its kept states
// (matrix_rule_state_floats), the normed n, gated: x W_g and y; and the zero bias [D] of the
// convolutions.
struct DeltaNetLayerCache {
  float *uq = nullptr, *uk = nullptr, *uv = nullptr, *cq = nullptr, *ck = nullptr, *cv = nullptr,
        *aq = nullptr, *ak = nullptr, *av = nullptr, *qn = nullptr, *kn = nullptr, *beta = nullptr,
        *r = nullptr, *alpha = nullptr, *o = nullptr, *states = nullptr, *n = nullptr,
        *gate = nullptr, *y = nullptr, *zero_bias = nullptr;
  // The chunked bf16 inner loop's (deltanet_layer_chunked): bf16 q̂, k̂, v and o [R, D], log α [R, H]
  // and what its forward keeps for its backward (chunked_delta_rule_keep_bytes).
  std::uint16_t *q16 = nullptr, *k16 = nullptr, *v16 = nullptr, *o16 = nullptr;
  float* log_alpha = nullptr;
  void* inner_ws = nullptr;
  std::size_t inner_ws_bytes = 0;
};
std::size_t deltanet_layer_cache_floats(const DeltaNetLayerDims& dims);
DeltaNetLayerCache deltanet_layer_cache(const DeltaNetLayerDims& dims, float* base);
// The backward's scratch, in floats (16-byte aligned base).
std::size_t deltanet_layer_workspace_floats(const DeltaNetLayerDims& dims);

// out [R, D] = the layer applied to x [R, D], each sequence from the empty prefix. The cache and
// workspace may be carved for a larger batch than dims.batch (the same T).
void deltanet_layer_forward(const DeltaNetProduct& product, const DeltaNetLayerDims& dims,
                            const DeltaNetLayerParams& p, const float* x,
                            const DeltaNetLayerCache& cache, float* out, CUstream_st* stream);
// From dOut [R, D]: dx [R, D] (OVERWRITTEN, or ADDED TO with accumulate) and every parameter's
// gradient ADDED TO g.
void deltanet_layer_backward(const DeltaNetProduct& product, const DeltaNetLayerDims& dims,
                             const DeltaNetLayerParams& p, const float* x,
                             const DeltaNetLayerCache& cache, const float* dOut,
                             const DeltaNetLayerGrads& g, float* dx, bool accumulate,
                             float* workspace, CUstream_st* stream);

}  // namespace tttlab::kernels
