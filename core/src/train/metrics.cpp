// metrics.jsonl: schema, append-only writer, atomic truncation, reader (see tttlab/train/metrics.hpp).
#include "tttlab/train/metrics.hpp"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cmath>
#include <cstring>

#include "tttlab/io/atomic_file.hpp"
#include "tttlab/io/limits.hpp"

namespace tttlab {
namespace fs = std::filesystem;

namespace {

// nlohmann writes non-finite doubles as null already; this says so where the record is built.
Json number(double v) { return std::isfinite(v) ? Json(v) : Json(nullptr); }

[[noreturn]] void fail(const std::string& action, const fs::path& path, int err) {
  throw FileError("cannot " + action + " '" + path.string() + "': " + std::strerror(err));
}

// Splits `text` into its complete lines (each ended by '\n'); a last line without one is torn.
template <class F>
void for_each_complete_line(std::string_view text, F&& f) {
  std::size_t begin = 0;
  while (begin < text.size()) {
    const std::size_t end = text.find('\n', begin);
    if (end == std::string_view::npos) break;
    f(text.substr(begin, end - begin));
    begin = end + 1;
  }
}

// The record on `line`, or a null Json when it is not an object with an integer step.
Json parse_record(std::string_view line) {
  try {
    Json j = parse_json(line, "metrics.jsonl");
    if (j.is_object() && j.contains("step") && j["step"].is_number_integer()) return j;
  } catch (const JsonError&) {
  }
  return Json();
}

constexpr std::uint64_t k_max_metrics_bytes = 4ull << 30;

}  // namespace

Json metrics_step_record(const StepReport& r, double tokens_per_s, double elapsed_s) {
  Json j = Json::object();
  j["step"] = r.step;
  j["loss"] = number(r.loss);
  j["lr"] = number(r.lr);
  j["grad_norm"] = number(r.grad_norm);
  j["skipped"] = r.skipped;
  j["tokens_per_s"] = number(tokens_per_s);
  j["elapsed_s"] = number(elapsed_s);
  return j;
}

Json metrics_eval_record(const EvalReport& r, bool with_loss_by_position) {
  Json j = Json::object();
  j["step"] = r.step;
  j["val_loss"] = number(r.loss);
  j["val_bpb"] = number(r.bpb);
  j["val_targets"] = r.targets;
  j["val_accuracy"] = r.accuracy_measured ? number(r.accuracy) : Json(nullptr);
  if (with_loss_by_position) {
    Json pos = Json::array();
    for (double v : r.loss_by_position) pos.push_back(number(v));
    j["val_loss_by_position"] = std::move(pos);
  }
  return j;
}

Json metrics_event_record(long step, std::string_view kind, std::string_view message) {
  Json j = Json::object();
  j["step"] = step;
  j["event"] = std::string(kind);
  j["message"] = std::string(message);
  return j;
}

// ---- MetricsLog ------------------------------------------------------------------------------------

MetricsLog::MetricsLog(fs::path path, Mode mode) : m_path(std::move(path)) {
  // O_NOFOLLOW: a link planted at the log's path is refused, never followed (its target would be
  // truncated and filled with metrics); a device or a FIFO is refused after opening, before any write.
  int flags = O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC | O_NOFOLLOW | O_NONBLOCK;
  do {
    m_fd = ::open(m_path.c_str(), flags, 0666);
  } while (m_fd < 0 && errno == EINTR);
  if (m_fd < 0 && errno == ELOOP)
    throw FileError("cannot write '" + clip(m_path.string(), 240) +
                    "': it is a symbolic link, and a run writes nothing outside its directory");
  if (m_fd < 0) fail("open for appending", m_path, errno);
  struct stat st {};
  if (::fstat(m_fd, &st) != 0 || !S_ISREG(st.st_mode)) {
    ::close(m_fd);
    m_fd = -1;
    throw FileError("cannot write '" + clip(m_path.string(), 240) + "': it is not a regular file");
  }
  const int fl = ::fcntl(m_fd, F_GETFL);
  if (fl >= 0) (void)::fcntl(m_fd, F_SETFL, fl & ~O_NONBLOCK);
  if (mode == Mode::Fresh && ::ftruncate(m_fd, 0) != 0) fail("truncate", m_path, errno);
}

MetricsLog::~MetricsLog() {
  if (m_fd >= 0) ::close(m_fd);
}

void MetricsLog::append(const Json& record) {
  const std::string line = dump_json(record) + "\n";
  // One write() carries the whole line; a regular file takes it whole unless the disk is full,
  // in which case the rest is retried and the error (ENOSPC) reported.
  // A failed append (a full disk) is cut back to where it started, so the log never ends in a torn line.
  const off_t before = ::lseek(m_fd, 0, SEEK_END);
  const auto undo_and_fail = [&](int err) {
    if (before >= 0) (void)::ftruncate(m_fd, before);
    fail("append to", m_path, err);
  };
  std::size_t done = 0;
  while (done < line.size()) {
    const ssize_t n = ::write(m_fd, line.data() + done, line.size() - done);
    if (n < 0) {
      if (errno == EINTR) continue;
      undo_and_fail(errno);
    }
    if (n == 0) undo_and_fail(EIO);
    done += static_cast<std::size_t>(n);
  }
}

void MetricsLog::sync() {
  if (::fsync(m_fd) != 0) fail("sync", m_path, errno);
}

// ---- reading -----------------------------------------------------------------------------------

long truncate_metrics(const fs::path& path, long step) {
  std::error_code ec;
  if (!fs::exists(path, ec)) return 0;
  const std::string text = read_file_text(path, k_max_metrics_bytes);
  std::string kept;
  long count = 0;
  for_each_complete_line(text, [&](std::string_view line) {
    const Json j = parse_record(line);
    if (j.is_null() || j.at("step").get<long>() > step) return;
    kept.append(line);
    kept += '\n';
    ++count;
  });
  write_file_atomic(path, std::string_view(kept));
  return count;
}

std::vector<Json> read_metrics(const fs::path& path, long up_to_step) {
  std::vector<Json> out;
  std::error_code ec;
  if (!fs::exists(path, ec)) return out;
  const std::string text = read_file_text(path, k_max_metrics_bytes);
  for_each_complete_line(text, [&](std::string_view line) {
    Json j = parse_record(line);
    if (j.is_null() || (up_to_step >= 0 && j.at("step").get<long>() > up_to_step)) return;
    out.push_back(std::move(j));
  });
  return out;
}

}  // namespace tttlab
