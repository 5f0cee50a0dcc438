// `tttlab eval --checkpoint DIR [--data brown|FILE] [--split whole|val] [--device auto|cpu|cuda]
// [--per-byte FILE.csv] [--json]`: the loss, bits per byte, next-byte accuracy and the loss by token
// position (the paper's Fig. 2, right) of a trained model, on the CPU engine or the GPU training
// step's forward in its forward-only form (the same function; two blocks' activations taken in turn,
// so long windows fit; cli/train_device.hpp).
//
// What is scored: a text file given with --data is scored whole (every byte but the first, in
// windows of the model's T; tttlab/train/text_score.hpp says how the last bytes are windowed). The
// validation split, the part of a corpus held out from training, is scored with --split val, and is
// what the run's own data (no --data) and the Brown corpus give.
#include <CLI/CLI.hpp>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <filesystem>

#include "cli/checkpoint_option.hpp"
#include "cli/commands.hpp"
#include "cli/progress.hpp"
#include "cli/train_device.hpp"
#include "cli/validators.hpp"
#include "tttlab/data/batches.hpp"
#include "tttlab/data/text_file.hpp"
#include "tttlab/io/atomic_file.hpp"
#include "tttlab/io/json.hpp"
#include "tttlab/io/limits.hpp"
#include "tttlab/train/text_score.hpp"
#include "tttlab/train/trainer.hpp"

