// The Recall lab's panel state: its settings round-trip through a state file, the lesson's scene
// applies to it, and a bad list of pairs is refused with the field's name (nothing changes).
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>

#include "gui/panels/panel.hpp"
#include "lab/state/json_fields.hpp"
#include "gui/lab.hpp"

namespace tttlab::gui {
namespace {

std::unique_ptr<Panel> recall_panel() {
  for (auto& p : make_panels())
    if (std::string(p->id()) == "recall") return std::move(p);
  return nullptr;
}

TEST(RecallPanel, SettingsRoundTripAndBadOnesAreRefused) {
  auto p = recall_panel();
  ASSERT_TRUE(p) << "the recall panel is not registered";
  const nlohmann::json saved = p->save_state();
  EXPECT_EQ(saved["pairs"], nlohmann::json({4, 8, 16, 32, 64, 128}));
  p->parse_state(saved, "panels.recall")();
  EXPECT_EQ(p->save_state(), saved);
  nlohmann::json changed = saved;
  changed["width"] = 16;
  changed["pairs"] = {2, 16, 150};
  changed["map_memory"] = "ttt_mlp";
  changed["view"]["log_x"] = false;
  p->parse_state(changed, "panels.recall")();
  EXPECT_EQ(p->save_state(), changed);
  nlohmann::json bad = saved;
  bad["pairs"] = {4, 200};
  try {
    (void)p->parse_state(bad, "panels.recall");
    ADD_FAILURE() << "P = 200 was accepted";
  } catch (const StateError& e) {
    EXPECT_NE(std::string(e.what()).find("panels.recall.pairs[1]"), std::string::npos) << e.what();
  }
  EXPECT_EQ(p->save_state(), changed) << "a refused file must change nothing";
}

// The members plotted: today's five by default (an old file without the key opens so), any of the
// nine round-trip, and an unknown or repeated id is refused naming the field and the accepted ids.
TEST(RecallPanel, MembersPlottedRoundTripAndDefaults) {
  auto p = recall_panel();
  ASSERT_TRUE(p);
  const nlohmann::json saved = p->save_state();
  EXPECT_EQ(saved["view"]["members"],
            nlohmann::json({"ttt_linear", "ttt_mlp", "linear_attention", "softmax_attention", "mamba2"}));
  nlohmann::json old = saved;
  old["view"].erase("members");
  p->parse_state(old, "panels.recall")();
  EXPECT_EQ(p->save_state(), saved) << "a file without members opens with the first five";
  nlohmann::json changed = saved;
  changed["view"]["members"] = {"deltanet", "gated_deltanet", "titans", "lact", "softmax_attention"};
  changed["map_memory"] = "lact";
  p->parse_state(changed, "panels.recall")();
  EXPECT_EQ(p->save_state(), changed);
  for (const nlohmann::json& bad : {nlohmann::json({"deltanet", "lstm"}), nlohmann::json({"lact", "lact"}),
                                    nlohmann::json::array()}) {
    nlohmann::json j = saved;
    j["view"]["members"] = bad;
    try {
      (void)p->parse_state(j, "panels.recall");
      ADD_FAILURE() << bad.dump() << " was accepted";
    } catch (const StateError& e) {
      EXPECT_NE(std::string(e.what()).find("panels.recall.view"), std::string::npos) << e.what();
      if (bad.size() == 2 && bad[1] == "lstm") {
        EXPECT_NE(std::string(e.what()).find("ttt_linear, ttt_mlp"), std::string::npos) << e.what();
      }
    }
  }
  EXPECT_EQ(p->save_state(), changed) << "a refused file must change nothing";
}

}  // namespace
}  // namespace tttlab::gui
