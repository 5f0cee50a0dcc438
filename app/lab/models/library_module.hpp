// app/lab/models/library_module.hpp — the engine side of the model library: opens checkpoints on
// request, loads the shipped model once at start-up (so every list shows it with its details), and
// publishes the list whenever it changes (other modules load models into the shared library too).
#pragma once

#include <memory>

#include "lab/engine/engine.hpp"
#include "lab/models/model_library.hpp"

namespace tttlab::lab {

class LibraryModule final : public EngineModule {
 public:
  explicit LibraryModule(std::shared_ptr<ModelLibrary> library);
  const char* name() const override { return "model library"; }
  bool handle(const Command& command, ModuleContext& ctx) override;
  bool has_work(Clock::time_point now) const override;
  void work(ModuleContext& ctx) override;
  void publish(Snapshot& snapshot) const override;
  // Another module changed the library in this engine-loop iteration.
  void after_iteration(ModuleContext& ctx) override;

 private:
  std::shared_ptr<ModelLibrary> m_library;
  std::shared_ptr<const LibraryStatus> m_status;
  bool m_preload = true;
  std::uint64_t m_published_generation = 0;
};

}  // namespace tttlab::lab
