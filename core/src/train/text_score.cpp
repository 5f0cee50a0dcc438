#include "tttlab/train/text_score.hpp"

#include <algorithm>
#include <cmath>
#include <stdexcept>

#include "tttlab/io/atomic_file.hpp"
#include "tttlab/model/model.hpp"

namespace tttlab {

TextScore score_text(const Trainer& trainer, std::span<const std::uint8_t> text, const TextScoreOptions& options) {
  if (text.size() < 2)
    throw std::invalid_argument("the text has " + std::to_string(text.size()) +
                                " bytes; scoring needs at least 2 (every byte but the first is predicted)");
  const long T = trainer.config().seq_len;
  TextScore s;
  s.bytes = static_cast<long>(text.size());
  s.targets = s.bytes - 1;
  s.full_windows = s.targets / T;
  s.tail_targets = s.targets - s.full_windows * T;
  if (options.max_windows > 0 && options.max_windows < s.full_windows + (s.tail_targets > 0)) {
    s.full_windows = std::min<long>(s.full_windows, options.max_windows);
    s.tail_targets = 0;
    s.targets = s.full_windows * T;
  }
  const std::int64_t total_windows = s.full_windows + (s.tail_targets > 0 ? 1 : 0);
  if (options.per_byte) s.per_byte.assign(static_cast<std::size_t>(s.targets), 0.f);

  double loss_sum = 0, correct = 0;
  if (s.full_windows > 0) {
    EvalOptions eo;
    eo.progress = options.progress ? [&](std::int64_t done, std::int64_t) { options.progress(done, total_windows); }
                                   : std::function<void(std::int64_t, std::int64_t)>();
    std::vector<float> losses;
    if (options.per_byte) eo.target_losses = &losses;
    // Only the bytes the full windows cover (windows of T + 1 bytes overlapping by one).
    const EvalReport r = trainer.evaluate_text(text.first(static_cast<std::size_t>(s.full_windows * T + 1)), eo);
    loss_sum += r.loss * double(r.targets);
    correct += r.accuracy * double(r.targets);
    s.loss_by_position = r.loss_by_position;
    if (options.per_byte) std::copy(losses.begin(), losses.end(), s.per_byte.begin());
  }
  if (s.tail_targets > 0) {
    // One window that ends at the last byte; only its last tail_targets targets count.
    trainer.sync_to_host();
    const long window = std::min(T, s.targets);
    const std::size_t start = text.size() - static_cast<std::size_t>(window) - 1;
    const std::vector<int> tokens(text.begin() + static_cast<std::ptrdiff_t>(start), text.end());
    std::vector<std::uint8_t> mask(static_cast<std::size_t>(window), 0);
    std::fill(mask.end() - s.tail_targets, mask.end(), std::uint8_t{1});
    Vec<float> pos;
    const CrossEntropyStats st = trainer.model().eval_sequence(tokens, mask, &pos);
    loss_sum += st.loss_sum;
    correct += double(st.correct);
    if (options.per_byte)
      for (long i = 0; i < s.tail_targets; ++i)
        s.per_byte[static_cast<std::size_t>(s.full_windows * T + i)] = pos(window - s.tail_targets + i);
    if (options.progress) options.progress(total_windows, total_windows);
  }
  s.loss = loss_sum / double(s.targets);
  s.bpb = s.loss / std::log(2.0);
  s.accuracy = correct / double(s.targets);
  return s;
}

TrainConfig checkpoint_score_config(const Model<float>& model, const std::filesystem::path& checkpoint) {
  namespace fs = std::filesystem;
  TrainConfig cfg;
  cfg.model = model.config();
  cfg.seq_len = model.config().max_position_embeddings;
  for (const fs::path& p : {checkpoint / "train_config.json", checkpoint.parent_path() / "train_config.json"})
    if (fs::exists(p)) {
      cfg = TrainConfig::from_json(read_file_text(p, 1 << 20), p.string());
      break;
    }
  cfg.model = model.config();
  return cfg;
}

std::string fit_window_to_text(TrainConfig& cfg, std::size_t text_bytes, const std::string& what) {
  if (text_bytes < 2) throw std::invalid_argument(what + " has fewer than 2 bytes: nothing to score");
  if (text_bytes >= static_cast<std::size_t>(cfg.seq_len) + 1) return {};
  const std::string note = what + " is shorter than one window of " + std::to_string(cfg.seq_len) +
                           " bytes: scored as one window of " + std::to_string(text_bytes - 1);
  cfg.seq_len = static_cast<int>(text_bytes) - 1;
  return note;
}

std::unique_ptr<Trainer> scoring_trainer(Model<float>& model, TrainConfig cfg, TextData data,
                                         const TrainBackendFactory& backend) {
  cfg.model = model.config();
  cfg.steps = 1;
  cfg.lr = 1e-3;
  auto t = std::make_unique<Trainer>(cfg, std::move(data), backend);
  // The trainer holds a freshly initialised model: give it the checkpoint's weights (and the backend).
  t->model().for_each_param([&](Eigen::Map<Mat<float>> dst, const std::string& name) {
    model.for_each_param([&](Eigen::Map<Mat<float>> src, const std::string& n) {
      if (n == name) dst = src;
    });
  });
  t->sync_from_host();
  return t;
}

}  // namespace tttlab
