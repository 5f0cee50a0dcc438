// The file browser without drawing: listing, filtering by extension, folders first, hidden files,
// going up and into folders, a path that does not exist, and what each mode returns.
#include <gtest/gtest.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

#include "core/io/temp_dir.hpp"
#include "gui/file_browser.hpp"

namespace tttlab::gui {
namespace {

namespace fs = std::filesystem;
using testing::TempDir;

void touch(const fs::path& p, const std::string& text = "x") { std::ofstream(p) << text; }

std::vector<std::string> names(const BrowserListing& l) {
  std::vector<std::string> out;
  for (const auto& e : l.entries) out.push_back(e.folder ? e.name + "/" : e.name);
  return out;
}

// A folder with folders and files of several kinds, in an order the listing must not keep.
struct Tree {
  TempDir tmp;
  Tree() {
    fs::create_directories(tmp / "zeta");
    fs::create_directories(tmp / "Alpha");
    fs::create_directories(tmp / ".hidden-folder");
    touch(tmp / "b.tttlab");
    touch(tmp / "A.TTTLAB");
    touch(tmp / "notes.txt", "hello there");
    touch(tmp / ".secret.tttlab");
    touch(tmp / "zeta" / "inner.tttlab");
  }
};

TEST(FileBrowser, ListsFoldersFirstThenFilesInNameOrderWithoutCase) {
  Tree t;
  const BrowserListing l = list_folder(t.tmp.path(), {}, false);
  EXPECT_TRUE(l.error.empty()) << l.error;
  EXPECT_EQ(names(l),
            (std::vector<std::string>{"Alpha/", "zeta/", "A.TTTLAB", "b.tttlab", "notes.txt"}));
  EXPECT_EQ(l.entries[4].size, 11u);
}

TEST(FileBrowser, FiltersFilesByExtensionWithoutCaseButKeepsEveryFolder) {
  Tree t;
  const BrowserListing l = list_folder(t.tmp.path(), {".tttlab"}, false);
  EXPECT_EQ(names(l), (std::vector<std::string>{"Alpha/", "zeta/", "A.TTTLAB", "b.tttlab"}));
}

TEST(FileBrowser, HiddenEntriesOnlyWhenAskedFor) {
  Tree t;
  const BrowserListing l = list_folder(t.tmp.path(), {".tttlab"}, true);
  EXPECT_EQ(names(l), (std::vector<std::string>{".hidden-folder/", "Alpha/", "zeta/",
                                                ".secret.tttlab", "A.TTTLAB", "b.tttlab"}));
  BrowserState b(BrowserMode::OpenFile, {".tttlab"});
  b.start((t.tmp / "b.tttlab").string());
  EXPECT_EQ(b.listing().entries.size(), 4u);
  b.set_show_hidden(true);
  EXPECT_EQ(b.listing().entries.size(), 6u);
  EXPECT_EQ(b.field(), "b.tttlab") << "showing hidden files keeps what was typed";
}

TEST(FileBrowser, AFolderThatCannotBeListedSaysWhy) {
  Tree t;
  EXPECT_NE(list_folder(t.tmp / "nowhere", {}, false).error.find("does not exist"),
            std::string::npos);
  EXPECT_NE(list_folder(t.tmp / "notes.txt", {}, false).error.find("is a file, not a folder"),
            std::string::npos);
  if (::geteuid() != 0) {  // root reads any folder
    fs::create_directories(t.tmp / "locked");
    fs::permissions(t.tmp / "locked", fs::perms::none);
    const BrowserListing l = list_folder(t.tmp / "locked", {}, false);
    fs::permissions(t.tmp / "locked", fs::perms::owner_all);
    EXPECT_NE(l.error.find("cannot read the folder"), std::string::npos) << l.error;
  }
}

TEST(FileBrowser, GoesIntoFoldersAndUpAndKeepsItsFolderWhenAPathDoesNotExist) {
  Tree t;
  BrowserState b(BrowserMode::OpenFile, {".tttlab"});
  b.start((t.tmp / "b.tttlab").string());
  EXPECT_EQ(b.folder(), t.tmp.path());
  EXPECT_EQ(b.field(), "b.tttlab");
  ASSERT_TRUE(b.go("zeta"));  // relative: from the folder on show
  EXPECT_EQ(b.folder(), t.tmp / "zeta");
  EXPECT_EQ(names(b.listing()), (std::vector<std::string>{"inner.tttlab"}));
  EXPECT_FALSE(b.go("no-such-folder"));
  EXPECT_NE(b.error().find("does not exist"), std::string::npos) << b.error();
  EXPECT_EQ(b.folder(), t.tmp / "zeta") << "a failed move stays where it was";
  ASSERT_TRUE(b.up());
  EXPECT_EQ(b.folder(), t.tmp.path());
  EXPECT_TRUE(b.error().empty());
  // Typing a folder and confirming opens it; typing a missing file is an inline error.
  b.field() = "zeta";
  EXPECT_FALSE(b.confirm());
  EXPECT_EQ(b.folder(), t.tmp / "zeta");
  b.field() = "missing.tttlab";
  EXPECT_FALSE(b.confirm());
  EXPECT_NE(b.error().find("'missing.tttlab' does not exist"), std::string::npos) << b.error();
  // Up at the root goes nowhere.
  BrowserState r(BrowserMode::ChooseFolder, {});
  r.start("/");
  EXPECT_FALSE(r.up());
  EXPECT_EQ(r.folder(), fs::path("/"));
}

TEST(FileBrowser, TheKeyboardMovesThroughTheListingAndEnterOpensAFolderOrConfirmsAFile) {
  Tree t;
  BrowserState b(BrowserMode::OpenFile, {".tttlab"});
  b.start((t.tmp / "b.tttlab").string());
  b.move(1);  // from no selection: the first entry
  EXPECT_EQ(b.selected(), 0);
  EXPECT_EQ(b.field(), "Alpha");
  b.move(-5);
  EXPECT_EQ(b.selected(), 0) << "clamped at the top";
  b.move(1);
  EXPECT_EQ(b.field(), "zeta");
  EXPECT_FALSE(b.confirm()) << "Enter on a folder opens it";
  EXPECT_EQ(b.folder(), t.tmp / "zeta");
  b.move(1);
  const auto chosen = b.confirm();
  ASSERT_TRUE(chosen);
  EXPECT_EQ(fs::path(*chosen), t.tmp / "zeta" / "inner.tttlab");
  EXPECT_EQ(recent_folders().front(), t.tmp / "zeta") << "a confirmed file's folder is remembered";
  // A double click on a file confirms it.
  b.up();
  const auto clicked = b.activate(3);  // Alpha/, zeta/, A.TTTLAB, b.tttlab
  ASSERT_TRUE(clicked);
  EXPECT_EQ(fs::path(*clicked), t.tmp / "b.tttlab");
}

TEST(FileBrowser, SavingAddsTheExtensionAndNeedsAnExistingFolder) {
  Tree t;
  BrowserState b(BrowserMode::SaveFile, {".tttlab"});
  b.start((t.tmp / "view.tttlab").string());
  EXPECT_EQ(b.field(), "view.tttlab");
  b.field() = "mine";
  auto chosen = b.confirm();
  ASSERT_TRUE(chosen);
  EXPECT_EQ(fs::path(*chosen), t.tmp / "mine.tttlab");
  b.field() = "nowhere/mine.tttlab";
  EXPECT_FALSE(b.confirm());
  EXPECT_NE(b.error().find("does not exist"), std::string::npos) << b.error();
  // The name typed goes along into another folder.
  b.field() = "kept.tttlab";
  ASSERT_TRUE(b.go("Alpha"));
  EXPECT_EQ(b.field(), "kept.tttlab");
}

TEST(FileBrowser, ChoosingAFolderReturnsTheFolderOnShowOrTheOnePicked) {
  Tree t;
  BrowserState b(BrowserMode::ChooseFolder, {});
  b.start(t.tmp.path().string());
  EXPECT_EQ(b.folder(), t.tmp.path());
  b.select(1);  // zeta/
  auto chosen = b.confirm();
  ASSERT_TRUE(chosen);
  EXPECT_EQ(fs::path(*chosen), t.tmp / "zeta");
  b.field() = (t.tmp / "notes.txt").string();
  EXPECT_FALSE(b.confirm());
  EXPECT_NE(b.error().find("is a file"), std::string::npos) << b.error();
  b.field().clear();
  chosen = b.confirm();
  ASSERT_TRUE(chosen) << "an empty field chooses the folder on show";
  EXPECT_EQ(fs::path(*chosen), t.tmp.path());
}

TEST(FileBrowser, APathInsideTheWorkingDirectoryComesBackRelative) {
  Tree t;
  const fs::path old = fs::current_path();
  fs::current_path(t.tmp.path());
  BrowserState b(BrowserMode::OpenFile, {".tttlab"});
  b.start("");
  EXPECT_EQ(b.folder(), t.tmp.path());
  b.field() = "zeta/inner.tttlab";
  const auto chosen = b.confirm();
  fs::current_path(old);
  ASSERT_TRUE(chosen);
  EXPECT_EQ(*chosen, "zeta/inner.tttlab");
}

}  // namespace
}  // namespace tttlab::gui
