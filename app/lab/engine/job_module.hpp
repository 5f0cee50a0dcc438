// app/lab/engine/job_module.hpp — the base of a feature's engine module whose work is one job at a
// time (JobSlot): it keeps the view on show, says whether a job has work, and publishes the view into
// its field of the Snapshot. A module derives from JobModule<ItsView, &Snapshot::its_field> and
// writes only what is its own: how a request starts a job (start_request), and one work item of it.
#pragma once

#include <cstdint>
#include <memory>
#include <utility>
#include <variant>

#include "lab/engine/engine.hpp"

namespace tttlab::lab {

template <class View, std::shared_ptr<const View> Snapshot::*Field>
class JobModule : public EngineModule {
 public:
  bool has_work(Clock::time_point) const override { return m_slot.running(); }
  void publish(Snapshot& snapshot) const override { snapshot.*Field = m_view; }

 protected:
  // The view for a new request: the running job, if any, is superseded (the module drops its job
  // state too), and the view starts empty, or as a copy of the one on show whose results stay on show
  // (marked stale by their own generation) while the new job runs. Either way it has the request's
  // generation, no error and no progress yet.
  std::shared_ptr<View> new_request(ModuleContext& ctx, bool keep_results) {
    m_slot.supersede(ctx);
    auto v = keep_results ? next_view() : std::make_shared<View>();
    v->error.clear();
    v->progress = 0;
    v->generation = ++m_generation;
    return v;
  }
  // Handles a command that is a `Request` (else returns false): its view is new_request's, and
  // `start(request, view)` checks the request, prepares the job (the module drops the superseded
  // job's state first) and returns the job's label. It runs in the slot, so what it throws fails the
  // request with its message; the view goes on show either way.
  template <class Request, class Start>
  bool start_request(const Command& command, ModuleContext& ctx, bool keep_results, Start&& start) {
    const auto* request = std::get_if<Request>(&command);
    if (!request) return false;
    auto v = new_request(ctx, keep_results);
    m_slot.start(ctx, *v, [&] { return start(*request, *v); });
    show(std::move(v), ctx);
    return true;
  }
  // A copy of the view on show, to change and then show(): the snapshots already taken keep theirs.
  std::shared_ptr<View> next_view() const { return std::make_shared<View>(*m_view); }
  // Puts `view` on show in the next snapshot.
  void show(std::shared_ptr<const View> view, ModuleContext& ctx) {
    m_view = std::move(view);
    ctx.mark_dirty();
  }

  std::shared_ptr<const View> m_view = std::make_shared<const View>();
  JobSlot m_slot;
  std::uint64_t m_generation = 0;  // of the newest request (JobView::generation)
};

}  // namespace tttlab::lab
