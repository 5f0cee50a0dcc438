// The small fused kernels of the whole-model GPU decoder (decode_cuda.cpp): a split-k
// matrix-vector product (and its batched form) and the row operations between the products. Private
// to kernels/src.
//
// Matrices are row-major [in, out], as the CPU engine stores linear maps. Every pointer is device
// memory; all launches are asynchronous on `stream` and make no other CUDA call (they are captured
// into CUDA graphs).
//
// BATCH: every row kernel below takes `batch` = B ≥ 1 independent sequences in lockstep (one token
// each). Each per-sequence vector, history and state is stored sequence-major, one sequence after
// another with the stride its single-sequence size implies ([B, D] for h, a, q, ...; [B, K−1, D] for
// a history (at least one row each); [B, H, P, N] for Mamba-2's state; [B, H, cap, d] for a KV
// cache); a product's output is [B, ld] (Partials::bs = ld). Sequence s is computed by the same
// threads in the same order as a batch-1 launch, so its results are bitwise those of batch 1.
#pragma once

#include <cuda_runtime_api.h>

#include <cstddef>

namespace tttlab::kernels::detail {

// One product y[N] = x[K]·W[K, N] is split into `tiles` column tiles of 128 and S row chunks of kc
// rows (kc ≤ kDecodeMaxChunk), one CTA each, so that even a 768 × 768 product keeps ~2 CTAs per SM
// busy. W is stored with a row stride ld = N rounded up to 4 (zero columns: float4 loads), and y has
// ld entries.
struct GemvPlan {
  int K = 0, N = 0, ld = 0, tiles = 0, kc = 0, S = 0;
  std::size_t partial_floats() const { return std::size_t(S) * ld; }
};
constexpr int kDecodeMaxChunk = 256;
// About two CTAs of 256 threads per SM, at least 16 rows per chunk.
GemvPlan gemv_plan(int K, int N, int sms);

// The product's scratch: partials [S, ld] and one counter per tile (zero before the first launch;
// each launch leaves them zero again). One scratch per product in flight.
struct GemvScratch {
  float* part = nullptr;
  unsigned* counters = nullptr;
};

// y = x·W. Deterministic: the S chunk partials are added in a fixed order (no floating-point
// atomics); only the tile counters are atomic.
void decode_gemv(const GemvPlan& plan, const float* x, const float* W, GemvScratch scratch, float* y,
                 cudaStream_t stream);
// The same with the SwiGLU hidden vector as input, x[k] = silu(G[k])·U[k], where gu = [G | U] is the
// previous product's output (G at [0, K), U at [K, 2K); plan.K = the FFN width).
void decode_gemv_swiglu(const GemvPlan& plan, const float* gu, const float* W, GemvScratch scratch, float* y,
                        cudaStream_t stream);

// The batched product Y[B, ld] = X[B, K]·W for B sequences (X's rows of stride ldx; swiglu: X's rows
// are [G | U] of stride ldx and the input is silu(G)·U as above). Groups of kDecodeGemvGroup
// sequences share each CTA's loads of W (grid: groups × tiles × S); every sequence's sums run in the
// order of decode_gemv with the same plan, so row s of Y is bitwise decode_gemv of row s of X. The
// scratch holds B·S·ld partials and tiles·⌈B/kDecodeGemvGroup⌉ counters (batch_gemv_partial_floats, batch_gemv_counters).
constexpr int kDecodeGemvGroup = 16;
std::size_t batch_gemv_partial_floats(const GemvPlan& plan, int batch);
std::size_t batch_gemv_counters(const GemvPlan& plan, int batch);
void decode_gemv_batch(const GemvPlan& plan, int batch, bool swiglu, const float* x, int ldx,
                       const float* W, GemvScratch scratch, float* y, cudaStream_t stream);

// hidden[s·F + c] = silu(G[c])·U[c] of row s of gu [batch, ldgu] (G at columns [0, F), U at [F, 2F)):
// the SwiGLU's hidden vectors written out, for the cuBLAS products that cannot form them while
// loading (CudaDecoderOptions::products). The same float expression as the swiglu products'.
void decode_swiglu_rows(const float* gu, int ldgu, int F, float* hidden, int batch,
                        cudaStream_t stream);

// A vector given as a sum of S ≥ 1 rows of stride N: y[c] = Σ_s part[s·N + c] (S = 1: a plain vector).
// In a batched launch sequence s reads part + s·bs (bs = 0 at batch 1).
struct Partials {
  const float* part = nullptr;
  int S = 0, N = 0;
  long bs = 0;
};

// The start of block i (one CTA):
//   h = E[*token] (embed != nullptr: the first block) or h += Σ delta (the previous block's FFN),
//   [pre-conv, conv_w != nullptr:] h += conv(RMSNorm(h)·conv_norm) with the rolling history
//   hist [K−1, D] (oldest row first) updated,
//   a = RMSNorm(h)·seq_norm.
struct BlockInArgs {
  float* h = nullptr;
  const float* embed = nullptr;  // [V, D]
  const int* token = nullptr;
  Partials delta;
  const float* conv_norm = nullptr;
  const float* conv_w = nullptr;  // [D, K]
  const float* conv_b = nullptr;
  float* hist = nullptr;
  int K = 1;
  const float* norm = nullptr;
  float* a = nullptr;
  int D = 0;
  float eps = 1e-6f;
  int batch = 1;  // token: [batch] ids (sequence s reads token[s])
};
void decode_block_in(const BlockInArgs& args, cudaStream_t stream);

// The TTT layer's inputs for one token from the projection partials P (columns: q or u at off_q,
// k at off_k (without share_qk), v at off_v, the gate's pre-activation at off_g (use_gate), θ_lr·x
// at off_lr (learned gate)):
//   share_qk: q = conv_q(u), k = conv_k(u) with the rolling history hist [K−1, D] of u;
//   RoPE (cos_t != nullptr) at position pos with tables [b, d/2];
//   λ[h] = scale·σ(θ_h·x + β_h) (learned gate) or scale.
struct TttPrepArgs {
  Partials P;
  int off_q = 0, off_k = -1, off_v = 0, off_g = -1, off_lr = -1;
  const float* conv_q_w = nullptr;  // [D, K]; nullptr: no share_qk
  const float* conv_q_b = nullptr;
  const float* conv_k_w = nullptr;
  const float* conv_k_b = nullptr;
  float* hist = nullptr;
  int K = 1;
  const float* cos_t = nullptr;
  const float* sin_t = nullptr;
  int pos = 0;
  const float* lr_b = nullptr;  // [H]
  float scale = 1.0f;
  float *q = nullptr, *k = nullptr, *v = nullptr, *gpre = nullptr, *lambda = nullptr;
  int D = 0, H = 1, d = 0;
  int batch = 1;  // every sequence at the same position pos; lambda [batch, H]
};
void decode_ttt_prep(const TttPrepArgs& args, cudaStream_t stream);

// y = [post-norm LayerNorm(O)·w + b (post_w != nullptr)] [⊙ gelu(gpre) (gpre != nullptr)] (one CTA
// per sequence).
void decode_post(const float* O, const float* post_w, const float* post_b, float eps,
                 const float* gpre, float* y, int D, int batch, cudaStream_t stream);

// h += Σ delta; a = RMSNorm(h)·w (one CTA per sequence).
void decode_add_norm(float* h, Partials delta, const float* w, float eps, float* a, int D,
                     int batch, cudaStream_t stream);

// Mamba-2's mixer for one token (tttlab/seq/mamba2_layer.hpp, the recurrent form; docs/MATH.md §8.8),
// in three kernels around the two products a·in_proj and ·out_proj. `proj` is in_proj's output
// [z | xBC | dt_raw] (z: d_inner columns, xBC: cd = d_inner + 2N, dt_raw: H).
//
// decode_mamba2_conv: per channel c of xBC, xbc[c] = silu(Σ_j w[c, j]·u_{t−K+1+j}[c] + b[c]) with the
// rolling history hist [K−1, cd] (oldest row first, the inputs before the convolution) updated;
// threads below H also make dt[h] = softplus(dt_raw[h] + dt_bias[h]) (r itself above r = 20).
struct Mamba2ConvArgs {
  Partials proj;
  const float* conv_w = nullptr;   // [cd, K]
  const float* conv_b = nullptr;   // [cd]
  float* hist = nullptr;           // [K−1, cd]
  const float* dt_bias = nullptr;  // [H]
  float* xbc = nullptr;            // [cd]: [xs | B | C]
  float* dt = nullptr;             // [H]
  int di = 0, cd = 0, K = 1, H = 1;
  int batch = 1;
};
void decode_mamba2_conv(const Mamba2ConvArgs& args, cudaStream_t stream);

// decode_mamba2_ssm: one CTA per head h, the state S_h [P, N] (fp32, row-major, heads one after
// another in `state`) updated in place and read out:
//   S_h ← exp(dt_h·A_h)·S_h + (dt_h·xs_h) B_tᵀ,  y = S_h C_t + D_h·xs_h,  g = y ⊙ silu(z)
// with A_h = −exp(A_log_h); g [d_inner] is the gated norm's input.
struct Mamba2SsmArgs {
  Partials proj;  // z at columns [0, d_inner)
  const float* xbc = nullptr;
  const float* dt = nullptr;
  const float* A_log = nullptr;  // [H]
  const float* Dskip = nullptr;  // [H]
  float* state = nullptr;        // [H, P, N]
  float* g = nullptr;            // [d_inner]
  int di = 0, N = 0, P = 0, H = 1;
  int batch = 1;
};
void decode_mamba2_ssm(const Mamba2SsmArgs& args, cudaStream_t stream);

// y = g / sqrt(mean(g²) + eps) ⊙ w over n entries (one CTA): Mamba-2's gated RMSNorm after the gate.
void decode_rms_scale(const float* g, const float* w, float eps, float* y, int n, int batch,
                      cudaStream_t stream);

// DeltaNet's and Gated DeltaNet's mixer for one token (tttlab/seq/deltanet_layer.hpp, the primal
// form of tttlab/fastweight/matrix_rules.hpp; docs/MATH.md §11.2, §11.8), in two kernels around the
// products a·[W_q | W_k | W_v | W_β | W_a | W_g] and ·o_proj. `proj` is the first product's output:
// q, k, v's projections u at columns [0, 3D), x·W_β at off_b [H], and (gated) x·W_a at off_a [H] and
// x·W_g at off_g [D].
//
// decode_deltanet_prep: per channel c of [q | k | v], qkv[c] = silu(Σ_j w[c, j]·u_{t−K+1+j}[c]) (no
// bias) with the rolling history hist [K−1, 3D] (oldest row first, the inputs before the
// convolution) updated; threads below H also make β[h] = sigmoid(x·W_β) and (gated)
// α[h] = max(exp(−exp(A_log_h)·softplus(x·W_a + dt_bias_h)), FLT_MIN), softplus in double as the
// CPU layer computes it (r itself above 20). With beta = nullptr only the convolutions run (Titans).
struct DeltaNetPrepArgs {
  Partials proj;
  const float* conv_w = nullptr;   // [3D, K]: q's, k's, then v's convolution
  float* hist = nullptr;           // [K−1, 3D]
  const float* A_log = nullptr;    // [H]; nullptr: DeltaNet (no α)
  const float* dt_bias = nullptr;  // [H]
  float* qkv = nullptr;            // [3D]: silu(conv(u)) of q, k, v
  float* beta = nullptr;           // [H]; nullptr: no β (Titans)
  float* alpha = nullptr;          // [H] (gated)
  int off_b = 0, off_a = -1, D = 0, K = 1, H = 1;
  int batch = 1;
};
void decode_deltanet_prep(const DeltaNetPrepArgs& args, cudaStream_t stream);

// decode_deltanet_step: one CTA per head h (of each sequence): q̂ = q_h·scale / sqrt(‖q_h‖² + ε_l2),
// k̂ = k_h / sqrt(‖k_h‖² + ε_l2), then on the state S_h [d, d] (fp32, row-major, rows the key dim,
// heads one after another in `state`), in the CPU's order:
//   S ← α·S (gated),  r = k̂ S − v,  S ← S − (β k̂)ᵀ r,  o = q̂ S,
// then y_h = RMSNorm(o)·o_norm (ε = norm_eps) [⊙ silu(x·W_g) (gated)], o_proj's input. Each state
// element is read twice and written once by one thread; the column sums run in a fixed order
// (deterministic). d ≤ kDeltaNetMaxHeadDim.
struct DeltaNetStepArgs {
  Partials proj;                  // x·W_g at off_g (gated)
  const float* qkv = nullptr;     // [3D]
  const float* beta = nullptr;    // [H]
  const float* alpha = nullptr;   // [H]; nullptr: DeltaNet
  const float* o_norm = nullptr;  // [d]
  float* state = nullptr;         // [H, d, d]
  float* y = nullptr;             // [D]
  float scale = 1.0f;             // 1/√d
  float l2_eps = 1e-6f, norm_eps = 1e-6f;
  int off_g = -1, D = 0, H = 1, d = 0;
  int batch = 1;
};
constexpr int kDeltaNetMaxHeadDim = 128;
void decode_deltanet_step(const DeltaNetStepArgs& args, cudaStream_t stream);

// Titans' mixer for one token (tttlab/seq/titans_layer.hpp; titans_step of
// tttlab/fastweight/titans.hpp; docs/MATH.md §11.9). The product a·[W_q | W_k | W_v | W_θ | W_α | W_η |
// W_g] comes first; decode_deltanet_prep with beta = nullptr makes q, k, v = silu(conv(·)) with their
// history. Then decode_titans_step, one CTA per head h (of each sequence), with the CPU's order:
//   q̂, k̂ = q_h, k_h / sqrt(‖·‖² + ε_l2);  θ = σ(z_θ + b_θ)/d, α = σ(z_α + b_α), η = σ(z_η + b_η)
//   z = k̂ M₀ (M₀: the memory at the start of the mini-batch), ẑ = LN(z) with σ_z, ε = ln_eps
//   g = (w ⊙ ẑ + b − v + k̂) ⊙ w,  u = d·g − (Σg + (g·ẑ) ẑ) / (σ_z d)
//   S ← η S − (2θ k̂)ᵀ u,  M ← (1 − α) M + S,  M₀ ← M where `commit` (the token ends a mini-batch)
//   y = q̂ M,  o = y + w ⊙ LN(y) + b,  then RMSNorm(o)·o_norm (ε = norm_eps) ⊙ silu(x·W_g)
// with w, b the head's row of ttt_norm. The three states [H, d, d] (fp32, row-major, rows the key
// dim) are each element's one thread's; the column sums run in a fixed order (deterministic).
// d ≤ kTitansMaxHeadDim.
struct TitansStepArgs {
  Partials proj;                     // the gates' logits at off_gates (θ's H, α's H, η's H), x·W_g at off_g
  const float* qkv = nullptr;        // [3D]
  const float* gate_bias = nullptr;  // [3H]: θ's, α's, η's biases
  const float* ln_w = nullptr;       // [H, d]
  const float* ln_b = nullptr;       // [H, d]
  const float* o_norm = nullptr;     // [d]
  float* memory = nullptr;           // M [H, d, d]
  float* momentum = nullptr;         // S [H, d, d]
  float* start = nullptr;            // M₀ [H, d, d]
  float* y = nullptr;                // [D]
  float l2_eps = 1e-6f, ln_eps = 1e-6f, norm_eps = 1e-6f;
  bool commit = false;
  int off_gates = 0, off_g = 0, D = 0, H = 1, d = 0;
  int batch = 1;
};
constexpr int kTitansMaxHeadDim = 128;
void decode_titans_step(const TitansStepArgs& args, cudaStream_t stream);

// Linear attention's mixer for one token (tttlab/seq/attention_layers.hpp, linear_attention_chunk
// of tttlab/nn/linear_attention.hpp; no RoPE, no normalisation), between the products
// a·[Wq | Wk | Wv] and ·Wo: one CTA per head h (of each sequence), S_h ← S_h + k_hᵀ v_h, then
// z_h = q_h S_h (the token attends to itself). The state S [H, d, d] (fp32, row-major, rows the key
// dim) is the DeltaNet step's layout: each element read and written by one thread, the column sums
// in a fixed order (deterministic). d ≤ kLinearAttnMaxHeadDim.
struct LinearAttnStepArgs {
  Partials proj;  // q at off_q, k at off_k, v at off_v
  float* state = nullptr;  // [H, d, d]
  float* z = nullptr;      // [D]
  int off_q = 0, off_k = 0, off_v = 0, D = 0, H = 1, d = 0;
  int batch = 1;
};
constexpr int kLinearAttnMaxHeadDim = 128;
void decode_linear_attn_step(const LinearAttnStepArgs& args, cudaStream_t stream);

// LaCT's block for one token (tttlab/seq/lact_layer.hpp; lact_stream of tttlab/fastweight/lact.hpp;
// docs/MATH.md §11.10), around the products a·[W_qkv | W_lr | W_m | W_s] (q, k, v at [0, 3D); the
// rates' logits at off_lr [3 H_f: head h's three at 3h]; the momentum's at off_m [H_f] where it is
// used; the output scale's at off_s [H_f]) and ·o_proj. The sliding-window attention is the
// softmax attention's prep and kernels with ring = W (RoPE at the global position t; the cache of a
// block is a ring of W rows). Then two kernels, one CTA per fast head (of each sequence), the
// position t read from device memory:
//   decode_lact_update  where t > 0 and t ≡ 0 (mod C): the chunk held in `chunk` (C tokens of k̃, ṽ,
//                       the three rates and the momentum) takes its step, as lact_update, in three
//                       kernels: the d_h-vectors of each token into `scratch` (a CTA per token);
//                       G_i, M_i = G_i + m̄ M_i (m̄ the chunk's mean momentum; M_i = 0 without
//                       momentum), W_i += M_i (a thread per weight entry); every row renormalised
//                       to its norm at the start (row_norms; a warp per row). Elsewhere they return.
//   decode_lact_fast    q̃ = silu(q ⊙ s_q + o_q), k̃ likewise, ṽ = silu(v); q̃, k̃ L2-normalised per
//                       fast head (‖·‖ + 1e-5) then RoPE'd with the attention's heads; o_f = f_W(q̃);
//                       k̃, ṽ, the rates softplus(z + b + softplus⁻¹(base_lr)) (in double, as the CPU)
//                       and the momentum sigmoid(z + b) into the chunk's slot t mod C; then
//                       y = z_attn + RMSNorm(o_f)·ttt_norm · silu(x·W_s + b_s), o_proj's input.
// The fast weights W0, W2 [H_f, d_h, d_f] and W1 [H_f, d_f, d_h] (row-major, per sequence) and
// their momentum are the stream's state; every sum has a fixed order (deterministic).
struct LactArgs {
  Partials proj;
  const int* pos = nullptr;          // device: t
  const float* qk_scale = nullptr;   // [D, 2]: column 0 for q, 1 for k
  const float* qk_offset = nullptr;  // [D, 2]
  const float* lr_bias = nullptr;    // [3 H_f]
  const float* m_bias = nullptr;     // [H_f], or null: no momentum
  const float* s_bias = nullptr;     // [H_f]
  const float* ttt_norm = nullptr;   // [d_f]
  const double* freq = nullptr;      // [d_a/2]: rope_theta^(−2m/d_a)
  const float* row_norms = nullptr;  // [H_f, 2 d_h + d_f]: W0's, W1's, then W2's rows at the start
  float *w0 = nullptr, *w1 = nullptr, *w2 = nullptr;  // the fast weights
  float *m0 = nullptr, *m1 = nullptr, *m2 = nullptr;  // their momentum
  float* chunk = nullptr;    // [H_f, C, 2 d_f + 4]: k̃ [d_f], ṽ [d_f], lr0, lr1, lr2, m per token
  float* scratch = nullptr;  // [H_f, C, 3 d_h] (the update's per-token vectors)
  const float* z = nullptr;  // [D]: the attention's output
  float* y = nullptr;        // [D]
  float lr_base = 0.0f;      // softplus⁻¹(base_lr)
  float norm_eps = 1e-5f;
  int off_lr = 0, off_m = -1, off_s = 0, D = 0, H = 1, df = 0, dh = 0, da = 0, C = 1;
  int batch = 1;
};
// The dynamic shared memory of the update's first kernel, 2 d_f + 2 d_h floats (decode_lact_fast's,
// 2 d_f + d_h, is less), at most 48 KiB.
constexpr int kLactDecodeMaxSmemFloats = 12 * 1024;
void decode_lact_update(const LactArgs& args, cudaStream_t stream);
void decode_lact_fast(const LactArgs& args, cudaStream_t stream);

// Softmax attention's mixer for one token (tttlab/seq/attention_layers.hpp; tttlab/nn/attention.hpp),
// around the two products a·[Wq | Wk | Wv] and ·Wo. The KV cache of a block is two arrays
// kcache, vcache [H, cap, d] (fp32; head h's rows one after another, row j = the token at global
// position j); `pos` points to the token's global position t in device memory (so one CUDA graph
// serves every token), and the caller guarantees t < cap.
//
// decode_attn_prep: one thread per interleaved pair (2m, 2m+1) of the D columns: q, k, v from the
// partials, RoPE at the global position t on q and k (φ = t·freq[m] in double, cos and sin rounded
// to float, as the CPU's rope_apply), q scaled by 1/√d afterwards (the CPU's scale·Q), and k, v
// written to row t of the cache.
struct AttnPrepArgs {
  Partials P;
  int off_q = 0, off_k = 0, off_v = 0;
  const int* pos = nullptr;      // device: t
  const double* freq = nullptr;  // [d/2]: rope_theta^(−2m/d); nullptr: no RoPE
  float scale = 1.0f;            // 1/√d
  float* q = nullptr;            // [D]: the rotated, scaled query
  float* kcache = nullptr;       // [H, cap, d]
  float* vcache = nullptr;       // [H, cap, d]
  int cap = 0, D = 0, H = 1, d = 0;
  int batch = 1;  // every sequence at the same position t
  // > 0: the cache is a ring of `ring` rows (= cap; LaCT's window): token t goes to row t mod ring.
  int ring = 0;
};
void decode_attn_prep(const AttnPrepArgs& args, cudaStream_t stream);

// decode_attention: z_h = softmax(q_h·K_hᵀ) V_h over the cache rows 0..t, split over the context
// (flash-decoding). A grid of S × H blocks: split s of head h takes the rows
// [s·c, min(t+1, (s+1)·c)) with c = max(⌈(t+1)/S⌉, 64), in tiles of 256 rows with the running
// max/sum rescaling, and writes its unnormalised output, max and sum to part_o [H, S, d] and
// part_ml [H, S, 2]; a second kernel (one block per head) combines the S splits in a fixed order:
// z = Σ_s e^{m_s−M} o_s / Σ_s e^{m_s−M} l_s. Deterministic (no atomics); fp32 throughout.
// d must be decode_attn_head_dim_ok (a power of two in 8..128: a key row is d/4 lanes' float4s).
struct AttnArgs {
  const float* q = nullptr;       // [D], scaled
  const float* kcache = nullptr;  // [H, cap, d]
  const float* vcache = nullptr;  // [H, cap, d]
  const int* pos = nullptr;       // device: t
  float* part_o = nullptr;        // [H, S, d]
  float* part_ml = nullptr;       // [H, S, 2]
  float* z = nullptr;             // [D]: the attention output, o_proj's input
  int cap = 0, H = 1, d = 0, S = 1;
  int batch = 1;  // part_o [batch, H, S, d], part_ml [batch, H, S, 2]
  // > 0: a ring of `ring` rows (= cap) holding the last min(t + 1, ring) tokens, every row read
  // (softmax does not depend on the rows' order).
  int ring = 0;
};
bool decode_attn_head_dim_ok(int d);
// The number of context splits S for H heads and a cache of cap rows on a GPU of `sms` SMs: about
// four blocks of 256 threads per SM at a full cache, at most one split per 64 rows.
int decode_attn_splits(int H, long cap, int sms);
void decode_attention(const AttnArgs& args, cudaStream_t stream);

// next[s] = argmax_c logits[s·ld + c] over c < n (the first of equal maxima, as std::max_element),
// one CTA per sequence: greedy decoding without bringing the logits to the host.
void decode_argmax(const float* logits, int n, int ld, int batch, int* next, cudaStream_t stream);

}  // namespace tttlab::kernels::detail
