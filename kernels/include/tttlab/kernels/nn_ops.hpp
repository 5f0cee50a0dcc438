// tttlab/kernels/nn_ops.hpp — the element-wise and row operations of a training step on the GPU.
//
// Each function mirrors one CPU op of core/ (named below) in fp32 and is tested against it
// (tests/kernels/test_nn_ops.cpp). Together with the matrix products (gemm.hpp) and the TTT inner
// loop (ttt.hpp) they make the model's forward and backward (train_cuda.cpp).
//
// CONVENTIONS. Every pointer is a DEVICE pointer, fp32 unless typed otherwise; matrices are ROW-MAJOR
// and contiguous (tttlab/tensor.hpp: a token is a row, R = B·T rows for a batch of B sequences of T
// tokens, sequence n's token t at row n·T + t). Calls are asynchronous on `stream` (nullptr: the
// legacy default stream), check their arguments first (std::invalid_argument, one line, nothing
// launched) and throw std::runtime_error when a launch fails. Outputs marked "=" are overwritten,
// "+=" are added to (gradient accumulators, as the CPU ops' `dw +=`). No atomics: every result is
// the same bit for bit from run to run; sums over rows run in a fixed order (two passes through a
// caller-provided workspace of the size the matching *_workspace function gives, in floats).
// THREADING: no global state; calls may come from any thread.
// This header includes neither CUDA nor Eigen headers.
#pragma once

#include <cstddef>
#include <cstdint>

struct CUstream_st;

