// kernels/ops/attention_impl.h — the attention tile kernel, written once in
// plain C++ and compiled once per CPU level (attention_<level>.cpp), where the
// compiler vectorises the head_dim loops for that level. Everything here has
// internal linkage (anonymous namespace) so the per-level copies never mix.
#pragma once

#include <cstdint>

#include "core/fp8.h"
#include "kernels/attention.h"
#include "kernels/ops/exp_poly.h"

#if defined(__F16C__)
#include <immintrin.h>
#endif
// The AArch64 copy (attention_neon.cpp) defines TERN_KERNELS_NEON: conversions
// in registers with Advanced SIMD, as the AVX levels do with theirs.
#if defined(TERN_KERNELS_NEON)
#include <arm_neon.h>
#endif

// No std:: templates or inline library functions are used below: a copy
// instantiated in an AVX-compiled file could be picked by the linker for
// baseline code (one-definition rule), breaking CPUs without AVX.
namespace tern::kernels {
namespace {

constexpr float kNegInf = -__builtin_inff();
inline float max_f(float a, float b) { return a > b ? a : b; }
inline int32_t min_i(int32_t a, int32_t b) { return a < b ? a : b; }

// Sums in a fixed order: kLanes independent partial sums, then a fixed tree.
// (A compiler-vectorised reduction may peel for alignment, which would make a
// row's result depend on where its buffer happens to sit, i.e. on the batch.)
constexpr int kLanes = 16;

inline float reduce_lanes(const float* acc) {
  float t[8];
  for (int i = 0; i < 8; ++i) t[i] = acc[i] + acc[i + 8];
  for (int i = 0; i < 4; ++i) t[i] += t[i + 4];
  return (t[0] + t[2]) + (t[1] + t[3]);
}

// 16 f32 lanes as a GCC vector: one zmm at the AVX-512 level, two ymm at
// AVX2, SSE pairs in the baseline build. Kept in registers across loops, which
// plain arrays are not.
// (Passed only between always-inlined helpers, so the -Wpsabi note about the
// calling convention of such types without AVX-512 does not apply.)
#pragma GCC diagnostic ignored "-Wpsabi"
typedef float f32x16 __attribute__((vector_size(64)));
typedef int32_t i32x16 __attribute__((vector_size(64)));
constexpr i32x16 kIota = {0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15};

__attribute__((always_inline)) inline f32x16 load16(const float* p) {
  f32x16 v;
  __builtin_memcpy(&v, p, sizeof v);
  return v;
}
__attribute__((always_inline)) inline void store16(float* p, f32x16 v) { __builtin_memcpy(p, &v, sizeof v); }

// The hot loops' vector: one register of the level. At AVX2 an f32x16 is two
// ymm that GCC moves through the stack in loops that keep several of them
// (the scores' and P·V's accumulators spilled every step), so AVX2 runs those
// loops on 8-lane vectors; every lane's sum is the same whatever the width, so
// the bits do not change. The baseline and NEON keep 16 lanes.
#if defined(__AVX2__) && defined(__F16C__) && !defined(__AVX512F__)
#define TERN_ATTENTION_YMM 1
constexpr int kVecW = 8;
#else
constexpr int kVecW = 16;
#endif
typedef float fvec __attribute__((vector_size(4 * kVecW)));
typedef int32_t ivec __attribute__((vector_size(4 * kVecW)));
#if defined(TERN_ATTENTION_YMM)
constexpr ivec kIotaV = {0, 1, 2, 3, 4, 5, 6, 7};
#else
constexpr ivec kIotaV = kIota;
#endif
__attribute__((always_inline)) inline fvec loadv(const float* p) {
  fvec v;
  __builtin_memcpy(&v, p, sizeof v);
  return v;
}
__attribute__((always_inline)) inline void storev(float* p, fvec v) { __builtin_memcpy(p, &v, sizeof v); }

constexpr int kKvTile = kAttentionTile;  // positions per score tile (the code assumes 64)
static_assert(kKvTile == 64);
constexpr int kRowBlock = 4;  // query rows sharing each key/value load
// Below AVX-512: 16-lane groups per pass for R rows, so that R x groups
// f32x16 accumulators are 8 ymm (4 groups for one row, 2 for two, 1 for more).
template <int R>
constexpr int kAccGroups = R >= 3 ? 1 : 4 / R;

// exp for softmax weights: arguments are <= 0. A polynomial with range
// reduction (2^k * e^r) that vectorises, accurate to ~1e-7 relative.
inline float fast_exp(float x) {
  x = max_f(x, -87.0f);
  const float k = __builtin_nearbyintf(x * kLog2e);
  const float r = x - k * kLn2Hi - k * kLn2Lo;
  const float p = exp_poly(r);
  int32_t bits = (static_cast<int32_t>(k) + 127) << 23;
  float scale;
  __builtin_memcpy(&scale, &bits, 4);
  return p * scale;
}

#if defined(TERN_ATTENTION_YMM)
// fast_exp on 8 lanes, each lane's arithmetic as fast_exp's (the same bits):
// the softmax weights of a tile were a scalar loop, a sixth of the decode
// kernel's time at AVX2.
__attribute__((always_inline)) inline fvec fast_exp8(fvec x) {
  const fvec lo = -87.0f - fvec{};
  x = x > lo ? x : lo;
  const fvec y = x * kLog2e;  // rounded before the rounding to an integer, as fast_exp's
  const fvec k = (fvec)_mm256_round_ps((__m256)y, _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
  const fvec r = x - k * kLn2Hi - k * kLn2Lo;
  const fvec p = exp_poly(r);
  typedef int32_t i32x8 __attribute__((vector_size(32)));
  const i32x8 bits = (__builtin_convertvector(k, i32x8) + 127) << 23;
  fvec scale;
  __builtin_memcpy(&scale, &bits, sizeof scale);
  return p * scale;
}
#endif

// IEEE half -> f32, exact (the hardware conversion where the level has one).
inline void half_to_float_row(const void* src_v, float* dst, int n) {
  const uint16_t* src = static_cast<const uint16_t*>(src_v);
  int i = 0;
#if defined(__AVX512F__)
  for (; i + 16 <= n; i += 16)
    _mm512_storeu_ps(dst + i, _mm512_cvtph_ps(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(src + i))));
#endif
#if defined(__F16C__)
  for (; i + 8 <= n; i += 8)
    _mm256_storeu_ps(dst + i, _mm256_cvtph_ps(_mm_loadu_si128(reinterpret_cast<const __m128i*>(src + i))));
  for (; i < n; ++i) dst[i] = _cvtsh_ss(src[i]);
#else
#if defined(TERN_KERNELS_NEON)
  for (; i + 8 <= n; i += 8) {
    const float16x8_t h = vreinterpretq_f16_u16(vld1q_u16(src + i));
    vst1q_f32(dst + i, vcvt_f32_f16(vget_low_f16(h)));
    vst1q_f32(dst + i + 4, vcvt_high_f32_f16(h));
  }
#endif
  for (; i < n; ++i) {
    const uint32_t h = src[i];
    const uint32_t sign = (h & 0x8000u) << 16, exp = (h >> 10) & 0x1fu, mant = h & 0x3ffu;
    uint32_t bits;
    if (exp == 0x1f) {
      bits = sign | 0x7f800000u | (mant << 13);
    } else if (exp == 0) {
      const float v = static_cast<float>(mant) * (1.0f / 16777216.0f);  // subnormal: mant * 2^-24
      dst[i] = sign ? -v : v;
      continue;
    } else {
      bits = sign | ((exp + 112u) << 23) | (mant << 13);
    }
    __builtin_memcpy(dst + i, &bits, 4);
  }
#endif
}

// 16 halves at p as f32 (exact), converted in registers where the level can.
__attribute__((always_inline)) inline f32x16 load16_half(const uint16_t* p) {
#if defined(__AVX512F__)
  return (f32x16)_mm512_cvtph_ps(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(p)));
#elif defined(TERN_KERNELS_NEON)
  const float16x8_t a = vreinterpretq_f16_u16(vld1q_u16(p)), b = vreinterpretq_f16_u16(vld1q_u16(p + 8));
  const float32x4_t q[4] = {vcvt_f32_f16(vget_low_f16(a)), vcvt_high_f32_f16(a), vcvt_f32_f16(vget_low_f16(b)),
                            vcvt_high_f32_f16(b)};
  f32x16 v;
  __builtin_memcpy(&v, q, sizeof v);
  return v;
#else
  float t[16];
  half_to_float_row(p, t, 16);
  return load16(t);
#endif
}

// Stored key/value formats (core/kv_format.h), as template arguments.
enum KvFmt : int { kFmtF32, kFmtF16, kFmtQ8, kFmtFp8 };
// q4_0 runs the q8_0 kernel (its codes unpacked to int8 as a tile is gathered);
// fp8 bytes are converted to f32 in registers as they load, like halves.
inline int kv_fmt(KvType t) {
  return t == KvType::F16 ? kFmtF16 : t == KvType::Fp8 ? kFmtFp8 : kv_is_int(t) ? kFmtQ8 : kFmtF32;
}

inline float half_to_float1(const void* p) {
  float x;
  half_to_float_row(p, &x, 1);
  return x;
}

// 16 int8 at p as f32 (exact).
__attribute__((always_inline)) inline f32x16 int8x16_to_float(const void* p) {
#if defined(__AVX512F__)
  return (f32x16)_mm512_cvtepi32_ps(_mm512_cvtepi8_epi32(_mm_loadu_si128(static_cast<const __m128i*>(p))));
#elif defined(__AVX2__)
  f32x16 v;
  const __m256 lo = _mm256_cvtepi32_ps(_mm256_cvtepi8_epi32(_mm_loadl_epi64(static_cast<const __m128i*>(p))));
  const __m256 hi = _mm256_cvtepi32_ps(
      _mm256_cvtepi8_epi32(_mm_loadl_epi64(reinterpret_cast<const __m128i*>(static_cast<const int8_t*>(p) + 8))));
  __builtin_memcpy(&v, &lo, 32);
  __builtin_memcpy(reinterpret_cast<char*>(&v) + 32, &hi, 32);
  return v;
#elif defined(TERN_KERNELS_NEON)
  const int8x16_t b = vld1q_s8(static_cast<const int8_t*>(p));
  const int16x8_t lo = vmovl_s8(vget_low_s8(b)), hi = vmovl_high_s8(b);
  const float32x4_t q[4] = {vcvtq_f32_s32(vmovl_s16(vget_low_s16(lo))), vcvtq_f32_s32(vmovl_high_s16(lo)),
                            vcvtq_f32_s32(vmovl_s16(vget_low_s16(hi))), vcvtq_f32_s32(vmovl_high_s16(hi))};
  f32x16 v;
  __builtin_memcpy(&v, q, sizeof v);
  return v;
#else
  f32x16 v;
  for (int i = 0; i < 16; ++i) v[i] = static_cast<float>(static_cast<const int8_t*>(p)[i]);
  return v;
#endif
}

// A q4_0 head slice's codes as int8 (core/kv_format.h's kv_q4_unpack): groups
// of 32 with two masks and a shift per 16 bytes (the AVX levels; SSE2 would
// do, but the scalar level includes no intrinsics); other group sizes scalar.
inline void unpack_q4_head(const void* head, int hd, int g, int8_t* out) {
#if defined(__F16C__)
  if (g == 32) {
    const auto* packed = static_cast<const uint8_t*>(head) + 2 * (hd / g);
    const __m128i low4 = _mm_set1_epi8(0x0f), eight = _mm_set1_epi8(8);
    for (int k = 0; k < hd / 32; ++k) {
      const __m128i b = _mm_loadu_si128(reinterpret_cast<const __m128i*>(packed + 16 * k));
      _mm_storeu_si128(reinterpret_cast<__m128i*>(out + 32 * k), _mm_sub_epi8(_mm_and_si128(b, low4), eight));
      _mm_storeu_si128(reinterpret_cast<__m128i*>(out + 32 * k + 16),
                       _mm_sub_epi8(_mm_and_si128(_mm_srli_epi16(b, 4), low4), eight));
    }
    return;
  }
#elif defined(TERN_KERNELS_NEON)
  if (g == 32) {
    const auto* packed = static_cast<const uint8_t*>(head) + 2 * (hd / g);
    const uint8x16_t low4 = vdupq_n_u8(0x0f);
    const int8x16_t eight = vdupq_n_s8(8);
    for (int k = 0; k < hd / 32; ++k) {
      const uint8x16_t b = vld1q_u8(packed + 16 * k);
      vst1q_s8(out + 32 * k, vsubq_s8(vreinterpretq_s8_u8(vandq_u8(b, low4)), eight));
      vst1q_s8(out + 32 * k + 16, vsubq_s8(vreinterpretq_s8_u8(vshrq_n_u8(b, 4)), eight));
    }
    return;
  }
#endif
  kv_q4_unpack(head, hd, out);
}

#if defined(__AVX2__)
// 8 fp8 (E4M3) bytes at p as f32, exact: the magnitude's 7 bits placed in an
// f32's exponent and mantissa fields make value * 2^-120 (a code with a zero
// exponent an f32 subnormal, exact: no DAZ), times 2^120; NaN codes as NaN;
// then the sign.
__attribute__((always_inline)) inline __m256 fp8x8_to_float(const void* p) {
  const __m256i w = _mm256_cvtepu8_epi32(_mm_loadl_epi64(static_cast<const __m128i*>(p)));
  const __m256i mag = _mm256_and_si256(w, _mm256_set1_epi32(0x7f));
  __m256 f = _mm256_mul_ps(_mm256_castsi256_ps(_mm256_slli_epi32(mag, 20)), _mm256_set1_ps(0x1p120f));
  f = _mm256_blendv_ps(f, _mm256_castsi256_ps(_mm256_set1_epi32(0x7fc00000)),
                       _mm256_castsi256_ps(_mm256_cmpeq_epi32(mag, _mm256_set1_epi32(0x7f))));
  return _mm256_or_ps(f, _mm256_castsi256_ps(_mm256_slli_epi32(_mm256_and_si256(w, _mm256_set1_epi32(0x80)), 24)));
}
#endif

// 16 fp8 bytes at p as f32 (exact): AVX-512 as fp8x8_to_float, 16 lanes; AVX2
// two of it; otherwise core/fp8.h's table of halves.
__attribute__((always_inline)) inline f32x16 fp8x16_to_float(const void* p) {
#if defined(__AVX512F__)
  const __m512i w = _mm512_cvtepu8_epi32(_mm_loadu_si128(static_cast<const __m128i*>(p)));
  const __m512i mag = _mm512_and_si512(w, _mm512_set1_epi32(0x7f));
  __m512 f = _mm512_mul_ps(_mm512_castsi512_ps(_mm512_slli_epi32(mag, 20)), _mm512_set1_ps(0x1p120f));
  f = _mm512_mask_mov_ps(f, _mm512_cmpeq_epi32_mask(mag, _mm512_set1_epi32(0x7f)),
                         _mm512_castsi512_ps(_mm512_set1_epi32(0x7fc00000)));
  return (f32x16)_mm512_castsi512_ps(
      _mm512_or_si512(_mm512_castps_si512(f), _mm512_slli_epi32(_mm512_and_si512(w, _mm512_set1_epi32(0x80)), 24)));
#elif defined(__AVX2__)
  f32x16 v;
  const __m256 lo = fp8x8_to_float(p), hi = fp8x8_to_float(static_cast<const uint8_t*>(p) + 8);
  __builtin_memcpy(&v, &lo, 32);
  __builtin_memcpy(reinterpret_cast<char*>(&v) + 32, &hi, 32);
  return v;
#else
  f32x16 v;
  for (int i = 0; i < 16; ++i) v[i] = half_to_float1(&kFp8E4M3Half[static_cast<const uint8_t*>(p)[i]]);
  return v;
#endif
}

// A q8_0 head slice is [hd / g half scales][hd int8 codes]: where the codes start.
inline int q8_codes_offset(int hd, int g) { return 2 * (hd / g); }

// 16 elements from element i of a head slice (f32, f16; for q8_0 `p` points
// at its codes, and the codes are what is returned: the caller applies the
// scales from a table per tile, see Q8Scales, which costs far less than
// converting a half scale per load).
template <int F>
__attribute__((always_inline)) inline f32x16 load16_kv(const void* p, int i) {
  if constexpr (F == kFmtF32) {
    return load16(static_cast<const float*>(p) + i);
  } else if constexpr (F == kFmtF16) {
    return load16_half(static_cast<const uint16_t*>(p) + i);
  } else if constexpr (F == kFmtFp8) {
    return fp8x16_to_float(static_cast<const uint8_t*>(p) + i);
  } else {
    return int8x16_to_float(static_cast<const int8_t*>(p) + i);
  }
}

// A tile's q8_0 scales as f32, [group][position] (positions past the tile's
// end 0): keys' scale the scores per group, values' the codes P·V loads.
// Then the query rows of a row block as q8_0 (QueryBlockView::q8_*): codes,
// scales, and 128 * the sum of each group's codes.
constexpr int kMaxQ8Groups = kMaxHeadDim / 32;  // groups of 32, or one of head_dim
struct Q8Scales {
  float k[kMaxQ8Groups][kAttentionTile];
  float v[kMaxQ8Groups][kAttentionTile];
  const int8_t* qc[kRowBlock];
  const float* dq[kRowBlock];
  const int32_t* qsum128[kRowBlock];
  // P·V's weights with the value scales folded in: w[r][group][j] = p[r][j] * d_v[group][j],
  // so P·V multiplies codes (one multiply per weight, not one per loaded vector).
  float w[kRowBlock][kMaxQ8Groups][kAttentionTile];
};

#if defined(__AVX512F__)
// Rows j < n (n <= 16) of 16 elements each from element `offset` of the head
// slices `rows[j]` (stored as F, converted as they load), written transposed: dst[i * kAttentionTile + j] for i < 16, j < 16
// (rows past n as zeros). In registers: 16 loads (converting halves as they
// load), 64 shuffles, 16 stores, where a scalar transpose makes 256 of each.
__attribute__((always_inline)) inline void transpose16_store(__m512* r, float* dst);

template <int F>
__attribute__((always_inline)) inline void transpose16_to_tile(const void* const* rows, int offset, int n, float* dst) {
  __m512 r[16];
  for (int j = 0; j < 16; ++j) r[j] = j < n ? (__m512)load16_kv<F>(rows[j], offset) : _mm512_setzero_ps();
  transpose16_store(r, dst);
}

// q8_0 keys for the int8 dot products: 16 rows' 64 codes from `offset`, as
// 16 dwords (4 codes) each, biased by 128 (unsigned, as vpdpbusd takes its
// first operand), transposed: dst[d * kAttentionTile + j] = dword d of row j.
__attribute__((always_inline)) inline void transpose_codes16(const void* const* rows, int offset, int n, uint32_t* dst) {
  const __m512i bias = _mm512_set1_epi8(static_cast<char>(0x80));
  __m512 r[16];
  for (int j = 0; j < 16; ++j)
    r[j] = _mm512_castsi512_ps(j < n ? _mm512_xor_si512(_mm512_loadu_si512(static_cast<const int8_t*>(rows[j]) + offset), bias)
                                     : bias);
  transpose16_store(r, reinterpret_cast<float*>(dst));
}

// The 16 x 16 transpose of 32-bit lanes (only moved, never computed on).
__attribute__((always_inline)) inline void transpose16_store(__m512* r, float* dst) {
  __m512 t[16];
  for (int j = 0; j < 16; j += 2) {  // 2x2 blocks of single floats
    t[j] = _mm512_unpacklo_ps(r[j], r[j + 1]);
    t[j + 1] = _mm512_unpackhi_ps(r[j], r[j + 1]);
  }
  for (int j = 0; j < 16; j += 4) {  // then of float pairs
    r[j] = _mm512_castpd_ps(_mm512_unpacklo_pd(_mm512_castps_pd(t[j]), _mm512_castps_pd(t[j + 2])));
    r[j + 1] = _mm512_castpd_ps(_mm512_unpackhi_pd(_mm512_castps_pd(t[j]), _mm512_castps_pd(t[j + 2])));
    r[j + 2] = _mm512_castpd_ps(_mm512_unpacklo_pd(_mm512_castps_pd(t[j + 1]), _mm512_castps_pd(t[j + 3])));
    r[j + 3] = _mm512_castpd_ps(_mm512_unpackhi_pd(_mm512_castps_pd(t[j + 1]), _mm512_castps_pd(t[j + 3])));
  }
  // r[4a + b] now holds, in 128-bit lane L, element 4L + b of rows 4a .. 4a+3.
  for (int j = 0; j < 4; ++j) {  // then of 128-bit lanes
    t[j] = _mm512_shuffle_f32x4(r[j], r[j + 4], 0x88);
    t[j + 4] = _mm512_shuffle_f32x4(r[j], r[j + 4], 0xdd);
    t[j + 8] = _mm512_shuffle_f32x4(r[j + 8], r[j + 12], 0x88);
    t[j + 12] = _mm512_shuffle_f32x4(r[j + 8], r[j + 12], 0xdd);
  }
  for (int j = 0; j < 4; ++j) {
    // Columns j, 4 + j, 8 + j, 12 + j of the source.
    _mm512_storeu_ps(dst + (j)*kAttentionTile, _mm512_shuffle_f32x4(t[j], t[j + 8], 0x88));
    _mm512_storeu_ps(dst + (j + 8) * kAttentionTile, _mm512_shuffle_f32x4(t[j], t[j + 8], 0xdd));
    _mm512_storeu_ps(dst + (j + 4) * kAttentionTile, _mm512_shuffle_f32x4(t[j + 4], t[j + 12], 0x88));
    _mm512_storeu_ps(dst + (j + 12) * kAttentionTile, _mm512_shuffle_f32x4(t[j + 4], t[j + 12], 0xdd));
  }
}
#elif defined(__AVX2__) && defined(__F16C__)
// 8 elements of a head slice from element i (a multiple of 8) as f32.
template <int F>
__attribute__((always_inline)) inline __m256 load8_kv(const void* p, int i) {
  if constexpr (F == kFmtF32) {
    return _mm256_loadu_ps(static_cast<const float*>(p) + i);
  } else if constexpr (F == kFmtF16) {
    return _mm256_cvtph_ps(_mm_loadu_si128(reinterpret_cast<const __m128i*>(static_cast<const uint16_t*>(p) + i)));
  } else if constexpr (F == kFmtFp8) {
    return fp8x8_to_float(static_cast<const uint8_t*>(p) + i);
  } else {  // the codes, as load16_kv
    return _mm256_cvtepi32_ps(
        _mm256_cvtepi8_epi32(_mm_loadl_epi64(reinterpret_cast<const __m128i*>(static_cast<const int8_t*>(p) + i))));
  }
}

// The AVX2 form: 8 rows of 8 floats, 24 shuffles.
template <int F>
__attribute__((always_inline)) inline void transpose8_to_tile(const void* const* rows, int offset, int n, float* dst) {
  __m256 r[8];
  for (int j = 0; j < 8; ++j) r[j] = j < n ? load8_kv<F>(rows[j], offset) : _mm256_setzero_ps();
  __m256 t[8], u[8];
  for (int j = 0; j < 8; j += 2) {
    t[j] = _mm256_unpacklo_ps(r[j], r[j + 1]);
    t[j + 1] = _mm256_unpackhi_ps(r[j], r[j + 1]);
  }
  for (int j = 0; j < 8; j += 4) {  // u[j + b]: element 4L + b of rows j .. j+3, in 128-bit lane L
    u[j] = _mm256_shuffle_ps(t[j], t[j + 2], 0x44);
    u[j + 1] = _mm256_shuffle_ps(t[j], t[j + 2], 0xee);
    u[j + 2] = _mm256_shuffle_ps(t[j + 1], t[j + 3], 0x44);
    u[j + 3] = _mm256_shuffle_ps(t[j + 1], t[j + 3], 0xee);
  }
  for (int b = 0; b < 4; ++b) {
    _mm256_storeu_ps(dst + b * kAttentionTile, _mm256_permute2f128_ps(u[b], u[b + 4], 0x20));
    _mm256_storeu_ps(dst + (b + 4) * kAttentionTile, _mm256_permute2f128_ps(u[b], u[b + 4], 0x31));
  }
}
#endif

// kVecW elements of a head slice from element i (as load16_kv).
template <int F>
__attribute__((always_inline)) inline fvec loadv_kv(const void* p, int i) {
#if defined(TERN_ATTENTION_YMM)
  return (fvec)load8_kv<F>(p, i);
#else
  return load16_kv<F>(p, i);
#endif
}

// The next tile's key and value rows (this head's slice), requested a few at a
// time while the current tile is computed: issued all at once they fill the
// core's miss queue and stall it, spread out they overlap the arithmetic.
struct TilePrefetch {
  const char* k[kAttentionTile];
  const char* v[kAttentionTile];
  int n = 0;       // rows
  int bytes = 0;   // per row
  int offset = 0;  // from each row pointer: the head slice being requested
};

__attribute__((always_inline)) inline void prefetch_row(const TilePrefetch* pf, int j) {
  if (!pf || j >= pf->n) return;
  for (int c = pf->offset; c < pf->offset + pf->bytes; c += 64) {
    __builtin_prefetch(pf->k[j] + c);
    __builtin_prefetch(pf->v[j] + c);
  }
  if (pf->bytes % 64 != 0) {  // a slice not a multiple of a line (q8_0's 68 bytes) may end on one more
    __builtin_prefetch(pf->k[j] + pf->offset + pf->bytes - 1);
    __builtin_prefetch(pf->v[j] + pf->offset + pf->bytes - 1);
  }
}

// o[r][i0 .. i0 + kVecW NV) = o * corr[r] + sum over j of sc[r][j] * v_j, for the
// live rows of a block: each value vector loaded feeds the four rows, each
// weight broadcast feeds NV vectors. Every lane sums over j in order, so the
// result does not depend on NV or the vector width. F: how value rows are
// stored, converted as they load (the same values a converted copy would
// hold); g: q8_0's group. kFold (q8_0): the values are codes and each lane's
// weight is its group's folded weight (Q8Scales::w) instead of sc.
template <int NV, int F, bool kFold, int R>
__attribute__((always_inline)) inline void pv_lanes(int i0, int n_pos, const void* const* vp,
                                                    const float (*sc)[kKvTile], const bool* live, const float* corr,
                                                    float* o, int hd, int g, const Q8Scales* q8) {
  fvec ov[R][NV] = {};
  for (int j = 0; j < n_pos; ++j) {
    fvec v[NV];
    for (int c = 0; c < NV; ++c) v[c] = loadv_kv<F>(vp[j], i0 + kVecW * c);
    for (int r = 0; r < R; ++r) {
      if constexpr (kFold) {
        for (int c = 0; c < NV; ++c) ov[r][c] += q8->w[r][(i0 + kVecW * c) / g][j] * v[c];
      } else {
        const float w = sc[r][j];
        for (int c = 0; c < NV; ++c) ov[r][c] += w * v[c];
      }
    }
  }
  for (int r = 0; r < R; ++r) {
    if (!live[r]) continue;
    float* orow = o + static_cast<size_t>(r) * hd + i0;
    for (int c = 0; c < NV; ++c) storev(orow + kVecW * c, loadv(orow + kVecW * c) * corr[r] + ov[r][c]);
  }
}

// o = o * corr + P V for rows r < R, 64 lanes of head_dim at a time, then
// kVecW; returns where the lanes stopped (head sizes not a multiple of kVecW
// leave a tail).
template <int F, bool kFold, int R>
__attribute__((always_inline)) inline int pv_rows(int hd, int n_pos, const void* const* vp,
                                                  const float (*sc)[kKvTile], const bool* live, const float* corr,
                                                  float* o, int g, const Q8Scales* q8) {
  int i0 = 0;
#if defined(__AVX512F__)
  for (; i0 + 64 <= hd; i0 += 64) pv_lanes<4, F, kFold, R>(i0, n_pos, vp, sc, live, corr, o, hd, g, q8);
#else  // R x 4 accumulators do not fit the registers (qk_rows): R x kAccGroups
  constexpr int NV = kAccGroups<R> * 16 / kVecW;
  for (; i0 + kVecW * NV <= hd; i0 += kVecW * NV)
    pv_lanes<NV, F, kFold, R>(i0, n_pos, vp, sc, live, corr, o, hd, g, q8);
#endif
  for (; i0 + kVecW <= hd; i0 += kVecW) pv_lanes<1, F, kFold, R>(i0, n_pos, vp, sc, live, corr, o, hd, g, q8);
  return i0;
}

template <int F, bool kFold>
__attribute__((always_inline)) inline int pv_rows_n(int nr, int hd, int n_pos, const void* const* vp,
                                                    const float (*sc)[kKvTile], const bool* live, const float* corr,
                                                    float* o, int g, const Q8Scales* q8) {
  switch (nr) {
    case 1: return pv_rows<F, kFold, 1>(hd, n_pos, vp, sc, live, corr, o, g, q8);
    case 2: return pv_rows<F, kFold, 2>(hd, n_pos, vp, sc, live, corr, o, g, q8);
    case 3: return pv_rows<F, kFold, 3>(hd, n_pos, vp, sc, live, corr, o, g, q8);
    default: return pv_rows<F, kFold, 4>(hd, n_pos, vp, sc, live, corr, o, g, q8);
  }
}

// Keys of one tile (rows kp[j], j < n_pos, as F) transposed into k_t
// [hd][kKvTile], columns past n_pos zero; q8_0 keys as their codes.
template <int F>
inline void transpose_keys(const void* const* kp, int n_pos, int hd, float* k_t, float* k_row) {
#if defined(__AVX512F__)
  if (hd % 16 == 0) {
    for (int j0 = 0; j0 < kKvTile; j0 += 16)
      for (int i0 = 0; i0 < hd; i0 += 16) transpose16_to_tile<F>(kp + j0, i0, n_pos - j0, k_t + i0 * kKvTile + j0);
    return;
  }
#elif defined(__AVX2__) && defined(__F16C__)
  if (hd % 8 == 0) {
    for (int j0 = 0; j0 < kKvTile; j0 += 8)
      for (int i0 = 0; i0 < hd; i0 += 8) transpose8_to_tile<F>(kp + j0, i0, n_pos - j0, k_t + i0 * kKvTile + j0);
    return;
  }
#endif
  for (int j = 0; j < n_pos; ++j) {
    const float* kf = static_cast<const float*>(kp[j]);
    if constexpr (F == kFmtQ8) {  // kp: the codes
      for (int i = 0; i < hd; ++i) k_row[i] = static_cast<float>(static_cast<const int8_t*>(kp[j])[i]);
      kf = k_row;
    } else if constexpr (F == kFmtF16) {
      half_to_float_row(kp[j], k_row, hd);
      kf = k_row;
    } else if constexpr (F == kFmtFp8) {
      for (int i = 0; i < hd; ++i) k_row[i] = half_to_float1(&kFp8E4M3Half[static_cast<const uint8_t*>(kp[j])[i]]);
      kf = k_row;
    }
    for (int i = 0; i < hd; ++i) k_t[i * kKvTile + j] = kf[i];
  }
  for (int j = n_pos; j < kKvTile; ++j)
    for (int i = 0; i < hd; ++i) k_t[i * kKvTile + j] = 0.0f;
}

// Scores of rows r < R against the 64 transposed keys of a tile:
// sc[r][j] = sum over i, in order, of q[r][i] * k_t[i][j].
// pf: the next tile's rows, requested one per step (the rest after the loop).
template <int R>
__attribute__((always_inline)) inline void qk_dims(const float* k_t, const float* const* q, int i0, int i1,
                                                   f32x16 (*acc)[4], const TilePrefetch* pf) {
  for (int i = i0; i < i1; ++i) {
    prefetch_row(pf, i);
    const float* kr = k_t + i * kKvTile;
    const f32x16 k0 = load16(kr), k1 = load16(kr + 16), k2 = load16(kr + 32), k3 = load16(kr + 48);
    for (int r = 0; r < R; ++r) {
      const float qi = q[r][i];
      acc[r][0] += qi * k0;
      acc[r][1] += qi * k1;
      acc[r][2] += qi * k2;
      acc[r][3] += qi * k3;
    }
  }
}

// A q8_0 group's exact integer dot products (as f32) into the scores: times
// the key scales times the query row's scale. The float and the int8 paths
// both end here, so they give the same bits.
template <class V>
__attribute__((always_inline)) inline void q8_group_scores(V& acc, const V& dots, const V& dk, float dq) {
  acc += dots * (dk * dq);
}

// q8_0 (k_t and q holding codes): each group's dot products, exact, then
// scaled into the scores, groups in order.
template <int R>
__attribute__((always_inline)) inline void qk_rows(const float* k_t, const float* const* q, int hd,
                                                   float (*sc)[kKvTile], const TilePrefetch* pf, int g,
                                                   const Q8Scales* q8) {
#if !defined(__AVX512F__)
  // Below AVX-512 R x 4 16-lane accumulators cannot stay in 16 registers
  // (GCC spilled them every step). So NC vectors of the tile's positions at a
  // time, R x NC accumulators (8 ymm or 8 pairs of xmm: enough independent
  // chains to hide the FMA latency when R is 1, as in decode); q8_0 keeps a
  // group's partial sums beside them, so half as many. The same sum in the
  // same order for every score.
  constexpr int NC = kAccGroups<R> * 16 / kVecW;
  constexpr int NQ = NC > 1 ? NC / 2 : 1;
  // The next tile's rows are requested over all passes, one every kPasses
  // steps (rows [0, hd) here, the rest after): all in the first pass they came
  // in a burst that filled the miss queue, and decode at depth ran no faster
  // from DRAM than the loads and the arithmetic one after the other.
  if (!q8) {
    constexpr int kPasses = kKvTile / kVecW / NC;
    for (int c0 = 0; c0 < kKvTile / kVecW; c0 += NC) {
      fvec a[R][NC] = {};
      const int step0 = c0 / NC * hd;
      for (int i = 0; i < hd; ++i) {
        if ((step0 + i) % kPasses == 0) prefetch_row(pf, (step0 + i) / kPasses);
        fvec k[NC];
        for (int c = 0; c < NC; ++c) k[c] = loadv(k_t + i * kKvTile + kVecW * (c0 + c));
        for (int r = 0; r < R; ++r)
          for (int c = 0; c < NC; ++c) a[r][c] += q[r][i] * k[c];
      }
      for (int r = 0; r < R; ++r)
        for (int c = 0; c < NC; ++c) storev(sc[r] + kVecW * (c0 + c), a[r][c]);
    }
  } else {
    constexpr int kPasses = kKvTile / kVecW / NQ;
    for (int c0 = 0; c0 < kKvTile / kVecW; c0 += NQ) {
      fvec a[R][NQ] = {};
      const int step0 = c0 / NQ * hd;
      for (int i0 = 0; i0 < hd; i0 += g) {
        fvec part[R][NQ] = {};
        for (int i = i0; i < i0 + g; ++i) {
          if ((step0 + i) % kPasses == 0) prefetch_row(pf, (step0 + i) / kPasses);
          fvec k[NQ];
          for (int c = 0; c < NQ; ++c) k[c] = loadv(k_t + i * kKvTile + kVecW * (c0 + c));
          for (int r = 0; r < R; ++r)
            for (int c = 0; c < NQ; ++c) part[r][c] += q[r][i] * k[c];
        }
        const float* d = q8->k[i0 / g];
        for (int c = 0; c < NQ; ++c) {
          const fvec dc = loadv(d + kVecW * (c0 + c));
          for (int r = 0; r < R; ++r) q8_group_scores(a[r][c], part[r][c], dc, q8->dq[r][i0 / g]);
        }
      }
      for (int r = 0; r < R; ++r)
        for (int c = 0; c < NQ; ++c) storev(sc[r] + kVecW * (c0 + c), a[r][c]);
    }
  }
  for (int j = hd; pf && j < pf->n; ++j) prefetch_row(pf, j);
  return;
#else
  f32x16 acc[R][4] = {};
  if (!q8) {
    qk_dims<R>(k_t, q, 0, hd, acc, pf);
  } else {
    for (int i0 = 0; i0 < hd; i0 += g) {
      f32x16 part[R][4] = {};
      qk_dims<R>(k_t, q, i0, i0 + g, part, pf);
      const float* d = q8->k[i0 / g];
      for (int c = 0; c < 4; ++c) {
        const f32x16 dc = load16(d + 16 * c);
        for (int r = 0; r < R; ++r) q8_group_scores(acc[r][c], part[r][c], dc, q8->dq[r][i0 / g]);
      }
    }
  }
  for (int r = 0; r < R; ++r)
    for (int c = 0; c < 4; ++c) store16(sc[r] + 16 * c, acc[r][c]);
  for (int j = hd; pf && j < pf->n; ++j) prefetch_row(pf, j);
#endif
}

#if defined(__AVX512VNNI__)
// q8_0 scores with int8 dot products (head sizes a multiple of 64, groups of
// 32): kt8 holds the tile's key codes + 128 as dwords [hd / 4][kKvTile]
// (transpose_codes16); a group's 8 dwords per position go through vpdpbusd
// against the query codes, the bias removed exactly (128 * the sum of the
// query's codes), then q8_group_scores as the float path. Positions in two
// halves of 32 keep the int and float accumulators in registers.
template <int R>
__attribute__((always_inline)) inline void qk_rows_vnni(const uint32_t* kt8, int hd, float (*sc)[kKvTile],
                                                        const TilePrefetch* pf, const Q8Scales* q8) {
  int ipf = 0;
  for (int h = 0; h < 2; ++h) {
    f32x16 acc[R][2] = {};
    for (int gi = 0; gi < hd / 32; ++gi) {
      __m512i dot[R][2];
      for (int r = 0; r < R; ++r) dot[r][0] = dot[r][1] = _mm512_setzero_si512();
      for (int d4 = gi * 8; d4 < gi * 8 + 8; ++d4) {
        prefetch_row(pf, ipf++);
        const uint32_t* kr = kt8 + static_cast<size_t>(d4) * kKvTile + 32 * h;
        const __m512i k0 = _mm512_loadu_si512(kr), k1 = _mm512_loadu_si512(kr + 16);
        for (int r = 0; r < R; ++r) {
          int32_t qd;
          __builtin_memcpy(&qd, q8->qc[r] + 4 * d4, 4);
          const __m512i qb = _mm512_set1_epi32(qd);
          dot[r][0] = _mm512_dpbusd_epi32(dot[r][0], k0, qb);
          dot[r][1] = _mm512_dpbusd_epi32(dot[r][1], k1, qb);
        }
      }
      for (int c = 0; c < 2; ++c) {
        const f32x16 dk = load16(q8->k[gi] + 32 * h + 16 * c);
        for (int r = 0; r < R; ++r) {
          const __m512i exact = _mm512_sub_epi32(dot[r][c], _mm512_set1_epi32(q8->qsum128[r][gi]));
          q8_group_scores(acc[r][c], (f32x16)_mm512_cvtepi32_ps(exact), dk, q8->dq[r][gi]);
        }
      }
    }
    for (int r = 0; r < R; ++r)
      for (int c = 0; c < 2; ++c) store16(sc[r] + 32 * h + 16 * c, acc[r][c]);
  }
  for (; pf && ipf < pf->n; ++ipf) prefetch_row(pf, ipf);
}
#endif

// Tiles are 64 positions at absolute multiples of 64, gathered across the runs
// (a paged cache's blocks), so a row's arithmetic is the same for any layout.
// Keys are transposed into the tile ([head_dim][64], converted from half when
// needed) so that one query row's 64 scores accumulate in four 16-lane
// registers with no horizontal sums; values are read row by row (half ones
// converted as they load, or once into scratch when several row blocks read
// them). Keys and values one tile ahead are prefetched. Every sum runs in a
// fixed order, and a row's arithmetic never depends on the rows beside it.
template <bool kSoftcap>
void attention_partial_t(const AttentionShape& s, const QueryBlockView& b, int kv_head0, int n_kv_heads,
                         int32_t kv_begin, int32_t kv_end, float* out, float* scratch) {
  const int hd = s.head_dim;
  const int group = s.n_head / s.n_head_kv;
  const int n_rows = b.n_q * group;
  const float inv_cap = kSoftcap ? 1.0f / s.softcap : 0.0f;
  const int fmt = kv_fmt(s.kv_type);
  const int g = kv_group_elems(s.kv_type, hd);
  const size_t head_bytes = kv_head_bytes(s.kv_type, hd);
  const size_t row_bytes = static_cast<size_t>(s.n_head_kv) * head_bytes;
  const size_t head_offset = static_cast<size_t>(kv_head0) * head_bytes;  // the item's first head
  const size_t head_stride = static_cast<size_t>(n_rows) * (hd + 2);       // one head's o, m, l in out
  float* k_t = scratch;                                          // [hd][kKvTile], transposed keys
  float* v_tile = scratch + static_cast<size_t>(kKvTile) * hd;   // [kKvTile][hd], stored values as f32
  const char* krow[kKvTile];  // this tile's key rows, from the item's first head slice
  const char* vrow[kKvTile];
  const void* kp[kKvTile];  // this tile's key rows (this head's slice)
  const void* vp[kKvTile];  // this tile's value rows: f32, or as stored when v_direct
  const void* vhead[kKvTile];  // this tile's value head slices as stored
  float sc[kRowBlock][kKvTile];
  float k_row[kMaxHeadDim];
  Q8Scales q8_tile;
  Q8Scales* q8 = fmt == kFmtQ8 ? &q8_tile : nullptr;
  const bool q4 = s.kv_type == KvType::Q4_0;
  const int q8_off = q8 && !q4 ? q8_codes_offset(hd, g) : 0;  // where a q8_0 head slice's codes start
  const void* khead[kKvTile];  // this tile's key head slices as stored (their scales)
  // q4_0: this tile's codes unpacked to int8, then read as q8_0 codes are.
  // Rows hd apart, not kMaxHeadDim: a 512-byte stride maps a tile's rows onto
  // a few L1 sets.
  alignas(64) int8_t q4_codes[2][kKvTile * kMaxHeadDim];  // keys, values
#if defined(__AVX512VNNI__)
  const bool vnni = q8 && hd % 64 == 0;  // groups of 32, whole 64-byte rows of codes
  uint32_t* kt8 = reinterpret_cast<uint32_t*>(k_t);  // [hd / 4][kKvTile] when vnni
#endif
  // Half or q8_0 values are converted as P V loads them when one block of
  // rows reads them (decode: one token's heads of this KV head); several
  // blocks share one converted copy in v_tile instead.
  const bool v_direct = fmt != kFmtF32 && hd % 16 == 0 && n_rows <= kRowBlock;
  int ir = 0;   // run cursor: runs are ascending
  int ipf = 0;  // the prefetch's run cursor, one tile ahead
  TilePrefetch next;
  next.bytes = static_cast<int>(head_bytes);
  for (int32_t p0 = kv_begin; p0 < kv_end;) {
    const int n_pos = min_i((p0 / kKvTile + 1) * kKvTile, kv_end) - p0;
    // The rows of the next tile, requested while this one is scored:
    // decode at depth streams the cache, and unrequested each row would wait
    // on DRAM in turn.
    const int32_t p1 = p0 + n_pos;
    next.n = min_i((p1 / kKvTile + 1) * kKvTile, kv_end) - p1;
    for (int j = 0; j < next.n; ++j) {
      const int32_t pos = p1 + j;
      while (ipf < b.n_runs && b.runs[ipf].pos0 + b.runs[ipf].n <= pos) ++ipf;
      const KvRun& run = b.runs[ipf];
      const size_t off = static_cast<size_t>(pos - run.pos0) * row_bytes + head_offset;
      next.k[j] = static_cast<const char*>(run.k) + off;
      next.v[j] = static_cast<const char*>(run.v) + off;
    }
    for (int j = 0; j < n_pos; ++j) {
      const int32_t pos = p0 + j;
      while (ir < b.n_runs && b.runs[ir].pos0 + b.runs[ir].n <= pos) ++ir;
      const KvRun& run = b.runs[ir];
      const size_t off = static_cast<size_t>(pos - run.pos0) * row_bytes + head_offset;
      krow[j] = static_cast<const char*>(run.k) + off;
      vrow[j] = static_cast<const char*>(run.v) + off;
    }
    // The item's heads one after another on the same rows: a tile's rows are
    // read from memory once for all of them (whole rows, which the hardware
    // streams), and the positions above are found once.
    for (int hh = 0; hh < n_kv_heads; ++hh) {
      const int kv_head = kv_head0 + hh;
      float* o = out + hh * head_stride;
      float* m = o + static_cast<size_t>(n_rows) * hd;
      float* l = m + n_rows;
      for (int j = 0; j < n_pos; ++j) {
        const void* k = krow[j] + hh * head_bytes;
        const void* v = vrow[j] + hh * head_bytes;
        khead[j] = k;
        vhead[j] = v;
        if (q4) {
          int8_t* kc = q4_codes[0] + static_cast<size_t>(j) * hd;
          int8_t* vc = q4_codes[1] + static_cast<size_t>(j) * hd;
          unpack_q4_head(k, hd, g, kc);
          unpack_q4_head(v, hd, g, vc);
          k = kc;
          v = vc;
        }
        kp[j] = static_cast<const char*>(k) + q8_off;  // q8_0: the codes
        if (fmt == kFmtF32 || v_direct) {
          vp[j] = static_cast<const char*>(v) + q8_off;
        } else {
          float* dst = v_tile + static_cast<size_t>(j) * hd;
          if (fmt == kFmtF16) {
            half_to_float_row(v, dst, hd);
          } else if (fmt == kFmtFp8) {
            for (int i = 0; i < hd; ++i)
              dst[i] = half_to_float1(&kFp8E4M3Half[static_cast<const uint8_t*>(v)[i]]);
          } else {  // q8_0: the codes (P·V's weights carry the scales)
            const int8_t* codes = static_cast<const int8_t*>(v) + q8_off;
            for (int i = 0; i < hd; ++i) dst[i] = static_cast<float>(codes[i]);
          }
          vp[j] = dst;
        }
      }
      if (q8) {  // this tile's scales: the halves copied, then converted 16 at a time
        uint16_t halves[2][kKvTile];
        for (int gi = 0; gi < hd / g; ++gi) {
          for (int j = 0; j < n_pos; ++j) {
            __builtin_memcpy(&halves[0][j], static_cast<const char*>(khead[j]) + 2 * gi, 2);
            __builtin_memcpy(&halves[1][j], static_cast<const char*>(vhead[j]) + 2 * gi, 2);
          }
          for (int j = n_pos; j < kKvTile; ++j) halves[0][j] = halves[1][j] = 0;  // +0.0
          half_to_float_row(halves[0], q8->k[gi], kKvTile);
          half_to_float_row(halves[1], q8->v[gi], kKvTile);
        }
      }
      // Keys transposed into k_t (columns past n_pos zero).
#if defined(__AVX512VNNI__)
      if (vnni) {
        for (int j0 = 0; j0 < kKvTile; j0 += 16)
          for (int c = 0; c < hd / 64; ++c)
            transpose_codes16(kp + j0, 64 * c, n_pos - j0, kt8 + 16 * c * kKvTile + j0);
      } else
#endif
        switch (fmt) {
          case kFmtF16:
            transpose_keys<kFmtF16>(kp, n_pos, hd, k_t, k_row);
            break;
          case kFmtQ8:
            transpose_keys<kFmtQ8>(kp, n_pos, hd, k_t, k_row);
            break;
          case kFmtFp8:
            transpose_keys<kFmtFp8>(kp, n_pos, hd, k_t, k_row);
            break;
          default:
            transpose_keys<kFmtF32>(kp, n_pos, hd, k_t, k_row);
            break;
        }

      // Query rows four at a time: each key or value load feeds four rows.
      for (int row0 = 0; row0 < n_rows; row0 += kRowBlock) {
        const int nr = min_i(kRowBlock, n_rows - row0);
        const float* q[kRowBlock];
        int32_t qpos[kRowBlock], lo[kRowBlock];
        for (int r = 0; r < kRowBlock; ++r) {
          const int row = row0 + min_i(r, nr - 1);  // missing rows repeat the last one; results unused
          const int t = row / group, hg = row % group;
          qpos[r] = b.pos0 + t;
          lo[r] = s.sliding_window > 0 ? qpos[r] - s.sliding_window + 1 : 0;
          q[r] = b.q + (static_cast<size_t>(t) * s.n_head + kv_head * group + hg) * hd;
        }
        if (q8)  // the rows as q8_0, rounded once per call (attention.cpp)
          for (int r = 0; r < kRowBlock; ++r) {
            const size_t head = static_cast<size_t>(q[r] - b.q) / static_cast<size_t>(hd), n_groups = hd / g;
            q[r] = b.q8_floats + head * hd;
            q8->qc[r] = b.q8_codes + head * hd;
            q8->dq[r] = b.q8_scales + head * n_groups;
            q8->qsum128[r] = b.q8_sums128 + head * n_groups;
          }
        // Only the nr live rows are scored and accumulated (decode with 3
        // heads per KV head computes 3 rows, not 4); each row's sums are the
        // same whichever count its block has.
        // Each head's first row block requests its own slice of the next
        // tile's rows while it scores: spread over every head's pass, not
        // all at once in the first (a burst fills the miss queue and stalls).
        next.offset = static_cast<int>(hh * head_bytes);
        const TilePrefetch* pf = row0 == 0 ? &next : nullptr;
#if defined(__AVX512VNNI__)
        if (vnni) {
          switch (nr) {
            case 1:
              qk_rows_vnni<1>(kt8, hd, sc, pf, q8);
              break;
            case 2:
              qk_rows_vnni<2>(kt8, hd, sc, pf, q8);
              break;
            case 3:
              qk_rows_vnni<3>(kt8, hd, sc, pf, q8);
              break;
            default:
              qk_rows_vnni<4>(kt8, hd, sc, pf, q8);
              break;
          }
        } else
#endif
          switch (nr) {
            case 1:
              qk_rows<1>(k_t, q, hd, sc, pf, g, q8);
              break;
            case 2:
              qk_rows<2>(k_t, q, hd, sc, pf, g, q8);
              break;
            case 3:
              qk_rows<3>(k_t, q, hd, sc, pf, g, q8);
              break;
            default:
              qk_rows<4>(k_t, q, hd, sc, pf, g, q8);
              break;
          }
        float corr[kRowBlock];
        bool live[kRowBlock];
        for (int r = 0; r < kRowBlock; ++r) {
          float* p = sc[r];
          live[r] = false;
          corr[r] = 1.0f;
          if (r >= nr) continue;  // not scored, never read
          const int row = row0 + r;
          // Scale, soft-cap (when on), mask (causal, window, past the tile's
          // end) and the tile max, 16 positions at a time (written with
          // vectors: the compiler leaves this loop scalar otherwise).
          float tile_max = kNegInf;
          if constexpr (kSoftcap) {  // exp_poly.h's tanh is 16 lanes wide
            f32x16 vmax = kNegInf - f32x16{};
            for (int c = 0; c < kKvTile / 16; ++c) {
              const i32x16 j = kIota + 16 * c;
              const i32x16 pos = j + p0;
              const i32x16 valid = (j < n_pos) & (pos <= qpos[r]) & (pos >= lo[r]);
              const f32x16 v = valid ? softcap16(load16(p + 16 * c) * s.scale, s.softcap, inv_cap) : kNegInf - f32x16{};
              store16(p + 16 * c, v);
              vmax = v > vmax ? v : vmax;
            }
            for (int i = 0; i < 16; ++i) tile_max = max_f(tile_max, vmax[i]);
          } else {
            fvec vmax = kNegInf - fvec{};
            for (int c = 0; c < kKvTile / kVecW; ++c) {
              const ivec j = kIotaV + kVecW * c;
              const ivec pos = j + p0;
              const ivec valid = (j < n_pos) & (pos <= qpos[r]) & (pos >= lo[r]);
              const fvec v = valid ? loadv(p + kVecW * c) * s.scale : kNegInf - fvec{};
              storev(p + kVecW * c, v);
              vmax = v > vmax ? v : vmax;
            }
            for (int i = 0; i < kVecW; ++i) tile_max = max_f(tile_max, vmax[i]);
          }
          if (tile_max == kNegInf) {  // fully masked tile: this row is unchanged
            for (int j = 0; j < kKvTile; ++j) p[j] = 0.0f;
            continue;
          }
          live[r] = true;
          const float m_new = max_f(m[row], tile_max);
          corr[r] = fast_exp(m[row] - m_new);  // 0 when m was -inf
#if defined(TERN_ATTENTION_YMM)
          for (int j = 0; j < kKvTile; j += kVecW) {
            const fvec x = loadv(p + j);
            storev(p + j, x == kNegInf ? fvec{} : fast_exp8(x - m_new));
          }
#else
          for (int j = 0; j < kKvTile; ++j) p[j] = p[j] == kNegInf ? 0.0f : fast_exp(p[j] - m_new);
#endif
          // lanes[i] = p[i] + p[i + 16] + p[i + 32] + p[i + 48], in that order.
          float lane_sums[kLanes];
          for (int h = 0; h < kLanes; h += kVecW) {
            fvec lanes = loadv(p + h);
            for (int c = 1; c < kKvTile / kLanes; ++c) lanes += loadv(p + kLanes * c + h);
            storev(lane_sums + h, lanes);
          }
          l[row] = l[row] * corr[r] + reduce_lanes(lane_sums);
          m[row] = m_new;
        }
        if (q8)  // the value scales folded into the weights, per group
          for (int r = 0; r < nr; ++r)
            for (int gi = 0; gi < hd / g; ++gi)
              for (int c = 0; c < kKvTile / kVecW; ++c)
                storev(q8->w[r][gi] + kVecW * c, loadv(sc[r] + kVecW * c) * loadv(q8->v[gi] + kVecW * c));
        // o = o * corr + P V.
        float* orows = o + static_cast<size_t>(row0) * hd;
        const int vf = v_direct ? fmt : kFmtF32;
        const int i0 =
            vf == kFmtF16   ? pv_rows_n<kFmtF16, false>(nr, hd, n_pos, vp, sc, live, corr, orows, g, q8)
            : vf == kFmtFp8 ? pv_rows_n<kFmtFp8, false>(nr, hd, n_pos, vp, sc, live, corr, orows, g, q8)
            : vf == kFmtQ8  ? pv_rows_n<kFmtQ8, true>(nr, hd, n_pos, vp, sc, live, corr, orows, g, q8)
            : q8            ? pv_rows_n<kFmtF32, true>(nr, hd, n_pos, vp, sc, live, corr, orows, g, q8)
                            : pv_rows_n<kFmtF32, false>(nr, hd, n_pos, vp, sc, live, corr, orows, g, q8);
        for (int r = 0; r < nr; ++r) {  // head sizes that are not a multiple of 16
          if (!live[r]) continue;
          float* orow = o + static_cast<size_t>(row0 + r) * hd;
          for (int i = i0; i < hd; ++i) {
            float a = 0.0f;
            for (int j = 0; j < n_pos; ++j)
              a += (q8 ? q8->w[r][i / g][j] : sc[r][j]) * static_cast<const float*>(vp[j])[i];
            orow[i] = orow[i] * corr[r] + a;
          }
        }
      }
    }  // heads
    p0 += n_pos;
  }
}

// The table's entry: the soft-capped variant only when the shape asks for it,
// so attention without a cap runs exactly the code it ran before.
void attention_partial_impl(const AttentionShape& s, const QueryBlockView& b, int kv_head0, int n_kv_heads,
                            int32_t kv_begin, int32_t kv_end, float* out, float* scratch) {
  if (s.softcap > 0.0f)
    attention_partial_t<true>(s, b, kv_head0, n_kv_heads, kv_begin, kv_end, out, scratch);
  else
    attention_partial_t<false>(s, b, kv_head0, n_kv_heads, kv_begin, kv_end, out, scratch);
}

}  // namespace
}  // namespace tern::kernels
