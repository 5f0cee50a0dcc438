// Row-major fp32 GEMM through cuBLAS loaded at run time, or our own kernel (see tttlab/kernels/gemm.hpp).
#include "tttlab/kernels/gemm.hpp"

#include <cublas_api.h>
#include <cuda_runtime_api.h>
#include <dlfcn.h>

#include <algorithm>
#include <cstdint>
#include <cstdlib>
#include <limits>
#include <mutex>
#include <stdexcept>
#include <string>
#include <vector>

#include "common/cuda_check.hpp"
#include "tttlab/kernels/nn_ops.hpp"

namespace tttlab::kernels {
namespace {

// The few entry points we use, with the signatures of cublas_api.h (CUDA 13). Declared here rather
// than through decltype because cublas_api.h overloads cublasGemmEx in C++.
using CreateFn = cublasStatus_t (*)(cublasHandle_t*);
using DestroyFn = cublasStatus_t (*)(cublasHandle_t);
using SetStreamFn = cublasStatus_t (*)(cublasHandle_t, cudaStream_t);
using GetVersionFn = cublasStatus_t (*)(cublasHandle_t, int*);
using SetWorkspaceFn = cublasStatus_t (*)(cublasHandle_t, void*, std::size_t);
using GemmExFn = cublasStatus_t (*)(cublasHandle_t, cublasOperation_t, cublasOperation_t, int, int, int,
                                    const void*, const void*, cudaDataType, int, const void*, cudaDataType, int,
                                    const void*, void*, cudaDataType, int, cublasComputeType_t, cublasGemmAlgo_t);
using GemmStridedBatchedExFn = cublasStatus_t (*)(cublasHandle_t, cublasOperation_t, cublasOperation_t, int, int,
                                                  int, const void*, const void*, cudaDataType, int, long long,
                                                  const void*, cudaDataType, int, long long, const void*, void*,
                                                  cudaDataType, int, long long, int, cublasComputeType_t,
                                                  cublasGemmAlgo_t);

struct CublasLibrary {
  void* handle = nullptr;
  CreateFn create = nullptr;
  DestroyFn destroy = nullptr;
  SetStreamFn set_stream = nullptr;
  GetVersionFn get_version = nullptr;
  SetWorkspaceFn set_workspace = nullptr;
  GemmExFn gemm_ex = nullptr;
  GemmStridedBatchedExFn gemm_strided_batched_ex = nullptr;
  std::string error;  // why it is not loaded
};

// Loaded once per process and never unloaded (handles may outlive any one Gemm).
const CublasLibrary& cublas_library() {
  static CublasLibrary lib;
  static std::once_flag once;
  std::call_once(once, [] {
    std::string tried;
    // TTTLAB_CUBLAS names a library file explicitly; otherwise the loader's search path, then the
    // toolkit's usual place.
    const char* env = std::getenv("TTTLAB_CUBLAS");
    const char* candidates[] = {env, "libcublas.so.13", "/usr/local/cuda/lib64/libcublas.so.13", "libcublas.so"};
    for (const char* name : candidates) {
      if (!name || !*name) continue;
      lib.handle = dlopen(name, RTLD_NOW | RTLD_LOCAL);
      if (lib.handle) break;
      const char* e = dlerror();
      tried += std::string(tried.empty() ? "" : "; ") + (e ? e : name);
    }
    if (!lib.handle) {
      lib.error = "libcublas.so.13 not found (" + tried + ")";
      return;
    }
    auto sym = [&](const char* name) {
      void* p = dlsym(lib.handle, name);
      if (!p && lib.error.empty()) lib.error = std::string("libcublas has no symbol ") + name;
      return p;
    };
    lib.create = reinterpret_cast<CreateFn>(sym("cublasCreate_v2"));
    lib.destroy = reinterpret_cast<DestroyFn>(sym("cublasDestroy_v2"));
    lib.set_stream = reinterpret_cast<SetStreamFn>(sym("cublasSetStream_v2"));
    lib.get_version = reinterpret_cast<GetVersionFn>(sym("cublasGetVersion_v2"));
    lib.set_workspace = reinterpret_cast<SetWorkspaceFn>(sym("cublasSetWorkspace_v2"));
    lib.gemm_ex = reinterpret_cast<GemmExFn>(sym("cublasGemmEx"));
    lib.gemm_strided_batched_ex =
        reinterpret_cast<GemmStridedBatchedExFn>(sym("cublasGemmStridedBatchedEx"));
  });
  return lib;
}

std::string status_text(cublasStatus_t s) { return "cuBLAS status " + std::to_string(static_cast<int>(s)); }

}  // namespace

const char* to_string(GemmPrecision p) {
  constexpr const char* kNames[] = {"fp32", "tf32", "bf16"};  // in GemmPrecision's order
  const auto i = static_cast<std::size_t>(p);
  return i < std::size(kNames) ? kNames[i] : "?";
}

GemmPrecision gemm_precision(GpuGemmPrecision p) {
  // Indexed by GpuGemmPrecision.
  constexpr GemmPrecision kOf[] = {GemmPrecision::Tf32, GemmPrecision::Fp32, GemmPrecision::Bf16};
  return kOf[static_cast<std::size_t>(p)];
}

namespace {

// A device buffer of bf16 values (as 16-bit patterns) that only grows, stream-ordered: the old
// buffer is freed after the products already queued on the stream that read it.
struct Bf16Scratch {
  std::uint16_t* data = nullptr;
  std::size_t capacity = 0;  // elements

