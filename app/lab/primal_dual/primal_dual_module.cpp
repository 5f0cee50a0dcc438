#include "lab/primal_dual/primal_dual_module.hpp"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <stdexcept>

#include "lab/engine/head_inputs.hpp"
#include "tttlab/fastweight/matrix_rules.hpp"
#include "tttlab/fastweight/titans.hpp"

namespace tttlab::lab {

HeadConfig PrimalDualConfig::effective() const {
  HeadConfig h = head;
  if (!linear_attention || !h.ttt()) return h;
  h.model = InnerModel::Linear;
  h.mini_batch = static_cast<int>(std::max(1L, h.tokens()));
  h.w0 = W0Init::Zero;
  h.layer_norm = false;
  h.residual = false;
  h.bias = false;
  h.gate = EtaGate::Fixed;
  h.eta_base = h.d;  // λ = η_base/d = 1
  h.token_index = false;  // τ = 1, so E ≡ 1
  return h;
}

Speedup speedup_of(const std::vector<double>& primal_ms, const std::vector<double>& dual_ms) {
  std::vector<double> r;
  for (std::size_t i = 0; i < std::min(primal_ms.size(), dual_ms.size()); ++i)
    if (dual_ms[i] > 0) r.push_back(primal_ms[i] / dual_ms[i]);
  Speedup s;
  s.repeats = static_cast<int>(r.size());
  if (r.empty()) return s;
  std::sort(r.begin(), r.end());
  const std::size_t n = r.size();
  s.median = n % 2 ? r[n / 2] : 0.5 * (r[n / 2 - 1] + r[n / 2]);
  s.min = r.front();
  s.max = r.back();
  return s;
}

HeadLimits PrimalDualModule::limits() {
  return {.max_tokens = 2048, .max_d_linear = 64, .max_d_mlp = 32, .max_mini_batch = 2048};
}

namespace {

constexpr int kMaxBins = 512;

}  // namespace

// The job as a small state machine; each call of step() is one work item.
struct PrimalDualModule::Job {
  virtual ~Job() = default;
  virtual bool step(PrimalDualView& out) = 0;  // returns true when finished
  virtual double progress() const = 0;
};

namespace {

template <class S>
class TypedJob final : public PrimalDualModule::Job {
 public:
  TypedJob(const PrimalDualConfig& cfg, ModelLibrary& library, ComputeTarget target)
      : m_cfg(cfg), m_library(library), m_target(std::move(target)) {}

  double progress() const override {
    const double total = 2.0 + 2.0 * m_cfg.timing_reps + (m_target.gpu ? static_cast<double>(m_blocks.size()) : 0.0);
    return m_done_steps / total;
  }

  bool step(PrimalDualView& out) override {
    ++m_done_steps;
    if (m_phase == Phase::Build) {
      build();
      m_phase = Phase::Time;
      return false;
    }
    if (m_phase == Phase::Time) {
      // Primal, dual, primal, dual, …: a change of load on the machine hits both forms alike, and
      // each repeat's ratio compares two runs close in time.
      const bool dual = m_times[0][0].size() > m_times[1][0].size();
      run_form(dual);
      if (dual && static_cast<int>(m_times[1][0].size()) == m_cfg.timing_reps)
        m_phase = m_target.gpu && m_cfg.head.ttt() ? Phase::Gpu : Phase::Compare;
      return false;
    }
    if (m_phase == Phase::Gpu) {  // one block per work item
      run_gpu(m_gpu.size());
      if (m_gpu.size() == m_blocks.size() || !m_gpu_note.empty()) m_phase = Phase::Compare;
      return false;
    }
    compare(out);
    return true;
  }

 private:
  enum class Phase { Build, Time, Gpu, Compare };

