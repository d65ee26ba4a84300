// kernels/ref/ssm_reference.h — the state-space kernels of kernels/ssm.h one
// element at a time, in double with libm's exp and log1p, rounded to float
// where the result is stored (output rows, the carried state): the reference
// backend's arithmetic and the oracle the per-level kernels are tested against.
#pragma once

#include "kernels/ssm.h"

namespace tern::kernels {

void ssm_conv_reference(const SsmConvArgs& a);
void ssm_scan_reference(const SsmScanArgs& a);

}  // namespace tern::kernels
