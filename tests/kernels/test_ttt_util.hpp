// Helpers of the TTT kernel tests: device buffers, random inputs of a whole batch, the CPU engine
// (fp64) run head by head on the same inputs, and error measures.
#pragma once

#include <cuda_runtime_api.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <random>
#include <string>
#include <vector>

#include "common/cuda_check.hpp"
#include "require_gpu.hpp"
#include "tttlab/kernels/cuda_device.hpp"
#include "tttlab/kernels/ttt.hpp"
#include "tttlab/ttt/inner.hpp"
#include "tttlab/ttt/inner_backward.hpp"

namespace tttlab::kernels::test {

// TTTLAB_GPU_TEST_QUICK=1 (used under compute-sanitizer, which slows kernels 10-100×) shrinks the
// shape grids to a representative few.
inline bool quick_mode() {
  const char* v = std::getenv("TTTLAB_GPU_TEST_QUICK");
  return v && *v && std::string(v) != "0";
}

// The seed of a test's random inputs. Fixed by default: a hash (FNV-1a) of the running test's
// "Suite.Name", so every run draws the same inputs and a failure replays as it is. Override with
// TTTLAB_TEST_SEED=<number>, or TTTLAB_TEST_SEED=random for a fresh draw. Tests print the seed with
// any failure (SCOPED_TRACE).
inline std::uint64_t test_seed() {
  if (const char* v = std::getenv("TTTLAB_TEST_SEED"); v && *v) {
    if (std::string(v) == "random")
      return (std::uint64_t(std::random_device{}()) << 32) ^ std::random_device{}();
    return std::strtoull(v, nullptr, 10);
  }
  const ::testing::TestInfo* info = ::testing::UnitTest::GetInstance()->current_test_info();
  const std::string name =
      info ? std::string(info->test_suite_name()) + "." + info->name() : std::string("tttlab");
  std::uint64_t h = 1469598103934665603ull;
  for (unsigned char ch : name) h = (h ^ ch) * 1099511628211ull;
  return h;
}

}  // namespace tttlab::kernels::test

// The start of a test that needs the GPU and random inputs: TTTLAB_REQUIRE_GPU(), then `seed`
// (test_seed()) and `rng` seeded with it, the seed shown with every failure of the test. A macro,
// because the skip returns from the test body and the trace lasts to the end of its scope.
#define TTTLAB_SEEDED_GPU_TEST()                                       \
  TTTLAB_REQUIRE_GPU();                                                \
  const std::uint64_t seed = ::tttlab::kernels::test::test_seed();     \
  SCOPED_TRACE("seed " + std::to_string(seed));                        \
  std::mt19937_64 rng(seed)

