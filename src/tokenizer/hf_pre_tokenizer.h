// tokenizer/hf_pre_tokenizer.h — what a tokenizer.json's model, normalizer and
// pre-tokenizer mean in GGUF terms (internal to hf_tokenizer.cpp).
//
// Hugging Face describes the pre-tokenizer as data (Split regexes, Digits,
// ByteLevel, Metaspace ...); GGUF names it (tokenizer.ggml.pre) and our
// pre_tokenizer_rules.cpp implements each name by hand. The mapping here
// compares the steps, spelled as regexes, with the regexes each of our rule
// sets implements; anything else is refused with the patterns named, because a
// near miss would tokenize differently without any error.
#pragma once

#include <string>

#include "core/json.h"
#include "core/status.h"

namespace tern::hf {

using json = ::tern::Json;

// Small non-throwing accessors: nullptr / fallback when absent or of another type.
const json* member(const json& obj, const char* key);
const std::string* string_member(const json& obj, const char* key);
bool bool_member(const json& obj, const char* key, bool fallback);
// Parses PATH. Absent: NotFound when required, else a null json. Malformed: InvalidFile naming
// the path and the parser's line and column.
Result<json> read_json_file(const std::string& path, bool required);

struct TokenizerKind {
  std::string model;              // tokenizer.ggml.model: "gpt2", "llama" or "bert"
  std::string pre;                // tokenizer.ggml.pre
  bool add_space_prefix = false;  // "llama": text starts with ▁ (Prepend / Metaspace prepend)
};

// From tokenizer.json's "model", "normalizer" and "pre_tokenizer".
Result<TokenizerKind> classify_tokenizer(const json& tokenizer);

}  // namespace tern::hf
