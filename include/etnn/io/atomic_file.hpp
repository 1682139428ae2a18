#pragma once
// Private to io/: include <etnn/io/io.hpp> or <etnn/etnn.hpp>.
// Atomic file replacement: the bytes go to a temporary file in the target's directory, which is
// flushed to disk (fsync), renamed over the target, and the directory is flushed too. A crash or
// a full disk at any point leaves either the previous file or the complete new one at the target
// path, never a partial one; on an error the temporary file is removed.
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstddef>
#include <cstring>
#include <filesystem>
#include <functional>
#include <span>
#include <string>

#include "../core/error.hpp"

namespace etnn::io {

namespace detail {
// Test hook: called with the number of bytes written so far, before each write; a test makes it
// throw (a simulated I/O error) or kill the process (a simulated crash).
inline std::function<void(std::size_t)>& write_fault_hook() {
  static std::function<void(std::size_t)> hook;
  return hook;
}

[[noreturn]] inline void io_fail(const std::filesystem::path& path, const std::string& what, int error) {
  throw IoError("etnn::io: " + what + " '" + path.string() + "': " + std::strerror(error));
}
}  // namespace detail

// Writes the concatenation of `pieces` to `path`, atomically.
inline void write_atomically(const std::filesystem::path& path, std::span<const std::span<const unsigned char>> pieces) {
  namespace fs = std::filesystem;
  const fs::path dir = path.has_parent_path() ? path.parent_path() : fs::path(".");
  std::string temp = (dir / ("." + path.filename().string() + ".tmp-XXXXXX")).string();
  const int fd = ::mkstemp(temp.data());
  if (fd < 0) detail::io_fail(path, "cannot create a temporary file beside", errno);
  // mkstemp creates 0600; give the file the mode a plain create would (or the replaced file's).
  struct stat existing {};
  mode_t mode = 0;
  if (::stat(path.c_str(), &existing) == 0) {
    mode = existing.st_mode & 07777;
  } else {
    const mode_t mask = ::umask(0);
    ::umask(mask);
    mode = 0666 & ~mask;
  }
  ::fchmod(fd, mode);
  auto abandon = [&](const std::string& what, int error) {
    ::close(fd);
    ::unlink(temp.c_str());
    detail::io_fail(path, what, error);
  };
  std::size_t written = 0;
  for (const auto piece : pieces) {
    std::size_t done = 0;
    while (done < piece.size()) {
      if (auto& hook = detail::write_fault_hook()) {
        try {
          hook(written);
        } catch (...) {
          ::close(fd);
          ::unlink(temp.c_str());
          throw;
        }
      }
      const std::size_t chunk = std::min<std::size_t>(piece.size() - done, std::size_t{1} << 20);
      const ssize_t n = ::write(fd, piece.data() + done, chunk);
      if (n < 0 && errno == EINTR) continue;
      if (n <= 0) abandon("cannot write (disk full?) the temporary file for", n < 0 ? errno : EIO);
      done += static_cast<std::size_t>(n);
      written += static_cast<std::size_t>(n);
    }
  }
  if (::fsync(fd) != 0) abandon("cannot flush the temporary file for", errno);
  if (::close(fd) != 0) {
    const int error = errno;
    ::unlink(temp.c_str());
    detail::io_fail(path, "cannot close the temporary file for", error);
  }
  if (::rename(temp.c_str(), path.c_str()) != 0) {
    const int error = errno;
    ::unlink(temp.c_str());
    detail::io_fail(path, "cannot rename the temporary file onto", error);
  }
  const int dir_fd = ::open(dir.c_str(), O_RDONLY | O_DIRECTORY);
  if (dir_fd >= 0) {
    ::fsync(dir_fd);  // makes the rename durable; the file is complete either way
    ::close(dir_fd);
  }
}

}  // namespace etnn::io
