// Device registry and the device-selection policy (see tttlab/device.hpp).
#include "tttlab/device.hpp"

#include <Eigen/Core>
#include <cstdio>
#include <exception>
#include <thread>
#include <utility>

namespace tttlab {

const char* to_string(DeviceKind kind) {
  switch (kind) {
    case DeviceKind::CPU: return "cpu";
    case DeviceKind::CUDA: return "cuda";
  }
  return "?";
}

const char* to_string(DeviceRequest request) {
  switch (request) {
    case DeviceRequest::Auto: return "auto";
    case DeviceRequest::CPU: return "cpu";
    case DeviceRequest::CUDA: return "cuda";
  }
  return "?";
}

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
  if (text == "auto") return DeviceRequest::Auto;
  if (text == "cpu") return DeviceRequest::CPU;
  if (text == "cuda") return DeviceRequest::CUDA;
  throw std::invalid_argument("unknown device '" + std::string(text) +
                              "': expected one of auto, cpu, cuda");
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
