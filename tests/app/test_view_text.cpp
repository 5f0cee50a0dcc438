// A student's own text for the stepper and the evolution: checked before it is read (missing, a folder,
// too large), held to the text rule (not binary), cut to what the view reads at a whole character, and
// saved in a state file, whose opening reads the file again and names it when it is gone.
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <stdexcept>
#include <string>

#include "core/io/temp_dir.hpp"
#include "lab/engine/data_source.hpp"
#include "lab/evolution/evolution_module.hpp"
#include "lab/evolution/evolution_settings.hpp"
#include "lab/inner_stepper/stepper_module.hpp"
#include "lab/inner_stepper/stepper_settings.hpp"
#include "lab/state/json_fields.hpp"
#include "lab/state/state_file.hpp"

namespace tttlab::lab {
namespace {

namespace fs = std::filesystem;
using testing::TempDir;

using tttlab::testing::write;

std::string refusal(const fs::path& p, std::size_t max_bytes = 512) {
  try {
    read_view_text(p.string(), max_bytes);
  } catch (const std::exception& e) {
    return e.what();
  }
  return "";
}

TEST(ViewText, ReadsAUtf8FileAndCutsItAtAWholeCharacter) {
  TempDir tmp;
  write(tmp / "mine.txt", "héllo wörld");
  const ViewText all = read_view_text((tmp / "mine.txt").string(), 512);
  EXPECT_EQ(all.text, "héllo wörld");
  EXPECT_FALSE(all.cut);
  EXPECT_EQ(all.file_bytes, 13u);
  // "h" + "é" (2 bytes): a cut after 2 bytes would split the é, so the view reads "h".
  const ViewText cut = read_view_text((tmp / "mine.txt").string(), 2);
  EXPECT_EQ(cut.text, "h");
  EXPECT_TRUE(cut.cut);
  EXPECT_EQ(read_view_text((tmp / "mine.txt").string(), 3).text, "hé");
}

TEST(ViewText, RefusesWhatCannotBeReadWithAMessageNamingTheFile) {
  TempDir tmp;
  const std::string missing = refusal(tmp / "gone.txt");
  EXPECT_NE(missing.find("gone.txt"), std::string::npos) << missing;
  EXPECT_NE(missing.find("does not exist"), std::string::npos) << missing;
  EXPECT_NE(refusal(tmp.path()).find("is a folder"), std::string::npos) << refusal(tmp.path());
  write(tmp / "empty.txt", "");
  EXPECT_NE(refusal(tmp / "empty.txt").find("is empty"), std::string::npos)
      << refusal(tmp / "empty.txt");
  std::string bin = "PK";
  for (int i = 0; i < 300; ++i) bin += static_cast<char>(i % 5 == 0 ? 0 : i);
  write(tmp / "archive.zip", bin);
  const std::string binary = refusal(tmp / "archive.zip");
  EXPECT_NE(binary.find("archive.zip"), std::string::npos) << binary;
  EXPECT_NE(binary.find("binary"), std::string::npos) << binary;
  write(tmp / "big.txt", std::string(kMaxViewTextFileBytes + 1, 'a'));
  const std::string big = refusal(tmp / "big.txt");
  EXPECT_NE(big.find("big.txt"), std::string::npos) << big;
  EXPECT_NE(big.find("too large"), std::string::npos) << big;
  write(tmp / "just-fits.txt", std::string(kMaxViewTextFileBytes, 'a'));
  EXPECT_EQ(refusal(tmp / "just-fits.txt"), "");
}

template <class Settings>
void round_trip_with_a_text_file(long max_tokens) {
  TempDir tmp;
  const std::string text(static_cast<std::size_t>(max_tokens) + 100, 'q');
  write(tmp / "essay.txt", text);
  Settings s = Settings::defaults();
  s.text_file = (tmp / "essay.txt").string();
  s.head.text = read_view_text(s.text_file, static_cast<std::size_t>(max_tokens)).text;
  // Through a state file on disk, as File → Save and Open do.
  write_state_file(tmp / "view.tttlab", make_state("x", {{"x", s.to_json()}}));
  const nlohmann::json state = read_state_file(tmp / "view.tttlab");
  const Settings back = Settings::from(FieldReader(state["panels"]["x"], "panels.x"));
  EXPECT_EQ(back.text_file, s.text_file);
  EXPECT_EQ(back.head.text, text.substr(0, static_cast<std::size_t>(max_tokens)));

  // Opening it again reads the file again: what it holds now is the text.
  write(tmp / "essay.txt", "changed since");
  EXPECT_EQ(Settings::from(FieldReader(state["panels"]["x"], "panels.x")).head.text,
            "changed since");

  // A file that is gone is an error naming the field and the file.
  fs::remove(tmp / "essay.txt");
  try {
    Settings::from(FieldReader(state["panels"]["x"], "panels.x"));
    ADD_FAILURE() << "a missing text file must be refused";
  } catch (const StateError& e) {
    const std::string m = e.what();
    EXPECT_NE(m.find("text_file"), std::string::npos) << m;
    EXPECT_NE(m.find("essay.txt"), std::string::npos) << m;
    EXPECT_NE(m.find("does not exist"), std::string::npos) << m;
  }

  // Without a file, nothing new is written and the saved text is the text.
  const Settings plain = Settings::defaults();
  EXPECT_FALSE(plain.to_json().contains("text_file"));
  EXPECT_EQ(Settings::from(FieldReader(plain.to_json(), "x")).head.text, plain.head.text);
}

TEST(ViewText, TheStepperSavesItsTextFileAndOpensItAgain) {
  round_trip_with_a_text_file<StepperPanelSettings>(StepperModule::limits().max_tokens);
}

TEST(ViewText, TheEvolutionSavesItsTextFileAndOpensItAgain) {
  round_trip_with_a_text_file<EvolutionPanelSettings>(EvolutionModule::limits().max_tokens);
}

}  // namespace
}  // namespace tttlab::lab
