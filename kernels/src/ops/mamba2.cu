// Mamba-2's chunked scan, forward and backward, and the layer's element-wise passes (see
// tttlab/kernels/mamba2.hpp; the maths is docs/MATH.md §8.8, the CPU functions they mirror are
// mamba2_scan_chunked / _backward in core/src/seq/mamba2_layer.cpp).
//
// Every chunk kernel runs one block per (sequence, head, chunk) and holds the chunk's tiles in shared
// memory, rows padded by one float so that the column walks of the dot products hit distinct banks.
// Inside a chunk the segment sums cs, e = exp(cs), w = exp(cs_last − cs) are made by one thread (at
// most 64 terms), in the CPU's order.
#include <algorithm>
#include <cstdint>
#include <type_traits>

#include "ops/bf16_tiles.cuh"
#include "ops/ops_common.cuh"
#include "ttt/ttt_mma.cuh"
#include "tttlab/kernels/mamba2.hpp"

namespace tttlab::kernels {
namespace {

constexpr int kScanThreads = 256;
constexpr int kMaxChunk = 64;
constexpr int kMaxDim = 128;
constexpr std::size_t kMaxSharedBytes = 227 * 1024;  // the opt-in limit per block of sm_90

// The reference's softplus (PyTorch's and the Triton scan's): r itself above 20.
__device__ __forceinline__ float softplus_f(float r) {
  return r > 20.f ? r : fmaxf(r, 0.f) + log1pf(expf(-fabsf(r)));
}
__device__ __forceinline__ float softplus_grad_f(float r) {
  return r > 20.f ? 1.f : 1.f / (1.f + expf(-r));
}
__device__ __forceinline__ float sigmoid_f(float x) { return 1.f / (1.f + expf(-x)); }
__device__ __forceinline__ float silu_f(float x) { return x * sigmoid_f(x); }
__device__ __forceinline__ float silu_grad_f(float x) {
  const float s = sigmoid_f(x);
  return s * (1.f + x * (1.f - s));
}

// The chunk's place: sequence n, head h, chunk c of nc; its first row and length.
struct Chunk {
  int n, h, c, nc, L;
  long long row0;  // n·T + c·Q
};
__device__ __forceinline__ Chunk chunk_of(const Mamba2ScanDims& d, int h) {
  Chunk k;
  k.c = blockIdx.x;
  k.h = h;
  k.n = blockIdx.z;
  k.nc = (d.seq_len + d.chunk - 1) / d.chunk;
  const int c0 = k.c * d.chunk;
  k.L = min(d.chunk, d.seq_len - c0);
  k.row0 = (long long)k.n * d.seq_len + c0;
  return k;
}
__device__ __forceinline__ Chunk chunk_of(const Mamba2ScanDims& d) {
  return chunk_of(d, blockIdx.y);
}

// cs, e, w of the chunk from sdt (thread 0; the caller syncs before and after).
__device__ __forceinline__ void segment_sums(const float* sdt, float A, int L, float* cs, float* e,
                                             float* w) {
  if (threadIdx.x == 0) {
    float run = 0.f;
    for (int i = 0; i < L; ++i) cs[i] = run += sdt[i] * A;
    for (int i = 0; i < L; ++i) {
      e[i] = expf(cs[i]);
      w[i] = expf(cs[L - 1] - cs[i]);
    }
  }
}

// Σ_k a[k·sa]·b[k·sb] over n terms in four independent partial sums: each inner loop of these kernels
// is a dot product from shared memory, and with few warps per SM (the tiles fill it) one dependent
// chain of FMAs would leave the load and FMA latencies exposed.
__device__ __forceinline__ float dot(const float* a, int sa, const float* b, int sb, int n) {
  float s0 = 0.f, s1 = 0.f, s2 = 0.f, s3 = 0.f;
  int k = 0;
  for (; k + 3 < n; k += 4) {
    s0 += a[k * sa] * b[k * sb];
    s1 += a[(k + 1) * sa] * b[(k + 1) * sb];
    s2 += a[(k + 2) * sa] * b[(k + 2) * sb];
    s3 += a[(k + 3) * sa] * b[(k + 3) * sb];
  }
  for (; k < n; ++k) s0 += a[k * sa] * b[k * sb];
  return (s0 + s1) + (s2 + s3);
}

// Sum of v over the block's NT threads in a fixed order (red: NT floats); every thread gets it.
template <int NT = kScanThreads>
__device__ float block_sum(float v, float* red) {
  red[threadIdx.x] = v;
  __syncthreads();
  for (int s = NT / 2; s > 0; s >>= 1) {
    if (threadIdx.x < s) red[threadIdx.x] += red[threadIdx.x + s];
    __syncthreads();
  }
  const float r = red[0];
  __syncthreads();
  return r;
}

// ---- forward ---------------------------------------------------------------------------------------

// (1) dt of the chunk, its own state contribution Xdᵀ·diag(w)·B into states[c], and its decay.
__global__ void __launch_bounds__(kScanThreads) chunk_state_kernel(Mamba2ScanForwardArgs a) {
  extern __shared__ float sm[];
  const Mamba2ScanDims& d = a.dims;
  const Chunk k = chunk_of(d);
  const int P = d.head_dim, N = d.d_state, Q = d.chunk, H = d.heads;
  float* sXw = sm;                // [Q][P+1]: dt_j·w_j·X[j, p]
  float* sB = sXw + Q * (P + 1);  // [Q][N+1]
  float* sdt = sB + Q * (N + 1);
  float* cs = sdt + Q;
  float* e = cs + Q;
  float* w = e + Q;
  const float A = -expf(a.A_log[k.h]);
  for (int i = threadIdx.x; i < k.L; i += blockDim.x) {
    const long long r = k.row0 + i;
    const float v = softplus_f(a.dt_raw[r * a.ld_dt + k.h] + a.dt_bias[k.h]);
    sdt[i] = v;
    a.dt[r * H + k.h] = v;
  }
  __syncthreads();
  segment_sums(sdt, A, k.L, cs, e, w);
  __syncthreads();
  for (int idx = threadIdx.x; idx < k.L * P; idx += blockDim.x) {
    const int j = idx / P, p = idx % P;
    sXw[j * (P + 1) + p] = sdt[j] * w[j] * a.X[(k.row0 + j) * a.ld_x + k.h * P + p];
  }
  for (int idx = threadIdx.x; idx < k.L * N; idx += blockDim.x) {
    const int j = idx / N, q = idx % N;
    sB[j * (N + 1) + q] = a.B[(k.row0 + j) * a.ld_bc + q];
  }
  __syncthreads();
  float* S = a.states + ((std::size_t(k.n) * H + k.h) * k.nc + k.c) * std::size_t(P) * N;
  for (int idx = threadIdx.x; idx < P * N; idx += blockDim.x) {
    const int p = idx / N, q = idx % N;
    S[idx] = dot(sXw + p, P + 1, sB + q, N + 1, k.L);
  }
  if (threadIdx.x == 0) a.decay[(std::size_t(k.n) * H + k.h) * k.nc + k.c] = expf(cs[k.L - 1]);
}

// (2) The state across the chunks: states[c] ← the state before chunk c (in place; each thread one
// element of [P, N] of one (sequence, head)).
__global__ void state_pass_kernel(float* states, const float* decay, int nc, int PN) {
  const int e = blockIdx.x * blockDim.x + threadIdx.x;
  if (e >= PN) return;
  const std::size_t nh = blockIdx.y;
  float* S = states + nh * nc * std::size_t(PN) + e;
  const float* dec = decay + nh * nc;
  float run = 0.f;
  for (int c = 0; c < nc; ++c) {
    const float local = S[std::size_t(c) * PN];
    S[std::size_t(c) * PN] = run;
    run = dec[c] * run + local;
  }
}

// (3) Y = ((C Bᵀ) ⊙ L)(dt ⊙ X) + diag(e)·C·S_pᵀ + D·X.
__global__ void __launch_bounds__(kScanThreads) chunk_output_kernel(Mamba2ScanForwardArgs a) {
  extern __shared__ float sm[];
  const Mamba2ScanDims& d = a.dims;
  const Chunk k = chunk_of(d);
  const int P = d.head_dim, N = d.d_state, Q = d.chunk, H = d.heads;
  float* sC = sm;                // [Q][N+1]
  float* sB = sC + Q * (N + 1);  // [Q][N+1]
  float* sX = sB + Q * (N + 1);  // [Q][P+1]
  float* sS = sX + Q * (P + 1);  // [P][N+1]
  float* sG = sS + P * (N + 1);  // [Q][Q+1]
  float* sdt = sG + Q * (Q + 1);
  float* cs = sdt + Q;
  float* e = cs + Q;
  float* w = e + Q;
  const float A = -expf(a.A_log[k.h]);
  for (int i = threadIdx.x; i < k.L; i += blockDim.x) sdt[i] = a.dt[(k.row0 + i) * H + k.h];
  for (int idx = threadIdx.x; idx < k.L * N; idx += blockDim.x) {
    const int j = idx / N, q = idx % N;
    sB[j * (N + 1) + q] = a.B[(k.row0 + j) * a.ld_bc + q];
    sC[j * (N + 1) + q] = a.C[(k.row0 + j) * a.ld_bc + q];
  }
  for (int idx = threadIdx.x; idx < k.L * P; idx += blockDim.x) {
    const int j = idx / P, p = idx % P;
    sX[j * (P + 1) + p] = a.X[(k.row0 + j) * a.ld_x + k.h * P + p];
  }
  const float* S = a.states + ((std::size_t(k.n) * H + k.h) * k.nc + k.c) * std::size_t(P) * N;
  for (int idx = threadIdx.x; idx < P * N; idx += blockDim.x)
    sS[(idx / N) * (N + 1) + idx % N] = S[idx];
  __syncthreads();
  segment_sums(sdt, A, k.L, cs, e, w);
  __syncthreads();
  // G[i, j] = (C_i·B_j)·exp(cs_i − cs_j)·dt_j for j ≤ i (dt folded in: G·X = (CBᵀ ⊙ L)(dt ⊙ X)).
  for (int idx = threadIdx.x; idx < k.L * k.L; idx += blockDim.x) {
    const int i = idx / k.L, j = idx % k.L;
    float g = 0.f;
    if (j <= i) {
      g = dot(sC + i * (N + 1), 1, sB + j * (N + 1), 1, N) * expf(cs[i] - cs[j]) * sdt[j];
    }
    sG[i * (Q + 1) + j] = g;
  }
  __syncthreads();
  const float Dh = a.D[k.h];
  for (int idx = threadIdx.x; idx < k.L * P; idx += blockDim.x) {
    const int i = idx / P, p = idx % P;
    float y = dot(sG + i * (Q + 1), 1, sX + p, P + 1, i + 1);
    const float cs_p = dot(sC + i * (N + 1), 1, sS + p * (N + 1), 1, N);
    y += e[i] * cs_p + Dh * sX[i * (P + 1) + p];
    a.Y[(k.row0 + i) * a.ld_y + k.h * P + p] = y;
  }
}

// ---- backward ---------------------------------------------------------------------------------------

struct Workspace {
  float* dS;    // [B, H, nc, P, N]: the gradient of the state after each chunk
  float* dBh;   // [H, R, N]: per-head dB (fp32 path), per head group's (tensor cores, groups ≤ H)
  float* dCh;   // [H, R, N]
  float* part;  // [3, B, H, nc]: per-chunk partial sums of dA, dD, ddt_bias
};

std::size_t align4(std::size_t n) { return (n + 3) / 4 * 4; }

Workspace carve(const Mamba2ScanDims& d, void* base) {
  float* f = static_cast<float*>(base);
  const std::size_t R = std::size_t(d.batch) * d.seq_len;
  Workspace w;
  w.dS = f;
  f += align4(mamba2_state_floats(d));
  w.dBh = f;
  f += align4(std::size_t(d.heads) * R * d.d_state);
  w.dCh = f;
  f += align4(std::size_t(d.heads) * R * d.d_state);
  w.part = f;
  return w;
}

// (1) The state gradient's local part, (diag(e)·dY)ᵀ·C [P, N], into dS[c].
__global__ void __launch_bounds__(kScanThreads)
    dstate_local_kernel(Mamba2ScanBackwardArgs a, float* dS) {
  extern __shared__ float sm[];
  const Mamba2ScanDims& d = a.dims;
  const Chunk k = chunk_of(d);
  const int P = d.head_dim, N = d.d_state, Q = d.chunk, H = d.heads;
  float* sY = sm;                // [Q][P+1]: e_i·dY[i, p]
  float* sC = sY + Q * (P + 1);  // [Q][N+1]
  float* sdt = sC + Q * (N + 1);
  float* cs = sdt + Q;
  float* e = cs + Q;
  float* w = e + Q;
  const float A = -expf(a.A_log[k.h]);
  for (int i = threadIdx.x; i < k.L; i += blockDim.x) sdt[i] = a.dt[(k.row0 + i) * H + k.h];
  __syncthreads();
  segment_sums(sdt, A, k.L, cs, e, w);
  __syncthreads();
  for (int idx = threadIdx.x; idx < k.L * P; idx += blockDim.x) {
    const int i = idx / P, p = idx % P;
    sY[i * (P + 1) + p] = e[i] * a.dY[(k.row0 + i) * a.ld_y + k.h * P + p];
  }
  for (int idx = threadIdx.x; idx < k.L * N; idx += blockDim.x) {
    const int i = idx / N, q = idx % N;
    sC[i * (N + 1) + q] = a.C[(k.row0 + i) * a.ld_bc + q];
  }
  __syncthreads();
  float* out = dS + ((std::size_t(k.n) * H + k.h) * k.nc + k.c) * std::size_t(P) * N;
  for (int idx = threadIdx.x; idx < P * N; idx += blockDim.x) {
    const int p = idx / N, q = idx % N;
    out[idx] = dot(sY + p, P + 1, sC + q, N + 1, k.L);
  }
}

// (2) In reverse: dS[c] ← the gradient of the state after chunk c (0 after the last); the gradient of
// the state before chunk c is local[c] + decay[c]·dS[c].
__global__ void dstate_pass_kernel(float* dS, const float* decay, int nc, int PN) {
  const int e = blockIdx.x * blockDim.x + threadIdx.x;
  if (e >= PN) return;
  const std::size_t nh = blockIdx.y;
  float* G = dS + nh * nc * std::size_t(PN) + e;
  const float* dec = decay + nh * nc;
  float run = 0.f;
  for (int c = nc; c-- > 0;) {
    const float local = G[std::size_t(c) * PN];
    G[std::size_t(c) * PN] = run;
    run = local + dec[c] * run;
  }
}

// (3) Every gradient of the chunk (MATH.md §8.8's backward), with S_p = states[c] and dS = dS[c].
__global__ void __launch_bounds__(kScanThreads)
    chunk_grad_kernel(Mamba2ScanBackwardArgs a, Workspace ws) {
  extern __shared__ float sm[];
  const Mamba2ScanDims& d = a.dims;
  const Chunk k = chunk_of(d);
  const int P = d.head_dim, N = d.d_state, Q = d.chunk, H = d.heads;
  const int lp = P + 1, ln = N + 1, lq = Q + 1;
  float* sX = sm;              // [Q][P+1]  X
  float* sdY = sX + Q * lp;    // [Q][P+1]  dY
  float* sdXd = sdY + Q * lp;  // [Q][P+1]  d(dt ⊙ X)
  float* sT1 = sdXd + Q * lp;  // [Q][P+1]  X ⊙ (B dSᵀ)      (for ω)
  float* sT2 = sT1 + Q * lp;   // [Q][P+1]  dY ⊙ (C S_pᵀ)    (for the state's read)
  float* sB = sT2 + Q * lp;    // [Q][N+1]
  float* sC = sB + Q * ln;     // [Q][N+1]
  float* sS = sC + Q * ln;     // [P][N+1]  S_p
  float* sdS = sS + P * ln;    // [P][N+1]  dS
  float* sCB = sdS + P * ln;   // [Q][Q+1]  C_i·B_j (j ≤ i)
  float* sdGM = sCB + Q * lq;  // [Q][Q+1]  (dY_i·Xd_j)·L_ij (j ≤ i)
  float* sG = sdGM + Q * lq;   // [Q][Q+1]  G = (C_i·B_j)·L_ij (j ≤ i)
  float* sdt = sG + Q * lq;
  float* cs = sdt + Q;
  float* e = cs + Q;
  float* w = e + Q;
  float* dcs = w + Q;
  float* xd = dcs + Q;  // X_i·dXd_i
  float* red = xd + Q;  // [kScanThreads]
  const float A = -expf(a.A_log[k.h]);
  const float Dh = a.D[k.h];
  for (int i = threadIdx.x; i < k.L; i += blockDim.x) sdt[i] = a.dt[(k.row0 + i) * H + k.h];
  for (int idx = threadIdx.x; idx < k.L * P; idx += blockDim.x) {
    const int i = idx / P, p = idx % P;
    const long long r = k.row0 + i;
    sX[i * lp + p] = a.X[r * a.ld_x + k.h * P + p];
    sdY[i * lp + p] = a.dY[r * a.ld_y + k.h * P + p];
  }
  for (int idx = threadIdx.x; idx < k.L * N; idx += blockDim.x) {
    const int i = idx / N, q = idx % N;
    const long long r = k.row0 + i;
    sB[i * ln + q] = a.B[r * a.ld_bc + q];
    sC[i * ln + q] = a.C[r * a.ld_bc + q];
  }
  const std::size_t soff = ((std::size_t(k.n) * H + k.h) * k.nc + k.c) * std::size_t(P) * N;
  float sds_part = 0.f;  // ⟨dS, S_p⟩, this thread's share
  for (int idx = threadIdx.x; idx < P * N; idx += blockDim.x) {
    const float s = a.states[soff + idx], g = ws.dS[soff + idx];
    sS[(idx / N) * ln + idx % N] = s;
    sdS[(idx / N) * ln + idx % N] = g;
    sds_part += s * g;
  }
  __syncthreads();
  segment_sums(sdt, A, k.L, cs, e, w);
  const float sds = block_sum(sds_part, red);  // (syncs)
  // CB and the masked dG.
  for (int idx = threadIdx.x; idx < k.L * k.L; idx += blockDim.x) {
    const int i = idx / k.L, j = idx % k.L;
    float cb = 0.f, dg = 0.f, m = 0.f;
    if (j <= i) {
      cb = dot(sC + i * ln, 1, sB + j * ln, 1, N);
      const float yx = dot(sdY + i * lp, 1, sX + j * lp, 1, P);
      m = expf(cs[i] - cs[j]);
      dg = yx * sdt[j] * m;
    }
    sCB[i * lq + j] = cb;
    sdGM[i * lq + j] = dg;
    sG[i * lq + j] = cb * m;
  }
  __syncthreads();
  // Per (j, p): dXd = Gᵀ·dY + w_j·(B dSᵀ)[j, p]; the terms of ω and of the state's read.
  for (int idx = threadIdx.x; idx < k.L * P; idx += blockDim.x) {
    const int j = idx / P, p = idx % P;
    const float g = dot(sG + j * lq + j, lq, sdY + j * lp + p, lp, k.L - j);
    const float bds = dot(sB + j * ln, 1, sdS + p * ln, 1, N);
    const float csp = dot(sC + j * ln, 1, sS + p * ln, 1, N);
    sdXd[j * lp + p] = g + w[j] * bds;
    sT1[j * lp + p] = sX[j * lp + p] * bds;
    sT2[j * lp + p] = sdY[j * lp + p] * csp;
  }
  // dB_h[j, q] = Σ_{i ≥ j} dGM[i, j]·C[i, q] + w_j·dt_j·Σ_p X[j, p]·dS[p, q];
  // dC_h[i, q] = Σ_{j ≤ i} dGM[i, j]·B[j, q] + e_i·Σ_p dY[i, p]·S_p[p, q].
  const std::size_t R = std::size_t(d.batch) * d.seq_len;
  float* dBh = ws.dBh + std::size_t(k.h) * R * N;
  float* dCh = ws.dCh + std::size_t(k.h) * R * N;
  for (int idx = threadIdx.x; idx < k.L * N; idx += blockDim.x) {
    const int j = idx / N, q = idx % N;
    const float b = dot(sdGM + j * lq + j, lq, sC + j * ln + q, ln, k.L - j);
    const float c = dot(sdGM + j * lq, 1, sB + q, ln, j + 1);
    const float xs = dot(sX + j * lp, 1, sdS + q, ln, P);
    const float ys = dot(sdY + j * lp, 1, sS + q, ln, P);
    dBh[(k.row0 + j) * N + q] = b + w[j] * sdt[j] * xs;
    dCh[(k.row0 + j) * N + q] = c + e[j] * ys;
  }
  __syncthreads();
  // The segment sums' gradient, row by row.
  for (int i = threadIdx.x; i < k.L; i += blockDim.x) {
    // R's row sum minus its column sum; R_ii is in both and cancels exactly, so it is left out
    // (computed, an FMA would leave its rounding error where the difference is 0).
    float rr = 0.f;
    for (int j = 0; j < i; ++j) rr += sdGM[i * lq + j] * sCB[i * lq + j];
    for (int m = i + 1; m < k.L; ++m) rr -= sdGM[m * lq + i] * sCB[m * lq + i];
    float om = 0.f, tm = 0.f, x = 0.f;
    for (int p = 0; p < P; ++p) {
      om += sT1[i * lp + p];
      tm += sT2[i * lp + p];
      x += sX[i * lp + p] * sdXd[i * lp + p];
    }
    om *= w[i] * sdt[i];
    red[i] = om;  // ω_i, summed below
    dcs[i] = rr + e[i] * tm - om;
    xd[i] = x;
  }
  __syncthreads();
  float dD_part = 0.f;
  for (int idx = threadIdx.x; idx < k.L * P; idx += blockDim.x) {
    const int i = idx / P, p = idx % P;
    const float dy = sdY[i * lp + p];
    dD_part += dy * sX[i * lp + p];
    a.dX[(k.row0 + i) * a.ld_dx + k.h * P + p] = sdt[i] * sdXd[i * lp + p] + Dh * dy;
  }
  if (threadIdx.x == 0) {
    float om_sum = 0.f;
    for (int i = 0; i < k.L; ++i) om_sum += red[i];
    dcs[k.L - 1] += e[k.L - 1] * sds + om_sum;
    float acc = 0.f, dA = 0.f, dbias = 0.f;
    for (int i = k.L; i-- > 0;) {
      acc += dcs[i];
      const float ddt = acc * A + xd[i];
      dA += acc * sdt[i];
      const long long r = k.row0 + i;
      const float g = ddt * softplus_grad_f(a.dt_raw[r * a.ld_dt + k.h] + a.dt_bias[k.h]);
      a.ddt_raw[r * a.ld_ddt + k.h] = g;
      dbias += g;
    }
    const std::size_t pi = (std::size_t(k.n) * H + k.h) * k.nc + k.c;
    const std::size_t np = std::size_t(d.batch) * H * k.nc;
    ws.part[pi] = dA;
    ws.part[2 * np + pi] = dbias;
  }
  __syncthreads();  // red is reused
  const float dD = block_sum(dD_part, red);
  if (threadIdx.x == 0) {
    const std::size_t pi = (std::size_t(k.n) * H + k.h) * k.nc + k.c;
    ws.part[std::size_t(d.batch) * H * k.nc + pi] = dD;
  }
}

// dB[r, q] = Σ_s dB_s[r, q] (and dC) over the H slices, in order: the heads' (the fp32 path), or
// the head groups' (chunk_grad_mma_kernel).
__global__ void sum_heads_kernel(const float* dBh, const float* dCh, int H, long long R, int N,
                                 float* dB, float* dC, int ld) {
  const long long total = R * N;
  for (long long i = blockIdx.x * (long long)blockDim.x + threadIdx.x; i < total;
       i += (long long)gridDim.x * blockDim.x) {
    float b = 0.f, c = 0.f;
    for (int h = 0; h < H; ++h) {
      b += dBh[h * total + i];
      c += dCh[h * total + i];
    }
    const long long r = i / N;
    const int q = int(i - r * N);
    dB[r * ld + q] = b;
    dC[r * ld + q] = c;
  }
}

// The per-head parameters from the chunks' partials, in a fixed order: dA_log += A·ΣdA (A = −exp(A_log)),
// dD += ΣdD, ddt_bias += Σddt_raw.
__global__ void head_params_kernel(const float* part, int B, int H, int nc, const float* A_log,
                                   float* dA_log, float* dD, float* ddt_bias) {
  const int h = blockIdx.x * blockDim.x + threadIdx.x;
  if (h >= H) return;
  const std::size_t np = std::size_t(B) * H * nc;
  float sa = 0.f, sd = 0.f, sb = 0.f;
  for (int n = 0; n < B; ++n)
    for (int c = 0; c < nc; ++c) {
      const std::size_t pi = (std::size_t(n) * H + h) * nc + c;
      sa += part[pi];
      sd += part[np + pi];
      sb += part[2 * np + pi];
    }
  dA_log[h] += -expf(A_log[h]) * sa;
  dD[h] += sd;
  ddt_bias[h] += sb;
}

// ---- the tensor-core path (bf16 operands, fp32 accumulation) ---------------------------------------
//
// The same kernels as above with every product of the chunk on mma.sync m16n8k16: one block of eight
// warps per (sequence, head, chunk) (the output and gradient kernels: per group of heads, in turn),
// the chunk's tiles rounded to bf16 in shared memory (row-major, row stride width + 8:
// bf16_tiles.cuh's ldmatrix reads), the block's 16 × 16 output tiles taken by the warps in turn,
// each tile's two n8 accumulators in fp32. What is rounded to bf16: the operands
// X, B, C, dY, the scaled rows dt·w·X and e·dY, the states S_p and dS, and the masked score matrices
// (the forward's G = (C Bᵀ ⊙ L)·dt, the backward's G = C Bᵀ ⊙ L and dGM = (dY Xᵀ ⊙ L)·dt) where they
// enter their second products. The segment sums and decays, the state pass across the chunks (states
// kept in fp32), the D skip, and the row sums of the decay gradients (from the fp32 accumulators and
// fp32 inputs) stay fp32; the segment sums and the backward's suffix sums run on one warp by shuffles.
// Chunks of 64 only; P, N ∈ {32, 64, 128}. Rows past the chunk's end are zero in every tile, so they
// add nothing, and are never stored. Fixed tile owners and fixed-order sums: the same results bit for
// bit run to run. The kernels are bound by their global loads, so each thread has two tiles' loads in
// flight before it stores either (TileLoad).

constexpr int kMmaThreads = 256;
constexpr int kMmaWarps = kMmaThreads / 32;
constexpr int kQ = 64;        // the chunk
constexpr int kLQ = kQ + 8;   // row stride of the [Q, Q] score tiles
constexpr int kQT = kQ / 16;  // 16-row tiles of a chunk

using detail::col_sum8;
using detail::mma_bf16;
using detail::pack_bf16;
using detail::quad_sum;
namespace bt = detail::bf16_tiles;

// Four floats of row i, column c of G (row stride ld): one 16-byte load where the caller found G and
// ld 16-byte aligned (v4), else four.
__device__ __forceinline__ float4 load4(const float* G, long long ld, int i, int c, bool v4) {
  const float* p = G + i * ld + c;
  return v4 ? *reinterpret_cast<const float4*>(p) : make_float4(p[0], p[1], p[2], p[3]);
}

// Column c of row i of a [Q][W] fp32 tile, swizzled so that the 8-byte reads of a fragment's four
// rows (a half warp) fall in 32 different banks; 4-float groups stay contiguous.
__device__ __forceinline__ int fp32_col(int i, int c) { return c ^ ((i & 3) << 3); }

// Rows 0..R−1 of W columns of G (row stride ld), each row i times scale(i), rounded to bf16 into
// S[R][W + 8]; rows ≥ L as zeros; in two halves, so that a kernel has the loads of several tiles in
// flight before it stores any: load() issues all of the thread's 4-float loads into registers, store()
// scales, rounds and stores them. One load in flight at a time left the chunk kernels bound by the
// latency of global memory, not its bandwidth.
template <int R, int W>
struct TileLoad {
  static constexpr int kPer = R * W / 4 / kMmaThreads;  // 4-float groups per thread
  static_assert(kPer * 4 * kMmaThreads == R * W, "whole groups");
  float4 v[kPer];
  __device__ __forceinline__ void load(const float* G, long long ld, int L) {
    const bool v4 = ((reinterpret_cast<std::uintptr_t>(G) | std::uintptr_t(ld) * 4) & 15) == 0;
#pragma unroll
    for (int b = 0; b < kPer; ++b) {
      const int idx = b * kMmaThreads + int(threadIdx.x);
      const int i = idx / (W / 4), c = idx % (W / 4) * 4;
      v[b] = i < L ? load4(G, ld, i, c, v4) : make_float4(0.f, 0.f, 0.f, 0.f);
    }
  }
  template <class Scale>
  __device__ __forceinline__ void store(std::uint16_t* S, int L, Scale scale) const {
#pragma unroll
    for (int b = 0; b < kPer; ++b) {
      const int idx = b * kMmaThreads + int(threadIdx.x);
      const int i = idx / (W / 4), c = idx % (W / 4) * 4;
      const float f = i < L ? scale(i) : 0.f;
      *reinterpret_cast<uint2*>(S + i * (W + 8) + c) =
          make_uint2(pack_bf16(f * v[b].x, f * v[b].y), pack_bf16(f * v[b].z, f * v[b].w));
    }
  }
  // The loaded values unrounded into F[R][W] (fp32_col's swizzle; W ≥ 32).
  __device__ __forceinline__ void store_f32(float* F) const {
#pragma unroll
    for (int b = 0; b < kPer; ++b) {
      const int idx = b * kMmaThreads + int(threadIdx.x);
      const int i = idx / (W / 4), c = idx % (W / 4) * 4;
      *reinterpret_cast<float4*>(F + i * W + fp32_col(i, c)) = v[b];
    }
  }
};

// cs, e, w of the chunk's rows i < L from sdt, by warp 0 (the caller syncs before and after): lane l
// takes rows 2l and 2l + 1, and the prefix sum runs across the lanes by shuffles (the tensor-core
// path's order of the sum; segment_sums keeps the CPU's for the fp32 path).
__device__ __forceinline__ void segment_sums_warp(const float* sdt, float A, int L, float* cs,
                                                  float* e, float* w) {
  if (threadIdx.x >= 32) return;
  const int l = threadIdx.x, i0 = 2 * l, i1 = i0 + 1;
  const float a0 = i0 < L ? sdt[i0] * A : 0.f, a1 = i1 < L ? sdt[i1] * A : 0.f;
  float s = a0 + a1;
#pragma unroll
  for (int o = 1; o < 32; o <<= 1) {
    const float y = __shfl_up_sync(0xffffffffu, s, o);
    if (l >= o) s += y;
  }
  float before = __shfl_up_sync(0xffffffffu, s, 1);
  if (l == 0) before = 0.f;
  const float c0 = before + a0, c1 = c0 + a1;
  const float last = __shfl_sync(0xffffffffu, (L - 1) & 1 ? c1 : c0, (L - 1) >> 1);
  if (i0 < L) {
    cs[i0] = c0;
    e[i0] = expf(c0);
    w[i0] = expf(last - c0);
  }
  if (i1 < L) {
    cs[i1] = c1;
    e[i1] = expf(c1);
    w[i1] = expf(last - c1);
  }
}

struct Unscaled {
  __device__ float operator()(int) const { return 1.f; }
};

// acc (two n8 tiles: 16 × 16) += A·B over the k-steps [k0, k1): fa(a, ks) gives the A fragment,
// fb(b, ks) the B fragments of both n8 tiles (bf16_tiles.cuh's loads).
template <class FA, class FB>
__device__ __forceinline__ void mma_steps(float (&acc)[2][4], int k0, int k1, FA fa, FB fb) {
  for (int ks = k0; ks < k1; ++ks) {
    std::uint32_t a[4], b[4];
    fa(a, ks);
    fb(b, ks);
    mma_bf16(acc[0], a, b[0], b[1]);
    mma_bf16(acc[1], a, b[2], b[3]);
  }
}

// The block's 16 × 16 tiles (mt, nt) of an [16·MT, 16·NT] result, warp w taking tiles w, w + 4, ...
template <int MT, int NT, class Body>
__device__ __forceinline__ void for_tiles(Body body) {
  for (int tile = threadIdx.x >> 5; tile < MT * NT; tile += kMmaWarps) body(tile / NT, tile % NT);
}

// for_tiles where every warp owns the same number of tiles (MT·NT a multiple of the warps), with
// the warp's turn s = 0, 1, ... passed to the body: accumulators indexed by s stay in registers.
template <int MT, int NT, class Body>
__device__ __forceinline__ void for_owned_tiles(Body body) {
  static_assert(MT * NT % kMmaWarps == 0, "whole tiles per warp");
#pragma unroll
  for (int s = 0; s < MT * NT / kMmaWarps; ++s) {
    const int tile = s * kMmaWarps + (threadIdx.x >> 5);
    body(s, tile / NT, tile % NT);
  }
}

// Element e of n8 tile u of tile (mt, nt): its row and column (the mma's C fragment).
__device__ __forceinline__ int frag_row(int mt, int e) {
  return 16 * mt + (threadIdx.x & 31) / 4 + 8 * (e >> 1);
}
__device__ __forceinline__ int frag_col(int nt, int u, int e) {
  return 16 * nt + 8 * u + 2 * (threadIdx.x & 3) + (e & 1);
}

__device__ __forceinline__ void zero2(float (&x)[2][4]) {
#pragma unroll
  for (int u = 0; u < 2; ++u) x[u][0] = x[u][1] = x[u][2] = x[u][3] = 0.f;
}

// out [P, N] (fp32, contiguous) = Uᵀ·V for the chunk's tiles U [Q][P + 8] and V [Q][N + 8].
template <int P, int N>
__device__ __forceinline__ void chunk_outer_mma(const std::uint16_t* sU, const std::uint16_t* sV,
                                                float* out) {
  const int lane = threadIdx.x & 31;
  for_tiles<P / 16, N / 16>([&](int mt, int nt) {
    float acc[2][4];
    zero2(acc);
    mma_steps(
        acc, 0, kQT,
        [&](std::uint32_t(&a)[4], int ks) { bt::load_a_trans<P + 8>(a, sU, 16 * mt, ks, lane); },
        [&](std::uint32_t(&b)[4], int ks) { bt::load_b_cols<N + 8>(b, sV, nt, ks, lane); });
#pragma unroll
    for (int u = 0; u < 2; ++u)
#pragma unroll
      for (int r = 0; r < 2; ++r)
        *reinterpret_cast<float2*>(out + frag_row(mt, 2 * r) * N + frag_col(nt, u, 0)) =
            make_float2(acc[u][2 * r], acc[u][2 * r + 1]);
  });
}

// Shared memory of the tensor-core kernels (bytes): fp32 rows first, then the bf16 tiles.
template <int P, int N>
constexpr std::size_t mma_state_smem() {
  return 4 * kQ * sizeof(float) + std::size_t(kQ) * ((P + 8) + (N + 8)) * 2;
}
template <int P, int N>
constexpr std::size_t mma_output_smem() {
  return 4 * kQ * sizeof(float) +
         (std::size_t(kQ) * (2 * (N + 8) + (P + 8)) + std::size_t(P) * (N + 8) + kQ * kLQ) * 2;
}
template <int P, int N>
constexpr int grad_fp32_floats() {  // sdt, cs, e, w, dcs, xd; the row partials; red; dt_raw
  return 6 * kQ + 2 * kQ * kQT + 3 * kQ * (P / 16) + kMmaThreads + kQ;
}
template <int P, int N>
constexpr std::size_t mma_grad_tiles_smem() {
  return grad_fp32_floats<P, N>() * sizeof(float) + (std::size_t(kQ) * (2 * (P + 8) + 2 * (N + 8)) +
                                                     2 * std::size_t(P) * (N + 8) + 2 * kQ * kLQ) *
                                                        2;
}
// The chunk gradient also keeps X and dY in fp32 ([Q][P] each, swizzled) for its dX pass, which
// otherwise reads them from global memory again in the middle of its products, where that still
// leaves two blocks per SM (2 × (bytes + 1 KB reserved) ≤ 228 KB): P = N = 64 and smaller.
template <int P, int N>
constexpr bool grad_keeps_fp32() {
  return mma_grad_tiles_smem<P, N>() <= 110 * 1024 &&
         mma_grad_tiles_smem<P, N>() + 2 * std::size_t(kQ) * P * sizeof(float) <= 113 * 1024;
}
template <int P, int N>
constexpr bool kGradKeepsFp32 = grad_keeps_fp32<P, N>();
template <int P, int N>
constexpr std::size_t mma_grad_smem() {
  return mma_grad_tiles_smem<P, N>() +
         (grad_keeps_fp32<P, N>() ? 2 * std::size_t(kQ) * P * sizeof(float) : 0);
}

// (2) state_pass_kernel and dstate_pass_kernel with four state elements per thread (16-byte loads and
// stores) and the loads of kPassBatch chunks issued before their stores (the same sums in the same
// order): the plain loops wait for one global load per chunk. PN is a multiple of 4 (P, N ≥ 32).
// With 32 chunks' loads in flight (184 and 214 registers) instead of 8, the two passes took 51 and
// 50 µs instead of 66 and 81 at B8 T2048 (every chunk of a sequence of 2048 at once).
constexpr int kPassBatch = 32;

__device__ __forceinline__ void axpy4(float4& run, float d, float4 x) {
  run.x = d * run.x + x.x;
  run.y = d * run.y + x.y;
  run.z = d * run.z + x.z;
  run.w = d * run.w + x.w;
}
__device__ __forceinline__ void xpay4(float4& run, float d, float4 x) {
  run.x = x.x + d * run.x;
  run.y = x.y + d * run.y;
  run.z = x.z + d * run.z;
  run.w = x.w + d * run.w;
}

__global__ void state_pass_batched_kernel(float* states, const float* decay, int nc, int PN) {
  const int e4 = blockIdx.x * blockDim.x + threadIdx.x;
  if (4 * e4 >= PN) return;
  const std::size_t nh = blockIdx.y;
  float4* S = reinterpret_cast<float4*>(states + nh * nc * std::size_t(PN)) + e4;
  const std::size_t stride = PN / 4;
  const float* dec = decay + nh * nc;
  float4 run = make_float4(0.f, 0.f, 0.f, 0.f);
  for (int c0 = 0; c0 < nc; c0 += kPassBatch) {
    float4 local[kPassBatch];
    float dc[kPassBatch];
#pragma unroll
    for (int b = 0; b < kPassBatch; ++b) {
      const bool in = c0 + b < nc;
      local[b] = in ? S[std::size_t(c0 + b) * stride] : make_float4(0.f, 0.f, 0.f, 0.f);
      dc[b] = in ? dec[c0 + b] : 0.f;
    }
#pragma unroll
    for (int b = 0; b < kPassBatch; ++b) {
      if (c0 + b >= nc) break;
      S[std::size_t(c0 + b) * stride] = run;
      axpy4(run, dc[b], local[b]);
    }
  }
}

__global__ void dstate_pass_batched_kernel(float* dS, const float* decay, int nc, int PN) {
  const int e4 = blockIdx.x * blockDim.x + threadIdx.x;
  if (4 * e4 >= PN) return;
  const std::size_t nh = blockIdx.y;
  float4* G = reinterpret_cast<float4*>(dS + nh * nc * std::size_t(PN)) + e4;
  const std::size_t stride = PN / 4;
  const float* dec = decay + nh * nc;
  float4 run = make_float4(0.f, 0.f, 0.f, 0.f);
  for (int c1 = nc; c1 > 0; c1 -= kPassBatch) {  // chunks c1 − 1 down to c1 − kPassBatch
    float4 local[kPassBatch];
    float dc[kPassBatch];
#pragma unroll
    for (int b = 0; b < kPassBatch; ++b) {
      const int c = c1 - 1 - b;
      local[b] = c >= 0 ? G[std::size_t(c) * stride] : make_float4(0.f, 0.f, 0.f, 0.f);
      dc[b] = c >= 0 ? dec[c] : 0.f;
    }
#pragma unroll
    for (int b = 0; b < kPassBatch; ++b) {
      const int c = c1 - 1 - b;
      if (c < 0) break;
      G[std::size_t(c) * stride] = run;
      xpay4(run, dc[b], local[b]);
    }
  }
}

// The per-head parameters from the chunks' partials as head_params_kernel, one warp per head: lane l
// sums the partials l, l + 32, ..., then the lanes' sums are added by shuffles (a fixed order).
__global__ void head_params_warp_kernel(const float* part, int B, int H, int nc, const float* A_log,
                                        float* dA_log, float* dD, float* ddt_bias) {
  const int h = blockIdx.x, l = threadIdx.x;
  const std::size_t np = std::size_t(B) * H * nc;
  float sa = 0.f, sd = 0.f, sb = 0.f;
  for (int j = l; j < B * nc; j += 32) {
    const int n = j / nc, c = j % nc;
    const std::size_t pi = (std::size_t(n) * H + h) * nc + c;
    sa += part[pi];
    sd += part[np + pi];
    sb += part[2 * np + pi];
  }
  sa = warp_sum(sa);
  sd = warp_sum(sd);
  sb = warp_sum(sb);
  if (l == 0) {
    dA_log[h] += -expf(A_log[h]) * sa;
    dD[h] += sd;
    ddt_bias[h] += sb;
  }
}

// (1) forward: dt, the chunk's state contribution (dt·w·X)ᵀ·B into states[c], its decay.
template <int P, int N>
__global__ void __launch_bounds__(kMmaThreads) chunk_state_mma_kernel(Mamba2ScanForwardArgs a) {
  extern __shared__ __align__(16) float smf[];
  const Mamba2ScanDims& d = a.dims;
  const Chunk k = chunk_of(d);
  const int H = d.heads;
  float* sdt = smf;
  float* cs = sdt + kQ;
  float* e = cs + kQ;
  float* w = e + kQ;
  auto* sXw = reinterpret_cast<std::uint16_t*>(w + kQ);  // [Q][P+8]: dt_j·w_j·X[j, p]
  std::uint16_t* sB = sXw + kQ * (P + 8);                // [Q][N+8]
  TileLoad<kQ, P> tx;
  TileLoad<kQ, N> tb;
  tx.load(a.X + k.row0 * a.ld_x + k.h * P, a.ld_x, k.L);
  tb.load(a.B + k.row0 * a.ld_bc, a.ld_bc, k.L);
  const float A = -expf(a.A_log[k.h]);
  for (int i = threadIdx.x; i < k.L; i += blockDim.x) {
    const long long r = k.row0 + i;
    const float v = softplus_f(a.dt_raw[r * a.ld_dt + k.h] + a.dt_bias[k.h]);
    sdt[i] = v;
    a.dt[r * H + k.h] = v;
  }
  __syncthreads();
  segment_sums_warp(sdt, A, k.L, cs, e, w);
  __syncthreads();
  tx.store(sXw, k.L, [&](int j) { return sdt[j] * w[j]; });
  tb.store(sB, k.L, Unscaled{});
  __syncthreads();
  chunk_outer_mma<P, N>(
      sXw, sB, a.states + ((std::size_t(k.n) * H + k.h) * k.nc + k.c) * std::size_t(P) * N);
  if (threadIdx.x == 0) a.decay[(std::size_t(k.n) * H + k.h) * k.nc + k.c] = expf(cs[k.L - 1]);
}

// (3) forward: Y = ((C Bᵀ) ⊙ L)(dt ⊙ X) + diag(e)·C·S_pᵀ + D·X, for the heads h_begin .. h_end − 1
// of blockIdx.y's group (scan_heads_per_block) in turn: B and C, the heads' common input, are
// loaded once (the same operations on the same values as a block per head, so the same bits). C Bᵀ
// is made again for each head: kept in registers (16 a thread) it took the kernel to 102 registers,
// two blocks per SM instead of four.
template <int P, int N>
__global__ void __launch_bounds__(kMmaThreads)
    chunk_output_mma_kernel(Mamba2ScanForwardArgs a, int heads_per_block) {
  constexpr int LP = P + 8, LN = N + 8;
  extern __shared__ __align__(16) float smf[];
  const Mamba2ScanDims& d = a.dims;
  const int H = d.heads, lane = threadIdx.x & 31;
  const int h_begin = int(blockIdx.y) * heads_per_block, h_end = min(H, h_begin + heads_per_block);
  float* sdt = smf;
  float* cs = sdt + kQ;
  float* e = cs + kQ;
  float* w = e + kQ;
  auto* sC = reinterpret_cast<std::uint16_t*>(w + kQ);  // [Q][N+8]
  std::uint16_t* sB = sC + kQ * LN;                     // [Q][N+8]
  std::uint16_t* sX = sB + kQ * LN;                     // [Q][P+8]
  std::uint16_t* sS = sX + kQ * LP;                     // [P][N+8]: S_p
  std::uint16_t* sG = sS + P * LN;                      // [Q][Q+8]
  const Chunk k0 = chunk_of(d, h_begin);                // the rows: the same for every head
  {
    TileLoad<kQ, N> tb, tc;
    tb.load(a.B + k0.row0 * a.ld_bc, a.ld_bc, k0.L);
    tc.load(a.C + k0.row0 * a.ld_bc, a.ld_bc, k0.L);
    tb.store(sB, k0.L, Unscaled{});
    tc.store(sC, k0.L, Unscaled{});
  }
  const bool has_state = k0.c > 0;  // the state before the first chunk is zero
  for (int h = h_begin; h < h_end; ++h) {
    const Chunk k = chunk_of(d, h);
    const float A = -expf(a.A_log[k.h]);
    for (int i = threadIdx.x; i < k.L; i += blockDim.x) sdt[i] = a.dt[(k.row0 + i) * H + k.h];
    const float* X = a.X + k.row0 * a.ld_x + k.h * P;
    {
      TileLoad<kQ, P> tx;
      TileLoad<P, N> ts;
      tx.load(X, a.ld_x, k.L);
      if (has_state)
        ts.load(a.states + ((std::size_t(k.n) * H + k.h) * k.nc + k.c) * std::size_t(P) * N, N, P);
      tx.store(sX, k.L, Unscaled{});
      if (has_state) ts.store(sS, P, Unscaled{});
    }
    __syncthreads();
    segment_sums_warp(sdt, A, k.L, cs, e, w);
    __syncthreads();
    // G[i, j] = (C_i·B_j)·exp(cs_i − cs_j)·dt_j for j ≤ i < L, else 0.
    for_tiles<kQT, kQT>([&](int mt, int nt) {
      float acc[2][4];
      zero2(acc);
      if (nt <= mt)
        mma_steps(
            acc, 0, N / 16,
            [&](std::uint32_t(&f)[4], int ks) { bt::load_a<LN>(f, sC, 16 * mt, ks, lane); },
            [&](std::uint32_t(&f)[4], int ks) { bt::load_b_rows<LN>(f, sB, nt, ks, lane); });
#pragma unroll
      for (int u = 0; u < 2; ++u)
#pragma unroll
        for (int r = 0; r < 2; ++r) {
          const int i = frag_row(mt, 2 * r);
          float g[2];
#pragma unroll
          for (int c = 0; c < 2; ++c) {
            const int j = frag_col(nt, u, c);
            g[c] = j <= i && i < k.L ? acc[u][2 * r + c] * expf(cs[i] - cs[j]) * sdt[j] : 0.f;
          }
          *reinterpret_cast<std::uint32_t*>(sG + i * kLQ + frag_col(nt, u, 0)) =
              pack_bf16(g[0], g[1]);
        }
    });
    __syncthreads();
    const float Dh = a.D[k.h];
    for_tiles<kQT, P / 16>([&](int mt, int nt) {
      float y[2][4], s[2][4];
      zero2(y);
      zero2(s);
      mma_steps(
          y, 0, mt + 1,
          [&](std::uint32_t(&f)[4], int ks) { bt::load_a<kLQ>(f, sG, 16 * mt, ks, lane); },
          [&](std::uint32_t(&f)[4], int ks) { bt::load_b_cols<LP>(f, sX, nt, ks, lane); });
      if (has_state)
        mma_steps(
            s, 0, N / 16,
            [&](std::uint32_t(&f)[4], int ks) { bt::load_a<LN>(f, sC, 16 * mt, ks, lane); },
            [&](std::uint32_t(&f)[4], int ks) { bt::load_b_rows<LN>(f, sS, nt, ks, lane); });
#pragma unroll
      for (int u = 0; u < 2; ++u)
#pragma unroll
        for (int r = 0; r < 2; ++r) {
          const int i = frag_row(mt, 2 * r), p = frag_col(nt, u, 0);
          if (i >= k.L) continue;
          const float2 x = make_float2(X[i * a.ld_x + p], X[i * a.ld_x + p + 1]);
          float* out = a.Y + (k.row0 + i) * a.ld_y + k.h * P + p;
          out[0] = y[u][2 * r] + e[i] * s[u][2 * r] + Dh * x.x;
          out[1] = y[u][2 * r + 1] + e[i] * s[u][2 * r + 1] + Dh * x.y;
        }
    });
    __syncthreads();  // the next head refills sdt, sX, sS and sG
  }
}

// (1) backward: the state gradient's local part (diag(e)·dY)ᵀ·C [P, N] into dS[c].
template <int P, int N>
__global__ void __launch_bounds__(kMmaThreads)
    dstate_local_mma_kernel(Mamba2ScanBackwardArgs a, float* dS) {
  extern __shared__ __align__(16) float smf[];
  const Mamba2ScanDims& d = a.dims;
  const Chunk k = chunk_of(d);
  const int H = d.heads;
  float* sdt = smf;
  float* cs = sdt + kQ;
  float* e = cs + kQ;
  float* w = e + kQ;
  auto* sY = reinterpret_cast<std::uint16_t*>(w + kQ);  // [Q][P+8]: e_i·dY[i, p]
  std::uint16_t* sC = sY + kQ * (P + 8);                // [Q][N+8]
  TileLoad<kQ, P> ty;
  TileLoad<kQ, N> tc;
  ty.load(a.dY + k.row0 * a.ld_y + k.h * P, a.ld_y, k.L);
  tc.load(a.C + k.row0 * a.ld_bc, a.ld_bc, k.L);
  const float A = -expf(a.A_log[k.h]);
  for (int i = threadIdx.x; i < k.L; i += blockDim.x) sdt[i] = a.dt[(k.row0 + i) * H + k.h];
  __syncthreads();
  segment_sums_warp(sdt, A, k.L, cs, e, w);
  __syncthreads();
  ty.store(sY, k.L, [&](int i) { return e[i]; });
  tc.store(sC, k.L, Unscaled{});
  __syncthreads();
  chunk_outer_mma<P, N>(sY, sC,
                        dS + ((std::size_t(k.n) * H + k.h) * k.nc + k.c) * std::size_t(P) * N);
}

// One head's inputs to chunk_grad_mma_kernel in two halves, as TileLoad: load() issues the global
// loads of X, dY (the chunk's rows), dt, dt_raw, and S_p, dS where they are small enough to hold
// (P·N ≤ 2048; at 64 × 64 holding them too spilled); store() puts them in shared memory (bf16 tiles,
// and fp32 X, dY where grad_keeps_fp32), loading S_p, dS of larger heads there four 4-float groups
// at a time, the first group's loads issued before X and dY are stored, and returns the thread's
// share of ⟨dS, S_p⟩ in fp32, summed in the order the kernel summed it before.
template <int P, int N>
struct HeadLoad {
  static constexpr int kPerS = P * N / 4 / kMmaThreads;  // 4-float groups of S_p (dS) per thread
  static constexpr bool kHoldS = kPerS <= 2;
  static constexpr int LN = N + 8;
  TileLoad<kQ, P> tx, ty;
  float4 sv[kHoldS ? kPerS : 1], gv[kHoldS ? kPerS : 1];
  float dtv, raw0, raw1;  // dt of row threadIdx.x; dt_raw of rows 2l, 2l + 1 (warp 0's lane l)
  __device__ __forceinline__ void load(const Mamba2ScanBackwardArgs& a, const float* dS,
                                       const Mamba2ScanDims& d, int h) {
    const Chunk k = chunk_of(d, h);
    dtv = int(threadIdx.x) < k.L ? a.dt[(k.row0 + threadIdx.x) * d.heads + k.h] : 0.f;
    if (threadIdx.x < 32) {
      const int i0 = 2 * int(threadIdx.x);
      const long long r0 = k.row0 + i0;
      raw0 = i0 < k.L ? a.dt_raw[r0 * a.ld_dt + k.h] : 0.f;
      raw1 = i0 + 1 < k.L ? a.dt_raw[(r0 + 1) * a.ld_dt + k.h] : 0.f;
    } else {
      raw0 = raw1 = 0.f;
    }
    tx.load(a.X + k.row0 * a.ld_x + k.h * P, a.ld_x, k.L);
    ty.load(a.dY + k.row0 * a.ld_y + k.h * P, a.ld_y, k.L);
    if constexpr (kHoldS) {
      const std::size_t soff = soffset(d, k);
#pragma unroll
      for (int b = 0; b < kPerS; ++b) {
        const int idx = b * kMmaThreads + int(threadIdx.x);
        sv[b] = *reinterpret_cast<const float4*>(a.states + soff + std::size_t(idx) * 4);
        gv[b] = *reinterpret_cast<const float4*>(dS + soff + std::size_t(idx) * 4);
      }
    }
  }
  __device__ static std::size_t soffset(const Mamba2ScanDims& d, const Chunk& k) {
    return ((std::size_t(k.n) * d.heads + k.h) * k.nc + k.c) * std::size_t(P) * N;
  }
  __device__ __forceinline__ static float store_s(std::uint16_t* sS, std::uint16_t* sdS, int idx,
                                                  float4 s, float4 g) {
    const int p = idx / (N / 4), q = idx % (N / 4) * 4;
    *reinterpret_cast<uint2*>(sS + p * LN + q) =
        make_uint2(pack_bf16(s.x, s.y), pack_bf16(s.z, s.w));
    *reinterpret_cast<uint2*>(sdS + p * LN + q) =
        make_uint2(pack_bf16(g.x, g.y), pack_bf16(g.z, g.w));
    return s.x * g.x + s.y * g.y + s.z * g.z + s.w * g.w;
  }
  __device__ __forceinline__ float store(const Mamba2ScanBackwardArgs& a, const float* dS,
                                         const Mamba2ScanDims& d, int h, float* sdt, float* sraw,
                                         std::uint16_t* sX, std::uint16_t* sdY, std::uint16_t* sS,
                                         std::uint16_t* sdS, float* fX, float* fdY) const {
    const Chunk k = chunk_of(d, h);
    if (int(threadIdx.x) < k.L) sdt[threadIdx.x] = dtv;
    if (threadIdx.x < 32) {
      sraw[2 * threadIdx.x] = raw0;
      sraw[2 * threadIdx.x + 1] = raw1;
    }
    if constexpr (kGradKeepsFp32<P, N>) {
      tx.store_f32(fX);
      ty.store_f32(fdY);
    }
    float part = 0.f;
    if constexpr (kHoldS) {
      tx.store(sX, k.L, Unscaled{});
      ty.store(sdY, k.L, Unscaled{});
#pragma unroll
      for (int b = 0; b < kPerS; ++b)
        part += store_s(sS, sdS, b * kMmaThreads + int(threadIdx.x), sv[b], gv[b]);
    } else {
      constexpr int kBatch = kPerS < 4 ? kPerS : 4;
      const std::size_t soff = soffset(d, k);
#pragma unroll
      for (int b0 = 0; b0 < kPerS; b0 += kBatch) {
        float4 s[kBatch], g[kBatch];
#pragma unroll
        for (int b = 0; b < kBatch; ++b) {
          const int idx = (b0 + b) * kMmaThreads + int(threadIdx.x);
          s[b] = *reinterpret_cast<const float4*>(a.states + soff + std::size_t(idx) * 4);
          g[b] = *reinterpret_cast<const float4*>(dS + soff + std::size_t(idx) * 4);
        }
        if (b0 == 0) {
          tx.store(sX, k.L, Unscaled{});
          ty.store(sdY, k.L, Unscaled{});
        }
#pragma unroll
        for (int b = 0; b < kBatch; ++b)
          part += store_s(sS, sdS, (b0 + b) * kMmaThreads + int(threadIdx.x), s[b], g[b]);
      }
    }
    return part;
  }
};

// (3) backward: every gradient of the chunk, as chunk_grad_kernel, with S_p = states[c] and
// dS = dS[c], for the heads h_begin .. h_end − 1 of blockIdx.y's group (scan_heads_per_block) in
// turn. B and C are the heads' common input, so the block loads them once, and it sums dB_h and
// dC_h over its heads in registers (each warp owns the same output tiles for every head, heads in
// order): with one group (the 125m training shape, B8 T2048) dB and dC go straight to the caller's
// columns, with no [H, R, N] per-head workspace written and read back by sum_heads_kernel; with
// several, the groups' sums go there and sum_heads_kernel adds the groups in order.
template <int P, int N>
constexpr int grad_min_blocks() {  // two blocks per SM where the tiles leave room for two
  return mma_grad_tiles_smem<P, N>() <= 110 * 1024 ? 2 : 1;
}
// VEC: X and dY read (where they are not kept in fp32 in shared memory) and dX written in 8-byte
// pairs (the launch takes it where every stride is even), the same values as one float at a time; at
// B8 T2048 the kernel took 322 µs instead of 364.
template <int P, int N, bool VEC = false>
__global__ void __launch_bounds__(kMmaThreads, grad_min_blocks<P, N>())
    chunk_grad_mma_kernel(Mamba2ScanBackwardArgs a, Workspace ws, int heads_per_block) {
  constexpr int LP = P + 8, LN = N + 8, PT = P / 16;
  constexpr int kOwnBC = kQT * (N / 16) / kMmaWarps;  // dB (dC) tiles per warp
  extern __shared__ __align__(16) float smf[];
  const Mamba2ScanDims& d = a.dims;
  const int H = d.heads, lane = threadIdx.x & 31, t = lane & 3;
  const int h_begin = int(blockIdx.y) * heads_per_block, h_end = min(H, h_begin + heads_per_block);
  float* sdt = smf;
  float* cs = sdt + kQ;
  float* e = cs + kQ;
  float* w = e + kQ;
  float* dcs = w + kQ;
  float* xd = dcs + kQ;             // X_i·dXd_i
  float* rowR = xd + kQ;            // [Q][QT]: R's row sums over each 16 columns (j < i)
  float* colR = rowR + kQ * kQT;    // [Q][QT]: R's column sums over each 16 rows (m > j)
  float* omP = colR + kQ * kQT;     // [Q][PT]: Σ_p X ⊙ (B dSᵀ) over each 16 columns
  float* tmP = omP + kQ * PT;       // [Q][PT]: Σ_p dY ⊙ (C S_pᵀ)
  float* xdP = tmP + kQ * PT;       // [Q][PT]: Σ_p X ⊙ dXd
  float* red = xdP + kQ * PT;       // [kMmaThreads]
  float* sraw = red + kMmaThreads;  // [Q]: dt_raw
  auto* sX = reinterpret_cast<std::uint16_t*>(sraw + kQ);  // [Q][P+8]
  std::uint16_t* sdY = sX + kQ * LP;                       // [Q][P+8]
  std::uint16_t* sB = sdY + kQ * LP;                       // [Q][N+8]
  std::uint16_t* sC = sB + kQ * LN;                        // [Q][N+8]
  std::uint16_t* sS = sC + kQ * LN;                        // [P][N+8]: S_p
  std::uint16_t* sdS = sS + P * LN;                        // [P][N+8]: dS
  std::uint16_t* sG = sdS + P * LN;                        // [Q][Q+8]: (C Bᵀ ⊙ L)
  std::uint16_t* sdGM = sG + kQ * kLQ;                     // [Q][Q+8]: (dY Xdᵀ ⊙ L)
  float* fX = reinterpret_cast<float*>(sdGM + kQ * kLQ);   // [Q][P] fp32 (grad_keeps_fp32)
  float* fdY = fX + kQ * P;                                // [Q][P] fp32
  const Chunk k0 = chunk_of(d, h_begin);                   // the rows: the same for every head
  // The next head's tiles are loaded into registers during this head's tail (the row sums and the
  // suffix sums, which read none of them), so that their loads' latency overlaps that work instead of
  // opening the head; the same values stored in the same order, so the same bits.
  HeadLoad<P, N> next;
  next.load(a, ws.dS, d, h_begin);
  {
    TileLoad<kQ, N> tb, tc;
    tb.load(a.B + k0.row0 * a.ld_bc, a.ld_bc, k0.L);
    tc.load(a.C + k0.row0 * a.ld_bc, a.ld_bc, k0.L);
    tb.store(sB, k0.L, Unscaled{});
    tc.store(sC, k0.L, Unscaled{});
  }
  // Σ over the block's heads of dB_h = dGMᵀ·C + w·dt ⊙ (X·dS) and dC_h = dGM·B + e ⊙ (dY·S_p).
  float dB_sum[kOwnBC][2][4], dC_sum[kOwnBC][2][4];
#pragma unroll
  for (int s = 0; s < kOwnBC; ++s) {
    zero2(dB_sum[s]);
    zero2(dC_sum[s]);
  }
  for (int h = h_begin; h < h_end; ++h) {
    const Chunk k = chunk_of(d, h);
    const float A = -expf(a.A_log[k.h]);
    const float Dh = a.D[k.h];
    const float* X = a.X + k.row0 * a.ld_x + k.h * P;
    const float* dY = a.dY + k.row0 * a.ld_y + k.h * P;
    // ⟨dS, S_p⟩ in fp32, this thread's share
    const float sds_part = next.store(a, ws.dS, d, h, sdt, sraw, sX, sdY, sS, sdS, fX, fdY);
    __syncthreads();
    segment_sums_warp(sdt, A, k.L, cs, e, w);
    const float sds = block_sum<kMmaThreads>(sds_part, red);  // (syncs)
    // The scores: G = (C Bᵀ)·M and dGM = (dY Xᵀ)·dt_j·M with M_ij = exp(cs_i − cs_j) (j ≤ i < L),
    // to bf16; R = dGM ⊙ CBᵀ (fp32, j < i) as row and column sums over the tile.
    for_tiles<kQT, kQT>([&](int mt, int nt) {
      float cb[2][4], yx[2][4];
      zero2(cb);
      zero2(yx);
      if (nt <= mt) {
        mma_steps(
            cb, 0, N / 16,
            [&](std::uint32_t(&f)[4], int ks) { bt::load_a<LN>(f, sC, 16 * mt, ks, lane); },
            [&](std::uint32_t(&f)[4], int ks) { bt::load_b_rows<LN>(f, sB, nt, ks, lane); });
        mma_steps(
            yx, 0, P / 16,
            [&](std::uint32_t(&f)[4], int ks) { bt::load_a<LP>(f, sdY, 16 * mt, ks, lane); },
            [&](std::uint32_t(&f)[4], int ks) { bt::load_b_rows<LP>(f, sX, nt, ks, lane); });
      }
      float rrow[2] = {0.f, 0.f}, rcol[2][2] = {{0.f, 0.f}, {0.f, 0.f}};
#pragma unroll
      for (int u = 0; u < 2; ++u)
#pragma unroll
        for (int r = 0; r < 2; ++r) {
          const int i = frag_row(mt, 2 * r);
          float g[2], dg[2];
#pragma unroll
          for (int c = 0; c < 2; ++c) {
            const int j = frag_col(nt, u, c);
            g[c] = dg[c] = 0.f;
            if (j <= i && i < k.L) {
              const float m = expf(cs[i] - cs[j]);
              const float cbv = cb[u][2 * r + c];
              dg[c] = yx[u][2 * r + c] * sdt[j] * m;
              g[c] = cbv * m;
              if (j < i) {
                const float rv = dg[c] * cbv;
                rrow[r] += rv;
                rcol[u][c] += rv;
              }
            }
          }
          const int col = frag_col(nt, u, 0);
          *reinterpret_cast<std::uint32_t*>(sG + i * kLQ + col) = pack_bf16(g[0], g[1]);
          *reinterpret_cast<std::uint32_t*>(sdGM + i * kLQ + col) = pack_bf16(dg[0], dg[1]);
        }
#pragma unroll
      for (int r = 0; r < 2; ++r) {
        const float v = quad_sum(rrow[r]);
        if (t == 0) rowR[frag_row(mt, 2 * r) * kQT + nt] = v;
      }
#pragma unroll
      for (int u = 0; u < 2; ++u)
#pragma unroll
        for (int c = 0; c < 2; ++c) {
          const float v = col_sum8(rcol[u][c]);
          if (lane < 4) colR[frag_col(nt, u, c) * kQT + mt] = v;
        }
    });
    __syncthreads();
    // Per (j, p): dXd = Gᵀ·dY + w_j·(B dSᵀ); dX = dt·dXd + D·dY; the row sums of ω, of the state's
    // read and of X ⊙ dXd.
    float dD_part = 0.f;
    for_tiles<kQT, PT>([&](int mt, int nt) {
      float gy[2][4], bds[2][4], csp[2][4];
      zero2(gy);
      zero2(bds);
      zero2(csp);
      mma_steps(
          gy, mt, kQT,
          [&](std::uint32_t(&f)[4], int ks) { bt::load_a_trans<kLQ>(f, sG, 16 * mt, ks, lane); },
          [&](std::uint32_t(&f)[4], int ks) { bt::load_b_cols<LP>(f, sdY, nt, ks, lane); });
      mma_steps(
          bds, 0, N / 16,
          [&](std::uint32_t(&f)[4], int ks) { bt::load_a<LN>(f, sB, 16 * mt, ks, lane); },
          [&](std::uint32_t(&f)[4], int ks) { bt::load_b_rows<LN>(f, sdS, nt, ks, lane); });
      mma_steps(
          csp, 0, N / 16,
          [&](std::uint32_t(&f)[4], int ks) { bt::load_a<LN>(f, sC, 16 * mt, ks, lane); },
          [&](std::uint32_t(&f)[4], int ks) { bt::load_b_rows<LN>(f, sS, nt, ks, lane); });
      float om[2] = {0.f, 0.f}, tm[2] = {0.f, 0.f}, xv[2] = {0.f, 0.f};
#pragma unroll
      for (int r = 0; r < 2; ++r) {
        const int j = frag_row(mt, 2 * r);
        if (j >= k.L) continue;
#pragma unroll
        for (int u = 0; u < 2; ++u) {
          const int p = frag_col(nt, u, 0);
          float* dx = a.dX + (k.row0 + j) * a.ld_dx + k.h * P + p;
          float xs[2], dys[2], dxs[2];
          if constexpr (kGradKeepsFp32<P, N>) {
            const float2 x2 = *reinterpret_cast<const float2*>(fX + j * P + fp32_col(j, p));
            const float2 y2 = *reinterpret_cast<const float2*>(fdY + j * P + fp32_col(j, p));
            xs[0] = x2.x;
            xs[1] = x2.y;
            dys[0] = y2.x;
            dys[1] = y2.y;
          } else if (VEC) {
            const float2 x2 = *reinterpret_cast<const float2*>(X + j * a.ld_x + p);
            const float2 y2 = *reinterpret_cast<const float2*>(dY + j * a.ld_y + p);
            xs[0] = x2.x;
            xs[1] = x2.y;
            dys[0] = y2.x;
            dys[1] = y2.y;
          } else {
#pragma unroll
            for (int c = 0; c < 2; ++c) {
              xs[c] = X[j * a.ld_x + p + c];
              dys[c] = dY[j * a.ld_y + p + c];
            }
          }
#pragma unroll
          for (int c = 0; c < 2; ++c) {
            const float x = xs[c], dy = dys[c];
            const float dxd = gy[u][2 * r + c] + w[j] * bds[u][2 * r + c];
            om[r] += x * bds[u][2 * r + c];
            tm[r] += dy * csp[u][2 * r + c];
            xv[r] += x * dxd;
            dD_part += dy * x;
            dxs[c] = sdt[j] * dxd + Dh * dy;
          }
          if (VEC) {
            *reinterpret_cast<float2*>(dx) = make_float2(dxs[0], dxs[1]);
          } else {
            dx[0] = dxs[0];
            dx[1] = dxs[1];
          }
        }
      }
#pragma unroll
      for (int r = 0; r < 2; ++r) {
        const float o = quad_sum(om[r]), s = quad_sum(tm[r]), x = quad_sum(xv[r]);
        if (t == 0) {
          const int j = frag_row(mt, 2 * r);
          omP[j * PT + nt] = o;
          tmP[j * PT + nt] = s;
          xdP[j * PT + nt] = x;
        }
      }
    });
    // dB_h and dC_h, added to the block's sums (rows past the chunk's end are never stored).
    for_owned_tiles<kQT, N / 16>([&](int s, int mt, int nt) {
      float x1[2][4], x2[2][4];
      zero2(x1);
      zero2(x2);
      mma_steps(
          x1, mt, kQT,
          [&](std::uint32_t(&f)[4], int ks) { bt::load_a_trans<kLQ>(f, sdGM, 16 * mt, ks, lane); },
          [&](std::uint32_t(&f)[4], int ks) { bt::load_b_cols<LN>(f, sC, nt, ks, lane); });
      mma_steps(
          x2, 0, P / 16,
          [&](std::uint32_t(&f)[4], int ks) { bt::load_a<LP>(f, sX, 16 * mt, ks, lane); },
          [&](std::uint32_t(&f)[4], int ks) { bt::load_b_cols<LN>(f, sdS, nt, ks, lane); });
#pragma unroll
      for (int r = 0; r < 2; ++r) {
        const float f = w[frag_row(mt, 2 * r)] * sdt[frag_row(mt, 2 * r)];
#pragma unroll
        for (int u = 0; u < 2; ++u) {
          dB_sum[s][u][2 * r] += x1[u][2 * r] + f * x2[u][2 * r];
          dB_sum[s][u][2 * r + 1] += x1[u][2 * r + 1] + f * x2[u][2 * r + 1];
        }
      }
    });
    for_owned_tiles<kQT, N / 16>([&](int s, int mt, int nt) {
      float x1[2][4], x2[2][4];
      zero2(x1);
      zero2(x2);
      mma_steps(
          x1, 0, mt + 1,
          [&](std::uint32_t(&f)[4], int ks) { bt::load_a<kLQ>(f, sdGM, 16 * mt, ks, lane); },
          [&](std::uint32_t(&f)[4], int ks) { bt::load_b_cols<LN>(f, sB, nt, ks, lane); });
      mma_steps(
          x2, 0, P / 16,
          [&](std::uint32_t(&f)[4], int ks) { bt::load_a<LP>(f, sdY, 16 * mt, ks, lane); },
          [&](std::uint32_t(&f)[4], int ks) { bt::load_b_cols<LN>(f, sS, nt, ks, lane); });
#pragma unroll
      for (int r = 0; r < 2; ++r) {
        const float f = e[frag_row(mt, 2 * r)];
#pragma unroll
        for (int u = 0; u < 2; ++u) {
          dC_sum[s][u][2 * r] += x1[u][2 * r] + f * x2[u][2 * r];
          dC_sum[s][u][2 * r + 1] += x1[u][2 * r + 1] + f * x2[u][2 * r + 1];
        }
      }
    });
    __syncthreads();
    if (h + 1 < h_end) next.load(a, ws.dS, d, h + 1);
    // The segment sums' gradient, row by row, from the partial sums in a fixed order.
    for (int i = threadIdx.x; i < k.L; i += blockDim.x) {
      float rr = 0.f, om = 0.f, tm = 0.f, x = 0.f;
      for (int c = 0; c < kQT; ++c) rr += rowR[i * kQT + c];
      for (int c = 0; c < kQT; ++c) rr -= colR[i * kQT + c];
      for (int c = 0; c < PT; ++c) {
        om += omP[i * PT + c];
        tm += tmP[i * PT + c];
        x += xdP[i * PT + c];
      }
      om *= w[i] * sdt[i];
      red[i] = om;  // ω_i, summed below
      dcs[i] = rr + e[i] * tm - om;
      xd[i] = x;
    }
    __syncthreads();
    // The suffix sums of dcs into dt and A, by warp 0: lane l takes rows 2l and 2l + 1, the sums
    // across the lanes by shuffles in a fixed order (one thread's loop over the rows, each step
    // waiting for a load of dt_raw, took a sizeable part of the kernel's time).
    if (threadIdx.x < 32) {
      const int l = threadIdx.x, i0 = 2 * l, i1 = i0 + 1, L = k.L;
      const float raw0 = sraw[i0], raw1 = sraw[i1];  // (0 past the chunk's end)
      const float om_sum = warp_sum((i0 < L ? red[i0] : 0.f) + (i1 < L ? red[i1] : 0.f));
      const float bias = a.dt_bias[k.h];
      const long long r0 = k.row0 + i0;
      float d0 = i0 < L ? dcs[i0] : 0.f, d1 = i1 < L ? dcs[i1] : 0.f;
      const float last = e[L - 1] * sds + om_sum;
      if (i0 == L - 1) d0 += last;
      if (i1 == L - 1) d1 += last;
      float sfx = d0 + d1;  // Σ over the lanes ≥ l
#pragma unroll
      for (int o = 1; o < 32; o <<= 1) {
        const float y = __shfl_down_sync(0xffffffffu, sfx, o);
        if (l + o < 32) sfx += y;
      }
      float after = __shfl_down_sync(0xffffffffu, sfx, 1);
      if (l == 31) after = 0.f;
      const float acc1 = after + d1, acc0 = acc1 + d0;  // Σ_{m ≥ i} dcs_m for rows i1, i0
      float dA = 0.f, dbias = 0.f;
      if (i0 < L) {
        const float g = (acc0 * A + xd[i0]) * softplus_grad_f(raw0 + bias);
        a.ddt_raw[r0 * a.ld_ddt + k.h] = g;
        dA += acc0 * sdt[i0];
        dbias += g;
      }
      if (i1 < L) {
        const float g = (acc1 * A + xd[i1]) * softplus_grad_f(raw1 + bias);
        a.ddt_raw[(r0 + 1) * a.ld_ddt + k.h] = g;
        dA += acc1 * sdt[i1];
        dbias += g;
      }
      dA = warp_sum(dA);
      dbias = warp_sum(dbias);
      if (l == 0) {
        const std::size_t pi = (std::size_t(k.n) * H + k.h) * k.nc + k.c;
        const std::size_t np = std::size_t(d.batch) * H * k.nc;
        ws.part[pi] = dA;
        ws.part[2 * np + pi] = dbias;
      }
    }
    __syncthreads();                                        // red is reused
    const float dD = block_sum<kMmaThreads>(dD_part, red);  // (its last sync ends the head's reads)
    if (threadIdx.x == 0) {
      const std::size_t pi = (std::size_t(k.n) * H + k.h) * k.nc + k.c;
      ws.part[std::size_t(d.batch) * H * k.nc + pi] = dD;
    }
  }
  // The sums to dB and dC (one group) or to the group's slice of the workspace (several).
  const bool direct = gridDim.y == 1;
  const long long ld = direct ? a.ld_dbc : N;
  const std::size_t slice = std::size_t(blockIdx.y) * d.batch * d.seq_len * N;
  float* outB = direct ? a.dB + k0.row0 * ld : ws.dBh + slice + k0.row0 * ld;
  float* outC = direct ? a.dC + k0.row0 * ld : ws.dCh + slice + k0.row0 * ld;
  for_owned_tiles<kQT, N / 16>([&](int s, int mt, int nt) {
#pragma unroll
    for (int r = 0; r < 2; ++r) {
      const int i = frag_row(mt, 2 * r);
      if (i >= k0.L) continue;
#pragma unroll
      for (int u = 0; u < 2; ++u) {
        const int q = frag_col(nt, u, 0);
        outB[i * ld + q] = dB_sum[s][u][2 * r];
        outB[i * ld + q + 1] = dB_sum[s][u][2 * r + 1];
        outC[i * ld + q] = dC_sum[s][u][2 * r];
        outC[i * ld + q + 1] = dC_sum[s][u][2 * r + 1];
      }
    }
  });
}

// ---- element-wise ---------------------------------------------------------------------------------

__global__ void gate_forward_kernel(const float* y, const float* z, int ld_z, long long R, int C,
                                    float* g) {
  const long long total = R * C;
  for (long long i = blockIdx.x * (long long)blockDim.x + threadIdx.x; i < total;
       i += (long long)gridDim.x * blockDim.x) {
    const long long r = i / C;
    const int c = int(i - r * C);
    g[i] = y[i] * silu_f(z[r * ld_z + c]);
  }
}

__global__ void gate_backward_kernel(const float* y, const float* z, int ld_z, const float* dg,
                                     long long R, int C, float* dy, float* dz, int ld_dz) {
  const long long total = R * C;
  for (long long i = blockIdx.x * (long long)blockDim.x + threadIdx.x; i < total;
       i += (long long)gridDim.x * blockDim.x) {
    const long long r = i / C;
    const int c = int(i - r * C);
    const float zz = z[r * ld_z + c], g = dg[i];
    dy[i] = g * silu_f(zz);
    dz[r * ld_dz + c] = g * y[i] * silu_grad_f(zz);
  }
}

__global__ void silu_forward_kernel(const float* in, float* out, std::size_t n) {
  for (std::size_t i = blockIdx.x * std::size_t(blockDim.x) + threadIdx.x; i < n;
       i += std::size_t(gridDim.x) * blockDim.x)
    out[i] = silu_f(in[i]);
}

__global__ void silu_backward_kernel(const float* in, const float* dout, float* din,
                                     std::size_t n) {
  for (std::size_t i = blockIdx.x * std::size_t(blockDim.x) + threadIdx.x; i < n;
       i += std::size_t(gridDim.x) * blockDim.x)
    din[i] = dout[i] * silu_grad_f(in[i]);
}

// ---- the gate and the RMSNorm, fused ---------------------------------------------------------------
// normed = RMSNorm(y ⊙ silu(z))·w over rows of C = 4·C4 columns (C = d_inner = 1536 at the 125m
// preset: wider than the 1024 columns of the RMSNorm op's float4 row kernels, whose plain fallback
// took one 4-byte load per lane and column). One block per kNormChunkRows-row chunk, one float4
// column per thread (C4 rounded up to whole warps), kGateNormRows rows at a time so that their loads
// are in flight together; each row's sums are warp sums added in warp order through shared memory
// (two buffers, one barrier per step). The gated value is never stored: the backward recomputes it
// from y and z (the same operations, so the same bits).
constexpr int kGateNormRows = 2;
// At most 512 threads (C ≤ 2048), so that the backward's rows stay in registers (128 a thread).
constexpr int kGateNormMaxThreads = 512;

// v[i][k] ← the block's sum of v[i][k] (row i, sum k), the warps' sums added in warp order.
template <int NS>
__device__ __forceinline__ void gate_norm_row_sums(float (&v)[kGateNormRows][NS], float (*s)[32]) {
  const int warp = threadIdx.x / 32, lane = threadIdx.x % 32, nw = blockDim.x / 32;
#pragma unroll
  for (int i = 0; i < kGateNormRows; ++i)
#pragma unroll
    for (int k = 0; k < NS; ++k) {
      const float t = warp_sum(v[i][k]);
      if (lane == 0) s[i * NS + k][warp] = t;
    }
  __syncthreads();
#pragma unroll
  for (int i = 0; i < kGateNormRows; ++i)
#pragma unroll
    for (int k = 0; k < NS; ++k) {
      float t = 0.f;
      for (int q = 0; q < nw; ++q) t += s[i * NS + k][q];
      v[i][k] = t;
    }
}

__global__ void __launch_bounds__(kGateNormMaxThreads)
    gate_norm_forward_kernel(const float4* __restrict__ y, const float4* __restrict__ z, int ld_z4,
                             const float4* __restrict__ w, int R, int C4, float eps,
                             float4* __restrict__ out, std::uint16_t* __restrict__ out16) {
  __shared__ float s_sum[2][kGateNormRows][32];
  const int c4 = threadIdx.x;
  const bool active = c4 < C4;
  const float4 wv = active ? w[c4] : f4_zero();
  const float C = float(4 * C4);
  const int r_end = min(R, (blockIdx.x + 1) * kNormChunkRows);
  int buf = 0;
  for (int r0 = blockIdx.x * kNormChunkRows; r0 < r_end; r0 += kGateNormRows) {
    float4 g[kGateNormRows];
    float ss[kGateNormRows][1];
#pragma unroll
    for (int i = 0; i < kGateNormRows; ++i) {
      const int r = r0 + i;
      g[i] = f4_zero();
      if (active && r < r_end) {
        const float4 yv = y[std::size_t(r) * C4 + c4], zv = z[std::size_t(r) * ld_z4 + c4];
        g[i] = make_float4(yv.x * silu_f(zv.x), yv.y * silu_f(zv.y), yv.z * silu_f(zv.z),
                           yv.w * silu_f(zv.w));
      }
      ss[i][0] = add_squares(0.f, g[i]);
    }
    gate_norm_row_sums<1>(ss, s_sum[buf]);
    buf ^= 1;
#pragma unroll
    for (int i = 0; i < kGateNormRows; ++i) {
      const int r = r0 + i;
      if (!active || r >= r_end) continue;
      const float rr = 1.f / sqrtf(ss[i][0] / C + eps);
      const float4 o = make_float4(g[i].x * rr * wv.x, g[i].y * rr * wv.y, g[i].z * rr * wv.z,
                                   g[i].w * rr * wv.w);
      if (out16)
        store_bf16x4(out16 + 4 * (std::size_t(r) * C4 + c4), o.x, o.y, o.z, o.w);
      else
        out[std::size_t(r) * C4 + c4] = o;
    }
  }
}

// The backward's rows stream through shared memory kGateNormStages − 1 steps ahead (cp.async):
// each thread copies its own float4 column of y, z and dn for a later step and reads back only what
// it copied, so no barrier guards the stages. Up to 384 threads (C ≤ 1536, the 125m preset's
// d_inner) it is held to 80 registers, two blocks per SM. Before, with only its step's two rows in
// flight and 84 registers (one block of 384 threads per SM), it took 193 µs at R = 16384, C = 1536,
// near twice its memory floor.
constexpr int kGateNormStages = 3, kGateNormTwoBlockThreads = 384;
std::size_t gate_norm_backward_smem(int threads) {
  return sizeof(float4) * kGateNormStages * kGateNormRows * 3 * std::size_t(threads);
}

// The backward of normed = RMSNorm(g)·w, g = y ⊙ silu(z), from dn = dnormed, per row:
//   x̂ = g·r, dg = r·(dn ⊙ w) − c·x̂ with c = r·(Σ dn ⊙ w ⊙ g)·r / C  (the RMSNorm op's backward),
//   dy = dg ⊙ silu(z), dz = dg ⊙ y ⊙ silu′(z)                         (mamba2_gate_backward's),
// and partial[chunk, c] = Σ over the chunk's rows of dn ⊙ x̂ (w's gradient, summed over the chunks
// after). dz goes to its columns of in_proj's output gradient (row stride ld_dz4), or only its bf16
// rounding to dz16, which the products then read.
template <int MAX_THREADS, int MIN_BLOCKS>
__global__ void __launch_bounds__(MAX_THREADS, MIN_BLOCKS)
    gate_norm_backward_kernel(const float4* __restrict__ y, const float4* __restrict__ z, int ld_z4,
                              const float4* __restrict__ w, const float4* __restrict__ dn, int R,
                              int C4, float eps, float4* __restrict__ dy, float4* __restrict__ dz,
                              std::uint16_t* __restrict__ dz16, int ld_dz4,
                              float4* __restrict__ partial) {
  extern __shared__ __align__(16) float smf[];
  __shared__ float s_sum[2][2 * kGateNormRows][32];
  // stage[((slot·kGateNormRows + i)·3 + k)·threads + c4]: row i of the slot's step, k = y, z, dn
  float4* stage = reinterpret_cast<float4*>(smf);
  const int c4 = threadIdx.x, threads = blockDim.x;
  const bool active = c4 < C4;
  const float4 wv = active ? w[c4] : f4_zero();
  const float C = float(4 * C4);
  float4 acc = f4_zero();
  const int r_begin = blockIdx.x * kNormChunkRows, r_end = min(R, r_begin + kNormChunkRows);
  const int steps = (r_end - r_begin + kGateNormRows - 1) / kGateNormRows;
  auto at = [&](int slot, int i, int k) -> float4* {
    return stage + ((slot * kGateNormRows + i) * 3 + k) * threads + c4;
  };
  auto issue = [&](int step) {  // one commit group per step, empty past the last
    if (step < steps) {
      const int slot = step % kGateNormStages;
#pragma unroll
      for (int i = 0; i < kGateNormRows; ++i) {
        const int r = r_begin + step * kGateNormRows + i;
        if (!active || r >= r_end) continue;
        detail::cp_async16(at(slot, i, 0), y + std::size_t(r) * C4 + c4, 16);
        detail::cp_async16(at(slot, i, 1), z + std::size_t(r) * ld_z4 + c4, 16);
        detail::cp_async16(at(slot, i, 2), dn + std::size_t(r) * C4 + c4, 16);
      }
    }
    detail::cp_async_commit();
  };
#pragma unroll
  for (int step = 0; step < kGateNormStages - 1; ++step) issue(step);
  int buf = 0;
  for (int step = 0; step < steps; ++step) {
    // The slot refilled here was read into registers (and used) in the last step.
    issue(step + kGateNormStages - 1);
    detail::cp_async_wait<kGateNormStages - 1>();  // this step's group has landed
    const int r0 = r_begin + step * kGateNormRows, slot = step % kGateNormStages;
    float4 yv[kGateNormRows], zv[kGateNormRows], gv[kGateNormRows], dv[kGateNormRows];
#pragma unroll
    for (int i = 0; i < kGateNormRows; ++i) {
      const bool ok = active && r0 + i < r_end;
      yv[i] = ok ? *at(slot, i, 0) : f4_zero();
      zv[i] = ok ? *at(slot, i, 1) : f4_zero();
      dv[i] = ok ? *at(slot, i, 2) : f4_zero();
    }
    float sums[kGateNormRows][2];  // Σ g², Σ dn ⊙ w ⊙ g
#pragma unroll
    for (int i = 0; i < kGateNormRows; ++i) {
      gv[i] = make_float4(yv[i].x * silu_f(zv[i].x), yv[i].y * silu_f(zv[i].y),
                          yv[i].z * silu_f(zv[i].z), yv[i].w * silu_f(zv[i].w));
      sums[i][0] = add_squares(0.f, gv[i]);
      sums[i][1] = dv[i].x * wv.x * gv[i].x + dv[i].y * wv.y * gv[i].y + dv[i].z * wv.z * gv[i].z +
                   dv[i].w * wv.w * gv[i].w;
    }
    gate_norm_row_sums<2>(sums, s_sum[buf]);
    buf ^= 1;
#pragma unroll
    for (int i = 0; i < kGateNormRows; ++i) {
      const int r = r0 + i;
      if (!active || r >= r_end) continue;
      const float rr = 1.f / sqrtf(sums[i][0] / C + eps);
      const float coef = rr * (sums[i][1] * rr) / C;
      const float4 xn = make_float4(gv[i].x * rr, gv[i].y * rr, gv[i].z * rr, gv[i].w * rr);
      const float4 dg =
          make_float4(rr * (dv[i].x * wv.x) - coef * xn.x, rr * (dv[i].y * wv.y) - coef * xn.y,
                      rr * (dv[i].z * wv.z) - coef * xn.z, rr * (dv[i].w * wv.w) - coef * xn.w);
      f4_fma(acc, dv[i], xn);
      dy[std::size_t(r) * C4 + c4] = make_float4(dg.x * silu_f(zv[i].x), dg.y * silu_f(zv[i].y),
                                                 dg.z * silu_f(zv[i].z), dg.w * silu_f(zv[i].w));
      const float4 d =
          make_float4(dg.x * yv[i].x * silu_grad_f(zv[i].x), dg.y * yv[i].y * silu_grad_f(zv[i].y),
                      dg.z * yv[i].z * silu_grad_f(zv[i].z), dg.w * yv[i].w * silu_grad_f(zv[i].w));
      if (dz16)
        store_bf16x4(dz16 + 4 * (std::size_t(r) * ld_dz4 + c4), d.x, d.y, d.z, d.w);
      else
        dz[std::size_t(r) * ld_dz4 + c4] = d;
    }
  }
  if (active) partial[std::size_t(blockIdx.x) * C4 + c4] = acc;
}

// ---- host ------------------------------------------------------------------------------------------

std::size_t state_smem(const Mamba2ScanDims& d) {
  return sizeof(float) * (std::size_t(d.chunk) * (d.head_dim + 1) +
                          std::size_t(d.chunk) * (d.d_state + 1) + 4 * d.chunk);
}
std::size_t output_smem(const Mamba2ScanDims& d) {
  const std::size_t Q = d.chunk, P = d.head_dim, N = d.d_state;
  return sizeof(float) * (2 * Q * (N + 1) + Q * (P + 1) + P * (N + 1) + Q * (Q + 1) + 4 * Q);
}
std::size_t grad_smem(const Mamba2ScanDims& d) {
  const std::size_t Q = d.chunk, P = d.head_dim, N = d.d_state;
  return sizeof(float) * (5 * Q * (P + 1) + 2 * Q * (N + 1) + 2 * P * (N + 1) + 3 * Q * (Q + 1) +
                          7 * Q + kScanThreads);
}

void validate(const Mamba2ScanDims& d, const char* fn) {
  const std::string why = mamba2_scan_unsupported(d);
  require(why.empty(), fn, why);
}

template <class... KArgs, class... Args>
void launch_chunks(void (*kernel)(KArgs...), const Mamba2ScanDims& d, std::size_t smem,
                   cudaStream_t st, const Args&... args) {
  TTTLAB_CUDA_CHECK(
      cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, int(smem)));
  const dim3 grid(d.chunks(), d.heads, d.batch);
  kernel<<<grid, kScanThreads, smem, st>>>(args...);
  check_launch();
}

template <int V>
using Int = std::integral_constant<int, V>;

// f(Int<P>, Int<N>) for the tensor-core path's head dim and state size (32, 64 or 128 each).
template <class F>
void with_mma_dims(int P, int N, F f) {
  auto with_n = [&](auto p) {
    switch (N) {
      case 32: f(p, Int<32>{}); break;
      case 64: f(p, Int<64>{}); break;
      default: f(p, Int<128>{}); break;
    }
  };
  switch (P) {
    case 32: with_n(Int<32>{}); break;
    case 64: with_n(Int<64>{}); break;
    default: with_n(Int<128>{}); break;
  }
}

// The tensor-core kernels' heads per block that loop over heads (chunk_output_mma_kernel,
// chunk_grad_mma_kernel), chosen (> 0, capped at H) or else from the shape: as many heads as leave
// the grid at least `target` blocks (the forward's 512: four 47 KB blocks per SM; the backward's
// 256: two 80 KB blocks per SM), every head where the (chunk, sequence) pairs alone make that many
// (B8 T2048: 256 pairs, so 12 heads a block forward and all 24 backward). The shape alone decides,
// not the device, so the backward's sums over heads run in the same order (the same bits) on every
// GPU.
constexpr long long kOutputBlocks = 512, kGradBlocks = 256;
int scan_heads_per_block(const Mamba2ScanDims& d, int chosen, long long target) {
  if (chosen > 0) return std::min(chosen, d.heads);
  const long long pairs = (long long)d.chunks() * d.batch;
  const long long groups = std::min<long long>(d.heads, (target + pairs - 1) / pairs);
  return int((d.heads + groups - 1) / groups);
}
int scan_head_groups(const Mamba2ScanDims& d, int chosen, long long target) {
  const int g = scan_heads_per_block(d, chosen, target);
  return (d.heads + g - 1) / g;
}

template <class... KArgs, class... Args>
void launch_mma_chunks(void (*kernel)(KArgs...), const Mamba2ScanDims& d, std::size_t smem,
                       cudaStream_t st, const Args&... args) {
  TTTLAB_CUDA_CHECK(
      cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, int(smem)));
  const dim3 grid(d.chunks(), d.heads, d.batch);
  kernel<<<grid, kMmaThreads, smem, st>>>(args...);
  check_launch();
}

}  // namespace

