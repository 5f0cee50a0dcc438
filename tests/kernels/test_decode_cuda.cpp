// GPU decoding against the CPU engine.
//
// 1. The primal decode kernels, ttt_linear_decode_step and ttt_mlp_decode_step, token by token
//    against the CPU engine's inner_forward_primal in fp64 (core/src/ttt/inner.cpp) over shapes
//    d ∈ {16, 32, 64}, b ∈ {1, 4, 16} and the LN / residual / bias options, for 2b + 3 tokens (so
//    every case commits at least twice and ends mid-mini-batch), B = 2 sequences, H = 2 heads.
//    Tolerance: 1e-4 relative to max|ref| for every token's output and for the final state and
//    accumulators (as tests/kernels/test_ttt_linear.cpp's decode test: fp32 dot products over at most
//    4d = 256 terms and a recurrence over ≤ 35 tokens stay near 1e-6; any wrong term is O(1)).
// 2. kernels::CudaDecoder against the CPU decoder (make_cpu_decoder, fp32) for small TTT-Linear and
//    TTT-MLP models of both backbones (random weights, fixed seed): a 21-token prefill, then 100
//    single tokens; the logits after every feed within 1e-3 relative to max|CPU logits| (both sides
//    are fp32 with sums in different orders; the differences are rounding, ~1e-6..1e-5, and a wrong
//    term is O(1)), with and without CUDA graphs.
// 3. Greedy decoding of 200 bytes from the shipped model (assets/models/tiny-brown, prompt "The "):
//    the same bytes on both devices (greedy decoding must not depend on the device); the smallest top-2 logit margin seen
//    is printed, so a failure can be told from a near tie.
// 4. Mamba-2 models (the Transformer backbone; the GPU's recurrent step of docs/MATH.md §8.8
//    against the CPU layer's recurrent form): the tiny preset with --layer mamba2 (D 128, 4
//    blocks, N = P = 64, H = 4) and two smaller shapes (N = 16, P = 16, H = 8; N = 24, P = 48,
//    K = 3, expand 1: sizes that are no multiple of a warp), random weights at the printed seed:
//    the same prefill of 21 tokens and 100 single feeds as in 2, logits within the same 1e-3
//    relative bound, with and without CUDA graphs; the fp32 recurrence over 121 tokens keeps the
//    differences at rounding (5.6e-7..8.5e-7 measured on an H200), and a wrong term (decay, skip,
//    gate, conv tap) is O(1). Greedy decoding of 100 bytes from a Mamba-2 model trained on the CPU
//    for 40 steps on a nine-word text (so that its logits have real maxima, not the near-ties of
//    random weights): the same bytes on both devices, the smallest top-2 margin printed.
// 5. Unsupported shapes are refused with one-line reasons (no GPU needed).
// 6. Softmax-attention (Transformer) models, the GPU's KV-cache step against the CPU layer's
//    cached attention (tttlab/nn/attention.hpp): the tiny and small presets with --layer
//    softmax-attention on both backbones (d = 32, 64) and two more head dims (d = 16 with 8 heads,
//    d = 128 with 2), random weights at the printed seed: the prefill of 21 tokens and 100 single
//    feeds of 2, logits within the same 1e-3 relative bound, with and without CUDA graphs (one graph
//    serves every position: t is read from device memory). Then 1 and 3 context splits over a
//    prefill of 600 tokens (3 tiles of 256 cached rows in one split: the running max/sum
//    rescaling across tiles) and 20 single feeds, same bound. Greedy decoding of 100 bytes from an
//    attention model trained on the CPU for 40 steps on the nine-word text: the same bytes on both
//    devices. A full KV cache refuses the feed (std::length_error naming the capacity) and leaves
//    the stream where it was; a cache larger than the device's memory is refused at construction
//    with the bytes it needs.
// 7. Batched decoding (CudaDecoderOptions::batch), the exact products (DecodeProducts::Exact): for
//    every model kind (TTT-Linear and TTT-MLP on both backbones and b = 16 or 5, softmax attention
//    on both backbones, Mamba-2 in two shapes, DeltaNet with d = 16, Gated DeltaNet with d = 24,
//    Titans with d = 24, b = 5, LaCT with C = 5 and linear attention on the Mamba-style backbone),
//    B = 5 or 20 sequences (20: a full group of 16 sequences of the batched product and a partial
//    one) fed different random tokens in lockstep,
//    with and without CUDA graphs: after a prefill of 21 steps and after each of 20 single steps
//    every sequence's logits row is BITWISE the logits of a batch-1 decoder fed that sequence's
//    tokens (the batched kernels compute each sequence with the same sums in the same order; a wrong
//    offset or stride gives another sequence's or a garbage row). Then 12 greedy steps (feed_greedy:
//    argmax on the device) choose the same tokens as std::max_element over the batch-1 logits. (The
//    batch-1 decoders are made with the default products, Cublas, which batch 1 ignores: bitwise
//    equality shows it.) Bad arguments are refused with one-line messages before anything runs, a
//    batch whose KV cache cannot fit is refused with the GiB it needs, and cuda_decode_memory grows
//    linearly with the batch.
// 8. Batched decoding with the cuBLAS products (DecodeProducts::Cublas, the default at B > 1: fp32
//    GEMMs, no TF32), the same models, B = 5, 20 and 64 (cuBLAS picks its kernels by shape), with
//    and without CUDA graphs (the GEMMs captured in the step's graph): after the prefill and each of
//    the 20 single steps every sequence's logits are within 1e-4 of the largest batch-1 logit
//    magnitude of its batch-1 decoder's (both are fp32 with the sums in different orders: rounding
//    differences, ~1e-6 after 41 steps; a wrong row, offset or missing term is O(1); the worst is
//    printed). Then 12 greedy steps, both decoders fed the batch's choices: with e = the bound in
//    absolute terms, the device's token must be the batch-1 argmax wherever the batch-1 top-2
//    margin exceeds 2e (logits within e of each other cannot reorder two entries more than 2e
//    apart), and within 2e of the batch-1 maximum where it does not (a near tie; counted and
//    printed).
// 9. DeltaNet and Gated DeltaNet models (the Transformer backbone; the GPU's per-token step against
//    the CPU layer, whose prefill runs the chunked (UT) form and whose single tokens run the primal
//    form of tttlab/fastweight/matrix_rules.hpp; docs/MATH.md §11.2–§11.3, §11.8): the tiny preset
//    with each layer (D 128, 4 blocks, d = 32) and three smaller shapes (d = 16 with K = 4; d = 24 with
//    K = 3: a head dim that is no power of two, so some threads of the step idle; d = 128 with one
//    head: the largest head dim, two row slices per column), random weights at the printed seed: the
//    prefill of 21 tokens and 100 single feeds of 2 (121 tokens), logits within the same 1e-3
//    relative bound, with and without CUDA graphs. Both sides are fp32: the state's recurrence, the
//    L2 norms and the chunked form's triangular solve round in other orders (5.0e-7..2.2e-6 measured
//    on an H200); a wrong term (the decay, β, a convolution tap, the norm or the gate) is O(1).
//    Greedy decoding of 100 bytes from a model of each layer trained on the CPU for 40 steps on the
//    nine-word text: the same bytes on both devices. Batches of both layers run in 7 and 8 (bitwise, and within 1e-4
//    through cuBLAS), and cuda_decode_memory counts the states [H, d, d] and the convolutions'
//    histories of every block per sequence.
// 10. Titans models (the Transformer backbone; the GPU's per-token step against the CPU layer, whose
//    prefill runs the chunked form and whose single tokens run titans_step; docs/MATH.md §11.9): the
//    tiny preset with --layer titans (D 128, 4 blocks, d = 32, b = 16) and three smaller shapes (d = 16,
//    K = 4, b = 1: the memory's start moves every token; d = 24, K = 3, b = 5: a head dim that is no
//    power of two and mini-batches that end at every residue of the 21-token prefill; d = 128 with
//    one head, b = 16), random weights at the printed seed: the prefill of 21 tokens and 100 single
//    feeds of 2, logits within the same 1e-3 relative bound, with and without CUDA graphs (b graphs:
//    the step at pos = b − 1 moves the start). Both sides are fp32 with sums in other orders; a wrong
//    term (a gate, the momentum, the decay, the start's timing, a LayerNorm) is O(1). Greedy decoding
//    of 100 bytes from a model (b = 8) trained on the CPU for 40 steps on the nine-word text: the same
//    bytes on both devices. Batches run in 7 and 8, and cuda_decode_memory counts the three states.
// 11. LaCT models (the Transformer backbone; the GPU's per-token step, a sliding-window attention over
//    a ring of W = C cached rows and the fast weights' chunk update at t ≡ 0 (mod C), against the CPU
//    layer's stream, lact_stream and windowed_attention_forward_cached): the tiny preset with --layer
//    lact (D 128, 4 attention heads, 2 fast heads, C = 64: one update in 121 tokens) and three smaller
//    shapes (C = 8 with 2 fast heads of 32: fifteen updates and a full window from token 8 on; C = 5
//    with 4 fast heads of 16 and 2 attention heads of 32: a chunk that is no power of two and
//    updates that fall inside the prefill; one head of each of 128, C = 16), random weights at the
//    printed seed: the prefill of 21 tokens and 100 single feeds of 2, logits within the same 1e-3
//    relative bound, with and without CUDA graphs (one graph: t is read from device memory). Both
//    sides are fp32 with sums in other orders; a wrong term (a rate, the momentum, the
//    renormalisation, RoPE's position, the window's edge) is O(1). Greedy decoding of 100 bytes from a
//    model (C = 8) trained on the CPU for 40 steps on the nine-word text: the same bytes on both
//    devices. Batches run in 7 and 8, and cuda_decode_memory counts the per-sequence state.
// 12. Linear attention (both backbones; the GPU's per-token step S ← S + kᵀv, z = q S against the CPU
//    layer's linear_attention_chunk): D 128 with d = 32 on each backbone, d = 24 (4 heads of a
//    width that is no power of two) and d = 128 (one head), random weights at the printed seed: the
//    prefill of 21 tokens and 100 single feeds of 2, logits within the same 1e-3 relative bound, with
//    and without CUDA graphs. Greedy decoding of 100 bytes from a model trained on the CPU for 40
//    steps on the nine-word text: the same bytes on both devices. A batch runs in 7 and 8.
// Seeds are fixed and printed (test_seed(): a hash of the test's name; TTTLAB_TEST_SEED overrides).
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <memory>
#include <random>
#include <string>
#include <vector>

