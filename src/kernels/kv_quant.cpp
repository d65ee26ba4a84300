#include "kernels/kv_quant.h"

#include <cstring>

#include "core/fp16.h"
#include "kernels/cpu_features.h"
#if defined(__x86_64__)
#include "kernels/x86/x86_impl.h"
#endif

namespace tern::kernels {

#if defined(__x86_64__)
// The AVX-512 loops (x86/kv_quant_avx512.cpp) where the CPU has them.
namespace {
bool wide() {
  static const bool w = cpu_supports(CpuLevel::Avx512);
  return w;
}
}  // namespace

void quantize_query(const float* q, int head_dim, int8_t* codes, float* scales) {
  if (!wide()) return kv_quantize_query(q, head_dim, codes, scales);
  const int g = kv_group_elems(KvType::Q8_0, head_dim);
  for (int k = 0; k < head_dim / g; ++k) {
    const float d = x86::avx512_abs_max(q + k * g, g) / 127.0f;
    scales[k] = d;
    x86::avx512_round_codes(q + k * g, g, d > 0.0f ? 1.0f / d : 0.0f, codes + k * g);
  }
}

void encode_kv_row(KvType t, const float* x, int n_kv_head, int head_dim, void* dst) {
  if (t != KvType::Q8_0 || !wide()) return kv_encode_row(t, x, n_kv_head, head_dim, dst);
  const int g = kv_group_elems(t, head_dim), n_groups = head_dim / g;
  auto* out = static_cast<uint8_t*>(dst);
  for (int h = 0; h < n_kv_head; ++h, x += head_dim) {
    uint8_t* scales = out + kv_head_bytes(t, head_dim) * static_cast<size_t>(h);
    auto* codes = reinterpret_cast<int8_t*>(scales + 2 * n_groups);
    for (int k = 0; k < n_groups; ++k) {
      const uint16_t dh = float_to_fp16(x86::avx512_abs_max(x + k * g, g) / 127.0f);
      const float d = fp16_to_float(dh);
      std::memcpy(scales + 2 * k, &dh, 2);
      x86::avx512_round_codes(x + k * g, g, d > 0.0f ? 1.0f / d : 0.0f, codes + k * g);
    }
  }
}

#else
// Elsewhere the scalar codecs, which the compiler vectorises for the baseline ISA.
void quantize_query(const float* q, int head_dim, int8_t* codes, float* scales) {
  kv_quantize_query(q, head_dim, codes, scales);
}

void encode_kv_row(KvType t, const float* x, int n_kv_head, int head_dim, void* dst) {
  kv_encode_row(t, x, n_kv_head, head_dim, dst);
}
#endif

}  // namespace tern::kernels
