// Training on a backend, the CPU by default (see tttlab/train/trainer.hpp).
#include "tttlab/train/trainer.hpp"

#include <algorithm>
#include <charconv>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <stdexcept>
#include <mutex>
#include <set>
#include <thread>

#include "tttlab/data/batches.hpp"
#include "tttlab/data/synthetic.hpp"
#include "tttlab/data/text_file.hpp"
#include "tttlab/io/atomic_file.hpp"
#include "tttlab/io/json.hpp"
#include "tttlab/io/limits.hpp"
#include "tttlab/io/safetensors.hpp"
#include "tttlab/io/sha256.hpp"
#include "tttlab/model/checkpoint.hpp"
#include "tttlab/model/memory.hpp"
#include "tttlab/optim/adamw.hpp"
#include "tttlab/train/run_dir.hpp"

#include "tttlab/util/parallel.hpp"
#include "window_sums.hpp"

namespace tttlab {
namespace fs = std::filesystem;

namespace {

[[noreturn]] void bad(const std::string& msg) { throw std::invalid_argument("training config: " + msg); }

}  // namespace

// ---- TrainConfig ------------------------------------------------------------------------------------

void TrainConfig::validate() const {
  model.validate();
  if (steps <= 0) bad("steps must be positive, got " + std::to_string(steps));
  if (batch_size <= 0) bad("batch size must be positive, got " + std::to_string(batch_size));
  if (seq_len < 2) bad("sequence length must be at least 2, got " + std::to_string(seq_len));
  if (!(lr > 0)) bad("learning rate must be positive");
  if (!(warmup_fraction >= 0 && warmup_fraction < 1)) bad("warmup fraction must be in [0, 1)");
  if (!(end_lr >= 0)) bad("end learning rate must be >= 0");
  if (threads < 0) bad("threads must be >= 0");
  if (checkpoint_every < 0 || eval_every < 0 || eval_windows < 0) bad("intervals must be >= 0");
  if (!data_sha256.empty() && (data_sha256.size() != 64 || data_sha256.find_first_not_of("0123456789abcdef") != std::string::npos))
    bad("data_sha256 must be a SHA-256 (64 lowercase hex digits)");
  if (max_bad_steps < 1) bad("max_bad_steps must be at least 1, got " + std::to_string(max_bad_steps));
  if (on_diverge != "rollback" && on_diverge != "stop") bad("on_diverge must be \"rollback\" or \"stop\"");
  if (max_rollbacks < 0) bad("max_rollbacks must be >= 0");
  if (!(rollback_lr_factor > 0 && rollback_lr_factor < 1)) bad("rollback_lr_factor must be in (0, 1)");
  if (!(lr_scale > 0 && lr_scale <= 1)) bad("lr_scale must be in (0, 1]");
  // Bounds far above any run of this lab, so that sizes computed from a hostile train_config.json stay
  // exact; the memory estimate (Trainer's constructor) decides whether a run within them fits.
  if (batch_size > k_max_batch_size) bad("batch size must be at most " + std::to_string(k_max_batch_size) + ", got " + std::to_string(batch_size));
  if (seq_len > k_max_positions) bad("sequence length must be at most " + std::to_string(k_max_positions) + ", got " + std::to_string(seq_len));
  if (threads > k_max_threads) bad("threads must be at most " + std::to_string(k_max_threads) + ", got " + std::to_string(threads));
}

std::string TrainConfig::to_json() const {
  Json j = Json::object();
  j["model"] = parse_json(model.to_json(), "config.json");
  j["data"] = data;
  j["data_dir"] = data_dir;
  if (!data_sha256.empty()) j["data_sha256"] = data_sha256;
  j["steps"] = steps;
  j["batch_size"] = batch_size;
  j["seq_len"] = seq_len;
  j["lr"] = lr;
  j["warmup_fraction"] = warmup_fraction;
  j["end_lr"] = end_lr;
  j["weight_decay"] = weight_decay;
  j["clip_norm"] = clip_norm;
  j["seed"] = seed;
  j["threads"] = threads;
  j["checkpoint_every"] = checkpoint_every;
  j["eval_every"] = eval_every;
  j["eval_windows"] = eval_windows;
  j["max_bad_steps"] = max_bad_steps;
  j["on_diverge"] = on_diverge;
  j["max_rollbacks"] = max_rollbacks;
  j["rollback_lr_factor"] = rollback_lr_factor;
  j["lr_scale"] = lr_scale;
  return j.dump(2) + "\n";
}

TrainConfig train_config(const ModelConfig& model, const RunSettings& run) {
  TrainConfig c;
  static_cast<RunSettings&>(c) = run;
  c.model = model;
  if (c.seq_len <= 0) c.seq_len = model.max_position_embeddings;
  c.model.max_position_embeddings = c.seq_len;
  c.validate();
  return c;
}

TrainConfig TrainConfig::from_json(const std::string& text, const std::string& source) {
  TrainConfig c;
  try {
    const Json j = parse_json(text, source);
    const JsonFields f(j, source);
    if (!f.has("model")) f.fail("model", "is missing (the model's config.json keys)");
    c.model = ModelConfig::from_json(f.find("model")->dump(), source + ": model");
    f.read("data", c.data);
    f.read("data_dir", c.data_dir);
    f.read("data_sha256", c.data_sha256);
    f.read("steps", c.steps);
    f.read("batch_size", c.batch_size);
    f.read("seq_len", c.seq_len);
    f.read("lr", c.lr);
    f.read("warmup_fraction", c.warmup_fraction);
    f.read("end_lr", c.end_lr);
    f.read("weight_decay", c.weight_decay);
    f.read("clip_norm", c.clip_norm);
    f.read("seed", c.seed);
    f.read("threads", c.threads);
    f.read("checkpoint_every", c.checkpoint_every);
    f.read("eval_every", c.eval_every);
    f.read("eval_windows", c.eval_windows);
    // Absent from runs saved before divergence handling existed: the defaults apply.
    f.read("max_bad_steps", c.max_bad_steps);
    f.read("on_diverge", c.on_diverge);
    f.read("max_rollbacks", c.max_rollbacks);
    f.read("rollback_lr_factor", c.rollback_lr_factor);
    f.read("lr_scale", c.lr_scale);
  } catch (const JsonError& e) {
    bad(e.what());
  }
  c.validate();
  return c;
}

// ---- TextData --------------------------------------------------------------------------------------

namespace {

// The synthetic tasks sized to the sequence length: as many pairs (MQAR) or symbols (copy) as fit.
MqarConfig mqar_config(int T) {
  MqarConfig c;
  c.seq_len = T;
  c.num_pairs = c.num_queries = std::max(1, std::min<int>(static_cast<int>(c.keys.size()), T / 4));
  return c;
}
CopyConfig copy_config(int T) {
  CopyConfig c;
  c.seq_len = T;
  c.max_len = std::max(1, std::min(64, T / 2));
  c.min_len = std::max(1, c.max_len / 2);
  return c;
}
TokenBatch synthetic_batch(const std::string& kind, int T, int B, std::uint64_t seed, std::uint64_t index) {
  if (kind == "mqar") return mqar_batch(mqar_config(T), B, seed, index);
  return copy_batch(copy_config(T), B, seed, index);
}
// Validation rows come from another seed stream than training rows.
constexpr std::uint64_t k_val_seed_offset = 0x5eed0000c0ffee11ULL;

}  // namespace

TextData TextData::load(const TrainConfig& cfg) {
  TextData d;
  if (cfg.data == "mqar" || cfg.data == "copy") {
    d.synthetic = cfg.data;
    if (cfg.data == "mqar") {
      const MqarConfig m = mqar_config(cfg.seq_len);
      m.validate();
      d.description = "MQAR: " + std::to_string(m.num_pairs) + " key-value pairs, " +
                      std::to_string(m.num_queries) + " queries per sequence (answers scored)";
    } else {
      const CopyConfig c = copy_config(cfg.seq_len);
      c.validate();
      d.description = "copying: " + std::to_string(c.min_len) + "-" + std::to_string(c.max_len) +
                      " symbols per sequence (copies scored)";
    }
    return d;
  }
  TextLoadOptions opt;
  opt.seq_len = cfg.seq_len;
  if (cfg.data == "brown") {
    const fs::path dir = cfg.data_dir;
    if (!fs::exists(dir / "train.txt"))
      throw std::runtime_error("the Brown corpus is not prepared in '" + dir.string() +
                               "': run `bash scripts/setup.sh` (or `tttlab data prepare-brown`) first");
    d.train = load_text_file(dir / "train.txt", opt).bytes;
    d.val = load_text_file(dir / "val.txt", opt).bytes;
    d.description = "Brown corpus (" + dir.string() + ")";
  } else {
    TextLoadOptions whole = opt;
    whole.seq_len = 0;
    std::vector<std::uint8_t> bytes = load_text_file(cfg.data, whole).bytes;
    // The last 5% validates; both parts need at least one window of T + 1 bytes.
    const std::size_t n_val = std::max<std::size_t>(bytes.size() / 20, static_cast<std::size_t>(cfg.seq_len) + 1);
    if (bytes.size() < n_val + static_cast<std::size_t>(cfg.seq_len) + 1)
      throw std::runtime_error("'" + cfg.data + "' is too short: " + std::to_string(bytes.size()) +
                               " bytes; sequence length " + std::to_string(cfg.seq_len) +
                               " needs at least " + std::to_string(n_val + cfg.seq_len + 1) +
                               " (a training and a validation window); use a longer text or a shorter --seq-len");
    d.val.assign(bytes.end() - static_cast<std::ptrdiff_t>(n_val), bytes.end());
    bytes.resize(bytes.size() - n_val);
    d.train = std::move(bytes);
    d.description = cfg.data + " (first 95% train, last 5% validation)";
  }
  return d;
}

// ---- Trainer ----------------------------------------------------------------------------------------

struct Trainer::Impl {
  std::uint64_t synthetic_next = 0;  // the next synthetic batch index (the synthetic "sampler state")
  std::unique_ptr<RandomWindowSampler> sampler;
  std::unique_ptr<AdamW<float>> optim;
  // Last: it refers to the optimiser and the model, so it goes first.
  std::unique_ptr<TrainBackend> backend;
};

Trainer::Trainer(TrainConfig cfg, TextData data, const TrainBackendFactory& backend)
    : m_cfg(std::move(cfg)), m_data(std::move(data)) {
  m_cfg.validate();
  if (m_data.synthetic.empty()) {
    // The data as files that any working directory finds again, and as a digest that says whether
    // they still hold the same bytes.
    std::error_code ec;
    if (m_cfg.data == "brown") {
      const fs::path abs = fs::absolute(m_cfg.data_dir, ec);
      if (!ec) m_cfg.data_dir = abs.lexically_normal().string();
    } else {
      const fs::path abs = fs::absolute(m_cfg.data, ec);
      if (!ec) m_cfg.data = abs.lexically_normal().string();
    }
    Sha256 h;
    h.update(std::span<const std::uint8_t>(m_data.train));
    h.update(std::span<const std::uint8_t>(m_data.val));
    const std::string digest = to_hex(h.finish());
    if (m_cfg.data_sha256.empty()) {
      m_cfg.data_sha256 = digest;
    } else if (m_cfg.data_sha256 != digest) {
      const std::string where = m_cfg.data == "brown" ? m_cfg.data_dir : m_cfg.data;
      throw std::runtime_error("the training data '" + clip(where, 240) +
                               "' is not the data this run started with (its SHA-256 differs): resuming on it would "
                               "silently train a different run; restore the original file, or start a new run");
    }
  }
  m_threads = m_cfg.threads > 0 ? m_cfg.threads : std::max(1u, std::thread::hardware_concurrency());
  m_threads = std::min(m_threads, m_cfg.batch_size);
  // Refuse before allocating: the model, AdamW's moments, one gradient model and one sequence's
  // activations per worker thread (tttlab/model/memory.hpp).
  check_memory(estimate_memory(m_cfg.model, MemoryUse{.window = m_cfg.seq_len, .sequences = m_threads,
                                                      .gradient_copies = m_threads}),
               "a run of a " + std::to_string(static_cast<long long>(count_params(m_cfg.model))) +
                   "-parameter model with sequences of " + std::to_string(m_cfg.seq_len) + " bytes on " +
                   std::to_string(m_threads) + " threads");
  m_model = std::make_unique<Model<float>>(m_cfg.model, m_cfg.seed);
  m_impl = std::make_unique<Impl>();
  if (m_data.synthetic.empty() && m_data.train.size() < static_cast<std::size_t>(m_cfg.seq_len) + 1)
    throw std::runtime_error("the training text is shorter than one window of " + std::to_string(m_cfg.seq_len + 1) + " bytes");
  if (m_data.synthetic.empty())
    m_impl->sampler = std::make_unique<RandomWindowSampler>(std::span<const std::uint8_t>(m_data.train),
                                                            m_cfg.batch_size, m_cfg.seq_len, m_cfg.seed);
  AdamWConfig ac;
  ac.weight_decay = m_cfg.weight_decay;
  ac.clip_norm = m_cfg.clip_norm;
  WarmupCosineSchedule sched;
  sched.init_value = 0.0;
  sched.peak_value = m_cfg.lr * m_cfg.lr_scale;
  sched.warmup_steps = static_cast<std::int64_t>(std::llround(m_cfg.warmup_fraction * double(m_cfg.steps)));
  sched.decay_steps = std::max<std::int64_t>(m_cfg.steps, sched.warmup_steps + 1);
  sched.end_value = std::min(m_cfg.end_lr, m_cfg.lr) * m_cfg.lr_scale;
  m_impl->optim = std::make_unique<AdamW<float>>(ac, sched);
  const TrainBackendContext ctx{&m_cfg, m_model.get(), m_impl->optim.get(), m_threads};
  m_impl->backend = backend ? backend(ctx) : make_cpu_train_backend(ctx);
  if (!m_impl->backend) throw std::runtime_error("the training backend could not be created");
}

Trainer::~Trainer() = default;

long Trainer::steps_done() const { return static_cast<long>(m_impl->backend->step_count()); }

double Trainer::step_flops() const {
  return 3.0 * double(m_cfg.batch_size) * m_model->forward_flops(m_cfg.seq_len);
}

StepReport Trainer::step() {
  const auto t0 = std::chrono::steady_clock::now();
  const TokenBatch batch = m_data.synthetic.empty()
                               ? m_impl->sampler->next()
                               : synthetic_batch(m_data.synthetic, m_cfg.seq_len, m_cfg.batch_size, m_cfg.seed,
                                                 m_impl->synthetic_next++);
  const long denom = static_cast<long>(batch.counted_targets());
  const BackendStep s = m_impl->backend->step(batch);
  const AdamWReport& rep = s.optim;
  StepReport r;
  r.step = rep.step;
  r.loss = denom > 0 ? s.loss_sum / double(denom) : 0.0;
  r.lr = rep.lr;
  r.grad_norm = rep.grad_norm;
  r.skipped = rep.skipped;
  r.tokens = static_cast<long>(batch.batch) * batch.seq_len;
  r.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  r.ranks = m_impl->backend->rank_timings();
  if (rep.skipped) r.step = steps_done();
  return r;
}

EvalReport Trainer::evaluate(int max_windows) const {
  if (m_data.synthetic.empty()) {
    EvalOptions options;
    options.max_windows = max_windows;
    return evaluate_text(std::span<const std::uint8_t>(m_data.val), options);
  }
  // Synthetic tasks: a fixed set of rows drawn from a seed stream that training never uses
  // (max_windows rows, 256 when 0), scored on the answers only, on the host model.
  m_impl->backend->pull_to_host();
  const std::int64_t n = max_windows > 0 ? max_windows : 256;
  const TokenBatch rows =
      synthetic_batch(m_data.synthetic, m_cfg.seq_len, static_cast<int>(n), m_cfg.seed + k_val_seed_offset, 0);
  WindowSums sums(m_threads, m_cfg.seq_len);
  run_parallel(m_threads, [&](int i) {
    for (std::int64_t w = i; w < n; w += m_threads) {
      const auto row = rows.row(static_cast<int>(w));
      const std::vector<int> tokens(row.begin(), row.end());
      const std::vector<std::uint8_t> mask(rows.mask.begin() + w * m_cfg.seq_len,
                                           rows.mask.begin() + (w + 1) * m_cfg.seq_len);
      Vec<float> pos;
      const CrossEntropyStats st = m_model->eval_sequence(tokens, mask, &pos);
      sums.add(i, st, pos);
    }
  });
  EvalReport r = sums.report(n);
  r.step = steps_done();
  return r;
}

EvalReport Trainer::evaluate_text(std::span<const std::uint8_t> text, const EvalOptions& options) const {
  EvalReport r = m_impl->backend->evaluate(text, m_cfg.seq_len, options);
  r.step = steps_done();
  return r;
}

void Trainer::sync_to_host() const { m_impl->backend->pull_to_host(); }

void Trainer::sync_from_host() { m_impl->backend->push_from_host(); }

bool Trainer::any_rank(bool flag) { return m_impl->backend->any_rank(flag); }

std::string Trainer::device_description() const { return m_impl->backend->describe(); }

DeviceKind Trainer::device_kind() const { return m_impl->backend->kind(); }

std::optional<std::string> Trainer::non_finite_state() const {
  sync_to_host();
  std::optional<std::string> found;
  // for_each_param has no const form; this visit only reads.
  const_cast<Model<float>&>(*m_model).for_each_param([&](Eigen::Map<Mat<float>> p, const std::string& name) {
    if (!found && !p.allFinite()) found = "parameter " + name;
  });
  if (found) return found;
  const AdamWState<float>& st = m_impl->optim->state();
  for (std::size_t i = 0; i < st.names.size(); ++i) {
    for (float x : st.m[i])
      if (!std::isfinite(x)) return "the optimiser's first moment of " + st.names[i];
    for (float x : st.v[i])
      if (!std::isfinite(x) || x < 0) return "the optimiser's second moment of " + st.names[i];
  }
  return std::nullopt;
}

void Trainer::save(const fs::path& run_dir, std::size_t keep_newest) const {
  sync_to_host();
  const long step = steps_done();
  // Only a good state is saved, so that `latest` always names a checkpoint its loaders accept: every
  // parameter and moment finite, and the model's outputs finite on the start of the validation data
  // (finite weights grown huge overflow in the forward; the run's rollback must land on a model that
  // `eval` accepts).
  const std::string keep = "; the last good checkpoint stays in '" + clip(run_dir.string(), 240) + "'";
  if (const auto bad = non_finite_state())
    throw std::runtime_error("not saving a checkpoint at step " + std::to_string(step) + ": " + *bad +
                             " holds non-finite values (the run diverged)" + keep);
  if (!outputs_finite())
    throw std::runtime_error("not saving a checkpoint at step " + std::to_string(step) +
                             ": the model gives non-finite outputs (NaN or infinity) on the validation data (the "
                             "run diverged)" + keep);
  RunDirectory run = RunDirectory::claim(run_dir);
  const fs::path dir = run.checkpoint_dir(step);
  const std::string cfg_text = m_cfg.to_json();
  write_file_atomic(run.file("train_config.json"), cfg_text);
  run.set_train_config_digest(cfg_text);
  write_file_atomic(dir / "config.json", m_cfg.model.to_json());
  save_model_safetensors(*m_model, dir / "model.safetensors", {{"tttlab_step", std::to_string(step)}});
  SafetensorsWriter w;
  w.set_checksum();  // verified by resume, with every tensor name, shape and metadata value
  m_impl->optim->state().save(w, "optim.");
  const SamplerState ss = m_impl->sampler ? m_impl->sampler->state() : SamplerState{m_cfg.seed, m_impl->synthetic_next};
  w.set_metadata("tttlab_step", std::to_string(step));
  w.set_metadata("sampler_seed", std::to_string(ss.seed));
  w.set_metadata("sampler_next_batch", std::to_string(ss.next_batch));
  w.set_metadata("train_config", cfg_text);
  w.write(dir / "train_state.safetensors");
  write_file_atomic(run.file("latest"), checkpoint_name(step) + "\n");
  if (keep_newest > 0) run.prune_checkpoints(keep_newest);
}

bool Trainer::outputs_finite() const {
  // One window of at most k_finite_window bytes: enough to overflow where the model does, cheap next to
  // a checkpoint even for the largest model on the CPU.
  constexpr int k_finite_window = 256;
  const int T = std::min(m_cfg.seq_len, k_finite_window);
  std::vector<int> tokens;
  if (m_data.synthetic.empty()) {
    const std::vector<std::uint8_t>& text = m_data.val.size() > static_cast<std::size_t>(T) ? m_data.val : m_data.train;
    const std::size_t n = std::min(text.size(), static_cast<std::size_t>(T) + 1);
    tokens.assign(text.begin(), text.begin() + static_cast<std::ptrdiff_t>(n));
  } else {
    const TokenBatch row = synthetic_batch(m_data.synthetic, m_cfg.seq_len, 1, m_cfg.seed + k_val_seed_offset, 0);
    const auto r = row.row(0);
    tokens.assign(r.begin(), r.begin() + std::min<std::ptrdiff_t>(r.size(), T + 1));
  }
  if (tokens.size() < 2) return true;
  Vec<float> pos;
  const CrossEntropyStats st = m_model->eval_sequence(tokens, {}, &pos);
  if (!std::isfinite(st.loss_sum) || !pos.allFinite()) return false;
  try {
    check_finite_forward(*m_model, "");
  } catch (const NonFiniteModelError&) {
    return false;
  }
  return true;
}

namespace {

// A non-negative integer written by Trainer::save into the train state's metadata; anything else is a
// damaged file, named with its key (std::stoull would say only "stoull").
std::uint64_t metadata_u64(const SafetensorsFile& st, const char* key) {
  const std::string* v = st.metadata_value(key);
  const std::string src = clip(st.source(), 240);
  if (!v) throw std::runtime_error("'" + src + "': the sampler state is missing (no '" + key + "' in __metadata__)");
  std::uint64_t x = 0;
  const auto [end, ec] = std::from_chars(v->data(), v->data() + v->size(), x);
  if (v->empty() || ec != std::errc() || end != v->data() + v->size())
    throw std::runtime_error("'" + src + "': __metadata__ '" + key + "' must be a non-negative integer, got '" +
                             clip(*v, 40) + "'");
  return x;
}

}  // namespace

std::unique_ptr<Trainer> Trainer::resume(const fs::path& run_dir, const TrainBackendFactory& backend,
                                         const std::function<void(TrainConfig&)>& adjust) {
  const fs::path ck = resolve_checkpoint(run_dir);
  const fs::path state_path = ck / "train_state.safetensors", model_path = ck / "model.safetensors";
  const std::string src = clip(state_path.string(), 240);
  // The whole train state is read and verified before any of it is used: its SHA-256 covers the
  // moments, the header and every metadata value (the run's settings, the sampler, the step), so an
  // edited seed, step, learning rate or data path is refused, not trained on.
  const SafetensorsFile header = SafetensorsFile::read_header(state_path, k_checkpoint_max_header);
  check_memory(header.file_size(), "reading '" + src + "'");
  const SafetensorsFile st = SafetensorsFile::read(state_path, header.file_size());
  if (!st.checksum_verified())
    throw std::runtime_error("'" + src + "' records no SHA-256 checksum: a train state TTT Lab wrote always does, "
                             "so this one was written or changed by something else; it is not resumed");
  const std::string* cfg_text = st.metadata_value("train_config");
  if (!cfg_text) throw std::runtime_error("'" + src + "' has no training config");
  TrainConfig cfg = TrainConfig::from_json(*cfg_text, src + " (train_config)");
  if (adjust) {
    adjust(cfg);
    cfg.validate();
  }
  const std::uint64_t seed = metadata_u64(st, "sampler_seed");
  const std::uint64_t next = metadata_u64(st, "sampler_next_batch");
  AdamWState<float> optim = AdamWState<float>::load(st, "optim.");
  // One step everywhere it is recorded: the folder's name, the train state, the optimiser and the
  // model file. A model and a train state from different checkpoints do not make a run.
  const std::uint64_t step = metadata_u64(st, "tttlab_step");
  const SafetensorsFile model_header = SafetensorsFile::read_header(model_path, k_checkpoint_max_header);
  const std::string* model_step = model_header.metadata_value("tttlab_step");
  const auto folder_step = checkpoint_step_of(ck.filename().string());
  const std::string steps = "the train state's step " + std::to_string(step) + ", the optimiser's " +
                            std::to_string(optim.step) + ", model.safetensors' " +
                            (model_step ? "'" + clip(*model_step, 24) + "'" : std::string("(none)")) +
                            (folder_step ? ", the folder's " + std::to_string(*folder_step) : std::string());
  if (static_cast<std::uint64_t>(optim.step) != step || !model_step || *model_step != std::to_string(step) ||
      (folder_step && static_cast<std::uint64_t>(*folder_step) != step))
    throw std::runtime_error("checkpoint '" + clip(ck.string(), 240) + "' is inconsistent: " + steps +
                             " must all be the same step (files from different checkpoints?)");
  check_memory(estimate_memory(cfg.model, MemoryUse{.window = cfg.seq_len, .sequences = 1, .gradient_copies = 1,
                                                    .file_bytes = model_header.file_size()}),
               "resuming '" + clip(ck.string(), 240) + "'");
  // The model's config.json must be the run's model (a flipped flag in it is a different model).
  const fs::path cfg_path = ck / "config.json";
  const ModelConfig file_cfg = ModelConfig::from_json(read_file_text(cfg_path, 1 << 20), cfg_path.string());
  if (file_cfg.to_json() != cfg.model.to_json())
    throw std::runtime_error("'" + clip(cfg_path.string(), 240) +
                             "' does not match the model recorded in the train state: the checkpoint was changed "
                             "after it was written");
  auto t = std::make_unique<Trainer>(cfg, TextData::load(cfg), backend);
  CheckpointLoadInfo info;
  load_model_safetensors(*t->m_model, model_path, &info);
  if (!info.checksum_verified)
    throw std::runtime_error("'" + clip(model_path.string(), 240) +
                             "' records no SHA-256 checksum: a checkpoint TTT Lab wrote always does; it is not resumed");
  t->m_impl->optim->load_state(std::move(optim));
  if (t->m_impl->sampler)
    t->m_impl->sampler->set_state(SamplerState{seed, next});
  else
    t->m_impl->synthetic_next = next;
  t->m_impl->backend->push_from_host();
  return t;
}

}  // namespace tttlab
