#include "lab/models/model_library.hpp"

#include <algorithm>
#include <cctype>
#include <cmath>
#include <cstdio>
#include <limits>
#include <stdexcept>

#include "lab/engine/late_resources.hpp"
#include "lab/engine/resources.hpp"
#include "tttlab/io/atomic_file.hpp"
#include "tttlab/model/checkpoint.hpp"

namespace tttlab::lab {
namespace fs = std::filesystem;
namespace {

std::string millions(long n) {
  char b[32];
  std::snprintf(b, sizeof b, "%.2f M", static_cast<double>(n) / 1e6);
  return b;
}

// "random:<layer>:<backbone>:<seed>" → config and seed; false if `id` is not of that form.
bool parse_random_id(const std::string& id, ModelConfig* cfg, std::uint64_t* seed) {
  if (id.rfind("random:", 0) != 0) return false;
  const std::string rest = id.substr(7);
  const auto a = rest.find(':'), b = rest.find(':', a == std::string::npos ? 0 : a + 1);
  if (a == std::string::npos || b == std::string::npos)
    throw std::runtime_error("model id '" + id + "' should read random:<layer>:<backbone>:<seed>");
  ModelConfig c = ModelConfig::preset("tiny");
  try {
    c.seq_layer = seq_layer_from_string(rest.substr(0, a));
  } catch (const std::invalid_argument& e) {
    throw std::runtime_error(e.what());
  }
  const std::string backbone = rest.substr(a + 1, b - a - 1);
  if (backbone != "m" && backbone != "t")
    throw std::runtime_error("model id '" + id + "': the backbone must be m or t");
  c.mamba_backbone = backbone == "m";
  c.ttt_base_lr = default_ttt_base_lr(c.seq_layer);
  try {
    *seed = std::stoull(rest.substr(b + 1));
  } catch (const std::exception&) {
    throw std::runtime_error("model id '" + id + "': the seed must be a non-negative integer");
  }
  *cfg = c;
  return true;
}


}  // namespace

bool is_shipped_id(const std::string& id) { return id == kShippedModelId || id.rfind("shipped:", 0) == 0; }

std::string shipped_model_name(const std::string& id) {
  if (id.rfind("shipped:", 0) != 0) return "";
  const std::string name = id.substr(8);
  const bool plain = !name.empty() && name.size() <= 64 && name != "." && name != ".." &&
                     std::all_of(name.begin(), name.end(), [](char c) {
                       return std::isalnum(static_cast<unsigned char>(c)) || c == '-' || c == '_' || c == '.';
                     });
  if (!plain)
    throw std::runtime_error("model id '" + id + "': a shipped model's name is a folder name of " +
                             kShippedModelsFolder + " (letters, digits, '-', '_', '.')");
  return name;
}

namespace {
// How long a lookup waits for files that arrive after the lab opened (the browser's second download,
// late_resources.hpp): long enough for a slow connection, short enough that a lost one is reported.
constexpr auto kLateResourceWait = std::chrono::minutes(3);

// The folder of a shipped model or run (`rel`, under assets/models), waiting for it when it is among
// the files that arrive late. Throws std::runtime_error naming `what` when it is not there.
fs::path find_shipped(const std::string& rel, const std::string& what) {
  std::string looked;
  if (auto dir = find_resource(rel, &looked)) return *dir;
  if (const std::string late = wait_for_late_resources(kLateResourceWait); !late.empty())
    throw std::runtime_error(what + " " + rel + " is not here yet: " + late);
  looked.clear();
  if (auto dir = find_resource(rel, &looked)) return *dir;
  throw std::runtime_error(what + " " + rel + " was not found (looked in " + looked +
                           "); run from the repository or set TTTLAB_HOME to it");
}
}  // namespace

bool is_shipped_run_id(const std::string& id) { return id.rfind(kShippedRunPrefix, 0) == 0; }

std::vector<ShippedCheckpoint> shipped_run_checkpoints(const std::string& id) {
  if (!is_shipped_run_id(id)) throw std::runtime_error("model id '" + id + "' does not name a shipped run");
  // The same rule as a shipped model's name, so that the id cannot reach outside assets/models.
  const std::string name = shipped_model_name("shipped:" + id.substr(std::string(kShippedRunPrefix).size()));
  const std::string rel = std::string(kShippedModelsFolder) + "/" + name;
  const auto dir = find_shipped(rel, "the shipped run");
  std::vector<ShippedCheckpoint> out;
  std::error_code ec;
  for (const auto& d : fs::directory_iterator(dir, ec)) {
    // "checkpoint-<step>", not a run's "step-NNNNNNN": `tttlab export` will not write into a folder that
    // looks like a training run.
    const std::string tail = d.path().filename().string();
    const std::size_t k = std::string("checkpoint-").size();
    if (tail.size() <= k || tail.size() > k + 9 || tail.rfind("checkpoint-", 0) != 0 || !d.is_directory(ec) ||
        !std::all_of(tail.begin() + static_cast<long>(k), tail.end(), [](char c) { return c >= '0' && c <= '9'; }))
      continue;
    if (!fs::exists(d.path() / "config.json", ec) || !fs::exists(d.path() / "model.safetensors", ec)) continue;
    out.push_back({std::stol(tail.substr(k)), d.path()});
  }
  if (out.empty())
    throw std::runtime_error("the shipped run " + rel + " holds no checkpoint (checkpoint-<step> folders with "
                             "config.json and model.safetensors)");
  std::sort(out.begin(), out.end(), [](const auto& a, const auto& b) { return a.step < b.step; });
  return out;
}

std::string ModelInfo::layer_name() const {
  switch (config.seq_layer) {
    case SeqLayerKind::TTTLinear: return "TTT-Linear";
    case SeqLayerKind::TTTMLP: return "TTT-MLP";
    case SeqLayerKind::LinearAttention: return "linear attention";
    case SeqLayerKind::SoftmaxAttention: return "softmax attention";
    case SeqLayerKind::Mamba2: return "Mamba-2";
    case SeqLayerKind::DeltaNet: return "DeltaNet";
    case SeqLayerKind::GatedDeltaNet: return "Gated DeltaNet";
    case SeqLayerKind::Titans: return "Titans";
    case SeqLayerKind::Lact: return "LaCT";
  }
  return "?";
}

std::string ModelInfo::summary() const {
  if (!loaded) return error.empty() ? "not loaded yet" : error;
  const ModelConfig& c = config;
  std::string s = layer_name() + " · " + (c.mamba_backbone ? "Mamba" : "Transformer") + " backbone · " +
                  std::to_string(c.num_hidden_layers) + " blocks × " + std::to_string(c.num_attention_heads) +
                  " heads, d = " + std::to_string(c.head_dim());
  if (c.is_ttt()) s += ", b = " + std::to_string(c.mini_batch_size);
  return s + " · " + millions(params) + " parameters";
}

const ModelInfo* LibraryView::find(const std::string& id) const {
  for (const auto& m : models)
    if (m.id == id) return &m;
  return nullptr;
}

std::optional<ModelConfig> config_without_loading(const std::string& id) {
  try {
    ModelConfig cfg;
    std::uint64_t seed = 0;
    if (parse_random_id(id, &cfg, &seed)) return cfg;
    std::optional<fs::path> file;
    if (id == kShippedModelId)
      file = find_resource(std::string(kShippedModelPath) + "/config.json");
    else if (const std::string name = shipped_model_name(id); !name.empty())
      file = find_resource(std::string(kShippedModelsFolder) + "/" + name + "/config.json");
    else if (id.rfind("file:", 0) == 0 && fs::is_regular_file(fs::path(id.substr(5)) / "config.json"))
      file = fs::path(id.substr(5)) / "config.json";
    if (!file) return std::nullopt;
    return ModelConfig::from_json(read_file_text(*file, 1 << 20), file->string());
  } catch (const std::exception&) {
    return std::nullopt;
  }
}

std::string random_model_id(const std::string& layer, bool mamba, std::uint64_t seed) {
  return "random:" + layer + ":" + (mamba ? "m" : "t") + ":" + std::to_string(seed);
}

ModelLibrary::ModelLibrary() {
  // Listed from the start (loaded on first use): the shipped models and two untrained TTT models.
  entry(kShippedModelId);
  list_shipped();
  entry(random_model_id("ttt-linear", true, 0));
  entry(random_model_id("ttt-mlp", true, 0));
}

void ModelLibrary::list_shipped() {
  m_late_generation = late_resources_generation();
  if (const auto dir = find_resource(kShippedModelsFolder)) {
    std::vector<std::string> names;
    std::error_code ec;
    for (const auto& d : fs::directory_iterator(*dir, ec))
      if (d.is_directory(ec) && fs::exists(d.path() / "config.json", ec) &&
          d.path() != fs::path(*dir) / fs::path(kShippedModelPath).filename())
        names.push_back(d.path().filename().string());
    std::sort(names.begin(), names.end());
    for (const auto& n : names) {
      try {
        entry("shipped:" + n);
      } catch (const std::runtime_error&) {
        // A folder whose name is not a plain name is not offered.
      }
    }
  }
}

ModelLibrary::Entry& ModelLibrary::entry(const std::string& id) {
  for (auto& e : m_entries)
    if (e->info.id == id) return *e;
  auto e = std::make_unique<Entry>();
  e->info.id = id;
  ModelConfig cfg;
  std::uint64_t seed = 0;
  if (id == kShippedModelId) {
    e->info.label = "tiny-brown (shipped)";
    e->info.trained = true;
  } else if (const std::string name = shipped_model_name(id); !name.empty()) {
    e->info.label = name + " (shipped)";
    e->info.trained = true;
    // The config alone (a small file), so that model choosers know the layer kind before loading.
    if (const auto dir = find_resource(std::string(kShippedModelsFolder) + "/" + name + "/config.json")) {
      try {
        e->info.config = ModelConfig::from_json(read_file_text(*dir, 1 << 20), dir->string());
        e->info.config_known = true;
      } catch (const std::exception&) {
        // Reported when the model is loaded.
      }
    }
  } else if (id.rfind("file:", 0) == 0) {
    e->info.path = id.substr(5);
    e->info.label = fs::path(e->info.path).filename().string();
    e->info.trained = true;
  } else if (parse_random_id(id, &cfg, &seed)) {
    e->info.config = cfg;
    e->info.config_known = true;
    ModelInfo probe;
    probe.config = cfg;
    e->info.label = "untrained " + probe.layer_name() + " (random init, seed " + std::to_string(seed) + ")";
  } else {
    throw std::runtime_error("unknown model '" + id + "' (expected shipped, shipped:<name>, file:<folder> or random:…)");
  }
  m_entries.push_back(std::move(e));
  ++m_generation;
  // Keep the order: shipped, checkpoints, random.
  std::stable_sort(m_entries.begin(), m_entries.end(), [](const auto& a, const auto& b) {
    const auto rank = [](const std::string& i) { return is_shipped_id(i) ? 0 : i.rfind("random:", 0) == 0 ? 2 : 1; };
    return rank(a->info.id) < rank(b->info.id);
  });
  for (auto& x : m_entries)
    if (x->info.id == id) return *x;
  throw std::logic_error("model library: entry vanished");
}

void ModelLibrary::load(Entry& e) {
  if (e.model) return;
  const std::string& id = e.info.id;
  try {
    std::unique_ptr<Model<float>> m;
    ModelConfig cfg;
    std::uint64_t seed = 0;
    if (is_shipped_id(id)) {
      const std::string name = shipped_model_name(id);
      const auto dir =
          find_shipped(name.empty() ? kShippedModelPath : std::string(kShippedModelsFolder) + "/" + name,
                       "the shipped model");
      e.info.path = dir.string();
      CheckpointLoadInfo info;  // the shipped models carry no checksum: the note is kept, not printed
      m = load_model(dir, ModelLoadOptions{.info = &info});
      e.info.note = info.note;
    } else if (id.rfind("file:", 0) == 0) {
      // Checked before allocation like every load (config against the weights' header, the memory
      // estimate): a state file naming a hostile checkpoint gets an error, not gigabytes.
      CheckpointLoadInfo info;
      m = load_model(e.info.path, ModelLoadOptions{.info = &info});
      e.info.note = info.note;
    } else if (parse_random_id(id, &cfg, &seed)) {
      m = std::make_unique<Model<float>>(cfg, seed);
    }
    e.info.params = m->num_params();
    e.info.config = m->config();
    e.info.loaded = true;
    e.info.error.clear();
    e.model = std::move(m);
  } catch (const std::exception& ex) {
    e.info.loaded = false;
    e.info.error = ex.what();
    ++m_generation;
    throw std::runtime_error(ex.what());
  }
  ++m_generation;
}

std::shared_ptr<const Model<float>> ModelLibrary::get(const std::string& id, const ModelOverrides& o) {
  Entry& e = entry(id);
  load(e);
  if (!o.any()) return e.model;
  const auto key = std::make_pair(o.mini_batch, o.base_lr);
  if (auto it = e.variants.find(key); it != e.variants.end()) return it->second;
  try {
    std::shared_ptr<const Model<float>> v = derive_model(*e.model, o);
    if (e.variants.size() > 16) e.variants.clear();  // sweeps should not pile up models
    e.variants.emplace(key, v);
    return v;
  } catch (const std::invalid_argument& ex) {
    throw std::runtime_error(ex.what());
  }
}

std::string ModelLibrary::open_checkpoint(const fs::path& dir) {
  std::error_code ec;
  const fs::path canon = fs::weakly_canonical(dir, ec);
  const std::string id = "file:" + (ec ? dir : canon).string();
  Entry& e = entry(id);
  try {
    load(e);
  } catch (...) {
    std::erase_if(m_entries, [&](const auto& x) { return x->info.id == id; });
    ++m_generation;
    throw;
  }
  return id;
}

void ModelLibrary::put(const std::string& id, const std::string& label, const std::string& path,
                       std::shared_ptr<const Model<float>> model, bool trained, long step) {
  std::uint64_t version = 0;
  for (const auto& x : m_entries)
    if (x->info.id == id) version = x->info.version + 1;
  std::erase_if(m_entries, [&](const auto& x) { return x->info.id == id; });
  auto e = std::make_unique<Entry>();
  e->info.id = id;
  e->info.version = version;
  e->info.step = step;
  e->info.label = label;
  e->info.path = path;
  e->info.trained = trained;
  e->info.loaded = true;
  e->info.config = model->config();
  e->info.params = const_cast<Model<float>&>(*model).num_params();  // reads only
  // Checkpoints put here skip load_model's check; a diverged run's weights are kept (the run goes on
  // and may save better ones) but marked, so that every view says so instead of drawing NaN.
  try {
    check_finite_forward(*model, path.empty() ? label : path);
  } catch (const NonFiniteModelError& ex) {
    e->info.warning = ex.what();
  }
  e->model = std::move(model);
  m_entries.push_back(std::move(e));
  std::stable_sort(m_entries.begin(), m_entries.end(), [](const auto& a, const auto& b) {
    const auto rank = [](const std::string& i) { return is_shipped_id(i) ? 0 : i.rfind("random:", 0) == 0 ? 2 : 1; };
    return rank(a->info.id) < rank(b->info.id);
  });
  m_newest_put = id;
  ++m_puts;
  ++m_generation;
}

std::shared_ptr<const LibraryView> ModelLibrary::view() {
  // Shipped models that arrived after the library was made (late_resources.hpp) join the list.
  if (late_resources_generation() != m_late_generation) list_shipped();
  if (!m_view || m_view_generation != m_generation) {
    auto v = std::make_shared<LibraryView>();
    v->generation = m_generation;
    for (const auto& e : m_entries) v->models.push_back(e->info);
    m_view = std::move(v);
    m_view_generation = m_generation;
  }
  return m_view;
}

std::string model_source(const LibraryView& view, const std::string& id) {
  const ModelInfo* info = view.find(id);
  if (!info) return id;
  return info->path.empty() ? info->label : info->path;
}

bool beyond_float(double x) {
  return !std::isfinite(x) || std::abs(x) > static_cast<double>(std::numeric_limits<float>::max());
}

std::unique_ptr<Model<float>> derive_model(const Model<float>& m, const ModelOverrides& o) {
  ModelConfig cfg = m.config();
  if (o.mini_batch > 0) {
    if (o.mini_batch > 1 << 16) throw std::invalid_argument("mini-batch size b must be at most 65536");
    cfg.mini_batch_size = o.mini_batch;
  }
  if (o.base_lr > 0.0) cfg.ttt_base_lr = o.base_lr;
  cfg.validate();
  auto out = std::make_unique<Model<float>>(cfg, 0);
  // Copy by name. for_each_param is non-const only because it hands out writable views; the source
  // is read, never written.
  std::vector<std::pair<std::string, Eigen::Map<Mat<float>>>> src;
  const_cast<Model<float>&>(m).for_each_param(
      [&](Eigen::Map<Mat<float>> p, const std::string& n) { src.emplace_back(n, p); });
  std::size_t i = 0;
  out->for_each_param([&](Eigen::Map<Mat<float>> dst, const std::string& name) {
    while (i < src.size() && src[i].first != name) ++i;  // same visiting order in both models
    if (i == src.size()) throw std::logic_error("derive_model: parameter " + name + " not found");
    const auto& s = src[i].second;
    if (s.rows() == dst.rows() && s.cols() == dst.cols()) {
      dst = s;
    } else {  // δ [1, b]: keep the common positions, new ones start at 0 (τ_i = 1/i)
      dst.setZero();
      const auto r = std::min(s.rows(), dst.rows()), c = std::min(s.cols(), dst.cols());
      dst.topLeftCorner(r, c) = s.topLeftCorner(r, c);
    }
    ++i;
  });
  return out;
}

}  // namespace tttlab::lab
