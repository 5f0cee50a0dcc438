// web/test_hooks.cpp — Dear ImGui's test-engine hooks, so that the browser test clicks where a student
// would. An immediate-mode UI has no page elements to find: only Dear ImGui knows, frame by frame, where
// each button or input box is. Built with IMGUI_ENABLE_TEST_ENGINE (cmake/TTTLabWeb.cmake), imgui.cpp
// calls ImGuiTestEngineHook_ItemAdd for every item it lays out (also those scrolled out of their window)
// and ImGuiTestEngineHook_ItemInfo with the label of each visible widget, but only while the context's
// TestEngineHookItems is set: enable_test_hooks() sets it, when the page's address has ?test=1.
//
// The page's JavaScript then has Module.tttlabTest.find(label, scope): the items of the last frame drawn
// whose label is `label` (a button's text, or an ID such as "##answer"), in the order they were laid out,
// and, when a scope is given, made inside it: scope lists what the code pushed with ImGui::PushID on the
// way to the item, outermost first, strings and numbers as pushed (["exercise", 0] for the first exercise
// card). Levels in between are allowed. The answer is
//   { "frame": N, "items": [ { "label", "window", "x", "y", "w", "h", "clip": { "x", "y", "w", "h" },
//                              "shown", "scroll", "scroll_max" } ] }
// x, y, w, h: the item on the page, in CSS pixels (what Input.dispatchMouseEvent takes); clip: the part of
// its window it may show in (an item outside it is scrolled away); shown: its centre is inside clip;
// scroll, scroll_max: its window's vertical scroll and the most it scrolls. Module.tttlabTest.frame():
// the number of the last frame laid out, to wait for the frames that follow an input event.
#include "test_hooks.hpp"

#include <emscripten.h>
#include <imgui.h>
#include <imgui_internal.h>

#include <nlohmann/json.hpp>

#include <algorithm>
#include <cstdlib>
#include <string>
#include <vector>

namespace {

struct Item {
  ImGuiID id = 0;
  std::vector<ImGuiID> ids;  // its window's ID stack when it was added; the hash of its label starts at the top
  ImRect rect;
  ImRect clip;
  const ImGuiWindow* window = nullptr;
  std::string label;  // from ItemInfo; empty for an item that was not visible or gives none
};

// The items of the frame being laid out, or of the last one drawn: JavaScript runs between frames.
std::vector<Item> g_items;
int g_frame = -1;

void arm(void*) {
  // The app makes its ImGui context in its first frame, after the page's saved files have loaded.
  if (ImGuiContext* ctx = ImGui::GetCurrentContext())
    ctx->TestEngineHookItems = true;
  else
    emscripten_async_call(arm, nullptr, 20);
}

// The canvas on the page (CSS pixels), to turn Dear ImGui's coordinates (the canvas's pixels) into the
// page's: they differ by the device pixel ratio and the canvas's place.
EM_JS(double, tttlab_test_canvas, (int what), {
  const r = Module['canvas'].getBoundingClientRect();
  return [r.left, r.top, r.width, r.height][what];
});

// The query goes to C++ as JSON, [label, scope]: a number of the scope stays a number (ImGui hashes
// strings and numbers differently).
EM_JS(void, tttlab_test_install, (), {
  Module['tttlabTest'] = {
    find: function(label, scope) {
      // The C++ side frees the copy.
      const r = JSON.parse(UTF8ToString(_tttlab_test_find(stringToNewUTF8(JSON.stringify([label, scope || []])))));
      if (r.error) throw new Error(r.error);
      return r;
    },
    frame: function() { return _tttlab_test_frame(); }
  };
});

// Whether the ID stack `ids` passes through each level of `scope` in turn: a level pushed as a string or
// a number is the hash of it seeded with the level below.
bool in_scope(const std::vector<ImGuiID>& ids, const nlohmann::json& scope) {
  std::size_t k = 0;
  for (std::size_t level = 1; level < ids.size() && k < scope.size(); ++level) {
    const nlohmann::json& part = scope[k];
    ImGuiID id = 0;
    if (part.is_number_integer()) {
      const int n = part.get<int>();
      id = ImHashData(&n, sizeof n, ids[level - 1]);
    } else {
      id = ImHashStr(part.get<std::string>().c_str(), 0, ids[level - 1]);
    }
    if (ids[level] == id) ++k;
  }
  return k == scope.size();
}

}  // namespace

