// The quantized AArch64 tiles (neon_quant_impl.h) compiled for the baseline:
// integer products by SMULL/SMLAL2 and SADALP.
#include "kernels/arm/neon_quant_impl.h"

namespace tern::kernels::arm {

const MatmulKernels* neon_quant_kernels(gguf::GgmlType t) { return quant_table<CpuLevel::Neon, true>(t); }

}  // namespace tern::kernels::arm