namespace tttlab::kernels::test {

// fp32 → bf16 of the host, bit for bit: round to nearest, ties to even, on the bit pattern.
inline std::uint16_t bf16_bits_reference(float f) {
  std::uint32_t u = 0;
  std::memcpy(&u, &f, 4);
  if (std::isnan(f)) return static_cast<std::uint16_t>((u >> 16) | 0x40);  // quiet, sign kept
  const std::uint32_t lsb = (u >> 16) & 1u;
  return static_cast<std::uint16_t>((u + 0x7fffu + lsb) >> 16);
}

// bf16 pattern arrays on the device, compared as bit patterns.
inline std::vector<std::uint16_t> download16(const std::uint16_t* p, std::size_t n) {
  std::vector<std::uint16_t> h(n);
  TTTLAB_CUDA_CHECK(cudaMemcpy(h.data(), p, n * sizeof(std::uint16_t), cudaMemcpyDeviceToHost));
  return h;
}

// bf16 bit pattern → fp32 (exact).
inline float bf16_to_float(std::uint16_t b) {
  const std::uint32_t u = std::uint32_t(b) << 16;
  float f = 0;
  std::memcpy(&f, &u, 4);
  return f;
}

// x rounded to bf16: the bit patterns in `bits` (for a bf16 input) and their fp32 values (for the
// CPU reference, which then sees exactly what the kernel reads).
inline std::vector<float> rounded_to_bf16(const std::vector<float>& x,
                                          std::vector<std::uint16_t>& bits) {
  std::vector<float> r(x.size());
  bits.resize(x.size());
  for (std::size_t i = 0; i < x.size(); ++i) {
    bits[i] = bf16_bits_reference(x[i]);
    r[i] = bf16_to_float(bits[i]);
  }
  return r;
}

// One device allocation of bf16 bit patterns; poisoned with NaN (all bits set) on request.
class DeviceBuffer16 {
 public:
  explicit DeviceBuffer16(std::size_t n) : n_(n) {
    if (n) TTTLAB_CUDA_CHECK(cudaMalloc(reinterpret_cast<void**>(&p_), n * sizeof(std::uint16_t)));
  }
  explicit DeviceBuffer16(const std::vector<std::uint16_t>& host) : DeviceBuffer16(host.size()) {
    if (n_)
      TTTLAB_CUDA_CHECK(
          cudaMemcpy(p_, host.data(), n_ * sizeof(std::uint16_t), cudaMemcpyHostToDevice));
  }
  ~DeviceBuffer16() {
    if (p_) cudaFree(p_);
  }
  DeviceBuffer16(const DeviceBuffer16&) = delete;
  DeviceBuffer16& operator=(const DeviceBuffer16&) = delete;
  std::uint16_t* get() const { return p_; }
  std::vector<std::uint16_t> download() const {
    TTTLAB_CUDA_CHECK(cudaDeviceSynchronize());
    return download16(p_, n_);
  }
  void poison() {
    if (n_) TTTLAB_CUDA_CHECK(cudaMemset(p_, 0xFF, n_ * sizeof(std::uint16_t)));
  }

 private:
  std::uint16_t* p_ = nullptr;
  std::size_t n_ = 0;
};

// One device allocation of floats; poisoned with NaN (all bits set) on request.
class DeviceBuffer {
 public:
  DeviceBuffer() = default;
  explicit DeviceBuffer(std::size_t n) : n_(n) {
    if (n) TTTLAB_CUDA_CHECK(cudaMalloc(reinterpret_cast<void**>(&p_), n * sizeof(float)));
  }
  explicit DeviceBuffer(const std::vector<float>& host) : DeviceBuffer(host.size()) { upload(host); }
  ~DeviceBuffer() {
    if (p_) cudaFree(p_);
  }
  DeviceBuffer(DeviceBuffer&& o) noexcept : p_(o.p_), n_(o.n_) {
    o.p_ = nullptr;
    o.n_ = 0;
  }
  DeviceBuffer& operator=(DeviceBuffer&& o) noexcept {
    std::swap(p_, o.p_);
    std::swap(n_, o.n_);
    return *this;
  }
  DeviceBuffer(const DeviceBuffer&) = delete;
  DeviceBuffer& operator=(const DeviceBuffer&) = delete;

  float* get() const { return p_; }
  std::size_t size() const { return n_; }
  void upload(const std::vector<float>& host) {
    if (host.size() != n_) throw std::invalid_argument("DeviceBuffer::upload: size mismatch");
    if (n_)
      TTTLAB_CUDA_CHECK(cudaMemcpy(p_, host.data(), n_ * sizeof(float), cudaMemcpyHostToDevice));
  }
  std::vector<float> download() const {
    std::vector<float> h(n_);
    TTTLAB_CUDA_CHECK(cudaDeviceSynchronize());
    if (n_)
      TTTLAB_CUDA_CHECK(cudaMemcpy(h.data(), p_, n_ * sizeof(float), cudaMemcpyDeviceToHost));
    return h;
  }
  void poison() {
    if (n_) TTTLAB_CUDA_CHECK(cudaMemset(p_, 0xFF, n_ * sizeof(float)));
  }

