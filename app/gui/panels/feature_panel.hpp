// app/gui/panels/feature_panel.hpp — the base of the panels that draw a lab feature.
//
// Threading: UI thread only (panel.hpp).
#pragma once

#include <functional>
#include <nlohmann/json.hpp>
#include <string>
#include <utility>

#include "gui/lab.hpp"
#include "gui/panels/panel.hpp"
#include "lab/features.hpp"
#include "lab/state/json_fields.hpp"

namespace tttlab::gui {

// The panel of a lab feature (lab/features.hpp): its id, name and summary are the feature's, and its
// settings are the feature's settings type (app/lab/<feature>/<feature>_settings.hpp), which reads,
// writes and syncs them. `Settings` provides static defaults() and from(const FieldReader&) (throws
// StateError), to_json() and commands(). A panel file keeps its drawing, its classroom controls and its
// shortcuts, and edits `m_settings`.
template <class Settings>
class FeaturePanel : public Panel {
 public:
  explicit FeaturePanel(const char* feature_id) : m_feature(lab::feature(feature_id)) {}

  const char* id() const final { return m_feature.id; }
  const char* name() const final { return m_feature.name; }
  const char* summary() const final { return m_feature.summary; }

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

 protected:
  // What save_state writes: by default the settings; a panel puts in what it follows from the engine
  // (where playback stands, the runs open).
  virtual Settings saved() const { return m_settings; }
  // Called after a state file's settings were applied, to derive the panel's own state from them. It
  // runs inside the applier of parse_state, so it must not fail.
  virtual void loaded() {}

  Settings m_settings = Settings::defaults();

 private:
  const lab::Feature& m_feature;
};

}  // namespace tttlab::gui
