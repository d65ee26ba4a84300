// core/input_file.h — opening files a user names as input, safely.
//
// Every path a user hands tern (model, prompt, text, request or key file) is
// opened here, so one rule holds everywhere: only regular files are read.
// A FIFO would block open() or read() forever, a directory reads as empty, and
// /dev/zero or /dev/urandom never end; each is refused with a message that
// names the path and what it is. The FIFO check cannot wait on a writer
// because the file is opened with O_NONBLOCK and inspected with fstat before
// any read.
//
// Text read into memory is capped (kMaxInputFileBytes unless the caller asks
// for less): the size is checked with fstat first, and reading also stops at
// the cap, because st_size is 0 for files like /proc/* and a file may grow
// while it is read.
// Threading: free functions and a move-only handle; no shared state.
#pragma once

#include <cstdint>
#include <string>
#include <utility>

#include "core/status.h"

namespace tern {

// Largest prompt / text / request file read into memory: 1 GiB.
inline constexpr uint64_t kMaxInputFileBytes = uint64_t{1} << 30;

// An open read-only descriptor of a regular file; closes it on destruction.
class InputFile {
 public:
  InputFile() = default;
  ~InputFile();
  InputFile(InputFile&& other) noexcept;
  InputFile& operator=(InputFile&& other) noexcept;
  InputFile(const InputFile&) = delete;
  InputFile& operator=(const InputFile&) = delete;

  // NotFound when absent; IoError when unreadable or not a regular file
  // ("'PATH' is a directory, not a regular file").
  static Result<InputFile> open(const std::string& path);

  int fd() const { return fd_; }
  uint64_t size() const { return size_; }  // from fstat at open()
  const std::string& path() const { return path_; }
  // Hands the descriptor to the caller (e.g. for fdopen); this object no longer closes it.
  int release_fd() { return std::exchange(fd_, -1); }

  // The whole content; OutOfRange (naming the path and the cap) past max_bytes.
  Result<std::string> read_all(uint64_t max_bytes = kMaxInputFileBytes);

 private:
  Result<std::string> read_bounded(uint64_t max_bytes);
  int fd_ = -1;
  uint64_t size_ = 0;
  std::string path_;
};

// InputFile::open(path) then read_all(max_bytes).
Result<std::string> read_file(const std::string& path, uint64_t max_bytes = kMaxInputFileBytes);

// True when both paths name one existing file (same device and inode, through
// symlinks and hard links); false when either does not exist.
bool same_file(const std::string& a, const std::string& b);

}  // namespace tern
