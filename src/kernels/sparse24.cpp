#include "kernels/sparse24.h"

#include <cstring>

#include "quant/blocks.h"

namespace tern::kernels {

void pack_s24_block(const uint8_t* const* rows, int64_t ib, uint8_t* dst) {
  constexpr size_t kBlock = sizeof(quant::BlockQ8_0S24);
  for (int r = 0; r < 32; ++r) std::memcpy(dst + 2 * r, rows[r] + ib * kBlock, 2);  // d
  uint8_t* g = dst + 2 * 32;
  for (int h = 0; h < 2; ++h)
    for (int k = 0; k < 8; ++k, g += 40) {
      uint64_t mask = 0;
      for (int r = 0; r < 16; ++r) {
        const auto* b = reinterpret_cast<const quant::BlockQ8_0S24*>(rows[16 * h + r] + ib * kBlock);
        mask |= static_cast<uint64_t>(b->mask[k / 2] >> (4 * (k % 2)) & 0xf) << (4 * r);
        // The group's two kept values (2 in every group), stored + 128: the kernel's decode form.
        g[8 + 2 * r] = static_cast<uint8_t>(b->qs[2 * k] ^ 0x80);
        g[8 + 2 * r + 1] = static_cast<uint8_t>(b->qs[2 * k + 1] ^ 0x80);
      }
      std::memcpy(g, &mask, sizeof mask);
    }
}

void expand_s24_to_q8_0(const void* src, void* dst, int64_t n) {
  const auto* s = static_cast<const quant::BlockQ8_0S24*>(src);
  auto* d = static_cast<quant::BlockQ8_0*>(dst);
  for (int64_t i = 0; i < n / quant::kQK8_0S24; ++i) {
    uint32_t m;
    std::memcpy(&m, s[i].mask, sizeof m);
    d[i].d = s[i].d;
    int k = 0;
    for (int j = 0; j < quant::kQK8_0; ++j) d[i].qs[j] = (m >> j & 1u) && k < quant::kQK8_0S24 / 2 ? s[i].qs[k++] : 0;
  }
}

}  // namespace tern::kernels
