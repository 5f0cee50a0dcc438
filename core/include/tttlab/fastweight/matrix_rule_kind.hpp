// tttlab/fastweight/matrix_rule_kind.hpp — the names of the matrix fast-weight members whose inner
// loops tttlab/fastweight/matrix_rules.hpp computes (docs/MATH.md §11.2), apart from that header so
// that code which must not see Eigen (the CUDA kernels' headers and device code) can name a rule.
#pragma once

namespace tttlab {

enum class MatrixRule { LinearAttention, DecayedHebbian, DeltaNet, GatedDeltaNet };

const char* to_string(MatrixRule rule);
bool uses_beta(MatrixRule rule);      // all but LinearAttention
bool uses_alpha(MatrixRule rule);     // DecayedHebbian, GatedDeltaNet
bool is_delta_rule(MatrixRule rule);  // DeltaNet, GatedDeltaNet (squared loss)

}  // namespace tttlab
