// tests/reference/reference_fixture.hpp — reading the cross-implementation fixtures (docs/MATH.md §10,
// oracle 12), shared by tests/core/test_reference.cpp (CPU engine) and tests/kernels/
// test_reference_gpu.cpp (GPU training step).
//
// A fixture is a directory made by tests/reference/make_fixtures.py from the official ttt-lm-pytorch
// TTTForCausalLM (README.md beside this file):
//   config.json            official TTTConfig keys (ModelConfig::from_json)
//   model.safetensors      the weights, official state_dict layout, F32 (load_model_safetensors)
//   reference.safetensors  F64: input_ids [B, T], logits [B, T, V], loss [], mixer_in.{i} / mixer_out.{i} /
//                          hidden.{i} [B, T, D], grad.{official name} (parameter shape),
//                          decode.logits [B, S, V] (after a cached prefill of P = T − S tokens)
// The fixture directory is TTTLAB_REFERENCE_DIR (compiled in by CMake), or the environment variable of
// the same name when set (for running a copied test binary elsewhere, e.g. on a GPU machine).
#pragma once

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <memory>
#include <sstream>
#include <stdexcept>
#include <string>
#include <type_traits>
#include <vector>

#include "tttlab/io/safetensors.hpp"
#include "tttlab/model/checkpoint.hpp"
#include "tttlab/model/config.hpp"
#include "tttlab/model/model.hpp"

namespace tttlab::reference {

inline std::filesystem::path fixture_root() {
  if (const char* env = std::getenv("TTTLAB_REFERENCE_DIR"); env && *env) return env;
  return TTTLAB_REFERENCE_DIR;
}

// TTT-Linear and TTT-MLP, each on the Transformer (t) and Mamba-style (m) backbone.
inline std::vector<std::string> fixture_names() { return {"ttt-linear-t", "ttt-linear-m", "ttt-mlp-t", "ttt-mlp-m"}; }

// A fixture's name as a test-name suffix (gtest allows no '-'): "ttt-linear-t" -> "ttt_linear_t".
// Takes the parameterised test's info object, of which it reads only `param`.
template <class TestParamInfo>
std::string fixture_test_name(const TestParamInfo& info) {
  std::string n = info.param;
  std::replace(n.begin(), n.end(), '-', '_');
  return n;
}

struct Fixture {
  std::string name;
  std::filesystem::path dir;
  ModelConfig config;
  std::shared_ptr<const SafetensorsFile> ref;  // reference.safetensors
  int B = 0, T = 0, V = 0, D = 0;
  int S = 0, P = 0;                            // decode steps, prefill length (P + S = T)
  std::vector<std::vector<int>> ids;           // [B][T]

