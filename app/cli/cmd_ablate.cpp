// `tttlab ablate`: the TTT paper's Table 1 in miniature. Trains every row of tttlab/train/ablation.hpp
// (linear attention → TTT equivalence → + learnable W0 → + LN and residual → + mini-batch b = 16 →
// + learnable η → + Mamba backbone, then the diagnostic row 5a and the Mamba-2 row M2; --rows picks
// some of them) on the same preset, data and budget, for --seeds N seeds each, evaluates each run on
// the whole validation text and prints the table of validation bits per byte (mean ± sd over the
// seeds), each row's definition beside its result.
//
// --device auto trains each row on the GPU where the GPU training step supports it and on the CPU
// otherwise (rows without RoPE or post-norm, b > 64: cuda_train_unsupported); the table says which
// device ran each row. --device cuda fails at the first row the GPU cannot train.
#include <CLI/CLI.hpp>
#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <filesystem>
#include <map>
#include <set>

#include "cli/commands.hpp"
#include "cli/progress.hpp"
#include "cli/train_device.hpp"
#include "cli/validators.hpp"
#include "tttlab/io/atomic_file.hpp"
#include "tttlab/io/json.hpp"
#include "tttlab/io/limits.hpp"
#include "tttlab/train/ablation.hpp"
#include "tttlab/train/trainer.hpp"

