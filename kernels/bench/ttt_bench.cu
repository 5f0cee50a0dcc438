// ttt_bench(): times the TTT kernels at one shape (see tttlab/kernels/ttt_bench.hpp and
// docs/KERNELS.md, which explains the FLOP counts and the memory-traffic floors printed beside the
// times).
#include <cuda_runtime.h>

#include <algorithm>
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <functional>
#include <initializer_list>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "common/cuda_check.hpp"
#include "ttt/ttt_host.hpp"
#include "tttlab/kernels/attention.hpp"
#include "tttlab/kernels/gemm.hpp"
#include "tttlab/kernels/delta_rule_chunked.hpp"
#include "tttlab/kernels/lact.hpp"
#include "tttlab/kernels/matrix_rules.hpp"
#include "tttlab/kernels/titans.hpp"
#include "tttlab/kernels/ttt_bench.hpp"

namespace tttlab::kernels {
namespace {

// Deterministic pseudo-random fill on the device: x = lo + (hi − lo)·u, u uniform in [0, 1).
__global__ void fill_uniform(float* x, std::size_t n, std::uint32_t seed, float lo, float hi) {
  for (std::size_t i = blockIdx.x * std::size_t(blockDim.x) + threadIdx.x; i < n;
       i += std::size_t(gridDim.x) * blockDim.x) {
    std::uint32_t h = static_cast<std::uint32_t>(i) * 0x9E3779B1u ^ seed;
    h ^= h >> 16;
    h *= 0x85EBCA6Bu;
    h ^= h >> 13;
    h *= 0xC2B2AE35u;
    h ^= h >> 16;
    x[i] = lo + (hi - lo) * (float(h >> 8) * (1.0f / 16777216.0f));
  }
}

struct Buf {
  float* p = nullptr;
  std::size_t n = 0;
  explicit Buf(std::size_t count) : n(count) {
    TTTLAB_CUDA_CHECK(cudaMalloc(&p, std::max<std::size_t>(count, 1) * sizeof(float)));
  }
  ~Buf() { cudaFree(p); }
  Buf(const Buf&) = delete;
  Buf& operator=(const Buf&) = delete;
  void fill(std::uint32_t seed, float lo, float hi) {
    fill_uniform<<<1024, 256>>>(p, n, seed, lo, hi);
    TTTLAB_CUDA_CHECK(cudaGetLastError());
  }
};

// The same for bf16 bit patterns.
struct Buf16 {
  std::uint16_t* p = nullptr;
  explicit Buf16(std::size_t count) {
    TTTLAB_CUDA_CHECK(cudaMalloc(&p, std::max<std::size_t>(count, 1) * sizeof(std::uint16_t)));
  }
  ~Buf16() { cudaFree(p); }
  Buf16(const Buf16&) = delete;
  Buf16& operator=(const Buf16&) = delete;
};

// Q, K, V rounded to bf16 (convert_to_bf16's rounding) and an output buffer of the same size: the
// inputs of the versions with bf16 I/O.
struct Bf16Io {
  Buf16 Q, K, V, O;
  Bf16Io(const Buf& q, const Buf& k, const Buf& v, const TttDims& D, std::size_t act)
      : Q(act), K(act), V(act), O(act) {
    const int rows = D.batch * D.seq_len, cols = D.heads * D.head_dim;
    convert_to_bf16(q.p, rows, cols, cols, Q.p, cols, nullptr);
    convert_to_bf16(k.p, rows, cols, cols, K.p, cols, nullptr);
    convert_to_bf16(v.p, rows, cols, cols, V.p, cols, nullptr);
  }
  // args with these in place of the fp32 Q, K, V, O.
  template <class Args>
  Args in_place_of_fp32(Args a) const {
    a.Q = a.K = a.V = nullptr;
    a.O = nullptr;
    a.Q_bf16 = Q.p;
    a.K_bf16 = K.p;
    a.V_bf16 = V.p;
    a.O_bf16 = O.p;
    return a;
  }
};

struct Events {
  cudaEvent_t a = nullptr, b = nullptr;
  Events() {
    TTTLAB_CUDA_CHECK(cudaEventCreate(&a));
    TTTLAB_CUDA_CHECK(cudaEventCreate(&b));
  }
  ~Events() {
    cudaEventDestroy(a);
    cudaEventDestroy(b);
  }
};

// The spread of the last time_median() call, which the row added right after it copies (the bench
// runs on one thread; every row is added straight after its own timing).
struct Spread {
  double min_ms = 0, max_ms = 0;
  int repeats = 0, warmup = 0;
};
Spread g_last;

// Median over `repeats` timed runs of fn (after `warmup` untimed ones), in ms; min, max in g_last.
double time_median(const std::function<void()>& fn, int warmup, int repeats) {
  for (int i = 0; i < warmup; ++i) fn();
  TTTLAB_CUDA_CHECK(cudaDeviceSynchronize());
  Events ev;
  std::vector<double> ms;
  for (int i = 0; i < repeats; ++i) {
    TTTLAB_CUDA_CHECK(cudaEventRecord(ev.a));
    fn();
    TTTLAB_CUDA_CHECK(cudaEventRecord(ev.b));
    TTTLAB_CUDA_CHECK(cudaEventSynchronize(ev.b));
    float t = 0;
    TTTLAB_CUDA_CHECK(cudaEventElapsedTime(&t, ev.a, ev.b));
    ms.push_back(t);
  }
  std::sort(ms.begin(), ms.end());
  g_last = Spread{ms.front(), ms.back(), repeats, warmup};
  return ms[ms.size() / 2];
}

// Copies the spread of the timing just taken into a row.
void set_spread(TttBenchRow& r) {
  r.min_ms = g_last.min_ms;
  r.max_ms = g_last.max_ms;
  r.repeats = g_last.repeats;
  r.warmup = g_last.warmup;
}

std::string shape_text(const TttDims& D) {
  return "B=" + std::to_string(D.batch) + " H=" + std::to_string(D.heads) +
         " T=" + std::to_string(D.seq_len) + " d=" + std::to_string(D.head_dim) +
         " b=" + std::to_string(D.mini_batch);
}

// The inputs every TTT call reads: random, never zeros. At the default shape the activations are
// several times L2, so no rotation is needed.
struct Inputs {
  TttDims D;
  std::size_t BH, d, act, lam_n;  // B·H; head dim; one [B, T, H·d]; one [B, H, T]
  Buf Q, K, V, O, lam, tau, gam, bet, W0, b0;
  explicit Inputs(const TttDims& dims)
      : D(dims),
        BH(std::size_t(dims.batch) * dims.heads),
        d(dims.head_dim),
        act(std::size_t(dims.batch) * dims.seq_len * dims.heads * d),
        lam_n(BH * dims.seq_len),
        Q(act),
        K(act),
        V(act),
        O(act),
        lam(lam_n),
        tau(dims.mini_batch),
        gam(dims.heads * d),
        bet(dims.heads * d),
        W0(dims.heads * d * d),
        b0(dims.heads * d) {
    Q.fill(11, -1.0f, 1.0f);
    K.fill(12, -1.0f, 1.0f);
    V.fill(13, -1.0f, 1.0f);
    lam.fill(14, 0.2f / float(d), 0.8f / float(d));
    gam.fill(15, 0.8f, 1.2f);
    bet.fill(16, -0.1f, 0.1f);
    W0.fill(17, -1.0f / std::sqrt(float(d)), 1.0f / std::sqrt(float(d)));
    b0.fill(18, -0.1f, 0.1f);
    std::vector<float> t(D.mini_batch);
    for (int i = 0; i < D.mini_batch; ++i) t[i] = 1.0f / float(i + 1);
    TTTLAB_CUDA_CHECK(
        cudaMemcpy(tau.p, t.data(), t.size() * sizeof(float), cudaMemcpyHostToDevice));
    TTTLAB_CUDA_CHECK(cudaDeviceSynchronize());
  }
  // The inputs into any of the sequence kernels' argument structs of ttt.hpp.
  // The options stay as they are.
  void set(TttSequenceInputs& a) const {
    a = TttSequenceInputs{D, a.opt, Q.p, K.p, V.p, lam.p, tau.p, gam.p, bet.p};
  }
  // (token, head) pairs: the FLOP counts are per pair.
  double tokens() const { return double(D.batch) * D.seq_len * D.heads; }
};

// A Buf of at least `bytes` bytes (a workspace).
std::size_t floats_for(std::size_t bytes) { return (bytes + sizeof(float) - 1) / sizeof(float); }

// Copy bandwidth: a 2 × 512 MiB device-to-device copy, bytes read + written per second (GB/s).
double copy_bandwidth_gbs() {
  const std::size_t n = (std::size_t(512) << 20) / sizeof(float);
  Buf src(n), dst(n);
  src.fill(1, -1.0f, 1.0f);
  const double ms = time_median(
      [&] {
        TTTLAB_CUDA_CHECK(
            cudaMemcpyAsync(dst.p, src.p, n * sizeof(float), cudaMemcpyDeviceToDevice));
      },
      2, 10);
  return 2.0 * n * sizeof(float) / (ms * 1e-3) / 1e9;
}

// The report being filled and what every row needs: the configuration, the inputs and the device.
class Bench {
 public:
  Bench(const TttBenchConfig& cfg, TttBenchReport& rep, const Inputs& in, int sms)
      : cfg_(cfg),
        rep_(rep),
        in_(in),
        shape_(shape_text(in.D)),
        one_wave_(in.BH <= std::size_t(sms)) {}

