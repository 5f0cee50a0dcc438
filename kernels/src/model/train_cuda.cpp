// A whole training step of the byte-level model on one GPU (see tttlab/kernels/train_cuda.hpp).
//
// The code follows Model<float>::train_sequence (core/src/model/model.cpp) and TTTLayer's
// forward_train/backward (core/src/ttt/layer.cpp) line by line, with the B sequences of a batch
// stacked as R = B·T rows. Comments name the CPU statement each step mirrors where that is not
// obvious.
#include "tttlab/kernels/train_cuda.hpp"

#include <cuda_runtime_api.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <functional>
#include <map>
#include <stdexcept>
#include <string>
#include <unordered_map>
#include <utility>

#include "common/cuda_check.hpp"
#include "ttt/ttt_host.hpp"
#include "tttlab/kernels/attention.hpp"
#include "tttlab/kernels/cuda_device.hpp"
#include "tttlab/kernels/deltanet.hpp"
#include "tttlab/kernels/lact.hpp"
#include "tttlab/kernels/mamba2.hpp"
#include "tttlab/kernels/titans.hpp"
#include "tttlab/kernels/nn_ops.hpp"
#include "tttlab/kernels/ttt.hpp"
#include "tttlab/model/model.hpp"
#include "tttlab/train/trainer.hpp"

namespace tttlab::kernels {
namespace {

constexpr std::size_t kAlign = 64;     // floats: every tensor starts 256-byte aligned

std::size_t align_up(std::size_t n) { return (n + kAlign - 1) / kAlign * kAlign; }

// One cudaMalloc'd array; freed with its owner.
template <class T>
class DeviceArray {
 public:
  DeviceArray() = default;
  explicit DeviceArray(std::size_t n) { reset(n); }
  ~DeviceArray() {
    if (m_p) cudaFree(m_p);
  }
  DeviceArray(const DeviceArray&) = delete;
  DeviceArray& operator=(const DeviceArray&) = delete;
  void reset(std::size_t n) {
    if (m_p) cudaFree(m_p);
    m_p = nullptr;
    m_n = n;
    if (n) TTTLAB_CUDA_CHECK(cudaMalloc(reinterpret_cast<void**>(&m_p), n * sizeof(T)));
  }
  T* get() const { return m_p; }
  std::size_t size() const { return m_n; }
  std::size_t bytes() const { return m_n * sizeof(T); }

 private:
  T* m_p = nullptr;
  std::size_t m_n = 0;
};

// "model.layers.3.seq_modeling_block.W1[2]" → key "model.layers.3.seq_modeling_block.W1", head 2.
bool split_head_index(const std::string& name, std::string& key, int& head) {
  if (name.empty() || name.back() != ']') return false;
  const auto open = name.rfind('[');
  if (open == std::string::npos) return false;
  key = name.substr(0, open);
  head = std::stoi(name.substr(open + 1, name.size() - open - 2));
  return true;
}

// The Mamba-2 layer's sizes for a batch of B sequences of T tokens.
Mamba2LayerDims mamba2_dims(const ModelConfig& m, int B, int T) {
  const Mamba2Config c = m.mamba2_config();
  Mamba2LayerDims d;
  d.batch = B;
  d.seq_len = T;
  d.width = c.width;
  d.d_state = c.d_state;
  d.d_conv = c.d_conv;
  d.expand = c.expand;
  d.headdim = c.headdim;
  d.chunk = c.chunk_size;
  d.norm_eps = float(c.norm_eps);
  return d;
}

// The DeltaNet layer's sizes (DeltaNet or Gated DeltaNet) for a batch of B sequences of T tokens.
DeltaNetLayerDims deltanet_dims(const ModelConfig& m, int B, int T) {
  const DeltaNetConfig c = m.deltanet_config();
  DeltaNetLayerDims d;
  d.batch = B;
  d.seq_len = T;
  d.width = c.width;
  d.heads = c.heads;
  d.conv_kernel = c.conv_kernel;
  d.chunk = c.chunk_size;
  d.gated = c.gated;
  d.norm_eps = float(c.norm_eps);
  d.l2_eps = float(c.l2_eps);
  return d;
}

// The Titans layer's sizes for a batch of B sequences of T tokens.
TitansLayerDims titans_dims(const ModelConfig& m, int B, int T) {
  const TitansLayerConfig c = m.titans_config();
  TitansLayerDims d;
  d.batch = B;
  d.seq_len = T;
  d.width = c.width;
  d.heads = c.heads;
  d.conv_kernel = c.conv_kernel;
  d.mini_batch = c.mini_batch;
  d.ln_eps = float(c.ln_eps);
  d.norm_eps = float(c.norm_eps);
  d.l2_eps = float(c.l2_eps);
  return d;
}

// The LaCT layer's sizes for a batch of B sequences of T tokens.
LactLayerDims lact_dims(const ModelConfig& m, int B, int T) {
  const LactLayerConfig c = m.lact_config();
  LactLayerDims d;
  d.batch = B;
  d.seq_len = T;
  d.width = c.width;
  d.attn_heads = c.attn_heads;
  d.lact_heads = c.lact_heads;
  d.inter_multi = c.inter_multi;
  d.chunk = c.chunk_size;
  d.window = c.window;
  d.momentum = c.use_momentum;
  d.muon = c.use_muon;
  d.base_lr = float(c.base_lr);
  d.norm_eps = float(c.norm_eps);
  return d;
}

}  // namespace

std::string cuda_train_unsupported(const ModelConfig& m) {
  // The GPU optimiser updates (and decays) every parameter; fixed views need the CPU's list of trained
  // parameters (ModelConfig::trains).
  if (!m.learnable_views) return "fixed views (--fixed-views) train on the CPU engine only; use --device cpu";
  if (m.seq_layer == SeqLayerKind::LinearAttention || m.seq_layer == SeqLayerKind::SoftmaxAttention) {
    if (m.head_dim() > 128)
      return "the GPU's attention kernels need a head dim (hidden size / heads) <= 128, got " +
             std::to_string(m.head_dim()) + "; use --device cpu";
    if (m.mamba_backbone && m.conv_kernel > 16)
      return "the GPU's causal convolution needs conv_kernel <= 16, got " + std::to_string(m.conv_kernel);
    return {};
  }
  if (m.seq_layer == SeqLayerKind::Mamba2) {
    if (std::string why = mamba2_layer_unsupported(mamba2_dims(m, 1, 1)); !why.empty())
      return why + "; use --device cpu";
    return {};
  }
  if (m.is_deltanet()) {
    if (std::string why = deltanet_layer_unsupported(deltanet_dims(m, 1, 1)); !why.empty())
      return why + "; use --device cpu";
    return {};
  }
  if (m.seq_layer == SeqLayerKind::Titans) {
    if (std::string why = titans_layer_unsupported(titans_dims(m, 1, 1)); !why.empty())
      return why + "; use --device cpu";
    return {};
  }
  if (m.seq_layer == SeqLayerKind::Lact) {
    if (std::string why = lact_layer_unsupported(lact_dims(m, 1, 1)); !why.empty())
      return why + "; use --device cpu";
    return {};
  }
  if (m.seq_layer != SeqLayerKind::TTTLinear && m.seq_layer != SeqLayerKind::TTTMLP)
    return "the GPU trains ttt-linear, ttt-mlp, mamba2, deltanet, gated-deltanet, titans, lact and "
           "the attention baselines; " +
           to_string(m.seq_layer) + " trains on the CPU (--device cpu)";
  if (std::string why = detail::ttt_shape_unsupported(m.head_dim(), m.mini_batch_size,
                                                      "the GPU's TTT kernels need");
      !why.empty())
    return why;
  // The GPU step always applies RoPE to the TTT layer's Q, K and always has the post-norm; the
  // Theorem 1 rows of the ablation switch them off, which only the CPU engine computes.
  if (!m.ttt_rope) return "the GPU trains TTT layers with RoPE on Q and K only; without it, use --device cpu";
  if (!m.ttt_post_norm) return "the GPU trains TTT layers with their post-norm only; without it, use --device cpu";
  if (m.mamba_backbone && m.conv_kernel > 16)
    return "the GPU's causal convolution needs conv_kernel <= 16, got " + std::to_string(m.conv_kernel);
  return {};
}

// ---- the backend -------------------------------------------------------------------------------------

struct CudaTrainBackend::Impl {
  // Run settings.
  ModelConfig mc;
  Model<float>* model = nullptr;
  AdamW<float>* optim = nullptr;
  CudaTrainOptions options;
  int Bmax = 0, T = 0, D = 0, F = 0, V = 0, L = 0, H = 0, d = 0, b = 0, K = 0, group = 1, n_ck = 0;
  bool mamba = false;
  bool ttt_mlp = false;  // the mixer's inner model: TTT-MLP (W1, b1, W2, b2 per head) or TTT-Linear
  std::int64_t step = 0;
  std::string device_name;

  cudaStream_t stream = nullptr;
  std::unique_ptr<Gemm> gemm;

  // Weight gradients beside the inner loop (bf16 products, TTT-Linear mixers, not in a profiled step).
  // The inner-loop backward runs one block per (sequence, head), so at B·H under the SM count SMs
  // stay idle for its whole run (at D768, B8, H12: 96 blocks on an H100's 132 SMs). The weight
  // gradients of a block's SwiGLU and o_proj need nothing that the inner loop makes: they are queued
  // (defer_weight_gradient), launched on side_stream right after the inner-loop kernel, and joined
  // (the stream waits on side_done) before anything overwrites their operands. Their bf16 gradients
  // are in buffers of their own until then (dh16_ffn, dh16_mix, dA16 below). The main stream has the
  // higher priority, so the inner loop's blocks take their SMs first, and the kernel holds its SMs
  // alone (TttLinearBackwardArgs::whole_sm): its blocks leave room beside them, where a product's
  // block would slow them. Same products, same operands, same order of each sum: the results are those
  // of the serial step (TrainCuda.WeightGradientsBesideTheInnerLoopChangeNothing). The D768 TTT-Linear
  // bf16 step on an H100: 46.8 → 44.4 ms. The forward does the same with the Mamba backbone's gate
  // product x·Wg, which only the post-norm after the inner loop reads (defer_linear).
  bool beside = false;  // set up for it (the buffers, the stream); deferring(): in this step
  bool deferring() const { return beside && !profiling; }
  cudaStream_t side_stream = nullptr;
  std::unique_ptr<Gemm> side_gemm;
  cudaEvent_t side_ready = nullptr, side_done = nullptr;
  // The weight gradients queued for the next inner loop.
  std::vector<std::function<void()>> deferred;

  // Parameters, gradients and moments: flat arrays, one offset per tensor.
  struct Tensor {
    std::string name;
    long rows = 0, cols = 0;
    std::size_t offset = 0;
    std::size_t size() const { return std::size_t(rows) * std::size_t(cols); }
  };
  std::vector<Tensor> tensors;                  // Model::for_each_param order
  std::map<std::string, std::size_t> offset_of;  // tensor name, or a per-head group key, → offset
  std::size_t total = 0;
  DeviceArray<float> P, G, M1, M2;

  // Activations of one batch, per block, kept for the backward.
  // With bf16 products, a_seq, a_ffn, Yg, Hd (and hf) live in their bf16 shadows only (see P16 below).
  struct Block {
    float *h_in = nullptr, *a_conv = nullptr, *h_mid1 = nullptr, *a_seq = nullptr, *h_mid2 = nullptr,
          *a_ffn = nullptr;
    float *u = nullptr, *XQ = nullptr, *XK = nullptr, *XV = nullptr, *lam = nullptr, *tau = nullptr, *O = nullptr,
          *Y = nullptr, *A = nullptr, *ckW = nullptr, *ckb = nullptr;
    // Y: the post-norm's output, the o_proj input of the Transformer backbone's TTT mixers. Yg: the Mamba
    // backbone's gelu(A) ⊙ Y, its o_proj input, kept for the weight gradient (Y itself is not kept there).
    float* Yg = nullptr;
    float *ckW2 = nullptr, *ckb2 = nullptr;  // TTT-MLP: the checkpoints of W2, b2 (ckW, ckb: W1, b1)
    float *Gt = nullptr, *Up = nullptr, *Hd = nullptr;  // SwiGLU gate and up pre-activations, hidden
    // With bf16 products the pre-activations are the gate and up products' bf16 outputs (Gemm::bf16_out),
    // and Gt, Up are not allocated: the SwiGLU reads them, and its backward, in bf16 only.
    std::uint16_t *Gt16 = nullptr, *Up16 = nullptr;
    // The tensor-core attention (`flash`): bf16 Q and K after RoPE and V, [3][R, D], kept for the
    // backward; XQ, XK, XV are then one fp32 scratch set shared by the blocks.
    std::uint16_t* QKV16 = nullptr;
    // Mamba-2 (`mamba2`): what its forward keeps for the backward (mamba2.hpp).
    Mamba2LayerCache m2;
    // DeltaNet and Gated DeltaNet (`deltanet`): what their forward keeps (deltanet.hpp).
    DeltaNetLayerCache dn;
    // Titans (`titans`): what its forward keeps (titans.hpp).
    TitansLayerCache tt;
    // LaCT (`lact`): what its forward keeps (lact.hpp).
    LactLayerCache lc;
  };
  std::vector<Block> blocks;
  float* h_final = nullptr;
  std::vector<std::unique_ptr<DeviceArray<float>>> storage;  // owns every activation buffer
  std::vector<std::unique_ptr<DeviceArray<std::uint16_t>>> storage16;  // ... and every bf16 one

