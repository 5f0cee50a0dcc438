// GPU tests: CUDA device discovery and a real kernel launch.
//
// Tests in the fixture CudaDeviceTest need a GPU and report Skipped ("no CUDA device: <reason>")
// without one. The others check the no-GPU path too: the query must answer with a status and a
// message, never crash, and the device policy must follow what the probe found.
#include <gtest/gtest.h>

#include <cmath>
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <stdexcept>
#include <string>
#include <vector>

#include "require_gpu.hpp"
#include "tttlab/device.hpp"
#include "tttlab/kernels/cuda_device.hpp"
#include "vector_add.hpp"

namespace tttlab::kernels {
namespace {

class CudaDeviceTest : public ::testing::Test {
 protected:
  void SetUp() override {
    TTTLAB_REQUIRE_GPU();
    query_ = query_cuda_devices();
  }
  CudaQuery query_;
};

TEST(CudaQuery, AnswersWithAConsistentStatus) {
  const CudaQuery q = query_cuda_devices();
  EXPECT_GE(q.runtime_version, 11000) << "runtime version " << q.runtime_version;
  if (q.status == CudaStatus::Ok) {
    EXPECT_FALSE(q.devices.empty());
    EXPECT_TRUE(q.message.empty()) << q.message;
    EXPECT_GT(q.driver_version, 0);
  } else {
    EXPECT_TRUE(q.devices.empty());
    EXPECT_FALSE(q.message.empty()) << "status '" << to_string(q.status) << "' without a message";
    EXPECT_EQ(q.message.find('\n'), std::string::npos) << "message is not one line: " << q.message;
  }
  // Asking again (the runtime is initialised now, or known to be unusable) gives the same answer.
  const CudaQuery again = query_cuda_devices();
  EXPECT_EQ(again.status, q.status);
  EXPECT_EQ(again.message, q.message);
  EXPECT_EQ(again.devices.size(), q.devices.size());
}

TEST(CudaQuery, BuildSummaryNamesRuntimeAndArchitecture) {
  const std::string s = cuda_build_summary();
  EXPECT_EQ(s.rfind("CUDA " + cuda_version_string(query_cuda_devices().runtime_version), 0), 0u)
      << s;
  EXPECT_NE(s.find("sm_"), std::string::npos) << s;
  EXPECT_EQ(cuda_version_string(13000), "13.0");
  EXPECT_EQ(cuda_version_string(12060), "12.6");
}

TEST(CudaProbe, AgreesWithQueryAndDrivesDeviceSelection) {
  const CudaQuery q = query_cuda_devices();
  DeviceRegistry registry;
  registry.set_gpu_probe(probe_cuda_gpus);
  const GpuProbeResult probe = registry.gpus();
  if (q.status != CudaStatus::Ok) {
    EXPECT_TRUE(probe.devices.empty());
    EXPECT_EQ(probe.reason, q.message);
  }
  ASSERT_LE(probe.devices.size(), q.devices.size());
  for (const DeviceInfo& d : probe.devices) {
    ASSERT_GE(d.index, 0);
    ASSERT_LT(std::size_t(d.index), q.devices.size());
    EXPECT_EQ(d.kind, DeviceKind::CUDA);
    EXPECT_EQ(d.name, q.devices[std::size_t(d.index)].name);
  }

  const DeviceSelection autosel = select_device(DeviceRequest::Auto, registry);
  if (probe.devices.empty()) {
    EXPECT_EQ(autosel.device.kind, DeviceKind::CPU);
    EXPECT_NE(autosel.note.find(probe.reason), std::string::npos) << autosel.note;
    EXPECT_THROW(select_device(DeviceRequest::CUDA, registry), DeviceError);
  } else {
    EXPECT_EQ(autosel.device.kind, DeviceKind::CUDA);
    EXPECT_EQ(autosel.device.name, probe.devices.front().name);
    EXPECT_EQ(select_device(DeviceRequest::CUDA, registry).device.kind, DeviceKind::CUDA);
  }
  EXPECT_EQ(select_device(DeviceRequest::CPU, registry).device.kind, DeviceKind::CPU);
}

TEST_F(CudaDeviceTest, ReportsNameComputeCapabilityAndMemory) {
  ASSERT_FALSE(query_.devices.empty());
  for (std::size_t i = 0; i < query_.devices.size(); ++i) {
    const CudaDeviceProps& d = query_.devices[i];
    SCOPED_TRACE(d.name);
    EXPECT_EQ(d.index, int(i));
    EXPECT_FALSE(d.name.empty());
    EXPECT_GE(d.cc_major, 7) << "compute capability " << d.cc_major << "." << d.cc_minor;
    EXPECT_GT(d.total_memory_bytes, std::uint64_t(1) << 30);
    EXPECT_GT(d.multiprocessors, 0);
  }
  // Shown in the test log (ctest -V): which device the engine would pick here.
  DeviceRegistry registry;
  registry.set_gpu_probe(probe_cuda_gpus);
  std::printf("[   INFO   ] %s\n",
              select_device(DeviceRequest::Auto, registry).device.describe().c_str());
}

TEST_F(CudaDeviceTest, VectorAddMatchesHostSum) {
  // Sizes around the block size (a partial last block, a single element) and one of a few MiB.
  for (std::size_t n : {1u, 255u, 256u, 257u, (1u << 20) + 3u}) {
    for (int block : {32, 256, 1024}) {
      std::vector<float> a(n), b(n);
      for (std::size_t i = 0; i < n; ++i) {
        a[i] = std::sin(0.001f * float(i)) * 100.0f;
        b[i] = 1.0f / float(i + 1);
      }
      const std::vector<float> out = test::vector_add_on_gpu(a, b, block);
      ASSERT_EQ(out.size(), n);
      int wrong = 0;
      for (std::size_t i = 0; i < n; ++i) {
        // One IEEE addition on each side: the results must be bit-identical.
        const float host = a[i] + b[i];
        if (out[i] != host && ++wrong <= 3)
          ADD_FAILURE() << "n=" << n << " block=" << block << " i=" << i << ": gpu " << out[i]
                        << " != host " << host;
      }
      EXPECT_EQ(wrong, 0) << "n=" << n << " block=" << block;
    }
  }
}

TEST_F(CudaDeviceTest, VectorAddRejectsBadArguments) {
  EXPECT_THROW(test::vector_add_on_gpu({1.0f}, {1.0f, 2.0f}, 32), std::invalid_argument);
  EXPECT_THROW(test::vector_add_on_gpu({1.0f}, {1.0f}, 0), std::invalid_argument);
  EXPECT_THROW(test::vector_add_on_gpu({1.0f}, {1.0f}, 2048), std::invalid_argument);
  EXPECT_TRUE(test::vector_add_on_gpu({}, {}, 32).empty());
}

}  // namespace
}  // namespace tttlab::kernels
