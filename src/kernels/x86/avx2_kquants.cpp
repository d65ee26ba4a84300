// The AVX2 K-quant tables (Q2_K .. Q6_K against Q8_K activations): every tile
// runs the 32-row panels of avx2_panel_kquants.cpp, on rows in place or packed
// at load with the layouts below (lead bytes, dwords, trailing bytes).
#include <immintrin.h>

#include <cstddef>
#include <cstdint>

#include "kernels/x86/avx2_util.h"
#include "kernels/x86/x86_impl.h"
#include "quant/k_blocks.h"

namespace tern::kernels::x86 {
namespace {

using gguf::GgmlType;
constexpr int kPanelRows = 32, kPanelCols = 32;  // avx2_panel_kquants.cpp

// Every K-quant tile runs through the row-per-lane panels of avx2_panel_kquants.cpp.
template <GgmlType kType>
void panel_tile(int64_t n, const void* w, size_t w_stride, int n_rows, const void* xq, size_t x_stride, int n_cols,
                float* y, size_t ldy) {
  avx2_kquant_panel(kType, false)(n, static_cast<const uint8_t*>(w), w_stride, n_rows, static_cast<const uint8_t*>(xq),
                                  x_stride, n_cols, y, ldy);
}

template <GgmlType kType>
void packed_panel_tile(int64_t n, const void* panel, int n_rows, const void* xq, size_t x_stride, int n_cols, float* y,
                       size_t ldy) {
  avx2_kquant_panel(kType, true)(n, static_cast<const uint8_t*>(panel), 0, n_rows, static_cast<const uint8_t*>(xq),
                                 x_stride, n_cols, y, ldy);
}

// Block layout of the packed panels (lead bytes, dwords, trailing bytes): as the AVX-512 level's
// where it has the type (Q4_K, Q5_K, Q6_K).
template <GgmlType kType>
constexpr MatmulKernels panel_row(MatmulKernels::PackLayout layout) {
  return {GgmlType::Q8_K, avx2_quantize_q8_k, panel_tile<kType>, kPanelRows, kPanelCols, CpuLevel::Avx2,
          layout, packed_panel_tile<kType>};
}

constexpr MatmulKernels kQ2_K = panel_row<GgmlType::Q2_K>({0, 21, 0});
constexpr MatmulKernels kQ3_K = panel_row<GgmlType::Q3_K>({0, 27, 2});
constexpr MatmulKernels kQ4_K = panel_row<GgmlType::Q4_K>({0, 36, 0});
constexpr MatmulKernels kQ5_K = panel_row<GgmlType::Q5_K>({0, 44, 0});
constexpr MatmulKernels kQ6_K = panel_row<GgmlType::Q6_K>({0, 52, 2});

}  // namespace

const MatmulKernels* avx2_kquant_kernels(GgmlType t) {
  switch (t) {
    case GgmlType::Q2_K: return &kQ2_K;
    case GgmlType::Q3_K: return &kQ3_K;
    case GgmlType::Q4_K: return &kQ4_K;
    case GgmlType::Q5_K: return &kQ5_K;
    case GgmlType::Q6_K: return &kQ6_K;
    default: return nullptr;
  }
}

}  // namespace tern::kernels::x86
