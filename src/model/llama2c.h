// model/llama2c.h — convert a llama2.c checkpoint and tokenizer to GGUF.
//
// Input: the legacy llama2.c fp32 checkpoint (7 int32 header fields, then
// float arrays in a fixed order) and its tokenizer.bin. Output: a standard
// GGUF v3 `llama` model with F32 weights and an SPM-style vocabulary. No Q/K
// permutation is needed: llama2.c already rotates adjacent pairs, which is
// what GGUF `llama` files use.
#pragma once

#include <string>

#include "core/status.h"

namespace tern {

struct Llama2cConvertOptions {
  std::string model_path;
  std::string vocab_path;
  std::string out_path;
  std::string name;  // general.name; defaults to the model file's stem
};

Status convert_llama2c(const Llama2cConvertOptions& options);

}  // namespace tern
