// app/course/experiments.cpp — measures read off the engine's views (see experiments.hpp).
#include "course/experiments.hpp"

#include <algorithm>
#include <atomic>
#include <cmath>
#include <cstdio>
#include <thread>

#include "course/lesson.hpp"
#include "lab/engine/data_source.hpp"
#include "lab/engine/engine.hpp"
#include "lab/state/run_settings.hpp"
#include "lab/state/state_file.hpp"
#include "tttlab/io/limits.hpp"
#include "tttlab/model/checkpoint.hpp"

namespace tttlab::course {
namespace fs = std::filesystem;
using lab::JobOutcome;

namespace {

const std::vector<MeasureInfo> kPrimalDual = {
    {"max_rel_diff", "max |O_primal − O_dual| / max |O| over every layer and head", false},
    {"max_abs_diff", "max |O_primal − O_dual| over every layer and head", false},
    {"reduction_rel_err", "with the reduction to linear attention: max |O − tril(QKᵀ)V| / max |tril(QKᵀ)V|", false},
    {"dual_speedup", "primal time / dual time: median over the repeats, with min and max", true},
    {"mini_batch", "b as run", false},
    {"tokens", "T, the tokens of the text", false},
};
const std::vector<MeasureInfo> kCurves = {
    {"gain_from_context", "mean over blocks and positions t ≥ 30 of ℓ(W₀; xₜ) − ℓ(Wₜ₋₁; xₜ) (the inner loss: ½ squared error over the head's d features)", false},
    {"gain_first_10", "the same over positions t < 10", false},
    {"step_gain", "mean over blocks and positions of ℓ(Wₜ₋₁; xₜ) − ℓ(Wₜ; xₜ) (inner-loss units)", false},
    {"fraction_learning", "fraction of (block, t ≥ 30) with ℓ(Wₜ₋₁; xₜ) < ℓ(W₀; xₜ)", false},
    {"relative_gain", "gain_from_context / mean ℓ(W₀; xₜ) over t ≥ 30", false},
    {"initial_loss", "mean over blocks and positions t ≥ 30 of ℓ(W₀; xₜ), the inner loss before any test-time learning", false},
    {"reloads", "following a training run (the model \"training\": the scene's Training-panel run, started with "
                "it): how many times the view computed again because the run saved newer weights", false},
    {"followed_step", "following a training run: the training step of the weights the view shows (read when the "
                      "run has finished and the view shows its last checkpoint)", false},
    {"first_checkpoint_step", "following a training run: the step of the first checkpoint the view computed in full", false},
    {"relative_gain_first_checkpoint", "relative_gain with the weights of that first checkpoint", false},
    {"gain_from_context_first_checkpoint", "gain_from_context with the weights of that first checkpoint", false},
    {"initial_loss_first_checkpoint", "initial_loss with the weights of that first checkpoint", false},
    {"relative_gain_change", "relative_gain − relative_gain_first_checkpoint: how much the outer loop changed the "
                             "share of ℓ(W₀) that the inner loop removes", false},
};
const std::vector<MeasureInfo> kMiniBatch = {
    {"loss_b<N>", "validation loss (nats per byte) with mini-batch size N, for every b of the sweep", false},
    {"best_b", "the b with the lowest loss", false},
    {"loss_T_minus_best", "loss at b = T minus the lowest loss", false},
    {"loss_1_minus_best", "loss at b = 1 minus the lowest loss", false},
    {"time_ratio_1_T", "forward time at b = 1 over forward time at b = T", true},
};
const std::vector<MeasureInfo> kEvolution = {
    {"rank_excess", "max over tokens t of rank(Wₜ − W₀) − (t + 1): ≤ 0 when each token adds at most rank one", false},
    {"final_rank", "numerical rank of W_T − W₀", false},
    {"drift_final", "‖W_T − W₀‖_F", false},
    {"loss_drop_fraction", "fraction of tokens with ℓ(Wₜ; xₜ) < ℓ(Wₜ₋₁; xₜ)", false},
};
const std::vector<MeasureInfo> kStepper = {
    {"lambda_mean", "mean of λₜ over the text", false},
    {"lambda_min", "smallest λₜ", false},
    {"lambda_max", "largest λₜ", false},
    {"tau_first", "τ₁, the token-index scale of the first token of a mini-batch", false},
    {"tau_last", "τ_b, the scale of its last token (the one that commits the state)", false},
    {"loss_drop_fraction", "fraction of tokens with ℓ(Wₜ; xₜ) < ℓ(Wₜ₋₁; xₜ)", false},
    {"tokens", "T", false},
    {"mini_batch", "b", false},
};
const std::vector<MeasureInfo> kEvaluation = {
    {"bpb_<i>", "bits per byte of the scene's model i (0, 1, …)", false},
    {"context_gain_<i>", "model i: mean loss over positions 0–15 minus the mean over the last quarter, nats", false},
    {"long_gain_<i>", "model i: mean loss over positions T/16 … T/4 − 1 minus the mean over the last quarter, nats "
                      "(at T = 2048: positions 128–511 against 1536–2047; > 0 while the model still gains from "
                      "context far back)", false},
    {"late_loss_<i>", "model i: mean loss over the last quarter of the positions, nats", false},
    {"bpb_gap_<i>", "bpb_<i> − bpb_0 for i ≥ 1: how much worse (> 0) or better (< 0) model i is than model 0, "
                    "on the same windows", false},
};
const std::vector<MeasureInfo> kNonparametric = {
    {"nw_max_rel_diff", "max over the block's heads of max |ŷ − Z| / max |Z|: the Nadaraya–Watson estimator against the layer's own attention output", false},
    {"nw_max_abs_diff", "max |ŷ − Z| over the block's heads, tokens and features", false},
    {"weights_row_sum_err", "the head on show: maxₜ |Σᵢ wₜᵢ − 1| of the kernel weights", false},
    {"max_weight_last_row", "the head on show, last token: the largest kernel weight maxᵢ w_Tᵢ", false},
    {"effective_pairs", "the head on show, last token: 1 / Σᵢ w_Tᵢ², how many stored pairs the prediction effectively averages (T when the kernel is flat)", false},
    {"effective_fraction", "effective_pairs / T", false},
    {"effective_pairs_mean_heads", "effective_pairs at the last token, mean over the block's heads", false},
    {"state_numbers_nw", "the nonparametric learner's state after the last token: 2·T·d numbers (every key and value)", false},
    {"state_numbers_ttt", "TTT-Linear's state: d² numbers, whatever T", false},
    {"tokens", "T, the tokens of the text", false},
    {"head_dim", "d, the width of one head", false},
};
const std::vector<MeasureInfo> kRecall = {
    {"acc_<memory>_p<P>", "fraction of the P pairs recalled after reading all of them, mean over the sequences; memory: ttt_linear, ttt_mlp, linear_attention, softmax_attention; P: each number of pairs of the scene", false},
    {"linear_acc_small", "linear attention's accuracy at the smallest P", false},
    {"linear_acc_large", "linear attention's accuracy at the largest P", false},
    {"ttt_linear_acc_small", "TTT-Linear's accuracy at the smallest P", false},
    {"ttt_linear_acc_large", "TTT-Linear's accuracy at the largest P", false},
    {"softmax_acc_min", "softmax attention's lowest accuracy over the P", false},
    {"ttt_linear_minus_linear_at_d", "TTT-Linear's accuracy minus linear attention's at P = d (only when d is one of the P)", false},
    {"map_recall_oldest", "forgetting map, right after the last pair: fraction of the oldest quarter of the pairs still recalled", false},
    {"map_recall_newest", "the same for the newest quarter", false},
    {"map_recency", "map_recall_newest − map_recall_oldest", false},
    {"map_last_row_mean", "the map's last row, mean: the map's memory's accuracy at P = the map's pairs", false},
    {"width", "d, the width of every memory", false},
};
const std::vector<MeasureInfo> kNone;

double mean_range(const std::vector<double>& v, std::size_t from, std::size_t to) {
  to = std::min(to, v.size());
  if (from >= to) return 0.0;
  double s = 0;
  for (std::size_t i = from; i < to; ++i) s += v[i];
  return s / static_cast<double>(to - from);
}

Measurement plain(double v) { return Measurement{v, std::nullopt, std::nullopt, false}; }

// Numerical rank: singular values above rel · the largest (descending input).
int numerical_rank(const std::vector<float>& sv, double rel = 1e-4) {
  if (sv.empty() || !(sv.front() > 0)) return 0;
  int r = 0;
  for (float s : sv)
    if (s > rel * sv.front()) ++r;
  return r;
}

void fail_if(const std::string& error, std::string_view panel) {
  if (!error.empty()) throw LessonError("the " + std::string(panel) + " experiment failed: " + error);
}

std::optional<Measures> primal_dual(const lab::Snapshot& s) {
  const auto* v = s.primal_dual.get();
  if (!v) return std::nullopt;
  if (v->outcome == JobOutcome::Failed) fail_if(v->error.empty() ? "unknown error" : v->error, "primal vs dual");
  if (v->outcome != JobOutcome::Done || v->results_generation != v->generation) return std::nullopt;
  Measures m;
  m["max_abs_diff"] = plain(v->max_abs_diff);
  m["max_rel_diff"] = plain(v->max_abs_output > 0 ? v->max_abs_diff / v->max_abs_output : v->max_abs_diff);
  if (v->linear_attention)
    m["reduction_rel_err"] = plain(v->linear_attention_scale > 0 ? v->linear_attention_diff / v->linear_attention_scale
                                                                 : v->linear_attention_diff);
  std::vector<double> ratios;
  for (std::size_t i = 0; i < std::min(v->primal_ms.size(), v->dual_ms.size()); ++i)
    if (v->dual_ms[i] > 0) ratios.push_back(v->primal_ms[i] / v->dual_ms[i]);
  if (!ratios.empty() && v->dual_ms_median > 0) {
    const auto [lo, hi] = std::minmax_element(ratios.begin(), ratios.end());
    m["dual_speedup"] = Measurement{v->primal_ms_median / v->dual_ms_median, *lo, *hi, true};
  }
  m["mini_batch"] = plain(v->mini_batch);
  m["tokens"] = plain(static_cast<double>(v->T));
  return m;
}

// The curves measures of one complete view.
Measures curve_measures(const lab::CurvesView& v) {
  double gain = 0, first = 0, step = 0, base = 0, learning = 0, count = 0;
  const std::size_t blocks = v.l0.size();
  for (std::size_t bl = 0; bl < blocks; ++bl) {
    const auto &l0 = v.l0[bl], &lb = v.lb[bl], &la = v.la[bl];
    const std::size_t T = std::min({l0.size(), lb.size(), la.size()});
    std::vector<double> d0b(T), dba(T);
    for (std::size_t t = 0; t < T; ++t) {
      d0b[t] = l0[t] - lb[t];
      dba[t] = lb[t] - la[t];
      if (t >= 30) {
        learning += lb[t] < l0[t] ? 1.0 : 0.0;
        count += 1.0;
      }
    }
    gain += mean_range(d0b, 30, T);
    first += mean_range(d0b, 0, 10);
    step += mean_range(dba, 0, T);
    base += mean_range(l0, 30, T);
  }
  const double n = static_cast<double>(std::max<std::size_t>(blocks, 1));
  Measures m;
  m["gain_from_context"] = plain(gain / n);
  m["gain_first_10"] = plain(first / n);
  m["step_gain"] = plain(step / n);
  m["fraction_learning"] = plain(count > 0 ? learning / count : 0.0);
  m["relative_gain"] = plain(base > 0 ? gain / base : 0.0);
  m["initial_loss"] = plain(base / n);
  return m;
}

std::optional<Measures> curves(const lab::Snapshot& s) {
  const auto* v = s.curves.get();
  if (!v) return std::nullopt;
  if (v->outcome == JobOutcome::Failed) fail_if(v->error.empty() ? "unknown error" : v->error, "inner-loss curves");
  if (v->waiting && s.training)
    for (const auto& r : s.training->runs)
      if (r->state == lab::RunState::Failed) fail_if("the training run failed: " + r->message, "inner-loss curves");
  if (v->waiting || v->outcome != JobOutcome::Done || v->l0.empty()) return std::nullopt;
  if (v->model_step >= 0 && s.training) {
    // Following a training run: measured once the run has ended and the view shows its last checkpoint.
    for (const auto& r : s.training->runs)
      if (r->model_id == v->model_id && (r->live() || r->state == lab::RunState::Starting || v->model_step < r->steps_done))
        return std::nullopt;
  }
  Measures m = curve_measures(*v);
  m["reloads"] = plain(v->reloads);
  if (v->model_step >= 0) m["followed_step"] = plain(static_cast<double>(v->model_step));
  if (v->first_followed && v->first_followed->model_step >= 0) {
    const Measures f = curve_measures(*v->first_followed);
    m["first_checkpoint_step"] = plain(static_cast<double>(v->first_followed->model_step));
    m["relative_gain_first_checkpoint"] = f.at("relative_gain");
    m["gain_from_context_first_checkpoint"] = f.at("gain_from_context");
    m["initial_loss_first_checkpoint"] = f.at("initial_loss");
    m["relative_gain_change"] = plain(m.at("relative_gain").value - f.at("relative_gain").value);
  }
  return m;
}

std::optional<Measures> minibatch(const lab::Snapshot& s) {
  const auto* v = s.minibatch.get();
  if (!v) return std::nullopt;
  if (v->outcome == JobOutcome::Failed) fail_if(v->error.empty() ? "unknown error" : v->error, "mini-batch");
  if (v->outcome != JobOutcome::Done || !v->current || !v->current->complete || v->current->points.empty())
    return std::nullopt;
  Measures m;
  const auto& pts = v->current->points;
  const lab::SweepPoint* best = &pts.front();
  for (const auto& p : pts) {
    m["loss_b" + std::to_string(p.b)] = plain(p.loss);
    if (p.loss < best->loss) best = &p;
  }
  m["best_b"] = plain(best->b);
  m["loss_T_minus_best"] = plain(pts.back().loss - best->loss);
  m["loss_1_minus_best"] = plain(pts.front().loss - best->loss);
  if (pts.back().ms_per_forward > 0)
    m["time_ratio_1_T"] = Measurement{pts.front().ms_per_forward / pts.back().ms_per_forward, std::nullopt,
                                      std::nullopt, true};
  return m;
}

std::optional<Measures> evolution(const lab::Snapshot& s) {
  const auto* v = s.evolution.get();
  if (!v || v->generation == 0) return std::nullopt;  // not configured yet ("waiting for settings")
  fail_if(v->error, "hidden-state evolution");
  if (!v->done || v->steps.empty()) return std::nullopt;
  int excess = -1 << 30;
  double drops = 0;
  for (std::size_t t = 0; t < v->steps.size(); ++t) {
    const auto& st = *v->steps[t];
    excess = std::max(excess, numerical_rank(st.dsv1) - static_cast<int>(t + 1));
    drops += st.loss_after < st.loss_before ? 1.0 : 0.0;
  }
  Measures m;
  m["rank_excess"] = plain(excess);
  m["final_rank"] = plain(numerical_rank(v->steps.back()->dsv1));
  m["drift_final"] = plain(v->steps.back()->drift1);
  m["loss_drop_fraction"] = plain(drops / static_cast<double>(v->steps.size()));
  return m;
}

std::optional<Measures> stepper(const lab::Snapshot& s) {
  const auto* v = s.stepper.get();
  if (!v || v->generation == 0) return std::nullopt;  // not configured yet ("waiting for settings")
  fail_if(v->error, "inner-loop stepper");
  if (v->tokens() == 0 || v->computed() < v->tokens()) return std::nullopt;
  // A model whose forward overflows: a measure such as loss_drop_fraction stays finite on NaN losses
  // (NaN < NaN is false), so the claim would be judged on numbers that mean nothing. (A toy head that
  // diverges is a lesson of its own: its measures stand.)
  if (!v->config.toy()) fail_if(v->warning, "inner-loop stepper");
  double lsum = 0, lmin = INFINITY, lmax = -INFINITY, drops = 0, tau_first = 0, tau_last = 0;
  for (const auto& r : v->records) {
    lsum += r->lambda;
    lmin = std::min(lmin, r->lambda);
    lmax = std::max(lmax, r->lambda);
    drops += r->loss_after < r->loss_before ? 1.0 : 0.0;
    if (r->pos == 0) tau_first = r->tau;
    if (r->pos == v->mini_batch() - 1) tau_last = r->tau;
  }
  const double n = static_cast<double>(v->records.size());
  Measures m;
  m["lambda_mean"] = plain(lsum / n);
  m["lambda_min"] = plain(lmin);
  m["lambda_max"] = plain(lmax);
  m["tau_first"] = plain(tau_first);
  m["tau_last"] = plain(tau_last);
  m["loss_drop_fraction"] = plain(drops / n);
  m["tokens"] = plain(n);
  m["mini_batch"] = plain(v->mini_batch());
  return m;
}

std::optional<Measures> evaluation(const lab::Snapshot& s) {
  const auto* v = s.evaluation.get();
  if (!v) return std::nullopt;
  if (v->outcome == JobOutcome::Failed) fail_if(v->error.empty() ? "unknown error" : v->error, "evaluation");
  if (v->outcome != JobOutcome::Done) return std::nullopt;
  Measures m;
  for (std::size_t i = 0; i < v->curves.size(); ++i) {
    const auto& c = v->curves[i];
    fail_if(c.error, "evaluation");
    bool finite = std::isfinite(c.bpb);
    for (const double x : c.loss_by_position) finite = finite && std::isfinite(x);
    if (!finite) fail_if(non_finite_model_message(c.label.empty() ? c.model_id : c.label), "evaluation");
    const auto& l = c.loss_by_position;
    m["bpb_" + std::to_string(i)] = plain(c.bpb);
    m["context_gain_" + std::to_string(i)] = plain(mean_range(l, 0, 16) - mean_range(l, l.size() * 3 / 4, l.size()));
    m["long_gain_" + std::to_string(i)] =
        plain(mean_range(l, l.size() / 16, l.size() / 4) - mean_range(l, l.size() * 3 / 4, l.size()));
    m["late_loss_" + std::to_string(i)] = plain(mean_range(l, l.size() * 3 / 4, l.size()));
    if (i > 0) m["bpb_gap_" + std::to_string(i)] = plain(c.bpb - v->curves[0].bpb);
  }
  return m;
}

std::optional<Measures> nonparametric(const lab::Snapshot& s) {
  const auto* v = s.nonparametric.get();
  if (!v) return std::nullopt;
  if (v->outcome == JobOutcome::Failed) fail_if(v->error.empty() ? "unknown error" : v->error, "Theorem 2");
  if (v->outcome != JobOutcome::Done || v->results_generation != v->generation || !v->detail) return std::nullopt;
  const auto& d = *v->detail;
  Measures m;
  m["nw_max_rel_diff"] = plain(v->max_rel_diff);
  m["nw_max_abs_diff"] = plain(v->max_abs_diff);
  m["weights_row_sum_err"] = plain(d.row_sum_err);
  m["max_weight_last_row"] = plain(d.max_weight.empty() ? 0.0 : d.max_weight.back());
  const double eff = d.effective_pairs.empty() ? 0.0 : d.effective_pairs.back();
  m["effective_pairs"] = plain(eff);
  m["effective_fraction"] = plain(v->T > 0 ? eff / static_cast<double>(v->T) : 0.0);
  double mean = 0;
  for (const auto& h : v->head_summaries) mean += h.effective_pairs;
  m["effective_pairs_mean_heads"] = plain(v->head_summaries.empty() ? 0.0 : mean / static_cast<double>(v->head_summaries.size()));
  m["state_numbers_nw"] = plain(static_cast<double>(v->state_numbers_nw));
  m["state_numbers_ttt"] = plain(static_cast<double>(v->state_numbers_ttt));
  m["tokens"] = plain(static_cast<double>(v->T));
  m["head_dim"] = plain(v->d);
  return m;
}

std::optional<Measures> recall(const lab::Snapshot& s) {
  const auto* v = s.recall.get();
  if (!v) return std::nullopt;
  if (v->outcome == JobOutcome::Failed) fail_if(v->error.empty() ? "unknown error" : v->error, "recall lab");
  if (v->outcome != JobOutcome::Done || v->accuracy.size() != 4) return std::nullopt;
  const lab::RecallSettings& st = v->settings;
  const std::size_t np = st.pairs.size();
  // Indices of recall::Memory: TTT-Linear, TTT-MLP, linear attention, softmax attention.
  static const char* const ids[] = {"ttt_linear", "ttt_mlp", "linear_attention", "softmax_attention"};
  Measures m;
  for (std::size_t k = 0; k < 4; ++k)
    for (std::size_t j = 0; j < np; ++j)
      m["acc_" + std::string(ids[k]) + "_p" + std::to_string(st.pairs[j])] = plain(v->accuracy[k][j]);
  m["linear_acc_small"] = plain(v->accuracy[2].front());
  m["linear_acc_large"] = plain(v->accuracy[2].back());
  m["ttt_linear_acc_small"] = plain(v->accuracy[0].front());
  m["ttt_linear_acc_large"] = plain(v->accuracy[0].back());
  m["softmax_acc_min"] = plain(*std::min_element(v->accuracy[3].begin(), v->accuracy[3].end()));
  for (std::size_t j = 0; j < np; ++j)
    if (st.pairs[j] == st.width) m["ttt_linear_minus_linear_at_d"] = plain(v->accuracy[0][j] - v->accuracy[2][j]);
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

// Whether the scene's active view is the inner-loss curves following a training run.
bool follows_training(const nlohmann::json& state) {
  try {
    return scene_panel(state) == "inner_curves" &&
           state.at("panels").at("inner_curves").value("model_id", std::string()) == lab::kFollowTrainingId;
  } catch (const nlohmann::json::exception&) {
    return false;
  }
}

}  // namespace

const std::vector<std::string>& measurable_panels() {
  static const std::vector<std::string> panels = {"primal_dual", "inner_curves", "minibatch",
                                                  "evolution",   "inner_stepper", "evaluation",
                                                  "nonparametric", "recall"};
  return panels;
}

const std::vector<MeasureInfo>& measures_of(std::string_view panel) {
  if (panel == "primal_dual") return kPrimalDual;
  if (panel == "inner_curves") return kCurves;
  if (panel == "minibatch") return kMiniBatch;
  if (panel == "evolution") return kEvolution;
  if (panel == "inner_stepper") return kStepper;
  if (panel == "evaluation") return kEvaluation;
  if (panel == "nonparametric") return kNonparametric;
  if (panel == "recall") return kRecall;
  return kNone;
}

std::string scene_panel(const nlohmann::json& state) {
  try {
    const lab::FieldReader top(state, "");
    return top.string("active_panel", 64, "");
  } catch (const lab::StateError& e) {
    throw LessonError(e.what());
  }
}

void post_scene(const nlohmann::json& state, lab::CommandSink& sink) {
  const std::string panel = scene_panel(state);
  if (measures_of(panel).empty())
    throw LessonError("the scene's view \"" + panel + "\" has no measures (views that do: primal_dual, "
                      "inner_curves, minibatch, evolution, inner_stepper, evaluation, nonparametric, recall)");
  try {
    const lab::FieldReader panels(state.at("panels"), "panels");
    const lab::FieldReader r = panels.object(panel);
    if (panel == "primal_dual") {
      sink.post(lab::PrimalDualRun{lab::primal_dual_config_from(r)});
    } else if (panel == "inner_curves") {
      lab::CurvesSettings d;
      d.data = lab::default_data_source();
      const lab::CurvesSettings c = lab::curves_settings_from(r, d);
      if (c.model_id == lab::kFollowTrainingId) {
        // The view follows a training run: start the scene's Training-panel run (its "settings").
        lab::TrainSettings t;
        t.data = lab::default_data_source();
        sink.post(lab::TrainStart{lab::train_settings_from(panels.object("training").object("settings"), t), ""});
      }
      sink.post(lab::CurvesRun{c});
    } else if (panel == "minibatch") {
      lab::SweepSettings d;
      d.data = lab::default_data_source();
      sink.post(lab::SweepRun{lab::sweep_settings_from(r, d)});
    } else if (panel == "evaluation") {
      lab::EvalSettings d;
      d.data = lab::default_data_source();
      d.models = {"shipped", "random:ttt-linear:m:0"};
      sink.post(lab::EvaluationRun{lab::eval_settings_from(r, d)});
    } else if (panel == "evolution") {
      sink.post(lab::EvolutionConfigure{lab::evolution_head_from(r)});
    } else if (panel == "inner_stepper") {
      const lab::HeadConfig h = lab::stepper_head_from(r);
      sink.post(lab::StepperConfigure{h, h.tokens() - 1});  // every token computed
    } else if (panel == "nonparametric") {
      sink.post(lab::NonparametricRun{lab::nonparametric_config_from(r)});
    } else if (panel == "recall") {
      sink.post(lab::RecallRun{lab::recall_settings_from(r, lab::RecallSettings{})});
    }
  } catch (const lab::StateError& e) {
    throw LessonError(std::string("the scene's settings: ") + e.what());
  } catch (const nlohmann::json::exception& e) {
    throw LessonError(std::string("the scene has no panels: ") + e.what());
  }
}

std::optional<Measures> read_measures(std::string_view panel, const lab::Snapshot& s) {
  if (panel == "primal_dual") return primal_dual(s);
  if (panel == "inner_curves") return curves(s);
  if (panel == "minibatch") return minibatch(s);
  if (panel == "evolution") return evolution(s);
  if (panel == "inner_stepper") return stepper(s);
  if (panel == "evaluation") return evaluation(s);
  if (panel == "nonparametric") return nonparametric(s);
  if (panel == "recall") return recall(s);
  throw LessonError("the view \"" + std::string(panel) + "\" has no measures");
}

std::uint64_t view_generation(std::string_view panel, const lab::Snapshot& s) {
  auto gen = [](const auto& view) -> std::uint64_t { return view ? view->generation : 0; };
  if (panel == "primal_dual") return gen(s.primal_dual);
  if (panel == "inner_curves") return gen(s.curves);
  if (panel == "minibatch") return gen(s.minibatch);
  if (panel == "evolution") return gen(s.evolution);
  if (panel == "inner_stepper") return gen(s.stepper);
  if (panel == "evaluation") return gen(s.evaluation);
  if (panel == "nonparametric") return gen(s.nonparametric);
  if (panel == "recall") return gen(s.recall);
  return 0;
}

Measures run_scene(const fs::path& scene, std::chrono::seconds timeout,
                   const std::function<void(double)>& progress, std::vector<std::string>* notes) {
  nlohmann::json state;
  lab::KeyLog keys;
  try {
    state = lab::read_state_file(scene);
  } catch (const lab::StateError& e) {
    throw LessonError(e.what());
  }
  const std::string panel = scene_panel(state);
  // A scene that follows a training run trains in a fresh temporary folder, removed afterwards (the
  // engine, declared after it, is stopped and its run threads joined first).
  struct TempDir {
    fs::path path;
    ~TempDir() {
      std::error_code ec;
      if (!path.empty()) fs::remove_all(path, ec);
    }
  } runs_dir;
  if (follows_training(state)) {
    static std::atomic<unsigned> counter{0};
    std::error_code ec;
    const auto stamp = std::chrono::steady_clock::now().time_since_epoch().count();
    runs_dir.path = fs::temp_directory_path(ec) /
                    ("tttlab-lesson-runs-" + std::to_string(stamp) + "-" + std::to_string(counter++));
    fs::create_directories(runs_dir.path, ec);
    if (ec) throw LessonError("cannot create a temporary folder for the training run: " + ec.message());
    state["panels"]["training"]["settings"]["runs_dir"] = runs_dir.path.string();
  }
  lab::Engine engine(lab::make_engine_modules());
  engine.start();
  post_scene(state, engine);
  // Only the settings the check reads are judged: the scene's panel (and the run it follows), without
  // its "view" block, the display settings that only the window reads (and judges).
  for (const std::string& k : keys.unknown(state)) {
    if (k.rfind("panels." + panel + ".", 0) != 0 && k.rfind("panels.training.settings.", 0) != 0) continue;
    if (k == "panels." + panel + ".view" || k.rfind("panels." + panel + ".view.", 0) == 0) continue;
    const std::string note = clip(scene.generic_string(), 240) + ": unknown key \"" + clip(k) + "\" (ignored)";
    if (notes)
      notes->push_back(note);
    else
      std::fprintf(stderr, "tttlab: note: %s\n", note.c_str());
  }
  const auto t0 = std::chrono::steady_clock::now();
  auto last_report = t0;
  for (;;) {
    const auto snap = engine.snapshot();
    if (snap) {
      if (auto m = read_measures(panel, *snap)) return *m;
    }
    const auto now = std::chrono::steady_clock::now();
    if (now - t0 > timeout)
      throw LessonError(scene.generic_string() + ": the experiment did not finish within " +
                        std::to_string(timeout.count()) + " s");
    if (progress && now - last_report > std::chrono::seconds(1) && snap) {
      last_report = now;
      double p = 0;
      for (const auto& j : snap->jobs) p = std::max(p, j.progress);
      progress(p);
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
}

}  // namespace tttlab::course
