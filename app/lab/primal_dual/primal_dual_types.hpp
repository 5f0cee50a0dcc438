// app/lab/primal_dual/primal_dual_types.hpp — the primal-vs-dual comparison and how it is requested.
//
// The same inputs go through inner_forward_primal and inner_forward_dual. With the MODEL source
// (head_config.hpp) that is every head of EVERY block of the model, each block reading the input its
// own layer sees (Model::mixer_input → TTTLayer::inputs); with the TOY source it is the one toy head.
// The job reports, per block, the largest difference of the outputs and the time of each form, and
// for the block and head on show: the difference per token and per output element, and the dual
// form's masked attention-like matrix M (per mini-batch, M[i, j] = τ_i λ_j (q_i·k_j + 1) for j ≤ i;
// the "+1" is the bias update and is absent with the bias off; across mini-batches tokens interact
// only through the committed state W, so M is block lower-triangular).
//
// With `linear_attention` set, every head is reduced to linear attention (docs/MATH.md §9.1, Theorem 1)
// on its own Q, K, V: one mini-batch b = T, W0 = 0, no LayerNorm, no residual, no bias, λ ≡ 1, τ ≡ 1,
// so E ≡ 1 and the output is exactly tril(QKᵀ)V, which the job also computes directly and compares.
//
// PRIMAL VS PARALLEL for the other members (HeadConfig::member, toy source only): the member's parallel
// form instead of TTT's dual form. Linear attention, Mamba-2, DeltaNet and Gated DeltaNet run
// matrix_rule_primal against matrix_rule_chunked (tttlab/fastweight/matrix_rules.hpp: SSD's cumulative
// decays, the UT transform for the delta rules) in chunks of `chunk` tokens (the last one shorter when
// chunk ∤ T), on the member's toy inputs (head_inputs.hpp, make_member_inputs). They are the same
// function: the difference is rounding (≤ 1e−12 of the output's size in double). "mini_batch" in the
// view is then the chunk, and M is the Hebbian members' causal weights M[i, j] = (Π_{j<s≤i} α_s) β_j q_i·k_j
// (o = M V exactly); the delta rules have no such matrix of q and k alone (attention is empty). Titans
// runs titans_primal against titans_chunked (tttlab/fastweight/titans.hpp, §11.9) with its mini-batch
// b = `chunk` in both (gradients at each mini-batch's start: b changes the function, both forms compute
// the same one); no matrix M either. LaCT has no parallel form (each chunk's weights depend on the last
// update nonlinearly, §11.10) and is refused with a message that says so.
#pragma once

#include <string>
#include <vector>

#include "lab/engine/job.hpp"
#include "lab/engine/compute_device.hpp"
#include "lab/engine/head_config.hpp"
#include "lab/plot/pooling.hpp"

namespace tttlab::lab {

enum class Precision { Float, Double };

// The dual form's speed-up over the repeats: each repeat's primal time over the same repeat's dual time
// (the forms run alternately, primal then dual, so a repeat compares two runs close in time and a
// change of load between them shows as spread), the median of those ratios and their range.
struct Speedup {
  double median = 0, min = 0, max = 0;
  int repeats = 0;
};
Speedup speedup_of(const std::vector<double>& primal_ms, const std::vector<double>& dual_ms);

struct PrimalDualConfig {
  HeadConfig head;                // source, text; block/head select what the matrices show
  Precision precision = Precision::Double;
  int timing_reps = 5;            // each form runs this many times; the median time is reported
  bool linear_attention = false;   // TTT only
  int chunk = 16;                   // the chunked form's C (members other than TTT), in [1, 2048]
  GpuMath gpu_math = GpuMath::Fp32;  // the GPU's dual form (when the panels compute on a GPU)

