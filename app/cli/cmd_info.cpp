// `tttlab info [--device auto|cpu|cuda]`: what this build contains and which compute device the
// engine would use (tttlab/device.hpp has the policy). Exit status 1 when the forced device cannot
// be had, 2 for a bad --device value.
#include <CLI/CLI.hpp>
#include <Eigen/Core>
#include <cstdio>
#include <memory>
#include <string>
#include <thread>

#include "cli/commands.hpp"
#include "tttlab/build_config.hpp"
#include "tttlab/device.hpp"
#include "tttlab/io/limits.hpp"
#ifdef TTTLAB_HAVE_CUDA
#include "tttlab/kernels/cuda_device.hpp"
#endif

namespace tttlab::cli {
namespace {

void print_info(const std::string& device_text) {
  std::printf("tttlab %s\n", TTTLAB_VERSION_STRING);
  std::printf("build         %s, %s, C++20, sanitizers %s\n", TTTLAB_BUILD_TYPE,
              TTTLAB_CXX_COMPILER, TTTLAB_SANITIZE ? "on (address, undefined)" : "off");
  std::printf("CPU engine    Eigen %d.%d.%d (%s), %u hardware threads\n", EIGEN_WORLD_VERSION,
              EIGEN_MAJOR_VERSION, EIGEN_MINOR_VERSION, Eigen::SimdInstructionSetsInUse(),
              std::thread::hardware_concurrency());
#ifdef TTTLAB_HAVE_CUDA
  std::printf("CUDA kernels  built (%s)\n", kernels::cuda_build_summary().c_str());
  const GpuProbeResult gpus = device_registry().gpus();
  for (const DeviceInfo& d : gpus.devices)
    std::printf("GPU %-9d %s\n", d.index, d.describe().c_str());
  if (gpus.devices.empty()) std::printf("GPUs          none: %s\n", gpus.reason.c_str());
#else
  if (std::string(TTTLAB_CUDA_SETTING) == "OFF")
    std::printf("CUDA kernels  not built (configured with TTTLAB_CUDA=OFF)\n");
  else
    std::printf("CUDA kernels  not built (no nvcc found at configure time)\n");
#endif

  const DeviceRequest request = parse_device_request(device_text);
  try {
    const DeviceSelection s = select_device(request);
    const std::string forced = request == DeviceRequest::Auto
                                   ? ""
                                   : std::string(", as forced by --device ") + to_string(request);
    std::printf("device        %s%s\n", s.device.describe().c_str(), forced.c_str());
    if (!s.note.empty()) std::printf("              %s\n", s.note.c_str());
    set_exit_code(0);
  } catch (const DeviceError& e) {
    std::fflush(stdout);
    std::fprintf(stderr, "tttlab info: %s\n", printable(e.what()).c_str());
    set_exit_code(1);
  }
}

}  // namespace

void register_info(CLI::App& app) {
  auto* cmd = app.add_subcommand("info", "Print the build configuration and the compute device");
  auto device = std::make_shared<std::string>("auto");
  cmd->add_option("--device", *device,
                  "Compute device: auto (CUDA when a GPU is present, else the CPU), cpu, or cuda "
                  "(an error without a GPU)")
      ->check(CLI::IsMember({"auto", "cpu", "cuda"}))
      ->capture_default_str();
  cmd->callback([device] { print_info(*device); });
}

}  // namespace tttlab::cli
