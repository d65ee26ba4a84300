// AVX2 panel kernels for Q4_0 against Q8_0 activations: up to 32 rows x any
// number of columns. Every Q4_0 tile at this level runs here, prompt and
// decode alike, so a (row, token) result is the same whatever the batch.
//
// Row-per-lane, as avx512_panel_legacy.cpp, in four groups of 8 rows (ymm
// lane r = row 8g + r). Per block (8 dwords of 4 elements) and column:
//
//   s16 = sum_k vpmaddubsw(q_k, bcast(x dword k))     q = nibble 0..15, x int8
//   t   = vpmaddwd(s16, 1) - 8 * sum(x)               = sum((q - 8) x), exact
//   out += f32(t) * (dw * dx)
//
// s16 stays in int16: each lane's two pair sums gather 8 products of at most
// 15 * 128 each (<= 30,720 < 2^15). The float steps are the AVX-512 panel's,
// on the same exact integer, so the two levels agree bit for bit.
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
constexpr size_t kWBytes = sizeof(quant::BlockQ4_0);
constexpr size_t kXBytes = sizeof(quant::BlockQ8_0);
constexpr size_t kPackedBlock = 32 * kWBytes;

// Where block ib of the panel's rows comes from; both give the same values in
// the same lanes (and so the same results), the packed one without transposes.
//
// Rows in place: row r's block at rows[r] + off.
struct RowSource {
  const uint8_t* const* rows;  // [32]
  size_t off;
  __m256 d(int g) const {
    const uint8_t* const* r = rows + 8 * g;
    const __m128i h = _mm_setr_epi16(static_cast<short>(load_u16(r[0] + off)), static_cast<short>(load_u16(r[1] + off)),
                                     static_cast<short>(load_u16(r[2] + off)), static_cast<short>(load_u16(r[3] + off)),
                                     static_cast<short>(load_u16(r[4] + off)), static_cast<short>(load_u16(r[5] + off)),
                                     static_cast<short>(load_u16(r[6] + off)), static_cast<short>(load_u16(r[7] + off)));
    return _mm256_cvtph_ps(h);
  }
  void qs(int g, __m256i out[4]) const { transpose_8x4(rows + 8 * g, off + 2, out); }
};

// Rows in place for the streaming loop: the block's four groups transposed up front.
struct RowBlock {
  RowSource src;
  __m256i q[kGroups][4];
  explicit RowBlock(const RowSource& s) : src(s) {
    for (int g = 0; g < kGroups; ++g) src.qs(g, q[g]);
  }
  __m256i dword(int g, int j) const { return q[g][j]; }
  __m256 d(int g) const { return src.d(g); }
};

// A packed block (MatmulKernels::pack {2, 4, 0}):
//   [32 x fp16 d] [half h = 0, 1][dword j < 4][16 rows x 4 bytes]
// so group g's dword j is the 32 bytes at 64 + (4 (g / 2) + j) * 64 + 32 (g % 2).
struct PackedSource {
  const uint8_t* blk;
  __m256 d(int g) const { return _mm256_cvtph_ps(load_128(blk + 16 * g)); }
  __m256i dword(int g, int j) const { return load_256(blk + 64 + (g / 2) * 256 + (g % 2) * 32 + 64 * j); }
  void qs(int g, __m256i out[4]) const {
    for (int j = 0; j < 4; ++j) out[j] = dword(g, j);
  }
};

// One column's block: its 8 activation dwords, 8 * sum(x) in every lane, and dx.
struct XBlock {
  __m256i q[8];
  __m256i off;
  __m256 dx;
  explicit XBlock(const uint8_t* xb) {
    for (int k = 0; k < 8; ++k) q[k] = bcast_dword(xb + 2 + 4 * k);
    __m256i s = _mm256_madd_epi16(_mm256_maddubs_epi16(bytes(1), load_256(xb + 2)), _mm256_set1_epi16(1));
    s = _mm256_add_epi32(s, _mm256_shuffle_epi32(s, 0x4e));
    s = _mm256_add_epi32(s, _mm256_shuffle_epi32(s, 0xb1));
    s = _mm256_add_epi32(s, _mm256_permute2x128_si256(s, s, 0x01));
    off = _mm256_slli_epi32(s, 3);
    dx = _mm256_set1_ps(f16_to_f32(xb));
  }
};

// out += f32(vpmaddwd(s16, 1) - off) * (d * dx): the float steps every path shares.
inline __m256 finish(__m256i s16, const XBlock& x, __m256 d, __m256 out) {
  const __m256i t = _mm256_sub_epi32(_mm256_madd_epi16(s16, _mm256_set1_epi16(1)), x.off);
  return _mm256_fmadd_ps(_mm256_cvtepi32_ps(t), _mm256_mul_ps(d, x.dx), out);
}