std::string mamba2_scan_tensor_cores_unsupported(const Mamba2ScanDims& d) {
  if (d.batch < 1 || d.seq_len < 1 || d.heads < 1)
    return "the Mamba-2 scan needs batch, seq_len and heads >= 1";
  auto dim_ok = [](int x) { return x == 32 || x == 64 || x == 128; };
  if (!dim_ok(d.head_dim) || !dim_ok(d.d_state))
    return "the Mamba-2 scan on tensor cores needs a head dim and a state size of 32, 64 or 128, "
           "got " +
           std::to_string(d.head_dim) + " and " + std::to_string(d.d_state);
  if (d.chunk != kQ)
    return "the Mamba-2 scan on tensor cores needs chunks of 64, got " + std::to_string(d.chunk);
  return {};
}

std::string mamba2_scan_unsupported(const Mamba2ScanDims& d) {
  if (d.batch < 1 || d.seq_len < 1 || d.heads < 1)
    return "the Mamba-2 scan needs batch, seq_len and heads >= 1";
  if (d.head_dim < 1 || d.head_dim > kMaxDim || d.d_state < 1 || d.d_state > kMaxDim)
    return "the GPU's Mamba-2 scan needs a head dim and a state size in 1..128, got " +
           std::to_string(d.head_dim) + " and " + std::to_string(d.d_state);
  if (d.chunk < 1 || d.chunk > kMaxChunk)
    return "the GPU's Mamba-2 scan needs a chunk size in 1..64, got " + std::to_string(d.chunk);
  if (std::max({grad_smem(d), output_smem(d), state_smem(d)}) > kMaxSharedBytes)
    return "the GPU's Mamba-2 scan keeps a chunk's tiles in shared memory, and chunk " +
           std::to_string(d.chunk) + " with head dim " + std::to_string(d.head_dim) +
           " and state " + std::to_string(d.d_state) + " needs " + std::to_string(grad_smem(d)) +
           " bytes, over 227 KiB; use a smaller chunk size";
  return {};
}

