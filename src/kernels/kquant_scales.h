// kernels/kquant_scales.h — packed K-quant sub-block scales as plain bytes (internal).
//
// Word-at-a-time unpacking of the 12-byte scale fields (layouts in
// quant/k_blocks.h). Plain C++ in an anonymous namespace, so every SIMD
// translation unit gets its own copy (ODR rule in x86/x86_impl.h and arm/arm_impl.h).
#pragma once

#include <cstdint>
#include <cstring>

namespace tern::kernels {
namespace {

inline uint32_t scales_word(const uint8_t* p) {
  uint32_t v;
  std::memcpy(&v, p, 4);
  return v;
}

// Q4_K/Q5_K: 8 six-bit scales -> bytes of *sc (sub-block s in byte s), 8 mins -> *m.
//   s < 4:  sc = scales[s] & 63,                             m = scales[s + 4] & 63
//   s >= 4: sc = scales[s + 4] & 15 | (scales[s - 4] >> 6) << 4,  m = scales[s + 4] >> 4 | (scales[s] >> 6) << 4
inline void unpack_q4k_scales(const uint8_t* s, uint64_t* sc, uint64_t* m) {
  const uint32_t s0 = scales_word(s), s1 = scales_word(s + 4), s2 = scales_word(s + 8);
  const uint32_t sc_lo = s0 & 0x3f3f3f3fu, m_lo = s1 & 0x3f3f3f3fu;
  const uint32_t sc_hi = (s2 & 0x0f0f0f0fu) | ((s0 >> 6) & 0x03030303u) << 4;
  const uint32_t m_hi = ((s2 >> 4) & 0x0f0f0f0fu) | ((s1 >> 6) & 0x03030303u) << 4;
  *sc = sc_lo | static_cast<uint64_t>(sc_hi) << 32;
  *m = m_lo | static_cast<uint64_t>(m_hi) << 32;
}

// Q3_K: 16 six-bit scales, still offset by 32 (S in 0..63), sub-block s in byte s % 4 of w[s / 4]:
// low 4 bits in the nibbles of scales[0..7] (s < 8 low, else high), top 2 bits in scales[8 + s % 4] >> 2(s / 4).
// (Words, not bytes in memory: callers build a vector from them without a store-forwarding stall.)
inline void unpack_q3k_scales(const uint8_t* s, uint32_t w[4]) {
  const uint32_t a0 = scales_word(s), a1 = scales_word(s + 4), t = scales_word(s + 8);
  w[0] = (a0 & 0x0f0f0f0fu) | (t & 0x03030303u) << 4;
  w[1] = (a1 & 0x0f0f0f0fu) | ((t >> 2) & 0x03030303u) << 4;
  w[2] = ((a0 >> 4) & 0x0f0f0f0fu) | ((t >> 4) & 0x03030303u) << 4;
  w[3] = ((a1 >> 4) & 0x0f0f0f0fu) | ((t >> 6) & 0x03030303u) << 4;
}

}  // namespace
}  // namespace tern::kernels
