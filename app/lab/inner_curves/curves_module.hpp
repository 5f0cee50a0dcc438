// app/lab/inner_curves/curves_module.hpp — the engine side of the Inner-loss curves panel (curves_types.hpp).
// Each validation window streams through the model in the primal form (Model::forward with a block
// observer), 64 tokens per work item; the observer adds every (block, head, token)'s three inner
// losses into per-block sums, so the averaged curves sharpen live as windows are done.
//
// Following a training run: after every engine pass (after_iteration) the module looks whether the
// library holds newer weights for the model its view was computed with (ModelInfo::version raised by
// a checkpoint of a run) and then computes the same settings again, cancelling a computation with the
// older weights. The model id kFollowTrainingId waits for the next checkpoint any run saves after the
// request, then follows the newest run (ModelLibrary::newest_put).
//
// A member other than TTT (CurvesSettings::member) runs on toy heads instead of a model: one window per
// work item, every toy head's MemberTracer over it (tttlab/fastweight/member_trace.hpp), the same
// three sums per token; nothing follows a training run then.
//
// A shipped run (model id "shipped-run:<name>", model_library.hpp) stands in for a training run: the
// module puts its first checkpoint into the library and computes; each time a computation is complete
// it puts the next one, and the view follows it exactly as it follows a run's new checkpoints (reloads,
// first checkpoint and all). So a student who does not train sees the same view from shipped weights.
//
// A lesson trains its run once. A lesson's scene posts CurvesRun with the run it starts (lesson_run),
// then that TrainStart (marked lesson). The module keeps the newest complete view it followed, with
// the lesson run it belonged to; when the same scene is posted again (the lesson's next prediction)
// and those weights are still the run's newest, that view comes back under a new generation, first
// checkpoint and reload count included, and the module answers the TrainStart itself (it comes before
// the training module in the engine, lab/features.cpp), so nothing trains again.
#pragma once

#include <memory>
#include <optional>
#include <vector>

#include "lab/engine/engine.hpp"
#include "lab/engine/job_module.hpp"
#include "lab/engine/model_access.hpp"

namespace tttlab::lab {

class CurvesModule final : public JobModule<CurvesView, &Snapshot::curves>, private ModelAccess {
 public:
  // Out of line, where Job is complete (the constructor destroys m_job if it throws).
  explicit CurvesModule(std::shared_ptr<ModelLibrary> library = nullptr,
                        std::shared_ptr<ComputeChoice> compute = nullptr);
  ~CurvesModule() override;
  const char* name() const override { return "inner-loss curves"; }
  bool handle(const Command& command, ModuleContext& ctx) override;
  void work(ModuleContext& ctx) override;
  void after_iteration(ModuleContext& ctx) override;

  struct Job;

 private:
  // Starts computing `s` (the resolved model's current weights); `previous`: the view being replaced
  // because newer weights arrived (null for a new request).
  void start(const CurvesSettings& s, ModuleContext& ctx, std::shared_ptr<const CurvesView> previous);
  // Starts computing `s` for a member other than TTT on toy heads (curves_types.hpp); `v` is the new
  // view, settings and generation set.
  void start_member(const CurvesSettings& s, ModuleContext& ctx, std::shared_ptr<CurvesView> v);
  // One window of a member's toy heads (the job's next work item).
  void work_member();
  // Ends the job (cancelled or failed) and publishes the view that says so.
  void end(ModuleContext& ctx, JobOutcome outcome, const std::string& message);
  // The library id the settings' model names now ("" while kFollowTrainingId still waits).
  std::string resolve(const std::string& model_id) const;
  // Puts the followed view of `run.lesson_run` back on show, if it is still current; false if not.
  bool restore_followed(const CurvesRun& run, ModuleContext& ctx);
  // Puts the shipped run's next checkpoint into the library (its version is raised: the view follows).
  // Throws std::runtime_error when it cannot be read.
  void replay_next(const std::string& model_id);

  std::unique_ptr<Job> m_job;
  std::uint64_t m_seen_library = 0;  // the library generation after_iteration last looked at
  int m_reloads = 0;
  std::uint64_t m_follow_after = 0;  // kFollowTrainingId follows checkpoints put after this many puts
  std::optional<TrainSettings> m_chain_run;          // the lesson run the view follows (or waits for)
  std::shared_ptr<const CurvesView> m_followed;      // the newest complete view of a followed run
  std::optional<TrainSettings> m_followed_run;       // the lesson run it belongs to
  bool m_answer_next_start = false;                  // a view came back: the lesson's TrainStart is answered
  std::vector<ShippedCheckpoint> m_replay;           // the shipped run being replayed (empty: none)
  std::size_t m_replay_next = 0;                     // its next checkpoint to put
};

}  // namespace tttlab::lab
