// The training step's GPU operations (tttlab/kernels/nn_ops.hpp, gemm.hpp) against the CPU ops of
// core/ run in fp64 on the same (float) inputs, over many shapes, edge cases included (one row, one
// column, widths that are not multiples of a warp, sequences shorter than the conv kernel).
//
// Random inputs from a fixed seed per test (test_ttt_util.hpp: test_seed; printed with a failure;
// TTTLAB_TEST_SEED=<n> or =random overrides it) and poisons every output with NaN first, so an element the kernel does not write fails.
// Accumulated outputs ("+=") start from random values, so a kernel that overwrites them fails too.
//
// Tolerances, relative to max|ref| of each output:
//   1e-5  element-wise ops and row ops (RMSNorm, LayerNorm, RoPE, activations, η, cross-entropy,
//         embedding, the conv's outputs): a few fp32 roundings (unit roundoff 6e-8) per element, and
//         row sums over at most a few thousand terms, stay near 1e-6.
//         The input gradients of the norms are measured against the size of their terms, r·|dY ⊙ w|
//         per row (rstd·|dY ⊙ γ| for LayerNorm), when that is larger than max|ref|: at D = 1 (RMSNorm)
//         or D = 2 (LayerNorm) the normalised row is ±1, the gradient cancels to ~0 and only the
//         terms' fp32 roundoff remains, on the CPU's fp32 op as here.
//         LayerNorm (forward and dX): 1e-4. A row's x − μ loses bits when the row's spread is small
//         against its mean (at D = 2 the two entries can be close): measured up to 8e-6 at D = 2.
//   1e-4  sums over many rows (weight gradients: column sums, dγ, dβ, dw of the conv, dE): the project's
//         fp32 bound; fixed-order sums of up to ~10^4 terms of both signs stay near 1e-6.
//   GEMM  fp32 (cuBLAS CUBLAS_COMPUTE_32F and the built-in kernel): 1e-4. tf32 (10-bit operand mantissa,
//         unit roundoff 2^-11 ≈ 4.9e-4 per operand): 5e-3; measured errors are printed.
//   AdamW against the CPU AdamW<float> itself (the same fp32 formula): 1e-5 on p, m, v after three steps;
//         the global norm (double sums in another order) to 1e-12.
#include <gtest/gtest.h>

#include <array>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <limits>
#include <memory>
#include <random>
#include <string>
#include <vector>

#include "test_ttt_util.hpp"
#include "tttlab/kernels/gemm.hpp"
#include "tttlab/kernels/nn_ops.hpp"
#include "tttlab/nn/activations.hpp"
#include "tttlab/nn/causal_conv.hpp"
#include "tttlab/nn/cross_entropy.hpp"
#include "tttlab/nn/embedding.hpp"
#include "tttlab/nn/norms.hpp"
#include "tttlab/nn/rope.hpp"
#include "tttlab/optim/adamw.hpp"
#include "tttlab/ttt/eta.hpp"
#include "tttlab/ttt/ln_l2.hpp"

namespace tttlab::kernels::test {
namespace {

constexpr double kTolElem = 1e-5;
constexpr double kTolSum = 1e-4;

// Int buffers (tokens, targets, CSR lists).
class DeviceInts {
 public:
  explicit DeviceInts(const std::vector<int>& h) : n_(h.size()) {
    TTTLAB_CUDA_CHECK(cudaMalloc(reinterpret_cast<void**>(&p_), std::max<std::size_t>(n_, 1) * sizeof(int)));
    if (n_) TTTLAB_CUDA_CHECK(cudaMemcpy(p_, h.data(), n_ * sizeof(int), cudaMemcpyHostToDevice));
  }
  ~DeviceInts() { cudaFree(p_); }
  DeviceInts(const DeviceInts&) = delete;
  DeviceInts& operator=(const DeviceInts&) = delete;
  int* get() const { return p_; }

