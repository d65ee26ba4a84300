// core/utf8.h — strict UTF-8 decoding and encoding helpers.
//
// Contract: every function accepts arbitrary bytes and never reads past the
// end of its input. "Strict" means what RFC 3629 allows: no overlong forms, no
// surrogates, nothing above U+10FFFF. Invalid input is reported, never fixed
// silently, so callers choose between byte fallback (encoders) and U+FFFD
// (the streaming decoder). Stateless; safe from any thread.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>

namespace tern::utf8 {

inline constexpr uint32_t kReplacementChar = 0xFFFD;

// Length of the sequence a lead byte announces (1..4), or 0 when the byte can
// not start a sequence (a continuation byte, C0, C1, F5..FF).
int sequence_length(uint8_t lead);

struct Decoded {
  uint32_t cp = kReplacementChar;  // the code point, or U+FFFD when !valid
  uint32_t n_bytes = 1;  // bytes consumed: the whole sequence, or the maximal invalid subpart (>= 1)
  bool valid = false;
};

// Decodes the sequence starting at s[i] (i < s.size()).
Decoded decode(std::string_view s, size_t i);

// Status of the bytes s[i..]: how a streaming reader should treat them.
enum class Prefix {
  Complete,    // a whole valid sequence of `n_bytes`
  Incomplete,  // a valid start that needs more bytes than s holds
  Invalid,     // `n_bytes` bytes can never be part of a valid sequence
};
struct PrefixInfo {
  Prefix kind = Prefix::Invalid;
  uint32_t n_bytes = 1;
};
PrefixInfo classify(std::string_view s, size_t i);

void append(std::string& out, uint32_t cp);
std::string encode(uint32_t cp);

// True when the whole of s is valid UTF-8.
bool is_valid(std::string_view s);

}  // namespace tern::utf8
