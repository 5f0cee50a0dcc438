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
//   Bf16  bf16 operands (8 significant bits, rounded to nearest even), fp32 accumulation and fp32 C
//         (CUBLAS_COMPUTE_32F with CUDA_R_16BF inputs): ~4e-3 relative error per product, twice tf32's
//         tensor-core rate. operator() rounds its fp32 operands into bf16 copies on the stream first
//         (convert_to_bf16 below: 6 bytes of traffic per element, into scratch buffers the Gemm owns
//         and grows to the largest operand it has seen); Gemm::bf16 takes copies made beforehand, so
//         that an operand read by several products is rounded once. The built-in kernel has no bf16
//         mode and stays fp32.
// cuBLAS gives bitwise-identical results run to run on one GPU model for one stream, so training
// steps built on it are deterministic.
//
// THREADING: a Gemm holds a cuBLAS handle bound to one stream; use it from one thread at a time.
// This header includes neither CUDA nor Eigen headers.
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>

#include "tttlab/device.hpp"

struct CUstream_st;

namespace tttlab::kernels {

enum class GemmPrecision { Fp32, Tf32, Bf16 };
enum class GemmEngine { Cublas, Builtin };

// "fp32" / "tf32" / "bf16".
const char* to_string(GemmPrecision p);
// The precision a caller asked for in core's terms (tttlab/device.hpp; the command line and the app
// parse it there), as the GEMM library's.
GemmPrecision gemm_precision(GpuGemmPrecision p);

class Gemm {
 public:
  // `engine` Cublas falls back to Builtin (with the reason in describe()) when the library cannot be
  // loaded; Builtin forces our kernel. Needs a current CUDA device.
  Gemm(CUstream_st* stream, GemmPrecision precision, GemmEngine engine = GemmEngine::Cublas);
  ~Gemm();
  Gemm(const Gemm&) = delete;
  Gemm& operator=(const Gemm&) = delete;

  // Asynchronous on the stream. Checks the shapes (M, N, K ≥ 0, leading dimensions as above) and
  // throws std::invalid_argument (one line) before launching; std::runtime_error on a library error
  // (or, with Bf16, when its scratch buffers cannot be allocated).
  void operator()(bool trans_a, bool trans_b, int M, int N, int K, float alpha, const float* A,
                  int lda, const float* B, int ldb, float beta, float* C, int ldc) const;

  // `batch` independent products of the same shape, entry i reading A + i·stride_a, B + i·stride_b
  // and writing C + i·stride_c (strides in elements, ≥ 0; 0 reuses one operand for every entry),
  // each exactly as operator() with the same flags, leading dimensions, alpha and beta: cuBLAS's
  // cublasGemmStridedBatchedEx in the Gemm's precision (Bf16 rounds the operands into bf16 copies
  // first, as operator() does), or the built-in kernel with the batch on its grid's z dimension.
  // The entries' C must not overlap (stride_c ≥ the extent of one C, or batch = 1). One launch for
  // the whole batch. batch = 0, M = 0 or N = 0: nothing. Checks as operator() and batch ≥ 0,
  // strides ≥ 0, batch ≤ 65535 on the built-in kernel; std::invalid_argument (one line) first.
  void batched(bool trans_a, bool trans_b, int M, int N, int K, float alpha, const float* A, int lda,
               long long stride_a, const float* B, int ldb, long long stride_b, float beta, float* C,
               int ldc, long long stride_c, int batch) const;

  // The same product with bf16 operands given (Bf16 precision on cuBLAS only, else
  // std::logic_error): A16 / B16, when not null, are bf16 copies of the stored A / B made beforehand
  // (convert_to_bf16; row strides lda16 / ldb16); a null copy is rounded here from the fp32 operand
  // (A / B with lda / ldb), as operator() does.
  void bf16(bool trans_a, bool trans_b, int M, int N, int K, float alpha, const float* A, int lda,
            const std::uint16_t* A16, int lda16, const float* B, int ldb, const std::uint16_t* B16, int ldb16,
            float beta, float* C, int ldc) const;
  // The same product written in bf16: C16 [M, N] (row stride ldc16) = bf16(alpha · op(A)·op(B)), the
  // fp32 accumulator rounded once (to nearest even) as it is stored, C16 overwritten. For products
  // whose readers take bf16 values (the SwiGLU's pre-activations and its hidden state's gradient):
  // half the bytes written, and read back, of an fp32 C.
  void bf16_out(bool trans_a, bool trans_b, int M, int N, int K, float alpha, const float* A,
                int lda, const std::uint16_t* A16, int lda16, const float* B, int ldb,
                const std::uint16_t* B16, int ldb16, std::uint16_t* C16, int ldc16) const;

  // Gives cuBLAS `bytes` of device memory at `workspace` (256-byte aligned, owned by the caller and
  // kept alive as long as this Gemm) for its products' scratch, in place of its own pool: products
  // captured into a CUDA graph then allocate nothing during the capture. A no-op on the built-in
  // kernel, which needs none. Throws std::invalid_argument for a null or misaligned buffer,
  // std::runtime_error on a library error.
  void set_workspace(void* workspace, std::size_t bytes);

  GemmEngine engine() const;
  GemmPrecision precision() const;
  CUstream_st* stream() const;  // the stream the products run on
  // "cuBLAS 13.0.0, tf32 GEMMs" / "built-in fp32 GEMM kernel (cuBLAS not loaded: ...)".
  std::string describe() const;

 private:
  // bf16 and bf16_out: c_type is the cudaDataType of C (CUDA_R_32F or CUDA_R_16BF).
  void bf16_product(bool trans_a, bool trans_b, int M, int N, int K, float alpha, const float* A,
                    int lda, const std::uint16_t* A16, int lda16, const float* B, int ldb,
                    const std::uint16_t* B16, int ldb16, float beta, void* C, int c_type,
                    int ldc) const;
  void require_bf16_engine() const;  // std::logic_error unless Bf16 precision on cuBLAS
  struct Impl;
  std::unique_ptr<Impl> m_impl;
};

// dst[r·ld_dst + c] = bf16(src[r·ld_src + c]) for r < rows, c < cols: the rounding of the Bf16 products
// (round to nearest, ties to even; NaN stays NaN, values beyond bf16's range become ±inf as in any
// fp32 → bf16 cast). bf16 is stored as its 16 bits (the upper half of the fp32 bit pattern); columns
// cols..ld_dst−1 of dst are not written. Device pointers; asynchronous on `stream`. Needs rows, cols ≥ 0
// and ld_src, ld_dst ≥ cols (std::invalid_argument otherwise); std::runtime_error when the launch fails.
// Fastest with ld_src a multiple of 4 and ld_dst of 8 (16- and 8-byte aligned rows).
void convert_to_bf16(const float* src, int rows, int cols, int ld_src, std::uint16_t* dst, int ld_dst,
                     CUstream_st* stream);

// The matrix-product rate of the current device in TFLOP/s: the median of `repeats` n × n × n products
// (2n³ FLOPs each, after 3 untimed ones, CUDA events) through a Gemm of this precision on its own
// stream, and the fastest and slowest. The ceiling `tttlab bench --device cuda` compares whole-model
// steps with; for Bf16 it includes the rounding of both operands, as every product of a step pays it.
// Allocates 3n² floats for the call.
struct GemmRate {
  double median_tflops = 0, min_tflops = 0, max_tflops = 0;
  int n = 0, repeats = 0;
  std::string engine;  // Gemm::describe()
};
GemmRate measure_gemm_rate(GemmPrecision precision, int n = 4096, int repeats = 20);

}  // namespace tttlab::kernels
