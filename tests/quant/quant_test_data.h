// tests/quant/quant_test_data.h — deterministic test inputs for the quant tests.
//
// Golden hashes compare our quantizers with bytes ggml produced from the same
// floats, so the inputs must be bit-identical on every platform: no <random>
// distributions (their algorithms are library-specific) and no libm calls.
// A 64-bit LCG feeds an Irwin-Hall approximation of N(0, 1): the sum of 12
// uniforms minus 6 (every step a single IEEE-rounded add or multiply).
#pragma once

#include <cstdint>
#include <vector>

namespace tern::quant::test {

class Lcg {
 public:
  explicit Lcg(uint64_t seed) : state_(seed) {}
  uint32_t next_u32() {
    state_ = state_ * 6364136223846793005ull + 1442695040888963407ull;
    return static_cast<uint32_t>(state_ >> 33);
  }
  // Uniform in [0, 1) with 24 random bits (exact in f32).
  float uniform() { return static_cast<float>(next_u32() >> 7) * (1.0f / 16777216.0f); }
  // Approximately N(0, 1), range (-6, 6).
  float normal() {
    float acc = 0.0f;
    for (int i = 0; i < 12; ++i) acc += uniform();
    return acc - 6.0f;
  }

 private:
  uint64_t state_;
};

inline std::vector<float> normal_row(int n, uint64_t seed) {
  Lcg rng(seed);
  std::vector<float> v(static_cast<size_t>(n));
  for (auto& x : v) x = rng.normal();
  return v;
}

// A row that exercises the quantizers' branches, one pattern per 256 elements
// (patterns repeat every 8 super-blocks), each scaled by a power of two in
// 2^-12 .. 2^4 so every step stays exact:
//   0, 1 normal           2 positive only       3 negative only, offset
//   4 sparse (1 in 8)     5 normal + outliers   6 zero 32-element groups
//   7 quarter-integer grid (values on rounding ties)
inline std::vector<float> mixed_row(int n_super_blocks, uint64_t seed) {
  Lcg rng(seed);
  std::vector<float> v(static_cast<size_t>(n_super_blocks) * 256);
  const float scales[] = {1.0f / 4096.0f, 1.0f / 64.0f, 0.25f, 1.0f, 16.0f};
  for (int b = 0; b < n_super_blocks; ++b) {
    const float scale = scales[b % 5];
    for (int i = 0; i < 256; ++i) {
      float x = rng.normal();
      switch (b % 8) {
        case 2: x = x < 0.0f ? -x : x; break;
        case 3: x = (x < 0.0f ? x : -x) - 0.25f; break;
        case 4: x = (rng.next_u32() % 8 == 0) ? x : 0.0f; break;
        case 5: x = (i % 61 == 7) ? x * 24.0f : x; break;
        case 6: x = ((i / 32) % 3 == 1) ? 0.0f : x; break;
        case 7: x = static_cast<float>(static_cast<int>(x * 4.0f)) * 0.25f; break;
        default: break;
      }
      v[static_cast<size_t>(b) * 256 + i] = x * scale;
    }
  }
  return v;
}

// FNV-1a over bytes: a short fingerprint of a quantized row.
inline uint64_t fnv1a(const void* data, size_t n_bytes) {
  const auto* p = static_cast<const uint8_t*>(data);
  uint64_t h = 1469598103934665603ull;
  for (size_t i = 0; i < n_bytes; ++i) {
    h ^= p[i];
    h *= 1099511628211ull;
  }
  return h;
}

}  // namespace tern::quant::test
