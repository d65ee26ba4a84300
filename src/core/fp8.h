// core/fp8.h — OCP FP8 E4M3 ("E4M3FN"): 1 sign bit, 4 exponent bits (bias 7),
// 3 mantissa bits; no infinities, one NaN per sign (S.1111.111); largest
// finite 448, smallest subnormal 2^-9. Conversion from f32 rounds to nearest
// (ties to even) and saturates to ±448 (the OCP "satfinite" mode, as vLLM's
// fp8 KV cache does); NaN stays NaN. Every E4M3 value is exactly an IEEE
// half: kFp8E4M3Half is that table (constant data, so kernels compiled for
// any CPU level can read it without sharing code).
//
// OCP FP8 E5M2: 1 sign bit, 5 exponent bits (bias 15), 2 mantissa bits, IEEE
// infinities and NaNs: exactly the high byte of an IEEE half. Largest finite
// 57344, smallest subnormal 2^-16. From f32: round to nearest even, saturated
// to +-57344 (infinities too, as E4M3 does); NaN stays NaN.
#pragma once

#include <cstdint>

namespace tern {

float fp8_e4m3_to_float(uint8_t c);
uint8_t float_to_fp8_e4m3(float x);

extern const uint16_t* const kFp8E4M3Half;  // [256]

float fp8_e5m2_to_float(uint8_t c);
uint8_t float_to_fp8_e5m2(float x);

}  // namespace tern
