// State-space kernels compiled for the scalar level (see ssm_impl.h).
#include "kernels/ops/ssm_impl.h"

namespace tern::kernels {

extern const SsmKernels kSsm_scalar;
const SsmKernels kSsm_scalar = {ssm_conv_impl, ssm_scan_impl};

}  // namespace tern::kernels