  // The heads of block `blk` in the kernels' layout (GpuHeads), or why they cannot be.
  GpuHeads pack(const std::vector<HeadInputs<S>>& heads) const {
    const HeadInputs<S>& h0 = heads.front();
    GpuHeads g;
    g.mlp = h0.options.model == InnerModel::MLP;
    g.heads = static_cast<int>(heads.size());
    g.T = static_cast<int>(h0.tokens());
    g.d = h0.d();
    g.mini_batch = h0.options.mini_batch;
    g.layer_norm = h0.options.layer_norm;
    g.residual = h0.options.residual;
    g.bias = h0.options.bias;
    g.ln_eps = static_cast<float>(h0.options.ln_eps);
    const int H = g.heads, T = g.T, d = g.d;
    const std::size_t HD = static_cast<std::size_t>(H) * d;
    g.Q.resize(static_cast<std::size_t>(T) * HD);
    g.K.resize(g.Q.size());
    g.V.resize(g.Q.size());
    g.lambda.resize(static_cast<std::size_t>(H) * T);
    for (int h = 0; h < H; ++h) {
      const HeadInputs<S>& x = heads[static_cast<std::size_t>(h)];
      for (int t = 0; t < T; ++t) {
        for (int c = 0; c < d; ++c) {
          const std::size_t e = static_cast<std::size_t>(t) * HD + static_cast<std::size_t>(h) * d + c;
          g.Q[e] = static_cast<float>(x.Q(t, c));
          g.K[e] = static_cast<float>(x.K(t, c));
          g.V[e] = static_cast<float>(x.V(t, c));
        }
        g.lambda[static_cast<std::size_t>(h) * T + t] = static_cast<float>(x.lambda(t));
      }
      const auto append = [](std::vector<float>& out, const auto& m) {
        for (Eigen::Index r = 0; r < m.rows(); ++r)
          for (Eigen::Index c = 0; c < m.cols(); ++c) out.push_back(static_cast<float>(m(r, c)));
      };
      append(g.ln_weight, x.params.ln_weight);
      append(g.ln_bias, x.params.ln_bias);
      append(g.W1, x.w0.W1);
      append(g.b1, x.w0.b1);
      append(g.W2, x.w0.W2);
      append(g.b2, x.w0.b2);
    }
    for (Eigen::Index i = 0; i < h0.params.tau.size(); ++i) g.tau.push_back(static_cast<float>(h0.params.tau(i)));
    return g;
  }

  // The GPU's dual form for block `blk`: the TTT kernel, or (the Theorem 1 reduction with b = T beyond
  // the kernels' mini-batch limit) the linear-attention kernel.
  void run_gpu(std::size_t blk) {
    const auto& heads = m_blocks[blk];
    constexpr int kWarmup = 2;
    GpuHeads g = pack(heads);
    std::string why = m_target.gpu->ttt_forward_unsupported(g);
    if (why.empty() && heads.front().options.model == InnerModel::MLP && heads.front().options.mlp_expansion != 4)
      why = "the GPU's TTT-MLP kernels have a hidden width of 4d";
    GpuRun r;
    if (why.empty()) {
      r = m_target.gpu->ttt_forward(g, m_cfg.gpu_math, kWarmup, m_cfg.timing_reps);
    } else if (m_cfg.linear_attention) {
      r = m_target.gpu->linear_attention(g.Q, g.K, g.V, g.heads, g.T, g.d, kWarmup, m_cfg.timing_reps);
    } else {
      m_gpu_note = "the GPU kernels cannot run this head: " + why;
      return;
    }
    m_gpu_kernel = r.kernel;
    GpuBlock out;
    out.ms = r.ms;
    const int H = g.heads, T = g.T, d = g.d;
    out.outputs.resize(heads.size());
    for (int h = 0; h < H; ++h) {
      Mat<double>& o = out.outputs[static_cast<std::size_t>(h)];
      o.resize(T, d);
      for (int t = 0; t < T; ++t)
        for (int c = 0; c < d; ++c)
          o(t, c) = r.O[static_cast<std::size_t>(t) * H * d + static_cast<std::size_t>(h) * d + c];
    }
    m_gpu.push_back(std::move(out));
  }