namespace tttlab::cli {
namespace fs = std::filesystem;
namespace {

struct AblateArgs {
  std::string preset = "tiny";
  RunSettings run;  // every row's; TrainConfig's defaults but for steps and lr, set in register_ablate
  int seeds = 1;
  int eval_windows = 0;  // the evaluation at the end of each run
  DeviceOptions device;
  std::string out;
  bool json = false;
  bool plan = false;
  std::vector<std::string> rows;  // ids to train; empty: every row
};

struct MeanSd {
  double mean = 0;
  double sd = 0;  // sample standard deviation (n − 1); NaN for one value
};

MeanSd mean_sd(const std::vector<double>& v) {
  MeanSd r;
  for (double x : v) r.mean += x;
  r.mean /= double(v.size());
  if (v.size() < 2) {
    r.sd = std::nan("");
    return r;
  }
  double ss = 0;
  for (double x : v) ss += (x - r.mean) * (x - r.mean);
  r.sd = std::sqrt(ss / double(v.size() - 1));
  return r;
}

Json number_or_null(double x) { return std::isfinite(x) ? Json(x) : Json(nullptr); }

// The rows for --help: names, changes and settings (b written T, since T is a flag).
std::string rows_help() {
  std::string s = "Rows (1-7: the paper's chain, one change per row; outside it, 5a: a diagnostic, M2: Mamba-2).\nSettings as for\n"
                  "--preset tiny (d = 32); the inner rate is lambda = eta_base/d (fixed) or eta_base*sigmoid(.)/d (learned):\n";
  for (const auto& r : table1_rows(ModelConfig::preset("tiny"), 256))
    s += "  " + r.id + std::string(r.id.size() < 3 ? 3 - r.id.size() : 0, ' ') + r.name + ": " + r.change + "\n      " +
         ablation_settings(r.model) + "\n";
  return s;
}

TrainConfig row_config(const AblateArgs& a, const AblationRow& row, std::uint64_t seed) {
  RunSettings run = a.run;
  run.seed = seed;
  return train_config(row.model, run);
}

// --plan: each row's definition and how long it would take here, from a few timed training steps
// (after one untimed step that warms the caches), without training any row to the end.
void print_plan(const AblateArgs& a, const std::vector<AblationRow>& rows, const TrainBackendFactory& backend,
                std::string& device_note) {
  constexpr int k_timed_steps = 2;
  std::printf("Table 1 in miniature, the plan: preset %s, %ld steps of %d x %d bytes, %d seed(s) per row.\n"
              "Time per row on this machine, estimated from %d timed training steps per row:\n\n",
              a.preset.c_str(), a.run.steps, a.run.batch_size, a.run.seq_len, a.seeds, k_timed_steps);
  double total = 0;
  for (const auto& row : rows) {
    device_note.clear();
    Trainer t(row_config(a, row, a.run.seed), TextData::load(row_config(a, row, a.run.seed)), backend);
    t.step();
    const auto t0 = std::chrono::steady_clock::now();
    for (int i = 0; i < k_timed_steps; ++i) t.step();
    const double per_step = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count() / k_timed_steps;
    const double row_seconds = per_step * double(a.run.steps) * a.seeds;
    total += row_seconds;
    std::printf("  %-3s %-18s %-4s %8.3f s/step  about %s for the row\n      %s: %s\n", row.id.c_str(),
                row.name.c_str(), to_string(t.device_kind()), per_step, format_duration(row_seconds).c_str(),
                row.change.c_str(), ablation_settings(row.model).c_str());
  }
  std::printf("\nall rows: about %s (evaluation adds a little)\n", format_duration(total).c_str());
}

// Parameter tensors of a model by their name inside a block ("seq_modeling_block.W1"), summed over
// the blocks, and outside the blocks by their full name.
std::map<std::string, long> param_kinds(const ModelConfig& cfg) {
  Model<float> m(cfg, 0);
  std::map<std::string, long> kinds;
  m.for_each_param([&](Eigen::Map<Mat<float>> p, const std::string& name) {
    std::string kind = name;
    if (name.rfind("model.layers.", 0) == 0) kind = name.substr(name.find('.', 13) + 1);
    kinds[kind] += static_cast<long>(p.size());
  });
  return kinds;
}

// What differs between rows 1 and 2 beyond the change row 2 names: a reader comparing the two sees
// different parameter counts and slightly different results for what is said to be one function.
void print_row_notes(const std::vector<AblationRow>& rows) {
  const AblationRow* r1 = nullptr;
  const AblationRow* r2 = nullptr;
  for (const auto& r : rows) {
    if (r.id == "1") r1 = &r;
    if (r.id == "2") r2 = &r;
  }
  if (!r1 || !r2) return;
  const auto k1 = param_kinds(r1->model), k2 = param_kinds(r2->model);
  long n1 = 0, n2 = 0;
  for (const auto& [k, n] : k1) n1 += n;
  for (const auto& [k, n] : k2) n2 += n;
  std::string extra, missing;
  for (const auto& [k, n] : k2)
    if (!k1.count(k)) extra += (extra.empty() ? "" : ", ") + k + " (" + std::to_string(n) + ")";
  for (const auto& [k, n] : k1)
    if (!k2.count(k)) missing += (missing.empty() ? "" : ", ") + k + " (" + std::to_string(n) + ")";
  std::printf("\nRow 2 against row 1. Row 2 is the TTT layer set up to compute exactly linear attention "
              "(Theorem 1): W0 = 0 and kept there, no LayerNorm, residual or bias, a fixed learning rate, "
              "tau = 1, b = T. Its parameter count differs from row 1's (%ld against %ld) because the TTT "
              "layer keeps tensors that this setting does not use or keeps fixed:\n  only in row 2: %s\n"
              "  only in row 1: %s\n"
              "Their results still differ a little: the two compute the same function in a different order "
              "(a test checks that they agree), and over hundreds of training steps the rounding differences "
              "grow into two different trained models.\n",
              n2, n1, extra.empty() ? "none" : extra.c_str(), missing.empty() ? "none" : missing.c_str());
}

void run(const AblateArgs& a) {
  ModelConfig base;
  try {
    base = ModelConfig::preset(a.preset);
  } catch (const std::invalid_argument& e) {
    throw CLI::ValidationError(e.what());
  }
  std::string device_note;  // written by the backend factory when auto falls back to the CPU
  const TrainBackendFactory backend = command_line_backend(a.device.request(), device_note);
  auto rows = table1_rows(base, a.run.seq_len);
  if (!a.rows.empty()) {
    for (const auto& id : a.rows)
      if (std::none_of(rows.begin(), rows.end(), [&](const AblationRow& r) { return r.id == id; }))
        throw CLI::ValidationError("--rows: no row '" + printable(id) + "' (the rows are listed by --help)");
    rows.erase(std::remove_if(rows.begin(), rows.end(),
                              [&](const AblationRow& r) {
                                return std::find(a.rows.begin(), a.rows.end(), r.id) == a.rows.end();
                              }),
               rows.end());
  }
  for (const auto& row : rows) {
    try {
      row.model.validate();
    } catch (const std::invalid_argument& e) {
      throw CLI::ValidationError("row " + row.id + " (" + row.name + "): " + e.what());
    }
  }
  if (a.plan) {
    print_plan(a, rows, backend, device_note);
    set_exit_code(0);
    return;
  }
  // The outputs are checked before an hour of training, not after it: table1.json must be a file the
  // atomic writer may replace, and each row's folder must be new, empty or a run (run_dir.hpp).
  if (!a.out.empty() && fs::exists(fs::symlink_status(a.out))) {
    check_output_file(fs::path(a.out) / "table1.json");
    for (const auto& row : rows) {
      const fs::path dir = fs::path(a.out) / row.name;
      std::error_code ec;
      if (fs::is_symlink(fs::symlink_status(dir, ec)))
        throw std::runtime_error("'" + printable(dir.string()) + "' is a symbolic link: a run writes nothing outside its "
                                 "directory; remove it or choose another --out");
    }
  }
  if (!a.json)
    std::printf("Table 1 in miniature: preset %s, %ld steps of %d x %d bytes, lr %g, seeds %llu..%llu, data %s, device %s\n\n",
                a.preset.c_str(), a.run.steps, a.run.batch_size, a.run.seq_len, a.run.lr, static_cast<unsigned long long>(a.run.seed),
                static_cast<unsigned long long>(a.run.seed + std::uint64_t(a.seeds) - 1), printable(a.run.data).c_str(), a.device.device.c_str());
  Json runs = Json::array();
  Json row_reports = Json::array();
  ProgressLine progress("training steps, all rows and seeds");
  const std::int64_t total_steps = static_cast<std::int64_t>(rows.size()) * a.seeds * a.run.steps;
  std::int64_t steps_before = 0;  // of the runs already finished
  for (const auto& row : rows) {
    std::vector<double> bpb;
    std::set<std::string> devices;
    std::string fallback_note;
    for (int k = 0; k < a.seeds; ++k) {
      const TrainConfig cfg = row_config(a, row, a.run.seed + std::uint64_t(k));
      device_note.clear();
      Trainer t(cfg, TextData::load(cfg), backend);
      if (!device_note.empty()) fallback_note = device_note;
      const std::string device = to_string(t.device_kind());
      devices.insert(device);
      const auto t0 = std::chrono::steady_clock::now();
      double last = 0;
      while (!t.finished()) {
        last = t.step().loss;
        progress.update(steps_before + t.steps_done(), total_steps);
      }
      steps_before += a.run.steps;
      const double secs = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
      const EvalReport ev = t.evaluate(a.eval_windows);
      if (!a.out.empty())
        t.save(a.seeds == 1 ? fs::path(a.out) / row.name : fs::path(a.out) / row.name / ("seed-" + std::to_string(cfg.seed)));
      Json j = Json::object();
      j["row"] = row.id;
      j["name"] = row.name;
      j["seed"] = cfg.seed;
      j["device"] = device;
      j["steps"] = t.steps_done();
      j["params"] = t.model().num_params();
      j["train_loss"] = last;
      j["val_loss"] = ev.loss;
      j["val_bpb"] = ev.bpb;
      j["seconds"] = secs;
      runs.push_back(j);
      bpb.push_back(ev.bpb);
      progress.finish();
      if (!a.json) {
        std::printf("  %-3s %-18s seed %-4llu %-4s val %.4f bits/byte  (%ld parameters, %.1f s)\n", row.id.c_str(),
                    row.name.c_str(), static_cast<unsigned long long>(cfg.seed), device.c_str(), ev.bpb,
                    t.model().num_params(), secs);
        std::fflush(stdout);
      }
    }
    const MeanSd s = mean_sd(bpb);
    std::string device;
    for (const auto& d : devices) device += (device.empty() ? "" : "+") + d;
    Json r = Json::object();
    r["row"] = row.id;
    r["name"] = row.name;
    r["in_chain"] = row.in_chain;
    if (!row.in_chain) r["compare_with"] = row.compare_with;
    r["change"] = row.change;
    r["settings"] = ablation_settings(row.model);
    r["device"] = device;
    if (!fallback_note.empty()) r["device_note"] = fallback_note;
    r["seeds"] = static_cast<int>(bpb.size());
    r["val_bpb_mean"] = s.mean;
    r["val_bpb_sd"] = number_or_null(s.sd);
    r["params"] = runs.back()["params"];
    row_reports.push_back(r);
  }
  Json report = Json::object();
  report["preset"] = a.preset;
  report["data"] = a.run.data;
  report["steps"] = a.run.steps;
  report["batch"] = a.run.batch_size;
  report["seq_len"] = a.run.seq_len;
  report["lr"] = a.run.lr;
  report["seed"] = a.run.seed;
  report["seeds"] = a.seeds;
  report["device_request"] = a.device.device;
  report["runs"] = runs;
  report["rows"] = row_reports;
  if (!a.out.empty()) {
    fs::create_directories(a.out);
    write_file_atomic(fs::path(a.out) / "table1.json", report.dump(2) + "\n");
  }
  if (a.json) {
    std::printf("%s\n", report.dump(2).c_str());
  } else {
    std::printf("\n%-3s %-18s %-19s %9s %-6s %s\n", "#", "row", "val bpb (mean+-sd)", "change", "device", "definition");
    const Json* prev = nullptr;  // the previous chain row, for the change column
    for (const auto& r : row_reports) {
      const double mean = r["val_bpb_mean"].get<double>();
      const std::string sd = r["val_bpb_sd"].is_null() ? std::string("   -  ") : [&] {
        char buf[32];
        std::snprintf(buf, sizeof buf, "%.4f", r["val_bpb_sd"].get<double>());
        return std::string(buf);
      }();
      const bool chain = r["in_chain"].get<bool>();
      const Json* ref = chain ? prev : nullptr;
      if (!chain)  // a row outside the chain is compared with the chain row it names (5a with 5, M2 with 7)
        for (const auto& q : row_reports)
          if (q["row"] == r["compare_with"]) ref = &q;
      char delta[32] = "";
      if (ref) std::snprintf(delta, sizeof delta, "%+9.4f", mean - (*ref)["val_bpb_mean"].get<double>());
      std::printf("%-3s %-18s %.4f +- %-7s %9s %-6s %s: %s\n", r["row"].get<std::string>().c_str(), r["name"].get<std::string>().c_str(),
                  mean, sd.c_str(), delta, r["device"].get<std::string>().c_str(), r["change"].get<std::string>().c_str(),
                  r["settings"].get<std::string>().c_str());
      if (r.contains("device_note")) std::printf("      (%s)\n", r["device_note"].get<std::string>().c_str());
      if (chain) prev = &r;
    }
    std::printf("\nchange: against the previous chain row (row 5a: against row 5; row M2: against row 7). sd: over %d "
                "seed(s).\n",
                a.seeds);
    print_row_notes(rows);
  }
  set_exit_code(0);
}

}  // namespace

void register_ablate(CLI::App& app) {
  auto a = std::make_shared<AblateArgs>();
  a->run.steps = 300;
  a->run.lr = 4e-3;
  auto* cmd = app.add_subcommand("ablate", "Train the rows of the TTT paper's Table 1 with equal budgets and print validation bits per byte");
  cmd->add_option("--preset", a->preset, "Model size of every row")->check(CLI::IsMember({"tiny", "small", "125m"}))->capture_default_str();
  cmd->add_option("--data", a->run.data, "brown or a UTF-8 text file")->check(non_empty_path())->capture_default_str();
  cmd->add_option("--data-dir", a->run.data_dir, "Where the prepared Brown corpus is")->check(non_empty_path())->capture_default_str();
  cmd->add_option("--steps", a->run.steps, "Optimiser steps per row")->check(CLI::Range(1L, 100000000L))->capture_default_str();
  cmd->add_option("--batch", a->run.batch_size, "Sequences per step")->check(CLI::Range(1, 100000))->capture_default_str();
  cmd->add_option("--seq-len", a->run.seq_len, "Sequence length T")->check(CLI::Range(2, 1 << 16))->capture_default_str();
  cmd->add_option("--lr", a->run.lr, "Peak learning rate")->check(finite_range(1e-9, 10.0))->capture_default_str();
  cmd->add_option("--seed", a->run.seed, "First seed (the same seeds for every row)")->check(seed_value())->capture_default_str();
  cmd->add_option("--seeds", a->seeds, "Runs per row, with seeds seed..seed+N-1; the table gives mean +- sd")
      ->check(CLI::Range(1, 1000))->capture_default_str();
  a->device.add_to(cmd,
                   "auto: each row on the GPU where its training step supports the row, else the CPU; cpu; "
                   "cuda: the GPU for every row (fails at a row it cannot train)",
                   "GPU matrix products: tf32 or fp32 (fp32 to compare with CPU rows)");
  cmd->add_option("--threads", a->run.threads, "Worker threads (0: all)")->check(CLI::Range(0, 1024));
  cmd->add_option("--eval-windows", a->eval_windows, "Validation windows (0: the whole validation text)")->check(CLI::Range(0, 1 << 30));
  cmd->add_option("--out", a->out, "Save each row's checkpoint (ROW/ or ROW/seed-S/ with --seeds > 1) and table1.json here")->check(non_empty_path());
  cmd->add_option("--rows", a->rows, "Train only these rows, e.g. --rows 7,M2 (default: every row)")
      ->delimiter(',');
  cmd->add_flag("--json", a->json, "Print the report as JSON: every run (row, seed, device, bits/byte, steps, seconds) and each row's mean and sd");
  cmd->add_flag("--plan", a->plan,
                "Print each row's definition and its estimated time on this machine (a few timed steps per row), "
                "then stop without training");
  cmd->footer(rows_help() + "\nTime per row: run `tttlab ablate --plan` with the same options; it times a few training "
                            "steps of every row on this machine and prints the estimate.\n");
  cmd->callback([a] { run(*a); });
}

}  // namespace tttlab::cli
