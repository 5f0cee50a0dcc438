// The fused kernels of the whole-model GPU decoder (see decode_ops.hpp).
#include <cuda_runtime.h>

#include <algorithm>
#include <cfloat>
#include <cstddef>
#include <stdexcept>
#include <string>

#include "common/cuda_check.hpp"
#include "model/decode_ops.hpp"
#include "ttt/ttt_common.cuh"

namespace tttlab::kernels::detail {
namespace {

constexpr int kGemvThreads = 256;
constexpr int kGemvWarps = kGemvThreads / 32;
constexpr int kGemvCols = 128;  // columns per CTA: 32 lanes × 4
constexpr int kRowThreads = 1024;

// Four running sums (partials t ≡ 0, 1, 2, 3 mod 4), so that four loads are in flight; always
// added in the same order.
__device__ __forceinline__ float sum_partials(const Partials& p, int c) {
  float s[4] = {0.0f, 0.0f, 0.0f, 0.0f};
  int t = 0;
  for (; t + 4 <= p.S; t += 4) {
#pragma unroll
    for (int u = 0; u < 4; ++u) s[u] += p.part[std::size_t(t + u) * p.N + c];
  }
  for (; t < p.S; ++t) s[0] += p.part[std::size_t(t) * p.N + c];
  return (s[0] + s[1]) + (s[2] + s[3]);
}

// Sequence s's partials in a batched launch.
__device__ __forceinline__ Partials seq_partials(Partials p, int s) {
  p.part += std::size_t(s) * p.bs;
  return p;
}

// The rows of a rolling history per sequence (at least one, as decode_cuda.cpp allocates them).
__device__ __forceinline__ std::size_t hist_rows(int K) { return std::size_t(K > 1 ? K - 1 : 1); }

__device__ __forceinline__ float sigmoidf_(float x) {
  // Split by sign so that exp never overflows (as the CPU's sigmoid).
  if (x >= 0.0f) return 1.0f / (1.0f + expf(-x));
  const float e = expf(x);
  return e / (1.0f + e);
}

// Σ over the block of v (all threads call it; the result is returned to every thread).
__device__ float block_sum(float v) {
  __shared__ float warp_part[kRowThreads / 32];
  __shared__ float total;
  const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
  v = warp_sum(v);
  __syncthreads();  // warp_part may still be read by a previous call
  if (lane == 0) warp_part[warp] = v;
  __syncthreads();
  if (warp == 0) {
    float s = lane < int(blockDim.x >> 5) ? warp_part[lane] : 0.0f;
    s = warp_sum(s);
    if (lane == 0) total = s;
  }
  __syncthreads();
  return total;
}

// The warps' float4 values v of one lane's columns summed in warp order (warp 0's first) through
// red, and stored at out by warp 0 where store (the columns exist).
__device__ __forceinline__ void store_warp_sum(float4 (&red)[kGemvWarps][32], float4 v, int warp,
                                               int lane, bool store, float* out) {
  red[warp][lane] = v;
  __syncthreads();
  if (warp == 0 && store) {
    float4 t = red[0][lane];
    for (int w = 1; w < kGemvWarps; ++w) {
      const float4 r = red[w][lane];
      t.x += r.x;
      t.y += r.y;
      t.z += r.z;
      t.w += r.w;
    }
    *reinterpret_cast<float4*>(out) = t;
  }
}

// One CTA: a tile of 128 columns (32 lanes × float4) and a chunk of kc rows, the rows spread over
// the 8 warps and summed in shared memory in warp order; the chunk's partial goes to part[s, :].
// The last CTA of a tile to finish (a counter per tile) adds the S partials of its tile in a fixed
// order (slices t ≡ warp mod 8, then the warps in order) into y and resets the counter for the next
// launch: y is the same bit for bit whichever CTA is last.
template <bool kSwiglu>
__global__ void __launch_bounds__(kGemvThreads)
    gemv_kernel(const float* __restrict__ x, const float* __restrict__ W, int K, int ld, int kc,
                float* __restrict__ part, float* __restrict__ y, unsigned* __restrict__ counters) {
  __shared__ float xs[kDecodeMaxChunk];
  __shared__ float4 red[kGemvWarps][32];
  __shared__ bool last;
  const int tile = blockIdx.x, s = blockIdx.y, S = gridDim.y;
  const int k0 = s * kc, len = min(kc, K - k0);
  const int tid = threadIdx.x, warp = tid >> 5, lane = tid & 31;
  for (int i = tid; i < len; i += kGemvThreads) {
    if constexpr (kSwiglu) {
      // x is the previous product [G | U] (gate columns [0, K), up columns [K, 2K)).
      const float g = x[k0 + i], u = x[K + k0 + i];
      xs[i] = g * sigmoidf_(g) * u;
    } else {
      xs[i] = x[k0 + i];
    }
  }
  __syncthreads();
  const int c = tile * kGemvCols + lane * 4;
  float4 acc = make_float4(0.0f, 0.0f, 0.0f, 0.0f);
  if (c < ld) {
    const float* w = W + std::size_t(k0) * ld + c;
#pragma unroll 4
    for (int i = warp; i < len; i += kGemvWarps) {
      const float4 wv = __ldg(reinterpret_cast<const float4*>(w + std::size_t(i) * ld));
      const float xv = xs[i];
      acc.x += xv * wv.x;
      acc.y += xv * wv.y;
      acc.z += xv * wv.z;
      acc.w += xv * wv.w;
    }
  }
  store_warp_sum(red, acc, warp, lane, c < ld, part + std::size_t(s) * ld + c);
  __threadfence();
  __syncthreads();
  if (tid == 0) last = atomicAdd(&counters[tile], 1u) == unsigned(S - 1);
  __syncthreads();
  if (!last) return;
  __threadfence();
  float4 a = make_float4(0.0f, 0.0f, 0.0f, 0.0f);
  if (c < ld)
    for (int t = warp; t < S; t += kGemvWarps) {
      // L2, not L1: the partials were written by other SMs.
      const float4 r = __ldcg(reinterpret_cast<const float4*>(part + std::size_t(t) * ld + c));
      a.x += r.x;
      a.y += r.y;
      a.z += r.z;
      a.w += r.w;
    }
  store_warp_sum(red, a, warp, lane, c < ld, y + c);
  if (tid == 0) counters[tile] = 0u;
}

// gemv_kernel for a group of up to kDecodeGemvGroup sequences (blockIdx.x: the group; y: the tile;
// z: the chunk): each W float4 loaded feeds every sequence of the group, and each sequence's sums
// run in gemv_kernel's order (rows by warp, the warps in order, the S partials in order), so its
// output is bitwise gemv_kernel's. Partials part[(s·B + seq)·ld + c]; counters[tile·groups + group].
template <bool kSwiglu>
__global__ void __launch_bounds__(kGemvThreads)
    gemv_batch_kernel(const float* __restrict__ x, int ldx, const float* __restrict__ W, int K,
                      int ld, int kc, int batch, float* __restrict__ part, float* __restrict__ y,
                      unsigned* __restrict__ counters) {
  constexpr int NB = kDecodeGemvGroup;
  __shared__ float xs[NB][kDecodeMaxChunk];
  __shared__ float4 red[kGemvWarps][32];
  __shared__ bool last;
  const int group = blockIdx.x, tile = blockIdx.y, s = blockIdx.z, S = gridDim.z;
  const int seq0 = group * NB, nb = min(NB, batch - seq0);
  const int k0 = s * kc, len = min(kc, K - k0);
  const int tid = threadIdx.x, warp = tid >> 5, lane = tid & 31;
  for (int j = 0; j < nb; ++j) {
    const float* xr = x + std::size_t(seq0 + j) * ldx;
    for (int i = tid; i < len; i += kGemvThreads) {
      if constexpr (kSwiglu) {
        const float g = xr[k0 + i], u = xr[K + k0 + i];
        xs[j][i] = g * sigmoidf_(g) * u;
      } else {
        xs[j][i] = xr[k0 + i];
      }
    }
  }
  __syncthreads();
  const int c = tile * kGemvCols + lane * 4;
  float4 acc[NB];
#pragma unroll
  for (int j = 0; j < NB; ++j) acc[j] = make_float4(0.0f, 0.0f, 0.0f, 0.0f);
  if (c < ld) {
    const float* w = W + std::size_t(k0) * ld + c;
    for (int i = warp; i < len; i += kGemvWarps) {
      const float4 wv = __ldg(reinterpret_cast<const float4*>(w + std::size_t(i) * ld));
#pragma unroll
      for (int j = 0; j < NB; ++j) {
        if (j < nb) {
          const float xv = xs[j][i];
          acc[j].x += xv * wv.x;
          acc[j].y += xv * wv.y;
          acc[j].z += xv * wv.z;
          acc[j].w += xv * wv.w;
        }
      }
    }
  }
#pragma unroll
  for (int j = 0; j < NB; ++j) {
    if (j < nb) {
      store_warp_sum(red, acc[j], warp, lane, c < ld,
                     part + (std::size_t(s) * batch + seq0 + j) * ld + c);
      __syncthreads();  // red is rewritten by the next sequence
    }
  }
  __threadfence();
  __syncthreads();
  const std::size_t ctr = std::size_t(tile) * gridDim.x + group;
  if (tid == 0) last = atomicAdd(&counters[ctr], 1u) == unsigned(S - 1);
  __syncthreads();
  if (!last) return;
  __threadfence();
  for (int j = 0; j < nb; ++j) {
    float4 a = make_float4(0.0f, 0.0f, 0.0f, 0.0f);
    if (c < ld)
      for (int t = warp; t < S; t += kGemvWarps) {
        const float4 r = __ldcg(
            reinterpret_cast<const float4*>(part + (std::size_t(t) * batch + seq0 + j) * ld + c));
        a.x += r.x;
        a.y += r.y;
        a.z += r.z;
        a.w += r.w;
      }
    store_warp_sum(red, a, warp, lane, c < ld, y + std::size_t(seq0 + j) * ld + c);
    __syncthreads();
  }
  if (tid == 0) counters[ctr] = 0u;
}

__global__ void __launch_bounds__(kRowThreads) block_in_kernel(BlockInArgs p) {
  const int D = p.D, sq = blockIdx.x;
  p.h += std::size_t(sq) * D;
  p.a += std::size_t(sq) * D;
  if (p.token) p.token += sq;
  p.delta = seq_partials(p.delta, sq);
  if (p.hist) p.hist += std::size_t(sq) * hist_rows(p.K) * D;
  float ss = 0.0f;
  for (int c = threadIdx.x; c < D; c += kRowThreads) {
    const float hc = p.embed ? p.embed[std::size_t(*p.token) * D + c] : p.h[c] + sum_partials(p.delta, c);
    p.h[c] = hc;
    ss += hc * hc;
  }
  ss = block_sum(ss);
  if (p.conv_w) {
    const float r = rsqrtf(ss / float(D) + p.eps);
    float ss2 = 0.0f;
    const int K = p.K;
    for (int c = threadIdx.x; c < D; c += kRowThreads) {
      const float an = p.h[c] * r * p.conv_norm[c];
      const float* w = p.conv_w + std::size_t(c) * K;
      float y = p.conv_b[c];
      for (int j = 0; j + 1 < K; ++j) y += w[j] * p.hist[std::size_t(j) * D + c];
      y += w[K - 1] * an;
      for (int j = 0; j + 2 < K; ++j) p.hist[std::size_t(j) * D + c] = p.hist[std::size_t(j + 1) * D + c];
      if (K > 1) p.hist[std::size_t(K - 2) * D + c] = an;
      const float hc = p.h[c] + y;
      p.h[c] = hc;
      ss2 += hc * hc;
    }
    ss = block_sum(ss2);
  }
  const float r = rsqrtf(ss / float(D) + p.eps);
  for (int c = threadIdx.x; c < D; c += kRowThreads) p.a[c] = p.h[c] * r * p.norm[c];
}

// One thread per interleaved pair (2m, 2m+1) of the D columns; threads below H also make λ.
__global__ void ttt_prep_kernel(TttPrepArgs p) {
  const int i = blockIdx.x * blockDim.x + threadIdx.x, sq = blockIdx.y;
  p.P = seq_partials(p.P, sq);
  if (p.hist) p.hist += std::size_t(sq) * hist_rows(p.K) * p.D;
  p.q += std::size_t(sq) * p.D;
  p.k += std::size_t(sq) * p.D;
  p.v += std::size_t(sq) * p.D;
  if (p.gpre) p.gpre += std::size_t(sq) * p.D;
  p.lambda += std::size_t(sq) * p.H;
  if (i < p.H) {
    float lam = p.scale;
    if (p.off_lr >= 0) lam = p.scale * sigmoidf_(sum_partials(p.P, p.off_lr + i) + p.lr_b[i]);
    p.lambda[i] = lam;
  }
  if (2 * i >= p.D) return;
  float q[2], k[2];
  const int K = p.K;
  for (int e = 0; e < 2; ++e) {
    const int c = 2 * i + e;
    if (p.conv_q_w) {
      const float u = sum_partials(p.P, p.off_q + c);
      const float* wq = p.conv_q_w + std::size_t(c) * K;
      const float* wk = p.conv_k_w + std::size_t(c) * K;
      float yq = p.conv_q_b[c], yk = p.conv_k_b[c];
      for (int j = 0; j + 1 < K; ++j) {
        const float hv = p.hist[std::size_t(j) * p.D + c];
        yq += wq[j] * hv;
        yk += wk[j] * hv;
      }
      yq += wq[K - 1] * u;
      yk += wk[K - 1] * u;
      for (int j = 0; j + 2 < K; ++j) p.hist[std::size_t(j) * p.D + c] = p.hist[std::size_t(j + 1) * p.D + c];
      if (K > 1) p.hist[std::size_t(K - 2) * p.D + c] = u;
      q[e] = yq;
      k[e] = yk;
    } else {
      q[e] = sum_partials(p.P, p.off_q + c);
      k[e] = sum_partials(p.P, p.off_k + c);
    }
    p.v[c] = sum_partials(p.P, p.off_v + c);
    if (p.gpre) p.gpre[c] = sum_partials(p.P, p.off_g + c);
  }
  if (p.cos_t) {
    const int m = (2 * i % p.d) / 2;  // the pair's index inside its head
    const float cs = p.cos_t[std::size_t(p.pos) * (p.d / 2) + m];
    const float sn = p.sin_t[std::size_t(p.pos) * (p.d / 2) + m];
    const float q0 = q[0], q1 = q[1], k0 = k[0], k1 = k[1];
    q[0] = q0 * cs - q1 * sn;
    q[1] = q0 * sn + q1 * cs;
    k[0] = k0 * cs - k1 * sn;
    k[1] = k0 * sn + k1 * cs;
  }
  p.q[2 * i] = q[0];
  p.q[2 * i + 1] = q[1];
  p.k[2 * i] = k[0];
  p.k[2 * i + 1] = k[1];
}

__global__ void __launch_bounds__(kRowThreads)
    post_kernel(const float* O, const float* w, const float* b, float eps, const float* gpre, float* y, int D) {
  const std::size_t off = std::size_t(blockIdx.x) * D;
  O += off;
  y += off;
  if (gpre) gpre += off;
  float mu = 0.0f, rstd = 1.0f;
  if (w) {
    float s = 0.0f;
    for (int c = threadIdx.x; c < D; c += kRowThreads) s += O[c];
    mu = block_sum(s) / float(D);
    float v = 0.0f;
    for (int c = threadIdx.x; c < D; c += kRowThreads) {
      const float x = O[c] - mu;
      v += x * x;
    }
    rstd = 1.0f / sqrtf(block_sum(v) / float(D) + eps);
  }
  for (int c = threadIdx.x; c < D; c += kRowThreads) {
    float yc = w ? (O[c] - mu) * rstd * w[c] + b[c] : O[c];
    if (gpre) yc *= gelu_tanh(gpre[c]);
    y[c] = yc;
  }
}

__global__ void __launch_bounds__(kRowThreads)
    add_norm_kernel(float* h, Partials delta, const float* w, float eps, float* a, int D) {
  h += std::size_t(blockIdx.x) * D;
  a += std::size_t(blockIdx.x) * D;
  delta = seq_partials(delta, blockIdx.x);
  float ss = 0.0f;
  for (int c = threadIdx.x; c < D; c += kRowThreads) {
    const float hc = h[c] + sum_partials(delta, c);
    h[c] = hc;
    ss += hc * hc;
  }
  const float r = rsqrtf(block_sum(ss) / float(D) + eps);
  for (int c = threadIdx.x; c < D; c += kRowThreads) a[c] = h[c] * r * w[c];
}

// Mamba-2's softplus: r itself above 20 (as the CPU layer, PyTorch and the reference's scan), else
// log(1 + e^r) written so that it neither overflows nor loses precision for very negative r.
__device__ __forceinline__ float mamba2_softplus(float r) {
  if (r > 20.0f) return r;
  return fmaxf(r, 0.0f) + log1pf(expf(-fabsf(r)));
}

__device__ __forceinline__ float mamba2_silu(float x) { return x * sigmoidf_(x); }

// One thread per channel of xBC; threads below H also make dt.
__global__ void mamba2_conv_kernel(Mamba2ConvArgs p) {
  const int c = blockIdx.x * blockDim.x + threadIdx.x, sq = blockIdx.y;
  p.proj = seq_partials(p.proj, sq);
  p.hist += std::size_t(sq) * hist_rows(p.K) * p.cd;
  p.xbc += std::size_t(sq) * p.cd;
  p.dt += std::size_t(sq) * p.H;
  if (c < p.H) p.dt[c] = mamba2_softplus(sum_partials(p.proj, p.di + p.cd + c) + p.dt_bias[c]);
  if (c >= p.cd) return;
  const int K = p.K;
  const float u = sum_partials(p.proj, p.di + c);
  const float* w = p.conv_w + std::size_t(c) * K;
  float y = p.conv_b[c];  // the bias first, then the taps oldest first: the CPU's order
  for (int j = 0; j + 1 < K; ++j) y += w[j] * p.hist[std::size_t(j) * p.cd + c];
  y += w[K - 1] * u;
  for (int j = 0; j + 2 < K; ++j)
    p.hist[std::size_t(j) * p.cd + c] = p.hist[std::size_t(j + 1) * p.cd + c];
  if (K > 1) p.hist[std::size_t(K - 2) * p.cd + c] = u;
  p.xbc[c] = mamba2_silu(y);
}

// One CTA per head: warps over the state's rows p, lanes over its columns n; the read-out S_h C_t of
// a row is a warp sum (fixed order: deterministic).
constexpr int kSsmThreads = 256;
__global__ void __launch_bounds__(kSsmThreads) mamba2_ssm_kernel(Mamba2SsmArgs a) {
  const int h = blockIdx.x, lane = threadIdx.x & 31, warp = threadIdx.x >> 5, sq = blockIdx.y;
  const int P = a.P, N = a.N;
  a.proj = seq_partials(a.proj, sq);
  a.xbc += std::size_t(sq) * (a.di + 2 * N);
  a.dt += std::size_t(sq) * a.H;
  a.state += std::size_t(sq) * a.H * P * N;
  a.g += std::size_t(sq) * a.di;
  const float dt = a.dt[h];
  const float decay = expf(dt * -expf(a.A_log[h]));
  const float* xs = a.xbc + std::size_t(h) * P;
  const float* B = a.xbc + a.di;
  const float* C = a.xbc + a.di + N;
  float* S = a.state + std::size_t(h) * P * N;
  for (int r = warp; r < P; r += kSsmThreads / 32) {
    const float dx = dt * xs[r];
    float acc = 0.0f;
    for (int n = lane; n < N; n += 32) {
      float s = S[std::size_t(r) * N + n];
      s = decay * s + dx * B[n];
      S[std::size_t(r) * N + n] = s;
      acc += s * C[n];
    }
    acc = warp_sum(acc);
    if (lane == 0) {
      const int c = h * P + r;
      const float y = acc + a.Dskip[h] * xs[r];
      a.g[c] = y * mamba2_silu(sum_partials(a.proj, c));
    }
  }
}

__global__ void __launch_bounds__(kRowThreads)
    rms_scale_kernel(const float* g, const float* w, float eps, float* y, int n) {
  g += std::size_t(blockIdx.x) * n;
  y += std::size_t(blockIdx.x) * n;
  float ss = 0.0f;
  for (int c = threadIdx.x; c < n; c += kRowThreads) ss += g[c] * g[c];
  const float r = rsqrtf(block_sum(ss) / float(n) + eps);
  for (int c = threadIdx.x; c < n; c += kRowThreads) y[c] = g[c] * r * w[c];
}

// ---- DeltaNet and Gated DeltaNet ----

// One thread per channel of [q | k | v]; threads below H also make β and α.
__global__ void deltanet_prep_kernel(DeltaNetPrepArgs p) {
  const int c = blockIdx.x * blockDim.x + threadIdx.x, sq = blockIdx.y;
  const int W = 3 * p.D, K = p.K;
  p.proj = seq_partials(p.proj, sq);
  p.hist += std::size_t(sq) * hist_rows(K) * W;
  p.qkv += std::size_t(sq) * W;
  if (p.beta) p.beta += std::size_t(sq) * p.H;
  if (p.alpha) p.alpha += std::size_t(sq) * p.H;
  if (c < p.H && p.beta) {
    const float zb = sum_partials(p.proj, p.off_b + c);
    p.beta[c] = 1.0f / (1.0f + expf(-zb));  // the CPU layer's sigmoid
    if (p.A_log) {
      const double r = double(sum_partials(p.proj, p.off_a + c) + p.dt_bias[c]);
      const double sp = r > 20.0 ? r : fmax(r, 0.0) + log1p(exp(-fabs(r)));
      const float g = -expf(p.A_log[c]) * float(sp);
      // Floored as the CPU layer: α stays in (0, 1] where the decay underflows.
      p.alpha[c] = fmaxf(expf(g), FLT_MIN);
    }
  }
  if (c >= W) return;
  const float u = sum_partials(p.proj, c);
  const float* w = p.conv_w + std::size_t(c) * K;
  float y = 0.0f;  // no bias; the taps oldest first, as the CPU's causal convolution
  for (int j = 0; j + 1 < K; ++j) y += w[j] * p.hist[std::size_t(j) * W + c];
  y += w[K - 1] * u;
  for (int j = 0; j + 2 < K; ++j)
    p.hist[std::size_t(j) * W + c] = p.hist[std::size_t(j + 1) * W + c];
  if (K > 1) p.hist[std::size_t(K - 2) * W + c] = u;
  p.qkv[c] = mamba2_silu(y);
}

// One CTA per (head, sequence): thread (j, g) = (tid mod d, tid / d) owns column j of the rows
// i ≡ g (mod G), G = 256 / d, so the d × d state is spread over (nearly) every thread; the G row
// slices of a column are summed in shared memory in slice order (deterministic). The state is read
// twice (for the residual, then for the update and the read-out) rather than held in registers, so
// any d up to 128 runs without a template per head dim.
constexpr int kDnThreads = 256;
static_assert(kDnThreads >= 2 * kDeltaNetMaxHeadDim, "two row slices at the largest head dim");
__global__ void __launch_bounds__(kDnThreads) deltanet_step_kernel(DeltaNetStepArgs a) {
  const int h = blockIdx.x, sq = blockIdx.y, tid = threadIdx.x;
  const int D = a.D, d = a.d;
  a.proj = seq_partials(a.proj, sq);
  const float* qkv = a.qkv + std::size_t(sq) * 3 * D;
  const float beta = a.beta[std::size_t(sq) * a.H + h];
  const float alpha = a.alpha ? a.alpha[std::size_t(sq) * a.H + h] : 1.0f;
  float* S = a.state + (std::size_t(sq) * a.H + h) * d * d;
  __shared__ float qs[kDeltaNetMaxHeadDim], ks[kDeltaNetMaxHeadDim], rs[kDeltaNetMaxHeadDim];
  __shared__ float red[kDnThreads];
  const bool lead = tid < d;  // thread j < d finishes column j
  const float qc = lead ? qkv[h * d + tid] : 0.0f;
  const float kc = lead ? qkv[D + h * d + tid] : 0.0f;
  const float nq = sqrtf(block_sum(qc * qc) + a.l2_eps);
  const float nk = sqrtf(block_sum(kc * kc) + a.l2_eps);
  if (lead) {
    qs[tid] = qc * (a.scale / nq);  // the CPU's product with scale / n
    ks[tid] = kc / nk;              // and its division where the scale is 1
  }
  __syncthreads();
  const int G = kDnThreads / d, j = tid % d, g = tid / d;
  const bool active = g < G;
  // r = k̂ (α S) − v; with α = 1 (DeltaNet) the product is exact, so one code path serves both.
  float part = 0.0f;
  if (active)
    for (int i = g; i < d; i += G) part += ks[i] * (alpha * S[std::size_t(i) * d + j]);
  red[tid] = part;
  __syncthreads();
  if (lead) {
    float r = 0.0f;
    for (int s = 0; s < G; ++s) r += red[s * d + tid];
    rs[tid] = r - qkv[2 * D + h * d + tid];
  }
  __syncthreads();
  // S ← α S − (β k̂)ᵀ r and o = q̂ S, each element written once.
  part = 0.0f;
  if (active)
    for (int i = g; i < d; i += G) {
      const std::size_t e = std::size_t(i) * d + j;
      const float s = alpha * S[e] - (beta * ks[i]) * rs[j];
      S[e] = s;
      part += qs[i] * s;
    }
  red[tid] = part;
  __syncthreads();
  float o = 0.0f;
  if (lead)
    for (int s = 0; s < G; ++s) o += red[s * d + tid];
  // The per-head RMSNorm (one weight [d] shared by the heads) and the gate.
  const float rinv = rsqrtf(block_sum(o * o) / float(d) + a.norm_eps);
  if (lead) {
    float yc = o * rinv * a.o_norm[tid];
    if (a.off_g >= 0) yc *= mamba2_silu(sum_partials(a.proj, a.off_g + h * d + tid));
    a.y[std::size_t(sq) * D + std::size_t(h) * d + tid] = yc;
  }
}

// ---- Titans ----

// The DeltaNet step's layout (kDnThreads threads; thread (j, g) owns column j of the rows i ≡ g
// (mod G)), over three states: M₀ is read for the key's projection z, then S, M (and M₀ at a commit)
// are updated element by element and M is read out, each element by its one thread.
static_assert(kDnThreads >= 2 * kTitansMaxHeadDim, "two row slices at the largest head dim");
__global__ void __launch_bounds__(kDnThreads) titans_step_kernel(TitansStepArgs a) {
  const int h = blockIdx.x, sq = blockIdx.y, tid = threadIdx.x;
  const int D = a.D, d = a.d, H = a.H;
  a.proj = seq_partials(a.proj, sq);
  const float* qkv = a.qkv + std::size_t(sq) * 3 * D;
  const std::size_t so = (std::size_t(sq) * H + h) * d * d;
  float* M = a.memory + so;
  float* S = a.momentum + so;
  float* M0 = a.start + so;
  const float* w = a.ln_w + std::size_t(h) * d;
  const float* b = a.ln_b + std::size_t(h) * d;
  __shared__ float qs[kTitansMaxHeadDim], ks[kTitansMaxHeadDim], us[kTitansMaxHeadDim];
  __shared__ float red[kDnThreads];
  const float fd = float(d);
  // The gates, as the CPU layer: scale · sigmoid(x·W + bias).
  const float theta = (1.0f / fd) * (1.0f / (1.0f + expf(-(sum_partials(a.proj, a.off_gates + h) +
                                                            a.gate_bias[h]))));
  const float alpha =
      1.0f / (1.0f + expf(-(sum_partials(a.proj, a.off_gates + H + h) + a.gate_bias[H + h])));
  const float eta = 1.0f / (1.0f + expf(-(sum_partials(a.proj, a.off_gates + 2 * H + h) +
                                          a.gate_bias[2 * H + h])));
  const bool lead = tid < d;  // thread j < d finishes column j
  const float qc = lead ? qkv[h * d + tid] : 0.0f;
  const float kc = lead ? qkv[D + h * d + tid] : 0.0f;
  const float nq = sqrtf(block_sum(qc * qc) + a.l2_eps);
  const float nk = sqrtf(block_sum(kc * kc) + a.l2_eps);
  const float kh = kc / nk;
  if (lead) {
    qs[tid] = qc / nq;
    ks[tid] = kh;
  }
  __syncthreads();
  const int G = kDnThreads / d, j = tid % d, g = tid / d;
  const bool active = g < G;
  // z = k̂ M₀, then its LayerNorm.
  float part = 0.0f;
  if (active)
    for (int i = g; i < d; i += G) part += ks[i] * M0[std::size_t(i) * d + j];
  red[tid] = part;
  __syncthreads();
  float z = 0.0f;
  if (lead)
    for (int s = 0; s < G; ++s) z += red[s * d + tid];
  const float zmu = block_sum(z) / fd;
  const float zc = lead ? z - zmu : 0.0f;
  const float zsig = sqrtf(block_sum(zc * zc) / fd + a.ln_eps);
  const float zhat = zc / zsig;
  // u = d·g − (Σg + (g·ẑ) ẑ) / (σ d), g = (w ⊙ ẑ + b − v + k̂) ⊙ w.
  float gj = 0.0f;
  if (lead) gj = (w[tid] * zhat + b[tid] - qkv[2 * D + h * d + tid] + kh) * w[tid];
  const float sg = block_sum(gj);
  const float sgz = block_sum(gj * zhat);
  const float c = 1.0f / (zsig * fd);
  if (lead) us[tid] = fd * gj - c * (sg + sgz * zhat);
  __syncthreads();
  // S ← η S − (2θ k̂)ᵀ u, M ← (1 − α) M + S [, M₀ ← M], y = q̂ M; each element written once.
  const float two_theta = 2.0f * theta, keep = 1.0f - alpha;
  part = 0.0f;
  if (active)
    for (int i = g; i < d; i += G) {
      const std::size_t e = std::size_t(i) * d + j;
      const float s = eta * S[e] - (two_theta * ks[i]) * us[j];
      S[e] = s;
      const float m = keep * M[e] + s;
      M[e] = m;
      if (a.commit) M0[e] = m;
      part += qs[i] * m;
    }
  red[tid] = part;
  __syncthreads();
  float y = 0.0f;
  if (lead)
    for (int s = 0; s < G; ++s) y += red[s * d + tid];
  // o = y + w ⊙ LN(y) + b, then the per-head RMSNorm and the gate.
  const float ymu = block_sum(y) / fd;
  const float yc = lead ? y - ymu : 0.0f;
  const float ysig = sqrtf(block_sum(yc * yc) / fd + a.ln_eps);
  const float o = lead ? y + w[tid] * (yc / ysig) + b[tid] : 0.0f;
  const float rinv = rsqrtf(block_sum(o * o) / fd + a.norm_eps);
  if (lead)
    a.y[std::size_t(sq) * D + std::size_t(h) * d + tid] =
        o * rinv * a.o_norm[tid] * mamba2_silu(sum_partials(a.proj, a.off_g + h * d + tid));
}

// ---- linear attention ----

static_assert(kDnThreads >= 2 * kLinearAttnMaxHeadDim, "two row slices at the largest head dim");
__global__ void __launch_bounds__(kDnThreads) linear_attn_step_kernel(LinearAttnStepArgs a) {
  const int h = blockIdx.x, sq = blockIdx.y, tid = threadIdx.x, d = a.d;
  a.proj = seq_partials(a.proj, sq);
  float* S = a.state + (std::size_t(sq) * a.H + h) * d * d;
  __shared__ float qs[kLinearAttnMaxHeadDim], ks[kLinearAttnMaxHeadDim], vs[kLinearAttnMaxHeadDim];
  __shared__ float red[kDnThreads];
  if (tid < d) {
    qs[tid] = sum_partials(a.proj, a.off_q + h * d + tid);
    ks[tid] = sum_partials(a.proj, a.off_k + h * d + tid);
    vs[tid] = sum_partials(a.proj, a.off_v + h * d + tid);
  }
  __syncthreads();
  const int G = kDnThreads / d, j = tid % d, g = tid / d;
  float part = 0.0f;
  if (g < G)
    for (int i = g; i < d; i += G) {
      const std::size_t e = std::size_t(i) * d + j;
      const float s = S[e] + ks[i] * vs[j];
      S[e] = s;
      part += qs[i] * s;
    }
  red[tid] = part;
  __syncthreads();
  if (tid < d) {
    float z = 0.0f;
    for (int s = 0; s < G; ++s) z += red[s * d + tid];
    a.z[std::size_t(sq) * a.D + std::size_t(h) * d + tid] = z;
  }
}

// ---- LaCT ----

constexpr int kLactThreads = 256;

__device__ __forceinline__ float lact_sigmoid(float x) { return 1.0f / (1.0f + expf(-x)); }

// W0 x and W2 x for the block's fast head: a warp per row of the weights (the lanes read the row's
// consecutive entries, so the loads coalesce), each row's sums by the xor butterfly (a fixed order);
// lane 0 hands row i's two values to store(i, y0, y2). The caller syncs before reading them.
template <class Store>
__device__ __forceinline__ void lact_w0_w2_rows(const float* W0, const float* W2, const float* x,
                                                int dh, int df, Store store) {
  const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5, warps = kLactThreads / 32;
  for (int i = warp; i < dh; i += warps) {
    float y0 = 0.0f, y2 = 0.0f;
    for (int c = lane; c < df; c += 32) {
      y0 += W0[std::size_t(i) * df + c] * x[c];
      y2 += W2[std::size_t(i) * df + c] * x[c];
    }
    y0 = warp_sum(y0);
    y2 = warp_sum(y2);
    if (lane == 0) store(i, y0, y2);
  }
}

// The chunk's update in three kernels, each a no-op unless t > 0 and t ≡ 0 (mod C) (the chunk before
// t is full only there), each sum in a fixed order.
__device__ __forceinline__ bool lact_updates_now(const LactArgs& a) {
  const int t = *a.pos;
  return t > 0 && t % a.C == 0;
}

// The three kernels' grids leave out the batch: each block walks the sequences in turn, so that the
// launches of the steps without an update (all but one in C) stay small at large batches.
//
// 1. One CTA per (token s, fast head): z0 = W0 k̃, z2 = W2 k̃ (a warp per row, the lanes on
// consecutive entries), g = ṽ W1 (a thread per column); then h = silu(z0) z2, dz0 = g z2 silu'(z0),
// dz2 = g silu(z0) into the scratch.
__global__ void __launch_bounds__(kLactThreads) lact_update_vectors_kernel(LactArgs a) {
  if (!lact_updates_now(a)) return;
  extern __shared__ float lact_uv[];
  const int s = blockIdx.x, h = blockIdx.y, tid = threadIdx.x;
  const int df = a.df, dh = a.dh, C = a.C, row = 2 * df + 4;
  for (int sq = 0; sq < a.batch; ++sq) {
    const std::size_t hs = std::size_t(sq) * a.H + h, wsz = std::size_t(dh) * df;
    const float* W0 = a.w0 + hs * wsz;
    const float* W1 = a.w1 + hs * wsz;
    const float* W2 = a.w2 + hs * wsz;
    const float* buf = a.chunk + (hs * C + s) * row;
    float* k = lact_uv;                                              // [d_f]
    float* v = k + df;                                               // [d_f]
    float* z0 = v + df;                                              // [d_h]
    float* z2 = z0 + dh;                                             // [d_h]
    for (int c = tid; c < 2 * df; c += kLactThreads) k[c] = buf[c];  // k̃ then ṽ
    __syncthreads();
    lact_w0_w2_rows(W0, W2, k, dh, df, [&](int i, float y0, float y2) {
      z0[i] = y0;
      z2[i] = y2;
    });
    __syncthreads();
    float* o = a.scratch + (hs * C + s) * 3 * dh;
    for (int i = tid; i < dh; i += kLactThreads) {
      float g = 0.0f;
      for (int r = 0; r < df; ++r) g += v[r] * W1[std::size_t(r) * dh + i];
      const float x = z0[i], sg = lact_sigmoid(x), sl = x * sg, sp = sg * (1.0f + x * (1.0f - sg));
      o[i] = sl * z2[i];
      o[dh + i] = g * z2[i] * sp;
      o[2 * dh + i] = g * sl;
    }
    __syncthreads();  // k, v, z0, z2 are the next sequence's
  }
}

// 2. A thread per weight entry (the grid's x over d_h·d_f, y the fast head), for each sequence: G
// summed over the chunk's tokens in order, then M = G + m̄ M (G without momentum), W ← W + M.
__global__ void __launch_bounds__(kLactThreads) lact_update_step_kernel(LactArgs a) {
  if (!lact_updates_now(a)) return;
  const int h = blockIdx.y;
  const int df = a.df, dh = a.dh, C = a.C, row = 2 * df + 4;
  const std::size_t wsz = std::size_t(dh) * df;
  const std::size_t e = std::size_t(blockIdx.x) * kLactThreads + threadIdx.x;
  if (e >= wsz) return;
  for (int sq = 0; sq < a.batch; ++sq) {
    const std::size_t hs = std::size_t(sq) * a.H + h;
    const float* buf = a.chunk + hs * C * row;
    const float* scr = a.scratch + hs * C * 3 * dh;
    float mbar = 0.0f;
    if (a.m_bias) {
      for (int s = 0; s < C; ++s) mbar += buf[std::size_t(s) * row + 2 * df + 3];
      mbar /= float(C);
    }
    auto step = [&](float* W, float* M, float G) {
      if (a.m_bias) {
        G = G + M[hs * wsz + e] * mbar;
        M[hs * wsz + e] = G;
      }
      W[hs * wsz + e] = W[hs * wsz + e] + G;
    };
    {  // W1 [d_f, d_h]: G = Σ_s ṽ_s[r] (lr1_s h_s[j])
      const int r = int(e / dh), j = int(e % dh);
      float G = 0.0f;
      for (int s = 0; s < C; ++s) {
        const float* b = buf + std::size_t(s) * row;
        G += b[df + r] * (b[2 * df + 1] * scr[std::size_t(s) * 3 * dh + j]);
      }
      step(a.w1, a.m1, G);
    }
    {  // W0, W2 [d_h, d_f]: G = Σ_s dz_s[i] (lr_s k̃_s[c])
      const int i = int(e / df), c = int(e % df);
      float G0 = 0.0f, G2 = 0.0f;
      for (int s = 0; s < C; ++s) {
        const float* b = buf + std::size_t(s) * row;
        const float* o = scr + std::size_t(s) * 3 * dh;
        G0 += o[dh + i] * (b[2 * df] * b[c]);
        G2 += o[2 * dh + i] * (b[2 * df + 2] * b[c]);
      }
      step(a.w0, a.m0, G0);
      step(a.w2, a.m2, G2);
    }
  }
}

// 3. One warp per row (the grid's x over W0's d_h rows, W1's d_f, W2's d_h; y the fast head), for
// each sequence: the row to its norm at the start, W[r] / (‖W[r]‖ + 1e-5) · n[r].
__global__ void __launch_bounds__(32) lact_update_renorm_kernel(LactArgs a) {
  if (!lact_updates_now(a)) return;
  const int h = blockIdx.y, lane = threadIdx.x;
  const int df = a.df, dh = a.dh;
  const std::size_t wsz = std::size_t(dh) * df;
  for (int sq = 0; sq < a.batch; ++sq) {
    const std::size_t hs = std::size_t(sq) * a.H + h;
    int r = blockIdx.x, cols = df;
    float* W = a.w0;
    if (r >= dh + df) {
      W = a.w2, r -= dh + df;
    } else if (r >= dh) {
      W = a.w1, r -= dh, cols = dh;
    }
    float* w = W + hs * wsz + std::size_t(r) * cols;
    float ss = 0.0f;
    for (int c = lane; c < cols; c += 32) ss += w[c] * w[c];
    const float den = sqrtf(warp_sum(ss)) + 1e-5f;
    const float n = a.row_norms[std::size_t(h) * (2 * dh + df) + blockIdx.x];
    for (int c = lane; c < cols; c += 32) w[c] = w[c] / den * n;
  }
}

__global__ void __launch_bounds__(kLactThreads) lact_fast_kernel(LactArgs a) {
  extern __shared__ float lact_sm[];
  const int h = blockIdx.x, sq = blockIdx.y, tid = threadIdx.x;
  const int D = a.D, df = a.df, dh = a.dh, C = a.C, row = 2 * df + 4;
  const Partials P = seq_partials(a.proj, sq);
  const int t = *a.pos;
  const std::size_t hs = std::size_t(sq) * a.H + h, wsz = std::size_t(dh) * df;
  const float* W0 = a.w0 + hs * wsz;
  const float* W1 = a.w1 + hs * wsz;
  const float* W2 = a.w2 + hs * wsz;
  float* slot = a.chunk + (hs * C + t % C) * row;
  float* qf = lact_sm;       // [d_f]; o_f after the apply
  float* kf = qf + df;       // [d_f]
  float* hid = kf + df;      // [d_h]
  // q̃, k̃ = silu(· ⊙ scale + offset), ṽ = silu(v), and the squares of the first two.
  float sq_q = 0.0f, sq_k = 0.0f;
  for (int c = tid; c < df; c += kLactThreads) {
    const int col = h * df + c;
    const float q = sum_partials(P, col), k = sum_partials(P, D + col), v = sum_partials(P, 2 * D + col);
    const float qt = q * a.qk_scale[2 * col] + a.qk_offset[2 * col];
    const float kt = k * a.qk_scale[2 * col + 1] + a.qk_offset[2 * col + 1];
    const float qs = qt * lact_sigmoid(qt), ks = kt * lact_sigmoid(kt);
    qf[c] = qs;
    kf[c] = ks;
    sq_q += qs * qs;
    sq_k += ks * ks;
    slot[df + c] = v * lact_sigmoid(v);
  }
  const float dq = sqrtf(block_sum(sq_q)) + 1e-5f;  // block_sum's barriers publish qf, kf
  const float dk = sqrtf(block_sum(sq_k)) + 1e-5f;
  // L2, then RoPE at t with the attention's heads (pairs (2m, 2m+1) of each d_a-wide head).
  for (int i = tid; 2 * i < df; i += kLactThreads) {
    const int c = 2 * i, j = (h * df + c) % a.da;
    double sd, cd;
    sincos(double(t) * a.freq[j / 2], &sd, &cd);
    const float cs = float(cd), sn = float(sd);
    const float q0 = qf[c] / dq, q1 = qf[c + 1] / dq, k0 = kf[c] / dk, k1 = kf[c + 1] / dk;
    qf[c] = q0 * cs - q1 * sn;
    qf[c + 1] = q0 * sn + q1 * cs;
    const float r0 = k0 * cs - k1 * sn, r1 = k0 * sn + k1 * cs;
    kf[c] = r0;
    kf[c + 1] = r1;
    slot[c] = r0;
    slot[c + 1] = r1;
  }
  __syncthreads();
  // o_f = W1 (silu(W0 q̃) ⊙ (W2 q̃)).
  lact_w0_w2_rows(W0, W2, qf, dh, df,
                  [&](int i, float y0, float y2) { hid[i] = y0 * lact_sigmoid(y0) * y2; });
  __syncthreads();
  const int lane = tid & 31, warp = tid >> 5, warps = kLactThreads / 32;
  for (int r = warp; r < df; r += warps) {
    float o = 0.0f;
    for (int j = lane; j < dh; j += 32) o += W1[std::size_t(r) * dh + j] * hid[j];
    o = warp_sum(o);
    if (lane == 0) qf[r] = o;  // q̃ is read by no one after the barrier above
  }
  __syncthreads();
  float ss = 0.0f;
  for (int r = tid; r < df; r += kLactThreads) ss += qf[r] * qf[r];
  const float rinv = rsqrtf(block_sum(ss) / float(df) + a.norm_eps);
  const float sz = sum_partials(P, a.off_s + h) + a.s_bias[h];
  const float scale = sz * lact_sigmoid(sz);
  const float* z = a.z + std::size_t(sq) * D;
  float* y = a.y + std::size_t(sq) * D;
  for (int r = tid; r < df; r += kLactThreads)
    y[h * df + r] = z[h * df + r] + qf[r] * rinv * a.ttt_norm[r] * scale;
  // The rates (softplus in double, as the CPU layer) and the momentum, into the chunk's slot.
  if (tid < 3) {
    const float zf = sum_partials(P, a.off_lr + 3 * h + tid) + a.lr_bias[3 * h + tid] + a.lr_base;
    const double r = double(zf);
    slot[2 * df + tid] = float(r > 20.0 ? r : fmax(r, 0.0) + log1p(exp(-fabs(r))));
  } else if (tid == 3 && a.m_bias) {
    slot[2 * df + 3] = lact_sigmoid(sum_partials(P, a.off_m + h) + a.m_bias[h]);
  }
}

// ---- softmax attention over the KV cache ----

constexpr int kAttnThreads = 256;
constexpr int kAttnTile = 256;  // cache rows per tile (the scores of one tile sit in shared memory)
constexpr int kAttnMinChunk = 64;  // the fewest rows a split takes

// One thread per interleaved pair of the D columns.
__global__ void attn_prep_kernel(AttnPrepArgs p) {
  const int i = blockIdx.x * blockDim.x + threadIdx.x, sq = blockIdx.y;
  if (2 * i >= p.D) return;
  p.P = seq_partials(p.P, sq);
  p.q += std::size_t(sq) * p.D;
  p.kcache += std::size_t(sq) * p.H * p.cap * p.d;
  p.vcache += std::size_t(sq) * p.H * p.cap * p.d;
  const int c = 2 * i, h = c / p.d, j = c % p.d;
  const int t = *p.pos, row_t = p.ring > 0 ? t % p.ring : t;
  float q0 = sum_partials(p.P, p.off_q + c), q1 = sum_partials(p.P, p.off_q + c + 1);
  float k0 = sum_partials(p.P, p.off_k + c), k1 = sum_partials(p.P, p.off_k + c + 1);
  const float v0 = sum_partials(p.P, p.off_v + c), v1 = sum_partials(p.P, p.off_v + c + 1);
  if (p.freq) {
    // The angle in double and its cos and sin rounded to float, as the CPU's rope_apply.
    double sd, cd;
    sincos(double(t) * p.freq[j / 2], &sd, &cd);
    const float cs = float(cd), sn = float(sd);
    const float a0 = q0, a1 = q1, b0 = k0, b1 = k1;
    q0 = a0 * cs - a1 * sn;
    q1 = a0 * sn + a1 * cs;
    k0 = b0 * cs - b1 * sn;
    k1 = b0 * sn + b1 * cs;
  }
  p.q[c] = p.scale * q0;
  p.q[c + 1] = p.scale * q1;
  const std::size_t row = (std::size_t(h) * p.cap + row_t) * p.d + j;
  p.kcache[row] = k0;
  p.kcache[row + 1] = k1;
  p.vcache[row] = v0;
  p.vcache[row + 1] = v1;
}

// Max over the block (all threads call it; the result is returned to every thread).
__device__ float block_max(float v) {
  __shared__ float warp_part[kRowThreads / 32];
  __shared__ float total;
  const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
  for (int o = 16; o > 0; o >>= 1) v = fmaxf(v, __shfl_xor_sync(0xffffffffu, v, o));
  __syncthreads();
  if (lane == 0) warp_part[warp] = v;
  __syncthreads();
  if (warp == 0) {
    float s = lane < int(blockDim.x >> 5) ? warp_part[lane] : -INFINITY;
    for (int o = 16; o > 0; o >>= 1) s = fmaxf(s, __shfl_xor_sync(0xffffffffu, s, o));
    if (lane == 0) total = s;
  }
  __syncthreads();
  return total;
}

// Σ over the G lanes of an aligned group (G a power of two ≤ 32; every lane of the warp calls it).
template <int G>
__device__ __forceinline__ float group_sum(float v) {
#pragma unroll
  for (int o = G / 2; o > 0; o >>= 1) v += __shfl_xor_sync(0xffffffffu, v, o);
  return v;
}

__device__ __forceinline__ float dot4(float4 a, float4 b) {
  return (a.x * b.x + a.y * b.y) + (a.z * b.z + a.w * b.w);
}

// One block per (split, head). A cache row of d floats is G = d/4 lanes' float4s; the block covers
// R = 256/G rows at a time: thread (r, c4) reads float4 c4 of rows r, r + R, ... for the scores (then
// summed over the group's lanes) and for the weighted sum of V, whose R row-slices are added in
// order at the end.
template <int G>
__global__ void __launch_bounds__(kAttnThreads) attn_split_kernel(AttnArgs a) {
  constexpr int R = kAttnThreads / G;
  static_assert(kAttnTile % R == 0);
  __shared__ float p[kAttnTile];
  __shared__ float4 red[kAttnThreads];
  const int split = blockIdx.x, h = blockIdx.y, S = gridDim.x, d = a.d, sq = blockIdx.z;
  a.q += std::size_t(sq) * a.H * d;
  a.kcache += std::size_t(sq) * a.H * a.cap * d;
  a.vcache += std::size_t(sq) * a.H * a.cap * d;
  a.part_o += std::size_t(sq) * a.H * S * d;
  a.part_ml += std::size_t(sq) * a.H * S * 2;
  const int tid = threadIdx.x, c4 = tid % G, r = tid / G;
  const int L = (a.ring > 0 ? min(*a.pos, a.ring - 1) : *a.pos) + 1;
  const int chunk = max((L + S - 1) / S, kAttnMinChunk);
  const int j0 = min(L, split * chunk), j1 = min(L, j0 + chunk);
  const float4 q4 = reinterpret_cast<const float4*>(a.q + std::size_t(h) * d)[c4];
  const float4* K4 = reinterpret_cast<const float4*>(a.kcache + std::size_t(h) * a.cap * d);
  const float4* V4 = reinterpret_cast<const float4*>(a.vcache + std::size_t(h) * a.cap * d);
  float m = -INFINITY, l = 0.0f;
  float4 acc = make_float4(0.0f, 0.0f, 0.0f, 0.0f);
  for (int t0 = j0; t0 < j1; t0 += kAttnTile) {
    const int n = min(kAttnTile, j1 - t0);
    // The same trip count for every lane, so that the group sums' shuffles see the whole warp.
#pragma unroll 4
    for (int i = r; i < kAttnTile; i += R) {
      float s = 0.0f;
      if (i < n) s = dot4(q4, __ldg(K4 + std::size_t(t0 + i) * G + c4));
      s = group_sum<G>(s);
      if (c4 == 0 && i < n) p[i] = s;
    }
    __syncthreads();
    float mx = -INFINITY;
    for (int i = tid; i < n; i += kAttnThreads) mx = fmaxf(mx, p[i]);
    const float m_new = fmaxf(m, block_max(mx));
    const float corr = expf(m - m_new);  // 0 for the first tile (m = −∞)
    float sum = 0.0f;
    for (int i = tid; i < n; i += kAttnThreads) {
      const float e = expf(p[i] - m_new);
      p[i] = e;
      sum += e;
    }
    l = l * corr + block_sum(sum);  // block_sum's barriers also publish p
    m = m_new;
    acc.x *= corr;
    acc.y *= corr;
    acc.z *= corr;
    acc.w *= corr;
#pragma unroll 4
    for (int i = r; i < n; i += R) {
      const float w = p[i];
      const float4 v = __ldg(V4 + std::size_t(t0 + i) * G + c4);
      acc.x += w * v.x;
      acc.y += w * v.y;
      acc.z += w * v.z;
      acc.w += w * v.w;
    }
    __syncthreads();  // p is rewritten by the next tile
  }
  red[tid] = acc;
  __syncthreads();
  const std::size_t hs = std::size_t(h) * S + split;
  if (tid < G) {
    float4 t = red[tid];
    for (int g = 1; g < R; ++g) {
      const float4 u = red[g * G + tid];
      t.x += u.x;
      t.y += u.y;
      t.z += u.z;
      t.w += u.w;
    }
    reinterpret_cast<float4*>(a.part_o + hs * d)[tid] = t;
  }
  if (tid == 0) {
    a.part_ml[2 * hs] = m;
    a.part_ml[2 * hs + 1] = l;
  }
}

// One block per head, one thread per column: the splits combined in order (empty ones, l = 0, skipped).
__global__ void attn_combine_kernel(AttnArgs a) {
  const int h = blockIdx.x, c = threadIdx.x, S = a.S, d = a.d, sq = blockIdx.y;
  if (c >= d) return;
  a.part_o += std::size_t(sq) * a.H * S * d;
  a.part_ml += std::size_t(sq) * a.H * S * 2;
  a.z += std::size_t(sq) * a.H * d;
  const float* ml = a.part_ml + std::size_t(h) * S * 2;
  float M = -INFINITY;
  for (int s = 0; s < S; ++s)
    if (ml[2 * s + 1] > 0.0f) M = fmaxf(M, ml[2 * s]);
  float num = 0.0f, den = 0.0f;
  for (int s = 0; s < S; ++s) {
    const float ls = ml[2 * s + 1];
    if (!(ls > 0.0f)) continue;
    const float w = expf(ml[2 * s] - M);
    num += w * a.part_o[(std::size_t(h) * S + s) * d + c];
    den += w * ls;
  }
  a.z[std::size_t(h) * d + c] = num / den;
}

// One CTA per sequence: the largest value and its first index (ties: the lower index, as
// std::max_element), each thread over a strided share, then the block in a fixed order.
__global__ void __launch_bounds__(kRowThreads)
    argmax_kernel(const float* logits, int n, int ld, int* next) {
  __shared__ float wv[kRowThreads / 32];
  __shared__ int wi[kRowThreads / 32];
  const float* x = logits + std::size_t(blockIdx.x) * ld;
  float best = -INFINITY;
  int bi = n;
  for (int c = threadIdx.x; c < n; c += kRowThreads) {
    const float v = x[c];
    if (v > best || bi == n) {
      best = v;
      bi = c;
    }
  }
  const auto better = [](float v, int i, float bv, int bj) {
    return v > bv || (v == bv && i < bj);
  };
  for (int o = 16; o > 0; o >>= 1) {
    const float v = __shfl_xor_sync(0xffffffffu, best, o);
    const int i = __shfl_xor_sync(0xffffffffu, bi, o);
    if (i < n && (bi == n || better(v, i, best, bi))) {
      best = v;
      bi = i;
    }
  }
  const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
  if (lane == 0) {
    wv[warp] = best;
    wi[warp] = bi;
  }
  __syncthreads();
  if (threadIdx.x == 0) {
    for (int w = 1; w < int(blockDim.x >> 5); ++w)
      if (wi[w] < n && (bi == n || better(wv[w], wi[w], best, bi))) {
        best = wv[w];
        bi = wi[w];
      }
    next[blockIdx.x] = bi;
  }
}

// One thread per entry of the [batch, F] hidden vector; silu(G)·U as the swiglu products form it
// while loading.
__global__ void swiglu_rows_kernel(const float* __restrict__ gu, int ldgu, int F,
                                   float* __restrict__ out, long n) {
  for (long i = long(blockIdx.x) * blockDim.x + threadIdx.x; i < n;
       i += long(gridDim.x) * blockDim.x) {
    const long s = i / F, c = i % F;
    const float g = gu[s * ldgu + c], u = gu[s * ldgu + F + c];
    out[i] = g * sigmoidf_(g) * u;
  }
}

}  // namespace

GemvPlan gemv_plan(int K, int N, int sms) {
  GemvPlan g;
  g.K = K;
  g.N = N;
  g.ld = (N + 3) / 4 * 4;
  g.tiles = (g.ld + kGemvCols - 1) / kGemvCols;
  const int want = std::max(1, (2 * std::max(sms, 1) + g.tiles - 1) / g.tiles);
  const int max_split = std::max(1, K / 16);
  const int S = std::min(want, max_split);
  g.kc = std::min(std::max((K + S - 1) / S, 1), kDecodeMaxChunk);
  g.S = (K + g.kc - 1) / g.kc;
  return g;
}

void decode_gemv(const GemvPlan& g, const float* x, const float* W, GemvScratch sc, float* y, cudaStream_t stream) {
  const dim3 grid(g.tiles, g.S);
  gemv_kernel<false><<<grid, kGemvThreads, 0, stream>>>(x, W, g.K, g.ld, g.kc, sc.part, y, sc.counters);
  TTTLAB_CUDA_CHECK(cudaGetLastError());
}

void decode_gemv_swiglu(const GemvPlan& g, const float* gu, const float* W, GemvScratch sc, float* y,
                        cudaStream_t stream) {
  const dim3 grid(g.tiles, g.S);
  gemv_kernel<true><<<grid, kGemvThreads, 0, stream>>>(gu, W, g.K, g.ld, g.kc, sc.part, y, sc.counters);
  TTTLAB_CUDA_CHECK(cudaGetLastError());
}

std::size_t batch_gemv_partial_floats(const GemvPlan& g, int batch) {
  return std::size_t(g.S) * std::size_t(batch) * g.ld;
}

std::size_t batch_gemv_counters(const GemvPlan& g, int batch) {
  return std::size_t(g.tiles) * std::size_t((batch + kDecodeGemvGroup - 1) / kDecodeGemvGroup);
}

void decode_gemv_batch(const GemvPlan& g, int batch, bool swiglu, const float* x, int ldx,
                       const float* W, GemvScratch sc, float* y, cudaStream_t stream) {
  if (batch < 1 || g.tiles > 65535 || g.S > 65535)
    throw std::invalid_argument("decode_gemv_batch: batch " + std::to_string(batch) + ", " +
                                std::to_string(g.tiles) + " tiles, " + std::to_string(g.S) +
                                " splits out of range");
  const dim3 grid((batch + kDecodeGemvGroup - 1) / kDecodeGemvGroup, g.tiles, g.S);
  if (swiglu)
    gemv_batch_kernel<true><<<grid, kGemvThreads, 0, stream>>>(x, ldx, W, g.K, g.ld, g.kc, batch,
                                                               sc.part, y, sc.counters);
  else
    gemv_batch_kernel<false><<<grid, kGemvThreads, 0, stream>>>(x, ldx, W, g.K, g.ld, g.kc, batch,
                                                                sc.part, y, sc.counters);
  TTTLAB_CUDA_CHECK(cudaGetLastError());
}

void decode_swiglu_rows(const float* gu, int ldgu, int F, float* hidden, int batch,
                        cudaStream_t stream) {
  if (batch < 1 || F < 1 || ldgu < 2 * F)
    throw std::invalid_argument("decode_swiglu_rows: batch " + std::to_string(batch) + ", F " +
                                std::to_string(F) + ", ldgu " + std::to_string(ldgu));
  const long n = long(batch) * F;
  const int threads = 256;
  const long blocks = std::min<long>((n + threads - 1) / threads, 65535);
  swiglu_rows_kernel<<<unsigned(blocks), threads, 0, stream>>>(gu, ldgu, F, hidden, n);
  TTTLAB_CUDA_CHECK(cudaGetLastError());
}

void decode_argmax(const float* logits, int n, int ld, int batch, int* next, cudaStream_t stream) {
  argmax_kernel<<<batch, kRowThreads, 0, stream>>>(logits, n, ld, next);
  TTTLAB_CUDA_CHECK(cudaGetLastError());
}

void decode_block_in(const BlockInArgs& a, cudaStream_t stream) {
  block_in_kernel<<<a.batch, kRowThreads, 0, stream>>>(a);
  TTTLAB_CUDA_CHECK(cudaGetLastError());
}

void decode_ttt_prep(const TttPrepArgs& a, cudaStream_t stream) {
  const int threads = 256;
  const int n = std::max(a.D / 2, a.H);
  ttt_prep_kernel<<<dim3((n + threads - 1) / threads, a.batch), threads, 0, stream>>>(a);
  TTTLAB_CUDA_CHECK(cudaGetLastError());
}

void decode_post(const float* O, const float* w, const float* b, float eps, const float* gpre,
                 float* y, int D, int batch, cudaStream_t stream) {
  post_kernel<<<batch, kRowThreads, 0, stream>>>(O, w, b, eps, gpre, y, D);
  TTTLAB_CUDA_CHECK(cudaGetLastError());
}

void decode_add_norm(float* h, Partials delta, const float* w, float eps, float* a, int D,
                     int batch, cudaStream_t stream) {
  add_norm_kernel<<<batch, kRowThreads, 0, stream>>>(h, delta, w, eps, a, D);
  TTTLAB_CUDA_CHECK(cudaGetLastError());
}

void decode_mamba2_conv(const Mamba2ConvArgs& a, cudaStream_t stream) {
  const int threads = 256;
  const int n = std::max(a.cd, a.H);
  mamba2_conv_kernel<<<dim3((n + threads - 1) / threads, a.batch), threads, 0, stream>>>(a);
  TTTLAB_CUDA_CHECK(cudaGetLastError());
}

void decode_mamba2_ssm(const Mamba2SsmArgs& a, cudaStream_t stream) {
  mamba2_ssm_kernel<<<dim3(a.H, a.batch), kSsmThreads, 0, stream>>>(a);
  TTTLAB_CUDA_CHECK(cudaGetLastError());
}

void decode_rms_scale(const float* g, const float* w, float eps, float* y, int n, int batch,
                      cudaStream_t stream) {
  rms_scale_kernel<<<batch, kRowThreads, 0, stream>>>(g, w, eps, y, n);
  TTTLAB_CUDA_CHECK(cudaGetLastError());
}

void decode_deltanet_prep(const DeltaNetPrepArgs& a, cudaStream_t stream) {
  const int threads = 256;
  const int n = std::max(3 * a.D, a.H);
  deltanet_prep_kernel<<<dim3((n + threads - 1) / threads, a.batch), threads, 0, stream>>>(a);
  TTTLAB_CUDA_CHECK(cudaGetLastError());
}

void decode_deltanet_step(const DeltaNetStepArgs& a, cudaStream_t stream) {
  if (a.d < 1 || a.d > kDeltaNetMaxHeadDim)
    throw std::invalid_argument("decode_deltanet_step: head dim " + std::to_string(a.d) +
                                " is not in 1.." + std::to_string(kDeltaNetMaxHeadDim));
  deltanet_step_kernel<<<dim3(a.H, a.batch), kDnThreads, 0, stream>>>(a);
  TTTLAB_CUDA_CHECK(cudaGetLastError());
}

void decode_titans_step(const TitansStepArgs& a, cudaStream_t stream) {
  if (a.d < 1 || a.d > kTitansMaxHeadDim)
    throw std::invalid_argument("decode_titans_step: head dim " + std::to_string(a.d) +
                                " is not in 1.." + std::to_string(kTitansMaxHeadDim));
  titans_step_kernel<<<dim3(a.H, a.batch), kDnThreads, 0, stream>>>(a);
  TTTLAB_CUDA_CHECK(cudaGetLastError());
}

void decode_linear_attn_step(const LinearAttnStepArgs& a, cudaStream_t stream) {
  if (a.d < 1 || a.d > kLinearAttnMaxHeadDim)
    throw std::invalid_argument("decode_linear_attn_step: head dim " + std::to_string(a.d) +
                                " is not in 1.." + std::to_string(kLinearAttnMaxHeadDim));
  linear_attn_step_kernel<<<dim3(a.H, a.batch), kDnThreads, 0, stream>>>(a);
  TTTLAB_CUDA_CHECK(cudaGetLastError());
}

void decode_lact_update(const LactArgs& a, cudaStream_t stream) {
  const std::size_t smem = std::size_t(2 * a.df + 2 * a.dh) * sizeof(float);
  lact_update_vectors_kernel<<<dim3(a.C, a.H), kLactThreads, smem, stream>>>(a);
  TTTLAB_CUDA_CHECK(cudaGetLastError());
  const std::size_t wsz = std::size_t(a.dh) * a.df;
  lact_update_step_kernel<<<dim3(unsigned((wsz + kLactThreads - 1) / kLactThreads), a.H),
                            kLactThreads, 0, stream>>>(a);
  TTTLAB_CUDA_CHECK(cudaGetLastError());
  lact_update_renorm_kernel<<<dim3(2 * a.dh + a.df, a.H), 32, 0, stream>>>(a);
  TTTLAB_CUDA_CHECK(cudaGetLastError());
}

void decode_lact_fast(const LactArgs& a, cudaStream_t stream) {
  const int floats = 2 * a.df + a.dh;
  if (a.df < 2 || a.df % 2 != 0 || a.dh < 1 || 2 * a.df + 2 * a.dh > kLactDecodeMaxSmemFloats)
    throw std::invalid_argument("decode_lact_fast: d_f " + std::to_string(a.df) + " and d_h " +
                                std::to_string(a.dh) + " need an even d_f and 2 d_f + 2 d_h <= " +
                                std::to_string(kLactDecodeMaxSmemFloats));
  lact_fast_kernel<<<dim3(a.H, a.batch), kLactThreads, std::size_t(floats) * sizeof(float), stream>>>(a);
  TTTLAB_CUDA_CHECK(cudaGetLastError());
}

void decode_attn_prep(const AttnPrepArgs& a, cudaStream_t stream) {
  const int threads = 256;
  const int n = a.D / 2;
  attn_prep_kernel<<<dim3((n + threads - 1) / threads, a.batch), threads, 0, stream>>>(a);
  TTTLAB_CUDA_CHECK(cudaGetLastError());
}

bool decode_attn_head_dim_ok(int d) { return d >= 8 && d <= 128 && (d & (d - 1)) == 0; }

int decode_attn_splits(int H, long cap, int sms) {
  const long want = (4L * std::max(sms, 1) + H - 1) / std::max(H, 1);
  const long most = (cap + kAttnMinChunk - 1) / kAttnMinChunk;
  return int(std::max(1L, std::min(want, most)));
}

void decode_attention(const AttnArgs& a, cudaStream_t stream) {
  const dim3 grid(a.S, a.H, a.batch);
  switch (a.d / 4) {
    case 2: attn_split_kernel<2><<<grid, kAttnThreads, 0, stream>>>(a); break;
    case 4: attn_split_kernel<4><<<grid, kAttnThreads, 0, stream>>>(a); break;
    case 8: attn_split_kernel<8><<<grid, kAttnThreads, 0, stream>>>(a); break;
    case 16: attn_split_kernel<16><<<grid, kAttnThreads, 0, stream>>>(a); break;
    case 32: attn_split_kernel<32><<<grid, kAttnThreads, 0, stream>>>(a); break;
    default:
      throw std::invalid_argument("decode_attention: head dim " + std::to_string(a.d) +
                                  " is not a power of two in 8..128");
  }
  TTTLAB_CUDA_CHECK(cudaGetLastError());
  attn_combine_kernel<<<dim3(a.H, a.batch), 128, 0, stream>>>(a);
  TTTLAB_CUDA_CHECK(cudaGetLastError());
}

}  // namespace tttlab::kernels::detail
