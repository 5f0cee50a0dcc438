// The whole-model GPU decoder (see tttlab/kernels/decode_cuda.hpp; design in docs/KERNELS.md,
// "Decoding on the GPU").
//
// One token's step, per block (batch 1, one CUDA stream, kernels of decode_ops.hpp and ttt.hpp):
//   block_in   h = E[token] | h += FFN partials;  [pre-conv;]  a = RMSNorm(h)·seq_norm
//   gemv       a·[Wq | Wk | Wv | Wg | θ_lrᵀ]         one product for every projection of the layer
//   ttt_prep   [conv_q, conv_k;] RoPE (pos = t mod b); λ
//   decode     ttt_linear_decode_step / ttt_mlp_decode_step at pos
//   post       post-norm [⊙ gelu(gate)]
//   gemv       ·Wo
//   add_norm   h += o_proj partials; a = RMSNorm(h)·ffn_norm
//   gemv       a·[W_gate | W_up]
//   gemv       (silu(G) ⊙ U)·W_down                  the SwiGLU product made while loading the input
// then add_norm with the final norm and a·Eᵀ into the logits. A Mamba-2 block (the Transformer
// backbone) replaces the TTT layer's five steps by
//   gemv          a·in_proj                          [z | xBC | dt_raw]
//   mamba2_conv   xBC ← silu(conv(xBC) + b) with its history; dt = softplus(dt_raw + dt_bias)
//   mamba2_ssm    per head S_h ← exp(dt·A)·S_h + dt·xs Bᵀ; g = (S_h C + D·xs) ⊙ silu(z)
//   rms_scale     the gated RMSNorm
//   gemv          ·out_proj
// a DeltaNet or Gated DeltaNet block (the Transformer backbone) by
//   gemv           a·[W_q | W_k | W_v | W_β | W_a | W_g]   (W_a, W_g: gated only)
//   deltanet_prep  q, k, v ← silu(conv(·)) with their history; β = sigmoid(·); α (gated)
//   deltanet_step  per head: L2-normalised q̂, k̂; S_h ← α S_h − β k̂ᵀ(k̂ α S_h − v); o = q̂ S_h;
//                  the per-head RMSNorm [⊙ silu(x W_g)]
//   gemv           ·o_proj
// a Titans block (the Transformer backbone) by
//   gemv           a·[W_q | W_k | W_v | W_θ | W_α | W_η | W_g]
//   deltanet_prep  q, k, v ← silu(conv(·)) with their history (no β)
//   titans_step    per head: the gates; the memory's write from M₀ (the memory at the mini-batch's
//                  start), S ← η S − 2θ k̂ᵀu, M ← (1 − α) M + S, M₀ ← M at the mini-batch's last
//                  token (pos = t mod b); o = q̂ M + w ⊙ LN(q̂ M) + b; the per-head RMSNorm ⊙ silu(x W_g)
//   gemv           ·o_proj
// a LaCT block (the Transformer backbone) by
//   gemv          a·[W_qkv | W_lr | W_m | W_s]
//   attn_prep     as below, into a ring of W rows (the window; row t mod W)
//   attn_split / attn_combine  over the ring's min(t + 1, W) rows
//   lact_update   (a no-op unless t > 0 and t ≡ 0 mod C) the held chunk's step of the fast weights
//   lact_fast     q̃, k̃, ṽ, the rates and momentum into the chunk; o_f = f_W(q̃); y = z_attn +
//                 RMSNorm(o_f)·ttt_norm · silu(x W_s + b_s)
//   gemv          ·o_proj
// a linear-attention block (either backbone) by
//   gemv          a·[Wq | Wk | Wv]
//   linear_attn   per head: S_h ← S_h + k_hᵀ v_h, z_h = q_h S_h
//   gemv          ·Wo
// and a softmax-attention block (either backbone) by
//   gemv          a·[Wq | Wk | Wv]
//   attn_prep     RoPE at the global position t on q, k; q ·= 1/√d; k, v → row t of the KV cache
//   attn_split    per (split, head): softmax over its share of the cache rows 0..t, tile by tile
//                 with the running max/sum (flash-decoding)
//   attn_combine  per head: the splits' outputs rescaled and summed in a fixed order
//   gemv          ·Wo
// The KV cache is [H, cap, d] fp32 per block for K and V, cap fixed at construction
// (CudaDecoderOptions::max_context, checked against the free device memory); feed() refuses a feed
// that would pass it.
// BATCH (CudaDecoderOptions::batch = B > 1): B sequences step in lockstep, one token each per step;
// every per-token vector, history, inner state and KV cache above gets a leading sequence dimension
// (decode_ops.hpp, "BATCH"), the row kernels take one CTA (or grid row) per sequence, and the products
// run by one of two paths (CudaDecoderOptions::products):
//   Exact   decode_gemv_batch (groups of 16 sequences share each load of a weight tile; each
//           sequence's sums in the batch-1 order): sequence s of a batch gives bitwise the logits of
//           a batch-1 decoder fed its tokens;
//   Cublas  one fp32 cuBLAS GEMM [B, K]·[K, N] per product (CUBLAS_COMPUTE_32F, no TF32), its output
//           [B, ld] read by the row kernels as the exact path's; the SwiGLU's hidden vectors
//           silu(G) ⊙ U are written out first (decode_swiglu_rows) since cuBLAS cannot form them
//           while loading. Logits agree with batch 1 to fp32 rounding (another order of the sums).
// Either way the step is still one CUDA graph: the cuBLAS handle is bound to the decoder's stream and
// given a workspace of its own before the first capture (Gemm::set_workspace), so the captured
// GEMMs allocate nothing.
// At batch 1 every kernel is short (a few µs), so with cuda_graphs the whole step is captured once
// per mini-batch position pos (the only launch argument that changes from token to token; the token
// and, for attention, its global position t are read from device memory, where feed() copies them
// before each step; Mamba-2's and attention's steps take no position argument, so one graph) and
// replayed with one cudaGraphLaunch (Titans, whose mini-batch ends at pos = b − 1, has b graphs too).
#include "tttlab/kernels/decode_cuda.hpp"

#include <cuda_runtime_api.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <map>
#include <memory>
#include <stdexcept>
#include <string>
#include <utility>
#include <vector>

#include "common/cuda_check.hpp"
#include "model/decode_ops.hpp"
#include "ttt/ttt_host.hpp"
#include "tttlab/kernels/gemm.hpp"
#include "tttlab/kernels/nn_ops.hpp"
#include "tttlab/kernels/ttt.hpp"
#include "tttlab/model/memory.hpp"
#include "tttlab/model/model.hpp"
#include "tttlab/ttt/eta.hpp"

namespace tttlab::kernels {

using detail::GemvPlan;
using detail::GemvScratch;
using detail::Partials;

const char* to_string(DecodeProducts p) { return p == DecodeProducts::Exact ? "exact" : "cublas"; }

std::string cuda_decode_unsupported(const ModelConfig& m) {
  if (m.seq_layer == SeqLayerKind::Mamba2) {
    if (m.mamba_backbone)
      return "the GPU decoder runs mamba2 with the Transformer backbone (t) only";
    return {};
  }
  if (m.seq_layer == SeqLayerKind::SoftmaxAttention) {
    if (!detail::decode_attn_head_dim_ok(m.head_dim()))
      return "the GPU decoder needs a softmax-attention head dim of 8, 16, 32, 64 or 128, got " +
             std::to_string(m.head_dim()) + "; use --device cpu";
    return {};
  }
  if (m.is_deltanet()) {
    if (m.mamba_backbone)
      return "the GPU decoder runs " + to_string(m.seq_layer) +
             " with the Transformer backbone (t) only";
    if (m.head_dim() < 1 || m.head_dim() > detail::kDeltaNetMaxHeadDim)
      return "the GPU decoder needs a " + to_string(m.seq_layer) + " head dim of at most " +
             std::to_string(detail::kDeltaNetMaxHeadDim) + ", got " + std::to_string(m.head_dim()) +
             "; use --device cpu";
    return {};
  }
  if (m.seq_layer == SeqLayerKind::Titans) {
    if (m.mamba_backbone) return "the GPU decoder runs titans with the Transformer backbone (t) only";
    if (m.head_dim() < 1 || m.head_dim() > detail::kTitansMaxHeadDim)
      return "the GPU decoder needs a titans head dim of at most " +
             std::to_string(detail::kTitansMaxHeadDim) + ", got " + std::to_string(m.head_dim()) +
             "; use --device cpu";
    return {};
  }
  if (m.seq_layer == SeqLayerKind::Lact) {
    const LactLayerConfig lc = m.lact_config();
    if (m.mamba_backbone) return "the GPU decoder runs lact with the Transformer backbone (t) only";
    if (lc.use_muon) return "the GPU decoder runs lact without Muon (--lact-muon); use --device cpu";
    if (!detail::decode_attn_head_dim_ok(lc.attn_head_dim()))
      return "the GPU decoder needs a lact attention head dim of 8, 16, 32, 64 or 128, got " +
             std::to_string(lc.attn_head_dim()) + "; use --device cpu";
    const int df = lc.fw_head_dim(), dh = lc.fw_hidden();
    if (df % 2 != 0 || 2 * df + 2 * dh > detail::kLactDecodeMaxSmemFloats)
      return "the GPU decoder needs an even lact fast-weight head dim d_f with 2 d_f + 2 d_h <= " +
             std::to_string(detail::kLactDecodeMaxSmemFloats) + ", got d_f " + std::to_string(df) +
             " and d_h " + std::to_string(dh) + "; use --device cpu";
    return {};
  }
  if (m.seq_layer == SeqLayerKind::LinearAttention) {
    if (m.head_dim() < 1 || m.head_dim() > detail::kLinearAttnMaxHeadDim)
      return "the GPU decoder needs a linear-attention head dim of at most " +
             std::to_string(detail::kLinearAttnMaxHeadDim) + ", got " +
             std::to_string(m.head_dim()) + "; use --device cpu";
    return {};
  }
  if (!m.is_ttt())  // a layer added to the CPU engine before its GPU step
    return "the GPU decoder has no step for " + to_string(m.seq_layer) +
           " models; it decodes on the CPU (--device cpu)";
  if (std::string why = detail::ttt_shape_unsupported(m.head_dim(), m.mini_batch_size,
                                                      "the GPU decoder needs");
      !why.empty())
    return why;
  if (m.conv_kernel > 16)
    return "the GPU decoder needs conv_kernel <= 16, got " + std::to_string(m.conv_kernel) + "; use --device cpu";
  return {};
}

namespace {

class DeviceFloats {
 public:
  explicit DeviceFloats(std::size_t n) : m_n(n) {
    TTTLAB_CUDA_CHECK(cudaMalloc(reinterpret_cast<void**>(&m_p), std::max<std::size_t>(n, 1) * sizeof(float)));
  }
  ~DeviceFloats() { cudaFree(m_p); }
  DeviceFloats(const DeviceFloats&) = delete;
  DeviceFloats& operator=(const DeviceFloats&) = delete;
  float* get() const { return m_p; }

