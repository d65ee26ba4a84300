// Attention tile kernel compiled for the scalar level (see attention_impl.h).
#include "kernels/ops/attention_impl.h"

namespace tern::kernels {

extern const AttentionKernels kAttention_scalar;
const AttentionKernels kAttention_scalar = {attention_partial_impl};

}  // namespace tern::kernels
