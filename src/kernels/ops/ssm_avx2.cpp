// State-space kernels compiled for the avx2 level (see ssm_impl.h).
#include "kernels/ops/ssm_impl.h"

namespace tern::kernels {

extern const SsmKernels kSsm_avx2;
const SsmKernels kSsm_avx2 = {ssm_conv_impl, ssm_scan_impl};

}  // namespace tern::kernels