std::size_t mamba2_state_floats(const Mamba2ScanDims& d) {
  return std::size_t(d.batch) * d.heads * d.chunks() * d.head_dim * d.d_state;
}
std::size_t mamba2_decay_floats(const Mamba2ScanDims& d) {
  return std::size_t(d.batch) * d.heads * d.chunks();
}

void mamba2_scan_forward(const Mamba2ScanForwardArgs& a) {
  const char* fn = "mamba2_scan_forward";
  const Mamba2ScanDims& d = a.dims;
  if (a.tensor_cores) {
    const std::string why = mamba2_scan_tensor_cores_unsupported(d);
    require(why.empty(), fn, why);
  } else {
    validate(d, fn);
  }
  require(a.X && a.B && a.C && a.dt_raw && a.dt_bias && a.A_log && a.D && a.dt && a.Y && a.states &&
              a.decay,
          fn, "a pointer is null");
  require(a.heads_per_block >= 0, fn, "heads_per_block must be >= 0");
  require(a.ld_x >= d.heads * d.head_dim && a.ld_bc >= d.d_state && a.ld_dt >= d.heads &&
              a.ld_y >= d.heads * d.head_dim,
          fn, "a row stride is smaller than its rows");
  const int PN = d.head_dim * d.d_state;
  if (a.tensor_cores) {
    with_mma_dims(d.head_dim, d.d_state, [&](auto p, auto n) {
      constexpr int P = decltype(p)::value, N = decltype(n)::value;
      launch_mma_chunks(chunk_state_mma_kernel<P, N>, d, mma_state_smem<P, N>(), a.stream, a);
      state_pass_batched_kernel<<<dim3((PN / 4 + 255) / 256, d.batch * d.heads), 256, 0,
                                  a.stream>>>(a.states, a.decay, d.chunks(), PN);
      check_launch();
      const auto output = chunk_output_mma_kernel<P, N>;
      const std::size_t smem = mma_output_smem<P, N>();
      TTTLAB_CUDA_CHECK(
          cudaFuncSetAttribute(output, cudaFuncAttributeMaxDynamicSharedMemorySize, int(smem)));
      const int group = scan_heads_per_block(d, a.heads_per_block, kOutputBlocks);
      const dim3 grid(d.chunks(), scan_head_groups(d, group, kOutputBlocks), d.batch);
      output<<<grid, kMmaThreads, smem, a.stream>>>(a, group);
      check_launch();
    });
    return;
  }
  launch_chunks(chunk_state_kernel, d, state_smem(d), a.stream, a);
  state_pass_kernel<<<dim3((PN + 255) / 256, d.batch * d.heads), 256, 0, a.stream>>>(
      a.states, a.decay, d.chunks(), PN);
  check_launch();
  launch_chunks(chunk_output_kernel, d, output_smem(d), a.stream, a);
}

