// AArch64 tiles for the float weight types (F32, F16, BF16, FP8 E4M3/E5M2)
// against f32 activations, at the baseline level: each weight converted to f32
// in registers (FCVTL for halves, a 16-bit shift for bfloat16; FP8 through
// half: E5M2 is a half's high byte, E4M3 a half from core/fp8.h's table) and
// multiplied with FMLA. Every conversion is exact.
//
// Output (r, c) keeps four partial sums (element i in lane i % 4), adds them
// in a fixed order at the end, then the row's last n % 4 products one by one:
// the same operations whatever the tile shape (a tile of fewer rows repeats
// its last row in the spare accumulators).
#include <arm_neon.h>

#include <cstddef>
#include <cstdint>
#include <cstring>

#include "core/fp16.h"
#include "core/fp8.h"
#include "kernels/arm/arm_impl.h"
#include "kernels/arm/tile_dispatch.h"

namespace tern::kernels::arm {
namespace {

using gguf::GgmlType;

struct F32W {
  static constexpr size_t kElem = 4;
  static float32x4_t load4(const uint8_t* p) { return vld1q_f32(reinterpret_cast<const float*>(p)); }
  static float load1(const uint8_t* p) {
    float v;
    std::memcpy(&v, p, 4);
    return v;
  }
};

struct F16W {
  static constexpr size_t kElem = 2;
  static float32x4_t load4(const uint8_t* p) {
    return vcvt_f32_f16(vreinterpret_f16_u16(vld1_u16(reinterpret_cast<const uint16_t*>(p))));
  }
  static float load1(const uint8_t* p) {
    uint16_t h;
    std::memcpy(&h, p, 2);
    return fp16_to_float(h);
  }
};

struct Bf16W {
  static constexpr size_t kElem = 2;
  static float32x4_t load4(const uint8_t* p) {
    return vreinterpretq_f32_u32(vshll_n_u16(vld1_u16(reinterpret_cast<const uint16_t*>(p)), 16));
  }
  static float load1(const uint8_t* p) {
    uint16_t h;
    std::memcpy(&h, p, 2);
    return bits_to_float(static_cast<uint32_t>(h) << 16);
  }
};

// E5M2: each byte shifted into the high byte of a half.
struct F8E5M2W {
  static constexpr size_t kElem = 1;
  static float32x4_t load4(const uint8_t* p) {
    uint32_t b;
    std::memcpy(&b, p, 4);
    const uint16x4_t h = vshl_n_u16(vget_low_u16(vmovl_u8(vcreate_u8(b))), 8);
    return vcvt_f32_f16(vreinterpret_f16_u16(h));
  }
  static float load1(const uint8_t* p) { return fp16_to_float(static_cast<uint16_t>(p[0] << 8)); }
};

// E4M3: four table lookups into a half vector.
struct F8E4M3W {
  static constexpr size_t kElem = 1;
  static float32x4_t load4(const uint8_t* p) {
    const uint16_t h[4] = {kFp8E4M3Half[p[0]], kFp8E4M3Half[p[1]], kFp8E4M3Half[p[2]], kFp8E4M3Half[p[3]]};
    return vcvt_f32_f16(vreinterpret_f16_u16(vld1_u16(h)));
  }
  static float load1(const uint8_t* p) { return fp16_to_float(kFp8E4M3Half[p[0]]); }
};

template <class WT>
struct FloatTile {
  template <int C>
  static void tile(int64_t n, const uint8_t* w, size_t w_stride, int n_rows, const uint8_t* x, size_t x_stride,
                   float* y, size_t ldy) {
    const uint8_t* rows[4];
    for (int r = 0; r < 4; ++r) rows[r] = w + static_cast<size_t>(r < n_rows ? r : n_rows - 1) * w_stride;
    const float* xs[C];
    for (int c = 0; c < C; ++c) xs[c] = reinterpret_cast<const float*>(x + c * x_stride);
    float32x4_t acc[4][C];
    for (auto& a : acc)
      for (auto& v : a) v = vdupq_n_f32(0.0f);
    const int64_t n4 = n / 4 * 4;
    for (int64_t i = 0; i < n4; i += 4) {
      float32x4_t xv[C];
      for (int c = 0; c < C; ++c) xv[c] = vld1q_f32(xs[c] + i);
      for (int r = 0; r < 4; ++r) {
        const float32x4_t wv = WT::load4(rows[r] + i * WT::kElem);
        for (int c = 0; c < C; ++c) acc[r][c] = vfmaq_f32(acc[r][c], wv, xv[c]);
      }
    }
    for (int c = 0; c < C; ++c)
      for (int r = 0; r < n_rows; ++r) {
        float s = vaddvq_f32(acc[r][c]);
        for (int64_t i = n4; i < n; ++i) s = __builtin_fmaf(WT::load1(rows[r] + i * WT::kElem), xs[c][i], s);
        y[c * ldy + r] = s;
      }
  }
};

void copy_f32(const float* x, void* xq, int64_t n) { std::memcpy(xq, x, static_cast<size_t>(n) * sizeof(float)); }

template <class WT>
constexpr MatmulKernels float_row() {
  return {GgmlType::F32, copy_f32, dispatch<FloatTile<WT>, 4>, 4, 4, CpuLevel::Neon};
}

constexpr MatmulKernels kF32 = float_row<F32W>();
constexpr MatmulKernels kF16 = float_row<F16W>();
constexpr MatmulKernels kBf16 = float_row<Bf16W>();
constexpr MatmulKernels kF8E4M3 = float_row<F8E4M3W>();
constexpr MatmulKernels kF8E5M2 = float_row<F8E5M2W>();

}  // namespace

const MatmulKernels* neon_float_kernels(GgmlType t) {
  switch (t) {
    case GgmlType::F32: return &kF32;
    case GgmlType::F16: return &kF16;
    case GgmlType::BF16: return &kBf16;
    case GgmlType::F8_E4M3: return &kF8E4M3;
    case GgmlType::F8_E5M2: return &kF8E5M2;
    default: return nullptr;
  }
}

}  // namespace tern::kernels::arm
