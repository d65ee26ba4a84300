// Element-wise kernels compiled for the avx2 level (see elementwise_impl.h).
#include "kernels/ops/elementwise_impl.h"

namespace tern::kernels {

extern const ElementwiseKernels kElementwise_avx2;
const ElementwiseKernels kElementwise_avx2 = {swiglu_impl, geglu_impl, softcap_impl};

}  // namespace tern::kernels
