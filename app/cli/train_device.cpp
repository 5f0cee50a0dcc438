#include "cli/train_device.hpp"

#include <CLI/CLI.hpp>

#ifdef TTTLAB_HAVE_CUDA
#include <memory>

#include "tttlab/kernels/train_cuda.hpp"
#include "tttlab/model/model.hpp"
#endif

namespace tttlab::cli {

TrainBackendFactory train_backend_for(DeviceRequest request, const std::string& gemm, std::string& note) {
  const DeviceSelection sel = select_device(request);  // DeviceError for cuda without a GPU
  note = sel.note;
  if (sel.device.kind == DeviceKind::CPU) return {};
#ifdef TTTLAB_HAVE_CUDA
  kernels::CudaTrainOptions o;
  o.device = sel.device.index;
  o.gemm = kernels::parse_gemm_precision(gemm);  // std::invalid_argument naming the accepted values
  const bool forced = request == DeviceRequest::CUDA;
  return [o, forced, &note](const TrainBackendContext& ctx) -> std::unique_ptr<TrainBackend> {
    const std::string why = kernels::cuda_train_unsupported(ctx.model->config());
    if (why.empty()) return std::make_unique<kernels::CudaTrainBackend>(ctx, o);
    if (forced) throw TrainDeviceUnsupported("--device cuda: " + why);
    note = why + "; using the CPU";
    return make_cpu_train_backend(ctx);
  };
#else
  (void)gemm;
  return {};  // select_device() never picks CUDA in a build without the kernels
#endif
}

TrainBackendFactory command_line_backend(const std::string& device, const std::string& gemm, std::string& note) {
  DeviceRequest request;
  try {
    request = parse_device_request(device);
  } catch (const std::invalid_argument& e) {
    throw CLI::ValidationError(e.what());
  }
  TrainBackendFactory f;
  try {
    f = train_backend_for(request, gemm, note);  // DeviceError (a runtime_error) passes through
  } catch (const std::invalid_argument& e) {
    throw CLI::ValidationError(e.what());
  }
  if (!f) return f;
  return [f](const TrainBackendContext& ctx) {
    try {
      return f(ctx);
    } catch (const TrainDeviceUnsupported& e) {
      throw CLI::ValidationError(e.what());
    }
  };
}

}  // namespace tttlab::cli
