// tokenizer/vocab.h — the vocabulary as read from GGUF tokenizer.ggml.* metadata.
//
// Contract: load_vocab() checks everything it returns: array lengths agree,
// every special id is inside the vocabulary, the model kind is known. After
// that, code may index texts/scores/types with any id in [0, n_vocab()) and
// trust that bos/eos/... are -1 or valid. Plain data, immutable once loaded.
#pragma once

#include <cstdint>
#include <functional>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

#include "core/ids.h"
#include "core/status.h"

namespace tern {

namespace gguf {
class GgufFile;
}

enum class VocabKind { Spm, Bpe, WordPiece };

// llama.cpp's token types (tokenizer.ggml.token_type values).
enum class TokenType : uint8_t {
  Undefined = 0,
  Normal = 1,
  Unknown = 2,
  Control = 3,
  UserDefined = 4,
  Unused = 5,
  Byte = 6,
};

struct StringHash {
  using is_transparent = void;
  size_t operator()(std::string_view s) const { return std::hash<std::string_view>{}(s); }
};

struct Vocab {
  VocabKind kind = VocabKind::Spm;
  std::string model;  // tokenizer.ggml.model
  std::string pre;    // tokenizer.ggml.pre ("default" when absent)

  std::vector<std::string> texts;  // [n_vocab] raw vocabulary strings
  std::vector<float> scores;       // [n_vocab] 0 when the file has none
  std::vector<TokenType> types;    // [n_vocab] Normal when the file has none
  // text -> id; the first id wins for duplicated texts; empty texts are left out.
  std::unordered_map<std::string, TokenId, StringHash, std::equal_to<>> ids_by_text;
  std::vector<std::string> merges;  // BPE only, in rank order ("left right")

  TokenId bos = -1;
  TokenId eos = -1;
  TokenId unk = -1;
  TokenId sep = -1;
  TokenId eot = -1;
  TokenId eom = -1;
  bool add_bos = false;
  bool add_bos_from_file = false;  // tokenizer.ggml.add_bos_token was present
  bool add_eos = false;
  bool add_space_prefix = false;  // SPM: prepend ▁ to text that starts a sequence or follows a special token

  int n_vocab() const { return static_cast<int>(texts.size()); }
  bool valid_id(TokenId id) const { return id >= 0 && id < n_vocab(); }
  TokenId find(std::string_view text) const {
    auto it = ids_by_text.find(text);
    return it == ids_by_text.end() ? -1 : it->second;
  }
};

// Reads and validates tokenizer.ggml.*. Absent flags take the defaults of the
// model kind (SPM and WordPiece add BOS, BPE does not; SPM adds the space prefix).
Result<Vocab> load_vocab(const gguf::GgufFile& file);

}  // namespace tern
