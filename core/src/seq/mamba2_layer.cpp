// Mamba-2 as a sequence layer (see tttlab/seq/mamba2_layer.hpp; the equations and the backward are
// docs/MATH.md §8.8).
#include "tttlab/seq/mamba2_layer.hpp"

#include <algorithm>
#include <cmath>
#include <stdexcept>
#include <string>
#include <vector>

#include "tttlab/nn/activation_arrays.hpp"
#include "tttlab/nn/causal_conv.hpp"
#include "tttlab/nn/norms.hpp"

namespace tttlab {
namespace {

[[noreturn]] void bad_mamba(const std::string& msg) { throw std::invalid_argument("mamba2 layer: " + msg); }

// The reference's dt initialisation range and floor (Mamba2.__init__'s dt_min, dt_max, dt_init_floor)
// and its A range (A_init_range).
constexpr double kDtMin = 0.001, kDtMax = 0.1, kDtFloor = 1e-4;
constexpr double kAMin = 1.0, kAMax = 16.0;

// The reference's softplus (PyTorch's F.softplus and the Triton scan's): r itself above 20, where
// log(1 + e^r) − r < 3e-9, so that fixtures computed by it match to fp64 rounding.
constexpr double kSoftplusThreshold = 20.0;

template <class S>
S softplus(S r) {
  if (r > S(kSoftplusThreshold)) return r;
  // log(1 + e^r) without loss of precision for very negative r.
  return std::max(r, S(0)) + std::log1p(std::exp(-std::abs(r)));
}
// Its derivative: σ(r), and 1 above the threshold.
template <class S>
S softplus_grad(S r) {
  if (r > S(kSoftplusThreshold)) return S(1);
  return S(1) / (S(1) + std::exp(-r));
}

template <class S>
struct Mamba2Stream : SequenceState {
  Mat<S> conv_history;   // [K−1, d_inner + 2N], the convolution's last inputs, oldest first
  std::vector<Mat<S>> ssm;  // per head, S_h [P, N]
};

template <class S>
struct Mamba2Cache : LayerCache {
  Mat<S> x;         // input [T, D]
  Mat<S> zx;        // x · in_proj [T, 2·d_inner + 2N + H]
  Mat<S> conv_pre;  // the convolution's output before silu [T, d_inner + 2N]
  Mat<S> xbc;       // silu(conv_pre): [xs | B | C]
  Mat<S> dt;        // softplus(dt_raw + dt_bias) [T, H]
  Mat<S> y;         // the scan's output plus D·xs [T, d_inner]
  Mat<S> gated;     // y ⊙ silu(z), the gated norm's input
  Mat<S> normed;    // the gated norm's output, out_proj's input
  std::vector<std::vector<Mat<S>>> chunk_start;  // per head, per chunk: S_h before the chunk
};

// The front of the layer, shared by both forms: in_proj, the convolution (continuing `history`),
// silu, and dt. Fills c.zx, c.conv_pre, c.xbc, c.dt.
template <class S>
void front(const Mamba2Config& cfg, const Mamba2Params<S>& p, ConstMatRef<S> x, Mat<S>& history,
           Mamba2Cache<S>& c) {
  const int di = cfg.d_inner(), cd = cfg.conv_dim(), H = cfg.heads();
  c.zx.noalias() = x * p.in_proj;
  causal_conv_forward<S>(c.zx.middleCols(di, cd), p.conv_w, p.conv_b, history, c.conv_pre);
  silu_array<S>(c.conv_pre, c.xbc);
  c.dt.resize(x.rows(), H);
  for (Eigen::Index t = 0; t < x.rows(); ++t)
    for (int h = 0; h < H; ++h) c.dt(t, h) = softplus<S>(c.zx(t, di + cd + h) + p.dt_bias(h));
}

// The back of the layer: the gated RMSNorm and out_proj. Fills c.gated and c.normed from c.y.
template <class S>
Mat<S> back(const Mamba2Config& cfg, const Mamba2Params<S>& p, Mamba2Cache<S>& c) {
  Mat<S> silu_z;
  silu_array<S>(Mat<S>(c.zx.leftCols(cfg.d_inner())), silu_z);
  c.gated = (c.y.array() * silu_z.array()).matrix();
  rms_norm_forward<S>(c.gated, p.norm_w, c.normed, S(cfg.norm_eps));
  return c.normed * p.out_proj;
}

// The recurrent form for one head: X [T, P], B, C [T, N], dt [T], the decay rate A < 0; St [P, N]
// is the state before the first token and is left after the last; Y [T, P] (without D·X).
template <class S>
void scan_recurrent(ConstMatRef<S> X, ConstMatRef<S> B, ConstMatRef<S> C, const Vec<S>& dt, S A, Mat<S>& St,
                    MatRef<S> Y) {
  for (Eigen::Index t = 0; t < X.rows(); ++t) {
    St *= std::exp(dt(t) * A);
    St.noalias() += (dt(t) * X.row(t).transpose()) * B.row(t);
    Y.row(t).noalias() = C.row(t) * St.transpose();
  }
}

// The quantities of one chunk [c0, c0 + L) of the chunked form, for one head.
template <class S>
struct ChunkTerms {
  Vec<S> cs;    // segment sums cs_i = Σ_{j ≤ i} dt_j·A inside the chunk
  Vec<S> e;     // exp(cs_i): the decay from the chunk's start to token i
  Vec<S> w;     // exp(cs_{L−1} − cs_j): the decay from token j to the chunk's end
  Mat<S> Xd;    // dt ⊙ X [L, P]
  Mat<S> CB;    // C Bᵀ [L, L]
  Mat<S> M;     // the decay mask L_ij = exp(cs_i − cs_j), i ≥ j (0 above the diagonal)
  Mat<S> G;     // CB ⊙ M
};

template <class S>
ChunkTerms<S> chunk_terms(ConstMatRef<S> X, ConstMatRef<S> B, ConstMatRef<S> C, const Vec<S>& dt, S A,
                          Eigen::Index c0, Eigen::Index L) {
  ChunkTerms<S> k;
  k.cs.resize(L);
  S run = 0;
  for (Eigen::Index i = 0; i < L; ++i) k.cs(i) = run += dt(c0 + i) * A;
  k.e = k.cs.array().exp().matrix();
  k.w = (k.cs(L - 1) - k.cs.array()).exp().matrix();
  k.Xd = dt.segment(c0, L).asDiagonal() * X.middleRows(c0, L);
  k.CB.noalias() = C.middleRows(c0, L) * B.middleRows(c0, L).transpose();
  k.M = Mat<S>::Zero(L, L);
  for (Eigen::Index i = 0; i < L; ++i)
    for (Eigen::Index j = 0; j <= i; ++j) k.M(i, j) = std::exp(k.cs(i) - k.cs(j));
  k.G = k.CB.cwiseProduct(k.M);
  return k;
}

// The chunked (SSD) form for one head, same arguments as scan_recurrent plus the chunk size Q; when
// `starts` is given it receives the state before each chunk (for the backward).
template <class S>
void scan_chunked(ConstMatRef<S> X, ConstMatRef<S> B, ConstMatRef<S> C, const Vec<S>& dt, S A, int Q, Mat<S>& St,
                  MatRef<S> Y, std::vector<Mat<S>>* starts) {
  const Eigen::Index T = X.rows();
  for (Eigen::Index c0 = 0; c0 < T; c0 += Q) {
    const Eigen::Index L = std::min<Eigen::Index>(Q, T - c0);
    if (starts) starts->push_back(St);
    const ChunkTerms<S> k = chunk_terms<S>(X, B, C, dt, A, c0, L);
    // Inside the chunk, plus what the carried state contributes.
    Y.middleRows(c0, L).noalias() = k.G * k.Xd;
    Y.middleRows(c0, L).noalias() += k.e.asDiagonal() * (C.middleRows(c0, L) * St.transpose());
    const Mat<S> next = k.Xd.transpose() * (k.w.asDiagonal() * B.middleRows(c0, L));
    St = k.e(L - 1) * St + next;
  }
}

// The backward of scan_chunked for one head (docs/MATH.md §8.8), chunks in reverse, from the states
// the forward saved and dY [T, P] of the scan's output (without D·X). ADDS into dX [T, P], dB, dC
// [T, N], ddt [T] and dA.
template <class S>
void scan_chunked_backward(ConstMatRef<S> X, ConstMatRef<S> B, ConstMatRef<S> C, const Vec<S>& dt, S A, int Q,
                           const std::vector<Mat<S>>& starts, ConstMatRef<S> dY, MatRef<S> dX, MatRef<S> dB,
                           MatRef<S> dC, Vec<S>& ddt, S& dA) {
  const Eigen::Index T = X.rows();
  const Eigen::Index chunks = (T + Q - 1) / Q;
  Mat<S> dS = Mat<S>::Zero(X.cols(), B.cols());  // ∂loss/∂(the state after the chunk); 0 after the last
  for (Eigen::Index c = chunks; c-- > 0;) {
    const Eigen::Index c0 = c * Q, L = std::min<Eigen::Index>(Q, T - c0);
    const ChunkTerms<S> k = chunk_terms<S>(X, B, C, dt, A, c0, L);
    const Mat<S>& Sp = starts[c];
    const auto dYc = dY.middleRows(c0, L);
    const auto Bc = B.middleRows(c0, L);
    const auto Cc = C.middleRows(c0, L);
    // Y = G·Xd + diag(e)·C·Spᵀ,  S_next = e_{L−1}·Sp + Xdᵀ·diag(w)·B
    const Mat<S> dGM = (dYc * k.Xd.transpose()).cwiseProduct(k.M);  // ∂/∂G masked, times the mask
    Mat<S> dXd = k.G.transpose() * dYc;
    dXd.noalias() += k.w.asDiagonal() * (Bc * dS.transpose());
    dB.middleRows(c0, L).noalias() += dGM.transpose() * Cc;
    dB.middleRows(c0, L).noalias() += k.w.asDiagonal() * (k.Xd * dS);
    dC.middleRows(c0, L).noalias() += dGM * Bc;
    dC.middleRows(c0, L).noalias() += k.e.asDiagonal() * (dYc * Sp);
    // Through the segment sums: the mask, e and w.
    const Mat<S> R = dGM.cwiseProduct(k.CB);
    Vec<S> dcs = R.rowwise().sum() - R.colwise().sum().transpose();
    const Mat<S> CS = Cc * Sp.transpose();  // [L, P]
    dcs += (dYc.cwiseProduct(CS).rowwise().sum()).cwiseProduct(k.e);
    dcs(L - 1) += k.e(L - 1) * dS.cwiseProduct(Sp).sum();
    const Vec<S> dw = k.Xd.cwiseProduct(Bc * dS.transpose()).rowwise().sum().cwiseProduct(k.w);
    dcs(L - 1) += dw.sum();
    dcs -= dw;
    // The state before the chunk.
    Mat<S> dSp = (k.e.asDiagonal() * dYc).transpose() * Cc;
    dSp += k.e(L - 1) * dS;
    dS = std::move(dSp);
    // cs_i = Σ_{j ≤ i} dt_j·A  ⇒  ∂/∂a_j = Σ_{i ≥ j} dcs_i; a = dt·A; Xd = dt ⊙ X.
    S acc = 0;
    for (Eigen::Index i = L; i-- > 0;) {
      acc += dcs(i);
      ddt(c0 + i) += acc * A + X.row(c0 + i).dot(dXd.row(i));
      dA += acc * dt(c0 + i);
      dX.row(c0 + i) += dt(c0 + i) * dXd.row(i);
    }
  }
}

template <class S>
Mat<S> uniform_mat(Eigen::Index r, Eigen::Index c, double lo, double hi, Rng& rng) {
  Mat<S> m(r, c);
  for (Eigen::Index i = 0; i < m.size(); ++i) m.data()[i] = S(lo + (hi - lo) * rng.uniform());
  return m;
}

template <class S>
void check(const Mamba2Config& cfg, const Mamba2Params<S>& p) {
  cfg.validate();
  auto shape = [](const auto& m, Eigen::Index r, Eigen::Index c, const char* name) {
    if (m.rows() != r || m.cols() != c)
      bad_mamba(std::string(name) + " must be [" + std::to_string(r) + ", " + std::to_string(c) + "], got [" +
                std::to_string(m.rows()) + ", " + std::to_string(m.cols()) + "]");
  };
  const int D = cfg.width, di = cfg.d_inner(), cd = cfg.conv_dim(), H = cfg.heads();
  shape(p.in_proj, D, cfg.in_proj_width(), "in_proj.weight");
  shape(p.conv_w, cd, cfg.d_conv, "conv1d.weight");
  shape(p.conv_b, 1, cd, "conv1d.bias");
  shape(p.dt_bias, 1, H, "dt_bias");
  shape(p.A_log, 1, H, "A_log");
  shape(p.D, 1, H, "D");
  shape(p.norm_w, 1, di, "norm.weight");
  shape(p.out_proj, di, D, "out_proj.weight");
}

}  // namespace

template <class S>
void mamba2_scan_chunked(ConstMatRef<S> X, ConstMatRef<S> B, ConstMatRef<S> C, const Vec<S>& dt,
                         S A, int Q, Mat<S>& state, MatRef<S> Y, std::vector<Mat<S>>* starts) {
  scan_chunked<S>(X, B, C, dt, A, Q, state, Y, starts);
}
template <class S>
void mamba2_scan_chunked_backward(ConstMatRef<S> X, ConstMatRef<S> B, ConstMatRef<S> C,
                                  const Vec<S>& dt, S A, int Q, const std::vector<Mat<S>>& starts,
                                  ConstMatRef<S> dY, MatRef<S> dX, MatRef<S> dB, MatRef<S> dC,
                                  Vec<S>& ddt, S& dA) {
  scan_chunked_backward<S>(X, B, C, dt, A, Q, starts, dY, dX, dB, dC, ddt, dA);
}
double mamba2_softplus(double r) { return softplus<double>(r); }
double mamba2_softplus_grad(double r) { return softplus_grad<double>(r); }
double mamba2_init_dt_bias(Rng& rng) {
  const double dt = std::max(
      kDtFloor, std::exp(std::log(kDtMin) + rng.uniform() * (std::log(kDtMax) - std::log(kDtMin))));
  return dt + std::log(-std::expm1(-dt));  // softplus⁻¹(dt)
}
double mamba2_init_A_log(Rng& rng) { return std::log(kAMin + (kAMax - kAMin) * rng.uniform()); }

void Mamba2Config::validate() const {
  auto positive = [](int v, const char* name) {
    if (v <= 0) bad_mamba(std::string(name) + " must be positive, got " + std::to_string(v));
  };
  positive(width, "width");
  positive(d_state, "d_state");
  positive(d_conv, "d_conv");
  positive(expand, "expand");
  positive(headdim, "headdim");
  positive(chunk_size, "chunk_size");
  if (d_inner() % headdim != 0)
    bad_mamba("headdim (" + std::to_string(headdim) + ") must divide d_inner = expand * width (" +
              std::to_string(d_inner()) + ")");
  if (!(norm_eps > 0) || !std::isfinite(norm_eps)) bad_mamba("norm_eps must be positive and finite");
}

template <class S>
Mamba2Params<S> Mamba2Params<S>::init(const Mamba2Config& cfg, double std, Rng& rng) {
  cfg.validate();
  const int D = cfg.width, di = cfg.d_inner(), cd = cfg.conv_dim(), H = cfg.heads();
  Mamba2Params p;
  p.in_proj.resize(D, cfg.in_proj_width());
  for (Eigen::Index i = 0; i < p.in_proj.size(); ++i) p.in_proj.data()[i] = S(std * rng.normal());
  const double bound = 1.0 / std::sqrt(double(cfg.d_conv));  // PyTorch's Conv1d default, fan-in K
  p.conv_w = uniform_mat<S>(cd, cfg.d_conv, -bound, bound, rng);
  p.conv_b = uniform_mat<S>(1, cd, -bound, bound, rng);
  p.dt_bias.resize(H);
  for (int h = 0; h < H; ++h) p.dt_bias(h) = S(mamba2_init_dt_bias(rng));
  p.A_log.resize(H);
  for (int h = 0; h < H; ++h) p.A_log(h) = S(mamba2_init_A_log(rng));
  p.D = RowVec<S>::Ones(H);
  p.norm_w = RowVec<S>::Ones(di);
  p.out_proj.resize(di, D);
  for (Eigen::Index i = 0; i < p.out_proj.size(); ++i) p.out_proj.data()[i] = S(std * rng.normal());
  return p;
}

template <class S>
Mamba2Params<S> Mamba2Params<S>::zeros(const Mamba2Config& cfg) {
  cfg.validate();
  const int D = cfg.width, di = cfg.d_inner(), cd = cfg.conv_dim(), H = cfg.heads();
  Mamba2Params p;
  p.in_proj = Mat<S>::Zero(D, cfg.in_proj_width());
  p.conv_w = Mat<S>::Zero(cd, cfg.d_conv);
  p.conv_b = RowVec<S>::Zero(cd);
  p.dt_bias = p.A_log = p.D = RowVec<S>::Zero(H);
  p.norm_w = RowVec<S>::Zero(di);
  p.out_proj = Mat<S>::Zero(di, D);
  return p;
}

template <class S>
Mamba2Layer<S>::Mamba2Layer(Mamba2Config cfg, Mamba2Params<S> params) : m_cfg(cfg), m_params(std::move(params)) {
  check(m_cfg, m_params);
}

template <class S>
std::unique_ptr<SequenceState> Mamba2Layer<S>::start() const {
  auto st = std::make_unique<Mamba2Stream<S>>();
  st->conv_history = Mat<S>::Zero(m_cfg.d_conv - 1, m_cfg.conv_dim());
  st->ssm.assign(m_cfg.heads(), Mat<S>::Zero(m_cfg.headdim, m_cfg.d_state));
  return st;
}

template <class S>
Mat<S> Mamba2Layer<S>::forward(SequenceState& state, ConstMatRef<S> x) const {
  return forward(state, x, Mamba2Form::Recurrent);
}

template <class S>
Mat<S> Mamba2Layer<S>::forward(SequenceState& state, ConstMatRef<S> x, Mamba2Form form) const {
  auto* st = dynamic_cast<Mamba2Stream<S>*>(&state);
  if (!st) bad_mamba("forward() was given the state of another layer type");
  if (x.cols() != m_cfg.width)
    bad_mamba("input width " + std::to_string(x.cols()) + " differs from the layer's " + std::to_string(m_cfg.width));
  const int di = m_cfg.d_inner(), P = m_cfg.headdim, N = m_cfg.d_state;
  Mamba2Cache<S> c;
  front<S>(m_cfg, m_params, x, st->conv_history, c);
  c.y.resize(x.rows(), di);
  for (int h = 0; h < m_cfg.heads(); ++h) {
    const Vec<S> dt = c.dt.col(h);
    const S A = -std::exp(m_params.A_log(h));
    const auto X = c.xbc.middleCols(h * P, P);
    const auto B = c.xbc.middleCols(di, N), C = c.xbc.middleCols(di + N, N);
    if (form == Mamba2Form::Recurrent)
      scan_recurrent<S>(X, B, C, dt, A, st->ssm[h], c.y.middleCols(h * P, P));
    else
      scan_chunked<S>(X, B, C, dt, A, m_cfg.chunk_size, st->ssm[h], c.y.middleCols(h * P, P), nullptr);
    c.y.middleCols(h * P, P) += m_params.D(h) * X;
  }
  st->tokens += x.rows();
  return back<S>(m_cfg, m_params, c);
}

template <class S>
std::unique_ptr<LayerCache> Mamba2Layer<S>::forward_train(ConstMatRef<S> x, Mat<S>& out) const {
  if (x.cols() != m_cfg.width)
    bad_mamba("input width " + std::to_string(x.cols()) + " differs from the layer's " + std::to_string(m_cfg.width));
  const int di = m_cfg.d_inner(), P = m_cfg.headdim, N = m_cfg.d_state, H = m_cfg.heads();
  auto c = std::make_unique<Mamba2Cache<S>>();
  c->x = x;
  Mat<S> history = Mat<S>::Zero(m_cfg.d_conv - 1, m_cfg.conv_dim());
  front<S>(m_cfg, m_params, x, history, *c);
  c->y.resize(x.rows(), di);
  c->chunk_start.resize(H);
  for (int h = 0; h < H; ++h) {
    const Vec<S> dt = c->dt.col(h);
    const S A = -std::exp(m_params.A_log(h));
    const auto X = c->xbc.middleCols(h * P, P);
    Mat<S> St = Mat<S>::Zero(P, N);
    scan_chunked<S>(X, c->xbc.middleCols(di, N), c->xbc.middleCols(di + N, N), dt, A, m_cfg.chunk_size, St,
                    c->y.middleCols(h * P, P), &c->chunk_start[h]);
    c->y.middleCols(h * P, P) += m_params.D(h) * X;
  }
  out = back<S>(m_cfg, m_params, *c);
  return c;
}

template <class S>
void Mamba2Layer<S>::backward(const LayerCache& cache, ConstMatRef<S> dOut, SequenceLayer<S>& grads,
                              Mat<S>& dx) const {
  auto* c = dynamic_cast<const Mamba2Cache<S>*>(&cache);
  auto* gl = dynamic_cast<Mamba2Layer<S>*>(&grads);
  if (!c || !gl) bad_mamba("backward() was given the cache or gradient of another layer type");
  Mamba2Params<S>& g = gl->m_params;
  const int di = m_cfg.d_inner(), cd = m_cfg.conv_dim(), P = m_cfg.headdim, N = m_cfg.d_state, H = m_cfg.heads();
  const Eigen::Index T = c->x.rows();
  // out = normed · out_proj
  g.out_proj.noalias() += c->normed.transpose() * dOut;
  const Mat<S> dnormed = dOut * m_params.out_proj.transpose();
  // normed = rmsnorm(gated) ⊙ w,  gated = y ⊙ silu(z)
  Mat<S> dgated;
  rms_norm_backward<S>(c->gated, m_params.norm_w, dnormed, dgated, g.norm_w, S(m_cfg.norm_eps));
  const Mat<S> z = c->zx.leftCols(di);
  Mat<S> silu_z, dsilu_z;
  silu_array<S>(z, silu_z);
  silu_grad_array<S>(z, dsilu_z);
  Mat<S> dzx(T, m_cfg.in_proj_width());
  dzx.leftCols(di) = (dgated.array() * c->y.array() * dsilu_z.array()).matrix();
  const Mat<S> dy = (dgated.array() * silu_z.array()).matrix();
  // The scan, head by head; B and C are shared, so their gradients sum over the heads.
  Mat<S> dxbc = Mat<S>::Zero(T, cd);
  Mat<S> ddt(T, H);
  for (int h = 0; h < H; ++h) {
    const Vec<S> dt = c->dt.col(h);
    const S A = -std::exp(m_params.A_log(h));
    const auto X = c->xbc.middleCols(h * P, P);
    const auto dyh = dy.middleCols(h * P, P);
    g.D(h) += dyh.cwiseProduct(X).sum();
    dxbc.middleCols(h * P, P) = m_params.D(h) * dyh;
    Vec<S> ddth = Vec<S>::Zero(T);
    S dA = 0;
    scan_chunked_backward<S>(X, c->xbc.middleCols(di, N), c->xbc.middleCols(di + N, N), dt, A, m_cfg.chunk_size,
                             c->chunk_start[h], dyh, dxbc.middleCols(h * P, P), dxbc.middleCols(di, N),
                             dxbc.middleCols(di + N, N), ddth, dA);
    g.A_log(h) += dA * A;  // A = −exp(A_log)
    // dt = softplus(dt_raw + dt_bias)
    for (Eigen::Index t = 0; t < T; ++t) {
      const S r = c->zx(t, di + cd + h) + m_params.dt_bias(h);
      ddt(t, h) = ddth(t) * softplus_grad(r);
    }
    g.dt_bias(h) += ddt.col(h).sum();
  }
  dzx.rightCols(H) = ddt;
  // xbc = silu(conv(xBC_raw))
  Mat<S> dsilu_conv;
  silu_grad_array<S>(c->conv_pre, dsilu_conv);
  const Mat<S> dconv = (dxbc.array() * dsilu_conv.array()).matrix();
  Mat<S> du;
  causal_conv_backward<S>(c->zx.middleCols(di, cd), m_params.conv_w, dconv, du, g.conv_w, g.conv_b);
  dzx.middleCols(di, cd) = du;
  // zx = x · in_proj
  g.in_proj.noalias() += c->x.transpose() * dzx;
  dx.noalias() = dzx * m_params.in_proj.transpose();
}

template <class S>
std::unique_ptr<SequenceLayer<S>> Mamba2Layer<S>::zeros_like() const {
  return std::make_unique<Mamba2Layer<S>>(m_cfg, Mamba2Params<S>::zeros(m_cfg));
}

template <class S>
void Mamba2Layer<S>::for_each_param(const ParamVisitor<S>& f) {
  auto mat = [&f](Mat<S>& m, const char* name) { f(Eigen::Map<Mat<S>>(m.data(), m.rows(), m.cols()), name); };
  auto row = [&f](RowVec<S>& m, const char* name) { f(Eigen::Map<Mat<S>>(m.data(), 1, m.cols()), name); };
  Mamba2Params<S>& p = m_params;
  mat(p.in_proj, "in_proj.weight");
  mat(p.conv_w, "conv1d.weight");
  row(p.conv_b, "conv1d.bias");
  row(p.dt_bias, "dt_bias");
  row(p.A_log, "A_log");
  row(p.D, "D");
  row(p.norm_w, "norm.weight");
  mat(p.out_proj, "out_proj.weight");
}

template <class S>
double Mamba2Layer<S>::forward_flops(long T) const {
  const double D = m_cfg.width, di = m_cfg.d_inner(), cd = m_cfg.conv_dim(), K = m_cfg.d_conv;
  const double N = m_cfg.d_state, P = m_cfg.headdim, H = m_cfg.heads(), Q = m_cfg.chunk_size;
  // Per token: the projections, the convolution, C Bᵀ's row (Q·N), and per head the mask product's row
  // (Q·P), the state's read (P·N) and its share of the state's write (P·N).
  const double per_token = 2 * D * m_cfg.in_proj_width() + 2 * di * D + 2 * cd * K + 2 * Q * N +
                           H * (2 * Q * P + 4 * P * N);
  return double(T) * per_token;
}

template void mamba2_scan_chunked<float>(ConstMatRef<float>, ConstMatRef<float>, ConstMatRef<float>,
                                         const Vec<float>&, float, int, Mat<float>&, MatRef<float>,
                                         std::vector<Mat<float>>*);
template void mamba2_scan_chunked<double>(ConstMatRef<double>, ConstMatRef<double>,
                                          ConstMatRef<double>, const Vec<double>&, double, int,
                                          Mat<double>&, MatRef<double>, std::vector<Mat<double>>*);
template void mamba2_scan_chunked_backward<float>(ConstMatRef<float>, ConstMatRef<float>,
                                                  ConstMatRef<float>, const Vec<float>&, float, int,
                                                  const std::vector<Mat<float>>&,
                                                  ConstMatRef<float>, MatRef<float>, MatRef<float>,
                                                  MatRef<float>, Vec<float>&, float&);
template void mamba2_scan_chunked_backward<double>(ConstMatRef<double>, ConstMatRef<double>,
                                                   ConstMatRef<double>, const Vec<double>&, double,
                                                   int, const std::vector<Mat<double>>&,
                                                   ConstMatRef<double>, MatRef<double>,
                                                   MatRef<double>, MatRef<double>, Vec<double>&,
                                                   double&);
template struct Mamba2Params<float>;
template struct Mamba2Params<double>;
template class Mamba2Layer<float>;
template class Mamba2Layer<double>;

}  // namespace tttlab
