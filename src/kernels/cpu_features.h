// kernels/cpu_features.h — what the running CPU can execute, detected once.
#pragma once

#include <string>

namespace tern::kernels {

struct CpuFeatures {
  bool avx2 = false, fma = false, f16c = false;
  bool avx512f = false, avx512bw = false, avx512vl = false, avx512dq = false;
  bool avx512vnni = false, avx512bf16 = false, avx_vnni = false;
  std::string describe() const;  // e.g. "AVX2 FMA F16C AVX512F ... "
};

// Kernel families, lowest to highest. Avx512 means F+BW+VL+DQ+VNNI.
enum class CpuLevel { Scalar = 0, Avx2 = 1, Avx512 = 2 };
const char* cpu_level_name(CpuLevel level);

const CpuFeatures& cpu_features();
// The best level this CPU supports (TERN_CPU_LEVEL=scalar|avx2|avx512 caps it).
CpuLevel best_cpu_level();
bool cpu_supports(CpuLevel level);

}  // namespace tern::kernels