namespace tttlab::cli {
namespace fs = std::filesystem;
namespace {

struct EvalArgs {
  std::string checkpoint;
  std::string data;     // empty: the run's own data
  std::string split;    // whole | val; empty: whole for a file, val otherwise
  std::string data_dir = "data/brown";
  int seq_len = 0;      // 0: the run's
  int windows = 0;      // 0: all
  int threads = 0;
  DeviceOptions device{"auto", "fp32"};  // evaluation is cheap: full fp32 products, within ~1e-6 of the CPU
  std::string per_byte;
  bool json = false;
};

// A printable form of one byte for the per-byte CSV (quoted by the caller).
std::string byte_text(unsigned char c) {
  if (c == '"') return "\"\"";
  if (c >= 0x20 && c < 0x7F) return std::string(1, static_cast<char>(c));
  char buf[8];
  std::snprintf(buf, sizeof buf, "\\x%02X", c);
  return buf;
}

void write_per_byte_csv(const fs::path& path, std::span<const std::uint8_t> text, const TextScore& s) {
  std::string csv = "offset,byte,char,loss_nats,loss_bits\n";
  csv.reserve(csv.size() + s.per_byte.size() * 32);
  char line[96];
  for (std::size_t i = 0; i < s.per_byte.size(); ++i) {
    const unsigned char c = text[i + 1];
    std::snprintf(line, sizeof line, "%zu,%u,\"%s\",%.6f,%.6f\n", i + 1, static_cast<unsigned>(c), byte_text(c).c_str(),
                  double(s.per_byte[i]), double(s.per_byte[i]) / std::log(2.0));
    csv += line;
  }
  write_file_atomic(path, csv);
}

void run(const EvalArgs& a) {
  auto model = load_model(a.checkpoint);
  // Defaults from the run (its data and T) when the checkpoint sits in a run directory.
  TrainConfig cfg = checkpoint_score_config(*model, a.checkpoint);
  if (!a.data.empty()) cfg.data = a.data;
  cfg.data_dir = a.data_dir;
  if (a.seq_len > 0) cfg.seq_len = a.seq_len;
  const bool is_file = !a.data.empty() && a.data != "brown" && a.data.rfind("mqar", 0) != 0;
  const std::string split = !a.split.empty() ? a.split : (is_file ? "whole" : "val");
  if (split == "whole" && !is_file)
    throw CLI::ValidationError("--split whole scores a text file given with --data FILE; the run's data and the Brown "
                                "corpus are scored on their validation split (--split val)");
  if (!a.per_byte.empty() && split != "whole")
    throw CLI::ValidationError("--per-byte needs a text file scored whole (--data FILE)");
  if (!a.per_byte.empty()) check_output_file(a.per_byte);  // before the scoring, not after it
  cfg.threads = a.threads;
  TextData data;
  std::string note;
  if (split == "whole") {
    // The file itself is the text scored; the trainer (which evaluates) holds it as its data. A text
    // shorter than one window is scored as one window of its own length.
    data.train = load_text_file(a.data).bytes;
    data.description = a.data;
    note = fit_window_to_text(cfg, data.train.size(), "'" + a.data + "'");
  } else {
    data = TextData::load(cfg);
  }
  std::string device_note;
  TrainDeviceRequest request = a.device.request();
  refuse_gpu_without_kernels(request, model->config());  // before a GPU is looked for
  request.forward_only = true;  // nothing here trains: long windows then fit on the GPU
  const TrainBackendFactory backend = command_line_backend(request, device_note);
  const std::unique_ptr<Trainer> trainer = scoring_trainer(*model, cfg, std::move(data), backend);
  const Trainer& t = *trainer;
  const std::span<const std::uint8_t> text = split == "whole" ? std::span<const std::uint8_t>(t.data().train)
                                                              : std::span<const std::uint8_t>(t.data().val);
  if (!a.json)
    std::printf("checkpoint: %s (%s, %ld parameters)\ndevice: %s\n", printable(resolve_checkpoint(a.checkpoint).string()).c_str(),
                to_string(model->config().seq_layer).c_str(), model->num_params(), t.device_description().c_str());
  if (!a.json && !device_note.empty()) std::printf("  (%s)\n", device_note.c_str());
  if (!a.json && !note.empty()) std::printf("note: %s\n", note.c_str());
  std::fflush(stdout);

  TextScoreOptions so;
  so.per_byte = !a.per_byte.empty();
  so.max_windows = a.windows;
  ProgressLine progress("windows");
  so.progress = [&](std::int64_t done, std::int64_t total) { progress.update(done, total); };
  // Wall time of the scoring alone (the model was loaded and, on a GPU, uploaded before): one run.
  const auto t0 = std::chrono::steady_clock::now();
  const TextScore r = score_text(t, text, so);
  const double score_s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  progress.finish();
  if (!std::isfinite(r.loss))
    refuse_non_finite_model(a.checkpoint);
  if (!a.per_byte.empty()) write_per_byte_csv(a.per_byte, text, r);

  const std::string what = split == "whole" ? "the whole file " + a.data : t.data().description + ", validation split";
  if (a.json) {
    Json j = Json::object();
    j["checkpoint"] = resolve_checkpoint(a.checkpoint).string();
    j["data"] = split == "whole" ? a.data : t.data().description;
    j["split"] = split;
    j["seq_len"] = cfg.seq_len;
    j["device"] = t.device_description();
    j["bytes"] = r.bytes;
    j["val_loss"] = r.loss;
    j["val_bpb"] = r.bpb;
    j["val_accuracy"] = r.accuracy;
    j["targets"] = r.targets;
    j["full_windows"] = r.full_windows;
    j["tail_targets"] = r.tail_targets;
    j["score_seconds"] = score_s;  // one run, wall time, model loading excluded
    Json pos = Json::array();
    for (double v : r.loss_by_position) pos.push_back(v);
    j["loss_by_position"] = pos;
    if (!a.per_byte.empty()) j["per_byte"] = a.per_byte;
    std::printf("%s\n", j.dump(1).c_str());
  } else {
    const std::string which = a.windows > 0 && r.targets < r.bytes - 1
                                  ? "the first " + std::to_string(r.full_windows) + " windows"
                                  : std::string("every byte after the first");
    std::printf("data: %s: scored %ld of its %ld bytes (%s), windows of %d bytes\n", printable(what).c_str(), r.targets, r.bytes,
                which.c_str(), cfg.seq_len);
    std::printf("%s %.4f nats/byte = %.4f bits/byte, next-byte accuracy %.1f%%, over %ld bytes\n",
                split == "whole" ? "loss" : "validation loss", r.loss, r.bpb, 100 * r.accuracy, r.targets);
    if (!a.per_byte.empty()) std::printf("per-byte losses: %s\n", printable(a.per_byte).c_str());
    if (!r.loss_by_position.empty()) {
      std::printf("\nloss by token position (bits/byte, mean over %ld windows):\n", r.full_windows);
      const int T = cfg.seq_len, buckets = std::min(16, T);
      for (int k = 0; k < buckets; ++k) {
        const int lo = T * k / buckets, hi = T * (k + 1) / buckets;
        double s = 0;
        for (int i = lo; i < hi; ++i) s += r.loss_by_position[i];
        const double bpb = s / (hi - lo) / std::log(2.0);
        std::printf("  positions %5d-%-5d %7.3f  %s\n", lo, hi - 1, bpb, std::string(int(bpb * 8), '#').c_str());
      }
    }
  }
  set_exit_code(0);
}

}  // namespace

void register_eval(CLI::App& app) {
  auto a = std::make_shared<EvalArgs>();
  auto* cmd = app.add_subcommand(
      "eval",
      "Evaluate a checkpoint: loss, bits per byte, next-byte accuracy and loss by position. A text file given with "
      "--data is scored whole; the run's own data and Brown are scored on their validation split.");
  add_checkpoint_option(cmd, a->checkpoint)->required();
  cmd->add_option("--data", a->data, "brown or a UTF-8 text file (default: the run's data)")->check(non_empty_path());
  cmd->add_option("--split", a->split,
                  "whole: every byte of the --data file (the default for a file); val: only the validation split "
                  "that training holds out (the last part of the text; the default for the run's data and brown)")
      ->check(CLI::IsMember({"whole", "val"}));
  cmd->add_option("--data-dir", a->data_dir, "Where the prepared Brown corpus is")->check(non_empty_path())->capture_default_str();
  cmd->add_option("--seq-len", a->seq_len,
                  "Window length T (default: the length the model was trained at). Each window restarts the model's "
                  "state, so a byte sees at most T bytes of context: for long-context models evaluate at their "
                  "training length (e.g. 2048), and compare a longer T to see whether a model uses context beyond it")
      ->check(CLI::Range(2, 1 << 20));
  cmd->add_option("--windows", a->windows, "Score only the first N full windows (0: all, and the bytes after them)")
      ->check(CLI::Range(0, 1 << 30));
  cmd->add_option("--per-byte", a->per_byte,
                  "Write every scored byte's loss to this CSV file (offset, byte, char, loss_nats, loss_bits)")->check(non_empty_path());
  cmd->add_option("--threads", a->threads, "Worker threads (0: all)")->check(CLI::Range(0, 1024));
  a->device.add_to(cmd, "auto (a GPU when present and it can run the model, else the CPU), cpu, or cuda",
                   "GPU matrix products, the TTT inner loops' forwards included: fp32, or tf32 (tensor cores, ~1e-3 relative)");
  cmd->add_flag("--json", a->json, "Print JSON (with the full loss-by-position curve)");
  cmd->callback([a] { run(*a); });
}

}  // namespace tttlab::cli
