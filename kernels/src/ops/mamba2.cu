// Mamba-2's chunked scan, forward and backward, and the layer's element-wise passes (see
// tttlab/kernels/mamba2.hpp; the maths is docs/MATH.md §8.8, the CPU functions they mirror are
// mamba2_scan_chunked / _backward in core/src/seq/mamba2_layer.cpp).
//
// Every chunk kernel runs one block per (sequence, head, chunk) and holds the chunk's tiles in shared
// memory, rows padded by one float so that the column walks of the dot products hit distinct banks.
// Inside a chunk the segment sums cs, e = exp(cs), w = exp(cs_last − cs) are made by one thread (at
// most 64 terms), in the CPU's order.
#include "ops/ops_common.cuh"
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
__device__ __forceinline__ Chunk chunk_of(const Mamba2ScanDims& d) {
  Chunk k;
  k.c = blockIdx.x;
  k.h = blockIdx.y;
  k.n = blockIdx.z;
  k.nc = (d.seq_len + d.chunk - 1) / d.chunk;
  const int c0 = k.c * d.chunk;
  k.L = min(d.chunk, d.seq_len - c0);
  k.row0 = (long long)k.n * d.seq_len + c0;
  return k;
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

// Sum of v over the block's threads in a fixed order (red: kScanThreads floats); every thread gets it.
__device__ float block_sum(float v, float* red) {
  red[threadIdx.x] = v;
  __syncthreads();
  for (int s = kScanThreads / 2; s > 0; s >>= 1) {
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
  float* dBh;   // [H, R, N]: per-head dB
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

// dB[r, q] = Σ_h dB_h[r, q] (and dC), heads in order.
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

}  // namespace

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
  validate(d, fn);
  require(a.X && a.B && a.C && a.dt_raw && a.dt_bias && a.A_log && a.D && a.dt && a.Y && a.states &&
              a.decay,
          fn, "a pointer is null");
  require(a.ld_x >= d.heads * d.head_dim && a.ld_bc >= d.d_state && a.ld_dt >= d.heads &&
              a.ld_y >= d.heads * d.head_dim,
          fn, "a row stride is smaller than its rows");
  launch_chunks(chunk_state_kernel, d, state_smem(d), a.stream, a);
  const int PN = d.head_dim * d.d_state;
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
  validate(d, fn);
  require(a.X && a.B && a.C && a.dt_raw && a.dt_bias && a.A_log && a.D && a.dt && a.states &&
              a.decay && a.dY && a.dX && a.dB && a.dC && a.ddt_raw && a.ddt_bias && a.dA_log &&
              a.dD && a.workspace,
          fn, "a pointer is null");
  require(a.ld_x >= d.heads * d.head_dim && a.ld_bc >= d.d_state && a.ld_dt >= d.heads &&
              a.ld_y >= d.heads * d.head_dim && a.ld_dx >= d.heads * d.head_dim &&
              a.ld_dbc >= d.d_state && a.ld_ddt >= d.heads,
          fn, "a row stride is smaller than its rows");
  require(a.workspace_bytes >= mamba2_scan_backward_workspace_bytes(d), fn,
          "the workspace is smaller than mamba2_scan_backward_workspace_bytes");
  require(aligned16({a.workspace}), fn, "the workspace must be 16-byte aligned");
  const Workspace ws = carve(d, a.workspace);
  const std::size_t smem1 = sizeof(float) * (std::size_t(d.chunk) * (d.head_dim + 1) +
                                             std::size_t(d.chunk) * (d.d_state + 1) + 4 * d.chunk);
  launch_chunks(dstate_local_kernel, d, smem1, a.stream, a, ws.dS);
  const int PN = d.head_dim * d.d_state;
  dstate_pass_kernel<<<dim3((PN + 255) / 256, d.batch * d.heads), 256, 0, a.stream>>>(
      ws.dS, a.decay, d.chunks(), PN);
  check_launch();
  launch_chunks(chunk_grad_kernel, d, grad_smem(d), a.stream, a, ws);
  const long long R = (long long)d.batch * d.seq_len;
  sum_heads_kernel<<<blocks_for(std::size_t(R) * d.d_state, kThreads), kThreads, 0, a.stream>>>(
      ws.dBh, ws.dCh, d.heads, R, d.d_state, a.dB, a.dC, a.ld_dbc);
  check_launch();
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

}  // namespace tttlab::kernels