std::size_t mamba2_scan_backward_workspace_bytes(const Mamba2ScanDims& d) {
  const std::size_t R = std::size_t(d.batch) * d.seq_len;
  return sizeof(float) *
         (align4(mamba2_state_floats(d)) + 2 * align4(std::size_t(d.heads) * R * d.d_state) +
          3 * mamba2_decay_floats(d));
}

void mamba2_scan_backward(const Mamba2ScanBackwardArgs& a) {
  const char* fn = "mamba2_scan_backward";
  const Mamba2ScanDims& d = a.dims;
  if (a.tensor_cores) {
    const std::string why = mamba2_scan_tensor_cores_unsupported(d);
    require(why.empty(), fn, why);
  } else {
    validate(d, fn);
  }
  require(a.X && a.B && a.C && a.dt_raw && a.dt_bias && a.A_log && a.D && a.dt && a.states &&
              a.decay && a.dY && a.dX && a.dB && a.dC && a.ddt_raw && a.ddt_bias && a.dA_log &&
              a.dD && a.workspace,
          fn, "a pointer is null");
  require(a.ld_x >= d.heads * d.head_dim && a.ld_bc >= d.d_state && a.ld_dt >= d.heads &&
              a.ld_y >= d.heads * d.head_dim && a.ld_dx >= d.heads * d.head_dim &&
              a.ld_dbc >= d.d_state && a.ld_ddt >= d.heads,
          fn, "a row stride is smaller than its rows");
  require(a.heads_per_block >= 0, fn, "heads_per_block must be >= 0");
  require(a.workspace_bytes >= mamba2_scan_backward_workspace_bytes(d), fn,
          "the workspace is smaller than mamba2_scan_backward_workspace_bytes");
  require(aligned16({a.workspace}), fn, "the workspace must be 16-byte aligned");
  const Workspace ws = carve(d, a.workspace);
  const int PN = d.head_dim * d.d_state;
  if (a.tensor_cores) {
    with_mma_dims(d.head_dim, d.d_state, [&](auto p, auto n) {
      constexpr int P = decltype(p)::value, N = decltype(n)::value;
      launch_mma_chunks(dstate_local_mma_kernel<P, N>, d, mma_state_smem<P, N>(), a.stream, a,
                        ws.dS);
      dstate_pass_batched_kernel<<<dim3((PN / 4 + 255) / 256, d.batch * d.heads), 256, 0,
                                   a.stream>>>(ws.dS, a.decay, d.chunks(), PN);
      check_launch();
      // 8-byte accesses to X, dY and dX where their rows allow them (every layer's shape).
      const bool pairs = a.ld_x % 2 == 0 && a.ld_y % 2 == 0 && a.ld_dx % 2 == 0 && aligned8(a.X) &&
                         aligned8(a.dY) && aligned8(a.dX);
      const auto kernel = pairs ? chunk_grad_mma_kernel<P, N, true> : chunk_grad_mma_kernel<P, N>;
      const std::size_t smem = mma_grad_smem<P, N>();
      TTTLAB_CUDA_CHECK(
          cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, int(smem)));
      const int group = scan_heads_per_block(d, a.heads_per_block, kGradBlocks);
      const dim3 grid(d.chunks(), scan_head_groups(d, group, kGradBlocks), d.batch);
      kernel<<<grid, kMmaThreads, smem, a.stream>>>(a, ws, group);
      check_launch();
    });
  } else {
    const std::size_t smem1 =
        sizeof(float) * (std::size_t(d.chunk) * (d.head_dim + 1) +
                         std::size_t(d.chunk) * (d.d_state + 1) + 4 * d.chunk);
    launch_chunks(dstate_local_kernel, d, smem1, a.stream, a, ws.dS);
    dstate_pass_kernel<<<dim3((PN + 255) / 256, d.batch * d.heads), 256, 0, a.stream>>>(
        ws.dS, a.decay, d.chunks(), PN);
    check_launch();
    launch_chunks(chunk_grad_kernel, d, grad_smem(d), a.stream, a, ws);
  }
  // The per-head (fp32 path) or per-group (tensor cores) dB, dC summed; one group wrote them
  // itself.
  const int slices = a.tensor_cores ? scan_head_groups(d, a.heads_per_block, kGradBlocks) : d.heads;
  const long long R = (long long)d.batch * d.seq_len;
  if (!a.tensor_cores || slices > 1) {
    sum_heads_kernel<<<blocks_for(std::size_t(R) * d.d_state, kThreads), kThreads, 0, a.stream>>>(
        ws.dBh, ws.dCh, slices, R, d.d_state, a.dB, a.dC, a.ld_dbc);
    check_launch();
  }
  if (a.tensor_cores)
    head_params_warp_kernel<<<d.heads, 32, 0, a.stream>>>(ws.part, d.batch, d.heads, d.chunks(),
                                                          a.A_log, a.dA_log, a.dD, a.ddt_bias);
  else
    head_params_kernel<<<(d.heads + 63) / 64, 64, 0, a.stream>>>(
        ws.part, d.batch, d.heads, d.chunks(), a.A_log, a.dA_log, a.dD, a.ddt_bias);
  check_launch();
}

