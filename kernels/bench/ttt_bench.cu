// ttt_bench(): times the TTT kernels at one shape (see tttlab/kernels/ttt.hpp and docs/KERNELS.md,
// which explains the FLOP counts and the memory-traffic floors printed beside the times).
#include <cuda_runtime.h>

#include <algorithm>
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <functional>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "common/cuda_check.hpp"
#include "ttt/ttt_host.hpp"
#include "tttlab/kernels/attention.hpp"
#include "tttlab/kernels/gemm.hpp"
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

  // Copy bandwidth: a 2 × 512 MiB device-to-device copy, bytes read + written.
  {
    const std::size_t n = (std::size_t(512) << 20) / sizeof(float);
    Buf src(n), dst(n);
    src.fill(1, -1.0f, 1.0f);
    const double ms = time_median(
        [&] {
          TTTLAB_CUDA_CHECK(cudaMemcpyAsync(dst.p, src.p, n * sizeof(float), cudaMemcpyDeviceToDevice));
        },
        2, 10);
    rep.copy_bandwidth_gbs = 2.0 * n * sizeof(float) / (ms * 1e-3) / 1e9;
  }
  const double bw = rep.copy_bandwidth_gbs * 1e9;  // bytes/s
  auto floor_ms = [&](double bytes) { return bytes / bw * 1e3; };

  const std::size_t BH = std::size_t(D.batch) * D.heads, d = D.head_dim;
  const std::size_t act = std::size_t(D.batch) * D.seq_len * D.heads * d;  // one [B, T, H·d]
  const std::size_t lam_n = BH * D.seq_len;
  const double tokens = double(D.batch) * D.seq_len * D.heads;  // (token, head) pairs
  const double b = D.mini_batch, dd = double(d);

  // Inputs: random, never zeros. The activations are several times L2, so no rotation is needed.
  Buf Q(act), K(act), V(act), O(act), lam(lam_n), tau(D.mini_batch), gam(D.heads * d),
      bet(D.heads * d), W0(D.heads * d * d), b0(D.heads * d);
  Q.fill(11, -1.0f, 1.0f);
  K.fill(12, -1.0f, 1.0f);
  V.fill(13, -1.0f, 1.0f);
  lam.fill(14, 0.2f / float(d), 0.8f / float(d));
  gam.fill(15, 0.8f, 1.2f);
  bet.fill(16, -0.1f, 0.1f);
  W0.fill(17, -1.0f / std::sqrt(float(d)), 1.0f / std::sqrt(float(d)));
  b0.fill(18, -0.1f, 0.1f);
  {
    std::vector<float> t(D.mini_batch);
    for (int i = 0; i < D.mini_batch; ++i) t[i] = 1.0f / float(i + 1);
    TTTLAB_CUDA_CHECK(cudaMemcpy(tau.p, t.data(), t.size() * sizeof(float), cudaMemcpyHostToDevice));
  }
  TTTLAB_CUDA_CHECK(cudaDeviceSynchronize());

  // The inputs every TTT call reads, for any of the argument structs of ttt.hpp.
  auto set_inputs = [&](auto& a) {
    a.dims = D;
    a.Q = Q.p;
    a.K = K.p;
    a.V = V.p;
    a.lambda = lam.p;
    a.tau = tau.p;
    a.ln_weight = gam.p;
    a.ln_bias = bet.p;
  };
  TttLinearForwardArgs fa;
  set_inputs(fa);
  fa.W0 = W0.p;
  fa.b0 = b0.p;
  fa.O = O.p;

  const double fwd_bytes = (4.0 * act + lam_n) * sizeof(float);
  const double fwd_flops = tokens * (6 * dd * dd + 4 * b * dd);
  const std::string shape = shape_text(D);
  auto add = [&](std::string name, double ms, double flops, double bytes, double peer_ms,
                 std::string peer, double target_ms) {
    TttBenchRow r;
    r.name = std::move(name);
    r.shape = shape;
    r.median_ms = ms;
    set_spread(r);
    r.gflops = flops / (ms * 1e-3) / 1e9;
    r.floor_ms = floor_ms(bytes);
    r.peer_ms = peer_ms;
    r.peer = std::move(peer);
    r.target_ms = target_ms;
    rep.rows.push_back(std::move(r));
  };
  const char* tk_peer = "ThunderKittens TTT-Linear prefill fp16 (issue 4)";

  std::vector<std::pair<TttLinearForwardVersion, const char*>> versions;
  if (cfg.all_versions) {
    versions = {{TttLinearForwardVersion::Fallback, "fallback-simt"},
                {TttLinearForwardVersion::Tf32, "tf32"}};
  }
  versions.push_back({TttLinearForwardVersion::Default, "default"});
  for (auto [v, vname] : versions) {
    if (!ttt_linear_forward_supports(v, D)) continue;
    fa.version = v;
    const double ms = time_median([&] { ttt_linear_forward(fa); }, cfg.warmup, cfg.repeats);
    add(std::string("ttt-linear forward ") + vname, ms, fwd_flops, fwd_bytes, 0.585, tk_peer, 0.3);
  }
  // Where the tensor-core kernel runs in two roles (one block per SM, head_dim ≤ 64), the one-role
  // form too.
  const bool one_wave = BH <= std::size_t(prop.multiProcessorCount);
  if (cfg.all_versions && one_wave && d <= 64 &&
      ttt_linear_forward_supports(TttLinearForwardVersion::Tf32, D)) {
    TttLinearForwardArgs f1 = fa;
    f1.version = TttLinearForwardVersion::Tf32;
    f1.two_roles = false;
    const double ms = time_median([&] { ttt_linear_forward(f1); }, cfg.warmup, cfg.repeats);
    add("ttt-linear forward tf32 one role", ms, fwd_flops, fwd_bytes, 0.585, tk_peer, 0.3);
  }
  // Version Bf16: the same inputs rounded to bf16, read and written in 2 bytes (its floor moves half
  // the bytes of the rows above; target 0.2 ms). Its own buffers, so fa stays fp32 for the rows below.
  if (ttt_linear_forward_supports(TttLinearForwardVersion::Bf16, D)) {
    const Bf16Io io(Q, K, V, D, act);
    TttLinearForwardArgs f16 = io.in_place_of_fp32(fa);
    f16.version = TttLinearForwardVersion::Bf16;
    const double ms = time_median([&] { ttt_linear_forward(f16); }, cfg.warmup, cfg.repeats);
    add("ttt-linear forward bf16", ms, fwd_flops, (4.0 * act) * 2 + lam_n * sizeof(float), 0.585,
        tk_peer, 0.2);
  }

  // Forward with checkpoints every g mini-batches, then the backward: g = 4, whose backward
  // recomputes 3 of every 4 states, and g = 1, every state kept, as the training step does.
  auto linear_backward_rows = [&](int group) {
    const std::string g = "(g=" + std::to_string(group) + ")";
    const std::size_t n_ck = ttt_num_checkpoints(D, group);
    Buf ckW(BH * n_ck * d * d), ckb(BH * n_ck * d), dO(act), dQ(act), dK(act), dV(act),
        dlam(lam_n), dtau(D.mini_batch), dgam(D.heads * d), dbet(D.heads * d),
        dW0(D.heads * d * d), db0(D.heads * d);
    dO.fill(19, -1.0f, 1.0f);
    const std::size_t ws_bytes = ttt_linear_backward_workspace_bytes(D, group);
    Buf ws((ws_bytes + sizeof(float) - 1) / sizeof(float));
    TttLinearForwardArgs f2 = fa;
    f2.version = TttLinearForwardVersion::Default;
    f2.checkpoint_W = ckW.p;
    f2.checkpoint_b = ckb.p;
    f2.checkpoint_group = group;
    TttLinearBackwardArgs ba;
    set_inputs(ba);
    ba.checkpoint_W = ckW.p;
    ba.checkpoint_b = ckb.p;
    ba.checkpoint_group = group;
    ba.dO = dO.p;
    ba.dQ = dQ.p;
    ba.dK = dK.p;
    ba.dV = dV.p;
    ba.dlambda = dlam.p;
    ba.dtau = dtau.p;
    ba.dln_weight = dgam.p;
    ba.dln_bias = dbet.p;
    ba.dW0 = dW0.p;
    ba.db0 = db0.p;
    ba.workspace = ws.p;
    ba.workspace_bytes = ws_bytes;
    const double ck_bytes = double(BH) * n_ck * (d * d + d) * sizeof(float);
    const double fb_bytes = (11.0 * act + 3.0 * lam_n) * sizeof(float) + 2 * ck_bytes;
    const double fb_flops = tokens * (22 * dd * dd + 16 * b * dd);
    // The forward writing the checkpoints, then the backward, timed as one.
    const auto time_fwd_bwd = [&](const TttLinearForwardArgs& f, const TttLinearBackwardArgs& bw) {
      return time_median(
          [&] {
            ttt_linear_forward(f);
            ttt_linear_backward(bw);
          },
          cfg.warmup, cfg.repeats);
    };
    const double ms = time_fwd_bwd(f2, ba);
    add("ttt-linear forward+backward " + g, ms, fb_flops, fb_bytes, 376.0,
        "official PyTorch TTT-Linear fwd+bwd (issue 4)", 1.0);
    std::vector<std::pair<TttBackwardVersion, const char*>> bversions;
    if (cfg.all_versions) bversions.push_back({TttBackwardVersion::Fallback, "fallback"});
    bversions.push_back({TttBackwardVersion::Default, "default"});
    const bool tf32_bwd = cfg.all_versions && ttt_linear_backward_supports(TttBackwardVersion::Tf32, D) &&
                          ttt_linear_forward_supports(TttLinearForwardVersion::Tf32, D);
    if (tf32_bwd) {
      // What the training step runs with tf32 products: the Tf32 forward, then the Tf32 backward.
      TttLinearForwardArgs f3 = f2;
      f3.version = TttLinearForwardVersion::Tf32;
      TttLinearBackwardArgs b3 = ba;
      b3.version = TttBackwardVersion::Tf32;
      const double mst = time_fwd_bwd(f3, b3);
      add("ttt-linear forward+backward " + g + " tf32", mst, fb_flops, fb_bytes, 3.59,
          "flash-linear-attention chunk_ttt_linear bf16 fwd+bwd (issue 15)", 1.0);
      bversions.push_back({TttBackwardVersion::Tf32, "tf32"});
    }
    for (auto [bv, bname] : bversions) {
      ba.version = bv;
      const double msb = time_median([&] { ttt_linear_backward(ba); }, cfg.warmup, cfg.repeats);
      add("ttt-linear backward " + g + " " + bname, msb, tokens * (16 * dd * dd + 12 * b * dd),
          (7.0 * act + 2.0 * lam_n) * sizeof(float) + ck_bytes, 0, "", 0);
    }
    // Where the fused kernel runs in two roles (g = 1, one block per SM), the one-role form too.
    if (cfg.all_versions && group == 1 && one_wave) {
      ba.version = tf32_bwd ? TttBackwardVersion::Tf32 : TttBackwardVersion::Default;
      ba.two_roles = false;
      const double msb = time_median([&] { ttt_linear_backward(ba); }, cfg.warmup, cfg.repeats);
      add("ttt-linear backward " + g + " " + (tf32_bwd ? "tf32" : "default") + " one role", msb,
          tokens * (16 * dd * dd + 12 * b * dd),
          (7.0 * act + 2.0 * lam_n) * sizeof(float) + ck_bytes, 0, "", 0);
    }
  };
  if (cfg.backward) {
    linear_backward_rows(4);
    linear_backward_rows(1);
  }

  if (cfg.mlp) {
    const std::size_t hd = 4 * d;
    Buf W1(D.heads * d * hd), b1(D.heads * hd), W2(D.heads * hd * d), b2(D.heads * d);
    W1.fill(21, -1.0f / std::sqrt(float(d)), 1.0f / std::sqrt(float(d)));
    W2.fill(22, -1.0f / std::sqrt(float(hd)), 1.0f / std::sqrt(float(hd)));
    b1.fill(23, -0.1f, 0.1f);
    b2.fill(24, -0.1f, 0.1f);
    const std::size_t ws_bytes = ttt_mlp_forward_workspace_bytes(D);
    Buf ws((ws_bytes + sizeof(float) - 1) / sizeof(float));
    TttMlpForwardArgs ma;
    set_inputs(ma);
    ma.W1 = W1.p;
    ma.b1 = b1.p;
    ma.W2 = W2.p;
    ma.b2 = b2.p;
    ma.O = O.p;
    ma.workspace = ws_bytes ? ws.p : nullptr;
    ma.workspace_bytes = ws_bytes;
    std::vector<std::pair<TttMlpForwardVersion, const char*>> mversions;
    if (cfg.all_versions)
      mversions = {{TttMlpForwardVersion::Fallback, "fallback"}};
    mversions.push_back({TttMlpForwardVersion::Default, "default"});
    if (cfg.all_versions) mversions.push_back({TttMlpForwardVersion::Tf32, "tf32"});
    for (auto [mv, mname] : mversions) {
      if (!ttt_mlp_forward_supports(mv, D)) continue;
      ma.version = mv;
      const double ms = time_median([&] { ttt_mlp_forward(ma); }, cfg.warmup, cfg.repeats);
      add(std::string("ttt-mlp forward ") + mname, ms, tokens * (56 * dd * dd + 20 * b * dd),
          fwd_bytes, 16.9, "ThunderKittens TTT-MLP prefill fp16 (issue 4)", 3.0);
    }
    // Version Bf16: the same inputs rounded to bf16, read and written in 2 bytes.
    if (ttt_mlp_forward_supports(TttMlpForwardVersion::Bf16, D)) {
      const Bf16Io io(Q, K, V, D, act);
      TttMlpForwardArgs m16 = io.in_place_of_fp32(ma);
      m16.version = TttMlpForwardVersion::Bf16;
      const double ms = time_median([&] { ttt_mlp_forward(m16); }, cfg.warmup, cfg.repeats);
      add("ttt-mlp forward bf16", ms, tokens * (56 * dd * dd + 20 * b * dd),
          (4.0 * act) * 2 + lam_n * sizeof(float), 16.9,
          "ThunderKittens TTT-MLP prefill fp16 (issue 4)", 3.0);
    }
    ma.version = TttMlpForwardVersion::Default;
    // Forward with checkpoints every g mini-batches, then the backward (docs/KERNELS.md, "TTT-MLP
    // backward": FLOP count and floor): g = 8, whose backward recomputes the states inside each
    // group, and g = 1, every state kept, as the training step does.
    auto mlp_backward_rows = [&](int group) {
      const std::string g = "(g=" + std::to_string(group) + ")";
      const std::size_t n_ck = ttt_num_checkpoints(D, group);
      Buf ckW1(BH * n_ck * d * hd), ckb1(BH * n_ck * hd), ckW2(BH * n_ck * hd * d),
          ckb2(BH * n_ck * d), dO(act), dQ(act), dK(act), dV(act), dlam(lam_n), dtau(D.mini_batch),
          dgam(D.heads * d), dbet(D.heads * d), dW1(D.heads * d * hd), db1(D.heads * hd),
          dW2(D.heads * hd * d), db2(D.heads * d);
      dO.fill(25, -1.0f, 1.0f);
      const std::size_t bws_bytes = ttt_mlp_backward_workspace_bytes(D, group);
      Buf bws((bws_bytes + sizeof(float) - 1) / sizeof(float));
      TttMlpForwardArgs mf = ma;
      mf.checkpoint_W1 = ckW1.p;
      mf.checkpoint_b1 = ckb1.p;
      mf.checkpoint_W2 = ckW2.p;
      mf.checkpoint_b2 = ckb2.p;
      mf.checkpoint_group = group;
      TttMlpBackwardArgs mb;
      set_inputs(mb);
      mb.checkpoint_W1 = ckW1.p;
      mb.checkpoint_b1 = ckb1.p;
      mb.checkpoint_W2 = ckW2.p;
      mb.checkpoint_b2 = ckb2.p;
      mb.checkpoint_group = group;
      mb.dO = dO.p;
      mb.dQ = dQ.p;
      mb.dK = dK.p;
      mb.dV = dV.p;
      mb.dlambda = dlam.p;
      mb.dtau = dtau.p;
      mb.dln_weight = dgam.p;
      mb.dln_bias = dbet.p;
      mb.dW1 = dW1.p;
      mb.db1 = db1.p;
      mb.dW2 = dW2.p;
      mb.db2 = db2.p;
      mb.workspace = bws.p;
      mb.workspace_bytes = bws_bytes;
      const double ck_bytes = double(BH) * n_ck * (2.0 * d * hd + hd + d) * sizeof(float);
      const double bwd_flops = tokens * (152 * dd * dd + 60 * b * dd);
      const double ms = time_median(
          [&] {
            ttt_mlp_forward(mf);
            ttt_mlp_backward(mb);
          },
          cfg.warmup, cfg.repeats);
      add("ttt-mlp forward+backward " + g, ms, tokens * (56 * dd * dd + 20 * b * dd) + bwd_flops,
          (11.0 * act + 3.0 * lam_n) * sizeof(float) + 2 * ck_bytes, 713.0,
          "official PyTorch TTT-MLP fwd+bwd (issue 4)", 8.0);
      const double bwd_bytes = (7.0 * act + 2.0 * lam_n) * sizeof(float) + ck_bytes;
      const double msb = time_median([&] { ttt_mlp_backward(mb); }, cfg.warmup, cfg.repeats);
      add("ttt-mlp backward " + g, msb, bwd_flops, bwd_bytes, 0, "", 0);
      if (cfg.all_versions) {  // the training step's backward when its products are tf32
        mb.version = TttMlpBackwardVersion::Tf32;
        const double mst = time_median([&] { ttt_mlp_backward(mb); }, cfg.warmup, cfg.repeats);
        add("ttt-mlp backward " + g + " tf32", mst, bwd_flops, bwd_bytes, 0, "", 0);
      }
    };
    if (cfg.backward) {
      mlp_backward_rows(8);
      mlp_backward_rows(1);
    }
  }
  // ---- attention baselines (attention.hpp) -----------------------------------------------------------
  // Causal softmax attention at the same B, H, T, d. FLOPs per head: the forward's Q·Kᵀ and P·V over
  // the causal half, T²·d each (half of the full square's 2·T²·d), 2·T²·d in all; the backward's
  // recomputed Q·Kᵀ, dO·Vᵀ, dV, dQ and dK, 5·T²·d (FlashAttention's count; the kernels run Q·Kᵀ and
  // dO·Vᵀ once in each of their two passes, 7·T²·d executed). Floors: the forward reads Q, K, V and
  // writes O and the lse; the backward reads Q, K, V, O, dO, lse and writes dQ, dK, dV (δ: one row).
  {
    const AttentionDims ad{D.batch, D.heads, D.seq_len, D.head_dim};
    const double T2d = double(BH) * D.seq_len * double(D.seq_len) * dd;
    const std::string ashape = "B=" + std::to_string(D.batch) + " H=" + std::to_string(D.heads) +
                               " T=" + std::to_string(D.seq_len) + " d=" + std::to_string(D.head_dim);
    auto add_attn = [&](std::string name, double ms, double flops, double bytes) {
      TttBenchRow r;
      r.name = std::move(name);
      r.shape = ashape;
      r.median_ms = ms;
      set_spread(r);
      r.gflops = flops / (ms * 1e-3) / 1e9;
      r.floor_ms = floor_ms(bytes);
      rep.rows.push_back(std::move(r));
    };
    Buf lse(lam_n), adO(act), adQ(act), adK(act), adV(act);
    adO.fill(31, -1.0f, 1.0f);
    const std::size_t aws = attention_backward_workspace_bytes(ad, AttentionKind::Softmax);
    Buf ws((aws + sizeof(float) - 1) / sizeof(float));
    for (AttentionKind kind : {AttentionKind::Softmax, AttentionKind::Linear}) {
      const bool soft = kind == AttentionKind::Softmax;
      AttentionForwardArgs af;
      af.dims = ad;
      af.kind = kind;
      af.Q = Q.p;
      af.K = K.p;
      af.V = V.p;
      af.O = O.p;
      af.lse = soft ? lse.p : nullptr;
      AttentionBackwardArgs ab;
      ab.dims = ad;
      ab.kind = kind;
      ab.Q = Q.p;
      ab.K = K.p;
      ab.V = V.p;
      ab.O = soft ? O.p : nullptr;
      ab.lse = soft ? lse.p : nullptr;
      ab.dO = adO.p;
      ab.dQ = adQ.p;
      ab.dK = adK.p;
      ab.dV = adV.p;
      ab.workspace = soft ? ws.p : nullptr;
      ab.workspace_bytes = soft ? aws : 0;
      const std::string vname = " default";
      const std::string kname = soft ? "softmax-attention" : "linear-attention";
      const double fwd_ms = time_median([&] { attention_forward(af); }, cfg.warmup, cfg.repeats);
      add_attn(kname + " forward" + vname, fwd_ms, 2 * T2d, (4.0 * act + lam_n) * sizeof(float));
      if (cfg.backward) {
        const double fb_ms = time_median(
            [&] {
              attention_forward(af);
              attention_backward(ab);
            },
            cfg.warmup, cfg.repeats);
        add_attn(kname + " fwd+bwd" + vname, fb_ms, 7 * T2d, (12.0 * act + 4.0 * lam_n) * sizeof(float));
      }
    }
  }
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
                  r.name.c_str(), r.shape.c_str(), r.median_ms, r.min_ms, r.max_ms, r.gflops, r.floor_ms,
                  r.peer_ms > 0 ? std::to_string(r.peer_ms).substr(0, 5).c_str() : "-",
                  r.target_ms > 0 ? std::to_string(r.target_ms).substr(0, 5).c_str() : "-");
    out += line;
  }
  return out;
}

}  // namespace tttlab::kernels
