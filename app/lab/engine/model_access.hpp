// app/lab/engine/model_access.hpp — what an engine module that computes with language models holds:
// the model library and the device choice, both shared by all the engine's modules (lab/features.cpp
// wires them), so that a model is loaded once and the Compute menu applies to every panel.
#pragma once

#include <memory>
#include <utility>

#include "lab/engine/compute_device.hpp"
#include "lab/models/model_library.hpp"

namespace tttlab::lab {

// A module derives from it and inherits its constructor (`using ModelAccess::ModelAccess;`).
class ModelAccess {
 public:
  // Null arguments (a module built alone, as tests do): a library of its own; the CPU only.
  explicit ModelAccess(std::shared_ptr<ModelLibrary> library = nullptr,
                       std::shared_ptr<ComputeChoice> compute = nullptr)
      : m_library(library ? std::move(library) : std::make_shared<ModelLibrary>()),
        m_compute(compute ? std::move(compute) : std::make_shared<ComputeChoice>()) {}

 protected:
  std::shared_ptr<ModelLibrary> m_library;
  std::shared_ptr<ComputeChoice> m_compute;
};

}  // namespace tttlab::lab
