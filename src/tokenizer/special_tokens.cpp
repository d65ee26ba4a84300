#include "tokenizer/special_tokens.h"

#include <algorithm>

namespace tern {

void SpecialTokenMatcher::add(const Vocab& vocab, TokenId id) {
  by_first_byte_[static_cast<uint8_t>(vocab.texts[id][0])].push_back(id);
  ++n_tokens_;
}

void SpecialTokenMatcher::finish(const Vocab& vocab) {
  for (auto& ids : by_first_byte_) {
    std::stable_sort(ids.begin(), ids.end(),
                     [&](TokenId a, TokenId b) { return vocab.texts[a].size() > vocab.texts[b].size(); });
  }
}

std::vector<SpecialTokenMatcher::Segment> SpecialTokenMatcher::partition(const Vocab& vocab, std::string_view text,
                                                                         const AcceptFn* accept) const {
  std::vector<Segment> segments;
  size_t plain_begin = 0;
  for (size_t i = 0; i < text.size();) {
    TokenId found = -1;
    for (TokenId id : by_first_byte_[static_cast<uint8_t>(text[i])]) {
      const std::string& t = vocab.texts[id];
      if (text.size() - i >= t.size() && text.compare(i, t.size(), t) == 0 && (!accept || (*accept)(id, i, i + t.size()))) {
        found = id;
        break;
      }
    }
    if (found < 0) {
      ++i;
      continue;
    }
    if (i > plain_begin) segments.push_back({plain_begin, i, -1});
    const size_t end = i + vocab.texts[found].size();
    segments.push_back({i, end, found});
    i = plain_begin = end;
  }
  if (plain_begin < text.size()) segments.push_back({plain_begin, text.size(), -1});
  return segments;
}

}  // namespace tern
