// Titans' memory, recurrent forward and backward (see tttlab/kernels/titans.hpp; the maths is
// docs/MATH.md §11.9, the CPU functions it mirrors are titans_primal and titans_backward in
// core/src/fastweight/titans.cpp, whose order of operations it keeps).
//
// One block per (sequence, head), blockIdx = (h, n). Thread tid is (g, c) = (tid / CV, tid % CV) with
// CV = d rounded up to whole warps (32 or 64) and G = 256 / CV row groups (8 or 4); it holds M[i, c],
// S[i, c], … for its RPT rows i = g + G·r. A warp thus shares one row group and spans 32 columns, so
// the branches on a row (i < d) are uniform within a warp and its shuffles see all 32 lanes. Lanes past
// d and rows past d hold zeros and read zeros.
//
// A token's d-vectors live in "lane vectors": float x[NJ] in every lane of every warp, lane l holding
// entries l + 32j (NJ = CV / 32), zero past d. Their sums over d are warp shuffles (xor butterflies:
// every lane, and every warp, ends with the same bits), so each warp computes them redundantly and
// thread (g, c) finds entry c in its own registers, x[c / 32]: u reaches the write, dy the dq row sum
// and dd the dk row sum with no barrier.
//
// The token's inputs are staged in shared memory, double-buffered: their global loads are issued at
// the top of the previous token into registers (Staged) and stored into the other buffer before that
// token's last barrier. With two barriers a token (forward, and each of the backward's two walks) the
// single column-sum buffers are safe: a buffer written before a token's barrier k is read between
// barriers k and k+1 of the same token, and written again only after barrier k + 1 or later.
#include <cuda_runtime.h>

#include <cmath>
#include <stdexcept>
#include <string>
#include <type_traits>

#include "common/cuda_check.hpp"
#include "tttlab/kernels/titans.hpp"

