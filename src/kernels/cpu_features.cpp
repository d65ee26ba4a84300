#include "kernels/cpu_features.h"

#include "core/config.h"

#include <cstdlib>
#include <cstring>

#if defined(__x86_64__) || defined(__i386__)
#include <cpuid.h>
#endif
#if defined(__aarch64__) && defined(__linux__)
#include <asm/hwcap.h>
#include <sys/auxv.h>
#endif

namespace tern::kernels {

const char* cpu_level_name(CpuLevel level) {
  switch (level) {
    case CpuLevel::Scalar: return "scalar";
    case CpuLevel::Avx2: return "avx2";
    case CpuLevel::Avx512: return "avx512";
    case CpuLevel::Neon: return "neon";
    case CpuLevel::NeonDot: return "dotprod";
    case CpuLevel::NeonI8mm: return "i8mm";
  }
  return "?";
}

const std::vector<CpuLevel>& all_cpu_levels() {
  static const std::vector<CpuLevel> levels = {
      CpuLevel::Scalar,
#if defined(__x86_64__)
      CpuLevel::Avx2,   CpuLevel::Avx512,
#elif defined(__aarch64__)
      CpuLevel::Neon,   CpuLevel::NeonDot, CpuLevel::NeonI8mm,
#endif
  };
  return levels;
}

const CpuFeatures& cpu_features() {
  static const CpuFeatures f = [] {
    CpuFeatures c;
#if defined(__x86_64__) || defined(__i386__)
    __builtin_cpu_init();
    c.avx2 = __builtin_cpu_supports("avx2");
    c.fma = __builtin_cpu_supports("fma");
    // F16C and AVX-VNNI from CPUID itself: clang 14's __builtin_cpu_supports
    // knows neither name (the fuzz build uses clang).
    unsigned a = 0, b = 0, cx = 0, d = 0;
    if (__get_cpuid(1, &a, &b, &cx, &d)) c.f16c = (cx >> 29) & 1;
    if (__get_cpuid_count(7, 1, &a, &b, &cx, &d)) c.avx_vnni = (a >> 4) & 1;
    c.avx512f = __builtin_cpu_supports("avx512f");
    c.avx512bw = __builtin_cpu_supports("avx512bw");
    c.avx512vl = __builtin_cpu_supports("avx512vl");
    c.avx512dq = __builtin_cpu_supports("avx512dq");
    c.avx512vnni = __builtin_cpu_supports("avx512vnni");
    c.avx512bf16 = __builtin_cpu_supports("avx512bf16");
    if (__get_cpuid_count(7, 0, &a, &b, &cx, &d)) c.avx512vbmi2 = (cx >> 6) & 1;
#elif defined(__aarch64__)
    c.neon = true;  // Advanced SIMD is part of every AArch64 CPU
#if defined(__linux__)
    // The kernel's hardware capability bits, as reported for this process.
    const unsigned long hw = getauxval(AT_HWCAP), hw2 = getauxval(AT_HWCAP2);
    c.dotprod = (hw & HWCAP_ASIMDDP) != 0;
    c.i8mm = (hw2 & HWCAP2_I8MM) != 0;
#endif
#endif
    return c;
  }();
  return f;
}

std::string CpuFeatures::describe() const {
  std::string s;
  auto add = [&](bool on, const char* name) {
    if (on) s += (s.empty() ? "" : " ") + std::string(name);
  };
  add(avx2, "AVX2");
  add(fma, "FMA");
  add(f16c, "F16C");
  add(avx512f, "AVX512F");
  add(avx512bw, "AVX512BW");
  add(avx512vl, "AVX512VL");
  add(avx512dq, "AVX512DQ");
  add(avx512vnni, "AVX512VNNI");
  add(avx512bf16, "AVX512BF16");
  add(avx512vbmi2, "AVX512VBMI2");
  add(avx_vnni, "AVXVNNI");
  add(neon, "NEON");
  add(dotprod, "DOTPROD");
  add(i8mm, "I8MM");
  return s.empty() ? "none" : s;
}

bool cpu_supports(CpuLevel level) {
  const CpuFeatures& c = cpu_features();
  switch (level) {
    case CpuLevel::Scalar: return true;
    case CpuLevel::Avx2: return c.avx2 && c.fma && c.f16c;
    case CpuLevel::Avx512:
      return cpu_supports(CpuLevel::Avx2) && c.avx512f && c.avx512bw && c.avx512vl && c.avx512dq && c.avx512vnni;
    case CpuLevel::Neon: return c.neon;
    case CpuLevel::NeonDot: return c.neon && c.dotprod;
    case CpuLevel::NeonI8mm: return c.neon && c.dotprod && c.i8mm;
  }
  return false;
}

CpuLevel best_cpu_level() {
  static const CpuLevel level = [] {
    const std::string& env = env_config().cpu_level;
    const std::vector<CpuLevel>& levels = all_cpu_levels();
    // The cap: the named level (an unknown or other-architecture name caps nothing).
    size_t cap = levels.size() - 1;
    for (size_t i = 0; i < levels.size(); ++i)
      if (env == cpu_level_name(levels[i])) cap = i;
    for (size_t i = cap + 1; i-- > 0;)
      if (cpu_supports(levels[i])) return levels[i];
    return CpuLevel::Scalar;
  }();
  return level;
}

}  // namespace tern::kernels
