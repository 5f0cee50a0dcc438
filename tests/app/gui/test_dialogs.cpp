// The app's modal dialogs drawn headless (dialogs.hpp): the Open dialog's field replaces the path it
// opens with, an error caused by pressing Enter stays up until a fresh Enter dismisses it, and the Save
// dialog asks before it replaces a file.
#include <GLFW/glfw3.h>  // key codes only: the GLFW backend indexes io.KeysDown by them
#include <gtest/gtest.h>
#include <imgui.h>

#include <filesystem>
#include <fstream>
#include <iterator>
#include <optional>
#include <string>

#include "gui/dialogs.hpp"
#include "gui/fonts.hpp"
#include "app/gui/headless_imgui.hpp"
#include "core/io/temp_dir.hpp"

namespace tttlab::gui {
namespace {

TEST(FreshKeyPress, IgnoresTheKeyHeldWhenTheModalAppears) {
  FreshKeyPress k;
  EXPECT_FALSE(k.update(true, true)) << "the press that opened the modal";
  EXPECT_FALSE(k.update(false, true)) << "still held";
  EXPECT_FALSE(k.update(false, false));
  EXPECT_TRUE(k.update(false, true)) << "a fresh press";
  EXPECT_FALSE(k.update(false, true)) << "one press, one confirmation";
}

TEST(FreshKeyPress, TakesTheFirstPressWhenTheKeyWasUp) {
  FreshKeyPress k;
  EXPECT_FALSE(k.update(true, false));
  EXPECT_TRUE(k.update(false, true));
}

class Dialogs : public ::testing::Test {
 protected:
  void SetUp() override {
    testing::start_headless_imgui(ImVec2(1280, 720));
    ImGuiIO& io = ImGui::GetIO();
    io.KeyMap[ImGuiKey_Enter] = GLFW_KEY_ENTER;
    io.KeyMap[ImGuiKey_Escape] = GLFW_KEY_ESCAPE;
  }
  void TearDown() override { ImGui::DestroyContext(); }

  // One frame as the app draws it: the Open dialog; a confirmed path that cannot be opened shows the
  // error in the same frame, as App::open_state does. Returns the confirmed path.
  std::optional<std::string> frame() {
    ImGui::NewFrame();
    auto path = open.draw("Open a .tttlab state file:", "Open");
    dialog_open = ImGui::IsPopupOpen("Open state");
    if (path) error.show("Could not open the state file", *path + ": no such file");
    error.draw();
    error_open = ImGui::IsPopupOpen("##error");
    ImGui::Render();
    return path;
  }
  void set_enter(bool down) { ImGui::GetIO().KeysDown[GLFW_KEY_ENTER] = down; }

  PathDialog open{"Open state", BrowserMode::OpenFile, {".tttlab"}};
  ErrorDialog error;
  bool error_open = false;
  bool dialog_open = false;
};

TEST_F(Dialogs, TypingReplacesThePathTheDialogOpensWith) {
  testing::TempDir tmp;
  std::ofstream(tmp / "lesson.tttlab") << "{}";
  std::ofstream(tmp / "mine.tttlab") << "{}";
  open.open((tmp / "lesson.tttlab").string());
  frame();  // appears and asks for the keyboard
  frame();  // the field takes it
  ImGui::GetIO().AddInputCharactersUTF8("mine.tttlab");
  frame();
  set_enter(true);
  const auto path = frame();
  set_enter(false);
  ASSERT_TRUE(path);
  EXPECT_EQ(std::filesystem::path(*path), tmp / "mine.tttlab") << "a name typed is in the folder on show";
}

// A file that is not there is said in the browser; the dialog stays open.
TEST_F(Dialogs, AMissingFileIsAnErrorInTheBrowser) {
  testing::TempDir tmp;
  open.open((tmp / "x.tttlab").string());
  frame();
  frame();
  ImGui::GetIO().AddInputCharactersUTF8("missing.tttlab");
  frame();
  set_enter(true);
  EXPECT_FALSE(frame());
  set_enter(false);
  frame();
  EXPECT_TRUE(dialog_open);
  EXPECT_FALSE(error_open);
}

TEST_F(Dialogs, AnErrorFromEnterStaysUntilAFreshEnter) {
  testing::TempDir tmp;
  std::ofstream(tmp / "broken.tttlab") << "not a state file";
  open.open((tmp / "x.tttlab").string());
  frame();
  frame();
  ImGui::GetIO().AddInputCharactersUTF8("broken.tttlab");
  frame();
  set_enter(true);
  ASSERT_TRUE(frame()) << "Enter confirms the path";
  EXPECT_TRUE(error_open) << "the error opens in the frame of the Enter that caused it";
  for (int i = 0; i < 40; ++i) frame();  // Enter held past the key-repeat delay
  EXPECT_TRUE(error_open) << "the held Enter must not dismiss the error";
  set_enter(false);
  frame();
  EXPECT_TRUE(error_open);
  set_enter(true);
  frame();
  set_enter(false);
  frame();
  EXPECT_FALSE(error_open) << "a fresh Enter dismisses it";
}

// Saving over a file asks first: Enter on an existing name leaves the dialog open with the question,
// and the first Escape withdraws only the question; the next one closes the dialog.
TEST_F(Dialogs, SavingOverAFileAsksBeforeReplacingIt) {
  testing::TempDir tmp;
  std::ofstream(tmp / "taken.tttlab") << "{}";
  PathDialog save{"Save state", BrowserMode::SaveFile, {".tttlab"}};
  bool save_open = false;
  std::string drawn;
  // What a frame draws, through ImGui's log into a file: the modal's End finishes the log (and a
  // buffer's text with it), while a file keeps what was written.
  const std::string log = (tmp / "drawn.txt").string();
  const auto save_frame = [&] {
    std::filesystem::remove(log);
    ImGui::NewFrame();
    ImGui::LogToFile(-1, log.c_str());
    auto path = save.draw("Save the panel settings and seeds to a .tttlab file:", "Save");
    ImGui::LogFinish();
    save_open = ImGui::IsPopupOpen("Save state");
    ImGui::Render();
    std::ifstream in(log);
    drawn.assign(std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>());
    return path;
  };
  const auto set_escape = [](bool down) { ImGui::GetIO().KeysDown[GLFW_KEY_ESCAPE] = down; };
  save.open((tmp / "view.tttlab").string());
  save_frame();
  save_frame();
  ImGui::GetIO().AddInputCharactersUTF8("taken");
  save_frame();
  set_enter(true);
  EXPECT_FALSE(save_frame()) << "an existing file is not saved over at once";
  set_enter(false);
  save_frame();
  EXPECT_TRUE(save_open);
  EXPECT_NE(drawn.find("'taken.tttlab' already exists"), std::string::npos) << drawn;
  EXPECT_NE(drawn.find("Replace it?"), std::string::npos) << drawn;
  set_escape(true);
  save_frame();
  set_escape(false);
  save_frame();
  EXPECT_TRUE(save_open) << "Escape withdraws the question, not the dialog";
  EXPECT_EQ(drawn.find("Replace it?"), std::string::npos) << drawn;
  set_escape(true);
  save_frame();
  set_escape(false);
  save_frame();
  EXPECT_FALSE(save_open);
}

}  // namespace
}  // namespace tttlab::gui
