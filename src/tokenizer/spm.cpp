#include "tokenizer/spm.h"

#include <queue>
#include <unordered_map>

#include "core/utf8.h"

namespace tern {

namespace {

constexpr std::string_view kSpace = "\xE2\x96\x81";  // U+2581
constexpr size_t kMaxCachedWordBytes = 256;
constexpr size_t kMaxCacheEntries = 1u << 16;

struct Symbol {
  int32_t prev = -1;
  int32_t next = -1;
  uint32_t begin = 0;  // byte offset into the text
  uint32_t len = 0;    // 0 once merged into its left neighbour
};

struct Bigram {
  float score = 0;
  int32_t left = 0;
  int32_t right = 0;
  uint32_t len = 0;  // left.len + right.len when queued; a mismatch later means stale
};

struct BigramOrder {
  bool operator()(const Bigram& a, const Bigram& b) const {
    if (a.score != b.score) return a.score < b.score;  // highest score on top
    return a.left > b.left;                            // then leftmost
  }
};

bool is_mergeable_type(TokenType t) {
  return t == TokenType::Normal || t == TokenType::UserDefined || t == TokenType::Unused ||
         t == TokenType::Undefined;
}

}  // namespace

int SpmModel::parse_byte_token(std::string_view text) {
  if (text.size() != 6 || text.substr(0, 3) != "<0x" || text[5] != '>') return -1;
  int value = 0;
  for (size_t i = 3; i < 5; ++i) {
    const char c = text[i];
    int d = -1;
    if (c >= '0' && c <= '9')
      d = c - '0';
    else if (c >= 'A' && c <= 'F')
      d = c - 'A' + 10;
    else if (c >= 'a' && c <= 'f')
      d = c - 'a' + 10;
    if (d < 0) return -1;
    value = value * 16 + d;
  }
  return value;
}

namespace {

// True when ▁ occurs in text only within its leading run of ▁.
bool spaces_only_lead(std::string_view text) {
  size_t i = 0;
  while (text.substr(i, kSpace.size()) == kSpace) i += kSpace.size();
  return text.find(kSpace, i) == std::string_view::npos;
}

}  // namespace

SpmModel SpmModel::build(const Vocab& vocab) {
  SpmModel m;
  m.byte_ids_.fill(-1);
  m.split_words_ = true;
  for (TokenId id = 0; id < vocab.n_vocab(); ++id) {
    const int b = parse_byte_token(vocab.texts[id]);
    if (b >= 0 && m.byte_ids_[b] < 0) m.byte_ids_[b] = id;
    if (is_mergeable_type(vocab.types[id]) && !spaces_only_lead(vocab.texts[id])) m.split_words_ = false;
  }
  return m;
}

void SpmModel::encode(const Vocab& vocab, std::string_view text, std::vector<TokenId>& out) const {
  if (!split_words_) {
    encode_chunk(vocab, text, out);
    return;
  }
  // No piece has ▁ after another character, so no merge crosses the start of
  // a ▁ run: each word (a ▁ run and what follows up to the next run) is
  // encoded alone, which keeps the heaps small and lets repeated words hit the cache.
  std::unordered_map<std::string_view, std::pair<size_t, size_t>> cache;  // word -> [offset, count) in cached
  std::vector<TokenId> cached;
  size_t begin = 0;
  while (begin < text.size()) {
    size_t end = begin;
    while (text.substr(end, kSpace.size()) == kSpace) end += kSpace.size();
    end = text.find(kSpace, end);
    if (end == std::string_view::npos) end = text.size();
    const std::string_view word = text.substr(begin, end - begin);
    begin = end;
    if (auto it = cache.find(word); it != cache.end()) {
      out.insert(out.end(), cached.begin() + it->second.first,
                 cached.begin() + it->second.first + it->second.second);
      continue;
    }
    const size_t first = out.size();
    encode_chunk(vocab, word, out);
    if (word.size() <= kMaxCachedWordBytes) {
      if (cache.size() >= kMaxCacheEntries) {
        cache.clear();
        cached.clear();
      }
      cache.emplace(word, std::make_pair(cached.size(), out.size() - first));
      cached.insert(cached.end(), out.begin() + first, out.end());
    }
  }
}

// The token a piece may merge into: control, unknown and byte tokens are never
// produced by merging (SentencePiece only merges into ordinary pieces).
TokenId SpmModel::mergeable(const Vocab& vocab, std::string_view text) const {
  const TokenId id = vocab.find(text);
  if (id < 0 || !is_mergeable_type(vocab.types[id])) return -1;
  return id;
}

void SpmModel::append_piece(const Vocab& vocab, std::string_view piece, std::vector<TokenId>& out) const {
  const TokenId id = mergeable(vocab, piece);
  if (id >= 0) {
    out.push_back(id);
    return;
  }
  for (char c : piece) {
    const TokenId b = byte_ids_[static_cast<uint8_t>(c)];
    if (b >= 0)
      out.push_back(b);
    else if (vocab.unk >= 0)
      out.push_back(vocab.unk);
  }
}

void SpmModel::encode_chunk(const Vocab& vocab, std::string_view text, std::vector<TokenId>& out) const {
  if (text.empty()) return;
  // [n_symbols] one per UTF-8 character (an invalid byte is a character of its own).
  std::vector<Symbol> symbols;
  symbols.reserve(text.size());
  for (size_t i = 0; i < text.size();) {
    const int len = utf8::sequence_length(static_cast<uint8_t>(text[i]));
    const size_t n = std::min<size_t>(len > 0 ? static_cast<size_t>(len) : 1, text.size() - i);
    const auto idx = static_cast<int32_t>(symbols.size());
    symbols.push_back({idx - 1, -1, static_cast<uint32_t>(i), static_cast<uint32_t>(n)});
    if (idx > 0) symbols[idx - 1].next = idx;
    i += n;
  }

  std::priority_queue<Bigram, std::vector<Bigram>, BigramOrder> queue;
  auto try_add = [&](int32_t left, int32_t right) {
    if (left < 0 || right < 0) return;
    const Symbol& l = symbols[left];
    const Symbol& r = symbols[right];
    const TokenId id = mergeable(vocab, text.substr(l.begin, l.len + r.len));
    if (id < 0) return;
    queue.push({vocab.scores[id], left, right, l.len + r.len});
  };
  for (size_t i = 1; i < symbols.size(); ++i) try_add(static_cast<int32_t>(i - 1), static_cast<int32_t>(i));

  while (!queue.empty()) {
    const Bigram top = queue.top();
    queue.pop();
    Symbol& l = symbols[top.left];
    Symbol& r = symbols[top.right];
    // Sizes only grow and a symbol's right neighbour only changes when it
    // absorbs it, so unchanged lengths mean the pair is still adjacent and current.
    if (l.len == 0 || r.len == 0 || l.len + r.len != top.len || l.next != top.right) continue;
    l.len += r.len;
    r.len = 0;
    l.next = r.next;
    if (r.next >= 0) symbols[r.next].prev = top.left;
    try_add(l.prev, top.left);
    try_add(top.left, l.next);
  }

  for (int32_t i = 0; i >= 0; i = symbols[i].next)
    append_piece(vocab, text.substr(symbols[i].begin, symbols[i].len), out);
}

std::string spm_escape_spaces(std::string_view text) {
  std::string out;
  out.reserve(text.size() + text.size() / 4);
  for (char c : text) {
    if (c == ' ')
      out += "\xE2\x96\x81";
    else
      out.push_back(c);
  }
  return out;
}

}  // namespace tern
