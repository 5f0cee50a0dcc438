// The byte-level language model (see tttlab/model/model.hpp).
#include "tttlab/model/model.hpp"

#include <cmath>
#include <stdexcept>
#include <string>

#include "tttlab/nn/causal_conv.hpp"
#include "tttlab/nn/embedding.hpp"
#include "tttlab/nn/norms.hpp"
#include "tttlab/nn/swiglu.hpp"
#include "tttlab/util/rng.hpp"

namespace tttlab {

template <class S>
struct Model<S>::Block {
  RowVec<S> conv_norm;       // [D] pre-conv RMSNorm (Mamba backbone)
  Mat<S> conv_w;             // [D, K]
  RowVec<S> conv_b;          // [D]
  RowVec<S> seq_norm;        // [D]
  std::unique_ptr<SequenceLayer<S>> mixer;
  RowVec<S> ffn_norm;        // [D]
  Mat<S> w_gate, w_up;       // [D, F]
  Mat<S> w_down;             // [F, D]
};

namespace {

template <class S>
Mat<S> normal_mat(Eigen::Index r, Eigen::Index c, double std, Rng& rng) {
  Mat<S> m(r, c);
  for (Eigen::Index i = 0; i < m.size(); ++i) m.data()[i] = S(std * rng.normal());
  return m;
}

template <class S>
void visit(Mat<S>& m, const std::string& name, const ParamVisitor<S>& f) {
  if (m.size()) f(Eigen::Map<Mat<S>>(m.data(), m.rows(), m.cols()), name);
}
template <class S>
void visit(RowVec<S>& m, const std::string& name, const ParamVisitor<S>& f) {
  if (m.size()) f(Eigen::Map<Mat<S>>(m.data(), 1, m.cols()), name);
}

// The per-sequence activations the backward needs, block by block.
template <class S>
struct BlockCache {
  Mat<S> h_in, a_conv;               // before the pre-conv, its normed input
  Mat<S> h_mid1, a_seq;              // before the mixer, its normed input
  std::unique_ptr<LayerCache> mixer;
  Mat<S> h_mid2, a_ffn;              // before the FFN, its normed input
  SwigluCache<S> ffn;
};

template <class S>
struct ModelStreamT : ModelStream {
  std::vector<Mat<S>> conv_history;                    // per block, [K−1, D]
  std::vector<std::unique_ptr<SequenceState>> mixers;  // per block
};

std::vector<int> inputs_of(std::span<const int> tokens) {
  if (tokens.size() < 2) throw std::invalid_argument("model: a training sequence needs at least 2 tokens");
  return std::vector<int>(tokens.begin(), tokens.end() - 1);
}

std::vector<int> targets_of(std::span<const int> tokens, std::span<const std::uint8_t> mask) {
  const std::size_t T = tokens.size() - 1;
  if (!mask.empty() && mask.size() != T)
    throw std::invalid_argument("model: the mask must have one entry per target (" + std::to_string(T) + ")");
  std::vector<int> t(tokens.begin() + 1, tokens.end());
  for (std::size_t i = 0; i < mask.size(); ++i)
    if (!mask[i]) t[i] = k_ignore_target;
  return t;
}

// One block of a stream, up to its mixer: h gains the causal-conv branch (Mamba backbone only), then
// a = seq_norm(h) is the mixer's input. `tmp` is scratch.
template <class S, class Block>
void stream_mixer_input(const Block& b, bool mamba_backbone, S eps, Mat<S>& conv_history, Mat<S>& h,
                        Mat<S>& a, Mat<S>& tmp) {
  if (mamba_backbone) {
    rms_norm_forward<S>(h, b.conv_norm, a, eps);
    causal_conv_forward<S>(a, b.conv_w, b.conv_b, conv_history, tmp);
    h += tmp;
  }
  rms_norm_forward<S>(h, b.seq_norm, a, eps);
}

// One block of a stream, after its mixer: h gains the SwiGLU feed-forward of ffn_norm(h).
template <class S, class Block>
void stream_feed_forward(const Block& b, S eps, Mat<S>& h, Mat<S>& a, Mat<S>& tmp) {
  rms_norm_forward<S>(h, b.ffn_norm, a, eps);
  SwigluCache<S> cache;
  swiglu_forward<S>(a, b.w_gate, b.w_up, b.w_down, tmp, cache);
  h += tmp;
}

}  // namespace

template <class S>
Model<S>::Model(const ModelConfig& cfg, std::uint64_t seed) : Model(cfg, false, seed) {}

template <class S>
Model<S>::Model(const ModelConfig& cfg, bool zeros, std::uint64_t seed) : m_cfg(cfg) {
  m_cfg.validate();
  Rng rng(seed);
  const int D = cfg.hidden_size, F = cfg.intermediate_size, K = cfg.conv_kernel;
  const double s = zeros ? 0.0 : cfg.initializer_range;
  const double one = zeros ? 0.0 : 1.0;
  auto normal = [&rng, zeros] { return zeros ? 0.0 : rng.normal(); };
  m_embed = normal_mat<S>(cfg.vocab_size, D, s, rng);
  for (int i = 0; i < cfg.num_hidden_layers; ++i) {
    auto b = std::make_unique<Block>();
    if (cfg.mamba_backbone) {
      b->conv_norm = RowVec<S>::Constant(D, S(one));
      // Flax's default conv init: lecun-normal, fan-in K for a depthwise kernel.
      b->conv_w = normal_mat<S>(D, K, zeros ? 0.0 : 1.0 / std::sqrt(double(K)), rng);
      b->conv_b = RowVec<S>::Zero(D);
    }
    b->seq_norm = RowVec<S>::Constant(D, S(one));
    if (cfg.is_ttt()) {
      const TTTLayerConfig tc = cfg.ttt_layer_config();
      TTTLayerParams<S> p = zeros ? TTTLayerParams<S>::zeros(tc) : TTTLayerParams<S>::init(tc, normal);
      if (!cfg.learnable_w0)
        for (auto& w : p.W0) w.set_zero();
      b->mixer = std::make_unique<TTTLayer<S>>(tc, std::move(p));
    } else if (cfg.seq_layer == SeqLayerKind::Mamba2) {
      const Mamba2Config mc = cfg.mamba2_config();
      b->mixer = std::make_unique<Mamba2Layer<S>>(mc, zeros ? Mamba2Params<S>::zeros(mc) : Mamba2Params<S>::init(mc, s, rng));
    } else if (cfg.is_deltanet()) {
      const DeltaNetConfig dc = cfg.deltanet_config();
      b->mixer = std::make_unique<DeltaNetLayer<S>>(
          dc, zeros ? DeltaNetParams<S>::zeros(dc) : DeltaNetParams<S>::init(dc, s, rng));
    } else if (cfg.seq_layer == SeqLayerKind::Lact) {
      const LactLayerConfig lc = cfg.lact_config();
      b->mixer = std::make_unique<LactLayer<S>>(
          lc, zeros ? LactParams<S>::zeros(lc) : LactParams<S>::init(lc, s, rng));
    } else if (cfg.seq_layer == SeqLayerKind::Titans) {
      const TitansLayerConfig tc = cfg.titans_config();
      b->mixer = std::make_unique<TitansLayer<S>>(
          tc, zeros ? TitansParams<S>::zeros(tc) : TitansParams<S>::init(tc, s, rng));
    } else {
      const AttentionConfig ac = cfg.attention_config();
      AttentionParams<S> p = AttentionParams<S>::init(ac, [&] { return normal() * (s / 0.02); });
      if (cfg.seq_layer == SeqLayerKind::LinearAttention)
        b->mixer = std::make_unique<LinearAttentionLayer<S>>(ac, std::move(p));
      else
        b->mixer = std::make_unique<SoftmaxAttentionLayer<S>>(ac, std::move(p));
    }
    b->ffn_norm = RowVec<S>::Constant(D, S(one));
    b->w_gate = normal_mat<S>(D, F, s, rng);
    b->w_up = normal_mat<S>(D, F, s, rng);
    b->w_down = normal_mat<S>(F, D, s, rng);
    m_blocks.push_back(std::move(b));
  }
  m_final_norm = RowVec<S>::Constant(D, S(one));
}

template <class S>
Model<S>::~Model() = default;

template <class S>
std::unique_ptr<Model<S>> Model<S>::zeros_like() const {
  return std::unique_ptr<Model>(new Model(m_cfg, true, 0));
}

template <class S>
void Model<S>::for_each_param(const ParamVisitor<S>& f) {
  visit<S>(m_embed, "model.embed_tokens.weight", f);
  for (size_t i = 0; i < m_blocks.size(); ++i) {
    Block& b = *m_blocks[i];
    const std::string pre = "model.layers." + std::to_string(i) + ".";
    visit<S>(b.conv_norm, pre + "conv.norm.weight", f);
    visit<S>(b.conv_w, pre + "conv.conv.weight", f);
    visit<S>(b.conv_b, pre + "conv.conv.bias", f);
    visit<S>(b.seq_norm, pre + "seq_norm.weight", f);
    b.mixer->for_each_param([&](Eigen::Map<Mat<S>> m, const std::string& n) {
      f(m, pre + "seq_modeling_block." + n);
    });
    visit<S>(b.ffn_norm, pre + "ffn_norm.weight", f);
    visit<S>(b.w_gate, pre + "mlp.gate_proj.weight", f);
    visit<S>(b.w_up, pre + "mlp.up_proj.weight", f);
    visit<S>(b.w_down, pre + "mlp.down_proj.weight", f);
  }
  visit<S>(m_final_norm, "model.norm.weight", f);
}

template <class S>
long Model<S>::num_params() {
  long n = 0;
  for_each_param([&n](Eigen::Map<Mat<S>> m, const std::string&) { n += m.size(); });
  return n;
}

template <class S>
void Model<S>::set_zero() {
  for_each_param([](Eigen::Map<Mat<S>> m, const std::string&) { m.setZero(); });
}

template <class S>
const SequenceLayer<S>& Model<S>::mixer(int block) const {
  return *m_blocks.at(block)->mixer;
}

template <class S>
double Model<S>::forward_flops(long T) const {
  const double D = m_cfg.hidden_size, F = m_cfg.intermediate_size, V = m_cfg.vocab_size;
  double flops = 2.0 * T * D * V;  // tied head
  for (const auto& b : m_blocks) flops += b->mixer->forward_flops(T) + 2.0 * T * 3 * D * F;
  return flops;
}

// ---- training -------------------------------------------------------------------------------------

template <class S>
CrossEntropyStats Model<S>::train_sequence(std::span<const int> tokens, std::span<const std::uint8_t> mask,
                                           long denominator, Model& g) const {
  const std::vector<int> x = inputs_of(tokens);
  const std::vector<int> y = targets_of(tokens, mask);
  const S eps = S(m_cfg.rms_norm_eps);
  const Eigen::Index T = static_cast<Eigen::Index>(x.size());
  const int D = m_cfg.hidden_size, K = m_cfg.conv_kernel;

  // Forward, keeping every block's activations.
  Mat<S> h;
  embedding_forward<S>(m_embed, x, h);
  std::vector<BlockCache<S>> caches(m_blocks.size());
  for (size_t i = 0; i < m_blocks.size(); ++i) {
    const Block& b = *m_blocks[i];
    BlockCache<S>& c = caches[i];
    if (m_cfg.mamba_backbone) {
      c.h_in = h;
      rms_norm_forward<S>(h, b.conv_norm, c.a_conv, eps);
      Mat<S> hist = Mat<S>::Zero(K - 1, D), conv;
      causal_conv_forward<S>(c.a_conv, b.conv_w, b.conv_b, hist, conv);
      h += conv;
    }
    c.h_mid1 = h;
    rms_norm_forward<S>(h, b.seq_norm, c.a_seq, eps);
    Mat<S> m;
    c.mixer = b.mixer->forward_train(c.a_seq, m);
    h += m;
    c.h_mid2 = h;
    rms_norm_forward<S>(h, b.ffn_norm, c.a_ffn, eps);
    Mat<S> f;
    swiglu_forward<S>(c.a_ffn, b.w_gate, b.w_up, b.w_down, f, c.ffn);
    h += f;
  }
  Mat<S> hf, logits, dlogits;
  rms_norm_forward<S>(h, m_final_norm, hf, eps);
  tied_head_forward<S>(hf, m_embed, logits);
  const CrossEntropyStats stats = softmax_cross_entropy<S>(logits, y, &dlogits, nullptr, denominator);

  // Backward.
  Mat<S> dhf, dh, tmp;
  tied_head_backward<S>(hf, m_embed, dlogits, &dhf, g.m_embed);
  rms_norm_backward<S>(h, m_final_norm, dhf, dh, g.m_final_norm, eps);
  for (size_t i = m_blocks.size(); i-- > 0;) {
    const Block& b = *m_blocks[i];
    Block& gb = *g.m_blocks[i];
    BlockCache<S>& c = caches[i];
    // h_out = h_mid2 + FFN(norm(h_mid2))
    Mat<S> da;
    swiglu_backward<S>(c.a_ffn, b.w_gate, b.w_up, b.w_down, c.ffn, dh, da, gb.w_gate, gb.w_up, gb.w_down);
    rms_norm_backward<S>(c.h_mid2, b.ffn_norm, da, tmp, gb.ffn_norm, eps);
    dh += tmp;
    // h_mid2 = h_mid1 + mixer(norm(h_mid1))
    b.mixer->backward(*c.mixer, dh, *gb.mixer, da);
    rms_norm_backward<S>(c.h_mid1, b.seq_norm, da, tmp, gb.seq_norm, eps);
    dh += tmp;
    // h_mid1 = h_in + conv(norm(h_in))
    if (m_cfg.mamba_backbone) {
      causal_conv_backward<S>(c.a_conv, b.conv_w, dh, da, gb.conv_w, gb.conv_b);
      rms_norm_backward<S>(c.h_in, b.conv_norm, da, tmp, gb.conv_norm, eps);
      dh += tmp;
    }
  }
  embedding_backward<S>(x, dh, g.m_embed);
  if (m_cfg.is_ttt() && !m_cfg.learnable_w0) {
    // W0 is fixed at zero in this variant: drop its gradient.
    for (auto& gb : g.m_blocks)
      gb->mixer->for_each_param([](Eigen::Map<Mat<S>> m, const std::string& n) {
        if (n.rfind("W1[", 0) == 0 || n.rfind("b1[", 0) == 0 || n.rfind("W2[", 0) == 0 || n.rfind("b2[", 0) == 0)
          m.setZero();
      });
  }
  (void)T;
  return stats;
}

template <class S>
CrossEntropyStats Model<S>::eval_sequence(std::span<const int> tokens, std::span<const std::uint8_t> mask,
                                          Vec<S>* position_losses) const {
  const std::vector<int> x = inputs_of(tokens);
  const std::vector<int> y = targets_of(tokens, mask);
  auto st = start();
  const Mat<S> logits = forward(*st, x);
  return softmax_cross_entropy<S>(logits, y, nullptr, position_losses);
}

// ---- streaming inference -----------------------------------------------------------------------------

template <class S>
std::unique_ptr<ModelStream> Model<S>::start() const {
  auto st = std::make_unique<ModelStreamT<S>>();
  for (const auto& b : m_blocks) {
    st->conv_history.push_back(m_cfg.mamba_backbone ? Mat<S>(Mat<S>::Zero(m_cfg.conv_kernel - 1, m_cfg.hidden_size))
                                                   : Mat<S>());
    st->mixers.push_back(b->mixer->start());
  }
  return st;
}

template <class S>
Mat<S> Model<S>::forward(ModelStream& stream, std::span<const int> tokens) const {
  return forward(stream, tokens, BlockObserver());
}

template <class S>
Mat<S> Model<S>::mixer_input(std::span<const int> tokens, int block) const {
  if (block < 0 || block >= static_cast<int>(m_blocks.size()))
    throw std::invalid_argument("model: block " + std::to_string(block) + " does not exist (the model has " +
                                std::to_string(m_blocks.size()) + ")");
  const S eps = S(m_cfg.rms_norm_eps);
  auto st = start();
  auto* s = static_cast<ModelStreamT<S>*>(st.get());
  Mat<S> h, a, tmp;
  embedding_forward<S>(m_embed, tokens, h);
  for (int i = 0;; ++i) {
    const Block& b = *m_blocks[i];
    stream_mixer_input<S>(b, m_cfg.mamba_backbone, eps, s->conv_history[i], h, a, tmp);
    if (i == block) return a;
    h += b.mixer->forward(*s->mixers[i], a);
    stream_feed_forward<S>(b, eps, h, a, tmp);
  }
}

template <class S>
Mat<S> Model<S>::forward(ModelStream& stream, std::span<const int> tokens, const BlockObserver& observer) const {
  auto* st = dynamic_cast<ModelStreamT<S>*>(&stream);
  if (!st) throw std::invalid_argument("model: forward() was given a stream of another model");
  const S eps = S(m_cfg.rms_norm_eps);
  Mat<S> h, a, tmp;
  embedding_forward<S>(m_embed, tokens, h);
  for (size_t i = 0; i < m_blocks.size(); ++i) {
    const Block& b = *m_blocks[i];
    stream_mixer_input<S>(b, m_cfg.mamba_backbone, eps, st->conv_history[i], h, a, tmp);
    const auto* ttt = observer ? dynamic_cast<const TTTLayer<S>*>(b.mixer.get()) : nullptr;
    if (ttt) {
      const int block = static_cast<int>(i);
      h += ttt->forward(static_cast<TTTLayerState<S>&>(*st->mixers[i]), a, TTTForm::Primal,
                        [&observer, block](int head, const InnerStepRecord<S>& r) { observer(block, head, r); });
    } else {
      h += b.mixer->forward(*st->mixers[i], a);
    }
    stream_feed_forward<S>(b, eps, h, a, tmp);
  }
  Mat<S> logits;
  rms_norm_forward<S>(h, m_final_norm, a, eps);
  tied_head_forward<S>(a, m_embed, logits);
  st->tokens += static_cast<long>(tokens.size());
  return logits;
}

template class Model<float>;
template class Model<double>;

}  // namespace tttlab
