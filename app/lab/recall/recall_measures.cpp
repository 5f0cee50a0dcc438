// app/lab/recall/recall_measures.cpp — what lessons can measure on this feature's view
// (lab/measures.hpp), named in its entry of lab/features.cpp.
#include <algorithm>
#include <cmath>
#include <optional>

#include "lab/engine/snapshot.hpp"
#include "lab/measures.hpp"
#include "lab/recall/recall_types.hpp"

namespace tttlab::lab {
namespace {

const std::vector<MeasureInfo> kInfos = {
    {"acc_<memory>_p<P>",
     "fraction of the P pairs recalled after reading all of them, mean over the sequences; memory: "
     "ttt_linear, ttt_mlp, linear_attention, softmax_attention, mamba2, deltanet, gated_deltanet, "
     "titans, lact; P: each number of pairs of the scene",
     false},
    {"<member>_acc_small",
     "the accuracy at the smallest P; member: deltanet, gated_deltanet, titans, lact (the first "
     "five have the names below)",
     false},
    {"<member>_acc_large", "the same at the largest P", false},
    {"state_<memory>", "numbers the memory holds after the largest P (weights and buffers)", false},
    {"linear_acc_small", "linear attention's accuracy at the smallest P", false},
    {"linear_acc_large", "linear attention's accuracy at the largest P", false},
    {"ttt_linear_acc_small", "TTT-Linear's accuracy at the smallest P", false},
    {"ttt_linear_acc_large", "TTT-Linear's accuracy at the largest P", false},
    {"softmax_acc_min", "softmax attention's lowest accuracy over the P", false},
    {"mamba2_acc_small", "Mamba-2's accuracy at the smallest P", false},
    {"mamba2_acc_large", "Mamba-2's accuracy at the largest P", false},
    {"mamba2_minus_linear_large", "Mamba-2's accuracy minus linear attention's at the largest P",
     false},
    {"ttt_linear_minus_linear_at_d",
     "TTT-Linear's accuracy minus linear attention's at P = d (only when d is one of the P)",
     false},
    {"map_recall_oldest",
     "forgetting map, right after the last pair: fraction of the oldest quarter of the pairs still "
     "recalled",
     false},
    {"map_recall_newest", "the same for the newest quarter", false},
    {"map_recency", "map_recall_newest − map_recall_oldest", false},
    {"map_last_row_mean",
     "the map's last row, mean: the map's memory's accuracy at P = the map's pairs", false},
    {"width", "d, the width of every memory", false},
};

std::optional<Measures> read(const Snapshot& s) {
  const auto* v = finished_view(s.recall, "recall lab");
  if (!v || v->accuracy.size() != static_cast<std::size_t>(recall::kMemories)) return std::nullopt;
  const RecallSettings& st = v->settings;
  const std::size_t np = st.pairs.size();
  const auto acc = [&](recall::Memory mem) -> const std::vector<double>& {
    return v->accuracy[static_cast<std::size_t>(mem)];
  };
  Measures m;
  for (int k = 0; k < recall::kMemories; ++k)
    for (std::size_t j = 0; j < np; ++j)
      m["acc_" + std::string(recall::memory_id(static_cast<recall::Memory>(k))) + "_p" +
        std::to_string(st.pairs[j])] = plain(v->accuracy[static_cast<std::size_t>(k)][j]);
  const auto& linear = acc(recall::Memory::LinearAttention);
  const auto& ttt = acc(recall::Memory::TttLinear);
  const auto& softmax = acc(recall::Memory::SoftmaxAttention);
  m["linear_acc_small"] = plain(linear.front());
  m["linear_acc_large"] = plain(linear.back());
  m["ttt_linear_acc_small"] = plain(ttt.front());
  m["ttt_linear_acc_large"] = plain(ttt.back());
  m["softmax_acc_min"] = plain(*std::min_element(softmax.begin(), softmax.end()));
  m["mamba2_acc_small"] = plain(acc(recall::Memory::Mamba2).front());
  m["mamba2_acc_large"] = plain(acc(recall::Memory::Mamba2).back());
  m["mamba2_minus_linear_large"] = plain(acc(recall::Memory::Mamba2).back() - linear.back());
  for (int k = recall::kFirstMemories; k < recall::kMemories; ++k) {
    const auto mem = static_cast<recall::Memory>(k);
    m[std::string(recall::memory_id(mem)) + "_acc_small"] = plain(acc(mem).front());
    m[std::string(recall::memory_id(mem)) + "_acc_large"] = plain(acc(mem).back());
  }
  if (v->state_size.size() == static_cast<std::size_t>(recall::kMemories))
    for (int k = 0; k < recall::kMemories; ++k)
      if (!v->state_size[static_cast<std::size_t>(k)].empty())
        m["state_" + std::string(recall::memory_id(static_cast<recall::Memory>(k)))] =
            plain(v->state_size[static_cast<std::size_t>(k)].back());
  for (std::size_t j = 0; j < np; ++j)
    if (st.pairs[j] == st.width) m["ttt_linear_minus_linear_at_d"] = plain(ttt[j] - linear[j]);
  const std::size_t P = static_cast<std::size_t>(st.map_pairs), q = std::max<std::size_t>(1, P / 4);
  if (v->map.size() == P * P) {
    const double* last = v->map.data() + (P - 1) * P;
    double oldest = 0, newest = 0, all = 0;
    for (std::size_t i = 0; i < q; ++i) {
      oldest += last[i];
      newest += last[P - 1 - i];
    }
    for (std::size_t i = 0; i < P; ++i) all += last[i];
    m["map_recall_oldest"] = plain(oldest / static_cast<double>(q));
    m["map_recall_newest"] = plain(newest / static_cast<double>(q));
    m["map_recency"] = plain((newest - oldest) / static_cast<double>(q));
    m["map_last_row_mean"] = plain(all / static_cast<double>(P));
  }
  m["width"] = plain(st.width);
  return m;
}

}  // namespace

const MeasureSet& recall_measures() { return measure_set<&Snapshot::recall, &read>(kInfos); }

}  // namespace tttlab::lab
