#include "gui/lessons/lesson_widgets.hpp"

#include <imgui_internal.h>  // RenderCheckMark, LogRenderedText

#include <algorithm>
#include <cfloat>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <iomanip>
#include <sstream>

#include "gui/fonts.hpp"
#include "lab/plot/ticks.hpp"
#include "gui/lab.hpp"
#include "gui/theme.hpp"

namespace tttlab::gui::lesson_ui {
namespace {
constexpr float kPad = 12.0f;
constexpr float kEdge = 3.0f;
}  // namespace

Card::Card(float width, ImU32 edge, ImU32 background)
    : m_dl(ImGui::GetWindowDrawList()), m_p0(ImGui::GetCursorScreenPos()), m_width(width), m_edge(edge),
      m_background(background) {
  m_inner = std::max(40.0f, m_width - 2.0f * kPad - kEdge);
  x_ = m_p0.x + kEdge + kPad;
  m_dl->ChannelsSplit(2);
  m_dl->ChannelsSetCurrent(1);
  ImGui::SetCursorScreenPos(ImVec2(x_, m_p0.y + kPad));
  ImGui::BeginGroup();
  ImGui::PushTextWrapPos(x_ + m_inner - ImGui::GetWindowPos().x + ImGui::GetScrollX());
}

Card::~Card() {
  ImGui::PopTextWrapPos();
  ImGui::EndGroup();
  const float y1 = ImGui::GetItemRectMax().y + kPad;
  m_dl->ChannelsSetCurrent(0);
  m_dl->AddRectFilled(m_p0, ImVec2(m_p0.x + m_width, y1), m_background, 6.0f);
  m_dl->AddRectFilled(m_p0, ImVec2(m_p0.x + kEdge, y1), m_edge, 6.0f, ImDrawFlags_RoundCornersLeft);
  m_dl->ChannelsMerge();
  ImGui::SetCursorScreenPos(ImVec2(m_p0.x, y1));
  ImGui::Dummy(ImVec2(m_width, 10.0f));
}

void add_text(ImDrawList* dl, ImFont* font, float size, ImVec2 pos, ImU32 color, const char* begin, const char* end,
              float wrap_width) {
  if (!end) end = begin + std::strlen(begin);
  dl->AddText(font, size, pos, color, begin, end, wrap_width);
  if (GImGui->LogEnabled) ImGui::LogRenderedText(&pos, begin, end);
}

void wrapped(ImU32 color, const std::string& text) {
  ImGui::PushStyleColor(ImGuiCol_Text, color);
  ImGui::TextWrapped("%s", text.c_str());
  ImGui::PopStyleColor();
}

void small_wrapped(ImU32 color, const std::string& text) {
  ImGui::PushFont(fonts().small);
  wrapped(color, text);
  ImGui::PopFont();
}

void card_label(const char* text, ImU32 color) {
  ImGui::PushFont(fonts().small);
  ImGui::PushStyleColor(ImGuiCol_Text, color);
  ImGui::TextUnformatted(text);
  ImGui::PopStyleColor();
  ImGui::PopFont();
}

void spinner(float radius, ImU32 color) {
  ImDrawList* dl = ImGui::GetWindowDrawList();
  const ImVec2 p = ImGui::GetCursorScreenPos();
  const float h = ImGui::GetFrameHeight();
  const ImVec2 c(p.x + radius + 1.0f, p.y + h * 0.5f);
  const float t = static_cast<float>(ImGui::GetTime());
  const float start = t * 6.0f;
  dl->PathClear();
  constexpr int kSegments = 24;
  for (int i = 0; i <= kSegments; ++i) {
    const float a = start + static_cast<float>(i) / kSegments * 4.4f;
    dl->PathLineTo(ImVec2(c.x + std::cos(a) * radius, c.y + std::sin(a) * radius));
  }
  dl->PathStroke(color, 0, 2.5f);
  ImGui::Dummy(ImVec2(radius * 2.0f + 2.0f, h));
  ImGui::SameLine(0, 8);
}

void check_mark(ImVec2 pos, float size, ImU32 color) {
  ImGui::RenderCheckMark(ImGui::GetWindowDrawList(), pos, color, size);
}

void badge(int number, bool done, float d) {
  ImDrawList* dl = ImGui::GetWindowDrawList();
  const ImVec2 p = ImGui::GetCursorScreenPos();
  const ImVec2 c(p.x + d * 0.5f, p.y + d * 0.5f);
  if (done) {
    dl->AddCircleFilled(c, d * 0.5f, colors::kGood, 32);
    check_mark(ImVec2(c.x - d * 0.27f, c.y - d * 0.27f), d * 0.54f, IM_COL32(20, 40, 30, 255));
  } else {
    dl->AddCircle(c, d * 0.5f - 1.0f, colors::kAccent, 32, 2.0f);
    if (number > 0) {
      const std::string n = std::to_string(number);
      ImFont* f = fonts().bold;
      const ImVec2 sz = f->CalcTextSizeA(f->FontSize, FLT_MAX, 0.0f, n.c_str());
      add_text(dl, f, f->FontSize, ImVec2(c.x - sz.x * 0.5f, c.y - sz.y * 0.5f), colors::kText, n.c_str());
    }
  }
  ImGui::Dummy(ImVec2(d, d));
}

std::string minutes_text(int minutes) {
  if (minutes < 60) return std::to_string(minutes) + " min";
  char buf[32];
  std::snprintf(buf, sizeof buf, "%d h %02d min", minutes / 60, minutes % 60);
  return buf;
}

std::string number_text(double v, int digits) {
  const double a = std::abs(v);
  if (!std::isfinite(v) || a == 0.0 || (a >= 1e-3 && a < 1e6)) return plot::format_value(v, digits);
  int e = static_cast<int>(std::floor(std::log10(a)));
  const auto mantissa = [&](int exponent) {
    std::ostringstream os;
    os << std::setprecision(std::max(1, digits - 1)) << v / std::pow(10.0, exponent);
    return os.str();
  };
  std::string mant = mantissa(e);
  if (std::abs(std::strtod(mant.c_str(), nullptr)) >= 10.0) mant = mantissa(++e);  // 9.996 rounded to 10
  if (mant[0] == '-') mant = "\xE2\x88\x92" + mant.substr(1);
  if (mant == "1") return plot::power_of_ten(e);
  if (mant == "\xE2\x88\x92" "1") return "\xE2\x88\x92" + plot::power_of_ten(e);
  return mant + " \xC3\x97 " + plot::power_of_ten(e);
}

std::string measured_text(double value, std::optional<double> lo, std::optional<double> hi, const std::string& unit) {
  std::string s = number_text(value, 4);
  if (!unit.empty()) s += " " + unit;
  if (lo && hi && (*lo != value || *hi != value))
    s += "  (" + number_text(*lo, 3) + " \xE2\x80\x93 " + number_text(*hi, 3) + ")";
  return s;
}

std::string measured_text(const course::Prediction& p, double value, std::optional<double> lo,
                          std::optional<double> hi) {
  if (!p.in_percent()) return measured_text(value, lo, hi, p.unit);
  const auto pct = [](std::optional<double> x) { return x ? std::optional<double>(*x * 100.0) : std::nullopt; };
  return measured_text(value * 100.0, pct(lo), pct(hi), "%");
}

std::string measured_text(const course::Check&, double value, std::optional<double> lo, std::optional<double> hi) {
  return measured_text(value, lo, hi);
}

}  // namespace tttlab::gui::lesson_ui
