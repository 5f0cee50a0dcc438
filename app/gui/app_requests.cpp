#include "gui/app_requests.hpp"

namespace tttlab::gui {
namespace {
std::optional<std::filesystem::path> g_open;
}

void request_open_state(std::filesystem::path path) { g_open = std::move(path); }

std::optional<std::filesystem::path> take_open_state_request() {
  auto r = std::move(g_open);
  g_open.reset();
  return r;
}

}  // namespace tttlab::gui
