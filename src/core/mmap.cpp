#include "core/mmap.h"

#include <sys/mman.h>
#include <fcntl.h>
#include <sys/resource.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <vector>

#include "core/format_bytes.h"
#include "core/input_file.h"

namespace tern {

MappedFile::~MappedFile() { release(); }

MappedFile::MappedFile(MappedFile&& other) noexcept
    : data_(other.data_), size_(other.size_), file_backed_(other.file_backed_), path_(std::move(other.path_)) {
  other.data_ = nullptr;
  other.size_ = 0;
}

MappedFile& MappedFile::operator=(MappedFile&& other) noexcept {
  if (this != &other) {
    release();
    data_ = other.data_;
    size_ = other.size_;
    file_backed_ = other.file_backed_;
    path_ = std::move(other.path_);
    other.data_ = nullptr;
    other.size_ = 0;
  }
  return *this;
}

void MappedFile::release() {
  if (data_ && size_) munmap(const_cast<uint8_t*>(data_), size_);
  data_ = nullptr;
  size_ = 0;
}

namespace {

// The whole file read into a fresh anonymous mapping, then made read-only.
Result<void*> read_into_memory(const InputFile& input, const std::string& path, size_t size) {
  void* p = mmap(nullptr, size, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  if (p == MAP_FAILED)
    return error(ErrorKind::IoError, "cannot allocate " + format_bytes(size) + " to read '" + path + "' into (--no-mmap): " +
                                         std::strerror(errno));
  size_t done = 0;
  while (done < size) {
    const ssize_t n = pread(input.fd(), static_cast<char*>(p) + done, std::min<size_t>(size - done, size_t{1} << 30),
                            static_cast<off_t>(done));
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) {
      const std::string why = n < 0 ? std::strerror(errno) : "the file ended early (was it truncated while read?)";
      munmap(p, size);
      return error(ErrorKind::IoError, "cannot read '" + path + "' at byte " + std::to_string(done) + ": " + why);
    }
    done += static_cast<size_t>(n);
  }
  mprotect(p, size, PROT_READ);
  return p;
}

}  // namespace

Result<MappedFile> MappedFile::open(const std::string& path, const MapOptions& options) {
  // InputFile refuses FIFOs, directories and devices (a FIFO would hang, a
  // device has no size to map) with a message naming what the path is.
  auto input = InputFile::open(path);
  if (!input) return input.status();
  MappedFile file;
  file.path_ = path;
  file.size_ = static_cast<size_t>(input->size());
  file.file_backed_ = options.mmap;
  if (file.size_ > 0 && !options.mmap) {
    auto p = read_into_memory(*input, path, file.size_);
    if (!p) {
      file.size_ = 0;
      return p.status();
    }
    file.data_ = static_cast<const uint8_t*>(*p);
  } else if (file.size_ > 0) {
    void* p = mmap(nullptr, file.size_, PROT_READ, MAP_PRIVATE, input->fd(), 0);
    if (p == MAP_FAILED) {
      const int err = errno;
      file.size_ = 0;
      return error(ErrorKind::IoError, "cannot mmap '" + path + "' (" + format_bytes(input->size()) +
                                           "): " + std::strerror(err) + " (--no-mmap reads it into memory instead)");
    }
    file.data_ = static_cast<const uint8_t*>(p);
  }
  return file;
}

Status lock_in_memory(std::span<const uint8_t> bytes, const std::string& what) {
  if (bytes.empty()) return Status::ok();
  if (mlock(bytes.data(), bytes.size()) == 0) return Status::ok();
  const int err = errno;
  std::string limit = "unknown";
  rlimit rl{};
  if (getrlimit(RLIMIT_MEMLOCK, &rl) == 0)
    limit = rl.rlim_cur == RLIM_INFINITY ? "unlimited" : format_bytes(static_cast<uint64_t>(rl.rlim_cur));
  return error(ErrorKind::Unavailable, "cannot lock " + format_bytes(bytes.size()) + " of " + what + " in memory: " +
                                           std::strerror(err) + " (the limit on locked memory is " + limit +
                                           "; raise it with `ulimit -l` or in /etc/security/limits.conf, or run "
                                           "without --mlock)");
}

Result<double> page_cache_share(const std::string& path) {
  auto input = InputFile::open(path);
  if (!input) return input.status();
  const size_t size = static_cast<size_t>(input->size());
  if (size == 0) return 0.0;
  void* p = mmap(nullptr, size, PROT_READ, MAP_SHARED, input->fd(), 0);
  if (p == MAP_FAILED) return error(ErrorKind::IoError, "cannot mmap '" + path + "': " + std::strerror(errno));
  const size_t page = static_cast<size_t>(sysconf(_SC_PAGESIZE));
  std::vector<unsigned char> resident((size + page - 1) / page);
  const int rc = mincore(p, size, resident.data());
  const int err = errno;
  munmap(p, size);
  if (rc != 0) return error(ErrorKind::IoError, "mincore on '" + path + "': " + std::strerror(err));
  size_t n = 0;
  for (unsigned char r : resident) n += r & 1;
  return static_cast<double>(n) / static_cast<double>(resident.size());
}

Status drop_from_page_cache(const std::string& path) {
  auto input = InputFile::open(path);
  if (!input) return input.status();
  const int rc = posix_fadvise(input->fd(), 0, 0, POSIX_FADV_DONTNEED);
  if (rc != 0) return error(ErrorKind::IoError, "cannot drop '" + path + "' from the page cache: " + std::strerror(rc));
  return Status::ok();
}

}  // namespace tern
