// tttlab/kernels/gemm.hpp — row-major fp32 matrix products on the GPU, through cuBLAS.
//
//   C[M, N] = alpha · op(A) · op(B) + beta · C        op(X) = X, or Xᵀ when the flag says so
//
// Every matrix is ROW-MAJOR (tttlab/tensor.hpp) with a leading dimension (the row stride, in
// elements): A is stored [M, K] (lda ≥ K), or [K, M] (lda ≥ M) when trans_a; B is stored [K, N]
// (ldb ≥ N), or [N, K] (ldb ≥ K) when trans_b; C is [M, N] (ldc ≥ N). beta = 0 overwrites C without
// reading it (NaN in C does not propagate).
//
// Engines. cuBLAS is loaded at run time (dlopen of libcublas.so.13), so the program carries no link
// dependency on it and still starts, and trains on the CPU, where CUDA is absent. Where the library
// cannot be loaded the products run on a plain tiled fp32 kernel of our own (the reason is kept in
// describe()). Precision, with fp32 storage and fp32 accumulation in both:
//   Fp32  CUBLAS_COMPUTE_32F: full fp32 products (the reference path of the tests)
//   Tf32  CUBLAS_COMPUTE_32F_FAST_TF32: operands rounded to tf32 (10-bit mantissa) on the tensor
//         cores, ~1e-3 relative error per product; the built-in kernel has no tf32 mode and stays fp32.
// cuBLAS gives bitwise-identical results run to run on one GPU model for one stream, so training
// steps built on it are deterministic.
//
// THREADING: a Gemm holds a cuBLAS handle bound to one stream; use it from one thread at a time.
// This header includes neither CUDA nor Eigen headers.
#pragma once

#include <memory>
#include <string>

struct CUstream_st;

namespace tttlab::kernels {

enum class GemmPrecision { Fp32, Tf32 };
enum class GemmEngine { Cublas, Builtin };

// "fp32" / "tf32"; the parser accepts the same words (std::invalid_argument otherwise).
const char* to_string(GemmPrecision p);
GemmPrecision parse_gemm_precision(const std::string& text);

class Gemm {
 public:
  // `engine` Cublas falls back to Builtin (with the reason in describe()) when the library cannot be
  // loaded; Builtin forces our kernel. Needs a current CUDA device.
  Gemm(CUstream_st* stream, GemmPrecision precision, GemmEngine engine = GemmEngine::Cublas);
  ~Gemm();
  Gemm(const Gemm&) = delete;
  Gemm& operator=(const Gemm&) = delete;

  // Asynchronous on the stream. Checks the shapes (M, N, K ≥ 0, leading dimensions as above) and
  // throws std::invalid_argument (one line) before launching; std::runtime_error on a library error.
  void operator()(bool trans_a, bool trans_b, int M, int N, int K, float alpha, const float* A,
                  int lda, const float* B, int ldb, float beta, float* C, int ldc) const;

  GemmEngine engine() const;
  GemmPrecision precision() const;
  // "cuBLAS 13.0.0, tf32" / "built-in fp32 kernel (cuBLAS not loaded: ...)".
  std::string describe() const;

 private:
  struct Impl;
  std::unique_ptr<Impl> m_impl;
};

// The matrix-product rate of the current device in TFLOP/s: the median of `repeats` n × n × n products
// (2n³ FLOPs each, after 3 untimed ones, CUDA events) through a Gemm of this precision on its own
// stream, and the fastest and slowest. The ceiling `tttlab bench --device cuda` compares whole-model
// steps with. Allocates 3n² floats for the call.
struct GemmRate {
  double median_tflops = 0, min_tflops = 0, max_tflops = 0;
  int n = 0, repeats = 0;
  std::string engine;  // Gemm::describe()
};
GemmRate measure_gemm_rate(GemmPrecision precision, int n = 4096, int repeats = 20);

}  // namespace tttlab::kernels
