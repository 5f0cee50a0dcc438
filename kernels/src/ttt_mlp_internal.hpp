// Internal entry points of the TTT-MLP forward versions (ttt_mlp.cu, ttt_mlp_v3.cu). Arguments are
// already checked by ttt_mlp_forward. Private to kernels/src.
#pragma once

#include "tttlab/kernels/ttt.hpp"

namespace tttlab::kernels::detail {

// Version 3 (ttt_mlp_v3.cu): b = 16 and d ∈ {16, 32, 64} only, every matrix on chip.
bool mlp_forward_v3_supports(const TttDims& dims);
// checkpoints: whether args' checkpoint pointers are to be written (group ≥ 1, n_ck of that group).
void mlp_forward_v3(const TttMlpForwardArgs& args, bool checkpoints, int group, int n_ck);

}  // namespace tttlab::kernels::detail
