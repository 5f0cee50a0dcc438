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
// A token's d-vectors live in "lane vectors": float x[NJ] in every lane of a warp, lane l holding
// entries l + 32j (NJ = CV / 32), zero past d. Their sums over d are warp shuffles (xor butterflies:
// every lane ends with the same bits), so one warp does a token's vector work alone.
//
// Segments. The gradients of a mini-batch's tokens are all taken at its first memory M_start, so the
// tokens of a segment (up to kSeg of one mini-batch) share their barriers: every thread writes its
// column partials of z_t = k_t M_start for all of them at once; a warp a token forms the write's
// vectors (u into shared memory); each thread then runs the segment's state steps in its registers,
// writing its partials of y_t = q_t M_t after each; and a warp a token reads the outputs out. Four
// barriers a segment instead of two a token. The backward's reverse walk is split the same way:
// the walk of G_M and G_S in registers with every reduction it needs written as partials (dα, dη,
// k_t G_S, the row sums of dq_t and of dk_t's G_S term), a warp a token for u's backward, then each
// thread's rank-one updates of the mini-batch start's gradient and dk_t's M_start term. Every sum
// has a fixed order and one writer, so two runs give the same bits.
//
// The backward also has a chunked form (chunked_backward_kernel, below): the mini-batches in reverse
// through titans_backward_chunked's products, which titans_backward runs for b ≤ 16.
#include <cuda_runtime.h>

#include <cmath>
#include <cstdint>
#include <stdexcept>
#include <string>
#include <type_traits>

#include "common/cuda_check.hpp"
#include "common/launch.hpp"
#include "tttlab/kernels/titans.hpp"

