#include "compute/cuda_compute.hpp"

#include <cuda_runtime_api.h>

#include <algorithm>
#include <cstddef>
#include <stdexcept>
#include <utility>
#include <vector>

#include "tttlab/data/batches.hpp"
#include "tttlab/kernels/attention.hpp"
#include "tttlab/kernels/cuda_device.hpp"
#include "tttlab/kernels/decode_cuda.hpp"
#include "tttlab/kernels/train_cuda.hpp"
#include "tttlab/kernels/ttt.hpp"
#include "tttlab/model/model.hpp"
#include "tttlab/optim/adamw.hpp"
#include "tttlab/train/trainer.hpp"

namespace tttlab::compute {
namespace {

void check(cudaError_t e, const char* what) {
  if (e != cudaSuccess) throw std::runtime_error(std::string(what) + " failed: " + cudaGetErrorString(e));
}

// A device buffer of floats (or bytes), freed on scope exit.
template <class T>
class Buffer {
 public:
  explicit Buffer(std::size_t n) : n_(n) {
    if (n) check(cudaMalloc(reinterpret_cast<void**>(&p_), n * sizeof(T)), "cudaMalloc");
  }
  Buffer(const std::vector<T>& host, cudaStream_t s) : Buffer(host.size()) {
    if (n_) check(cudaMemcpyAsync(p_, host.data(), n_ * sizeof(T), cudaMemcpyHostToDevice, s), "cudaMemcpyAsync");
  }
  ~Buffer() {
    if (p_) cudaFree(p_);
  }
  Buffer(const Buffer&) = delete;
  Buffer& operator=(const Buffer&) = delete;
  T* get() const { return n_ ? p_ : nullptr; }
  std::size_t bytes() const { return n_ * sizeof(T); }

 private:
  T* p_ = nullptr;
  std::size_t n_ = 0;
};

class Stream {
 public:
  Stream() { check(cudaStreamCreateWithFlags(&s_, cudaStreamNonBlocking), "cudaStreamCreate"); }
  ~Stream() { cudaStreamDestroy(s_); }
  Stream(const Stream&) = delete;
  Stream& operator=(const Stream&) = delete;
  cudaStream_t get() const { return s_; }

 private:
  cudaStream_t s_ = nullptr;
};

// Runs `launch` warmup + repeats times on `s`; the device time of each timed run (CUDA events).
template <class F>
std::vector<double> timed(cudaStream_t s, int warmup, int repeats, F&& launch) {
  for (int i = 0; i < warmup; ++i) launch();
  cudaEvent_t a = nullptr, b = nullptr;
  check(cudaEventCreate(&a), "cudaEventCreate");
  check(cudaEventCreate(&b), "cudaEventCreate");
  std::vector<double> ms;
  cudaError_t err = cudaSuccess;
  for (int i = 0; i < repeats && err == cudaSuccess; ++i) {
    cudaEventRecord(a, s);
    launch();
    cudaEventRecord(b, s);
    err = cudaEventSynchronize(b);
    float t = 0;
    if (err == cudaSuccess) err = cudaEventElapsedTime(&t, a, b);
    ms.push_back(t);
  }
  cudaEventDestroy(a);
  cudaEventDestroy(b);
  check(err, "timing a GPU kernel");
  return ms;
}

std::vector<float> download(const Buffer<float>& d, std::size_t n, cudaStream_t s) {
  std::vector<float> h(n);
  check(cudaMemcpyAsync(h.data(), d.get(), n * sizeof(float), cudaMemcpyDeviceToHost, s), "cudaMemcpyAsync");
  check(cudaStreamSynchronize(s), "cudaStreamSynchronize");
  return h;
}

// Sequences of an evaluation launch: as many as asked, but their activations (about
// 4·T·(16·D + 3·F)·L bytes per sequence, train_cuda.hpp) within ~8 GiB.
int eval_batch(const ModelConfig& mc, int requested, int T) {
  const double per_seq = 4.0 * T * (16.0 * mc.hidden_size + 3.0 * mc.intermediate_size) * mc.num_hidden_layers;
  const int fit = static_cast<int>(8.0 * (1ull << 30) / std::max(per_seq, 1.0));
  return std::clamp(fit, 1, std::max(1, requested));
}

class CudaModel final : public lab::GpuModel {
 public:
  CudaModel(const Model<float>& model, int batch, int T, int device) : m_optim(AdamWConfig{}, WarmupCosineSchedule{}) {
    m_config.model = model.config();
    m_config.batch_size = eval_batch(model.config(), batch, T);
    m_config.seq_len = T;
    TrainBackendContext ctx;
    ctx.config = &m_config;
    // The backend reads the parameters in its constructor (the upload) and writes them back only in
    // pull_to_host(), which evaluation never calls: the model stays unchanged.
    ctx.model = const_cast<Model<float>*>(&model);
    ctx.optim = &m_optim;
    kernels::CudaTrainOptions o;
    o.device = device;
    o.gemm = kernels::GemmPrecision::Fp32;  // agreement with the CPU engine to fp32 rounding
    m_backend = std::make_unique<kernels::CudaTrainBackend>(ctx, o);
  }
  EvalReport evaluate(std::span<const std::uint8_t> val, int seq_len, const EvalOptions& options) override {
    return m_backend->evaluate(val, seq_len, options);
  }
  std::vector<double> time_forward(const TokenBatch& batch, int warmup, int repeats) override {
    return m_backend->time_forward(batch, warmup, repeats);
  }
  std::vector<lab::GpuLayerInputs> layer_inputs(const TokenBatch& batch) override {
    std::vector<lab::GpuLayerInputs> out;
    for (auto& m : m_backend->mixer_inputs(batch))
      out.push_back({std::move(m.Q), std::move(m.K), std::move(m.V), std::move(m.lambda), std::move(m.tau)});
    return out;
  }

