// app/inspect/hidden_states.hpp — the hidden state of a trained model's TTT heads along a text, for
// analysis outside the app. `tttlab states` writes it to a safetensors file; `tttlab probe
// --checkpoint` prints one head of it as a table.
//
// WHAT IS COMPUTED. For each chosen block and head, the head's own inputs (Q, K, V, λ, τ, W₀, the
// LayerNorm γ and β) come from the model exactly as the app's inner-loop stepper takes them
// (lab/engine/head_inputs.hpp: the model computes in float, the inputs are widened to double), and
// the inner loop runs in the primal form in double (docs/MATH.md §3), token by token. So W_t here is
// the W_t that the stepper shows for the same model, text, block and head.
//
// THE FILE (safetensors; tensors are row-major, C order, readable with Python's safetensors or
// NumPy). T is the number of tokens, n the number of saved states, d the head dimension, h = 4d the
// hidden width of TTT-MLP:
//   tokens                          U8  [T]      the text's bytes (the tokens)
//   saved_tokens                    I64 [n]      token index t of each saved state (the state after t)
//   block{B}.head{H}.W1             [n, d, d]    TTT-Linear W_t  ([n, d, h] for TTT-MLP)
//   block{B}.head{H}.b1             [n, d]       its bias b_t    ([n, h] for TTT-MLP)
//   block{B}.head{H}.W2, .b2        [n, h, d], [n, d]             TTT-MLP only
//   block{B}.head{H}.W1_initial …   the same members of W₀ (no leading n): the state before token 0
//   block{B}.head{H}.loss_initial   [T]          ℓ(W₀; x_t)
//   block{B}.head{H}.loss_before    [T]          ℓ(W_{t−1}; x_t)
//   block{B}.head{H}.loss_after     [T]          ℓ(W_t; x_t)
//   block{B}.head{H}.lambda         [T]          λ_t, the learned per-token gate
//   block{B}.head{H}.tau            [T]          τ at t's position in its mini-batch
//   block{B}.head{H}.eta            [T]          η_t = τ·λ_t, the weight of token t's own gradient
// Weights are stored [in, out], as the engine multiplies them: z = k·W1 + b1 (k a row vector).
// The floating-point tensors are F32 by default (F64 on request). The metadata (`__metadata__`)
// names the format ("tttlab-states", version 1), the model, its layer, d, b, the blocks and heads,
// and which states were saved.
#pragma once

#include <cstdint>
#include <filesystem>
#include <functional>
#include <span>
#include <string>
#include <variant>
#include <vector>

#include "tttlab/io/safetensors.hpp"
#include "tttlab/model/model.hpp"
#include "tttlab/ttt/inner.hpp"

namespace tttlab::inspect {

// Which states are saved: after every token, after the last token of every mini-batch (where the
// state is committed, and the last token of the text), or after every `stride`-th token (t = stride−1,
// 2·stride−1, …, and the last token).
enum class SaveEvery { Token, MiniBatchEnd, Stride };

// The token indices whose state is saved, ascending, for T tokens and mini-batch size b.
std::vector<std::int64_t> saved_tokens(long T, int b, SaveEvery every, long stride);

// One head along the text. Per-token vectors have T entries; states[i] is the state after token
// saved[i].
struct HeadTrace {
  int block = 0, head = 0;
  InnerWeights<double> w0;
  std::vector<double> loss_initial, loss_before, loss_after, lambda, tau, eta;
  std::vector<InnerWeights<double>> states;
};

// Runs head `head` of TTT block `block` of `model` over `bytes` (from the empty prefix) and keeps
// the states after the tokens in `saved` (ascending). Throws std::invalid_argument with a one-line
// message when the block is not a TTT layer, the head does not exist or the text is empty.
HeadTrace trace_head(const Model<float>& model, const std::vector<unsigned char>& bytes, int block, int head,
                     const std::vector<std::int64_t>& saved);
// Whether every number of `trace` (the states, W0, the losses, lambda, tau and eta) is finite.
bool trace_is_finite(const HeadTrace& trace);
// The same for several heads of one block (the block's input is computed once).
std::vector<HeadTrace> trace_block(const Model<float>& model, const std::vector<unsigned char>& bytes, int block,
                                   const std::vector<int>& heads, const std::vector<std::int64_t>& saved);

struct StatesRequest {
  std::vector<unsigned char> bytes;  // the text (tokens)
  std::vector<int> blocks;           // empty: every block (all must be TTT layers)
  std::vector<int> heads;            // empty: every head
  SaveEvery every = SaveEvery::Token;
  long stride = 1;                   // for SaveEvery::Stride
  DType stored = DType::F32;         // F32 or F64
  std::uint64_t max_file_bytes = 2ull << 30;  // refused, before anything is computed, above this
  std::string model_source;          // recorded in the metadata (a path)
};

struct StatesSummary {
  long tokens = 0;
  std::vector<int> blocks, heads;
  std::vector<std::int64_t> saved;   // token index of each saved state
  std::uint64_t file_bytes = 0;      // the size of the file written (or, from estimate, to be written)
};

// The size of the file `r` asks for (tensor data; the header adds a few kB), and which blocks,
// heads and tokens it covers, after checking them against the model. Throws std::invalid_argument
// with a one-line message on a bad request (no TTT layer, a block or head out of range, an empty
// text, a stride < 1, a dtype other than F32 or F64).
StatesSummary plan_states(const ModelConfig& model, const StatesRequest& r);

// What computing `r` holds at its peak (bytes): every tensor of the file (the file's writer, or the
// Python module's arrays, keep them all), one block's traces in double, and the block's inputs (a few
// T × hidden matrices in double). For check_memory (tttlab/io/limits.hpp) before computing.
std::uint64_t states_memory(const ModelConfig& m, const StatesRequest& r, const StatesSummary& plan);

// One tensor of the states file as computed, before storage: the floating-point members in double
// (the file narrows them to r.stored), the tokens as bytes, saved_tokens as int64. Row-major.
struct StatesTensor {
  std::string name;
  std::vector<std::int64_t> shape;
  std::variant<std::span<const std::uint8_t>, std::span<const std::int64_t>, std::span<const double>> data;
};

// Computes the request and hands each tensor of the file, in the file's order, to `emit` (its data
// lives only during the call). Checks as plan_states does and refuses (NonFiniteModelError, with
// non_finite_model_message(r.model_source)) a head whose states or losses are not finite, before
// emitting any of that head's tensors. r.max_file_bytes is not checked here. `progress(done, total)`
// is called after each head. write_states_file and the Python module's Model.states both use it.
StatesSummary compute_states(const Model<float>& model, const StatesRequest& r,
                             const std::function<void(const StatesTensor&)>& emit,
                             const std::function<void(int, int)>& progress = {});

// Computes the request and writes the file atomically. Refuses (std::invalid_argument) a request
// whose file would exceed r.max_file_bytes, before computing, and (NonFiniteModelError, with
// non_finite_model_message(r.model_source)) a model whose states or losses are not finite, before
// writing: a file of NaN is no analysis. `progress(done, total)` is called
// after each head.
StatesSummary write_states_file(const Model<float>& model, const StatesRequest& r, const std::filesystem::path& out,
                                const std::function<void(int, int)>& progress = {});

}  // namespace tttlab::inspect
