// tttlab/io/atomic_file.hpp — reading whole files with clear errors, and writing files atomically.
//
// Atomic write: the bytes go to a temporary file in the SAME directory as the target (a rename is
// atomic only within one file system), the temporary is flushed to disk (fsync), renamed over the
// target, and the directory entry is flushed (fsync of the directory). A reader, or a crash at any
// moment, sees either the complete old file or the complete new file, never a partial one. Use it
// for every file the engine writes: checkpoints, config.json, manifests, prepared data.
//
// The temporary is named ".<target name>.tmp-<pid>-<n>" and is removed when writing fails or the
// writer is destroyed without commit(). The target's directory must exist (this does not create
// directories). New files get mode 0666 minus the umask, like any file the user creates. POSIX only.
//
// Only regular files are replaced: a target that is a symbolic link, a directory, a device, a FIFO or
// a socket is refused (FileError) before anything is written, so that an output path can never
// replace /dev/null or write where a planted link points (docs/SECURITY.md).
//
// Errors are FileError with a one-line message naming the file and the system's reason, e.g.
//   cannot write 'out/model.safetensors': No space left on device
// Threading: distinct writers may run on distinct threads (temporary names never collide).
#pragma once

#include <cstddef>
#include <cstdint>
#include <filesystem>
#include <span>
#include <stdexcept>
#include <string>
#include <string_view>
#include <vector>

namespace tttlab {

class FileError : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

// Reads the whole file. Fails (FileError) when it is missing, unreadable, larger than max_bytes (the
// message then gives the size and the limit), or not a regular file: a directory, a FIFO, a device
// (/dev/zero), a socket. Only regular files are read: a FIFO would block forever and a device never
// ends. A FIFO is recognised without blocking (it is opened non-blocking). Symbolic links are followed
// and judged by their target.
std::vector<std::uint8_t> read_file_bytes(const std::filesystem::path& path,
                                          std::uint64_t max_bytes = UINT64_MAX);
std::string read_file_text(const std::filesystem::path& path, std::uint64_t max_bytes = UINT64_MAX);
// The size of a regular file (FileError as above when it is not one).
std::uint64_t regular_file_size(const std::filesystem::path& path);
// Bytes [offset, offset + count) of a regular file; FileError when the file is shorter (or not regular).
// Allocates `count` bytes: callers bound it first.
std::vector<std::uint8_t> read_file_range(const std::filesystem::path& path, std::uint64_t offset,
                                          std::uint64_t count);

// What the writer checks before it writes, for commands to call before they compute: `path` names a
// file, its directory exists, and nothing but a regular file is at the path (FileError otherwise, with
// the same message the writer gives). Nothing is created.
void check_output_file(const std::filesystem::path& path);

// Writes `data` to `path` atomically (see above). Replaces an existing regular file.
void write_file_atomic(const std::filesystem::path& path, std::span<const std::uint8_t> data);
void write_file_atomic(const std::filesystem::path& path, std::string_view text);

// Streaming form for large outputs: construct (creates the temporary), write() any number of
// times, then commit(). Destroying it uncommitted removes the temporary and leaves the target as it
// was. Not copyable; movable.
class AtomicFileWriter {
 public:
  explicit AtomicFileWriter(std::filesystem::path target);
  AtomicFileWriter(AtomicFileWriter&& other) noexcept;
  AtomicFileWriter& operator=(AtomicFileWriter&&) = delete;
  AtomicFileWriter(const AtomicFileWriter&) = delete;
  AtomicFileWriter& operator=(const AtomicFileWriter&) = delete;
  ~AtomicFileWriter();

  void write(const void* data, std::size_t size);
  void write(std::string_view text) { write(text.data(), text.size()); }
  void commit();

  const std::filesystem::path& target() const { return m_target; }
  const std::filesystem::path& temp_path() const { return m_temp; }

 private:
  std::filesystem::path m_target;
  std::filesystem::path m_temp;
  int m_fd = -1;
  bool m_committed = false;

  [[noreturn]] void fail(const std::string& action, int err);
  void discard() noexcept;
};

}  // namespace tttlab
