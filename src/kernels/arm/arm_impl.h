// kernels/arm/arm_impl.h — the AArch64 kernel families behind matmul_kernels_at (internal).
//
// Files per level (kernels/CMakeLists.txt gives each its flags):
//
//   neon_quant_impl.h     the quantized tiles, written once: Q4_0 Q8_0 IQ4_NL
//                         (Q8_0 activations), Q4_K Q6_K (Q8_K activations)
//   neon_quant.cpp        ... compiled for the baseline (Advanced SIMD: SMULL/SADALP)
//   neon_quant_dot.cpp    ... for Armv8.2 dotprod (SDOT)
//   neon_quant_i8mm.cpp   ... for i8mm (SMMLA, 2 rows x 2 columns per instruction;
//                         the 32-element types only, K-quants fall back to dotprod)
//   neon_float.cpp        F32 F16 BF16 FP8 weights against f32 activations (baseline)
//   tile_dispatch.h       n_cols at run time to the tile instantiation
//   neon_matmul.cpp       the level's table: asks each family in turn
//   peak_loops_arm.cpp    the roofline's throughput loops
//
// Every integer sum in the quantized tiles is exact, and the float operations
// applied to a block's sum are the same at the three levels, so their outputs
// are bit-identical to one another and across tile shapes (a tile of fewer
// rows or columns repeats the last one rather than taking another path).
//
// ODR rule for the files compiled with -march flags above the baseline:
// include only <arm_neon.h>, <cstdint>, <cstddef>, <cstring> and headers that
// declare plain structs and non-inline functions; keep helpers in an anonymous
// namespace (as x86/x86_impl.h says for the AVX files).
#pragma once

#include "kernels/matmul_kernels.h"

namespace tern::kernels::arm {

// The activation quantizers (neon_matmul.cpp, baseline code): quant::traits'
// from_float for Q8_0 and Q8_K, the reference every level matches bit for bit.
void quantize_act_q8_0(const float* x, void* xq, int64_t n);
void quantize_act_q8_k(const float* x, void* xq, int64_t n);

// The quantized families' row for the type at one level (Neon, NeonDot or NeonI8mm), or nullptr.
const MatmulKernels* neon_quant_kernels(gguf::GgmlType weight_type);
const MatmulKernels* neon_dot_quant_kernels(gguf::GgmlType weight_type);
const MatmulKernels* neon_i8mm_quant_kernels(gguf::GgmlType weight_type);
const MatmulKernels* neon_float_kernels(gguf::GgmlType weight_type);

// The table for `level` (one of the Neon levels): nullptr where that level has
// no kernel of its own for the type (the dispatcher then asks a lower level).
const MatmulKernels* neon_matmul_kernels(gguf::GgmlType weight_type, CpuLevel level);

}  // namespace tern::kernels::arm