  void build() {
    const HeadConfig& c = m_cfg.head;
    if (!c.ttt()) {
      // The member's toy inputs, in the job's precision; λ carries β_t.
      const HeadInputs<double> toy = make_toy_head<double>(c);
      const MemberInputs in = make_member_inputs(c, toy);
      m_titans = c.member_id() == "titans";
      if (m_titans)
        m_eta = in.momentum.template cast<S>();  // λ carries θ_t, α the forgetting
      else
        m_rule = *matrix_rule_for(fast_weight_preset(c.member_id()).rule);
      HeadInputs<S> h;
      h.bytes = toy.bytes;
      h.Q = in.q.template cast<S>();
      h.K = in.k.template cast<S>();
      h.V = in.v.template cast<S>();
      h.lambda = in.beta.template cast<S>();
      h.alpha = in.alpha.template cast<S>();
      h.options.mini_batch = m_cfg.chunk;
      h.options.bias = false;
      h.description = fast_weight_preset(c.member_id()).name + " on the " + toy.description;
      m_description = h.description;
      m_blocks.push_back({std::move(h)});
      if (m_target.gpu) m_gpu_note = "this view has no GPU kernel for " + fast_weight_preset(c.member_id()).name;
    } else if (c.toy()) {
      m_blocks.push_back({make_toy_head<S>(m_cfg.effective())});
      m_description = m_blocks[0][0].description;
    } else {
      ModelOverrides o;
      if (c.override_model) {
        o.mini_batch = c.mini_batch;
        o.base_lr = c.eta_base;
      }
      const auto model = m_library.get(c.model_id, o);
      const ModelConfig& mc = model->config();
      if (!mc.is_ttt())
        throw std::invalid_argument("this model's layers are " + to_string(mc.seq_layer) +
                                    ", not TTT layers: choose a TTT model");
      const auto view = m_library.view();
      const ModelInfo* info = view->find(c.model_id);
      const std::string label = info ? info->label.substr(0, info->label.find(" (")) : c.model_id;
      const auto bytes = config_bytes(c);
      for (int b = 0; b < mc.num_hidden_layers; ++b) m_blocks.push_back(model_layer_heads<S>(*model, bytes, b, label));
      m_description = label + ", " + std::to_string(mc.num_hidden_layers) + " blocks × " +
                     std::to_string(mc.num_attention_heads) + " heads";
      m_shown_block = std::min(c.block, mc.num_hidden_layers - 1);
      m_shown_head = std::min(c.head, mc.num_attention_heads - 1);
    }
    if (m_cfg.linear_attention)
      for (auto& heads : m_blocks)
        for (auto& h : heads) reduce_to_linear_attention(h);
    for (int f = 0; f < 2; ++f) {
      m_times[f].assign(m_blocks.size(), {});
      m_outputs[f].assign(m_blocks.size(), std::vector<Mat<double>>());
    }
  }

  void run_form(bool dual) {
    for (std::size_t b = 0; b < m_blocks.size(); ++b) {
      auto& outs = m_outputs[dual][b];
      outs.resize(m_blocks[b].size());
      const auto t0 = std::chrono::steady_clock::now();
      std::vector<Mat<S>> o(m_blocks[b].size());
      for (std::size_t h = 0; h < m_blocks[b].size(); ++h) {
        const HeadInputs<S>& x = m_blocks[b][h];
        if (m_titans) {
          // titans_chunked against titans_primal at the same mini-batch b = C (§11.9): one function.
          const RowVec<S> w = RowVec<S>::Ones(x.d()), bias = RowVec<S>::Zero(x.d());
          const Mat<S> M0 = Mat<S>::Zero(x.d(), x.d());
          TitansInner inner;
          inner.mini_batch = m_cfg.chunk;
          o[h] = dual ? titans_chunked<S>(x.Q, x.K, x.V, w, bias, x.lambda, x.alpha, m_eta, M0, inner).o
                      : titans_primal<S>(x.Q, x.K, x.V, w, bias, x.lambda, x.alpha, m_eta, M0, inner).o;
          continue;
        }
        if (!m_cfg.head.ttt()) {
          const Vec<S> beta = uses_beta(m_rule) ? x.lambda : Vec<S>();
          const Vec<S> alpha = uses_alpha(m_rule) ? x.alpha : Vec<S>();
          const Mat<S> S0 = Mat<S>::Zero(x.d(), x.V.cols());
          o[h] = dual ? matrix_rule_chunked<S>(m_rule, x.Q, x.K, x.V, beta, alpha, S0, m_cfg.chunk).o
                      : matrix_rule_primal<S>(m_rule, x.Q, x.K, x.V, beta, alpha, S0).o;
          continue;
        }
        auto st = InnerState<S>::start(x.w0);
        if (dual)
          inner_forward_dual<S>(x.options, x.params, x.Q, x.K, x.V, x.lambda, st, o[h]);
        else
          inner_forward_primal<S>(x.options, x.params, x.Q, x.K, x.V, x.lambda, st, o[h]);
      }
      m_times[dual][b].push_back(ms_since(t0));
      for (std::size_t h = 0; h < o.size(); ++h) outs[h] = o[h].template cast<double>();
    }
  }

