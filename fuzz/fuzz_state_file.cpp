// fuzz_state_file: any text read as a .tttlab state file (app/lab/state/state_file.hpp): the
// envelope (parse_state), then every feature's entry through the reader its panel and the lesson
// checker share (each feature's settings in app/lab/<feature>/, reached through lab/features.hpp),
// each on the entry of its own id.
//
// Contract checked: parse_state and every reader either succeed or throw StateError (one line naming
// the field); nothing else may escape, since the app shows exactly that error in a popup.
#include "fuzz_check.hpp"
#include "lab/features.hpp"
#include "lab/state/json_fields.hpp"
#include "lab/state/state_file.hpp"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  using namespace tttlab::lab;
  const auto parsed = tttlab::fuzz::parsed_or_refused<StateError>(
      [&] { return parse_state(tttlab::fuzz::as_text(data, size), "fuzz.tttlab"); });
  if (!parsed) return 0;
  const nlohmann::json& state = *parsed;
  // parse_state promises an object with the right format and, when present, an object "panels".
  FUZZ_CHECK(state.is_object());
  const nlohmann::json empty = nlohmann::json::object();
  const auto it = state.find("panels");
  const FieldReader panels(it == state.end() ? empty : *it, "panels");

  for (const Feature& f : features()) {
    try {
      (void)f.scene(panels.object(f.id), panels);
    } catch (const StateError&) {
    }
  }

  // What was read writes back: the state serialises (the app's Save) without throwing.
  (void)state.dump(2);
  return 0;
}