namespace tttlab::kernels {
namespace {

constexpr int kThreads = 256;
constexpr int kWarps = kThreads / 32;
constexpr int kMaxDim = 64;
constexpr int kMaxGroups = 8;  // G at d ≤ 32
constexpr int kMaxColWarps = kMaxDim / 32;

struct Layout {
  int cv, groups, c, g, wc, lane, warp;
};
__device__ __forceinline__ Layout layout_of(int d) {
  Layout l;
  l.cv = (d + 31) / 32 * 32;
  l.groups = kThreads / l.cv;
  l.c = threadIdx.x % l.cv;
  l.g = threadIdx.x / l.cv;
  l.wc = l.c / 32;
  l.lane = threadIdx.x % 32;
  l.warp = threadIdx.x / 32;
  return l;
}

__device__ __forceinline__ float warp_sum(float v) {
  for (int o = 16; o > 0; o >>= 1) v += __shfl_xor_sync(0xffffffffu, v, o);
  return v;
}

// Sums over d of lane vectors (entries past d are zero).
template <int NJ>
__device__ __forceinline__ float vsum(const float (&x)[NJ]) {
  float s = 0.f;
#pragma unroll
  for (int j = 0; j < NJ; ++j) s += x[j];
  return warp_sum(s);
}
template <int NJ>
__device__ __forceinline__ float vdot(const float (&x)[NJ], const float (&y)[NJ]) {
  float s = 0.f;
#pragma unroll
  for (int j = 0; j < NJ; ++j) s += x[j] * y[j];
  return warp_sum(s);
}
// Entry 32·j + lane of a lane vector (j = c / 32 for the thread's column c), without indexing the
// register array at run time.
template <int NJ>
__device__ __forceinline__ float pick(const float (&x)[NJ], int j) {
  float r = x[0];
#pragma unroll
  for (int jj = 1; jj < NJ; ++jj)
    if (j == jj) r = x[jj];
  return r;
}

// titans_ln: xhat = (x − mean x) / σ, σ = sqrt(var x + ε) with the biased variance of the centred x;
// returns σ. `in` marks the entries below d.
template <int NJ>
__device__ __forceinline__ float layer_norm(const float (&x)[NJ], const bool (&in)[NJ], int d,
                                            float eps, float (&xhat)[NJ]) {
  const float mu = vsum(x) / float(d);
#pragma unroll
  for (int j = 0; j < NJ; ++j) xhat[j] = in[j] ? x[j] - mu : 0.f;
  const float sigma = sqrtf(vdot(xhat, xhat) / float(d) + eps);
#pragma unroll
  for (int j = 0; j < NJ; ++j) xhat[j] /= sigma;
  return sigma;
}

// The lane vector of column sums: x[c] = Σ_g red[g][c].
template <int NJ>
__device__ __forceinline__ void column_sums(const float (*red)[kMaxDim], const Layout& l,
                                            const bool (&in)[NJ], float (&x)[NJ]) {
#pragma unroll
  for (int j = 0; j < NJ; ++j) {
    float s = 0.f;
    if (in[j])
      for (int g = 0; g < l.groups; ++g) s += red[g][l.lane + 32 * j];
    x[j] = s;
  }
}

// One token's inputs and, for the backward's reverse walk, what its rerun kept; zeros past d.
enum TokenVec { kQ, kK, kV, kDO, kDY, kU, kZH, kG, kE, kTokenVecs };
enum TokenScalar { kTheta, kAlpha, kEta, kSigma, kSg, kSgz, kTokenScalars };
struct TokenBuf {
  float vec[kTokenVecs][kMaxDim];
  float sc[kTokenScalars];
};
// The workspace keeps, per token of a chunk, dy, u, ẑ, g, e (d each, in the order of kDY … kE), then
// σ, Σg, Σ(g ⊙ ẑ) and one float of padding.
constexpr int kKeptVecs = kE - kDY + 1;
__host__ __device__ __forceinline__ std::size_t kept_floats(int d) {
  return std::size_t(kKeptVecs) * d + 4;
}

struct TokenSrc {
  const float *q, *k, *v, *dO, *theta, *alpha, *eta;
  int ld_q, ld_k, ld_v, ld_do, heads, d;
};

// What one thread carries from a token's global loads to its shared buffer: thread i < kMaxDim entry
// i of up to 7 vectors, threads kMaxDim … kMaxDim + 5 one scalar each.
struct Staged {
  float a[7];
};

// The inputs of the forward and of the backward's rerun: q, k, v, dO (where given), θ, α, η.
__device__ __forceinline__ void fetch_inputs(Staged& s, const TokenSrc& src, int h, long long row) {
  const int i = threadIdx.x;
  if (i < kMaxDim) {
    const bool in = i < src.d;
    const long long col = (long long)h * src.d + i;
    s.a[0] = in ? src.q[row * src.ld_q + col] : 0.f;
    s.a[1] = in ? src.k[row * src.ld_k + col] : 0.f;
    s.a[2] = in ? src.v[row * src.ld_v + col] : 0.f;
    s.a[3] = (in && src.dO) ? src.dO[row * src.ld_do + col] : 0.f;
  } else if (i < kMaxDim + 3) {
    const float* p = i == kMaxDim ? src.theta : i == kMaxDim + 1 ? src.alpha : src.eta;
    s.a[0] = p[row * src.heads + h];
  }
}
__device__ __forceinline__ void stage_inputs(TokenBuf& b, const Staged& s) {
  const int i = threadIdx.x;
  if (i < kMaxDim) {
    b.vec[kQ][i] = s.a[0];
    b.vec[kK][i] = s.a[1];
    b.vec[kV][i] = s.a[2];
    b.vec[kDO][i] = s.a[3];
  } else if (i < kMaxDim + 3) {
    b.sc[i - kMaxDim] = s.a[0];
  }
}

// The reverse walk's token: q, k, θ, α, η from the inputs; dy, u, ẑ, g, e, σ, Σg, Σ(g ⊙ ẑ) from the
// rerun's `kept` (this token's, in the workspace; written by other threads before a barrier).
__device__ __forceinline__ void fetch_reverse(Staged& s, const TokenSrc& src, int h, long long row,
                                              const float* kept) {
  const int i = threadIdx.x;
  if (i < kMaxDim) {
    const bool in = i < src.d;
    const long long col = (long long)h * src.d + i;
    s.a[0] = in ? src.q[row * src.ld_q + col] : 0.f;
    s.a[1] = in ? src.k[row * src.ld_k + col] : 0.f;
#pragma unroll
    for (int f = 0; f < kKeptVecs; ++f) s.a[2 + f] = in ? kept[f * src.d + i] : 0.f;
  } else if (i < kMaxDim + 3) {
    const float* p = i == kMaxDim ? src.theta : i == kMaxDim + 1 ? src.alpha : src.eta;
    s.a[0] = p[row * src.heads + h];
  } else if (i < kMaxDim + kTokenScalars) {
    s.a[0] = kept[kKeptVecs * src.d + (i - kMaxDim - 3)];
  }
}
__device__ __forceinline__ void stage_reverse(TokenBuf& b, const Staged& s) {
  const int i = threadIdx.x;
  if (i < kMaxDim) {
    b.vec[kQ][i] = s.a[0];
    b.vec[kK][i] = s.a[1];
#pragma unroll
    for (int f = 0; f < kKeptVecs; ++f) b.vec[kDY + f][i] = s.a[2 + f];
  } else if (i < kMaxDim + kTokenScalars) {
    b.sc[i - kMaxDim] = s.a[0];
  }
}

// A d × d matrix's entries of this thread, row-major at src (null: zeros).
template <int RPT>
__device__ __forceinline__ void load_mat(float (&m)[RPT], const float* src, const Layout& l,
                                         int d) {
#pragma unroll
  for (int r = 0; r < RPT; ++r) {
    const int i = l.g + l.groups * r;
    m[r] = (src && i < d && l.c < d) ? src[std::size_t(i) * d + l.c] : 0.f;
  }
}
template <int RPT>
__device__ __forceinline__ void store_mat(const float (&m)[RPT], float* dst, const Layout& l,
                                          int d) {
  if (l.c >= d) return;
#pragma unroll
  for (int r = 0; r < RPT; ++r) {
    const int i = l.g + l.groups * r;
    if (i < d) dst[std::size_t(i) * d + l.c] = m[r];
  }
}

// This thread's part of the column sum x·m (x a token vector in shared memory).
template <int RPT>
__device__ __forceinline__ float column_partial(const float (&m)[RPT], const float* x,
                                                const Layout& l, int d) {
  float p = 0.f;
#pragma unroll
  for (int r = 0; r < RPT; ++r) {
    const int i = l.g + l.groups * r;
    if (i < d) p += x[i] * m[r];
  }
  return p;
}

// The row sums of one token for the thread's rows: part[w][i] = Σ over warp w's 32 columns of u(r),
// w the warp's place within its row group; write_rows sums the ≤ 2 warps after a barrier.
template <int RPT, class U>
__device__ __forceinline__ void row_partials(const Layout& l, int d, float (*part)[kMaxDim], U u) {
#pragma unroll
  for (int r = 0; r < RPT; ++r) {
    const int i = l.g + l.groups * r;
    if (i < d) {  // uniform in the warp
      const float sum = warp_sum(l.c < d ? u(r) : 0.f);
      if (l.lane == 0) part[l.wc][i] = sum;
    }
  }
}
// Warp 0 only: out[i] = Σ_w part[w][i] + add[i] for the d entries (add a lane vector).
template <int NJ>
__device__ __forceinline__ void write_rows(float* out, const float (*part)[kMaxDim],
                                           const Layout& l, int d, const float (&add)[NJ]) {
#pragma unroll
  for (int j = 0; j < NJ; ++j) {
    const int i = l.lane + 32 * j;
    if (i < d) {
      float s = 0.f;
      for (int w = 0; w < l.cv / 32; ++w) s += part[w][i];
      out[i] = s + add[j];
    }
  }
}

// What one token writes, from z = k_t M_start (its column partials in red) to u, as titans_write:
// ẑ, e = w ⊙ ẑ + bias − v + k, g = e ⊙ w, Σg, Σ(g ⊙ ẑ), u = D·g − (Σg + ẑ·Σ(g ⊙ ẑ)) / (σ D).
template <int NJ>
struct Write {
  float zh[NJ], e[NJ], g[NJ], u[NJ];
  float sigma, sg, sgz;
};
template <int NJ>
__device__ __forceinline__ void token_write(Write<NJ>& o, const float (*red)[kMaxDim],
                                            const TokenBuf& x, const float (&w)[NJ],
                                            const float (&bias)[NJ], const bool (&in)[NJ],
                                            const Layout& l, int d, float eps) {
  float z[NJ];
  column_sums(red, l, in, z);
  o.sigma = layer_norm(z, in, d, eps, o.zh);
#pragma unroll
  for (int j = 0; j < NJ; ++j) {
    const int c = l.lane + 32 * j;
    o.e[j] = in[j] ? w[j] * o.zh[j] + bias[j] - x.vec[kV][c] + x.vec[kK][c] : 0.f;
    o.g[j] = o.e[j] * w[j];
  }
  o.sg = vsum(o.g);
  o.sgz = vdot(o.g, o.zh);
  const float D = float(d), cinv = 1.f / (o.sigma * D);
#pragma unroll
  for (int j = 0; j < NJ; ++j) o.u[j] = in[j] ? D * o.g[j] - cinv * (o.sg + o.sgz * o.zh[j]) : 0.f;
}

// titans_step's update of the thread's entries, given u[c]: S = η S − (2θ k_i) u_c, M = (1 − α) M + S.
template <int RPT>
__device__ __forceinline__ void state_step(float (&M)[RPT], float (&S)[RPT], float uc,
                                           const TokenBuf& x, const Layout& l, int d) {
  const float two_theta = 2.f * x.sc[kTheta], eta = x.sc[kEta], keep = 1.f - x.sc[kAlpha];
#pragma unroll
  for (int r = 0; r < RPT; ++r) {
    const int i = l.g + l.groups * r;
    if (i < d) {
      S[r] = S[r] * eta - (two_theta * x.vec[kK][i]) * uc;
      M[r] = M[r] * keep + S[r];
    }
  }
}

// The LayerNorm's weight and bias of head h as lane vectors, and which entries are below d.
template <int NJ>
__device__ __forceinline__ void head_params(const float* w_all, const float* b_all, int h, int d,
                                            const Layout& l, bool (&in)[NJ], float (&w)[NJ],
                                            float (&bias)[NJ]) {
#pragma unroll
  for (int j = 0; j < NJ; ++j) {
    const int c = l.lane + 32 * j;
    in[j] = c < d;
    w[j] = in[j] ? w_all[std::size_t(h) * d + c] : 0.f;
    bias[j] = in[j] ? b_all[std::size_t(h) * d + c] : 0.f;
  }
}

template <int RPT, int NJ>
__global__ void __launch_bounds__(kThreads) forward_kernel(TitansForwardArgs a) {
  const TitansDims& dm = a.dims;
  const int d = dm.dim, h = blockIdx.x, n = blockIdx.y;
  const Layout l = layout_of(d);
  __shared__ TokenBuf buf[2];
  __shared__ float red_z[kMaxGroups][kMaxDim];  // column partials of k_t M_start
  __shared__ float red_y[kMaxGroups][kMaxDim];  // column partials of q_t M_t
  bool in[NJ];
  float w[NJ], bias[NJ];
  head_params(a.w, a.bias, h, d, l, in, w, bias);
  const TokenSrc src{a.q,    a.k,    a.v,    nullptr, a.theta,  a.alpha, a.eta,
                     a.ld_q, a.ld_k, a.ld_v, 0,       dm.heads, d};
  const long long row0 = (long long)n * dm.seq_len;
  const std::size_t dd = std::size_t(d) * d;
  float M[RPT], S[RPT], Ms[RPT];  // M_{t−1}, S_{t−1}, M_start
  load_mat(M, a.M0 ? a.M0 + (std::size_t(n) * dm.heads + h) * dd : nullptr, l, d);
#pragma unroll
  for (int r = 0; r < RPT; ++r) {
    S[r] = 0.f;
    Ms[r] = M[r];
  }
  const int nc = (dm.seq_len + dm.chunk - 1) / dm.chunk;
  float* states =
      a.states ? a.states + (std::size_t(n) * dm.heads + h) * std::size_t(nc) * 2 * dd : nullptr;
  Staged st{};
  fetch_inputs(st, src, h, row0);
  stage_inputs(buf[0], st);
  __syncthreads();
  for (int t = 0; t < dm.seq_len; ++t) {
    const int p = t & 1;
    const TokenBuf& x = buf[p];
    const bool more = t + 1 < dm.seq_len;
    if (more) fetch_inputs(st, src, h, row0 + t + 1);
    if (states && t % dm.chunk == 0) {
      float* s0 = states + std::size_t(t / dm.chunk) * 2 * dd;
      store_mat(M, s0, l, d);
      store_mat(S, s0 + dd, l, d);
    }
    red_z[l.g][l.c] = column_partial(Ms, x.vec[kK], l, d);
    __syncthreads();
    Write<NJ> wr;
    token_write(wr, red_z, x, w, bias, in, l, d, a.eps);
    state_step(M, S, pick(wr.u, l.wc), x, l, d);
    if ((t + 1) % dm.mini_batch == 0)
#pragma unroll
      for (int r = 0; r < RPT; ++r) Ms[r] = M[r];
    red_y[l.g][l.c] = column_partial(M, x.vec[kQ], l, d);
    if (more) stage_inputs(buf[p ^ 1], st);
    __syncthreads();
    if (l.warp == 0) {  // o = y + w ⊙ LN(y) + bias
      float y[NJ], yh[NJ];
      column_sums(red_y, l, in, y);
      layer_norm(y, in, d, a.eps, yh);
      float* o = a.o + (row0 + t) * a.ld_o + (long long)h * d;
#pragma unroll
      for (int j = 0; j < NJ; ++j)
        if (in[j]) o[l.lane + 32 * j] = y[j] + w[j] * yh[j] + bias[j];
    }
  }
  if (a.M_final) store_mat(M, a.M_final + (std::size_t(n) * dm.heads + h) * dd, l, d);
}

// The backward's workspace: [B, H, 2, d] partial dw, dbias, then per (sequence, head) the chunk's
// C states M_{t−1}, S_{t−1} ([C, 2, d, d]) and C tokens' kept vectors ([C, kept_floats(d)]).
__host__ __device__ __forceinline__ std::size_t ws_head_floats(int d, int C) {
  return std::size_t(C) * (2 * std::size_t(d) * d + kept_floats(d));
}

template <int RPT, int NJ>
__global__ void __launch_bounds__(kThreads) backward_kernel(TitansBackwardArgs a) {
  const TitansDims& dm = a.dims;
  const int d = dm.dim, h = blockIdx.x, n = blockIdx.y, C = dm.chunk, b = dm.mini_batch;
  const Layout l = layout_of(d);
  __shared__ TokenBuf buf[2];
  __shared__ float red_a[kMaxGroups][kMaxDim];      // column partials: k_t M_start (rerun), k_t G_S
  __shared__ float red_b[kMaxGroups][kMaxDim];      // column partials: q_t M_t (rerun)
  __shared__ float part[2][kMaxColWarps][kMaxDim];  // row partials (dq, dk), by token parity
  __shared__ float scal[2][2][kWarps];              // dα, dη partials per warp, by token parity
  bool in[NJ];
  float w[NJ], bias[NJ];
  head_params(a.w, a.bias, h, d, l, in, w, bias);
  const TokenSrc src{a.q,    a.k,    a.v,    a.dO,    a.theta,  a.alpha, a.eta,
                     a.ld_q, a.ld_k, a.ld_v, a.ld_do, dm.heads, d};
  const long long row0 = (long long)n * dm.seq_len, col = (long long)h * d;
  const std::size_t dd = std::size_t(d) * d, head = std::size_t(n) * dm.heads + h;
  const int nc = (dm.seq_len + C - 1) / C;  // TitansDims::chunks(), which is host code
  const std::size_t kf = kept_floats(d);
  const float* states = a.states + head * std::size_t(nc) * 2 * dd;
  float* ws = static_cast<float*>(a.workspace);
  float* partial_dw = ws + head * 2 * d;
  float* ws_states = ws + std::size_t(dm.batch) * dm.heads * 2 * d + head * ws_head_floats(d, C);
  float* ws_kept = ws_states + std::size_t(C) * 2 * dd;
  const float D = float(d);

  float dw_acc[NJ], db_acc[NJ];
#pragma unroll
  for (int j = 0; j < NJ; ++j) dw_acc[j] = db_acc[j] = 0.f;
  float GM[RPT], GS[RPT], Gst[RPT];  // ∂L/∂M_t, ∂L/∂S_t, ∂L/∂(the mini-batch's M_start)
  load_mat(GM, a.dM_final ? a.dM_final + head * dd : nullptr, l, d);
#pragma unroll
  for (int r = 0; r < RPT; ++r) GS[r] = Gst[r] = 0.f;

  for (int c = nc - 1; c >= 0; --c) {
    const int t0 = c * C, L = min(C, dm.seq_len - t0);
    // The chunk rerun from its stored M, S (a chunk starts a mini-batch: M is its M_start), keeping
    // M_{t−1}, S_{t−1} and the token's vectors in the workspace; dq_t = dy_t M_tᵀ is written during
    // the next token (or after the loop), from row partials kept by parity.
    {
      float M[RPT], S[RPT], Ms[RPT];
      load_mat(M, states + std::size_t(c) * 2 * dd, l, d);
      load_mat(S, states + std::size_t(c) * 2 * dd + dd, l, d);
#pragma unroll
      for (int r = 0; r < RPT; ++r) Ms[r] = M[r];
      Staged st{};
      fetch_inputs(st, src, h, row0 + t0);
      __syncthreads();  // the previous chunk's reverse walk: its last reads of buf and part
      stage_inputs(buf[0], st);
      __syncthreads();
      for (int j = 0; j < L; ++j) {
        const int p = j & 1, t = t0 + j;
        const TokenBuf& x = buf[p];
        const bool more = j + 1 < L;
        if (more) fetch_inputs(st, src, h, row0 + t + 1);
        float* wsj = ws_states + std::size_t(j) * 2 * dd;
        store_mat(M, wsj, l, d);
        store_mat(S, wsj + dd, l, d);
        red_a[l.g][l.c] = column_partial(Ms, x.vec[kK], l, d);
        __syncthreads();
        const float zero[NJ] = {};
        if (j > 0 && l.warp == 0)
          write_rows(a.dq + (row0 + t - 1) * a.ld_dq + col, part[p ^ 1], l, d, zero);
        Write<NJ> wr;
        token_write(wr, red_a, x, w, bias, in, l, d, a.eps);
        float* kept = ws_kept + std::size_t(j) * kf;
        if (l.warp == 0) {
#pragma unroll
          for (int jj = 0; jj < NJ; ++jj) {
            const int cc = l.lane + 32 * jj;
            if (in[jj]) {
              kept[(kU - kDY) * d + cc] = wr.u[jj];
              kept[(kZH - kDY) * d + cc] = wr.zh[jj];
              kept[(kG - kDY) * d + cc] = wr.g[jj];
              kept[(kE - kDY) * d + cc] = wr.e[jj];
            }
          }
          if (l.lane == 0) {
            kept[kKeptVecs * d + 0] = wr.sigma;
            kept[kKeptVecs * d + 1] = wr.sg;
            kept[kKeptVecs * d + 2] = wr.sgz;
          }
        }
        state_step(M, S, pick(wr.u, l.wc), x, l, d);
        if ((t + 1) % b == 0)
#pragma unroll
          for (int r = 0; r < RPT; ++r) Ms[r] = M[r];
        red_b[l.g][l.c] = column_partial(M, x.vec[kQ], l, d);
        if (more) stage_inputs(buf[p ^ 1], st);
        __syncthreads();
        // o = y + w ⊙ ŷ + bias: dw += dO ⊙ ŷ, dbias += dO, dy = dO + LN'ᵀ(dO ⊙ w) (titans_ln_back).
        float y[NJ], yh[NJ], dO[NJ], dyh[NJ], dy[NJ];
        column_sums(red_b, l, in, y);
        const float sy = layer_norm(y, in, d, a.eps, yh);
#pragma unroll
        for (int jj = 0; jj < NJ; ++jj) {
          dO[jj] = x.vec[kDO][l.lane + 32 * jj];
          dyh[jj] = dO[jj] * w[jj];
          dw_acc[jj] += dO[jj] * yh[jj];
          db_acc[jj] += dO[jj];
        }
        const float m1 = vsum(dyh) / D, m2 = vdot(dyh, yh) / D;
#pragma unroll
        for (int jj = 0; jj < NJ; ++jj)
          dy[jj] = in[jj] ? dO[jj] + ((dyh[jj] - m1) - yh[jj] * m2) / sy : 0.f;
        if (l.warp == 0)
#pragma unroll
          for (int jj = 0; jj < NJ; ++jj)
            if (in[jj]) kept[l.lane + 32 * jj] = dy[jj];  // kDY's place
        const float dyc = pick(dy, l.wc);
        row_partials<RPT>(l, d, part[p], [&](int r) { return dyc * M[r]; });
      }
      __syncthreads();  // the last token's row partials; the workspace's vectors for other threads
      const float zero[NJ] = {};
      if (l.warp == 0)
        write_rows(a.dq + (row0 + t0 + L - 1) * a.ld_dq + col, part[(L - 1) & 1], l, d, zero);
    }

    // The chunk's tokens in reverse, titans_backward's step.
    {
      Staged st{};
      fetch_reverse(st, src, h, row0 + t0 + L - 1, ws_kept + std::size_t(L - 1) * kf);
      stage_reverse(buf[(L - 1) & 1], st);
      __syncthreads();
      float Ms[RPT];  // this token's M_start, read back where the walk enters a mini-batch
#pragma unroll
      for (int r = 0; r < RPT; ++r) Ms[r] = 0.f;
      for (int j = L - 1; j >= 0; --j) {
        const int p = j & 1, t = t0 + j;
        const long long row = row0 + t;
        const TokenBuf& x = buf[p];
        if (j > 0) fetch_reverse(st, src, h, row - 1, ws_kept + std::size_t(j - 1) * kf);
        if (j == L - 1 || (t + 1) % b == 0)
          load_mat(Ms, ws_states + std::size_t(t / b * b - t0) * 2 * dd, l, d);
        float Mp[RPT], Sp[RPT];  // M_{t−1}, S_{t−1}, as this thread stored them
        load_mat(Mp, ws_states + std::size_t(j) * 2 * dd, l, d);
        load_mat(Sp, ws_states + std::size_t(j) * 2 * dd + dd, l, d);
        // G_M += q_tᵀ dy_t; G_S += G_M; dα = −⟨G_M, M_{t−1}⟩; dη = ⟨G_S, S_{t−1}⟩; k_t G_S.
        const float dyc = x.vec[kDY][l.c];
        float pa = 0.f, pe = 0.f, pk = 0.f;
#pragma unroll
        for (int r = 0; r < RPT; ++r) {
          const int i = l.g + l.groups * r;
          if (i < d) {
            GM[r] += x.vec[kQ][i] * dyc;
            GS[r] += GM[r];
            pa += GM[r] * Mp[r];
            pe += GS[r] * Sp[r];
            pk += x.vec[kK][i] * GS[r];
          }
        }
        red_a[l.g][l.c] = pk;
        pa = warp_sum(pa);
        pe = warp_sum(pe);
        if (l.lane == 0) {
          scal[p][0][l.warp] = pa;
          scal[p][1][l.warp] = pe;
        }
        __syncthreads();
        float kgs[NJ], u[NJ], zh[NJ], g[NJ], e[NJ];
        column_sums(red_a, l, in, kgs);
#pragma unroll
        for (int jj = 0; jj < NJ; ++jj) {
          const int cc = l.lane + 32 * jj;
          u[jj] = x.vec[kU][cc];
          zh[jj] = x.vec[kZH][cc];
          g[jj] = x.vec[kG][cc];
          e[jj] = x.vec[kE][cc];
        }
        const float theta = x.sc[kTheta], sigma = x.sc[kSigma], sg = x.sc[kSg], sgz = x.sc[kSgz];
        const float dtheta = -2.f * vdot(kgs, u);
        // du = −2θ k G_S; u = D g − c (Σg + ẑ Σ(g ⊙ ẑ)), c = 1 / (σ D).
        float du[NJ], dg[NJ], dzh[NJ], de[NJ], ddv[NJ];
#pragma unroll
        for (int jj = 0; jj < NJ; ++jj) du[jj] = (-2.f * theta) * kgs[jj];
        const float cinv = 1.f / (sigma * D);
        const float s1 = vsum(du), s2 = vdot(du, zh);
#pragma unroll
        for (int jj = 0; jj < NJ; ++jj) {
          dg[jj] = in[jj] ? D * du[jj] - cinv * (s1 + s2 * zh[jj]) : 0.f;
          dzh[jj] = -cinv * (sgz * du[jj] + s2 * g[jj]);
        }
        const float dsigma = cinv * (sg * s1 + sgz * s2) / sigma;
        // g = e ⊙ w, e = w ⊙ ẑ + bias − v + k.
#pragma unroll
        for (int jj = 0; jj < NJ; ++jj) {
          de[jj] = dg[jj] * w[jj];
          dw_acc[jj] += dg[jj] * e[jj] + de[jj] * zh[jj];
          db_acc[jj] += de[jj];
          dzh[jj] += de[jj] * w[jj];
        }
        // ẑ = (z − mean z) / σ, with σ's own gradient from u.
        const float dsig_total = dsigma - vdot(dzh, zh) / sigma;
#pragma unroll
        for (int jj = 0; jj < NJ; ++jj)
          ddv[jj] = in[jj] ? dzh[jj] / sigma + (dsig_total / D) * zh[jj] : 0.f;
        const float mean_dd = vsum(ddv) / D;
#pragma unroll
        for (int jj = 0; jj < NJ; ++jj) ddv[jj] = in[jj] ? ddv[jj] - mean_dd : 0.f;
        if (l.warp == 0) {
#pragma unroll
          for (int jj = 0; jj < NJ; ++jj)
            if (in[jj]) a.dv[row * a.ld_dv + col + l.lane + 32 * jj] = -de[jj];
          if (l.lane == 0) {
            float sa = 0.f, se = 0.f;
            for (int ww = 0; ww < kWarps; ++ww) {
              sa += scal[p][0][ww];
              se += scal[p][1][ww];
            }
            a.dtheta[row * dm.heads + h] = dtheta;
            a.dalpha[row * dm.heads + h] = -sa;
            a.deta[row * dm.heads + h] = se;
          }
        }
        // dk = −2θ u G_Sᵀ + de + dd M_startᵀ (the row sums; de is added by write_rows).
        const float uc = (-2.f * theta) * pick(u, l.wc), ddc = pick(ddv, l.wc);
        row_partials<RPT>(l, d, part[p], [&](int r) { return uc * GS[r] + ddc * Ms[r]; });
        // G_start += k_tᵀ dd; G_M ← (1 − α) G_M; G_S ← η G_S; at a mini-batch's first token the
        // memory before it is its M_start: G_M += G_start.
        const float keep = 1.f - x.sc[kAlpha], eta = x.sc[kEta];
        const bool first = t % b == 0;
#pragma unroll
        for (int r = 0; r < RPT; ++r) {
          const int i = l.g + l.groups * r;
          if (i < d) {
            Gst[r] += x.vec[kK][i] * ddc;
            GM[r] *= keep;
            GS[r] *= eta;
            if (first) {
              GM[r] += Gst[r];
              Gst[r] = 0.f;
            }
          }
        }
        if (j > 0) stage_reverse(buf[p ^ 1], st);
        __syncthreads();
        if (l.warp == 0) write_rows(a.dk + row * a.ld_dk + col, part[p], l, d, de);
      }
    }
  }
  if (a.dM0) store_mat(GM, a.dM0 + head * dd, l, d);
  if (l.warp == 0)
#pragma unroll
    for (int j = 0; j < NJ; ++j)
      if (in[j]) {
        partial_dw[l.lane + 32 * j] = dw_acc[j];
        partial_dw[d + l.lane + 32 * j] = db_acc[j];
      }
}

// dw, dbias [H, d]: the sequences' partials summed in order (one thread an entry).
__global__ void sum_over_batch_kernel(const float* partial, int batch, int heads, int d, float* dw,
                                      float* dbias) {
  const int idx = blockIdx.x * blockDim.x + threadIdx.x;
  if (idx >= heads * d) return;
  const int h = idx / d, c = idx % d;
  float sw = 0.f, sb = 0.f;
  for (int n = 0; n < batch; ++n) {
    const float* p = partial + (std::size_t(n) * heads + h) * 2 * d;
    sw += p[c];
    sb += p[d + c];
  }
  dw[idx] = sw;
  dbias[idx] = sb;
}

inline void require(bool ok, const char* fn, const std::string& what) {
  if (!ok) throw std::invalid_argument(std::string(fn) + ": " + what);
}

void require_ld(int ld, const TitansDims& d, const char* fn, const char* name) {
  require(ld >= d.heads * d.dim, fn, std::string(name) + " is smaller than H·d");
}

void require_eps(float eps, const char* fn) {
  require(std::isfinite(eps) && eps > 0.f, fn,
          "eps must be positive and finite, got " + std::to_string(eps));
}

// d ≤ 32: 8 row groups of 4 rows, one lane-vector entry; d ≤ 64: 4 row groups of 16 rows, two.
template <class F>
void with_shape(const TitansDims& d, F f) {
  if (d.dim <= 32)
    f(std::integral_constant<int, 4>{}, std::integral_constant<int, 1>{});
  else
    f(std::integral_constant<int, 16>{}, std::integral_constant<int, 2>{});
}

}  // namespace

std::string titans_unsupported(const TitansDims& d) {
  if (d.batch < 1) return "Titans' kernels need batch >= 1, got " + std::to_string(d.batch);
  if (d.batch > 65535) return "Titans' kernels take batch <= 65535 (one grid row per sequence)";
  if (d.seq_len < 1) return "Titans' kernels need seq_len >= 1, got " + std::to_string(d.seq_len);
  if (d.heads < 1) return "Titans' kernels need heads >= 1, got " + std::to_string(d.heads);
  if (d.dim < 1 || d.dim > kMaxDim)
    return "Titans' kernels keep the d × d memory and its gradients in registers and need dim in "
           "1..64, got " +
           std::to_string(d.dim);
  if (d.mini_batch < 1)
    return "Titans' kernels need mini_batch >= 1, got " + std::to_string(d.mini_batch);
  if (d.chunk < 1 || d.chunk % d.mini_batch != 0)
    return "Titans' kernels need chunk a positive multiple of mini_batch (a stored state starts a "
           "mini-batch), got chunk " +
           std::to_string(d.chunk) + " and mini_batch " + std::to_string(d.mini_batch);
  return {};
}

std::size_t titans_state_floats(const TitansDims& d) {
  return std::size_t(d.batch) * d.heads * d.chunks() * 2 * d.dim * d.dim;
}

std::size_t titans_backward_workspace_bytes(const TitansDims& d) {
  const std::size_t heads = std::size_t(d.batch) * d.heads;
  return sizeof(float) * heads * (2 * std::size_t(d.dim) + ws_head_floats(d.dim, d.chunk));
}

void titans_forward(const TitansForwardArgs& a) {
  const char* fn = "titans_forward";
  const TitansDims& d = a.dims;
  const std::string why = titans_unsupported(d);
  require(why.empty(), fn, why);
  require(a.q && a.k && a.v && a.theta && a.alpha && a.eta && a.w && a.bias && a.o, fn,
          "q, k, v, theta, alpha, eta, w, bias and o must not be null");
  require_ld(a.ld_q, d, fn, "ld_q");
  require_ld(a.ld_k, d, fn, "ld_k");
  require_ld(a.ld_v, d, fn, "ld_v");
  require_ld(a.ld_o, d, fn, "ld_o");
  require_eps(a.eps, fn);
  const dim3 grid(d.heads, d.batch);
  with_shape(d, [&](auto rpt, auto nj) {
    forward_kernel<decltype(rpt)::value, decltype(nj)::value><<<grid, kThreads, 0, a.stream>>>(a);
  });
  TTTLAB_CUDA_CHECK(cudaGetLastError());
}

void titans_backward(const TitansBackwardArgs& a) {
  const char* fn = "titans_backward";
  const TitansDims& d = a.dims;
  const std::string why = titans_unsupported(d);
  require(why.empty(), fn, why);
  require(a.q && a.k && a.v && a.theta && a.alpha && a.eta && a.w && a.bias && a.states && a.dO, fn,
          "q, k, v, theta, alpha, eta, w, bias, states and dO must not be null");
  require(a.dq && a.dk && a.dv && a.dtheta && a.dalpha && a.deta && a.dw && a.dbias && a.workspace,
          fn, "dq, dk, dv, dtheta, dalpha, deta, dw, dbias and workspace must not be null");
  require_ld(a.ld_q, d, fn, "ld_q");
  require_ld(a.ld_k, d, fn, "ld_k");
  require_ld(a.ld_v, d, fn, "ld_v");
  require_ld(a.ld_do, d, fn, "ld_do");
  require_ld(a.ld_dq, d, fn, "ld_dq");
  require_ld(a.ld_dk, d, fn, "ld_dk");
  require_ld(a.ld_dv, d, fn, "ld_dv");
  require_eps(a.eps, fn);
  require(a.workspace_bytes >= titans_backward_workspace_bytes(d), fn,
          "workspace_bytes is smaller than titans_backward_workspace_bytes(dims)");
  const dim3 grid(d.heads, d.batch);
  with_shape(d, [&](auto rpt, auto nj) {
    backward_kernel<decltype(rpt)::value, decltype(nj)::value><<<grid, kThreads, 0, a.stream>>>(a);
  });
  TTTLAB_CUDA_CHECK(cudaGetLastError());
  const int entries = d.heads * d.dim;
  sum_over_batch_kernel<<<(entries + kThreads - 1) / kThreads, kThreads, 0, a.stream>>>(
      static_cast<const float*>(a.workspace), d.batch, d.heads, d.dim, a.dw, a.dbias);
  TTTLAB_CUDA_CHECK(cudaGetLastError());
}

}  // namespace tttlab::kernels
