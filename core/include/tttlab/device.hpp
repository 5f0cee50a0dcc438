// tttlab/device.hpp — the compute devices the engine can run on, and which one it picks.
//
// Two kinds exist: the CPU engine (core/, Eigen; always there) and the CUDA kernels (kernels/,
// built only where nvcc was found at configure time). core/ knows nothing about CUDA. The
// composition root (app/main.cpp) installs a GPU probe in the registry when the kernels were built;
// select_device() decides from what that probe reports:
//
//   requested   a GPU is present     no GPU, or no CUDA kernels in this build
//   auto        CUDA device 0        CPU   (with a note saying why, when the kernels were built)
//   cpu         CPU                  CPU
//   cuda        CUDA device 0        throws DeviceError (one line: what is missing, what to do)
//
// The command line spells the request `--device auto|cpu|cuda` (parse_device_request()); a training
// run's whole request (device, GEMM precision, GPUs) is a TrainDeviceRequest.
//
// THREADING: install the probe once at start-up, before other threads use the registry. gpus() runs
// the probe at most once per registry (initialising a CUDA driver costs up to a few hundred ms and
// the answer does not change while the process runs) and is safe to call from several threads.
//
// This header includes neither Eigen nor CUDA, so the kernels/ library and plain tools can use it.
#pragma once

#include <cstdint>
#include <functional>
#include <mutex>
#include <optional>
#include <stdexcept>
#include <string>
#include <string_view>
#include <vector>

namespace tttlab {

enum class DeviceKind { CPU, CUDA };

// "cpu" / "cuda".
const char* to_string(DeviceKind kind);

// One device, described for people (describe()) and for code (the fields).
struct DeviceInfo {
  DeviceKind kind = DeviceKind::CPU;
  int index = 0;     // CUDA device ordinal; 0 for the CPU
  std::string name;  // "NVIDIA H100 80GB HBM3"; "CPU" for the CPU
  int cc_major = 0;  // CUDA compute capability (9.0 for Hopper); 0 for the CPU
  int cc_minor = 0;
  std::uint64_t memory_bytes = 0;  // CUDA global memory in bytes; 0 for the CPU (not reported)
  int threads = 0;                 // CPU: worker threads available to the engine; 0 for CUDA
  std::string library;             // CPU: "Eigen 3.4"; empty for CUDA

  // One line in words, GiB = 2^30 bytes:
  //   "CPU (Eigen 3.4, 2 threads)"   or   "CUDA: NVIDIA H100 80GB HBM3, sm_90, 79.1 GiB"
  std::string describe() const;
};

// The CPU as the engine sees it: Eigen's version and std::thread::hardware_concurrency() threads
// (at least 1).
DeviceInfo cpu_device();

// What a GPU probe found.
struct GpuProbeResult {
  std::vector<DeviceInfo> devices;  // usable CUDA devices in ordinal order; empty when none
  std::string reason;               // when devices is empty: why, in words, one line
};

// A GPU probe: asks the driver which devices there are. It must not crash when there is no driver
// or no device; it reports that in `reason`. If it throws, the registry turns the exception's text
// into `reason`.
using GpuProbe = std::function<GpuProbeResult()>;

// Which devices this process can use. One process-wide instance is filled by app/main.cpp
// (device_registry()); tests make their own with a fake probe.
class DeviceRegistry {
 public:
  // Installs (or replaces) the GPU probe and forgets any cached result. An empty function removes
  // it (as in a build without CUDA).
  void set_gpu_probe(GpuProbe probe);

  // True when a GPU probe is installed, i.e. this build has CUDA kernels.
  bool has_gpu_backend() const;

  // The probe's result, computed on first use and then cached. Without a probe: no devices, and the
  // reason says that this build has no CUDA kernels.
  GpuProbeResult gpus();

 private:
  mutable std::mutex m_mutex;
  GpuProbe m_probe;
  std::optional<GpuProbeResult> m_cached;
};

// The process-wide registry.
DeviceRegistry& device_registry();

// What the user asked for with --device.
enum class DeviceRequest { Auto, CPU, CUDA };

// "auto" | "cpu" | "cuda" (exact, lower case). Anything else throws std::invalid_argument whose
// text names the accepted values.
DeviceRequest parse_device_request(std::string_view text);
const char* to_string(DeviceRequest request);

// The precision of a GPU's matrix products when it trains or evaluates a model: fp32, tf32 (tensor
// cores, ~1e-3 relative) or bf16 operands with fp32 accumulation. The CUDA kernels map it to their own
// GemmPrecision (tttlab/kernels/gemm.hpp); core and the app name it without depending on them.
enum class GpuGemmPrecision { Tf32, Fp32, Bf16 };

// "tf32" | "fp32" | "bf16"; anything else throws std::invalid_argument naming the accepted values.
GpuGemmPrecision parse_gpu_gemm_precision(std::string_view text);
const char* to_string(GpuGemmPrecision precision);

// Where a training run asks to compute, parsed once where the request enters (the command line's
// flags, the app's state file) and handed on typed.
struct TrainDeviceRequest {
  DeviceRequest device = DeviceRequest::Auto;
  GpuGemmPrecision precision = GpuGemmPrecision::Tf32;
  // 0: one device as `device` says; N >= 1: data-parallel over N GPUs of this host (train/data_parallel.hpp);
  // -1: data-parallel over all of them.
  int gpus = 0;
  // Evaluation only (`tttlab eval`): a GPU backend holds two blocks' activations, taken in turn
  // (kernels' CudaTrainOptions::forward_only), so that long windows fit; it cannot train.
  bool forward_only = false;
};

// Thrown by select_device() when the requested device cannot be had.
class DeviceError : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

struct DeviceSelection {
  DeviceInfo device;
  // Empty, or why the CPU was chosen for `auto` although CUDA kernels are built:
  // "CUDA kernels built, but no GPU found: <reason>; using the CPU".
  std::string note;
};

// The policy in the table at the top of this file. Throws DeviceError for `cuda` when no GPU can be
// used (the message says why and suggests --device cpu).
DeviceSelection select_device(DeviceRequest requested,
                              DeviceRegistry& registry = device_registry());

}  // namespace tttlab
