// core/mmap.h — read-only memory-mapped files.
//
// A MappedFile owns one read-only mapping of a whole file; it is movable, not
// copyable, and unmaps on destruction. Model weights are used in place from
// the mapping, never copied. An empty file maps to an empty span. Only regular
// files are mapped (see core/input_file.h).
//
// With MapOptions::mmap false the file is read once into anonymous memory
// instead (for filesystems where mapping is slow or unsupported, or to be
// independent of the file afterwards): the same read-only bytes, but resident
// as the process's own memory, so none of it can be dropped and read back.
#pragma once

#include <cstddef>
#include <cstdint>
#include <span>
#include <string>

#include "core/status.h"

namespace tern {

struct MapOptions {
  bool mmap = true;  // false: read into anonymous memory
};

class MappedFile {
 public:
  MappedFile() = default;
  ~MappedFile();
  MappedFile(MappedFile&& other) noexcept;
  MappedFile& operator=(MappedFile&& other) noexcept;
  MappedFile(const MappedFile&) = delete;
  MappedFile& operator=(const MappedFile&) = delete;

  static Result<MappedFile> open(const std::string& path, const MapOptions& options = {});

  std::span<const uint8_t> bytes() const { return {data_, size_}; }
  const std::string& path() const { return path_; }
  // Whether the bytes are the file's pages (droppable, read back on use), not a copy.
  bool file_backed() const { return file_backed_; }

 private:
  void release();
  const uint8_t* data_ = nullptr;
  size_t size_ = 0;
  bool file_backed_ = true;
  std::string path_;
};

// Pins `bytes` in RAM (mlock): never paged out. Refused when the limit on
// locked memory (RLIMIT_MEMLOCK) is too low, with the limit and how to raise it.
// `what` names the bytes in the message.
Status lock_in_memory(std::span<const uint8_t> bytes, const std::string& what);

// The share of a regular file's pages in the page cache now (mincore), 0..1.
Result<double> page_cache_share(const std::string& path);
// Asks the kernel to drop a regular file's clean pages from the page cache
// (POSIX_FADV_DONTNEED; no privilege needed): the next read comes from disk, as
// after a reboot — for cold-start figures. Pages another process maps stay.
Status drop_from_page_cache(const std::string& path);

}  // namespace tern
