// tttlab/train/data_parallel.hpp — data-parallel training: one model replica per rank (a GPU), each
// computing its share of every batch, the gradients summed across ranks, the same update everywhere.
//
// This is the device-independent half. The GPU half (CUDA replicas, NCCL communicators, the
// rendezvous of several processes) is in kernels/ (tttlab/kernels/multi_gpu.hpp); the CPU tests drive
// this same code with fake ranks (make_thread_group, make_cpu_replica), so what they check is what
// the GPUs run.
//
// THE STEP. A global batch of B sequences with C counted targets, R ranks (R ≤ B):
//   rank r computes the sequences shard_range(B, r, R) and leaves in its gradient buffer
//       g_r = (1/C) · ∇ Σ_{its sequences} Σ_t ℓ_t
//   (every rank divides by the GLOBAL count C, so uneven shards and masked targets weigh right);
//   all_reduce_sum makes every buffer Σ_r g_r = ∇ (1/C) Σ_{all} ℓ_t, the gradient of the batch mean,
//   which is what one device computes for the whole batch (docs/MATH.md §8.7);
//   every rank then applies the same AdamW update to the same parameters from the same summed
//   gradient, so the replicas stay equal without ever exchanging parameters.
// Only the order of floating-point sums differs from one device (the all-reduce adds the shards'
// gradients; one device adds the sequences' contributions inside its kernels), so an R-rank run
// follows the one-device loss curve to rounding, not bit for bit; one rank reproduces it exactly.
//
// SEVERAL PROCESSES (several hosts). Every process runs the same Trainer with the same settings and
// seed, so each draws the same global batch and computes only its own ranks' shards. Process p with
// n local replicas holds global ranks p·n .. p·n + n − 1 (DataParallelLayout). Each step also sums a
// fingerprint of every rank's batch, step and starting parameters; a process that disagrees (other
// data, another checkpoint) stops the job with an error instead of training on silently.
//
// FAILURES. A replica that throws, or a communicator that fails or times out, aborts every local
// communicator (so no other rank waits for it forever) and the step throws RankFailure naming the
// rank and its device. The Trainer's state is untouched by a failed step, and checkpoints are
// written by the caller (TrainingSession, rank 0 only), so the last checkpoint stays intact.
//
// THREADING: the backend is driven by one thread, like every TrainBackend. Inside step() and
// evaluate() each local replica runs on its own thread (run_parallel), which calls bind_thread()
// first; every collective is called by every rank's own thread, in the same order on all ranks.
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <span>
#include <stdexcept>
#include <string>
#include <vector>

#include "tttlab/train/backend.hpp"

