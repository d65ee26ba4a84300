// AVX2 panel kernels for Q2_K, Q3_K, Q4_K, Q5_K and Q6_K against Q8_K activations: up to 32
// rows x any number of columns. Every tile of these types at this level runs
// here, prompt and decode alike, so a (row, token) result is the same whatever
// the batch.
//
// Row-per-lane in four groups of 8 rows (ymm lane r = one dword, 4 weights, of
// row 8g + r), as avx2_panel_legacy.cpp. Per super-block, group and column,
// with u the unsigned weights and x_e the broadcast activation dword e:
//
//   Q4_K  isum = sum_s vpmaddwd(sum_{k<8} vpmaddubsw(u_8s+k, x_8s+k), (sc_s, sc_s))   (Q5_K: k < 4, twice)
//         msum = sum_s vpmaddwd((m_s, m_s), bsums dword s)
//         out += (f32(isum) * d - f32(msum) * dmin) * dx
//   Q6_K  isum = sum_j vpmaddwd(vpmaddubsw(u_2j, x_2j) + vpmaddubsw(u_2j+1, x_2j+1), (sc, sc))
//              + sum_j vpmaddwd((-32 sc_2j, -32 sc_2j+1), bsums dword j)
//         out += f32(isum) * d * dx
//   Q2_K  as Q4_K on 16 sub-blocks of 4 dwords (u <= 3), mins dotted in pairs (m_2j, m_2j+1)
//   Q3_K  as Q6_K on 16 sub-blocks of 4 dwords (u = q + 4 <= 7, corrections -4 sc)
//
// The int16 sums stay exact: Q4_K adds 8 dwords of q <= 15 (8 * 2 * 15 * 128 <
// 2^15), Q5_K 4 of q <= 31, Q6_K 2 dwords of q <= 63 (2 * 2 * 63 * 128 < 2^15); the int32 sums of
// a super-block stay far inside int32. Decode (few columns) unpacks each
// weight dword as it is used; prompts unpack a super-block's 32 rows once into
// an L1 buffer shared by every column. Both give the same integers and the
// same float steps, hence the same bits.
#include <immintrin.h>

#include <cstddef>
#include <cstdint>
#include <cstring>

#include "kernels/x86/avx2_panel_util.h"
#include "kernels/x86/avx2_util.h"
#include "kernels/x86/x86_impl.h"
#include "quant/k_blocks.h"

