// Data-parallel training on several GPUs through NCCL (see tttlab/kernels/multi_gpu.hpp).
#include "tttlab/kernels/multi_gpu.hpp"

#include <arpa/inet.h>
#include <cuda_runtime_api.h>
#include <dlfcn.h>
#include <netdb.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <mutex>
#include <stdexcept>
#include <string>
#include <thread>

#include "common/cuda_check.hpp"
#include "tttlab/io/atomic_file.hpp"
#include "tttlab/kernels/cuda_device.hpp"
#include "tttlab/model/model.hpp"
#include "tttlab/train/trainer.hpp"

#if __has_include(<nccl.h>)
#include <nccl.h>
#define TTTLAB_NCCL_HEADER 1
#else
#define TTTLAB_NCCL_HEADER 0
#endif

namespace tttlab::kernels {
namespace fs = std::filesystem;
using Clock = std::chrono::steady_clock;

int cuda_device_count() {
  int n = 0;
  if (cudaGetDeviceCount(&n) != cudaSuccess) {
    cudaGetLastError();
    return 0;
  }
  return n;
}

#if TTTLAB_NCCL_HEADER

// ---- NCCL, opened at run time ------------------------------------------------------------------

namespace {

struct NcclLibrary {
  void* handle = nullptr;
  std::string error;
  int version = 0;
  decltype(&ncclGetVersion) GetVersion = nullptr;
  decltype(&ncclGetUniqueId) GetUniqueId = nullptr;
  decltype(&ncclCommInitAll) CommInitAll = nullptr;
  decltype(&ncclCommInitRank) CommInitRank = nullptr;
  decltype(&ncclGroupStart) GroupStart = nullptr;
  decltype(&ncclGroupEnd) GroupEnd = nullptr;
  decltype(&ncclAllReduce) AllReduce = nullptr;
  decltype(&ncclCommAbort) CommAbort = nullptr;
  decltype(&ncclCommDestroy) CommDestroy = nullptr;
  decltype(&ncclCommGetAsyncError) CommGetAsyncError = nullptr;
  decltype(&ncclGetErrorString) GetErrorString = nullptr;
};

const NcclLibrary& nccl() {
  static const NcclLibrary lib = [] {
    NcclLibrary l;
    // NVLink multicast (NVLS) is of no use at these sizes; leave a user's explicit setting alone.
    setenv("NCCL_NVLS_ENABLE", "0", 0);
    std::vector<std::string> names;
    if (const char* file = std::getenv("TTTLAB_NCCL"); file && *file) names.push_back(file);
    names.insert(names.end(), {"libnccl.so.2", "/usr/local/cuda/lib64/libnccl.so.2", "/usr/local/cuda/lib/libnccl.so.2"});
    std::string tried;
    for (const std::string& n : names) {
      l.handle = dlopen(n.c_str(), RTLD_NOW | RTLD_LOCAL);
      if (l.handle) break;
      tried += (tried.empty() ? "" : ", ") + n;
    }
    if (!l.handle) {
      l.error = "NCCL (libnccl.so.2) was not found (tried " + tried + "); install it, or name the file in TTTLAB_NCCL";
      return l;
    }
    bool ok = true;
    const auto sym = [&](auto& fn, const char* name) {
      fn = reinterpret_cast<std::remove_reference_t<decltype(fn)>>(dlsym(l.handle, name));
      if (!fn) {
        ok = false;
        l.error = std::string("the NCCL library lacks ") + name;
      }
    };
    sym(l.GetVersion, "ncclGetVersion");
    sym(l.GetUniqueId, "ncclGetUniqueId");
    sym(l.CommInitAll, "ncclCommInitAll");
    sym(l.CommInitRank, "ncclCommInitRank");
    sym(l.GroupStart, "ncclGroupStart");
    sym(l.GroupEnd, "ncclGroupEnd");
    sym(l.AllReduce, "ncclAllReduce");
    sym(l.CommAbort, "ncclCommAbort");
    sym(l.CommDestroy, "ncclCommDestroy");
    sym(l.CommGetAsyncError, "ncclCommGetAsyncError");
    sym(l.GetErrorString, "ncclGetErrorString");
    if (!ok) {
      dlclose(l.handle);
      l.handle = nullptr;
      return l;
    }
    l.GetVersion(&l.version);
    return l;
  }();
  return lib;
}

void nccl_check(ncclResult_t r, const char* what) {
  if (r != ncclSuccess) throw std::runtime_error(std::string("NCCL: ") + what + " failed: " + nccl().GetErrorString(r));
}

std::string version_text(int v) {
  // NCCL_VERSION_CODE: major·10000 + minor·100 + patch (2.9 and later).
  return std::to_string(v / 10000) + "." + std::to_string(v / 100 % 100) + "." + std::to_string(v % 100);
}

// ---- the rendezvous: NCCL's unique id from process 0 to the others ------------------------------

constexpr char k_magic[8] = {'T', 'T', 'T', 'L', 'A', 'B', 'I', 'D'};

double seconds_since(Clock::time_point t0) { return std::chrono::duration<double>(Clock::now() - t0).count(); }

class Socket {
 public:
  explicit Socket(int fd = -1) : m_fd(fd) {}
  ~Socket() {
    if (m_fd >= 0) ::close(m_fd);
  }
  Socket(Socket&& o) noexcept : m_fd(o.m_fd) { o.m_fd = -1; }
  Socket& operator=(Socket&& o) noexcept {
    std::swap(m_fd, o.m_fd);
    return *this;
  }
  int fd() const { return m_fd; }

