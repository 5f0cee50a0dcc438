// The training loop of a run directory (see tttlab/train/session.hpp).
#include "tttlab/train/session.hpp"

#include <chrono>
#include <cmath>
#include <cstdio>
#include <stdexcept>

#include "tttlab/io/atomic_file.hpp"
#include "tttlab/io/limits.hpp"
#include "tttlab/train/run_dir.hpp"

namespace tttlab {
namespace fs = std::filesystem;

namespace {

// "NaN", "inf", or the number in 4 significant digits (std::to_string prints "-nan").
std::string number_text(double x) {
  if (std::isnan(x)) return "NaN";
  if (std::isinf(x)) return x > 0 ? "inf" : "-inf";
  char buf[32];
  std::snprintf(buf, sizeof buf, "%.4g", x);
  return buf;
}

std::string quote_path(const fs::path& p) {
  std::string s = "'";
  s += clip(p.string(), 240);
  s += '\'';
  return s;
}

// A temporary of one of the files a run writes (io/atomic_file.hpp names them ".<name>.tmp-<pid>-<n>").
bool is_stale_temporary(const fs::path& p, std::initializer_list<const char*> names) {
  const std::string name = p.filename().string();
  for (const char* n : names) {
    std::string prefix = ".";  // appended, not "." + ...: GCC 12 warns (-Wrestrict, a false positive)
    prefix += n;
    prefix += ".tmp-";
    if (name.rfind(prefix, 0) == 0) return true;
  }
  return false;
}

}  // namespace

int remove_stale_temporaries(const fs::path& run_dir) {
  // Only the temporaries of files this run writes, in the run and in the checkpoints it lists: a
  // user's own dot-file is never touched.
  const RunDirectory run = RunDirectory::open(run_dir);
  int removed = 0;
  std::error_code ec;
  const auto sweep = [&](const fs::path& dir, std::initializer_list<const char*> names) {
    if (!fs::is_directory(fs::symlink_status(dir, ec))) return;
    for (const auto& e : fs::directory_iterator(dir, ec))
      if (fs::is_regular_file(fs::symlink_status(e.path(), ec)) && is_stale_temporary(e.path(), names) &&
          fs::remove(e.path(), ec))
        ++removed;
  };
  sweep(run_dir, {"train_config.json", "metrics.jsonl", "latest", k_run_manifest});
  for (const std::string& name : run.entries())
    if (checkpoint_step_of(name))
      sweep(run_dir / name, {"config.json", "model.safetensors", "train_state.safetensors"});
  return removed;
}

TrainingSession::TrainingSession(fs::path dir, std::unique_ptr<Trainer> trainer, MetricsLog::Mode mode,
                                 TrainBackendFactory backend, SessionOptions options)
    : m_dir(std::move(dir)),
      m_trainer(std::move(trainer)),
      m_metrics(options.writes_files ? std::make_unique<MetricsLog>(m_dir / "metrics.jsonl", mode) : nullptr),
      m_backend(std::move(backend)),
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
  if (options.writes_files && RunDirectory::holds_run(run_dir))
    throw std::runtime_error(quote_path(run_dir) + " already holds a run; resume it, or choose another directory");
  auto trainer = std::make_unique<Trainer>(std::move(cfg), std::move(data), backend);
  if (!options.writes_files)
    return std::unique_ptr<TrainingSession>(
        new TrainingSession(run_dir, std::move(trainer), MetricsLog::Mode::Fresh, backend, std::move(options)));
  // A new or empty directory only (run_dir.hpp): the run never mixes its files with the user's.
  RunDirectory run = RunDirectory::claim(run_dir);
  const std::string cfg_text = trainer->config().to_json();
  write_file_atomic(run.file("train_config.json"), cfg_text);
  run.set_train_config_digest(cfg_text);
  (void)run.file("metrics.jsonl");  // recorded before the log creates it
  return std::unique_ptr<TrainingSession>(
      new TrainingSession(run_dir, std::move(trainer), MetricsLog::Mode::Fresh, backend, std::move(options)));
}

std::unique_ptr<TrainingSession> TrainingSession::resume(const fs::path& run_dir, const TrainBackendFactory& backend,
                                                         SessionOptions options) {
  if (!fs::exists(run_dir / "latest") && fs::exists(run_dir / "train_config.json")) {
    // Killed before (or during) its first checkpoint: nothing was saved but the config, and the
    // same config and seed give the same run from step 0. The config must be the one the run wrote.
    const RunDirectory run = RunDirectory::open(run_dir);
    const std::string text = read_file_text(run_dir / "train_config.json", 1 << 20);
    run.verify_train_config(text);
    TrainConfig cfg = TrainConfig::from_json(text, (run_dir / "train_config.json").string());
    auto trainer = std::make_unique<Trainer>(cfg, TextData::load(cfg), backend);
    if (options.writes_files) remove_stale_temporaries(run_dir);
    return std::unique_ptr<TrainingSession>(
        new TrainingSession(run_dir, std::move(trainer), MetricsLog::Mode::Fresh, backend, std::move(options)));
  }
  auto trainer = Trainer::resume(run_dir, backend);
  if (options.writes_files) {
    remove_stale_temporaries(run_dir);
    truncate_metrics(run_dir / "metrics.jsonl", trainer->steps_done());
  }
  std::unique_ptr<TrainingSession> s(
      new TrainingSession(run_dir, std::move(trainer), MetricsLog::Mode::Append, backend, std::move(options)));
  s->m_saved_step = s->m_trainer->steps_done();
  return s;
}

