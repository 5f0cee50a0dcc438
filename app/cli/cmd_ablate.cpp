// `tttlab ablate`: the TTT paper's Table 1 in miniature. Trains every row of tttlab/train/ablation.hpp
// (linear attention → TTT equivalence → + learnable W0 → + LN and residual → + mini-batch b = 16 →
// + learnable η → + Mamba backbone) on the same preset, data, seed and budget, evaluates each on the
// whole validation text and prints the table of validation bits per byte.
#include <CLI/CLI.hpp>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <filesystem>

#include "cli/commands.hpp"
#include "tttlab/io/atomic_file.hpp"
#include "tttlab/io/json.hpp"
#include "tttlab/train/ablation.hpp"
#include "tttlab/train/trainer.hpp"

namespace tttlab::cli {
namespace fs = std::filesystem;
namespace {

struct AblateArgs {
  std::string preset = "tiny";
  std::string data = "brown";
  std::string data_dir = "data/brown";
  long steps = 300;
  int batch = 16;
  int seq_len = 256;
  double lr = 4e-3;
  std::uint64_t seed = 0;
  int threads = 0;
  int eval_windows = 0;
  std::string out;
  bool json = false;
};

void run(const AblateArgs& a) {
  ModelConfig base;
  try {
    base = ModelConfig::preset(a.preset);
  } catch (const std::invalid_argument& e) {
    throw CLI::ValidationError(e.what());
  }
  const auto rows = table1_rows(base, a.seq_len);
  Json results = Json::array();
  if (!a.json)
    std::printf("Table 1 in miniature: preset %s, %ld steps of %d x %d bytes, lr %g, seed %llu, data %s\n\n", a.preset.c_str(),
                a.steps, a.batch, a.seq_len, a.lr, static_cast<unsigned long long>(a.seed), a.data.c_str());
  std::vector<std::pair<std::string, EvalReport>> done;
  for (const auto& row : rows) {
    TrainConfig cfg;
    cfg.model = row.model;
    cfg.data = a.data;
    cfg.data_dir = a.data_dir;
    cfg.steps = a.steps;
    cfg.batch_size = a.batch;
    cfg.seq_len = a.seq_len;
    cfg.lr = a.lr;
    cfg.seed = a.seed;
    cfg.threads = a.threads;
    Trainer t(cfg, TextData::load(cfg));
    const auto t0 = std::chrono::steady_clock::now();
    double last = 0;
    while (!t.finished()) last = t.step().loss;
    const double secs = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    const EvalReport ev = t.evaluate(a.eval_windows);
    if (!a.out.empty()) t.save(fs::path(a.out) / row.name);
    Json j = Json::object();
    j["row"] = row.name;
    j["change"] = row.change;
    j["params"] = t.model().num_params();
    j["train_loss"] = last;
    j["val_loss"] = ev.loss;
    j["val_bpb"] = ev.bpb;
    j["seconds"] = secs;
    results.push_back(j);
    if (!a.json) {
      std::printf("  %-18s %-62s val %.4f bits/byte  (%ld params, %.0f s)\n", row.name.c_str(), row.change.c_str(),
                  ev.bpb, t.model().num_params(), secs);
      std::fflush(stdout);
    }
    done.emplace_back(row.name, ev);
  }
  if (!a.out.empty()) {
    fs::create_directories(a.out);
    write_file_atomic(fs::path(a.out) / "table1.json", results.dump(2) + "\n");
  }
  if (a.json) {
    std::printf("%s\n", results.dump(2).c_str());
  } else {
    std::printf("\n%-18s %12s %10s\n", "row", "val bpb", "change");
    for (size_t i = 0; i < done.size(); ++i)
      std::printf("%-18s %12.4f %+10.4f\n", done[i].first.c_str(), done[i].second.bpb,
                  i ? done[i].second.bpb - done[i - 1].second.bpb : 0.0);
  }
  set_exit_code(0);
}

}  // namespace

void register_ablate(CLI::App& app) {
  auto a = std::make_shared<AblateArgs>();
  auto* cmd = app.add_subcommand("ablate", "Train the rows of the TTT paper's Table 1 with equal budgets and print validation bits per byte");
  cmd->add_option("--preset", a->preset, "Model size of every row")->check(CLI::IsMember({"tiny", "small", "125m"}))->capture_default_str();
  cmd->add_option("--data", a->data, "brown or a UTF-8 text file")->capture_default_str();
  cmd->add_option("--data-dir", a->data_dir, "Where the prepared Brown corpus is")->capture_default_str();
  cmd->add_option("--steps", a->steps, "Optimiser steps per row")->check(CLI::Range(1L, 100000000L))->capture_default_str();
  cmd->add_option("--batch", a->batch, "Sequences per step")->check(CLI::Range(1, 100000))->capture_default_str();
  cmd->add_option("--seq-len", a->seq_len, "Sequence length T")->check(CLI::Range(2, 1 << 16))->capture_default_str();
  cmd->add_option("--lr", a->lr, "Peak learning rate")->check(CLI::Range(1e-9, 10.0))->capture_default_str();
  cmd->add_option("--seed", a->seed, "Seed (the same for every row)")->capture_default_str();
  cmd->add_option("--threads", a->threads, "Worker threads (0: all)")->check(CLI::Range(0, 1024));
  cmd->add_option("--eval-windows", a->eval_windows, "Validation windows (0: the whole validation text)")->check(CLI::Range(0, 1 << 30));
  cmd->add_option("--out", a->out, "Save each row's checkpoint and table1.json here");
  cmd->add_flag("--json", a->json, "Print JSON");
  cmd->callback([a] { run(*a); });
}

}  // namespace tttlab::cli