#include "test_ttt_util.hpp"
#include "tttlab/kernels/decode_cuda.hpp"
#include "tttlab/model/checkpoint.hpp"
#include "tttlab/model/decoder.hpp"
#include "tttlab/model/memory.hpp"
#include "tttlab/model/model.hpp"
#include "tttlab/train/trainer.hpp"

namespace tttlab::kernels::test {
namespace {

constexpr double kTolKernel = 1e-4;
constexpr double kTolLogits = 1e-3;

// ---- 1. the inner decode kernels ---------------------------------------------------------------

void run_inner_case(InnerModel model, const TttDims& D, const TttOptions& opt, std::mt19937_64& rng) {
  const bool mlp = model == InnerModel::MLP;
  const int d = D.head_dim, hid = mlp ? 4 * d : d, T = D.seq_len;
  const std::size_t BH = std::size_t(D.batch) * D.heads;
  LinearInputs in = random_linear_inputs(D, opt, rng);
  // Per-sequence initial states.
  std::vector<float> W1 = randn_vec(BH * d * hid, rng, 1.0 / std::sqrt(double(d)));
  std::vector<float> b1 = randn_vec(BH * hid, rng, 0.1);
  std::vector<float> W2 = mlp ? randn_vec(BH * hid * d, rng, 1.0 / std::sqrt(double(hid))) : std::vector<float>();
  std::vector<float> b2 = mlp ? randn_vec(BH * d, rng, 0.1) : std::vector<float>();
  if (!opt.bias) {
    std::fill(b1.begin(), b1.end(), 0.0f);
    std::fill(b2.begin(), b2.end(), 0.0f);
  }

  // The CPU engine, fp64, head by head.
  const InnerOptions io = inner_options(opt, D, model);
  std::vector<Mat<double>> ref_out(BH);
  std::vector<InnerState<double>> ref_st(BH);
  for (int n = 0; n < D.batch; ++n)
    for (int h = 0; h < D.heads; ++h) {
      const std::size_t s = std::size_t(n) * D.heads + h;
      InnerWeights<double> w0 = InnerWeights<double>::zeros(io, d);
      w0.W1 = mat_at(W1, s * d * hid, d, hid);
      w0.b1 = row_at(b1, s * hid, hid);
      if (mlp) {
        w0.W2 = mat_at(W2, s * hid * d, hid, d);
        w0.b2 = row_at(b2, s * d, d);
      }
      ref_st[s] = InnerState<double>::start(w0);
      inner_forward_primal<double>(io, head_params(in, h), head_slice(in.Q, D, n, h), head_slice(in.K, D, n, h),
                                   head_slice(in.V, D, n, h), lambda_slice(in.lam, D, n, h), ref_st[s], ref_out[s]);
    }

  DeviceBuffer gW1(W1), gb1(b1), gaW1(std::vector<float>(W1.size(), 0.0f)), gab1(std::vector<float>(b1.size(), 0.0f));
  DeviceBuffer gW2(W2), gb2(b2), gaW2(std::vector<float>(W2.size(), 0.0f)), gab2(std::vector<float>(b2.size(), 0.0f));
  DecodeTokenBuffers tok(in);
  double worst = 0;
  for (int t = 0; t < T; ++t) {
    tok.upload(in, t);
    const int pos = t % D.mini_batch;
    if (mlp) {
      TttMlpDecodeArgs a;
      static_cast<TttDecodeInputs&>(a) = tok.inputs(in);
      a.W1 = gW1.get();
      a.b1 = gb1.get();
      a.W2 = gW2.get();
      a.b2 = gb2.get();
      a.acc_W1 = gaW1.get();
      a.acc_b1 = gab1.get();
      a.acc_W2 = gaW2.get();
      a.acc_b2 = gab2.get();
      a.pos = pos;
      a.o = tok.o.get();
      ttt_mlp_decode_step(a);
    } else {
      TttLinearDecodeArgs a;
      static_cast<TttDecodeInputs&>(a) = tok.inputs(in);
      a.W = gW1.get();
      a.b = gb1.get();
      a.acc_W = gaW1.get();
      a.acc_b = gab1.get();
      a.pos = pos;
      a.o = tok.o.get();
      ttt_linear_decode_step(a);
    }
    const std::vector<float> got = tok.o.download();
    std::vector<double> r;
    for (int n = 0; n < D.batch; ++n)
      for (int h = 0; h < D.heads; ++h)
        for (int c = 0; c < d; ++c) r.push_back(ref_out[std::size_t(n) * D.heads + h](t, c));
    const ErrorStat e = compare(got, r);
    worst = std::max(worst, e.rel);
    ASSERT_TRUE(within(("token " + std::to_string(t) + " (pos " + std::to_string(pos) + ")").c_str(), e, kTolKernel,
                       got, r));
  }
  // Final states: committed weights and the open mini-batch's accumulators.
  std::vector<double> rW1, rb1, raW1, rab1, rW2, rb2, raW2, rab2;
  auto append = [](std::vector<double>& dst, const auto& m) {
    for (Eigen::Index i = 0; i < m.rows(); ++i)
      for (Eigen::Index j = 0; j < m.cols(); ++j) dst.push_back(m(i, j));
  };
  for (std::size_t s = 0; s < BH; ++s) {
    append(rW1, ref_st[s].base.W1);
    append(rb1, ref_st[s].base.b1);
    append(raW1, ref_st[s].acc.W1);
    append(rab1, ref_st[s].acc.b1);
    if (mlp) {
      append(rW2, ref_st[s].base.W2);
      append(rb2, ref_st[s].base.b2);
      append(raW2, ref_st[s].acc.W2);
      append(rab2, ref_st[s].acc.b2);
    }
  }
  double ws = 0;
  expect_within("state W1", gW1.download(), rW1, kTolKernel, ws);
  expect_within("acc W1", gaW1.download(), raW1, kTolKernel, ws);
  if (opt.bias) {
    expect_within("state b1", gb1.download(), rb1, kTolKernel, ws);
    expect_within("acc b1", gab1.download(), rab1, kTolKernel, ws);
  }
  if (mlp) {
    expect_within("state W2", gW2.download(), rW2, kTolKernel, ws);
    expect_within("acc W2", gaW2.download(), raW2, kTolKernel, ws);
    if (opt.bias) {
      expect_within("state b2", gb2.download(), rb2, kTolKernel, ws);
      expect_within("acc b2", gab2.download(), rab2, kTolKernel, ws);
    }
  }
  std::printf("[   INFO   ] %s decode %s: worst rel. error outputs %.3g, states %.3g\n", mlp ? "mlp" : "linear",
              describe(D, opt).c_str(), worst, ws);
}

void run_inner_grid(InnerModel model) {
  const std::uint64_t seed = test_seed();
  SCOPED_TRACE("seed " + std::to_string(seed));
  std::printf("[   INFO   ] seed %llu\n", static_cast<unsigned long long>(seed));
  std::mt19937_64 rng(seed);
  for (const int d : {16, 32, 64})
    for (const int b : {1, 4, 16})
      for (const int f : {0, 1, 2, 4, 7}) {
        if (quick_mode() && (d != 32 || f != 0)) continue;
        const TttDims D{2, 2, 2 * b + 3, d, b};
        const TttOptions opt = flags(f);
        SCOPED_TRACE(describe(D, opt));
        run_inner_case(model, D, opt, rng);
        if (::testing::Test::HasFatalFailure()) return;
      }
}

TEST(DecodeKernels, LinearStepMatchesThePrimalFormInFp64) {
  TTTLAB_REQUIRE_GPU();
  run_inner_grid(InnerModel::Linear);
}

TEST(DecodeKernels, MlpStepMatchesThePrimalFormInFp64) {
  TTTLAB_REQUIRE_GPU();
  run_inner_grid(InnerModel::MLP);
}

TEST(DecodeKernels, MlpStepRefusesBadArguments) {
  TttMlpDecodeArgs a;  // null pointers: refused before any launch, so no GPU is needed
  a.dims = TttDims{1, 1, 1, 32, 4};
  EXPECT_THROW(ttt_mlp_decode_step(a), std::invalid_argument);
  a.pos = 4;
  try {
    ttt_mlp_decode_step(a);
    FAIL() << "expected std::invalid_argument";
  } catch (const std::invalid_argument& e) {
    EXPECT_NE(std::string(e.what()).find("pos"), std::string::npos) << e.what();
  }
}

// ---- 2. the whole-model decoder ------------------------------------------------------------------

ModelConfig small_model(SeqLayerKind kind, bool mamba, int b) {
  ModelConfig c;
  c.hidden_size = 128;
  c.num_attention_heads = 4;  // d = 32
  c.num_hidden_layers = 2;
  c.intermediate_size = 256;
  c.mini_batch_size = b;
  c.seq_layer = kind;
  c.mamba_backbone = mamba;
  c.ttt_base_lr = kind == SeqLayerKind::TTTMLP ? 0.1 : 1.0;
  return c;
}

double rel_diff(const std::vector<float>& got, const std::vector<float>& ref) {
  double m = 0, e = 0;
  for (std::size_t i = 0; i < ref.size(); ++i) {
    m = std::max(m, std::abs(double(ref[i])));
    e = std::max(e, std::isfinite(got[i]) ? std::abs(double(got[i]) - double(ref[i])) : INFINITY);
  }
  return e / std::max(m, 1e-30);
}

void compare_decoders(const Model<float>& model, bool graphs, std::uint64_t seed, int steps) {
  CudaDecoderOptions o;
  o.cuda_graphs = graphs;
  CudaDecoder gpu(model, o);
  const auto cpu = make_cpu_decoder(model);
  std::mt19937_64 rng(seed);
  std::uniform_int_distribution<int> byte(0, 255);
  std::vector<int> prompt(21);
  for (int& t : prompt) t = byte(rng);
  std::vector<float> lg, lc;
  gpu.feed(prompt, lg);
  cpu->feed(prompt, lc);
  ASSERT_EQ(lg.size(), lc.size());
  double worst = rel_diff(lg, lc);
  ASSERT_LE(worst, kTolLogits) << "after the prefill";
  for (int i = 0; i < steps; ++i) {
    const int tok[1] = {byte(rng)};
    gpu.feed(tok, lg);
    cpu->feed(tok, lc);
    const double r = rel_diff(lg, lc);
    worst = std::max(worst, r);
    ASSERT_LE(r, kTolLogits) << "after token " << gpu.position();
  }
  EXPECT_EQ(gpu.position(), cpu->position());
  std::printf("[   INFO   ] %s, %s backbone, b=%d, %s: worst rel. logit difference %.3g over %d feeds\n",
              to_string(model.config().seq_layer).c_str(), model.config().mamba_backbone ? "m" : "t",
              model.config().mini_batch_size, graphs ? "graphs" : "launches", worst, steps + 1);
}

TEST(CudaDecoder, LogitsMatchTheCpuDecoder) {
  TTTLAB_REQUIRE_GPU();
  const std::uint64_t seed = test_seed();
  SCOPED_TRACE("seed " + std::to_string(seed));
  std::printf("[   INFO   ] seed %llu\n", static_cast<unsigned long long>(seed));
  int i = 0;
  for (const auto kind : {SeqLayerKind::TTTLinear, SeqLayerKind::TTTMLP})
    for (const bool mamba : {true, false})
      for (const int b : {16, 5}) {
        SCOPED_TRACE(to_string(kind) + (mamba ? " m" : " t") + " b=" + std::to_string(b));
        const Model<float> model(small_model(kind, mamba, b), seed + i);
        compare_decoders(model, /*graphs=*/i % 2 == 0, seed + 100 + i, 100);
        ++i;
        if (::testing::Test::HasFatalFailure()) return;
      }
}

std::string shipped_dir(const char* name) {
  return std::string(TTTLAB_REFERENCE_DIR) + "/../../assets/models/" + name;
}

TEST(CudaDecoder, TrainedMlpModelLogitsMatchTheCpuDecoder) {
  TTTLAB_REQUIRE_GPU();
  const auto model = load_model(shipped_dir("long-ttt-mlp-m"));
  compare_decoders(*model, true, 77, 100);
}

// Greedy decoding from the host's argmax (first of equal maxima, as `tttlab generate`); returns the
// bytes and lowers `margin` to the smallest gap between the best and second-best logit seen.
std::string greedy(TokenDecoder& dec, const std::string& prompt, int n, double& margin) {
  std::vector<int> p(prompt.begin(), prompt.end());
  std::vector<float> lg;
  dec.feed(p, lg);
  std::string out;
  for (int i = 0; i < n; ++i) {
    const int best = static_cast<int>(std::max_element(lg.begin(), lg.end()) - lg.begin());
    float second = -INFINITY;
    for (int v = 0; v < static_cast<int>(lg.size()); ++v)
      if (v != best) second = std::max(second, lg[v]);
    margin = std::min(margin, double(lg[best]) - double(second));
    out.push_back(static_cast<char>(best));
    const int tok[1] = {best};
    dec.feed(tok, lg);
  }
  return out;
}

TEST(CudaDecoder, GreedyBytesOfTheShippedModelAreTheCpus) {
  TTTLAB_REQUIRE_GPU();
  const auto model = load_model(shipped_dir("tiny-brown"));
  double m_cpu = INFINITY, m_gpu = INFINITY;
  const auto cpu = make_cpu_decoder(*model);
  CudaDecoder gpu(*model);
  const std::string a = greedy(*cpu, "The ", 200, m_cpu);
  const std::string b = greedy(gpu, "The ", 200, m_gpu);
  std::printf("[   INFO   ] smallest top-2 logit margin: CPU %.3g, GPU %.3g\n", m_cpu, m_gpu);
  EXPECT_EQ(a, b);
}

// ---- 4. Mamba-2 ----------------------------------------------------------------------------------

ModelConfig mamba2_model(int D, int layers, int F, int N, int P, int K, int expand) {
  ModelConfig c;
  c.hidden_size = D;
  c.num_attention_heads = 4;
  c.num_hidden_layers = layers;
  c.intermediate_size = F;
  c.seq_layer = SeqLayerKind::Mamba2;
  c.mamba_backbone = false;
  c.mamba2_d_state = N;
  c.mamba2_headdim = P;
  c.mamba2_d_conv = K;
  c.mamba2_expand = expand;
  return c;
}

// DeltaNet and Gated DeltaNet models (section 9; also in the batches of 7 and 8): two blocks of
// width D with H heads and convolutions of width K, the Transformer backbone.
ModelConfig deltanet_model(SeqLayerKind kind, int D, int H, int K) {
  ModelConfig c;
  c.hidden_size = D;
  c.num_attention_heads = H;
  c.num_hidden_layers = 2;
  c.intermediate_size = 2 * D;
  c.seq_layer = kind;
  c.mamba_backbone = false;
  c.conv_kernel = K;
  return c;
}

// Titans models (section 10; also in the batches of 7 and 8): two blocks of width D with H heads,
// convolutions of width K and the memory's mini-batch b, the Transformer backbone.
ModelConfig titans_model(int D, int H, int K, int b) {
  ModelConfig c = deltanet_model(SeqLayerKind::Titans, D, H, K);
  c.mini_batch_size = b;
  return c;
}

// LaCT models (section 11; also in the batches of 7 and 8): two blocks of width D with H attention
// heads, H_f fast-weight heads and the chunk (and window) C, the Transformer backbone.
ModelConfig lact_model(int D, int H, int Hf, int C) {
  ModelConfig c = deltanet_model(SeqLayerKind::Lact, D, H, 4);
  c.lact_heads = Hf;
  c.lact_chunk_size = C;
  return c;
}

TEST(CudaDecoder, Mamba2LogitsMatchTheCpuDecoder) {
  TTTLAB_REQUIRE_GPU();
  const std::uint64_t seed = test_seed();
  SCOPED_TRACE("seed " + std::to_string(seed));
  std::printf("[   INFO   ] seed %llu\n", static_cast<unsigned long long>(seed));
  ModelConfig tiny = ModelConfig::preset("tiny");
  tiny.seq_layer = SeqLayerKind::Mamba2;
  tiny.mamba_backbone = false;
  const ModelConfig shapes[] = {tiny, mamba2_model(64, 2, 128, 16, 16, 4, 2),
                                mamba2_model(96, 2, 192, 24, 48, 3, 1)};
  int i = 0;
  for (const ModelConfig& c : shapes) {
    ASSERT_EQ(cuda_decode_unsupported(c), "");
    const Model<float> model(c, seed + i);
    for (const bool graphs : {true, false}) {
      SCOPED_TRACE("D " + std::to_string(c.hidden_size) + " N " + std::to_string(c.mamba2_d_state) +
                   " P " + std::to_string(c.mamba2_headdim) + (graphs ? " graphs" : " launches"));
      std::printf("[   INFO   ] mamba2 D %d, N %d, P %d, K %d, expand %d:\n", c.hidden_size,
                  c.mamba2_d_state, c.mamba2_headdim, c.mamba2_d_conv, c.mamba2_expand);
      compare_decoders(model, graphs, seed + 200 + i, 100);
      if (::testing::Test::HasFatalFailure()) return;
    }
    ++i;
  }
}

// Trains `model` on the CPU for 40 steps on a nine-word text (so that its logits have real maxima,
// not the near-ties of random weights), then decodes 100 greedy bytes on both devices: the same
// bytes. The smallest top-2 margins are printed.
void expect_same_greedy_after_training(const ModelConfig& model_cfg, std::uint64_t seed,
                                       const std::string& tag) {
  // A nine-word text from a fixed linear congruential sequence (as tests/core/word_corpus.hpp).
  const std::filesystem::path dir = std::filesystem::temp_directory_path() /
                                    ("tttlab_" + tag + "_decode_" + std::to_string(seed));
  std::filesystem::create_directories(dir);
  {
    const char* words[] = {"the ", "cat ", "sat ", "on ", "a ", "mat. ", "dogs ", "run ", "fast. "};
    std::ofstream f(dir / "corpus.txt", std::ios::binary);
    unsigned x = 1;
    for (int i = 0; i < 6000; ++i) {
      x = x * 1103515245u + 12345u;
      f << words[(x >> 16) % 9];
    }
  }
  TrainConfig cfg;
  cfg.model = model_cfg;
  cfg.model.max_position_embeddings = 64;
  cfg.data = (dir / "corpus.txt").string();
  cfg.steps = 40;
  cfg.batch_size = 4;
  cfg.seq_len = 64;
  cfg.lr = 1e-2;
  cfg.seed = seed;
  cfg.threads = 2;
  cfg.eval_windows = 4;
  Trainer t(cfg, TextData::load(cfg));
  double loss = 0;
  while (!t.finished()) loss = t.step().loss;
  std::printf("[   INFO   ] %s: trained 40 steps on the CPU: last loss %.3f nats/byte\n",
              tag.c_str(), loss);
  std::filesystem::remove_all(dir);
  const Model<float>& model = t.model();
  double m_cpu = INFINITY, m_gpu = INFINITY;
  const auto cpu = make_cpu_decoder(model);
  CudaDecoder gpu(model);
  const std::string a = greedy(*cpu, "the cat ", 100, m_cpu);
  const std::string b = greedy(gpu, "the cat ", 100, m_gpu);
  std::printf(
      "[   INFO   ] CPU: \"%s\"\n[   INFO   ] smallest top-2 logit margin: CPU %.3g, GPU %.3g\n",
      a.c_str(), m_cpu, m_gpu);
  EXPECT_EQ(a, b);
}

TEST(CudaDecoder, Mamba2GreedyBytesOfATrainedModelAreTheCpus) {
  TTTLAB_REQUIRE_GPU();
  const std::uint64_t seed = test_seed();
  std::printf("[   INFO   ] seed %llu\n", static_cast<unsigned long long>(seed));
  ModelConfig m = mamba2_model(64, 2, 128, 32, 32, 4, 2);
  m.mamba2_chunk_size = 16;
  expect_same_greedy_after_training(m, seed, "mamba2");
}

// ---- 5. refusals -------------------------------------------------------------------------------

TEST(CudaDecoder, RefusesModelsItDoesNotRun) {
  for (const bool mamba : {false, true})
    EXPECT_EQ(cuda_decode_unsupported(small_model(SeqLayerKind::LinearAttention, mamba, 16)), "");
  ModelConfig lin = small_model(SeqLayerKind::LinearAttention, false, 16);
  lin.hidden_size = 256, lin.num_attention_heads = 1;  // d = 256
  EXPECT_NE(cuda_decode_unsupported(lin).find("linear-attention head dim of at most 128"),
            std::string::npos);
  ModelConfig soft = small_model(SeqLayerKind::SoftmaxAttention, true, 16);
  EXPECT_EQ(cuda_decode_unsupported(soft), "");
  soft.num_attention_heads = 8;  // d = 16
  EXPECT_EQ(cuda_decode_unsupported(soft), "");
  soft.hidden_size = 96;  // d = 12: not a power of two
  EXPECT_NE(cuda_decode_unsupported(soft).find("head dim"), std::string::npos);
  soft.hidden_size = 256, soft.num_attention_heads = 1;  // d = 256
  EXPECT_NE(cuda_decode_unsupported(soft).find("head dim"), std::string::npos);
  ModelConfig wide = small_model(SeqLayerKind::TTTLinear, true, 16);
  wide.num_attention_heads = 1;  // d = 128: supported
  EXPECT_EQ(cuda_decode_unsupported(wide), "");
  wide.hidden_size = 256;  // d = 256
  wide.intermediate_size = 256;
  EXPECT_NE(cuda_decode_unsupported(wide).find("head dim"), std::string::npos);
  ModelConfig big_b = small_model(SeqLayerKind::TTTMLP, true, 128);
  EXPECT_NE(cuda_decode_unsupported(big_b).find("mini-batch"), std::string::npos);
  EXPECT_EQ(cuda_decode_unsupported(small_model(SeqLayerKind::TTTMLP, false, 64)), "");
  ModelConfig m2 = mamba2_model(64, 2, 128, 16, 16, 4, 2);
  EXPECT_EQ(cuda_decode_unsupported(m2), "");
  m2.mamba_backbone = true;
  EXPECT_NE(cuda_decode_unsupported(m2), "");
  EXPECT_EQ(cuda_decode_unsupported(m2).find('\n'), std::string::npos);
  for (const auto kind : {SeqLayerKind::DeltaNet, SeqLayerKind::GatedDeltaNet}) {
    ModelConfig dn = small_model(kind, false, 16);
    dn.num_attention_heads = 1;  // d = 128: supported
    EXPECT_EQ(cuda_decode_unsupported(dn), "");
    dn.hidden_size = 256;  // d = 256
    EXPECT_NE(cuda_decode_unsupported(dn).find("head dim of at most 128"), std::string::npos);
    dn.hidden_size = 128;
    dn.mamba_backbone = true;
    EXPECT_NE(cuda_decode_unsupported(dn).find("Transformer backbone"), std::string::npos);
  }
  ModelConfig ti = small_model(SeqLayerKind::Titans, false, 16);
  EXPECT_EQ(cuda_decode_unsupported(ti), "");
  ti.num_attention_heads = 1;  // d = 128: supported
  EXPECT_EQ(cuda_decode_unsupported(ti), "");
  ti.hidden_size = 256;  // d = 256
  EXPECT_NE(cuda_decode_unsupported(ti).find("titans head dim of at most 128"), std::string::npos);
  ModelConfig la = small_model(SeqLayerKind::Lact, false, 16);
  EXPECT_EQ(cuda_decode_unsupported(la), "");
  la.lact_muon = true;
  EXPECT_NE(cuda_decode_unsupported(la).find("without Muon"), std::string::npos);
  la.lact_muon = false;
  la.num_attention_heads = 8;  // d_a = 16: supported
  EXPECT_EQ(cuda_decode_unsupported(la), "");
  la.num_attention_heads = 2;
  la.hidden_size = 96;  // d_a = 48: no power of two
  EXPECT_NE(cuda_decode_unsupported(la).find("lact attention head dim"), std::string::npos);
  // The constructor checks before touching the device.
  ModelConfig muon = small_model(SeqLayerKind::Lact, false, 16);
  muon.lact_muon = true;
  const Model<float> model(muon, 1);
  EXPECT_THROW(CudaDecoder{model}, std::invalid_argument);
  // Options are checked before the device is touched, too.
  const Model<float> sm(small_model(SeqLayerKind::SoftmaxAttention, false, 16), 1);
  CudaDecoderOptions o;
  o.max_context = long(k_max_positions) + 1;
  EXPECT_THROW((CudaDecoder{sm, o}), std::invalid_argument);
  o.max_context = 0;
  o.attention_splits = -1;
  EXPECT_THROW((CudaDecoder{sm, o}), std::invalid_argument);
}

// ---- 6. softmax attention ----------------------------------------------------------------------

ModelConfig attention_preset(const std::string& name, bool mamba) {
  ModelConfig c = ModelConfig::preset(name);
  c.seq_layer = SeqLayerKind::SoftmaxAttention;
  c.mamba_backbone = mamba;
  return c;
}

TEST(CudaDecoder, AttentionLogitsMatchTheCpuDecoder) {
  TTTLAB_REQUIRE_GPU();
  const std::uint64_t seed = test_seed();
  SCOPED_TRACE("seed " + std::to_string(seed));
  std::printf("[   INFO   ] seed %llu\n", static_cast<unsigned long long>(seed));
  ModelConfig d16 = small_model(SeqLayerKind::SoftmaxAttention, false, 16);
  d16.num_attention_heads = 8;
  ModelConfig d128 = small_model(SeqLayerKind::SoftmaxAttention, true, 16);
  d128.hidden_size = 256;
  d128.num_attention_heads = 2;
  const ModelConfig shapes[] = {attention_preset("tiny", true), attention_preset("tiny", false),
                                attention_preset("small", false), d16, d128};
  int i = 0;
  for (const ModelConfig& c : shapes) {
    ASSERT_EQ(cuda_decode_unsupported(c), "");
    const Model<float> model(c, seed + i);
    for (const bool graphs : {true, false}) {
      SCOPED_TRACE("D " + std::to_string(c.hidden_size) + " H " +
                   std::to_string(c.num_attention_heads) + (graphs ? " graphs" : " launches"));
      std::printf("[   INFO   ] softmax attention D %d, H %d, %d blocks:\n", c.hidden_size,
                  c.num_attention_heads, c.num_hidden_layers);
      compare_decoders(model, graphs, seed + 300 + i, 100);
      if (::testing::Test::HasFatalFailure()) return;
    }
    ++i;
  }
}

TEST(CudaDecoder, AttentionSplitsAndTilesMatchTheCpuDecoder) {
  TTTLAB_REQUIRE_GPU();
  const std::uint64_t seed = test_seed();
  SCOPED_TRACE("seed " + std::to_string(seed));
  std::printf("[   INFO   ] seed %llu\n", static_cast<unsigned long long>(seed));
  const Model<float> model(attention_preset("tiny", false), seed);
  std::mt19937_64 rng(seed + 1);
  std::uniform_int_distribution<int> byte(0, 255);
  std::vector<int> prompt(600);
  for (int& t : prompt) t = byte(rng);
  std::vector<int> more(20);
  for (int& t : more) t = byte(rng);
  for (const int splits : {1, 3}) {
    SCOPED_TRACE("splits " + std::to_string(splits));
    CudaDecoderOptions o;
    o.attention_splits = splits;
    o.max_context = 1024;
    CudaDecoder gpu(model, o);
    EXPECT_EQ(gpu.context_capacity(), 1024);
    const auto cpu = make_cpu_decoder(model);
    std::vector<float> lg, lc;
    gpu.feed(prompt, lg);
    cpu->feed(prompt, lc);
    double worst = rel_diff(lg, lc);
    ASSERT_LE(worst, kTolLogits) << "after the prefill";
    for (const int t : more) {
      const int tok[1] = {t};
      gpu.feed(tok, lg);
      cpu->feed(tok, lc);
      const double r = rel_diff(lg, lc);
      worst = std::max(worst, r);
      ASSERT_LE(r, kTolLogits) << "after token " << gpu.position();
    }
    std::printf(
        "[   INFO   ] %d split(s), context 620: worst rel. logit difference %.3g over 21 feeds\n",
        splits, worst);
  }
}

// A nine-word text from a fixed linear congruential sequence (as tests/core/word_corpus.hpp), and a
// model of `c` trained on it on the CPU for 40 steps, so that its logits have real maxima, not the
// near-ties of random weights.
std::unique_ptr<Trainer> trained_on_words(const ModelConfig& c, std::uint64_t seed,
                                          const std::string& tag) {
  const std::filesystem::path dir = std::filesystem::temp_directory_path() /
                                    ("tttlab_" + tag + "_decode_" + std::to_string(seed));
  std::filesystem::create_directories(dir);
  {
    const char* words[] = {"the ", "cat ", "sat ", "on ", "a ", "mat. ", "dogs ", "run ", "fast. "};
    std::ofstream f(dir / "corpus.txt", std::ios::binary);
    unsigned x = 1;
    for (int i = 0; i < 6000; ++i) {
      x = x * 1103515245u + 12345u;
      f << words[(x >> 16) % 9];
    }
  }
  TrainConfig cfg;
  cfg.model = c;
  cfg.model.max_position_embeddings = 64;
  cfg.data = (dir / "corpus.txt").string();
  cfg.steps = 40;
  cfg.batch_size = 4;
  cfg.seq_len = 64;
  cfg.lr = 1e-2;
  cfg.seed = seed;
  cfg.threads = 2;
  cfg.eval_windows = 4;
  auto t = std::make_unique<Trainer>(cfg, TextData::load(cfg));
  double loss = 0;
  while (!t->finished()) loss = t->step().loss;
  std::printf("[   INFO   ] trained 40 steps on the CPU: last loss %.3f nats/byte\n", loss);
  std::filesystem::remove_all(dir);
  return t;
}

TEST(CudaDecoder, AttentionGreedyBytesOfATrainedModelAreTheCpus) {
  TTTLAB_REQUIRE_GPU();
  const std::uint64_t seed = test_seed();
  std::printf("[   INFO   ] seed %llu\n", static_cast<unsigned long long>(seed));
  ModelConfig c = small_model(SeqLayerKind::SoftmaxAttention, false, 16);
  const auto t = trained_on_words(c, seed, "attention");
  const Model<float>& model = t->model();
  double m_cpu = INFINITY, m_gpu = INFINITY;
  const auto cpu = make_cpu_decoder(model);
  CudaDecoder gpu(model);
  const std::string a = greedy(*cpu, "the cat ", 100, m_cpu);
  const std::string b = greedy(gpu, "the cat ", 100, m_gpu);
  std::printf(
      "[   INFO   ] CPU: \"%s\"\n[   INFO   ] smallest top-2 logit margin: CPU %.3g, GPU %.3g\n",
      a.c_str(), m_cpu, m_gpu);
  EXPECT_EQ(a, b);
}

TEST(CudaDecoder, AttentionRefusesAFeedPastItsCache) {
  TTTLAB_REQUIRE_GPU();
  const Model<float> model(small_model(SeqLayerKind::SoftmaxAttention, true, 16), 5);
  CudaDecoderOptions o;
  o.max_context = 300;
  CudaDecoder gpu(model, o);
  EXPECT_NE(gpu.describe().find("KV cache 300 tokens"), std::string::npos) << gpu.describe();
  const auto cpu = make_cpu_decoder(model);
  std::vector<int> p(290, 'a');
  std::vector<float> lg, lc;
  gpu.feed(p, lg);
  cpu->feed(p, lc);
  std::vector<int> twenty(20, 'b');
  try {
    gpu.feed(twenty, lg);
    FAIL() << "expected std::length_error";
  } catch (const std::length_error& e) {
    const std::string what = e.what();
    EXPECT_NE(what.find("full"), std::string::npos) << what;
    EXPECT_NE(what.find("300"), std::string::npos) << what;
    EXPECT_EQ(what.find('\n'), std::string::npos) << what;
  }
  EXPECT_EQ(gpu.position(), 290);  // nothing of the refused feed ran
  std::vector<int> ten(10, 'b');
  gpu.feed(ten, lg);
  cpu->feed(ten, lc);
  EXPECT_EQ(gpu.position(), 300);
  EXPECT_LE(rel_diff(lg, lc), kTolLogits);  // the stream went on as if the refused feed never came
  const int one[1] = {'c'};
  EXPECT_THROW(gpu.feed(one, lg), std::length_error);

  // 2 x 10 blocks x 2048 floats per token x 2^20 tokens = 160 GiB: more than any current GPU holds.
  ModelConfig big = small_model(SeqLayerKind::SoftmaxAttention, false, 16);
  big.hidden_size = 2048;
  big.num_attention_heads = 16;
  big.num_hidden_layers = 10;
  big.intermediate_size = 64;
  const Model<float> bm(big, 6);
  CudaDecoderOptions ob;
  ob.max_context = k_max_positions;
  try {
    CudaDecoder huge(bm, ob);
    FAIL() << "expected std::runtime_error";
  } catch (const std::runtime_error& e) {
    const std::string what = e.what();
    std::printf("[   INFO   ] %s\n", what.c_str());
    EXPECT_NE(what.find("GiB"), std::string::npos) << what;
    EXPECT_NE(what.find("max_context"), std::string::npos) << what;
  }
}

// ---- 7. batched decoding ---------------------------------------------------------------------

// Counts the entries of a and b that differ in their bits (NaN-safe).
std::size_t bit_differences(const float* a, const float* b, std::size_t n) {
  std::size_t diff = 0;
  for (std::size_t i = 0; i < n; ++i) diff += std::memcmp(a + i, b + i, sizeof(float)) != 0;
  return diff;
}

// The models both batched tests decode: every model kind the decoder runs, on every backbone it
// runs.
std::vector<ModelConfig> batch_test_configs() {
  std::vector<ModelConfig> configs;
  for (const auto kind : {SeqLayerKind::TTTLinear, SeqLayerKind::TTTMLP})
    for (const bool mamba : {true, false})
      configs.push_back(
          small_model(kind, mamba, mamba == (kind == SeqLayerKind::TTTLinear) ? 16 : 5));
  configs.push_back(small_model(SeqLayerKind::SoftmaxAttention, false, 16));
  configs.push_back(small_model(SeqLayerKind::SoftmaxAttention, true, 16));
  configs.push_back(mamba2_model(64, 2, 128, 16, 16, 4, 2));
  configs.push_back(mamba2_model(96, 2, 192, 24, 48, 3, 1));
  configs.push_back(deltanet_model(SeqLayerKind::DeltaNet, 64, 4, 4));
  configs.push_back(deltanet_model(SeqLayerKind::GatedDeltaNet, 96, 4, 3));
  configs.push_back(titans_model(96, 4, 3, 5));
  configs.push_back(lact_model(64, 4, 4, 5));
  configs.push_back(small_model(SeqLayerKind::LinearAttention, true, 16));
  return configs;
}

// A decoder of B sequences beside B batch-1 decoders of the same model, fed the same tokens.
struct BatchBesideSingles {
  std::vector<std::unique_ptr<CudaDecoder>> single;
  std::unique_ptr<CudaDecoder> batch;
  int B = 0, V = 0;
  BatchBesideSingles(const Model<float>& model, int b, bool graphs, DecodeProducts products)
      : B(b), V(model.config().vocab_size) {
    CudaDecoderOptions o;
    o.cuda_graphs = graphs;
    if (model.config().seq_layer == SeqLayerKind::SoftmaxAttention) o.max_context = 128;
    for (int s = 0; s < B; ++s) single.push_back(std::make_unique<CudaDecoder>(model, o));
    o.batch = B;
    o.products = products;
    batch = std::make_unique<CudaDecoder>(model, o);
  }
  // Sequence s's row of the batch's logits lb.
  std::vector<float> row(const std::vector<float>& lb, int s) const {
    return {lb.begin() + std::size_t(s) * V, lb.begin() + std::size_t(s + 1) * V};
  }
  // Feeds a 21-token prompt, then 20 single tokens (random bytes from rng) to every sequence; after
  // each feed, check(s, batch row, batch-1 logits, what) for every sequence. Stops at a fatal
  // failure. Leaves the last logits in lb.
  template <class Check>
  void feed_and_check(std::mt19937_64& rng, std::vector<float>& lb, Check check) {
    std::uniform_int_distribution<int> byte(0, 255);
    std::vector<float> ls;
    const auto step = [&](std::size_t n, const char* what) {
      std::vector<int> steps(n * B);  // step-major: steps[i·B + s]
      for (int& t : steps) t = byte(rng);
      batch->feed_batch(steps, lb);
      ASSERT_EQ(lb.size(), std::size_t(B) * V);
      for (int s = 0; s < B; ++s) {
        std::vector<int> mine(n);
        for (std::size_t i = 0; i < n; ++i) mine[i] = steps[i * B + s];
        single[s]->feed(mine, ls);
        check(s, row(lb, s), ls, what);
        if (::testing::Test::HasFatalFailure()) return;
      }
    };
    step(21, "prefill");
    for (int i = 0; i < 20 && !::testing::Test::HasFatalFailure(); ++i) step(1, "single step");
  }
  // Each sequence's greedy next token from the batch's logits lb.
  std::vector<int> argmax_rows(const std::vector<float>& lb) const {
    std::vector<int> tok(B);
    for (int s = 0; s < B; ++s) {
      const std::vector<float> r = row(lb, s);
      tok[s] = int(std::max_element(r.begin(), r.end()) - r.begin());
    }
    return tok;
  }
};

void compare_batch_with_singles(const Model<float>& model, int B, bool graphs, std::uint64_t seed) {
  const ModelConfig& mc = model.config();
  BatchBesideSingles t(model, B, graphs, DecodeProducts::Exact);
  CudaDecoder& batch = *t.batch;
  EXPECT_EQ(batch.batch(), B);
  EXPECT_NE(batch.describe().find("batch " + std::to_string(B) + ", exact products"),
            std::string::npos)
      << batch.describe();
  std::mt19937_64 rng(seed);
  std::vector<float> lb, ls;
  t.feed_and_check(rng, lb,
                   [&](int s, const std::vector<float>& got, const std::vector<float>& ref,
                       const char* what) {
                     const std::size_t diff = bit_differences(got.data(), ref.data(), t.V);
                     ASSERT_EQ(diff, 0u) << what << ": sequence " << s << " of " << B
                                         << " at position " << batch.position() << ": " << diff
                                         << " logits differ, worst rel. " << rel_diff(got, ref);
                   });
  if (::testing::Test::HasFatalFailure()) return;
  EXPECT_EQ(batch.position(), 41);
  // Greedy: the device's argmax against std::max_element over the batch-1 logits.
  std::vector<int> tok = t.argmax_rows(lb), next;
  for (int i = 0; i < 12; ++i) {
    batch.feed_greedy(tok, next);
    ASSERT_EQ(next.size(), std::size_t(B));
    for (int s = 0; s < B; ++s) {
      const int one[1] = {tok[s]};
      t.single[s]->feed(one, ls);
      const int want = int(std::max_element(ls.begin(), ls.end()) - ls.begin());
      ASSERT_EQ(next[s], want) << "greedy step " << i << ", sequence " << s;
    }
    tok = next;
  }
  std::printf(
      "[   INFO   ] %s, %s backbone, b=%d, batch %d, %s: bitwise equal to %d batch-1 "
      "decoders over 41 steps, 12 greedy steps the same\n",
      to_string(mc.seq_layer).c_str(), mc.mamba_backbone ? "m" : "t", mc.mini_batch_size, B,
      graphs ? "graphs" : "launches", B);
}

TEST(CudaDecoderBatch, EverySequenceIsBitwiseItsBatch1Decoder) {
  TTTLAB_REQUIRE_GPU();
  const std::uint64_t seed = test_seed();
  SCOPED_TRACE("seed " + std::to_string(seed));
  std::printf("[   INFO   ] seed %llu\n", static_cast<unsigned long long>(seed));
  int i = 0;
  for (const ModelConfig& c : batch_test_configs()) {
    const int B = i % 2 == 0 ? 20 : 5;
    const bool graphs = i % 3 != 2;
    SCOPED_TRACE(to_string(c.seq_layer) + (c.mamba_backbone ? " m" : " t") + " batch " +
                 std::to_string(B) + (graphs ? " graphs" : " launches"));
    const Model<float> model(c, seed + i);
    compare_batch_with_singles(model, B, graphs, seed + 300 + i);
    if (::testing::Test::HasFatalFailure()) return;
    ++i;
  }
}

// ---- 8. batched decoding through cuBLAS ----------------------------------------------------------

constexpr double kTolBlas = 1e-4;

// The largest entry of x and the gap to the second largest.
void top2(const float* x, int n, double& top, double& margin) {
  double a = -INFINITY, b = -INFINITY;
  for (int i = 0; i < n; ++i) {
    const double v = x[i];
    if (v > a) {
      b = a;
      a = v;
    } else if (v > b) {
      b = v;
    }
  }
  top = a;
  margin = a - b;
}

// Raises `worst` to the worst relative logit difference seen.
void compare_blas_batch_with_singles(const Model<float>& model, int B, bool graphs,
                                     std::uint64_t seed, double& worst_all) {
  const ModelConfig& mc = model.config();
  const int V = mc.vocab_size;
  BatchBesideSingles t(model, B, graphs, DecodeProducts::Cublas);
  CudaDecoder& batch = *t.batch;
  const std::string desc = batch.describe();
  EXPECT_NE(desc.find("batch " + std::to_string(B) + ", "), std::string::npos) << desc;
  EXPECT_NE(desc.find("fp32"), std::string::npos) << desc;
  EXPECT_EQ(desc.find("exact products"), std::string::npos) << desc;
  std::mt19937_64 rng(seed);
  std::vector<float> lb, ls;
  double worst = 0;
  struct Raise {  // worst_all sees this case's worst however the function leaves
    double& all;
    const double& mine;
    ~Raise() { all = std::max(all, mine); }
  } raise{worst_all, worst};
  t.feed_and_check(rng, lb,
                   [&](int s, const std::vector<float>& got, const std::vector<float>& ref,
                       const char* what) {
                     const double r = rel_diff(got, ref);
                     worst = std::max(worst, r);
                     ASSERT_LE(r, kTolBlas) << what << ": sequence " << s << " of " << B
                                            << " at position " << batch.position();
                   });
  if (::testing::Test::HasFatalFailure()) return;
  EXPECT_EQ(batch.position(), 41);
  // Greedy: both sides fed the batch's choices, so a near tie cannot make them drift apart.
  std::vector<int> tok = t.argmax_rows(lb), next;
  int ties = 0;
  double min_margin = INFINITY;
  for (int i = 0; i < 12; ++i) {
    batch.feed_greedy(tok, next);
    ASSERT_EQ(next.size(), std::size_t(B));
    for (int s = 0; s < B; ++s) {
      const int one[1] = {tok[s]};
      t.single[s]->feed(one, ls);
      double top = 0, margin = 0, big = 0;
      top2(ls.data(), V, top, margin);
      for (float x : ls) big = std::max(big, std::abs(double(x)));
      const double e = kTolBlas * big;
      const int want = int(std::max_element(ls.begin(), ls.end()) - ls.begin());
      ASSERT_TRUE(next[s] >= 0 && next[s] < V) << next[s];
      min_margin = std::min(min_margin, margin / std::max(big, 1e-30));
      if (margin > 2 * e) {
        ASSERT_EQ(next[s], want) << "greedy step " << i << ", sequence " << s << ", top-2 margin "
                                 << margin << " > 2e = " << 2 * e;
      } else {
        ++ties;
        ASSERT_GE(double(ls[next[s]]), top - 2 * e)
            << "greedy step " << i << ", sequence " << s << ": a near tie, but token " << next[s]
            << " is " << top - ls[next[s]] << " below the maximum";
      }
    }
    tok = next;
  }
  std::printf(
      "[   INFO   ] %s, %s backbone, b=%d, batch %d, %s, %s: worst rel. logit difference %.3g "
      "over 41 steps; 12 greedy steps the same (%d near ties within 2e; smallest top-2 margin "
      "%.3g of max|logit|)\n",
      to_string(mc.seq_layer).c_str(), mc.mamba_backbone ? "m" : "t", mc.mini_batch_size, B,
      graphs ? "graphs" : "launches", desc.c_str(), worst, ties, min_margin);
}

TEST(CudaDecoderBatch, CublasProductsMatchBatch1WithinRounding) {
  TTTLAB_REQUIRE_GPU();
  const std::uint64_t seed = test_seed();
  SCOPED_TRACE("seed " + std::to_string(seed));
  std::printf("[   INFO   ] seed %llu\n", static_cast<unsigned long long>(seed));
  double worst = 0;
  int i = 0;
  for (const ModelConfig& c : batch_test_configs()) {
    for (const int B : {i % 2 == 0 ? 20 : 5, 64}) {
      const bool graphs = (i + B) % 3 != 2;
      SCOPED_TRACE(to_string(c.seq_layer) + (c.mamba_backbone ? " m" : " t") + " batch " +
                   std::to_string(B) + (graphs ? " graphs" : " launches"));
      const Model<float> model(c, seed + i);
      compare_blas_batch_with_singles(model, B, graphs, seed + 500 + i, worst);
      if (::testing::Test::HasFatalFailure()) return;
    }
    ++i;
  }
  std::printf("[   INFO   ] cuBLAS products: worst rel. logit difference %.3g (bound %.0e)\n",
              worst, kTolBlas);
}

// Runs f, which must throw E with a one-line message containing `want`.
template <class E, class F>
void expect_refusal(F f, const std::string& want) {
  try {
    f();
    ADD_FAILURE() << "expected a refusal containing '" << want << "'";
  } catch (const E& e) {
    const std::string what = e.what();
    EXPECT_NE(what.find(want), std::string::npos) << what;
    EXPECT_EQ(what.find('\n'), std::string::npos) << what;
  }
}

TEST(CudaDecoderBatch, RefusesBadArguments) {
  TTTLAB_REQUIRE_GPU();
  const Model<float> model(small_model(SeqLayerKind::SoftmaxAttention, false, 16), 9);
  CudaDecoderOptions o;
  o.max_context = 64;
  for (int bad : {0, -3, k_decode_max_batch + 1}) {
    o.batch = bad;
    expect_refusal<std::invalid_argument>([&] { CudaDecoder d(model, o); }, "batch must be in 1..");
  }
  o.batch = 3;
  CudaDecoder dec(model, o);
  std::vector<float> lg;
  std::vector<int> next;
  const std::vector<int> four(4, 'a'), three(3, 'a'), none;
  expect_refusal<std::invalid_argument>([&] { dec.feed(three, lg); }, "use feed_batch");
  expect_refusal<std::invalid_argument>([&] { dec.feed_batch(four, lg); },
                                        "multiple of the batch (3)");
  expect_refusal<std::invalid_argument>([&] { dec.feed_greedy(none, next); },
                                        "multiple of the batch (3)");
  expect_refusal<std::invalid_argument>(
      [&] {
        dec.feed_batch(std::vector<int>{1, 2, 256}, lg);
      },
      "outside 0..255");
  EXPECT_EQ(dec.position(), 0);
  dec.feed_batch(three, lg);
  expect_refusal<std::invalid_argument>([&] { dec.skip_for_bench(0); }, "skip_for_bench");
  expect_refusal<std::invalid_argument>([&] { dec.skip_for_bench(65); }, "1..64");
  dec.skip_for_bench(63);
  EXPECT_EQ(dec.position(), 63);
  dec.feed_greedy(three, next);  // the cache's last row
  EXPECT_EQ(next.size(), 3u);
  expect_refusal<std::length_error>([&] { dec.feed_batch(three, lg); }, "KV cache is full");
  EXPECT_EQ(dec.position(), 64);

  // The memory a batch needs grows linearly with it; a batch whose cache cannot fit is refused
  // before anything is allocated, with the GiB it needs.
  const CudaDecodeMemory m1 = cuda_decode_memory(model.config(), 1, 1000);
  const CudaDecodeMemory m8 = cuda_decode_memory(model.config(), 8, 1000);
  EXPECT_GT(m1.weight_bytes, 0);
  EXPECT_EQ(m8.weight_bytes, m1.weight_bytes);
  EXPECT_NEAR(m8.batch_bytes, 8 * m1.batch_bytes, 1e-9 * m8.batch_bytes);
  EXPECT_GE(m1.batch_bytes, 2.0 * 2 * 128 * 1000 * 4);  // K and V of 2 blocks, 1000 tokens
  o.batch = k_decode_max_batch;
  o.max_context = 1 << 20;
  expect_refusal<std::runtime_error>([&] { CudaDecoder d(model, o); }, "GiB");
  expect_refusal<std::invalid_argument>([&] { cuda_decode_memory(model.config(), 0, 1000); },
                                        "positive");
}

// ---- 9. DeltaNet and Gated DeltaNet --------------------------------------------------------------

TEST(CudaDecoder, DeltaNetLogitsMatchTheCpuDecoder) {
  TTTLAB_REQUIRE_GPU();
  const std::uint64_t seed = test_seed();
  SCOPED_TRACE("seed " + std::to_string(seed));
  std::printf("[   INFO   ] seed %llu\n", static_cast<unsigned long long>(seed));
  int i = 0;
  for (const auto kind : {SeqLayerKind::DeltaNet, SeqLayerKind::GatedDeltaNet}) {
    ModelConfig tiny = ModelConfig::preset("tiny");
    tiny.seq_layer = kind;
    tiny.mamba_backbone = false;
    const ModelConfig shapes[] = {tiny, deltanet_model(kind, 64, 4, 4),
                                  deltanet_model(kind, 96, 4, 3), deltanet_model(kind, 128, 1, 4)};
    for (const ModelConfig& c : shapes) {
      ASSERT_EQ(cuda_decode_unsupported(c), "");
      const Model<float> model(c, seed + i);
      for (const bool graphs : {true, false}) {
        SCOPED_TRACE(to_string(kind) + " D " + std::to_string(c.hidden_size) + " d " +
                     std::to_string(c.head_dim()) + (graphs ? " graphs" : " launches"));
        std::printf("[   INFO   ] %s D %d, %d blocks, d %d, K %d:\n", to_string(kind).c_str(),
                    c.hidden_size, c.num_hidden_layers, c.head_dim(), c.conv_kernel);
        compare_decoders(model, graphs, seed + 200 + i, 100);
        if (::testing::Test::HasFatalFailure()) return;
      }
      ++i;
    }
  }
  // The decoder's memory counts every block's state [H, d, d] and the three convolutions' history
  // [K−1, 3D] per sequence, and grows linearly with the batch.
  const ModelConfig g = deltanet_model(SeqLayerKind::GatedDeltaNet, 96, 4, 3);
  const CudaDecodeMemory m1 = cuda_decode_memory(g, 1, 1000);
  const CudaDecodeMemory m8 = cuda_decode_memory(g, 8, 1000);
  EXPECT_EQ(m8.weight_bytes, m1.weight_bytes);
  EXPECT_GE(m1.weight_bytes, 4.0 * count_params(g));
  EXPECT_NEAR(m8.batch_bytes, 8 * m1.batch_bytes, 1e-9 * m8.batch_bytes);
  EXPECT_GE(m1.batch_bytes, 4.0 * 2 * (4 * 24 * 24 + 2 * 3 * 96));
}

TEST(CudaDecoder, DeltaNetGreedyBytesOfATrainedModelAreTheCpus) {
  TTTLAB_REQUIRE_GPU();
  const std::uint64_t seed = test_seed();
  std::printf("[   INFO   ] seed %llu\n", static_cast<unsigned long long>(seed));
  for (const auto kind : {SeqLayerKind::DeltaNet, SeqLayerKind::GatedDeltaNet}) {
    SCOPED_TRACE(to_string(kind));
    ModelConfig m = deltanet_model(kind, 64, 4, 4);
    m.deltanet_chunk_size = 16;
    expect_same_greedy_after_training(m, seed, to_string(kind));
  }
}

// ---- 10. Titans ---------------------------------------------------------------------------------

TEST(CudaDecoder, TitansLogitsMatchTheCpuDecoder) {
  TTTLAB_REQUIRE_GPU();
  const std::uint64_t seed = test_seed();
  SCOPED_TRACE("seed " + std::to_string(seed));
  std::printf("[   INFO   ] seed %llu\n", static_cast<unsigned long long>(seed));
  ModelConfig tiny = ModelConfig::preset("tiny");
  tiny.seq_layer = SeqLayerKind::Titans;
  tiny.mamba_backbone = false;
  const ModelConfig shapes[] = {tiny, titans_model(64, 4, 4, 1), titans_model(96, 4, 3, 5),
                                titans_model(128, 1, 4, 16)};
  int i = 0;
  for (const ModelConfig& c : shapes) {
    ASSERT_EQ(cuda_decode_unsupported(c), "");
    const Model<float> model(c, seed + i);
    for (const bool graphs : {true, false}) {
      SCOPED_TRACE("titans D " + std::to_string(c.hidden_size) + " d " +
                   std::to_string(c.head_dim()) + " b " + std::to_string(c.mini_batch_size) +
                   (graphs ? " graphs" : " launches"));
      std::printf("[   INFO   ] titans D %d, %d blocks, d %d, K %d, b %d:\n", c.hidden_size,
                  c.num_hidden_layers, c.head_dim(), c.conv_kernel, c.mini_batch_size);
      compare_decoders(model, graphs, seed + 200 + i, 100);
      if (::testing::Test::HasFatalFailure()) return;
    }
    ++i;
  }
  // The decoder's memory counts every block's three states [H, d, d] and the convolutions' history
  // [K−1, 3D] per sequence, and grows linearly with the batch.
  const ModelConfig t = titans_model(96, 4, 3, 5);
  const CudaDecodeMemory m1 = cuda_decode_memory(t, 1, 1000);
  const CudaDecodeMemory m8 = cuda_decode_memory(t, 8, 1000);
  EXPECT_EQ(m8.weight_bytes, m1.weight_bytes);
  EXPECT_GE(m1.weight_bytes, 4.0 * count_params(t));
  EXPECT_NEAR(m8.batch_bytes, 8 * m1.batch_bytes, 1e-9 * m8.batch_bytes);
  EXPECT_GE(m1.batch_bytes, 4.0 * 2 * (3 * 4 * 24 * 24 + 2 * 3 * 96));
}

TEST(CudaDecoder, TitansGreedyBytesOfATrainedModelAreTheCpus) {
  TTTLAB_REQUIRE_GPU();
  const std::uint64_t seed = test_seed();
  std::printf("[   INFO   ] seed %llu\n", static_cast<unsigned long long>(seed));
  expect_same_greedy_after_training(titans_model(64, 4, 4, 8), seed, "titans");
}

// ---- 11. LaCT -----------------------------------------------------------------------------------

TEST(CudaDecoder, LactLogitsMatchTheCpuDecoder) {
  TTTLAB_REQUIRE_GPU();
  const std::uint64_t seed = test_seed();
  SCOPED_TRACE("seed " + std::to_string(seed));
  std::printf("[   INFO   ] seed %llu\n", static_cast<unsigned long long>(seed));
  ModelConfig tiny = ModelConfig::preset("tiny");
  tiny.seq_layer = SeqLayerKind::Lact;
  tiny.mamba_backbone = false;
  const ModelConfig shapes[] = {tiny, lact_model(64, 4, 2, 8), lact_model(64, 2, 4, 5),
                                lact_model(128, 1, 1, 16)};
  int i = 0;
  for (const ModelConfig& c : shapes) {
    ASSERT_EQ(cuda_decode_unsupported(c), "");
    const Model<float> model(c, seed + i);
    for (const bool graphs : {true, false}) {
      SCOPED_TRACE("lact D " + std::to_string(c.hidden_size) + " H " +
                   std::to_string(c.num_attention_heads) + " H_f " + std::to_string(c.lact_heads) +
                   " C " + std::to_string(c.lact_chunk_size) + (graphs ? " graphs" : " launches"));
      std::printf("[   INFO   ] lact D %d, %d blocks, %d attention heads, %d fast heads, C %d:\n",
                  c.hidden_size, c.num_hidden_layers, c.num_attention_heads, c.lact_heads,
                  c.lact_chunk_size);
      compare_decoders(model, graphs, seed + 200 + i, 100);
      if (::testing::Test::HasFatalFailure()) return;
    }
    ++i;
  }
  // The decoder's memory counts every block's ring, fast weights, their momentum and the held chunk
  // per sequence, and grows linearly with the batch.
  const ModelConfig l = lact_model(64, 4, 2, 8);
  const CudaDecodeMemory m1 = cuda_decode_memory(l, 1, 1000);
  const CudaDecodeMemory m8 = cuda_decode_memory(l, 8, 1000);
  EXPECT_EQ(m8.weight_bytes, m1.weight_bytes);
  EXPECT_GE(m1.weight_bytes, 4.0 * count_params(l));
  EXPECT_NEAR(m8.batch_bytes, 8 * m1.batch_bytes, 1e-9 * m8.batch_bytes);
  EXPECT_GE(m1.batch_bytes, 4.0 * 2 * (2 * 8 * 64 + 6 * 2 * 32 * 32 + 2 * 8 * (2 * 32 + 4)));
}

TEST(CudaDecoder, LactGreedyBytesOfATrainedModelAreTheCpus) {
  TTTLAB_REQUIRE_GPU();
  const std::uint64_t seed = test_seed();
  std::printf("[   INFO   ] seed %llu\n", static_cast<unsigned long long>(seed));
  expect_same_greedy_after_training(lact_model(64, 4, 2, 8), seed, "lact");
}

// ---- 12. linear attention ------------------------------------------------------------------------

TEST(CudaDecoder, LinearAttentionLogitsMatchTheCpuDecoder) {
  TTTLAB_REQUIRE_GPU();
  const std::uint64_t seed = test_seed();
  SCOPED_TRACE("seed " + std::to_string(seed));
  std::printf("[   INFO   ] seed %llu\n", static_cast<unsigned long long>(seed));
  ModelConfig d24 = small_model(SeqLayerKind::LinearAttention, false, 16);
  d24.hidden_size = 96;  // 4 heads of 24
  ModelConfig d128 = small_model(SeqLayerKind::LinearAttention, true, 16);
  d128.num_attention_heads = 1;
  const ModelConfig shapes[] = {small_model(SeqLayerKind::LinearAttention, false, 16),
                                small_model(SeqLayerKind::LinearAttention, true, 16), d24, d128};
  int i = 0;
  for (const ModelConfig& c : shapes) {
    ASSERT_EQ(cuda_decode_unsupported(c), "");
    const Model<float> model(c, seed + i);
    for (const bool graphs : {true, false}) {
      SCOPED_TRACE("linear-attention D " + std::to_string(c.hidden_size) + " d " +
                   std::to_string(c.head_dim()) + (c.mamba_backbone ? " m" : " t") +
                   (graphs ? " graphs" : " launches"));
      std::printf("[   INFO   ] linear-attention D %d, d %d, backbone %s:\n", c.hidden_size,
                  c.head_dim(), c.mamba_backbone ? "m" : "t");
      compare_decoders(model, graphs, seed + 200 + i, 100);
      if (::testing::Test::HasFatalFailure()) return;
    }
    ++i;
  }
}

TEST(CudaDecoder, LinearAttentionGreedyBytesOfATrainedModelAreTheCpus) {
  TTTLAB_REQUIRE_GPU();
  const std::uint64_t seed = test_seed();
  std::printf("[   INFO   ] seed %llu\n", static_cast<unsigned long long>(seed));
  ModelConfig m = small_model(SeqLayerKind::LinearAttention, false, 16);
  m.hidden_size = 64;
  m.intermediate_size = 128;
  expect_same_greedy_after_training(m, seed, "linear-attention");
}

}  // namespace
}  // namespace tttlab::kernels::test
