#include "kernels/pack.h"

#include <cstring>
#include <vector>

#include "core/assert.h"
#include "kernels/sparse24.h"
#include "kernels/w8a8.h"
#include "quant/blocks.h"

namespace tern::kernels {

namespace {
constexpr int kPanelRows = 32;

// W8A8's matrices have a layout of their own (kernels/w8a8.h); FP8's row scales do not change theirs.
bool w8a8_layout(const WeightView& w) { return w.row_scale && w.traits->type == gguf::GgmlType::I8; }
}

size_t packed_panel_bytes(const MatmulKernels& k, const WeightView& w) {
  if (w8a8_layout(w)) return w8_panel_bytes(w.n_cols);
  const size_t block = k.pack.s24_as_q8_0 ? sizeof(quant::BlockQ8_0) : w.traits->block_bytes;
  return kPanelRows * static_cast<size_t>(w.n_cols / w.traits->block_elems) * block;
}

size_t packed_bytes(const MatmulKernels& k, const WeightView& w) {
  if (!k.packed_tile || k.max_rows != kPanelRows || !w.traits) return 0;
  if (w8a8_layout(w)) {  // W8A8's own layout (kernels/w8a8.h)
    if (w.traits->type != gguf::GgmlType::I8 || k.act_type != gguf::GgmlType::I8) return 0;
    return static_cast<size_t>((w.n_rows + kPanelRows - 1) / kPanelRows) * packed_panel_bytes(k, w);
  }
  const size_t block = w.traits->block_bytes;
  if (k.pack.sparse24 || k.pack.s24_as_q8_0) {
    if (w.traits->type != gguf::GgmlType::Q8_0_S24 || block * kPanelRows != kS24PackedBlock) return 0;
  } else if (k.pack.by_element ? w.traits->block_elems != 1 || block > 2
                        : static_cast<size_t>(k.pack.lead_bytes + 4 * k.pack.n_dwords + k.pack.trail_bytes) != block)
    return 0;
  const int64_t n_panels = (w.n_rows + kPanelRows - 1) / kPanelRows;
  return static_cast<size_t>(n_panels) * packed_panel_bytes(k, w);
}

namespace {

// Lead and trail parts are 0, 1 (MXFP4's E8M0) or 2 bytes: a fixed-size copy the compiler inlines.
inline void copy_small(uint8_t* dst, const uint8_t* src, int n) {
  if (n == 2) std::memcpy(dst, src, 2);
  if (n == 1) *dst = *src;
}

// By element (F16's 2-byte or FP8's 1-byte elements): for each k, element k of
// rows 0..31 side by side. Copied in strips of 64 elements so the 32 source
// lines of a strip stay in L1.
template <size_t kBytes>
void pack_by_element(const uint8_t* const* rows, int64_t n, uint8_t* dst) {
  constexpr int64_t kStrip = 64;
  for (int64_t k0 = 0; k0 < n; k0 += kStrip) {
    const int64_t k1 = k0 + kStrip < n ? k0 + kStrip : n;
    for (int r = 0; r < kPanelRows; ++r)
      for (int64_t k = k0; k < k1; ++k) std::memcpy(dst + (k * kPanelRows + r) * kBytes, rows[r] + k * kBytes, kBytes);
  }
}

// Panel p (rows 32p .. 32p + 31) of w into dst (packed_panel_bytes(k, w) bytes).
void pack_panel(const MatmulKernels& k, const WeightView& w, int64_t p, uint8_t* dst) {
  if (w8a8_layout(w))
    return w8_pack_panel(static_cast<const uint8_t*>(w.data), w.row_stride_bytes, w.n_rows, w.n_cols, p * kPanelRows, dst);
  size_t block = w.traits->block_bytes;
  const int64_t n_blocks = w.n_cols / w.traits->block_elems;
  const int lead = k.pack.lead_bytes, n_dw = k.pack.n_dwords, trail = k.pack.trail_bytes;
  const int64_t r0 = p * kPanelRows;
  const uint8_t* rows[kPanelRows];  // rows past the matrix repeat its last row (the kernels' convention)
  for (int r = 0; r < kPanelRows; ++r)
    rows[r] = static_cast<const uint8_t*>(w.row(r0 + r < w.n_rows ? r0 + r : w.n_rows - 1));
  std::vector<uint8_t> expanded;  // s24_as_q8_0: the panel's rows as Q8_0 blocks [32][n_blocks * 34]
  if (k.pack.s24_as_q8_0) {
    block = sizeof(quant::BlockQ8_0);
    const size_t row_bytes = static_cast<size_t>(n_blocks) * block;
    expanded.resize(kPanelRows * row_bytes);
    for (int r = 0; r < kPanelRows; ++r) {
      expand_s24_to_q8_0(rows[r], expanded.data() + r * row_bytes, w.n_cols);
      rows[r] = expanded.data() + r * row_bytes;
    }
  }
  if (k.pack.by_element)
    return block == 1 ? pack_by_element<1>(rows, n_blocks, dst) : pack_by_element<2>(rows, n_blocks, dst);
  if (k.pack.sparse24) {
    for (int64_t b = 0; b < n_blocks; ++b) pack_s24_block(rows, b, dst + b * kS24PackedBlock);
    return;
  }
  for (int64_t b = 0; b < n_blocks; ++b) {
    const size_t off = static_cast<size_t>(b) * block;
    for (int r = 0; r < kPanelRows; ++r, dst += lead) copy_small(dst, rows[r] + off, lead);
    for (int h = 0; h < 2; ++h)
      for (int j = 0; j < n_dw; ++j)
        for (int r = 0; r < 16; ++r, dst += 4) std::memcpy(dst, rows[16 * h + r] + off + lead + 4 * j, 4);
    for (int r = 0; r < kPanelRows; ++r, dst += trail) copy_small(dst, rows[r] + off + block - trail, trail);
  }
}

}  // namespace

void pack_weights(const MatmulKernels& k, const WeightView& w, void* out, ThreadPool* pool) {
  TERN_ASSERT(packed_bytes(k, w) > 0);
  TERN_ASSERT(k.pack.lead_bytes <= 2 && k.pack.trail_bytes <= 2);
  const size_t panel_bytes = packed_panel_bytes(k, w);
  const auto n_panels = static_cast<size_t>((w.n_rows + kPanelRows - 1) / kPanelRows);
  auto* dst = static_cast<uint8_t*>(out);
  auto run = [&](size_t begin, size_t end) {
    for (size_t p = begin; p < end; ++p) pack_panel(k, w, static_cast<int64_t>(p), dst + p * panel_bytes);
  };
  if (pool)
    pool->parallel_for(n_panels, [&](size_t begin, size_t end, int) { run(begin, end); });
  else
    run(0, n_panels);
}

}  // namespace tern::kernels
