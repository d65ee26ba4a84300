// gguf/safetensors.h — read Hugging Face safetensors files, memory-mapped.
//
//   file    := u64 N (little-endian), header[N] (UTF-8 JSON), data
//   header  := { "__metadata__": {str: str} (optional),
//                NAME: {"dtype": "F16", "shape": [d0, d1, ...], "data_offsets": [begin, end]}, ... }
//   data    := the tensors' bytes, row-major (the last dimension contiguous),
//              little-endian; [begin, end) are relative to the start of data
//
// Contract: open() trusts no number in the file. The header must fit the file
// (and kMaxHeaderBytes); every tensor's range lies inside the data area, its
// size is shape × dtype size (no overflow), ranges do not overlap, and each
// tensor starts at a multiple of its element size in the file (the kernels
// read F16/F32 values in place). Any dtype in the format is accepted here so
// that a checkpoint can be listed; only F32, F16, BF16 and the FP8 dtypes convert
// to ggml types (ggml_type(); FP8 as tern's F8 types), and users of a tensor of
// another dtype get an error naming it.
// A SafetensorsFile is immutable after open() and safe to read from many threads.
//
// A checkpoint (SafetensorsCheckpoint) is a directory with model.safetensors,
// or with model.safetensors.index.json whose weight_map names the shard
// holding each tensor (shards are plain file names in the same directory).
#pragma once

#include <cstdint>
#include <map>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <unordered_map>
#include <vector>

#include "core/mmap.h"
#include "core/status.h"
#include "gguf/gguf_format.h"

namespace tern::safetensors {

inline constexpr uint64_t kMaxHeaderBytes = uint64_t{100} << 20;  // the limit Hugging Face's reader sets

struct Tensor {
  std::string name;
  std::string dtype;              // as written: "F16", "BF16", "F32", "I64", ...
  uint32_t elem_bytes = 0;
  std::vector<uint64_t> shape;    // row-major: shape.back() is the contiguous dimension
  std::span<const uint8_t> bytes; // inside the mapping; valid while the file lives
  uint64_t n_elements = 0;

  // The ggml type of F32, F16, BF16 and FP8 data (FP8: tern's F8 types); nullopt for every other dtype.
  std::optional<gguf::GgmlType> ggml_type() const;
  std::string shape_string() const;  // "[2048, 512]" (safetensors order)
};

class SafetensorsFile {
 public:
  static Result<SafetensorsFile> open(const std::string& path);
  // Parses an in-memory image (tests, fuzzing); the bytes are owned by the result.
  static Result<SafetensorsFile> from_bytes(std::vector<uint8_t> bytes);

  const std::vector<Tensor>& tensors() const { return tensors_; }
  const Tensor* find(const std::string& name) const;
  const std::map<std::string, std::string>& metadata() const { return metadata_; }
  // True when the data is a mapping of a file (pages can be dropped and read back).
  bool file_backed() const { return mapping_ != nullptr; }

 private:
  Status parse();
  std::shared_ptr<MappedFile> mapping_;
  std::shared_ptr<std::vector<uint8_t>> owned_;
  std::span<const uint8_t> bytes_;
  std::vector<Tensor> tensors_;
  std::unordered_map<std::string, size_t> index_;
  std::map<std::string, std::string> metadata_;
};

// Every tensor of a checkpoint directory, each found in its shard.
class SafetensorsCheckpoint {
 public:
  // DIR/model.safetensors.index.json (sharded) or DIR/model.safetensors.
  static Result<SafetensorsCheckpoint> open(const std::string& dir);

  const Tensor* find(const std::string& name) const;
  // Every tensor name, sorted.
  std::vector<std::string> names() const;
  size_t n_shards() const { return shards_.size(); }

 private:
  std::vector<std::shared_ptr<SafetensorsFile>> shards_;
  std::map<std::string, const Tensor*> tensors_;  // points into shards_
};

}  // namespace tern::safetensors
