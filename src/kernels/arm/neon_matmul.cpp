// The AArch64 matmul tables: each level asks its own families.
#include "kernels/arm/arm_impl.h"

#include "quant/quant.h"

namespace tern::kernels::arm {

void quantize_act_q8_0(const float* x, void* xq, int64_t n) {
  static const quant::TypeTraits* tr = quant::traits(gguf::GgmlType::Q8_0);
  tr->from_float(x, xq, n);
}

void quantize_act_q8_k(const float* x, void* xq, int64_t n) {
  static const quant::TypeTraits* tr = quant::traits(gguf::GgmlType::Q8_K);
  tr->from_float(x, xq, n);
}

const MatmulKernels* neon_matmul_kernels(gguf::GgmlType weight_type, CpuLevel level) {
  switch (level) {
    case CpuLevel::NeonI8mm: return neon_i8mm_quant_kernels(weight_type);
    case CpuLevel::NeonDot: return neon_dot_quant_kernels(weight_type);
    case CpuLevel::Neon:
      if (const MatmulKernels* k = neon_quant_kernels(weight_type)) return k;
      return neon_float_kernels(weight_type);
    default: return nullptr;
  }
}

}  // namespace tern::kernels::arm
