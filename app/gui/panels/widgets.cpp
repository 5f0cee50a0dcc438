#include "gui/panels/widgets.hpp"

#include <algorithm>
#include <cfloat>
#include <cstdio>
#include <cstring>
#include <cstdlib>
#include <filesystem>
#include <map>
#include <sstream>

#include "course/classroom.hpp"
#include "lab/engine/head_inputs.hpp"
#include "lab/engine/data_source.hpp"
#include "lab/engine/resources.hpp"
#include "gui/fonts.hpp"
#include "lab/plot/colormap.hpp"
#include "gui/lab.hpp"
#include "gui/plot/plot_common.hpp"
#include "gui/theme.hpp"
#include "tttlab/fastweight/member_trace.hpp"
#include "tttlab/fastweight/rule.hpp"

namespace tttlab::gui::widgets {
namespace {

struct Preset {
  const char* name;
  const char* text;
};
// Short texts with different amounts of repetition: the inner loop can only reduce its loss on what
// recurs (a byte maps to the same key and value every time it appears).
const Preset kPresets[] = {
    {"Repeated sentence", "the cat sat on the mat. the cat sat on the mat. the cat sat on the mat."},
    {"Counting", "one two three four five six seven eight nine ten one two three four five six seven "
                 "eight nine ten"},
    {"Alphabet, three times", "abcdefghijklmnopqrstuvwxyz abcdefghijklmnopqrstuvwxyz "
                              "abcdefghijklmnopqrstuvwxyz"},
    {"Pangrams (little repetition)",
     "The quick brown fox jumps over the lazy dog. Pack my box with five dozen liquor jugs."},
    {"Hamlet", "To be, or not to be, that is the question: Whether 'tis nobler in the mind to suffer "
               "the slings and arrows of outrageous fortune, or to take arms against a sea of troubles"},
};

int resize_callback(ImGuiInputTextCallbackData* data) {
  if (data->EventFlag == ImGuiInputTextFlags_CallbackResize) {
    auto* str = static_cast<std::string*>(data->UserData);
    str->resize(static_cast<std::size_t>(data->BufTextLen));
    data->Buf = str->data();
  }
  return 0;
}

std::string with_panel(const char* panel, const char* control) { return std::string(panel) + "." + control; }

}  // namespace

float label_width() { return ImGui::GetFontSize() * 6.6f; }

void row(const char* label, const char* help) {
  ImGui::AlignTextToFramePadding();
  ImGui::TextUnformatted(label);
  if (help) {
    ImGui::SameLine(0, 4);
    help_marker(help);
  }
  // A label (with its "(?)") wider than the label column would be drawn over by the control: then the
  // control goes on the next line, still in the control column.
  const float label_end = ImGui::GetItemRectMax().x - ImGui::GetWindowPos().x + ImGui::GetScrollX();
  if (label_end + ImGui::GetStyle().ItemSpacing.x > label_width()) {
    ImGui::Dummy(ImVec2(0, 0));
    ImGui::SameLine(label_width());
  } else {
    ImGui::SameLine(label_width());
  }
  ImGui::SetNextItemWidth(-1);
}

void smoothing_row(double& smoothing, float max) {
  row("Smoothing");
  float sm = static_cast<float>(smoothing);
  if (ImGui::SliderFloat("##smooth", &sm, 0.0f, max, sm == 0.0f ? "off" : "EMA %.2f")) smoothing = sm;
}

bool seed_input(std::uint64_t& seed) {
  std::uint64_t typed = seed;
  if (!ImGui::InputScalar("##seed", ImGuiDataType_U64, &typed, nullptr, nullptr, "%llu",
                          ImGuiInputTextFlags_EnterReturnsTrue))
    return false;
  seed = typed;
  return true;
}

std::string join_ints(const std::vector<int>& v) {
  std::string s;
  for (std::size_t i = 0; i < v.size(); ++i) s += (i ? ", " : "") + std::to_string(v[i]);
  return s;
}

bool parse_increasing_ints(const std::string& text, std::size_t max_items, int max_value, std::vector<int>& out) {
  std::string t = text;
  std::replace(t.begin(), t.end(), ',', ' ');
  std::istringstream in(t);
  std::vector<int> v;
  std::string part;
  while (in >> part) {
    char* end = nullptr;
    const long x = std::strtol(part.c_str(), &end, 10);
    if (!end || *end != '\0' || x < 1 || x > max_value) return false;
    v.push_back(static_cast<int>(x));
  }
  if (v.empty() || v.size() > max_items || !std::is_sorted(v.begin(), v.end()) ||
      std::adjacent_find(v.begin(), v.end()) != v.end())
    return false;
  out = v;
  return true;
}

bool input_string(const char* id, std::string& str, bool multiline, float height) {
  if (multiline)
    ImGui::InputTextMultiline(id, str.data(), str.capacity() + 1, ImVec2(-1, height), ImGuiInputTextFlags_CallbackResize,
                              resize_callback, &str);
  else
    ImGui::InputText(id, str.data(), str.capacity() + 1, ImGuiInputTextFlags_CallbackResize, resize_callback, &str);
  return ImGui::IsItemDeactivatedAfterEdit();
}

bool path_prompt(const char* title, const char* explanation, std::string& out, BrowserMode mode,
                 const std::vector<std::string>& extensions) {
  bool ok = false;
  ImGui::SetNextWindowSize(ImVec2(ImGui::GetFontSize() * 40.0f, 0), ImGuiCond_Appearing);
  if (ImGui::BeginPopupModal(title, nullptr, ImGuiWindowFlags_NoSavedSettings)) {
    // One browser per prompt (by its ID), so each keeps its folder while the app runs.
    static std::map<ImGuiID, BrowserState> browsers;
    const ImGuiID id = ImGui::GetID("##browser");
    auto it = browsers.find(id);
    if (it == browsers.end()) it = browsers.emplace(id, BrowserState(mode, extensions)).first;
    BrowserState& b = it->second;
    const bool appearing = ImGui::IsWindowAppearing();
    if (appearing) b.start(out);
    ImGui::PushTextWrapPos(0.0f);
    ImGui::TextUnformatted(explanation);
    ImGui::PopTextWrapPos();
    const BrowserResult r =
        draw_browser(b, "OK", appearing, !appearing && ImGui::IsKeyPressed(ImGui::GetKeyIndex(ImGuiKey_Escape)));
    if (r.chosen) {
      out = *r.chosen;
      ok = true;
    }
    if (r.chosen || r.cancelled) ImGui::CloseCurrentPopup();
    ImGui::EndPopup();
  }
  return ok;
}

void combo_room(const std::string& preview) {
  const ImGuiStyle& style = ImGui::GetStyle();
  if (ImGui::CalcTextSize(preview.c_str()).x >
      ImGui::CalcItemWidth() - ImGui::GetFrameHeight() - 2.0f * style.FramePadding.x) {
    ImGui::NewLine();
    ImGui::SetNextItemWidth(-1);
  }
}

bool model_combo(const char* id, std::string& model_id, const LibraryView* library, bool ttt_only, CommandSink* sink) {
  bool changed = false;
  ImGui::PushID(id);
  const ModelInfo* cur = library ? library->find(model_id) : nullptr;
  const std::string preview = cur ? cur->label : model_id;
  combo_room(preview);
  bool open_prompt = false;
  if (ImGui::BeginCombo("##model", preview.c_str())) {
    if (library)
      for (const auto& m : library->models) {
        const bool known_ttt = m.loaded || m.config_known ? m.config.is_ttt() : m.id.rfind("random:ttt", 0) == 0 || m.id == kShippedModelId || m.id.rfind("file:", 0) == 0;
        const bool usable = m.error.empty() && (!ttt_only || known_ttt);
        ImGui::BeginDisabled(!usable);
        if (ImGui::Selectable(m.label.c_str(), m.id == model_id)) {
          model_id = m.id;
          changed = true;
        }
        ImGui::EndDisabled();
        if (ImGui::IsItemHovered(ImGuiHoveredFlags_AllowWhenDisabled)) {
          ImGui::BeginTooltip();
          ImGui::PushTextWrapPos(ImGui::GetFontSize() * 30.0f);
          ImGui::TextUnformatted(m.summary().c_str());
          if (!m.path.empty()) ImGui::TextDisabled("%s", m.path.c_str());
          if (!usable && m.error.empty()) ImGui::TextDisabled("no inner loop to show: not a TTT model");
          ImGui::PopTextWrapPos();
          ImGui::EndTooltip();
        }
      }
    ImGui::Separator();
    if (sink && ImGui::Selectable("Open a checkpoint folder…")) open_prompt = true;
    ImGui::EndCombo();
  }
  if (open_prompt) ImGui::OpenPopup("Open a model");
  static std::string path = "runs/";
  if (sink && path_prompt("Open a model",
                          "A checkpoint folder (config.json + model.safetensors) or a run directory of "
                          "`tttlab train` or the Training panel (its latest checkpoint is used):",
                          path))
    sink->post(LibraryOpen{path});
  ImGui::PopID();
  return changed;
}

void model_summary_line(const std::string& model_id, const LibraryView* library) {
  const ModelInfo* m = library ? library->find(model_id) : nullptr;
  ImGui::PushFont(fonts().small);
  if (!m) {
    ImGui::TextColored(ImGui::ColorConvertU32ToFloat4(colors::kTextDim), "loading…");
  } else if (!m->error.empty()) {
    ImGui::PushTextWrapPos(0.0f);
    ImGui::TextColored(ImGui::ColorConvertU32ToFloat4(colors::kError), "%s", m->error.c_str());
    ImGui::PopTextWrapPos();
  } else {
    ImGui::PushTextWrapPos(0.0f);
    ImGui::TextColored(ImGui::ColorConvertU32ToFloat4(colors::kTextDim), "%s", m->summary().c_str());
    if (!m->warning.empty())
      ImGui::TextColored(ImGui::ColorConvertU32ToFloat4(colors::kWarning), "Warning: %s", m->warning.c_str());
    ImGui::PopTextWrapPos();
  }
  ImGui::PopFont();
}

bool data_combo(const char* id, std::string& source) {
  bool changed = false;
  ImGui::PushID(id);
  const bool brown = find_brown_dir().has_value();
  const std::string preview = source == "brown" ? "Brown corpus"
                              : source == "sample" ? "built-in sample text"
                                                   : source;
  bool open_prompt = false;
  if (ImGui::BeginCombo("##data", preview.c_str())) {
    ImGui::BeginDisabled(!brown);
    if (ImGui::Selectable(brown ? "Brown corpus" : "Brown corpus (not prepared: run scripts/setup.sh)", source == "brown")) {
      source = "brown";
      changed = true;
    }
    ImGui::EndDisabled();
    if (ImGui::Selectable("built-in sample text", source == "sample")) {
      source = "sample";
      changed = true;
    }
    if (ImGui::Selectable("a text file…")) open_prompt = true;
    ImGui::EndCombo();
  }
  if (open_prompt) ImGui::OpenPopup("Text file");
  std::string path = source == "brown" || source == "sample" ? std::string() : source;
  if (path_prompt("Text file", "A UTF-8 text file; its last 5 % is the validation part:", path,
                  BrowserMode::OpenFile)) {
    source = path;
    changed = true;
  }
  ImGui::PopID();
  return changed;
}

bool own_text_file(const char* panel, std::string& text_file, HeadConfig& head, const HeadLimits& limits,
                   std::string& error) {
  if (!classroom::visible(with_panel(panel, "text"))) return false;
  bool changed = false;
  ImGui::PushID("own_text");
  const std::string help = "A UTF-8 text file of your own, at most " +
                           std::to_string(kMaxViewTextFileBytes / (1024 * 1024)) + " MB. This view reads its first " +
                           std::to_string(limits.max_tokens) + " bytes.";
  row("Your text", help.c_str());
  if (ImGui::Button(text_file.empty() ? "Open a text file…" : "Open another text file…", ImVec2(-1, 0)))
    ImGui::OpenPopup("Your own text");
  std::string path = text_file;
  if (path_prompt("Your own text", help.c_str(), path, BrowserMode::OpenFile)) {
    try {
      const ViewText v = read_view_text(path, static_cast<std::size_t>(limits.max_tokens));
      text_file = path;
      head.text = v.text;
      changed = true;
      error.clear();
    } catch (const std::exception& e) {
      error = e.what();
    }
  }
  if (!text_file.empty()) {
    ImGui::PushFont(fonts().small);
    ImGui::PushTextWrapPos(0.0f);
    ImGui::TextColored(ImGui::ColorConvertU32ToFloat4(colors::kTextDim), "Reading %s (its first %ld bytes at most)",
                       text_file.c_str(), limits.max_tokens);
    ImGui::PopTextWrapPos();
    ImGui::PopFont();
  }
  error_text(error);
  ImGui::PopID();
  return changed;
}

void section_label(const char* text) {
  ImGui::Dummy(ImVec2(0, 2));
  ImGui::PushFont(fonts().small);
  ImGui::PushStyleColor(ImGuiCol_Text, colors::kTextDim);
  ImGui::TextUnformatted(text);
  ImGui::PopStyleColor();
  ImGui::PopFont();
  const ImVec2 p = ImGui::GetCursorScreenPos();
  ImGui::GetWindowDrawList()->AddLine(ImVec2(p.x, p.y - 2), ImVec2(p.x + ImGui::GetContentRegionAvail().x, p.y - 2),
                                      colors::kRule);
  ImGui::Dummy(ImVec2(0, 2));
}

void help_marker(const char* text) {
  ImGui::TextDisabled("(?)");
  if (ImGui::IsItemHovered()) {
    ImGui::BeginTooltip();
    ImGui::PushTextWrapPos(ImGui::GetFontSize() * 30.0f);
    ImGui::TextUnformatted(text);
    ImGui::PopTextWrapPos();
    ImGui::EndTooltip();
  }
}

void note(const char* text) {
  ImGui::PushFont(fonts().small);
  ImGui::PushStyleColor(ImGuiCol_Text, colors::kTextDim);
  ImGui::TextWrapped("%s", text);
  ImGui::PopStyleColor();
  ImGui::PopFont();
}

void warning(const std::string& text) {
  if (text.empty()) return;
  ImGui::PushStyleColor(ImGuiCol_Text, colors::kWarning);
  ImGui::TextWrapped("Warning: %s", text.c_str());
  ImGui::PopStyleColor();
}

void device_line(const std::string& device, const std::string& note) {
  if (device.empty() && note.empty()) return;
  ImGui::PushTextWrapPos(0.0f);
  if (!device.empty())
    ImGui::TextColored(ImGui::ColorConvertU32ToFloat4(colors::kTextDim), "Computed on: %s", device.c_str());
  if (!note.empty()) ImGui::TextColored(ImGui::ColorConvertU32ToFloat4(colors::kWarning), "%s", note.c_str());
  ImGui::PopTextWrapPos();
}

void cpu_only_line(const Snapshot& snap, const char* why) {
  const ComputeView* cv = snap.compute.get();
  const bool gpu_chosen = cv && cv->gpu_available && cv->request != ComputeRequest::CPU;
  ImGui::PushFont(fonts().small);
  device_line(engine_thread_cpu(), gpu_chosen ? std::string("On the CPU even with a GPU: ") + why : std::string());
  ImGui::PopFont();
}

void follow_line(long step, int reloads, bool reloading, bool replay) {
  if (step < 0) return;
  ImGui::PushFont(fonts().small);
  ImGui::TextColored(ImGui::ColorConvertU32ToFloat4(colors::kGood),
                     replay ? "Replaying the shipped run: weights of step %ld"
                            : "Following the training run: weights of step %ld",
                     step);
  ImGui::SameLine(0, 10);
  const std::string times = reloads == 1 ? "once" : std::to_string(reloads) + " times";
  const char* saved = replay ? " as the run's checkpoints were replayed" : " as the run saved checkpoints";
  ImGui::TextColored(ImGui::ColorConvertU32ToFloat4(colors::kTextDim), "%s",
                     reloading ? "· new weights arrived, computing again…"
                     : reloads == 0
                         ? (replay ? "· the view computes again with each checkpoint of the run"
                                   : "· the view computes again whenever the run saves a checkpoint")
                         : ("· reloaded " + times + saved).c_str());
  if (ImGui::IsItemHovered())
    ImGui::SetTooltip("%s", replay ? "Checkpoints the same run saved while it trained, shipped with the app: the view "
                                     "computes with each in turn, as it does when it follows a run, and nothing trains."
                                   : "The outer loop is training this model while you watch. Each time the run saves a "
                                     "checkpoint (its \"checkpoint every\" setting), the view recomputes with the new "
                                     "weights.");
  ImGui::PopFont();
}

void metric(const char* label, const std::string& value, const std::string& caption, ImU32 value_color,
            float width) {
  const Fonts& f = fonts();
  ImDrawList* dl = ImGui::GetWindowDrawList();
  const ImVec2 p = ImGui::GetCursorScreenPos();
  const float pad = 8.0f;
  const float h = pad * 2 + f.small->FontSize * 2 + f.large->FontSize + 4;
  dl->AddRectFilled(p, ImVec2(p.x + width, p.y + h), colors::kCardBg, 4.0f);
  dl->AddRect(p, ImVec2(p.x + width, p.y + h), colors::kCardEdge, 4.0f);
  // A label wider than the box would run under the next box: cut it at a character and say so with "…".
  const char* label_end = label + std::strlen(label);
  const float label_w = width - 2 * pad;
  std::string shown_label;
  if (f.small->CalcTextSizeA(f.small->FontSize, FLT_MAX, 0.0f, label, label_end).x > label_w) {
    const char* cut = label_end;
    f.small->CalcTextSizeA(f.small->FontSize, label_w - f.small->CalcTextSizeA(f.small->FontSize, FLT_MAX, 0.0f, "…").x,
                           0.0f, label, label_end, &cut);
    shown_label.assign(label, cut);
    shown_label += "…";
    if (ImGui::IsMouseHoveringRect(p, ImVec2(p.x + width, p.y + h)) && ImGui::IsWindowHovered())
      ImGui::SetTooltip("%s", label);
  }
  dl->AddText(f.small, f.small->FontSize, ImVec2(p.x + pad, p.y + pad), colors::kTextDim,
              shown_label.empty() ? label : shown_label.c_str());
  dl->AddText(f.large, f.large->FontSize, ImVec2(p.x + pad, p.y + pad + f.small->FontSize + 1),
              value_color, value.c_str());
  dl->PushClipRect(p, ImVec2(p.x + width - pad, p.y + h), true);
  dl->AddText(f.small, f.small->FontSize,
              ImVec2(p.x + pad, p.y + pad + f.small->FontSize + f.large->FontSize + 3), colors::kTextFaint,
              caption.c_str());
  dl->PopClipRect();
  ImGui::Dummy(ImVec2(width, h));
}

void job_status(JobOutcome outcome, double progress, const std::string& error, const Snapshot& snap,
                CommandSink& sink, const char* running_note) {
  if (outcome == JobOutcome::Running) {
    ImGui::ProgressBar(static_cast<float>(progress), ImVec2(ImGui::GetFontSize() * 16.0f, 0), "computing…");
    ImGui::SameLine();
    for (const auto& j : snap.jobs)
      if (j.outcome == JobOutcome::Running) {
        ImGui::PushID(static_cast<int>(j.id));
        if (ImGui::SmallButton("Cancel")) sink.post(CancelJob{j.id});
        ImGui::PopID();
        break;
      }
    if (running_note) {
      ImGui::SameLine();
      ImGui::TextDisabled("%s", running_note);
    }
  } else if (outcome == JobOutcome::Failed) {
    ImGui::PushTextWrapPos(0.0f);
    ImGui::TextColored(ImGui::ColorConvertU32ToFloat4(colors::kError), "Cannot run: %s", error.c_str());
    ImGui::PopTextWrapPos();
  } else if (outcome == JobOutcome::Cancelled) {
    ImGui::TextColored(ImGui::ColorConvertU32ToFloat4(colors::kWarning), "Cancelled: the results below are partial.");
  }
}

void error_text(const std::string& text) {
  if (text.empty()) return;
  ImGui::PushTextWrapPos(0.0f);
  ImGui::TextColored(ImGui::ColorConvertU32ToFloat4(colors::kError), "%s", text.c_str());
  ImGui::PopTextWrapPos();
}

ImU32 series_color(int i) {
  // Okabe–Ito without grey; orange and vermillion (alike for many) as far apart as possible.
  static const int order[] = {0, 1, 2, 6, 4, 5, 3};
  return plot::pack_u32(plot::categorical(order[((i % 7) + 7) % 7]));
}

void panel_title(const char* title, const char* explanation) {
  const Fonts& f = fonts();
  ImGui::PushFont(f.large);
  ImGui::TextUnformatted(title);
  ImGui::PopFont();
  ImGui::PushFont(f.small);
  same_line_if_fits(explanation, 14);
  ImGui::AlignTextToFramePadding();
  ImGui::PushTextWrapPos(0.0f);
  ImGui::TextColored(ImGui::ColorConvertU32ToFloat4(colors::kTextDim), "%s", explanation);
  ImGui::PopTextWrapPos();
  ImGui::PopFont();
}

const std::string& fit(const std::string& wide, const std::string& narrow, float width, ImFont* font) {
  ImFont* f = font ? font : ImGui::GetFont();
  return f->CalcTextSizeA(f->FontSize, FLT_MAX, 0.0f, wide.c_str()).x <= width ? wide : narrow;
}

void same_line_if_fits(const char* next_text, float spacing) {
  ImGui::SameLine(0, spacing);
  if (ImGui::CalcTextSize(next_text).x > ImGui::GetContentRegionAvail().x) ImGui::NewLine();
}

float box_width(int per_row, float gap) {
  const int n = std::max(1, per_row);
  return (ImGui::GetContentRegionAvail().x - gap * static_cast<float>(n - 1)) / static_cast<float>(n);
}

void controls_and_view(const std::function<void()>& controls, const std::function<void()>& view,
                       bool fold_when_narrow) {
  // Where the panel is narrow (beside a docked lesson, on a small screen, at a large UI scale) the
  // controls fold to a thin strip by default, so the view keeps the width its plots need; the strip's
  // button unfolds them, and the choice is kept for the panel's area (-1: not chosen yet).
  const float em = ImGui::GetFontSize();
  const bool narrow = ImGui::GetContentRegionAvail().x < 60.0f * em;
  ImGuiStorage* store = ImGui::GetStateStorage();
  const ImGuiID key = ImGui::GetID("##controls_folded");
  const int chosen = store->GetInt(key, -1);
  const bool folded = chosen < 0 ? narrow && fold_when_narrow : chosen == 1;
  if (folded) {
    ImGui::BeginChild("##controls_strip", ImVec2(1.8f * em, 0), false, ImGuiWindowFlags_NoScrollbar);
    if (ImGui::Button("\xC2\xBB", ImVec2(-1.0f, 3.0f * em))) store->SetInt(key, 0);
    if (ImGui::IsItemHovered()) ImGui::SetTooltip("Show this panel's controls");
    ImGui::EndChild();
    ImGui::SameLine(0, 8);
  } else {
    ImGui::BeginChild("##controls", ImVec2(20.0f * em, 0), false);
    if (narrow || chosen == 0) {
      if (ImGui::SmallButton("\xC2\xAB hide the controls")) store->SetInt(key, 1);
      if (ImGui::IsItemHovered()) ImGui::SetTooltip("More room for the view");
    }
    controls();
    ImGui::EndChild();
    ImGui::SameLine(0, 16);
  }
  ImGui::BeginChild("##view", ImVec2(0, 0), false);
  view();
  ImGui::EndChild();
}

bool icon_button(const char* glyph, const char* tooltip, bool active) {
  if (active) ImGui::PushStyleColor(ImGuiCol_Button, colors::kButtonOn.vec4());
  const float s = ImGui::GetFrameHeight();
  const bool clicked = ImGui::Button(glyph, ImVec2(s * 1.35f, s));
  if (active) ImGui::PopStyleColor();
  if (ImGui::IsItemHovered()) ImGui::SetTooltip("%s", tooltip);
  return clicked;
}

bool head_editor(HeadConfig& c, const HeadEditorOptions& opt) {
  bool changed = false;
  const bool lock = opt.lock_reduction;
  const bool toy = c.source == HeadSource::Toy;

  if (classroom::visible(with_panel(opt.panel, "source"))) {
    section_label("WHAT RUNS");
    row("Member", "Which member of the fast-weight family runs (docs/MATH.md §11): TTT-Linear and TTT-MLP on "
                  "a trained model or the toy head; every other member on the toy head.");
    {
      const std::string current = c.member_id();
      ImGui::BeginDisabled(lock);
      if (ImGui::BeginCombo("##member", c.member_name().c_str())) {
        for (const FastWeightPreset& p : fast_weight_presets())
          if (ImGui::Selectable(p.name.c_str(), p.id == current) && p.id != current) {
            c.set_member(p.id);
            if (!c.ttt()) {
              c.source = HeadSource::Toy;  // the trained model's heads are TTT heads
              if (fast_weight_preset(p.id).rule.state == FastWeightState::Mlp)
                c.d = std::clamp(c.d, 4, opt.limits.max_d_mlp);
            }
            changed = true;
          }
        ImGui::EndCombo();
      }
      ImGui::EndDisabled();
      if (!c.ttt() && c.source == HeadSource::Model) {
        ImGui::PushFont(fonts().small);
        ImGui::PushTextWrapPos(0.0f);
        ImGui::TextColored(ImGui::ColorConvertU32ToFloat4(colors::kError),
                           "%s runs on the toy head only: the trained model's heads are TTT heads. Choose "
                           "Source: toy.",
                           c.member_name().c_str());
        ImGui::PopTextWrapPos();
        ImGui::PopFont();
      }
    }
    row("Source", "Trained model: a block and head of a real language model (its own Q, K, V, η and W₀). "
                  "Toy head: one head with random projections, for experiments the model cannot show "
                  "(any d, W₀ = 0, LayerNorm off, …).");
    changed |= choice_pair("trained model", HeadSource::Model, "toy", HeadSource::Toy, c.source);
    if (c.source == HeadSource::Model) {
      const ModelInfo* info = opt.library ? opt.library->find(c.model_id) : nullptr;
      row("Model");
      changed |= model_combo("model", c.model_id, opt.library, true, opt.sink);
      model_summary_line(c.model_id, opt.library);
      const bool known = info && (info->loaded || info->config_known);
      const int blocks = known ? info->config.num_hidden_layers : 1;
      const int heads = known ? info->config.num_attention_heads : 1;
      if (opt.show_block_head) {
        // The sliders show the block and head the settings name, even one the model lacks: the engine's
        // message about it then names the same number as the slider.
        row("Block", "Which block's TTT layer (0 reads the embeddings; later blocks read what the earlier ones "
                     "wrote).");
        ImGui::SliderInt("##block", &c.block, 0, std::max(0, blocks - 1), "block %d");
        changed |= ImGui::IsItemDeactivatedAfterEdit();
        row("Head");
        ImGui::SliderInt("##head", &c.head, 0, std::max(0, heads - 1), "head %d");
        changed |= ImGui::IsItemDeactivatedAfterEdit();
      }
      ImGui::BeginDisabled(lock);
      if (ImGui::Checkbox("change b and η_base", &c.override_model)) {
        if (c.override_model && info && info->loaded) {
          c.mini_batch = info->config.mini_batch_size;
          c.eta_base = info->config.ttt_base_lr;
        }
        changed = true;
      }
      ImGui::SameLine();
      help_marker("Run the trained weights with another inner mini-batch size b or base learning rate η_base "
                  "than they were trained with. With b changed, the token-index offsets δ are cut or padded "
                  "with zeros and RoPE positions restart every b tokens.");
      if (c.override_model) {
        row("b");
        ImGui::SliderInt("##b", &c.mini_batch, 1, std::min(opt.limits.max_mini_batch, 256), "%d",
                         ImGuiSliderFlags_Logarithmic);
        changed |= ImGui::IsItemDeactivatedAfterEdit();
        row("η base");
        float eta = static_cast<float>(c.eta_base);
        if (ImGui::SliderFloat("##eta", &eta, 0.01f, 100.0f, "%.3g", ImGuiSliderFlags_Logarithmic)) c.eta_base = eta;
        changed |= ImGui::IsItemDeactivatedAfterEdit();
      }
      ImGui::EndDisabled();
    }
  }

  if (classroom::visible(with_panel(opt.panel, "text"))) {
    section_label("INPUT");
    row("Text");
    int current = -1;
    const auto& samples = sample_texts();
    const int n_samples = static_cast<int>(samples.size());
    const int n_presets = static_cast<int>(std::size(kPresets));
    for (int i = 0; i < n_samples; ++i)
      if (c.text == samples[static_cast<std::size_t>(i)].text) current = i;
    for (int i = 0; i < n_presets; ++i)
      if (c.text == kPresets[i].text) current = n_samples + i;
    const char* preview = current < 0 ? "Custom text"
                          : current < n_samples ? samples[static_cast<std::size_t>(current)].name
                                                : kPresets[current - n_samples].name;
    if (ImGui::BeginCombo("##preset", preview)) {
      for (int i = 0; i < n_samples; ++i)
        if (ImGui::Selectable(samples[static_cast<std::size_t>(i)].name, i == current)) {
          c.text = samples[static_cast<std::size_t>(i)].text;
          changed = true;
        }
      ImGui::Separator();
      for (int i = 0; i < n_presets; ++i)
        if (ImGui::Selectable(kPresets[i].name, n_samples + i == current)) {
          c.text = kPresets[i].text;
          changed = true;
        }
      ImGui::EndCombo();
    }
    changed |= input_string("##text", c.text, true, ImGui::GetTextLineHeight() * 3.6f);
    row("Repeat", "The text is repeated this many times. T = bytes × repeat.");
    int rep = c.repeat;
    if (ImGui::SliderInt("##repeat", &rep, 1, 32, "× %d")) c.repeat = std::max(1, rep);
    changed |= ImGui::IsItemDeactivatedAfterEdit();
    ImGui::PushFont(fonts().small);
    const long T = c.tokens();
    ImGui::TextColored(ImGui::ColorConvertU32ToFloat4(T > opt.limits.max_tokens ? colors::kError : colors::kTextDim),
                       "T = %ld tokens (bytes)%s", T, T > opt.limits.max_tokens ? " — too long for this panel" : "");
    ImGui::PopFont();
  }

  if (c.source != HeadSource::Toy || !classroom::visible(with_panel(opt.panel, "inner"))) return changed;

  row("Seed", "Draws the byte embedding, the projections W_Q, W_K, W_V, the gate θ and a random W₀.");
  ImGui::SetNextItemWidth(ImGui::GetContentRegionAvail().x - ImGui::GetFrameHeight() * 2.2f);
  changed |= seed_input(c.seed);
  ImGui::SameLine();
  if (ImGui::Button("Next", ImVec2(-1, 0))) {
    c.seed += 1;
    changed = true;
  }

  if (!c.ttt()) {
    section_label("TOY MEMBER INPUTS");
    const bool mlp_member = fast_weight_preset(c.member_id()).rule.state == FastWeightState::Mlp;
    const int max_d = mlp_member ? opt.limits.max_d_mlp : opt.limits.max_d_linear;
    row("d", mlp_member ? "Width: k, v, q ∈ ℝᵈ, W₁ ∈ ℝᵈˣ⁴ᵈ, W₂ ∈ ℝ⁴ᵈˣᵈ." : "Head dimension: k, v, q ∈ ℝᵈ, S ∈ ℝᵈˣᵈ.");
    ImGui::SliderInt("##d", &c.d, mlp_member ? 4 : 2, max_d, "%d");
    changed |= ImGui::IsItemDeactivatedAfterEdit();
    if (mlp_member) {
      row("b", c.member_id() == "lact" ? "LaCT's chunk: pairs wait until b are pending, then one update."
                                       : "Titans' mini-batch: gradients at the state the mini-batch started from.");
      ImGui::SliderInt("##b", &c.mini_batch, 1, std::min(opt.limits.max_mini_batch, 256), "%d",
                       ImGuiSliderFlags_Logarithmic);
      changed |= ImGui::IsItemDeactivatedAfterEdit();
    }
    if (c.member_id() != "linear_attention") {
      row(mlp_member ? "η" : "η base", mlp_member ? "The inner learning rate η." : "βₜ = η_base·σ(xₜ·θ) (learned gate) or η_base (fixed).");
      float eta = static_cast<float>(c.eta_base);
      if (ImGui::SliderFloat("##eta", &eta, 0.01f, 100.0f, "%.3g", ImGuiSliderFlags_Logarithmic)) c.eta_base = eta;
      changed |= ImGui::IsItemDeactivatedAfterEdit();
    }
    if (!mlp_member && c.member_id() != "linear_attention") {
      row("Gate", "Learned: βₜ (and αₜ) depend on the token through a random θ. Fixed: βₜ = η_base, αₜ = σ(3).");
      int gate = c.gate == EtaGate::Learned ? 0 : 1;
      if (ImGui::Combo("##gate", &gate, "learned σ(x·θ)\0fixed\0")) {
        c.gate = gate == 0 ? EtaGate::Learned : EtaGate::Fixed;
        changed = true;
      }
    }
    note(member_inputs_note(c).c_str());
    return changed;
  }

  section_label("TOY INNER MODEL f");
  ImGui::BeginDisabled(lock);
  row("Model", "TTT-Linear: f(k) = k + LN(kW + c).  TTT-MLP: f(k) = k + LN(gelu(kW₁ + b₁) W₂ + b₂), 4d hidden "
                "units. The boxes below take out the LayerNorm, the residual or the bias.");
  changed |= choice_pair("Linear", InnerModel::Linear, "MLP", InnerModel::MLP, c.model);
  ImGui::EndDisabled();
  const int max_d = c.model == InnerModel::Linear ? opt.limits.max_d_linear : opt.limits.max_d_mlp;
  if (c.d > max_d) {
    c.d = max_d;
    changed = true;
  }
  row("d", "Head dimension: k, v, q ∈ ℝᵈ and W ∈ ℝᵈˣᵈ (Linear).");
  ImGui::SliderInt("##d", &c.d, 2, max_d, "%d");
  changed |= ImGui::IsItemDeactivatedAfterEdit();
  ImGui::BeginDisabled(lock);
  row("b", "Inner mini-batch size. All gradients of a mini-batch are taken at the state from its start; "
           "the state is committed after its last token. b = 1 is online GD; b ≥ T is batch GD.");
  ImGui::SliderInt("##b", &c.mini_batch, 1, std::min(opt.limits.max_mini_batch, 256), "%d",
                   ImGuiSliderFlags_Logarithmic);
  changed |= ImGui::IsItemDeactivatedAfterEdit();
  row("η base", "η_base. The learning rate of token t is λₜ = η_base · σ(xₜ·θ) / d (learned gate) or "
                "η_base / d (fixed).");
  float eta = static_cast<float>(c.eta_base);
  if (ImGui::SliderFloat("##eta", &eta, 0.01f, 100.0f, "%.3g", ImGuiSliderFlags_Logarithmic)) c.eta_base = eta;
  changed |= ImGui::IsItemDeactivatedAfterEdit();
  row("Gate", "Learned: λₜ = η_base·σ(xₜ·θ)/d depends on the token. Fixed: λₜ = η_base/d.");
  int gate = c.gate == EtaGate::Learned ? 0 : 1;
  if (ImGui::Combo("##gate", &gate, "learned σ(x·θ)\0fixed\0")) {
    c.gate = gate == 0 ? EtaGate::Learned : EtaGate::Fixed;
    changed = true;
  }
  changed |= ImGui::Checkbox("token-index scale τᵢ = 1/i", &c.token_index);
  ImGui::SameLine();
  help_marker("On: token i of a mini-batch applies the MEAN of the λ-weighted gradients of tokens 1..i "
              "(official). Off: τ = 1, the plain sum.");
  changed |= ImGui::Checkbox("LayerNorm", &c.layer_norm);
  ImGui::SameLine();
  changed |= ImGui::Checkbox("residual", &c.residual);
  ImGui::SameLine();
  changed |= ImGui::Checkbox("bias", &c.bias);
  row("W₀", "The inner weights at the start of the sequence (a learned parameter in a real model). Random: "
            "entries N(0, 0.02²), the official initialisation. Zero: every z = kW₀ is constant, its "
            "LayerNorm variance is 0, and the first gradients are scaled by 1/√ε = 1000.");
  changed |= choice_pair("zero", W0Init::Zero, "random", W0Init::Random, c.w0);
  ImGui::EndDisabled();
  (void)toy;
  return changed;
}


std::string member_inputs_note(const HeadConfig& c) {
  const std::string id = c.member_id();
  if (id == "linear_attention")
    return "Linear attention on the toy head: q and k as drawn (not normalised), S₀ = 0, β = 1; the read is "
           "after the write, oₜ = qₜSₜ.";
  if (id == "mamba2")
    return "Mamba-2's recurrence on the toy head: q and k as drawn, S₀ = 0; βₜ = η_base·σ(xₜ·θ) (Δₜ) and "
           "αₜ = σ(3 + xₜ·θ_α) ≈ 0.95 with random θ, θ_α (fixed gate: βₜ = η_base, αₜ = σ(3)).";
  if (id == "deltanet" || id == "gated_deltanet")
    return std::string(id == "deltanet" ? "DeltaNet" : "Gated DeltaNet") +
           " on the toy head: k ← k/‖k‖ and q ← q/(‖q‖√d) as its layer does, S₀ = 0; βₜ = η_base·σ(xₜ·θ)" +
           (id == "gated_deltanet" ? ", αₜ = σ(3 + xₜ·θ_α) ≈ 0.95" : "") +
           " with random θ (fixed gate: βₜ = η_base" + (id == "gated_deltanet" ? ", αₜ = σ(3)" : "") +
           "). β above 2 overshoots: watch the loss.";
  if (id == "titans")
    return "Titans' own inner loop (FLA's linear memory, docs/MATH.md §11.9) on the toy head: q, k "
           "L2-normalised as its layer does, v as drawn; M₀ = 0, momentum S₀ = 0, the LayerNorm's w = 1, b = 0; "
           "θₜ = η_base·σ(xₜ·θ)/d (its layer's 1/d offsets the D·g of FLA's write), the forgetting "
           "1 − αₜ with αₜ = σ(3 + xₜ·θ_α) (so about 0.05), momentum ηₜ = 0.9; gradients at the start of each "
           "mini-batch of b. Its loss ‖LN(kₜM) + kₜ − vₜ‖² has no ½, and FLA's step is not exactly its "
           "gradient (§11.9): a step need not lower it.";
  if (id == "lact")
    return "LaCT's own inner loop (docs/MATH.md §11.10) on the toy head: q, k L2-normalised as its layer "
           "does, v as drawn; SwiGLU fast weights W₀, W₂ [4d, d] ~ N(0, 1/d), W₁ [d, 4d] ~ N(0, 1/(4d)) from "
           "the seed; the rate η_base·σ(xₜ·θ)/d for all three weights, momentum 0.9 and Muon; chunks of C = b "
           "tokens, read first, learnt from when the next token arrives (the weights do not change in between), "
           "every row renormalised to its initial norm.";
  return "";
}

std::string state_matrix_name(const HeadConfig& c, bool mlp, int layer) {
  if (!c.ttt()) {
    try {
      const std::vector<std::string> names = member_state_names(fast_weight_preset(c.member_id()));
      if (layer >= 0 && static_cast<std::size_t>(layer) < names.size()) return names[static_cast<std::size_t>(layer)];
    } catch (const std::invalid_argument&) {
    }
  }
  if (!mlp) return c.ttt() ? "W" : "S";
  return layer == 1 ? "W₂" : "W₁";
}

std::string quoted_token(const std::vector<unsigned char>& bytes, long t) {
  std::string s;
  if (t < 0 || t >= static_cast<long>(bytes.size())) return s;
  s += '\'';  // appended piecewise: GCC 12 warns falsely (-Wrestrict) on "'" + str + "'"
  s += token_label(bytes[static_cast<std::size_t>(t)]);
  s += '\'';
  return s;
}

long token_strip(const std::vector<unsigned char>& bytes, int mini_batch, long cursor, long computed,
                 float max_height) {
  const Fonts& f = fonts();
  long clicked = -1;
  const float cell_h = f.mono->FontSize + 8.0f;
  const float cell_w = f.mono->FontSize * 0.62f + 8.0f;
  const float gap = 3.0f;  // between mini-batches
  float avail = ImGui::GetContentRegionAvail().x;
  // Wrap at mini-batch boundaries when a whole mini-batch fits on a line.
  const long n = static_cast<long>(bytes.size());
  const auto count_lines = [&](float width) {
    int lines = 1;
    float x = 0;
    for (long t = 0; t < n; ++t) {
      const float w = cell_w + (t % mini_batch == mini_batch - 1 ? gap : 0.0f);
      if (x + w > width && x > 0) {
        ++lines;
        x = 0;
      }
      x += w;
    }
    return lines;
  };
  int lines = count_lines(avail);
  const bool scrolls = lines * (cell_h + 2.0f) > max_height;
  // A strip that scrolls loses its scroll bar's width: the cells wrap before it, not under it.
  if (scrolls) {
    avail -= ImGui::GetStyle().ScrollbarSize;
    lines = count_lines(avail);
  }
  const float h = std::min(max_height, lines * (cell_h + 2.0f) + 2.0f);
  ImGui::BeginChild("##tokens", ImVec2(0, h), false, scrolls ? 0 : ImGuiWindowFlags_NoScrollbar);
  ImDrawList* dl = ImGui::GetWindowDrawList();
  const ImVec2 o = ImGui::GetCursorScreenPos();
  float x = 0, y = 0, cursor_y = -1.0f;
  const ImVec2 mouse = ImGui::GetIO().MousePos;
  const bool hovered_win = ImGui::IsWindowHovered();
  for (long t = 0; t < n; ++t) {
    const bool end_of_mb = t % mini_batch == mini_batch - 1;
    const float w = cell_w + (end_of_mb ? gap : 0.0f);
    if (x + w > avail && x > 0) {
      x = 0;
      y += cell_h + 2.0f;
    }
    const ImVec2 a(o.x + x, o.y + y), b(a.x + cell_w - 1.0f, a.y + cell_h);
    if (t == cursor) cursor_y = y;
    const long mb = t / mini_batch;
    ImU32 bg = mb % 2 ? colors::kChipA : colors::kChipB;
    ImU32 fg = t < computed ? colors::kText : colors::kTextFaint;
    if (t == cursor) {
      bg = colors::kChipSelected;
      fg = colors::kOnChipSelected;
    }
    const bool over = hovered_win && mouse.x >= a.x && mouse.x < b.x && mouse.y >= a.y && mouse.y < b.y;
    if (over) bg = t == cursor ? bg : colors::kChipHover;
    dl->AddRectFilled(a, b, bg, 2.0f);
    std::string label = token_label(bytes[static_cast<std::size_t>(t)]);
    if (label.size() > 3 && label[0] == '0') label = "\xC2\xB7";  // non-ASCII byte: a middle dot
    plot::text_at(dl, f.mono, ImVec2((a.x + b.x) * 0.5f, (a.y + b.y) * 0.5f), 0.5f, 0.5f, fg, label.c_str());
    if (over) {
      ImGui::BeginTooltip();
      ImGui::Text("token %ld  '%s'  (byte %u)", t, token_label(bytes[static_cast<std::size_t>(t)]).c_str(),
                  static_cast<unsigned>(bytes[static_cast<std::size_t>(t)]));
      ImGui::TextDisabled("mini-batch %ld, position %ld of %d — click to go there", mb, t % mini_batch + 1,
                          mini_batch);
      ImGui::EndTooltip();
      if (ImGui::IsMouseClicked(ImGuiMouseButton_Left)) clicked = t;
    }
    x += w;
  }
  ImGui::Dummy(ImVec2(avail, y + cell_h));
  // Keep the cursor's line in view when the cursor moves (not while the user scrolls by hand).
  static ImGuiID last_window = 0;
  static long last_cursor = -2;
  const ImGuiID win = ImGui::GetID("##tokens-scroll");
  if ((win != last_window || cursor != last_cursor) && cursor_y >= 0.0f) {
    const float top = ImGui::GetScrollY(), bottom = top + h;
    if (cursor_y < top || cursor_y + cell_h > bottom) ImGui::SetScrollY(std::max(0.0f, cursor_y - cell_h));
  }
  last_window = win;
  last_cursor = cursor;
  ImGui::EndChild();
  return clicked;
}

}  // namespace tttlab::gui::widgets
