// Any point of the fast-weight template as an associative memory (see
// tttlab/fastweight/designed_memory.hpp, docs/MATH.md §11.7).
#include "tttlab/fastweight/designed_memory.hpp"

#include <cmath>
#include <stdexcept>
#include <string>

#include "tttlab/nn/activations.hpp"
#include "tttlab/util/rng.hpp"

namespace tttlab {
namespace {

using Eigen::MatrixXd;
using Eigen::RowVectorXd;

constexpr double kDesignedLnEps = 1e-6;
constexpr std::uint64_t kDesignedDecayStream = 0x64656361ULL;  // "deca"

// Muon's orthogonalisation: five Newton–Schulz steps of the quintic X ← aX + (b XXᵀ + c (XXᵀ)²) X
// from X = M / ‖M‖_F, which push every singular value of M towards 1 (into about [0.7, 1.2]) while
// keeping its singular vectors. Computed on the wide orientation, so XXᵀ is the smaller product.
MatrixXd newton_schulz(const MatrixXd& m) {
  constexpr double a = 3.4445, b = -4.7750, c = 2.0315;
  const bool tall = m.rows() > m.cols();
  MatrixXd x = tall ? MatrixXd(m.transpose()) : m;
  x /= x.norm() + 1e-7;
  for (int i = 0; i < 5; ++i) {
    const MatrixXd g = x * x.transpose();
    const MatrixXd p = b * g + c * g * g;
    x = a * x + p * x;
  }
  return tall ? MatrixXd(x.transpose()) : x;
}

}  // namespace

void validate(const FastWeightRule& rule, const DesignParams& p) {
  using std::to_string;
  if (p.width < recall::kMinWidth || p.width > recall::kMaxWidth)
    throw std::invalid_argument("the width d must be in [" + to_string(recall::kMinWidth) + ", " +
                                to_string(recall::kMaxWidth) + "]");
  if (!(p.eta > 0.0 && p.eta <= 100.0))
    throw std::invalid_argument("the step η must be in (0, 100]");
  if (!(p.decay > 0.0 && p.decay <= 1.0))
    throw std::invalid_argument("the decay α must be in (0, 1]: 1 keeps everything");
  if (!(p.weight_decay >= 0.0 && p.weight_decay <= 100.0))
    throw std::invalid_argument("the weight decay λ must be in [0, 100]");
  if (rule.retention == FastWeightRetention::WeightDecay && !(p.weight_decay * p.eta < 1.0))
    throw std::invalid_argument(
        "with weight decay, η·λ must stay below 1, or a step would flip the weights' sign");
  if (!(p.momentum >= 0.0 && p.momentum < 1.0))
    throw std::invalid_argument("the momentum μ must be in [0, 1)");
  if (p.chunk < 1 || p.chunk > 4096)
    throw std::invalid_argument("the mini-batch or chunk size must be in [1, 4096]");
  if (rule.loss == FastWeightLoss::TttLnResidual && p.width < 2)
    throw std::invalid_argument("TTT's LN needs a width of at least 2");
}

struct DesignedMemory::Impl {
  FastWeightRule rule;
  DesignParams p;
  std::vector<MatrixXd> w;      // the weights: {S} or {W₁, W₂}
  std::vector<MatrixXd> vel;    // momentum, where the optimizer has one
  std::vector<MatrixXd> start;  // mini_batch: the state the batch's gradients are taken at
  int in_batch = 0;             // pairs of the current mini-batch or chunk so far
  std::vector<RowVectorXd> pending_k, pending_v;  // large_chunk
  Eigen::VectorXd channel;      // channel_decay: a_c for rows c = 0 … 4d − 1

  bool mlp() const { return rule.state == FastWeightState::Mlp; }

