// One instance of the TTT-MLP backward kernel (ttt_mlp_backward.cuh): the run-time shape (d and b read from the parameters), one tf32 product per term (version Tf32).
// A file of its own so that nvcc compiles the four instances in parallel.
#include "ttt/ttt_mlp_backward.cuh"

namespace tttlab::kernels::detail {

MlpBwdKernel mlp_backward_runtime_tf32() { return &mlp_backward_kernel<false, 0, 0>; }

}  // namespace tttlab::kernels::detail
