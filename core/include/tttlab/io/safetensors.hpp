// tttlab/io/safetensors.hpp — reading and writing the safetensors format (checkpoints, optimizer
// state), with a reader that treats every file as hostile.
//
// FORMAT (as defined by Hugging Face's safetensors):
//   bytes [0, 8)          N, the header length, unsigned 64-bit little-endian
//   bytes [8, 8 + N)      the header: a UTF-8 JSON object, possibly padded at the end with spaces
//                           { "__metadata__": { "key": "value", ... },          (optional, strings only)
//                             "<tensor name>": { "dtype": "F32",
//                                                "shape": [d0, d1, ...],          (row-major, C order)
//                                                "data_offsets": [begin, end] },  (relative to byte 8 + N)
//                             ... }
//   bytes [8 + N, EOF)    the data section: each tensor's elements, little-endian, row-major.
// A tensor of shape [] is a scalar (one element); a shape with a 0 is an empty tensor (begin = end).
//
// DTYPES supported here: F32, F64, BF16 (bfloat16: the top 16 bits of an IEEE float), and the
// integer types U8 and I64 (token bytes and token positions in `tttlab states` files). Reading
// converts to float or double on request (U8 exactly; I64 exactly up to 2^53 in double). Writing
// float as BF16 rounds to nearest, ties to even; NaN stays NaN. Other safetensors dtypes (F16, I32,
// ...) are recognised and refused with a message that names them; any other dtype string is
// reported as unknown.
//
// VALIDATION on read. Each of these is a SafetensorsError whose one-line message names the file
// and the problem; nothing is ever read out of bounds, whatever the bytes:
//   - file shorter than 8 bytes, header length beyond the file size or above 100 MiB (the limit the
//     reference implementation uses);
//   - header not a JSON object, malformed JSON (with the byte offset), invalid UTF-8;
//   - a tensor entry that is not {dtype, shape, data_offsets}, a missing or extra key, a negative or
//     non-integer dimension or offset, begin > end, shape × dtype size ≠ end − begin (with overflow
//     checks), an unknown or unsupported dtype, a duplicate tensor name, __metadata__ values that are
//     not strings;
//   - offsets past the end of the data section, two tensors overlapping, a gap between tensors, or
//     bytes after the last tensor (the data section must be covered exactly, as the format requires).
//
// INTEGRITY. A writer asked to (set_checksum) records a SHA-256 of the WHOLE FILE in __metadata__
// under "tttlab_sha256", as 64 lowercase hex digits: the digest of every byte of the file (the length
// field, the header JSON with every tensor's name, dtype, shape and offsets, every metadata value, the
// padding and the data) with the digest's own 64 digits read as '0'. So two tensors' offsets swapped,
// a metadata value edited (a step, a seed, a config) or a changed data byte all fail verification.
// Metadata is free-form in the format, so other readers (Python's safetensors, the official loader)
// ignore it and the tensors keep their names and layout. Reading a whole file verifies the digest when
// it is present and refuses a mismatch (or a malformed digest) with a SafetensorsError naming the file;
// checksum_verified() tells whether one was checked, header_verified() whether it covered the header.
// Files of older TTT Lab versions record "tttlab_data_sha256", a digest of the data section alone:
// it is verified as before, but their header and metadata are not covered (header_verified() false).
// Files without either (written by other tools) load as before: callers decide whether to say so.
//
// LIMITS. read() reads at most max_bytes; read_header() reads only the 8-byte length and the header
// (at most max_header bytes), after checking that the file is regular and at least that long, so that
// a caller can check the tensors' names, dtypes and shapes against what it expects before reading,
// or allocating for, the data.
//
// WRITING: SafetensorsWriter collects tensors (copied and converted when added), then write() emits
// the header (metadata first, tensors in the order they were added, data packed in that order with
// no gaps; the header is padded with spaces so the data section starts at a multiple of 8 bytes)
// through AtomicFileWriter: temp file, fsync, rename.
//
// Threading: a SafetensorsFile is immutable after load; concurrent readers are fine.
#pragma once

#include <cstdint>
#include <filesystem>
#include <span>
#include <stdexcept>
#include <string>
#include <string_view>
#include <unordered_map>
#include <utility>
#include <vector>

