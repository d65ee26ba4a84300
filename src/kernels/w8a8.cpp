#include "kernels/w8a8.h"

#include <cstring>

#include "quant/quant.h"

namespace tern::kernels {

void quantize_act_i8(const float* x, void* xq, int64_t n) {
  auto* out = static_cast<uint8_t*>(xq);
  std::memset(out, 0, kW8ActHeader);
  uint8_t* q = out + kW8ActHeader;
  const float d = quant::quantize_row_i8(x, n, reinterpret_cast<int8_t*>(q));
  std::memcpy(out, &d, sizeof d);
  for (int64_t i = 0; i < n; ++i) q[i] = static_cast<uint8_t>(q[i] ^ 0x80);  // q + 128 as an unsigned byte
  std::memset(q + n, 128, static_cast<size_t>(w8_padded(n) - n));
}

void w8_tile_scalar(int64_t n, const void* w, size_t w_stride, int n_rows, const void* xq, size_t x_stride, int n_cols,
                    float* y, size_t ldy) {
  for (int c = 0; c < n_cols; ++c) {
    const auto* xr = static_cast<const uint8_t*>(xq) + c * x_stride;
    float dx;
    std::memcpy(&dx, xr, sizeof dx);
    const uint8_t* q = xr + kW8ActHeader;
    for (int r = 0; r < n_rows; ++r) {
      const auto* wr = reinterpret_cast<const int8_t*>(static_cast<const uint8_t*>(w) + r * w_stride);
      int32_t acc = 0;
      for (int64_t i = 0; i < n; ++i) acc += (static_cast<int32_t>(q[i]) - 128) * wr[i];
      y[c * ldy + r] = static_cast<float>(acc) * dx;
    }
  }
}

void w8_pack_panel(const uint8_t* w, size_t w_stride, int64_t n_rows, int64_t n, int64_t r0, uint8_t* dst) {
  const int64_t np = w8_padded(n);
  std::memset(dst, 0, w8_panel_bytes(n));
  auto* sums = reinterpret_cast<int32_t*>(dst);  // dst is 64-byte aligned (pack.h)
  for (int r = 0; r < 32 && r0 + r < n_rows; ++r) {
    const auto* row = reinterpret_cast<const int8_t*>(w + static_cast<size_t>(r0 + r) * w_stride);
    int32_t s = 0;
    for (int64_t i = 0; i < n; ++i) s += row[i];
    sums[r] = s;
  }
  uint8_t* body = dst + 192;
  for (int64_t g = 0; g < np / 64; ++g)
    for (int j = 0; j < 16; ++j)
      for (int h = 0; h < 2; ++h)
        for (int r = 0; r < 16; ++r) {
          uint8_t* out = body + ((g * 16 + j) * 2 + h) * 64 + r * 4;
          const int64_t row = r0 + 16 * h + r;
          if (row >= n_rows) continue;
          for (int b = 0; b < 4; ++b) {
            const int64_t i = g * 64 + 4 * j + b;
            if (i < n) out[b] = w[static_cast<size_t>(row) * w_stride + static_cast<size_t>(i)];
          }
        }
}

}  // namespace tern::kernels
