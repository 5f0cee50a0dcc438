// TTT-Linear decode on the GPU: one token per sequence in the primal form (tttlab/kernels/ttt.hpp;
// maths in docs/MATH.md §6 and §4.1; the CPU engine's inner_step in core/src/ttt/inner.cpp). One
// block of 256 threads per (sequence, head): the token's loss gradient at the committed state is
// added, λ-weighted, to the accumulators; the output is read with W_t = W − τ·A_W; at the end of a
// mini-batch the state is committed. Row-wise LayerNorm work uses the warp row helpers of
// ttt_common.cuh.
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

struct DecodeParams {
  const float *q, *k, *v, *lam, *tau, *gamma, *beta;
  float *W, *c, *aW, *ac, *o;
  int B, H, d, b, pos;
  bool ln, res, bias;
  float eps;
};

constexpr int kDecodeThreads = 256;

// Thread (c0, g0) = (tid mod d, tid / d) owns column c0 of the rows k ≡ g0 (mod G), G = 256 / d ≥ 2
// row slices: every element of W and A_W is read and written by exactly one thread, and the column
// sums over the slices are added in a fixed order (deterministic). Spreading the rows over all 256
// threads, with the state pointers __restrict__ so that the loads of several rows are in flight
// before the accumulator stores, matters at batch 1, where a decode step has only B·H blocks: one
// thread per column walking all d rows serially took ~35 µs per block at d = 64 on an H100.
__global__ void __launch_bounds__(kDecodeThreads) linear_decode(DecodeParams p) {
  __shared__ float sq[kMaxHeadDim], sk[kMaxHeadDim], sz[kMaxHeadDim], sg[kMaxHeadDim];
  __shared__ float part[kDecodeThreads];
  const int blk = blockIdx.x, h = blk % p.H;
  const int d = p.d, tid = threadIdx.x, lane = tid & 31;
  const int G = kDecodeThreads / d, c0 = tid % d, g0 = tid / d;
  const std::size_t row = std::size_t(blk) * d;  // (n·H + h)·d: the token's head slice
  for (int c = tid; c < d; c += kDecodeThreads) {
    sq[c] = p.q[row + c];
    sk[c] = p.k[row + c];
  }
  __syncthreads();
  float* __restrict__ W = p.W + std::size_t(blk) * d * d;
  float* __restrict__ aW = p.aW + std::size_t(blk) * d * d;
  if (g0 < G) {
    float acc = 0.0f;
#pragma unroll 4
    for (int k = g0; k < d; k += G) acc += sk[k] * W[std::size_t(k) * d + c0];
    part[g0 * d + c0] = acc;
  }
  __syncthreads();
  for (int c = tid; c < d; c += kDecodeThreads) {
    float acc = p.bias ? p.c[row + c] : 0.0f;
    for (int g = 0; g < G; ++g) acc += part[g * d + c];
    sz[c] = acc;
  }
  __syncthreads();
  if (tid < 32) decode_loss_grad(p, sz, sk, sg, row, h, d, lane);
  __syncthreads();
  // Accumulate, materialise W_t, read out (partial over the thread's rows), commit.
  const float lam = p.lam[blk], tp = p.tau[p.pos];
  const bool commit = p.pos + 1 == p.b;
  if (g0 < G) {
    const float gc = sg[c0];
    float zb = 0.0f;
#pragma unroll 4
    for (int k = g0; k < d; k += G) {
      const std::size_t e = std::size_t(k) * d + c0;
      const float w = decode_state_step(W[e], aW[e], aW[e] + lam * sk[k] * gc, tp, commit);
      zb += sq[k] * w;
    }
    part[g0 * d + c0] = zb;
  }
  __syncthreads();
  for (int c = tid; c < d; c += kDecodeThreads) {
    float zb = 0.0f;
    for (int g = 0; g < G; ++g) zb += part[g * d + c];
    if (p.bias)
      zb += decode_state_step(p.c[row + c], p.ac[row + c], p.ac[row + c] + lam * sg[c], tp, commit);
    sz[c] = zb;
  }
  __syncthreads();
  if (tid < 32) decode_output(p, sz, sq, row, h, d, lane);
}

}  // namespace
}  // namespace detail

using namespace detail;

void ttt_linear_decode_step(const TttLinearDecodeArgs& a) {
  const char* fn = "ttt_linear_decode_step";
  const TttDims D = checked_decode_dims(fn, a, a.pos);
  for (auto [ptr, name] :
       {std::pair<const void*, const char*>{a.q, "q"}, {a.k, "k"}, {a.v, "v"},
        {a.lambda, "lambda"}, {a.tau, "tau"}, {a.W, "W"}, {a.acc_W, "acc_W"}, {a.o, "o"}})
    check_ptr(fn, ptr, name);
  if (a.opt.bias) {
    check_ptr(fn, a.b, "b (bias is on)");
    check_ptr(fn, a.acc_b, "acc_b (bias is on)");
  }
  check_ln_params(fn, a);
  DecodeParams p{};
  set_decode_params(p, a, D);
  p.W = a.W;
  p.c = a.b;
  p.aW = a.acc_W;
  p.ac = a.acc_b;
  linear_decode<<<D.batch * D.heads, kDecodeThreads, 0, a.stream>>>(p);
  TTTLAB_CUDA_CHECK(cudaGetLastError());
}

}  // namespace tttlab::kernels
