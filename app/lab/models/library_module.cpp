#include "lab/models/library_module.hpp"

namespace tttlab::lab {

LibraryModule::LibraryModule(std::shared_ptr<ModelLibrary> library)
    : library_(std::move(library)), status_(std::make_shared<LibraryStatus>()) {
  auto s = std::make_shared<LibraryStatus>();
  s->models = library_->view();
  published_generation_ = library_->generation();
  status_ = std::move(s);
}

bool LibraryModule::handle(const Command& command, ModuleContext& ctx) {
  if (const auto* o = std::get_if<LibraryOpen>(&command)) {
    auto s = std::make_shared<LibraryStatus>(*status_);
    ++s->event;
    s->error.clear();
    s->opened_id.clear();
    try {
      s->opened_id = library_->open_checkpoint(o->path);
    } catch (const std::exception& e) {
      s->error = std::string("Could not open the model in '") + o->path + "': " + e.what();
    }
    s->models = library_->view();
    published_generation_ = library_->generation();
    status_ = std::move(s);
    ctx.mark_dirty();
    return true;
  }
  if (const auto* l = std::get_if<LibraryLoad>(&command)) {
    try {
      library_->get(l->id);
    } catch (const std::exception&) {
      // The entry now carries the error; panels show it where the model is chosen.
    }
    after_iteration(ctx);
    return true;
  }
  return false;
}

bool LibraryModule::has_work(Clock::time_point) const { return preload_; }

void LibraryModule::work(ModuleContext& ctx) {
  preload_ = false;
  try {
    library_->get(kShippedModelId);
  } catch (const std::exception&) {
    // Missing or broken: the list says why, and panels offer the other models.
  }
  after_iteration(ctx);
}

void LibraryModule::after_iteration(ModuleContext& ctx) {
  if (library_->generation() == published_generation_) return;
  auto s = std::make_shared<LibraryStatus>(*status_);
  s->models = library_->view();
  published_generation_ = library_->generation();
  status_ = std::move(s);
  ctx.mark_dirty();
}

void LibraryModule::publish(Snapshot& snapshot) const { snapshot.library = status_; }

}  // namespace tttlab::lab