namespace tern::kernels::x86 {
namespace {

constexpr int kGroups = 4;      // 8-row groups of a 32-row panel
constexpr int kGemmCols = 4;    // from this many columns a super-block is unpacked once
constexpr int kMaxCols = 32;    // columns whose results are accumulated at once
constexpr int kAhead = 4;       // GEMV: super-blocks of a packed panel prefetched ahead
constexpr int kElemDwords = quant::kQK_K / 4;
constexpr size_t kXBytes = sizeof(quant::BlockQ8_K);  // d f32 | qs[256] | bsums[16] int16

// One column's super-block: activation dword e, bsums dword j (bsums 2j, 2j + 1), dx.
struct XSuper {
  const uint8_t* p;
  __m256i x(int e) const { return bcast_dword(p + 4 + 4 * e); }
  __m256i bsums(int j) const { return bcast_dword(p + 4 + quant::kQK_K + 4 * j); }
  __m256 dx() const {
    float d;
    std::memcpy(&d, p, sizeof d);
    return _mm256_set1_ps(d);
  }
};

// One group's dwords of a super-block, row-per-lane, and its 8 trailing fp16 (Q6_K's d) as f32.
// Packed (MatmulKernels::pack {0, n_dw, trail}): [half h][dword j][16 rows x 4 bytes] [32 x 2 trailing bytes].
struct PackedGroup {
  const uint8_t* p;     // dword 0 of this group
  const uint8_t* tail;  // this group's 8 trailing halves
  PackedGroup(const uint8_t* blk, int n_dw, int g)
      : p(blk + static_cast<size_t>((g / 2) * n_dw) * 64 + (g % 2) * 32), tail(blk + static_cast<size_t>(2 * n_dw) * 64 + 16 * g) {}
  __m256i dword(int j) const { return load_256(p + 64 * j); }
  __m256 tail_ps() const { return _mm256_cvtph_ps(load_128(tail)); }
};

// Rows in place: the group's n_dw dwords transposed into a buffer first.
// When n_dw is not a multiple of 4 (Q2_K's 21, Q3_K's 27) the last dwords are
// gathered one row at a time: a 16-byte load there could read past the last
// row's end.
template <int kDw>
struct RowGroup {
  static constexpr int kWhole = kDw / 4 * 4;
  __m256i q[kDw];
  __m256 tail;
  RowGroup(const uint8_t* const* rows, size_t off, int trail_off) {
    for (int j = 0; j < kWhole; j += 4) transpose_8x4(rows, off + 4 * j, q + j);
    if constexpr (kDw > kWhole) {
      alignas(32) uint32_t t[kDw - kWhole][8];
      for (int j = 0; j < kDw - kWhole; ++j)
        for (int r = 0; r < 8; ++r) t[j][r] = load_u32(rows[r] + off + 4 * (kWhole + j));
      for (int j = 0; j < kDw - kWhole; ++j) q[kWhole + j] = load_256(reinterpret_cast<const uint8_t*>(t[j]));
    }
    if (trail_off >= 0) {
      short h[8];
      for (int r = 0; r < 8; ++r) h[r] = static_cast<short>(load_u16(rows[r] + off + trail_off));
      tail = _mm256_cvtph_ps(_mm_loadu_si128(reinterpret_cast<const __m128i*>(h)));
    }
  }
  __m256i dword(int j) const { return q[j]; }
  __m256 tail_ps() const { return tail; }
};

// int16 pairs (v, v) of the unsigned byte b of every dword.
inline __m256i pair_u8(__m256i v, int b) {
  const char i = static_cast<char>(b), z = static_cast<char>(0x80);
  const __m256i idx = _mm256_setr_epi8(i, z, i, z, i + 4, z, i + 4, z, i + 8, z, i + 8, z, i + 12, z, i + 12, z,  //
                                       i, z, i, z, i + 4, z, i + 4, z, i + 8, z, i + 8, z, i + 12, z, i + 12, z);
  return _mm256_shuffle_epi8(v, idx);
}

// int16 pairs (a, b) of the signed bytes a, b of every dword.
inline __m256i pair_s8(__m256i v, int a, int b) {
  const char x = static_cast<char>(a), y = static_cast<char>(b), z = static_cast<char>(0x80);
  const __m256i idx = _mm256_setr_epi8(z, x, z, y, z, x + 4, z, y + 4, z, x + 8, z, y + 8, z, x + 12, z, y + 12,  //
                                       z, x, z, y, z, x + 4, z, y + 4, z, x + 8, z, y + 8, z, x + 12, z, y + 12);
  return _mm256_srai_epi16(_mm256_shuffle_epi8(v, idx), 8);
}

// The f32 of the fp16 in bits [16h, 16h + 16) of every dword.
inline __m256 half_ps(__m256i v, int h) {
  const char a = static_cast<char>(2 * h), b = static_cast<char>(2 * h + 1), z = static_cast<char>(0x80);
  const __m256i idx = _mm256_setr_epi8(a, b, a + 4, b + 4, a + 8, b + 8, a + 12, b + 12, z, z, z, z, z, z, z, z,  //
                                       a, b, a + 4, b + 4, a + 8, b + 8, a + 12, b + 12, z, z, z, z, z, z, z, z);
  const __m256i packed = _mm256_permute4x64_epi64(_mm256_shuffle_epi8(v, idx), 0x08);
  return _mm256_cvtph_ps(_mm256_castsi256_si128(packed));
}

inline __m256i lo_nibbles(__m256i v) { return _mm256_and_si256(v, bytes(0x0f)); }
inline __m256i hi_nibbles(__m256i v) { return _mm256_and_si256(_mm256_srli_epi16(v, 4), bytes(0x0f)); }

// out + (f32(isum) * d - f32(msum) * dmin) * dx: a super-block of a type with mins (Q2_K, Q4_K, Q5_K).
inline __m256 with_mins(__m256i isum, __m256i msum, __m256 d, __m256 dmin, __m256 dx, __m256 out) {
  const __m256 t = _mm256_fnmadd_ps(_mm256_cvtepi32_ps(msum), dmin, _mm256_mul_ps(_mm256_cvtepi32_ps(isum), d));
  return _mm256_fmadd_ps(t, dx, out);
}

// ---- Q4_K / Q5_K: d | dmin, scales[12] (dwords 1..3), [Q5_K: qh[32] (dwords 4..11)], qs[128] ----
// qs dword kQs + 8c + k: low nibbles are element dword 16c + k, high nibbles 16c + 8 + k. Q5_K's
// fifth bit of element dword E is bit E / 8 of each byte of qh dword 4 + E % 8. With q <= 31 an
// int16 sum holds 4 dwords (4 * 2 * 31 * 128 < 2^15), so Q5_K scales each half sub-block.
template <bool kFifth>
struct Q45K {
  static constexpr int kDw = kFifth ? 44 : 36;
  static constexpr int kTrail = 0;
  static constexpr int kQs = kFifth ? 12 : 4;  // first qs dword
  static constexpr int kChain = kFifth ? 4 : 8;  // dwords summed in int16 before scaling
  struct Group {
    __m256i sc[8], mn[8];  // (scale, scale) and (min, min) of sub-block s per lane
    __m256 d, dmin;
  };
  template <class G>
  static void decode(const G& src, Group& gr) {
    const __m256i hdr = src.dword(0), s1 = src.dword(1), s2 = src.dword(2), s3 = src.dword(3);
    const __m256i m6 = bytes(0x3f), m4 = bytes(0x0f), m2 = bytes(0x03);
    const __m256i sc_lo = _mm256_and_si256(s1, m6), mn_lo = _mm256_and_si256(s2, m6);
    const __m256i sc_hi = _mm256_or_si256(_mm256_and_si256(s3, m4),
                                          _mm256_slli_epi32(_mm256_and_si256(_mm256_srli_epi32(s1, 6), m2), 4));
    const __m256i mn_hi = _mm256_or_si256(_mm256_and_si256(_mm256_srli_epi32(s3, 4), m4),
                                          _mm256_slli_epi32(_mm256_and_si256(_mm256_srli_epi32(s2, 6), m2), 4));
    for (int s = 0; s < 8; ++s) {
      gr.sc[s] = pair_u8(s < 4 ? sc_lo : sc_hi, s % 4);
      gr.mn[s] = pair_u8(s < 4 ? mn_lo : mn_hi, s % 4);
    }
    gr.d = half_ps(hdr, 0);
    gr.dmin = half_ps(hdr, 1);
  }
  template <class G>
  static __m256i weights(const G& src, int e) {
    const __m256i q = src.dword(kQs + 8 * (e / 16) + e % 8);
    __m256i u = (e / 8) % 2 ? hi_nibbles(q) : lo_nibbles(q);
    if constexpr (kFifth) {
      const __m256i qh = src.dword(4 + e % 8);
      const int b = e / 8;  // the bit to move to bit 4
      const __m256i moved = b <= 4 ? _mm256_slli_epi16(qh, 4 - b) : _mm256_srli_epi16(qh, b - 4);
      u = _mm256_or_si256(u, _mm256_and_si256(moved, bytes(0x10)));
    }
    return u;
  }
  // out[c] += the group's dot with column c, for C columns sharing each unpacked weight dword.
  template <int C, class W>
  static void dot(const Group& gr, const W& w, const XSuper* x, __m256* out) {
    __m256i isum[C], msum[C];
    for (int c = 0; c < C; ++c) isum[c] = msum[c] = _mm256_setzero_si256();
#pragma GCC unroll 8
    for (int s = 0; s < 8; ++s) {
#pragma GCC unroll 2
      for (int k0 = 0; k0 < 8; k0 += kChain) {
        __m256i s16[C];
        const __m256i w0 = w(8 * s + k0);
        for (int c = 0; c < C; ++c) s16[c] = _mm256_maddubs_epi16(w0, x[c].x(8 * s + k0));
#pragma GCC unroll 8
        for (int k = k0 + 1; k < k0 + kChain; ++k) {
          const __m256i wk = w(8 * s + k);
          for (int c = 0; c < C; ++c) s16[c] = _mm256_add_epi16(s16[c], _mm256_maddubs_epi16(wk, x[c].x(8 * s + k)));
        }
        for (int c = 0; c < C; ++c) isum[c] = _mm256_add_epi32(isum[c], _mm256_madd_epi16(s16[c], gr.sc[s]));
      }
      for (int c = 0; c < C; ++c) msum[c] = _mm256_add_epi32(msum[c], _mm256_madd_epi16(gr.mn[s], x[c].bsums(s)));
    }
    for (int c = 0; c < C; ++c) out[c] = with_mins(isum[c], msum[c], gr.d, gr.dmin, x[c].dx(), out[c]);
  }
};

// ---- Q6_K: ql[128] (dwords 0..31), qh[64] (32..47), scales[16] int8 (48..51), then d -----------
// Element dword 32h + 8p + m (p < 4, m < 8): the nibble p / 2 of ql dword 16h + 8 (p % 2) + m,
// and bits 2p, 2p + 1 of qh dword 32 + 8h + m as bits 4, 5.
struct Q6K {
  static constexpr int kDw = 52;
  static constexpr int kTrail = 2;
  struct Group {
    __m256i sc[16];   // (sc, sc) of 16-element sub-block s per lane
    __m256i corr[8];  // (-32 sc_2j, -32 sc_2j+1), dotted with bsums dword j
    __m256 d;
  };
  template <class G>
  static void decode(const G& src, Group& gr) {
    for (int j = 0; j < 4; ++j) {
      const __m256i v = src.dword(48 + j);
      for (int b = 0; b < 4; ++b) gr.sc[4 * j + b] = pair_s8(v, b, b);
      gr.corr[2 * j] = _mm256_mullo_epi16(pair_s8(v, 0, 1), _mm256_set1_epi16(-32));
      gr.corr[2 * j + 1] = _mm256_mullo_epi16(pair_s8(v, 2, 3), _mm256_set1_epi16(-32));
    }
    gr.d = src.tail_ps();
  }
  template <class G>
  static __m256i weights(const G& src, int e) {
    const int h = e / 32, p = (e / 8) % 4, m = e % 8;
    const __m256i ql = src.dword(16 * h + 8 * (p % 2) + m), qh = src.dword(32 + 8 * h + m);
    const __m256i lo = p / 2 ? hi_nibbles(ql) : lo_nibbles(ql);
    __m256i hb;  // bits 2p, 2p + 1 of each byte moved to bits 4, 5
    if (p < 2) {
      hb = _mm256_slli_epi16(qh, 4 - 2 * p);
    } else if (p == 2) {
      hb = qh;
    } else {
      hb = _mm256_srli_epi16(qh, 2);
    }
    return _mm256_or_si256(lo, _mm256_and_si256(hb, bytes(0x30)));
  }
  template <int C, class W>
  static void dot(const Group& gr, const W& w, const XSuper* x, __m256* out) {
    __m256i isum[C];
    for (int c = 0; c < C; ++c) isum[c] = _mm256_setzero_si256();
#pragma GCC unroll 32
    for (int j = 0; j < 32; ++j) {
      const __m256i w0 = w(2 * j), w1 = w(2 * j + 1);
      for (int c = 0; c < C; ++c) {
        const __m256i s16 = _mm256_add_epi16(_mm256_maddubs_epi16(w0, x[c].x(2 * j)),
                                             _mm256_maddubs_epi16(w1, x[c].x(2 * j + 1)));
        isum[c] = _mm256_add_epi32(isum[c], _mm256_madd_epi16(s16, gr.sc[j / 2]));
      }
    }
    for (int c = 0; c < C; ++c) {
      for (int j = 0; j < 8; ++j) isum[c] = _mm256_add_epi32(isum[c], _mm256_madd_epi16(gr.corr[j], x[c].bsums(j)));
      out[c] = _mm256_fmadd_ps(_mm256_mul_ps(_mm256_cvtepi32_ps(isum[c]), gr.d), x[c].dx(), out[c]);
    }
  }
};

// ---- Q2_K: scales[16] (dwords 0..3: low nibble scale, high nibble min), qs[64] (4..19), d | dmin (20)
// ---- Q3_K: hmask[32] (dwords 0..7), qs[64] (8..23), scales[12] (24..26), then d ------------------
// Element dword E = 32h + 8p + t (p < 4, t < 8): bits 2p, 2p + 1 of each byte of qs dword 8h + t;
// Q3_K's third bit is bit 4h + p of hmask dword t, set for q in 0..3 and clear for q - 4. With
// u <= 7 an int16 sum holds a 16-element sub-block's 4 dwords (4 * 2 * 7 * 128 < 2^15).
// isum[c] += sum over the 16 sub-blocks s of vpmaddwd(sum_{k<4} vpmaddubsw(u_4s+k, x_4s+k), sc[s])
// (Q2_K, Q3_K: 16-element sub-blocks of weights u <= 7, exact in int16).
template <int C, class W>
inline void sub16_dots(const __m256i* sc, const W& w, const XSuper* x, __m256i* isum) {
#pragma GCC unroll 16
  for (int s = 0; s < 16; ++s) {
    __m256i s16[C];
    const __m256i w0 = w(4 * s);
    for (int c = 0; c < C; ++c) s16[c] = _mm256_maddubs_epi16(w0, x[c].x(4 * s));
    for (int k = 1; k < 4; ++k) {
      const __m256i wk = w(4 * s + k);
      for (int c = 0; c < C; ++c) s16[c] = _mm256_add_epi16(s16[c], _mm256_maddubs_epi16(wk, x[c].x(4 * s + k)));
    }
    for (int c = 0; c < C; ++c) isum[c] = _mm256_add_epi32(isum[c], _mm256_madd_epi16(s16[c], sc[s]));
  }
}

struct Q2K {
  static constexpr int kDw = 21;
  static constexpr int kTrail = 0;
  struct Group {
    __m256i sc[16];  // (scale, scale) of sub-block s per lane
    __m256i mn[8];   // (min_2j, min_2j+1), dotted with bsums dword j
    __m256 d, dmin;
  };
  template <class G>
  static void decode(const G& src, Group& gr) {
    for (int k = 0; k < 4; ++k) {
      const __m256i v = src.dword(k);
      const __m256i sc = lo_nibbles(v), mn = hi_nibbles(v);
      for (int b = 0; b < 4; ++b) gr.sc[4 * k + b] = pair_u8(sc, b);
      gr.mn[2 * k] = pair_s8(mn, 0, 1);  // 0..15: the signed and unsigned readings agree
      gr.mn[2 * k + 1] = pair_s8(mn, 2, 3);
    }
    const __m256i hdr = src.dword(20);
    gr.d = half_ps(hdr, 0);
    gr.dmin = half_ps(hdr, 1);
  }
  template <class G>
  static __m256i weights(const G& src, int e) {
    const int h = e / 32, p = (e / 8) % 4, t = e % 8;
    return _mm256_and_si256(_mm256_srli_epi16(src.dword(4 + 8 * h + t), 2 * p), bytes(0x03));
  }
  template <int C, class W>
  static void dot(const Group& gr, const W& w, const XSuper* x, __m256* out) {
    __m256i isum[C], msum[C];
    for (int c = 0; c < C; ++c) isum[c] = msum[c] = _mm256_setzero_si256();
    sub16_dots<C>(gr.sc, w, x, isum);
    for (int c = 0; c < C; ++c) {
      for (int j = 0; j < 8; ++j) msum[c] = _mm256_add_epi32(msum[c], _mm256_madd_epi16(gr.mn[j], x[c].bsums(j)));
      out[c] = with_mins(isum[c], msum[c], gr.d, gr.dmin, x[c].dx(), out[c]);
    }
  }
};

struct Q3K {
  static constexpr int kDw = 27;
  static constexpr int kTrail = 2;
  struct Group {
    __m256i sc[16];   // (sc, sc) of sub-block s per lane, sc = S - 32
    __m256i corr[8];  // (-4 sc_2j, -4 sc_2j+1), dotted with bsums dword j: the q - 4 of u = q + 4
    __m256 d;
  };
  template <class G>
  static void decode(const G& src, Group& gr) {
    // The 16 six-bit scales: low nibbles in dwords 24 (s < 4 low, 8..11 high nibble) and 25 (4..7,
    // 12..15), their top two bits in the bit pairs of dword 26 (quant::unpack_scale_q3_k).
    const __m256i a0 = src.dword(24), a1 = src.dword(25), a2 = src.dword(26);
    const __m256i m2 = bytes(0x03), k32 = bytes(32), minus4 = _mm256_set1_epi16(-4);
    auto top = [&](int shift) { return _mm256_slli_epi16(_mm256_and_si256(_mm256_srli_epi16(a2, shift), m2), 4); };
    const __m256i s6[4] = {_mm256_or_si256(lo_nibbles(a0), top(0)), _mm256_or_si256(lo_nibbles(a1), top(2)),
                           _mm256_or_si256(hi_nibbles(a0), top(4)), _mm256_or_si256(hi_nibbles(a1), top(6))};
    for (int k = 0; k < 4; ++k) {
      const __m256i v = _mm256_sub_epi8(s6[k], k32);
      for (int b = 0; b < 4; ++b) gr.sc[4 * k + b] = pair_s8(v, b, b);
      gr.corr[2 * k] = _mm256_mullo_epi16(pair_s8(v, 0, 1), minus4);
      gr.corr[2 * k + 1] = _mm256_mullo_epi16(pair_s8(v, 2, 3), minus4);
    }
    gr.d = src.tail_ps();
  }
  template <class G>
  static __m256i weights(const G& src, int e) {
    const int h = e / 32, p = (e / 8) % 4, t = e % 8, b = 4 * h + p;
    const __m256i lo = _mm256_and_si256(_mm256_srli_epi16(src.dword(8 + 8 * h + t), 2 * p), bytes(0x03));
    const __m256i hm = src.dword(t);
    const __m256i hb = b >= 2 ? _mm256_srli_epi16(hm, b - 2) : _mm256_slli_epi16(hm, 2 - b);  // bit b -> bit 2
    return _mm256_or_si256(lo, _mm256_and_si256(hb, bytes(0x04)));
  }
  template <int C, class W>
  static void dot(const Group& gr, const W& w, const XSuper* x, __m256* out) {
    __m256i isum[C];
    for (int c = 0; c < C; ++c) isum[c] = _mm256_setzero_si256();
    sub16_dots<C>(gr.sc, w, x, isum);
    for (int c = 0; c < C; ++c) {
      for (int j = 0; j < 8; ++j) isum[c] = _mm256_add_epi32(isum[c], _mm256_madd_epi16(gr.corr[j], x[c].bsums(j)));
      out[c] = _mm256_fmadd_ps(_mm256_mul_ps(_mm256_cvtepi32_ps(isum[c]), gr.d), x[c].dx(), out[c]);
    }
  }
};

// Calls f(group source, g) for the four groups of super-block ib.
template <class KT, bool kPacked, class F>
inline void for_groups(const uint8_t* w, const PanelRows& rows, int64_t ib, F&& f) {
  constexpr size_t kBytes = 4 * KT::kDw + KT::kTrail;
  for (int g = 0; g < kGroups; ++g) {
    if constexpr (kPacked) {
      f(PackedGroup(w + static_cast<size_t>(ib) * 32 * kBytes, KT::kDw, g), g);
    } else {
      f(RowGroup<KT::kDw>(rows.p + 8 * g, static_cast<size_t>(ib) * kBytes, KT::kTrail ? 4 * KT::kDw : -1), g);
    }
  }
}

// Decode: C < kGemmCols columns, each weight dword unpacked once as it is used by all of them.
template <class KT, bool kPacked, int C>
void gemv(int64_t n, const uint8_t* w, size_t w_stride, const PanelRows& rows, const uint8_t* x, size_t x_stride,
          int n_cols, float* y, size_t ldy) {
  if constexpr (C > 1) {
    if (n_cols < C) return gemv<KT, kPacked, C - 1>(n, w, w_stride, rows, x, x_stride, n_cols, y, ldy);
  }
  constexpr size_t kPackedBlock = 32 * (4 * KT::kDw + KT::kTrail);
  const int64_t n_blocks = n / quant::kQK_K;
  __m256 out[kGroups][C];
  for (int g = 0; g < kGroups; ++g)
    for (int c = 0; c < C; ++c) out[g][c] = _mm256_setzero_ps();
  for (int64_t ib = 0; ib < n_blocks; ++ib) {
    if constexpr (!kPacked) prefetch_next_panel(w, w_stride, ib, n_blocks);
    XSuper xs[C];
    for (int c = 0; c < C; ++c) xs[c] = XSuper{x + c * x_stride + ib * kXBytes};
    for_groups<KT, kPacked>(w, rows, ib, [&](const auto& src, int g) {
      // The super-block kAhead on, a quarter per group: a burst of a whole
      // super-block's prefetches fills the miss queue and stalls the core.
      if constexpr (kPacked) prefetch_span<kPackedBlock / 4>(w + (ib + kAhead) * kPackedBlock + g * (kPackedBlock / 4));
      typename KT::Group gr;
      KT::decode(src, gr);
      KT::template dot<C>(gr, [&](int e) { return KT::weights(src, e); }, xs, out[g]);
    });
  }
  const int n_rows = rows.n_rows;
  for (int c = 0; c < C; ++c)
    for (int g = 0; g < kGroups; ++g) store_rows(y + c * ldy + 8 * g, out[g][c], n_rows - 8 * g);
}

template <class KT, bool kPacked>
void panel(int64_t n, const uint8_t* w, size_t w_stride, int n_rows, const uint8_t* x, size_t x_stride, int n_cols,
           float* y, size_t ldy) {
  constexpr size_t kBytes = 4 * KT::kDw + KT::kTrail;
  constexpr size_t kPackedBlock = 32 * kBytes;
  const PanelRows rows(w, kPacked ? 0 : w_stride, n_rows);
  const int64_t n_blocks = n / quant::kQK_K;
  typename KT::Group gr[kGroups];
  if (n_cols < kGemmCols) return gemv<KT, kPacked, kGemmCols - 1>(n, w, w_stride, rows, x, x_stride, n_cols, y, ldy);
  alignas(32) __m256i u[kGroups][kElemDwords];  // one super-block's unpacked weights (8 KiB)
  for (int c0 = 0; c0 < n_cols; c0 += kMaxCols) {
    const int nc = n_cols - c0 < kMaxCols ? n_cols - c0 : kMaxCols;
    __m256 out[kMaxCols][kGroups];
    for (int c = 0; c < nc; ++c)
      for (int g = 0; g < kGroups; ++g) out[c][g] = _mm256_setzero_ps();
    for (int64_t ib = 0; ib < n_blocks; ++ib) {
      for (int c = 0; c < nc; ++c) prefetch_span<kXBytes>(x + (c0 + c) * x_stride + (ib + 1) * kXBytes);
      if constexpr (kPacked) prefetch_span<kPackedBlock>(w + (ib + 1) * kPackedBlock);
      for_groups<KT, kPacked>(w, rows, ib, [&](const auto& src, int g) {
        KT::decode(src, gr[g]);
        for (int e = 0; e < kElemDwords; ++e) u[g][e] = KT::weights(src, e);
      });
      for (int c = 0; c < nc; ++c) {
        const XSuper xs{x + (c0 + c) * x_stride + ib * kXBytes};
        for (int g = 0; g < kGroups; ++g) {
          const __m256i* ug = u[g];
          KT::template dot<1>(gr[g], [ug](int e) { return ug[e]; }, &xs, &out[c][g]);
        }
      }
    }
    for (int c = 0; c < nc; ++c)
      for (int g = 0; g < kGroups; ++g) store_rows(y + (c0 + c) * ldy + 8 * g, out[c][g], n_rows - 8 * g);
  }
}

}  // namespace

PanelFn avx2_kquant_panel(gguf::GgmlType t, bool packed) {
  switch (t) {
    case gguf::GgmlType::Q2_K: return packed ? panel<Q2K, true> : panel<Q2K, false>;
    case gguf::GgmlType::Q3_K: return packed ? panel<Q3K, true> : panel<Q3K, false>;
    case gguf::GgmlType::Q4_K: return packed ? panel<Q45K<false>, true> : panel<Q45K<false>, false>;
    case gguf::GgmlType::Q5_K: return packed ? panel<Q45K<true>, true> : panel<Q45K<true>, false>;
    case gguf::GgmlType::Q6_K: return packed ? panel<Q6K, true> : panel<Q6K, false>;
    default: return nullptr;
  }
}

}  // namespace tern::kernels::x86
