// core/hash.h — FNV-1a 64: a small, stable hash of bytes (file fingerprints,
// per-tensor seeds). Not for hash tables facing untrusted input.
// checksum64: a fast checksum of a buffer (swapped KV blocks), four 64-bit
// lanes of multiply-rotate mixing, 8 bytes per lane step: several GB/s where
// FNV-1a manages one byte at a time. Detects accidental corruption (any one
// changed bit changes the result); not a cryptographic hash.
#pragma once

#include <cstddef>
#include <cstdint>
#include <cstring>
#include <string_view>

namespace tern {

inline uint64_t fnv1a64(std::string_view bytes) {
  uint64_t h = 0xCBF29CE484222325ull;
  for (unsigned char c : bytes) h = (h ^ c) * 0x100000001B3ull;
  return h;
}

namespace detail {
inline uint64_t rotl64(uint64_t x, int r) { return (x << r) | (x >> (64 - r)); }
inline uint64_t mix64(uint64_t lane, uint64_t word) {
  return rotl64(lane + word * 0xC2B2AE3D27D4EB4Full, 31) * 0x9E3779B185EBCA87ull;
}
}  // namespace detail

inline uint64_t checksum64(const void* data, size_t n) {
  const auto* p = static_cast<const unsigned char*>(data);
  uint64_t lane[4] = {0x60EA27EEADC0B5D6ull, 0xC2B2AE3D27D4EB4Full, 0x165667B19E3779F9ull, 0x9E3779B185EBCA87ull};
  size_t i = 0;
  for (; i + 32 <= n; i += 32)
    for (int k = 0; k < 4; ++k) {
      uint64_t w;
      std::memcpy(&w, p + i + 8 * k, 8);
      lane[k] = detail::mix64(lane[k], w);
    }
  uint64_t h = detail::rotl64(lane[0], 1) + detail::rotl64(lane[1], 7) + detail::rotl64(lane[2], 12) +
               detail::rotl64(lane[3], 18) + n;
  for (; i < n; ++i) h = (h ^ p[i]) * 0x100000001B3ull;
  h ^= h >> 33;
  h *= 0xFF51AFD7ED558CCDull;
  return h ^ (h >> 33);
}

}  // namespace tern
