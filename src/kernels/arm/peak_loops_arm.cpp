// The AArch64 throughput loops of kernels/peak_loops.h: Advanced SIMD f32 FMA
// (the baseline) and SDOT, the latter in a function with a `target` attribute
// that is only called when the CPU reports dotprod.
#include <arm_neon.h>

#include <cstddef>
#include <cstdint>

#include "kernels/cpu_features.h"
#include "kernels/peak_loops.h"

namespace tern::kernels::peak {
namespace {

constexpr int kAcc = 16;

double fma_loop_neon(long iters) {
  float32x4_t a[kAcc];
  for (int i = 0; i < kAcc; ++i) a[i] = vdupq_n_f32(0.001f * i);
  float32x4_t m = vdupq_n_f32(0.999f), c = vdupq_n_f32(0.001f);
  for (long it = 0; it < iters; ++it) {
#pragma GCC unroll 16
    for (int i = 0; i < kAcc; ++i) a[i] = vfmaq_f32(c, a[i], m);
    __asm__ volatile("" : "+w"(m), "+w"(c));
  }
  for (int i = 1; i < kAcc; ++i) a[0] = vaddq_f32(a[0], a[i]);
  return vaddvq_f32(a[0]);
}

__attribute__((target("arch=armv8.2-a+dotprod"))) double sdot_loop(long iters) {
  int32x4_t a[kAcc];
  for (int i = 0; i < kAcc; ++i) a[i] = vdupq_n_s32(i);
  int8x16_t u = vdupq_n_s8(3), s = vdupq_n_s8(-5);
  for (long it = 0; it < iters; ++it) {
#pragma GCC unroll 16
    for (int i = 0; i < kAcc; ++i) a[i] = vdotq_s32(a[i], u, s);
    __asm__ volatile("" : "+w"(u), "+w"(s));
  }
  // The lanes wrap by design (only the work counts): summed as unsigned.
  uint32x4_t sum = vreinterpretq_u32_s32(a[0]);
  for (int i = 1; i < kAcc; ++i) sum = vaddq_u32(sum, vreinterpretq_u32_s32(a[i]));
  return static_cast<double>(vaddvq_u32(sum));
}

}  // namespace

Loop f32_fma() { return {fma_loop_neon, kAcc * 4 * 2}; }
Loop int8_dot() { return cpu_features().dotprod ? Loop{sdot_loop, kAcc * 16 * 2} : Loop{}; }
Loop bf16_dot() { return {}; }
ReadLoop read_loop(int) { return nullptr; }

}  // namespace tern::kernels::peak