 private:
  float* m_p = nullptr;
  std::size_t m_n = 0;
};

struct HostTensor {
  const float* data = nullptr;
  long rows = 0, cols = 0;
};

struct DecBlock {
  // pre-conv (Mamba backbone)
  float *conv_norm = nullptr, *conv_w = nullptr, *conv_b = nullptr, *hist_pre = nullptr;
  float* seq_norm = nullptr;
  // the TTT layer
  float* Wcat = nullptr;
  GemvPlan cat;
  int off_q = 0, off_k = -1, off_v = 0, off_g = -1, off_lr = -1;
  float *conv_q_w = nullptr, *conv_q_b = nullptr, *conv_k_w = nullptr, *conv_k_b = nullptr, *hist_qk = nullptr;
  float *lr_b = nullptr, *tau = nullptr, *ln_w = nullptr, *ln_b = nullptr, *post_w = nullptr, *post_b = nullptr;
  float* Wo = nullptr;
  // inner state (W1 doubles as TTT-Linear's W, b1 as its bias) and accumulators
  float *W1 = nullptr, *b1 = nullptr, *W2 = nullptr, *b2 = nullptr;
  float *aW1 = nullptr, *ab1 = nullptr, *aW2 = nullptr, *ab2 = nullptr;
  // Mamba-2: in_proj [D, in_w] (padded), conv1d, the SSM parameters, the gated norm, out_proj
  // [d_inner, D] (padded); the stream state: the convolution's history [K−1, cd] and S [H, P, N].
  float *Win = nullptr, *m_conv_w = nullptr, *m_conv_b = nullptr, *m_hist = nullptr;
  float *dt_bias = nullptr, *A_log = nullptr, *Dskip = nullptr, *m_norm = nullptr, *Wmo = nullptr;
  float* ssm = nullptr;
  // DeltaNet: [W_q | W_k | W_v | W_β | W_a | W_g] in `Wcat` (plan `cat`), o_proj in `Wo`; the three
  // convolutions [3D, K] (q's rows, then k's, then v's), A_log and dt_bias (gated), the output norm
  // [d]; the stream state: the convolutions' history [K−1, 3D] and S [H, d, d].
  float *dn_conv_w = nullptr, *dn_hist = nullptr, *dn_A_log = nullptr, *dn_dt_bias = nullptr,
        *dn_norm = nullptr, *dn_state = nullptr;
  // Titans: [W_q | W_k | W_v | W_θ | W_α | W_η | W_g] in `Wcat`, o_proj in `Wo`, the convolutions,
  // the history and the output norm in the DeltaNet fields above; the gates' biases [3H], ttt_norm's
  // weight and bias [H, d]; the stream state: M, S and M₀ [H, d, d] each.
  float *ti_gate_b = nullptr, *ti_ln_w = nullptr, *ti_ln_b = nullptr, *ti_memory = nullptr,
        *ti_momentum = nullptr, *ti_start = nullptr;
  // LaCT: [W_qkv | W_lr | W_m | W_s] in `Wcat`, o_proj in `Wo`, the attention's ring in kcache,
  // vcache [H, W, d]; qk_scale, qk_offset [D, 2], the biases, ttt_norm [d_f]; the stream state: the
  // fast weights W0, W1, W2 and their momentum [H_f, d_h·d_f] each, the held chunk.
  float *la_qk_scale = nullptr, *la_qk_offset = nullptr, *la_lr_b = nullptr, *la_m_b = nullptr,
        *la_s_b = nullptr, *la_norm = nullptr, *la_row_norms = nullptr, *la_w[3] = {},
        *la_m[3] = {}, *la_chunk = nullptr;
  // Softmax attention: [Wq | Wk | Wv] in `Wcat` (plan `cat`), Wo in `Wo`; the KV cache [H, cap, d] each.
  float *kcache = nullptr, *vcache = nullptr;
  // SwiGLU
  float *ffn_norm = nullptr, *Wgu = nullptr, *Wdown = nullptr;
};

// The sizes the step's products and buffers take, for a model on a GPU of `sms` SMs (shared by the
// decoder and cuda_decode_memory, so that the memory check counts what build() allocates).
struct DecodeShapes {
  GemvPlan cat, o, gu, down, head, in, mo;
  int att_S = 1;
  // Floats per sequence of every buffer that grows with the batch, the KV cache aside; the cache's
  // floats per sequence and token.
  double seq_floats = 0, cache_floats_per_token = 0;
};

int ttt_cat_width(const ModelConfig& mc, const TTTLayerConfig& tc) {
  const int D = mc.hidden_size;
  return D + (tc.share_qk ? 0 : D) + D + (tc.use_gate ? D : 0) +
         (tc.eta.gate == EtaGate::Learned ? mc.num_attention_heads : 0);
}

// [q | k | v | β | α's r | gate]: 3D + H columns, and H + D more for Gated DeltaNet.
int deltanet_cat_width(const ModelConfig& mc) {
  const int D = mc.hidden_size, H = mc.num_attention_heads;
  return 3 * D + H + (mc.seq_layer == SeqLayerKind::GatedDeltaNet ? H + D : 0);
}

// [q | k | v | the rates (3 H_f) | the momentum (H_f, where used) | the output scale (H_f)].
int lact_cat_width(const ModelConfig& mc) {
  const LactLayerConfig lc = mc.lact_config();
  return 3 * mc.hidden_size + (lc.use_momentum ? 5 : 4) * lc.lact_heads;
}

// [q | k | v | θ | α | η | gate]: 4D + 3H columns.
int titans_cat_width(const ModelConfig& mc) { return 4 * mc.hidden_size + 3 * mc.num_attention_heads; }

DecodeShapes decode_shapes(const ModelConfig& mc, long cap, int sms, int splits) {
  DecodeShapes s;
  const int D = mc.hidden_size, F = mc.intermediate_size, V = mc.vocab_size,
            H = mc.num_attention_heads, d = mc.head_dim(), L = mc.num_hidden_layers;
  const int hist = std::max(mc.conv_kernel - 1, 1);
  s.o = detail::gemv_plan(D, D, sms);
  s.gu = detail::gemv_plan(D, 2 * F, sms);
  s.down = detail::gemv_plan(F, D, sms);
  s.head = detail::gemv_plan(D, V, sms);
  auto outputs = [](const GemvPlan& g) {  // the product's output and its partials
    return double(g.ld) + double(g.partial_floats());
  };
  double f = 2.0 * D + outputs(s.gu) + outputs(s.down) + outputs(s.head);
  if (mc.mamba_backbone) f += double(L) * hist * D;
  if (mc.seq_layer == SeqLayerKind::Mamba2) {
    const Mamba2Config m2 = mc.mamba2_config();
    s.in = detail::gemv_plan(D, m2.in_proj_width(), sms);
    s.mo = detail::gemv_plan(m2.d_inner(), D, sms);
    f += m2.conv_dim() + m2.heads() + 2.0 * m2.d_inner() + outputs(s.in) + outputs(s.mo);
    f += double(L) * (double(std::max(m2.d_conv - 1, 1)) * m2.conv_dim() +
                      double(m2.heads()) * m2.headdim * m2.d_state);
  } else if (mc.is_deltanet()) {
    s.cat = detail::gemv_plan(D, deltanet_cat_width(mc), sms);
    // q, k, v after silu, β and α, o_proj's input; the products' outputs.
    f += 3.0 * D + 2.0 * H + D + outputs(s.cat) + outputs(s.o);
    // Per block: the convolutions' history and the state S [H, d, d].
    f += double(L) * (double(hist) * 3 * D + double(H) * d * d);
  } else if (mc.seq_layer == SeqLayerKind::Titans) {
    s.cat = detail::gemv_plan(D, titans_cat_width(mc), sms);
    // q, k, v after silu, o_proj's input; the products' outputs.
    f += 3.0 * D + D + outputs(s.cat) + outputs(s.o);
    // Per block: the convolutions' history and the states M, S, M₀ [H, d, d].
    f += double(L) * (double(hist) * 3 * D + 3.0 * H * d * d);
  } else if (mc.seq_layer == SeqLayerKind::Lact) {
    const LactLayerConfig lc = mc.lact_config();
    const double Hf = lc.lact_heads, df = lc.fw_head_dim(), dh = lc.fw_hidden(), C = lc.chunk_size;
    s.cat = detail::gemv_plan(D, lact_cat_width(mc), sms);
    s.att_S = splits > 0 ? splits : detail::decode_attn_splits(H, lc.window, sms);
    // q, the attention's output, o_proj's input, the splits' partials, the update's per-token
    // vectors [H_f, C, 3 d_h]; the products' outputs.
    f += 3.0 * D + double(H) * s.att_S * (d + 2) + Hf * C * 3 * dh + outputs(s.cat) + outputs(s.o);
    // Per block: the ring [2, W, D], the fast weights and their momentum, the held chunk.
    f += double(L) * (2.0 * lc.window * D + 6.0 * Hf * dh * df + Hf * C * (2 * df + 4));
  } else if (mc.seq_layer == SeqLayerKind::LinearAttention) {
    s.cat = detail::gemv_plan(D, 3 * D, sms);
    f += D + outputs(s.cat) + outputs(s.o);  // the attention's output; the products' outputs
    f += double(L) * H * d * d;               // per block: the state S [H, d, d]
  } else if (mc.seq_layer == SeqLayerKind::SoftmaxAttention) {
    s.cat = detail::gemv_plan(D, 3 * D, sms);
    s.att_S = splits > 0 ? splits : detail::decode_attn_splits(H, cap, sms);
    f += 2.0 * D + outputs(s.cat) + outputs(s.o) + double(H) * s.att_S * (d + 2);
    s.cache_floats_per_token = 2.0 * L * D;
  } else {
    const TTTLayerConfig tc = mc.ttt_layer_config();
    const bool mlp = mc.seq_layer == SeqLayerKind::TTTMLP;
    const int hid = mlp ? tc.inner.mlp_expansion * d : d;
    s.cat = detail::gemv_plan(D, ttt_cat_width(mc, tc), sms);
    f += 6.0 * D + H + outputs(s.cat) + outputs(s.o);
    // The inner state and its accumulators per block.
    double st = double(H) * (double(d) * hid + hid);
    if (mlp) st += double(H) * (double(hid) * d + d);
    f += double(L) * (2.0 * st + (tc.share_qk ? double(hist) * D : 0.0));
  }
  s.seq_floats = f;
  return s;
}

}  // namespace

struct CudaDecoder::Impl {
  CudaDecoderOptions opt;
  int nb = 1;                // sequences in lockstep (opt.batch)
  int* next_dev = nullptr;   // [nb]: the greedy tokens of step_greedy
  int* next_host = nullptr;  // pinned
  // The cuBLAS products (nb > 1 with DecodeProducts::Cublas): the GEMM on the decoder's stream,
  // and the SwiGLU's hidden vectors [nb, F] they read.
  bool blas = false;
  std::unique_ptr<Gemm> gemm;
  float* hidden = nullptr;
  ModelConfig mc;
  TTTLayerConfig tc;
  std::string device_name;
  int cc_major = 0, cc_minor = 0;
  int D = 0, F = 0, V = 0, H = 0, d = 0, b = 0, K = 1, L = 0, hid = 0;
  int off_q = 0, off_k = -1, off_v = 0, off_g = -1, off_lr = -1;  // the TTT projection's columns
  // The steps' period: the mini-batch size b for TTT and Titans (pos = t mod b), 1 for the rest.
  int period = 1;
  bool mlp = false;
  // Mamba-2 (mamba2 true): its sizes (tttlab/seq/mamba2_layer.hpp) and per-token vectors.
  bool mamba2 = false;
  Mamba2Config m2;
  float *xbc = nullptr, *dtv = nullptr, *gm = nullptr, *nm = nullptr, *y_in = nullptr,
        *y_mo = nullptr;
  GemvScratch s_in, s_mo;
  GemvPlan plan_in, plan_mo;
  // DeltaNet and Gated DeltaNet (deltanet true): the layer's sizes and its per-token vectors
  // (q, k, v after silu [3D], β and α [H] each); `Y` is o_proj's input.
  bool deltanet = false;
  DeltaNetConfig dc;
  // Titans (titans true): its sizes; it shares the DeltaNet vectors q, k, v and Y.
  bool titans = false;
  TitansLayerConfig tic;
  // LaCT (lact true): its sizes, the ring's rows (W), the update's per-token vectors; it shares
  // the attention's q, Z, part_o, part_ml, rope_freq and att_S, and Y.
  bool lact = false;
  LactLayerConfig lac;
  // Linear attention (linear true): the state per block in dn_state, the output in Z.
  bool linear = false;
  float* la_scratch = nullptr;
  float *dn_qkv = nullptr, *dn_beta = nullptr, *dn_alpha = nullptr;
  // Softmax attention (attention true): the KV cache's capacity in tokens, the context splits, the
  // RoPE frequencies [d/2] (double), the split partials and the attention output.
  bool attention = false;
  long cap = 0;
  int att_S = 1;
  double* rope_freq = nullptr;
  float *part_o = nullptr, *part_ml = nullptr, *Z = nullptr;
  float eps = 1e-6f, lam_scale = 1.0f;
  long tokens = 0;

