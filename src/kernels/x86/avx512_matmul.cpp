// AVX-512 (F/BW/VL/DQ/VNNI) matmul kernels (compiled with the AVX-512 flags).
#include "kernels/x86/x86_kernels.h"

namespace tern::kernels::x86 {

const MatmulKernels* avx512_matmul_kernels(gguf::GgmlType) { return nullptr; }

}  // namespace tern::kernels::x86