  const TttBenchConfig& cfg() const { return cfg_; }
  const Inputs& in() const { return in_; }
  // Whether B·H blocks fit in one wave at one per SM (where the kernels run in two roles).
  bool one_wave() const { return one_wave_; }
  // The median time of fn over the configured warmup and repeats.
  double time(const std::function<void()>& fn) const {
    return time_median(fn, cfg_.warmup, cfg_.repeats);
  }

  // A row for the timing just taken (time() or time_median()): FLOP rate, floor, peer and target.
  void add(std::string name, double ms, double flops, double bytes, double peer_ms = 0,
           std::string peer = "", double target_ms = 0, const std::string* shape = nullptr) {
    TttBenchRow r;
    r.name = std::move(name);
    r.shape = shape ? *shape : shape_;
    r.median_ms = ms;
    set_spread(r);
    r.gflops = flops / (ms * 1e-3) / 1e9;
    r.floor_ms = bytes / (rep_.copy_bandwidth_gbs * 1e9) * 1e3;
    r.peer_ms = peer_ms;
    r.peer = std::move(peer);
    r.target_ms = target_ms;
    rep_.rows.push_back(std::move(r));
  }

 private:
  const TttBenchConfig& cfg_;
  TttBenchReport& rep_;
  const Inputs& in_;
  std::string shape_;
  bool one_wave_;
};

const char* const kTkLinearPeer = "ThunderKittens TTT-Linear prefill fp16 (issue 4)";
const char* const kTkMlpPeer = "ThunderKittens TTT-MLP prefill fp16 (issue 4)";

// The FLOPs and bytes of the TTT-Linear forward (docs/KERNELS.md counts them).
double linear_forward_flops(const Inputs& in) {
  const double dd = double(in.d), b = in.D.mini_batch;
  return in.tokens() * (6 * dd * dd + 4 * b * dd);
}
double forward_bytes(const Inputs& in) { return (4.0 * in.act + in.lam_n) * sizeof(float); }
// The same forward with bf16 Q, K, V, O: half their bytes.
double forward_bytes_bf16(const Inputs& in) {
  return (4.0 * in.act) * 2 + in.lam_n * sizeof(float);
}

// The TTT-Linear forward's arguments at the inputs, from the shared initial state.
TttLinearForwardArgs linear_forward_args(const Inputs& in) {
  TttLinearForwardArgs fa;
  in.set(fa);
  fa.W0 = in.W0.p;
  fa.b0 = in.b0.p;
  fa.O = in.O.p;
  return fa;
}

// Each version of the TTT-Linear forward the shape supports (the Default only unless all_versions),
// the tf32 kernel in one role where it runs in two, and the Bf16 version.
void linear_forward_rows(Bench& bench, const TttLinearForwardArgs& fa) {
  const Inputs& in = bench.in();
  const TttDims& D = in.D;
  const double flops = linear_forward_flops(in), bytes = forward_bytes(in);
  std::vector<std::pair<TttLinearForwardVersion, const char*>> versions;
  if (bench.cfg().all_versions) {
    versions = {{TttLinearForwardVersion::Fallback, "fallback-simt"},
                {TttLinearForwardVersion::Tf32, "tf32"}};
  }
  versions.push_back({TttLinearForwardVersion::Default, "default"});
  for (auto [v, vname] : versions) {
    if (!ttt_linear_forward_supports(v, D)) continue;
    TttLinearForwardArgs f = fa;
    f.version = v;
    const double ms = bench.time([&] { ttt_linear_forward(f); });
    bench.add(std::string("ttt-linear forward ") + vname, ms, flops, bytes, 0.585, kTkLinearPeer,
              0.3);
  }
  // Where the tensor-core kernel runs in two roles (one block per SM, head_dim ≤ 64), the one-role
  // form too.
  if (bench.cfg().all_versions && bench.one_wave() && in.d <= 64 &&
      ttt_linear_forward_supports(TttLinearForwardVersion::Tf32, D)) {
    TttLinearForwardArgs f1 = fa;
    f1.version = TttLinearForwardVersion::Tf32;
    f1.two_roles = false;
    const double ms = bench.time([&] { ttt_linear_forward(f1); });
    bench.add("ttt-linear forward tf32 one role", ms, flops, bytes, 0.585, kTkLinearPeer, 0.3);
  }
  // Version Bf16: the same inputs rounded to bf16, read and written in 2 bytes (its floor moves half
  // the bytes of the rows above). Its own buffers, so fa stays fp32.
  if (ttt_linear_forward_supports(TttLinearForwardVersion::Bf16, D)) {
    const Bf16Io io(in.Q, in.K, in.V, D, in.act);
    TttLinearForwardArgs f16 = io.in_place_of_fp32(fa);
    f16.version = TttLinearForwardVersion::Bf16;
    const double ms = bench.time([&] { ttt_linear_forward(f16); });
    bench.add("ttt-linear forward bf16", ms, flops, forward_bytes_bf16(in), 0.585, kTkLinearPeer,
              0.2);
  }
}

// What the backwards of both models share: the checkpoint group, dO (random), the outputs of the
// layouts of ttt.hpp (dQ, dK, dV, dλ, dτ, dγ, dβ) and the workspace.
struct BackwardBuffers {
  int group;
  std::size_t n_ck;
  Buf dO, dQ, dK, dV, dlam, dtau, dgam, dbet;
  std::size_t ws_bytes;
  Buf ws;
  BackwardBuffers(const Inputs& in, int g, std::size_t workspace_bytes, std::uint32_t dO_seed)
      : group(g),
        n_ck(ttt_num_checkpoints(in.D, g)),
        dO(in.act),
        dQ(in.act),
        dK(in.act),
        dV(in.act),
        dlam(in.lam_n),
        dtau(in.D.mini_batch),
        dgam(in.D.heads * in.d),
        dbet(in.D.heads * in.d),
        ws_bytes(workspace_bytes),
        ws(floats_for(workspace_bytes)) {
    dO.fill(dO_seed, -1.0f, 1.0f);
  }
  // A backward's arguments with the inputs and all of the above; the model's own fields are left.
  template <class Args>
  Args shared_args(const Inputs& in) const {
    Args a;
    in.set(a);
    a.checkpoint_group = group;
    a.dO = dO.p;
    a.dQ = dQ.p;
    a.dK = dK.p;
    a.dV = dV.p;
    a.dlambda = dlam.p;
    a.dtau = dtau.p;
    a.dln_weight = dgam.p;
    a.dln_bias = dbet.p;
    a.workspace = ws.p;
    a.workspace_bytes = ws_bytes;
    return a;
  }
};

// The checkpoints of a TTT-Linear forward every `group` mini-batches and the backward's outputs and
// workspace.
struct LinearBackwardBuffers : BackwardBuffers {
  Buf ckW, ckb, dW0, db0;
  LinearBackwardBuffers(const Inputs& in, int g)
      : BackwardBuffers(in, g, ttt_linear_backward_workspace_bytes(in.D, g), 19),
        ckW(in.BH * n_ck * in.d * in.d),
        ckb(in.BH * n_ck * in.d),
        dW0(in.D.heads * in.d * in.d),
        db0(in.D.heads * in.d) {}
  // fa (version Default) writing the checkpoints.
  TttLinearForwardArgs forward(const TttLinearForwardArgs& fa) const {
    TttLinearForwardArgs f = fa;
    f.version = TttLinearForwardVersion::Default;
    f.checkpoint_W = ckW.p;
    f.checkpoint_b = ckb.p;
    f.checkpoint_group = group;
    return f;
  }
  TttLinearBackwardArgs backward(const Inputs& in) const {
    TttLinearBackwardArgs ba = shared_args<TttLinearBackwardArgs>(in);
    ba.checkpoint_W = ckW.p;
    ba.checkpoint_b = ckb.p;
    ba.dW0 = dW0.p;
    ba.db0 = db0.p;
    return ba;
  }
};

// The forward writing checkpoints every `group` mini-batches, then the backward, timed as one and
// the backward alone, for each backward version; and at group 1, where the fused kernel runs in two
// roles, its one-role form.
void linear_backward_rows(Bench& bench, const TttLinearForwardArgs& fa, int group) {
  const Inputs& in = bench.in();
  const TttDims& D = in.D;
  const std::size_t BH = in.BH, d = in.d, act = in.act, lam_n = in.lam_n;
  const double tokens = in.tokens(), dd = double(d), b = D.mini_batch;
  const bool all = bench.cfg().all_versions;
  const std::string g = "(g=" + std::to_string(group) + ")";
  const LinearBackwardBuffers buffers(in, group);
  const std::size_t n_ck = buffers.n_ck;
  const TttLinearForwardArgs f2 = buffers.forward(fa);
  TttLinearBackwardArgs ba = buffers.backward(in);
  const double ck_bytes = double(BH) * n_ck * (d * d + d) * sizeof(float);
  const double fb_bytes = (11.0 * act + 3.0 * lam_n) * sizeof(float) + 2 * ck_bytes;
  const double fb_flops = tokens * (22 * dd * dd + 16 * b * dd);
  const double bwd_flops = tokens * (16 * dd * dd + 12 * b * dd);
  const double bwd_bytes = (7.0 * act + 2.0 * lam_n) * sizeof(float) + ck_bytes;
  // The forward writing the checkpoints, then the backward, timed as one.
  const auto time_fwd_bwd = [&](const TttLinearForwardArgs& f, const TttLinearBackwardArgs& bw) {
    return bench.time([&] {
      ttt_linear_forward(f);
      ttt_linear_backward(bw);
    });
  };
  bench.add("ttt-linear forward+backward " + g, time_fwd_bwd(f2, ba), fb_flops, fb_bytes, 376.0,
            "official PyTorch TTT-Linear fwd+bwd (issue 4)", 1.0);
  std::vector<std::pair<TttBackwardVersion, const char*>> bversions;
  if (all) bversions.push_back({TttBackwardVersion::Fallback, "fallback"});
  bversions.push_back({TttBackwardVersion::Default, "default"});
  const bool tf32_bwd = all && ttt_linear_backward_supports(TttBackwardVersion::Tf32, D) &&
                        ttt_linear_forward_supports(TttLinearForwardVersion::Tf32, D);
  if (tf32_bwd) {
    // What the training step runs with tf32 products: the Tf32 forward, then the Tf32 backward.
    TttLinearForwardArgs f3 = f2;
    f3.version = TttLinearForwardVersion::Tf32;
    TttLinearBackwardArgs b3 = ba;
    b3.version = TttBackwardVersion::Tf32;
    bench.add("ttt-linear forward+backward " + g + " tf32", time_fwd_bwd(f3, b3), fb_flops,
              fb_bytes, 3.59, "flash-linear-attention chunk_ttt_linear bf16 fwd+bwd (issue 15)",
              1.0);
    bversions.push_back({TttBackwardVersion::Tf32, "tf32"});
  }
  for (auto [bv, bname] : bversions) {
    ba.version = bv;
    const double msb = bench.time([&] { ttt_linear_backward(ba); });
    bench.add("ttt-linear backward " + g + " " + bname, msb, bwd_flops, bwd_bytes);
  }
  // Where the fused kernel runs in two roles (g = 1, one block per SM), the one-role form too.
  if (all && group == 1 && bench.one_wave()) {
    ba.version = tf32_bwd ? TttBackwardVersion::Tf32 : TttBackwardVersion::Default;
    ba.two_roles = false;
    const double msb = bench.time([&] { ttt_linear_backward(ba); });
    bench.add("ttt-linear backward " + g + " " + (tf32_bwd ? "tf32" : "default") + " one role", msb,
              bwd_flops, bwd_bytes);
  }
}

// The TTT-MLP state (hidden width 4d) and its forward's arguments at the inputs.
struct MlpState {
  std::size_t hd;
  Buf W1, b1, W2, b2, ws;
  std::size_t ws_bytes;
  explicit MlpState(const Inputs& in)
      : hd(4 * in.d),
        W1(in.D.heads * in.d * hd),
        b1(in.D.heads * hd),
        W2(in.D.heads * hd * in.d),
        b2(in.D.heads * in.d),
        ws(floats_for(ttt_mlp_forward_workspace_bytes(in.D))),
        ws_bytes(ttt_mlp_forward_workspace_bytes(in.D)) {
    W1.fill(21, -1.0f / std::sqrt(float(in.d)), 1.0f / std::sqrt(float(in.d)));
    W2.fill(22, -1.0f / std::sqrt(float(hd)), 1.0f / std::sqrt(float(hd)));
    b1.fill(23, -0.1f, 0.1f);
    b2.fill(24, -0.1f, 0.1f);
  }
  TttMlpForwardArgs forward_args(const Inputs& in) const {
    TttMlpForwardArgs ma;
    in.set(ma);
    ma.W1 = W1.p;
    ma.b1 = b1.p;
    ma.W2 = W2.p;
    ma.b2 = b2.p;
    ma.O = in.O.p;
    ma.workspace = ws_bytes ? ws.p : nullptr;
    ma.workspace_bytes = ws_bytes;
    return ma;
  }
};

double mlp_forward_flops(const Inputs& in) {
  const double dd = double(in.d), b = in.D.mini_batch;
  return in.tokens() * (56 * dd * dd + 20 * b * dd);
}

// Each version of the TTT-MLP forward the shape supports, and the Bf16 version.
void mlp_forward_rows(Bench& bench, const TttMlpForwardArgs& ma) {
  const Inputs& in = bench.in();
  const double flops = mlp_forward_flops(in);
  std::vector<std::pair<TttMlpForwardVersion, const char*>> mversions;
  if (bench.cfg().all_versions) mversions = {{TttMlpForwardVersion::Fallback, "fallback"}};
  mversions.push_back({TttMlpForwardVersion::Default, "default"});
  if (bench.cfg().all_versions) mversions.push_back({TttMlpForwardVersion::Tf32, "tf32"});
  for (auto [mv, mname] : mversions) {
    if (!ttt_mlp_forward_supports(mv, in.D)) continue;
    TttMlpForwardArgs m = ma;
    m.version = mv;
    const double ms = bench.time([&] { ttt_mlp_forward(m); });
    bench.add(std::string("ttt-mlp forward ") + mname, ms, flops, forward_bytes(in), 16.9,
              kTkMlpPeer, 3.0);
  }
  // Version Bf16: the same inputs rounded to bf16, read and written in 2 bytes.
  if (ttt_mlp_forward_supports(TttMlpForwardVersion::Bf16, in.D)) {
    const Bf16Io io(in.Q, in.K, in.V, in.D, in.act);
    TttMlpForwardArgs m16 = io.in_place_of_fp32(ma);
    m16.version = TttMlpForwardVersion::Bf16;
    const double ms = bench.time([&] { ttt_mlp_forward(m16); });
    bench.add("ttt-mlp forward bf16", ms, flops, forward_bytes_bf16(in), 16.9, kTkMlpPeer, 3.0);
  }
}

// The checkpoints of a TTT-MLP forward every `group` mini-batches and the backward's outputs and
// workspace.
struct MlpBackwardBuffers : BackwardBuffers {
  Buf ckW1, ckb1, ckW2, ckb2, dW1, db1, dW2, db2;
  MlpBackwardBuffers(const Inputs& in, std::size_t hd, int g)
      : BackwardBuffers(in, g, ttt_mlp_backward_workspace_bytes(in.D, g), 25),
        ckW1(in.BH * n_ck * in.d * hd),
        ckb1(in.BH * n_ck * hd),
        ckW2(in.BH * n_ck * hd * in.d),
        ckb2(in.BH * n_ck * in.d),
        dW1(in.D.heads * in.d * hd),
        db1(in.D.heads * hd),
        dW2(in.D.heads * hd * in.d),
        db2(in.D.heads * in.d) {}
  // ma writing the checkpoints.
  TttMlpForwardArgs forward(const TttMlpForwardArgs& ma) const {
    TttMlpForwardArgs mf = ma;
    mf.checkpoint_W1 = ckW1.p;
    mf.checkpoint_b1 = ckb1.p;
    mf.checkpoint_W2 = ckW2.p;
    mf.checkpoint_b2 = ckb2.p;
    mf.checkpoint_group = group;
    return mf;
  }
  TttMlpBackwardArgs backward(const Inputs& in) const {
    TttMlpBackwardArgs mb = shared_args<TttMlpBackwardArgs>(in);
    mb.checkpoint_W1 = ckW1.p;
    mb.checkpoint_b1 = ckb1.p;
    mb.checkpoint_W2 = ckW2.p;
    mb.checkpoint_b2 = ckb2.p;
    mb.dW1 = dW1.p;
    mb.db1 = db1.p;
    mb.dW2 = dW2.p;
    mb.db2 = db2.p;
    return mb;
  }
};

// The forward writing checkpoints every `group` mini-batches, then the backward (docs/KERNELS.md,
// "TTT-MLP backward": FLOP count and floor), timed as one; the backward alone, and with tf32
// products (the training step's backward when its products are tf32).
void mlp_backward_rows(Bench& bench, const TttMlpForwardArgs& ma, std::size_t hd, int group) {
  const Inputs& in = bench.in();
  const TttDims& D = in.D;
  const std::size_t BH = in.BH, d = in.d, act = in.act, lam_n = in.lam_n;
  const double tokens = in.tokens(), dd = double(d), b = D.mini_batch;
  const std::string g = "(g=" + std::to_string(group) + ")";
  const MlpBackwardBuffers buffers(in, hd, group);
  const std::size_t n_ck = buffers.n_ck;
  const TttMlpForwardArgs mf = buffers.forward(ma);
  TttMlpBackwardArgs mb = buffers.backward(in);
  const double ck_bytes = double(BH) * n_ck * (2.0 * d * hd + hd + d) * sizeof(float);
  const double bwd_flops = tokens * (152 * dd * dd + 60 * b * dd);
  const double ms = bench.time([&] {
    ttt_mlp_forward(mf);
    ttt_mlp_backward(mb);
  });
  bench.add("ttt-mlp forward+backward " + g, ms, mlp_forward_flops(in) + bwd_flops,
            (11.0 * act + 3.0 * lam_n) * sizeof(float) + 2 * ck_bytes, 713.0,
            "official PyTorch TTT-MLP fwd+bwd (issue 4)", 8.0);
  const double bwd_bytes = (7.0 * act + 2.0 * lam_n) * sizeof(float) + ck_bytes;
  const double msb = bench.time([&] { ttt_mlp_backward(mb); });
  bench.add("ttt-mlp backward " + g, msb, bwd_flops, bwd_bytes);
  if (bench.cfg().all_versions) {
    mb.version = TttMlpBackwardVersion::Tf32;
    const double mst = bench.time([&] { ttt_mlp_backward(mb); });
    bench.add("ttt-mlp backward " + g + " tf32", mst, bwd_flops, bwd_bytes);
  }
}

// ---- attention baselines (attention.hpp) -----------------------------------------------------------
// Causal softmax attention at the same B, H, T, d. FLOPs per head: the forward's Q·Kᵀ and P·V over
// the causal half, T²·d each (half of the full square's 2·T²·d), 2·T²·d in all; the backward's
// recomputed Q·Kᵀ, dO·Vᵀ, dV, dQ and dK, 5·T²·d (FlashAttention's count; the kernels run Q·Kᵀ and
// dO·Vᵀ once in each of their two passes, 7·T²·d executed). Floors: the forward reads Q, K, V and
// writes O and the lse; the backward reads Q, K, V, O, dO, lse and writes dQ, dK, dV (δ: one row).
// Rows without peer or target, their shape without b.
void attention_rows(Bench& bench) {
  const Inputs& in = bench.in();
  const TttDims& D = in.D;
  const std::size_t act = in.act, lam_n = in.lam_n;
  const AttentionDims ad{D.batch, D.heads, D.seq_len, D.head_dim};
  const double T2d = double(in.BH) * D.seq_len * double(D.seq_len) * double(in.d);
  const std::string ashape = "B=" + std::to_string(D.batch) + " H=" + std::to_string(D.heads) +
                             " T=" + std::to_string(D.seq_len) + " d=" + std::to_string(D.head_dim);
  Buf lse(lam_n), adO(act), adQ(act), adK(act), adV(act);
  adO.fill(31, -1.0f, 1.0f);
  const std::size_t aws = attention_backward_workspace_bytes(ad, AttentionKind::Softmax);
  Buf ws(floats_for(aws));
  for (AttentionKind kind : {AttentionKind::Softmax, AttentionKind::Linear}) {
    const bool soft = kind == AttentionKind::Softmax;
    AttentionForwardArgs af;
    af.dims = ad;
    af.kind = kind;
    af.Q = in.Q.p;
    af.K = in.K.p;
    af.V = in.V.p;
    af.O = in.O.p;
    af.lse = soft ? lse.p : nullptr;
    AttentionBackwardArgs ab;
    ab.dims = ad;
    ab.kind = kind;
    ab.Q = in.Q.p;
    ab.K = in.K.p;
    ab.V = in.V.p;
    ab.O = soft ? in.O.p : nullptr;
    ab.lse = soft ? lse.p : nullptr;
    ab.dO = adO.p;
    ab.dQ = adQ.p;
    ab.dK = adK.p;
    ab.dV = adV.p;
    ab.workspace = soft ? ws.p : nullptr;
    ab.workspace_bytes = soft ? aws : 0;
    const std::string vname = " default";
    const std::string kname = soft ? "softmax-attention" : "linear-attention";
    const double fwd_ms = bench.time([&] { attention_forward(af); });
    bench.add(kname + " forward" + vname, fwd_ms, 2 * T2d, (4.0 * act + lam_n) * sizeof(float), 0,
              "", 0, &ashape);
    // The same call on the tf32 tensor cores (AttentionPrecision::tf32), same fp32 tensors; peer:
    // the CUDA-core row above, measured in the same run.
    const bool tf32 = soft && attention_tf32_supported(ad);
    double tf32_fwd_ms = 0;
    if (tf32) {
      af.precision = AttentionPrecision::tf32;
      tf32_fwd_ms = bench.time([&] { attention_forward(af); });
      bench.add(kname + " forward tf32 tensor cores", tf32_fwd_ms, 2 * T2d,
                (4.0 * act + lam_n) * sizeof(float), fwd_ms, kname + " forward" + vname, 0,
                &ashape);
      af.precision = AttentionPrecision::fp32;
    }
    if (bench.cfg().backward) {
      const double fb_ms = bench.time([&] {
        attention_forward(af);
        attention_backward(ab);
      });
      bench.add(kname + " fwd+bwd" + vname, fb_ms, 7 * T2d,
                (12.0 * act + 4.0 * lam_n) * sizeof(float), 0, "", 0, &ashape);
      if (tf32) {
        af.precision = ab.precision = AttentionPrecision::tf32;
        const double tfb_ms = bench.time([&] {
          attention_forward(af);
          attention_backward(ab);
        });
        bench.add(kname + " fwd+bwd tf32 tensor cores", tfb_ms, 7 * T2d,
                  (12.0 * act + 4.0 * lam_n) * sizeof(float), fb_ms, kname + " fwd+bwd" + vname,
                  0, &ashape);
        af.precision = ab.precision = AttentionPrecision::fp32;
      }
    }
  }
}

// The attention rows' inputs: Q, K, V and the upstream gradient uniform in [−1, 1] (fixed seeds),
// rounded to bf16, for T tokens at the bench's B, H, d.
void fill_bf16_inputs(const TttDims& D, int T, std::initializer_list<Buf16*> bufs) {
  const std::size_t act = std::size_t(D.batch) * T * D.heads * D.head_dim;
  Buf x(act);
  const int r = D.batch * T, c = D.heads * D.head_dim;
  std::uint32_t seed = 41;
  for (Buf16* b : bufs) {
    x.fill(seed++, -1.0f, 1.0f);
    convert_to_bf16(x.p, r, c, c, b->p, c, nullptr);
  }
  TTTLAB_CUDA_CHECK(cudaDeviceSynchronize());
}

// Whether `need` bytes fit this GPU (with a tenth to spare); if not, says that `what` at `shape` is
// skipped, so that one length the GPU cannot hold does not abort the whole benchmark.
bool fits_on_gpu(const char* what, const std::string& shape, double need) {
  std::size_t free_b = 0, total_b = 0;
  TTTLAB_CUDA_CHECK(cudaMemGetInfo(&free_b, &total_b));
  if (need <= 0.9 * double(free_b)) return true;
  std::fprintf(stderr, "ttt_bench: %s at %s skipped: needs %.1f GB, %.1f GB free\n", what,
               shape.c_str(), need / 1e9, double(free_b) / 1e9);
  return false;
}

// The tensor-core bf16 softmax attention (flash_attention_forward / _backward) at B, H, d of the bench
// and sequence length T: inputs uniform in [−1, 1] rounded to bf16, FLOPs and floors counted as above
// with 2-byte tensors. Rows named "softmax-attention ... bf16 tensor cores", shape with its T.
void flash_rows(Bench& bench, int T) {
  const TttDims& D = bench.in().D;
  const AttentionDims ad{D.batch, D.heads, T, D.head_dim};
  if (!flash_attention_supported(ad)) return;
  const std::size_t act = std::size_t(D.batch) * T * D.heads * D.head_dim;
  const std::size_t rows = std::size_t(D.batch) * D.heads * T;
  const double T2d = double(D.batch) * D.heads * double(T) * T * D.head_dim;
  const std::string ashape = "B=" + std::to_string(D.batch) + " H=" + std::to_string(D.heads) +
                             " T=" + std::to_string(T) + " d=" + std::to_string(D.head_dim);
  // Five bf16 tensors, three fp32 gradients and one fp32 scratch.
  if (!fits_on_gpu("attention", ashape, double(act) * (5 * 2 + 4 * 4) + double(rows) * 8)) return;
  Buf16 q(act), k(act), v(act), o(act), g(act);
  fill_bf16_inputs(D, T, {&q, &k, &v, &g});
  Buf lse(rows), dq(act), dk(act), dv(act);
  const std::size_t wsb = flash_attention_backward_workspace_bytes(ad);
  Buf ws(floats_for(wsb));
  FlashAttentionForwardArgs af;
  af.dims = ad;
  af.Q = q.p;
  af.K = k.p;
  af.V = v.p;
  af.O = o.p;
  af.lse = lse.p;
  FlashAttentionBackwardArgs ab;
  ab.dims = ad;
  ab.Q = q.p;
  ab.K = k.p;
  ab.V = v.p;
  ab.O = o.p;
  ab.dO = g.p;
  ab.lse = lse.p;
  ab.dQ = dq.p;
  ab.dK = dk.p;
  ab.dV = dv.p;
  ab.workspace = ws.p;
  ab.workspace_bytes = wsb;
  const double fwd_ms = bench.time([&] { flash_attention_forward(af); });
  bench.add("softmax-attention forward bf16 tensor cores", fwd_ms, 2 * T2d, 4.0 * act * 2 + rows * 4.0, 0, "", 0,
            &ashape);
  if (flash_attention_wgmma_available(ad)) {  // the portable forward beside the wgmma one it replaces
    FlashAttentionForwardArgs mf = af;
    mf.path = FlashPath::mma_sync;
    const double mma_ms = bench.time([&] { flash_attention_forward(mf); });
    bench.add("softmax-attention forward bf16 mma.sync", mma_ms, 2 * T2d, 4.0 * act * 2 + rows * 4.0, 0, "", 0,
              &ashape);
  }
  if (bench.cfg().backward) {
    const double fb_ms = bench.time([&] {
      flash_attention_forward(af);
      flash_attention_backward(ab);
    });
    bench.add("softmax-attention fwd+bwd bf16 tensor cores", fb_ms, 7 * T2d,
              5.0 * act * 2 + 3.0 * act * 4 + 3.0 * rows * 4, 0, "", 0, &ashape);
    if (flash_attention_wgmma_available(ad)) {
      FlashAttentionForwardArgs mf = af;
      FlashAttentionBackwardArgs mb = ab;
      mf.path = mb.path = FlashPath::mma_sync;
      const double mfb_ms = bench.time([&] {
        flash_attention_forward(mf);
        flash_attention_backward(mb);
      });
      bench.add("softmax-attention fwd+bwd bf16 mma.sync", mfb_ms, 7 * T2d,
                5.0 * act * 2 + 3.0 * act * 4 + 3.0 * rows * 4, 0, "", 0, &ashape);
    }
  }
}

// The tensor-core chunked linear attention (chunked_linear_attention_forward / _backward) at B, H, d
// of the bench and sequence length T, inputs as flash_rows'. FLOPs per head as the chunk form does
// them with chunks of C = 64: the forward's states Kᵀ V (2·T·d²), Q·S (2·T·d²) and the causal half
// of the chunks' Q Kᵀ and its product with V (2·T·C·d), 4·T·d² + 2·T·C·d; the backward recomputes
// S, forms G (2·T·d² each), and dQ, dK, dV (two state products and two half-chunk products each,
// 3·(4·T·d² + 2·T·C·d) counted as executed), so fwd+bwd is 20·T·d² + 8·T·C·d. Floors: the forward
// reads Q, K, V and writes O (bf16); the backward reads Q, K, V, dO and writes dQ, dK, dV (fp32).
// Rows named "linear-attention ... bf16 chunked tensor cores", shape with its T.
void chunked_linear_rows(Bench& bench, int T) {
  const TttDims& D = bench.in().D;
  const AttentionDims ad{D.batch, D.heads, T, D.head_dim};
  if (!chunked_linear_attention_supported(ad)) return;
  const std::size_t act = std::size_t(D.batch) * T * D.heads * D.head_dim;
  const double bh = double(D.batch) * D.heads, d = D.head_dim;
  const double fwd_flops = bh * T * (4 * d * d + 2 * 64.0 * d);
  const double fb_flops = bh * T * (20 * d * d + 8 * 64.0 * d);
  const std::string ashape = "B=" + std::to_string(D.batch) + " H=" + std::to_string(D.heads) +
                             " T=" + std::to_string(T) + " d=" + std::to_string(D.head_dim);
  const std::size_t wsb = chunked_linear_attention_backward_workspace_bytes(ad);
  if (!fits_on_gpu("linear attention", ashape, double(act) * (5 * 2 + 3 * 4) + double(wsb))) return;
  Buf16 q(act), k(act), v(act), o(act), g(act);
  fill_bf16_inputs(D, T, {&q, &k, &v, &g});
  Buf dq(act), dk(act), dv(act), ws(floats_for(wsb));
  ChunkedLinearAttentionForwardArgs af;
  af.dims = ad;
  af.Q = q.p;
  af.K = k.p;
  af.V = v.p;
  af.O = o.p;
  af.workspace = ws.p;
  af.workspace_bytes = wsb;
  ChunkedLinearAttentionBackwardArgs ab;
  ab.dims = ad;
  ab.Q = q.p;
  ab.K = k.p;
  ab.V = v.p;
  ab.dO = g.p;
  ab.dQ = dq.p;
  ab.dK = dk.p;
  ab.dV = dv.p;
  ab.workspace = ws.p;
  ab.workspace_bytes = wsb;
  const double fwd_ms = bench.time([&] { chunked_linear_attention_forward(af); });
  bench.add("linear-attention forward bf16 chunked tensor cores", fwd_ms, fwd_flops, 4.0 * act * 2, 0,
            "", 0, &ashape);
  if (bench.cfg().backward) {
    const double fb_ms = bench.time([&] {
      chunked_linear_attention_forward(af);
      chunked_linear_attention_backward(ab);
    });
    bench.add("linear-attention fwd+bwd bf16 chunked tensor cores", fb_ms, fb_flops,
              4.0 * act * 2 + 3.0 * act * 4, 0, "", 0, &ashape);
  }
}

// The recurrent delta-rule kernels (matrix_rule_forward / _backward, one block per sequence and
// head, the tokens in order) for DeltaNet and Gated DeltaNet at the bench's B, H, T and d_k = d_v = d,
// states kept every 64 tokens. Inputs: q, k uniform in ±1/√d (‖k‖² ≈ ⅓, so the delta step stays a
// contraction), v and dO in ±1, β in [0, 1), α in [0.5, 1). FLOPs per token and head, counted as the
// recurrence does them: forward 6·d² (k·S, the rank-one write, q·S; the decay's d² not counted);
// the backward reruns the forward with dq (6·d²) and walks back with G += qᵀdO, k·G, k·A, the dk row
// sums, dA and dα (12·d²), so fwd+bwd is 24·d². Floors: the fp32 tensors that must move, q, k, v, o
// (and dO, dq, dk, dv); not the kept states or the backward's rerun workspace. Rows named
// "delta rule (recurrent) ...", "gated delta rule (recurrent) ...".
void matrix_rule_rows(Bench& bench) {
  const TttDims& D = bench.in().D;
  const MatrixRuleDims md{D.batch, D.seq_len, D.heads, D.head_dim, D.head_dim, 64};
  if (!matrix_rule_unsupported(md).empty()) return;
  const std::size_t act = std::size_t(D.batch) * D.seq_len * D.heads * D.head_dim;
  const std::size_t gates = std::size_t(D.batch) * D.seq_len * D.heads;
  const std::size_t wsb = matrix_rule_backward_workspace_bytes(md);
  const std::size_t kept = matrix_rule_state_floats(md);
  const double tokens = double(D.batch) * D.heads * D.seq_len, d2 = double(D.head_dim) * D.head_dim;
  const std::string shape = "B=" + std::to_string(D.batch) + " H=" + std::to_string(D.heads) +
                            " T=" + std::to_string(D.seq_len) + " d=" + std::to_string(D.head_dim);
  if (!fits_on_gpu("delta rule", shape, 4.0 * (8.0 * act + 4.0 * gates + kept) + double(wsb)))
    return;
  Buf q(act), k(act), v(act), o(act), dO(act), dq(act), dk(act), dv(act);
  Buf beta(gates), alpha(gates), dbeta(gates), dalpha(gates), states(kept), ws(floats_for(wsb));
  const float sk = 1.0f / std::sqrt(float(D.head_dim));
  q.fill(71, -sk, sk);
  k.fill(72, -sk, sk);
  v.fill(73, -1.0f, 1.0f);
  dO.fill(74, -1.0f, 1.0f);
  beta.fill(75, 0.0f, 1.0f);
  alpha.fill(76, 0.5f, 1.0f);
  const int ld = D.heads * D.head_dim;
  for (const MatrixRule rule : {MatrixRule::DeltaNet, MatrixRule::GatedDeltaNet}) {
    const bool gated = rule == MatrixRule::GatedDeltaNet;
    const std::string name = gated ? "gated delta rule (recurrent)" : "delta rule (recurrent)";
    MatrixRuleForwardArgs f;
    f.rule = rule;
    f.dims = md;
    f.q = q.p;
    f.k = k.p;
    f.ld_qk = ld;
    f.v = v.p;
    f.ld_v = ld;
    f.beta = beta.p;
    f.alpha = gated ? alpha.p : nullptr;
    f.o = o.p;
    f.ld_o = ld;
    f.states = states.p;
    MatrixRuleBackwardArgs b = matrix_rule_backward_args(f);
    b.dO = dO.p;
    b.ld_do = ld;
    b.dq = dq.p;
    b.dk = dk.p;
    b.ld_dqk = ld;
    b.dv = dv.p;
    b.ld_dv = ld;
    b.dbeta = dbeta.p;
    b.dalpha = gated ? dalpha.p : nullptr;
    b.workspace = ws.p;
    b.workspace_bytes = wsb;
    const double fwd_ms = bench.time([&] { matrix_rule_forward(f); });
    bench.add(name + " forward", fwd_ms, 6 * tokens * d2,
              4.0 * (4.0 * act + gates * (gated ? 2 : 1)), 0, "", 0, &shape);
    if (bench.cfg().backward) {
      const double fb_ms = bench.time([&] {
        matrix_rule_forward(f);
        matrix_rule_backward(b);
      });
      bench.add(name + " fwd+bwd", fb_ms, 24 * tokens * d2,
                4.0 * (8.0 * act + 2.0 * gates * (gated ? 2 : 1)), 0, "", 0, &shape);
    }
  }
}

// The chunked tensor-core delta rules (chunked_delta_rule_forward) for DeltaNet and Gated DeltaNet at
// the bench's B, H, T and d, on matrix_rule_rows' inputs rounded to bf16 (q, k uniform in ±1/√d, v in
// ±1, β in [0, 1), log α = log of [0.5, 1)). FLOPs per token and head as the chunk form does them with
// chunks of C = 64: W S_p, Q S_p and Kᵀ U (6·d²), and K Kᵀ, the substitution for W and Ũ, Q Kᵀ and its
// product with U, counted whole (8·C·d). Floor: Q, K, V read and O written in bf16, β (and log α) read
// in fp32. The backward (d = 64: chunked_delta_rule_backward) walks back for dU and the state gradients
// and forms the gradients per chunk (with d log α for the gated rule, whose extra terms are not counted),
// from what the forward kept (the fwd+bwd row, as the training step runs it) or after rerunning the
// forward's two kernels itself (the "backward recomputes" row, whose peer column is the first's time);
// counted whole,
// with the forward, 22·d² + 40·C·d + 5·C² per token and head; its floor adds dO read in bf16 and dQ, dK,
// dV, dβ written in fp32. Rows named "delta rule forward bf16 chunked tensor cores", "gated delta rule
// ...", "delta rule fwd+bwd bf16 chunked tensor cores", "gated delta rule fwd+bwd ...".
void chunked_delta_rows(Bench& bench) {
  const TttDims& D = bench.in().D;
  const AttentionDims ad{D.batch, D.heads, D.seq_len, D.head_dim};
  if (!chunked_delta_rule_supported(ad)) return;
  const std::size_t act = std::size_t(D.batch) * D.seq_len * D.heads * D.head_dim;
  const std::size_t gates = std::size_t(D.batch) * D.seq_len * D.heads;
  const std::size_t wsb = chunked_delta_rule_forward_workspace_bytes(ad);
  const double tokens = double(D.batch) * D.heads * D.seq_len, d = D.head_dim;
  const std::string shape = "B=" + std::to_string(D.batch) + " H=" + std::to_string(D.heads) +
                            " T=" + std::to_string(D.seq_len) + " d=" + std::to_string(D.head_dim);
  if (!fits_on_gpu("chunked delta rule", shape,
                   double(act) * (4 * 2 + 4) + 8.0 * gates + double(wsb)))
    return;
  const bool with_backward = bench.cfg().backward && chunked_delta_rule_backward_supported(ad);
  const std::size_t bwsb = with_backward ? chunked_delta_rule_backward_workspace_bytes(ad) : 0,
                    kb = with_backward ? chunked_delta_rule_keep_bytes(ad) : 0;
  if (with_backward &&
      !fits_on_gpu("chunked delta rule backward", shape,
                   double(act) * (5 * 2 + 3 * 4) + 20.0 * gates + double(wsb + bwsb + kb)))
    return;
  Buf16 q(act), k(act), v(act), o(act), dO(act);
  Buf beta(gates), log_alpha(gates), ws(floats_for(wsb));
  {
    Buf x(act);
    const int r = D.batch * D.seq_len, c = D.heads * D.head_dim;
    const float sk = 1.0f / std::sqrt(float(D.head_dim));
    x.fill(71, -sk, sk);
    convert_to_bf16(x.p, r, c, c, q.p, c, nullptr);
    x.fill(72, -sk, sk);
    convert_to_bf16(x.p, r, c, c, k.p, c, nullptr);
    x.fill(73, -1.0f, 1.0f);
    convert_to_bf16(x.p, r, c, c, v.p, c, nullptr);
    x.fill(74, -1.0f, 1.0f);
    convert_to_bf16(x.p, r, c, c, dO.p, c, nullptr);
    beta.fill(75, 0.0f, 1.0f);
    log_alpha.fill(76, std::log(0.5f), 0.0f);
    TTTLAB_CUDA_CHECK(cudaDeviceSynchronize());
  }
  for (const bool gated : {false, true}) {
    ChunkedDeltaRuleForwardArgs f;
    f.dims = ad;
    f.Q = q.p;
    f.K = k.p;
    f.V = v.p;
    f.beta = beta.p;
    f.log_alpha = gated ? log_alpha.p : nullptr;
    f.O = o.p;
    f.workspace = ws.p;
    f.workspace_bytes = wsb;
    const double ms = bench.time([&] { chunked_delta_rule_forward(f); });
    bench.add(std::string(gated ? "gated delta rule" : "delta rule") +
                  " forward bf16 chunked tensor cores",
              ms, tokens * (6 * d * d + 8 * 64.0 * d),
              4.0 * act * 2 + 4.0 * gates * (gated ? 2 : 1), 0, "", 0, &shape);
  }
  if (!with_backward) return;
  Buf dq(act), dk(act), dv(act), dbeta(gates), dla(gates), bws(floats_for(bwsb)),
      kept(floats_for(kb));
  for (const bool gated : {false, true}) {
    ChunkedDeltaRuleForwardArgs f;
    f.dims = ad;
    f.Q = q.p;
    f.K = k.p;
    f.V = v.p;
    f.beta = beta.p;
    f.log_alpha = gated ? log_alpha.p : nullptr;
    f.O = o.p;
    f.workspace = ws.p;
    f.workspace_bytes = wsb;
    ChunkedDeltaRuleBackwardArgs b;
    b.dims = ad;
    b.Q = q.p;
    b.K = k.p;
    b.V = v.p;
    b.beta = beta.p;
    b.log_alpha = f.log_alpha;
    b.dO = dO.p;
    b.dQ = dq.p;
    b.dK = dk.p;
    b.dV = dv.p;
    b.dbeta = dbeta.p;
    b.dlog_alpha = gated ? dla.p : nullptr;
    b.workspace = bws.p;
    b.workspace_bytes = bwsb;
    // The training step's way: the forward keeps what the backward reads (chunked_delta_rule_keep_bytes),
    // then, for comparison, the backward recomputing it from the inputs, as FLA's does.
    ChunkedDeltaRuleForwardArgs fk = f;
    fk.keep = kept.p;
    fk.keep_bytes = kb;
    ChunkedDeltaRuleBackwardArgs bk = b;
    bk.kept = kept.p;
    bk.kept_bytes = kb;
    const std::string name = gated ? "gated delta rule" : "delta rule";
    const double flops = tokens * (22 * d * d + 40 * 64.0 * d + 5 * 64.0 * 64.0),
                 bytes = 5.0 * act * 2 + 3.0 * act * 4 + 4.0 * gates * (gated ? 4 : 2);
    const double fb_ms = bench.time([&] {
      chunked_delta_rule_forward(fk);
      chunked_delta_rule_backward(bk);
    });
    bench.add(name + " fwd+bwd bf16 chunked tensor cores", fb_ms, flops, bytes, 0, "", 0, &shape);
    const double rc_ms = bench.time([&] {
      chunked_delta_rule_forward(f);
      chunked_delta_rule_backward(b);
    });
    bench.add(name + " fwd+bwd bf16 chunked, backward recomputes", rc_ms, flops, bytes, fb_ms,
              name + " fwd+bwd bf16 chunked tensor cores", 0, &shape);
  }
}

// Titans' memory (titans_forward / _backward, recurrent: one block per sequence and head, the tokens
// in order) at the bench's B, H, T, d and mini-batch b, states kept every C = 4b tokens (a multiple
// of b), a zero initial memory. Inputs: q, k uniform in ±1/√d, v and dO in ±1, θ in [0.02, 0.2)/d, α
// in [0, 0.05), η in [0.5, 0.95) (the test's ranges), the LayerNorm's w in [0.9, 1.1), bias in
// ±0.1. FLOPs per token and head as the recurrence does them: forward 8·d² (k·M_start, the momentum's
// rank-one write and decay, the memory's decay and add, q·M; the d-vectors' LayerNorms not
// counted); the backward reruns the forward with dq (10·d²) and walks back with G_M += qᵀdy,
// G_S += G_M, dα, dη, k·G_S, the dk row sums, G_start += kᵀdd and the two decays (19·d²), so fwd+bwd
// is 37·d². Floors: the fp32 tensors that must move, q, k, v, o and θ, α, η (and dO, dq, dk, dv, dθ,
// dα, dη); not the kept states or the backward's workspace. Rows named "titans memory (recurrent)
// forward fp32", "... fwd+bwd fp32": the forward is the recurrent kernel; the backward is what
// titans_backward's `automatic` form runs (the chunked backward at b ≤ 16), its FLOPs still counted
// as the recurrence's.
void titans_rows(Bench& bench) {
  const TttDims& D = bench.in().D;
  const TitansDims td{D.batch, D.seq_len, D.heads, D.head_dim, D.mini_batch, 4 * D.mini_batch};
  if (!titans_unsupported(td).empty()) return;
  const std::size_t act = std::size_t(D.batch) * D.seq_len * D.heads * D.head_dim;
  const std::size_t gates = std::size_t(D.batch) * D.seq_len * D.heads;
  const std::size_t hd = std::size_t(D.heads) * D.head_dim;
  const std::size_t kept = titans_state_floats(td);
  const std::size_t wsb = bench.cfg().backward ? titans_backward_workspace_bytes(td) : 0;
  const double tokens = double(D.batch) * D.heads * D.seq_len, d2 = double(D.head_dim) * D.head_dim;
  const std::string shape = "B=" + std::to_string(D.batch) + " H=" + std::to_string(D.heads) +
                            " T=" + std::to_string(D.seq_len) + " d=" + std::to_string(D.head_dim) +
                            " b=" + std::to_string(D.mini_batch);
  if (!fits_on_gpu("titans memory", shape,
                   4.0 * (8.0 * act + 6.0 * gates + 4.0 * hd + kept) + double(wsb)))
    return;
  Buf q(act), k(act), v(act), o(act), dO(act), dq(act), dk(act), dv(act);
  Buf theta(gates), alpha(gates), eta(gates), dtheta(gates), dalpha(gates), deta(gates);
  Buf w(hd), bias(hd), dw(hd), dbias(hd), states(kept), ws(floats_for(wsb));
  const float sk = 1.0f / std::sqrt(float(D.head_dim));
  q.fill(81, -sk, sk);
  k.fill(82, -sk, sk);
  v.fill(83, -1.0f, 1.0f);
  dO.fill(84, -1.0f, 1.0f);
  theta.fill(85, 0.02f / float(D.head_dim), 0.2f / float(D.head_dim));
  alpha.fill(86, 0.0f, 0.05f);
  eta.fill(87, 0.5f, 0.95f);
  w.fill(88, 0.9f, 1.1f);
  bias.fill(89, -0.1f, 0.1f);
  const int ld = D.heads * D.head_dim;
  TitansForwardArgs f;
  f.dims = td;
  f.q = q.p;
  f.ld_q = ld;
  f.k = k.p;
  f.ld_k = ld;
  f.v = v.p;
  f.ld_v = ld;
  f.theta = theta.p;
  f.alpha = alpha.p;
  f.eta = eta.p;
  f.w = w.p;
  f.bias = bias.p;
  f.o = o.p;
  f.ld_o = ld;
  f.states = states.p;
  const double fwd_ms = bench.time([&] { titans_forward(f); });
  bench.add("titans memory (recurrent) forward fp32", fwd_ms, 8 * tokens * d2,
            4.0 * (4.0 * act + 3.0 * gates), 0, "", 0, &shape);
  if (!bench.cfg().backward) return;
  TitansBackwardArgs b = titans_backward_args(f);
  b.dO = dO.p;
  b.ld_do = ld;
  b.dq = dq.p;
  b.ld_dq = ld;
  b.dk = dk.p;
  b.ld_dk = ld;
  b.dv = dv.p;
  b.ld_dv = ld;
  b.dtheta = dtheta.p;
  b.dalpha = dalpha.p;
  b.deta = deta.p;
  b.dw = dw.p;
  b.dbias = dbias.p;
  b.workspace = ws.p;
  b.workspace_bytes = wsb;
  const double fb_ms = bench.time([&] {
    titans_forward(f);
    titans_backward(b);
  });
  bench.add("titans memory (recurrent) fwd+bwd fp32", fb_ms, 37 * tokens * d2,
            4.0 * (8.0 * act + 6.0 * gates), 0, "", 0, &shape);
}

// LaCT's inner loop (lact_forward / _backward: one block per sequence and head, chunks of C tokens
// in tiles of 16, fp32 FMAs) at the bench's B, H, T and d, with the lab layer's sizes: d_h = d
// (inter_multi 1), C = 64, momentum. Inputs: q, k uniform in ±1/√d, v and dO in ±1, the rates in
// [0.01, 0.1), momentum in [0.5, 0.95), w0, w2 in ±√(3/d) and w1 in ±√(3/d_h) (the layer's
// variances). FLOPs per token and head (F = d·d_h), counted as the kernels do them: the read 6·F
// (q W0ᵀ, q W2ᵀ, h W1ᵀ); a token of an updating chunk 12·F more (k W0ᵀ, k W2ᵀ, v W1 and its share
// of the three weight sums); the renormalisation not counted. The backward: the read's 16·F
// (y0, y2, dO W1, dq, the three weight sums) and an updating token's 30·F (six d_h-vectors of
// dots, dv, dk and the ∂L/∂G products, three weight sums). Floors: q, k, v, o, the rates and the
// momentum in fp32 (and dO, dq, dk, dv and their gradients); not the kept states or the backward's
// workspace. Rows named "lact inner loop forward fp32", "... fwd+bwd fp32".
// Beside them the chunked form (lact_forward_chunked / _backward_chunked: batched products over the
// B·H heads through a cuBLAS Gemm of fp32, then tf32, precision; the same FLOPs counted, as it does
// the same products; the same floors): rows "lact chunked forward fp32" / "... tf32" and "lact
// chunked fwd+bwd fp32" / "... tf32", each with the kernels' row of its kind as its peer.
void lact_rows(Bench& bench) {
  const TttDims& D = bench.in().D;
  const int chunk = 64;
  const LactDims ld_dims{D.batch, D.seq_len, D.heads, D.head_dim, D.head_dim, chunk};
  if (!lact_unsupported(ld_dims).empty()) return;
  const std::size_t act = std::size_t(D.batch) * D.seq_len * D.heads * D.head_dim;
  const std::size_t gates = std::size_t(D.batch) * D.seq_len * D.heads;
  const std::size_t wts = std::size_t(D.batch) * D.heads * D.head_dim * D.head_dim;
  const std::size_t kept = lact_state_floats(ld_dims);
  const std::size_t wsb = bench.cfg().backward ? lact_backward_workspace_bytes(ld_dims) : 0;
  const std::size_t cwsb = lact_chunked_workspace_bytes(ld_dims);
  const double heads = double(D.batch) * D.heads, F = double(D.head_dim) * D.head_dim;
  const double read = double(D.seq_len), upd = double(ld_dims.updates()) * chunk;
  const std::string shape = "B=" + std::to_string(D.batch) + " H=" + std::to_string(D.heads) +
                            " T=" + std::to_string(D.seq_len) + " d=" + std::to_string(D.head_dim) +
                            " C=" + std::to_string(chunk);
  if (!fits_on_gpu("lact inner loop", shape,
                   4.0 * (8.0 * act + 8.0 * gates + 6.0 * wts + kept) + double(wsb) + double(cwsb)))
    return;
  Buf q(act), k(act), v(act), o(act), dO(act), dq(act), dk(act), dv(act);
  Buf lr0(gates), lr1(gates), lr2(gates), mom(gates);
  Buf dlr0(gates), dlr1(gates), dlr2(gates), dmom(gates);
  Buf w0(wts), w1(wts), w2(wts), dw0(wts), dw1(wts), dw2(wts), states(kept), ws(floats_for(wsb));
  Buf cws(floats_for(cwsb));
  const float sk = 1.0f / std::sqrt(float(D.head_dim)), sw = std::sqrt(3.0f / float(D.head_dim));
  q.fill(91, -sk, sk);
  k.fill(92, -sk, sk);
  v.fill(93, -1.0f, 1.0f);
  dO.fill(94, -1.0f, 1.0f);
  lr0.fill(95, 0.01f, 0.1f);
  lr1.fill(96, 0.01f, 0.1f);
  lr2.fill(97, 0.01f, 0.1f);
  mom.fill(98, 0.5f, 0.95f);
  w0.fill(99, -sw, sw);
  w1.fill(100, -sw, sw);
  w2.fill(101, -sw, sw);
  const int ld = D.heads * D.head_dim;
  LactForwardArgs f;
  f.dims = ld_dims;
  f.q = q.p;
  f.ld_q = ld;
  f.k = k.p;
  f.ld_k = ld;
  f.v = v.p;
  f.ld_v = ld;
  f.lr0 = lr0.p;
  f.lr1 = lr1.p;
  f.lr2 = lr2.p;
  f.momentum = mom.p;
  f.w0 = w0.p;
  f.w1 = w1.p;
  f.w2 = w2.p;
  f.o = o.p;
  f.ld_o = ld;
  f.states = states.p;
  const double fwd_ms = bench.time([&] { lact_forward(f); });
  bench.add("lact inner loop forward fp32", fwd_ms, heads * F * (6 * read + 12 * upd),
            4.0 * (4.0 * act + 4.0 * gates), 0, "", 0, &shape);
  LactForwardArgs cf = f;
  cf.workspace = cws.p;
  cf.workspace_bytes = cwsb;
  const GemmPrecision precisions[] = {GemmPrecision::Fp32, GemmPrecision::Tf32};
  for (GemmPrecision p : precisions) {
    const Gemm gemm(cf.stream, p);
    const double ms = bench.time([&] { lact_forward_chunked(gemm, cf); });
    bench.add(std::string("lact chunked forward ") + to_string(p), ms, heads * F * (6 * read + 12 * upd),
              4.0 * (4.0 * act + 4.0 * gates), fwd_ms, "lact inner loop forward fp32", 0, &shape);
  }
  if (!bench.cfg().backward) return;
  LactBackwardArgs b = lact_backward_args(f);
  b.dO = dO.p;
  b.ld_do = ld;
  b.dq = dq.p;
  b.ld_dq = ld;
  b.dk = dk.p;
  b.ld_dk = ld;
  b.dv = dv.p;
  b.ld_dv = ld;
  b.dlr0 = dlr0.p;
  b.dlr1 = dlr1.p;
  b.dlr2 = dlr2.p;
  b.dmomentum = dmom.p;
  b.dw0 = dw0.p;
  b.dw1 = dw1.p;
  b.dw2 = dw2.p;
  b.workspace = ws.p;
  b.workspace_bytes = wsb;
  const double fb_ms = bench.time([&] {
    lact_forward(f);
    lact_backward(b);
  });
  bench.add("lact inner loop fwd+bwd fp32", fb_ms, heads * F * (22 * read + 42 * upd),
            4.0 * (8.0 * act + 8.0 * gates), 0, "", 0, &shape);
  LactBackwardArgs cb = b;
  cb.workspace = cws.p;
  cb.workspace_bytes = cwsb;
  for (GemmPrecision p : precisions) {
    const Gemm gemm(cf.stream, p);
    const double ms = bench.time([&] {
      lact_forward_chunked(gemm, cf);
      lact_backward_chunked(gemm, cb);
    });
    bench.add(std::string("lact chunked fwd+bwd ") + to_string(p), ms, heads * F * (22 * read + 42 * upd),
              4.0 * (8.0 * act + 8.0 * gates), fb_ms, "lact inner loop fwd+bwd fp32", 0, &shape);
  }
}

}  // namespace

TttBenchReport ttt_bench(const TttBenchConfig& cfg) {
  const TttDims D = cfg.dims;
  detail::check_dims("ttt_bench", D);
  detail::require(cfg.repeats >= 1 && cfg.warmup >= 0, "ttt_bench: repeats must be >= 1");
  TttBenchReport rep;
  int dev = 0;
  TTTLAB_CUDA_CHECK(cudaGetDevice(&dev));
  cudaDeviceProp prop{};
  TTTLAB_CUDA_CHECK(cudaGetDeviceProperties(&prop, dev));
  rep.device = prop.name;
  rep.copy_bandwidth_gbs = copy_bandwidth_gbs();

  for (const std::string& g : cfg.groups)
    detail::require(is_ttt_bench_group(g), "ttt_bench: no row group named '" + g + "'");
  const auto wanted = [&](const char* group) {
    return cfg.groups.empty() ||
           std::find(cfg.groups.begin(), cfg.groups.end(), group) != cfg.groups.end();
  };

  const Inputs in(D);
  Bench bench(cfg, rep, in, prop.multiProcessorCount);
  if (wanted("ttt-linear")) {
    const TttLinearForwardArgs fa = linear_forward_args(in);
    linear_forward_rows(bench, fa);
    // g = 4, whose backward recomputes 3 of every 4 states, and g = 1, every state kept, as the
    // training step does.
    if (cfg.backward) {
      linear_backward_rows(bench, fa, 4);
      linear_backward_rows(bench, fa, 1);
    }
  }
  if (cfg.mlp && wanted("ttt-mlp")) {
    const MlpState mlp(in);
    const TttMlpForwardArgs ma = mlp.forward_args(in);
    mlp_forward_rows(bench, ma);
    // g = 8, whose backward recomputes the states inside each group, and g = 1, every state kept,
    // as the training step does.
    if (cfg.backward) {
      mlp_backward_rows(bench, ma, mlp.hd, 8);
      mlp_backward_rows(bench, ma, mlp.hd, 1);
    }
  }
  if (wanted("attention")) {
    attention_rows(bench);
    flash_rows(bench, D.seq_len);
    for (int T : cfg.attention_lengths)
      if (T != D.seq_len) flash_rows(bench, T);
  }
  if (wanted("linear-attention")) {
    chunked_linear_rows(bench, D.seq_len);
    for (int T : cfg.attention_lengths)
      if (T != D.seq_len) chunked_linear_rows(bench, T);
  }
  if (wanted("matrix-rules")) matrix_rule_rows(bench);
  if (wanted("delta-rules")) chunked_delta_rows(bench);
  if (wanted("titans")) titans_rows(bench);
  if (wanted("lact")) lact_rows(bench);
  TTTLAB_CUDA_CHECK(cudaDeviceSynchronize());
  return rep;
}

std::string format_ttt_bench(const TttBenchReport& rep) {
  std::string out;
  char line[512];
  std::snprintf(line, sizeof line, "device: %s   copy bandwidth (read+write): %.0f GB/s\n",
                rep.device.c_str(), rep.copy_bandwidth_gbs);
  out += line;
  std::snprintf(line, sizeof line, "%-38s %-28s %10s %19s %10s %10s %10s %10s\n", "kernel", "shape",
                "median ms", "min - max", "GFLOP/s", "floor ms", "peer ms", "target ms");
  out += line;
  for (const TttBenchRow& r : rep.rows) {
    std::snprintf(line, sizeof line, "%-38s %-28s %10.4f %8.4f - %-8.4f %10.1f %10.4f %10s %10s\n",
                  r.name.c_str(), r.shape.c_str(), r.median_ms, r.min_ms, r.max_ms, r.gflops,
                  r.floor_ms, r.peer_ms > 0 ? std::to_string(r.peer_ms).substr(0, 5).c_str() : "-",
                  r.target_ms > 0 ? std::to_string(r.target_ms).substr(0, 5).c_str() : "-");
    out += line;
  }
  return out;
}

}  // namespace tttlab::kernels
