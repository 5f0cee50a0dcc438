#include "lab/engine/compute_module.hpp"

namespace tttlab::lab {

ComputeModule::ComputeModule(std::shared_ptr<ComputeChoice> choice)
    : m_choice(std::move(choice)), m_view(std::make_shared<ComputeView>()) {}

bool ComputeModule::handle(const Command& command, ModuleContext& ctx) {
  const auto* set = std::get_if<SetComputeDevice>(&command);
  if (!set) return false;
  m_choice->set_request(set->request);
  m_view = std::make_shared<ComputeView>(m_choice->view());
  m_probed = true;
  ctx.mark_dirty();
  return true;
}

void ComputeModule::work(ModuleContext& ctx) {
  m_view = std::make_shared<ComputeView>(m_choice->view());
  m_probed = true;
  ctx.mark_dirty();
}

void ComputeModule::publish(Snapshot& snapshot) const { snapshot.compute = m_view; }

}  // namespace tttlab::lab
