// The matrix fast-weight rules' recurrent forward and backward (see tttlab/kernels/matrix_rules.hpp;
// the maths is docs/MATH.md §11.2 and §11.4, the CPU functions they mirror are matrix_rule_primal and
// matrix_rule_backward in core/src/fastweight/matrix_rules.cpp).
//
// One block per (sequence, head), blockIdx = (h, b). Thread tid is (g, c) = (tid / CV, tid % CV) with
// CV = d_v rounded up to whole warps and G = 256 / CV row groups (8, 4, 2 or 2: at d_v ≤ 96 with
// CV = 96 two warps idle); it holds S[i, c] for its RPT rows i = g + G·r. A warp thus shares one row
// group and spans 32 columns, so the branches on a row (i < d_k) are uniform within a warp and its
// shuffles always see all 32 lanes. Lanes past d_v and rows past d_k hold zeros and read zeros.
//
// The token's inputs are staged in shared memory, double-buffered so that the next token's are loaded
// in the shadow of the current one's last sum; with that, a token costs two barriers (one where the
// rule has no column sum before its write). Every buffer read after a token's second barrier is
// parity-indexed, so that a fast thread's writes for the next token cannot reach a slow thread's reads.
#include <cuda_runtime.h>

#include <algorithm>
#include <stdexcept>
#include <string>
#include <type_traits>

#include "common/cuda_check.hpp"
#include "tttlab/kernels/matrix_rules.hpp"