  // Shared temporaries.
  float *hf = nullptr, *logits = nullptr, *losses = nullptr, *tmp = nullptr, *dh = nullptr,
        *da = nullptr, *dx = nullptr, *dYg = nullptr, *dA = nullptr, *dO = nullptr, *dXQ = nullptr,
        *dXK = nullptr, *dXV = nullptr, *du = nullptr, *Ulr = nullptr, *dUlr = nullptr,
        *dlam = nullptr, *dtau = nullptr, *db0_scratch = nullptr, *db2_scratch = nullptr,
        *dHd = nullptr, *dUp = nullptr, *ws = nullptr, *rope_cos = nullptr, *rope_sin = nullptr;
  DeviceArray<unsigned char> ttt_ws;
  DeviceArray<int> tokens, targets, emb_offsets, emb_rows;
  DeviceArray<double> norm_ws, norm_out;
  std::size_t ttt_ws_bytes = 0;

  // Mixed precision (GemmPrecision::Bf16 on cuBLAS): bf16 copies of the products' operands, each
  // rounded once where it is made rather than once per product that reads it. P16 mirrors P (same
  // offsets): AdamW writes it beside P, and a forward rounds it again only after P was written
  // otherwise (params16_current). An activation that several products read (a
  // block's mixer input, o_proj input, SwiGLU input and hidden, the final norm's output) has a
  // shadow, read again by the backward's weight gradients (nothing writes those buffers in between).
  // Where products are an activation's only readers, its producer writes the shadow alone and the
  // fp32 buffer stays unwritten: the RMSNorms before the mixer and the SwiGLU and the final norm
  // (rms_norm_to, add_rms_norm_to), the SwiGLU's hidden, the Mamba gate's output; the o_proj input
  // of the other mixers (a LayerNorm's or the attention's output) is rounded after it is written. A
  // backward's incoming gradient is rounded into dy16 once for its two products, except the SwiGLU's
  // two, which its backward writes in bf16. Everything else a product reads is rounded by the Gemm.
  // The SwiGLU's own inputs are products' outputs stored in bf16 (Gemm::bf16_out): the gate and up
  // pre-activations (Block::Gt16, Up16) and the hidden state's gradient (dHd16), the one place where
  // activations are kept below fp32 (each is rounded once, as PyTorch's autocast stores a linear
  // layer's output; the SwiGLU's outputs were already rounded for the products that read them).
  bool bf16 = false;
  // dy16b: the SwiGLU's second gradient, and the TTT-Linear backward's dV (hence at least [R, D]).
  DeviceArray<std::uint16_t> P16, shadow_store, dy16, dy16b;
  // P16 == bf16(P): false until the first rounding, and after every upload of P.
  bool params16_current = false;
  // The incoming gradient's bf16 copy at the SwiGLU (dh16_ffn) and at the mixer (dh16_mix), and the
  // Mamba gate's (dA16; also the TTT-Linear backward's dV): dy16 itself unless weight gradients run
  // beside the inner loop, which reads the first two, and the SwiGLU's in dy16 and dy16b, until the
  // join (separate [R, D] buffers then).
  std::uint16_t *dh16_ffn = nullptr, *dh16_mix = nullptr, *dA16 = nullptr;
  // The SwiGLU hidden state's gradient, the down product's bf16 output.
  std::uint16_t* dHd16 = nullptr;
  // The η gate's pre-activation gradient dU [R, H] in bf16, for its input-gradient product.
  std::uint16_t* dUlr16 = nullptr;
  std::unordered_map<const float*, std::uint16_t*> shadow16;  // fp32 activation → its shadow [R, cols]
  int rows = 0;  // R of the batch in flight
  int nseq = 0;

  // The attention baselines (linear-attention, softmax-attention): the mixer is
  // o_proj(attention(q_proj x, k_proj x, v_proj x)), RoPE with global positions on Q, K for softmax.
  // Per block the forward keeps XQ, XK, XV (after RoPE) and O (the input of o_proj) in the Block's
  // buffers of the same names, and softmax's log-sum-exp rows here.
  bool attention = false;
  // Mamba-2 mixers (Mamba2Layer): mamba2_layer_forward / _backward with the step's products; the
  // backward's scratch is shared by the blocks.
  bool mamba2 = false;
  Mamba2LayerDims m2dims;
  float* m2_ws = nullptr;
  Mamba2Product m2_product() {
    return [this](bool ta, bool tb, int M, int N, int Kd, const float* A, const std::uint16_t* A16,
                  int lda, const float* Bm, const std::uint16_t* B16, int ldb, float* C, int ldc,
                  bool accumulate) {
      mm(ta, tb, M, N, Kd, A, lda, Bm, ldb, C, ldc, accumulate, A16, B16);
    };
  }
  // The Mamba-2 parameters (and gradients) of block i.
  Mamba2LayerParams m2_params(int i) const {
    const std::string pre = mixer(i);
    return {p(pre + "in_proj.weight"), p(pre + "conv1d.weight"),  p(pre + "conv1d.bias"),
            p(pre + "dt_bias"),        p(pre + "A_log"),          p(pre + "D"),
            p(pre + "norm.weight"),    p(pre + "out_proj.weight")};
  }
  Mamba2LayerGrads m2_grads(int i) const {
    const std::string pre = mixer(i);
    return {g(pre + "in_proj.weight"), g(pre + "conv1d.weight"),  g(pre + "conv1d.bias"),
            g(pre + "dt_bias"),        g(pre + "A_log"),          g(pre + "D"),
            g(pre + "norm.weight"),    g(pre + "out_proj.weight")};
  }
  // The rows of the batch in flight.
  Mamba2LayerDims m2_batch() const {
    Mamba2LayerDims d = m2dims;
    d.batch = nseq;
    return d;
  }
  // DeltaNet and Gated DeltaNet mixers (DeltaNetLayer): deltanet_layer_forward / _backward with the
  // step's products (m2_product's); the backward's scratch is shared by the blocks.
  bool deltanet = false;
  DeltaNetLayerDims dndims;
  float* dn_ws = nullptr;
  // One map from the checkpoint's names to the fields, for the weights (p) and their gradients (g).
  template <class Out, class Get>
  Out dn_tensors(int i, Get get) const {
    const std::string pre = mixer(i);
    const bool gt = dndims.gated;
    Out q;
    q.q_proj = get(pre + "q_proj.weight");
    q.k_proj = get(pre + "k_proj.weight");
    q.v_proj = get(pre + "v_proj.weight");
    q.b_proj = get(pre + "b_proj.weight");
    q.q_conv = get(pre + "q_conv1d.weight");
    q.k_conv = get(pre + "k_conv1d.weight");
    q.v_conv = get(pre + "v_conv1d.weight");
    if (gt) {
      q.a_proj = get(pre + "a_proj.weight");
      q.A_log = get(pre + "A_log");
      q.dt_bias = get(pre + "dt_bias");
      q.g_proj = get(pre + "g_proj.weight");
    }
    q.o_norm = get(pre + "o_norm.weight");
    q.o_proj = get(pre + "o_proj.weight");
    return q;
  }
  DeltaNetLayerParams dn_params(int i) const {
    return dn_tensors<DeltaNetLayerParams>(i, [this](const std::string& n) { return p(n); });
  }
  DeltaNetLayerGrads dn_grads(int i) const {
    return dn_tensors<DeltaNetLayerGrads>(i, [this](const std::string& n) { return g(n); });
  }
  DeltaNetLayerDims dn_batch() const {
    DeltaNetLayerDims d = dndims;
    d.batch = nseq;
    return d;
  }
  // Titans mixers (TitansLayer): titans_layer_forward / _backward with the step's products (the
  // memory itself in fp32); the backward's scratch is shared by the blocks.
  bool titans = false;
  TitansLayerDims ttdims;
  float* tt_ws = nullptr;
  template <class Out, class Get>
  Out tt_tensors(int i, Get get) const {
    const std::string pre = mixer(i);
    Out q;
    q.q_proj = get(pre + "q_proj.weight");
    q.k_proj = get(pre + "k_proj.weight");
    q.v_proj = get(pre + "v_proj.weight");
    q.q_conv = get(pre + "q_conv1d.weight");
    q.k_conv = get(pre + "k_conv1d.weight");
    q.v_conv = get(pre + "v_conv1d.weight");
    q.theta_proj = get(pre + "theta_proj.weight");
    q.theta_bias = get(pre + "theta_proj.bias");
    q.alpha_proj = get(pre + "alpha_proj.weight");
    q.alpha_bias = get(pre + "alpha_proj.bias");
    q.eta_proj = get(pre + "eta_proj.weight");
    q.eta_bias = get(pre + "eta_proj.bias");
    q.ln_weight = get(pre + "ttt_norm.weight");
    q.ln_bias = get(pre + "ttt_norm.bias");
    q.o_norm = get(pre + "o_norm.weight");
    q.g_proj = get(pre + "g_proj.weight");
    q.o_proj = get(pre + "o_proj.weight");
    return q;
  }
  TitansLayerParams tt_params(int i) const {
    return tt_tensors<TitansLayerParams>(i, [this](const std::string& n) { return p(n); });
  }
  TitansLayerGrads tt_grads(int i) const {
    return tt_tensors<TitansLayerGrads>(i, [this](const std::string& n) { return g(n); });
  }
  TitansLayerDims tt_batch() const {
    TitansLayerDims d = ttdims;
    d.batch = nseq;
    return d;
  }
  // LaCT mixers (LactLayer): lact_layer_forward / _backward with the step's products (the
  // attention always the fp32 CUDA-core kernels with the window); the inner loop in its
  // chunk-parallel form on lact_inner_gemm(): the step's products in the fp32 and tf32 steps, tf32
  // ones in the bf16 step (the chunked form's tests hold fp32 and tf32, not bf16). The backward's
  // scratch is shared by the blocks, and so are the RoPE tables of positions 0..T−1.
  bool lact = false;
  std::unique_ptr<Gemm> lact_gemm;  // the bf16 step's tf32 products for the inner loop
  const Gemm* lact_inner_gemm() const { return lact_gemm ? lact_gemm.get() : gemm.get(); }
  LactLayerDims lcdims;
  float* lc_ws = nullptr;
  float *lc_rope_cos = nullptr, *lc_rope_sin = nullptr;
  template <class Out, class Get>
  Out lc_tensors(int i, Get get) const {
    const std::string pre = mixer(i);
    Out q;
    q.qkv = get(pre + "qkv.weight");
    q.qk_scale = get(pre + "qk_scale");
    q.qk_offset = get(pre + "qk_offset");
    // the per-head initial weights w0[h] … side by side, [H_f, rows, cols] (layout's groups)
    q.w0 = get(pre + "w0");
    q.w1 = get(pre + "w1");
    q.w2 = get(pre + "w2");
    q.lr_proj = get(pre + "lr_proj.weight");
    q.lr_bias = get(pre + "lr_proj.bias");
    if (lcdims.momentum) {
      q.momentum_proj = get(pre + "momentum_proj.0.weight");
      q.momentum_bias = get(pre + "momentum_proj.0.bias");
    }
    q.scale_proj = get(pre + "ttt_scale_proj.weight");
    q.scale_bias = get(pre + "ttt_scale_proj.bias");
    q.ttt_norm = get(pre + "ttt_norm.weight");
    q.o_proj = get(pre + "o_proj.weight");
    return q;
  }
  LactLayerParams lc_params(int i) const {
    LactLayerParams q =
        lc_tensors<LactLayerParams>(i, [this](const std::string& n) { return p(n); });
    q.rope_cos = lc_rope_cos;
    q.rope_sin = lc_rope_sin;
    return q;
  }
  LactLayerGrads lc_grads(int i) const {
    return lc_tensors<LactLayerGrads>(i, [this](const std::string& n) { return g(n); });
  }
  LactLayerDims lc_batch() const {
    LactLayerDims d = lcdims;
    d.batch = nseq;
    return d;
  }
  // The mixers whose layer owns its whole forward and backward (and allocates what it keeps): none of
  // the TTT or attention buffers of a block.
  bool own_layer() const { return mamba2 || deltanet || titans || lact; }
  AttentionKind attn_kind = AttentionKind::Softmax;
  std::vector<float*> attn_lse;                          // per block, [Bmax, H, T]
  float *attn_rope_cos = nullptr, *attn_rope_sin = nullptr;  // [T, d/2]: positions 0..T−1
  DeviceArray<unsigned char> attn_ws;
  std::size_t attn_ws_bytes = 0;
  // Softmax attention with bf16 products and a head dim the tensor-core kernels take (32, 64, 128):
  // flash_attention_forward / _backward on bf16 Q, K (RoPE and rounding in one pass) and V, kept per
  // block (Block::QKV16); O written straight into its shadow (only products and the backward's δ read
  // O, so its fp32 buffer stays unwritten); dO rounded once, into attn16.
  bool flash = false;
  // Linear attention likewise (`chunked_linear`): chunked_linear_attention_forward / _backward on bf16 Q, K,
  // V (Block::QKV16, no RoPE), O into its shadow, dO rounded into attn16; the workspace holds the
  // chunks' states.
  bool chunked_linear = false;
  // Softmax attention in the tf32 step (GemmPrecision::Tf32) with head dim 32, 64 or 128: the fp32
  // attention kernels on the tf32 tensor cores (AttentionPrecision::tf32), operands rounded to tf32
  // like the step's products; the fp32 step keeps the exact CUDA-core kernels.
  AttentionPrecision attn_precision = AttentionPrecision::fp32;
  bool attention16() const { return flash || chunked_linear; }  // bf16 Q, K, V kept per block
  DeviceArray<std::uint16_t> attn16;  // dO's bf16 copy [R, D]
  AttentionDims attn_dims() const { return AttentionDims{nseq, H, T, d}; }
  // The fields the attention forward's and backward's arguments share, for block k's projections
  // Q, K, V on the step's stream: O and lse as given (the backward reads them only for softmax).
  template <class Args>
  Args attention_args(const Block& k, float* O, float* lse) const {
    Args a;
    a.dims = attn_dims();
    a.kind = attn_kind;
    a.Q = k.XQ;
    a.K = k.XK;
    a.V = k.XV;
    a.O = O;
    a.lse = lse;
    a.stream = stream;
    a.precision = attn_precision;
    return a;
  }

