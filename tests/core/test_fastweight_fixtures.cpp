// The fast-weight inner loops (tttlab/fastweight/matrix_rules.hpp, docs/MATH.md §11) against
// OUTSIDE references: flash-linear-attention's pure-PyTorch naive implementations, run in float64
// on fixed seeded inputs by tests/reference/make_fastweight_fixtures.py (tests/reference/README.md,
// section "Fast weights"). test_fastweight.cpp compares our forms with each other and our backward
// with finite differences, so a convention all of them share (where β and the decay enter, read
// before or after the write) would pass it; these fixtures pin the conventions to FLA's.
//
// Each fixture (linear attention, simple GLA, DeltaNet, Gated DeltaNet: 2 sequences × 2 heads, T =
// 45 to 77, K = 8, V = 6, a random initial state) holds, in F64 and the layout [B, H, T, ·], the
// reference's inputs, its outputs o and final state S_T, fixed weights dO, dS_T and the gradients
// of L = Σ o ⊙ dO + Σ S_T ⊙ dS_T with respect to every input. The mapping to our inner loops
// (docs/MATH.md §11.6): q ← scale·q (FLA scales the query inside, we do not), α = e^g, β = 1 for
// simple GLA (our decayed Hebbian rule), the state [K, V] as it is (both read o = q S); back:
// grad.q = scale·dq, grad.g = α ⊙ dα. For every (sequence, head) the test runs, in double and
// float:
//   o, S_T        the primal form, and the chunked form with chunks of 16 and 5 (neither divides
//                 T);
//   grad.*        the manual backward with dO and dS_T.
// ERROR = max |ours − reference| / max |reference| over the whole tensor. Tolerances: fp64 1e-10
// (the same function in float64 on the same float32-valued inputs; only the summation order
// differs, ~1e-15); fp32 1e-5 (float32 rounding of at most 77 steps of a contracting or bounded
// recurrence, against the float64 reference). A second test shows that the fixtures do tell the
// conventions apart.
//
// A missing fixture skips its test, naming the path. TTTLAB_REFERENCE_DIR (compiled in, or the
// environment variable) says where the fixtures are.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdio>
#include <filesystem>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "reference/reference_fixture.hpp"
#include "tttlab/fastweight/matrix_rules.hpp"

namespace tttlab::reference {
namespace {

constexpr double kFwTolFp64 = 1e-10;
constexpr double kFwTolFp32 = 1e-5;
const int kFwChunks[] = {16, 5};

struct FwFixture {
  std::string name;  // "fastweight-delta-rule"
  MatrixRule rule = MatrixRule::LinearAttention;
  std::filesystem::path path;
  std::shared_ptr<const SafetensorsFile> ref;
  int B = 0, H = 0, T = 0, K = 0, V = 0;
  double scale = 0;
  bool has_beta = false, has_g = false;

