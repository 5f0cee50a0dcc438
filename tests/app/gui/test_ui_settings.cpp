// The display settings (ui_settings.hpp): the window fits the monitor's work area, the UI scale walks
// its steps and stays in range, the file round-trips and a bad one falls back to the defaults; and the
// theme's colour roles follow the theme (theme.hpp). The desktop side of the platform layer keeps these
// files in its persistent folder and hands nothing to a browser (platform/host.hpp).
#include <gtest/gtest.h>
#include <imgui.h>

#include <cstdlib>
#include <fstream>
#include <optional>
#include <string>

#include "app/gui/headless_imgui.hpp"
#include "core/io/temp_dir.hpp"
#include "course/progress.hpp"
#include "gui/file_browser.hpp"
#include "gui/platform/host.hpp"
#include "gui/theme.hpp"
#include "gui/ui_settings.hpp"

namespace tttlab::gui {
namespace {

TEST(FitWindow, DefaultIsNinetyPercentOfASmallWorkAreaCentred) {
  const Rect area{0, 30, 1366, 738};  // a 1366 × 768 laptop less a 30 px panel
  const Rect r = default_window(area, 1.0f);
  EXPECT_EQ(r.width, 1229);
  EXPECT_EQ(r.height, 664);
  EXPECT_EQ(r.x, (1366 - 1229) / 2);
  EXPECT_EQ(r.y, 30 + (738 - 664) / 2);
}

TEST(FitWindow, DefaultIsCappedAtSixteenHundredByThousandTimesTheMonitorScale) {
  const Rect big{0, 0, 3840, 2160};
  EXPECT_EQ(default_window(big, 1.0f).width, 1600);
  EXPECT_EQ(default_window(big, 1.0f).height, 1000);
  EXPECT_EQ(default_window(big, 2.0f).width, 3200);
  EXPECT_EQ(default_window(big, 2.0f).height, 1944);  // 90 % of 2160 is less than 2000
}

TEST(FitWindow, ASavedPlacementThatNoLongerFitsIsClamped) {
  const Rect area{0, 0, 1280, 720};
  // Saved on a larger screen, far to the right: now as large as the area, at its origin.
  const Rect r = fit_window(area, 1600, 1000, true, 1900, 900);
  EXPECT_EQ(r.width, 1280);
  EXPECT_EQ(r.height, 720);
  EXPECT_EQ(r.x, 0);
  EXPECT_EQ(r.y, 0);
  // A size that fits keeps its place, moved back inside where it would hang over the edge.
  const Rect s = fit_window(area, 800, 600, true, 700, -50);
  EXPECT_EQ(s.width, 800);
  EXPECT_EQ(s.height, 600);
  EXPECT_EQ(s.x, 480);
  EXPECT_EQ(s.y, 0);
  // A second monitor's area (offset origin) is respected.
  const Rect t = fit_window(Rect{1920, 0, 1280, 1024}, 640, 480, true, 100, 100);
  EXPECT_EQ(t.x, 1920);
}

TEST(UiScale, WalksTheStepsAndStopsAtTheEnds) {
  EXPECT_FLOAT_EQ(step_ui_scale(1.0f, +1), 1.1f);
  EXPECT_FLOAT_EQ(step_ui_scale(1.0f, -1), 0.85f);
  EXPECT_FLOAT_EQ(step_ui_scale(1.2f, +1), 1.25f);  // between steps: the next one up
  EXPECT_FLOAT_EQ(step_ui_scale(kMaxUiScale, +1), kMaxUiScale);
  EXPECT_FLOAT_EQ(step_ui_scale(kMinUiScale, -1), kMinUiScale);
}

TEST(UiSettingsFile, RoundTripsAndRejectsBadValues) {
  testing::TempDir dir;
  const auto path = dir.path() / "sub" / "ui.json";
  UiSettings s;
  s.ui_scale = 1.5f;
  s.theme = Theme::Light;
  s.width = 1200;
  s.height = 700;
  s.x = 10;
  s.y = 20;
  s.has_position = true;
  std::string error;
  ASSERT_TRUE(s.save(path, &error)) << error;
  const UiSettings r = UiSettings::load(path, &error);
  EXPECT_TRUE(error.empty()) << error;
  EXPECT_FLOAT_EQ(r.ui_scale, 1.5f);
  EXPECT_EQ(r.theme, Theme::Light);
  EXPECT_EQ(r.width, 1200);
  EXPECT_EQ(r.height, 700);
  EXPECT_TRUE(r.has_position);
  EXPECT_EQ(r.x, 10);
  EXPECT_EQ(r.y, 20);

  // Out of range: clamped; a window without a size is not used.
  std::ofstream(path) << R"({"ui_scale": 9, "theme": "sepia", "window": {"width": -5, "height": 10}})";
  const UiSettings c = UiSettings::load(path, &error);
  EXPECT_FLOAT_EQ(c.ui_scale, kMaxUiScale);
  EXPECT_EQ(c.theme, Theme::Dark);
  EXPECT_EQ(c.width, 0);

  // Not JSON: the defaults, and a reason naming the file.
  std::ofstream(path) << "{ not json";
  error.clear();
  const UiSettings bad = UiSettings::load(path, &error);
  EXPECT_FLOAT_EQ(bad.ui_scale, 1.0f);
  EXPECT_NE(error.find(path.string()), std::string::npos) << error;

  // Missing: the defaults, silently.
  error.clear();
  const UiSettings missing = UiSettings::load(dir.path() / "none.json", &error);
  EXPECT_TRUE(error.empty());
  EXPECT_FLOAT_EQ(missing.ui_scale, 1.0f);
}

class ThemeRoles : public ::testing::Test {
 protected:
  void SetUp() override { testing::start_headless_imgui(ImVec2(1280, 720)); }
  void TearDown() override {
    apply_theme(1.0f, Theme::Dark);  // the next test starts from the default
    ImGui::DestroyContext();
  }
};

// Perceived lightness of an ImU32, 0 … 255.
double lightness(ImU32 c) {
  return 0.2126 * ((c >> IM_COL32_R_SHIFT) & 0xFF) + 0.7152 * ((c >> IM_COL32_G_SHIFT) & 0xFF) +
         0.0722 * ((c >> IM_COL32_B_SHIFT) & 0xFF);
}

TEST_F(ThemeRoles, TextAndPlotsFollowTheTheme) {
  apply_theme(1.0f, Theme::Dark);
  EXPECT_EQ(current_theme(), Theme::Dark);
  const ImU32 dark_text = colors::kText, dark_plot = colors::kPlotBg;
  EXPECT_GT(lightness(dark_text), lightness(dark_plot) + 100.0) << "light text on a dark plot";
  apply_theme(1.0f, Theme::Light);
  EXPECT_EQ(current_theme(), Theme::Light);
  const ImU32 light_text = colors::kText, light_plot = colors::kPlotBg;
  EXPECT_LT(lightness(light_text) + 100.0, lightness(light_plot)) << "dark text on a light plot";
  EXPECT_NE(dark_text, light_text);
  // ImGui's own text colour follows too, and so does the window background.
  EXPECT_LT(ImGui::GetStyle().Colors[ImGuiCol_Text].x, 0.3f);
  EXPECT_GT(clear_color().x, 0.8f);
}

TEST_F(ThemeRoles, ScaleMultipliesStyleSizes) {
  apply_theme(1.0f, Theme::Dark);
  const float pad = ImGui::GetStyle().FramePadding.x;
  apply_theme(1.5f, Theme::Dark);
  EXPECT_FLOAT_EQ(ImGui::GetStyle().FramePadding.x, pad * 1.5f);
}

// The settings, the recent folders and the course progress all live in the one persistent folder of
// the platform layer (in the browser, the IndexedDB-backed /persist), and it follows XDG_CONFIG_HOME.
TEST(PlatformHost, PersistentFolderHoldsTheUsersFiles) {
  const char* kVars[] = {"XDG_CONFIG_HOME", "HOME", "TTTLAB_UI_SETTINGS", "TTTLAB_RECENT_FOLDERS", "TTTLAB_PROGRESS"};
  std::optional<std::string> saved[std::size(kVars)];
  for (std::size_t i = 0; i < std::size(kVars); ++i) {
    if (const char* v = std::getenv(kVars[i])) saved[i] = v;
    ::unsetenv(kVars[i]);
  }
  ::setenv("XDG_CONFIG_HOME", "/xdg/config", 1);
  const std::filesystem::path dir = host::persistent_dir();
  EXPECT_EQ(dir, std::filesystem::path("/xdg/config/tttlab"));
  EXPECT_EQ(UiSettings::default_path(), dir / "ui.json");
  EXPECT_EQ(RecentFolders::default_path(), dir / "recent_folders.json");
  EXPECT_EQ(course::ProgressStore::default_path(), dir / "course-progress.json");
  ::unsetenv("XDG_CONFIG_HOME");
  ::setenv("HOME", "/home/student", 1);
  EXPECT_EQ(host::persistent_dir(), std::filesystem::path("/home/student/.config/tttlab"));
  EXPECT_EQ(UiSettings::default_path(), host::persistent_dir() / "ui.json");
  for (std::size_t i = 0; i < std::size(kVars); ++i) {
    if (saved[i])
      ::setenv(kVars[i], saved[i]->c_str(), 1);
    else
      ::unsetenv(kVars[i]);
  }
}

// On the desktop a written file already is where the user chose, and the file browser sees every
// file: no download, no picker (the callback never runs), nothing dropped without a window.
TEST(PlatformHost, DesktopNeedsNoDownloadsOrUploads) {
  testing::TempDir dir;
  const auto file = dir.path() / "plot.csv";
  std::ofstream(file) << "x,y\n1,2\n";
  EXPECT_FALSE(host::offer_download(file));
  EXPECT_TRUE(std::filesystem::exists(file));
  bool called = false;
  EXPECT_FALSE(host::request_user_file([&](const std::filesystem::path&) { called = true; }));
  EXPECT_FALSE(host::can_request_user_file());
  EXPECT_FALSE(called);
  EXPECT_TRUE(host::take_dropped_files().empty());
  EXPECT_FLOAT_EQ(host::device_pixel_ratio(), 1.0f);
}

}  // namespace
}  // namespace tttlab::gui
