// app/gui/plot/texture_cache.hpp — GPU textures for large heat-maps.
//
// Drawing a 512 × 512 heat-map as rectangles costs ~1M vertices per frame; as one texture it costs
// four. Large maps arrive pooled (PooledMatrix), and each pooling result has a unique id, so a texture
// is built once per (plot, data, colour range) and reused until that changes. The renderer-specific
// part (creating a texture from RGBA pixels) is installed by the app (set_texture_api); without it —
// e.g. in headless tests — heat-maps fall back to rectangles. UI thread only.
#pragma once

#include <imgui.h>

#include <cstdint>
#include <functional>
#include <vector>

namespace tttlab::gui::plot {

struct TextureApi {
  // Creates a texture with nearest-neighbour sampling from w × h RGBA8 pixels (rows top-down).
  std::function<ImTextureID(int w, int h, const unsigned char* rgba)> create;
  std::function<void(ImTextureID)> destroy;
};

void set_texture_api(TextureApi api);
bool textures_available();

// The texture for `plot` showing content `key`; `fill` writes w·h·4 bytes when it must be (re)built.
// Textures not used for a few seconds of frames are released.
ImTextureID cached_texture(ImGuiID plot, std::uint64_t key, int w, int h,
                           const std::function<void(std::vector<unsigned char>&)>& fill);
// Releases every texture (before the renderer shuts down).
void release_textures();

}  // namespace tttlab::gui::plot