  cudaStream_t stream = nullptr;
  std::vector<std::unique_ptr<DeviceFloats>> storage;
  std::vector<DecBlock> blocks;
  float *embed = nullptr, *embed_t = nullptr, *final_norm = nullptr, *rope_cos = nullptr, *rope_sin = nullptr;
  // scratch, shared by all blocks (one stream: used in order)
  float *h = nullptr, *a = nullptr, *q = nullptr, *k = nullptr, *v = nullptr, *gpre = nullptr, *lam = nullptr;
  float *O = nullptr, *Y = nullptr;
  // The products' outputs ([ld] each; y_head holds the logits) and scratch.
  float *y_cat = nullptr, *y_o = nullptr, *y_gu = nullptr, *y_down = nullptr, *y_head = nullptr;
  GemvScratch s_cat, s_o, s_gu, s_down, s_head;
  GemvPlan plan_o, plan_gu, plan_down, plan_head;
  int* token_dev = nullptr;
  int* token_host = nullptr;  // pinned
  std::size_t token_host_cap = 0;
  float* logits_host = nullptr;  // pinned
  std::vector<cudaGraphExec_t> graphs;

  ~Impl() {
    gemm.reset();  // before its workspace (in storage) and its stream go
    for (auto g : graphs)
      if (g) cudaGraphExecDestroy(g);
    if (token_dev) cudaFree(token_dev);
    if (next_dev) cudaFree(next_dev);
    if (next_host) cudaFreeHost(next_host);
    if (token_host) cudaFreeHost(token_host);
    if (logits_host) cudaFreeHost(logits_host);
    storage.clear();
    if (stream) cudaStreamDestroy(stream);
  }

  float* alloc(std::size_t n) {
    storage.push_back(std::make_unique<DeviceFloats>(n));
    return storage.back()->get();
  }
  float* upload(const std::vector<float>& host) {
    float* p = alloc(host.size());
    if (!host.empty())
      TTTLAB_CUDA_CHECK(cudaMemcpy(p, host.data(), host.size() * sizeof(float), cudaMemcpyHostToDevice));
    return p;
  }
  float* zeros(std::size_t n) {
    float* p = alloc(n);
    TTTLAB_CUDA_CHECK(cudaMemset(p, 0, std::max<std::size_t>(n, 1) * sizeof(float)));
    return p;
  }
  // A [K, N] matrix (row-major, host) uploaded with the plan's row stride ld ≥ N, zero-padded.
  float* upload_padded(const float* host, const GemvPlan& g) {
    std::vector<float> m(std::size_t(g.K) * g.ld, 0.0f);
    for (int r = 0; r < g.K; ++r)
      std::copy(host + std::size_t(r) * g.N, host + std::size_t(r + 1) * g.N, m.begin() + std::size_t(r) * g.ld);
    return upload(m);
  }
  GemvScratch scratch(const GemvPlan& g) {
    GemvScratch sc;
    if (blas) return sc;  // the cuBLAS products need no partials
    sc.part = zeros(nb == 1 ? g.partial_floats() : detail::batch_gemv_partial_floats(g, nb));
    static_assert(sizeof(unsigned) == sizeof(float));
    sc.counters = reinterpret_cast<unsigned*>(  // all-zero bits: 0u
        zeros(nb == 1 ? std::size_t(g.tiles) : detail::batch_gemv_counters(g, nb)));
    return sc;
  }
  // nb copies of a per-sequence vector (an initial state).
  float* upload_each(const std::vector<float>& one) {
    std::vector<float> all(one.size() * std::size_t(nb));
    for (int s = 0; s < nb; ++s) std::copy(one.begin(), one.end(), all.begin() + one.size() * s);
    return upload(all);
  }
  // y[nb, ld] = x[nb, K]·W (rows of x with stride ldx): the batch-1 kernel at nb = 1.
  void gemv(const GemvPlan& g, const float* x, int ldx, const float* W, GemvScratch sc, float* y,
            bool swiglu = false) {
    if (blas) {
      if (swiglu) {
        detail::decode_swiglu_rows(x, ldx, g.K, hidden, nb, stream);
        x = hidden;
        ldx = g.K;
      }
      // Y [nb, N] (row stride ld; the padding columns stay zero) = X [nb, K]·W [K, N] (stride ld).
      (*gemm)(false, false, nb, g.N, g.K, 1.0f, x, ldx, W, g.ld, 0.0f, y, g.ld);
    } else if (nb == 1) {
      if (swiglu)
        detail::decode_gemv_swiglu(g, x, W, sc, y, stream);
      else
        detail::decode_gemv(g, x, W, sc, y, stream);
    } else {
      detail::decode_gemv_batch(g, nb, swiglu, x, ldx, W, sc, y, stream);
    }
  }
  // A product's output [nb, ld] as the row kernels read it.
  static Partials out(const float* y, const GemvPlan& g) { return Partials{y, 1, g.ld, g.ld}; }
  void run_steps(std::span<const int> tokens);
  void build(const Model<float>& model);
  void build_ttt_block(const std::map<std::string, HostTensor>& T, const std::string& sb,
                       const GemvPlan& plan_cat, DecBlock& B);
  void build_mamba2_block(const std::map<std::string, HostTensor>& T, const std::string& sb,
                          DecBlock& B);
  void build_deltanet_block(const std::map<std::string, HostTensor>& T, const std::string& sb,
                            const GemvPlan& plan_cat, DecBlock& B);
  void enqueue_ttt(const DecBlock& B, int pos);
  void enqueue_mamba2(const DecBlock& B);
  void enqueue_deltanet(const DecBlock& B);
  // The q, k, v short convolutions [3D, K] (DeltaNet's and Titans' blocks), their history and the
  // output norm, into the DeltaNet fields of B.
  void build_short_conv(const std::map<std::string, HostTensor>& T, const std::string& sb,
                        DecBlock& B);
  void build_titans_block(const std::map<std::string, HostTensor>& T, const std::string& sb,
                          const GemvPlan& plan_cat, DecBlock& B);
  void enqueue_titans(const DecBlock& B, int pos);
  void build_lact_block(const std::map<std::string, HostTensor>& T, const std::string& sb,
                        const GemvPlan& plan_cat, DecBlock& B);
  void enqueue_lact(const DecBlock& B);
  void enqueue_attention(const DecBlock& B);
  // q, k, v at columns 0, D, 2D of P: RoPE at t, k and v into B's cache of `rows` rows (a ring
  // when ring > 0), the softmax over it into Z. Softmax attention's mixer and LaCT's window.
  void cached_attention(const DecBlock& B, const Partials& P, int rows, int ring);
  void enqueue_linear_attention(const DecBlock& B);
  void plan_memory(long requested, const DecodeShapes& shapes, double weight_bytes);
  void enqueue_step(int pos);
  void run_step(int pos);
};

namespace {

// The model's tensors by their state_dict names. Model::for_each_param is not const (optimisers
// write through it); the decoder only reads.
std::map<std::string, HostTensor> tensors_of(const Model<float>& model) {
  std::map<std::string, HostTensor> m;
  const_cast<Model<float>&>(model).for_each_param([&](Eigen::Map<Mat<float>> t, const std::string& name) {
    m[name] = HostTensor{t.data(), static_cast<long>(t.rows()), static_cast<long>(t.cols())};
  });
  return m;
}

const HostTensor& need(const std::map<std::string, HostTensor>& m, const std::string& name, long size) {
  const auto it = m.find(name);
  if (it == m.end()) throw std::invalid_argument("CudaDecoder: the model has no tensor " + name);
  if (it->second.rows * it->second.cols != size)
    throw std::invalid_argument("CudaDecoder: tensor " + name + " has " +
                                std::to_string(it->second.rows * it->second.cols) + " elements, expected " +
                                std::to_string(size));
  return it->second;
}

std::vector<float> copy_of(const HostTensor& t) {
  return std::vector<float>(t.data, t.data + t.rows * t.cols);
}

// One product's weight [D, ncat] (row-major: row r holds input feature r's weights to every
// column), filled block by block from the model's [D, cols] ([in, out]) tensors: a layer's
// projections concatenated so that one pass over the input makes them all.
struct ColumnBlocks {
  int D, ncat;
  std::vector<float> w;
  ColumnBlocks(int D_, int ncat_) : D(D_), ncat(ncat_), w(std::size_t(D_) * ncat_, 0.0f) {}
  void put(const HostTensor& t, int cols, int off) {
    for (int r = 0; r < D; ++r)
      std::copy(t.data + std::size_t(r) * cols, t.data + std::size_t(r + 1) * cols,
                w.begin() + std::size_t(r) * ncat + off);
  }
};

}  // namespace

void CudaDecoder::Impl::build(const Model<float>& model) {
  mc = model.config();
  if (const std::string why = cuda_decode_unsupported(mc); !why.empty()) throw std::invalid_argument(why);
  mamba2 = mc.seq_layer == SeqLayerKind::Mamba2;
  attention = mc.seq_layer == SeqLayerKind::SoftmaxAttention;
  deltanet = mc.is_deltanet();
  titans = mc.seq_layer == SeqLayerKind::Titans;
  lact = mc.seq_layer == SeqLayerKind::Lact;
  linear = mc.seq_layer == SeqLayerKind::LinearAttention;
  D = mc.hidden_size;
  F = mc.intermediate_size;
  V = mc.vocab_size;
  H = mc.num_attention_heads;
  d = mc.head_dim();
  b = mc.mini_batch_size;
  K = mc.conv_kernel;
  L = mc.num_hidden_layers;
  eps = float(mc.rms_norm_eps);
  if (opt.batch < 1 || opt.batch > k_decode_max_batch)
    throw std::invalid_argument("CudaDecoder: batch must be in 1.." +
                                std::to_string(k_decode_max_batch) + ", got " +
                                std::to_string(opt.batch));
  nb = opt.batch;
  if (mamba2) {
    m2 = mc.mamba2_config();
    period = 1;
  } else if (deltanet) {
    dc = mc.deltanet_config();
    period = 1;  // the step has no position
  } else if (titans) {
    tic = mc.titans_config();
    period = tic.mini_batch;  // M₀ ← M after the token at pos = b − 1
  } else if (lact) {
    lac = mc.lact_config();
    period = 1;  // t is read from device memory
  } else if (linear) {
    period = 1;  // the step has no position
  } else if (attention) {
    // The position is read from device memory, so one graph serves every token.
    period = 1;
    if (opt.max_context < 0 || opt.max_context > k_max_positions)
      throw std::invalid_argument("CudaDecoder: max_context must be in 0.." +
                                  std::to_string(k_max_positions) + ", got " +
                                  std::to_string(opt.max_context));
    if (opt.attention_splits < 0 || opt.attention_splits > 65535)
      throw std::invalid_argument("CudaDecoder: attention_splits must be in 0..65535, got " +
                                  std::to_string(opt.attention_splits));
  } else {
    tc = mc.ttt_layer_config();
    mlp = mc.seq_layer == SeqLayerKind::TTTMLP;
    hid = mlp ? tc.inner.mlp_expansion * d : d;
    if (mlp && tc.inner.mlp_expansion != 4)
      throw std::invalid_argument(
          "CudaDecoder: the GPU's TTT-MLP decode needs a hidden width of 4d");
    lam_scale = float(tc.eta.base_lr) / float(d);
    period = b;
  }

  TTTLAB_CUDA_CHECK(cudaSetDevice(opt.device));
  cudaDeviceProp prop{};
  TTTLAB_CUDA_CHECK(cudaGetDeviceProperties(&prop, opt.device));
  device_name = prop.name;
  cc_major = prop.major;
  cc_minor = prop.minor;
  const int sms = prop.multiProcessorCount;
  TTTLAB_CUDA_CHECK(cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking));
  blas = nb > 1 && opt.products == DecodeProducts::Cublas;

