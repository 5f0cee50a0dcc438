// LayerNorm, alone or with the Mamba backbone's GELU gate fused in (tttlab/kernels/nn_ops.hpp,
// nn/norms.hpp and nn/gelu_gate.hpp on the CPU): one warp per row, a float4 row kernel for every
// preset's width.
#include "ops/ops_common.cuh"

namespace tttlab::kernels {
namespace {

constexpr float kGeluC = 0.7978845608028654f;
constexpr float kGeluA = 0.044715f;

// gelu(x) = ½x(1 + tanh u), u = c(x + k x³), written with 1 + tanh u = 2σ(2u) and 1 − tanh² u =
// 4σ(2u)σ(−2u): the same function without the cancellation of 1 + tanh u for negative x (at x = −5,
// 1 + tanh u ≈ 1e-4 and fp32's tanh leaves ~1e-3 relative error there; this form stays at a few ulp).
__device__ __forceinline__ float gelu_tanh(float x) {
  const float u = kGeluC * (x + kGeluA * x * x * x);
  return x * sigmoidf_split(2.f * u);
}
// gelu(x), returned, and gelu′(x) = σ(2u) + 2x·σ(2u)σ(−2u)·u′ into grad: both σ from one exponential
// and one division (sigmoidf_split's split by sign).
__device__ __forceinline__ float gelu_tanh_and_grad(float x, float& grad) {
  const float u = kGeluC * (x + kGeluA * x * x * x);
  const float e = expf(-fabsf(2.f * u)), inv = 1.f / (1.f + e);
  const float sp = 2.f * u >= 0.f ? inv : e * inv,
              sn = 2.f * u >= 0.f ? e * inv : inv;  // σ(2u), σ(−2u)
  const float du = kGeluC * (1.f + 3.f * kGeluA * x * x);
  grad = sp + 2.f * x * sp * sn * du;
  return x * sp;
}

// ---- LayerNorm, alone or gated: one warp per row ---------------------------------------------------
// The TTT layer's post-norm Y = LN(O) = x̂ ⊙ γ + β, x̂ = (O − μ)·rstd, rstd = 1/√(var + ε). With the Mamba
// backbone its only reader is the gate, out = Y ⊙ gelu(A), so the kernels take the gate as an option
// (A != null): the forward writes out (or bf16(out)) and never Y, and the backward recomputes Y from O
// and takes dOut, the gate's output gradient, in place of dY: dA = dOut ⊙ Y ⊙ gelu′(A) and
// dY = dOut ⊙ gelu(A), which then flows through the LayerNorm's backward as any dY. That saves
// writing Y and reading it twice (4 of 10 passes over [R, D] per layer and step) and two launches.

// Y = LN(X), or with A: out = LN(X) ⊙ gelu(A); bf16 into Y16 when that is not null.
__global__ void ln_forward_kernel(const float* __restrict__ X, const float* __restrict__ gamma,
                                  const float* __restrict__ beta, const float* __restrict__ A,
                                  int R, int D, float eps, float* __restrict__ Y,
                                  std::uint16_t* __restrict__ Y16) {
  const int row = blockIdx.x * (blockDim.x / 32) + threadIdx.x / 32;
  const int lane = threadIdx.x % 32;
  if (row >= R) return;
  const std::size_t o = std::size_t(row) * D;
  const float* x = X + o;
  float s = 0.f;
  for (int c = lane; c < D; c += 32) s += x[c];
  const float mu = warp_sum(s) / float(D);
  float v = 0.f;
  for (int c = lane; c < D; c += 32) v += (x[c] - mu) * (x[c] - mu);
  const float rstd = 1.f / sqrtf(warp_sum(v) / float(D) + eps);
  for (int c = lane; c < D; c += 32) {
    float y = (x[c] - mu) * rstd * gamma[c] + beta[c];
    if (A) y *= gelu_tanh(A[o + c]);
    if (Y16)
      Y16[o + c] = bf16_bits(y);
    else
      Y[o + c] = y;
  }
}

// A warp's row of D = 128·NV values (NV float4 per lane: columns 4·lane + 128·v) centred in place,
// x − μ, for the LayerNorm kernels below; returns rstd = 1/√(var + ε).
template <int NV>
__device__ __forceinline__ float centre_row(float4 (&x)[NV], float eps) {
  constexpr int D = 128 * NV;
  float s = 0.f;
#pragma unroll
  for (int v = 0; v < NV; ++v) s += x[v].x + x[v].y + x[v].z + x[v].w;
  const float mu = warp_sum(s) / float(D);
  float var = 0.f;
#pragma unroll
  for (int v = 0; v < NV; ++v) {
    x[v] = make_float4(x[v].x - mu, x[v].y - mu, x[v].z - mu, x[v].w - mu);
    var += x[v].x * x[v].x + x[v].y * x[v].y + x[v].z * x[v].z + x[v].w * x[v].w;
  }
  return 1.f / sqrtf(warp_sum(var) / float(D) + eps);
}

// The same for D = 128·NV (every preset's width): the row stays in registers.
template <int NV>
__global__ void ln_forward_vec4_kernel(const float4* __restrict__ X,
                                       const float4* __restrict__ gamma,
                                       const float4* __restrict__ beta,
                                       const float4* __restrict__ A, int R, float eps,
                                       float4* __restrict__ Y, std::uint16_t* __restrict__ Y16) {
  constexpr int D4 = 32 * NV;
  const int row = blockIdx.x * (blockDim.x / 32) + threadIdx.x / 32;
  const int lane = threadIdx.x % 32;
  if (row >= R) return;
  const std::size_t o = std::size_t(row) * D4;
  // A is read with X, before the row's reductions (as in the backward below).
  float4 x[NV], a_row[NV];
#pragma unroll
  for (int v = 0; v < NV; ++v) {
    x[v] = X[o + lane + 32 * v];
    if (A) a_row[v] = A[o + lane + 32 * v];
  }
  const float rstd = centre_row<NV>(x, eps);
#pragma unroll
  for (int v = 0; v < NV; ++v) {
    const float4 g = gamma[lane + 32 * v], b = beta[lane + 32 * v];
    float4 y = make_float4(x[v].x * rstd * g.x + b.x, x[v].y * rstd * g.y + b.y,
                           x[v].z * rstd * g.z + b.z, x[v].w * rstd * g.w + b.w);
    if (A) {
      const float4 a = a_row[v];
      y = make_float4(y.x * gelu_tanh(a.x), y.y * gelu_tanh(a.y), y.z * gelu_tanh(a.z),
                      y.w * gelu_tanh(a.w));
    }
    if (Y16)
      store_bf16x4(Y16 + 4 * (o + lane + 32 * v), y.x, y.y, y.z, y.w);
    else
      Y[o + lane + 32 * v] = y;
  }
}

// The gate's backward at one element: dOut → dY = dOut·gelu(a) (returned), dA = dOut·y·gelu′(a) with
// y = x̂·γ + β. (With gelu_tanh and a gelu′ of its own, three exponentials and divisions per element,
// the row kernel was compute-bound: 281 µs against 50 µs for the plain LayerNorm at D = 768,
// R = 16384 on an H100.)
__device__ __forceinline__ float gate_backward(float dout, float xh, float gamma, float beta,
                                               float a, float& da) {
  float grad;
  const float g = gelu_tanh_and_grad(a, grad);
  da = dout * (xh * gamma + beta) * grad;
  return dout * g;
}

// dX = rstd·(G − mean(G) − x̂·mean(G⊙x̂)), G = dY⊙γ; prod = dY⊙x̂ (for dγ). With A (gated): dY is the
// gate's dOut, dA is written and the LayerNorm's dY into dY_used (for dβ).
__global__ void ln_backward_kernel(const float* __restrict__ X, const float* __restrict__ gamma,
                                   const float* __restrict__ beta, const float* __restrict__ A,
                                   const float* __restrict__ dY, int R, int D, float eps,
                                   float* __restrict__ dX, float* __restrict__ dA,
                                   float* __restrict__ dY_used, float* __restrict__ prod) {
  const int row = blockIdx.x * (blockDim.x / 32) + threadIdx.x / 32;
  const int lane = threadIdx.x % 32;
  if (row >= R) return;
  const std::size_t o = std::size_t(row) * D;
  float s = 0.f;
  for (int c = lane; c < D; c += 32) s += X[o + c];
  const float mu = warp_sum(s) / float(D);
  float v = 0.f;
  for (int c = lane; c < D; c += 32) v += (X[o + c] - mu) * (X[o + c] - mu);
  const float rstd = 1.f / sqrtf(warp_sum(v) / float(D) + eps);
  // dy at column c: the given dY, or the gate's backward of it (writing dA and dY_used once, in the
  // first pass).
  auto dy_at = [&](int c, bool first) {
    if (!A) return dY[o + c];
    float da;
    const float dy =
        gate_backward(dY[o + c], (X[o + c] - mu) * rstd, gamma[c], beta[c], A[o + c], da);
    if (first) {
      dA[o + c] = da;
      dY_used[o + c] = dy;
    }
    return dy;
  };
  float sg = 0.f, sgx = 0.f;
  for (int c = lane; c < D; c += 32) {
    const float g = dy_at(c, true) * gamma[c];
    sg += g;
    sgx += g * (X[o + c] - mu) * rstd;
  }
  const float mean_g = warp_sum(sg) / float(D);
  const float mean_gx = warp_sum(sgx) / float(D);
  for (int c = lane; c < D; c += 32) {
    const float xh = (X[o + c] - mu) * rstd;
    const float dy = dy_at(c, false);
    const float g = dy * gamma[c];
    dX[o + c] = rstd * (g - mean_g - xh * mean_gx);
    prod[o + c] = dy * xh;
  }
}

// The same for D = 128·NV (every preset's width), as rms_backward_vec4_kernel: a block per chunk of
// kNormChunkRows rows, 8 warps taking a row at a time from registers; dγ (Σ dY⊙x̂) and dβ (Σ dY) summed
// per chunk in registers and shared memory into partial[chunk, D] and partial[chunks + chunk, D], so no
// [R, D] product buffer is written and read back. With A (gated): dY is the gate's dOut; dA is written.
template <int NV>
__global__ void ln_backward_vec4_kernel(const float4* __restrict__ X,
                                        const float4* __restrict__ gamma,
                                        const float4* __restrict__ beta,
                                        const float4* __restrict__ A, const float4* __restrict__ dY,
                                        int R, float eps, float4* __restrict__ dX,
                                        float4* __restrict__ dA, std::uint16_t* __restrict__ dA16,
                                        float* __restrict__ partial) {
  constexpr int D4 = 32 * NV, D = 4 * D4;
  __shared__ float4 s_sum[8][D4];
  const int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
  float4 gm[NV], acc_g[NV], acc_b[NV];
#pragma unroll
  for (int v = 0; v < NV; ++v) {
    gm[v] = gamma[lane + 32 * v];
    acc_g[v] = f4_zero();
    acc_b[v] = f4_zero();
  }
  const int r_end = min(R, (blockIdx.x + 1) * kNormChunkRows);
  for (int row = blockIdx.x * kNormChunkRows + warp; row < r_end; row += 8) {
    const std::size_t o = std::size_t(row) * D4;
    // The gate's A is read with X and dY, before the row's reductions: read after them, its loads
    // were a second exposed memory latency per row.
    float4 x[NV], dy[NV], a_row[NV];
#pragma unroll
    for (int v = 0; v < NV; ++v) {
      x[v] = X[o + lane + 32 * v];
      dy[v] = dY[o + lane + 32 * v];
      if (A) a_row[v] = A[o + lane + 32 * v];
    }
    const float rstd = centre_row<NV>(x, eps);
    float sg = 0.f, sgx = 0.f;
#pragma unroll
    for (int v = 0; v < NV; ++v) {
      x[v] = make_float4(x[v].x * rstd, x[v].y * rstd, x[v].z * rstd, x[v].w * rstd);  // x̂
      if (A) {
        const float4 a = a_row[v], b = beta[lane + 32 * v];
        float4 da;
        dy[v] = make_float4(gate_backward(dy[v].x, x[v].x, gm[v].x, b.x, a.x, da.x),
                            gate_backward(dy[v].y, x[v].y, gm[v].y, b.y, a.y, da.y),
                            gate_backward(dy[v].z, x[v].z, gm[v].z, b.z, a.z, da.z),
                            gate_backward(dy[v].w, x[v].w, gm[v].w, b.w, a.w, da.w));
        if (dA16)
          store_bf16x4(dA16 + 4 * (o + lane + 32 * v), da.x, da.y, da.z, da.w);
        else
          dA[o + lane + 32 * v] = da;
      }
      const float4 g =
          make_float4(dy[v].x * gm[v].x, dy[v].y * gm[v].y, dy[v].z * gm[v].z, dy[v].w * gm[v].w);
      sg += g.x + g.y + g.z + g.w;
      sgx += g.x * x[v].x + g.y * x[v].y + g.z * x[v].z + g.w * x[v].w;
    }
    const float mean_g = warp_sum(sg) / float(D);
    const float mean_gx = warp_sum(sgx) / float(D);
#pragma unroll
    for (int v = 0; v < NV; ++v) {
      const float4 g =
          make_float4(dy[v].x * gm[v].x, dy[v].y * gm[v].y, dy[v].z * gm[v].z, dy[v].w * gm[v].w);
      dX[o + lane + 32 * v] = make_float4(
          rstd * (g.x - mean_g - x[v].x * mean_gx), rstd * (g.y - mean_g - x[v].y * mean_gx),
          rstd * (g.z - mean_g - x[v].z * mean_gx), rstd * (g.w - mean_g - x[v].w * mean_gx));
      f4_fma(acc_g[v], dy[v], x[v]);
      acc_b[v].x += dy[v].x;
      acc_b[v].y += dy[v].y;
      acc_b[v].z += dy[v].z;
      acc_b[v].w += dy[v].w;
    }
  }
  // dγ, then dβ through the same shared array.
  chunk_sum_8_warps<NV>(s_sum, acc_g,
                        reinterpret_cast<float4*>(partial + std::size_t(blockIdx.x) * D));
  chunk_sum_8_warps<NV>(
      s_sum, acc_b, reinterpret_cast<float4*>(partial + (std::size_t(gridDim.x) + blockIdx.x) * D));
}

}  // namespace

namespace {
// LayerNorm forward, plain (A null) or gated; into Y, or bf16 into Y16 when that is not null.
void ln_forward_launch(const float* X, const float* gamma, const float* beta, const float* A, int R,
                       int D, float eps, float* Y, std::uint16_t* Y16, CUstream_st* stream) {
  if (rows_vec4(D, {X, gamma, beta, A, Y}) && aligned8(Y16)) {
    const auto* X4 = reinterpret_cast<const float4*>(X);
    const auto* g4 = reinterpret_cast<const float4*>(gamma);
    const auto* b4 = reinterpret_cast<const float4*>(beta);
    const auto* A4 = reinterpret_cast<const float4*>(A);
    auto* Y4 = reinterpret_cast<float4*>(Y);
    launch_rows_vec4(D, [&](auto nv) {
      ln_forward_vec4_kernel<decltype(nv)::value>
          <<<row_blocks(R), kThreads, 0, stream>>>(X4, g4, b4, A4, R, eps, Y4, Y16);
    });
  } else {
    ln_forward_kernel<<<row_blocks(R), kThreads, 0, stream>>>(X, gamma, beta, A, R, D, eps, Y, Y16);
  }
  check_launch();
}

// LayerNorm backward, plain (A null: dY is the LayerNorm's output gradient) or gated (dY is the gate's
// dOut; dA written). The workspace: layer_norm_backward_workspace, plus R·D floats when gated.
void ln_backward_launch(const float* X, const float* gamma, const float* beta, const float* A,
                        const float* dY, int R, int D, float eps, float* dX, float* dA,
                        std::uint16_t* dA16, float* dgamma, float* dbeta, float* workspace,
                        CUstream_st* stream) {
  if (rows_vec4(D, {X, gamma, beta, A, dY, dX, dA, workspace}) && aligned8(dA16)) {
    const int n = norm_chunks(R);
    const auto* X4 = reinterpret_cast<const float4*>(X);
    const auto* g4 = reinterpret_cast<const float4*>(gamma);
    const auto* b4 = reinterpret_cast<const float4*>(beta);
    const auto* A4 = reinterpret_cast<const float4*>(A);
    const auto* dY4 = reinterpret_cast<const float4*>(dY);
    auto* dX4 = reinterpret_cast<float4*>(dX);
    auto* dA4 = reinterpret_cast<float4*>(dA);
    launch_rows_vec4(D, [&](auto nv) {
      ln_backward_vec4_kernel<decltype(nv)::value>
          <<<n, 256, 0, stream>>>(X4, g4, b4, A4, dY4, R, eps, dX4, dA4, dA16, workspace);
    });
    check_launch();
    sum_partials_add(workspace, n, D, dgamma, stream);
    sum_partials_add(workspace + std::size_t(n) * D, n, D, dbeta, stream);
    check_launch();
    return;
  }
  // [R, D] each: prod = dY⊙x̂, then (gated) the LayerNorm's dY, then the column sums' partials.
  float* prod = workspace;
  float* dy_used = A ? workspace + std::size_t(R) * D : nullptr;
  float* ws = workspace + std::size_t(R) * D * (A ? 2 : 1);
  ln_backward_kernel<<<row_blocks(R), kThreads, 0, stream>>>(X, gamma, beta, A, dY, R, D, eps, dX,
                                                             dA, dy_used, prod);
  check_launch();
  column_sum_launch(prod, R, D, dgamma, ws, stream);
  column_sum_launch(A ? dy_used : dY, R, D, dbeta, ws, stream);
  if (dA16) convert_to_bf16(dA, R, D, D, dA16, D, stream);
}

void check_layer_norm(const char* fn, int R, int D, float eps) {
  require(R >= 0 && D >= 1, fn, "R must be >= 0 and D >= 1");
  require(eps > 0.f, fn, "eps must be > 0");
}
}  // namespace

void layer_norm_forward(const float* X, const float* gamma, const float* beta, int R, int D,
                        float eps, float* Y, CUstream_st* stream) {
  const char* fn = "layer_norm_forward";
  check_layer_norm(fn, R, D, eps);
  if (R == 0) return;
  require(X && gamma && beta && Y && X != Y, fn,
          "pointers must be non-null and Y must not alias X");
  ln_forward_launch(X, gamma, beta, nullptr, R, D, eps, Y, nullptr, stream);
}

std::size_t layer_norm_backward_workspace(int R, int D) {
  // The vectorised kernel's partial sums of dγ and dβ, or the general one's product buffer and sums.
  return std::max(2 * std::size_t(norm_chunks(std::max(R, 1))) * std::max(D, 0),
                  rms_norm_backward_workspace(R, D));
}

void layer_norm_backward(const float* X, const float* gamma, const float* dY, int R, int D,
                         float eps, float* dX, float* dgamma, float* dbeta, float* workspace,
                         CUstream_st* stream) {
  const char* fn = "layer_norm_backward";
  check_layer_norm(fn, R, D, eps);
  if (R == 0) return;
  require(X && gamma && dY && dX && dgamma && dbeta && workspace, fn, "a pointer is null");
  require(dX != X && dX != dY, fn, "dX must not alias X or dY");
  ln_backward_launch(X, gamma, nullptr, nullptr, dY, R, D, eps, dX, nullptr, nullptr, dgamma, dbeta,
                     workspace, stream);
}

void gated_layer_norm_forward(const float* O, const float* gamma, const float* beta, const float* A,
                              int R, int D, float eps, float* out, std::uint16_t* out16,
                              CUstream_st* stream) {
  const char* fn = "gated_layer_norm_forward";
  check_layer_norm(fn, R, D, eps);
  if (R == 0) return;
  require(O && gamma && beta && A && (out || out16), fn, "a pointer is null");
  require(out != O && out != A, fn, "out must not alias O or A");
  ln_forward_launch(O, gamma, beta, A, R, D, eps, out16 ? nullptr : out, out16, stream);
}

std::size_t gated_layer_norm_backward_workspace(int R, int D) {
  return std::size_t(std::max(R, 0)) * std::max(D, 0) + layer_norm_backward_workspace(R, D);
}

void gated_layer_norm_backward(const float* O, const float* gamma, const float* beta,
                               const float* A, const float* dOut, int R, int D, float eps,
                               float* dO, float* dA, float* dgamma, float* dbeta, float* workspace,
                               CUstream_st* stream, std::uint16_t* dA16) {
  const char* fn = "gated_layer_norm_backward";
  check_layer_norm(fn, R, D, eps);
  if (R == 0) return;
  require(O && gamma && beta && A && dOut && dO && dA && dgamma && dbeta && workspace, fn,
          "a pointer is null");
  require(dO != O && dO != A && dO != dOut && dA != O && dA != A && dA != dOut && dO != dA, fn,
          "dO and dA must not alias each other or an input");
  ln_backward_launch(O, gamma, beta, A, dOut, R, D, eps, dO, dA, dA16, dgamma, dbeta, workspace,
                     stream);
}

}  // namespace tttlab::kernels
