#include "kernels/pack.h"

#include <cstring>

#include "core/assert.h"

namespace tern::kernels {

namespace {
constexpr int kPanelRows = 32;
}

size_t packed_panel_bytes(const WeightView& w) {
  return kPanelRows * static_cast<size_t>(w.n_cols / w.traits->block_elems) * w.traits->block_bytes;
}

size_t packed_bytes(const MatmulKernels& k, const WeightView& w) {
  if (!k.packed_tile || k.max_rows != kPanelRows || !w.traits) return 0;
  const size_t block = w.traits->block_bytes;
  if (static_cast<size_t>(k.pack.lead_bytes + 4 * k.pack.n_dwords + k.pack.trail_bytes) != block) return 0;
  const int64_t n_panels = (w.n_rows + kPanelRows - 1) / kPanelRows;
  return static_cast<size_t>(n_panels) * packed_panel_bytes(w);
}

void pack_weights(const MatmulKernels& k, const WeightView& w, void* out) {
  TERN_ASSERT(packed_bytes(k, w) > 0);
  const size_t block = w.traits->block_bytes;
  const int64_t n_blocks = w.n_cols / w.traits->block_elems;
  const int lead = k.pack.lead_bytes, n_dw = k.pack.n_dwords, trail = k.pack.trail_bytes;
  auto* dst = static_cast<uint8_t*>(out);
  for (int64_t r0 = 0; r0 < w.n_rows; r0 += kPanelRows) {
    const uint8_t* rows[kPanelRows];  // rows past the matrix repeat its last row (the kernels' convention)
    for (int r = 0; r < kPanelRows; ++r)
      rows[r] = static_cast<const uint8_t*>(w.row(r0 + r < w.n_rows ? r0 + r : w.n_rows - 1));
    for (int64_t b = 0; b < n_blocks; ++b) {
      const size_t off = static_cast<size_t>(b) * block;
      for (int r = 0; r < kPanelRows; ++r, dst += lead) std::memcpy(dst, rows[r] + off, lead);
      for (int h = 0; h < 2; ++h)
        for (int j = 0; j < n_dw; ++j)
          for (int r = 0; r < 16; ++r, dst += 4) std::memcpy(dst, rows[16 * h + r] + off + lead + 4 * j, 4);
      for (int r = 0; r < kPanelRows; ++r, dst += trail) std::memcpy(dst, rows[r] + off + block - trail, trail);
    }
  }
}

}  // namespace tern::kernels
