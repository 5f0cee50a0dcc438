// `tttlab eval --checkpoint DIR [--data brown|FILE] [--device auto|cpu|cuda] [--json]`: validation
// loss, bits per byte and the loss by token position (the paper's Fig. 2, right) of a trained model,
// on the CPU engine or the GPU training step's evaluation (the same function; cli/train_device.hpp).
#include <CLI/CLI.hpp>
#include <cmath>
#include <cstdio>
#include <filesystem>

#include "cli/commands.hpp"
#include "cli/train_device.hpp"
#include "tttlab/data/batches.hpp"
#include "tttlab/io/atomic_file.hpp"
#include "tttlab/io/json.hpp"
#include "tttlab/train/trainer.hpp"

namespace tttlab::cli {
namespace fs = std::filesystem;
namespace {

struct EvalArgs {
  std::string checkpoint;
  std::string data;     // empty: the run's own data
  std::string data_dir = "data/brown";
  int seq_len = 0;      // 0: the run's
  int windows = 0;      // 0: all
  int threads = 0;
  std::string device = "auto";
  std::string gpu_gemm = "fp32";  // evaluation is cheap: full fp32 products, within ~1e-6 of the CPU
  bool json = false;
};

void run(const EvalArgs& a) {
  auto model = load_model(a.checkpoint);
  // Defaults from the run (its data and T) when the checkpoint sits in a run directory.
  TrainConfig cfg;
  cfg.model = model->config();
  cfg.seq_len = model->config().max_position_embeddings;
  for (const fs::path& p : {fs::path(a.checkpoint) / "train_config.json", fs::path(a.checkpoint).parent_path() / "train_config.json"})
    if (fs::exists(p)) {
      cfg = TrainConfig::from_json(read_file_text(p, 1 << 20), p.string());
      break;
    }
  if (!a.data.empty()) cfg.data = a.data;
  cfg.data_dir = a.data_dir;
  if (a.seq_len > 0) cfg.seq_len = a.seq_len;
  cfg.model = model->config();
  cfg.threads = a.threads;
  cfg.steps = 1;
  cfg.lr = 1e-3;
  std::string device_note;
  const TrainBackendFactory backend = command_line_backend(a.device, a.gpu_gemm, device_note);
  Trainer t(cfg, TextData::load(cfg), backend);
  // The trainer holds a freshly initialised model: give it the checkpoint's weights (and the backend).
  t.model().for_each_param([&](Eigen::Map<Mat<float>> dst, const std::string& name) {
    model->for_each_param([&](Eigen::Map<Mat<float>> src, const std::string& n) {
      if (n == name) dst = src;
    });
  });
  t.sync_from_host();
  const EvalReport r = t.evaluate(a.windows);
  if (a.json) {
    Json j = Json::object();
    j["checkpoint"] = resolve_checkpoint(a.checkpoint).string();
    j["data"] = t.data().description;
    j["seq_len"] = cfg.seq_len;
    j["device"] = t.device_description();
    j["val_loss"] = r.loss;
    j["val_bpb"] = r.bpb;
    j["targets"] = r.targets;
    Json pos = Json::array();
    for (double v : r.loss_by_position) pos.push_back(v);
    j["loss_by_position"] = pos;
    std::printf("%s\n", j.dump(1).c_str());
  } else {
    std::printf("checkpoint: %s (%s, %ld parameters)\n", resolve_checkpoint(a.checkpoint).string().c_str(),
                to_string(model->config().seq_layer).c_str(), model->num_params());
    std::printf("data: %s, windows of %d bytes\n", t.data().description.c_str(), cfg.seq_len);
    std::printf("device: %s\n", t.device_description().c_str());
    if (!device_note.empty()) std::printf("  (%s)\n", device_note.c_str());
    std::printf("validation loss %.4f nats/byte = %.4f bits/byte over %ld bytes\n\n", r.loss, r.bpb, r.targets);
    std::printf("loss by token position (bits/byte, mean over windows):\n");
    const int T = cfg.seq_len, buckets = std::min(16, T);
    for (int k = 0; k < buckets; ++k) {
      const int lo = T * k / buckets, hi = T * (k + 1) / buckets;
      double s = 0;
      for (int i = lo; i < hi; ++i) s += r.loss_by_position[i];
      const double bpb = s / (hi - lo) / std::log(2.0);
      std::printf("  positions %5d-%-5d %7.3f  %s\n", lo, hi - 1, bpb, std::string(int(bpb * 8), '#').c_str());
    }
  }
  set_exit_code(0);
}

}  // namespace

void register_eval(CLI::App& app) {
  auto a = std::make_shared<EvalArgs>();
  auto* cmd = app.add_subcommand("eval", "Evaluate a checkpoint: validation loss, bits per byte, loss by position");
  cmd->add_option("--checkpoint", a->checkpoint, "A run directory or a checkpoint directory")->required();
  cmd->add_option("--data", a->data, "brown or a UTF-8 text file (default: the run's data)");
  cmd->add_option("--data-dir", a->data_dir, "Where the prepared Brown corpus is")->capture_default_str();
  cmd->add_option("--seq-len", a->seq_len, "Window length (default: the run's)")->check(CLI::Range(2, 1 << 20));
  cmd->add_option("--windows", a->windows, "Evaluate only the first N windows (0: all)")->check(CLI::Range(0, 1 << 30));
  cmd->add_option("--threads", a->threads, "Worker threads (0: all)")->check(CLI::Range(0, 1024));
  cmd->add_option("--device", a->device, "auto (a GPU when present and it can run the model, else the CPU), cpu, or cuda")
      ->check(CLI::IsMember({"auto", "cpu", "cuda"}))->capture_default_str();
  cmd->add_option("--gpu-gemm", a->gpu_gemm, "GPU matrix products, the TTT-Linear inner forward included: fp32, or tf32 (tensor cores, ~1e-3 relative)")
      ->check(CLI::IsMember({"tf32", "fp32"}))->capture_default_str();
  cmd->add_flag("--json", a->json, "Print JSON (with the full loss-by-position curve)");
  cmd->callback([a] { run(*a); });
}

}  // namespace tttlab::cli
