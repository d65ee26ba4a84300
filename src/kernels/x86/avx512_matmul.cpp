// AVX-512 (F/BW/VL/DQ/VNNI) matmul kernel table: asks each family in turn.
#include "kernels/x86/x86_impl.h"

namespace tern::kernels::x86 {

const MatmulKernels* avx512_matmul_kernels(gguf::GgmlType weight_type) {
  if (const MatmulKernels* k = avx512_legacy_kernels(weight_type)) return k;
  if (const MatmulKernels* k = avx512_kquant_kernels(weight_type)) return k;
  if (const MatmulKernels* k = avx512_w8a8_kernels(weight_type)) return k;
  return avx512_float_kernels(weight_type);
}

}  // namespace tern::kernels::x86
