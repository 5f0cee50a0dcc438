// fuzz_text_file: any bytes as a training text (tttlab/data/text_file.hpp): the statistics and the
// text rule (compute_text_stats, text_problem) on the bytes, and the loader itself (load_text_file)
// on the same bytes written to an in-memory file.
//
// Contract checked: the statistics add up (every byte counted once, the histogram sums to the size,
// the first-offsets point at what they name); load_text_file either throws TextFileError or returns
// the file's bytes without a leading BOM, with the same statistics and no problem to report.
#include <sys/mman.h>
#include <unistd.h>

#include <algorithm>
#include <numeric>
#include <span>
#include <string>

#include "fuzz_check.hpp"
#include "tttlab/data/text_file.hpp"

namespace {

using namespace tttlab;

// The input as a file the loader can open by path: a memfd, named through /proc/self/fd.
class MemoryFile {
 public:
  MemoryFile(const std::uint8_t* data, std::size_t size) : m_fd(memfd_create("fuzz_text", 0)) {
    FUZZ_CHECK(m_fd >= 0);
    std::size_t done = 0;
    while (done < size) {
      const ssize_t n = ::write(m_fd, data + done, size - done);
      FUZZ_CHECK(n > 0);
      done += static_cast<std::size_t>(n);
    }
  }
  ~MemoryFile() { ::close(m_fd); }
  MemoryFile(const MemoryFile&) = delete;
  MemoryFile& operator=(const MemoryFile&) = delete;
  std::string path() const { return "/proc/self/fd/" + std::to_string(m_fd); }

 private:
  int m_fd;
};

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  const std::span<const std::uint8_t> bytes(data, size);
  const TextStats s = compute_text_stats(bytes);
  FUZZ_CHECK(s.bytes == size);
  FUZZ_CHECK(std::accumulate(s.histogram.begin(), s.histogram.end(), std::uint64_t{0}) == size);
  FUZZ_CHECK(s.ascii_bytes + s.invalid_utf8_bytes <= size && s.utf8_chars <= size);
  FUZZ_CHECK(s.nul_bytes + s.control_bytes <= s.ascii_bytes);
  FUZZ_CHECK(s.distinct_bytes <= 256 && (size == 0) == (s.distinct_bytes == 0));
  FUZZ_CHECK((s.first_nul < 0) == (s.nul_bytes == 0));
  if (s.first_nul >= 0) FUZZ_CHECK(static_cast<std::size_t>(s.first_nul) < size && data[s.first_nul] == 0);
  FUZZ_CHECK((s.first_suspect < 0) == (s.control_bytes + s.invalid_utf8_bytes == 0));
  FUZZ_CHECK(s.suspect_share() >= 0 && s.suspect_share() <= 1);

  // The rule with the sequence lengths a run may ask for, the first byte picking one of them.
  const std::int64_t seq_len = size ? static_cast<std::int64_t>(data[0]) * 4 : 0;
  (void)text_problem(s, "fuzz.txt", 1, 0);
  (void)text_problem(s, "fuzz.txt", 0, seq_len);
  (void)text_problem(s, "fuzz.txt", ~std::uint64_t{0}, -1);

  const MemoryFile file(data, size);
  TextLoadOptions options;
  options.seq_len = seq_len;
  TextCorpus corpus;
  try {
    corpus = load_text_file(file.path(), options);
  } catch (const TextFileError&) {
    return 0;
  }
  const bool bom = size >= 3 && data[0] == 0xEF && data[1] == 0xBB && data[2] == 0xBF;
  const std::size_t skip = bom ? 3 : 0;
  FUZZ_CHECK(corpus.bytes.size() == size - skip);
  FUZZ_CHECK(std::equal(corpus.bytes.begin(), corpus.bytes.end(), data + skip));
  FUZZ_CHECK(corpus.stats.bytes == corpus.bytes.size() && corpus.stats.nul_bytes == 0);
  FUZZ_CHECK(!text_problem(corpus.stats, "fuzz.txt", 1, seq_len));
  return 0;
}
