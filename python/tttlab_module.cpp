// python/tttlab_module.cpp — the extension `tttlab._tttlab` (docs/PYTHON.md): a trained model loaded
// from a checkpoint, scored, inspected and sampled from NumPy, by the functions `tttlab eval`,
// `tttlab states` and `tttlab generate` call (tttlab/train/text_score.hpp, inspect/hidden_states.hpp,
// tttlab/model/decoder.hpp), so that the arrays equal the command line's bit for bit; and one head's
// inner loop (TTT-Linear, the matrix fast-weight rules) forward in both forms and backward by the
// compute engine's manual backward (tttlab/ttt/inner_backward.hpp, tttlab/fastweight/matrix_rules.hpp),
// on the caller's arrays or on a model's own head (Model.head_inputs, the stepper's inputs); a whole
// TTT layer, a whole DeltaNet or Gated DeltaNet layer and a whole Mamba-2, Titans or LaCT layer from
// NumPy weights, forward and backward (tttlab/ttt/layer.hpp, tttlab/seq/deltanet_layer.hpp,
// mamba2_layer.hpp, titans_layer.hpp, lact_layer.hpp); and
// `tttlab train --device cpu` (tttlab.train, by the same TrainingSession).
//
// ERRORS. The engine's exceptions pass through with their messages: std::invalid_argument becomes
// ValueError, other std::exception RuntimeError (pybind11's translation); a checkpoint path that
// does not exist raises FileNotFoundError; a text that is neither str nor bytes raises TypeError.
//
// THREADS. The GIL is released while the engine computes, so that other Python threads run; the long
// calls (eval, states, generate, train) take it back at their progress points to look for Ctrl-C. Arrays
// are built from the engine's results once (one copy, in C++ without the GIL) and handed to NumPy
// without a further copy: each array owns its buffer through a capsule.
#include <pybind11/numpy.h>
#include <pybind11/pybind11.h>
#include <pybind11/stl.h>

#include <algorithm>
#include <atomic>
#include <cmath>
#include <filesystem>
#include <memory>
#include <optional>
#include <set>
#include <sstream>
#include <string>
#include <thread>
#include <variant>
#include <vector>

#include "inspect/hidden_states.hpp"
#include "lab/engine/head_inputs.hpp"
#include "tttlab/data/text_file.hpp"
#include "tttlab/fastweight/matrix_rules.hpp"
#include "tttlab/io/limits.hpp"
#include "tttlab/model/checkpoint.hpp"
#include "tttlab/model/decoder.hpp"
#include "tttlab/model/model.hpp"
#include "tttlab/model/model_choice.hpp"
#include "tttlab/seq/deltanet_layer.hpp"
#include "tttlab/seq/lact_layer.hpp"
#include "tttlab/seq/mamba2_layer.hpp"
#include "tttlab/seq/titans_layer.hpp"
#include "tttlab/train/metrics.hpp"
#include "tttlab/train/session.hpp"
#include "tttlab/train/text_score.hpp"
#include "tttlab/ttt/inner.hpp"
#include "tttlab/ttt/inner_backward.hpp"
#include "tttlab/ttt/layer.hpp"
#include "tttlab/util/rng.hpp"

namespace py = pybind11;

namespace tttlab::python {
namespace {

// A NumPy array that takes ownership of `v` (no copy).
template <class T>
py::array_t<T> to_numpy(std::vector<T>&& v, std::vector<py::ssize_t> shape) {
  auto* owner = new std::vector<T>(std::move(v));
  py::capsule free_owner(owner, [](void* p) { delete static_cast<std::vector<T>*>(p); });
  return py::array_t<T>(std::move(shape), owner->data(), free_owner);
}

// The bytes of a str (UTF-8) or of a bytes-like object; TypeError for anything else.
std::vector<std::uint8_t> text_bytes(const py::handle& text, const char* name) {
  std::string s;
  if (py::isinstance<py::str>(text)) {
    s = text.cast<std::string>();  // UTF-8
  } else if (py::isinstance<py::bytes>(text) || py::isinstance<py::bytearray>(text) ||
             py::isinstance<py::memoryview>(text)) {
    s = py::bytes(py::reinterpret_borrow<py::object>(text)).cast<std::string>();
  } else {
    throw py::type_error(std::string(name) + " must be str or bytes, got " +
                         py::str(py::type::handle_of(text).attr("__name__")).cast<std::string>());
  }
  return {s.begin(), s.end()};
}

// One int or a sequence of ints (None: empty, meaning every block or head).
std::vector<int> int_list(const py::object& o) {
  if (o.is_none()) return {};
  if (py::isinstance<py::int_>(o)) return {o.cast<int>()};
  return o.cast<std::vector<int>>();
}

// ---- Ctrl-C during a long call --------------------------------------------------------------------
// A call that computes without the GIL looks for Ctrl-C at the engine's own progress points (after a
// window, a block, a token): check() there. Python handles signals only on the main thread, so the
// thread that made the call takes the GIL back for PyErr_CheckSignals; the engine's worker threads,
// which may call the same hook, only read the flag it sets. On Ctrl-C check() throws Interrupted, which
// unwinds the engine as any exception does (run_parallel rethrows the first one after every worker has
// finished), and the binding, with the GIL again, raises the KeyboardInterrupt (or the signal handler's
// own exception) with rethrow().
struct Interrupted {};

class Interrupt {
 public:
  void check() {
    if (std::this_thread::get_id() == m_caller && !m_stop.load()) {
      py::gil_scoped_acquire gil;
      if (PyErr_CheckSignals() != 0) {
        m_error.emplace();  // fetches the exception the handler set
        m_stop.store(true);
      }
    }
    if (m_stop.load()) throw Interrupted{};
  }
  // With the GIL held, after the engine has returned or unwound.
  void rethrow() {
    if (m_error) throw std::move(*m_error);
  }