  void compare(PrimalDualView& v) {
    const HeadInputs<S>& shown = m_blocks[static_cast<std::size_t>(m_shown_block)][static_cast<std::size_t>(m_shown_head)];
    const long T = shown.tokens();
    const int b = shown.options.mini_batch;
    v.results_generation = v.generation;
    v.description = m_description;
    v.model_source = !m_cfg.head.toy();
    v.bytes = shown.bytes;
    v.T = T;
    v.d = shown.d();
    v.mini_batch = b;
    v.bias = shown.options.bias;
    v.mlp = shown.options.model == InnerModel::MLP;
    v.member_chunked = !m_cfg.head.ttt();
    v.shown_block = m_shown_block;
    v.shown_head = m_shown_head;
    v.linear_attention = m_cfg.linear_attention;
    v.layers.clear();
    v.max_abs_diff = v.max_abs_output = v.linear_attention_diff = v.linear_attention_scale = 0.0;
    const std::size_t reps = m_times[0][0].size();
    v.primal_ms.assign(reps, 0.0);
    v.dual_ms.assign(reps, 0.0);
    for (std::size_t blk = 0; blk < m_blocks.size(); ++blk) {
      LayerComparison L;
      L.block = static_cast<int>(blk);
      L.heads = static_cast<int>(m_blocks[blk].size());
      for (std::size_t h = 0; h < m_blocks[blk].size(); ++h) {
        const Mat<double>& p = m_outputs[0][blk][h];
        const Mat<double>& d = m_outputs[1][blk][h];
        if (p.size()) {
          L.max_abs_diff = std::max(L.max_abs_diff, (p - d).cwiseAbs().maxCoeff());
          L.max_abs_output = std::max(L.max_abs_output, p.cwiseAbs().maxCoeff());
        }
        if (m_cfg.linear_attention) {
          const auto [diff, scale] = linear_attention_check(m_blocks[blk][h], d);
          L.linear_attention_diff = std::max(L.linear_attention_diff, diff);
          L.linear_attention_scale = std::max(L.linear_attention_scale, scale);
        }
      }
      L.primal_time = summarize_ms(m_times[0][blk], 0);
      L.dual_time = summarize_ms(m_times[1][blk], 0);
      L.primal_ms = L.primal_time.median_ms;
      L.dual_ms = L.dual_time.median_ms;
      L.speedup = speedup_of(m_times[0][blk], m_times[1][blk]);
      for (std::size_t r = 0; r < reps; ++r) {
        v.primal_ms[r] += m_times[0][blk][r];
        v.dual_ms[r] += m_times[1][blk][r];
      }
      v.max_abs_diff = std::max(v.max_abs_diff, L.max_abs_diff);
      v.max_abs_output = std::max(v.max_abs_output, L.max_abs_output);
      v.linear_attention_diff = std::max(v.linear_attention_diff, L.linear_attention_diff);
      v.linear_attention_scale = std::max(v.linear_attention_scale, L.linear_attention_scale);
      v.layers.push_back(L);
    }
    v.primal_time = summarize_ms(v.primal_ms, 0);
    v.dual_time = summarize_ms(v.dual_ms, 0);
    v.primal_ms_median = v.primal_time.median_ms;
    v.dual_ms_median = v.dual_time.median_ms;
    v.speedup = speedup_of(v.primal_ms, v.dual_ms);
    v.cpu_device = engine_thread_cpu();

    // The GPU's column: its difference from the CPU primal form, per layer and for the head on show.
    v.gpu_ran = !m_gpu.empty() && m_gpu.size() == m_blocks.size();
    v.gpu_device = m_target.gpu ? m_target.gpu->device().name : std::string();
    v.gpu_note = m_target.gpu ? m_gpu_note : m_target.note;
    v.gpu_kernel = m_gpu_kernel;
    v.gpu_math = m_cfg.gpu_math;
    v.gpu_max_abs_diff = 0;
    v.gpu_ms.clear();
    v.gpu_time = {};
    v.gpu_token_diff.clear();
    if (v.gpu_ran) {
      v.gpu_ms.assign(m_gpu[0].ms.size(), 0.0);
      for (std::size_t blk = 0; blk < m_blocks.size(); ++blk) {
        LayerComparison& L = v.layers[blk];
        for (std::size_t h = 0; h < m_blocks[blk].size(); ++h) {
          const Mat<double>& p = m_outputs[0][blk][h];
          if (p.size()) L.gpu_max_abs_diff = std::max(L.gpu_max_abs_diff, (p - m_gpu[blk].outputs[h]).cwiseAbs().maxCoeff());
        }
        L.gpu_time = summarize_ms(m_gpu[blk].ms, 2);
        for (std::size_t r = 0; r < v.gpu_ms.size() && r < m_gpu[blk].ms.size(); ++r) v.gpu_ms[r] += m_gpu[blk].ms[r];
        v.gpu_max_abs_diff = std::max(v.gpu_max_abs_diff, L.gpu_max_abs_diff);
      }
      v.gpu_time = summarize_ms(v.gpu_ms, 2);
      const Mat<double> gd =
          (m_outputs[0][static_cast<std::size_t>(m_shown_block)][static_cast<std::size_t>(m_shown_head)] -
           m_gpu[static_cast<std::size_t>(m_shown_block)].outputs[static_cast<std::size_t>(m_shown_head)])
              .cwiseAbs();
      v.gpu_token_diff.resize(static_cast<std::size_t>(gd.rows()));
      for (Eigen::Index t = 0; t < gd.rows(); ++t) v.gpu_token_diff[static_cast<std::size_t>(t)] = gd.row(t).maxCoeff();
    }
    const Mat<double>& op = m_outputs[0][static_cast<std::size_t>(m_shown_block)][static_cast<std::size_t>(m_shown_head)];
    const Mat<double>& od = m_outputs[1][static_cast<std::size_t>(m_shown_block)][static_cast<std::size_t>(m_shown_head)];
    const Mat<double> diff = (op - od).cwiseAbs();
    v.token_diff.resize(static_cast<std::size_t>(T));
    for (long t = 0; t < T; ++t) v.token_diff[static_cast<std::size_t>(t)] = diff.row(t).maxCoeff();
    const Mat<double> diff_t = diff.transpose();  // [d, T]: tokens run along the wide axis
    v.diff_map = plot::pool_max_abs(diff_t.data(), diff_t.rows(), T, T, kMaxBins, kMaxBins);

    // The dual form's matrix M = E ⊙ tril(QKᵀ + 1), built per mini-batch exactly as the dual form
    // weighs the gradients (the +1 only with the inner bias).
    const Mat<double> Q = shown.Q.template cast<double>(), K = shown.K.template cast<double>();
    const Vec<double> lam = shown.lambda.template cast<double>();
    const Vec<double> tau = v.member_chunked ? Vec<double>() : Vec<double>(shown.params.tau.template cast<double>());
    const double one = shown.options.bias ? 1.0 : 0.0;
    // A Hebbian member's output is o = M V with M[i, j] = Γ_ij β_j q_i·k_j (j ≤ i), Γ_ij the decay
    // from token j + 1 to i: cumulative log decays as the chunked form forms them.
    Vec<double> g = Vec<double>::Zero(T);
    const bool hebbian = v.member_chunked && !m_titans && !is_delta_rule(m_rule);
    if (hebbian && uses_alpha(m_rule))
      for (long t = 0; t < T; ++t) g(t) = (t ? g(t - 1) : 0.0) + std::log(static_cast<double>(shown.alpha(t)));
    const bool beta = uses_beta(m_rule);
    const auto M_member = [&](long i, long j) {
      if (j > i) return 0.0;
      return std::exp(g(i) - g(j)) * (beta ? lam(j) : 1.0) * Q.row(i).dot(K.row(j));
    };
    if (v.member_chunked) {
      v.attention = v.attention_start = {};
      if (hebbian) {
        v.attention = plot::pool_max_abs_fn(T, T, kMaxBins, kMaxBins, M_member);
        const long n = std::min(T, 96L);
        v.attention_start = plot::pool_max_abs_fn(n, n, kMaxBins, kMaxBins, M_member);
      }
      return;
    }
    const auto M = [&](long i, long j) {
      const long start = i / b * b;
      if (j < start || j > i) return 0.0;  // other mini-batches interact through W only
      return tau(i - start) * lam(j) * (Q.row(i).dot(K.row(j)) + one);
    };
    v.attention = plot::pool_max_abs_fn(T, T, kMaxBins, kMaxBins, M);
    const long n = std::min(T, 96L);
    v.attention_start = plot::pool_max_abs_fn(n, n, kMaxBins, kMaxBins, M);
  }

