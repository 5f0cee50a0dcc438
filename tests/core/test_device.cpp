// The device registry and select_device() (tttlab/device.hpp), driven by fake GPU probes so that
// every branch of the policy runs on any machine.
#include <gtest/gtest.h>

#include <stdexcept>
#include <string>

#include "tttlab/device.hpp"

namespace tttlab {
namespace {

DeviceInfo fake_gpu(int index, const std::string& name) {
  DeviceInfo d;
  d.kind = DeviceKind::CUDA;
  d.index = index;
  d.name = name;
  d.cc_major = 9;
  d.cc_minor = 0;
  d.memory_bytes = 85'000'000'000ull;
  return d;
}

// What select_device() threw, or "" when it did not throw DeviceError.
std::string device_error(DeviceRequest request, DeviceRegistry& registry) {
  try {
    select_device(request, registry);
  } catch (const DeviceError& e) {
    return e.what();
  }
  return "";
}

TEST(DeviceRequestParse, AcceptsTheThreeSpellingsOnly) {
  EXPECT_EQ(parse_device_request("auto"), DeviceRequest::Auto);
  EXPECT_EQ(parse_device_request("cpu"), DeviceRequest::CPU);
  EXPECT_EQ(parse_device_request("cuda"), DeviceRequest::CUDA);
  for (const char* bad : {"", "gpu", "CUDA", "cuda:0", " cpu"}) {
    try {
      parse_device_request(bad);
      ADD_FAILURE() << "accepted '" << bad << "'";
    } catch (const std::invalid_argument& e) {
      EXPECT_NE(std::string(e.what()).find("auto, cpu, cuda"), std::string::npos) << e.what();
    }
  }
  EXPECT_STREQ(to_string(DeviceRequest::CUDA), "cuda");
  EXPECT_STREQ(to_string(DeviceKind::CPU), "cpu");
}

TEST(DeviceInfoDescribe, SaysWhatTheDeviceIsInWords) {
  const DeviceInfo cpu = cpu_device();
  EXPECT_EQ(cpu.kind, DeviceKind::CPU);
  EXPECT_GE(cpu.threads, 1);
  EXPECT_EQ(cpu.describe(), "CPU (" + cpu.library + ", " + std::to_string(cpu.threads) +
                                (cpu.threads == 1 ? " thread)" : " threads)"));
  EXPECT_EQ(cpu.library.rfind("Eigen 3.", 0), 0u) << cpu.library;

  DeviceInfo one = cpu;
  one.threads = 1;
  one.library = "Eigen 3.4";
  EXPECT_EQ(one.describe(), "CPU (Eigen 3.4, 1 thread)");
  one.threads = 2;
  EXPECT_EQ(one.describe(), "CPU (Eigen 3.4, 2 threads)");

  // 85e9 bytes = 79.16 GiB.
  EXPECT_EQ(fake_gpu(0, "NVIDIA H100 80GB HBM3").describe(),
            "CUDA: NVIDIA H100 80GB HBM3, sm_90, 79.2 GiB");
  DeviceInfo small = fake_gpu(1, "Tiny");
  small.cc_major = 7;
  small.cc_minor = 5;
  small.memory_bytes = 3ull << 29;  // 1.5 GiB
  EXPECT_EQ(small.describe(), "CUDA: Tiny, sm_75, 1.5 GiB");
}

TEST(SelectDevice, CpuWhenTheBuildHasNoCudaKernels) {
  DeviceRegistry registry;  // no probe installed: a build without kernels/
  EXPECT_FALSE(registry.has_gpu_backend());
  const DeviceSelection s = select_device(DeviceRequest::Auto, registry);
  EXPECT_EQ(s.device.kind, DeviceKind::CPU);
  EXPECT_TRUE(s.note.empty()) << s.note;  // nothing unexpected happened: nothing to explain
  EXPECT_EQ(select_device(DeviceRequest::CPU, registry).device.kind, DeviceKind::CPU);

  const std::string err = device_error(DeviceRequest::CUDA, registry);
  EXPECT_NE(err.find("no CUDA kernels"), std::string::npos) << err;
  EXPECT_NE(err.find("--device cpu"), std::string::npos) << err;
}

TEST(SelectDevice, CpuWithANoteWhenKernelsAreBuiltButNoGpuIsFound) {
  DeviceRegistry registry;
  registry.set_gpu_probe([] { return GpuProbeResult{{}, "no NVIDIA driver found"}; });
  EXPECT_TRUE(registry.has_gpu_backend());
  const DeviceSelection s = select_device(DeviceRequest::Auto, registry);
  EXPECT_EQ(s.device.kind, DeviceKind::CPU);
  EXPECT_EQ(s.note, "CUDA kernels built, but no GPU found: no NVIDIA driver found; using the CPU");

  const std::string err = device_error(DeviceRequest::CUDA, registry);
  EXPECT_NE(err.find("no NVIDIA driver found"), std::string::npos) << err;
  EXPECT_EQ(err.find('\n'), std::string::npos) << err;
  EXPECT_EQ(select_device(DeviceRequest::CPU, registry).device.kind, DeviceKind::CPU);
}

TEST(SelectDevice, FirstGpuWhenOneIsPresentUnlessCpuIsForced) {
  DeviceRegistry registry;
  registry.set_gpu_probe([] {
    return GpuProbeResult{{fake_gpu(0, "First"), fake_gpu(1, "Second")}, ""};
  });
  for (DeviceRequest r : {DeviceRequest::Auto, DeviceRequest::CUDA}) {
    const DeviceSelection s = select_device(r, registry);
    EXPECT_EQ(s.device.kind, DeviceKind::CUDA) << to_string(r);
    EXPECT_EQ(s.device.name, "First") << to_string(r);
    EXPECT_EQ(s.device.index, 0) << to_string(r);
    EXPECT_TRUE(s.note.empty()) << s.note;
  }
  const DeviceSelection cpu = select_device(DeviceRequest::CPU, registry);
  EXPECT_EQ(cpu.device.kind, DeviceKind::CPU);
  EXPECT_TRUE(cpu.note.empty());
}

TEST(DeviceRegistry, ProbesOnceAndForgetsOnANewProbe) {
  DeviceRegistry registry;
  int calls = 0;
  registry.set_gpu_probe([&calls] {
    ++calls;
    return GpuProbeResult{{fake_gpu(0, "G")}, ""};
  });
  EXPECT_EQ(registry.gpus().devices.size(), 1u);
  EXPECT_EQ(registry.gpus().devices.size(), 1u);
  select_device(DeviceRequest::Auto, registry);
  EXPECT_EQ(calls, 1);

  registry.set_gpu_probe([] { return GpuProbeResult{}; });  // found nothing, said nothing
  EXPECT_TRUE(registry.gpus().devices.empty());
  EXPECT_EQ(registry.gpus().reason, "the GPU probe found no device");

  registry.set_gpu_probe(GpuProbe{});  // removed: back to a CPU-only build
  EXPECT_FALSE(registry.has_gpu_backend());
  EXPECT_NE(registry.gpus().reason.find("no CUDA kernels"), std::string::npos);
}

TEST(DeviceRegistry, AThrowingProbeBecomesAReasonNotACrash) {
  DeviceRegistry registry;
  registry.set_gpu_probe([]() -> GpuProbeResult { throw std::runtime_error("driver exploded"); });
  const DeviceSelection s = select_device(DeviceRequest::Auto, registry);
  EXPECT_EQ(s.device.kind, DeviceKind::CPU);
  EXPECT_NE(s.note.find("driver exploded"), std::string::npos) << s.note;
  EXPECT_THROW(select_device(DeviceRequest::CUDA, registry), DeviceError);
}

}  // namespace
}  // namespace tttlab