void TrainingSession::evaluate(bool final, const SessionHooks& hooks) {
  const EvalReport ev = m_trainer->evaluate(m_trainer->config().eval_windows);
  if (m_metrics) m_metrics->append(metrics_eval_record(ev, final));
  if (hooks.on_eval) hooks.on_eval(ev, final);
}

void TrainingSession::event(const std::string& kind, const std::string& message, const SessionHooks& hooks) {
  const long step = m_trainer->steps_done();
  if (m_metrics) m_metrics->append(metrics_event_record(step, kind, message));
  if (hooks.on_event) hooks.on_event(step, kind, message);
}

void TrainingSession::on_diverged(long bad_steps, const SessionHooks& hooks) {
  const TrainConfig cfg = m_trainer->config();
  const long step = m_trainer->steps_done();
  const std::string what = std::to_string(bad_steps) + " steps in a row after step " + std::to_string(step) +
                           " had a non-finite loss or gradient";
  if (cfg.on_diverge == "stop" || m_rollbacks >= cfg.max_rollbacks) {
    const std::string msg =
        "training diverged: " + what +
        (cfg.on_diverge == "stop" ? std::string(" (policy: stop)")
                                  : " after " + std::to_string(m_rollbacks) + " rollbacks with lower learning rates") +
        "; " + (m_saved_step >= 0 ? "the last good checkpoint is step " + std::to_string(m_saved_step)
                                  : std::string("no checkpoint was written")) +
        "; try a lower --lr or a longer --warmup";
    event("diverged", msg, hooks);
    if (m_metrics) m_metrics->sync();
    throw TrainingDiverged(msg);
  }
  // Roll back: the last checkpoint, or step 0 when there is none, with the learning rate lowered.
  ++m_rollbacks;
  const double scale = cfg.lr_scale * cfg.rollback_lr_factor;
  const auto lower = [scale](TrainConfig& c) { c.lr_scale = scale; };
  const bool writes = m_options.writes_files;
  if (m_metrics) m_metrics->sync();
  m_metrics.reset();
  long back_to = 0;
  if (fs::exists(m_dir / "latest")) {
    m_trainer = Trainer::resume(m_dir, m_backend, lower);
    back_to = m_trainer->steps_done();
    if (writes) truncate_metrics(m_dir / "metrics.jsonl", back_to);
  } else {
    TrainConfig c = cfg;
    lower(c);
    m_trainer = std::make_unique<Trainer>(c, TextData::load(c), m_backend);
    if (writes) truncate_metrics(m_dir / "metrics.jsonl", 0);
  }
  m_saved_step = fs::exists(m_dir / "latest") ? back_to : -1;
  if (writes) {
    write_file_atomic(m_dir / "train_config.json", m_trainer->config().to_json());
    m_metrics = std::make_unique<MetricsLog>(m_dir / "metrics.jsonl", MetricsLog::Mode::Append);
  }
  event("rollback",
        what + "; rolled back to " + (back_to > 0 ? "the checkpoint of step " + std::to_string(back_to) : std::string("step 0")) +
            " with the learning rate times " + number_text(scale) + " (peak " +
            number_text(m_trainer->config().lr * scale) + "), rollback " + std::to_string(m_rollbacks) + " of at most " +
            std::to_string(cfg.max_rollbacks),
        hooks);
}

fs::path TrainingSession::checkpoint(const SessionHooks& hooks) {
  const long step = m_trainer->steps_done();
  if (!m_options.writes_files) {  // the first process of the job writes it
    m_saved_step = step;
    return m_dir;
  }
  if (m_saved_step != step) {
    m_metrics->sync();  // the records up to this step are durable before `latest` names it
    m_trainer->save(m_dir, m_options.keep_checkpoints);
    m_saved_step = step;
  }
  const fs::path ck = resolve_checkpoint(m_dir);
  if (hooks.on_checkpoint) hooks.on_checkpoint(step, ck);
  return ck;
}

TrainingSession::Outcome TrainingSession::run(const SessionHooks& hooks) {
  bool stopped = false;
  long bad_steps = 0;  // in a row
  while (!m_trainer->finished()) {
    if (m_stop.load() || (hooks.between_steps && hooks.between_steps() == SessionControl::Stop) || m_stop.load()) {
      stopped = true;
      break;
    }
    const double t0 = now();
    const StepReport r = m_trainer->step();
    const double seconds = now() - t0;
    const double tokens_per_s = seconds > 0 ? static_cast<double>(r.tokens) / seconds : 0.0;
    const double elapsed = now() - m_start;
    if (m_metrics) m_metrics->append(metrics_step_record(r, tokens_per_s, elapsed));
    if (hooks.on_step) hooks.on_step(r, tokens_per_s, elapsed);
    if (r.skipped || !std::isfinite(r.loss)) {
      ++bad_steps;
      event("skipped_step",
            "the loss or the gradient was not finite (loss " + number_text(r.loss) + ", gradient norm " +
                number_text(r.grad_norm) + "): the update was skipped",
            hooks);
      if (bad_steps >= m_trainer->config().max_bad_steps) {
        on_diverged(bad_steps, hooks);  // a rollback replaces m_trainer, or it throws
        bad_steps = 0;
      }
      continue;
    }
    bad_steps = 0;
    const Trainer& t = *m_trainer;
    const TrainConfig& cfg = t.config();
    const long done = t.steps_done();
    if (cfg.eval_every > 0 && done % cfg.eval_every == 0 && !t.finished()) evaluate(false, hooks);
    if (cfg.checkpoint_every > 0 && done % cfg.checkpoint_every == 0 && !t.finished()) checkpoint(hooks);
  }
  if (!stopped) evaluate(true, hooks);
  checkpoint(hooks);
  return stopped ? Outcome::Stopped : Outcome::Finished;
}

}  // namespace tttlab
