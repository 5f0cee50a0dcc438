// app/lab/primal_dual/primal_dual_settings.cpp — see primal_dual_settings.hpp.
#include "lab/primal_dual/primal_dual_settings.hpp"

#include <stdexcept>

#include "lab/primal_dual/primal_dual_module.hpp"
#include "lab/state/settings_checks.hpp"

namespace tttlab::lab {

PrimalDualConfig primal_dual_config_default() {
  PrimalDualConfig c;
  c.head.w0 = W0Init::Random;
  c.head.repeat = 1;
  return c;
}

PrimalDualConfig primal_dual_config_from(const FieldReader& r) {
  PrimalDualConfig c = primal_dual_config_default();
  c.head = head_config_from(r.object("head"));
  c.precision =
      r.choice("precision", {"double", "float"}, 0) == 0 ? Precision::Double : Precision::Float;
  c.timing_reps = static_cast<int>(r.integer("timing_reps", 1, 50, c.timing_reps));
  c.linear_attention = r.boolean("linear_attention", c.linear_attention);
  c.gpu_math = r.choice("gpu_math", {"fp32", "tf32"}, 0) == 0 ? GpuMath::Fp32 : GpuMath::Tf32;
  try {
    validate(c.effective(), PrimalDualModule::limits());
  } catch (const std::invalid_argument& e) {
    throw StateError(r.path() + ".head: " + e.what());
  }
  if (!c.head.toy())
    check_block_and_head(c.head.model_id, c.head.block, r.path() + ".head.block", c.head.head,
                         r.path() + ".head.head");
  return c;
}

nlohmann::json to_json(const PrimalDualConfig& c) {
  return {{"head", lab::to_json(c.head)},
          {"precision", c.precision == Precision::Double ? "double" : "float"},
          {"timing_reps", c.timing_reps},
          {"linear_attention", c.linear_attention},
          {"gpu_math", to_string(c.gpu_math)}};
}

}  // namespace tttlab::lab
