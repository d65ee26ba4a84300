#include "kernels/matmul_kernels.h"

#include <cstring>
#include <vector>

#include "kernels/sparse24.h"
#include "kernels/w8a8.h"
#include "quant/blocks.h"
#if defined(__x86_64__)
#include "kernels/x86/x86_kernels.h"
#elif defined(__aarch64__)
#include "kernels/arm/arm_impl.h"
#endif
#include "quant/quant.h"

namespace tern::kernels {
namespace {

using gguf::GgmlType;

void copy_f32(const float* x, void* xq, int64_t n) { std::memcpy(xq, x, n * sizeof(float)); }

// Reference tile: f32 activations, the quant traits' scalar vec_dot.
template <GgmlType T>
void scalar_tile(int64_t n, const void* w, size_t w_stride, int n_rows, const void* xq, size_t x_stride, int n_cols,
                 float* y, size_t ldy) {
  static const quant::TypeTraits* tr = quant::traits(T);
  for (int c = 0; c < n_cols; ++c) {
    const auto* x = reinterpret_cast<const float*>(static_cast<const uint8_t*>(xq) + c * x_stride);
    for (int r = 0; r < n_rows; ++r) y[c * ldy + r] = tr->vec_dot(static_cast<const uint8_t*>(w) + r * w_stride, x, n);
  }
}

template <GgmlType T>
constexpr MatmulKernels scalar_row() {
  return {GgmlType::F32, copy_f32, scalar_tile<T>, 4, 4, CpuLevel::Scalar};
}

constexpr MatmulKernels kScalar[] = {
    scalar_row<GgmlType::F32>(),  scalar_row<GgmlType::F16>(),  scalar_row<GgmlType::BF16>(),
    scalar_row<GgmlType::Q4_0>(), scalar_row<GgmlType::Q4_1>(), scalar_row<GgmlType::Q5_0>(),
    scalar_row<GgmlType::Q5_1>(), scalar_row<GgmlType::Q8_0>(), scalar_row<GgmlType::Q2_K>(),
    scalar_row<GgmlType::Q3_K>(), scalar_row<GgmlType::Q4_K>(), scalar_row<GgmlType::Q5_K>(),
    scalar_row<GgmlType::Q6_K>(), scalar_row<GgmlType::IQ4_NL>(), scalar_row<GgmlType::IQ4_XS>(),
    scalar_row<GgmlType::MXFP4>(),
    // W8A8 quantizes activations even here: the reference of its arithmetic (kernels/w8a8.h).
    {GgmlType::I8, quantize_act_i8, w8_tile_scalar, 4, 4, CpuLevel::Scalar},
    scalar_row<GgmlType::F8_E4M3>(), scalar_row<GgmlType::F8_E5M2>(), scalar_row<GgmlType::Q8_0_S24>(),
};
constexpr GgmlType kScalarTypes[] = {GgmlType::F32,  GgmlType::F16,  GgmlType::BF16, GgmlType::Q4_0, GgmlType::Q4_1,
                                     GgmlType::Q5_0, GgmlType::Q5_1, GgmlType::Q8_0, GgmlType::Q2_K, GgmlType::Q3_K,
                                     GgmlType::Q4_K, GgmlType::Q5_K, GgmlType::Q6_K, GgmlType::IQ4_NL,
                                     GgmlType::IQ4_XS, GgmlType::MXFP4, GgmlType::I8,
                                     GgmlType::F8_E4M3, GgmlType::F8_E5M2, GgmlType::Q8_0_S24};

const MatmulKernels* scalar_kernels(GgmlType t) {
  for (size_t i = 0; i < sizeof(kScalarTypes) / sizeof(kScalarTypes[0]); ++i)
    if (kScalarTypes[i] == t) return &kScalar[i];
  return nullptr;
}

// Q8_0_S24 at a level without a kernel of its own (AVX-512 without VBMI2,
// AVX2, Arm): the level's Q8_0 kernels on the rows expanded to Q8_0 (zeros
// where pruned) -- the results of the Q8_0 encoding of the same pruned rows,
// without the sparse format's saving. Where Q8_0 has packed panels, the rows
// are expanded once, at load (PackLayout::s24_as_q8_0), and run at Q8_0's
// speed; otherwise each tile's rows are expanded on every call (slow).
template <CpuLevel L>
void s24_via_q8_0(int64_t n, const void* w, size_t w_stride, int n_rows, const void* xq, size_t x_stride, int n_cols,
                  float* y, size_t ldy) {
  static const MatmulKernels* q8 = matmul_kernels_at(GgmlType::Q8_0, L);
  const size_t row = static_cast<size_t>(n / quant::kQK8_0) * sizeof(quant::BlockQ8_0);
  thread_local std::vector<uint8_t> rows;  // [n_rows][row]
  if (rows.size() < row * n_rows) rows.resize(row * n_rows);
  for (int r = 0; r < n_rows; ++r)
    expand_s24_to_q8_0(static_cast<const uint8_t*>(w) + r * w_stride, rows.data() + r * row, n);
  q8->tile(n, rows.data(), row, n_rows, xq, x_stride, n_cols, y, ldy);
}

template <CpuLevel L>
const MatmulKernels* s24_via_q8_0_kernels() {
  static const MatmulKernels k = [] {
    const MatmulKernels* q8 = matmul_kernels_at(GgmlType::Q8_0, L);
    MatmulKernels v{q8->act_type, q8->quantize_act, s24_via_q8_0<L>, q8->max_rows, q8->max_cols, L};
    v.act_block_bytes = q8->act_block_bytes;
    v.act_biased = q8->act_biased;
    if (q8->packed_tile && !q8->pack.by_element) {  // packed: the rows expanded once, at load
      v.pack = q8->pack;
      v.pack.s24_as_q8_0 = true;
      v.packed_tile = q8->packed_tile;
    }
    return v;
  }();
  return &k;
}

const MatmulKernels* s24_kernels_at(CpuLevel level) {
  if (!matmul_kernels_at(GgmlType::Q8_0, level)) return nullptr;
  switch (level) {
#if defined(__x86_64__)
    case CpuLevel::Avx2: return s24_via_q8_0_kernels<CpuLevel::Avx2>();
    case CpuLevel::Avx512:
      return cpu_features().avx512vbmi2 ? x86::avx512_matmul_kernels(GgmlType::Q8_0_S24)
                                        : s24_via_q8_0_kernels<CpuLevel::Avx512>();
#elif defined(__aarch64__)
    case CpuLevel::Neon: return s24_via_q8_0_kernels<CpuLevel::Neon>();
    case CpuLevel::NeonDot: return s24_via_q8_0_kernels<CpuLevel::NeonDot>();
    case CpuLevel::NeonI8mm: return s24_via_q8_0_kernels<CpuLevel::NeonI8mm>();
#endif
    default: return nullptr;
  }
}

}  // namespace

const MatmulKernels* matmul_kernels_at(GgmlType weight_type, CpuLevel level) {
  if (!cpu_supports(level)) return nullptr;
  if (weight_type == GgmlType::Q8_0_S24 && level != CpuLevel::Scalar) return s24_kernels_at(level);
  switch (level) {
    case CpuLevel::Scalar: return scalar_kernels(weight_type);
#if defined(__x86_64__)
    case CpuLevel::Avx2: return x86::avx2_matmul_kernels(weight_type);
    case CpuLevel::Avx512: return x86::avx512_matmul_kernels(weight_type);
#elif defined(__aarch64__)
    case CpuLevel::Neon:
    case CpuLevel::NeonDot:
    case CpuLevel::NeonI8mm: return arm::neon_matmul_kernels(weight_type, level);
#endif
    default: break;
  }
  return nullptr;
}

const MatmulKernels* matmul_kernels(GgmlType weight_type) {
  for (int l = static_cast<int>(best_cpu_level()); l >= 0; --l)
    if (const MatmulKernels* k = matmul_kernels_at(weight_type, static_cast<CpuLevel>(l))) return k;
  return nullptr;
}

size_t act_row_bytes(const MatmulKernels& k, int64_t n) {
  if (k.act_type == GgmlType::I8) return w8_act_row_bytes(n);
  auto s = gguf::type_size(static_cast<uint32_t>(k.act_type));
  return static_cast<size_t>(n / s->block_elems) * s->block_bytes;
}

}  // namespace tern::kernels
