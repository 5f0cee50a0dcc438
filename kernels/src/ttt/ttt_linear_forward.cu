// TTT-Linear, dual form, forward on the GPU (tttlab/kernels/ttt.hpp; maths in docs/MATH.md §4.2,
// the loss gradient §3.2, the short last mini-batch §4.3; the CPU engine in core/src/ttt/inner.cpp,
// which these kernels follow line by line). Two kernels, the first also in two roles:
//
// THE TENSOR-CORE KERNEL (Default where b = 16, d ∈ {16, 32, 64, 128} and Q, K, V, O are 16-byte
// aligned; 3xTF32, fp32-level accuracy. Version Tf32: the same kernel with one tf32 product per term,
// ~1e-3 relative, what the training step runs when its GEMMs are tf32).
//
// One block per (sequence, head) of d/16 warps; warp w owns output columns 16w..16w+15 of every
// product and the matching 16 columns of the state W, which stay in REGISTERS for the whole
// sequence (d/8 × 4 floats per lane). Each mini-batch (b = 16 tokens = one m16 tile):
//   Z = K W + 1c,  Z̄₀ = Q W + 1c,  C = Q Kᵀ            one k-loop, 6 independent mma chains
//   G = lnl2(Z, V − K)                                 row statistics: warp shuffles + one smem round
//   Z̄ = Z̄₀ − M G,  M = τ_i λ_j (C + 1) masked j ≤ i  M is turned from accumulator into operand
//                                                     layout in registers (see below)
//   O = [Q +] LN(Z̄);   W ← W − τ_b Kᵀ diag(λ) G       the update lands in W's register layout
// Products use mma.sync.m16n8k8 with tf32 operands and fp32 accumulation. With SPLIT (3xTF32, the
// Default) every operand x is split into hi = tf32(x) and lo = tf32(x − hi) and a·b is taken as
// a_hi·b_hi + a_hi·b_lo + a_lo·b_hi, which recovers fp32-level accuracy (the dropped a_lo·b_lo term
// is ~2^-22 relative).
//
// Layout trick: the contraction index k of a product may be permuted freely as long as A and B use
// the same permutation. The accumulator fragment of m16n8k8 holds columns (2t, 2t+1) of an 8-wide
// tile, the A/B operand fragments hold k = (t, t+4). Reading k position t as 2t and t+4 as 2t+1
// lets an accumulator (the W update, the masked M) serve directly as an operand with no shuffles,
// and turns the shared-memory operand loads of K and Q into 8-byte loads.
//
// Inputs stream through a 3-stage cp.async pipeline (K, V, Q, λ of mini-batch mb+2 load while mb
// is computed). Rows past the end of a short last mini-batch are zero-filled and get λ = 0, so they
// contribute nothing; they are not stored.
//
// Per mini-batch the instruction count is kept low (a profile of the first tensor-core design showed
// an issue-bound kernel: 1.5 warps per scheduler, one instruction every ~3 cycles per warp, ~1700
// instructions per warp per mini-batch, 6 tf32 conversions per mma):
//   - every operand is converted once per use site and shared by the products that read it; the
//     tf32 "hi" part is cvt.rna, the "lo" part x − hi is handed to the tensor core as raw fp32 bits
//     (it reads the top 19 bits: truncation of a term already 2^-11 smaller); the tf32 version hands
//     raw fp32 bits for everything (truncation to tf32, no conversion instruction at all);
//   - C = Q Kᵀ is split over the warps by k-steps (each warp does 2 of them) and the partial 16×16
//     tiles are summed through shared memory at the barrier that already precedes Z̄ −= M G;
//   - the bias update Σ_j λ_j G[j, :] is spread over the 8 lanes that share columns and reduced with
//     shuffles instead of a 16-step loop per lane;
//   - the loss gradient's LayerNorm backward takes one cross-warp reduction round and barrier instead
//     of two (tile_lnl2_stats, whose comment has the derivation): 4 block barriers per mini-batch.
//
// IN TWO ROLES (TttLinearForwardArgs::two_roles, where B·H blocks fit in one wave at one per SM and
// d ≤ 64, as in the training step; for Tf32 at d = 64 also at two per SM): the same mini-batch
// split between two groups of d/16 warps of one block. The state group carries W (Z, Z̄₀, G, the
// update); the read-out group takes C, M, Z̄, the output LayerNorm and O one mini-batch behind it.
// Bit for bit the same output (the section's header has the hand-off protocol).
//
// THE FALLBACK (every supported shape, fp32 CUDA cores): one thread block per (sequence n, head h),
// 256 threads. The state W [d, d], c [d] stays on chip for the whole sequence; the mini-batches are
// walked in order. Every matrix of a block lives in one workspace with padded rows (leading dimension
// d + 1 and b + 1), so that both row and column walks of a warp hit distinct shared-memory banks.
// Products are plain fp32 dot products, one output element per thread per step; row-wise LayerNorm
// work is one warp per row (ttt_common.cuh). Phases are separated by __syncthreads().
#include <cuda_runtime.h>

#include <cstddef>
#include <cstdint>
#include <stdexcept>
#include <string>
#include <type_traits>

#include "common/cuda_check.hpp"
#include "ttt/ttt_common.cuh"
#include "ttt/ttt_host.hpp"
#include "ttt/ttt_mma.cuh"
#include "tttlab/kernels/ttt.hpp"

