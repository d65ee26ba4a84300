// quant/k_blocks.h — GGUF "K-quant" super-blocks, bit-exact with ggml.
//
// A super-block covers kQK_K = 256 consecutive elements of one row and is split
// into sub-blocks of 16 (Q2_K, Q3_K, Q6_K) or 32 (Q4_K, Q5_K) elements, each with
// its own quantized scale (and minimum). `fp16` fields are IEEE halves stored as
// bits; everything is little-endian and packed. Below, e is the element index in
// the super-block (0..255) and q its stored integer.
//
//   Q2_K (84 B): | scales[16] | qs[64] | d fp16 | dmin fp16 |
//     e = 128h + 32p + r (h 0..1, p 0..3, r 0..31): q = (qs[32h + r] >> 2p) & 3
//     s = e / 16:  sc = scales[s] & 15, m = scales[s] >> 4
//     x = d*sc * q - dmin*m
//
//   Q3_K (110 B): | hmask[32] | qs[64] | scales[12] | d fp16 |
//     e = 128h + 32p + r: low = (qs[32h + r] >> 2p) & 3, high = bit (e / 32) of hmask[r]
//     q = low - (high ? 0 : 4)                                  (range -4..3)
//     s = e / 16: 6-bit S = low4 | hi2 << 4 with
//        low4 = s < 8 ? scales[s] & 15 : scales[s - 8] >> 4,  hi2 = (scales[8 + s%4] >> 2*(s/4)) & 3
//     x = d*(S - 32) * q
//
//   Q4_K (144 B): | d fp16 | dmin fp16 | scales[12] | qs[128] |
//     e = 64c + 32k + r (c 0..3, k 0..1): q = (qs[32c + r] >> 4k) & 15
//     s = e / 32 (= 2c + k): 6-bit sc and m packed in 12 bytes ("scale_min_k4"):
//        s < 4:  sc = scales[s] & 63                      m = scales[s+4] & 63
//        s >= 4: sc = scales[s+4] & 15 | (scales[s-4] >> 6) << 4
//                m  = scales[s+4] >> 4 | (scales[s]   >> 6) << 4
//     x = d*sc * q - dmin*m
//
//   Q5_K (176 B): | d fp16 | dmin fp16 | scales[12] | qh[32] | qs[128] |
//     as Q4_K, plus a fifth bit: q += 16 * (bit (e / 32) of qh[r])
//
//   Q6_K (210 B): | ql[128] | qh[64] | scales[16] int8 | d fp16 |
//     e = 128h + 32p + r: low4 = (ql[64h + 32(p&1) + r] >> 4(p>>1)) & 15
//                         hi2  = (qh[32h + r] >> 2p) & 3,  q = (low4 | hi2 << 4) - 32
//     x = d*scales[e / 16] * q
//
//   Q8_K (292 B): | d f32 | qs[256] int8 | bsums[16] int16 |   x = d * q,
//     bsums[s] = sum of qs[16s .. 16s+15] (activation-side type for K-quant dot products)
#pragma once

#include <cstdint>

