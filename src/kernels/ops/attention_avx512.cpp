// Attention tile kernel compiled for the avx512 level (see attention_impl.h).
#include "kernels/ops/attention_impl.h"

namespace tern::kernels {

extern const AttentionKernels kAttention_avx512;
const AttentionKernels kAttention_avx512 = {attention_partial_impl};

}  // namespace tern::kernels