void mamba2_gate_forward(const float* y, const float* z, int ld_z, int R, int C, float* g,
                         CUstream_st* stream) {
  const char* fn = "mamba2_gate_forward";
  require(R >= 0 && C >= 1 && ld_z >= C, fn, "need R >= 0, C >= 1 and ld_z >= C");
  if (R == 0) return;
  require(y && z && g, fn, "a pointer is null");
  gate_forward_kernel<<<blocks_for(std::size_t(R) * C, kThreads), kThreads, 0, stream>>>(y, z, ld_z,
                                                                                         R, C, g);
  check_launch();
}

void mamba2_gate_backward(const float* y, const float* z, int ld_z, const float* dg, int R, int C,
                          float* dy, float* dz, int ld_dz, CUstream_st* stream) {
  const char* fn = "mamba2_gate_backward";
  require(R >= 0 && C >= 1 && ld_z >= C && ld_dz >= C, fn,
          "need R >= 0, C >= 1 and row strides >= C");
  if (R == 0) return;
  require(y && z && dg && dy && dz, fn, "a pointer is null");
  gate_backward_kernel<<<blocks_for(std::size_t(R) * C, kThreads), kThreads, 0, stream>>>(
      y, z, ld_z, dg, R, C, dy, dz, ld_dz);
  check_launch();
}

