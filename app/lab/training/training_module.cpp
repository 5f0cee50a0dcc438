#include "lab/training/training_module.hpp"

#include <algorithm>
#include <atomic>
#include <cctype>
#include <chrono>
#include <cstdio>
#include <cmath>
#include <condition_variable>
#include <filesystem>
#include <map>
#include <mutex>
#include <thread>

#include "lab/engine/data_source.hpp"
#include "tttlab/device.hpp"
#include "tttlab/io/atomic_file.hpp"
#include "tttlab/train/run_dir.hpp"
#include "tttlab/train/session.hpp"

namespace tttlab::lab {
namespace fs = std::filesystem;

const char* to_string(RunState s) {
  switch (s) {
    case RunState::Starting: return "starting";
    case RunState::Running: return "training";
    case RunState::Paused: return "paused";
    case RunState::Stopping: return "stopping";
    case RunState::Stopped: return "stopped";
    case RunState::Finished: return "finished";
    case RunState::Failed: return "failed";
    case RunState::Loaded: return "opened";
  }
  return "?";
}

namespace {

// The model the settings choose, and the run's configuration; std::runtime_error with the message
// when they are invalid.
TrainConfig run_config(const TrainSettings& s) {
  try {
    ModelConfig m = ModelConfig::preset(s.preset);
    m.seq_layer = seq_layer_from_string(s.layer);
    // Mamba-2, DeltaNet, Gated DeltaNet, Titans and LaCT are whole blocks: the Transformer block holds
    // them (ModelConfig::validate).
    m.mamba_backbone = s.mamba && !transformer_block_only(m.seq_layer);
    m.mini_batch_size = s.mini_batch;
    m.ttt_base_lr = s.base_lr > 0 ? s.base_lr : default_ttt_base_lr(m.seq_layer);
    return train_config(m, s);
  } catch (const std::invalid_argument& e) {
    throw std::runtime_error(e.what());
  }
}

// The settings of a run opened from its directory, as the panel shows them.
TrainSettings settings_of(const TrainConfig& c) {
  TrainSettings s;
  static_cast<RunSettings&>(s) = c;
  s.layer = to_string(c.model.seq_layer);
  s.mamba = c.model.mamba_backbone;
  s.preset = "custom";
  for (const auto& p : ModelConfig::preset_names()) {
    const ModelConfig q = ModelConfig::preset(p);
    if (q.hidden_size == c.model.hidden_size && q.num_hidden_layers == c.model.num_hidden_layers &&
        q.num_attention_heads == c.model.num_attention_heads)
      s.preset = p;
  }
  s.mini_batch = c.model.mini_batch_size;
  s.base_lr = c.model.ttt_base_lr;
  return s;
}

// The GPU count against the rest of the settings, before a run starts (the data-parallel backend would
// refuse the same later, from the worker thread, in words about ranks and shards).
void check_gpus(const TrainSettings& s) {
  if (s.gpus < 1 || s.gpus > 1024)
    throw std::runtime_error("GPUs must be between 1 and 1024, got " + std::to_string(s.gpus));
  if (s.gpus == 1) return;
  const std::string n = std::to_string(s.gpus);
  if (s.device == DeviceRequest::CPU)
    throw std::runtime_error("training on " + n + " GPUs needs the device automatic or GPU (CUDA), not CPU: "
                             "choose another device, or set GPUs to 1");
  if (s.gpus > s.batch_size)
    throw std::runtime_error(n + " GPUs need a batch of at least " + n + " sequences (each GPU computes at least one), "
                             "but the batch has " + std::to_string(s.batch_size) +
                             ": raise the batch or use fewer GPUs");
}

// How many steps the per-GPU throughput averages over.
constexpr std::size_t kGpuRateSteps = 10;

// Each rank's tokens/s over `recent` steps (Σ tokens / Σ seconds of that rank), in rank order.
std::vector<double> rates_per_gpu(const std::vector<std::vector<RankStepTiming>>& recent) {
  std::map<int, std::pair<double, double>> sums;  // rank → (tokens, seconds)
  for (const auto& step : recent)
    for (const RankStepTiming& t : step) {
      auto& [tokens, seconds] = sums[t.rank];
      tokens += static_cast<double>(t.tokens);
      seconds += t.seconds;
    }
  std::vector<double> rates;
  rates.reserve(sums.size());
  for (const auto& [rank, ts] : sums) rates.push_back(ts.second > 0 ? ts.first / ts.second : 0.0);
  return rates;
}

std::string model_summary(const ModelConfig& m, long params) {
  char b[64];
  std::snprintf(b, sizeof b, "%.2f M parameters", static_cast<double>(params) / 1e6);
  return to_string(m.seq_layer) + ", " + (m.mamba_backbone ? "Mamba" : "Transformer") + " backbone, D = " +
         std::to_string(m.hidden_size) + ", " + std::to_string(m.num_hidden_layers) + " blocks × " +
         std::to_string(m.num_attention_heads) + " heads, " + b;
}

// The step and evaluation records of a run's metrics.jsonl (schema: tttlab/train/metrics.hpp).
void read_metrics_points(const fs::path& file, long up_to_step, std::vector<StepPoint>& steps,
                         std::vector<EvalPoint>& evals) {
  for (const Json& j : read_metrics(file, up_to_step)) {
    const long step = j.at("step").get<long>();
    const auto num = [&](const char* k) { return j.contains(k) && j[k].is_number() ? j[k].get<double>() : NAN; };
    if (j.contains("val_loss")) {
      evals.push_back({step, num("val_loss"), num("val_bpb")});
    } else if (j.contains("loss")) {
      const bool skipped = j.contains("skipped") && j["skipped"].is_boolean() && j["skipped"].get<bool>();
      steps.push_back({step, num("loss"), num("lr"), num("grad_norm"), num("tokens_per_s"), num("elapsed_s"), skipped});
    }
  }
}

}  // namespace

// ---- a run and its worker --------------------------------------------------------------------------

struct TrainingModule::Run {
  // Set before the worker starts, then read-only.
  int id = 0;
  std::string name;
  fs::path dir;
  TrainSettings settings;
  bool resume = false;
  TrainDevices devices;
  fs::path root;              // the runs folder `dir` is in
  bool root_existed = false;  // before this run: a start that fails removes only what it made

