// Associative recall of nine memories of width d (see tttlab/analysis/recall.hpp, docs/MATH.md §9.4).
#include "tttlab/analysis/recall.hpp"

#include <cmath>
#include <stdexcept>

#include "tttlab/fastweight/designed_memory.hpp"
#include "tttlab/fastweight/rule.hpp"
#include "tttlab/nn/activations.hpp"
#include "tttlab/util/rng.hpp"

namespace tttlab::recall {
namespace {

using Eigen::MatrixXd;
using Eigen::RowVectorXd;

std::string byte_range(int lo, int hi) {
  std::string s;
  for (int b = lo; b <= hi; ++b) s.push_back(static_cast<char>(static_cast<unsigned char>(b)));
  return s;
}

void check_width(int d) {
  if (d < kMinWidth || d > kMaxWidth)
    throw std::invalid_argument("recall: the width d must be in [" + std::to_string(kMinWidth) +
                                ", " + std::to_string(kMaxWidth) + "], got " + std::to_string(d));
}

// TTT-Linear: W ← W − η kᵀ(kW − v), W₀ = 0.
class TttLinear final : public AssociativeMemory {
 public:
  explicit TttLinear(const MemoryParams& p)
      : m_w(MatrixXd::Zero(p.width, p.width)), m_eta(p.eta_linear) {}
  void write(const RowVectorXd& k, const RowVectorXd& v) override {
    const RowVectorXd g = k * m_w - v;  // ∇ of ½‖kW − v‖² with respect to kW
    m_w.noalias() -= m_eta * k.transpose() * g;
  }
  RowVectorXd read(const RowVectorXd& q) const override { return q * m_w; }
  long state_size() const override { return static_cast<long>(m_w.size()); }

 private:
  MatrixXd m_w;
  double m_eta;
};

// TTT-MLP: f(k) = gelu(kW₁)W₂; one step on both matrices, gradients at the state before the step.
class TttMlp final : public AssociativeMemory {
 public:
  explicit TttMlp(const MemoryParams& p)
      : m_w1(p.width, 4 * p.width),
        m_w2(MatrixXd::Zero(4 * p.width, p.width)),
        m_eta(p.eta_mlp > 0 ? p.eta_mlp : default_eta_mlp(p.width)) {
    // Entries N(0, 1/d): a unit key gives pre-activations of unit variance, where gelu is curved.
    Rng rng(p.seed, kMlpStream);
    const double sd = 1.0 / std::sqrt(static_cast<double>(p.width));
    for (Eigen::Index i = 0; i < m_w1.rows(); ++i)
      for (Eigen::Index j = 0; j < m_w1.cols(); ++j) m_w1(i, j) = sd * rng.normal();
  }
  void write(const RowVectorXd& k, const RowVectorXd& v) override {
    const RowVectorXd z1 = k * m_w1;
    const RowVectorXd x2 = z1.unaryExpr([](double a) { return gelu_tanh(a); });
    const RowVectorXd g2 = x2 * m_w2 - v;
    const RowVectorXd g1 = (g2 * m_w2.transpose()).cwiseProduct(z1.unaryExpr([](double a) {
      return gelu_tanh_grad(a);
    }));
    m_w2.noalias() -= m_eta * x2.transpose() * g2;
    m_w1.noalias() -= m_eta * k.transpose() * g1;
  }
  RowVectorXd read(const RowVectorXd& q) const override {
    return (q * m_w1).unaryExpr([](double a) { return gelu_tanh(a); }) * m_w2;
  }
  long state_size() const override { return static_cast<long>(m_w1.size() + m_w2.size()); }

 private:
  MatrixXd m_w1, m_w2;
  double m_eta;
};

// Linear attention: S = Σ kᵢᵀvᵢ, read-out qS.
class LinearAttention final : public AssociativeMemory {
 public:
  explicit LinearAttention(const MemoryParams& p) : m_s(MatrixXd::Zero(p.width, p.width)) {}
  void write(const RowVectorXd& k, const RowVectorXd& v) override {
    m_s.noalias() += k.transpose() * v;
  }
  RowVectorXd read(const RowVectorXd& q) const override { return q * m_s; }
  long state_size() const override { return static_cast<long>(m_s.size()); }

