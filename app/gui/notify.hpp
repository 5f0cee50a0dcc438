// app/gui/notify.hpp — short messages in the corner of the window ("Saved plot to …").
// UI thread only.
#pragma once

#include <string>

namespace tttlab::gui {

void notify(std::string message, bool error = false);
// Off: messages are only recorded (last_notification), not drawn; for screenshots.
void set_notifications_visible(bool visible);
// Draws the current notifications (call once per frame, after the main window).
void draw_notifications();
// The most recent message (for the status bar and for tests).
const std::string& last_notification();

}  // namespace tttlab::gui
