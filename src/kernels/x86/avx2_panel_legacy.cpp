// AVX2 panel kernels for Q4_0, Q8_0, IQ4_NL and MXFP4 against Q8_0 activations: up to 32
// rows x any number of columns. Every tile of these types at this level runs
// here, prompt and decode alike, so a (row, token) result is the same whatever
// the batch.
//
// Row-per-lane, as avx512_panel_legacy.cpp, in four groups of 8 rows (ymm
// lane r = row 8g + r). Per block (8 dwords of 4 elements) and column:
//
//   s16 = sum_k vpmaddubsw(q_k, bcast(x dword k))     q = nibble 0..15, x int8
//   t   = vpmaddwd(s16, 1) - 8 * sum(x)               = sum((q - 8) x), exact
//   out += f32(t) * (dw * dx)
//
// s16 stays in int16: each lane's two pair sums gather 8 products of at most
// 15 * 128 each (<= 30,720 < 2^15). Signed weights (Q8_0; IQ4_NL and MXFP4
// after their code book's vpshufb) go through the sign
// trick, vpmaddubsw(|w|, sign(x, w)), whose pairs (<= 2 * 128 * 127) leave no
// room to add two in int16: each dword is widened by vpmaddwd at once,
//
//   t = sum_k vpmaddwd(vpmaddubsw(|w_k|, sign(x_k, w_k)), 1)         (signed types)
//
// The float steps are the AVX-512 panel's, on the same exact integer, so the
// two levels agree bit for bit.
//
// Decode (few columns) unpacks each weight dword as it is used, with the
// column's 8 activation dwords held in registers; prompts unpack a block's 32
// rows once into an L1 buffer shared by every column.
#include <immintrin.h>

#include <cstddef>
#include <cstdint>
#include <cstring>

#include "kernels/x86/avx2_panel_util.h"
#include "kernels/x86/avx2_util.h"
#include "kernels/x86/x86_impl.h"
#include "quant/blocks.h"

