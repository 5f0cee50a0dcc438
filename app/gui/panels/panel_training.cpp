// Panel 6 — Training: train small byte-level language models on the CPU or the GPU and watch them learn. Start,
// pause, resume and stop runs (layer, backbone, preset, data, b, η_base, learning rate, steps, device, GPUs,
// …); live training and validation loss, tokens per second (and per GPU for a run on several GPUs),
// learning rate, gradient norm and time left; several runs overlaid in one colour each; checkpoints saved
// (and loaded into every other panel's model list) and run directories opened or resumed — the same
// directories `tttlab train` writes.
#include <imgui.h>

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <nlohmann/json.hpp>

#include "gui/fonts.hpp"
#include "gui/keys.hpp"
#include "gui/panels/feature_panel.hpp"
#include "gui/panels/widgets.hpp"
#include "gui/platform/host.hpp"
#include "gui/plot/line_plot.hpp"
#include "lab/plot/ticks.hpp"
#include "lab/training/training_settings.hpp"
#include "gui/lab.hpp"
#include "gui/theme.hpp"

namespace tttlab::gui {
namespace {

using plot::format_value;

const char* const kLayers[] = {"ttt-linear", "ttt-mlp",  "linear-attention", "softmax-attention",
                               "mamba2",     "deltanet", "gated-deltanet",   "titans", "lact"};
constexpr int kLayerCount = static_cast<int>(sizeof kLayers / sizeof kLayers[0]);
const char* const kPresets[] = {"tiny", "small", "125m"};

using XAxis = TrainingXAxis;  // lab/training/training_settings.hpp

// Where a folder of runs the student typed lives. In the browser the page's own folders vanish with the
// tab, so a relative one is taken inside the lab's folder, which the browser keeps (IndexedDB): runs and
// their checkpoints are still there after a reload. On the desktop it stays as typed.
std::string kept_folder(const std::string& folder) {
  if (!host::files_are_downloads() || std::filesystem::path(folder).is_absolute()) return folder;
  return (host::persistent_dir() / (folder.empty() ? "runs" : folder)).string();
}

// 204500.4 → "204,500": a rate for students, to the whole token.
std::string grouped(double v) {
  if (!std::isfinite(v)) return "—";
  const long long n = std::llround(v);
  std::string digits = std::to_string(n < 0 ? -n : n), out;
  for (std::size_t i = 0; i < digits.size(); ++i) {
    if (i > 0 && (digits.size() - i) % 3 == 0) out += ',';
    out += digits[i];
  }
  return (n < 0 ? "-" : "") + out;
}

ImU32 state_color(RunState s) {
  switch (s) {
    case RunState::Running: return colors::kGood;
    case RunState::Paused: return colors::kWarning;
    case RunState::Failed: return colors::kError;
    case RunState::Starting:
    case RunState::Stopping: return colors::kAccent;
    default: return colors::kTextDim;
  }
}

class TrainingPanel final
    : public FeaturePanel<TrainingPanelSettings, TrainingView, &Snapshot::training> {
 public:
  TrainingPanel()
      : FeaturePanel(kTrainingId,
                     {{"training.settings", "Training: the run settings (model, data, hyper-parameters)"},
                      {"training.start", "Training: the Start button"},
                      {"training.runs", "Training: run controls (pause, stop, save, remove, open)"},
                      {"training.view", "Training: view options"}}) {}

  void sync(CommandSink& sink) override {
    // Runs recorded in a state file are shown again from their directories (their metrics and latest
    // checkpoints), never retrained.
    if (m_synced) return;  // runs are already open in the engine
    m_synced = true;
    FeaturePanel::sync(sink);
  }
  // Refused commands (a second run, a folder that is not a run) reach the user as the app's error popup.
  void observe(const Snapshot& snap) override {
    if (!snap.training || !m_synced) return;
    m_known_dirs.clear();
    for (const auto& r : snap.training->runs) m_known_dirs.push_back(r->dir);
  }

 private:
  // The runs saved are those the engine shows, opened or started here.
  TrainingPanelSettings saved() const override {
    TrainingPanelSettings s = m_settings;
    s.open_runs = m_known_dirs;
    return s;
  }
  void loaded() override {
    m_known_dirs = m_settings.open_runs;
    m_synced = false;  // the next sync opens the file's runs
  }

  // The view is empty until a run is started from the controls: on a narrow screen they stay open until
  // there is a run, and then fold to give its table and cards the width.
  bool fold_controls_when_narrow() const override { return m_any_runs; }

  void draw_controls(const TrainingView& v, const Snapshot&, CommandSink& sink) override {
    TrainSettings& t = m_settings.train;
    const bool any_active = std::any_of(v.runs.begin(), v.runs.end(), [](const auto& r) { return r->active(); });
    if (classroom::visible("training.settings")) {
      widgets::section_label("MODEL");
      widgets::row("Layer", "The sequence layer of every block: the two TTT layers, or the baselines: attention "
                            "(softmax, linear), Mamba-2, DeltaNet, Gated DeltaNet, Titans and LaCT.");
      int layer = 0;
      for (int i = 0; i < kLayerCount; ++i)
        if (t.layer == kLayers[i]) layer = i;
      if (ImGui::Combo("##layer", &layer,
                       "TTT-Linear\0TTT-MLP\0linear attention\0softmax attention\0Mamba-2\0DeltaNet\0Gated "
                       "DeltaNet\0Titans\0LaCT\0"))
        t.layer = kLayers[layer];
      // Mamba-2 brings its own convolution and gate, DeltaNet, Gated DeltaNet and Titans their own
      // short convolutions, LaCT its window attention: they always sit in the Transformer block.
      const bool mamba2 = t.layer == "mamba2";
      const bool own_block = transformer_block_only(seq_layer_from_string(t.layer));
      if (own_block) t.mamba = false;
      widgets::row("Backbone", mamba2      ? "Mamba-2 is a whole Mamba block (its own convolution and gate), so it "
                                             "sits in the Transformer block."
                               : own_block ? "DeltaNet, Gated DeltaNet, Titans and LaCT are whole blocks (their "
                                             "own short convolutions or window attention), so they sit "
                                             "in the Transformer block."
                                           : "Mamba (m): pre-convolution, shared Q/K with convolutions, gate. "
                                             "Transformer (t): none.");
      ImGui::BeginDisabled(own_block);
      int bb = t.mamba ? 0 : 1;
      ImGui::RadioButton("Mamba", &bb, 0);
      // On the same line where it fits (the circle, then the word), below it where the column is narrow.
      ImGui::SameLine();
      if (ImGui::GetFrameHeight() + ImGui::GetStyle().ItemInnerSpacing.x + ImGui::CalcTextSize("Transformer").x >
          ImGui::GetContentRegionAvail().x) {
        ImGui::NewLine();
        ImGui::SetCursorPosX(widgets::label_width());
      }
      ImGui::RadioButton("Transformer", &bb, 1);
      ImGui::EndDisabled();
      t.mamba = bb == 0;
      widgets::row("Preset", "tiny: D = 128, 4 blocks (CPU). small and 125m are for GPUs and benchmarks.");
      int preset = t.preset == "small" ? 1 : t.preset == "125m" ? 2 : 0;
      if (ImGui::Combo("##preset", &preset, "tiny (~1 M parameters)\0small (~11 M)\0125m\0")) t.preset = kPresets[preset];
      const bool ttt = t.layer == "ttt-linear" || t.layer == "ttt-mlp";
      ImGui::BeginDisabled(!ttt);
      widgets::row("b", "Inner mini-batch size of the TTT layers.");
      ImGui::SliderInt("##b", &t.mini_batch, 1, 256, "%d", ImGuiSliderFlags_Logarithmic);
      widgets::row("η base", "The TTT inner learning rate scale (0: the official default, 1 for Linear, 0.1 for MLP).");
      float eta = static_cast<float>(t.base_lr);
      if (ImGui::SliderFloat("##eta", &eta, 0.0f, 10.0f, eta == 0.0f ? "default" : "%.3g")) t.base_lr = eta;
      ImGui::EndDisabled();

      widgets::section_label("DATA");
      widgets::row("Text");
      widgets::data_combo("data", t.data);
      widgets::row("T", "Sequence length of each training window.");
      ImGui::SliderInt("##T", &t.seq_len, 16, 1024, "%d tokens", ImGuiSliderFlags_Logarithmic);
      widgets::row("Batch", "Sequences per optimiser step.");
      ImGui::SliderInt("##B", &t.batch_size, 1, 64, "%d sequences");

      widgets::section_label("OPTIMISER");
      widgets::row("LR", "Peak learning rate of AdamW (10 % linear warm-up, cosine decay to 1e−5).");
      float lr = static_cast<float>(t.lr);
      if (ImGui::SliderFloat("##lr", &lr, 1e-4f, 3e-2f, "%.2e", ImGuiSliderFlags_Logarithmic)) t.lr = lr;
      widgets::row("Steps");
      int steps = static_cast<int>(t.steps);
      if (ImGui::SliderInt("##steps", &steps, 10, 20000, "%d", ImGuiSliderFlags_Logarithmic)) t.steps = steps;
      widgets::row("Seed", "Initialisation and batch order: the same seed gives the same run (per thread count).");
      std::uint64_t seed = t.seed;
      if (ImGui::InputScalar("##seed", ImGuiDataType_U64, &seed)) t.seed = seed;
      widgets::row("Device", "Where the run computes. Automatic: the GPU when this build has the CUDA kernels, a GPU "
                             "is present and it can train the model (TTT-Linear); the CPU otherwise. The run's "
                             "card says which it uses.");
      int device = static_cast<int>(t.device);  // the choices are DeviceRequest's values, in order
      if (ImGui::Combo("##device", &device, "automatic\0CPU\0GPU (CUDA)\0")) {
        t.device = static_cast<DeviceRequest>(device);
        if (t.device == DeviceRequest::CPU) t.gpus = 1;  // the CPU is one device
      }
      widgets::row("GPUs", "Train on several GPUs at once: each GPU computes part of every batch, their gradients "
                           "are added up, and every GPU applies the same update, so all of them keep the same model. "
                           "1: one device, as Device says. Each GPU needs at least one sequence of the batch.");
      const bool on_cpu = t.device == DeviceRequest::CPU;
      ImGui::BeginDisabled(on_cpu);
      int gpus = on_cpu ? 1 : t.gpus;
      if (ImGui::InputInt("##gpus", &gpus, 1, 1) && !on_cpu) t.gpus = std::clamp(gpus, 1, 1024);
      ImGui::EndDisabled();
      if (on_cpu && ImGui::IsItemHovered(ImGuiHoveredFlags_AllowWhenDisabled))
        ImGui::SetTooltip("The CPU trains as one device: choose automatic or GPU to train on several GPUs.");
      if (!on_cpu && t.gpus > t.batch_size) {
        ImGui::PushTextWrapPos(0.0f);
        ImGui::TextColored(ImGui::ColorConvertU32ToFloat4(colors::kWarning),
                           "%d GPUs need a batch of at least %d sequences (each GPU computes at least one).", t.gpus,
                           t.gpus);
        ImGui::PopTextWrapPos();
      }
      widgets::row("Threads", "CPU worker threads inside each step. 1 leaves the other cores to the app.");
      ImGui::SliderInt("##threads", &t.threads, 1, 16);
      widgets::row("Validate", "Validation every N steps (and at the end), on the first windows of the validation text.");
      int ev = static_cast<int>(t.eval_every);
      if (ImGui::SliderInt("##eval", &ev, 0, 1000, ev == 0 ? "at the end" : "every %d steps", ImGuiSliderFlags_Logarithmic))
        t.eval_every = ev;
      widgets::row("Checkpoint every", "Save the weights every N steps (and always at the end). Views that follow "
                                       "the run (the inner-loss curves, the stepper, the evolution) compute again "
                                       "at every checkpoint; each one takes disk space and a little time.");
      int ck = static_cast<int>(t.checkpoint_every);
      if (ImGui::SliderInt("##checkpoint", &ck, 0, 1000, ck == 0 ? "at the end" : "every %d steps",
                           ImGuiSliderFlags_Logarithmic))
        t.checkpoint_every = ck;
      widgets::row("Name", "The run directory's name under the runs folder (empty: from the settings).");
      widgets::input_string("##name", m_settings.name);
      widgets::row("Folder");
      widgets::input_string("##runs", t.runs_dir);
    }
    if (classroom::visible("training.start")) {
      ImGui::Dummy(ImVec2(0, 4));
      ImGui::BeginDisabled(any_active);
      if (ImGui::Button(any_active ? "A run is training…" : "Start a run", ImVec2(-1, ImGui::GetFrameHeight() * 1.3f))) {
        TrainSettings run = t;
        run.runs_dir = kept_folder(t.runs_dir);
        sink.post(TrainStart{run, m_settings.name});
      }
      ImGui::EndDisabled();
      widgets::error_text(v.error);  // the last refusal, until a run starts
    }
    if (classroom::visible("training.runs")) {
      ImGui::Dummy(ImVec2(0, 2));
      if (ImGui::Button("Open a run…", ImVec2(ImGui::GetContentRegionAvail().x * 0.5f - 3.0f, 0)))
        ImGui::OpenPopup("Open a run directory");
      ImGui::SameLine(0, 6);
      if (ImGui::Button("Resume a run…", ImVec2(-1, 0))) ImGui::OpenPopup("Resume a run directory");
      static std::string open_path = "runs/";
      if (widgets::path_prompt("Open a run directory",
                               "A run directory of this panel or of `tttlab train` (metrics.jsonl, checkpoints). "
                               "Its curves join the plots and its latest checkpoint joins every model list:",
                               open_path))
        sink.post(TrainOpen{kept_folder(open_path), false});
      if (widgets::path_prompt("Resume a run directory",
                               "Training continues from the run's latest checkpoint with its saved settings "
                               "(opened paused: press Resume):",
                               open_path))
        sink.post(TrainOpen{kept_folder(open_path), true});
    }
    if (classroom::visible("training.view")) {
      widgets::section_label("VIEW");
      widgets::smoothing_row(m_settings.smoothing, 0.99f);
      widgets::row("x axis");
      int x = static_cast<int>(m_settings.x);
      if (ImGui::Combo("##x", &x, "optimiser step\0tokens seen\0wall time\0")) m_settings.x = static_cast<XAxis>(x);
      ImGui::Checkbox("log scale for the loss", &m_settings.log_loss);
    }
    ImGui::Dummy(ImVec2(0, 6));
    widgets::note("Runs train on their own thread with tttlab's Trainer (AdamW, data-parallel threads, exact "
                  "resume); pause and stop take effect between optimiser steps. Run directories are those of "
                  "`tttlab train`: continue one from the command line with `tttlab train --resume DIR`.");
  }

  void draw_view(const TrainingView& v, const Snapshot&, CommandSink& sink) override {
    m_any_runs = !v.runs.empty();
    widgets::panel_title("Training", "Byte-level language models trained live, on the CPU or the GPU (Device).");
    if (v.runs.empty()) {
      ImGui::Dummy(ImVec2(0, 10));
      // At most 40 em wide, and never past the view's right edge (narrow beside a docked lesson).
      ImGui::PushTextWrapPos(std::min(ImGui::GetCursorPosX() + ImGui::GetFontSize() * 40.0f,
                                      ImGui::GetContentRegionMax().x));
      ImGui::TextColored(ImGui::ColorConvertU32ToFloat4(colors::kTextDim),
                         "No runs yet. Choose the settings on the left and press Start a run: the tiny preset "
                         "trains at a few thousand tokens per second on one core, and a few hundred steps already "
                         "show the loss falling from 8 bits per byte (uniform over 256 bytes) towards 2–3. Or open "
                         "a run directory written earlier (here or by `tttlab train`).");
      ImGui::PopTextWrapPos();
      return;
    }
    runs_table(v, sink);
    // A failed run's reason in full, not only in the state column's tooltip.
    for (const auto& r : v.runs)
      if (r->state == RunState::Failed) widgets::error_text("Run " + r->name + " failed: " + r->message);
    ImGui::Dummy(ImVec2(0, 6));
    const RunView* sel = nullptr;
    for (const auto& r : v.runs)
      if (r->id == m_selected) sel = r.get();
    if (!sel) sel = v.runs.back().get();
    cards(*sel);
    per_gpu(*sel);
    ImGui::Dummy(ImVec2(0, 6));
    plots(v);
  }

  void runs_table(const TrainingView& v, CommandSink& sink) {
    const Fonts& f = fonts();
    const bool controls = classroom::visible("training.runs");
    ImGui::PushFont(f.small);
    const float rows_h = std::min(6.0f, static_cast<float>(v.runs.size()) + 1.0f) * (ImGui::GetFrameHeight() + 4.0f) + 4.0f;
    if (ImGui::BeginTable("##runs", 6, ImGuiTableFlags_BordersInnerH | ImGuiTableFlags_RowBg | ImGuiTableFlags_ScrollY |
                                           ImGuiTableFlags_SizingStretchProp,
                          ImVec2(0, rows_h))) {
      ImGui::TableSetupScrollFreeze(0, 1);
      ImGui::TableSetupColumn("run", ImGuiTableColumnFlags_WidthStretch, 2.2f);
      ImGui::TableSetupColumn("state", ImGuiTableColumnFlags_WidthStretch, 0.8f);
      ImGui::TableSetupColumn("progress", ImGuiTableColumnFlags_WidthStretch, 1.4f);
      ImGui::TableSetupColumn("settings", ImGuiTableColumnFlags_WidthStretch, 2.4f);
      // As wide as its header: its cells are short (a step number), and a stretched share of a narrow
      // table cut the header itself.
      ImGui::TableSetupColumn("checkpoint", ImGuiTableColumnFlags_WidthFixed,
                              ImGui::CalcTextSize("checkpoint").x + 2.0f * ImGui::GetStyle().CellPadding.x);
      // The buttons' column is as wide as its widest row (Pause or Resume, Stop, Save, Remove), so no
      // button is cut off when the view is narrow; the other columns share what is left.
      const ImGuiStyle& style = ImGui::GetStyle();
      float buttons_w = 3.0f * style.ItemSpacing.x;
      for (const char* label : {"Resume", "Stop", "Save", "Remove"})
        buttons_w += ImGui::CalcTextSize(label).x + 2.0f * style.FramePadding.x;
      ImGui::TableSetupColumn("", ImGuiTableColumnFlags_WidthFixed, controls ? buttons_w : 0.0f);
      ImGui::TableHeadersRow();
      int i = 0;
      for (const auto& rp : v.runs) {
        const RunView& r = *rp;
        ImGui::PushID(r.id);
        ImGui::TableNextRow();
        ImGui::TableNextColumn();
        bool shown = !m_hidden.count(r.id);
        ImGui::PushStyleColor(ImGuiCol_CheckMark, ImGui::ColorConvertU32ToFloat4(widgets::series_color(i)));
        if (ImGui::Checkbox("##show", &shown)) {
          if (shown)
            m_hidden.erase(r.id);
          else
            m_hidden.insert(r.id);
        }
        ImGui::PopStyleColor();
        if (ImGui::IsItemHovered()) ImGui::SetTooltip("Show this run in the plots");
        ImGui::SameLine();
        ImGui::AlignTextToFramePadding();
        if (ImGui::Selectable(r.name.c_str(), m_selected == r.id || (m_selected == 0 && rp == v.runs.back()),
                              ImGuiSelectableFlags_None))
          m_selected = r.id;
        if (ImGui::IsItemHovered()) {
          ImGui::BeginTooltip();
          ImGui::Text("%s", r.dir.c_str());
          if (!r.model_summary.empty()) ImGui::TextDisabled("%s", r.model_summary.c_str());
          if (!r.data_description.empty()) ImGui::TextDisabled("data: %s", r.data_description.c_str());
          ImGui::EndTooltip();
        }
        ImGui::TableNextColumn();
        ImGui::AlignTextToFramePadding();
        ImGui::TextColored(ImGui::ColorConvertU32ToFloat4(state_color(r.state)), "%s", to_string(r.state));
        if (!r.message.empty() && ImGui::IsItemHovered()) ImGui::SetTooltip("%s", r.message.c_str());
        ImGui::TableNextColumn();
        const float frac = r.steps_total > 0 ? static_cast<float>(r.steps_done) / static_cast<float>(r.steps_total) : 0.0f;
        char prog[64];
        std::snprintf(prog, sizeof prog, "%ld / %ld", r.steps_done, r.steps_total);
        ImGui::ProgressBar(frac, ImVec2(-1, 0), prog);
        ImGui::TableNextColumn();
        ImGui::AlignTextToFramePadding();
        const TrainSettings& t = r.settings;
        // Wide, then without the optimiser's settings, then (a run on several GPUs) without the GPU count,
        // which the tooltip, the tokens/s card and the per-GPU rows still give.
        char wide[192], middle[112], narrow[80], on_gpus[32] = "";
        if (t.gpus > 1) std::snprintf(on_gpus, sizeof on_gpus, ", %d GPUs", t.gpus);
        std::snprintf(wide, sizeof wide, "%s %s, b %d, lr %.1e, B %d × T %d%s", t.layer.c_str(), t.mamba ? "m" : "t",
                      t.mini_batch, t.lr, t.batch_size, t.seq_len, on_gpus);
        std::snprintf(middle, sizeof middle, "%s %s, b %d%s", t.layer.c_str(), t.mamba ? "m" : "t", t.mini_batch,
                      on_gpus);
        std::snprintf(narrow, sizeof narrow, "%s %s, b %d", t.layer.c_str(), t.mamba ? "m" : "t", t.mini_batch);
        const std::string wide_s = wide, middle_s = middle, narrow_s = narrow;
        const float settings_w = ImGui::GetContentRegionAvail().x;
        ImGui::TextDisabled(
            "%s", widgets::fit(wide_s, widgets::fit(middle_s, narrow_s, settings_w), settings_w).c_str());
        if (ImGui::IsItemHovered() && !r.model_summary.empty())
          ImGui::SetTooltip("%s\n%s\ncomputes on %s%s", r.model_summary.c_str(), r.data_description.c_str(),
                            r.device.empty() ? "—" : r.device.c_str(),
                            t.gpus > 1 ? ("\n" + std::to_string(t.gpus) + " GPUs, each computing part of every batch")
                                             .c_str()
                                       : "");
        ImGui::TableNextColumn();
        ImGui::AlignTextToFramePadding();
        if (r.checkpoint.empty())
          ImGui::TextDisabled("—");
        else {
          // "step-0000300", or "300" where the column is narrow.
          const std::string ck = std::filesystem::path(r.checkpoint).filename().string();
          const auto digits = ck.find_first_of("123456789", ck.find('-') == std::string::npos ? 0 : ck.find('-'));
          const std::string cell =
              widgets::fit(ck, digits == std::string::npos ? ck : ck.substr(digits), ImGui::GetContentRegionAvail().x);
          // In the browser the checkpoint lives in the page: a click hands its two files over.
          const bool downloads = host::files_are_downloads();
          if (!downloads)
            ImGui::TextUnformatted(cell.c_str());
          else if (ImGui::Selectable(cell.c_str()))
            download_checkpoint(r.checkpoint);
          if (ImGui::IsItemHovered())
            ImGui::SetTooltip("%s\nloaded into the model lists as \"run %s\"%s", r.checkpoint.c_str(), r.name.c_str(),
                              downloads ? "\nClick to download it: config.json and model.safetensors. Put both "
                                          "in one folder to open it in the desktop app."
                                        : "");
        }
        ImGui::TableNextColumn();
        if (controls) {
          const auto op = [&](TrainOp o) { sink.post(TrainControl{r.id, o}); };
          if (r.state == RunState::Running || r.state == RunState::Starting) {
            if (ImGui::SmallButton("Pause")) op(TrainOp::Pause);
            ImGui::SameLine();
          } else if (r.state == RunState::Paused) {
            if (ImGui::SmallButton("Resume")) op(TrainOp::Resume);
            ImGui::SameLine();
          }
          if (r.live()) {
            if (ImGui::SmallButton("Stop")) op(TrainOp::Stop);
            if (ImGui::IsItemHovered()) ImGui::SetTooltip("Finish the current step, save a checkpoint and end the run");
            ImGui::SameLine();
            if (ImGui::SmallButton("Save")) op(TrainOp::Save);
            if (ImGui::IsItemHovered()) ImGui::SetTooltip("Save a checkpoint after the current step");
            ImGui::SameLine();
          }
          if (ImGui::SmallButton("Remove")) op(TrainOp::Remove);
          if (ImGui::IsItemHovered())
            ImGui::SetTooltip("Remove from this list (stops it if it trains); the run directory stays on disk");
        }
        ImGui::PopID();
        ++i;
      }
      ImGui::EndTable();
    }
    widgets::error_text(m_download_error);
    ImGui::PopFont();
  }

  // Offers a checkpoint's files as downloads (the browser), or says why it cannot.
  void download_checkpoint(const std::string& dir) {
    for (const char* name : {"config.json", "model.safetensors"})
      if (!host::offer_download(std::filesystem::path(dir) / name)) {
        m_download_error = "Could not read " + (std::filesystem::path(dir) / name).string();
        return;
      }
    m_download_error.clear();
  }

  void cards(const RunView& r) {
    const float gap = 8.0f;
    const int n = 6;
    const float cw = (ImGui::GetContentRegionAvail().x - gap * (n - 1)) / n;
    // metric() clips its caption to the card: a narrow card gets the short form.
    const auto caption = [&](const std::string& wide, const std::string& narrow) {
      return widgets::fit(wide, narrow, cw - 16.0f, fonts().small);
    };
    const Series<StepPoint>* st = r.steps.get();
    const StepPoint* last = st && !st->empty() ? &st->back() : nullptr;
    // The smoothed training loss (the raw loss of one batch is noisy).
    double ema = NAN;
    if (st)
      for (std::size_t i = st->size() > 200 ? st->size() - 200 : 0; i < st->size(); ++i)
        if (std::isfinite((*st)[i].loss)) ema = std::isnan(ema) ? (*st)[i].loss : 0.9 * ema + 0.1 * (*st)[i].loss;
    const double ln2 = std::log(2.0);
    widgets::metric("training loss", std::isnan(ema) ? "—" : format_value(ema / ln2, 4) + " bpb",
                    last ? caption("EMA of the batch loss, step " + std::to_string(last->step), "step " + std::to_string(last->step))
                         : r.name,
                    colors::kAccent, cw);
    ImGui::SameLine(0, gap);
    const EvalPoint* ev = r.evals.empty() ? nullptr : &r.evals.back();
    widgets::metric("validation", ev ? format_value(ev->bpb, 4) + " bpb" : "—",
                    ev ? caption("at step " + std::to_string(ev->step) + " (" + format_value(ev->loss, 4) + " nats)",
                                 "at step " + std::to_string(ev->step))
                       : "not yet",
                    colors::kLossAfter, cw);
    ImGui::SameLine(0, gap);
    widgets::metric("tokens / s", r.tokens_per_s > 0 ? format_value(r.tokens_per_s, 3) : "—",
                    r.settings.gpus > 1 ? "on " + std::to_string(r.settings.gpus) + " GPUs"
                    : r.device.rfind("CUDA", 0) == 0
                        ? std::string("on the GPU")
                        : std::to_string(r.settings.threads) + " thread" + (r.settings.threads == 1 ? "" : "s"),
                    colors::kText, cw);
    ImGui::SameLine(0, gap);
    widgets::metric("learning rate", last ? format_value(last->lr, 3) : "—", caption("warm-up, then cosine", "cosine"),
                    colors::kText, cw);
    ImGui::SameLine(0, gap);
    widgets::metric("gradient norm", last ? format_value(last->grad_norm, 3) : "—",
                    caption("before clipping at 1", "unclipped"),
                    colors::kText, cw);
    ImGui::SameLine(0, gap);
    widgets::metric("time left", r.active() ? plot::format_duration(r.seconds_left) : to_string(r.state),
                    std::to_string(r.steps_done) + " of " + std::to_string(r.steps_total) + " steps", state_color(r.state),
                    cw);
  }

  // A run on several GPUs: one row per GPU with its own tokens/s and a bar relative to the fastest, and
  // the total. Nothing for a run on one device.
  void per_gpu(const RunView& r) {
    const std::vector<double>& rates = r.gpu_tokens_per_s;
    if (r.settings.gpus <= 1 && rates.size() <= 1) return;
    ImGui::Dummy(ImVec2(0, 4));
    widgets::section_label("TOKENS PER SECOND ON EACH GPU");
    ImGui::PushFont(fonts().small);
    if (rates.empty()) {
      ImGui::TextDisabled("%s", r.active() ? "appears after the first step" : "not measured (shown while the run trains)");
      ImGui::PopFont();
      return;
    }
    const double fastest = *std::max_element(rates.begin(), rates.end());
    double total = 0;
    for (double x : rates) total += x;
    const int n = static_cast<int>(rates.size());
    const int batch = r.settings.batch_size;
    const float line_h = ImGui::GetTextLineHeightWithSpacing();
    const float label_w = ImGui::CalcTextSize("all 0000 GPUs").x + 12.0f;
    const float value_w = ImGui::CalcTextSize("00,000,000,000 tokens/s").x + 12.0f;
    const float bar_w = std::clamp(ImGui::GetContentRegionAvail().x - label_w - value_w - 8.0f, 40.0f,
                                   ImGui::GetFontSize() * 22.0f);
    // One row: the label, the rate right-aligned, and a bar (frac of its width; frac < 0: no bar). A group,
    // so the row's tooltip shows anywhere on it.
    const auto row = [&](const std::string& label, double rate, float frac, bool strong) {
      const ImVec4 text = ImGui::ColorConvertU32ToFloat4(strong ? colors::kText : colors::kTextDim);
      const std::string value = grouped(rate) + " tokens/s";
      ImGui::BeginGroup();  // inside a group, SameLine's offsets count from the group's left edge
      ImGui::TextColored(text, "%s", label.c_str());
      ImGui::SameLine(label_w + value_w - 12.0f - ImGui::CalcTextSize(value.c_str()).x);
      ImGui::TextColored(text, "%s", value.c_str());
      ImGui::SameLine(label_w + value_w);
      const ImVec2 p = ImGui::GetCursorScreenPos();
      const float h = ImGui::GetTextLineHeight();
      ImGui::Dummy(ImVec2(bar_w, h));
      ImDrawList* dl = ImGui::GetWindowDrawList();
      if (frac >= 0)
        dl->AddRectFilled(ImVec2(p.x, p.y + h * 0.2f), ImVec2(p.x + bar_w, p.y + h * 0.8f), colors::kTrack,
                          2.0f);
      if (frac > 0)
        dl->AddRectFilled(ImVec2(p.x, p.y + h * 0.2f), ImVec2(p.x + bar_w * std::min(frac, 1.0f), p.y + h * 0.8f),
                          colors::kAccent, 2.0f);
      ImGui::EndGroup();
    };
    // Beyond 8 GPUs the rows scroll, so the plots keep their room.
    const int shown = std::min(n, 8);
    const bool scroll = n > shown;
    if (scroll) ImGui::BeginChild("##gpu_rows", ImVec2(0, line_h * static_cast<float>(shown) + 4.0f), false);
    for (int g = 0; g < n; ++g) {
      const double rate = rates[static_cast<std::size_t>(g)];
      row("GPU " + std::to_string(g), rate, fastest > 0 ? static_cast<float>(rate / fastest) : 0.0f, false);
      if (ImGui::IsItemHovered()) {
        const int share = n > 0 ? batch / n + (g < batch % n ? 1 : 0) : 0;
        ImGui::SetTooltip("GPU %d computes %d of the %d sequences of every batch.\n%s tokens/s: the tokens of its share "
                          "over the time of its forward pass, backward pass,\nadding up the gradients and the update, "
                          "averaged over the last few steps.\nThe bar is relative to the fastest GPU (%s%% of it).",
                          g, share, batch, grouped(rate).c_str(),
                          fastest > 0 ? format_value(100.0 * rate / fastest, 3).c_str() : "—");
      }
    }
    if (scroll) ImGui::EndChild();
    row("all " + std::to_string(n) + " GPUs", total, -1.0f, true);
    if (ImGui::IsItemHovered())
      ImGui::SetTooltip("The GPUs' rates added up. The tokens / s card above measures whole steps: the slowest GPU "
                        "sets the pace,\nand preparing the batch counts too, so it can be a little lower.");
    ImGui::PopFont();
  }

  void plots(const TrainingView& v) {
    // One x/y buffer pair per run and quantity, rebuilt every frame from the shared series.
    const std::size_t n = v.runs.size();
    m_xs.assign(n, {});
    m_loss.assign(n, {});
    m_lr.assign(n, {});
    m_gn.assign(n, {});
    m_tps.assign(n, {});
    m_vx.assign(n, {});
    m_vy.assign(n, {});
    const double ln2 = std::log(2.0);
    for (std::size_t i = 0; i < n; ++i) {
      const RunView& r = *v.runs[i];
      const double tokens_per_step = static_cast<double>(r.settings.batch_size) * r.settings.seq_len;
      const auto xval = [&](const StepPoint& p) {
        return m_settings.x == XAxis::Step ? static_cast<double>(p.step)
               : m_settings.x == XAxis::Tokens ? static_cast<double>(p.step) * tokens_per_step
                                      : p.elapsed_s;
      };
      if (r.steps)
        for (std::size_t k = 0; k < r.steps->size(); ++k) {
          const StepPoint& p = (*r.steps)[k];
          m_xs[i].push_back(xval(p));
          m_loss[i].push_back(p.skipped ? NAN : p.loss / ln2);
          m_lr[i].push_back(p.lr);
          m_gn[i].push_back(p.grad_norm);
          m_tps[i].push_back(p.tokens_per_s);
        }
      for (const auto& e : r.evals) {
        // Evaluations are placed at their step (on the time axis: the time of that step).
        double x = static_cast<double>(e.step);
        if (m_settings.x == XAxis::Tokens) x *= tokens_per_step;
        if (m_settings.x == XAxis::Time) {
          x = NAN;
          if (r.steps)
            for (std::size_t k = r.steps->size(); k-- > 0;)
              if ((*r.steps)[k].step <= e.step) {
                x = (*r.steps)[k].elapsed_s;
                break;
              }
        }
        m_vx[i].push_back(x);
        m_vy[i].push_back(e.bpb);
      }
    }
    const std::string xl = m_settings.x == XAxis::Step ? "optimiser step" : m_settings.x == XAxis::Tokens ? "tokens seen" : "seconds";
    const ImVec2 avail = ImGui::GetContentRegionAvail();
    const float big_h = std::max(180.0f, avail.y * 0.58f);
    const float small_h = std::max(130.0f, avail.y - big_h - 22.0f);

    plot::LinePlot L = plot::titled("train_loss", "training_loss", "Loss",
                                      "bits per byte · lines: training batches (raw faint, EMA bold) · dots: validation",
                                      xl, ImVec2(avail.x * 0.62f, big_h));
    L.smoothing = m_settings.smoothing;
    L.y_scale = m_settings.log_loss ? plot::ScaleKind::Log10 : plot::ScaleKind::Linear;
    add_run_series(L, v, m_loss, true);
    for (std::size_t i = 0; i < n; ++i) {
      if (m_hidden.count(v.runs[i]->id) || m_vy[i].empty()) continue;
      auto s = plot::xy(v.runs[i]->name + " (validation)", m_vx[i], m_vy[i], widgets::series_color(static_cast<int>(i)));
      s.markers = true;
      s.thickness = 1.2f;
      L.series.push_back(s);
    }
    L.legend = n <= 4;
    plot::line_plot(L);
    ImGui::SameLine(0, 14);
    ImGui::BeginGroup();
    const float side_w = ImGui::GetContentRegionAvail().x;
    const float side_h = (big_h - 8.0f) * 0.5f;
    plot::LinePlot T = plot::titled("tokens_per_s", "training_tokens_per_s", "Tokens per second",
                                      "",
                                      xl, ImVec2(side_w, side_h));
    T.smoothing = 0.9;
    T.legend = false;
    add_run_series(T, v, m_tps, true);
    plot::line_plot(T);
    ImGui::Dummy(ImVec2(0, 4));
    plot::LinePlot R = plot::titled("lr", "training_learning_rate", "Learning rate",
                                      "",
                                      xl, ImVec2(side_w, side_h));
    R.legend = false;
    add_run_series(R, v, m_lr, false);
    plot::line_plot(R);
    ImGui::EndGroup();

    ImGui::Dummy(ImVec2(0, 4));
    plot::LinePlot G = plot::titled("grad_norm", "training_grad_norm", "Gradient norm",
                                      "‖∇θ‖ before clipping (log scale)",
                                      xl, ImVec2(avail.x, small_h));
    G.y_scale = plot::ScaleKind::Log10;
    G.smoothing = m_settings.smoothing;
    G.legend = false;
    add_run_series(G, v, m_gn, true);
    plot::line_plot(G);
  }

  // One series of `ys` (by run, against m_xs) for each run on show, in the run's colour.
  void add_run_series(plot::LinePlot& p, const TrainingView& v, const std::vector<std::vector<double>>& ys,
                      bool smooth) const {
    for (std::size_t i = 0; i < v.runs.size(); ++i)
      if (!m_hidden.count(v.runs[i]->id))
        p.series.push_back(plot::xy(v.runs[i]->name, m_xs[i], ys[i], widgets::series_color(static_cast<int>(i)), smooth));
  }

  std::vector<std::string> m_known_dirs;
  bool m_synced = false;
  bool m_any_runs = false;  // the view last drawn had runs (fold_controls_when_narrow)
  int m_selected = 0;
  std::set<int> m_hidden;
  std::string m_download_error;  // why the last checkpoint download failed, "" when it did not
  std::vector<std::vector<double>> m_xs, m_loss, m_lr, m_gn, m_tps, m_vx, m_vy;
};

}  // namespace

std::unique_ptr<Panel> make_training_panel() { return std::make_unique<TrainingPanel>(); }

}  // namespace tttlab::gui
