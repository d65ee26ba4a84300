// gguf/reader.h — parse a GGUF v2/v3 file; tensor data stays memory-mapped.
//
// Contract: open() validates everything it returns — header, every metadata
// value (nested arrays included), tensor infos, alignment, and that each
// tensor's bytes lie inside the data section. A malformed file gives a Status
// naming the problem and its byte offset; parsing never reads out of bounds
// and allocates at most a small multiple of the file size (every count is
// checked against the bytes that remain before anything is reserved).
// A GgufFile is immutable after open() and safe to read from many threads.
#pragma once

#include <array>
#include <cstdint>
#include <memory>
#include <span>
#include <string>
#include <unordered_map>
#include <vector>

#include "core/mmap.h"
#include "core/status.h"
#include "gguf/gguf_format.h"
#include "gguf/value.h"

namespace tern::gguf {

struct TensorInfo {
  std::string name;
  uint32_t n_dims = 0;
  std::array<uint64_t, kMaxDims> dims{1, 1, 1, 1};  // dims[0] is the contiguous row length
  GgmlType type = GgmlType::F32;
  uint64_t offset = 0;       // relative to the data section
  uint64_t n_elements = 0;
  uint64_t n_bytes = 0;
  const uint8_t* data = nullptr;  // points into the mapping; valid while the GgufFile lives
  // The data lies in memory the GgufFile owns, not in a file mapping (a view's
  // derived tensors, see from_view): its pages must never be dropped.
  bool in_memory = false;

  uint64_t n_rows() const { return n_elements / dims[0]; }
  std::string shape_string() const;
};

class GgufFile {
 public:
  static Result<GgufFile> open(const std::string& path, const MapOptions& options = {});
  // Parses an in-memory image (tests, fuzzing). The bytes are owned by the result.
  static Result<GgufFile> from_bytes(std::vector<uint8_t> bytes);

  // A view of tensors stored elsewhere — a Hugging Face checkpoint's
  // safetensors mappings and tensors derived in memory (model/hf_model.h) —
  // as if it were a parsed file: version 3, no file image. Every tensor's
  // data, n_dims, dims, type and n_bytes must be set; they are checked as
  // open() checks a file's (known type, block-divisible rows, size, unique
  // names). `keep_alive` owns the memory the data pointers point into.
  // file_backed: whether tensors not marked in_memory lie in file mappings.
  static Result<GgufFile> from_view(std::vector<std::pair<std::string, Value>> metadata, std::vector<TensorInfo> tensors,
                                    std::shared_ptr<const void> keep_alive, bool file_backed);

  uint32_t version() const { return version_; }
  uint32_t alignment() const { return alignment_; }
  uint64_t data_offset() const { return data_offset_; }
  uint64_t file_size() const { return bytes_.size(); }
  // True when the tensor data is a mapping of a file: its pages can be dropped
  // and are read back from the file (not so for an in-memory image).
  bool file_backed() const { return mapping_ ? mapping_->file_backed() : view_file_backed_; }

  const std::vector<std::pair<std::string, Value>>& metadata() const { return kv_; }
  const Value* find(const std::string& key) const;
  const std::vector<TensorInfo>& tensors() const { return tensors_; }
  const TensorInfo* find_tensor(const std::string& name) const;

  // Typed lookups. A missing key is NotFound; a present key of the wrong type
  // or out of range is InvalidFile, naming the key and what was found.
  Result<uint64_t> get_u64(const std::string& key) const;
  Result<int64_t> get_i64(const std::string& key) const;
  Result<double> get_f64(const std::string& key) const;
  Result<bool> get_bool(const std::string& key) const;
  Result<std::string> get_string(const std::string& key) const;
  Result<const Array*> get_array(const std::string& key, ValueType elem_type) const;

  // Value of an optional key, or `fallback` when absent (a wrong type is still an error).
  Result<uint64_t> get_u64_or(const std::string& key, uint64_t fallback) const;
  Result<double> get_f64_or(const std::string& key, double fallback) const;
  Result<bool> get_bool_or(const std::string& key, bool fallback) const;

 private:
  friend class Parser;
  std::shared_ptr<MappedFile> mapping_;
  std::shared_ptr<std::vector<uint8_t>> owned_;
  std::shared_ptr<const void> keep_alive_;  // from_view: the mappings and buffers tensors point into
  bool view_file_backed_ = false;
  std::span<const uint8_t> bytes_;
  uint32_t version_ = 0;
  uint32_t alignment_ = kDefaultAlignment;
  uint64_t data_offset_ = 0;
  std::vector<std::pair<std::string, Value>> kv_;
  std::unordered_map<std::string, size_t> kv_index_;
  std::vector<TensorInfo> tensors_;
  std::unordered_map<std::string, size_t> tensor_index_;
};

}  // namespace tern::gguf
