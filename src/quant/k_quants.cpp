// quant/k_quants.cpp — decoding and reference dot products of the K-quant super-blocks.
//
// Every type is first unpacked into one common form,
//
//   q[256]   signed integer quant of each element (-32..63)
//   dl[ns]   effective scale of each sub-block  (super-scale * sub-scale, one f32 product)
//   ml[ns]   effective minimum of each sub-block (0 for the symmetric types)
//
// so that element e of sub-block s decodes as dl[s] * q[e] - ml[s]: the same f32
// operations in the same order as ggml's dequantize_row_*, hence bit-exact. The
// dot product uses the factored form sum_s(dl[s] * sum(q x) - ml[s] * sum(x)).
// Bit layouts: see quant/k_blocks.h.
#include <cstring>

#include "core/fp16.h"
#include "quant/k_blocks.h"
#include "quant/rows.h"

namespace tern::quant::rows {
namespace {

struct Unpacked {
  int n_sub = 0;                 // sub-blocks per super-block (8 or 16)
  int8_t q[kQK_K];               // [256] integer quants
  float dl[kQK_K / 16];          // [n_sub] scale per sub-block
  float ml[kQK_K / 16];          // [n_sub] minimum per sub-block (subtracted)
};

// Element e = 128h + 32p + r of a Q2_K/Q3_K block: its 2-bit field in qs.
int two_bit_field(const uint8_t* qs, int e) {
  const int h = e / 128, p = (e % 128) / 32, r = e % 32;
  return (qs[32 * h + r] >> (2 * p)) & 3;
}

void unpack(const BlockQ2_K& b, Unpacked* u) {
  u->n_sub = 16;
  const float d = fp16_to_float(b.d), dmin = fp16_to_float(b.dmin);
  for (int s = 0; s < 16; ++s) {
    u->dl[s] = d * static_cast<float>(b.scales[s] & 0x0f);
    u->ml[s] = dmin * static_cast<float>(b.scales[s] >> 4);
  }
  for (int e = 0; e < kQK_K; ++e) u->q[e] = static_cast<int8_t>(two_bit_field(b.qs, e));
}

void unpack(const BlockQ3_K& b, Unpacked* u) {
  u->n_sub = 16;
  const float d = fp16_to_float(b.d);
  for (int s = 0; s < 16; ++s) {
    u->dl[s] = d * static_cast<float>(unpack_scale_q3_k(b.scales, s));
    u->ml[s] = 0.0f;
  }
  for (int e = 0; e < kQK_K; ++e) {
    const bool high = (b.hmask[e % 32] >> (e / 32)) & 1;
    u->q[e] = static_cast<int8_t>(two_bit_field(b.qs, e) - (high ? 0 : 4));
  }
}

// Q4_K and Q5_K share scales and the low-nibble layout; qh is null for Q4_K.
void unpack_q45_k(uint16_t d16, uint16_t dmin16, const uint8_t* scales, const uint8_t* qs, const uint8_t* qh,
                  Unpacked* u) {
  u->n_sub = 8;
  const float d = fp16_to_float(d16), dmin = fp16_to_float(dmin16);
  for (int s = 0; s < 8; ++s) {
    uint8_t sc, m;
    unpack_scale_min_k4(scales, s, &sc, &m);
    u->dl[s] = d * static_cast<float>(sc);
    u->ml[s] = dmin * static_cast<float>(m);
  }
  for (int e = 0; e < kQK_K; ++e) {
    const int c = e / 64, k = (e % 64) / 32, r = e % 32;
    int q = (qs[32 * c + r] >> (4 * k)) & 0x0f;
    if (qh && ((qh[r] >> (e / 32)) & 1)) q += 16;
    u->q[e] = static_cast<int8_t>(q);
  }
}

void unpack(const BlockQ4_K& b, Unpacked* u) { unpack_q45_k(b.d, b.dmin, b.scales, b.qs, nullptr, u); }
void unpack(const BlockQ5_K& b, Unpacked* u) { unpack_q45_k(b.d, b.dmin, b.scales, b.qs, b.qh, u); }

void unpack(const BlockQ6_K& b, Unpacked* u) {
  u->n_sub = 16;
  const float d = fp16_to_float(b.d);
  for (int s = 0; s < 16; ++s) {
    u->dl[s] = d * static_cast<float>(b.scales[s]);
    u->ml[s] = 0.0f;
  }
  for (int e = 0; e < kQK_K; ++e) {
    const int h = e / 128, p = (e % 128) / 32, r = e % 32;
    const int low4 = (b.ql[64 * h + 32 * (p & 1) + r] >> (4 * (p >> 1))) & 0x0f;
    const int hi2 = (b.qh[32 * h + r] >> (2 * p)) & 3;
    u->q[e] = static_cast<int8_t>((low4 | hi2 << 4) - 32);
  }
}

void unpack(const BlockQ8_K& b, Unpacked* u) {
  u->n_sub = 16;
  for (int s = 0; s < 16; ++s) {
    u->dl[s] = b.d;
    u->ml[s] = 0.0f;
  }
  std::memcpy(u->q, b.qs, sizeof(u->q));
}

template <class Block>
void to_float_rows(const void* src, float* dst, int64_t n) {
  const auto* b = static_cast<const Block*>(src);
  Unpacked u;
  for (int64_t i = 0; i < n / kQK_K; ++i, dst += kQK_K) {
    unpack(b[i], &u);
    const int sub_elems = kQK_K / u.n_sub;
    for (int e = 0; e < kQK_K; ++e) {
      const int s = e / sub_elems;
      dst[e] = u.dl[s] * static_cast<float>(u.q[e]) - u.ml[s];
    }
  }
}

template <class Block>
float vec_dot_rows(const void* row, const float* x, int64_t n) {
  const auto* b = static_cast<const Block*>(row);
  Unpacked u;
  float sum = 0.0f;
  for (int64_t i = 0; i < n / kQK_K; ++i, x += kQK_K) {
    unpack(b[i], &u);
    const int sub_elems = kQK_K / u.n_sub;
    for (int s = 0; s < u.n_sub; ++s) {
      float sum_qx = 0.0f, sum_x = 0.0f;
      for (int e = s * sub_elems; e < (s + 1) * sub_elems; ++e) {
        sum_qx += static_cast<float>(u.q[e]) * x[e];
        sum_x += x[e];
      }
      sum += u.dl[s] * sum_qx - u.ml[s] * sum_x;
    }
  }
  return sum;
}

}  // namespace

void q2_k_to_float(const void* src, float* dst, int64_t n) { to_float_rows<BlockQ2_K>(src, dst, n); }
void q3_k_to_float(const void* src, float* dst, int64_t n) { to_float_rows<BlockQ3_K>(src, dst, n); }
void q4_k_to_float(const void* src, float* dst, int64_t n) { to_float_rows<BlockQ4_K>(src, dst, n); }
void q5_k_to_float(const void* src, float* dst, int64_t n) { to_float_rows<BlockQ5_K>(src, dst, n); }
void q6_k_to_float(const void* src, float* dst, int64_t n) { to_float_rows<BlockQ6_K>(src, dst, n); }
void q8_k_to_float(const void* src, float* dst, int64_t n) { to_float_rows<BlockQ8_K>(src, dst, n); }

float q2_k_vec_dot(const void* row, const float* x, int64_t n) { return vec_dot_rows<BlockQ2_K>(row, x, n); }
float q3_k_vec_dot(const void* row, const float* x, int64_t n) { return vec_dot_rows<BlockQ3_K>(row, x, n); }
float q4_k_vec_dot(const void* row, const float* x, int64_t n) { return vec_dot_rows<BlockQ4_K>(row, x, n); }
float q5_k_vec_dot(const void* row, const float* x, int64_t n) { return vec_dot_rows<BlockQ5_K>(row, x, n); }
float q6_k_vec_dot(const void* row, const float* x, int64_t n) { return vec_dot_rows<BlockQ6_K>(row, x, n); }
float q8_k_vec_dot(const void* row, const float* x, int64_t n) { return vec_dot_rows<BlockQ8_K>(row, x, n); }

}  // namespace tern::quant::rows