 private:
  int* p_ = nullptr;
  std::size_t n_ = 0;
};

Mat<double> to_mat(const std::vector<float>& v, int rows, int cols) { return mat_at(v, 0, rows, cols); }
std::vector<double> flat(const Mat<double>& m) { return std::vector<double>(m.data(), m.data() + m.size()); }
std::vector<double> flat(const RowVec<double>& m) { return std::vector<double>(m.data(), m.data() + m.size()); }
std::vector<double> widen(const std::vector<float>& v) { return std::vector<double>(v.begin(), v.end()); }

// A bf16 pattern widened back to float (exact).
float bf16_widened(std::uint16_t b) {
  const std::uint32_t u = std::uint32_t(b) << 16;
  float x;
  std::memcpy(&x, &u, 4);
  return x;
}

std::size_t count_differences(const std::vector<std::uint16_t>& a,
                              const std::vector<std::uint16_t>& b) {
  std::size_t d = 0;
  for (std::size_t i = 0; i < a.size(); ++i) d += a[i] != b[i];
  return d;
}

// Checks and prints the error of one output.
#define EXPECT_CLOSE(what, got, ref, tol)                                  \
  do {                                                                     \
    const std::vector<float> got_ = (got);                                 \
    const std::vector<double> ref_ = (ref);                                \
    ASSERT_EQ(got_.size(), ref_.size()) << what;                           \
    const ErrorStat e_ = compare(got_, ref_);                              \
    worst_ = std::max(worst_, e_.rel);                                     \
    EXPECT_TRUE(within(std::string(what).c_str(), e_, (tol), got_, ref_)); \
  } while (0)

class NnOps : public ::testing::Test {
 protected:
  void SetUp() override {
    TTTLAB_REQUIRE_GPU();
    seed_ = test_seed();
    rng_.seed(seed_);
  }
  void TearDown() override {
    if (!IsSkipped())
      std::printf("[ INFO     ] %s: worst relative error %.2e (seed %llu)\n",
                  ::testing::UnitTest::GetInstance()->current_test_info()->name(), worst_,
                  static_cast<unsigned long long>(seed_));
  }
  std::vector<float> randn(std::size_t n, double std = 1.0, double mean = 0.0) { return randn_vec(n, rng_, std, mean); }
  DeviceBuffer poisoned(std::size_t n) {
    DeviceBuffer b(n);
    b.poison();
    return b;
  }
  // A LayerNorm's input gradient, measured against the size of its terms, max over rows of
  // rstd·|dY ⊙ γ|, when that is larger than max|ref| (see the tolerances above).
  void expect_layer_norm_dx(const char* what, const std::vector<float>& got, const Mat<double>& ref,
                            const Mat<double>& X, const Mat<double>& dY,
                            const std::vector<float>& gamma, double eps) {
    double terms = 0;
    for (Eigen::Index r = 0; r < X.rows(); ++r) {
      const double mu = X.row(r).mean();
      const double rs = 1.0 / std::sqrt((X.row(r).array() - mu).square().mean() + eps);
      for (Eigen::Index c = 0; c < X.cols(); ++c)
        terms = std::max(terms, rs * std::abs(dY(r, c) * gamma[c]));
    }
    const std::vector<double> r = flat(ref);
    const ErrorStat e = compare(got, r, terms);
    worst_ = std::max(worst_, e.rel);
    EXPECT_TRUE(within(what, e, kTolSum, got, r));
  }
  std::uint64_t seed_ = 0;
  std::mt19937_64 rng_;
  double worst_ = 0;
};

TEST_F(NnOps, ColumnSum) {
  for (auto [R, C] : std::vector<std::pair<int, int>>{{1, 1}, {1, 37}, {7, 5}, {128, 32}, {129, 33}, {1000, 384}, {5000, 6}}) {
    SCOPED_TRACE("R=" + std::to_string(R) + " C=" + std::to_string(C) + " seed " + std::to_string(seed_));
    const auto x = randn(std::size_t(R) * C);
    const auto out0 = randn(C);
    DeviceBuffer X(x), out(out0), ws(std::max<std::size_t>(column_sum_workspace(R, C), 1));
    column_sum_add(X.get(), R, C, out.get(), ws.get(), nullptr);
    std::vector<double> ref(out0.begin(), out0.end());
    for (int r = 0; r < R; ++r)
      for (int c = 0; c < C; ++c) ref[c] += x[std::size_t(r) * C + c];
    EXPECT_CLOSE("column sum", out.download(), ref, kTolSum);
  }
}

TEST_F(NnOps, AddAndEmbedding) {
  for (auto [V, D, R] : std::vector<std::array<int, 3>>{{1, 1, 1}, {256, 64, 300}, {256, 384, 2048}, {7, 33, 65}}) {
    SCOPED_TRACE("V=" + std::to_string(V) + " D=" + std::to_string(D) + " R=" + std::to_string(R) + " seed " + std::to_string(seed_));
    const auto e = randn(std::size_t(V) * D), dh = randn(std::size_t(R) * D), de0 = randn(std::size_t(V) * D);
    // Skewed token frequencies, as bytes of text: some tokens many times, some never.
    std::vector<int> tok(R);
    std::geometric_distribution<int> geo(0.05);
    for (int& t : tok) t = std::min(V - 1, geo(rng_));
    DeviceBuffer E(e), H = poisoned(std::size_t(R) * D), dH(dh), dE(de0);
    DeviceInts T(tok);
    embedding_forward(E.get(), V, D, T.get(), R, H.get(), nullptr);
    Mat<double> Href;
    ::tttlab::embedding_forward<double>(to_mat(e, V, D), tok, Href);
    EXPECT_CLOSE("embedding forward", H.download(), flat(Href), 0.0);
    // CSR of the rows of each token, in increasing row order.
    std::vector<int> off(V + 1, 0), rows_of(R);
    for (int t : tok) ++off[t + 1];
    for (int v = 0; v < V; ++v) off[v + 1] += off[v];
    std::vector<int> fill(off.begin(), off.end() - 1);
    for (int r = 0; r < R; ++r) rows_of[fill[tok[r]]++] = r;
    DeviceInts O(off), RO(rows_of);
    embedding_backward(O.get(), RO.get(), V, D, dH.get(), dE.get(), nullptr);
    Mat<double> dEref = to_mat(de0, V, D);
    ::tttlab::embedding_backward<double>(tok, to_mat(dh, R, D), dEref);
    EXPECT_CLOSE("embedding backward", dE.download(), flat(dEref), kTolSum);
    // add
    DeviceBuffer S = poisoned(std::size_t(R) * D);
    add(H.get(), dH.get(), S.get(), std::size_t(R) * D, nullptr);
    EXPECT_CLOSE("add", S.download(), flat(Mat<double>(Href + to_mat(dh, R, D))), kTolElem);
  }
}

TEST_F(NnOps, RmsNormForwardBackward) {
  // D a multiple of 128 up to 1024 takes the vectorised backward (whole and partial 128-row chunks).
  for (auto [R, D] : std::vector<std::pair<int, int>>{
           {1, 1}, {1, 384}, {9, 31}, {64, 128}, {257, 384}, {1024, 768}, {33, 1000}, {130, 256}, {300, 1024}}) {
    for (bool acc : {false, true}) {
      SCOPED_TRACE("R=" + std::to_string(R) + " D=" + std::to_string(D) + (acc ? " accumulate" : "") + " seed " + std::to_string(seed_));
      const auto x = randn(std::size_t(R) * D, 1.5, 0.3), w = randn(D, 0.3, 1.0), dy = randn(std::size_t(R) * D);
      const auto dx0 = randn(std::size_t(R) * D), dw0 = randn(D);
      const float eps = 1e-6f;
      DeviceBuffer X(x), W(w), dY(dy), Y = poisoned(std::size_t(R) * D);
      DeviceBuffer dX = acc ? DeviceBuffer(dx0) : poisoned(std::size_t(R) * D), dW(dw0),
                   ws(rms_norm_backward_workspace(R, D));
      rms_norm_forward(X.get(), W.get(), R, D, eps, Y.get(), nullptr);
      rms_norm_backward(X.get(), W.get(), dY.get(), R, D, eps, dX.get(), acc, dW.get(), ws.get(), nullptr);
      Mat<double> Yr, dXr;
      const Mat<double> Xd = to_mat(x, R, D);
      RowVec<double> Wd = to_mat(w, 1, D), dWr = to_mat(dw0, 1, D);
      ::tttlab::rms_norm_forward<double>(Xd, Wd, Yr, eps);
      ::tttlab::rms_norm_backward<double>(Xd, Wd, to_mat(dy, R, D), dXr, dWr, eps);
      if (acc) dXr += to_mat(dx0, R, D);
      EXPECT_CLOSE("rms forward", Y.download(), flat(Yr), kTolElem);
      double terms = 0;  // max over rows of r·|dY ⊙ w|
      for (int r = 0; r < R; ++r) {
        const double rr = 1.0 / std::sqrt(Xd.row(r).squaredNorm() / D + eps);
        for (int c = 0; c < D; ++c) terms = std::max(terms, rr * std::abs(double(dy[std::size_t(r) * D + c]) * w[c]));
      }
      {
        const std::vector<float> got = dX.download();
        std::vector<double> ref = flat(dXr);
        if (acc)  // the accumulated part is not cancelled: compare only what the op adds
          for (std::size_t i = 0; i < ref.size(); ++i) ref[i] -= dx0[i];
        std::vector<float> added(got);
        if (acc)
          for (std::size_t i = 0; i < got.size(); ++i) added[i] = float(double(got[i]) - dx0[i]);
        const ErrorStat e = compare(added, ref, terms);
        worst_ = std::max(worst_, e.rel);
        EXPECT_TRUE(within("rms dX (relative to the terms' size)", e, kTolElem, added, ref));
      }
      EXPECT_CLOSE("rms dw", dW.download(), flat(dWr), kTolSum);
    }
  }
}

// The residual add fused with the RMSNorm after it (the training step's forward calls it between
// every two sublayers): S must be the fp32 sum H + Dx exactly, Y the norm of that sum. D a multiple of
// 128 up to 1024 takes the float4 kernel when the pointers are 16-byte aligned; the "offset by one
// float" runs force the plain kernel at the same widths.
TEST_F(NnOps, AddRmsNormForward) {
  for (auto [R, D] : std::vector<std::pair<int, int>>{
           {1, 1}, {1, 384}, {9, 31}, {64, 128}, {257, 384}, {1024, 768}, {33, 1000}, {300, 1024}, {5, 1152}}) {
    for (int shift : {0, 1}) {
      SCOPED_TRACE("R=" + std::to_string(R) + " D=" + std::to_string(D) + (shift ? " unaligned" : "") + " seed " +
                   std::to_string(seed_));
      const std::size_t n = std::size_t(R) * D;
      const auto h = randn(n + shift, 1.5, 0.3), dx = randn(n + shift, 0.5), w = randn(D + shift, 0.3, 1.0);
      const float eps = 1e-6f;
      DeviceBuffer H(h), Dx(dx), W(w), S = poisoned(n + shift), Y = poisoned(n + shift);
      add_rms_norm_forward(H.get() + shift, Dx.get() + shift, W.get() + shift, R, D, eps, S.get() + shift,
                           Y.get() + shift, nullptr);
      std::vector<float> sum(n);
      for (std::size_t i = 0; i < n; ++i) sum[i] = h[i + shift] + dx[i + shift];
      std::vector<float> s_got = S.download(), y_got = Y.download();
      s_got.erase(s_got.begin(), s_got.begin() + shift);
      y_got.erase(y_got.begin(), y_got.begin() + shift);
      EXPECT_CLOSE("add_rms S", s_got, widen(sum), 0.0);
      Mat<double> Yr;
      RowVec<double> Wd = to_mat(std::vector<float>(w.begin() + shift, w.end()), 1, D);
      ::tttlab::rms_norm_forward<double>(to_mat(sum, R, D), Wd, Yr, eps);
      EXPECT_CLOSE("add_rms Y", y_got, flat(Yr), kTolElem);
      // The plain norm (no add) through the same kernels.
      DeviceBuffer Y2 = poisoned(n + shift);
      rms_norm_forward(S.get() + shift, W.get() + shift, R, D, eps, Y2.get() + shift, nullptr);
      std::vector<float> y2 = Y2.download();
      y2.erase(y2.begin(), y2.begin() + shift);
      EXPECT_CLOSE("rms forward (unfused, same input)", y2, flat(Yr), kTolElem);
    }
  }
  DeviceBuffer A(std::vector<float>(8, 1.f)), W(std::vector<float>(4, 1.f));
  EXPECT_THROW(add_rms_norm_forward(A.get(), A.get(), W.get(), 2, 4, 1e-6f, A.get(), A.get(), nullptr),
               std::invalid_argument);
}

TEST_F(NnOps, LayerNormForwardBackward) {
  // D a multiple of 128 up to 1024 takes the vectorised backward (whole and partial 128-row chunks).
  for (auto [R, D] : std::vector<std::pair<int, int>>{{1, 2}, {1, 384}, {9, 31}, {64, 128}, {257, 384}, {1024, 768}, {130, 1024}}) {
    SCOPED_TRACE("R=" + std::to_string(R) + " D=" + std::to_string(D) + " seed " + std::to_string(seed_));
    const auto x = randn(std::size_t(R) * D, 2.0, 0.5), gmm = randn(D, 0.3, 1.0), bta = randn(D, 0.3);
    const auto dy = randn(std::size_t(R) * D), dg0 = randn(D), db0 = randn(D);
    const float eps = 1e-6f;
    DeviceBuffer X(x), Gm(gmm), Bt(bta), dY(dy), Y = poisoned(std::size_t(R) * D), dX = poisoned(std::size_t(R) * D);
    DeviceBuffer dG(dg0), dB(db0), ws(layer_norm_backward_workspace(R, D));
    layer_norm_forward(X.get(), Gm.get(), Bt.get(), R, D, eps, Y.get(), nullptr);
    layer_norm_backward(X.get(), Gm.get(), dY.get(), R, D, eps, dX.get(), dG.get(), dB.get(), ws.get(), nullptr);
    // The TTT layer's post-norm is layer_norm_rows (ttt/ln_l2.hpp).
    Mat<double> Yr, dXr;
    const Mat<double> Xd = to_mat(x, R, D);
    const RowVec<double> Gd = to_mat(gmm, 1, D), Bd = to_mat(bta, 1, D);
    RowVec<double> dGr = to_mat(dg0, 1, D), dBr = to_mat(db0, 1, D);
    layer_norm_rows<double>(Xd, Gd, Bd, eps, Yr);
    layer_norm_rows_backward<double>(Xd, Gd, eps, to_mat(dy, R, D), dXr, dGr, dBr);
    EXPECT_CLOSE("layernorm forward", Y.download(), flat(Yr), kTolSum);
    expect_layer_norm_dx("layernorm dX (relative to the terms' size)", dX.download(), dXr, Xd,
                         to_mat(dy, R, D), gmm, eps);
    EXPECT_CLOSE("layernorm dgamma", dG.download(), flat(dGr), kTolSum);
    EXPECT_CLOSE("layernorm dbeta", dB.download(), flat(dBr), kTolSum);
  }
}

// The Mamba backbone's gated post-norm, out = LayerNorm(O) ⊙ gelu(A), forward and backward in one pass
// each, against the CPU ops in fp64 (layer_norm_rows and its backward, gelu_tanh and its derivative),
// on the vectorised rows (D a multiple of 128) and the general ones; the bf16 output is the fp32
// output rounded, bit for bit. Tolerances as the LayerNorm's above.
TEST_F(NnOps, GatedLayerNormForwardBackward) {
  for (auto [R, D] : std::vector<std::pair<int, int>>{
           {1, 2}, {9, 31}, {64, 128}, {257, 384}, {300, 768}, {130, 1024}}) {
    SCOPED_TRACE("R=" + std::to_string(R) + " D=" + std::to_string(D) + " seed " +
                 std::to_string(seed_));
    const std::size_t n = std::size_t(R) * D;
    auto a = randn(n, 3.0);
    if (n > 8) a[0] = 80.f, a[1] = -80.f, a[2] = 0.f;  // saturated and zero gate pre-activations
    const auto o = randn(n, 2.0, 0.5), gmm = randn(D, 0.3, 1.0), bta = randn(D, 0.3);
    const auto dout = randn(n), dg0 = randn(D), db0 = randn(D);
    const float eps = 1e-6f;
    DeviceBuffer O(o), A(a), Gm(gmm), Bt(bta), dOut(dout), Out = poisoned(n), dO = poisoned(n),
                                                           dA = poisoned(n);
    DeviceBuffer dG(dg0), dB(db0), ws(gated_layer_norm_backward_workspace(R, D));
    gated_layer_norm_forward(O.get(), Gm.get(), Bt.get(), A.get(), R, D, eps, Out.get(), nullptr,
                             nullptr);
    gated_layer_norm_backward(O.get(), Gm.get(), Bt.get(), A.get(), dOut.get(), R, D, eps, dO.get(),
                              dA.get(), dG.get(), dB.get(), ws.get(), nullptr);
    Mat<double> Yr, dOr;
    const Mat<double> Od = to_mat(o, R, D), Ad = to_mat(a, R, D), dOutd = to_mat(dout, R, D);
    const RowVec<double> Gd = to_mat(gmm, 1, D), Bd = to_mat(bta, 1, D);
    RowVec<double> dGr = to_mat(dg0, 1, D), dBr = to_mat(db0, 1, D);
    layer_norm_rows<double>(Od, Gd, Bd, eps, Yr);
    Mat<double> outr(R, D), dYr(R, D), dAr(R, D);
    for (int r = 0; r < R; ++r)
      for (int c = 0; c < D; ++c) {
        const double x = Ad(r, c), g = dOutd(r, c);
        outr(r, c) = Yr(r, c) * gelu_tanh(x);
        dYr(r, c) = g * gelu_tanh(x);
        dAr(r, c) = g * Yr(r, c) * gelu_tanh_grad(x);
      }
    layer_norm_rows_backward<double>(Od, Gd, eps, dYr, dOr, dGr, dBr);
    EXPECT_CLOSE("gated forward", Out.download(), flat(outr), kTolSum);
    EXPECT_CLOSE("gated dA", dA.download(), flat(dAr), kTolSum);
    expect_layer_norm_dx("gated dO (relative to the terms' size)", dO.download(), dOr, Od, dYr, gmm,
                         eps);
    EXPECT_CLOSE("gated dgamma", dG.download(), flat(dGr), kTolSum);
    EXPECT_CLOSE("gated dbeta", dB.download(), flat(dBr), kTolSum);
    // The bf16 output: the fp32 output rounded.
    std::uint16_t* buf = nullptr;
    TTTLAB_CUDA_CHECK(cudaMalloc(reinterpret_cast<void**>(&buf), 2 * n * sizeof(std::uint16_t)));
    gated_layer_norm_forward(O.get(), Gm.get(), Bt.get(), A.get(), R, D, eps, nullptr, buf,
                             nullptr);
    convert_to_bf16(Out.get(), R, D, D, buf + n, D, nullptr);
    EXPECT_EQ(download16(buf, n), download16(buf + n, n))
        << "the bf16 output must be the fp32 output rounded";
    // dA written only as bf16: dA rounded (the rest of the backward unchanged).
    DeviceBuffer dO2 = poisoned(n), scratch = poisoned(n), dG2(dg0), dB2(db0);
    gated_layer_norm_backward(O.get(), Gm.get(), Bt.get(), A.get(), dOut.get(), R, D, eps,
                              dO2.get(), scratch.get(), dG2.get(), dB2.get(), ws.get(), nullptr,
                              buf);
    convert_to_bf16(dA.get(), R, D, D, buf + n, D, nullptr);
    EXPECT_EQ(download16(buf, n), download16(buf + n, n)) << "dA16 must be dA rounded";
    cudaFree(buf);
    EXPECT_EQ(dO2.download(), dO.download()) << "dO with dA16";
    EXPECT_EQ(dG2.download(), dG.download()) << "dgamma with dA16";
  }
  DeviceBuffer X(std::size_t(8)), W(std::size_t(4));
  EXPECT_THROW(gated_layer_norm_forward(X.get(), W.get(), W.get(), X.get(), 2, 4, 1e-6f, X.get(),
                                        nullptr, nullptr),
               std::invalid_argument);
}

TEST_F(NnOps, CausalConvForwardBackward) {
  // clang-format off
  for (auto [B, T, C, K] : std::vector<std::array<int, 4>>{
           {1, 1, 1, 1}, {1, 3, 5, 4}, {2, 17, 33, 4}, {3, 64, 128, 4}, {2, 200, 64, 1}, {1, 40, 32, 16}, {4, 512, 384, 4},
           // The vectorised path (K = 4, C % 4 = 0): tiles (16 rows forward, 8 backward) that cross
           // sequence ends, sequences shorter than the kernel, and a last 128-row chunk of the
           // backward's weight sums that is partial.
           {2, 37, 64, 4}, {4, 2, 16, 4}, {3, 21, 8, 4}, {5, 50, 12, 4}, {1, 300, 1028, 4}}) {
    // clang-format on
    for (bool acc : {false, true}) {
      SCOPED_TRACE("B=" + std::to_string(B) + " T=" + std::to_string(T) + " C=" + std::to_string(C) + " K=" + std::to_string(K) +
                   (acc ? " accumulate" : "") + " seed " + std::to_string(seed_));
      const std::size_t n = std::size_t(B) * T * C;
      const auto u = randn(n), w = randn(std::size_t(C) * K, 0.5), bias = randn(C, 0.1), dy = randn(n);
      const auto du0 = randn(n), dw0 = randn(std::size_t(C) * K), dbias0 = randn(C);
      DeviceBuffer U(u), W(w), Bi(bias), dY(dy), Y = poisoned(n), dU = acc ? DeviceBuffer(du0) : poisoned(n);
      DeviceBuffer dW(dw0), dBi(dbias0), ws(causal_conv_backward_workspace(B, T, C, K));
      causal_conv_forward(U.get(), W.get(), Bi.get(), B, T, C, K, Y.get(), nullptr);
      causal_conv_backward(U.get(), W.get(), dY.get(), B, T, C, K, dU.get(), acc, dW.get(), dBi.get(), ws.get(), nullptr);
      std::vector<double> Yr(n), dUr(n);
      Mat<double> Wd = to_mat(w, C, K), dWr = to_mat(dw0, C, K);
      RowVec<double> Bd = to_mat(bias, 1, C), dBr = to_mat(dbias0, 1, C);
      for (int s = 0; s < B; ++s) {
        const std::size_t o = std::size_t(s) * T * C;
        const Mat<double> us = mat_at(u, o, T, C), dys = mat_at(dy, o, T, C);
        Mat<double> hist = Mat<double>::Zero(K - 1, C), y, dus;
        ::tttlab::causal_conv_forward<double>(us, Wd, Bd, hist, y);
        ::tttlab::causal_conv_backward<double>(us, Wd, dys, dus, dWr, dBr);
        for (std::size_t i = 0; i < std::size_t(T) * C; ++i) {
          Yr[o + i] = y.data()[i];
          dUr[o + i] = dus.data()[i] + (acc ? du0[o + i] : 0.0);
        }
      }
      EXPECT_CLOSE("conv forward", Y.download(), Yr, kTolElem);
      EXPECT_CLOSE("conv du", dU.download(), dUr, kTolElem);
      EXPECT_CLOSE("conv dw", dW.download(), flat(dWr), kTolSum);
      EXPECT_CLOSE("conv dbias", dBi.download(), flat(dBr), kTolSum);
    }
  }
}

// RoPE inside the conv's pass (the Mamba backbone's Q and K) against the two separate ops, each tested
// against the CPU above: the vectorised path (d a multiple of 4) and the plain path (C not a multiple
// of 4, or d = 6: a float4 would straddle two heads), tiles crossing sequence ends, periods
// that do not divide T. dy must come back unchanged.
TEST_F(NnOps, CausalConvWithRopeEqualsConvThenRope) {
  for (auto [B, T, H, d, period] : std::vector<std::array<int, 5>>{
           {2, 37, 3, 16, 16}, {3, 21, 2, 8, 5}, {1, 300, 4, 64, 16}, {4, 2, 1, 4, 3}, {2, 19, 3, 6, 4}, {2, 23, 2, 6, 7}}) {
    const int C = H * d, K = 4;
    for (bool acc : {false, true}) {
      SCOPED_TRACE("B=" + std::to_string(B) + " T=" + std::to_string(T) + " H=" + std::to_string(H) + " d=" +
                   std::to_string(d) + " period=" + std::to_string(period) + (acc ? " accumulate" : "") + " seed " +
                   std::to_string(seed_));
      const std::size_t n = std::size_t(B) * T * C;
      const auto u = randn(n), w = randn(std::size_t(C) * K, 0.5), bias = randn(C, 0.1), dy = randn(n);
      const auto du0 = randn(n), dw0 = randn(std::size_t(C) * K), dbias0 = randn(C);
      std::vector<float> ct(std::size_t(period) * d / 2), st(ct.size());
      rope_tables(d, period, 1e4, ct.data(), st.data());
      DeviceBuffer U(u), W(w), Bi(bias), Ct(ct), St(st), ws(causal_conv_backward_workspace(B, T, C, K));
      const ConvRope rope{Ct.get(), St.get(), d, period};
      // Fused.
      DeviceBuffer Y = poisoned(n), dY(dy), dU = acc ? DeviceBuffer(du0) : poisoned(n), dW(dw0), dBi(dbias0);
      causal_conv_forward(U.get(), W.get(), Bi.get(), B, T, C, K, Y.get(), nullptr, &rope);
      causal_conv_backward(U.get(), W.get(), dY.get(), B, T, C, K, dU.get(), acc, dW.get(), dBi.get(), ws.get(),
                           nullptr, &rope);
      // Separate: conv then RoPE; RoPE's backward then the conv's.
      DeviceBuffer Y2 = poisoned(n), dY2(dy), dU2 = acc ? DeviceBuffer(du0) : poisoned(n), dW2(dw0), dBi2(dbias0);
      causal_conv_forward(U.get(), W.get(), Bi.get(), B, T, C, K, Y2.get(), nullptr);
      rope_rotate(Y2.get(), B, T, H, d, period, Ct.get(), St.get(), 1.f, nullptr);
      rope_rotate(dY2.get(), B, T, H, d, period, Ct.get(), St.get(), -1.f, nullptr);
      causal_conv_backward(U.get(), W.get(), dY2.get(), B, T, C, K, dU2.get(), acc, dW2.get(), dBi2.get(), ws.get(),
                           nullptr);
      EXPECT_CLOSE("forward", Y.download(), widen(Y2.download()), kTolElem);
      EXPECT_CLOSE("du", dU.download(), widen(dU2.download()), kTolElem);
      EXPECT_CLOSE("dw", dW.download(), widen(dW2.download()), kTolElem);
      EXPECT_CLOSE("dbias", dBi.download(), widen(dBi2.download()), kTolElem);
      EXPECT_EQ(dY.download(), dy) << "the fused backward must leave dy unchanged";
    }
  }
  const ConvRope bad{nullptr, nullptr, 6, 1};
  DeviceBuffer X(std::size_t(16)), Wt(std::size_t(16)), Bs(std::size_t(4)), Yb(std::size_t(16));
  EXPECT_THROW(causal_conv_forward(X.get(), Wt.get(), Bs.get(), 1, 4, 4, 4, Yb.get(), nullptr, &bad),
               std::invalid_argument);
}

// The pair of convolutions of one input (the Mamba backbone's conv_q and conv_k) against two single
// calls, each tested against the CPU above: bitwise equal, with and without RoPE, overwriting and
// accumulating du, on the vectorised path (shorter backward tiles that cross sequence ends, a partial
// last chunk) and the plain one (C not a multiple of 4, K ≠ 4, d = 6). The gradients come back unchanged.
TEST_F(NnOps, CausalConvPairEqualsTwoSingleCalls) {
  for (auto [B, T, H, d, K] : std::vector<std::array<int, 5>>{{2, 37, 3, 16, 4},
                                                              {1, 300, 4, 64, 4},
                                                              {4, 2, 1, 4, 4},
                                                              {3, 21, 2, 8, 4},
                                                              {2, 19, 3, 6, 4},
                                                              {2, 23, 2, 8, 3}}) {
    const int C = H * d, period = 5;
    for (bool with_rope : {false, true})
      for (bool acc : {false, true}) {
        SCOPED_TRACE("B=" + std::to_string(B) + " T=" + std::to_string(T) + " C=" +
                     std::to_string(C) + " K=" + std::to_string(K) + (with_rope ? " rope" : "") +
                     (acc ? " accumulate" : "") + " seed " + std::to_string(seed_));
        const std::size_t n = std::size_t(B) * T * C, nw = std::size_t(C) * K;
        const auto u = randn(n), wa = randn(nw, 0.5), wb = randn(nw, 0.5), ba = randn(C, 0.1),
                   bb = randn(C, 0.1);
        const auto dya = randn(n), dyb = randn(n), du0 = randn(n);
        const auto dwa0 = randn(nw), dwb0 = randn(nw), dba0 = randn(C), dbb0 = randn(C);
        std::vector<float> ct(std::size_t(period) * d / 2), st(ct.size());
        rope_tables(d, period, 1e4, ct.data(), st.data());
        DeviceBuffer U(u), Wa(wa), Wb(wb), Ba(ba), Bb(bb), dYa(dya), dYb(dyb), Ct(ct), St(st);
        const ConvRope rope_tables_{Ct.get(), St.get(), d, period};
        const ConvRope* rope = with_rope ? &rope_tables_ : nullptr;
        // Two single calls.
        DeviceBuffer Ya = poisoned(n), Yb = poisoned(n), dU = acc ? DeviceBuffer(du0) : poisoned(n);
        DeviceBuffer dWa(dwa0), dWb(dwb0), dBa(dba0), dBb(dbb0),
            ws(causal_conv_backward_workspace(B, T, C, K));
        causal_conv_forward(U.get(), Wa.get(), Ba.get(), B, T, C, K, Ya.get(), nullptr, rope);
        causal_conv_forward(U.get(), Wb.get(), Bb.get(), B, T, C, K, Yb.get(), nullptr, rope);
        causal_conv_backward(U.get(), Wa.get(), dYa.get(), B, T, C, K, dU.get(), acc, dWa.get(),
                             dBa.get(), ws.get(), nullptr, rope);
        causal_conv_backward(U.get(), Wb.get(), dYb.get(), B, T, C, K, dU.get(), true, dWb.get(),
                             dBb.get(), ws.get(), nullptr, rope);
        // The pair.
        DeviceBuffer Ya2 = poisoned(n), Yb2 = poisoned(n),
                     dU2 = acc ? DeviceBuffer(du0) : poisoned(n);
        DeviceBuffer dWa2(dwa0), dWb2(dwb0), dBa2(dba0), dBb2(dbb0);
        DeviceBuffer ws2(causal_conv_pair_backward_workspace(B, T, C, K));
        causal_conv_pair_forward(U.get(), Wa.get(), Ba.get(), Wb.get(), Bb.get(), B, T, C, K,
                                 Ya2.get(), Yb2.get(), nullptr, rope);
        causal_conv_pair_backward(U.get(), Wa.get(), dYa.get(), Wb.get(), dYb.get(), B, T, C, K,
                                  dU2.get(), acc, dWa2.get(), dBa2.get(), dWb2.get(), dBb2.get(),
                                  ws2.get(), nullptr, rope);
        EXPECT_EQ(Ya2.download(), Ya.download()) << "y_a";
        EXPECT_EQ(Yb2.download(), Yb.download()) << "y_b";
        EXPECT_EQ(dU2.download(), dU.download()) << "du";
        EXPECT_EQ(dWa2.download(), dWa.download()) << "dw_a";
        EXPECT_EQ(dBa2.download(), dBa.download()) << "dbias_a";
        EXPECT_EQ(dWb2.download(), dWb.download()) << "dw_b";
        EXPECT_EQ(dBb2.download(), dBb.download()) << "dbias_b";
        EXPECT_EQ(dYa.download(), dya) << "the backward must leave dy_a unchanged";
        EXPECT_EQ(dYb.download(), dyb) << "the backward must leave dy_b unchanged";
        // du written only as bf16: du rounded.
        DeviceBuffer dU3 = acc ? DeviceBuffer(du0) : poisoned(n), dWa3(dwa0), dWb3(dwb0),
                     dBa3(dba0), dBb3(dbb0);
        std::uint16_t* buf = nullptr;
        TTTLAB_CUDA_CHECK(
            cudaMalloc(reinterpret_cast<void**>(&buf), 2 * n * sizeof(std::uint16_t)));
        causal_conv_pair_backward(U.get(), Wa.get(), dYa.get(), Wb.get(), dYb.get(), B, T, C, K,
                                  dU3.get(), acc, dWa3.get(), dBa3.get(), dWb3.get(), dBb3.get(),
                                  ws2.get(), nullptr, rope, buf);
        convert_to_bf16(dU.get(), B * T, C, C, buf + n, C, nullptr);
        EXPECT_EQ(download16(buf, n), download16(buf + n, n)) << "du16 must be du rounded";
        cudaFree(buf);
        EXPECT_EQ(dWb3.download(), dWb.download()) << "dw_b with du16";
      }
  }
  DeviceBuffer X(std::size_t(16)), Wt(std::size_t(16)), Bs(std::size_t(4));
  EXPECT_THROW(causal_conv_pair_forward(X.get(), Wt.get(), Bs.get(), Wt.get(), Bs.get(), 1, 4, 4, 4,
                                        X.get(), X.get(), nullptr),
               std::invalid_argument);
}

// The pre-conv, the residual add and the norm after it in one pass against the two calls it replaces
// (each tested against the CPU above), bitwise: S, and Y in fp32 or only in bf16. The one-pass kernel
// (K = 4, D = 128·NV) with sequences shorter than the kernel and rows crossing sequence ends, and the
// fallback through scratch (D not a multiple of 128, K ≠ 4, an unaligned input).
TEST_F(NnOps, ConvAddRmsNormEqualsConvThenAddRmsNorm) {
  struct Case {
    int B, T, D, K, shift;
  };
  for (const Case c : {Case{2, 37, 128, 4, 0}, Case{4, 2, 256, 4, 0}, Case{3, 21, 768, 4, 0},
                       Case{1, 5, 1024, 4, 0}, Case{2, 9, 96, 4, 0}, Case{2, 9, 128, 3, 0},
                       Case{2, 9, 128, 4, 1}}) {
    for (bool bf16 : {false, true}) {
      SCOPED_TRACE("B=" + std::to_string(c.B) + " T=" + std::to_string(c.T) +
                   " D=" + std::to_string(c.D) + " K=" + std::to_string(c.K) +
                   (c.shift ? " unaligned" : "") + (bf16 ? " bf16" : "") + " seed " +
                   std::to_string(seed_));
      const int R = c.B * c.T, s = c.shift;
      const std::size_t n = std::size_t(R) * c.D;
      const auto u = randn(n + s), h = randn(n, 1.5, 0.3), cw = randn(std::size_t(c.D) * c.K, 0.5),
                 cb = randn(c.D, 0.1), w = randn(c.D, 0.3, 1.0);
      const float eps = 1e-6f;
      DeviceBuffer U(u), H(h), CW(cw), CB(cb), W(w);
      // The two calls.
      DeviceBuffer Dx = poisoned(n), S1 = poisoned(n), Y1 = poisoned(n);
      causal_conv_forward(U.get() + s, CW.get(), CB.get(), c.B, c.T, c.D, c.K, Dx.get(), nullptr);
      add_rms_norm_forward(H.get(), Dx.get(), W.get(), R, c.D, eps, S1.get(), Y1.get(), nullptr);
      // One pass.
      DeviceBuffer S2 = poisoned(n), Y2 = poisoned(n), scratch = poisoned(n);
      std::uint16_t* y16 = nullptr;
      TTTLAB_CUDA_CHECK(cudaMalloc(reinterpret_cast<void**>(&y16), 2 * n * sizeof(std::uint16_t)));
      conv_add_rms_norm_forward(U.get() + s, CW.get(), CB.get(), c.B, c.T, c.D, c.K, H.get(),
                                W.get(), eps, S2.get(), bf16 ? nullptr : Y2.get(),
                                bf16 ? y16 : nullptr, scratch.get(), nullptr);
      EXPECT_EQ(S2.download(), S1.download()) << "S";
      if (bf16) {
        convert_to_bf16(Y1.get(), R, c.D, c.D, y16 + n, c.D, nullptr);
        EXPECT_EQ(download16(y16, n), download16(y16 + n, n)) << "Y16 must be Y rounded";
      } else {
        EXPECT_EQ(Y2.download(), Y1.download()) << "Y";
      }
      cudaFree(y16);
    }
  }
  // Exactly one of Y and Y16: neither, and both, are refused.
  DeviceBuffer X(std::vector<float>(16, 1.f)), Wt(std::vector<float>(16, 1.f));
  EXPECT_THROW(conv_add_rms_norm_forward(X.get(), Wt.get(), Wt.get(), 1, 4, 4, 4, X.get(), Wt.get(),
                                         1e-6f, X.get(), nullptr, nullptr, X.get(), nullptr),
               std::invalid_argument);
  std::uint16_t* y16 = nullptr;
  TTTLAB_CUDA_CHECK(cudaMalloc(reinterpret_cast<void**>(&y16), 16 * sizeof(std::uint16_t)));
  EXPECT_THROW(conv_add_rms_norm_forward(X.get(), Wt.get(), Wt.get(), 1, 4, 4, 4, X.get(), Wt.get(),
                                         1e-6f, X.get(), X.get(), y16, X.get(), nullptr),
               std::invalid_argument);
  cudaFree(y16);
}

TEST_F(NnOps, RopeForwardBackward) {
  for (auto [B, T, H, d, period] : std::vector<std::array<int, 5>>{
           {1, 1, 1, 2, 1}, {2, 17, 3, 16, 16}, {1, 100, 2, 64, 7}, {3, 64, 6, 64, 16}, {1, 40, 1, 128, 64}}) {
    SCOPED_TRACE("B=" + std::to_string(B) + " T=" + std::to_string(T) + " H=" + std::to_string(H) + " d=" + std::to_string(d) +
                 " b=" + std::to_string(period) + " seed " + std::to_string(seed_));
    const int D = H * d;
    const std::size_t n = std::size_t(B) * T * D;
    const auto x = randn(n);
    std::vector<float> ct(std::size_t(period) * d / 2), st(ct.size());
    rope_tables(d, period, 1e4, ct.data(), st.data());
    DeviceBuffer X(x), Ct(ct), St(st);
    rope_rotate(X.get(), B, T, H, d, period, Ct.get(), St.get(), 1.f, nullptr);
    const std::vector<float> fwd = X.download();
    rope_rotate(X.get(), B, T, H, d, period, Ct.get(), St.get(), -1.f, nullptr);
    const std::vector<float> back = X.download();
    std::vector<double> fr(n), br(n);
    std::vector<long> pos(T);
    for (int t = 0; t < T; ++t) pos[t] = t % period;
    for (int s = 0; s < B; ++s) {
      const std::size_t o = std::size_t(s) * T * D;
      Mat<double> m = mat_at(x, o, T, D);
      rope_apply<double>(m, H, pos, 1e4);
      for (std::size_t i = 0; i < std::size_t(T) * D; ++i) fr[o + i] = m.data()[i];
      Mat<double> f = mat_at(fwd, o, T, D);  // the backward applied to the GPU's forward output
      rope_backward<double>(f, H, pos, 1e4);
      for (std::size_t i = 0; i < std::size_t(T) * D; ++i) br[o + i] = f.data()[i];
    }
    EXPECT_CLOSE("rope forward", fwd, fr, kTolElem);
    EXPECT_CLOSE("rope backward", back, br, kTolElem);
    EXPECT_CLOSE("rope round trip", back, widen(x), kTolElem);
  }
}

// rope_rotate_to_bf16 is rope_rotate followed by convert_to_bf16, bit for bit, and leaves X alone; the
// head dims cover its float4 path (d % 4 == 0) and its pair path (d = 2, 6).
TEST_F(NnOps, RopeToBf16IsTheRotationRounded) {
  for (auto [B, T, H, d, period] : std::vector<std::array<int, 5>>{
           {1, 1, 1, 2, 1}, {2, 17, 3, 6, 17}, {3, 64, 6, 64, 64}, {1, 40, 2, 128, 40}}) {
    SCOPED_TRACE("B=" + std::to_string(B) + " T=" + std::to_string(T) + " H=" + std::to_string(H) + " d=" +
                 std::to_string(d) + " seed " + std::to_string(seed_));
    const std::size_t n = std::size_t(B) * T * H * d;
    const auto x = randn(n);
    std::vector<float> ct(std::size_t(period) * d / 2), st(ct.size());
    rope_tables(d, period, 1e4, ct.data(), st.data());
    DeviceBuffer X(x), R(x), Ct(ct), St(st);
    DeviceBuffer16 got(n), want(n);
    got.poison();
    rope_rotate_to_bf16(X.get(), B, T, H, d, period, Ct.get(), St.get(), 1.f, got.get(), nullptr);
    rope_rotate(R.get(), B, T, H, d, period, Ct.get(), St.get(), 1.f, nullptr);
    convert_to_bf16(R.get(), B * T, H * d, H * d, want.get(), H * d, nullptr);
    EXPECT_EQ(got.download(), want.download());
    EXPECT_EQ(X.download(), x) << "X must not change";
  }
}

TEST_F(NnOps, Activations) {
  for (std::size_t n : {std::size_t(1), std::size_t(31), std::size_t(4097), std::size_t(1) << 20}) {
    SCOPED_TRACE("n=" + std::to_string(n) + " seed " + std::to_string(seed_));
    auto a = randn(n, 3.0), u = randn(n), dh = randn(n);
    if (n > 8) a[0] = 80.f, a[1] = -80.f, a[2] = 0.f;  // saturated and zero pre-activations
    DeviceBuffer A(a), U(u), dH(dh), Hd = poisoned(n), dG = poisoned(n), dU = poisoned(n);
    silu_mul_forward(A.get(), U.get(), Hd.get(), n, nullptr);
    silu_mul_backward(A.get(), U.get(), dH.get(), dG.get(), dU.get(), n, nullptr);
    std::vector<double> h(n), dg(n), du(n);
    for (std::size_t i = 0; i < n; ++i) {
      const double x = a[i], s = sigmoid(x);
      h[i] = x * s * u[i];
      du[i] = dh[i] * x * s;
      dg[i] = dh[i] * u[i] * s * (1 + x * (1 - s));
    }
    EXPECT_CLOSE("silu*up", Hd.download(), h, kTolElem);
    EXPECT_CLOSE("silu dG", dG.download(), dg, kTolElem);
    EXPECT_CLOSE("silu dU", dU.download(), du, kTolElem);
    // dG may alias dHidden (the backend does this).
    silu_mul_backward(A.get(), U.get(), dH.get(), dH.get(), dU.get(), n, nullptr);
    EXPECT_CLOSE("silu dG in place", dH.download(), dg, kTolElem);
  }
}

// The mixed-precision SwiGLU (silu_mul_*_bf16, bf16 in and out): bit for bit the fp32 op above on the
// widened inputs followed by convert_to_bf16, on the vector path (n a multiple of 4) and the element
// path (n odd, or arrays misaligned by one element), with saturated and zero pre-activations.
TEST_F(NnOps, SwigluBf16IsTheFp32OpOnWidenedInputsRounded) {
  for (std::size_t n : {std::size_t(1), std::size_t(31), std::size_t(4096), std::size_t(1) << 20}) {
    for (int offset : {0, 1}) {
      SCOPED_TRACE("n=" + std::to_string(n) + " offset " + std::to_string(offset) + " seed " +
                   std::to_string(seed_));
      auto a = randn(n, 3.0), u = randn(n), dh = randn(n);
      if (n > 8) a[0] = 80.f, a[1] = -80.f, a[2] = 0.f;
      // The inputs in bf16 (host patterns, offset by `offset` elements on the device) and widened.
      std::vector<std::uint16_t> in16(3 * (n + 1), 0);
      for (std::size_t i = 0; i < n; ++i) {
        in16[offset + i] = bf16_bits_reference(a[i]);
        in16[(n + 1) + offset + i] = bf16_bits_reference(u[i]);
        in16[2 * (n + 1) + offset + i] = bf16_bits_reference(dh[i]);
        a[i] = bf16_widened(in16[offset + i]);
        u[i] = bf16_widened(in16[(n + 1) + offset + i]);
        dh[i] = bf16_widened(in16[2 * (n + 1) + offset + i]);
      }
      DeviceBuffer A(a), U(u), dH(dh), Hd = poisoned(n), dG = poisoned(n), dU = poisoned(n);
      silu_mul_forward(A.get(), U.get(), Hd.get(), n, nullptr);
      silu_mul_backward(A.get(), U.get(), dH.get(), dG.get(), dU.get(), n, nullptr);
      // The bf16 op's outputs, and the fp32 outputs rounded by convert_to_bf16.
      std::uint16_t* buf = nullptr;
      TTTLAB_CUDA_CHECK(
          cudaMalloc(reinterpret_cast<void**>(&buf), 9 * (n + 1) * sizeof(std::uint16_t)));
      TTTLAB_CUDA_CHECK(cudaMemcpy(buf + 6 * (n + 1), in16.data(),
                                   in16.size() * sizeof(std::uint16_t), cudaMemcpyHostToDevice));
      const std::uint16_t *a16 = buf + 6 * (n + 1) + offset, *u16 = buf + 7 * (n + 1) + offset,
                          *dh16 = buf + 8 * (n + 1) + offset;
      std::uint16_t *h16 = buf + offset, *g16 = buf + (n + 1) + offset,
                    *v16 = buf + 2 * (n + 1) + offset;
      std::uint16_t *h_ref = buf + 3 * (n + 1), *g_ref = buf + 4 * (n + 1),
                    *v_ref = buf + 5 * (n + 1);
      silu_mul_forward_bf16(a16, u16, h16, n, nullptr);
      silu_mul_backward_bf16(a16, u16, dh16, g16, v16, n, nullptr);
      const int cols = static_cast<int>(n);
      convert_to_bf16(Hd.get(), 1, cols, cols, h_ref, cols, nullptr);
      convert_to_bf16(dG.get(), 1, cols, cols, g_ref, cols, nullptr);
      convert_to_bf16(dU.get(), 1, cols, cols, v_ref, cols, nullptr);
      std::vector<std::uint16_t> host(6 * (n + 1));
      TTTLAB_CUDA_CHECK(cudaMemcpy(host.data(), buf, host.size() * sizeof(std::uint16_t), cudaMemcpyDeviceToHost));
      cudaFree(buf);
      const char* names[] = {"silu*up", "silu dG", "silu dU"};
      for (int k = 0; k < 3; ++k) {
        std::size_t differ = 0, first = 0;
        for (std::size_t i = 0; i < n; ++i)
          if (host[k * (n + 1) + offset + i] != host[(3 + k) * (n + 1) + i] && differ++ == 0) first = i;
        EXPECT_EQ(differ, 0u) << names[k] << ": " << differ << " of " << n << " elements differ, the first at " << first;
      }
    }
  }
}

// The mixed-precision RMSNorms (rms_norm_forward_bf16, add_rms_norm_forward_bf16, the backward's dX16):
// bit for bit the fp32 op followed by convert_to_bf16, on the row kernel in registers (D = 768) and the general one
// (D = 100); the fused add's sum S stays the fp32 op's. (The gated post-norm's bf16 output is tested
// with it above.)
TEST_F(NnOps, NormBf16OutputsAreTheRoundedFp32Outputs) {
  for (auto [R, D] : std::vector<std::array<int, 2>>{{1, 100}, {37, 100}, {300, 768}}) {
    SCOPED_TRACE("R=" + std::to_string(R) + " D=" + std::to_string(D) + " seed " + std::to_string(seed_));
    const std::size_t n = std::size_t(R) * D;
    const auto h = randn(n, 2.0), dx = randn(n), w = randn(D, 0.5, 1.0);
    DeviceBuffer H(h), Dx(dx), W(w), Y = poisoned(n), S = poisoned(n), S2 = poisoned(n);
    std::uint16_t* buf = nullptr;
    TTTLAB_CUDA_CHECK(cudaMalloc(reinterpret_cast<void**>(&buf), 2 * n * sizeof(std::uint16_t)));
    std::uint16_t *got = buf, *want = buf + n;
    // rms_norm_forward
    rms_norm_forward(H.get(), W.get(), R, D, 1e-6f, Y.get(), nullptr);
    rms_norm_forward_bf16(H.get(), W.get(), R, D, 1e-6f, got, nullptr);
    convert_to_bf16(Y.get(), R, D, D, want, D, nullptr);
    EXPECT_EQ(count_differences(download16(got, n), download16(want, n)), 0u) << "rms_norm_forward_bf16";
    // add_rms_norm_forward
    add_rms_norm_forward(H.get(), Dx.get(), W.get(), R, D, 1e-6f, S.get(), Y.get(), nullptr);
    add_rms_norm_forward_bf16(H.get(), Dx.get(), W.get(), R, D, 1e-6f, S2.get(), got, nullptr);
    convert_to_bf16(Y.get(), R, D, D, want, D, nullptr);
    EXPECT_EQ(count_differences(download16(got, n), download16(want, n)), 0u) << "add_rms_norm_forward_bf16";
    EXPECT_EQ(S.download(), S2.download()) << "the residual sum";
    // rms_norm_backward's bf16 copy of dX (after accumulating into it)
    for (bool acc : {false, true}) {
      DeviceBuffer dX = acc ? DeviceBuffer(h) : poisoned(n),
                   dX2 = acc ? DeviceBuffer(h) : poisoned(n);
      DeviceBuffer dw(w), dw2(w), ws(rms_norm_backward_workspace(R, D));
      rms_norm_backward(H.get(), W.get(), Dx.get(), R, D, 1e-6f, dX.get(), acc, dw.get(), ws.get(),
                        nullptr);
      rms_norm_backward(H.get(), W.get(), Dx.get(), R, D, 1e-6f, dX2.get(), acc, dw2.get(),
                        ws.get(), nullptr, got);
      convert_to_bf16(dX.get(), R, D, D, want, D, nullptr);
      EXPECT_EQ(count_differences(download16(got, n), download16(want, n)), 0u)
          << "rms_norm_backward dX16";
      EXPECT_EQ(dX2.download(), dX.download()) << "dX with dX16";
    }
    cudaFree(buf);
  }
  EXPECT_THROW(rms_norm_forward_bf16(nullptr, nullptr, 2, 8, 1e-6f, nullptr, nullptr), std::invalid_argument);
}

TEST_F(NnOps, EtaAndTokenIndex) {
  for (auto [B, T, H, D] : std::vector<std::array<int, 4>>{{1, 1, 1, 16}, {2, 17, 3, 48}, {4, 512, 6, 384}}) {
    for (bool learned : {true, false}) {
      SCOPED_TRACE("B=" + std::to_string(B) + " T=" + std::to_string(T) + " H=" + std::to_string(H) + (learned ? " learned" : " fixed") +
                   " seed " + std::to_string(seed_));
      const int d = D / H;
      const int R = B * T;
      const auto x = randn(std::size_t(R) * D), theta = randn(std::size_t(H) * D, 0.3), beta = randn(H, 0.5);
      const auto dlam = randn(std::size_t(B) * H * T);
      const float scale = 1.0f / float(d);
      // U = x·θᵀ on the host (the backend's GEMM), so that only the kernel is under test.
      std::vector<float> u(std::size_t(R) * H);
      for (int r = 0; r < R; ++r)
        for (int h = 0; h < H; ++h) {
          float s = 0;
          for (int c = 0; c < D; ++c) s += x[std::size_t(r) * D + c] * theta[std::size_t(h) * D + c];
          u[std::size_t(r) * H + h] = s;
        }
      DeviceBuffer U(u), Bt(beta), L = poisoned(std::size_t(B) * H * T), dL(dlam), dU = poisoned(std::size_t(R) * H);
      eta_forward(learned ? U.get() : nullptr, learned ? Bt.get() : nullptr, B, T, H, scale, L.get(), nullptr);
      const std::vector<float> lam = L.download();
      eta_backward(L.get(), dL.get(), B, T, H, scale, dU.get(), nullptr);
      std::vector<double> lr(lam.size()), dur(std::size_t(R) * H);
      EtaOptions eo;
      eo.base_lr = 1.0;
      eo.gate = learned ? EtaGate::Learned : EtaGate::Fixed;
      for (int s = 0; s < B; ++s)
        for (int h = 0; h < H; ++h) {
          const Mat<double> xs = mat_at(x, std::size_t(s) * T * D, T, D);
          const Vec<double> l = per_token_lr<double>(eo, xs, row_at(theta, std::size_t(h) * D, D), beta[h], d);
          for (int t = 0; t < T; ++t) {
            const std::size_t i = (std::size_t(s) * H + h) * T + t;
            lr[i] = l(t);
            dur[(std::size_t(s) * T + t) * H + h] = dlam[i] * lam[i] * (1.0 - lam[i] / scale);
          }
        }
      EXPECT_CLOSE("eta forward", lam, lr, kTolElem);
      EXPECT_CLOSE("eta backward", dU.download(), dur, kTolElem);
    }
  }
  for (int b : {1, 7, 16, 64}) {
    for (bool on : {true, false}) {
      SCOPED_TRACE("b=" + std::to_string(b) + (on ? " token index" : " tau = 1") + " seed " + std::to_string(seed_));
      auto delta = randn(b, 0.3);
      if (b > 2) delta[1] = -0.9f;  // 1/2 − 0.9 < 0: clamped, no gradient
      const auto dtau = randn(b), dd0 = randn(b);
      DeviceBuffer De(delta), Ta = poisoned(b), dT(dtau), dD(dd0);
      token_index_forward(De.get(), b, on, Ta.get(), nullptr);
      token_index_backward(De.get(), dT.get(), b, on, dD.get(), nullptr);
      EtaOptions eo;
      eo.token_index = on;
      const Vec<double> tau = token_index_scale<double>(eo, to_mat(delta, 1, b));
      std::vector<double> ddr(dd0.begin(), dd0.end());
      for (int i = 0; i < b; ++i)
        if (on && 1.0f / float(i + 1) + delta[i] > 0.f) ddr[i] += dtau[i];
      EXPECT_CLOSE("tau", Ta.download(), std::vector<double>(tau.data(), tau.data() + b), kTolElem);
      EXPECT_CLOSE("dDelta", dD.download(), ddr, kTolElem);
    }
  }
}

// The fused gate against the gate's formulas in double: eta_gate_forward_bf16 (x and θ rounded to
// bf16 first; the reference takes the same rounded values) and eta_gate_backward from x in fp32 and
// from x's bf16 copy: λ, dU, dθ (accumulated onto a given start), dβ (likewise), and dU16 = bf16(dU)
// bit for bit. Shapes: one row, rows not a multiple of 16 or 64, H = 3 (one head group, part used),
// H = 17 (two groups), and the D768 model's H = 12.
TEST_F(NnOps, EtaGateKernelsMatchTheGateInDouble) {
  for (auto [B, T, H, D] : std::vector<std::array<int, 4>>{
           {1, 1, 1, 16}, {2, 37, 3, 96}, {3, 70, 17, 48}, {2, 300, 12, 768}}) {
    for (bool x_bf16 : {false, true}) {
      SCOPED_TRACE("B=" + std::to_string(B) + " T=" + std::to_string(T) +
                   " H=" + std::to_string(H) + " D=" + std::to_string(D) +
                   (x_bf16 ? " x bf16" : " x fp32") + " seed " + std::to_string(seed_));
      const int R = B * T;
      const float scale = 1.0f / 64.f;
      auto x = randn(std::size_t(R) * D);
      auto theta = randn(std::size_t(H) * D, 0.05);
      const auto beta = randn(H, 0.5);
      const auto dlam = randn(std::size_t(B) * H * T), dth0 = randn(std::size_t(H) * D),
                 db0 = randn(H);
      DeviceBuffer X(x), Th(theta), Bt(beta), L = poisoned(std::size_t(B) * H * T), dL(dlam),
                                              dU = poisoned(std::size_t(R) * H), dTh(dth0), dB(db0),
                                              ws(eta_gate_backward_workspace(R, H, D));
      const std::size_t nx = std::size_t(R) * D, nt = std::size_t(H) * D, nu = std::size_t(R) * H;
      std::uint16_t* buf = nullptr;
      TTTLAB_CUDA_CHECK(
          cudaMalloc(reinterpret_cast<void**>(&buf), (nx + nt + 2 * nu) * sizeof(std::uint16_t)));
      std::uint16_t *x16 = buf, *th16 = buf + nx, *du16 = th16 + nt, *want16 = du16 + nu;
      convert_to_bf16(X.get(), R, D, D, x16, D, nullptr);
      convert_to_bf16(Th.get(), H, D, D, th16, D, nullptr);
      std::vector<float> lam;
      if (x_bf16) {  // the kernels read the rounded copies; the reference their exact values
        const auto r16 = download16(x16, nx), t16 = download16(th16, nt);
        for (std::size_t i = 0; i < nx; ++i) x[i] = bf16_widened(r16[i]);
        for (std::size_t i = 0; i < nt; ++i) theta[i] = bf16_widened(t16[i]);
        eta_gate_forward_bf16(x16, th16, Bt.get(), B, T, H, D, scale, L.get(), nullptr);
        lam = L.download();
      } else {  // λ from the host, so that the backward alone is under test
        lam = randn(std::size_t(B) * H * T, 0.002, scale / 2);
        L.upload(lam);
      }
      const float* xf = x_bf16 ? nullptr : X.get();
      const std::uint16_t* xh = x_bf16 ? x16 : nullptr;
      eta_gate_backward(L.get(), dL.get(), xf, xh, B, T, H, D, scale, dU.get(), du16, dTh.get(),
                        dB.get(), ws.get(), nullptr);
      std::vector<double> lr(lam.size()), dur(nu), dthr(dth0.begin(), dth0.end()),
          dbr(db0.begin(), db0.end());
      for (int s = 0; s < B; ++s)
        for (int h = 0; h < H; ++h)
          for (int t = 0; t < T; ++t) {
            const std::size_t r = std::size_t(s) * T + t, i = (std::size_t(s) * H + h) * T + t;
            double u = beta[h];
            for (int c = 0; c < D; ++c) u += double(x[r * D + c]) * theta[std::size_t(h) * D + c];
            lr[i] = scale / (1.0 + std::exp(-u));
            const double du = double(dlam[i]) * lam[i] * (1.0 - lam[i] / double(scale));
            dur[r * H + h] = du;
            for (int c = 0; c < D; ++c) dthr[std::size_t(h) * D + c] += du * x[r * D + c];
            dbr[h] += du;
          }
      if (x_bf16) EXPECT_CLOSE("lambda", lam, lr, kTolElem);
      EXPECT_CLOSE("dU", dU.download(), dur, kTolElem);
      EXPECT_CLOSE("dtheta", dTh.download(), dthr, kTolSum);
      EXPECT_CLOSE("dbias", dB.download(), dbr, kTolSum);
      convert_to_bf16(dU.get(), R, H, H, want16, H, nullptr);
      EXPECT_EQ(count_differences(download16(du16, nu), download16(want16, nu)), 0u) << "dU16";
      cudaFree(buf);
    }
  }
  DeviceBuffer one(16);
  const auto* one16 = reinterpret_cast<const std::uint16_t*>(one.get());
  EXPECT_THROW(eta_gate_forward_bf16(one16, one16, one.get(), 1, 1, 1, 24, 1.f, one.get(), nullptr),
               std::invalid_argument);  // D not a multiple of 16
  EXPECT_THROW(eta_gate_backward(one.get(), one.get(), one.get(), one16, 1, 1, 1, 4, 1.f, one.get(),
                                 nullptr, one.get(), one.get(), one.get(), nullptr),
               std::invalid_argument);  // x and x16 both given
}

TEST_F(NnOps, CrossEntropy) {
  for (auto [R, V] : std::vector<std::pair<int, int>>{{1, 1}, {1, 256}, {37, 256}, {2048, 256}, {65, 1000}, {16, 7}}) {
    SCOPED_TRACE("R=" + std::to_string(R) + " V=" + std::to_string(V) + " seed " + std::to_string(seed_));
    auto logits = randn(std::size_t(R) * V, 3.0);
    if (R > 2) logits[V] = 200.f;  // a dominant logit: exp must not overflow
    std::vector<int> tg(R);
    std::uniform_int_distribution<int> pick(0, V - 1);
    int counted = 0;
    for (int r = 0; r < R; ++r) {
      tg[r] = (r % 5 == 3) ? k_ignore_target : pick(rng_);
      counted += tg[r] >= 0;
    }
    const long denom = counted + 3;  // a batch denominator larger than this call's count
    const float gs = 1.0f / float(denom);
    DeviceBuffer Lg(logits), Ls = poisoned(R), dL = poisoned(std::size_t(R) * V);
    DeviceInts Tg(tg);
    cross_entropy(Lg.get(), Tg.get(), R, V, gs, Ls.get(), dL.get(), nullptr);
    Mat<double> dref;
    Vec<double> pl;
    softmax_cross_entropy<double>(to_mat(logits, R, V), tg, &dref, &pl, denom);
    EXPECT_CLOSE("CE losses", Ls.download(), std::vector<double>(pl.data(), pl.data() + R), kTolElem);
    EXPECT_CLOSE("CE dlogits", dL.download(), flat(dref), kTolElem);
    // In place over the logits, as the backend runs it.
    cross_entropy(Lg.get(), Tg.get(), R, V, gs, Ls.get(), Lg.get(), nullptr);
    EXPECT_CLOSE("CE dlogits in place", Lg.download(), flat(dref), kTolElem);
  }
}

TEST_F(NnOps, AdamWMatchesTheCpuOptimizer) {
  for (std::size_t n : {std::size_t(1), std::size_t(1000), std::size_t(300001)}) {
    SCOPED_TRACE("n=" + std::to_string(n) + " seed " + std::to_string(seed_));
    std::vector<float> p = randn(n, 0.1), m(n, 0.f), v(n, 0.f);
    DeviceBuffer P(p), M(m), Vv(v), G(n);
    DeviceBuffer ws_d(sum_squares_workspace(n) * 2);  // doubles: twice the floats
    DeviceBuffer out_d(2);
    AdamWConfig ac;
    WarmupCosineSchedule sched;
    sched.peak_value = 1e-2;
    sched.warmup_steps = 1;
    sched.decay_steps = 10;
    AdamW<float> cpu(ac, sched);
    for (int step = 0; step < 3; ++step) {
      const std::vector<float> g = randn(n, step == 1 ? 10.0 : 0.01);  // step 1 is clipped
      G.upload(g);
      const NamedParam<float> np{"p", std::span<float>(p), std::span<const float>(g)};
      const AdamWReport rep = cpu.step(std::span<const NamedParam<float>>(&np, 1));
      sum_squares(G.get(), n, reinterpret_cast<double*>(out_d.get()), reinterpret_cast<double*>(ws_d.get()), nullptr);
      double sumsq = 0;
      TTTLAB_CUDA_CHECK(cudaMemcpy(&sumsq, out_d.get(), sizeof(double), cudaMemcpyDeviceToHost));
      EXPECT_NEAR(std::sqrt(sumsq), rep.grad_norm, 1e-12 * rep.grad_norm);
      // The scalars as AdamW::step (and train_cuda.cpp) computes them.
      const double k = double(step + 1);
      AdamWScalars s;
      s.scale = float(rep.clip_scale);
      s.lr = float(rep.lr);
      s.inv_bc1 = float(1.0 / (1.0 - std::pow(ac.beta1, k)));
      s.inv_bc2 = float(1.0 / (1.0 - std::pow(ac.beta2, k)));
      s.b1 = float(ac.beta1), s.b2 = float(ac.beta2);
      s.one_minus_b1 = float(1.0 - ac.beta1), s.one_minus_b2 = float(1.0 - ac.beta2);
      s.eps = float(ac.eps), s.wd = float(ac.weight_decay);
      // Every other step also writes the bf16 mirror: it must be bf16(p) after the update exactly,
      // and p itself the same as without it.
      if (step % 2 == 1) {
        std::uint16_t* buf = nullptr;
        TTTLAB_CUDA_CHECK(
            cudaMalloc(reinterpret_cast<void**>(&buf), 2 * n * sizeof(std::uint16_t)));
        DeviceBuffer P2(P.download()), M2(M.download()), V2(Vv.download());
        adamw_update(P2.get(), G.get(), M2.get(), V2.get(), n, s, nullptr, buf);
        adamw_update(P.get(), G.get(), M.get(), Vv.get(), n, s, nullptr);
        EXPECT_EQ(P2.download(), P.download()) << "p with the mirror written";
        convert_to_bf16(P.get(), 1, int(n), int(n), buf + n, int(n), nullptr);
        EXPECT_EQ(count_differences(download16(buf, n), download16(buf + n, n)), 0u) << "p16";
        cudaFree(buf);
      } else {
        adamw_update(P.get(), G.get(), M.get(), Vv.get(), n, s, nullptr);
      }
    }
    EXPECT_CLOSE("adamw p", P.download(), widen(p), kTolElem);
    EXPECT_CLOSE("adamw m", M.download(), widen(cpu.state().m[0]), kTolElem);
    EXPECT_CLOSE("adamw v", Vv.download(), widen(cpu.state().v[0]), kTolElem);
  }
}

TEST_F(NnOps, GemmAllTransposesEnginesAndPrecisions) {
  struct Shape {
    int M, N, K;
  };
  const std::vector<Shape> shapes = {{1, 1, 1}, {1, 384, 384}, {37, 5, 129}, {64, 64, 64}, {300, 257, 66},
                                     {2048, 384, 256}, {256, 300, 2048}, {5, 6, 0}};
  std::vector<std::unique_ptr<Gemm>> engines;
  for (GemmEngine engine : {GemmEngine::Cublas, GemmEngine::Builtin})
    for (GemmPrecision prec : {GemmPrecision::Fp32, GemmPrecision::Tf32, GemmPrecision::Bf16}) {
      engines.push_back(std::make_unique<Gemm>(nullptr, prec, engine));
      std::printf("[ INFO     ] engine: %s\n", engines.back()->describe().c_str());
    }
  EXPECT_EQ(engines[0]->engine(), GemmEngine::Cublas) << "cuBLAS could not be loaded: " << engines[0]->describe();
  std::vector<double> worst(engines.size(), 0.0);
  for (const Shape& sh : shapes)
    for (int t = 0; t < 4; ++t) {
      const bool ta = t & 1, tb = t & 2;
      const int M = sh.M, N = sh.N, K = sh.K;
      // Padded leading dimensions: the products must read and write only their own columns.
      const int lda = (ta ? M : K) + 3, ldb = (tb ? K : N) + 1, ldc = N + 2;
      const auto a = randn(std::size_t(ta ? K : M) * lda), b = randn(std::size_t(tb ? N : K) * ldb);
      const auto c0 = randn(std::size_t(M) * ldc);
      std::vector<double> prod(std::size_t(M) * N, 0.0);
      for (int i = 0; i < M; ++i)
        for (int k = 0; k < K; ++k) {
          const double av = ta ? a[std::size_t(k) * lda + i] : a[std::size_t(i) * lda + k];
          for (int j = 0; j < N; ++j)
            prod[std::size_t(i) * N + j] += av * double(tb ? b[std::size_t(j) * ldb + k] : b[std::size_t(k) * ldb + j]);
        }
      for (std::size_t e = 0; e < engines.size(); ++e) {
        const Gemm& gemm = *engines[e];
        const bool cublas = gemm.engine() == GemmEngine::Cublas;
        // Operands rounded to tf32 (10-bit mantissa) or bf16 (7-bit): per-term relative errors of
        // ~2·2^-11 and ~2·2^-8, which the products' random signs average down (measured worst:
        // printed below).
        const double tol = !cublas ? 1e-4 : gemm.precision() == GemmPrecision::Tf32 ? 5e-3
                                         : gemm.precision() == GemmPrecision::Bf16 ? 2e-2 : 1e-4;
        SCOPED_TRACE(gemm.describe() + " M=" + std::to_string(M) + " N=" + std::to_string(N) + " K=" + std::to_string(K) +
                     (ta ? " A^T" : "") + (tb ? " B^T" : "") + " seed " + std::to_string(seed_));
        for (float beta : {0.f, 1.f}) {
          DeviceBuffer A(a), Bm(b), C(c0);
          if (beta == 0.f) C.poison();
          gemm(ta, tb, M, N, K, 0.5f, A.get(), lda, Bm.get(), ldb, beta, C.get(), ldc);
          std::vector<float> got = C.download();
          std::vector<double> ref(got.size());
          for (int i = 0; i < M; ++i)
            for (int j = 0; j < ldc; ++j) {
              const std::size_t o = std::size_t(i) * ldc + j;
              if (j >= N) {  // padding: untouched (with beta = 0 it holds the poison, not compared)
                if (beta == 0.f) got[o] = 0.f;
                ref[o] = beta == 0.f ? 0.0 : c0[o];
                continue;
              }
              ref[o] = 0.5 * prod[std::size_t(i) * N + j] + beta * c0[o];
            }
          const ErrorStat err = compare(got, ref);
          worst[e] = std::max(worst[e], err.rel);
          EXPECT_TRUE(within("gemm", err, tol, got, ref));
        }
      }
    }
  for (std::size_t e = 0; e < engines.size(); ++e) {
    std::printf("[ INFO     ] %s: worst relative error %.2e\n", engines[e]->describe().c_str(), worst[e]);
    if (!(engines[e]->engine() == GemmEngine::Cublas && engines[e]->precision() != GemmPrecision::Fp32))
      worst_ = std::max(worst_, worst[e]);
  }
  // bf16 is coarser than tf32: a bf16 product that matched tf32's error would not be rounding to bf16.
  EXPECT_GT(worst[2], worst[1]) << "the bf16 products are no less accurate than the tf32 ones";
}

// Gemm::bf16_out, the bf16 products written in bf16 (the SwiGLU's pre-activations and its hidden
// state's gradient in mixed precision): against the fp64 product of the fp32 operands, with the bf16
// products' tolerance above plus the output's own rounding (2^-9 relative), every transpose, padded
// strides whose padding stays untouched, operands given as bf16 copies or rounded by the Gemm, K = 0.
TEST_F(NnOps, GemmBf16OutIsTheBf16ProductRounded) {
  const Gemm gemm(nullptr, GemmPrecision::Bf16);
  if (gemm.engine() != GemmEngine::Cublas) GTEST_SKIP() << "cuBLAS not loaded: " << gemm.describe();
  struct Shape {
    int M, N, K;
  };
  for (const Shape& sh :
       std::vector<Shape>{{1, 1, 1}, {37, 5, 129}, {300, 256, 66}, {2048, 384, 256}, {5, 6, 0}})
    for (int t = 0; t < 4; ++t) {
      const bool ta = t & 1, tb = t & 2;
      const int M = sh.M, N = sh.N, K = sh.K;
      SCOPED_TRACE("M=" + std::to_string(M) + " N=" + std::to_string(N) +
                   " K=" + std::to_string(K) + (ta ? " A^T" : "") + (tb ? " B^T" : "") + " seed " +
                   std::to_string(seed_));
      const int lda = (ta ? M : K) + 3, ldb = (tb ? K : N) + 1, ldc = N + 2;
      const auto a = randn(std::size_t(ta ? K : M) * lda), b = randn(std::size_t(tb ? N : K) * ldb);
      std::vector<double> ref(std::size_t(M) * N, 0.0);
      for (int i = 0; i < M; ++i)
        for (int k = 0; k < K; ++k) {
          const double av = ta ? a[std::size_t(k) * lda + i] : a[std::size_t(i) * lda + k];
          for (int j = 0; j < N; ++j)
            ref[std::size_t(i) * N + j] +=
                0.5 * av * double(tb ? b[std::size_t(j) * ldb + k] : b[std::size_t(k) * ldb + j]);
        }
      DeviceBuffer A(a), Bm(b);
      std::uint16_t *C16 = nullptr, *A16 = nullptr;
      const std::size_t a_rows = ta ? K : M, c_elems = std::size_t(M) * ldc;
      TTTLAB_CUDA_CHECK(
          cudaMalloc(reinterpret_cast<void**>(&C16), std::max<std::size_t>(c_elems, 1) * 2));
      TTTLAB_CUDA_CHECK(
          cudaMalloc(reinterpret_cast<void**>(&A16), std::max<std::size_t>(a_rows * lda, 1) * 2));
      if (K > 0) convert_to_bf16(A.get(), int(a_rows), ta ? M : K, lda, A16, lda, nullptr);
      for (bool given : {false, true}) {
        TTTLAB_CUDA_CHECK(
            cudaMemset(C16, 0xFF, std::max<std::size_t>(c_elems, 1) * 2));  // NaN patterns
        gemm.bf16_out(ta, tb, M, N, K, 0.5f, A.get(), lda, given ? A16 : nullptr, lda, Bm.get(),
                      ldb, nullptr, 0, C16, ldc);
        std::vector<std::uint16_t> c(c_elems);
        TTTLAB_CUDA_CHECK(cudaMemcpy(c.data(), C16, c_elems * 2, cudaMemcpyDeviceToHost));
        std::vector<float> got(std::size_t(M) * N);
        std::size_t padding_written = 0;
        for (int i = 0; i < M; ++i)
          for (int j = 0; j < ldc; ++j) {
            const std::uint16_t v = c[std::size_t(i) * ldc + j];
            if (j >= N)
              padding_written += v != 0xFFFF;
            else
              got[std::size_t(i) * N + j] = bf16_widened(v);
          }
        EXPECT_EQ(padding_written, 0u) << "bf16_out wrote outside its N columns";
        EXPECT_CLOSE((given ? "bf16_out, A given in bf16" : "bf16_out"), got, ref, 2e-2);
      }
      cudaFree(C16);
      cudaFree(A16);
    }
  EXPECT_THROW(Gemm(nullptr, GemmPrecision::Tf32)
                   .bf16_out(false, false, 1, 1, 1, 1.f, nullptr, 1, nullptr, 1, nullptr, 1,
                             nullptr, 1, nullptr, 1),
               std::logic_error);
}

// Gemm::batched against a plain fp64 product per batch entry: every engine and precision, the four
// transposes, padded leading dimensions, batch strides larger than an entry (gaps that must stay
// untouched), a stride of 0 (one operand shared by every entry), beta 0 and 1, and batch 1. The
// tolerances are the single product's (GemmAllTransposesEnginesAndPrecisions: the same roundings).
TEST_F(NnOps, GemmBatchedMatchesAProductPerEntry) {
  struct Shape {
    int M, N, K, batch;
    bool share_b;  // stride_b = 0
  };
  const std::vector<Shape> shapes = {{1, 1, 1, 1, false},   {64, 64, 64, 7, false}, {37, 5, 129, 3, true},
                                     {128, 16, 64, 12, false}, {16, 64, 128, 5, true}, {5, 6, 0, 2, false}};
  std::vector<std::unique_ptr<Gemm>> engines;
  for (GemmEngine engine : {GemmEngine::Cublas, GemmEngine::Builtin})
    for (GemmPrecision prec : {GemmPrecision::Fp32, GemmPrecision::Tf32, GemmPrecision::Bf16})
      engines.push_back(std::make_unique<Gemm>(nullptr, prec, engine));
  EXPECT_EQ(engines[0]->engine(), GemmEngine::Cublas) << "cuBLAS could not be loaded: " << engines[0]->describe();
  std::vector<double> worst(engines.size(), 0.0);
  for (const Shape& sh : shapes)
    for (int t = 0; t < 4; ++t) {
      const bool ta = t & 1, tb = t & 2;
      const int M = sh.M, N = sh.N, K = sh.K, nb = sh.batch;
      const int lda = (ta ? M : K) + 3, ldb = (tb ? K : N) + 1, ldc = N + 2;
      const long long sa = (long long)(ta ? K : M) * lda + 5;
      const long long sb = sh.share_b ? 0 : (long long)(tb ? N : K) * ldb + 1;
      const long long sc = (long long)M * ldc + 3;
      const auto a = randn(std::size_t(sa) * nb), b = randn(std::size_t(sh.share_b ? (tb ? N : K) * ldb : sb * nb));
      const auto c0 = randn(std::size_t(sc) * nb);
      for (std::size_t e = 0; e < engines.size(); ++e) {
        const Gemm& gemm = *engines[e];
        const bool cublas = gemm.engine() == GemmEngine::Cublas;
        const double tol = !cublas ? 1e-4 : gemm.precision() == GemmPrecision::Tf32 ? 5e-3
                                         : gemm.precision() == GemmPrecision::Bf16 ? 2e-2 : 1e-4;
        SCOPED_TRACE(gemm.describe() + " M=" + std::to_string(M) + " N=" + std::to_string(N) + " K=" +
                     std::to_string(K) + " batch=" + std::to_string(nb) + (ta ? " A^T" : "") + (tb ? " B^T" : "") +
                     (sh.share_b ? " B shared" : "") + " seed " + std::to_string(seed_));
        for (float beta : {0.f, 1.f}) {
          DeviceBuffer A(a), Bm(b), C(c0);
          gemm.batched(ta, tb, M, N, K, 0.5f, A.get(), lda, sa, Bm.get(), ldb, sb, beta, C.get(), ldc, sc, nb);
          const std::vector<float> got = C.download();
          std::vector<double> ref(c0.begin(), c0.end());  // the padding and the gaps stay as they were
          for (int z = 0; z < nb; ++z)
            for (int i = 0; i < M; ++i)
              for (int j = 0; j < N; ++j) {
                double acc = 0;
                for (int k = 0; k < K; ++k) {
                  const double av = ta ? a[z * sa + std::size_t(k) * lda + i] : a[z * sa + std::size_t(i) * lda + k];
                  const double bv = tb ? b[z * sb + std::size_t(j) * ldb + k] : b[z * sb + std::size_t(k) * ldb + j];
                  acc += av * bv;
                }
                const std::size_t o = z * sc + std::size_t(i) * ldc + j;
                ref[o] = 0.5 * acc + beta * c0[o];
              }
          const ErrorStat err = compare(got, ref);
          worst[e] = std::max(worst[e], err.rel);
          EXPECT_TRUE(within("gemm batched", err, tol, got, ref));
        }
      }
    }
  for (std::size_t e = 0; e < engines.size(); ++e) {
    std::printf("[ INFO     ] batched, %s: worst relative error %.2e\n", engines[e]->describe().c_str(), worst[e]);
    if (!(engines[e]->engine() == GemmEngine::Cublas && engines[e]->precision() != GemmPrecision::Fp32))
      worst_ = std::max(worst_, worst[e]);
  }
}

// The batched product's argument checks, on the host before any launch (a built-in Gemm needs no
// device to be made, and every call below is refused before it would launch): runs without a GPU.
TEST(GemmBatched, ArgumentsAreCheckedBeforeAnyLaunch) {
  const Gemm gemm(nullptr, GemmPrecision::Fp32, GemmEngine::Builtin);
  float x = 0;
  auto error_of = [&](auto call) {
    try {
      call();
    } catch (const std::invalid_argument& e) {
      return std::string(e.what());
    }
    return std::string("accepted");
  };
  auto call = [&](int M, int N, int K, int lda, long long sa, int ldb, long long sb, float* C, int ldc,
                  long long sc, int batch) {
    return error_of([&] { gemm.batched(false, false, M, N, K, 1.f, &x, lda, sa, &x, ldb, sb, 0.f, C, ldc, sc, batch); });
  };
  EXPECT_NE(call(-1, 4, 4, 4, 16, 4, 16, &x, 4, 16, 2).find("M, N, K"), std::string::npos);
  EXPECT_NE(call(4, 4, 4, 4, 16, 4, 16, &x, 4, 16, -1).find("batch"), std::string::npos);
  EXPECT_NE(call(4, 4, 4, 4, -16, 4, 16, &x, 4, 16, 2).find("strides"), std::string::npos);
  EXPECT_NE(call(4, 4, 4, 3, 16, 4, 16, &x, 4, 16, 2).find("lda"), std::string::npos);
  EXPECT_NE(call(4, 4, 4, 4, 16, 3, 16, &x, 4, 16, 2).find("ldb"), std::string::npos);
  EXPECT_NE(call(4, 4, 4, 4, 16, 4, 16, &x, 3, 16, 2).find("ldc"), std::string::npos);
  EXPECT_NE(call(4, 4, 4, 4, 16, 4, 16, nullptr, 4, 16, 2).find("null"), std::string::npos);
  EXPECT_NE(call(4, 4, 4, 4, 16, 4, 16, &x, 4, 15, 2).find("stride_c"), std::string::npos);
  EXPECT_NE(call(4, 4, 4, 4, 16, 4, 16, &x, 4, 16, 70000).find("65535"), std::string::npos);
  // Nothing to do: accepted without a launch.
  EXPECT_EQ(call(4, 4, 4, 4, 16, 4, 16, &x, 4, 16, 0), "accepted");
  EXPECT_EQ(call(0, 4, 4, 4, 16, 4, 16, &x, 4, 16, 3), "accepted");
}

TEST_F(NnOps, ConvertToBf16RoundsToNearestEvenOverStridedRows) {
  // Values that exercise the rounding: random normals, exact ties both ways, the largest finite
  // floats (which round to ±inf), subnormals, zeros of both signs, infinities and NaN.
  std::vector<float> special = {0.f, -0.f, 1.f, -1.f, 1.00390625f /* tie, rounds to even 1.0 */,
                                1.01171875f /* tie, rounds up */, 3.0e38f, -3.4028235e38f, 1e-40f, -1e-45f,
                                std::numeric_limits<float>::infinity(), -std::numeric_limits<float>::infinity(),
                                std::numeric_limits<float>::quiet_NaN(), 65504.f, 1.0f + 1.0f / 256.f, 0.1f};
  // (rows, cols, ld_src, ld_dst, src offset): the vector path (aligned, ld multiple of 4) and the
  // element path (odd strides, a src misaligned by one float), ragged row ends.
  const std::vector<std::array<int, 5>> cases = {{1, 1, 1, 1, 0},    {3, 16, 16, 16, 0}, {7, 13, 17, 16, 0},
                                                 {64, 64, 68, 72, 0}, {33, 40, 44, 40, 1}, {2, 1025, 1027, 1032, 0}};
  for (const auto& c : cases) {
    const int rows = c[0], cols = c[1], ld_src = c[2], ld_dst = c[3], off = c[4];
    SCOPED_TRACE("rows " + std::to_string(rows) + " cols " + std::to_string(cols) + " ld_src " + std::to_string(ld_src) +
                 " ld_dst " + std::to_string(ld_dst) + " offset " + std::to_string(off) + " seed " + std::to_string(seed_));
    std::vector<float> src = randn(std::size_t(rows) * ld_src + off, 3.0);
    for (std::size_t i = 0; i < special.size() && i < src.size() - off; ++i) src[off + i * 7 % (src.size() - off)] = special[i];
    DeviceBuffer S(src);
    const std::size_t dst_elems = std::size_t(rows) * ld_dst;
    std::uint16_t* D = nullptr;
    TTTLAB_CUDA_CHECK(cudaMalloc(reinterpret_cast<void**>(&D), dst_elems * 2 + 2));
    TTTLAB_CUDA_CHECK(cudaMemset(D, 0xab, dst_elems * 2 + 2));  // poison: columns past cols stay untouched
    convert_to_bf16(S.get() + off, rows, cols, ld_src, D, ld_dst, nullptr);
    std::vector<std::uint16_t> got(dst_elems);
    TTTLAB_CUDA_CHECK(cudaMemcpy(got.data(), D, dst_elems * 2, cudaMemcpyDeviceToHost));
    cudaFree(D);
    int mismatches = 0;
    for (int r = 0; r < rows; ++r)
      for (int j = 0; j < ld_dst; ++j) {
        const std::uint16_t g = got[std::size_t(r) * ld_dst + j];
        if (j >= cols) {
          if (g != 0xabab && ++mismatches <= 5) ADD_FAILURE() << "padding written at row " << r << " col " << j;
          continue;
        }
        const float x = src[off + std::size_t(r) * ld_src + j];
        const std::uint16_t want = bf16_bits_reference(x);
        const bool same = std::isnan(x) ? ((g & 0x7f80) == 0x7f80 && (g & 0x7f) != 0) : g == want;
        if (!same && ++mismatches <= 5)
          ADD_FAILURE() << "row " << r << " col " << j << ": " << x << " gave 0x" << std::hex << g << ", expected 0x" << want
                        << std::dec;
      }
    EXPECT_EQ(mismatches, 0);
  }
  EXPECT_THROW(convert_to_bf16(nullptr, 2, 4, 3, nullptr, 4, nullptr), std::invalid_argument);
}

}  // namespace
}  // namespace tttlab::kernels::test