  // Mailbox (under mu).
  std::mutex mu;
  std::condition_variable cv;
  bool want_pause = false, want_stop = false, want_save = false;
  RunState state = RunState::Starting;
  std::vector<StepPoint> new_steps;
  std::vector<EvalPoint> new_evals;
  std::vector<std::pair<long, fs::path>> saved;  // (step, checkpoint folder)
  std::vector<double> gpu_rates;                  // tokens/s per GPU (RunView::gpu_tokens_per_s)
  std::string error, message;
  long steps_done = 0, steps_total = 0, params = 0;
  std::string summary, data_description, device;
  std::atomic<bool> news{false};

  // Engine side.
  std::thread worker;
  SeriesBuilder<StepPoint> steps;
  std::vector<EvalPoint> evals;
  std::string checkpoint, model_id;
  std::shared_ptr<const RunView> view;
  double rate = 0;  // tokens/s, smoothed
  bool loaded_only = false;

  void request(bool TrainingModule::Run::*flag, bool value) {
    {
      std::lock_guard lk(mu);
      this->*flag = value;
    }
    cv.notify_all();
  }

  void post_state(RunState s, std::string msg = {}) {
    std::lock_guard lk(mu);
    state = s;
    if (!msg.empty()) message = std::move(msg);
    news = true;
  }

