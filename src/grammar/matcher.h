// grammar/matcher.h — runs a Grammar (grammar/grammar.h) over generated
// bytes, one sequence at a time: which tokens may come next (a mask over the
// vocabulary), accepting the chosen token, and rolling back tokens that
// speculative decoding rejected.
//
// How: a pushdown recogniser. The state is the set of parse stacks that are
// alive after the bytes so far; each stack's top is a byte-set symbol waiting
// for the next byte (rules are expanded until a byte set is on top, which
// always ends because the grammar has no left recursion). Stacks are
// persistent linked lists of (alternative, position, parent) nodes,
// hash-consed, so identical stacks are one id, sets of stacks are sorted id
// vectors, and a byte step shares every unchanged tail. The end marker kEnd
// in a set means "the root rule may end here".
//
// Masks walk a byte trie of the vocabulary (TokenTrie), advancing the stack
// set one byte per trie edge, so tokens sharing a prefix share the work and a
// dead prefix prunes its whole subtree. Because stacks are hash-consed, the
// same stack comes back whenever generation returns to the same place — every
// character of a JSON string, every digit of a number — so the tokens one
// stack allows are kept per stack id (kMaskCacheEntries, most recent), and a
// state of a few stacks is the OR of their cached masks: a trie walk only
// the first time a stack is seen.
//
// Counted repetitions ({m,n}, a Repeat symbol) keep their count in the stack
// node, so a 400-character string is 400 distinct stacks. Their masks are
// cached under a canonical stack instead: a token has at most max_len() bytes
// and each copy of a repeated body takes at least one, so a count more than
// max_len() below min (or, once min is reached, more than max_len() below
// max) allows exactly the tokens any other such count allows — the canonical
// stack clamps it (canonical()), and the long middle of a bounded string
// costs one trie walk, not one per character. A MaskCache shared by the
// matchers of one grammar (share_masks) makes that one walk per batch.
//
// Ambiguous grammars can multiply stacks; a step that would hold more than
// kMaxStacks is refused as if the byte did not match, and overflowed() says
// so, instead of letting memory grow without bound.
//
// Threading: one thread at a time per Matcher; copies are independent (a
// sequence forked for n > 1 copies its matcher).
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

#include "grammar/grammar.h"
#include "grammar/mask_cache.h"

namespace tern::grammar {

// The vocabulary as a byte trie: token id -> its bytes as generated text
// (pieces). Tokens with no bytes (special/control tokens) are not in the trie.
class TokenTrie {
 public:
  explicit TokenTrie(const std::vector<std::string>& pieces);
  size_t n_tokens() const { return n_tokens_; }
  // The longest piece, in bytes.
  size_t max_len() const { return max_len_; }

  struct Node {
    uint32_t first_edge = 0, n_edges = 0;    // into edges_
    uint32_t first_token = 0, n_tokens = 0;  // into tokens_: ids whose piece ends here
  };
  struct Edge {
    uint8_t byte = 0;
    uint32_t child = 0;
  };
  const Node& node(uint32_t i) const { return nodes_[i]; }
  const Edge& edge(uint32_t i) const { return edges_[i]; }
  int32_t token(uint32_t i) const { return tokens_[i]; }

 private:
  std::vector<Node> nodes_;  // [0] is the root
  std::vector<Edge> edges_;
  std::vector<int32_t> tokens_;
  size_t n_tokens_ = 0;
  size_t max_len_ = 0;
};

// What constrained sampling needs of a vocabulary: each token's bytes as
// generated text ("" for control tokens, which no grammar matches) and their trie.
struct TokenVocab {
  explicit TokenVocab(std::vector<std::string> token_pieces) : pieces(std::move(token_pieces)), trie(pieces) {}
  std::vector<std::string> pieces;
  TokenTrie trie;
};

class Matcher {
 public:
  static constexpr size_t kMaxStacks = 1u << 14;
  static constexpr size_t kMaskCacheEntries = 256;
  static constexpr size_t kMaxCachedStacks = 64;  // more stacks than this: one joint trie walk instead
  static constexpr uint32_t kEnd = UINT32_MAX;

  explicit Matcher(std::shared_ptr<const Grammar> grammar);

