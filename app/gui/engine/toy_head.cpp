#include "gui/engine/toy_head.hpp"

#include <cmath>
#include <cstdio>

#include "gui/engine/rng.hpp"

namespace tttlab::gui {
namespace {

// Independent random streams of one seed (see Rng).
enum Stream : std::uint64_t { kEmbedding = 1, kProjQ, kProjK, kProjV, kGate, kInit };

template <class S>
Mat<S> gaussian(Rng& rng, long rows, long cols, double stddev) {
  Mat<S> m(rows, cols);
  for (long i = 0; i < rows; ++i)
    for (long j = 0; j < cols; ++j) m(i, j) = static_cast<S>(stddev * rng.normal());
  return m;
}

}  // namespace

template <class S>
ToyHead<S> make_toy_head(const HeadConfig& c) {
  ToyHead<S> h;
  h.options = c.inner_options();
  const int d = c.d;
  for (int r = 0; r < c.repeat; ++r) h.bytes.insert(h.bytes.end(), c.text.begin(), c.text.end());
  const long T = h.tokens();

  // The embedding table has one row per byte value; rows are drawn in byte order so a byte's
  // vector does not depend on the text.
  Rng emb_rng(c.seed, kEmbedding);
  const Mat<S> table = gaussian<S>(emb_rng, 256, d, 1.0);
  h.X.resize(T, d);
  for (long t = 0; t < T; ++t) h.X.row(t) = table.row(h.bytes[static_cast<std::size_t>(t)]);

  const double proj_std = 1.0 / std::sqrt(static_cast<double>(d));
  Rng rq(c.seed, kProjQ), rk(c.seed, kProjK), rv(c.seed, kProjV), rg(c.seed, kGate);
  h.Q = h.X * gaussian<S>(rq, d, d, proj_std);
  h.K = h.X * gaussian<S>(rk, d, d, proj_std);
  h.V = h.X * gaussian<S>(rv, d, d, proj_std);

  const RowVec<S> theta = gaussian<S>(rg, 1, d, proj_std);
  h.lambda = per_token_lr<S>(c.eta_options(), h.X, theta, S(0), d);

  h.params.ln_weight = RowVec<S>::Ones(d);
  h.params.ln_bias = RowVec<S>::Zero(d);
  h.params.tau = token_index_scale<S>(c.eta_options(), RowVec<S>::Zero(c.mini_batch));

  h.w0 = InnerWeights<S>::zeros(h.options, d);
  if (c.w0 == W0Init::Random) {
    Rng ri(c.seed, kInit);
    h.w0.W1 = gaussian<S>(ri, h.w0.W1.rows(), h.w0.W1.cols(), 0.02);
    if (h.w0.W2.size() > 0) h.w0.W2 = gaussian<S>(ri, h.w0.W2.rows(), h.w0.W2.cols(), 0.02);
  }
  return h;
}

std::string token_label(unsigned char b) {
  if (b == ' ') return "\xE2\x90\xA3";  // ␣ OPEN BOX
  if (b == '\n') return "\\n";
  if (b == '\t') return "\\t";
  if (b >= 0x21 && b < 0x7F) return std::string(1, static_cast<char>(b));
  char buf[8];
  std::snprintf(buf, sizeof buf, "0x%02X", b);
  return buf;
}

template ToyHead<float> make_toy_head<float>(const HeadConfig&);
template ToyHead<double> make_toy_head<double>(const HeadConfig&);

}  // namespace tttlab::gui
