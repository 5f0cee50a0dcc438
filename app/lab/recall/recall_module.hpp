// app/lab/recall/recall_module.hpp — the engine side of the Recall lab (recall_types.hpp).
// A work item runs episodes for about 10 ms: first one episode of each P in turn (every memory reads
// it and is queried), then the forgetting map's episodes row by row. The accuracy curves fill in
// from small P to large and the map row by row, and a cancel or a new request lands within one item.
#pragma once

#include <memory>
#include <stdexcept>

#include "lab/engine/engine.hpp"
#include "lab/engine/job_module.hpp"
#include "lab/recall/recall_types.hpp"

namespace tttlab::lab {

// Throws std::invalid_argument naming the first setting out of range (the state-file reader and the
// module share it, so a scene the reader accepts always computes).
void validate(const RecallSettings& s);

class RecallModule final : public JobModule<RecallView, &Snapshot::recall> {
 public:
  RecallModule();
  ~RecallModule() override;
  const char* name() const override { return "recall lab"; }
  bool handle(const Command& command, ModuleContext& ctx) override;
  void work(ModuleContext& ctx) override;

  struct Job;

 private:
  std::unique_ptr<Job> m_job;
  void finish(ModuleContext& ctx, JobOutcome outcome, const std::string& message);
};

}  // namespace tttlab::lab
