// Causal softmax attention on Hopper's warpgroup products (wgmma) and tensor memory accelerator,
// bf16 operands and fp32 accumulation, forward and backward: the functions flash_attention.cu's
// mma.sync kernels compute, with the same rounding points (P, Pᵀ, dSᵀ and dS to bf16 where they
// enter a product, O to bf16 on output), at a higher rate on compute capability 9.0. Compiled for
// sm_90a only; ops/wgmma.cuh says how the shared-memory tiles are laid out and described.
//
// Every kernel here is one warpgroup (4 warps, 128 threads) per block owning 64 rows; warp w holds
// rows 16w .. 16w + 15 of every 64-row product, as the accumulator layout fixes, so each row's
// reductions stay in a quad of lanes as in the mma.sync kernels. Several blocks share a
// multiprocessor (their number is each kernel's MINB), so one block's softmax runs while another's
// products occupy the tensor cores. The scores are in log2 units as in flash_attention.cu.
//
// Forward at d = 64 (flash_forward_sm90_tma): 64 queries per block, Q loaded once; 64-key tiles of
// K in three stages and of V in two, brought by bulk tensor copies that one thread issues;
// software-pipelined so the warpgroup's products overlap its own softmax; four blocks per
// multiprocessor. At d = 128 (flash_forward_sm90_pipe) the same
// pipeline is fed by cp.async: three TMA stages of 128-wide tiles leave room for one block per
// multiprocessor only, which measured slower.
#include <cuda.h>  // CUtensorMap; the encode function comes through the runtime, nothing links libcuda
#include <cudaTypedefs.h>
#include <cuda_runtime.h>

#include <cmath>
#include <cstdint>
#include <stdexcept>
#include <string>

#include "common/cuda_check.hpp"
#include "common/launch.hpp"
#include "ops/flash_attention_sm90a.hpp"
#include "ops/wgmma.cuh"
#include "ttt/ttt_mma.cuh"

