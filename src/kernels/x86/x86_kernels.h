// kernels/x86/x86_kernels.h — entry points of the x86 SIMD kernel families.
//
// Each returns the MatmulKernels row for a weight type at its level, or
// nullptr when that level has no kernel for the type (the dispatcher then
// falls back to a lower level). The files behind these are compiled with
// their level's target flags; callers must check cpu_supports() first.
#pragma once

#include "kernels/matmul_kernels.h"

namespace tern::kernels::x86 {

const MatmulKernels* avx2_matmul_kernels(gguf::GgmlType weight_type);
const MatmulKernels* avx512_matmul_kernels(gguf::GgmlType weight_type);

}  // namespace tern::kernels::x86
