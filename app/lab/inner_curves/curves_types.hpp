// app/lab/inner_curves/curves_types.hpp — the inner losses over token position, averaged over a batch of
// sequences and the heads of each block (the paper's Fig. 5 and 17):
//   ℓ(W_0; x_t)       the initial state, no test-time learning
//   ℓ(W_{t−1}; x_t)   before the gradient step on x_t
//   ℓ(W_t; x_t)       after it
//
// For TTT these are the model's TTT layers (every block, every head). For any other member of the
// fast-weight family (tttlab/fastweight/rule.hpp) the same three losses come from that member's own
// inner loop (tttlab/fastweight/member_trace.hpp) on `toy_heads` toy heads (head_config.hpp's TOY
// construction and MEMBER inputs; seeds toy_seed, toy_seed + 1, …) reading the same validation
// windows: one "block", its loss the member's own (docs/MATH.md §11.11).
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "lab/engine/job.hpp"
#include "lab/primal_dual/primal_dual_types.hpp"  // JobOutcome
#include "lab/training/training_types.hpp"        // TrainSettings

namespace tttlab::lab {

struct CurvesSettings {
  // A ModelLibrary id, or kFollowTrainingId ("training"): the checkpoints of the next training run, or
  // "shipped-run:<name>" (kShippedRunPrefix): a shipped run's checkpoints, replayed as if followed.
  std::string model_id = "shipped";
  std::string data = "brown";
  int seq_len = 256;    // T
  int sequences = 12;   // validation windows averaged over
  // "ttt" (or "ttt_linear" / "ttt_mlp"): the model's TTT layers; another fast_weight_presets() id:
  // that member on toy heads (model_id is then not used).
  std::string member = "ttt";
  int toy_d = 16;              // the toy heads' d
  int toy_seed = 7;            // the first toy head's seed
  int toy_heads = 4;           // toy heads averaged over
  int toy_mini_batch = 16;     // Titans' mini-batch b, LaCT's chunk C
  double toy_eta_base = 1.0;   // η_base of the toy's rates (head_config.hpp)
  bool operator==(const CurvesSettings&) const = default;

  bool ttt() const { return member == "ttt" || member == "ttt_linear" || member == "ttt_mlp"; }
};

struct CurvesView : JobView {
  CurvesSettings settings;
  std::string model_label, data_description;
  // Where it was computed. On a GPU the model's forward (what every layer reads) runs there and each
  // head's inner loop, a sequential walk over the tokens of d×d work, runs on the CPU from those inputs.
  std::string device;
  std::string device_note;  // why the CPU although a GPU is in use, or ""
  int blocks = 0, heads = 0, mini_batch = 0;
  long T = 0;
  long sequences_done = 0;
  std::vector<std::vector<double>> l0, lb, la;  // [block][t] means over the sequences done and the heads
  // A member other than TTT (toy heads): its id, printed name, inner loss in words and the names of
  // its state's matrices (member_state_names); empty for TTT.
  std::string member, member_name, member_loss;
  std::vector<std::string> state_names;
  // LaCT: for each update u, the token whose arrival made it (chunk_at[u]) and the mean over the
  // sequences done and the heads of its chunk's loss before and after the update.
  std::vector<long> chunk_at;
  std::vector<double> chunk_before, chunk_after;

  // Following a training run. The view remembers the library version of the weights it was computed
  // with (ModelInfo::version); when a training run puts a newer checkpoint under that id, the module
  // computes the same settings again with the new weights (the previous curves stay on show until the
  // first new sequence is done). So a view whose model is a run follows it, checkpoint by checkpoint.
  std::string model_id;             // the library id computed with (the resolved run for kFollowTrainingId)
  std::uint64_t model_version = 0;  // ModelInfo::version of those weights
  long model_step = -1;             // their training step; −1: not a training run's checkpoint
  int reloads = 0;                  // recomputations because newer weights arrived, since the settings were set
  bool reloading = false;           // the curves on show are still the previous weights' (first sequence pending)
  bool waiting = false;             // kFollowTrainingId and no run has saved a checkpoint yet
  // A shipped run replayed: these are its checkpoint's curves, and a later checkpoint follows once they
  // are complete (the measures wait for the last, as they wait for a training run to end).
  bool replay_pending = false;
  // The first complete view of this chain of reloads (the earliest checkpoint followed to the end of
  // its computation); null before the first reload.
  std::shared_ptr<const CurvesView> first_followed;
};

struct CurvesRun {
  CurvesSettings settings;
  // A lesson's scene that follows a training run: the run it starts (a TrainStart marked `lesson`
  // follows this command). When this module has already followed a run of these settings to a view
  // that is complete, with the same curves settings, and no newer weights came since, that view comes
  // back (with the measures of its first checkpoint) and the TrainStart is answered here.
  std::optional<TrainSettings> lesson_run = std::nullopt;
};

}  // namespace tttlab::lab
