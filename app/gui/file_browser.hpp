// app/gui/file_browser.hpp — the app's file browser: a folder's listing (folders first, then the files
// the dialog is for), parent, home and recent folders, hidden files on request, and a path field that
// still takes a typed path. Used by File → Open / Save state and by every panel's prompt for a text, a
// checkpoint or a run directory. UI thread only.
//
// BrowserState is the browser without drawing (listing, filtering, sorting, moving around, what a
// confirmation returns), so it is tested with a temporary folder; draw_browser draws one and handles
// the mouse and the keyboard (Up/Down move through the listing, Enter opens a folder or confirms,
// Backspace in an empty field goes up, Escape cancels). Saving over an existing file asks first.
#pragma once

#include <cstdint>
#include <filesystem>
#include <optional>
#include <string>
#include <vector>

namespace tttlab::gui {

enum class BrowserMode {
  OpenFile,  // an existing file
  SaveFile,  // a file name in an existing folder; the first extension is added when none is typed
  ChooseFolder,  // an existing folder (a checkpoint folder, a run directory)
};

struct BrowserEntry {
  std::string name;
  bool folder = false;
  std::uintmax_t size = 0;  // files only
};

// One folder's listing: its folders, then its files whose extension is one of `extensions` (all
// files when it is empty; compared without case), each group in name order without case. Names that
// start with '.' only with `show_hidden`. `error` says why the folder cannot be listed (it does not
// exist, it is a file, it cannot be read); the entries are then empty.
struct BrowserListing {
  std::filesystem::path folder;
  std::vector<BrowserEntry> entries;
  std::string error;
};
BrowserListing list_folder(const std::filesystem::path& folder,
                           const std::vector<std::string>& extensions, bool show_hidden);

// The folders confirmed in a browser, newest first, each once, at most kMaxRecentFolders. An
// interactive window keeps them across runs in a small JSON file of the user's configuration,
// $XDG_CONFIG_HOME/tttlab/recent_folders.json ($TTTLAB_RECENT_FOLDERS names another file):
//
//   { "recent_folders": [ "/home/ana/course", "/home/ana/runs" ] }
//
// Screenshots, benchmarks and tests never name a file, so they neither read nor write it.
constexpr std::size_t kMaxRecentFolders = 8;
class RecentFolders {
 public:
  static std::filesystem::path default_path();

  const std::vector<std::filesystem::path>& folders() const { return m_folders; }
  // `folder` (absolute) goes to the front, an earlier place of it goes, and the oldest beyond
  // kMaxRecentFolders are dropped; then the list is saved when a file is in use (a failure is noted
  // on stderr once: a list that cannot be saved must not get in the way of the dialog).
  void remember(const std::filesystem::path& folder);
  // Reads `file` and saves there from now on. Absent: an empty list. Folders that no longer exist,
  // relative paths, repeats and entries past the limit are dropped. A file that cannot be used (not
  // JSON, too large, not this shape) gives an empty list, `error` says why, and the next save
  // replaces it.
  void use_file(const std::filesystem::path& file, std::string* error = nullptr);
  // Writes the list to the file in use, atomically, creating its folder; false and `error` on failure.
  bool save(std::string* error = nullptr) const;

 private:
  std::vector<std::filesystem::path> m_folders;
  std::filesystem::path m_file;  // empty: kept for this run only
  bool m_save_failed = false;
};
// The list every browser shares.
RecentFolders& recent_folders();

class BrowserState {
 public:
  BrowserState(BrowserMode mode, std::vector<std::string> extensions)
      : m_mode(mode), m_extensions(std::move(extensions)) {}

  // Starts at `path`: the field holds it, the listing shows its folder (the folder itself in
  // ChooseFolder mode), or the working directory when that does not exist.
  void start(const std::string& path);
  // Shows `folder` (relative: from the folder on show). False, with the reason in error(), when it
  // cannot be listed; the folder on show stays.
  bool go(const std::filesystem::path& folder);
  bool up();    // the parent folder; false at the root
  bool home();  // $HOME
  void set_show_hidden(bool on);

  // Keyboard and mouse on the listing. select: the entry becomes the field (its name; in ChooseFolder
  // mode a folder's path). move: the selection moves by `delta`, clamped.
  void select(int index);
  void move(int delta);
  // Enter or a double click on an entry: a folder is opened (returns nothing); a file is confirmed.
  std::optional<std::string> activate(int index);
  // Enter in the field or the confirm button: a typed folder is opened (except in ChooseFolder mode,
  // where it is the answer); otherwise the field is checked for the mode and returned, or error() says
  // what is wrong. The path returned is relative to the working directory where it lies inside it,
  // absolute otherwise. In SaveFile mode a file that exists is not returned at once: replace_pending()
  // names it, and the user answers with confirm_replace() or cancel_replace().
  std::optional<std::string> confirm();
  // The existing file a save would replace, while the browser asks about it (moving to another
  // folder, picking an entry or starting again withdraws the question).
  const std::optional<std::filesystem::path>& replace_pending() const { return m_replace; }
  std::optional<std::string> confirm_replace();  // "Replace": the file's path, as confirm() returns it
  void cancel_replace() { m_replace.reset(); }   // "Cancel": back to the browser

  BrowserMode mode() const { return m_mode; }
  const std::vector<std::string>& extensions() const { return m_extensions; }
  const std::filesystem::path& folder() const { return m_listing.folder; }
  const BrowserListing& listing() const { return m_listing; }
  std::string& field() { return m_field; }
  const std::string& error() const { return m_error; }
  int selected() const { return m_selected; }
  bool show_hidden() const { return m_show_hidden; }

 private:
  std::filesystem::path resolve(const std::string& typed) const;
  std::string answer(const std::filesystem::path& p);

  BrowserMode m_mode;
  std::vector<std::string> m_extensions;
  BrowserListing m_listing;
  std::string m_field, m_error;
  int m_selected = -1;
  bool m_show_hidden = false;
  std::optional<std::filesystem::path> m_replace;
};

struct BrowserResult {
  std::optional<std::string> chosen;  // confirmed: close the popup
  bool cancelled = false;             // Cancel or Escape: close the popup
};
// Draws `state` inside the current popup: the toolbar, the field, the listing, an inline error, and the
// confirm and Cancel buttons, or, when a save would replace a file, "Replace it?" with Replace and
// Cancel (Escape then cancels only the question). `appearing`: the popup's first frame (the field
// takes the keyboard).
BrowserResult draw_browser(BrowserState& state, const char* confirm_label, bool appearing,
                           bool escape);

}  // namespace tttlab::gui
