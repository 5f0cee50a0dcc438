// app/lab/minibatch/minibatch_settings.cpp — see minibatch_settings.hpp.
#include "lab/minibatch/minibatch_settings.hpp"

#include "lab/engine/data_source.hpp"

namespace tttlab::lab {

SweepSettings sweep_settings_from(const FieldReader& r, SweepSettings w) {
  w.mode = r.choice("mode", {"evaluate", "train"}, w.mode == SweepMode::Evaluate ? 0 : 1) == 0
               ? SweepMode::Evaluate
               : SweepMode::Train;
  w.model_id = r.string("model_id", 4096, w.model_id);
  w.layer = r.choice("layer", {"ttt-linear", "ttt-mlp"}, w.layer == "ttt-mlp" ? 1 : 0) == 0
                ? "ttt-linear"
                : "ttt-mlp";
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

MiniBatchPanelSettings MiniBatchPanelSettings::defaults() {
  MiniBatchPanelSettings s;
  s.sweep.data = default_data_source();
  return s;
}

MiniBatchPanelSettings MiniBatchPanelSettings::from(const FieldReader& r) {
  MiniBatchPanelSettings s = defaults();
  s.sweep = sweep_settings_from(r, s.sweep);
  if (r.has("ghost")) s.ghost = sweep_settings_from(r.object("ghost"), s.sweep);
  const FieldReader v = r.object("view");
  s.smoothing = v.number("smoothing", 0.0, 0.999, s.smoothing);
  s.log_time = v.boolean("log_time", s.log_time);
  return s;
}

nlohmann::json MiniBatchPanelSettings::to_json() const {
  nlohmann::json j = lab::to_json(sweep);
  if (ghost) j["ghost"] = lab::to_json(*ghost);
  j["view"] = {{"smoothing", smoothing}, {"log_time", log_time}};
  return j;
}

std::vector<Command> MiniBatchPanelSettings::commands() const {
  if (ghost) return {SweepRun{*ghost, false}, SweepRun{sweep, true}};
  return {SweepRun{sweep, false}};
}

std::vector<Command> MiniBatchPanelSettings::scene(const FieldReader& entry, const FieldReader&) {
  return {SweepRun{from(entry).sweep}};
}

}  // namespace tttlab::lab
