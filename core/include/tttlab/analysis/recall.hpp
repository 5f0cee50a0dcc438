// tttlab/analysis/recall.hpp — associative recall, one memory at a time (docs/MATH.md §9.4): how many
// key-value pairs can a state of width d store and give back?
//
// No outer loop and no trained weights: each memory reads the pairs of one MQAR row, one write per
// pair and in order, and is then asked for the value of every key. The experiment isolates what the
// state itself can hold, which is what separates TTT layers, linear attention and attention on MQAR.
//
// EPISODE. Row 0 of tttlab::mqar_batch(episode_config(P), 1, seed, index) (data/synthetic.hpp) with
// P pairs and Q = P queries (every pair is asked for, in the row's random order). The key alphabet
// holds 160 bytes (0x60…0xFF) and the value alphabet 64 bytes (0x20…0x5F), so P ≤ 160; the values of
// an episode may repeat, its keys never do. Episode `index` of `seed` is a pure function of both.
//
// EMBEDDING. Byte b is the unit vector e_b = g_b / ‖g_b‖ of width d, g_b ~ N(0, I_d) drawn from
// Rng(seed, kEmbeddingStream) for b = 0, 1, …, 255 in order (d normals per byte). Key k_i = e(key_i),
// value v_i = e(value_i), query q = e(query key). Row vectors throughout, as in docs/MATH.md §1.
//
// THE MEMORIES, all of width d (state sizes in numbers, for P stored pairs). The first five are
// fixed code; the other four are tttlab::DesignedMemory (fastweight/designed_memory.hpp) at their
// presets of fast_weight_presets(), with the parameters of MemoryParams (one place, docs/MATH.md §9.4):
//   TTT-Linear         f(k) = kW, W ∈ ℝ^{d×d}, W₀ = 0; one gradient step per pair on ½‖kW − v‖²:
//                      W ← W − η kᵀ(kW − v), η = 1 (the delta rule, §9.3; with unit keys one step
//                      makes kW = v exactly). State d².
//   TTT-MLP            f(k) = gelu(kW₁)W₂, W₁ ∈ ℝ^{d×4d} with entries N(0, 1/d) from
//                      Rng(seed, kMlpStream), W₂ = 0; one gradient step per pair on ½‖f(k) − v‖² for
//                      both matrices, η = 1 / (4d · E[gelu(a)²]) with a ~ N(0, 1): the step that would
//                      fit the pair through W₂ alone, on average, at the start. State 8d².
//   Linear attention   S = Σᵢ kᵢᵀvᵢ (no normaliser: a positive one would not change the answer),
//                      read-out qS. TTT-Linear with b = T, W₀ = 0, η = 1 (Theorem 1, §9.1). State d².
//   Softmax attention  keeps every pair; read-out Σᵢ softmax(β q·kᵢ) vᵢ with β = kSoftmaxBeta, large
//                      enough for the nearest key to take nearly all the weight. State 2Pd (grows).
//   Mamba-2            S ← a·S + kᵀv, read-out qS: linear attention with a scalar decay a ∈ (0, 1]
//                      per write, the SSD recurrence (§8.8) with B = k, C = q, x = v and one head.
//                      The layer learns its decay exp(Δₜ·A) per token and head; here a is fixed
//                      (MemoryParams::mamba_decay). State d².
//   DeltaNet           S ← S − β kᵀ(kS − v), β = MemoryParams::delta_beta (the untrained gate's
//                      σ(0) = ½; at β = 1 it would be this lab's TTT-Linear). State d².
//   Gated DeltaNet     S ← αS − β kᵀ(αkS − v), β as DeltaNet's, α = MemoryParams::gated_decay (Mamba-2's
//                      default a, so that it differs from Mamba-2 only in its loss and from DeltaNet
//                      only in its decay). State d².
//   Titans             TTT-MLP's network and start, ½‖f(k) − v‖², weight decay λ, momentum μ,
//                      gradients at the start of mini-batches of b pairs, η = TTT-MLP's. State 8d²
//                      weights + 8d² momentum + 8d² mini-batch start (b > 1) = 24d².
//   LaCT               TTT-MLP's network and start, dot-product loss −⟨f(k), v⟩, Muon with momentum μ,
//                      one update per chunk of C pairs (a pair is seen only once its chunk is full:
//                      the P mod C newest pairs are not stored), η = TTT-MLP's. State 8d² weights +
//                      8d² momentum + 2d per pending pair. SwiGLU and the renormalisation of the
//                      real layer are left out (rule.hpp's preset note).
// Equal state size: the five matrix members hold d² numbers each; TTT-MLP, Titans and LaCT hold the
// same 8d² weights, plus their optimizer's buffers; softmax attention grows with P.
// ANSWER. The value symbol whose embedding has the largest dot product with the read-out (the first
// one on a tie); the value embeddings are unit vectors, so this is also the largest cosine.
//
// All arithmetic is in double. Nothing here is shared: every function is safe to call from several
// threads at once on distinct objects.
#pragma once

