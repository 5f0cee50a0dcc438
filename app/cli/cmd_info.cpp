// `tttlab info`: what this build contains and which compute device the engine will use.
#include <CLI/CLI.hpp>
#include <Eigen/Core>
#include <cstdio>
#include <thread>

#include "cli/commands.hpp"

namespace tttlab::cli {

void register_info(CLI::App& app) {
  auto* cmd = app.add_subcommand("info", "Print the build configuration and the compute devices");
  cmd->callback([] {
    std::printf("tttlab 0.1.0\n");
    std::printf("CPU engine: Eigen %d.%d.%d (%s), %u hardware threads\n", EIGEN_WORLD_VERSION,
                EIGEN_MAJOR_VERSION, EIGEN_MINOR_VERSION, Eigen::SimdInstructionSetsInUse(),
                std::thread::hardware_concurrency());
#ifdef TTTLAB_HAVE_CUDA
    std::printf("CUDA kernels: built\n");
#else
    std::printf("CUDA kernels: not built (no nvcc at configure time); using the CPU\n");
#endif
    set_exit_code(0);
  });
}

}  // namespace tttlab::cli
