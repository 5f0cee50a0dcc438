// safetensors: round trips for F32/F64/BF16, exact bf16 rounding, one test per corruption the reader
// must refuse (each checks the specific message), and a fuzz test (every truncation, random byte
// flips) that must only ever load or throw SafetensorsError. The fuzz test also runs under ASan.
#include <gtest/gtest.h>

#include <algorithm>
#include <bit>
#include <cmath>
#include <limits>
#include <string>
#include <vector>

#include "core/io/temp_dir.hpp"
#include "tttlab/io/safetensors.hpp"
#include "tttlab/util/rng.hpp"

namespace tttlab {
namespace {

using testing::TempDir;

// A file from a hand-written header and data section (the header is used verbatim).
std::vector<std::uint8_t> make_file(const std::string& header, const std::vector<std::uint8_t>& data) {
  std::vector<std::uint8_t> out(8 + header.size() + data.size());
  const std::uint64_t n = header.size();
  for (int i = 0; i < 8; ++i) out[i] = static_cast<std::uint8_t>(n >> (8 * i));
  std::copy(header.begin(), header.end(), out.begin() + 8);
  std::copy(data.begin(), data.end(), out.begin() + 8 + static_cast<std::ptrdiff_t>(header.size()));
  return out;
}

// Expects parse() to throw SafetensorsError whose message contains `needle`.
void expect_refused(const std::vector<std::uint8_t>& bytes, const std::string& needle) {
  try {
    SafetensorsFile::parse(bytes, "case.safetensors");
    ADD_FAILURE() << "accepted a file that should be refused with: " << needle;
  } catch (const SafetensorsError& e) {
    const std::string msg = e.what();
    EXPECT_NE(msg.find(needle), std::string::npos) << "message: " << msg << "\nexpected to contain: " << needle;
    EXPECT_NE(msg.find("case.safetensors"), std::string::npos) << "message does not name the file: " << msg;
    EXPECT_EQ(msg.find('\n'), std::string::npos) << "message is not one line: " << msg;
  }
}

SafetensorsWriter sample_writer() {
  SafetensorsWriter w;
  const std::vector<float> a = {1.0f, -2.5f, 3.25f, 0.0f, 1e-3f, -7.0f};
  const std::vector<double> b = {0.1, -0.2, 1e300};
  const std::vector<float> c = {1.0f, 0.5f, -3.0f, 65504.0f};
  const std::vector<float> scalar = {42.0f};
  w.add("model.embed_tokens.weight", {2, 3}, a);
  w.add("optim.step_scale", {3}, b);
  w.add("half", {2, 2}, c, DType::BF16);
  w.add("scalar", {}, scalar);
  w.add("empty", {0, 4}, std::span<const float>());
  w.set_metadata("format", "tttlab");
  w.set_metadata("step", "17");
  return w;
}

TEST(Safetensors, RoundTripAllDtypesScalarEmptyAndMetadata) {
  TempDir dir;
  const auto path = dir / "model.safetensors";
  sample_writer().write(path);
  const SafetensorsFile f = SafetensorsFile::read(path);
  ASSERT_EQ(f.tensors().size(), 5u);
  EXPECT_EQ(f.tensors()[0].name, "model.embed_tokens.weight");  // header order = insertion order
  EXPECT_EQ(f.at("model.embed_tokens.weight").shape, (std::vector<std::int64_t>{2, 3}));
  EXPECT_EQ(f.to_f32("model.embed_tokens.weight"), (std::vector<float>{1.0f, -2.5f, 3.25f, 0.0f, 1e-3f, -7.0f}));
  EXPECT_EQ(f.to_f64("optim.step_scale"), (std::vector<double>{0.1, -0.2, 1e300}));
  EXPECT_EQ(f.at("half").dtype, DType::BF16);
  EXPECT_EQ(f.to_f32("half"), (std::vector<float>{1.0f, 0.5f, -3.0f, 65536.0f}));  // 65504 rounds to 2^16 in bf16
  EXPECT_EQ(f.at("scalar").numel(), 1);
  EXPECT_EQ(f.to_f32("scalar"), std::vector<float>{42.0f});
  EXPECT_EQ(f.at("empty").numel(), 0);
  EXPECT_TRUE(f.to_f32("empty").empty());
  ASSERT_NE(f.metadata_value("step"), nullptr);
  EXPECT_EQ(*f.metadata_value("step"), "17");
  EXPECT_EQ(f.find("nope"), nullptr);
  EXPECT_THROW(f.at("nope"), SafetensorsError);
  // Byte-identical to the in-memory serialisation, with the data section 8-aligned.
  const auto bytes = sample_writer().serialize();
  EXPECT_EQ(SafetensorsFile::parse(bytes).tensors().size(), 5u);
  std::uint64_t n = 0;
  for (int i = 7; i >= 0; --i) n = (n << 8) | bytes[i];
  EXPECT_EQ((8 + n) % 8, 0u);
}

TEST(Safetensors, LittleEndianLayoutOnDisk) {
  SafetensorsWriter w;
  const std::vector<float> one = {1.0f};
  w.add("x", {1}, one);
  const auto bytes = w.serialize();
  // 1.0f = 0x3F800000, stored least significant byte first at the end of the file.
  const std::vector<std::uint8_t> tail(bytes.end() - 4, bytes.end());
  EXPECT_EQ(tail, (std::vector<std::uint8_t>{0x00, 0x00, 0x80, 0x3F}));
  const std::string header(bytes.begin() + 8, bytes.end() - 4);
  EXPECT_EQ(header.substr(0, header.find_last_not_of(' ') + 1),
            R"({"x":{"dtype":"F32","shape":[1],"data_offsets":[0,4]}})");
}

TEST(Safetensors, Bf16RoundsToNearestEven) {
  auto bits = [](float f) { return std::bit_cast<std::uint32_t>(f); };
  auto from = [](std::uint32_t b) { return std::bit_cast<float>(b); };
  EXPECT_EQ(float_to_bf16(1.0f), 0x3F80);
  EXPECT_EQ(float_to_bf16(-0.0f), 0x8000);
  EXPECT_EQ(float_to_bf16(from(0x3F808000)), 0x3F80);  // exact tie, kept bit even: down
  EXPECT_EQ(float_to_bf16(from(0x3F818000)), 0x3F82);  // exact tie, kept bit odd: up
  EXPECT_EQ(float_to_bf16(from(0x3F808001)), 0x3F81);  // above the tie: up
  EXPECT_EQ(float_to_bf16(from(0x3F807FFF)), 0x3F80);  // below the tie: down
  EXPECT_EQ(float_to_bf16(std::numeric_limits<float>::max()), 0x7F80);  // overflows to +inf
  EXPECT_EQ(float_to_bf16(std::numeric_limits<float>::infinity()), 0x7F80);
  EXPECT_TRUE(std::isnan(bf16_to_float(float_to_bf16(std::nanf("")))));
  EXPECT_TRUE(std::isnan(bf16_to_float(float_to_bf16(from(0x7F800001)))));  // NaN with low payload stays NaN
  EXPECT_EQ(bits(bf16_to_float(0x3F81)), 0x3F810000u);
}

TEST(Safetensors, WriterRejectsBadTensors) {
  SafetensorsWriter w;
  const std::vector<float> v = {1, 2, 3, 4};
  EXPECT_THROW(w.add("a", {3}, v), std::invalid_argument);
  EXPECT_THROW(w.add("a", {-1, -4}, v), std::invalid_argument);
  EXPECT_THROW(w.add("", {4}, v), std::invalid_argument);
  EXPECT_THROW(w.add("__metadata__", {4}, v), std::invalid_argument);
  w.add("a", {2, 2}, v);
  EXPECT_THROW(w.add("a", {4}, v), std::invalid_argument);
}

// ---- one test per corruption -------------------------------------------------------------------

const std::vector<std::uint8_t> k_data24(24, 0);  // room for 6 F32 values

TEST(SafetensorsCorrupt, TooShortForTheLengthField) {
  expect_refused({1, 2, 3, 4, 5}, "only 5 bytes");
}

TEST(SafetensorsCorrupt, HeaderLengthBeyondFileSize) {
  auto bytes = make_file(R"({"a":{"dtype":"F32","shape":[6],"data_offsets":[0,24]}})", k_data24);
  bytes[6] = 1;  // header length now about 2^48
  expect_refused(bytes, "exceeds");
}

TEST(SafetensorsCorrupt, TruncatedData) {
  auto bytes = make_file(R"({"a":{"dtype":"F32","shape":[6],"data_offsets":[0,24]}})", k_data24);
  bytes.pop_back();
  expect_refused(bytes, "truncated");
}

TEST(SafetensorsCorrupt, MalformedJson) {
  expect_refused(make_file(R"({"a":{"dtype":"F32","shape":[6],"data_offsets":[0,24]})", k_data24),
                 "malformed JSON header");
  expect_refused(make_file(R"({"a":{"dtype":"F32","shape":[6,],"data_offsets":[0,24]}})", k_data24),
                 "malformed JSON header");
}

TEST(SafetensorsCorrupt, NotAnObject) {
  expect_refused(make_file(R"([{"dtype":"F32"}])", k_data24), "does not start with '{'");
  expect_refused(make_file(R"({"a":[1,2]})", {}), "not an object");
}

TEST(SafetensorsCorrupt, OffsetsOutOfRange) {
  expect_refused(make_file(R"({"a":{"dtype":"F32","shape":[8],"data_offsets":[0,32]}})", k_data24),
                 "ends at data offset 32");
}

TEST(SafetensorsCorrupt, OffsetsBeginAfterEnd) {
  expect_refused(make_file(R"({"a":{"dtype":"F32","shape":[0],"data_offsets":[8,4]}})", k_data24), "begin after");
}

TEST(SafetensorsCorrupt, OverlappingTensors) {
  expect_refused(make_file(R"({"a":{"dtype":"F32","shape":[4],"data_offsets":[0,16]},)"
                           R"("b":{"dtype":"F32","shape":[4],"data_offsets":[8,24]}})",
                           k_data24),
                 "overlap");
}

TEST(SafetensorsCorrupt, GapBetweenTensors) {
  expect_refused(make_file(R"({"a":{"dtype":"F32","shape":[2],"data_offsets":[0,8]},)"
                           R"("b":{"dtype":"F32","shape":[2],"data_offsets":[16,24]}})",
                           k_data24),
                 "gap of 8 bytes");
}

TEST(SafetensorsCorrupt, DataNotCoveredAtTheEnd) {
  expect_refused(make_file(R"({"a":{"dtype":"F32","shape":[4],"data_offsets":[0,16]}})", k_data24),
                 "cover only 16");
}

TEST(SafetensorsCorrupt, ShapeTimesDtypeMismatch) {
  expect_refused(make_file(R"({"a":{"dtype":"F64","shape":[2,3],"data_offsets":[0,24]}})", k_data24),
                 "need 48 bytes, but its data_offsets span 24");
}

TEST(SafetensorsCorrupt, ShapeProductOverflow) {
  expect_refused(make_file(R"({"a":{"dtype":"F32","shape":[4294967296,4294967296,16],"data_offsets":[0,24]}})",
                           k_data24),
                 "more bytes than the file has");
}

TEST(SafetensorsCorrupt, UnknownDtype) {
  expect_refused(make_file(R"({"a":{"dtype":"F33","shape":[6],"data_offsets":[0,24]}})", k_data24),
                 "unknown dtype 'F33'");
}

TEST(SafetensorsCorrupt, UnsupportedDtypeIsNamed) {
  expect_refused(make_file(R"({"a":{"dtype":"F16","shape":[12],"data_offsets":[0,24]}})", k_data24),
                 "dtype F16, which TTT Lab does not read");
}

TEST(SafetensorsCorrupt, DuplicateNames) {
  expect_refused(make_file(R"({"a":{"dtype":"F32","shape":[3],"data_offsets":[0,12]},)"
                           R"("a":{"dtype":"F32","shape":[3],"data_offsets":[12,24]}})",
                           k_data24),
                 "duplicate tensor name 'a'");
}

TEST(SafetensorsCorrupt, BadEntries) {
  expect_refused(make_file(R"({"a":{"dtype":"F32","shape":[-6],"data_offsets":[0,24]}})", k_data24),
                 "non-negative integer");
  expect_refused(make_file(R"({"a":{"dtype":"F32","shape":[6.0],"data_offsets":[0,24]}})", k_data24),
                 "non-negative integer");
  expect_refused(make_file(R"({"a":{"dtype":"F32","shape":[6]}})", k_data24), "lacks one of");
  expect_refused(make_file(R"({"a":{"dtype":"F32","shape":[6],"data_offsets":[0,24],"x":1}})", k_data24),
                 "unexpected or repeated key 'x'");
  expect_refused(make_file(R"({"a":{"dtype":"F32","shape":[6],"data_offsets":[0]}})", k_data24),
                 "two non-negative integers");
  expect_refused(make_file(R"({"__metadata__":{"k":1},"a":{"dtype":"F32","shape":[6],"data_offsets":[0,24]}})",
                           k_data24),
                 "__metadata__ value of 'k' is not a string");
}

// ---- fuzz ------------------------------------------------------------------------------------

// Loads and touches every tensor; any exception other than SafetensorsError fails the test.
void load_or_refuse(const std::vector<std::uint8_t>& bytes, int& loaded, int& refused) {
  try {
    const SafetensorsFile f = SafetensorsFile::parse(bytes, "fuzz");
    for (const auto& t : f.tensors()) {
      const auto v = f.to_f64(t.name);
      ASSERT_EQ(static_cast<std::int64_t>(v.size()), t.numel());
    }
    ++loaded;
  } catch (const SafetensorsError&) {
    ++refused;
  }
}

TEST(SafetensorsFuzz, EveryTruncationIsRefused) {
  const auto bytes = sample_writer().serialize();
  int loaded = 0, refused = 0;
  for (std::size_t len = 0; len < bytes.size(); ++len)
    load_or_refuse(std::vector<std::uint8_t>(bytes.begin(), bytes.begin() + static_cast<std::ptrdiff_t>(len)),
                   loaded, refused);
  EXPECT_EQ(loaded, 0);  // every strict prefix is invalid: the offsets must cover the data exactly
  EXPECT_EQ(refused, static_cast<int>(bytes.size()));
}

TEST(SafetensorsFuzz, RandomByteFlipsLoadOrThrowOurError) {
  const auto original = sample_writer().serialize();
  Rng rng(2024);
  int loaded = 0, refused = 0;
  for (int iter = 0; iter < 4000; ++iter) {
    auto bytes = original;
    const int flips = 1 + static_cast<int>(rng.below(4));
    for (int k = 0; k < flips; ++k) {
      // Half the flips target the 8-byte length field and the header, where parsing happens.
      const std::size_t limit = rng.below(2) == 0 ? std::min<std::size_t>(bytes.size(), 200) : bytes.size();
      bytes[rng.below(limit)] ^= static_cast<std::uint8_t>(1 + rng.below(255));
    }
    load_or_refuse(bytes, loaded, refused);
  }
  EXPECT_EQ(loaded + refused, 4000);
  EXPECT_GT(refused, 0);
  EXPECT_GT(loaded, 0);  // flips inside the data section keep the file valid
}

}  // namespace
}  // namespace tttlab
