// `tttlab probe`: run one TTT layer over a text, token by token, and print what the inner loop does:
// per token the three inner losses ℓ(W_0; x_t), ℓ(W_{t−1}; x_t), ℓ(W_t; x_t) (the paper's Fig. 5),
// λ_t, τ, ‖∇ℓ_t‖ and ‖W_t − W_0‖, for one head. It is the command-line twin of the GUI's inner-loop
// stepper.
//
// With --checkpoint it runs head --head of block --block of a trained model, with the inputs the app's
// stepper uses (app/inspect/hidden_states.hpp), so the numbers are the ones the stepper shows.
// Without a trained model the layer input is a fixed random byte embedding (N(0, 1), seeded) and the
// layer parameters follow the official initialisation (seeded): what you see is the inner loop's own
// learning at test time, not a language model's.
#include <CLI/CLI.hpp>
#include <algorithm>
#include <cmath>
#include <cstdio>
#include <nlohmann/json.hpp>
#include <random>
#include <string>

#include "cli/checkpoint_option.hpp"
#include "cli/commands.hpp"
#include "cli/validators.hpp"
#include "lab/engine/head_inputs.hpp"
#include "tttlab/io/limits.hpp"
#include "tttlab/model/checkpoint.hpp"
#include "tttlab/model/config.hpp"
#include "tttlab/ttt/layer.hpp"

namespace tttlab::cli {
namespace {

struct ProbeArgs {
  std::string checkpoint;  // empty: a randomly initialised layer
  int block = 0;
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

// An integer in [lo, hi], with a short message (CLI11's Range prints the whole range of the type).
CLI::Validator int_in(long lo, long hi) {
  return CLI::Validator(
      [lo, hi](std::string& v) {
        try {
          std::size_t used = 0;
          const long n = std::stol(v, &used);
          if (used == v.size() && n >= lo && n <= hi) return std::string();
        } catch (const std::exception&) {
        }
        return "must be an integer in [" + std::to_string(lo) + ", " + std::to_string(hi) + "], got " + clip(v, 40);
      },
      "INT in [" + std::to_string(lo) + " - " + std::to_string(hi) + "]");
}

// Bytes a random layer's run holds at its peak, in doubles, counted generously: the projections (at
// most six W x W matrices), each head's inner state with its gradient, update and saved copies, the
// mini-batch buffers (min(b, T) rows: a mini-batch never holds more tokens than the text), the
// per-position vectors (tau, b per head), the byte embedding and a few T x W activations. Checked
// against the memory budget before anything is allocated, so a huge --width is a message, not
// std::bad_alloc.
std::uint64_t random_probe_bytes(const TTTLayerConfig& cfg, std::size_t tokens) {
  const double W = cfg.width, H = cfg.heads, d = W / H, b = cfg.inner.mini_batch, T = double(tokens);
  const double hidden = cfg.inner.model == InnerModel::MLP ? 4 * d : d;
  const double state = 2 * d * hidden + 2 * hidden;
  const double numbers =
      6 * W * W + 6 * H * state + 8 * std::min(b, T) * (W + H * hidden) + 4 * H * b + 256 * W + 8 * T * W;
  return static_cast<std::uint64_t>(std::min(numbers * sizeof(double), 1.8e19));
}

// The random layer's counterpart of non_finite_model_message: its weights are fresh, so it is the
// options (a large --base-lr, no LayerNorm) that make the inner loop diverge.
std::string non_finite_layer_message(const ProbeArgs& a) {
  return "the random layer (seed " + std::to_string(a.seed) +
         ") gives non-finite values (NaN or infinity) with these options: the inner loop diverged; use a smaller "
         "--base-lr or keep the LayerNorm";
}

[[noreturn]] void usage_error(const std::string& msg) { throw CLI::ValidationError(msg); }

// Collects one head's per-token records, as table rows or JSON, to be printed once the run is known to
// be finite; `w0` is the head's initial state.
class RecordPrinter {
 public:
  RecordPrinter(const ProbeArgs& a, const std::string& text, const InnerWeights<double>& w0, int mini_batch)
      : m_a(a), m_text(text), m_w0(w0), m_b(mini_batch) {
    if (!a.json)
      append("%5s %4s %4s %10s %8s %12s %12s %12s %10s %10s\n", "token", "byte", "pos", "lambda", "tau", "l(W0;x)",
             "l(Wt-1;x)", "l(Wt;x)", "|grad|", "|Wt-W0|");
  }
  void operator()(const InnerStepRecord<double>& r) {
    const unsigned char c = static_cast<unsigned char>(m_text[static_cast<std::size_t>(r.token)]);
    const double gnorm = r.grad_z->norm() * r.k->norm();  // ‖k_tᵀ g_t‖_F = ‖k_t‖·‖g_t‖
    const double drift = (r.w_after->W1 - m_w0.W1).norm();
    for (const double v : {r.lambda, r.tau, r.loss_initial, r.loss_before, r.loss_after, gnorm, drift})
      m_finite &= std::isfinite(v);
    if (m_a.json) {
      m_rows.push_back({{"token", r.token}, {"byte", c}, {"pos", r.pos}, {"lambda", r.lambda},
                        {"tau", r.tau}, {"loss_initial", r.loss_initial}, {"loss_before", r.loss_before},
                        {"loss_after", r.loss_after}, {"grad_norm", gnorm}, {"w_drift", drift}});
    } else {
      const char shown = (c >= 32 && c < 127) ? char(c) : '.';
      append("%5ld %4c %4d %10.3e %8.4f %12.5f %12.5f %12.5f %10.3e %10.3e%s\n", r.token, shown, r.pos, r.lambda, r.tau,
             r.loss_initial, r.loss_before, r.loss_after, gnorm, drift, r.pos == m_b - 1 ? "  | commit" : "");
    }
  }
  nlohmann::json& rows() { return m_rows; }
  bool finite() const { return m_finite; }
  // The table collected so far (nothing in JSON mode).
  void print_table() const { std::fwrite(m_table.data(), 1, m_table.size(), stdout); }

