// Data-parallel training, the device-independent half (see tttlab/train/data_parallel.hpp).
#include "tttlab/train/data_parallel.hpp"

#include <algorithm>
#include <array>
#include <chrono>
#include <cmath>
#include <condition_variable>
#include <cstdlib>
#include <cstring>
#include <exception>
#include <functional>
#include <mutex>

#include "tttlab/data/batches.hpp"
#include "tttlab/model/model.hpp"
#include "tttlab/train/trainer.hpp"
#include "tttlab/util/parallel.hpp"

namespace tttlab {

// ---- sharding ----------------------------------------------------------------------------------

ShardRange shard_range(int batch, int rank, int ranks) {
  if (ranks < 1 || rank < 0 || rank >= ranks)
    throw std::invalid_argument("shard_range: rank " + std::to_string(rank) + " of " + std::to_string(ranks));
  if (batch < ranks)
    throw std::invalid_argument("a batch of " + std::to_string(batch) + " sequences cannot be shared by " +
                                std::to_string(ranks) + " ranks: each needs at least one (raise --batch)");
  const int base = batch / ranks, extra = batch % ranks;
  return ShardRange{rank * base + std::min(rank, extra), base + (rank < extra ? 1 : 0)};
}

TokenBatch shard_of(const TokenBatch& batch, ShardRange range) {
  if (range.first < 0 || range.count < 0 || range.first + range.count > batch.batch)
    throw std::invalid_argument("shard_of: rows " + std::to_string(range.first) + " + " + std::to_string(range.count) +
                                " of a batch of " + std::to_string(batch.batch));
  TokenBatch s;
  s.batch = range.count;
  s.seq_len = batch.seq_len;
  const std::size_t row = std::size_t(batch.seq_len) + 1;
  s.tokens.assign(batch.tokens.begin() + std::ptrdiff_t(range.first * row),
                  batch.tokens.begin() + std::ptrdiff_t((range.first + range.count) * row));
  if (!batch.mask.empty())
    s.mask.assign(batch.mask.begin() + std::ptrdiff_t(std::size_t(range.first) * batch.seq_len),
                  batch.mask.begin() + std::ptrdiff_t(std::size_t(range.first + range.count) * batch.seq_len));
  if (!batch.starts.empty())
    s.starts.assign(batch.starts.begin() + range.first, batch.starts.begin() + range.first + range.count);
  return s;
}

std::uint64_t fingerprint_bytes(const void* data, std::size_t bytes, std::uint64_t seed) {
  const auto* p = static_cast<const unsigned char*>(data);
  std::uint64_t h = seed;
  for (std::size_t i = 0; i < bytes; ++i) {
    h ^= p[i];
    h *= 1099511628211ull;
  }
  return h;
}

// ---- fake ranks: threads of one process --------------------------------------------------------
namespace {

struct ThreadGroupState {
  int ranks = 1;
  std::chrono::duration<double> timeout{60.0};
  std::mutex mutex;
  std::condition_variable cv;
  bool aborted = false;
  std::string abort_reason;
  std::uint64_t generation = 0;
  int arrived = 0;
  // The collective in progress: each rank's buffer, and the sum.
  std::vector<float*> floats;
  std::vector<double*> doubles;
  std::vector<std::size_t> counts;
  std::vector<double> sum;

  // Every rank arrives; the last one runs `last` (under the lock) and releases the others.
  void barrier(std::unique_lock<std::mutex>& lock, int rank, const std::function<void()>& last) {
    if (aborted) throw CommunicatorError("rank " + std::to_string(rank) + ": the group was aborted (" + abort_reason + ")");
    const std::uint64_t gen = generation;
    if (++arrived == ranks) {
      arrived = 0;
      try {
        if (last) last();
      } catch (const std::exception& e) {
        aborted = true;
        abort_reason = e.what();
        cv.notify_all();
        throw CommunicatorError(e.what());
      }
      ++generation;
      cv.notify_all();
      return;
    }
    if (!cv.wait_for(lock, timeout, [&] { return generation != gen || aborted; })) {
      aborted = true;
      abort_reason = "rank " + std::to_string(rank) + " waited " + std::to_string(timeout.count()) +
                     " s for the other ranks";
      cv.notify_all();
    }
    if (generation == gen) throw CommunicatorError("rank " + std::to_string(rank) + ": " + abort_reason);
  }
};

class ThreadCommunicator final : public Communicator {
 public:
  ThreadCommunicator(std::shared_ptr<ThreadGroupState> state, int rank) : m_state(std::move(state)), m_rank(rank) {}
  int rank() const override { return m_rank; }
  int size() const override { return m_state->ranks; }

