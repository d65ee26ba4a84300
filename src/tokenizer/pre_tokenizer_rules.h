// tokenizer/pre_tokenizer_rules.h — the split rules pre-tokenizers are made of.
//
// Each rule is a hand-written matcher for one regular expression used by a
// Hugging Face `tokenizers` pre-tokenizer (Split with behaviour Isolated, or the
// ByteLevel regex). A rule answers "where is the first match at or after
// `from`" inside one fragment; lookarounds and `$` see only that fragment, as
// they do when the regexes are applied one after another. Matchers follow the
// regex engine's leftmost, ordered-alternation, greedy-with-backtracking
// semantics, spelled out per rule in pre_tokenizer_rules.cpp.
// Internal to the tokenizer module.
#pragma once

#include <cstddef>
#include <cstdint>

namespace tern::pretok {

// One fragment of code points. Shape: cps[n], flags[n] (unicode::Flag bits).
struct Span {
  const uint32_t* cps = nullptr;
  const uint16_t* flags = nullptr;
  size_t n = 0;
};

// Finds the first non-empty match starting at or after `from`; writes it to
// [*begin, *end) and returns true, or returns false when there is none.
using FindFn = bool (*)(const Span& s, size_t from, size_t* begin, size_t* end);

// 's|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)|\s+
bool find_gpt2(const Span& s, size_t from, size_t* begin, size_t* end);

// (?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}{1,3}|
// ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+
bool find_llama3(const Span& s, size_t from, size_t* begin, size_t* end);
// The same with \p{N} (one digit per word): qwen2, stablelm2, bailingmoe, grok-2 ...
bool find_qwen2(const Span& s, size_t from, size_t* begin, size_t* end);
// The same with one digit and punctuation runs without the [\r\n]* tail (seed-coder).
bool find_seed_coder(const Span& s, size_t from, size_t* begin, size_t* end);

// [^\r\n\p{L}\p{N}]?[\p{Lu}\p{Lt}\p{Lm}\p{Lo}\p{M}]*[\p{Ll}\p{Lm}\p{Lo}\p{M}]+|
// [^\r\n\p{L}\p{N}]?[\p{Lu}\p{Lt}\p{Lm}\p{Lo}\p{M}]+[\p{Ll}\p{Lm}\p{Lo}\p{M}]*|\p{N}|
// ?[^\s\p{L}\p{N}]+[\r\n/]*|\s*[\r\n]+|\s+(?!\S)|\s+           (tekken)
bool find_tekken(const Span& s, size_t from, size_t* begin, size_t* end);
// As tekken, each word alternative followed by (?i:'s|'t|'re|'ve|'m|'ll|'d)?, and \p{N}{1,3} (gpt-4o /
// o200k).
bool find_o200k(const Span& s, size_t from, size_t* begin, size_t* end);

// [!"#$%&'()*+,\-./:;<=>?@\[\\\]^_`{|}~][A-Za-z]+|[^\r\n\p{L}\p{P}\p{S}]?[\p{L}\p{M}]+|
// ?[\p{P}\p{S}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+                (deepseek-v3)
bool find_deepseek3_words(const Span& s, size_t from, size_t* begin, size_t* end);

// Small rules used as steps of a sequence.
bool find_digit(const Span& s, size_t from, size_t* begin, size_t* end);           // \p{N}
bool find_digits_1_3(const Span& s, size_t from, size_t* begin, size_t* end);      // \p{N}{1,3}
bool find_digit_run(const Span& s, size_t from, size_t* begin, size_t* end);       // \p{N}+
bool find_ascii_digit_3(const Span& s, size_t from, size_t* begin, size_t* end);   // [0-9][0-9][0-9]
bool find_newline_char(const Span& s, size_t from, size_t* begin, size_t* end);    // [\r\n]
bool find_punct_default(const Span& s, size_t from, size_t* begin, size_t* end);   // [\p{P}\$\+<=>\^~\|]+
bool find_punct_falcon(const Span& s, size_t from, size_t* begin, size_t* end);    // [\p{P}\$\+<=>\^~\|`]+
bool find_trailing_space(const Span& s, size_t from, size_t* begin, size_t* end);  // \s+$
bool find_space_letters(const Span& s, size_t from, size_t* begin, size_t* end);   // \s?\p{L}+
bool find_space_puncts(const Span& s, size_t from, size_t* begin, size_t* end);    // \s?\p{P}+
// \s?[<cased Latin, Greek, Cyrillic ... letters>]+ (the explicit range list of deepseek-llm)
bool find_deepseek_latin(const Span& s, size_t from, size_t* begin, size_t* end);
// \s?[!-/:-~！-／：-～‘-‟　-。]+
bool find_deepseek_punct(const Span& s, size_t from, size_t* begin, size_t* end);
// [一-龥ࠀ-一가-퟿]+
bool find_deepseek_cjk(const Span& s, size_t from, size_t* begin, size_t* end);
// [一-龥぀-ゟ゠-ヿ]+
bool find_deepseek3_cjk(const Span& s, size_t from, size_t* begin, size_t* end);
// ?[^(\s|.,!?…。，、।۔،)]+  (bloom, poro, gpt3-finnish, viking)
bool find_bloom(const Span& s, size_t from, size_t* begin, size_t* end);

}  // namespace tern::pretok
