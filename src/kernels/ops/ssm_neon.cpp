// State-space kernels compiled for the neon level (see ssm_impl.h).
#include "kernels/ops/ssm_impl.h"

namespace tern::kernels {

extern const SsmKernels kSsm_neon;
const SsmKernels kSsm_neon = {ssm_conv_impl, ssm_scan_impl};

}  // namespace tern::kernels
