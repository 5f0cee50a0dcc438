// app/lab/inner_stepper/stepper_types.hpp — what the inner-loop stepper computes and how it is driven.
//
// The stepper runs ONE head (head_config.hpp: a block and head of the trained model, or a toy head)
// through inner_forward_primal token by token, the way a decoder consumes a stream, and keeps one
// TokenRecord per consumed token. The model's own float inputs are converted to double: the stepper
// shows the maths at full precision. The engine thread
// owns the run; the UI sees it as an immutable StepperView inside each Snapshot and drives it with
// the commands below.
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "lab/engine/head_config.hpp"
#include "tttlab/tensor.hpp"
#include "tttlab/ttt/inner.hpp"

namespace tttlab::lab {

// Everything the primal form reported for one token (InnerStepRecord, copied out of the callback).
// Vectors are rows; for TTT-Linear grad_z is ∂ℓ/∂z [d] and the weight update's rank-1 factor is
// k_tᵀ·grad_z. For TTT-MLP grad_z is the gradient at Z1 [h], and layer 2 has x2ᵀ·grad_z2.
struct TokenRecord {
  long t = 0;                // token index in the sequence
  int pos = 0;               // 0-based position in its mini-batch
  long mini_batch_index = 0; // which mini-batch (t / b)
  unsigned char byte = 0;    // the token
  bool commits = false;      // pos == b − 1: the state is committed after this token
  double lambda = 0;         // λ_t
  double tau = 0;            // τ_{pos+1}
  double alpha = 1;          // a member other than TTT: its decay α_t (1 where it has none); λ is then
                             // its rate (β_t, or η) and τ = 1
  double loss_initial = 0;   // ℓ(W0; x_t)
  double loss_before = 0;    // ℓ(W_{t−1}; x_t)
  double loss_after = 0;     // ℓ(W_t; x_t)
  RowVec<double> k, grad_z, x2, grad_z2, output;
  InnerWeights<double> w_after;  // W_t
  InnerWeights<double> delta;    // W_t − W_{t−1}, member by member
  Mat<double> outer1;            // this token's rank-1 gradient term k_tᵀ·grad_z (shape of W1)
  Mat<double> outer2;            // MLP: x2ᵀ·grad_z2 (shape of W2); empty for Linear
  double w_norm = 0;             // ‖W1_t‖_F
  double dw_norm = 0;            // ‖W1_t − W1_{t−1}‖_F
  // Largest magnitudes (for colour scales that stay fixed while scrubbing):
  double w_absmax = 0;           // max |W1_t|, max |W2_t| …
  double w2_absmax = 0;
  double delta_absmax = 0, delta2_absmax = 0;
  double outer_absmax = 0, outer2_absmax = 0;
};

struct StepperView {
  HeadConfig config;
  std::uint64_t generation = 0;  // changes whenever the run is rebuilt from a new config
  std::string error;             // non-empty: the config was rejected and nothing below is valid
  // Non-empty: the head's inputs or a computed token are not finite, or beyond what the model's float
  // can hold. A model's head: non_finite_model_message (the numbers below mean nothing); a toy head:
  // its inner loop diverged.
  std::string warning;
  std::string description;       // what runs: "tiny-brown · block 0 · head 0", "toy head …"
  InnerOptions options;          // the inner loop as it runs (the model's own for the MODEL source)
  int d = 0;                     // head dimension
  std::vector<unsigned char> bytes;
  // ηₜ = τ_{(t mod b)+1}·λₜ for EVERY token (known before the tokens are consumed): the weight of
  // token t's own gradient at its read-out.
  std::shared_ptr<const std::vector<double>> eta;
  std::shared_ptr<const InnerWeights<double>> w0;
  std::vector<std::shared_ptr<const TokenRecord>> records;  // tokens 0 .. computed()−1
  long cursor = -1;              // the token on show (W_cursor = state after it); −1: before token 0
  bool playing = false;
  double speed = 8.0;            // tokens per second while playing
  bool loop = false;             // restart at the end while playing
  double compute_us_per_token = 0;  // engine time of the primal step, mean over the run
  // Following a training run (MODEL source): the library version and training step of the weights
  // the head was built from (step −1: not a run's checkpoint), and how many times newer weights
  // arrived and the head was rebuilt with them since the config was set.
  std::uint64_t model_version = 0;
  long model_step = -1;
  int reloads = 0;

  long tokens() const { return static_cast<long>(bytes.size()); }
  long computed() const { return static_cast<long>(records.size()); }
  int mini_batch() const { return options.mini_batch; }
  bool mlp() const { return options.model == InnerModel::MLP; }
  // W_{t−1}: the weights in effect before token t is consumed (W0 for t = 0).
  const InnerWeights<double>& weights_before(long t) const {
    return t <= 0 ? *w0 : records[static_cast<std::size_t>(t - 1)]->w_after;
  }
};

// (Re)configure the run. Rebuilds only if `config` differs from the current one; then moves the
// cursor to `cursor` (clamped to [−1, T−1]), computing tokens as needed.
struct StepperConfigure {
  HeadConfig config;
  long cursor = 0;
};

enum class StepperOp {
  Play, Pause, TogglePlay,
  StepForward,     // one token
  StepBack,        // one token back (already computed: no work)
  NextMiniBatch,   // to the last token of the current mini-batch, or of the next one
  PrevMiniBatch,   // to the last token of the previous mini-batch (or before token 0)
  Seek,            // to `token`
  ToStart, ToEnd,
};

struct StepperTransport {
  StepperOp op = StepperOp::Pause;
  long token = 0;  // Seek only
};

struct StepperSetSpeed {
  double tokens_per_second = 8.0;  // clamped to [0.25, 1000]
  bool loop = false;
};

}  // namespace tttlab::lab