  const auto T = tensors_of(model);
  // The largest split count a cache may get bounds the per-sequence scratch of the memory check.
  const DecodeShapes shapes = decode_shapes(mc, k_max_positions, sms, opt.attention_splits);
  plan_o = shapes.o;
  plan_gu = shapes.gu;
  plan_down = shapes.down;
  plan_head = shapes.head;
  // The weights as uploaded: every parameter once, the transposed embedding (padded) besides.
  const double weight_bytes = 4.0 * (count_params(mc) + double(plan_head.K) * plan_head.ld);
  plan_memory(opt.max_context, shapes, weight_bytes);
  const HostTensor& E = need(T, "model.embed_tokens.weight", long(V) * D);
  embed = upload(copy_of(E));
  std::vector<float> Et(std::size_t(D) * V);
  for (int vv = 0; vv < V; ++vv)
    for (int c = 0; c < D; ++c) Et[std::size_t(c) * V + vv] = E.data[std::size_t(vv) * D + c];
  embed_t = upload_padded(Et.data(), plan_head);
  final_norm = upload(copy_of(need(T, "model.norm.weight", D)));
  if (attention || lact) {
    // θ_m = rope_theta^(−2m/d) in double, as the CPU's rope_apply computes it.
    std::vector<double> fr(std::size_t(d / 2));
    for (int m = 0; m < d / 2; ++m) fr[m] = std::pow(mc.rope_theta, -2.0 * double(m) / double(d));
    rope_freq = reinterpret_cast<double*>(alloc(fr.size() * 2));
    TTTLAB_CUDA_CHECK(
        cudaMemcpy(rope_freq, fr.data(), fr.size() * sizeof(double), cudaMemcpyHostToDevice));
  } else if (!mamba2 && !deltanet && !titans && !lact && !linear && tc.rope) {
    std::vector<float> cs(std::size_t(b) * (d / 2)), sn(cs.size());
    rope_tables(d, b, tc.rope_theta, cs.data(), sn.data());
    rope_cos = upload(cs);
    rope_sin = upload(sn);
  }

  // Projection columns of a TTT layer: q (or the shared u), k (without share_qk), v, the gate, θ_lr.
  GemvPlan plan_cat;
  if (deltanet || titans || lact) {
    plan_cat = shapes.cat;
  } else if (attention || linear) {
    off_q = 0;
    off_k = D;
    off_v = 2 * D;
    plan_cat = detail::gemv_plan(D, 3 * D, sms);
  } else if (!mamba2) {
    int ncat = 0;
    off_q = ncat;
    ncat += D;
    off_k = tc.share_qk ? -1 : ncat;
    if (!tc.share_qk) ncat += D;
    off_v = ncat;
    ncat += D;
    off_g = tc.use_gate ? ncat : -1;
    if (tc.use_gate) ncat += D;
    off_lr = tc.eta.gate == EtaGate::Learned ? ncat : -1;
    if (off_lr >= 0) ncat += H;
    plan_cat = shapes.cat;
    if (plan_cat.N != ncat) throw std::logic_error("CudaDecoder: projection width mismatch");
  } else {
    plan_in = detail::gemv_plan(D, m2.in_proj_width(), sms);
    plan_mo = detail::gemv_plan(m2.d_inner(), D, sms);
  }

  for (int i = 0; i < L; ++i) {
    const std::string pre = "model.layers." + std::to_string(i) + ".";
    const std::string sb = pre + "seq_modeling_block.";
    DecBlock B;
    if (mc.mamba_backbone) {
      B.conv_norm = upload(copy_of(need(T, pre + "conv.norm.weight", D)));
      B.conv_w = upload(copy_of(need(T, pre + "conv.conv.weight", long(D) * K)));
      B.conv_b = upload(copy_of(need(T, pre + "conv.conv.bias", D)));
      B.hist_pre = zeros(std::size_t(nb) * std::max(K - 1, 1) * D);
    }
    B.seq_norm = upload(copy_of(need(T, pre + "seq_norm.weight", D)));
    if (mamba2) {
      build_mamba2_block(T, sb, B);
    } else if (deltanet) {
      build_deltanet_block(T, sb, plan_cat, B);
    } else if (titans) {
      build_titans_block(T, sb, plan_cat, B);
    } else if (lact) {
      build_lact_block(T, sb, plan_cat, B);
    } else if (attention || linear) {
      std::vector<float> cat(std::size_t(D) * 3 * D);
      const char* names[3] = {"q_proj.weight", "k_proj.weight", "v_proj.weight"};
      for (int w = 0; w < 3; ++w) {
        const HostTensor& t = need(T, sb + names[w], long(D) * D);  // [in, out]
        for (int r = 0; r < D; ++r)
          std::copy(t.data + std::size_t(r) * D, t.data + std::size_t(r + 1) * D,
                    cat.begin() + std::size_t(r) * 3 * D + std::size_t(w) * D);
      }
      B.cat = plan_cat;
      B.Wcat = upload_padded(cat.data(), plan_cat);
      B.Wo = upload_padded(need(T, sb + "o_proj.weight", long(D) * D).data, plan_o);
      if (linear) B.dn_state = zeros(std::size_t(nb) * H * d * d);  // S_0 = 0
    } else
      build_ttt_block(T, sb, plan_cat, B);
    B.ffn_norm = upload(copy_of(need(T, pre + "ffn_norm.weight", D)));
    const HostTensor& wg = need(T, pre + "mlp.gate_proj.weight", long(D) * F);
    const HostTensor& wu = need(T, pre + "mlp.up_proj.weight", long(D) * F);
    std::vector<float> gu(std::size_t(D) * 2 * F);
    for (int r = 0; r < D; ++r)
      for (int c = 0; c < F; ++c) {
        gu[std::size_t(r) * 2 * F + c] = wg.data[std::size_t(r) * F + c];
        gu[std::size_t(r) * 2 * F + F + c] = wu.data[std::size_t(r) * F + c];
      }
    B.Wgu = upload_padded(gu.data(), plan_gu);
    B.Wdown = upload_padded(need(T, pre + "mlp.down_proj.weight", long(F) * D).data, plan_down);
    blocks.push_back(B);
  }

