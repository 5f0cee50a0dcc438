// Whole-file reads and atomic writes on POSIX (see tttlab/io/atomic_file.hpp).
#include "tttlab/io/atomic_file.hpp"

#include "tttlab/io/limits.hpp"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <cstring>

namespace tttlab {
namespace {

// Built by appending: GCC 12 warns (-Wrestrict, a false positive) on "'" + str + "'".
// Paths come from the user or from files (a run's 'latest'); clipped so a message stays one short line.
std::string quoted(const std::filesystem::path& p) {
  std::string s;
  s += '\'';
  s += clip(p.string(), 240);
  s += '\'';
  return s;
}

std::string reason(int err) { return std::strerror(err); }

// Closes on scope exit; read paths only (the writer manages its descriptor itself).
struct Fd {
  int fd = -1;
  ~Fd() {
    if (fd >= 0) ::close(fd);
  }
};

std::atomic<std::uint64_t> g_temp_counter{0};

}  // namespace

namespace {

// What a non-regular file is, for the message that refuses it.
const char* kind_of(mode_t mode) {
  if (S_ISDIR(mode)) return "a directory";
  if (S_ISFIFO(mode)) return "a FIFO (named pipe)";
  if (S_ISCHR(mode)) return "a character device";
  if (S_ISBLK(mode)) return "a block device";
  if (S_ISSOCK(mode)) return "a socket";
  return "not a regular file";
}

// Opens a regular file for reading. O_NONBLOCK: opening a FIFO without a writer would otherwise block
// forever before fstat could tell what it is; for a regular file the flag changes nothing, and it is
// cleared again anyway. Devices (/dev/zero, /dev/urandom) and FIFOs never end, so they are refused.
void open_regular(Fd& f, const std::filesystem::path& path, struct stat& st) {
  do {
    f.fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC | O_NONBLOCK);
  } while (f.fd < 0 && errno == EINTR);
  if (f.fd < 0) throw FileError("cannot read " + quoted(path) + ": " + reason(errno));
  if (::fstat(f.fd, &st) != 0) throw FileError("cannot read " + quoted(path) + ": " + reason(errno));
  if (!S_ISREG(st.st_mode))
    throw FileError("cannot read " + quoted(path) + ": it is " + kind_of(st.st_mode) + ", not a regular file");
  const int flags = ::fcntl(f.fd, F_GETFL);
  if (flags >= 0) (void)::fcntl(f.fd, F_SETFL, flags & ~O_NONBLOCK);
}

}  // namespace

std::uint64_t regular_file_size(const std::filesystem::path& path) {
  Fd f;
  struct stat st {};
  open_regular(f, path, st);
  return static_cast<std::uint64_t>(st.st_size);
}

std::vector<std::uint8_t> read_file_range(const std::filesystem::path& path, std::uint64_t offset,
                                          std::uint64_t count) {
  Fd f;
  struct stat st {};
  open_regular(f, path, st);
  const auto size = static_cast<std::uint64_t>(st.st_size);
  if (offset > size || count > size - offset)
    throw FileError("cannot read " + quoted(path) + ": it has " + std::to_string(size) + " bytes, fewer than the " +
                    std::to_string(offset) + " + " + std::to_string(count) + " needed (truncated file?)");
  std::vector<std::uint8_t> out(static_cast<std::size_t>(count));
  std::uint64_t done = 0;
  while (done < count) {
    const ssize_t n = ::pread(f.fd, out.data() + done, static_cast<std::size_t>(count - done),
                              static_cast<off_t>(offset + done));
    if (n < 0) {
      if (errno == EINTR) continue;
      throw FileError("cannot read " + quoted(path) + ": " + reason(errno));
    }
    if (n == 0) throw FileError("cannot read " + quoted(path) + ": the file shrank while it was read");
    done += static_cast<std::uint64_t>(n);
  }
  return out;
}

std::vector<std::uint8_t> read_file_bytes(const std::filesystem::path& path, std::uint64_t max_bytes) {
  Fd f;
  struct stat st {};
  open_regular(f, path, st);
  if (static_cast<std::uint64_t>(st.st_size) > max_bytes)
    throw FileError("cannot read " + quoted(path) + ": " + std::to_string(st.st_size) +
                    " bytes is more than the limit of " + std::to_string(max_bytes) + " bytes");
  std::vector<std::uint8_t> out;
  out.reserve(static_cast<std::size_t>(st.st_size));
  // Read until end of file rather than trusting st_size: the file may change while it is read.
  std::uint8_t buf[1 << 16];
  for (;;) {
    const ssize_t n = ::read(f.fd, buf, sizeof buf);
    if (n < 0) {
      if (errno == EINTR) continue;
      throw FileError("cannot read " + quoted(path) + ": " + reason(errno));
    }
    if (n == 0) break;
    if (out.size() + static_cast<std::size_t>(n) > max_bytes)
      throw FileError("cannot read " + quoted(path) + ": more than the limit of " + std::to_string(max_bytes) + " bytes");
    out.insert(out.end(), buf, buf + n);
  }
  return out;
}

