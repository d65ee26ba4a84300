// loadgen/token_counter.h — exact token counts from a model's tokenizer.
//
// Contract: tokenizer_counter(path) reads the tokenizer.ggml.* metadata of a
// GGUF file (a model or a vocabulary-only file; tensors are not read) and
// returns an exact TokenCounter: encode without BOS/EOS, special-token text
// treated as plain text. Errors name the file.
// Threading: the counter may be called from any thread (Tokenizer is immutable).
#pragma once

#include <string>

#include "core/status.h"
#include "loadgen/dataset.h"

namespace tern::loadgen {

Result<TokenCounter> tokenizer_counter(const std::string& gguf_path);

}  // namespace tern::loadgen