 private:
  std::thread::id m_caller = std::this_thread::get_id();
  std::atomic<bool> m_stop{false};
  std::optional<py::error_already_set> m_error;
};

// ---- One TTT-Linear head's inner loop on the caller's arrays (tttlab/ttt/inner.hpp) ----------------
template <class S>
using Arr = py::array_t<S, py::array::c_style | py::array::forcecast>;

// `a` as a row-major [rows, cols] matrix; ValueError naming `name` when its shape differs.
template <class S>
Mat<S> matrix(const py::object& o, const char* name, py::ssize_t rows, py::ssize_t cols) {
  const Arr<S> a = Arr<S>::ensure(o);
  if (!a || a.ndim() != 2 || (rows >= 0 && a.shape(0) != rows) || a.shape(1) != cols)
    throw std::invalid_argument(std::string(name) + " must be a 2-D array of shape [" +
                                (rows >= 0 ? std::to_string(rows) : std::string("T")) + ", " +
                                std::to_string(cols) + "]");
  Mat<S> m(a.shape(0), a.shape(1));
  std::copy(a.data(), a.data() + a.size(), m.data());
  return m;
}

template <class S>
std::vector<S> vector(const py::object& o, const char* name, py::ssize_t n) {
  const Arr<S> a = Arr<S>::ensure(o);
  if (!a || a.ndim() != 1 || a.shape(0) != n)
    throw std::invalid_argument(std::string(name) + " must be a 1-D array of length " +
                                std::to_string(n));
  return std::vector<S>(a.data(), a.data() + a.size());
}

// The checks every array argument passes before its values are read: a real (integer or floating)
// array, else TypeError naming the argument.
py::array real_array(const py::object& o, const char* name) {
  py::array a = py::array::ensure(o);
  const char kind = a ? a.dtype().kind() : 'O';
  if (kind != 'f' && kind != 'i' && kind != 'u')
    throw py::type_error(
        std::string(name) + " must be an array of real numbers (float32 or float64), got " +
        (a ? "dtype " + py::str(a.dtype()).cast<std::string>()
           : py::str(py::type::handle_of(o).attr("__name__")).cast<std::string>()));
  return a;
}

// The shape of `o` as an array: ValueError naming `name` unless it has `dims` (a −1 entry: any size).
void check_shape(const py::object& o, const char* name, std::vector<py::ssize_t> dims) {
  const py::array a = real_array(o, name);
  bool ok = a.ndim() == static_cast<py::ssize_t>(dims.size());
  for (std::size_t i = 0; ok && i < dims.size(); ++i)
    ok = dims[i] < 0 || a.shape(static_cast<py::ssize_t>(i)) == dims[i];
  if (ok) return;
  std::string want, got;
  for (std::size_t i = 0; i < dims.size(); ++i) {
    if (i) want += ", ";
    want += dims[i] < 0 ? std::string("any") : std::to_string(dims[i]);
  }
  for (py::ssize_t i = 0; i < a.ndim(); ++i) {
    if (i) got += ", ";
    got += std::to_string(a.shape(i));
  }
  if (dims.size() == 1 && dims[0] >= 0)
    throw std::invalid_argument(std::string(name) + " must be a 1-D array of length " + want +
                                ", got shape [" + got + "]");
  throw std::invalid_argument(std::string(name) + " must be a " + std::to_string(dims.size()) +
                              "-D array of shape [" + want + "], got shape [" + got + "]");
}

// The inputs of one TTT-Linear head's inner loop, read from the caller's arrays in precision S.
template <class S>
struct InnerArgs {
  InnerOptions opt;
  Mat<S> Q, K, V;
  Vec<S> lambda;
  InnerWeights<S> w0;
  InnerHeadParams<S> p;
  py::ssize_t T = 0, d = 0;
};

// Every shape and value is checked before an array is copied; ValueError names the argument.
template <class S>
InnerArgs<S> inner_args(const py::object& Qo, const py::object& Ko, const py::object& Vo,
                        const py::object& lam_o, const py::object& W1o, const py::object& b1o,
                        const py::object& gamma_o, const py::object& beta_o,
                        const py::object& tau_o, int mini_batch, bool layer_norm, bool residual,
                        double ln_eps) {
  if (mini_batch < 1 || mini_batch > (1 << 20))
    throw std::invalid_argument("mini_batch must be in [1, 1048576], got " +
                                std::to_string(mini_batch));
  const py::array q = real_array(Qo, "Q");
  if (q.ndim() != 2 || q.shape(0) < 1 || q.shape(1) < 1)
    throw std::invalid_argument("Q must be a 2-D array [T, d] with T, d >= 1");
  InnerArgs<S> a;
  a.T = q.shape(0);
  a.d = q.shape(1);
  const py::ssize_t T = a.T, d = a.d;
  check_shape(Ko, "K", {T, d});
  check_shape(Vo, "V", {T, d});
  check_shape(lam_o, "lam", {T});
  check_shape(W1o, "W1", {d, d});
  if (!b1o.is_none()) check_shape(b1o, "b1", {d});
  if (!gamma_o.is_none()) check_shape(gamma_o, "ln_weight", {d});
  if (!beta_o.is_none()) check_shape(beta_o, "ln_bias", {d});
  if (!tau_o.is_none()) check_shape(tau_o, "tau", {mini_batch});
  a.opt.model = InnerModel::Linear;
  a.opt.mini_batch = mini_batch;
  a.opt.layer_norm = layer_norm;
  a.opt.residual = residual;
  a.opt.bias = !b1o.is_none();
  if (!(ln_eps > 0 && ln_eps <= 1))  // NaN fails too
    throw std::invalid_argument("ln_eps must be in (0, 1], got " + std::to_string(ln_eps));
  a.opt.ln_eps = ln_eps;
  a.Q = matrix<S>(Qo, "Q", T, d);
  a.K = matrix<S>(Ko, "K", T, d);
  a.V = matrix<S>(Vo, "V", T, d);
  const std::vector<S> lam = vector<S>(lam_o, "lam", T);
  a.w0 = InnerWeights<S>::zeros(a.opt, static_cast<int>(d));
  a.w0.W1 = matrix<S>(W1o, "W1", d, d);
  if (a.opt.bias) {
    const std::vector<S> b = vector<S>(b1o, "b1", d);
    for (py::ssize_t j = 0; j < d; ++j) a.w0.b1(j) = b[static_cast<std::size_t>(j)];
  }
  InnerHeadParams<S>& p = a.p;
  p.ln_weight = RowVec<S>::Ones(d);
  p.ln_bias = RowVec<S>::Zero(d);
  p.tau.resize(mini_batch);
  for (int i = 0; i < mini_batch; ++i) p.tau(i) = S(1) / S(i + 1);
  if (!gamma_o.is_none()) {
    const std::vector<S> g = vector<S>(gamma_o, "ln_weight", d);
    for (py::ssize_t j = 0; j < d; ++j) p.ln_weight(j) = g[static_cast<std::size_t>(j)];
  }
  if (!beta_o.is_none()) {
    const std::vector<S> b = vector<S>(beta_o, "ln_bias", d);
    for (py::ssize_t j = 0; j < d; ++j) p.ln_bias(j) = b[static_cast<std::size_t>(j)];
  }
  if (!tau_o.is_none()) {
    const std::vector<S> t = vector<S>(tau_o, "tau", mini_batch);
    for (int i = 0; i < mini_batch; ++i) p.tau(i) = t[static_cast<std::size_t>(i)];
  }
  for (const S x : lam)
    if (!std::isfinite(double(x))) throw std::invalid_argument("lam must be finite");
  if (!a.Q.allFinite() || !a.K.allFinite() || !a.V.allFinite() || !a.w0.W1.allFinite() ||
      !a.w0.b1.allFinite() || !p.ln_weight.allFinite() || !p.ln_bias.allFinite() ||
      !p.tau.allFinite())
    throw std::invalid_argument("Q, K, V, W1, b1, ln_weight, ln_bias and tau must be finite");
  a.lambda.resize(T);
  for (py::ssize_t t = 0; t < T; ++t) a.lambda(t) = lam[static_cast<std::size_t>(t)];
  return a;
}

template <class S>
py::dict inner_loop(const py::object& Qo, const py::object& Ko, const py::object& Vo,
                    const py::object& lam_o, const py::object& W1o, const py::object& b1o,
                    const py::object& gamma_o, const py::object& beta_o, const py::object& tau_o,
                    int mini_batch, const std::string& form, bool layer_norm, bool residual,
                    double ln_eps) {
  if (form != "primal" && form != "dual")
    throw std::invalid_argument("form must be 'primal' or 'dual', got '" + form + "'");
  const InnerArgs<S> a = inner_args<S>(Qo, Ko, Vo, lam_o, W1o, b1o, gamma_o, beta_o, tau_o,
                                       mini_batch, layer_norm, residual, ln_eps);
  const py::ssize_t T = a.T, d = a.d;
  const InnerOptions& opt = a.opt;
  check_memory(
      static_cast<std::uint64_t>(T) * static_cast<std::uint64_t>(d * d + d + 3 + 4 * d) * sizeof(S),
      "the inner loop's outputs");
  Mat<S> out;
  std::vector<S> W(form == "primal" ? static_cast<std::size_t>(T * d * d) : 0),
      b(form == "primal" ? static_cast<std::size_t>(T * d) : 0);
  std::vector<S> li(form == "primal" ? T : 0), lb(li.size()), la(li.size());
  {
    py::gil_scoped_release nogil;
    InnerState<S> state = InnerState<S>::start(a.w0);
    if (form == "dual") {
      inner_forward_dual<S>(opt, a.p, a.Q, a.K, a.V, a.lambda, state, out);
    } else {
      const InnerObserver<S> observer = [&](const InnerStepRecord<S>& r) {
        const auto t = static_cast<std::size_t>(r.token);
        li[t] = r.loss_initial;
        lb[t] = r.loss_before;
        la[t] = r.loss_after;
        std::copy(r.w_after->W1.data(), r.w_after->W1.data() + d * d,
                  W.begin() + static_cast<std::ptrdiff_t>(t * d * d));
        if (opt.bias)
          std::copy(r.w_after->b1.data(), r.w_after->b1.data() + d,
                    b.begin() + static_cast<std::ptrdiff_t>(t * d));
      };
      inner_forward_primal<S>(opt, a.p, a.Q, a.K, a.V, a.lambda, state, out, observer, &a.w0);
    }
  }
  py::dict r;
  std::vector<S> o(out.data(), out.data() + out.size());
  r["out"] = to_numpy(std::move(o), {T, d});
  if (form == "primal") {
    r["W1"] = to_numpy(std::move(W), {T, d, d});
    if (opt.bias) r["b1"] = to_numpy(std::move(b), {T, d});
    r["loss_initial"] = to_numpy(std::move(li), {T});
    r["loss_before"] = to_numpy(std::move(lb), {T});
    r["loss_after"] = to_numpy(std::move(la), {T});
  }
  return r;
}

// An Eigen matrix or vector as a NumPy array of `shape` (one copy).
template <class E>
py::array_t<typename E::Scalar> eigen_numpy(const E& m, std::vector<py::ssize_t> shape) {
  using S = typename E::Scalar;
  const Mat<S> row_major = m;  // the layout NumPy's C order reads
  return to_numpy(std::vector<S>(row_major.data(), row_major.data() + row_major.size()),
                  std::move(shape));
}

// The gradients of L = Σ dout ⊙ out through the inner loop (tttlab/ttt/inner_backward.hpp, the
// manual backward the trainer uses; it differentiates the dual form, which is the primal form's
// function), keyed by the names of the arguments they belong to.
template <class S>
py::dict inner_loop_grad(const py::object& Qo, const py::object& Ko, const py::object& Vo,
                         const py::object& lam_o, const py::object& W1o, const py::object& b1o,
                         const py::object& dout_o, const py::object& gamma_o,
                         const py::object& beta_o, const py::object& tau_o, int mini_batch,
                         bool layer_norm, bool residual, double ln_eps) {
  const InnerArgs<S> a = inner_args<S>(Qo, Ko, Vo, lam_o, W1o, b1o, gamma_o, beta_o, tau_o,
                                       mini_batch, layer_norm, residual, ln_eps);
  const py::ssize_t T = a.T, d = a.d;
  check_shape(dout_o, "dout", {T, d});
  const Mat<S> dO = matrix<S>(dout_o, "dout", T, d);
  if (!dO.allFinite()) throw std::invalid_argument("dout must be finite");
  // The backward keeps the state at the start of every mini-batch, and its own [T, d] gradients.
  const std::uint64_t mini_batches = static_cast<std::uint64_t>((T + mini_batch - 1) / mini_batch);
  check_memory((mini_batches * static_cast<std::uint64_t>(d * d + d) +
                static_cast<std::uint64_t>(T) * static_cast<std::uint64_t>(4 * d + 1)) *
                   sizeof(S),
               "the inner loop's backward");
  InnerGrads<S> g;
  {
    py::gil_scoped_release nogil;
    inner_backward<S>(a.opt, a.p, a.Q, a.K, a.V, a.lambda, a.w0, dO, g);
  }
  py::dict r;
  r["Q"] = eigen_numpy(g.dQ, {T, d});
  r["K"] = eigen_numpy(g.dK, {T, d});
  r["V"] = eigen_numpy(g.dV, {T, d});
  r["lam"] = eigen_numpy(g.dlambda, {T});
  r["W1"] = eigen_numpy(g.dW0.W1, {d, d});
  if (a.opt.bias) r["b1"] = eigen_numpy(g.dW0.b1, {d});
  r["ln_weight"] = eigen_numpy(g.dln_weight, {d});
  r["ln_bias"] = eigen_numpy(g.dln_bias, {d});
  r["tau"] = eigen_numpy(g.dtau, {mini_batch});
  return r;
}

// ---- The matrix fast-weight rules (tttlab/fastweight/matrix_rules.hpp, docs/MATH.md §11) ------------
MatrixRule matrix_rule_named(const std::string& name) {
  for (MatrixRule r : {MatrixRule::LinearAttention, MatrixRule::DecayedHebbian,
                       MatrixRule::DeltaNet, MatrixRule::GatedDeltaNet})
    if (name == to_string(r)) return r;
  throw std::invalid_argument(
      "rule must be 'linear_attention', 'decayed_hebbian', 'deltanet' or "
      "'gated_deltanet', got '" +
      name + "'");
}

// The inputs of one head's matrix rule, read in precision S.
template <class S>
struct RuleArgs {
  MatrixRule rule{};
  Mat<S> q, k, v, S0;
  Vec<S> beta, alpha;  // empty where the rule takes none
  py::ssize_t T = 0, dk = 0, dv = 0;
};

template <class S>
Vec<S> column(const py::object& o, const char* name, py::ssize_t n) {
  const std::vector<S> x = vector<S>(o, name, n);
  Vec<S> c(n);
  for (py::ssize_t t = 0; t < n; ++t) c(t) = x[static_cast<std::size_t>(t)];
  return c;
}

template <class S>
RuleArgs<S> rule_args(const std::string& rule, const py::object& qo, const py::object& ko,
                      const py::object& vo, const py::object& beta_o, const py::object& alpha_o,
                      const py::object& S0_o) {
  RuleArgs<S> a;
  a.rule = matrix_rule_named(rule);
  const py::array q = real_array(qo, "q");
  if (q.ndim() != 2 || q.shape(0) < 1 || q.shape(1) < 1)
    throw std::invalid_argument("q must be a 2-D array [T, d_k] with T, d_k >= 1");
  a.T = q.shape(0);
  a.dk = q.shape(1);
  check_shape(ko, "k", {a.T, a.dk});
  const py::array v = real_array(vo, "v");
  if (v.ndim() != 2 || v.shape(0) != a.T || v.shape(1) < 1)
    throw std::invalid_argument("v must be a 2-D array [T, d_v] with T = " + std::to_string(a.T) +
                                " (q's rows) and d_v >= 1");
  a.dv = v.shape(1);
  const std::string r = to_string(a.rule);
  if (uses_beta(a.rule) && beta_o.is_none())
    throw std::invalid_argument(r + " needs beta [T] (the step size of each token)");
  if (!uses_beta(a.rule) && !beta_o.is_none())
    throw std::invalid_argument(r + " takes no beta (its step size is 1)");
  if (uses_alpha(a.rule) && alpha_o.is_none())
    throw std::invalid_argument(r + " needs alpha [T] (the decay of each token, in (0, 1])");
  if (!uses_alpha(a.rule) && !alpha_o.is_none())
    throw std::invalid_argument(r + " takes no alpha (it does not decay its state)");
  if (!beta_o.is_none()) check_shape(beta_o, "beta", {a.T});
  if (!alpha_o.is_none()) check_shape(alpha_o, "alpha", {a.T});
  if (!S0_o.is_none()) check_shape(S0_o, "S0", {a.dk, a.dv});
  a.q = matrix<S>(qo, "q", a.T, a.dk);
  a.k = matrix<S>(ko, "k", a.T, a.dk);
  a.v = matrix<S>(vo, "v", a.T, a.dv);
  a.S0 = S0_o.is_none() ? Mat<S>(Mat<S>::Zero(a.dk, a.dv)) : matrix<S>(S0_o, "S0", a.dk, a.dv);
  if (!beta_o.is_none()) a.beta = column<S>(beta_o, "beta", a.T);
  if (!alpha_o.is_none()) a.alpha = column<S>(alpha_o, "alpha", a.T);
  if (!a.q.allFinite() || !a.k.allFinite() || !a.v.allFinite() || !a.S0.allFinite() ||
      !a.beta.allFinite())
    throw std::invalid_argument("q, k, v, beta and S0 must be finite");
  for (py::ssize_t t = 0; t < a.alpha.size(); ++t)
    if (!(a.alpha(t) > S(0) && a.alpha(t) <= S(1)))  // NaN fails too
      throw std::invalid_argument("alpha must lie in (0, 1], got " +
                                  std::to_string(double(a.alpha(t))) + " at token " +
                                  std::to_string(t));
  return a;
}

template <class S>
py::dict matrix_rule(const std::string& rule, const py::object& qo, const py::object& ko,
                     const py::object& vo, const py::object& beta_o, const py::object& alpha_o,
                     const py::object& S0_o, const std::string& form, int chunk) {
  if (form != "primal" && form != "chunked")
    throw std::invalid_argument("form must be 'primal' or 'chunked', got '" + form + "'");
  if (chunk < 1 || chunk > (1 << 16))
    throw std::invalid_argument("chunk must be in [1, 65536], got " + std::to_string(chunk));
  const RuleArgs<S> a = rule_args<S>(rule, qo, ko, vo, beta_o, alpha_o, S0_o);
  const py::ssize_t T = a.T, dk = a.dk, dv = a.dv;
  const bool primal = form == "primal";
  check_memory(static_cast<std::uint64_t>(T) *
                   static_cast<std::uint64_t>((primal ? dk * dv : 0) + 2 * dv + 2) * sizeof(S),
               "the matrix rule's outputs");
  std::vector<S> states(primal ? static_cast<std::size_t>(T * dk * dv) : 0);
  std::vector<S> before(primal ? T : 0), after(before.size());
  MatrixRuleOutput<S> out;
  {
    py::gil_scoped_release nogil;
    if (primal) {
      const MatrixRuleObserver<S> observer = [&](const MatrixRuleStep<S>& s) {
        const auto t = static_cast<std::size_t>(s.token);
        before[t] = s.loss_before;
        after[t] = s.loss_after;
        std::copy(s.state_after->data(), s.state_after->data() + dk * dv,
                  states.begin() + static_cast<std::ptrdiff_t>(t * dk * dv));
      };
      out = matrix_rule_primal<S>(a.rule, a.q, a.k, a.v, a.beta, a.alpha, a.S0, observer);
    } else {
      out = matrix_rule_chunked<S>(a.rule, a.q, a.k, a.v, a.beta, a.alpha, a.S0, chunk);
    }
  }
  py::dict r;
  r["o"] = eigen_numpy(out.o, {T, dv});
  r["state"] = eigen_numpy(out.state, {dk, dv});
  if (primal) {
    r["states"] = to_numpy(std::move(states), {T, dk, dv});
    r["loss_before"] = to_numpy(std::move(before), {T});
    r["loss_after"] = to_numpy(std::move(after), {T});
  }
  return r;
}

template <class S>
py::dict matrix_rule_grad(const std::string& rule, const py::object& qo, const py::object& ko,
                          const py::object& vo, const py::object& beta_o, const py::object& alpha_o,
                          const py::object& S0_o, const py::object& dout_o,
                          const py::object& dstate_o) {
  const RuleArgs<S> a = rule_args<S>(rule, qo, ko, vo, beta_o, alpha_o, S0_o);
  const py::ssize_t T = a.T, dk = a.dk, dv = a.dv;
  check_shape(dout_o, "dout", {T, dv});
  if (!dstate_o.is_none()) check_shape(dstate_o, "dstate", {dk, dv});
  const Mat<S> dO = matrix<S>(dout_o, "dout", T, dv);
  const Mat<S> dST =
      dstate_o.is_none() ? Mat<S>(Mat<S>::Zero(dk, dv)) : matrix<S>(dstate_o, "dstate", dk, dv);
  if (!dO.allFinite() || !dST.allFinite())
    throw std::invalid_argument("dout and dstate must be finite");
  // The backward keeps the T + 1 states.
  check_memory(static_cast<std::uint64_t>(T + 1) * static_cast<std::uint64_t>(dk * dv) * sizeof(S),
               "the matrix rule's backward");
  MatrixRuleGrads<S> g;
  {
    py::gil_scoped_release nogil;
    g = matrix_rule_backward<S>(a.rule, a.q, a.k, a.v, a.beta, a.alpha, a.S0, dO, dST);
  }
  py::dict r;
  r["q"] = eigen_numpy(g.dq, {T, dk});
  r["k"] = eigen_numpy(g.dk, {T, dk});
  r["v"] = eigen_numpy(g.dv, {T, dv});
  if (uses_beta(a.rule)) r["beta"] = eigen_numpy(g.dbeta, {T});
  if (uses_alpha(a.rule)) r["alpha"] = eigen_numpy(g.dalpha, {T});
  r["S0"] = eigen_numpy(g.dS0, {dk, dv});
  return r;
}

// float32 when `first` is a float32 array, else float64: the precision of a call.
bool is_float32(const py::object& first) {
  const py::array a = py::array::ensure(first);
  return a && a.dtype().is(py::dtype::of<float>());
}

// ---- A whole TTT layer from NumPy weights (tttlab/ttt/layer.hpp) ----------------------------------------

// The layer the keywords describe (tttlab/__init__.pyi lists them with their defaults, which are
// TTTLayerConfig's); TypeError for a keyword it does not know, ValueError from validate() naming the
// field.
TTTLayerConfig layer_config(int width, int heads, const py::kwargs& kw) {
  TTTLayerConfig c;
  c.width = width;
  c.heads = heads;
  bool base_lr_given = false;
  for (const auto& [key, value] : kw) {
    const std::string k = key.cast<std::string>();
    const py::handle v = value;
    if (k == "mini_batch")
      c.inner.mini_batch = v.cast<int>();
    else if (k == "inner") {
      const std::string m = v.cast<std::string>();
      if (m != "linear" && m != "mlp")
        throw std::invalid_argument("inner must be 'linear' or 'mlp', got '" + m + "'");
      c.inner.model = m == "mlp" ? InnerModel::MLP : InnerModel::Linear;
    } else if (k == "layer_norm")
      c.inner.layer_norm = v.cast<bool>();
    else if (k == "residual")
      c.inner.residual = v.cast<bool>();
    else if (k == "bias")
      c.inner.bias = v.cast<bool>();
    else if (k == "base_lr") {
      c.eta.base_lr = v.cast<double>();
      base_lr_given = true;
    } else if (k == "learned_gate")
      c.eta.gate = v.cast<bool>() ? EtaGate::Learned : EtaGate::Fixed;
    else if (k == "token_index")
      c.eta.token_index = v.cast<bool>();
    else if (k == "share_qk")
      c.share_qk = v.cast<bool>();
    else if (k == "conv_kernel")
      c.conv_kernel = v.cast<int>();
    else if (k == "use_gate")
      c.use_gate = v.cast<bool>();
    else if (k == "rope")
      c.rope = v.cast<bool>();
    else if (k == "rope_theta")
      c.rope_theta = v.cast<double>();
    else if (k == "post_norm")
      c.post_norm = v.cast<bool>();
    else if (k == "ln_eps")
      c.inner.ln_eps = c.post_norm_eps = v.cast<double>();
    else
      throw py::type_error("unexpected keyword argument '" + k +
                           "' (the layer's options: "
                           "mini_batch, inner, layer_norm, residual, bias, base_lr, learned_gate, "
                           "token_index, share_qk, conv_kernel, use_gate, rope, rope_theta, "
                           "post_norm, ln_eps)");
  }
  if (!base_lr_given) c.eta.base_lr = c.inner.model == InnerModel::MLP ? 0.1 : 1.0;
  if (!(std::isfinite(c.eta.base_lr) && c.eta.base_lr >= 0))
    throw std::invalid_argument("base_lr must be finite and >= 0");
  if (!(c.inner.ln_eps > 0 && c.inner.ln_eps <= 1))
    throw std::invalid_argument("ln_eps must be in (0, 1], got " + std::to_string(c.inner.ln_eps));
  c.validate();
  return c;
}

// The layer's parameters from `params` (name → array, the names of TTTLayerParams::for_each): every
// name the layer has must be there with its shape ([rows, cols], or [n] for a one-row tensor), finite,
// and no other name. ValueError names the parameter.
// `for_each(visitor)` visits every parameter of a layer as (Eigen::Map, name).
template <class S, class ForEach>
void read_named_params(const ForEach& for_each, const py::dict& params) {
  std::set<std::string> known;
  for_each([&](Eigen::Map<Mat<S>> m, const std::string& name) {
    known.insert(name);
    const std::string shape =
        "[" + std::to_string(m.rows()) + ", " + std::to_string(m.cols()) + "]";
    if (!params.contains(name)) throw std::invalid_argument("params lacks '" + name + "' " + shape);
    const py::object o = params[name.c_str()];
    const py::array a = real_array(o, name.c_str());
    const bool as_row = a.ndim() == 1 && m.rows() == 1 && a.shape(0) == m.cols();
    if (!as_row && !(a.ndim() == 2 && a.shape(0) == m.rows() && a.shape(1) == m.cols()))
      throw std::invalid_argument("params['" + name + "'] must be of shape " + shape);
    const Arr<S> c = Arr<S>::ensure(o);
    std::copy(c.data(), c.data() + c.size(), m.data());
    if (!m.allFinite()) throw std::invalid_argument("params['" + name + "'] must be finite");
  });
  for (const auto& item : params) {
    const std::string k = py::str(item.first).cast<std::string>();
    if (!known.count(k))
      throw std::invalid_argument("params has '" + k + "', which this layer does not have");
  }
}

template <class S>
TTTLayerParams<S> layer_params(const TTTLayerConfig& cfg, const py::dict& params) {
  TTTLayerParams<S> p = TTTLayerParams<S>::zeros(cfg);
  read_named_params<S>([&](const auto& visit) { p.for_each(cfg, visit); }, params);
  return p;
}

// Every parameter `for_each` visits as a NumPy array of its stored shape, by name.
template <class S, class ForEach>
py::dict named_params_dict(const ForEach& for_each) {
  py::dict d;
  for_each([&](Eigen::Map<Mat<S>> m, const std::string& name) {
    d[py::str(name)] =
        to_numpy(std::vector<S>(m.data(), m.data() + m.size()), {m.rows(), m.cols()});
  });
  return d;
}

template <class S>
py::dict params_dict(const TTTLayerConfig& cfg, TTTLayerParams<S>& p) {
  return named_params_dict<S>([&](const auto& visit) { p.for_each(cfg, visit); });
}

template <class S>
Mat<S> layer_input(const py::object& xo, const char* name, int width) {
  const py::array a = real_array(xo, name);
  if (a.ndim() != 2 || a.shape(0) < 1 || a.shape(1) != width)
    throw std::invalid_argument(std::string(name) + " must be a 2-D array [T, " +
                                std::to_string(width) + "] with T >= 1");
  Mat<S> m = matrix<S>(xo, name, a.shape(0), width);
  if (!m.allFinite()) throw std::invalid_argument(std::string(name) + " must be finite");
  return m;
}

py::dict ttt_layer_params(int width, int heads, std::uint64_t seed, const std::string& dtype,
                          const py::kwargs& kw) {
  const TTTLayerConfig cfg = layer_config(width, heads, kw);
  Rng rng(seed);
  const auto normal = [&rng] { return rng.normal(); };
  if (dtype == "float32") {
    TTTLayerParams<float> p = TTTLayerParams<float>::init(cfg, normal);
    return params_dict(cfg, p);
  }
  if (dtype != "float64")
    throw std::invalid_argument("dtype must be 'float32' or 'float64', got '" + dtype + "'");
  TTTLayerParams<double> p = TTTLayerParams<double>::init(cfg, normal);
  return params_dict(cfg, p);
}

template <class S>
py::dict ttt_layer(const py::object& xo, const py::dict& params, int heads, const std::string& form,
                   const py::kwargs& kw) {
  if (form != "primal" && form != "dual")
    throw std::invalid_argument("form must be 'primal' or 'dual', got '" + form + "'");
  const py::array xa = real_array(xo, "x");
  if (xa.ndim() != 2) throw std::invalid_argument("x must be a 2-D array [T, D]");
  const TTTLayerConfig cfg = layer_config(static_cast<int>(xa.shape(1)), heads, kw);
  const Mat<S> x = layer_input<S>(xo, "x", cfg.width);
  TTTLayer<S> layer(cfg, layer_params<S>(cfg, params));
  const py::ssize_t T = x.rows(), D = cfg.width, H = cfg.heads;
  const bool primal = form == "primal";
  const InnerWeights<S> w = InnerWeights<S>::zeros(cfg.inner, cfg.head_dim());
  const py::ssize_t n1 = w.W1.size(), nb1 = w.b1.size(), n2 = w.W2.size(), nb2 = w.b2.size();
  if (primal)
    check_memory(static_cast<std::uint64_t>(H * T) *
                     static_cast<std::uint64_t>(n1 + nb1 + n2 + nb2 + 2) * sizeof(S),
                 "the layer's states");
  std::vector<S> W1(primal ? H * T * n1 : 0), b1(primal ? H * T * nb1 : 0),
      W2(primal ? H * T * n2 : 0), b2(primal ? H * T * nb2 : 0), before(primal ? H * T : 0),
      after(before.size());
  Mat<S> y;
  {
    py::gil_scoped_release nogil;
    auto state = layer.start();
    auto& st = static_cast<TTTLayerState<S>&>(*state);
    const TTTLayerObserver<S> observer = [&](int h, const InnerStepRecord<S>& r) {
      const std::size_t i = static_cast<std::size_t>(h) * T + static_cast<std::size_t>(r.token);
      before[i] = r.loss_before;
      after[i] = r.loss_after;
      const InnerWeights<S>& a = *r.w_after;
      std::copy(a.W1.data(), a.W1.data() + n1, W1.begin() + static_cast<std::ptrdiff_t>(i * n1));
      std::copy(a.b1.data(), a.b1.data() + nb1, b1.begin() + static_cast<std::ptrdiff_t>(i * nb1));
      std::copy(a.W2.data(), a.W2.data() + n2, W2.begin() + static_cast<std::ptrdiff_t>(i * n2));
      std::copy(a.b2.data(), a.b2.data() + nb2, b2.begin() + static_cast<std::ptrdiff_t>(i * nb2));
    };
    y = primal ? layer.forward(st, x, TTTForm::Primal, observer)
               : layer.forward(st, x, TTTForm::Dual);
  }
  py::dict r;
  r["y"] = eigen_numpy(y, {T, D});
  if (primal) {
    r["W1"] = to_numpy(std::move(W1), {H, T, w.W1.rows(), w.W1.cols()});
    // Without the inner bias the biases exist but stay zero: not returned, as inner_loop does.
    if (cfg.inner.bias) r["b1"] = to_numpy(std::move(b1), {H, T, nb1});
    if (n2) r["W2"] = to_numpy(std::move(W2), {H, T, w.W2.rows(), w.W2.cols()});
    if (n2 && cfg.inner.bias) r["b2"] = to_numpy(std::move(b2), {H, T, nb2});
    r["loss_before"] = to_numpy(std::move(before), {H, T});
    r["loss_after"] = to_numpy(std::move(after), {H, T});
  }
  return r;
}

template <class S>
py::dict ttt_layer_grad(const py::object& xo, const py::dict& params, const py::object& dy_o,
                        int heads, const py::kwargs& kw) {
  const py::array xa = real_array(xo, "x");
  if (xa.ndim() != 2) throw std::invalid_argument("x must be a 2-D array [T, D]");
  const TTTLayerConfig cfg = layer_config(static_cast<int>(xa.shape(1)), heads, kw);
  const Mat<S> x = layer_input<S>(xo, "x", cfg.width);
  check_shape(dy_o, "dy", {x.rows(), cfg.width});
  const Mat<S> dY = layer_input<S>(dy_o, "dy", cfg.width);
  TTTLayer<S> layer(cfg, layer_params<S>(cfg, params));
  TTTLayerParams<S> grads = TTTLayerParams<S>::zeros(cfg);
  Mat<S> dx;
  {
    py::gil_scoped_release nogil;
    TTTLayerCache<S> cache;
    layer.forward_train(x, cache);
    layer.backward(cache, dY, grads, dx);
  }
  py::dict r = params_dict(cfg, grads);
  r["x"] = eigen_numpy(dx, {x.rows(), x.cols()});
  return r;
}

// ---- A whole DeltaNet or Gated DeltaNet layer from NumPy weights (tttlab/seq/deltanet_layer.hpp) -----
// The layer's keywords, as deltanet_layer_params, deltanet_layer and deltanet_layer_grad take them.
DeltaNetConfig deltanet_config(int width, int heads, const py::kwargs& kw) {
  DeltaNetConfig c;
  c.width = width;
  c.heads = heads;
  for (const auto& [key, value] : kw) {
    const std::string k = key.cast<std::string>();
    const py::handle v = value;
    if (k == "gated")
      c.gated = v.cast<bool>();
    else if (k == "conv_kernel")
      c.conv_kernel = v.cast<int>();
    else if (k == "chunk")
      c.chunk_size = v.cast<int>();
    else if (k == "norm_eps")
      c.norm_eps = v.cast<double>();
    else if (k == "l2_eps")
      c.l2_eps = v.cast<double>();
    else
      throw py::type_error("unexpected keyword argument '" + k +
                           "' (the layer's options: gated, conv_kernel, chunk, norm_eps, l2_eps)");
  }
  if (c.conv_kernel > 1024)
    throw std::invalid_argument("conv_kernel must be at most 1024, got " +
                                std::to_string(c.conv_kernel));
  if (c.chunk_size > (1 << 16))
    throw std::invalid_argument("chunk must be at most 65536, got " + std::to_string(c.chunk_size));
  c.validate();
  return c;
}

template <class S>
DeltaNetLayer<S> deltanet_from(const DeltaNetConfig& cfg, const py::dict& params) {
  DeltaNetLayer<S> layer(cfg, DeltaNetParams<S>::zeros(cfg));
  read_named_params<S>([&](const auto& visit) { layer.for_each_param(visit); }, params);
  return layer;
}

py::dict deltanet_layer_params(int width, int heads, std::uint64_t seed, const std::string& dtype,
                               double std_dev, const py::kwargs& kw) {
  const DeltaNetConfig cfg = deltanet_config(width, heads, kw);
  if (!(std_dev >= 0 && std::isfinite(std_dev)))
    throw std::invalid_argument("std must be finite and >= 0");
  if (dtype != "float32" && dtype != "float64")
    throw std::invalid_argument("dtype must be 'float32' or 'float64', got '" + dtype + "'");
  Rng rng(seed);
  const auto dict = [&](auto tag) {
    using S = decltype(tag);
    DeltaNetLayer<S> layer(cfg, DeltaNetParams<S>::init(cfg, std_dev, rng));
    return named_params_dict<S>([&](const auto& visit) { layer.for_each_param(visit); });
  };
  return dtype == "float32" ? dict(float{}) : dict(double{});
}

template <class S>
py::dict deltanet_layer(const py::object& xo, const py::dict& params, int heads,
                        const std::string& form, const py::kwargs& kw) {
  if (form != "chunked" && form != "primal")
    throw std::invalid_argument("form must be 'chunked' or 'primal', got '" + form + "'");
  const py::array xa = real_array(xo, "x");
  if (xa.ndim() != 2) throw std::invalid_argument("x must be a 2-D array [T, D]");
  const DeltaNetConfig cfg = deltanet_config(static_cast<int>(xa.shape(1)), heads, kw);
  const Mat<S> x = layer_input<S>(xo, "x", cfg.width);
  const DeltaNetLayer<S> layer = deltanet_from<S>(cfg, params);
  Mat<S> y;
  {
    py::gil_scoped_release nogil;
    auto state = layer.start();
    y = layer.forward(*state, x, form == "primal" ? DeltaNetForm::Primal : DeltaNetForm::Chunked);
  }
  py::dict r;
  r["y"] = eigen_numpy(y, {x.rows(), x.cols()});
  return r;
}

template <class S>
py::dict deltanet_layer_grad(const py::object& xo, const py::dict& params, const py::object& dy_o,
                             int heads, const py::kwargs& kw) {
  const py::array xa = real_array(xo, "x");
  if (xa.ndim() != 2) throw std::invalid_argument("x must be a 2-D array [T, D]");
  const DeltaNetConfig cfg = deltanet_config(static_cast<int>(xa.shape(1)), heads, kw);
  const Mat<S> x = layer_input<S>(xo, "x", cfg.width);
  check_shape(dy_o, "dy", {x.rows(), cfg.width});
  const Mat<S> dY = layer_input<S>(dy_o, "dy", cfg.width);
  const DeltaNetLayer<S> layer = deltanet_from<S>(cfg, params);
  std::unique_ptr<SequenceLayer<S>> grads = layer.zeros_like();
  Mat<S> dx;
  {
    py::gil_scoped_release nogil;
    Mat<S> y;
    const std::unique_ptr<LayerCache> cache = layer.forward_train(x, y);
    layer.backward(*cache, dY, *grads, dx);
  }
  py::dict r = named_params_dict<S>([&](const auto& visit) { grads->for_each_param(visit); });
  r["x"] = eigen_numpy(dx, {x.rows(), x.cols()});
  return r;
}

// ---- Mamba-2, Titans and LaCT layers from NumPy weights (tttlab/seq/{mamba2,titans,lact}_layer.hpp) ---
// The three share the SequenceLayer interface, so one reader, runner and backward serves them: Layer<S>
// is constructed from (config, Params<S>::zeros) and filled through for_each_param, by the names the
// layer's checkpoints use.

// x's width, read before the layer's config (which needs it) and before x is converted.
int sequence_width(const py::object& xo) {
  const py::array xa = real_array(xo, "x");
  if (xa.ndim() != 2) throw std::invalid_argument("x must be a 2-D array [T, D]");
  return static_cast<int>(xa.shape(1));
}

// An int keyword in [1, hi]: the bound keeps a typo from allocating the zero parameters of a huge layer
// before the arrays are read.
int bounded_int(const py::handle& v, const std::string& name, int hi) {
  const int n = v.cast<int>();
  if (n > hi)
    throw std::invalid_argument(name + " must be at most " + std::to_string(hi) + ", got " +
                                std::to_string(n));
  return n;
}

template <template <class> class Layer, template <class> class Params, class S, class Config>
Layer<S> sequence_layer_from(const Config& cfg, const py::dict& params) {
  Layer<S> layer(cfg, Params<S>::zeros(cfg));
  read_named_params<S>([&](const auto& visit) { layer.for_each_param(visit); }, params);
  return layer;
}

template <template <class> class Layer, template <class> class Params, class Config>
py::dict sequence_layer_params(const Config& cfg, std::uint64_t seed, const std::string& dtype,
                               double std_dev) {
  if (!(std_dev >= 0 && std::isfinite(std_dev)))
    throw std::invalid_argument("std must be finite and >= 0");
  if (dtype != "float32" && dtype != "float64")
    throw std::invalid_argument("dtype must be 'float32' or 'float64', got '" + dtype + "'");
  Rng rng(seed);
  const auto dict = [&](auto tag) {
    using S = decltype(tag);
    Layer<S> layer(cfg, Params<S>::init(cfg, std_dev, rng));
    return named_params_dict<S>([&](const auto& visit) { layer.for_each_param(visit); });
  };
  return dtype == "float32" ? dict(float{}) : dict(double{});
}

// `run(layer, state, x)` runs one of the layer's forms from its empty state.
template <template <class> class Layer, template <class> class Params, class S, class Config,
          class Run>
py::dict sequence_layer_forward(const Config& cfg, const py::object& xo, const py::dict& params,
                                const Run& run) {
  const Mat<S> x = layer_input<S>(xo, "x", cfg.width);
  const Layer<S> layer = sequence_layer_from<Layer, Params, S>(cfg, params);
  Mat<S> y;
  {
    py::gil_scoped_release nogil;
    auto state = layer.start();
    y = run(layer, *state, x);
  }
  py::dict r;
  r["y"] = eigen_numpy(y, {x.rows(), x.cols()});
  return r;
}

// The training path: forward_train, then the layer's manual backward.
template <template <class> class Layer, template <class> class Params, class S, class Config>
py::dict sequence_layer_grad(const Config& cfg, const py::object& xo, const py::dict& params,
                             const py::object& dy_o) {
  const Mat<S> x = layer_input<S>(xo, "x", cfg.width);
  check_shape(dy_o, "dy", {x.rows(), cfg.width});
  const Mat<S> dY = layer_input<S>(dy_o, "dy", cfg.width);
  const Layer<S> layer = sequence_layer_from<Layer, Params, S>(cfg, params);
  std::unique_ptr<SequenceLayer<S>> grads = layer.zeros_like();
  Mat<S> dx;
  {
    py::gil_scoped_release nogil;
    Mat<S> y;
    const std::unique_ptr<LayerCache> cache = layer.forward_train(x, y);
    layer.backward(*cache, dY, *grads, dx);
  }
  py::dict r = named_params_dict<S>([&](const auto& visit) { grads->for_each_param(visit); });
  r["x"] = eigen_numpy(dx, {x.rows(), x.cols()});
  return r;
}

// Mamba-2's keywords, as mamba2_layer_params, mamba2_layer and mamba2_layer_grad take them.
Mamba2Config mamba2_config(int width, const py::kwargs& kw) {
  Mamba2Config c;
  c.width = width;
  for (const auto& [key, value] : kw) {
    const std::string k = key.cast<std::string>();
    const py::handle v = value;
    if (k == "d_state")
      c.d_state = bounded_int(v, k, 1 << 12);
    else if (k == "d_conv")
      c.d_conv = bounded_int(v, k, 1024);
    else if (k == "expand")
      c.expand = bounded_int(v, k, 64);
    else if (k == "headdim")
      c.headdim = bounded_int(v, k, 1 << 16);
    else if (k == "chunk")
      c.chunk_size = bounded_int(v, k, 1 << 16);
    else if (k == "norm_eps")
      c.norm_eps = v.cast<double>();
    else
      throw py::type_error("unexpected keyword argument '" + k +
                           "' (the layer's options: d_state, d_conv, expand, headdim, chunk, "
                           "norm_eps)");
  }
  c.validate();
  return c;
}

template <class S>
py::dict mamba2_layer(const py::object& xo, const py::dict& params, const std::string& form,
                      const py::kwargs& kw) {
  if (form != "chunked" && form != "recurrent")
    throw std::invalid_argument("form must be 'chunked' or 'recurrent', got '" + form + "'");
  const Mamba2Config cfg = mamba2_config(sequence_width(xo), kw);
  const Mamba2Form f = form == "recurrent" ? Mamba2Form::Recurrent : Mamba2Form::Chunked;
  return sequence_layer_forward<Mamba2Layer, Mamba2Params, S>(
      cfg, xo, params, [f](const Mamba2Layer<S>& layer, SequenceState& st, const Mat<S>& x) {
        return layer.forward(st, x, f);
      });
}

// Titans' keywords, as titans_layer_params, titans_layer and titans_layer_grad take them.
TitansLayerConfig titans_config(int width, int heads, const py::kwargs& kw) {
  TitansLayerConfig c;
  c.width = width;
  c.heads = heads;
  for (const auto& [key, value] : kw) {
    const std::string k = key.cast<std::string>();
    const py::handle v = value;
    if (k == "conv_kernel")
      c.conv_kernel = bounded_int(v, k, 1024);
    else if (k == "mini_batch")
      c.mini_batch = bounded_int(v, k, 1 << 16);
    else if (k == "ln_eps")
      c.ln_eps = v.cast<double>();
    else if (k == "norm_eps")
      c.norm_eps = v.cast<double>();
    else if (k == "l2_eps")
      c.l2_eps = v.cast<double>();
    else
      throw py::type_error("unexpected keyword argument '" + k +
                           "' (the layer's options: conv_kernel, mini_batch, ln_eps, norm_eps, "
                           "l2_eps)");
  }
  c.validate();
  return c;
}

template <class S>
py::dict titans_layer(const py::object& xo, const py::dict& params, int heads,
                      const std::string& form, const py::kwargs& kw) {
  if (form != "chunked" && form != "primal")
    throw std::invalid_argument("form must be 'chunked' or 'primal', got '" + form + "'");
  const TitansLayerConfig cfg = titans_config(sequence_width(xo), heads, kw);
  const TitansForm f = form == "primal" ? TitansForm::Primal : TitansForm::Chunked;
  return sequence_layer_forward<TitansLayer, TitansParams, S>(
      cfg, xo, params, [f](const TitansLayer<S>& layer, SequenceState& st, const Mat<S>& x) {
        return layer.forward(st, x, f);
      });
}

// LaCT's keywords, as lact_layer_params, lact_layer and lact_layer_grad take them.
LactLayerConfig lact_config(int width, const py::kwargs& kw) {
  LactLayerConfig c;
  c.width = width;
  for (const auto& [key, value] : kw) {
    const std::string k = key.cast<std::string>();
    const py::handle v = value;
    if (k == "attn_heads")
      c.attn_heads = bounded_int(v, k, 1 << 12);
    else if (k == "lact_heads")
      c.lact_heads = bounded_int(v, k, 1 << 12);
    else if (k == "inter_multi")
      c.inter_multi = bounded_int(v, k, 64);
    else if (k == "chunk")
      c.chunk_size = bounded_int(v, k, 1 << 16);
    else if (k == "window")
      c.window = bounded_int(v, k, 1 << 16);
    else if (k == "momentum")
      c.use_momentum = v.cast<bool>();
    else if (k == "muon")
      c.use_muon = v.cast<bool>();
    else if (k == "rope_theta")
      c.rope_theta = v.cast<double>();
    else if (k == "base_lr")
      c.base_lr = v.cast<double>();
    else if (k == "norm_eps")
      c.norm_eps = v.cast<double>();
    else
      throw py::type_error("unexpected keyword argument '" + k +
                           "' (the layer's options: attn_heads, lact_heads, inter_multi, chunk, "
                           "window, momentum, muon, rope_theta, base_lr, norm_eps)");
  }
  c.validate();
  return c;
}

// form 'chunked' is the training path's forward (lact_forward over the sequence, the band attention);
// 'stream' feeds the streaming forward one token at a time, as decoding does (lact_stream, the KV
// cache of the last W − 1 tokens).
template <class S>
py::dict lact_layer(const py::object& xo, const py::dict& params, const std::string& form,
                    const py::kwargs& kw) {
  if (form != "chunked" && form != "stream")
    throw std::invalid_argument("form must be 'chunked' or 'stream', got '" + form + "'");
  const LactLayerConfig cfg = lact_config(sequence_width(xo), kw);
  const bool stream = form == "stream";
  return sequence_layer_forward<LactLayer, LactParams, S>(
      cfg, xo, params, [stream](const LactLayer<S>& layer, SequenceState& st, const Mat<S>& x) {
        Mat<S> y(x.rows(), x.cols());
        if (!stream) {
          layer.forward_train(x, y);
          return y;
        }
        for (Eigen::Index t = 0; t < x.rows(); ++t) y.row(t) = layer.forward(st, x.row(t));
        return y;
      });
}

// ---- tttlab.train: `tttlab train --device cpu` (tttlab/train/session.hpp) ------------------------------

// A number from the options dict, in [lo, hi]: ValueError naming the keyword, as the command line's
// range checks refuse its flags.
template <class T>
T option(const py::dict& o, const char* name, T lo, T hi) {
  T v{};
  try {
    v = o[name].cast<T>();
  } catch (const py::cast_error&) {
    throw py::type_error(
        std::string(name) + " must be " + (std::is_integral_v<T> ? "an int" : "a number") +
        ", got " + py::str(py::type::handle_of(o[name]).attr("__name__")).cast<std::string>());
  }
  if (!(v >= lo && v <= hi)) {  // NaN fails too
    std::ostringstream m;
    m << name << " must be in [" << lo << ", " << hi << "], got " << v;
    throw std::invalid_argument(m.str());
  }
  return v;
}

// 0 for None (the preset's value), else an int in [1, hi].
int override_option(const py::dict& o, const char* name, int hi) {
  return o[name].is_none() ? 0 : option<int>(o, name, 1, hi);
}

// Trains as `tttlab train --device cpu` with the same options; `o` holds every keyword of
// tttlab.train (python/tttlab/__init__.py fills the defaults). The session runs on the caller's thread
// without the GIL; its hooks take the GIL back between steps to check for Ctrl-C and after each step
// to call `progress`. Either raising stops the run at the next step boundary, with the checkpoint a
// stopped run writes (session.hpp), and the exception is raised again once the session has stopped.
py::dict train(const py::dict& o, const py::object& progress) {
  ModelChoice m;
  m.preset = o["preset"].cast<std::string>();
  m.layer = o["layer"].cast<std::string>();
  const bool backbone_given = !o["backbone"].is_none();
  if (backbone_given) m.backbone = o["backbone"].cast<std::string>();
  m.hidden_size = override_option(o, "hidden_size", 1 << 16);
  m.layers = override_option(o, "layers", 1024);
  m.heads = override_option(o, "heads", 1 << 12);
  m.intermediate_size = override_option(o, "intermediate_size", 1 << 20);
  m.mini_batch = option<int>(o, "mini_batch", 1, 1 << 20);
  if (!o["base_lr"].is_none()) m.base_lr = option<double>(o, "base_lr", 0.0, 1e6);
  m.remat_group = option<int>(o, "remat_group", 0, 1 << 20);
  m.no_inner_ln = o["no_inner_ln"].cast<bool>();
  m.no_inner_residual = o["no_inner_residual"].cast<bool>();
  m.no_inner_bias = o["no_inner_bias"].cast<bool>();
  m.fixed_eta = o["fixed_eta"].cast<bool>();
  m.no_token_index = o["no_token_index"].cast<bool>();
  m.frozen_token_index = o["frozen_token_index"].cast<bool>();
  if (m.no_token_index && m.frozen_token_index)
    throw std::invalid_argument("no_token_index and frozen_token_index exclude each other");
  m.fixed_w0 = o["fixed_w0"].cast<bool>();
  m.fixed_views = o["fixed_views"].cast<bool>();
  RunSettings run;
  run.data = o["data"].cast<std::string>();
  run.data_dir = o["data_dir"].cast<std::string>();
  if (run.data.empty() || run.data_dir.empty())
    throw std::invalid_argument("data and data_dir must not be empty");
  run.steps = option<long>(o, "steps", 1, 1000000000);
  run.batch_size = option<int>(o, "batch", 1, 100000);
  run.seq_len = o["seq_len"].is_none() ? 0 : option<int>(o, "seq_len", 2, 1 << 20);
  run.lr = option<double>(o, "lr", 1e-9, 10.0);
  run.warmup_fraction = option<double>(o, "warmup", 0.0, 0.99);
  run.seed = o["seed"].cast<std::uint64_t>();
  run.threads = option<int>(o, "threads", 0, 1024);
  run.checkpoint_every = option<long>(o, "checkpoint_every", 0, 1000000000);
  run.eval_every = option<long>(o, "eval_every", 0, 1000000000);
  run.eval_windows = option<int>(o, "eval_windows", 0, 1 << 30);
  run.max_bad_steps = option<int>(o, "max_bad_steps", 1, 1000000);
  run.on_diverge = o["on_diverge"].cast<std::string>();
  if (run.on_diverge != "rollback" && run.on_diverge != "stop")
    throw std::invalid_argument("on_diverge must be 'rollback' or 'stop', got '" + run.on_diverge +
                                "'");
  run.max_rollbacks = option<int>(o, "max_rollbacks", 0, 1000);
  run.rollback_lr_factor = option<double>(o, "rollback_lr_factor", 0.01, 0.99);
  SessionOptions so;
  so.keep_checkpoints = static_cast<std::size_t>(option<int>(o, "keep_checkpoints", 0, 1000000));
  // Resuming, the run's own train_config.json applies (python/tttlab/__init__.py refuses the options
  // that would change it, as the command line refuses the flags).
  const bool resuming = !o["resume"].is_none();
  const std::filesystem::path out = o[resuming ? "resume" : "out"].cast<std::string>();
  if (out.empty())
    throw std::invalid_argument(std::string(resuming ? "resume" : "out") + " must not be empty");
  TrainConfig cfg;
  if (!resuming) {
    cfg = train_config(build_model_config(m, backbone_given), run);
    if (std::filesystem::exists(out / "latest"))
      throw std::invalid_argument("'" + out.string() +
                                  "' already holds a run; choose another out, or resume it");
  }

  // What the hooks collect: the step and evaluation records of metrics.jsonl, as arrays.
  std::vector<std::int64_t> step, eval_step;
  std::vector<double> loss, lr, grad_norm, tokens_per_s, eval_loss, eval_bpb, eval_accuracy,
      loss_by_position;
  std::vector<std::uint8_t> skipped;
  struct Event {
    long step;
    std::string kind, message;
  };
  std::vector<Event> events;
  std::optional<py::error_already_set> raised;  // Ctrl-C or the callback's exception
  std::unique_ptr<TrainingSession> session;
  std::string checkpoint;
  {
    py::gil_scoped_release nogil;
    if (resuming) {
      session = TrainingSession::resume(out, {}, so);
      cfg = session->trainer().config();
      // The records the resumed run keeps (metrics.jsonl up to its checkpoint), so that the arrays
      // are the whole run's, as the file is.
      for (const Json& j : read_metrics(session->metrics_path())) {
        const long at = j.at("step").get<long>();
        const auto number = [&j](const char* key) {
          const auto it = j.find(key);
          return it == j.end() || it->is_null() ? double(NAN) : it->get<double>();
        };
        if (j.contains("loss")) {
          step.push_back(at);
          loss.push_back(number("loss"));
          lr.push_back(number("lr"));
          grad_norm.push_back(number("grad_norm"));
          tokens_per_s.push_back(number("tokens_per_s"));
          skipped.push_back(j.value("skipped", false) ? 1 : 0);
        } else if (j.contains("val_loss")) {
          eval_step.push_back(at);
          eval_loss.push_back(number("val_loss"));
          eval_bpb.push_back(number("val_bpb"));
          eval_accuracy.push_back(number("val_accuracy"));
        } else if (j.contains("event")) {
          events.push_back(
              {at, j.value("event", std::string()), j.value("message", std::string())});
        }
      }
    } else {
      session = TrainingSession::create(out, cfg, TextData::load(cfg), {}, so);
    }
    SessionHooks hooks;
    hooks.between_steps = [&] {
      py::gil_scoped_acquire gil;
      if (!raised && PyErr_CheckSignals() != 0) raised.emplace();
      return raised ? SessionControl::Stop : SessionControl::Continue;
    };
    hooks.on_step = [&](const StepReport& r, double rate, double elapsed) {
      step.push_back(r.step);
      loss.push_back(r.loss);
      lr.push_back(r.lr);
      grad_norm.push_back(r.grad_norm);
      tokens_per_s.push_back(rate);
      skipped.push_back(r.skipped ? 1 : 0);
      if (progress.is_none()) return;
      py::gil_scoped_acquire gil;
      if (raised) return;
      try {
        py::dict info;
        info["lr"] = r.lr;
        info["grad_norm"] = r.grad_norm;
        info["skipped"] = r.skipped;
        info["tokens_per_s"] = rate;
        info["elapsed_s"] = elapsed;
        info["steps"] = cfg.steps;
        progress(r.step, r.loss, info);
      } catch (py::error_already_set& e) {
        raised.emplace(std::move(e));
        session->request_stop();
      }
    };
    // A rollback (session.hpp, DIVERGENCE) truncates metrics.jsonl to the step it goes back to, and
    // the arrays with it, so that they stay the file's records.
    hooks.on_event = [&](long at, const std::string& kind, const std::string& message) {
      if (kind == "rollback") {
        const auto keep = [at](const std::vector<std::int64_t>& steps) {
          return static_cast<std::size_t>(
              std::upper_bound(steps.begin(), steps.end(), static_cast<std::int64_t>(at)) -
              steps.begin());
        };
        const std::size_t n = keep(step), ne = keep(eval_step);
        for (auto* v : {&loss, &lr, &grad_norm, &tokens_per_s}) v->resize(n);
        step.resize(n);
        skipped.resize(n);
        for (auto* v : {&eval_loss, &eval_bpb, &eval_accuracy}) v->resize(ne);
        eval_step.resize(ne);
        events.erase(std::remove_if(events.begin(), events.end(),
                                    [at](const Event& e) { return e.step > at; }),
                     events.end());
      }
      events.push_back({at, kind, message});
    };
    hooks.on_eval = [&](const EvalReport& ev, bool final) {
      eval_step.push_back(ev.step);
      eval_loss.push_back(ev.loss);
      eval_bpb.push_back(ev.bpb);
      eval_accuracy.push_back(ev.accuracy_measured ? ev.accuracy : NAN);
      if (final) loss_by_position = ev.loss_by_position;
    };
    session->run(hooks);
    if (session->checkpoint_step() >= 0) checkpoint = resolve_checkpoint(out).string();
  }
  if (raised) throw std::move(*raised);
  py::dict d;
  d["run_dir"] = out.string();
  d["checkpoint"] = checkpoint;
  d["train_config"] =
      py::module_::import("json").attr("loads")(session->trainer().config().to_json());
  const auto n = static_cast<py::ssize_t>(step.size()),
             ne = static_cast<py::ssize_t>(eval_step.size());
  d["step"] = to_numpy(std::move(step), {n});
  d["loss"] = to_numpy(std::move(loss), {n});
  d["lr"] = to_numpy(std::move(lr), {n});
  d["grad_norm"] = to_numpy(std::move(grad_norm), {n});
  d["tokens_per_s"] = to_numpy(std::move(tokens_per_s), {n});
  d["skipped"] = to_numpy(std::move(skipped), {n}).attr("astype")("bool");
  d["eval_step"] = to_numpy(std::move(eval_step), {ne});
  d["eval_loss"] = to_numpy(std::move(eval_loss), {ne});
  d["eval_bpb"] = to_numpy(std::move(eval_bpb), {ne});
  d["eval_accuracy"] = to_numpy(std::move(eval_accuracy), {ne});
  const auto nt = static_cast<py::ssize_t>(loss_by_position.size());
  d["val_loss_by_position"] = to_numpy(std::move(loss_by_position), {nt});
  py::list ev;
  for (const Event& e : events) {
    py::dict x;
    x["step"] = e.step;
    x["event"] = e.kind;
    x["message"] = e.message;
    ev.append(x);
  }
  d["events"] = ev;
  return d;
}

// A trained model and where it came from.
class PyModel {
 public:
  explicit PyModel(const std::string& path) : m_path(path) {
    std::error_code ec;
    if (!std::filesystem::exists(path, ec)) {
      // The engine's own message ("'PATH' does not exist"), as FileNotFoundError.
      try {
        resolve_checkpoint(path);
      } catch (const std::exception& e) {
        PyErr_SetString(PyExc_FileNotFoundError, e.what());
        throw py::error_already_set();
      }
    }
    py::gil_scoped_release nogil;
    m_model = load_model(path);
    m_source = resolve_checkpoint(path).string();
    m_params = m_model->num_params();
  }

