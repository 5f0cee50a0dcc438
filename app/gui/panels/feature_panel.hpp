// app/gui/panels/feature_panel.hpp — the base of the panels that draw a lab feature.
//
// Threading: UI thread only (panel.hpp).
#pragma once

#include <functional>
#include <memory>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "gui/keys.hpp"
#include "gui/lab.hpp"
#include "gui/panels/panel.hpp"
#include "gui/panels/widgets.hpp"
#include "lab/features.hpp"
#include "lab/state/json_fields.hpp"

namespace tttlab::gui {

// The panel of a lab feature (lab/features.hpp): its id, name and summary are the feature's, and its
// settings are the feature's settings type (app/lab/<feature>/<feature>_settings.hpp), which reads,
// writes and syncs them. `Settings` provides static defaults() and from(const FieldReader&) (throws
// StateError), to_json() and commands(). The panel draws the feature's view, the Snapshot's field
// `kView`: nothing until the engine has published one, then its controls column beside the view
// (widgets::controls_and_view). A panel file keeps its drawing, its classroom controls and its
// shortcuts, and edits `m_settings`.
template <class Settings, class View, std::shared_ptr<const View> Snapshot::*kView>
class FeaturePanel : public Panel {
 public:
  // `controls`: what classroom mode can hide on this panel. `rerun_help`: when the panel has a job to
  // run again on F5 (rerun()), what the shortcut help says F5 does.
  FeaturePanel(const char* feature_id, std::vector<ClassroomControl> controls,
               const char* rerun_help = nullptr)
      : m_feature(lab::feature(feature_id)),
        m_controls(std::move(controls)),
        m_rerun_help(rerun_help) {}

  const char* id() const final { return m_feature.id; }
  const char* name() const final { return m_feature.name; }
  const char* summary() const final { return m_feature.summary; }
  std::vector<ClassroomControl> classroom_controls() const final { return m_controls; }

  void sync(CommandSink& sink) override {
    for (Command& c : m_settings.commands()) sink.post(std::move(c));
  }
  nlohmann::json save_state() const final { return saved().to_json(); }
  std::function<void()> parse_state(const nlohmann::json& settings, const std::string& path) final {
    Settings s = Settings::from(FieldReader(settings, path));
    return [this, s = std::move(s)] {
      m_settings = s;
      loaded();
    };
  }

  void draw(const Snapshot& snap, CommandSink& sink) final {
    const View* v = (snap.*kView).get();
    if (!v) return;
    update(*v);
    widgets::controls_and_view([&] { draw_controls(*v, snap, sink); },
                               [&] { draw_view(*v, snap, sink); }, fold_controls_when_narrow());
  }

  // A panel with more shortcuts extends these two (F5 stays first in the help).
  void shortcuts(const Snapshot& /*snapshot*/, CommandSink& sink) override {
    if (!m_rerun_help || !key_pressed(Key::F5, false)) return;
    if (std::optional<Command> c = rerun()) sink.post(std::move(*c));
  }
  std::vector<ShortcutHelp> shortcut_help() const override {
    if (!m_rerun_help) return {};
    return {{"F5", m_rerun_help}};
  }

 protected:
  // What save_state writes: by default the settings; a panel puts in what it follows from the engine
  // (where playback stands, the runs open).
  virtual Settings saved() const { return m_settings; }
  // Called after a state file's settings were applied, to derive the panel's own state from them. It
  // runs inside the applier of parse_state, so it must not fail.
  virtual void loaded() {}
  // The command F5 posts (for a panel constructed with `rerun_help`).
  virtual std::optional<Command> rerun() const { return std::nullopt; }
  // Called each frame the panel is drawn, before its controls and view: for view state that follows
  // the engine (playback, the selection of a new result).
  virtual void update(const View& /*view*/) {}
  // Whether the controls start folded where the panel is narrow (widgets::controls_and_view).
  virtual bool fold_controls_when_narrow() const { return true; }
  virtual void draw_controls(const View& view, const Snapshot& snap, CommandSink& sink) = 0;
  virtual void draw_view(const View& view, const Snapshot& snap, CommandSink& sink) = 0;

  Settings m_settings = Settings::defaults();

 private:
  const lab::Feature& m_feature;
  std::vector<ClassroomControl> m_controls;
  const char* m_rerun_help;
};

}  // namespace tttlab::gui
