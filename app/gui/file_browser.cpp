#include "gui/file_browser.hpp"

#include <imgui.h>
#include <imgui_internal.h>  // ClearActiveID: a field being edited shows a picked entry only once released

#include <algorithm>
#include <cctype>
#include <cstdio>
#include <cstdlib>
#include <nlohmann/json.hpp>

#include "gui/platform/host.hpp"
#include "gui/theme.hpp"
#include "lab/engine/resources.hpp"
#include "tttlab/io/atomic_file.hpp"

namespace tttlab::gui {

namespace fs = std::filesystem;

namespace {

// The list is a few hundred bytes; anything much larger is not one of ours.
constexpr std::uint64_t kMaxRecentFileBytes = 64 * 1024;

std::string lower(std::string s) {
  for (char& c : s) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  return s;
}

std::string quoted(const fs::path& p) {
  std::string q(1, '\'');  // appended, not "'" + …: GCC 12 warns (-Wrestrict) on that form
  q += p.string();
  q += '\'';
  return q;
}

bool name_less(const BrowserEntry& a, const BrowserEntry& b) {
  if (a.folder != b.folder) return a.folder;
  const std::string la = lower(a.name), lb = lower(b.name);
  return la != lb ? la < lb : a.name < b.name;
}

std::string size_text(std::uintmax_t bytes) {
  char buf[32];
  if (bytes < 1024)
    std::snprintf(buf, sizeof buf, "%ju B", bytes);
  else if (bytes < (1u << 20))
    std::snprintf(buf, sizeof buf, "%.1f KB", static_cast<double>(bytes) / 1024.0);
  else
    std::snprintf(buf, sizeof buf, "%.1f MB", static_cast<double>(bytes) / (1024.0 * 1024.0));
  return buf;
}

int resize_callback(ImGuiInputTextCallbackData* data) {
  if (data->EventFlag == ImGuiInputTextFlags_CallbackResize) {
    auto* str = static_cast<std::string*>(data->UserData);
    str->resize(static_cast<std::size_t>(data->BufTextLen));
    data->Buf = str->data();
  }
  return 0;
}

// One spelling per folder, so that a list holds each once: "a/./b/" and "a/b" are the same.
fs::path folder_key(const fs::path& folder) {
  fs::path f = folder.lexically_normal();
  if (f.has_relative_path() && !f.has_filename()) f = f.parent_path();  // a trailing separator
  return f;
}

fs::path home_folder() {
  const char* h = std::getenv("HOME");
  return h && *h ? fs::path(h) : fs::path("/");
}

}  // namespace

BrowserListing list_folder(const fs::path& folder, const std::vector<std::string>& extensions,
                           bool show_hidden) {
  BrowserListing l;
  l.folder = folder;
  std::error_code ec;
  const fs::file_status st = fs::status(folder, ec);
  if (!fs::exists(st)) {
    l.error = quoted(folder) + " does not exist";
    return l;
  }
  if (!fs::is_directory(st)) {
    l.error = quoted(folder) + " is a file, not a folder";
    return l;
  }
  fs::directory_iterator it(folder, ec);
  if (ec) {
    l.error = "cannot read the folder " + quoted(folder) + ": " + ec.message();
    return l;
  }
  std::vector<std::string> exts;
  for (const auto& e : extensions) exts.push_back(lower(e));
  for (; it != fs::directory_iterator(); it.increment(ec)) {
    if (ec) break;
    BrowserEntry e;
    e.name = it->path().filename().string();
    if (!show_hidden && !e.name.empty() && e.name[0] == '.') continue;
    std::error_code ec2;
    e.folder = it->is_directory(ec2);  // follows links: a link to a folder opens like one
    if (!e.folder) {
      if (!exts.empty() &&
          std::find(exts.begin(), exts.end(), lower(it->path().extension().string())) == exts.end())
        continue;
      e.size = it->file_size(ec2);
      if (ec2) e.size = 0;
    }
    l.entries.push_back(std::move(e));
  }
  if (ec) l.error = "cannot read all of the folder " + quoted(folder) + ": " + ec.message();
  std::sort(l.entries.begin(), l.entries.end(), name_less);
  return l;
}

// ---- recent folders ----------------------------------------------------------------------------------

fs::path RecentFolders::default_path() {
  return lab::user_config_file("TTTLAB_RECENT_FOLDERS", "recent_folders.json");
}

void RecentFolders::remember(const fs::path& folder) {
  const fs::path f = folder_key(folder);
  std::erase(m_folders, f);
  m_folders.insert(m_folders.begin(), f);
  if (m_folders.size() > kMaxRecentFolders) m_folders.resize(kMaxRecentFolders);
  if (m_file.empty()) return;
  std::string error;
  if (!save(&error) && !m_save_failed) {
    m_save_failed = true;
    std::fprintf(stderr, "tttlab gui: note: %s\n", error.c_str());
  }
}

void RecentFolders::use_file(const fs::path& file, std::string* error) {
  m_file = file;
  m_folders.clear();
  m_save_failed = false;
  std::error_code ec;
  if (!fs::exists(file, ec)) return;
  try {
    const nlohmann::json j = nlohmann::json::parse(read_file_text(file, kMaxRecentFileBytes));
    const auto it = j.is_object() ? j.find("recent_folders") : j.end();
    if (it == j.end() || !it->is_array()) throw std::runtime_error("expected { \"recent_folders\": [ … ] }");
    for (const auto& e : *it) {
      if (m_folders.size() == kMaxRecentFolders) break;
      if (!e.is_string()) continue;
      const fs::path f = folder_key(e.get<std::string>());
      // A relative path would be read against whatever folder the app starts in next time.
      if (!f.is_absolute() || !fs::is_directory(f, ec)) continue;
      if (std::find(m_folders.begin(), m_folders.end(), f) == m_folders.end()) m_folders.push_back(f);
    }
  } catch (const std::exception& e) {
    m_folders.clear();
    if (error) *error = file.string() + ": " + e.what() + " (starting with no recent folders)";
  }
}

bool RecentFolders::save(std::string* error) const {
  try {
    if (m_file.empty()) throw std::runtime_error("no file to save them in");
    nlohmann::json list = nlohmann::json::array();
    for (const auto& f : m_folders) list.push_back(f.string());
    std::error_code ec;
    if (const fs::path dir = m_file.parent_path(); !dir.empty() && !fs::is_directory(dir, ec)) {
      fs::create_directories(dir, ec);
      if (ec) throw std::runtime_error("cannot create the folder " + quoted(dir) + ": " + ec.message());
    }
    write_file_atomic(m_file, nlohmann::json{{"recent_folders", list}}.dump(2) + "\n");
    host::persist_sync();
    return true;
  } catch (const std::exception& e) {
    if (error) *error = std::string("the recent folders could not be saved: ") + e.what();
    return false;
  }
}

RecentFolders& recent_folders() {
  static RecentFolders list;
  return list;
}

// ---- the state ---------------------------------------------------------------------------------------

fs::path BrowserState::resolve(const std::string& typed) const {
  fs::path p(typed);
  if (!typed.empty() && typed[0] == '~' && (typed.size() == 1 || typed[1] == '/'))
    p = home_folder() / typed.substr(typed.size() > 1 ? 2 : 1);
  if (p.is_relative()) p = m_listing.folder / p;
  return p.lexically_normal();
}

std::string BrowserState::answer(const fs::path& p) {
  std::error_code ec;
  const fs::path cwd = fs::current_path(ec);
  if (!ec) {
    const fs::path rel = p.lexically_proximate(cwd);
    if (!rel.empty() && rel.is_relative() && *rel.begin() != "..") return rel.string();
  }
  return p.string();
}

void BrowserState::start(const std::string& path) {
  m_replace.reset();
  m_error.clear();
  m_selected = -1;
  m_field = path;
  std::error_code ec;
  fs::path cwd = fs::current_path(ec);
  if (ec) cwd = "/";
  m_listing.folder = cwd;  // resolve() starts from here
  const fs::path p = path.empty() ? cwd : resolve(path);
  const bool is_folder = fs::is_directory(p, ec);
  const fs::path folder = m_mode == BrowserMode::ChooseFolder && is_folder ? p : p.parent_path();
  if (path.empty() || !fs::is_directory(folder, ec) || !go(folder)) {
    m_error.clear();
    m_listing = list_folder(cwd, m_extensions, m_show_hidden);
    m_error = m_listing.error;
  }
  if (m_mode != BrowserMode::ChooseFolder && !path.empty() && !is_folder)
    m_field = p.filename().string();
}

bool BrowserState::go(const fs::path& folder) {
  const fs::path target = resolve(folder.string());
  BrowserListing l = list_folder(target, m_extensions, m_show_hidden);
  if (!l.error.empty() && l.entries.empty()) {
    m_error = l.error;
    return false;
  }
  m_error = l.error;  // a listing cut short is shown, with why
  m_listing = std::move(l);
  m_replace.reset();
  m_selected = -1;
  if (m_mode == BrowserMode::ChooseFolder)
    m_field = answer(m_listing.folder);
  else if (m_mode == BrowserMode::OpenFile)
    m_field.clear();
  else if (!m_field.empty())
    m_field = fs::path(m_field).filename().string();  // Save: the name typed goes along
  return true;
}

bool BrowserState::up() {
  const fs::path parent = m_listing.folder.parent_path();
  if (parent.empty() || parent == m_listing.folder) return false;
  return go(parent);
}

bool BrowserState::home() { return go(home_folder()); }

void BrowserState::set_show_hidden(bool on) {
  if (on == m_show_hidden) return;
  m_show_hidden = on;
  const std::string field = m_field;
  go(m_listing.folder);
  m_field = field;
}

void BrowserState::select(int index) {
  if (index < 0 || index >= static_cast<int>(m_listing.entries.size())) return;
  m_selected = index;
  m_replace.reset();
  const BrowserEntry& e = m_listing.entries[static_cast<std::size_t>(index)];
  m_field =
      m_mode == BrowserMode::ChooseFolder && e.folder ? answer(m_listing.folder / e.name) : e.name;
  m_error.clear();
}

void BrowserState::move(int delta) {
  const int n = static_cast<int>(m_listing.entries.size());
  if (n == 0) return;
  select(m_selected < 0 ? (delta > 0 ? 0 : n - 1) : std::clamp(m_selected + delta, 0, n - 1));
}

std::optional<std::string> BrowserState::activate(int index) {
  if (index < 0 || index >= static_cast<int>(m_listing.entries.size())) return std::nullopt;
  const BrowserEntry e = m_listing.entries[static_cast<std::size_t>(index)];
  if (e.folder) {
    go(m_listing.folder / e.name);
    return std::nullopt;
  }
  select(index);
  return confirm();
}

std::optional<std::string> BrowserState::confirm() {
  // An entry picked with the keyboard or the mouse and not edited since: Enter opens a folder.
  if (m_selected >= 0 && m_selected < static_cast<int>(m_listing.entries.size())) {
    const BrowserEntry& e = m_listing.entries[static_cast<std::size_t>(m_selected)];
    if (e.folder && m_mode != BrowserMode::ChooseFolder && m_field == e.name)
      return activate(m_selected);
  }
  m_error.clear();
  m_replace.reset();
  if (m_field.empty()) {
    if (m_mode == BrowserMode::ChooseFolder)
      m_field = answer(m_listing.folder);
    else {
      m_error = m_mode == BrowserMode::SaveFile ? "type a file name"
                                                : "pick a file from the list or type its path";
      return std::nullopt;
    }
  }
  fs::path p = resolve(m_field);
  std::error_code ec;
  const fs::file_status st = fs::status(p, ec);
  if (fs::is_directory(st)) {
    if (m_mode == BrowserMode::ChooseFolder) {
      recent_folders().remember(p);
      return answer(p);
    }
    go(p);
    return std::nullopt;
  }
  switch (m_mode) {
    case BrowserMode::OpenFile:
      if (!fs::exists(st)) {
        m_error = quoted(p.filename()) + " does not exist in " + quoted(p.parent_path());
        return std::nullopt;
      }
      break;
    case BrowserMode::SaveFile: {
      if (!m_extensions.empty() && p.extension().empty()) p += m_extensions.front();
      if (!fs::is_directory(p.parent_path(), ec)) {
        m_error = "the folder " + quoted(p.parent_path()) + " does not exist";
        return std::nullopt;
      }
      const fs::file_status target = fs::status(p, ec);  // the extension may have been added
      if (fs::is_directory(target)) {
        m_error = quoted(p.filename()) + " is a folder: type another name";
        return std::nullopt;
      }
      if (fs::exists(target)) {
        m_replace = p;
        return std::nullopt;
      }
      break;
    }
    case BrowserMode::ChooseFolder:
      m_error = fs::exists(st) ? quoted(p) + " is a file: choose the folder it is in"
                               : quoted(p) + " does not exist";
      return std::nullopt;
  }
  recent_folders().remember(p.parent_path());
  return answer(p);
}

std::optional<std::string> BrowserState::confirm_replace() {
  if (!m_replace) return std::nullopt;
  const fs::path p = *m_replace;
  m_replace.reset();
  recent_folders().remember(p.parent_path());
  return answer(p);
}

// ---- drawing -----------------------------------------------------------------------------------------

BrowserResult draw_browser(BrowserState& s, const char* confirm_label, bool appearing,
                           bool escape) {
  BrowserResult result;
  const float font = ImGui::GetFontSize();
  static bool refocus =
      false;  // the field shows a picked entry: it must let go of its own copy first

  // The toolbar: up, home, recent folders, hidden files; the filter on the right.
  if (ImGui::Button("Up")) s.up(), refocus = true;
  if (ImGui::IsItemHovered()) ImGui::SetTooltip("The parent folder (Backspace in an empty field)");
  ImGui::SameLine();
  if (ImGui::Button("Home")) s.home(), refocus = true;
  ImGui::SameLine();
  const auto& recent = recent_folders().folders();
  ImGui::SetNextItemWidth(font * 9.0f);
  if (ImGui::BeginCombo("##recent", "Recent folders")) {
    if (recent.empty()) ImGui::TextDisabled("none yet");
    for (const auto& f : recent)
      if (ImGui::Selectable(f.string().c_str())) s.go(f), refocus = true;
    ImGui::EndCombo();
  }
  ImGui::SameLine();
  // Where the app cannot see the user's own files (the browser), an opened file comes by upload: it
  // is copied into the app's files and the browser then shows it, ready to open.
  static std::optional<fs::path> uploaded;
  if (uploaded) s.start(uploaded->string()), uploaded.reset(), refocus = true;
  if (s.mode() == BrowserMode::OpenFile && host::can_request_user_file()) {
    if (ImGui::Button("Upload…")) host::request_user_file([](const fs::path& path) { uploaded = path; });
    if (ImGui::IsItemHovered()) ImGui::SetTooltip("Choose a file of your computer; it is copied into the app");
    ImGui::SameLine();
  }
  bool hidden = s.show_hidden();
  if (ImGui::Checkbox("hidden files", &hidden)) s.set_show_hidden(hidden), refocus = true;
  if (!s.extensions().empty()) {
    std::string filter = "showing";
    for (std::size_t i = 0; i < s.extensions().size(); ++i)
      filter += (i ? ", " : " ") + s.extensions()[i];
    filter += " files";
    ImGui::SameLine();
    ImGui::TextDisabled("%s", filter.c_str());
  }
  ImGui::TextDisabled("In %s", s.folder().string().c_str());

  // The path field: typing still works; Enter confirms (or opens a typed folder).
  if (appearing || refocus) {
    if (refocus && ImGui::GetActiveID() != 0) ImGui::ClearActiveID();
    ImGui::SetKeyboardFocusHere();
    refocus = false;
  }
  ImGui::SetNextItemWidth(-1);
  std::string& field = s.field();
  const bool enter =
      ImGui::InputText("##path", field.data(), field.capacity() + 1,
                       ImGuiInputTextFlags_CallbackResize | ImGuiInputTextFlags_EnterReturnsTrue |
                           ImGuiInputTextFlags_AutoSelectAll,
                       resize_callback, &field);
  if (ImGui::IsItemEdited()) s.cancel_replace();  // another name: the question no longer applies
  const bool field_active = ImGui::IsItemActive();
  bool keyboard_moved = false;
  if (field_active) {
    if (ImGui::IsKeyPressed(ImGui::GetKeyIndex(ImGuiKey_DownArrow)))
      s.move(1), keyboard_moved = true;
    if (ImGui::IsKeyPressed(ImGui::GetKeyIndex(ImGuiKey_UpArrow)))
      s.move(-1), keyboard_moved = true;
    if (field.empty() && ImGui::IsKeyPressed(ImGui::GetKeyIndex(ImGuiKey_Backspace)))
      s.up(), refocus = true;
  }
  if (keyboard_moved) refocus = true;

  // The listing: folders first; a click picks, a double click opens a folder or confirms a file.
  ImGui::BeginChild("##listing", ImVec2(0, font * 14.0f), true);
  const BrowserListing& l = s.listing();
  if (l.entries.empty() && l.error.empty())
    ImGui::TextDisabled("(nothing here%s)", s.extensions().empty() ? "" : " of these kinds");
  int activated = -1;
  for (int i = 0; i < static_cast<int>(l.entries.size()); ++i) {
    const BrowserEntry& e = l.entries[static_cast<std::size_t>(i)];
    ImGui::PushID(i);
    const std::string label = e.folder ? e.name + "/" : e.name;
    if (e.folder) ImGui::PushStyleColor(ImGuiCol_Text, colors::kAccent);
    if (ImGui::Selectable(label.c_str(), i == s.selected(),
                          ImGuiSelectableFlags_AllowDoubleClick)) {
      if (ImGui::IsMouseDoubleClicked(0))
        activated = i;
      else
        s.select(i);
      refocus = true;
    }
    if (e.folder) ImGui::PopStyleColor();
    if (keyboard_moved && i == s.selected()) ImGui::SetScrollHereY(0.5f);
    if (!e.folder) {
      ImGui::SameLine(ImGui::GetContentRegionMax().x - font * 5.0f);
      ImGui::TextDisabled("%s", size_text(e.size).c_str());
    }
    ImGui::PopID();
  }
  ImGui::EndChild();
  if (activated >= 0) result.chosen = s.activate(activated);

  if (!s.error().empty()) {
    ImGui::PushTextWrapPos(0.0f);
    ImGui::TextColored(ImGui::ColorConvertU32ToFloat4(colors::kError), "%s", s.error().c_str());
    ImGui::PopTextWrapPos();
  }
  const float button_w = font * 6.5f;
  if (const auto& existing = s.replace_pending()) {
    // Saving over a file asks first. Enter does not answer: the Enter that asked may still be down.
    ImGui::PushTextWrapPos(0.0f);
    ImGui::TextColored(ImGui::ColorConvertU32ToFloat4(colors::kWarning), "%s",
                       (quoted(existing->filename()) + " already exists in " +
                        quoted(existing->parent_path()) + ". Replace it?")
                           .c_str());
    ImGui::PopTextWrapPos();
    if (ImGui::Button("Replace", ImVec2(button_w, 0))) {
      result.chosen = s.confirm_replace();
      return result;
    }
    ImGui::SameLine();
    if (ImGui::Button("Cancel", ImVec2(button_w, 0)) || escape) {
      s.cancel_replace();
      refocus = true;
    }
    return result;
  }
  const bool confirmed =
      ImGui::Button(confirm_label, ImVec2(button_w, 0)) || (enter && !keyboard_moved);
  ImGui::SameLine();
  if (ImGui::Button("Cancel", ImVec2(button_w, 0)) || escape) {
    result.cancelled = true;
    result.chosen.reset();
    return result;
  }
  if (confirmed && !result.chosen) {
    result.chosen = s.confirm();
    refocus = !result.chosen;
  }
  return result;
}

}  // namespace tttlab::gui
