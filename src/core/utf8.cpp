#include "core/utf8.h"

namespace tern::utf8 {

int sequence_length(uint8_t lead) {
  if (lead < 0x80) return 1;
  if (lead < 0xC2) return 0;  // continuation byte, or the overlong leads C0/C1
  if (lead < 0xE0) return 2;
  if (lead < 0xF0) return 3;
  if (lead < 0xF5) return 4;
  return 0;
}

namespace {

// Allowed range of the first continuation byte; it is narrower than 80..BF for
// the leads that could otherwise spell an overlong form, a surrogate or a
// code point above U+10FFFF.
void first_continuation_range(uint8_t lead, uint8_t& lo, uint8_t& hi) {
  lo = 0x80;
  hi = 0xBF;
  if (lead == 0xE0)
    lo = 0xA0;
  else if (lead == 0xED)
    hi = 0x9F;
  else if (lead == 0xF0)
    lo = 0x90;
  else if (lead == 0xF4)
    hi = 0x8F;
}

}  // namespace

PrefixInfo classify(std::string_view s, size_t i) {
  const auto lead = static_cast<uint8_t>(s[i]);
  const int len = sequence_length(lead);
  if (len == 0) return {Prefix::Invalid, 1};
  if (len == 1) return {Prefix::Complete, 1};
  for (int k = 1; k < len; ++k) {
    if (i + k >= s.size()) return {Prefix::Incomplete, static_cast<uint32_t>(k)};
    const auto b = static_cast<uint8_t>(s[i + k]);
    uint8_t lo = 0x80, hi = 0xBF;
    if (k == 1) first_continuation_range(lead, lo, hi);
    if (b < lo || b > hi) return {Prefix::Invalid, static_cast<uint32_t>(k)};
  }
  return {Prefix::Complete, static_cast<uint32_t>(len)};
}

Decoded decode(std::string_view s, size_t i) {
  const PrefixInfo info = classify(s, i);
  if (info.kind != Prefix::Complete) return {kReplacementChar, info.n_bytes, false};
  const auto lead = static_cast<uint8_t>(s[i]);
  uint32_t cp = 0;
  switch (info.n_bytes) {
    case 1:
      cp = lead;
      break;
    case 2:
      cp = lead & 0x1Fu;
      break;
    case 3:
      cp = lead & 0x0Fu;
      break;
    default:
      cp = lead & 0x07u;
      break;
  }
  for (uint32_t k = 1; k < info.n_bytes; ++k) cp = (cp << 6) | (static_cast<uint8_t>(s[i + k]) & 0x3Fu);
  return {cp, info.n_bytes, true};
}

void append(std::string& out, uint32_t cp) {
  if (cp > 0x10FFFF || (cp >= 0xD800 && cp <= 0xDFFF)) cp = kReplacementChar;
  if (cp < 0x80) {
    out.push_back(static_cast<char>(cp));
  } else if (cp < 0x800) {
    out.push_back(static_cast<char>(0xC0 | (cp >> 6)));
    out.push_back(static_cast<char>(0x80 | (cp & 0x3F)));
  } else if (cp < 0x10000) {
    out.push_back(static_cast<char>(0xE0 | (cp >> 12)));
    out.push_back(static_cast<char>(0x80 | ((cp >> 6) & 0x3F)));
    out.push_back(static_cast<char>(0x80 | (cp & 0x3F)));
  } else {
    out.push_back(static_cast<char>(0xF0 | (cp >> 18)));
    out.push_back(static_cast<char>(0x80 | ((cp >> 12) & 0x3F)));
    out.push_back(static_cast<char>(0x80 | ((cp >> 6) & 0x3F)));
    out.push_back(static_cast<char>(0x80 | (cp & 0x3F)));
  }
}

std::string encode(uint32_t cp) {
  std::string s;
  append(s, cp);
  return s;
}

bool is_valid(std::string_view s) {
  for (size_t i = 0; i < s.size();) {
    const PrefixInfo info = classify(s, i);
    if (info.kind != Prefix::Complete) return false;
    i += info.n_bytes;
  }
  return true;
}

}  // namespace tern::utf8