  const ModelConfig& config() const { return m_model->config(); }
  const std::string& path() const { return m_path; }
  const std::string& source() const { return m_source; }
  long params() const { return m_params; }

  py::dict config_dict() const {
    return py::module_::import("json").attr("loads")(config().to_json()).cast<py::dict>();
  }

  std::string repr() const {
    const ModelConfig& c = config();
    return "<tttlab.Model '" + m_source + "': " + to_string(c.seq_layer) + ", d_model " +
           std::to_string(c.hidden_size) + ", " + std::to_string(c.num_hidden_layers) +
           " layers x " + std::to_string(c.num_attention_heads) + " heads, mini-batch " +
           std::to_string(c.mini_batch_size) + ", " + std::to_string(m_params) + " parameters>";
  }

  // `tttlab eval --data FILE --device cpu` on the bytes of `text`.
  py::dict eval(const py::object& text, std::optional<int> seq_len, int threads, bool per_byte) {
    std::vector<std::uint8_t> bytes = text_bytes(text, "text");
    if (seq_len && (*seq_len < 2 || *seq_len > (1 << 20)))
      throw std::invalid_argument("seq_len must be in [2, 1048576], got " +
                                  std::to_string(*seq_len));
    if (threads < 0 || threads > 1024)
      throw std::invalid_argument("threads must be in [0, 1024], got " + std::to_string(threads));
    TextScore r;
    std::string note;
    int window = 0;
    Interrupt interrupt;
    try {
      py::gil_scoped_release nogil;
      // The checks `tttlab eval --data FILE` makes on a file's bytes (binary or not UTF-8: refused).
      if (auto problem = text_problem(compute_text_stats(bytes), "the text"))
        throw std::invalid_argument(*problem);
      TrainConfig cfg = checkpoint_score_config(*m_model, m_path);
      if (seq_len) cfg.seq_len = *seq_len;
      cfg.threads = threads;
      note = fit_window_to_text(cfg, bytes.size(), "the text");
      window = cfg.seq_len;
      TextData data;
      data.train = std::move(bytes);
      data.description = "a text in memory";
      const std::unique_ptr<Trainer> t = scoring_trainer(*m_model, cfg, std::move(data));
      TextScoreOptions so;
      so.per_byte = per_byte;
      so.progress = [&](std::int64_t, std::int64_t) { interrupt.check(); };
      r = score_text(*t, t->data().train, so);
      if (!std::isfinite(r.loss)) throw NonFiniteModelError(non_finite_model_message(m_source));
    } catch (const Interrupted&) {
    }
    interrupt.rethrow();
    py::dict d;
    const auto T = static_cast<py::ssize_t>(r.loss_by_position.size());
    d["loss_by_position"] = to_numpy(std::move(r.loss_by_position), {T});
    d["loss"] = r.loss;
    d["bpb"] = r.bpb;
    d["accuracy"] = r.accuracy;
    d["bytes"] = r.bytes;
    d["targets"] = r.targets;
    d["full_windows"] = r.full_windows;
    d["tail_targets"] = r.tail_targets;
    d["seq_len"] = window;
    d["note"] = note;
    if (per_byte) {
      const auto n = static_cast<py::ssize_t>(r.per_byte.size());
      d["per_byte"] = to_numpy(std::move(r.per_byte), {n});
    }
    return d;
  }

