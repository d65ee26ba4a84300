// tokenizer/byte_level.h — GPT-2's reversible byte <-> printable character mapping.
//
// Contract: byte-level BPE vocabularies spell every byte as one printable code
// point: bytes that are printable Latin-1 ('!'..'~', '¡'..'¬', '®'..'ÿ') stand
// for themselves, the other 68 take U+0100.. in byte order (space is 'Ġ',
// newline 'Ċ'). The tables are constants; safe from any thread.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>

namespace tern::byte_level {

// The code point byte b is spelled with.
uint32_t byte_to_codepoint(uint8_t b);
// The byte a code point spells, or -1 when it is not one of the 256.
int codepoint_to_byte(uint32_t cp);

// Bytes → their spelling (UTF-8).
std::string encode(std::string_view bytes);
// Spelling → bytes. A code point outside the mapping is copied as its UTF-8
// (so user text that was never byte-encoded survives); invalid UTF-8 is copied as is.
std::string decode(std::string_view spelled);

}  // namespace tern::byte_level
