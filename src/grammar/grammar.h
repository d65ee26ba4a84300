// grammar/grammar.h — a context-free grammar over bytes: what GBNF text, JSON
// Schema and regular expressions compile to, and what the matcher
// (grammar/matcher.h) runs.
//
// Why bytes, not code points: tokens are byte strings, and a token may end in
// the middle of a UTF-8 character. Compiling every character class to UTF-8
// byte sequences once (a class of code points becomes an alternation of byte
// range sequences) lets the matcher advance one byte at a time with no
// partial-character state, and makes "invalid UTF-8 is never produced" a
// property of the grammar rather than a check at run time.
//
// Shape: rules are alternations of alternatives; an alternative is a sequence
// of symbols, each a byte set (one byte from the set), a reference to a rule,
// or a counted repetition of a rule. The empty alternative matches the empty
// string. Builders desugar grouping, `?`, `*` and `+` into extra rules; a
// repetition with counts ({m,n}: a string's minLength, an array's maxItems)
// stays one symbol the matcher counts through, so `char{0,400}` is not 400
// grammar positions — every character would be a state seen for the first
// time, and its token mask a fresh walk of the vocabulary.
//
// Checks (GrammarBuilder::finish): every referenced rule is defined, the root
// exists, no rule is left-recursive (directly or through rules that can match
// the empty string) — a left-recursive rule would make the matcher's
// expansion loop forever — and the grammar stays within size limits.
#pragma once

#include <array>
#include <cstdint>
#include <string>
#include <string_view>
#include <unordered_map>
#include <utility>
#include <vector>

#include "core/status.h"

namespace tern::grammar {

// 256 bits: which byte values a terminal accepts.
struct ByteSet {
  std::array<uint64_t, 4> bits{};
  bool has(uint8_t b) const { return (bits[b >> 6] >> (b & 63)) & 1; }
  void add(uint8_t b) { bits[b >> 6] |= uint64_t{1} << (b & 63); }
  void add_range(uint8_t lo, uint8_t hi) {
    for (unsigned b = lo; b <= hi; ++b) add(static_cast<uint8_t>(b));
  }
  bool operator==(const ByteSet&) const = default;
};

struct Symbol {
  enum class Kind : uint8_t { Bytes, Rule, Repeat };
  Kind kind = Kind::Bytes;
  // Bytes: index into Grammar::byte_sets; Rule: into Grammar::rules; Repeat: into Grammar::repeats
  uint32_t id = 0;
  bool operator==(const Symbol&) const = default;
};

struct Rule {
  std::string name;
  std::vector<uint32_t> alts;  // indices into Grammar::alts
};

// The rule `body` matched between min and max times in a row (max ==
// kUnbounded: no limit). finish() guarantees the body cannot match the empty
// string, so every copy consumes at least one byte — what lets the matcher
// treat counts far from both bounds as one state for its mask cache.
struct Repeat {
  static constexpr uint32_t kUnbounded = UINT32_MAX;
  uint32_t body = 0, min = 0, max = kUnbounded;
};

struct Grammar {
  std::vector<ByteSet> byte_sets;
  std::vector<Repeat> repeats;
  std::vector<std::vector<Symbol>> alts;  // alternative -> its symbols in order
  std::vector<Rule> rules;
  uint32_t root = 0;
};

// A closed range of Unicode code points.
struct CodeRange {
  uint32_t lo = 0, hi = 0;
};

// Limits that keep a hostile grammar (a schema from a request) bounded.
inline constexpr size_t kMaxSymbols = 1u << 20;  // symbols over all alternatives
inline constexpr size_t kMaxRules = 1u << 18;
inline constexpr int kMaxRepeatCount = 1'000'000;  // {m,n} bounds

// Builds a Grammar. Rules are referred to by name; a name used before it is
// defined is fine (checked in finish()). Anonymous rules (groups, repetition,
// character classes) get generated names that cannot clash with GBNF names.
class GrammarBuilder {
 public:
  // The rule called `name`, created (undefined) when new.
  uint32_t rule(std::string_view name);
  // A fresh rule with a generated name starting with `hint`.
  uint32_t fresh_rule(std::string_view hint);
  // Appends an alternative to `rule`, which makes it defined.
  void add_alt(uint32_t rule, std::vector<Symbol> symbols);
  bool defined(uint32_t rule) const { return defined_[rule]; }

  // One byte from `set`.
  Symbol bytes(const ByteSet& set);
  // The UTF-8 encoding of exactly one code point in `ranges` (complemented
  // over all scalar values when `negated`). Surrogates are never matched. An
  // empty class is an error returned by finish().
  Symbol char_class(std::vector<CodeRange> ranges, bool negated);
  // The UTF-8 bytes of `text` in order (appended to `out`).
  void literal(std::string_view utf8, std::vector<Symbol>& out);
  Symbol rule_ref(uint32_t rule) const { return {Symbol::Kind::Rule, rule}; }

  // Repetition of `body` (a sequence) between min and max times (max < 0: no
  // limit). Counts up to kMaxRepeatCount.
  Result<Symbol> repeat(std::vector<Symbol> body, int min, int max);

  // Validates and returns the grammar rooted at `root_name`.
  Result<Grammar> finish(std::string_view root_name);

 private:
  // Nullable rules (fixed point over the grammar as it stands).
  std::vector<bool> nullable_rules() const;
  // `body` min..max times as plain rules (a chain of optional copies).
  Result<Symbol> unrolled(std::vector<Symbol> body, int min, int max);
  // Replaces each Repeat whose body can match the empty string by its
  // unrolled rules: counting empty copies would let one byte step walk
  // through every count up to max.
  Status unroll_nullable_repeats();

  Grammar g_;
  std::vector<bool> defined_;
  std::unordered_map<std::string, uint32_t> by_name_;
  std::unordered_map<std::string, uint32_t> byte_set_ids_;  // dedup of ByteSets
  std::unordered_map<std::string, uint32_t> class_rules_;   // dedup of character classes
  size_t n_symbols_ = 0;
  size_t n_fresh_ = 0;
  bool empty_class_ = false;
  bool too_big_ = false;
};

// The UTF-8 byte-range sequences that encode exactly the code points in
// [lo, hi] (surrogates excluded): each inner vector is one sequence, each
// pair the byte range allowed at that position.
std::vector<std::vector<std::pair<uint8_t, uint8_t>>> utf8_sequences(uint32_t lo, uint32_t hi);

}  // namespace tern::grammar