 private:
  MatrixXd m_s;
};

// Mamba-2: S ← a·S + kᵀv, read-out qS (linear attention that forgets at a fixed rate).
class Mamba2 final : public AssociativeMemory {
 public:
  explicit Mamba2(const MemoryParams& p)
      : m_s(MatrixXd::Zero(p.width, p.width)), m_a(p.mamba_decay) {
    if (!(m_a > 0.0 && m_a <= 1.0))
      throw std::invalid_argument("recall: the Mamba-2 decay a must be in (0, 1], got " +
                                  std::to_string(m_a));
  }
  void write(const RowVectorXd& k, const RowVectorXd& v) override {
    m_s *= m_a;
    m_s.noalias() += k.transpose() * v;
  }
  RowVectorXd read(const RowVectorXd& q) const override { return q * m_s; }
  long state_size() const override { return static_cast<long>(m_s.size()); }

 private:
  MatrixXd m_s;
  double m_a;
};

// Softmax attention: every pair kept; Σᵢ softmax(β q·kᵢ) vᵢ.
class SoftmaxAttention final : public AssociativeMemory {
 public:
  explicit SoftmaxAttention(const MemoryParams& p) : m_d(p.width), m_beta(p.softmax_beta) {}
  void write(const RowVectorXd& k, const RowVectorXd& v) override {
    m_keys.push_back(k);
    m_values.push_back(v);
  }
  RowVectorXd read(const RowVectorXd& q) const override {
    RowVectorXd out = RowVectorXd::Zero(m_d);
    if (m_keys.empty()) return out;
    std::vector<double> s(m_keys.size());
    double top = -INFINITY;
    for (std::size_t i = 0; i < m_keys.size(); ++i) {
      s[i] = m_beta * q.dot(m_keys[i]);
      top = std::max(top, s[i]);
    }
    double z = 0;
    for (std::size_t i = 0; i < m_keys.size(); ++i) {
      const double w = std::exp(s[i] - top);  // shifted by the largest score: never overflows
      z += w;
      out += w * m_values[i];
    }
    return out / z;
  }
  long state_size() const override { return 2L * m_d * static_cast<long>(m_keys.size()); }