  Bf16Scratch() = default;
  Bf16Scratch(const Bf16Scratch&) = delete;
  Bf16Scratch& operator=(const Bf16Scratch&) = delete;

  std::uint16_t* reserve(std::size_t n, cudaStream_t stream) {
    if (n <= capacity) return data;
    const std::size_t grown = std::max(n, capacity + capacity / 2);
    std::uint16_t* fresh = nullptr;
    TTTLAB_CUDA_CHECK(cudaMallocAsync(reinterpret_cast<void**>(&fresh), grown * sizeof(std::uint16_t), stream));
    if (data) cudaFreeAsync(data, stream);
    data = fresh;
    capacity = grown;
    return data;
  }
  ~Bf16Scratch() {
    if (data) cudaFree(data);  // waits for the device: the stream may already be gone
  }
};

// A row stride that keeps every bf16 row 16-byte aligned, as cuBLAS's tensor-core kernels prefer.
int padded_bf16_stride(int cols) { return (cols + 7) / 8 * 8; }

}  // namespace

struct Gemm::Impl {
  cudaStream_t stream = nullptr;
  GemmPrecision precision = GemmPrecision::Tf32;
  GemmEngine engine = GemmEngine::Builtin;
  cublasHandle_t handle = nullptr;
  std::string note;
  int version = 0;
  Bf16Scratch a16, b16;  // the operands rounded to bf16 (Bf16 only)
};

Gemm::Gemm(CUstream_st* stream, GemmPrecision precision, GemmEngine engine) : m_impl(std::make_unique<Impl>()) {
  m_impl->stream = stream;
  m_impl->precision = precision;
  if (engine == GemmEngine::Builtin) {
    m_impl->note = "chosen";
    return;
  }
  const CublasLibrary& lib = cublas_library();
  if (!lib.error.empty()) {
    m_impl->note = "cuBLAS not loaded: " + lib.error;
    return;
  }
  cublasHandle_t h = nullptr;
  const cublasStatus_t s = lib.create(&h);
  if (s != CUBLAS_STATUS_SUCCESS) {
    m_impl->note = "cublasCreate failed: " + status_text(s);
    return;
  }
  if (lib.set_stream(h, stream) != CUBLAS_STATUS_SUCCESS) {
    lib.destroy(h);
    m_impl->note = "cublasSetStream failed";
    return;
  }
  lib.get_version(h, &m_impl->version);
  m_impl->handle = h;
  m_impl->engine = GemmEngine::Cublas;
}

Gemm::~Gemm() {
  if (m_impl && m_impl->handle) cublas_library().destroy(m_impl->handle);
}

void Gemm::set_workspace(void* workspace, std::size_t bytes) {
  if (m_impl->engine != GemmEngine::Cublas) return;
  if (bytes > 0 && (!workspace || reinterpret_cast<std::uintptr_t>(workspace) % 256 != 0))
    throw std::invalid_argument("gemm: a workspace must be non-null and 256-byte aligned");
  const cublasStatus_t s = cublas_library().set_workspace(m_impl->handle, workspace, bytes);
  if (s != CUBLAS_STATUS_SUCCESS)
    throw std::runtime_error("cublasSetWorkspace failed (" + status_text(s) + ")");
}

GemmEngine Gemm::engine() const { return m_impl->engine; }
GemmPrecision Gemm::precision() const { return m_impl->precision; }
CUstream_st* Gemm::stream() const { return m_impl->stream; }

std::string Gemm::describe() const {
  if (m_impl->engine == GemmEngine::Cublas) {
    const int v = m_impl->version;
    return "cuBLAS " + std::to_string(v / 10000) + "." + std::to_string(v / 100 % 100) + "." +
           std::to_string(v % 100) + ", " +
           (m_impl->precision == GemmPrecision::Bf16 ? std::string("bf16 GEMMs (bf16 operands, fp32 accumulation)")
                                                     : std::string(to_string(m_impl->precision)) + " GEMMs");
  }
  return "built-in fp32 GEMM kernel (" + m_impl->note + ")";
}

void Gemm::operator()(bool trans_a, bool trans_b, int M, int N, int K, float alpha, const float* A, int lda,
                      const float* B, int ldb, float beta, float* C, int ldc) const {
  auto bad = [](const std::string& m) { throw std::invalid_argument("gemm: " + m); };
  if (M < 0 || N < 0 || K < 0) bad("M, N, K must be >= 0");
  if (M == 0 || N == 0) return;
  if (ldc < N) bad("ldc (" + std::to_string(ldc) + ") < N (" + std::to_string(N) + ")");
  if (lda < (trans_a ? M : K) || lda < 1) bad("lda (" + std::to_string(lda) + ") too small");
  if (ldb < (trans_b ? K : N) || ldb < 1) bad("ldb (" + std::to_string(ldb) + ") too small");
  if (!C || (K > 0 && (!A || !B))) bad("a matrix pointer is null");
  if (m_impl->engine == GemmEngine::Builtin) {
    gemm_builtin(trans_a, trans_b, M, N, K, alpha, A, lda, B, ldb, beta, C, ldc, m_impl->stream);
    return;
  }
  // Row-major C = op(A)·op(B) is column-major Cᵀ = op(B)ᵀ·op(A)ᵀ: the operands swap places and the
  // stored buffers are read as their own transposes, so each keeps its flag.
  if (m_impl->precision == GemmPrecision::Bf16 && K > 0) {
    bf16(trans_a, trans_b, M, N, K, alpha, A, lda, nullptr, 0, B, ldb, nullptr, 0, beta, C, ldc);
    return;
  }
  const cublasStatus_t s = cublas_library().gemm_ex(
      m_impl->handle, trans_b ? CUBLAS_OP_T : CUBLAS_OP_N, trans_a ? CUBLAS_OP_T : CUBLAS_OP_N, N, M, K, &alpha, B,
      CUDA_R_32F, ldb, A, CUDA_R_32F, lda, &beta, C, CUDA_R_32F, ldc,
      m_impl->precision == GemmPrecision::Tf32 ? CUBLAS_COMPUTE_32F_FAST_TF32 : CUBLAS_COMPUTE_32F,
      CUBLAS_GEMM_DEFAULT);
  if (s != CUBLAS_STATUS_SUCCESS)
    throw std::runtime_error("cublasGemmEx failed (" + status_text(s) + ") at M=" + std::to_string(M) +
                             " N=" + std::to_string(N) + " K=" + std::to_string(K));
}

void Gemm::batched(bool trans_a, bool trans_b, int M, int N, int K, float alpha, const float* A, int lda,
                   long long stride_a, const float* B, int ldb, long long stride_b, float beta, float* C,
                   int ldc, long long stride_c, int batch) const {
  auto bad = [](const std::string& m) { throw std::invalid_argument("gemm (batched): " + m); };
  if (M < 0 || N < 0 || K < 0) bad("M, N, K must be >= 0");
  if (batch < 0) bad("batch must be >= 0");
  if (stride_a < 0 || stride_b < 0 || stride_c < 0) bad("strides must be >= 0");
  if (M == 0 || N == 0 || batch == 0) return;
  if (ldc < N) bad("ldc (" + std::to_string(ldc) + ") < N (" + std::to_string(N) + ")");
  if (lda < (trans_a ? M : K) || lda < 1) bad("lda (" + std::to_string(lda) + ") too small");
  if (ldb < (trans_b ? K : N) || ldb < 1) bad("ldb (" + std::to_string(ldb) + ") too small");
  if (!C || (K > 0 && (!A || !B))) bad("a matrix pointer is null");
  if (batch > 1 && stride_c < (long long)(M - 1) * ldc + N) bad("stride_c is smaller than one C: entries overlap");
  if (m_impl->engine == GemmEngine::Builtin) {
    if (batch > 65535) bad("batch (" + std::to_string(batch) + ") > 65535 on the built-in kernel");
    gemm_builtin_batched(trans_a, trans_b, M, N, K, alpha, A, lda, stride_a, B, ldb, stride_b, beta, C, ldc,
                         stride_c, batch, m_impl->stream);
    return;
  }
  const void* a_ptr = A;
  const void* b_ptr = B;
  cudaDataType in_type = CUDA_R_32F;
  cublasComputeType_t compute =
      m_impl->precision == GemmPrecision::Tf32 ? CUBLAS_COMPUTE_32F_FAST_TF32 : CUBLAS_COMPUTE_32F;
  if (m_impl->precision == GemmPrecision::Bf16 && K > 0) {
    // Each operand's batch rounded as one [batch, span] matrix of row stride `stride`, span the
    // elements from an entry's first to its last (the row padding between is rounded too, and
    // unread): the copy keeps the leading dimension and takes the stride span (rounded up to 8).
    // Entries that overlap (0 < stride < span) are rounded one by one.
    auto round = [&](const float* X, int rows, int cols, int ld, long long& stride, Bf16Scratch& buf) {
      const long long span = (long long)(rows - 1) * ld + cols;
      const long long stride16 = stride == 0 ? 0 : (span + 7) / 8 * 8;
      const int n = stride == 0 ? 1 : batch;
      std::uint16_t* copy = buf.reserve(std::size_t((n - 1) * stride16 + span), m_impl->stream);
      if (stride == 0 || stride >= span) {
        if (span > std::numeric_limits<int>::max() || stride > std::numeric_limits<int>::max())
          bad("an operand's entry is too large for the bf16 rounding");
        convert_to_bf16(X, n, int(span), int(std::max(stride, span)), copy, int(std::max<long long>(stride16, span)),
                        m_impl->stream);
      } else {
        for (int i = 0; i < n; ++i)
          convert_to_bf16(X + i * stride, rows, cols, ld, copy + i * stride16, ld, m_impl->stream);
      }
      stride = stride16;
      return static_cast<const void*>(copy);
    };
    a_ptr = round(A, trans_a ? K : M, trans_a ? M : K, lda, stride_a, m_impl->a16);
    b_ptr = round(B, trans_b ? N : K, trans_b ? K : N, ldb, stride_b, m_impl->b16);
    in_type = CUDA_R_16BF;
    compute = CUBLAS_COMPUTE_32F;
  }
  // Column-major view as in operator(): the operands swap places and keep their flags.
  const cublasStatus_t s = cublas_library().gemm_strided_batched_ex(
      m_impl->handle, trans_b ? CUBLAS_OP_T : CUBLAS_OP_N, trans_a ? CUBLAS_OP_T : CUBLAS_OP_N, N, M, K, &alpha,
      b_ptr, in_type, ldb, stride_b, a_ptr, in_type, lda, stride_a, &beta, C, CUDA_R_32F, ldc, stride_c, batch,
      compute, CUBLAS_GEMM_DEFAULT);
  if (s != CUBLAS_STATUS_SUCCESS)
    throw std::runtime_error("cublasGemmStridedBatchedEx failed (" + status_text(s) + ") at M=" +
                             std::to_string(M) + " N=" + std::to_string(N) + " K=" + std::to_string(K) +
                             " batch=" + std::to_string(batch));
}

void Gemm::bf16(bool trans_a, bool trans_b, int M, int N, int K, float alpha, const float* A, int lda,
                const std::uint16_t* A16, int lda16, const float* B, int ldb, const std::uint16_t* B16, int ldb16,
                float beta, float* C, int ldc) const {
  require_bf16_engine();
  if (K == 0 && M > 0 && N > 0) {  // C = beta·C: no operand is read (C stands in for them)
    if (ldc < N || !C) throw std::invalid_argument("gemm (bf16): ldc < N, or C is null");
    (*this)(trans_a, trans_b, M, N, 0, alpha, C, trans_a ? M : 1, C, trans_b ? 1 : N, beta, C, ldc);
    return;
  }
  bf16_product(trans_a, trans_b, M, N, K, alpha, A, lda, A16, lda16, B, ldb, B16, ldb16, beta, C,
               CUDA_R_32F, ldc);
}

void Gemm::bf16_out(bool trans_a, bool trans_b, int M, int N, int K, float alpha, const float* A,
                    int lda, const std::uint16_t* A16, int lda16, const float* B, int ldb,
                    const std::uint16_t* B16, int ldb16, std::uint16_t* C16, int ldc16) const {
  require_bf16_engine();
  if (K == 0 && M > 0 && N > 0) {  // C = 0 (bf16 zero is all-zero bits)
    if (ldc16 < N || !C16) throw std::invalid_argument("gemm (bf16): ldc < N, or C is null");
    TTTLAB_CUDA_CHECK(
        cudaMemset2DAsync(C16, std::size_t(ldc16) * 2, 0, std::size_t(N) * 2, M, m_impl->stream));
    return;
  }
  bf16_product(trans_a, trans_b, M, N, K, alpha, A, lda, A16, lda16, B, ldb, B16, ldb16, 0.f, C16,
               CUDA_R_16BF, ldc16);
}

void Gemm::require_bf16_engine() const {
  if (m_impl->precision != GemmPrecision::Bf16 || m_impl->engine != GemmEngine::Cublas)
    throw std::logic_error("Gemm::bf16 needs a cuBLAS Gemm of Bf16 precision (this one: " + describe() + ")");
}

// The bf16 products: operands rounded here where no copy is given, C of type c_type (fp32 or bf16).
void Gemm::bf16_product(bool trans_a, bool trans_b, int M, int N, int K, float alpha,
                        const float* A, int lda, const std::uint16_t* A16, int lda16,
                        const float* B, int ldb, const std::uint16_t* B16, int ldb16, float beta,
                        void* C, int c_type, int ldc) const {
  auto bad = [](const std::string& m) { throw std::invalid_argument("gemm (bf16): " + m); };
  if (M < 0 || N < 0 || K < 0) bad("M, N, K must be >= 0");
  if (M == 0 || N == 0) return;
  if (ldc < N || !C) bad("ldc < N, or C is null");
  // Stored A is [M, K], or [K, M] when trans_a; B likewise.
  const int a_rows = trans_a ? K : M, a_cols = trans_a ? M : K;
  const int b_rows = trans_b ? N : K, b_cols = trans_b ? K : N;
  if (A16 ? (lda16 < a_cols || lda16 < 1) : (!A || lda < a_cols || lda < 1)) bad("A: null, or its row stride too small");
  if (B16 ? (ldb16 < b_cols || ldb16 < 1) : (!B || ldb < b_cols || ldb < 1)) bad("B: null, or its row stride too small");
  if (!A16) {
    lda16 = padded_bf16_stride(a_cols);
    std::uint16_t* copy = m_impl->a16.reserve(std::size_t(a_rows) * lda16, m_impl->stream);
    convert_to_bf16(A, a_rows, a_cols, lda, copy, lda16, m_impl->stream);
    A16 = copy;
  }
  if (!B16) {
    ldb16 = padded_bf16_stride(b_cols);
    std::uint16_t* copy = m_impl->b16.reserve(std::size_t(b_rows) * ldb16, m_impl->stream);
    convert_to_bf16(B, b_rows, b_cols, ldb, copy, ldb16, m_impl->stream);
    B16 = copy;
  }
  // Column-major view as in operator(): the operands swap places and keep their flags.
  const cublasStatus_t s = cublas_library().gemm_ex(
      m_impl->handle, trans_b ? CUBLAS_OP_T : CUBLAS_OP_N, trans_a ? CUBLAS_OP_T : CUBLAS_OP_N, N,
      M, K, &alpha, B16, CUDA_R_16BF, ldb16, A16, CUDA_R_16BF, lda16, &beta, C,
      static_cast<cudaDataType>(c_type), ldc, CUBLAS_COMPUTE_32F, CUBLAS_GEMM_DEFAULT);
  if (s != CUBLAS_STATUS_SUCCESS)
    throw std::runtime_error("cublasGemmEx (bf16) failed (" + status_text(s) + ") at M=" + std::to_string(M) +
                             " N=" + std::to_string(N) + " K=" + std::to_string(K));
}

GemmRate measure_gemm_rate(GemmPrecision precision, int n, int repeats) {
  if (n < 1 || repeats < 1) throw std::invalid_argument("measure_gemm_rate: n and repeats must be >= 1");
  const std::size_t count = std::size_t(n) * n;
  float *A = nullptr, *B = nullptr, *C = nullptr;
  cudaStream_t stream = nullptr;
  cudaEvent_t e0 = nullptr, e1 = nullptr;
  GemmRate r;
  const auto release = [&] {
    cudaFree(A);
    cudaFree(B);
    cudaFree(C);
    if (e0) cudaEventDestroy(e0);
    if (e1) cudaEventDestroy(e1);
    if (stream) cudaStreamDestroy(stream);
  };
  try {
    TTTLAB_CUDA_CHECK(cudaMalloc(reinterpret_cast<void**>(&A), count * sizeof(float)));
    TTTLAB_CUDA_CHECK(cudaMalloc(reinterpret_cast<void**>(&B), count * sizeof(float)));
    TTTLAB_CUDA_CHECK(cudaMalloc(reinterpret_cast<void**>(&C), count * sizeof(float)));
    TTTLAB_CUDA_CHECK(cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking));
    TTTLAB_CUDA_CHECK(cudaEventCreate(&e0));
    TTTLAB_CUDA_CHECK(cudaEventCreate(&e1));
    // Small nonzero operands (a memset pattern): the rate does not depend on the values.
    TTTLAB_CUDA_CHECK(cudaMemsetAsync(A, 0x3c, count * sizeof(float), stream));
    TTTLAB_CUDA_CHECK(cudaMemsetAsync(B, 0x3c, count * sizeof(float), stream));
    Gemm gemm(stream, precision);
    r.engine = gemm.describe();
    r.n = n;
    r.repeats = repeats;
    for (int i = 0; i < 3; ++i) gemm(false, false, n, n, n, 1.f, A, n, B, n, 0.f, C, n);
    std::vector<double> tf;
    for (int i = 0; i < repeats; ++i) {
      TTTLAB_CUDA_CHECK(cudaEventRecord(e0, stream));
      gemm(false, false, n, n, n, 1.f, A, n, B, n, 0.f, C, n);
      TTTLAB_CUDA_CHECK(cudaEventRecord(e1, stream));
      TTTLAB_CUDA_CHECK(cudaEventSynchronize(e1));
      float ms = 0;
      TTTLAB_CUDA_CHECK(cudaEventElapsedTime(&ms, e0, e1));
      tf.push_back(2.0 * n * double(n) * n / (ms * 1e-3) / 1e12);
    }
    std::sort(tf.begin(), tf.end());
    r.median_tflops = tf[tf.size() / 2];
    r.min_tflops = tf.front();
    r.max_tflops = tf.back();
  } catch (...) {
    release();
    throw;
  }
  release();
  return r;
}

}  // namespace tttlab::kernels
