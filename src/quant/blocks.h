// quant/blocks.h — GGUF quantization block layouts, bit-exact with ggml.
//
// Each block covers a fixed number of consecutive elements of one row.
//
//   Q4_0 (32 elems, 18 bytes):  | d: fp16 | qs[16]: element j in low nibble of qs[j],
//                                                   element j+16 in the high nibble |
//                               x = d * (q - 8)
//   Q8_0 (32 elems, 34 bytes):  | d: fp16 | qs[32]: int8 |       x = d * q
#pragma once

#include <cstdint>

namespace tern::quant {

inline constexpr int kQK4_0 = 32;
inline constexpr int kQK8_0 = 32;

struct BlockQ4_0 {
  uint16_t d;                // fp16 scale
  uint8_t qs[kQK4_0 / 2];    // nibbles
};
static_assert(sizeof(BlockQ4_0) == 18, "Q4_0 block must be 18 bytes");

struct BlockQ8_0 {
  uint16_t d;                // fp16 scale
  int8_t qs[kQK8_0];
};
static_assert(sizeof(BlockQ8_0) == 34, "Q8_0 block must be 34 bytes");

}  // namespace tern::quant
