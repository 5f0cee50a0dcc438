// Softmax cross-entropy (see tttlab/nn/cross_entropy.hpp).
#include "tttlab/nn/cross_entropy.hpp"

#include <cmath>
#include <string>

#include "checks.hpp"

namespace tttlab {

template <class S>
CrossEntropyStats softmax_cross_entropy(ConstMatRef<S> logits, std::span<const int> targets,
                                        Mat<S>* dlogits, Vec<S>* position_losses,
                                        long denominator) {
  const char* op = "softmax_cross_entropy";
  const Eigen::Index T = logits.rows(), V = logits.cols();
  if (static_cast<Eigen::Index>(targets.size()) != T)
    nn_detail::fail(op, "got " + std::to_string(targets.size()) + " targets for " +
                            std::to_string(T) + " rows of logits; one per row is required");
  if (V < 1) nn_detail::fail(op, "logits have no columns (vocabulary size 0)");
  if (denominator < 0)
    nn_detail::fail(op, "denominator must be > 0, or 0 for the counted positions");
  CrossEntropyStats stats;
  for (Eigen::Index t = 0; t < T; ++t) {
    const int y = targets[t];
    if (y == k_ignore_target) continue;
    if (y < 0 || y >= V)
      nn_detail::fail(op, "target " + std::to_string(y) + " at position " + std::to_string(t) +
                              " is outside [0, " + std::to_string(V) + ") and is not " +
                              std::to_string(k_ignore_target) + " (ignore)");
    ++stats.counted;
  }
  if (dlogits) {
    nn_detail::require_distinct(op, "dlogits", *dlogits, "logits", logits);
    dlogits->setZero(T, V);
  }
  if (position_losses) position_losses->setZero(T);
  const long denom = denominator > 0 ? denominator : stats.counted;
  const S grad_scale = denom > 0 ? S(1) / S(denom) : S(0);

  Eigen::Array<S, 1, Eigen::Dynamic> e(V);
  for (Eigen::Index t = 0; t < T; ++t) {
    const int y = targets[t];
    if (y == k_ignore_target) continue;
    const auto row = logits.row(t).array();
    // Row maximum and first argmax in one pass.
    Eigen::Index arg = 0;
    S m = row(0);
    for (Eigen::Index j = 1; j < V; ++j)
      if (row(j) > m) {
        m = row(j);
        arg = j;
      }
    e = (row - m).exp();
    const S sum = e.sum();
    // (m − l_y) first: exact for nearby values, where adding m to log(sum) first would round at
    // the scale of m.
    const S loss = std::log(sum) + (m - row(y));
    stats.loss_sum += double(loss);
    if (arg == y) ++stats.correct;
    if (position_losses) (*position_losses)(t) = loss;
    if (dlogits) {
      dlogits->row(t) = (e * (grad_scale / sum)).matrix();
      (*dlogits)(t, y) -= grad_scale;
    }
  }
  return stats;
}

template CrossEntropyStats softmax_cross_entropy<float>(ConstMatRef<float>, std::span<const int>,
                                                        Mat<float>*, Vec<float>*, long);
template CrossEntropyStats softmax_cross_entropy<double>(ConstMatRef<double>, std::span<const int>,
                                                         Mat<double>*, Vec<double>*, long);

}  // namespace tttlab
