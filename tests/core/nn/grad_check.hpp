// Test helpers for the nn ops: random data, a central-difference gradient check and a tolerance
// comparison that prints where and by how much two tensors differ.
//
// check_gradient perturbs EVERY element of a (small) parameter or input in place, h ≈ 1e-6, fp64:
//   fd_i = (L(x + h e_i) − L(x − h e_i)) / 2h
// and requires  |analytic_i − fd_i| ≤ atol + rtol·max(|analytic_i|, |fd_i|)  for every i.
// Error budget of central differences in fp64: truncation h²·L'''/6 ≈ 2e-13·L''' (negligible for the
// smooth ops here) plus rounding ≈ u·Σ|terms of L|/h with u = 1.1e-16, i.e. ≈ 1e-10 per unit of the
// loss's absolute size. The tests keep shapes tiny and values O(1), so Σ|terms| ≲ 100 and the
// rounding floor is ≲ 1e-8 absolute: hence the defaults rtol = 1e-7 and atol = 1e-8. A test that
// needs looser bounds says why next to them.
#pragma once

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <functional>
#include <random>
#include <sstream>
#include <string>
#include <tuple>
#include <type_traits>
#include <utility>

#include "tttlab/tensor.hpp"

namespace tttlab::test {

template <class S = double>
Mat<S> random_mat(Eigen::Index rows, Eigen::Index cols, std::mt19937_64& rng, double scale = 1.0) {
  std::normal_distribution<double> n(0.0, scale);
  Mat<S> m(rows, cols);
  for (Eigen::Index i = 0; i < m.size(); ++i) m.data()[i] = S(n(rng));
  return m;
}

template <class S = double>
RowVec<S> random_row(Eigen::Index cols, std::mt19937_64& rng, double scale = 1.0) {
  std::normal_distribution<double> n(0.0, scale);
  RowVec<S> r(cols);
  for (Eigen::Index i = 0; i < cols; ++i) r(i) = S(n(rng));
  return r;
}

// Σ_ij A_ij·B_ij: the scalar loss ⟨G, Y⟩ whose gradient with respect to Y is the fixed upstream G.
template <class A, class B>
double dot(const A& a, const B& b) {
  return a.template cast<double>().cwiseProduct(b.template cast<double>()).sum();
}

struct Tolerance {
  double rtol = 1e-7;
  double atol = 1e-8;
};

namespace detail {

inline std::string index_str(Eigen::Index i, Eigen::Index cols) {
  std::ostringstream s;
  s << "(" << i / cols << ", " << i % cols << ")";
  return s.str();
}

// Compares a[i] with b[i] for i < n (both row-major with `cols` columns).
inline ::testing::AssertionResult compare(const std::string& what, const char* a_name,
                                          const char* b_name, const double* a, const double* b,
                                          Eigen::Index n, Eigen::Index cols, Tolerance tol,
                                          bool print_summary) {
  double max_abs = 0, max_rel = 0, max_mag = 0;
  for (Eigen::Index i = 0; i < n; ++i)
    max_mag = std::max({max_mag, std::abs(a[i]), std::abs(b[i])});
  Eigen::Index mismatches = 0;
  std::ostringstream first;
  for (Eigen::Index i = 0; i < n; ++i) {
    const double err = std::abs(a[i] - b[i]);
    const double mag = std::max(std::abs(a[i]), std::abs(b[i]));
    const bool bad = !(err <= tol.atol + tol.rtol * mag);  // NaN counts as a mismatch
    max_abs = std::max(max_abs, err);
    // The summary's relative error skips elements below 1 % of the largest one, whose relative
    // error only measures the absolute rounding floor (the pass/fail rule above covers them).
    if (mag > tol.atol && mag >= 1e-2 * max_mag) max_rel = std::max(max_rel, err / mag);
    if (std::isnan(err)) max_abs = max_rel = NAN;
    if (bad && mismatches++ < 5)
      first << "\n    at " << index_str(i, cols) << ": " << a_name << " " << a[i] << ", " << b_name
            << " " << b[i] << ", |diff| " << err;
  }
  char summary[256];
  std::snprintf(summary, sizeof summary,
                "%s: %ld elements (max |value| %.3g), max abs err %.3g, max rel err %.3g",
                what.c_str(), static_cast<long>(n), max_mag, max_abs, max_rel);
  if (mismatches == 0) {
    if (print_summary) std::printf("  [check] %s\n", summary);
    return ::testing::AssertionSuccess();
  }
  return ::testing::AssertionFailure()
         << summary << "; " << mismatches << " exceed atol " << tol.atol << " + rtol "
         << tol.rtol << "·|value|, first ones:" << first.str();
}

}  // namespace detail

// (loss(v + h) − loss(v − h)) / 2h for one scalar `v` that `loss` reads: perturbed in place and
// restored exactly.
inline double central_difference(double& v, const std::function<double()>& loss, double h = 1e-6) {
  const double v0 = v;
  v = v0 + h;
  const double up = loss();
  v = v0 - h;
  const double down = loss();
  v = v0;
  return (up - down) / (2 * h);
}

// Central-difference check of `analytic` = ∂loss/∂x for every element of x. `x` is perturbed in
// place and restored exactly. x and analytic are dense row-major (Mat<double> or RowVec<double>).
template <class M>
::testing::AssertionResult check_gradient(const std::string& what, M& x, const M& analytic,
                                          const std::function<double()>& loss, Tolerance tol = {},
                                          double h = 1e-6) {
  static_assert(std::is_same_v<typename M::Scalar, double>, "gradient checks run in fp64");
  static_assert(M::IsRowMajor || M::IsVectorAtCompileTime, "row-major storage expected");
  if (analytic.rows() != x.rows() || analytic.cols() != x.cols())
    return ::testing::AssertionFailure() << what << ": analytic gradient has the wrong shape";
  M fd(x.rows(), x.cols());
  for (Eigen::Index i = 0; i < x.size(); ++i) fd.data()[i] = central_difference(x.data()[i], loss, h);
  return detail::compare("d/d" + what, "analytic", "fd", analytic.data(), fd.data(), x.size(),
                         x.cols(), tol, true);
}

// The gradient check of an op of the attention family, `forward(Q, K, V, heads, O)` with
// `backward(Q, K, V, heads, G, dQ, dK, dV)`, in fp64 against the loss ⟨G, O⟩: each of Q, K and V.
template <class Forward, class Backward>
void expect_qkv_gradients(Forward forward, Backward backward, Mat<double> Q, Mat<double> K,
                          Mat<double> V, const Mat<double>& G, int heads) {
  auto loss = [&] {
    Mat<double> O;
    forward(Q, K, V, heads, O);
    return dot(G, O);
  };
  Mat<double> dQ, dK, dV;
  backward(Q, K, V, heads, G, dQ, dK, dV);
  const std::string tag = " (heads " + std::to_string(heads) + ")";
  EXPECT_TRUE(check_gradient("Q" + tag, Q, dQ, loss));
  EXPECT_TRUE(check_gradient("K" + tag, K, dK, loss));
  EXPECT_TRUE(check_gradient("V" + tag, V, dV, loss));
}

// Element-wise |actual − expected| ≤ atol + rtol·max(|actual|, |expected|), any scalar types.
template <class A, class B>
::testing::AssertionResult all_close(const std::string& what, const A& actual, const B& expected,
                                     Tolerance tol) {
  if (actual.rows() != expected.rows() || actual.cols() != expected.cols())
    return ::testing::AssertionFailure()
           << what << ": shape [" << actual.rows() << ", " << actual.cols() << "] vs expected ["
           << expected.rows() << ", " << expected.cols() << "]";
  const Mat<double> a = actual.template cast<double>();
  const Mat<double> b = expected.template cast<double>();
  return detail::compare(what, "actual", "expected", a.data(), b.data(), a.size(), a.cols(), tol,
                         true);
}

// Runs `op` once in fp64 and once in fp32 and requires every fp32 result to match its fp64 one under
// `tol`. `op` is a generic lambda called with a value of the scalar type (double{}, then float{}): it
// casts its inputs to that type and returns its results as a std::tuple, in the order of `names`.
// Writing the op once keeps the two precisions from drifting apart in what they compute.
template <std::size_t N, class Op>
void expect_fp32_agrees_with_fp64(const char* const (&names)[N], Tolerance tol, Op op) {
  const auto r64 = op(double{});
  const auto r32 = op(float{});
  static_assert(std::tuple_size_v<std::remove_const_t<decltype(r64)>> == N, "one name per result");
  [&]<std::size_t... I>(std::index_sequence<I...>) {
    // EXPECT_TRUE is a statement: one lambda per result makes it a fold over expressions.
    ([&] { EXPECT_TRUE(all_close(names[I], std::get<I>(r32), std::get<I>(r64), tol)); }(), ...);
  }(std::make_index_sequence<N>{});
}

}  // namespace tttlab::test
