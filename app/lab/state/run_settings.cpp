// app/lab/state/run_settings.cpp — see run_settings.hpp.
#include "lab/state/run_settings.hpp"

#include <stdexcept>

#include "lab/evolution/evolution_module.hpp"
#include "lab/models/model_library.hpp"
#include "lab/nonparametric/nonparametric_module.hpp"
#include "lab/primal_dual/primal_dual_module.hpp"
#include "lab/recall/recall_module.hpp"
#include "lab/inner_stepper/stepper_module.hpp"

namespace tttlab::lab {
namespace {

// A block or head the model does not have is refused while the file loads, where the model's config
// can be read without loading it: accepted, the view would show the model's last block on its slider
// while the engine reported the block the file named.
void check_block_and_head(const std::string& model_id, int block, const std::string& block_path, int head,
                          const std::string& head_path) {
  const auto cfg = config_without_loading(model_id);
  if (!cfg) return;
  const auto range = [](int n, const char* what) {
    return "the model has " + std::to_string(n) + " " + what + (n > 0 ? " (0 … " + std::to_string(n - 1) + ")" : "");
  };
  if (block >= cfg->num_hidden_layers)
    throw StateError(block_path + ": block " + std::to_string(block) + " does not exist: " +
                     range(cfg->num_hidden_layers, "blocks"));
  if (head >= cfg->num_attention_heads)
    throw StateError(head_path + ": head " + std::to_string(head) + " does not exist: " +
                     range(cfg->num_attention_heads, "heads"));
}

HeadConfig checked_head(const FieldReader& panel, HeadConfig h, const HeadLimits& limits) {
  try {
    validate(h, limits);
  } catch (const std::invalid_argument& e) {
    throw StateError(panel.path() + ".head: " + e.what());
  }
  if (!h.toy())
    check_block_and_head(h.model_id, h.block, panel.path() + ".head.block", h.head, panel.path() + ".head.head");
  return h;
}

}  // namespace

CurvesSettings curves_settings_from(const FieldReader& r, CurvesSettings s) {
  s.model_id = r.string("model_id", 4096, s.model_id);
  s.data = r.string("data", 4096, s.data);
  s.seq_len = static_cast<int>(r.integer("seq_len", 8, 2048, s.seq_len));
  s.sequences = static_cast<int>(r.integer("sequences", 1, 256, s.sequences));
  return s;
}

nlohmann::json to_json(const CurvesSettings& s) {
  return {{"model_id", s.model_id}, {"data", s.data}, {"seq_len", s.seq_len}, {"sequences", s.sequences}};
}

TrainSettings train_settings_from(const FieldReader& t, TrainSettings x) {
  static const char* const layers[] = {"ttt-linear", "ttt-mlp", "linear-attention", "softmax-attention"};
  static const char* const presets[] = {"tiny", "small", "125m"};
  static const char* const devices[] = {"auto", "cpu", "cuda"};
  x.layer = layers[t.choice("layer", {"ttt-linear", "ttt-mlp", "linear-attention", "softmax-attention"}, 0)];
  x.mamba = t.choice("backbone", {"m", "t"}, 0) == 0;
  x.preset = presets[t.choice("preset", {"tiny", "small", "125m"}, 0)];
  x.data = t.string("data", 4096, x.data);
  x.mini_batch = static_cast<int>(t.integer("mini_batch", 1, 4096, x.mini_batch));
  x.base_lr = t.number("base_lr", 0.0, 1000.0, x.base_lr);
  x.lr = t.number("lr", 1e-6, 1.0, x.lr);
  x.steps = t.integer("steps", 1, 10'000'000, x.steps);
  x.batch_size = static_cast<int>(t.integer("batch_size", 1, 1024, x.batch_size));
  x.seq_len = static_cast<int>(t.integer("seq_len", 2, 4096, x.seq_len));
  x.seed = t.uint64("seed", x.seed);
  x.threads = static_cast<int>(t.integer("threads", 0, 256, x.threads));
  x.device = devices[t.choice("device", {"auto", "cpu", "cuda"}, 0)];
  x.gpus = static_cast<int>(t.integer("gpus", 1, 1024, x.gpus));
  if (x.gpus > 1 && x.device == "cpu")
    throw StateError(t.path() + ".gpus: " + std::to_string(x.gpus) +
                     " GPUs need the device \"auto\" or \"cuda\", but device is \"cpu\" (set gpus to 1)");
  x.eval_every = t.integer("eval_every", 0, 10'000'000, x.eval_every);
  x.eval_windows = static_cast<int>(t.integer("eval_windows", 1, 4096, x.eval_windows));
  x.checkpoint_every = t.integer("checkpoint_every", 0, 10'000'000, x.checkpoint_every);
  x.runs_dir = t.string("runs_dir", 4096, x.runs_dir);
  return x;
}

nlohmann::json to_json(const TrainSettings& t) {
  return {{"layer", t.layer}, {"backbone", t.mamba ? "m" : "t"}, {"preset", t.preset}, {"data", t.data},
          {"mini_batch", t.mini_batch}, {"base_lr", t.base_lr}, {"lr", t.lr}, {"steps", t.steps},
          {"batch_size", t.batch_size}, {"seq_len", t.seq_len}, {"seed", t.seed}, {"threads", t.threads},
          {"device", t.device}, {"gpus", t.gpus}, {"eval_every", t.eval_every}, {"eval_windows", t.eval_windows},
          {"checkpoint_every", t.checkpoint_every}, {"runs_dir", t.runs_dir}};
}

SweepSettings sweep_settings_from(const FieldReader& r, SweepSettings w) {
  w.mode = r.choice("mode", {"evaluate", "train"}, w.mode == SweepMode::Evaluate ? 0 : 1) == 0 ? SweepMode::Evaluate
                                                                                             : SweepMode::Train;
  w.model_id = r.string("model_id", 4096, w.model_id);
  w.layer = r.choice("layer", {"ttt-linear", "ttt-mlp"}, w.layer == "ttt-mlp" ? 1 : 0) == 0 ? "ttt-linear" : "ttt-mlp";
  w.data = r.string("data", 4096, w.data);
  w.seq_len = static_cast<int>(r.integer("seq_len", 2, 1024, w.seq_len));
  w.windows = static_cast<int>(r.integer("windows", 1, 256, w.windows));
  w.train_steps = static_cast<int>(r.integer("train_steps", 1, 100000, w.train_steps));
  w.seed = r.uint64("seed", w.seed);
  return w;
}

nlohmann::json to_json(const SweepSettings& w) {
  return {{"mode", w.mode == SweepMode::Evaluate ? "evaluate" : "train"},
          {"model_id", w.model_id},
          {"layer", w.layer},
          {"data", w.data},
          {"seq_len", w.seq_len},
          {"windows", w.windows},
          {"train_steps", w.train_steps},
          {"seed", w.seed}};
}

EvalSettings eval_settings_from(const FieldReader& r, EvalSettings s) {
  s.models = r.string_list("models", 8, 4096, s.models);
  if (s.models.empty()) throw StateError(r.path() + ".models: choose at least one model");
  s.data = r.string("data", 4096, s.data);
  s.seq_len = static_cast<int>(r.integer("seq_len", 8, 4096, s.seq_len));
  s.windows = static_cast<int>(r.integer("windows", 1, 1024, s.windows));
  return s;
}

nlohmann::json to_json(const EvalSettings& s) {
  return {{"models", s.models}, {"data", s.data}, {"seq_len", s.seq_len}, {"windows", s.windows}};
}

PrimalDualConfig primal_dual_config_default() {
  PrimalDualConfig c;
  c.head.w0 = W0Init::Random;
  c.head.repeat = 1;
  return c;
}

PrimalDualConfig primal_dual_config_from(const FieldReader& r) {
  PrimalDualConfig c = primal_dual_config_default();
  c.head = head_config_from(r.object("head"));
  c.precision = r.choice("precision", {"double", "float"}, 0) == 0 ? Precision::Double : Precision::Float;
  c.timing_reps = static_cast<int>(r.integer("timing_reps", 1, 50, c.timing_reps));
  c.linear_attention = r.boolean("linear_attention", c.linear_attention);
  c.gpu_math = r.choice("gpu_math", {"fp32", "tf32"}, 0) == 0 ? GpuMath::Fp32 : GpuMath::Tf32;
  try {
    validate(c.effective(), PrimalDualModule::limits());
  } catch (const std::invalid_argument& e) {
    throw StateError(r.path() + ".head: " + e.what());
  }
  if (!c.head.toy())
    check_block_and_head(c.head.model_id, c.head.block, r.path() + ".head.block", c.head.head, r.path() + ".head.head");
  return c;
}

nlohmann::json to_json(const PrimalDualConfig& c) {
  return {{"head", lab::to_json(c.head)},
          {"precision", c.precision == Precision::Double ? "double" : "float"},
          {"timing_reps", c.timing_reps},
          {"linear_attention", c.linear_attention},
          {"gpu_math", to_string(c.gpu_math)}};
}

NonparametricConfig nonparametric_config_from(const FieldReader& r) {
  NonparametricConfig c;
  c.model_id = r.string("model_id", 4096, c.model_id);
  c.block = static_cast<int>(r.integer("block", 0, 1024, c.block));
  c.head = static_cast<int>(r.integer("attention_head", 0, 1024, c.head));
  c.text = r.string("text", NonparametricModule::kMaxTokens, c.text);
  c.data = r.string("data", 4096, c.data);
  c.offset = static_cast<long>(r.integer("offset", 0, 1LL << 40, c.offset));
  c.tokens = static_cast<int>(r.integer("tokens", 2, NonparametricModule::kMaxTokens, c.tokens));
  c.precision = r.choice("precision", {"double", "float"}, 0) == 0 ? Precision::Double : Precision::Float;
  try {
    NonparametricModule::validate(c);
  } catch (const std::invalid_argument& e) {
    throw StateError(r.path() + ": " + e.what());
  }
  check_block_and_head(c.model_id, c.block, r.path() + ".block", c.head, r.path() + ".attention_head");
  return c;
}

nlohmann::json to_json(const NonparametricConfig& c) {
  return {{"model_id", c.model_id}, {"block", c.block},   {"attention_head", c.head},
          {"text", c.text},         {"data", c.data},     {"offset", c.offset},
          {"tokens", c.tokens},     {"precision", c.precision == Precision::Double ? "double" : "float"}};
}

RecallSettings recall_settings_from(const FieldReader& r, RecallSettings s) {
  s.width = static_cast<int>(r.integer("width", 4, 128, s.width));
  const std::vector<long long> pairs = r.integer_list("pairs", 12, 1, 160, {s.pairs.begin(), s.pairs.end()});
  s.pairs.assign(pairs.begin(), pairs.end());
  s.sequences = static_cast<int>(r.integer("sequences", 1, 256, s.sequences));
  s.seed = r.uint64("seed", s.seed);
  s.map_memory = r.string("map_memory", 64, s.map_memory);
  s.map_pairs = static_cast<int>(r.integer("map_pairs", 2, 160, s.map_pairs));
  s.eta_linear = r.number("eta_linear", 0.0, 2.0, s.eta_linear);
  try {
    validate(s);
  } catch (const std::invalid_argument& e) {
    throw StateError(r.path() + ": " + e.what());
  }
  return s;
}

nlohmann::json to_json(const RecallSettings& s) {
  return {{"width", s.width},           {"pairs", s.pairs},         {"sequences", s.sequences},
          {"seed", s.seed},             {"map_memory", s.map_memory}, {"map_pairs", s.map_pairs},
          {"eta_linear", s.eta_linear}};
}

HeadConfig stepper_head_from(const FieldReader& panel) {
  return checked_head(panel, head_config_from(panel.object("head")), StepperModule::limits());
}

HeadConfig evolution_head_from(const FieldReader& panel) {
  return checked_head(panel, head_config_from(panel.object("head")), EvolutionModule::limits());
}

}  // namespace tttlab::lab
