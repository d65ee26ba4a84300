// quant/blocks.h — GGUF 32-element ("legacy") quantization blocks, bit-exact with ggml.
//
// Each block covers 32 consecutive elements of one row. Multi-byte fields are
// little-endian; `fp16` is an IEEE half stored as its bit pattern. In every
// 4-bit type element j (0..15) is the LOW nibble of qs[j] and element j+16 the
// HIGH nibble of qs[j] — halves, not interleaved:
//
//   qs[j] = | q[j+16] (bits 7..4) | q[j] (bits 3..0) |
//
//   Q4_0   (18 B): | d fp16 | qs[16] |                        x = d * (q - 8)
//   Q4_1   (20 B): | d fp16 | m fp16 | qs[16] |               x = d * q + m
//   Q5_0   (22 B): | d fp16 | qh[4] | qs[16] |                x = d * (q - 16)
//   Q5_1   (24 B): | d fp16 | m fp16 | qh[4] | qs[16] |       x = d * q + m
//   Q8_0   (34 B): | d fp16 | qs[32] int8 |                   x = d * q
//   Q8_1   (36 B): | d fp16 | s fp16 | qs[32] int8 |          x = d * q, s = d * sum(q)
//   IQ4_NL (18 B): | d fp16 | qs[16] |                        x = d * kIq4nlValues[q]
//   MXFP4  (17 B): | e E8M0 | qs[16] |                        x = 2^(e-128) * kMxfp4Values[q]
//
// Q5_*: qh read as a little-endian u32 holds the fifth bit of element j at bit
// j (j = 0..31), so q[j] = nibble | ((qh >> j) & 1) << 4.
#pragma once

#include <cstdint>

namespace tern::quant {

inline constexpr int kQK4_0 = 32;
inline constexpr int kQK4_1 = 32;
inline constexpr int kQK5_0 = 32;
inline constexpr int kQK5_1 = 32;
inline constexpr int kQK8_0 = 32;
inline constexpr int kQK8_1 = 32;
inline constexpr int kQK4_NL = 32;

// IQ4_NL code book: a non-uniform 4-bit grid, denser near zero (ggml's kvalues_iq4nl).
inline constexpr int8_t kIq4nlValues[16] = {-127, -104, -83, -65, -49, -35, -22, -10,
                                            1,    13,   25,  38,  53,  69,  89,  113};

// MXFP4 (OCP microscaling): FP4 E2M1 values, doubled so they are integers
// (0, 0.5, 1, 1.5, 2, 3, 4, 6 and their negatives), with one power-of-two
// scale per block (E8M0, here halved to undo the doubling).
inline constexpr int kQK_MXFP4 = 32;
inline constexpr int8_t kMxfp4Values[16] = {0, 1, 2, 3, 4, 6, 8, 12, 0, -1, -2, -3, -4, -6, -8, -12};

struct BlockMxfp4 {
  uint8_t e;                   // E8M0 exponent
  uint8_t qs[kQK_MXFP4 / 2];   // 4-bit indices into kMxfp4Values, nibble order as Q4_0
};
static_assert(sizeof(BlockMxfp4) == 17, "MXFP4 block must be 17 bytes");

struct BlockQ4_0 {
  uint16_t d;                // fp16 scale
  uint8_t qs[kQK4_0 / 2];    // nibbles
};
static_assert(sizeof(BlockQ4_0) == 18, "Q4_0 block must be 18 bytes");

struct BlockQ4_1 {
  uint16_t d;                // fp16 scale
  uint16_t m;                // fp16 minimum (offset)
  uint8_t qs[kQK4_1 / 2];    // nibbles
};
static_assert(sizeof(BlockQ4_1) == 20, "Q4_1 block must be 20 bytes");

struct BlockQ5_0 {
  uint16_t d;                // fp16 scale
  uint8_t qh[4];             // fifth bits, little-endian u32, bit j = element j
  uint8_t qs[kQK5_0 / 2];    // low nibbles
};
static_assert(sizeof(BlockQ5_0) == 22, "Q5_0 block must be 22 bytes");

struct BlockQ5_1 {
  uint16_t d;                // fp16 scale
  uint16_t m;                // fp16 minimum (offset)
  uint8_t qh[4];             // fifth bits, little-endian u32, bit j = element j
  uint8_t qs[kQK5_1 / 2];    // low nibbles
};
static_assert(sizeof(BlockQ5_1) == 24, "Q5_1 block must be 24 bytes");

struct BlockQ8_0 {
  uint16_t d;                // fp16 scale
  int8_t qs[kQK8_0];
};
static_assert(sizeof(BlockQ8_0) == 34, "Q8_0 block must be 34 bytes");

// Q8_0_S24 (tern's own type, docs/prune.md): a 2:4-sparse row of Q8_0 values.
// Per 32 columns, the 16 kept weights (exactly 2 of every 4 consecutive
// columns) in column order as int8, which columns they are as a 32-bit mask
// (bit j set when column j is kept; 2 bits in every nibble), and one fp16
// scale: 22 bytes where Q8_0 takes 34. A row pruned 2:4 decodes to exactly
// what Q8_0 makes of it.
inline constexpr int kQK8_0S24 = 32;
struct BlockQ8_0S24 {
  uint16_t d;          // fp16 scale
  uint8_t mask[4];     // little-endian: bit j = column j kept
  int8_t qs[kQK8_0S24 / 2];
};
static_assert(sizeof(BlockQ8_0S24) == 22, "Q8_0_S24 block must be 22 bytes");

struct BlockQ8_1 {
  uint16_t d;                // fp16 scale
  uint16_t s;                // fp16 of d * sum(qs): lets dot products fold in a Q4_1/Q5_1 minimum
  int8_t qs[kQK8_1];
};
static_assert(sizeof(BlockQ8_1) == 36, "Q8_1 block must be 36 bytes");

struct BlockIq4Nl {
  uint16_t d;                // fp16 scale
  uint8_t qs[kQK4_NL / 2];   // 4-bit indices into kIq4nlValues, nibble order as Q4_0
};
static_assert(sizeof(BlockIq4Nl) == 18, "IQ4_NL block must be 18 bytes");

}  // namespace tern::quant
