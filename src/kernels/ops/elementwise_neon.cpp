// Element-wise kernels compiled for the neon level (see elementwise_impl.h).
#include "kernels/ops/elementwise_impl.h"

namespace tern::kernels {

extern const ElementwiseKernels kElementwise_neon;
const ElementwiseKernels kElementwise_neon = {swiglu_impl, geglu_impl, softcap_impl};

}  // namespace tern::kernels