  // Plain causal linear attention, computed independently of the TTT code: O = tril(QKᵀ)V. Row
  // blocks keep the T×T scores to [block, T] at a time. Returns (max |O − ref|, max |ref|).
  static std::pair<double, double> linear_attention_check(const HeadInputs<S>& h, const Mat<double>& out) {
    const Mat<double> Q = h.Q.template cast<double>(), K = h.K.template cast<double>(),
                      V = h.V.template cast<double>();
    const long T = h.tokens();
    double diff = 0.0, scale = 0.0;
    constexpr long kBlock = 256;
    for (long i0 = 0; i0 < T; i0 += kBlock) {
      const long n = std::min(kBlock, T - i0);
      Mat<double> A = Q.middleRows(i0, n) * K.transpose();
      for (long r = 0; r < n; ++r) A.row(r).tail(T - (i0 + r + 1)).setZero();  // tril
      const Mat<double> ref = A * V;
      diff = std::max(diff, (out.middleRows(i0, n) - ref).cwiseAbs().maxCoeff());
      scale = std::max(scale, ref.cwiseAbs().maxCoeff());
    }
    return {diff, scale};
  }

  struct GpuBlock {
    std::vector<Mat<double>> outputs;  // [head] [T, d]
    std::vector<double> ms;            // the timed repetitions
  };

