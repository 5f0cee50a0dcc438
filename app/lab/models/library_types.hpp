// app/lab/models/library_types.hpp — commands and view of the model library (model_library.hpp).
#pragma once

#include <cstdint>
#include <memory>
#include <string>

#include "lab/models/model_library.hpp"

namespace tttlab::lab {

// Open a checkpoint or run directory; it joins every panel's list of models.
struct LibraryOpen {
  std::string path;
};

// Load a listed model now (e.g. the shipped one at start-up), so lists show its details.
struct LibraryLoad {
  std::string id;
};

// What the library module publishes: the list, and the outcome of the last LibraryOpen.
struct LibraryStatus {
  std::shared_ptr<const LibraryView> models;
  std::uint64_t event = 0;      // increases with every LibraryOpen handled
  std::string opened_id;        // the id it produced (empty on failure)
  std::string error;            // why it failed
};

}  // namespace tttlab::lab
