// Element-wise kernels compiled for the avx512 level (see elementwise_impl.h).
#include "kernels/ops/elementwise_impl.h"

namespace tern::kernels {

extern const ElementwiseKernels kElementwise_avx512;
const ElementwiseKernels kElementwise_avx512 = {swiglu_impl, geglu_impl, softcap_impl};

}  // namespace tern::kernels
