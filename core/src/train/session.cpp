// The training loop of a run directory (see tttlab/train/session.hpp).
#include "tttlab/train/session.hpp"

#include <chrono>
#include <stdexcept>

#include "tttlab/io/atomic_file.hpp"

namespace tttlab {
namespace fs = std::filesystem;

namespace {

bool is_stale_temporary(const fs::path& p) {
  const std::string name = p.filename().string();
  return name.size() > 1 && name[0] == '.' && name.find(".tmp-") != std::string::npos;
}

}  // namespace

int remove_stale_temporaries(const fs::path& run_dir) {
  int removed = 0;
  std::error_code ec;
  const auto sweep = [&](const fs::path& dir) {
    for (const auto& e : fs::directory_iterator(dir, ec))
      if (e.is_regular_file(ec) && is_stale_temporary(e.path()) && fs::remove(e.path(), ec)) ++removed;
  };
  sweep(run_dir);
  for (const auto& e : fs::directory_iterator(run_dir, ec))
    if (e.is_directory(ec) && e.path().filename().string().rfind("step-", 0) == 0) sweep(e.path());
  return removed;
}

TrainingSession::TrainingSession(fs::path dir, std::unique_ptr<Trainer> trainer, MetricsLog::Mode mode,
                                 SessionOptions options)
    : m_dir(std::move(dir)),
      m_trainer(std::move(trainer)),
      m_metrics(m_dir / "metrics.jsonl", mode),
      m_options(std::move(options)) {
  if (!m_options.clock) {
    m_options.clock = [] {
      return std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch()).count();
    };
  }
  m_start = now();
}

TrainingSession::~TrainingSession() = default;

double TrainingSession::now() const { return m_options.clock(); }

std::unique_ptr<TrainingSession> TrainingSession::create(const fs::path& run_dir, TrainConfig cfg, TextData data,
                                                         const TrainBackendFactory& backend, SessionOptions options) {
  if (fs::exists(run_dir / "latest"))
    throw std::runtime_error("'" + run_dir.string() + "' already holds a run; resume it, or choose another directory");
  auto trainer = std::make_unique<Trainer>(std::move(cfg), std::move(data), backend);
  std::error_code ec;
  fs::create_directories(run_dir, ec);
  if (ec) throw FileError("cannot create the run directory '" + run_dir.string() + "': " + ec.message());
  remove_stale_temporaries(run_dir);
  write_file_atomic(run_dir / "train_config.json", trainer->config().to_json());
  return std::unique_ptr<TrainingSession>(
      new TrainingSession(run_dir, std::move(trainer), MetricsLog::Mode::Fresh, std::move(options)));
}

std::unique_ptr<TrainingSession> TrainingSession::resume(const fs::path& run_dir, const TrainBackendFactory& backend,
                                                         SessionOptions options) {
  auto trainer = Trainer::resume(run_dir, backend);
  remove_stale_temporaries(run_dir);
  truncate_metrics(run_dir / "metrics.jsonl", trainer->steps_done());
  std::unique_ptr<TrainingSession> s(
      new TrainingSession(run_dir, std::move(trainer), MetricsLog::Mode::Append, std::move(options)));
  s->m_saved_step = s->m_trainer->steps_done();
  return s;
}

void TrainingSession::evaluate(bool final, const SessionHooks& hooks) {
  const EvalReport ev = m_trainer->evaluate(m_trainer->config().eval_windows);
  m_metrics.append(metrics_eval_record(ev, final));
  if (hooks.on_eval) hooks.on_eval(ev, final);
}

fs::path TrainingSession::checkpoint(const SessionHooks& hooks) {
  const long step = m_trainer->steps_done();
  if (m_saved_step != step) {
    m_metrics.sync();  // the records up to this step are durable before `latest` names it
    m_trainer->save(m_dir);
    m_saved_step = step;
  }
  const fs::path ck = resolve_checkpoint(m_dir);
  if (hooks.on_checkpoint) hooks.on_checkpoint(step, ck);
  return ck;
}

TrainingSession::Outcome TrainingSession::run(const SessionHooks& hooks) {
  Trainer& t = *m_trainer;
  const TrainConfig& cfg = t.config();
  bool stopped = false;
  while (!t.finished()) {
    if (m_stop.load() || (hooks.between_steps && hooks.between_steps() == SessionControl::Stop) || m_stop.load()) {
      stopped = true;
      break;
    }
    const double t0 = now();
    const StepReport r = t.step();
    const double seconds = now() - t0;
    const double tokens_per_s = seconds > 0 ? static_cast<double>(r.tokens) / seconds : 0.0;
    const double elapsed = now() - m_start;
    m_metrics.append(metrics_step_record(r, tokens_per_s, elapsed));
    if (hooks.on_step) hooks.on_step(r, tokens_per_s, elapsed);
    const long done = t.steps_done();
    if (cfg.eval_every > 0 && done % cfg.eval_every == 0 && !t.finished()) evaluate(false, hooks);
    if (cfg.checkpoint_every > 0 && done % cfg.checkpoint_every == 0 && !t.finished()) checkpoint(hooks);
  }
  if (!stopped) evaluate(true, hooks);
  checkpoint(hooks);
  return stopped ? Outcome::Stopped : Outcome::Finished;
}

}  // namespace tttlab
