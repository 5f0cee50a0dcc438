#include "gui/fonts.hpp"

#include <imgui.h>

#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <string>

namespace tttlab::gui {
namespace {

Fonts g_fonts;

// Unicode blocks to bake into the atlas (pairs of inclusive ranges, zero-terminated).
const ImWchar kRanges[] = {
    0x0020, 0x00FF,  // Basic Latin, Latin-1 (· ² ³ ± × µ)
    0x0100, 0x017F,  // Latin extended-A (ŷ ĝ: precomposed, as Dear ImGui draws no combining marks)
    0x02B0, 0x02FF,  // Spacing modifier letters (the ˣ of ℝᵈˣᵈ)
    0x0370, 0x03FF,  // Greek (η θ λ τ σ Δ)
    0x1D00, 0x1DBF,  // Phonetic extensions (ᵀ ᵢ ⱼ)
    0x2000, 0x206F,  // General punctuation (– — ‖ … ′)
    0x2070, 0x209F,  // Superscripts and subscripts (⁻ ¹ ₜ ₀)
    0x2100, 0x214F,  // Letterlike symbols (ℓ ℝ)
    0x2150, 0x218F,  // Number forms (Ⅱ, used as the pause symbol)
    0x2190, 0x21FF,  // Arrows (→ ↦ ⇒)
    0x2200, 0x22FF,  // Mathematical operators (∇ ≤ ≈ ⊙ ∑ − ⊗)
    0x2300, 0x23FF,  // Miscellaneous technical (⌀ ⏎)
    0x2400, 0x243F,  // Control pictures (␣ for a space token)
    0x25A0, 0x25FF,  // Geometric shapes (▶ ◀ ■ ●)
    0x2C60, 0x2C7F,  // Latin extended-C (the subscript ⱼ)
    0xFFFD, 0xFFFD,  // the replacement character (a NUL in a lesson's Markdown)
    0,
};

std::filesystem::path font_dir() {
  if (const char* env = std::getenv("TTTLAB_FONT_DIR"); env && *env) return env;
  return "/usr/share/fonts/truetype/dejavu";
}

ImFont* add(const std::filesystem::path& file, float px) {
  ImFontConfig cfg;
  cfg.OversampleH = 2;
  cfg.OversampleV = 1;
  cfg.PixelSnapH = false;
  return ImGui::GetIO().Fonts->AddFontFromFileTTF(file.string().c_str(), px, &cfg, kRanges);
}

}  // namespace

const Fonts& fonts() { return g_fonts; }

const Fonts& load_fonts(float scale) {
  ImGuiIO& io = ImGui::GetIO();
  io.Fonts->Clear();
  const auto dir = font_dir();
  const auto sans = dir / "DejaVuSans.ttf", bold = dir / "DejaVuSans-Bold.ttf",
             mono = dir / "DejaVuSansMono.ttf";
  std::error_code ec;
  if (std::filesystem::exists(sans, ec) && std::filesystem::exists(bold, ec) &&
      std::filesystem::exists(mono, ec)) {
    g_fonts.regular = add(sans, 15.0f * scale);
    g_fonts.small = add(sans, 13.0f * scale);
    g_fonts.bold = add(bold, 15.0f * scale);
    g_fonts.large = add(sans, 22.0f * scale);
    g_fonts.mono = add(mono, 14.0f * scale);
    g_fonts.dejavu = g_fonts.regular && g_fonts.small && g_fonts.bold && g_fonts.large && g_fonts.mono;
  }
  if (!g_fonts.dejavu) {
    std::fprintf(stderr,
                 "tttlab: DejaVu fonts not found in %s (install fonts-dejavu-core or set "
                 "TTTLAB_FONT_DIR); using ImGui's built-in font, maths symbols will show as '?'\n",
                 dir.string().c_str());
    io.Fonts->Clear();
    ImFontConfig cfg;
    cfg.SizePixels = 13.0f * scale;
    ImFont* f = io.Fonts->AddFontDefault(&cfg);
    g_fonts = Fonts{f, f, f, f, f, false};
  }
  io.FontDefault = g_fonts.regular;
  return g_fonts;
}

}  // namespace tttlab::gui