namespace tttlab {

class SafetensorsError : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

enum class DType { F32, F64, BF16, U8, I64 };
std::string_view dtype_name(DType dtype);
std::size_t dtype_size(DType dtype);

// bfloat16 conversions (exposed for tests and for kernels that store bf16).
std::uint16_t float_to_bf16(float f);
float bf16_to_float(std::uint16_t b);

inline constexpr std::uint64_t k_safetensors_max_header = 100ull << 20;
inline constexpr const char* k_safetensors_checksum_key = "tttlab_sha256";
inline constexpr const char* k_safetensors_data_checksum_key = "tttlab_data_sha256";  // older files

struct TensorEntry {
  std::string name;
  DType dtype = DType::F32;
  std::vector<std::int64_t> shape;
  std::uint64_t begin = 0, end = 0;  // byte range within the data section
  std::int64_t numel() const;
};

class SafetensorsFile {
 public:
  // Reads and validates the whole file (FileError when it cannot be read, SafetensorsError when
  // its contents are invalid). Memory: the file's size.
  static SafetensorsFile read(const std::filesystem::path& path, std::uint64_t max_bytes = UINT64_MAX);
  // The header only (tensors(), metadata(), file_size()); raw(), to_f32() and to_f64() throw. The data
  // section is known to cover exactly the rest of the file, but is neither read nor checksummed.
  static SafetensorsFile read_header(const std::filesystem::path& path,
                                     std::uint64_t max_header = k_safetensors_max_header);
  // Validates bytes already in memory; `source` names them in error messages.
  static SafetensorsFile parse(std::vector<std::uint8_t> bytes, std::string source = "<memory>");

  const std::string& source() const { return m_source; }
  std::uint64_t file_size() const { return m_file_size; }
  // Whether the file was checked against a recorded SHA-256 (false: none recorded, or header only).
  bool checksum_verified() const { return m_checksum_verified; }
  // Whether that digest covered the header and metadata too (the whole-file digest; false for the
  // data-only digest of older files).
  bool header_verified() const { return m_header_verified; }
  bool has_checksum() const {
    return metadata_value(k_safetensors_checksum_key) != nullptr ||
           metadata_value(k_safetensors_data_checksum_key) != nullptr;
  }
  // In header order.
  const std::vector<TensorEntry>& tensors() const { return m_tensors; }
  const TensorEntry* find(std::string_view name) const;
  const TensorEntry& at(std::string_view name) const;  // SafetensorsError when absent

  // Elements converted to float / double (exact for F32→float, F32/F64→double, BF16→either).
  // F64 → float rounds to nearest.
  std::vector<float> to_f32(std::string_view name) const;
  std::vector<double> to_f64(std::string_view name) const;
  // The stored little-endian bytes of one tensor.
  std::span<const std::uint8_t> raw(std::string_view name) const;

  const std::vector<std::pair<std::string, std::string>>& metadata() const { return m_metadata; }
  const std::string* metadata_value(std::string_view key) const;

 private:
  std::string m_source;
  std::vector<std::uint8_t> m_bytes;
  std::size_t m_data_start = 0;
  std::vector<TensorEntry> m_tensors;
  std::unordered_map<std::string, std::size_t> m_index;  // name → position in m_tensors
  std::vector<std::pair<std::string, std::string>> m_metadata;
  std::uint64_t m_file_size = 0;
  bool m_header_only = false;
  bool m_checksum_verified = false;
  bool m_header_verified = false;

  void parse_header(std::string_view header, std::uint64_t data_size);
  void verify_checksum();
};

class SafetensorsWriter {
 public:
  // `shape` must hold exactly data.size() elements (product; [] for a scalar). The name must be
  // non-empty, not "__metadata__", and not already added. Throws std::invalid_argument otherwise.
  // `stored` picks the dtype in the file; float data may be stored as F32, BF16 or F64, double data
  // as F64, F32 or BF16 (narrowing rounds to nearest even).
  void add(std::string name, std::vector<std::int64_t> shape, std::span<const float> data,
           DType stored = DType::F32);
  void add(std::string name, std::vector<std::int64_t> shape, std::span<const double> data,
           DType stored = DType::F64);
  // Integer tensors, stored as they are: bytes as U8, counts and positions as I64.
  void add(std::string name, std::vector<std::int64_t> shape, std::span<const std::uint8_t> data);
  void add(std::string name, std::vector<std::int64_t> shape, std::span<const std::int64_t> data);
  // Replaces the value when the key exists.
  void set_metadata(std::string key, std::string value);
  // Records the SHA-256 of the whole file in __metadata__ (see INTEGRITY above) when the file is
  // serialized or written.
  void set_checksum(bool on = true) { m_checksum = on; }

  std::size_t size() const { return m_tensors.size(); }
  std::vector<std::uint8_t> serialize() const;
  void write(const std::filesystem::path& path) const;

 private:
  struct Pending {
    std::string name;
    DType dtype;
    std::vector<std::int64_t> shape;
    std::vector<std::uint8_t> bytes;
  };
  std::vector<Pending> m_tensors;
  std::vector<std::pair<std::string, std::string>> m_metadata;
  bool m_checksum = false;

  void check_new(const std::string& name, const std::vector<std::int64_t>& shape, std::size_t count) const;
  std::string header() const;
};

}  // namespace tttlab