void mamba2_silu_forward(const float* in, float* out, std::size_t n, CUstream_st* stream) {
  if (n == 0) return;
  require(in && out, "mamba2_silu_forward", "a pointer is null");
  silu_forward_kernel<<<blocks_for(n, kThreads), kThreads, 0, stream>>>(in, out, n);
  check_launch();
}

void mamba2_silu_backward(const float* in, const float* dout, float* din, std::size_t n,
                          CUstream_st* stream) {
  if (n == 0) return;
  require(in && dout && din, "mamba2_silu_backward", "a pointer is null");
  silu_backward_kernel<<<blocks_for(n, kThreads), kThreads, 0, stream>>>(in, dout, din, n);
  check_launch();
}

namespace {
void check_gate_norm(const char* fn, int R, int C, int ld_z, float eps) {
  require(R >= 0 && mamba2_gate_norm_supported(C, C), fn,
          "needs R >= 0 and C a multiple of 4 in 4.." + std::to_string(4 * kGateNormMaxThreads) +
              " (got C " + std::to_string(C) + ")");
  require(ld_z >= C && ld_z % 4 == 0, fn, "ld_z must be a multiple of 4 and >= C");
  require(eps > 0.f, fn, "eps must be > 0");
}
int gate_norm_threads(int C) { return (C / 4 + 31) / 32 * 32; }
}  // namespace