  PrimalDualConfig m_cfg;
  ModelLibrary& m_library;
  ComputeTarget m_target;
  std::vector<GpuBlock> m_gpu;  // [block]
  std::string m_gpu_kernel, m_gpu_note;
  Phase m_phase = Phase::Build;
  int m_done_steps = 0;
  std::string m_description;
  int m_shown_block = 0, m_shown_head = 0;
  MatrixRule m_rule = MatrixRule::LinearAttention;  // a matrix member
  bool m_titans = false;                             // Titans: its primal and chunked forms
  Vec<S> m_eta;                                      // Titans' momentum η_t
  std::vector<std::vector<HeadInputs<S>>> m_blocks;           // [block][head]
  std::vector<std::vector<double>> m_times[2];                // [form][block][rep]
  std::vector<std::vector<Mat<double>>> m_outputs[2];         // [form][block][head], the last repetition
};

}  // namespace

PrimalDualModule::PrimalDualModule(std::shared_ptr<ModelLibrary> library,
                                   std::shared_ptr<ComputeChoice> compute)
    : ModelAccess(std::move(library), std::move(compute)) {}
PrimalDualModule::~PrimalDualModule() = default;

bool PrimalDualModule::handle(const Command& command, ModuleContext& ctx) {
  // The previous results stay on show (marked stale by results_generation) while the new job runs.
  return start_request<PrimalDualRun>(
      command, ctx, true, [&](const PrimalDualRun& run, PrimalDualView& v) {
        m_job.reset();
        v.config = run.config;
        v.effective = run.config.effective();
        if (run.config.timing_reps < 1 || run.config.timing_reps > 50)
          throw std::invalid_argument("timing repetitions must be in [1, 50]");
        validate(run.config.head.toy() ? v.effective : run.config.head, limits());
        if (!run.config.head.ttt()) {
          const FastWeightPreset& p = fast_weight_preset(run.config.head.member_id());
          if (!member_is_matrix_rule(p) && p.id != "titans")
            throw std::invalid_argument(p.name + " has no parallel form: each chunk's weights depend on the "
                                        "last update nonlinearly (docs/MATH.md §11.10); choose TTT, linear "
                                        "attention, Mamba-2, DeltaNet, Gated DeltaNet or Titans");
          if (run.config.chunk < 1 || run.config.chunk > 2048)
            throw std::invalid_argument("the chunk size C must be in [1, 2048]");
        }
        if (run.config.precision == Precision::Float)
          m_job = std::make_unique<TypedJob<float>>(run.config, *m_library, m_compute->target());
        else
          m_job = std::make_unique<TypedJob<double>>(run.config, *m_library, m_compute->target());
        return "Primal vs dual: T = " + std::to_string(run.config.head.tokens());
      });
}

void PrimalDualModule::work(ModuleContext& ctx) {
  auto v = next_view();
  m_slot.step(ctx, *v, [&] {
    const bool finished = m_job->step(*v);
    m_slot.set_progress(ctx, *v, m_job->progress());
    return finished;
  });
  if (!m_slot.running()) m_job.reset();
  show(std::move(v), ctx);
}

}  // namespace tttlab::lab
