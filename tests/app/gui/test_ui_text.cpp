// The text students read: no code identifiers in the app's words, and nothing the font cannot draw.
//
// Dear ImGui draws one glyph per code point and knows no combining marks: "Z" followed by U+0304
// (combining macron) comes out as "Z¯". Every code point of the lessons and of the app's string
// literals must be one the app's font atlas holds. The words the panels, sidebars, dialogs and plots
// show must not name code (Model::mixer_input, inner_forward_primal, eval_sequence()).
#include <gtest/gtest.h>
#include <imgui.h>

#include <cctype>
#include <filesystem>
#include <fstream>
#include <regex>
#include <sstream>
#include <string>
#include <vector>

#include "gui/fonts.hpp"

namespace tttlab::gui {
namespace {

namespace fs = std::filesystem;

const fs::path kSource = TTTLAB_SOURCE_DIR;

std::string read(const fs::path& p) {
  std::ifstream in(p, std::ios::binary);
  std::ostringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

struct Literal {
  std::string text;  // escapes decoded: the bytes the program holds
  int line = 0;
  std::string line_text;
};

// The string literals of a C++ source file, outside comments and character literals.
std::vector<Literal> literals(const std::string& src) {
  std::vector<Literal> out;
  int line = 1;
  std::size_t line_start = 0;
  const auto line_text = [&](std::size_t from) {
    const auto end = src.find('\n', from);
    return src.substr(from, end == std::string::npos ? std::string::npos : end - from);
  };
  for (std::size_t i = 0; i < src.size(); ++i) {
    const char c = src[i];
    if (c == '\n') {
      ++line;
      line_start = i + 1;
    } else if (src.compare(i, 2, "//") == 0) {
      while (i + 1 < src.size() && src[i + 1] != '\n') ++i;
    } else if (src.compare(i, 2, "/*") == 0) {
      const auto end = src.find("*/", i + 2);
      for (std::size_t k = i; k < end; ++k)
        if (src[k] == '\n') ++line, line_start = k + 1;
      i = end + 1;
    } else if (c == '\'' && !(i > 0 && std::isalnum(static_cast<unsigned char>(src[i - 1])))) {  // not 10'000
      for (++i; i < src.size() && src[i] != '\''; ++i)
        if (src[i] == '\\') ++i;
    } else if (c == '"') {
      Literal lit;
      lit.line = line;
      lit.line_text = line_text(line_start);
      for (++i; i < src.size() && src[i] != '"'; ++i) {
        if (src[i] != '\\') {
          lit.text += src[i];
          continue;
        }
        const char e = src[++i];
        if (e == 'x') {
          std::size_t n = 0;
          const int byte = std::stoi(src.substr(i + 1, 2), &n, 16);
          lit.text += static_cast<char>(byte);
          i += n;
        } else {
          lit.text += e == 'n' ? '\n' : e == 't' ? '\t' : e;
        }
      }
      out.push_back(lit);
    }
  }
  return out;
}

// Code points of UTF-8 text (ill-formed bytes as U+FFFD).
std::vector<char32_t> code_points(const std::string& s) {
  std::vector<char32_t> out;
  for (std::size_t i = 0; i < s.size();) {
    const auto b = static_cast<unsigned char>(s[i]);
    const int n = b < 0x80 ? 1 : (b >> 5) == 0x6 ? 2 : (b >> 4) == 0xE ? 3 : (b >> 3) == 0x1E ? 4 : 0;
    if (n == 0 || i + n > s.size()) {
      out.push_back(0xFFFD);
      ++i;
      continue;
    }
    char32_t cp = n == 1 ? b : b & (0x7F >> n);
    for (int k = 1; k < n; ++k) cp = (cp << 6) | (static_cast<unsigned char>(s[i + k]) & 0x3F);
    out.push_back(cp);
    i += static_cast<std::size_t>(n);
  }
  return out;
}

std::vector<fs::path> files(const fs::path& dir, const std::string& ext) {
  std::vector<fs::path> out;
  for (const auto& e : fs::directory_iterator(dir))
    if (e.path().extension() == ext) out.push_back(e.path());
  return out;
}

// The source files whose literals are the app's words: panels (their names and summaries are in the lab's
// list of features), sidebars, dialogs, plots, the lesson pane.
std::vector<fs::path> ui_sources() {
  const fs::path gui = kSource / "app" / "gui";
  std::vector<fs::path> out = {gui / "gui_app.cpp", gui / "dialogs.cpp", kSource / "app" / "lab" / "features.cpp"};
  for (const char* dir : {"panels", "lessons", "plot"})
    for (const auto& f : files(gui / dir, ".cpp")) out.push_back(f);
  return out;
}

// Lesson Markdown the lesson pane renders (README.md is the teachers' guide, read elsewhere).
std::vector<fs::path> lesson_files() {
  std::vector<fs::path> out;
  for (const auto& f : files(kSource / "lessons", ".md"))
    if (f.filename() != "README.md") out.push_back(f);
  return out;
}

TEST(UiText, NamesNoCode) {
  // Words a student reads: a literal with a space in it. Console output (printf) and the state-file
  // errors, which name the file's own fields on purpose, are not the app's words.
  // Two letters or more before the underscore: "x_t" is maths, "mixer_input" is code.
  const std::regex snake(R"(\b[a-z][a-z0-9]+_[a-z][a-z0-9_]*\b)");
  const std::regex call(R"(\b[A-Za-z_][A-Za-z0-9_]*\(\))");
  int prose = 0;
  for (const auto& file : ui_sources())
    for (const auto& lit : literals(read(file))) {
      if (lit.text.find(' ') == std::string::npos) continue;
      if (lit.line_text.find("printf(") != std::string::npos || lit.line_text.find("StateError(") != std::string::npos)
        continue;
      ++prose;
      const std::string where = file.filename().string() + ":" + std::to_string(lit.line) + ": \"" + lit.text + "\"";
      EXPECT_EQ(lit.text.find("::"), std::string::npos) << where;
      EXPECT_FALSE(std::regex_search(lit.text, snake)) << "a snake_case identifier in " << where;
      EXPECT_FALSE(std::regex_search(lit.text, call)) << "a function call in " << where;
    }
  EXPECT_GT(prose, 300) << "the scan should see the panels' sentences";
}

TEST(UiText, EveryCodePointHasAGlyphAndNoneCombines) {
  ImGui::CreateContext();
  const Fonts& f = load_fonts(1.0f);
  unsigned char* px = nullptr;
  int w = 0, h = 0;
  ImGui::GetIO().Fonts->GetTexDataAsRGBA32(&px, &w, &h);
  if (!f.dejavu) {
    ImGui::DestroyContext();
    GTEST_SKIP() << "DejaVu fonts not installed";
  }
  const auto check = [&](const std::string& text, const std::string& where) {
    for (const char32_t cp : code_points(text)) {
      if (cp == '\n' || cp == '\t' || cp == '\r') continue;
      const bool combining = cp >= 0x300 && cp <= 0x36F;
      EXPECT_FALSE(combining) << where << ": combining mark U+" << std::hex << static_cast<unsigned>(cp)
                              << ": drawn as a glyph of its own, beside the letter it belongs on";
      const bool drawable = cp <= 0xFFFF && f.regular->FindGlyphNoFallback(static_cast<ImWchar>(cp)) != nullptr;
      EXPECT_TRUE(combining || drawable) << where << ": U+" << std::hex << static_cast<unsigned>(cp)
                                         << " is not in the font atlas";
    }
  };
  for (const auto& file : lesson_files()) {
    std::istringstream in(read(file));
    std::string line;
    for (int n = 1; std::getline(in, line); ++n) check(line, file.filename().string() + ":" + std::to_string(n));
  }
  std::vector<fs::path> sources = ui_sources();
  for (const auto& c : files(kSource / "app" / "course", ".cpp")) sources.push_back(c);
  // The lab's modules write the messages the panels show (errors, job names), one folder per feature.
  for (const auto& e : fs::recursive_directory_iterator(kSource / "app" / "lab"))
    if (e.path().extension() == ".cpp") sources.push_back(e.path());
  for (const auto& file : sources)
    for (const auto& lit : literals(read(file))) check(lit.text, file.filename().string() + ":" + std::to_string(lit.line));
  ImGui::DestroyContext();
}

}  // namespace
}  // namespace tttlab::gui
