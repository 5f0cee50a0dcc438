// Hostile and broken files (docs/SECURITY.md): limits before allocation, checkpoint integrity, clear errors.
// Each test builds its bad file from a good one, so a failure names a reproducible case; random bit
// flips use a fixed seed that is printed.
#include <gtest/gtest.h>
#include <sys/stat.h>

#include <algorithm>
#include <chrono>
#include <limits>
#include <cstdlib>
#include <filesystem>
#include <string>
#include <vector>

#include "core/io/temp_dir.hpp"
#include "core/tiny_run.hpp"
#include "tttlab/data/text_file.hpp"
#include "tttlab/io/atomic_file.hpp"
#include "tttlab/io/json.hpp"
#include "tttlab/io/limits.hpp"
#include "tttlab/io/safetensors.hpp"
#include "tttlab/model/checkpoint.hpp"
#include "tttlab/model/memory.hpp"
#include "tttlab/train/trainer.hpp"
#include "tttlab/util/rng.hpp"

namespace tttlab {
namespace {

namespace fs = std::filesystem;
using testing::TempDir;

template <class F>
std::string error_of(F&& f) {
  try {
    f();
  } catch (const std::exception& e) {
    return e.what();
  }
  return "";
}

// Sets an environment variable for one scope.
struct EnvVar {
  std::string name;
  EnvVar(const char* n, const char* value) : name(n) { ::setenv(n, value, 1); }
  ~EnvVar() { ::unsetenv(name.c_str()); }
};

ModelConfig small_config(SeqLayerKind kind = SeqLayerKind::TTTLinear, bool mamba = true) {
  return testing::tiny_model({.layers = 2, .intermediate = 24, .positions = 32, .seq_layer = kind, .mamba = mamba});
}

// A checkpoint folder of a small model (with a checksum, as TTT Lab writes it).
fs::path write_checkpoint(const fs::path& dir, const ModelConfig& c, std::uint64_t seed = 5) {
  fs::create_directories(dir);
  Model<float> m(c, seed);
  write_file_atomic(dir / "config.json", c.to_json());
  save_model_safetensors(m, dir / "model.safetensors");
  return dir;
}

void set_config_field(const fs::path& dir, const std::string& key, const Json& value) {
  Json j = parse_json(read_file_text(dir / "config.json"), "config.json");
  j[key] = value;
  write_file_atomic(dir / "config.json", dump_json(j, 1));
}

// ---- files that are not regular files ----------------------------------------------------------

TEST(HostileFiles, OnlyRegularFilesAreReadAndAFifoDoesNotBlock) {
  TempDir dir;
  const fs::path fifo = dir / "pipe";
  ASSERT_EQ(::mkfifo(fifo.c_str(), 0600), 0);
  const auto t0 = std::chrono::steady_clock::now();
  const std::string e = error_of([&] { read_file_bytes(fifo); });
  EXPECT_NE(e.find("FIFO"), std::string::npos) << e;
  EXPECT_NE(e.find("pipe"), std::string::npos) << e;
  EXPECT_LT(std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count(), 2.0);
  EXPECT_NE(error_of([] { read_file_bytes("/dev/zero"); }).find("character device"), std::string::npos);
  EXPECT_NE(error_of([&] { read_file_bytes(dir.path()); }).find("directory"), std::string::npos);
  EXPECT_NE(error_of([&] { regular_file_size(fifo); }).find("not a regular file"), std::string::npos);
  // Text files and the weights go through the same reader.
  EXPECT_NE(error_of([&] { load_text_file(fifo); }).find("FIFO"), std::string::npos);
  const fs::path ck = write_checkpoint(dir / "ck", small_config());
  fs::remove(ck / "model.safetensors");
  ASSERT_EQ(::mkfifo((ck / "model.safetensors").c_str(), 0600), 0);
  EXPECT_NE(error_of([&] { load_model(ck); }).find("FIFO"), std::string::npos);
  fs::remove(ck / "model.safetensors");
  fs::create_symlink("/dev/zero", ck / "model.safetensors");
  EXPECT_NE(error_of([&] { load_model(ck); }).find("character device"), std::string::npos);
}

// ---- bounded messages and the memory budget ------------------------------------------------------

TEST(HostileFiles, ClipBoundsQuotedText) {
  EXPECT_EQ(clip("short"), "short");
  const std::string c = clip(std::string(100000, 'x'), 80);
  EXPECT_LT(c.size(), 110u);
  EXPECT_NE(c.find("(100000 bytes)"), std::string::npos);
  // Never cuts a UTF-8 character in two: "é" is 2 bytes, a cut at 3 backs up to 2.
  EXPECT_EQ(clip("ééé", 3).substr(0, 2), "é");
}

TEST(HostileFiles, MemorySizesAndTheCap) {
  EXPECT_EQ(parse_memory_size("1024"), 1024u);
  EXPECT_EQ(parse_memory_size("2G"), 2ull << 30);
  EXPECT_EQ(parse_memory_size("512MiB"), 512ull << 20);
  EXPECT_EQ(parse_memory_size("1.5k"), 1536u);
  EXPECT_NE(error_of([] { parse_memory_size("lots"); }).find("TTTLAB_MAX_MEMORY"), std::string::npos);
  EXPECT_NO_THROW(check_memory(1 << 20, "a test"));
  EnvVar cap("TTTLAB_MAX_MEMORY", "1M");
  EXPECT_EQ(memory_budget().bytes, 1u << 20);
  const std::string e = error_of([] { check_memory(5u << 20, "a test"); });
  EXPECT_NE(e.find("a test would need about 5.0 MiB"), std::string::npos) << e;
  EXPECT_NE(e.find("TTTLAB_MAX_MEMORY=1M"), std::string::npos) << e;
}

TEST(HostileFiles, ParameterCountFromTheConfigMatchesTheModel) {
  for (SeqLayerKind kind : {SeqLayerKind::TTTLinear, SeqLayerKind::TTTMLP, SeqLayerKind::LinearAttention,
                            SeqLayerKind::SoftmaxAttention})
    for (bool mamba : {true, false})
      for (bool bias : {true, false}) {
        ModelConfig c = small_config(kind, mamba);
        c.inner_bias = bias;
        Model<float> m(c, 1);
        EXPECT_EQ(static_cast<long>(count_params(c)), m.num_params()) << to_string(kind) << " m=" << mamba;
      }
}

// ---- the expected tensors, computed from the config alone ----------------------------------------

TEST(HostileFiles, CheckpointShapesFromTheConfigMatchABuiltModel) {
  for (SeqLayerKind kind : {SeqLayerKind::TTTLinear, SeqLayerKind::TTTMLP, SeqLayerKind::LinearAttention,
                            SeqLayerKind::SoftmaxAttention})
    for (bool mamba : {true, false})
      for (int heads : {1, 2}) {
        ModelConfig c = small_config(kind, mamba);
        c.num_attention_heads = heads;
        c.inner_bias = heads == 2;
        Model<float> m(c, 1);
        std::vector<NamedTensor> sd = state_dict(m);
        sd.erase(std::remove_if(sd.begin(), sd.end(), [](const NamedTensor& t) { return t.name == "lm_head.weight"; }),
                 sd.end());
        const std::vector<TensorShape> want = checkpoint_tensor_shapes(c);
        ASSERT_EQ(want.size(), sd.size()) << to_string(kind);
        for (std::size_t i = 0; i < sd.size(); ++i) {
          EXPECT_EQ(want[i].name, sd[i].name);
          EXPECT_EQ(want[i].shape, sd[i].shape) << sd[i].name;
        }
      }
}

// ---- size bombs: refused from the header, before allocating ----------------------------------------

TEST(HostileFiles, SizeFieldsAreCheckedAgainstTheWeightsBeforeAllocation) {
  TempDir dir;
  const struct {
    const char* field;
    long long value;
    const char* expect;
  } cases[] = {
      {"conv_kernel", 1ll << 30, "conv_kernel must be at most"},
      {"num_hidden_layers", 1ll << 30, "num_hidden_layers must be at most"},
      {"mini_batch_size", 1ll << 30, "mini_batch_size must be at most"},
      {"hidden_size", 1ll << 30, "hidden_size must be at most"},
      {"mini_batch_size", 60000, "learnable_token_idx' has shape [4], but config.json"},
      {"num_hidden_layers", 4000, "is missing"},
      {"hidden_size", 65536, "has shape"},
      {"conv_kernel", 1000, "has shape"},
      {"intermediate_size", 200000, "has shape"},
      {"hidden_size", 1ll << 40, "out of range"},
  };
  int i = 0;
  for (const auto& c : cases) {
    const fs::path ck = write_checkpoint(dir / ("bomb" + std::to_string(i++)), small_config());
    set_config_field(ck, c.field, c.value);
    const auto t0 = std::chrono::steady_clock::now();
    const std::string e = error_of([&] { load_model(ck); });
    const double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    EXPECT_NE(e.find(c.expect), std::string::npos) << c.field << " = " << c.value << ": " << e;
    EXPECT_EQ(e.find('\n'), std::string::npos) << e;
    EXPECT_LT(e.size(), 600u) << e;
    EXPECT_LT(s, 2.0) << c.field;
  }
}

TEST(HostileFiles, AModelAboveTheMemoryBudgetIsRefused) {
  TempDir dir;
  const fs::path ck = write_checkpoint(dir / "ck", small_config());
  set_config_field(ck, "max_position_embeddings", 1 << 20);  // no weights depend on T: the estimate must catch it
  {
    // As another tool writes it: no recorded config (which would refuse the edited config.json first)
    // and no TTT Lab checksum.
    const SafetensorsFile f = SafetensorsFile::read(ck / "model.safetensors");
    SafetensorsWriter w;
    for (const auto& [k, v] : f.metadata())
      if (k != k_safetensors_checksum_key && k != k_config_metadata_key) w.set_metadata(k, v);
    for (const auto& e : f.tensors()) w.add(e.name, e.shape, std::span<const double>(f.to_f64(e.name)), e.dtype);
    w.write(ck / "model.safetensors");
  }
  {
    EnvVar cap("TTTLAB_MAX_MEMORY", "64M");
    const std::string e = error_of([&] { load_model(ck); });
    EXPECT_NE(e.find("would need about"), std::string::npos) << e;
    EXPECT_NE(e.find("TTTLAB_MAX_MEMORY=64M"), std::string::npos) << e;
    EXPECT_NO_THROW(load_model(ck, ModelLoadOptions{.window = 64}));  // the window the command will use
  }
  TrainConfig tc;
  tc.model = small_config();
  tc.data = "copy";
  tc.seq_len = 1 << 20;
  tc.batch_size = 64;
  tc.threads = 2;
  EnvVar cap("TTTLAB_MAX_MEMORY", "256M");
  const std::string e = error_of([&] { Trainer t(tc, TextData::load(tc)); });
  EXPECT_NE(e.find("would need about"), std::string::npos) << e;
}

// ---- integrity -------------------------------------------------------------------------------------

TEST(HostileFiles, ChecksumIsWrittenVerifiedAndNamesTheDamagedFile) {
  TempDir dir;
  const fs::path ck = write_checkpoint(dir / "ck", small_config());
  const SafetensorsFile f = SafetensorsFile::read(ck / "model.safetensors");
  EXPECT_TRUE(f.has_checksum());
  EXPECT_TRUE(f.checksum_verified());
  CheckpointLoadInfo info;
  load_model(ck, ModelLoadOptions{.info = &info});
  EXPECT_TRUE(info.checksum_verified);
  EXPECT_TRUE(info.note.empty());
  // Header only: nothing of the data is read.
  const SafetensorsFile h = SafetensorsFile::read_header(ck / "model.safetensors");
  EXPECT_EQ(h.tensors().size(), f.tensors().size());
  EXPECT_ANY_THROW(h.raw("model.norm.weight"));

  // Random single-bit flips in the tensor data, seed fixed and printed: every one is refused, naming
  // the file (without a checksum most would load: a flipped low mantissa bit is still a finite float).
  const std::uint64_t seed = 1212;
  std::printf("bit flips: seed %llu\n", static_cast<unsigned long long>(seed));
  const std::vector<std::uint8_t> good = read_file_bytes(ck / "model.safetensors");
  std::uint64_t n = 0;
  for (int i = 0; i < 8; ++i) n |= std::uint64_t(good[i]) << (8 * i);
  Rng rng(seed);
  const int flips = 64;
  int refused = 0;
  for (int k = 0; k < flips; ++k) {
    std::vector<std::uint8_t> bad = good;
    const std::size_t pos = 8 + n + rng.next_u64() % (good.size() - 8 - n);
    const int bit = static_cast<int>(rng.next_u64() % 8);
    bad[pos] ^= static_cast<std::uint8_t>(1u << bit);
    write_file_atomic(ck / "model.safetensors", std::span<const std::uint8_t>(bad));
    const std::string e = error_of([&] { load_model(ck); });
    refused += !e.empty();
    EXPECT_NE(e.find("model.safetensors"), std::string::npos) << "byte " << pos << " bit " << bit << ": " << e;
    EXPECT_NE(e.find("SHA-256"), std::string::npos) << "byte " << pos << " bit " << bit << ": " << e;
  }
  EXPECT_EQ(refused, flips);
  // A damaged digest is damage too.
  std::vector<std::uint8_t> bad = good;
  const std::string key = k_safetensors_checksum_key;
  const auto at = std::search(bad.begin(), bad.end(), key.begin(), key.end());
  ASSERT_NE(at, bad.end());
  *(at + static_cast<std::ptrdiff_t>(key.size()) + 5) ^= 1;  // a hex digit of the value
  write_file_atomic(ck / "model.safetensors", std::span<const std::uint8_t>(bad));
  EXPECT_NE(error_of([&] { load_model(ck); }).find("model.safetensors"), std::string::npos);
}

// Re-writes a checkpoint's weights without a checksum (as another tool would), with `head` as
// lm_head.weight (nothing: absent).
void rewrite_without_checksum(const fs::path& ck, const ModelConfig& c, const std::vector<float>* head,
                              std::vector<std::int64_t> head_shape = {}) {
  Model<float> m(c, 5);
  SafetensorsWriter w;
  for (const auto& t : state_dict(m)) {
    if (t.name == "lm_head.weight") {
      if (head) w.add(t.name, head_shape.empty() ? t.shape : head_shape, std::span<const float>(*head));
      continue;
    }
    w.add(t.name, t.shape, std::span<const float>(t.data));
  }
  w.write(ck / "model.safetensors");
}

TEST(HostileFiles, TheTiedHeadIsCheckedAndFilesWithoutAChecksumLoadWithANote) {
  TempDir dir;
  const ModelConfig c = small_config();
  const fs::path ck = write_checkpoint(dir / "ck", c);
  Model<float> m(c, 5);
  std::vector<float> embed;
  for (const auto& t : state_dict(m))
    if (t.name == "model.embed_tokens.weight") embed = t.data;

  rewrite_without_checksum(ck, c, &embed);  // tied, as written by the official code
  CheckpointLoadInfo info;
  EXPECT_NO_THROW(load_model(ck, ModelLoadOptions{.info = &info}));
  EXPECT_FALSE(info.checksum_verified);
  EXPECT_NE(info.note.find("no SHA-256"), std::string::npos) << info.note;
  std::string noted;
  set_checkpoint_note_handler([&](const std::string& s) { noted = s; });
  load_model(ck);
  set_checkpoint_note_handler({});
  EXPECT_NE(noted.find("model.safetensors"), std::string::npos) << noted;

  rewrite_without_checksum(ck, c, nullptr);  // absent (tests/reference's fixtures): loads
  EXPECT_NO_THROW(load_model(ck, ModelLoadOptions{.info = &info}));

  std::vector<float> nan = embed;
  nan[7] = std::numeric_limits<float>::quiet_NaN();
  rewrite_without_checksum(ck, c, &nan);
  EXPECT_NE(error_of([&] { load_model(ck, ModelLoadOptions{.info = &info}); }).find("'lm_head.weight' holds a non-finite"),
            std::string::npos);
  std::vector<float> other = embed;
  other[3] += 1.0f;
  rewrite_without_checksum(ck, c, &other);
  EXPECT_NE(error_of([&] { load_model(ck, ModelLoadOptions{.info = &info}); }).find("differs from model.embed_tokens.weight"),
            std::string::npos);
  const std::vector<float> small(2 * 16, 0.5f);
  rewrite_without_checksum(ck, c, &small, {2, 16});
  const std::string e = error_of([&] { load_model(ck, ModelLoadOptions{.info = &info}); });
  EXPECT_NE(e.find("'lm_head.weight' has shape [2, 16]"), std::string::npos) << e;
}

TEST(HostileFiles, ResumeRefusesDamagedSamplerStateByName) {
  TempDir dir;
  TrainConfig tc;
  tc.model = small_config();
  tc.data = "copy";
  tc.seq_len = 16;
  tc.batch_size = 2;
  tc.steps = 2;
  tc.threads = 1;
  Trainer t(tc, TextData::load(tc));
  t.step();
  t.save(dir.path());
  const fs::path ck = resolve_checkpoint(dir.path());
  EXPECT_NO_THROW(Trainer::resume(dir.path()));
  // The same state with a sampler field that is not a number.
  const SafetensorsFile st = SafetensorsFile::read(ck / "train_state.safetensors");
  SafetensorsWriter w;
  w.set_checksum();  // a valid file whose sampler field was written wrong, not a damaged one
  for (const auto& [k, v] : st.metadata())
    if (k != k_safetensors_checksum_key) w.set_metadata(k, k == "sampler_next_batch" ? "12x" : v);
  for (const auto& e : st.tensors()) w.add(e.name, e.shape, std::span<const double>(st.to_f64(e.name)), e.dtype);
  w.write(ck / "train_state.safetensors");
  const std::string e = error_of([&] { Trainer::resume(dir.path()); });
  EXPECT_NE(e.find("'sampler_next_batch' must be a non-negative integer"), std::string::npos) << e;
  EXPECT_EQ(e.find("stoull"), std::string::npos) << e;
}

TEST(HostileFiles, JsonErrorsAreBoundedAndNameTheField) {
  const std::string huge(1 << 20, 'x');
  const std::string e = error_of([&] { ModelConfig::from_json("{\"ttt_layer_type\": \"" + huge + "\"}", "c.json"); });
  EXPECT_NE(e.find("c.json"), std::string::npos);
  EXPECT_NE(e.find("ttt_layer_type"), std::string::npos);
  EXPECT_LT(e.size(), 300u) << e.size();
  const std::string unterminated = error_of([&] { parse_json("{\"a\": \"" + huge, "u.json"); });
  EXPECT_LT(unterminated.size(), 400u) << unterminated.size();
  EXPECT_NE(error_of([] { ModelConfig::from_json("{\"hidden_size\": 1.5}", "c.json"); }).find("'hidden_size' must be an integer"),
            std::string::npos);
  const std::string deep = std::string(100000, '[') + std::string(100000, ']');
  EXPECT_NE(error_of([&] { ModelConfig::from_json(deep, "c.json"); }).find("nested deeper"), std::string::npos);
}

}  // namespace
}  // namespace tttlab
