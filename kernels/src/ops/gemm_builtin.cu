// The fallback fp32 matrix product of Gemm (tttlab/kernels/gemm.hpp), used where cuBLAS is not
// loaded.
#include "ops/ops_common.cuh"

namespace tttlab::kernels {
namespace {

// blockIdx.z: the batch entry (Gemm::batched), at A + z·sa, B + z·sb, C + z·sc.
__global__ void gemm_kernel(bool ta, bool tb, int M, int N, int K, float alpha, const float* __restrict__ A, int lda,
                            const float* __restrict__ B, int ldb, float beta, float* __restrict__ C, int ldc,
                            long long sa, long long sb, long long sc) {
  A += sa * blockIdx.z;
  B += sb * blockIdx.z;
  C += sc * blockIdx.z;
  __shared__ float As[16][64 + 1];
  __shared__ float Bs[16][64 + 1];
  const int tx = threadIdx.x % 16, ty = threadIdx.x / 16;
  const int m0 = blockIdx.y * 64, n0 = blockIdx.x * 64;
  float acc[4][4] = {};
  for (int k0 = 0; k0 < K; k0 += 16) {
    for (int q = 0; q < 4; ++q) {
      const int e = threadIdx.x + 256 * q;
      // A tile element (mm, kk) and B tile element (kk, nn), read along memory's fast axis.
      int mm, kk;
      if (ta) { kk = e / 64; mm = e % 64; } else { mm = e / 16; kk = e % 16; }
      const int gm = m0 + mm, gk = k0 + kk;
      float a = 0.f;
      if (gm < M && gk < K) a = ta ? A[std::size_t(gk) * lda + gm] : A[std::size_t(gm) * lda + gk];
      As[kk][mm] = a;
      int nn, kb;
      if (tb) { nn = e / 16; kb = e % 16; } else { kb = e / 64; nn = e % 64; }
      const int gn = n0 + nn, gkb = k0 + kb;
      float b = 0.f;
      if (gn < N && gkb < K) b = tb ? B[std::size_t(gn) * ldb + gkb] : B[std::size_t(gkb) * ldb + gn];
      Bs[kb][nn] = b;
    }
    __syncthreads();
#pragma unroll
    for (int kk = 0; kk < 16; ++kk) {
      float a[4], b[4];
#pragma unroll
      for (int i = 0; i < 4; ++i) a[i] = As[kk][ty + 16 * i];
#pragma unroll
      for (int j = 0; j < 4; ++j) b[j] = Bs[kk][tx + 16 * j];
#pragma unroll
      for (int i = 0; i < 4; ++i)
#pragma unroll
        for (int j = 0; j < 4; ++j) acc[i][j] += a[i] * b[j];
    }
    __syncthreads();
  }
#pragma unroll
  for (int i = 0; i < 4; ++i)
#pragma unroll
    for (int j = 0; j < 4; ++j) {
      const int gm = m0 + ty + 16 * i, gn = n0 + tx + 16 * j;
      if (gm < M && gn < N) {
        float* c = C + std::size_t(gm) * ldc + gn;
        *c = beta == 0.f ? alpha * acc[i][j] : alpha * acc[i][j] + beta * *c;
      }
    }
}

}  // namespace

void gemm_builtin(bool trans_a, bool trans_b, int M, int N, int K, float alpha, const float* A, int lda,
                  const float* B, int ldb, float beta, float* C, int ldc, CUstream_st* stream) {
  if (M <= 0 || N <= 0) return;
  require(M <= 65535 * 64, "gemm_builtin", "M too large for the grid");
  gemm_kernel<<<dim3((N + 63) / 64, (M + 63) / 64), 256, 0, stream>>>(trans_a, trans_b, M, N, K, alpha, A, lda, B,
                                                                      ldb, beta, C, ldc, 0, 0, 0);
  check_launch();
}

void gemm_builtin_batched(bool trans_a, bool trans_b, int M, int N, int K, float alpha, const float* A, int lda,
                          long long stride_a, const float* B, int ldb, long long stride_b, float beta, float* C,
                          int ldc, long long stride_c, int batch, CUstream_st* stream) {
  if (M <= 0 || N <= 0 || batch <= 0) return;
  require(M <= 65535 * 64, "gemm_builtin_batched", "M too large for the grid");
  require(batch <= 65535, "gemm_builtin_batched", "batch too large for the grid (at most 65535)");
  gemm_kernel<<<dim3((N + 63) / 64, (M + 63) / 64, batch), 256, 0, stream>>>(
      trans_a, trans_b, M, N, K, alpha, A, lda, B, ldb, beta, C, ldc, stride_a, stride_b, stride_c);
  check_launch();
}

}  // namespace tttlab::kernels
