// The TTT layer's learning rates (tttlab/kernels/nn_ops.hpp, ttt/eta.hpp on the CPU): the gate
// λ = scale·σ(x·θ + β) with its backward, the learned gate in one pass on the tensor cores, and
// the token-index factors τ.
#include <climits>

#include "ops/ops_common.cuh"
#include "ttt/ttt_mma.cuh"

namespace tttlab::kernels {
using detail::mma_bf16;
namespace {

__global__ void eta_forward_kernel(const float* __restrict__ U, const float* __restrict__ bias, int T, int H,
                                   float scale, std::size_t n, float* __restrict__ lam) {
  for (std::size_t i = blockIdx.x * std::size_t(blockDim.x) + threadIdx.x; i < n; i += std::size_t(gridDim.x) * blockDim.x) {
    if (!U) {
      lam[i] = scale;
      continue;
    }
    const std::size_t t = i % T, nh = i / T;
    const int h = int(nh % H);
    const std::size_t seq = nh / H;
    lam[i] = scale * sigmoidf_split(U[(seq * T + t) * H + h] + bias[h]);
  }
}

__global__ void eta_backward_kernel(const float* __restrict__ lam, const float* __restrict__ dlam, int T, int H,
                                    float scale, std::size_t n, float* __restrict__ dU) {
  for (std::size_t i = blockIdx.x * std::size_t(blockDim.x) + threadIdx.x; i < n; i += std::size_t(gridDim.x) * blockDim.x) {
    const std::size_t t = i % T, nh = i / T;
    const int h = int(nh % H);
    const std::size_t seq = nh / H;
    const float l = lam[i];
    dU[(seq * T + t) * H + h] = dlam[i] * l * (1.f - l / scale);
  }
}

// The learned gate in one pass each way, for a group of heads (blockIdx.y) at a time. U = x·θᵀ is
// [R, H], a product whose N = H (12 at D = 768) left cuBLAS with narrow tiles (at R = 16384 on an
// H100: 18.5 µs for U, 37.5 µs for dθ = dUᵀx, against 9 µs to read x in bf16), and λ, dU and the sums
// around them were passes of their own. The backward reads x in fp32 (x16 null) or as bf16 bit
// patterns (x null); θ and the sums stay fp32.
__device__ __forceinline__ float gate_input(const float* __restrict__ x,
                                            const std::uint16_t* __restrict__ x16, std::size_t i) {
  return x16 ? bf16_value(x16[i]) : x[i];
}

// λ[seq, h, t] = scale·σ(x_r·θ_h + β_h), r = seq·T + t, from bf16 x and θ on the tensor cores: a block
// per 16 rows and up to 16 heads (two m16n8k16 tiles, heads past H read as zeros), its kEtaWarps warps
// taking every kEtaWarps-th k-step of 16 over D, the fragments loaded straight from global memory (θ's
// stay in L1); the warps' sums are added in a fixed order through shared memory, then the bias and σ.
// Splitting k over the warps gives every SM ~30 warps' loads to hide the memory latency with: with a
// warp per 16 rows and all of D it took 24 µs at R = 16384, D = 768, H = 12 on an H100 (cuBLAS's
// product alone 18.5 µs, with narrow tiles for N = H; a CUDA-core version 81 µs, issue-bound).
constexpr int kEtaWarps = 4;
__device__ __forceinline__ std::uint32_t bf16_pair(const std::uint16_t* __restrict__ p, bool ok) {
  return ok ? *reinterpret_cast<const std::uint32_t*>(p) : 0u;
}
__global__ void __launch_bounds__(32 * kEtaWarps)
    eta_gate_forward_bf16_kernel(const std::uint16_t* __restrict__ x16,
                                 const std::uint16_t* __restrict__ theta16,
                                 const float* __restrict__ bias, int R, int T, int H, int D,
                                 float scale, float* __restrict__ lam) {
  __shared__ float s_acc[kEtaWarps][32][8];
  const int warp = threadIdx.x / 32, lane = threadIdx.x % 32, gid = lane / 4, tig = lane % 4;
  const int r0 = blockIdx.x * 16, h0 = blockIdx.y * 16;
  const int ra = r0 + gid, rb = r0 + gid + 8;  // the lane's A rows
  const int ha = h0 + gid, hb = h0 + 8 + gid;  // the lane's B columns (heads), per n-tile
  const std::uint16_t* xa = x16 + std::size_t(min(ra, R - 1)) * D + 2 * tig;
  const std::uint16_t* xb = x16 + std::size_t(min(rb, R - 1)) * D + 2 * tig;
  const std::uint16_t* ta = theta16 + std::size_t(min(ha, H - 1)) * D + 2 * tig;
  const std::uint16_t* tb = theta16 + std::size_t(min(hb, H - 1)) * D + 2 * tig;
  float acc[2][4] = {};
#pragma unroll 4
  for (int k0 = 16 * warp; k0 < D; k0 += 16 * kEtaWarps) {  // D % 16 == 0 (the host checks)
    const std::uint32_t a[4] = {bf16_pair(xa + k0, ra < R), bf16_pair(xb + k0, rb < R),
                                bf16_pair(xa + k0 + 8, ra < R), bf16_pair(xb + k0 + 8, rb < R)};
    mma_bf16(acc[0], a, bf16_pair(ta + k0, ha < H), bf16_pair(ta + k0 + 8, ha < H));
    mma_bf16(acc[1], a, bf16_pair(tb + k0, hb < H), bf16_pair(tb + k0 + 8, hb < H));
  }
#pragma unroll
  for (int e = 0; e < 8; ++e) s_acc[warp][lane][e] = acc[e / 4][e % 4];
  __syncthreads();
  if (warp != 0) return;
#pragma unroll
  for (int e = 0; e < 8; ++e) {
    float u = s_acc[0][lane][e];
#pragma unroll
    for (int w = 1; w < kEtaWarps; ++w) u += s_acc[w][lane][e];
    // element e: accumulator (n, i) = (e / 4, e % 4): row r0 + gid + 8·(i / 2), head
    // h0 + 8n + 2·tig + i % 2
    const int n = e / 4, i = e % 4;
    const int row = r0 + gid + 8 * (i / 2), h = h0 + 8 * n + 2 * tig + i % 2;
    if (row < R && h < H)
      lam[(std::size_t(row / T) * H + h) * T + row % T] = scale * sigmoidf_split(u + bias[h]);
  }
}

// dU[r, h] = dλ·λ·(1 − λ/scale) for the chunk's rows (written, and dU16 = bf16(dU) when given), then
// the chunk's partial sums dθ_h = Σ_r dU[r, h]·x_r into partial[chunk, h, :] and dβ_h = Σ_r dU[r, h]
// into partial_b[chunk, h]: a thread per column, its rows in order, so the sums are deterministic.
constexpr int kEtaChunkRows = 64, kEtaCols = 3;
template <int HG>
__global__ void __launch_bounds__(256, 2)
    eta_gate_backward_kernel(const float* __restrict__ lam, const float* __restrict__ dlam,
                             const float* __restrict__ x, const std::uint16_t* __restrict__ x16,
                             int R, int T, int H, int D, float scale, float* __restrict__ dU,
                             std::uint16_t* __restrict__ dU16, float* __restrict__ partial,
                             float* __restrict__ partial_b) {
  __shared__ float s_du[kEtaChunkRows][HG];
  const int r0 = blockIdx.x * kEtaChunkRows, h0 = blockIdx.y * HG;
  const int rows = min(kEtaChunkRows, R - r0);
  for (int i = threadIdx.x; i < kEtaChunkRows * HG; i += blockDim.x) {
    const int r = i / HG, h = i % HG;
    float v = 0.f;
    if (r < rows && h0 + h < H) {
      const int row = r0 + r;
      const std::size_t li = (std::size_t(row / T) * H + h0 + h) * T + row % T;
      const float l = lam[li];
      v = dlam[li] * l * (1.f - l / scale);
      dU[std::size_t(row) * H + h0 + h] = v;
      if (dU16) dU16[std::size_t(row) * H + h0 + h] = bf16_bits(v);
    }
    s_du[r][h] = v;
  }
  __syncthreads();
  // kEtaCols columns per thread at once (all of D = 768 on 256 threads), 4 rows unrolled: 12 loads
  // in flight per thread, at two blocks per SM.
  for (int cb = threadIdx.x; cb < D; cb += kEtaCols * blockDim.x) {
    float acc[kEtaCols][HG] = {};
    const std::size_t base = std::size_t(r0) * D;
#pragma unroll 4
    for (int r = 0; r < rows; ++r) {
      float xv[kEtaCols];
#pragma unroll
      for (int k = 0; k < kEtaCols; ++k) {
        const int c = cb + k * blockDim.x;
        xv[k] = c < D ? gate_input(x, x16, base + std::size_t(r) * D + c) : 0.f;
      }
#pragma unroll
      for (int k = 0; k < kEtaCols; ++k)
#pragma unroll
        for (int h = 0; h < HG; ++h) acc[k][h] = fmaf(s_du[r][h], xv[k], acc[k][h]);
    }
#pragma unroll
    for (int k = 0; k < kEtaCols; ++k) {
      const int c = cb + k * blockDim.x;
      if (c >= D) break;
#pragma unroll
      for (int h = 0; h < HG; ++h)
        if (h0 + h < H) partial[(std::size_t(blockIdx.x) * H + h0 + h) * D + c] = acc[k][h];
    }
  }
  if (threadIdx.x < HG && h0 + threadIdx.x < H) {
    float t = 0.f;
    for (int r = 0; r < rows; ++r) t += s_du[r][threadIdx.x];
    partial_b[std::size_t(blockIdx.x) * H + h0 + threadIdx.x] = t;
  }
}

__global__ void token_index_forward_kernel(const float* delta, int b, bool on, float* tau) {
  for (int i = threadIdx.x; i < b; i += blockDim.x) tau[i] = on ? fmaxf(1.f / float(i + 1) + delta[i], 0.f) : 1.f;
}

__global__ void token_index_backward_kernel(const float* delta, const float* dtau, int b, float* ddelta) {
  for (int i = threadIdx.x; i < b; i += blockDim.x)
    if (1.f / float(i + 1) + delta[i] > 0.f) ddelta[i] += dtau[i];
}

}  // namespace

void eta_forward(const float* U, const float* bias, int B, int T, int H, float scale, float* lambda,
                 CUstream_st* stream) {
  const char* fn = "eta_forward";
  require(B >= 1 && T >= 1 && H >= 1, fn, "B, T, H must be >= 1");
  require(lambda && (!U || bias), fn, "lambda (and bias with U) must be non-null");
  const std::size_t n = std::size_t(B) * H * T;
  eta_forward_kernel<<<blocks_for(n, kThreads), kThreads, 0, stream>>>(U, bias, T, H, scale, n, lambda);
  check_launch();
}

void eta_backward(const float* lambda, const float* dlambda, int B, int T, int H, float scale, float* dU,
                  CUstream_st* stream) {
  const char* fn = "eta_backward";
  require(B >= 1 && T >= 1 && H >= 1, fn, "B, T, H must be >= 1");
  require(lambda && dlambda && dU, fn, "a pointer is null");
  const std::size_t n = std::size_t(B) * H * T;
  eta_backward_kernel<<<blocks_for(n, kThreads), kThreads, 0, stream>>>(lambda, dlambda, T, H,
                                                                           scale > 0.f ? scale : 1.f, n, dU);
  check_launch();
}

namespace {
// The head-group width of eta_gate_backward_kernel for H heads: each thread holds HG accumulators
// per column.
int eta_head_group(int H) { return H <= 4 ? 4 : H <= 8 ? 8 : 16; }

void check_eta_gate_dims(const char* fn, int B, int T, int H, int D) {
  require(B >= 1 && T >= 1 && H >= 1 && D >= 1, fn, "B, T, H, D must be >= 1");
  require(std::size_t(B) * T <= std::size_t(INT_MAX), fn, "B·T must fit an int");
}
}  // namespace

void eta_gate_forward_bf16(const std::uint16_t* x16, const std::uint16_t* theta16,
                           const float* bias, int B, int T, int H, int D, float scale,
                           float* lambda, CUstream_st* stream) {
  const char* fn = "eta_gate_forward_bf16";
  check_eta_gate_dims(fn, B, T, H, D);
  require(D % 16 == 0, fn, "D must be a multiple of 16");
  require(x16 && theta16 && bias && lambda, fn, "a pointer is null");
  require(reinterpret_cast<std::uintptr_t>(x16) % 4 == 0 &&
              reinterpret_cast<std::uintptr_t>(theta16) % 4 == 0,
          fn, "x16 and theta16 must be 4-byte aligned");
  const int R = B * T;
  const dim3 grid((R + 15) / 16, (H + 15) / 16);
  eta_gate_forward_bf16_kernel<<<grid, 32 * kEtaWarps, 0, stream>>>(x16, theta16, bias, R, T, H, D,
                                                                    scale, lambda);
  check_launch();
}

std::size_t eta_gate_backward_workspace(int R, int H, int D) {
  const std::size_t chunks = (std::size_t(std::max(R, 1)) + kEtaChunkRows - 1) / kEtaChunkRows;
  return chunks * std::size_t(H) * (std::size_t(D) + 1);
}

void eta_gate_backward(const float* lambda, const float* dlambda, const float* x,
                       const std::uint16_t* x16, int B, int T, int H, int D, float scale, float* dU,
                       std::uint16_t* dU16, float* dtheta, float* dbias, float* workspace,
                       CUstream_st* stream) {
  const char* fn = "eta_gate_backward";
  check_eta_gate_dims(fn, B, T, H, D);
  require((x != nullptr) != (x16 != nullptr), fn, "exactly one of x and x16 must be given");
  require(lambda && dlambda && dU && dtheta && dbias && workspace, fn, "a pointer is null");
  const int R = B * T, hg = eta_head_group(H);
  const int chunks = (R + kEtaChunkRows - 1) / kEtaChunkRows;
  float* partial = workspace;
  float* partial_b = workspace + std::size_t(chunks) * H * D;
  const dim3 grid(chunks, (H + hg - 1) / hg);
  const float s = scale > 0.f ? scale : 1.f;  // as eta_backward
  switch (hg) {
#define TTTLAB_ETA_BWD(HG)                                                     \
  case HG:                                                                     \
    eta_gate_backward_kernel<HG><<<grid, kThreads, 0, stream>>>(               \
        lambda, dlambda, x, x16, R, T, H, D, s, dU, dU16, partial, partial_b); \
    break;
    TTTLAB_ETA_BWD(4) TTTLAB_ETA_BWD(8) TTTLAB_ETA_BWD(16)
#undef TTTLAB_ETA_BWD
  }
  check_launch();
  sum_partials_add(partial, chunks, H * D, dtheta, stream);
  sum_partials_add(partial_b, chunks, H, dbias, stream);
}

void token_index_forward(const float* delta, int b, bool token_index, float* tau, CUstream_st* stream) {
  require(b >= 1 && delta && tau, "token_index_forward", "b must be >= 1 and pointers non-null");
  token_index_forward_kernel<<<1, 64, 0, stream>>>(delta, b, token_index, tau);
  check_launch();
}

void token_index_backward(const float* delta, const float* dtau, int b, bool token_index, float* ddelta,
                          CUstream_st* stream) {
  require(b >= 1 && delta && dtau && ddelta, "token_index_backward", "b must be >= 1 and pointers non-null");
  if (!token_index) return;
  token_index_backward_kernel<<<1, 64, 0, stream>>>(delta, dtau, b, ddelta);
  check_launch();
}

}  // namespace tttlab::kernels