namespace tern::kernels::x86 {
namespace {

constexpr int kGroups = 4;        // 8-row groups of a 32-row panel
constexpr int kGemmCols = 4;      // from this many columns a block's weights are unpacked once
constexpr int kMaxCols = 32;      // columns whose results are accumulated at once
constexpr size_t kXBytes = sizeof(quant::BlockQ8_0);

// The weight types: bytes per block, lead bytes of scale (fp16 d, or MXFP4's
// E8M0 byte), dwords of quants, signed weights or nibbles, and whether the
// nibbles index a code book of signed values (IQ4_NL, MXFP4: book()).
struct Q4_0 {
  static constexpr size_t kBytes = sizeof(quant::BlockQ4_0);
  static constexpr int kLead = 2, kDw = 4;
  static constexpr bool kSigned = false;
  static constexpr bool kBook = false;
};
struct Q8_0 {
  static constexpr size_t kBytes = sizeof(quant::BlockQ8_0);
  static constexpr int kLead = 2, kDw = 8;
  static constexpr bool kSigned = true;
  static constexpr bool kBook = false;
};
struct Iq4Nl {
  static constexpr size_t kBytes = sizeof(quant::BlockIq4Nl);
  static constexpr int kLead = 2, kDw = 4;
  static constexpr bool kSigned = true;
  static constexpr bool kBook = true;
  static const int8_t* book() { return quant::kIq4nlValues; }
};
struct Mxfp4 {
  static constexpr size_t kBytes = sizeof(quant::BlockMxfp4);
  static constexpr int kLead = 1, kDw = 4;
  static constexpr bool kSigned = true;
  static constexpr bool kBook = true;
  static const int8_t* book() { return quant::kMxfp4Values; }
};

// 8 rows' scales as f32: fp16 d, or MXFP4's E8M0 e as 2^(e - 128) built from
// its bits, (e - 1) << 23, or for e < 2 the subnormals 0x00200000 << e
// (quant::rows::mxfp4_scale).
template <class WT>
inline __m256 scales(__m128i lead) {
  if constexpr (WT::kLead == 2) {
    return _mm256_cvtph_ps(lead);
  } else {
    const __m256i e = _mm256_cvtepu8_epi32(lead);
    const __m256i normal = _mm256_slli_epi32(_mm256_sub_epi32(e, _mm256_set1_epi32(1)), 23);
    const __m256i tiny = _mm256_sllv_epi32(_mm256_set1_epi32(0x00200000), e);
    const __m256i small = _mm256_cmpgt_epi32(_mm256_set1_epi32(2), e);
    return _mm256_castsi256_ps(_mm256_blendv_epi8(normal, tiny, small));
  }
}

// Where block ib of the panel's rows comes from; both give the same values in
// the same lanes (and so the same results), the packed one without transposes.
//
// Rows in place: row r's block at rows[r] + off, its groups transposed up front.
template <class WT>
struct RowBlock {
  const uint8_t* const* rows;  // [32]
  size_t off;
  __m256i q[kGroups][WT::kDw];
  RowBlock(const uint8_t* const* r, size_t o) : rows(r), off(o) {
    for (int g = 0; g < kGroups; ++g)
      for (int j = 0; j < WT::kDw; j += 4) transpose_8x4(rows + 8 * g, off + WT::kLead + 4 * j, q[g] + j);
  }
  __m256i dword(int g, int j) const { return q[g][j]; }
  __m256 d(int g) const {
    const uint8_t* const* r = rows + 8 * g;
    uint8_t lead[16] = {};
    for (int i = 0; i < 8; ++i) std::memcpy(lead + WT::kLead * i, r[i] + off, WT::kLead);
    return scales<WT>(load_128(lead));
  }
};

// A packed block (MatmulKernels::pack {kLead, kDw, 0}):
//   [32 x lead] [half h = 0, 1][dword j < kDw][16 rows x 4 bytes]
// so group g's dword j is the 32 bytes at 32 kLead + (kDw (g / 2) + j) * 64 + 32 (g % 2).
template <class WT>
struct PackedSource {
  const uint8_t* blk;
  __m256 d(int g) const { return scales<WT>(load_128(blk + 8 * WT::kLead * g)); }
  __m256i dword(int g, int j) const {
    return load_256(blk + 32 * WT::kLead + (g / 2) * 64 * WT::kDw + (g % 2) * 32 + 64 * j);
  }
};

// One column's block: its 8 activation dwords, dx, and (Q4_0) 8 * sum(x) in every lane.
template <class WT>
struct XBlock {
  __m256i q[8];
  __m256i off;
  __m256 dx;
  explicit XBlock(const uint8_t* xb) {
    for (int k = 0; k < 8; ++k) q[k] = bcast_dword(xb + 2 + 4 * k);
    if constexpr (!WT::kSigned) {
      __m256i s = _mm256_madd_epi16(_mm256_maddubs_epi16(bytes(1), load_256(xb + 2)), _mm256_set1_epi16(1));
      s = _mm256_add_epi32(s, _mm256_shuffle_epi32(s, 0x4e));
      s = _mm256_add_epi32(s, _mm256_shuffle_epi32(s, 0xb1));
      s = _mm256_add_epi32(s, _mm256_permute2x128_si256(s, s, 0x01));
      off = _mm256_slli_epi32(s, 3);
    }
    dx = _mm256_set1_ps(f16_to_f32(xb));
  }
};

// out += f32(t) * (d * dx): the float step every path shares.
inline __m256 finish(__m256i t, __m256 d, __m256 dx, __m256 out) {
  return _mm256_fmadd_ps(_mm256_cvtepi32_ps(t), _mm256_mul_ps(d, dx), out);
}

// t of Q4_0 from its int16 sums: vpmaddwd(s16, 1) - 8 * sum(x).
inline __m256i q4_total(__m256i s16, const XBlock<Q4_0>& x) {
  return _mm256_sub_epi32(_mm256_madd_epi16(s16, _mm256_set1_epi16(1)), x.off);
}

// One Q8_0 dword's exact int32 dot: |w| against x with w's sign.
inline __m256i signed_dot(__m256i abs_w, __m256i w, __m256i x) {
  return _mm256_madd_epi16(_mm256_maddubs_epi16(abs_w, _mm256_sign_epi8(x, w)), _mm256_set1_epi16(1));
}

// Nibbles of qs dword j: low = element dword j, high = element dword 4 + j.
inline __m256i lo_nibbles(__m256i v) { return _mm256_and_si256(v, bytes(0x0f)); }
inline __m256i hi_nibbles(__m256i v) { return _mm256_and_si256(_mm256_srli_epi16(v, 4), bytes(0x0f)); }

// The code book's signed values of 32 nibbles (IQ4_NL, MXFP4).
template <class WT>
inline __m256i lookup(__m256i nibbles) {
  const __m256i table = _mm256_broadcastsi128_si256(load_128(reinterpret_cast<const uint8_t*>(WT::book())));
  return _mm256_shuffle_epi8(table, nibbles);
}

// One block of all four groups against one column, unpacking each weight
// dword as it is used: per dword j, the column's activation dwords against
// the four groups' dword j, in four accumulators.
template <class WT, class Src>
inline void block_stream(const Src& src, const XBlock<WT>& x, __m256 out[kGroups]) {
  __m256i s[kGroups];
  for (int j = 0; j < WT::kDw; ++j) {
    for (int g = 0; g < kGroups; ++g) {
      const __m256i w = src.dword(g, j);
      __m256i t;
      if constexpr (WT::kBook) {
        const __m256i wl = lookup<WT>(lo_nibbles(w)), wh = lookup<WT>(hi_nibbles(w));
        t = _mm256_add_epi32(signed_dot(_mm256_abs_epi8(wl), wl, x.q[j]), signed_dot(_mm256_abs_epi8(wh), wh, x.q[4 + j]));
        s[g] = j == 0 ? t : _mm256_add_epi32(s[g], t);
      } else if constexpr (WT::kSigned) {
        t = signed_dot(_mm256_abs_epi8(w), w, x.q[j]);
        s[g] = j == 0 ? t : _mm256_add_epi32(s[g], t);
      } else {
        t = _mm256_add_epi16(_mm256_maddubs_epi16(lo_nibbles(w), x.q[j]), _mm256_maddubs_epi16(hi_nibbles(w), x.q[4 + j]));
        s[g] = j == 0 ? t : _mm256_add_epi16(s[g], t);
      }
    }
  }
  for (int g = 0; g < kGroups; ++g) {
    if constexpr (WT::kSigned) {
      out[g] = finish(s[g], src.d(g), x.dx, out[g]);
    } else {
      out[g] = finish(q4_total(s[g], x), src.d(g), x.dx, out[g]);
    }
  }
}

// One block's weights of one group, unpacked once for every column: Q4_0 the
// 8 element dwords; Q8_0 |w| (u) and w (for the sign).
struct Unpacked {
  __m256i u[8];
  __m256i w[8];
};

template <class WT, class Src>
inline void unpack(const Src& src, int g, Unpacked& out) {
  for (int j = 0; j < WT::kDw; ++j) {
    const __m256i q = src.dword(g, j);
    if constexpr (WT::kBook) {
      out.w[j] = lookup<WT>(lo_nibbles(q));
      out.w[4 + j] = lookup<WT>(hi_nibbles(q));
      out.u[j] = _mm256_abs_epi8(out.w[j]);
      out.u[4 + j] = _mm256_abs_epi8(out.w[4 + j]);
    } else if constexpr (WT::kSigned) {
      out.u[j] = _mm256_abs_epi8(q);
      out.w[j] = q;
    } else {
      out.u[j] = lo_nibbles(q);
      out.u[4 + j] = hi_nibbles(q);
    }
  }
}

// The same sums from unpacked weights.
template <class WT>
inline __m256 group_unpacked(const Unpacked& uw, const XBlock<WT>& x, __m256 d, __m256 out) {
  if constexpr (WT::kSigned) {
    __m256i t = signed_dot(uw.u[0], uw.w[0], x.q[0]);
    for (int j = 1; j < 8; ++j) t = _mm256_add_epi32(t, signed_dot(uw.u[j], uw.w[j], x.q[j]));
    return finish(t, d, x.dx, out);
  } else {
    __m256i s = _mm256_maddubs_epi16(uw.u[0], x.q[0]);
    s = _mm256_add_epi16(s, _mm256_maddubs_epi16(uw.u[4], x.q[4]));
    for (int j = 1; j < 4; ++j) {
      s = _mm256_add_epi16(s, _mm256_maddubs_epi16(uw.u[j], x.q[j]));
      s = _mm256_add_epi16(s, _mm256_maddubs_epi16(uw.u[4 + j], x.q[4 + j]));
    }
    return finish(q4_total(s, x), d, x.dx, out);
  }
}

template <class WT, bool kPacked>
void panel(int64_t n, const uint8_t* w, size_t w_stride, int n_rows, const uint8_t* x, size_t x_stride, int n_cols,
           float* y, size_t ldy) {
  constexpr size_t kPackedBlock = 32 * WT::kBytes;
  const PanelRows rows(w, kPacked ? 0 : w_stride, n_rows);
  const int64_t n_blocks = n / 32;
  if (n_cols < kGemmCols) {  // decode: one column at a time, weights unpacked as used
    for (int c = 0; c < n_cols; ++c) {
      __m256 out[kGroups] = {_mm256_setzero_ps(), _mm256_setzero_ps(), _mm256_setzero_ps(), _mm256_setzero_ps()};
      const uint8_t* xc = x + c * x_stride;
      for (int64_t ib = 0; ib < n_blocks; ++ib) {
        if constexpr (kPacked) {
          prefetch_span<kPackedBlock>(w + (ib + 4) * kPackedBlock);
        } else {
          prefetch_next_panel(w, w_stride, ib, n_blocks);
        }
        const XBlock<WT> xb(xc + ib * kXBytes);
        if constexpr (kPacked) {
          block_stream(PackedSource<WT>{w + ib * kPackedBlock}, xb, out);
        } else {
          block_stream(RowBlock<WT>(rows.p, static_cast<size_t>(ib) * WT::kBytes), xb, out);
        }
      }
      for (int g = 0; g < kGroups; ++g) store_rows(y + c * ldy + 8 * g, out[g], n_rows - 8 * g);
    }
    return;
  }
  alignas(32) Unpacked u[kGroups];  // one block's unpacked weights
  __m256 d[kGroups];
  for (int c0 = 0; c0 < n_cols; c0 += kMaxCols) {
    const int nc = n_cols - c0 < kMaxCols ? n_cols - c0 : kMaxCols;
    __m256 out[kMaxCols][kGroups];
    for (int c = 0; c < nc; ++c)
      for (int g = 0; g < kGroups; ++g) out[c][g] = _mm256_setzero_ps();
    for (int64_t ib = 0; ib < n_blocks; ++ib) {
      if (ib % 4 == 0 && ib + 4 < n_blocks) {  // the next four blocks of activations and weights, from L2
        for (int c = 0; c < nc; ++c) prefetch_span<4 * kXBytes>(x + (c0 + c) * x_stride + (ib + 4) * kXBytes);
        if constexpr (kPacked) {
          prefetch_span<4 * kPackedBlock>(w + (ib + 4) * kPackedBlock);
        } else {
          for (int r = 0; r < n_rows; ++r) prefetch_span<4 * WT::kBytes>(rows.p[r] + (ib + 4) * WT::kBytes);
        }
      }
      const auto unpack_all = [&](const auto& src) {
        for (int g = 0; g < kGroups; ++g) {
          unpack<WT>(src, g, u[g]);
          d[g] = src.d(g);
        }
      };
      if constexpr (kPacked) {
        unpack_all(PackedSource<WT>{w + ib * kPackedBlock});
      } else {
        unpack_all(RowBlock<WT>(rows.p, static_cast<size_t>(ib) * WT::kBytes));
      }
      for (int c = 0; c < nc; ++c) {
        const XBlock<WT> xb(x + (c0 + c) * x_stride + ib * kXBytes);
        for (int g = 0; g < kGroups; ++g) out[c][g] = group_unpacked(u[g], xb, d[g], out[c][g]);
      }
    }
    for (int c = 0; c < nc; ++c)
      for (int g = 0; g < kGroups; ++g) store_rows(y + (c0 + c) * ldy + 8 * g, out[c][g], n_rows - 8 * g);
  }
}

}  // namespace

PanelFn avx2_legacy_panel(gguf::GgmlType t, bool packed) {
  switch (t) {
    case gguf::GgmlType::Q4_0: return packed ? panel<Q4_0, true> : panel<Q4_0, false>;
    case gguf::GgmlType::Q8_0: return packed ? panel<Q8_0, true> : panel<Q8_0, false>;
    case gguf::GgmlType::IQ4_NL: return packed ? panel<Iq4Nl, true> : panel<Iq4Nl, false>;
    case gguf::GgmlType::MXFP4: return packed ? panel<Mxfp4, true> : panel<Mxfp4, false>;
    default: return nullptr;
  }
}

}  // namespace tern::kernels::x86
