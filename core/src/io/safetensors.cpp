// safetensors reader (validating) and writer (see tttlab/io/safetensors.hpp).
#include "tttlab/io/safetensors.hpp"

#include <algorithm>
#include <bit>
#include <cmath>
#include <cstring>
#include <unordered_set>

#include "tttlab/io/atomic_file.hpp"
#include "tttlab/io/json.hpp"
#include "tttlab/io/limits.hpp"
#include "tttlab/io/sha256.hpp"
#include "tttlab/io/utf8.hpp"

namespace tttlab {
namespace {

// Explicit byte order, so the files are the same on any host.
std::uint64_t load_le(const std::uint8_t* p, int n) {
  std::uint64_t v = 0;
  for (int i = n - 1; i >= 0; --i) v = (v << 8) | p[i];
  return v;
}
void store_le(std::uint8_t* p, std::uint64_t v, int n) {
  for (int i = 0; i < n; ++i) p[i] = static_cast<std::uint8_t>(v >> (8 * i));
}

// Every dtype name of the safetensors format; those we do not read are refused by name.
bool is_known_unsupported_dtype(std::string_view s) {
  static const char* names[] = {"BOOL", "I8", "U16", "I16", "F16", "U32", "I32", "U64",
                                "F8_E4M3", "F8_E5M2", "F8_E8M0", "F4", "F6_E2M3", "F6_E3M2", "C64"};
  for (const char* n : names)
    if (s == n) return true;
  return false;
}

struct Checked {
  std::string src;
  [[noreturn]] void fail(const std::string& what) const {
    throw SafetensorsError("safetensors file '" + clip(src, 240) + "': " + what);
  }
};

std::string shape_string(const std::vector<std::int64_t>& shape) {
  std::string s = "[";
  for (std::size_t i = 0; i < shape.size(); ++i) s += (i ? ", " : "") + std::to_string(shape[i]);
  return s + "]";
}

}  // namespace

std::string_view dtype_name(DType d) {
  switch (d) {
    case DType::F32: return "F32";
    case DType::F64: return "F64";
    case DType::U8: return "U8";
    case DType::I64: return "I64";
    default: return "BF16";
  }
}

std::size_t dtype_size(DType d) {
  switch (d) {
    case DType::F32: return 4;
    case DType::F64: return 8;
    case DType::U8: return 1;
    case DType::I64: return 8;
    default: return 2;
  }
}

std::uint16_t float_to_bf16(float f) {
  const std::uint32_t bits = std::bit_cast<std::uint32_t>(f);
  if (std::isnan(f)) return static_cast<std::uint16_t>((bits >> 16) | 0x0040);  // keep sign, force quiet
  // Round to nearest, ties to even: add 0x7FFF plus the lowest kept bit, then truncate. Overflow
  // past the largest finite bf16 carries into the exponent and gives infinity, as IEEE rounding does.
  const std::uint32_t rounded = bits + 0x7FFFu + ((bits >> 16) & 1u);
  return static_cast<std::uint16_t>(rounded >> 16);
}

float bf16_to_float(std::uint16_t b) { return std::bit_cast<float>(static_cast<std::uint32_t>(b) << 16); }

std::int64_t TensorEntry::numel() const {
  std::int64_t n = 1;
  for (auto d : shape) n *= d;
  return n;
}

// ---------------------------------------------------------------------------------------------
// Reader.

SafetensorsFile SafetensorsFile::read(const std::filesystem::path& path, std::uint64_t max_bytes) {
  return parse(read_file_bytes(path, max_bytes), path.string());
}

namespace {
// The header length field, checked against the file size and the limit.
std::uint64_t header_length(const Checked& c, const std::uint8_t* first8, std::uint64_t size, std::uint64_t max_header) {
  if (size < 8)
    c.fail("only " + std::to_string(size) + " bytes; a safetensors file starts with an 8-byte header length (truncated file?)");
  const std::uint64_t n = load_le(first8, 8);
  if (n > size - 8)
    c.fail("header length " + std::to_string(n) + " exceeds the " + std::to_string(size - 8) +
           " bytes after the length field (truncated file, or not a safetensors file)");
  if (n > max_header)
    c.fail("header length " + std::to_string(n) + " is above the limit of " + std::to_string(max_header) +
           " bytes (not a safetensors file?)");
  return n;
}
}  // namespace

SafetensorsFile SafetensorsFile::read_header(const std::filesystem::path& path, std::uint64_t max_header) {
  const Checked c{path.string()};
  const std::uint64_t size = regular_file_size(path);
  std::uint8_t first8[8] = {};
  if (size >= 8) {
    const auto b = read_file_range(path, 0, 8);
    std::copy(b.begin(), b.end(), first8);
  }
  const std::uint64_t n = header_length(c, first8, size, max_header);
  const std::vector<std::uint8_t> header = read_file_range(path, 8, n);
  SafetensorsFile f;
  f.m_source = path.string();
  f.m_file_size = size;
  f.m_header_only = true;
  f.parse_header(std::string_view(reinterpret_cast<const char*>(header.data()), header.size()), size - 8 - n);
  f.m_data_start = static_cast<std::size_t>(8 + n);
  return f;
}

SafetensorsFile SafetensorsFile::parse(std::vector<std::uint8_t> bytes, std::string source) {
  const Checked c{source};
  SafetensorsFile f;
  f.m_source = std::move(source);
  const std::uint64_t size = bytes.size();
  const std::uint64_t n = header_length(c, bytes.data(), size, k_safetensors_max_header);
  const std::string_view header(reinterpret_cast<const char*>(bytes.data() + 8), static_cast<std::size_t>(n));
  f.m_file_size = size;
  f.parse_header(header, size - 8 - n);
  f.m_data_start = static_cast<std::size_t>(8 + n);
  f.m_bytes = std::move(bytes);
  f.verify_checksum();
  return f;
}

namespace {
bool is_digest(const std::string& v) {
  const auto hex_digit = [](char ch) { return (ch >= '0' && ch <= '9') || (ch >= 'a' && ch <= 'f'); };
  return v.size() == 64 && std::all_of(v.begin(), v.end(), hex_digit);
}
// `"<key>":"`: how the digest's key and the opening quote of its value stand in the header JSON. A
// metadata value or tensor name cannot hold it (their quotes are escaped), so it appears once.
std::string digest_marker() { return std::string("\"") + k_safetensors_checksum_key + "\":\""; }
}  // namespace

void SafetensorsFile::verify_checksum() {
  const Checked c{m_source};
  if (const std::string* recorded = metadata_value(k_safetensors_checksum_key)) {
    if (!is_digest(*recorded))
      c.fail(std::string("__metadata__ value of '") + k_safetensors_checksum_key +
             "' is not a SHA-256 (64 lowercase hex digits): the file is damaged");
    // The digest of the whole file with its own 64 digits read as '0' (see INTEGRITY).
    const std::string_view header(reinterpret_cast<const char*>(m_bytes.data() + 8), m_data_start - 8);
    const std::string marker = digest_marker();
    const std::size_t at = header.find(marker);
    if (at == std::string_view::npos || header.find(marker, at + 1) != std::string_view::npos ||
        header.substr(at + marker.size(), 64) != *recorded)
      c.fail("the SHA-256 recorded in the header cannot be located in it: the file is damaged");
    std::vector<std::uint8_t> zeros(m_bytes.begin(), m_bytes.begin() + static_cast<std::ptrdiff_t>(m_data_start));
    std::fill_n(zeros.begin() + 8 + static_cast<std::ptrdiff_t>(at + marker.size()), 64, '0');
    Sha256 h;
    h.update(std::span<const std::uint8_t>(zeros));
    h.update(std::span<const std::uint8_t>(m_bytes.data() + m_data_start, m_bytes.size() - m_data_start));
    if (to_hex(h.finish()) != *recorded)
      c.fail("the file does not match the SHA-256 recorded in its header: the file is damaged or was edited (a "
             "changed byte in the tensors, the header or the metadata, or a partial copy)");
    m_checksum_verified = true;
    m_header_verified = true;
    return;
  }
  const std::string* recorded = metadata_value(k_safetensors_data_checksum_key);
  if (!recorded) return;
  if (!is_digest(*recorded))
    c.fail(std::string("__metadata__ value of '") + k_safetensors_data_checksum_key +
           "' is not a SHA-256 (64 lowercase hex digits): the file is damaged");
  const std::span<const std::uint8_t> data(m_bytes.data() + m_data_start, m_bytes.size() - m_data_start);
  if (sha256_hex(data) != *recorded)
    c.fail("the tensor data does not match the SHA-256 recorded in the header: the file is damaged "
           "(a changed byte or a partial copy)");
  m_checksum_verified = true;
}

void SafetensorsFile::parse_header(std::string_view header, std::uint64_t data_size) {
  const Checked c{m_source};
  SafetensorsFile& f = *this;
  const std::uint64_t size = m_file_size;
  if (header.size() < 2 || header[0] != '{') c.fail("the header does not start with '{' (not a safetensors file?)");

  // Duplicate keys are refused while parsing (nlohmann would keep the last one silently), with the
  // message saying which kind of key repeated.
  Json root;
  try {
    root = parse_json(header, "JSON header", JsonParseOptions{.max_depth = 8, .reject_duplicate_keys = true});
  } catch (const JsonDuplicateKey& e) {
    const std::vector<std::string>& path = e.path();
    if (path.empty())
      c.fail(e.key() == "__metadata__" ? "duplicate __metadata__ in the header"
                                       : "duplicate tensor name '" + clip(e.key()) + "' in the header");
    if (path.size() == 1 && path[0] == "__metadata__") c.fail("duplicate __metadata__ key '" + clip(e.key()) + "'");
    if (path.size() == 1) c.fail("tensor '" + clip(path[0]) + "' has an unexpected or repeated key '" + clip(e.key()) + "'");
    c.fail("malformed " + std::string(e.what()));
  } catch (const JsonError& e) {
    c.fail("malformed " + std::string(e.what()));  // "malformed JSON header: JSON parse error at byte ..."
  }
  if (!root.is_object()) c.fail("the header is not a JSON object");

  for (const auto& [name, value] : root.items()) {
    if (name == "__metadata__") {
      if (!value.is_object()) c.fail("__metadata__ must be an object of strings");
      for (const auto& [k, v] : value.items()) {
        if (!v.is_string()) c.fail("__metadata__ value of '" + clip(k) + "' is not a string");
        f.m_metadata.emplace_back(k, v.get<std::string>());
      }
      continue;
    }
    if (name.empty()) c.fail("a tensor has an empty name");
    if (!value.is_object()) c.fail("entry of tensor '" + clip(name) + "' is not an object");
    const Json *dt = nullptr, *sh = nullptr, *off = nullptr;
    for (const auto& [k, v] : value.items()) {
      if (k == "dtype") dt = &v;
      else if (k == "shape") sh = &v;
      else if (k == "data_offsets") off = &v;
      else c.fail("tensor '" + clip(name) + "' has an unexpected or repeated key '" + clip(k) + "'");
    }
    if (!dt || !sh || !off) c.fail("tensor '" + clip(name) + "' lacks one of dtype, shape, data_offsets");

    TensorEntry t;
    t.name = name;
    if (!dt->is_string()) c.fail("dtype of tensor '" + clip(name) + "' is not a string");
    const std::string& ds = dt->get_ref<const std::string&>();
    if (ds == "F32") t.dtype = DType::F32;
    else if (ds == "F64") t.dtype = DType::F64;
    else if (ds == "BF16") t.dtype = DType::BF16;
    else if (ds == "U8") t.dtype = DType::U8;
    else if (ds == "I64") t.dtype = DType::I64;
    else if (is_known_unsupported_dtype(ds))
      c.fail("tensor '" + clip(name) + "' has dtype " + clip(ds) + ", which TTT Lab does not read (it reads F32, F64, BF16, U8 and I64)");
    else
      c.fail("tensor '" + clip(name) + "' has unknown dtype '" + clip(ds) + "'");

    if (!sh->is_array()) c.fail("shape of tensor '" + clip(name) + "' is not an array");
    // numel × element size must stay below 2^64: check each product against the data size bound.
    unsigned __int128 nbytes = dtype_size(t.dtype);
    for (const Json& d : *sh) {
      if (!d.is_number_unsigned() || d.get<std::uint64_t>() > static_cast<std::uint64_t>(INT64_MAX))
        c.fail("shape of tensor '" + clip(name) + "' holds something other than a non-negative integer");
      t.shape.push_back(static_cast<std::int64_t>(d.get<std::uint64_t>()));
      nbytes *= d.get<std::uint64_t>();
      if (nbytes > size) nbytes = static_cast<unsigned __int128>(size) + 1;  // saturate: already too big
    }
    if (!off->is_array() || off->size() != 2 || !(*off)[0].is_number_unsigned() || !(*off)[1].is_number_unsigned())
      c.fail("data_offsets of tensor '" + clip(name) + "' must be two non-negative integers [begin, end]");
    t.begin = (*off)[0].get<std::uint64_t>();
    t.end = (*off)[1].get<std::uint64_t>();
    if (t.begin > t.end)
      c.fail("data_offsets of tensor '" + clip(name) + "' begin after they end [" + std::to_string(t.begin) + ", " +
             std::to_string(t.end) + "]");
    if (t.end > data_size)
      c.fail("tensor '" + clip(name) + "' ends at data offset " + std::to_string(t.end) + " but the data section holds only " +
             std::to_string(data_size) + " bytes (truncated file?)");
    if (nbytes != t.end - t.begin)
      c.fail("tensor '" + clip(name) + "' has shape " + clip(shape_string(t.shape)) + " and dtype " + clip(ds) + ", which need " +
             (nbytes > size ? std::string("more bytes than the file has") : std::to_string(static_cast<std::uint64_t>(nbytes)) + " bytes") +
             ", but its data_offsets span " + std::to_string(t.end - t.begin));
    f.m_tensors.push_back(std::move(t));
  }

  // The data section must be covered exactly: sorted by offset, each tensor starts where the
  // previous one ended, the first at 0 and the last at the end.
  std::vector<const TensorEntry*> order;
  for (const auto& t : f.m_tensors) order.push_back(&t);
  std::sort(order.begin(), order.end(), [](const TensorEntry* a, const TensorEntry* b) {
    return a->begin != b->begin ? a->begin < b->begin : a->end < b->end;
  });
  std::uint64_t covered = 0;
  const TensorEntry* prev = nullptr;
  for (const TensorEntry* t : order) {
    if (t->begin < covered)
      c.fail("tensors '" + clip(prev->name) + "' and '" + clip(t->name) + "' overlap in the data section");
    if (t->begin > covered)
      c.fail("a gap of " + std::to_string(t->begin - covered) + " bytes before tensor '" + clip(t->name) +
             "' in the data section (offsets must cover the data exactly)");
    covered = t->end;
    prev = t;
  }
  if (covered != data_size)
    c.fail("the data section has " + std::to_string(data_size) + " bytes but the tensors cover only " +
           std::to_string(covered) + " (trailing bytes, or offsets not covering the data)");

  for (std::size_t i = 0; i < f.m_tensors.size(); ++i) f.m_index.emplace(f.m_tensors[i].name, i);
}

const TensorEntry* SafetensorsFile::find(std::string_view name) const {
  const auto it = m_index.find(std::string(name));
  return it == m_index.end() ? nullptr : &m_tensors[it->second];
}

const TensorEntry& SafetensorsFile::at(std::string_view name) const {
  if (const TensorEntry* t = find(name)) return *t;
  throw SafetensorsError("safetensors file '" + clip(m_source, 240) + "': no tensor named '" + clip(name) + "'");
}

std::span<const std::uint8_t> SafetensorsFile::raw(std::string_view name) const {
  const TensorEntry& t = at(name);
  if (m_header_only)
    throw SafetensorsError("safetensors file '" + clip(m_source, 240) + "': only the header was read (read_header)");
  return {m_bytes.data() + m_data_start + t.begin, static_cast<std::size_t>(t.end - t.begin)};
}

namespace {
template <class Out>
std::vector<Out> convert(const TensorEntry& t, std::span<const std::uint8_t> raw) {
  const std::size_t es = dtype_size(t.dtype), n = raw.size() / es;
  std::vector<Out> out(n);
  for (std::size_t i = 0; i < n; ++i) {
    const std::uint8_t* p = raw.data() + i * es;
    switch (t.dtype) {
      case DType::F32: out[i] = static_cast<Out>(std::bit_cast<float>(static_cast<std::uint32_t>(load_le(p, 4)))); break;
      case DType::F64: out[i] = static_cast<Out>(std::bit_cast<double>(load_le(p, 8))); break;
      case DType::BF16: out[i] = static_cast<Out>(bf16_to_float(static_cast<std::uint16_t>(load_le(p, 2)))); break;
      case DType::U8: out[i] = static_cast<Out>(*p); break;
      case DType::I64: out[i] = static_cast<Out>(static_cast<std::int64_t>(load_le(p, 8))); break;
    }
  }
  return out;
}
}  // namespace

std::vector<float> SafetensorsFile::to_f32(std::string_view name) const { return convert<float>(at(name), raw(name)); }
std::vector<double> SafetensorsFile::to_f64(std::string_view name) const { return convert<double>(at(name), raw(name)); }

const std::string* SafetensorsFile::metadata_value(std::string_view key) const {
  for (const auto& m : m_metadata)
    if (m.first == key) return &m.second;
  return nullptr;
}

// ---------------------------------------------------------------------------------------------
// Writer.

void SafetensorsWriter::check_new(const std::string& name, const std::vector<std::int64_t>& shape,
                                  std::size_t count) const {
  if (name.empty() || name == "__metadata__")
    throw std::invalid_argument("safetensors: tensor name must be non-empty and not __metadata__");
  if (!is_valid_utf8(name)) throw std::invalid_argument("safetensors: tensor name '" + name + "' is not valid UTF-8");
  for (const auto& t : m_tensors)
    if (t.name == name) throw std::invalid_argument("safetensors: tensor '" + name + "' was added twice");
  std::uint64_t numel = 1;
  for (auto d : shape) {
    if (d < 0) throw std::invalid_argument("safetensors: tensor '" + name + "' has a negative dimension");
    numel *= static_cast<std::uint64_t>(d);
  }
  if (numel != count)
    throw std::invalid_argument("safetensors: tensor '" + name + "' has shape " + shape_string(shape) + " (" +
                                std::to_string(numel) + " elements) but " + std::to_string(count) + " values");
}

namespace {
template <class In>
std::vector<std::uint8_t> encode(std::span<const In> data, DType stored) {
  const std::size_t es = dtype_size(stored);
  std::vector<std::uint8_t> out(data.size() * es);
  for (std::size_t i = 0; i < data.size(); ++i) {
    std::uint8_t* p = out.data() + i * es;
    switch (stored) {
      case DType::F32: store_le(p, std::bit_cast<std::uint32_t>(static_cast<float>(data[i])), 4); break;
      case DType::F64: store_le(p, std::bit_cast<std::uint64_t>(static_cast<double>(data[i])), 8); break;
      case DType::BF16: store_le(p, float_to_bf16(static_cast<float>(data[i])), 2); break;
      case DType::U8:
      case DType::I64: throw std::invalid_argument("safetensors: floating-point data cannot be stored as an integer dtype");
    }
  }
  return out;
}

template <class Int>
std::vector<std::uint8_t> encode_integers(std::span<const Int> data) {
  std::vector<std::uint8_t> out(data.size() * sizeof(Int));
  for (std::size_t i = 0; i < data.size(); ++i)
    store_le(out.data() + i * sizeof(Int), static_cast<std::uint64_t>(data[i]), static_cast<int>(sizeof(Int)));
  return out;
}
}  // namespace

void SafetensorsWriter::add(std::string name, std::vector<std::int64_t> shape, std::span<const float> data, DType stored) {
  check_new(name, shape, data.size());
  m_tensors.push_back({std::move(name), stored, std::move(shape), encode(data, stored)});
}

void SafetensorsWriter::add(std::string name, std::vector<std::int64_t> shape, std::span<const double> data, DType stored) {
  check_new(name, shape, data.size());
  m_tensors.push_back({std::move(name), stored, std::move(shape), encode(data, stored)});
}

void SafetensorsWriter::add(std::string name, std::vector<std::int64_t> shape, std::span<const std::uint8_t> data) {
  check_new(name, shape, data.size());
  m_tensors.push_back({std::move(name), DType::U8, std::move(shape), encode_integers(data)});
}

void SafetensorsWriter::add(std::string name, std::vector<std::int64_t> shape, std::span<const std::int64_t> data) {
  check_new(name, shape, data.size());
  m_tensors.push_back({std::move(name), DType::I64, std::move(shape), encode_integers(data)});
}

void SafetensorsWriter::set_metadata(std::string key, std::string value) {
  if (!is_valid_utf8(key) || !is_valid_utf8(value))
    throw std::invalid_argument("safetensors: metadata keys and values must be valid UTF-8");
  for (auto& m : m_metadata)
    if (m.first == key) {
      m.second = std::move(value);
      return;
    }
  m_metadata.emplace_back(std::move(key), std::move(value));
}

std::string SafetensorsWriter::header() const {
  Json root = Json::object();
  if (!m_metadata.empty() || m_checksum) {
    Json meta = Json::object();
    for (const auto& [k, v] : m_metadata)
      if (k != k_safetensors_checksum_key && k != k_safetensors_data_checksum_key) meta[k] = v;
    // A placeholder of 64 zeros, replaced by the digest once the rest of the file is known.
    if (m_checksum) meta[k_safetensors_checksum_key] = std::string(64, '0');
    root["__metadata__"] = std::move(meta);
  }
  std::uint64_t offset = 0;
  for (const auto& t : m_tensors) {
    Json e = Json::object();
    e["dtype"] = dtype_name(t.dtype);
    Json shape = Json::array();
    for (auto d : t.shape) shape.push_back(static_cast<std::int64_t>(d));
    e["shape"] = std::move(shape);
    e["data_offsets"] = Json::array({offset, offset + t.bytes.size()});
    offset += t.bytes.size();
    root[t.name] = std::move(e);
  }
  std::string h = root.dump();  // names and metadata were checked to be valid UTF-8
  h.append((8 - h.size() % 8) % 8, ' ');  // data section starts 8-aligned
  if (m_checksum) {
    // The digest of the whole file as it will be, with its own digits read as '0' (see INTEGRITY).
    const std::string marker = digest_marker();
    const std::size_t at = h.find(marker) + marker.size();
    std::uint8_t len[8];
    store_le(len, h.size(), 8);
    Sha256 d;
    d.update(std::span<const std::uint8_t>(len, 8));
    d.update(std::span<const std::uint8_t>(reinterpret_cast<const std::uint8_t*>(h.data()), h.size()));
    for (const auto& t : m_tensors) d.update(std::span<const std::uint8_t>(t.bytes));
    h.replace(at, 64, to_hex(d.finish()));
  }
  return h;
}

std::vector<std::uint8_t> SafetensorsWriter::serialize() const {
  const std::string h = header();
  std::size_t total = 8 + h.size();
  for (const auto& t : m_tensors) total += t.bytes.size();
  std::vector<std::uint8_t> out(total);
  store_le(out.data(), h.size(), 8);
  std::size_t pos = 8;
  std::memcpy(out.data() + pos, h.data(), h.size());
  pos += h.size();
  for (const auto& t : m_tensors) {
    if (!t.bytes.empty()) std::memcpy(out.data() + pos, t.bytes.data(), t.bytes.size());
    pos += t.bytes.size();
  }
  return out;
}

void SafetensorsWriter::write(const std::filesystem::path& path) const {
  const std::string h = header();
  std::uint8_t len[8];
  store_le(len, h.size(), 8);
  AtomicFileWriter w(path);
  w.write(len, 8);
  w.write(h);
  for (const auto& t : m_tensors) w.write(t.bytes.data(), t.bytes.size());
  w.commit();
}

}  // namespace tttlab
