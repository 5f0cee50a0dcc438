// tttlab/kernels/mamba2.hpp — Mamba-2 (the SSD layer) on the GPU: the chunked scan, forward and
// backward, and the whole layer of core/include/tttlab/seq/mamba2_layer.hpp (docs/MATH.md §8.8).
//
// The kernels compute the functions of the CPU layer in fp32 storage and fp32 accumulation (the scan
// also in bf16 products on the tensor cores: TWO PATHS below):
//   Scan     mamba2_scan_chunked / mamba2_scan_chunked_backward (tttlab/seq/mamba2_layer.hpp) per
//            head, with dt = softplus(dt_raw + dt_bias) and A = −exp(A_log) computed in the same pass
//            and the D skip added (Y = scan + D_h·X), so that the layer needs no separate passes for them.
//   Layer    Mamba2Layer::forward_train / backward: in_proj, the depthwise causal convolution with
//            its bias, silu, the scan, the gate y ⊙ silu(z), the RMSNorm over d_inner, out_proj.
// The tests (tests/kernels/test_mamba2_cuda.cpp) compare the scan with the CPU functions in fp64 and
// the layer with the reference fixtures (tests/reference/mamba2-*).
//
// DESIGN (docs/KERNELS.md, "Mamba-2 on the GPU"): the chunk form of §8.8 in three kernels forward:
// (1) one block per (sequence, head, chunk) makes the chunk's own contribution to the state,
// Xdᵀ·diag(w)·B, and the chunk's total decay exp(cs_Q); (2) one pass per (sequence, head) carries the
// state across the chunks (the only sequential part: nc steps of a [P, N] axpy) and keeps the state
// before each chunk; (3) one block per (sequence, head, chunk) writes Y = ((C Bᵀ) ⊙ L)(dt ⊙ X) +
// diag(e^cs) C S_pᵀ + D·X from tiles in shared memory. The backward mirrors it: per chunk the state
// gradient's local part (diag(e)dY)ᵀC, a reverse pass across chunks for dS, then one block per chunk
// for every gradient of §8.8. B and C are shared by the heads: their per-head gradients go to the
// workspace and are summed over the heads in a fixed order; the per-head parameters' gradients are
// summed from per-chunk partials likewise. No atomics: results are the same bit for bit run to run.
// TWO PATHS, chosen by the args' tensor_cores:
//   fp32 (false)  every product on the CUDA cores: fp32 FMAs from fp32 tiles in shared memory; the fp32
//                 and tf32 training steps and every shape mamba2_scan_unsupported takes.
//   bf16 (true)   the same kernels with every product of a chunk on the tensor cores (mma.sync m16n8k16,
//                 bf16 operands rounded in shared memory, fp32 accumulation): the forward's (dt·w·X)ᵀ·B,
//                 C Bᵀ, G·X and C·S_pᵀ; the backward's (diag(e)dY)ᵀC, C Bᵀ, dY·Xᵀ, Gᵀ·dY, B·dSᵀ, C·S_pᵀ,
//                 dGMᵀ·C, X·dS, dGM·B and dY·S_p. The segment sums and decays, the state pass across
//                 the chunks (states stored fp32), the D skip and the row sums of the decay gradients stay
//                 fp32. Chunks of 64, P and N of 32, 64 or 128 (mamba2_scan_tensor_cores_unsupported).
//                 The layer uses it when Mamba2LayerDims::scan_tensor_cores is set and the shape allows:
//                 the bf16 training step (train_cuda.cpp) sets it. Error against fp64 on bf16-valued
//                 inputs, relative to max|ref|: 1.7e-3 to 2.9e-3 forward, 2.3e-3 to 7.7e-3 backward
//                 over the tests' shapes (2⁻⁹ per rounded operand, averaged by the fp32 sums). The
//                 sums' order differs from the fp32 path's (shuffle scans, eight warps' tiles).
//
// CONVENTIONS. This header includes neither CUDA nor Eigen headers. Every pointer is a DEVICE pointer,
// fp32; matrices are row-major with the given row strides (a token is a row, R = B·T rows, sequence n's
// token t at row n·T + t). Calls are asynchronous on `stream`, validate their arguments first
// (std::invalid_argument, one line, nothing launched) and throw std::runtime_error when a launch fails.
// THREADING: no global state; calls may come from any thread.
//
// LAYOUTS of the scan (P = head dim, N = state size, Q = chunk, nc = ⌈T/Q⌉ chunks):
//   X, dX           [R, ≥ H·P], row stride ld_x: head h's P columns from column h·P
//   B, C, dB, dC    [R, ≥ N],   row stride ld_bc
//   dt_raw, ddt_raw [R, ≥ H],   row stride ld_dt: column h for head h
//   dt              [R, H] contiguous
//   Y, dY           [R, ≥ H·P], row stride ld_y
//   states          [B, H, nc, P, N]: the state S_h [P, N] before each chunk (zero before the first)
//   decay           [B, H, nc]: exp(cs_Q) of each chunk, the decay across it
// SHAPES (the fp32 path; the bf16 path: above): any B, H, T ≥ 1 (T need not be a multiple of Q);
// 1 ≤ P, N ≤ 128, 1 ≤ Q ≤ 64, and the backward's tiles in shared memory (mamba2_scan_unsupported says
// when they do not fit).
#pragma once

