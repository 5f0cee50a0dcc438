// app/lab/measures.hpp — measures: named numbers read off a feature's snapshot view, which lessons
// predict and check (app/course/experiments.hpp runs them). Each feature that lessons can measure
// lists its measures and their reader in its own folder (`<feature>_measures.cpp`), named in its entry
// of lab/features.cpp.
//
// Each measure states whether it depends on the machine (a speed). Such values come with their spread
// (lo, hi: the extremes over the repeats) and lessons report them rather than assert them.
#pragma once

#include <cstdint>
#include <map>
#include <memory>
#include <optional>
#include <stdexcept>
#include <string>
#include <string_view>
#include <vector>

#include "lab/engine/job.hpp"

namespace tttlab::lab {

struct Snapshot;

struct MeasureInfo {
  std::string name;
  std::string description;  // for `tttlab lessons measures` and the lesson authors' guide
  bool depends_on_device = false;
};

struct Measurement {
  double value = 0;
  std::optional<double> lo, hi;  // spread over repeats, where the measure has one
  bool depends_on_device = false;
};
using Measures = std::map<std::string, Measurement, std::less<>>;

// The computation behind a view failed: its measures cannot be read (the lessons show the message).
class MeasureError : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

// What lessons can measure on one feature's view.
struct MeasureSet {
  std::vector<MeasureInfo> infos;
  // The measures, once the view's computation is complete (nullopt while it runs or before it
  // started). Throws MeasureError if the computation failed.
  std::optional<Measures> (*read)(const Snapshot& snapshot) = nullptr;
  // The generation of the feature's view in a snapshot (0: none yet); each new request raises it.
  std::uint64_t (*generation)(const Snapshot& snapshot) = nullptr;
};

// Helpers of the measure readers.
inline Measurement plain(double v) { return Measurement{v, std::nullopt, std::nullopt, false}; }
// The mean of v[from, to) (to clipped to the size; 0 when empty).
double mean_range(const std::vector<double>& v, std::size_t from, std::size_t to);
// Throws MeasureError "the <experiment> experiment failed: <error>" when `error` is not empty.
void fail_if(const std::string& error, std::string_view experiment);

// The view of a job-style feature (JobView) once its job is done; nullptr while there is none yet or
// it still runs. Throws MeasureError naming `experiment` when the job failed.
template <class View>
const View* finished_view(const std::shared_ptr<const View>& view, std::string_view experiment) {
  const View* v = view.get();
  if (!v) return nullptr;
  if (v->outcome == JobOutcome::Failed)
    fail_if(v->error.empty() ? "unknown error" : v->error, experiment);
  return v->outcome == JobOutcome::Done ? v : nullptr;
}

// The MeasureSet of the feature whose view is Snapshot::*Field, read by `Read`: each feature's
// `<feature>_measures()` returns it, so that the file states only its measures and their reader.
template <auto Field, std::optional<Measures> (*Read)(const Snapshot&)>
const MeasureSet& measure_set(const std::vector<MeasureInfo>& infos) {
  static const MeasureSet set{infos, Read, [](const Snapshot& s) -> std::uint64_t {
                                const auto& view = s.*Field;
                                return view ? view->generation : 0;
                              }};
  return set;
}

}  // namespace tttlab::lab