  void work();
  // A start that failed: removes the run directory it made (and the runs folder, if it made that too and
  // it is empty). Returns what could not be removed, as a clause for the message ("" when all went).
  std::string remove_failed_start();
  bool started = false;   // worker thread: the session exists (steps may be on disk)
  bool made_dir = false;  // worker thread: the run directory did not exist before this run
};

void TrainingModule::Run::work() {
  try {
    std::unique_ptr<TrainingSession> session;
    // The factory may write `device_note` while the Trainer is built (a model the GPU cannot train
    // falls back to the CPU under "auto"), so it lives as long as this function.
    std::string device_note;
    TrainBackendFactory backend;
    if (devices.choose)
      backend = devices.choose(settings.device_request(), device_note);
    else if (settings.gpus > 1)
      throw std::runtime_error("training on " + std::to_string(settings.gpus) +
                               " GPUs needs the CUDA kernels, and this build has none (nvcc was not found when it "
                               "was configured); set GPUs to 1 and train on the CPU");
    else if (settings.device == DeviceRequest::CUDA)
      throw std::runtime_error("this build has no CUDA kernels (nvcc was not found when it was configured); "
                               "train on the CPU");
    if (resume) {
      session = TrainingSession::resume(dir, backend);
    } else {
      TrainConfig cfg = run_config(settings);
      const auto data = load_data(settings.data, settings.seq_len);
      if (settings.data == "brown") {
        cfg.data = "brown";
        cfg.data_dir = data->dir.string();
      }
      // Claimed first (train/run_dir.hpp): the copy below is one of the run's own files.
      made_dir = !fs::exists(dir);
      RunDirectory run = RunDirectory::claim(dir);
      if (settings.data == "sample") {
        // The built-in text lives in the binary; a copy in the run directory lets
        // `tttlab train --resume` (and the app) reload the same data.
        const fs::path copy = run.file("sample_text.txt");
        std::string text(data->train.begin(), data->train.end());
        text.append(data->val.begin(), data->val.end());
        write_file_atomic(copy, std::string_view(text));
        cfg.data = fs::absolute(copy).string();
      } else if (settings.data != "brown") {
        cfg.data = fs::absolute(settings.data).string();
      }
      TextData td;
      td.train = data->train;
      td.val = data->val;
      td.description = data->description;
      session = TrainingSession::create(dir, cfg, std::move(td), backend);
    }
    started = true;
    {
      // A rollback (session.hpp) replaces the session's trainer: the hooks below read it through the
      // session each time.
      Trainer& t = session->trainer();
      std::lock_guard lk(mu);
      steps_done = t.steps_done();
      steps_total = t.config().steps;
      params = t.model().num_params();
      summary = model_summary(t.config().model, params);
      data_description = t.data().description;
      device = t.device_description();
      if (!device_note.empty()) device += " (" + device_note + ")";
      if (state == RunState::Starting) state = want_pause ? RunState::Paused : RunState::Running;
      news = true;
    }
    SessionHooks hooks;
    hooks.on_checkpoint = [&](long step, const fs::path& ck) {
      std::lock_guard lk(mu);
      saved.emplace_back(step, ck);
      message = "checkpoint saved at step " + std::to_string(step);
      news = true;
    };
    hooks.on_eval = [&](const EvalReport& ev, bool) {
      std::lock_guard lk(mu);
      new_evals.push_back({ev.step, ev.loss, ev.bpb});
      news = true;
    };
    // The last few steps' per-GPU timings (worker thread only).
    std::vector<std::vector<RankStepTiming>> recent_ranks;
    hooks.on_step = [&](const StepReport& r, double tokens_per_s, double elapsed_s) {
      std::vector<double> rates;
      if (!r.ranks.empty()) {
        recent_ranks.push_back(r.ranks);
        if (recent_ranks.size() > kGpuRateSteps) recent_ranks.erase(recent_ranks.begin());
        rates = rates_per_gpu(recent_ranks);
      }
      std::lock_guard lk(mu);
      new_steps.push_back({r.step, r.loss, r.lr, r.grad_norm, tokens_per_s, elapsed_s, r.skipped});
      if (!rates.empty()) gpu_rates = std::move(rates);
      steps_done = session->trainer().steps_done();
      news = true;
    };
    hooks.on_event = [&](long, const std::string&, const std::string& what) {
      std::lock_guard lk(mu);
      message = what;
      news = true;
    };
    // Pause (wait here), stop and save requests are served between optimiser steps.
    hooks.between_steps = [&] {
      for (;;) {
        {
          std::unique_lock lk(mu);
          while (want_pause && !want_stop && !want_save) {
            if (state != RunState::Paused) {
              state = RunState::Paused;
              news = true;
            }
            cv.wait(lk);
          }
          if (want_stop) return SessionControl::Stop;
          if (!want_save) {
            if (state != RunState::Running) {
              state = RunState::Running;
              news = true;
            }
            return SessionControl::Continue;
          }
          want_save = false;
        }
        session->checkpoint(hooks);  // then look at the requests again (a paused run stays paused)
      }
    };
    const TrainingSession::Outcome outcome = session->run(hooks);
    const bool stopped = outcome == TrainingSession::Outcome::Stopped;
    post_state(stopped ? RunState::Stopped : RunState::Finished,
               stopped ? "stopped at step " + std::to_string(session->trainer().steps_done()) + "; checkpoint saved"
                       : "finished: " + std::to_string(session->trainer().steps_done()) + " steps; checkpoint saved");
  } catch (const std::exception& e) {
    std::string why = e.what();
    if (!started && !resume && made_dir) why += remove_failed_start();
    std::lock_guard lk(mu);
    state = RunState::Failed;
    error = std::move(why);
    news = true;
  }
}

std::string TrainingModule::Run::remove_failed_start() {
  // Only this run wrote into `dir` (claim refuses a folder that holds anything else), and nothing of it is
  // worth keeping before the session has started: no step, no checkpoint.
  std::error_code ec;
  fs::remove_all(dir, ec);
  if (ec) return "; its folder " + dir.string() + " could not be removed (" + ec.message() + ")";
  if (!root_existed && fs::is_empty(root, ec) && !ec) fs::remove(root, ec);
  return "";
}

// ---- the module ----------------------------------------------------------------------------------

TrainingModule::TrainingModule(std::shared_ptr<ModelLibrary> library, TrainDevices devices)
    : m_library(library ? std::move(library) : std::make_shared<ModelLibrary>()),
      m_devices(std::move(devices)),
      m_view(std::make_shared<TrainingView>()) {}

TrainingModule::~TrainingModule() {
  for (auto& r : m_runs) {
    r->request(&Run::want_stop, true);
  }
  for (auto& r : m_runs)
    if (r->worker.joinable()) r->worker.join();
}

TrainingModule::Run* TrainingModule::find(int id) {
  for (auto& r : m_runs)
    if (r->id == id) return r.get();
  return nullptr;
}

void TrainingModule::refuse(const std::string& why) {
  ++m_event;
  m_error = why;
}

bool TrainingModule::handle(const Command& command, ModuleContext& ctx) {
  if (const auto* s = std::get_if<TrainStart>(&command)) {
    for (auto& r : m_runs)
      if (r->view && r->view->active()) {
        refuse("run '" + r->name + "' is training: pause or stop it first (one run trains at a time)");
        rebuild_view();
        ctx.mark_dirty();
        return true;
      }
    try {
      // Bad settings and a text that cannot be opened are refused here, with the message, before any
      // thread starts or any directory is made for the run.
      run_config(s->settings);
      check_gpus(s->settings);
      check_data_source(s->settings.data);
      auto run = std::make_unique<Run>();
      run->devices = m_devices;
      run->id = m_next_id++;
      run->settings = s->settings;
      std::string base = s->name;
      if (base.empty()) {
        base = s->settings.layer + "-" + (s->settings.mamba ? "m" : "t") + "-b" + std::to_string(s->settings.mini_batch) +
               "-lr" + std::to_string(s->settings.lr).substr(0, 6);
      }
      for (char& c : base)
        if (!(std::isalnum(static_cast<unsigned char>(c)) || c == '-' || c == '_' || c == '.')) c = '_';
      const fs::path root = s->settings.runs_dir.empty() ? fs::path("runs") : fs::path(s->settings.runs_dir);
      std::string name = base;
      for (int k = 2; fs::exists(root / name) || [&] {
             for (auto& r : m_runs)
               if (r->name == name) return true;
             return false;
           }();
           ++k)
        name = base + "-" + std::to_string(k);
      run->name = name;
      run->dir = root / name;
      run->root = root;
      run->root_existed = fs::exists(root);
      run->steps_total = s->settings.steps;
      Run* r = run.get();
      m_runs.push_back(std::move(run));
      r->worker = std::thread([r] { r->work(); });
      m_error.clear();  // the panel shows the last refusal until a run starts
    } catch (const std::exception& e) {
      refuse(std::string("Cannot start: ") + e.what());
    }
    rebuild_view();
    ctx.mark_dirty();
    return true;
  }
  if (const auto* c = std::get_if<TrainControl>(&command)) {
    Run* r = find(c->run);
    if (!r) return true;
    switch (c->op) {
      case TrainOp::Pause: r->request(&Run::want_pause, true); break;
      case TrainOp::Resume: {
        for (auto& o : m_runs)
          if (o.get() != r && o->view && o->view->active()) {
            refuse("run '" + o->name + "' is training: pause or stop it first (one run trains at a time)");
            rebuild_view();
            ctx.mark_dirty();
            return true;
          }
        r->request(&Run::want_pause, false);
        break;
      }
      case TrainOp::Stop:
        r->request(&Run::want_stop, true);
        {
          std::lock_guard lk(r->mu);
          if (r->state == RunState::Running || r->state == RunState::Paused || r->state == RunState::Starting) {
            r->state = RunState::Stopping;
            r->news = true;
          }
        }
        break;
      case TrainOp::Save: r->request(&Run::want_save, true); break;
      case TrainOp::Remove: {
        r->request(&Run::want_stop, true);
        if (r->worker.joinable()) r->worker.join();  // at most the rest of one step
        std::erase_if(m_runs, [&](const auto& x) { return x.get() == r; });
        break;
      }
    }
    rebuild_view();
    ctx.mark_dirty();
    return true;
  }
  if (const auto* o = std::get_if<TrainOpen>(&command)) {
    std::error_code ec;
    for (const auto& r : m_runs)
      if (!o->resume && fs::weakly_canonical(r->dir, ec) == fs::weakly_canonical(o->dir, ec)) return true;  // shown already
    try {
      const fs::path dir = o->dir;
      if (!fs::exists(dir / "metrics.jsonl") && !fs::exists(dir / "latest"))
        throw std::runtime_error("'" + dir.string() + "' is not a run directory (no metrics.jsonl, no latest)");
      if (o->resume)
        for (auto& x : m_runs)
          if (x->view && x->view->active())
            throw std::runtime_error("run '" + x->name + "' is training: pause or stop it first");
      auto run = std::make_unique<Run>();
      run->devices = m_devices;
      run->id = m_next_id++;
      run->dir = dir;
      run->name = fs::weakly_canonical(dir).filename().string();
      long up_to = -1;
      if (fs::exists(dir / "latest")) {
        const fs::path ck = resolve_checkpoint(dir);
        run->checkpoint = ck.string();
        if (fs::exists(dir / "train_config.json")) {
          const TrainConfig cfg =
              TrainConfig::from_json(read_file_text(dir / "train_config.json", 1 << 20), (dir / "train_config.json").string());
          run->settings = settings_of(cfg);
          run->steps_total = cfg.steps;
        }
        if (o->resume) {
          // The resumed curve continues from the checkpoint; later lines belong to the lost tail.
          const std::string tail = ck.filename().string();
          if (tail.rfind("step-", 0) == 0) up_to = std::stol(tail.substr(5));
        }
      } else if (o->resume) {
        throw std::runtime_error("'" + dir.string() + "' has no checkpoint to resume from");
      }
      std::vector<StepPoint> steps;
      read_metrics_points(dir / "metrics.jsonl", up_to, steps, run->evals);
      for (auto& p : steps) run->steps.push_back(p);
      run->steps_done = steps.empty() ? 0 : steps.back().step;
      if (!run->checkpoint.empty()) {
        try {
          auto m = load_model(dir);
          run->model_id = "file:" + fs::weakly_canonical(dir).string();
          const std::string tail = fs::path(run->checkpoint).filename().string();
          long step = -1;
          if (tail.rfind("step-", 0) == 0) {
            try {
              step = std::stol(tail.substr(5));
            } catch (const std::exception&) {
            }
          }
          m_library->put(run->model_id, "run " + run->name, dir.string(), std::move(m), true, step);
        } catch (const std::exception&) {
          // The curves are still worth showing without a loadable model.
        }
      }
      Run* r = run.get();
      m_runs.push_back(std::move(run));
      if (o->resume) {
        r->resume = true;
        r->want_pause = true;  // opened paused: the user presses Resume
        r->worker = std::thread([r] { r->work(); });
      } else {
        r->loaded_only = true;
        r->state = RunState::Loaded;
      }
    } catch (const std::exception& e) {
      refuse(std::string("Cannot open the run: ") + e.what());
    }
    rebuild_view();
    ctx.mark_dirty();
    return true;
  }
  return false;
}

bool TrainingModule::has_work(Clock::time_point) const {
  for (const auto& r : m_runs)
    if (r->news.load(std::memory_order_relaxed)) return true;
  return false;
}

std::optional<Clock::time_point> TrainingModule::next_wakeup() const {
  for (const auto& r : m_runs)
    if (r->worker.joinable() && r->view && r->view->state != RunState::Finished &&
        r->view->state != RunState::Stopped && r->view->state != RunState::Failed)
      return Clock::now() + std::chrono::milliseconds(40);
  return std::nullopt;
}

void TrainingModule::work(ModuleContext& ctx) {
  for (auto& r : m_runs) {
    if (!r->news.exchange(false)) continue;
    std::vector<StepPoint> steps;
    std::vector<EvalPoint> evals;
    std::vector<std::pair<long, fs::path>> saved;
    {
      std::lock_guard lk(r->mu);
      steps.swap(r->new_steps);
      evals.swap(r->new_evals);
      saved.swap(r->saved);
    }
    for (const auto& p : steps) {
      r->steps.push_back(p);
      if (p.tokens_per_s > 0) r->rate = r->rate > 0 ? 0.8 * r->rate + 0.2 * p.tokens_per_s : p.tokens_per_s;
    }
    r->evals.insert(r->evals.end(), evals.begin(), evals.end());
    for (const auto& [step, ck] : saved) {
      r->checkpoint = ck.string();
      try {
        auto m = load_model(ck);
        r->model_id = "file:" + fs::weakly_canonical(r->dir).string();
        m_library->put(r->model_id, "run " + r->name + " (step " + std::to_string(step) + ")", r->dir.string(),
                      std::move(m), true, step);
      } catch (const std::exception& e) {
        std::lock_guard lk(r->mu);
        r->message = std::string("checkpoint saved but could not be loaded: ") + e.what();
      }
    }
  }
  rebuild_view();
  ctx.mark_dirty();
}

void TrainingModule::rebuild_view() {
  auto v = std::make_shared<TrainingView>();
  v->event = m_event;
  v->error = m_error;
  for (auto& r : m_runs) {
    auto rv = std::make_shared<RunView>();
    rv->id = r->id;
    rv->name = r->name;
    rv->dir = r->dir.string();
    rv->settings = r->settings;
    {
      std::lock_guard lk(r->mu);
      rv->state = r->state;
      // The worker may have saved its last checkpoint and ended after work() took in the checkpoints:
      // the view says the run ended only once it lists that checkpoint (`news` brings the next work()).
      if (!r->saved.empty() && rv->state == RunState::Finished) rv->state = RunState::Running;
      if (!r->saved.empty() && rv->state == RunState::Stopped) rv->state = RunState::Stopping;
      rv->message = r->error.empty() ? r->message : r->error;
      rv->steps_done = r->steps_done;
      rv->steps_total = r->steps_total;
      rv->params = r->params;
      rv->model_summary = r->summary;
      rv->data_description = r->data_description;
      rv->device = r->device;
      rv->gpu_tokens_per_s = r->gpu_rates;
    }
    // A run opened from disk has no live rate: the mean of its last logged steps.
    if (r->rate == 0 && rv->steps && !rv->steps->empty()) {
      const std::size_t n = rv->steps->size(), k = std::min<std::size_t>(n, 20);
      double sum = 0;
      for (std::size_t i = n - k; i < n; ++i) sum += (*rv->steps)[i].tokens_per_s;
      rv->tokens_per_s = sum / static_cast<double>(k);
    } else {
      rv->tokens_per_s = r->rate;
    }
    const double tokens_left = static_cast<double>(std::max(0L, rv->steps_total - rv->steps_done)) *
                               r->settings.batch_size * r->settings.seq_len;
    rv->seconds_left = r->rate > 0 ? tokens_left / r->rate : 0.0;
    rv->checkpoint = r->checkpoint;
    rv->model_id = r->model_id;
    rv->steps = r->steps.publish();
    rv->evals = r->evals;
    r->view = rv;
    v->runs.push_back(std::move(rv));
  }
  m_view = std::move(v);
}

void TrainingModule::publish(Snapshot& snapshot) const { snapshot.training = m_view; }

}  // namespace tttlab::lab