#include <Eigen/Dense>
#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "tttlab/data/synthetic.hpp"

namespace tttlab::recall {

// The values index arrays in views and state files: new members go at the end.
enum class Memory : int {
  TttLinear = 0,
  TttMlp = 1,
  LinearAttention = 2,
  SoftmaxAttention = 3,
  Mamba2 = 4,
  DeltaNet = 5,
  GatedDeltaNet = 6,
  Titans = 7,
  Lact = 8,
};
inline constexpr int kMemories = 9;
// The memories the lab had first (Memory values 0 … 4): the panel's default selection, so that state
// files written before the others came open as they were.
inline constexpr int kFirstMemories = 5;

// "ttt_linear", "ttt_mlp", "linear_attention", "softmax_attention", "mamba2", "deltanet",
// "gated_deltanet", "titans", "lact" (state files, measures, the command line; the ids of
// fast_weight_presets() where the member is one).
const char* memory_id(Memory m);
// "TTT-Linear", "TTT-MLP", "Linear attention", "Softmax attention", "Mamba-2", "DeltaNet",
// "Gated DeltaNet", "Titans", "LaCT" (for people).
const char* memory_name(Memory m);
std::optional<Memory> memory_from_id(std::string_view id);
// Every id in Memory order, joined by `sep` (for messages that list the accepted ids).
std::string memory_ids(std::string_view sep = ", ");
// True for the members computed by tttlab::DesignedMemory (DeltaNet, Gated DeltaNet, Titans, LaCT).
bool is_designed(Memory m);

inline constexpr std::uint64_t kEmbeddingStream = 0x656d6265ULL;  // "embe"
inline constexpr std::uint64_t kMlpStream = 0x6d6c7030ULL;        // "mlp0"
inline constexpr double kSoftmaxBeta = 64.0;
// Mamba-2's default decay per write: about exp(Δ·A) at the median of the reference layer's initial
// Δ (log-uniform in [0.001, 0.1]) and A (uniform in [−16, −1]), exp(−0.01 · 8.5) ≈ 0.92, rounded up to
// a memory of about 1/(1 − a) = 20 writes.
inline constexpr double kMambaDecay = 0.95;
inline constexpr int kMinWidth = 4, kMaxWidth = 128;
// The designed members' parameters (MemoryParams's defaults; docs/MATH.md §9.4).
inline constexpr double kDeltaBeta = 0.5;     // DeltaNet's and Gated DeltaNet's β: σ(0)
inline constexpr double kMomentum = 0.9;      // Titans' and LaCT's μ
inline constexpr double kWeightDecay = 0.05;  // Titans' λ
inline constexpr int kTitansChunk = 16;       // Titans' mini-batch b, TTT's
inline constexpr int kLactChunk = 16;         // LaCT's chunk C

const std::string& key_alphabet();    // 160 bytes, 0x60…0xFF
const std::string& value_alphabet();  // 64 bytes, 0x20…0x5F
int max_pairs();                      // |key alphabet| = 160

// The MQAR layout of an episode of P pairs: T = 4P, Q = P, the alphabets above. Throws
// std::invalid_argument when P is not in [1, max_pairs()].
MqarConfig episode_config(int pairs);

struct Episode {
  std::vector<int> keys, values;  // [P] the pairs' bytes, in the order they are read
  std::vector<int> queries;       // [P] indices into the pairs, in the order they are asked
};
Episode make_episode(int pairs, std::uint64_t seed, std::uint64_t index);

// The fixed random unit vectors of the 256 bytes (see EMBEDDING above).
class Embedding {
 public:
  Embedding(int width, std::uint64_t seed);  // width in [kMinWidth, kMaxWidth]
  int width() const { return static_cast<int>(m_table.cols()); }
  Eigen::RowVectorXd row(int byte) const { return m_table.row(byte); }
  // The value byte whose embedding has the largest dot product with r (ANSWER above).
  int decode(const Eigen::RowVectorXd& r) const;

