// The CPU Mamba-2 layer against the REFERENCE implementation, state-spaces/mamba's Mamba2 (docs/MATH.md
// §8.8; tests/reference/README.md, section "Mamba-2"). The layer's own tests compare its two forms and
// its backward with each other and with finite differences, so a convention both share (the order of
// in_proj's columns, the conv's taps, Δ's softplus, where the gate enters the norm) would pass them; this
// one compares with outputs of the reference, computed in float64 by tests/reference/
// make_mamba2_fixtures.py (its manifest says which reference computed them and which checks ran).
//
// Each fixture (mamba2-a, -b, -c: widths 32 and 48, 2 to 6 heads, d_conv 3 and 4, lengths 13 to 37, not
// multiples of the chunk) gives the parameters in the reference's state_dict layout (params.safetensors,
// F32) and, in F64, the input x [B, T, D], y = layer(x), a fixed G and the gradients of sum(y ⊙ G) with
// respect to x and every parameter. For Mamba2Layer<double> and <float> the test checks
//   y          forward_train (the chunked form) of each sequence;
//   grad.*     backward with dY = G, summed over the batch as autograd does;
//   stream.y   the recurrent form, streaming: a prefill of T/3 tokens, then one token per call.
// ERROR = max |ours − reference| / max |reference| per tensor. Tolerances: fp64 1e-10 (the same function
// in float64 on the same float32-valued parameters; only summation order differs, ~1e-15), fp32 1e-5
// (float32 rounding against the float64 reference). The test prints the largest error per tensor.
//
// The fixtures are committed; a missing one fails with how to make it. TTTLAB_REFERENCE_DIR (compiled
// in, or the environment variable) says where they are.
#include <gtest/gtest.h>

#include <cstdio>
#include <fstream>
#include <memory>
#include <sstream>
#include <string>
#include <utility>
#include <vector>

#include "reference/reference_fixture.hpp"
#include "tttlab/io/json.hpp"
#include "tttlab/seq/mamba2_layer.hpp"