 private:
  const ProbeArgs& m_a;
  const std::string& m_text;
  const InnerWeights<double>& m_w0;
  int m_b;
  nlohmann::json m_rows = nlohmann::json::array();
  std::string m_table;
  bool m_finite = true;

  template <class... Args>
  void append(const char* format, Args... args) {
    char line[256];
    const int n = std::snprintf(line, sizeof line, format, args...);
    if (n > 0) m_table.append(line, std::min<std::size_t>(static_cast<std::size_t>(n), sizeof line - 1));
  }
};

// Head a.head of block a.block of a trained model.
void run_checkpoint(const ProbeArgs& a) {
  if (a.text.empty()) usage_error("--text must not be empty");
  const auto model = load_model(a.checkpoint);
  const ModelConfig& mc = model->config();
  if (a.head < 0 || a.head >= mc.num_attention_heads)
    usage_error("--head must be in [0, " + std::to_string(mc.num_attention_heads - 1) + "] for this model");
  const std::vector<unsigned char> bytes(a.text.begin(), a.text.end());
  // The stepper's own inputs, in double (throws a one-line message for a bad block or a non-TTT model).
  const auto heads = lab::model_layer_heads<double>(*model, bytes, a.block, "model");
  const lab::HeadInputs<double>& in = heads[static_cast<std::size_t>(a.head)];
  RecordPrinter print(a, a.text, in.w0, in.options.mini_batch);
  auto state = InnerState<double>::start(in.w0);
  Mat<double> y;
  inner_forward_primal<double>(in.options, in.params, in.Q, in.K, in.V, in.lambda, state, y,
                               [&](const InnerStepRecord<double>& r) { print(r); }, &in.w0);
  // Finite weights may still overflow on this text: refuse, as eval and generate do, before printing.
  if (!print.finite() || !y.allFinite())
    refuse_non_finite_model(a.checkpoint);
  print.print_table();
  const std::string layer = to_string(mc.seq_layer);
  if (a.json) {
    nlohmann::json j;
    j["config"] = {{"checkpoint", resolve_checkpoint(a.checkpoint).string()}, {"layer", layer},
                   {"block", a.block}, {"head", a.head}, {"mini_batch", in.options.mini_batch},
                   {"ttt_base_lr", mc.ttt_base_lr}, {"form", "primal"}};
    j["tokens"] = print.rows();
    j["output_norm"] = y.norm();
    std::printf("%s\n", j.dump(1).c_str());
  } else {
    std::printf("\n%zu tokens through block %d, head %d of %s (%s, %s backbone, d=%d, b=%d, primal form, double)\n",
                bytes.size(), a.block, a.head, printable(resolve_checkpoint(a.checkpoint).string()).c_str(), layer.c_str(),
                mc.mamba_backbone ? "Mamba" : "Transformer", in.d(), in.options.mini_batch);
  }
  set_exit_code(0);
}

void run(const ProbeArgs& a) {
  if (!a.checkpoint.empty()) return run_checkpoint(a);
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
  check_memory(random_probe_bytes(cfg, a.text.size()), "probe's random layer (--width " + std::to_string(a.width) +
                                                           ", --mini-batch " + std::to_string(a.mini_batch) + ")");

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
  RecordPrinter print(a, a.text, layer.params().W0[a.head], cfg.inner.mini_batch);
  auto observe = [&](int h, const InnerStepRecord<double>& r) {
    if (h == a.head) print(r);
  };
  const TTTForm form = a.form == "dual" ? TTTForm::Dual : TTTForm::Primal;
  const Mat<double> y = layer.forward(st, x, form, form == TTTForm::Primal ? TTTLayerObserver<double>(observe)
                                                                         : TTTLayerObserver<double>());
  if (!print.finite() || !y.allFinite())
    throw std::runtime_error(non_finite_layer_message(a));
  print.print_table();
  if (a.json) {
    nlohmann::json j;
    j["config"] = {{"layer", a.layer}, {"backbone", a.backbone}, {"width", a.width},
                   {"heads", a.heads}, {"head", a.head}, {"mini_batch", a.mini_batch},
                   {"ttt_base_lr", cfg.eta.base_lr}, {"seed", a.seed}, {"form", a.form}};
    j["tokens"] = print.rows();
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
      "Run one TTT head over a text token by token and print each token's inner losses "
      "l(W0;x), l(Wt-1;x), l(Wt;x), lambda, tau and the update size. With --checkpoint: head --head of "
      "block --block of a trained model (the numbers the app's stepper shows). Without: a randomly "
      "initialised layer on a random byte embedding (seeded), the inner loop learning at test time.");
  auto* ck = add_checkpoint_option(
      cmd, a->checkpoint, "A trained model: a run directory or a checkpoint directory (e.g. assets/models/tiny-brown)");
  cmd->add_option("--block", a->block, "With --checkpoint: the block whose TTT layer to probe")
      ->check(CLI::Range(0, 1 << 20))->capture_default_str()->needs(ck);
  cmd->add_option("--layer", a->layer, "Inner model")->check(CLI::IsMember({"ttt-linear", "ttt-mlp"}))->capture_default_str()
      ->excludes(ck);
  cmd->add_option("--backbone", a->backbone, "t: Transformer form (separate Q/K projections); m: Mamba form (shared Q/K + convs, gate)")
      ->check(CLI::IsMember({"t", "m"}))->capture_default_str()->excludes(ck);
  cmd->add_option("--form", a->form, "primal (per-token records) or dual")->check(CLI::IsMember({"primal", "dual"}))->capture_default_str()
      ->excludes(ck);
  cmd->add_option("--text", a->text, "Input text (bytes are tokens)")->capture_default_str();
  cmd->add_option("--width", a->width, "Model width D")->check(int_in(1, k_max_hidden_size))->capture_default_str()
      ->excludes(ck);
  cmd->add_option("--heads", a->heads, "Number of heads H (must divide D)")->check(int_in(1, k_max_hidden_size))->capture_default_str()
      ->excludes(ck);
  cmd->add_option("--head", a->head, "Head to report")->capture_default_str();
  cmd->add_option("-b,--mini-batch", a->mini_batch, "Inner mini-batch size b")->check(int_in(1, k_max_mini_batch))->capture_default_str()
      ->excludes(ck);
  cmd->add_option("--base-lr", a->base_lr, "eta_base (default 1.0 for ttt-linear, 0.1 for ttt-mlp)")->check(finite_range(0.0, 1e6))
      ->excludes(ck);
  cmd->add_flag("--no-ln", a->no_ln, "No LayerNorm inside f (and on the output)")
      ->excludes(ck);
  cmd->add_flag("--no-residual", a->no_residual, "No residual in f: target V instead of V-K, output without +Q")
      ->excludes(ck);
  cmd->add_flag("--fixed-eta", a->fixed_eta, "eta = eta_base/d for every token (no learned gate)")
      ->excludes(ck);
  cmd->add_flag("--no-token-index", a->no_token_index, "tau_i = 1 (sum of gradients) instead of 1/i + delta_i")
      ->excludes(ck);
  cmd->add_option("--seed", a->seed, "Seed of the random weights and embedding")->check(seed_value())->capture_default_str()
      ->excludes(ck);
  cmd->add_flag("--json", a->json, "Print the records as JSON");
  cmd->callback([a] { run(*a); });
}

}  // namespace tttlab::cli
