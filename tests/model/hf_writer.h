// Test-side writers for Hugging Face checkpoints: a safetensors file from
// named tensors, and a whole HF model directory (config.json + safetensors,
// optionally sharded with model.safetensors.index.json) from a
// SyntheticModel — the inverse of what llama.cpp's converter does, written
// independently of src/model/hf_*: GGUF names back to HF names, dims reversed,
// llama's Q/K rows back to rotate-half order, Gemma norms stored as w - 1,
// RoPE factor tensors moved into config.json's rope_scaling, 3-D experts split
// into one matrix per expert (or fused as transformers 5 holds them).
//
// write_hf_dir also rewrites `sm` to exactly the model the directory holds
// (every value rounded to the dtype written, Gemma norms as (w - 1) + 1 in
// f32), so the reference over `sm` is the reference of the checkpoint.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "gguf/reader.h"
#include "synthetic_model.h"

namespace tern::test {

struct StTensor {
  std::string name;
  std::string dtype;             // "F32", "F16", "BF16", or anything else (bytes as given)
  std::vector<uint64_t> shape;   // safetensors order (last dimension contiguous)
  std::vector<uint8_t> bytes;
};

// The bytes of a safetensors file (header padded to 8 bytes, tensors in order, no gaps).
std::vector<uint8_t> safetensors_bytes(const std::vector<StTensor>& tensors);
void write_bytes(const std::string& path, const std::vector<uint8_t>& bytes);

struct HfDirOptions {
  std::string model_type;        // "" = spec.arch
  std::string dtype = "F32";     // F32, F16 or BF16
  int n_shards = 1;              // > 1: model-0000i-of-0000n.safetensors + index
  bool permute = true;           // false: write llama's Q/K rows as GGUF holds them (a "switched off" case)
  bool gemma_minus_one = true;   // false: write Gemma norms as GGUF holds them
  // MoE: false writes one 2-D matrix per expert (the checkpoints on the Hub);
  // true writes transformers 5's fused 3-D experts.gate_up_proj / experts.down_proj.
  bool fused_experts = false;
  nlohmann::json extra_config = nlohmann::json::object();  // merged into config.json last
};

// Writes DIR (created if absent) for `sm` made from `spec`; returns the config written.
nlohmann::json write_hf_dir(SyntheticModel& sm, const SynthSpec& spec, const std::string& dir,
                            const HfDirOptions& options = {});

// A llama-family GGUF (every tensor decodable) as a SyntheticModel and the
// SynthSpec of its shape, so that write_hf_dir can write it as an HF directory.
SyntheticModel synthetic_from_gguf(const gguf::GgufFile& file, SynthSpec& spec);

// A fresh empty directory under the test temp dir.
std::string fresh_dir(const std::string& name);

}  // namespace tern::test
