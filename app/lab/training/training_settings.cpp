// app/lab/training/training_settings.cpp — see training_settings.hpp.
#include "lab/training/training_settings.hpp"

#include <string>
#include <string_view>

#include "lab/engine/data_source.hpp"

namespace tttlab::lab {

TrainSettings::TrainSettings() {
  steps = 300;
  batch_size = 8;
  seq_len = 128;
  threads = 1;  // worker threads inside Trainer::step (results depend on the count)
  eval_every = 50;
  eval_windows = 16;
  // Views that follow a run (the inner-loss curves, the stepper, the evolution) see the weights it
  // saves: a checkpoint every sixth of the default run shows the outer loop at work while it trains.
  checkpoint_every = 50;
}

TrainDeviceRequest TrainSettings::device_request() const {
  return {device, GpuGemmPrecision::Tf32, gpus > 1 ? gpus : 0};
}

TrainSettings train_settings_from(const FieldReader& t, TrainSettings x) {
  static constexpr std::string_view kLayers[] = {"ttt-linear",        "ttt-mlp", "linear-attention",
                                                 "softmax-attention", "mamba2",  "deltanet",
                                                 "gated-deltanet",    "titans",  "lact"};
  static constexpr std::string_view kPresets[] = {"tiny", "small", "125m"};
  static constexpr std::string_view kDevices[] = {"auto", "cpu", "cuda"};
  x.layer = std::string(kLayers[t.choice("layer", kLayers, 0)]);
  x.mamba = t.choice("backbone", {"m", "t"}, 0) == 0;
  x.preset = std::string(kPresets[t.choice("preset", kPresets, 0)]);
  x.data = t.string("data", 4096, x.data);
  x.mini_batch = static_cast<int>(t.integer("mini_batch", 1, 4096, x.mini_batch));
  x.base_lr = t.number("base_lr", 0.0, 1000.0, x.base_lr);
  x.lr = t.number("lr", 1e-6, 1.0, x.lr);
  x.steps = t.integer("steps", 1, 10'000'000, x.steps);
  x.batch_size = static_cast<int>(t.integer("batch_size", 1, 1024, x.batch_size));
  x.seq_len = static_cast<int>(t.integer("seq_len", 2, 4096, x.seq_len));
  x.seed = t.uint64("seed", x.seed);
  x.threads = static_cast<int>(t.integer("threads", 0, 256, x.threads));
  x.device = parse_device_request(kDevices[t.choice("device", kDevices, 0)]);
  x.gpus = static_cast<int>(t.integer("gpus", 1, 1024, x.gpus));
  if (x.gpus > 1 && x.device == DeviceRequest::CPU)
    throw StateError(
        t.path() + ".gpus: " + std::to_string(x.gpus) +
        " GPUs need the device \"auto\" or \"cuda\", but device is \"cpu\" (set gpus to 1)");
  x.eval_every = t.integer("eval_every", 0, 10'000'000, x.eval_every);
  x.eval_windows = static_cast<int>(t.integer("eval_windows", 1, 4096, x.eval_windows));
  x.checkpoint_every = t.integer("checkpoint_every", 0, 10'000'000, x.checkpoint_every);
  x.runs_dir = t.string("runs_dir", 4096, x.runs_dir);
  return x;
}

nlohmann::json to_json(const TrainSettings& t) {
  return {{"layer", t.layer},
          {"backbone", t.mamba ? "m" : "t"},
          {"preset", t.preset},
          {"data", t.data},
          {"mini_batch", t.mini_batch},
          {"base_lr", t.base_lr},
          {"lr", t.lr},
          {"steps", t.steps},
          {"batch_size", t.batch_size},
          {"seq_len", t.seq_len},
          {"seed", t.seed},
          {"threads", t.threads},
          {"device", to_string(t.device)},
          {"gpus", t.gpus},
          {"eval_every", t.eval_every},
          {"eval_windows", t.eval_windows},
          {"checkpoint_every", t.checkpoint_every},
          {"runs_dir", t.runs_dir}};
}

TrainingPanelSettings TrainingPanelSettings::defaults() {
  TrainingPanelSettings s;
  s.train.data = default_data_source();
  return s;
}

TrainingPanelSettings TrainingPanelSettings::from(const FieldReader& r) {
  TrainingPanelSettings s = defaults();
  s.train = train_settings_from(r.object("settings"), s.train);
  s.name = r.string("name", 128, "");
  s.open_runs = r.string_list("runs", 64, 4096, {});
  const FieldReader v = r.object("view");
  s.smoothing = v.number("smoothing", 0.0, 0.999, s.smoothing);
  s.log_loss = v.boolean("log_loss", s.log_loss);
  s.x = static_cast<TrainingXAxis>(v.choice("x", {"step", "tokens", "time"}, 0));
  return s;
}

nlohmann::json TrainingPanelSettings::to_json() const {
  return {{"settings", lab::to_json(train)},
          {"name", name},
          {"runs", open_runs},
          {"view",
           {{"smoothing", smoothing},
            {"log_loss", log_loss},
            {"x", x == TrainingXAxis::Step     ? "step"
                  : x == TrainingXAxis::Tokens ? "tokens"
                                               : "time"}}}};
}

std::vector<Command> TrainingPanelSettings::commands() const {
  std::vector<Command> out;
  for (const auto& dir : open_runs) out.push_back(TrainOpen{dir, false});
  return out;
}

}  // namespace tttlab::lab
