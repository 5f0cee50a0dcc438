// app/gui/panels/panel.hpp — the interface every panel implements, one panel per file, registered
// in one explicit list (registry.cpp).
//
// A panel is the UI half of a feature. Each frame it draws from the immutable Snapshot the UI took
// for that frame and turns the user's actions into Commands; it never computes engine results and
// never blocks. What it owns is view state only: the settings being edited (sent to the engine as
// commands), zoom/colour/smoothing choices, and the like. Its settings round-trip through .tttlab
// state files (save_state / parse_state), which is how a view is shared and reproduced.
//
// Threading: UI thread only.
#pragma once

#include <functional>
#include <memory>
#include <nlohmann/json_fwd.hpp>
#include <string>
#include <vector>

#include "course/classroom.hpp"
#include "lab/engine/command.hpp"
#include "lab/engine/snapshot.hpp"
#include "gui/lab.hpp"

namespace tttlab::gui {

struct ShortcutHelp {
  const char* keys;
  const char* action;
};

class Panel {
 public:
  virtual ~Panel() = default;

  virtual const char* id() const = 0;       // stable; used in state files and `--panel`
  virtual const char* name() const = 0;     // shown in the UI
  virtual const char* summary() const = 0;  // one line: sidebar tooltip and `--list-panels`

  // Sends the panel's current settings to the engine (at start-up and after a state file loads).
  virtual void sync(CommandSink& sink) = 0;
  // Called every frame for EVERY panel, shown or not, to follow engine state cheaply (e.g. where
  // playback is, so that saving a state file records it).
  virtual void observe(const Snapshot& /*snapshot*/) {}
  // Draws the panel into the current ImGui window (the app's content area).
  virtual void draw(const Snapshot& snapshot, CommandSink& sink) = 0;
  // Keyboard shortcuts; called while the panel is active and no text field has the keyboard.
  virtual void shortcuts(const Snapshot& /*snapshot*/, CommandSink& /*sink*/) {}
  virtual std::vector<ShortcutHelp> shortcut_help() const { return {}; }
  // The controls classroom mode can hide on this panel (classroom.hpp).
  virtual std::vector<ClassroomControl> classroom_controls() const { return {}; }

  virtual nlohmann::json save_state() const = 0;
  // Checks `settings` completely (throws StateError naming the field under `path`) and returns a
  // function that applies them, which cannot fail: loading is two-phase, so a bad file changes
  // nothing. Checking changes nothing either; only the returned function writes to the panel.
  virtual std::function<void()> parse_state(const nlohmann::json& settings, const std::string& path) = 0;
};

// Every panel of the app, in menu order (registry.cpp). Constructing panels needs no window, so
// `tttlab gui --list-panels` works anywhere.
std::vector<std::unique_ptr<Panel>> make_panels();

}  // namespace tttlab::gui
