// Internal entry points of the TTT-Linear forward versions (ttt_linear.cu, ttt_linear_v2.cu).
// Arguments are already checked by ttt_linear_forward. Private to kernels/src.
#pragma once

#include <cstddef>

#include "tttlab/kernels/ttt.hpp"

struct CUstream_st;

namespace tttlab::kernels::detail {

void linear_forward_v1(const TttLinearForwardArgs& args);

// Tensor-core forward (mma.sync m16n8k8 tf32); split = true: 3xTF32 (fp32-level accuracy),
// false: one tf32 product per term.
bool linear_forward_v2_supports(const TttDims& dims);
void linear_forward_v2(const TttLinearForwardArgs& args, bool split);
// Versions 4/5 (ttt_linear_v4.cu): the same shapes as version 2, fewer instructions.
void linear_forward_v4(const TttLinearForwardArgs& args, bool split);

// The backward kernels' parameters (one block per (sequence, head)); see ttt_linear.cu.
struct BwdParams {
  const float *Q, *K, *V, *lam, *tau, *gamma, *beta, *ckW, *ckb, *dO;
  float *dQ, *dK, *dV, *dlam;
  float* slots;    // [BH, group, d·d + d]: the states inside the group being walked
  float* scratch;  // [BH, floats per block] when the block's matrices do not fit in shared memory
  float *pW, *pb, *pgam, *pbet, *ptau;  // per-block partials [BH, d·d], [BH, d] ×3, [BH, b]
  int B, H, T, d, b, group, n_ck;
  bool ln, res, bias;
  float eps;
};

// Backward v2 (ttt_linear_bwd_v2.cu): the v1 algorithm with every matrix product on tensor cores
// (block_mma, 3xTF32). Floats of one block's matrices, and the launch.
std::size_t bwd_v2_floats(int d, int b);
void launch_linear_backward_v2(const BwdParams& p, std::size_t smem_bytes, CUstream_st* stream);

// Backward v3 (ttt_linear_bwd_v3.cu): the forward's register design (d/16 warps, each owning 16
// columns of every tile and of the carry dW'), b = 16 and d ∈ {16, 32, 64} only. Its block keeps
// everything in shared memory (bwd_v3_smem_bytes) and needs Q, K, V, dO, dQ, dK, dV 16-byte aligned
// and no scratch.
bool bwd_v3_supports(int d, int b);
std::size_t bwd_v3_smem_bytes(int d);
void launch_linear_backward_v3(const BwdParams& p, CUstream_st* stream);

}  // namespace tttlab::kernels::detail