namespace tttlab::kernels {
namespace detail {
namespace {

constexpr int kThreads = 256;
constexpr int kWarps = kThreads / 32;

// ---- Fallback: fp32 CUDA cores, every supported shape -------------------------------------------

struct FwdParams {
  const float *Q, *K, *V, *lam, *tau, *gamma, *beta, *W0, *b0;
  float* O;
  const std::uint16_t *Q16, *K16, *V16;  // version Bf16: the inputs and the output as bf16
  std::uint16_t* O16;
  float *ckW, *ckb;
  float *fW, *fb, *faW, *fab;
  int B, H, T, d, b, group, n_ck;
  bool ln, res, bias, per_seq;
  float eps;
};

__host__ __device__ inline std::size_t fwd_simt_floats(int d, int b) {
  const std::size_t ldd = d + 1, ldb = b + 1;
  return d * ldd + d + 4 * b * ldd + b * ldb + 2 * b;
}

__global__ void __launch_bounds__(kThreads) linear_forward_simt_kernel(FwdParams p) {
  extern __shared__ float smem[];
  const int blk = blockIdx.x, n = blk / p.H, h = blk % p.H;
  const int d = p.d, b = p.b, ldd = d + 1, ldb = b + 1;
  const int tid = threadIdx.x, lane = tid & 31, warp = tid >> 5;
  float* sW = smem;              // [d, ldd]   the committed state
  float* sc = sW + d * ldd;      // [d]
  float* sK = sc + d;            // [b, ldd]
  float* sX = sK + b * ldd;      // [b, ldd]   V, then Q
  float* sG = sX + b * ldd;      // [b, ldd]   Z, then G
  float* sZb = sG + b * ldd;     // [b, ldd]   Z̄
  float* sM = sZb + b * ldd;     // [b, ldb]   M = E ⊙ tril(QKᵀ + 1)
  float* sLam = sM + b * ldb;    // [b]
  float* sTau = sLam + b;        // [b]

  const std::size_t rs = std::size_t(p.H) * d;  // row stride of Q, K, V, O
  const std::size_t seq0 = std::size_t(n) * p.T * rs + std::size_t(h) * d;
  const float* W0 = p.W0 + (p.per_seq ? std::size_t(blk) : std::size_t(h)) * d * d;
  const float* b0 = p.b0 ? p.b0 + (p.per_seq ? std::size_t(blk) : std::size_t(h)) * d : nullptr;
  for (int i = tid; i < d * d; i += kThreads) sW[(i / d) * ldd + i % d] = W0[i];
  for (int c = tid; c < d; c += kThreads) sc[c] = p.bias ? b0[c] : 0.0f;
  for (int i = tid; i < b; i += kThreads) sTau[i] = p.tau[i];
  const RowFrag gam = p.ln ? row_load(p.gamma + std::size_t(h) * d, d, lane) : RowFrag{};
  const RowFrag bet = p.ln ? row_load(p.beta + std::size_t(h) * d, d, lane) : RowFrag{};
  const float one = p.bias ? 1.0f : 0.0f;
  __syncthreads();

  const int n_mb = (p.T + b - 1) / b;
  for (int mb = 0; mb < n_mb; ++mb) {
    const int t0 = mb * b, m = min(b, p.T - t0);
    if (p.ckW && mb % p.group == 0) {
      const std::size_t ck = std::size_t(blk) * p.n_ck + mb / p.group;
      for (int i = tid; i < d * d; i += kThreads) p.ckW[ck * d * d + i] = sW[(i / d) * ldd + i % d];
      if (p.ckb)
        for (int c = tid; c < d; c += kThreads) p.ckb[ck * d + c] = sc[c];
    }
    for (int i = tid; i < m * d; i += kThreads) {
      const int r = i / d, c = i % d;
      const std::size_t g = seq0 + std::size_t(t0 + r) * rs + c;
      sK[r * ldd + c] = p.K[g];
      sX[r * ldd + c] = p.V[g];
    }
    for (int i = tid; i < m; i += kThreads) sLam[i] = p.lam[std::size_t(blk) * p.T + t0 + i];
    __syncthreads();

    // Z = K W + 1c at the mini-batch start state.
    for (int i = tid; i < m * d; i += kThreads) {
      const int r = i / d, c = i % d;
      float acc = sc[c];
      for (int k = 0; k < d; ++k) acc += sK[r * ldd + k] * sW[k * ldd + c];
      sG[r * ldd + c] = acc;
    }
    __syncthreads();

    // G = ∂ℓ/∂Z row by row, target R = V − K (residual) or V.
    rows_loss_grad(sG, sX, sK, ldd, m, d, warp, kWarps, lane, gam, bet, p.eps, p.ln, p.res);
    __syncthreads();

    for (int i = tid; i < m * d; i += kThreads) {
      const int r = i / d, c = i % d;
      sX[r * ldd + c] = p.Q[seq0 + std::size_t(t0 + r) * rs + c];
    }
    __syncthreads();

    // M[i, j] = τ_i λ_j (q_i·k_j + 1) for j ≤ i.
    for (int i = tid; i < m * m; i += kThreads) {
      const int r = i / m, j = i % m;
      float v = 0.0f;
      if (j <= r) {
        float dot = 0.0f;
        for (int k = 0; k < d; ++k) dot += sX[r * ldd + k] * sK[j * ldd + k];
        v = sTau[r] * sLam[j] * (dot + one);
      }
      sM[r * ldb + j] = v;
    }
    __syncthreads();

    // Z̄ = Q W + 1c − M G.
    for (int i = tid; i < m * d; i += kThreads) {
      const int r = i / d, c = i % d;
      float acc = sc[c];
      for (int k = 0; k < d; ++k) acc += sX[r * ldd + k] * sW[k * ldd + c];
      for (int j = 0; j <= r; ++j) acc -= sM[r * ldb + j] * sG[j * ldd + c];
      sZb[r * ldd + c] = acc;
    }
    __syncthreads();

    // O = [Q +] LN(Z̄), and the state update (disjoint buffers: no barrier between them).
    rows_output(p.O + seq0 + std::size_t(t0) * rs, rs, sZb, sX, ldd, m, d, warp, kWarps, lane, gam,
                bet, p.eps, p.ln, p.res);
    // A = Kᵀ diag(λ) G: committed with τ_b when the mini-batch is full, else the open accumulator.
    const bool full = m == b;
    if (full || p.faW) {
      const float tb = sTau[b - 1];
      for (int i = tid; i < d * d; i += kThreads) {
        const int k = i / d, c = i % d;
        float acc = 0.0f;
        for (int j = 0; j < m; ++j) acc += sLam[j] * sK[j * ldd + k] * sG[j * ldd + c];
        if (full)
          sW[k * ldd + c] -= tb * acc;
        else
          p.faW[std::size_t(blk) * d * d + i] = acc;
      }
      for (int c = tid; c < d; c += kThreads) {
        float acc = 0.0f;
        for (int j = 0; j < m; ++j) acc += sLam[j] * sG[j * ldd + c];
        if (full) {
          if (p.bias) sc[c] -= tb * acc;
        } else if (p.fab) {
          p.fab[std::size_t(blk) * d + c] = p.bias ? acc : 0.0f;
        }
      }
    }
    __syncthreads();
  }

  if (p.fW)
    for (int i = tid; i < d * d; i += kThreads)
      p.fW[std::size_t(blk) * d * d + i] = sW[(i / d) * ldd + i % d];
  if (p.fb)
    for (int c = tid; c < d; c += kThreads) p.fb[std::size_t(blk) * d + c] = sc[c];
  if (p.T % b == 0) {
    if (p.faW)
      for (int i = tid; i < d * d; i += kThreads) p.faW[std::size_t(blk) * d * d + i] = 0.0f;
    if (p.fab)
      for (int c = tid; c < d; c += kThreads) p.fab[std::size_t(blk) * d + c] = 0.0f;
  }
}

// ---- Default and Tf32: tensor cores --------------------------------------------------------------

constexpr int kMb = 16;     // the mini-batch the tensor-core kernel handles: one m16 tile
constexpr int kStages = 3;  // cp.async pipeline depth


template <int D>
struct TcLayout {
  static constexpr int NW = D / 16, NT = 32 * NW, KT = D / 8;
  static constexpr int LDX = D + 8;  // K, V, Q tiles: conflict-free 8-byte fragment loads
  static constexpr int LDG = D + 4;  // G
  static constexpr int TILE = kMb * LDX;
  static constexpr int STAGE = 3 * TILE + kMb;  // K, V, Q, λ
  static constexpr int RED = NW * 16 * 2;       // the output LN's cross-warp reduction round
  static constexpr int RED8 = NW * 16 * 8;      // the loss gradient's round (tile_lnl2_stats)
  static constexpr int LDM = 20;                 // partial C tiles [NW][16][LDM]
  static constexpr int FLOATS = kStages * STAGE + kMb * LDG + RED8 + RED + NW * 16 * LDM;
};

// The loss gradient G = ∂ℓ/∂Z of ℓ = ½‖γ ⊙ x̂ + β − r‖² per row, x̂ = (z − μ)·ρ, ρ = 1/√(σ² + ε),
// from ONE cross-warp reduction round (the LN backward otherwise needs a second round for its
// projection sums after the first has produced μ and ρ). Derivation, per row, sums over the D columns:
//   ĝ = γ ⊙ (γ ⊙ x̂ + β − r) = γ² ⊙ x̂ + u,   u = γ ⊙ (β − r),
//   G = ρ · (ĝ − S1/D − x̂ · S2/D),   S1 = Σ ĝ,   S2 = Σ ĝ ⊙ x̂,
//   S1 = ρ · Σ γ²(z − μ) + Σ u,
//   S2 = ρ² · Σ γ²(z − μ)² + ρ · Σ u (z − μ).
// So μ, σ², S1 and S2 all follow from row sums that do not need μ first, provided the sums are taken
// about a shift that each warp knows without communication. Raw sums (Σ z², Σ γ² z², ...) would
// cancel catastrophically when |μ| ≫ σ, so each warp w shifts by its own 16-column mean
// m_w = s_w / 16 (s_w = Σ_w z, one quad shuffle round) and reduces, with y = z − m_w,
//   q_w = Σ y²,  c_w = Σ γ² y,  e_w = Σ γ² y²,  f_w = Σ u y,  U_w = Σ u,  Γ_w = Σ γ².
// With μ = Σ_w s_w / D and δ_w = m_w − μ, z − μ = y + δ_w on warp w's columns; with Σ y = 0 per warp
// (up to rounding, dropped as in the two-round parallel variance)
//   Σ (z − μ)²     = Σ_w q_w + 16 δ_w²                 (the parallel-variance combination),
//   Σ γ²(z − μ)    = Σ_w c_w + δ_w Γ_w,
//   Σ γ²(z − μ)²   = Σ_w e_w + 2 δ_w c_w + δ_w² Γ_w,
//   Σ u (z − μ)    = Σ_w f_w + δ_w U_w,
//   Σ u            = Σ_w U_w.
// Every term is centred (y and δ_w are of the order of the row's spread, not of |μ|), so the fp32
// error is that of the two-round form. Outputs: x̂ and ĝ are recomputed by the caller from μ, ρ;
// this returns μ, ρ and the two projection coefficients S1/D and S2/D for rows gid, gid + 8.
template <int D, class Bar = BlockBarrier>
__device__ __forceinline__ void tile_lnl2_stats(const float (&z)[2][4], const float (&u)[2][4],
                                                const float (&g2)[2][2], float gam2_w, float* red,
                                                int warp, int gid, int tig, float eps,
                                                float (&mu)[2], float (&rstd)[2], float (&p1)[2],
                                                float (&p2)[2], Bar bar = {}) {
  using L = TcLayout<D>;
#pragma unroll
  for (int hf = 0; hf < 2; ++hf) {
    const float s = quad_sum(z[0][2 * hf] + z[0][2 * hf + 1] + z[1][2 * hf] + z[1][2 * hf + 1]);
    const float mw = s * (1.0f / 16.0f);
    float q = 0.0f, c = 0.0f, e = 0.0f, f = 0.0f, uu = 0.0f;
#pragma unroll
    for (int nt = 0; nt < 2; ++nt)
#pragma unroll
      for (int k = 0; k < 2; ++k) {
        const float y = z[nt][2 * hf + k] - mw, gy = g2[nt][k] * y, uv = u[nt][2 * hf + k];
        q += y * y;
        c += gy;
        e += gy * y;
        f += uv * y;
        uu += uv;
      }
    q = quad_sum(q);
    c = quad_sum(c);
    e = quad_sum(e);
    f = quad_sum(f);
    uu = quad_sum(uu);
    if (tig == 0) {
      float4* dst = reinterpret_cast<float4*>(red + (warp * 16 + gid + 8 * hf) * 8);
      dst[0] = make_float4(s, q, c, e);
      dst[1] = make_float4(f, uu, gam2_w, 0.0f);
    }
  }
  bar();
#pragma unroll
  for (int hf = 0; hf < 2; ++hf) {
    const int row = gid + 8 * hf;
    float4 a[L::NW], b[L::NW];
    float s = 0.0f;
#pragma unroll
    for (int w = 0; w < L::NW; ++w) {
      a[w] = reinterpret_cast<const float4*>(red + (w * 16 + row) * 8)[0];
      b[w] = reinterpret_cast<const float4*>(red + (w * 16 + row) * 8)[1];
      s += a[w].x;
    }
    const float m = s * (1.0f / float(D));
    float m2 = 0.0f, pc = 0.0f, pe = 0.0f, pf = 0.0f, us = 0.0f;
#pragma unroll
    for (int w = 0; w < L::NW; ++w) {
      const float dw = a[w].x * (1.0f / 16.0f) - m;
      m2 += a[w].y + 16.0f * dw * dw;
      pc += a[w].z + dw * b[w].z;
      pe += a[w].w + dw * (2.0f * a[w].z + dw * b[w].z);
      pf += b[w].x + dw * b[w].y;
      us += b[w].y;
    }
    const float rs = 1.0f / sqrtf(m2 / float(D) + eps);
    mu[hf] = m;
    rstd[hf] = rs;
    p1[hf] = (rs * pc + us) * (1.0f / float(D));
    p2[hf] = rs * (rs * pe + pf) * (1.0f / float(D));
  }
}

// ---- Per-lane pieces of the two tensor-core kernels (tf32 and bf16 operands) ---------------------
//
// A lane holds rows gid and gid + 8 of the 16-row tiles at its warp's columns col0 + nt·8 + 2·tig + e
// (nt, e ∈ {0, 1}: the mma accumulator layout), and its share of the state W, c.

// The state: Wr[kt][i] = W[kt·8 + 2·tig + (i&1)][col0 + gid + 8·(i>>1)] (the accumulator layout of
// the update's Wᵀ tiles, which is also the B-operand layout of Z = K W); c, γ, β and γ² at the lane's
// columns, and Σ γ² over the warp's 16 columns (the lanes of a quad hold 4 distinct columns each).
template <int D>
__device__ __forceinline__ void load_lane_state(const FwdParams& p, int blk, int h, int col0,
                                                int gid, int tig, float (&Wr)[D / 8][4],
                                                float (&cb)[2][2], float (&gam)[2][2],
                                                float (&bet)[2][2], float (&gam2)[2][2],
                                                float& gam2_w) {
  const float* W0 = p.W0 + (p.per_seq ? std::size_t(blk) : std::size_t(h)) * D * D;
#pragma unroll
  for (int kt = 0; kt < D / 8; ++kt)
#pragma unroll
    for (int i = 0; i < 4; ++i)
      Wr[kt][i] = W0[(kt * 8 + 2 * tig + (i & 1)) * D + col0 + gid + 8 * (i >> 1)];
#pragma unroll
  for (int nt = 0; nt < 2; ++nt)
#pragma unroll
    for (int e = 0; e < 2; ++e) {
      const int col = col0 + nt * 8 + 2 * tig + e;
      cb[nt][e] = p.bias ? p.b0[(p.per_seq ? std::size_t(blk) : std::size_t(h)) * D + col] : 0.0f;
      gam[nt][e] = p.ln ? p.gamma[std::size_t(h) * D + col] : 1.0f;
      bet[nt][e] = p.ln ? p.beta[std::size_t(h) * D + col] : 0.0f;
    }
#pragma unroll
  for (int nt = 0; nt < 2; ++nt)
#pragma unroll
    for (int e = 0; e < 2; ++e) gam2[nt][e] = gam[nt][e] * gam[nt][e];
  gam2_w = quad_sum(gam2[0][0] + gam2[0][1] + gam2[1][0] + gam2[1][1]);
}

// The lane's share of W, c into slot `slot` of [.., D, D] and [.., D] (checkpoints, final state).
template <int D>
__device__ __forceinline__ void store_lane_state(const float (&Wr)[D / 8][4],
                                                 const float (&cb)[2][2], float* Wd, float* cd,
                                                 std::size_t slot, int col0, int gid, int tig) {
#pragma unroll
  for (int kt = 0; kt < D / 8; ++kt)
#pragma unroll
    for (int i = 0; i < 4; ++i)
      Wd[slot * D * D + (kt * 8 + 2 * tig + (i & 1)) * D + col0 + gid + 8 * (i >> 1)] = Wr[kt][i];
  if (cd && gid == 0)
#pragma unroll
    for (int nt = 0; nt < 2; ++nt)
#pragma unroll
      for (int e = 0; e < 2; ++e) cd[slot * D + col0 + nt * 8 + 2 * tig + e] = cb[nt][e];
}

// Issues the cp.async loads of mini-batch mb's K, V, Q tiles and λ into stage `st` (rows past T
// zero-filled, λ = 0 there), by threads `t` = 0 .. `threads` − 1, and commits the group (an empty
// one past the last mini-batch, so that the waits count the same).
template <int D>
__device__ __forceinline__ void issue_stage(const FwdParams& p, float* st, int mb, int n_mb,
                                            int blk, std::size_t seq0, std::size_t rs, int t,
                                            int threads) {
  using L = TcLayout<D>;
  if (mb < n_mb) {
    const int t0 = mb * kMb, m = min(kMb, p.T - t0);
    constexpr int CPR = D / 4;  // 16-byte chunks per row
    for (int i = t; i < 3 * kMb * CPR; i += threads) {
      const int tile = i / (kMb * CPR), rem = i % (kMb * CPR), r = rem / CPR, ch = rem % CPR;
      const float* base = tile == 0 ? p.K : (tile == 1 ? p.V : p.Q);
      const float* src = base + seq0 + std::size_t(t0 + min(r, m - 1)) * rs + ch * 4;
      cp_async16(st + tile * L::TILE + r * L::LDX + ch * 4, src, r < m ? 16 : 0);
    }
    if (t < kMb)
      cp_async4(st + 3 * L::TILE + t, p.lam + std::size_t(blk) * p.T + t0 + min(t, m - 1),
                t < m ? 4 : 0);
  }
  cp_async_commit();
}

// Z = K W + c and Z̄₀ = Q W + c from the state in registers: four accumulator chains over d/8
// k-steps, each operand converted once.
template <int D, bool SPLIT>
__device__ __forceinline__ void lane_z_zbar0(const float (&Wr)[D / 8][4], const float (&cb)[2][2],
                                             const float* sK, const float* sQ, int gid, int tig,
                                             float (&z)[2][4], float (&zb)[2][4]) {
  constexpr int LDX = TcLayout<D>::LDX;
#pragma unroll
  for (int nt = 0; nt < 2; ++nt)
#pragma unroll
    for (int i = 0; i < 4; ++i) z[nt][i] = zb[nt][i] = 0.0f;
#pragma unroll
  for (int kt = 0; kt < D / 8; ++kt) {
    const Op2 w0 = op2<SPLIT>(Wr[kt][0], Wr[kt][1]), w1 = op2<SPLIT>(Wr[kt][2], Wr[kt][3]);
    kq_times_w<SPLIT>(z, zb, sK, sQ, LDX, kt, gid, tig, w0, w1);
  }
#pragma unroll
  for (int nt = 0; nt < 2; ++nt)
#pragma unroll
    for (int i = 0; i < 4; ++i) {
      z[nt][i] += cb[nt][i & 1];
      zb[nt][i] += cb[nt][i & 1];
    }
}

// This warp's share of C = Q Kᵀ (k-steps warp and warp + NW: d/8 = 2·NW k-steps in all) into its
// partial tile Mp[warp] [16][LDM].
template <int D, bool SPLIT>
__device__ __forceinline__ void lane_c_partial(const float* sK, const float* sQ, float* Mp,
                                               int warp, int gid, int tig) {
  using L = TcLayout<D>;
  constexpr int LDX = L::LDX;
  float mp[2][4] = {};
#pragma unroll
  for (int s2 = 0; s2 < 2; ++s2) {
    const int kt = warp + s2 * L::NW;
    const float2 k0 = *reinterpret_cast<const float2*>(sK + gid * LDX + kt * 8 + 2 * tig);
    const float2 k1 = *reinterpret_cast<const float2*>(sK + (gid + 8) * LDX + kt * 8 + 2 * tig);
    const float2 q0 = *reinterpret_cast<const float2*>(sQ + gid * LDX + kt * 8 + 2 * tig);
    const float2 q1 = *reinterpret_cast<const float2*>(sQ + (gid + 8) * LDX + kt * 8 + 2 * tig);
    const Op4 aq = op4<SPLIT>(q0.x, q1.x, q0.y, q1.y);
    mma_parts<SPLIT>(mp[0], aq, op2<SPLIT>(k0.x, k0.y));
    mma_parts<SPLIT>(mp[1], aq, op2<SPLIT>(k1.x, k1.y));
  }
  float* mw = Mp + warp * 16 * L::LDM;
#pragma unroll
  for (int jt = 0; jt < 2; ++jt)
#pragma unroll
    for (int hf = 0; hf < 2; ++hf)
      *reinterpret_cast<float2*>(mw + (gid + 8 * hf) * L::LDM + jt * 8 + 2 * tig) =
          make_float2(mp[jt][2 * hf], mp[jt][2 * hf + 1]);
}

// The target R = V − K (residual) or V at the lane's positions, from the stage's tiles.
template <int D>
__device__ __forceinline__ void lane_target(const FwdParams& p, const float* sK, const float* sV,
                                            int col0, int gid, int tig, float (&r)[2][4]) {
  constexpr int LDX = TcLayout<D>::LDX;
#pragma unroll
  for (int nt = 0; nt < 2; ++nt)
#pragma unroll
    for (int hf = 0; hf < 2; ++hf) {
      const int off = (gid + 8 * hf) * LDX + col0 + nt * 8 + 2 * tig;
      const float2 v = *reinterpret_cast<const float2*>(sV + off);
      const float2 k = *reinterpret_cast<const float2*>(sK + off);
      r[nt][2 * hf] = p.res ? v.x - k.x : v.x;
      r[nt][2 * hf + 1] = p.res ? v.y - k.y : v.y;
    }
}

// G = lnl2(Z, R) at the lane's positions (one cross-warp round when LN is on, met on `bar`), then
// into sG.
template <int D, class Bar = BlockBarrier>
__device__ __forceinline__ void lane_loss_grad(const FwdParams& p, const float (&z)[2][4],
                                               const float (&r)[2][4], const float (&gam)[2][2],
                                               const float (&bet)[2][2], const float (&gam2)[2][2],
                                               float gam2_w, float* red, float* sG, int warp,
                                               int gid, int tig, int col0, Bar bar = {}) {
  constexpr int LDG = TcLayout<D>::LDG;
  float g[2][4];
  if (p.ln) {
    float u[2][4];
#pragma unroll
    for (int nt = 0; nt < 2; ++nt)
#pragma unroll
      for (int i = 0; i < 4; ++i) u[nt][i] = gam[nt][i & 1] * (bet[nt][i & 1] - r[nt][i]);
    float mu[2], rstd[2], p1[2], p2[2];
    tile_lnl2_stats<D>(z, u, gam2, gam2_w, red, warp, gid, tig, p.eps, mu, rstd, p1, p2, bar);
#pragma unroll
    for (int nt = 0; nt < 2; ++nt)
#pragma unroll
      for (int i = 0; i < 4; ++i) {
        const int hf = i >> 1;
        const float xh = (z[nt][i] - mu[hf]) * rstd[hf];
        const float gh = gam2[nt][i & 1] * xh + u[nt][i];
        g[nt][i] = (gh - p1[hf] - xh * p2[hf]) * rstd[hf];
      }
  } else {
#pragma unroll
    for (int nt = 0; nt < 2; ++nt)
#pragma unroll
      for (int i = 0; i < 4; ++i) g[nt][i] = z[nt][i] - r[nt][i];
  }
#pragma unroll
  for (int nt = 0; nt < 2; ++nt)
#pragma unroll
    for (int hf = 0; hf < 2; ++hf)
      *reinterpret_cast<float2*>(sG + (gid + 8 * hf) * LDG + col0 + nt * 8 + 2 * tig) =
          make_float2(g[nt][2 * hf], g[nt][2 * hf + 1]);
}

// M = −τ_i λ_j (C + 1) on the lower triangle (zero above) at the lane's accumulator positions of the
// 16 × 16 tile, C summed from the warps' partials Mp [NW][16][LDM]. (The tf32 kernel keeps its own
// copy of these lines inline: built with this call, it ran about 1% slower in an A/B comparison at
// the training shape, in both Tf32 and Default; inline, it showed no difference.)
template <int D>
__device__ __forceinline__ void lane_masked_m(const float* Mp, const float* sL,
                                              const float (&tau_row)[2], float one, int gid,
                                              int tig, float (&mc)[2][4]) {
  using L = TcLayout<D>;
#pragma unroll
  for (int jt = 0; jt < 2; ++jt)
#pragma unroll
    for (int hf = 0; hf < 2; ++hf) {
      float2 acc = make_float2(0.0f, 0.0f);
#pragma unroll
      for (int w = 0; w < L::NW; ++w) {
        const float2 v = *reinterpret_cast<const float2*>(
            Mp + w * 16 * L::LDM + (gid + 8 * hf) * L::LDM + jt * 8 + 2 * tig);
        acc.x += v.x;
        acc.y += v.y;
      }
      const int row = gid + 8 * hf, j = jt * 8 + 2 * tig;
      mc[jt][2 * hf] = j <= row ? -tau_row[hf] * sL[j] * (acc.x + one) : 0.0f;
      mc[jt][2 * hf + 1] = j + 1 <= row ? -tau_row[hf] * sL[j + 1] * (acc.y + one) : 0.0f;
    }
}

// Σ_j λ_j G[j, col] for the lane's 4 columns: rows gid and gid + 8 here, then the 8 lanes that share
// tig (lane bits 2..4) are summed.
template <int D>
__device__ __forceinline__ void lane_bias_sums(const float* sG, const float* sL, int col0, int gid,
                                               int tig, float (&cacc)[2][2]) {
  constexpr int LDG = TcLayout<D>::LDG;
#pragma unroll
  for (int nt = 0; nt < 2; ++nt) {
    const float2 g0 = *reinterpret_cast<const float2*>(sG + gid * LDG + col0 + nt * 8 + 2 * tig);
    const float2 g1 =
        *reinterpret_cast<const float2*>(sG + (gid + 8) * LDG + col0 + nt * 8 + 2 * tig);
    cacc[nt][0] = sL[gid] * g0.x + sL[gid + 8] * g1.x;
    cacc[nt][1] = sL[gid] * g0.y + sL[gid + 8] * g1.y;
#pragma unroll
    for (int e = 0; e < 2; ++e)
#pragma unroll
      for (int o = 4; o < 32; o <<= 1) cacc[nt][e] += __shfl_xor_sync(0xffffffffu, cacc[nt][e], o);
  }
}

// The end of a mini-batch's update: a full one commits (W ← acc, c ← c − τ_b Σ λ G); a short last one
// writes the open accumulators Kᵀ diag(λ) G (= acc) and Σ λ G for decode.
template <int D>
__device__ __forceinline__ void lane_commit(const FwdParams& p, int blk, bool full, float tb,
                                            const float (&acc)[D / 8][4], const float (&cacc)[2][2],
                                            float (&Wr)[D / 8][4], float (&cb)[2][2], int col0,
                                            int gid, int tig) {
  if (full) {
#pragma unroll
    for (int kt = 0; kt < D / 8; ++kt)
#pragma unroll
      for (int i = 0; i < 4; ++i) Wr[kt][i] = acc[kt][i];
    if (p.bias)
#pragma unroll
      for (int nt = 0; nt < 2; ++nt)
#pragma unroll
        for (int e = 0; e < 2; ++e) cb[nt][e] -= tb * cacc[nt][e];
  } else {
#pragma unroll
    for (int kt = 0; kt < D / 8; ++kt)
#pragma unroll
      for (int i = 0; i < 4; ++i)
        p.faW[std::size_t(blk) * D * D + (kt * 8 + 2 * tig + (i & 1)) * D + col0 + gid +
              8 * (i >> 1)] = acc[kt][i];
    if (p.fab && gid == 0)
#pragma unroll
      for (int nt = 0; nt < 2; ++nt)
#pragma unroll
        for (int e = 0; e < 2; ++e)
          p.fab[std::size_t(blk) * D + col0 + nt * 8 + 2 * tig + e] = p.bias ? cacc[nt][e] : 0.0f;
  }
}

// O = [Q +] LN(Z̄) for the mini-batch's m rows from t0 (one cross-warp round on `red` with LN, met
// on `bar`); Q's tile from the stage for the residual. QElem float: Q and O in fp32 (p.O);
// std::uint16_t: bf16 (the Bf16 kernel's stage and p.O16).
template <int D, class QElem = float, class Bar = BlockBarrier>
__device__ __forceinline__ void lane_output(const FwdParams& p, const float (&zb)[2][4],
                                            const float (&gam)[2][2], const float (&bet)[2][2],
                                            const QElem* sQ, float* red, std::size_t seq0,
                                            std::size_t rs, int t0, int m, int warp, int gid,
                                            int tig, int col0, Bar bar = {}) {
  constexpr bool kBf16 = std::is_same_v<QElem, std::uint16_t>;
  static_assert(kBf16 || std::is_same_v<QElem, float>, "Q and O in fp32 or bf16");
  constexpr int LDX = TcLayout<D>::LDX;  // Bf16Layout's too
  float mu[2] = {0.0f, 0.0f}, rstd[2] = {1.0f, 1.0f};
  if (p.ln) frag_row_stats<D, 2>(zb, red, warp, gid, tig, p.eps, mu, rstd, bar);
#pragma unroll
  for (int hf = 0; hf < 2; ++hf) {
    const int row = gid + 8 * hf;
    if (row >= m) continue;
#pragma unroll
    for (int nt = 0; nt < 2; ++nt) {
      const int col = col0 + nt * 8 + 2 * tig;
      float o0 = zb[nt][2 * hf], o1 = zb[nt][2 * hf + 1];
      if (p.ln) {
        o0 = gam[nt][0] * (o0 - mu[hf]) * rstd[hf] + bet[nt][0];
        o1 = gam[nt][1] * (o1 - mu[hf]) * rstd[hf] + bet[nt][1];
      }
      if (p.res) {
        float2 q;
        if constexpr (kBf16)
          q = unpack_bf16(*reinterpret_cast<const uint32_t*>(sQ + row * LDX + col));
        else
          q = *reinterpret_cast<const float2*>(sQ + row * LDX + col);
        o0 += q.x;
        o1 += q.y;
      }
      const std::size_t at = seq0 + std::size_t(t0 + row) * rs + col;
      if constexpr (kBf16)
        *reinterpret_cast<uint32_t*>(p.O16 + at) = pack_bf16(o0, o1);
      else
        *reinterpret_cast<float2*>(p.O + at) = make_float2(o0, o1);
    }
  }
}

// W ← W − τ_b Kᵀ diag(λ) G for a full mini-batch, or the open accumulator Kᵀ diag(λ) G of a short
// last one (when asked for), then the commit (lane_commit).
template <int D, bool SPLIT>
__device__ __forceinline__ void lane_update(const FwdParams& p, int blk, int m, float tb,
                                            const float* sK, const float* sL, const float* sG,
                                            float (&Wr)[D / 8][4], float (&cb)[2][2], int col0,
                                            int gid, int tig) {
  constexpr int LDX = TcLayout<D>::LDX, LDG = TcLayout<D>::LDG;
  const bool full = m == kMb;
  if (!full && !p.faW) return;
  const float scale = full ? -tb : 1.0f;
  float acc[D / 8][4];
#pragma unroll
  for (int kt = 0; kt < D / 8; ++kt)
#pragma unroll
    for (int i = 0; i < 4; ++i) acc[kt][i] = full ? Wr[kt][i] : 0.0f;
#pragma unroll
  for (int js = 0; js < 2; ++js) {
    const int j0 = js * 8 + tig, j1 = j0 + 4;
    const float e0 = scale * sL[j0], e1 = scale * sL[j1];
    const Op4 ag = op4<SPLIT>(e0 * sG[j0 * LDG + col0 + gid], e0 * sG[j0 * LDG + col0 + gid + 8],
                              e1 * sG[j1 * LDG + col0 + gid], e1 * sG[j1 * LDG + col0 + gid + 8]);
#pragma unroll
    for (int kt = 0; kt < D / 8; ++kt)
      mma_parts<SPLIT>(acc[kt], ag,
                       op2<SPLIT>(sK[j0 * LDX + kt * 8 + gid], sK[j1 * LDX + kt * 8 + gid]));
  }
  float cacc[2][2];
  lane_bias_sums<D>(sG, sL, col0, gid, tig, cacc);
  lane_commit<D>(p, blk, full, tb, acc, cacc, Wr, cb, col0, gid, tig);
}

// After the last mini-batch: the final state, and zero open accumulators when T is a multiple of b.
template <int D>
__device__ __forceinline__ void lane_finish(const FwdParams& p, int blk,
                                            const float (&Wr)[D / 8][4], const float (&cb)[2][2],
                                            int tid, int col0, int gid, int tig) {
  constexpr int NT = TcLayout<D>::NT;  // both kernels' block
  if (p.fW) store_lane_state<D>(Wr, cb, p.fW, p.fb, blk, col0, gid, tig);
  if (p.T % kMb == 0) {
    if (p.faW)
      for (int i = tid; i < D * D; i += NT) p.faW[std::size_t(blk) * D * D + i] = 0.0f;
    if (p.fab)
      for (int i = tid; i < D; i += NT) p.fab[std::size_t(blk) * D + i] = 0.0f;
  }
}

template <int D, bool SPLIT>
__global__ void __launch_bounds__(2 * D) linear_forward_tc_kernel(FwdParams p) {
  using L = TcLayout<D>;
  constexpr int KT = L::KT, LDG = L::LDG;
  extern __shared__ __align__(16) float smem[];
  float* stages = smem;
  float* sG = smem + kStages * L::STAGE;
  float* red = sG + kMb * LDG;
  float* Mp = red + L::RED8 + L::RED;  // [NW][16][LDM] partial C = Q Kᵀ of each warp

  const int tid = threadIdx.x, lane = tid & 31, warp = tid >> 5, gid = lane >> 2, tig = lane & 3;
  const int blk = blockIdx.x, n = blk / p.H, h = blk % p.H;
  const int T = p.T, n_mb = (T + kMb - 1) / kMb;
  const std::size_t rs = std::size_t(p.H) * D;
  const std::size_t seq0 = std::size_t(n) * T * rs + std::size_t(h) * D;
  const int col0 = warp * 16;
  const float one = p.bias ? 1.0f : 0.0f;

  float Wr[KT][4], cb[2][2], gam[2][2], bet[2][2], gam2[2][2], gam2_w;
  load_lane_state<D>(p, blk, h, col0, gid, tig, Wr, cb, gam, bet, gam2, gam2_w);
  const float tau_row[2] = {p.tau[gid], p.tau[gid + 8]};
  const float tb = p.tau[kMb - 1];

  auto prefetch = [&](int mb) {
    issue_stage<D>(p, stages + (mb % kStages) * L::STAGE, mb, n_mb, blk, seq0, rs, tid, L::NT);
  };

  prefetch(0);
  prefetch(1);
  for (int mb = 0; mb < n_mb; ++mb) {
    cp_async_wait<kStages - 2>();
    __syncthreads();  // this stage landed for every thread; the stage of mb − 1 is free
    prefetch(mb + kStages - 1);
    const float* sK = stages + (mb % kStages) * L::STAGE;
    const float* sV = sK + L::TILE;
    const float* sQ = sV + L::TILE;
    const float* sL = sQ + L::TILE;
    const int t0 = mb * kMb, m = min(kMb, T - t0);
    if (p.ckW && mb % p.group == 0)
      store_lane_state<D>(Wr, cb, p.ckW, p.ckb, std::size_t(blk) * p.n_ck + mb / p.group, col0, gid,
                          tig);

    // Z = K W + c, Z̄₀ = Q W + c; this warp's share of C = Q Kᵀ.
    float z[2][4], zb[2][4];
    lane_z_zbar0<D, SPLIT>(Wr, cb, sK, sQ, gid, tig, z, zb);
    lane_c_partial<D, SPLIT>(sK, sQ, Mp, warp, gid, tig);
    // G = lnl2(Z, R) at the lane's positions, then into shared memory.
    {
      float r[2][4];
      lane_target<D>(p, sK, sV, col0, gid, tig, r);
      lane_loss_grad<D>(p, z, r, gam, bet, gam2, gam2_w, red, sG, warp, gid, tig, col0);
    }
    __syncthreads();  // G complete

    // C = Σ_w C_w at this lane's accumulator positions; M = τ_i λ_j (C + 1) on the lower triangle,
    // negated (lane_masked_m, inline here: its comment says why); then Z̄ = Z̄₀ − M G (M from
    // registers, G rows read with the permuted j).
    float mc[2][4];
#pragma unroll
    for (int jt = 0; jt < 2; ++jt)
#pragma unroll
      for (int hf = 0; hf < 2; ++hf) {
        float2 acc = make_float2(0.0f, 0.0f);
#pragma unroll
        for (int w = 0; w < L::NW; ++w) {
          const float2 v = *reinterpret_cast<const float2*>(Mp + w * 16 * L::LDM +
                                                            (gid + 8 * hf) * L::LDM + jt * 8 + 2 * tig);
          acc.x += v.x;
          acc.y += v.y;
        }
        const int row = gid + 8 * hf, j = jt * 8 + 2 * tig;
        mc[jt][2 * hf] = j <= row ? -tau_row[hf] * sL[j] * (acc.x + one) : 0.0f;
        mc[jt][2 * hf + 1] = j + 1 <= row ? -tau_row[hf] * sL[j + 1] * (acc.y + one) : 0.0f;
      }
#pragma unroll
    for (int js = 0; js < 2; ++js) {
      const Op4 am = op4<SPLIT>(mc[js][0], mc[js][2], mc[js][1], mc[js][3]);
#pragma unroll
      for (int nt = 0; nt < 2; ++nt) {
        const float* gp = sG + (js * 8 + 2 * tig) * LDG + col0 + nt * 8 + gid;
        mma_parts<SPLIT>(zb[nt], am, op2<SPLIT>(gp[0], gp[LDG]));
      }
    }

    // O = [Q +] LN(Z̄).
    lane_output<D>(p, zb, gam, bet, sQ, red + L::RED8, seq0, rs, t0, m, warp, gid, tig, col0);

    // W ← W − τ_b Kᵀ diag(λ) G (full mini-batch), or the open accumulator Kᵀ diag(λ) G.
    lane_update<D, SPLIT>(p, blk, m, tb, sK, sL, sG, Wr, cb, col0, gid, tig);
  }
  cp_async_wait<0>();
  lane_finish<D>(p, blk, Wr, cb, tid, col0, gid, tig);
}

// ---- Default and Tf32 in two roles --------------------------------------------------------------
//
// Where the B·H blocks fit in one wave at one per SM (the training step's shapes: one warp per
// scheduler), a block runs the tensor-core kernel's mini-batch in two groups of d/16 warps:
//   the state group    holds W, c in registers: Z = KW + c and Z̄₀ = QW + c, G = lnl2(Z, R), the
//                      update, the checkpoints and the final state; it issues every stage's loads;
//   the read-out group C = QKᵀ, M, Z̄ = Z̄₀ − M G, the output LayerNorm and the store of O.
// The read-out of mini-batch k runs beside the state group's update of k and its Z, G of k + 1, so a
// mini-batch costs about the state group's chain. Hand-offs through shared memory: G and Z̄₀ of
// mini-batch k in buffer k & 1, announced on FULL[k & 1] (arrive by the state group, sync by the
// read-out group); the read-out group arrives on EMPTY[k & 1] when done with k, which frees that
// buffer and stage k for mini-batch k + 2 (4 stages: the read-out's, the state group's and two in
// flight). Every value and every sum is the one-group kernel's, in the same order: the same output.
constexpr int kFwdBarState = 1, kFwdBarOut = 2, kFwdBarFull = 3, kFwdBarEmpty = 5;

template <int D>
struct RolesFwdLayout {
  using L = TcLayout<D>;
  static constexpr int NSTAGE = 4;
  static constexpr int G = kMb * L::LDG;  // one G tile
  static constexpr int ZB = L::NT * 8;    // Z̄₀ in fragment order: [2][NT][4]
  static constexpr int OFF_G = NSTAGE * L::STAGE, OFF_ZB = OFF_G + 2 * G,
                       OFF_RED8 = OFF_ZB + 2 * ZB, OFF_RED = OFF_RED8 + L::RED8,
                       OFF_MP = OFF_RED + L::RED, FLOATS = OFF_MP + L::NW * 16 * L::LDM;
  static_assert(L::STAGE % 4 == 0 && G % 4 == 0 && OFF_ZB % 4 == 0 && OFF_RED8 % 4 == 0,
                "16-byte aligned buffers");
};

// MINB: the blocks per SM that the register allocation must leave room for (2: two blocks share an
// SM, see dispatch_tc).
template <int D, bool SPLIT, int MINB = 1>
__global__ void __launch_bounds__(4 * D, MINB) linear_forward_roles_kernel(FwdParams p) {
  using L = TcLayout<D>;
  using R = RolesFwdLayout<D>;
  constexpr int KT = L::KT, LDG = L::LDG, NT = L::NT;
  extern __shared__ __align__(16) float smem[];
  const int tid = threadIdx.x, lane = tid & 31, gid = lane >> 2, tig = lane & 3;
  const bool state = tid < NT;
  const int rt = state ? tid : tid - NT;  // thread within its group
  const int warp = rt >> 5;               // warp within its group: its 16 columns
  const int blk = blockIdx.x, n = blk / p.H, h = blk % p.H;
  const int T = p.T, n_mb = (T + kMb - 1) / kMb;
  const std::size_t rs = std::size_t(p.H) * D;
  const std::size_t seq0 = std::size_t(n) * T * rs + std::size_t(h) * D;
  const int col0 = warp * 16;
  const float one = p.bias ? 1.0f : 0.0f;
  auto stage = [&](int mb) { return smem + (mb % R::NSTAGE) * L::STAGE; };

  float Wr[KT][4], cb[2][2], gam[2][2], bet[2][2], gam2[2][2], gam2_w;
  load_lane_state<D>(p, blk, h, col0, gid, tig, Wr, cb, gam, bet, gam2, gam2_w);
  const float tau_row[2] = {p.tau[gid], p.tau[gid + 8]};
  const float tb = p.tau[kMb - 1];

  if (state) {
    using Bar = GroupBarrier<kFwdBarState, NT>;
    auto prefetch = [&](int mb) { issue_stage<D>(p, stage(mb), mb, n_mb, blk, seq0, rs, rt, NT); };
    prefetch(0);
    prefetch(1);
    for (int mb = 0; mb < n_mb; ++mb) {
      // The read-out group is done with mini-batch mb − 2: its stage and buffer are free.
      if (mb >= 2) barrier_sync(kFwdBarEmpty + (mb & 1), 2 * NT);
      prefetch(mb + 2);
      cp_async_wait<2>();
      Bar()();  // stage mb landed for the state group
      const float* sK = stage(mb);
      const float* sV = sK + L::TILE;
      const float* sQ = sV + L::TILE;
      const float* sL = sQ + L::TILE;
      float* sG = smem + R::OFF_G + (mb & 1) * R::G;
      const int m = min(kMb, T - mb * kMb);
      if (p.ckW && mb % p.group == 0)
        store_lane_state<D>(Wr, cb, p.ckW, p.ckb, std::size_t(blk) * p.n_ck + mb / p.group, col0,
                            gid, tig);
      float z[2][4], zb[2][4];
      lane_z_zbar0<D, SPLIT>(Wr, cb, sK, sQ, gid, tig, z, zb);
      // Z̄₀ to the read-out group, in fragment order.
      float* zbt = smem + R::OFF_ZB + (mb & 1) * R::ZB;
#pragma unroll
      for (int nt = 0; nt < 2; ++nt)
        reinterpret_cast<float4*>(zbt)[nt * NT + rt] =
            make_float4(zb[nt][0], zb[nt][1], zb[nt][2], zb[nt][3]);
      {
        float r[2][4];
        lane_target<D>(p, sK, sV, col0, gid, tig, r);
        lane_loss_grad<D>(p, z, r, gam, bet, gam2, gam2_w, smem + R::OFF_RED8, sG, warp, gid, tig,
                          col0, Bar());
      }
      Bar()();  // G complete
      barrier_arrive(kFwdBarFull + (mb & 1), 2 * NT);

      // W ← W − τ_b Kᵀ diag(λ) G (full mini-batch), or the open accumulator Kᵀ diag(λ) G.
      lane_update<D, SPLIT>(p, blk, m, tb, sK, sL, sG, Wr, cb, col0, gid, tig);
    }
    cp_async_wait<0>();
    lane_finish<D>(p, blk, Wr, cb, rt, col0, gid, tig);
  } else {
    using Bar = GroupBarrier<kFwdBarOut, NT>;
    float* red = smem + R::OFF_RED;
    float* Mp = smem + R::OFF_MP;
    for (int mb = 0; mb < n_mb; ++mb) {
      barrier_sync(kFwdBarFull + (mb & 1), 2 * NT);  // stage mb, G and Z̄₀ of mb
      const float* sK = stage(mb);
      const float* sQ = sK + 2 * L::TILE;
      const float* sL = sQ + L::TILE;
      const float* sG = smem + R::OFF_G + (mb & 1) * R::G;
      const int t0 = mb * kMb, m = min(kMb, T - t0);
      lane_c_partial<D, SPLIT>(sK, sQ, Mp, warp, gid, tig);
      float zb[2][4];
      const float* zbt = smem + R::OFF_ZB + (mb & 1) * R::ZB;
#pragma unroll
      for (int nt = 0; nt < 2; ++nt) {
        const float4 v = reinterpret_cast<const float4*>(zbt)[nt * NT + rt];
        zb[nt][0] = v.x;
        zb[nt][1] = v.y;
        zb[nt][2] = v.z;
        zb[nt][3] = v.w;
      }
      Bar()();  // the C partials complete
      float mc[2][4];
      lane_masked_m<D>(Mp, sL, tau_row, one, gid, tig, mc);
#pragma unroll
      for (int js = 0; js < 2; ++js) {
        const Op4 am = op4<SPLIT>(mc[js][0], mc[js][2], mc[js][1], mc[js][3]);
#pragma unroll
        for (int nt = 0; nt < 2; ++nt) {
          const float* gp = sG + (js * 8 + 2 * tig) * LDG + col0 + nt * 8 + gid;
          mma_parts<SPLIT>(zb[nt], am, op2<SPLIT>(gp[0], gp[LDG]));
        }
      }
      lane_output<D, float>(p, zb, gam, bet, sQ, red, seq0, rs, t0, m, warp, gid, tig, col0, Bar());
      // Every read of stage mb and of buffer mb & 1 is above.
      if (mb + 2 < n_mb) barrier_arrive(kFwdBarEmpty + (mb & 1), 2 * NT);
    }
  }
}

// ---- Version Bf16: bf16 inputs, outputs and products ---------------------------------------------
//
// The kernel above with Q, K, V read and O written as bf16, and every product on bf16 operands
// (mma.sync m16n8k16, fp32 accumulation): a k-step covers 16 of the contraction, so each product
// takes half the mma instructions, and the bf16 tiles are read with ldmatrix (one instruction per
// fragment). The state W, c, both LayerNorms, G, M and every sum stay fp32; W, G and M are rounded to
// bf16 where they enter a product (as a bf16 autocast rounds a weight), and the update accumulates
// into the fp32 W. The contraction runs in its natural order here: W's register layout is already
// a bf16 B fragment (rows 16s + 2t, 2t + 1 and 16s + 8 + 2t, 2t + 1 of two neighbouring n8 tiles).
template <int D>
struct Bf16Layout {
  static constexpr int NW = D / 16, NT = 32 * NW, KT = D / 8, KS = D / 16;
  // K, V, Q rows of D + 8 bf16: 16-byte aligned, and the 8 rows an ldmatrix reads fall on distinct
  // banks (the row stride is 4 words mod 32 at every supported D).
  static constexpr int LDX = D + 8;
  static constexpr int TILE = kMb * LDX;                      // bf16 elements
  static constexpr int STAGE_BYTES = 3 * TILE * 2 + kMb * 4;  // K, V, Q, then λ (fp32)
  static constexpr std::size_t BYTES =
      kStages * STAGE_BYTES +
      (kMb * TcLayout<D>::LDG + TcLayout<D>::RED8 + TcLayout<D>::RED + NW * 16 * TcLayout<D>::LDM) *
          sizeof(float);
  static_assert(STAGE_BYTES % 16 == 0, "stages stay 16-byte aligned");
};

template <int D>
__global__ void __launch_bounds__(2 * D) linear_forward_bf16_kernel(FwdParams p) {
  using L = Bf16Layout<D>;
  using TL = TcLayout<D>;
  constexpr int KT = L::KT, KS = L::KS, LDX = L::LDX, LDG = TL::LDG;
  extern __shared__ __align__(16) float smem[];
  unsigned char* stages = reinterpret_cast<unsigned char*>(smem);
  float* sG = reinterpret_cast<float*>(stages + kStages * L::STAGE_BYTES);
  float* red = sG + kMb * LDG;
  float* Mp = red + TL::RED8 + TL::RED;  // [NW][16][LDM] partial C = Q Kᵀ of each warp

  const int tid = threadIdx.x, lane = tid & 31, warp = tid >> 5, gid = lane >> 2, tig = lane & 3;
  const int blk = blockIdx.x, n = blk / p.H, h = blk % p.H;
  const int T = p.T, n_mb = (T + kMb - 1) / kMb;
  const std::size_t rs = std::size_t(p.H) * D;
  const std::size_t seq0 = std::size_t(n) * T * rs + std::size_t(h) * D;
  const int col0 = warp * 16;
  const float one = p.bias ? 1.0f : 0.0f;

  float Wr[KT][4], cb[2][2], gam[2][2], bet[2][2], gam2[2][2], gam2_w;
  load_lane_state<D>(p, blk, h, col0, gid, tig, Wr, cb, gam, bet, gam2, gam2_w);
  const float tau_row[2] = {p.tau[gid], p.tau[gid + 8]};
  const float tb = p.tau[kMb - 1];

  auto prefetch = [&](int mb) {
    if (mb < n_mb) {
      unsigned char* st = stages + (mb % kStages) * L::STAGE_BYTES;
      const int t0 = mb * kMb, m = min(kMb, T - t0);
      constexpr int CPR = D / 8;  // 16-byte chunks (8 bf16) per row
      for (int i = tid; i < 3 * kMb * CPR; i += L::NT) {
        const int tile = i / (kMb * CPR), rem = i % (kMb * CPR), r = rem / CPR, ch = rem % CPR;
        const std::uint16_t* base = tile == 0 ? p.K16 : (tile == 1 ? p.V16 : p.Q16);
        const std::uint16_t* src = base + seq0 + std::size_t(t0 + min(r, m - 1)) * rs + ch * 8;
        cp_async16(st + 2 * (tile * L::TILE + r * LDX + ch * 8), src, r < m ? 16 : 0);
      }
      if (tid < kMb)
        cp_async4(reinterpret_cast<float*>(st + 6 * L::TILE) + tid,
                  p.lam + std::size_t(blk) * T + t0 + min(tid, m - 1), tid < m ? 4 : 0);
    }
    cp_async_commit();
  };

  // ldmatrix row addresses (lane l gives row l % 8 of matrix l / 8), as byte offsets in a tile:
  //   a_off: matrices (rows 0–7, k 0–7), (rows 8–15, k 0–7), (rows 0–7, k 8–15), (rows 8–15, k 8–15)
  //          of a 16 × 16 slice: a row-major A fragment a0..a3; the same addresses read with .trans
  //          give the B fragments of two n8 tiles of a k-major B (the update's K);
  //   b_off: matrices (rows 0–7, k 0–7), (rows 0–7, k 8–15), (rows 8–15, k 0–7), (rows 8–15, k 8–15):
  //          the B fragments b0, b1 of two n8 tiles whose rows are n (Kᵀ in C = Q Kᵀ).
  const int a_off = 2 * (((lane & 7) + 8 * ((lane >> 3) & 1)) * LDX + 8 * (lane >> 4));
  const int b_off = 2 * (((lane & 7) + 8 * (lane >> 4)) * LDX + 8 * ((lane >> 3) & 1));

  prefetch(0);
  prefetch(1);
  for (int mb = 0; mb < n_mb; ++mb) {
    cp_async_wait<kStages - 2>();
    __syncthreads();  // this stage landed for every thread; the stage of mb − 1 is free
    prefetch(mb + kStages - 1);
    const unsigned char* st = stages + (mb % kStages) * L::STAGE_BYTES;
    const std::uint16_t* sK = reinterpret_cast<const std::uint16_t*>(st);
    const std::uint16_t* sV = sK + L::TILE;
    const std::uint16_t* sQ = sV + L::TILE;
    const float* sL = reinterpret_cast<const float*>(sQ + L::TILE);
    const uint32_t uK = static_cast<uint32_t>(__cvta_generic_to_shared(sK));
    const uint32_t uQ = uK + 4 * L::TILE;
    const int t0 = mb * kMb, m = min(kMb, T - t0);
    if (p.ckW && mb % p.group == 0)
      store_lane_state<D>(Wr, cb, p.ckW, p.ckb, std::size_t(blk) * p.n_ck + mb / p.group, col0, gid,
                          tig);

    // Z = K W and Z̄₀ = Q W, W rounded to bf16 once for both.
    float z[2][4] = {}, zb[2][4] = {};
#pragma unroll
    for (int ks = 0; ks < KS; ++ks) {
      uint32_t ak[4], aq[4];
      mma_detail::ldsm_x4(ak, uK + a_off + 32 * ks);
      mma_detail::ldsm_x4(aq, uQ + a_off + 32 * ks);
#pragma unroll
      for (int nt = 0; nt < 2; ++nt) {
        const uint32_t w0 = pack_bf16(Wr[2 * ks][2 * nt], Wr[2 * ks][2 * nt + 1]);
        const uint32_t w1 = pack_bf16(Wr[2 * ks + 1][2 * nt], Wr[2 * ks + 1][2 * nt + 1]);
        mma_bf16(z[nt], ak, w0, w1);
        mma_bf16(zb[nt], aq, w0, w1);
      }
    }
#pragma unroll
    for (int nt = 0; nt < 2; ++nt)
#pragma unroll
      for (int i = 0; i < 4; ++i) {
        z[nt][i] += cb[nt][i & 1];
        zb[nt][i] += cb[nt][i & 1];
      }
    // This warp's share of C = Q Kᵀ: k-step `warp` (d/16 = NW k-steps in all).
    {
      float mp[2][4] = {};
      uint32_t aq[4], kb[4];
      mma_detail::ldsm_x4(aq, uQ + a_off + 32 * warp);
      mma_detail::ldsm_x4(kb, uK + b_off + 32 * warp);
      mma_bf16(mp[0], aq, kb[0], kb[1]);
      mma_bf16(mp[1], aq, kb[2], kb[3]);
      float* mw = Mp + warp * 16 * TL::LDM;
#pragma unroll
      for (int jt = 0; jt < 2; ++jt)
#pragma unroll
        for (int hf = 0; hf < 2; ++hf)
          *reinterpret_cast<float2*>(mw + (gid + 8 * hf) * TL::LDM + jt * 8 + 2 * tig) =
              make_float2(mp[jt][2 * hf], mp[jt][2 * hf + 1]);
    }
    // G = lnl2(Z, R) at the lane's positions, then into shared memory.
    {
      float r[2][4];
#pragma unroll
      for (int nt = 0; nt < 2; ++nt)
#pragma unroll
        for (int hf = 0; hf < 2; ++hf) {
          const int off = (gid + 8 * hf) * LDX + col0 + nt * 8 + 2 * tig;
          const float2 v = unpack_bf16(*reinterpret_cast<const uint32_t*>(sV + off));
          const float2 k = unpack_bf16(*reinterpret_cast<const uint32_t*>(sK + off));
          r[nt][2 * hf] = p.res ? v.x - k.x : v.x;
          r[nt][2 * hf + 1] = p.res ? v.y - k.y : v.y;
        }
      lane_loss_grad<D>(p, z, r, gam, bet, gam2, gam2_w, red, sG, warp, gid, tig, col0);
    }
    __syncthreads();  // G complete

    // Z̄ = Z̄₀ − M G: M's accumulator fragment is a bf16 A fragment as it stands (k = j in order).
    {
      float mc[2][4];
      lane_masked_m<D>(Mp, sL, tau_row, one, gid, tig, mc);
      const uint32_t am[4] = {pack_bf16(mc[0][0], mc[0][1]), pack_bf16(mc[0][2], mc[0][3]),
                              pack_bf16(mc[1][0], mc[1][1]), pack_bf16(mc[1][2], mc[1][3])};
#pragma unroll
      for (int nt = 0; nt < 2; ++nt) {
        const float* gp = sG + 2 * tig * LDG + col0 + nt * 8 + gid;
        mma_bf16(zb[nt], am, pack_bf16(gp[0], gp[LDG]), pack_bf16(gp[8 * LDG], gp[9 * LDG]));
      }
    }

    // O = [Q +] LN(Z̄), stored as bf16.
    lane_output<D>(p, zb, gam, bet, sQ, red + TL::RED8, seq0, rs, t0, m, warp, gid, tig, col0);

    // W ← W − τ_b Kᵀ diag(λ) G (full mini-batch), or the open accumulator Kᵀ diag(λ) G: the Wᵀ tiles
    // (m = the warp's 16 columns, n = 8 rows of W, k = the 16 tokens in one step).
    const bool full = m == kMb;
    if (full || p.faW) {
      const float scale = full ? -tb : 1.0f;
      float acc[KT][4];
#pragma unroll
      for (int kt = 0; kt < KT; ++kt)
#pragma unroll
        for (int i = 0; i < 4; ++i) acc[kt][i] = full ? Wr[kt][i] : 0.0f;
      const int j0 = 2 * tig, j1 = j0 + 8;
      const float e00 = scale * sL[j0], e01 = scale * sL[j0 + 1], e10 = scale * sL[j1],
                  e11 = scale * sL[j1 + 1];
      const float* g0 = sG + j0 * LDG + col0 + gid;
      const float* g1 = sG + j1 * LDG + col0 + gid;
      const uint32_t ag[4] = {
          pack_bf16(e00 * g0[0], e01 * g0[LDG]), pack_bf16(e00 * g0[8], e01 * g0[LDG + 8]),
          pack_bf16(e10 * g1[0], e11 * g1[LDG]), pack_bf16(e10 * g1[8], e11 * g1[LDG + 8])};
#pragma unroll
      for (int kp = 0; kp < KT / 2; ++kp) {
        uint32_t kb[4];
        ldsm_x4_trans(kb, uK + a_off + 32 * kp);
        mma_bf16(acc[2 * kp], ag, kb[0], kb[1]);
        mma_bf16(acc[2 * kp + 1], ag, kb[2], kb[3]);
      }
      float cacc[2][2];
      lane_bias_sums<D>(sG, sL, col0, gid, tig, cacc);
      lane_commit<D>(p, blk, full, tb, acc, cacc, Wr, cb, col0, gid, tig);
    }
  }
  cp_async_wait<0>();
  lane_finish<D>(p, blk, Wr, cb, tid, col0, gid, tig);
}

template <int D, bool SPLIT>
void launch_tc(const FwdParams& p, int blocks, bool whole_sm, cudaStream_t stream) {
  const std::size_t bytes = whole_sm_bytes(TcLayout<D>::FLOATS * sizeof(float), blocks, whole_sm);
  const void* fn = reinterpret_cast<const void*>(&linear_forward_tc_kernel<D, SPLIT>);
  set_smem_limit(fn, bytes);
  linear_forward_tc_kernel<D, SPLIT><<<blocks, TcLayout<D>::NT, bytes, stream>>>(p);
  TTTLAB_CUDA_CHECK(cudaGetLastError());
}

template <int D, bool SPLIT, int MINB = 1>
void launch_roles(const FwdParams& p, int blocks, bool whole_sm, cudaStream_t stream) {
  const std::size_t bytes =
      whole_sm_bytes(RolesFwdLayout<D>::FLOATS * sizeof(float), blocks, whole_sm);
  const void* fn = reinterpret_cast<const void*>(&linear_forward_roles_kernel<D, SPLIT, MINB>);
  set_smem_limit(fn, bytes);
  linear_forward_roles_kernel<D, SPLIT, MINB><<<blocks, 2 * TcLayout<D>::NT, bytes, stream>>>(p);
  TTTLAB_CUDA_CHECK(cudaGetLastError());
}

template <int D>
void launch_bf16(const FwdParams& p, int blocks, cudaStream_t stream) {
  const std::size_t bytes = Bf16Layout<D>::BYTES;
  const void* fn = reinterpret_cast<const void*>(&linear_forward_bf16_kernel<D>);
  set_smem_limit(fn, bytes);
  linear_forward_bf16_kernel<D><<<blocks, Bf16Layout<D>::NT, bytes, stream>>>(p);
  TTTLAB_CUDA_CHECK(cudaGetLastError());
}

// The two-role form where each block has an SM of its own (head dims up to 64: at 128 the state
// group's registers would not fit beside the read-out group's), and for Tf32 at d = 64 where two
// blocks share one.
template <bool SPLIT>
void dispatch_tc(const FwdParams& p, int d, int blocks, bool whole_sm, bool two_roles,
                 cudaStream_t stream) {
  // Tf32 at d = 64 with up to two blocks per SM (B = 16, H = 12 on 132 SMs): the two-role form
  // under a 128-register cap (8 bytes of spills) shares an SM between two blocks, which is faster
  // at that shape; in 3xTF32 (SPLIT) the same sharing is slower than the one-role kernel
  // (docs/KERNELS.md; `tttlab bench --device cuda` times both).
  if constexpr (!SPLIT)
    if (two_roles && d == 64 && blocks > multiprocessor_count() &&
        blocks <= 2 * multiprocessor_count())
      return launch_roles<64, SPLIT, 2>(p, blocks, whole_sm, stream);
  if (two_roles && blocks <= multiprocessor_count()) switch (d) {
      case 16: return launch_roles<16, SPLIT>(p, blocks, whole_sm, stream);
      case 32: return launch_roles<32, SPLIT>(p, blocks, whole_sm, stream);
      case 64: return launch_roles<64, SPLIT>(p, blocks, whole_sm, stream);
      default: break;
    }
  switch (d) {
    case 16: return launch_tc<16, SPLIT>(p, blocks, whole_sm, stream);
    case 32: return launch_tc<32, SPLIT>(p, blocks, whole_sm, stream);
    case 64: return launch_tc<64, SPLIT>(p, blocks, whole_sm, stream);
    case 128: return launch_tc<128, SPLIT>(p, blocks, whole_sm, stream);
    default:
      throw std::invalid_argument("ttt_linear_forward (tensor cores): unsupported head_dim " + std::to_string(d));
  }
}

bool tensor_core_supports(const TttDims& dims) {
  const int d = dims.head_dim;
  return dims.mini_batch == kMb && (d == 16 || d == 32 || d == 64 || d == 128);
}

// The kernels' parameters from the checked arguments (the tensor-core kernel ignores B, d, b: they
// are its template and grid).
FwdParams forward_params(const TttLinearForwardArgs& a) {
  const TttDims& D = a.dims;
  FwdParams p{};
  set_token_inputs(p, a);
  p.W0 = a.W0;
  p.b0 = a.b0;
  p.O = a.O;
  p.Q16 = a.Q_bf16;
  p.K16 = a.K_bf16;
  p.V16 = a.V_bf16;
  p.O16 = a.O_bf16;
  p.ckW = a.checkpoint_W;
  p.ckb = a.checkpoint_b;
  p.fW = a.final_W;
  p.fb = a.final_b;
  p.faW = a.final_acc_W;
  p.fab = a.final_acc_b;
  set_dims(p, D);
  p.group = a.checkpoint_group > 0 ? a.checkpoint_group : 1;
  p.n_ck = ttt_num_checkpoints(D, p.group);
  set_options(p, a.opt);
  p.per_seq = a.per_sequence_init;
  return p;
}

void linear_forward_simt(const TttLinearForwardArgs& a) {
  const TttDims& D = a.dims;
  const std::size_t bytes = fwd_simt_floats(D.head_dim, D.mini_batch) * sizeof(float);
  const std::size_t limit = max_dynamic_smem();
  require(bytes <= limit, "ttt_linear_forward: head_dim " + std::to_string(D.head_dim) +
                              " with mini_batch " + std::to_string(D.mini_batch) + " needs " +
                              std::to_string(bytes) + " bytes of shared memory per block; the "
                              "device allows " + std::to_string(limit));
  const FwdParams p = forward_params(a);
  set_smem_limit(reinterpret_cast<const void*>(&linear_forward_simt_kernel), bytes);
  linear_forward_simt_kernel<<<D.batch * D.heads, kThreads, bytes, a.stream>>>(p);
  TTTLAB_CUDA_CHECK(cudaGetLastError());
}

void linear_forward_bf16(const TttLinearForwardArgs& a) {
  const FwdParams p = forward_params(a);
  const int blocks = a.dims.batch * a.dims.heads;
  switch (a.dims.head_dim) {
    case 16: return launch_bf16<16>(p, blocks, a.stream);
    case 32: return launch_bf16<32>(p, blocks, a.stream);
    case 64: return launch_bf16<64>(p, blocks, a.stream);
    case 128: return launch_bf16<128>(p, blocks, a.stream);
    default:
      throw std::invalid_argument("ttt_linear_forward (bf16): unsupported head_dim " +
                                  std::to_string(a.dims.head_dim));
  }
}

void linear_forward_tensor_core(const TttLinearForwardArgs& a, bool split) {
  const FwdParams p = forward_params(a);
  const int blocks = a.dims.batch * a.dims.heads;
  if (split)
    dispatch_tc<true>(p, a.dims.head_dim, blocks, a.whole_sm, a.two_roles, a.stream);
  else
    dispatch_tc<false>(p, a.dims.head_dim, blocks, a.whole_sm, a.two_roles, a.stream);
}

}  // namespace
}  // namespace detail

using namespace detail;



int ttt_num_mini_batches(const TttDims& dims) {
  return (dims.seq_len + dims.mini_batch - 1) / dims.mini_batch;
}

int ttt_num_checkpoints(const TttDims& dims, int checkpoint_group) {
  if (checkpoint_group < 1) throw std::invalid_argument("checkpoint_group must be >= 1");
  return (ttt_num_mini_batches(dims) + checkpoint_group - 1) / checkpoint_group;
}

void check_linear_forward_args(const TttLinearForwardArgs& a) {
  const char* fn = "ttt_linear_forward";
  check_dims(fn, a.dims);
  check_eps(fn, a.opt);
  const bool bf16_io = a.version == TttLinearForwardVersion::Bf16;
  const bool any16 = a.Q_bf16 || a.K_bf16 || a.V_bf16 || a.O_bf16;
  if (bf16_io) {
    require(
        !a.Q && !a.K && !a.V && !a.O,
        "ttt_linear_forward: version Bf16 reads Q_bf16, K_bf16, V_bf16 and writes O_bf16; Q, K, V "
        "and O must be null");
    check_ptr(fn, a.Q_bf16, "Q_bf16");
    check_ptr(fn, a.K_bf16, "K_bf16");
    check_ptr(fn, a.V_bf16, "V_bf16");
    check_ptr(fn, a.O_bf16, "O_bf16");
  } else {
    require(!any16,
            "ttt_linear_forward: Q_bf16, K_bf16, V_bf16 and O_bf16 are for version Bf16 only");
    check_ptr(fn, a.Q, "Q");
    check_ptr(fn, a.K, "K");
    check_ptr(fn, a.V, "V");
    check_ptr(fn, a.O, "O");
  }
  check_ptr(fn, a.lambda, "lambda");
  check_ptr(fn, a.tau, "tau");
  check_ptr(fn, a.W0, "W0");
  if (a.opt.bias) check_ptr(fn, a.b0, "b0 (bias is on)");
  check_ln_params(fn, a);
  if (a.checkpoint_W || a.checkpoint_b) {
    require(a.checkpoint_group >= 1, "ttt_linear_forward: checkpoint_group must be >= 1 when "
                                     "checkpoints are requested");
    check_ptr(fn, a.checkpoint_W, "checkpoint_W (checkpoint_b is set)");
  }
  if (a.final_acc_b) check_ptr(fn, a.final_acc_W, "final_acc_W (final_acc_b is set)");
}

bool ttt_linear_forward_supports(TttLinearForwardVersion version, const TttDims& dims) {
  switch (version) {
    case TttLinearForwardVersion::Default:
    case TttLinearForwardVersion::Fallback:
      return true;
    case TttLinearForwardVersion::Tf32:
    case TttLinearForwardVersion::Bf16: return tensor_core_supports(dims);
  }
  return false;
}

void ttt_linear_forward(const TttLinearForwardArgs& a) {
  check_linear_forward_args(a);
  const bool aligned = aligned16(a.Q) && aligned16(a.K) && aligned16(a.V) && aligned16(a.O);
  switch (a.version) {
    case TttLinearForwardVersion::Default:
      if (tensor_core_supports(a.dims) && aligned)
        linear_forward_tensor_core(a, /*split=*/true);
      else
        linear_forward_simt(a);
      return;
    case TttLinearForwardVersion::Fallback:
      linear_forward_simt(a);
      return;
    case TttLinearForwardVersion::Tf32:
      require(tensor_core_supports(a.dims),
              "ttt_linear_forward: version Tf32 needs mini_batch 16 and head_dim 16, 32, 64 or 128 (got "
              "head_dim " + std::to_string(a.dims.head_dim) + ", mini_batch " +
                  std::to_string(a.dims.mini_batch) + ")");
      require(aligned, "ttt_linear_forward: version Tf32 needs Q, K, V and O 16-byte aligned");
      linear_forward_tensor_core(a, /*split=*/false);
      return;
    case TttLinearForwardVersion::Bf16:
      require(tensor_core_supports(a.dims),
              "ttt_linear_forward: version Bf16 needs mini_batch 16 and head_dim 16, 32, 64 or 128 "
              "(got "
              "head_dim " +
                  std::to_string(a.dims.head_dim) + ", mini_batch " +
                  std::to_string(a.dims.mini_batch) + ")");
      require(
          aligned16(a.Q_bf16) && aligned16(a.K_bf16) && aligned16(a.V_bf16) && aligned16(a.O_bf16),
          "ttt_linear_forward: version Bf16 needs Q_bf16, K_bf16, V_bf16 and O_bf16 16-byte "
          "aligned");
      linear_forward_bf16(a);
      return;
  }
  require(false, "ttt_linear_forward: unknown version " + std::to_string(int(a.version)));
}

}  // namespace tttlab::kernels
