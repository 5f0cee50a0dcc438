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

ComputeChoice::ComputeChoice(ComputeDevices devices) : devices_(std::move(devices)) {}

std::shared_ptr<GpuCompute> ComputeChoice::gpu(std::string& why_not) {
  if (!probed_) {
    probed_ = true;
    if (!devices_.gpu) {
      why_not_ = "this build has no CUDA kernels";
    } else {
      try {
        gpu_ = devices_.gpu(why_not_);
      } catch (const std::exception& e) {
        gpu_.reset();
        why_not_ = e.what();
      }
      if (!gpu_ && why_not_.empty()) why_not_ = "no usable GPU";
    }
  }
  why_not = why_not_;
  return gpu_;
}

static std::string cpu_label() { return "CPU (" + cpu_device().library + ")"; }

ComputeTarget ComputeChoice::target() {
  ComputeTarget t;
  if (request_ == ComputeRequest::CPU) {
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
  if (request_ == ComputeRequest::GPU) t.note = "no GPU: " + why + "; computing on the CPU";
  return t;
}

ComputeView ComputeChoice::view() {
  ComputeView v;
  v.request = request_;
  v.gpu_build = static_cast<bool>(devices_.gpu);
  const ComputeTarget t = target();
  v.gpu_available = gpu_ != nullptr;
  v.active = t.label;
  v.note = gpu_ ? std::string() : (devices_.gpu ? "no GPU: " + why_not_ : std::string("this build has no GPU kernels"));
  v.cpu = cpu_device().describe();
  return v;
}

}  // namespace tttlab::lab