  const std::size_t n = std::size_t(nb);
  h = zeros(n * D);
  a = zeros(n * D);
  if (mamba2) {
    xbc = zeros(n * m2.conv_dim());
    dtv = zeros(n * m2.heads());
    gm = zeros(n * m2.d_inner());
    nm = zeros(n * m2.d_inner());
    y_in = zeros(n * plan_in.ld);
    y_mo = zeros(n * plan_mo.ld);
    s_in = scratch(plan_in);
    s_mo = scratch(plan_mo);
  } else if (deltanet || titans) {
    dn_qkv = zeros(n * 3 * D);
    if (deltanet) {
      dn_beta = zeros(n * H);
      dn_alpha = zeros(n * H);
    }
    Y = zeros(n * D);
    y_cat = zeros(n * plan_cat.ld);
    y_o = zeros(n * plan_o.ld);
    s_cat = scratch(plan_cat);
    s_o = scratch(plan_o);
  } else if (linear) {
    Z = zeros(n * D);
    y_cat = zeros(n * plan_cat.ld);
    y_o = zeros(n * plan_o.ld);
    s_cat = scratch(plan_cat);
    s_o = scratch(plan_o);
  } else if (lact) {
    q = zeros(n * D);
    Z = zeros(n * D);
    Y = zeros(n * D);
    y_cat = zeros(n * plan_cat.ld);
    y_o = zeros(n * plan_o.ld);
    s_cat = scratch(plan_cat);
    s_o = scratch(plan_o);
    att_S = shapes.att_S;
    part_o = zeros(n * H * att_S * d);
    part_ml = zeros(n * H * att_S * 2);
    la_scratch = zeros(n * lac.lact_heads * lac.chunk_size * 3 * lac.fw_hidden());
  } else if (attention) {
    q = zeros(n * D);
    Z = zeros(n * D);
    y_cat = zeros(n * plan_cat.ld);
    y_o = zeros(n * plan_o.ld);
    s_cat = scratch(plan_cat);
    s_o = scratch(plan_o);
    att_S =
        opt.attention_splits > 0 ? opt.attention_splits : detail::decode_attn_splits(H, cap, sms);
    part_o = zeros(n * H * att_S * d);
    part_ml = zeros(n * H * att_S * 2);
    // Every row the step reads is written first (row t at token t); the caches are cleared anyway,
    // so that rows passed over by skip_for_bench hold zeros, not leftovers.
    for (DecBlock& B : blocks) {
      B.kcache = zeros(n * H * cap * d);
      B.vcache = zeros(n * H * cap * d);
    }
  } else {
    q = zeros(n * D);
    k = zeros(n * D);
    v = zeros(n * D);
    gpre = zeros(n * D);
    lam = zeros(n * H);
    O = zeros(n * D);
    Y = zeros(n * D);
    y_cat = zeros(n * plan_cat.ld);
    y_o = zeros(n * plan_o.ld);
    s_cat = scratch(plan_cat);
    s_o = scratch(plan_o);
  }
  y_gu = zeros(n * plan_gu.ld);
  y_down = zeros(n * plan_down.ld);
  y_head = zeros(n * plan_head.ld);
  s_gu = scratch(plan_gu);
  s_down = scratch(plan_down);
  s_head = scratch(plan_head);
  if (blas) {
    hidden = zeros(n * F);
    gemm = std::make_unique<Gemm>(stream, GemmPrecision::Fp32);
    // cuBLAS's recommended workspace on Hopper; ours, so that a capture allocates nothing.
    constexpr std::size_t kWorkspaceBytes = std::size_t(32) << 20;
    gemm->set_workspace(alloc(kWorkspaceBytes / sizeof(float)), kWorkspaceBytes);
  }
  // [nb tokens | the position]: the step reads both from device memory.
  TTTLAB_CUDA_CHECK(cudaMalloc(reinterpret_cast<void**>(&token_dev), (n + 1) * sizeof(int)));
  TTTLAB_CUDA_CHECK(cudaMalloc(reinterpret_cast<void**>(&next_dev), n * sizeof(int)));
  TTTLAB_CUDA_CHECK(cudaMallocHost(reinterpret_cast<void**>(&next_host), n * sizeof(int)));
  TTTLAB_CUDA_CHECK(
      cudaMallocHost(reinterpret_cast<void**>(&logits_host), n * std::size_t(V) * sizeof(float)));
  graphs.assign(period, nullptr);
  if (blas) {
    // One eager product of every shape before any capture: cuBLAS loads its kernels and chooses
    // them here, outside a graph, and the captures record the same choices. On scratch operands
    // (zeros), freed below after the device is done with them.
    std::vector<GemvPlan> plans{plan_o, plan_gu, plan_down, plan_head};
    if (mamba2) {
      plans.push_back(plan_in);
      plans.push_back(plan_mo);
    } else {
      plans.push_back(plan_cat);
    }
    std::size_t xk = 0, wn = 0, yn = 0;
    for (const GemvPlan& g : plans) {
      xk = std::max<std::size_t>(xk, g.K);
      wn = std::max<std::size_t>(wn, std::size_t(g.K) * g.ld);
      yn = std::max<std::size_t>(yn, g.ld);
    }
    const DeviceFloats x(n * xk), w(wn), y(n * yn);
    TTTLAB_CUDA_CHECK(cudaMemsetAsync(x.get(), 0, n * xk * sizeof(float), stream));
    TTTLAB_CUDA_CHECK(cudaMemsetAsync(w.get(), 0, wn * sizeof(float), stream));
    for (const GemvPlan& g : plans)
      (*gemm)(false, false, nb, g.N, g.K, 1.0f, x.get(), g.K, w.get(), g.ld, 0.0f, y.get(), g.ld);
    TTTLAB_CUDA_CHECK(cudaStreamSynchronize(stream));
  }
  TTTLAB_CUDA_CHECK(cudaDeviceSynchronize());
}

// The KV cache's capacity (softmax attention): `requested` tokens, or (0) the default of
// max(32768, max_position_embeddings) tokens, fewer where half the free device memory (after the
// weights and the other buffers) holds fewer, at least 256. Then everything the decoder allocates
// (weights, nb sequences' buffers and states, the cache) is checked against the free memory before
// anything is allocated.
void CudaDecoder::Impl::plan_memory(long requested, const DecodeShapes& sh, double weight_bytes) {
  std::size_t free_b = 0, total_b = 0;
  TTTLAB_CUDA_CHECK(cudaMemGetInfo(&free_b, &total_b));
  const double gib = 1024.0 * 1024.0 * 1024.0, reserve = 256.0 * 1024 * 1024;
  const double seq = 4.0 * sh.seq_floats * nb;                    // every sequence's buffers
  const double per_token = 4.0 * sh.cache_floats_per_token * nb;  // K and V of every block
  auto fmt = [](double x) {
    char buf[32];
    std::snprintf(buf, sizeof buf, "%.2f", x);
    return std::string(buf);
  };
  const std::string who = nb > 1 ? " for " + std::to_string(nb) + " sequences" : std::string();
  if (attention && requested == 0) {
    const double room = double(free_b) - weight_bytes - seq;
    const long fit = room > 0 ? long(0.5 * room / per_token) / 256 * 256 : 0;
    cap = std::min<long>(std::max<long>(32768, mc.max_position_embeddings), fit);
    if (cap < 256)
      throw std::runtime_error("CudaDecoder: the KV cache" + who + " (" + fmt(per_token / 1024.0) +
                               " KiB per token) does not fit 256 tokens in half of the " +
                               fmt(room / gib) + " GiB free on the device");
  } else if (attention) {
    cap = requested;
  }
  const double cache = attention ? per_token * double(cap) : 0.0;
  const double need = weight_bytes + seq + cache;
  if (need + reserve > double(free_b)) {
    std::string what = "CudaDecoder: ";
    if (attention)
      what += "a KV cache of " + std::to_string(cap) + " tokens" + who + " needs " +
              fmt(cache / gib) + " GiB (2 x " + std::to_string(L) + " blocks x " +
              std::to_string(D) + " floats per token per sequence) and the rest " +
              fmt((weight_bytes + seq) / gib) + " GiB";
    else
      what += "the weights and the states" + who + " need " + fmt(need / gib) + " GiB";
    throw std::runtime_error(what + ", but the device has " + fmt(double(free_b) / gib) +
                             " GiB free (256 MiB kept back); ask for a smaller " +
                             (attention ? "max_context or batch" : "batch"));
  }
}

void CudaDecoder::Impl::build_ttt_block(const std::map<std::string, HostTensor>& T,
                                        const std::string& sb, const GemvPlan& plan_cat,
                                        DecBlock& B) {
  const int ncat = plan_cat.N;
  // [D, ncat]: row k holds input feature k's weights to every projection column.
  std::vector<float> cat(std::size_t(D) * ncat, 0.0f);
  auto put = [&](const HostTensor& t, int off) {  // t [D, D] ([in, out])
    for (int r = 0; r < D; ++r)
      for (int c = 0; c < D; ++c)
        cat[std::size_t(r) * ncat + off + c] = t.data[std::size_t(r) * D + c];
  };
  put(need(T, sb + "q_proj.weight", long(D) * D), off_q);
  if (!tc.share_qk) put(need(T, sb + "k_proj.weight", long(D) * D), off_k);
  put(need(T, sb + "v_proj.weight", long(D) * D), off_v);
  if (tc.use_gate) put(need(T, sb + "g_proj.weight", long(D) * D), off_g);
  if (off_lr >= 0) {
    const HostTensor& lw = need(T, sb + "learnable_ttt_lr_weight", long(H) * D);  // [H, D]
    for (int hh = 0; hh < H; ++hh)
      for (int r = 0; r < D; ++r)
        cat[std::size_t(r) * ncat + off_lr + hh] = lw.data[std::size_t(hh) * D + r];
    B.lr_b = upload(copy_of(need(T, sb + "learnable_ttt_lr_bias", H)));
  }
  B.cat = plan_cat;
  B.Wcat = upload_padded(cat.data(), plan_cat);
  B.off_q = off_q;
  B.off_k = off_k;
  B.off_v = off_v;
  B.off_g = off_g;
  B.off_lr = off_lr;
  if (tc.share_qk) {
    B.conv_q_w = upload(copy_of(need(T, sb + "conv_q.weight", long(D) * K)));
    B.conv_q_b = upload(copy_of(need(T, sb + "conv_q.bias", D)));
    B.conv_k_w = upload(copy_of(need(T, sb + "conv_k.weight", long(D) * K)));
    B.conv_k_b = upload(copy_of(need(T, sb + "conv_k.bias", D)));
    B.hist_qk = zeros(std::size_t(nb) * std::max(K - 1, 1) * D);
  }
  // τ exactly as the CPU layer computes it (float, from δ).
  const HostTensor& delta = need(T, sb + "learnable_token_idx", b);
  RowVec<float> dv(b);
  for (int j = 0; j < b; ++j) dv(j) = delta.data[j];
  const Vec<float> tau = token_index_scale<float>(tc.eta, dv);
  B.tau = upload(std::vector<float>(tau.data(), tau.data() + b));
  B.ln_w = upload(copy_of(need(T, sb + "ttt_norm_weight", long(H) * d)));
  B.ln_b = upload(copy_of(need(T, sb + "ttt_norm_bias", long(H) * d)));
  if (tc.post_norm) {
    B.post_w = upload(copy_of(need(T, sb + "post_norm.weight", D)));
    B.post_b = upload(copy_of(need(T, sb + "post_norm.bias", D)));
  }
  B.Wo = upload_padded(need(T, sb + "o_proj.weight", long(D) * D).data, plan_o);
  // The inner state starts at W0 (per head, [H, d, hid] etc.); biases stay 0 with bias off.
  std::vector<float> w1(std::size_t(H) * d * hid), b1(std::size_t(H) * hid, 0.0f);
  std::vector<float> w2(mlp ? std::size_t(H) * hid * d : 0), b2(mlp ? std::size_t(H) * d : 0, 0.0f);
  for (int hh = 0; hh < H; ++hh) {
    // Appended rather than `"[" + std::to_string(hh)`: GCC 12 warns falsely (-Wrestrict) on that form.
    std::string idx = "[";
    idx += std::to_string(hh);
    idx += ']';
    const HostTensor& W1 = need(T, sb + "W1" + idx, long(d) * hid);
    std::copy(W1.data, W1.data + std::size_t(d) * hid, w1.begin() + std::size_t(hh) * d * hid);
    if (tc.inner.bias) {
      const HostTensor& bb = need(T, sb + "b1" + idx, hid);
      std::copy(bb.data, bb.data + hid, b1.begin() + std::size_t(hh) * hid);
    }
    if (mlp) {
      const HostTensor& W2 = need(T, sb + "W2" + idx, long(hid) * d);
      std::copy(W2.data, W2.data + std::size_t(hid) * d, w2.begin() + std::size_t(hh) * hid * d);
      if (tc.inner.bias) {
        const HostTensor& bb = need(T, sb + "b2" + idx, d);
        std::copy(bb.data, bb.data + d, b2.begin() + std::size_t(hh) * d);
      }
    }
  }
  // One state per sequence, each starting at W0.
  B.W1 = upload_each(w1);
  B.b1 = upload_each(b1);
  B.aW1 = zeros(nb * w1.size());
  B.ab1 = zeros(nb * b1.size());
  if (mlp) {
    B.W2 = upload_each(w2);
    B.b2 = upload_each(b2);
    B.aW2 = zeros(nb * w2.size());
    B.ab2 = zeros(nb * b2.size());
  }
}

