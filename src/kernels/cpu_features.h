// kernels/cpu_features.h — what the running CPU can execute, detected once.
#pragma once

#include <string>
#include <vector>

namespace tern::kernels {

struct CpuFeatures {
  bool avx2 = false, fma = false, f16c = false;
  bool avx512f = false, avx512bw = false, avx512vl = false, avx512dq = false;
  bool avx512vnni = false, avx512bf16 = false, avx_vnni = false;
  bool avx512vbmi2 = false;  // vpexpandb: the Q8_0_S24 kernels (kernels/sparse24.h)
  // AArch64: Advanced SIMD (always there), SDOT/UDOT (Armv8.2 dotprod), SMMLA (Armv8.6 i8mm).
  bool neon = false, dotprod = false, i8mm = false;
  std::string describe() const;  // e.g. "AVX2 FMA F16C AVX512F ... "
};

// Kernel families. Scalar is every build's reference; each architecture's
// levels follow, lowest to highest, and a CPU of the other architecture
// supports none of them. Avx512 means F+BW+VL+DQ+VNNI; NeonDot adds SDOT to
// Neon, NeonI8mm adds SMMLA to NeonDot.
enum class CpuLevel { Scalar = 0, Avx2 = 1, Avx512 = 2, Neon = 3, NeonDot = 4, NeonI8mm = 5 };
const char* cpu_level_name(CpuLevel level);
// The levels this build has kernels for, Scalar first (tests iterate them).
const std::vector<CpuLevel>& all_cpu_levels();

const CpuFeatures& cpu_features();
// The best level this CPU supports (TERN_CPU_LEVEL caps it: scalar, avx2,
// avx512 on x86; scalar, neon, dotprod, i8mm on ARM).
CpuLevel best_cpu_level();
bool cpu_supports(CpuLevel level);

}  // namespace tern::kernels
