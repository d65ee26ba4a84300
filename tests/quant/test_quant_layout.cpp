// Hand-built blocks with known field values pin every type's bit layout.
//
// Each test fills the fields of one block, then checks the decoded floats
// against (a) a few values worked out by hand in the comments from the layout
// in docs/formats.md / ggml's dequantize_row_*, and (b) the layout formula
// re-derived here with loops in ggml's traversal order (not our decoder's).
// All chosen scales are exact in fp16, so expected values are exact.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <vector>

#include "core/fp16.h"
#include "quant/blocks.h"
#include "quant/k_blocks.h"
#include "quant/quant.h"
#include "quant_test_data.h"

namespace tern::quant {
namespace {

template <class Block>
std::vector<float> decode(GgmlType t, const Block& b) {
  const TypeTraits* tr = traits(t);
  EXPECT_NE(tr, nullptr);
  EXPECT_EQ(tr->block_bytes, sizeof(Block));
  std::vector<float> out(tr->block_elems);
  tr->to_float(&b, out.data(), tr->block_elems);
  return out;
}

// A byte pattern whose every position differs from its neighbours.
uint8_t pattern(int i, int mul, int add) { return static_cast<uint8_t>(i * mul + add); }

// ---- 32-element blocks ---------------------------------------------------------

// qs[j] = j | (15 - j) << 4: element j reads j, element j+16 reads 15 - j.
template <class Block>
void fill_halves(Block* b) {
  for (int j = 0; j < 16; ++j) b->qs[j] = static_cast<uint8_t>(j | (15 - j) << 4);
}

TEST(QuantLayout, Q4_1) {
  BlockQ4_1 b{};
  b.d = float_to_fp16(0.5f);
  b.m = float_to_fp16(-1.0f);
  fill_halves(&b);
  const auto y = decode(GgmlType::Q4_1, b);
  EXPECT_EQ(y[0], -1.0f);   // 0.5*0 - 1
  EXPECT_EQ(y[15], 6.5f);   // 0.5*15 - 1
  EXPECT_EQ(y[16], 6.5f);   // high nibble of qs[0] = 15
  EXPECT_EQ(y[31], -1.0f);  // high nibble of qs[15] = 0
  for (int j = 0; j < 16; ++j) {
    EXPECT_EQ(y[j], 0.5f * j - 1.0f) << j;
    EXPECT_EQ(y[j + 16], 0.5f * (15 - j) - 1.0f) << j;
  }
}

// qh bytes {0x01, 0x80, 0x00, 0xff} = u32 0xff008001: fifth bit set for
// elements 0, 15 and 24..31.
bool q5_bit_set(int j) { return j == 0 || j == 15 || j >= 24; }

TEST(QuantLayout, Q5_0) {
  BlockQ5_0 b{};
  b.d = float_to_fp16(0.25f);
  const uint8_t qh[4] = {0x01, 0x80, 0x00, 0xff};
  std::memcpy(b.qh, qh, 4);
  fill_halves(&b);
  const auto y = decode(GgmlType::Q5_0, b);
  EXPECT_EQ(y[0], 0.0f);     // (0 | 16) - 16
  EXPECT_EQ(y[1], -3.75f);   // 1 - 16 = -15, * 0.25
  EXPECT_EQ(y[15], 3.75f);   // (15 | 16) - 16 = 15
  EXPECT_EQ(y[16], -0.25f);  // high nibble 15, bit 16 clear: 15 - 16
  EXPECT_EQ(y[24], 1.75f);   // high nibble of qs[8] = 7, bit 24 set: 23 - 16 = 7
  for (int j = 0; j < 32; ++j) {
    const int nibble = j < 16 ? j : 15 - (j - 16);
    EXPECT_EQ(y[j], 0.25f * ((nibble | (q5_bit_set(j) ? 16 : 0)) - 16)) << j;
  }
}

TEST(QuantLayout, Q5_1) {
  BlockQ5_1 b{};
  b.d = float_to_fp16(1.0f);
  b.m = float_to_fp16(0.5f);
  const uint8_t qh[4] = {0x01, 0x80, 0x00, 0xff};
  std::memcpy(b.qh, qh, 4);
  fill_halves(&b);
  const auto y = decode(GgmlType::Q5_1, b);
  EXPECT_EQ(y[0], 16.5f);   // (0 | 16) + 0.5
  EXPECT_EQ(y[14], 14.5f);  // 14, bit clear
  EXPECT_EQ(y[31], 16.5f);  // high nibble of qs[15] = 0, bit 31 set
  for (int j = 0; j < 32; ++j) {
    const int nibble = j < 16 ? j : 15 - (j - 16);
    EXPECT_EQ(y[j], (nibble | (q5_bit_set(j) ? 16 : 0)) + 0.5f) << j;
  }
}

TEST(QuantLayout, Q8_1) {
  BlockQ8_1 b{};
  b.d = float_to_fp16(0.5f);
  b.s = float_to_fp16(123.0f);  // only a cached sum; must not affect decoding
  for (int j = 0; j < 32; ++j) b.qs[j] = static_cast<int8_t>(j * 8 - 128);
  const auto y = decode(GgmlType::Q8_1, b);
  EXPECT_EQ(y[0], -64.0f);
  EXPECT_EQ(y[31], 60.0f);  // 0.5 * 120
  for (int j = 0; j < 32; ++j) EXPECT_EQ(y[j], 0.5f * (j * 8 - 128)) << j;
}

TEST(QuantLayout, Iq4Nl) {
  BlockIq4Nl b{};
  b.d = float_to_fp16(2.0f);
  fill_halves(&b);
  const auto y = decode(GgmlType::IQ4_NL, b);
  const int table[16] = {-127, -104, -83, -65, -49, -35, -22, -10, 1, 13, 25, 38, 53, 69, 89, 113};
  EXPECT_EQ(y[0], -254.0f);  // 2 * table[0]
  EXPECT_EQ(y[8], 2.0f);     // 2 * table[8] = 2 * 1
  EXPECT_EQ(y[16], 226.0f);  // 2 * table[15]
  for (int j = 0; j < 16; ++j) {
    EXPECT_EQ(y[j], 2.0f * table[j]) << j;
    EXPECT_EQ(y[j + 16], 2.0f * table[15 - j]) << j;
  }
}

// IQ4_XS: sub-block s has the 6-bit scale ls = 8s + 3 (so ls - 32 runs -29 .. 27), split as
// ggml stores it (low nibbles two to a byte, high bits two per sub-block in a u16); d = 0.5;
// byte j of sub-block s holds (j + s) & 15 low and 15 - j high.
TEST(QuantLayout, Iq4Xs) {
  BlockIq4Xs b{};
  b.d = float_to_fp16(0.5f);
  for (int s = 0; s < 8; ++s) {
    const int ls = 8 * s + 3;
    b.scales_l[s / 2] = static_cast<uint8_t>(b.scales_l[s / 2] | (ls & 15) << (4 * (s % 2)));
    b.scales_h = static_cast<uint16_t>(b.scales_h | (ls >> 4) << (2 * s));
    for (int j = 0; j < 16; ++j) b.qs[16 * s + j] = static_cast<uint8_t>(((j + s) & 15) | (15 - j) << 4);
  }
  std::vector<float> y(256);
  traits(GgmlType::IQ4_XS)->to_float(&b, y.data(), 256);
  const int table[16] = {-127, -104, -83, -65, -49, -35, -22, -10, 1, 13, 25, 38, 53, 69, 89, 113};
  EXPECT_EQ(y[0], 0.5f * -29 * -127);  // sub-block 0: ls - 32 = -29, code 0
  EXPECT_EQ(y[255], 0.5f * 27 * -127); // sub-block 7: ls - 32 = 27; its element 31: high nibble 15 - 15
  for (int s = 0; s < 8; ++s)
    for (int j = 0; j < 16; ++j) {
      const float dl = 0.5f * static_cast<float>(8 * s + 3 - 32);
      EXPECT_EQ(y[32 * s + j], dl * static_cast<float>(table[(j + s) & 15])) << s << " " << j;
      EXPECT_EQ(y[32 * s + j + 16], dl * static_cast<float>(table[15 - j])) << s << " " << j;
    }
}

// The IQ4_XS quantizer: the sub-block of largest scale magnitude gets ls - 32 = -32 exactly (the
// super-scale is chosen so), every code decodes within the block's value range, and an all-zero
// sub-block decodes to zeros.
TEST(QuantLayout, Iq4XsQuantizerScales) {
  std::vector<float> x = test::normal_row(256 * 16, 3);
  for (int j = 64; j < 96; ++j) x[j] = 0.0f;  // sub-block 2 of the first block: all zero
  std::vector<BlockIq4Xs> q(16);
  std::vector<float> y(x.size());
  traits(GgmlType::IQ4_XS)->from_float(x.data(), q.data(), static_cast<int64_t>(x.size()));
  traits(GgmlType::IQ4_XS)->to_float(q.data(), y.data(), static_cast<int64_t>(x.size()));
  for (const BlockIq4Xs& b : q) {
    int lowest = 99;
    for (int s = 0; s < 8; ++s) lowest = std::min(lowest, unpack_scale_iq4_xs(b, s));
    EXPECT_EQ(lowest, -32);
  }
  for (int j = 64; j < 96; ++j) EXPECT_EQ(std::fabs(y[j]), 0.0f) << j;
}

// ---- K-quants --------------------------------------------------------------------

// Q2_K: scale of sub-block s is s, its min 15 - s; d = 0.5, dmin = 0.25;
// qs[i] = 7i + 3.
TEST(QuantLayout, Q2_K) {
  BlockQ2_K b{};
  b.d = float_to_fp16(0.5f);
  b.dmin = float_to_fp16(0.25f);
  for (int s = 0; s < 16; ++s) b.scales[s] = static_cast<uint8_t>(s | (15 - s) << 4);
  for (int i = 0; i < 64; ++i) b.qs[i] = pattern(i, 7, 3);
  const auto y = decode(GgmlType::Q2_K, b);
  EXPECT_EQ(y[0], -3.75f);   // qs[0] = 3 -> bits 0-1 = 3; s 0: 0.5*0*3 - 0.25*15
  EXPECT_EQ(y[37], -2.25f);  // h0 p1 r5: qs[5] = 38 = 0b00100110 -> bits 2-3 = 1; s 2: 0.5*2*1 - 0.25*13
  EXPECT_EQ(y[200], 5.25f);  // h1 p2 r8: qs[40] = 27 = 0b00011011 -> bits 4-5 = 1; s 12: 0.5*12*1 - 0.25*3
  EXPECT_EQ(y[255], 15.0f);  // h1 p3 r31: qs[63] = 188 = 0b10111100 -> bits 6-7 = 2; s 15: 0.5*15*2 - 0
  // ggml's order: two halves of 128, four shifts, two groups of 16 per shift.
  int e = 0;
  for (int h = 0; h < 2; ++h)
    for (int p = 0; p < 4; ++p)
      for (int g = 0; g < 2; ++g)
        for (int l = 0; l < 16; ++l, ++e) {
          const int q = (b.qs[32 * h + 16 * g + l] >> (2 * p)) & 3;
          const int s = 8 * h + 2 * p + g;
          EXPECT_EQ(y[e], 0.5f * s * q - 0.25f * (15 - s)) << e;
        }
}

// Q3_K's 16 six-bit scales S_s = 4s + 2 (signed value S - 32 = 4s - 30), packed
// by the spec: low nibbles in scales[0..7] (s < 8: low half, s >= 8: high half
// of scales[s - 8]), top two bits in scales[8 + s%4] at bit 2*(s/4).
void pack_q3_scales(const int* S, uint8_t* scales) {
  std::memset(scales, 0, 12);
  for (int s = 0; s < 16; ++s) {
    scales[s % 8] = static_cast<uint8_t>(scales[s % 8] | (S[s] & 15) << (s < 8 ? 0 : 4));
    scales[8 + s % 4] = static_cast<uint8_t>(scales[8 + s % 4] | (S[s] >> 4) << (2 * (s / 4)));
  }
}

TEST(QuantLayout, Q3_K) {
  BlockQ3_K b{};
  b.d = float_to_fp16(0.25f);
  int S[16];
  for (int s = 0; s < 16; ++s) S[s] = 4 * s + 2;
  pack_q3_scales(S, b.scales);
  // Hand check of the packing: S0 = 2, S8 = 34 = 0b100010 -> scales[0] = 2 | 2 << 4;
  // scales[8] holds the top bits of S0 (0), S4 (18 -> 1), S8 (2), S12 (50 -> 3).
  EXPECT_EQ(b.scales[0], 0x22);
  EXPECT_EQ(b.scales[8], 0 | 1 << 2 | 2 << 4 | 3 << 6);
  for (int i = 0; i < 64; ++i) b.qs[i] = pattern(i, 7, 3);
  for (int i = 0; i < 32; ++i) b.hmask[i] = pattern(i, 13, 5);
  const auto y = decode(GgmlType::Q3_K, b);
  EXPECT_EQ(y[0], -22.5f);  // qs[0] = 3 -> 3; hmask[0] = 5 bit 0 set -> q = 3; 0.25 * (2-32) * 3
  EXPECT_EQ(y[70], 7.0f);   // h0 p2 r6: qs[6] = 45 -> bits 4-5 = 2; hmask[6] = 83 bit 2 clear -> q = -2;
                            // s 4: S = 18 -> -14; 0.25 * -14 * -2
  EXPECT_EQ(y[129], 1.0f);  // h1 p0 r1: qs[33] = 234 -> bits 0-1 = 2; hmask[1] = 18 bit 4 set -> q = 2;
                            // s 8: S = 34 -> 2; 0.25 * 2 * 2
  int e = 0;
  for (int h = 0; h < 2; ++h)
    for (int p = 0; p < 4; ++p)
      for (int g = 0; g < 2; ++g)
        for (int l = 0; l < 16; ++l, ++e) {
          const int r = 16 * g + l;
          const int low = (b.qs[32 * h + r] >> (2 * p)) & 3;
          const bool high = (b.hmask[r] >> (4 * h + p)) & 1;
          const int s = 8 * h + 2 * p + g;
          EXPECT_EQ(y[e], 0.25f * (S[s] - 32) * (low - (high ? 0 : 4))) << e;
        }
}

// Q4_K/Q5_K scales: sc_s = 10 + 7s, m_s = 63 - 5s, packed by hand (see
// unpack_scale_min_k4): s < 4 in the low 6 bits of bytes s and s+4; s >= 4 low
// nibbles in byte s+4, top two bits in bits 6-7 of bytes s-4 (sc) and s (m).
//   sc = 10 17 24 31 38 45 52 59      m = 63 58 53 48 43 38 33 28
//   byte 0 = 10 | (38>>4)<<6 = 138    byte 4 = 63 | (43>>4)<<6 = 191   byte 8  = 6 | 11<<4 = 182
//   byte 1 = 17 | (45>>4)<<6 = 145    byte 5 = 58 | (38>>4)<<6 = 186   byte 9  = 13 | 6<<4 = 109
//   byte 2 = 24 | (52>>4)<<6 = 216    byte 6 = 53 | (33>>4)<<6 = 181   byte 10 = 4 | 1<<4 = 20
//   byte 3 = 31 | (59>>4)<<6 = 223    byte 7 = 48 | (28>>4)<<6 = 112   byte 11 = 11 | 12<<4 = 203
constexpr uint8_t kScalesK4[12] = {138, 145, 216, 223, 191, 186, 181, 112, 182, 109, 20, 203};
int sc_k4(int s) { return 10 + 7 * s; }
int m_k4(int s) { return 63 - 5 * s; }

TEST(QuantLayout, ScaleMinK4Unpacking) {
  for (int s = 0; s < 8; ++s) {
    uint8_t sc, m;
    unpack_scale_min_k4(kScalesK4, s, &sc, &m);
    EXPECT_EQ(sc, sc_k4(s)) << s;
    EXPECT_EQ(m, m_k4(s)) << s;
  }
}

TEST(QuantLayout, Q4_K) {
  BlockQ4_K b{};
  b.d = float_to_fp16(0.5f);
  b.dmin = float_to_fp16(0.125f);
  std::memcpy(b.scales, kScalesK4, 12);
  for (int i = 0; i < 128; ++i) b.qs[i] = pattern(i, 7, 3);
  const auto y = decode(GgmlType::Q4_K, b);
  EXPECT_EQ(y[0], 7.125f);    // qs[0] = 3 low nibble; s 0: 0.5*10*3 - 0.125*63
  EXPECT_EQ(y[100], 226.5f);  // c1 k1 r4: qs[36] = 255 high nibble 15; s 3: 0.5*31*15 - 0.125*48
  EXPECT_EQ(y[130], 13.625f); // c2 k0 r2: qs[66] = 209 = 0xd1 low nibble 1; s 4: 0.5*38*1 - 0.125*43
  EXPECT_EQ(y[255], 203.0f);  // c3 k1 r31: qs[127] = 124 = 0x7c high nibble 7; s 7: 0.5*59*7 - 0.125*28
  int e = 0;
  for (int c = 0; c < 4; ++c)
    for (int k = 0; k < 2; ++k)
      for (int r = 0; r < 32; ++r, ++e) {
        const int q = (b.qs[32 * c + r] >> (4 * k)) & 15;
        const int s = 2 * c + k;
        EXPECT_EQ(y[e], 0.5f * sc_k4(s) * q - 0.125f * m_k4(s)) << e;
      }
}

TEST(QuantLayout, Q5_K) {
  BlockQ5_K b{};
  b.d = float_to_fp16(0.5f);
  b.dmin = float_to_fp16(0.125f);
  std::memcpy(b.scales, kScalesK4, 12);
  for (int i = 0; i < 128; ++i) b.qs[i] = pattern(i, 7, 3);
  for (int i = 0; i < 32; ++i) b.qh[i] = pattern(i, 11, 1);
  const auto y = decode(GgmlType::Q5_K, b);
  EXPECT_EQ(y[0], 87.125f);    // qh[0] = 1 bit 0 set: q = 3 + 16; 0.5*10*19 - 7.875
  EXPECT_EQ(y[100], 474.5f);   // qh[4] = 45 = 0b101101 bit 3 set: q = 31; 0.5*31*31 - 6
  EXPECT_EQ(y[130], 317.625f); // qh[2] = 23 = 0b10111 bit 4 set: q = 17; 0.5*38*17 - 5.375
  EXPECT_EQ(y[255], 203.0f);   // qh[31] = 86 = 0b01010110 bit 7 clear: q = 7
  int e = 0;
  for (int c = 0; c < 4; ++c)
    for (int k = 0; k < 2; ++k)
      for (int r = 0; r < 32; ++r, ++e) {
        const int q = ((b.qs[32 * c + r] >> (4 * k)) & 15) + (((b.qh[r] >> (2 * c + k)) & 1) ? 16 : 0);
        const int s = 2 * c + k;
        EXPECT_EQ(y[e], 0.5f * sc_k4(s) * q - 0.125f * m_k4(s)) << e;
      }
}

// Q6_K: scales[s] = 9s - 70 (int8), d = 0.25, ql[i] = 7i + 3, qh[i] = 13i + 5.
TEST(QuantLayout, Q6_K) {
  BlockQ6_K b{};
  b.d = float_to_fp16(0.25f);
  for (int s = 0; s < 16; ++s) b.scales[s] = static_cast<int8_t>(9 * s - 70);
  for (int i = 0; i < 128; ++i) b.ql[i] = pattern(i, 7, 3);
  for (int i = 0; i < 64; ++i) b.qh[i] = pattern(i, 13, 5);
  const auto y = decode(GgmlType::Q6_K, b);
  EXPECT_EQ(y[0], 227.5f);    // ql[0] = 3 low; qh[0] = 5 bits 0-1 = 1: q = 19 - 32 = -13; 0.25 * -70 * -13
  EXPECT_EQ(y[45], -390.0f);  // h0 p1 r13: ql[45] = 62 = 0x3e low 14; qh[13] = 174 bits 2-3 = 3:
                              // q = 62 - 32 = 30; s 2: -52; 0.25 * -52 * 30
  EXPECT_EQ(y[200], -161.5f); // h1 p2 r8: ql[72] = 251 = 0xfb high 15; qh[40] = 13 bits 4-5 = 0:
                              // q = -17; s 12: 38; 0.25 * 38 * -17
  EXPECT_EQ(y[255], -406.25f);// h1 p3 r31: ql[127] = 124 = 0x7c high 7; qh[63] = 56 bits 6-7 = 0:
                              // q = -25; s 15: 65
  // ggml's order: per half of 128, l = 0..31 yields elements l, l+32, l+64, l+96.
  for (int h = 0; h < 2; ++h)
    for (int l = 0; l < 32; ++l) {
      const uint8_t* ql = b.ql + 64 * h;
      const uint8_t qh = b.qh[32 * h + l];
      const int q[4] = {(ql[l] & 15) | ((qh >> 0) & 3) << 4, (ql[l + 32] & 15) | ((qh >> 2) & 3) << 4,
                        (ql[l] >> 4) | ((qh >> 4) & 3) << 4, (ql[l + 32] >> 4) | ((qh >> 6) & 3) << 4};
      for (int p = 0; p < 4; ++p) {
        const int e = 128 * h + 32 * p + l;
        EXPECT_EQ(y[e], 0.25f * b.scales[e / 16] * (q[p] - 32)) << e;
      }
    }
}

TEST(QuantLayout, Q8_K) {
  BlockQ8_K b{};
  b.d = 0.5f;  // f32, not fp16
  for (int e = 0; e < 256; ++e) b.qs[e] = static_cast<int8_t>(e - 128);
  for (int s = 0; s < 16; ++s) b.bsums[s] = 999;  // cached sums only; decoding ignores them
  const auto y = decode(GgmlType::Q8_K, b);
  EXPECT_EQ(y[0], -64.0f);
  EXPECT_EQ(y[255], 63.5f);
  for (int e = 0; e < 256; ++e) EXPECT_EQ(y[e], 0.5f * (e - 128)) << e;
}

// Quantizers write fields where the decoder reads them: known inputs, known bytes.
TEST(QuantLayout, Q4_1QuantizerKnownBytes) {
  std::vector<float> x(32, 0.0f);
  x[0] = -1.0f;  // min
  x[1] = 14.0f;  // max: d = 15 / 15 = 1
  x[17] = 3.49f; // (3.49 + 1) + 0.5 = 4.99 -> 4
  BlockQ4_1 b{};
  traits(GgmlType::Q4_1)->from_float(x.data(), &b, 32);
  EXPECT_EQ(fp16_to_float(b.d), 1.0f);
  EXPECT_EQ(fp16_to_float(b.m), -1.0f);
  EXPECT_EQ(b.qs[0] & 15, 0);
  EXPECT_EQ(b.qs[1] & 15, 15);
  EXPECT_EQ(b.qs[1] >> 4, 4);
  EXPECT_EQ(b.qs[2] & 15, 1);  // zero: (0 + 1) + 0.5 -> 1
}

TEST(QuantLayout, Q5_0QuantizerKnownBytes) {
  std::vector<float> x(32, 0.0f);
  x[0] = -16.0f;  // largest magnitude, negative: d = 1
  x[20] = 15.0f;  // 15 + 16.5 -> 31: fifth bit of element 20 set
  x[3] = -0.6f;   // -0.6 + 16.5 = 15.9 -> 15: fifth bit clear
  BlockQ5_0 b{};
  traits(GgmlType::Q5_0)->from_float(x.data(), &b, 32);
  EXPECT_EQ(fp16_to_float(b.d), 1.0f);
  EXPECT_EQ(b.qs[0] & 15, 0);
  EXPECT_EQ(b.qs[4] >> 4, 15);
  EXPECT_EQ(b.qs[3] & 15, 15);
  // Zeros become 16 (bit set) except elements 0 (q 0) and 3 (q 15).
  EXPECT_EQ(b.qh[0], 0xf6);  // elements 0..7: all but 0 and 3
  EXPECT_EQ(b.qh[2], 0xff);  // elements 16..23, element 20 = 31
}

}  // namespace
}  // namespace tern::quant