// The hooks imgui.cpp calls (their declarations are in imgui_internal.h).
void ImGuiTestEngineHook_ItemAdd(ImGuiContext* ctx, const ImRect& bb, ImGuiID id) {
  if (ctx->FrameCount != g_frame) {
    g_items.clear();
    g_frame = ctx->FrameCount;
  }
  const ImGuiWindow* w = ctx->CurrentWindow;
  if (!w) return;
  Item item;
  item.id = id;
  item.ids.assign(w->IDStack.begin(), w->IDStack.end());
  item.rect = bb;
  item.clip = w->ClipRect;
  item.window = w;
  g_items.push_back(std::move(item));
}

void ImGuiTestEngineHook_ItemInfo(ImGuiContext*, ImGuiID id, const char* label, ImGuiItemStatusFlags) {
  // Told right after the item was added: look back a few items only.
  int looked = 0;
  for (auto it = g_items.rbegin(); it != g_items.rend() && looked < 8; ++it, ++looked)
    if (it->id == id) {
      it->label = label ? label : "";
      return;
    }
}

void ImGuiTestEngineHook_Log(ImGuiContext*, const char*, ...) {}

const char* ImGuiTestEngine_FindItemDebugLabel(ImGuiContext*, ImGuiID id) {
  for (const Item& item : g_items)
    if (item.id == id && !item.label.empty()) return item.label.c_str();
  return "";
}

// Module.tttlabTest.find's C++ side: `query` (JSON: [label, scope], the scope's levels strings or
// whole numbers) is a copy made by stringToNewUTF8, freed here. The answer stays valid until the next call.
extern "C" EMSCRIPTEN_KEEPALIVE const char* tttlab_test_find(char* query) {
  static std::string out;
  const nlohmann::json q = nlohmann::json::parse(query ? query : "", nullptr, /*allow_exceptions=*/false);
  std::free(query);
  if (!q.is_array() || q.size() != 2 || !q[0].is_string() || !q[1].is_array() ||
      !std::all_of(q[1].begin(), q[1].end(), [](const auto& p) { return p.is_string() || p.is_number_integer(); })) {
    out = R"({"error":"find(label, scope): a label and a list of strings and whole numbers"})";
    return out.c_str();
  }
  const std::string wanted = q[0].get<std::string>();
  const nlohmann::json& scope = q[1];
  // A context made anew (none is today) would start with its hooks off.
  if (ImGuiContext* ctx = ImGui::GetCurrentContext()) ctx->TestEngineHookItems = true;
  const double x0 = tttlab_test_canvas(0), y0 = tttlab_test_canvas(1);
  const float display_w = ImGui::GetCurrentContext() ? ImGui::GetIO().DisplaySize.x : 0.0f;
  const double scale = display_w > 0.0f ? tttlab_test_canvas(2) / display_w : 1.0;
  // x, y, w, h of a rectangle of the canvas, on the page.
  const auto on_page = [&](const ImRect& r) {
    return nlohmann::json{{"x", x0 + r.Min.x * scale}, {"y", y0 + r.Min.y * scale}, {"w", r.GetWidth() * scale},
                          {"h", r.GetHeight() * scale}};
  };
  nlohmann::json items = nlohmann::json::array();
  for (const Item& item : g_items) {
    if (item.ids.empty() || (item.label != wanted && ImHashStr(wanted.c_str(), 0, item.ids.back()) != item.id) ||
        !in_scope(item.ids, scope))
      continue;
    nlohmann::json j = on_page(item.rect);
    j["label"] = wanted;
    j["window"] = item.window->Name;
    j["clip"] = on_page(item.clip);
    j["shown"] = item.clip.Contains(item.rect.GetCenter());
    j["scroll"] = item.window->Scroll.y * scale;
    j["scroll_max"] = item.window->ScrollMax.y * scale;
    items.push_back(std::move(j));
  }
  out = nlohmann::json{{"frame", g_frame}, {"items", std::move(items)}}
            .dump(-1, ' ', false, nlohmann::json::error_handler_t::replace);
  return out.c_str();
}

extern "C" EMSCRIPTEN_KEEPALIVE int tttlab_test_frame() { return g_frame; }

namespace tttlab::web {

void enable_test_hooks() {
  tttlab_test_install();
  emscripten_async_call(arm, nullptr, 0);
}

}  // namespace tttlab::web
