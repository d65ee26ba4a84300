// core/hash.h — FNV-1a 64: a small, stable hash of bytes (file fingerprints,
// per-tensor seeds). Not for hash tables facing untrusted input.
#pragma once

#include <cstdint>
#include <string_view>

namespace tern {

inline uint64_t fnv1a64(std::string_view bytes) {
  uint64_t h = 0xCBF29CE484222325ull;
  for (unsigned char c : bytes) h = (h ^ c) * 0x100000001B3ull;
  return h;
}

}  // namespace tern
