#include "tokenizer/byte_level.h"

#include <array>

#include "core/utf8.h"

namespace tern::byte_level {

namespace {

bool is_self_printing(uint32_t b) {
  return (b >= 0x21 && b <= 0x7E) || (b >= 0xA1 && b <= 0xAC) || (b >= 0xAE && b <= 0xFF);
}

struct Tables {
  std::array<uint32_t, 256> to_cp{};
  std::array<int16_t, 512> to_byte{};  // every mapped code point is below U+0144
  Tables() {
    to_byte.fill(-1);
    uint32_t next = 0x100;
    for (uint32_t b = 0; b < 256; ++b) {
      to_cp[b] = is_self_printing(b) ? b : next++;
      to_byte[to_cp[b]] = static_cast<int16_t>(b);
    }
  }
};

const Tables& tables() {
  static const Tables t;
  return t;
}

}  // namespace

uint32_t byte_to_codepoint(uint8_t b) { return tables().to_cp[b]; }

int codepoint_to_byte(uint32_t cp) { return cp < 512 ? tables().to_byte[cp] : -1; }

std::string encode(std::string_view bytes) {
  std::string out;
  out.reserve(bytes.size() * 2);
  for (char c : bytes) utf8::append(out, byte_to_codepoint(static_cast<uint8_t>(c)));
  return out;
}

std::string decode(std::string_view spelled) {
  std::string out;
  out.reserve(spelled.size());
  for (size_t i = 0; i < spelled.size();) {
    const utf8::Decoded d = utf8::decode(spelled, i);
    const int b = d.valid ? codepoint_to_byte(d.cp) : -1;
    if (b >= 0)
      out.push_back(static_cast<char>(b));
    else
      out.append(spelled.substr(i, d.n_bytes));
    i += d.n_bytes;
  }
  return out;
}

}  // namespace tern::byte_level