  // `tttlab states` without the file: the same tensors, by the same names.
  py::dict states(const py::object& text, const py::object& block, const py::object& head,
                  const py::object& every, const std::string& dtype, long max_tokens) {
    inspect::StatesRequest r;
    r.bytes = text_bytes(text, "text");
    r.blocks = int_list(block);
    r.heads = int_list(head);
    if (py::isinstance<py::str>(every)) {
      const std::string e = every.cast<std::string>();
      if (e == "token")
        r.every = inspect::SaveEvery::Token;
      else if (e == "mini-batch")
        r.every = inspect::SaveEvery::MiniBatchEnd;
      else
        throw std::invalid_argument(
            "every must be 'token', 'mini-batch' or a stride (an int >= 1), got '" + e + "'");
    } else {
      r.every = inspect::SaveEvery::Stride;
      r.stride = every.cast<long>();
      if (r.stride < 1)
        throw std::invalid_argument("every: the stride must be at least 1, got " +
                                    std::to_string(r.stride));
    }
    if (dtype == "f32" || dtype == "float32")
      r.stored = DType::F32;
    else if (dtype == "f64" || dtype == "float64")
      r.stored = DType::F64;
    else
      throw std::invalid_argument("dtype must be 'float32' or 'float64', got '" + dtype + "'");
    if (max_tokens < 1)
      throw std::invalid_argument("max_tokens must be at least 1, got " +
                                  std::to_string(max_tokens));
    if (static_cast<long>(r.bytes.size()) > max_tokens)
      throw std::invalid_argument("the text has " + std::to_string(r.bytes.size()) +
                                  " bytes, above max_tokens " + std::to_string(max_tokens));
    r.model_source = m_source;
    // Each tensor as computed: the floating-point ones narrowed to the stored dtype as the file does.
    struct Out {
      std::string name;
      std::vector<py::ssize_t> shape;
      std::variant<std::vector<std::uint8_t>, std::vector<std::int64_t>, std::vector<float>,
                   std::vector<double>>
          data;
    };
    std::vector<Out> out;
    Interrupt interrupt;
    try {
      py::gil_scoped_release nogil;
      const inspect::StatesSummary plan = inspect::plan_states(config(), r);
      check_memory(inspect::states_memory(config(), r, plan), "the states");
      const auto emit = [&](const inspect::StatesTensor& t) {
        Out o{t.name, std::vector<py::ssize_t>(t.shape.begin(), t.shape.end()), {}};
        std::visit(
            [&](auto span) {
              using E = typename decltype(span)::element_type;
              if constexpr (std::is_same_v<E, const double>) {
                if (r.stored == DType::F32) {
                  std::vector<float> v(span.size());
                  for (std::size_t i = 0; i < span.size(); ++i) v[i] = static_cast<float>(span[i]);
                  o.data = std::move(v);
                } else {
                  o.data = std::vector<double>(span.begin(), span.end());
                }
              } else {
                o.data = std::vector<std::remove_const_t<E>>(span.begin(), span.end());
              }
            },
            t.data);
        out.push_back(std::move(o));
      };
      inspect::compute_states(*m_model, r, emit, [&](int, int) { interrupt.check(); });
    } catch (const Interrupted&) {
    }
    interrupt.rethrow();
    py::dict d;
    for (Out& o : out)
      std::visit([&](auto& v) { d[py::str(o.name)] = to_numpy(std::move(v), o.shape); }, o.data);
    return d;
  }

