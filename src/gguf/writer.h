// gguf/writer.h — write a standard GGUF v3 file.
//
// Metadata keys keep insertion order; tensors are laid out in insertion order,
// each at an offset aligned to general.alignment (32 unless the caller set the
// key). Tensor bytes are taken as given: the caller encodes them in `type`.
//
// Two writers share one layout:
//   GgufWriter        keeps every tensor's bytes in memory until write() (small
//                     files, tests).
//   GgufStreamWriter  for files larger than memory: tensors are declared up
//                     front (name, type, dims), so the header and all offsets
//                     are known; then each tensor's bytes are appended in
//                     declaration order and dropped by the caller.
// Both write PATH.tmp and rename it to PATH only when complete, so a failure
// (or an abandoned stream) never leaves a half file under PATH.
#pragma once

#include <cstdint>
#include <span>
#include <string>
#include <vector>

#include "core/atomic_file.h"
#include "core/status.h"
#include "gguf/gguf_format.h"
#include "gguf/value.h"

namespace tern::gguf {

class GgufWriter {
 public:
  // Adds or replaces a metadata key.
  void set(const std::string& key, Value value);
  // dims[0] is the contiguous row; bytes must match the type's size for these dims.
  Status add_tensor(const std::string& name, GgmlType type, std::vector<uint64_t> dims,
                    std::span<const uint8_t> bytes);
  // Writes atomically (to PATH.tmp, then rename) so a failed write leaves no half file.
  Status write(const std::string& path) const;
  // The whole file image (tests).
  std::vector<uint8_t> to_bytes() const;

 private:
  struct PendingTensor {
    std::string name;
    GgmlType type;
    std::vector<uint64_t> dims;
    std::vector<uint8_t> bytes;
  };
  uint32_t alignment() const;
  std::vector<std::pair<std::string, Value>> kv_;
  std::vector<PendingTensor> tensors_;
};

class GgufStreamWriter {
 public:
  GgufStreamWriter() = default;
  ~GgufStreamWriter();  // removes PATH.tmp unless commit() succeeded
  GgufStreamWriter(const GgufStreamWriter&) = delete;
  GgufStreamWriter& operator=(const GgufStreamWriter&) = delete;

  // Before open(): metadata and tensor declarations (checked like add_tensor).
  void set(const std::string& key, Value value);
  Status declare_tensor(const std::string& name, GgmlType type, std::vector<uint64_t> dims);
  // Bytes the declared tensor `i` takes (without alignment padding).
  uint64_t tensor_bytes(size_t i) const { return tensors_[i].n_bytes; }
  size_t n_tensors() const { return tensors_.size(); }

  // Creates PATH.tmp and writes the header and tensor infos.
  Status open(const std::string& path);
  // Appends the next declared tensor's bytes; the size must match its declaration.
  Status write_tensor(std::span<const uint8_t> bytes);
  // After every tensor is written: flush, close, rename PATH.tmp to PATH.
  Status commit();

 private:
  struct Declared {
    std::string name;
    GgmlType type;
    std::vector<uint64_t> dims;
    uint64_t n_bytes;
  };
  std::vector<std::pair<std::string, Value>> kv_;
  std::vector<Declared> tensors_;
  AtomicFile file_;  // PATH.tmp until commit()
  size_t n_written_ = 0;
  uint32_t align_ = kDefaultAlignment;
  bool opened_ = false;
};

}  // namespace tern::gguf