std::string read_file_text(const std::filesystem::path& path, std::uint64_t max_bytes) {
  const auto bytes = read_file_bytes(path, max_bytes);
  return std::string(bytes.begin(), bytes.end());
}

void check_output_file(const std::filesystem::path& target) {
  if (target.filename().empty()) throw FileError("cannot write " + quoted(target) + ": not a file name");
  const std::filesystem::path dir = target.has_parent_path() ? target.parent_path() : std::filesystem::path(".");
  std::error_code ec;
  if (!std::filesystem::is_directory(dir, ec))
    throw FileError("cannot write " + quoted(target) + ": directory " + quoted(dir) + " does not exist");
  // Only regular files are replaced. A rename over a device, a FIFO or a socket would put a plain file
  // in its place (as root, over /dev/null for every program on the machine), and a symbolic link would
  // be replaced by a file where the user meant its target: both are refused, before anything is written.
  struct stat st {};
  if (::lstat(target.c_str(), &st) == 0) {
    if (S_ISLNK(st.st_mode))
      throw FileError("cannot write " + quoted(target) +
                      ": it is a symbolic link; TTT Lab writes only regular files and never through links");
    if (!S_ISREG(st.st_mode))
      throw FileError("cannot write " + quoted(target) + ": it is " + kind_of(st.st_mode) +
                      "; TTT Lab replaces only regular files");
  } else if (errno != ENOENT) {
    throw FileError("cannot write " + quoted(target) + ": " + reason(errno));
  }
}

AtomicFileWriter::AtomicFileWriter(std::filesystem::path target) : m_target(std::move(target)) {
  check_output_file(m_target);
  const std::filesystem::path dir = m_target.has_parent_path() ? m_target.parent_path() : std::filesystem::path(".");
  for (int attempt = 0; attempt < 100; ++attempt) {
    std::string name = ".";
    name += m_target.filename().string();
    name += ".tmp-";
    name += std::to_string(::getpid());
    name += '-';
    name += std::to_string(g_temp_counter.fetch_add(1));
    m_temp = dir / name;
    m_fd = ::open(m_temp.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0666);
    if (m_fd >= 0) return;
    if (errno != EEXIST && errno != EINTR) fail("create a temporary file in " + quoted(dir), errno);
  }
  throw FileError("cannot write " + quoted(m_target) + ": could not create a unique temporary file");
}

AtomicFileWriter::AtomicFileWriter(AtomicFileWriter&& other) noexcept
    : m_target(std::move(other.m_target)), m_temp(std::move(other.m_temp)), m_fd(other.m_fd),
      m_committed(other.m_committed) {
  other.m_fd = -1;
  other.m_committed = true;  // nothing left for the moved-from writer to clean up
}

AtomicFileWriter::~AtomicFileWriter() {
  if (!m_committed) discard();
}

void AtomicFileWriter::discard() noexcept {
  if (m_fd >= 0) {
    ::close(m_fd);
    m_fd = -1;
  }
  if (!m_temp.empty()) ::unlink(m_temp.c_str());
}

void AtomicFileWriter::fail(const std::string& action, int err) {
  discard();
  m_committed = true;
  const std::string what = action.empty() ? "" : " (" + action + ")";
  throw FileError("cannot write " + quoted(m_target) + ": " + reason(err) + what);
}

void AtomicFileWriter::write(const void* data, std::size_t size) {
  if (m_fd < 0) throw FileError("cannot write " + quoted(m_target) + ": the writer is closed");
  const auto* p = static_cast<const std::uint8_t*>(data);
  while (size > 0) {
    const ssize_t n = ::write(m_fd, p, size);
    if (n < 0) {
      if (errno == EINTR) continue;
      fail("", errno);
    }
    p += n;
    size -= static_cast<std::size_t>(n);
  }
}

void AtomicFileWriter::commit() {
  if (m_fd < 0) throw FileError("cannot write " + quoted(m_target) + ": the writer is closed");
  if (::fsync(m_fd) != 0) fail("fsync", errno);
  const int fd = m_fd;
  m_fd = -1;
  if (::close(fd) != 0) fail("close", errno);
  if (::rename(m_temp.c_str(), m_target.c_str()) != 0) fail("rename", errno);
  m_committed = true;
  // Make the rename itself durable. A failure here cannot undo the (complete) new file, so it is
  // not reported: some file systems refuse fsync on directories.
  const std::filesystem::path dir = m_target.has_parent_path() ? m_target.parent_path() : std::filesystem::path(".");
  const int dfd = ::open(dir.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  if (dfd >= 0) {
    (void)::fsync(dfd);
    ::close(dfd);
  }
}

void write_file_atomic(const std::filesystem::path& path, std::span<const std::uint8_t> data) {
  AtomicFileWriter w(path);
  w.write(data.data(), data.size());
  w.commit();
}

void write_file_atomic(const std::filesystem::path& path, std::string_view text) {
  AtomicFileWriter w(path);
  w.write(text);
  w.commit();
}

}  // namespace tttlab
