#include "kernels/elementwise.h"

namespace tern::kernels {

extern const ElementwiseKernels kElementwise_scalar;
extern const ElementwiseKernels kElementwise_avx2;
extern const ElementwiseKernels kElementwise_avx512;

const ElementwiseKernels* elementwise_kernels_at(CpuLevel level) {
  if (!cpu_supports(level)) return nullptr;
  switch (level) {
    case CpuLevel::Avx512: return &kElementwise_avx512;
    case CpuLevel::Avx2: return &kElementwise_avx2;
    case CpuLevel::Scalar: break;
  }
  return &kElementwise_scalar;
}

const ElementwiseKernels& elementwise_kernels() {
  static const ElementwiseKernels& k = *elementwise_kernels_at(best_cpu_level());
  return k;
}

}  // namespace tern::kernels
