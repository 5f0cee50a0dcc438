// AdamW with global-norm clipping (see tttlab/optim/adamw.hpp).
#include "tttlab/optim/adamw.hpp"

#include <charconv>
#include <cstdint>
#include <cmath>
#include <stdexcept>
#include <type_traits>

#include "tttlab/io/safetensors.hpp"

namespace tttlab {

void AdamWConfig::validate() const {
  if (!(beta1 >= 0 && beta1 < 1) || !(beta2 >= 0 && beta2 < 1))
    throw std::invalid_argument("AdamW: beta1 and beta2 must lie in [0, 1)");
  if (!(eps >= 0)) throw std::invalid_argument("AdamW: epsilon must be >= 0");
  if (!(weight_decay >= 0)) throw std::invalid_argument("AdamW: weight decay must be >= 0");
  if (std::isnan(clip_norm)) throw std::invalid_argument("AdamW: the clipping norm must be a number");
}

template <class S>
double global_grad_norm(std::span<const NamedParam<S>> params) {
  double sum = 0;
  for (const auto& p : params)
    for (const S g : p.grad) sum += static_cast<double>(g) * static_cast<double>(g);
  return std::sqrt(sum);
}

template <class S>
AdamW<S>::AdamW(const AdamWConfig& config, const WarmupCosineSchedule& schedule)
    : m_config(config), m_schedule(schedule) {
  m_config.validate();
  m_schedule.validate();
}

namespace {
// The largest step count a state may carry: step() adds one to it and computes the bias corrections
// from it as a double, exact up to 2^53. A count beyond (found by fuzz_train_state: a
// train_state.safetensors with optim.step = 2^63 - 1 made the next step overflow, undefined behaviour)
// comes from a damaged or hostile file, never from a run.
constexpr std::int64_t k_max_state_step = std::int64_t{1} << 53;
}  // namespace

template <class S>
void AdamW<S>::load_state(AdamWState<S> state) {
  if (state.step < 0) throw std::invalid_argument("AdamW: the step count of a state cannot be negative");
  if (state.step > k_max_state_step)
    throw std::invalid_argument("AdamW: the step count of a state is " + std::to_string(state.step) +
                                ", more than any run takes (at most 2^53)");
  if (state.m.size() != state.names.size() || state.v.size() != state.names.size())
    throw std::invalid_argument("AdamW: a state needs one first and one second moment per parameter");
  for (std::size_t i = 0; i < state.names.size(); ++i)
    if (state.m[i].size() != state.v[i].size())
      throw std::invalid_argument("AdamW: moments of '" + state.names[i] + "' differ in size");
  m_state = std::move(state);
}

template <class S>
AdamWReport AdamW<S>::step(std::span<const NamedParam<S>> params) {
  for (const auto& p : params)
    if (p.value.size() != p.grad.size())
      throw std::invalid_argument("AdamW: parameter '" + p.name + "' has " + std::to_string(p.value.size()) +
                                  " values but " + std::to_string(p.grad.size()) + " gradients");
  if (m_state.names.empty() && m_state.step == 0) {
    for (const auto& p : params) {
      m_state.names.push_back(p.name);
      m_state.m.emplace_back(p.value.size(), S(0));
      m_state.v.emplace_back(p.value.size(), S(0));
    }
  }
  if (params.size() != m_state.names.size())
    throw std::invalid_argument("AdamW: got " + std::to_string(params.size()) + " parameters, the optimizer state has " +
                                std::to_string(m_state.names.size()));
  for (std::size_t i = 0; i < params.size(); ++i)
    if (params[i].name != m_state.names[i] || params[i].value.size() != m_state.m[i].size())
      throw std::invalid_argument("AdamW: parameter " + std::to_string(i) + " is '" + params[i].name + "' of size " +
                                  std::to_string(params[i].value.size()) + ", the optimizer state expects '" +
                                  m_state.names[i] + "' of size " + std::to_string(m_state.m[i].size()));

  AdamWReport r;
  r.grad_norm = global_grad_norm(params);
  if (!std::isfinite(r.grad_norm)) {
    r.skipped = true;
    r.step = m_state.step;
    return r;
  }
  if (m_config.clip_norm > 0 && r.grad_norm > m_config.clip_norm) r.clip_scale = m_config.clip_norm / r.grad_norm;
  r.lr = m_schedule(m_state.step);
  const double n = static_cast<double>(m_state.step + 1);
  const S b1 = static_cast<S>(m_config.beta1), b2 = static_cast<S>(m_config.beta2);
  const S one_minus_b1 = static_cast<S>(1.0 - m_config.beta1), one_minus_b2 = static_cast<S>(1.0 - m_config.beta2);
  const S inv_bc1 = static_cast<S>(1.0 / (1.0 - std::pow(m_config.beta1, n)));
  const S inv_bc2 = static_cast<S>(1.0 / (1.0 - std::pow(m_config.beta2, n)));
  const S scale = static_cast<S>(r.clip_scale), lr = static_cast<S>(r.lr), eps = static_cast<S>(m_config.eps);
  const S wd = static_cast<S>(m_config.weight_decay);
  for (std::size_t i = 0; i < params.size(); ++i) {
    S* p = params[i].value.data();
    const S* g = params[i].grad.data();
    S* m = m_state.m[i].data();
    S* v = m_state.v[i].data();
    for (std::size_t j = 0, e = params[i].value.size(); j < e; ++j) {
      const S gj = g[j] * scale;
      m[j] = b1 * m[j] + one_minus_b1 * gj;
      v[j] = b2 * v[j] + one_minus_b2 * gj * gj;
      const S mhat = m[j] * inv_bc1, vhat = v[j] * inv_bc2;
      p[j] -= lr * (mhat / (std::sqrt(vhat) + eps) + wd * p[j]);
    }
  }
  r.step = ++m_state.step;
  return r;
}

template <class S>
void AdamWState<S>::save(SafetensorsWriter& w, std::string_view prefix) const {
  const std::string pre(prefix);
  constexpr DType dt = std::is_same_v<S, float> ? DType::F32 : DType::F64;
  for (std::size_t i = 0; i < names.size(); ++i) {
    w.add(pre + "m." + names[i], {static_cast<std::int64_t>(m[i].size())}, std::span<const S>(m[i]), dt);
    w.add(pre + "v." + names[i], {static_cast<std::int64_t>(v[i].size())}, std::span<const S>(v[i]), dt);
  }
  w.set_metadata(pre + "type", "adamw");
  w.set_metadata(pre + "step", std::to_string(step));
}

template <class S>
AdamWState<S> AdamWState<S>::load(const SafetensorsFile& f, std::string_view prefix) {
  const std::string pre(prefix);
  auto fail = [&](const std::string& what) -> void {
    throw SafetensorsError("optimizer state in '" + f.source() + "': " + what);
  };
  constexpr DType dt = std::is_same_v<S, float> ? DType::F32 : DType::F64;
  AdamWState<S> st;
  const std::string* type = f.metadata_value(pre + "type");
  if (!type || *type != "adamw") fail("metadata " + pre + "type is not \"adamw\" (not an AdamW state?)");
  const std::string* step = f.metadata_value(pre + "step");
  if (!step) fail("metadata " + pre + "step is missing");
  const auto res = std::from_chars(step->data(), step->data() + step->size(), st.step);
  if (res.ec != std::errc() || res.ptr != step->data() + step->size() || st.step < 0)
    fail("metadata " + pre + "step is not a non-negative integer");
  if (st.step > k_max_state_step)
    fail("metadata " + pre + "step is " + *step + ", more than any run takes (at most 2^53)");
  const std::string mpre = pre + "m.";
  for (const TensorEntry& t : f.tensors()) {
    if (!t.name.starts_with(mpre)) continue;
    const std::string name = t.name.substr(mpre.size());
    const TensorEntry* tv = f.find(pre + "v." + name);
    if (!tv) fail("second moment of '" + name + "' is missing");
    if (t.dtype != dt || tv->dtype != dt)
      fail("moments of '" + name + "' are " + std::string(dtype_name(t.dtype)) + ", expected " +
           std::string(dtype_name(dt)) + " for this optimizer");
    if (t.numel() != tv->numel()) fail("moments of '" + name + "' differ in size");
    st.names.push_back(name);
    if constexpr (std::is_same_v<S, float>) {
      st.m.push_back(f.to_f32(t.name));
      st.v.push_back(f.to_f32(tv->name));
    } else {
      st.m.push_back(f.to_f64(t.name));
      st.v.push_back(f.to_f64(tv->name));
    }
    // A second moment is a running mean of squares: finite and never negative. A first moment is
    // finite. Anything else is damage (or a diverged run) that the next update would spread.
    for (std::size_t i = 0; i < st.m.back().size(); ++i)
      if (!std::isfinite(st.m.back()[i]))
        fail("first moment of '" + name + "' holds a non-finite value (element " + std::to_string(i) + ")");
    for (std::size_t i = 0; i < st.v.back().size(); ++i)
      if (!std::isfinite(st.v.back()[i]) || st.v.back()[i] < 0)
        fail("second moment of '" + name + "' holds " + (st.v.back()[i] < 0 ? "a negative" : "a non-finite") +
             " value (element " + std::to_string(i) + "); it must be finite and >= 0");
  }
  for (const TensorEntry& t : f.tensors())
    if (t.name.starts_with(pre + "v.") && !f.find(mpre + t.name.substr(pre.size() + 2)))
      fail("first moment of '" + t.name.substr(pre.size() + 2) + "' is missing");
  return st;
}

template double global_grad_norm<float>(std::span<const NamedParam<float>>);
template double global_grad_norm<double>(std::span<const NamedParam<double>>);
template class AdamW<float>;
template class AdamW<double>;
template struct AdamWState<float>;
template struct AdamWState<double>;

}  // namespace tttlab
