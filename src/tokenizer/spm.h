// tokenizer/spm.h — SentencePiece BPE encoding the way llama.cpp does it.
//
// Contract: encode() takes text whose spaces are already escaped to U+2581
// (and the dummy prefix added, if any). It starts from UTF-8 characters and
// repeatedly merges the adjacent pair whose concatenation is a vocabulary
// piece with the highest score (ties: leftmost), using a priority queue so a
// long text costs O(n log n); when the vocabulary allows it, each ▁-word is
// merged on its own (same result, see split_words_). Pieces left that are not tokens fall back to
// <0xNN> byte tokens, else to the unknown token (else they are dropped).
// Immutable after build(); safe from many threads.
#pragma once

#include <array>
#include <string_view>
#include <vector>

#include "core/ids.h"
#include "tokenizer/vocab.h"

namespace tern {

class SpmModel {
 public:
  static SpmModel build(const Vocab& vocab);
  void encode(const Vocab& vocab, std::string_view escaped, std::vector<TokenId>& out) const;

  // The byte a <0xNN> token stands for, or -1.
  static int parse_byte_token(std::string_view text);

 private:
  void encode_chunk(const Vocab& vocab, std::string_view text, std::vector<TokenId>& out) const;
  TokenId mergeable(const Vocab& vocab, std::string_view text) const;
  void append_piece(const Vocab& vocab, std::string_view piece, std::vector<TokenId>& out) const;

  std::array<TokenId, 256> byte_ids_{};  // <0xNN> token of each byte, -1 when absent
  bool split_words_ = false;             // no piece has ▁ after another character: words encode alone
};

// ' ' -> U+2581 ("▁"), the SentencePiece spelling of a space.
std::string spm_escape_spaces(std::string_view text);

}  // namespace tern
