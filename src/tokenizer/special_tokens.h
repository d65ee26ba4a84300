// tokenizer/special_tokens.h — find special-token text inside input text.
//
// Contract: partition() cuts text into plain-text segments and special-token
// segments, scanning left to right and taking the longest special token that
// starts at each position (leftmost-longest, as Hugging Face's added-token
// matcher does). Plain segments are never empty. Tokens with empty text are
// never matched. Immutable after build(); safe from many threads.
#pragma once

#include <array>
#include <cstddef>
#include <functional>
#include <string_view>
#include <vector>

#include "core/ids.h"
#include "tokenizer/vocab.h"

namespace tern {

class SpecialTokenMatcher {
 public:
  struct Segment {
    size_t begin = 0;
    size_t end = 0;
    TokenId token = -1;  // -1: plain text [begin, end)
  };

  // Matches the tokens whose type `include` accepts.
  template <typename Pred>
  static SpecialTokenMatcher build(const Vocab& vocab, Pred include) {
    SpecialTokenMatcher m;
    for (TokenId id = 0; id < vocab.n_vocab(); ++id) {
      if (!vocab.texts[id].empty() && include(vocab.types[id])) m.add(vocab, id);
    }
    m.finish(vocab);
    return m;
  }

  // Whether a match of `token` over text[begin, end) may be taken; when not,
  // shorter candidates at that position are tried, then the byte is plain.
  using AcceptFn = std::function<bool(TokenId token, size_t begin, size_t end)>;

  bool empty() const { return n_tokens_ == 0; }
  std::vector<Segment> partition(const Vocab& vocab, std::string_view text, const AcceptFn* accept = nullptr) const;

 private:
  void add(const Vocab& vocab, TokenId id);
  void finish(const Vocab& vocab);

  std::array<std::vector<TokenId>, 256> by_first_byte_;  // each longest text first
  size_t n_tokens_ = 0;
};

}  // namespace tern
