// tttlab_png_check A.png B.png …: checks screenshots for the gui_screenshots test.
//   • every image is not blank: the grey-level standard deviation is at least 12 (of 255) and at
//     least 1 % of the pixels differ from the most common colour by more than 24;
//   • every pair of images differs: the mean absolute difference is at least 2 (of 255) and at
//     least 2 % of the pixels differ (so two panels, or two states, never render the same picture).
// Prints the measurements; exit status 0 when all checks pass, 1 otherwise.
#include <stb_image.h>

#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <map>
#include <string>
#include <vector>

namespace {

struct Img {
  std::string path;
  int w = 0, h = 0;
  std::vector<unsigned char> rgb;
};

double grey(const unsigned char* p) { return 0.2126 * p[0] + 0.7152 * p[1] + 0.0722 * p[2]; }

}  // namespace

int main(int argc, char** argv) {
  if (argc < 2) {
    std::fprintf(stderr, "usage: tttlab_png_check A.png [B.png …]\n");
    return 2;
  }
  std::vector<Img> imgs;
  bool ok = true;
  for (int i = 1; i < argc; ++i) {
    Img im;
    im.path = argv[i];
    int n = 0;
    unsigned char* data = stbi_load(argv[i], &im.w, &im.h, &n, 3);
    if (!data) {
      std::printf("FAIL %s: cannot read (%s)\n", argv[i], stbi_failure_reason());
      ok = false;
      continue;
    }
    im.rgb.assign(data, data + static_cast<std::size_t>(im.w) * im.h * 3);
    stbi_image_free(data);
    const std::size_t px = static_cast<std::size_t>(im.w) * im.h;
    double sum = 0, sum2 = 0;
    std::map<unsigned, std::size_t> hist;
    for (std::size_t k = 0; k < px; ++k) {
      const unsigned char* p = &im.rgb[3 * k];
      const double g = grey(p);
      sum += g;
      sum2 += g * g;
      ++hist[(p[0] << 16) | (p[1] << 8) | p[2]];
    }
    const double mean = sum / px, sd = std::sqrt(std::max(0.0, sum2 / px - mean * mean));
    unsigned mode = 0;
    std::size_t best = 0;
    for (const auto& [c, cnt] : hist)
      if (cnt > best) {
        best = cnt;
        mode = c;
      }
    std::size_t off = 0;
    for (std::size_t k = 0; k < px; ++k) {
      const unsigned char* p = &im.rgb[3 * k];
      const int d = std::abs(p[0] - static_cast<int>(mode >> 16)) + std::abs(p[1] - static_cast<int>((mode >> 8) & 255)) +
                    std::abs(p[2] - static_cast<int>(mode & 255));
      off += d > 24;
    }
    const double off_frac = static_cast<double>(off) / px;
    const bool pass = sd >= 12.0 && off_frac >= 0.01;
    std::printf("%s %s: %dx%d, grey sd %.1f, %zu colours, %.1f %% pixels away from the background\n",
                pass ? "ok  " : "FAIL", argv[i], im.w, im.h, sd, hist.size(), 100.0 * off_frac);
    ok = ok && pass;
    imgs.push_back(std::move(im));
  }
  for (std::size_t a = 0; a < imgs.size(); ++a)
    for (std::size_t b = a + 1; b < imgs.size(); ++b) {
      const Img &x = imgs[a], &y = imgs[b];
      if (x.w != y.w || x.h != y.h) {
        std::printf("ok   %s vs %s: different sizes\n", x.path.c_str(), y.path.c_str());
        continue;
      }
      double mad = 0;
      std::size_t diff = 0;
      const std::size_t px = static_cast<std::size_t>(x.w) * x.h;
      for (std::size_t k = 0; k < px; ++k) {
        int d = 0;
        for (int c = 0; c < 3; ++c) d += std::abs(x.rgb[3 * k + c] - y.rgb[3 * k + c]);
        mad += d / 3.0;
        diff += d > 12;
      }
      mad /= px;
      const double frac = static_cast<double>(diff) / px;
      const bool pass = mad >= 2.0 && frac >= 0.02;
      std::printf("%s %s vs %s: mean |difference| %.2f, %.1f %% of pixels differ\n", pass ? "ok  " : "FAIL",
                  x.path.c_str(), y.path.c_str(), mad, 100.0 * frac);
      ok = ok && pass;
    }
  return ok ? 0 : 1;
}