bool mamba2_gate_norm_supported(int C, int ld_z) {
  return C >= 4 && C % 4 == 0 && C <= 4 * kGateNormMaxThreads && ld_z >= C && ld_z % 4 == 0;
}

void mamba2_gate_norm_forward(const float* y, const float* z, int ld_z, const float* w, int R,
                              int C, float eps, float* out, std::uint16_t* out16,
                              CUstream_st* stream) {
  const char* fn = "mamba2_gate_norm_forward";
  check_gate_norm(fn, R, C, ld_z, eps);
  require((out == nullptr) != (out16 == nullptr), fn, "exactly one of out and out16 must be given");
  if (R == 0) return;
  require(y && z && w, fn, "a pointer is null");
  require(aligned16({y, z, w, out}) && aligned8(out16), fn,
          "y, z, w, out must be 16-byte aligned and out16 8-byte aligned");
  gate_norm_forward_kernel<<<norm_chunks(R), gate_norm_threads(C), 0, stream>>>(
      reinterpret_cast<const float4*>(y), reinterpret_cast<const float4*>(z), ld_z / 4,
      reinterpret_cast<const float4*>(w), R, C / 4, eps, reinterpret_cast<float4*>(out), out16);
  check_launch();
}

std::size_t mamba2_gate_norm_backward_workspace(int R, int C) {
  return std::size_t(norm_chunks(std::max(R, 1))) * std::max(C, 0);
}

