// Internal entry points of the TTT-Linear forward versions (ttt_linear.cu, ttt_linear_v2.cu).
// Arguments are already checked by ttt_linear_forward. Private to kernels/src.
#pragma once

#include "tttlab/kernels/ttt.hpp"

namespace tttlab::kernels::detail {

void linear_forward_v1(const TttLinearForwardArgs& args);

// Tensor-core forward (mma.sync m16n8k8 tf32); split = true: 3xTF32 (fp32-level accuracy),
// false: one tf32 product per term.
bool linear_forward_v2_supports(const TttDims& dims);
void linear_forward_v2(const TttLinearForwardArgs& args, bool split);

}  // namespace tttlab::kernels::detail
