// AVX2+FMA+F16C matmul kernels (compiled with -mavx2 -mfma -mf16c).
#include "kernels/x86/x86_kernels.h"

namespace tern::kernels::x86 {

const MatmulKernels* avx2_matmul_kernels(gguf::GgmlType) { return nullptr; }

}  // namespace tern::kernels::x86