  // The inputs of one TTT head along `text` as the app's stepper and `tttlab states` take them
  // (lab/engine/head_inputs.hpp: the model computes in float, the inputs are widened to double), keyed
  // by tttlab.inner_loop's arguments, so that inner_loop(**inputs) is the stepper's inner loop.
  py::dict head_inputs(const py::object& text, int block, int head, long max_tokens) {
    std::vector<std::uint8_t> bytes = text_bytes(text, "text");
    if (bytes.empty()) throw std::invalid_argument("text must not be empty");
    if (max_tokens < 1)
      throw std::invalid_argument("max_tokens must be at least 1, got " +
                                  std::to_string(max_tokens));
    if (static_cast<long>(bytes.size()) > max_tokens)
      throw std::invalid_argument("the text has " + std::to_string(bytes.size()) +
                                  " bytes, above max_tokens " + std::to_string(max_tokens));
    const ModelConfig& c = config();
    if (block < 0 || block >= c.num_hidden_layers)
      throw std::invalid_argument("block " + std::to_string(block) +
                                  " does not exist: the model has " +
                                  std::to_string(c.num_hidden_layers) + " blocks");
    if (head < 0 || head >= c.num_attention_heads)
      throw std::invalid_argument("head " + std::to_string(head) +
                                  " does not exist: the model has " +
                                  std::to_string(c.num_attention_heads) + " heads");
    std::vector<lab::HeadInputs<double>> heads;
    {
      py::gil_scoped_release nogil;
      heads = lab::model_layer_heads<double>(*m_model, bytes, block, "model");
    }
    lab::HeadInputs<double>& h = heads[static_cast<std::size_t>(head)];
    const py::ssize_t T = h.Q.rows(), d = h.Q.cols();
    py::dict r;
    r["Q"] = eigen_numpy(h.Q, {T, d});
    r["K"] = eigen_numpy(h.K, {T, d});
    r["V"] = eigen_numpy(h.V, {T, d});
    r["lam"] = eigen_numpy(h.lambda, {T});
    r["W1"] = eigen_numpy(h.w0.W1, {h.w0.W1.rows(), h.w0.W1.cols()});
    r["b1"] = h.options.bias ? py::object(eigen_numpy(h.w0.b1, {h.w0.b1.size()})) : py::none();
    if (h.options.model == InnerModel::MLP) {
      r["W2"] = eigen_numpy(h.w0.W2, {h.w0.W2.rows(), h.w0.W2.cols()});
      if (h.options.bias) r["b2"] = eigen_numpy(h.w0.b2, {h.w0.b2.size()});
    }
    r["ln_weight"] = eigen_numpy(h.params.ln_weight, {d});
    r["ln_bias"] = eigen_numpy(h.params.ln_bias, {d});
    r["tau"] = eigen_numpy(h.params.tau, {h.params.tau.size()});
    r["mini_batch"] = h.options.mini_batch;
    r["layer_norm"] = h.options.layer_norm;
    r["residual"] = h.options.residual;
    r["ln_eps"] = h.options.ln_eps;
    return r;
  }

