// `tttlab train`: train a byte-level model on the CPU or a GPU (see tttlab/train/trainer.hpp).
//
//   tttlab train --preset tiny --layer ttt-linear --backbone m --data brown --steps 2000 --out runs/tiny
//   tttlab train --preset small --device cuda --out runs/small
//   tttlab train --resume runs/tiny
//
// --device auto (the default) trains on the GPU when one is present and the build has the CUDA
// kernels and the GPU can train the model (TTT-Linear), else on the CPU; the program prints which.
// Checkpoints are the same on both, so a run may resume on the other device.
//
// The run itself is a tttlab::TrainingSession (tttlab/train/session.hpp: the run directory, the
// metrics it writes, the evaluation and checkpoint cadence); this file parses the flags and prints.
// Prints a progress line (loss, tokens/s, time left) and the evaluations. Ctrl-C finishes the current
// step, saves a checkpoint and exits with status 0; --resume continues the same loss curve exactly.
#include <CLI/CLI.hpp>
#include <unistd.h>

#include <atomic>
#include <cmath>
#include <csignal>
#include <cstdio>
#include <deque>
#include <filesystem>
#include <numeric>
#include <string>

#include "cli/commands.hpp"
#include "cli/model_options.hpp"
#include "cli/progress.hpp"
#include "cli/train_device.hpp"
#include "cli/validators.hpp"
#include "tttlab/io/limits.hpp"
#include "tttlab/train/session.hpp"

