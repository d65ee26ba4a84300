// core/atomic_file.h — an output file that appears whole or not at all.
//
// create(PATH) opens PATH.tmp in the same directory (so the final rename
// stays on one file system and is atomic); every write is checked; commit()
// flushes, fsyncs, closes and renames PATH.tmp to PATH. Any failure, or
// destruction without commit(), removes PATH.tmp, so a full disk, a size
// limit or a crash of the writer never leaves a half-written file under PATH,
// and an earlier PATH stays as it was until the rename replaces it.
//
//   create ──write*──► commit ── ok ──► PATH (complete)
//      │        │           └── error ─► PATH untouched, PATH.tmp removed
//      └────────┴── error / destroyed ──► PATH untouched, PATH.tmp removed
//
// The first failed write is sticky: later writes do nothing and return it,
// and commit() returns it too, so a caller may check only commit().
// Threading: one thread per object.
//
// Fault injection (tests): with TERN_FAULT_IO_STEP=N in the environment, the
// N-th (0-based) I/O step of the process's atomic files fails as a full disk
// does (ENOSPC). The steps, counted over every AtomicFile in order: create,
// each write (which first writes half its bytes: a short write), each
// write_at, and commit's flush, fsync, close and rename. tests/cli enumerates
// N for every command that writes a file until the command succeeds.
#pragma once

#include <cstdint>
#include <cstdio>
#include <span>
#include <string>
#include <string_view>

#include "core/status.h"

namespace tern {

class AtomicFile {
 public:
  AtomicFile() = default;
  ~AtomicFile();  // removes PATH.tmp unless commit() succeeded
  AtomicFile(AtomicFile&& other) noexcept;
  AtomicFile& operator=(AtomicFile&& other) noexcept;
  AtomicFile(const AtomicFile&) = delete;
  AtomicFile& operator=(const AtomicFile&) = delete;

  // IoError naming PATH.tmp when it cannot be created (missing directory, permissions).
  static Result<AtomicFile> create(const std::string& path);

  Status write(const void* data, size_t n_bytes);
  Status write(std::span<const uint8_t> bytes) { return write(bytes.data(), bytes.size()); }
  Status write(std::string_view text) { return write(text.data(), text.size()); }
  // Rewrites bytes already written at `offset` (a header completed at the end).
  Status write_at(uint64_t offset, std::span<const uint8_t> bytes);
  // Flush, fsync, close, rename. After an earlier failure: removes PATH.tmp and returns it.
  Status commit();

  bool is_open() const { return file_ != nullptr; }
  const std::string& path() const { return path_; }
  const std::string& tmp_path() const { return tmp_path_; }

 private:
  Status fail(const std::string& what);  // records the first error (with errno), drops PATH.tmp
  void discard();                        // closes and removes PATH.tmp
  std::FILE* file_ = nullptr;
  std::string path_, tmp_path_;
  Status status_;
};

// A whole small file (reports, charts, JSON) through an AtomicFile.
Status write_file_atomically(const std::string& path, std::string_view content);

}  // namespace tern