 private:
  float* p_ = nullptr;
  std::size_t n_ = 0;
};

// Random inputs of one batch in the kernels' layouts (float, as uploaded), drawn so that the inner
// loop is well conditioned and realistic: λ = σ(u)/d like the official η gate at η_base = 1, τ_i =
// 1/i + small noise, γ ≈ 1, W0 ~ N(0, 1/d).
struct LinearInputs {
  TttDims dims;
  TttOptions opt;
  std::vector<float> Q, K, V, lam, tau, gamma, beta, W0, b0;
};

inline std::vector<float> randn_vec(std::size_t n, std::mt19937_64& rng, double std, double mean = 0) {
  std::normal_distribution<double> nd(mean, std);
  std::vector<float> v(n);
  for (auto& x : v) x = float(nd(rng));
  return v;
}

inline LinearInputs random_linear_inputs(const TttDims& D, const TttOptions& opt,
                                         std::mt19937_64& rng, bool per_sequence_init = false) {
  LinearInputs in;
  in.dims = D;
  in.opt = opt;
  const std::size_t act = std::size_t(D.batch) * D.seq_len * D.heads * D.head_dim;
  const int d = D.head_dim;
  in.Q = randn_vec(act, rng, 1.0);
  in.K = randn_vec(act, rng, 1.0);
  in.V = randn_vec(act, rng, 1.0);
  std::normal_distribution<double> nd(0.0, 1.0);
  in.lam.resize(std::size_t(D.batch) * D.heads * D.seq_len);
  for (auto& x : in.lam) x = float(1.0 / (1.0 + std::exp(-nd(rng))) / d);
  in.tau.resize(D.mini_batch);
  std::uniform_real_distribution<double> ud(-0.1, 0.1);
  for (int i = 0; i < D.mini_batch; ++i) in.tau[i] = float(1.0 / (i + 1) + ud(rng) / (i + 1));
  in.gamma = randn_vec(std::size_t(D.heads) * d, rng, 0.1, 1.0);
  in.beta = randn_vec(std::size_t(D.heads) * d, rng, 0.1);
  const std::size_t states = per_sequence_init ? std::size_t(D.batch) * D.heads : D.heads;
  in.W0 = randn_vec(states * d * d, rng, 1.0 / std::sqrt(double(d)));
  in.b0 = randn_vec(states * d, rng, 0.1);
  return in;
}

// One decode token of every sequence of a batch on the device, q, k, v [B, H·d] and λ [B, H], with
// the batch's τ, γ, β and the step's output o [B, H·d]: what a decode step of either model reads
// besides its state.
struct DecodeTokenBuffers {
  DeviceBuffer q, k, v, lam, o;
  const DeviceBuffer tau, gam, bet;
  explicit DecodeTokenBuffers(const LinearInputs& in)
      : q(std::size_t(in.dims.batch) * in.dims.heads * in.dims.head_dim),
        k(q.size()),
        v(q.size()),
        lam(std::size_t(in.dims.batch) * in.dims.heads),
        o(q.size()),
        tau(in.tau),
        gam(in.gamma),
        bet(in.beta) {}
  // Uploads token t of every sequence of in and poisons o.
  void upload(const LinearInputs& in, int t) {
    const TttDims& D = in.dims;
    const std::size_t HD = std::size_t(D.heads) * D.head_dim;
    std::vector<float> hq, hk, hv, hl;
    for (int n = 0; n < D.batch; ++n) {
      const std::size_t r0 = (std::size_t(n) * D.seq_len + t) * HD;
      hq.insert(hq.end(), in.Q.begin() + r0, in.Q.begin() + r0 + HD);
      hk.insert(hk.end(), in.K.begin() + r0, in.K.begin() + r0 + HD);
      hv.insert(hv.end(), in.V.begin() + r0, in.V.begin() + r0 + HD);
      for (int h = 0; h < D.heads; ++h)
        hl.push_back(in.lam[(std::size_t(n) * D.heads + h) * D.seq_len + t]);
    }
    q.upload(hq);
    k.upload(hk);
    v.upload(hv);
    lam.upload(hl);
    o.poison();
  }
  // The decode inputs of the token uploaded last, with in's dims and options.
  TttDecodeInputs inputs(const LinearInputs& in) const {
    return {in.dims, in.opt, q.get(), k.get(), v.get(), lam.get(), tau.get(), gam.get(), bet.get()};
  }
};

inline InnerOptions inner_options(const TttOptions& o, const TttDims& D, InnerModel model) {
  InnerOptions io;
  io.model = model;
  io.mini_batch = D.mini_batch;
  io.layer_norm = o.layer_norm;
  io.residual = o.residual;
  io.bias = o.bias;
  io.ln_eps = o.ln_eps;
  return io;
}

// Head h of sequence n of a [B, T, H·d] buffer, as a [T, d] matrix in double.
inline Mat<double> head_slice(const std::vector<float>& x, const TttDims& D, int n, int h,
                              int t0 = 0, int len = -1) {
  if (len < 0) len = D.seq_len - t0;
  const int d = D.head_dim;
  Mat<double> m(len, d);
  for (int t = 0; t < len; ++t)
    for (int c = 0; c < d; ++c)
      m(t, c) = x[(std::size_t(n) * D.seq_len + t0 + t) * D.heads * d + std::size_t(h) * d + c];
  return m;
}

inline Vec<double> lambda_slice(const std::vector<float>& lam, const TttDims& D, int n, int h,
                                int t0 = 0, int len = -1) {
  if (len < 0) len = D.seq_len - t0;
  Vec<double> v(len);
  for (int t = 0; t < len; ++t) v(t) = lam[(std::size_t(n) * D.heads + h) * D.seq_len + t0 + t];
  return v;
}

inline Mat<double> mat_at(const std::vector<float>& x, std::size_t offset, int rows, int cols) {
  Mat<double> m(rows, cols);
  for (int i = 0; i < rows; ++i)
    for (int j = 0; j < cols; ++j) m(i, j) = x[offset + std::size_t(i) * cols + j];
  return m;
}

inline RowVec<double> row_at(const std::vector<float>& x, std::size_t offset, int n) {
  RowVec<double> r(n);
  for (int i = 0; i < n; ++i) r(i) = x[offset + i];
  return r;
}

inline InnerHeadParams<double> head_params(const LinearInputs& in, int h) {
  const int d = in.dims.head_dim;
  InnerHeadParams<double> hp;
  hp.ln_weight = row_at(in.gamma, std::size_t(h) * d, d);
  hp.ln_bias = row_at(in.beta, std::size_t(h) * d, d);
  hp.tau.resize(in.dims.mini_batch);
  for (int i = 0; i < in.dims.mini_batch; ++i) hp.tau(i) = in.tau[i];
  return hp;
}

// "B=2 H=3 T=64 d=32 b=16 ln res bias": a case's name for SCOPED_TRACE.
inline std::string describe(const TttDims& D, const TttOptions& o) {
  return "B=" + std::to_string(D.batch) + " H=" + std::to_string(D.heads) +
         " T=" + std::to_string(D.seq_len) + " d=" + std::to_string(D.head_dim) +
         " b=" + std::to_string(D.mini_batch) + (o.layer_norm ? " ln" : " no-ln") +
         (o.residual ? " res" : " no-res") + (o.bias ? " bias" : " no-bias");
}

// The same as a parameterised test's name (letters, digits and underscores only):
// "B2_H3_T64_d32_b16_ln_res_bias", "..._noln_nores_nobias".
inline std::string param_name(const TttDims& D, const TttOptions& o) {
  return "B" + std::to_string(D.batch) + "_H" + std::to_string(D.heads) + "_T" +
         std::to_string(D.seq_len) + "_d" + std::to_string(D.head_dim) + "_b" +
         std::to_string(D.mini_batch) + (o.layer_norm ? "_ln" : "_noln") +
         (o.residual ? "_res" : "_nores") + (o.bias ? "_bias" : "_nobias");
}

// Option combination f ∈ 0..7: bit 0 turns layer_norm off, bit 1 residual, bit 2 bias (f = 0 is
// all on).
inline TttOptions flags(int f) {
  TttOptions o;
  o.layer_norm = !(f & 1);
  o.residual = !(f & 2);
  o.bias = !(f & 4);
  return o;
}

// Puts head h of sequence n's CPU-engine gradients (one head, any inner model) into the kernels'
// layouts: dQ, dK, dV [B, T, H·d] and dλ [B, H, T] are set; dτ [b] and dγ, dβ [H, d] are shared
// over the batch, so they are added to. The vectors are sized by the caller.
template <class S>
void add_head_grads(const InnerGrads<S>& gr, const TttDims& D, int n, int h,
                    std::vector<double>& dQ, std::vector<double>& dK, std::vector<double>& dV,
                    std::vector<double>& dlam, std::vector<double>& dtau,
                    std::vector<double>& dgam, std::vector<double>& dbet) {
  const int d = D.head_dim;
  for (int t = 0; t < D.seq_len; ++t) {
    for (int c = 0; c < d; ++c) {
      const std::size_t e = (std::size_t(n) * D.seq_len + t) * D.heads * d + std::size_t(h) * d + c;
      dQ[e] = gr.dQ(t, c);
      dK[e] = gr.dK(t, c);
      dV[e] = gr.dV(t, c);
    }
    dlam[(std::size_t(n) * D.heads + h) * D.seq_len + t] = gr.dlambda(t);
  }
  for (int i = 0; i < D.mini_batch; ++i) dtau[i] += gr.dtau(i);
  for (int c = 0; c < d; ++c) {
    dgam[std::size_t(h) * d + c] += gr.dln_weight(c);
    dbet[std::size_t(h) * d + c] += gr.dln_bias(c);
  }
}

// Error of a GPU result against an fp64 reference, relative to max|ref| (at least `floor`), with a
// count of non-finite GPU values; "worst" names the first worst element for the failure message.
struct ErrorStat {
  double max_abs_err = 0, max_ref = 0, rel = 0;
  std::size_t worst = 0, nonfinite = 0;
};

inline ErrorStat compare(const std::vector<float>& got, const std::vector<double>& ref,
                         double floor = 1e-30) {
  ErrorStat e;
  for (std::size_t i = 0; i < ref.size(); ++i) e.max_ref = std::max(e.max_ref, std::abs(ref[i]));
  for (std::size_t i = 0; i < ref.size(); ++i) {
    if (!std::isfinite(got[i])) {
      ++e.nonfinite;
      continue;
    }
    const double err = std::abs(double(got[i]) - ref[i]);
    if (err > e.max_abs_err) {
      e.max_abs_err = err;
      e.worst = i;
    }
  }
  e.rel = e.max_abs_err / std::max(e.max_ref, floor);
  return e;
}

inline ::testing::AssertionResult within(const char* what, const ErrorStat& e, double tol,
                                         const std::vector<float>& got,
                                         const std::vector<double>& ref) {
  if (e.nonfinite == 0 && e.rel <= tol) return ::testing::AssertionSuccess();
  auto r = ::testing::AssertionFailure();
  r << what << ": ";
  if (e.nonfinite) r << e.nonfinite << " non-finite (unwritten or NaN) values; ";
  r << "max |gpu - ref| = " << e.max_abs_err << " = " << e.rel << " x max|ref| (" << e.max_ref
    << "), tolerance " << tol;
  if (!ref.empty() && e.nonfinite == 0)
    r << "; worst at " << e.worst << ": gpu " << got[e.worst] << " ref " << ref[e.worst];
  return r;
}

// EXPECTs `got` within `tol` (relative to max|ref|) of the fp64 reference `ref`; raises `worst` to
// the relative error found. max|ref| is floored at 1e-6 so that an output that is exactly zero
// (db0 with bias off, dγ with layer_norm off) is compared in absolute terms.
inline void expect_within(const char* what, const std::vector<float>& got,
                          const std::vector<double>& ref, double tol, double& worst) {
  const ErrorStat e = compare(got, ref, 1e-6);
  EXPECT_TRUE(within(what, e, tol, got, ref));
  worst = std::max(worst, e.rel);
}

}  // namespace tttlab::kernels::test
