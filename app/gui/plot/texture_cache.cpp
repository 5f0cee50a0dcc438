#include "gui/plot/texture_cache.hpp"

#include <unordered_map>

namespace tttlab::gui::plot {
namespace {

struct Entry {
  std::uint64_t key = 0;
  ImTextureID tex = nullptr;
  int last_frame = 0;
};

TextureApi g_api;
std::unordered_map<ImGuiID, Entry> g_cache;
constexpr int kEvictAfterFrames = 600;

}  // namespace

void set_texture_api(TextureApi api) { g_api = std::move(api); }
bool textures_available() { return static_cast<bool>(g_api.create); }

ImTextureID cached_texture(ImGuiID plot, std::uint64_t key, int w, int h,
                           const std::function<void(std::vector<unsigned char>&)>& fill) {
  if (!g_api.create) return nullptr;
  const int frame = ImGui::GetFrameCount();
  for (auto it = g_cache.begin(); it != g_cache.end();) {
    if (frame - it->second.last_frame > kEvictAfterFrames) {
      g_api.destroy(it->second.tex);
      it = g_cache.erase(it);
    } else {
      ++it;
    }
  }
  Entry& e = g_cache[plot];
  e.last_frame = frame;
  if (e.tex && e.key == key) return e.tex;
  if (e.tex) g_api.destroy(e.tex);
  std::vector<unsigned char> rgba(static_cast<std::size_t>(w) * h * 4);
  fill(rgba);
  e.tex = g_api.create(w, h, rgba.data());
  e.key = key;
  return e.tex;
}

void release_textures() {
  if (g_api.destroy)
    for (auto& [id, e] : g_cache) g_api.destroy(e.tex);
  g_cache.clear();
}

}  // namespace tttlab::gui::plot
