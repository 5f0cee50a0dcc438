#include "lab/evaluation/evaluation_module.hpp"

#include <chrono>
#include <cmath>
#include <stdexcept>

#include "lab/engine/data_source.hpp"
#include "tttlab/data/batches.hpp"
#include "tttlab/model/checkpoint.hpp"

namespace tttlab::lab {

struct EvaluationModule::Job {
  std::shared_ptr<const DataBytes> data;
  std::unique_ptr<SequentialWindows> windows;
  std::size_t model = 0;
  long window = 0;
  std::shared_ptr<const Model<float>> current;
  std::vector<std::vector<double>> sums;  // [model][t]
  std::vector<double> loss_sum;
  std::vector<std::vector<double>> window_ms;  // [model][window]
  std::vector<long> counted;
  ComputeTarget target;
};

EvaluationModule::EvaluationModule(std::shared_ptr<ModelLibrary> library,
                                   std::shared_ptr<ComputeChoice> compute)
    : ModelAccess(std::move(library), std::move(compute)) {}
EvaluationModule::~EvaluationModule() = default;

bool EvaluationModule::handle(const Command& command, ModuleContext& ctx) {
  return start_request<EvaluationRun>(
      command, ctx, false, [&](const EvaluationRun& run, EvaluationView& v) {
        m_job.reset();
        const EvalSettings& s = run.settings;
        v.settings = s;
        if (s.models.empty()) throw std::invalid_argument("choose at least one model");
        if (s.models.size() > 8) throw std::invalid_argument("at most 8 models at once");
        if (s.seq_len < 8 || s.seq_len > 4096)
          throw std::invalid_argument("the sequence length T must be in [8, 4096]");
        if (s.windows < 1 || s.windows > 1024)
          throw std::invalid_argument("the number of windows must be in [1, 1024]");
        auto job = std::make_unique<Job>();
        job->data = load_data(s.data, s.seq_len);
        job->windows = std::make_unique<SequentialWindows>(
            std::span<const std::uint8_t>(job->data->val), 1, s.seq_len, s.windows);
        v.data_description = job->data->description;
        v.windows_total = job->windows->windows();
        const auto lib = m_library->view();
        for (const auto& id : s.models) {
          EvalCurve c;
          c.model_id = id;
          const ModelInfo* info = lib->find(id);
          c.label = info ? info->label : id;
          v.curves.push_back(c);
        }
        job->sums.assign(s.models.size(),
                         std::vector<double>(static_cast<std::size_t>(s.seq_len), 0.0));
        job->loss_sum.assign(s.models.size(), 0.0);
        job->window_ms.assign(s.models.size(), {});
        job->counted.assign(s.models.size(), 0);
        job->target = m_compute->target();
        for (EvalCurve& c : v.curves) {
          c.device = job->target.label;
          c.note = job->target.note;
        }
        m_job = std::move(job);
        return "Evaluation: " + std::to_string(s.models.size()) + " models × " +
               std::to_string(v.windows_total) + " windows";
      });
}

void EvaluationModule::work(ModuleContext& ctx) {
  auto v = next_view();
  Job& j = *m_job;
  const auto finish = [&](JobOutcome o, const std::string& msg = {}) {
    m_slot.finish(ctx, *v, o, msg);
    m_job.reset();
  };
  if (m_slot.cancel_requested(ctx)) {
    finish(JobOutcome::Cancelled, "cancelled");
  } else {
    const std::size_t m = j.model;
    EvalCurve& c = v->curves[m];
    const long W = j.windows->windows();
    try {
      if (!j.current) {
        j.current = m_library->get(c.model_id);
        const auto lib = m_library->view();
        if (const ModelInfo* info = lib->find(c.model_id)) c.label = info->label;
      }
      const std::string why = j.target.gpu ? j.target.gpu->model_unsupported(j.current->config()) : std::string();
      if (j.target.gpu && !why.empty() && c.windows_done == 0) {
        c.device = engine_thread_cpu();
        c.note = "on the CPU: " + why;
      }
      if (j.target.gpu && why.empty()) {
        // All windows of this model in one work item: a few launches of several windows each.
        const auto t0 = std::chrono::steady_clock::now();
        const auto gm = j.target.gpu->load_model(*j.current, 16, v->settings.seq_len);
        c.load_ms = ms_since(t0);
        EvalOptions eo;
        eo.max_windows = static_cast<int>(W);
        const auto t1 = std::chrono::steady_clock::now();
        const EvalReport r = gm->evaluate(j.data->val, v->settings.seq_len, eo);
        c.eval_ms = ms_since(t1);
        c.loss_by_position = r.loss_by_position;
        c.loss = r.loss;
        c.bpb = r.bpb;
        c.windows_done = W;
        c.ms_per_window = c.eval_ms / static_cast<double>(W);
        j.window = W;
      } else {
      const TokenBatch b = j.windows->batch_at(j.window);
      const auto row = b.row(0);
      const std::vector<int> tokens(row.begin(), row.end());
      Vec<float> pos;
      const auto t0 = std::chrono::steady_clock::now();
      const CrossEntropyStats st = j.current->eval_sequence(tokens, {}, &pos);
      j.window_ms[m].push_back(ms_since(t0));
      for (long t = 0; t < pos.size(); ++t) j.sums[m][static_cast<std::size_t>(t)] += pos(t);
      j.loss_sum[m] += st.loss_sum;
      j.counted[m] += st.counted;
      ++c.windows_done;
      const double n = static_cast<double>(c.windows_done);
      c.loss_by_position.resize(j.sums[m].size());
      for (std::size_t t = 0; t < j.sums[m].size(); ++t) c.loss_by_position[t] = j.sums[m][t] / n;
      c.loss = j.counted[m] ? j.loss_sum[m] / static_cast<double>(j.counted[m]) : 0.0;
      c.bpb = c.loss / std::log(2.0);
      c.window_time = summarize_ms(j.window_ms[m], 0);
      c.ms_per_window = c.window_time.median_ms;
      ++j.window;
      }
      // A model whose forward overflows gives NaN or infinite losses: the curve says so and is not
      // drawn, rather than plotted as if it were a loss.
      bool finite = std::isfinite(c.loss) && std::isfinite(c.bpb);
      for (const double x : c.loss_by_position) finite = finite && std::isfinite(x);
      if (!finite) throw NonFiniteModelError(non_finite_model_message(model_source(*m_library->view(), c.model_id)));
    } catch (const std::exception& e) {
      c.loss_by_position.clear();
      c.loss = c.bpb = 0.0;
      c.error = e.what();
      j.window = W;  // skip this model
    }
    if (j.window >= W) {
      j.window = 0;
      j.current.reset();
      ++j.model;
    }
    const double done = static_cast<double>(j.model * static_cast<std::size_t>(W) + static_cast<std::size_t>(j.window));
    m_slot.set_progress(ctx, *v, done / static_cast<double>(v->curves.size() * static_cast<std::size_t>(W)));
    if (j.model >= v->curves.size()) finish(JobOutcome::Done);
  }
  show(std::move(v), ctx);
}

}  // namespace tttlab::lab