 private:
  int m_d;
  double m_beta;
  std::vector<RowVectorXd> m_keys, m_values;
};

}  // namespace

namespace {

// The one list of the memories, in Memory order: id, name, and the preset of fast_weight_presets()
// a designed member runs (empty for the fixed ones).
struct RecallMemoryRow {
  Memory m;
  const char* id;
  const char* name;
  const char* preset;
};
constexpr RecallMemoryRow kRecallMemoryTable[kMemories] = {
    {Memory::TttLinear, "ttt_linear", "TTT-Linear", ""},
    {Memory::TttMlp, "ttt_mlp", "TTT-MLP", ""},
    {Memory::LinearAttention, "linear_attention", "Linear attention", ""},
    {Memory::SoftmaxAttention, "softmax_attention", "Softmax attention", ""},
    {Memory::Mamba2, "mamba2", "Mamba-2", ""},
    {Memory::DeltaNet, "deltanet", "DeltaNet", "deltanet"},
    {Memory::GatedDeltaNet, "gated_deltanet", "Gated DeltaNet", "gated_deltanet"},
    {Memory::Titans, "titans", "Titans", "titans"},
    {Memory::Lact, "lact", "LaCT", "lact"},
};

const RecallMemoryRow* recall_row(Memory m) {
  const int i = static_cast<int>(m);
  return i >= 0 && i < kMemories ? &kRecallMemoryTable[i] : nullptr;
}

// The designed member's rule and parameters (docs/MATH.md §9.4).
FastWeightRule recall_design_rule(Memory m) {
  return fast_weight_preset(recall_row(m)->preset).rule;
}

DesignParams recall_design_params(Memory m, const MemoryParams& p) {
  DesignParams d;
  d.width = p.width;
  d.seed = p.seed;
  d.momentum = p.momentum;
  d.weight_decay = p.weight_decay;
  switch (m) {
    case Memory::DeltaNet: d.eta = p.delta_beta; break;
    case Memory::GatedDeltaNet:
      d.eta = p.delta_beta;
      d.decay = p.gated_decay;
      break;
    case Memory::Titans:
      d.eta = p.eta_mlp > 0 ? p.eta_mlp : default_eta_mlp(p.width);
      d.chunk = p.titans_chunk;
      break;
    case Memory::Lact:
      d.eta = p.eta_mlp > 0 ? p.eta_mlp : default_eta_mlp(p.width);
      d.chunk = p.lact_chunk;
      break;
    default: throw std::logic_error("recall: not a designed memory");
  }
  return d;
}

}  // namespace

static_assert(static_cast<int>(Memory::Lact) + 1 == kMemories);

const char* memory_id(Memory m) {
  const RecallMemoryRow* r = recall_row(m);
  return r ? r->id : "?";
}

const char* memory_name(Memory m) {
  const RecallMemoryRow* r = recall_row(m);
  return r ? r->name : "?";
}

std::optional<Memory> memory_from_id(std::string_view id) {
  for (const RecallMemoryRow& r : kRecallMemoryTable)
    if (id == r.id) return r.m;
  return std::nullopt;
}

std::string memory_ids(std::string_view sep) {
  std::string s;
  for (const RecallMemoryRow& r : kRecallMemoryTable) {
    if (!s.empty()) s += sep;
    s += r.id;
  }
  return s;
}

bool is_designed(Memory m) {
  const RecallMemoryRow* r = recall_row(m);
  return r && r->preset[0] != '\0';
}

const std::string& key_alphabet() {
  static const std::string s = byte_range(0x60, 0xFF);
  return s;
}

const std::string& value_alphabet() {
  static const std::string s = byte_range(0x20, 0x5F);
  return s;
}

int max_pairs() { return static_cast<int>(key_alphabet().size()); }

MqarConfig episode_config(int pairs) {
  if (pairs < 1 || pairs > max_pairs())
    throw std::invalid_argument("recall: the number of pairs must be in [1, " +
                                std::to_string(max_pairs()) + "], got " + std::to_string(pairs));
  MqarConfig c;
  c.num_pairs = pairs;
  c.num_queries = pairs;
  c.seq_len = 4 * pairs;  // 2P + 1 + 2Q = 4P + 1 tokens
  c.keys = key_alphabet();
  c.values = value_alphabet();
  c.separator = '\x1e';  // below both alphabets
  c.pad = '\x1f';
  return c;
}

Episode make_episode(int pairs, std::uint64_t seed, std::uint64_t index) {
  const MqarConfig c = episode_config(pairs);
  const TokenBatch b = mqar_batch(c, 1, seed, index);
  Episode e;
  e.keys.resize(static_cast<std::size_t>(pairs));
  e.values.resize(static_cast<std::size_t>(pairs));
  for (int i = 0; i < pairs; ++i) {
    e.keys[static_cast<std::size_t>(i)] = b.at(0, 2 * i);
    e.values[static_cast<std::size_t>(i)] = b.at(0, 2 * i + 1);
  }
  // The queries follow the separator; each names a key, which names its pair.
  for (int j = 0; j < pairs; ++j) {
    const int q = b.at(0, 2 * pairs + 1 + 2 * j);
    for (int i = 0; i < pairs; ++i)
      if (e.keys[static_cast<std::size_t>(i)] == q) {
        e.queries.push_back(i);
        break;
      }
  }
  if (static_cast<int>(e.queries.size()) != pairs)
    throw std::logic_error("recall: an MQAR query names no key");
  return e;
}

Embedding::Embedding(int width, std::uint64_t seed) : m_table(256, width) {
  check_width(width);
  Rng rng(seed, kEmbeddingStream);
  for (int b = 0; b < 256; ++b) {
    for (int j = 0; j < width; ++j) m_table(b, j) = rng.normal();
    m_table.row(b).normalize();
  }
  const std::string& vals = value_alphabet();
  m_values.resize(static_cast<Eigen::Index>(vals.size()), width);
  for (std::size_t i = 0; i < vals.size(); ++i)
    m_values.row(static_cast<Eigen::Index>(i)) = m_table.row(static_cast<unsigned char>(vals[i]));
}

int Embedding::decode(const Eigen::RowVectorXd& r) const {
  const Eigen::VectorXd scores = m_values * r.transpose();
  Eigen::Index best = 0;
  for (Eigen::Index i = 1; i < scores.size(); ++i)
    if (scores(i) > scores(best)) best = i;  // strict: the first one wins a tie
  return static_cast<unsigned char>(value_alphabet()[static_cast<std::size_t>(best)]);
}

double gelu_second_moment() {
  // ∫ gelu(a)² φ(a) da by the trapezoidal rule on [−12, 12]: the integrand is smooth and its tails
  // are far below double precision there, so this is exact to ~1e−12.
  constexpr int n = 24000;
  constexpr double lo = -12.0, hi = 12.0, h = (hi - lo) / n;
  const double norm = 1.0 / std::sqrt(2.0 * M_PI);
  double s = 0;
  for (int i = 0; i <= n; ++i) {
    const double a = lo + h * i;
    const double g = gelu_tanh(a);
    const double f = g * g * norm * std::exp(-0.5 * a * a);
    s += (i == 0 || i == n) ? 0.5 * f : f;
  }
  return s * h;
}

double default_eta_mlp(int width) {
  static const double m2 = gelu_second_moment();
  return 1.0 / (4.0 * width * m2);
}

std::unique_ptr<AssociativeMemory> make_memory(Memory m, const MemoryParams& p) {
  check_width(p.width);
  switch (m) {
    case Memory::TttLinear: return std::make_unique<TttLinear>(p);
    case Memory::TttMlp: return std::make_unique<TttMlp>(p);
    case Memory::LinearAttention: return std::make_unique<LinearAttention>(p);
    case Memory::SoftmaxAttention: return std::make_unique<SoftmaxAttention>(p);
    case Memory::Mamba2: return std::make_unique<Mamba2>(p);
    case Memory::DeltaNet:
    case Memory::GatedDeltaNet:
    case Memory::Titans:
    case Memory::Lact:
      return std::make_unique<DesignedMemory>(recall_design_rule(m), recall_design_params(m, p));
  }
  throw std::invalid_argument("recall: unknown memory (expected one of " + memory_ids() + ")");
}

long weight_size(Memory m, int width, int pairs) {
  const long d = width;
  switch (m) {
    case Memory::TttLinear:
    case Memory::LinearAttention:
    case Memory::Mamba2:
    case Memory::DeltaNet:
    case Memory::GatedDeltaNet: return d * d;
    case Memory::TttMlp:
    case Memory::Titans:
    case Memory::Lact: return 8 * d * d;
    case Memory::SoftmaxAttention: return 2 * d * pairs;
  }
  return 0;
}

long state_size(Memory m, const MemoryParams& p, int pairs) {
  const long w = weight_size(m, p.width, pairs);
  if (!is_designed(m)) return w;
  // DesignedMemory::state_size's count, without running the memory.
  const FastWeightRule rule = recall_design_rule(m);
  const DesignParams dp = recall_design_params(m, p);
  long n = w;
  if (rule.optimizer != FastWeightOptimizer::Gd) n += w;
  if (rule.granularity == FastWeightGranularity::MiniBatch && dp.chunk > 1) n += w;
  if (rule.granularity == FastWeightGranularity::LargeChunk)
    n += 2L * p.width * static_cast<long>(pairs % dp.chunk);
  return n;
}

long state_size(Memory m, int width, int pairs) {
  MemoryParams p;
  p.width = width;
  return state_size(m, p, pairs);
}

int recall_correct(Memory m, const Episode& e, const Embedding& emb, const MemoryParams& p) {
  auto mem = make_memory(m, p);
  for (std::size_t i = 0; i < e.keys.size(); ++i)
    mem->write(emb.row(e.keys[i]), emb.row(e.values[i]));
  int correct = 0;
  for (const int i : e.queries) {
    const auto k = static_cast<std::size_t>(i);
    correct += emb.decode(mem->read(emb.row(e.keys[k]))) == e.values[k] ? 1 : 0;
  }
  return correct;
}

ForgettingStream::ForgettingStream(Memory m, const Episode& e, const Embedding& emb,
                                   const MemoryParams& p)
    : m_e(&e), m_emb(&emb), m_mem(make_memory(m, p)) {}

void ForgettingStream::next_row(std::uint8_t* row) {
  if (done()) throw std::logic_error("recall: the forgetting map is complete");
  const std::size_t P = m_e->keys.size(), t = m_t;
  m_mem->write(m_emb->row(m_e->keys[t]), m_emb->row(m_e->values[t]));
  for (std::size_t i = 0; i < P; ++i)
    row[i] =
        i <= t && m_emb->decode(m_mem->read(m_emb->row(m_e->keys[i]))) == m_e->values[i] ? 1 : 0;
  ++m_t;
}

std::vector<std::uint8_t> forgetting_rows(Memory m, const Episode& e, const Embedding& emb,
                                          const MemoryParams& p) {
  const std::size_t P = e.keys.size();
  std::vector<std::uint8_t> map(P * P, 0);
  ForgettingStream s(m, e, emb, p);
  for (std::size_t t = 0; t < P; ++t) s.next_row(map.data() + t * P);
  return map;
}

}  // namespace tttlab::recall
