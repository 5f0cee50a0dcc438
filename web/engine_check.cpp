#include "engine_check.hpp"

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <nlohmann/json.hpp>
#include <vector>

#include "tttlab/model/checkpoint.hpp"
#include "tttlab/model/decoder.hpp"
#include "tttlab/model/model.hpp"
#include "tttlab/train/text_score.hpp"
#include "tttlab/train/trainer.hpp"
#include "tttlab/verify.hpp"

namespace tttlab::web {
namespace {

using Clock = std::chrono::steady_clock;

// Runs fn `repeats` times; returns the median wall time in seconds (fn's last result is kept by fn).
template <class F>
double timed(int repeats, F&& fn) {
  std::vector<double> s;
  for (int i = 0; i < std::max(1, repeats); ++i) {
    const auto t0 = Clock::now();
    fn();
    s.push_back(std::chrono::duration<double>(Clock::now() - t0).count());
  }
  std::sort(s.begin(), s.end());
  return s[s.size() / 2];
}

nlohmann::json seconds_json(double median, int repeats) { return {{"median_s", median}, {"repeats", repeats}}; }

}  // namespace

std::string run_engine_check(const EngineCheckOptions& o, const std::function<void(const std::string&)>& progress) {
  const auto say = [&](const std::string& line) {
    if (progress) progress(line);
  };
  nlohmann::json out;

  // verify: the same seed as `tttlab verify`'s default.
  std::vector<CheckResult> checks;
  const double verify_s = timed(o.repeats, [&] { checks = run_verify_suite(VerifyOptions{}); });
  const long passed = std::count_if(checks.begin(), checks.end(), [](const CheckResult& c) { return c.passed; });
  out["verify"] = {{"passed", passed}, {"checks", checks.size()}, {"time", seconds_json(verify_s, o.repeats)}};
  say("verify: " + std::to_string(passed) + "/" + std::to_string(checks.size()) + " checks passed");

  // eval: as `tttlab eval --checkpoint MODEL --data brown --windows N --threads 1`.
  const auto model = load_model(o.model_dir);
  TrainConfig cfg;
  cfg.model = model->config();
  cfg.seq_len = model->config().max_position_embeddings;
  cfg.data = "brown";
  cfg.data_dir = o.brown_dir.string();
  cfg.threads = 1;
  cfg.steps = 1;
  cfg.lr = 1e-3;
  Trainer scorer(cfg, TextData::load(cfg));
  scorer.model().for_each_param([&](Eigen::Map<Mat<float>> dst, const std::string& name) {
    model->for_each_param([&](Eigen::Map<Mat<float>> src, const std::string& n) {
      if (n == name) dst = src;
    });
  });
  scorer.sync_from_host();
  TextScoreOptions so;
  so.max_windows = o.eval_windows;
  TextScore score;
  const double eval_s = timed(o.repeats, [&] { score = score_text(scorer, scorer.data().val, so); });
  out["eval"] = {{"loss", score.loss}, {"accuracy", score.accuracy}, {"targets", score.targets},
                 {"windows", o.eval_windows}, {"time", seconds_json(eval_s, o.repeats)}};
  char line[160];
  std::snprintf(line, sizeof line, "eval: loss %.6f nats/byte over %ld bytes", score.loss, score.targets);
  say(line);

  // greedy: as `tttlab generate --checkpoint MODEL --prompt P --tokens N --temperature 0`.
  std::string text;
  const double greedy_s = timed(o.repeats, [&] {
    const auto decoder = make_cpu_decoder(*model);
    std::vector<int> tokens(o.prompt.begin(), o.prompt.end());
    for (int& t : tokens) t &= 0xff;
    std::vector<float> logits;
    decoder->feed(tokens, logits);
    text.clear();
    for (int i = 0; i < o.greedy_bytes; ++i) {
      const int next = static_cast<int>(std::max_element(logits.begin(), logits.end()) - logits.begin());
      text.push_back(static_cast<char>(next));
      const int one[1] = {next};
      decoder->feed(one, logits);
    }
  });
  std::string hex;
  for (unsigned char c : text) {
    char h[3];
    std::snprintf(h, sizeof h, "%02x", c);
    hex += h;
  }
  out["greedy"] = {{"prompt", o.prompt}, {"bytes_hex", hex}, {"time", seconds_json(greedy_s, o.repeats)}};
  say("greedy: \"" + o.prompt + "\" → " + std::to_string(text.size()) + " bytes");

  // train: the tiny preset on Brown, B = 4, T = 64, one thread, seed 1.
  std::vector<double> losses;
  const double train_s = timed(o.repeats, [&] {
    RunSettings run;
    run.data = "brown";
    run.data_dir = o.brown_dir.string();
    run.steps = o.train_steps;
    run.batch_size = 4;
    run.seq_len = 64;
    run.threads = 1;
    run.seed = 1;
    const TrainConfig tc = train_config(ModelConfig::preset("tiny"), run);
    Trainer trainer(tc, TextData::load(tc));
    losses.clear();
    for (long s = 0; s < o.train_steps; ++s) losses.push_back(trainer.step().loss);
  });
  out["train"] = {{"preset", "tiny"}, {"batch", 4}, {"seq_len", 64}, {"losses", losses},
                  {"time", seconds_json(train_s, o.repeats)}};
  std::snprintf(line, sizeof line, "train: %ld steps, last loss %.6f", o.train_steps, losses.empty() ? 0.0 : losses.back());
  say(line);
  return out.dump();
}

}  // namespace tttlab::web