  void all_reduce_sum(float* data, std::size_t n) override {
    ThreadGroupState& g = *m_state;
    std::unique_lock<std::mutex> lock(g.mutex);
    g.floats[m_rank] = data;
    g.counts[m_rank] = n;
    g.barrier(lock, m_rank, [&g] {
      for (std::size_t c : g.counts)
        if (c != g.counts[0]) throw std::runtime_error("all_reduce_sum: the ranks passed buffers of different sizes");
      g.sum.assign(g.counts[0], 0.0);
      for (int r = 0; r < g.ranks; ++r)  // rank order: deterministic
        for (std::size_t k = 0; k < g.counts[0]; ++k) g.sum[k] += g.floats[r][k];
    });
    for (std::size_t k = 0; k < n; ++k) data[k] = static_cast<float>(g.sum[k]);
    g.barrier(lock, m_rank, {});  // nobody reuses `sum` before every rank has read it
  }

  void all_reduce_sum_host(std::span<double> values) override {
    ThreadGroupState& g = *m_state;
    std::unique_lock<std::mutex> lock(g.mutex);
    g.doubles[m_rank] = values.data();
    g.counts[m_rank] = values.size();
    g.barrier(lock, m_rank, [&g] {
      for (std::size_t c : g.counts)
        if (c != g.counts[0]) throw std::runtime_error("all_reduce_sum_host: the ranks passed different counts");
      g.sum.assign(g.counts[0], 0.0);
      for (int r = 0; r < g.ranks; ++r)
        for (std::size_t k = 0; k < g.counts[0]; ++k) g.sum[k] += g.doubles[r][k];
    });
    std::copy(g.sum.begin(), g.sum.begin() + std::ptrdiff_t(values.size()), values.begin());
    g.barrier(lock, m_rank, {});
  }

  void abort() override {
    ThreadGroupState& g = *m_state;
    std::lock_guard<std::mutex> lock(g.mutex);
    if (!g.aborted) g.abort_reason = "rank " + std::to_string(m_rank) + " aborted the group";
    g.aborted = true;
    g.cv.notify_all();
  }

  std::string describe() const override {
    return "threads, rank " + std::to_string(m_rank) + " of " + std::to_string(m_state->ranks);
  }

 private:
  std::shared_ptr<ThreadGroupState> m_state;
  int m_rank;
};

// ---- the CPU engine as one replica -------------------------------------------------------------

void copy_params(Model<float>& to, Model<float>& from) {
  std::vector<Eigen::Map<Mat<float>>> src;
  from.for_each_param([&](Eigen::Map<Mat<float>> m, const std::string&) { src.push_back(m); });
  std::size_t k = 0;
  to.for_each_param([&](Eigen::Map<Mat<float>> m, const std::string&) { m = src.at(k++); });
}

class CpuReplica final : public Replica {
 public:
  explicit CpuReplica(const TrainBackendContext& ctx)
      : m_ctx(ctx),
        m_model(ctx.model->zeros_like()),
        m_grad(ctx.model->zeros_like()),
        m_optim(std::make_unique<AdamW<float>>(ctx.optim->config(), ctx.optim->schedule())) {
    m_grad->for_each_param([&](Eigen::Map<Mat<float>> m, const std::string& name) {
      m_grad_views.push_back(m);
      m_names.push_back(name);
      m_size += static_cast<std::size_t>(m.size());
    });
    m_model->for_each_param([&](Eigen::Map<Mat<float>> m, const std::string&) { m_param_views.push_back(m); });
    m_flat.resize(m_size);
    push_from_host();
  }

