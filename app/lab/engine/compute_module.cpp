#include "lab/engine/compute_module.hpp"

namespace tttlab::lab {

ComputeModule::ComputeModule(std::shared_ptr<ComputeChoice> choice)
    : choice_(std::move(choice)), view_(std::make_shared<ComputeView>()) {}

bool ComputeModule::handle(const Command& command, ModuleContext& ctx) {
  const auto* set = std::get_if<SetComputeDevice>(&command);
  if (!set) return false;
  choice_->set_request(set->request);
  view_ = std::make_shared<ComputeView>(choice_->view());
  probed_ = true;
  ctx.mark_dirty();
  return true;
}

void ComputeModule::work(ModuleContext& ctx) {
  view_ = std::make_shared<ComputeView>(choice_->view());
  probed_ = true;
  ctx.mark_dirty();
}

void ComputeModule::publish(Snapshot& snapshot) const { snapshot.compute = view_; }

}  // namespace tttlab::lab
