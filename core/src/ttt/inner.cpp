// The TTT inner loop, dual and primal forms (see tttlab/ttt/inner.hpp; maths in docs/MATH.md §3–§6).
//
// Notation inside this file, for one chunk of m tokens that lies inside one mini-batch and starts at
// position p0 of it:  W, c = state.base (the mini-batch start state); A_W, A_c = state.acc (the
// λ-weighted gradient sums of the tokens of this mini-batch seen before the chunk); τ_c = τ[p0..p0+m).
// The dual read-out of token i of the chunk is
//     z̄_i = q_i W + c − τ_i (q_i A_W + A_c) − Σ_{j≤i} τ_i λ_j (q_i·k_j + 1) g_j
// i.e. Z̄ = QW + 1c − diag(τ_c)(Q A_W + 1 A_c) − M G with M = tril(τ_i λ_j (QKᵀ + 11ᵀ)). With p0 = 0
// and A = 0 this is exactly the official per-mini-batch dual form. The "+1" term is the bias update;
// it disappears when the inner bias is switched off.
#include "tttlab/ttt/inner.hpp"

#include <algorithm>
#include <stdexcept>
#include <string>

#include "tttlab/nn/activations.hpp"
#include "tttlab/ttt/ln_l2.hpp"
#include "inner_common.hpp"

