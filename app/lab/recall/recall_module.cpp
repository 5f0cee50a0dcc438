#include "lab/recall/recall_module.hpp"

#include <chrono>

#include "tttlab/analysis/recall.hpp"

namespace tttlab::lab {

namespace {
// A work item stops starting new units after this long: the UI thread never waits on it, but a
// cancel or a new request does.
constexpr auto kItemBudget = std::chrono::milliseconds(10);
}  // namespace

void validate(const RecallSettings& s) {
  using std::to_string;
  if (s.width < recall::kMinWidth || s.width > recall::kMaxWidth)
    throw std::invalid_argument("the width d must be in [" + to_string(recall::kMinWidth) + ", " +
                                to_string(recall::kMaxWidth) + "]");
  if (s.pairs.empty() || s.pairs.size() > 12) throw std::invalid_argument("give 1 to 12 numbers of pairs");
  for (std::size_t i = 0; i < s.pairs.size(); ++i) {
    if (s.pairs[i] < 1 || s.pairs[i] > recall::max_pairs())
      throw std::invalid_argument("every number of pairs must be in [1, " + to_string(recall::max_pairs()) + "]");
    if (i > 0 && s.pairs[i] <= s.pairs[i - 1])
      throw std::invalid_argument("the numbers of pairs must increase");
  }
  if (s.sequences < 1 || s.sequences > 256) throw std::invalid_argument("the number of sequences must be in [1, 256]");
  if (!recall::memory_from_id(s.map_memory))
    throw std::invalid_argument("the map's memory must be one of " + recall::memory_ids() + ", not '" +
                                s.map_memory + "'");
  if (s.map_pairs < 2 || s.map_pairs > recall::max_pairs())
    throw std::invalid_argument("the map's number of pairs must be in [2, " + to_string(recall::max_pairs()) + "]");
  if (!(s.eta_linear > 0.0 && s.eta_linear < 2.0))
    throw std::invalid_argument("TTT-Linear's step η must be in (0, 2): at 2 or more a step overshoots");
  if (!(s.mamba_decay > 0.0 && s.mamba_decay <= 1.0))
    throw std::invalid_argument("Mamba-2's decay a must be in (0, 1]: 1 keeps everything, below 1 it forgets");
}

struct RecallModule::Job {
  RecallSettings s;
  recall::MemoryParams params;
  std::unique_ptr<recall::Embedding> emb;
  recall::Memory map_memory = recall::Memory::TttLinear;
  // Accuracy phase: the next unit is episode `episode` of P = pairs[j].
  std::size_t j = 0;
  int episode = 0;
  std::vector<std::vector<long>> correct;  // [memory][j]
  // Map phase.
  int map_episode = 0;
  std::unique_ptr<recall::Episode> map_ep;
  std::unique_ptr<recall::ForgettingStream> stream;
  std::vector<double> map_sum;             // [P_map × P_map] sums over finished episodes
  std::vector<double> map_partial;         // the episode in progress (its rows so far)
  std::vector<std::uint8_t> row;
  long units_done = 0, units_total = 0;    // episodes of the accuracy phase + rows of the map phase
};

RecallModule::RecallModule() = default;
RecallModule::~RecallModule() = default;

bool RecallModule::handle(const Command& command, ModuleContext& ctx) {
  return start_request<RecallRun>(command, ctx, false, [&](const RecallRun& run, RecallView& v) {
    m_job.reset();
    const RecallSettings& s = run.settings;
    v.settings = s;
    validate(s);
    auto job = std::make_unique<Job>();
    job->s = s;
    job->params.width = s.width;
    job->params.seed = s.seed;
    job->params.eta_linear = s.eta_linear;
    job->params.eta_mlp = recall::default_eta_mlp(s.width);
    job->params.softmax_beta = recall::kSoftmaxBeta;
    job->params.mamba_decay = s.mamba_decay;
    job->emb = std::make_unique<recall::Embedding>(s.width, s.seed);
    job->map_memory = *recall::memory_from_id(s.map_memory);
    const std::size_t np = s.pairs.size();
    job->correct.assign(recall::kMemories, std::vector<long>(np, 0));
    const std::size_t cells = static_cast<std::size_t>(s.map_pairs) * static_cast<std::size_t>(s.map_pairs);
    job->map_sum.assign(cells, 0.0);
    job->map_partial.assign(cells, 0.0);
    job->row.assign(static_cast<std::size_t>(s.map_pairs), 0);
    job->units_total = static_cast<long>(np) * s.sequences + static_cast<long>(s.sequences) * s.map_pairs;
    v.eta_mlp = job->params.eta_mlp;
    v.params = job->params;
    v.softmax_beta = job->params.softmax_beta;
    v.accuracy.assign(recall::kMemories, std::vector<double>(np, 0.0));
    v.state_size.assign(recall::kMemories, std::vector<double>(np, 0.0));
    for (int m = 0; m < recall::kMemories; ++m)
      for (std::size_t j = 0; j < np; ++j)
        v.state_size[static_cast<std::size_t>(m)][j] = static_cast<double>(
            recall::state_size(static_cast<recall::Memory>(m), job->params, s.pairs[j]));
    v.episodes_done.assign(np, 0);
    v.map.assign(cells, 0.0);
    m_job = std::move(job);
    return "Recall lab: d = " + std::to_string(s.width) + ", " + std::to_string(s.sequences) + " sequences per P";
  });
}

void RecallModule::finish(ModuleContext& ctx, JobOutcome outcome, const std::string& message) {
  auto v = next_view();
  m_slot.finish(ctx, *v, outcome, message);
  m_job.reset();
  show(std::move(v), ctx);
}

void RecallModule::work(ModuleContext& ctx) {
  if (m_slot.cancel_requested(ctx)) return finish(ctx, JobOutcome::Cancelled, "cancelled");
  Job& j = *m_job;
  const RecallSettings& s = j.s;
  const std::size_t np = s.pairs.size();
  const std::size_t P = static_cast<std::size_t>(s.map_pairs);
  auto v = next_view();
  const auto t0 = std::chrono::steady_clock::now();
  try {
    do {
      if (j.j < np) {
        // One episode of P = pairs[j], read by every memory. Episodes are taken P by P in turn, so
        // every point of the curves has some episodes early on.
        const int pairs = s.pairs[j.j];
        const recall::Episode e = recall::make_episode(pairs, s.seed, static_cast<std::uint64_t>(j.episode));
        for (int m = 0; m < recall::kMemories; ++m) {
          auto& c = j.correct[static_cast<std::size_t>(m)][j.j];
          c += recall::recall_correct(static_cast<recall::Memory>(m), e, *j.emb, j.params);
          v->accuracy[static_cast<std::size_t>(m)][j.j] =
              static_cast<double>(c) / (static_cast<double>(j.episode + 1) * pairs);
        }
        v->episodes_done[j.j] = j.episode + 1;
        if (++j.j == np && ++j.episode < s.sequences) j.j = 0;
      } else {
        if (!j.stream) {
          j.map_ep = std::make_unique<recall::Episode>(
              recall::make_episode(s.map_pairs, s.seed, static_cast<std::uint64_t>(j.map_episode)));
          j.stream = std::make_unique<recall::ForgettingStream>(j.map_memory, *j.map_ep, *j.emb, j.params);
        }
        const std::size_t t = static_cast<std::size_t>(j.stream->rows_done());
        j.stream->next_row(j.row.data());
        for (std::size_t i = 0; i <= t; ++i) j.map_partial[t * P + i] = j.row[i];
        // The view shows finished episodes plus the rows of the one in progress, each row a mean
        // over the episodes that reached it.
        const double done = static_cast<double>(j.map_episode);
        for (std::size_t i = 0; i <= t; ++i)
          v->map[t * P + i] = (j.map_sum[t * P + i] + j.map_partial[t * P + i]) / (done + 1.0);
        if (j.stream->done()) {
          for (std::size_t c = 0; c < j.map_sum.size(); ++c) j.map_sum[c] += j.map_partial[c];
          std::fill(j.map_partial.begin(), j.map_partial.end(), 0.0);
          j.stream.reset();
          j.map_ep.reset();
          v->map_episodes_done = ++j.map_episode;
        }
      }
      ++j.units_done;
    } while (j.units_done < j.units_total && std::chrono::steady_clock::now() - t0 < kItemBudget);
  } catch (const std::exception& e) {
    m_view = std::move(v);
    return finish(ctx, JobOutcome::Failed, e.what());
  }
  m_slot.set_progress(ctx, *v, static_cast<double>(j.units_done) / static_cast<double>(j.units_total));
  show(std::move(v), ctx);
  if (j.units_done >= j.units_total) finish(ctx, JobOutcome::Done, {});
}

}  // namespace tttlab::lab
