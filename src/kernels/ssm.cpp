#include "kernels/ssm.h"

namespace tern::kernels {

extern const SsmKernels kSsm_scalar;
#if defined(__x86_64__)
extern const SsmKernels kSsm_avx2;
extern const SsmKernels kSsm_avx512;
#elif defined(__aarch64__)
extern const SsmKernels kSsm_neon;
#endif

const SsmKernels* ssm_kernels_at(CpuLevel level) {
  if (!cpu_supports(level)) return nullptr;
  switch (level) {
#if defined(__x86_64__)
    case CpuLevel::Avx512: return &kSsm_avx512;
    case CpuLevel::Avx2: return &kSsm_avx2;
#elif defined(__aarch64__)
    // One table for the three levels: the compiler's NEON code (the integer
    // dot-product instructions only matter to the matmul kernels).
    case CpuLevel::Neon:
    case CpuLevel::NeonDot:
    case CpuLevel::NeonI8mm: return &kSsm_neon;
#endif
    default: break;
  }
  return &kSsm_scalar;
}

const SsmKernels& ssm_kernels() {
  static const SsmKernels& k = *ssm_kernels_at(best_cpu_level());
  return k;
}

}  // namespace tern::kernels
