// Hostile-tester findings for the desktop app: every setting a panel saves is read back (so that the
// unknown-key notes never name a real setting), the shipped lessons' scenes hold no unknown keys, and
// the PNG and CSV writers report a write that fails (a full disk) instead of "saved".
#include <gtest/gtest.h>
#include <signal.h>
#include <sys/resource.h>

#include <filesystem>
#include <nlohmann/json.hpp>

#include "core/io/temp_dir.hpp"
#include "course/classroom.hpp"
#include "lab/engine/resources.hpp"
#include "gui/notify.hpp"
#include "gui/panels/panel.hpp"
#include "gui/platform/window.hpp"
#include "gui/plot/plot_export.hpp"
#include "lab/state/json_fields.hpp"
#include "lab/state/state_file.hpp"
#include "gui/lab.hpp"

namespace tttlab::gui {
namespace {

namespace fs = std::filesystem;

TEST(LosesNothing, F17_EverySavedSettingIsReadBack) {
  for (auto& p : make_panels()) {
    SCOPED_TRACE(p->id());
    const nlohmann::json saved = p->save_state();
    KeyLog keys;
    p->parse_state(saved, std::string("panels.") + p->id())();
    EXPECT_EQ(keys.unknown(nlohmann::json{{"panels", {{p->id(), saved}}}}), std::vector<std::string>{});
  }
}

TEST(LosesNothing, F17_TheShippedScenesHoldNoUnknownKeys) {
  const auto dir = find_resource("lessons");
  ASSERT_TRUE(dir);
  auto panels = make_panels();
  int files = 0;
  for (const auto& e : fs::directory_iterator(*dir)) {
    if (e.path().extension() != ".tttlab") continue;
    SCOPED_TRACE(e.path().string());
    // What App::open_state reads.
    KeyLog keys;
    mark_envelope_keys(keys);
    const nlohmann::json doc = read_state_file(e.path());
    const FieldReader top(doc, "");
    const FieldReader ps = top.object("panels");
    for (auto& p : panels)
      if (ps.has(p->id())) p->parse_state(doc["panels"][p->id()], std::string("panels.") + p->id());
    top.string("active_panel", 64, "");
    classroom::from_json(top.object("classroom"));
    top.string("lesson", 128, "");
    top.string("compute", 16, "");
    EXPECT_EQ(keys.unknown(doc), std::vector<std::string>{});
    ++files;
  }
  EXPECT_GE(files, 3);
}

// Writes beyond `bytes` fail with EFBIG while it lives, the way writes fail on a full disk (ENOSPC):
// an image or table that does not fit must be reported, not left truncated and called saved.
class FileSizeLimit {
 public:
  explicit FileSizeLimit(rlim_t bytes) {
    m_old_signal = ::signal(SIGXFSZ, SIG_IGN);  // the failed write returns EFBIG instead of killing us
    ::getrlimit(RLIMIT_FSIZE, &m_old);
    rlimit l = m_old;
    l.rlim_cur = bytes;
    ::setrlimit(RLIMIT_FSIZE, &l);
  }
  ~FileSizeLimit() {
    ::setrlimit(RLIMIT_FSIZE, &m_old);
    ::signal(SIGXFSZ, m_old_signal);
  }

 private:
  rlimit m_old{};
  void (*m_old_signal)(int) = nullptr;
};

Image noise_image(int w, int h) {
  Image img;
  img.width = w;
  img.height = h;
  img.rgba.resize(static_cast<std::size_t>(w * h * 4));
  std::uint32_t x = 12345;  // fixed seed: incompressible bytes, so the PNG is large
  for (auto& b : img.rgba) {
    x = x * 1664525u + 1013904223u;
    b = static_cast<std::uint8_t>(x >> 24);
  }
  return img;
}

TEST(LosesNothing, F15_AScreenshotThatDoesNotFitIsAnError) {
  testing::TempDir dir;
  const fs::path png = dir / "shot.png";
  const Image img = noise_image(64, 64);  // about 16 KiB of PNG
  {
    FileSizeLimit limit(4096);
    EXPECT_THROW(write_png(png, img), std::runtime_error);
  }
  EXPECT_FALSE(fs::exists(png)) << "no truncated PNG is left behind";
  for (const auto& e : fs::directory_iterator(dir.path())) ADD_FAILURE() << "left over: " << e.path();
  write_png(png, img);
  EXPECT_GT(fs::file_size(png), 4096u);
}

TEST(LosesNothing, F15_SavingAPlotsDataThatDoesNotFitIsAnError) {
  testing::TempDir dir;
  plot::Exporter ex;
  ex.set_directory(dir.path());
  const std::string csv(64 * 1024, 'x');
  {
    FileSizeLimit limit(4096);
    EXPECT_FALSE(ex.save_text("loss", "csv", csv));
  }
  EXPECT_NE(last_notification().find("Could not save"), std::string::npos) << last_notification();
  EXPECT_TRUE(fs::is_empty(dir.path())) << "no truncated file is left behind";
  EXPECT_TRUE(ex.save_text("loss", "csv", csv));
}

}  // namespace
}  // namespace tttlab::gui