namespace tttlab::kernels {
namespace {

constexpr int kThreads = 256;
constexpr int kWarps = kThreads / 32;
constexpr int kMaxDim = 64;
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

// R sums over the warp's 32 lanes at once (R a power of two, 2 ≤ R ≤ 16): v[r] is lane l's term of
// sum r. Each of the first log2 R exchange steps halves the values a lane holds (it keeps half of the
// sums and sends the other half to its partner), then plain steps finish them: R − 1 + 5 − log2 R
// shuffles instead of 5R. Returns the sum this lane ends with, sum number multi_sum_row<R>(lane)
// (for R = 16, sum r in lanes 2r and 2r + 1).
template <int R>
__device__ __forceinline__ int multi_sum_row(int lane) {
  int r = 0;
#pragma unroll
  for (int off = 16, w = R / 2; w >= 1; off >>= 1, w >>= 1) r += ((lane & off) ? w : 0);
  return r;
}
// One exchange step of multi_sum: lanes whose bit OFF is clear keep v[0..W) and send v[W..2W), their
// partners the other way round; v[0..W) then holds pair sums.
template <int W, int OFF, int R>
__device__ __forceinline__ void halve(float (&v)[R], int lane) {
  const bool upper = (lane & OFF) != 0;
#pragma unroll
  for (int k = 0; k < W; ++k) {
    const float send = upper ? v[k] : v[k + W];
    const float keep = upper ? v[k + W] : v[k];
    v[k] = keep + __shfl_xor_sync(0xffffffffu, send, OFF);
  }
  if constexpr (W > 1) halve<W / 2, OFF / 2>(v, lane);
}
template <int R>
__device__ __forceinline__ float multi_sum(float (&v)[R], int lane) {
  static_assert(R >= 2 && R <= 16 && (R & (R - 1)) == 0, "R a power of two in 2..16");
  halve<R / 2, 16>(v, lane);
  float x = v[0];
#pragma unroll
  for (int off = 16 / R; off >= 1; off >>= 1) x += __shfl_xor_sync(0xffffffffu, x, off);
  return x;
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

// The lane vector of column sums over the row groups: x[c] = Σ_g red[g·CV + c] (red: one token's
// column partials, indexed by thread), in the order of g.
template <int NJ>
__device__ __forceinline__ void column_sums(const float* red, const Layout& l, const bool (&in)[NJ],
                                            float (&x)[NJ]) {
#pragma unroll
  for (int j = 0; j < NJ; ++j) {
    float s = 0.f;
    if (in[j])
      for (int g = 0; g < l.groups; ++g) s += red[g * l.cv + l.lane + 32 * j];
    x[j] = s;
  }
}

// ---- segments ------------------------------------------------------------------------------------
// A segment is up to kSeg consecutive tokens of one mini-batch. Their gradients are all taken at the
// same M_start, so z_t = k_t M_start and the write's vectors of every token of a segment are formed
// together, and the barriers of a segment are shared by its tokens (four in the forward, four in
// each of the backward's two walks): a token's own work between them is the thread's state step in
// registers and its column or row partials written to shared memory, one row of partials a token.
constexpr int kSeg = 16;
// The segment's token vectors (rows of kMaxDim floats, entries past d never read), by slot:
//   forward and the backward's rerun: q, k, v, dO;  the reverse walk: q, k, dy, u, ẑ, g, e
// and scalars θ, α, η (both), σ, Σg, Σ(g ⊙ ẑ) (the reverse walk).
enum SegVec { kQ, kK, kV, kDO, kDY = 2, kU, kZH, kG, kE, kSegVecs };
enum SegScalar { kTheta, kAlpha, kEta, kSigma, kSg, kSgz, kSegScalars };
struct Seg {
  float vec[kSegVecs][kSeg][kMaxDim];
  float sc[kSegScalars][kSeg];
  float red[kSeg][kThreads];                   // column partials, a row a token
  float col[2][kSeg][kMaxDim];                 // u (forward); dd and de (reverse walk)
  float part[2][kSeg][kMaxColWarps][kMaxDim];  // row partials of dq and dk, by warp of a row group
  float scal[2][kSeg][kWarps];                 // dα, dη partials per warp
  float acc[2][kWarps][kMaxDim];               // dw, dbias per warp, summed at the end
};
constexpr std::size_t kSegBytes = sizeof(Seg);

// The workspace keeps, per token of a chunk, dy, u, ẑ, g, e (d each, in the order of kDY … kE), then
// σ, Σg, Σ(g ⊙ ẑ) and one float of padding.
constexpr int kKeptVecs = kE - kDY + 1;
__host__ __device__ __forceinline__ std::size_t kept_floats(int d) {
  return std::size_t(kKeptVecs) * d + 4;
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

// Asks for this thread's entries of a d × d matrix at src to be brought into L1 (no registers held).
template <int RPT>
__device__ __forceinline__ void prefetch_mat(const float* src, const Layout& l, int d) {
  if (l.c >= d) return;
#pragma unroll
  for (int r = 0; r < RPT; ++r) {
    const int i = l.g + l.groups * r;
    if (i < d) asm volatile("prefetch.global.L1 [%0];" ::"l"(src + std::size_t(i) * d + l.c));
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

// The number of tokens of the segment starting at t (absolute), ≤ `left`, inside t's mini-batch.
__device__ __forceinline__ int segment_length(int t, int b, int left) {
  return min(min(kSeg, b - t % b), left);
}

// Rows row .. row + L − 1 of a [R, ≥ H·d] input, columns col .. col + d − 1, into dst[j][0..d).
__device__ __forceinline__ void load_rows(float (*dst)[kMaxDim], const float* src, int ld,
                                          long long row, long long col, int L, int d) {
  for (int i = threadIdx.x; i < L * d; i += kThreads)
    dst[i / d][i % d] = src[(row + i / d) * ld + col + i % d];
}
// θ, α, η of head h for the L tokens from row.
__device__ __forceinline__ void load_rates(Seg& sg, const float* theta, const float* alpha,
                                           const float* eta, int heads, int h, long long row,
                                           int L) {
  for (int i = threadIdx.x; i < 3 * L; i += kThreads) {
    const int f = i / L, j = i % L;
    const float* p = f == 0 ? theta : f == 1 ? alpha : eta;
    sg.sc[kTheta + f][j] = p[(row + j) * heads + h];
  }
}

// What one token writes, from z = k_t M_start (its column partials red) to u, as titans_write:
// ẑ, e = w ⊙ ẑ + bias − v + k, g = e ⊙ w, Σg, Σ(g ⊙ ẑ), u = D·g − (Σg + ẑ·Σ(g ⊙ ẑ)) / (σ D).
template <int NJ>
struct Write {
  float zh[NJ], e[NJ], g[NJ], u[NJ];
  float sigma, sg, sgz;
};
template <int NJ>
__device__ __forceinline__ void token_write(Write<NJ>& o, const float* red, const float* k,
                                            const float* v, const float (&w)[NJ],
                                            const float (&bias)[NJ], const bool (&in)[NJ],
                                            const Layout& l, int d, float eps) {
  float z[NJ];
  column_sums(red, l, in, z);
  o.sigma = layer_norm(z, in, d, eps, o.zh);
#pragma unroll
  for (int j = 0; j < NJ; ++j) {
    const int c = l.lane + 32 * j;
    o.e[j] = in[j] ? w[j] * o.zh[j] + bias[j] - v[c] + k[c] : 0.f;
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
                                           const float* k, float theta, float alpha, float eta,
                                           const Layout& l, int d) {
  const float two_theta = 2.f * theta, keep = 1.f - alpha;
#pragma unroll
  for (int r = 0; r < RPT; ++r) {
    const int i = l.g + l.groups * r;
    if (i < d) {
      S[r] = S[r] * eta - (two_theta * k[i]) * uc;
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

// The segment's writes, a warp per token: z from the column partials, then u into sg.col[0] (and,
// given `keep`, what the reverse walk reads back, kept_floats(d) a token).
template <int NJ>
__device__ __forceinline__ void segment_writes(Seg& sg, int L, const float (&w)[NJ],
                                               const float (&bias)[NJ], const bool (&in)[NJ],
                                               const Layout& l, int d, float eps, float* keep) {
  for (int j = l.warp; j < L; j += kWarps) {
    Write<NJ> wr;
    token_write(wr, sg.red[j], sg.vec[kK][j], sg.vec[kV][j], w, bias, in, l, d, eps);
#pragma unroll
    for (int jj = 0; jj < NJ; ++jj)
      if (in[jj]) sg.col[0][j][l.lane + 32 * jj] = wr.u[jj];
    if (keep) {
      float* kept = keep + std::size_t(j) * kept_floats(d);
#pragma unroll
      for (int jj = 0; jj < NJ; ++jj) {
        const int c = l.lane + 32 * jj;
        if (in[jj]) {
          kept[(kU - kDY) * d + c] = wr.u[jj];
          kept[(kZH - kDY) * d + c] = wr.zh[jj];
          kept[(kG - kDY) * d + c] = wr.g[jj];
          kept[(kE - kDY) * d + c] = wr.e[jj];
        }
      }
      if (l.lane == 0) {
        kept[kKeptVecs * d + 0] = wr.sigma;
        kept[kKeptVecs * d + 1] = wr.sg;
        kept[kKeptVecs * d + 2] = wr.sgz;
      }
    }
  }
}

template <int RPT, int NJ>
__global__ void __launch_bounds__(kThreads, 1) forward_kernel(TitansForwardArgs a) {
  extern __shared__ float4 seg_smem[];
  Seg& sg = *reinterpret_cast<Seg*>(seg_smem);
  const TitansDims& dm = a.dims;
  const int d = dm.dim, h = blockIdx.x, n = blockIdx.y, T = dm.seq_len, b = dm.mini_batch;
  const Layout l = layout_of(d);
  bool in[NJ];
  float w[NJ], bias[NJ];
  head_params(a.w, a.bias, h, d, l, in, w, bias);
  const long long row0 = (long long)n * T, col = (long long)h * d;
  const std::size_t dd = std::size_t(d) * d;
  float M[RPT], S[RPT], Ms[RPT];  // M_{t−1}, S_{t−1}, M_start
  load_mat(M, a.M0 ? a.M0 + (std::size_t(n) * dm.heads + h) * dd : nullptr, l, d);
#pragma unroll
  for (int r = 0; r < RPT; ++r) {
    S[r] = 0.f;
    Ms[r] = M[r];
  }
  const int nc = (T + dm.chunk - 1) / dm.chunk;
  float* states =
      a.states ? a.states + (std::size_t(n) * dm.heads + h) * std::size_t(nc) * 2 * dd : nullptr;
  for (int t0 = 0; t0 < T;) {
    const int L = segment_length(t0, b, T - t0);
    __syncthreads();  // the previous segment's reads of sg
    load_rows(sg.vec[kQ], a.q, a.ld_q, row0 + t0, col, L, d);
    load_rows(sg.vec[kK], a.k, a.ld_k, row0 + t0, col, L, d);
    load_rows(sg.vec[kV], a.v, a.ld_v, row0 + t0, col, L, d);
    load_rates(sg, a.theta, a.alpha, a.eta, dm.heads, h, row0 + t0, L);
    if (states && t0 % dm.chunk == 0) {  // a chunk starts a mini-batch, so a segment
      float* s0 = states + std::size_t(t0 / dm.chunk) * 2 * dd;
      store_mat(M, s0, l, d);
      store_mat(S, s0 + dd, l, d);
    }
    __syncthreads();
    for (int j = 0; j < L; ++j) sg.red[j][threadIdx.x] = column_partial(Ms, sg.vec[kK][j], l, d);
    __syncthreads();
    segment_writes(sg, L, w, bias, in, l, d, a.eps, nullptr);
    __syncthreads();
    for (int j = 0; j < L; ++j) {
      const float uc = l.c < d ? sg.col[0][j][l.c] : 0.f;
      state_step(M, S, uc, sg.vec[kK][j], sg.sc[kTheta][j], sg.sc[kAlpha][j], sg.sc[kEta][j], l, d);
      sg.red[j][threadIdx.x] = column_partial(M, sg.vec[kQ][j], l, d);
    }
    if ((t0 + L) % b == 0)
#pragma unroll
      for (int r = 0; r < RPT; ++r) Ms[r] = M[r];
    __syncthreads();
    for (int j = l.warp; j < L; j += kWarps) {  // o = y + w ⊙ LN(y) + bias
      float y[NJ], yh[NJ];
      column_sums(sg.red[j], l, in, y);
      layer_norm(y, in, d, a.eps, yh);
      float* o = a.o + (row0 + t0 + j) * a.ld_o + col;
#pragma unroll
      for (int jj = 0; jj < NJ; ++jj)
        if (in[jj]) o[l.lane + 32 * jj] = y[jj] + w[jj] * yh[jj] + bias[jj];
    }
    t0 += L;
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
  extern __shared__ float4 seg_smem[];
  Seg& sg = *reinterpret_cast<Seg*>(seg_smem);
  const TitansDims& dm = a.dims;
  const int d = dm.dim, h = blockIdx.x, n = blockIdx.y, T = dm.seq_len, C = dm.chunk,
            b = dm.mini_batch;
  const Layout l = layout_of(d);
  bool in[NJ];
  float w[NJ], bias[NJ];
  head_params(a.w, a.bias, h, d, l, in, w, bias);
  const long long row0 = (long long)n * T, col = (long long)h * d;
  const std::size_t dd = std::size_t(d) * d, head = std::size_t(n) * dm.heads + h;
  const int nc = (T + C - 1) / C;  // TitansDims::chunks(), which is host code
  const std::size_t kf = kept_floats(d);
  const float* states = a.states + head * std::size_t(nc) * 2 * dd;
  float* ws = static_cast<float*>(a.workspace);
  float* partial_dw = ws + head * 2 * d;
  float* ws_states = ws + std::size_t(dm.batch) * dm.heads * 2 * d + head * ws_head_floats(d, C);
  float* ws_kept = ws_states + std::size_t(C) * 2 * dd;
  const float D = float(d);

  float dw_acc[NJ], db_acc[NJ];  // this warp's tokens' share
#pragma unroll
  for (int j = 0; j < NJ; ++j) dw_acc[j] = db_acc[j] = 0.f;
  float GM[RPT], GS[RPT], Gst[RPT];  // ∂L/∂M_t, ∂L/∂S_t, ∂L/∂(the mini-batch's M_start)
  load_mat(GM, a.dM_final ? a.dM_final + head * dd : nullptr, l, d);
#pragma unroll
  for (int r = 0; r < RPT; ++r) GS[r] = Gst[r] = 0.f;

  for (int c = nc - 1; c >= 0; --c) {
    const int t0 = c * C, Lc = min(C, T - t0);
    // The chunk rerun from its stored M, S (a chunk starts a mini-batch: M is its M_start), keeping
    // M_{t−1}, S_{t−1} and the token's vectors in the workspace, then the output's LayerNorm
    // backward: dy kept, dw and dbias's shares.
    {
      float M[RPT], S[RPT], Ms[RPT];
      load_mat(M, states + std::size_t(c) * 2 * dd, l, d);
      load_mat(S, states + std::size_t(c) * 2 * dd + dd, l, d);
#pragma unroll
      for (int r = 0; r < RPT; ++r) Ms[r] = M[r];
      for (int s0 = 0; s0 < Lc;) {
        const int L = segment_length(t0 + s0, b, Lc - s0);
        const long long row = row0 + t0 + s0;
        __syncthreads();  // the previous segment's (or walk's) reads of sg
        load_rows(sg.vec[kQ], a.q, a.ld_q, row, col, L, d);
        load_rows(sg.vec[kK], a.k, a.ld_k, row, col, L, d);
        load_rows(sg.vec[kV], a.v, a.ld_v, row, col, L, d);
        load_rows(sg.vec[kDO], a.dO, a.ld_do, row, col, L, d);
        load_rates(sg, a.theta, a.alpha, a.eta, dm.heads, h, row, L);
        __syncthreads();
        for (int j = 0; j < L; ++j)
          sg.red[j][threadIdx.x] = column_partial(Ms, sg.vec[kK][j], l, d);
        __syncthreads();
        float* kept = ws_kept + std::size_t(s0) * kf;
        segment_writes(sg, L, w, bias, in, l, d, a.eps, kept);
        __syncthreads();
        for (int j = 0; j < L; ++j) {
          float* wsj = ws_states + std::size_t(s0 + j) * 2 * dd;
          store_mat(M, wsj, l, d);
          store_mat(S, wsj + dd, l, d);
          const float uc = l.c < d ? sg.col[0][j][l.c] : 0.f;
          state_step(M, S, uc, sg.vec[kK][j], sg.sc[kTheta][j], sg.sc[kAlpha][j], sg.sc[kEta][j], l,
                     d);
          sg.red[j][threadIdx.x] = column_partial(M, sg.vec[kQ][j], l, d);
        }
        if ((t0 + s0 + L) % b == 0)
#pragma unroll
          for (int r = 0; r < RPT; ++r) Ms[r] = M[r];
        __syncthreads();
        // o = y + w ⊙ ŷ + bias: dw += dO ⊙ ŷ, dbias += dO, dy = dO + LN'ᵀ(dO ⊙ w) (titans_ln_back).
        for (int j = l.warp; j < L; j += kWarps) {
          float y[NJ], yh[NJ], dO[NJ], dyh[NJ];
          column_sums(sg.red[j], l, in, y);
          const float sy = layer_norm(y, in, d, a.eps, yh);
#pragma unroll
          for (int jj = 0; jj < NJ; ++jj) {
            dO[jj] = in[jj] ? sg.vec[kDO][j][l.lane + 32 * jj] : 0.f;
            dyh[jj] = dO[jj] * w[jj];
            dw_acc[jj] += dO[jj] * yh[jj];
            db_acc[jj] += dO[jj];
          }
          const float m1 = vsum(dyh) / D, m2 = vdot(dyh, yh) / D;
          float* kj = kept + std::size_t(j) * kf;
#pragma unroll
          for (int jj = 0; jj < NJ; ++jj)
            if (in[jj]) kj[l.lane + 32 * jj] = dO[jj] + ((dyh[jj] - m1) - yh[jj] * m2) / sy;
        }
        s0 += L;
      }
    }
    __syncthreads();  // the kept vectors, written by other warps, are read below

    // The chunk's tokens in reverse, titans_backward's step, a segment at a time from the last.
    for (int s1 = Lc; s1 > 0;) {
      const int mb0 = (t0 + s1 - 1) / b * b - t0;  // the mini-batch's first token, from t0
      const int s0 = max(mb0, s1 - kSeg), L = s1 - s0;
      const long long row = row0 + t0 + s0;
      __syncthreads();  // the previous segment's reads of sg
      load_rows(sg.vec[kQ], a.q, a.ld_q, row, col, L, d);
      load_rows(sg.vec[kK], a.k, a.ld_k, row, col, L, d);
      load_rates(sg, a.theta, a.alpha, a.eta, dm.heads, h, row, L);
      for (int i = threadIdx.x; i < L * d; i += kThreads) {
        const float* kj = ws_kept + std::size_t(s0 + i / d) * kf;
#pragma unroll
        for (int f = 0; f < kKeptVecs; ++f) sg.vec[kDY + f][i / d][i % d] = kj[f * d + i % d];
      }
      for (int i = threadIdx.x; i < 3 * L; i += kThreads)
        sg.sc[kSigma + i / L][i % L] =
            ws_kept[std::size_t(s0 + i % L) * kf + kKeptVecs * d + i / L];
      float Ms
          [RPT];  // the mini-batch's M_start (M_{t−1} at its first token, as this thread stored it)
      load_mat(Ms, ws_states + std::size_t(mb0) * 2 * dd, l, d);
      __syncthreads();

      // (1) The walk in registers: G_M += q_tᵀ dy_t; G_S += G_M; the partials of dα = −⟨G_M, M_{t−1}⟩,
      // dη = ⟨G_S, S_{t−1}⟩ and k_t G_S; the row partials of dq_t = dy_t M_tᵀ (M_t formed again from
      // M_{t−1}, S_{t−1} by the forward's step) and of dk_t's −2θ u_t G_Sᵀ; then G_M ← (1 − α) G_M,
      // G_S ← η G_S.
      for (int j = L - 1; j >= 0; --j) {
        float Mp[RPT], Sp[RPT];  // M_{t−1}, S_{t−1}, as this thread stored them
        load_mat(Mp, ws_states + std::size_t(s0 + j) * 2 * dd, l, d);
        load_mat(Sp, ws_states + std::size_t(s0 + j) * 2 * dd + dd, l, d);
        // The token before's, on their way while this one is worked on (the walk has no other
        // loads to overlap them with).
        if (s0 + j > 0) {
          prefetch_mat<RPT>(ws_states + std::size_t(s0 + j - 1) * 2 * dd, l, d);
          prefetch_mat<RPT>(ws_states + std::size_t(s0 + j - 1) * 2 * dd + dd, l, d);
        }
        const float dyc = l.c < d ? sg.vec[kDY][j][l.c] : 0.f;
        const float uraw = l.c < d ? sg.vec[kU][j][l.c] : 0.f;
        const float theta = sg.sc[kTheta][j], keep = 1.f - sg.sc[kAlpha][j], eta = sg.sc[kEta][j];
        const float two_theta = 2.f * theta, uc = (-2.f * theta) * uraw;
        const float* q = sg.vec[kQ][j];
        const float* k = sg.vec[kK][j];
        float pa = 0.f, pe = 0.f, pk = 0.f;
#pragma unroll
        for (int r = 0; r < RPT; ++r) {
          const int i = l.g + l.groups * r;
          if (i < d) {
            GM[r] += q[i] * dyc;
            GS[r] += GM[r];
            pa += GM[r] * Mp[r];
            pe += GS[r] * Sp[r];
            pk += k[i] * GS[r];
          }
        }
        sg.red[j][threadIdx.x] = pk;
        pa = warp_sum(pa);
        pe = warp_sum(pe);
        if (l.lane == 0) {
          sg.scal[0][j][l.warp] = pa;
          sg.scal[1][j][l.warp] = pe;
        }
        {
          // Row sums RPT at a time (multi_sum); every term is zero past d (Mp, Sp, GS are).
          const int r = multi_sum_row<RPT>(l.lane), i = l.g + l.groups * r;
          const bool writer = (l.lane & (32 / RPT - 1)) == 0 && i < d;
          float v[RPT];
#pragma unroll
          for (int rr = 0; rr < RPT; ++rr) {
            const int ii = l.g + l.groups * rr;
            const float St = Sp[rr] * eta - (two_theta * (ii < d ? k[ii] : 0.f)) * uraw;
            v[rr] = dyc * (Mp[rr] * keep + St);
          }
          const float sq = multi_sum(v, l.lane);
#pragma unroll
          for (int rr = 0; rr < RPT; ++rr) {
            v[rr] = uc * GS[rr];
            GM[rr] *= keep;
            GS[rr] *= eta;
          }
          const float sk = multi_sum(v, l.lane);
          if (writer) {
            sg.part[0][j][l.wc][i] = sq;
            sg.part[1][j][l.wc][i] = sk;
          }
        }
      }
      __syncthreads();

      // (2) A warp a token: k_t G_S's column sums, then dθ, u's backward through the write's
      // LayerNorm to dd (the gradient of z) and de; dv = −de, dα, dη.
      for (int j = l.warp; j < L; j += kWarps) {
        const long long rj = row + j;
        float kgs[NJ], u[NJ], zh[NJ], g[NJ], e[NJ];
        column_sums(sg.red[j], l, in, kgs);
#pragma unroll
        for (int jj = 0; jj < NJ; ++jj) {
          const int cc = l.lane + 32 * jj;
          u[jj] = in[jj] ? sg.vec[kU][j][cc] : 0.f;
          zh[jj] = in[jj] ? sg.vec[kZH][j][cc] : 0.f;
          g[jj] = in[jj] ? sg.vec[kG][j][cc] : 0.f;
          e[jj] = in[jj] ? sg.vec[kE][j][cc] : 0.f;
        }
        const float theta = sg.sc[kTheta][j], sigma = sg.sc[kSigma][j], sgs = sg.sc[kSg][j],
                    sgz = sg.sc[kSgz][j];
        const float dtheta = -2.f * vdot(kgs, u);
        // du = −2θ k G_S; u = D g − c (Σg + ẑ Σ(g ⊙ ẑ)), c = 1 / (σ D).
        float du[NJ], dg[NJ], dzh[NJ], de[NJ], ddv[NJ];
#pragma unroll
        for (int jj = 0; jj < NJ; ++jj) du[jj] = (-2.f * theta) * kgs[jj];
        const float cinv = 1.f / (sigma * D);
        const float s1v = vsum(du), s2v = vdot(du, zh);
#pragma unroll
        for (int jj = 0; jj < NJ; ++jj) {
          dg[jj] = in[jj] ? D * du[jj] - cinv * (s1v + s2v * zh[jj]) : 0.f;
          dzh[jj] = -cinv * (sgz * du[jj] + s2v * g[jj]);
        }
        const float dsigma = cinv * (sgs * s1v + sgz * s2v) / sigma;
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
        for (int jj = 0; jj < NJ; ++jj) {
          const int cc = l.lane + 32 * jj;
          if (in[jj]) {
            sg.col[0][j][cc] = ddv[jj] - mean_dd;
            sg.col[1][j][cc] = de[jj];
            a.dv[rj * a.ld_dv + col + cc] = -de[jj];
          }
        }
        if (l.lane == 0) {
          float sa = 0.f, se = 0.f;
          for (int ww = 0; ww < kWarps; ++ww) {
            sa += sg.scal[0][j][ww];
            se += sg.scal[1][j][ww];
          }
          a.dtheta[rj * dm.heads + h] = dtheta;
          a.dalpha[rj * dm.heads + h] = -sa;
          a.deta[rj * dm.heads + h] = se;
        }
      }
      __syncthreads();

      // (3) G_start += k_tᵀ dd_t (the tokens in reverse, as the CPU), dk_t's dd_t M_startᵀ row sums
      // added to its partials; at the mini-batch's first token G_M += G_start.
      for (int j = L - 1; j >= 0; --j) {
        const float ddc = l.c < d ? sg.col[0][j][l.c] : 0.f;
        const float* k = sg.vec[kK][j];
        float vb[RPT];
#pragma unroll
        for (int r = 0; r < RPT; ++r) {
          const int i = l.g + l.groups * r;
          if (i < d) Gst[r] += k[i] * ddc;
          vb[r] = ddc * Ms[r];
        }
        const int r = multi_sum_row<RPT>(l.lane), i = l.g + l.groups * r;
        const float sb = multi_sum(vb, l.lane);
        if ((l.lane & (32 / RPT - 1)) == 0 && i < d) sg.part[1][j][l.wc][i] += sb;
      }
      if (s0 == mb0)
#pragma unroll
        for (int r = 0; r < RPT; ++r) {
          GM[r] += Gst[r];
          Gst[r] = 0.f;
        }
      __syncthreads();

      // (4) dq_t and dk_t = (row sums) + de_t, a warp a token.
      for (int j = l.warp; j < L; j += kWarps) {
        const long long rj = row + j;
#pragma unroll
        for (int jj = 0; jj < NJ; ++jj) {
          const int i = l.lane + 32 * jj;
          if (i < d) {
            float sq = 0.f, sk = 0.f;
            for (int ww = 0; ww < l.cv / 32; ++ww) {
              sq += sg.part[0][j][ww][i];
              sk += sg.part[1][j][ww][i];
            }
            a.dq[rj * a.ld_dq + col + i] = sq;
            a.dk[rj * a.ld_dk + col + i] = sk + sg.col[1][j][i];
          }
        }
      }
      s1 = s0;
    }
  }
  if (a.dM0) store_mat(GM, a.dM0 + head * dd, l, d);
  // dw, dbias: each warp's share, summed over the warps in order.
  __syncthreads();
#pragma unroll
  for (int j = 0; j < NJ; ++j)
    if (in[j]) {
      sg.acc[0][l.warp][l.lane + 32 * j] = dw_acc[j];
      sg.acc[1][l.warp][l.lane + 32 * j] = db_acc[j];
    }
  __syncthreads();
  if (l.warp == 0)
#pragma unroll
    for (int j = 0; j < NJ; ++j)
      if (in[j]) {
        float sw = 0.f, sb = 0.f;
        for (int ww = 0; ww < kWarps; ++ww) {
          sw += sg.acc[0][ww][l.lane + 32 * j];
          sb += sg.acc[1][ww][l.lane + 32 * j];
        }
        partial_dw[l.lane + 32 * j] = sw;
        partial_dw[d + l.lane + 32 * j] = sb;
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

// ---- the backward in the chunked form -------------------------------------------------------------
// titans_backward_chunked (core/src/fastweight/titans.cpp, docs/MATH.md §11.9) a mini-batch at a
// time, for b ≤ kChunkMaxB: the outputs' and the end state's adjoints through the closed form
// Y = diag(β) Q M_p + diag(f) Q S_p − 2 (QKᵀ ⊙ G) U, as products of [b, d], [b, b] and [d, d]
// matrices in shared memory on the CUDA cores in fp32, instead of the token walk's rank-one steps.
// One block of 256 threads per (sequence, head), as the recurrent kernels. The stored state of a chunk
// of C tokens is run forward to each of its mini-batches' starts (M_p, S_p into the workspace, where
// the token walk keeps its per-token states), then the mini-batches are walked in reverse with
// ∂L/∂M and ∂L/∂S in shared memory. Every sum has a fixed order and one writer: the same bits run to
// run, and dw, dbias go through the same per-sequence partials as the token walk's.
constexpr int kChunkMaxB = 16;
// 16 warps a block: with one block an SM (its shared memory), the warps are what hides the latency of
// the products' shared-memory reads and of the row reductions.
constexpr int kCThreads = 512, kCWarps = kCThreads / 32;
// Rows a product task computes (one column of kRB rows: 16 × 64 products are one task a thread).
constexpr int kRB = 2;
constexpr int kRowGroups = kCThreads / kMaxDim, kRowsPer = kMaxDim / kRowGroups;

// An operand in shared memory: element (i, r) at p[i·rs + r·cs].
struct Op {
  const float* p;
  int rs, cs;
  __device__ __forceinline__ float operator()(int i, int r) const { return p[i * rs + r * cs]; }
};

// Whether an operand's runs along k (A's rows: k_is_col; B's columns: not) can be read four at a
// time: contiguous in k, 16-byte aligned, k a multiple of 4.
__device__ __forceinline__ bool quads(const Op& x, bool k_is_col, int k) {
  const int step = k_is_col ? x.cs : x.rs, lead = k_is_col ? x.rs : x.cs;
  return step == 1 && k % 4 == 0 && lead % 4 == 0 &&
         reinterpret_cast<std::uintptr_t>(x.p) % 16 == 0;
}
__device__ __forceinline__ float4 quad_at(const float* p) {
  return *reinterpret_cast<const float4*>(p);
}

// out(i, j, Σ_r A(i, r) B(r, j)) for i < m, j < n: a task is one column j of kRB rows, so a warp's
// B reads are one row of B (or, where B's k runs are contiguous, one run per lane) and its A reads
// broadcasts. Where A's rows are contiguous in k (and aligned), A is read four k at a time, and so is
// B where its columns are: the products' shared-memory reads are what bounds them.
template <class Out>
__device__ __forceinline__ void small_mm(int m, int n, int k, Op A, Op B, Out out) {
  const int tasks = ((m + kRB - 1) / kRB) * n;
  const bool a4 = quads(A, true, k), b4 = a4 && quads(B, false, k);
  for (int task = threadIdx.x; task < tasks; task += kCThreads) {
    const int i0 = (task / n) * kRB, j = task % n;
    float acc[kRB] = {};
    if (a4) {
      for (int r = 0; r < k; r += 4) {
        float bv[4];
        if (b4) {
          const float4 t = quad_at(B.p + j * B.cs + r);
          bv[0] = t.x, bv[1] = t.y, bv[2] = t.z, bv[3] = t.w;
        } else {
#pragma unroll
          for (int q = 0; q < 4; ++q) bv[q] = B(r + q, j);
        }
#pragma unroll
        for (int u = 0; u < kRB; ++u)
          if (i0 + u < m) {
            const float4 av = quad_at(A.p + (i0 + u) * A.rs + r);
            acc[u] += av.x * bv[0];
            acc[u] += av.y * bv[1];
            acc[u] += av.z * bv[2];
            acc[u] += av.w * bv[3];
          }
      }
    } else {
#pragma unroll 4
      for (int r = 0; r < k; ++r) {
        const float bv = B(r, j);
#pragma unroll
        for (int u = 0; u < kRB; ++u)
          if (i0 + u < m) acc[u] += A(i0 + u, r) * bv;
      }
    }
#pragma unroll
    for (int u = 0; u < kRB; ++u)
      if (i0 + u < m) out(i0 + u, j, acc[u]);
  }
}

// x[s] = row[r0 + s] for s < kRowsPer (where r0 + s < d): four at a time where d is a multiple of 16.
__device__ __forceinline__ void load_run(const float* row, int r0, int d, float (&x)[kRowsPer]) {
  if (d % 16 == 0) {
#pragma unroll
    for (int s = 0; s < kRowsPer; s += 4) {
      const float4 t = r0 < d ? quad_at(row + r0 + s) : make_float4(0.f, 0.f, 0.f, 0.f);
      x[s] = t.x, x[s + 1] = t.y, x[s + 2] = t.z, x[s + 3] = t.w;
    }
  } else {
#pragma unroll
    for (int s = 0; s < kRowsPer; ++s) x[s] = r0 + s < d ? row[r0 + s] : 0.f;
  }
}

// The block's sums of three values per thread, each in a fixed order (the warps' sums, then those
// partials in warp order), with two barriers for the three.
__device__ __forceinline__ void block_sum3(float (&v)[3], float* scratch) {
#pragma unroll
  for (int q = 0; q < 3; ++q) {
    v[q] = warp_sum(v[q]);
    if (threadIdx.x % 32 == 0) scratch[q * kCWarps + threadIdx.x / 32] = v[q];
  }
  __syncthreads();
#pragma unroll
  for (int q = 0; q < 3; ++q) {
    float s = 0.f;
    for (int w = 0; w < kCWarps; ++w) s += scratch[q * kCWarps + w];
    v[q] = s;
  }
  __syncthreads();
}

// The chunked backward's shared memory, in floats: four d × d matrices (M_p, S_p, ∂L/∂M, ∂L/∂S),
// kCRows rows of [b, d], kCSq matrices of [b, b] and kCScal vectors of b; then 4·kCWarps floats for
// block sums and each warp's dw, dbias. The d-wide rows are padded to a multiple of 4 plus 4 floats:
// 16-byte runs, and a warp's 16-byte reads of eight rows at once fall on distinct banks.
enum CRow { cQ, cK, cV, cU, cZH, cG, cE, cDY, cQM, cQS, cKGM, cKGS, cDU, cDK, cDD, kCRows };
enum CSq { sQK, sA, sG, sN, sDG, sDN, sDYU, kCSq };
enum CScal { vTh, vAl, vEt, vBe, vM, vF, vSig, vSg, vSgz, vDBe, vDF, vDM, kCScal };
struct ChunkLayout {
  int d, b, ld, lb;
  __host__ __device__ std::size_t mat() const { return std::size_t(d) * ld; }
  __host__ __device__ std::size_t rows() const { return std::size_t(b) * ld; }
  __host__ __device__ std::size_t sq() const { return std::size_t(b) * lb; }
  __host__ __device__ std::size_t floats() const {
    return 4 * mat() + kCRows * rows() + kCSq * sq() + kCScal * std::size_t(b) + 4 * kCWarps +
           2 * std::size_t(kCWarps) * d;
  }
};
__host__ __device__ inline ChunkLayout chunk_layout(int d, int b) {
  return ChunkLayout{d, b, ((d + 3) & ~3) + 4, b | 1};
}

// The coefficients of L tokens (titans_coefficients): lane j of warp 0 forms column j of n and G,
// lane i the prefix products β_i, m_i and f_i.
__device__ __forceinline__ void chunk_coefficients(const ChunkLayout& cl, float* G, float* N,
                                                   const float* th, const float* al,
                                                   const float* et, float* beta, float* mm,
                                                   float* f, int L) {
  const int lane = threadIdx.x % 32;
  if (threadIdx.x >= 32) return;
  if (lane < L) {
    const int j = lane;
    float n = 0.f, g = 0.f;
    for (int i = 0; i < L; ++i) {
      if (i < j) {
        N[i * cl.lb + j] = G[i * cl.lb + j] = 0.f;
      } else if (i == j) {
        n = g = th[j];
        N[i * cl.lb + j] = G[i * cl.lb + j] = n;
      } else {
        n = et[i] * n;
        g = (1.f - al[i]) * g + n;
        N[i * cl.lb + j] = n;
        G[i * cl.lb + j] = g;
      }
    }
    float be = 1.f, m = 1.f, ff = 0.f;
    for (int i = 0; i <= j; ++i) {
      const float a = 1.f - al[i];
      be = i == 0 ? a : a * be;
      m = i == 0 ? et[i] : et[i] * m;
      ff = i == 0 ? m : a * ff + m;
    }
    beta[j] = be;
    mm[j] = m;
    f[j] = ff;
  }
}

template <int NJ>
__global__ void __launch_bounds__(kCThreads, 1) chunked_backward_kernel(TitansBackwardArgs a) {
  extern __shared__ float4 chunk_smem[];
  float* sm = reinterpret_cast<float*>(chunk_smem);
  const TitansDims& dm = a.dims;
  const int d = dm.dim, h = blockIdx.x, n = blockIdx.y, T = dm.seq_len, C = dm.chunk,
            b = dm.mini_batch;
  const ChunkLayout cl = chunk_layout(d, b);
  const int ld = cl.ld, lb = cl.lb;
  float* Mp = sm;
  float* Sp = Mp + cl.mat();
  float* GM = Sp + cl.mat();
  float* GS = GM + cl.mat();
  float* rowbuf = GS + cl.mat();
  const auto R = [&](int r) { return rowbuf + r * cl.rows(); };
  float* sqbuf = rowbuf + kCRows * cl.rows();
  const auto Sq = [&](int s) { return sqbuf + s * cl.sq(); };
  float* scal = sqbuf + kCSq * cl.sq();
  const auto V = [&](int v) { return scal + v * b; };
  float* red = scal + kCScal * b;  // 4 · kCWarps
  float* acc = red + 4 * kCWarps;  // [kCWarps, 2, d]: each warp's dw, dbias

  const int tid = threadIdx.x, lane = tid % 32, warp = tid / 32;
  // The d × d updates of rank ≤ b: thread (trg, tc) holds column tc of the kRowsPer rows from
  // trg·kRowsPer, so a warp's reads of a k or q row are broadcasts, four at a time.
  const int tc = tid % kMaxDim, trg = tid / kMaxDim;
  bool in[NJ];
  float w[NJ], bias[NJ];
  head_params(a.w, a.bias, h, d, layout_of(d), in, w, bias);  // lane vectors: entries l + 32j
  const long long row0 = (long long)n * T, col = (long long)h * d;
  const std::size_t dd = std::size_t(d) * d, head = std::size_t(n) * dm.heads + h;
  const int nc = (T + C - 1) / C;
  const float* states = a.states + head * std::size_t(nc) * 2 * dd;
  float* ws = static_cast<float*>(a.workspace);
  float* partial_dw = ws + head * 2 * d;
  float* ws_states = ws + std::size_t(dm.batch) * dm.heads * 2 * d + head * ws_head_floats(d, C);
  const float D = float(d);
  const int H = dm.heads;

  float dw_acc[NJ], db_acc[NJ];
#pragma unroll
  for (int j = 0; j < NJ; ++j) dw_acc[j] = db_acc[j] = 0.f;

  for (int i = tid; i < d * d; i += kCThreads) {
    const int r = i / d, c = i % d;
    GM[r * ld + c] = a.dM_final ? a.dM_final[head * dd + i] : 0.f;
    GS[r * ld + c] = 0.f;
  }

  // z = k M_p for the L rows of cK into cZH, then a warp a row: ẑ, e, g, Σg, Σ(g ⊙ ẑ), σ and u.
  const auto writes = [&](int L) {
    small_mm(L, d, d, Op{R(cK), ld, 1}, Op{Mp, ld, 1}, [&](int i, int j, float v) {
      R(cZH)[i * ld + j] = v;
    });
    __syncthreads();
    for (int i = warp; i < L; i += kCWarps) {
      float z[NJ], zh[NJ], e[NJ], g[NJ];
#pragma unroll
      for (int j = 0; j < NJ; ++j) z[j] = in[j] ? R(cZH)[i * ld + lane + 32 * j] : 0.f;
      const float sigma = layer_norm(z, in, d, a.eps, zh);
#pragma unroll
      for (int j = 0; j < NJ; ++j) {
        const int c = lane + 32 * j;
        e[j] = in[j] ? w[j] * zh[j] + bias[j] - R(cV)[i * ld + c] + R(cK)[i * ld + c] : 0.f;
        g[j] = e[j] * w[j];
      }
      const float sg = vsum(g), sgz = vdot(g, zh), cinv = 1.f / (sigma * D);
#pragma unroll
      for (int j = 0; j < NJ; ++j) {
        const int c = lane + 32 * j;
        if (!in[j]) continue;
        R(cZH)[i * ld + c] = zh[j];
        R(cE)[i * ld + c] = e[j];
        R(cG)[i * ld + c] = g[j];
        R(cU)[i * ld + c] = D * g[j] - cinv * (sg + sgz * zh[j]);
      }
      if (lane == 0) {
        V(vSig)[i] = sigma;
        V(vSg)[i] = sg;
        V(vSgz)[i] = sgz;
      }
    }
  };
  // Rows t0 .. t0 + L − 1 of q, k, v (and dO into cDY) and their rates.
  const auto load_inputs = [&](int t0, int L, bool with_q) {
    for (int i = tid; i < L * d; i += kCThreads) {
      const int r = i / d, c = i % d;
      const long long g = row0 + t0 + r;
      R(cK)[r * ld + c] = a.k[g * a.ld_k + col + c];
      R(cV)[r * ld + c] = a.v[g * a.ld_v + col + c];
      if (with_q) {
        R(cQ)[r * ld + c] = a.q[g * a.ld_q + col + c];
        R(cDY)[r * ld + c] = a.dO[g * a.ld_do + col + c];
      }
    }
    for (int i = tid; i < L; i += kCThreads) {
      const long long g = row0 + t0 + i;
      V(vTh)[i] = a.theta[g * H + h];
      V(vAl)[i] = a.alpha[g * H + h];
      V(vEt)[i] = a.eta[g * H + h];
    }
  };

  for (int c = nc - 1; c >= 0; --c) {
    const int c0 = c * C, Lc = min(C, T - c0), P = (Lc + b - 1) / b;
    // The chunk's stored M, S run forward to each mini-batch's start (slot p of the workspace).
    for (int i = tid; i < d * d; i += kCThreads) {
      const int r = i / d, cc = i % d;
      Mp[r * ld + cc] = states[(std::size_t(c) * 2) * dd + i];
      Sp[r * ld + cc] = states[(std::size_t(c) * 2 + 1) * dd + i];
    }
    __syncthreads();
    for (int p = 0; p + 1 < P; ++p) {
      float* slot = ws_states + std::size_t(p) * 2 * dd;
      for (int i = tid; i < d * d; i += kCThreads) {
        const int r = i / d, cc = i % d;
        slot[i] = Mp[r * ld + cc];
        slot[dd + i] = Sp[r * ld + cc];
      }
      load_inputs(c0 + p * b, b, false);
      __syncthreads();
      chunk_coefficients(cl, Sq(sG), Sq(sN), V(vTh), V(vAl), V(vEt), V(vBe), V(vM), V(vF), b);
      writes(b);
      __syncthreads();
      // M ← β_L M + f_L S − 2 Σ_j G_Lj k_jᵀ u_j,  S ← m_L S − 2 Σ_j n_Lj k_jᵀ u_j.
      const float* gL = Sq(sG) + (b - 1) * lb;
      const float* nL = Sq(sN) + (b - 1) * lb;
      const float bL = V(vBe)[b - 1], fL = V(vF)[b - 1], mL = V(vM)[b - 1];
      if (tc < d) {
        float sg[kRowsPer] = {}, sn[kRowsPer] = {};
        for (int j = 0; j < b; ++j) {
          const float u = R(cU)[j * ld + tc], gu = gL[j] * u, nu = nL[j] * u;
          float kr[kRowsPer];
          load_run(R(cK) + j * ld, trg * kRowsPer, d, kr);
#pragma unroll
          for (int s = 0; s < kRowsPer; ++s) {
            sg[s] += kr[s] * gu;
            sn[s] += kr[s] * nu;
          }
        }
#pragma unroll
        for (int s = 0; s < kRowsPer; ++s) {
          const int r = trg * kRowsPer + s;
          if (r < d) {
            const float m0 = Mp[r * ld + tc], s0 = Sp[r * ld + tc];
            Mp[r * ld + tc] = bL * m0 + fL * s0 - 2.f * sg[s];
            Sp[r * ld + tc] = mL * s0 - 2.f * sn[s];
          }
        }
      }
      __syncthreads();
    }
    // The mini-batches in reverse.
    for (int p = P - 1; p >= 0; --p) {
      const int t0 = c0 + p * b, L = min(b, Lc - p * b);
      if (p != P - 1) {
        const float* slot = ws_states + std::size_t(p) * 2 * dd;
        for (int i = tid; i < d * d; i += kCThreads) {
          const int r = i / d, cc = i % d;
          Mp[r * ld + cc] = slot[i];
          Sp[r * ld + cc] = slot[dd + i];
        }
      }
      load_inputs(t0, L, true);
      // ⟨∂L/∂M, M_p⟩, ⟨∂L/∂M, S_p⟩, ⟨∂L/∂S, S_p⟩: this thread's terms (summed below).
      float pm = 0.f, pf = 0.f, ps = 0.f;
      __syncthreads();
      for (int i = tid; i < d * d; i += kCThreads) {
        const int r = i / d, cc = i % d, o = r * ld + cc;
        pm += GM[o] * Mp[o];
        pf += GM[o] * Sp[o];
        ps += GS[o] * Sp[o];
      }
      chunk_coefficients(cl, Sq(sG), Sq(sN), V(vTh), V(vAl), V(vEt), V(vBe), V(vM), V(vF), L);
      small_mm(L, d, d, Op{R(cQ), ld, 1}, Op{Mp, ld, 1}, [&](int i, int j, float v) {
        R(cQM)[i * ld + j] = v;
      });
      small_mm(L, d, d, Op{R(cQ), ld, 1}, Op{Sp, ld, 1}, [&](int i, int j, float v) {
        R(cQS)[i * ld + j] = v;
      });
      small_mm(L, L, d, Op{R(cQ), ld, 1}, Op{R(cK), 1, ld},
               [&](int i, int j, float v) { Sq(sQK)[i * lb + j] = v; });
      small_mm(L, d, d, Op{R(cK), ld, 1}, Op{GM, ld, 1}, [&](int i, int j, float v) {
        R(cKGM)[i * ld + j] = v;
      });
      small_mm(L, d, d, Op{R(cK), ld, 1}, Op{GS, ld, 1}, [&](int i, int j, float v) {
        R(cKGS)[i * ld + j] = v;
      });
      writes(L);  // its first barrier orders the products above before their readers
      float sums[3] = {pm, pf, ps};
      block_sum3(sums, red);  // its barriers: u, ẑ, … are in
      const float sum_m = sums[0], sum_f = sums[1], sum_s = sums[2];
      for (int i = tid; i < L * L; i += kCThreads) {
        const int r = i / L, j = i % L;
        Sq(sA)[r * lb + j] = j <= r ? Sq(sQK)[r * lb + j] * Sq(sG)[r * lb + j] : 0.f;
      }
      __syncthreads();
      // The read, a warp a row: Y, its LayerNorm, dw, dbias, dY; dβ_i = dY_i·QM_i, df_i = dY_i·QS_i.
      for (int i = warp; i < L; i += kCWarps) {
        float y[NJ], yh[NJ], dO[NJ];
        const float be = V(vBe)[i], ff = V(vF)[i];
#pragma unroll
        for (int j = 0; j < NJ; ++j) {
          const int cc = lane + 32 * j;
          float v = 0.f;
          if (in[j]) {
            float au = 0.f;
            for (int jj = 0; jj <= i; ++jj) au += Sq(sA)[i * lb + jj] * R(cU)[jj * ld + cc];
            v = be * R(cQM)[i * ld + cc] + ff * R(cQS)[i * ld + cc] - 2.f * au;
          }
          y[j] = v;
          dO[j] = in[j] ? R(cDY)[i * ld + cc] : 0.f;
        }
        const float sy = layer_norm(y, in, d, a.eps, yh);
        float dyh[NJ];
#pragma unroll
        for (int j = 0; j < NJ; ++j) {
          dw_acc[j] += dO[j] * yh[j];
          db_acc[j] += dO[j];
          dyh[j] = dO[j] * w[j];
        }
        const float m1 = vsum(dyh) / D, m2 = vdot(dyh, yh) / D;
        float dy[NJ], qm[NJ], qs[NJ];
#pragma unroll
        for (int j = 0; j < NJ; ++j) {
          const int cc = lane + 32 * j;
          dy[j] = in[j] ? dO[j] + (dyh[j] - m1 - yh[j] * m2) / sy : 0.f;
          qm[j] = in[j] ? R(cQM)[i * ld + cc] : 0.f;
          qs[j] = in[j] ? R(cQS)[i * ld + cc] : 0.f;
          if (in[j]) R(cDY)[i * ld + cc] = dy[j];
        }
        const float dbe = vdot(dy, qm), dff = vdot(dy, qs);
        if (lane == 0) {
          V(vDBe)[i] = dbe + (i == L - 1 ? sum_m : 0.f);
          V(vDF)[i] = dff + (i == L - 1 ? sum_f : 0.f);
          V(vDM)[i] = i == L - 1 ? sum_s : 0.f;
        }
      }
      __syncthreads();
      // dY Uᵀ; then dG, dn and dQK = −2 dYUᵀ ⊙ G (in place of dY Uᵀ).
      small_mm(L, L, d, Op{R(cDY), ld, 1}, Op{R(cU), 1, ld},
               [&](int i, int j, float v) { Sq(sDYU)[i * lb + j] = v; });
      __syncthreads();
      for (int i = tid; i < L * L; i += kCThreads) {
        const int r = i / L, j = i % L, o = r * lb + j;
        const float dyu = Sq(sDYU)[o];
        Sq(sDG)[o] = j <= r ? -2.f * Sq(sQK)[o] * dyu : 0.f;
        Sq(sDN)[o] = 0.f;
        Sq(sDYU)[o] = j <= r ? -2.f * dyu * Sq(sG)[o] : 0.f;
      }
      __syncthreads();
      // The end state's terms of the last row: dG_{L−1,j} −= 2 k_j ∂L/∂M u_jᵀ, dn likewise with ∂L/∂S.
      for (int j = warp; j < L; j += kCWarps) {
        float sgm = 0.f, sgs = 0.f;
        for (int cc = lane; cc < d; cc += 32) {
          const float u = R(cU)[j * ld + cc];
          sgm += R(cKGM)[j * ld + cc] * u;
          sgs += R(cKGS)[j * ld + cc] * u;
        }
        sgm = warp_sum(sgm);
        sgs = warp_sum(sgs);
        if (lane == 0) {
          Sq(sDG)[(L - 1) * lb + j] -= 2.f * sgm;
          Sq(sDN)[(L - 1) * lb + j] -= 2.f * sgs;
        }
      }
      __syncthreads();
      // θ, α, η through the coefficients' recursions (warp 0, rows in reverse, lane j a column),
      // beside the products below, which read none of what it writes.
      if (warp == 0) {
        float* dG = Sq(sDG);
        float* dN = Sq(sDN);
        const float* G = Sq(sG);
        const float* N = Sq(sN);
        float dbe_c = 0.f, df_c = 0.f, dm_c = 0.f;  // the carried dβ_i, df_i, dm_i (lane 0)
        for (int i = L - 1; i >= 0; --i) {
          const float aa = 1.f - V(vAl)[i], e = V(vEt)[i];
          float da = 0.f, de = 0.f;
          const int j = lane;
          if (j < i) {
            const float dg = dG[i * lb + j];
            da = dg * G[(i - 1) * lb + j];
            dG[(i - 1) * lb + j] += aa * dg;
            const float dn = dN[i * lb + j] + dg;
            de = dn * N[(i - 1) * lb + j];
            dN[(i - 1) * lb + j] += e * dn;
          }
          da = warp_sum(da);
          de = warp_sum(de);
          __syncwarp();
          if (lane == 0) {
            const std::size_t g = std::size_t(row0 + t0 + i) * H + h;
            a.dtheta[g] = dG[i * lb + i] + dN[i * lb + i];
            const float dbe = V(vDBe)[i] + dbe_c, dff = V(vDF)[i] + df_c;
            const float dmm = V(vDM)[i] + dm_c + dff;
            if (i > 0) {
              da += dff * V(vF)[i - 1] + dbe * V(vBe)[i - 1];
              de += dmm * V(vM)[i - 1];
              df_c = aa * dff;
              dbe_c = aa * dbe;
              dm_c = e * dmm;
            } else {
              da += dbe;
              de += dmm;
            }
            a.dalpha[g] = -da;
            a.deta[g] = de;
          }
          __syncwarp();
        }
      }
      const float* gL = Sq(sG) + (L - 1) * lb;
      const float* nL = Sq(sN) + (L - 1) * lb;
      const float bL = V(vBe)[L - 1], fL = V(vF)[L - 1], mL = V(vM)[L - 1];
      // dq = diag(β) dY M_pᵀ + diag(f) dY S_pᵀ + dQK K, straight to global memory.
      small_mm(L, d, d, Op{R(cDY), ld, 1}, Op{Mp, 1, ld}, [&](int i, int j, float v) {
        R(cQM)[i * ld + j] = V(vBe)[i] * v;
      });
      small_mm(L, d, d, Op{R(cDY), ld, 1}, Op{Sp, 1, ld}, [&](int i, int j, float v) {
        R(cQS)[i * ld + j] = V(vF)[i] * v;
      });
      // dU = −2 Aᵀ dY − 2 diag(g_L) K ∂L/∂M − 2 diag(n_L) K ∂L/∂S.
      small_mm(L, d, L, Op{Sq(sA), 1, lb}, Op{R(cDY), ld, 1}, [&](int i, int j, float v) {
        R(cDU)
        [i * ld + j] =
            -2.f * v - 2.f * gL[i] * R(cKGM)[i * ld + j] - 2.f * nL[i] * R(cKGS)[i * ld + j];
      });
      // dK's first terms: dQKᵀ Q − 2 diag(g_L) U ∂L/∂Mᵀ − 2 diag(n_L) U ∂L/∂Sᵀ.
      small_mm(L, d, L, Op{Sq(sDYU), 1, lb}, Op{R(cQ), ld, 1}, [&](int i, int j, float v) {
        R(cDK)[i * ld + j] = v;
      });
      __syncthreads();
      small_mm(L, d, d, Op{R(cU), ld, 1}, Op{GM, 1, ld}, [&](int i, int j, float v) {
        R(cDK)[i * ld + j] -= 2.f * gL[i] * v;
      });
      small_mm(L, d, L, Op{Sq(sDYU), lb, 1}, Op{R(cK), ld, 1}, [&](int i, int j, float v) {
        const long long g = row0 + t0 + i;
        a.dq[g * a.ld_dq + col + j] = R(cQM)[i * ld + j] + R(cQS)[i * ld + j] + v;
      });
      __syncthreads();
      small_mm(L, d, d, Op{R(cU), ld, 1}, Op{GS, 1, ld}, [&](int i, int j, float v) {
        R(cDK)[i * ld + j] -= 2.f * nL[i] * v;
      });
      __syncthreads();
      // Each u's backward, a warp a row (titans_backward's): dv, dk's e term, dw, dbias, and dd = ∂L/∂z.
      for (int i = warp; i < L; i += kCWarps) {
        float du[NJ], zh[NJ], g[NJ], e[NJ];
#pragma unroll
        for (int j = 0; j < NJ; ++j) {
          const int cc = lane + 32 * j;
          du[j] = in[j] ? R(cDU)[i * ld + cc] : 0.f;
          zh[j] = in[j] ? R(cZH)[i * ld + cc] : 0.f;
          g[j] = in[j] ? R(cG)[i * ld + cc] : 0.f;
          e[j] = in[j] ? R(cE)[i * ld + cc] : 0.f;
        }
        const float sigma = V(vSig)[i], sg = V(vSg)[i], sgz = V(vSgz)[i];
        const float cinv = 1.f / (sigma * D);
        const float s1 = vsum(du), s2 = vdot(du, zh);
        float dzh[NJ];
        const long long gr = row0 + t0 + i;
#pragma unroll
        for (int j = 0; j < NJ; ++j) {
          const int cc = lane + 32 * j;
          const float dg = in[j] ? D * du[j] - cinv * (s1 + s2 * zh[j]) : 0.f;
          const float de = dg * w[j];
          dzh[j] = -cinv * (sgz * du[j] + s2 * g[j]) + de * w[j];
          dw_acc[j] += dg * e[j] + de * zh[j];
          db_acc[j] += de;
          if (in[j]) {
            a.dv[gr * a.ld_dv + col + cc] = -de;
            R(cDK)[i * ld + cc] += de;
          }
        }
        const float dsigma = cinv * (sg * s1 + sgz * s2) / sigma;
        const float dsig_total = dsigma - vdot(dzh, zh) / sigma;
        float ddv[NJ];
#pragma unroll
        for (int j = 0; j < NJ; ++j)
          ddv[j] = in[j] ? dzh[j] / sigma + (dsig_total / D) * zh[j] : 0.f;
        const float mean = vsum(ddv) / D;
#pragma unroll
        for (int j = 0; j < NJ; ++j)
          if (in[j]) R(cDD)[i * ld + lane + 32 * j] = ddv[j] - mean;
      }
      __syncthreads();
      // dk = the terms above + dd M_pᵀ; then the state entering the mini-batch's adjoints:
      // ∂L/∂S_p = f_L ∂L/∂M + m_L ∂L/∂S + Qᵀ diag(f) dY,  ∂L/∂M_p = β_L ∂L/∂M + Qᵀ diag(β) dY + Kᵀ dd.
      small_mm(L, d, d, Op{R(cDD), ld, 1}, Op{Mp, 1, ld}, [&](int i, int j, float v) {
        const long long g = row0 + t0 + i;
        a.dk[g * a.ld_dk + col + j] = R(cDK)[i * ld + j] + v;
      });
      if (tc < d) {
        float qb[kRowsPer] = {}, qf[kRowsPer] = {}, kd[kRowsPer] = {};
        for (int j = 0; j < L; ++j) {
          const float dy = R(cDY)[j * ld + tc], dyb = V(vBe)[j] * dy, dyf = V(vF)[j] * dy;
          const float ddj = R(cDD)[j * ld + tc];
          float q[kRowsPer], kr[kRowsPer];
          load_run(R(cQ) + j * ld, trg * kRowsPer, d, q);
          load_run(R(cK) + j * ld, trg * kRowsPer, d, kr);
#pragma unroll
          for (int s = 0; s < kRowsPer; ++s) {
            qb[s] += q[s] * dyb;
            qf[s] += q[s] * dyf;
            kd[s] += kr[s] * ddj;
          }
        }
#pragma unroll
        for (int s = 0; s < kRowsPer; ++s) {
          const int r = trg * kRowsPer + s, o = r * ld + tc;
          if (r < d) {
            const float gm = GM[o], gs = GS[o];
            GS[o] = fL * gm + mL * gs + qf[s];
            GM[o] = bL * gm + qb[s] + kd[s];
          }
        }
      }
      __syncthreads();
    }
  }
  if (a.dM0)
    for (int i = tid; i < d * d; i += kCThreads) a.dM0[head * dd + i] = GM[(i / d) * ld + i % d];
      // dw, dbias: each warp's share, summed over the warps in order.
#pragma unroll
  for (int j = 0; j < NJ; ++j)
    if (in[j]) {
      acc[warp * 2 * d + lane + 32 * j] = dw_acc[j];
      acc[warp * 2 * d + d + lane + 32 * j] = db_acc[j];
    }
  __syncthreads();
  for (int c = tid; c < d; c += kCThreads) {
    float sw = 0.f, sb = 0.f;
    for (int ww = 0; ww < kCWarps; ++ww) {
      sw += acc[ww * 2 * d + c];
      sb += acc[ww * 2 * d + d + c];
    }
    partial_dw[c] = sw;
    partial_dw[d + c] = sb;
  }
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
    const auto kernel = forward_kernel<decltype(rpt)::value, decltype(nj)::value>;
    detail::allow_shared_memory(kernel, kSegBytes);
    kernel<<<grid, kThreads, kSegBytes, a.stream>>>(a);
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
  const bool chunked = a.form == TitansBackwardForm::chunked ||
                       (a.form == TitansBackwardForm::automatic && d.mini_batch <= kChunkMaxB);
  require(!chunked || d.mini_batch <= kChunkMaxB, fn,
          "the chunked form takes mini_batch <= " + std::to_string(kChunkMaxB) + ", got " +
              std::to_string(d.mini_batch));
  const dim3 grid(d.heads, d.batch);
  with_shape(d, [&](auto rpt, auto nj) {
    if (chunked) {
      const auto kernel = chunked_backward_kernel<decltype(nj)::value>;
      const std::size_t smem = chunk_layout(d.dim, d.mini_batch).floats() * sizeof(float);
      detail::allow_shared_memory(kernel, smem);
      kernel<<<grid, kCThreads, smem, a.stream>>>(a);
    } else {
      const auto kernel = backward_kernel<decltype(rpt)::value, decltype(nj)::value>;
      detail::allow_shared_memory(kernel, kSegBytes);
      kernel<<<grid, kThreads, kSegBytes, a.stream>>>(a);
    }
  });
  TTTLAB_CUDA_CHECK(cudaGetLastError());
  const int entries = d.heads * d.dim;
  sum_over_batch_kernel<<<(entries + kThreads - 1) / kThreads, kThreads, 0, a.stream>>>(
      static_cast<const float*>(a.workspace), d.batch, d.heads, d.dim, a.dw, a.dbias);
  TTTLAB_CUDA_CHECK(cudaGetLastError());
}

}  // namespace tttlab::kernels
