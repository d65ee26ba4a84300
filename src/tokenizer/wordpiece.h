// tokenizer/wordpiece.h — BERT WordPiece as llama.cpp converts it to GGUF.
//
// Contract: GGUF BERT vocabularies spell a word-initial piece with a leading
// U+2581 ("▁hello") and a continuation piece bare ("llo", HF's "##llo").
// encode() normalises like BERT's uncased basic tokenizer (NFD, drop accents
// and control characters, lower case), splits on whitespace and isolates
// punctuation and CJK ideographs, then takes the longest vocabulary match
// from the left; a word with an unmatched remainder becomes the unknown token.
// Immutable after build(); safe from many threads.
#pragma once

#include <string_view>
#include <vector>

#include "core/ids.h"
#include "tokenizer/vocab.h"

namespace tern {

class WordPieceModel {
 public:
  static WordPieceModel build(const Vocab& vocab);
  void encode(const Vocab& vocab, std::string_view text, std::vector<TokenId>& out) const;

 private:
  size_t max_token_bytes_ = 0;
};

}  // namespace tern
