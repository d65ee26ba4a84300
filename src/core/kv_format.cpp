#include "core/kv_format.h"

#include <cstdint>
#include <cstring>
#include <vector>

#include "core/fp16.h"
#include "core/fp8.h"

namespace tern {

const char* kv_type_name(KvType t) {
  switch (t) {
    case KvType::F32: return "f32";
    case KvType::F16: return "f16";
    case KvType::Q8_0: return "q8_0";
    case KvType::Q4_0: return "q4_0";
    case KvType::Fp8: return "fp8";
  }
  return "?";
}

std::optional<KvType> parse_kv_type(std::string_view name) {
  for (KvType t : {KvType::F32, KvType::F16, KvType::Q8_0, KvType::Q4_0, KvType::Fp8})
    if (name == kv_type_name(t)) return t;
  return std::nullopt;
}

const char* kv_type_choices() { return "f16, f32, q8_0, q4_0 or fp8"; }

int kv_group_elems(KvType t, int head_dim) {
  if (!kv_is_int(t)) return 0;
  return head_dim % 32 == 0 ? 32 : head_dim;
}

size_t kv_head_bytes(KvType t, int head_dim) {
  const size_t n = static_cast<size_t>(head_dim);
  switch (t) {
    case KvType::F32: return 4 * n;
    case KvType::F16: return 2 * n;
    case KvType::Fp8: return n;
    case KvType::Q8_0: {
      const size_t g = static_cast<size_t>(kv_group_elems(t, head_dim));
      return g == 0 ? 0 : n / g * (2 + g);
    }
    case KvType::Q4_0: {
      const size_t g = static_cast<size_t>(kv_group_elems(t, head_dim));
      return g == 0 || g % 2 ? 0 : n / g * (2 + g / 2);
    }
  }
  return 0;
}

namespace {

// max|x| over n (a NaN is never the max), as eight running maxima (max is
// exact, so their order does not matter). The reference for kernels/kv_quant.cpp,
// which the CPU backend runs instead.
float abs_max(const float* x, int n) {
  float m[8] = {};
  int i = 0;
  for (; i + 8 <= n; i += 8)
    for (int l = 0; l < 8; ++l) {
      const float a = x[i + l] < 0.0f ? -x[i + l] : x[i + l];
      m[l] = a > m[l] ? a : m[l];
    }
  for (; i < n; ++i) {
    const float a = x[i] < 0.0f ? -x[i] : x[i];
    m[0] = a > m[0] ? a : m[0];
  }
  float amax = 0.0f;
  for (float v : m) amax = v > amax ? v : amax;
  return amax;
}

// Codes of x * inv: the nearest integer (halves away from zero), clamped to
// ±127 (a NaN to -127, so the conversion is always defined).
void round_codes(const float* x, int n, float inv, int8_t* q) {
  for (int i = 0; i < n; ++i) {
    float r = x[i] * inv;
    r = r > -127.0f ? r : -127.0f;
    r = r < 127.0f ? r : 127.0f;
    q[i] = static_cast<int8_t>(static_cast<int32_t>(r + (r >= 0.0f ? 0.5f : -0.5f)));
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
    case KvType::Fp8: {
      auto* b = static_cast<uint8_t*>(dst);
      for (int i = 0; i < head_dim; ++i) b[i] = float_to_fp8_e4m3(x[i]);
      return;
    }
    case KvType::Q8_0: {
      const int g = kv_group_elems(t, head_dim), n_groups = head_dim / g;
      auto* scales = static_cast<uint8_t*>(dst);
      auto* codes = reinterpret_cast<int8_t*>(scales + 2 * n_groups);
      for (int k = 0; k < n_groups; ++k) {
        // The scale as stored (half), so the codes are chosen for the d that decodes them.
        const uint16_t dh = float_to_fp16(abs_max(x + k * g, g) / 127.0f);
        const float d = fp16_to_float(dh);
        std::memcpy(scales + 2 * k, &dh, 2);
        round_codes(x + k * g, g, d > 0.0f ? 1.0f / d : 0.0f, codes + k * g);
      }
      return;
    }
    case KvType::Q4_0: {
      const int g = kv_group_elems(t, head_dim), n_groups = head_dim / g, half = g / 2;
      auto* scales = static_cast<uint8_t*>(dst);
      auto* packed = scales + 2 * n_groups;
      for (int k = 0; k < n_groups; ++k) {
        const float* xg = x + k * g;
        float m = 0.0f, amax = 0.0f;  // the element of largest magnitude, signed (the first on ties)
        for (int i = 0; i < g; ++i) {
          const float a = xg[i] < 0.0f ? -xg[i] : xg[i];
          if (a > amax) amax = a, m = xg[i];
        }
        const uint16_t dh = float_to_fp16(m / -8.0f);
        const float d = fp16_to_float(dh);
        std::memcpy(scales + 2 * k, &dh, 2);
        const float inv = d != 0.0f ? 1.0f / d : 0.0f;
        uint8_t* out = packed + k * half;
        for (int i = 0; i < half; ++i) {
          const auto code = [&](float v) {
            float r = v * inv;
            r = r > -8.0f ? r : -8.0f;  // a NaN becomes -8
            r = r < 7.0f ? r : 7.0f;
            return static_cast<uint8_t>(static_cast<int32_t>(r + (r >= 0.0f ? 0.5f : -0.5f)) + 8);
          };
          out[i] = static_cast<uint8_t>(code(xg[i]) | (code(xg[i + half]) << 4));
        }
      }
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
    case KvType::Fp8: {
      const auto* b = static_cast<const uint8_t*>(src);
      for (int i = 0; i < head_dim; ++i) x[i] = fp8_e4m3_to_float(b[i]);
      return;
    }
    case KvType::Q8_0: {
      const int g = kv_group_elems(t, head_dim), n_groups = head_dim / g;
      const auto* scales = static_cast<const uint8_t*>(src);
      const auto* codes = reinterpret_cast<const int8_t*>(scales + 2 * n_groups);
      for (int i = 0; i < head_dim; ++i) {
        uint16_t dh;
        std::memcpy(&dh, scales + 2 * (i / g), 2);
        x[i] = fp16_to_float(dh) * static_cast<float>(codes[i]);
      }
      return;
    }
    case KvType::Q4_0: {
      const int g = kv_group_elems(t, head_dim);
      std::vector<int8_t> codes(static_cast<size_t>(head_dim));
      std::vector<float> scales(static_cast<size_t>(head_dim / g));
      kv_codes(t, src, head_dim, codes.data(), scales.data());
      for (int i = 0; i < head_dim; ++i) x[i] = scales[i / g] * static_cast<float>(codes[i]);
      return;
    }
  }
}

void kv_encode_row(KvType t, const float* x, int n_kv_head, int head_dim, void* dst) {
  const size_t hb = kv_head_bytes(t, head_dim);
  for (int h = 0; h < n_kv_head; ++h)
    kv_encode_head(t, x + static_cast<size_t>(h) * head_dim, head_dim, static_cast<uint8_t*>(dst) + h * hb);
}

void kv_quantize_query(const float* q, int head_dim, int8_t* codes, float* scales) {
  const int g = kv_group_elems(KvType::Q8_0, head_dim);
  for (int k = 0; k < head_dim / g; ++k) {
    const float d = abs_max(q + k * g, g) / 127.0f;
    scales[k] = d;
    round_codes(q + k * g, g, d > 0.0f ? 1.0f / d : 0.0f, codes + k * g);
  }
}

void kv_q4_unpack(const void* head, int head_dim, int8_t* codes) {
  const int g = kv_group_elems(KvType::Q4_0, head_dim), n_groups = head_dim / g, half = g / 2;
  const auto* packed = static_cast<const uint8_t*>(head) + 2 * n_groups;
  for (int k = 0; k < n_groups; ++k)
    for (int i = 0; i < half; ++i) {
      const uint8_t b = packed[k * half + i];
      codes[k * g + i] = static_cast<int8_t>((b & 15) - 8);
      codes[k * g + i + half] = static_cast<int8_t>((b >> 4) - 8);
    }
}

void kv_codes(KvType t, const void* head, int head_dim, int8_t* codes, float* scales) {
  const int g = kv_group_elems(t, head_dim), n_groups = head_dim / g;
  const auto* in = static_cast<const uint8_t*>(head);
  for (int k = 0; k < n_groups; ++k) {
    uint16_t dh;
    std::memcpy(&dh, in + 2 * k, 2);
    scales[k] = fp16_to_float(dh);
  }
  if (t == KvType::Q4_0)
    kv_q4_unpack(head, head_dim, codes);
  else
    std::memcpy(codes, in + 2 * n_groups, static_cast<size_t>(head_dim));
}

}  // namespace tern