  bool operator==(const PrimalDualConfig&) const = default;
  // The toy head actually run (the linear-attention reduction shown in the toy settings).
  HeadConfig effective() const;
};

// One block (the toy source has one "block" of one head).
struct LayerComparison {
  int block = 0;
  int heads = 0;
  double max_abs_diff = 0;        // max over heads, tokens, features of |O_primal − O_dual|
  double max_abs_output = 0;      // max |O|
  double primal_ms = 0, dual_ms = 0;  // median over the repeats, all heads of the block
  double linear_attention_diff = 0;   // max |O − tril(QKᵀ)V| (with linear_attention)
  double linear_attention_scale = 0;  // max |tril(QKᵀ)V|
  TimingSummary primal_time, dual_time;  // all heads of the block, over the repeats
  Speedup speedup;                       // of the block, repeat by repeat
  // The GPU's dual form (gpu_ran): its largest difference from the CPU primal output, and its time.
  double gpu_max_abs_diff = 0;
  TimingSummary gpu_time;
};

struct PrimalDualView : JobView {
  PrimalDualConfig config;          // as requested
  HeadConfig effective;             // as run (toy)

  // The results below belong to request `results_generation` (0: none yet). While a new request
  // runs they still show the previous one.
  std::uint64_t results_generation = 0;

  std::string description;          // "tiny-brown, 4 blocks × 4 heads" / "toy head, seed 7"
  bool model_source = false;
  std::vector<unsigned char> bytes;
  long T = 0;
  int d = 0;
  int mini_batch = 0;               // b as run
  bool bias = true;                 // the inner bias exists (M has the +1)
  bool mlp = false;
  bool member_chunked = false;      // a member's chunked form ran (not TTT's dual form); mini_batch is C
  std::vector<LayerComparison> layers;
  double max_abs_diff = 0;          // over all layers
  double max_abs_output = 0;
  std::vector<double> primal_ms, dual_ms;  // every repetition, all layers together
  double primal_ms_median = 0, dual_ms_median = 0;
  TimingSummary primal_time, dual_time;    // the same, summarised (the CPU forms run no warm-up)
  Speedup speedup;                         // of the whole model (all blocks), repeat by repeat
  std::string cpu_device;                  // the CPU as timed, in words (engine_thread_cpu)

  // The third computation, on the GPU (when the panels compute on one): the CUDA dual-form kernel on
  // the same inputs in fp32, compared with the CPU primal output. With the Theorem 1 reduction and
  // T > 64 (longer than the kernels' largest mini-batch) the GPU computes tril(QKᵀ)V with its linear-
  // attention kernel instead, which Theorem 1 says is the same function.
  bool gpu_ran = false;
  std::string gpu_device;                  // "NVIDIA H100 80GB HBM3"
  std::string gpu_kernel;                  // what ran, in words
  std::string gpu_note;                    // why the GPU did not run (a GPU was chosen), or ""
  GpuMath gpu_math = GpuMath::Fp32;
  double gpu_max_abs_diff = 0;             // over all layers, against the CPU primal form
  std::vector<double> gpu_ms;              // every timed repetition, all layers together
  TimingSummary gpu_time;
  std::vector<double> gpu_token_diff;      // [T] of the block and head on show
  // The block and head on show:
  int shown_block = 0, shown_head = 0;
  std::vector<double> token_diff;   // [T] max_j |O_primal − O_dual|[t, j]
  plot::PooledMatrix attention;     // M, [T, T] pooled to ≤ 512²
  plot::PooledMatrix attention_start;  // M of the first min(T, 96) tokens, unpooled (the mini-batch blocks up close)
  plot::PooledMatrix diff_map;      // |O_primal − O_dual| transposed, [d, T], pooled to ≤ 512 columns
  bool linear_attention = false;
  double linear_attention_diff = 0; // max over layers of max |O − tril(QKᵀ)V|
  double linear_attention_scale = 0;// max |tril(QKᵀ)V|
};

struct PrimalDualRun {
  PrimalDualConfig config;
};

}  // namespace tttlab::lab