 private:
  int m_fd;
};

// Sends or receives exactly n bytes before the deadline.
void transfer(int fd, void* data, std::size_t n, bool send, Clock::time_point deadline, const std::string& what) {
  auto* p = static_cast<char*>(data);
  while (n > 0) {
    const double left = std::chrono::duration<double>(deadline - Clock::now()).count();
    if (left <= 0) throw std::runtime_error(what + ": timed out");
    pollfd pfd{fd, short(send ? POLLOUT : POLLIN), 0};
    if (::poll(&pfd, 1, int(std::min(left, 1.0) * 1000) + 1) <= 0) continue;
    const ssize_t k = send ? ::send(fd, p, n, MSG_NOSIGNAL) : ::recv(fd, p, n, 0);
    if (k <= 0) throw std::runtime_error(what + ": the connection closed (" + std::strerror(errno) + ")");
    p += k;
    n -= std::size_t(k);
  }
}

addrinfo* resolve(const std::string& host, const std::string& port, bool passive) {
  addrinfo hints{};
  hints.ai_family = AF_UNSPEC;
  hints.ai_socktype = SOCK_STREAM;
  hints.ai_flags = passive ? AI_PASSIVE : 0;
  addrinfo* res = nullptr;
  const int e = getaddrinfo(host.empty() ? nullptr : host.c_str(), port.c_str(), &hints, &res);
  if (e != 0) throw std::runtime_error("rendezvous tcp:" + host + ":" + port + ": " + gai_strerror(e));
  return res;
}

struct Hello {
  char magic[8];
  std::uint32_t process_rank, processes;
};

ncclUniqueId tcp_rendezvous(const std::string& host, const std::string& port, const JobEnvironment& job,
                            double timeout, const ncclUniqueId* id) {
  const auto deadline = Clock::now() + std::chrono::duration_cast<Clock::duration>(std::chrono::duration<double>(timeout));
  const std::string where = "rendezvous tcp:" + host + ":" + port;
  if (job.process_rank == 0) {
    addrinfo* res = resolve(host, port, true);
    Socket server;
    std::string err = "no address";
    for (addrinfo* a = res; a; a = a->ai_next) {
      Socket s(::socket(a->ai_family, a->ai_socktype, a->ai_protocol));
      if (s.fd() < 0) continue;
      const int one = 1;
      setsockopt(s.fd(), SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
      if (::bind(s.fd(), a->ai_addr, a->ai_addrlen) == 0 && ::listen(s.fd(), 64) == 0) {
        server = std::move(s);
        break;
      }
      err = std::strerror(errno);
    }
    freeaddrinfo(res);
    if (server.fd() < 0) throw std::runtime_error(where + ": process 0 cannot listen there: " + err);
    std::vector<Socket> peers;
    std::vector<bool> seen(job.processes, false);
    seen[0] = true;
    while (int(peers.size()) < job.processes - 1) {
      const double left = std::chrono::duration<double>(deadline - Clock::now()).count();
      if (left <= 0)
        throw std::runtime_error(where + ": " + std::to_string(peers.size() + 1) + " of " +
                                 std::to_string(job.processes) + " processes arrived within " + std::to_string(int(timeout)) +
                                 " s; start every process of the job (with the same --gpus)");
      pollfd pfd{server.fd(), POLLIN, 0};
      if (::poll(&pfd, 1, int(std::min(left, 1.0) * 1000) + 1) <= 0) continue;
      Socket c(::accept(server.fd(), nullptr, nullptr));
      if (c.fd() < 0) continue;
      Hello h{};
      try {
        transfer(c.fd(), &h, sizeof h, false, deadline, where);
      } catch (const std::runtime_error&) {
        continue;  // not one of ours, or gone: keep waiting for the others
      }
      if (std::memcmp(h.magic, k_magic, sizeof k_magic) != 0) continue;
      if (int(h.processes) != job.processes || h.process_rank < 1 || int(h.process_rank) >= job.processes ||
          seen[h.process_rank])
        throw std::runtime_error(where + ": a process says it is " + std::to_string(h.process_rank) + " of " +
                                 std::to_string(h.processes) + "; this job has " + std::to_string(job.processes) +
                                 " processes and each rank comes once");
      seen[h.process_rank] = true;
      peers.push_back(std::move(c));
    }
    for (Socket& p : peers) transfer(p.fd(), const_cast<ncclUniqueId*>(id), sizeof *id, true, deadline, where);
    return *id;
  }
  Hello h{};
  std::memcpy(h.magic, k_magic, sizeof k_magic);
  h.process_rank = std::uint32_t(job.process_rank);
  h.processes = std::uint32_t(job.processes);
  std::string err;
  while (Clock::now() < deadline) {
    addrinfo* res = resolve(host, port, false);
    Socket s;
    for (addrinfo* a = res; a && s.fd() < 0; a = a->ai_next) {
      Socket c(::socket(a->ai_family, a->ai_socktype, a->ai_protocol));
      if (c.fd() >= 0 && ::connect(c.fd(), a->ai_addr, a->ai_addrlen) == 0) s = std::move(c);
      else err = std::strerror(errno);
    }
    freeaddrinfo(res);
    if (s.fd() < 0) {
      std::this_thread::sleep_for(std::chrono::milliseconds(200));  // process 0 may not listen yet
      continue;
    }
    transfer(s.fd(), &h, sizeof h, true, deadline, where);
    ncclUniqueId got{};
    transfer(s.fd(), &got, sizeof got, false, deadline, where);
    return got;
  }
  throw std::runtime_error(where + ": process " + std::to_string(job.process_rank) + " could not reach process 0 within " +
                           std::to_string(int(timeout)) + " s (" + err + ")");
}

std::string to_hex(const void* p, std::size_t n) {
  static const char* d = "0123456789abcdef";
  std::string s;
  for (std::size_t i = 0; i < n; ++i) {
    const unsigned char c = static_cast<const unsigned char*>(p)[i];
    s += d[c >> 4];
    s += d[c & 15];
  }
  return s;
}

ncclUniqueId file_rendezvous(const fs::path& path, const JobEnvironment& job, double timeout, const ncclUniqueId* id) {
  const std::string header = "tttlab nccl id " + std::to_string(job.processes) + "\n";
  const std::string where = "rendezvous file:" + path.string();
  if (job.process_rank == 0) {
    write_file_atomic(path, header + to_hex(id, sizeof *id) + "\n");
    return *id;
  }
  const auto t0 = Clock::now();
  while (seconds_since(t0) < timeout) {
    std::error_code ec;
    if (fs::is_regular_file(path, ec)) {
      std::string text;
      try {
        text = read_file_text(path, 4096);
      } catch (const std::exception&) {
        text.clear();
      }
      if (text.rfind(header, 0) != 0)
        throw std::runtime_error(where + ": not an id file of a job of " + std::to_string(job.processes) + " processes");
      const std::string hex = text.substr(header.size(), 2 * sizeof(ncclUniqueId));
      if (hex.size() == 2 * sizeof(ncclUniqueId)) {
        ncclUniqueId got{};
        auto* out = reinterpret_cast<unsigned char*>(&got);
        for (std::size_t i = 0; i < sizeof got; ++i) out[i] = static_cast<unsigned char>(std::stoi(hex.substr(2 * i, 2), nullptr, 16));
        return got;
      }
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
  }
  throw std::runtime_error(where + ": process 0 did not write the job's id within " + std::to_string(int(timeout)) + " s");
}

// ---- the communicators -------------------------------------------------------------------------

// The NCCL communicators of this process's ranks, shared by every backend a factory makes.
struct NcclGroup {
  std::vector<ncclComm_t> comms;
  std::vector<int> devices;
  int world = 1, first_rank = 0;
  double timeout = 600;
  std::atomic<bool> aborted{false};
  std::mutex kill_mutex;
  bool killed = false;

  // Frees the communicators; with `abort`, also stops their kernels that still wait for a peer.
  void release(bool abort) {
    std::lock_guard<std::mutex> lock(kill_mutex);
    if (killed) return;
    killed = true;
    for (std::size_t i = 0; i < comms.size(); ++i) {
      cudaSetDevice(devices[i]);
      if (abort) nccl().CommAbort(comms[i]);
      else nccl().CommDestroy(comms[i]);
    }
  }
  ~NcclGroup() { release(aborted.load()); }
};

class NcclCommunicator final : public Communicator {
 public:
  NcclCommunicator(std::shared_ptr<NcclGroup> group, int local, cudaStream_t stream)
      : m_group(std::move(group)), m_local(local), m_stream(stream) {}
  ~NcclCommunicator() override {
    // A failed job's collectives may still wait on the GPU: stop them before the replica's stream is
    // synchronised and freed.
    if (m_group->aborted) m_group->release(true);
    if (m_scratch) {
      cudaSetDevice(m_group->devices[m_local]);
      cudaFree(m_scratch);
    }
  }

  int rank() const override { return m_group->first_rank + m_local; }
  int size() const override { return m_group->world; }

  void all_reduce_sum(float* data, std::size_t n) override {
    check_open();
    nccl_call(nccl().AllReduce(data, data, n, ncclFloat, ncclSum, comm(), m_stream), "the gradient all-reduce");
    wait("the gradient all-reduce");
  }

  void all_reduce_sum_host(std::span<double> values) override {
    check_open();
    if (values.size() > m_scratch_size) {
      if (m_scratch) cudaFree(m_scratch);
      m_scratch = nullptr;
      TTTLAB_CUDA_CHECK(cudaMalloc(reinterpret_cast<void**>(&m_scratch), values.size() * sizeof(double)));
      m_scratch_size = values.size();
    }
    TTTLAB_CUDA_CHECK(cudaMemcpyAsync(m_scratch, values.data(), values.size_bytes(), cudaMemcpyHostToDevice, m_stream));
    nccl_call(nccl().AllReduce(m_scratch, m_scratch, values.size(), ncclDouble, ncclSum, comm(), m_stream),
              "a reduction of the step's numbers");
    TTTLAB_CUDA_CHECK(cudaMemcpyAsync(values.data(), m_scratch, values.size_bytes(), cudaMemcpyDeviceToHost, m_stream));
    wait("a reduction of the step's numbers");
  }

  void abort() override { m_group->aborted = true; }

  std::string describe() const override {
    return "NCCL " + version_text(nccl().version) + ", rank " + std::to_string(rank()) + " of " + std::to_string(size());
  }

 private:
  ncclComm_t comm() const { return m_group->comms[m_local]; }
  std::string who() const { return "rank " + std::to_string(rank()) + " (GPU " + std::to_string(m_group->devices[m_local]) + ")"; }
  void check_open() const {
    if (m_group->aborted) throw CommunicatorError(who() + ": the job was stopped after another rank failed");
  }
  void nccl_call(ncclResult_t r, const std::string& what) {
    if (r != ncclSuccess && r != ncclInProgress)
      throw CommunicatorError(who() + ": " + what + " failed: " + nccl().GetErrorString(r));
  }
  // Until the stream's work (the collective last) is done; throws when another local rank aborted,
  // NCCL reports an error (a peer process gone), or the timeout passes.
  void wait(const std::string& what) {
    const auto t0 = Clock::now();
    for (int spin = 0;; ++spin) {
      const cudaError_t e = cudaStreamQuery(m_stream);
      if (e == cudaSuccess) return;
      if (e != cudaErrorNotReady)
        throw CommunicatorError(who() + ": " + what + ": CUDA error " + cudaGetErrorString(e));
      if (m_group->aborted) throw CommunicatorError(who() + ": stopped while waiting for " + what + ": another rank failed");
      ncclResult_t async = ncclSuccess;
      nccl().CommGetAsyncError(comm(), &async);
      if (async != ncclSuccess && async != ncclInProgress)
        throw CommunicatorError(who() + ": " + what + ": NCCL reports " + nccl().GetErrorString(async) +
                                " (a peer process may have stopped)");
      if (seconds_since(t0) > m_group->timeout)
        throw CommunicatorError(who() + " waited " + std::to_string(int(m_group->timeout)) + " s for " + what +
                                ": another rank has stopped or hangs");
      // Spin for the first few hundred polls (a collective of a step takes ~1 ms), then sleep.
      if (spin > 200) std::this_thread::sleep_for(std::chrono::microseconds(50));
    }
  }

  std::shared_ptr<NcclGroup> m_group;
  int m_local;
  cudaStream_t m_stream;
  double* m_scratch = nullptr;
  std::size_t m_scratch_size = 0;
};

std::shared_ptr<NcclGroup> make_group(const MultiGpuOptions& o, const std::vector<int>& devices, int world,
                                      int first_rank) {
  const NcclLibrary& lib = nccl();
  auto g = std::make_shared<NcclGroup>();
  g->devices = devices;
  g->world = world;
  g->first_rank = first_rank;
  g->timeout = o.timeout_seconds;
  g->comms.assign(devices.size(), nullptr);
  if (o.job.processes == 1) {
    nccl_check(lib.CommInitAll(g->comms.data(), int(devices.size()), devices.data()), "ncclCommInitAll");
    return g;
  }
  const std::string& rv = o.job.rendezvous;
  ncclUniqueId id{};
  if (o.job.process_rank == 0) nccl_check(lib.GetUniqueId(&id), "ncclGetUniqueId");
  if (rv.rfind("tcp:", 0) == 0) {
    const std::string hp = rv.substr(4);
    const auto colon = hp.rfind(':');
    if (colon == std::string::npos || colon + 1 == hp.size())
      throw std::invalid_argument("rendezvous '" + rv + "': expected tcp:HOST:PORT");
    id = tcp_rendezvous(hp.substr(0, colon), hp.substr(colon + 1), o.job, o.timeout_seconds, &id);
  } else if (rv.rfind("file:", 0) == 0 && rv.size() > 5) {
    id = file_rendezvous(rv.substr(5), o.job, o.timeout_seconds, &id);
  } else {
    throw std::invalid_argument("a job of " + std::to_string(o.job.processes) +
                                " processes needs a rendezvous: TTTLAB_RENDEZVOUS=tcp:HOST:PORT or file:PATH "
                                "(or MASTER_ADDR and MASTER_PORT); got '" + rv + "'");
  }
  nccl_check(lib.GroupStart(), "ncclGroupStart");
  for (std::size_t i = 0; i < devices.size(); ++i) {
    TTTLAB_CUDA_CHECK(cudaSetDevice(devices[i]));
    const ncclResult_t r = lib.CommInitRank(&g->comms[i], world, id, first_rank + int(i));
    if (r != ncclSuccess) {
      lib.GroupEnd();
      nccl_check(r, "ncclCommInitRank");
    }
  }
  nccl_check(lib.GroupEnd(), "joining the job's NCCL ranks (ncclCommInitRank)");
  if (o.job.process_rank == 0 && rv.rfind("file:", 0) == 0) {
    std::error_code ec;
    fs::remove(rv.substr(5), ec);  // every rank has joined: the id is spent
  }
  return g;
}

}  // namespace

bool nccl_available(std::string* why) {
  const NcclLibrary& l = nccl();
  if (!l.handle && why) *why = l.error;
  return l.handle != nullptr;
}

std::string nccl_version() { return nccl().handle ? version_text(nccl().version) : std::string(); }

TrainBackendFactory multi_gpu_train_backend_factory(const MultiGpuOptions& options) {
  auto group = std::make_shared<std::shared_ptr<NcclGroup>>();
  return [options, group](const TrainBackendContext& ctx) -> std::unique_ptr<TrainBackend> {
    const MultiGpuOptions& o = options;
    if (!ctx.config || !ctx.model || !ctx.optim) throw std::invalid_argument("multi-GPU: incomplete backend context");
    if (o.gpus < 1) throw std::invalid_argument("--gpus must be at least 1");
    std::string why;
    if (!nccl_available(&why)) throw std::runtime_error("training on several GPUs needs NCCL: " + why);
    if (const std::string u = cuda_train_unsupported(ctx.model->config()); !u.empty())
      throw std::invalid_argument("--gpus: " + u);
    const int count = cuda_device_count();
    const int first_device = o.first_device >= 0 ? o.first_device : o.job.local_rank * o.gpus;
    if (first_device + o.gpus > count)
      throw std::runtime_error("--gpus " + std::to_string(o.gpus) + " needs CUDA devices " + std::to_string(first_device) +
                               ".." + std::to_string(first_device + o.gpus - 1) + ", but this machine shows " +
                               std::to_string(count));
    const int world = o.job.processes * o.gpus, first_rank = o.job.process_rank * o.gpus;
    const int B = ctx.config->batch_size;
    if (B < world)
      throw std::invalid_argument("--batch " + std::to_string(B) + " is smaller than the job's " + std::to_string(world) +
                                  " GPUs: each GPU needs at least one sequence of every batch");
    // Each replica holds buffers for the largest shard.
    TrainConfig shard_cfg = *ctx.config;
    shard_cfg.batch_size = shard_range(B, 0, world).count;
    TrainBackendContext rc = ctx;
    rc.config = &shard_cfg;
    std::vector<int> devices;
    std::vector<std::unique_ptr<Replica>> replicas;
    for (int i = 0; i < o.gpus; ++i) {
      devices.push_back(first_device + i);
      CudaTrainOptions c = o.cuda;
      c.device = first_device + i;
      replicas.push_back(std::make_unique<CudaTrainBackend>(rc, c));
    }
    if (!*group) *group = make_group(o, devices, world, first_rank);
    if ((*group)->aborted) throw std::runtime_error("multi-GPU: this job's NCCL group was stopped by an earlier failure");
    std::vector<std::unique_ptr<Communicator>> comms;
    for (int i = 0; i < o.gpus; ++i)
      comms.push_back(std::make_unique<NcclCommunicator>(
          *group, i, static_cast<cudaStream_t>(static_cast<CudaTrainBackend&>(*replicas[i]).cuda_stream())));
    DataParallelOptions dp = o.data_parallel;
    dp.layout = DataParallelLayout{world, first_rank};
    return std::make_unique<DataParallelBackend>(std::move(replicas), std::move(comms), dp, ctx);
  };
}

#else  // no nccl.h at build time

bool nccl_available(std::string* why) {
  if (why) *why = "this build of tttlab was compiled without NCCL's header (nccl.h)";
  return false;
}
std::string nccl_version() { return {}; }
TrainBackendFactory multi_gpu_train_backend_factory(const MultiGpuOptions&) {
  return [](const TrainBackendContext&) -> std::unique_ptr<TrainBackend> {
    throw std::runtime_error("training on several GPUs needs NCCL: this build was compiled without nccl.h");
  };
}

#endif

}  // namespace tttlab::kernels
