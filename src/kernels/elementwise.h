// kernels/elementwise.h — element-wise activation kernels, one table per CPU level.
//
// Written once in plain C++ with 16-lane vectors (ops/elementwise_impl.h) and
// compiled per level, like the attention tile kernel. Results may differ from
// the libm reference in the last bits (a polynomial exp, ~1e-7 relative); at
// each level an element's result does not depend on n or on its position.
#pragma once

#include <cstdint>

#include "kernels/cpu_features.h"

namespace tern::kernels {

struct ElementwiseKernels {
  // gate[i] = silu(gate[i]) * up[i] = gate[i] / (1 + e^-gate[i]) * up[i].
  void (*swiglu)(float* gate, const float* up, int64_t n);
  // gate[i] = gelu_tanh(gate[i]) * up[i], GELU's tanh form (Gemma's FFN):
  // g/2 (1 + tanh(sqrt(2/pi) (g + 0.044715 g^3))). ~1e-6 relative where
  // |result| > 1e-30 (ops/elementwise_impl.h says where the error comes from).
  void (*geglu)(float* gate, const float* up, int64_t n);
  // x[i] = cap * tanh(x[i] / cap) (Gemma 2's logit soft-cap), cap > 0; ~3e-7 relative.
  void (*softcap)(float* x, int64_t n, float cap);
};

const ElementwiseKernels& elementwise_kernels();
// The table compiled for `level`, or nullptr when this CPU cannot run it.
const ElementwiseKernels* elementwise_kernels_at(CpuLevel level);

}  // namespace tern::kernels
