// `tttlab probe`: run one TTT layer over a text, token by token, and print what the inner loop does:
// per token the three inner losses ℓ(W_0; x_t), ℓ(W_{t−1}; x_t), ℓ(W_t; x_t) (the paper's Fig. 5),
// λ_t, τ, ‖∇ℓ_t‖ and ‖W_t − W_0‖, for one head. It is the command-line twin of the GUI's inner-loop
// stepper.
//
// Without a trained model the layer input is a fixed random byte embedding (N(0, 1), seeded) and the
// layer parameters follow the official initialisation (seeded): what you see is the inner loop's own
// learning at test time, not a language model's.
#include <CLI/CLI.hpp>
#include <cmath>
#include <cstdio>
#include <nlohmann/json.hpp>
#include <random>
#include <string>

#include "cli/commands.hpp"
#include "cli/validators.hpp"
#include "tttlab/ttt/layer.hpp"

namespace tttlab::cli {
namespace {

struct ProbeArgs {
  std::string layer = "ttt-linear";
  std::string backbone = "m";
  std::string form = "primal";
  std::string text = "Test-time training turns the hidden state into a model that learns as it reads.";
  int width = 64;
  int heads = 4;
  int head = 0;
  int mini_batch = 16;
  double base_lr = -1;  // < 0: the official default for the layer
  bool no_ln = false, no_residual = false, fixed_eta = false, no_token_index = false;
  std::uint64_t seed = 1;
  bool json = false;
};

// "must be >= 1" (CLI11's PositiveNumber prints the whole double range in its message).
const CLI::Validator k_at_least_one(
    [](std::string& v) {
      try {
        if (std::stol(v) >= 1) return std::string();
      } catch (const std::exception&) {
      }
      return "must be an integer >= 1, got " + v;
    },
    "INT>=1");

[[noreturn]] void usage_error(const std::string& msg) { throw CLI::ValidationError(msg); }

void run(const ProbeArgs& a) {
  TTTLayerConfig cfg;
  cfg.width = a.width;
  cfg.heads = a.heads;
  if (a.heads <= 0 || a.width % a.heads != 0)
    usage_error("--heads " + std::to_string(a.heads) + " must divide --width " + std::to_string(a.width));
  if (a.head < 0 || a.head >= a.heads)
    usage_error("--head must be in [0, " + std::to_string(a.heads - 1) + "]");
  cfg.inner.model = a.layer == "ttt-mlp" ? InnerModel::MLP : InnerModel::Linear;
  cfg.inner.mini_batch = a.mini_batch;
  cfg.inner.layer_norm = !a.no_ln;
  cfg.inner.residual = !a.no_residual;
  cfg.eta.base_lr = a.base_lr >= 0 ? a.base_lr : (cfg.inner.model == InnerModel::Linear ? 1.0 : 0.1);
  cfg.eta.gate = a.fixed_eta ? EtaGate::Fixed : EtaGate::Learned;
  cfg.eta.token_index = !a.no_token_index;
  cfg.share_qk = cfg.use_gate = a.backbone == "m";
  try {
    cfg.validate();
  } catch (const std::invalid_argument& e) {
    usage_error(e.what());
  }
  if (a.text.empty()) usage_error("--text must not be empty");

  // The official initialisation (τ_i = 1/i, λ ≈ η_base/(2d)), so the numbers are those a freshly
  // initialised model would show.
  std::mt19937_64 rng(a.seed);
  std::normal_distribution<double> n01;
  TTTLayer<double> layer(cfg, TTTLayerParams<double>::init(cfg, [&] { return n01(rng); }));
  // Byte embedding: one fixed random row per byte value.
  Mat<double> embed(256, cfg.width);
  for (Eigen::Index i = 0; i < embed.size(); ++i) embed.data()[i] = n01(rng);
  const Eigen::Index T = static_cast<Eigen::Index>(a.text.size());
  Mat<double> x(T, cfg.width);
  for (Eigen::Index t = 0; t < T; ++t) x.row(t) = embed.row(static_cast<unsigned char>(a.text[t]));

  auto state = layer.start();
  auto& st = static_cast<TTTLayerState<double>&>(*state);
  nlohmann::json rows = nlohmann::json::array();
  const InnerWeights<double>& w0 = layer.params().W0[a.head];
  if (!a.json)
    std::printf("%5s %4s %4s %10s %8s %12s %12s %12s %10s %10s\n", "token", "byte", "pos", "lambda",
                "tau", "l(W0;x)", "l(Wt-1;x)", "l(Wt;x)", "|grad|", "|Wt-W0|");
  auto observe = [&](int h, const InnerStepRecord<double>& r) {
    if (h != a.head) return;
    const unsigned char c = static_cast<unsigned char>(a.text[r.token]);
    const double gnorm = r.grad_z->norm() * r.k->norm();  // ‖k_tᵀ g_t‖_F = ‖k_t‖·‖g_t‖
    const double drift = (r.w_after->W1 - w0.W1).norm();
    if (a.json) {
      rows.push_back({{"token", r.token}, {"byte", c}, {"pos", r.pos}, {"lambda", r.lambda},
                      {"tau", r.tau}, {"loss_initial", r.loss_initial}, {"loss_before", r.loss_before},
                      {"loss_after", r.loss_after}, {"grad_norm", gnorm}, {"w_drift", drift}});
    } else {
      const char shown = (c >= 32 && c < 127) ? char(c) : '.';
      std::printf("%5ld %4c %4d %10.3e %8.4f %12.5f %12.5f %12.5f %10.3e %10.3e%s\n", r.token, shown,
                  r.pos, r.lambda, r.tau, r.loss_initial, r.loss_before, r.loss_after, gnorm, drift,
                  r.pos == cfg.inner.mini_batch - 1 ? "  | commit" : "");
    }
  };
  const TTTForm form = a.form == "dual" ? TTTForm::Dual : TTTForm::Primal;
  const Mat<double> y = layer.forward(st, x, form, form == TTTForm::Primal ? TTTLayerObserver<double>(observe)
                                                                         : TTTLayerObserver<double>());
  if (a.json) {
    nlohmann::json j;
    j["config"] = {{"layer", a.layer}, {"backbone", a.backbone}, {"width", a.width},
                   {"heads", a.heads}, {"head", a.head}, {"mini_batch", a.mini_batch},
                   {"ttt_base_lr", cfg.eta.base_lr}, {"seed", a.seed}, {"form", a.form}};
    j["tokens"] = rows;
    j["output_norm"] = y.norm();
    std::printf("%s\n", j.dump(1).c_str());
  } else {
    std::printf("\n%ld tokens through %s (%s backbone, D=%d, H=%d, b=%d, %s form); output norm %.6f\n",
                static_cast<long>(T), layer.name().c_str(), a.backbone == "m" ? "Mamba" : "Transformer",
                cfg.width, cfg.heads, cfg.inner.mini_batch, a.form.c_str(), y.norm());
    if (form == TTTForm::Dual) std::printf("(the dual form reports no per-token records: use --form primal)\n");
  }
  set_exit_code(0);
}

}  // namespace

void register_probe(CLI::App& app) {
  auto a = std::make_shared<ProbeArgs>();
  auto* cmd = app.add_subcommand(
      "probe",
      "Run one TTT layer over a text token by token and print each token's inner losses "
      "l(W0;x), l(Wt-1;x), l(Wt;x), lambda, tau and the update size for one head. Random layer "
      "weights and byte embedding (seeded): it shows the inner loop learning at test time.");
  cmd->add_option("--layer", a->layer, "Inner model")->check(CLI::IsMember({"ttt-linear", "ttt-mlp"}))->capture_default_str();
  cmd->add_option("--backbone", a->backbone, "t: Transformer form (separate Q/K projections); m: Mamba form (shared Q/K + convs, gate)")
      ->check(CLI::IsMember({"t", "m"}))->capture_default_str();
  cmd->add_option("--form", a->form, "primal (per-token records) or dual")->check(CLI::IsMember({"primal", "dual"}))->capture_default_str();
  cmd->add_option("--text", a->text, "Input text (bytes are tokens)")->capture_default_str();
  cmd->add_option("--width", a->width, "Model width D")->check(k_at_least_one)->capture_default_str();
  cmd->add_option("--heads", a->heads, "Number of heads H (must divide D)")->check(k_at_least_one)->capture_default_str();
  cmd->add_option("--head", a->head, "Head to report")->capture_default_str();
  cmd->add_option("-b,--mini-batch", a->mini_batch, "Inner mini-batch size b >= 1")->check(k_at_least_one)->capture_default_str();
  cmd->add_option("--base-lr", a->base_lr, "eta_base (default 1.0 for ttt-linear, 0.1 for ttt-mlp)")->check(finite_range(0.0, 1e6));
  cmd->add_flag("--no-ln", a->no_ln, "No LayerNorm inside f (and on the output)");
  cmd->add_flag("--no-residual", a->no_residual, "No residual in f: target V instead of V-K, output without +Q");
  cmd->add_flag("--fixed-eta", a->fixed_eta, "eta = eta_base/d for every token (no learned gate)");
  cmd->add_flag("--no-token-index", a->no_token_index, "tau_i = 1 (sum of gradients) instead of 1/i + delta_i");
  cmd->add_option("--seed", a->seed, "Seed of the random weights and embedding")->capture_default_str();
  cmd->add_flag("--json", a->json, "Print the records as JSON");
  cmd->callback([a] { run(*a); });
}

}  // namespace tttlab::cli