  // Block k's bf16 Q, K, V for the tensor-core attention: [R, D] each in Block::QKV16, R the rows of
  // the batch in flight.
  void flash_qkv16(const Block& k, const std::uint16_t*& Q, const std::uint16_t*& K,
                   const std::uint16_t*& V) const {
    const std::size_t rd = std::size_t(rows) * D;
    Q = k.QKV16;
    K = k.QKV16 + rd;
    V = k.QKV16 + 2 * rd;
  }

  // Profiling (profile_step): event pairs around the phases, summed after the step.
  enum Phase { kGemm = 0, kInnerFwd = 1, kInnerBwd = 2 };
  bool profiling = false;
  std::vector<cudaEvent_t> events;  // a pool, reused across profiled steps
  std::size_t events_used = 0;
  std::vector<std::pair<int, std::size_t>> marks;  // phase, index of its start event (end = + 1)
  cudaEvent_t next_event() {
    if (events_used == events.size()) {
      cudaEvent_t e;
      TTTLAB_CUDA_CHECK(cudaEventCreate(&e));
      events.push_back(e);
    }
    return events[events_used++];
  }
  void begin(int phase) {
    if (!profiling) return;
    marks.push_back({phase, events_used});
    TTTLAB_CUDA_CHECK(cudaEventRecord(next_event(), stream));
  }
  void end() {
    if (profiling) TTTLAB_CUDA_CHECK(cudaEventRecord(next_event(), stream));
  }

  float* alloc(std::size_t n) {
    storage.push_back(std::make_unique<DeviceArray<float>>(std::max<std::size_t>(n, 1)));
    return storage.back()->get();
  }
  // The RoPE tables (rope_tables) of positions 0..positions−1, [positions, d/2] each, in new device
  // arrays.
  void upload_rope_tables(int positions, float*& cos_t, float*& sin_t) {
    std::vector<float> c(std::size_t(positions) * d / 2), s(c.size());
    rope_tables(d, positions, mc.rope_theta, c.data(), s.data());
    cos_t = alloc(c.size());
    sin_t = alloc(s.size());
    TTTLAB_CUDA_CHECK(cudaMemcpy(cos_t, c.data(), c.size() * sizeof(float), cudaMemcpyHostToDevice));
    TTTLAB_CUDA_CHECK(cudaMemcpy(sin_t, s.data(), s.size() * sizeof(float), cudaMemcpyHostToDevice));
  }
  std::uint16_t* alloc16(std::size_t n) {
    storage16.push_back(std::make_unique<DeviceArray<std::uint16_t>>(std::max<std::size_t>(n, 1)));
    return storage16.back()->get();
  }
  float* p(const std::string& name) const { return P.get() + offset_of.at(name); }
  float* g(const std::string& name) const { return G.get() + offset_of.at(name); }
  std::string layer(int i) const { return "model.layers." + std::to_string(i) + "."; }
  std::string mixer(int i) const { return layer(i) + "seq_modeling_block."; }

  // Row-major C = op(A)·op(B) (+ C with accumulate). With bf16 products, A16 / B16 are rounded copies
  // of A / B made beforehand (the same row strides); where null, a kept copy (copy16) or the Gemm's.
  void mm(bool ta, bool tb, int M, int N, int Kd, const float* A, int lda, const float* Bm, int ldb, float* C,
          int ldc, bool accumulate, const std::uint16_t* A16 = nullptr, const std::uint16_t* B16 = nullptr) {
    begin(kGemm);
    product(*gemm, ta, tb, M, N, Kd, A, lda, Bm, ldb, C, ldc, accumulate, A16, B16);
    end();
  }
  void product(const Gemm& gm, bool ta, bool tb, int M, int N, int Kd, const float* A, int lda,
               const float* Bm, int ldb, float* C, int ldc, bool accumulate,
               const std::uint16_t* A16, const std::uint16_t* B16) const {
    if (bf16)
      gm.bf16(ta, tb, M, N, Kd, 1.f, A, lda, A16 ? A16 : copy16(A), lda, Bm, ldb,
              B16 ? B16 : copy16(Bm), ldb, accumulate ? 1.f : 0.f, C, ldc);
    else
      gm(ta, tb, M, N, Kd, 1.f, A, lda, Bm, ldb, accumulate ? 1.f : 0.f, C, ldc);
  }
  // The bf16 copy kept of an operand: a parameter's in P16, an activation's shadow; else null.
  const std::uint16_t* copy16(const float* x) const {
    if (bf16 && x >= P.get() && x < P.get() + total) return P16.get() + (x - P.get());
    return shadow_of(x);
  }
  // The shadow of an fp32 activation y, when bf16 products keep one; else null.
  std::uint16_t* shadow_of(const float* y) const {
    if (!bf16) return nullptr;
    const auto it = shadow16.find(y);
    return it == shadow16.end() ? nullptr : it->second;
  }
  // The forward's RMSNorms (plain, and fused with the residual add before them). A norm whose output
  // has a shadow (a mixer or SwiGLU input, the final norm's output: only products read them) writes
  // the shadow alone, in bf16; its fp32 buffer stays unwritten.
  void rms_norm_to(const float* X, const float* w, float* Y) {
    const float eps = float(mc.rms_norm_eps);
    if (std::uint16_t* y16 = shadow_of(Y))
      rms_norm_forward_bf16(X, w, rows, D, eps, y16, stream);
    else
      rms_norm_forward(X, w, rows, D, eps, Y, stream);
  }
  void add_rms_norm_to(const float* H, const float* Dx, const float* w, float* S, float* Y) {
    const float eps = float(mc.rms_norm_eps);
    if (std::uint16_t* y16 = shadow_of(Y))
      add_rms_norm_forward_bf16(H, Dx, w, rows, D, eps, S, y16, stream);
    else
      add_rms_norm_forward(H, Dx, w, rows, D, eps, S, Y, stream);
  }
  // Rounds the activation x [rows, cols] (contiguous) into its shadow; nothing without bf16 products.
  void refresh16(const float* x, int cols) {
    if (!bf16) return;
    begin(kGemm);
    convert_to_bf16(x, rows, cols, cols, shadow16.at(x), cols, stream);
    end();
  }
  // Rounds g [rows, cols] into dy16 for the products that read it next; null without bf16 products.
  const std::uint16_t* round_gradient16(const float* g, int cols) {
    if (!bf16) return nullptr;
    begin(kGemm);
    convert_to_bf16(g, rows, cols, cols, dy16.get(), cols, stream);
    end();
    return dy16.get();
  }
  // P16 = bf16(P), in slices that keep the converter's int sizes.
  void refresh_params16() {
    if (!bf16 || params16_current) return;
    begin(kGemm);
    const std::size_t slice = std::size_t(1) << 30;
    for (std::size_t o = 0; o < total; o += slice) {
      const int n = static_cast<int>(std::min(slice, total - o));
      convert_to_bf16(P.get() + o, 1, n, n, P16.get() + o, n, stream);
    }
    end();
    params16_current = true;
  }
  // y [R, out] = x [R, in] · W [in, out]
  void linear(const float* x, const float* W, int in, int out, float* y) {
    mm(false, false, rows, out, in, x, in, W, out, y, out, false);
  }
  // y16 [R, out] = bf16(x·W), with bf16 products only: for outputs whose readers take bf16 values.
  void linear16(const float* x, const float* W, int in, int out, std::uint16_t* y16) {
    begin(kGemm);
    gemm->bf16_out(false, false, rows, out, in, 1.f, x, in, copy16(x), in, W, out, copy16(W), out,
                   y16, out);
    end();
  }
  // dW [in, out] += xᵀ·dy;  dx [R, in] (+)= dy·Wᵀ (dx may be null)
  // dy16_given: dy already rounded to bf16 by its producer (dy itself may then be null).
  // deferrable: dW may run beside the next inner-loop kernel (see `beside`).
  void linear_backward(const float* x, const float* W, const float* dy, int in, int out, float* dW,
                       float* dxo, bool accumulate_dx, const std::uint16_t* dy16_given = nullptr,
                       bool deferrable = false) {
    const std::uint16_t* dy16p = dy16_given ? dy16_given : round_gradient16(dy, out);
    weight_gradient(x, dy, dy16p, in, out, dW, deferrable);
    if (dxo)
      mm(false, true, rows, in, out, dy, out, W, out, dxo, in, accumulate_dx, dy16p, nullptr);
  }
  // dW [in, out] += xᵀ·dy (dy16p: dy's bf16 copy, or null), in line or, deferrable, queued beside
  // the next inner loop.
  void weight_gradient(const float* x, const float* dy, const std::uint16_t* dy16p, int in, int out,
                       float* dW, bool deferrable) {
    if (deferrable && deferring())
      defer_weight_gradient(x, dy16p, in, out, dW);
    else
      mm(true, false, in, out, rows, x, in, dy, out, dW, out, true, nullptr, dy16p);
  }
  // dW [in, out] += xᵀ·dy from the bf16 copies (x's shadow, dy16), queued for the next inner loop.
  void defer_weight_gradient(const float* x, const std::uint16_t* dy16p, int in, int out,
                             float* dW) {
    const int R = rows;
    deferred.push_back([this, x, dy16p, in, out, dW, R] {
      product(*side_gemm, true, false, in, out, R, x, in, nullptr, out, dW, out, true, nullptr,
              dy16p);
    });
  }
  // y [R, out] = x [R, in] · W [in, out], queued for the next inner loop as the weight gradients are.
  void defer_linear(const float* x, const float* W, int in, int out, float* y) {
    const int R = rows;
    deferred.push_back([this, x, W, in, out, y, R] {
      product(*side_gemm, false, false, R, out, in, x, in, W, out, y, out, false, nullptr, nullptr);
    });
  }
  // Around an inner-loop kernel: before its launch, the point the queued products wait for;
  // after it, their launch on the side stream and the join. (Joining later, after the work that
  // follows the TTT-Linear backward, so that the products it leaves unfinished overlap that work,
  // measured no faster: the same step time within noise (docs/history/kernels-notebook.md has the
  // run).)
  void before_inner_loop() {
    if (!deferred.empty()) TTTLAB_CUDA_CHECK(cudaEventRecord(side_ready, stream));
  }
  void after_inner_loop() {
    if (deferred.empty()) return;
    TTTLAB_CUDA_CHECK(cudaStreamWaitEvent(side_stream, side_ready, 0));
    for (const auto& f : deferred) f();
    deferred.clear();
    TTTLAB_CUDA_CHECK(cudaEventRecord(side_done, side_stream));
    TTTLAB_CUDA_CHECK(cudaStreamWaitEvent(stream, side_done, 0));
  }

