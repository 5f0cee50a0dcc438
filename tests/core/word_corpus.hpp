// A small UTF-8 training text for the trainer and session tests: words drawn from a nine-word list
// by a fixed linear congruential sequence, so that a tiny model picks up its structure in a few
// steps and every run sees the same bytes.
#pragma once

#include <filesystem>
#include <string>

#include "tttlab/io/atomic_file.hpp"

namespace tttlab::testing {

// Writes `words` words to DIR/corpus.txt and returns its path.
inline std::filesystem::path write_word_corpus(const std::filesystem::path& dir, int words) {
  std::string text;
  const char* vocabulary[] = {"the ", "cat ", "sat ", "on ", "a ", "mat. ", "dogs ", "run ", "fast. "};
  unsigned x = 1;
  for (int i = 0; i < words; ++i) {
    x = x * 1103515245u + 12345u;
    text += vocabulary[(x >> 16) % 9];
  }
  const std::filesystem::path p = dir / "corpus.txt";
  write_file_atomic(p, text);
  return p;
}

}  // namespace tttlab::testing
