// `tttlab bench --device cuda --latency`: the paper's Fig. 3 / 15 in miniature. Time per token against
// context length T, for each layer of the comparison at one preset (random weights: the time does not
// depend on them):
//
//   prefill  the training forward of CudaTrainBackend (time_forward: bf16 products; forward_only, so
//            the activations of two blocks are allocated and the others take them in turn)
//            over B sequences of T tokens, B the largest batch <= 16 whose memory fits the GPU (sized
//            before anything is allocated, from two small probes of device_bytes() and the free memory);
//            per-token time = forward time / (B·T), median and spread over the timed repeats.
//   decode   CudaDecoder at batch 1: the context is walked token by token up to T (--decode-fill walk)
//            or set to T without running the steps (skip: CudaDecoder::skip_for_bench), then a
//            window of kDecodeWindow tokens is fed one at a time (each a full step with its logits
//            back on the host and the next token its argmax), each timed; median and spread over
//            the window.
//            At batch 16 and 512: CudaDecoder with batch B, B the largest <= 16 (<= 512) whose
//            weights, states and KV cache (T + kDecodeWindow tokens) fit the device's free memory
//            (cuda_decode_memory, before allocating); the context is always set to T with
//            skip_for_bench (walking B sequences to 32k tokens would take minutes; a step's time does
//            not depend on what the cache holds), then 2 untimed and kBatchWindow timed steps, each
//            B tokens in and B greedy tokens (argmax on the device) back. Per token = step time / B;
//            the row keeps the step time too (median_us_per_step), the B it ran and the products'
//            path (--decode-products: cublas, fp32 cuBLAS GEMMs, by default; or exact, the batched
//            split-k product bitwise equal to batch 1; kernels::DecodeProducts).
//
// A row that cannot be measured (a model the GPU path refuses, a batch that does not fit even at 1)
// is a row with status "skipped: <reason>", never a number.
#pragma once

#include <string>
#include <vector>

namespace tttlab::cli {

struct LatencyArgs {
  std::string preset = "125m";
  // The mixers, as --layer spells them ("softmax-attention" is the Transformer).
  std::vector<std::string> layers{"ttt-linear", "ttt-mlp", "softmax-attention", "mamba2"};
  std::string ttt_backbone =
      "m";  // TTT rows; the Transformer and Mamba-2 sit in the Transformer block
  std::vector<int> lengths{1024, 2048, 4096, 8192, 16384, 32768};
  int decode_max_context = 0;  // 0: the largest length
  std::string phases = "all";  // "all", "prefill" or "decode": the rows measured (and planned)
  // Batch-1 decode rows: "walk" the context token by token, or "skip" (set it; as the batched rows).
  std::string decode_fill = "walk";
  // Batch-16 and -512 decode rows: the products' path, "cublas" or "exact" (kernels::DecodeProducts).
  std::string decode_products = "cublas";
  std::string csv;             // write the rows here too ("" none)
  bool json = false;
  bool plan = false;  // print the rows to be measured; use no GPU
};

// One row of the figure. status "ok" (times set), "planned" (--plan) or "skipped: <reason>".
struct LatencyRow {
  std::string layer, phase;  // phase "prefill" or "decode"
  int batch = 0, T = 0;  // decode batches 16 and 512: the largest B that fit (planned: the most)
  double median_us = 0, q1_us = 0, q3_us = 0, min_us = 0, max_us = 0;  // per token
  int repeats = 0;  // timed samples the statistics are over
  double step_us = 0;   // decode: the median time of one step (B tokens), = median_us · B
  std::string context;  // decode: how the context T was reached, "walked" or "set" (skip_for_bench)
  std::string products;  // batched decode rows: "cublas" or "exact" (--decode-products); else ""
  std::string status = "ok";
  // prefill: the backend's device memory (GiB), estimated before allocating; batched decode: the
  // decoder's weights, states and KV cache (cuda_decode_memory)
  double device_gib = 0;
};

// Sorts and de-duplicates args.lengths; throws std::invalid_argument (one line) for anything the
// latency run cannot take: a length outside [64, 65536] or not a multiple of 64, an unknown preset, a
// decode limit below 0, phases, a decode fill or decode products it does not know, or a CSV path
// whose folder does not exist.
void validate_latency_args(LatencyArgs& args);

// The rows a run would produce, status "planned" (prefill batch 16, decode batches 16 and 512: the
// most a row may use).
std::vector<LatencyRow> plan_latency(const LatencyArgs& args);

// The CSV of the rows: a header line, then one line per row (empty time fields unless status is ok).
//   layer,phase,batch,T,median_us_per_token,q1_us,q3_us,min_us,max_us,repeats,median_us_per_step,
//   context,products,status
// (median_us_per_step and context: decode rows only; per token = per step / batch; products: the
// batch-16 and -512 decode rows only, planned or measured.)
std::string latency_csv(const std::vector<LatencyRow>& rows);

// Prints the plan (a table, or --json) and writes --csv; no GPU is touched.
void print_latency_plan(const LatencyArgs& args);

// Measures every row on CUDA device `device` and prints the table or, with args.json, one JSON
// object; writes args.csv. Throws std::runtime_error when the build has no CUDA kernels.
void run_latency(const LatencyArgs& args, int device, const std::string& device_text);

}  // namespace tttlab::cli
