// fp32 emulation of the one-round and two-round loss-gradient LN against fp64, one row of D=64.
#include <cmath>
#include <cstdio>
#include <random>
constexpr int D = 64, NW = 4;
int main() {
  std::mt19937 rng(1);
  std::normal_distribution<double> n01;
  for (double shift : {0.0, 1.0, 10.0, 100.0, 1000.0}) {
    double worst1 = 0, worst2 = 0;
    for (int trial = 0; trial < 2000; ++trial) {
      float z[D], gam[D], bet[D], r[D];
      for (int i = 0; i < D; ++i) {
        z[i] = float(shift + n01(rng) * (1 + 0.5 * (i % 16 == 0)));
        gam[i] = float(1 + 0.3 * n01(rng));
        bet[i] = float(0.3 * n01(rng));
        r[i] = float(n01(rng) + shift * 0.1);
      }
      const float eps = 1e-6f;
      // fp64 reference
      double mu = 0, var = 0, gref[D];
      for (int i = 0; i < D; ++i) mu += z[i];
      mu /= D;
      for (int i = 0; i < D; ++i) var += (z[i] - mu) * (z[i] - mu);
      var /= D;
      double rs = 1 / std::sqrt(var + eps), xh[D], gh[D], s1 = 0, s2 = 0;
      for (int i = 0; i < D; ++i) {
        xh[i] = (z[i] - mu) * rs;
        gh[i] = double(gam[i]) * (gam[i] * xh[i] + bet[i] - r[i]);
        s1 += gh[i];
        s2 += gh[i] * xh[i];
      }
      double gmax = 0;
      for (int i = 0; i < D; ++i) {
        gref[i] = (gh[i] - s1 / D - xh[i] * s2 / D) * rs;
        gmax = std::fmax(gmax, std::fabs(gref[i]));
      }
      // two-round fp32 (the old kernel)
      float g2r[D];
      {
        float sw[NW], qw[NW], s = 0;
        for (int w = 0; w < NW; ++w) {
          sw[w] = 0;
          for (int c = 0; c < 16; ++c) sw[w] += z[w * 16 + c];
          float mw = sw[w] / 16, q = 0;
          for (int c = 0; c < 16; ++c) q += (z[w * 16 + c] - mw) * (z[w * 16 + c] - mw);
          qw[w] = q;
          s += sw[w];
        }
        float m = s / D, m2 = 0;
        for (int w = 0; w < NW; ++w) {
          float dm = sw[w] / 16 - m;
          m2 += qw[w] + 16 * dm * dm;
        }
        float rsf = 1 / std::sqrt(m2 / D + eps), a = 0, b = 0, x[D], h[D];
        for (int i = 0; i < D; ++i) {
          x[i] = (z[i] - m) * rsf;
          h[i] = gam[i] * (gam[i] * x[i] + bet[i] - r[i]);
          a += h[i];
          b += h[i] * x[i];
        }
        for (int i = 0; i < D; ++i) g2r[i] = (h[i] - a / D - x[i] * (b / D)) * rsf;
      }
      // one-round fp32 (the new kernel)
      float g1r[D];
      {
        float sw[NW], q[NW], c[NW], e[NW], f[NW], U[NW], G[NW], u[D];
        for (int i = 0; i < D; ++i) u[i] = gam[i] * (bet[i] - r[i]);
        for (int w = 0; w < NW; ++w) {
          sw[w] = 0;
          for (int k = 0; k < 16; ++k) sw[w] += z[w * 16 + k];
          float mw = sw[w] * (1.0f / 16);
          q[w] = c[w] = e[w] = f[w] = U[w] = G[w] = 0;
          for (int k = 0; k < 16; ++k) {
            int i = w * 16 + k;
            float y = z[i] - mw, g2 = gam[i] * gam[i], gy = g2 * y;
            q[w] += y * y; c[w] += gy; e[w] += gy * y; f[w] += u[i] * y; U[w] += u[i]; G[w] += g2;
          }
        }
        float s = 0;
        for (int w = 0; w < NW; ++w) s += sw[w];
        float m = s / D, m2 = 0, pc = 0, pe = 0, pf = 0, us = 0;
        for (int w = 0; w < NW; ++w) {
          float dw = sw[w] / 16 - m;
          m2 += q[w] + 16 * dw * dw;
          pc += c[w] + dw * G[w];
          pe += e[w] + dw * (2 * c[w] + dw * G[w]);
          pf += f[w] + dw * U[w];
          us += U[w];
        }
        float rsf = 1 / std::sqrt(m2 / D + eps), p1 = (rsf * pc + us) / D, p2 = rsf * (rsf * pe + pf) / D;
        for (int i = 0; i < D; ++i) {
          float x = (z[i] - m) * rsf, h = gam[i] * gam[i] * x + u[i];
          g1r[i] = (h - p1 - x * p2) * rsf;
        }
      }
      for (int i = 0; i < D; ++i) {
        worst2 = std::fmax(worst2, std::fabs(g2r[i] - gref[i]) / gmax);
        worst1 = std::fmax(worst1, std::fabs(g1r[i] - gref[i]) / gmax);
      }
    }
    std::printf("row mean %7.1f (sigma ~1): worst |G - ref|/max|ref|: two-round %.2e  one-round %.2e\n",
                shift, worst2, worst1);
  }
}
