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