  // `tttlab generate --device cpu`: the prompt followed by the sampled bytes.
  py::object generate(const py::object& prompt, int tokens, double temperature, int top_k,
                      std::uint64_t seed) {
    const bool as_str = py::isinstance<py::str>(prompt);
    const std::vector<std::uint8_t> bytes = text_bytes(prompt, "prompt");
    if (bytes.empty()) throw std::invalid_argument("prompt must not be empty");
    GenerateOptions go;
    go.tokens = tokens;
    go.temperature = temperature;
    go.top_k = top_k;
    go.seed = seed;
    go.source = m_source;
    go.validate();  // before the GIL is released: a ValueError names the argument
    std::string text(bytes.begin(), bytes.end());
    Interrupt interrupt;
    try {
      py::gil_scoped_release nogil;
      const std::vector<int> p(bytes.begin(), bytes.end());
      const std::unique_ptr<TokenDecoder> decoder = make_cpu_decoder(*m_model);
      GenerateHooks hooks;
      hooks.prefilled = [&] { interrupt.check(); };
      hooks.token = [&](int) { interrupt.check(); };
      for (int t : generate_tokens(*decoder, p, go, hooks)) text.push_back(static_cast<char>(t));
    } catch (const Interrupted&) {
    }
    interrupt.rethrow();
    if (as_str)
      return py::reinterpret_steal<py::object>(
          PyUnicode_DecodeUTF8(text.data(), py::ssize_t(text.size()), "replace"));
    return py::bytes(text);
  }

 private:
  std::string m_path;    // as given
  std::string m_source;  // the checkpoint directory it resolved to
  std::unique_ptr<Model<float>> m_model;
  long m_params = 0;
};

}  // namespace
}  // namespace tttlab::python

