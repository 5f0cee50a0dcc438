// Argument checks shared by the nn ops (private to core/src/nn). Every failure is one line of the
// form "<op>: <argument> is [r, c] but must be [r', c'] (<why>)".
#pragma once

#include <cstdint>
#include <initializer_list>
#include <stdexcept>
#include <string>

#include "tttlab/tensor.hpp"

namespace tttlab::nn_detail {

using Index = Eigen::Index;

inline std::string shape_str(Index r, Index c) {
  // Built by appending: GCC 12 reports a false -Wrestrict on "[" + std::to_string(r).
  std::string s("[");
  s += std::to_string(r);
  s += ", ";
  s += std::to_string(c);
  s += "]";
  return s;
}

[[noreturn]] inline void fail(const char* op, const std::string& msg) {
  throw std::invalid_argument(std::string(op) + ": " + msg);
}

template <class M>
void require_shape(const char* op, const char* name, const M& m, Index rows, Index cols,
                   const char* why) {
  if (m.rows() != rows || m.cols() != cols)
    fail(op, std::string(name) + " is " + shape_str(m.rows(), m.cols()) + " but must be " +
                 shape_str(rows, cols) + " (" + why + ")");
}

// Width of one head; heads must be ≥ 1 and divide D.
inline Index head_width(const char* op, Index D, int heads) {
  if (heads < 1 || D % heads != 0)
    fail(op, "heads = " + std::to_string(heads) + " must be >= 1 and divide the width " +
                 std::to_string(D));
  return D / heads;
}

// The byte range [first, last) spanned by a (possibly strided) matrix view.
template <class M>
void byte_range(const M& m, std::uintptr_t& first, std::uintptr_t& last) {
  first = reinterpret_cast<std::uintptr_t>(m.data());
  if (m.size() == 0) {
    last = first;
    return;
  }
  // Row-major storage: the last element sits (rows−1)·outerStride + cols−1 after the first.
  const Index span = (m.rows() - 1) * m.outerStride() + m.cols();
  last = first + static_cast<std::uintptr_t>(span) * sizeof(typename M::Scalar);
}

// Throws when `out` (an output buffer, before resizing) overlaps `in` (an input view). Both are
// checked as they are at the call: an empty output cannot overlap anything.
template <class Out, class In>
void require_distinct(const char* op, const char* out_name, const Out& out, const char* in_name,
                      const In& in) {
  std::uintptr_t a0, a1, b0, b1;
  byte_range(out, a0, a1);
  byte_range(in, b0, b1);
  if (a0 < b1 && b0 < a1)
    fail(op, std::string("output ") + out_name + " shares memory with input " + in_name +
                 "; pass a separate buffer");
}

// Throws when two output buffers are the same object (the second result would overwrite the first).
template <class M>
void require_separate_outputs(const char* op, std::initializer_list<const M*> outs) {
  for (auto i = outs.begin(); i != outs.end(); ++i)
    for (auto j = i + 1; j != outs.end(); ++j)
      if (*i == *j) fail(op, "the same buffer was passed for two outputs; pass separate ones");
}

// ---- The attention family (Q, K, V [T, D], split into heads of width d) ----------------------------

// K and V shaped as Q, heads dividing the width; returns the head width d.
template <class M>
Index qkv_head_width(const char* op, const M& Q, const M& K, const M& V, int heads) {
  require_shape(op, "K", K, Q.rows(), Q.cols(), "same as Q");
  require_shape(op, "V", V, Q.rows(), Q.cols(), "same as Q");
  return head_width(op, Q.cols(), heads);
}

// An output that overlaps none of Q, K and V.
template <class Out, class M>
void require_distinct_from_qkv(const char* op, const char* out_name, const Out& out, const M& Q, const M& K,
                               const M& V) {
  require_distinct(op, out_name, out, "Q", Q);
  require_distinct(op, out_name, out, "K", K);
  require_distinct(op, out_name, out, "V", V);
}

// A backward's arguments: those of the forward (returns d), the upstream gradient `up` shaped as Q,
// and three separate outputs dQ, dK, dV (named `out_name` in errors) that overlap no input.
template <class Out, class M>
Index check_qkv_backward(const char* op, const M& Q, const M& K, const M& V, int heads, const char* up_name,
                         const M& up, const char* out_name, const Out& dQ, const Out& dK, const Out& dV) {
  const Index d = qkv_head_width(op, Q, K, V, heads);
  require_shape(op, up_name, up, Q.rows(), Q.cols(), "same as Q");
  for (const Out* out : {&dQ, &dK, &dV}) {
    require_distinct_from_qkv(op, out_name, *out, Q, K, V);
    require_distinct(op, out_name, *out, up_name, up);
  }
  require_separate_outputs<Out>(op, {&dQ, &dK, &dV});
  return d;
}

}  // namespace tttlab::nn_detail
