// kernels/pack.h — re-ordering weight matrices into the packed panels some
// kernels read (MatmulKernels::pack), once, at load time.
//
// Contract: pack_weights() writes exactly packed_bytes() bytes (the same size
// as the matrix, packing only re-ordering bytes -- except W8A8's layout and
// Q8_0_S24 at a level without a sparse kernel, whose rows are packed expanded
// to Q8_0) and the result, handed to matmul through WeightView::packed, gives
// bit-identical outputs to the matrix in place. Pure; thread-safe.
#pragma once

#include <cstddef>

#include "kernels/matmul_kernels.h"
#include "kernels/ref/ops.h"

namespace tern::kernels {

// Bytes of one packed panel of w under k: 32 rows of its blocks (row padding dropped).
size_t packed_panel_bytes(const MatmulKernels& k, const WeightView& w);
// Bytes of w's packed form under k; 0 when k has no packed form for w.
size_t packed_bytes(const MatmulKernels& k, const WeightView& w);
// out: packed_bytes(k, w) bytes, 64-byte aligned for the fastest loads.
// With a pool, panels are packed in parallel (same bytes either way).
void pack_weights(const MatmulKernels& k, const WeightView& w, void* out, ThreadPool* pool = nullptr);

}  // namespace tern::kernels
