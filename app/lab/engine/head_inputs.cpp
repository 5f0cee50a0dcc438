#include "lab/engine/head_inputs.hpp"

#include <cmath>
#include <cstdio>
#include <stdexcept>

#include "lab/engine/compute_device.hpp"
#include "lab/models/model_library.hpp"
#include "tttlab/model/model.hpp"
#include "tttlab/ttt/eta.hpp"
#include "tttlab/ttt/layer.hpp"
#include "tttlab/util/rng.hpp"

namespace tttlab::lab {
namespace {

// Independent random streams of one seed (Rng's stream argument).
enum Stream : std::uint64_t { kEmbedding = 1, kProjQ, kProjK, kProjV, kGate, kInit, kDecayGate };

template <class S>
Mat<S> gaussian(Rng& rng, long rows, long cols, double stddev) {
  Mat<S> m(rows, cols);
  for (long i = 0; i < rows; ++i)
    for (long j = 0; j < cols; ++j) m(i, j) = static_cast<S>(stddev * rng.normal());
  return m;
}

template <class S>
InnerWeights<S> cast_weights(const InnerWeights<float>& w) {
  InnerWeights<S> o;
  o.W1 = w.W1.template cast<S>();
  o.b1 = w.b1.template cast<S>();
  o.W2 = w.W2.template cast<S>();
  o.b2 = w.b2.template cast<S>();
  return o;
}

}  // namespace

std::vector<unsigned char> config_bytes(const HeadConfig& c) {
  std::vector<unsigned char> b;
  b.reserve(static_cast<std::size_t>(c.tokens()));
  for (int r = 0; r < c.repeat; ++r) b.insert(b.end(), c.text.begin(), c.text.end());
  return b;
}

template <class S>
HeadInputs<S> make_toy_head(const HeadConfig& c) {
  HeadInputs<S> h;
  h.options = c.inner_options();
  const int d = c.d;
  h.bytes = config_bytes(c);
  const long T = h.tokens();

  // The embedding table has one row per byte value; rows are drawn in byte order so a byte's
  // vector does not depend on the text.
  Rng emb_rng(c.seed, kEmbedding);
  const Mat<S> table = gaussian<S>(emb_rng, 256, d, 1.0);
  Mat<S> X(T, d);
  for (long t = 0; t < T; ++t) X.row(t) = table.row(h.bytes[static_cast<std::size_t>(t)]);

  const double proj_std = 1.0 / std::sqrt(static_cast<double>(d));
  Rng rq(c.seed, kProjQ), rk(c.seed, kProjK), rv(c.seed, kProjV), rg(c.seed, kGate);
  h.Q = X * gaussian<S>(rq, d, d, proj_std);
  h.K = X * gaussian<S>(rk, d, d, proj_std);
  h.V = X * gaussian<S>(rv, d, d, proj_std);

  const RowVec<S> theta = gaussian<S>(rg, 1, d, proj_std);
  h.lambda = per_token_lr<S>(c.eta_options(), X, theta, S(0), d);

  h.params.ln_weight = RowVec<S>::Ones(d);
  h.params.ln_bias = RowVec<S>::Zero(d);
  h.params.tau = token_index_scale<S>(c.eta_options(), RowVec<S>::Zero(c.mini_batch));

  h.w0 = InnerWeights<S>::zeros(h.options, d);
  if (c.w0 == W0Init::Random) {
    Rng ri(c.seed, kInit);
    h.w0.W1 = gaussian<S>(ri, h.w0.W1.rows(), h.w0.W1.cols(), 0.02);
    if (h.w0.W2.size() > 0) h.w0.W2 = gaussian<S>(ri, h.w0.W2.rows(), h.w0.W2.cols(), 0.02);
  }
  if (!c.ttt()) {
    // α_t = σ(3 + x_t·θ_α): near 0.95, a little lower or higher by token; fixed: σ(3).
    Rng ra(c.seed, kDecayGate);
    const RowVec<S> theta_a = gaussian<S>(ra, 1, d, proj_std);
    h.alpha.resize(T);
    for (long t = 0; t < T; ++t) {
      const double z = 3.0 + (c.gate == EtaGate::Learned ? static_cast<double>(X.row(t).dot(theta_a)) : 0.0);
      h.alpha(t) = static_cast<S>(1.0 / (1.0 + std::exp(-z)));
    }
  }
  h.description = std::string("toy head (random projections), seed ") + std::to_string(c.seed);
  return h;
}

MemberInputs make_member_inputs(const HeadConfig& c, const HeadInputs<double>& h) {
  const FastWeightPreset& p = fast_weight_preset(c.member_id());
  MemberInputs in;
  in.q = h.Q;
  in.k = h.K;
  in.v = h.V;
  const double d = static_cast<double>(h.d());
  const auto l2 = [](Mat<double>& m, double scale) {
    for (long t = 0; t < m.rows(); ++t) m.row(t) *= scale / std::sqrt(m.row(t).squaredNorm() + 1e-6);
  };
  in.beta = h.lambda * d;  // λ_t = η_base·σ(x_t·θ)/d, so β_t = η_base·σ(x_t·θ)
  in.alpha = h.alpha;
  if (p.id == "deltanet" || p.id == "gated_deltanet") {
    l2(in.k, 1.0);
    l2(in.q, 1.0 / std::sqrt(d));
  } else if (p.id == "titans" || p.id == "lact") {
    // Their layers L2-normalise q and k (§11.9, §11.10); v is read as drawn.
    l2(in.k, 1.0);
    l2(in.q, 1.0);
    // Titans: θ_t = β_t/d (its layer's 1/d offsets the D·g of FLA's write), the forgetting
    // 1 − α_t, momentum η = 0.9; LaCT: the rate β_t/d of all three weights, momentum 0.9.
    in.beta = h.lambda;
    in.momentum = Vec<double>::Constant(h.tokens(), kMemberMomentum);
    if (p.id == "titans") in.alpha = (1.0 - h.alpha.array()).matrix();
  }
  in.design.width = h.d();
  in.design.seed = c.seed;
  in.design.eta = c.eta_base;
  in.design.chunk = c.mini_batch;
  return in;
}

template <class S>
std::vector<HeadInputs<S>> model_layer_heads(const Model<float>& model, const std::vector<unsigned char>& bytes,
                                             int block, const std::string& model_label) {
  const ModelConfig& mc = model.config();
  if (block < 0 || block >= mc.num_hidden_layers)
    throw std::invalid_argument("block " + std::to_string(block) + " does not exist: the model has " +
                                std::to_string(mc.num_hidden_layers) + " blocks (0 … " +
                                std::to_string(mc.num_hidden_layers - 1) + ")");
  const auto* layer = dynamic_cast<const TTTLayer<float>*>(&model.mixer(block));
  if (!layer)
    throw std::invalid_argument("block " + std::to_string(block) + " of this model is " + to_string(mc.seq_layer) +
                                ", not a TTT layer: choose a TTT model");
  if (bytes.empty()) throw std::invalid_argument("the input text is empty: type or pick a text");
  const std::vector<int> tokens(bytes.begin(), bytes.end());
  const Mat<float> x = model.mixer_input(tokens, block);
  auto st = layer->start();
  const TTTLayerInputs<float> in = layer->inputs(static_cast<TTTLayerState<float>&>(*st), x);
  const TTTLayerConfig& lc = layer->config();
  const TTTLayerParams<float>& p = layer->params();
  const int d = lc.head_dim();
  std::vector<HeadInputs<S>> heads(static_cast<std::size_t>(lc.heads));
  for (int h = 0; h < lc.heads; ++h) {
    HeadInputs<S>& o = heads[static_cast<std::size_t>(h)];
    o.bytes = bytes;
    o.Q = in.XQ.middleCols(h * d, d).template cast<S>();
    o.K = in.XK.middleCols(h * d, d).template cast<S>();
    o.V = in.XV.middleCols(h * d, d).template cast<S>();
    o.lambda = in.lambda[static_cast<std::size_t>(h)].template cast<S>();
    o.params.ln_weight = p.ttt_norm_w.row(h).template cast<S>();
    o.params.ln_bias = p.ttt_norm_b.row(h).template cast<S>();
    o.params.tau = in.tau.template cast<S>();
    o.options = lc.inner;
    o.w0 = cast_weights<S>(p.W0[static_cast<std::size_t>(h)]);
    o.description = model_label + " · block " + std::to_string(block) + " · head " + std::to_string(h);
  }
  return heads;
}

template <class S>
std::vector<HeadInputs<S>> model_layer_heads_from(const Model<float>& model, const std::vector<unsigned char>& bytes,
                                                  int block, const std::string& model_label, const GpuLayerInputs& in,
                                                  int seq) {
  const ModelConfig& mc = model.config();
  if (block < 0 || block >= mc.num_hidden_layers) throw std::invalid_argument("block out of range");
  const auto* layer = dynamic_cast<const TTTLayer<float>*>(&model.mixer(block));
  if (!layer) throw std::invalid_argument("block " + std::to_string(block) + " is not a TTT layer");
  const TTTLayerConfig& lc = layer->config();
  const TTTLayerParams<float>& p = layer->params();
  const int d = lc.head_dim(), H = lc.heads;
  const long T = static_cast<long>(bytes.size());
  const std::size_t HD = static_cast<std::size_t>(H) * d;
  const std::size_t rows0 = static_cast<std::size_t>(seq) * T;
  if (in.Q.size() < (rows0 + T) * HD || in.K.size() != in.Q.size() || in.V.size() != in.Q.size() ||
      in.lambda.size() < (static_cast<std::size_t>(seq) + 1) * H * T || in.tau.size() != static_cast<std::size_t>(lc.inner.mini_batch))
    throw std::invalid_argument("the GPU's layer inputs do not match the model and the text");
  std::vector<HeadInputs<S>> heads(static_cast<std::size_t>(H));
  for (int h = 0; h < H; ++h) {
    HeadInputs<S>& o = heads[static_cast<std::size_t>(h)];
    o.bytes = bytes;
    o.Q.resize(T, d);
    o.K.resize(T, d);
    o.V.resize(T, d);
    o.lambda.resize(T);
    for (long t = 0; t < T; ++t) {
      const std::size_t r = (rows0 + static_cast<std::size_t>(t)) * HD + static_cast<std::size_t>(h) * d;
      for (int c = 0; c < d; ++c) {
        o.Q(t, c) = static_cast<S>(in.Q[r + c]);
        o.K(t, c) = static_cast<S>(in.K[r + c]);
        o.V(t, c) = static_cast<S>(in.V[r + c]);
      }
      o.lambda(t) = static_cast<S>(in.lambda[(static_cast<std::size_t>(seq) * H + h) * T + t]);
    }
    o.params.ln_weight = p.ttt_norm_w.row(h).template cast<S>();
    o.params.ln_bias = p.ttt_norm_b.row(h).template cast<S>();
    o.params.tau.resize(static_cast<Eigen::Index>(in.tau.size()));
    for (std::size_t i = 0; i < in.tau.size(); ++i) o.params.tau(static_cast<Eigen::Index>(i)) = static_cast<S>(in.tau[i]);
    o.options = lc.inner;
    o.w0 = cast_weights<S>(p.W0[static_cast<std::size_t>(h)]);
    o.description = model_label + " · block " + std::to_string(block) + " · head " + std::to_string(h) + " (inputs from the GPU)";
  }
  return heads;
}

template <class S>
HeadInputs<S> build_head_inputs(const HeadConfig& c, ModelLibrary& library) {
  if (c.source == HeadSource::Toy) return make_toy_head<S>(c);
  ModelOverrides o;
  if (c.override_model) {
    o.mini_batch = c.mini_batch;
    o.base_lr = c.eta_base;
  }
  const auto model = library.get(c.model_id, o);
  const auto view = library.view();
  const ModelInfo* info = view->find(c.model_id);
  const std::string label = info ? info->label.substr(0, info->label.find(" (")) : c.model_id;
  const int H = model->config().num_attention_heads;
  if (c.head >= H)
    throw std::invalid_argument("head " + std::to_string(c.head) + " does not exist: the layer has " +
                                std::to_string(H) + " heads (0 … " + std::to_string(H - 1) + ")");
  auto heads = model_layer_heads<S>(*model, config_bytes(c), c.block, label);
  return std::move(heads[static_cast<std::size_t>(c.head)]);
}

template <class S>
void reduce_to_linear_attention(HeadInputs<S>& h) {
  const long T = std::max(1L, h.tokens());
  const int d = h.d();
  h.options.model = InnerModel::Linear;
  h.options.mini_batch = static_cast<int>(T);
  h.options.layer_norm = false;
  h.options.residual = false;
  h.options.bias = false;
  h.lambda = Vec<S>::Ones(h.tokens());
  h.params.tau = Vec<S>::Ones(T);
  h.params.ln_weight = RowVec<S>::Ones(d);
  h.params.ln_bias = RowVec<S>::Zero(d);
  h.w0 = InnerWeights<S>::zeros(h.options, d);
}

std::string token_label(unsigned char b) {
  if (b == ' ') return "\xE2\x90\xA3";  // ␣ OPEN BOX
  if (b == '\n') return "\\n";
  if (b == '\t') return "\\t";
  if (b >= 0x21 && b < 0x7F) return std::string(1, static_cast<char>(b));
  char buf[8];
  std::snprintf(buf, sizeof buf, "0x%02X", b);
  return buf;
}

#define TTTLAB_INSTANTIATE(S)                                                                              \
  template HeadInputs<S> make_toy_head<S>(const HeadConfig&);                                              \
  template std::vector<HeadInputs<S>> model_layer_heads_from<S>(const Model<float>&, const std::vector<unsigned char>&, \
                                                               int, const std::string&, const GpuLayerInputs&, int); \
  template std::vector<HeadInputs<S>> model_layer_heads<S>(const Model<float>&,                            \
                                                           const std::vector<unsigned char>&, int,         \
                                                           const std::string&);                            \
  template HeadInputs<S> build_head_inputs<S>(const HeadConfig&, ModelLibrary&);                           \
  template void reduce_to_linear_attention<S>(HeadInputs<S>&);
TTTLAB_INSTANTIATE(float)
TTTLAB_INSTANTIATE(double)
#undef TTTLAB_INSTANTIATE

}  // namespace tttlab::lab
