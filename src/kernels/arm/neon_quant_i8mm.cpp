// The quantized AArch64 tiles (neon_quant_impl.h) compiled for the i8mm level:
// the 32-element types by SMMLA; the K-quants fall back to the dotprod level.
#include "kernels/arm/neon_quant_impl.h"

namespace tern::kernels::arm {

const MatmulKernels* neon_i8mm_quant_kernels(gguf::GgmlType t) { return quant_table<CpuLevel::NeonI8mm, false>(t); }

}  // namespace tern::kernels::arm