namespace tttlab::reference {
namespace {

constexpr double kTolFp64 = 1e-10;
constexpr double kTolFp32 = 1e-5;
const char* const kParamNames[] = {"in_proj.weight", "conv1d.weight", "conv1d.bias", "dt_bias",
                                   "A_log",          "D",             "norm.weight", "out_proj.weight"};

std::vector<std::string> mamba2_fixture_names() { return {"mamba2-a", "mamba2-b", "mamba2-c"}; }

struct Mamba2Fixture {
  std::string name;
  Mamba2Config cfg;
  int B = 0, T = 0;
  std::shared_ptr<const SafetensorsFile> params, ref;
};

Mamba2Fixture load_mamba2_fixture(const std::string& name) {
  const std::filesystem::path dir = fixture_root() / name;
  std::ifstream in(dir / "config.json");
  if (!in)
    throw std::runtime_error(
        "Mamba-2 reference fixture " + (dir / "config.json").string() +
        " is missing. Make the fixtures on a machine with a GPU and torch: python3 tests/reference/"
        "make_mamba2_fixtures.py --mamba-src <state-spaces/mamba checkout> [--fla-src <flash-linear-attention "
        "checkout>] (tests/reference/README.md, section Mamba-2)");
  std::stringstream text;
  text << in.rdbuf();
  const nlohmann::json j = nlohmann::json::parse(text.str());
  Mamba2Fixture f;
  f.name = name;
  f.cfg.width = j.at("width").get<int>();
  f.cfg.d_state = j.at("d_state").get<int>();
  f.cfg.d_conv = j.at("d_conv").get<int>();
  f.cfg.expand = j.at("expand").get<int>();
  f.cfg.headdim = j.at("headdim").get<int>();
  f.cfg.chunk_size = j.at("chunk_size").get<int>();
  f.cfg.norm_eps = j.at("norm_eps").get<double>();
  f.cfg.validate();
  f.B = j.at("batch").get<int>();
  f.T = j.at("seq_len").get<int>();
  f.params = std::make_shared<const SafetensorsFile>(SafetensorsFile::read(dir / "params.safetensors"));
  f.ref = std::make_shared<const SafetensorsFile>(SafetensorsFile::read(dir / "reference.safetensors"));
  return f;
}

// The reference stores the two projections as nn.Linear weights, [out, in]; the layer keeps [in, out].
bool is_linear(const std::string& name) { return name == "in_proj.weight" || name == "out_proj.weight"; }

// A parameter (or its gradient) as the file lays it out, row-major: transposed for the projections;
// conv1d.weight [C, K] is the file's [C, 1, K] as it is.
template <class S>
std::vector<double> file_order(const std::string& name, const Eigen::Map<Mat<S>>& m) {
  const Mat<S> t = is_linear(name) ? Mat<S>(m.transpose()) : Mat<S>(m);
  return std::vector<double>(t.data(), t.data() + t.size());
}

template <class S>
std::vector<std::int64_t> file_shape(const std::string& name, const Eigen::Map<Mat<S>>& m) {
  if (is_linear(name)) return {m.cols(), m.rows()};
  if (name == "conv1d.weight") return {m.rows(), 1, m.cols()};
  return {m.cols()};
}

template <class S>
std::unique_ptr<Mamba2Layer<S>> load_layer(const Mamba2Fixture& f) {
  auto layer = std::make_unique<Mamba2Layer<S>>(f.cfg, Mamba2Params<S>::zeros(f.cfg));
  int loaded = 0;
  layer->for_each_param([&](Eigen::Map<Mat<S>> m, const std::string& name) {
    const TensorEntry& e = f.params->at(name);
    if (e.shape != file_shape<S>(name, m))
      throw std::runtime_error(f.name + ": params.safetensors '" + name + "' has another shape than the layer's");
    const std::vector<double> v = f.params->to_f64(name);
    Mat<S> t(is_linear(name) ? m.cols() : m.rows(), is_linear(name) ? m.rows() : m.cols());
    for (Eigen::Index i = 0; i < t.size(); ++i) t.data()[i] = static_cast<S>(v[static_cast<std::size_t>(i)]);
    if (is_linear(name))
      m = t.transpose();
    else
      m = t;
    ++loaded;
  });
  if (loaded != static_cast<int>(std::size(kParamNames)) || f.params->tensors().size() != std::size(kParamNames))
    throw std::runtime_error(f.name + ": the layer and params.safetensors have different parameter sets");
  return layer;
}

// Sequence b of a [B, T, D] tensor.
std::vector<double> rows(const std::vector<double>& btd, int b, int T, int D) {
  const auto begin = btd.begin() + static_cast<std::ptrdiff_t>(b) * T * D;
  return std::vector<double>(begin, begin + static_cast<std::ptrdiff_t>(T) * D);
}

template <class S>
Mat<S> sequence(const std::vector<double>& btd, int b, int T, int D) {
  Mat<S> m(T, D);
  for (Eigen::Index i = 0; i < m.size(); ++i)
    m.data()[i] = static_cast<S>(btd[static_cast<std::size_t>(b) * T * D + static_cast<std::size_t>(i)]);
  return m;
}

// Every comparison of one fixture in precision S, in a fixed order: (tensor, error).
template <class S>
std::vector<std::pair<std::string, Error>> measure(const Mamba2Fixture& f) {
  const auto layer = load_layer<S>(f);
  const int B = f.B, T = f.T, D = f.cfg.width;
  const std::vector<double> x = f.ref->to_f64("x"), G = f.ref->to_f64("G"), y_ref = f.ref->to_f64("y");
  const std::vector<double> dx_ref = f.ref->to_f64("grad.x");
  Error y, dx, stream;
  std::vector<double> grad_sum;  // the parameter gradients, file order, summed over the batch
  for (int b = 0; b < B; ++b) {
    const Mat<S> xb = sequence<S>(x, b, T, D);
    const std::vector<double> yb_ref = rows(y_ref, b, T, D);
    Mat<S> yb;
    const auto cache = layer->forward_train(xb, yb);
    y.add(to_vector<S>(yb), yb_ref);
    auto grads = layer->zeros_like();
    Mat<S> dxb;
    layer->backward(*cache, sequence<S>(G, b, T, D), *grads, dxb);
    dx.add(to_vector<S>(dxb), rows(dx_ref, b, T, D));
    std::size_t k = 0;
    grads->for_each_param([&](Eigen::Map<Mat<S>> m, const std::string& name) {
      const std::vector<double> g = file_order<S>(name, m);
      if (grad_sum.size() < k + g.size()) grad_sum.resize(k + g.size(), 0.0);
      for (double v : g) grad_sum[k++] += v;
    });
    // Streaming with the recurrent form: a prefill, then one token per call.
    auto st = layer->start();
    const int P = T / 3;
    std::vector<double> streamed = to_vector<S>(layer->forward(*st, xb.topRows(P)));
    for (int t = P; t < T; ++t) {
      const std::vector<double> one = to_vector<S>(layer->forward(*st, xb.middleRows(t, 1)));
      streamed.insert(streamed.end(), one.begin(), one.end());
    }
    stream.add(streamed, yb_ref);
  }
  std::vector<std::pair<std::string, Error>> out{{"y", y}, {"grad.x", dx}};
  std::size_t k = 0;
  layer->for_each_param([&](Eigen::Map<Mat<S>> m, const std::string& name) {
    const std::vector<double> g(grad_sum.begin() + static_cast<std::ptrdiff_t>(k),
                                grad_sum.begin() + static_cast<std::ptrdiff_t>(k + m.size()));
    k += static_cast<std::size_t>(m.size());
    Error e;
    e.add(g, f.ref->to_f64("grad." + name));
    out.emplace_back("grad." + name, e);
  });
  out.emplace_back("stream.y (recurrent form)", stream);
  return out;
}

class Mamba2Reference : public ::testing::TestWithParam<std::string> {};

TEST_P(Mamba2Reference, LayerMatchesTheReferenceInFp64AndFp32) {
  const Mamba2Fixture f = load_mamba2_fixture(GetParam());
  ASSERT_EQ(f.ref->at("x").shape, (std::vector<std::int64_t>{f.B, f.T, f.cfg.width}));
  ASSERT_EQ(f.ref->at("y").shape, f.ref->at("x").shape);
  ASSERT_EQ(f.ref->at("G").shape, f.ref->at("x").shape);
  for (const char* n : kParamNames)
    ASSERT_NE(f.ref->find(std::string("grad.") + n), nullptr) << f.name << ": no grad." << n;

  const auto e64 = measure<double>(f);
  const auto e32 = measure<float>(f);
  ASSERT_EQ(e64.size(), e32.size());
  std::printf("[mamba2 reference] %s: B=%d T=%d width=%d d_state=%d d_conv=%d heads=%d x %d, chunk %d; "
              "error = max|ours - reference| / max|reference|\n",
              f.name.c_str(), f.B, f.T, f.cfg.width, f.cfg.d_state, f.cfg.d_conv, f.cfg.heads(), f.cfg.headdim,
              f.cfg.chunk_size);
  std::printf("  %-30s %14s %12s %12s\n", "tensor", "max|reference|", "fp64 error", "fp32 error");
  double worst64 = 0, worst32 = 0;
  for (std::size_t i = 0; i < e64.size(); ++i) {
    const auto& [name, a] = e64[i];
    const Error& c = e32[i].second;
    std::printf("  %-30s %14.4e %12.3e %12.3e\n", name.c_str(), a.scale, a.rel(), c.rel());
    EXPECT_LE(a.rel(), kTolFp64) << f.name << " " << name << " (fp64)";
    EXPECT_LE(c.rel(), kTolFp32) << f.name << " " << name << " (fp32)";
    EXPECT_GT(a.scale, 0.0) << f.name << " " << name << ": an all-zero reference checks nothing";
    worst64 = std::max(worst64, a.rel());
    worst32 = std::max(worst32, c.rel());
  }
  std::printf("  largest: fp64 %.3e (tol %.0e), fp32 %.3e (tol %.0e)\n", worst64, kTolFp64, worst32, kTolFp32);
  std::fflush(stdout);
}

INSTANTIATE_TEST_SUITE_P(Reference, Mamba2Reference, ::testing::ValuesIn(mamba2_fixture_names()),
                         fixture_test_name<::testing::TestParamInfo<std::string>>);

}  // namespace
}  // namespace tttlab::reference
