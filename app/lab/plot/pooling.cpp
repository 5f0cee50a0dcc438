#include "lab/plot/pooling.hpp"

#include <algorithm>
#include <cmath>
#include <stdexcept>

namespace tttlab::lab::plot {

namespace {

// The bin of source index i along an axis of `src` entries pooled into `bins`: the inverse of
// begin(b) = b·src/bins, the largest b with begin(b) ≤ i.
int bin_of(long i, long bins, long src) {
  const auto begin = [&](long b) { return b * src / bins; };
  long b = (i * bins + bins - 1) / std::max(1L, src);
  b = std::clamp<long>(b, 0, bins - 1);
  while (b > 0 && begin(b) > i) --b;
  while (b + 1 < bins && begin(b + 1) <= i) ++b;
  return static_cast<int>(b);
}

}  // namespace

int PooledMatrix::row_bin(long i) const { return bin_of(i, rows, src_rows); }

int PooledMatrix::col_bin(long j) const { return bin_of(j, cols, src_cols); }

PooledMatrix pool_max_abs(const double* data, long rows, long cols, long row_stride, int max_rows,
                          int max_cols) {
  return pool_max_abs_fn(rows, cols, max_rows, max_cols,
                         [&](long i, long j) { return data[i * row_stride + j]; });
}

}  // namespace tttlab::lab::plot
