#include "inspect/hidden_states.hpp"

#include <algorithm>
#include <cmath>
#include <nlohmann/json.hpp>
#include <stdexcept>
#include <type_traits>

#include "lab/engine/head_inputs.hpp"
#include "tttlab/model/checkpoint.hpp"

namespace tttlab::inspect {
namespace {

// "0 … n−1": the valid indices of n blocks or heads, for messages.
std::string index_range(int n) { return "0 … " + std::to_string(n - 1); }

// Numbers per saved state and per initial state of one head: W1 and b1, plus W2 and b2 for TTT-MLP.
std::uint64_t state_numbers(const ModelConfig& m) {
  const std::uint64_t d = static_cast<std::uint64_t>(m.head_dim());
  if (m.seq_layer == SeqLayerKind::TTTMLP) {
    const std::uint64_t h = 4 * d;
    return d * h + h + h * d + d;
  }
  return d * d + d;
}

std::string every_name(SaveEvery e, long stride) {
  switch (e) {
    case SaveEvery::Token: return "token";
    case SaveEvery::MiniBatchEnd: return "mini-batch";
    default: return "stride " + std::to_string(stride);
  }
}

// The members of an inner state: W1, b1, and for TTT-MLP W2, b2.
enum class Member { W1, b1, W2, b2 };
const char* member_name(Member m) {
  switch (m) {
    case Member::W1: return "W1";
    case Member::b1: return "b1";
    case Member::W2: return "W2";
    default: return "b2";
  }
}

// Appends one member of `w` to `data` in row-major order (whatever Mat's own storage order) and
// returns its shape.
std::vector<std::int64_t> append_member(const InnerWeights<double>& w, Member m, std::vector<double>& data) {
  if (m == Member::W1 || m == Member::W2) {
    const Mat<double>& x = m == Member::W1 ? w.W1 : w.W2;
    for (Eigen::Index i = 0; i < x.rows(); ++i)
      for (Eigen::Index j = 0; j < x.cols(); ++j) data.push_back(x(i, j));
    return {x.rows(), x.cols()};
  }
  const RowVec<double>& v = m == Member::b1 ? w.b1 : w.b2;
  data.insert(data.end(), v.data(), v.data() + v.size());
  return {v.size()};
}

// One member of every saved state as one tensor [n, …], and the same member of W0 as `<name>_initial`.
void emit_member(const std::function<void(const StatesTensor&)>& emit, const std::string& prefix, Member m,
                 const HeadTrace& tr) {
  std::vector<double> data;
  std::vector<std::int64_t> shape{static_cast<std::int64_t>(tr.states.size())};
  std::vector<std::int64_t> one;
  for (const auto& st : tr.states) one = append_member(st, m, data);
  shape.insert(shape.end(), one.begin(), one.end());
  emit({prefix + member_name(m), std::move(shape), std::span<const double>(data)});
  data.clear();
  one = append_member(tr.w0, m, data);
  emit({prefix + member_name(m) + "_initial", std::move(one), std::span<const double>(data)});
}

}  // namespace

std::vector<std::int64_t> saved_tokens(long T, int b, SaveEvery every, long stride) {
  std::vector<std::int64_t> out;
  if (T <= 0) return out;
  const long step = every == SaveEvery::Token ? 1 : every == SaveEvery::MiniBatchEnd ? b : stride;
  if (step < 1) throw std::invalid_argument("the state stride must be at least 1, got " + std::to_string(step));
  for (long t = step - 1; t < T; t += step) out.push_back(t);
  if (out.empty() || out.back() != T - 1) out.push_back(T - 1);  // the state at the end of the text
  return out;
}

namespace {
HeadTrace trace_inputs(const lab::HeadInputs<double>& in, int block, int head, const std::vector<std::int64_t>& saved) {
  const long T = in.tokens();
  HeadTrace tr;
  tr.block = block;
  tr.head = head;
  tr.w0 = in.w0;
  for (auto* v : {&tr.loss_initial, &tr.loss_before, &tr.loss_after, &tr.lambda, &tr.tau, &tr.eta})
    v->assign(static_cast<std::size_t>(T), 0.0);
  tr.states.reserve(saved.size());
  std::size_t next = 0;
  auto state = InnerState<double>::start(in.w0);
  const InnerObserver<double> observer = [&](const InnerStepRecord<double>& r) {
    const auto t = static_cast<std::size_t>(r.token);
    tr.loss_initial[t] = r.loss_initial;
    tr.loss_before[t] = r.loss_before;
    tr.loss_after[t] = r.loss_after;
    tr.lambda[t] = r.lambda;
    tr.tau[t] = r.tau;
    tr.eta[t] = r.tau * r.lambda;
    if (next < saved.size() && saved[next] == r.token) {
      tr.states.push_back(*r.w_after);
      ++next;
    }
  };
  Mat<double> out;
  inner_forward_primal<double>(in.options, in.params, in.Q, in.K, in.V, in.lambda, state, out, observer, &in.w0);
  return tr;
}

void check_head(const ModelConfig& m, int head) {
  const int H = m.num_attention_heads;
  if (head < 0 || head >= H)
    throw std::invalid_argument("head " + std::to_string(head) + " does not exist: the model has " + std::to_string(H) +
                                " heads (" + index_range(H) + ")");
}
}  // namespace

std::vector<HeadTrace> trace_block(const Model<float>& model, const std::vector<unsigned char>& bytes, int block,
                                   const std::vector<int>& heads, const std::vector<std::int64_t>& saved) {
  for (int h : heads) check_head(model.config(), h);
  // The stepper's own inputs (lab/engine/head_inputs.hpp), so the states are the ones it shows.
  const auto inputs = lab::model_layer_heads<double>(model, bytes, block, "model");
  std::vector<HeadTrace> out;
  out.reserve(heads.size());
  for (int h : heads) out.push_back(trace_inputs(inputs[static_cast<std::size_t>(h)], block, h, saved));
  return out;
}

bool trace_is_finite(const HeadTrace& tr) {
  const auto finite = [](const InnerWeights<double>& w) {
    return w.W1.allFinite() && w.b1.allFinite() && w.W2.allFinite() && w.b2.allFinite();
  };
  if (!finite(tr.w0)) return false;
  for (const auto& st : tr.states)
    if (!finite(st)) return false;
  for (const auto* v : {&tr.loss_initial, &tr.loss_before, &tr.loss_after, &tr.lambda, &tr.tau, &tr.eta})
    for (const double x : *v)
      if (!std::isfinite(x)) return false;
  return true;
}

HeadTrace trace_head(const Model<float>& model, const std::vector<unsigned char>& bytes, int block, int head,
                     const std::vector<std::int64_t>& saved) {
  return std::move(trace_block(model, bytes, block, {head}, saved).front());
}

StatesSummary plan_states(const ModelConfig& m, const StatesRequest& r) {
  if (!m.is_ttt())
    throw std::invalid_argument("this model's sequence layer is " + to_string(m.seq_layer) +
                                ", which has no inner state: choose a TTT-Linear or TTT-MLP model");
  if (r.bytes.empty()) throw std::invalid_argument("the text is empty: give --text or a non-empty --data file");
  if (r.stored != DType::F32 && r.stored != DType::F64)
    throw std::invalid_argument("states are stored as F32 or F64, not " + std::string(dtype_name(r.stored)));
  StatesSummary s;
  s.tokens = static_cast<long>(r.bytes.size());
  const int L = m.num_hidden_layers, H = m.num_attention_heads;
  for (int b : r.blocks)
    if (b < 0 || b >= L)
      throw std::invalid_argument("block " + std::to_string(b) + " does not exist: the model has " + std::to_string(L) +
                                  " blocks (" + index_range(L) + ")");
  for (int h : r.heads) check_head(m, h);
  s.blocks = r.blocks;
  s.heads = r.heads;
  if (s.blocks.empty())
    for (int b = 0; b < L; ++b) s.blocks.push_back(b);
  if (s.heads.empty())
    for (int h = 0; h < H; ++h) s.heads.push_back(h);
  for (auto* v : {&s.blocks, &s.heads}) {
    std::sort(v->begin(), v->end());
    v->erase(std::unique(v->begin(), v->end()), v->end());
  }
  s.saved = saved_tokens(s.tokens, m.mini_batch_size, r.every, r.stride);
  const std::uint64_t per_head = (static_cast<std::uint64_t>(s.saved.size()) + 1) * state_numbers(m) +
                                 6 * static_cast<std::uint64_t>(s.tokens);
  s.file_bytes = static_cast<std::uint64_t>(s.blocks.size() * s.heads.size()) * per_head * dtype_size(r.stored) +
                 static_cast<std::uint64_t>(s.tokens) * 9;  // tokens (U8) and at most T saved indices (I64)
  return s;
}

std::uint64_t states_memory(const ModelConfig& m, const StatesRequest& r, const StatesSummary& plan) {
  const double file = double(plan.file_bytes);
  const double block_traces = file / double(std::max<std::size_t>(plan.blocks.size(), 1)) * 8.0 / double(dtype_size(r.stored));
  const double inputs = 16.0 * double(plan.tokens) * double(m.hidden_size) * sizeof(double);
  return static_cast<std::uint64_t>(std::min(file + block_traces + inputs, 1.8e19));
}

StatesSummary compute_states(const Model<float>& model, const StatesRequest& r,
                             const std::function<void(const StatesTensor&)>& emit,
                             const std::function<void(int, int)>& progress) {
  const ModelConfig& m = model.config();
  StatesSummary s = plan_states(m, r);
  const bool mlp = m.seq_layer == SeqLayerKind::TTTMLP;
  emit({"tokens", {s.tokens}, std::span<const std::uint8_t>(r.bytes)});
  emit({"saved_tokens", {static_cast<std::int64_t>(s.saved.size())}, std::span<const std::int64_t>(s.saved)});
  const int total = static_cast<int>(s.blocks.size() * s.heads.size());
  int done = 0;
  for (int b : s.blocks)
    for (const HeadTrace& tr : trace_block(model, r.bytes, b, s.heads, s.saved)) {
      if (!trace_is_finite(tr)) throw NonFiniteModelError(non_finite_model_message(r.model_source));
      const std::string p = "block" + std::to_string(b) + ".head" + std::to_string(tr.head) + ".";
      for (Member member : {Member::W1, Member::b1, Member::W2, Member::b2})
        if (mlp || member == Member::W1 || member == Member::b1) emit_member(emit, p, member, tr);
      const std::pair<const char*, const std::vector<double>*> series[] = {
          {"loss_initial", &tr.loss_initial}, {"loss_before", &tr.loss_before}, {"loss_after", &tr.loss_after},
          {"lambda", &tr.lambda},             {"tau", &tr.tau},                 {"eta", &tr.eta}};
      for (const auto& [name, v] : series) emit({p + name, {s.tokens}, std::span<const double>(*v)});
      if (progress) progress(++done, total);
    }
  return s;
}

StatesSummary write_states_file(const Model<float>& model, const StatesRequest& r, const std::filesystem::path& out,
                                const std::function<void(int, int)>& progress) {
  const ModelConfig& m = model.config();
  StatesSummary s = plan_states(m, r);
  if (s.file_bytes > r.max_file_bytes)
    throw std::invalid_argument("the states file would take " + std::to_string(s.file_bytes >> 20) + " MiB, above the limit of " +
                                std::to_string(r.max_file_bytes >> 20) +
                                " MiB: save fewer states (--every mini-batch or --stride N), fewer blocks or heads, or "
                                "a shorter text, or raise --max-size");
  SafetensorsWriter w;
  nlohmann::json meta_blocks = s.blocks, meta_heads = s.heads;
  w.set_metadata("format", "tttlab-states");
  w.set_metadata("version", "1");
  w.set_metadata("model", r.model_source);
  w.set_metadata("layer", to_string(m.seq_layer));
  w.set_metadata("head_dim", std::to_string(m.head_dim()));
  w.set_metadata("mini_batch_size", std::to_string(m.mini_batch_size));
  w.set_metadata("blocks", meta_blocks.dump());
  w.set_metadata("heads", meta_heads.dump());
  w.set_metadata("saved", every_name(r.every, r.stride));
  w.set_metadata("layout", "W1[n, in, out]: z = k @ W1 + b1 for row vectors k; state i is the state after token "
                           "saved_tokens[i]; *_initial is W0, the state before token 0");
  compute_states(
      model, r,
      [&](const StatesTensor& t) {
        std::visit(
            [&](auto data) {
              if constexpr (std::is_same_v<decltype(data), std::span<const double>>)
                w.add(t.name, t.shape, data, r.stored);
              else
                w.add(t.name, t.shape, data);
            },
            t.data);
      },
      progress);
  w.write(out);
  s.file_bytes = std::filesystem::file_size(out);
  return s;
}

}  // namespace tttlab::inspect
