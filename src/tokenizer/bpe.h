// tokenizer/bpe.h — byte-level BPE (GPT-2 style) with ranked merges.
//
// Contract: encode() pre-tokenizes the text into words, spells each word's
// bytes with the GPT-2 byte mapping and applies tokenizer.ggml.merges by rank
// (lowest first, ties leftmost) inside the word. Merges are looked up on pairs
// of token ids; a merge whose parts or result are not tokens can never apply
// and is ignored. A byte with no token of its own (some vocabularies lack the
// never-valid UTF-8 bytes C0, C1, F5..FF) is dropped unless the vocabulary has
// an Unknown-type token. Words repeated within one call are encoded once (a per-call
// cache, so no state is shared). Immutable after build(); safe from many threads.
#pragma once

#include <array>
#include <cstdint>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

#include "core/ids.h"
#include "core/status.h"
#include "tokenizer/pre_tokenizer.h"
#include "tokenizer/vocab.h"

namespace tern {

class BpeModel {
 public:
  // Parses the merges; a merge string without a separating space is InvalidFile.
  static Result<BpeModel> build(const Vocab& vocab, PreTokenizer pre);
  void encode(const Vocab& vocab, std::string_view text, std::vector<TokenId>& out) const;

  const PreTokenizer& pre_tokenizer() const { return pre_; }
  size_t n_merges_ignored() const { return n_merges_ignored_; }

 private:
  struct Merge {
    int32_t rank = 0;
    TokenId result = -1;
  };
  struct Scratch;
  void encode_word(const Vocab& vocab, std::string_view word, Scratch& scratch,
                   std::vector<TokenId>& out) const;
  const Merge* find_merge(TokenId left, TokenId right) const;

  PreTokenizer pre_;
  std::unordered_map<uint64_t, Merge> merges_;  // key: left id << 32 | right id
  std::array<TokenId, 256> byte_ids_{};         // token spelling each single byte, -1 when absent
  size_t n_merges_ignored_ = 0;
  TokenId unk_ = -1;  // stands in for a byte with no token; -1: the byte is dropped
};

}  // namespace tern
