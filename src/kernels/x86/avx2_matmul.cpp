// AVX2+FMA+F16C matmul kernel table: asks each family in turn.
#include "kernels/x86/x86_impl.h"

namespace tern::kernels::x86 {

const MatmulKernels* avx2_matmul_kernels(gguf::GgmlType weight_type) {
  if (const MatmulKernels* k = avx2_legacy_kernels(weight_type)) return k;
  if (const MatmulKernels* k = avx2_kquant_kernels(weight_type)) return k;
  if (const MatmulKernels* k = avx2_w8a8_kernels(weight_type)) return k;
  if (const MatmulKernels* k = avx2_by_element_kernels(weight_type)) return k;
  return avx2_float_kernels(weight_type);
}

}  // namespace tern::kernels::x86