PYBIND11_MODULE(_tttlab, m) {
  using tttlab::python::PyModel;
  m.doc() = "TTT Lab's compute engine (the CPU implementation) from Python: see docs/PYTHON.md.";
  py::class_<PyModel>(
      m, "Model", "A trained model (a checkpoint of `tttlab train`). Made by tttlab.load(path).")
      .def_property_readonly(
          "config", &PyModel::config_dict,
          "The model's config.json as a dict (hidden_size, num_hidden_layers, ...).")
      .def_property_readonly("path", &PyModel::source,
                             "The checkpoint directory the model was read from.")
      .def_property_readonly("parameters", &PyModel::params, "The number of parameters.")
      .def("__repr__", &PyModel::repr)
      .def("eval", &PyModel::eval, py::arg("text"), py::kw_only(), py::arg("seq_len") = py::none(),
           py::arg("threads") = 0, py::arg("per_byte") = false,
           "Score every byte of `text` (str: its UTF-8 bytes; or bytes) but the first, as `tttlab "
           "eval --data FILE --device cpu --json` does, in windows of seq_len bytes (default: the "
           "run's T, from its train_config.json, else the model's max_position_embeddings; a text "
           "shorter than one window is one window of its own length, and 'note' says "
           "so).\n\nReturns a dict: loss_by_position float64 [seq_len] (nats, mean over the full "
           "windows; empty when there are none), loss (nats/byte), bpb (bits/byte), accuracy "
           "(next-byte, 0..1), bytes, targets, full_windows, tail_targets, seq_len, note, and with "
           "per_byte=True per_byte float32 [bytes - 1] (nats; index i is byte i + 1).\n\nCtrl-C "
           "stops it after the window in progress (KeyboardInterrupt).")
      .def("states", &PyModel::states, py::arg("text"), py::kw_only(),
           py::arg("block") = py::none(), py::arg("head") = py::none(), py::arg("every") = "token",
           py::arg("dtype") = "float32", py::arg("max_tokens") = 1 << 16,
           "The hidden state of TTT heads along `text`: the tensors of the safetensors file "
           "`tttlab states` writes, by the same names and with the same values, as a dict of NumPy "
           "arrays. block, head: an int, a list of ints, or None (all). every: 'token', "
           "'mini-batch' or an int stride. dtype: 'float32' or 'float64'.\n\nT tokens, n saved "
           "states, head dimension d: tokens uint8 [T]; saved_tokens int64 [n]; "
           "block{B}.head{H}.W1 [n, d, d] (z = k @ W1 + b1), .b1 [n, d], .W1_initial [d, d], "
           ".b1_initial [d] (TTT-MLP adds W2, b2); .loss_initial, .loss_before, .loss_after [T] "
           "(the inner loss of W0, W_{t-1} and W_t on token t); .lambda, .tau, .eta [T].\n\nCtrl-C "
           "stops it after the block in progress (KeyboardInterrupt).")
      .def("head_inputs", &PyModel::head_inputs, py::arg("text"), py::kw_only(), py::arg("block"),
           py::arg("head"), py::arg("max_tokens") = 1 << 16,
           "The inputs of one TTT head's inner loop along `text`, as the app's inner-loop stepper "
           "and model.states take them (computed by the model in float32, widened to float64), "
           "keyed by tttlab.inner_loop's arguments: Q, K, V [T, d], lam [T], W1 [d, d] and b1 [d] "
           "(W0; b1 None without an inner bias), ln_weight, ln_bias [d], tau [b], mini_batch, "
           "layer_norm, residual, ln_eps. For a TTT-Linear head, tttlab.inner_loop(**inputs) is "
           "the stepper's inner loop; a TTT-MLP head adds W2 [4d, d] and b2 [d] (and its W1 is [d, "
           "4d]), which inner_loop does not take.")
      .def("generate", &PyModel::generate, py::arg("prompt"), py::kw_only(),
           py::arg("tokens") = 200, py::arg("temperature") = 0.8, py::arg("top_k") = 0,
           py::arg("seed") = 0,
           "Sample `tokens` bytes after `prompt` as `tttlab generate --device cpu` does "
           "(temperature 0: greedy; top_k 0: all bytes). Returns the prompt followed by the "
           "sampled bytes: bytes for a bytes prompt, str for a str prompt (bytes that are not "
           "UTF-8 become U+FFFD).\n\nCtrl-C stops it after the token in progress "
           "(KeyboardInterrupt).");
  using tttlab::python::is_float32;
  m.def(
      "inner_loop",
      [](const py::object& Q, const py::object& K, const py::object& V, const py::object& lam,
         const py::object& W1, const py::object& b1, const py::object& ln_weight,
         const py::object& ln_bias, const py::object& tau, int mini_batch, const std::string& form,
         bool layer_norm, bool residual, double ln_eps) {
        if (is_float32(Q))
          return tttlab::python::inner_loop<float>(Q, K, V, lam, W1, b1, ln_weight, ln_bias, tau,
                                                   mini_batch, form, layer_norm, residual, ln_eps);
        return tttlab::python::inner_loop<double>(Q, K, V, lam, W1, b1, ln_weight, ln_bias, tau,
                                                  mini_batch, form, layer_norm, residual, ln_eps);
      },
      py::arg("Q"), py::arg("K"), py::arg("V"), py::arg("lam"), py::arg("W1"),
      py::arg("b1") = py::none(), py::kw_only(), py::arg("ln_weight") = py::none(),
      py::arg("ln_bias") = py::none(), py::arg("tau") = py::none(), py::arg("mini_batch") = 16,
      py::arg("form") = "primal", py::arg("layer_norm") = true, py::arg("residual") = true,
      py::arg("ln_eps") = 1e-6,
      "One TTT-Linear head's inner loop (docs/MATH.md §3) on your arrays, from W0 = (W1, b1): Q, "
      "K, V [T, d] (test, training and label views), lam [T] (the per-token rate lambda_t), W1 [d, "
      "d] stored [in, out] (z = k @ W1 + b1), b1 [d] or None (no bias); ln_weight, ln_bias [d] "
      "(the inner LayerNorm, with epsilon ln_eps; default 1, 0); tau [mini_batch] (default 1/i, i "
      "= 1..b). Computed in "
      "float32 when Q is float32, else in float64 (the other arrays are "
      "converted).\n\nform='primal' (token by token) returns out [T, d], W1 [T, d, d] and b1 [T, "
      "d] (the state after each token), loss_initial, loss_before, loss_after [T] (the inner loss "
      "of W0, W_{t-1}, W_t on token t); form='dual' (per mini-batch matrix products) returns out "
      "only. Both forms compute the same function.");
  m.def(
      "inner_loop_grad",
      [](const py::object& Q, const py::object& K, const py::object& V, const py::object& lam,
         const py::object& W1, const py::object& b1, const py::object& dout,
         const py::object& ln_weight, const py::object& ln_bias, const py::object& tau,
         int mini_batch, bool layer_norm, bool residual, double ln_eps) {
        if (is_float32(Q))
          return tttlab::python::inner_loop_grad<float>(Q, K, V, lam, W1, b1, dout, ln_weight,
                                                        ln_bias, tau, mini_batch, layer_norm,
                                                        residual, ln_eps);
        return tttlab::python::inner_loop_grad<double>(Q, K, V, lam, W1, b1, dout, ln_weight,
                                                       ln_bias, tau, mini_batch, layer_norm,
                                                       residual, ln_eps);
      },
      py::arg("Q"), py::arg("K"), py::arg("V"), py::arg("lam"), py::arg("W1"),
      py::arg("b1") = py::none(), py::kw_only(), py::arg("dout"), py::arg("ln_weight") = py::none(),
      py::arg("ln_bias") = py::none(), py::arg("tau") = py::none(), py::arg("mini_batch") = 16,
      py::arg("layer_norm") = true, py::arg("residual") = true, py::arg("ln_eps") = 1e-6,
      "The gradients of a scalar loss L through tttlab.inner_loop with the same arguments, given "
      "dout = dL/d(out) [T, d]: the manual backward the trainer uses (docs/MATH.md §7.3; second "
      "order, through the inner gradient step). Returns a dict keyed by the argument each gradient "
      "belongs to: Q, K, V [T, d], lam [T], W1 [d, d], b1 [d] (when b1 is given), ln_weight, "
      "ln_bias [d], tau [mini_batch]. float32 when Q is float32, else float64.");
  m.def(
      "matrix_rule",
      [](const std::string& rule, const py::object& q, const py::object& k, const py::object& v,
         const py::object& beta, const py::object& alpha, const py::object& S0,
         const std::string& form, int chunk) {
        if (is_float32(q))
          return tttlab::python::matrix_rule<float>(rule, q, k, v, beta, alpha, S0, form, chunk);
        return tttlab::python::matrix_rule<double>(rule, q, k, v, beta, alpha, S0, form, chunk);
      },
      py::arg("rule"), py::arg("q"), py::arg("k"), py::arg("v"), py::arg("beta") = py::none(),
      py::arg("alpha") = py::none(), py::arg("S0") = py::none(), py::kw_only(),
      py::arg("form") = "primal", py::arg("chunk") = 64,
      "One head of a matrix fast-weight rule (docs/MATH.md §11.2) on your arrays: rule "
      "'linear_attention' (S_t = S_{t-1} + k_t^T v_t), 'decayed_hebbian' (Mamba-2's: S_t = alpha_t "
      "S_{t-1} + beta_t k_t^T v_t), 'deltanet' (S_t = S_{t-1} - beta_t k_t^T (k_t S_{t-1} - v_t)) "
      "or 'gated_deltanet' (S_t = alpha_t S_{t-1} - beta_t k_t^T (alpha_t k_t S_{t-1} - v_t)); "
      "every rule reads o_t = q_t S_t after its write. q, k [T, d_k] (the delta rules expect "
      "L2-normalised k), v [T, d_v], beta [T] (all but linear_attention), alpha [T] in (0, 1] "
      "(decayed_hebbian, gated_deltanet), S0 [d_k, d_v] (default 0). float32 when q is float32, "
      "else float64.\n\nReturns o [T, d_v] and state [d_k, d_v] (S_T); form='primal' (token by "
      "token) adds states [T, d_k, d_v] (S_t after each token) and loss_before, loss_after [T] "
      "(the rule's inner loss of S_{t-1} and S_t on token t: Hebbian -<k S, v>, squared 1/2 "
      "|k S - v|^2); form='chunked' computes the same function in chunks of `chunk` tokens.");
  m.def(
      "matrix_rule_grad",
      [](const std::string& rule, const py::object& q, const py::object& k, const py::object& v,
         const py::object& beta, const py::object& alpha, const py::object& S0,
         const py::object& dout, const py::object& dstate) {
        if (is_float32(q))
          return tttlab::python::matrix_rule_grad<float>(rule, q, k, v, beta, alpha, S0, dout,
                                                         dstate);
        return tttlab::python::matrix_rule_grad<double>(rule, q, k, v, beta, alpha, S0, dout,
                                                        dstate);
      },
      py::arg("rule"), py::arg("q"), py::arg("k"), py::arg("v"), py::arg("beta") = py::none(),
      py::arg("alpha") = py::none(), py::arg("S0") = py::none(), py::kw_only(), py::arg("dout"),
      py::arg("dstate") = py::none(),
      "The gradients of a scalar loss L through tttlab.matrix_rule with the same arguments, given "
      "dout = dL/do [T, d_v] and dstate = dL/dS_T [d_k, d_v] (default 0): the manual backward "
      "(docs/MATH.md §11.4, the recurrence run in reverse). Returns a dict keyed by argument: q, k "
      "[T, d_k], v [T, d_v], beta [T] and alpha [T] (for the rules that take them), S0 [d_k, "
      "d_v].");
  m.def(
      "ttt_layer_params", &tttlab::python::ttt_layer_params, py::arg("width"), py::arg("heads"),
      py::kw_only(), py::arg("seed") = 0, py::arg("dtype") = "float64",
      "A TTT layer's parameters at the initialisation of docs/MATH.md §8.5 (projections, theta_lr "
      "and W0 ~ N(0, 0.02), convolutions N(0, 1/K), norms 1 and 0, the rest 0), drawn from `seed`, "
      "as a dict of 2-D arrays by the official PyTorch names (q_proj.weight [D, D] stored [in, "
      "out], "
      "..., W1[h], b1[h] per head). Keywords after `heads` describe the layer as for "
      "tttlab.ttt_layer.");
  m.def(
      "ttt_layer",
      [](const py::object& x, const py::dict& params, int heads, const std::string& form,
         const py::kwargs& kw) {
        if (is_float32(x)) return tttlab::python::ttt_layer<float>(x, params, heads, form, kw);
        return tttlab::python::ttt_layer<double>(x, params, heads, form, kw);
      },
      py::arg("x"), py::arg("params"), py::kw_only(), py::arg("heads"), py::arg("form") = "dual",
      "A whole TTT layer (tttlab/ttt/layer.hpp: projections, convolutions, RoPE, the learned rate, "
      "the inner loop per head, post-norm, gate, output projection) on one sequence x [T, D] from "
      "the fresh state, with the parameters `params` (the dict tttlab.ttt_layer_params returns, "
      "any values). Returns y [T, D]; form='primal' adds the state of every head after every "
      "token, "
      "W1 [H, T, d, d] and b1 [H, T, d] (TTT-MLP: W1 [H, T, d, 4d], b1, W2, b2), and loss_before, "
      "loss_after [H, T]. float32 when x is float32, else float64. Keywords: mini_batch (16), "
      "inner ('linear' or 'mlp'), layer_norm, residual, bias (True), base_lr (1.0 for linear, 0.1 "
      "for mlp), learned_gate, token_index (True), share_qk, use_gate (False; True for both is the "
      "Mamba backbone's layer), conv_kernel (4), rope (True), rope_theta (1e4), post_norm (True), "
      "ln_eps (1e-6).");
  m.def(
      "ttt_layer_grad",
      [](const py::object& x, const py::dict& params, const py::object& dy, int heads,
         const py::kwargs& kw) {
        if (is_float32(x)) return tttlab::python::ttt_layer_grad<float>(x, params, dy, heads, kw);
        return tttlab::python::ttt_layer_grad<double>(x, params, dy, heads, kw);
      },
      py::arg("x"), py::arg("params"), py::kw_only(), py::arg("dy"), py::arg("heads"),
      "The gradients of a scalar loss L through tttlab.ttt_layer (the same arguments), given dy = "
      "dL/dy [T, D]: the layer's manual backward, the one training runs (docs/MATH.md §7). Returns "
      "a dict: x [T, D] and every parameter by its name, of its shape.");
  m.def("deltanet_layer_params", &tttlab::python::deltanet_layer_params, py::arg("width"),
        py::arg("heads"), py::kw_only(), py::arg("seed") = 0, py::arg("dtype") = "float64",
        py::arg("std") = 0.02,
        "A DeltaNet (gated=True: Gated DeltaNet) layer's parameters at their initialisation "
        "(tttlab/seq/deltanet_layer.hpp; `std` the projections' standard deviation), by "
        "flash-linear-attention's names, projections stored [in, out]: q_proj.weight, "
        "k_proj.weight, v_proj.weight [D, D], b_proj.weight [D, H], q_conv1d.weight, "
        "k_conv1d.weight, v_conv1d.weight [D, K], gated: a_proj.weight [D, H], A_log, dt_bias [1, "
        "H], g_proj.weight [D, D]; o_norm.weight [1, d], o_proj.weight [D, D]. The layer's "
        "keywords: gated (False), conv_kernel (4), chunk (64), norm_eps, l2_eps (1e-6).");
  m.def(
      "deltanet_layer",
      [](const py::object& x, const py::dict& params, int heads, const std::string& form,
         const py::kwargs& kw) {
        if (is_float32(x)) return tttlab::python::deltanet_layer<float>(x, params, heads, form, kw);
        return tttlab::python::deltanet_layer<double>(x, params, heads, form, kw);
      },
      py::arg("x"), py::arg("params"), py::kw_only(), py::arg("heads"), py::arg("form") = "chunked",
      "A whole DeltaNet or Gated DeltaNet layer (tttlab/seq/deltanet_layer.hpp, docs/MATH.md "
      "§11.8: projections, short convolutions, L2-normalised q and k, the delta rule per head, the "
      "output RMSNorm, the gate, the output projection) on one sequence x [T, D] from the empty "
      "state, with `params` (deltanet_layer_params' names, any values). Returns y [T, D]; "
      "form='chunked' (chunks of `chunk` tokens, the UT transform) or 'primal' (token by token), "
      "the same function. float32 when x is float32, else float64.");
  m.def(
      "deltanet_layer_grad",
      [](const py::object& x, const py::dict& params, const py::object& dy, int heads,
         const py::kwargs& kw) {
        if (is_float32(x))
          return tttlab::python::deltanet_layer_grad<float>(x, params, dy, heads, kw);
        return tttlab::python::deltanet_layer_grad<double>(x, params, dy, heads, kw);
      },
      py::arg("x"), py::arg("params"), py::kw_only(), py::arg("dy"), py::arg("heads"),
      "The gradients of a scalar loss L through tttlab.deltanet_layer (the same arguments), given "
      "dy = dL/dy [T, D]: the layer's manual backward, the one training runs (docs/MATH.md "
      "§11.4). Returns a dict: x [T, D] and every parameter by its name, of its shape.");
  m.def(
      "mamba2_layer_params",
      [](int width, std::uint64_t seed, const std::string& dtype, double std_dev,
         const py::kwargs& kw) {
        using namespace tttlab;
        using namespace tttlab::python;
        return sequence_layer_params<Mamba2Layer, Mamba2Params>(mamba2_config(width, kw), seed,
                                                                dtype, std_dev);
      },
      py::arg("width"), py::kw_only(), py::arg("seed") = 0, py::arg("dtype") = "float64",
      py::arg("std") = 0.02,
      "A Mamba-2 layer's parameters at their initialisation (tttlab/seq/mamba2_layer.hpp: the "
      "reference's for dt_bias, A_log, D, the convolution and the norm; the projections N(0, std)) "
      "by the reference's state_dict names, projections stored [in, out]: in_proj.weight [D, "
      "2*d_inner + 2N + H] (columns z, x, B, C, dt), conv1d.weight [d_inner + 2N, K], conv1d.bias "
      "[1, d_inner + 2N], dt_bias, A_log, D [1, H], norm.weight [1, d_inner], out_proj.weight "
      "[d_inner, D]. The layer's keywords: d_state (N, 16), d_conv (K, 4), expand (2; d_inner = "
      "expand*D), headdim (P, 16; H = d_inner/P), chunk (16), norm_eps (1e-5).");
  m.def(
      "mamba2_layer",
      [](const py::object& x, const py::dict& params, const std::string& form,
         const py::kwargs& kw) {
        if (is_float32(x)) return tttlab::python::mamba2_layer<float>(x, params, form, kw);
        return tttlab::python::mamba2_layer<double>(x, params, form, kw);
      },
      py::arg("x"), py::arg("params"), py::kw_only(), py::arg("form") = "chunked",
      "A whole Mamba-2 layer (tttlab/seq/mamba2_layer.hpp, docs/MATH.md §8.8: in_proj, the causal "
      "convolution, the selective scan per head, the gated RMSNorm, out_proj) on one sequence x "
      "[T, D] from the empty state, with `params` (mamba2_layer_params' names, any values). "
      "Returns y [T, D]; form='chunked' (the SSD matrix form in chunks of `chunk` tokens) or "
      "'recurrent' (token by token), the same function. float32 when x is float32, else float64.");
  m.def(
      "mamba2_layer_grad",
      [](const py::object& x, const py::dict& params, const py::object& dy, const py::kwargs& kw) {
        using namespace tttlab;
        using namespace tttlab::python;
        const Mamba2Config cfg = mamba2_config(sequence_width(x), kw);
        if (is_float32(x))
          return sequence_layer_grad<Mamba2Layer, Mamba2Params, float>(cfg, x, params, dy);
        return sequence_layer_grad<Mamba2Layer, Mamba2Params, double>(cfg, x, params, dy);
      },
      py::arg("x"), py::arg("params"), py::kw_only(), py::arg("dy"),
      "The gradients of a scalar loss L through tttlab.mamba2_layer (the same arguments), given "
      "dy = dL/dy [T, D]: the layer's manual backward through the chunked form, the one training "
      "runs. Returns a dict: x [T, D] and every parameter by its name, of its shape.");
  m.def(
      "titans_layer_params",
      [](int width, int heads, std::uint64_t seed, const std::string& dtype, double std_dev,
         const py::kwargs& kw) {
        using namespace tttlab;
        using namespace tttlab::python;
        return sequence_layer_params<TitansLayer, TitansParams>(titans_config(width, heads, kw),
                                                                seed, dtype, std_dev);
      },
      py::arg("width"), py::arg("heads"), py::kw_only(), py::arg("seed") = 0,
      py::arg("dtype") = "float64", py::arg("std") = 0.02,
      "A Titans layer's parameters at their initialisation (tttlab/seq/titans_layer.hpp; `std` the "
      "projections' standard deviation), projections stored [in, out]: q_proj.weight, "
      "k_proj.weight, v_proj.weight [D, D], q_conv1d.weight, k_conv1d.weight, v_conv1d.weight [D, "
      "K], theta_proj.weight, alpha_proj.weight, eta_proj.weight [D, H] and their .bias [1, H], "
      "ttt_norm.weight, ttt_norm.bias [H, d], o_norm.weight [1, d], g_proj.weight [D, D], "
      "o_proj.weight [D, D]. The layer's keywords: conv_kernel (4), mini_batch (16), ln_eps, "
      "norm_eps, l2_eps (1e-6).");
  m.def(
      "titans_layer",
      [](const py::object& x, const py::dict& params, int heads, const std::string& form,
         const py::kwargs& kw) {
        if (is_float32(x)) return tttlab::python::titans_layer<float>(x, params, heads, form, kw);
        return tttlab::python::titans_layer<double>(x, params, heads, form, kw);
      },
      py::arg("x"), py::arg("params"), py::kw_only(), py::arg("heads"), py::arg("form") = "chunked",
      "A whole Titans layer (tttlab/seq/titans_layer.hpp, docs/MATH.md §11.9: projections, short "
      "convolutions, L2-normalised q and k, the memory with momentum and weight decay per head, "
      "the output RMSNorm, the gate, the output projection) on one sequence x [T, D] from the "
      "empty state, with `params` (titans_layer_params' names, any values). Returns y [T, D]; "
      "form='chunked' (one chunk per mini-batch) or 'primal' (token by token), the same function. "
      "float32 when x is float32, else float64.");
  m.def(
      "titans_layer_grad",
      [](const py::object& x, const py::dict& params, const py::object& dy, int heads,
         const py::kwargs& kw) {
        using namespace tttlab;
        using namespace tttlab::python;
        const TitansLayerConfig cfg = titans_config(sequence_width(x), heads, kw);
        if (is_float32(x))
          return sequence_layer_grad<TitansLayer, TitansParams, float>(cfg, x, params, dy);
        return sequence_layer_grad<TitansLayer, TitansParams, double>(cfg, x, params, dy);
      },
      py::arg("x"), py::arg("params"), py::kw_only(), py::arg("dy"), py::arg("heads"),
      "The gradients of a scalar loss L through tttlab.titans_layer (the same arguments), given "
      "dy = dL/dy [T, D]: the layer's manual backward, the one training runs. Returns a dict: x "
      "[T, D] and every parameter by its name, of its shape.");
  m.def(
      "lact_layer_params",
      [](int width, std::uint64_t seed, const std::string& dtype, double std_dev,
         const py::kwargs& kw) {
        using namespace tttlab;
        using namespace tttlab::python;
        return sequence_layer_params<LactLayer, LactParams>(lact_config(width, kw), seed, dtype,
                                                            std_dev);
      },
      py::arg("width"), py::kw_only(), py::arg("seed") = 0, py::arg("dtype") = "float64",
      py::arg("std") = 0.02,
      "A LaCT layer's parameters at their initialisation (tttlab/seq/lact_layer.hpp; `std` the "
      "projections' standard deviation) by its authors' module names, projections stored [in, "
      "out], the initial fast weights per head: qkv.weight [D, 3D], qk_scale, qk_offset [D, 2], "
      "w0[h], w2[h] [d_h, d_f], w1[h] [d_f, d_h], lr_proj.weight [D, 3*H_f], lr_proj.bias [1, "
      "3*H_f], momentum: momentum_proj.0.weight [D, H_f], momentum_proj.0.bias [1, H_f]; "
      "ttt_scale_proj.weight [D, H_f], ttt_scale_proj.bias [1, H_f], ttt_norm.weight [1, d_f], "
      "o_proj.weight [D, D]. The layer's keywords: attn_heads (H_a, 4), lact_heads (H_f, 2), "
      "inter_multi (1; d_h = inter_multi*d_f), chunk (64), window (64), momentum (True), muon "
      "(False), rope_theta (1e4), base_lr (1e-3), norm_eps (1e-5).");
  m.def(
      "lact_layer",
      [](const py::object& x, const py::dict& params, const std::string& form,
         const py::kwargs& kw) {
        if (is_float32(x)) return tttlab::python::lact_layer<float>(x, params, form, kw);
        return tttlab::python::lact_layer<double>(x, params, form, kw);
      },
      py::arg("x"), py::arg("params"), py::kw_only(), py::arg("form") = "chunked",
      "A whole LaCT layer (tttlab/seq/lact_layer.hpp, docs/MATH.md §11.10: the qkv projection, "
      "sliding-window attention with RoPE, the SwiGLU fast weights per head learning chunk by "
      "chunk with momentum, their RMSNorm and per-head scale, the output projection) on one "
      "sequence x [T, D] from the empty state, with `params` (lact_layer_params' names, any "
      "values). Returns y [T, D]; form='chunked' (the training path, the sequence at once) or "
      "'stream' (the streaming forward one token at a time, as decoding), the same function. "
      "float32 when x is float32, else float64.");
  m.def(
      "lact_layer_grad",
      [](const py::object& x, const py::dict& params, const py::object& dy, const py::kwargs& kw) {
        using namespace tttlab;
        using namespace tttlab::python;
        const LactLayerConfig cfg = lact_config(sequence_width(x), kw);
        if (is_float32(x))
          return sequence_layer_grad<LactLayer, LactParams, float>(cfg, x, params, dy);
        return sequence_layer_grad<LactLayer, LactParams, double>(cfg, x, params, dy);
      },
      py::arg("x"), py::arg("params"), py::kw_only(), py::arg("dy"),
      "The gradients of a scalar loss L through tttlab.lact_layer (the same arguments), given dy = "
      "dL/dy [T, D]: the layer's manual backward, the one training runs. Returns a dict: x [T, D] "
      "and every parameter by its name, of its shape.");
  m.def("_train", &tttlab::python::train, py::arg("options"), py::arg("progress"),
        "tttlab.train's engine: the options dict with every keyword filled (see tttlab.train).");
  m.def(
      "load", [](const std::string& path) { return std::make_unique<PyModel>(path); },
      py::arg("path"),
      "Load a trained model from a checkpoint directory or a run directory (its newest "
      "checkpoint), with the checks `tttlab eval` makes (config, header, checksum, finite "
      "outputs). FileNotFoundError when the path does not exist, ValueError or RuntimeError with "
      "the engine's message otherwise.");
}