void CudaDecoder::Impl::build_mamba2_block(const std::map<std::string, HostTensor>& T,
                                           const std::string& sb, DecBlock& B) {
  const int di = m2.d_inner(), cd = m2.conv_dim(), Hm = m2.heads(), Km = m2.d_conv;
  B.Win = upload_padded(need(T, sb + "in_proj.weight", long(D) * m2.in_proj_width()).data, plan_in);
  B.m_conv_w = upload(copy_of(need(T, sb + "conv1d.weight", long(cd) * Km)));
  B.m_conv_b = upload(copy_of(need(T, sb + "conv1d.bias", cd)));
  B.m_hist = zeros(std::size_t(nb) * std::max(Km - 1, 1) * cd);
  B.dt_bias = upload(copy_of(need(T, sb + "dt_bias", Hm)));
  B.A_log = upload(copy_of(need(T, sb + "A_log", Hm)));
  B.Dskip = upload(copy_of(need(T, sb + "D", Hm)));
  B.m_norm = upload(copy_of(need(T, sb + "norm.weight", di)));
  B.Wmo = upload_padded(need(T, sb + "out_proj.weight", long(di) * D).data, plan_mo);
  B.ssm = zeros(std::size_t(nb) * Hm * m2.headdim * m2.d_state);
}

void CudaDecoder::Impl::build_short_conv(const std::map<std::string, HostTensor>& T,
                                         const std::string& sb, DecBlock& B) {
  const int W = 3 * D;
  std::vector<float> conv(std::size_t(W) * K);
  const char* convs[3] = {"q_conv1d.weight", "k_conv1d.weight", "v_conv1d.weight"};
  for (int w = 0; w < 3; ++w) {
    const HostTensor& t = need(T, sb + convs[w], long(D) * K);  // [D, K]
    std::copy(t.data, t.data + std::size_t(D) * K, conv.begin() + std::size_t(w) * D * K);
  }
  B.dn_conv_w = upload(conv);
  B.dn_hist = zeros(std::size_t(nb) * std::max(K - 1, 1) * W);
  B.dn_norm = upload(copy_of(need(T, sb + "o_norm.weight", d)));
}

void CudaDecoder::Impl::build_deltanet_block(const std::map<std::string, HostTensor>& T,
                                             const std::string& sb, const GemvPlan& plan_cat,
                                             DecBlock& B) {
  const int ncat = plan_cat.N, W = 3 * D, off_b = W, off_a = W + H, off_g = W + 2 * H;
  ColumnBlocks cat(D, ncat);
  cat.put(need(T, sb + "q_proj.weight", long(D) * D), D, 0);
  cat.put(need(T, sb + "k_proj.weight", long(D) * D), D, D);
  cat.put(need(T, sb + "v_proj.weight", long(D) * D), D, 2 * D);
  cat.put(need(T, sb + "b_proj.weight", long(D) * H), H, off_b);
  if (dc.gated) {
    cat.put(need(T, sb + "a_proj.weight", long(D) * H), H, off_a);
    cat.put(need(T, sb + "g_proj.weight", long(D) * D), D, off_g);
    B.dn_A_log = upload(copy_of(need(T, sb + "A_log", H)));
    B.dn_dt_bias = upload(copy_of(need(T, sb + "dt_bias", H)));
  }
  B.cat = plan_cat;
  B.Wcat = upload_padded(cat.w.data(), plan_cat);
  build_short_conv(T, sb, B);
  B.Wo = upload_padded(need(T, sb + "o_proj.weight", long(D) * D).data, plan_o);
  B.dn_state = zeros(std::size_t(nb) * H * d * d);  // S_0 = 0
}

void CudaDecoder::Impl::build_titans_block(const std::map<std::string, HostTensor>& T,
                                           const std::string& sb, const GemvPlan& plan_cat,
                                           DecBlock& B) {
  const int ncat = plan_cat.N, W = 3 * D, off_gates = W, off_gate = W + 3 * H;
  ColumnBlocks cat(D, ncat);
  cat.put(need(T, sb + "q_proj.weight", long(D) * D), D, 0);
  cat.put(need(T, sb + "k_proj.weight", long(D) * D), D, D);
  cat.put(need(T, sb + "v_proj.weight", long(D) * D), D, 2 * D);
  const char* gates[3] = {"theta_proj", "alpha_proj", "eta_proj"};
  std::vector<float> bias(std::size_t(3) * H);
  for (int i = 0; i < 3; ++i) {
    cat.put(need(T, sb + gates[i] + ".weight", long(D) * H), H, off_gates + i * H);
    const HostTensor& bt = need(T, sb + gates[i] + ".bias", H);
    std::copy(bt.data, bt.data + H, bias.begin() + std::size_t(i) * H);
  }
  cat.put(need(T, sb + "g_proj.weight", long(D) * D), D, off_gate);
  B.cat = plan_cat;
  B.Wcat = upload_padded(cat.w.data(), plan_cat);
  build_short_conv(T, sb, B);
  B.ti_gate_b = upload(bias);
  B.ti_ln_w = upload(copy_of(need(T, sb + "ttt_norm.weight", long(H) * d)));
  B.ti_ln_b = upload(copy_of(need(T, sb + "ttt_norm.bias", long(H) * d)));
  B.Wo = upload_padded(need(T, sb + "o_proj.weight", long(D) * D).data, plan_o);
  const std::size_t states = std::size_t(nb) * H * d * d;  // M₀ = M = 0, S = 0
  B.ti_memory = zeros(states);
  B.ti_momentum = zeros(states);
  B.ti_start = zeros(states);
}

void CudaDecoder::Impl::build_lact_block(const std::map<std::string, HostTensor>& T,
                                         const std::string& sb, const GemvPlan& plan_cat,
                                         DecBlock& B) {
  const int ncat = plan_cat.N, Hf = lac.lact_heads, df = lac.fw_head_dim(), dh = lac.fw_hidden();
  const int off_lr = 3 * D, off_m = off_lr + 3 * Hf, off_s = off_m + (lac.use_momentum ? Hf : 0);
  ColumnBlocks cat(D, ncat);
  cat.put(need(T, sb + "qkv.weight", long(D) * 3 * D), 3 * D, 0);
  cat.put(need(T, sb + "lr_proj.weight", long(D) * 3 * Hf), 3 * Hf, off_lr);
  if (lac.use_momentum) {
    cat.put(need(T, sb + "momentum_proj.0.weight", long(D) * Hf), Hf, off_m);
    B.la_m_b = upload(copy_of(need(T, sb + "momentum_proj.0.bias", Hf)));
  }
  cat.put(need(T, sb + "ttt_scale_proj.weight", long(D) * Hf), Hf, off_s);
  B.cat = plan_cat;
  B.Wcat = upload_padded(cat.w.data(), plan_cat);
  B.la_qk_scale = upload(copy_of(need(T, sb + "qk_scale", long(D) * 2)));
  B.la_qk_offset = upload(copy_of(need(T, sb + "qk_offset", long(D) * 2)));
  B.la_lr_b = upload(copy_of(need(T, sb + "lr_proj.bias", 3L * Hf)));
  B.la_s_b = upload(copy_of(need(T, sb + "ttt_scale_proj.bias", Hf)));
  B.la_norm = upload(copy_of(need(T, sb + "ttt_norm.weight", df)));
  B.Wo = upload_padded(need(T, sb + "o_proj.weight", long(D) * D).data, plan_o);
  // The initial fast weights, one copy per sequence, and their rows' norms (the renormalisation's
  // targets, [H_f, 2 d_h + d_f]: W0's d_h, W1's d_f, W2's d_h), as lact_row_norms in float.
  const char* names[3] = {"w0", "w1", "w2"};
  const int rows[3] = {dh, df, dh}, cols[3] = {df, dh, df};
  const std::size_t wsz = std::size_t(dh) * df;
  std::vector<float> norms(std::size_t(Hf) * (2 * dh + df));
  for (int w = 0; w < 3; ++w) {
    // The model names each head's matrix "w0[h]" (its checkpoint stacks them [H_f, rows, cols]).
    std::vector<float> all(std::size_t(Hf) * wsz);
    const int at = w == 0 ? 0 : w == 1 ? dh : dh + df;
    for (int h = 0; h < Hf; ++h) {
      const HostTensor& t =
          need(T, sb + names[w] + "[" + std::to_string(h) + "]", long(wsz));
      std::copy(t.data, t.data + wsz, all.begin() + std::size_t(h) * wsz);
      for (int r = 0; r < rows[w]; ++r)
        norms[std::size_t(h) * (2 * dh + df) + at + r] =
            Eigen::Map<const Eigen::RowVectorXf>(t.data + std::size_t(r) * cols[w], cols[w]).norm();
    }
    B.la_w[w] = upload_each(all);
    B.la_m[w] = zeros(std::size_t(nb) * Hf * wsz);
  }
  B.la_row_norms = upload(norms);
  B.la_chunk = zeros(std::size_t(nb) * Hf * lac.chunk_size * (2 * df + 4));
  // The attention's ring: the window's W rows.
  B.kcache = zeros(std::size_t(nb) * H * lac.window * d);
  B.vcache = zeros(std::size_t(nb) * H * lac.window * d);
}

