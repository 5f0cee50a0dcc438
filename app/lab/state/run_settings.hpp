// app/lab/state/run_settings.hpp — the part of each panel's saved settings that tells the ENGINE what
// to compute, read from and written to a .tttlab state file.
//
// A panel's entry in a state file holds its run settings (flat keys, documented by the functions
// below) and its view settings (under "view": smoothing, scales, …, which only the panel reads). The
// run settings are parsed here, outside the UI library, so that the panels and the headless lesson
// checker (app/course/experiments.cpp) read a scene the same way. Every reader takes the defaults to
// keep for absent keys and throws StateError naming the field.
#pragma once

#include <nlohmann/json.hpp>

#include "lab/inner_curves/curves_types.hpp"
#include "lab/evaluation/evaluation_types.hpp"
#include "lab/engine/head_config.hpp"
#include "lab/minibatch/minibatch_types.hpp"
#include "lab/nonparametric/nonparametric_types.hpp"
#include "lab/primal_dual/primal_dual_types.hpp"
#include "lab/recall/recall_types.hpp"
#include "lab/training/training_types.hpp"
#include "lab/state/json_fields.hpp"

namespace tttlab::lab {

// Inner-loss curves: model_id, data, seq_len, sequences.
CurvesSettings curves_settings_from(const FieldReader& r, CurvesSettings defaults);
nlohmann::json to_json(const CurvesSettings& s);

// Mini-batch lab: mode, model_id, layer, data, seq_len, windows, train_steps, seed.
SweepSettings sweep_settings_from(const FieldReader& r, SweepSettings defaults);
nlohmann::json to_json(const SweepSettings& s);

// Evaluation: models, data, seq_len, windows.
EvalSettings eval_settings_from(const FieldReader& r, EvalSettings defaults);
nlohmann::json to_json(const EvalSettings& s);

// Primal vs dual: head, precision, timing_reps, linear_attention (checked against the module's limits).
PrimalDualConfig primal_dual_config_default();
PrimalDualConfig primal_dual_config_from(const FieldReader& r);
nlohmann::json to_json(const PrimalDualConfig& c);

// Theorem 2 (nonparametric learner): model_id, block, attention_head (not "head": that key is the
// head_config object of the other panels), text, data, offset, tokens, precision
// (checked against the module's limits).
NonparametricConfig nonparametric_config_from(const FieldReader& r);
nlohmann::json to_json(const NonparametricConfig& c);

// Recall lab: width, pairs (an increasing list), sequences, seed, map_memory, map_pairs, eta_linear
// (checked against the module's limits).
RecallSettings recall_settings_from(const FieldReader& r, RecallSettings defaults);
nlohmann::json to_json(const RecallSettings& s);

// Training: the "settings" object of the Training panel (layer, backbone, preset, data, mini_batch,
// base_lr, lr, steps, batch_size, seq_len, seed, threads, device, gpus (1 … 1024; more than 1 only with
// device auto or cuda), eval_every, eval_windows, checkpoint_every, runs_dir). The panel and the lesson checker (a scene that follows a training run)
// read it here.
TrainSettings train_settings_from(const FieldReader& settings, TrainSettings defaults);
nlohmann::json to_json(const TrainSettings& t);

// The "head" object of the stepper and evolution panels, checked against that module's limits.
HeadConfig stepper_head_from(const FieldReader& panel);
HeadConfig evolution_head_from(const FieldReader& panel);

}  // namespace tttlab::lab
