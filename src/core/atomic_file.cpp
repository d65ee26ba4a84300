#include "core/atomic_file.h"

#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <cstring>
#include <utility>

#include "core/config.h"

namespace tern {

namespace {

// True for the I/O step TERN_FAULT_IO_STEP names (see the header); sets errno
// as a full disk would.
bool injected_fault() {
  static const int64_t target = env_config().fault_io_step;
  static std::atomic<int64_t> step{0};
  if (target < 0 || step.fetch_add(1) != target) return false;
  errno = ENOSPC;
  return true;
}

}  // namespace

AtomicFile::~AtomicFile() { discard(); }

AtomicFile::AtomicFile(AtomicFile&& other) noexcept
    : file_(std::exchange(other.file_, nullptr)),
      path_(std::move(other.path_)),
      tmp_path_(std::exchange(other.tmp_path_, {})),
      status_(std::move(other.status_)) {}

AtomicFile& AtomicFile::operator=(AtomicFile&& other) noexcept {
  if (this != &other) {
    discard();
    file_ = std::exchange(other.file_, nullptr);
    path_ = std::move(other.path_);
    tmp_path_ = std::exchange(other.tmp_path_, {});
    status_ = std::move(other.status_);
  }
  return *this;
}

void AtomicFile::discard() {
  if (file_) std::fclose(file_);
  file_ = nullptr;
  if (!tmp_path_.empty()) std::remove(tmp_path_.c_str());
  tmp_path_.clear();
}

Status AtomicFile::fail(const std::string& what) {
  const int err = errno;  // before discard() touches it
  discard();
  if (status_.is_ok())
    status_ = error(ErrorKind::IoError, what + " '" + path_ + "': " + (err ? std::strerror(err) : "unknown error"));
  return status_;
}

Result<AtomicFile> AtomicFile::create(const std::string& path) {
  AtomicFile f;
  f.path_ = path;
  const std::string tmp = path + ".tmp";
  // "e": O_CLOEXEC, so a child process cannot keep the file open past the rename.
  f.file_ = injected_fault() ? nullptr : std::fopen(tmp.c_str(), "wbe");
  if (!f.file_) return error(ErrorKind::IoError, "cannot create '" + tmp + "': " + std::strerror(errno));
  f.tmp_path_ = tmp;
  return f;
}

Status AtomicFile::write(const void* data, size_t n_bytes) {
  if (!status_.is_ok()) return status_;
  if (!file_) return error(ErrorKind::Internal, "atomic file '" + path_ + "' written after commit");
  errno = 0;
  if (injected_fault()) {
    std::fwrite(data, 1, n_bytes / 2, file_);
    errno = ENOSPC;
    return fail("cannot write");
  }
  if (n_bytes > 0 && std::fwrite(data, 1, n_bytes, file_) != n_bytes) return fail("cannot write");
  return Status::ok();
}

Status AtomicFile::write_at(uint64_t offset, std::span<const uint8_t> bytes) {
  if (!status_.is_ok()) return status_;
  if (!file_) return error(ErrorKind::Internal, "atomic file '" + path_ + "' written after commit");
  errno = 0;
  if (injected_fault()) return fail("cannot write");
  const long end = std::ftell(file_);
  if (end < 0 || std::fseek(file_, static_cast<long>(offset), SEEK_SET) != 0) return fail("cannot seek in");
  TERN_RETURN_IF_ERROR(write(bytes));
  if (std::fseek(file_, end, SEEK_SET) != 0) return fail("cannot seek in");
  return Status::ok();
}

Status AtomicFile::commit() {
  if (!status_.is_ok()) return status_;
  if (!file_) return error(ErrorKind::Internal, "atomic file '" + path_ + "' committed twice");
  errno = 0;
  // fflush and fsync before fclose: a full disk or quota is often reported
  // only when buffered or delayed data reaches the file system.
  if (injected_fault() || std::fflush(file_) != 0 || std::ferror(file_)) return fail("cannot write");
  if (injected_fault() || ::fsync(fileno(file_)) != 0) return fail("cannot write");
  const bool close_fails = injected_fault();
  const int closed = std::fclose(std::exchange(file_, nullptr));
  if (closed != 0 || close_fails) {
    if (close_fails) errno = ENOSPC;
    return fail("cannot write");
  }
  if (injected_fault() || std::rename(tmp_path_.c_str(), path_.c_str()) != 0) {
    const int err = errno;
    discard();
    status_ = error(ErrorKind::IoError, "cannot rename '" + path_ + ".tmp' to '" + path_ + "': " + std::strerror(err));
    return status_;
  }
  tmp_path_.clear();
  return Status::ok();
}

Status write_file_atomically(const std::string& path, std::string_view content) {
  auto file = AtomicFile::create(path);
  if (!file) return file.status();
  TERN_RETURN_IF_ERROR(file->write(content));
  return file->commit();
}

}  // namespace tern
