// fuzz_safetensors: any bytes through SafetensorsFile::parse, the reader every checkpoint, optimizer
// state and `tttlab states` file goes through (tttlab/io/safetensors.hpp lists what it must refuse).
//
// Contract checked: parse() either throws SafetensorsError or returns a file whose every tensor can be
// read (raw bytes, float and double) within its own byte range, and which the writer reproduces: the
// accepted tensors and metadata, written again and read back, give the same values. A reader that lets
// through what the writer cannot express (or the reverse) shows up here, not in a user's checkpoint.
#include <cmath>
#include <cstring>
#include <optional>
#include <stdexcept>
#include <vector>

#include "fuzz_check.hpp"
#include "tttlab/io/safetensors.hpp"

namespace {

using namespace tttlab;

bool same_value(double a, double b) { return (std::isnan(a) && std::isnan(b)) || std::memcmp(&a, &b, sizeof a) == 0; }

// Writes every tensor and metadata entry of `f` again, in its own dtype; false when the writer refuses
// one of them for a reason the reader does not share (documented: empty names).
bool rewrite(const SafetensorsFile& f, SafetensorsWriter& w) {
  for (const auto& [key, value] : f.metadata()) w.set_metadata(key, value);
  for (const TensorEntry& t : f.tensors()) {
    if (t.name.empty()) return false;  // the writer requires names; the format does not
    const auto raw = f.raw(t.name);
    switch (t.dtype) {
      case DType::F32: {
        std::vector<float> v(raw.size() / 4);
        if (!v.empty()) std::memcpy(v.data(), raw.data(), raw.size());
        w.add(t.name, t.shape, std::span<const float>(v), DType::F32);
        break;
      }
      case DType::F64: {
        std::vector<double> v(raw.size() / 8);
        if (!v.empty()) std::memcpy(v.data(), raw.data(), raw.size());
        w.add(t.name, t.shape, std::span<const double>(v), DType::F64);
        break;
      }
      case DType::BF16: {
        const std::vector<float> v = f.to_f32(t.name);  // exact: bf16 is the top half of a float
        w.add(t.name, t.shape, std::span<const float>(v), DType::BF16);
        break;
      }
      case DType::U8:
        w.add(t.name, t.shape, raw);
        break;
      case DType::I64: {
        std::vector<std::int64_t> v(raw.size() / 8);
        if (!v.empty()) std::memcpy(v.data(), raw.data(), raw.size());
        w.add(t.name, t.shape, std::span<const std::int64_t>(v));
        break;
      }
    }
  }
  return true;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  const auto parsed = fuzz::parsed_or_refused<SafetensorsError>(
      [&] { return SafetensorsFile::parse(std::vector<std::uint8_t>(data, data + size), "fuzz.safetensors"); });
  if (!parsed) return 0;
  const SafetensorsFile& file = *parsed;

  for (const TensorEntry& t : file.tensors()) {
    FUZZ_CHECK(file.find(t.name) == &t);
    FUZZ_CHECK(t.begin <= t.end && t.end <= size);
    FUZZ_CHECK(t.numel() >= 0);
    const auto raw = file.raw(t.name);
    FUZZ_CHECK(raw.size() == t.end - t.begin);
    FUZZ_CHECK(raw.size() == static_cast<std::uint64_t>(t.numel()) * dtype_size(t.dtype));
    FUZZ_CHECK(file.to_f32(t.name).size() == static_cast<std::size_t>(t.numel()));
    FUZZ_CHECK(file.to_f64(t.name).size() == static_cast<std::size_t>(t.numel()));
  }
  for (const auto& [key, value] : file.metadata()) FUZZ_CHECK(file.metadata_value(key) != nullptr);

  SafetensorsWriter writer;
  if (!rewrite(file, writer)) return 0;
  const SafetensorsFile again = SafetensorsFile::parse(writer.serialize(), "rewritten.safetensors");
  FUZZ_CHECK(again.tensors().size() == file.tensors().size());
  FUZZ_CHECK(again.metadata() == file.metadata());
  for (const TensorEntry& t : file.tensors()) {
    const TensorEntry* u = again.find(t.name);
    FUZZ_CHECK(u != nullptr);
    FUZZ_CHECK(u->dtype == t.dtype && u->shape == t.shape);
    const std::vector<double> a = file.to_f64(t.name), b = again.to_f64(t.name);
    FUZZ_CHECK(a.size() == b.size());
    for (std::size_t i = 0; i < a.size(); ++i) FUZZ_CHECK(same_value(a[i], b[i]));
  }
  return 0;
}