namespace tttlab::kernels {

// ---- reductions --------------------------------------------------------------------------------
// out[c] += Σ_r X[r, c] over R rows (R ≥ 0, C ≥ 1), summed in a fixed order.
std::size_t column_sum_workspace(int R, int C);
void column_sum_add(const float* X, int R, int C, float* out, float* workspace, CUstream_st* stream);

// ---- element-wise --------------------------------------------------------------------------------
// out = a + b over n elements (out may alias a or b).
void add(const float* a, const float* b, float* out, std::size_t n, CUstream_st* stream);

// ---- embedding (nn/embedding.hpp) -----------------------------------------------------------------
// H[r, :] = E[tokens[r], :]. E [V, D]; tokens [R] in [0, V) (not checked on the device: the host
// checks tokens before they are uploaded).
void embedding_forward(const float* E, int V, int D, const int* tokens, int R, float* H, CUstream_st* stream);
// dE[v, :] += Σ over the rows r with tokens[r] = v of dH[r, :], rows in increasing order. The rows of
// each token come as a CSR list built on the host: rows_of[offsets[v] .. offsets[v+1]) (offsets [V+1],
// rows_of [R]).
void embedding_backward(const int* offsets, const int* rows_of, int V, int D, const float* dH, float* dE,
                        CUstream_st* stream);

// ---- RMSNorm and LayerNorm (nn/norms.hpp) --------------------------------------------------------
// Y = X·r·w per row, r = 1/√(mean(x²) + ε). X, Y [R, D] (Y may not alias X).
void rms_norm_forward(const float* X, const float* w, int R, int D, float eps, float* Y, CUstream_st* stream);
// The residual add fused with the norm that follows it: S = H + Dx, Y = RMSNorm(S)·w in one pass
// (the same sums as add() then rms_norm_forward). H, Dx, S, Y [R, D], four different buffers.
void add_rms_norm_forward(const float* H, const float* Dx, const float* w, int R, int D, float eps, float* S,
                          float* Y, CUstream_st* stream);
// Mixed precision (gemm.hpp, GemmPrecision::Bf16): the two above with the normalised rows written only
// as bf16 (16-bit patterns) into Y16 [R, D], for the matrix products that are their only readers; bit
// for bit the fp32 op followed by convert_to_bf16. S stays fp32 (the residual stream).
void rms_norm_forward_bf16(const float* X, const float* w, int R, int D, float eps, std::uint16_t* Y16,
                           CUstream_st* stream);
void add_rms_norm_forward_bf16(const float* H, const float* Dx, const float* w, int R, int D, float eps, float* S,
                               std::uint16_t* Y16, CUstream_st* stream);
// dX (= or += with accumulate) and dw += Σ_r dY ⊙ x·r.
std::size_t rms_norm_backward_workspace(int R, int D);
// dX16, when not null, also receives bf16(dX) (the final dX, after the accumulation): the rounded
// copy that mixed precision's products read (as convert_to_bf16 of dX would give, in the same pass).
void rms_norm_backward(const float* X, const float* w, const float* dY, int R, int D, float eps,
                       float* dX, bool accumulate, float* dw, float* workspace, CUstream_st* stream,
                       std::uint16_t* dX16 = nullptr);
// Y = (X − μ)/σ ⊙ γ + β per row, σ = √(var + ε) (the TTT layer's post-norm).
void layer_norm_forward(const float* X, const float* gamma, const float* beta, int R, int D, float eps,
                        float* Y, CUstream_st* stream);
// dX =, dγ += Σ_r dY ⊙ x̂, dβ += Σ_r dY.
std::size_t layer_norm_backward_workspace(int R, int D);
void layer_norm_backward(const float* X, const float* gamma, const float* dY, int R, int D, float eps,
                         float* dX, float* dgamma, float* dbeta, float* workspace, CUstream_st* stream);
// The gated post-norm of the TTT layers with the Mamba backbone, out = LayerNorm(O) ⊙ gelu(A) (tanh
// GELU, nn/activations.hpp; the CPU's TTTLayer runs the LayerNorm, then nn/gelu_gate.hpp), in one pass
// that never stores the LayerNorm's output: O, A, out [R, D]; γ, β [D]. out16, when not null, receives bf16(out) instead of out (which
// may then be null). Results equal the two separate ops' up to rounding.
void gated_layer_norm_forward(const float* O, const float* gamma, const float* beta, const float* A,
                              int R, int D, float eps, float* out, std::uint16_t* out16,
                              CUstream_st* stream);
// Its backward from dOut [R, D], recomputing the LayerNorm's output Y from O: dA = dOut ⊙ Y ⊙ gelu′(A),
// and with dY = dOut ⊙ gelu(A): dO = layer_norm_backward's dX, dγ += Σ_r dY ⊙ x̂, dβ += Σ_r dY. dO and
// dA are overwritten. dA16, when not null, receives bf16(dA) instead (mixed precision: g_proj's two
// products are dA's only readers), and dA's contents are then unspecified (scratch).
std::size_t gated_layer_norm_backward_workspace(int R, int D);
void gated_layer_norm_backward(const float* O, const float* gamma, const float* beta,
                               const float* A, const float* dOut, int R, int D, float eps,
                               float* dO, float* dA, float* dgamma, float* dbeta, float* workspace,
                               CUstream_st* stream, std::uint16_t* dA16 = nullptr);

// ---- depthwise causal convolution (nn/causal_conv.hpp) -------------------------------------------
// Optionally with RoPE fused in (the Mamba backbone's Q and K views, conv then RoPE): the C = H·d
// channels are H heads of d, rotated as rope_rotate does (below). The forward then gives
// rope_rotate(conv(u), +1) and the backward takes dy as the gradient of the rotated output, i.e. it
// is causal_conv_backward of rope_rotate(dy, −1), without the separate passes over y and dy (dy stays
// unchanged). Results equal the two separate ops' up to rounding (1.8e-7 of the largest value in
// tests/kernels/test_nn_ops.cpp, which holds them to 1e-5). The tables belong to the caller.
struct ConvRope {
  const float* cos_table = nullptr;  // [period, d/2], as rope_rotate's
  const float* sin_table = nullptr;
  int d = 0;       // head dim, even; C a multiple of it
  int period = 1;  // positions t mod period
};
// Each of the B sequences [T, C] starts from a zero history: y[t, c] = bias[c] + Σ_j w[c, j]·u[t−K+1+j, c]
// (terms before the sequence start are 0). u, y [B·T, C]; w [C, K]; bias [C]. 1 ≤ K ≤ 16.
void causal_conv_forward(const float* u, const float* w, const float* bias, int B, int T, int C, int K,
                         float* y, CUstream_st* stream, const ConvRope* rope = nullptr);
// The Mamba backbone's pre-conv, the residual add after it and the next RMSNorm in one pass:
// S = H + causal_conv(u) (as causal_conv_forward, C = D) and Y = RMSNorm(S)·w (as
// add_rms_norm_forward), or with Y16 given instead of Y, only bf16(Y) (as add_rms_norm_forward_bf16).
// Bitwise the two calls in turn; the convolution's output is not stored where the one-pass kernel
// runs (K = 4, D a multiple of 128 up to 1024, 16-byte aligned), and goes through scratch [B·T, D]
// otherwise. u, H, S, Y, scratch [B·T, D], five different buffers; conv_w [D, K]; conv_bias, w [D].
void conv_add_rms_norm_forward(const float* u, const float* conv_w, const float* conv_bias, int B,
                               int T, int D, int K, const float* H, const float* w, float eps,
                               float* S, float* Y, std::uint16_t* Y16, float* scratch,
                               CUstream_st* stream);
// du (= or += with accumulate), dw += Σ dy·u, dbias += Σ dy.
std::size_t causal_conv_backward_workspace(int B, int T, int C, int K);
void causal_conv_backward(const float* u, const float* w, const float* dy, int B, int T, int C, int K,
                          float* du, bool accumulate, float* dw, float* dbias, float* workspace,
                          CUstream_st* stream, const ConvRope* rope = nullptr);
// Two convolutions a, b of one input u (the Mamba backbone's Q and K views: conv_q and conv_k of
// q_proj's output), in one pass: the forward reads u once for y_a and y_b, the backward reads u once
// and writes du once, du (= or +=) conv_aᵀ(dy_a) + conv_bᵀ(dy_b), with each weight's gradient added
// as above. Results are bitwise those of the two single calls (forward a then b; backward a with
// `accumulate`, then b accumulating), which is how shapes the vectorised kernels don't take run.
// The workspace holds both convolutions' partial sums. du16, when not null, receives bf16(du) instead
// (mixed precision: q_proj's two products are du's only readers); du is then read (with accumulate)
// but its contents afterwards are unspecified (scratch).
void causal_conv_pair_forward(const float* u, const float* w_a, const float* bias_a,
                              const float* w_b, const float* bias_b, int B, int T, int C, int K,
                              float* y_a, float* y_b, CUstream_st* stream,
                              const ConvRope* rope = nullptr);
std::size_t causal_conv_pair_backward_workspace(int B, int T, int C, int K);
void causal_conv_pair_backward(const float* u, const float* w_a, const float* dy_a,
                               const float* w_b, const float* dy_b, int B, int T, int C, int K,
                               float* du, bool accumulate, float* dw_a, float* dbias_a, float* dw_b,
                               float* dbias_b, float* workspace, CUstream_st* stream,
                               const ConvRope* rope = nullptr, std::uint16_t* du16 = nullptr);

// ---- RoPE (nn/rope.hpp), positions t mod b -------------------------------------------------------
// In place on X [B·T, H·d]: each interleaved pair (2m, 2m+1) of every head of row n·T + t is rotated
// by the angle of position p = t mod period, frequency m: (a, b) → (a·c − b·s, a·s + b·c) with
// c = cos_table[p·d/2 + m], s = sign·sin_table[p·d/2 + m]. sign = +1 forward, −1 backward (the
// transpose). The tables [period, d/2] are computed on the host in double and rounded to float, as
// the CPU op rounds its cos and sin (rope_tables()).
void rope_rotate(float* X, int B, int T, int H, int d, int period, const float* cos_table, const float* sin_table,
                 float sign, CUstream_st* stream);
// The same rotation of X (not modified) written only as bf16 into Y16 [B·T, H·d] (round to nearest,
// ties to even; as rope_rotate then convert_to_bf16, bit for bit): the operand of bf16 products that
// read the rotated tensor and nothing else (the tensor-core attention's Q and K).
void rope_rotate_to_bf16(const float* X, int B, int T, int H, int d, int period, const float* cos_table,
                         const float* sin_table, float sign, std::uint16_t* Y16, CUstream_st* stream);
// Host helper: the tables above for head dim d (even), `period` positions, base theta.
void rope_tables(int d, int period, double theta, float* cos_host, float* sin_host);

// ---- activations (nn/swiglu.hpp) --------------------------------------------
// hidden = silu(G) ⊙ U over n elements.
void silu_mul_forward(const float* G, const float* U, float* hidden, std::size_t n, CUstream_st* stream);
// Given dHidden: dU = dHidden ⊙ silu(G), dG = dHidden ⊙ U ⊙ silu′(G). dG may alias dHidden.
void silu_mul_backward(const float* G, const float* U, const float* dHidden, float* dG, float* dU, std::size_t n,
                       CUstream_st* stream);
// Mixed precision (gemm.hpp, GemmPrecision::Bf16): the two above on bf16 arrays (16-bit patterns).
// G, U and dHidden are the outputs of matrix products written in bf16 (Gemm::bf16_out); hidden, dG and
// dU are the next products' operands. Bit for bit the fp32 op on the widened inputs followed by
// convert_to_bf16, with 2 bytes per element read and written instead of 4 (and 6 for the rounding).
void silu_mul_forward_bf16(const std::uint16_t* G16, const std::uint16_t* U16,
                           std::uint16_t* hidden16, std::size_t n, CUstream_st* stream);
void silu_mul_backward_bf16(const std::uint16_t* G16, const std::uint16_t* U16,
                            const std::uint16_t* dHidden16, std::uint16_t* dG16,
                            std::uint16_t* dU16, std::size_t n, CUstream_st* stream);

// ---- the TTT layer's learning rates (ttt/eta.hpp) --------------------------------------------------
// λ [B, H, T] (the inner-loop kernels' layout) from the gate's pre-activations U [B·T, H] = x·θᵀ:
// λ[n, h, t] = scale·σ(U[n·T + t, h] + bias[h]). With U == nullptr (the fixed gate) λ = scale.
void eta_forward(const float* U, const float* bias, int B, int T, int H, float scale, float* lambda,
                 CUstream_st* stream);
// dU [B·T, H] = dλ ⊙ λ ⊙ (1 − λ/scale)  (scale ≤ 0 is taken as 1, as on the CPU, where λ = 0 anyway).
void eta_backward(const float* lambda, const float* dlambda, int B, int T, int H, float scale, float* dU,
                  CUstream_st* stream);
// The learned gate from its input in one pass, with bf16 products: λ [B, H, T], λ[n, h, t] =
// scale·σ(x_r·θ_h + bias[h]) with r = n·T + t, x16 [B·T, D] and θ16 [H, D] bf16 bit patterns
// (row-major, 4-byte aligned; D a multiple of 16), each dot product accumulated in fp32 on the tensor
// cores. (The product U = x·θᵀ and eta_forward in one pass, without U.)
void eta_gate_forward_bf16(const std::uint16_t* x16, const std::uint16_t* theta16,
                           const float* bias, int B, int T, int H, int D, float scale,
                           float* lambda, CUstream_st* stream);
// Its backward for the gate's own parameters: dU [B·T, H] as eta_backward (written; and dU16, its bf16
// copy, when not null), dθ [H, D] += dUᵀ·x and dbias [H] += Σ_r dU[r, :], summed in a fixed order
// (deterministic). The input gradient dU·θ is the caller's product. workspace:
// eta_gate_backward_workspace(B·T, H, D) floats.
std::size_t eta_gate_backward_workspace(int R, int H, int D);
void eta_gate_backward(const float* lambda, const float* dlambda, const float* x,
                       const std::uint16_t* x16, int B, int T, int H, int D, float scale, float* dU,
                       std::uint16_t* dU16, float* dtheta, float* dbias, float* workspace,
                       CUstream_st* stream);
// τ [b]: τ_i = max(1/i + δ_i, 0) (i = 1..b), or 1 with token_index off.
void token_index_forward(const float* delta, int b, bool token_index, float* tau, CUstream_st* stream);
// dδ_i += dτ_i where 1/i + δ_i > 0 (the clamp is inactive); nothing with token_index off.
void token_index_backward(const float* delta, const float* dtau, int b, bool token_index, float* ddelta,
                          CUstream_st* stream);

// ---- softmax cross-entropy (nn/cross_entropy.hpp) --------------------------------------------------
// Per row r of logits [R, V] with targets[r] in [0, V), or −1 (not counted): losses[r] =
// logsumexp − logit[target] (0 for uncounted rows), and (dlogits != nullptr) dlogits[r, :] =
// grad_scale·(softmax − onehot), zero rows for uncounted rows. dlogits may alias logits.
void cross_entropy(const float* logits, const int* targets, int R, int V, float grad_scale, float* losses,
                   float* dlogits, CUstream_st* stream);

// ---- AdamW (optim/adamw.hpp) -------------------------------------------------------------------
// Σ g² over n elements, accumulated in double, written to *out (one double on the device).
std::size_t sum_squares_workspace(std::size_t n);  // in doubles
void sum_squares(const float* g, std::size_t n, double* out, double* workspace, CUstream_st* stream);
// The element update of AdamW::step with its scalars computed on the host as there:
//   g' = g·scale; m = b1·m + (1−b1)·g'; v = b2·v + (1−b2)·g'²; p −= lr·(m·inv_bc1 / (√(v·inv_bc2) + eps) + wd·p)
// p16 (optional, n elements): also written, bf16(p) of the updated p, rounded as convert_to_bf16 does.
struct AdamWScalars {
  float scale = 1, b1 = 0.9f, one_minus_b1 = 0.1f, b2 = 0.95f, one_minus_b2 = 0.05f;
  float inv_bc1 = 1, inv_bc2 = 1, lr = 0, eps = 1e-8f, wd = 0;
};
void adamw_update(float* p, const float* g, float* m, float* v, std::size_t n,
                  const AdamWScalars& s, CUstream_st* stream, std::uint16_t* p16 = nullptr);

// ---- a plain fp32 matrix product (the fallback engine of gemm.hpp) ------------------------------
// Row-major C[M, N] = alpha·op(A)·op(B) + beta·C, the contract of Gemm::operator().
void gemm_builtin(bool trans_a, bool trans_b, int M, int N, int K, float alpha, const float* A, int lda,
                  const float* B, int ldb, float beta, float* C, int ldc, CUstream_st* stream);
// `batch` of them (grid z), entry i at A + i·stride_a, B + i·stride_b, C + i·stride_c (Gemm::batched).
void gemm_builtin_batched(bool trans_a, bool trans_b, int M, int N, int K, float alpha, const float* A,
                          int lda, long long stride_a, const float* B, int ldb, long long stride_b,
                          float beta, float* C, int ldc, long long stride_c, int batch,
                          CUstream_st* stream);

}  // namespace tttlab::kernels
