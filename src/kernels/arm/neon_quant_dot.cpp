// The quantized AArch64 tiles (neon_quant_impl.h) compiled for the dotprod
// level: integer products by SDOT.
#include "kernels/arm/neon_quant_impl.h"

namespace tern::kernels::arm {

const MatmulKernels* neon_dot_quant_kernels(gguf::GgmlType t) { return quant_table<CpuLevel::NeonDot, true>(t); }

}  // namespace tern::kernels::arm
