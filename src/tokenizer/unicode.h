// tokenizer/unicode.h — Unicode character properties the pre-tokenizers need.
//
// Contract: properties come from ICU (Debian libicu-dev, pkg-config icu-uc), so
// \p{L}, \p{N}, \s ... mean exactly what the Unicode Character Database says
// for ICU's Unicode version. The BMP is looked up in a table built once on
// first use (thread-safe static initialisation); other planes ask ICU.
// Only this file and unicode.cpp know that ICU exists.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

namespace tern::unicode {

// Bit flags of one code point. Letter/Number/Punct/Symbol/Mark are the
// general-category groups L, N, P, S, M; Space is the White_Space property
// (what \s matches in the regex engines tokenizers were trained with).
enum Flag : uint16_t {
  kLetter = 1u << 0,
  kNumber = 1u << 1,
  kPunct = 1u << 2,
  kSymbol = 1u << 3,
  kMark = 1u << 4,
  kSpace = 1u << 5,
  kUpperish = 1u << 6,         // Lu Lt Lm Lo M — the "upper" class of the o200k/tekken regexes
  kLowerish = 1u << 7,         // Ll Lm Lo M    — the "lower" class of the o200k/tekken regexes
  kControl = 1u << 8,          // Cc Cf (what BERT's cleaner drops)
  kLowercase = 1u << 9,        // Ll
  kNonspacingMark = 1u << 10,  // Mn (what BERT's accent stripping drops)
};

uint16_t flags(uint32_t cp);

uint32_t to_lower(uint32_t cp);

// Canonical decomposition (NFD) of valid UTF-8 text; invalid bytes become U+FFFD.
std::u32string nfd(std::string_view text);

// Code points of text; each invalid byte becomes one U+FFFD, with `n_bytes`
// telling how many source bytes each code point spans.
struct CodePoints {
  std::vector<uint32_t> cps;    // [n]
  std::vector<uint16_t> flags;  // [n]
  std::vector<size_t> offsets;  // [n + 1], byte offset of each code point; offsets[n] == text size
};
CodePoints decode_with_flags(std::string_view text);

}  // namespace tern::unicode