namespace tttlab::cli {
namespace fs = std::filesystem;
namespace {

std::atomic<bool> g_interrupted{false};
extern "C" void on_sigint(int) { g_interrupted.store(true); }

struct TrainArgs {
  ModelOptions model;
  RunSettings run;  // the flags bind straight into it; TrainConfig's defaults except seq_len
  std::string out;
  std::string resume;
  DeviceOptions device;
  std::string precision = "fp32";
  std::string gpus;  // empty: one device; "N" or "all": data-parallel (train/data_parallel.hpp)
  int keep_checkpoints = 2;  // the newest checkpoints kept in the run directory (0: all)
};

void run(const TrainArgs& a, CLI::App* cmd) {
  std::unique_ptr<TrainingSession> session;
  fs::path out;
  std::string device_note;
  // --gpus: data-parallel over several GPUs, in one process or as one process of a launcher's job.
  JobEnvironment job;
  TrainBackendFactory backend;
  // --precision bf16: the GPU's matrix products take bf16 operands (kernels/gemm.hpp, Bf16); all else
  // stays fp32, checkpoints included.
  TrainDeviceRequest request = a.device.request();
  if (a.precision == "bf16") {
    if (cmd->count("--gpu-gemm"))
      throw CLI::ValidationError("--precision bf16 sets the GPU's matrix products to bf16; leave out --gpu-gemm");
    if (request.device == DeviceRequest::CPU)
      throw CLI::ValidationError("--precision bf16 trains on a GPU; the CPU engine computes in fp32 (leave out --precision)");
    request.precision = GpuGemmPrecision::Bf16;
  }
  // A layer without GPU kernels stops here under --device cuda or --gpus, before a GPU is looked for
  // or the model is built (a resumed run's layer is checked when its checkpoint is read).
  if (a.resume.empty() && (request.device == DeviceRequest::CUDA || !a.gpus.empty())) {
    TrainDeviceRequest asked = request;
    if (!a.gpus.empty()) asked.gpus = -1;
    refuse_gpu_without_kernels(asked, a.model.build(cmd));
  }
  if (!a.gpus.empty()) {
    try {
      job = job_from_environment();
      request.gpus = parse_gpu_count(a.gpus);
      backend = data_parallel_backend_for(request, job, device_note);
    } catch (const std::invalid_argument& e) {
      throw CLI::ValidationError(e.what());
    }
  } else {
    backend = command_line_backend(request, device_note);
  }
  if (!backend && a.precision == "bf16")
    throw CLI::ValidationError("--precision bf16 trains on a GPU, and this run would train on the CPU" +
                               (device_note.empty() ? std::string() : " (" + device_note + ")") +
                               "; the CPU engine computes in fp32 (leave out --precision)");
  // Only the job's first process writes the run directory; the others compute and stay quiet.
  SessionOptions session_options;
  session_options.writes_files = job.process_rank == 0;
  session_options.keep_checkpoints = static_cast<std::size_t>(a.keep_checkpoints);
  const bool speaks = job.process_rank == 0;
  if (!a.resume.empty()) {
    for (const char* opt : {"--preset", "--layer", "--steps", "--data", "--batch", "--seq-len", "--lr", "--seed",
                            "--max-bad-steps", "--on-diverge", "--max-rollbacks", "--rollback-lr-factor"})
      if (cmd->count(opt))
        throw CLI::ValidationError(std::string(opt) + " cannot be changed when resuming (the run's saved settings apply)");
    out = a.out.empty() ? fs::path(a.resume) : fs::path(a.out);
    if (!a.out.empty() && fs::weakly_canonical(a.out) != fs::weakly_canonical(a.resume))
      throw CLI::ValidationError("--out must be the run directory itself when resuming (or left out)");
    session = TrainingSession::resume(a.resume, backend, session_options);
    if (speaks) std::printf("resumed %s at step %ld of %ld\n", printable(a.resume).c_str(), session->trainer().steps_done(),
                session->trainer().config().steps);
  } else {
    if (a.out.empty()) throw CLI::ValidationError("--out DIR is required (where checkpoints and metrics go)");
    out = a.out;
    if (speaks && fs::exists(out / "latest"))
      throw std::runtime_error("'" + out.string() + "' already holds a run; use --resume " + out.string() +
                               " to continue it, or choose another --out");
    TrainConfig cfg;
    try {
      cfg = train_config(a.model.build(cmd), a.run);
    } catch (const std::invalid_argument& e) {
      throw CLI::ValidationError(e.what());
    }
    session = TrainingSession::create(out, cfg, TextData::load(cfg), backend, session_options);
  }
  // A rollback (session.hpp) replaces the session's trainer: read it through the session each time.
  const auto trainer = [&session]() -> Trainer& { return session->trainer(); };
  const TrainConfig cfg = trainer().config();
  const long params = trainer().model().num_params();
  const double flops_per_token = trainer().step_flops() / (double(cfg.batch_size) * cfg.seq_len);
  if (speaks) {
    std::printf("model: %s, %s backbone, %ld parameters (D=%d, L=%d, H=%d, b=%d)\n", to_string(cfg.model.seq_layer).c_str(),
                cfg.model.mamba_backbone ? "Mamba (m)" : "Transformer (t)", params, cfg.model.hidden_size,
                cfg.model.num_hidden_layers, cfg.model.num_attention_heads, cfg.model.mini_batch_size);
    std::printf("data: %s: %zu train bytes, %zu validation bytes\n", printable(trainer().data().description).c_str(),
                trainer().data().train.size(), trainer().data().val.size());
    std::printf("training: %ld steps of %d x %d bytes, peak lr %g, %.2f MFLOP per token (training, inner loop included)\n",
                cfg.steps, cfg.batch_size, cfg.seq_len, cfg.lr, flops_per_token / 1e6);
    std::printf("device: %s\n", trainer().device_description().c_str());
    if (!device_note.empty()) std::printf("  (%s)\n", device_note.c_str());
    std::printf("output: %s (metrics.jsonl, checkpoints); Ctrl-C saves and stops\n", printable(out.string()).c_str());
  } else {
    std::printf("process %d of %d (%s): %s; process 0 writes %s and prints the progress\n", job.process_rank,
                job.processes, job.source.c_str(), trainer().device_description().c_str(), printable(out.string()).c_str());
  }
  std::fflush(stdout);

  g_interrupted = false;
  auto previous = std::signal(SIGINT, on_sigint);
  const bool tty = speaks && isatty(STDOUT_FILENO);
  // The training loss on the progress line: the mean over the last k_recent steps' batches (one
  // batch alone is noisy; a long average lags far behind while the loss falls fast).
  constexpr std::size_t k_recent = 10;
  std::deque<double> recent;
  double tokens = 0, seconds = 0;
  const auto t_start = std::chrono::steady_clock::now();
  auto elapsed = [&] { return std::chrono::duration<double>(std::chrono::steady_clock::now() - t_start).count(); };
  SessionHooks hooks;
  // Every process of a job stops at the same step: any one's Ctrl-C stops them all (any_rank is a
  // collective of the job; with one process it is the flag itself).
  hooks.between_steps = [&] {
    return trainer().any_rank(g_interrupted.load()) ? SessionControl::Stop : SessionControl::Continue;
  };
  hooks.on_eval = [&](const EvalReport& ev, bool final) {
    if (!speaks) return;
    if (final && tty) std::printf("\n");  // keep the last progress line
    if (trainer().data().synthetic.empty())
      std::printf("%sstep %ld: validation loss %.4f nats/byte, %.4f bits/byte, next-byte accuracy %.1f%% (%ld bytes)\n",
                  tty ? "\r\33[2K" : "", ev.step, ev.loss, ev.bpb, 100 * ev.accuracy, ev.targets);
    else
      std::printf("%sstep %ld: validation loss %.4f nats on the scored answers, accuracy %.1f%% (%ld answers)\n",
                  tty ? "\r\33[2K" : "", ev.step, ev.loss, 100 * ev.accuracy, ev.targets);
    std::fflush(stdout);
  };
  hooks.on_event = [&](long step, const std::string& kind, const std::string& message) {
    if (kind == "diverged" || !speaks) return;  // the error message says it
    std::printf("%sstep %ld: %s\n", tty ? "\r\33[2K" : "", step, printable(message).c_str());
    if (kind == "rollback") recent.clear();
    std::fflush(stdout);
  };
  long last_print = 0;
  // Per GPU of a data-parallel run: its tokens and seconds so far (its own share of every step).
  std::vector<double> gpu_tokens, gpu_seconds;
  hooks.on_step = [&](const StepReport& r, double, double) {
    tokens += double(r.tokens);
    seconds += r.seconds;
    if (gpu_tokens.size() < r.ranks.size()) {
      gpu_tokens.resize(r.ranks.size(), 0.0);
      gpu_seconds.resize(r.ranks.size(), 0.0);
    }
    for (std::size_t i = 0; i < r.ranks.size(); ++i) {
      gpu_tokens[i] += double(r.ranks[i].tokens);
      gpu_seconds[i] += r.ranks[i].seconds;
    }
    if (!speaks) return;
    if (!r.skipped) {
      recent.push_back(r.loss);
      if (recent.size() > k_recent) recent.pop_front();
    }
    const double train_loss = recent.empty() ? NAN : std::accumulate(recent.begin(), recent.end(), 0.0) / double(recent.size());
    const double rate = seconds > 0 ? tokens / seconds : 0.0;
    const double left = rate > 0 ? double(cfg.steps - trainer().steps_done()) * cfg.batch_size * cfg.seq_len / rate : NAN;
    if (tty || trainer().steps_done() - last_print >= std::max<long>(1, cfg.steps / 20) || trainer().finished()) {
      const int width = 24;
      const int filled = int(width * double(trainer().steps_done()) / double(cfg.steps));
      std::string bar(filled, '#');
      bar += std::string(width - filled, '.');
      std::printf("%s[%s] step %ld/%ld  train loss (last %zu steps) %.4f nats = %.3f bits/byte  %.0f tokens/s  "
                  "%.1f GFLOP/s  lr %.2e  grad norm %.2f  time left %s%s",
                  tty ? "\r\33[2K" : "", bar.c_str(), trainer().steps_done(), cfg.steps, recent.size(), train_loss,
                  train_loss / std::log(2.0), rate,
                  rate * flops_per_token / 1e9, r.lr, r.grad_norm, format_duration(left).c_str(),
                  tty || gpu_tokens.size() > 1 ? "" : "\n");
      if (gpu_tokens.size() > 1) {  // this process's GPUs, each at its own rate
        std::printf("  per GPU (tokens/s):");
        for (std::size_t i = 0; i < gpu_tokens.size(); ++i)
          std::printf(" %.0f", gpu_seconds[i] > 0 ? gpu_tokens[i] / gpu_seconds[i] : 0.0);
        std::printf("%s", tty ? "" : "\n");
      }
      std::fflush(stdout);
      last_print = trainer().steps_done();
    }
  };
  TrainingSession::Outcome outcome;
  try {
    outcome = session->run(hooks);
  } catch (const std::exception&) {
    if (tty) std::printf("\n");
    // The run directory keeps its last checkpoint: say where the run can go on from.
    if (speaks && session->checkpoint_step() >= 0)
      std::fprintf(stderr, "tttlab train: the run directory keeps its checkpoint of step %ld; continue with "
                   "`tttlab train --resume %s`%s\n", session->checkpoint_step(), out.string().c_str(),
                   a.gpus.empty() ? "" : " (on any number of GPUs)");
    std::fflush(stdout);
    throw;
  }
  std::signal(SIGINT, previous);
  if (!speaks) {
    std::printf("process %d: %s at step %ld\n", job.process_rank,
                outcome == TrainingSession::Outcome::Stopped ? "stopped" : "done", trainer().steps_done());
    set_exit_code(0);
    return;
  }
  if (outcome == TrainingSession::Outcome::Stopped) {
    if (tty) std::printf("\n");
    std::printf("interrupted at step %ld: checkpoint saved; continue with `tttlab train --resume %s`\n",
                trainer().steps_done(), printable(out.string()).c_str());
    set_exit_code(0);
    return;
  }
  std::printf("done: %ld steps in %s, %.0f tokens/s; checkpoint %s\n", trainer().steps_done(),
              format_duration(elapsed()).c_str(), seconds > 0 ? tokens / seconds : 0.0, printable(resolve_checkpoint(out).string()).c_str());
  set_exit_code(0);
}

}  // namespace

void register_train(CLI::App& app) {
  auto a = std::make_shared<TrainArgs>();
  a->run.seq_len = 0;  // the preset's max_position_embeddings (train_config())
  auto* cmd = app.add_subcommand("train", "Train a byte-level language model on the CPU or a GPU (TTT or a baseline)");
  a->model.add_to(cmd);
  cmd->add_option("--data", a->run.data, "brown (the prepared Brown corpus), mqar or copy (synthetic recall tasks), or a UTF-8 text file (its last 5% validates)")->check(non_empty_path())->capture_default_str();
  cmd->add_option("--data-dir", a->run.data_dir, "Where the prepared Brown corpus is")->check(non_empty_path())->capture_default_str();
  cmd->add_option("--steps", a->run.steps, "Optimiser steps")->check(CLI::Range(1L, 1000000000L))->capture_default_str();
  cmd->add_option("--batch", a->run.batch_size, "Sequences per step")->check(CLI::Range(1, 100000))->capture_default_str();
  cmd->add_option("--seq-len", a->run.seq_len, "Sequence length T (default: the preset's)")->check(CLI::Range(2, 1 << 20));
  cmd->add_option("--lr", a->run.lr, "Peak learning rate (linear warmup, cosine decay to 1e-5)")->check(finite_range(1e-9, 10.0))->capture_default_str();
  cmd->add_option("--warmup", a->run.warmup_fraction, "Warmup share of the steps")->check(finite_range(0.0, 0.99))->capture_default_str();
  cmd->add_option("--seed", a->run.seed, "Seed of the initialisation and the batches")->check(seed_value())->capture_default_str();
  cmd->add_option("--threads", a->run.threads, "Worker threads (0: all hardware threads); results are deterministic per thread count")
      ->check(CLI::Range(0, 1024));
  cmd->add_option("--checkpoint-every", a->run.checkpoint_every, "Save every N steps (and always at the end)")->check(CLI::Range(0L, 1000000000L));
  cmd->add_option("--keep-checkpoints", a->keep_checkpoints,
                  "Keep the N newest checkpoints in the run directory (0: keep every one, e.g. to follow the "
                  "run again later)")
      ->check(CLI::Range(0, 1000000))
      ->capture_default_str();
  cmd->add_option("--eval-every", a->run.eval_every, "Validate every N steps (and always at the end)")->check(CLI::Range(0L, 1000000000L));
  cmd->add_option("--eval-windows", a->run.eval_windows, "Validation windows of T bytes (0: the whole validation text)")->check(CLI::Range(0, 1 << 30))->capture_default_str();
  cmd->add_option("--out", a->out, "Run directory (checkpoints, metrics.jsonl)")->check(non_empty_path());
  cmd->add_option("--resume", a->resume, "Continue the run in this directory from its latest checkpoint")->check(non_empty_path());
  cmd->add_option("--gpus", a->gpus,
                  "Data-parallel training on N GPUs of this machine (or 'all'): each GPU computes its share of "
                  "every batch, gradients are summed through NCCL, every GPU applies the same update. Under a "
                  "launcher (torchrun's, Open MPI's or TTTLAB_* variables), this process's GPUs of a larger job. "
                  "A run resumes on any number of GPUs");
  a->device.add_to(cmd,
                   "auto (a GPU when present and it can train the model, else the CPU), cpu, or cuda (an error "
                   "without a GPU); a run may resume on another device",
                   "GPU matrix products, the TTT inner loops included (TTT-Linear forward, TTT-MLP forward and "
                   "backward): tf32 (tensor cores, ~1e-3 relative) or fp32");
  cmd->add_option("--precision", a->precision,
                  "fp32: every value in fp32 (the GPU's matrix products as --gpu-gemm says); bf16: mixed precision "
                  "on the GPU, the matrix products with bf16 operands and fp32 accumulation, the weights, optimiser "
                  "state, checkpoints and activations still fp32 except the SwiGLU's pre-activations (GPU only)")
      ->check(CLI::IsMember({"fp32", "bf16"}))->capture_default_str();
  cmd->add_option("--max-bad-steps", a->run.max_bad_steps,
                  "A step with a non-finite loss or gradient is skipped; after this many in a row the run has diverged")
      ->check(CLI::Range(1, 1000000))->capture_default_str();
  cmd->add_option("--on-diverge", a->run.on_diverge,
                  "rollback: reopen the last checkpoint (or step 0) with the learning rate lowered, and go on; "
                  "stop: stop with an error naming the step. Either way no diverged checkpoint is written")
      ->check(CLI::IsMember({"rollback", "stop"}))->capture_default_str();
  cmd->add_option("--max-rollbacks", a->run.max_rollbacks, "Rollbacks before the run stops as diverged")
      ->check(CLI::Range(0, 1000))->capture_default_str();
  cmd->add_option("--rollback-lr-factor", a->run.rollback_lr_factor, "Each rollback multiplies the learning rate by this")
      ->check(finite_range(0.01, 0.99))->capture_default_str();
  cmd->callback([a, cmd] { run(*a, cmd); });
}

}  // namespace tttlab::cli