namespace tttlab {

// ---- sharding ----------------------------------------------------------------------------------

// The sequences [first, first + count) of a batch of `batch` sequences that rank `rank` of `ranks`
// computes: contiguous, in rank order, sizes differing by at most one (the first batch % ranks
// ranks take one more). Throws std::invalid_argument unless 0 ≤ rank < ranks ≤ batch.
struct ShardRange {
  int first = 0;
  int count = 0;
};
ShardRange shard_range(int batch, int rank, int ranks);
// The rows of `batch` that `range` names, as a batch of their own (tokens, mask and starts copied).
TokenBatch shard_of(const TokenBatch& batch, ShardRange range);

// ---- communicators -----------------------------------------------------------------------------

// A communicator failed: a peer aborted or failed, the transport reported an error, or a collective
// did not finish within the timeout. The message says which.
class CommunicatorError : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

// Sums buffers across the ranks of a group. One object per rank. Collectives are matched by order:
// every rank calls the same sequence of them (each on its own thread). Each call returns when the
// sum is complete in this rank's buffer, or throws CommunicatorError.
class Communicator {
 public:
  virtual ~Communicator() = default;
  virtual int rank() const = 0;
  virtual int size() const = 0;
  // In place, element-wise Σ over ranks. `data` is in the memory this communicator works on: device
  // memory of its rank's GPU for NCCL, host memory for make_thread_group.
  virtual void all_reduce_sum(float* data, std::size_t n) = 0;
  // In place, over a few doubles in host memory (losses, counts, fingerprints). Exact for integers
  // below 2^53 summed over the ranks.
  virtual void all_reduce_sum_host(std::span<double> values) = 0;
  // From any thread: makes this rank's pending and later collectives throw CommunicatorError promptly.
  virtual void abort() = 0;
  // One line for people: "NCCL 2.28.9, rank 1 of 4", "threads, rank 1 of 4".
  virtual std::string describe() const = 0;
};

// `ranks` communicators over host memory for `ranks` threads of this process: fake ranks for the
// CPU tests of everything above the transport. Sums are taken in rank order (deterministic).
// A collective that waits longer than `timeout_seconds` for the other ranks throws.
std::vector<std::unique_ptr<Communicator>> make_thread_group(int ranks, double timeout_seconds = 60.0);

// ---- replicas ----------------------------------------------------------------------------------

// One rank's copy of the model and optimiser state, on its device. It is a full TrainBackend (a
// replica alone trains like any backend) with the three pieces a data-parallel step needs between
// its forward and its update. Built from a TrainBackendContext whose config's batch_size is the
// largest shard it will see.
class Replica : public TrainBackend {
 public:
  // Forward + backward over `shard`, leaving (1/denominator) · ∇(Σ of the shard's counted per-target
  // losses) in gradient_buffer() (zeroed first). Returns that Σ (nats). `denominator` is the global
  // batch's counted targets (≥ 1).
  virtual double forward_backward_shard(const TokenBatch& shard, std::int64_t denominator) = 0;
  // The flat gradient (every parameter, in one buffer) in the memory the replica's communicator works
  // on. The all-reduce sums it in place between forward_backward_shard and apply_update.
  virtual std::span<float> gradient_buffer() = 0;
  // The AdamW update (optim/adamw.hpp semantics) from gradient_buffer() as it stands.
  virtual AdamWReport apply_update() = 0;
  // Called first on each worker thread that will use the replica (a CUDA replica selects its GPU).
  virtual void bind_thread() {}
};

// The CPU engine as a replica, one thread: its own copies of the model and the optimiser state
// (taken from ctx at construction and at push_from_host; pull_to_host writes them back into ctx's).
// For tests of the data-parallel logic, and as the reference a GPU replica is checked against.
std::unique_ptr<Replica> make_cpu_replica(const TrainBackendContext& ctx);

// ---- the job's processes -----------------------------------------------------------------------

// Which process of a job this is, from the launcher's environment, in this order:
//   TTTLAB_PROCESSES, TTTLAB_PROCESS_RANK, TTTLAB_LOCAL_RANK, TTTLAB_RENDEZVOUS   (ours)
//   WORLD_SIZE, RANK, LOCAL_RANK, MASTER_ADDR + MASTER_PORT → tcp:ADDR:PORT          (torchrun and its kin)
//   OMPI_COMM_WORLD_SIZE, OMPI_COMM_WORLD_RANK, OMPI_COMM_WORLD_LOCAL_RANK          (Open MPI's mpirun)
//   PMI_SIZE, PMI_RANK, MPI_LOCALRANKID                                             (MPICH, Intel MPI)
// With none of them set: one process (processes = 1). A launcher's rendezvous can be overridden with
// TTTLAB_RENDEZVOUS. Throws std::invalid_argument for values that are not whole numbers in range.
struct JobEnvironment {
  int processes = 1;
  int process_rank = 0;
  int local_rank = 0;        // this process's index among the job's processes on this host
  std::string rendezvous;    // "tcp:HOST:PORT" or "file:PATH"; empty for one process
  std::string source;        // which variables said so ("TTTLAB_*", "torchrun", "Open MPI", "PMI"), "" for none
};
JobEnvironment job_from_environment();

// ---- the data-parallel backend -----------------------------------------------------------------

// The ranks this process holds: global ranks first_rank .. first_rank + replicas − 1 of `world`.
struct DataParallelLayout {
  int world = 1;
  int first_rank = 0;
};

// Rank `rank` failed (its replica threw, or its communicator failed). what() names the rank, its
// device and the cause.
class RankFailure : public std::runtime_error {
 public:
  RankFailure(int rank, const std::string& message) : std::runtime_error(message), m_rank(rank) {}
  int rank() const { return m_rank; }