void mamba2_gate_norm_backward(const float* y, const float* z, int ld_z, const float* w,
                               const float* dnormed, int R, int C, float eps, float* dy, float* dz,
                               std::uint16_t* dz16, int ld_dz, float* dw, float* workspace,
                               CUstream_st* stream) {
  const char* fn = "mamba2_gate_norm_backward";
  check_gate_norm(fn, R, C, ld_z, eps);
  require(ld_dz >= C && ld_dz % 4 == 0, fn, "ld_dz must be a multiple of 4 and >= C");
  require((dz == nullptr) != (dz16 == nullptr), fn, "exactly one of dz and dz16 must be given");
  if (R == 0) return;
  require(y && z && w && dnormed && dy && dw && workspace, fn, "a pointer is null");
  require(aligned16({y, z, w, dnormed, dy, dz, workspace}) && aligned8(dz16), fn,
          "the fp32 arrays must be 16-byte aligned and dz16 8-byte aligned");
  const int n = norm_chunks(R), threads = gate_norm_threads(C);
  const std::size_t smem = gate_norm_backward_smem(threads);
  const auto kernel = threads <= kGateNormTwoBlockThreads
                          ? gate_norm_backward_kernel<kGateNormTwoBlockThreads, 2>
                          : gate_norm_backward_kernel<kGateNormMaxThreads, 1>;
  TTTLAB_CUDA_CHECK(
      cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, int(smem)));
  kernel<<<n, threads, smem, stream>>>(
      reinterpret_cast<const float4*>(y), reinterpret_cast<const float4*>(z), ld_z / 4,
      reinterpret_cast<const float4*>(w), reinterpret_cast<const float4*>(dnormed), R, C / 4, eps,
      reinterpret_cast<float4*>(dy), reinterpret_cast<float4*>(dz), dz16, ld_dz / 4,
      reinterpret_cast<float4*>(workspace));
  check_launch();
  sum_partials_add(workspace, n, C, dw, stream);
  check_launch();
}

}  // namespace tttlab::kernels
