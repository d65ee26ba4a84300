// tokenizer/hf_special_tokens.h — BOS/EOS/... ids, add_bos/add_eos and chat
// templates of a Hugging Face model directory (internal to hf_tokenizer.cpp).
//
// Sources, first found wins (as gguf-py's SpecialVocab reads them):
// tokenizer_config.json's {bos,eos,unk,sep,pad,cls,mask}_token (text, looked up
// among the added tokens, then the vocabulary), the post-processor template of
// tokenizer.json (its leading/trailing special token), config.json's *_token_id
// and generation_config.json's *_token_id (an int, or a list whose first id counts).
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <unordered_map>
#include <utility>
#include <vector>

#include "core/status.h"
#include "gguf/value.h"
#include "tokenizer/hf_pre_tokenizer.h"

namespace tern::hf {

// The parsed JSON files of a model directory; null json for an absent optional file.
struct ModelFiles {
  std::string dir;
  json tokenizer;
  json tokenizer_config;
  json config;
  json generation_config;
};

// Token ids by text: added tokens (by their content, first wins) before the whole vocabulary.
struct TokenIndex {
  std::vector<std::pair<std::string, int32_t>> added;
  std::unordered_map<std::string, int32_t> by_text;
  int32_t n_vocab = 0;
  int32_t find(const std::string& text) const;
};

struct SpecialTokens {
  std::vector<std::pair<std::string, uint32_t>> ids;  // GGUF key -> id, in llama.cpp's order
  std::optional<bool> add_bos;
  std::optional<bool> add_eos;
};

Result<SpecialTokens> read_special_tokens(const ModelFiles& files, const TokenIndex& index);

// tokenizer.chat_template (and tokenizer.chat_template.NAME / tokenizer.chat_templates for named
// ones) from tokenizer_config.json, else DIR/chat_template.jinja, else DIR/chat_template.json.
Result<std::vector<std::pair<std::string, gguf::Value>>> read_chat_templates(const ModelFiles& files);

}  // namespace tern::hf
