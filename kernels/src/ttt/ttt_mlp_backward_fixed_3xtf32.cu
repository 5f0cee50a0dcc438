// One instance of the TTT-MLP backward kernel (ttt_mlp_backward.cuh): the compile-time training shape d = 64, b = 16, 3xTF32 products (version Default).
// A file of its own so that nvcc compiles the four instances in parallel.
#include "ttt/ttt_mlp_backward.cuh"

namespace tttlab::kernels::detail {

MlpBwdKernel mlp_backward_fixed_3xtf32() { return &mlp_backward_kernel<true, 64, 16>; }

}  // namespace tttlab::kernels::detail
