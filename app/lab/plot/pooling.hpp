// app/lab/plot/pooling.hpp — shrinking a large matrix for display without losing its extremes.
//
// A heat-map cannot show more cells than it has pixels, and a T×T attention-like matrix with T in the
// thousands is too big to walk every frame. pool_max_abs() reduces a [rows, cols] matrix to at most
// [max_rows, max_cols] bins; each bin keeps the entry of largest magnitude WITH its sign, so a thin
// diagonal band or a single outlier stays visible (a mean would wash both out). Bins partition the
// source evenly: bin r covers source rows [r·R/n, (r+1)·R/n).
#pragma once

#include <algorithm>
#include <atomic>
#include <cmath>
#include <cstdint>
#include <stdexcept>
#include <vector>

namespace tttlab::lab::plot {

struct PooledMatrix {
  std::uint64_t id = 0;            // unique per pooling result (process-wide), for display caches
  int rows = 0, cols = 0;          // bins
  long src_rows = 0, src_cols = 0; // the source matrix
  std::vector<float> values;       // [rows, cols] row-major

  bool pooled() const { return rows != src_rows || cols != src_cols; }
  bool empty() const { return values.empty(); }
  float at(int r, int c) const { return values[static_cast<std::size_t>(r) * cols + c]; }
  long row_begin(int r) const { return static_cast<long>(r) * src_rows / rows; }
  long col_begin(int c) const { return static_cast<long>(c) * src_cols / cols; }
  // The bin holding source row i / column j.
  int row_bin(long i) const;
  int col_bin(long j) const;
};

// `data` is row-major with `row_stride` elements between rows. Non-finite entries win the bin
// (so that a NaN is never hidden). max_rows, max_cols ≥ 1.
PooledMatrix pool_max_abs(const double* data, long rows, long cols, long row_stride, int max_rows,
                          int max_cols);

// The same for a matrix given by its entries, value(i, j) → double, for matrices too large to
// materialise (each entry is evaluated exactly once).
template <class F>
PooledMatrix pool_max_abs_fn(long rows, long cols, int max_rows, int max_cols, F&& value) {
  if (max_rows < 1 || max_cols < 1) throw std::invalid_argument("pool_max_abs: bins must be >= 1");
  static std::atomic<std::uint64_t> next_id{1};
  PooledMatrix p;
  p.id = next_id.fetch_add(1, std::memory_order_relaxed);
  p.src_rows = rows;
  p.src_cols = cols;
  p.rows = static_cast<int>(std::min<long>(rows, max_rows));
  p.cols = static_cast<int>(std::min<long>(cols, max_cols));
  p.values.assign(static_cast<std::size_t>(p.rows) * p.cols, 0.0f);
  std::vector<double> best_mag(p.values.size(), -1.0);
  for (int r = 0; r < p.rows; ++r)
    for (long i = p.row_begin(r); i < p.row_begin(r + 1); ++i)
      for (int c = 0; c < p.cols; ++c)
        for (long j = p.col_begin(c); j < p.col_begin(c + 1); ++j) {
          const double v = value(i, j);
          const double mag = std::isfinite(v) ? std::abs(v) : HUGE_VAL;
          const std::size_t k = static_cast<std::size_t>(r) * p.cols + c;
          if (mag > best_mag[k]) {
            best_mag[k] = mag;
            p.values[k] = static_cast<float>(v);
          }
        }
  return p;
}

}  // namespace tttlab::lab::plot
