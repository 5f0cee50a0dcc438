// app/compute/cuda_compute.hpp — the GPU services of the desktop app's panels (lab::GpuCompute,
// app/lab/engine/compute_device.hpp) over the CUDA kernels of kernels/.
//
// Part of tttlab_app_cuda, built only with the CUDA kernels (TTTLAB_HAVE_CUDA): `tttlab gui` and the
// GPU tests link it; app/gui/ itself never does. It turns the panels' host arrays into device buffers,
// runs the TTT dual-form kernels (tttlab/kernels/ttt.hpp), the linear-attention kernel
// (attention.hpp) and the GPU training engine's forward (train_cuda.hpp, fp32 GEMMs so that the
// numbers agree with the CPU engine to fp32 rounding), and times them with CUDA events.
//
// THREADING: use from one thread at a time (the engine thread). Each object has its own CUDA stream.
#pragma once

#include <memory>
#include <string>

#include "lab/engine/compute_device.hpp"

namespace tttlab::compute {

// The GPU services on CUDA device `device`; null with `why_not` set when there is no usable GPU
// (no driver, no device, an architecture this build does not cover). Never throws for that.
std::shared_ptr<lab::GpuCompute> make_cuda_compute(std::string& why_not, int device = 0);

}  // namespace tttlab::compute