 private:
  TrainConfig m_config;
  AdamW<float> m_optim;
  std::unique_ptr<kernels::CudaTrainBackend> m_backend;
};

// The kernels' reasons end in advice for the command line ("; use --device cpu"): in the app the panel
// computes on the CPU by itself and says so, so the advice goes.
std::string for_the_app(std::string why) {
  for (const char* tail : {"; use --device cpu", ", use --device cpu"})
    if (const auto at = why.find(tail); at != std::string::npos) why.erase(at);
  return why;
}

class CudaCompute final : public lab::GpuCompute {
 public:
  explicit CudaCompute(DeviceInfo info) : m_info(std::move(info)) { check(cudaSetDevice(m_info.index), "cudaSetDevice"); }

  const DeviceInfo& device() const override { return m_info; }

  std::string ttt_forward_unsupported(const lab::GpuHeads& g) const override {
    if (g.mini_batch < 1 || g.mini_batch > 64)
      return "the GPU's TTT kernels take mini-batches of 1 to 64 tokens (b = " + std::to_string(g.mini_batch) + ")";
    if (g.d < 16 || g.d > 128 || g.d % 2)
      return "the GPU's TTT kernels take an even head dimension from 16 to 128 (d = " + std::to_string(g.d) + ")";
    return {};
  }

  lab::GpuRun ttt_forward(const lab::GpuHeads& g, lab::GpuMath math, int warmup, int repeats) override {
    if (const std::string why = ttt_forward_unsupported(g); !why.empty()) throw std::invalid_argument(why);
    const std::size_t HD = std::size_t(g.heads) * g.d, n = std::size_t(g.T) * HD;
    const std::size_t hidden = g.mlp ? 4 * std::size_t(g.d) : std::size_t(g.d);
    const auto need = [](const std::vector<float>& v, std::size_t size, const char* name) {
      if (v.size() != size)
        throw std::invalid_argument(std::string("GPU TTT forward: ") + name + " has " + std::to_string(v.size()) +
                                    " numbers, expected " + std::to_string(size));
    };
    need(g.Q, n, "Q");
    need(g.K, n, "K");
    need(g.V, n, "V");
    need(g.lambda, std::size_t(g.heads) * g.T, "lambda");
    need(g.tau, std::size_t(g.mini_batch), "tau");
    need(g.ln_weight, HD, "ln_weight");
    need(g.ln_bias, HD, "ln_bias");
    need(g.W1, HD * hidden, "W1");
    if (g.bias) need(g.b1, std::size_t(g.heads) * hidden, "b1");
    if (g.mlp) {
      need(g.W2, HD * hidden, "W2");
      if (g.bias) need(g.b2, HD, "b2");
    }
    Stream st;
    const cudaStream_t s = st.get();
    Buffer<float> Q(g.Q, s), K(g.K, s), V(g.V, s), lam(g.lambda, s), tau(g.tau, s), lnw(g.ln_weight, s),
        lnb(g.ln_bias, s), W1(g.W1, s), b1(g.b1, s), W2(g.W2, s), b2(g.b2, s), O(n);
    const kernels::TttDims dims{1, g.heads, g.T, g.d, g.mini_batch};
    // What both forward kernels read, whichever inner model runs.
    const kernels::TttSequenceInputs inputs{
        dims, {g.layer_norm, g.residual, g.bias, g.ln_eps}, Q.get(), K.get(), V.get(), lam.get(), tau.get(),
        lnw.get(), lnb.get()};
    lab::GpuRun r;
    r.warmup = warmup;
    if (!g.mlp) {
      kernels::TttLinearForwardArgs a;
      static_cast<kernels::TttSequenceInputs&>(a) = inputs;
      a.W0 = W1.get();
      a.b0 = b1.get();
      a.O = O.get();
      a.stream = s;
      const bool tf32 = math == lab::GpuMath::Tf32 &&
                        kernels::ttt_linear_forward_supports(kernels::TttLinearForwardVersion::Tf32, dims);
      const bool tensor = kernels::ttt_linear_forward_supports(kernels::TttLinearForwardVersion::Tf32, dims);
      a.version = tf32 ? kernels::TttLinearForwardVersion::Tf32 : kernels::TttLinearForwardVersion::Default;
      r.kernel = tf32 ? "TTT-Linear dual form, tf32 tensor cores"
                      : (tensor ? "TTT-Linear dual form, 3xTF32 tensor cores (fp32 accuracy)"
                                : "TTT-Linear dual form, fp32 CUDA cores");
      if (math == lab::GpuMath::Tf32 && !tf32) r.kernel += "; tf32 needs b = 16 and d = 16, 32, 64 or 128";
      r.ms = timed(s, warmup, repeats, [&] { kernels::ttt_linear_forward(a); });
    } else {
      kernels::TttMlpForwardArgs a;
      static_cast<kernels::TttSequenceInputs&>(a) = inputs;
      a.W1 = W1.get();
      a.b1 = b1.get();
      a.W2 = W2.get();
      a.b2 = b2.get();
      a.O = O.get();
      a.stream = s;
      Buffer<unsigned char> ws(kernels::ttt_mlp_forward_workspace_bytes(dims));
      a.workspace = ws.get();
      a.workspace_bytes = ws.bytes();
      r.kernel = "TTT-MLP dual form, 3xTF32 tensor cores (fp32 accuracy)";
      if (math == lab::GpuMath::Tf32) r.kernel += "; the TTT-MLP kernels have no tf32 variant";
      r.ms = timed(s, warmup, repeats, [&] { kernels::ttt_mlp_forward(a); });
    }
    r.O = download(O, n, s);
    return r;
  }

