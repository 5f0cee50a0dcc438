// tttlab/kernels/ttt_bench.hpp — timings of the TTT kernels (and the attention baselines) at one
// shape on the current GPU: the table of `tttlab bench --device cuda` and of tttlab_ttt_bench.
//
// Not part of tttlab_kernels: the benchmark is its own small library, tttlab_kernels_bench
// (kernels/bench/), which the two programs that print it link. This header includes neither CUDA
// nor Eigen headers.
#pragma once

#include <string>
#include <vector>

#include "tttlab/kernels/ttt.hpp"

namespace tttlab::kernels {

// Times the kernels at one shape on the current device (default: B=16, H=12, T=2048, d=64, b=16),
// on the legacy default stream; allocates about 1 GB at that shape and frees it again. Random inputs
// (at the default shape ~8x the L2, so they are not rotated), `warmup` untimed runs, then `repeats`
// runs each timed with CUDA events; reports the median and the min–max. The copy bandwidth is a
// 512 MiB device-to-device copy in the same call.
struct TttBenchRow {
  std::string name;    // e.g. "ttt-linear forward default"
  std::string shape;   // "B=16 H=12 T=2048 d=64 b=16"
  double median_ms = 0;
  double min_ms = 0, max_ms = 0;  // the fastest and slowest of the timed runs
  int repeats = 0, warmup = 0;    // timed runs; untimed runs before them
  double gflops = 0;   // useful FLOPs (counted as in docs/KERNELS.md) / median time
  double floor_ms = 0; // bytes that must move / measured device-to-device copy bandwidth
  double peer_ms = 0;  // published time of a peer implementation; 0: none
  std::string peer;    // what peer_ms is (or where the target comes from)
  double target_ms = 0;  // the target time set for this kernel; 0: none
};

struct TttBenchConfig {
  TttDims dims{16, 12, 2048, 64, 16};
  int warmup = 5;
  int repeats = 30;
  bool mlp = true;        // also time the TTT-MLP forward
  bool backward = true;   // also time forward + backward
  bool all_versions = true;  // every version of each kernel (otherwise the Default only)
  // The bf16 tensor-core attention is also timed at these sequence lengths (same B, H, d).
  std::vector<int> attention_lengths;
  // The row groups to time (kTttBenchGroups); empty: all of them.
  std::vector<std::string> groups;
};

// The names --only takes, one per group of rows, in the order the groups run.
inline constexpr const char* kTttBenchGroups[] = {"ttt-linear", "ttt-mlp", "attention",
                                                  "linear-attention", "matrix-rules", "delta-rules",
                                                  "titans", "lact"};
inline bool is_ttt_bench_group(const std::string& name) {
  for (const char* g : kTttBenchGroups)
    if (name == g) return true;
  return false;
}

struct TttBenchReport {
  std::string device;          // GPU name
  double copy_bandwidth_gbs = 0;  // measured device-to-device copy, bytes read + written per second
  std::vector<TttBenchRow> rows;
};

TttBenchReport ttt_bench(const TttBenchConfig& config = {});

// The report as a plain-text table (one line per row, plus the device and bandwidth).
std::string format_ttt_bench(const TttBenchReport& report);

}  // namespace tttlab::kernels
