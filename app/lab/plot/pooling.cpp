#include "lab/plot/pooling.hpp"

#include <algorithm>
#include <cmath>
#include <stdexcept>

namespace tttlab::lab::plot {

int PooledMatrix::row_bin(long i) const {
  // Inverse of row_begin: the largest r with r·R/n ≤ i.
  long r = (i * rows + rows - 1) / std::max(1L, src_rows);
  r = std::clamp<long>(r, 0, rows - 1);
  while (r > 0 && row_begin(static_cast<int>(r)) > i) --r;
  while (r + 1 < rows && row_begin(static_cast<int>(r + 1)) <= i) ++r;
  return static_cast<int>(r);
}

int PooledMatrix::col_bin(long j) const {
  long c = (j * cols + cols - 1) / std::max(1L, src_cols);
  c = std::clamp<long>(c, 0, cols - 1);
  while (c > 0 && col_begin(static_cast<int>(c)) > j) --c;
  while (c + 1 < cols && col_begin(static_cast<int>(c + 1)) <= j) ++c;
  return static_cast<int>(c);
}

PooledMatrix pool_max_abs(const double* data, long rows, long cols, long row_stride, int max_rows,
                          int max_cols) {
  return pool_max_abs_fn(rows, cols, max_rows, max_cols,
                         [&](long i, long j) { return data[i * row_stride + j]; });
}

}  // namespace tttlab::lab::plot