void CudaDecoder::Impl::enqueue_step(int pos) {
  for (int i = 0; i < L; ++i) {
    const DecBlock& B = blocks[i];
    detail::BlockInArgs bi;
    bi.h = h;
    if (i == 0) {
      bi.embed = embed;
      bi.token = token_dev;
    } else {
      bi.delta = out(y_down, plan_down);
    }
    if (mc.mamba_backbone) {
      bi.conv_norm = B.conv_norm;
      bi.conv_w = B.conv_w;
      bi.conv_b = B.conv_b;
      bi.hist = B.hist_pre;
      bi.K = K;
    }
    bi.norm = B.seq_norm;
    bi.a = a;
    bi.D = D;
    bi.eps = eps;
    bi.batch = nb;
    detail::decode_block_in(bi, stream);

    // The mixer leaves its output as a product's partials; h += them below.
    Partials mixed;
    if (mamba2) {
      enqueue_mamba2(B);
      mixed = out(y_mo, plan_mo);
    } else if (deltanet) {
      enqueue_deltanet(B);
      mixed = out(y_o, plan_o);
    } else if (titans) {
      enqueue_titans(B, pos);
      mixed = out(y_o, plan_o);
    } else if (lact) {
      enqueue_lact(B);
      mixed = out(y_o, plan_o);
    } else if (attention) {
      enqueue_attention(B);
      mixed = out(y_o, plan_o);
    } else if (linear) {
      enqueue_linear_attention(B);
      mixed = out(y_o, plan_o);
    } else {
      enqueue_ttt(B, pos);
      mixed = out(y_o, plan_o);
    }
    detail::decode_add_norm(h, mixed, B.ffn_norm, eps, a, D, nb, stream);
    gemv(plan_gu, a, D, B.Wgu, s_gu, y_gu);
    gemv(plan_down, y_gu, plan_gu.ld, B.Wdown, s_down, y_down, true);
  }
  detail::decode_add_norm(h, out(y_down, plan_down), final_norm, eps, a, D, nb, stream);
  gemv(plan_head, a, D, embed_t, s_head, y_head);
}

void CudaDecoder::Impl::enqueue_mamba2(const DecBlock& B) {
  gemv(plan_in, a, D, B.Win, s_in, y_in);
  const Partials P = out(y_in, plan_in);
  detail::Mamba2ConvArgs ca;
  ca.proj = P;
  ca.conv_w = B.m_conv_w;
  ca.conv_b = B.m_conv_b;
  ca.hist = B.m_hist;
  ca.dt_bias = B.dt_bias;
  ca.xbc = xbc;
  ca.dt = dtv;
  ca.di = m2.d_inner();
  ca.cd = m2.conv_dim();
  ca.K = m2.d_conv;
  ca.H = m2.heads();
  ca.batch = nb;
  detail::decode_mamba2_conv(ca, stream);
  detail::Mamba2SsmArgs sa;
  sa.proj = P;
  sa.xbc = xbc;
  sa.dt = dtv;
  sa.A_log = B.A_log;
  sa.Dskip = B.Dskip;
  sa.state = B.ssm;
  sa.g = gm;
  sa.di = m2.d_inner();
  sa.N = m2.d_state;
  sa.P = m2.headdim;
  sa.H = m2.heads();
  sa.batch = nb;
  detail::decode_mamba2_ssm(sa, stream);
  detail::decode_rms_scale(gm, B.m_norm, float(m2.norm_eps), nm, m2.d_inner(), nb, stream);
  gemv(plan_mo, nm, m2.d_inner(), B.Wmo, s_mo, y_mo);
}

void CudaDecoder::Impl::enqueue_deltanet(const DecBlock& B) {
  gemv(B.cat, a, D, B.Wcat, s_cat, y_cat);
  const Partials P = out(y_cat, B.cat);
  detail::DeltaNetPrepArgs pa;
  pa.proj = P;
  pa.conv_w = B.dn_conv_w;
  pa.hist = B.dn_hist;
  pa.A_log = dc.gated ? B.dn_A_log : nullptr;
  pa.dt_bias = B.dn_dt_bias;
  pa.qkv = dn_qkv;
  pa.beta = dn_beta;
  pa.alpha = dc.gated ? dn_alpha : nullptr;
  pa.off_b = 3 * D;
  pa.off_a = dc.gated ? 3 * D + H : -1;
  pa.D = D;
  pa.K = K;
  pa.H = H;
  pa.batch = nb;
  detail::decode_deltanet_prep(pa, stream);
  detail::DeltaNetStepArgs sa;
  sa.proj = P;
  sa.qkv = dn_qkv;
  sa.beta = dn_beta;
  sa.alpha = pa.alpha;
  sa.o_norm = B.dn_norm;
  sa.state = B.dn_state;
  sa.y = Y;
  sa.scale = 1.0f / std::sqrt(float(d));  // the CPU layer's S(1) / sqrt(S(d))
  sa.l2_eps = float(dc.l2_eps);
  sa.norm_eps = float(dc.norm_eps);
  sa.off_g = dc.gated ? 3 * D + 2 * H : -1;
  sa.D = D;
  sa.H = H;
  sa.d = d;
  sa.batch = nb;
  detail::decode_deltanet_step(sa, stream);
  gemv(plan_o, Y, D, B.Wo, s_o, y_o);
}

void CudaDecoder::Impl::enqueue_titans(const DecBlock& B, int pos) {
  gemv(B.cat, a, D, B.Wcat, s_cat, y_cat);
  const Partials P = out(y_cat, B.cat);
  detail::DeltaNetPrepArgs pa;  // the convolutions only (beta null)
  pa.proj = P;
  pa.conv_w = B.dn_conv_w;
  pa.hist = B.dn_hist;
  pa.qkv = dn_qkv;
  pa.D = D;
  pa.K = K;
  pa.H = H;
  pa.batch = nb;
  detail::decode_deltanet_prep(pa, stream);
  detail::TitansStepArgs sa;
  sa.proj = P;
  sa.qkv = dn_qkv;
  sa.gate_bias = B.ti_gate_b;
  sa.ln_w = B.ti_ln_w;
  sa.ln_b = B.ti_ln_b;
  sa.o_norm = B.dn_norm;
  sa.memory = B.ti_memory;
  sa.momentum = B.ti_momentum;
  sa.start = B.ti_start;
  sa.y = Y;
  sa.l2_eps = float(tic.l2_eps);
  sa.ln_eps = float(tic.ln_eps);
  sa.norm_eps = float(tic.norm_eps);
  sa.commit = pos == period - 1;
  sa.off_gates = 3 * D;
  sa.off_g = 3 * D + 3 * H;
  sa.D = D;
  sa.H = H;
  sa.d = d;
  sa.batch = nb;
  detail::decode_titans_step(sa, stream);
  gemv(plan_o, Y, D, B.Wo, s_o, y_o);
}

void CudaDecoder::Impl::enqueue_lact(const DecBlock& B) {
  gemv(B.cat, a, D, B.Wcat, s_cat, y_cat);
  const Partials P = out(y_cat, B.cat);
  const int W = lac.window, Hf = lac.lact_heads;  // the ring of W rows is the window
  cached_attention(B, P, W, W);
  detail::LactArgs la;
  la.proj = P;
  la.pos = token_dev + nb;
  la.qk_scale = B.la_qk_scale;
  la.qk_offset = B.la_qk_offset;
  la.lr_bias = B.la_lr_b;
  la.m_bias = lac.use_momentum ? B.la_m_b : nullptr;
  la.s_bias = B.la_s_b;
  la.ttt_norm = B.la_norm;
  la.freq = rope_freq;
  la.row_norms = B.la_row_norms;
  for (int w = 0; w < 3; ++w) {
    (w == 0 ? la.w0 : w == 1 ? la.w1 : la.w2) = B.la_w[w];
    (w == 0 ? la.m0 : w == 1 ? la.m1 : la.m2) = B.la_m[w];
  }
  la.chunk = B.la_chunk;
  la.scratch = la_scratch;
  la.z = Z;
  la.y = Y;
  la.lr_base = float(std::log(std::expm1(lac.base_lr)));  // the CPU layer's S(log(expm1(base)))
  la.norm_eps = float(lac.norm_eps);
  la.off_lr = 3 * D;
  la.off_m = lac.use_momentum ? 3 * D + 3 * Hf : -1;
  la.off_s = 3 * D + (lac.use_momentum ? 4 : 3) * Hf;
  la.D = D;
  la.H = Hf;
  la.df = lac.fw_head_dim();
  la.dh = lac.fw_hidden();
  la.da = d;
  la.C = lac.chunk_size;
  la.batch = nb;
  detail::decode_lact_update(la, stream);
  detail::decode_lact_fast(la, stream);
  gemv(plan_o, Y, D, B.Wo, s_o, y_o);
}

void CudaDecoder::Impl::enqueue_linear_attention(const DecBlock& B) {
  gemv(B.cat, a, D, B.Wcat, s_cat, y_cat);
  detail::LinearAttnStepArgs la;
  la.proj = out(y_cat, B.cat);
  la.state = B.dn_state;
  la.z = Z;
  la.off_q = off_q;
  la.off_k = off_k;
  la.off_v = off_v;
  la.D = D;
  la.H = H;
  la.d = d;
  la.batch = nb;
  detail::decode_linear_attn_step(la, stream);
  gemv(plan_o, Z, D, B.Wo, s_o, y_o);
}

void CudaDecoder::Impl::cached_attention(const DecBlock& B, const Partials& P, int rows, int ring) {
  detail::AttnPrepArgs pa;
  pa.P = P;
  pa.off_q = 0;
  pa.off_k = D;
  pa.off_v = 2 * D;
  pa.pos = token_dev + nb;
  pa.freq = rope_freq;
  pa.scale = float(1.0 / std::sqrt(double(d)));  // the CPU's attention_scale<float>
  pa.q = q;
  pa.kcache = B.kcache;
  pa.vcache = B.vcache;
  pa.cap = rows;
  pa.ring = ring;
  pa.D = D;
  pa.H = H;
  pa.d = d;
  pa.batch = nb;
  detail::decode_attn_prep(pa, stream);
  detail::AttnArgs aa;
  aa.q = q;
  aa.kcache = B.kcache;
  aa.vcache = B.vcache;
  aa.pos = token_dev + nb;
  aa.part_o = part_o;
  aa.part_ml = part_ml;
  aa.z = Z;
  aa.cap = rows;
  aa.ring = ring;
  aa.H = H;
  aa.d = d;
  aa.S = att_S;
  aa.batch = nb;
  detail::decode_attention(aa, stream);
}

void CudaDecoder::Impl::enqueue_attention(const DecBlock& B) {
  gemv(B.cat, a, D, B.Wcat, s_cat, y_cat);
  cached_attention(B, out(y_cat, B.cat), int(cap), 0);
  gemv(plan_o, Z, D, B.Wo, s_o, y_o);
}

