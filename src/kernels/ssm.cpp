#include "kernels/ssm.h"

namespace tern::kernels {

extern const SsmKernels kSsm_scalar;
extern const SsmKernels kSsm_avx2;
extern const SsmKernels kSsm_avx512;

const SsmKernels* ssm_kernels_at(CpuLevel level) {
  if (!cpu_supports(level)) return nullptr;
  switch (level) {
    case CpuLevel::Avx512: return &kSsm_avx512;
    case CpuLevel::Avx2: return &kSsm_avx2;
    case CpuLevel::Scalar: break;
  }
  return &kSsm_scalar;
}

const SsmKernels& ssm_kernels() {
  static const SsmKernels& k = *ssm_kernels_at(best_cpu_level());
  return k;
}

}  // namespace tern::kernels
