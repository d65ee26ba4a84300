#include "core/kv_format.h"

#include <cmath>
#include <cstdint>
#include <cstring>

#include "core/fp16.h"

namespace tern {

const char* kv_type_name(KvType t) {
  switch (t) {
    case KvType::F32: return "f32";
    case KvType::F16: return "f16";
    case KvType::Q8_0: return "q8_0";
  }
  return "?";
}

std::optional<KvType> parse_kv_type(std::string_view name) {
  for (KvType t : {KvType::F32, KvType::F16, KvType::Q8_0})
    if (name == kv_type_name(t)) return t;
  return std::nullopt;
}

const char* kv_type_choices() { return "f16, f32 or q8_0"; }

int kv_group_elems(KvType t, int head_dim) {
  if (t != KvType::Q8_0) return 0;
  return head_dim % 32 == 0 ? 32 : head_dim;
}

size_t kv_head_bytes(KvType t, int head_dim) {
  const size_t n = static_cast<size_t>(head_dim);
  switch (t) {
    case KvType::F32: return 4 * n;
    case KvType::F16: return 2 * n;
    case KvType::Q8_0: {
      const size_t g = static_cast<size_t>(kv_group_elems(t, head_dim));
      return g == 0 ? 0 : n / g * (2 + g);
    }
  }
  return 0;
}

namespace {

void encode_q8_group(const float* x, int g, uint8_t* dst) {
  float amax = 0.0f;
  for (int i = 0; i < g; ++i) amax = std::fmax(amax, std::fabs(x[i]));
  // The scale as stored (half), so the codes are chosen for the d that decodes them.
  const uint16_t dh = float_to_fp16(amax / 127.0f);
  const float d = fp16_to_float(dh);
  const float inv = d > 0.0f ? 1.0f / d : 0.0f;
  std::memcpy(dst, &dh, 2);
  for (int i = 0; i < g; ++i) {
    float q = std::nearbyint(x[i] * inv);
    q = std::fmin(127.0f, std::fmax(-127.0f, q));  // fmax/fmin drop a NaN: the cast is always defined
    dst[2 + i] = static_cast<uint8_t>(static_cast<int8_t>(q));
  }
}

}  // namespace

void kv_encode_head(KvType t, const float* x, int head_dim, void* dst) {
  switch (t) {
    case KvType::F32: std::memcpy(dst, x, static_cast<size_t>(head_dim) * 4); return;
    case KvType::F16: {
      auto* h = static_cast<uint16_t*>(dst);
      for (int i = 0; i < head_dim; ++i) h[i] = float_to_fp16(x[i]);
      return;
    }
    case KvType::Q8_0: {
      const int g = kv_group_elems(t, head_dim);
      auto* out = static_cast<uint8_t*>(dst);
      for (int i = 0; i < head_dim; i += g, out += 2 + g) encode_q8_group(x + i, g, out);
      return;
    }
  }
}

void kv_decode_head(KvType t, const void* src, int head_dim, float* x) {
  switch (t) {
    case KvType::F32: std::memcpy(x, src, static_cast<size_t>(head_dim) * 4); return;
    case KvType::F16: {
      const auto* h = static_cast<const uint16_t*>(src);
      for (int i = 0; i < head_dim; ++i) x[i] = fp16_to_float(h[i]);
      return;
    }
    case KvType::Q8_0: {
      const int g = kv_group_elems(t, head_dim);
      const auto* in = static_cast<const uint8_t*>(src);
      for (int i = 0; i < head_dim; i += g, in += 2 + g) {
        uint16_t dh;
        std::memcpy(&dh, in, 2);
        const float d = fp16_to_float(dh);
        for (int j = 0; j < g; ++j) x[i + j] = d * static_cast<float>(static_cast<int8_t>(in[2 + j]));
      }
      return;
    }
  }
}

void kv_encode_row(KvType t, const float* x, int n_kv_head, int head_dim, void* dst) {
  const size_t hb = kv_head_bytes(t, head_dim);
  for (int h = 0; h < n_kv_head; ++h)
    kv_encode_head(t, x + static_cast<size_t>(h) * head_dim, head_dim, static_cast<uint8_t*>(dst) + h * hb);
}

}  // namespace tern