  DeviceKind kind() const override { return DeviceKind::CPU; }
  std::string describe() const override { return "CPU replica (1 thread)"; }

  double forward_backward_shard(const TokenBatch& shard, std::int64_t denominator) override {
    m_grad->set_zero();
    const double loss = cpu_train_rows(*m_model, shard, 0, shard.batch,
                                       static_cast<long>(std::max<std::int64_t>(denominator, 1)), *m_grad);
    std::size_t o = 0;
    for (const auto& g : m_grad_views) {
      std::copy(g.data(), g.data() + g.size(), m_flat.data() + o);
      o += static_cast<std::size_t>(g.size());
    }
    return loss;
  }

  std::span<float> gradient_buffer() override { return m_flat; }

  AdamWReport apply_update() override {
    std::vector<NamedParam<float>> params;
    std::size_t o = 0;
    const ModelConfig& mc = m_model->config();
    for (std::size_t k = 0; k < m_grad_views.size(); ++k) {
      const std::size_t n = static_cast<std::size_t>(m_grad_views[k].size());
      if (mc.trains(m_names[k]))
        params.push_back({m_names[k], std::span<float>(m_param_views[k].data(), n),
                          std::span<const float>(m_flat.data() + o, n)});
      o += n;
    }
    return m_optim->step(params);
  }

  BackendStep step(const TokenBatch& batch) override {
    BackendStep s;
    s.loss_sum = forward_backward_shard(batch, batch.counted_targets());
    s.optim = apply_update();
    return s;
  }

  std::int64_t step_count() const override { return m_optim->step_count(); }

  EvalReport evaluate(std::span<const std::uint8_t> val, int seq_len, const EvalOptions& options) override {
    TrainBackendContext c = m_ctx;
    c.model = m_model.get();
    c.optim = m_optim.get();
    c.threads = 1;
    return make_cpu_train_backend(c)->evaluate(val, seq_len, options);
  }

  void pull_to_host() override {
    copy_params(*m_ctx.model, *m_model);
    m_ctx.optim->load_state(m_optim->state());
  }
  void push_from_host() override {
    copy_params(*m_model, *m_ctx.model);
    m_optim->load_state(m_ctx.optim->state());
  }

