// Token embedding and tied LM head (see tttlab/nn/embedding.hpp).
#include "tttlab/nn/embedding.hpp"

#include <string>

#include "checks.hpp"

namespace tttlab {
namespace {

void check_tokens(const char* op, std::span<const int> tokens, Eigen::Index V) {
  for (std::size_t t = 0; t < tokens.size(); ++t)
    if (tokens[t] < 0 || tokens[t] >= V) {
      std::string msg("token ");
      msg += std::to_string(tokens[t]);
      msg += " at position ";
      msg += std::to_string(t);
      msg += " is outside the vocabulary [0, ";
      msg += std::to_string(V);
      msg += ")";
      nn_detail::fail(op, msg);
    }
}

}  // namespace

using nn_detail::require_distinct;
using nn_detail::require_shape;

template <class S>
void embedding_forward(ConstMatRef<S> E, std::span<const int> tokens, Mat<S>& H) {
  const char* op = "embedding_forward";
  check_tokens(op, tokens, E.rows());
  require_distinct(op, "H", H, "E", E);
  const auto T = static_cast<Eigen::Index>(tokens.size());
  H.resize(T, E.cols());
  for (Eigen::Index t = 0; t < T; ++t) H.row(t) = E.row(tokens[t]);
}

template <class S>
void embedding_backward(std::span<const int> tokens, ConstMatRef<S> dH, MatRef<S> dE) {
  const char* op = "embedding_backward";
  check_tokens(op, tokens, dE.rows());
  require_shape(op, "dH", dH, static_cast<Eigen::Index>(tokens.size()), dE.cols(),
                "one row per token, width of dE");
  for (Eigen::Index t = 0; t < dH.rows(); ++t) dE.row(tokens[t]) += dH.row(t);
}

template <class S>
void tied_head_forward(ConstMatRef<S> Hf, ConstMatRef<S> E, Mat<S>& logits) {
  const char* op = "tied_head_forward";
  require_shape(op, "E", E, E.rows(), Hf.cols(), "[V, D] with D = width of Hf");
  require_distinct(op, "logits", logits, "Hf", Hf);
  require_distinct(op, "logits", logits, "E", E);
  logits.resize(Hf.rows(), E.rows());
  logits.noalias() = Hf * E.transpose();
}

template <class S>
void tied_head_backward(ConstMatRef<S> Hf, ConstMatRef<S> E, ConstMatRef<S> dlogits, Mat<S>* dHf,
                        MatRef<S> dE) {
  const char* op = "tied_head_backward";
  require_shape(op, "E", E, E.rows(), Hf.cols(), "[V, D] with D = width of Hf");
  require_shape(op, "dlogits", dlogits, Hf.rows(), E.rows(), "[T, V]");
  require_shape(op, "dE", dE, E.rows(), E.cols(), "same as E");
  if (dHf) {
    require_distinct(op, "dHf", *dHf, "dlogits", dlogits);
    require_distinct(op, "dHf", *dHf, "E", E);
    dHf->resize(Hf.rows(), Hf.cols());
    dHf->noalias() = dlogits * E;
  }
  dE.noalias() += dlogits.transpose() * Hf;
}

#define TTTLAB_INSTANTIATE(S)                                                                      \
  template void embedding_forward<S>(ConstMatRef<S>, std::span<const int>, Mat<S>&);              \
  template void embedding_backward<S>(std::span<const int>, ConstMatRef<S>, MatRef<S>);           \
  template void tied_head_forward<S>(ConstMatRef<S>, ConstMatRef<S>, Mat<S>&);                    \
  template void tied_head_backward<S>(ConstMatRef<S>, ConstMatRef<S>, ConstMatRef<S>, Mat<S>*,    \
                                      MatRef<S>);
TTTLAB_INSTANTIATE(float)
TTTLAB_INSTANTIATE(double)
#undef TTTLAB_INSTANTIATE

}  // namespace tttlab
