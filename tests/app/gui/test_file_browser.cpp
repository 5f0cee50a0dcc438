// The file browser without drawing: listing, filtering by extension, folders first, hidden files,
// going up and into folders, a path that does not exist, what each mode returns, the question before
// a save replaces a file, and the recent folders kept in a file across runs.
#include <gtest/gtest.h>
#include <unistd.h>

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "core/io/temp_dir.hpp"
#include "gui/file_browser.hpp"

namespace tttlab::gui {
namespace {

namespace fs = std::filesystem;
using testing::TempDir;

void touch(const fs::path& p, const std::string& text = "x") { std::ofstream(p) << text; }

// "f3": appended, not "f" + …: GCC 12 warns (-Wrestrict) on that form.
std::string numbered(char prefix, int i) {
  std::string s(1, prefix);
  s += std::to_string(i);
  return s;
}

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
  EXPECT_EQ(recent_folders().folders().front(), t.tmp / "zeta") << "a confirmed file's folder is remembered";
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

TEST(FileBrowser, SavingOverAnExistingFileAsksFirst) {
  Tree t;
  BrowserState b(BrowserMode::SaveFile, {".tttlab"});
  b.start((t.tmp / "view.tttlab").string());
  b.field() = "b";  // the extension is added: b.tttlab exists
  EXPECT_FALSE(b.confirm()) << "an existing file is not returned at once";
  ASSERT_TRUE(b.replace_pending());
  EXPECT_EQ(*b.replace_pending(), t.tmp / "b.tttlab");
  EXPECT_TRUE(b.error().empty()) << "a question, not an error";
  b.cancel_replace();
  EXPECT_FALSE(b.replace_pending());
  EXPECT_EQ(b.field(), "b") << "Cancel keeps what was typed";
  EXPECT_FALSE(b.confirm_replace()) << "nothing to replace once cancelled";

  // A double click on an existing file asks too; "Replace" returns it.
  const auto clicked = b.activate(3);  // Alpha/, zeta/, A.TTTLAB, b.tttlab
  EXPECT_FALSE(clicked);
  ASSERT_TRUE(b.replace_pending());
  const auto replaced = b.confirm_replace();
  ASSERT_TRUE(replaced);
  EXPECT_EQ(fs::path(*replaced), t.tmp / "b.tttlab");
  EXPECT_FALSE(b.replace_pending());
  EXPECT_EQ(std::ifstream(t.tmp / "b.tttlab").get(), 'x') << "the browser only answers: it writes nothing";

  // Picking another entry or moving elsewhere withdraws the question.
  b.field() = "A.TTTLAB";
  EXPECT_FALSE(b.confirm());
  ASSERT_TRUE(b.replace_pending());
  b.select(1);
  EXPECT_FALSE(b.replace_pending());
  b.field() = "A.TTTLAB";
  EXPECT_FALSE(b.confirm());
  ASSERT_TRUE(b.go("zeta"));
  EXPECT_FALSE(b.replace_pending());

  // A new name is returned at once; a name that is a folder is not a file to save.
  b.up();
  b.field() = "new-view.tttlab";
  const auto fresh = b.confirm();
  ASSERT_TRUE(fresh);
  EXPECT_EQ(fs::path(*fresh), t.tmp / "new-view.tttlab");
  fs::create_directories(t.tmp / "dir.tttlab");
  b.field() = "dir";
  EXPECT_FALSE(b.confirm());
  EXPECT_FALSE(b.replace_pending());
  EXPECT_NE(b.error().find("is a folder"), std::string::npos) << b.error();

  // Opening an existing file never asks.
  BrowserState o(BrowserMode::OpenFile, {".tttlab"});
  o.start((t.tmp / "b.tttlab").string());
  EXPECT_TRUE(o.confirm());
  EXPECT_FALSE(o.replace_pending());
}

TEST(RecentFolders, NewestFirstEachOnceAndBounded) {
  Tree t;
  RecentFolders r;  // no file: this run only
  for (int i = 0; i < static_cast<int>(kMaxRecentFolders) + 3; ++i) {
    fs::create_directories(t.tmp / numbered('f', i));
    r.remember(t.tmp / numbered('f', i));
  }
  ASSERT_EQ(r.folders().size(), kMaxRecentFolders) << "the oldest are dropped";
  EXPECT_EQ(r.folders().front(), t.tmp / numbered('f', static_cast<int>(kMaxRecentFolders) + 2));
  EXPECT_EQ(r.folders().back(), t.tmp / "f3");
  r.remember(t.tmp / "f5" / "." / "");  // the same folder, written another way
  EXPECT_EQ(r.folders().size(), kMaxRecentFolders);
  EXPECT_EQ(r.folders().front(), t.tmp / "f5") << "a folder used again moves to the front";
  EXPECT_EQ(std::count(r.folders().begin(), r.folders().end(), t.tmp / "f5"), 1);
  std::string error;
  EXPECT_FALSE(r.save(&error)) << "no file in use";
  EXPECT_FALSE(error.empty());
}

TEST(RecentFolders, AreSavedAndReadBackDroppingFoldersThatAreGone) {
  Tree t;
  const fs::path file = t.tmp / "config" / "tttlab" / "recent_folders.json";  // its folder is created
  {
    RecentFolders r;
    std::string error;
    r.use_file(file, &error);
    EXPECT_TRUE(error.empty()) << "an absent file is an empty list: " << error;
    EXPECT_TRUE(r.folders().empty());
    r.remember(t.tmp / "Alpha");
    r.remember(t.tmp / "zeta");
    ASSERT_TRUE(fs::exists(file)) << "each change is saved";
  }
  RecentFolders again;
  std::string error;
  again.use_file(file, &error);
  EXPECT_TRUE(error.empty()) << error;
  EXPECT_EQ(again.folders(), (std::vector<fs::path>{t.tmp / "zeta", t.tmp / "Alpha"}));

  fs::remove_all(t.tmp / "zeta");
  RecentFolders later;
  later.use_file(file);
  EXPECT_EQ(later.folders(), (std::vector<fs::path>{t.tmp / "Alpha"})) << "a folder that is gone is dropped";

  // Written by hand: repeats, relative paths, files, other types and too many entries are left out.
  nlohmann::json list = nlohmann::json::array();
  list.push_back((t.tmp / "Alpha").string());
  list.push_back((t.tmp / "Alpha" / "").string());
  list.push_back("relative/folder");
  list.push_back((t.tmp / "notes.txt").string());
  list.push_back(42);
  for (int i = 0; i < 20; ++i) {
    fs::create_directories(t.tmp / numbered('g', i));
    list.push_back((t.tmp / numbered('g', i)).string());
  }
  std::ofstream(file) << nlohmann::json{{"recent_folders", list}}.dump();
  RecentFolders edited;
  edited.use_file(file, &error);
  EXPECT_TRUE(error.empty()) << error;
  ASSERT_EQ(edited.folders().size(), kMaxRecentFolders);
  EXPECT_EQ(edited.folders()[0], t.tmp / "Alpha");
  EXPECT_EQ(edited.folders()[1], t.tmp / "g0");
}

TEST(RecentFolders, ABrokenFileGivesAnEmptyListAndIsReplacedAtTheNextSave) {
  Tree t;
  const fs::path file = t.tmp / "recent_folders.json";
  for (const std::string& text : {std::string("{ not json"), std::string("[\"/tmp\"]"),
                                  std::string("{\"recent_folders\": \"/tmp\"}"), std::string(100 * 1024, ' ')}) {
    SCOPED_TRACE(text.substr(0, 30));
    std::ofstream(file, std::ios::trunc) << text;
    RecentFolders r;
    std::string error;
    r.use_file(file, &error);
    EXPECT_TRUE(r.folders().empty());
    EXPECT_NE(error.find("recent_folders.json"), std::string::npos) << "the message names the file: " << error;
    r.remember(t.tmp / "Alpha");
    RecentFolders back;
    std::string error2;
    back.use_file(file, &error2);
    EXPECT_TRUE(error2.empty()) << error2;
    EXPECT_EQ(back.folders(), (std::vector<fs::path>{t.tmp / "Alpha"}));
  }
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
