// Device registry and the device-selection policy (see tttlab/device.hpp).
#include "tttlab/device.hpp"

#include <Eigen/Core>
#include <cstdio>
#include <cstddef>
#include <exception>
#include <optional>
#include <thread>
#include <utility>

namespace tttlab {
namespace {

// The words of each enum, in the order of its values; to_string() and the parsers read them here.
constexpr const char* kDeviceKindNames[] = {"cpu", "cuda"};
constexpr const char* kDeviceRequestNames[] = {"auto", "cpu", "cuda"};
constexpr const char* kGpuGemmPrecisionNames[] = {"tf32", "fp32", "bf16"};

template <class Enum, std::size_t N>
const char* name_of(const char* const (&names)[N], Enum value) {
  const auto i = static_cast<std::size_t>(value);
  return i < N ? names[i] : "?";
}

// The value whose word is `text` (exact, lower case); nullopt for any other text.
template <class Enum, std::size_t N>
std::optional<Enum> value_named(const char* const (&names)[N], std::string_view text) {
  for (std::size_t i = 0; i < N; ++i)
    if (text == names[i]) return static_cast<Enum>(i);
  return std::nullopt;
}

}  // namespace

const char* to_string(DeviceKind kind) { return name_of(kDeviceKindNames, kind); }
const char* to_string(DeviceRequest request) { return name_of(kDeviceRequestNames, request); }
const char* to_string(GpuGemmPrecision precision) { return name_of(kGpuGemmPrecisionNames, precision); }

std::string DeviceInfo::describe() const {
  char buf[256];
  if (kind == DeviceKind::CPU) {
    std::snprintf(buf, sizeof buf, "CPU (%s, %d thread%s)", library.c_str(), threads,
                  threads == 1 ? "" : "s");
  } else {
    const double gib = double(memory_bytes) / double(1ull << 30);
    std::snprintf(buf, sizeof buf, "CUDA: %s, sm_%d%d, %.1f GiB", name.c_str(), cc_major, cc_minor,
                  gib);
  }
  return buf;
}

DeviceInfo cpu_device() {
  DeviceInfo d;
  d.kind = DeviceKind::CPU;
  d.name = "CPU";
  // hardware_concurrency() may return 0 when the count is unknown; the engine still has one thread.
  const unsigned hw = std::thread::hardware_concurrency();
  d.threads = hw == 0 ? 1 : int(hw);
  d.library =
      "Eigen " + std::to_string(EIGEN_WORLD_VERSION) + "." + std::to_string(EIGEN_MAJOR_VERSION);
  return d;
}

void DeviceRegistry::set_gpu_probe(GpuProbe probe) {
  std::lock_guard<std::mutex> lock(m_mutex);
  m_probe = std::move(probe);
  m_cached.reset();
}

bool DeviceRegistry::has_gpu_backend() const {
  std::lock_guard<std::mutex> lock(m_mutex);
  return bool(m_probe);
}

GpuProbeResult DeviceRegistry::gpus() {
  std::lock_guard<std::mutex> lock(m_mutex);
  if (!m_cached) {
    GpuProbeResult r;
    if (!m_probe) {
      r.reason = "this build has no CUDA kernels (nvcc was not found at configure time)";
    } else {
      try {
        r = m_probe();
      } catch (const std::exception& e) {
        r = GpuProbeResult{{}, std::string("the GPU probe failed: ") + e.what()};
      }
      if (r.devices.empty() && r.reason.empty()) r.reason = "the GPU probe found no device";
    }
    m_cached = std::move(r);
  }
  return *m_cached;
}

DeviceRegistry& device_registry() {
  static DeviceRegistry registry;
  return registry;
}

DeviceRequest parse_device_request(std::string_view text) {
  if (const auto request = value_named<DeviceRequest>(kDeviceRequestNames, text)) return *request;
  throw std::invalid_argument("unknown device '" + std::string(text) +
                              "': expected one of auto, cpu, cuda");
}

GpuGemmPrecision parse_gpu_gemm_precision(std::string_view text) {
  if (const auto precision = value_named<GpuGemmPrecision>(kGpuGemmPrecisionNames, text)) return *precision;
  throw std::invalid_argument("unknown GEMM precision '" + std::string(text) +
                              "': expected fp32, tf32 or bf16");
}

DeviceSelection select_device(DeviceRequest requested, DeviceRegistry& registry) {
  if (requested == DeviceRequest::CPU) return {cpu_device(), {}};

  const bool built = registry.has_gpu_backend();
  const GpuProbeResult gpus = registry.gpus();
  if (!gpus.devices.empty()) return {gpus.devices.front(), {}};

  if (requested == DeviceRequest::CUDA) {
    if (!built)
      throw DeviceError(
          "--device cuda: this build has no CUDA kernels (reconfigure with "
          "-DTTTLAB_CUDA=ON where nvcc is installed), or use --device cpu");
    throw DeviceError("--device cuda: no usable CUDA device: " + gpus.reason +
                      "; use --device cpu or auto");
  }
  DeviceSelection s{cpu_device(), {}};
  if (built) s.note = "CUDA kernels built, but no GPU found: " + gpus.reason + "; using the CPU";
  return s;
}

}  // namespace tttlab
