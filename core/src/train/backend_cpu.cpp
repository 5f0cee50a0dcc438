// The CPU training backend (see tttlab/train/backend.hpp): the Trainer's step and evaluation on the
// engine of core/, with data-parallel worker threads.
#include <atomic>
#include <cmath>
#include <exception>
#include <mutex>
#include <thread>

#include "tttlab/train/backend.hpp"
#include "tttlab/train/trainer.hpp"

#include "tttlab/util/parallel.hpp"
#include "window_sums.hpp"

namespace tttlab {
namespace {

class CpuTrainBackend final : public TrainBackend {
 public:
  explicit CpuTrainBackend(const TrainBackendContext& ctx)
      : m_model(*ctx.model), m_optim(*ctx.optim), m_threads(std::max(1, ctx.threads)) {
    m_model.for_each_param([&](Eigen::Map<Mat<float>> m, const std::string& n) {
      m_param_views.push_back(m);
      m_names.push_back(n);
      m_trained.push_back(m_model.config().trains(n));
    });
    for (int i = 0; i < m_threads; ++i) {
      m_grads.push_back(m_model.zeros_like());
      m_grad_views.emplace_back();
      m_grads.back()->for_each_param(
          [&](Eigen::Map<Mat<float>> m, const std::string&) { m_grad_views.back().push_back(m); });
    }
  }

  DeviceKind kind() const override { return DeviceKind::CPU; }
  std::string describe() const override {
    DeviceInfo d = cpu_device();
    d.threads = m_threads;
    return d.describe();
  }

  BackendStep step(const TokenBatch& batch) override {
    const long denom = static_cast<long>(batch.counted_targets());
    std::vector<double> loss_sum(m_threads, 0.0);
    run_parallel(m_threads, [&](int i) {
      Model<float>& g = *m_grads[i];
      g.set_zero();
      const int lo = batch.batch * i / m_threads, hi = batch.batch * (i + 1) / m_threads;
      loss_sum[i] = cpu_train_rows(m_model, batch, lo, hi, denom, g);
    });
    // Sum the per-thread gradients in thread order (deterministic for a given thread count).
    auto& gv = m_grad_views;
    for (int i = 1; i < m_threads; ++i)
      for (size_t k = 0; k < gv[0].size(); ++k) gv[0][k] += gv[i][k];
    std::vector<NamedParam<float>> params;
    params.reserve(gv[0].size());
    for (size_t k = 0; k < gv[0].size(); ++k) {
      if (!m_trained[k]) continue;  // a fixed parameter (ModelConfig::trains): not in the optimiser
      auto& p = m_param_views[k];
      params.push_back({m_names[k], std::span<float>(p.data(), p.size()),
                        std::span<const float>(gv[0][k].data(), gv[0][k].size())});
    }
    BackendStep s;
    s.optim = m_optim.step(params);
    for (double l : loss_sum) s.loss_sum += l;
    return s;
  }

  std::int64_t step_count() const override { return m_optim.step_count(); }

  EvalReport evaluate(std::span<const std::uint8_t> val, int seq_len, const EvalOptions& options) override {
    SequentialWindows windows(val, 1, seq_len, options.max_windows);
    const std::int64_t n = windows.windows();
    if (n <= 0) throw std::runtime_error("the validation text is shorter than one window");
    if (options.target_losses) options.target_losses->assign(static_cast<std::size_t>(n * seq_len), 0.f);
    WindowSums sums(m_threads, seq_len);
    std::atomic<std::int64_t> done{0};
    std::mutex progress_mutex;
    run_parallel(m_threads, [&](int i) {
      for (std::int64_t w = i; w < n; w += m_threads) {
        const TokenBatch b = windows.batch_at(w);
        const auto row = b.row(0);
        const std::vector<int> tokens(row.begin(), row.end());
        Vec<float> pos;
        const CrossEntropyStats st = m_model.eval_sequence(tokens, {}, &pos);
        sums.add(i, st, pos);
        if (options.target_losses)
          std::copy(pos.data(), pos.data() + seq_len, options.target_losses->data() + w * seq_len);
        const std::int64_t k = ++done;
        if (options.progress) {
          std::lock_guard<std::mutex> lock(progress_mutex);
          options.progress(k, n);
        }
      }
    });
    return sums.report(n);
  }

  void pull_to_host() override {}
  void push_from_host() override {}

 private:
  Model<float>& m_model;
  AdamW<float>& m_optim;
  int m_threads;
  std::vector<std::unique_ptr<Model<float>>> m_grads;  // one per thread
  std::vector<std::vector<Eigen::Map<Mat<float>>>> m_grad_views;
  std::vector<Eigen::Map<Mat<float>>> m_param_views;
  std::vector<std::string> m_names;
  std::vector<bool> m_trained;  // per parameter: ModelConfig::trains
};

}  // namespace

double cpu_train_rows(const Model<float>& model, const TokenBatch& batch, int first, int last, long denominator,
                      Model<float>& grad) {
  double loss = 0;
  for (int r = first; r < last; ++r) {
    const auto row = batch.row(r);
    std::vector<std::uint8_t> mask;
    if (!batch.mask.empty())
      mask.assign(batch.mask.begin() + std::ptrdiff_t(r) * batch.seq_len,
                  batch.mask.begin() + std::ptrdiff_t(r + 1) * batch.seq_len);
    const std::vector<int> tokens(row.begin(), row.end());
    loss += model.train_sequence(tokens, mask, denominator, grad).loss_sum;
  }
  return loss;
}

std::unique_ptr<TrainBackend> make_cpu_train_backend(const TrainBackendContext& ctx) {
  return std::make_unique<CpuTrainBackend>(ctx);
}

}  // namespace tttlab
