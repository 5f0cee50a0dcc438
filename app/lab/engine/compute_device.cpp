#include "lab/engine/compute_device.hpp"

#include <algorithm>
#include <cstdio>
#include <stdexcept>

namespace tttlab::lab {

TimingSummary summarize_ms(const std::vector<double>& ms, int warmup) {
  TimingSummary t;
  t.warmup = warmup;
  t.repeats = static_cast<int>(ms.size());
  if (ms.empty()) return t;
  std::vector<double> v = ms;
  std::sort(v.begin(), v.end());
  const std::size_t n = v.size();
  t.median_ms = n % 2 ? v[n / 2] : 0.5 * (v[n / 2 - 1] + v[n / 2]);
  t.min_ms = v.front();
  t.max_ms = v.back();
  return t;
}

std::string engine_thread_cpu() {
  DeviceInfo d = cpu_device();
  d.threads = 1;
  return d.describe();
}

std::string format_timing(const TimingSummary& t) {
  if (t.repeats == 0) return "not measured";
  const auto fmt = [](double ms) {
    char b[32];
    if (ms >= 100)
      std::snprintf(b, sizeof b, "%.0f", ms);
    else if (ms >= 10)
      std::snprintf(b, sizeof b, "%.1f", ms);
    else if (ms >= 0.1)
      std::snprintf(b, sizeof b, "%.2f", ms);
    else
      std::snprintf(b, sizeof b, "%.3f", ms);
    return std::string(b);
  };
  return fmt(t.median_ms) + " ms (" + fmt(t.min_ms) + "–" + fmt(t.max_ms) + ", median of " +
         std::to_string(t.repeats) + ")";
}

const char* to_string(GpuMath m) { return m == GpuMath::Tf32 ? "tf32" : "fp32"; }

const char* to_string(ComputeRequest r) {
  switch (r) {
    case ComputeRequest::CPU: return "cpu";
    case ComputeRequest::GPU: return "gpu";
    case ComputeRequest::Auto: break;
  }
  return "auto";
}

ComputeRequest parse_compute_request(const std::string& text) {
  if (text == "auto") return ComputeRequest::Auto;
  if (text == "cpu") return ComputeRequest::CPU;
  if (text == "gpu" || text == "cuda") return ComputeRequest::GPU;
  throw std::invalid_argument("the compute device must be auto, cpu or gpu (got \"" + text + "\")");
}

ComputeChoice::ComputeChoice(ComputeDevices devices) : m_devices(std::move(devices)) {}

std::shared_ptr<GpuCompute> ComputeChoice::gpu(std::string& why_not) {
  if (!m_probed) {
    m_probed = true;
    if (!m_devices.gpu) {
      m_why_not = "this build has no CUDA kernels";
    } else {
      try {
        m_gpu = m_devices.gpu(m_why_not);
      } catch (const std::exception& e) {
        m_gpu.reset();
        m_why_not = e.what();
      }
      if (!m_gpu && m_why_not.empty()) m_why_not = "no usable GPU";
    }
  }
  why_not = m_why_not;
  return m_gpu;
}

static std::string cpu_label() { return "CPU (" + cpu_device().library + ")"; }

ComputeTarget ComputeChoice::target() {
  ComputeTarget t;
  if (m_request == ComputeRequest::CPU) {
    t.label = cpu_label();
    return t;
  }
  std::string why;
  t.gpu = gpu(why);
  if (t.gpu) {
    t.label = "GPU: " + t.gpu->device().name;
    return t;
  }
  t.label = cpu_label();
  // Under auto the CPU is the expected answer on a machine without a GPU: the panels say nothing more
  // (the Compute menu says why); asked for the GPU, they say why they compute on the CPU instead.
  if (m_request == ComputeRequest::GPU) t.note = "no GPU: " + why + "; computing on the CPU";
  return t;
}

ComputeView ComputeChoice::view() {
  ComputeView v;
  v.request = m_request;
  v.gpu_build = static_cast<bool>(m_devices.gpu);
  const ComputeTarget t = target();
  v.gpu_available = m_gpu != nullptr;
  v.active = t.label;
  v.note = m_gpu ? std::string() : (m_devices.gpu ? "no GPU: " + m_why_not : std::string("this build has no GPU kernels"));
  v.cpu = cpu_device().describe();
  return v;
}

}  // namespace tttlab::lab
