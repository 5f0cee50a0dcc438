// web/test_hooks.hpp — where the browser test may click: Dear ImGui's test-engine hooks (test_hooks.cpp).
#pragma once

namespace tttlab::web {

// Turns the hooks on (the page's address has ?test=1): from the first frame on, every item Dear ImGui
// lays out is recorded with its place on the page, and the page's JavaScript gets
// Module.tttlabTest.find(label) (test_hooks.cpp says what it returns). Without this call the hooks
// record nothing.
void enable_test_hooks();

}  // namespace tttlab::web
