#include "kernels/elementwise.h"

namespace tern::kernels {

extern const ElementwiseKernels kElementwise_scalar;
#if defined(__x86_64__)
extern const ElementwiseKernels kElementwise_avx2;
extern const ElementwiseKernels kElementwise_avx512;
#elif defined(__aarch64__)
extern const ElementwiseKernels kElementwise_neon;
#endif

const ElementwiseKernels* elementwise_kernels_at(CpuLevel level) {
  if (!cpu_supports(level)) return nullptr;
  switch (level) {
#if defined(__x86_64__)
    case CpuLevel::Avx512: return &kElementwise_avx512;
    case CpuLevel::Avx2: return &kElementwise_avx2;
#elif defined(__aarch64__)
    // One table for the three levels: the compiler's NEON code (the integer
    // dot-product instructions only matter to the matmul kernels).
    case CpuLevel::Neon:
    case CpuLevel::NeonDot:
    case CpuLevel::NeonI8mm: return &kElementwise_neon;
#endif
    default: break;
  }
  return &kElementwise_scalar;
}

const ElementwiseKernels& elementwise_kernels() {
  static const ElementwiseKernels& k = *elementwise_kernels_at(best_cpu_level());
  return k;
}

}  // namespace tern::kernels
