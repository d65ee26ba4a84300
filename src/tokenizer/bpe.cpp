#include "tokenizer/bpe.h"

#include <algorithm>
#include <queue>

#include "tokenizer/byte_level.h"
#include "core/utf8.h"

namespace tern {

namespace {

uint64_t pair_key(TokenId left, TokenId right) {
  return (static_cast<uint64_t>(static_cast<uint32_t>(left)) << 32) | static_cast<uint32_t>(right);
}

struct Symbol {
  TokenId id = -1;  // -1: a byte with no token; it never merges
  int32_t prev = -1;
  int32_t next = -1;
  bool alive = true;
};

struct Candidate {
  int32_t rank = 0;
  int32_t left = 0;
  TokenId left_id = -1;
  TokenId right_id = -1;
  TokenId result = -1;
};

struct CandidateOrder {
  bool operator()(const Candidate& a, const Candidate& b) const {
    if (a.rank != b.rank) return a.rank > b.rank;  // lowest rank on top
    return a.left > b.left;                        // then leftmost
  }
};

// Words longer than this are not cached: they rarely repeat.
constexpr size_t kMaxCachedWordBytes = 256;
constexpr size_t kMaxCacheEntries = 1u << 16;

}  // namespace

struct BpeModel::Scratch {
  std::vector<Symbol> symbols;
  std::vector<Candidate> heap;
  // word -> [offset, count) into ids; keys point into the text being encoded.
  std::unordered_map<std::string_view, std::pair<uint32_t, uint32_t>> cache;
  std::vector<TokenId> cached_ids;
};

Result<BpeModel> BpeModel::build(const Vocab& vocab, PreTokenizer pre) {
  BpeModel m;
  m.pre_ = std::move(pre);
  // Many byte-level vocabularies name <|endoftext|> as their unknown token; a
  // byte the vocabulary cannot spell is dropped (as llama.cpp does) rather than
  // turned into an end-of-text marker. Only a real Unknown-type token stands in.
  if (vocab.unk >= 0 && vocab.types[vocab.unk] == TokenType::Unknown) m.unk_ = vocab.unk;
  for (int b = 0; b < 256; ++b)
    m.byte_ids_[b] = vocab.find(utf8::encode(byte_level::byte_to_codepoint(static_cast<uint8_t>(b))));
  m.merges_.reserve(vocab.merges.size());
  for (size_t rank = 0; rank < vocab.merges.size(); ++rank) {
    const std::string& s = vocab.merges[rank];
    // Parts never contain a space in a byte-level vocabulary; searching from 1
    // still allows a part that is a bare space.
    const size_t sep = s.size() > 1 ? s.find(' ', 1) : std::string::npos;
    if (sep == std::string::npos || sep + 1 >= s.size())
      return error(ErrorKind::InvalidFile, "tokenizer.ggml.merges[" + std::to_string(rank) + "] = '" + s +
                                               "' is not two tokens separated by a space");
    const std::string_view left(s.data(), sep);
    const std::string_view right(s.data() + sep + 1, s.size() - sep - 1);
    const TokenId l = vocab.find(left);
    const TokenId r = vocab.find(right);
    const TokenId result = vocab.find(std::string(left) + std::string(right));
    if (l < 0 || r < 0 || result < 0) {
      ++m.n_merges_ignored_;
      continue;
    }
    m.merges_.emplace(pair_key(l, r), Merge{static_cast<int32_t>(rank), result});  // the first rank wins
  }
  return m;
}

const BpeModel::Merge* BpeModel::find_merge(TokenId left, TokenId right) const {
  if (left < 0 || right < 0) return nullptr;
  auto it = merges_.find(pair_key(left, right));
  return it == merges_.end() ? nullptr : &it->second;
}

void BpeModel::encode(const Vocab& vocab, std::string_view text, std::vector<TokenId>& out) const {
  Scratch scratch;
  for (const ByteRange& w : pre_.split(text)) {
    const std::string_view word = text.substr(w.begin, w.end - w.begin);
    const bool cacheable = word.size() <= kMaxCachedWordBytes;
    if (cacheable) {
      auto it = scratch.cache.find(word);
      if (it != scratch.cache.end()) {
        const auto [offset, count] = it->second;
        out.insert(out.end(), scratch.cached_ids.begin() + offset,
                   scratch.cached_ids.begin() + offset + count);
        continue;
      }
    }
    const size_t first = out.size();
    encode_word(vocab, word, scratch, out);
    if (cacheable) {
      if (scratch.cache.size() >= kMaxCacheEntries) {
        scratch.cache.clear();
        scratch.cached_ids.clear();
      }
      const auto offset = static_cast<uint32_t>(scratch.cached_ids.size());
      scratch.cached_ids.insert(scratch.cached_ids.end(), out.begin() + first, out.end());
      scratch.cache.emplace(word, std::make_pair(offset, static_cast<uint32_t>(out.size() - first)));
    }
  }
}

void BpeModel::encode_word(const Vocab& vocab, std::string_view word, Scratch& scratch,
                           std::vector<TokenId>& out) const {
  if (pre_.ignore_merges()) {
    const TokenId whole = vocab.find(byte_level::encode(word));
    if (whole >= 0) {
      out.push_back(whole);
      return;
    }
  }
  // [n_symbols] one per byte to start with: each byte is one mapped character.
  std::vector<Symbol>& sym = scratch.symbols;
  sym.clear();
  for (size_t i = 0; i < word.size(); ++i) {
    const auto idx = static_cast<int32_t>(i);
    sym.push_back(
        {byte_ids_[static_cast<uint8_t>(word[i])], idx - 1, i + 1 < word.size() ? idx + 1 : -1, true});
  }
  std::vector<Candidate>& heap = scratch.heap;
  heap.clear();
  auto push = [&](int32_t left) {
    if (left < 0 || sym[left].next < 0) return;
    const Merge* m = find_merge(sym[left].id, sym[sym[left].next].id);
    if (m == nullptr) return;
    heap.push_back({m->rank, left, sym[left].id, sym[sym[left].next].id, m->result});
    std::push_heap(heap.begin(), heap.end(), CandidateOrder{});
  };
  for (int32_t i = 0; i + 1 < static_cast<int32_t>(sym.size()); ++i) push(i);

  while (!heap.empty()) {
    std::pop_heap(heap.begin(), heap.end(), CandidateOrder{});
    const Candidate c = heap.back();
    heap.pop_back();
    Symbol& l = sym[c.left];
    // A symbol's id changes exactly when it absorbs its right neighbour, and its
    // neighbour's id changes when that one merges on: equal ids mean current.
    if (!l.alive || l.id != c.left_id || l.next < 0 || sym[l.next].id != c.right_id) continue;
    Symbol& r = sym[l.next];
    l.id = c.result;
    r.alive = false;
    l.next = r.next;
    if (r.next >= 0) sym[r.next].prev = c.left;
    push(l.prev);
    push(c.left);
  }

  for (int32_t i = 0; i >= 0 && i < static_cast<int32_t>(sym.size()); i = sym[i].next) {
    if (sym[i].id >= 0)
      out.push_back(sym[i].id);
    else if (unk_ >= 0)
      out.push_back(unk_);
  }
}

}  // namespace tern
