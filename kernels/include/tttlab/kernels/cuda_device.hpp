// tttlab/kernels/cuda_device.hpp — which CUDA devices this machine has, asked of the CUDA runtime.
//
// Part of tttlab_kernels, which is built only when CMake finds nvcc (TTTLAB_HAVE_CUDA; see
// cmake/TTTLabCuda.cmake). Building needs no GPU; whether one is there is found out at run time,
// here. Every function reports a missing driver or device as a status with a message; none of them
// throws for that, aborts, or prints.
//
// This header includes neither CUDA nor Eigen headers, so plain C++ code (app/, tests) can use it.
//
// THREADING: the functions may be called from any thread. The first call initialises the CUDA
// runtime (tens to hundreds of ms with a driver, immediate without one); query once and keep the
// result (core's DeviceRegistry caches probe_cuda_gpus() for the process).
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "tttlab/device.hpp"

namespace tttlab::kernels {

enum class CudaStatus {
  Ok,        // at least one device was found
  NoDriver,  // no NVIDIA driver could be loaded, or it is older than this build's CUDA runtime
  NoDevice,  // a driver is there but shows no device (none, or CUDA_VISIBLE_DEVICES hides them)
  Error,  // any other runtime error; the message names it
};

// "ok" / "no driver" / "no device" / "error".
const char* to_string(CudaStatus status);

// One device as the runtime reports it (cudaGetDeviceProperties).
struct CudaDeviceProps {
  int index = 0;     // device ordinal, as cudaSetDevice() takes it
  std::string name;  // e.g. "NVIDIA H100 80GB HBM3"
  int cc_major = 0;  // compute capability, e.g. 9.0 for Hopper
  int cc_minor = 0;
  std::uint64_t total_memory_bytes = 0;  // global memory
  int multiprocessors = 0;               // SM count
};

struct CudaQuery {
  CudaStatus status = CudaStatus::Error;
  std::string message;      // empty when Ok; otherwise one line saying what is missing
  int runtime_version = 0;  // this build's CUDA runtime, as 1000*major + 10*minor (13000)
  int driver_version = 0;   // the installed driver's CUDA version, same encoding; 0: none
  std::vector<CudaDeviceProps> devices;  // in ordinal order; empty unless status is Ok
};

// Asks the CUDA runtime for its devices. Never throws for a missing driver or device.
CudaQuery query_cuda_devices();

// The probe for core's DeviceRegistry: query_cuda_devices() in core's terms. app/main.cpp installs
// it with  tttlab::device_registry().set_gpu_probe(tttlab::kernels::probe_cuda_gpus).
GpuProbeResult probe_cuda_gpus();

// Free and total memory of device `device` now (cudaMemGetInfo, which makes the device current on
// the calling thread), for sizing an allocation before making it. On failure (no driver, no such
// device) returns false with `why` saying so, when given, and leaves the sizes at 0.
bool cuda_memory_info(int device, std::uint64_t& free_bytes, std::uint64_t& total_bytes,
                      std::string* why = nullptr);

// Clears the CUDA runtime's last error on the calling thread (cudaGetLastError). After a failed
// allocation was caught (std::runtime_error from a CUDA check), the runtime still holds that error,
// and the next kernel launch's check would report it as its own.
void cuda_clear_last_error();

// How the kernels were compiled, in words: "CUDA 13.0, sm_90".
std::string cuda_build_summary();

// A CUDA version number (13000) as "13.0".
std::string cuda_version_string(int version);

}  // namespace tttlab::kernels
