// AVX-512 panel kernel for Q8_0_S24 weights (2:4-sparse Q8_0, quant/blocks.h),
// compiled with VBMI2 on top of the Avx512 level's flags and called only when
// the CPU has it (avx512_legacy.cpp's table).
//
// It is the Q8_0 panel of avx512_panel_legacy.h with one change: a block's
// weights come from the packed sparse layout (kernels/sparse24.h), each group
// of 4 columns of 16 rows expanded from its 32 kept bytes by one vpexpandb
// under the rows' mask nibbles into exactly the dword lanes the dense Q8_0
// kernel loads. From there the arithmetic is Q8_0's, so a Q8_0_S24 matrix
// gives bit-identical results to the Q8_0 encoding of the same pruned rows,
// while reading 22 bytes per 32 weights instead of 34.
#include "kernels/sparse24.h"
#include "kernels/x86/avx512_panel_legacy.h"

namespace tern::kernels::x86 {
namespace {

struct Q8_0S24 {
  static constexpr bool kOwnLayout = true;
  static constexpr size_t kBytes = sizeof(quant::BlockQ8_0S24);  // a packed block is 32 of them
  static constexpr int kOffset = 128;
  // 8 blocks (5.6 KB) ahead, about Q8_0's 4 x 1,088 bytes: measured on bench-1b decode
  // (bench/prune.md), 4 gave S24/Q8_0 1.38x, 8 gave 1.42x (medians of 6 interleaved pairs).
  static constexpr int64_t kGemvAhead = 8;

  // Rows in place (an unpacked matrix) are packed block by block first: the
  // same bytes, so the same results, at the cost of the scalar re-ordering.
  template <bool kSigned, bool kPacked>
  static void decode_block(const uint8_t* w, const uint8_t* const* rows, int64_t ib, Decoded& dec) {
    alignas(64) uint8_t buf[kS24PackedBlock];
    const uint8_t* blk = w + ib * kS24PackedBlock;
    if constexpr (!kPacked) {
      pack_s24_block(rows, ib, buf);
      blk = buf;
    }
    for (int h = 0; h < kHalves; ++h) {
      dec.d[h] = _mm512_cvtph_ps(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(blk + 32 * h)));
      const uint8_t* g = blk + 64 + static_cast<size_t>(h) * 8 * 40;
      for (int k = 0; k < 8; ++k, g += 40) {
        uint64_t m;
        std::memcpy(&m, g, sizeof m);
        // The kept values are stored + 128 (kernels/sparse24.h).
        const __m256i kept = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(g + 8));
        if constexpr (kSigned)
          dec.w[k][h] = _mm512_maskz_expand_epi8(static_cast<__mmask64>(m),
                                                 _mm512_zextsi256_si512(_mm256_xor_si256(kept, _mm256_set1_epi8(static_cast<char>(0x80)))));
        else  // unsigned form: w + 128, a pruned weight 128 (i.e. 0)
          dec.w[k][h] = _mm512_mask_expand_epi8(_mm512_set1_epi8(static_cast<char>(0x80)), static_cast<__mmask64>(m),
                                                _mm512_zextsi256_si512(kept));
      }
    }
  }
};

}  // namespace

PanelFn avx512_sparse24_panel(bool packed) { return packed ? panel<Q8_0S24, true> : panel<Q8_0S24, false>; }

}  // namespace tern::kernels::x86
