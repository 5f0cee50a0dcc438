// app/gui/keys.hpp — keyboard shortcuts for panels without including GLFW.
//
// Shortcuts act only when no text field has the keyboard (ImGui's WantTextInput), so typing a
// space into the input text never toggles playback. UI thread only.
#pragma once

namespace tttlab::gui {

enum class Key { Space, Left, Right, Up, Down, Home, End, PageUp, PageDown, Enter, Escape,
                 F1, F5, F11, F12, B, E, K, L, O, Q, R, S, N1, N2, N3, N4, N5, N6, N7, N8, N9,
                 N0, Equal, Minus, KeypadAdd, KeypadSubtract, Keypad0 };

bool key_pressed(Key k, bool repeat = true);
bool ctrl_down();
bool shift_down();
// True when a shortcut may fire (no text input active).
bool shortcuts_enabled();

}  // namespace tttlab::gui
