// Element-wise kernels compiled for the scalar level (see elementwise_impl.h).
#include "kernels/ops/elementwise_impl.h"

namespace tern::kernels {

extern const ElementwiseKernels kElementwise_scalar;
const ElementwiseKernels kElementwise_scalar = {swiglu_impl, geglu_impl, softcap_impl};

}  // namespace tern::kernels