  void layout(Model<float>& m);
  void allocate();
  void upload_params();
  void upload_optimizer();
  void upload_batch(const TokenBatch& batch, bool train);
  void forward(bool train, float grad_scale);
  void ttt_forward(int i, const float* x, float* out, bool train);
  // The fields that every inner-loop call of block k reads, shared by the forward and backward argument
  // structs of both TTT models (tttlab/kernels/ttt.hpp).
  template <class Args>
  void inner_inputs(Args& a, const Block& k, const std::string& pre) const {
    a.dims = TttDims{nseq, H, T, d, b};
    a.opt = TttOptions{mc.inner_layer_norm, mc.inner_residual, mc.inner_bias, float(mc.ttt_ln_eps)};
    a.Q = k.XQ;
    a.K = k.XK;
    a.V = k.XV;
    a.lambda = k.lam;
    a.tau = k.tau;
    a.ln_weight = p(pre + "ttt_norm_weight");
    a.ln_bias = p(pre + "ttt_norm_bias");
    a.stream = stream;
  }
  // ... and the backward's outputs: the per-token gradients, dλ, dτ and the loss LN's dγ, dβ, which
  // the kernel overwrites (sole contributors; zero before the step anyway), and its workspace.
  template <class Args>
  void inner_gradients(Args& a, const std::string& pre) {
    a.dO = dO;
    a.dQ = dXQ;
    a.dK = dXK;
    a.dV = dXV;
    a.dlambda = dlam;
    a.dtau = dtau;
    a.dln_weight = g(pre + "ttt_norm_weight");
    a.dln_bias = g(pre + "ttt_norm_bias");
    a.workspace = ttt_ws.get();
    a.workspace_bytes = ttt_ws_bytes;
  }
  void backward();
  // dY16: dY's bf16 copy (bf16 products: the RMSNorm backward that produced dY wrote it), else null.
  void ttt_backward(int i, const float* x, const float* dY, const std::uint16_t* dY16, float* dxo);
  void attention_mixer_forward(int i, const float* x, float* out, bool train);
  void attention_mixer_backward(int i, const float* x, const float* dY, const std::uint16_t* dY16,
                                float* dxo);
  double loss_sum() const;
  void sync() const { TTTLAB_CUDA_CHECK(cudaStreamSynchronize(stream)); }
  // Every public call selects the backend's GPU first: a data-parallel job drives several backends
  // from several threads.
  void use_device() const { TTTLAB_CUDA_CHECK(cudaSetDevice(options.device)); }
  // The calls that read a block's activations back (a backward, the mixer inputs) need each block's own.
  void require_training(const char* call) const {
    if (options.forward_only)
      throw std::logic_error(std::string("train_cuda: ") + call +
                             " on a forward-only backend (CudaTrainOptions::forward_only)");
  }
  // The TTT layers' RoPE on Q and K (positions t mod b), for the convs that apply it in their pass.
  ConvRope qk_rope() const { return ConvRope{rope_cos, rope_sin, d, b}; }
};

void CudaTrainBackend::Impl::layout(Model<float>& m) {
  std::map<std::string, std::size_t> group_base;
  // The heads of each per-head group: the attention heads' count for the TTT layers' states, LaCT's
  // own fast-weight heads (lact_heads) for its initial weights.
  std::map<std::string, int> group_heads;
  m.for_each_param([&](Eigen::Map<Mat<float>>, const std::string& name) {
    std::string key;
    int head = 0;
    if (split_head_index(name, key, head)) group_heads[key] = std::max(group_heads[key], head + 1);
  });
  m.for_each_param([&](Eigen::Map<Mat<float>> t, const std::string& name) {
    Tensor x{name, static_cast<long>(t.rows()), static_cast<long>(t.cols()), 0};
    std::string key;
    int head = 0;
    if (split_head_index(name, key, head)) {
      // The per-head initial states of one layer, side by side: [H, rows, cols].
      auto it = group_base.find(key);
      if (it == group_base.end()) {
        if (head != 0) throw std::logic_error("train_cuda: per-head tensors of '" + key + "' out of order");
        it = group_base.emplace(key, total).first;
        offset_of[key] = total;
        total = align_up(total + std::size_t(group_heads.at(key)) * x.size());
      }
      x.offset = it->second + std::size_t(head) * x.size();
    } else {
      x.offset = total;
      total = align_up(total + x.size());
    }
    offset_of[name] = x.offset;
    tensors.push_back(x);
  });
}

void CudaTrainBackend::Impl::allocate() {
  P.reset(total);
  G.reset(total);
  M1.reset(total);
  M2.reset(total);
  TTTLAB_CUDA_CHECK(cudaMemsetAsync(P.get(), 0, P.bytes(), stream));
  TTTLAB_CUDA_CHECK(cudaMemsetAsync(G.get(), 0, G.bytes(), stream));
  const std::size_t R = std::size_t(Bmax) * T;
  const std::size_t RD = R * D, RF = R * F;
  TttDims dims{Bmax, H, T, d, b};
  n_ck = attention || own_layer() ? 0 : ttt_num_checkpoints(dims, group);
  blocks.resize(L);
  // forward_only: blocks 0 and 1 own their buffers, block i ≥ 2 takes block i mod 2's. Block i writes
  // its output into block i + 1's h_in (and that block's first norm), which is block i − 1's and is no
  // longer read; so block 1's output goes back into block 0's h_in.
  const int owners = options.forward_only ? std::min(L, 2) : L;
  float* h = alloc(RD);  // the embedding output = h_in of block 0
  for (int i = 0; i < L; ++i) {
    if (i >= owners) {
      blocks[i] = blocks[i % 2];
      continue;
    }
    Block& k = blocks[i];
    k.h_in = h;
    if (mamba) {
      k.a_conv = alloc(RD);
      k.h_mid1 = alloc(RD);
      k.u = alloc(RD);
      k.A = alloc(RD);
    } else {
      k.h_mid1 = k.h_in;
    }
    k.a_seq = alloc(RD);
    if (mamba2) {
      k.m2 = mamba2_layer_cache(m2dims, alloc(mamba2_layer_cache_floats(m2dims)));
    } else if (deltanet) {
      k.dn = deltanet_layer_cache(dndims, alloc(deltanet_layer_cache_floats(dndims)));
    } else if (titans) {
      k.tt = titans_layer_cache(ttdims, alloc(titans_layer_cache_floats(ttdims)));
    } else if (lact) {
      k.lc = lact_layer_cache(lcdims, alloc(lact_layer_cache_floats(lcdims)));
    } else if (attention16() && i > 0) {
      k.XQ = blocks.front().XQ;
      k.XK = blocks.front().XK;
      k.XV = blocks.front().XV;
    } else {
      k.XQ = alloc(RD);
      k.XK = alloc(RD);
      k.XV = alloc(RD);
    }
    if (attention16()) k.QKV16 = alloc16(3 * RD);
    if (!own_layer()) k.O = alloc(RD);
    if (!attention && !own_layer()) {
      k.lam = alloc(std::size_t(Bmax) * H * T);
      k.tau = alloc(b);
      // The post-norm's output Y: the o_proj input of the Transformer backbone. With the Mamba backbone
      // the o_proj input is the gated Yg, and Y is never stored (gated_layer_norm_forward).
      if (mamba)
        k.Yg = alloc(RD);
      else
        k.Y = alloc(RD);
      // The inner state's size: W1 [d, d] and b1 [d] (TTT-Linear), or W1 [d, 4d], b1 [4d], W2 [4d, d],
      // b2 [d] (TTT-MLP).
      const std::size_t hw = ttt_mlp ? 4 * std::size_t(d) : d;
      k.ckW = alloc(std::size_t(Bmax) * H * n_ck * d * hw);
      k.ckb = alloc(std::size_t(Bmax) * H * n_ck * hw);
      if (ttt_mlp) {
        k.ckW2 = alloc(std::size_t(Bmax) * H * n_ck * d * hw);
        k.ckb2 = alloc(std::size_t(Bmax) * H * n_ck * d);
      }
    }
    k.h_mid2 = alloc(RD);
    k.a_ffn = alloc(RD);
    if (bf16) {
      k.Gt16 = alloc16(RF);
      k.Up16 = alloc16(RF);
    } else {
      k.Gt = alloc(RF);
      k.Up = alloc(RF);
    }
    k.Hd = alloc(RF);
    // h_out = the next block's h_in.
    h = options.forward_only && i == 1 && L > 2 ? blocks[0].h_in : alloc(RD);
  }
  h_final = options.forward_only && L > 2 ? blocks[L % 2].h_in : h;
  hf = alloc(RD);
  logits = alloc(R * V);
  losses = alloc(R);
  for (float** t : {&tmp, &dh, &da, &dx, &dYg, &dA, &dO, &dXQ, &dXK, &dXV, &du}) *t = alloc(RD);
  Ulr = alloc(R * H);
  dUlr = alloc(R * H);
  if (bf16) dUlr16 = alloc16(R * H);
  dlam = alloc(std::size_t(Bmax) * H * T);
  dtau = alloc(b);
  db0_scratch = alloc(std::size_t(H) * d * (ttt_mlp ? 4 : 1));
  db2_scratch = alloc(std::size_t(H) * d);
  if (bf16) {
    dHd16 = alloc16(RF);
  } else {
    dHd = alloc(RF);
    dUp = alloc(RF);
  }
  const int Ri = static_cast<int>(R);
  const std::size_t ws_floats = std::max(
      {rms_norm_backward_workspace(Ri, std::max(D, F)), gated_layer_norm_backward_workspace(Ri, D),
       causal_conv_pair_backward_workspace(Bmax, T, D, std::max(K, 1)),
       eta_gate_backward_workspace(Ri, H, D)});
  ws = alloc(ws_floats);
  // TTT-MLP: the forward's scratch (d = 128) and the backward's workspace share one buffer (the two
  // run one after the other on the stream).
  if (mamba2) m2_ws = alloc(mamba2_layer_workspace_floats(m2dims));
  if (deltanet) dn_ws = alloc(deltanet_layer_workspace_floats(dndims));
  if (titans) tt_ws = alloc(titans_layer_workspace_floats(ttdims));
  if (lact) {
    lc_ws = alloc(lact_layer_workspace_floats(lcdims));
    upload_rope_tables(T, lc_rope_cos, lc_rope_sin);  // d = D / H, the attention's head dim
  }
  ttt_ws_bytes = attention || own_layer() ? 0
                 : ttt_mlp           ? std::max(ttt_mlp_backward_workspace_bytes(dims, group),
                                                ttt_mlp_forward_workspace_bytes(dims))
                                     : ttt_linear_backward_workspace_bytes(dims, group);
  ttt_ws.reset(ttt_ws_bytes);
  tokens.reset(R);
  targets.reset(R);
  emb_offsets.reset(V + 1);
  emb_rows.reset(R);
  norm_ws.reset(std::max<std::size_t>(sum_squares_workspace(total), 1));
  norm_out.reset(1);
  if (bf16) {
    P16.reset(total);
    dy16.reset(std::max({RD, RF, R * V}));
    dy16b.reset(std::max(RD, RF));
    dh16_ffn = dh16_mix = dA16 = dy16.get();
    if (beside) {
      dh16_ffn = alloc16(RD);
      dh16_mix = alloc16(RD);
      dA16 = alloc16(RD);
    }
    // The shadows: per block the mixer input, the o_proj input, the SwiGLU input and hidden; hf.
    std::vector<std::pair<const float*, std::size_t>> shadowed;
    for (int i = 0; i < owners; ++i) {
      const Block& k = blocks[i];
      shadowed.emplace_back(k.a_seq, RD);
      if (!own_layer()) shadowed.emplace_back(attention ? k.O : mamba ? k.Yg : k.Y, RD);
      shadowed.emplace_back(k.a_ffn, RD);
      shadowed.emplace_back(k.Hd, RF);
    }
    shadowed.emplace_back(hf, RD);
    std::size_t n = 0;
    for (const auto& sh : shadowed) n += align_up(sh.second);
    shadow_store.reset(n);
    n = 0;
    for (const auto& sh : shadowed) {
      shadow16[sh.first] = shadow_store.get() + n;
      n += align_up(sh.second);
    }
  }
  if (attention) {
    const AttentionDims ad{Bmax, H, T, d};
    for (int i = 0; i < L; ++i)
      attn_lse.push_back(attn_kind != AttentionKind::Softmax ? nullptr
                         : i < owners                        ? alloc(std::size_t(Bmax) * H * T)
                                                             : attn_lse[i % 2]);
    attn_ws_bytes = flash      ? flash_attention_backward_workspace_bytes(ad)
                    : chunked_linear ? chunked_linear_attention_backward_workspace_bytes(ad)
                               : attention_backward_workspace_bytes(ad, attn_kind);
    attn_ws.reset(attn_ws_bytes);
    if (attention16()) attn16.reset(RD);
    if (attn_kind == AttentionKind::Softmax) {
      // SoftmaxAttentionLayer::forward_train rotates by the global positions 0..T−1 (rope_apply).
      upload_rope_tables(T, attn_rope_cos, attn_rope_sin);
    }
    return;  // the TTT layers' RoPE tables below are not needed
  }
  // RoPE tables for positions 0..b−1 (t mod b).
  if (!own_layer()) upload_rope_tables(b, rope_cos, rope_sin);
}

void CudaTrainBackend::Impl::upload_params() {
  params16_current = false;
  std::size_t k = 0;
  model->for_each_param([&](Eigen::Map<Mat<float>> t, const std::string& name) {
    const Tensor& x = tensors.at(k++);
    if (x.name != name || std::size_t(t.size()) != x.size())
      throw std::logic_error("train_cuda: the model's tensors changed (" + name + ")");
    TTTLAB_CUDA_CHECK(cudaMemcpy(P.get() + x.offset, t.data(), x.size() * sizeof(float), cudaMemcpyHostToDevice));
  });
}

void CudaTrainBackend::Impl::upload_optimizer() {
  const AdamWState<float>& st = optim->state();
  step = st.step;
  TTTLAB_CUDA_CHECK(cudaMemset(M1.get(), 0, M1.bytes()));
  TTTLAB_CUDA_CHECK(cudaMemset(M2.get(), 0, M2.bytes()));
  if (st.names.empty()) return;  // fresh: moments zero (AdamW::step creates them so)
  if (st.names.size() != tensors.size())
    throw std::invalid_argument("train_cuda: the optimiser state has " + std::to_string(st.names.size()) +
                                " tensors, the model " + std::to_string(tensors.size()));
  for (std::size_t i = 0; i < tensors.size(); ++i) {
    const Tensor& x = tensors[i];
    if (st.names[i] != x.name || st.m[i].size() != x.size() || st.v[i].size() != x.size())
      throw std::invalid_argument("train_cuda: optimiser state tensor " + std::to_string(i) + " is '" + st.names[i] +
                                  "', the model's is '" + x.name + "' (or the sizes differ)");
    TTTLAB_CUDA_CHECK(cudaMemcpy(M1.get() + x.offset, st.m[i].data(), x.size() * sizeof(float), cudaMemcpyHostToDevice));
    TTTLAB_CUDA_CHECK(cudaMemcpy(M2.get() + x.offset, st.v[i].data(), x.size() * sizeof(float), cudaMemcpyHostToDevice));
  }
}

// Inputs, targets (−1 where the mask drops them: model.cpp's targets_of) and the rows of each token
// for the embedding's backward.
void CudaTrainBackend::Impl::upload_batch(const TokenBatch& batch, bool train) {
  if (batch.batch < 1 || batch.batch > Bmax)
    throw std::invalid_argument("train_cuda: a batch of " + std::to_string(batch.batch) +
                                " sequences; this backend was built for 1.." + std::to_string(Bmax));
  if (batch.seq_len != T)
    throw std::invalid_argument("train_cuda: sequence length " + std::to_string(batch.seq_len) +
                                ", this backend was built for " + std::to_string(T));
  nseq = batch.batch;
  rows = nseq * T;
  std::vector<int> in(rows), tg(rows), count(V + 1, 0);
  for (int s = 0; s < nseq; ++s)
    for (int t = 0; t < T; ++t) {
      const int x = batch.input(s, t), y = batch.target(s, t);
      if (x < 0 || x >= V || y < 0 || y >= V)
        throw std::invalid_argument("train_cuda: token " + std::to_string(x < 0 || x >= V ? x : y) + " of sequence " +
                                    std::to_string(s) + " is outside the vocabulary [0, " + std::to_string(V) + ")");
      const int r = s * T + t;
      in[r] = x;
      tg[r] = batch.counts(s, t) ? y : -1;
      ++count[x + 1];
    }
  TTTLAB_CUDA_CHECK(cudaMemcpyAsync(tokens.get(), in.data(), rows * sizeof(int), cudaMemcpyHostToDevice, stream));
  TTTLAB_CUDA_CHECK(cudaMemcpyAsync(targets.get(), tg.data(), rows * sizeof(int), cudaMemcpyHostToDevice, stream));
  if (train) {
    for (int v = 0; v < V; ++v) count[v + 1] += count[v];
    std::vector<int> rows_of(rows), fill(count.begin(), count.end() - 1);
    for (int r = 0; r < rows; ++r) rows_of[fill[in[r]]++] = r;
    TTTLAB_CUDA_CHECK(cudaMemcpyAsync(emb_offsets.get(), count.data(), (V + 1) * sizeof(int), cudaMemcpyHostToDevice, stream));
    TTTLAB_CUDA_CHECK(cudaMemcpyAsync(emb_rows.get(), rows_of.data(), rows * sizeof(int), cudaMemcpyHostToDevice, stream));
  }
  // The host vectors die here: make the copies complete first.
  sync();
}

// TTTLayer::forward_train: x = a_seq [R, D] → out [R, D] (the mixer's output).
void CudaTrainBackend::Impl::ttt_forward(int i, const float* x, float* out, bool train) {
  Block& k = blocks[i];
  const std::string pre = mixer(i);
  cudaStream_t st = stream;
  if (mamba) {
    // u = x·Wq; XQ = RoPE(conv_q(u)), XK = RoPE(conv_k(u)), each sequence from a zero history; the
    // rotation runs inside the conv's pass.
    const ConvRope rope = qk_rope();
    linear(x, p(pre + "q_proj.weight"), D, D, k.u);
    causal_conv_pair_forward(k.u, p(pre + "conv_q.weight"), p(pre + "conv_q.bias"),
                             p(pre + "conv_k.weight"), p(pre + "conv_k.bias"), nseq, T, D, K, k.XQ,
                             k.XK, st, &rope);
  } else {
    linear(x, p(pre + "q_proj.weight"), D, D, k.XQ);
    linear(x, p(pre + "k_proj.weight"), D, D, k.XK);
    rope_rotate(k.XQ, nseq, T, H, d, b, rope_cos, rope_sin, 1.f, st);
    rope_rotate(k.XK, nseq, T, H, d, b, rope_cos, rope_sin, 1.f, st);
  }
  linear(x, p(pre + "v_proj.weight"), D, D, k.XV);
  token_index_forward(p(pre + "learnable_token_idx"), b, mc.eta_token_index, k.tau, st);
  const float scale = float(mc.ttt_base_lr) / float(d);
  if (mc.eta_learned_gate) {
    // λ = scale·σ(x·θᵀ + β) (θ [H, D]): with bf16 products, in one pass from x's shadow and θ's
    // mirror; else the product U = x·θᵀ, then σ.
    const float* theta = p(pre + "learnable_ttt_lr_weight");
    const std::uint16_t* x16 = shadow_of(x);
    if (x16 && D % 16 == 0) {
      eta_gate_forward_bf16(x16, copy16(theta), p(pre + "learnable_ttt_lr_bias"), nseq, T, H, D,
                            scale, k.lam, st);
    } else {
      mm(false, true, rows, H, D, x, D, theta, D, Ulr, H, false);
      eta_forward(Ulr, p(pre + "learnable_ttt_lr_bias"), nseq, T, H, scale, k.lam, st);
    }
  } else {
    eta_forward(nullptr, nullptr, nseq, T, H, scale, k.lam, st);
  }
  if (ttt_mlp) {
    TttMlpForwardArgs a;
    inner_inputs(a, k, pre);
    a.W1 = p(pre + "W1");
    a.b1 = mc.inner_bias ? p(pre + "b1") : nullptr;
    a.W2 = p(pre + "W2");
    a.b2 = mc.inner_bias ? p(pre + "b2") : nullptr;
    a.O = k.O;
    if (train) {
      a.checkpoint_W1 = k.ckW;
      a.checkpoint_b1 = k.ckb;
      a.checkpoint_W2 = k.ckW2;
      a.checkpoint_b2 = k.ckb2;
      a.checkpoint_group = group;
    }
    a.workspace = ttt_ws.get();
    a.workspace_bytes = ttt_ws_bytes;
    // With tf32 or bf16 products, one tf32 product per term where the fused kernel runs the shape.
    if (options.gemm != GemmPrecision::Fp32 && ttt_mlp_forward_supports(TttMlpForwardVersion::Tf32, a.dims))
      a.version = TttMlpForwardVersion::Tf32;
    begin(kInnerFwd);
    ttt_mlp_forward(a);
    end();
  } else {
    // The gate's product needs only x: beside the inner loop, where products run beside it.
    if (mamba && deferring()) defer_linear(x, p(pre + "g_proj.weight"), D, D, k.A);
    TttLinearForwardArgs a;
    inner_inputs(a, k, pre);
    a.W0 = p(pre + "W1");
    a.b0 = mc.inner_bias ? p(pre + "b1") : nullptr;
    a.O = k.O;
    // The inner loop's products in the precision asked of the step's products: with tf32 (or bf16
    // projections) the forward is the Tf32 kernel (~1e-3 relative like the projections; 1.4x faster
    // than the Default), with fp32 the fp32-accurate Default.
    if (options.gemm != GemmPrecision::Fp32 && ttt_linear_forward_supports(TttLinearForwardVersion::Tf32, a.dims))
      a.version = TttLinearForwardVersion::Tf32;
    if (train) {
      a.checkpoint_W = k.ckW;
      a.checkpoint_b = mc.inner_bias ? k.ckb : nullptr;
      a.checkpoint_group = group;
    }
    a.whole_sm = !deferred.empty();
    before_inner_loop();
    begin(kInnerFwd);
    ttt_linear_forward(a);
    end();
    after_inner_loop();
  }
  // Post-norm, gate, o_proj.
  const float eps = float(mc.ttt_ln_eps);
  const float *gamma = p(pre + "post_norm.weight"), *beta = p(pre + "post_norm.bias");
  const float* yg = mamba ? k.Yg : k.Y;
  if (mamba) {
    // Yg = post_norm(O) ⊙ gelu(x·Wg) in one pass; the post-norm's output is not kept (the backward
    // recomputes it). With bf16 products o_proj alone reads Yg: its shadow alone is written. (x·Wg
    // is made here unless it ran beside the inner loop.)
    if (!deferring()) linear(x, p(pre + "g_proj.weight"), D, D, k.A);
    gated_layer_norm_forward(k.O, gamma, beta, k.A, rows, D, eps, k.Yg, shadow_of(k.Yg), st);
  } else {
    layer_norm_forward(k.O, gamma, beta, rows, D, eps, k.Y, st);
    refresh16(yg, D);  // the post-norm's output (fp32: a LayerNorm)
  }
  linear(yg, p(pre + "o_proj.weight"), D, D, out);
}

void CudaTrainBackend::Impl::forward(bool train, float grad_scale) {
  cudaStream_t st = stream;
  // Every residual add is followed by an RMSNorm of its result (the next sublayer's input norm, or the
  // final norm), so each add runs fused with that norm: add_rms_norm_forward writes the sum and the
  // normalised rows in one pass. Only block 0's first norm reads the embedding alone.
  auto first_norm = [&](int i) {  // the first norm of block i: its weight and its output
    const std::string pre = layer(i);
    return mamba ? std::make_pair(p(pre + "conv.norm.weight"), blocks[i].a_conv)
                 : std::make_pair(p(pre + "seq_norm.weight"), blocks[i].a_seq);
  };
  deferred.clear();  // (left by a step that threw)
  refresh_params16();
  embedding_forward(p("model.embed_tokens.weight"), V, D, tokens.get(), rows, blocks[0].h_in, st);
  rms_norm_to(blocks[0].h_in, first_norm(0).first, first_norm(0).second);
  for (int i = 0; i < L; ++i) {
    Block& k = blocks[i];
    const std::string pre = layer(i);
    float* h_out = i + 1 < L ? blocks[i + 1].h_in : h_final;
    const auto next_norm = i + 1 < L ? first_norm(i + 1) : std::make_pair(p("model.norm.weight"), hf);
    if (mamba) {
      // h_mid1 = h_in + conv(a_conv) and the sequence norm of it, in one pass (dx: the fallback's scratch).
      std::uint16_t* y16 = shadow_of(k.a_seq);
      conv_add_rms_norm_forward(k.a_conv, p(pre + "conv.conv.weight"), p(pre + "conv.conv.bias"),
                                nseq, T, D, K, k.h_in, p(pre + "seq_norm.weight"),
                                float(mc.rms_norm_eps), k.h_mid1, y16 ? nullptr : k.a_seq, y16, dx,
                                st);
    }
    if (attention)
      attention_mixer_forward(i, k.a_seq, dx, train);
    else if (mamba2)
      mamba2_layer_forward(m2_product(), m2_batch(), m2_params(i), k.a_seq, k.m2, dx, st);
    else if (deltanet)
      deltanet_layer_forward(m2_product(), dn_batch(), dn_params(i), k.a_seq, k.dn, dx, st);
    else if (titans)
      titans_layer_forward(m2_product(), tt_batch(), tt_params(i), k.a_seq, k.tt, dx, st);
    else if (lact)
      lact_layer_forward(m2_product(), lact_inner_gemm(), lc_batch(), lc_params(i), k.a_seq, k.lc, dx, st);
    else
      ttt_forward(i, k.a_seq, dx, train);
    add_rms_norm_to(k.h_mid1, dx, p(pre + "ffn_norm.weight"), k.h_mid2, k.a_ffn);
    if (bf16) {
      linear16(k.a_ffn, p(pre + "mlp.gate_proj.weight"), D, F, k.Gt16);
      linear16(k.a_ffn, p(pre + "mlp.up_proj.weight"), D, F, k.Up16);
      silu_mul_forward_bf16(k.Gt16, k.Up16, shadow_of(k.Hd), std::size_t(rows) * F, st);
    } else {
      linear(k.a_ffn, p(pre + "mlp.gate_proj.weight"), D, F, k.Gt);
      linear(k.a_ffn, p(pre + "mlp.up_proj.weight"), D, F, k.Up);
      silu_mul_forward(k.Gt, k.Up, k.Hd, std::size_t(rows) * F, st);
    }
    linear(k.Hd, p(pre + "mlp.down_proj.weight"), F, D, dx);
    add_rms_norm_to(k.h_mid2, dx, next_norm.first, h_out, next_norm.second);
  }
  // Tied head: logits = hf·Eᵀ.
  mm(false, true, rows, V, D, hf, D, p("model.embed_tokens.weight"), D, logits, V, false);
  cross_entropy(logits, targets.get(), rows, V, grad_scale, losses, train ? logits : nullptr, st);
}

// TTTLayer::backward: dY = ∂L/∂out [R, D] → dxo = ∂L/∂x (overwritten), parameter gradients added.
void CudaTrainBackend::Impl::ttt_backward(int i, const float* x, const float* dY,
                                          const std::uint16_t* dY16, float* dxo) {
  Block& k = blocks[i];
  const std::string pre = mixer(i);
  cudaStream_t st = stream;
  // dxo gathers the input gradients of several products; the first one written overwrites it.
  bool dxo_written = false;
  auto into_dxo = [&dxo_written] { return std::exchange(dxo_written, true); };  // accumulate?
  // y = Yg·Wo
  const float* yg = mamba ? k.Yg : k.Y;
  linear_backward(yg, p(pre + "o_proj.weight"), dY, D, D, g(pre + "o_proj.weight"), dYg, false,
                  dY16, true);
  // Yg = post_norm(O) ⊙ gelu(x·Wg) (Mamba backbone), or Y = post_norm(O)
  const float eps = float(mc.ttt_ln_eps);
  if (mamba) {
    // With bf16 products dA is written only as its bf16 copy, for g_proj's two products.
    gated_layer_norm_backward(k.O, p(pre + "post_norm.weight"), p(pre + "post_norm.bias"), k.A, dYg,
                              rows, D, eps, dO, dA, g(pre + "post_norm.weight"),
                              g(pre + "post_norm.bias"), ws, st, dA16);
    linear_backward(x, p(pre + "g_proj.weight"), dA, D, D, g(pre + "g_proj.weight"), dxo,
                    into_dxo(), dA16);
  } else {
    layer_norm_backward(k.O, p(pre + "post_norm.weight"), dYg, rows, D, eps, dO,
                        g(pre + "post_norm.weight"), g(pre + "post_norm.bias"), ws, st);
  }
  // The inner loop of every head. dV16: dV's bf16 copy when the inner loop writes only that.
  const std::uint16_t* dV16 = nullptr;
  if (ttt_mlp) {
    TttMlpBackwardArgs a;
    inner_inputs(a, k, pre);
    a.checkpoint_W1 = k.ckW;
    a.checkpoint_b1 = k.ckb;
    a.checkpoint_W2 = k.ckW2;
    a.checkpoint_b2 = k.ckb2;
    a.checkpoint_group = group;
    inner_gradients(a, pre);
    a.dW1 = g(pre + "W1");
    a.db1 = mc.inner_bias ? g(pre + "b1") : db0_scratch;
    a.dW2 = g(pre + "W2");
    a.db2 = mc.inner_bias ? g(pre + "b2") : db2_scratch;
    // As the TTT-Linear forward: one tf32 product per term when the step's products are tf32 or bf16.
    if (options.gemm != GemmPrecision::Fp32) a.version = TttMlpBackwardVersion::Tf32;
    before_inner_loop();
    begin(kInnerBwd);
    ttt_mlp_backward(a);
    end();
    after_inner_loop();
  } else {
    TttLinearBackwardArgs a;
    inner_inputs(a, k, pre);
    a.checkpoint_W = k.ckW;
    a.checkpoint_b = mc.inner_bias ? k.ckb : nullptr;
    a.checkpoint_group = group;
    inner_gradients(a, pre);
    a.dW0 = g(pre + "W1");
    a.db0 = mc.inner_bias ? g(pre + "b1") : db0_scratch;
    // With tf32 or bf16 products, one tf32 product per term where the fused kernel runs the shape (its
    // streamed buffers are separate device allocations, so 16-byte aligned; checked all the same).
    auto aligned = [](const void* q) { return q == nullptr || reinterpret_cast<std::uintptr_t>(q) % 16 == 0; };
    if (options.gemm != GemmPrecision::Fp32 && ttt_linear_backward_supports(TttBackwardVersion::Tf32, a.dims) &&
        aligned(a.Q) && aligned(a.K) && aligned(a.V) && aligned(a.dO) && aligned(a.dQ) && aligned(a.dK) &&
        aligned(a.dV) && aligned(a.workspace) && aligned(a.checkpoint_W) && aligned(a.checkpoint_b))
      a.version = TttBackwardVersion::Tf32;
    // With bf16 products v_proj's two products are dV's only readers: the fused kernel writes dV
    // in bf16 alone (rounded as round_gradient16 would), into the SwiGLU's second gradient buffer,
    // which nothing uses until the next block's SwiGLU; or, set up for weight gradients beside the
    // inner loop (the up projection's weight gradient reads that buffer until the join), into dA16,
    // which g_proj's products have read by then.
    if (bf16 && a.version == TttBackwardVersion::Tf32) {
      std::uint16_t* const dv16 = beside ? dA16 : dy16b.get();
      a.dV_bf16 = dv16;
      a.dV = nullptr;
      dV16 = dv16;
    }
    a.whole_sm = !deferred.empty();
    before_inner_loop();
    begin(kInnerBwd);
    ttt_linear_backward(a);
    end();
    after_inner_loop();
  }
  // λ = scale·σ(x·θ_h + β_h)
  const float scale = float(mc.ttt_base_lr) / float(d);
  if (mc.eta_learned_gate) {
    // dU, dθ and dβ in one pass (dU also in bf16 for the product after it with bf16 products), then
    // dx (+)= dU·θ.
    const std::uint16_t* x16 = shadow_of(x);
    eta_gate_backward(k.lam, dlam, x16 ? nullptr : x, x16, nseq, T, H, D, scale, dUlr, dUlr16,
                      g(pre + "learnable_ttt_lr_weight"), g(pre + "learnable_ttt_lr_bias"), ws, st);
    mm(false, false, rows, D, H, dUlr, H, p(pre + "learnable_ttt_lr_weight"), D, dxo, D, into_dxo(),
       dUlr16, nullptr);
  }
  // τ_i = max(1/i + δ_i, 0). With δ frozen (eta_token_index_learnable off) nothing is added, so dδ
  // stays at the zero the step starts from and AdamW never moves δ (layer.cpp does the same).
  token_index_backward(p(pre + "learnable_token_idx"), dtau, b, mc.eta_token_index && mc.eta_token_index_learnable,
                       g(pre + "learnable_token_idx"), st);
  // RoPE (inside the convs' passes with the Mamba backbone), convs and projections.
  if (mamba) {
    const ConvRope rope = qk_rope();
    // With bf16 products du is written only as its bf16 copy, for q_proj's two products.
    std::uint16_t* du16 = bf16 ? dy16.get() : nullptr;
    causal_conv_pair_backward(k.u, p(pre + "conv_q.weight"), dXQ, p(pre + "conv_k.weight"), dXK,
                              nseq, T, D, K, du, false, g(pre + "conv_q.weight"),
                              g(pre + "conv_q.bias"), g(pre + "conv_k.weight"),
                              g(pre + "conv_k.bias"), ws, st, &rope, du16);
    linear_backward(x, p(pre + "q_proj.weight"), du, D, D, g(pre + "q_proj.weight"), dxo,
                    into_dxo(), du16);
  } else {
    rope_rotate(dXQ, nseq, T, H, d, b, rope_cos, rope_sin, -1.f, st);
    rope_rotate(dXK, nseq, T, H, d, b, rope_cos, rope_sin, -1.f, st);
    linear_backward(x, p(pre + "q_proj.weight"), dXQ, D, D, g(pre + "q_proj.weight"), dxo,
                    into_dxo());
    linear_backward(x, p(pre + "k_proj.weight"), dXK, D, D, g(pre + "k_proj.weight"), dxo,
                    into_dxo());
  }
  linear_backward(x, p(pre + "v_proj.weight"), dV16 ? nullptr : dXV, D, D, g(pre + "v_proj.weight"),
                  dxo, into_dxo(), dV16);
}

// LinearAttentionLayer / SoftmaxAttentionLayer::forward_train (seq/attention_layers.cpp): x = a_seq
// [R, D] → out = Z·Wo with Z = attention(x·Wq, x·Wk, x·Wv), RoPE on Q and K (softmax only).
void CudaTrainBackend::Impl::attention_mixer_forward(int i, const float* x, float* out, bool train) {
  Block& k = blocks[i];
  const std::string pre = mixer(i);
  cudaStream_t st = stream;
  if (chunked_linear) {
    // Q, K, V only feed the kernel, in bf16: the projections write them in bf16 alone.
    ChunkedLinearAttentionForwardArgs a;
    a.dims = attn_dims();
    const std::size_t rd = std::size_t(rows) * D;
    linear16(x, p(pre + "q_proj.weight"), D, D, k.QKV16);
    linear16(x, p(pre + "k_proj.weight"), D, D, k.QKV16 + rd);
    linear16(x, p(pre + "v_proj.weight"), D, D, k.QKV16 + 2 * rd);
    flash_qkv16(k, a.Q, a.K, a.V);
    a.O = shadow_of(k.O);
    a.workspace = attn_ws.get();
    a.workspace_bytes = attn_ws_bytes;
    a.stream = st;
    begin(kInnerFwd);
    chunked_linear_attention_forward(a);
    end();
    linear(k.O, p(pre + "o_proj.weight"), D, D, out);
    return;
  }
  linear(x, p(pre + "q_proj.weight"), D, D, k.XQ);
  linear(x, p(pre + "k_proj.weight"), D, D, k.XK);
  linear(x, p(pre + "v_proj.weight"), D, D, k.XV);
  const bool soft = attn_kind == AttentionKind::Softmax;
  // RoPE with period T: position t mod T = t, the global position.
  if (soft && !flash) {
    rope_rotate(k.XQ, nseq, T, H, d, T, attn_rope_cos, attn_rope_sin, 1.f, st);
    rope_rotate(k.XK, nseq, T, H, d, T, attn_rope_cos, attn_rope_sin, 1.f, st);
  }
  if (flash) {
    FlashAttentionForwardArgs a;
    a.dims = attn_dims();
    const std::size_t rd = std::size_t(rows) * D;
    begin(kGemm);
    rope_rotate_to_bf16(k.XQ, nseq, T, H, d, T, attn_rope_cos, attn_rope_sin, 1.f, k.QKV16, st);
    rope_rotate_to_bf16(k.XK, nseq, T, H, d, T, attn_rope_cos, attn_rope_sin, 1.f, k.QKV16 + rd, st);
    convert_to_bf16(k.XV, rows, D, D, k.QKV16 + 2 * rd, D, st);
    end();
    flash_qkv16(k, a.Q, a.K, a.V);
    a.O = shadow_of(k.O);
    a.lse = train ? attn_lse[i] : nullptr;
    a.stream = st;
    begin(kInnerFwd);
    flash_attention_forward(a);
    end();
  } else {
    const AttentionForwardArgs a =
        attention_args<AttentionForwardArgs>(k, k.O, soft && train ? attn_lse[i] : nullptr);
    begin(kInnerFwd);
    attention_forward(a);
    end();
    refresh16(k.O, D);
  }
  linear(k.O, p(pre + "o_proj.weight"), D, D, out);
}

// The layers' backward: dY = ∂L/∂out → dxo = ∂L/∂x (overwritten), the four projections' gradients
// added (projections_backward in attention_layers.cpp).
void CudaTrainBackend::Impl::attention_mixer_backward(int i, const float* x, const float* dY,
                                                      const std::uint16_t* dY16, float* dxo) {
  Block& k = blocks[i];
  const std::string pre = mixer(i);
  cudaStream_t st = stream;
  // out = Z·Wo: dWo += Zᵀ·dY, dZ = dY·Woᵀ
  linear_backward(k.O, p(pre + "o_proj.weight"), dY, D, D, g(pre + "o_proj.weight"), dO, false,
                  dY16);
  const bool soft = attn_kind == AttentionKind::Softmax;
  if (flash) {
    FlashAttentionBackwardArgs a;
    a.dims = attn_dims();
    flash_qkv16(k, a.Q, a.K, a.V);
    a.O = shadow_of(k.O);
    std::uint16_t* dO16 = attn16.get();
    begin(kGemm);
    convert_to_bf16(dO, rows, D, D, dO16, D, st);
    end();
    a.dO = dO16;
    a.lse = attn_lse[i];
    a.dQ = dXQ;
    a.dK = dXK;
    a.dV = dXV;
    a.workspace = attn_ws.get();
    a.workspace_bytes = attn_ws_bytes;
    a.stream = st;
    begin(kInnerBwd);
    flash_attention_backward(a);
    end();
  } else if (chunked_linear) {
    ChunkedLinearAttentionBackwardArgs a;
    a.dims = attn_dims();
    flash_qkv16(k, a.Q, a.K, a.V);
    std::uint16_t* dO16 = attn16.get();
    begin(kGemm);
    convert_to_bf16(dO, rows, D, D, dO16, D, st);
    end();
    a.dO = dO16;
    a.dQ = dXQ;
    a.dK = dXK;
    a.dV = dXV;
    a.workspace = attn_ws.get();
    a.workspace_bytes = attn_ws_bytes;
    a.stream = st;
    begin(kInnerBwd);
    chunked_linear_attention_backward(a);
    end();
  } else {
    AttentionBackwardArgs a = attention_args<AttentionBackwardArgs>(k, soft ? k.O : nullptr,
                                                                    soft ? attn_lse[i] : nullptr);
    a.dO = dO;
    a.dQ = dXQ;
    a.dK = dXK;
    a.dV = dXV;
    a.workspace = attn_ws_bytes ? attn_ws.get() : nullptr;
    a.workspace_bytes = attn_ws_bytes;
    begin(kInnerBwd);
    attention_backward(a);
    end();
  }
  if (soft) {
    rope_rotate(dXQ, nseq, T, H, d, T, attn_rope_cos, attn_rope_sin, -1.f, st);
    rope_rotate(dXK, nseq, T, H, d, T, attn_rope_cos, attn_rope_sin, -1.f, st);
  }
  linear_backward(x, p(pre + "q_proj.weight"), dXQ, D, D, g(pre + "q_proj.weight"), dxo, false);
  linear_backward(x, p(pre + "k_proj.weight"), dXK, D, D, g(pre + "k_proj.weight"), dxo, true);
  linear_backward(x, p(pre + "v_proj.weight"), dXV, D, D, g(pre + "v_proj.weight"), dxo, true);
}

void CudaTrainBackend::Impl::backward() {
  cudaStream_t st = stream;
  deferred.clear();  // (left by a step that threw)
  const float eps = float(mc.rms_norm_eps);
  const std::string E = "model.embed_tokens.weight";
  float* dlogits = logits;  // cross_entropy wrote the gradient over the logits
  // logits = hf·Eᵀ
  const std::uint16_t* dlogits16 = round_gradient16(dlogits, V);
  mm(true, false, V, D, rows, dlogits, V, hf, D, g(E), D, true, dlogits16, nullptr);
  mm(false, false, rows, D, V, dlogits, V, p(E), D, tmp, D, false, dlogits16, nullptr);
  // With bf16 products, each RMSNorm backward whose dh feeds a product next (the down projection, o_proj)
  // also writes dh's bf16 copy, for both of that product's GEMMs: dh16_ffn at the SwiGLU, dh16_mix at
  // the mixer.
  std::uint16_t* const dh16 = dh16_ffn;
  rms_norm_backward(h_final, p("model.norm.weight"), tmp, rows, D, eps, dh, false,
                    g("model.norm.weight"), ws, st, dh16);
  for (int i = L; i-- > 0;) {
    Block& k = blocks[i];
    const std::string pre = layer(i);
    // h_out = h_mid2 + W_down(silu(a·W_gate) ⊙ a·W_up), a = RMSNorm_ffn(h_mid2)
    const float* Wdown = p(pre + "mlp.down_proj.weight");
    // With bf16 products the SwiGLU's weight gradients may run beside the inner loop (`beside`).
    if (bf16) {  // the SwiGLU's gradients in bf16 only: dHd the down product's output, dG, dU its operands
      weight_gradient(k.Hd, dh, dh16, F, D, g(pre + "mlp.down_proj.weight"), true);
      begin(kGemm);
      gemm->bf16_out(false, true, rows, F, D, 1.f, dh, D, dh16, D, Wdown, D, copy16(Wdown), D,
                     dHd16, F);
      end();
      silu_mul_backward_bf16(k.Gt16, k.Up16, dHd16, dy16.get(), dy16b.get(), std::size_t(rows) * F,
                             st);
      linear_backward(k.a_ffn, p(pre + "mlp.gate_proj.weight"), nullptr, D, F,
                      g(pre + "mlp.gate_proj.weight"), da, false, dy16.get(), true);
      linear_backward(k.a_ffn, p(pre + "mlp.up_proj.weight"), nullptr, D, F,
                      g(pre + "mlp.up_proj.weight"), da, true, dy16b.get(), true);
    } else {
      linear_backward(k.Hd, Wdown, dh, F, D, g(pre + "mlp.down_proj.weight"), dHd, false);
      silu_mul_backward(k.Gt, k.Up, dHd, dHd, dUp, std::size_t(rows) * F, st);
      linear_backward(k.a_ffn, p(pre + "mlp.gate_proj.weight"), dHd, D, F, g(pre + "mlp.gate_proj.weight"), da, false);
      linear_backward(k.a_ffn, p(pre + "mlp.up_proj.weight"), dUp, D, F, g(pre + "mlp.up_proj.weight"), da, true);
    }
    rms_norm_backward(k.h_mid2, p(pre + "ffn_norm.weight"), da, rows, D, eps, dh, true,
                      g(pre + "ffn_norm.weight"), ws, st, dh16_mix);
    // h_mid2 = h_mid1 + mixer(RMSNorm_seq(h_mid1))
    if (attention)
      attention_mixer_backward(i, k.a_seq, dh, dh16_mix, da);
    else if (mamba2)
      mamba2_layer_backward(m2_product(), m2_batch(), m2_params(i), k.a_seq, k.m2, dh, m2_grads(i),
                            da, false, m2_ws, st);
    else if (deltanet)
      deltanet_layer_backward(m2_product(), dn_batch(), dn_params(i), k.a_seq, k.dn, dh, dn_grads(i),
                              da, false, dn_ws, st);
    else if (titans)
      titans_layer_backward(m2_product(), tt_batch(), tt_params(i), k.a_seq, k.tt, dh, tt_grads(i),
                            da, false, tt_ws, st);
    else if (lact)
      lact_layer_backward(m2_product(), lact_inner_gemm(), lc_batch(), lc_params(i), k.a_seq, k.lc, dh, lc_grads(i),
                          da, false, lc_ws, st);
    else
      ttt_backward(i, k.a_seq, dh, dh16_mix, da);
    rms_norm_backward(
        k.h_mid1, p(pre + "seq_norm.weight"), da, rows, D, eps, dh, true,
        g(pre + "seq_norm.weight"), ws, st,
        mamba ? nullptr : dh16);  // with the Mamba backbone the conv's backward reads it
    // h_mid1 = h_in + conv(RMSNorm_conv(h_in))
    if (mamba) {
      causal_conv_backward(k.a_conv, p(pre + "conv.conv.weight"), dh, nseq, T, D, K, da, false,
                           g(pre + "conv.conv.weight"), g(pre + "conv.conv.bias"), ws, st);
      rms_norm_backward(k.h_in, p(pre + "conv.norm.weight"), da, rows, D, eps, dh, true,
                        g(pre + "conv.norm.weight"), ws, st, dh16);
    }
  }
  embedding_backward(emb_offsets.get(), emb_rows.get(), V, D, dh, g(E), st);
  if (!attention && !own_layer() && !mc.learnable_w0) {
    // W0 is fixed at zero in this variant: drop its gradient (model.cpp does the same).
    for (int i = 0; i < L; ++i) {
      const std::string pre = mixer(i);
      const std::size_t hw = ttt_mlp ? 4 * std::size_t(d) : d;  // the inner hidden width
      TTTLAB_CUDA_CHECK(cudaMemsetAsync(g(pre + "W1"), 0, std::size_t(H) * d * hw * sizeof(float), st));
      if (mc.inner_bias) TTTLAB_CUDA_CHECK(cudaMemsetAsync(g(pre + "b1"), 0, std::size_t(H) * hw * sizeof(float), st));
      if (ttt_mlp) {
        TTTLAB_CUDA_CHECK(cudaMemsetAsync(g(pre + "W2"), 0, std::size_t(H) * hw * d * sizeof(float), st));
        if (mc.inner_bias) TTTLAB_CUDA_CHECK(cudaMemsetAsync(g(pre + "b2"), 0, std::size_t(H) * d * sizeof(float), st));
      }
    }
  }
}

double CudaTrainBackend::Impl::loss_sum() const {
  std::vector<float> l(rows);
  TTTLAB_CUDA_CHECK(cudaMemcpyAsync(l.data(), losses, rows * sizeof(float), cudaMemcpyDeviceToHost, stream));
  sync();
  // In row order, in double, as softmax_cross_entropy sums a sequence and the Trainer its sequences.
  double s = 0;
  for (float v : l) s += double(v);
  return s;
}

// ---- public interface ----------------------------------------------------------------------------

CudaTrainBackend::CudaTrainBackend(const TrainBackendContext& ctx, const CudaTrainOptions& options)
    : m_impl(std::make_unique<Impl>()) {
  Impl& s = *m_impl;
  if (!ctx.config || !ctx.model || !ctx.optim) throw std::invalid_argument("train_cuda: incomplete backend context");
  s.mc = ctx.model->config();
  if (const std::string why = cuda_train_unsupported(s.mc); !why.empty()) throw std::invalid_argument(why);
  s.model = ctx.model;
  s.optim = ctx.optim;
  s.options = options;
  s.Bmax = ctx.config->batch_size;
  s.T = ctx.config->seq_len;
  s.D = s.mc.hidden_size;
  s.F = s.mc.intermediate_size;
  s.V = s.mc.vocab_size;
  s.L = s.mc.num_hidden_layers;
  s.H = s.mc.num_attention_heads;
  s.d = s.mc.head_dim();
  s.b = s.mc.mini_batch_size;
  s.K = s.mc.mamba_backbone ? s.mc.conv_kernel : 0;
  s.mamba = s.mc.mamba_backbone;
  s.ttt_mlp = s.mc.seq_layer == SeqLayerKind::TTTMLP;
  s.group = std::max(1, s.mc.scan_checkpoint_group_size);
  s.attention = s.mc.seq_layer == SeqLayerKind::LinearAttention || s.mc.seq_layer == SeqLayerKind::SoftmaxAttention;
  s.mamba2 = s.mc.seq_layer == SeqLayerKind::Mamba2;
  if (s.mamba2) s.m2dims = mamba2_dims(s.mc, s.Bmax, s.T);
  s.deltanet = s.mc.is_deltanet();
  if (s.deltanet) s.dndims = deltanet_dims(s.mc, s.Bmax, s.T);
  s.titans = s.mc.seq_layer == SeqLayerKind::Titans;
  if (s.titans) s.ttdims = titans_dims(s.mc, s.Bmax, s.T);
  s.lact = s.mc.seq_layer == SeqLayerKind::Lact;
  if (s.lact) s.lcdims = lact_dims(s.mc, s.Bmax, s.T);
  s.attn_kind = s.mc.seq_layer == SeqLayerKind::LinearAttention ? AttentionKind::Linear : AttentionKind::Softmax;

  const CudaQuery q = query_cuda_devices();
  if (q.status != CudaStatus::Ok) throw std::runtime_error("train_cuda: no CUDA device: " + q.message);
  if (options.device < 0 || options.device >= static_cast<int>(q.devices.size()))
    throw std::invalid_argument("train_cuda: CUDA device " + std::to_string(options.device) + " does not exist");
  s.device_name = q.devices[options.device].name;
  TTTLAB_CUDA_CHECK(cudaSetDevice(options.device));
  // The step's stream at the highest priority, the side stream of the weight gradients (`beside`) at
  // the lowest: where both have work ready, the step's kernels are given SMs first.
  int lowest = 0, highest = 0;
  TTTLAB_CUDA_CHECK(cudaDeviceGetStreamPriorityRange(&lowest, &highest));
  TTTLAB_CUDA_CHECK(cudaStreamCreateWithPriority(&s.stream, cudaStreamNonBlocking, highest));
  s.gemm = std::make_unique<Gemm>(s.stream, options.gemm, options.engine);
  s.bf16 = options.gemm == GemmPrecision::Bf16 && s.gemm->engine() == GemmEngine::Cublas;
  if (s.lact && options.gemm == GemmPrecision::Bf16)
    s.lact_gemm = std::make_unique<Gemm>(s.stream, GemmPrecision::Tf32, options.engine);
  // TTT-Linear only: beside the TTT-MLP backward (whose carry lives in L2, which the products'
  // operands then stream through) the bf16 step measured no faster, and slower with the carry pinned
  // in an L2 set-aside (docs/history/kernels-notebook.md has the runs).
  // Mamba-2's chunked scan on the tensor cores (bf16 operands, fp32 accumulation) in the bf16 step.
  s.m2dims.scan_tensor_cores = s.bf16;
  s.m2dims.bf16_products = s.bf16;
  // DeltaNet's and Gated DeltaNet's inner loop in the chunked form on the tensor cores in the bf16 step.
  s.dndims.bf16_inner = s.bf16;
  s.beside = s.bf16 && !s.attention && !s.ttt_mlp && !s.own_layer();
  s.flash = s.bf16 && s.attention && s.attn_kind == AttentionKind::Softmax &&
            flash_attention_supported(AttentionDims{1, s.H, s.T, s.d});
  if (options.gemm == GemmPrecision::Tf32 && s.attention && s.attn_kind == AttentionKind::Softmax &&
      attention_tf32_supported(AttentionDims{1, s.H, s.T, s.d}))
    s.attn_precision = AttentionPrecision::tf32;
  s.chunked_linear = s.bf16 && s.attention && s.attn_kind == AttentionKind::Linear &&
               chunked_linear_attention_supported(AttentionDims{1, s.H, s.T, s.d});
  if (s.beside) {
    TTTLAB_CUDA_CHECK(cudaStreamCreateWithPriority(&s.side_stream, cudaStreamNonBlocking, lowest));
    s.side_gemm = std::make_unique<Gemm>(s.side_stream, options.gemm, options.engine);
    TTTLAB_CUDA_CHECK(cudaEventCreateWithFlags(&s.side_ready, cudaEventDisableTiming));
    TTTLAB_CUDA_CHECK(cudaEventCreateWithFlags(&s.side_done, cudaEventDisableTiming));
  }
  s.layout(*s.model);
  s.allocate();
  TTTLAB_CUDA_CHECK(cudaStreamSynchronize(s.stream));
  s.upload_params();
  s.upload_optimizer();
}

CudaTrainBackend::~CudaTrainBackend() {
  if (m_impl && m_impl->stream) {
    cudaSetDevice(m_impl->options.device);
    cudaStreamSynchronize(m_impl->stream);
    m_impl->storage.clear();
    m_impl->storage16.clear();
    m_impl->gemm.reset();  // its cuBLAS handle is bound to the stream
    m_impl->lact_gemm.reset();
    for (cudaEvent_t e : m_impl->events) cudaEventDestroy(e);
    cudaStreamDestroy(m_impl->stream);
    if (m_impl->side_stream) {  // idle: every queued product was joined into the stream
      m_impl->side_gemm.reset();
      cudaEventDestroy(m_impl->side_ready);
      cudaEventDestroy(m_impl->side_done);
      cudaStreamDestroy(m_impl->side_stream);
    }
  }
}

std::string CudaTrainBackend::describe() const {
  return "CUDA: " + m_impl->device_name + ", " + m_impl->gemm->describe() +
         (m_impl->flash ? ", attention on tensor cores (bf16)" : "") +
         (m_impl->chunked_linear ? ", linear attention chunked on tensor cores (bf16)" : "") +
         (!m_impl->mamba2 ? ""
          : m_impl->m2dims.scan_tensor_cores &&
                  mamba2_scan_tensor_cores_unsupported(m_impl->m2dims.scan()).empty()
              ? ", Mamba-2 chunked scan on tensor cores (bf16)"
              : ", Mamba-2 chunked scan on CUDA cores (fp32)") +
         (!m_impl->deltanet ? ""
          : deltanet_layer_chunked(m_impl->dndims)
              ? ", delta rule chunked on tensor cores (bf16)"
              : ", delta rule recurrent on CUDA cores (fp32)") +
         (m_impl->titans ? ", Titans' memory recurrent on CUDA cores (fp32)" : "") +
         (m_impl->lact ? std::string(", LaCT's fast weights in chunks on batched ") +
                              to_string(m_impl->lact_inner_gemm()->precision()) +
                              " products, its windowed attention on CUDA cores (fp32)"
                        : std::string()) +
         (m_impl->options.forward_only ? ", forward only (two blocks' activations, taken in turn)" : "");
}

std::int64_t CudaTrainBackend::step_count() const { return m_impl->step; }

std::size_t CudaTrainBackend::device_bytes() const {
  const Impl& s = *m_impl;
  std::size_t n = s.P.bytes() + s.G.bytes() + s.M1.bytes() + s.M2.bytes() + s.ttt_ws.bytes() + s.tokens.bytes() +
                  s.targets.bytes() + s.emb_offsets.bytes() + s.emb_rows.bytes() + s.norm_ws.bytes() +
                  s.attn_ws.bytes() + s.norm_out.bytes() + s.P16.bytes() + s.shadow_store.bytes() + s.dy16.bytes() +
                  s.dy16b.bytes() + s.attn16.bytes();
  for (const auto& a : s.storage) n += a->bytes();
  for (const auto& a : s.storage16) n += a->bytes();
  return n;
}

double CudaTrainBackend::forward_backward(const TokenBatch& batch) {
  // A batch with no counted target has a zero gradient whatever the scale.
  return forward_backward_shard(batch, std::max<std::int64_t>(1, batch.counted_targets()));
}

double CudaTrainBackend::forward_backward_shard(const TokenBatch& shard, std::int64_t denominator) {
  Impl& s = *m_impl;
  s.require_training("forward_backward");
  s.use_device();
  if (denominator < 1) throw std::invalid_argument("train_cuda: a gradient denominator of " + std::to_string(denominator));
  s.upload_batch(shard, true);
  TTTLAB_CUDA_CHECK(cudaMemsetAsync(s.G.get(), 0, s.G.bytes(), s.stream));
  // softmax_cross_entropy's gradient scale: S(1) / S(denominator), the denominator being the counted
  // targets of the whole batch (of all ranks' shards in a data-parallel step).
  s.forward(true, 1.f / float(denominator));
  s.backward();
  return s.loss_sum();
}

std::span<float> CudaTrainBackend::gradient_buffer() { return {m_impl->G.get(), m_impl->total}; }

void CudaTrainBackend::bind_thread() { m_impl->use_device(); }

void* CudaTrainBackend::cuda_stream() const { return m_impl->stream; }

int CudaTrainBackend::device() const { return m_impl->options.device; }

std::vector<double> CudaTrainBackend::time_forward(const TokenBatch& batch, int warmup, int repeats) {
  Impl& s = *m_impl;
  s.use_device();
  if (warmup < 0 || repeats < 1) throw std::invalid_argument("train_cuda: time_forward needs warmup >= 0, repeats >= 1");
  s.upload_batch(batch, false);
  for (int i = 0; i < warmup; ++i) s.forward(false, 0.f);
  cudaEvent_t a = nullptr, b = nullptr;
  TTTLAB_CUDA_CHECK(cudaEventCreate(&a));
  TTTLAB_CUDA_CHECK(cudaEventCreate(&b));
  std::vector<double> ms;
  try {
    for (int i = 0; i < repeats; ++i) {
      TTTLAB_CUDA_CHECK(cudaEventRecord(a, s.stream));
      s.forward(false, 0.f);
      TTTLAB_CUDA_CHECK(cudaEventRecord(b, s.stream));
      TTTLAB_CUDA_CHECK(cudaEventSynchronize(b));
      float t = 0;
      TTTLAB_CUDA_CHECK(cudaEventElapsedTime(&t, a, b));
      ms.push_back(t);
    }
  } catch (...) {
    cudaEventDestroy(a);
    cudaEventDestroy(b);
    throw;
  }
  cudaEventDestroy(a);
  cudaEventDestroy(b);
  return ms;
}

std::vector<CudaTrainBackend::MixerInputs> CudaTrainBackend::mixer_inputs(const TokenBatch& batch) {
  Impl& s = *m_impl;
  s.require_training("mixer_inputs");
  s.use_device();
  std::vector<MixerInputs> out;
  if (s.attention || s.own_layer()) return out;
  s.upload_batch(batch, false);
  s.forward(false, 0.f);
  const std::size_t rd = std::size_t(s.rows) * s.D, lam = std::size_t(s.nseq) * s.H * s.T;
  const auto get = [&](const float* src, std::size_t n) {
    std::vector<float> h(n);
    TTTLAB_CUDA_CHECK(cudaMemcpyAsync(h.data(), src, n * sizeof(float), cudaMemcpyDeviceToHost, s.stream));
    return h;
  };
  for (const Impl::Block& k : s.blocks) {
    MixerInputs m;
    m.Q = get(k.XQ, rd);
    m.K = get(k.XK, rd);
    m.V = get(k.XV, rd);
    m.lambda = get(k.lam, lam);
    m.tau = get(k.tau, std::size_t(s.b));
    out.push_back(std::move(m));
  }
  s.sync();
  return out;
}

BackendStep CudaTrainBackend::step(const TokenBatch& batch) {
  BackendStep out;
  out.loss_sum = forward_backward(batch);
  out.optim = apply_update();
  return out;
}

AdamWReport CudaTrainBackend::apply_update() {
  Impl& s = *m_impl;
  s.require_training("apply_update");
  s.use_device();
  AdamWReport out_optim;
  // AdamW::step, with the elements on the device.
  sum_squares(s.G.get(), s.total, s.norm_out.get(), s.norm_ws.get(), s.stream);
  double sumsq = 0;
  TTTLAB_CUDA_CHECK(cudaMemcpyAsync(&sumsq, s.norm_out.get(), sizeof(double), cudaMemcpyDeviceToHost, s.stream));
  s.sync();
  const AdamWConfig& c = s.optim->config();
  AdamWReport& r = out_optim;
  r.grad_norm = std::sqrt(sumsq);
  if (!std::isfinite(r.grad_norm)) {
    r.skipped = true;
    r.step = s.step;
    return r;
  }
  if (c.clip_norm > 0 && r.grad_norm > c.clip_norm) r.clip_scale = c.clip_norm / r.grad_norm;
  r.lr = s.optim->schedule()(s.step);
  const double n = static_cast<double>(s.step + 1);
  AdamWScalars a;
  a.b1 = static_cast<float>(c.beta1);
  a.b2 = static_cast<float>(c.beta2);
  a.one_minus_b1 = static_cast<float>(1.0 - c.beta1);
  a.one_minus_b2 = static_cast<float>(1.0 - c.beta2);
  a.inv_bc1 = static_cast<float>(1.0 / (1.0 - std::pow(c.beta1, n)));
  a.inv_bc2 = static_cast<float>(1.0 / (1.0 - std::pow(c.beta2, n)));
  a.scale = static_cast<float>(r.clip_scale);
  a.lr = static_cast<float>(r.lr);
  a.eps = static_cast<float>(c.eps);
  a.wd = static_cast<float>(c.weight_decay);
  // With bf16 products the update also writes the parameters' bf16 mirror, so the next forward
  // need not round P again.
  adamw_update(s.P.get(), s.G.get(), s.M1.get(), s.M2.get(), s.total, a, s.stream,
               s.bf16 ? s.P16.get() : nullptr);
  s.params16_current = s.bf16;
  r.step = ++s.step;
  return r;
}

BackendStep CudaTrainBackend::profile_step(const TokenBatch& batch, CudaStepProfile& profile) {
  Impl& s = *m_impl;
  s.require_training("profile_step");
  s.use_device();
  s.marks.clear();
  s.events_used = 0;
  s.profiling = true;
  const cudaEvent_t start = s.next_event();
  TTTLAB_CUDA_CHECK(cudaEventRecord(start, s.stream));
  BackendStep out;
  try {
    out = step(batch);
  } catch (...) {
    s.profiling = false;
    throw;
  }
  const cudaEvent_t stop = s.next_event();
  TTTLAB_CUDA_CHECK(cudaEventRecord(stop, s.stream));
  s.profiling = false;
  TTTLAB_CUDA_CHECK(cudaEventSynchronize(stop));
  profile = CudaStepProfile{};
  float ms = 0;
  TTTLAB_CUDA_CHECK(cudaEventElapsedTime(&ms, start, stop));
  profile.total_ms = ms;
  double phase[3] = {0, 0, 0};
  for (const auto& [ph, i] : s.marks) {
    TTTLAB_CUDA_CHECK(cudaEventElapsedTime(&ms, s.events[i], s.events[i + 1]));
    phase[ph] += ms;
  }
  profile.gemm_ms = phase[Impl::kGemm];
  profile.inner_forward_ms = phase[Impl::kInnerFwd];
  profile.inner_backward_ms = phase[Impl::kInnerBwd];
  profile.other_ms = profile.total_ms - profile.gemm_ms - profile.inner_forward_ms - profile.inner_backward_ms;
  return out;
}

EvalReport CudaTrainBackend::evaluate(std::span<const std::uint8_t> val, int seq_len, const EvalOptions& options) {
  Impl& s = *m_impl;
  s.use_device();
  if (seq_len != s.T)
    throw std::invalid_argument("train_cuda: evaluation windows of " + std::to_string(seq_len) +
                                " tokens; this backend was built for " + std::to_string(s.T));
  SequentialWindows windows(val, s.Bmax, seq_len, options.max_windows);
  if (windows.windows() <= 0) throw std::runtime_error("the validation text is shorter than one window");
  if (options.target_losses) options.target_losses->assign(static_cast<std::size_t>(windows.windows() * seq_len), 0.f);
  EvalReport r;
  r.loss_by_position.assign(seq_len, 0.0);
  double total = 0;
  long right = 0;
  std::vector<float> l, logits;
  std::int64_t done = 0;
  for (std::int64_t k = 0; k < windows.batches(); ++k) {
    const TokenBatch batch = windows.batch_at(k);
    s.upload_batch(batch, false);
    s.forward(false, 0.f);
    l.resize(s.rows);
    // The logits stay intact in evaluation (the loss kernel writes no gradient over them): the
    // next-byte accuracy is their argmax, taken here on the host.
    logits.resize(static_cast<std::size_t>(s.rows) * s.V);
    TTTLAB_CUDA_CHECK(cudaMemcpyAsync(l.data(), s.losses, s.rows * sizeof(float), cudaMemcpyDeviceToHost, s.stream));
    TTTLAB_CUDA_CHECK(cudaMemcpyAsync(logits.data(), s.logits, logits.size() * sizeof(float), cudaMemcpyDeviceToHost, s.stream));
    s.sync();
    for (int w = 0; w < batch.batch; ++w)
      for (int t = 0; t < seq_len; ++t) {
        const std::size_t row = std::size_t(w) * seq_len + t;
        const double v = l[row];
        total += v;
        r.loss_by_position[t] += v;
        ++r.targets;
        const float* z = logits.data() + row * s.V;
        if (std::max_element(z, z + s.V) - z == batch.target(w, t)) ++right;  // ties: the first, as on the CPU
      }
    if (options.target_losses)
      std::copy(l.begin(), l.begin() + std::size_t(batch.batch) * seq_len,
                options.target_losses->begin() + (k * s.Bmax) * seq_len);
    done += batch.batch;
    if (options.progress) options.progress(done, windows.windows());
  }
  const double n = double(windows.windows());
  for (double& v : r.loss_by_position) v /= n;
  r.loss = total / double(r.targets);
  r.bpb = r.loss / std::log(2.0);
  r.accuracy = double(right) / double(r.targets);
  r.accuracy_measured = true;
  return r;
}

void CudaTrainBackend::pull_to_host() {
  Impl& s = *m_impl;
  s.use_device();
  s.sync();
  std::size_t k = 0;
  s.model->for_each_param([&](Eigen::Map<Mat<float>> t, const std::string&) {
    const Impl::Tensor& x = s.tensors.at(k++);
    TTTLAB_CUDA_CHECK(cudaMemcpy(t.data(), s.P.get() + x.offset, x.size() * sizeof(float), cudaMemcpyDeviceToHost));
  });
  AdamWState<float> st;
  st.step = s.step;
  if (s.step > 0 || !s.optim->state().names.empty()) {
    for (const Impl::Tensor& x : s.tensors) {
      st.names.push_back(x.name);
      st.m.emplace_back(x.size());
      st.v.emplace_back(x.size());
      TTTLAB_CUDA_CHECK(cudaMemcpy(st.m.back().data(), s.M1.get() + x.offset, x.size() * sizeof(float), cudaMemcpyDeviceToHost));
      TTTLAB_CUDA_CHECK(cudaMemcpy(st.v.back().data(), s.M2.get() + x.offset, x.size() * sizeof(float), cudaMemcpyDeviceToHost));
    }
  }
  s.optim->load_state(std::move(st));
}

void CudaTrainBackend::push_from_host() {
  Impl& s = *m_impl;
  s.use_device();
  s.sync();
  s.upload_params();
  s.upload_optimizer();
}

std::vector<std::vector<float>> CudaTrainBackend::download_gradients() const {
  const Impl& s = *m_impl;
  s.use_device();
  s.sync();
  std::vector<std::vector<float>> out;
  for (const Impl::Tensor& x : s.tensors) {
    out.emplace_back(x.size());
    TTTLAB_CUDA_CHECK(cudaMemcpy(out.back().data(), s.G.get() + x.offset, x.size() * sizeof(float), cudaMemcpyDeviceToHost));
  }
  return out;
}

TrainBackendFactory cuda_train_backend_factory(const CudaTrainOptions& options) {
  return [options](const TrainBackendContext& ctx) -> std::unique_ptr<TrainBackend> {
    return std::make_unique<CudaTrainBackend>(ctx, options);
  };
}

}  // namespace tttlab::kernels
