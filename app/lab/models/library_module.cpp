#include "lab/models/library_module.hpp"

namespace tttlab::lab {

LibraryModule::LibraryModule(std::shared_ptr<ModelLibrary> library)
    : m_library(std::move(library)), m_status(std::make_shared<LibraryStatus>()) {
  auto s = std::make_shared<LibraryStatus>();
  s->models = m_library->view();
  m_published_generation = m_library->generation();
  m_status = std::move(s);
}

bool LibraryModule::handle(const Command& command, ModuleContext& ctx) {
  if (const auto* o = std::get_if<LibraryOpen>(&command)) {
    auto s = std::make_shared<LibraryStatus>(*m_status);
    ++s->event;
    s->error.clear();
    s->opened_id.clear();
    try {
      s->opened_id = m_library->open_checkpoint(o->path);
    } catch (const std::exception& e) {
      s->error = std::string("Could not open the model in '") + o->path + "': " + e.what();
    }
    s->models = m_library->view();
    m_published_generation = m_library->generation();
    m_status = std::move(s);
    ctx.mark_dirty();
    return true;
  }
  if (const auto* l = std::get_if<LibraryLoad>(&command)) {
    try {
      m_library->get(l->id);
    } catch (const std::exception&) {
      // The entry now carries the error; panels show it where the model is chosen.
    }
    after_iteration(ctx);
    return true;
  }
  return false;
}

bool LibraryModule::has_work(Clock::time_point) const { return m_preload; }

void LibraryModule::work(ModuleContext& ctx) {
  m_preload = false;
  try {
    m_library->get(kShippedModelId);
  } catch (const std::exception&) {
    // Missing or broken: the list says why, and panels offer the other models.
  }
  after_iteration(ctx);
}

void LibraryModule::after_iteration(ModuleContext& ctx) {
  if (m_library->generation() == m_published_generation) return;
  auto s = std::make_shared<LibraryStatus>(*m_status);
  s->models = m_library->view();
  m_published_generation = m_library->generation();
  m_status = std::move(s);
  ctx.mark_dirty();
}

void LibraryModule::publish(Snapshot& snapshot) const { snapshot.library = m_status; }

}  // namespace tttlab::lab
