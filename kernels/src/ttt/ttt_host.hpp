// Host-side helpers of the TTT kernels: argument checks with one-line messages, and the dynamic
// shared-memory limit of the current device. Private to kernels/src.
#pragma once

#include <cuda_runtime_api.h>

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <stdexcept>
#include <string>

#include "common/cuda_check.hpp"
#include "tttlab/kernels/ttt.hpp"

namespace tttlab::kernels::detail {

inline void require(bool ok, const std::string& what) {
  if (!ok) throw std::invalid_argument(what);
}

inline void check_dims(const char* fn, const TttDims& d) {
  const std::string f(fn);
  require(d.batch >= 1 && d.heads >= 1, f + ": batch and heads must be >= 1");
  require(d.seq_len >= 1, f + ": seq_len must be >= 1");
  require(d.mini_batch >= 1 && d.mini_batch <= 64,
          f + ": mini_batch must be in 1..64 (got " + std::to_string(d.mini_batch) + ")");
  require(d.head_dim >= 16 && d.head_dim <= 128 && d.head_dim % 2 == 0,
          f + ": head_dim must be even and in 16..128 (got " + std::to_string(d.head_dim) + ")");
}

// Why a model's TTT layers, of head dim d and mini-batch b, are outside the shapes above (empty:
// inside), as a user choosing --device reads it; `needs` names who asks, with its verb ("the GPU
// decoder needs").
inline std::string ttt_shape_unsupported(int head_dim, int mini_batch, const std::string& needs) {
  if (head_dim < 16 || head_dim > 128 || head_dim % 2 != 0)
    return needs + " a head dim (hidden size / heads) that is even and in 16..128, got " +
           std::to_string(head_dim) + "; use --device cpu";
  if (mini_batch > 64)
    return needs + " a mini-batch b <= 64, got " + std::to_string(mini_batch) +
           "; use --device cpu";
  return {};
}

inline void check_ptr(const char* fn, const void* p, const char* name) {
  if (!p) throw std::invalid_argument(std::string(fn) + ": " + name + " is null");
}

inline void check_eps(const char* fn, const TttOptions& o) {
  require(o.ln_eps > 0.0f, std::string(fn) + ": ln_eps must be > 0");
}

// The largest dynamic shared memory one block of the current device may use (opt-in limit).
inline std::size_t max_dynamic_smem() {
  int dev = 0;
  TTTLAB_CUDA_CHECK(cudaGetDevice(&dev));
  int bytes = 0;
  TTTLAB_CUDA_CHECK(cudaDeviceGetAttribute(&bytes, cudaDevAttrMaxSharedMemoryPerBlockOptin, dev));
  return static_cast<std::size_t>(bytes);
}

// The current device's number of SMs.
inline int multiprocessor_count() {
  int dev = 0, sms = 0;
  TTTLAB_CUDA_CHECK(cudaGetDevice(&dev));
  TTTLAB_CUDA_CHECK(cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, dev));
  return sms;
}

// The loss LayerNorm's γ, β must be given when layer_norm is on. Args: any of the TTT argument
// structs of ttt.hpp (they share the names opt, ln_weight, ln_bias).
template <class Args>
void check_ln_params(const char* fn, const Args& a) {
  if (a.opt.layer_norm) {
    check_ptr(fn, a.ln_weight, "ln_weight (layer_norm is on)");
    check_ptr(fn, a.ln_bias, "ln_bias (layer_norm is on)");
  }
}

// Copies the inputs every TTT kernel reads (Q, K, V, λ, τ and the loss LN's γ, β) from an argument
// struct of ttt.hpp into a kernel's parameter block (members Q, K, V, lam, tau, gamma, beta).
template <class Params, class Args>
void set_token_inputs(Params& p, const Args& a) {
  p.Q = a.Q;
  p.K = a.K;
  p.V = a.V;
  p.lam = a.lambda;
  p.tau = a.tau;
  p.gamma = a.ln_weight;
  p.beta = a.ln_bias;
}

// The per-token gradient pointers of a backward's parameter block (dO in; dQ, dK, dV, dλ out) from
// its argument struct.
template <class Params, class Args>
void set_token_grads(Params& p, const Args& a) {
  p.dO = a.dO;
  p.dQ = a.dQ;
  p.dK = a.dK;
  p.dV = a.dV;
  p.dlam = a.dlambda;
}

// The option fields every TTT kernel's parameter block has: ln, res, bias, eps (TttOptions).
template <class Params>
void set_options(Params& p, const TttOptions& o) {
  p.ln = o.layer_norm;
  p.res = o.residual;
  p.bias = o.bias;
  p.eps = o.ln_eps;
}

// The shape fields B, H, T, d, b of a kernel's parameter block (TttDims).
template <class Params>
void set_dims(Params& p, const TttDims& D) {
  p.B = D.batch;
  p.H = D.heads;
  p.T = D.seq_len;
  p.d = D.head_dim;
  p.b = D.mini_batch;
}

// Whether a device pointer is 16-byte aligned (the vector loads and cp.async of the fast paths).
inline bool aligned16(const void* ptr) { return reinterpret_cast<std::uintptr_t>(ptr) % 16 == 0; }

inline std::size_t ceil_div(std::size_t a, std::size_t b) { return (a + b - 1) / b; }

// The dynamic shared memory to ask for a kernel of `blocks` blocks that needs `bytes`: with
// whole_sm, where the SMs outnumber the blocks (they go one per SM anyway), an SM's whole shared
// memory, which keeps work launched beside the kernel on another stream off its SMs; else bytes.
inline std::size_t whole_sm_bytes(std::size_t bytes, int blocks, bool whole_sm) {
  if (!whole_sm) return bytes;
  return blocks <= multiprocessor_count() ? std::max(bytes, max_dynamic_smem()) : bytes;
}

// Lets kernel `fn` launch with `bytes` of dynamic shared memory (CUDA wants this opt-in above
// 48 KiB).
inline void set_smem_limit(const void* fn, std::size_t bytes) {
  TTTLAB_CUDA_CHECK(cudaFuncSetAttribute(fn, cudaFuncAttributeMaxDynamicSharedMemorySize,
                                         static_cast<int>(bytes)));
}

// The backward kernels' batch reduction of per-(sequence, head) partials, enqueued on `stream`:
// out[h, e] = Σ_n part[n·H + h, e] for h < H, e < len, summed in the order n = 0, 1, …, B − 1
// (deterministic). part is [B·H, len], out [H, len], both device memory; H = 1 with B = rows
// sums all rows (dτ). Defined in ttt_linear_backward.cu.
void sum_over_batch(const float* part, float* out, int B, int H, int len, cudaStream_t stream);

}  // namespace tttlab::kernels::detail