 private:
  TrainBackendContext m_ctx;
  std::unique_ptr<Model<float>> m_model, m_grad;
  std::unique_ptr<AdamW<float>> m_optim;
  std::vector<Eigen::Map<Mat<float>>> m_grad_views, m_param_views;
  std::vector<std::string> m_names;
  std::size_t m_size = 0;
  std::vector<float> m_flat;
};

// The agreement check's sums: [loss, ranks, 4 fingerprint parts, their 4 squares].
constexpr int k_fp_parts = 4;
constexpr std::size_t k_step_sums = 2 + 2 * k_fp_parts;

}  // namespace

std::vector<std::unique_ptr<Communicator>> make_thread_group(int ranks, double timeout_seconds) {
  if (ranks < 1) throw std::invalid_argument("make_thread_group: " + std::to_string(ranks) + " ranks");
  auto state = std::make_shared<ThreadGroupState>();
  state->ranks = ranks;
  state->timeout = std::chrono::duration<double>(timeout_seconds);
  state->floats.assign(ranks, nullptr);
  state->doubles.assign(ranks, nullptr);
  state->counts.assign(ranks, 0);
  std::vector<std::unique_ptr<Communicator>> out;
  for (int r = 0; r < ranks; ++r) out.push_back(std::make_unique<ThreadCommunicator>(state, r));
  return out;
}

std::unique_ptr<Replica> make_cpu_replica(const TrainBackendContext& ctx) {
  if (!ctx.model || !ctx.optim || !ctx.config) throw std::invalid_argument("make_cpu_replica: incomplete context");
  return std::make_unique<CpuReplica>(ctx);
}

void apply_fault_injection(DataParallelOptions& options, const char* value) {
  if (!value || !*value) return;
  const std::string s(value);
  const auto colon = s.find(':');
  char* end = nullptr;
  const std::string what = "TTTLAB_FAIL_RANK_AT_STEP must be RANK:STEP (two whole numbers), got '" + s + "'";
  if (colon == std::string::npos || colon == 0) throw std::invalid_argument(what);
  const long rank = std::strtol(s.c_str(), &end, 10);
  if (end != s.c_str() + colon || rank < 0) throw std::invalid_argument(what);
  const long long step = std::strtoll(s.c_str() + colon + 1, &end, 10);
  if (*end != '\0' || end == s.c_str() + colon + 1 || step < 0) throw std::invalid_argument(what);
  options.fail_rank = static_cast<int>(rank);
  options.fail_at_step = step;
}

// ---- the job's processes -----------------------------------------------------------------------

namespace {

int env_int(const char* name, int lo, int hi) {
  const char* v = std::getenv(name);
  char* end = nullptr;
  const long x = std::strtol(v, &end, 10);
  if (end == v || *end != '\0' || x < lo || x > hi)
    throw std::invalid_argument(std::string(name) + "='" + v + "' is not a whole number in " + std::to_string(lo) +
                                ".." + std::to_string(hi));
  return static_cast<int>(x);
}

bool has_env(const char* name) {
  const char* v = std::getenv(name);
  return v && *v;
}

}  // namespace

JobEnvironment job_from_environment() {
  struct Scheme {
    const char *size, *rank, *local, *source;
  };
  const Scheme schemes[] = {
      {"TTTLAB_PROCESSES", "TTTLAB_PROCESS_RANK", "TTTLAB_LOCAL_RANK", "TTTLAB_*"},
      {"WORLD_SIZE", "RANK", "LOCAL_RANK", "torchrun"},
      {"OMPI_COMM_WORLD_SIZE", "OMPI_COMM_WORLD_RANK", "OMPI_COMM_WORLD_LOCAL_RANK", "Open MPI"},
      {"PMI_SIZE", "PMI_RANK", "MPI_LOCALRANKID", "PMI"},
  };
  JobEnvironment job;
  for (const Scheme& s : schemes) {
    if (!has_env(s.size)) continue;
    job.processes = env_int(s.size, 1, 1 << 20);
    job.process_rank = has_env(s.rank) ? env_int(s.rank, 0, job.processes - 1) : 0;
    job.local_rank = has_env(s.local) ? env_int(s.local, 0, 1 << 20) : 0;
    job.source = s.source;
    if (has_env(s.rank) || job.processes == 1) break;
    throw std::invalid_argument(std::string(s.size) + " is set but " + s.rank + " is not");
  }
  if (has_env("TTTLAB_RENDEZVOUS"))
    job.rendezvous = std::getenv("TTTLAB_RENDEZVOUS");
  else if (has_env("MASTER_ADDR") && has_env("MASTER_PORT"))
    job.rendezvous = std::string("tcp:") + std::getenv("MASTER_ADDR") + ":" + std::getenv("MASTER_PORT");
  return job;
}

// ---- the data-parallel backend -----------------------------------------------------------------

DataParallelBackend::DataParallelBackend(std::vector<std::unique_ptr<Replica>> replicas,
                                         std::vector<std::unique_ptr<Communicator>> comms,
                                         const DataParallelOptions& options, const TrainBackendContext& ctx)
    : m_replicas(std::move(replicas)), m_comms(std::move(comms)), m_options(options), m_host_model(ctx.model) {
  const DataParallelLayout& l = m_options.layout;
  if (m_replicas.empty() || m_replicas.size() != m_comms.size())
    throw std::invalid_argument("data-parallel: " + std::to_string(m_replicas.size()) + " replicas and " +
                                std::to_string(m_comms.size()) + " communicators");
  if (l.world < 1 || l.first_rank < 0 || l.first_rank + local_ranks() > l.world)
    throw std::invalid_argument("data-parallel: ranks " + std::to_string(l.first_rank) + ".." +
                                std::to_string(l.first_rank + local_ranks() - 1) + " of a world of " +
                                std::to_string(l.world));
  for (int i = 0; i < local_ranks(); ++i)
    if (m_comms[i]->rank() != l.first_rank + i || m_comms[i]->size() != l.world)
      throw std::invalid_argument("data-parallel: communicator " + std::to_string(i) + " is " + m_comms[i]->describe() +
                                  ", expected rank " + std::to_string(l.first_rank + i) + " of " + std::to_string(l.world));
  if (ctx.config && ctx.config->batch_size < l.world)
    throw std::invalid_argument("--batch " + std::to_string(ctx.config->batch_size) + " is smaller than the " +
                                std::to_string(l.world) + " GPUs of the job: each GPU needs at least one sequence");
  m_param_fingerprint = parameter_fingerprint();
}

DataParallelBackend::~DataParallelBackend() {
  // Communicators first: after a failure, theirs are the collectives still waiting on a replica's
  // device, which must be stopped before the replica waits for its work and frees its memory.
  m_comms.clear();
  m_replicas.clear();
}

DeviceKind DataParallelBackend::kind() const { return m_replicas.front()->kind(); }

std::string DataParallelBackend::describe() const {
  std::string s = m_replicas.front()->describe();
  if (world() > 1) {
    s += local_ranks() > 1 ? " and " + std::to_string(local_ranks() - 1) + " more like it" : "";
    s += "; data-parallel over " + std::to_string(world()) + " ranks";
    if (local_ranks() < world())
      s += " (ranks " + std::to_string(m_options.layout.first_rank) + ".." +
           std::to_string(m_options.layout.first_rank + local_ranks() - 1) + " in this process)";
    const std::string c = m_comms.front()->describe();
    s += ", " + c.substr(0, c.find(','));
  }
  return s;
}

std::int64_t DataParallelBackend::step_count() const { return m_replicas.front()->step_count(); }

std::uint64_t DataParallelBackend::parameter_fingerprint() const {
  // One process uploads every replica from the same host model: nothing to compare, and hashing the
  // parameters costs a pass over them. Several processes each loaded their own.
  if (!m_host_model || local_ranks() == world()) return 0;
  std::uint64_t h = 1469598103934665603ull;
  const_cast<Model<float>*>(m_host_model)->for_each_param([&](Eigen::Map<Mat<float>> m, const std::string&) {
    h = fingerprint_bytes(m.data(), static_cast<std::size_t>(m.size()) * sizeof(float), h);
  });
  return h;
}

template <class F>
void DataParallelBackend::on_every_rank(const char* what, F&& fn) {
  if (m_broken)
    throw std::runtime_error(std::string("data-parallel ") + what +
                             ": an earlier failure stopped this job's ranks; start it again (--resume)");
  const int n = local_ranks();
  std::vector<std::exception_ptr> errors(n);
  std::vector<bool> own(n, false);  // failed for a reason of its own, not because a peer aborted
  std::mutex mutex;
  // Records rank i's failure (inside its catch block) and releases every local rank waiting for it.
  const auto failed = [&](int i, bool of_its_own) {
    {
      std::lock_guard<std::mutex> lock(mutex);
      errors[i] = std::current_exception();
      own[i] = of_its_own;
    }
    for (auto& c : m_comms) c->abort();
  };
  run_parallel(n, [&](int i) {
    try {
      m_replicas[i]->bind_thread();
      fn(i);
    } catch (const CommunicatorError&) {
      failed(i, false);
    } catch (...) {
      failed(i, true);
    }
  });
  int first = -1;
  for (int i = 0; i < n && first < 0; ++i)
    if (errors[i] && own[i]) first = i;
  for (int i = 0; i < n && first < 0; ++i)
    if (errors[i]) first = i;
  if (first < 0) return;
  m_broken = true;
  std::string cause;
  try {
    std::rethrow_exception(errors[first]);
  } catch (const std::exception& e) {
    cause = e.what();
  } catch (...) {
    cause = "an unknown error";
  }
  const int rank = m_options.layout.first_rank + first;
  throw RankFailure(rank, "rank " + std::to_string(rank) + " of " + std::to_string(world()) + " (" +
                              m_replicas[first]->describe() + ") failed during " + what + " after update " +
                              std::to_string(step_count()) + ": " + cause +
                              "; every rank of this process was stopped and nothing of this step was kept");
}

void DataParallelBackend::check_agreement(std::span<const double> sums) const {
  const double r = sums[1];
  bool same = r == double(world());
  for (int k = 0; k < k_fp_parts && same; ++k) {
    const double part = sums[2 + k] / r;  // all equal ⇔ Σx² = (Σx)² / R (Cauchy–Schwarz), exact here
    same = part == std::floor(part) && sums[2 + k_fp_parts + k] == r * part * part;
  }
  if (!same)
    throw std::runtime_error(
        "the ranks of this job disagree on the batch, the step or the starting parameters (or a process "
        "counted its ranks differently): start every process with the same command, data, seed and "
        "checkpoint, and the same --gpus");
}

BackendStep DataParallelBackend::step(const TokenBatch& batch) {
  const int R = world();
  if (batch.batch < R)
    throw std::invalid_argument("a batch of " + std::to_string(batch.batch) + " sequences cannot be shared by " +
                                std::to_string(R) + " GPUs");
  const std::int64_t denominator = std::max<std::int64_t>(1, batch.counted_targets());
  // What every rank must agree on: the batch, the step and the parameters it started from.
  std::uint64_t fp = fingerprint_bytes(batch.tokens.data(), batch.tokens.size() * sizeof(Token), m_param_fingerprint);
  fp = fingerprint_bytes(batch.mask.data(), batch.mask.size(), fp);
  const std::int64_t before = step_count();
  fp = fingerprint_bytes(&before, sizeof before, fp);
  const int n = local_ranks();
  std::vector<std::array<double, k_step_sums>> sums(n);
  std::vector<AdamWReport> reports(n);
  std::vector<RankStepTiming> timings(n);
  on_every_rank("a training step", [&](int i) {
    const auto t0 = std::chrono::steady_clock::now();
    const int rank = m_options.layout.first_rank + i;
    if (rank == m_options.fail_rank && before == m_options.fail_at_step)
      throw std::runtime_error("injected failure (TTTLAB_FAIL_RANK_AT_STEP=" + std::to_string(rank) + ":" +
                               std::to_string(before) + ")");
    const TokenBatch shard = shard_of(batch, shard_range(batch.batch, rank, R));
    const double loss = m_replicas[i]->forward_backward_shard(shard, denominator);
    const std::span<float> g = m_replicas[i]->gradient_buffer();
    m_comms[i]->all_reduce_sum(g.data(), g.size());
    auto& s = sums[i];
    s[0] = loss;
    s[1] = 1.0;
    for (int k = 0; k < k_fp_parts; ++k) {
      const double part = double((fp >> (16 * k)) & 0xffffu);
      s[2 + k] = part;
      s[2 + k_fp_parts + k] = part * part;
    }
    m_comms[i]->all_reduce_sum_host(s);
    // Checked before the update: a disagreeing job changes nothing.
    check_agreement(s);
    reports[i] = m_replicas[i]->apply_update();
    timings[i] = RankStepTiming{rank, static_cast<long>(shard.batch) * shard.seq_len,
                                std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count()};
  });
  for (int i = 1; i < n; ++i)
    if (reports[i].skipped != reports[0].skipped || reports[i].step != reports[0].step ||
        reports[i].grad_norm != reports[0].grad_norm) {
      m_broken = true;
      throw std::logic_error("data-parallel: the replicas' updates differ (rank " + std::to_string(i) +
                             "'s gradient norm " + std::to_string(reports[i].grad_norm) + ", rank 0's " +
                             std::to_string(reports[0].grad_norm) + ")");
    }
  m_timings = timings;
  BackendStep out;
  out.loss_sum = sums[0][0];
  out.optim = reports[0];
  return out;
}

EvalReport DataParallelBackend::evaluate(std::span<const std::uint8_t> val, int seq_len, const EvalOptions& options) {
  if (options.target_losses) {
    if (local_ranks() < world())
      throw std::invalid_argument("every target's loss is computed by one process; run this evaluation with one process");
    EvalReport r;
    on_every_rank("an evaluation", [&](int i) {
      if (i == 0) r = m_replicas[0]->evaluate(val, seq_len, options);
    });
    return r;
  }
  const SequentialWindows all(val, 1, seq_len, options.max_windows);
  const std::int64_t W = all.windows();
  if (W <= 0) throw std::runtime_error("the validation text is shorter than one window");
  const int R = world(), n = local_ranks();
  // Per rank: [Σ loss, targets, correct, windows, accuracy measured, loss by position × windows (T)].
  std::vector<std::vector<double>> sums(n, std::vector<double>(5 + std::size_t(seq_len), 0.0));
  std::mutex progress_mutex;
  std::vector<std::int64_t> done(n, 0);
  on_every_rank("an evaluation", [&](int i) {
    const int rank = m_options.layout.first_rank + i;
    const std::int64_t lo = W * rank / R, hi = W * (rank + 1) / R;
    auto& s = sums[i];
    if (hi > lo) {
      EvalOptions o;
      if (options.progress)
        o.progress = [&](std::int64_t d, std::int64_t) {
          std::lock_guard<std::mutex> lock(progress_mutex);
          done[i] = d;
          std::int64_t total = 0;
          for (std::int64_t x : done) total += x;
          options.progress(total * R / n, W);  // this process's share, scaled to the whole
        };
      const auto part = val.subspan(std::size_t(lo) * seq_len, std::size_t(hi - lo) * seq_len + 1);
      const EvalReport e = m_replicas[i]->evaluate(part, seq_len, o);
      const double w = double(hi - lo);
      s[0] = e.loss * double(e.targets);
      s[1] = double(e.targets);
      s[2] = e.accuracy * double(e.targets);
      s[3] = w;
      s[4] = e.accuracy_measured ? 1.0 : 0.0;
      for (int t = 0; t < seq_len && t < int(e.loss_by_position.size()); ++t) s[5 + t] = e.loss_by_position[t] * w;
    } else {
      s[4] = 1.0;  // nothing to measure: no objection
    }
    m_comms[i]->all_reduce_sum_host(s);
  });
  const auto& s = sums[0];
  EvalReport r;
  r.targets = static_cast<long>(std::llround(s[1]));
  r.loss = s[0] / s[1];
  r.bpb = r.loss / std::log(2.0);
  r.accuracy = std::round(s[2]) / s[1];
  r.accuracy_measured = s[4] == double(R);
  r.loss_by_position.assign(seq_len, 0.0);
  for (int t = 0; t < seq_len; ++t) r.loss_by_position[t] = s[5 + t] / s[3];
  return r;
}

bool DataParallelBackend::any_rank(bool flag) {
  if (local_ranks() == world()) return flag;  // one process: nothing to agree with
  std::vector<std::array<double, 1>> votes(local_ranks());
  on_every_rank("agreeing on whether to stop", [&](int i) {
    votes[i][0] = i == 0 && flag ? 1.0 : 0.0;
    m_comms[i]->all_reduce_sum_host(votes[i]);
  });
  return votes[0][0] > 0;
}

void DataParallelBackend::pull_to_host() {
  on_every_rank("copying the model to the host", [&](int i) {
    if (i == 0) m_replicas[0]->pull_to_host();
  });
}

void DataParallelBackend::push_from_host() {
  on_every_rank("copying the model to the GPUs", [&](int i) { m_replicas[i]->push_from_host(); });
  m_param_fingerprint = parameter_fingerprint();
}

}  // namespace tttlab
