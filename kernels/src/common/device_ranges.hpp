// The argument checks the kernels' host functions share: device pointers given, 16-byte aligned (the
// kernels' vector and cp.async accesses need it), and no output overlapping an input or another
// output. Host code only; private to kernels/src.
#pragma once

#include <cstddef>
#include <cstdint>
#include <stdexcept>
#include <string>

namespace tttlab::kernels::detail {

// One argument: its pointer, its extent in bytes and its name in messages.
struct DeviceRange {
  const void* p;
  std::size_t bytes;
  const char* name;
};

// The sizes of a [B, T, H·d] sequence op: positive, within the index types and the grid's y limit
// (B·H), and a head dim the kernels take (`supported`, listed as `dims` in the message), checked in
// that order; std::invalid_argument naming the first that fails.
inline void check_chunked_dims(const char* fn, int B, int H, int T, int d, bool supported,
                               const char* dims) {
  const std::string f(fn);
  const auto require = [](bool ok, const std::string& msg) {
    if (!ok) throw std::invalid_argument(msg);
  };
  require(B >= 1 && H >= 1 && T >= 1, f + ": batch, heads and seq_len must be >= 1 (got B=" +
                                          std::to_string(B) + " H=" + std::to_string(H) +
                                          " T=" + std::to_string(T) + ")");
  require(supported, f + ": head_dim must be " + dims + " (got " + std::to_string(d) + ")");
  require(double(B) * T * H * d < 9.0e18 && T <= (1 << 30), f + ": tensors too large");
  require(double(B) * H <= 65535.0, f + ": batch·heads must be <= 65535 (grid limit)");
}

// std::invalid_argument, "fn: <name> is null", "... must be 16-byte aligned" or "fn: <out> overlaps
// <in or out>", for the first offence found.
inline void check_device_ranges(const char* fn, const DeviceRange* ins, int nin,
                                const DeviceRange* outs, int nout) {
  const auto overlap = [](const DeviceRange& a, const DeviceRange& b) {
    const auto pa = reinterpret_cast<std::uintptr_t>(a.p),
               pb = reinterpret_cast<std::uintptr_t>(b.p);
    return pa < pb + b.bytes && pb < pa + a.bytes;
  };
  for (int i = 0; i < nin + nout; ++i) {
    const DeviceRange& r = i < nin ? ins[i] : outs[i - nin];
    if (!r.p) throw std::invalid_argument(std::string(fn) + ": " + r.name + " is null");
    if (reinterpret_cast<std::uintptr_t>(r.p) % 16 != 0)
      throw std::invalid_argument(std::string(fn) + ": " + r.name +
                                  " must be 16-byte aligned (cudaMalloc gives 256)");
  }
  for (int i = 0; i < nout; ++i) {
    for (int j = 0; j < nin; ++j)
      if (overlap(outs[i], ins[j]))
        throw std::invalid_argument(std::string(fn) + ": " + outs[i].name + " overlaps " +
                                    ins[j].name);
    for (int j = i + 1; j < nout; ++j)
      if (overlap(outs[i], outs[j]))
        throw std::invalid_argument(std::string(fn) + ": " + outs[i].name + " overlaps " +
                                    outs[j].name);
  }
}

}  // namespace tttlab::kernels::detail
