// Shipped models that arrive after the lab has opened (late_resources.hpp: in the browser, the models only
// some lessons use are a second download). A model asked for before it arrived is waited for on the
// engine's side and then loaded, the library lists the newcomers, and a download that failed is said
// in the error instead of "not found".
#include <gtest/gtest.h>

#include <chrono>
#include <cstdlib>
#include <filesystem>
#include <optional>
#include <string>
#include <thread>

#include "core/io/temp_dir.hpp"
#include "lab/engine/late_resources.hpp"
#include "lab/engine/resources.hpp"
#include "lab/models/model_library.hpp"

namespace tttlab::lab {
namespace {

namespace fs = std::filesystem;
using namespace std::chrono_literals;

const fs::path kSourceModel = fs::path(TTTLAB_SOURCE_DIR) / "assets" / "models" / "long-ttt-linear-t";

// TTTLAB_HOME pointed at a folder of the test's own for as long as it lives, then restored, so that
// the names below are found there and nowhere else.
class HomeAt {
 public:
  explicit HomeAt(const fs::path& root) {
    if (const char* h = std::getenv("TTTLAB_HOME")) m_old = h;
    setenv("TTTLAB_HOME", root.c_str(), 1);
  }
  ~HomeAt() {
    if (m_old)
      setenv("TTTLAB_HOME", m_old->c_str(), 1);
    else
      unsetenv("TTTLAB_HOME");
    late_resources_settled();  // nothing awaited after the test
  }

 private:
  std::optional<std::string> m_old;
};

bool lists(ModelLibrary& lib, const std::string& id) {
  for (const auto& m : lib.view()->models)
    if (m.id == id) return true;
  return false;
}

TEST(LateResources, AModelAskedForBeforeItArrivedIsWaitedForThenLoadedAndListed) {
  testing::TempDir root;
  HomeAt home(root.path());
  const fs::path models = root / "assets" / "models";
  fs::create_directories(models);
  expect_late_resources();
  ModelLibrary lib;
  EXPECT_FALSE(lists(lib, "shipped:late-a"));

  // The engine's side asks for it first; the files land while it waits.
  std::string error;
  long params = 0;
  std::thread engine([&] {
    try {
      params = lib.get("shipped:late-a")->config().hidden_size;
    } catch (const std::exception& e) {
      error = e.what();
    }
  });
  std::this_thread::sleep_for(100ms);
  fs::copy(kSourceModel, models / "late-a");
  fs::copy(kSourceModel, models / "late-b");
  late_resources_settled();
  engine.join();
  EXPECT_EQ(error, "");
  EXPECT_GT(params, 0);
  // The one nobody asked for yet is listed too.
  EXPECT_TRUE(lists(lib, "shipped:late-a"));
  EXPECT_TRUE(lists(lib, "shipped:late-b"));
}

TEST(LateResources, AFailedDownloadIsSaidInsteadOfNotFound) {
  testing::TempDir root;
  HomeAt home(root.path());
  expect_late_resources();
  late_resources_settled("HTTP 404 for late.data");
  ModelLibrary lib;
  try {
    lib.get("shipped:late-a");
    FAIL() << "a model that never arrived was loaded";
  } catch (const std::runtime_error& e) {
    const std::string what = e.what();
    EXPECT_NE(what.find("assets/models/late-a"), std::string::npos) << what;
    EXPECT_NE(what.find("could not be downloaded: HTTP 404 for late.data"), std::string::npos) << what;
  }
  try {
    shipped_run_checkpoints(std::string(kShippedRunPrefix) + "late-run");
    FAIL() << "a run that never arrived was listed";
  } catch (const std::runtime_error& e) {
    EXPECT_NE(std::string(e.what()).find("could not be downloaded"), std::string::npos) << e.what();
  }
}

TEST(LateResources, WithNothingAwaitedAMissingModelIsNotFoundAtOnce) {
  testing::TempDir root;
  HomeAt home(root.path());
  ModelLibrary lib;
  const auto start = std::chrono::steady_clock::now();
  try {
    lib.get("shipped:late-a");
    FAIL() << "a missing model was loaded";
  } catch (const std::runtime_error& e) {
    EXPECT_NE(std::string(e.what()).find("was not found (looked in"), std::string::npos) << e.what();
  }
  // Not the minutes a late file is waited for.
  EXPECT_LT(std::chrono::steady_clock::now() - start, 30s);
}

}  // namespace
}  // namespace tttlab::lab