  std::vector<double> tensor(const std::string& n) const { return ref->to_f64(n); }
};

// The fixture name (tests/reference/fastweight-<name>/) and the inner loop it checks.
std::vector<std::pair<std::string, MatrixRule>> fw_fixture_list() {
  return {{"linear-attn", MatrixRule::LinearAttention},
          {"simple-gla", MatrixRule::DecayedHebbian},
          {"delta-rule", MatrixRule::DeltaNet},
          {"gated-delta-rule", MatrixRule::GatedDeltaNet}};
}

std::vector<std::string> fw_fixture_names() {
  std::vector<std::string> names;
  for (const auto& [n, r] : fw_fixture_list()) names.push_back(n);
  return names;
}

std::string fw_test_name(const ::testing::TestParamInfo<std::string>& info) {
  return fixture_test_name(info);
}

// Empty `name` in the result: the file is missing (the caller skips).
FwFixture load_fw_fixture(const std::string& which) {
  FwFixture f;
  for (const auto& [n, r] : fw_fixture_list())
    if (n == which) f.rule = r;
  f.path = fixture_root() / ("fastweight-" + which) / "reference.safetensors";
  if (!std::filesystem::exists(f.path)) return f;
  f.name = "fastweight-" + which;
  f.ref = std::make_shared<const SafetensorsFile>(SafetensorsFile::read(f.path));
  const auto& qs = f.ref->at("q").shape;
  const auto& vs = f.ref->at("v").shape;
  if (qs.size() != 4 || vs.size() != 4)
    throw std::runtime_error(f.name + ": q and v must be [B, H, T, ·]");
  f.B = static_cast<int>(qs[0]);
  f.H = static_cast<int>(qs[1]);
  f.T = static_cast<int>(qs[2]);
  f.K = static_cast<int>(qs[3]);
  f.V = static_cast<int>(vs[3]);
  f.scale = f.tensor("scale").at(0);
  f.has_beta = f.ref->find("beta") != nullptr;
  f.has_g = f.ref->find("g") != nullptr;
  return f;
}

// Rows [T, C] of fw_head (b, h) of a [B, H, T, C] tensor (C = 1 for a [B, H, T] one; then also [K, V]
// of a [B, H, K, V] state with T = K, C = V).
template <class S>
Mat<S> fw_head(const std::vector<double>& x, int b, int h, int H, int rows, int cols,
            double mul = 1.0) {
  Mat<S> m(rows, cols);
  const std::size_t base = (static_cast<std::size_t>(b) * H + h) * rows * cols;
  for (Eigen::Index i = 0; i < m.size(); ++i)
    m.data()[i] = static_cast<S>(mul * x[base + static_cast<std::size_t>(i)]);
  return m;
}

template <class S>
Vec<S> fw_head_series(const std::vector<double>& x, int b, int h, int H, int T) {
  Vec<S> v(T);
  for (int t = 0; t < T; ++t)
    v(t) = static_cast<S>(x[(static_cast<std::size_t>(b) * H + h) * T + t]);
  return v;
}

template <class S>
void fw_append(std::vector<double>& out, const Mat<S>& m) {
  out.insert(out.end(), m.data(), m.data() + m.size());
}

template <class S>
void fw_append(std::vector<double>& out, const Vec<S>& v) {
  out.insert(out.end(), v.data(), v.data() + v.size());
}

// One head's inputs, mapped to our convention (q scaled, α = e^g, β = 1 where FLA has none).
template <class S>
struct FwHeadInputs {
  Mat<S> q, k, v, S0;
  Vec<S> beta, alpha;
};

template <class S>
FwHeadInputs<S> fw_head_inputs(const FwFixture& f, int b, int h) {
  FwHeadInputs<S> in;
  in.q = fw_head<S>(f.tensor("q"), b, h, f.H, f.T, f.K, f.scale);
  in.k = fw_head<S>(f.tensor("k"), b, h, f.H, f.T, f.K);
  in.v = fw_head<S>(f.tensor("v"), b, h, f.H, f.T, f.V);
  in.S0 = fw_head<S>(f.tensor("S0"), b, h, f.H, f.K, f.V);
  if (uses_beta(f.rule))
    in.beta = f.has_beta ? fw_head_series<S>(f.tensor("beta"), b, h, f.H, f.T) : Vec<S>::Ones(f.T);
  if (uses_alpha(f.rule)) {
    const Vec<double> g = fw_head_series<double>(f.tensor("g"), b, h, f.H, f.T);
    in.alpha = g.array().exp().template cast<S>().matrix();  // α = e^g, formed in double
  }
  return in;
}

// Every comparison of one fixture in precision S, in a fixed order: (tensor and form, error).
template <class S>
std::vector<std::pair<std::string, Error>> fw_measure(const FwFixture& f) {
  std::vector<double> o_p, S_p, dq, dk, dv, dbeta, dg, dS0;
  std::vector<std::vector<double>> o_c(std::size(kFwChunks)), S_c(std::size(kFwChunks));
  const std::vector<double> dO = f.tensor("dO"), dS = f.tensor("dS_T");
  for (int b = 0; b < f.B; ++b)
    for (int h = 0; h < f.H; ++h) {
      const FwHeadInputs<S> in = fw_head_inputs<S>(f, b, h);
      const MatrixRuleOutput<S> p =
          matrix_rule_primal<S>(f.rule, in.q, in.k, in.v, in.beta, in.alpha, in.S0);
      fw_append(o_p, p.o);
      fw_append(S_p, p.state);
      for (std::size_t c = 0; c < std::size(kFwChunks); ++c) {
        const MatrixRuleOutput<S> r = matrix_rule_chunked<S>(f.rule, in.q, in.k, in.v, in.beta,
                                                             in.alpha, in.S0, kFwChunks[c]);
        fw_append(o_c[c], r.o);
        fw_append(S_c[c], r.state);
      }
      const MatrixRuleGrads<S> g = matrix_rule_backward<S>(
          f.rule, in.q, in.k, in.v, in.beta, in.alpha, in.S0, fw_head<S>(dO, b, h, f.H, f.T, f.V),
          fw_head<S>(dS, b, h, f.H, f.K, f.V));
      // FLA scales q inside the op: ∂/∂q = scale · ∂/∂(scale q).
      fw_append(dq, Mat<S>(g.dq * static_cast<S>(f.scale)));
      fw_append(dk, g.dk);
      fw_append(dv, g.dv);
      fw_append(dS0, g.dS0);
      if (f.has_beta) fw_append(dbeta, g.dbeta);
      if (f.has_g) fw_append(dg, Vec<S>(g.dalpha.cwiseProduct(in.alpha)));  // ∂/∂g = α ∂/∂α
    }
  auto err = [&](const std::vector<double>& got, const char* ref) {
    Error e;
    e.add(got, f.tensor(ref));
    return e;
  };
  std::vector<std::pair<std::string, Error>> out{{"o (primal)", err(o_p, "o")},
                                                 {"S_T (primal)", err(S_p, "S_T")}};
  for (std::size_t c = 0; c < std::size(kFwChunks); ++c) {
    const std::string tag = " (chunked, C=" + std::to_string(kFwChunks[c]) + ")";
    out.emplace_back("o" + tag, err(o_c[c], "o"));
    out.emplace_back("S_T" + tag, err(S_c[c], "S_T"));
  }
  out.emplace_back("grad.q (backward)", err(dq, "grad.q"));
  out.emplace_back("grad.k (backward)", err(dk, "grad.k"));
  out.emplace_back("grad.v (backward)", err(dv, "grad.v"));
  if (f.has_beta) out.emplace_back("grad.beta (backward)", err(dbeta, "grad.beta"));
  if (f.has_g) out.emplace_back("grad.g (backward)", err(dg, "grad.g"));
  out.emplace_back("grad.S0 (backward)", err(dS0, "grad.S0"));
  return out;
}

class FastWeightFixture : public ::testing::TestWithParam<std::string> {};

TEST_P(FastWeightFixture, InnerLoopMatchesFlaInFp64AndFp32) {
  const FwFixture f = load_fw_fixture(GetParam());
  if (f.name.empty())
    GTEST_SKIP()
        << "fixture missing: " << f.path.string()
        << " (make it: python3 tests/reference/make_fastweight_fixtures.py <flash-linear-attention "
           "checkout>; tests/reference/README.md, section Fast weights)";
  ASSERT_EQ(f.ref->at("k").shape, f.ref->at("q").shape);
  ASSERT_EQ(f.ref->at("o").shape, f.ref->at("v").shape);
  ASSERT_EQ(f.ref->at("S_T").shape, (std::vector<std::int64_t>{f.B, f.H, f.K, f.V}));
  ASSERT_EQ(f.has_beta, is_delta_rule(f.rule))
      << f.name << ": β is FLA's input exactly for the delta rules";
  ASSERT_EQ(f.has_g, uses_alpha(f.rule)) << f.name;
  ASSERT_NE(f.K, f.V) << f.name << ": K = V would hide a transposed state";

  const auto e64 = fw_measure<double>(f);
  const auto e32 = fw_measure<float>(f);
  ASSERT_EQ(e64.size(), e32.size());
  std::printf(
      "[fastweight fixture] %s (%s): B=%d H=%d T=%d K=%d V=%d scale=%.6f; "
      "error = max|ours - FLA| / max|FLA|\n",
      f.name.c_str(), to_string(f.rule), f.B, f.H, f.T, f.K, f.V, f.scale);
  std::printf("  %-26s %14s %12s %12s\n", "tensor (our form)", "max|FLA|", "fp64 error",
              "fp32 error");
  double worst64 = 0, worst32 = 0;
  for (std::size_t i = 0; i < e64.size(); ++i) {
    const auto& [name, a] = e64[i];
    const Error& c = e32[i].second;
    std::printf("  %-26s %14.4e %12.3e %12.3e\n", name.c_str(), a.scale, a.rel(), c.rel());
    EXPECT_LE(a.rel(), kFwTolFp64) << f.name << " " << name << " (fp64)";
    EXPECT_LE(c.rel(), kFwTolFp32) << f.name << " " << name << " (fp32)";
    EXPECT_GT(a.scale, 0.0) << f.name << " " << name << ": an all-zero reference checks nothing";
    worst64 = std::max(worst64, a.rel());
    worst32 = std::max(worst32, c.rel());
  }
  std::printf("  largest: fp64 %.3e (tol %.0e), fp32 %.3e (tol %.0e)\n", worst64, kFwTolFp64,
              worst32, kFwTolFp32);
  std::fflush(stdout);
}

INSTANTIATE_TEST_SUITE_P(Fla, FastWeightFixture, ::testing::ValuesIn(fw_fixture_names()),
                         fw_test_name);

// The fixtures tell the conventions apart: Gated DeltaNet with a neighbouring convention, each
// computed here in fp64 from the fixture's inputs, lands far from FLA's output, while ours lands at
// rounding (the test above). The neighbours: the output read BEFORE the write (o_t = q_t S_{t−1});
// the decay applied AFTER the delta step (S_t = α_t(S_{t−1} − β_t k_tᵀ(k_t S_{t−1} − v_t)), i.e. α
// outside the residual); the query not scaled. (A transposed state cannot be fed at all: K ≠ V, and
// the test above checks S_T's shape.)
TEST(FastWeightFixtureConventions, NeighbouringConventionsFailTheGatedDeltaNetFixture) {
  const FwFixture f = load_fw_fixture("gated-delta-rule");
  if (f.name.empty()) GTEST_SKIP() << "fixture missing: " << f.path.string();
  const std::vector<double> o_ref = f.tensor("o");
  std::vector<double> before, alpha_outside, unscaled;
  for (int b = 0; b < f.B; ++b)
    for (int h = 0; h < f.H; ++h) {
      const FwHeadInputs<double> in = fw_head_inputs<double>(f, b, h);
      Mat<double> S = in.S0, o_b(f.T, f.V), o_a(f.T, f.V);
      Mat<double> S2 = in.S0;
      for (int t = 0; t < f.T; ++t) {
        const RowVec<double> q = in.q.row(t), k = in.k.row(t), v = in.v.row(t);
        o_b.row(t) = q * S;  // read before the write
        const Mat<double> A = in.alpha(t) * S;
        S = A - in.beta(t) * k.transpose() * (k * A - v);
        S2 =
            in.alpha(t) * (S2 - in.beta(t) * k.transpose() * (k * S2 - v));  // decay after the step
        o_a.row(t) = q * S2;
      }
      fw_append(before, o_b);
      fw_append(alpha_outside, o_a);
      const MatrixRuleOutput<double> p = matrix_rule_primal<double>(
          f.rule, Mat<double>(in.q / f.scale), in.k, in.v, in.beta, in.alpha, in.S0);
      fw_append(unscaled, p.o);
    }
  Error e_before, e_alpha, e_scale;
  e_before.add(before, o_ref);
  e_alpha.add(alpha_outside, o_ref);
  e_scale.add(unscaled, o_ref);
  std::printf(
      "[fastweight fixture] %s, o against FLA with a neighbouring convention: read before the "
      "write %.3e, decay after the delta step %.3e, query not scaled %.3e\n",
      f.name.c_str(), e_before.rel(), e_alpha.rel(), e_scale.rel());
  EXPECT_GT(e_before.rel(), 1e-2);
  EXPECT_GT(e_alpha.rel(), 1e-3);
  EXPECT_GT(e_scale.rel(), 1e-1);
}

}  // namespace
}  // namespace tttlab::reference
