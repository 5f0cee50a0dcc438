#include "cli/train_device.hpp"

#include <CLI/CLI.hpp>

#include <cstdlib>

#ifdef TTTLAB_HAVE_CUDA
#include <memory>

#include "tttlab/kernels/multi_gpu.hpp"
#include "tttlab/kernels/train_cuda.hpp"
#include "tttlab/model/model.hpp"
#endif

namespace tttlab::cli {

TrainBackendFactory train_backend_for(const TrainDeviceRequest& request, std::string& note) {
  const DeviceSelection sel = select_device(request.device);  // DeviceError for cuda without a GPU
  note = sel.note;
  if (sel.device.kind == DeviceKind::CPU) return {};
#ifdef TTTLAB_HAVE_CUDA
  kernels::CudaTrainOptions o;
  o.device = sel.device.index;
  o.gemm = kernels::gemm_precision(request.precision);
  o.forward_only = request.forward_only;
  const bool forced = request.device == DeviceRequest::CUDA;
  return [o, forced, &note](const TrainBackendContext& ctx) -> std::unique_ptr<TrainBackend> {
    // A layer without any GPU kernels first (a resumed run's layer is known only here).
    const std::string missing = gpu_kernels_missing(ctx.model->config().seq_layer);
    const std::string why = missing.empty() ? kernels::cuda_train_unsupported(ctx.model->config())
                                            : missing + "; use --device cpu";
    if (why.empty()) return std::make_unique<kernels::CudaTrainBackend>(ctx, o);
    if (forced) throw TrainDeviceUnsupported("--device cuda: " + why);
    note = (missing.empty() ? why : missing) + "; using the CPU";
    return make_cpu_train_backend(ctx);
  };
#else
  return {};  // select_device() never picks CUDA in a build without the kernels
#endif
}

void refuse_gpu_without_kernels(const TrainDeviceRequest& request, const ModelConfig& model) {
  if (request.device != DeviceRequest::CUDA && request.gpus == 0) return;
  if (const std::string why = gpu_kernels_missing(model.seq_layer); !why.empty())
    throw CLI::ValidationError(request.gpus != 0 ? "--gpus: " + why + "; leave out --gpus"
                                                 : "--device cuda: " + why + "; use --device cpu");
}

int parse_gpu_count(const std::string& text) {
  if (text == "all") return -1;
  std::size_t used = 0;
  int n = 0;
  try {
    n = std::stoi(text, &used);
  } catch (const std::exception&) {
    used = 0;
  }
  if (used != text.size() || n < 1 || n > 1024)
    throw std::invalid_argument("--gpus must be a number of GPUs (1 to 1024) or 'all', got '" + text + "'");
  return n;
}

TrainBackendFactory data_parallel_backend_for(const TrainDeviceRequest& request, const JobEnvironment& job,
                                              std::string& note) {
  if (request.device == DeviceRequest::CPU)
    throw std::invalid_argument("--gpus trains on GPUs; it cannot be combined with --device cpu");
#ifdef TTTLAB_HAVE_CUDA
  try {
    select_device(DeviceRequest::CUDA);
  } catch (const DeviceError& e) {  // say what was asked for: --gpus, not --device cuda
    std::string m = e.what();
    if (m.rfind("--device cuda: ", 0) == 0) m = m.substr(15);
    if (const auto k = m.find("; use --device cpu or auto"); k != std::string::npos) m = m.substr(0, k);
    throw DeviceError("--gpus: " + m + "; without --gpus, training runs on the CPU");
  }
  note.clear();
  kernels::MultiGpuOptions o;
  o.gpus = request.gpus > 0 ? request.gpus : kernels::cuda_device_count();  // all: every GPU this process sees
  o.job = job;
  o.cuda.gemm = kernels::gemm_precision(request.precision);
  apply_fault_injection(o.data_parallel, std::getenv("TTTLAB_FAIL_RANK_AT_STEP"));
  if (const char* t = std::getenv("TTTLAB_COLLECTIVE_TIMEOUT"); t && *t) {
    char* end = nullptr;
    const double s = std::strtod(t, &end);
    if (*end != '\0' || !(s >= 1 && s <= 86400))
      throw std::invalid_argument(std::string("TTTLAB_COLLECTIVE_TIMEOUT must be seconds between 1 and 86400, got '") + t + "'");
    o.timeout_seconds = s;
  }
  return kernels::multi_gpu_train_backend_factory(o);
#else
  (void)job;
  (void)note;
  throw std::invalid_argument("--gpus needs a build with the CUDA kernels (this one trains on the CPU only)");
#endif
}

TrainBackendFactory command_line_backend(const TrainDeviceRequest& request, std::string& note) {
  TrainBackendFactory f = train_backend_for(request, note);  // DeviceError (a runtime_error) passes through
  if (!f) return f;
  return [f](const TrainBackendContext& ctx) {
    try {
      return f(ctx);
    } catch (const TrainDeviceUnsupported& e) {
      throw CLI::ValidationError(e.what());
    }
  };
}

void DeviceOptions::add_to(CLI::App* cmd, const std::string& device_help, const std::string& gpu_gemm_help) {
  cmd->add_option("--device", device, device_help)->check(CLI::IsMember({"auto", "cpu", "cuda"}))->capture_default_str();
  cmd->add_option("--gpu-gemm", gpu_gemm, gpu_gemm_help)->check(CLI::IsMember({"tf32", "fp32"}))->capture_default_str();
}

TrainDeviceRequest DeviceOptions::request() const {
  TrainDeviceRequest r;
  try {
    r.device = parse_device_request(device);
    r.precision = parse_gpu_gemm_precision(gpu_gemm);
  } catch (const std::invalid_argument& e) {  // only where a caller set the words itself
    throw CLI::ValidationError(e.what());
  }
  return r;
}

}  // namespace tttlab::cli