namespace tern::quant {

inline constexpr int kQK_K = 256;
inline constexpr int kKScaleBytes = 12;  // 8 six-bit scales + 8 six-bit mins (Q4_K/Q5_K)

struct BlockQ2_K {
  uint8_t scales[kQK_K / 16];  // low nibble: scale, high nibble: min, per 16 elements
  uint8_t qs[kQK_K / 4];       // 2-bit quants
  uint16_t d;                  // fp16 super-scale of the scales
  uint16_t dmin;               // fp16 super-scale of the mins
};
static_assert(sizeof(BlockQ2_K) == 84, "Q2_K block must be 84 bytes");

struct BlockQ3_K {
  uint8_t hmask[kQK_K / 8];    // third (high) bits
  uint8_t qs[kQK_K / 4];       // low 2 bits
  uint8_t scales[12];          // 16 six-bit signed scales, offset by 32
  uint16_t d;                  // fp16 super-scale
};
static_assert(sizeof(BlockQ3_K) == 110, "Q3_K block must be 110 bytes");

struct BlockQ4_K {
  uint16_t d;                  // fp16 super-scale of the scales
  uint16_t dmin;               // fp16 super-scale of the mins
  uint8_t scales[kKScaleBytes];
  uint8_t qs[kQK_K / 2];       // 4-bit quants
};
static_assert(sizeof(BlockQ4_K) == 144, "Q4_K block must be 144 bytes");

struct BlockQ5_K {
  uint16_t d;                  // fp16 super-scale of the scales
  uint16_t dmin;               // fp16 super-scale of the mins
  uint8_t scales[kKScaleBytes];
  uint8_t qh[kQK_K / 8];       // fifth bits
  uint8_t qs[kQK_K / 2];       // low 4 bits
};
static_assert(sizeof(BlockQ5_K) == 176, "Q5_K block must be 176 bytes");

struct BlockQ6_K {
  uint8_t ql[kQK_K / 2];       // low 4 bits
  uint8_t qh[kQK_K / 4];       // high 2 bits
  int8_t scales[kQK_K / 16];   // signed 8-bit scales per 16 elements
  uint16_t d;                  // fp16 super-scale
};
static_assert(sizeof(BlockQ6_K) == 210, "Q6_K block must be 210 bytes");

// IQ4_XS: IQ4_NL's code book in 256-element super-blocks, eight sub-blocks of 32 with 6-bit
// scales: x = d * (ls - 32) * kIq4nlValues[q], ls = scales_l nibble | two scales_h bits << 4.
struct BlockIq4Xs {
  uint16_t d;                  // fp16 super-scale
  uint16_t scales_h;           // high 2 bits of each sub-block's scale, sub-block s at bits 2s
  uint8_t scales_l[kQK_K / 64];  // low 4 bits: sub-block 2i in the low nibble of byte i, 2i+1 high
  uint8_t qs[kQK_K / 2];       // per sub-block 16 bytes: element j low nibble, j + 16 high
};
static_assert(sizeof(BlockIq4Xs) == 136, "IQ4_XS block must be 136 bytes");

// The scale ls - 32 (range -32..31) of sub-block s (0..7) of an IQ4_XS block.
inline int unpack_scale_iq4_xs(const BlockIq4Xs& b, int s) {
  const int low4 = (b.scales_l[s / 2] >> (4 * (s % 2))) & 0x0f;
  const int hi2 = (b.scales_h >> (2 * s)) & 3;
  return (low4 | hi2 << 4) - 32;
}

struct BlockQ8_K {
  float d;                     // f32 scale (not fp16)
  int8_t qs[kQK_K];
  int16_t bsums[kQK_K / 16];   // sums of qs per 16 elements
};
static_assert(sizeof(BlockQ8_K) == 292, "Q8_K block must be 292 bytes");

// The 6-bit scale and min of sub-block s (0..7) of a Q4_K/Q5_K block.
inline void unpack_scale_min_k4(const uint8_t* scales, int s, uint8_t* sc, uint8_t* m) {
  if (s < 4) {
    *sc = scales[s] & 63;
    *m = scales[s + 4] & 63;
  } else {
    *sc = static_cast<uint8_t>((scales[s + 4] & 0x0f) | ((scales[s - 4] >> 6) << 4));
    *m = static_cast<uint8_t>((scales[s + 4] >> 4) | ((scales[s] >> 6) << 4));
  }
}

// The signed scale (S - 32, range -32..31) of sub-block s (0..15) of a Q3_K block.
inline int unpack_scale_q3_k(const uint8_t* scales, int s) {
  const int low4 = s < 8 ? (scales[s] & 0x0f) : (scales[s - 8] >> 4);
  const int hi2 = (scales[8 + s % 4] >> (2 * (s / 4))) & 3;
  return (low4 | (hi2 << 4)) - 32;
}

}  // namespace tern::quant
