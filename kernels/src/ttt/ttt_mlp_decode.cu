// TTT-MLP decode on the GPU: one token per sequence in the primal form (tttlab/kernels/ttt.hpp;
// maths in docs/MATH.md §5, §6; the CPU engine's inner_forward_primal, MLP branch, in
// core/src/ttt/inner.cpp). One block of 1024 threads per (sequence, head), the model of
// ttt_linear_decode.cu: the token's gradients at the committed state are added, λ-weighted, to the
// accumulators; the output is read with W_t = W − τ·A for all four tensors; at the end of a
// mini-batch the state is committed. Every state element is read and written by exactly one thread,
// so the update needs no atomics and the result is the same run to run.
//
// Work split: the 4d-wide products (z1 = k·W1, the layer-1 read-out) give each thread a hidden
// unit j and a slice of W1's rows (GJ = 1024 / 4d slices; coalesced across j). The d-wide products
// (z2 = x2·W2, the layer-2 read-out) give each thread a column c and a slice of the hidden rows
// (G = 1024 / d slices). Slices are summed afterwards in a fixed order. g2·W2ᵀ takes one warp per
// hidden row (coalesced along c). At batch 1 a step has only H blocks, each moving its head's whole
// state (~48·d² bytes at 4d hidden units): the 1024 threads, and __restrict__ state pointers, keep
// enough loads in flight per SM (256 threads walking the rows serially were ~4x slower).
#include <cuda_runtime.h>

#include <cstddef>
#include <string>
#include <utility>

#include "common/cuda_check.hpp"
#include "ttt/ttt_common.cuh"
#include "ttt/ttt_decode.cuh"
#include "ttt/ttt_host.hpp"
#include "tttlab/kernels/ttt.hpp"