#include <cstddef>
#include <cstdint>
#include <functional>
#include <string>

struct CUstream_st;

namespace tttlab::kernels {

struct Mamba2ScanDims {
  int batch = 1;      // B
  int seq_len = 1;    // T
  int heads = 1;      // H
  int head_dim = 64;  // P
  int d_state = 64;   // N
  int chunk = 64;     // Q
  int chunks() const { return (seq_len + chunk - 1) / chunk; }
};

// Empty when the kernels take the shape, else why not (one line).
std::string mamba2_scan_unsupported(const Mamba2ScanDims& dims);
// Empty when the tensor-core path (the args' tensor_cores) takes the shape, else why not (one line):
// chunks of 64, head dim and state size of 32, 64 or 128.
std::string mamba2_scan_tensor_cores_unsupported(const Mamba2ScanDims& dims);
// Floats of `states` ([B, H, nc, P, N]) and of `decay` ([B, H, nc]).
std::size_t mamba2_state_floats(const Mamba2ScanDims& dims);
std::size_t mamba2_decay_floats(const Mamba2ScanDims& dims);

struct Mamba2ScanForwardArgs {
  Mamba2ScanDims dims;
  const float* X = nullptr;
  int ld_x = 0;
  const float* B = nullptr;
  const float* C = nullptr;
  int ld_bc = 0;
  const float* dt_raw = nullptr;
  int ld_dt = 0;
  const float* dt_bias = nullptr;  // [H]
  const float* A_log = nullptr;    // [H]
  const float* D = nullptr;        // [H]
  float* dt = nullptr;             // [R, H], OVERWRITTEN: softplus(dt_raw + dt_bias)
  float* Y = nullptr;              // OVERWRITTEN: the scan's output plus D·X
  int ld_y = 0;
  float* states = nullptr;    // OVERWRITTEN, kept for the backward
  float* decay = nullptr;     // OVERWRITTEN, kept for the backward
  bool tensor_cores = false;  // the chunk's products in bf16 on the tensor cores (see above)
  // The tensor-core output kernel's heads per block, which share the block's B and C tiles and
  // their product C Bᵀ (capped at H): 0 lets the shape choose (as many as leave 512 blocks); the
  // results are the same bits whatever it is. The tests set it.
  int heads_per_block = 0;
  CUstream_st* stream = nullptr;
};
void mamba2_scan_forward(const Mamba2ScanForwardArgs& args);

std::size_t mamba2_scan_backward_workspace_bytes(const Mamba2ScanDims& dims);

struct Mamba2ScanBackwardArgs {
  Mamba2ScanDims dims;
  // The forward's inputs and what it kept (dt, states, decay).
  const float* X = nullptr;
  int ld_x = 0;
  const float* B = nullptr;
  const float* C = nullptr;
  int ld_bc = 0;
  const float* dt_raw = nullptr;
  int ld_dt = 0;
  const float* dt_bias = nullptr;
  const float* A_log = nullptr;
  const float* D = nullptr;
  const float* dt = nullptr;
  const float* states = nullptr;
  const float* decay = nullptr;
  const float* dY = nullptr;  // the gradient of Y
  int ld_y = 0;
  float* dX = nullptr;  // OVERWRITTEN (with the D skip's D·dY)
  int ld_dx = 0;
  float* dB = nullptr;  // OVERWRITTEN: summed over the heads
  float* dC = nullptr;  // OVERWRITTEN
  int ld_dbc = 0;
  float* ddt_raw = nullptr;  // OVERWRITTEN: the gradient of dt_raw (through the softplus)
  int ld_ddt = 0;
  float* ddt_bias = nullptr;  // [H], ADDED TO
  float* dA_log = nullptr;    // [H], ADDED TO
  float* dD = nullptr;        // [H], ADDED TO
  void* workspace = nullptr;  // mamba2_scan_backward_workspace_bytes(dims), 16-byte aligned
  std::size_t workspace_bytes = 0;
  bool tensor_cores = false;  // the chunk's products in bf16 on the tensor cores (see above)
  // The tensor-core backward's heads per block, which share the block's B and C tiles and sum their
  // dB, dC in registers (capped at H): 0 lets the shape choose (as many as leave 256 blocks: every
  // head at B8 T2048, whose dB, dC are then written without a pass over a per-head workspace). Only
  // the order of the sums over heads in dB, dC depends on it. The tests set it.
  int heads_per_block = 0;
  CUstream_st* stream = nullptr;
};
void mamba2_scan_backward(const Mamba2ScanBackwardArgs& args);

// ---- the element-wise passes of the layer --------------------------------------------------------
// g [R, C] = y ⊙ silu(z): y contiguous, z with row stride ld_z.
void mamba2_gate_forward(const float* y, const float* z, int ld_z, int R, int C, float* g,
                         CUstream_st* stream);
// Its backward from dg [R, C]: dy = dg ⊙ silu(z) (contiguous, OVERWRITTEN), dz = dg ⊙ y ⊙ silu′(z)
// (row stride ld_dz, OVERWRITTEN).
void mamba2_gate_backward(const float* y, const float* z, int ld_z, const float* dg, int R, int C,
                          float* dy, float* dz, int ld_dz, CUstream_st* stream);
// out = silu(in) over n elements; din = dout ⊙ silu′(in) (din may alias dout).
void mamba2_silu_forward(const float* in, float* out, std::size_t n, CUstream_st* stream);
void mamba2_silu_backward(const float* in, const float* dout, float* din, std::size_t n,
                          CUstream_st* stream);

// The fused passes the layer runs where its shape allows (mamba2_layer_fused): float4 kernels that
// read in_proj's output zx in place and keep no intermediate the backward can recompute.
//
// normed [R, C] = RMSNorm(y ⊙ silu(z))·w (eps as the layer's norm), the gate and the norm in one pass:
// into out (fp32) or, with out16 given instead, only its bf16 rounding (the out_proj products' operand
// in the bf16 step). y contiguous, z with row stride ld_z; C a multiple of 4 up to 2048, ld_z a
// multiple of 4 (mamba2_gate_norm_supported); y, z, w, out 16-byte aligned, out16 8-byte.
bool mamba2_gate_norm_supported(int C, int ld_z);
void mamba2_gate_norm_forward(const float* y, const float* z, int ld_z, const float* w, int R,
                              int C, float eps, float* out, std::uint16_t* out16,
                              CUstream_st* stream);
// Its backward from dnormed [R, C], the gate's value recomputed from y and z: dy (contiguous,
// OVERWRITTEN), dz (row stride ld_dz, OVERWRITTEN) or, with dz16 given instead, only bf16(dz), and
// dw [C] ADDED TO. workspace: mamba2_gate_norm_backward_workspace(R, C) floats, 16-byte aligned.
std::size_t mamba2_gate_norm_backward_workspace(int R, int C);
void mamba2_gate_norm_backward(const float* y, const float* z, int ld_z, const float* w,
                               const float* dnormed, int R, int C, float eps, float* dy, float* dz,
                               std::uint16_t* dz16, int ld_dz, float* dw, float* workspace,
                               CUstream_st* stream);
// xbc [R, C] = silu(causal_conv(u) + bias) (causal_conv_forward's convolution, nn_ops.hpp), u read in
// place with row stride ld_u (zx's xBC columns): no contiguous copy of u and no stored pre-activation.
// K = 4 only; C and ld_u multiples of 4; u, xbc 16-byte aligned. (Defined in ops/causal_conv.cu.)
void mamba2_conv_silu_forward(const float* u, int ld_u, const float* w, const float* bias, int B,
                              int T, int C, int K, float* xbc, CUstream_st* stream);
// Its backward from dxbc [R, C] (read only), in one pass: dxbc·silu′ of the pre-activation
// recomputed from u as each row is read, then du into rows of stride ld_du (zx's gradient's xBC
// columns; OVERWRITTEN) or, with du16 given, only bf16(du) there (du may then be null), and
// dw [C, K], dbias [C] ADDED TO. workspace: mamba2_conv_silu_backward_workspace floats.
std::size_t mamba2_conv_silu_backward_workspace(int B, int T, int C, int K);
void mamba2_conv_silu_backward(const float* u, int ld_u, const float* w, const float* bias, int B,
                               int T, int C, int K, const float* dxbc, float* du,
                               std::uint16_t* du16, int ld_du, float* dw, float* dbias,
                               float* workspace, CUstream_st* stream);

// ---- the whole layer -------------------------------------------------------------------------------
// Row-major C [M, N] = op(A)·op(B) (+ C with accumulate) with leading dimensions, the contract of
// Gemm::operator() with alpha 1: the layer's two projections run through the caller's products (the
// training step's, in its precision). A16 / B16: the operand's bf16 rounding with the same row stride,
// given only with Mamba2LayerDims::bf16_products, where the fp32 operand is then not written (null, or
// scratch) and the product must read the bf16 one (Gemm::bf16's A16 / B16); null otherwise.
using Mamba2Product = std::function<void(
    bool ta, bool tb, int M, int N, int K, const float* A, const std::uint16_t* A16, int lda,
    const float* B, const std::uint16_t* B16, int ldb, float* C, int ldc, bool accumulate)>;

// Mamba2Config (tttlab/seq/mamba2_layer.hpp) for a batch of B sequences of T tokens.
struct Mamba2LayerDims {
  int batch = 1, seq_len = 1;
  int width = 64, d_state = 64, d_conv = 4, expand = 2, headdim = 64, chunk = 64;
  float norm_eps = 1e-5f;
  // The scan on the tensor cores (bf16 operands, fp32 accumulation) where its shape allows
  // (mamba2_scan_tensor_cores_unsupported), else in fp32: the bf16 training step sets it.
  bool scan_tensor_cores = false;
  // The products take bf16 operands (the bf16 training step sets it): where the fused passes run, the
  // layer then writes the products' activation operands (normed, in_proj's output gradient) only in
  // bf16 and hands them over as A16 / B16, the rounding the products would apply themselves.
  bool bf16_products = false;
  int rows() const { return batch * seq_len; }
  int d_inner() const { return expand * width; }
  int heads() const { return d_inner() / headdim; }
  int conv_dim() const { return d_inner() + 2 * d_state; }
  int in_width() const { return 2 * d_inner() + 2 * d_state + heads(); }
  Mamba2ScanDims scan() const { return {batch, seq_len, heads(), headdim, d_state, chunk}; }
};
// Empty when the layer runs on the GPU, else why not (the scan's limits; d_conv ≤ 16).
std::string mamba2_layer_unsupported(const Mamba2LayerDims& dims);
// Whether the layer runs its fused passes (the float4 kernels above: d_conv 4, d_inner, conv_dim and
// in_width multiples of 4, d_inner ≤ 2048: every preset), else the separate ones of the first version
// (a contiguous copy of xBC, the conv, silu, the gate and the RMSNorm op, each a pass).
bool mamba2_layer_fused(const Mamba2LayerDims& dims);

// The parameters in Mamba2Params' layouts (in_proj [D, in_width], conv_w [conv_dim, K], out_proj
// [d_inner, D], the others rows); the gradients alike, ADDED TO.
struct Mamba2LayerParams {
  const float *in_proj = nullptr, *conv_w = nullptr, *conv_b = nullptr, *dt_bias = nullptr,
              *A_log = nullptr, *D = nullptr, *norm_w = nullptr, *out_proj = nullptr;
};
struct Mamba2LayerGrads {
  float *in_proj = nullptr, *conv_w = nullptr, *conv_b = nullptr, *dt_bias = nullptr,
        *A_log = nullptr, *D = nullptr, *norm_w = nullptr, *out_proj = nullptr;
};

// What the forward keeps for the backward, in one allocation of mamba2_layer_cache_floats(dims)
// floats carved by mamba2_layer_cache: zx = x·in_proj [R, in_width], u = the convolution's input
// (zx's xBC columns, contiguous) [R, conv_dim], conv_pre, xbc = silu(conv_pre) [R, conv_dim], dt [R, H],
// y (scan + D·X) [R, d_inner], gated = y ⊙ silu(z), normed [R, d_inner], states, decay. With the
// fused passes (mamba2_layer_fused) u, conv_pre and gated are null (recomputed where needed), and
// with bf16_products too normed is null and normed16 holds bf16(normed) [R, d_inner].
struct Mamba2LayerCache {
  float *zx = nullptr, *u = nullptr, *conv_pre = nullptr, *xbc = nullptr, *dt = nullptr,
        *y = nullptr, *gated = nullptr, *normed = nullptr, *states = nullptr, *decay = nullptr;
  std::uint16_t* normed16 = nullptr;
};
std::size_t mamba2_layer_cache_floats(const Mamba2LayerDims& dims);
Mamba2LayerCache mamba2_layer_cache(const Mamba2LayerDims& dims, float* base);
// The backward's scratch, in floats (16-byte aligned base).
std::size_t mamba2_layer_workspace_floats(const Mamba2LayerDims& dims);

// out [R, D] = the layer applied to x [R, D], each sequence from the empty prefix.
void mamba2_layer_forward(const Mamba2Product& product, const Mamba2LayerDims& dims,
                          const Mamba2LayerParams& p, const float* x, const Mamba2LayerCache& cache,
                          float* out, CUstream_st* stream);
// From dOut [R, D]: dx [R, D] (OVERWRITTEN, or ADDED TO with accumulate) and every parameter's gradient
// ADDED TO g.
void mamba2_layer_backward(const Mamba2Product& product, const Mamba2LayerDims& dims,
                           const Mamba2LayerParams& p, const float* x,
                           const Mamba2LayerCache& cache, const float* dOut,
                           const Mamba2LayerGrads& g, float* dx, bool accumulate, float* workspace,
                           CUstream_st* stream);

}  // namespace tttlab::kernels