  // f(x; W) and, for the MLP, its hidden pre-activation.
  RowVectorXd inner(const std::vector<MatrixXd>& W, const RowVectorXd& x, RowVectorXd* pre) const {
    if (!mlp()) return x * W[0];
    RowVectorXd a = x * W[0];
    RowVectorXd h = a.unaryExpr([](double s) { return gelu_tanh(s); });
    if (pre) *pre = std::move(a);
    return h * W[1];
  }
  // LN without scale or shift (§3.1's, ε = 1e−6).
  static RowVectorXd layer_norm(const RowVectorXd& z, double* inv_sd) {
    const double mu = z.mean();
    const RowVectorXd c = z.array() - mu;
    const double s = 1.0 / std::sqrt(c.squaredNorm() / static_cast<double>(z.size()) + kDesignedLnEps);
    if (inv_sd) *inv_sd = s;
    return c * s;
  }
  RowVectorXd read(const std::vector<MatrixXd>& W, const RowVectorXd& q) const {
    const RowVectorXd z = inner(W, q, nullptr);
    if (rule.loss != FastWeightLoss::TttLnResidual) return z;
    return layer_norm(z, nullptr) + q;
  }
  double loss(const std::vector<MatrixXd>& W, const RowVectorXd& k, const RowVectorXd& v) const {
    const RowVectorXd y = read(W, k);
    switch (rule.loss) {
      case FastWeightLoss::Hebbian:
      case FastWeightLoss::DotProduct: return -y.dot(v);
      case FastWeightLoss::Squared:
      case FastWeightLoss::TttLnResidual: return 0.5 * (y - v).squaredNorm();
    }
    return 0;
  }
  // ∇ℓ(k, v) with respect to every weight matrix, at W.
  std::vector<MatrixXd> grad(const std::vector<MatrixXd>& W, const RowVectorXd& k,
                             const RowVectorXd& v) const {
    RowVectorXd pre;
    const RowVectorXd z = inner(W, k, &pre);
    RowVectorXd dz;
    switch (rule.loss) {
      case FastWeightLoss::Hebbian:
      case FastWeightLoss::DotProduct: dz = -v; break;
      case FastWeightLoss::Squared: dz = z - v; break;
      case FastWeightLoss::TttLnResidual: {
        double s = 0;
        const RowVectorXd xh = layer_norm(z, &s);
        const RowVectorXd dy = xh + k - v;  // ∂ℓ/∂(LN(z))
        const double n = static_cast<double>(z.size());
        dz = s * (dy.array() - dy.sum() / n - xh.array() * (dy.dot(xh) / n)).matrix();
        break;
      }
    }
    if (!mlp()) return {k.transpose() * dz};
    const RowVectorXd h = pre.unaryExpr([](double s) { return gelu_tanh(s); });
    const RowVectorXd da =
        (dz * W[1].transpose()).cwiseProduct(pre.unaryExpr([](double s) { return gelu_tanh_grad(s); }));
    return {k.transpose() * da, h.transpose() * dz};
  }
  double rate(int position) const {
    switch (rule.rate) {
      // A per-token gate is learned by the outer loop, which this memory does not run (see the header).
      case FastWeightRate::Fixed:
      case FastWeightRate::PerToken: return p.eta;
      case FastWeightRate::PerPosition: return p.eta / static_cast<double>(position);
    }
    return p.eta;
  }
  void retain(std::vector<MatrixXd>& W, double eta_t) const {
    for (MatrixXd& m : W) switch (rule.retention) {
        case FastWeightRetention::None: break;
        case FastWeightRetention::ScalarDecay: m *= p.decay; break;
        case FastWeightRetention::ChannelDecay:
          m = channel.head(m.rows()).asDiagonal() * m;
          break;
        case FastWeightRetention::WeightDecay: m *= 1.0 - eta_t * p.weight_decay; break;
      }
  }
  // One optimizer step along G with rate eta_t.
  void step(std::vector<MatrixXd>& W, const std::vector<MatrixXd>& G, double eta_t) {
    for (std::size_t i = 0; i < W.size(); ++i) switch (rule.optimizer) {
        case FastWeightOptimizer::Gd: W[i].noalias() -= eta_t * G[i]; break;
        case FastWeightOptimizer::Momentum:
          vel[i] = p.momentum * vel[i] + G[i];
          W[i].noalias() -= eta_t * vel[i];
          break;
        case FastWeightOptimizer::Muon:
          vel[i] = p.momentum * vel[i] + G[i];
          W[i].noalias() -= eta_t * newton_schulz(vel[i]);
          break;
      }
  }
};

DesignedMemory::DesignedMemory(const FastWeightRule& rule, const DesignParams& p) {
  validate(rule, p);
  m = std::make_unique<Impl>();
  m->rule = rule;
  m->p = p;
  const Eigen::Index d = p.width;
  if (rule.state == FastWeightState::Matrix) {
    m->w = {MatrixXd::Zero(d, d)};
  } else {
    // The recall lab's TTT-MLP start: W₁ entries N(0, 1/d), drawn in row-major order, W₂ = 0.
    MatrixXd w1(d, 4 * d);
    Rng rng(p.seed, recall::kMlpStream);
    const double sd = 1.0 / std::sqrt(static_cast<double>(d));
    for (Eigen::Index i = 0; i < w1.rows(); ++i)
      for (Eigen::Index j = 0; j < w1.cols(); ++j) w1(i, j) = sd * rng.normal();
    m->w = {std::move(w1), MatrixXd::Zero(4 * d, d)};
  }
  if (rule.optimizer != FastWeightOptimizer::Gd)
    for (const MatrixXd& x : m->w) m->vel.push_back(MatrixXd::Zero(x.rows(), x.cols()));
  if (rule.retention == FastWeightRetention::ChannelDecay) {
    Rng rng(p.seed, kDesignedDecayStream);
    m->channel.resize(4 * d);
    for (Eigen::Index i = 0; i < 4 * d; ++i)
      m->channel(i) = std::pow(p.decay, 0.5 + rng.uniform());
  }
}

DesignedMemory::~DesignedMemory() = default;

void DesignedMemory::write(const RowVectorXd& k, const RowVectorXd& v) {
  if (k.size() != m->p.width || v.size() != m->p.width)
    throw std::invalid_argument("DesignedMemory::write: k and v must have the memory's width " +
                                std::to_string(m->p.width));
  Impl& s = *m;
  const FastWeightGranularity g = s.rule.granularity;
  if (g == FastWeightGranularity::LargeChunk) {
    m_loss_before = s.loss(s.w, k, v);
    s.pending_k.push_back(k);
    s.pending_v.push_back(v);
    if (static_cast<int>(s.pending_k.size()) == s.p.chunk) {
      // Apply, then update: one retention and one step for the whole chunk, its gradients at the
      // state every read of the chunk used.
      s.retain(s.w, s.p.eta);
      std::vector<MatrixXd> G = s.grad(s.w, s.pending_k[0], s.pending_v[0]);
      for (std::size_t j = 0; j < G.size(); ++j) G[j] *= s.rate(1) / s.p.eta;
      for (std::size_t t = 1; t < s.pending_k.size(); ++t) {
        const std::vector<MatrixXd> gt = s.grad(s.w, s.pending_k[t], s.pending_v[t]);
        const double wt = s.rate(static_cast<int>(t) + 1) / s.p.eta;
        for (std::size_t j = 0; j < G.size(); ++j) G[j] += wt * gt[j];
      }
      s.step(s.w, G, s.p.eta);
      s.pending_k.clear();
      s.pending_v.clear();
    }
    m_loss_after = s.loss(s.w, k, v);
    return;
  }
  // One step per pair; mini_batch takes the gradients at its batch's start state (b = 1 otherwise).
  const int b = g == FastWeightGranularity::MiniBatch ? s.p.chunk : 1;
  const int position = s.in_batch + 1;
  const double eta_t = s.rate(position);
  if (s.in_batch == 0) {
    s.retain(s.w, eta_t);
    if (b > 1) s.start = s.w;
  }
  m_loss_before = s.loss(s.w, k, v);
  s.step(s.w, s.grad(b > 1 ? s.start : s.w, k, v), eta_t);
  m_loss_after = s.loss(s.w, k, v);
  if (++s.in_batch == b) s.in_batch = 0;
}

RowVectorXd DesignedMemory::read(const RowVectorXd& q) const {
  if (q.size() != m->p.width)
    throw std::invalid_argument("DesignedMemory::read: q must have the memory's width " +
                                std::to_string(m->p.width));
  return m->read(m->w, q);
}

double DesignedMemory::loss(const RowVectorXd& k, const RowVectorXd& v) const {
  return m->loss(m->w, k, v);
}

std::vector<MatrixXd> DesignedMemory::gradient(const RowVectorXd& k, const RowVectorXd& v) const {
  if (k.size() != m->p.width || v.size() != m->p.width)
    throw std::invalid_argument("DesignedMemory::gradient: k and v must have the memory's width " +
                                std::to_string(m->p.width));
  return m->grad(m->w, k, v);
}

const std::vector<MatrixXd>& DesignedMemory::weights() const { return m->w; }

void DesignedMemory::set_weights(std::vector<MatrixXd> w) {
  if (w.size() != m->w.size())
    throw std::invalid_argument("DesignedMemory::set_weights: wrong number of matrices");
  for (std::size_t i = 0; i < w.size(); ++i)
    if (w[i].rows() != m->w[i].rows() || w[i].cols() != m->w[i].cols())
      throw std::invalid_argument("DesignedMemory::set_weights: matrix " + std::to_string(i) +
                                  " has the wrong shape");
  m->w = std::move(w);
}

long DesignedMemory::state_size() const {
  long n = 0;
  for (const MatrixXd& x : m->w) n += static_cast<long>(x.size());
  for (const MatrixXd& x : m->vel) n += static_cast<long>(x.size());
  if (m->rule.granularity == FastWeightGranularity::MiniBatch && m->p.chunk > 1)
    for (const MatrixXd& x : m->w) n += static_cast<long>(x.size());
  n += 2L * m->p.width * static_cast<long>(m->pending_k.size());
  return n;
}

int designed_recall_correct(const FastWeightRule& rule, const DesignParams& p,
                            const recall::Episode& e, const recall::Embedding& emb) {
  if (emb.width() != p.width)
    throw std::invalid_argument("designed_recall_correct: the embedding's width is not the memory's");
  DesignedMemory mem(rule, p);
  for (std::size_t i = 0; i < e.keys.size(); ++i) mem.write(emb.row(e.keys[i]), emb.row(e.values[i]));
  int right = 0;
  for (const int qi : e.queries) {
    const std::size_t i = static_cast<std::size_t>(qi);
    right += emb.decode(mem.read(emb.row(e.keys[i]))) == e.values[i] ? 1 : 0;
  }
  return right;
}

}  // namespace tttlab
