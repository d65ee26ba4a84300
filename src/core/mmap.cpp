#include "core/mmap.h"

#include <sys/mman.h>

#include <cerrno>
#include <cstring>

#include "core/format_bytes.h"
#include "core/input_file.h"

namespace tern {

MappedFile::~MappedFile() { release(); }

MappedFile::MappedFile(MappedFile&& other) noexcept
    : data_(other.data_), size_(other.size_), path_(std::move(other.path_)) {
  other.data_ = nullptr;
  other.size_ = 0;
}

MappedFile& MappedFile::operator=(MappedFile&& other) noexcept {
  if (this != &other) {
    release();
    data_ = other.data_;
    size_ = other.size_;
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

Result<MappedFile> MappedFile::open(const std::string& path) {
  // InputFile refuses FIFOs, directories and devices (a FIFO would hang, a
  // device has no size to map) with a message naming what the path is.
  auto input = InputFile::open(path);
  if (!input) return input.status();
  MappedFile file;
  file.path_ = path;
  file.size_ = static_cast<size_t>(input->size());
  if (file.size_ > 0) {
    void* p = mmap(nullptr, file.size_, PROT_READ, MAP_PRIVATE, input->fd(), 0);
    if (p == MAP_FAILED) {
      const int err = errno;
      file.size_ = 0;
      return error(ErrorKind::IoError, "cannot mmap '" + path + "' (" + format_bytes(input->size()) +
                                           "): " + std::strerror(err));
    }
    file.data_ = static_cast<const uint8_t*>(p);
  }
  return file;
}

}  // namespace tern
