#include "core/fp8.h"

#include <array>
#include <cmath>

#include "core/fp16.h"

namespace tern {
namespace {

// The half bits of E4M3 code c, computed from the fields (constexpr: no library calls).
constexpr uint16_t half_of(int c) {
  const uint16_t sign = static_cast<uint16_t>((c & 0x80) << 8);
  const int e = (c >> 3) & 15, m = c & 7;
  if (e == 15 && m == 7) return sign | 0x7e00;
  if (e != 0) return sign | static_cast<uint16_t>((e + 8) << 10 | m << 7);  // (1 + m/8) 2^(e-7)
  if (m == 0) return sign;
  int p = 2;  // m * 2^-9 with m = 2^p + r: (1 + r / 2^p) 2^(p - 9)
  while (!(m >> p)) --p;
  const int r = m - (1 << p);
  return sign | static_cast<uint16_t>((p + 6) << 10 | r << (10 - p));
}

constexpr std::array<uint16_t, 256> make_table() {
  std::array<uint16_t, 256> t{};
  for (int c = 0; c < 256; ++c) t[static_cast<size_t>(c)] = half_of(c);
  return t;
}

constexpr std::array<uint16_t, 256> kTable = make_table();

}  // namespace

const uint16_t* const kFp8E4M3Half = kTable.data();

float fp8_e4m3_to_float(uint8_t c) {
  const float sign = (c & 0x80) ? -1.0f : 1.0f;
  const int e = (c >> 3) & 15, m = c & 7;
  if (e == 15 && m == 7) return std::nanf("");
  if (e == 0) return sign * std::ldexp(static_cast<float>(m), -9);
  return sign * std::ldexp(1.0f + static_cast<float>(m) / 8.0f, e - 7);
}

namespace {

// x rounded to nearest even in a format of kMant mantissa bits and exponent
// bias kBias (subnormals below 2^(1 - kBias)), saturated to max_code (the
// largest finite value, max_finite); NaN keeps its sign with every low bit set.
template <int kMant, int kBias>
uint8_t encode_fp8(float x, float max_finite, uint8_t max_code) {
  const uint8_t sign = std::signbit(x) ? 0x80 : 0;
  if (std::isnan(x)) return sign | 0x7f;
  const float a = std::fabs(x);
  if (a >= max_finite) return sign | max_code;
  if (a < std::ldexp(1.0f, 1 - kBias))  // subnormal: multiples of 2^(1 - kBias - kMant)
    return sign | static_cast<uint8_t>(std::nearbyint(std::ldexp(a, kBias - 1 + kMant)));
  int e = 0;
  const float f = std::frexp(a, &e);  // a = f 2^e, f in [0.5, 1)
  int mant = static_cast<int>(std::nearbyint((2.0f * f - 1.0f) * (1 << kMant)));
  int biased = e - 1 + kBias;
  if (mant == 1 << kMant) mant = 0, ++biased;
  const int code = biased << kMant | mant;
  return sign | static_cast<uint8_t>(code > max_code ? max_code : code);
}

}  // namespace

uint8_t float_to_fp8_e4m3(float x) { return encode_fp8<3, 7>(x, 448.0f, 0x7e); }

float fp8_e5m2_to_float(uint8_t c) { return fp16_to_float(static_cast<uint16_t>(c << 8)); }

uint8_t float_to_fp8_e5m2(float x) { return encode_fp8<2, 15>(x, 57344.0f, 0x7b); }

}  // namespace tern