  std::vector<double> tensor(const std::string& n) const { return ref->to_f64(n); }
  const std::vector<std::int64_t>& shape(const std::string& n) const { return ref->at(n).shape; }
  // Rows [b·T + t0, b·T + t0 + n) of a [B, T, C] tensor, i.e. sequence b, tokens t0 .. t0 + n − 1.
  std::vector<double> rows(const std::vector<double>& btc, int b, int t0, int n, int C, int Tn) const {
    const auto begin = btc.begin() + (static_cast<std::ptrdiff_t>(b) * Tn + t0) * C;
    return std::vector<double>(begin, begin + static_cast<std::ptrdiff_t>(n) * C);
  }
};

inline Fixture load_fixture(const std::string& name) {
  Fixture f;
  f.name = name;
  f.dir = fixture_root() / name;
  std::ifstream in(f.dir / "config.json");
  if (!in) throw std::runtime_error("reference fixture: cannot read " + (f.dir / "config.json").string());
  std::stringstream text;
  text << in.rdbuf();
  f.config = ModelConfig::from_json(text.str());
  f.ref = std::make_shared<const SafetensorsFile>(SafetensorsFile::read(f.dir / "reference.safetensors"));
  const auto& ids_shape = f.shape("input_ids");
  const auto& dec_shape = f.shape("decode.logits");
  if (ids_shape.size() != 2 || dec_shape.size() != 3)
    throw std::runtime_error("reference fixture " + name + ": input_ids must be [B, T], decode.logits [B, S, V]");
  f.B = static_cast<int>(ids_shape[0]);
  f.T = static_cast<int>(ids_shape[1]);
  f.S = static_cast<int>(dec_shape[1]);
  f.P = f.T - f.S;
  f.V = f.config.vocab_size;
  f.D = f.config.hidden_size;
  const std::vector<double> ids = f.tensor("input_ids");
  for (int b = 0; b < f.B; ++b) {
    std::vector<int> row;
    for (int t = 0; t < f.T; ++t) row.push_back(static_cast<int>(ids[static_cast<std::size_t>(b) * f.T + t]));
    f.ids.push_back(std::move(row));
  }
  return f;
}

// The fixture's weights in a Model<float> through the normal checkpoint loader, and the same values in
// a Model<double> (every weight is a float32 value, so the copy is exact).
inline std::unique_ptr<Model<float>> load_model_f32(const Fixture& f) {
  auto m = std::make_unique<Model<float>>(f.config, 0);
  load_model_safetensors(*m, f.dir / "model.safetensors");
  return m;
}

template <class S>
std::unique_ptr<Model<S>> load_model(const Fixture& f) {
  if constexpr (std::is_same_v<S, float>) {
    return load_model_f32(f);
  } else {
    auto m32 = load_model_f32(f);
    std::vector<const float*> src;
    m32->for_each_param([&](Eigen::Map<Mat<float>> m, const std::string&) { src.push_back(m.data()); });
    auto m = std::make_unique<Model<S>>(f.config, 0);
    std::size_t k = 0;
    m->for_each_param([&](Eigen::Map<Mat<S>> p, const std::string&) {
      for (Eigen::Index i = 0; i < p.size(); ++i) p.data()[i] = static_cast<S>(src[k][i]);
      ++k;
    });
    return m;
  }
}

// Where each element of each official tensor lives in the concatenation of Model::for_each_param's
// tensors (each row-major): the checkpoint writer (state_dict) applied to a model whose parameters hold
// their own positions, so the mapping is the project's own layout code, not a second copy of it.
// lm_head.weight (the tied copy) is left out.
struct OfficialTensor {
  std::string name;
  std::vector<std::int64_t> shape;
  std::vector<std::size_t> source;  // element j of the official tensor = flat[source[j]]
};

inline std::vector<OfficialTensor> official_layout(const ModelConfig& config) {
  Model<float> probe(config, 0);
  std::size_t k = 0;
  probe.for_each_param([&](Eigen::Map<Mat<float>> m, const std::string&) {
    for (Eigen::Index i = 0; i < m.size(); ++i) m.data()[i] = static_cast<float>(k++);
  });
  if (k >= (std::size_t{1} << 24)) throw std::runtime_error("official_layout: too many parameters for exact tags");
  std::vector<OfficialTensor> out;
  for (const NamedTensor& t : state_dict(probe)) {
    if (t.name == "lm_head.weight") continue;
    OfficialTensor o{t.name, t.shape, {}};
    for (float v : t.data) o.source.push_back(static_cast<std::size_t>(v));
    out.push_back(std::move(o));
  }
  return out;
}

// The concatenation of a model's (or gradient's) tensors in for_each_param order.
template <class S>
std::vector<double> flat_params(Model<S>& m) {
  std::vector<double> flat;
  m.for_each_param([&](Eigen::Map<Mat<S>> p, const std::string&) { flat.insert(flat.end(), p.data(), p.data() + p.size()); });
  return flat;
}

inline std::vector<double> gather(const std::vector<double>& flat, const OfficialTensor& t) {
  std::vector<double> out;
  out.reserve(t.source.size());
  for (std::size_t i : t.source) out.push_back(flat.at(i));
  return out;
}

// The error measure of every comparison: max_i |got_i − ref_i| / max_i |ref_i| (relative to the
// tensor's largest entry, so entries near zero are judged at the tensor's scale).
struct Error {
  double max_abs = 0;  // max |got − ref|
  double scale = 0;    // max |ref|
  double rel() const { return scale > 0 ? max_abs / scale : max_abs; }
  void add(const std::vector<double>& got, const std::vector<double>& ref) {
    if (got.size() != ref.size())
      throw std::runtime_error("reference: comparing " + std::to_string(got.size()) + " values with " +
                               std::to_string(ref.size()));
    for (std::size_t i = 0; i < ref.size(); ++i) {
      const double d = std::abs(got[i] - ref[i]);
      max_abs = std::isfinite(d) ? std::max(max_abs, d) : HUGE_VAL;  // a NaN must not vanish in max
      scale = std::max(scale, std::abs(ref[i]));
    }
  }
};

template <class S>
std::vector<double> to_vector(const Mat<S>& m) {
  return std::vector<double>(m.data(), m.data() + m.size());
}

}  // namespace tttlab::reference
