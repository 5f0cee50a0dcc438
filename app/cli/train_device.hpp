// app/cli/train_device.hpp — which device a training run computes on, for `tttlab train` and the
// desktop app's Training panel (handed to it through lab::GuiOptions, so app/gui/ never links the
// CUDA kernels itself).
//
//   request   a GPU is present, model supported    GPU present, model not supported    no GPU / no CUDA build
//   auto      the GPU (kernels::CudaTrainBackend)  the CPU, note says why              the CPU, note says why
//   cpu       the CPU                              the CPU                             the CPU
//   cuda      the GPU                              TrainDeviceUnsupported              DeviceError
//
// The model check needs the model's config, which a resumed run reads from its checkpoint inside
// Trainer::resume, so it happens inside the returned factory, when the Trainer calls it.
#pragma once

#include <CLI/CLI.hpp>

#include <stdexcept>
#include <string>

#include "tttlab/device.hpp"
#include "tttlab/model/config.hpp"
#include "tttlab/train/backend.hpp"
#include "tttlab/train/data_parallel.hpp"

namespace tttlab::cli {

// `cuda` was requested for a model the GPU training step does not support (the text says what).
class TrainDeviceUnsupported : public std::invalid_argument {
 public:
  using std::invalid_argument::invalid_argument;
};

// The backend factory for `request.device` (empty: the CPU engine), its GPU's matrix products in
// `request.precision`. `note` receives why the CPU was chosen under `auto` although the build has CUDA
// kernels (empty otherwise); the factory may write it later, so `note` must outlive the Trainer's
// construction. Trainer::device_description() says where it runs. Throws DeviceError for `cuda`
// without a usable GPU.
TrainBackendFactory train_backend_for(const TrainDeviceRequest& request, std::string& note);

// Data-parallel training over several GPUs (train/data_parallel.hpp, kernels/multi_gpu.hpp):
// `request.gpus` GPUs of this host (−1: all of them) in this process, which is process
// `job.process_rank` of `job.processes` (one unless a launcher said otherwise). `request.device` must
// not be cpu. The factory builds one replica per GPU with NCCL between them; with one GPU and one
// process it is the same code path over a communicator of one rank. Throws std::invalid_argument for a
// cpu request or a build without the CUDA kernels; DeviceError when no GPU is usable; the factory
// itself throws for too few GPUs, no NCCL, or a model the GPU cannot train (each one line).
TrainBackendFactory data_parallel_backend_for(const TrainDeviceRequest& request, const JobEnvironment& job,
                                              std::string& note);

// `cuda` (or data-parallel GPUs) asked for a model whose layer has no GPU kernels at all
// (gpu_kernels_missing): a usage error (CLI::ValidationError) naming it, raised before any device is
// looked for or anything is allocated. Nothing for another request or a layer with kernels.
void refuse_gpu_without_kernels(const TrainDeviceRequest& request, const ModelConfig& model);

// "all" → −1, "N" (1 ≤ N ≤ 1024) → N; std::invalid_argument otherwise.
int parse_gpu_count(const std::string& text);

// train_backend_for() for a command, with its errors as usage errors (CLI::ValidationError, exit
// status 2): `cuda` for a model the GPU step does not support (raised when the Trainer calls the
// factory). DeviceError (status 1) for `cuda` without a usable GPU.
TrainBackendFactory command_line_backend(const TrainDeviceRequest& request, std::string& note);

// The --device and --gpu-gemm options of a command that trains or evaluates a model, kept as the
// words the user typed (so that CLI11 names the accepted values in its errors) and parsed once, by
// request().
struct DeviceOptions {
  std::string device = "auto";
  std::string gpu_gemm = "tf32";

  // Each command says in its help what --device auto does for it and what the precision costs.
  void add_to(CLI::App* cmd, const std::string& device_help, const std::string& gpu_gemm_help);
  TrainDeviceRequest request() const;
};

}  // namespace tttlab::cli
