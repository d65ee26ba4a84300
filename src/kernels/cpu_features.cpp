#include "kernels/cpu_features.h"

#include "core/config.h"

#include <cstdlib>
#include <cstring>

#if defined(__x86_64__) || defined(__i386__)
#include <cpuid.h>
#endif

namespace tern::kernels {

const char* cpu_level_name(CpuLevel level) {
  switch (level) {
    case CpuLevel::Scalar: return "scalar";
    case CpuLevel::Avx2: return "avx2";
    case CpuLevel::Avx512: return "avx512";
  }
  return "?";
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
  add(avx_vnni, "AVXVNNI");
  return s.empty() ? "none" : s;
}

bool cpu_supports(CpuLevel level) {
  const CpuFeatures& c = cpu_features();
  switch (level) {
    case CpuLevel::Scalar: return true;
    case CpuLevel::Avx2: return c.avx2 && c.fma && c.f16c;
    case CpuLevel::Avx512:
      return cpu_supports(CpuLevel::Avx2) && c.avx512f && c.avx512bw && c.avx512vl && c.avx512dq && c.avx512vnni;
  }
  return false;
}

CpuLevel best_cpu_level() {
  static const CpuLevel level = [] {
    CpuLevel cap = CpuLevel::Avx512;
    const std::string& env = env_config().cpu_level;
    if (env == "scalar") cap = CpuLevel::Scalar;
    else if (env == "avx2") cap = CpuLevel::Avx2;
    for (int l = static_cast<int>(cap); l > 0; --l)
      if (cpu_supports(static_cast<CpuLevel>(l))) return static_cast<CpuLevel>(l);
    return CpuLevel::Scalar;
  }();
  return level;
}

}  // namespace tern::kernels
