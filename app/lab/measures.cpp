// app/lab/measures.cpp — see measures.hpp.
#include "lab/measures.hpp"

#include <algorithm>

namespace tttlab::lab {

double mean_range(const std::vector<double>& v, std::size_t from, std::size_t to) {
  to = std::min(to, v.size());
  if (from >= to) return 0.0;
  double s = 0;
  for (std::size_t i = from; i < to; ++i) s += v[i];
  return s / static_cast<double>(to - from);
}

void fail_if(const std::string& error, std::string_view experiment) {
  if (!error.empty())
    throw MeasureError("the " + std::string(experiment) + " experiment failed: " + error);
}

}  // namespace tttlab::lab
