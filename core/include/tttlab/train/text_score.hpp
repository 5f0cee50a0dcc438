// tttlab/train/text_score.hpp — scoring every byte of a text with a trained model (`tttlab eval --data
// FILE`), not only the validation split of a training corpus.
//
// WINDOWS. The model reads the text in windows of T = seq_len tokens. A text of N bytes has N − 1
// targets (every byte but the first is predicted from the bytes before it):
//   - the full windows w = 0 … ⌊(N − 1)/T⌋ − 1 start at byte w·T and score targets w·T + 1 … w·T + T,
//     on the trainer's backend (the GPU when it has one);
//   - the r = (N − 1) mod T targets left at the end are scored in one more window of T tokens that
//     ends at the last byte: it overlaps the window before it, and only its last r targets count, so
//     each of them still sees up to T bytes of context. It runs on the host model (the CPU);
//   - a text shorter than T + 1 bytes is one window of N − 1 tokens, on the host model.
// So every target is scored exactly once, and the whole text's loss does not depend on where the
// windows fall more than a window's context does.
#pragma once

#include <cstdint>
#include <filesystem>
#include <functional>
#include <memory>
#include <string>
#include <span>
#include <vector>

#include "tttlab/train/trainer.hpp"

namespace tttlab {

struct TextScore {
  long bytes = 0;             // N, the text's length
  long targets = 0;           // N − 1 scored bytes
  long full_windows = 0;      // windows of T tokens scored on the backend
  long tail_targets = 0;      // targets scored in the last, overlapping window (0 when none)
  double loss = 0;            // nats per byte, mean over every target
  double bpb = 0;             // loss / ln 2
  double accuracy = 0;        // next-byte accuracy over every target
  std::vector<double> loss_by_position;  // [T] mean over the full windows (empty when there are none)
  std::vector<float> per_byte;           // [N − 1] when asked for: the loss of byte i + 1 at index i
};

struct TextScoreOptions {
  bool per_byte = false;  // fill TextScore::per_byte
  // > 0: score only the first max_windows full windows (and not the bytes after them); targets and
  // per_byte then cover just those windows.
  int max_windows = 0;
  // (windows done, windows in all) as the text is scored; the tail window counts as one.
  std::function<void(std::int64_t, std::int64_t)> progress;
};

// Scores `text` (at least 2 bytes) with `trainer`'s current model, in windows of its seq_len.
// Throws std::invalid_argument for a text shorter than 2 bytes.
TextScore score_text(const Trainer& trainer, std::span<const std::uint8_t> text, const TextScoreOptions& options = {});

// ---- Scoring a checkpoint: `tttlab eval` and the Python module (python/) take the same steps ----
// The training configuration a checkpoint is scored with: the run's train_config.json when
// `checkpoint` is a run directory or a checkpoint inside one (its seq_len, batch size and data), else
// the defaults with seq_len = the model's max_position_embeddings; the model's own config either way.
TrainConfig checkpoint_score_config(const Model<float>& model, const std::filesystem::path& checkpoint);
// A text of `text_bytes` bytes scored whole: throws std::invalid_argument ("<what> has fewer than 2
// bytes: nothing to score") below 2 bytes. A text shorter than one window (cfg.seq_len + 1 bytes) is
// scored as one window of its own length: cfg.seq_len becomes text_bytes − 1 and the returned note
// ("<what> is shorter than one window of …") says so; otherwise the note is empty.
std::string fit_window_to_text(TrainConfig& cfg, std::size_t text_bytes, const std::string& what);
// A trainer holding `data` that computes with `model`'s weights (copied) on `backend` (empty: the
// CPU implementation), ready for score_text. `model` is only read (for_each_param is not const).
std::unique_ptr<Trainer> scoring_trainer(Model<float>& model, TrainConfig cfg, TextData data,
                                         const TrainBackendFactory& backend = {});

}  // namespace tttlab
