// The Latency lab's panel state: its settings round-trip through a state file, and a bad setting is
// refused with the field's name (nothing changes).
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>

#include "gui/lab.hpp"
#include "gui/panels/panel.hpp"
#include "lab/state/json_fields.hpp"

namespace tttlab::gui {
namespace {

std::unique_ptr<Panel> latency_panel() {
  for (auto& p : make_panels())
    if (std::string(p->id()) == "latency") return std::move(p);
  return nullptr;
}

TEST(LatencyPanel, SettingsRoundTripAndBadOnesAreRefused) {
  auto p = latency_panel();
  ASSERT_TRUE(p) << "the latency panel is not registered";
  const nlohmann::json saved = p->save_state();
  EXPECT_EQ(saved["layers"].size(), 5u);
  EXPECT_EQ(saved["max_context"], 2048);
  p->parse_state(saved, "panels.latency")();
  EXPECT_EQ(p->save_state(), saved);
  nlohmann::json changed = saved;
  changed["layers"] = {"ttt-linear", "softmax-attention"};
  changed["max_context"] = 1024;
  changed["repeats"] = 5;
  changed["view"]["log_time"] = false;
  changed["view"]["spread"] = false;
  p->parse_state(changed, "panels.latency")();
  EXPECT_EQ(p->save_state(), changed);
  nlohmann::json bad = saved;
  bad["decode_tokens"] = 100;
  try {
    (void)p->parse_state(bad, "panels.latency");
    ADD_FAILURE() << "decode_tokens = 100 was accepted";
  } catch (const StateError& e) {
    EXPECT_NE(std::string(e.what()).find("panels.latency.decode_tokens"), std::string::npos)
        << e.what();
  }
  EXPECT_EQ(p->save_state(), changed) << "a refused file must change nothing";
}

}  // namespace
}  // namespace tttlab::gui
