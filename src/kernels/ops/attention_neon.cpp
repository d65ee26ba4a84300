// Attention tile kernel compiled for the neon level (see attention_impl.h):
// the baseline AArch64 ISA, with its conversions in Advanced SIMD registers.
#define TERN_KERNELS_NEON 1
#include "kernels/ops/attention_impl.h"

namespace tern::kernels {

extern const AttentionKernels kAttention_neon;
const AttentionKernels kAttention_neon = {attention_partial_impl};

}  // namespace tern::kernels
