// app/gui/app_requests.hpp — what a panel may ask of the app itself (UI thread only): open a .tttlab
// state file (the Lessons panel opens a lesson's view this way). The app takes the request at the end
// of the frame and handles it like File → Open, errors included.
#pragma once

#include <filesystem>
#include <optional>

namespace tttlab::gui {

void request_open_state(std::filesystem::path path);
std::optional<std::filesystem::path> take_open_state_request();

}  // namespace tttlab::gui