  lab::GpuRun linear_attention(const std::vector<float>& q, const std::vector<float>& k, const std::vector<float>& v,
                               int heads, int T, int d, int warmup, int repeats) override {
    const std::size_t n = std::size_t(T) * heads * d;
    if (q.size() != n || k.size() != n || v.size() != n)
      throw std::invalid_argument("GPU linear attention: Q, K, V must each hold T·H·d numbers");
    if (d < 1 || d > 128) throw std::invalid_argument("GPU linear attention: d must be in 1..128");
    Stream st;
    const cudaStream_t s = st.get();
    Buffer<float> Q(q, s), K(k, s), V(v, s), O(n);
    kernels::AttentionForwardArgs a;
    a.dims = kernels::AttentionDims{1, heads, T, d};
    a.kind = kernels::AttentionKind::Linear;
    a.Q = Q.get();
    a.K = K.get();
    a.V = V.get();
    a.O = O.get();
    a.stream = s;
    lab::GpuRun r;
    r.warmup = warmup;
    r.kernel = "causal linear attention tril(QKᵀ)V, fp32 (Theorem 1: the same function)";
    r.ms = timed(s, warmup, repeats, [&] { kernels::attention_forward(a); });
    r.O = download(O, n, s);
    return r;
  }

  std::string model_unsupported(const ModelConfig& config) const override {
    return for_the_app(kernels::cuda_train_unsupported(config));
  }

  std::unique_ptr<lab::GpuModel> load_model(const Model<float>& model, int batch, int seq_len) override {
    if (const std::string why = model_unsupported(model.config()); !why.empty()) throw std::invalid_argument(why);
    return std::make_unique<CudaModel>(model, batch, seq_len, m_info.index);
  }

  std::string decode_unsupported(const ModelConfig& config) const override {
    return for_the_app(kernels::cuda_decode_unsupported(config));
  }

  std::unique_ptr<TokenDecoder> decoder(const Model<float>& model) override {
    kernels::CudaDecoderOptions o;
    o.device = m_info.index;
    return std::make_unique<kernels::CudaDecoder>(model, o);
  }

 private:
  DeviceInfo m_info;
};

}  // namespace

std::shared_ptr<lab::GpuCompute> make_cuda_compute(std::string& why_not, int device) {
  const GpuProbeResult probe = kernels::probe_cuda_gpus();
  if (probe.devices.empty()) {
    why_not = probe.reason.empty() ? "no CUDA device" : probe.reason;
    return nullptr;
  }
  if (device < 0 || device >= static_cast<int>(probe.devices.size())) {
    why_not = "CUDA device " + std::to_string(device) + " does not exist";
    return nullptr;
  }
  try {
    return std::make_shared<CudaCompute>(probe.devices[static_cast<std::size_t>(device)]);
  } catch (const std::exception& e) {
    why_not = e.what();
    return nullptr;
  }
}

}  // namespace tttlab::compute
