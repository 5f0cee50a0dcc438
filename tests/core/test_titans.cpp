// Titans' memory (tttlab/fastweight/titans.hpp, docs/MATH.md §11.9): the primal and chunked forms
// agree in fp64 for every mini-batch size; per-token against mini-batch gradients is measured; the
// manual backward against central finite differences in fp64 for every input; decoding token by
// token is the primal form bit for bit; and both forms and the backward against flash-linear-
// attention's reference (tests/reference/fastweight-titans, made by
// tests/reference/make_fastweight_fixtures.py from fla/ops/titans/naive.py), with a neighbouring
// convention shown to fail it. Seeds are fixed and printed.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <filesystem>
#include <random>
#include <string>
#include <vector>

#include "reference/reference_fixture.hpp"
#include "tttlab/fastweight/titans.hpp"

namespace tttlab {
namespace {

// One head's inputs.
template <class S>
struct TitansCase {
  Mat<S> q, k, v, M0;
  RowVec<S> w, b;
  Vec<S> theta, alpha, eta;
};

TitansCase<double> titans_random_case(int T, int D, unsigned seed) {
  std::mt19937_64 gen(seed);
  std::normal_distribution<double> nd(0.0, 1.0);
  std::uniform_real_distribution<double> ud(0.0, 1.0);
  TitansCase<double> c;
  auto randn = [&](int r, int cl, double s) {
    Mat<double> m(r, cl);
    for (Eigen::Index i = 0; i < m.size(); ++i) m.data()[i] = s * nd(gen);
    return m;
  };
  c.q = randn(T, D, 1.0);
  c.k = randn(T, D, 1.0);
  for (int t = 0; t < T; ++t) c.k.row(t).normalize();
  c.v = randn(T, D, 1.0);
  c.w = RowVec<double>::Ones(D) + randn(1, D, 0.1);
  c.b = randn(1, D, 0.1);
  c.theta.resize(T);
  c.alpha.resize(T);
  c.eta.resize(T);
  for (int t = 0; t < T; ++t) {
    c.theta(t) = 0.01 + 0.09 * ud(gen);
    c.alpha(t) = 0.01 + 0.09 * ud(gen);
    c.eta(t) = 0.8 + 0.19 * ud(gen);
  }
  c.M0 = randn(D, D, 0.1);
  return c;
}

double titans_rel(const Mat<double>& a, const Mat<double>& b) {
  return (a - b).cwiseAbs().maxCoeff() / std::max(b.cwiseAbs().maxCoeff(), 1e-300);
}

TEST(Titans, PrimalAndChunkedAgreeInFp64ForEveryMiniBatch) {
  const unsigned seed = 411;
  const TitansCase<double> c = titans_random_case(37, 8, seed);
  for (int mb : {1, 2, 5, 9, 37, 64}) {
    const TitansInner in{mb, 1e-6};
    const auto p =
        titans_primal<double>(c.q, c.k, c.v, c.w, c.b, c.theta, c.alpha, c.eta, c.M0, in);
    const auto r =
        titans_chunked<double>(c.q, c.k, c.v, c.w, c.b, c.theta, c.alpha, c.eta, c.M0, in);
    const double eo = titans_rel(r.o, p.o), em = titans_rel(r.state.memory, p.state.memory),
                 es = titans_rel(r.state.momentum, p.state.momentum),
                 est = titans_rel(r.state.start, p.state.start);
    std::printf(
        "[titans] seed %u T=37 D=8 b=%d: chunked vs primal o %.2e M_T %.2e S_T %.2e start %.2e\n",
        seed, mb, eo, em, es, est);
    EXPECT_LE(eo, 1e-12) << mb;
    EXPECT_LE(em, 1e-12) << mb;
    EXPECT_LE(es, 1e-12) << mb;
    EXPECT_LE(est, 1e-12) << mb;
    EXPECT_EQ(r.state.tokens, 37);
  }
}

// Per-token gradients (b = 1) and mini-batch gradients (b > 1) are different functions: measured.
TEST(Titans, PerTokenAgainstMiniBatchGradientsIsMeasured) {
  const unsigned seed = 412;
  const TitansCase<double> c = titans_random_case(64, 16, seed);
  const auto p1 = titans_primal<double>(c.q, c.k, c.v, c.w, c.b, c.theta, c.alpha, c.eta, c.M0,
                                        TitansInner{1, 1e-6});
  for (int mb : {4, 16, 64}) {
    const auto r = titans_chunked<double>(c.q, c.k, c.v, c.w, c.b, c.theta, c.alpha, c.eta, c.M0,
                                          TitansInner{mb, 1e-6});
    const double eo = titans_rel(r.o, p1.o), em = titans_rel(r.state.memory, p1.state.memory);
    std::printf(
        "[titans] seed %u T=64 D=16: chunked b=%d vs per-token gradients: o %.3e, M_T %.3e\n", seed,
        mb, eo, em);
    EXPECT_GT(eo, 1e-3) << "stale gradients must change the function";
    EXPECT_TRUE(std::isfinite(eo) && std::isfinite(em));
  }
}

// Decoding one token at a time is the primal form, bit for bit, and the observer sees every step.
TEST(Titans, StepIsThePrimalFormAndTheObserverSeesEveryToken) {
  const TitansCase<double> c = titans_random_case(13, 6, 413);
  const TitansInner in{4, 1e-6};
  long seen = 0;
  double first_drop = 0;
  const auto p = titans_primal<double>(
      c.q, c.k, c.v, c.w, c.b, c.theta, c.alpha, c.eta, c.M0, in, [&](const TitansStep<double>& s) {
        EXPECT_EQ(s.token, seen);
        EXPECT_TRUE(s.memory_before && s.memory_after && s.momentum && s.output);
        if (seen == 0) first_drop = s.loss_before - s.loss_after;
        ++seen;
      });
  EXPECT_EQ(seen, 13);
  EXPECT_NE(first_drop, 0.0);
  TitansState<double> st = TitansState<double>::begin(c.M0);
  for (int t = 0; t < 13; ++t) {
    const RowVec<double> o = titans_step<double>(st, c.q.row(t), c.k.row(t), c.v.row(t), c.w, c.b,
                                                 c.theta(t), c.alpha(t), c.eta(t), in);
    EXPECT_TRUE(o == p.o.row(t)) << t;
  }
  EXPECT_TRUE(st.memory == p.state.memory);
  EXPECT_TRUE(st.start == p.state.start);
}

// Streaming: pieces of 5, 1, 1, 20 and 10 tokens, each continuing the carried state (the chunked form
// for several tokens, starting inside a mini-batch), equal one pass.
TEST(Titans, ContinuingACarriedStateEqualsOnePass) {
  const TitansCase<double> c = titans_random_case(37, 6, 416);
  const TitansInner in{4, 1e-6};
  const auto whole =
      titans_primal<double>(c.q, c.k, c.v, c.w, c.b, c.theta, c.alpha, c.eta, c.M0, in);
  TitansState<double> st = TitansState<double>::begin(c.M0);
  Mat<double> o(37, 6);
  int t0 = 0;
  for (int n : {5, 1, 1, 20, 10}) {
    auto piece = [&](const auto& m) { return Mat<double>(m.middleRows(t0, n)); };
    const Vec<double> th = c.theta.segment(t0, n), al = c.alpha.segment(t0, n),
                      et = c.eta.segment(t0, n);
    const auto r = n == 1 ? titans_primal<double>(piece(c.q), piece(c.k), piece(c.v), c.w, c.b, th,
                                                  al, et, st, in)
                          : titans_chunked<double>(piece(c.q), piece(c.k), piece(c.v), c.w, c.b, th,
                                                   al, et, st, in);
    o.middleRows(t0, n) = r.o;
    st = r.state;
    t0 += n;
  }
  EXPECT_EQ(st.tokens, 37);
  EXPECT_LE(titans_rel(o, whole.o), 1e-12);
  EXPECT_LE(titans_rel(st.memory, whole.state.memory), 1e-12);
  EXPECT_LE(titans_rel(st.start, whole.state.start), 1e-12);
}

TEST(Titans, RejectsBadArguments) {
  const TitansCase<double> c = titans_random_case(5, 4, 414);
  auto run = [&](const Mat<double>& k, const Vec<double>& th, const TitansInner& in) {
    return titans_primal<double>(c.q, k, c.v, c.w, c.b, th, c.alpha, c.eta, c.M0, in);
  };
  EXPECT_THROW(run(Mat<double>(c.k.leftCols(3)), c.theta, TitansInner{}), std::invalid_argument);
  EXPECT_THROW(run(c.k, Vec<double>(c.theta.head(4)), TitansInner{}), std::invalid_argument);
  EXPECT_THROW(run(c.k, c.theta, TitansInner{0, 1e-6}), std::invalid_argument);
  EXPECT_THROW(run(c.k, c.theta, TitansInner{1, 0.0}), std::invalid_argument);
}

// The backward against central finite differences of L = Σ o ⊙ dO + Σ M_T ⊙ dM, every input element.
TEST(Titans, BackwardMatchesFiniteDifferencesInFp64) {
  const unsigned seed = 415;
  for (int mb : {1, 4}) {
    TitansCase<double> c = titans_random_case(11, 5, seed);
    std::mt19937_64 gen(seed + 1);
    std::normal_distribution<double> nd(0.0, 1.0);
    Mat<double> dO(11, 5), dM(5, 5);
    for (Eigen::Index i = 0; i < dO.size(); ++i) dO.data()[i] = nd(gen);
    for (Eigen::Index i = 0; i < dM.size(); ++i) dM.data()[i] = nd(gen);
    const TitansInner in{mb, 1e-6};
    auto loss = [&]() {
      const auto r =
          titans_primal<double>(c.q, c.k, c.v, c.w, c.b, c.theta, c.alpha, c.eta, c.M0, in);
      return r.o.cwiseProduct(dO).sum() + r.state.memory.cwiseProduct(dM).sum();
    };
    for (const bool chunked : {false, true}) {
      const TitansGrads<double> g =
          chunked ? titans_backward_chunked<double>(c.q, c.k, c.v, c.w, c.b, c.theta, c.alpha,
                                                    c.eta, c.M0, in, dO, dM)
                  : titans_backward<double>(c.q, c.k, c.v, c.w, c.b, c.theta, c.alpha, c.eta, c.M0,
                                            in, dO, dM);
      const char* form = chunked ? "chunked" : "primal";
      const double h = 1e-6;
      double worst = 0;
      auto check = [&](double* x, Eigen::Index n, const double* grad, const char* name) {
        double err = 0, scale = 0;
        for (Eigen::Index i = 0; i < n; ++i) {
          const double keep = x[i];
          x[i] = keep + h;
          const double lp = loss();
          x[i] = keep - h;
          const double lm = loss();
          x[i] = keep;
          const double fd = (lp - lm) / (2 * h);
          err = std::max(err, std::abs(fd - grad[i]));
          scale = std::max(scale, std::abs(fd));
        }
        const double rel = err / std::max(scale, 1e-12);
        std::printf("[titans] seed %u b=%d %-7s FD d%-6s rel %.2e (max |grad| %.3e)\n", seed, mb,
                    form, name, rel, scale);
        EXPECT_LE(rel, 1e-6) << name << " b=" << mb << " " << form;
        EXPECT_GT(scale, 0.0) << name;
        worst = std::max(worst, rel);
      };
      check(c.q.data(), c.q.size(), g.dq.data(), "q");
      check(c.k.data(), c.k.size(), g.dk.data(), "k");
      check(c.v.data(), c.v.size(), g.dv.data(), "v");
      check(c.w.data(), c.w.size(), g.dw.data(), "w");
      check(c.b.data(), c.b.size(), g.db.data(), "b");
      check(c.theta.data(), c.theta.size(), g.dtheta.data(), "theta");
      check(c.alpha.data(), c.alpha.size(), g.dalpha.data(), "alpha");
      check(c.eta.data(), c.eta.size(), g.deta.data(), "eta");
      check(c.M0.data(), c.M0.size(), g.dM0.data(), "M0");
    }
  }
}

// The chunked backward is the primal one to rounding in fp64, for mini-batches that divide T, that
// do not, and that exceed it.
TEST(Titans, ChunkedBackwardIsThePrimalBackwardInFp64) {
  const unsigned seed = 416;
  const int T = 37, D = 8;
  for (int mb : {1, 2, 5, 9, 16, 37, 64}) {
    const TitansCase<double> c = titans_random_case(T, D, seed);
    std::mt19937_64 gen(seed + 7);
    std::normal_distribution<double> nd(0.0, 1.0);
    Mat<double> dO(T, D), dM(D, D);
    for (Eigen::Index i = 0; i < dO.size(); ++i) dO.data()[i] = nd(gen);
    for (Eigen::Index i = 0; i < dM.size(); ++i) dM.data()[i] = nd(gen);
    const TitansInner in{mb, 1e-6};
    const TitansGrads<double> p =
        titans_backward<double>(c.q, c.k, c.v, c.w, c.b, c.theta, c.alpha, c.eta, c.M0, in, dO, dM);
    const TitansGrads<double> g = titans_backward_chunked<double>(c.q, c.k, c.v, c.w, c.b, c.theta,
                                                                  c.alpha, c.eta, c.M0, in, dO, dM);
    const double errs[] = {
        titans_rel(g.dq, p.dq),         titans_rel(g.dk, p.dk),     titans_rel(g.dv, p.dv),
        titans_rel(g.dw, p.dw),         titans_rel(g.db, p.db),     titans_rel(g.dtheta, p.dtheta),
        titans_rel(g.dalpha, p.dalpha), titans_rel(g.deta, p.deta), titans_rel(g.dM0, p.dM0)};
    const double worst = *std::max_element(std::begin(errs), std::end(errs));
    std::printf("[titans] seed %u T=%d D=%d b=%d chunked vs primal backward: worst rel %.2e\n",
                seed, T, D, mb, worst);
    for (double e : errs) EXPECT_LE(e, 1e-12) << "b=" << mb;
  }
}

}  // namespace

// ---- Against flash-linear-attention's reference -----------------------------------------------------

namespace reference {
namespace {

constexpr double kTitansTolFp64 = 1e-10;
constexpr double kTitansTolFp32 = 1e-5;

struct TitansFixture {
  std::filesystem::path path;
  std::shared_ptr<const SafetensorsFile> ref;
  int B = 0, H = 0, T = 0, D = 0;
  std::vector<double> get(const std::string& n) const { return ref->to_f64(n); }
};

// Empty `ref`: the file is missing (the caller skips).
TitansFixture titans_load_fixture() {
  TitansFixture f;
  f.path = fixture_root() / "fastweight-titans" / "reference.safetensors";
  if (!std::filesystem::exists(f.path)) return f;
  f.ref = std::make_shared<const SafetensorsFile>(SafetensorsFile::read(f.path));
  const auto& s = f.ref->at("q").shape;
  if (s.size() != 4) throw std::runtime_error("fastweight-titans: q must be [B, H, T, D]");
  f.B = int(s[0]);
  f.H = int(s[1]);
  f.T = int(s[2]);
  f.D = int(s[3]);
  return f;
}

// Block `index` of `rows`×`cols` numbers of a flat tensor.
template <class S>
Mat<S> titans_block(const std::vector<double>& x, std::size_t index, int rows, int cols) {
  Mat<S> m(rows, cols);
  const std::size_t base = index * std::size_t(rows) * std::size_t(cols);
  for (Eigen::Index i = 0; i < m.size(); ++i) m.data()[i] = S(x[base + std::size_t(i)]);
  return m;
}

template <class S>
TitansCase<S> titans_fixture_head(const TitansFixture& f, int b, int h) {
  const std::size_t bh = std::size_t(b) * f.H + h;
  TitansCase<S> c;
  c.q = titans_block<S>(f.get("q"), bh, f.T, f.D);
  c.k = titans_block<S>(f.get("k"), bh, f.T, f.D);
  c.v = titans_block<S>(f.get("v"), bh, f.T, f.D);
  c.M0 = titans_block<S>(f.get("S0"), bh, f.D, f.D);
  c.w = titans_block<S>(f.get("w"), std::size_t(h), 1, f.D);
  c.b = titans_block<S>(f.get("b"), std::size_t(h), 1, f.D);
  c.theta = titans_block<S>(f.get("theta"), bh, f.T, 1);
  c.alpha = titans_block<S>(f.get("alpha"), bh, f.T, 1);
  c.eta = titans_block<S>(f.get("eta"), bh, f.T, 1);
  return c;
}

template <class M>
void titans_append(std::vector<double>& out, const M& m) {
  for (Eigen::Index i = 0; i < m.size(); ++i) out.push_back(double(m.data()[i]));
}

// Every comparison in precision S: (tensor and form, error).
template <class S>
std::vector<std::pair<std::string, Error>> titans_measure(const TitansFixture& f, int mb) {
  const TitansInner in{mb, 1e-6};
  std::vector<double> o_p, M_p, o_c, M_c, dq, dk, dv, dth, dal, det, dM0;
  std::vector<double> dw(std::size_t(f.H) * f.D, 0.0), db(std::size_t(f.H) * f.D, 0.0);
  const std::vector<double> dO = f.get("dO"), dS = f.get("dS_T");
  for (int b = 0; b < f.B; ++b)
    for (int h = 0; h < f.H; ++h) {
      const TitansCase<S> c = titans_fixture_head<S>(f, b, h);
      const auto p = titans_primal<S>(c.q, c.k, c.v, c.w, c.b, c.theta, c.alpha, c.eta, c.M0, in);
      const auto r = titans_chunked<S>(c.q, c.k, c.v, c.w, c.b, c.theta, c.alpha, c.eta, c.M0, in);
      titans_append(o_p, p.o);
      titans_append(M_p, p.state.memory);
      titans_append(o_c, r.o);
      titans_append(M_c, r.state.memory);
      const std::size_t bh = std::size_t(b) * f.H + h;
      const TitansGrads<S> g =
          titans_backward<S>(c.q, c.k, c.v, c.w, c.b, c.theta, c.alpha, c.eta, c.M0, in,
                             titans_block<S>(dO, bh, f.T, f.D), titans_block<S>(dS, bh, f.D, f.D));
      titans_append(dq, g.dq);
      titans_append(dk, g.dk);
      titans_append(dv, g.dv);
      titans_append(dth, g.dtheta);
      titans_append(dal, g.dalpha);
      titans_append(det, g.deta);
      titans_append(dM0, g.dM0);
      for (int i = 0; i < f.D; ++i) {  // w and b are per head, shared by the sequences
        dw[std::size_t(h) * f.D + i] += double(g.dw(i));
        db[std::size_t(h) * f.D + i] += double(g.db(i));
      }
    }
  auto err = [&](const std::vector<double>& got, const char* name) {
    Error e;
    e.add(got, f.get(name));
    return e;
  };
  return {{"o (primal)", err(o_p, "o")},          {"S_T (primal)", err(M_p, "S_T")},
          {"o (chunked)", err(o_c, "o")},         {"S_T (chunked)", err(M_c, "S_T")},
          {"grad.q", err(dq, "grad.q")},          {"grad.k", err(dk, "grad.k")},
          {"grad.v", err(dv, "grad.v")},          {"grad.w", err(dw, "grad.w")},
          {"grad.b", err(db, "grad.b")},          {"grad.theta", err(dth, "grad.theta")},
          {"grad.alpha", err(dal, "grad.alpha")}, {"grad.eta", err(det, "grad.eta")},
          {"grad.S0", err(dM0, "grad.S0")}};
}

constexpr int kTitansFixtureMiniBatch = 9;  // the manifest's mini_batch

TEST(TitansFla, InnerLoopMatchesFlaInFp64AndFp32) {
  const TitansFixture f = titans_load_fixture();
  if (!f.ref)
    GTEST_SKIP() << "fixture missing: " << f.path.string()
                 << " (make it: python3 tests/reference/make_fastweight_fixtures.py; "
                    "tests/reference/README.md, section Fast weights)";
  ASSERT_EQ(f.ref->at("S_T").shape, (std::vector<std::int64_t>{f.B, f.H, f.D, f.D}));
  const auto e64 = titans_measure<double>(f, kTitansFixtureMiniBatch);
  const auto e32 = titans_measure<float>(f, kTitansFixtureMiniBatch);
  std::printf(
      "[fastweight fixture] fastweight-titans: B=%d H=%d T=%d D=%d b=%d eps=1e-6; error = "
      "max|ours - FLA| / max|FLA|\n",
      f.B, f.H, f.T, f.D, kTitansFixtureMiniBatch);
  std::printf("  %-18s %14s %12s %12s\n", "tensor (form)", "max|FLA|", "fp64 error", "fp32 error");
  for (std::size_t i = 0; i < e64.size(); ++i) {
    const auto& [name, a] = e64[i];
    const Error& c = e32[i].second;
    std::printf("  %-18s %14.4e %12.3e %12.3e\n", name.c_str(), a.scale, a.rel(), c.rel());
    EXPECT_LE(a.rel(), kTitansTolFp64) << name << " (fp64)";
    EXPECT_LE(c.rel(), kTitansTolFp32) << name << " (fp32)";
    EXPECT_GT(a.scale, 0.0) << name << ": an all-zero reference checks nothing";
  }
  std::fflush(stdout);
}

// The fixture tells neighbouring conventions apart: per-token gradients instead of the mini-batch's
// stale ones, the output read before the write, and the exact LayerNorm gradient in place of FLA's
// u_t (D·g inside the division) each land far from FLA's output.
TEST(TitansFla, NeighbouringConventionsFailTheFixture) {
  const TitansFixture f = titans_load_fixture();
  if (!f.ref) GTEST_SKIP() << "fixture missing: " << f.path.string();
  const std::vector<double> o_ref = f.get("o");
  std::vector<double> per_token, before, exact;
  for (int b = 0; b < f.B; ++b)
    for (int h = 0; h < f.H; ++h) {
      const TitansCase<double> c = titans_fixture_head<double>(f, b, h);
      titans_append(per_token, titans_primal<double>(c.q, c.k, c.v, c.w, c.b, c.theta, c.alpha,
                                                     c.eta, c.M0, TitansInner{1, 1e-6})
                                   .o);
      // Read before the write, and the exact gradient, written out here in fp64.
      const int D = f.D, mb = kTitansFixtureMiniBatch;
      Mat<double> M = c.M0, S = Mat<double>::Zero(D, D), start = c.M0;
      Mat<double> M2 = c.M0, S2 = Mat<double>::Zero(D, D), start2 = c.M0;
      Mat<double> ob(f.T, D), oe(f.T, D);
      auto ln = [](const RowVec<double>& z, RowVec<double>& zh) {
        zh = z.array() - z.mean();
        const double s = std::sqrt(zh.squaredNorm() / double(z.size()) + 1e-6);
        zh /= s;
        return s;
      };
      auto read = [&](const RowVec<double>& y) {
        RowVec<double> yh;
        ln(y, yh);
        return RowVec<double>(y + c.w.cwiseProduct(yh) + c.b);
      };
      for (int t = 0; t < f.T; ++t) {
        const RowVec<double> k = c.k.row(t), v = c.v.row(t);
        ob.row(t) = read(c.q.row(t) * M);
        for (int which = 0; which < 2; ++which) {
          Mat<double>& Mm = which ? M2 : M;
          Mat<double>& Sm = which ? S2 : S;
          Mat<double>& st = which ? start2 : start;
          RowVec<double> zh;
          const double s = ln(RowVec<double>(k * st), zh);
          const RowVec<double> g = (c.w.cwiseProduct(zh) + c.b - v + k).cwiseProduct(c.w);
          RowVec<double> u;
          if (which == 0)
            u = D * g - (RowVec<double>::Constant(D, g.sum()) + g.dot(zh) * zh) / (s * D);
          else
            u = (D * g - RowVec<double>::Constant(D, g.sum()) - g.dot(zh) * zh) / (s * D);
          Sm = c.eta(t) * Sm - 2 * c.theta(t) * k.transpose() * u;
          Mm = (1 - c.alpha(t)) * Mm + Sm;
          if ((t + 1) % mb == 0) st = Mm;
        }
        oe.row(t) = read(c.q.row(t) * M2);
      }
      titans_append(before, ob);
      titans_append(exact, oe);
    }
  Error e_tok, e_before, e_exact;
  e_tok.add(per_token, o_ref);
  e_before.add(before, o_ref);
  e_exact.add(exact, o_ref);
  std::printf(
      "[fastweight fixture] fastweight-titans, o against FLA with a neighbouring convention: "
      "per-token gradients %.3e, read before the write %.3e, exact LayerNorm gradient %.3e\n",
      e_tok.rel(), e_before.rel(), e_exact.rel());
  EXPECT_GT(e_tok.rel(), 1e-4);
  EXPECT_GT(e_before.rel(), 1e-2);
  EXPECT_GT(e_exact.rel(), 1e-2);
}

}  // namespace
}  // namespace reference
}  // namespace tttlab
