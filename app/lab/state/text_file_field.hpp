// app/lab/state/text_file_field.hpp — the "text_file" entry of the views that read a student's own text
// (the stepper, the evolution): read after the head, it replaces the head's text with the file's first
// bytes (data_source.hpp, read_view_text), so a state file names the file and opening it reads the file
// again. A missing or unusable file is a StateError naming the field and the file. Written only when a
// file is chosen, so state files without one stay as they were.
#pragma once

#include <exception>
#include <nlohmann/json.hpp>
#include <string>

#include "lab/engine/data_source.hpp"
#include "lab/engine/head_config.hpp"
#include "lab/state/json_fields.hpp"

namespace tttlab::lab {

template <class Panel, HeadLimits (*Limits)()>
void read_text_file_field(const FieldReader& r, Panel& s) {
  s.text_file = r.string("text_file", 4096, s.text_file);
  if (s.text_file.empty()) return;
  try {
    s.head.text = read_view_text(s.text_file, static_cast<std::size_t>(Limits().max_tokens)).text;
  } catch (const std::exception& e) {
    throw StateError(std::string("text_file: ") + e.what());
  }
}

template <class Panel>
void write_text_file_field(const Panel& s, nlohmann::json& j) {
  if (!s.text_file.empty()) j["text_file"] = s.text_file;
}

}  // namespace tttlab::lab