void CudaDecoder::Impl::enqueue_ttt(const DecBlock& B, int pos) {
  const TttOptions to{tc.inner.layer_norm, tc.inner.residual, tc.inner.bias,
                      float(tc.inner.ln_eps)};
  const TttDims dims{nb, H, 1, d, b};
  gemv(B.cat, a, D, B.Wcat, s_cat, y_cat);

  detail::TttPrepArgs tp;
  tp.P = out(y_cat, B.cat);
  tp.off_q = B.off_q;
  tp.off_k = B.off_k;
  tp.off_v = B.off_v;
  tp.off_g = B.off_g;
  tp.off_lr = B.off_lr;
  if (tc.share_qk) {
    tp.conv_q_w = B.conv_q_w;
    tp.conv_q_b = B.conv_q_b;
    tp.conv_k_w = B.conv_k_w;
    tp.conv_k_b = B.conv_k_b;
    tp.hist = B.hist_qk;
    tp.K = K;
  }
  tp.cos_t = rope_cos;
  tp.sin_t = rope_sin;
  tp.pos = pos;
  tp.lr_b = B.lr_b;
  tp.scale = lam_scale;
  tp.q = q;
  tp.k = k;
  tp.v = v;
  tp.gpre = tc.use_gate ? gpre : nullptr;
  tp.lambda = lam;
  tp.D = D;
  tp.H = H;
  tp.d = d;
  tp.batch = nb;
  detail::decode_ttt_prep(tp, stream);

  // What both models' decode steps read; the state and its accumulators follow per model.
  const TttDecodeInputs token{dims, to, q, k, v, lam, B.tau, B.ln_w, B.ln_b};
  if (mlp) {
    TttMlpDecodeArgs m;
    static_cast<TttDecodeInputs&>(m) = token;
    m.W1 = B.W1;
    m.b1 = B.b1;
    m.W2 = B.W2;
    m.b2 = B.b2;
    m.acc_W1 = B.aW1;
    m.acc_b1 = B.ab1;
    m.acc_W2 = B.aW2;
    m.acc_b2 = B.ab2;
    m.pos = pos;
    m.o = O;
    m.stream = stream;
    ttt_mlp_decode_step(m);
  } else {
    TttLinearDecodeArgs l;
    static_cast<TttDecodeInputs&>(l) = token;
    l.W = B.W1;
    l.b = B.b1;
    l.acc_W = B.aW1;
    l.acc_b = B.ab1;
    l.pos = pos;
    l.o = O;
    l.stream = stream;
    ttt_linear_decode_step(l);
  }

  detail::decode_post(O, B.post_w, B.post_b, float(tc.post_norm_eps), tc.use_gate ? gpre : nullptr,
                      Y, D, nb, stream);
  gemv(plan_o, Y, D, B.Wo, s_o, y_o);
}

void CudaDecoder::Impl::run_step(int pos) {
  if (!opt.cuda_graphs) {
    enqueue_step(pos);
    return;
  }
  if (!graphs[pos]) {
    cudaGraph_t g = nullptr;
    TTTLAB_CUDA_CHECK(cudaStreamBeginCapture(stream, cudaStreamCaptureModeThreadLocal));
    try {
      enqueue_step(pos);
    } catch (...) {
      cudaStreamEndCapture(stream, &g);
      if (g) cudaGraphDestroy(g);
      throw;
    }
    TTTLAB_CUDA_CHECK(cudaStreamEndCapture(stream, &g));
    cudaGraphExec_t exec = nullptr;
    const cudaError_t err = cudaGraphInstantiate(&exec, g, 0);
    cudaGraphDestroy(g);
    TTTLAB_CUDA_CHECK(err);
    graphs[pos] = exec;
  }
  TTTLAB_CUDA_CHECK(cudaGraphLaunch(graphs[pos], stream));
}

CudaDecoder::CudaDecoder(const Model<float>& model, const CudaDecoderOptions& options)
    : m_impl(std::make_unique<Impl>()) {
  m_impl->opt = options;
  m_impl->build(model);
}

CudaDecoder::~CudaDecoder() = default;

std::string CudaDecoder::describe() const {
  std::string s = "CUDA: " + m_impl->device_name + ", sm_" + std::to_string(m_impl->cc_major) +
                  std::to_string(m_impl->cc_minor) +
                  " (decode: " + (m_impl->opt.cuda_graphs ? "CUDA graphs" : "launches");
  if (m_impl->nb > 1)
    s += ", batch " + std::to_string(m_impl->nb) + ", " +
         (m_impl->blas ? m_impl->gemm->describe() : std::string("exact products"));
  if (m_impl->attention) s += ", KV cache " + std::to_string(m_impl->cap) + " tokens";
  return s + ")";
}

long CudaDecoder::context_capacity() const { return m_impl->attention ? m_impl->cap : -1; }

long CudaDecoder::position() const { return m_impl->tokens; }

// Runs tokens.size() / nb steps (step i's token of sequence s at tokens[i·nb + s]); returns when
// they are enqueued. Checks everything before the first step.
void CudaDecoder::Impl::run_steps(std::span<const int> tokens) {
  if (tokens.empty() || tokens.size() % std::size_t(nb) != 0)
    throw std::invalid_argument("CudaDecoder: a feed needs a positive multiple of the batch (" +
                                std::to_string(nb) + ") tokens, got " +
                                std::to_string(tokens.size()));
  for (int t : tokens)
    if (t < 0 || t >= V)
      throw std::invalid_argument("decoder: token " + std::to_string(t) + " is outside 0.." +
                                  std::to_string(V - 1));
  TTTLAB_CUDA_CHECK(cudaSetDevice(opt.device));
  const std::size_t steps = tokens.size() / std::size_t(nb);
  // The whole feed is refused, before any step, when the KV cache cannot hold it.
  if (attention && this->tokens + long(steps) > cap)
    throw std::length_error(
        "CudaDecoder: the KV cache is full: it holds " + std::to_string(cap) + " tokens, " +
        std::to_string(this->tokens) + " are in it and this feed adds " + std::to_string(steps) +
        " (CudaDecoderOptions::max_context sets the capacity; the CPU decoder has no limit)");
  // The previous feed synchronised the stream, so the pinned buffer is free to reuse or grow.
  // Per step: the nb tokens, then the global position (read by attention only).
  const std::size_t row = std::size_t(nb) + 1;
  if (token_host_cap < steps) {
    if (token_host) cudaFreeHost(token_host);
    token_host = nullptr;
    token_host_cap = 0;
    TTTLAB_CUDA_CHECK(
        cudaMallocHost(reinterpret_cast<void**>(&token_host), row * steps * sizeof(int)));
    token_host_cap = steps;
  }
  for (std::size_t i = 0; i < steps; ++i) {
    std::copy(tokens.begin() + i * nb, tokens.begin() + (i + 1) * nb, token_host + i * row);
    token_host[i * row + nb] = attention || lact ? int(this->tokens + long(i)) : 0;
  }
  for (std::size_t i = 0; i < steps; ++i) {
    TTTLAB_CUDA_CHECK(cudaMemcpyAsync(token_dev, token_host + i * row, row * sizeof(int),
                                      cudaMemcpyHostToDevice, stream));
    run_step(static_cast<int>(this->tokens % period));
    ++this->tokens;
  }
}

void CudaDecoder::feed(std::span<const int> tokens, std::vector<float>& out) {
  Impl& s = *m_impl;
  if (s.nb != 1)
    throw std::invalid_argument("CudaDecoder: feed() is for batch 1; this decoder has batch " +
                                std::to_string(s.nb) + " (use feed_batch)");
  if (tokens.empty()) throw std::invalid_argument("decoder: feed() needs at least one token");
  feed_batch(tokens, out);
}

void CudaDecoder::feed_batch(std::span<const int> tokens, std::vector<float>& out) {
  Impl& s = *m_impl;
  s.run_steps(tokens);
  TTTLAB_CUDA_CHECK(cudaMemcpy2DAsync(s.logits_host, std::size_t(s.V) * sizeof(float), s.y_head,
                                      std::size_t(s.plan_head.ld) * sizeof(float),
                                      std::size_t(s.V) * sizeof(float), std::size_t(s.nb),
                                      cudaMemcpyDeviceToHost, s.stream));
  TTTLAB_CUDA_CHECK(cudaStreamSynchronize(s.stream));
  out.assign(s.logits_host, s.logits_host + std::size_t(s.nb) * s.V);
}

void CudaDecoder::feed_greedy(std::span<const int> tokens, std::vector<int>& next) {
  Impl& s = *m_impl;
  s.run_steps(tokens);
  detail::decode_argmax(s.y_head, s.V, s.plan_head.ld, s.nb, s.next_dev, s.stream);
  TTTLAB_CUDA_CHECK(cudaMemcpyAsync(s.next_host, s.next_dev, std::size_t(s.nb) * sizeof(int),
                                    cudaMemcpyDeviceToHost, s.stream));
  TTTLAB_CUDA_CHECK(cudaStreamSynchronize(s.stream));
  next.assign(s.next_host, s.next_host + s.nb);
}

int CudaDecoder::batch() const { return m_impl->nb; }

void CudaDecoder::skip_for_bench(long position) {
  Impl& s = *m_impl;
  const long most = s.attention ? s.cap : long(k_max_positions);
  if (position < s.tokens || position > most)
    throw std::invalid_argument("CudaDecoder: skip_for_bench needs a position in " +
                                std::to_string(s.tokens) + ".." + std::to_string(most) + ", got " +
                                std::to_string(position));
  s.tokens = position;
}

CudaDecodeMemory cuda_decode_memory(const ModelConfig& mc, int batch, long context, int device) {
  if (const std::string why = cuda_decode_unsupported(mc); !why.empty())
    throw std::invalid_argument(why);
  if (batch < 1 || context < 1)
    throw std::invalid_argument("cuda_decode_memory: batch and context must be positive");
  int sms = 1;
  TTTLAB_CUDA_CHECK(cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, device));
  const DecodeShapes sh = decode_shapes(mc, k_max_positions, sms, 0);
  CudaDecodeMemory m;
  m.weight_bytes = 4.0 * (count_params(mc) + double(sh.head.K) * sh.head.ld);
  m.batch_bytes =
      4.0 * double(batch) * (sh.seq_floats + sh.cache_floats_per_token * double(context));
  return m;
}

DecoderFactory cuda_decoder_factory(int device, bool cuda_graphs, long max_context) {
  return [device, cuda_graphs,
          max_context](const Model<float>& model) -> std::unique_ptr<TokenDecoder> {
    CudaDecoderOptions o;
    o.device = device;
    o.cuda_graphs = cuda_graphs;
    o.max_context = max_context;
    return std::make_unique<CudaDecoder>(model, o);
  };
}

}  // namespace tttlab::kernels