namespace tttlab::kernels {
namespace detail {
namespace {

struct MlpDecodeParams {
  const float *q, *k, *v, *lam, *tau, *gamma, *beta;
  float *W1, *b1, *W2, *b2, *aW1, *ab1, *aW2, *ab2, *o;
  int B, H, d, b, pos;
  bool ln, res, bias;
  float eps;
};

constexpr int kMlpDecodeThreads = 1024;
constexpr int kMaxHidden = 4 * kMaxHeadDim;

__global__ void __launch_bounds__(kMlpDecodeThreads) mlp_decode(MlpDecodeParams p) {
  __shared__ float sq[kMaxHeadDim], sk[kMaxHeadDim], sz2[kMaxHeadDim], sg2[kMaxHeadDim];
  __shared__ float sz1[kMaxHidden], sx2[kMaxHidden], sg1[kMaxHidden], sxb[kMaxHidden];
  __shared__ float part[kMlpDecodeThreads];
  const int blk = blockIdx.x, h = blk % p.H;
  const int d = p.d, hid = 4 * d, tid = threadIdx.x, lane = tid & 31, warp = tid >> 5;
  const int G = kMlpDecodeThreads / d;     // row slices of the d-wide products (≥ 8)
  const int GJ = kMlpDecodeThreads / hid;  // row slices of the 4d-wide products (≥ 2)
  const int j0 = tid % hid, gj0 = tid / hid;
  const std::size_t row = std::size_t(blk) * d;  // the token's head slice, and b2's offset
  const std::size_t hrow = std::size_t(blk) * hid;  // b1's offset
  // __restrict__: the four state tensors never alias, so the loads of several rows can be issued
  // before the accumulator stores (the step is bound by memory latency at batch 1).
  float* __restrict__ W1 = p.W1 + std::size_t(blk) * d * hid;
  float* __restrict__ aW1 = p.aW1 + std::size_t(blk) * d * hid;
  float* __restrict__ W2 = p.W2 + std::size_t(blk) * hid * d;
  float* __restrict__ aW2 = p.aW2 + std::size_t(blk) * hid * d;
  for (int c = tid; c < d; c += kMlpDecodeThreads) {
    sq[c] = p.q[row + c];
    sk[c] = p.k[row + c];
  }
  __syncthreads();

  // Layer 1 at the committed state: z1 = k·W1 + b1, x2 = gelu(z1); thread (j0, gj0) sums the rows
  // kk ≡ gj0 (mod GJ) of column j0.
  if (gj0 < GJ) {
    float acc = 0.0f;
#pragma unroll 4
    for (int kk = gj0; kk < d; kk += GJ) acc += sk[kk] * W1[std::size_t(kk) * hid + j0];
    part[gj0 * hid + j0] = acc;
  }
  __syncthreads();
  for (int j = tid; j < hid; j += kMlpDecodeThreads) {
    float acc = p.bias ? p.b1[hrow + j] : 0.0f;
    for (int g = 0; g < GJ; ++g) acc += part[g * hid + j];
    sz1[j] = acc;
    sx2[j] = gelu_tanh(acc);
  }
  __syncthreads();

  // Layer 2: z2 = x2·W2 + b2, partial sums over the slices j ≡ g (mod G).
  const int c0 = tid % d, g0 = tid / d;
  if (g0 < G) {
    float acc = 0.0f;
#pragma unroll 4
    for (int j = g0; j < hid; j += G) acc += sx2[j] * W2[std::size_t(j) * d + c0];
    part[g0 * d + c0] = acc;
  }
  __syncthreads();
  for (int c = tid; c < d; c += kMlpDecodeThreads) {
    float acc = p.bias ? p.b2[row + c] : 0.0f;
    for (int g = 0; g < G; ++g) acc += part[g * d + c];
    sz2[c] = acc;
  }
  __syncthreads();

  // g2 = ∂ℓ/∂z2 (the fused LN + L2 gradient, target v − k or v).
  if (warp == 0) decode_loss_grad(p, sz2, sk, sg2, row, h, d, lane);
  __syncthreads();

  // g1 = (g2·W2ᵀ) ⊙ gelu′(z1): one warp per hidden row j.
  for (int j = warp; j < hid; j += kMlpDecodeThreads / 32) {
    float s = 0.0f;
    for (int c = lane; c < d; c += 32) s += sg2[c] * W2[std::size_t(j) * d + c];
    s = warp_sum(s);
    if (lane == 0) sg1[j] = s * gelu_tanh_grad(sz1[j]);
  }
  __syncthreads();

  const float lam = p.lam[blk], tp = p.tau[p.pos];
  const bool commit = p.pos + 1 == p.b;

  // Layer 1: accumulate, materialise W1_t, read out x̄2 = gelu(q·W1_t + b1_t), commit. Thread
  // (j0, gj0) owns the elements (kk, j0) with kk ≡ gj0 (mod GJ).
  if (gj0 < GJ) {
    const float gj = sg1[j0];
    float zb = 0.0f;
#pragma unroll 4
    for (int kk = gj0; kk < d; kk += GJ) {
      const std::size_t e = std::size_t(kk) * hid + j0;
      const float w = decode_state_step(W1[e], aW1[e], aW1[e] + lam * sk[kk] * gj, tp, commit);
      zb += sq[kk] * w;
    }
    part[gj0 * hid + j0] = zb;
  }
  __syncthreads();
  for (int j = tid; j < hid; j += kMlpDecodeThreads) {
    float zb = 0.0f;
    for (int g = 0; g < GJ; ++g) zb += part[g * hid + j];
    if (p.bias)
      zb += decode_state_step(p.b1[hrow + j], p.ab1[hrow + j], p.ab1[hrow + j] + lam * sg1[j], tp,
                              commit);
    sxb[j] = gelu_tanh(zb);
  }
  __syncthreads();

  // Layer 2: accumulate, materialise W2_t, read out z̄2 = x̄2·W2_t + b2_t, commit. Thread (c0, g0)
  // owns the elements (j, c0) with j ≡ g0 (mod G).
  if (g0 < G) {
    const float gc = sg2[c0];
    float acc = 0.0f;
#pragma unroll 4
    for (int j = g0; j < hid; j += G) {
      const std::size_t e = std::size_t(j) * d + c0;
      const float w = decode_state_step(W2[e], aW2[e], aW2[e] + lam * sx2[j] * gc, tp, commit);
      acc += sxb[j] * w;
    }
    part[g0 * d + c0] = acc;
  }
  __syncthreads();
  for (int c = tid; c < d; c += kMlpDecodeThreads) {
    float zb = 0.0f;
    for (int g = 0; g < G; ++g) zb += part[g * d + c];
    if (p.bias)
      zb += decode_state_step(p.b2[row + c], p.ab2[row + c], p.ab2[row + c] + lam * sg2[c], tp,
                              commit);
    sz2[c] = zb;
  }
  __syncthreads();

  // o = [q +] LN(z̄2).
  if (warp == 0) decode_output(p, sz2, sq, row, h, d, lane);
}

}  // namespace
}  // namespace detail

using namespace detail;

void ttt_mlp_decode_step(const TttMlpDecodeArgs& a) {
  const char* fn = "ttt_mlp_decode_step";
  const TttDims D = checked_decode_dims(fn, a, a.pos);
  for (auto [ptr, name] :
       {std::pair<const void*, const char*>{a.q, "q"}, {a.k, "k"}, {a.v, "v"},
        {a.lambda, "lambda"}, {a.tau, "tau"}, {a.W1, "W1"}, {a.W2, "W2"}, {a.acc_W1, "acc_W1"},
        {a.acc_W2, "acc_W2"}, {a.o, "o"}})
    check_ptr(fn, ptr, name);
  if (a.opt.bias) {
    check_ptr(fn, a.b1, "b1 (bias is on)");
    check_ptr(fn, a.b2, "b2 (bias is on)");
    check_ptr(fn, a.acc_b1, "acc_b1 (bias is on)");
    check_ptr(fn, a.acc_b2, "acc_b2 (bias is on)");
  }
  check_ln_params(fn, a);
  MlpDecodeParams p{};
  set_decode_params(p, a, D);
  p.W1 = a.W1;
  p.b1 = a.b1;
  p.W2 = a.W2;
  p.b2 = a.b2;
  p.aW1 = a.acc_W1;
  p.ab1 = a.acc_b1;
  p.aW2 = a.acc_W2;
  p.ab2 = a.acc_b2;
  mlp_decode<<<D.batch * D.heads, kMlpDecodeThreads, 0, a.stream>>>(p);
  TTTLAB_CUDA_CHECK(cudaGetLastError());
}

}  // namespace tttlab::kernels
