// CUDA device discovery (see tttlab/kernels/cuda_device.hpp). Host code only: it talks to the CUDA
// runtime API and needs no GPU to compile or to run.
#include "tttlab/kernels/cuda_device.hpp"

#include <cuda_runtime_api.h>

#include <algorithm>
#include <cctype>
#include <climits>
#include <cstdlib>
#include <string_view>

#ifndef TTTLAB_CUDA_ARCHS
#error "TTTLAB_CUDA_ARCHS must be defined by kernels/CMakeLists.txt"
#endif

namespace tttlab::kernels {
namespace {

std::string error_text(cudaError_t err) {
  return std::string(cudaGetErrorString(err)) + " (" + cudaGetErrorName(err) + ")";
}

// The lowest compute capability (as 10*major + minor) that CMAKE_CUDA_ARCHITECTURES compiled for,
// read from its text ("90", "80,90", "90a-real"); 0 when it names none ("all", "native").
int lowest_built_arch() {
  const std::string_view archs = TTTLAB_CUDA_ARCHS;
  int lowest = INT_MAX;
  for (std::size_t i = 0; i < archs.size();) {
    if (!std::isdigit(static_cast<unsigned char>(archs[i]))) {
      ++i;
      continue;
    }
    int v = 0;
    while (i < archs.size() && std::isdigit(static_cast<unsigned char>(archs[i])))
      v = v * 10 + (archs[i++] - '0');
    if (v < lowest) lowest = v;
  }
  return lowest == INT_MAX ? 0 : lowest;
}

}  // namespace

const char* to_string(CudaStatus status) {
  switch (status) {
    case CudaStatus::Ok: return "ok";
    case CudaStatus::NoDriver: return "no driver";
    case CudaStatus::NoDevice: return "no device";
    case CudaStatus::Error: return "error";
  }
  return "?";
}

std::string cuda_version_string(int version) {
  return std::to_string(version / 1000) + "." + std::to_string((version % 1000) / 10);
}

std::string cuda_build_summary() {
  std::string archs;
  const std::string_view list = TTTLAB_CUDA_ARCHS;
  // "80,90" -> "sm_80, sm_90"; symbolic values ("all", "native") are shown as they are.
  std::size_t start = 0;
  while (start <= list.size()) {
    const std::size_t end = std::min(list.find(',', start), list.size());
    const std::string_view item = list.substr(start, end - start);
    if (!item.empty()) {
      if (!archs.empty()) archs += ", ";
      archs += std::isdigit(static_cast<unsigned char>(item[0])) ? "sm_" + std::string(item)
                                                                 : std::string(item);
    }
    start = end + 1;
  }
  return "CUDA " + cuda_version_string(CUDART_VERSION) + ", " + archs;
}

CudaQuery query_cuda_devices() {
  CudaQuery q;
  cudaRuntimeGetVersion(&q.runtime_version);
  // Reports 0 (and success) when no driver can be loaded; that is how the two failure cases that
  // cudaGetDeviceCount reports alike (no driver, old driver) are told apart below.
  int driver = 0;
  if (cudaDriverGetVersion(&driver) == cudaSuccess) q.driver_version = driver;

  int count = 0;
  const cudaError_t err = cudaGetDeviceCount(&count);
  if (err != cudaSuccess) {
    cudaGetLastError();  // leave no error behind for the next unrelated runtime call
    switch (err) {
      case cudaErrorInsufficientDriver:
        q.status = CudaStatus::NoDriver;
        q.message = q.driver_version == 0
                        ? "no NVIDIA driver found (libcuda.so.1 could not be loaded)"
                        : "the NVIDIA driver supports CUDA " +
                              cuda_version_string(q.driver_version) +
                              ", older than this build's CUDA " +
                              cuda_version_string(q.runtime_version) + " runtime";
        break;
      case cudaErrorNoDevice: {
        q.status = CudaStatus::NoDevice;
        q.message = "the NVIDIA driver reports no CUDA device";
        if (const char* visible = std::getenv("CUDA_VISIBLE_DEVICES"))
          q.message += std::string(" (CUDA_VISIBLE_DEVICES=\"") + visible + "\")";
        break;
      }
      default:
        q.status = CudaStatus::Error;
        q.message = "cudaGetDeviceCount failed: " + error_text(err);
        break;
    }
    return q;
  }
  if (count <= 0) {
    q.status = CudaStatus::NoDevice;
    q.message = "the NVIDIA driver reports no CUDA device";
    return q;
  }

  for (int i = 0; i < count; ++i) {
    cudaDeviceProp p{};
    const cudaError_t perr = cudaGetDeviceProperties(&p, i);
    if (perr != cudaSuccess) {
      cudaGetLastError();
      q.status = CudaStatus::Error;
      q.message = "cudaGetDeviceProperties(" + std::to_string(i) + ") failed: " + error_text(perr);
      q.devices.clear();
      return q;
    }
    q.devices.push_back(
        CudaDeviceProps{i, p.name, p.major, p.minor, p.totalGlobalMem, p.multiProcessorCount});
  }
  q.status = CudaStatus::Ok;
  return q;
}

bool cuda_memory_info(int device, std::uint64_t& free_bytes, std::uint64_t& total_bytes, std::string* why) {
  free_bytes = total_bytes = 0;
  const auto fail = [&](const std::string& what, cudaError_t err) {
    cudaGetLastError();  // reset the runtime's last error, so that later calls do not report this one
    if (why) *why = what + ": " + error_text(err);
    return false;
  };
  if (const cudaError_t err = cudaSetDevice(device); err != cudaSuccess)
    return fail("cudaSetDevice(" + std::to_string(device) + ")", err);
  std::size_t f = 0, t = 0;
  if (const cudaError_t err = cudaMemGetInfo(&f, &t); err != cudaSuccess) return fail("cudaMemGetInfo", err);
  free_bytes = f;
  total_bytes = t;
  return true;
}

void cuda_clear_last_error() { cudaGetLastError(); }

GpuProbeResult probe_cuda_gpus() {
  const CudaQuery q = query_cuda_devices();
  GpuProbeResult r;
  if (q.status != CudaStatus::Ok) {
    r.reason = q.message;
    return r;
  }
  // The kernels hold machine code (and PTX) for the architectures they were built for; a device
  // older than the oldest of those cannot run them, so it is reported instead of offered.
  const int lowest = lowest_built_arch();
  std::string skipped;
  for (const CudaDeviceProps& p : q.devices) {
    const int cc = 10 * p.cc_major + p.cc_minor;
    if (cc < lowest) {
      if (!skipped.empty()) skipped += "; ";
      skipped += p.name + " is sm_" + std::to_string(cc) + ", older than the sm_" +
                 std::to_string(lowest) + " the kernels were built for";
      continue;
    }
    DeviceInfo d;
    d.kind = DeviceKind::CUDA;
    d.index = p.index;
    d.name = p.name;
    d.cc_major = p.cc_major;
    d.cc_minor = p.cc_minor;
    d.memory_bytes = p.total_memory_bytes;
    r.devices.push_back(std::move(d));
  }
  if (r.devices.empty())
    r.reason = skipped + " (rebuild with -DCMAKE_CUDA_ARCHITECTURES=native on this machine)";
  return r;
}

}  // namespace tttlab::kernels
