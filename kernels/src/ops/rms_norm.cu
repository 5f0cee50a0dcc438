// RMSNorm, alone or fused with the residual add before it (tttlab/kernels/nn_ops.hpp,
// nn/norms.hpp on the CPU): one warp per row, a float4 row kernel for every preset's width.
#include "ops/ops_common.cuh"

namespace tttlab::kernels {
namespace {

// The residual add and the RMSNorm after it in one pass: S = H + Dx, Y = S·r·w. Every add of the
// block's residual stream is followed by a norm of its result, so fusing them saves the re-read of S
// (4 passes over [R, D] instead of 5) and a launch. Dx == nullptr: Y = RMSNorm(H), S not written.
// One warp per row; each lane writes and reads back only its own columns.
__global__ void add_rms_forward_kernel(const float* __restrict__ H, const float* __restrict__ Dx,
                                       const float* __restrict__ w, int R, int D, float eps,
                                       float* __restrict__ S, float* __restrict__ Y, std::uint16_t* __restrict__ Y16) {
  const int row = blockIdx.x * (blockDim.x / 32) + threadIdx.x / 32;
  const int lane = threadIdx.x % 32;
  if (row >= R) return;
  const std::size_t o = std::size_t(row) * D;
  float ss = 0.f;
  for (int c = lane; c < D; c += 32) {
    float x = H[o + c];
    if (Dx) {
      x += Dx[o + c];
      S[o + c] = x;
    }
    ss += x * x;
  }
  ss = warp_sum(ss);
  const float r = 1.f / sqrtf(ss / float(D) + eps);
  const float* x = Dx ? S : H;
  for (int c = lane; c < D; c += 32) {
    const float y = x[o + c] * r * w[c];
    if (Y16)
      Y16[o + c] = bf16_bits(y);
    else
      Y[o + c] = y;
  }
}

// The same for D = 128·NV (every preset's width): the row stays in registers.
template <int NV>
__global__ void add_rms_forward_vec4_kernel(const float4* __restrict__ H, const float4* __restrict__ Dx,
                                            const float4* __restrict__ w, int R, float eps,
                                            float4* __restrict__ S, float4* __restrict__ Y,
                                            std::uint16_t* __restrict__ Y16) {
  constexpr int D4 = 32 * NV;
  const int row = blockIdx.x * (blockDim.x / 32) + threadIdx.x / 32;
  const int lane = threadIdx.x % 32;
  if (row >= R) return;
  const std::size_t o = std::size_t(row) * D4;
  float4 x[NV];
  float ss = 0.f;
#pragma unroll
  for (int v = 0; v < NV; ++v) {
    x[v] = H[o + lane + 32 * v];
    if (Dx) {
      const float4 a = Dx[o + lane + 32 * v];
      x[v] = make_float4(x[v].x + a.x, x[v].y + a.y, x[v].z + a.z, x[v].w + a.w);
      S[o + lane + 32 * v] = x[v];
    }
    ss = add_squares(ss, x[v]);
  }
  rms_store_row<NV>(x, ss, w, eps, o, lane, Y, Y16);
}

// dX = r·G − c·x̂ with G = dY⊙w, x̂ = x·r, c = r·(G·x̂)/D; prod = dY⊙x̂ (column-summed into dw after).
__global__ void rms_backward_kernel(const float* __restrict__ X, const float* __restrict__ w,
                                    const float* __restrict__ dY, int R, int D, float eps, float* __restrict__ dX,
                                    bool accumulate, float* __restrict__ prod) {
  const int row = blockIdx.x * (blockDim.x / 32) + threadIdx.x / 32;
  const int lane = threadIdx.x % 32;
  if (row >= R) return;
  const std::size_t o = std::size_t(row) * D;
  float ss = 0.f, gx = 0.f;
  for (int c = lane; c < D; c += 32) {
    const float x = X[o + c];
    ss += x * x;
    gx += dY[o + c] * w[c] * x;
  }
  ss = warp_sum(ss);
  gx = warp_sum(gx);
  const float r = 1.f / sqrtf(ss / float(D) + eps);
  const float coef = r * (gx * r) / float(D);
  for (int c = lane; c < D; c += 32) {
    const float xn = X[o + c] * r;
    const float g = dY[o + c] * w[c];
    const float d = r * g - coef * xn;
    dX[o + c] = accumulate ? dX[o + c] + d : d;
    prod[o + c] = dY[o + c] * xn;
  }
}

// The same backward for D a multiple of 128 up to 1024 (every preset's width), fused with the first
// pass of dw's column sum: one block per kNormChunkRows-row chunk, 8 warps of kNormChunkRows/8 rows
// each. A lane owns the same NV float4 columns in every row (c = 4·lane + 128·v), so it reads its row slices
// once into registers, and adds its columns' dY⊙x̂ over its rows in registers; the 8 warps' sums are
// added in a fixed order through shared memory into partial[chunk, D]. No [R, D] product buffer is
// written and read back (the plain kernel's), and dw stays bitwise reproducible.
template <int NV>
__global__ void rms_backward_vec4_kernel(const float4* __restrict__ X, const float4* __restrict__ w,
                                         const float4* __restrict__ dY, int R, float eps,
                                         float4* __restrict__ dX, bool accumulate,
                                         std::uint16_t* __restrict__ dX16,
                                         float* __restrict__ partial) {
  constexpr int D4 = 32 * NV, D = 4 * D4;
  __shared__ float4 s_sum[8][D4];
  const int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
  float4 wv[NV], acc[NV];
#pragma unroll
  for (int v = 0; v < NV; ++v) {
    wv[v] = w[lane + 32 * v];
    acc[v] = f4_zero();
  }
  const int r_end = min(R, (blockIdx.x + 1) * kNormChunkRows);
  for (int row = blockIdx.x * kNormChunkRows + warp; row < r_end; row += 8) {
    const std::size_t o = std::size_t(row) * D4;
    float4 x[NV], g[NV];
    float ss = 0.f, gx = 0.f;
#pragma unroll
    for (int v = 0; v < NV; ++v) {
      x[v] = X[o + lane + 32 * v];
      g[v] = dY[o + lane + 32 * v];
    }
#pragma unroll
    for (int v = 0; v < NV; ++v) {
      ss = add_squares(ss, x[v]);  // as the forward, so r is the forward's r
      gx += g[v].x * wv[v].x * x[v].x + g[v].y * wv[v].y * x[v].y + g[v].z * wv[v].z * x[v].z +
            g[v].w * wv[v].w * x[v].w;
    }
    ss = warp_sum(ss);
    gx = warp_sum(gx);
    const float r = 1.f / sqrtf(ss / float(D) + eps);
    const float coef = r * (gx * r) / float(D);
#pragma unroll
    for (int v = 0; v < NV; ++v) {
      const float4 xn = make_float4(x[v].x * r, x[v].y * r, x[v].z * r, x[v].w * r);
      float4 d = make_float4(r * g[v].x * wv[v].x - coef * xn.x, r * g[v].y * wv[v].y - coef * xn.y,
                             r * g[v].z * wv[v].z - coef * xn.z, r * g[v].w * wv[v].w - coef * xn.w);
      float4* out = dX + o + lane + 32 * v;
      if (accumulate) {
        const float4 p = *out;
        d.x += p.x;
        d.y += p.y;
        d.z += p.z;
        d.w += p.w;
      }
      *out = d;
      if (dX16) store_bf16x4(dX16 + 4 * (o + lane + 32 * v), d.x, d.y, d.z, d.w);
      f4_fma(acc[v], g[v], xn);
    }
  }
  chunk_sum_8_warps<NV>(s_sum, acc, reinterpret_cast<float4*>(partial + std::size_t(blockIdx.x) * D));
}

}  // namespace

namespace {
// S = H + Dx (when Dx) and Y = RMSNorm(S or H)·w, or its bf16 rounding in Y16 when that is not null;
// the float4 kernel where D = 128·NV ≤ 1024 and every pointer is 16-byte aligned (Y16: 8-byte).
void add_rms_launch(const float* H, const float* Dx, const float* w, int R, int D, float eps, float* S, float* Y,
                    std::uint16_t* Y16, CUstream_st* stream) {
  const int grid = row_blocks(R);
  if (rows_vec4(D, {H, Dx, w, S, Y}) && aligned8(Y16)) {
    const auto* H4 = reinterpret_cast<const float4*>(H);
    const auto* Dx4 = reinterpret_cast<const float4*>(Dx);
    const auto* w4 = reinterpret_cast<const float4*>(w);
    auto* S4 = reinterpret_cast<float4*>(S);
    auto* Y4 = reinterpret_cast<float4*>(Y);
    launch_rows_vec4(D, [&](auto nv) {
      add_rms_forward_vec4_kernel<decltype(nv)::value>
          <<<grid, kThreads, 0, stream>>>(H4, Dx4, w4, R, eps, S4, Y4, Y16);
    });
  } else {
    add_rms_forward_kernel<<<grid, kThreads, 0, stream>>>(H, Dx, w, R, D, eps, S, Y, Y16);
  }
  check_launch();
}
}  // namespace

void rms_norm_forward(const float* X, const float* w, int R, int D, float eps, float* Y, CUstream_st* stream) {
  const char* fn = "rms_norm_forward";
  require(R >= 0 && D >= 1, fn, "R must be >= 0 and D >= 1");
  require(eps > 0.f, fn, "eps must be > 0");
  if (R == 0) return;
  require(X && w && Y && X != Y, fn, "pointers must be non-null and Y must not alias X");
  add_rms_launch(X, nullptr, w, R, D, eps, nullptr, Y, nullptr, stream);
}

void rms_norm_forward_bf16(const float* X, const float* w, int R, int D, float eps, std::uint16_t* Y16,
                           CUstream_st* stream) {
  const char* fn = "rms_norm_forward_bf16";
  require(R >= 0 && D >= 1, fn, "R must be >= 0 and D >= 1");
  require(eps > 0.f, fn, "eps must be > 0");
  if (R == 0) return;
  require(X && w && Y16, fn, "a pointer is null");
  add_rms_launch(X, nullptr, w, R, D, eps, nullptr, nullptr, Y16, stream);
}

void add_rms_norm_forward(const float* H, const float* Dx, const float* w, int R, int D, float eps, float* S,
                          float* Y, CUstream_st* stream) {
  const char* fn = "add_rms_norm_forward";
  require(R >= 0 && D >= 1, fn, "R must be >= 0 and D >= 1");
  require(eps > 0.f, fn, "eps must be > 0");
  if (R == 0) return;
  require(H && Dx && w && S && Y, fn, "a pointer is null");
  require(S != Y && Y != H && Y != Dx && S != H && S != Dx, fn, "S, Y, H and Dx must be four different buffers");
  add_rms_launch(H, Dx, w, R, D, eps, S, Y, nullptr, stream);
}

void add_rms_norm_forward_bf16(const float* H, const float* Dx, const float* w, int R, int D, float eps, float* S,
                               std::uint16_t* Y16, CUstream_st* stream) {
  const char* fn = "add_rms_norm_forward_bf16";
  require(R >= 0 && D >= 1, fn, "R must be >= 0 and D >= 1");
  require(eps > 0.f, fn, "eps must be > 0");
  if (R == 0) return;
  require(H && Dx && w && S && Y16, fn, "a pointer is null");
  require(S != H && S != Dx, fn, "S, H and Dx must be three different buffers");
  add_rms_launch(H, Dx, w, R, D, eps, S, nullptr, Y16, stream);
}

std::size_t rms_norm_backward_workspace(int R, int D) {
  return std::size_t(std::max(R, 0)) * std::max(D, 0) + column_sum_workspace(R, D);
}

void rms_norm_backward(const float* X, const float* w, const float* dY, int R, int D, float eps,
                       float* dX, bool accumulate, float* dw, float* workspace, CUstream_st* stream,
                       std::uint16_t* dX16) {
  const char* fn = "rms_norm_backward";
  require(R >= 0 && D >= 1, fn, "R must be >= 0 and D >= 1");
  require(eps > 0.f, fn, "eps must be > 0");
  if (R == 0) return;
  require(X && w && dY && dX && dw && workspace, fn, "a pointer is null");
  require(dX != X && dX != dY, fn, "dX must not alias X or dY");
  if (rows_vec4(D, {X, w, dY, dX, workspace}) && aligned8(dX16)) {
    const int n = norm_chunks(R);
    const auto* X4 = reinterpret_cast<const float4*>(X);
    const auto* w4 = reinterpret_cast<const float4*>(w);
    const auto* dY4 = reinterpret_cast<const float4*>(dY);
    auto* dX4 = reinterpret_cast<float4*>(dX);
    launch_rows_vec4(D, [&](auto nv) {
      rms_backward_vec4_kernel<decltype(nv)::value>
          <<<n, 256, 0, stream>>>(X4, w4, dY4, R, eps, dX4, accumulate, dX16, workspace);
    });
    check_launch();
    sum_partials_add(workspace, n, D, dw, stream);
    check_launch();
    return;
  }
  float* prod = workspace;
  rms_backward_kernel<<<row_blocks(R), kThreads, 0, stream>>>(X, w, dY, R, D, eps, dX, accumulate, prod);
  check_launch();
  column_sum_launch(prod, R, D, dw, workspace + std::size_t(R) * D, stream);
  if (dX16) convert_to_bf16(dX, R, D, D, dX16, D, stream);
}

}  // namespace tttlab::kernels