 private:
  Eigen::MatrixXd m_table;   // [256, d], row b = e_b
  Eigen::MatrixXd m_values;  // [64, d], the rows of the value alphabet, in its order
};

struct MemoryParams {
  int width = 32;          // d
  std::uint64_t seed = 0;  // TTT-MLP's W₁
  double eta_linear = 1.0;
  double eta_mlp = 0.0;    // ≤ 0: the default above
  double softmax_beta = kSoftmaxBeta;
  double mamba_decay = kMambaDecay;  // a, in (0, 1]
  // The designed members' (make_memory throws std::invalid_argument, from tttlab::validate, for a
  // value out of DesignParams's range). Titans and LaCT step with eta_mlp, as TTT-MLP does.
  double delta_beta = kDeltaBeta;      // DeltaNet's and Gated DeltaNet's β > 0
  double gated_decay = kMambaDecay;    // Gated DeltaNet's α, in (0, 1]
  double momentum = kMomentum;         // Titans' and LaCT's μ, in [0, 1)
  double weight_decay = kWeightDecay;  // Titans' λ ≥ 0
  int titans_chunk = kTitansChunk;     // b ≥ 1
  int lact_chunk = kLactChunk;         // C ≥ 1
};

// E[gelu(a)²] for a ~ N(0, 1) (tanh GELU, docs/MATH.md §5), by quadrature; about 0.4252.
double gelu_second_moment();
// The default TTT-MLP step for width d: 1 / (4d · E[gelu(a)²]).
double default_eta_mlp(int width);

// One memory of width d: reads pairs one at a time, answers queries. Not thread-safe (one owner).
class AssociativeMemory {
 public:
  virtual ~AssociativeMemory() = default;
  virtual void write(const Eigen::RowVectorXd& k, const Eigen::RowVectorXd& v) = 0;
  virtual Eigen::RowVectorXd read(const Eigen::RowVectorXd& q) const = 0;
  virtual long state_size() const = 0;  // numbers held now
};
std::unique_ptr<AssociativeMemory> make_memory(Memory m, const MemoryParams& p);

// The state size (numbers) of memory m of width d after P pairs, with the default MemoryParams
// (the designed members' buffers depend on their chunk: see state_size(m, p, pairs)).
long state_size(Memory m, int width, int pairs);
long state_size(Memory m, const MemoryParams& p, int pairs);
// The numbers of the state that are weights (what reads use): d², 8d² or 2Pd; the rest of
// state_size is the optimizer's momentum, a mini-batch's start state or a pending chunk.
long weight_size(Memory m, int width, int pairs);

// Reads the episode's pairs into a fresh memory, then asks every query: the number answered right
// (out of P).
int recall_correct(Memory m, const Episode& e, const Embedding& emb, const MemoryParams& p);

// The forgetting map of one episode: [P × P] row-major; entry (t, i) for i ≤ t is 1 when, right after
// pair t was read, key i gives back value i; entries i > t are 0. Row P − 1 holds the answers that
// recall_correct counts (the same memory, the same state).
std::vector<std::uint8_t> forgetting_rows(Memory m, const Episode& e, const Embedding& emb, const MemoryParams& p);

// The same map one row at a time, so that an interactive caller can stop between rows. Holds a
// reference to `e` and `emb`: both must outlive it.
class ForgettingStream {
 public:
  ForgettingStream(Memory m, const Episode& e, const Embedding& emb, const MemoryParams& p);
  bool done() const { return m_t >= m_e->keys.size(); }
  int rows_done() const { return static_cast<int>(m_t); }
  // Reads pair t = rows_done() and writes row t of the map into row[0 … P−1] (entries i > t are 0).
  void next_row(std::uint8_t* row);

 private:
  const Episode* m_e;
  const Embedding* m_emb;
  std::unique_ptr<AssociativeMemory> m_mem;
  std::size_t m_t = 0;
};

}  // namespace tttlab::recall
