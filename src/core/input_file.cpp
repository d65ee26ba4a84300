#include "core/input_file.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <new>

#include "core/format_bytes.h"

namespace tern {
namespace {

const char* file_kind(mode_t mode) {
  if (S_ISDIR(mode)) return "a directory";
  if (S_ISFIFO(mode)) return "a FIFO (named pipe)";
  if (S_ISCHR(mode)) return "a character device";
  if (S_ISBLK(mode)) return "a block device";
  if (S_ISSOCK(mode)) return "a socket";
  return "not a regular file";
}

Status too_large(const std::string& path, uint64_t max_bytes) {
  return error(ErrorKind::OutOfRange, "'" + path + "' is larger than the " + format_bytes(max_bytes) +
                                          " tern reads from an input file");
}

}  // namespace

InputFile::~InputFile() {
  if (fd_ >= 0) ::close(fd_);
}

InputFile::InputFile(InputFile&& other) noexcept
    : fd_(other.fd_), size_(other.size_), path_(std::move(other.path_)) {
  other.fd_ = -1;
}

InputFile& InputFile::operator=(InputFile&& other) noexcept {
  if (this != &other) {
    if (fd_ >= 0) ::close(fd_);
    fd_ = other.fd_;
    size_ = other.size_;
    path_ = std::move(other.path_);
    other.fd_ = -1;
  }
  return *this;
}

Result<InputFile> InputFile::open(const std::string& path) {
  // O_NONBLOCK: opening a FIFO for reading otherwise waits for a writer.
  const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC | O_NONBLOCK);
  if (fd < 0) {
    const int err = errno;
    if (err == ENXIO) return error(ErrorKind::IoError, "'" + path + "' is not a regular file");  // e.g. a socket
    return error(err == ENOENT ? ErrorKind::NotFound : ErrorKind::IoError,
                 "cannot open '" + path + "': " + std::strerror(err));
  }
  InputFile file;
  file.fd_ = fd;
  file.path_ = path;
  struct stat st {};
  if (fstat(fd, &st) != 0) return error(ErrorKind::IoError, "cannot stat '" + path + "': " + std::strerror(errno));
  if (!S_ISREG(st.st_mode))
    return error(ErrorKind::IoError, "'" + path + "' is " + file_kind(st.st_mode) + ", not a regular file");
  // Regular files ignore O_NONBLOCK, but clear it so nothing downstream sees EAGAIN.
  fcntl(fd, F_SETFL, fcntl(fd, F_GETFL) & ~O_NONBLOCK);
  file.size_ = static_cast<uint64_t>(st.st_size);
  return file;
}

Result<std::string> InputFile::read_all(uint64_t max_bytes) {
  if (size_ > max_bytes) return too_large(path_, max_bytes);
  try {
    return read_bounded(max_bytes);
  } catch (const std::bad_alloc&) {  // e.g. under `ulimit -v`: an error, not an abort
    return error(ErrorKind::IoError, "not enough memory to read '" + path_ + "' (" + format_bytes(size_) + ")");
  }
}

Result<std::string> InputFile::read_bounded(uint64_t max_bytes) {
  std::string out;
  out.resize(static_cast<size_t>(size_));
  size_t n_read = 0;
  for (;;) {
    if (n_read == out.size()) {
      // At the expected end: probe for more (st_size may be 0 or stale), up to the cap.
      if (out.size() > max_bytes) return too_large(path_, max_bytes);
      out.resize(out.size() + std::min<size_t>(64 * 1024, max_bytes + 1 - out.size()));
    }
    const ssize_t n = ::read(fd_, out.data() + n_read, out.size() - n_read);
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) return error(ErrorKind::IoError, "cannot read '" + path_ + "': " + std::strerror(errno));
    if (n == 0) break;
    n_read += static_cast<size_t>(n);
  }
  if (n_read > max_bytes) return too_large(path_, max_bytes);
  out.resize(n_read);
  return out;
}

Result<std::string> read_file(const std::string& path, uint64_t max_bytes) {
  auto file = InputFile::open(path);
  if (!file) return file.status();
  return file->read_all(max_bytes);
}

bool same_file(const std::string& a, const std::string& b) {
  struct stat sa {}, sb {};
  if (::stat(a.c_str(), &sa) != 0 || ::stat(b.c_str(), &sb) != 0) return false;
  return sa.st_dev == sb.st_dev && sa.st_ino == sb.st_ino;
}

}  // namespace tern