 private:
  int m_rank;
};

struct DataParallelOptions {
  DataParallelLayout layout;
  // For tests of the failure path: global rank `fail_rank` throws at the start of the step that
  // would be update number `fail_at_step` + 1 (that is, after fail_at_step updates). −1: never.
  // `tttlab train` sets it from TTTLAB_FAIL_RANK_AT_STEP="RANK:STEP".
  int fail_rank = -1;
  std::int64_t fail_at_step = -1;
};

// Parses TTTLAB_FAIL_RANK_AT_STEP's "RANK:STEP" into options (unset or empty: unchanged). Throws
// std::invalid_argument for anything else.
void apply_fault_injection(DataParallelOptions& options, const char* value);

// The TrainBackend over this process's replicas (replicas[i] is global rank first_rank + i, paired
// with comms[i]; comms[i]->rank() must say so). step() splits the batch, runs every local replica
// on its own thread, all-reduces, updates, and checks that all ranks agree (see above). evaluate()
// splits the windows over all ranks and sums their losses; when every target's loss is asked for
// (EvalOptions::target_losses), replica 0 alone evaluates every window (single-process only).
// pull_to_host() reads replica 0; push_from_host() writes every replica.
// Throws std::invalid_argument when the lists differ in length, are empty, or a communicator's rank
// or size does not match the layout, or when the batch has fewer sequences than the world has ranks.
class DataParallelBackend final : public TrainBackend {
 public:
  DataParallelBackend(std::vector<std::unique_ptr<Replica>> replicas, std::vector<std::unique_ptr<Communicator>> comms,
                      const DataParallelOptions& options, const TrainBackendContext& ctx);
  ~DataParallelBackend() override;

  DeviceKind kind() const override;
  std::string describe() const override;
  BackendStep step(const TokenBatch& batch) override;
  std::int64_t step_count() const override;
  EvalReport evaluate(std::span<const std::uint8_t> val, int seq_len, const EvalOptions& options) override;
  void pull_to_host() override;
  void push_from_host() override;
  std::vector<RankStepTiming> rank_timings() const override { return m_timings; }
  bool any_rank(bool flag) override;

  int world() const { return m_options.layout.world; }
  int local_ranks() const { return static_cast<int>(m_replicas.size()); }
  Replica& replica(int i) { return *m_replicas.at(static_cast<std::size_t>(i)); }

 private:
  // Runs fn(i) for every local replica on its own thread; on the first failure aborts every local
  // communicator and throws RankFailure naming the first rank that failed for a reason of its own.
  template <class F>
  void on_every_rank(const char* what, F&& fn);
  void check_agreement(std::span<const double> sums) const;
  std::uint64_t parameter_fingerprint() const;

  std::vector<std::unique_ptr<Replica>> m_replicas;
  std::vector<std::unique_ptr<Communicator>> m_comms;
  DataParallelOptions m_options;
  const Model<float>* m_host_model = nullptr;
  std::uint64_t m_param_fingerprint = 0;  // of the host model at construction / push_from_host
  std::vector<RankStepTiming> m_timings;
  bool m_broken = false;  // a failed collective left the communicators aborted: no more steps
};

// A fingerprint (FNV-1a, 64 bits) of bytes, for the agreement check.
std::uint64_t fingerprint_bytes(const void* data, std::size_t bytes, std::uint64_t seed = 1469598103934665603ull);

}  // namespace tttlab
