// app/gui/lab.hpp — the GUI draws the lab (app/lab/, app/course/): their names are used in
// tttlab::gui as they are, without a qualifier on every snapshot view and command. The lab itself
// never includes a GUI header (tests/app/layering.cmake checks this).
#pragma once

namespace tttlab::lab::plot {}
namespace tttlab::course {}

namespace tttlab::gui {
using namespace tttlab::lab;
using namespace tttlab::course;
}  // namespace tttlab::gui

namespace tttlab::gui::plot {
using namespace tttlab::lab::plot;
}  // namespace tttlab::gui::plot
