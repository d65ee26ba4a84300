// gguf/writer.h — write a standard GGUF v3 file.
//
// Metadata keys keep insertion order; tensors are laid out in insertion order,
// each at an offset aligned to general.alignment (32 unless the caller set the
// key). Tensor bytes are taken as given: the caller encodes them in `type`.
#pragma once

#include <cstdint>
#include <span>
#include <string>
#include <vector>

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

}  // namespace tern::gguf