  // Feeds the bytes of one token. False, with the state unchanged, when the
  // grammar cannot continue with all of them.
  bool accept(std::string_view bytes);
  // Undoes the last n accept() calls that succeeded (n <= n_accepted()).
  void rollback(size_t n);
  size_t n_accepted() const { return history_.size() - 1; }
  // The bytes so far form a complete sentence of the grammar (end-of-text may come).
  bool can_end() const;
  // No byte can follow (the sentence is complete and closed).
  bool finished() const;
  // Whether accept(bytes) would succeed; no state change.
  bool allows(std::string_view bytes);
  // The tokens that may come next as a bit set: bit t of word t / 64 for token
  // t, (trie.n_tokens() + 63) / 64 words, bits past n_tokens() zero. Valid
  // until the next call on this matcher.
  const std::vector<uint64_t>& mask_bits(const TokenTrie& trie);
  // The same as bytes: allowed[id] = 1 or 0, resized to trie.n_tokens().
  void mask(const TokenTrie& trie, std::vector<uint8_t>& allowed);
  // Looks masks up in (and adds them to) `cache`, shared with other matchers
  // of this grammar; it must only ever see masks over one trie.
  void share_masks(std::shared_ptr<MaskCache> cache) { shared_ = std::move(cache); }
  // A step was refused because the grammar was too ambiguous (kMaxStacks).
  bool overflowed() const { return overflowed_; }

 private:
  struct Node {
    uint32_t alt, idx, parent;  // waiting for symbol idx of alternative alt; then continue with parent
    uint32_t count;             // when that symbol is a Repeat: the copies matched so far
  };
  static size_t hash(const Node& n) {
    uint64_t h = ((uint64_t{n.alt} << 32) | n.idx) * 0x9E3779B97F4A7C15ull;
    h ^= ((uint64_t{n.parent} << 32) | n.count) * 0xC2B2AE3D27D4EB4Full;
    return static_cast<size_t>(h ^ (h >> 31));
  }
  using Set = std::vector<uint32_t>;  // sorted, unique stack ids (and kEnd)

  // The stack continuing at symbol idx of alt, then parent (parent itself when idx is past the end).
  uint32_t cont(uint32_t alt, uint32_t idx, uint32_t parent, uint32_t count = 0);
  // The stack whose mask stack x shares: x with each repetition count clamped
  // (see the header comment); x itself when the grammar has no Repeat.
  uint32_t canonical(uint32_t x, uint32_t max_len);
  // Appends the stacks with a byte set on top that `c` expands to.
  void expand(uint32_t c, Set& out);
  // next = the stacks after byte b from `from`. False on overflow.
  bool step(const Set& from, uint8_t b, Set& next);
  // Sets bit t of `bits` for each trie token that some stack of `from` takes.
  void walk_trie(const TokenTrie& trie, const Set& from, std::vector<uint64_t>& bits);
  // The tokens stack x alone takes, cached.
  const std::vector<uint64_t>& stack_mask(const TokenTrie& trie, uint32_t x);
  // Stack x spelled out (alternative, position, count from the top down): a
  // key any matcher of the grammar computes the same way.
  std::string stack_key(uint32_t x) const;

  std::shared_ptr<const Grammar> g_;
  std::vector<Node> nodes_;
  // Hash-consing: open addressing over node ids (kEnd = empty slot), a power
  // of two at most half full — every byte step looks nodes up, and a
  // node-based map spent more in malloc and pointer chasing than the lookup.
  std::vector<uint32_t> ids_;
  std::unordered_map<uint32_t, Set> expanded_;  // memo of expand() per continuation
  std::vector<Set> history_;                    // [0] initial; back() current
  bool overflowed_ = false;
  std::vector<uint32_t> work_;  // scratch of expand()
  const TokenTrie* cached_trie_ = nullptr;  // the trie mask_cache_ was built with
  std::unordered_map<uint32_t, MaskCache::Bits> mask_cache_;  // by canonical stack id
  std::shared_ptr<MaskCache> shared_;                          // null: masks are this matcher's own
  std::unordered_map<uint32_t, uint32_t> canonical_;                 // memo of canonical()
  std::vector<uint32_t> mask_order_;  // cached stack ids, least recently used first
  std::vector<uint64_t> bits_;        // scratch of mask(): the OR of the stacks' masks
};

}  // namespace tern::grammar
