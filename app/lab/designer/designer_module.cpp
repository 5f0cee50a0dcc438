#include "lab/designer/designer_module.hpp"

#include <chrono>
#include <cmath>

#include "tttlab/analysis/recall.hpp"

namespace tttlab::lab {

namespace {
// A work item stops starting new units after this long: the UI thread never waits on it, but a
// cancel or a new request does.
constexpr auto kDesignerItemBudget = std::chrono::milliseconds(10);
// A loss past this is a state that has left every sensible scale: the curve stops meaning anything.
constexpr double kDesignerDivergedLoss = 1e12;
}  // namespace

DesignParams member_params(const FastWeightPreset& member, const DesignParams& design) {
  DesignParams p;
  p.width = design.width;
  p.seed = design.seed;
  p.eta = member.rule.state == FastWeightState::Mlp ? recall::default_eta_mlp(design.width) : 1.0;
  return p;
}

void validate(const DesignerSettings& s) {
  using std::to_string;
  validate(s.design, s.params);
  const FastWeightPreset& member = fast_weight_preset(s.compare);  // throws for an unknown id
  validate(member.rule, member_params(member, s.params));
  if (s.pairs.empty() || s.pairs.size() > 12) throw std::invalid_argument("give 1 to 12 numbers of pairs");
  for (std::size_t i = 0; i < s.pairs.size(); ++i) {
    if (s.pairs[i] < 1 || s.pairs[i] > recall::max_pairs())
      throw std::invalid_argument("every number of pairs must be in [1, " + to_string(recall::max_pairs()) + "]");
    if (i > 0 && s.pairs[i] <= s.pairs[i - 1]) throw std::invalid_argument("the numbers of pairs must increase");
  }
  if (s.sequences < 1 || s.sequences > 256) throw std::invalid_argument("the number of sequences must be in [1, 256]");
  if (s.curve_pairs < 2 || s.curve_pairs > recall::max_pairs())
    throw std::invalid_argument("the loss curve's number of pairs must be in [2, " + to_string(recall::max_pairs()) +
                                "]");
}

struct DesignerModule::Job {
  DesignerSettings s;
  FastWeightRule rules[2];
  DesignParams params[2];
  std::unique_ptr<recall::Embedding> emb;
  // Curve phase: both memories and the episode, pair by pair.
  recall::Episode curve;
  std::unique_ptr<DesignedMemory> curve_mem[2];
  int curve_t = 0;
  // Accuracy phase: the next unit is episode `episode` of P = pairs[j].
  std::size_t j = 0;
  int episode = 0;
  std::vector<std::vector<long>> correct;  // [memory][j]
  long units_done = 0, units_total = 0;   // pairs of the curve episode + accuracy episodes
};

DesignerModule::DesignerModule() = default;
DesignerModule::~DesignerModule() = default;

bool DesignerModule::handle(const Command& command, ModuleContext& ctx) {
  return start_request<DesignerRun>(command, ctx, false, [&](const DesignerRun& run, DesignerView& v) {
    m_job.reset();
    const DesignerSettings& s = run.settings;
    v.settings = s;
    validate(s);
    const FastWeightPreset& member = fast_weight_preset(s.compare);
    const NearestMember near = nearest_member(s.design);
    v.nearest_id = near.preset->id;
    v.nearest_name = near.preset->name;
    v.common = near.common;
    v.differs = near.differs;
    v.compare_name = member.name;
    v.compare_params = member_params(member, s.params);
    auto job = std::make_unique<Job>();
    job->s = s;
    job->rules[0] = s.design;
    job->rules[1] = member.rule;
    job->params[0] = s.params;
    job->params[1] = v.compare_params;
    job->emb = std::make_unique<recall::Embedding>(s.params.width, s.params.seed);
    // The curve's episode is drawn apart from the accuracy episodes (index past any of theirs).
    job->curve = recall::make_episode(s.curve_pairs, s.params.seed, 1000000);
    for (int m = 0; m < 2; ++m) job->curve_mem[m] = std::make_unique<DesignedMemory>(job->rules[m], job->params[m]);
    const std::size_t np = s.pairs.size();
    job->correct.assign(2, std::vector<long>(np, 0));
    job->units_total = s.curve_pairs + static_cast<long>(np) * s.sequences;
    v.accuracy.assign(2, std::vector<double>(np, 0.0));
    v.episodes_done.assign(np, 0);
    v.loss_before.assign(2, std::vector<double>(static_cast<std::size_t>(s.curve_pairs), 0.0));
    v.loss_after = v.loss_before;
    m_job = std::move(job);
    return std::string("Designer: ") + to_string(s.design.loss) + " loss, " + to_string(s.design.granularity) + ", against " +
           member.name;
  });
}

void DesignerModule::finish(ModuleContext& ctx, JobOutcome outcome, const std::string& message) {
  auto v = next_view();
  m_slot.finish(ctx, *v, outcome, message);
  m_job.reset();
  show(std::move(v), ctx);
}

void DesignerModule::work(ModuleContext& ctx) {
  if (m_slot.cancel_requested(ctx)) return finish(ctx, JobOutcome::Cancelled, "cancelled");
  Job& j = *m_job;
  const DesignerSettings& s = j.s;
  const std::size_t np = s.pairs.size();
  auto v = next_view();
  const auto t0 = std::chrono::steady_clock::now();
  try {
    do {
      if (j.curve_t < s.curve_pairs) {
        const std::size_t t = static_cast<std::size_t>(j.curve_t);
        const Eigen::RowVectorXd k = j.emb->row(j.curve.keys[t]), val = j.emb->row(j.curve.values[t]);
        for (int m = 0; m < 2; ++m) {
          DesignedMemory& mem = *j.curve_mem[m];
          mem.write(k, val);
          const double before = mem.loss_before(), after = mem.loss_after();
          v->loss_before[static_cast<std::size_t>(m)][t] = before;
          v->loss_after[static_cast<std::size_t>(m)][t] = after;
          if (!std::isfinite(before) || !std::isfinite(after) || std::abs(after) > kDesignerDivergedLoss)
            v->diverged[m] = true;
          v->state_size[m] = mem.state_size();
        }
        v->curve_done = ++j.curve_t;
      } else {
        // One episode of P = pairs[j], read by both memories. Episodes are taken P by P in turn, so
        // every point of the curves has some episodes early on.
        const int pairs = s.pairs[j.j];
        const recall::Episode e = recall::make_episode(pairs, s.params.seed, static_cast<std::uint64_t>(j.episode));
        for (int m = 0; m < 2; ++m) {
          auto& c = j.correct[static_cast<std::size_t>(m)][j.j];
          c += designed_recall_correct(j.rules[m], j.params[m], e, *j.emb);
          v->accuracy[static_cast<std::size_t>(m)][j.j] =
              static_cast<double>(c) / (static_cast<double>(j.episode + 1) * pairs);
        }
        v->episodes_done[j.j] = j.episode + 1;
        if (++j.j == np && ++j.episode < s.sequences) j.j = 0;
      }
      ++j.units_done;
    } while (j.units_done < j.units_total && std::chrono::steady_clock::now() - t0 < kDesignerItemBudget);
  } catch (const std::exception& e) {
    m_view = std::move(v);
    return finish(ctx, JobOutcome::Failed, e.what());
  }
  m_slot.set_progress(ctx, *v, static_cast<double>(j.units_done) / static_cast<double>(j.units_total));
  show(std::move(v), ctx);
  if (j.units_done >= j.units_total) finish(ctx, JobOutcome::Done, {});
}

}  // namespace tttlab::lab