namespace tttlab::kernels {
namespace {

constexpr int kThreads = 256;
constexpr int kWarps = kThreads / 32;
constexpr int kMaxDim = 128;
constexpr int kMaxGroups = 8;  // G at d_v ≤ 32
constexpr int kMaxColWarps = kMaxDim / 32;

struct Flags {
  bool beta, alpha, delta;
};

struct Layout {
  int cv, groups, c, g;
  bool active;  // g < G: false only for the idle warps at CV = 96
};
__device__ __forceinline__ Layout layout_of(int d_v) {
  Layout l;
  l.cv = (d_v + 31) / 32 * 32;
  l.groups = kThreads / l.cv;
  l.c = threadIdx.x % l.cv;
  l.g = threadIdx.x / l.cv;
  l.active = l.g < l.groups;
  return l;
}

__device__ __forceinline__ float warp_sum(float v) {
  for (int o = 16; o > 0; o >>= 1) v += __shfl_xor_sync(0xffffffffu, v, o);
  return v;
}

// One token's inputs: zeros past d_k and d_v; β = α = 1 where the rule has none.
struct TokenBuf {
  float q[kMaxDim], k[kMaxDim], v[kMaxDim], dO[kMaxDim];
  float beta, alpha;
};

struct TokenSrc {
  const float *q, *k, *v, *dO, *beta, *alpha;
  int ld_qk, ld_v, ld_do;
};

__device__ __forceinline__ void load_token(TokenBuf& buf, const TokenSrc& s,
                                           const MatrixRuleDims& d, int h, long long row) {
  const int i = threadIdx.x;
  if (i < kMaxDim) {
    const bool rk = i < d.d_k, rv = i < d.d_v;
    buf.q[i] = rk ? s.q[row * s.ld_qk + (long long)h * d.d_k + i] : 0.f;
    buf.k[i] = rk ? s.k[row * s.ld_qk + (long long)h * d.d_k + i] : 0.f;
    buf.v[i] = rv ? s.v[row * s.ld_v + (long long)h * d.d_v + i] : 0.f;
    if (s.dO) buf.dO[i] = rv ? s.dO[row * s.ld_do + (long long)h * d.d_v + i] : 0.f;
  } else if (i == kMaxDim) {
    buf.beta = s.beta ? s.beta[row * d.heads + h] : 1.f;
    buf.alpha = s.alpha ? s.alpha[row * d.heads + h] : 1.f;
  }
}

// S_{t−1} → S_t in place for the thread's rows (§11.2, the CPU's order of operations: decay, then
// the write from the decayed state). Delta rules: the column sum k_t·A through red (one barrier).
template <int RPT>
__device__ __forceinline__ void step(float (&s)[RPT], const TokenBuf& x, const Layout& l,
                                     const MatrixRuleDims& d, Flags f, float (*red)[kMaxDim]) {
  if (f.alpha)
#pragma unroll
    for (int r = 0; r < RPT; ++r) s[r] *= x.alpha;
  float wv;  // what column c of the write multiplies β k_t[i] by
  if (f.delta) {
    float p = 0.f;
#pragma unroll
    for (int r = 0; r < RPT; ++r) {
      const int i = l.g + l.groups * r;
      if (i < d.d_k) p += x.k[i] * s[r];
    }
    if (l.active) red[l.g][l.c] = p;
    __syncthreads();
    float kS = 0.f;
    if (l.active)
      for (int g = 0; g < l.groups; ++g) kS += red[g][l.c];
    wv = -(kS - x.v[l.c]);  // minus the residual k_t A − v_t
  } else {
    wv = x.v[l.c];
  }
#pragma unroll
  for (int r = 0; r < RPT; ++r) {
    const int i = l.g + l.groups * r;
    if (i < d.d_k) s[r] += (x.beta * x.k[i]) * wv;
  }
}

__device__ __forceinline__ std::size_t state_offset(const MatrixRuleDims& d, int n, int h) {
  return (std::size_t(n) * d.heads + h) * std::size_t(d.d_k) * d.d_v;
}

template <int RPT>
__device__ __forceinline__ void load_state(float (&s)[RPT], const float* src, const Layout& l,
                                           const MatrixRuleDims& d) {
#pragma unroll
  for (int r = 0; r < RPT; ++r) {
    const int i = l.g + l.groups * r;
    s[r] = (src && l.active && i < d.d_k && l.c < d.d_v) ? src[std::size_t(i) * d.d_v + l.c] : 0.f;
  }
}
template <int RPT>
__device__ __forceinline__ void store_state(const float (&s)[RPT], float* dst, const Layout& l,
                                            const MatrixRuleDims& d) {
  if (!l.active || l.c >= d.d_v) return;
#pragma unroll
  for (int r = 0; r < RPT; ++r) {
    const int i = l.g + l.groups * r;
    if (i < d.d_k) dst[std::size_t(i) * d.d_v + l.c] = s[r];
  }
}

template <int RPT>
__global__ void __launch_bounds__(kThreads) forward_kernel(MatrixRuleForwardArgs a, Flags f) {
  const MatrixRuleDims& d = a.dims;
  const int h = blockIdx.x, n = blockIdx.y;
  const Layout l = layout_of(d.d_v);
  __shared__ TokenBuf buf[2];
  __shared__ float red[kMaxGroups][kMaxDim];
  __shared__ float ored[2][kMaxGroups][kMaxDim];
  const TokenSrc src{
      a.q,     a.k,    a.v, nullptr, f.beta ? a.beta : nullptr, f.alpha ? a.alpha : nullptr,
      a.ld_qk, a.ld_v, 0};
  const long long row0 = (long long)n * d.seq_len;
  float s[RPT];
  load_state(s, a.S0 ? a.S0 + state_offset(d, n, h) : nullptr, l, d);
  const std::size_t nc = std::size_t((d.seq_len + d.chunk - 1) / d.chunk);
  float* states =
      a.states ? a.states + (std::size_t(n) * d.heads + h) * nc * d.d_k * d.d_v : nullptr;
  load_token(buf[0], src, d, h, row0);
  __syncthreads();
  for (int t = 0; t < d.seq_len; ++t) {
    const int p = t & 1;
    const TokenBuf& x = buf[p];
    if (states && t % d.chunk == 0)
      store_state(s, states + std::size_t(t / d.chunk) * d.d_k * d.d_v, l, d);
    step(s, x, l, d, f, red);
    float o = 0.f;
#pragma unroll
    for (int r = 0; r < RPT; ++r) {
      const int i = l.g + l.groups * r;
      if (i < d.d_k) o += x.q[i] * s[r];
    }
    if (l.active) ored[p][l.g][l.c] = o;
    if (t + 1 < d.seq_len) load_token(buf[p ^ 1], src, d, h, row0 + t + 1);
    __syncthreads();
    if (l.active && l.g == 0 && l.c < d.d_v) {
      float sum = 0.f;
      for (int g = 0; g < l.groups; ++g) sum += ored[p][g][l.c];
      a.o[(row0 + t) * a.ld_o + (long long)h * d.d_v + l.c] = sum;
    }
  }
  if (a.S_final) store_state(s, a.S_final + state_offset(d, n, h), l, d);
}

// The row sums of one token for the thread's rows: part[w][i] = Σ over warp w's 32 columns of u[r],
// w the warp's place within its row group; the caller sums the ≤ 4 warps after a barrier.
template <int RPT, class U>
__device__ __forceinline__ void row_partials(const Layout& l, const MatrixRuleDims& d,
                                             float (*part)[kMaxDim], U u) {
  if (!l.active) return;
  const int w = l.c / 32, lane = threadIdx.x % 32;
#pragma unroll
  for (int r = 0; r < RPT; ++r) {
    const int i = l.g + l.groups * r;
    if (i < d.d_k) {  // uniform in the warp
      const float sum = warp_sum(l.c < d.d_v ? u(r) : 0.f);
      if (lane == 0) part[w][i] = sum;
    }
  }
}
__device__ __forceinline__ float sum_row(const Layout& l, const float (*part)[kMaxDim], int i) {
  float s = 0.f;
  for (int w = 0; w < l.cv / 32; ++w) s += part[w][i];
  return s;
}

template <int RPT>
__global__ void __launch_bounds__(kThreads) backward_kernel(MatrixRuleBackwardArgs a, Flags f) {
  const MatrixRuleDims& d = a.dims;
  const int h = blockIdx.x, n = blockIdx.y;
  const Layout l = layout_of(d.d_v);
  const int lane = threadIdx.x % 32, warp = threadIdx.x / 32;
  __shared__ TokenBuf buf[2];
  __shared__ float red[2][kMaxGroups][kMaxDim];     // column partials: k_t·G and k_t·A
  __shared__ float part[2][kMaxColWarps][kMaxDim];  // row partials, by token parity
  __shared__ float scal[2][2][kWarps];  // dβ and dα partials per warp, by token parity
  const TokenSrc src{
      a.q,     a.k,    a.v,    a.dO, f.beta ? a.beta : nullptr, f.alpha ? a.alpha : nullptr,
      a.ld_qk, a.ld_v, a.ld_do};
  const long long row0 = (long long)n * d.seq_len;
  const std::size_t dkdv = std::size_t(d.d_k) * d.d_v;
  const std::size_t nc = std::size_t((d.seq_len + d.chunk - 1) / d.chunk);
  const float* states = a.states + (std::size_t(n) * d.heads + h) * nc * dkdv;
  float* ws = static_cast<float*>(a.workspace) + (std::size_t(n) * d.heads + h) * d.chunk * dkdv;
  const long long col_k = (long long)h * d.d_k, col_v = (long long)h * d.d_v;

  float G[RPT];  // ∂L/∂S_t, carried backward
  load_state(G, a.dS_final ? a.dS_final + state_offset(d, n, h) : nullptr, l, d);

  for (int c = int(nc) - 1; c >= 0; --c) {
    const int t0 = c * d.chunk, L = min(d.chunk, d.seq_len - t0);
    // The chunk rerun from its stored state: S_{t−1} kept in the workspace, dq_t = dO_t S_tᵀ.
    {
      float s[RPT];
      load_state(s, states + std::size_t(c) * dkdv, l, d);
      __syncthreads();  // the previous phase's last reads of buf and part
      load_token(buf[0], src, d, h, row0 + t0);
      __syncthreads();
      for (int j = 0; j < L; ++j) {
        const int p = j & 1;
        const TokenBuf& x = buf[p];
        store_state(s, ws + std::size_t(j) * dkdv, l, d);
        step(s, x, l, d, f, red[0]);
        row_partials<RPT>(l, d, part[p], [&](int r) { return x.dO[l.c] * s[r]; });
        if (j + 1 < L) load_token(buf[p ^ 1], src, d, h, row0 + t0 + j + 1);
        __syncthreads();
        if (int(threadIdx.x) < d.d_k)
          a.dq[(row0 + t0 + j) * a.ld_dqk + col_k + threadIdx.x] = sum_row(l, part[p], threadIdx.x);
      }
    }
    // The chunk's tokens in reverse (§11.4).
    __syncthreads();
    load_token(buf[(L - 1) & 1], src, d, h, row0 + t0 + L - 1);
    __syncthreads();
    for (int j = L - 1; j >= 0; --j) {
      const int p = j & 1;
      const TokenBuf& x = buf[p];
      const long long row = row0 + t0 + j;
      float sp[RPT];  // S_{t−1}, as this thread stored it
#pragma unroll
      for (int r = 0; r < RPT; ++r) {
        const int i = l.g + l.groups * r;
        sp[r] = (l.active && i < d.d_k && l.c < d.d_v)
                    ? ws[std::size_t(j) * dkdv + std::size_t(i) * d.d_v + l.c]
                    : 0.f;
      }
      const float al = x.alpha, be = x.beta;
      float pk = 0.f, pr = 0.f;
#pragma unroll
      for (int r = 0; r < RPT; ++r) {
        const int i = l.g + l.groups * r;
        if (i < d.d_k) {
          G[r] += x.q[i] * x.dO[l.c];
          pk += x.k[i] * G[r];
          pr += x.k[i] * (al * sp[r]);
        }
      }
      if (l.active) {
        red[0][l.g][l.c] = pk;
        red[1][l.g][l.c] = pr;
      }
      __syncthreads();
      float kap = 0.f, res = 0.f;  // κ = k_t G and, for the delta rules, r = k_t A − v_t
      if (l.active) {
        for (int g = 0; g < l.groups; ++g) kap += red[0][g][l.c];
        if (f.delta) {
          for (int g = 0; g < l.groups; ++g) res += red[1][g][l.c];
          res -= x.v[l.c];
        }
      }
      if (l.active && l.g == 0 && l.c < d.d_v) a.dv[row * a.ld_dv + col_v + l.c] = be * kap;
      if (f.delta)
        row_partials<RPT>(l, d, part[p], [&](int r) { return res * G[r] + kap * (al * sp[r]); });
      else
        row_partials<RPT>(l, d, part[p], [&](int r) { return x.v[l.c] * G[r]; });
      if (f.beta && l.active && l.g == 0) {
        const float sb = warp_sum(l.c < d.d_v ? kap * (f.delta ? res : x.v[l.c]) : 0.f);
        if (lane == 0) scal[p][0][l.c / 32] = sb;
      }
      float pa = 0.f;
#pragma unroll
      for (int r = 0; r < RPT; ++r) {
        const int i = l.g + l.groups * r;
        if (i < d.d_k) {
          const float dA = f.delta ? G[r] - (be * x.k[i]) * kap : G[r];
          pa += dA * sp[r];
          G[r] = f.alpha ? al * dA : dA;
        }
      }
      if (f.alpha) {
        const float sa = warp_sum(l.active && l.c < d.d_v ? pa : 0.f);
        if (lane == 0) scal[p][1][warp] = sa;
      }
      if (j > 0) load_token(buf[p ^ 1], src, d, h, row - 1);
      __syncthreads();
      if (int(threadIdx.x) < d.d_k) {
        const float sum = sum_row(l, part[p], threadIdx.x);
        a.dk[row * a.ld_dqk + col_k + threadIdx.x] = f.delta ? -be * sum : be * sum;
      }
      if (threadIdx.x == kThreads - 1) {
        if (f.beta) {
          float sb = 0.f;
          for (int w = 0; w < l.cv / 32; ++w) sb += scal[p][0][w];
          a.dbeta[row * d.heads + h] = f.delta ? -sb : sb;
        }
        if (f.alpha) {
          float sa = 0.f;
          for (int w = 0; w < (l.groups * l.cv) / 32; ++w) sa += scal[p][1][w];
          a.dalpha[row * d.heads + h] = sa;
        }
      }
    }
  }
  if (a.dS0) store_state(G, a.dS0 + state_offset(d, n, h), l, d);
}

Flags flags_of(MatrixRule rule) { return {uses_beta(rule), uses_alpha(rule), is_delta_rule(rule)}; }

inline void require(bool ok, const char* fn, const std::string& what) {
  if (!ok) throw std::invalid_argument(std::string(fn) + ": " + what);
}

void validate_rule(MatrixRule rule, const char* fn) {
  require(rule == MatrixRule::LinearAttention || rule == MatrixRule::DecayedHebbian ||
              rule == MatrixRule::DeltaNet || rule == MatrixRule::GatedDeltaNet,
          fn, "rule is not one of the four matrix rules");
}

// The rows per thread: the smallest of 4, 16, 64 with G·RPT ≥ d_k.
int rows_per_thread(const MatrixRuleDims& d) {
  const int cv = (d.d_v + 31) / 32 * 32, groups = kThreads / cv;
  const int need = (d.d_k + groups - 1) / groups;
  return need <= 4 ? 4 : need <= 16 ? 16 : 64;
}

template <class F>
void with_rows(const MatrixRuleDims& d, F f) {
  switch (rows_per_thread(d)) {
    case 4: f(std::integral_constant<int, 4>{}); break;
    case 16: f(std::integral_constant<int, 16>{}); break;
    default: f(std::integral_constant<int, 64>{}); break;
  }
}

}  // namespace

std::string matrix_rule_unsupported(const MatrixRuleDims& d) {
  if (d.batch < 1) return "the matrix rules need batch >= 1, got " + std::to_string(d.batch);
  if (d.seq_len < 1) return "the matrix rules need seq_len >= 1, got " + std::to_string(d.seq_len);
  if (d.heads < 1) return "the matrix rules need heads >= 1, got " + std::to_string(d.heads);
  if (d.d_k < 1 || d.d_k > kMaxDim)
    return "the GPU's matrix rules keep the state in registers and need d_k in 1..128, got " +
           std::to_string(d.d_k);
  if (d.d_v < 1 || d.d_v > kMaxDim)
    return "the GPU's matrix rules keep the state in registers and need d_v in 1..128, got " +
           std::to_string(d.d_v);
  if (d.chunk < 1) return "the matrix rules need chunk >= 1, got " + std::to_string(d.chunk);
  if (d.batch > 65535) return "the matrix rules take batch <= 65535 (one grid row per sequence)";
  return {};
}

std::size_t matrix_rule_state_floats(const MatrixRuleDims& d) {
  return std::size_t(d.batch) * d.heads * d.chunks() * d.d_k * d.d_v;
}

std::size_t matrix_rule_backward_workspace_bytes(const MatrixRuleDims& d) {
  return sizeof(float) * std::size_t(d.batch) * d.heads * d.chunk * d.d_k * d.d_v;
}

void matrix_rule_forward(const MatrixRuleForwardArgs& a) {
  const char* fn = "matrix_rule_forward";
  const MatrixRuleDims& d = a.dims;
  const std::string why = matrix_rule_unsupported(d);
  require(why.empty(), fn, why);
  validate_rule(a.rule, fn);
  const Flags f = flags_of(a.rule);
  require(a.q && a.k && a.v && a.o, fn, "q, k, v and o must not be null");
  require(
      f.beta == (a.beta != nullptr), fn,
      std::string("beta must be given exactly where the rule uses it (") + to_string(a.rule) + ")");
  require(f.alpha == (a.alpha != nullptr), fn,
          std::string("alpha must be given exactly where the rule uses it (") + to_string(a.rule) +
              ")");
  require(a.ld_qk >= d.heads * d.d_k, fn, "ld_qk is smaller than H·d_k");
  require(a.ld_v >= d.heads * d.d_v, fn, "ld_v is smaller than H·d_v");
  require(a.ld_o >= d.heads * d.d_v, fn, "ld_o is smaller than H·d_v");
  const dim3 grid(d.heads, d.batch);
  with_rows(d, [&](auto rpt) {
    forward_kernel<decltype(rpt)::value><<<grid, kThreads, 0, a.stream>>>(a, f);
  });
  TTTLAB_CUDA_CHECK(cudaGetLastError());
}

void matrix_rule_backward(const MatrixRuleBackwardArgs& a) {
  const char* fn = "matrix_rule_backward";
  const MatrixRuleDims& d = a.dims;
  const std::string why = matrix_rule_unsupported(d);
  require(why.empty(), fn, why);
  validate_rule(a.rule, fn);
  const Flags f = flags_of(a.rule);
  require(a.q && a.k && a.v && a.states && a.dO && a.dq && a.dk && a.dv && a.workspace, fn,
          "q, k, v, states, dO, dq, dk, dv and workspace must not be null");
  require(f.beta == (a.beta != nullptr) && f.beta == (a.dbeta != nullptr), fn,
          std::string("beta and dbeta must be given exactly where the rule uses beta (") +
              to_string(a.rule) + ")");
  require(f.alpha == (a.alpha != nullptr) && f.alpha == (a.dalpha != nullptr), fn,
          std::string("alpha and dalpha must be given exactly where the rule uses alpha (") +
              to_string(a.rule) + ")");
  require(a.ld_qk >= d.heads * d.d_k, fn, "ld_qk is smaller than H·d_k");
  require(a.ld_v >= d.heads * d.d_v, fn, "ld_v is smaller than H·d_v");
  require(a.ld_do >= d.heads * d.d_v, fn, "ld_do is smaller than H·d_v");
  require(a.ld_dqk >= d.heads * d.d_k, fn, "ld_dqk is smaller than H·d_k");
  require(a.ld_dv >= d.heads * d.d_v, fn, "ld_dv is smaller than H·d_v");
  require(a.workspace_bytes >= matrix_rule_backward_workspace_bytes(d), fn,
          "workspace_bytes is smaller than matrix_rule_backward_workspace_bytes(dims)");
  const dim3 grid(d.heads, d.batch);
  with_rows(d, [&](auto rpt) {
    backward_kernel<decltype(rpt)::value><<<grid, kThreads, 0, a.stream>>>(a, f);
  });
  TTTLAB_CUDA_CHECK(cudaGetLastError());
}

}  // namespace tttlab::kernels
