// app/lab/state/settings_checks.cpp — see settings_checks.hpp.
#include "lab/state/settings_checks.hpp"

#include <stdexcept>

#include "lab/models/model_library.hpp"

namespace tttlab::lab {

void check_block_and_head(const std::string& model_id, int block, const std::string& block_path,
                          int head, const std::string& head_path) {
  const auto cfg = config_without_loading(model_id);
  if (!cfg) return;
  const auto range = [](int n, const char* what) {
    return "the model has " + std::to_string(n) + " " + what +
           (n > 0 ? " (0 … " + std::to_string(n - 1) + ")" : "");
  };
  if (block >= cfg->num_hidden_layers)
    throw StateError(block_path + ": block " + std::to_string(block) +
                     " does not exist: " + range(cfg->num_hidden_layers, "blocks"));
  if (head >= cfg->num_attention_heads)
    throw StateError(head_path + ": head " + std::to_string(head) +
                     " does not exist: " + range(cfg->num_attention_heads, "heads"));
}

HeadConfig checked_head_from(const FieldReader& panel, const HeadLimits& limits) {
  HeadConfig h = head_config_from(panel.object("head"));
  try {
    validate(h, limits);
  } catch (const std::invalid_argument& e) {
    throw StateError(panel.path() + ".head: " + e.what());
  }
  if (!h.toy())
    check_block_and_head(h.model_id, h.block, panel.path() + ".head.block", h.head,
                         panel.path() + ".head.head");
  return h;
}

}  // namespace tttlab::lab