namespace tttlab {
namespace {

using inner_detail::affine;
using inner_detail::gelu;
using inner_detail::gelu_grad;
using inner_detail::loss_grad;
using inner_detail::mlp_forward;
using inner_detail::target;

template <class S>
void check_inputs(const InnerOptions& opt, const InnerHeadParams<S>& p, ConstMatRef<S> Q,
                  ConstMatRef<S> K, ConstMatRef<S> V, const Vec<S>& lambda,
                  const InnerState<S>& st) {
  const auto T = Q.rows(), d = Q.cols();
  if (K.rows() != T || V.rows() != T || K.cols() != d || V.cols() != d || lambda.size() != T)
    throw std::invalid_argument("inner loop: Q, K, V must be [T, d] and lambda [T]");
  if (opt.mini_batch < 1) throw std::invalid_argument("inner loop: mini_batch must be >= 1");
  if (p.tau.size() != opt.mini_batch)
    throw std::invalid_argument("inner loop: tau must have mini_batch entries");
  if (p.ln_weight.size() != d || p.ln_bias.size() != d)
    throw std::invalid_argument("inner loop: LayerNorm weights must be [d]");
  if (st.pos < 0 || st.pos >= opt.mini_batch)
    throw std::invalid_argument("inner loop: state position outside the mini-batch");
  if (st.base.W1.rows() != d) throw std::invalid_argument("inner loop: state W1 must have d rows");
}

// Output of the head: O = [Q +] LN(Z̄)   (or Z̄ without the LN).
template <class S>
void head_output(const InnerOptions& opt, const InnerHeadParams<S>& p, ConstMatRef<S> Q,
                 const Mat<S>& Zbar, MatRef<S> out) {
  if (opt.layer_norm) {
    Mat<S> Y;
    layer_norm_rows<S>(Zbar, p.ln_weight, p.ln_bias, S(opt.ln_eps), Y);
    out = Y;
  } else {
    out = Zbar;
  }
  if (opt.residual) out += Q;
}

// M[i, j] = τ_i λ_j (A[i, j] + one) for j ≤ i, 0 above the diagonal.
template <class S>
Mat<S> masked_eta(const Mat<S>& A, const Vec<S>& tau_c, const Vec<S>& lambda_c, S one) {
  const Eigen::Index m = A.rows();
  Mat<S> M = Mat<S>::Zero(m, m);
  for (Eigen::Index i = 0; i < m; ++i)
    for (Eigen::Index j = 0; j <= i; ++j) M(i, j) = tau_c(i) * lambda_c(j) * (A(i, j) + one);
  return M;
}

// Commit the mini-batch: base ← base − τ_b·acc, acc ← 0.
template <class S>
void commit(const InnerHeadParams<S>& p, InnerState<S>& st) {
  st.base.sub_scaled(st.acc, p.tau(p.tau.size() - 1));
  st.acc.set_zero();
  st.pos = 0;
}

// ---- Dual form, one chunk inside one mini-batch ---------------------------------------------------

// One layer's dual read-out, never forming W_i: Z̄ = Xq W − diag(τ)(Xq A) − M G, plus c − τ a with a
// bias, where W, c are the layer's weights at the mini-batch start, A, a what the chunks before
// accumulated, G the layer's gradient on the keys Xk and M = masked_eta(Xq Xkᵀ).
template <class S, class Query, class Key>
Mat<S> dual_readout(const InnerOptions& opt, const Query& Xq, const Key& Xk, const Mat<S>& W,
                    const RowVec<S>& c, const Mat<S>& A, const RowVec<S>& a, const Mat<S>& G,
                    const Vec<S>& tau_c, const Vec<S>& lam, S one) {
  const Mat<S> M = masked_eta<S>(Xq * Xk.transpose(), tau_c, lam, one);
  Mat<S> Zbar = Xq * W;
  Zbar.noalias() -= tau_c.asDiagonal() * (Xq * A);
  Zbar.noalias() -= M * G;
  if (opt.bias) {
    Zbar.rowwise() += c;
    Zbar.noalias() -= tau_c * a;  // outer product: row i gets τ_i·a
  }
  return Zbar;
}

template <class S>
void dual_chunk_linear(const InnerOptions& opt, const InnerHeadParams<S>& p, ConstMatRef<S> Q,
                       ConstMatRef<S> K, ConstMatRef<S> V, const Vec<S>& lam, InnerState<S>& st,
                       MatRef<S> out) {
  const Eigen::Index m = Q.rows();
  const Vec<S> tau_c = p.tau.segment(st.pos, m);
  const InnerWeights<S>& w = st.base;
  const S one = opt.bias ? S(1) : S(0);

  // 1–3: inner forward on the training view at the mini-batch start state and its gradient.
  const Mat<S> Z = affine<S>(opt, K, w.W1, w.b1);
  Mat<S> G;
  loss_grad(opt, p, Z, target<S>(opt, K, V), G);

  // 4: dual read-out.
  const Mat<S> Zbar = dual_readout<S>(opt, Q, K, w.W1, w.b1, st.acc.W1, st.acc.b1, G, tau_c, lam, one);
  head_output(opt, p, Q, Zbar, out);

  // 6: accumulate this chunk's λ-weighted gradients.
  st.acc.W1.noalias() += K.transpose() * (lam.asDiagonal() * G);
  if (opt.bias) st.acc.b1.noalias() += lam.transpose() * G;
}

template <class S>
void dual_chunk_mlp(const InnerOptions& opt, const InnerHeadParams<S>& p, ConstMatRef<S> Q,
                    ConstMatRef<S> K, ConstMatRef<S> V, const Vec<S>& lam, InnerState<S>& st,
                    MatRef<S> out) {
  const Eigen::Index m = Q.rows();
  const Vec<S> tau_c = p.tau.segment(st.pos, m);
  const InnerWeights<S>& w = st.base;
  const S one = opt.bias ? S(1) : S(0);

  // Forward and plain backprop through the mini-batch start state (docs/MATH.md §5).
  const auto [Z1, X2, Z2] = mlp_forward<S>(opt, K, w);
  Mat<S> G2;
  loss_grad(opt, p, Z2, target<S>(opt, K, V), G2);
  const Mat<S> G1 = (G2 * w.W2.transpose()).cwiseProduct(gelu_grad(Z1));

  // Layer 1 dual read-out (query Q, key K), then layer 2 (query X̄2, key X2).
  const Mat<S> Xbar2 =
      gelu(dual_readout<S>(opt, Q, K, w.W1, w.b1, st.acc.W1, st.acc.b1, G1, tau_c, lam, one));
  const Mat<S> Zbar2 =
      dual_readout<S>(opt, Xbar2, X2, w.W2, w.b2, st.acc.W2, st.acc.b2, G2, tau_c, lam, one);
  head_output(opt, p, Q, Zbar2, out);

  st.acc.W1.noalias() += K.transpose() * (lam.asDiagonal() * G1);
  st.acc.W2.noalias() += X2.transpose() * (lam.asDiagonal() * G2);
  if (opt.bias) {
    st.acc.b1.noalias() += lam.transpose() * G1;
    st.acc.b2.noalias() += lam.transpose() * G2;
  }
}

}  // namespace

// ---- InnerWeights / InnerState ---------------------------------------------------------------------

template <class S>
InnerWeights<S> InnerWeights<S>::zeros(const InnerOptions& opt, int d) {
  InnerWeights w;
  if (opt.model == InnerModel::Linear) {
    w.W1 = Mat<S>::Zero(d, d);
    w.b1 = RowVec<S>::Zero(d);
  } else {
    const int h = opt.mlp_expansion * d;
    w.W1 = Mat<S>::Zero(d, h);
    w.b1 = RowVec<S>::Zero(h);
    w.W2 = Mat<S>::Zero(h, d);
    w.b2 = RowVec<S>::Zero(d);
  }
  return w;
}

template <class S>
void InnerWeights<S>::set_zero() {
  W1.setZero();
  b1.setZero();
  W2.setZero();
  b2.setZero();
}

template <class S>
void InnerWeights<S>::sub_scaled(const InnerWeights& o, S s) {
  W1 -= s * o.W1;
  b1 -= s * o.b1;
  W2 -= s * o.W2;
  b2 -= s * o.b2;
}

template <class S>
InnerState<S> InnerState<S>::start(const InnerWeights<S>& initial) {
  InnerState st;
  st.base = initial;
  st.acc = initial;
  st.acc.set_zero();
  st.pos = 0;
  return st;
}

template <class S>
InnerWeights<S> InnerState<S>::current_weights(const Vec<S>& tau) const {
  InnerWeights<S> w = base;
  if (pos > 0) w.sub_scaled(acc, tau(pos - 1));
  return w;
}

// ---- Single-token helpers ---------------------------------------------------------------------------

template <class S>
RowVec<S> inner_apply(const InnerOptions& opt, const InnerWeights<S>& W, const RowVec<S>& q) {
  RowVec<S> z = q * W.W1;
  if (opt.bias) z += W.b1;
  if (opt.model == InnerModel::Linear) return z;
  RowVec<S> x2 = z.unaryExpr([](S x) { return gelu_tanh(x); });
  RowVec<S> z2 = x2 * W.W2;
  if (opt.bias) z2 += W.b2;
  return z2;
}

template <class S>
S inner_loss(const InnerOptions& opt, const InnerHeadParams<S>& p, const InnerWeights<S>& W,
             const RowVec<S>& k, const RowVec<S>& v) {
  const RowVec<S> r = opt.residual ? RowVec<S>(v - k) : v;
  return ln_l2_loss<S>(inner_apply(opt, W, k), r, p.ln_weight, p.ln_bias, S(opt.ln_eps),
                       opt.layer_norm);
}

// ---- Dual form ---------------------------------------------------------------------------------------

template <class S>
void inner_forward_dual(const InnerOptions& opt, const InnerHeadParams<S>& p, ConstMatRef<S> Q,
                        ConstMatRef<S> K, ConstMatRef<S> V, const Vec<S>& lambda,
                        InnerState<S>& st, Mat<S>& out) {
  check_inputs(opt, p, Q, K, V, lambda, st);
  const Eigen::Index T = Q.rows(), d = Q.cols();
  out.resize(T, d);
  const int b = opt.mini_batch;
  for (Eigen::Index t = 0; t < T;) {
    // A chunk ends at the next mini-batch boundary or at the end of the input.
    const Eigen::Index m = std::min<Eigen::Index>(b - st.pos, T - t);
    const Vec<S> lam = lambda.segment(t, m);
    MatRef<S> o = out.middleRows(t, m);
    if (opt.model == InnerModel::Linear)
      dual_chunk_linear<S>(opt, p, Q.middleRows(t, m), K.middleRows(t, m), V.middleRows(t, m), lam,
                           st, o);
    else
      dual_chunk_mlp<S>(opt, p, Q.middleRows(t, m), K.middleRows(t, m), V.middleRows(t, m), lam, st,
                        o);
    st.pos += static_cast<int>(m);
    t += m;
    if (st.pos == b) commit(p, st);
  }
}

// ---- Primal form ---------------------------------------------------------------------------------------
//
// The reference: every quantity is formed explicitly, token by token. The gradient of token t is taken
// at state.base (the mini-batch start state) and added to the accumulator; the weights in effect for
// token t are materialised as W_t = base − τ_pos·acc and used for the read-out.

template <class S>
void inner_forward_primal(const InnerOptions& opt, const InnerHeadParams<S>& p, ConstMatRef<S> Q,
                          ConstMatRef<S> K, ConstMatRef<S> V, const Vec<S>& lambda,
                          InnerState<S>& st, Mat<S>& out, const InnerObserver<S>& observer,
                          const InnerWeights<S>* initial) {
  check_inputs(opt, p, Q, K, V, lambda, st);
  const Eigen::Index T = Q.rows(), d = Q.cols();
  out.resize(T, d);
  const int b = opt.mini_batch;
  const bool mlp = opt.model == InnerModel::MLP;

  InnerWeights<S> w_before, w_after;
  for (Eigen::Index t = 0; t < T; ++t) {
    const RowVec<S> q = Q.row(t), k = K.row(t), v = V.row(t);
    const RowVec<S> r = opt.residual ? RowVec<S>(v - k) : v;
    const S lam = lambda(t);
    const int pos = st.pos;
    if (observer) w_before = st.current_weights(p.tau);

    // Gradient of ℓ_t at the mini-batch start state.
    const InnerWeights<S>& w = st.base;
    RowVec<S> g1, x2, g2;
    if (!mlp) {
      RowVec<S> z = k * w.W1;
      if (opt.bias) z += w.b1;
      Mat<S> G;
      loss_grad<S>(opt, p, z, r, G);
      g1 = G.row(0);
      st.acc.W1.noalias() += lam * (k.transpose() * g1);
      if (opt.bias) st.acc.b1 += lam * g1;
    } else {
      RowVec<S> z1 = k * w.W1;
      if (opt.bias) z1 += w.b1;
      x2 = z1.unaryExpr([](S x) { return gelu_tanh(x); });
      RowVec<S> z2 = x2 * w.W2;
      if (opt.bias) z2 += w.b2;
      Mat<S> G;
      loss_grad<S>(opt, p, z2, r, G);
      g2 = G.row(0);
      g1 = (g2 * w.W2.transpose()).cwiseProduct(z1.unaryExpr([](S x) { return gelu_tanh_grad(x); }));
      st.acc.W1.noalias() += lam * (k.transpose() * g1);
      st.acc.W2.noalias() += lam * (x2.transpose() * g2);
      if (opt.bias) {
        st.acc.b1 += lam * g1;
        st.acc.b2 += lam * g2;
      }
    }

    // Materialise W_t and read out.
    st.pos = pos + 1;
    w_after = st.current_weights(p.tau);
    const RowVec<S> zbar = inner_apply(opt, w_after, q);
    RowVec<S> o;
    if (opt.layer_norm) {
      Mat<S> Y;
      layer_norm_rows<S>(zbar, p.ln_weight, p.ln_bias, S(opt.ln_eps), Y);
      o = Y.row(0);
    } else {
      o = zbar;
    }
    if (opt.residual) o += q;
    out.row(t) = o;

    if (observer) {
      InnerStepRecord<S> rec;
      rec.token = t;
      rec.pos = pos;
      rec.lambda = lam;
      rec.tau = p.tau(pos);
      rec.loss_initial = initial ? inner_loss(opt, p, *initial, k, v) : S(0);
      rec.loss_before = inner_loss(opt, p, w_before, k, v);
      rec.loss_after = inner_loss(opt, p, w_after, k, v);
      rec.k = &k;
      rec.grad_z = &g1;
      rec.x2 = mlp ? &x2 : nullptr;
      rec.grad_z2 = mlp ? &g2 : nullptr;
      rec.w_before = &w_before;
      rec.w_after = &w_after;
      rec.output = &o;
      observer(rec);
    }
    if (st.pos == b) {
      // Commit: the state becomes W_b exactly as materialised above.
      st.base = w_after;
      st.acc.set_zero();
      st.pos = 0;
    }
  }
}

#define TTTLAB_INSTANTIATE(S)                                                                        \
  template struct InnerWeights<S>;                                                                   \
  template struct InnerState<S>;                                                                     \
  template void inner_forward_dual<S>(const InnerOptions&, const InnerHeadParams<S>&,                \
                                      ConstMatRef<S>, ConstMatRef<S>, ConstMatRef<S>,                \
                                      const Vec<S>&, InnerState<S>&, Mat<S>&);                       \
  template void inner_forward_primal<S>(const InnerOptions&, const InnerHeadParams<S>&,              \
                                        ConstMatRef<S>, ConstMatRef<S>, ConstMatRef<S>,              \
                                        const Vec<S>&, InnerState<S>&, Mat<S>&,                      \
                                        const InnerObserver<S>&, const InnerWeights<S>*);            \
  template S inner_loss<S>(const InnerOptions&, const InnerHeadParams<S>&, const InnerWeights<S>&,   \
                           const RowVec<S>&, const RowVec<S>&);                                      \
  template RowVec<S> inner_apply<S>(const InnerOptions&, const InnerWeights<S>&, const RowVec<S>&);
TTTLAB_INSTANTIATE(float)
TTTLAB_INSTANTIATE(double)
#undef TTTLAB_INSTANTIATE

}  // namespace tttlab
