// stub
#include "kernels/x86/x86_impl.h"

namespace tern::kernels::x86 {

const MatmulKernels* avx2_float_kernels(gguf::GgmlType) { return nullptr; }

}  // namespace tern::kernels::x86