// Nibbles of qs dword j: low = element dword j, high = element dword 4 + j.
inline __m256i lo_nibbles(__m256i v) { return _mm256_and_si256(v, bytes(0x0f)); }
inline __m256i hi_nibbles(__m256i v) { return _mm256_and_si256(_mm256_srli_epi16(v, 4), bytes(0x0f)); }

// One block of all four groups against one column, unpacking each weight
// dword as it is used: per dword j, the column's two activation dwords (j and
// 4 + j) against the four groups' dword j, in four int16 accumulators.
template <class Src>
inline void block_stream(const Src& src, const XBlock& x, __m256 out[kGroups]) {
  __m256i s[kGroups];
  for (int j = 0; j < 4; ++j) {
    for (int g = 0; g < kGroups; ++g) {
      const __m256i w = src.dword(g, j);
      const __m256i t = _mm256_add_epi16(_mm256_maddubs_epi16(lo_nibbles(w), x.q[j]),
                                         _mm256_maddubs_epi16(hi_nibbles(w), x.q[4 + j]));
      s[g] = j == 0 ? t : _mm256_add_epi16(s[g], t);
    }
  }
  for (int g = 0; g < kGroups; ++g) out[g] = finish(s[g], x, src.d(g), out[g]);
}

// The same sums from unpacked weights u[k] = element dword k of the group.
inline __m256 group_unpacked(const __m256i* u, const XBlock& x, __m256 d, __m256 out) {
  __m256i s = _mm256_maddubs_epi16(u[0], x.q[0]);
  s = _mm256_add_epi16(s, _mm256_maddubs_epi16(u[4], x.q[4]));
  for (int j = 1; j < 4; ++j) {
    s = _mm256_add_epi16(s, _mm256_maddubs_epi16(u[j], x.q[j]));
    s = _mm256_add_epi16(s, _mm256_maddubs_epi16(u[4 + j], x.q[4 + j]));
  }
  return finish(s, x, d, out);
}

template <bool kPacked>
inline auto source(const uint8_t* w, const PanelRows& rows, int64_t ib) {
  if constexpr (kPacked) {
    return PackedSource{w + ib * kPackedBlock};
  } else {
    return RowSource{rows.p, static_cast<size_t>(ib) * kWBytes};
  }
}

template <bool kPacked>
void panel(int64_t n, const uint8_t* w, size_t w_stride, int n_rows, const uint8_t* x, size_t x_stride, int n_cols,
           float* y, size_t ldy) {
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
        const XBlock xb(xc + ib * kXBytes);
        if constexpr (kPacked) {
          block_stream(source<kPacked>(w, rows, ib), xb, out);
        } else {
          block_stream(RowBlock(source<kPacked>(w, rows, ib)), xb, out);
        }
      }
      for (int g = 0; g < kGroups; ++g) store_rows(y + c * ldy + 8 * g, out[g], n_rows - 8 * g);
    }
    return;
  }
  alignas(32) __m256i u[kGroups][8];  // one block's unpacked weights
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
          for (int r = 0; r < n_rows; ++r) prefetch_span<4 * kWBytes>(rows.p[r] + (ib + 4) * kWBytes);
        }
      }
      const auto src = source<kPacked>(w, rows, ib);
      for (int g = 0; g < kGroups; ++g) {
        __m256i q[4];
        src.qs(g, q);
        for (int j = 0; j < 4; ++j) {
          u[g][j] = lo_nibbles(q[j]);
          u[g][4 + j] = hi_nibbles(q[j]);
        }
        d[g] = src.d(g);
      }
      for (int c = 0; c < nc; ++c) {
        const XBlock xb(x + (c0 + c) * x_stride + ib * kXBytes);
        for (int g = 0; g < kGroups; ++g) out[c][g] = group_unpacked(u[g], xb, d[g], out[c][g]);
      }
    }
    for (int c = 0; c < nc; ++c)
      for (int g = 0; g < kGroups; ++g) store_rows(y + (c0 + c) * ldy + 8 * g, out[c][g], n_rows - 8 * g);
  }
}

}  // namespace

PanelFn avx2_legacy_panel(gguf::GgmlType t, bool packed) {
  if (t != gguf::GgmlType::Q4_0) return nullptr;
  return packed ? panel<true> : panel<false>;
}

}  // namespace tern::kernels::x86
