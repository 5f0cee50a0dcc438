// app/lab/designer/designer_measures.cpp — what lessons can measure on this feature's view
// (lab/measures.hpp), named in its entry of lab/features.cpp.
#include <optional>
#include <string>

#include "lab/designer/designer_types.hpp"
#include "lab/engine/snapshot.hpp"
#include "lab/measures.hpp"

namespace tttlab::lab {
namespace {

const std::vector<MeasureInfo> kInfos = {
    {"acc_<design|member>_p<P>",
     "fraction of the P pairs recalled after reading all of them, mean over the sequences; design: "
     "the student's rule, member: the compared member; P: each number of pairs of the scene",
     false},
    {"design_acc_small", "the design's accuracy at the smallest P", false},
    {"design_acc_large", "the design's accuracy at the largest P", false},
    {"member_acc_small", "the compared member's accuracy at the smallest P", false},
    {"member_acc_large", "the compared member's accuracy at the largest P", false},
    {"design_minus_member_large", "the design's accuracy minus the member's at the largest P", false},
    {"nearest_common", "how many of the six components the design shares with its nearest member", false},
    {"design_is_member", "1 when the design is a named member (all six components), else 0", false},
    {"<design|member>_loss_after_mean",
     "mean inner loss of each pair of the loss episode right after its write", false},
    {"<design|member>_loss_drop_mean",
     "mean over the loss episode of (loss before the write − loss after it): what one write fixes",
     false},
    {"<design|member>_diverged", "1 when a loss of the loss episode went non-finite or past 1e12",
     false},
    {"<design|member>_state_size", "numbers the memory holds after the loss episode", false},
    {"width", "d, the width of both memories", false},
};

double mean(const std::vector<double>& v, int n) {
  double s = 0;
  for (int i = 0; i < n; ++i) s += v[static_cast<std::size_t>(i)];
  return n > 0 ? s / n : 0.0;
}

std::optional<Measures> read(const Snapshot& s) {
  const auto* v = finished_view(s.designer, "designer");
  if (!v || v->accuracy.size() != 2 || v->loss_before.size() != 2) return std::nullopt;
  const DesignerSettings& st = v->settings;
  const char* who[2] = {"design", "member"};
  Measures m;
  for (int k = 0; k < 2; ++k) {
    const auto& acc = v->accuracy[static_cast<std::size_t>(k)];
    for (std::size_t j = 0; j < st.pairs.size(); ++j)
      m[std::string("acc_") + who[k] + "_p" + std::to_string(st.pairs[j])] = plain(acc[j]);
    m[std::string(who[k]) + "_acc_small"] = plain(acc.front());
    m[std::string(who[k]) + "_acc_large"] = plain(acc.back());
    const auto& before = v->loss_before[static_cast<std::size_t>(k)];
    const auto& after = v->loss_after[static_cast<std::size_t>(k)];
    std::vector<double> drop(after.size());
    for (std::size_t t = 0; t < after.size(); ++t) drop[t] = before[t] - after[t];
    m[std::string(who[k]) + "_loss_after_mean"] = plain(mean(after, v->curve_done));
    m[std::string(who[k]) + "_loss_drop_mean"] = plain(mean(drop, v->curve_done));
    m[std::string(who[k]) + "_diverged"] = plain(v->diverged[k] ? 1.0 : 0.0);
    m[std::string(who[k]) + "_state_size"] = plain(static_cast<double>(v->state_size[k]));
  }
  m["design_minus_member_large"] = plain(v->accuracy[0].back() - v->accuracy[1].back());
  m["nearest_common"] = plain(v->common);
  m["design_is_member"] = plain(v->common == 6 ? 1.0 : 0.0);
  m["width"] = plain(st.params.width);
  return m;
}

}  // namespace

const MeasureSet& designer_measures() { return measure_set<&Snapshot::designer, &read>(kInfos); }

}  // namespace tttlab::lab