namespace tttlab::kernels::detail {
namespace {

using namespace wgmma;

constexpr float kLn2Sm90 = 0.6931471805599453f, kLog2eSm90 = 1.4426950408889634f;

// Rows r0 .. r0 + ROWS − 1 (of T) of a [T, ld] bf16 matrix, D columns, into the swizzled tile at
// shared address S: D/64 tiles of ROWS × 64, row r's chunk c at chunk c ^ (r mod 8). Rows ≥ T as
// zeros (cp.async reads nothing for them; its address is still row 0's).
template <int ROWS, int D, int NT>
__device__ __forceinline__ void load_swizzled(std::uint32_t S, const std::uint16_t* G, int r0,
                                              int T, long ld) {
  constexpr int kChunks = D / 8;
#pragma unroll
  for (int it = 0; it < (ROWS * kChunks + NT - 1) / NT; ++it) {
    const int idx = int(threadIdx.x) + it * NT;
    if (ROWS * kChunks % NT != 0 && idx >= ROWS * kChunks) break;
    const int r = idx / kChunks, c = idx % kChunks;
    const std::uint32_t dst =
        S + std::uint32_t((c >> 3) * ROWS * 128 + r * 128 + (((c & 7) ^ (r & 7)) << 4));
    const bool ok = r0 + r < T;
    const std::uint16_t* src = G + long(ok ? r0 + r : 0) * ld + c * 8;
    asm volatile("cp.async.cg.shared.global [%0], [%1], 16, %2;\n" ::"r"(dst), "l"(src),
                 "r"(ok ? 16 : 0));
  }
}

// ---- the tensor memory accelerator's copies and their mbarriers ---------------------------------
__device__ __forceinline__ void mbar_init(std::uint32_t bar, int count) {
  asm volatile("mbarrier.init.shared::cta.b64 [%0], %1;\n" ::"r"(bar), "r"(count) : "memory");
}
__device__ __forceinline__ void mbar_expect(std::uint32_t bar, std::uint32_t bytes) {
  asm volatile("mbarrier.arrive.expect_tx.shared::cta.b64 _, [%0], %1;\n" ::"r"(bar), "r"(bytes)
               : "memory");
}
__device__ __forceinline__ void mbar_wait(std::uint32_t bar, std::uint32_t parity) {
  std::uint32_t done = 0;
  do {
    asm volatile(
        "{\n.reg .pred p;\nmbarrier.try_wait.parity.shared::cta.b64 p, [%1], %2;\n"
        "selp.u32 %0, 1, 0, p;\n}\n"
        : "=r"(done)
        : "r"(bar), "r"(parity)
        : "memory");
  } while (!done);
}
// Box (64 columns from c0, rows r0 .., sequence n) of the [B, T, H·d] tensor `map` describes.
__device__ __forceinline__ void tma_load(std::uint32_t dst, const CUtensorMap* map, int c0, int r0,
                                         int n, std::uint32_t bar) {
  asm volatile(
      "cp.async.bulk.tensor.3d.shared::cluster.global.tile.mbarrier::complete_tx::bytes "
      "[%0], [%1, {%2, %3, %4}], [%5];\n" ::"r"(dst),
      "l"(reinterpret_cast<std::uint64_t>(map)), "r"(c0), "r"(r0), "r"(n), "r"(bar)
      : "memory");
}

// ---- one warpgroup per block, software-pipelined ------------------------------------------------
// The forward, with the warpgroup's own tensor-core work overlapping its softmax: while the
// softmax of tile j + 1 runs on the CUDA cores, the product O += P_j V_j is still in flight, and
// while P_j V_j is issued, S_{j+1} = Q K_{j+1}ᵀ is too. P is double-buffered in registers (an
// in-flight product still reads its A registers); O is rescaled only after P_j V_j has landed. K and
// V stream through three stages (cp.async here, bulk tensor copies in the kernel after this one), so
// tile j + 2 loads while tiles j and j + 1 are read.
template <int BN>
struct SoftmaxState {
  float m[2] = {-INFINITY, -INFINITY}, l[2] = {0.f, 0.f};
};

// Scores s of keys k0 .. k0 + BN − 1 → P (bf16 A fragments) and the factor alpha the accumulated O
// must be multiplied by; m, l updated. Masking where a key lies past a row or past T.
// EDGE: the tile has keys past some of its rows or past T (the diagonal tile, the last one); the
// others run without the mask's comparisons.
template <int BN, bool EDGE>
__device__ __forceinline__ void softmax_tile(const float (&s)[BN / 2],
                                             std::uint32_t (&a)[BN / 16][4], SoftmaxState<BN>& st,
                                             float (&alpha)[2], int k0, int row_base, int T, int t,
                                             float scale_l2) {
  constexpr int NS = BN / 8;
  // s is only read. It is the accumulator of S_{j+1} = Q Kᵀ, and an ordinary instruction writing
  // it (the mask did) while P_j V_j is in flight makes ptxas serialize every wgmma of the kernel
  // (its warning C7515; docs/KERNELS.md has what that cost).
  const auto score = [&](int i, int e) {
    if constexpr (EDGE) {
      const int key = k0 + 8 * i + 2 * t + (e & 1), row = row_base + 8 * (e >> 1);
      if (key > row || key >= T) return -INFINITY;
    }
    return s[4 * i + e];
  };
  float mx[2] = {-INFINITY, -INFINITY};
#pragma unroll
  for (int i = 0; i < NS; ++i)
#pragma unroll
    for (int e = 0; e < 4; ++e) mx[e >> 1] = fmaxf(mx[e >> 1], score(i, e));
  float ms[2];
#pragma unroll
  for (int r = 0; r < 2; ++r) {
    const float mn = fmaxf(st.m[r], quad_max(mx[r] * scale_l2));
    alpha[r] = exp2_fast(st.m[r] - mn);  // m = −∞ on the first tile: 0
    st.m[r] = mn;
    ms[r] = -mn;
    st.l[r] *= alpha[r];
  }
#pragma unroll
  for (int i = 0; i < NS; ++i) {
    float pe[4];
#pragma unroll
    for (int e = 0; e < 4; ++e) {
      pe[e] = exp2_fast(fmaf(score(i, e), scale_l2, ms[e >> 1]));
      st.l[e >> 1] += pe[e];
    }
    a[i / 2][2 * (i & 1)] = pack_bf16(pe[0], pe[1]);
    a[i / 2][2 * (i & 1) + 1] = pack_bf16(pe[2], pe[3]);
  }
}

template <int D, int BN>
__device__ __forceinline__ void issue_s(float (&s)[BN / 2], std::uint32_t sQ, std::uint32_t Kt) {
#pragma unroll
  for (int ks = 0; ks < D / 16; ++ks)
    wgmma_ss<BN>(s, desc_sw128(sQ + std::uint32_t((ks / 4) * 64 * 128 + (ks % 4) * 32)),
                 desc_sw128(Kt + std::uint32_t((ks / 4) * BN * 128 + (ks % 4) * 32)),
                 ks > 0 ? 1 : 0);
}

template <int D, int BN>
__device__ __forceinline__ void issue_pv(float (&o)[D / 64][32],
                                         const std::uint32_t (&a)[BN / 16][4], std::uint32_t Vt) {
#pragma unroll
  for (int kk = 0; kk < BN / 16; ++kk)
#pragma unroll
    for (int hv = 0; hv < D / 64; ++hv)
      wgmma_rs_tb<64>(o[hv], a[kk], desc_sw128(Vt + std::uint32_t(hv * BN * 128 + kk * 16 * 128)));
}

template <int D, int BN>
constexpr std::size_t pipe_smem_bytes() {
  return std::size_t(64 + 6 * BN) * D * 2 + 1024;
}

// The pipeline both forward kernels run once Q and tile 0 are in shared memory: S_0, its softmax,
// then iteration j with P_j in pcur: tile j + 2 requested (prefetch), tile j + 1 awaited (ready),
// S_{j+1} and P_j V_j issued, the softmax of j + 1 into pnext while P_j V_j is in flight, O rescaled
// once it has landed. Then O / l to bf16 and the lse. The two kernels differ only in how tiles come.
// VST: V's stages, 3 (V_j arrives with K_j: ready(j) covers both) or 2 (V_j has a stage of its own
// pair: ready_v(j) waits for it before P_j V_j is issued, and free_v(j) is called once P_j V_j has
// landed, when V_j's stage may be refilled).
struct NoHook {
  __device__ __forceinline__ void operator()(int) const {}
};
template <int D, int BN, int VST = 3, class Prefetch, class Ready, class ReadyV = NoHook,
          class FreeV = NoHook>
__device__ __forceinline__ void forward_pipeline(const FlashSm90Forward& p, std::uint32_t sQ,
                                                 std::uint32_t sK, std::uint32_t sV, int q0,
                                                 int nkt, long base, long ld, int n, int h,
                                                 int row_base, int t, Prefetch prefetch,
                                                 Ready ready, ReadyV ready_v = {},
                                                 FreeV free_v = {}) {
  static_assert(VST == 2 || VST == 3, "V in two or three stages");
  constexpr int HV = D / 64;
  constexpr std::uint32_t kTileKV = BN * D * 2;
  const int T = p.T;
  const auto Kst = [&](int j) { return sK + std::uint32_t(j % 3) * kTileKV; };
  const auto Vst = [&](int j) { return sV + std::uint32_t(j % VST) * kTileKV; };

  float o[HV][32];
#pragma unroll
  for (int hv = 0; hv < HV; ++hv)
#pragma unroll
    for (int i = 0; i < 32; ++i) o[hv][i] = 0.f;
  float s[BN / 2];
#pragma unroll
  for (int i = 0; i < BN / 2; ++i) s[i] = 0.f;
  std::uint32_t pa[BN / 16][4], pb[BN / 16][4];
  SoftmaxState<BN> st;
  float alpha[2];

  fence();
  issue_s<D, BN>(s, sQ, Kst(0));
  commit();
  wait<0>();
  fence_regs(s);
  const auto softmax = [&](std::uint32_t(&pdst)[BN / 16][4], float(&al)[2], int k0) {
    if (k0 + BN - 1 > q0 || k0 + BN > T)
      softmax_tile<BN, true>(s, pdst, st, al, k0, row_base, T, t, p.scale_l2);
    else
      softmax_tile<BN, false>(s, pdst, st, al, k0, row_base, T, t, p.scale_l2);
  };
  softmax(pa, alpha, 0);

  const auto step = [&](int j, std::uint32_t(&pcur)[BN / 16][4],
                        std::uint32_t(&pnext)[BN / 16][4]) {
    prefetch(j);
    const bool more = j + 1 < nkt;
    if (more) ready(j + 1);
    fence();
    if (more) {
      issue_s<D, BN>(s, sQ, Kst(j + 1));
      commit();
    }
    ready_v(j);
    issue_pv<D, BN>(o, pcur, Vst(j));
    commit();
    if (more) {
      wait<1>();
      fence_regs(s);
      float al[2];
      softmax(pnext, al, (j + 1) * BN);
      wait<0>();
      free_v(j);
#pragma unroll
      for (int hv = 0; hv < HV; ++hv) {
        fence_regs(o[hv]);
#pragma unroll
        for (int i = 0; i < 32; ++i) o[hv][i] *= al[(i >> 1) & 1];
      }
    } else {
      wait<0>();
#pragma unroll
      for (int hv = 0; hv < HV; ++hv) fence_regs(o[hv]);
    }
    fence_regs(pcur);
  };
  for (int j = 0; j < nkt; j += 2) {
    step(j, pa, pb);
    if (j + 1 < nkt) step(j + 1, pb, pa);
  }

#pragma unroll
  for (int r = 0; r < 2; ++r) {
    const float lr = quad_sum(st.l[r]);
    const int row = row_base + 8 * r;
    if (row < T) {
      const float inv = 1.f / lr;
      std::uint16_t* out = p.O + base + long(row) * ld;
#pragma unroll
      for (int hv = 0; hv < HV; ++hv)
#pragma unroll
        for (int i = 0; i < 8; ++i)
          *reinterpret_cast<std::uint32_t*>(out + 64 * hv + 8 * i + 2 * t) =
              pack_bf16(o[hv][4 * i + 2 * r] * inv, o[hv][4 * i + 2 * r + 1] * inv);
      if (p.lse && t == 0) p.lse[(long(n) * p.H + h) * T + row] = (st.m[r] + log2f(lr)) * kLn2Sm90;
    }
  }
}

// Where a forward block works: query tile qt (launched longest first) of head h of sequence n, its
// rows in the [B, T, H·d] tensors, this thread's rows (row_base, + 8) and quad lane t, and the
// number of BN-key tiles up to the tile's diagonal.
template <int D, int BN>
struct ForwardBlock {
  int n, h, q0, row_base, t, nkt;
  long ld, base;
  __device__ __forceinline__ explicit ForwardBlock(const FlashSm90Forward& p) {
    const int T = p.T, qtiles = (T + 63) / 64, qt = qtiles - 1 - int(blockIdx.x);
    n = int(blockIdx.y) / p.H;
    h = int(blockIdx.y) % p.H;
    ld = long(p.H) * D;
    base = long(n) * T * ld + long(h) * D;
    q0 = qt * 64;
    const int warp = int(threadIdx.x) / 32, lane = int(threadIdx.x) % 32;
    t = lane % 4;
    row_base = q0 + 16 * warp + lane / 4;
    nkt = (min(q0 + 64, T) - 1) / BN + 1;
  }
};

template <int D, int BN, int MINB>
__global__ void __launch_bounds__(128, MINB) flash_forward_sm90_pipe(const FlashSm90Forward p) {
#if defined(__CUDA_ARCH_FEAT_SM90_ALL)
  constexpr std::uint32_t kTileQ = 64 * D * 2, kTileKV = BN * D * 2;
  extern __shared__ std::uint8_t smem_raw[];
  const std::uint32_t sQ =
      (static_cast<std::uint32_t>(__cvta_generic_to_shared(smem_raw)) + 1023u) & ~1023u;
  const std::uint32_t sK = sQ + kTileQ, sV = sK + 3 * kTileKV;

  const ForwardBlock<D, BN> b(p);
  const int T = p.T, n = b.n, h = b.h, q0 = b.q0, nkt = b.nkt;
  const long ld = b.ld, base = b.base;
  const auto Kst = [&](int j) { return sK + std::uint32_t(j % 3) * kTileKV; };
  const auto Vst = [&](int j) { return sV + std::uint32_t(j % 3) * kTileKV; };

  load_swizzled<64, D, 128>(sQ, p.Q + base, q0, T, ld);
  load_swizzled<BN, D, 128>(Kst(0), p.K + base, 0, T, ld);
  load_swizzled<BN, D, 128>(Vst(0), p.V + base, 0, T, ld);
  cp_async_commit();
  if (nkt > 1) {
    load_swizzled<BN, D, 128>(Kst(1), p.K + base, BN, T, ld);
    load_swizzled<BN, D, 128>(Vst(1), p.V + base, BN, T, ld);
  }
  cp_async_commit();
  cp_async_wait<1>();
  fence_async_smem();
  __syncthreads();

  forward_pipeline<D, BN>(
      p, sQ, sK, sV, q0, nkt, base, ld, n, h, b.row_base, b.t,
      [&](int j) {
        if (j + 2 < nkt) {
          load_swizzled<BN, D, 128>(Kst(j + 2), p.K + base, (j + 2) * BN, T, ld);
          load_swizzled<BN, D, 128>(Vst(j + 2), p.V + base, (j + 2) * BN, T, ld);
        }
        cp_async_commit();
      },
      [&](int) {
        cp_async_wait<1>();  // tile j + 1 is in
        fence_async_smem();
        __syncthreads();
      });
#else
  (void)p;
  __trap();
#endif
}

template <int D, int BN, int MINB>
void launch_pipe(const FlashSm90Forward& a) {
  const auto kernel = flash_forward_sm90_pipe<D, BN, MINB>;
  constexpr std::size_t smem = pipe_smem_bytes<D, BN>();
  allow_shared_memory(kernel, smem);
  const dim3 grid(unsigned((a.T + 63) / 64), unsigned(a.B * a.H));
  kernel<<<grid, 128, smem, a.stream>>>(a);
  TTTLAB_CUDA_CHECK(cudaGetLastError());
}

// ---- the same pipeline fed by the tensor memory accelerator -------------------------------------
// One thread issues each tile's bulk tensor copies (cp.async.bulk.tensor, 64-column boxes written
// in the 128-byte swizzle the descriptors name, rows past T zero-filled); the warpgroup waits on the
// stage's mbarrier. No thread computes a load address and no block barrier is needed per tile.
// K has three stages and V two, each stage with its own mbarrier: K_{j+2} is requested at the start
// of iteration j, into the stage S_{j−1} = Q K_{j−1}ᵀ read (complete since iteration j − 1), and
// V_{j+2} once P_j V_j has landed, into V_j's stage (a wgmma wait completes the product for the whole
// warpgroup, so thread 0's wait suffices). That is 49 KB at d = 64, four blocks per
// multiprocessor; with V in three stages too (58 KB, three blocks) the forward took 3–7 % longer
// on an H200 at T = 2k and 32k. Two warpgroups sharing each K and V tile (128 queries per block),
// with or without turns at the tensor cores, measured 9–27 % slower (docs/KERNELS.md, "Attention
// baselines").
struct TmaMaps {
  CUtensorMap q, k, v;
};

template <int D>
constexpr std::size_t tma_smem_bytes() {
  return std::size_t(64 + 5 * 64) * D * 2 + 1024 + 64;
}

template <int D, int MINB>
__global__ void __launch_bounds__(128, MINB)
    flash_forward_sm90_tma(const __grid_constant__ TmaMaps maps, const FlashSm90Forward p) {
#if defined(__CUDA_ARCH_FEAT_SM90_ALL)
  constexpr int BN = 64, HV = D / 64;
  constexpr std::uint32_t kTileQ = 64 * D * 2, kTileKV = BN * D * 2;
  extern __shared__ std::uint8_t smem_raw[];
  const std::uint32_t sQ =
      (static_cast<std::uint32_t>(__cvta_generic_to_shared(smem_raw)) + 1023u) & ~1023u;
  const std::uint32_t sK = sQ + kTileQ, sV = sK + 3 * kTileKV, bars = sV + 2 * kTileKV;
  // bars: [0..2] K's stages ("K_j is in"), [3] Q's, [4..5] V's stages.

  const ForwardBlock<D, BN> b(p);
  const int n = b.n, h = b.h, q0 = b.q0, nkt = b.nkt;
  const long ld = b.ld, base = b.base;
  const auto kbar = [&](int j) { return bars + std::uint32_t(j % 3) * 8; };
  const auto vbar = [&](int j) { return bars + 32 + std::uint32_t(j % 2) * 8; };
  const auto load_k = [&](int j) {
    mbar_expect(kbar(j), kTileKV);
#pragma unroll
    for (int hv = 0; hv < HV; ++hv)
      tma_load(sK + std::uint32_t(j % 3) * kTileKV + hv * BN * 128, &maps.k, h * D + 64 * hv,
               j * BN, n, kbar(j));
  };
  const auto load_v = [&](int j) {
    mbar_expect(vbar(j), kTileKV);
#pragma unroll
    for (int hv = 0; hv < HV; ++hv)
      tma_load(sV + std::uint32_t(j % 2) * kTileKV + hv * BN * 128, &maps.v, h * D + 64 * hv,
               j * BN, n, vbar(j));
  };

  if (threadIdx.x == 0) {
    for (int i = 0; i < 6; ++i) mbar_init(bars + 8 * i, 1);
    asm volatile("fence.mbarrier_init.release.cluster;\n" ::: "memory");
  }
  __syncthreads();
  if (threadIdx.x == 0) {
    mbar_expect(bars + 24, kTileQ);
#pragma unroll
    for (int hv = 0; hv < HV; ++hv)
      tma_load(sQ + hv * 64 * 128, &maps.q, h * D + 64 * hv, q0, n, bars + 24);
    load_k(0);
    load_v(0);
    if (nkt > 1) {
      load_k(1);
      load_v(1);
    }
  }

  mbar_wait(bars + 24, 0);
  mbar_wait(kbar(0), 0);
  forward_pipeline<D, BN, 2>(
      p, sQ, sK, sV, q0, nkt, base, ld, n, h, b.row_base, b.t,
      [&](int j) {
        if (threadIdx.x == 0 && j + 2 < nkt) load_k(j + 2);
      },
      [&](int j) { mbar_wait(kbar(j), std::uint32_t((j / 3) & 1)); },
      [&](int j) { mbar_wait(vbar(j), std::uint32_t((j / 2) & 1)); },
      [&](int j) {
        if (threadIdx.x == 0 && j + 2 < nkt) load_v(j + 2);
      });
#else
  (void)maps;
  (void)p;
  __trap();
#endif
}

// The [B, T, H·d] bf16 tensor at X as a 3-d tensor map (columns, rows, sequences) with 64 × 64 boxes
// in the 128-byte swizzle; rows past T read as zeros.
CUtensorMap make_map(const std::uint16_t* X, int B, int T, int H, int d) {
  using Encode = PFN_cuTensorMapEncodeTiled_v12000;
  static const Encode encode = [] {
    void* fn = nullptr;
    cudaDriverEntryPointQueryResult q{};
    TTTLAB_CUDA_CHECK(cudaGetDriverEntryPointByVersion("cuTensorMapEncodeTiled", &fn, 12000,
                                                       cudaEnableDefault, &q));
    if (q != cudaDriverEntryPointSuccess || !fn)
      throw std::runtime_error("flash_forward_sm90: the driver has no cuTensorMapEncodeTiled");
    return reinterpret_cast<Encode>(fn);
  }();
  CUtensorMap m{};
  const cuuint64_t dims[3] = {cuuint64_t(H) * d, cuuint64_t(T), cuuint64_t(B)};
  const cuuint64_t strides[2] = {cuuint64_t(H) * d * 2, cuuint64_t(T) * H * d * 2};
  const cuuint32_t box[3] = {64, 64, 1}, estr[3] = {1, 1, 1};
  const CUresult r =
      encode(&m, CU_TENSOR_MAP_DATA_TYPE_BFLOAT16, 3, const_cast<std::uint16_t*>(X), dims, strides,
             box, estr, CU_TENSOR_MAP_INTERLEAVE_NONE, CU_TENSOR_MAP_SWIZZLE_128B,
             CU_TENSOR_MAP_L2_PROMOTION_L2_128B, CU_TENSOR_MAP_FLOAT_OOB_FILL_NONE);
  if (r != CUDA_SUCCESS)
    throw std::runtime_error("flash_forward_sm90: cuTensorMapEncodeTiled failed (" +
                             std::to_string(int(r)) + ")");
  return m;
}

// ---- backward ---------------------------------------------------------------------------------------
// FlashAttention-2's backward without atomics, as flash_attention.cu's mma.sync kernels do it (same
// function, same rounding points: Pᵀ, dSᵀ and dS rounded to bf16 where they enter their products),
// with every product on wgmma and the streamed tiles brought in by the tensor memory accelerator.
// Both kernels: one warpgroup per block, 64 rows of their own (keys, or queries), the other side's
// 64-row tiles through STAGES stages; thread 0 issues tile i + STAGES − 1 at the start of iteration
// i, into the stage tile i − 1 used, whose products had all completed in iteration i − 1.
// The swizzled [64 × d] tiles serve both ways: K-major where the contraction runs over d (Sᵀ = K Qᵀ,
// dPᵀ = V dOᵀ, S = Q Kᵀ, dP = dO Vᵀ), MN-major where it runs over the rows (dV += Pᵀ dO,
// dK += dSᵀ Q, dQ += dS K).
template <int D>
__device__ __forceinline__ void issue_ss64(float (&acc)[32], std::uint32_t A, std::uint32_t B) {
#pragma unroll
  for (int ks = 0; ks < D / 16; ++ks) {
    const std::uint32_t off = std::uint32_t((ks / 4) * 64 * 128 + (ks % 4) * 32);
    wgmma_ss<64>(acc, desc_sw128(A + off), desc_sw128(B + off), ks > 0 ? 1 : 0);
  }
}
// acc[hv] += a · Y, a: 64 × 64 bf16 fragments (4 k-steps), Y: the [64 × D] tile at Y (MN-major).
template <int D>
__device__ __forceinline__ void issue_rs64(float (&acc)[D / 64][32], const std::uint32_t (&a)[4][4],
                                           std::uint32_t Y) {
#pragma unroll
  for (int kk = 0; kk < 4; ++kk)
#pragma unroll
    for (int hv = 0; hv < D / 64; ++hv)
      wgmma_rs_tb<64>(acc[hv], a[kk], desc_sw128(Y + std::uint32_t(hv * 64 * 128 + kk * 16 * 128)));
}
// The fp32 accumulator (rows of 64) × scale into the [T, H·D] fp32 matrix at G (row stride ld), rows
// r0 + 16·warp + g (+ 8) below T.
template <int D>
__device__ __forceinline__ void store_rows(float* G, long ld, const float (&acc)[D / 64][32],
                                           int row_base, int T, int t, float scale) {
#pragma unroll
  for (int r = 0; r < 2; ++r) {
    const int row = row_base + 8 * r;
    if (row >= T) continue;
    float* out = G + long(row) * ld;
#pragma unroll
    for (int hv = 0; hv < D / 64; ++hv)
#pragma unroll
      for (int i = 0; i < 8; ++i)
        *reinterpret_cast<float2*>(out + 64 * hv + 8 * i + 2 * t) =
            make_float2(acc[hv][4 * i + 2 * r] * scale, acc[hv][4 * i + 2 * r + 1] * scale);
  }
}
__device__ __forceinline__ void pack_tile(std::uint32_t (&a)[4][4], int i, const float (&v)[4]) {
  a[i / 2][2 * (i & 1)] = pack_bf16(v[0], v[1]);
  a[i / 2][2 * (i & 1) + 1] = pack_bf16(v[2], v[3]);
}

// Rows r0 .. r0 + 63 of two [B, T, H·d] tensors (head h, sequence n) into two swizzled [64 × D] tiles,
// both completing on one mbarrier; by one thread.
template <int D>
__device__ __forceinline__ void load_tile_pair(std::uint32_t dstA, const CUtensorMap* A,
                                               std::uint32_t dstB, const CUtensorMap* B, int h,
                                               int r0, int n, std::uint32_t bar) {
  mbar_expect(bar, 2 * 64 * D * 2);
#pragma unroll
  for (int hv = 0; hv < D / 64; ++hv) {
    tma_load(dstA + hv * 64 * 128, A, h * D + 64 * hv, r0, n, bar);
    tma_load(dstB + hv * 64 * 128, B, h * D + 64 * hv, r0, n, bar);
  }
}
// mbarriers [0, count) at bars, one arrival each, made visible to the block's threads.
__device__ __forceinline__ void init_barriers(std::uint32_t bars, int count) {
  if (threadIdx.x == 0) {
    for (int i = 0; i < count; ++i) mbar_init(bars + 8 * i, 1);
    asm volatile("fence.mbarrier_init.release.cluster;\n" ::: "memory");
  }
  __syncthreads();
}

struct BwdMaps {
  CUtensorMap q, k, v, dO;
};

// dK and dV: block kt owns keys 64·kt .. (warp w: 16 of them), and walks the query tiles from its
// diagonal to the end. Sᵀ = K Qᵀ, Pᵀ = 2^(Sᵀ·log2e/√d − lse₂[q]), dPᵀ = V dOᵀ, dSᵀ = Pᵀ ⊙ (dPᵀ − δ[q]),
// dV += Pᵀ dO, dK += dSᵀ Q / √d. Columns (queries) past T get lse₂ = +∞, so P = 0 there.
template <int D, int STAGES, int MINB>
__global__ void __launch_bounds__(128, MINB)
    flash_dkdv_sm90(const __grid_constant__ BwdMaps maps, const FlashSm90Backward p) {
#if defined(__CUDA_ARCH_FEAT_SM90_ALL)
  constexpr std::uint32_t kTile = 64 * D * 2;
  extern __shared__ std::uint8_t smem_raw[];
  const std::uint32_t sK =
      (static_cast<std::uint32_t>(__cvta_generic_to_shared(smem_raw)) + 1023u) & ~1023u;
  const std::uint32_t sV = sK + kTile, sQ = sV + kTile, sdO = sQ + STAGES * kTile,
                      bars = sdO + STAGES * kTile;  // [0, STAGES): stage i is in; [STAGES]: K, V
  const int T = p.T, kt = int(blockIdx.x), k0 = 64 * kt;
  const int n = int(blockIdx.y) / p.H, h = int(blockIdx.y) % p.H;
  const long ld = long(p.H) * D;
  const long rbase = (long(n) * p.H + h) * T;  // this head's rows of lse and δ
  const int warp = int(threadIdx.x) / 32, lane = int(threadIdx.x) % 32, g = lane / 4, t = lane % 4;
  const int key_base = k0 + 16 * warp + g;
  const int count = (T - 1) / 64 - kt + 1;  // query tiles kt .. last
  // A thread's columns come in pairs (even, odd): where T is even and lse and δ start 8-byte
  // aligned, every pair's two values are one 8-byte load.
  const bool pairs =
      T % 2 == 0 &&
      ((reinterpret_cast<std::uintptr_t>(p.lse) | reinterpret_cast<std::uintptr_t>(p.delta)) &
       7u) == 0;
  const auto bar = [&](int it) { return bars + std::uint32_t(it % STAGES) * 8; };
  const auto stage = [&](int it) { return std::uint32_t(it % STAGES) * kTile; };
  const auto load = [&](int it) {
    load_tile_pair<D>(sQ + stage(it), &maps.q, sdO + stage(it), &maps.dO, h, 64 * (kt + it), n,
                      bar(it));
  };
  init_barriers(bars, STAGES + 1);
  if (threadIdx.x == 0) {
    load_tile_pair<D>(sK, &maps.k, sV, &maps.v, h, k0, n, bars + 8 * STAGES);
    for (int it = 0; it < STAGES - 1 && it < count; ++it) load(it);
  }
  float dk[D / 64][32], dv[D / 64][32];
#pragma unroll
  for (int hv = 0; hv < D / 64; ++hv)
#pragma unroll
    for (int i = 0; i < 32; ++i) dk[hv][i] = dv[hv][i] = 0.f;
  float s[32], dp[32];
#pragma unroll
  for (int i = 0; i < 32; ++i) s[i] = dp[i] = 0.f;
  std::uint32_t ap[4][4], ads[4][4];
  mbar_wait(bars + 8 * STAGES, 0);

  for (int it = 0; it < count; ++it) {
    if (threadIdx.x == 0 && it + STAGES - 1 < count) load(it + STAGES - 1);
    const int q0 = 64 * (kt + it);
    // This thread's 16 columns: q0 + 8c + 2t + e. With pairs, e = 0 and 1 come in one load (both
    // lie below T or neither does, T being even); 16 loads a tile instead of 32, which took the
    // forward + backward 3–5 % faster on an H200 at d = 64 (docs/KERNELS.md).
    float l2[16], dl[16];
    if (pairs) {
#pragma unroll
      for (int c = 0; c < 8; ++c) {
        const int q = q0 + 8 * c + 2 * t;
        const bool ok = q < T;
        const float2 lv =
            ok ? __ldg(reinterpret_cast<const float2*>(p.lse + rbase + q)) : make_float2(0.f, 0.f);
        const float2 dv2 = ok ? __ldg(reinterpret_cast<const float2*>(p.delta + rbase + q))
                              : make_float2(0.f, 0.f);
        l2[2 * c] = ok ? lv.x * kLog2eSm90 : INFINITY;
        l2[2 * c + 1] = ok ? lv.y * kLog2eSm90 : INFINITY;
        dl[2 * c] = dv2.x;
        dl[2 * c + 1] = dv2.y;
      }
    } else {
#pragma unroll
      for (int c = 0; c < 8; ++c)
#pragma unroll
        for (int e = 0; e < 2; ++e) {
          const int q = q0 + 8 * c + 2 * t + e;
          const bool ok = q < T;
          l2[2 * c + e] = ok ? __ldg(p.lse + rbase + q) * kLog2eSm90 : INFINITY;
          dl[2 * c + e] = ok ? __ldg(p.delta + rbase + q) : 0.f;
        }
    }
    mbar_wait(bar(it), std::uint32_t((it / STAGES) & 1));
    fence();
    issue_ss64<D>(s, sK, sQ + stage(it));
    issue_ss64<D>(dp, sV, sdO + stage(it));
    commit();
    wait<0>();
    fence_regs(s);
    fence_regs(dp);
    const bool diag = it == 0;  // the only tile with queries before some of the block's keys
#pragma unroll
    for (int i = 0; i < 8; ++i) {
      float pv[4], dsv[4];
#pragma unroll
      for (int e = 0; e < 4; ++e) {
        const int c = 2 * i + (e & 1);
        float pe = exp2_fast(fmaf(s[4 * i + e], p.scale_l2, -l2[c]));
        if (diag && q0 + 8 * i + 2 * t + (e & 1) < key_base + 8 * (e >> 1)) pe = 0.f;
        pv[e] = pe;
        dsv[e] = pe * (dp[4 * i + e] - dl[c]);
      }
      pack_tile(ap, i, pv);
      pack_tile(ads, i, dsv);
    }
    fence();
    issue_rs64<D>(dv, ap, sdO + stage(it));
    issue_rs64<D>(dk, ads, sQ + stage(it));
    commit();
    wait<0>();
#pragma unroll
    for (int hv = 0; hv < D / 64; ++hv) {
      fence_regs(dv[hv]);
      fence_regs(dk[hv]);
    }
    fence_regs(ap);
    fence_regs(ads);
  }
  const long base = long(n) * T * ld + long(h) * D;
  store_rows<D>(p.dK + base, ld, dk, key_base, T, t, p.scale);
  store_rows<D>(p.dV + base, ld, dv, key_base, T, t, 1.f);
#else
  (void)maps;
  (void)p;
  __trap();
#endif
}

// dQ: block owns queries q0 .. q0 + 63 (tiles launched longest first) and walks the key tiles up to
// its diagonal. S = Q Kᵀ, P = 2^(S·log2e/√d − lse₂), dP = dO Vᵀ, dS = P ⊙ (dP − δ), dQ += dS K / √d.
template <int D, int STAGES, int MINB>
__global__ void __launch_bounds__(128, MINB)
    flash_dq_sm90(const __grid_constant__ BwdMaps maps, const FlashSm90Backward p) {
#if defined(__CUDA_ARCH_FEAT_SM90_ALL)
  constexpr std::uint32_t kTile = 64 * D * 2;
  extern __shared__ std::uint8_t smem_raw[];
  const std::uint32_t sQ =
      (static_cast<std::uint32_t>(__cvta_generic_to_shared(smem_raw)) + 1023u) & ~1023u;
  const std::uint32_t sdO = sQ + kTile, sK = sdO + kTile, sV = sK + STAGES * kTile,
                      bars = sV + STAGES * kTile;  // [0, STAGES): stage i is in; [STAGES]: Q, dO
  const int T = p.T, qtiles = (T + 63) / 64, qt = qtiles - 1 - int(blockIdx.x), q0 = 64 * qt;
  const int n = int(blockIdx.y) / p.H, h = int(blockIdx.y) % p.H;
  const long ld = long(p.H) * D;
  const long rbase = (long(n) * p.H + h) * T;
  const int warp = int(threadIdx.x) / 32, lane = int(threadIdx.x) % 32, g = lane / 4, t = lane % 4;
  const int row_base = q0 + 16 * warp + g;
  const int count = qt + 1;  // key tiles 0 .. qt
  const auto bar = [&](int j) { return bars + std::uint32_t(j % STAGES) * 8; };
  const auto stage = [&](int j) { return std::uint32_t(j % STAGES) * kTile; };
  const auto load = [&](int j) {
    load_tile_pair<D>(sK + stage(j), &maps.k, sV + stage(j), &maps.v, h, 64 * j, n, bar(j));
  };
  init_barriers(bars, STAGES + 1);
  if (threadIdx.x == 0) {
    load_tile_pair<D>(sQ, &maps.q, sdO, &maps.dO, h, q0, n, bars + 8 * STAGES);
    for (int j = 0; j < STAGES - 1 && j < count; ++j) load(j);
  }
  float l2[2], dl[2];
#pragma unroll
  for (int r = 0; r < 2; ++r) {
    const int row = row_base + 8 * r;
    l2[r] = row < T ? p.lse[rbase + row] * kLog2eSm90 : 0.f;
    dl[r] = row < T ? p.delta[rbase + row] : 0.f;
  }
  float dq[D / 64][32];
#pragma unroll
  for (int hv = 0; hv < D / 64; ++hv)
#pragma unroll
    for (int i = 0; i < 32; ++i) dq[hv][i] = 0.f;
  float s[32], dp[32];
#pragma unroll
  for (int i = 0; i < 32; ++i) s[i] = dp[i] = 0.f;
  std::uint32_t ads[4][4];
  mbar_wait(bars + 8 * STAGES, 0);

  for (int j = 0; j < count; ++j) {
    if (threadIdx.x == 0 && j + STAGES - 1 < count) load(j + STAGES - 1);
    mbar_wait(bar(j), std::uint32_t((j / STAGES) & 1));
    fence();
    issue_ss64<D>(s, sQ, sK + stage(j));
    issue_ss64<D>(dp, sdO, sV + stage(j));
    commit();
    wait<0>();
    fence_regs(s);
    fence_regs(dp);
    const int k0 = 64 * j;
    const bool edge = j == qt;  // the diagonal tile; it also holds the keys past T, if any
#pragma unroll
    for (int i = 0; i < 8; ++i) {
      float dsv[4];
#pragma unroll
      for (int e = 0; e < 4; ++e) {
        float pe = exp2_fast(fmaf(s[4 * i + e], p.scale_l2, -l2[e >> 1]));
        if (edge) {
          const int key = k0 + 8 * i + 2 * t + (e & 1), row = row_base + 8 * (e >> 1);
          if (key > row || key >= T) pe = 0.f;
        }
        dsv[e] = pe * (dp[4 * i + e] - dl[e >> 1]);
      }
      pack_tile(ads, i, dsv);
    }
    fence();
    issue_rs64<D>(dq, ads, sK + stage(j));
    commit();
    wait<0>();
#pragma unroll
    for (int hv = 0; hv < D / 64; ++hv) fence_regs(dq[hv]);
    fence_regs(ads);
  }
  store_rows<D>(p.dQ + long(n) * T * ld + long(h) * D, ld, dq, row_base, T, t, p.scale);
#else
  (void)maps;
  (void)p;
  __trap();
#endif
}

template <int D, int MINB>
void launch_tma(const FlashSm90Forward& a) {
  const auto kernel = flash_forward_sm90_tma<D, MINB>;
  constexpr std::size_t smem = tma_smem_bytes<D>();
  allow_shared_memory(kernel, smem);
  const TmaMaps maps{make_map(a.Q, a.B, a.T, a.H, D), make_map(a.K, a.B, a.T, a.H, D),
                     make_map(a.V, a.B, a.T, a.H, D)};
  const dim3 grid(unsigned((a.T + 63) / 64), unsigned(a.B * a.H));
  kernel<<<grid, 128, smem, a.stream>>>(maps, a);
  TTTLAB_CUDA_CHECK(cudaGetLastError());
}

// Both backward kernels: one warpgroup per 64 rows, STAGES stages, MINB blocks per multiprocessor.
template <int D, int STAGES, int MINB>
void launch_backward(const FlashSm90Backward& a) {
  const BwdMaps maps{make_map(a.Q, a.B, a.T, a.H, D), make_map(a.K, a.B, a.T, a.H, D),
                     make_map(a.V, a.B, a.T, a.H, D), make_map(a.dO, a.B, a.T, a.H, D)};
  constexpr std::size_t smem = std::size_t(2 + 2 * STAGES) * 64 * D * 2 + 1024 + 64;
  const dim3 grid(unsigned((a.T + 63) / 64), unsigned(a.B * a.H));
  const auto dkdv = flash_dkdv_sm90<D, STAGES, MINB>;
  allow_shared_memory(dkdv, smem);
  dkdv<<<grid, 128, smem, a.stream>>>(maps, a);
  TTTLAB_CUDA_CHECK(cudaGetLastError());
  const auto dq = flash_dq_sm90<D, STAGES, MINB>;
  allow_shared_memory(dq, smem);
  dq<<<grid, 128, smem, a.stream>>>(maps, a);
  TTTLAB_CUDA_CHECK(cudaGetLastError());
}

bool image_present(const void* kernel) {
  cudaFuncAttributes attr{};
  const bool ok = cudaFuncGetAttributes(&attr, kernel) == cudaSuccess;
  cudaGetLastError();  // a missing image leaves an error behind; it is an answer here, not a fault
  return ok;
}

}  // namespace

bool flash_sm90_available(int d) {
  if (d != 64 && d != 128) return false;
  int dev = 0, major = 0, minor = 0;
  if (cudaGetDevice(&dev) != cudaSuccess) {
    cudaGetLastError();
    return false;
  }
  cudaDeviceGetAttribute(&major, cudaDevAttrComputeCapabilityMajor, dev);
  cudaDeviceGetAttribute(&minor, cudaDevAttrComputeCapabilityMinor, dev);
  if (major != 9 || minor != 0) return false;
  static const bool present =
      image_present(reinterpret_cast<const void*>(flash_forward_sm90_tma<64, 4>)) &&
      image_present(reinterpret_cast<const void*>(flash_forward_sm90_pipe<128, 64, 2>)) &&
      image_present(reinterpret_cast<const void*>(flash_dkdv_sm90<64, 2, 3>)) &&
      image_present(reinterpret_cast<const void*>(flash_dq_sm90<128, 2, 1>));
  return present;
}

void flash_forward_sm90(const FlashSm90Forward& a) {
  if (a.d == 64)
    launch_tma<64, 4>(a);
  else
    launch_pipe<128, 64, 2>(a);
}

void flash_backward_sm90(const FlashSm90Backward& a) {
  if (a.d == 64)
    launch_backward<64, 2, 3>(a);
  else
    launch_backward<128, 2, 1>(a);
}

}  // namespace tttlab::kernels::detail
