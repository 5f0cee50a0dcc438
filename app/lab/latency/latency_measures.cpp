// app/lab/latency/latency_measures.cpp — what lessons can measure on this feature's view
// (lab/measures.hpp), named in its entry of lab/features.cpp. Every number is read from the CPU's
// medians (the lessons' checks run on the CPU engine); growth ratios divide a layer's median at the
// largest T by the median of its runs at T = 64 timed alternately with it (LatencyPoint's references),
// so that a change of load on the machine during the run does not show as growth.
#include <optional>
#include <string>

#include "lab/engine/snapshot.hpp"
#include "lab/latency/latency_types.hpp"
#include "lab/measures.hpp"

namespace tttlab::lab {
namespace {

const std::vector<MeasureInfo> kInfos = {
    {"prefill_us_<layer>_T<N>",
     "prefill time per token (µs, CPU median) of a layer (ttt_linear, ttt_mlp, softmax_attention, "
     "linear_attention, mamba2) at context N, for every layer and T of the run",
     true},
    {"decode_us_<layer>_T<N>",
     "decode time per token (µs, CPU median) after a context of N tokens, for every layer and T of "
     "the run",
     true},
    {"prefill_growth_<layer>",
     "a layer's prefill time per token at the largest T over its time at T = 64, the two timed "
     "alternately (CPU medians)",
     false},
    {"decode_growth_<layer>",
     "a layer's decode time per token after the largest T over its time after 64 tokens, the two "
     "timed alternately (CPU medians)",
     false},
    {"decode_over_prefill_<layer>",
     "a layer's decode time per token over its prefill time per token, at the largest T", true},
    {"prefill_growth_attention_over_ttt",
     "softmax attention's prefill growth over TTT-Linear's (prefill_growth_softmax_attention / "
     "prefill_growth_ttt_linear)",
     false},
    {"decode_growth_attention_over_ttt",
     "softmax attention's decode growth over TTT-Linear's (decode_growth_softmax_attention / "
     "decode_growth_ttt_linear)",
     false},
    {"prefill_crossover",
     "the smallest T from which TTT-Linear's prefill time per token is below softmax "
     "attention's at every larger T of the run (CPU medians); -1 when it never is",
     true},
    {"decode_crossover",
     "the same for the decode time per token; -1 when TTT-Linear is never below from some T on",
     true},
    {"prefill_ttt_over_attention_max",
     "TTT-Linear's prefill time per token over softmax attention's, at the largest T", true},
    {"decode_ttt_over_attention_max",
     "TTT-Linear's decode time per token over softmax attention's, at the largest T", true},
    {"max_context", "the largest T of the run", false},
};

std::string measure_id(const std::string& layer) {
  std::string id = layer;
  for (char& c : id)
    if (c == '-') c = '_';
  return id;
}

const LatencyCurve* find_curve(const LatencyView& v, const std::string& layer) {
  for (const auto& c : v.curves)
    if (c.layer == layer) return &c;
  return nullptr;
}

// From which T on `a` is below `b` at every T of the run (-1: never). Both complete curves.
double crossover(const LatencyCurve& a, const LatencyCurve& b, PerTokenTime LatencyPoint::*phase) {
  double from = -1;
  for (std::size_t i = a.points.size(); i-- > 0;) {
    if ((a.points[i].*phase).median_us < (b.points[i].*phase).median_us)
      from = a.points[i].T;
    else
      break;
  }
  return from;
}

std::optional<Measures> read(const Snapshot& s) {
  const auto* v = finished_view(s.latency, "latency");
  if (!v || v->curves.empty() || v->contexts.empty()) return std::nullopt;
  Measures m;
  // The largest T over its reference at T = 64 timed alternately with it (LatencyPoint).
  const auto growth = [](const LatencyCurve& c, PerTokenTime LatencyPoint::*phase) {
    const LatencyPoint& p = c.points.back();
    const PerTokenTime& ref = phase == &LatencyPoint::prefill ? p.prefill_ref : p.decode_ref;
    return (p.*phase).median_us / ref.median_us;
  };
  for (const auto& c : v->curves) {
    const std::string id = measure_id(c.layer);
    for (const auto& p : c.points) {
      const std::string at = id + "_T" + std::to_string(p.T);
      m["prefill_us_" + at] =
          Measurement{p.prefill.median_us, p.prefill.min_us, p.prefill.max_us, true};
      m["decode_us_" + at] =
          Measurement{p.decode.median_us, p.decode.min_us, p.decode.max_us, true};
    }
    m["prefill_growth_" + id] = plain(growth(c, &LatencyPoint::prefill));
    m["decode_growth_" + id] = plain(growth(c, &LatencyPoint::decode));
    m["decode_over_prefill_" + id] =
        Measurement{c.points.back().decode.median_us / c.points.back().prefill.median_us,
                    std::nullopt, std::nullopt, true};
  }
  const LatencyCurve* ttt = find_curve(*v, "ttt-linear");
  const LatencyCurve* att = find_curve(*v, "softmax-attention");
  if (ttt && att) {
    const auto device = [](double x) { return Measurement{x, std::nullopt, std::nullopt, true}; };
    m["prefill_growth_attention_over_ttt"] =
        plain(growth(*att, &LatencyPoint::prefill) / growth(*ttt, &LatencyPoint::prefill));
    m["decode_growth_attention_over_ttt"] =
        plain(growth(*att, &LatencyPoint::decode) / growth(*ttt, &LatencyPoint::decode));
    m["prefill_crossover"] = device(crossover(*ttt, *att, &LatencyPoint::prefill));
    m["decode_crossover"] = device(crossover(*ttt, *att, &LatencyPoint::decode));
    m["prefill_ttt_over_attention_max"] =
        device(ttt->points.back().prefill.median_us / att->points.back().prefill.median_us);
    m["decode_ttt_over_attention_max"] =
        device(ttt->points.back().decode.median_us / att->points.back().decode.median_us);
  }
  m["max_context"] = plain(v->contexts.back());
  return m;
}

}  // namespace

const MeasureSet& latency_measures() { return measure_set<&Snapshot::latency, &read>(kInfos); }

}  // namespace tttlab::lab
